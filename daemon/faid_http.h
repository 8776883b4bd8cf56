/* faid_http: faid's HTTP server (http.endpoint, libmicrohttpd): the live dashboard at / (static
 * files embedded at build time from daemon/web/, state pushed as server-sent events on /events),
 * Prometheus metrics at /metrics (faid_metrics), the health check at /healthz and the REST
 * control API under /api/v1 (faid_rest.c, docs/control.md; bearer tokens from http.token_file,
 * HTTPS with http.tls_cert and http.tls_key).
 *
 * A peer cannot silence it (issue 19, point 5: 500 half-sent requests made /healthz fail): at
 * most FAID_HTTP_MAX_CONN connections; when a new one would pass FAID_HTTP_SOFT_CONN, the oldest
 * connection still sending its request header is shut (counted as shed header_wait), so a poll of
 * /healthz or /metrics always finds a place; a peer beyond localhost has at most
 * FAID_HTTP_PER_PEER connections; a request header must come within FAID_HTTP_HEADER_S seconds
 * of silence; libmicrohttpd's messages are rate-limited.
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

#define FAID_HTTP_MAX_CONN   256  /* libmicrohttpd's limit: threads, a 64 KiB stack each */
#define FAID_HTTP_SOFT_CONN  64   /* beyond this the oldest connection in its header is shed */
#define FAID_HTTP_PER_PEER   16   /* connections of one peer beyond localhost */
#define FAID_HTTP_HEADER_S   10   /* seconds of silence before a connection is closed */
#define FAID_HTTP_MAX_EVENTS 16   /* dashboards (event streams) open at once */
#define FAID_HTTP_MAX_POINTS 2000 /* longest array sent to a browser */

struct faid_server;
typedef struct faid_http faid_http;

typedef enum { FAID_HEALTH_STARTING = 0, FAID_HEALTH_READY, FAID_HEALTH_STOPPING } faid_health;

typedef struct faid_http_opts {
    const char *endpoint;   /* "host:port", "[v6]:port" */
    const char *token_file; /* "" or NULL: none (then endpoint must be a loopback address) */
    const char *tls_cert, *tls_key; /* both or neither */
} faid_http_opts;

/* Listens on o->endpoint; NULL with d set when it cannot (an address beyond localhost without a
 * token file, an unreadable or too open token or key file, a certificate GnuTLS refuses). */
faid_http *faid_http_new(const faid_http_opts *o, faid_diag *d);
/* Called (from an HTTP thread) after POST /api/v1/stop was answered: the main loop's stop. */
void faid_http_on_stop(faid_http *h, void (*fn)(void));
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
