/* faid_aggregates: what the daemon accumulates over frames while peaks.algorithm is not none,
 * published periodically on the `aggregates` topic and cleared by the control command `reset`:
 * frames and hits counted, the rolling hit rate over peaks.hit_rate_window frames (faid_hits)
 * and its history (one entry per publication), a histogram of num_peaks per frame and a virtual
 * powder pattern (the count of peaks whose centroid fell in each pixel).
 *
 * Workers add their results (any thread, a mutex); the publisher encodes a snapshot. The pattern
 * is sized from the setup and re-made (cleared) when a reload changes the shape or the window. */
#ifndef FAID_AGGREGATES_H
#define FAID_AGGREGATES_H

#include "faid_engine.h"
#include "faid_proto.h"
#include "faid_setup.h"

#define FAID_AGGR_HISTORY 256 /* hit-rate history entries kept */
#define FAID_AGGR_NBINS   64  /* num_peaks histogram bins (the last one open-ended) */

typedef struct faid_aggr faid_aggr;

faid_aggr *faid_aggr_new(void);
void faid_aggr_destroy(faid_aggr **a);
/* Adds one frame's result (a no-op without peaks). FAID_ENOMEM when the pattern for a new shape
 * could not be made (the frame is then only counted). */
int faid_aggr_add(faid_aggr *a, const faid_setup *s, const faid_result *r);
/* The rolling hit rate over peaks.hit_rate_window frames (0 before any frame) and how many
 * frames it covers (for /metrics and the dashboard; holds the mutex for a few loads). */
double faid_aggr_hit_rate(faid_aggr *a, int *window_frames);
/* Forgets everything (control `reset`, `resetplots` of the hits request socket). Its cost follows
 * what was added since the last reset (the pattern's blocks that hold a count are cleared), not
 * the detector's size, so resets flat out neither hold the workers nor the publisher. */
void faid_aggr_reset(faid_aggr *a);
/* Encodes the `aggregates` message body (a complete map; monitoring only, so without
 * msg_number, like stats) into buf, growing it as needed, and appends the current hit rate to
 * the history; 0 and *len = 0 when nothing was ever added. */
int faid_aggr_encode(faid_aggr *a, uint8_t **buf, size_t *cap, size_t *len, faid_diag *d);
/* The same without adding to the history (GET /api/v1/aggregates: a reader changes nothing). */
int faid_aggr_encode_peek(faid_aggr *a, uint8_t **buf, size_t *cap, size_t *len, faid_diag *d);

#endif
