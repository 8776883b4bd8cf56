/* faid_reduce_ref: the plain C reference of pixel preprocessing and CSR integration (the "ref"
 * device, and what every OpenCL kernel is compared with). It follows pyFAI's Cython path
 * (preproc + CsrIntegrator.integrate_ng) step by step:
 *  - preprocessing in float32, in pyFAI's order of operations (raw -> float32, Poisson variance
 *    max(raw, 1) taken before the dark subtraction, norm = normalization_factor * flat *
 *    polarization * solid_angle), invalid pixels (NaN/Inf raw, masked, dummy, dummy flat,
 *    non-finite or zero norm) become an all-zero row;
 *  - integration sequential per bin in float64, outputs rounded to float32 at the end.
 * docs/integration.md lists the semantics and where faid deliberately differs. */
#include "faid_reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const faid_error_model_names[] = {"none", "poisson", "azimuthal", NULL};

int faid_error_model_parse(const char *name, faid_error_model *out)
{
    if (!name || !out)
        return FAID_EINVAL;
    for (int i = 0; faid_error_model_names[i]; i++)
        if (!strcmp(name, faid_error_model_names[i])) {
            *out = (faid_error_model)i;
            return 0;
        }
    /* pyFAI's other spellings */
    if (!strcmp(name, "no") || !name[0])
        *out = FAID_EM_NONE;
    else if (!strcmp(name, "poissonian"))
        *out = FAID_EM_POISSON;
    else
        return FAID_EINVAL;
    return 0;
}

const char *faid_error_model_name(faid_error_model m)
{
    return (int)m >= 0 && m <= FAID_EM_AZIMUTHAL ? faid_error_model_names[m] : "?";
}

faid_profile *faid_profile_new(int32_t nrad, int32_t nazim)
{
    if (nrad < 1 || nazim < 0 || (int64_t)nrad * (nazim ? nazim : 1) > INT32_MAX / 8)
        return NULL;
    faid_profile *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->nrad = nrad;
    p->nazim = nazim;
    p->nbins = nrad * (nazim ? nazim : 1);
    float **arrays[] = {&p->I,          &p->sigma,    &p->std,          &p->count,
                        &p->sum_signal, &p->sum_norm, &p->sum_variance, &p->sum_norm_sq};
    for (size_t k = 0; k < sizeof(arrays) / sizeof(arrays[0]); k++) {
        *arrays[k] = calloc((size_t)p->nbins, sizeof(float));
        if (!*arrays[k]) {
            faid_profile_destroy(&p);
            return NULL;
        }
    }
    return p;
}

void faid_profile_destroy(faid_profile **pp)
{
    if (!pp || !*pp)
        return;
    faid_profile *p = *pp;
    free(p->I);
    free(p->sigma);
    free(p->std);
    free(p->count);
    free(p->sum_signal);
    free(p->sum_norm);
    free(p->sum_variance);
    free(p->sum_norm_sq);
    free(p);
    *pp = NULL;
}

/* pyFAI's dummy test: with delta_dummy 0 an exact comparison, else a tolerance. */
static int is_dummy(float v, float dummy, float delta)
{
    return delta == 0.0f ? v == dummy : fabsf(v - dummy) <= delta;
}

static float raw_at(faid_dtype t, const void *raw, size_t i)
{
    switch (t) {
    case FAID_DT_U8:
        return (float)((const uint8_t *)raw)[i];
    case FAID_DT_U16:
        return (float)((const uint16_t *)raw)[i];
    case FAID_DT_U32:
        return (float)((const uint32_t *)raw)[i];
    case FAID_DT_I8:
        return (float)((const int8_t *)raw)[i];
    case FAID_DT_I16:
        return (float)((const int16_t *)raw)[i];
    case FAID_DT_I32:
        return (float)((const int32_t *)raw)[i];
    case FAID_DT_F32:
        return ((const float *)raw)[i];
    case FAID_DT_F64:
        return (float)((const double *)raw)[i];
    case FAID_DT_U64:
        return (float)((const uint64_t *)raw)[i];
    case FAID_DT_I64:
        return (float)((const int64_t *)raw)[i];
    default:
        return NAN;
    }
}

int faid_ref_preprocess(const faid_corrections *c, faid_dtype dtype, const void *raw, float *out4,
                        faid_diag *d)
{
    if (!c || !raw || !out4)
        return faid_fail(d, FAID_EINVAL, "preprocess: missing argument");
    if (dtype == FAID_DT_INVALID || dtype == FAID_DT_BOOL)
        return faid_fail(d, FAID_EDTYPE, "preprocess: unsupported frame type %s",
                         faid_dtype_name(dtype));
    const int poisson = c->error_model == FAID_EM_POISSON;
    /* Without a dummy pyFAI still rejects a flat equal to its placeholder dummy 0. */
    const float dummy = c->do_dummy ? c->dummy : 0.0f;
    const float ddummy = c->do_dummy ? c->delta_dummy : 0.0f;
    for (size_t i = 0; i < c->npix; i++) {
        float num = raw_at(dtype, raw, i);
        float den = c->normalization_factor;
        float var = poisson ? (num > 1.0f ? num : 1.0f) : 0.0f;
        int valid = isfinite(num);
        if (valid && c->mask)
            valid = c->mask[i] == 0;
        if (valid && c->do_dummy)
            valid = !is_dummy(num, dummy, ddummy);
        float flat = c->flat ? c->flat[i] : 1.0f;
        if (valid && c->flat)
            valid = !is_dummy(flat, dummy, ddummy);
        float cnt = 0.0f;
        if (valid) {
            if (c->dark)
                num -= c->dark[i];
            if (c->flat)
                den *= flat;
            if (c->polarization)
                den *= c->polarization[i];
            if (c->solid_angle)
                den *= c->solid_angle[i];
            if (isfinite(num) && isfinite(den) && isfinite(var) && den != 0.0f)
                cnt = 1.0f;
        }
        float *o = out4 + 4 * i;
        if (cnt != 0.0f) {
            o[0] = num;
            o[1] = var;
            o[2] = den;
            o[3] = 1.0f;
        } else {
            o[0] = o[1] = o[2] = o[3] = 0.0f;
        }
    }
    return 0;
}

int faid_ref_integrate(const faid_csr *csr, const faid_corrections *c, const float *pre4,
                       faid_profile *p, faid_diag *d)
{
    if (!csr || !c || !pre4 || !p)
        return faid_fail(d, FAID_EINVAL, "integrate: missing argument");
    if (p->nbins != csr->nbins)
        return faid_fail(d, FAID_ESIZE, "integrate: profile has %d bins, matrix %d", p->nbins,
                         csr->nbins);
    if (c->npix != (size_t)csr->npix)
        return faid_fail(d, FAID_ESIZE, "integrate: corrections for %zu pixels, matrix for %d",
                         c->npix, csr->npix);
    const int azimuthal = c->error_model == FAID_EM_AZIMUTHAL;
    const int do_variance = c->error_model != FAID_EM_NONE;
    const float empty = c->empty;
    for (int32_t b = 0; b < csr->nbins; b++) {
        double s = 0.0, vv = 0.0, n = 0.0, n2 = 0.0, cnt = 0.0;
        for (int32_t k = csr->indptr[b]; k < csr->indptr[b + 1]; k++) {
            double coef = csr->data ? (double)csr->data[k] : 1.0;
            if (coef == 0.0)
                continue;
            const float *q = pre4 + 4 * (size_t)csr->indices[k];
            double sig = q[0], var = q[1], norm = q[2], count = q[3];
            cnt += coef * count;
            if (azimuthal) {
                /* Invalid pixels are all-zero rows; pyFAI would add 0*NaN here for a zero
                 * norm once the bin holds a pixel: faid skips them instead (no NaN). */
                if (count == 0.0)
                    continue;
                if (n2 <= 0.0) {
                    s = coef * sig;
                    n = coef * norm;
                    n2 = n * n;
                } else {
                    /* Weighted incremental variance: VV += w^2 (x - mean_before)(x - mean_after).
                     */
                    double wb = coef * norm;
                    double omega_a = n;
                    n = omega_a + wb;
                    n2 = n2 + wb * wb;
                    double x = sig / norm;
                    double delta1 = s / omega_a - x;
                    s = s + coef * sig;
                    double delta2 = s / n - x;
                    vv = vv + wb * wb * delta1 * delta2;
                }
            } else {
                s += coef * sig;
                if (do_variance)
                    vv += coef * coef * var;
                double w = coef * norm;
                n += w;
                n2 += w * w;
            }
        }
        p->sum_signal[b] = (float)s;
        p->sum_variance[b] = (float)vv;
        p->sum_norm[b] = (float)n;
        p->sum_norm_sq[b] = (float)n2;
        p->count[b] = (float)cnt;
        if (n2 > 0.0) {
            p->I[b] = (float)(s / n);
            if (do_variance) {
                p->std[b] = (float)sqrt(vv / n2);
                p->sigma[b] = (float)(sqrt(vv) / n);
            } else {
                p->std[b] = p->sigma[b] = empty;
            }
        } else {
            p->I[b] = p->std[b] = p->sigma[b] = empty;
        }
    }
    return 0;
}
