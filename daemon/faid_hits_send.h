/* faid_hits_send: the hits channel (hits.endpoint). A worker that finds a hit sends it as one
 * single-frame msgpack map on the hits PUB socket (shared by the workers under a mutex, never
 * waiting: a consumer that is behind loses hits, counted in hits_dropped), in the layout
 * CrystFEL's `indexamajig --zmq-input` and OM-era msgpack tools read (formats.md §5.5, PROTOCOL.md
 * "hits"): `peak_list` {fs, ss, intensity, num_pixels, max_pixel_intensity, snr as float
 * arrays, num_peaks}, `beam_energy` (eV), `detector_distance` (mm), ids and, per hits.mode,
 * `detector_data` (the decoded frame as float32, masked pixels NaN, a msgpack-numpy array) or
 * the peaks' patches and the background profile. The frame is decoded again on the CPU from
 * the slot's payload (hits are a fraction of the frames). The same message answers a `next`
 * request on hits.request_endpoint (faid_hits_service). */
#ifndef FAID_HITS_SEND_H
#define FAID_HITS_SEND_H

#include "faid_server.h"

/* Reads the requests waiting on hits.request_endpoint (ROUTER, OM's request socket), at most
 * FAID_HITS_READ_BUDGET per call so that a flood of requests cannot hold the publisher (which
 * calls it each pass) away from the results: `next` waits for the next hit, which goes to the
 * oldest waiting requester still connected, as one frame (one waiting entry per identity; with
 * FAID_HITS_WAITING waiting, the oldest is answered What? to make room); `resetplots` clears the
 * aggregates (Ok, a cost that does not grow with the detector: faid_aggr_reset); anything else is
 * answered What?. Returns 1 when requests may be left (call again soon), 0 once none is. */
int faid_hits_service(faid_server *s);

/* Sends the hit of slot (its result r, computed with generation g); errors are logged and
 * counted, never fatal. Call before the slot's payload is released. */
void faid_hits_send(faid_worker *wk, const faid_slot *slot, const faid_gen *g,
                    const faid_result *r);

#endif
