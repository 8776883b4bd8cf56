/* faid_stage_sigclip: the sigma-clipped background per radial bin (peaks.algorithm not none),
 * pyFAI's sigma_clip_ng semantics (faid_sigclip.h), into the result's background profile. Its
 * declare also builds what the three peak stages share for the setup (faid_peak_setup: the
 * peak geometry, peakfinder8's radius bins, the corrections with the Poisson variance).
 *
 * Reference device: the frame preprocessed by the integrate stage ("pre") when the integration's
 * error model is poisson, else preprocessed again here with the Poisson variance ("pk_pre"),
 * then faid_sigclip_ref over setup->csr_bg (no pixel splitting, the profile's bins).
 * OpenCL device: the kernels of kernels/peaks/ plug in here (cl_prepare / cl_close /
 * cl_collect); until they do, a setup with peaks is refused on an OpenCL device with a clear
 * error at engine creation (use device ref). */
#include "faid_stage.h"

#include "faid_pf8.h"
#include "faid_sigclip.h"

#include <stdlib.h>
#include <string.h>

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
    if (env->ctx)
        return faid_fail(d, FAID_EUNSUP,
                         "peaks.algorithm %s runs on the reference device only for now (devices: "
                         "ref, faidctl --device ref)",
                         faid_peak_algorithm_name(s->cfg.peaks.algorithm));
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
        rc = faid_sigclip_ref(ps->csr_bg, pre, &ps->p, res->setup->corr.empty, fr->res->bg, NULL,
                              d);
    fr->res->t.peaks_us += faid_stage_now_us() - t0;
    return rc;
}

const faid_peak_setup *faid_stage_peak_setup(const faid_stage_res *res)
{
    int id = faid_stage_id(&faid_stage_sigclip);
    return id >= 0 && res->enabled[id] ? res->state[id] : NULL;
}

const faid_stage faid_stage_sigclip = {
    .name = "sigclip",
    .enabled = sc_enabled,
    .declare = sc_declare,
    .release = sc_release,
    .ref_run = sc_ref_run,
};
