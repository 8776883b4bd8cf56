/* faid_stage_sigclip: the sigma-clipped background per radial bin (peaks.algorithm not none),
 * pyFAI's sigma_clip_ng semantics (faid_sigclip.h), into the result's background profile. Its
 * declare also builds what the three peak stages share for the setup (faid_peak_setup: the
 * peak geometry, peakfinder8's radius bins, the corrections with the Poisson variance).
 *
 * Reference device: the frame preprocessed by the integrate stage ("pre") when the integration's
 * error model is poisson, else preprocessed again here with the Poisson variance ("pk_pre"),
 * then faid_sigclip_ref over setup->csr_bg (no pixel splitting, the profile's bins).
 *
 * OpenCL device: buffers bg.indptr / bg.indices / bg.coef (setup->csr_bg), per slot pk.pre (one
 * preprocessed frame, float4 per pixel) and pk.cpk (the overflow entries of bins larger than the
 * kernel keeps in registers, faid_sigclip_cl_config; 16 bytes when none is); output bg (mean,
 * std, sem, count per bin, read back). cl_close runs, lane after lane on the slot's in-order queue:
 * faid_preprocess of process/preprocess.cl built with the Poisson error model (EM=1) into
 * pk.pre, faid_sigma_clip of peaks/sigma_clip.cl into the lane's bg segment, then the peak
 * finder of the peaks stage on the same pk.pre (faid_stage_peaks_cl_lane). Driving the finder
 * from here lets one preprocessed frame per slot serve every lane (64 MB for a 4M detector)
 * instead of one per lane. The kernels equal the references (tests/unit/test_peaks.c). */
#include "faid_stage.h"

#include "faid_pf8.h"
#include "faid_sigclip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_PRE, EV_SC }; /* per lane */

/* Work-group size of the peak kernels: 256, or less where the device allows less. */
size_t faid_stage_peaks_wg(const faid_stage_env *env)
{
    size_t wg = 256;
    while (wg > 1 && env->ctx->info.max_wg && wg > env->ctx->info.max_wg)
        wg >>= 1;
    return wg;
}

/* A per-slot scratch buffer of `bytes` used by one lane at a time: declared as `batch` lanes of
 * bytes / batch so that the slot holds it once. */
int faid_stage_peaks_scratch(faid_stage_env *env, faid_stage_res *res, const char *name,
                             size_t bytes, faid_diag *d)
{
    size_t nl = env->batch > 0 ? (size_t)env->batch : 1;
    return faid_restab_declare(res->rt, name, (bytes + nl - 1) / nl, 64, FAID_RES_DEVICE, d);
}

static int sc_declare_cl(faid_stage_env *env, faid_stage_res *res, faid_diag *d)
{
    if (!env->ctx->info.has_fp64)
        return faid_fail(d, FAID_EUNSUP,
                         "peaks: device %s lacks cl_khr_fp64 (the background sums are float64)",
                         env->ctx->info.name);
    const faid_csr *m = res->setup->csr_bg;
    int rc = faid_restab_static(res->rt, "bg.indptr", ((size_t)m->nbins + 1) * sizeof(int32_t),
                                m->indptr, d);
    if (!rc)
        rc = m->nnz > 0 ? faid_restab_static(res->rt, "bg.indices",
                                             (size_t)m->nnz * sizeof(int32_t), m->indices, d)
                        : faid_restab_alias(res->rt, "bg.indices", "one", d);
    if (!rc)
        rc = m->data && m->nnz > 0 ? faid_restab_static(res->rt, "bg.coef",
                                                        (size_t)m->nnz * sizeof(float), m->data, d)
                                   : faid_restab_alias(res->rt, "bg.coef", "one", d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.pre", res->npix * 4 * sizeof(float), d);
    faid_peak_setup *ps = res->state[faid_stage_id(&faid_stage_sigclip)];
    if (!rc)
        rc = faid_sigclip_cl_config(env->ctx, m, ps->p.error_model, &ps->sc, d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.cpk", ps->sc.ovf_bytes, d);
    if (!rc)
        rc = faid_restab_output(res->rt, "bg", 4 * (size_t)m->nbins, 1, d);
    return rc;
}

static int sc_enabled(const faid_stage_env *env, const faid_setup *s)
{
    (void)env;
    return s->cfg.peaks.algorithm != FAID_PEAKS_NONE;
}

static void sc_release(faid_stage_res *res, int id)
{
    faid_peak_setup *ps = res->state[id];
    if (!ps)
        return;
    faid_peak_geom_destroy(&ps->geom);
    faid_pf8_bins_destroy(&ps->pf8);
    free(ps);
    res->state[id] = NULL;
}

static int sc_declare(faid_stage_env *env, faid_stage_res *res, int id, faid_diag *d)
{
    const faid_setup *s = res->setup;
    if (!s->csr_bg)
        return faid_fail(d, FAID_ECONFIG, "peaks: the setup has no background matrix");
    faid_peak_setup *ps = calloc(1, sizeof *ps);
    if (!ps)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    res->state[id] = ps;
    ps->p = s->cfg.peaks;
    ps->csr_bg = s->csr_bg;
    ps->corr = s->corr;
    ps->corr.error_model = FAID_EM_POISSON;
    ps->geom = faid_peak_geom_new(&s->geom, s->mask, s->csr_bg, s->cfg.unit, &ps->p, 0, 0, d);
    if (!ps->geom)
        return d && d->code ? d->code : FAID_ENOMEM;
    if (ps->p.algorithm == FAID_PEAKS_PEAKFINDER8 && !(ps->pf8 = faid_pf8_bins_new(ps->geom, d)))
        return d && d->code ? d->code : FAID_ENOMEM;
    if (env->ctx)
        return sc_declare_cl(env, res, d);
    ps->pre = "pre";
    if (s->corr.error_model != FAID_EM_POISSON) {
        ps->pre = "pk_pre";
        return faid_restab_static(res->rt, "pk_pre", s->npix * 4 * sizeof(float), NULL, d);
    }
    return FAID_OK;
}

static int sc_ref_run(faid_stage_env *env, faid_stage_res *res, faid_ref_frame *fr, faid_diag *d)
{
    (void)env;
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    double t0 = faid_stage_now_us();
    float *pre = faid_restab_host(res->rt, ps->pre, 0);
    int rc = FAID_OK;
    if (strcmp(ps->pre, "pre") != 0)
        rc = faid_ref_preprocess(&ps->corr, fr->f->dtype, faid_restab_host(res->rt, "raw", 0), pre,
                                 d);
    if (!rc)
        rc =
            faid_sigclip_ref(ps->csr_bg, pre, &ps->p, res->setup->corr.empty, fr->res->bg, NULL, d);
    fr->res->t.peaks_us += faid_stage_now_us() - t0;
    fr->res->t.clip_us += faid_stage_now_us() - t0;
    return rc;
}

/* Keys of the sigclip stage's kernels in the per-setup kernel cache (faid_stage_kslot). */
enum { KC_SC = FAID_DT_BOOL + 1 }; /* 0..FAID_DT_BOOL: the preprocess kernel per dtype */

static int pre_kernel(faid_stage_env *env, faid_stage_res *res, faid_dtype dt, faid_kernel **k,
                      faid_diag *d)
{
    faid_kernel **slot =
        (int)dt >= 0 && (int)dt <= FAID_DT_BOOL
            ? faid_stage_kslot(env, res, faid_stage_id(&faid_stage_sigclip), (int)dt)
            : NULL;
    if (slot && *slot) {
        *k = *slot;
        return FAID_OK;
    }
    int code = faid_stage_raw_code(dt);
    if (!code)
        return faid_fail(d, FAID_EDTYPE, "peaks: frame dtype %s is not supported",
                         faid_dtype_name(dt));
    char opts[128];
    snprintf(opts, sizeof opts, "-D RAW_CODE=%d -D EM=%d -D NBATCH=%d", code, (int)FAID_EM_POISSON,
             env->batch);
    static const char *const files[] = {"process/preprocess.cl", "process/integrate.cl"};
    int rc = faid_progcache_kernel(env->progs, files, 2, opts, "faid_preprocess", k, d);
    if (!rc && slot)
        *slot = *k;
    return rc;
}

/* The sigma-clip kernel, built as faid_sigclip_cl_config chose (work-group size *wg).
 * Measured on an H200 (EIGER 4M, tests/bench/results/h200-2026-11-22-sigclip/): gathering each
 * bin's entries once into a compact CSR-order copy and walking that contiguously, 4 entries per
 * work-item per tile, took the preprocess + sigma clip of one frame from 622 to 341 us and the
 * pyfai picker path, 32 frames in flight, from 2,040 to 2,329-2,426 frames/s; the copy (72 MB)
 * was still walked up to 11 times per frame. Now each work-item keeps its share of the bin in
 * registers across all passes (sigma_clip.cl): the frame is read once. */
static int sc_kernel(faid_stage_env *env, faid_stage_res *res, faid_kernel **k, size_t *wg,
                     faid_diag *d)
{
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    *wg = ps->sc.wg;
    faid_kernel **slot = faid_stage_kslot(env, res, faid_stage_id(&faid_stage_sigclip), KC_SC);
    if (slot && *slot) {
        *k = *slot;
        return FAID_OK;
    }
    static const char *const files[] = {"peaks/sigma_clip.cl"};
    int rc = faid_progcache_kernel(env->progs, files, 1, ps->sc.opts, "faid_sigma_clip", k, d);
    if (!rc && (*k)->kwg && (*k)->kwg < *wg)
        return faid_fail(d, FAID_EUNSUP,
                         "peaks: %s allows %zu work-items for faid_sigma_clip, %zu needed "
                         "(FAID_SIGCLIP_WG, FAID_SIGCLIP_R)",
                         env->ctx->info.name, (*k)->kwg, *wg);
    if (!rc && slot)
        *slot = *k;
    return rc;
}

static int sc_cl_prepare(faid_stage_env *env, faid_stage_res *res, int id, faid_dtype dt,
                         faid_diag *d)
{
    (void)id;
    faid_kernel *k;
    size_t wg;
    int rc = pre_kernel(env, res, dt, &k, d);
    if (!rc)
        rc = sc_kernel(env, res, &k, &wg, d);
    if (!rc)
        rc = faid_stage_peaks_cl_prepare(env, res, d);
    return rc;
}

static int sc_cl_close(faid_stage_env *env, faid_stage_res *res, int id, faid_stage_slot *sl,
                       faid_diag *d)
{
    const faid_peak_setup *ps = res->state[id];
    const faid_corrections *c = &res->setup->corr;
    const size_t esz = faid_dtype_size(sl->dtype);
    const size_t raw_stride = faid_restab_lane_bytes(res->rt, "raw");
    size_t wg = 0;
    if (faid_restab_lane_bytes(res->rt, "pk.pre") * (size_t)sl->nlanes <
            res->npix * 4 * sizeof(float) ||
        faid_restab_lane_bytes(res->rt, "pk.cpk") * (size_t)sl->nlanes < ps->sc.ovf_bytes)
        return faid_fail(d, FAID_ESIZE, "peaks: slot of %d lanes too small for one frame",
                         sl->nlanes);
    cl_mem pre = faid_restab_mem(res->rt, "pk.pre", sl->index);
    int off, stride;
    faid_restab_out(res->rt, "bg", &off, &stride);
    faid_kernel *kp, *ks;
    int rc = pre_kernel(env, res, sl->dtype, &kp, d);
    if (!rc)
        rc = sc_kernel(env, res, &ks, &wg, d);
    if (rc)
        return rc;
    size_t plws = env->ctx->info.is_gpu ? 256 : 64;
    if (plws > env->ctx->info.max_wg)
        plws = env->ctx->info.max_wg;
    while (kp->kwg && plws > kp->kwg && plws > 1)
        plws >>= 1;
    const size_t pgws = (res->npix + plws - 1) / plws * plws;
    for (int f = 0; f < sl->n && !rc; f++) {
        faid_stage_lane *ln = &sl->lane[f];
        rc = faid_karg_mem(kp, "raw", faid_restab_mem(res->rt, "raw", sl->index), d);
        if (!rc)
            rc = faid_karg_mem(kp, "dark", faid_restab_mem(res->rt, "dark", 0), d);
        if (!rc)
            rc = faid_karg_mem(kp, "normp", faid_restab_mem(res->rt, "normp", 0), d);
        if (!rc)
            rc = faid_karg_int(kp, "do_dark", c->dark != NULL, d);
        if (!rc)
            rc = faid_karg_int(kp, "do_dummy", c->do_dummy, d);
        if (!rc)
            rc = faid_karg_float(kp, "dummy", c->dummy, d);
        if (!rc)
            rc = faid_karg_float(kp, "delta_dummy", c->delta_dummy, d);
        if (!rc)
            rc = faid_karg_int(kp, "npix", (cl_int)res->npix, d);
        if (!rc)
            rc = faid_karg_mem(kp, "out", pre, d);
        if (!rc)
            rc = faid_karg_uint(kp, "raw_off", (cl_uint)((size_t)f * raw_stride / esz), d);
        if (!rc)
            rc = faid_kernel_launch(sl->q, kp, pgws, plws, &ln->ev[id][EV_PRE], d);
        if (!rc)
            rc = faid_karg_mem(ks, "pre4", pre, d);
        if (!rc)
            rc = faid_karg_mem(ks, "coefs", faid_restab_mem(res->rt, "bg.coef", 0), d);
        if (!rc)
            rc = faid_karg_mem(ks, "indices", faid_restab_mem(res->rt, "bg.indices", 0), d);
        if (!rc)
            rc = faid_karg_mem(ks, "indptr", faid_restab_mem(res->rt, "bg.indptr", 0), d);
        if (!rc)
            rc = faid_karg_mem(ks, "ovf", faid_restab_mem(res->rt, "pk.cpk", sl->index), d);
        if (!rc)
            rc = faid_karg_int(ks, "nbins", ps->csr_bg->nbins, d);
        if (!rc)
            rc = faid_karg_float(ks, "cutoff", (float)ps->p.cutoff_clip, d);
        if (!rc)
            rc = faid_karg_int(ks, "cycles", ps->p.cycles, d);
        if (!rc)
            rc = faid_karg_float(ks, "empty", c->empty, d);
        if (!rc)
            rc = faid_karg_mem(ks, "out", faid_restab_mem(res->rt, "out", sl->index), d);
        if (!rc)
            rc = faid_karg_int(ks, "out_off", off + f * stride, d);
        if (!rc)
            rc = faid_kernel_launch(sl->q, ks, (size_t)ps->csr_bg->nbins * wg, wg,
                                    &ln->ev[id][EV_SC], d);
        if (!rc)
            rc = faid_stage_peaks_cl_lane(env, res, sl, f, pre, off + f * stride, d);
    }
    return rc;
}

static int sc_cl_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                         const float *h_lane, faid_result *r, faid_diag *d)
{
    (void)env;
    (void)sl;
    (void)lane;
    (void)d;
    int off, stride;
    faid_restab_out(res->rt, "bg", &off, &stride);
    faid_background *bg = r->bg;
    const size_t n = (size_t)bg->nbins;
    float *dst[4] = {bg->mean, bg->std, bg->sem, bg->count};
    for (int a = 0; a < 4; a++)
        memcpy(dst[a], h_lane + off + (size_t)a * n, n * sizeof(float));
    return FAID_OK;
}

static void sc_times(const faid_stage_slot *sl, int lane, int id, faid_stage_times *t)
{
    const cl_event *ev = sl->lane[lane].ev[id];
    double pre = faid_stage_ev_us(ev[EV_PRE]), sc = faid_stage_ev_us(ev[EV_SC]);
    t->peaks_us += pre + sc;
    t->pkpre_us += pre;
    t->clip_us += sc;
}

const faid_peak_setup *faid_stage_peak_setup(const faid_stage_res *res)
{
    int id = faid_stage_id(&faid_stage_sigclip);
    return id >= 0 && res->enabled[id] ? res->state[id] : NULL;
}

/* The sigma-clipped background on the profile's radial bins. */
static const faid_output_decl sc_outputs[] = {
    FAID_OUTPUT(BG_I, F32, BG, faid_background, mean),
    FAID_OUTPUT(BG_SIGMA, F32, BG, faid_background, sem),
    FAID_OUTPUT(BG_STD, F32, BG, faid_background, std),
    FAID_OUTPUT(BG_COUNT, F32, BG, faid_background, count),
};

/* No histogram, no result key: faid-bench reports them (the peaks stage adds to "peaks" too). */
static const faid_time_decl sc_timings[] = {
    FAID_TIME("peaks", UNKNOWN, peaks_us, 0, "background, peak finding and hit decision"),
    FAID_TIME("clip", UNKNOWN, clip_us, 0, "part of peaks: the sigma clip"),
    FAID_TIME("peaks_preprocess", UNKNOWN, pkpre_us, 0,
              "part of peaks: the peak stages' Poisson preprocess"),
};

const faid_stage faid_stage_sigclip = {
    .name = "sigclip",
    .enabled = sc_enabled,
    .declare = sc_declare,
    .release = sc_release,
    .ref_run = sc_ref_run,
    .cl_prepare = sc_cl_prepare,
    .cl_close = sc_cl_close,
    .cl_collect = sc_cl_collect,
    .times = sc_times,
    .outputs = sc_outputs,
    .noutputs = FAID_NROWS(sc_outputs),
    .timings = sc_timings,
    .ntimings = FAID_NROWS(sc_timings),
};
