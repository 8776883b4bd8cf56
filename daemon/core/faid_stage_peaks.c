/* faid_stage_peaks: the peak finder of peaks.algorithm (pyfai: faid_pick over the sigma-clipped
 * background; peakfinder8: faid_pf8) into the result's peak list.
 *
 * Reference device: faid_pick_ref / faid_pf8_ref on the preprocessed frame the sigclip stage
 * used. OpenCL device: the kernels of kernels/peaks/ plug in here (see faid_stage_sigclip.c). */
#include "faid_stage.h"

#include "faid_pf8.h"
#include "faid_pick.h"

static int pk_enabled(const faid_stage_env *env, const faid_setup *s)
{
    (void)env;
    return s->cfg.peaks.algorithm != FAID_PEAKS_NONE;
}

static int pk_ref_run(faid_stage_env *env, faid_stage_res *res, faid_ref_frame *fr, faid_diag *d)
{
    (void)env;
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    const float *pre = faid_restab_host(res->rt, ps->pre, 0);
    double t0 = faid_stage_now_us();
    faid_peak_list_clear(fr->res->peaks);
    int rc = ps->p.algorithm == FAID_PEAKS_PYFAI
                 ? faid_pick_ref(ps->geom, pre, fr->res->bg, &ps->p, fr->res->peaks, d)
                 : faid_pf8_ref(ps->geom, ps->pf8, pre, &ps->p, fr->res->peaks, d);
    fr->res->t.peaks_us += faid_stage_now_us() - t0;
    return rc;
}

const faid_stage faid_stage_peaks = {
    .name = "peaks",
    .enabled = pk_enabled,
    .ref_run = pk_ref_run,
};
