/* faid_pick: the pyFAI-style peak picker, plain C reference (algorithms.md §9, §10; pyFAI's
 * peakfinder kernel). Each pixel is compared with the sigma-clipped background interpolated
 * linearly at its radius: value = I/norm - bg, sigma = sqrt(std_bg^2 + noise^2) (pixels outside
 * [rad_min, rad_max) or masked in the radius map get -inf; pixels without weight 0; pixels
 * outside the image (-1, 0)). A pixel is a peak when value > 0, value >= cutoff_peak * sigma, it
 * is the maximum of its patch_size x patch_size patch (ties accepted, as pyFAI), at least
 * `connected` patch pixels pass the threshold and the patch does not cross the image border.
 * Intensity = sum of the positive values of the patch, sigma = sqrt(sum of their sigma^2),
 * centroid weighted by those values, snr = intensity / sigma, max_pixel = the centre's value,
 * npix = above-threshold pixels of the patch, index = the centre pixel.
 * All arithmetic is float32 in a fixed order, so the OpenCL kernel (kernels/peaks/pick_pyfai.cl)
 * gives bit-identical lists. Peaks come in pixel-index order; the list keeps the first
 * `capacity` of them and counts the rest in n_found. Decisions: docs/peaks.md. */
#ifndef FAID_PICK_H
#define FAID_PICK_H

#include "faid_peaks.h"

int faid_pick_ref(const faid_peak_geom *g, const float *pre4, const faid_background *bg,
                  const faid_peak_params *p, faid_peak_list *out, faid_diag *d);

#endif
