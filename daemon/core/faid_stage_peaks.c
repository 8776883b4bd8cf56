/* faid_stage_peaks: the peak finder of peaks.algorithm (pyfai: faid_pick over the sigma-clipped
 * background; peakfinder8: faid_pf8) into the result's peak list.
 *
 * Reference device: faid_pick_ref / faid_pf8_ref on the preprocessed frame the sigclip stage
 * used.
 *
 * OpenCL device: buffers (per setup) pk.radius, pk.radius1d (pyfai) or pk.valid, pk.binof,
 * pk.f8ptr, pk.f8idx (peakfinder8: validity, integer-radius bin of every pixel, the pixels of
 * each bin); per slot pk.flag, pk.counts, pk.offsets, pk.roff, pk.rthr (scratch of one lane at a
 * time); output pk (the record block of kernels/peaks/compact.cl: 8 arrays of max_num_peaks
 * values and the total, read back). faid_stage_peaks_cl_lane, called by the sigclip stage for
 * each lane after its background, enqueues (peakfinder8: faid_pf8_radial) the flag kernel, the
 * scan and the write kernel; cl_collect unpacks the block into the result's peak list. Lists
 * equal the references' bit for bit (tests/unit/test_peaks.c). */
#include "faid_stage.h"

#include "faid_pf8.h"
#include "faid_pick.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_RAD, EV_FLAG, EV_SCAN, EV_WRITE }; /* per lane */

static int ngroups(const faid_stage_env *env, const faid_stage_res *res)
{
    size_t wg = faid_stage_peaks_wg(env);
    return (int)((res->npix + wg - 1) / wg);
}

static int pk_declare(faid_stage_env *env, faid_stage_res *res, int id, faid_diag *d)
{
    (void)id;
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    if (!env->ctx)
        return FAID_OK;
    if (!ps)
        return faid_fail(d, FAID_EINVAL, "peaks: no background stage for this setup");
    const size_t npix = res->npix, ng = (size_t)ngroups(env, res);
    const faid_peak_geom *g = ps->geom;
    int rc;
    if (ps->p.algorithm == FAID_PEAKS_PYFAI) {
        rc = faid_restab_static(res->rt, "pk.radius", npix * sizeof(float), g->radius, d);
        if (!rc)
            rc = faid_restab_static(res->rt, "pk.radius1d", (size_t)g->nbins * sizeof(float),
                                    g->radius1d, d);
    } else {
        const faid_pf8_bins *b = ps->pf8;
        rc = faid_restab_static(res->rt, "pk.valid", npix, g->valid, d);
        if (!rc)
            rc = faid_restab_static(res->rt, "pk.binof", npix * sizeof(int32_t), b->bin_of, d);
        if (!rc)
            rc = faid_restab_static(res->rt, "pk.f8ptr", ((size_t)b->nbins + 1) * sizeof(int32_t),
                                    b->indptr, d);
        if (!rc)
            rc = faid_restab_static(res->rt, "pk.f8idx", npix * sizeof(int32_t), b->indices, d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.roff", (size_t)b->nbins * sizeof(float), d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.rthr", (size_t)b->nbins * sizeof(float), d);
    }
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.flag", npix, d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.counts", ng * sizeof(int32_t), d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.offsets", ng * sizeof(int32_t), d);
    if (!rc)
        rc = faid_restab_output(res->rt, "pk", 8 * (size_t)ps->p.max_num_peaks + 1, 1, d);
    return rc;
}

/* The finders' kernels, by index: key in the per-setup kernel cache (faid_stage_kslot). */
static const char *const PK_KERNELS[] = {"faid_pf8_radial", "faid_pf8_flag", "faid_pf8_write",
                                         "faid_pick_flag",  "faid_pick_write", "faid_pk_scan"};
#define PK_NKERNELS (int)(sizeof PK_KERNELS / sizeof PK_KERNELS[0])

static int get_kernel(faid_stage_env *env, faid_stage_res *res, const faid_peak_setup *ps,
                      const char *name, faid_kernel **k, faid_diag *d)
{
    int ki = 0;
    while (ki < PK_NKERNELS && PK_KERNELS[ki] != name && strcmp(PK_KERNELS[ki], name) != 0)
        ki++;
    faid_kernel **slot =
        ki < PK_NKERNELS ? faid_stage_kslot(env, res, faid_stage_id(&faid_stage_peaks), ki) : NULL;
    if (slot && *slot) {
        *k = *slot;
        return FAID_OK;
    }
    const size_t wg = faid_stage_peaks_wg(env);
    char opts[200];
    const char *ieee = "-cl-fp32-correctly-rounded-divide-sqrt";
    int rc;
    if (!strcmp(name, "faid_pf8_radial")) {
        static const char *const rfiles[] = {"peaks/pf8_radial.cl"};
        rc = faid_progcache_kernel(env->progs, rfiles, 1, ieee, name, k, d);
    } else {
        int pf8 = ps->p.algorithm == FAID_PEAKS_PEAKFINDER8;
        if (pf8)
            snprintf(opts, sizeof opts, "%s -D PK_WG=%zu -D SCAN_WG=%zu -D PF8_MAXQ=%d", ieee, wg,
                     wg, ps->p.max_pixel_count);
        else
            snprintf(opts, sizeof opts, "%s -D PK_WG=%zu -D SCAN_WG=%zu", ieee, wg, wg);
        static const char *const pick_files[] = {"peaks/compact.cl", "peaks/pick_pyfai.cl"};
        static const char *const pf8_files[] = {"peaks/compact.cl", "peaks/pf8_peaks.cl"};
        rc = faid_progcache_kernel(env->progs, pf8 ? pf8_files : pick_files, 2, opts, name, k, d);
    }
    if (!rc && slot)
        *slot = *k;
    return rc;
}

int faid_stage_peaks_cl_prepare(faid_stage_env *env, faid_stage_res *res, faid_diag *d)
{
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    if (!ps)
        return FAID_OK;
    int pf8 = ps->p.algorithm == FAID_PEAKS_PEAKFINDER8;
    const char *names[] = {pf8 ? "faid_pf8_flag" : "faid_pick_flag", "faid_pk_scan",
                           pf8 ? "faid_pf8_write" : "faid_pick_write",
                           pf8 ? "faid_pf8_radial" : NULL};
    faid_kernel *k;
    int rc = FAID_OK;
    for (int i = 0; i < 4 && names[i] && !rc; i++) {
        rc = get_kernel(env, res, ps, names[i], &k, d);
        if (!rc && i < 3 && k->kwg && k->kwg < faid_stage_peaks_wg(env))
            rc = faid_fail(d, FAID_EUNSUP, "peaks: %s allows %zu work-items for %s, %zu needed",
                           env->ctx->info.name, k->kwg, names[i], faid_stage_peaks_wg(env));
    }
    return rc;
}

/* The arguments the flag and write kernels of one finder share. */
static int bind_common(faid_kernel *k, const faid_stage_res *res, const faid_peak_setup *ps,
                       int slot, cl_mem pre, int bg_off, faid_diag *d)
{
    const faid_peak_geom *g = ps->geom;
    int rc = faid_karg_mem(k, "pre4", pre, d);
    if (!rc)
        rc = faid_karg_int(k, "rows", g->rows, d);
    if (!rc)
        rc = faid_karg_int(k, "cols", g->cols, d);
    if (ps->p.algorithm == FAID_PEAKS_PYFAI) {
        if (!rc)
            rc = faid_karg_mem(k, "radius", faid_restab_mem(res->rt, "pk.radius", 0), d);
        if (!rc)
            rc = faid_karg_mem(k, "radius1d", faid_restab_mem(res->rt, "pk.radius1d", 0), d);
        if (!rc)
            rc = faid_karg_mem(k, "bg", faid_restab_mem(res->rt, "out", slot), d);
        if (!rc)
            rc = faid_karg_int(k, "bg_off", bg_off, d);
        if (!rc)
            rc = faid_karg_int(k, "nb", g->nbins, d);
        if (!rc)
            rc = faid_karg_float(k, "rad_min", g->rad_min, d);
        if (!rc)
            rc = faid_karg_float(k, "rad_max", g->rad_max, d);
        if (!rc)
            rc = faid_karg_float(k, "cutoff", (float)ps->p.cutoff_peak, d);
        if (!rc)
            rc = faid_karg_float(k, "noise", (float)ps->p.noise, d);
        if (!rc)
            rc = faid_karg_int(k, "hw", ps->p.patch_size / 2, d);
        if (!rc)
            rc = faid_karg_int(k, "connected", ps->p.connected, d);
    } else {
        if (!rc)
            rc = faid_karg_mem(k, "valid", faid_restab_mem(res->rt, "pk.valid", 0), d);
        if (!rc)
            rc = faid_karg_mem(k, "bin_of", faid_restab_mem(res->rt, "pk.binof", 0), d);
        if (!rc)
            rc = faid_karg_mem(k, "roff", faid_restab_mem(res->rt, "pk.roff", slot), d);
        if (!rc)
            rc = faid_karg_mem(k, "rthr", faid_restab_mem(res->rt, "pk.rthr", slot), d);
        if (!rc)
            rc = faid_karg_int(k, "prows", g->panel_rows, d);
        if (!rc)
            rc = faid_karg_int(k, "pcols", g->panel_cols, d);
        if (!rc)
            rc = faid_karg_int(k, "min_pix", ps->p.min_pixel_count, d);
        if (!rc)
            rc = faid_karg_int(k, "bg_radius", ps->p.local_bg_radius, d);
        if (!rc)
            rc = faid_karg_float(k, "min_snr", (float)ps->p.minimum_snr, d);
    }
    return rc;
}

int faid_stage_peaks_cl_lane(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl,
                             int lane, cl_mem pre, int bg_off, faid_diag *d)
{
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    const int id = faid_stage_id(&faid_stage_peaks);
    if (!ps || id < 0 || !res->enabled[id])
        return FAID_OK;
    faid_stage_lane *ln = &sl->lane[lane];
    const int pf8 = ps->p.algorithm == FAID_PEAKS_PEAKFINDER8;
    const size_t wg = faid_stage_peaks_wg(env);
    const int ng = ngroups(env, res);
    const int cap = ps->p.max_num_peaks;
    int pk_off, pk_stride;
    faid_restab_out(res->rt, "pk", &pk_off, &pk_stride);
    pk_off += lane * pk_stride;
    cl_mem out = faid_restab_mem(res->rt, "out", sl->index);
    cl_mem flag = faid_restab_mem(res->rt, "pk.flag", sl->index);
    cl_mem counts = faid_restab_mem(res->rt, "pk.counts", sl->index);
    cl_mem offsets = faid_restab_mem(res->rt, "pk.offsets", sl->index);
    faid_kernel *k;
    int rc;
    if (pf8) {
        if ((rc = get_kernel(env, res, ps, "faid_pf8_radial", &k, d)))
            return rc;
        rc = faid_karg_mem(k, "pre4", pre, d);
        if (!rc)
            rc = faid_karg_mem(k, "valid", faid_restab_mem(res->rt, "pk.valid", 0), d);
        if (!rc)
            rc = faid_karg_mem(k, "indptr", faid_restab_mem(res->rt, "pk.f8ptr", 0), d);
        if (!rc)
            rc = faid_karg_mem(k, "indices", faid_restab_mem(res->rt, "pk.f8idx", 0), d);
        if (!rc)
            rc = faid_karg_int(k, "nbins", ps->pf8->nbins, d);
        if (!rc)
            rc = faid_karg_float(k, "min_snr", (float)ps->p.minimum_snr, d);
        if (!rc)
            rc = faid_karg_float(k, "adc", (float)ps->p.adc_threshold, d);
        if (!rc)
            rc = faid_karg_mem(k, "roff", faid_restab_mem(res->rt, "pk.roff", sl->index), d);
        if (!rc)
            rc = faid_karg_mem(k, "rthr", faid_restab_mem(res->rt, "pk.rthr", sl->index), d);
        if (!rc)
            rc = faid_kernel_launch(sl->q, k, (size_t)ps->pf8->nbins * FAID_PF8_LANES,
                                    FAID_PF8_LANES, &ln->ev[id][EV_RAD], d);
        if (rc)
            return rc;
    }
    if ((rc = get_kernel(env, res, ps, pf8 ? "faid_pf8_flag" : "faid_pick_flag", &k, d)))
        return rc;
    rc = bind_common(k, res, ps, sl->index, pre, bg_off, d);
    if (!rc)
        rc = faid_karg_mem(k, "flag", flag, d);
    if (!rc)
        rc = faid_karg_mem(k, "counts", counts, d);
    if (!rc)
        rc = faid_kernel_launch(sl->q, k, (size_t)ng * wg, wg, &ln->ev[id][EV_FLAG], d);
    if (!rc)
        rc = get_kernel(env, res, ps, "faid_pk_scan", &k, d);
    if (!rc)
        rc = faid_karg_mem(k, "counts", counts, d);
    if (!rc)
        rc = faid_karg_int(k, "ngroups", ng, d);
    if (!rc)
        rc = faid_karg_mem(k, "offsets", offsets, d);
    if (!rc)
        rc = faid_karg_mem(k, "out", out, d);
    if (!rc)
        rc = faid_karg_int(k, "total_off", pk_off + 8 * cap, d);
    if (!rc)
        rc = faid_kernel_launch(sl->q, k, wg, wg, &ln->ev[id][EV_SCAN], d);
    if (!rc)
        rc = get_kernel(env, res, ps, pf8 ? "faid_pf8_write" : "faid_pick_write", &k, d);
    if (!rc)
        rc = bind_common(k, res, ps, sl->index, pre, bg_off, d);
    if (!rc)
        rc = faid_karg_mem(k, "flag", flag, d);
    if (!rc)
        rc = faid_karg_mem(k, "offsets", offsets, d);
    if (!rc)
        rc = faid_karg_int(k, "cap", cap, d);
    if (!rc)
        rc = faid_karg_mem(k, "out", out, d);
    if (!rc)
        rc = faid_karg_int(k, "out_off", pk_off, d);
    if (!rc)
        rc = faid_kernel_launch(sl->q, k, (size_t)ng * wg, wg, &ln->ev[id][EV_WRITE], d);
    return rc;
}

static int pk_cl_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                         const float *h_lane, faid_result *r, faid_diag *d)
{
    (void)env;
    (void)sl;
    (void)lane;
    (void)d;
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    int off, stride;
    faid_restab_out(res->rt, "pk", &off, &stride);
    faid_peaks_unpack(h_lane + off, ps->p.max_num_peaks, r->peaks);
    return FAID_OK;
}

static void pk_times(const faid_stage_slot *sl, int lane, int id, faid_stage_times *t)
{
    const cl_event *ev = sl->lane[lane].ev[id];
    for (int i = 0; i < 4; i++)
        t->peaks_us += faid_stage_ev_us(ev[i]);
}

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
    .declare = pk_declare,
    .ref_run = pk_ref_run,
    .cl_collect = pk_cl_collect,
    .times = pk_times,
};
