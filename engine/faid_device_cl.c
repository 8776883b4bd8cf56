/* faid_device_cl: the OpenCL device's ops table. Runs the stages of faid_stages[] on one device:
 * one context (its queue serves uploads and mappings), a program cache, the device decoders
 * (faid_clcodec, one per element size), per slot an in-order profiling queue. Every OpenCL call
 * of the engine's frame path is here or in the device's helpers (faid_cl, faid_clcodec,
 * faid_progcache, faid_restab, faid_pinned); the stages only describe their work.
 *
 * At submit every stage's `submit` (decode) does its host work and lists its commands, which
 * are enqueued here without waiting. When a slot closes (full, collected, or a frame of another
 * dtype arrives) the stages' launch plans run for all the slot's frames: first every stage's
 * per-slot launches in stage order, then lane after lane every stage's per-lane launches in
 * stage order (so a per-slot scratch buffer used by one lane at a time, such as the peak stages'
 * preprocessed frame, serves every lane), each lane's launches followed by the D2H of that lane's
 * read-back output segments (faid_restab.h), so a frame does not wait for the lanes after it
 * (FAID_ENGINE_SLOT_D2H=1: one D2H of every lane after the last, the path before). Collect waits
 * for the lane's copy, fills the commands' device times, and lets each stage check (decode error
 * flag), then take its outputs and times.
 *
 * A plan is resolved once per setup, frame dtype and slot layout (kernels built, parameters
 * matched to the plan's arguments by name, buffers to resource-table entries) and cached in the
 * setup's device state; per frame only the argument values are set: a lookup of each kernel and
 * argument by name per frame cost a few microseconds per kernel.
 *
 * Separate queues let the device overlap the H2D copy of one frame with the kernels of another;
 * the host prepares frame n+1 while the device works on frame n. */
#include "faid_stage.h"

#include "faid_clcodec.h"
#include "faid_log.h"
#include "faid_progcache.h"
#include "faid_restab_cl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device state (env->dev). */
typedef struct cl_dev {
    faid_cl_ctx *ctx;
    faid_progcache *progs;
    faid_dev_info info;
    faid_clcodec *codec[3]; /* decoders for 1-, 2- and 4-byte elements, built on demand */
    size_t codec_max[3];    /* decoded bytes each was built for */
    int codec_broken[3];    /* building failed once: decode on the CPU, do not retry */
} cl_dev;

/* One argument of a resolved launch: the kernel's parameter index and the value's source. */
typedef struct rarg {
    cl_uint idx;
    faid_plan_arg_kind kind;
    int buf; /* FAID_PA_BUF: resource-table index */
    int32_t i;
    uint32_t u;
    float f;
    int64_t step;
    size_t local; /* bytes for the launch's work-group */
} rarg;

typedef struct rlaunch {
    faid_kernel *k;
    size_t gws, lws;
    int per_lane, ev;
    int narg;
    rarg a[FAID_KERNEL_MAX_ARGS];
} rlaunch;

typedef struct rplan {
    int n;
    rlaunch l[FAID_LAUNCH_MAX];
} rplan;

#define NDT (FAID_DT_BOOL + 1)

/* A setup's device state: its stages' plans per frame dtype, valid for one slot layout and one
 * program cache generation. */
typedef struct cl_res {
    uint64_t rt_gen, pc_gen;
    rplan *plan[NDT][FAID_STAGE_MAX];
} cl_res;

static cl_command_queue queue_of(const faid_stage_slot *sl)
{
    return (cl_command_queue)sl->q;
}

static double ev_us(faid_devent e)
{
    cl_event ev = (cl_event)e;
    if (!ev)
        return 0.0;
    cl_ulong a = 0, b = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) != CL_SUCCESS)
        return 0.0;
    return b > a ? (double)(b - a) * 1e-3 : 0.0;
}

static void release_event(faid_devent *e)
{
    if (*e) {
        clReleaseEvent((cl_event)*e);
        *e = NULL;
    }
}

static int cl_open(faid_stage_env *env, const char *device, char *name, size_t name_len,
                   faid_diag *d)
{
    faid_cl_device_info info;
    if (faid_cl_select(device, &info, d))
        return d ? d->code : FAID_ENODEV;
    cl_dev *dv = calloc(1, sizeof *dv);
    if (!dv)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    dv->ctx = faid_cl_ctx_new(&info, 1, d);
    if (!dv->ctx) {
        free(dv);
        return d && d->code ? d->code : FAID_ECL;
    }
    dv->progs = faid_progcache_new(dv->ctx);
    if (!dv->progs) {
        faid_cl_ctx_destroy(&dv->ctx);
        free(dv);
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    }
    snprintf(dv->info.name, sizeof dv->info.name, "%s", info.name);
    dv->info.is_gpu = info.is_gpu;
    dv->info.max_wg = info.max_wg;
    dv->info.has_fp64 = info.has_fp64;
    dv->info.local_mem = (size_t)info.local_mem;
    env->dev = dv;
    env->info = &dv->info;
    snprintf(name, name_len, "%s (%s)", info.name, info.platform_name);
    return FAID_OK;
}

static void cl_close(faid_stage_env *env)
{
    cl_dev *dv = env->dev;
    if (!dv)
        return;
    for (int i = 0; i < 3; i++)
        faid_clcodec_destroy(&dv->codec[i]);
    faid_progcache_destroy(&dv->progs);
    faid_cl_ctx_destroy(&dv->ctx);
    free(dv);
    env->dev = NULL;
    env->info = NULL;
}

static faid_restab *cl_restab_new(faid_stage_env *env)
{
    return faid_restab_new(((cl_dev *)env->dev)->ctx);
}

static void plans_free(cl_res *cr)
{
    for (int t = 0; t < NDT; t++)
        for (int s = 0; s < FAID_STAGE_MAX; s++) {
            free(cr->plan[t][s]);
            cr->plan[t][s] = NULL;
        }
}

static void cl_res_release(faid_stage_env *env, faid_stage_res *res)
{
    (void)env;
    cl_res *cr = res->dstate;
    if (!cr)
        return;
    plans_free(cr);
    free(cr);
    res->dstate = NULL;
}

static void cl_invalidate(faid_stage_env *env)
{
    faid_progcache_clear(((cl_dev *)env->dev)->progs);
}

/* Builds the kernels of stage `id`'s plan for frames of dtype dt and matches its arguments. */
static int plan_resolve(faid_stage_env *env, faid_stage_res *res, int id, faid_dtype dt,
                        rplan **out, faid_diag *d)
{
    cl_dev *dv = env->dev;
    const faid_stage *st = faid_stages[id];
    faid_plan *p = calloc(1, sizeof *p);
    rplan *rp = calloc(1, sizeof *rp);
    int rc = !p || !rp ? faid_fail(d, FAID_ENOMEM, "engine: out of memory") : FAID_OK;
    if (!rc)
        rc = st->plan(env, res, id, dt, p, d);
    if (!rc)
        rc = faid_plan_check(p, st->name, d);
    for (int i = 0; !rc && i < p->n; i++) {
        const faid_launch *l = &p->l[i];
        rlaunch *r = &rp->l[rp->n++];
        rc = faid_progcache_kernel(dv->progs, l->files, l->nfiles, l->opts, l->kernel, &r->k, d);
        if (rc)
            break;
        size_t lws = l->lws ? l->lws : 1, kmax = r->k->kwg;
        if (l->shrink) {
            while (kmax && lws > kmax && lws > 1)
                lws >>= 1;
        } else if (kmax && kmax < lws) {
            rc = faid_fail(d, FAID_EUNSUP, "%s: %s allows %zu work-items for %s, %zu needed%s%s%s",
                           st->name, dv->info.name, kmax, l->kernel, lws, l->hint ? " (" : "",
                           l->hint ? l->hint : "", l->hint ? ")" : "");
            break;
        }
        r->lws = lws;
        r->gws = l->items ? (l->items + lws - 1) / lws * lws : l->groups * lws;
        r->per_lane = l->per_lane;
        r->ev = l->ev;
        if (r->ev < 0 || r->ev >= FAID_STAGE_EV) {
            rc = faid_fail(d, FAID_EINVAL, "engine: stage %s: event %d of %s out of range",
                           st->name, r->ev, l->kernel);
            break;
        }
        for (int j = 0; !rc && j < r->k->nargs; j++) {
            const faid_plan_arg *a = NULL;
            for (int m = 0; m < l->narg && !a; m++)
                if (strcmp(l->arg[m].name, r->k->arg[j]) == 0)
                    a = &l->arg[m];
            if (!a) {
                rc = faid_fail(d, FAID_EINVAL, "engine: kernel %s launched without argument %s",
                               r->k->name, r->k->arg[j]);
                break;
            }
            rarg *x = &r->a[r->narg++];
            x->idx = (cl_uint)j;
            x->kind = a->kind;
            x->i = a->v.i;
            x->u = a->v.u;
            x->f = a->v.f;
            x->step = a->step;
            x->local = a->local * lws;
            if (a->kind == FAID_PA_BUF && (x->buf = faid_restab_index(res->rt, a->buf)) < 0)
                rc = faid_fail(d, FAID_EINVAL,
                               "engine: stage %s: kernel %s argument %s: no buffer %s", st->name,
                               l->kernel, a->name, a->buf);
        }
    }
    free(p);
    if (rc) {
        free(rp);
        return rc;
    }
    *out = rp;
    return FAID_OK;
}

/* Stage `id`'s resolved plan for dtype dt (NULL when it has none), resolved on first use. */
static int plan_get(faid_stage_env *env, faid_stage_res *res, int id, faid_dtype dt,
                    const rplan **out, faid_diag *d)
{
    cl_dev *dv = env->dev;
    *out = NULL;
    if (!faid_stages[id]->plan)
        return FAID_OK;
    if ((int)dt < 0 || (int)dt >= NDT)
        return faid_fail(d, FAID_EDTYPE, "frame dtype %d is not supported", (int)dt);
    cl_res *cr = res->dstate;
    if (!cr && !(cr = res->dstate = calloc(1, sizeof *cr)))
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    const uint64_t rg = faid_restab_generation(res->rt), pg = faid_progcache_generation(dv->progs);
    if (cr->rt_gen != rg || cr->pc_gen != pg) {
        plans_free(cr);
        cr->rt_gen = rg;
        cr->pc_gen = pg;
    }
    if (!cr->plan[dt][id]) {
        int rc = plan_resolve(env, res, id, dt, &cr->plan[dt][id], d);
        if (rc)
            return rc;
    }
    *out = cr->plan[dt][id];
    return FAID_OK;
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
    cl_dev *dv = env->dev;
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(dv->ctx->context, dv->ctx->info.device,
                                              CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        sl->q = NULL;
        return faid_cl_fail(d, err, "clCreateCommandQueue(slot)", __FILE__, __LINE__);
    }
    sl->q = (faid_dqueue)q;
    return FAID_OK;
}

static void cl_slot_reset(faid_stage_slot *sl)
{
    for (int f = 0; f < sl->nlanes; f++)
        for (int s = 0; s < FAID_STAGE_MAX; s++)
            for (int i = 0; i < FAID_STAGE_EV; i++)
                release_event(&sl->lane[f].ev[s][i]);
    for (int f = 0; f < sl->nlanes; f++)
        release_event(&sl->lane[f].ev_d2h);
    for (int s = 0; s < FAID_STAGE_MAX; s++)
        for (int i = 0; i < FAID_STAGE_EV; i++)
            release_event(&sl->ev[s][i]);
    sl->n = sl->ncol = sl->closed = 0;
}

static void cl_slot_close(faid_stage_env *env, faid_stage_slot *sl)
{
    (void)env;
    if (sl->q)
        clFinish(queue_of(sl));
    cl_slot_reset(sl);
    if (sl->q)
        clReleaseCommandQueue(queue_of(sl));
    sl->q = NULL;
}

static int cl_prepare(faid_stage_env *env, faid_stage_res *res, faid_dtype dt, faid_diag *d)
{
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        const rplan *rp;
        int rc;
        if (!res->enabled[i])
            continue;
        if (st->prepare && (rc = st->prepare(env, res, i, dt, d)))
            return rc;
        if ((rc = plan_get(env, res, i, dt, &rp, d)))
            return rc;
    }
    return FAID_OK;
}

/* The device decoder for elements of esz bytes, able to decode need bytes; NULL when the device
 * cannot host one (the engine then decodes on the CPU; logged once). */
static faid_clcodec *get_codec(cl_dev *dv, size_t esz, size_t need)
{
    int i = esz == 1 ? 0 : esz == 2 ? 1 : 2;
    if (dv->codec[i] && dv->codec_max[i] >= need)
        return dv->codec[i];
    if (dv->codec_broken[i])
        return NULL;
    faid_clcodec_destroy(&dv->codec[i]);
    faid_diag d = {0};
    faid_progcache_build_lock();
    dv->codec[i] = faid_clcodec_new(dv->ctx, esz, need, &d);
    if (!dv->codec[i] && d.code == FAID_ECL) /* see faid_progcache.c, build_lock */
        dv->codec[i] = faid_clcodec_new(dv->ctx, esz, need, &d);
    faid_progcache_build_unlock();
    if (!dv->codec[i]) {
        dv->codec_broken[i] = 1;
        FAID_WARN("engine",
                  "no device decoder for %zu-byte elements on %s, decoding on the CPU: %s", esz,
                  dv->info.name, d.msg);
        return NULL;
    }
    dv->codec_max[i] = need;
    return dv->codec[i];
}

static int cl_decoder(faid_stage_env *env, faid_encoding enc, size_t esz, size_t need,
                      const faid_block_table *t)
{
    faid_clcodec *c = get_codec(env->dev, esz, need);
    if (!c)
        return 0;
    return !t || faid_clcodec_supports(c, enc, t, NULL) == FAID_OK;
}

static void cl_pack_table(const faid_block_table *t, void *dst)
{
    faid_clcodec_pack_table(t, dst);
}

/* Enqueues one command of a stage's submit on the slot's queue. */
static int run_cmd(cl_dev *dv, faid_stage_res *res, faid_stage_slot *sl, const faid_dcmd *x,
                   faid_devent *evp, faid_diag *d)
{
    cl_command_queue q = queue_of(sl);
    cl_event ev = NULL, *pev = evp ? &ev : NULL;
    cl_mem m = faid_restab_mem(res->rt, x->buf, sl->index);
    int rc = FAID_OK;
    if (!m)
        return faid_fail(d, FAID_EINVAL, "engine: command on unknown buffer %s", x->buf);
    switch (x->op) {
    case FAID_DCMD_WRITE:
        FAID_CL_TRY(d,
                    clEnqueueWriteBuffer(q, m, CL_FALSE, x->off, x->bytes, x->src, 0, NULL, pev));
        break;
    case FAID_DCMD_ZERO32: {
        static const cl_int zero = 0;
        FAID_CL_TRY(d,
                    clEnqueueWriteBuffer(q, m, CL_FALSE, x->off, sizeof zero, &zero, 0, NULL, pev));
        break;
    }
    case FAID_DCMD_DECODE: {
        const int i = x->esz == 1 ? 0 : x->esz == 2 ? 1 : 2;
        if (!dv->codec[i])
            return faid_fail(d, FAID_EINVAL, "engine: no device decoder for %zu-byte elements",
                             x->esz);
        faid_clcodec_io io = {m,
                              x->off,
                              m,
                              x->tab_off,
                              faid_restab_mem(res->rt, x->dst, sl->index),
                              x->dst_off,
                              faid_restab_mem(res->rt, "out", sl->index),
                              x->flag_off};
        rc = faid_clcodec_enqueue_io(dv->codec[i], q, x->enc, &io, x->t, 0, NULL, pev, d);
        break;
    }
    default:
        return faid_fail(d, FAID_EINVAL, "engine: unknown device command %d", (int)x->op);
    }
    if (evp)
        *evp = (faid_devent)ev;
    return rc;
}

static int cl_submit(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                     const faid_frame *f, const faid_block_table *table, faid_diag *d)
{
    int rc = FAID_OK;
    /* the plans of the downstream stages first: a frame they cannot take is refused here (the
     * plan cache is shared with a collecting thread's launches: under the engine's lock) */
    pthread_mutex_lock(env->mu);
    for (int i = 0; faid_stages[i] && !rc; i++) {
        const rplan *rp;
        if (res->enabled[i])
            rc = plan_get(env, res, i, f->dtype, &rp, d);
    }
    pthread_mutex_unlock(env->mu);
    if (rc)
        return rc;
    faid_stage_lane *ln = &sl->lane[lane];
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (!res->enabled[i] || !st->submit)
            continue;
        faid_dcmds c;
        c.n = 0;
        if ((rc = st->submit(env, res, i, sl, lane, f, table, &c, d)))
            return rc;
        if (c.n > FAID_DCMD_MAX)
            return faid_fail(d, FAID_EINVAL, "engine: stage %s lists more than %d commands",
                             st->name, FAID_DCMD_MAX);
        /* the enqueues under the engine's lock (the device decoder's kernel arguments) */
        pthread_mutex_lock(env->mu);
        for (int k = 0; k < c.n && !rc; k++) {
            const faid_dcmd *x = &c.c[k];
            faid_devent *evp = x->ev >= 0 && x->ev < FAID_STAGE_EV ? &ln->ev[i][x->ev] : NULL;
            if ((rc = run_cmd(env->dev, res, sl, x, evp, d))) {
                clFinish(queue_of(sl));
                ln->err_dirty = 1; /* the flag's clear may not have run: clear it next time */
                for (int e = 0; e < FAID_STAGE_EV; e++)
                    release_event(&ln->ev[i][e]);
            }
        }
        pthread_mutex_unlock(env->mu);
        if (rc)
            return rc;
    }
    return FAID_OK;
}

/* Sets the arguments of a resolved launch for lane `lane` of sl and enqueues it. */
static int run_launch(faid_stage_res *res, faid_stage_slot *sl, const rlaunch *r, int lane,
                      faid_devent *evp, faid_diag *d)
{
    cl_kernel k = r->k->k;
    for (int j = 0; j < r->narg; j++) {
        const rarg *a = &r->a[j];
        cl_int err;
        switch (a->kind) {
        case FAID_PA_BUF: {
            cl_mem m = faid_restab_mem_at(res->rt, a->buf, sl->index);
            err = clSetKernelArg(k, a->idx, sizeof m, &m);
            break;
        }
        case FAID_PA_INT: {
            cl_int v = (cl_int)(a->i + a->step * lane);
            err = clSetKernelArg(k, a->idx, sizeof v, &v);
            break;
        }
        case FAID_PA_UINT: {
            cl_uint v = (cl_uint)(a->u + a->step * lane);
            err = clSetKernelArg(k, a->idx, sizeof v, &v);
            break;
        }
        case FAID_PA_FLOAT:
            err = clSetKernelArg(k, a->idx, sizeof a->f, &a->f);
            break;
        case FAID_PA_LOCAL:
            err = clSetKernelArg(k, a->idx, a->local, NULL);
            break;
        default: {
            cl_int v = sl->n;
            err = clSetKernelArg(k, a->idx, sizeof v, &v);
            break;
        }
        }
        if (err != CL_SUCCESS) {
            FAID_WARN("engine", "kernel %s argument %s (#%u) not set", r->k->name,
                      r->k->arg[a->idx], a->idx);
            return faid_cl_fail(d, err, "clSetKernelArg", __FILE__, __LINE__);
        }
    }
    cl_event ev = NULL;
    FAID_CL_TRY(d,
                clEnqueueNDRangeKernel(queue_of(sl), k, 1, NULL, &r->gws, &r->lws, 0, NULL, &ev));
    *evp = (faid_devent)ev;
    return FAID_OK;
}

static int cl_close_slot(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl,
                         faid_diag *d)
{
    int rc = FAID_OK;
    const rplan *rp[FAID_STAGE_MAX] = {0};
    int ns = 0;
    for (int i = 0; faid_stages[i]; i++, ns++)
        if (res->enabled[i] && (rc = plan_get(env, res, i, sl->dtype, &rp[i], d)))
            goto fail;
    /* the launches for the whole slot, stage after stage */
    for (int i = 0; i < ns; i++)
        for (int j = 0; rp[i] && j < rp[i]->n; j++) {
            const rlaunch *r = &rp[i]->l[j];
            if (!r->per_lane && (rc = run_launch(res, sl, r, 0, &sl->ev[i][r->ev], d)))
                goto fail;
        }
    /* then lane after lane, every stage's launches of that lane and the read-back of its outputs
     * (where a segment is read only in part, a lean cake: 1.44 of 5.76 MB per lane at 360 x
     * 1000, the prefix of the lane's block): a lane's frame is complete once its own stages are,
     * without waiting for the lanes after it (issue 17: with peaks a batch of 2 made the first
     * frame wait for the second one's clip and find, about 0.3 ms on an H100). With
     * FAID_ENGINE_SLOT_D2H=1 one copy after the last lane brings every lane's, as before. */
    const size_t stride = faid_restab_out_stride(res->rt) * sizeof(float);
    const size_t want = faid_restab_out_read(res->rt) * sizeof(float);
    cl_mem out = faid_restab_mem(res->rt, "out", sl->index);
    uint8_t *h_out = faid_restab_host(res->rt, "out", sl->index);
    for (int f = 0; f < sl->n; f++) {
        for (int i = 0; i < ns; i++)
            for (int j = 0; rp[i] && j < rp[i]->n; j++) {
                const rlaunch *r = &rp[i]->l[j];
                if (r->per_lane && (rc = run_launch(res, sl, r, f, &sl->lane[f].ev[i][r->ev], d)))
                    goto fail;
            }
        if (env->slot_d2h && f < sl->n - 1)
            continue;
        /* lane f alone, or (FAID_ENGINE_SLOT_D2H) lanes 0..f */
        const int first = env->slot_d2h ? 0 : f;
        cl_event d2h = NULL;
        if (want == stride || f == first)
            FAID_CL_TRY_GOTO(d, rc, fail,
                             clEnqueueReadBuffer(queue_of(sl), out, CL_FALSE,
                                                 (size_t)first * stride,
                                                 (size_t)(f - first) * stride + want,
                                                 h_out + (size_t)first * stride, 0, NULL, &d2h));
        else {
            const size_t origin[3] = {0, 0, 0}, region[3] = {want, (size_t)(f - first + 1), 1};
            FAID_CL_TRY_GOTO(d, rc, fail,
                             clEnqueueReadBufferRect(queue_of(sl), out, CL_FALSE, origin, origin,
                                                     region, stride, 0, stride, 0, h_out, 0, NULL,
                                                     &d2h));
        }
        for (int k = first; k <= f; k++) {
            if (k < f)
                clRetainEvent(d2h);
            sl->lane[k].ev_d2h = (faid_devent)d2h;
        }
    }
    FAID_CL_TRY_GOTO(d, rc, fail, clFlush(queue_of(sl)));
    sl->closed = 1;
    return FAID_OK;
fail:
    clFinish(queue_of(sl));
    for (int s = 0; s < FAID_STAGE_MAX; s++)
        for (int i = 0; i < FAID_STAGE_EV; i++)
            release_event(&sl->ev[s][i]);
    for (int f = 0; f < sl->nlanes; f++)
        release_event(&sl->lane[f].ev_d2h);
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
    cl_event d2h = (cl_event)ln->ev_d2h;
    if (!block) {
        cl_int st = CL_COMPLETE;
        FAID_CL_TRY_GOTO(
            d, rc, out,
            clGetEventInfo(d2h, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        if (st > CL_COMPLETE)
            return FAID_EBUSY;
    }
    FAID_CL_TRY_GOTO(d, rc, out, clWaitForEvents(1, &d2h));
    const float *h = (const float *)faid_restab_host(res->rt, "out", sl->index) +
                     (size_t)lane * faid_restab_out_stride(res->rt);
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (res->enabled[i] && st->check && (rc = st->check(env, res, sl, lane, h, d)))
            goto out;
    }
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (res->enabled[i] && st->collect && (rc = st->collect(env, res, sl, lane, h, r, d)))
            goto out;
    }
    for (int i = 0; faid_stages[i]; i++)
        for (int e = 0; res->enabled[i] && faid_stages[i]->times && e < FAID_STAGE_EV; e++) {
            ln->us[i][e] = ev_us(ln->ev[i][e]);
            sl->us[i][e] = ev_us(sl->ev[i][e]);
        }
    memset(&r->t, 0, sizeof r->t);
    for (int i = 0; faid_stages[i]; i++)
        if (res->enabled[i] && faid_stages[i]->times)
            faid_stages[i]->times(sl, lane, i, &r->t);
    /* this lane's copy (FAID_ENGINE_SLOT_D2H: its share of the slot's) */
    r->t.d2h_us = ev_us(ln->ev_d2h) / (env->slot_d2h ? sl->n : 1);
    r->t.transfer_us = r->t.h2d_us + r->t.d2h_us;
    r->t.batch = sl->n;
    r->t.total_us = faid_stage_now_us() - ln->t_submit;
    rc = FAID_OK;
out:
    if (rc)
        clFinish(queue_of(sl));
    for (int s = 0; s < FAID_STAGE_MAX; s++)
        for (int i = 0; i < FAID_STAGE_EV; i++)
            release_event(&ln->ev[s][i]);
    return rc;
}

static void cl_flush(faid_stage_slot *sl)
{
    clFlush(queue_of(sl));
}

static void cl_finish(faid_stage_slot *sl)
{
    clFinish(queue_of(sl));
}

static void *cl_host_alloc(faid_stage_env *env, size_t bytes, void **handle, faid_diag *d)
{
    cl_dev *dv = env->dev;
    cl_mem m = faid_cl_buffer(dv->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, d);
    if (!m)
        return NULL;
    cl_int err;
    void *p = clEnqueueMapBuffer(dv->ctx->queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes,
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
    cl_dev *dv = env->dev;
    cl_mem m = handle;
    clEnqueueUnmapMemObject(dv->ctx->queue, m, ptr, 0, NULL, NULL);
    clFinish(dv->ctx->queue);
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
    .restab_new = cl_restab_new,
    .res_release = cl_res_release,
    .invalidate = cl_invalidate,
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
    .decoder = cl_decoder,
    .table_bytes = faid_clcodec_table_bytes,
    .pack_table = cl_pack_table,
};
