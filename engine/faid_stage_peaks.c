/* faid_stage_peaks: the peak finder of peaks.algorithm (pyfai: faid_pick over the sigma-clipped
 * background; peakfinder8: faid_pf8) into the result's peak list.
 *
 * Reference device: faid_pick_ref / faid_pf8_ref on the preprocessed frame the sigclip stage
 * used.
 *
 * OpenCL device: buffers (per setup) pk.radius, pk.radius1d (pyfai) or pk.valid, pk.binof,
 * pk.f8ptr, pk.f8pos (peakfinder8: validity, integer-radius bin of every pixel, the bins' entry
 * ranges, each pixel's entry); per slot (scratch of one lane at a time) pk.flag, pk.counts,
 * pk.offsets, and for peakfinder8 pk.img, pk.cval (the pixel values in image and in bin order),
 * pk.cand (candidate seeds), pk.roff, pk.rthr; output pk (the record block of
 * kernels/peaks/compact.cl: 8 arrays of max_num_peaks values and the total, read back).
 * faid_stage_peaks_cl_lane, called by the sigclip stage for each lane after its background,
 * enqueues the finder: pyfai = faid_pick_flag (one coalesced pass) + faid_pk_scan (one
 * work-group: offsets) + faid_pick_write (spans with peaks only); peakfinder8 = faid_pf8_prep (one
 * coalesced pass over the preprocessed frame) + faid_pf8_radial (5 iterations from the compact
 * values) + faid_pf8_cand (one pass) + faid_pf8_fill (the candidates only) + faid_pk_scan +
 * faid_pf8_write. Every argument is bound from one table per lane (pk_args), so a kernel takes what
 * it names. cl_collect unpacks the block into the result's peak list. Lists equal the references'
 * bit for bit (tests/unit/test_peaks.c). */
#include "faid_stage.h"

#include "faid_pf8.h"
#include "faid_pick.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_A, EV_B, EV_C, EV_D, EV_E, EV_F }; /* per lane: the finder's launches in order */

static int ngroups(const faid_stage_env *env, const faid_stage_res *res)
{
    size_t span = faid_stage_peaks_wg(env) * FAID_PK_PPI;
    return (int)((res->npix + span - 1) / span);
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
            rc = faid_restab_static(res->rt, "pk.f8pos", npix * sizeof(int32_t), b->pos_of, d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.img", npix * sizeof(float), d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.cval", npix * sizeof(float), d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.cand", npix * sizeof(int32_t), d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.roff", (size_t)b->nbins * sizeof(float), d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.rthr", (size_t)b->nbins * sizeof(float), d);
    }
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.flag", npix, d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.counts", (ng + 1) * sizeof(int32_t), d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.offsets", ng * sizeof(int32_t), d);
    if (!rc)
        rc = faid_restab_output(res->rt, "pk", 8 * (size_t)ps->p.max_num_peaks + 1, 1, d);
    return rc;
}

/* The finders' kernels, by index: key in the per-setup kernel cache (faid_stage_kslot). */
static const char *const PK_KERNELS[] = {"faid_pf8_prep",   "faid_pf8_radial", "faid_pf8_cand",
                                         "faid_pf8_fill",   "faid_pf8_write",  "faid_pick_flag",
                                         "faid_pick_write", "faid_pk_scan"};
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
    if (!strcmp(name, "faid_pf8_radial") || !strcmp(name, "faid_pf8_prep")) {
        static const char *const rfiles[] = {"peaks/pf8_radial.cl"};
        snprintf(opts, sizeof opts, "%s -D PF8_LANES=%d", ieee, FAID_PF8_LANES);
        rc = faid_progcache_kernel(env->progs, rfiles, 1, opts, name, k, d);
    } else {
        int pf8 = ps->p.algorithm == FAID_PEAKS_PEAKFINDER8;
        int n = snprintf(opts, sizeof opts, "%s -D PK_WG=%zu -D SCAN_WG=%zu -D PK_PPI=%d", ieee, wg,
                         wg, FAID_PK_PPI);
        if (pf8)
            snprintf(opts + n, sizeof opts - (size_t)n, " -D PF8_MAXQ=%d", ps->p.max_pixel_count);
        static const char *const pick_files[] = {"peaks/compact.cl", "peaks/pick_pyfai.cl"};
        static const char *const pf8_files[] = {"peaks/compact.cl", "peaks/pf8_peaks.cl"};
        rc = faid_progcache_kernel(env->progs, pf8 ? pf8_files : pick_files, 2, opts, name, k, d);
    }
    if (!rc && slot)
        *slot = *k;
    return rc;
}

/* The finder's launches in order: kernel, global size, local size (0 = the peaks' work-group). */
typedef struct pk_launch {
    const char *kernel;
    size_t gws, lws;
} pk_launch;

static int pk_launches(const faid_stage_env *env, const faid_stage_res *res,
                       const faid_peak_setup *ps, pk_launch *l)
{
    const size_t wg = faid_stage_peaks_wg(env), ng = (size_t)ngroups(env, res);
    if (ps->p.algorithm == FAID_PEAKS_PYFAI) {
        l[0] = (pk_launch){"faid_pick_flag", ng * wg, wg};
        l[1] = (pk_launch){"faid_pk_scan", wg, wg};
        l[2] = (pk_launch){"faid_pick_write", ng * wg, wg};
        return 3;
    }
    l[0] = (pk_launch){"faid_pf8_prep", (res->npix + wg - 1) / wg * wg, wg};
    l[1] = (pk_launch){"faid_pf8_radial", (size_t)ps->pf8->nbins * FAID_PF8_LANES, FAID_PF8_LANES};
    l[2] = (pk_launch){"faid_pf8_cand", ng * wg, wg};
    l[3] = (pk_launch){"faid_pf8_fill", FAID_PF8_FILL_GROUPS * wg, wg};
    l[4] = (pk_launch){"faid_pk_scan", wg, wg};
    l[5] = (pk_launch){"faid_pf8_write", ng * wg, wg};
    return 6;
}

int faid_stage_peaks_cl_prepare(faid_stage_env *env, faid_stage_res *res, faid_diag *d)
{
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    if (!ps)
        return FAID_OK;
    pk_launch l[6];
    int n = pk_launches(env, res, ps, l);
    faid_kernel *k;
    int rc = FAID_OK;
    for (int i = 0; i < n && !rc; i++) {
        rc = get_kernel(env, res, ps, l[i].kernel, &k, d);
        if (!rc && k->kwg && k->kwg < l[i].lws)
            rc = faid_fail(d, FAID_EUNSUP, "peaks: %s allows %zu work-items for %s, %zu needed",
                           env->ctx->info.name, k->kwg, l[i].kernel, l[i].lws);
    }
    return rc;
}

/* One named argument of the finder's kernels. */
typedef struct pk_arg {
    const char *name;
    char type; /* 'm' cl_mem, 'i' int, 'f' float */
    cl_mem m;
    cl_int i;
    cl_float f;
} pk_arg;

#define PK_MEM(n, v)   ((pk_arg){(n), 'm', (v), 0, 0.0f})
#define PK_INT(n, v)   ((pk_arg){(n), 'i', NULL, (v), 0.0f})
#define PK_FLOAT(n, v) ((pk_arg){(n), 'f', NULL, 0, (v)})

/* Every argument any of the finder's kernels takes for this lane; returns their number. */
static int pk_args(const faid_stage_env *env, const faid_stage_res *res, const faid_peak_setup *ps,
                   const faid_stage_slot *sl, int lane, cl_mem pre, int bg_off, pk_arg *a)
{
    const faid_peak_geom *g = ps->geom;
    const int slot = sl->index, cap = ps->p.max_num_peaks, ng = ngroups(env, res);
    int pk_off, pk_stride;
    faid_restab_out(res->rt, "pk", &pk_off, &pk_stride);
    int n = 0;
    a[n++] = PK_MEM("pre4", pre);
    a[n++] = PK_INT("rows", g->rows);
    a[n++] = PK_INT("cols", g->cols);
    a[n++] = PK_MEM("flag", faid_restab_mem(res->rt, "pk.flag", slot));
    a[n++] = PK_MEM("counts", faid_restab_mem(res->rt, "pk.counts", slot));
    a[n++] = PK_MEM("offsets", faid_restab_mem(res->rt, "pk.offsets", slot));
    a[n++] = PK_INT("ngroups", ng);
    a[n++] = PK_INT("cap", cap);
    a[n++] = PK_MEM("out", faid_restab_mem(res->rt, "out", slot));
    a[n++] = PK_INT("out_off", pk_off + lane * pk_stride);
    if (ps->p.algorithm == FAID_PEAKS_PYFAI) {
        a[n++] = PK_MEM("radius", faid_restab_mem(res->rt, "pk.radius", 0));
        a[n++] = PK_MEM("radius1d", faid_restab_mem(res->rt, "pk.radius1d", 0));
        a[n++] = PK_MEM("bg", faid_restab_mem(res->rt, "out", slot));
        a[n++] = PK_INT("bg_off", bg_off);
        a[n++] = PK_INT("nb", g->nbins);
        a[n++] = PK_FLOAT("rad_min", g->rad_min);
        a[n++] = PK_FLOAT("rad_max", g->rad_max);
        a[n++] = PK_FLOAT("cutoff", (float)ps->p.cutoff_peak);
        a[n++] = PK_FLOAT("noise", (float)ps->p.noise);
        a[n++] = PK_INT("hw", ps->p.patch_size / 2);
        a[n++] = PK_INT("connected", ps->p.connected);
        return n;
    }
    a[n++] = PK_MEM("valid", faid_restab_mem(res->rt, "pk.valid", 0));
    a[n++] = PK_MEM("bin_of", faid_restab_mem(res->rt, "pk.binof", 0));
    a[n++] = PK_MEM("indptr", faid_restab_mem(res->rt, "pk.f8ptr", 0));
    a[n++] = PK_MEM("pos_of", faid_restab_mem(res->rt, "pk.f8pos", 0));
    a[n++] = PK_MEM("img", faid_restab_mem(res->rt, "pk.img", slot));
    a[n++] = PK_MEM("cval", faid_restab_mem(res->rt, "pk.cval", slot));
    a[n++] = PK_MEM("cand", faid_restab_mem(res->rt, "pk.cand", slot));
    a[n++] = PK_MEM("roff", faid_restab_mem(res->rt, "pk.roff", slot));
    a[n++] = PK_MEM("rthr", faid_restab_mem(res->rt, "pk.rthr", slot));
    a[n++] = PK_MEM("zero", faid_restab_mem(res->rt, "pk.counts", slot));
    a[n++] = PK_INT("nzero", ng + 1);
    a[n++] = PK_INT("npix", (cl_int)res->npix);
    a[n++] = PK_INT("nbins", ps->pf8->nbins);
    a[n++] = PK_INT("prows", g->panel_rows);
    a[n++] = PK_INT("pcols", g->panel_cols);
    a[n++] = PK_INT("min_pix", ps->p.min_pixel_count);
    a[n++] = PK_INT("bg_radius", ps->p.local_bg_radius);
    a[n++] = PK_FLOAT("min_snr", (float)ps->p.minimum_snr);
    a[n++] = PK_FLOAT("adc", (float)ps->p.adc_threshold);
    return n;
}

int faid_stage_peaks_cl_lane(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl,
                             int lane, cl_mem pre, int bg_off, faid_diag *d)
{
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    const int id = faid_stage_id(&faid_stage_peaks);
    if (!ps || id < 0 || !res->enabled[id])
        return FAID_OK;
    faid_stage_lane *ln = &sl->lane[lane];
    pk_arg a[40];
    const int na = pk_args(env, res, ps, sl, lane, pre, bg_off, a);
    pk_launch l[6];
    const int nl = pk_launches(env, res, ps, l);
    int rc = FAID_OK;
    for (int i = 0; i < nl && !rc; i++) {
        faid_kernel *k;
        if ((rc = get_kernel(env, res, ps, l[i].kernel, &k, d)))
            break;
        for (int j = 0; j < na && !rc; j++) {
            if (!faid_karg_has(k, a[j].name))
                continue;
            rc = a[j].type == 'm'   ? faid_karg_mem(k, a[j].name, a[j].m, d)
                 : a[j].type == 'i' ? faid_karg_int(k, a[j].name, a[j].i, d)
                                    : faid_karg_float(k, a[j].name, a[j].f, d);
        }
        if (!rc)
            rc = faid_kernel_launch(sl->q, k, l[i].gws, l[i].lws, &ln->ev[id][EV_A + i], d);
    }
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
    for (int i = EV_A; i <= EV_F; i++)
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

/* The frame's peak list (at most peaks.max_num_peaks). */
static const faid_output_decl pk_outputs[] = {
    FAID_OUTPUT(PEAK_X, F32, PEAKS, faid_peak_list, x),
    FAID_OUTPUT(PEAK_Y, F32, PEAKS, faid_peak_list, y),
    FAID_OUTPUT(PEAK_INTENSITY, F32, PEAKS, faid_peak_list, intensity),
    FAID_OUTPUT(PEAK_SIGMA, F32, PEAKS, faid_peak_list, sigma),
    FAID_OUTPUT(PEAK_SNR, F32, PEAKS, faid_peak_list, snr),
    FAID_OUTPUT(PEAK_NPIX, I32, PEAKS, faid_peak_list, npix),
    FAID_OUTPUT(PEAK_MAX_PIXEL, F32, PEAKS, faid_peak_list, max_pixel),
};

const faid_stage faid_stage_peaks = {
    .name = "peaks",
    .enabled = pk_enabled,
    .declare = pk_declare,
    .ref_run = pk_ref_run,
    .cl_collect = pk_cl_collect,
    .times = pk_times,
    .outputs = pk_outputs,
    .noutputs = FAID_NROWS(pk_outputs),
};
