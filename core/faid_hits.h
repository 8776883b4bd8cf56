/* faid_hits: the per-frame hit decision and the rolling hit rate. A frame is a hit when its
 * number of accepted peaks (faid_peak_list.n_found) is at least min_peaks_for_hit and, when a
 * maximum is set, at most max_peaks_for_hit. The rolling rate is the fraction of hits among the
 * last `window` frames pushed (fewer while the window fills up); totals count every frame since
 * the last reset. Not thread-safe: one owner (the publisher) pushes frames in the order it
 * publishes them. */
#ifndef FAID_HITS_H
#define FAID_HITS_H

#include "faid_peaks.h"

#include <stdint.h>

int faid_hits_is_hit(const faid_peak_params *p, int32_t num_peaks);

typedef struct faid_hits faid_hits;

/* window >= 1; NULL on failure. */
faid_hits *faid_hits_new(int window);
void faid_hits_destroy(faid_hits **h);
/* Records one frame's decision (0/1). */
void faid_hits_push(faid_hits *h, int is_hit);
/* Hit fraction over the frames in the window (0 when none was pushed). */
double faid_hits_rate(const faid_hits *h);
/* Frames currently in the window (<= window). */
int faid_hits_window_frames(const faid_hits *h);
uint64_t faid_hits_total_frames(const faid_hits *h);
uint64_t faid_hits_total_hits(const faid_hits *h);
/* Forgets every frame (control command `reset`). */
void faid_hits_reset(faid_hits *h);

#endif
