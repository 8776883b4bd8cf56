/* faid_server: the daemon's lifecycle (faid_server.c): binds the sockets, builds the pools and
 * the first generation, starts the threads (writer, workers, publisher, ingest) and stops them in
 * order. The state it builds and the threads share is faid_state.h's. */
#ifndef FAID_SERVER_H
#define FAID_SERVER_H

#include "faid_state.h"

/* 1 when a ZeroMQ endpoint is reachable from this host only (ipc, inproc, tcp on 127.x,
 * localhost or [::1]); a socket bound elsewhere without CURVE is logged as a warning. */
int faid_endpoint_is_local(const char *endpoint);

/* Lifecycle (faid_server.c). new: sockets bound, pool and first generation built, no threads. */
faid_server *faid_server_new(const faid_config *cfg, const char *config_path, faid_diag *d);
int faid_server_start(faid_server *s, faid_diag *d);
/* Stops reading, drains every frame in flight through the pipeline, publishes end, joins. */
void faid_server_shutdown(faid_server *s);
void faid_server_destroy(faid_server **s);

#endif
