/* faid_whits: what the series writers (the daemon's writer thread and `faidctl process`) need
 * around the hits-file module (faid_nxmx.h) for `writer.hits`: the hits file of a series file
 * (`x.h5` -> `x_hits.h5`, with the CrystFEL geometry `x_hits.geom` next to it), opened from the
 * reduction setup with the frames' type and encoding as they arrive, and the peaks of a hit read
 * back from its published result message (the same bytes both writers feed the series file). */
#ifndef FAID_WHITS_H
#define FAID_WHITS_H

#include "faid_nxmx.h"
#include "faid_setup.h"

/* "dir/x.h5" -> "dir/x_hits.h5". FAID_ESIZE when it does not fit. */
int faid_whits_path(char *out, size_t cap, const char *series_path, faid_diag *d);

/* Creates the hits file `path` (exclusively) for frames of type dt arriving as enc, with the
 * setup's geometry, mask and peaks.max_num_peaks, then the CrystFEL geometry file next to it (a
 * geometry that cannot be written is reported in *geom_err, the hits file stays). */
int faid_whits_open(faid_nxmx **out, const char *path, const faid_setup *su, const char *series,
                    faid_dtype dt, faid_encoding enc, int swmr, faid_diag *geom_err, faid_diag *d);

/* The peaks of a result message (body as published) into l (capacity max_num_peaks: a longer
 * list is cut), its frame id and whether it is a hit. FAID_EFORMAT when it has no peaks. */
int faid_whits_peaks(const void *result, size_t len, faid_peak_list *l, uint64_t *frame_id,
                     int *is_hit, faid_diag *d);

#endif
