/* faid_stage_peaks: the peak finder of peaks.algorithm (pyfai: faid_pick over the sigma-clipped
 * background; peakfinder8: faid_pf8) into the result's peak list.
 *
 * Reference device: faid_pick_ref / faid_pf8_ref on the preprocessed frame the sigclip stage
 * used.
 *
 * Compute devices: buffers (per setup) pk.radius, pk.radius1d (pyfai) or pk.valid, pk.binof,
 * pk.f8ptr, pk.f8pos (peakfinder8: validity, integer-radius bin of every pixel, the bins' entry
 * ranges, each pixel's entry); per slot (scratch of one lane at a time) pk.flag, pk.counts,
 * pk.offsets, and for peakfinder8 pk.img, pk.cval (the pixel values in image and in bin order),
 * pk.cand (candidate seeds), pk.roff, pk.rthr; output pk (the record block of
 * kernels/peaks/compact.cl: 8 arrays of max_num_peaks values and the total, read back).
 * The plan (per lane, after the sigclip stage's launches of the same lane, on its pk.pre and bg
 * segment): pyfai = faid_pick_flag (one coalesced pass) + faid_pk_scan (one
 * work-group: offsets) + faid_pick_write (spans with peaks only); peakfinder8 = faid_pf8_prep (one
 * coalesced pass over the preprocessed frame) + faid_pf8_radial (5 iterations from the compact
 * values) + faid_pf8_cand (one pass) + faid_pf8_fill (the candidates only) + faid_pk_scan +
 * faid_pf8_write. Every launch gets the same argument list (pk_args, with the raw frame's
 * arguments) and takes what it names. When fused (faid_peak_setup.fused: FAID_PEAKS_FUSED=1, or
 * unset with the local-memory sigma clip, the default where it fits) the
 * kernels that read pixels (faid_pick_flag, faid_pick_write, faid_pf8_prep) are built after
 * process/preprocess.cl and compute each pixel from the raw frame instead of pk.pre;
 * FAID_PEAKS_KOPTS adds build options (peakfinder8's variants, on by default: =0 turns them
 * off), FAID_PF8_FILL_GROUPS sets the
 * fill's grid. Round 4 of issue 17 (pf8_peaks.cl): FAID_PF8_MERGE (on unless =0: the default since
 * the H100 run of 2026-11-26, with PF8_RECS and PF8_CLASS; the other knobs off unless =1)
 * drops faid_pk_scan (-D PF8_WSCAN=1: the write sums the counts before its span),
 * FAID_PF8_CANDFILL=1 drops faid_pf8_fill (-D PF8_CANDFILL=1: the candidates' pass evaluates its
 * candidates), FAID_PF8_NOPREP=1 drops faid_pf8_prep (-D PF8_NOPREP=1: the radial pass
 * computes the values), FAID_PF8_GATHER=1 builds the prep and radial pass with -D PF8_GATHER=1
 * (both read the bins' index list pk.f8idx, an alias of pk.f8pos otherwise); buffers pk.cls (a
 * class byte per pixel, PF8_CLASS), pk.cspan (each span's candidates in pk.cand) and pk.recs (the
 * fill's records, PF8_RECS) are there for every build; the picker's PP_CAND (FAID_PEAKS_KOPTS,
 * round 5: candidates first) makes pk.flag 2 bytes per position (each span's sorted peaks), and
 * peakfinder8's PF8_BAND=R declares pk.f8perm and pk.f8addr (the banded prep's tables, aliases of
 * pk.f8pos otherwise) and launches a prep work-group per R rows; each
 * launch keeps its event index, so that
 * faid-bench's find1..find6 name the same kernels whatever is dropped. collect unpacks the
 * block into the result's peak list. Lists equal the
 * references' bit for bit (tests/unit/test_peaks.c). */
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

/* Records faid_pf8_fill keeps for faid_pf8_write (PF8_RECS, 8 floats each): one per 32 pixels,
 * as many bytes as pk.flag (EIGER 4M: 140,177 candidates; a frame with more has the write run
 * pf8_seed again for the rest). */
static int pf8_nrec(const faid_stage_res *res)
{
    return res->npix >= 64 ? (int)(res->npix / 32) : 2;
}

/* Rows per band of peakfinder8's prep (-DPF8_BAND=R in FAID_PEAKS_KOPTS, kernels/peaks/
 * pf8_radial.cl's PF8_BANDN), 0 when off or moot (FAID_PF8_GATHER: the prep writes img alone;
 * FAID_PF8_NOPREP: no prep). */
static int pf8_band(const faid_peak_setup *ps)
{
    return ps->p.algorithm == FAID_PEAKS_PEAKFINDER8 && !ps->pf8_gather && !ps->pf8_noprep
               ? faid_stage_peaks_kopt(ps, "PF8_BAND")
               : 0;
}

/* The static tables of the banded prep (R rows a band): entry t of band k's n = R cols pixels,
 * in the bins' order, comes from the band's pixel pk.f8perm[k n + t] (ushort) and goes to entry
 * pk.f8addr[k n + t] of cval. Walking the bins' index list in order lists each band's entries in
 * order. */
static int pf8_band_tables(faid_stage_env *env, faid_stage_res *res, const faid_peak_setup *ps,
                           int band, faid_diag *d)
{
    const faid_peak_geom *g = ps->geom;
    const long n = (long)band * g->cols;
    const size_t lm = env->info->local_mem;
    if (band < 1 || band > 64 || n > 65535 || (lm && (size_t)n * sizeof(float) > lm))
        return faid_fail(d, FAID_EINVAL,
                         "peaks: FAID_PEAKS_KOPTS PF8_BAND=%d: not 1-64 rows, or %ld pixels a "
                         "band (at most 65535, %zu bytes of local memory on %s)",
                         band, n, lm, env->info->name);
    const size_t npix = res->npix, nb = (npix + (size_t)n - 1) / (size_t)n;
    uint16_t *perm = malloc(npix * sizeof *perm);
    int32_t *addr = malloc(npix * sizeof *addr);
    size_t *fill = calloc(nb, sizeof *fill);
    int rc = perm && addr && fill ? FAID_OK
                                  : faid_fail(d, FAID_ENOMEM,
                                              "peaks: out of memory for the "
                                              "PF8_BAND tables (%zu pixels)",
                                              npix);
    for (size_t k = 0; !rc && k < npix; k++) {
        const size_t i = (size_t)ps->pf8->indices[k], b = i / (size_t)n;
        const size_t t = b * (size_t)n + fill[b]++;
        perm[t] = (uint16_t)(i - b * (size_t)n);
        addr[t] = (int32_t)k;
    }
    if (!rc)
        rc = faid_restab_static(res->rt, "pk.f8perm", npix * sizeof *perm, perm, d);
    if (!rc)
        rc = faid_restab_static(res->rt, "pk.f8addr", npix * sizeof *addr, addr, d);
    free(perm);
    free(addr);
    free(fill);
    return rc;
}

static int pk_declare(faid_stage_env *env, faid_stage_res *res, int id, faid_diag *d)
{
    (void)id;
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    if (!env->info)
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
        /* issue 17's round 4 variants: the bins' index list (FAID_PF8_GATHER), each pixel's
         * class (PF8_CLASS), where each span's candidates are in cand[] and the records the
         * fill keeps (PF8_RECS) */
        if (!rc)
            rc =
                ps->pf8_gather || ps->pf8_noprep
                    ? faid_restab_static(res->rt, "pk.f8idx", npix * sizeof(int32_t), b->indices, d)
                    : faid_restab_alias(res->rt, "pk.f8idx", "pk.f8pos", d);
        /* round 5's banded prep (PF8_BAND): its tables, else aliases never read */
        const int band = pf8_band(ps);
        if (!rc && band)
            rc = pf8_band_tables(env, res, ps, band, d);
        if (!rc && !band)
            rc = faid_restab_alias(res->rt, "pk.f8perm", "pk.f8pos", d);
        if (!rc && !band)
            rc = faid_restab_alias(res->rt, "pk.f8addr", "pk.f8pos", d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.cls", npix, d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.cspan", 2 * ng * sizeof(int32_t), d);
        if (!rc)
            rc = faid_stage_peaks_scratch(env, res, "pk.recs",
                                          (size_t)pf8_nrec(res) * 8 * sizeof(float), d);
    }
    /* pk.flag: a byte per position; with the picker's PP_CAND (FAID_PEAKS_KOPTS, issue 17 round
     * 5) the sorted list of each span's peaks instead, a ushort per position of every span */
    const size_t span = faid_stage_peaks_wg(env) * FAID_PK_PPI;
    const int cand =
        ps->p.algorithm == FAID_PEAKS_PYFAI && faid_stage_peaks_kopt(ps, "PP_CAND") != 0;
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.flag",
                                      cand ? ng * span * sizeof(uint16_t) : npix, d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.counts", (ng + 1) * sizeof(int32_t), d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.offsets", ng * sizeof(int32_t), d);
    if (!rc)
        rc = faid_restab_output(res->rt, "pk", 8 * (size_t)ps->p.max_num_peaks + 1, 1, d);
    return rc;
}

/* The program of a finder's kernel: its files and build options (with ps->fused,
 * process/preprocess.cl first in the programs whose kernels read pixels: the picker's and
 * peakfinder8's prep + radial; peakfinder8's seeds read the values its prep wrote); the number
 * of files, or 0 with the error in d. */
static int pk_program(const faid_stage_env *env, const faid_peak_setup *ps, faid_dtype dt,
                      const char *name, const char *const **files, char *opts, size_t opts_len,
                      faid_diag *d)
{
    const char *ieee = "-cl-fp32-correctly-rounded-divide-sqrt";
    char base[300];
    const int nf = ps->fused ? 0 : 1;
    if (!strcmp(name, "faid_pf8_radial") || !strcmp(name, "faid_pf8_prep")) {
        static const char *const rfiles[] = {"process/preprocess.cl", "peaks/pf8_radial.cl"};
        snprintf(base, sizeof base,
                 "%s -D PF8_LANES=%d -D PF8_GATHER=%d -D PF8_NOPREP=%d -D PF8_BANDN=%d %s", ieee,
                 FAID_PF8_LANES, ps->pf8_gather, ps->pf8_noprep, pf8_band(ps) * ps->geom->cols,
                 ps->kopts);
        *files = rfiles + nf;
        return faid_stage_peaks_fused_opts(ps, dt, base, opts, opts_len, d) ? 0 : 2 - nf;
    }
    const size_t wg = faid_stage_peaks_wg(env);
    const int pf8 = ps->p.algorithm == FAID_PEAKS_PEAKFINDER8;
    int n = snprintf(base, sizeof base, "%s -D PK_WG=%zu -D SCAN_WG=%zu -D PK_PPI=%d %s", ieee, wg,
                     wg, FAID_PK_PPI, ps->kopts);
    if (pf8 && n > 0 && (size_t)n < sizeof base)
        snprintf(base + n, sizeof base - (size_t)n,
                 " -D PF8_MAXQ=%d -D PF8_WSCAN=%d -D PF8_CANDFILL=%d", ps->p.max_pixel_count,
                 ps->pf8_merge, ps->pf8_candfill);
    static const char *const pick_files[] = {"process/preprocess.cl", "peaks/compact.cl",
                                             "peaks/pick_pyfai.cl"};
    static const char *const pf8_files[] = {"peaks/compact.cl", "peaks/pf8_peaks.cl"};
    if (pf8) {
        *files = pf8_files;
        snprintf(opts, opts_len, "%s", base);
        return 2;
    }
    *files = pick_files + nf;
    return faid_stage_peaks_fused_opts(ps, dt, base, opts, opts_len, d) ? 0 : 3 - nf;
}

/* The finder's launches in order: kernel, global size, local size, event (the launch's place
 * in the full plan, so that faid-bench's find1..find6 keep naming the same kernels when
 * FAID_PF8_MERGE drops the scan). */
typedef struct pk_launch {
    const char *kernel;
    size_t items, groups, lws;
    int ev;
} pk_launch;

static int pk_launches(const faid_stage_env *env, const faid_stage_res *res,
                       const faid_peak_setup *ps, pk_launch *l)
{
    const size_t wg = faid_stage_peaks_wg(env), ng = (size_t)ngroups(env, res);
    if (ps->p.algorithm == FAID_PEAKS_PYFAI) {
        /* -DPP_MERGE=1 in FAID_PEAKS_KOPTS: faid_pick_write finds its span's offset (no scan) */
        const int merge = faid_stage_peaks_kopt(ps, "PP_MERGE") != 0;
        int n = 0;
        l[n++] = (pk_launch){"faid_pick_flag", 0, ng, wg, EV_A};
        if (!merge)
            l[n++] = (pk_launch){"faid_pk_scan", 0, 1, wg, EV_B};
        l[n++] = (pk_launch){"faid_pick_write", 0, ng, wg, EV_C};
        return n;
    }
    int n = 0;
    /* else faid_pf8_radial computes the values (PF8_NOPREP); in FAID_PEAKS_KOPTS, -DPF8_BAND=R:
     * a work-group per band of R rows, else -DPF8_PREP4=1: 4 pixels per work-item */
    const size_t band = (size_t)pf8_band(ps) * (size_t)ps->geom->cols; /* pixels a band */
    if (!ps->pf8_noprep && band)
        l[n++] = (pk_launch){"faid_pf8_prep", 0, (res->npix + band - 1) / band, wg, EV_A};
    else if (!ps->pf8_noprep)
        l[n++] = (pk_launch){
            "faid_pf8_prep",
            faid_stage_peaks_kopt(ps, "PF8_PREP4") ? (res->npix + 3) / 4 : res->npix, 0, wg, EV_A};
    l[n++] = (pk_launch){"faid_pf8_radial", 0, (size_t)ps->pf8->nbins, FAID_PF8_LANES, EV_B};
    l[n++] = (pk_launch){"faid_pf8_cand", 0, ng, wg, EV_C};
    if (!ps->pf8_candfill) /* else faid_pf8_cand evaluates its candidates (PF8_CANDFILL) */
        l[n++] = (pk_launch){"faid_pf8_fill", 0, (size_t)ps->fill_groups, wg, EV_D};
    if (!ps->pf8_merge) /* else faid_pf8_write finds the offsets itself (PF8_WSCAN) */
        l[n++] = (pk_launch){"faid_pk_scan", 0, 1, wg, EV_E};
    l[n++] = (pk_launch){"faid_pf8_write", 0, ng, wg, EV_F};
    return n;
}

/* Every argument any of the finder's kernels takes (lane 0, with the per-lane steps). */
static void pk_args(const faid_stage_env *env, const faid_stage_res *res, const faid_peak_setup *ps,
                    faid_dtype dt, faid_launch *l)
{
    const faid_peak_geom *g = ps->geom;
    const int cap = ps->p.max_num_peaks, ng = ngroups(env, res);
    int pk_off, pk_stride, bg_off, bg_stride;
    faid_restab_out(res->rt, "pk", &pk_off, &pk_stride);
    faid_restab_out(res->rt, "bg", &bg_off, &bg_stride);
    faid_pa_buf(l, "pre4", "pk.pre");
    faid_pa_int(l, "rows", g->rows, 0);
    faid_pa_int(l, "cols", g->cols, 0);
    faid_pa_buf(l, "flag", "pk.flag");
    faid_pa_buf(l, "counts", "pk.counts");
    faid_pa_buf(l, "offsets", "pk.offsets");
    faid_pa_int(l, "ngroups", ng, 0);
    faid_pa_int(l, "cap", cap, 0);
    faid_pa_buf(l, "out", "out");
    faid_pa_int(l, "out_off", pk_off, pk_stride);
    faid_stage_peaks_raw_args(res, dt, l);
    if (ps->p.algorithm == FAID_PEAKS_PYFAI) {
        faid_pa_buf(l, "radius", "pk.radius");
        faid_pa_buf(l, "radius1d", "pk.radius1d");
        faid_pa_buf(l, "bg", "out");
        faid_pa_int(l, "bg_off", bg_off, bg_stride);
        faid_pa_int(l, "nb", g->nbins, 0);
        faid_pa_float(l, "rad_min", g->rad_min);
        faid_pa_float(l, "rad_max", g->rad_max);
        faid_pa_float(l, "cutoff", (float)ps->p.cutoff_peak);
        faid_pa_float(l, "noise", (float)ps->p.noise);
        faid_pa_int(l, "hw", ps->p.patch_size / 2, 0);
        faid_pa_int(l, "connected", ps->p.connected, 0);
        return;
    }
    faid_pa_buf(l, "valid", "pk.valid");
    faid_pa_buf(l, "bin_of", "pk.binof");
    faid_pa_buf(l, "indptr", "pk.f8ptr");
    faid_pa_buf(l, "pos_of", "pk.f8pos");
    faid_pa_buf(l, "img", "pk.img");
    faid_pa_buf(l, "cval", "pk.cval");
    faid_pa_buf(l, "cand", "pk.cand");
    faid_pa_buf(l, "roff", "pk.roff");
    faid_pa_buf(l, "rthr", "pk.rthr");
    faid_pa_buf(l, "zero", "pk.counts");
    faid_pa_int(l, "nzero", ng + 1, 0);
    faid_pa_int(l, "npix", (int32_t)res->npix, 0);
    faid_pa_int(l, "nbins", ps->pf8->nbins, 0);
    faid_pa_int(l, "prows", g->panel_rows, 0);
    faid_pa_int(l, "pcols", g->panel_cols, 0);
    faid_pa_int(l, "min_pix", ps->p.min_pixel_count, 0);
    faid_pa_int(l, "bg_radius", ps->p.local_bg_radius, 0);
    faid_pa_float(l, "min_snr", (float)ps->p.minimum_snr);
    faid_pa_float(l, "adc", (float)ps->p.adc_threshold);
    faid_pa_buf(l, "indices", "pk.f8idx");
    faid_pa_buf(l, "bperm", "pk.f8perm");
    faid_pa_buf(l, "baddr", "pk.f8addr");
    faid_pa_buf(l, "cls", "pk.cls");
    faid_pa_buf(l, "cspan", "pk.cspan");
    faid_pa_buf(l, "recs", "pk.recs");
    faid_pa_int(l, "nrec", pf8_nrec(res), 0);
}

static int pk_plan(const faid_stage_env *env, const faid_stage_res *res, int id, faid_dtype dt,
                   faid_plan *p, faid_diag *d)
{
    (void)id;
    const faid_peak_setup *ps = faid_stage_peak_setup(res);
    if (!ps)
        return FAID_OK;
    pk_launch pl[6];
    const int n = pk_launches(env, res, ps, pl);
    for (int i = 0; i < n; i++) {
        const char *const *files;
        char opts[320];
        int nf = pk_program(env, ps, dt, pl[i].kernel, &files, opts, sizeof opts, d);
        if (!nf)
            return d ? d->code : FAID_EINVAL;
        faid_launch *l = faid_plan_add(p, files, nf, opts, pl[i].kernel);
        if (!l)
            break;
        l->items = pl[i].items;
        l->groups = pl[i].groups;
        l->lws = pl[i].lws;
        l->per_lane = 1;
        l->ev = pl[i].ev;
        pk_args(env, res, ps, dt, l);
    }
    return faid_plan_check(p, "peaks", d);
}

static int pk_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
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
    const double *us = sl->lane[lane].us[id];
    for (int i = EV_A; i <= EV_F; i++) {
        t->peaks_us += us[i];
        t->pkfind_us += us[i];
        t->find_us[i - EV_A] += us[i];
    }
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
    fr->res->t.pkfind_us += faid_stage_now_us() - t0;
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

/* The finder's time, a result key (find_us) of frames with peaks (issue 17: the daemon's
 * results beside faid-bench's stage by stage). */
static const faid_time_decl pk_timings[] = {
    {.name = "find",
     .help = "part of peaks: the peak finder's launches",
     .key = FAID_KEY_FIND_US,
     .field = offsetof(faid_stage_times, pkfind_us),
     .peaks_only = 1},
};

const faid_stage faid_stage_peaks = {
    .name = "peaks",
    .enabled = pk_enabled,
    .declare = pk_declare,
    .ref_run = pk_ref_run,
    .plan = pk_plan,
    .collect = pk_collect,
    .times = pk_times,
    .outputs = pk_outputs,
    .noutputs = FAID_NROWS(pk_outputs),
    .timings = pk_timings,
    .ntimings = FAID_NROWS(pk_timings),
};
