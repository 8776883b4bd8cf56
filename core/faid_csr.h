/* faid_csr: the sparse (CSR) integration matrix built on the CPU with pyFAI's semantics for pixel
 * splitting "no", "bbox" and "full", 1D (radial) and 2D (radial x azimuthal cake), radial and
 * azimuth ranges and the mask (algorithms.md §6). Built once per setup in float64; coefficients
 * stored as float32, indices int32. Bin b owns entries [indptr[b], indptr[b+1]); for 2D the bin
 * is i_rad * npt_azim + i_azim. */
#ifndef FAID_CSR_H
#define FAID_CSR_H

#include "faid_err.h"
#include "faid_geometry.h"

#include <stdint.h>

typedef enum { FAID_SPLIT_NO = 0, FAID_SPLIT_BBOX, FAID_SPLIT_FULL } faid_split;

/* The names, indexed by faid_split and NULL-terminated (the option table's choices); parse also
 * takes pyFAI's "none" and "pseudo". */
extern const char *const faid_split_names[];
int faid_split_parse(const char *name, faid_split *out);
const char *faid_split_name(faid_split s);

typedef struct faid_csr_params {
    faid_split split;
    faid_unit unit;
    int npt_rad;
    int npt_azim; /* 0 = 1D */
    int has_rad_range;
    double rad_range[2]; /* in unit */
    int has_azim_range;
    double azim_range[2]; /* degrees */
    int f64_corners;      /* 0 (default): corner positions rounded to float32 as pyFAI stores
                           * them; 1: keep float64 corners (not bit-compatible with pyFAI) */
} faid_csr_params;

typedef struct faid_csr {
    int32_t nbins; /* npt_rad (1D) or npt_rad * npt_azim (2D) */
    int32_t npt_rad, npt_azim;
    int64_t nnz;
    int32_t npix;            /* rows * cols of the frame the indices refer to */
    int32_t *indptr;         /* nbins + 1 */
    int32_t *indices;        /* nnz */
    float *data;             /* nnz coefficients; NULL when every coefficient is 1 (split "no") */
    double *rad_centers;     /* npt_rad bin centres in unit */
    double *azim_centers;    /* npt_azim bin centres in degrees (2D only) */
    double rad_min, rad_max; /* bin edges actually used, in unit */
    double azim_min, azim_max;
} faid_csr;

/* mask: rows*cols bytes, non-zero = masked (may be NULL). */
int faid_csr_build(const faid_geometry *g, const uint8_t *mask, const faid_csr_params *p,
                   faid_csr **out, faid_diag *d);
void faid_csr_destroy(faid_csr **csr);

/* Pixel positions in the unit's internal (unscaled) form as pyFAI integrates in it: q in nm^-1
 * for both q units, 2theta in radians, r in metres; chi in radians in [-pi, pi). Centres are
 * rows*cols values, corners (rows+1)*(cols+1) values, corner (i, j) at i*(cols+1)+j. Which arrays
 * are needed: rad_center for split no/bbox; chi_center for no/bbox in 2D or with an azimuth
 * range; rad_corner for bbox/full; chi_corner for full, and for bbox in 2D or with an azimuth
 * range. Others may be NULL. */
typedef struct faid_csr_positions {
    int rows, cols;
    const double *rad_center, *chi_center;
    const double *rad_corner, *chi_corner;
    int orientation; /* 1..4 as pyFAI (0 = 3): decides the sign of a pixel's area */
} faid_csr_positions;

/* The builder behind faid_csr_build, for callers that already hold positions (tests feed it
 * pyFAI's own arrays). p->unit only selects the scale of ranges and bin centres. */
int faid_csr_build_from_positions(const faid_csr_positions *pos, const uint8_t *mask,
                                  const faid_csr_params *p, faid_csr **out, faid_diag *d);

/* The unit pyFAI integrates in for u (e.g. 2th_rad for 2th_deg) and the factor from that
 * internal unit to u (180/pi, 0.1 for q_A^-1, 1000 for r_mm, else 1). */
faid_unit faid_unit_internal(faid_unit u, double *scale);

#endif
