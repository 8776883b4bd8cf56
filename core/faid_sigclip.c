/* faid_sigclip: the plain C reference of the sigma-clipped background (faid_sigclip.h). Every sum
 * runs sequentially per bin in float64, in CSR order, as pyFAI's Cython sigma_clip does, so the
 * two agree to rounding; the OpenCL kernel (kernels/peaks/sigma_clip.cl) is compared with it. */
#include "faid_sigclip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct acc {
    double s, vv, n, n2, cnt;
} acc;

static int pixel_ok(const float *q)
{
    return isfinite(q[0]) && isfinite(q[1]) && isfinite(q[2]) && q[2] != 0.0f && q[3] != 0.0f;
}

/* One integration of bin b over the kept pixels with the azimuthal (weighted incremental) or
 * the Poisson (propagated) variance. */
static acc integrate_bin(const faid_csr *csr, int32_t b, const float *pre4, const uint8_t *clip,
                         int azimuthal)
{
    acc a = {0, 0, 0, 0, 0};
    for (int32_t k = csr->indptr[b]; k < csr->indptr[b + 1]; k++) {
        double c = csr->data ? (double)csr->data[k] : 1.0;
        int32_t idx = csr->indices[k];
        const float *q = pre4 + 4 * (size_t)idx;
        if (c == 0.0 || clip[idx] || !pixel_ok(q))
            continue;
        double sig = q[0], var = q[1], norm = q[2], count = q[3];
        double w = c * norm;
        if (azimuthal) {
            if (a.n == 0.0) {
                a.s = c * sig;
                a.n = w;
                a.n2 = w * w;
                a.cnt = c * count;
            } else {
                double omega_a = a.n;
                a.n = omega_a + w;
                a.n2 += w * w;
                double x = sig / norm;
                double delta1 = a.s / omega_a - x;
                a.s += c * sig;
                double delta2 = a.s / a.n - x;
                a.vv += w * w * delta1 * delta2;
                a.cnt += c * count;
            }
        } else {
            a.s += c * sig;
            a.vv += c * c * var;
            a.n += w;
            a.n2 += w * w;
            a.cnt += c * count;
        }
    }
    return a;
}

int faid_sigclip_ref(const faid_csr *csr, const float *pre4, const faid_peak_params *p, float empty,
                     faid_background *bg, uint8_t *clipped, faid_diag *d)
{
    if (!csr || !pre4 || !p || !bg)
        return faid_fail(d, FAID_EINVAL, "sigma clip: missing argument");
    if (bg->nbins != csr->nbins)
        return faid_fail(d, FAID_ESIZE, "sigma clip: background has %d bins, matrix %d", bg->nbins,
                         csr->nbins);
    uint8_t *own = NULL;
    if (!clipped) {
        own = malloc((size_t)csr->npix);
        if (!own)
            return faid_fail(d, FAID_ENOMEM, "sigma clip: %d pixel flags", csr->npix);
        clipped = own;
    }
    memset(clipped, 0, (size_t)csr->npix);
    const int model = (int)p->error_model;
    const int hybrid = model == FAID_CLIP_HYBRID;
    const int cycles = p->cycles;
    const double two_pi_sqrt = sqrt(2.0 * M_PI);
    for (int32_t b = 0; b < csr->nbins; b++) {
        int az = model == FAID_CLIP_AZIMUTHAL || (hybrid && cycles > 0);
        acc a = integrate_bin(csr, b, pre4, clipped, az);
        double aver = NAN, std = NAN;
        if (a.n2 > 0.0) {
            aver = a.s / a.n;
            std = sqrt(a.vv / a.n2);
        }
        for (int c = 0; c < cycles; c++) {
            if (a.n == 0.0 || a.cnt == 0.0)
                break;
            double nkept = a.cnt > 3.0 ? a.cnt : 3.0;
            double k = sqrt(2.0 * log(nkept / two_pi_sqrt));
            if (p->cutoff_clip > k)
                k = p->cutoff_clip;
            int removed = 0;
            for (int32_t e = csr->indptr[b]; e < csr->indptr[b + 1]; e++) {
                int32_t idx = csr->indices[e];
                const float *q = pre4 + 4 * (size_t)idx;
                if ((csr->data && csr->data[e] == 0.0f) || clipped[idx] || !pixel_ok(q))
                    continue;
                double x = (double)q[0] / (double)q[2];
                if (fabs(x - aver) > k * std) {
                    clipped[idx] = 1;
                    removed++;
                }
            }
            if (removed == 0 && !hybrid)
                break;
            int last = removed == 0 || c + 1 >= cycles;
            az = model == FAID_CLIP_AZIMUTHAL || (hybrid && !last);
            a = integrate_bin(csr, b, pre4, clipped, az);
            if (a.n2 > 0.0) {
                aver = a.s / a.n;
                std = sqrt(a.vv / a.n2);
            } else {
                aver = std = NAN;
            }
            if (removed == 0)
                break;
        }
        bg->count[b] = (float)a.cnt;
        if (a.n2 > 0.0) {
            bg->mean[b] = (float)aver;
            bg->std[b] = (float)std;
            bg->sem[b] = (float)(sqrt(a.vv) / a.n);
        } else {
            bg->mean[b] = bg->std[b] = bg->sem[b] = empty;
        }
    }
    free(own);
    return 0;
}
