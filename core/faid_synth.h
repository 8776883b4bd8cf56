/* faid_synth: realistic synthetic detector frames for a geometry, for the demo, the benchmark and
 * `faidctl replay`: Debye-Scherrer rings (Gaussian in q at a few positions spread over the
 * detector's q range, slightly textured in chi), Bragg spots (a few Gaussian blobs that move from
 * frame to frame), a smooth background falling with q, all scaled by the solid angle, then Poisson
 * noise from a fast counter-based PRNG, so that frame k is the same whatever order frames are made
 * in. Masked pixels (module gaps, user mask) take the detector's bad-pixel value: 2^N - 1 for
 * N-bit unsigned data (DECTRIS convention), -1 for signed integers, NaN for float32.
 *
 * The expected image (everything but spots and noise) is computed once by faid_synth_new; each
 * frame then costs one pass of random numbers. */
#ifndef FAID_SYNTH_H
#define FAID_SYNTH_H

#include "faid_config.h"
#include "faid_dtype.h"
#include "faid_err.h"
#include "faid_geometry.h"

#include <stddef.h>
#include <stdint.h>

#define FAID_SYNTH_MAX_RINGS 16

typedef struct faid_synth_params {
    uint64_t seed;
    double background;     /* counts per pixel at q = 0 (falls off with q) */
    double ring_amplitude; /* peak counts of the strongest ring */
    int nrings;            /* 0..FAID_SYNTH_MAX_RINGS; positions spread over the q range */
    double ring_width;     /* Gaussian sigma as a fraction of the detector's q range */
    int nspots;            /* Bragg spots per frame */
    double spot_amplitude; /* peak counts of the brightest spot */
    double spot_sigma;     /* spot width in pixels */
    int poisson;           /* 1 = Poisson noise, 0 = the expected values rounded */
} faid_synth_params;

/* Sensible defaults: 6 rings, 20 spots, background 20 counts, Poisson noise, seed 12345. */
void faid_synth_default_params(faid_synth_params *p);

typedef struct faid_synth faid_synth;

/* g: the geometry (rows, cols, pixel sizes set); mask: rows*cols, non-zero = bad (may be NULL). */
faid_synth *faid_synth_new(const faid_geometry *g, const uint8_t *mask, const faid_synth_params *p,
                           faid_diag *d);
void faid_synth_destroy(faid_synth **s);

/* Writes frame `index` as rows*cols elements of dtype (any frame dtype: uint8/16/32,
 * int8/16/32, float32) into out (out_len bytes, at least rows*cols*size). Counts saturate below
 * the bad-pixel value of the type. */
int faid_synth_frame(faid_synth *s, uint64_t index, faid_dtype dtype, void *out, size_t out_len,
                     faid_diag *d);

/* A generator for a configuration's detector: its geometry (cfg->rows x cfg->cols), its bad
 * pixels (faid_config_bad_pixels: the preset's module gaps and the detector.mask file), the
 * parameters p (NULL: faid_synth_default_params). NULL, d saying why, for a configuration
 * without a detector shape, a mask file that does not fit, or no memory. */
faid_synth *faid_synth_for_config(const faid_config *cfg, const faid_synth_params *p, faid_diag *d);

/* The bad-pixel value of a frame dtype as a double (NaN for float32). */
double faid_synth_bad_value(faid_dtype dtype);

#endif
