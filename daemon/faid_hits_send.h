/* faid_hits_send: the hits channel (hits.endpoint). A worker that finds a hit sends it as one
 * single-frame msgpack map on the hits PUB socket (shared by the workers under a mutex, never
 * waiting: a consumer that is behind loses hits, counted in hits_dropped), in the layout
 * CrystFEL's `indexamajig --zmq-input` and OM-era msgpack tools read (formats.md §5.5, PROTOCOL.md
 * "hits"): `peak_list` {fs, ss, intensity, num_pixels, max_pixel_intensity, snr as float
 * arrays, num_peaks}, `beam_energy` (eV), `detector_distance` (mm), ids and, per hits.mode,
 * `detector_data` (the decoded frame as float32, masked pixels NaN, a msgpack-numpy array) or
 * the peaks' patches and the background profile. The frame is decoded again on the CPU from
 * the slot's payload (hits are a fraction of the frames). The same message answers a `next`
 * request on hits.request_endpoint (faid_hits_service).
 *
 * A service of its own: it holds the requesters waiting, the mutex the workers and the
 * publisher share and each worker's buffers; the server binds and closes its two sockets and
 * lends them. The workers call faid_hits_send, the publisher faid_hits_service; neither reaches
 * into the other's state. */
#ifndef FAID_HITS_SEND_H
#define FAID_HITS_SEND_H

#include "faid_aggregates.h"
#include "faid_engine.h"
#include "faid_gen.h"
#include "faid_pool.h"
#include "faid_stats.h"

#define FAID_HITS_WAITING 64 /* `next` requesters held at once (older ones are answered first) */
/* Requests read from hits.request_endpoint per call of faid_hits_service: the publisher reads
 * that many between two results at most. Reading until the socket was empty let requesters
 * sending flat out hold the publisher: a PUB subscriber got 17 of 100 results in 120 s under
 * 64 DEALERs sending `next` flat out (test_hardening_hits.py; now 100 of 100 in 3 s), 0 of 4,500
 * in the probe of issue 20. */
#define FAID_HITS_READ_BUDGET 64

typedef struct faid_hitsend faid_hitsend;

/* The service over the hits PUB socket pub and the request ROUTER rep (either may be NULL; both
 * stay the caller's, to close after the last worker and the publisher have stopped), counting
 * into stats and clearing aggr on `resetplots`. NULL when out of memory. */
faid_hitsend *faid_hitsend_new(void *pub, void *rep, faid_stats *stats, faid_aggr *aggr);
void faid_hitsend_destroy(faid_hitsend **h);

/* Reads the requests waiting on hits.request_endpoint (ROUTER, OM's request socket), at most
 * FAID_HITS_READ_BUDGET per call so that a flood of requests cannot hold the publisher (which
 * calls it each pass) away from the results: `next` waits for the next hit, which goes to the
 * oldest waiting requester still connected, as one frame (one waiting entry per identity; with
 * FAID_HITS_WAITING waiting, the oldest is answered What? to make room); `resetplots` clears the
 * aggregates (Ok, a cost that does not grow with the detector: faid_aggr_reset); anything else is
 * answered What?. Returns 1 when requests may be left (call again soon), 0 once none is (and
 * always without a request socket, h NULL included). */
int faid_hits_service(faid_hitsend *h);

/* Sends the hit of slot (its result r, computed with generation g); errors are logged and
 * counted, never fatal. Call before the slot's payload is released; worker is the caller's
 * index (its buffers). */
void faid_hits_send(faid_hitsend *h, int worker, const faid_slot *slot, const faid_gen *g,
                    const faid_result *r);

#endif
