/* faid_stage_integrate: preprocessing and azimuthal integration of the decoded frame ("raw"),
 * 1D and the optional 2D cake, into the profiles of the result.
 *
 * Buffers (per setup): normp (normalization x flat x solid angle x polarization folded per
 * pixel, 0 where a pixel can never contribute: mask, dummy flat, NaN), dark (or the one-element
 * placeholder "one"), per matrix m0 (1D) / m1 (2D) indptr, indices, coef, and with the variant
 * entrynorm (FAID_ENGINE_INTEGRATE, faid_engine.h) enorm / edark, normp and dark in the matrix'
 * entry order (one float per entry each; edark is "one" without dark); per slot: pre (float4
 * per pixel, unfused path only). Outputs per lane: p1d (I, sigma, std, count), s1d (the four
 * sums), p2d, s2d (read back only with sums_2d on).
 *
 * Launches (int_plan; kernels/process/, one program per frame dtype and error model, NBATCH =
 * batch): fused, one launch per matrix for the whole slot (faid_rows_raw in rows mode, or
 * faid_integrate_raw_b for error models none/poisson with batch > 1, built with the defines of
 * the FAID_ENGINE_INTEGRATE variants: INT_GATHER, INT_ENORM, INT_PREFETCH, UNROLL=8), else frame
 * after frame (faid_integrate_raw; unfused faid_preprocess then faid_integrate_pre /
 * faid_rows_pre).
 *
 * The work-group size is a pure function of the device type and the matrix shape (no timing-based
 * autotune), so the daemon and faidctl give bit-identical results. Reference device:
 * faid_ref_preprocess into the static "pre", then faid_ref_integrate (faid_reduce_ref.c). */
#include "faid_stage.h"

#include "faid_log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACC_BYTES (10 * sizeof(float)) /* local scratch per work-item (integrate.cl) */
#define NOUT      8

/* Rows mode (one work-item per bin) for short rows: below this average number of entries per
 * bin a work-group per bin spends more on its reduction tree than on the entries (the 2D cake:
 * about 20 entries per bin). */
#define ROWS_MAX_AVG 64.0

typedef struct int_matrix {
    int present;
    int nbins;
    int has_coef;
    int rows;  /* one work-item per bin (faid_rows_*), else one work-group per bin */
    size_t wg; /* work-group per bin (rows == 0) */
    int enorm; /* m?.enorm / m?.edark declared (FAID_INTV_ENORM) */
} int_matrix;

typedef struct int_res {
    int do_dark;
    int_matrix m[2];
} int_res;

enum { EV_PRE, EV_INT1, EV_INT2 }; /* per lane */
enum { EV_BINT1, EV_BINT2 };       /* per slot */
static const char *const M_PROF[2] = {"p1d", "p2d"};
static const char *const M_SUMS[2] = {"s1d", "s2d"};
static const char *const M_INDPTR[2] = {"m0.indptr", "m1.indptr"};
static const char *const M_INDICES[2] = {"m0.indices", "m1.indices"};
static const char *const M_COEF[2] = {"m0.coef", "m1.coef"};
static const char *const M_ENORM[2] = {"m0.enorm", "m1.enorm"};
static const char *const M_EDARK[2] = {"m0.edark", "m1.edark"};

static int is_dummy_f(float x, float dummy, float delta)
{
    return delta != 0.0f ? fabsf(x - dummy) <= delta : x == dummy;
}

/* Folds the static per-pixel factors in the reference's float32 order (faid_ref_preprocess:
 * normalization x flat x polarization x solid angle); 0 marks a pixel that can never contribute
 * (masked, flat equal to the dummy, non-finite or zero norm). As in the reference, a flat equal to
 * 0 is rejected even without dummy checking (pyFAI's placeholder dummy). */
void faid_stage_fold_norm(const faid_corrections *c, float *normp)
{
    const float dummy = c->do_dummy ? c->dummy : 0.0f;
    const float ddummy = c->do_dummy ? c->delta_dummy : 0.0f;
    for (size_t i = 0; i < c->npix; i++) {
        float n = 0.0f;
        if (!(c->mask && c->mask[i]) && !(c->flat && is_dummy_f(c->flat[i], dummy, ddummy))) {
            n = c->normalization_factor;
            if (c->flat)
                n *= c->flat[i];
            if (c->polarization)
                n *= c->polarization[i];
            if (c->solid_angle)
                n *= c->solid_angle[i];
            if (!isfinite(n))
                n = 0.0f;
        }
        normp[i] = n;
    }
}

/* Integration work-group: enough work-items per bin to keep a GPU busy on long rows (1D with
 * thousands of entries per bin), 32 (one NVIDIA warp) on short rows (2D cake); small on CPU
 * devices, where PoCL runs a work-group as a loop. */
static size_t choose_wg(const faid_dev_info *dev, const faid_csr *csr, size_t override)
{
    size_t wg;
    if (override) {
        wg = override;
    } else if (dev->is_gpu) {
        double avg = csr->nbins > 0 ? (double)csr->nnz / csr->nbins : 0.0;
        wg = 32;
        while (wg < 256 && (double)wg * 16.0 < avg)
            wg *= 2;
    } else {
        wg = 8;
    }
    size_t maxwg = dev->max_wg ? dev->max_wg : 1;
    while (wg > maxwg)
        wg >>= 1;
    size_t p = 1;
    while (p * 2 <= wg)
        p *= 2;
    return p;
}

static int choose_rows(const faid_csr *csr, int env)
{
    if (env >= 0)
        return env;
    double avg = csr->nbins > 0 ? (double)csr->nnz / csr->nbins : 0.0;
    return avg < ROWS_MAX_AVG;
}

/* The variant entrynorm (FAID_INTV_ENORM): a static per-pixel array copied into the matrix'
 * entry order, src[indices[k]] at entry k (the same floats, so the same bits). */
int faid_stage_entry_order(faid_stage_res *res, const char *name, const faid_csr *csr,
                           const float *src, faid_diag *d)
{
    float *e = malloc((size_t)csr->nnz * sizeof(float));
    if (!e)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory for %s (%lld entries)", name,
                         (long long)csr->nnz);
    for (int64_t k = 0; k < (int64_t)csr->nnz; k++)
        e[k] = src[csr->indices[k]];
    int rc = faid_restab_static(res->rt, name, (size_t)csr->nnz * sizeof(float), e, d);
    free(e);
    return rc;
}

static int declare_matrix(faid_stage_env *env, faid_stage_res *res, int_res *ir, int k,
                          const faid_csr *csr, const float *normp, faid_diag *d)
{
    int_matrix *m = &ir->m[k];
    m->present = 1;
    m->nbins = csr->nbins;
    m->has_coef = csr->data != NULL && csr->nnz > 0;
    m->rows = choose_rows(csr, env->rows_env);
    m->wg = choose_wg(env->info, csr, env->wg_override);
    int rc = faid_restab_static(res->rt, M_INDPTR[k], ((size_t)csr->nbins + 1) * sizeof(int32_t),
                                csr->indptr, d);
    if (!rc)
        rc = csr->nnz > 0 ? faid_restab_static(res->rt, M_INDICES[k],
                                               (size_t)csr->nnz * sizeof(int32_t), csr->indices, d)
                          : faid_restab_alias(res->rt, M_INDICES[k], "one", d);
    if (!rc)
        rc = m->has_coef ? faid_restab_static(res->rt, M_COEF[k], (size_t)csr->nnz * sizeof(float),
                                              csr->data, d)
                         : faid_restab_alias(res->rt, M_COEF[k], "one", d);
    /* entrynorm serves the batched one-group-per-bin kernel only (error models none, poisson) */
    m->enorm = (env->int_variant & FAID_INTV_ENORM) && !m->rows && csr->nnz > 0 &&
               res->setup->corr.error_model != FAID_EM_AZIMUTHAL;
    if (!rc && m->enorm)
        rc = faid_stage_entry_order(res, M_ENORM[k], csr, normp, d);
    if (!rc && m->enorm)
        rc = ir->do_dark ? faid_stage_entry_order(res, M_EDARK[k], csr, res->setup->corr.dark, d)
                         : faid_restab_alias(res->rt, M_EDARK[k], "one", d);
    return rc;
}

static int int_declare(faid_stage_env *env, faid_stage_res *res, int id, faid_diag *d)
{
    const faid_setup *s = res->setup;
    int_res *ir = calloc(1, sizeof *ir);
    if (!ir)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    res->state[id] = ir;
    if (!env->info)
        return faid_restab_static(res->rt, "pre", s->npix * 4 * sizeof(float), NULL, d);
    float *normp = malloc(s->npix * sizeof(float));
    if (!normp)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory for %zu pixels", s->npix);
    faid_stage_fold_norm(&s->corr, normp);
    const float one = 1.0f;
    int rc = faid_restab_static(res->rt, "one", sizeof one, &one, d);
    if (!rc)
        rc = faid_restab_static(res->rt, "normp", s->npix * sizeof(float), normp, d);
    ir->do_dark = s->corr.dark != NULL;
    if (!rc)
        rc = ir->do_dark
                 ? faid_restab_static(res->rt, "dark", s->npix * sizeof(float), s->corr.dark, d)
                 : faid_restab_alias(res->rt, "dark", "one", d);
    if (!rc)
        rc = declare_matrix(env, res, ir, 0, s->csr, normp, d);
    if (!rc && s->csr2d)
        rc = declare_matrix(env, res, ir, 1, s->csr2d, normp, d);
    free(normp);
    if (!rc && !env->fused)
        rc = faid_restab_declare(res->rt, "pre", s->npix * 4 * sizeof(float), 64, FAID_RES_DEVICE,
                                 d);
    /* per lane: 1D I..count, 1D sums, 2D I..count, 2D sums (with the 2D sums off those stay on
     * the device, never read back) */
    const size_t n1 = (size_t)s->csr->nbins, n2 = s->csr2d ? (size_t)s->csr2d->nbins : 0;
    if (!rc)
        rc = faid_restab_output(res->rt, "p1d", 4 * n1, 1, d);
    if (!rc)
        rc = faid_restab_output(res->rt, "s1d", 4 * n1, 1, d);
    if (!rc && n2)
        rc = env->sums2d || env->cake_arrays >= 4
                 ? faid_restab_output(res->rt, "p2d", 4 * n2, 1, d)
                 : faid_restab_output_part(res->rt, "p2d", 4 * n2, env->cake_arrays * n2, d);
    if (!rc && n2)
        rc = faid_restab_output(res->rt, "s2d", 4 * n2, env->sums2d, d);
    return rc;
}

static void int_release(faid_stage_res *res, int id)
{
    free(res->state[id]);
    res->state[id] = NULL;
}

static int int_ref_run(faid_stage_env *env, faid_stage_res *res, faid_ref_frame *fr, faid_diag *d)
{
    (void)env;
    const faid_setup *s = res->setup;
    float *pre = faid_restab_host(res->rt, "pre", 0);
    double t1 = faid_stage_now_us();
    int rc =
        faid_ref_preprocess(&s->corr, fr->f->dtype, faid_restab_host(res->rt, "raw", 0), pre, d);
    if (rc)
        return rc;
    double t2 = faid_stage_now_us();
    rc = faid_ref_integrate(s->csr, &s->corr, pre, fr->res->p1d, d);
    if (!rc && s->csr2d)
        rc = faid_ref_integrate(s->csr2d, &s->corr, pre, fr->res->p2d, d);
    double t3 = faid_stage_now_us();
    fr->res->t.preprocess_us = t2 - t1;
    fr->res->t.integrate_us = t3 - t2;
    return rc;
}

/* The correction flags every raw-reading kernel takes (do_dark, do_dummy, dummy, delta_dummy)
 * and the static per-pixel arrays. */
static void arg_corr(faid_launch *l, const faid_stage_res *res, const int_res *ir, const char *dark,
                     const char *normp)
{
    const faid_corrections *c = &res->setup->corr;
    faid_pa_buf(l, "dark", dark);
    faid_pa_buf(l, "normp", normp);
    faid_pa_int(l, "do_dark", ir->do_dark, 0);
    faid_pa_int(l, "do_dummy", c->do_dummy, 0);
    faid_pa_float(l, "dummy", c->dummy);
    faid_pa_float(l, "delta_dummy", c->delta_dummy);
}

/* The matrix m and the output buffer, as every integration kernel takes them. */
static void arg_matrix(faid_launch *l, const faid_stage_res *res, const int_res *ir, int m)
{
    const int_matrix *mx = &ir->m[m];
    faid_pa_buf(l, "indptr", M_INDPTR[m]);
    faid_pa_buf(l, "indices", M_INDICES[m]);
    faid_pa_buf(l, "coef", M_COEF[m]);
    faid_pa_int(l, "has_coef", mx->has_coef, 0);
    faid_pa_int(l, "nbins", mx->nbins, 0);
    faid_pa_float(l, "empty", res->setup->corr.empty);
    faid_pa_buf(l, "out", "out");
}

/* The work-group of a launch over the matrix' bins: rows mode one work-item per bin in groups
 * of 128 (GPU) or 16, else one work-group of the chosen size per bin; halved while the compiled
 * kernel cannot take it (a property of device and program, so still the same on every run). */
static void matrix_range(const faid_stage_env *env, const int_matrix *mx, faid_launch *l)
{
    l->shrink = 1;
    if (mx->rows) {
        size_t lws = env->info->is_gpu ? 128 : 16;
        if (env->info->max_wg && lws > env->info->max_wg)
            lws = env->info->max_wg;
        l->lws = lws;
        l->items = (size_t)mx->nbins;
    } else {
        l->lws = mx->wg;
        l->groups = (size_t)mx->nbins;
    }
}

/* The integration of a slot's n frames: one launch per matrix for the whole batch (fused
 * kernels in rows mode, or error models none and poisson with batch > 1), else the one-frame
 * kernels lane after lane. Kernels of kernels/process/, one program per frame dtype and error
 * model, NBATCH = batch. */
static int int_plan(const faid_stage_env *env, const faid_stage_res *res, int id, faid_dtype dt,
                    faid_plan *p, faid_diag *d)
{
    const int_res *ir = res->state[id];
    const int code = faid_stage_raw_code(dt);
    if (!code)
        return faid_fail(d, FAID_EDTYPE,
                         "frame dtype %s is not supported (uint8/16/32, "
                         "int8/16/32, float32)",
                         faid_dtype_name(dt));
    const faid_error_model em = res->setup->corr.error_model;
    if ((int)em < 0 || (int)em > FAID_EM_AZIMUTHAL)
        return faid_fail(d, FAID_EINVAL, "error model %d unknown", (int)em);
    char opts[160];
    snprintf(opts, sizeof opts, "-D RAW_CODE=%d -D EM=%d -D NBATCH=%d%s%s%s%s", code, (int)em,
             env->batch, (env->int_variant & FAID_INTV_GATHER) ? " -D INT_GATHER=1" : "",
             ir->m[0].enorm || ir->m[1].enorm ? " -D INT_ENORM=1" : "",
             (env->int_variant & FAID_INTV_PREFETCH) ? " -D INT_PREFETCH=1" : "",
             (env->int_variant & FAID_INTV_UNROLL8) ? " -D UNROLL=8" : "");
    static const char *const files[] = {"process/preprocess.cl", "process/integrate.cl"};
    const size_t esz = faid_dtype_size(dt);
    const int64_t raw_lane = (int64_t)(faid_restab_lane_bytes(res->rt, "raw") / esz);
    const int nm = ir->m[1].present ? 2 : 1;
    const int can_batch = res->setup->corr.error_model != FAID_EM_AZIMUTHAL;
    int batched[2] = {0, 0}, per_lane = !env->fused;
    for (int m = 0; m < nm; m++) {
        const int_matrix *mx = &ir->m[m];
        batched[m] = env->fused && (mx->rows || (can_batch && env->batch > 1));
        if (!batched[m]) {
            per_lane = 1;
            continue;
        }
        faid_launch *l =
            faid_plan_add(p, files, 2, opts, mx->rows ? "faid_rows_raw" : "faid_integrate_raw_b");
        if (!l)
            break;
        matrix_range(env, mx, l);
        l->ev = EV_BINT1 + m;
        int out_off, out_stride, sum_off, sum_stride;
        faid_restab_out(res->rt, M_PROF[m], &out_off, &out_stride);
        faid_restab_out(res->rt, M_SUMS[m], &sum_off, &sum_stride);
        faid_pa_buf(l, "raw", "raw");
        if (mx->rows)
            faid_pa_uint(l, "raw_off", 0, 0);
        faid_pa_uint(l, "raw_stride", (uint32_t)raw_lane, 0);
        faid_pa_nframes(l, "nframes");
        if (mx->enorm && !mx->rows)
            arg_corr(l, res, ir, M_EDARK[m], M_ENORM[m]);
        else
            arg_corr(l, res, ir, "dark", "normp");
        arg_matrix(l, res, ir, m);
        faid_pa_int(l, "out_off", out_off, 0);
        faid_pa_int(l, "out_stride", out_stride, 0);
        faid_pa_int(l, "sum_off", sum_off, 0);
        faid_pa_int(l, "sum_stride", sum_stride, 0);
        if (!mx->rows)
            faid_pa_local(l, "scratch", ACC_BYTES);
    }
    if (per_lane && !env->fused) {
        faid_launch *l = faid_plan_add(p, files, 2, opts, "faid_preprocess");
        if (l) {
            l->lws = faid_stage_pixel_wg(env);
            l->items = res->npix;
            l->per_lane = 1;
            l->ev = EV_PRE;
            faid_pa_buf(l, "raw", "raw");
            arg_corr(l, res, ir, "dark", "normp");
            faid_pa_int(l, "npix", (int32_t)res->npix, 0);
            faid_pa_buf(l, "out", "pre");
            faid_pa_uint(l, "raw_off", 0, raw_lane);
        }
    }
    for (int m = 0; per_lane && m < nm; m++) {
        const int_matrix *mx = &ir->m[m];
        if (batched[m])
            continue;
        const char *kernel = mx->rows     ? "faid_rows_pre" /* unfused: fused rows are batched */
                             : env->fused ? "faid_integrate_raw"
                                          : "faid_integrate_pre";
        faid_launch *l = faid_plan_add(p, files, 2, opts, kernel);
        if (!l)
            break;
        matrix_range(env, mx, l);
        l->per_lane = 1;
        l->ev = EV_INT1 + m;
        int out_off, out_stride, sum_off, sum_stride;
        faid_restab_out(res->rt, M_PROF[m], &out_off, &out_stride);
        faid_restab_out(res->rt, M_SUMS[m], &sum_off, &sum_stride);
        if (env->fused) {
            faid_pa_buf(l, "raw", "raw");
            arg_corr(l, res, ir, "dark", "normp");
            faid_pa_uint(l, "raw_off", 0, raw_lane);
        } else {
            faid_pa_buf(l, "pre", "pre");
        }
        arg_matrix(l, res, ir, m);
        faid_pa_int(l, "out_off", out_off, out_stride);
        faid_pa_int(l, "sum_off", sum_off, sum_stride);
        if (!mx->rows)
            faid_pa_local(l, "scratch", ACC_BYTES);
    }
    return faid_plan_check(p, "integrate", d);
}

/* The first `arrays` of I..count from src, the sums from sums (NULL: not read back, left as
 * they were). */
static void copy_profile(faid_profile *p, const float *src, int arrays, const float *sums)
{
    size_t n = (size_t)p->nbins;
    float *dst[NOUT] = {p->I,          p->sigma,    p->std,          p->count,
                        p->sum_signal, p->sum_norm, p->sum_variance, p->sum_norm_sq};
    for (int k = 0; k < arrays; k++)
        memcpy(dst[k], src + (size_t)k * n, n * sizeof(float));
    for (int k = 4; sums && k < NOUT; k++)
        memcpy(dst[k], sums + (size_t)(k - 4) * n, n * sizeof(float));
}

static int int_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                       const float *h_lane, faid_result *r, faid_diag *d)
{
    (void)sl;
    (void)lane;
    (void)d;
    int po, ps, so, ss;
    faid_restab_out(res->rt, "p1d", &po, &ps);
    faid_restab_out(res->rt, "s1d", &so, &ss);
    copy_profile(r->p1d, h_lane + po, 4, h_lane + so);
    if (res->setup->csr2d && r->p2d) {
        faid_restab_out(res->rt, "p2d", &po, &ps);
        faid_restab_out(res->rt, "s2d", &so, &ss);
        copy_profile(r->p2d, h_lane + po, env->sums2d ? 4 : env->cake_arrays,
                     env->sums2d ? h_lane + so : NULL);
    }
    return FAID_OK;
}

static void int_times(const faid_stage_slot *sl, int lane, int id, faid_stage_times *t)
{
    const double *us = sl->lane[lane].us[id];
    const double share = 1.0 / sl->n;
    t->preprocess_us += us[EV_PRE];
    t->integrate_us +=
        (sl->us[id][EV_BINT1] + sl->us[id][EV_BINT2]) * share + us[EV_INT1] + us[EV_INT2];
}

/* The profile with its normalization sum (optional: output.extra), and the cake (its std and sums
 * travel, unpublished). */
static const faid_output_decl int_outputs[] = {
    FAID_OUTPUT(I, F32, BINS, faid_profile, I),
    FAID_OUTPUT(SIGMA, F32, BINS, faid_profile, sigma),
    FAID_OUTPUT(STD, F32, BINS, faid_profile, std),
    FAID_OUTPUT(COUNT, F32, BINS, faid_profile, count),
    FAID_OUTPUT_OPTIONAL(SUM_NORMALIZATION, F32, BINS, faid_profile, sum_norm),
    FAID_OUTPUT(I2D, F32, CAKE, faid_profile, I),
    FAID_OUTPUT(SIGMA2D, F32, CAKE, faid_profile, sigma),
    FAID_OUTPUT(COUNT2D, F32, CAKE, faid_profile, count),
};

static const faid_time_decl int_timings[] = {
    FAID_TIME("preprocess", PREPROCESS_US, preprocess_us, 1,
              "dark, flat, mask, dummy and normalisation"),
    FAID_TIME("integrate", INTEGRATE_US, integrate_us, 1,
              "the sparse-matrix integration (this frame's share of a batch)"),
};

const faid_stage faid_stage_integrate = {
    .name = "integrate",
    .declare = int_declare,
    .release = int_release,
    .ref_run = int_ref_run,
    .plan = int_plan,
    .collect = int_collect,
    .times = int_times,
    .outputs = int_outputs,
    .noutputs = FAID_NROWS(int_outputs),
    .timings = int_timings,
    .ntimings = FAID_NROWS(int_timings),
};

int faid_stage_integrate_matrix(const faid_stage_res *res, int which, size_t *wg, int *rows)
{
    const int_res *ir = res->state[faid_stage_id(&faid_stage_integrate)];
    *wg = 0;
    *rows = 0;
    if (!ir || which < 0 || which > 1 || !ir->m[which].present)
        return 0;
    *wg = ir->m[which].wg;
    *rows = ir->m[which].rows;
    return 1;
}
