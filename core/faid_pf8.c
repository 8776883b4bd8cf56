/* faid_pf8: the plain C reference of peakfinder8 (faid_pf8.h). The per-seed work is written as
 * one function (pf8_seed) that kernels/peaks/pf8_peaks.cl mirrors statement by statement: a pixel
 * is a seed when it is an interior above-threshold pixel and the bounded flood fill from it (in
 * OM's neighbour order) meets no earlier interior pixel of its component; the flood fill stops
 * as soon as the component has more than max_pixel_count pixels (such a component is rejected
 * anyway), so every seed costs at most max_pixel_count + 1 visited pixels. */
#include "faid_pf8.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

faid_pf8_bins *faid_pf8_bins_new(const faid_peak_geom *g, faid_diag *d)
{
    if (!g) {
        faid_fail(d, FAID_EINVAL, "peakfinder8: missing geometry");
        return NULL;
    }
    size_t n = (size_t)g->rows * (size_t)g->cols;
    float max_r = -1e9f;
    for (size_t i = 0; i < n; i++) {
        if (!(g->radius_px[i] >= 0.0f) || !(g->radius_px[i] < 1e7f)) {
            faid_fail(d, FAID_ERANGE, "peakfinder8: pixel %zu has radius %g px", i,
                      (double)g->radius_px[i]);
            return NULL;
        }
        if (g->radius_px[i] > max_r)
            max_r = g->radius_px[i];
    }
    faid_pf8_bins *b = calloc(1, sizeof(*b));
    if (!b) {
        faid_fail(d, FAID_ENOMEM, "peakfinder8: bins");
        return NULL;
    }
    b->nbins = (int32_t)ceilf(max_r) + 1;
    b->indptr = calloc((size_t)b->nbins + 1, sizeof(int32_t));
    b->indices = malloc(n * sizeof(int32_t));
    b->bin_of = malloc(n * sizeof(int32_t));
    b->pos_of = malloc(n * sizeof(int32_t));
    if (!b->indptr || !b->indices || !b->bin_of || !b->pos_of) {
        faid_pf8_bins_destroy(&b);
        faid_fail(d, FAID_ENOMEM, "peakfinder8: bins for %zu pixels", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        b->bin_of[i] = (int32_t)rintf(g->radius_px[i]);
        b->indptr[b->bin_of[i] + 1]++;
    }
    for (int32_t k = 0; k < b->nbins; k++)
        b->indptr[k + 1] += b->indptr[k];
    int32_t *fill = malloc((size_t)b->nbins * sizeof(int32_t));
    if (!fill) {
        faid_pf8_bins_destroy(&b);
        faid_fail(d, FAID_ENOMEM, "peakfinder8: bins");
        return NULL;
    }
    memcpy(fill, b->indptr, (size_t)b->nbins * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        b->pos_of[i] = fill[b->bin_of[i]]++;
        b->indices[b->pos_of[i]] = (int32_t)i;
    }
    free(fill);
    return b;
}

void faid_pf8_bins_destroy(faid_pf8_bins **bp)
{
    if (!bp || !*bp)
        return;
    free((*bp)->indptr);
    free((*bp)->indices);
    free((*bp)->bin_of);
    free((*bp)->pos_of);
    free(*bp);
    *bp = NULL;
}

static int usable(const faid_peak_geom *g, const float *pre4, int32_t i)
{
    return g->valid[i] && pre4[4 * (size_t)i + 3] != 0.0f;
}

int faid_pf8_radial_ref(const faid_peak_geom *g, const faid_pf8_bins *b, const float *pre4,
                        const faid_peak_params *p, float *roff, float *rthr, faid_diag *d)
{
    if (!g || !b || !pre4 || !p || !roff || !rthr)
        return faid_fail(d, FAID_EINVAL, "peakfinder8: missing argument");
    const float snr = (float)p->minimum_snr, adc = (float)p->adc_threshold;
    for (int32_t bin = 0; bin < b->nbins; bin++) {
        float hi = 1e9f, lo = -1e9f, off = 0.0f;
        for (int it = 0; it < FAID_PF8_ITERATIONS; it++) {
            double s[FAID_PF8_LANES], s2[FAID_PF8_LANES];
            int cnt[FAID_PF8_LANES];
            for (int l = 0; l < FAID_PF8_LANES; l++) {
                s[l] = s2[l] = 0.0;
                cnt[l] = 0;
            }
            int32_t k0 = b->indptr[bin], k1 = b->indptr[bin + 1];
            for (int32_t k = k0; k < k1; k++) {
                int32_t i = b->indices[k];
                int l = (int)((k - k0) % FAID_PF8_LANES);
                float v = pre4[4 * (size_t)i];
                if (usable(g, pre4, i) && v < hi && v > lo) {
                    s[l] += (double)v;
                    s2[l] += (double)v * (double)v;
                    cnt[l]++;
                }
            }
            for (int w = FAID_PF8_LANES / 2; w > 0; w >>= 1)
                for (int l = 0; l < w; l++) {
                    s[l] += s[l + w];
                    s2[l] += s2[l + w];
                    cnt[l] += cnt[l + w];
                }
            if (cnt[0] == 0) {
                off = 0.0f;
                hi = FLT_MAX;
                lo = FLT_MIN;
            } else {
                double mean = s[0] / cnt[0];
                double var = s2[0] / cnt[0] - mean * mean;
                double sig = var > 0.0 ? sqrt(var) : 0.0;
                off = (float)mean;
                hi = (float)(mean + snr * sig);
                lo = (float)(mean - snr * sig);
                if (hi < adc)
                    hi = adc;
            }
        }
        roff[bin] = off;
        rthr[bin] = hi;
    }
    return 0;
}

/* OM's flood-fill neighbour order (fs, ss offsets), the pixel itself excluded. */
static const int nb_fs[8] = {-1, 0, 1, -1, 1, -1, 0, 1};
static const int nb_ss[8] = {-1, -1, -1, 0, 0, 1, 1, 1};

typedef struct pf8_rec {
    float x, y, intensity, sigma, snr, max_pixel;
    int32_t npix;
} pf8_rec;

/* Evaluates the candidate seed at panel-local (ss, fs) of panel (pss, pfs). Returns 1 and fills
 * rec for an accepted peak. queue: max_pixel_count + 1 ints. */
static int pf8_seed(const faid_peak_geom *g, const int32_t *bin_of, const float *pre4,
                    const float *roff, const float *rthr, const faid_peak_params *p, int pss,
                    int pfs, int ss, int fs, int32_t *queue, pf8_rec *rec)
{
    const int W = g->cols, PR = g->panel_rows, PC = g->panel_cols;
    const int ss0 = pss * PR, fs0 = pfs * PC;
    const int maxpix = p->max_pixel_count;
#define PIX(lss, lfs)      ((int32_t)((ss0 + (lss)) * W + fs0 + (lfs)))
#define ABOVE(i)           (usable(g, pre4, (i)) && pre4[4 * (size_t)(i)] > rthr[bin_of[(i)]])
#define INTERIOR(lss, lfs) ((lss) >= 1 && (lss) <= PR - 2 && (lfs) >= 1 && (lfs) <= PC - 2)
    if (!INTERIOR(ss, fs))
        return 0;
    const int32_t me = PIX(ss, fs);
    if (!ABOVE(me))
        return 0;
    /* An earlier interior above-threshold neighbour belongs to the same component. */
    for (int k = 0; k < 4; k++) {
        int nss = ss + nb_ss[k], nfs = fs + nb_fs[k];
        if (INTERIOR(nss, nfs) && ABOVE(PIX(nss, nfs)))
            return 0;
    }
    int n = 1, head = 0;
    queue[0] = me;
    while (head < n) {
        int32_t cur = queue[head++];
        int css = cur / W - ss0, cfs = cur % W - fs0;
        for (int k = 0; k < 8; k++) {
            int nss = css + nb_ss[k], nfs = cfs + nb_fs[k];
            if (nss < 0 || nss >= PR || nfs < 0 || nfs >= PC)
                continue;
            int32_t q = PIX(nss, nfs);
            if (!ABOVE(q))
                continue;
            int seen = 0;
            for (int m = 0; m < n && !seen; m++)
                seen = queue[m] == q;
            if (seen)
                continue;
            if (INTERIOR(nss, nfs) && q < me)
                return 0;
            if (n == maxpix)
                return 0; /* more than max_pixel_count pixels */
            queue[n++] = q;
        }
    }
    if (n < p->min_pixel_count)
        return 0;
    float sum_i = 0.0f, sum_fs = 0.0f, sum_ss = 0.0f;
    for (int m = 0; m < n; m++) {
        int32_t q = queue[m];
        float ci = pre4[4 * (size_t)q] - roff[bin_of[q]];
        sum_i += ci;
        sum_fs += ci * (float)(q % W);
        sum_ss += ci * (float)(q / W);
    }
    if (fabs((double)sum_i) < 1e-10)
        return 0;
    float com_fs = sum_fs / fabsf(sum_i), com_ss = sum_ss / fabsf(sum_i);
    int com_fs_r = (int)rintf(com_fs), com_ss_r = (int)rintf(com_ss);
    int cfi = com_fs_r - fs0, csi = com_ss_r - ss0;
    const int rw = 2 * p->local_bg_radius;
    int np = 0;
    float bsum = 0.0f, bsum2 = 0.0f, bg_max = 0.0f;
    for (int sj = -rw; sj < rw; sj++) {
        for (int fi = -rw; fi < rw; fi++) {
            int lfs = cfi + fi, lss = csi + sj;
            if (lfs < 0 || lfs >= PC || lss < 0 || lss >= PR)
                continue;
            if (fi * fi + sj * sj > rw * rw)
                continue;
            int32_t q = PIX(lss, lfs);
            float v = pre4[4 * (size_t)q];
            if (usable(g, pre4, q) && v < rthr[bin_of[q]]) {
                np++;
                bsum += v;
                bsum2 += v * v;
                if (v > bg_max)
                    bg_max = v;
            }
        }
    }
    float loff, lsig;
    if (np) {
        loff = bsum / (float)np;
        lsig = bsum2 / (float)np - loff * loff;
        lsig = lsig >= 0.0f ? sqrtf(lsig) : 0.01f;
    } else {
        loff = roff[bin_of[com_ss_r * W + com_fs_r]];
        lsig = 0.01f;
    }
    float tot = 0.0f, raw = 0.0f, max_i = 0.0f;
    sum_fs = sum_ss = 0.0f;
    for (int m = 0; m < n; m++) {
        int32_t q = queue[m];
        float v = pre4[4 * (size_t)q];
        float ci = v - loff;
        tot += ci;
        raw += v;
        sum_fs += v * (float)(q % W);
        sum_ss += v * (float)(q / W);
        if (ci > max_i)
            max_i = ci;
    }
    if (fabs((double)raw) < 1e-10)
        return 0;
    com_fs = sum_fs / fabsf(raw);
    com_ss = sum_ss / fabsf(raw);
    float snr = fabs((double)lsig) > 1e-10 ? tot / lsig : 0.0f;
    if (snr < (float)p->minimum_snr)
        return 0;
    if (max_i < bg_max - loff)
        return 0;
    if (com_fs < (float)fs0 || com_fs > (float)(fs0 + PC - 1) || com_ss < (float)ss0 ||
        com_ss > (float)(ss0 + PR - 1))
        return 0;
    rec->x = com_fs;
    rec->y = com_ss;
    rec->intensity = tot;
    rec->sigma = lsig;
    rec->snr = snr;
    rec->max_pixel = max_i;
    rec->npix = n;
    return 1;
#undef PIX
#undef ABOVE
#undef INTERIOR
}

int faid_pf8_ref(const faid_peak_geom *g, const faid_pf8_bins *b, const float *pre4,
                 const faid_peak_params *p, faid_peak_list *out, faid_diag *d)
{
    if (!g || !b || !pre4 || !p || !out)
        return faid_fail(d, FAID_EINVAL, "peakfinder8: missing argument");
    if (g->panel_rows < 1 || g->panel_cols < 1 || g->rows % g->panel_rows ||
        g->cols % g->panel_cols)
        return faid_fail(d, FAID_ESHAPE, "peakfinder8: frame %dx%d is not a grid of %dx%d panels",
                         g->rows, g->cols, g->panel_rows, g->panel_cols);
    if (p->max_pixel_count < 1 || p->local_bg_radius < 1)
        return faid_fail(d, FAID_EINVAL, "peakfinder8: pixel count / background radius < 1");
    float *roff = malloc((size_t)b->nbins * sizeof(float));
    float *rthr = malloc((size_t)b->nbins * sizeof(float));
    int32_t *queue = malloc(((size_t)p->max_pixel_count + 1) * sizeof(int32_t));
    int rc = 0;
    if (!roff || !rthr || !queue) {
        rc = faid_fail(d, FAID_ENOMEM, "peakfinder8: scratch");
        goto out;
    }
    rc = faid_pf8_radial_ref(g, b, pre4, p, roff, rthr, d);
    if (rc)
        goto out;
    faid_peak_list_clear(out);
    const int npr = g->rows / g->panel_rows, npc = g->cols / g->panel_cols;
    for (int pss = 0; pss < npr; pss++)
        for (int pfs = 0; pfs < npc; pfs++)
            for (int ss = 1; ss < g->panel_rows - 1; ss++)
                for (int fs = 1; fs < g->panel_cols - 1; fs++) {
                    pf8_rec r;
                    if (pf8_seed(g, b->bin_of, pre4, roff, rthr, p, pss, pfs, ss, fs, queue, &r))
                        faid_peak_list_push(
                            out, r.x, r.y, r.intensity, r.sigma, r.snr, r.max_pixel, r.npix,
                            (pss * g->panel_rows + ss) * g->cols + pfs * g->panel_cols + fs);
                }
out:
    free(roff);
    free(rthr);
    free(queue);
    return rc;
}
