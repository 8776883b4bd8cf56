/* faid_stage_sigclip: the sigma-clipped background per radial bin (peaks.algorithm not none),
 * pyFAI's sigma_clip_ng semantics (faid_sigclip.h), into the result's background profile. Its
 * declare also builds what the three peak stages share for the setup (faid_peak_setup: the
 * peak geometry, peakfinder8's radius bins, the corrections with the Poisson variance).
 *
 * Reference device: the frame preprocessed by the integrate stage ("pre") when the integration's
 * error model is poisson, else preprocessed again here with the Poisson variance ("pk_pre"),
 * then faid_sigclip_ref over setup->csr_bg (no pixel splitting, the profile's bins).
 *
 * Compute devices: buffers bg.indptr / bg.indices / bg.coef (setup->csr_bg), bg.order (its bins
 * from the largest to the smallest: the work-groups' order with sigma_clip.cl's SC_ORDER, built
 * only when FAID_PEAKS_KOPTS turns that on, else an alias of bg.indptr), per slot
 * pk.pre (one preprocessed frame, float4 per pixel; 16 bytes when fused (FAID_PEAKS_FUSED=1, or
 * unset with the local-memory sigma clip), when the kernels compute each pixel from the raw frame
 * and the preprocess launch is left out) and pk.cpk (the overflow entries of bins larger than the
 * kernel keeps in registers, faid_sigclip_config; 16 bytes when none is); output bg (mean, std,
 * sem, count per bin, read back). Its plan, per lane: faid_preprocess of process/preprocess.cl
 * built with the Poisson error model (EM=1) into pk.pre, then faid_sigma_clip of
 * peaks/sigma_clip.cl into the lane's bg segment. The peaks stage's per-lane launches read the same
 * pk.pre and bg right after (the device runs every stage's launches of a lane before the next
 * lane's), so one preprocessed frame per slot serves every lane (64 MB for a 4M detector) instead
 * of one per lane. The kernels equal the references (tests/unit/test_peaks.c). */
#include "faid_stage.h"

#include "faid_pf8.h"
#include "faid_sigclip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_PRE, EV_SC, EV_PERM }; /* per lane */

size_t faid_stage_peaks_wg(const faid_stage_env *env)
{
    size_t wg = 256;
    while (wg > 1 && env->info->max_wg && wg > env->info->max_wg)
        wg >>= 1;
    return wg;
}

/* An integer from the environment variable `name` in [lo, hi] (lo >= 0); unset when unset, -1
 * (error in d) when set to something else. */
static long env_knob_or(const char *name, long lo, long hi, long unset, faid_diag *d)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return unset;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        faid_fail(d, FAID_EINVAL, "peaks: %s=%s is not an integer in [%ld, %ld]", name, v, lo, hi);
        return -1;
    }
    return x;
}

static long env_knob(const char *name, long lo, long hi, faid_diag *d)
{
    return env_knob_or(name, lo, hi, 0, d);
}

/* The local arrays of the sigma clip's local-memory kernel (LM entries per work-item): 6 doubles
 * and an int per work-item, 8 doubles and an int per raking chunk (at most 32), and the entries
 * (nv floats each); with the coalesced gather (cg) the entries padded by one in 32 and, where the
 * scan's arrays (12 wg floats) cannot hold the staging of r register entries (cg 1: r nv > 12)
 * or the chunk's tile (cg 2: wg cgu entries padded), that staging or tile too (sigma_clip.cl's
 * SC_CG, TCAP) */
static size_t sc_local_bytes(size_t wg, long lm, int nv, int cg, long r, long cgu)
{
    const size_t nch = wg < 32 ? wg : 32;
    size_t ents = (size_t)lm * wg;
    if (cg && lm)
        ents += ents / 32 + 1;
    const size_t tcap = wg * (size_t)cgu + wg * (size_t)cgu / 32 + 1;
    size_t stage = cg == 1 && r * nv > 12 ? (size_t)r * wg * (size_t)nv * sizeof(float)
                   : cg == 2 && tcap * (size_t)nv > 12 * wg ? tcap * (size_t)nv * sizeof(float)
                                                            : 0;
    return wg * (6 * sizeof(double) + sizeof(int)) + nch * (8 * sizeof(double) + sizeof(int)) + 64 +
           ents * (size_t)nv * sizeof(float) + stage;
}

int faid_sigclip_config(const faid_dev_info *info, const faid_csr *csr, faid_clip_model em,
                        faid_sigclip_cfg *cfg, faid_diag *d)
{
    memset(cfg, 0, sizeof *cfg);
    long wg = env_knob("FAID_SIGCLIP_WG", 1, 1024, d);
    long r = env_knob("FAID_SIGCLIP_R", 1, 128, d);
    /* -2: unset, the default below; 0 selects the register kernel */
    long lm = env_knob_or("FAID_SIGCLIP_LM", 0, 1024, -2, d);
    /* the gather in batches (sigma_clip.cl's SC_GB, issue 17 round 4); -2: unset, 8 with the
     * default local-memory kernel below, else 0 */
    long gb = env_knob_or("FAID_SIGCLIP_GB", 0, 16, -2, d);
    /* a cap on the kernel's registers per work-item (NVIDIA's -cl-nv-maxrregcount; round 3):
     * 2 work-groups of 256 per SM at up to 128 registers, 3 at 80, 4 at 64 (65,536 per SM); 0,
     * the compiler's choice. -2: unset, 80 with the default local-memory kernel (FAID_SIGCLIP_LM
     * and FAID_SIGCLIP_R unset), else 0: on one H100 (2026-11-27, EIGER 4M, 1000 bins, round 8,
     * tests/bench/results/h100-2026-11-27-round8-probe, two calls) clip + pyfai picker 3,762 ->
     * 3,953 and 3,768 -> 3,985 frames/s pipelined, clip + peakfinder8 3,092 -> 3,204 and
     * 3,105 -> 3,239; the clip alone 155 -> 151 us (121 registers before: 2 work-groups per SM,
     * 24 % occupancy, latency-bound in its profile; 64: 3,924 / 3,223, alone 173 us; 72 and 96
     * less); the same bits (a register cap moves no operation) */
    long maxreg = env_knob_or("FAID_SIGCLIP_MAXREG", 0, 255, -2, d);
    /* the coalesced gather (sigma_clip.cl's SC_CG, issue 17 round 5); 2 takes each chunk through
     * a tile in local memory (the overflow entries written coalesced); FAID_SIGCLIP_CGU entries
     * per work-item and chunk. -2: unset, 1 with the default local-memory kernel (FAID_SIGCLIP_LM
     * and FAID_SIGCLIP_R unset), else 0: on one H100 (2026-11-27, EIGER 4M, 1000 bins, two runs,
     * tests/bench/results/h100-2026-11-27-round5-final) clip + pyfai picker 3,192 -> 3,407 and
     * 3,209 -> 3,415 frames/s pipelined with chunks of 8, clip + peakfinder8 equal or better
     * (2,764 -> 2,763, 2,672 -> 2,759), the poisson model 2,402 -> 2,760; one frame alone the
     * clip is slower (159 -> 184 us: a barrier per chunk), in flight it moves 2.6x fewer sectors
     * (docs/PERFORMANCE.md, round 5); the same bits. Chunks of 4 by default since round 8 (its
     * chunk's loads issued together since: clip + picker 4,032 -> 4,068 and 4,025 -> 4,072
     * frames/s in two calls against 8, 16 slower; tests/bench/results/
     * h100-2026-11-27-round8-probe, calls g and h) */
    long cg = env_knob_or("FAID_SIGCLIP_CG", 0, 2, -2, d);
    long cgu = env_knob_or("FAID_SIGCLIP_CGU", 1, 16, 4, d);
    if (wg < 0 || r < 0 || lm == -1 || gb == -1 || maxreg == -1 || cg == -1 || cgu < 0)
        return d ? d->code : FAID_EINVAL;
    if (maxreg == -2)
        maxreg = lm == -2 && r == 0 ? 80 : 0;
    if (cg == -2)
        cg = lm == -2 && r == 0 ? 1 : 0;
    if (wg & (wg - 1))
        return faid_fail(d, FAID_EINVAL, "peaks: FAID_SIGCLIP_WG=%ld is not a power of two", wg);
    size_t pick = 256;
    while (pick > 1 && info->max_wg && pick > info->max_wg)
        pick >>= 1;
    cfg->wg = wg ? (size_t)wg : pick;
    if (info->max_wg && cfg->wg > info->max_wg)
        return faid_fail(d, FAID_EUNSUP, "peaks: %s allows %zu work-items, FAID_SIGCLIP_WG=%zu",
                         info->name, info->max_wg, cfg->wg);
    int32_t maxbin = 0;
    for (int32_t b = 0; b < csr->nbins; b++)
        if (csr->indptr[b + 1] - csr->indptr[b] > maxbin)
            maxbin = csr->indptr[b + 1] - csr->indptr[b];
    const int nv = em == FAID_CLIP_AZIMUTHAL ? 2 : 3; /* signal, norm (and variance) per entry */
    if (lm == -2) {
        /* the default: 12 entries per work-item in local memory and 4 in registers (the rest
         * overflows), issue 17's GPU run (one H100, EIGER 4M, docs/PERFORMANCE.md): the sigma
         * clip 173 us a frame fused with it, 290 us in the register kernel. Where 12 does not fit
         * (NVIDIA's 48 KB with the variance of the poisson and hybrid models: 52 KB) the largest
         * share that does, the register kernel where none does; an explicit FAID_SIGCLIP_LM that
         * does not fit stays an error below. */
        lm = 12;
        while (lm > 0 && info->local_mem &&
               sc_local_bytes(cfg->wg, lm, nv, (int)cg, r ? r : 4, cgu) > info->local_mem)
            lm--;
        /* 4 in registers and the gather in batches of 8 (round 4's H100 run, 2026-11-26,
         * tests/bench/results/h100-2026-11-26-round4-clip: clip 173 -> 159 us one frame alone,
         * clip + picker 3,013 -> 3,206 frames/s pipelined, same bits; 8 in registers with the
         * batches 232 us, the batches alone no better) */
        if (lm && !r)
            r = 4;
        if (lm && gb == -2)
            gb = 8;
    }
    if (gb == -2)
        gb = 0;
    if (!r) {
        /* the largest bin in registers (with FAID_SIGCLIP_LM: what local memory does not hold):
         * on an H200, EIGER 4M, 1000 bins (11,396 entries at most), 48 per work-item of 256
         * (tests/bench/results/, docs/PERFORMANCE.md) */
        r = ((long)maxbin + (long)cfg->wg - 1) / (long)cfg->wg - lm;
        r = (r + 3) / 4 * 4;
        r = r < 4 ? 4 : r > 64 ? 64 : r;
    }
    cfg->r = (int)r;
    cfg->lm = (int)lm;
    cfg->gb = (int)gb;
    cfg->cg = (int)cg;
    cfg->cgu = cg ? (int)cgu : 0;
    if (lm || cg) {
        const size_t bytes = sc_local_bytes(cfg->wg, lm, nv, (int)cg, r, cgu);
        if (info->local_mem && bytes > info->local_mem)
            return faid_fail(d, FAID_EUNSUP,
                             "peaks: FAID_SIGCLIP_LM=%ld, FAID_SIGCLIP_R=%ld%s with %zu "
                             "work-items needs %zu bytes of local memory, %s has %zu",
                             lm, r,
                             cg == 1   ? ", FAID_SIGCLIP_CG=1"
                             : cg == 2 ? ", FAID_SIGCLIP_CG=2"
                                       : "",
                             cfg->wg, bytes, info->name, info->local_mem);
    }
    const size_t esz = em == FAID_CLIP_AZIMUTHAL ? 2 * sizeof(float) : 4 * sizeof(float);
    cfg->ovf_bytes = (size_t)maxbin > cfg->wg * (size_t)(r + lm) && csr->nnz > 0
                         ? (size_t)csr->nnz * esz
                         : 4 * sizeof(float);
    snprintf(cfg->opts, sizeof cfg->opts,
             "-cl-fp32-correctly-rounded-divide-sqrt -D WG=%zu -D R=%d -D HAS_COEF=%d -D SC_EM=%d",
             cfg->wg, cfg->r, csr->data ? 1 : 0, (int)em);
    if (lm) {
        size_t n = strlen(cfg->opts);
        snprintf(cfg->opts + n, sizeof cfg->opts - n, " -D LM=%d", cfg->lm);
    }
    if (gb) {
        size_t n = strlen(cfg->opts);
        snprintf(cfg->opts + n, sizeof cfg->opts - n, " -D SC_GB=%d", cfg->gb);
    }
    if (cg) {
        size_t n = strlen(cfg->opts);
        snprintf(cfg->opts + n, sizeof cfg->opts - n, " -D SC_CG=%d -D SC_CGU=%d", cfg->cg,
                 cfg->cgu);
    }
    /* a compiler option of NVIDIA's OpenCL only (another platform refuses an unknown option): a
     * knob without effect elsewhere */
    if (maxreg && strstr(info->name, "NVIDIA")) {
        size_t n = strlen(cfg->opts);
        snprintf(cfg->opts + n, sizeof cfg->opts - n, " -cl-nv-maxrregcount=%ld", maxreg);
    }
    return FAID_OK;
}

int faid_stage_peaks_scratch(faid_stage_env *env, faid_stage_res *res, const char *name,
                             size_t bytes, faid_diag *d)
{
    size_t nl = env->batch > 0 ? (size_t)env->batch : 1;
    return faid_restab_declare(res->rt, name, (bytes + nl - 1) / nl, 64, FAID_RES_DEVICE, d);
}

/* Elements between two lanes' frames in the slot's "raw" buffer (frames of dtype dt). */
static int64_t raw_lane_step(const faid_stage_res *res, faid_dtype dt)
{
    return (int64_t)(faid_restab_lane_bytes(res->rt, "raw") / faid_dtype_size(dt));
}

/* The raw-side arguments from the named buffers: the frame (raw_off advancing by raw_step per
 * lane), the dark and normp arrays in the same pixel order, and the corrections' scalars. */
static void raw_args_from(const faid_stage_res *res, faid_launch *l, const char *raw,
                          const char *dark, const char *normp, int64_t raw_step)
{
    const faid_corrections *c = &res->setup->corr;
    faid_pa_buf(l, "raw", raw);
    faid_pa_buf(l, "dark", dark);
    faid_pa_buf(l, "normp", normp);
    faid_pa_int(l, "do_dark", c->dark != NULL, 0);
    faid_pa_int(l, "do_dummy", c->do_dummy, 0);
    faid_pa_float(l, "dummy", c->dummy);
    faid_pa_float(l, "delta_dummy", c->delta_dummy);
    faid_pa_uint(l, "raw_off", 0, raw_step);
}

void faid_stage_peaks_raw_args(const faid_stage_res *res, faid_dtype dt, faid_launch *l)
{
    raw_args_from(res, l, "raw", "dark", "normp", raw_lane_step(res, dt));
}

int faid_stage_peaks_fused_opts(const faid_peak_setup *ps, faid_dtype dt, const char *base,
                                char *opts, size_t n, faid_diag *d)
{
    int code = ps->fused ? faid_stage_raw_code(dt) : 0;
    if (ps->fused && !code)
        return faid_fail(d, FAID_EDTYPE, "peaks: frame dtype %s is not supported",
                         faid_dtype_name(dt));
    int w = code ? snprintf(opts, n, "%s -D RAW_CODE=%d -D EM=%d -D PK_FUSED=1", base, code,
                            (int)FAID_EM_POISSON)
                 : snprintf(opts, n, "%s", base);
    if (w < 0 || (size_t)w >= n)
        return faid_fail(d, FAID_ERANGE, "peaks: build options too long (FAID_PEAKS_KOPTS)");
    return FAID_OK;
}

/* FAID_PEAKS_KOPTS: extra -D options of the finders' and the sigma clip's programs (since round 8:
 * sigma_clip.cl's SC_AZSEL, SC_RAKE, SC_FDIV, SC_ORDER; round 9: SC_ONCE), a benchmark knob for the
 * kernel variants of issue 17 (pf8_peaks.cl: PF8_HASH, PF8_LOCAL_CAND, both 1 by default since the
 * GPU run; -DPF8_HASH=0,-DPF8_LOCAL_CAND=0 selects the kernels before); "" when unset. Letters,
 * digits, '_', '=', '-', spaces and commas (read as spaces, so that a shell word holds several
 * options: -DPF8_HASH=1,-DPF8_LOCAL_CAND=1) only, at most 120 characters: anything else is an
 * error naming the variable. */
static int pk_kopts(char *out, size_t cap, faid_diag *d)
{
    const char *v = getenv("FAID_PEAKS_KOPTS");
    out[0] = 0;
    if (!v)
        return FAID_OK;
    size_t n = strlen(v);
    if (n > 120 ||
        strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=- ,") != n)
        return faid_fail(d, FAID_EINVAL,
                         "peaks: FAID_PEAKS_KOPTS='%.40s' is not a list of -D NAME=VALUE options",
                         v);
    snprintf(out, cap, "%s", v);
    for (char *c = out; *c; c++)
        if (*c == ',')
            *c = ' ';
    return FAID_OK;
}

int faid_stage_peaks_kopt(const faid_peak_setup *ps, const char *name)
{
    const size_t n = strlen(name);
    for (const char *k = strstr(ps->kopts, name); k; k = strstr(k + 1, name)) {
        const int starts = k == ps->kopts || k[-1] == ' ' || k[-1] == 'D';
        if (starts && k[n] == '=')
            return atoi(k + n + 1);
        if (starts && (k[n] == 0 || k[n] == ' '))
            return 1;
    }
    return 0;
}

/* FAID_SIGCLIP_PERM: the corrections in the background matrix' entry order ("bg.normp",
 * "bg.dark"), the entry of every pixel ("bg.perm", -1 for a pixel in no bin; the scatter's map)
 * and the per-slot copy of a raw frame in that order ("pk.rawp", nnz elements of at most 4
 * bytes: every raw code of faid_stage_raw_code). */
static int sc_declare_perm(faid_stage_env *env, faid_stage_res *res, const faid_csr *m,
                           faid_diag *d)
{
    const faid_setup *s = res->setup;
    float *normp = malloc(s->npix * sizeof(float));
    int32_t *perm = malloc(s->npix * sizeof(int32_t));
    int rc = normp && perm
                 ? FAID_OK
                 : faid_fail(d, FAID_ENOMEM,
                             "peaks: out of memory for FAID_SIGCLIP_PERM (%zu pixels)", s->npix);
    if (!rc) {
        faid_stage_fold_norm(&s->corr, normp);
        rc = faid_stage_entry_order(res, "bg.normp", m, normp, d);
    }
    if (!rc)
        rc = s->corr.dark ? faid_stage_entry_order(res, "bg.dark", m, s->corr.dark, d)
                          : faid_restab_alias(res->rt, "bg.dark", "one", d);
    for (size_t i = 0; !rc && i < s->npix; i++)
        perm[i] = -1;
    for (int64_t k = 0; !rc && k < (int64_t)m->nnz; k++) {
        const int32_t px = m->indices[k];
        if (px < 0 || (size_t)px >= s->npix || perm[px] != -1)
            rc = faid_fail(d, FAID_ECONFIG,
                           "peaks: FAID_SIGCLIP_PERM: entry %lld of the background matrix names "
                           "pixel %d, %s",
                           (long long)k, (int)px,
                           px < 0 || (size_t)px >= s->npix ? "outside the frame"
                                                           : "which an earlier entry names too");
        else
            perm[px] = (int32_t)k;
    }
    if (!rc)
        rc = faid_restab_static(res->rt, "bg.perm", s->npix * sizeof(int32_t), perm, d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.rawp", (size_t)m->nnz * sizeof(float), d);
    free(normp);
    free(perm);
    return rc;
}

/* The sigma clip's bins from the largest to the smallest, ties in bin order ("bg.order": work-group
 * g of faid_sigma_clip takes bin order[g], sigma_clip.cl's SC_ORDER). Sorted as 64-bit keys, the
 * complement of the size above the bin index, so that the comparison needs no shared state. */
static int sc_key_cmp(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int sc_declare_order(faid_stage_res *res, const faid_peak_setup *ps, const faid_csr *m,
                            faid_diag *d)
{
    /* a build without SC_ORDER does not read it: the kernel's argument is then bg.indptr */
    if (!faid_stage_peaks_kopt(ps, "SC_ORDER"))
        return faid_restab_alias(res->rt, "bg.order", "bg.indptr", d);
    const size_t n = m->nbins > 0 ? (size_t)m->nbins : 1;
    uint64_t *key = malloc(n * sizeof *key);
    int32_t *order = malloc(n * sizeof *order);
    if (!key || !order) {
        free(key);
        free(order);
        return faid_fail(d, FAID_ENOMEM,
                         "peaks: out of memory for the sigma clip's bin order (%d bins)", m->nbins);
    }
    for (size_t b = 0; b < n; b++) {
        const uint32_t size = m->nbins > 0 ? (uint32_t)(m->indptr[b + 1] - m->indptr[b]) : 0;
        key[b] = ((uint64_t)(UINT32_MAX - size) << 32) | (uint32_t)b;
    }
    qsort(key, n, sizeof *key, sc_key_cmp);
    for (size_t b = 0; b < n; b++)
        order[b] = (int32_t)(key[b] & 0xffffffffu);
    free(key);
    int rc = faid_restab_static(res->rt, "bg.order", n * sizeof *order, order, d);
    free(order);
    return rc;
}

static int sc_declare_cl(faid_stage_env *env, faid_stage_res *res, faid_diag *d)
{
    if (!env->info->has_fp64)
        return faid_fail(d, FAID_EUNSUP,
                         "peaks: device %s lacks float64 arithmetic (the background sums are "
                         "float64)",
                         env->info->name);
    const faid_csr *m = res->setup->csr_bg;
    int rc = faid_restab_static(res->rt, "bg.indptr", ((size_t)m->nbins + 1) * sizeof(int32_t),
                                m->indptr, d);
    if (!rc)
        rc = m->nnz > 0 ? faid_restab_static(res->rt, "bg.indices",
                                             (size_t)m->nnz * sizeof(int32_t), m->indices, d)
                        : faid_restab_alias(res->rt, "bg.indices", "one", d);
    if (!rc)
        rc = m->data && m->nnz > 0 ? faid_restab_static(res->rt, "bg.coef",
                                                        (size_t)m->nnz * sizeof(float), m->data, d)
                                   : faid_restab_alias(res->rt, "bg.coef", "one", d);
    faid_peak_setup *ps = res->state[faid_stage_id(&faid_stage_sigclip)];
    if (!rc)
        rc = faid_sigclip_config(env->info, m, ps->p.error_model, &ps->sc, d);
    /* FAID_PEAKS_FUSED=1: no preprocessed copy (a 16-byte stand-in, not 16 bytes per pixel): the
     * kernels read the raw frame. Unset: fused with the local-memory sigma clip, not with the
     * register kernel (issue 17's GPU run, one H100, EIGER 4M, clip+pyfai: fused with LM=12 R=8
     * 2927 frames/s, the preprocess and the register kernel 2123, fused and the register kernel
     * 1992) */
    const char *fz = getenv("FAID_PEAKS_FUSED");
    if (!rc && fz && *fz && strcmp(fz, "0") != 0 && strcmp(fz, "1") != 0)
        rc = faid_fail(d, FAID_EINVAL, "peaks: FAID_PEAKS_FUSED=%s is not 0 or 1", fz);
    ps->fused = fz && *fz ? !strcmp(fz, "1") : ps->sc.lm > 0;
    /* the clip's pixels from a copy of the frame in the matrix' entry order (issue 17, round 6,
     * peaks/bg_permute.cl): 1 made by a scatter in pixel order, 2 by a gather in entry order;
     * off unless set (GPU figures: docs/PERFORMANCE.md) */
    long pm = rc ? 0 : env_knob("FAID_SIGCLIP_PERM", 0, 2, d);
    if (pm < 0)
        rc = d ? d->code : FAID_EINVAL;
    ps->perm = pm > 0 && m->nnz > 0 ? (int)pm : 0;
    if (!rc && ps->perm && !ps->fused)
        rc = faid_fail(d, FAID_EINVAL,
                       "peaks: FAID_SIGCLIP_PERM=%d reads the raw frame and needs the fused "
                       "kernels (FAID_PEAKS_FUSED=1, or unset with the default sigma clip)",
                       ps->perm);
    if (!rc && ps->perm)
        rc = sc_declare_perm(env, res, m, d);
    if (!rc)
        rc = pk_kopts(ps->kopts, sizeof ps->kopts, d);
    if (!rc)
        rc = sc_declare_order(res, ps, m, d);
    long fg = rc ? 0 : env_knob("FAID_PF8_FILL_GROUPS", 1, 65536, d);
    if (fg < 0)
        rc = d ? d->code : FAID_EINVAL;
    ps->fill_groups = fg > 0 ? (int)fg : FAID_PF8_FILL_GROUPS;
    /* peakfinder8's launch-plan variants of issue 17's round 4 (faid_stage_peaks.c), 0 or 1: the
     * scan merged into the write (FAID_PF8_MERGE) is on unless set to 0 since the H100 run of
     * 2026-11-26 (find 291 -> 284 us, one launch fewer); the others lost and are off unless set */
    long mg = rc ? 0 : env_knob_or("FAID_PF8_MERGE", 0, 1, 1, d);
    long ga = rc || mg < 0 ? 0 : env_knob("FAID_PF8_GATHER", 0, 1, d);
    long cf = rc || mg < 0 || ga < 0 ? 0 : env_knob("FAID_PF8_CANDFILL", 0, 1, d);
    long np = rc || mg < 0 || ga < 0 || cf < 0 ? 0 : env_knob("FAID_PF8_NOPREP", 0, 1, d);
    if (mg < 0 || ga < 0 || cf < 0 || np < 0)
        rc = d ? d->code : FAID_EINVAL;
    ps->pf8_noprep = np > 0;
    ps->pf8_merge = mg > 0;
    ps->pf8_gather = ga > 0;
    ps->pf8_candfill = cf > 0;
    if (!rc)
        rc = faid_stage_peaks_scratch(
            env, res, "pk.pre", ps->fused ? 4 * sizeof(float) : res->npix * 4 * sizeof(float), d);
    if (!rc)
        rc = faid_stage_peaks_scratch(env, res, "pk.cpk", ps->sc.ovf_bytes, d);
    if (!rc)
        rc = faid_restab_output(res->rt, "bg", 4 * (size_t)m->nbins, 1, d);
    return rc;
}

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
    /* FAID_PEAKS_PANELS=ROWSxCOLS: peakfinder8's panel grid (default: the whole frame one
     * panel), a knob for the tests of the panel-bounded kernels (tests/unit/test_peaks.c) */
    int prows = 0, pcols = 0;
    const char *pv = getenv("FAID_PEAKS_PANELS");
    char tail;
    if (pv && *pv && (sscanf(pv, "%dx%d%c", &prows, &pcols, &tail) != 2 || prows < 0 || pcols < 0))
        return faid_fail(d, FAID_EINVAL, "peaks: FAID_PEAKS_PANELS=%s is not ROWSxCOLS", pv);
    ps->geom =
        faid_peak_geom_new(&s->geom, s->mask, s->csr_bg, s->cfg.unit, &ps->p, prows, pcols, d);
    if (!ps->geom)
        return d && d->code ? d->code : FAID_ENOMEM;
    if (ps->p.algorithm == FAID_PEAKS_PEAKFINDER8 && !(ps->pf8 = faid_pf8_bins_new(ps->geom, d)))
        return d && d->code ? d->code : FAID_ENOMEM;
    if (env->info)
        return sc_declare_cl(env, res, d);
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
        rc =
            faid_sigclip_ref(ps->csr_bg, pre, &ps->p, res->setup->corr.empty, fr->res->bg, NULL, d);
    fr->res->t.peaks_us += faid_stage_now_us() - t0;
    fr->res->t.clip_us += faid_stage_now_us() - t0;
    return rc;
}

/* The sigma-clip kernel is built as faid_sigclip_config chose (work-group size sc.wg).
 * Measured on an H200 (EIGER 4M, tests/bench/results/h200-2026-11-22-sigclip/): gathering each
 * bin's entries once into a compact CSR-order copy and walking that contiguously, 4 entries per
 * work-item per tile, took the preprocess + sigma clip of one frame from 622 to 341 us and the
 * pyfai picker path, 32 frames in flight, from 2,040 to 2,329-2,426 frames/s; the copy (72 MB)
 * was still walked up to 11 times per frame. Now each work-item keeps its share of the bin in
 * registers across all passes (sigma_clip.cl): the frame is read once. */
static int sc_plan(const faid_stage_env *env, const faid_stage_res *res, int id, faid_dtype dt,
                   faid_plan *p, faid_diag *d)
{
    const faid_peak_setup *ps = res->state[id];
    const faid_corrections *c = &res->setup->corr;
    const int nl = env->batch > 0 ? env->batch : 1;
    if ((!ps->fused &&
         faid_restab_lane_bytes(res->rt, "pk.pre") * (size_t)nl < res->npix * 4 * sizeof(float)) ||
        faid_restab_lane_bytes(res->rt, "pk.cpk") * (size_t)nl < ps->sc.ovf_bytes)
        return faid_fail(d, FAID_ESIZE, "peaks: slot of %d lanes too small for one frame", nl);
    const int code = faid_stage_raw_code(dt);
    if (!code)
        return faid_fail(d, FAID_EDTYPE, "peaks: frame dtype %s is not supported",
                         faid_dtype_name(dt));
    char opts[128];
    snprintf(opts, sizeof opts, "-D RAW_CODE=%d -D EM=%d -D NBATCH=%d", code, (int)FAID_EM_POISSON,
             env->batch);
    static const char *const pre_files[] = {"process/preprocess.cl", "process/integrate.cl"};
    /* with ps->fused the kernels compute each pixel from the raw frame: no preprocess */
    faid_launch *l = ps->fused ? NULL : faid_plan_add(p, pre_files, 2, opts, "faid_preprocess");
    if (l) {
        l->lws = faid_stage_pixel_wg(env);
        l->shrink = 1;
        l->items = res->npix;
        l->per_lane = 1;
        l->ev = EV_PRE;
        faid_stage_peaks_raw_args(res, dt, l);
        faid_pa_int(l, "npix", (int32_t)res->npix, 0);
        faid_pa_buf(l, "out", "pk.pre");
    }
    if (ps->perm) {
        static const char *const pm_files[] = {"process/preprocess.cl", "peaks/bg_permute.cl"};
        l = faid_plan_add(p, pm_files, 2, opts,
                          ps->perm == 1 ? "faid_bg_scatter" : "faid_bg_gather");
        if (l) {
            l->lws = faid_stage_pixel_wg(env);
            l->shrink = 1;
            l->items = ps->perm == 1 ? res->npix : (size_t)ps->csr_bg->nnz;
            l->per_lane = 1;
            l->ev = EV_PERM;
            faid_pa_buf(l, "raw", "raw");
            faid_pa_uint(l, "raw_off", 0, raw_lane_step(res, dt));
            faid_pa_buf(l, "perm", "bg.perm");
            faid_pa_int(l, "npix", (int32_t)res->npix, 0);
            faid_pa_buf(l, "indices", "bg.indices");
            faid_pa_int(l, "nnz", (int32_t)ps->csr_bg->nnz, 0);
            faid_pa_buf(l, "rawp", "pk.rawp");
        }
    }
    static const char *const sc_files[] = {"process/preprocess.cl", "peaks/sigma_clip.cl"};
    /* FAID_PEAKS_KOPTS reaches the sigma clip's program too (sigma_clip.cl's SC_* options) */
    char sc_base[sizeof ps->sc.opts + sizeof ps->kopts + 16];
    snprintf(sc_base, sizeof sc_base, "%s%s %s", ps->sc.opts, ps->perm ? " -D SC_PERM=1" : "",
             ps->kopts);
    char sc_opts[sizeof sc_base + 80];
    int rc = faid_stage_peaks_fused_opts(ps, dt, sc_base, sc_opts, sizeof sc_opts, d);
    if (rc)
        return rc;
    l = faid_plan_add(p, ps->fused ? sc_files : sc_files + 1, ps->fused ? 2 : 1, sc_opts,
                      "faid_sigma_clip");
    if (l) {
        int off, stride;
        faid_restab_out(res->rt, "bg", &off, &stride);
        l->lws = ps->sc.wg;
        l->groups = (size_t)ps->csr_bg->nbins;
        l->per_lane = 1;
        l->ev = EV_SC;
        l->hint = "FAID_SIGCLIP_WG, FAID_SIGCLIP_R, FAID_SIGCLIP_LM, FAID_SIGCLIP_GB, "
                  "FAID_SIGCLIP_MAXREG, FAID_SIGCLIP_CG, FAID_SIGCLIP_CGU, FAID_SIGCLIP_PERM";
        faid_pa_buf(l, "pre4", "pk.pre");
        faid_pa_buf(l, "coefs", "bg.coef");
        faid_pa_buf(l, "indices", "bg.indices");
        faid_pa_buf(l, "indptr", "bg.indptr");
        faid_pa_buf(l, "ovf", "pk.cpk");
        faid_pa_int(l, "nbins", ps->csr_bg->nbins, 0);
        faid_pa_float(l, "cutoff", (float)ps->p.cutoff_clip);
        faid_pa_int(l, "cycles", ps->p.cycles, 0);
        faid_pa_float(l, "empty", c->empty);
        faid_pa_buf(l, "out", "out");
        faid_pa_int(l, "out_off", off, stride);
        if (ps->perm) /* the lane's copy in entry order (made just before, same queue) */
            raw_args_from(res, l, "pk.rawp", "bg.dark", "bg.normp", 0);
        else
            faid_stage_peaks_raw_args(res, dt, l);
        faid_pa_buf(l, "order", "bg.order");
    }
    return faid_plan_check(p, "sigclip", d);
}

static int sc_collect(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                      const float *h_lane, faid_result *r, faid_diag *d)
{
    (void)env;
    (void)sl;
    (void)lane;
    (void)d;
    int off, stride;
    faid_restab_out(res->rt, "bg", &off, &stride);
    faid_background *bg = r->bg;
    const size_t n = (size_t)bg->nbins;
    float *dst[4] = {bg->mean, bg->std, bg->sem, bg->count};
    for (int a = 0; a < 4; a++)
        memcpy(dst[a], h_lane + off + (size_t)a * n, n * sizeof(float));
    return FAID_OK;
}

static void sc_times(const faid_stage_slot *sl, int lane, int id, faid_stage_times *t)
{
    const double *us = sl->lane[lane].us[id];
    /* the copy in entry order (FAID_SIGCLIP_PERM) counts as the peak stages' preprocess, so
     * that the benchmark shows the copy and the clip apart */
    const double pre = us[EV_PRE] + us[EV_PERM], sc = us[EV_SC];
    t->peaks_us += pre + sc;
    t->pkpre_us += pre;
    t->clip_us += sc;
}

const faid_peak_setup *faid_stage_peak_setup(const faid_stage_res *res)
{
    int id = faid_stage_id(&faid_stage_sigclip);
    return id >= 0 && res->enabled[id] ? res->state[id] : NULL;
}

/* The sigma-clipped background on the profile's radial bins. */
static const faid_output_decl sc_outputs[] = {
    FAID_OUTPUT(BG_I, F32, BG, faid_background, mean),
    FAID_OUTPUT(BG_SIGMA, F32, BG, faid_background, sem),
    FAID_OUTPUT(BG_STD, F32, BG, faid_background, std),
    FAID_OUTPUT(BG_COUNT, F32, BG, faid_background, count),
};

/* No histogram: faid-bench reports them (the peaks stage adds to "peaks" too); the clip is a
 * result key (clip_us) of frames with peaks, so that the daemon's results show it beside
 * faid-bench's (issue 17). */
static const faid_time_decl sc_timings[] = {
    FAID_TIME("peaks", UNKNOWN, peaks_us, 0, "background, peak finding and hit decision"),
    {.name = "clip",
     .help = "part of peaks: the sigma clip",
     .key = FAID_KEY_CLIP_US,
     .field = offsetof(faid_stage_times, clip_us),
     .peaks_only = 1},
    FAID_TIME("peaks_preprocess", UNKNOWN, pkpre_us, 0,
              "part of peaks: the peak stages' Poisson preprocess"),
};

const faid_stage faid_stage_sigclip = {
    .name = "sigclip",
    .enabled = sc_enabled,
    .declare = sc_declare,
    .release = sc_release,
    .ref_run = sc_ref_run,
    .plan = sc_plan,
    .collect = sc_collect,
    .times = sc_times,
    .outputs = sc_outputs,
    .noutputs = FAID_NROWS(sc_outputs),
    .timings = sc_timings,
    .ntimings = FAID_NROWS(sc_timings),
};
