/* faid_peaks_cl: program builds, device tables and launches of kernels/peaks/ (see
 * faid_peaks_cl.h). Work-group sizes: the finders use min(256, what the device allows) (a power
 * of two), the sigma clip the same unless FAID_SIGCLIP_WG says otherwise
 * (faid_sigclip_cl_config); peakfinder8's radial statistics use exactly FAID_PF8_LANES
 * (64) work-items, the reduction order the C reference reproduces. */
#include "faid_peaks_cl.h"

#include "faid_log.h"
#include "faid_pf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct faid_peaks_cl {
    faid_cl_ctx *ctx;
    faid_peak_params p;
    int rows, cols, npix, nbins, pf8_nbins;
    int panel_rows, panel_cols;
    size_t wg_sc, wg_pk;
    int ngroups;
    cl_program prog_sc, prog_find, prog_radial;
    cl_kernel k_sc, k_flag, k_scan, k_write, k_prep, k_radial, k_fill;
    /* per setup */
    cl_mem indptr, indices, coefs, radius, radius1d, valid, bin_of, pf8_indptr, pf8_pos;
    float rad_min, rad_max;
    /* per frame */
    cl_mem sc_ovf, bg, flag, counts, offsets, rec, roff, rthr, img, cval, cand, host_pre4;
};

static size_t pick_wg(const faid_cl_ctx *ctx)
{
    size_t wg = 256;
    while (wg > 1 && ctx->info.max_wg && wg > ctx->info.max_wg)
        wg >>= 1;
    return wg;
}

/* A positive integer from the environment variable `name` in [lo, hi]; 0 when unset, -1 (error
 * in d) when set to something else. */
static long env_knob(const char *name, long lo, long hi, faid_diag *d)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        faid_fail(d, FAID_EINVAL, "peaks: %s=%s is not an integer in [%ld, %ld]", name, v, lo, hi);
        return -1;
    }
    return x;
}

int faid_sigclip_cl_config(const faid_cl_ctx *ctx, const faid_csr *csr, faid_clip_model em,
                           faid_sigclip_cl_cfg *cfg, faid_diag *d)
{
    memset(cfg, 0, sizeof *cfg);
    long wg = env_knob("FAID_SIGCLIP_WG", 1, 1024, d);
    long r = env_knob("FAID_SIGCLIP_R", 1, 128, d);
    long lm = env_knob("FAID_SIGCLIP_LM", 1, 1024, d);
    if (wg < 0 || r < 0 || lm < 0)
        return d ? d->code : FAID_EINVAL;
    if (wg & (wg - 1))
        return faid_fail(d, FAID_EINVAL, "peaks: FAID_SIGCLIP_WG=%ld is not a power of two", wg);
    cfg->wg = wg ? (size_t)wg : pick_wg(ctx);
    if (ctx->info.max_wg && cfg->wg > ctx->info.max_wg)
        return faid_fail(d, FAID_EUNSUP, "peaks: %s allows %zu work-items, FAID_SIGCLIP_WG=%zu",
                         ctx->info.name, ctx->info.max_wg, cfg->wg);
    int32_t maxbin = 0;
    for (int32_t b = 0; b < csr->nbins; b++)
        if (csr->indptr[b + 1] - csr->indptr[b] > maxbin)
            maxbin = csr->indptr[b + 1] - csr->indptr[b];
    if (!r) {
        /* the largest bin in registers (with FAID_SIGCLIP_LM: what local memory does not hold):
         * on an H200, EIGER 4M, 1000 bins (11,396 entries at most), 48 per work-item of 256
         * (tests/bench/results/, docs/PERFORMANCE.md) */
        r = ((long)maxbin + (long)cfg->wg - 1) / (long)cfg->wg - lm;
        r = (r + 3) / 4 * 4;
        r = r < 4 ? 4 : r > 64 ? 64 : r;
    }
    cfg->r = (int)r;
    cfg->lm = (int)lm;
    const int nv = em == FAID_CLIP_AZIMUTHAL ? 2 : 3; /* signal, norm (and variance) per entry */
    if (lm) {
        /* the kernel's local arrays: 6 doubles and an int per work-item, 8 doubles and an int per
         * raking chunk (at most 32), and the entries */
        const size_t nch = cfg->wg < 32 ? cfg->wg : 32;
        const size_t bytes = cfg->wg * (6 * sizeof(double) + sizeof(int)) +
                             nch * (8 * sizeof(double) + sizeof(int)) + 64 +
                             (size_t)lm * cfg->wg * (size_t)nv * sizeof(float);
        if (ctx->info.local_mem && bytes > ctx->info.local_mem)
            return faid_fail(d, FAID_EUNSUP,
                             "peaks: FAID_SIGCLIP_LM=%ld with %zu work-items needs %zu bytes of "
                             "local memory, %s has %llu",
                             lm, cfg->wg, bytes, ctx->info.name,
                             (unsigned long long)ctx->info.local_mem);
    }
    const size_t esz = em == FAID_CLIP_AZIMUTHAL ? 2 * sizeof(float) : 4 * sizeof(float);
    cfg->ovf_bytes = (size_t)maxbin > cfg->wg * (size_t)(r + lm) && csr->nnz > 0
                         ? (size_t)csr->nnz * esz
                         : 4 * sizeof(float);
    snprintf(cfg->opts, sizeof cfg->opts,
             "-cl-fp32-correctly-rounded-divide-sqrt -D WG=%zu -D R=%d -D HAS_COEF=%d -D SC_EM=%d",
             cfg->wg, cfg->r, csr->data ? 1 : 0, (int)em);
    if (lm) {
        size_t n = strlen(cfg->opts);
        snprintf(cfg->opts + n, sizeof cfg->opts - n, " -D LM=%d", cfg->lm);
    }
    return FAID_OK;
}

static void release_mem(cl_mem *m)
{
    if (*m)
        clReleaseMemObject(*m);
    *m = NULL;
}

void faid_peaks_cl_destroy(faid_peaks_cl **kp)
{
    if (!kp || !*kp)
        return;
    faid_peaks_cl *k = *kp;
    cl_kernel ks[] = {k->k_sc, k->k_flag, k->k_scan, k->k_write, k->k_prep, k->k_radial, k->k_fill};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (ks[i])
            clReleaseKernel(ks[i]);
    cl_program ps[] = {k->prog_sc, k->prog_find, k->prog_radial};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            clReleaseProgram(ps[i]);
    cl_mem *ms[] = {&k->indptr, &k->indices,    &k->coefs,    &k->radius, &k->radius1d, &k->valid,
                    &k->bin_of, &k->pf8_indptr, &k->pf8_pos,  &k->sc_ovf, &k->bg,       &k->flag,
                    &k->counts, &k->offsets,    &k->rec,      &k->roff,   &k->rthr,     &k->img,
                    &k->cval,   &k->cand,       &k->host_pre4};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        release_mem(ms[i]);
    free(k);
    *kp = NULL;
}

static cl_mem upload(faid_peaks_cl *k, size_t bytes, const void *host, faid_diag *d)
{
    return faid_cl_buffer(k->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, (void *)host, d);
}

static int make_kernel(cl_program prog, const char *name, cl_kernel *out, faid_diag *d)
{
    cl_int err;
    *out = clCreateKernel(prog, name, &err);
    if (err != CL_SUCCESS)
        return faid_cl_fail(d, err, "clCreateKernel", __FILE__, __LINE__);
    return 0;
}

faid_peaks_cl *faid_peaks_cl_new(faid_cl_ctx *ctx, const faid_csr *csr, const faid_peak_geom *g,
                                 const faid_peak_params *p, faid_diag *d)
{
    if (!ctx || !csr || !g || !p) {
        faid_fail(d, FAID_EINVAL, "peaks: missing context, matrix, geometry or parameters");
        return NULL;
    }
    if (faid_peak_params_check(p, d))
        return NULL;
    if (!ctx->info.has_fp64) {
        faid_fail(d, FAID_EUNSUP, "peaks: device %s lacks cl_khr_fp64", ctx->info.name);
        return NULL;
    }
    if (csr->npix != g->rows * g->cols || csr->nbins != g->nbins || g->nbins < 2) {
        faid_fail(d, FAID_ESHAPE,
                  "peaks: matrix (%d pixels, %d bins) and geometry (%dx%d, %d bins) disagree",
                  csr->npix, csr->nbins, g->rows, g->cols, g->nbins);
        return NULL;
    }
    faid_peaks_cl *k = calloc(1, sizeof *k);
    if (!k) {
        faid_fail(d, FAID_ENOMEM, "peaks: out of memory");
        return NULL;
    }
    k->ctx = ctx;
    k->p = *p;
    k->rows = g->rows;
    k->cols = g->cols;
    k->npix = g->rows * g->cols;
    k->nbins = csr->nbins;
    k->panel_rows = g->panel_rows;
    k->panel_cols = g->panel_cols;
    k->rad_min = g->rad_min;
    k->rad_max = g->rad_max;
    k->wg_sc = k->wg_pk = pick_wg(ctx);
    k->ngroups = (int)(((size_t)k->npix + k->wg_pk * FAID_PK_PPI - 1) / (k->wg_pk * FAID_PK_PPI));
    const size_t npix = (size_t)k->npix;
    const size_t cap = (size_t)p->max_num_peaks;
    faid_pf8_bins *bins = NULL;
    int rc = 0;
    char opts[256];
    /* Peak lists must equal the reference bit for bit: IEEE division and sqrt in float32. */
    const char *ieee = "-cl-fp32-correctly-rounded-divide-sqrt";

    faid_sigclip_cl_cfg sc;
    if ((rc = faid_sigclip_cl_config(ctx, csr, p->error_model, &sc, d)))
        goto fail;
    k->wg_sc = sc.wg;
    const char *sc_src[] = {"peaks/sigma_clip.cl"};
    if ((rc = faid_cl_build(ctx, sc_src, 1, sc.opts, &k->prog_sc, d)) ||
        (rc = make_kernel(k->prog_sc, "faid_sigma_clip", &k->k_sc, d)))
        goto fail;
    size_t kwg = 0;
    if (clGetKernelWorkGroupInfo(k->k_sc, ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg,
                                 &kwg, NULL) == CL_SUCCESS &&
        kwg && kwg < sc.wg) {
        rc = faid_fail(d, FAID_EUNSUP,
                       "peaks: %s allows %zu work-items for faid_sigma_clip, %zu needed",
                       ctx->info.name, kwg, sc.wg);
        goto fail;
    }
    k->indptr = upload(k, ((size_t)csr->nbins + 1) * sizeof(int32_t), csr->indptr, d);
    k->indices = upload(k, (size_t)(csr->nnz ? csr->nnz : 1) * sizeof(int32_t), csr->indices, d);
    k->coefs = csr->data ? upload(k, (size_t)csr->nnz * sizeof(float), csr->data, d)
                         : faid_cl_buffer(ctx, CL_MEM_READ_ONLY, 4, NULL, d);
    /* the sigma clip's overflow entries (bins larger than wg * r, sigma_clip.cl) */
    k->sc_ovf = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, sc.ovf_bytes, NULL, d);
    k->bg = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, 4 * (size_t)k->nbins * sizeof(float), NULL, d);
    if (!k->indptr || !k->indices || !k->coefs || !k->sc_ovf || !k->bg)
        goto fail_d;

    if (p->algorithm == FAID_PEAKS_NONE)
        return k;
    k->flag = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, npix, NULL, d);
    k->counts =
        faid_cl_buffer(ctx, CL_MEM_READ_WRITE, ((size_t)k->ngroups + 1) * sizeof(int), NULL, d);
    k->offsets = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, (size_t)k->ngroups * sizeof(int), NULL, d);
    k->rec = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, (8 * cap + 1) * sizeof(float), NULL, d);
    if (!k->flag || !k->counts || !k->offsets || !k->rec)
        goto fail_d;
    if (p->algorithm == FAID_PEAKS_PYFAI) {
        snprintf(opts, sizeof opts, "%s -D PK_WG=%zu -D SCAN_WG=%zu -D PK_PPI=%d", ieee, k->wg_pk,
                 k->wg_pk, FAID_PK_PPI);
        const char *src[] = {"peaks/compact.cl", "peaks/pick_pyfai.cl"};
        if ((rc = faid_cl_build(ctx, src, 2, opts, &k->prog_find, d)) ||
            (rc = make_kernel(k->prog_find, "faid_pick_flag", &k->k_flag, d)) ||
            (rc = make_kernel(k->prog_find, "faid_pk_scan", &k->k_scan, d)) ||
            (rc = make_kernel(k->prog_find, "faid_pick_write", &k->k_write, d)))
            goto fail;
        k->radius = upload(k, npix * sizeof(float), g->radius, d);
        k->radius1d = upload(k, (size_t)g->nbins * sizeof(float), g->radius1d, d);
        if (!k->radius || !k->radius1d)
            goto fail_d;
        return k;
    }
    if (g->panel_rows < 3 || g->panel_cols < 3 || g->rows % g->panel_rows ||
        g->cols % g->panel_cols) {
        rc = faid_fail(d, FAID_ESHAPE, "peakfinder8: frame %dx%d is not a grid of %dx%d panels",
                       g->rows, g->cols, g->panel_rows, g->panel_cols);
        goto fail;
    }
    bins = faid_pf8_bins_new(g, d);
    if (!bins)
        goto fail_d;
    k->pf8_nbins = bins->nbins;
    snprintf(opts, sizeof opts, "%s -D PK_WG=%zu -D SCAN_WG=%zu -D PK_PPI=%d -D PF8_MAXQ=%d", ieee,
             k->wg_pk, k->wg_pk, FAID_PK_PPI, p->max_pixel_count);
    const char *rsrc[] = {"peaks/pf8_radial.cl"};
    const char *psrc[] = {"peaks/compact.cl", "peaks/pf8_peaks.cl"};
    char ropts[120];
    snprintf(ropts, sizeof ropts, "%s -D PF8_LANES=%d", ieee, FAID_PF8_LANES);
    if ((rc = faid_cl_build(ctx, rsrc, 1, ropts, &k->prog_radial, d)) ||
        (rc = make_kernel(k->prog_radial, "faid_pf8_prep", &k->k_prep, d)) ||
        (rc = make_kernel(k->prog_radial, "faid_pf8_radial", &k->k_radial, d)) ||
        (rc = faid_cl_build(ctx, psrc, 2, opts, &k->prog_find, d)) ||
        (rc = make_kernel(k->prog_find, "faid_pf8_cand", &k->k_flag, d)) ||
        (rc = make_kernel(k->prog_find, "faid_pf8_fill", &k->k_fill, d)) ||
        (rc = make_kernel(k->prog_find, "faid_pk_scan", &k->k_scan, d)) ||
        (rc = make_kernel(k->prog_find, "faid_pf8_write", &k->k_write, d)))
        goto fail;
    k->valid = upload(k, npix, g->valid, d);
    k->bin_of = upload(k, npix * sizeof(int32_t), bins->bin_of, d);
    k->pf8_indptr = upload(k, ((size_t)bins->nbins + 1) * sizeof(int32_t), bins->indptr, d);
    k->pf8_pos = upload(k, npix * sizeof(int32_t), bins->pos_of, d);
    k->roff = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, (size_t)bins->nbins * sizeof(float), NULL, d);
    k->rthr = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, (size_t)bins->nbins * sizeof(float), NULL, d);
    k->img = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, npix * sizeof(float), NULL, d);
    k->cval = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, npix * sizeof(float), NULL, d);
    k->cand = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, npix * sizeof(int32_t), NULL, d);
    if (!k->valid || !k->bin_of || !k->pf8_indptr || !k->pf8_pos || !k->roff || !k->rthr ||
        !k->img || !k->cval || !k->cand)
        goto fail_d;
    faid_pf8_bins_destroy(&bins);
    return k;
fail_d:
    rc = d ? d->code : FAID_ECL;
fail:
    (void)rc;
    faid_pf8_bins_destroy(&bins);
    faid_peaks_cl_destroy(&k);
    return NULL;
}

#define SETARG(kern, i, val) FAID_CL_TRY(d, clSetKernelArg((kern), (i), sizeof(val), &(val)))

/* The raw-side parameters that the kernels of kernels/peaks/ take last (raw, dark, normp,
 * raw_off, do_dark, do_dummy, dummy, delta_dummy: read only when built with PK_FUSED, which
 * this driver never does), from argument index i on. */
static int set_raw_unused(cl_kernel kern, cl_uint i, cl_mem any, faid_diag *d)
{
    const cl_uint u0 = 0;
    const int i0 = 0;
    const float f0 = 0.0f;
    SETARG(kern, i, any);
    SETARG(kern, i + 1, any);
    SETARG(kern, i + 2, any);
    SETARG(kern, i + 3, u0);
    SETARG(kern, i + 4, i0);
    SETARG(kern, i + 5, i0);
    SETARG(kern, i + 6, f0);
    SETARG(kern, i + 7, f0);
    return 0;
}

static int set_pick_args(faid_peaks_cl *k, cl_kernel kern, cl_mem pre4, cl_uint *n, faid_diag *d)
{
    const float cutoff = (float)k->p.cutoff_peak, noise = (float)k->p.noise;
    const int hw = k->p.patch_size / 2, connected = k->p.connected, zero = 0;
    cl_uint i = 0;
    SETARG(kern, i++, pre4);
    SETARG(kern, i++, k->radius);
    SETARG(kern, i++, k->radius1d);
    SETARG(kern, i++, k->bg);
    SETARG(kern, i++, zero);
    SETARG(kern, i++, k->rows);
    SETARG(kern, i++, k->cols);
    SETARG(kern, i++, k->nbins);
    SETARG(kern, i++, k->rad_min);
    SETARG(kern, i++, k->rad_max);
    SETARG(kern, i++, cutoff);
    SETARG(kern, i++, noise);
    SETARG(kern, i++, hw);
    SETARG(kern, i++, connected);
    *n = i;
    return 0;
}

/* faid_pk_scan of compact.cl: per-span offsets and the total into the records' block. */
static int enqueue_scan(faid_peaks_cl *k, cl_command_queue q, int cap, faid_diag *d)
{
    const int zero = 0;
    cl_uint i = 0;
    SETARG(k->k_scan, i++, k->counts);
    SETARG(k->k_scan, i++, k->ngroups);
    SETARG(k->k_scan, i++, k->offsets);
    SETARG(k->k_scan, i++, cap);
    SETARG(k->k_scan, i++, k->rec);
    SETARG(k->k_scan, i++, zero);
    size_t sgs = k->wg_pk;
    FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, k->k_scan, 1, NULL, &sgs, &sgs, 0, NULL, NULL));
    return 0;
}

int faid_peaks_cl_enqueue(faid_peaks_cl *k, cl_mem pre4, float empty, cl_event *first,
                          cl_event *last, faid_diag *d)
{
    if (!k || !pre4)
        return faid_fail(d, FAID_EINVAL, "peaks: missing argument");
    cl_command_queue q = k->ctx->queue;
    const float cutoff = (float)k->p.cutoff_clip;
    const int cycles = k->p.cycles, zero = 0;
    cl_uint i = 0;
    SETARG(k->k_sc, i++, pre4);
    SETARG(k->k_sc, i++, k->coefs);
    SETARG(k->k_sc, i++, k->indices);
    SETARG(k->k_sc, i++, k->indptr);
    SETARG(k->k_sc, i++, k->sc_ovf);
    SETARG(k->k_sc, i++, k->nbins);
    SETARG(k->k_sc, i++, cutoff);
    SETARG(k->k_sc, i++, cycles);
    SETARG(k->k_sc, i++, empty);
    SETARG(k->k_sc, i++, k->bg);
    SETARG(k->k_sc, i++, zero);
    int rc = set_raw_unused(k->k_sc, i, pre4, d);
    if (rc)
        return rc;
    size_t gs = (size_t)k->nbins * k->wg_sc, ls = k->wg_sc;
    int find = k->p.algorithm != FAID_PEAKS_NONE;
    FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, k->k_sc, 1, NULL, &gs, &ls, 0, NULL,
                                          first ? first : (!find && last ? last : NULL)));
    if (!find)
        return 0;
    const int cap = k->p.max_num_peaks, npix = k->npix, nzero = k->ngroups + 1;
    size_t wg = k->wg_pk, pgs = (size_t)k->ngroups * wg;
    if (k->p.algorithm == FAID_PEAKS_PYFAI) {
        cl_uint n;
        if ((rc = set_pick_args(k, k->k_flag, pre4, &n, d)))
            return rc;
        SETARG(k->k_flag, n, k->flag);
        SETARG(k->k_flag, n + 1, k->counts);
        if ((rc = set_raw_unused(k->k_flag, n + 2, pre4, d)))
            return rc;
        FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, k->k_flag, 1, NULL, &pgs, &wg, 0, NULL, NULL));
        if ((rc = enqueue_scan(k, q, cap, d)))
            return rc;
        if ((rc = set_pick_args(k, k->k_write, pre4, &n, d)))
            return rc;
        SETARG(k->k_write, n, k->flag);
        SETARG(k->k_write, n + 1, k->counts);
        SETARG(k->k_write, n + 2, k->offsets);
        SETARG(k->k_write, n + 3, cap);
        SETARG(k->k_write, n + 4, k->rec);
        SETARG(k->k_write, n + 5, zero);
        if ((rc = set_raw_unused(k->k_write, n + 6, pre4, d)))
            return rc;
        FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, k->k_write, 1, NULL, &pgs, &wg, 0, NULL, last));
        return 0;
    }
    /* peakfinder8: prep, radial statistics, candidates, fill, finish (pf8_radial.cl,
     * pf8_peaks.cl; the argument orders of their signatures) */
    const float snr = (float)k->p.minimum_snr, adc = (float)k->p.adc_threshold;
    const int min_pix = k->p.min_pixel_count, bg_radius = k->p.local_bg_radius;
    i = 0;
    SETARG(k->k_prep, i++, pre4);
    SETARG(k->k_prep, i++, k->valid);
    SETARG(k->k_prep, i++, k->pf8_pos);
    SETARG(k->k_prep, i++, npix);
    SETARG(k->k_prep, i++, k->img);
    SETARG(k->k_prep, i++, k->cval);
    SETARG(k->k_prep, i++, k->counts);
    SETARG(k->k_prep, i++, nzero);
    if ((rc = set_raw_unused(k->k_prep, i, pre4, d)))
        return rc;
    size_t ggs = ((size_t)npix + wg - 1) / wg * wg;
    FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, k->k_prep, 1, NULL, &ggs, &wg, 0, NULL, NULL));
    i = 0;
    SETARG(k->k_radial, i++, k->cval);
    SETARG(k->k_radial, i++, k->pf8_indptr);
    SETARG(k->k_radial, i++, k->pf8_nbins);
    SETARG(k->k_radial, i++, snr);
    SETARG(k->k_radial, i++, adc);
    SETARG(k->k_radial, i++, k->roff);
    SETARG(k->k_radial, i++, k->rthr);
    size_t rgs = (size_t)k->pf8_nbins * FAID_PF8_LANES, rls = FAID_PF8_LANES;
    FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, k->k_radial, 1, NULL, &rgs, &rls, 0, NULL, NULL));
    i = 0;
    SETARG(k->k_flag, i++, k->img);
    SETARG(k->k_flag, i++, k->bin_of);
    SETARG(k->k_flag, i++, k->rthr);
    SETARG(k->k_flag, i++, k->rows);
    SETARG(k->k_flag, i++, k->cols);
    SETARG(k->k_flag, i++, k->panel_rows);
    SETARG(k->k_flag, i++, k->panel_cols);
    SETARG(k->k_flag, i++, k->flag);
    SETARG(k->k_flag, i++, k->counts);
    SETARG(k->k_flag, i++, k->ngroups);
    SETARG(k->k_flag, i++, k->cand);
    FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, k->k_flag, 1, NULL, &pgs, &wg, 0, NULL, NULL));
    cl_kernel two[2] = {k->k_fill, k->k_write};
    for (int t = 0; t < 2; t++) {
        cl_kernel kk = two[t];
        i = 0;
        SETARG(kk, i++, k->img);
        SETARG(kk, i++, k->bin_of);
        SETARG(kk, i++, k->roff);
        SETARG(kk, i++, k->rthr);
        SETARG(kk, i++, k->rows);
        SETARG(kk, i++, k->cols);
        SETARG(kk, i++, k->panel_rows);
        SETARG(kk, i++, k->panel_cols);
        SETARG(kk, i++, min_pix);
        SETARG(kk, i++, bg_radius);
        SETARG(kk, i++, snr);
        SETARG(kk, i++, k->flag);
        SETARG(kk, i++, k->counts);
        if (t == 0) {
            SETARG(kk, i++, k->ngroups);
            SETARG(kk, i++, k->cand);
            size_t fgs = (size_t)FAID_PF8_FILL_GROUPS * wg;
            FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, kk, 1, NULL, &fgs, &wg, 0, NULL, NULL));
            if ((rc = enqueue_scan(k, q, cap, d)))
                return rc;
        } else {
            SETARG(kk, i++, k->offsets);
            SETARG(kk, i++, cap);
            SETARG(kk, i++, k->rec);
            SETARG(kk, i++, zero);
            FAID_CL_TRY(d, clEnqueueNDRangeKernel(q, kk, 1, NULL, &pgs, &wg, 0, NULL, last));
        }
    }
    return 0;
}

int faid_peaks_cl_read(faid_peaks_cl *k, faid_background *bg, faid_peak_list *out, faid_diag *d)
{
    if (!k || !bg)
        return faid_fail(d, FAID_EINVAL, "peaks: missing argument");
    if (bg->nbins != k->nbins)
        return faid_fail(d, FAID_ESIZE, "peaks: background of %d bins, %d expected", bg->nbins,
                         k->nbins);
    cl_command_queue q = k->ctx->queue;
    size_t nb = (size_t)k->nbins * sizeof(float);
    float *dst[4] = {bg->mean, bg->std, bg->sem, bg->count};
    for (int a = 0; a < 4; a++)
        FAID_CL_TRY(
            d, clEnqueueReadBuffer(q, k->bg, CL_FALSE, (size_t)a * nb, nb, dst[a], 0, NULL, NULL));
    if (out && k->p.algorithm != FAID_PEAKS_NONE) {
        if (out->capacity < k->p.max_num_peaks)
            return faid_fail(d, FAID_ESIZE, "peaks: list of capacity %d, %d needed", out->capacity,
                             k->p.max_num_peaks);
        const size_t cap = (size_t)k->p.max_num_peaks;
        float *rec = malloc((8 * cap + 1) * sizeof(float));
        if (!rec)
            return faid_fail(d, FAID_ENOMEM, "peaks: out of memory");
        cl_int err = clEnqueueReadBuffer(q, k->rec, CL_TRUE, 0, (8 * cap + 1) * sizeof(float), rec,
                                         0, NULL, NULL);
        if (err != CL_SUCCESS) {
            free(rec);
            return faid_cl_fail(d, err, "clEnqueueReadBuffer", __FILE__, __LINE__);
        }
        faid_peaks_unpack(rec, (int32_t)cap, out);
        free(rec);
        FAID_CL_TRY(d, clFinish(q));
        return 0;
    }
    FAID_CL_TRY(d, clFinish(q));
    return 0;
}
int faid_peaks_cl_run_host(faid_peaks_cl *k, const float *pre4, float empty, faid_background *bg,
                           faid_peak_list *out, faid_diag *d)
{
    if (!k || !pre4)
        return faid_fail(d, FAID_EINVAL, "peaks: missing argument");
    size_t bytes = (size_t)k->npix * 4 * sizeof(float);
    if (!k->host_pre4) {
        k->host_pre4 = faid_cl_buffer(k->ctx, CL_MEM_READ_ONLY, bytes, NULL, d);
        if (!k->host_pre4)
            return d ? d->code : FAID_ECL;
    }
    FAID_CL_TRY(d, clEnqueueWriteBuffer(k->ctx->queue, k->host_pre4, CL_FALSE, 0, bytes, pre4, 0,
                                        NULL, NULL));
    int rc = faid_peaks_cl_enqueue(k, k->host_pre4, empty, NULL, NULL, d);
    return rc ? rc : faid_peaks_cl_read(k, bg, out, d);
}
