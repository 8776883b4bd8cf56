/* faid_ingest: the ingest threads, one per input socket (input.endpoint).
 *
 * Each reads its PULL socket, validates and decodes the message (proto/faid_input.h), takes a
 * slot from the pool (faid_pool.h), parses a compressed payload's block table, and queues the
 * frame to the workers (policy block / drop_oldest / drop_newest); series starts and ends go to
 * the publisher as events. The series tracker is shared by the threads under one mutex. Ingest
 * uses the server's shared state, the pools and the generations (faid_gen.h); the lifecycle
 * (faid_server.c) only starts and joins it through this header. */
#ifndef FAID_INGEST_H
#define FAID_INGEST_H

#include "faid_err.h"

typedef struct faid_server faid_server;

/* Threads. The ingest threads, one per input socket (faid_ingest.c): started with their shared
 * series tracker; join waits for every one of them (after stop_ingest), then closes the open
 * series (shutdown) and queues its end. running: 1 while any was started and not joined. */
typedef struct faid_ingest_set faid_ingest_set;
int faid_ingest_start(faid_server *s, faid_diag *d);
void faid_ingest_join(faid_server *s);
int faid_ingest_running(const faid_server *s);

#endif
