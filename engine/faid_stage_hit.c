/* faid_stage_hit: the hit decision of one frame from its peak list (faid_hits_is_hit on
 * num_peaks = every peak found, also beyond max_num_peaks). A host computation on both devices:
 * ref_run on the reference device, collect (after the peak stage's outputs are in the result)
 * on compute devices. The rolling hit rate and the aggregates are the daemon's (faid_publish.c):
 * they span frames of every device. */
#include "faid_stage.h"

#include "faid_hits.h"

static int hit_enabled(const faid_stage_env *env, const faid_setup *s)
{
    (void)env;
    return s->cfg.peaks.algorithm != FAID_PEAKS_NONE;
}

static void decide(const faid_stage_res *res, faid_result *r)
{
    r->num_peaks = r->peaks->n_found;
    r->is_hit = faid_hits_is_hit(&res->setup->cfg.peaks, r->num_peaks);
}

static int hit_ref_run(faid_stage_env *env, faid_stage_res *res, faid_ref_frame *fr, faid_diag *d)
{
    (void)env;
    (void)d;
    decide(res, fr->res);
    return FAID_OK;
}

static int hit_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                       const float *h_lane, faid_result *r, faid_diag *d)
{
    (void)env;
    (void)sl;
    (void)lane;
    (void)h_lane;
    (void)d;
    decide(res, r);
    return FAID_OK;
}

/* Every peak found and the decision. */
static const faid_output_decl hit_outputs[] = {
    FAID_OUTPUT(NUM_PEAKS, UINT, SCALAR, faid_result, num_peaks),
    FAID_OUTPUT(IS_HIT, BOOL, SCALAR, faid_result, is_hit),
};

const faid_stage faid_stage_hit = {
    .name = "hit",
    .enabled = hit_enabled,
    .ref_run = hit_ref_run,
    .collect = hit_collect,
    .outputs = hit_outputs,
    .noutputs = FAID_NROWS(hit_outputs),
};
