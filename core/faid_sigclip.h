/* faid_sigclip: the sigma-clipped background per radial bin, plain C reference (float64), with
 * the semantics of pyFAI's CsrIntegrator.sigma_clip (sigma_clip_ng, algorithms.md §8):
 *  - a first integration of the bin (azimuthal error model, or Poisson for `poisson` and for
 *    `hybrid` with 0 cycles) gives the mean and the per-pixel std;
 *  - each cycle clips every kept pixel with |I/norm - mean| > k * std, k = max(cutoff_clip,
 *    sqrt(2 ln(N / sqrt(2 pi)))) (Chauvenet's criterion; N = max(3, pixels kept)), then
 *    integrates again; it stops when a cycle clips nothing (hybrid: after one more Poisson
 *    integration); `hybrid` clips with the azimuthal model and reports with Poisson (the last
 *    cycle integrates with Poisson);
 *  - outputs per bin: mean, std, sem = sqrt(VV) / sum(norm), count of pixels kept; bins without
 *    pixels get `empty`.
 * Clipped pixels are flagged in a per-pixel byte map instead of marking the preprocessed buffer
 * (which other stages share). The matrix must not split pixels (a pixel in one bin only).
 * pre4 is the preprocessed frame (signal, variance, norm, count) of faid_ref_preprocess; the
 * poisson and hybrid models read its variance (preprocess with the Poisson error model). */
#ifndef FAID_SIGCLIP_H
#define FAID_SIGCLIP_H

#include "faid_csr.h"
#include "faid_peaks.h"

#include <stdint.h>

/* clipped: csr->npix bytes of scratch (set to 1 for clipped pixels), or NULL. */
int faid_sigclip_ref(const faid_csr *csr, const float *pre4, const faid_peak_params *p, float empty,
                     faid_background *bg, uint8_t *clipped, faid_diag *d);

#endif
