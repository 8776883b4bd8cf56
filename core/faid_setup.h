/* faid_setup: the immutable "reduction setup": geometry, mask, CSR matrices and per-pixel
 * corrections derived from one configuration, with a version number. Built off the hot path
 * (start or reload), shared read-only by every worker, swapped between frames. */
#ifndef FAID_SETUP_H
#define FAID_SETUP_H

#include "faid_config.h"
#include "faid_csr.h"
#include "faid_reduce.h"

typedef struct faid_setup {
    uint64_t version;
    char config_hash[17];
    faid_config cfg;
    faid_geometry geom;
    int rows, cols;
    size_t npix;
    uint8_t *mask;         /* npix, non-zero = masked (preset gaps | user mask) */
    float *solid_angle;    /* npix or NULL */
    float *polarization;   /* npix or NULL */
    float *dark, *flat;    /* npix or NULL */
    faid_corrections corr; /* points into the arrays above */
    faid_csr *csr;         /* 1D radial */
    faid_csr *csr2d;       /* cake, or NULL */
    faid_csr *csr_bg;      /* sigma-clipped background (peaks.algorithm not none): 1D, no
                            * pixel splitting, the bins of csr (same npt and range), or NULL */
} faid_setup;

faid_setup *faid_setup_new(const faid_config *cfg, uint64_t version, faid_diag *d);
/* The same with a detector pixel mask (npix bytes, non-zero = bad; from a DECTRIS start message)
 * OR-ed into the configured mask before the matrices are built; NULL = none. The config hash
 * covers the resulting mask. */
faid_setup *faid_setup_new_masked(const faid_config *cfg, uint64_t version,
                                  const uint8_t *detector_mask, faid_diag *d);
void faid_setup_destroy(faid_setup **s);

/* The bad pixels of a configuration's detector of rows x cols pixels into mask (rows * cols
 * bytes; a byte set to 1 is bad, bytes already set stay set): the preset's module gaps where the
 * preset has that shape (a warning names both shapes where it does not), OR the detector.mask
 * file (non-zero or NaN = bad; a file of another shape is an error naming the key, the file and
 * both shapes). The setup's mask and the synthetic frames of faidctl replay and faid-bench
 * (faid_synth_for_config) come from here. */
int faid_config_bad_pixels(const faid_config *cfg, int rows, int cols, uint8_t *mask, faid_diag *d);

#endif
