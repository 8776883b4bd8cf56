/* faid_pick: the plain C reference of the pyFAI-style picker (faid_pick.h). The pixel value and
 * the decision are written once, as static inline functions of float32 arithmetic in the same
 * order as kernels/peaks/pick_pyfai.cl, so that both give the same bits (no contraction: the
 * build uses ISO C and the kernel FP_CONTRACT OFF). */
#include "faid_pick.h"

#include <math.h>

typedef struct pv {
    float v, s;
} pv;

static pv pixel_value(const faid_peak_geom *g, const float *pre4, const faid_background *bg,
                      float noise, int r, int c)
{
    pv out = {-1.0f, 0.0f};
    if (r < 0 || r >= g->rows || c < 0 || c >= g->cols)
        return out;
    size_t i = (size_t)r * (size_t)g->cols + (size_t)c;
    float background = INFINITY, uncert = 0.0f;
    float radius = g->radius[i];
    const int nb = g->nbins;
    if (isfinite(radius) && radius >= g->rad_min && radius < g->rad_max) {
        float step = g->radius1d[1] - g->radius1d[0];
        float pos = (radius - g->radius1d[0]) / step;
        pos = pos < 0.0f ? 0.0f : (pos > (float)(nb - 1) ? (float)(nb - 1) : pos);
        int k = (int)pos;
        if (k + 1 < nb) {
            float f = pos - (float)k;
            background = bg->mean[k] * (1.0f - f) + bg->mean[k + 1] * f;
            uncert = bg->std[k] * (1.0f - f) + bg->std[k + 1] * f;
        } else {
            background = bg->mean[nb - 1];
            uncert = bg->std[nb - 1];
        }
    }
    const float *q = pre4 + 4 * i;
    out.v = q[2] > 0.0f ? q[0] / q[2] - background : 0.0f;
    out.s = sqrtf(uncert * uncert + noise * noise);
    return out;
}

int faid_pick_ref(const faid_peak_geom *g, const float *pre4, const faid_background *bg,
                  const faid_peak_params *p, faid_peak_list *out, faid_diag *d)
{
    if (!g || !pre4 || !bg || !p || !out)
        return faid_fail(d, FAID_EINVAL, "pick: missing argument");
    if (bg->nbins != g->nbins || g->nbins < 2)
        return faid_fail(d, FAID_ESIZE, "pick: background has %d bins, geometry %d", bg->nbins,
                         g->nbins);
    faid_peak_list_clear(out);
    const float noise = (float)p->noise, cutoff = (float)p->cutoff_peak;
    const int hw = p->patch_size / 2;
    for (int r = 0; r < g->rows; r++) {
        for (int c = 0; c < g->cols; c++) {
            pv x = pixel_value(g, pre4, bg, noise, r, c);
            if (!(x.v > 0.0f && x.v >= cutoff * x.s))
                continue;
            int active = 0;
            float local_max = x.v, sum = 0.0f, sum_var = 0.0f, m0 = 0.0f, m1 = 0.0f;
            for (int i = -hw; i <= hw && active >= 0; i++) {
                for (int j = -hw; j <= hw; j++) {
                    pv y = pixel_value(g, pre4, bg, noise, r + i, c + j);
                    if (y.v > 0.0f) {
                        if (y.v >= cutoff * y.s)
                            active++;
                        local_max = fmaxf(local_max, y.v);
                        m0 += (float)i * y.v;
                        m1 += (float)j * y.v;
                        sum += y.v;
                        sum_var += y.s * y.s;
                    } else if (y.s <= 0.0f) {
                        active = -1;
                        break;
                    }
                }
            }
            if (x.v == local_max && active >= p->connected) {
                float sigma = sqrtf(sum_var);
                faid_peak_list_push(out, m1 / sum + (float)c, m0 / sum + (float)r, sum, sigma,
                                    sum / sigma, x.v, active, r * g->cols + c);
            }
        }
    }
    return 0;
}
