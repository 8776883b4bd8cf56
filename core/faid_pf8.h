/* faid_pf8: peakfinder8 (Cheetah / OM / CrystFEL, algorithms.md §12, §13.1), plain C reference.
 * Input: the preprocessed frame; a pixel is usable when the geometry marks it valid (mask and
 * resolution window, OM's inclusive min_res <= r <= max_res) and preprocessing kept it (count !=
 * 0); its value is the preprocessed signal (raw - dark, in ADU, not normalised), the quantity OM
 * runs on, so adc_threshold keeps its meaning.
 *  1. radial statistics per integer radius bin rint(r): 5 iterations of mean and population std
 *     over the values inside (lthr, rthr); rthr = max(mean + minimum_snr * std, adc_threshold),
 *     lthr = mean - minimum_snr * std; empty bins: rthr = FLT_MAX, lthr = FLT_MIN (as OM);
 *  2. candidate peaks: 8-connected components, per panel, of the usable pixels above rthr, seeded
 *     at their first interior pixel in raster order (components without interior pixel are never
 *     seeded, as OM); pixels are visited in OM's flood-fill order;
 *  3. local background over the disc of radius 2R around the rounded first centroid, offsets
 *     [-2R, 2R-1] (OM's asymmetric range), usable below-threshold pixels;
 *  4. re-integration, raw-weighted centroid, SNR >= minimum_snr, maximum-above-background test,
 *     centroid inside the panel.
 * Peaks come in seed order (panel by panel, rows then columns) and the list keeps the first
 * `capacity` (max_num_peaks); n_found counts all. x/y = fast/slow centroid in pixel-index
 * coordinates; intensity = tot_i, sigma = local background std, snr, max_pixel = max_i,
 * npix, index = the seed pixel. Sums of the radial statistics are float64 in a fixed order
 * (FAID_PF8_LANES partial sums, then a halving tree) shared with the OpenCL kernel; the per-peak
 * arithmetic is float32 in OM's order. OM's stale-position grafting is not reproduced;
 * docs/peaks.md lists every decision. */
#ifndef FAID_PF8_H
#define FAID_PF8_H

#include "faid_peaks.h"

/* Lanes of the radial-statistics reduction (the kernel's work-group size). */
#ifndef FAID_PF8_LANES
#define FAID_PF8_LANES 64
#endif
#define FAID_PF8_ITERATIONS 5

/* The pixels of each integer-radius bin (usable or not, by pixel index), built once per setup. */
typedef struct faid_pf8_bins {
    int32_t nbins;   /* ceil(max radius_px) + 1 */
    int32_t *indptr; /* nbins + 1 */
    int32_t *indices;
    int32_t *bin_of; /* npix: rint(radius_px) */
    int32_t *pos_of; /* npix: the entry of each pixel in indices (the inverse permutation) */
} faid_pf8_bins;

faid_pf8_bins *faid_pf8_bins_new(const faid_peak_geom *g, faid_diag *d);
void faid_pf8_bins_destroy(faid_pf8_bins **b);

/* Radial statistics (step 1): roff and rthr per bin (nbins floats each). */
int faid_pf8_radial_ref(const faid_peak_geom *g, const faid_pf8_bins *b, const float *pre4,
                        const faid_peak_params *p, float *roff, float *rthr, faid_diag *d);

/* The whole finder (steps 1 to 4). */
int faid_pf8_ref(const faid_peak_geom *g, const faid_pf8_bins *b, const float *pre4,
                 const faid_peak_params *p, faid_peak_list *out, faid_diag *d);

#endif
