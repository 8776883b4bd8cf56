/* faid_http: faid's HTTP server (http.endpoint, libmicrohttpd): the live dashboard at / (static
 * files embedded at build time from daemon/web/, state pushed as server-sent events on /events),
 * Prometheus metrics at /metrics (faid_metrics) and the health check at /healthz.
 *
 * Threads: libmicrohttpd's listener and one thread per connection (at most FAID_HTTP_MAX_CONN),
 * never a pipeline thread. The pipeline's only contact is faid_http_offer, called by the
 * publisher after sending a result: under a try-lock held only for pointer swaps, it swaps the
 * slot's encoded result buffer with the snapshot's (no copy, no allocation in steady state), so
 * the latest result is always at hand and a slow browser cannot stall a frame. The dashboard state
 * (downsampled profile, average of the last http.average profiles taken, cake, counters) is rebuilt
 * from that snapshot and the atomic counters by the connection threads, at most every 100 ms, and
 * sent to each browser when it changed, at most 10 times a second; a new browser gets the current
 * state at once. Stopping ends every event stream within 100 ms. */
#ifndef FAID_HTTP_H
#define FAID_HTTP_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

#define FAID_HTTP_MAX_CONN   32
#define FAID_HTTP_MAX_POINTS 2000 /* longest array sent to a browser */

struct faid_server;
typedef struct faid_http faid_http;

typedef enum { FAID_HEALTH_STARTING = 0, FAID_HEALTH_READY, FAID_HEALTH_STOPPING } faid_health;

/* Listens on endpoint ("host:port", "[v6]:port"); NULL with d set when it cannot. */
faid_http *faid_http_new(const char *endpoint, faid_diag *d);
/* Gives the server whose state is served (after faid_server_new); NULL detaches it. */
void faid_http_attach(faid_http *h, struct faid_server *s);
void faid_http_set_health(faid_http *h, faid_health state);
/* Publisher thread: the result body just sent, in the slot's buffer *buf of capacity *cap; the
 * buffers are swapped (never waits; see above), so *buf and *cap change. A hit (is_hit) goes
 * to a snapshot of its own, so the peaks of the latest hit stay at hand. */
void faid_http_offer(faid_http *h, uint8_t **buf, size_t *cap, size_t len, int is_hit);
/* Ends the event streams and stops the server (joins its threads). */
void faid_http_destroy(faid_http **h);

#endif
