/* faid_stage_integrate: preprocessing and azimuthal integration of the decoded frame ("raw"),
 * 1D and the optional 2D cake, into the profiles of the result.
 *
 * Buffers (per setup): normp (normalization x flat x solid angle x polarization folded per
 * pixel, 0 where a pixel can never contribute: mask, dummy flat, NaN), dark (or the one-element
 * placeholder "one"), per matrix m0 (1D) / m1 (2D) indptr, indices, coef; per slot: pre (float4
 * per pixel, unfused path only). Outputs per lane: p1d (I, sigma, std, count), s1d (the four
 * sums), p2d, s2d (read back only with sums_2d on).
 *
 * Kernels (kernels/process/, one program per frame dtype and error model, NBATCH = batch):
 * fused, one launch per matrix for the whole slot (faid_rows_raw in rows mode, or
 * faid_integrate_raw_b for error models none/poisson with batch > 1), else frame after frame
 * (faid_integrate_raw; unfused faid_preprocess then faid_integrate_pre / faid_rows_pre).
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
} int_matrix;

/* The process program's kernels, by index into KERNELS. */
static const char *const KERNELS[] = {"faid_integrate_raw", "faid_integrate_raw_b",
                                      "faid_rows_raw",      "faid_rows_pre",
                                      "faid_integrate_pre", "faid_preprocess"};
#define NKERNELS (int)(sizeof KERNELS / sizeof KERNELS[0])
_Static_assert((FAID_DT_BOOL + 1) * NKERNELS <= FAID_STAGE_KC, "kernel cache keys");

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

static int is_dummy_f(float x, float dummy, float delta)
{
    return delta != 0.0f ? fabsf(x - dummy) <= delta : x == dummy;
}

/* Folds the static per-pixel factors in the reference's float32 order (faid_ref_preprocess:
 * normalization x flat x polarization x solid angle); 0 marks a pixel that can never contribute
 * (masked, flat equal to the dummy, non-finite or zero norm). As in the reference, a flat equal to
 * 0 is rejected even without dummy checking (pyFAI's placeholder dummy). */
static void fold_norm(const faid_corrections *c, float *normp)
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
static size_t choose_wg(const faid_cl_device_info *dev, const faid_csr *csr, size_t override)
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

static int declare_matrix(faid_stage_env *env, faid_stage_res *res, int_res *ir, int k,
                          const faid_csr *csr, faid_diag *d)
{
    int_matrix *m = &ir->m[k];
    m->present = 1;
    m->nbins = csr->nbins;
    m->has_coef = csr->data != NULL && csr->nnz > 0;
    m->rows = choose_rows(csr, env->rows_env);
    m->wg = choose_wg(&env->ctx->info, csr, env->wg_override);
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
    return rc;
}

static int int_declare(faid_stage_env *env, faid_stage_res *res, int id, faid_diag *d)
{
    const faid_setup *s = res->setup;
    int_res *ir = calloc(1, sizeof *ir);
    if (!ir)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    res->state[id] = ir;
    if (!env->ctx)
        return faid_restab_static(res->rt, "pre", s->npix * 4 * sizeof(float), NULL, d);
    float *normp = malloc(s->npix * sizeof(float));
    if (!normp)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory for %zu pixels", s->npix);
    fold_norm(&s->corr, normp);
    const float one = 1.0f;
    int rc = faid_restab_static(res->rt, "one", sizeof one, &one, d);
    if (!rc)
        rc = faid_restab_static(res->rt, "normp", s->npix * sizeof(float), normp, d);
    free(normp);
    ir->do_dark = s->corr.dark != NULL;
    if (!rc)
        rc = ir->do_dark
                 ? faid_restab_static(res->rt, "dark", s->npix * sizeof(float), s->corr.dark, d)
                 : faid_restab_alias(res->rt, "dark", "one", d);
    if (!rc)
        rc = declare_matrix(env, res, ir, 0, s->csr, d);
    if (!rc && s->csr2d)
        rc = declare_matrix(env, res, ir, 1, s->csr2d, d);
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

/* The kernel `name` of the process program for frames of dtype dt. */
static int get_kernel(faid_stage_env *env, faid_stage_res *res, faid_dtype dt, const char *name,
                      faid_kernel **k, faid_diag *d)
{
    int code = faid_stage_raw_code(dt);
    if (!code)
        return faid_fail(d, FAID_EDTYPE,
                         "frame dtype %s is not supported (uint8/16/32, "
                         "int8/16/32, float32)",
                         faid_dtype_name(dt));
    int ki = 0;
    while (ki < NKERNELS && KERNELS[ki] != name && strcmp(KERNELS[ki], name) != 0)
        ki++; /* the callers' literals are usually KERNELS' own: no string compare */
    /* resolved once per dtype and setup (faid_stage_kslot) */
    faid_kernel **slot = ki < NKERNELS && (int)dt >= 0 && (int)dt <= FAID_DT_BOOL
                             ? faid_stage_kslot(env, res, faid_stage_id(&faid_stage_integrate),
                                                (int)dt * NKERNELS + ki)
                             : NULL;
    if (slot && *slot) {
        *k = *slot;
        return FAID_OK;
    }
    faid_error_model em = res->setup->corr.error_model;
    if ((int)em < 0 || (int)em > FAID_EM_AZIMUTHAL)
        return faid_fail(d, FAID_EINVAL, "error model %d unknown", (int)em);
    char opts[128];
    snprintf(opts, sizeof opts, "-D RAW_CODE=%d -D EM=%d -D NBATCH=%d", code, (int)em, env->batch);
    static const char *const files[] = {"process/preprocess.cl", "process/integrate.cl"};
    int rc = faid_progcache_kernel(env->progs, files, 2, opts, name, k, d);
    if (!rc && slot)
        *slot = *k;
    return rc;
}

static int int_cl_prepare(faid_stage_env *env, faid_stage_res *res, int id, faid_dtype dt,
                          faid_diag *d)
{
    (void)id;
    faid_kernel *k;
    return get_kernel(env, res, dt, "faid_integrate_raw", &k, d);
}

/* The correction flags every raw-reading kernel takes (do_dark, do_dummy, dummy, delta_dummy)
 * and the static per-pixel arrays. */
static int bind_corr(faid_kernel *k, const faid_stage_res *res, const int_res *ir, faid_diag *d)
{
    const faid_corrections *c = &res->setup->corr;
    int rc = faid_karg_mem(k, "dark", faid_restab_mem(res->rt, "dark", 0), d);
    if (!rc)
        rc = faid_karg_mem(k, "normp", faid_restab_mem(res->rt, "normp", 0), d);
    if (!rc)
        rc = faid_karg_int(k, "do_dark", ir->do_dark, d);
    if (!rc)
        rc = faid_karg_int(k, "do_dummy", c->do_dummy, d);
    if (!rc)
        rc = faid_karg_float(k, "dummy", c->dummy, d);
    if (!rc)
        rc = faid_karg_float(k, "delta_dummy", c->delta_dummy, d);
    return rc;
}

/* The matrix m and the output buffer, as every integration kernel takes them. */
static int bind_matrix(faid_kernel *k, const faid_stage_res *res, const int_res *ir, int m,
                       const faid_stage_slot *sl, faid_diag *d)
{
    const int_matrix *mx = &ir->m[m];
    int rc = faid_karg_mem(k, "indptr", faid_restab_mem(res->rt, M_INDPTR[m], 0), d);
    if (!rc)
        rc = faid_karg_mem(k, "indices", faid_restab_mem(res->rt, M_INDICES[m], 0), d);
    if (!rc)
        rc = faid_karg_mem(k, "coef", faid_restab_mem(res->rt, M_COEF[m], 0), d);
    if (!rc)
        rc = faid_karg_int(k, "has_coef", mx->has_coef, d);
    if (!rc)
        rc = faid_karg_int(k, "nbins", mx->nbins, d);
    if (!rc)
        rc = faid_karg_float(k, "empty", res->setup->corr.empty, d);
    if (!rc)
        rc = faid_karg_mem(k, "out", faid_restab_mem(res->rt, "out", sl->index), d);
    return rc;
}

/* The chosen work-group size, halved while the compiled kernel cannot take it (a property of
 * device and program, so still the same on every run). */
static size_t launch_wg(size_t wg, size_t kmax)
{
    while (kmax && wg > kmax && wg > 1)
        wg >>= 1;
    return wg;
}

/* Local and global size of a rows-mode launch over nbins work-items. */
static void rows_range(const faid_stage_env *env, size_t kmax, int nbins, size_t *lws, size_t *gws)
{
    size_t l = env->ctx->info.is_gpu ? 128 : 16;
    if (env->ctx->info.max_wg && l > env->ctx->info.max_wg)
        l = env->ctx->info.max_wg;
    l = launch_wg(l, kmax);
    *lws = l;
    *gws = ((size_t)nbins + l - 1) / l * l;
}

/* Enqueues the integration of the slot's n frames: one launch per matrix for the whole batch
 * (fused kernels in rows mode, or error models none and poisson with batch > 1), else the
 * one-frame kernels lane after lane. */
static int int_cl_close(faid_stage_env *env, faid_stage_res *res, int id, faid_stage_slot *sl,
                        faid_diag *d)
{
    const int_res *ir = res->state[id];
    cl_command_queue q = sl->q;
    const size_t esz = faid_dtype_size(sl->dtype);
    const size_t raw_stride = faid_restab_lane_bytes(res->rt, "raw");
    cl_mem d_raw = faid_restab_mem(res->rt, "raw", sl->index);
    const int nm = ir->m[1].present ? 2 : 1;
    const int can_batch = res->setup->corr.error_model != FAID_EM_AZIMUTHAL;
    int rc = FAID_OK;
    int batched[2] = {0, 0}, per_lane = !env->fused;
    for (int m = 0; m < nm; m++) {
        const int_matrix *mx = &ir->m[m];
        batched[m] = env->fused && (mx->rows || (can_batch && env->batch > 1));
        if (!batched[m]) {
            per_lane = 1;
            continue;
        }
        faid_kernel *k;
        if ((rc = get_kernel(env, res, sl->dtype,
                             mx->rows ? "faid_rows_raw" : "faid_integrate_raw_b", &k, d)))
            return rc;
        size_t lws, gws;
        if (mx->rows) {
            rows_range(env, k->kwg, mx->nbins, &lws, &gws);
        } else {
            lws = launch_wg(mx->wg, k->kwg);
            gws = (size_t)mx->nbins * lws;
        }
        int out_off, out_stride, sum_off, sum_stride;
        faid_restab_out(res->rt, M_PROF[m], &out_off, &out_stride);
        faid_restab_out(res->rt, M_SUMS[m], &sum_off, &sum_stride);
        rc = faid_karg_mem(k, "raw", d_raw, d);
        if (!rc && mx->rows)
            rc = faid_karg_uint(k, "raw_off", 0, d);
        if (!rc)
            rc = faid_karg_uint(k, "raw_stride", (cl_uint)(raw_stride / esz), d);
        if (!rc)
            rc = faid_karg_int(k, "nframes", sl->n, d);
        if (!rc)
            rc = bind_corr(k, res, ir, d);
        if (!rc)
            rc = bind_matrix(k, res, ir, m, sl, d);
        if (!rc)
            rc = faid_karg_int(k, "out_off", out_off, d);
        if (!rc)
            rc = faid_karg_int(k, "out_stride", out_stride, d);
        if (!rc)
            rc = faid_karg_int(k, "sum_off", sum_off, d);
        if (!rc)
            rc = faid_karg_int(k, "sum_stride", sum_stride, d);
        if (!rc && !mx->rows)
            rc = faid_karg_local(k, "scratch", lws * ACC_BYTES, d);
        if (!rc)
            rc = faid_kernel_launch(q, k, gws, lws, &sl->ev[id][EV_BINT1 + m], d);
        if (rc)
            return rc;
    }
    for (int f = 0; per_lane && f < sl->n; f++) {
        faid_stage_lane *ln = &sl->lane[f];
        const cl_uint raw_off = (cl_uint)((size_t)f * raw_stride / esz);
        cl_mem d_pre = env->fused ? NULL : faid_restab_mem(res->rt, "pre", sl->index);
        if (!env->fused) {
            faid_kernel *k;
            if ((rc = get_kernel(env, res, sl->dtype, "faid_preprocess", &k, d)))
                return rc;
            rc = faid_karg_mem(k, "raw", d_raw, d);
            if (!rc)
                rc = bind_corr(k, res, ir, d);
            if (!rc)
                rc = faid_karg_int(k, "npix", (cl_int)res->npix, d);
            if (!rc)
                rc = faid_karg_mem(k, "out", d_pre, d);
            if (!rc)
                rc = faid_karg_uint(k, "raw_off", raw_off, d);
            size_t lws = env->ctx->info.is_gpu ? 256 : 64;
            if (lws > env->ctx->info.max_wg)
                lws = env->ctx->info.max_wg;
            size_t gws = (res->npix + lws - 1) / lws * lws;
            if (!rc)
                rc = faid_kernel_launch(q, k, gws, lws, &ln->ev[id][EV_PRE], d);
            if (rc)
                return rc;
        }
        for (int m = 0; m < nm; m++) {
            const int_matrix *mx = &ir->m[m];
            if (batched[m])
                continue;
            int out_off, out_stride, sum_off, sum_stride;
            faid_restab_out(res->rt, M_PROF[m], &out_off, &out_stride);
            faid_restab_out(res->rt, M_SUMS[m], &sum_off, &sum_stride);
            out_off += f * out_stride;
            sum_off += f * sum_stride;
            size_t lws, gws;
            faid_kernel *k;
            if (mx->rows) { /* unfused here: fused rows are always batched */
                if ((rc = get_kernel(env, res, sl->dtype, "faid_rows_pre", &k, d)))
                    return rc;
                rows_range(env, k->kwg, mx->nbins, &lws, &gws);
            } else {
                if ((rc = get_kernel(env, res, sl->dtype,
                                     env->fused ? "faid_integrate_raw" : "faid_integrate_pre", &k,
                                     d)))
                    return rc;
                lws = launch_wg(mx->wg, k->kwg);
                gws = (size_t)mx->nbins * lws;
            }
            if (env->fused) {
                rc = faid_karg_mem(k, "raw", d_raw, d);
                if (!rc)
                    rc = bind_corr(k, res, ir, d);
                if (!rc)
                    rc = faid_karg_uint(k, "raw_off", raw_off, d);
            } else {
                rc = faid_karg_mem(k, "pre", d_pre, d);
            }
            if (!rc)
                rc = bind_matrix(k, res, ir, m, sl, d);
            if (!rc)
                rc = faid_karg_int(k, "out_off", out_off, d);
            if (!rc)
                rc = faid_karg_int(k, "sum_off", sum_off, d);
            if (!rc && !mx->rows)
                rc = faid_karg_local(k, "scratch", lws * ACC_BYTES, d);
            if (!rc)
                rc = faid_kernel_launch(q, k, gws, lws, &ln->ev[id][EV_INT1 + m], d);
            if (rc)
                return rc;
        }
    }
    return FAID_OK;
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

static int int_cl_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
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
    const cl_event *ev = sl->lane[lane].ev[id];
    const double share = 1.0 / sl->n;
    t->preprocess_us += faid_stage_ev_us(ev[EV_PRE]);
    t->integrate_us +=
        (faid_stage_ev_us(sl->ev[id][EV_BINT1]) + faid_stage_ev_us(sl->ev[id][EV_BINT2])) * share +
        faid_stage_ev_us(ev[EV_INT1]) + faid_stage_ev_us(ev[EV_INT2]);
}

const faid_stage faid_stage_integrate = {
    .name = "integrate",
    .declare = int_declare,
    .release = int_release,
    .ref_run = int_ref_run,
    .cl_prepare = int_cl_prepare,
    .cl_close = int_cl_close,
    .cl_collect = int_cl_collect,
    .times = int_times,
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
