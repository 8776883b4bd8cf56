/* faid_stage: the pipeline's stage list and the helpers stages and devices share (see
 * faid_stage.h). */
#include "faid_stage.h"

#include "faid_log.h"

#include <stdio.h>
#include <string.h>

/* The order frames go through. Downstream of integrate come the sigma-clipped background, the
 * peak finder and the hit decision, enabled when peaks.algorithm is not none. */
const faid_stage *const faid_stages[] = {
    &faid_stage_decode, &faid_stage_integrate, &faid_stage_sigclip,
    &faid_stage_peaks,  &faid_stage_hit,       NULL,
};

double faid_stage_now_us(void)
{
    return (double)faid_now_ns() * 1e-3;
}

size_t faid_stage_pixel_wg(const faid_stage_env *env)
{
    size_t lws = env->info->is_gpu ? 256 : 64;
    return lws > env->info->max_wg ? env->info->max_wg : lws;
}

int faid_stage_raw_code(faid_dtype t)
{
    switch (t) {
    case FAID_DT_U8:
        return 1;
    case FAID_DT_U16:
        return 2;
    case FAID_DT_U32:
        return 4;
    case FAID_DT_I8:
        return -1;
    case FAID_DT_I16:
        return -2;
    case FAID_DT_I32:
        return -4;
    case FAID_DT_F32:
        return 32;
    default:
        return 0;
    }
}

/* The codec rejects blocks smaller than the default, so the default block count bounds the
 * framing overhead. Other encodings are decoded on the CPU straight from the caller's bytes and
 * need no staging room of their own. */
size_t faid_stage_max_comp(size_t npix)
{
    size_t best = 0;
    const size_t sizes[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        size_t b = faid_bslz4_bound(npix * sizes[i], sizes[i], 0);
        if (b > best)
            best = b;
    }
    return best;
}

int faid_stage_id(const faid_stage *st)
{
    for (int i = 0; faid_stages[i]; i++)
        if (faid_stages[i] == st)
            return i;
    return -1;
}

faid_launch *faid_plan_add(faid_plan *p, const char *const *files, int nfiles, const char *opts,
                           const char *kernel)
{
    if (p->n >= FAID_LAUNCH_MAX || nfiles < 1 || nfiles > 4) {
        p->n = FAID_LAUNCH_MAX + 1; /* faid_plan_check reports it */
        return NULL;
    }
    faid_launch *l = &p->l[p->n++];
    memset(l, 0, sizeof *l);
    for (int i = 0; i < nfiles; i++)
        l->files[i] = files[i];
    l->nfiles = nfiles;
    snprintf(l->opts, sizeof l->opts, "%s", opts ? opts : "");
    l->kernel = kernel;
    return l;
}

static faid_plan_arg *arg_add(faid_launch *l, const char *name, faid_plan_arg_kind kind)
{
    if (l->narg >= FAID_PLAN_ARGS) {
        l->narg = FAID_PLAN_ARGS + 1; /* faid_plan_check reports it */
        return NULL;
    }
    faid_plan_arg *a = &l->arg[l->narg++];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->kind = kind;
    return a;
}

void faid_pa_buf(faid_launch *l, const char *name, const char *buf)
{
    faid_plan_arg *a = arg_add(l, name, FAID_PA_BUF);
    if (a)
        a->buf = buf;
}

void faid_pa_int(faid_launch *l, const char *name, int32_t v, int64_t step)
{
    faid_plan_arg *a = arg_add(l, name, FAID_PA_INT);
    if (a) {
        a->v.i = v;
        a->step = step;
    }
}

void faid_pa_uint(faid_launch *l, const char *name, uint32_t v, int64_t step)
{
    faid_plan_arg *a = arg_add(l, name, FAID_PA_UINT);
    if (a) {
        a->v.u = v;
        a->step = step;
    }
}

void faid_pa_float(faid_launch *l, const char *name, float v)
{
    faid_plan_arg *a = arg_add(l, name, FAID_PA_FLOAT);
    if (a)
        a->v.f = v;
}

void faid_pa_local(faid_launch *l, const char *name, size_t bytes_per_item)
{
    faid_plan_arg *a = arg_add(l, name, FAID_PA_LOCAL);
    if (a)
        a->local = bytes_per_item;
}

void faid_pa_nframes(faid_launch *l, const char *name)
{
    arg_add(l, name, FAID_PA_NFRAMES);
}

int faid_plan_check(const faid_plan *p, const char *stage, faid_diag *d)
{
    if (p->n > FAID_LAUNCH_MAX)
        return faid_fail(d, FAID_EINVAL, "engine: stage %s plans more than %d launches", stage,
                         FAID_LAUNCH_MAX);
    for (int i = 0; i < p->n; i++)
        if (p->l[i].narg > FAID_PLAN_ARGS)
            return faid_fail(d, FAID_EINVAL,
                             "engine: stage %s: launch of %s has more than %d "
                             "arguments",
                             stage, p->l[i].kernel, FAID_PLAN_ARGS);
    return FAID_OK;
}

faid_dcmd *faid_dcmd_add(faid_dcmds *c, faid_dcmd_op op, int ev)
{
    if (c->n >= FAID_DCMD_MAX) {
        c->n = FAID_DCMD_MAX + 1; /* the device refuses the list */
        return NULL;
    }
    faid_dcmd *x = &c->c[c->n++];
    memset(x, 0, sizeof *x);
    x->op = op;
    x->ev = ev;
    return x;
}
