/* faid_reduce: pixel preprocessing and CSR integration as plain C (the reference every OpenCL
 * kernel is compared with, and the "ref" device of faidctl/faid). Semantics follow pyFAI's
 * corrections and integrate_ng (algorithms.md §4, §7): float64 accumulation per bin.
 *
 * Preprocessing turns a raw frame into per-pixel (signal, variance, norm, count):
 *   signal = raw - dark; variance = max(raw, 1) (poisson) ; norm = normalization_factor * flat *
 *   solid_angle * polarization; masked / dummy / NaN / zero-norm pixels contribute nothing.
 * Integration gives per bin: I = sum(c*signal)/sum(c*norm), sigma (standard error of the mean),
 * std (per-pixel standard deviation), count, sum_signal, sum_norm, sum_variance, sum_norm_sq.
 * Bins without weight get `empty`; with error model none sigma and std are `empty` everywhere
 * (pyFAI's sem/std). 2D profiles are stored bin = i_rad * nazim + i_azim (the CSR order); the
 * user-facing (npt_azim, npt_rad) array is its transpose. Details: docs/integration.md. */
#ifndef FAID_REDUCE_H
#define FAID_REDUCE_H

#include "faid_csr.h"
#include "faid_dtype.h"
#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { FAID_EM_NONE = 0, FAID_EM_POISSON, FAID_EM_AZIMUTHAL } faid_error_model;

/* The names, indexed by faid_error_model and NULL-terminated (the option table's choices); parse
 * also takes pyFAI's "no", "" and "poissonian". */
extern const char *const faid_error_model_names[];
int faid_error_model_parse(const char *name, faid_error_model *out);
const char *faid_error_model_name(faid_error_model m);

/* Everything per pixel that does not change from frame to frame. Arrays are npix long or NULL
 * (= not applied). */
typedef struct faid_corrections {
    size_t npix;
    const uint8_t *mask; /* non-zero = masked */
    const float *dark;
    const float *flat;
    const float *solid_angle;
    const float *polarization;
    int do_dummy;
    float dummy, delta_dummy;
    float normalization_factor;
    faid_error_model error_model;
    float empty; /* value of I/sigma/std in bins without pixels (pyFAI: 0) */
} faid_corrections;

/* One integrated result, 1D (nazim == 0) or 2D (nbins = nrad * nazim, bin = i_rad*nazim+i_azim).
 * All arrays nbins long. */
typedef struct faid_profile {
    int32_t nbins, nrad, nazim;
    float *I, *sigma, *std, *count;
    float *sum_signal, *sum_norm, *sum_variance, *sum_norm_sq;
} faid_profile;

faid_profile *faid_profile_new(int32_t nrad, int32_t nazim);
void faid_profile_destroy(faid_profile **p);

/* Reference preprocessing: out4 receives npix x (signal, variance, norm, count) in float32. */
int faid_ref_preprocess(const faid_corrections *c, faid_dtype dtype, const void *raw, float *out4,
                        faid_diag *d);
/* Reference integration of preprocessed pixels over csr, float64 sums, into p. */
int faid_ref_integrate(const faid_csr *csr, const faid_corrections *c, const float *pre4,
                       faid_profile *p, faid_diag *d);

#endif
