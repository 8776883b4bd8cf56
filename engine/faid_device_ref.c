/* faid_device_ref: the reference device's ops table. Runs every enabled stage's ref_run (plain C,
 * float64 sums: faid_reduce_ref.c and the stages' own references) on the host at submit, into the
 * lane's own result; collect hands that result over. Buffers of the resource table are host
 * memory; the device has no queue, no programs and no events, and its times come from the host
 * clock. */
#include "faid_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ref_open(faid_stage_env *env, const char *device, char *name, size_t name_len,
                    faid_diag *d)
{
    (void)env;
    (void)device;
    (void)d;
    snprintf(name, name_len, "reference C");
    return FAID_OK;
}

static void ref_close(faid_stage_env *env)
{
    (void)env;
}

static faid_restab *ref_restab_new(faid_stage_env *env)
{
    (void)env;
    return faid_restab_new(NULL);
}

static int ref_lane_open(faid_stage_env *env, faid_stage_res *res, faid_stage_lane *ln,
                         faid_diag *d)
{
    (void)env;
    ln->ref_res = faid_result_new(res->setup);
    return ln->ref_res ? FAID_OK : faid_fail(d, FAID_ENOMEM, "engine: out of memory");
}

static void ref_lane_close(faid_stage_lane *ln)
{
    faid_result_destroy(&ln->ref_res);
    free(ln->ref_stage);
    ln->ref_stage = NULL;
}

static int ref_slot_open(faid_stage_env *env, faid_stage_slot *sl, faid_diag *d)
{
    (void)env;
    (void)sl;
    (void)d;
    return FAID_OK;
}

static void ref_slot_reset(faid_stage_slot *sl)
{
    sl->n = sl->ncol = sl->closed = 0;
}

static void ref_slot_close(faid_stage_env *env, faid_stage_slot *sl)
{
    (void)env;
    ref_slot_reset(sl);
}

static int ref_prepare(faid_stage_env *env, faid_stage_res *res, faid_dtype dt, faid_diag *d)
{
    (void)env;
    (void)res;
    return faid_stage_raw_code(dt)
               ? FAID_OK
               : faid_fail(d, FAID_EDTYPE, "frame dtype %s is not supported", faid_dtype_name(dt));
}

static int ref_submit(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                      const faid_frame *f, const faid_block_table *table, faid_diag *d)
{
    (void)table;
    faid_ref_frame fr = {f, sl->lane[lane].ref_res};
    memset(&fr.res->t, 0, sizeof fr.res->t);
    double t0 = faid_stage_now_us();
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        int rc;
        if (res->enabled[i] && st->ref_run && (rc = st->ref_run(env, res, &fr, d)))
            return rc;
    }
    fr.res->t.total_us = faid_stage_now_us() - t0;
    return FAID_OK;
}

static int ref_close_slot(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl,
                          faid_diag *d)
{
    (void)env;
    (void)res;
    (void)d;
    sl->closed = 1;
    return FAID_OK;
}

static void profile_assign(faid_profile *dst, const faid_profile *src)
{
    size_t n = (size_t)src->nbins * sizeof(float);
    memcpy(dst->I, src->I, n);
    memcpy(dst->sigma, src->sigma, n);
    memcpy(dst->std, src->std, n);
    memcpy(dst->count, src->count, n);
    memcpy(dst->sum_signal, src->sum_signal, n);
    memcpy(dst->sum_norm, src->sum_norm, n);
    memcpy(dst->sum_variance, src->sum_variance, n);
    memcpy(dst->sum_norm_sq, src->sum_norm_sq, n);
}

static int ref_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                       faid_result *r, int block, faid_diag *d)
{
    (void)env;
    (void)res;
    (void)block;
    (void)d;
    const faid_result *src = sl->lane[lane].ref_res;
    profile_assign(r->p1d, src->p1d);
    if (r->p2d && src->p2d)
        profile_assign(r->p2d, src->p2d);
    r->t = src->t;
    if (src->bg && r->bg) {
        size_t n = (size_t)src->bg->nbins * sizeof(float);
        memcpy(r->bg->mean, src->bg->mean, n);
        memcpy(r->bg->std, src->bg->std, n);
        memcpy(r->bg->sem, src->bg->sem, n);
        memcpy(r->bg->count, src->bg->count, n);
    }
    if (src->peaks && r->peaks) {
        const faid_peak_list *a = src->peaks;
        faid_peak_list *b = r->peaks;
        size_t n = (size_t)a->n; /* b->capacity >= a->capacity: checked by check_result */
        memcpy(b->x, a->x, n * sizeof(float));
        memcpy(b->y, a->y, n * sizeof(float));
        memcpy(b->intensity, a->intensity, n * sizeof(float));
        memcpy(b->sigma, a->sigma, n * sizeof(float));
        memcpy(b->snr, a->snr, n * sizeof(float));
        memcpy(b->max_pixel, a->max_pixel, n * sizeof(float));
        memcpy(b->npix, a->npix, n * sizeof(int32_t));
        memcpy(b->index, a->index, n * sizeof(int32_t));
        b->n = a->n;
        b->n_found = a->n_found;
    }
    r->num_peaks = src->num_peaks;
    r->is_hit = src->is_hit;
    return FAID_OK;
}

static void ref_nop(faid_stage_slot *sl)
{
    (void)sl;
}

static void *ref_host_alloc(faid_stage_env *env, size_t bytes, void **handle, faid_diag *d)
{
    (void)env;
    void *p = malloc(bytes);
    if (!p)
        faid_fail(d, FAID_ENOMEM, "engine: out of memory for %zu bytes", bytes);
    *handle = NULL;
    return p;
}

static void ref_host_free(faid_stage_env *env, void *ptr, void *handle)
{
    (void)env;
    (void)handle;
    free(ptr);
}

static int ref_slot_buffer(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                           void **ptr, size_t *cap, faid_diag *d)
{
    (void)env;
    faid_stage_lane *ln = &sl->lane[lane];
    size_t n = faid_stage_max_comp(res->npix);
    if (n < res->npix * 4)
        n = res->npix * 4;
    if (!ln->ref_stage && !(ln->ref_stage = malloc(n)))
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    *ptr = ln->ref_stage;
    *cap = n;
    return FAID_OK;
}

const faid_devops faid_devops_ref = {
    .kind = "ref",
    .open = ref_open,
    .close = ref_close,
    .restab_new = ref_restab_new,
    .lane_open = ref_lane_open,
    .lane_close = ref_lane_close,
    .slot_open = ref_slot_open,
    .slot_close = ref_slot_close,
    .slot_reset = ref_slot_reset,
    .prepare = ref_prepare,
    .submit = ref_submit,
    .close_slot = ref_close_slot,
    .collect = ref_collect,
    .flush = ref_nop,
    .finish = ref_nop,
    .host_alloc = ref_host_alloc,
    .host_free = ref_host_free,
    .slot_buffer = ref_slot_buffer,
};
