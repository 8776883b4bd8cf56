/* faid_device_cl: the OpenCL device's ops table. Runs the stages of faid_stages[] on one device:
 * one context (its queue serves uploads and mappings), a program cache, per slot an in-order
 * profiling queue. At submit every stage's cl_submit (decode) enqueues its commands without
 * waiting; when a slot closes (full, collected, or a frame of another dtype arrives) every
 * enabled stage's cl_close enqueues its launches for all the slot's frames and one D2H brings
 * every read-back output segment of every lane (faid_restab.h); collect waits for that copy,
 * lets each stage check (decode error flag) and then take its outputs and times.
 *
 * Separate queues let the device overlap the H2D copy of one frame with the kernels of another;
 * the host prepares frame n+1 while the device works on frame n. */
#include "faid_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cl_open(faid_stage_env *env, const char *device, char *name, size_t name_len,
                   faid_diag *d)
{
    faid_cl_device_info info;
    if (faid_cl_select(device, &info, d))
        return d ? d->code : FAID_ENODEV;
    env->ctx = faid_cl_ctx_new(&info, 1, d);
    if (!env->ctx)
        return d && d->code ? d->code : FAID_ECL;
    env->progs = faid_progcache_new(env->ctx);
    if (!env->progs) {
        faid_cl_ctx_destroy(&env->ctx);
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    }
    snprintf(name, name_len, "%s (%s)", info.name, info.platform_name);
    return FAID_OK;
}

static void cl_close(faid_stage_env *env)
{
    faid_progcache_destroy(&env->progs);
    faid_cl_ctx_destroy(&env->ctx);
}

static int cl_lane_open(faid_stage_env *env, faid_stage_res *res, faid_stage_lane *ln, faid_diag *d)
{
    (void)env;
    return faid_block_table_alloc(&ln->tab, faid_bslz4_max_blocks(res->npix * 4, 1, 0), d);
}

static void cl_lane_close(faid_stage_lane *ln)
{
    faid_block_table_free(&ln->tab);
}

static int cl_slot_open(faid_stage_env *env, faid_stage_slot *sl, faid_diag *d)
{
    cl_int err;
    sl->q = clCreateCommandQueue(env->ctx->context, env->ctx->info.device,
                                 CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        sl->q = NULL;
        return faid_cl_fail(d, err, "clCreateCommandQueue(slot)", __FILE__, __LINE__);
    }
    return FAID_OK;
}

static void cl_slot_reset(faid_stage_slot *sl)
{
    for (int f = 0; f < sl->nlanes; f++)
        for (int s = 0; s < FAID_STAGE_MAX; s++)
            for (int i = 0; i < FAID_STAGE_EV; i++)
                faid_stage_release_event(&sl->lane[f].ev[s][i]);
    for (int s = 0; s < FAID_STAGE_MAX; s++)
        for (int i = 0; i < FAID_STAGE_EV; i++)
            faid_stage_release_event(&sl->ev[s][i]);
    faid_stage_release_event(&sl->ev_d2h);
    sl->n = sl->ncol = sl->closed = 0;
}

static void cl_slot_close(faid_stage_env *env, faid_stage_slot *sl)
{
    (void)env;
    if (sl->q)
        clFinish(sl->q);
    cl_slot_reset(sl);
    if (sl->q)
        clReleaseCommandQueue(sl->q);
    sl->q = NULL;
}

static int cl_prepare(faid_stage_env *env, faid_stage_res *res, faid_dtype dt, faid_diag *d)
{
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        int rc;
        if (res->enabled[i] && st->cl_prepare && (rc = st->cl_prepare(env, res, i, dt, d)))
            return rc;
    }
    return FAID_OK;
}

static int cl_submit(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                     const faid_frame *f, const faid_block_table *table, faid_diag *d)
{
    int rc;
    /* the programs of the downstream stages first: a frame they cannot take is refused here */
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (res->enabled[i] && st->cl_close && st->cl_prepare &&
            (rc = st->cl_prepare(env, res, i, f->dtype, d)))
            return rc;
    }
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (res->enabled[i] && st->cl_submit &&
            (rc = st->cl_submit(env, res, i, sl, lane, f, table, d)))
            return rc;
    }
    return FAID_OK;
}

static int cl_close_slot(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl,
                         faid_diag *d)
{
    int rc = FAID_OK;
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (res->enabled[i] && st->cl_close && (rc = st->cl_close(env, res, i, sl, d)))
            goto fail;
    }
    /* every read-back output of every lane in one copy; where a segment is read only in part
     * (a lean cake: 1.44 of 5.76 MB per lane at 360 x 1000), the prefix of each lane block, in
     * one rectangular copy */
    const size_t stride = faid_restab_out_stride(res->rt) * sizeof(float);
    const size_t want = faid_restab_out_read(res->rt) * sizeof(float);
    cl_mem out = faid_restab_mem(res->rt, "out", sl->index);
    void *h_out = faid_restab_host(res->rt, "out", sl->index);
    if (want == stride)
        FAID_CL_TRY_GOTO(d, rc, fail,
                         clEnqueueReadBuffer(sl->q, out, CL_FALSE, 0, (size_t)sl->n * stride, h_out,
                                             0, NULL, &sl->ev_d2h));
    else {
        const size_t origin[3] = {0, 0, 0}, region[3] = {want, (size_t)sl->n, 1};
        FAID_CL_TRY_GOTO(d, rc, fail,
                         clEnqueueReadBufferRect(sl->q, out, CL_FALSE, origin, origin, region,
                                                 stride, 0, stride, 0, h_out, 0, NULL,
                                                 &sl->ev_d2h));
    }
    FAID_CL_TRY_GOTO(d, rc, fail, clFlush(sl->q));
    sl->closed = 1;
    return FAID_OK;
fail:
    clFinish(sl->q);
    for (int s = 0; s < FAID_STAGE_MAX; s++)
        for (int i = 0; i < FAID_STAGE_EV; i++)
            faid_stage_release_event(&sl->ev[s][i]);
    faid_stage_release_event(&sl->ev_d2h);
    return rc;
}

/* Waits for (or polls) the slot's D2H, lets the stages check lane `lane` and take their outputs
 * and times into r. FAID_EBUSY only when polling found it unfinished (nothing consumed). */
static int cl_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                      faid_result *r, int block, faid_diag *d)
{
    faid_stage_lane *ln = &sl->lane[lane];
    int rc = FAID_ECL;
    if (!sl->closed && (rc = cl_close_slot(env, res, sl, d)))
        goto out;
    rc = FAID_ECL;
    if (!block) {
        cl_int st = CL_COMPLETE;
        FAID_CL_TRY_GOTO(
            d, rc, out,
            clGetEventInfo(sl->ev_d2h, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        if (st > CL_COMPLETE)
            return FAID_EBUSY;
    }
    FAID_CL_TRY_GOTO(d, rc, out, clWaitForEvents(1, &sl->ev_d2h));
    const float *h = (const float *)faid_restab_host(res->rt, "out", sl->index) +
                     (size_t)lane * faid_restab_out_stride(res->rt);
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (res->enabled[i] && st->cl_check && (rc = st->cl_check(env, res, sl, lane, h, d)))
            goto out;
    }
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (res->enabled[i] && st->cl_collect && (rc = st->cl_collect(env, res, sl, lane, h, r, d)))
            goto out;
    }
    memset(&r->t, 0, sizeof r->t);
    for (int i = 0; faid_stages[i]; i++)
        if (res->enabled[i] && faid_stages[i]->times)
            faid_stages[i]->times(sl, lane, i, &r->t);
    r->t.d2h_us = faid_stage_ev_us(sl->ev_d2h) / sl->n;
    r->t.transfer_us = r->t.h2d_us + r->t.d2h_us;
    r->t.batch = sl->n;
    r->t.total_us = faid_stage_now_us() - ln->t_submit;
    rc = FAID_OK;
out:
    if (rc)
        clFinish(sl->q);
    for (int s = 0; s < FAID_STAGE_MAX; s++)
        for (int i = 0; i < FAID_STAGE_EV; i++)
            faid_stage_release_event(&ln->ev[s][i]);
    return rc;
}

static void cl_flush(faid_stage_slot *sl)
{
    clFlush(sl->q);
}

static void cl_finish(faid_stage_slot *sl)
{
    clFinish(sl->q);
}

static void *cl_host_alloc(faid_stage_env *env, size_t bytes, void **handle, faid_diag *d)
{
    cl_mem m = faid_cl_buffer(env->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, d);
    if (!m)
        return NULL;
    cl_int err;
    void *p = clEnqueueMapBuffer(env->ctx->queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes,
                                 0, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        faid_cl_fail(d, err, "clEnqueueMapBuffer(host)", __FILE__, __LINE__);
        clReleaseMemObject(m);
        return NULL;
    }
    *handle = m;
    return p;
}

static void cl_host_free(faid_stage_env *env, void *ptr, void *handle)
{
    cl_mem m = handle;
    clEnqueueUnmapMemObject(env->ctx->queue, m, ptr, 0, NULL, NULL);
    clFinish(env->ctx->queue);
    clReleaseMemObject(m);
}

static int cl_slot_buffer(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                          void **ptr, size_t *cap, faid_diag *d)
{
    (void)env;
    if (faid_stage_decode_slot_buffer(res, sl->index, lane, ptr, cap))
        return faid_fail(d, FAID_EINVAL, "engine: no staging buffer");
    return FAID_OK;
}

const faid_devops faid_devops_cl = {
    .kind = "opencl",
    .open = cl_open,
    .close = cl_close,
    .lane_open = cl_lane_open,
    .lane_close = cl_lane_close,
    .slot_open = cl_slot_open,
    .slot_close = cl_slot_close,
    .slot_reset = cl_slot_reset,
    .prepare = cl_prepare,
    .submit = cl_submit,
    .close_slot = cl_close_slot,
    .collect = cl_collect,
    .flush = cl_flush,
    .finish = cl_finish,
    .host_alloc = cl_host_alloc,
    .host_free = cl_host_free,
    .slot_buffer = cl_slot_buffer,
};
