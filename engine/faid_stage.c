/* faid_stage: the pipeline's stage list and the helpers stages and devices share (see
 * faid_stage.h). */
#include "faid_stage.h"

#include "faid_log.h"

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

double faid_stage_ev_us(cl_event ev)
{
    if (!ev)
        return 0.0;
    cl_ulong a = 0, b = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) != CL_SUCCESS)
        return 0.0;
    return b > a ? (double)(b - a) * 1e-3 : 0.0;
}

void faid_stage_release_event(cl_event *ev)
{
    if (*ev) {
        clReleaseEvent(*ev);
        *ev = NULL;
    }
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

faid_kernel **faid_stage_kslot(const faid_stage_env *env, faid_stage_res *res, int id, int key)
{
    if (!res || id < 0 || id >= FAID_STAGE_MAX || key < 0 || key >= FAID_STAGE_KC)
        return NULL;
    const uint64_t gen = faid_progcache_generation(env->progs);
    if (res->kc_gen != gen) {
        memset(res->kc, 0, sizeof res->kc);
        res->kc_gen = gen;
    }
    return &res->kc[id][key];
}
