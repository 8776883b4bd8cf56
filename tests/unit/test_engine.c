/* test_engine: the OpenCL engine (PoCL, device "cpu") against the plain C reference engine ("ref")
 * on a small synthetic setup built by hand: a 1D matrix with two-bin splitting and a 2D cake, a
 * mask, dark, flat (with one dummy flat pixel), solid angle, polarization, dummy raw values and
 * empty bins. Covers every error model, frame dtypes uint16/uint32/int32/float32, encodings none
 * and bslz4, fused and unfused kernels, a reload, determinism (same frame twice is bit-identical)
 * and a corrupt bslz4 frame (an error, and the next good frame is unaffected). The pipelined API
 * (submit / collect with several frames in flight, zero-copy inputs) must give the same bits as
 * faid_engine_process, in submission order, with a corrupt frame failing alone, also with one
 * thread submitting and another collecting (faid_engine_set_threaded).
 *
 * Agreement criterion per bin: |x_cl - x_ref| <= 1e-5 * max(|x_ref|, mean |x_ref|) for I, sigma
 * and std; the reference is float64 (faid_reduce.h), the kernels compensated float32. */
#include "faid_test.h"

#include "faid_engine.h"
#include "faid_log.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROWS  37
#define COLS  53
#define NPIX  (ROWS * COLS)
#define NRAD  24
#define NAZIM 8
#define TOL   1e-5

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

/* Poisson-ish counts: normal approximation around lambda, clamped at 0. */
static double counts(double lambda)
{
    double u1 = urand() + 1e-12, u2 = urand();
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    double v = floor(lambda + sqrt(lambda) * z + 0.5);
    return v < 0 ? 0 : v;
}

/* Hand-built matrices: radius from an off-centre beam; each pixel split between its bin and the
 * next by its fractional position (coefficients sum to 1), the 2D matrix by chi octant too.
 * Bins beyond the largest radius stay empty; masked pixels are absent. */
static faid_csr *make_csr(const uint8_t *mask, int nazim)
{
    int nbins = nazim ? NRAD * nazim : NRAD;
    faid_csr *c = calloc(1, sizeof *c);
    c->nbins = nbins;
    c->npt_rad = NRAD;
    c->npt_azim = nazim;
    c->npix = NPIX;
    c->indptr = calloc((size_t)nbins + 1, sizeof(int32_t));
    int32_t *cnt = calloc((size_t)nbins, sizeof(int32_t));
    int32_t *bin0 = malloc(NPIX * sizeof(int32_t));
    float *frac = malloc(NPIX * sizeof(float));
    const double cy = 11.3, cx = 17.8, rmax = 60.0;
    for (int i = 0; i < NPIX; i++) {
        bin0[i] = -1;
        if (mask[i])
            continue;
        double dy = i / COLS - cy, dx = i % COLS - cx;
        double f = sqrt(dx * dx + dy * dy) / rmax * NRAD;
        int b = (int)f;
        if (b >= NRAD - 1)
            continue;
        int a = 0;
        if (nazim) {
            double chi = atan2(dy, dx) + 3.141592653589793;
            a = (int)(chi / 6.283185307179586 * nazim);
            if (a >= nazim)
                a = nazim - 1;
        }
        bin0[i] = nazim ? b * nazim + a : b;
        frac[i] = (float)(f - b);
        cnt[bin0[i]]++;
        cnt[bin0[i] + (nazim ? nazim : 1)]++;
    }
    for (int b = 0; b < nbins; b++)
        c->indptr[b + 1] = c->indptr[b] + cnt[b];
    c->nnz = c->indptr[nbins];
    c->indices = malloc((size_t)c->nnz * sizeof(int32_t));
    c->data = malloc((size_t)c->nnz * sizeof(float));
    memset(cnt, 0, (size_t)nbins * sizeof(int32_t));
    for (int i = 0; i < NPIX; i++) {
        if (bin0[i] < 0)
            continue;
        int b = bin0[i], b2 = b + (nazim ? nazim : 1);
        int k = c->indptr[b] + cnt[b]++;
        c->indices[k] = i;
        c->data[k] = 1.0f - frac[i];
        k = c->indptr[b2] + cnt[b2]++;
        c->indices[k] = i;
        c->data[k] = frac[i];
    }
    free(cnt);
    free(bin0);
    free(frac);
    return c;
}

static void free_csr(faid_csr *c)
{
    if (!c)
        return;
    free(c->indptr);
    free(c->indices);
    free(c->data);
    free(c);
}

typedef struct variant {
    faid_error_model em;
    int dark, flat, solid, pol, dummy, cake;
    float delta_dummy;
} variant;

static void make_setup(faid_setup *s, const variant *v)
{
    memset(s, 0, sizeof *s);
    s->rows = ROWS;
    s->cols = COLS;
    s->npix = NPIX;
    s->mask = calloc(NPIX, 1);
    for (int i = 0; i < NPIX; i++)
        s->mask[i] = (i % 97) == 5 || (i / COLS == 20 && i % COLS > 40); /* bad pixels + a gap */
    s->dark = malloc(NPIX * sizeof(float));
    s->flat = malloc(NPIX * sizeof(float));
    s->solid_angle = malloc(NPIX * sizeof(float));
    s->polarization = malloc(NPIX * sizeof(float));
    for (int i = 0; i < NPIX; i++) {
        s->dark[i] = (float)(urand() * 4.0);
        s->flat[i] = (float)(0.8 + 0.4 * urand());
        s->solid_angle[i] = (float)(0.9 + 0.1 * urand());
        s->polarization[i] = (float)(0.95 + 0.05 * urand());
    }
    s->flat[321] = 7.0f; /* equals the dummy value: invalid when dummy checking is on */
    faid_corrections *c = &s->corr;
    c->npix = NPIX;
    c->mask = s->mask;
    c->dark = v->dark ? s->dark : NULL;
    c->flat = v->flat ? s->flat : NULL;
    c->solid_angle = v->solid ? s->solid_angle : NULL;
    c->polarization = v->pol ? s->polarization : NULL;
    c->do_dummy = v->dummy;
    c->dummy = 7.0f;
    c->delta_dummy = v->delta_dummy;
    c->normalization_factor = 1.5f;
    c->error_model = v->em;
    c->empty = -3.0f;
    s->csr = make_csr(s->mask, 0);
    s->csr2d = v->cake ? make_csr(s->mask, NAZIM) : NULL;
}

static void free_setup(faid_setup *s)
{
    free(s->mask);
    free(s->dark);
    free(s->flat);
    free(s->solid_angle);
    free(s->polarization);
    free_csr(s->csr);
    free_csr(s->csr2d);
}

/* A ring pattern with noise, a few dummy-valued pixels, and type-specific oddities. */
static void *make_frame(faid_dtype t, size_t *nbytes)
{
    size_t es = faid_dtype_size(t);
    void *buf = malloc(NPIX * es);
    for (int i = 0; i < NPIX; i++) {
        double dy = i / COLS - 11.3, dx = i % COLS - 17.8;
        double r = sqrt(dx * dx + dy * dy);
        double lam = 20.0 + 400.0 * exp(-(r - 25.0) * (r - 25.0) / 8.0) + 3000.0 * (i % 211 == 3);
        double v = counts(lam);
        if (i % 53 == 9)
            v = 7; /* dummy */
        if (t == FAID_DT_I32 && i % 61 == 1)
            v = -2; /* negative counts are valid signed input */
        switch (t) {
        case FAID_DT_U16:
            ((uint16_t *)buf)[i] = (uint16_t)(v > 65535 ? 65535 : v);
            break;
        case FAID_DT_U32:
            ((uint32_t *)buf)[i] = (uint32_t)v;
            break;
        case FAID_DT_I32:
            ((int32_t *)buf)[i] = (int32_t)v;
            break;
        case FAID_DT_F32:
            ((float *)buf)[i] = i % 89 == 4 ? NAN : (float)(v + 0.25 * urand());
            break;
        default:
            break;
        }
    }
    *nbytes = NPIX * es;
    return buf;
}

static double mean_abs(const float *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += fabs(x[i]);
    return n ? s / n : 0;
}

/* Returns the worst |cl - ref| / max(|ref|, mean|ref|) over the bins. */
static double worst(const float *cl, const float *ref, int n)
{
    double m = mean_abs(ref, n), w = 0;
    for (int i = 0; i < n; i++) {
        double scale = fmax(fabs(ref[i]), m);
        double e = fabs((double)cl[i] - ref[i]);
        if (isnan(cl[i]) != isnan(ref[i]))
            return INFINITY;
        if (scale > 0 && e / scale > w)
            w = e / scale;
        else if (scale == 0 && e > 0)
            return INFINITY;
    }
    return w;
}

static double max_err_seen = 0.0;

static void compare(const faid_profile *cl, const faid_profile *ref, const char *what, int has_err)
{
    CHECK(cl->nbins == ref->nbins);
    double wi = worst(cl->I, ref->I, ref->nbins);
    double ws = worst(cl->sigma, ref->sigma, ref->nbins);
    double wd = worst(cl->std, ref->std, ref->nbins);
    double wc = worst(cl->count, ref->count, ref->nbins);
    CHECK_MSG(wi <= TOL, "%s: I differs by %.3g (relative)", what, wi);
    CHECK_MSG(ws <= TOL, "%s: sigma differs by %.3g (relative)", what, ws);
    CHECK_MSG(wd <= TOL, "%s: std differs by %.3g (relative)", what, wd);
    CHECK_MSG(wc <= TOL, "%s: count differs by %.3g (relative)", what, wc);
    double wsum = worst(cl->sum_signal, ref->sum_signal, ref->nbins);
    double wn = worst(cl->sum_norm, ref->sum_norm, ref->nbins);
    CHECK_MSG(wsum <= TOL && wn <= TOL, "%s: sums differ (signal %.3g, norm %.3g)", what, wsum, wn);
    double m = fmax(fmax(wi, ws), fmax(wd, wc));
    if (m > max_err_seen)
        max_err_seen = m;
    /* empty bins carry the configured value in both */
    int empties = 0;
    for (int b = 0; b < ref->nbins; b++)
        if (ref->count[b] == 0) {
            empties++;
            CHECK(cl->I[b] == -3.0f && ref->I[b] == -3.0f);
        }
    CHECK_MSG(empties > 0, "%s: the synthetic setup should leave some bins empty", what);
    if (!has_err)
        for (int b = 0; b < ref->nbins; b++)
            if (ref->count[b] > 0) {
                CHECK(cl->sigma[b] == -3.0f && ref->sigma[b] == -3.0f);
                break;
            }
}

static int profile_equal(const faid_profile *a, const faid_profile *b)
{
    size_t n = (size_t)a->nbins * sizeof(float);
    return a->nbins == b->nbins && !memcmp(a->I, b->I, n) && !memcmp(a->sigma, b->sigma, n) &&
           !memcmp(a->std, b->std, n) && !memcmp(a->count, b->count, n) &&
           !memcmp(a->sum_signal, b->sum_signal, n) && !memcmp(a->sum_norm, b->sum_norm, n) &&
           !memcmp(a->sum_variance, b->sum_variance, n) &&
           !memcmp(a->sum_norm_sq, b->sum_norm_sq, n);
}

static int result_equal(const faid_result *a, const faid_result *b)
{
    if (!profile_equal(a->p1d, b->p1d))
        return 0;
    if (!!a->p2d != !!b->p2d)
        return 0;
    return !a->p2d || profile_equal(a->p2d, b->p2d);
}

typedef struct ctx {
    faid_engine *cl, *ref;
} ctx;

/* Reduces one frame with both engines (setups already set) and compares. */
static void run_one(ctx *c, const faid_setup *s, faid_dtype t, faid_encoding enc, const char *what)
{
    size_t nbytes;
    void *raw = make_frame(t, &nbytes);
    faid_frame f = {raw, nbytes, FAID_ENC_NONE, t, ROWS, COLS};
    uint8_t *comp = NULL;
    if (enc == FAID_ENC_BSLZ4) {
        size_t es = faid_dtype_size(t), cap = faid_bslz4_bound(nbytes, es, 0), clen = 0;
        comp = malloc(cap);
        CHECK(faid_bslz4_encode(raw, nbytes, es, 0, comp, cap, &clen, NULL) == 0);
        f.data = comp;
        f.len = clen;
        f.encoding = enc;
    }
    faid_result *rc = faid_result_new(s), *rr = faid_result_new(s), *r2 = faid_result_new(s);
    faid_diag d = {0};
    int e1 = faid_engine_process(c->cl, &f, rc, &d);
    CHECK_MSG(e1 == 0, "%s: cl: %s", what, d.msg);
    if (!e1 && enc == FAID_ENC_BSLZ4)
        CHECK_MSG(rc->t.device_decode == 1, "%s: not decoded by the OpenCL decoder", what);
    int e2 = faid_engine_process(c->ref, &f, rr, &d);
    CHECK_MSG(e2 == 0, "%s: ref: %s", what, d.msg);
    if (!e1 && !e2) {
        int has_err = s->corr.error_model != FAID_EM_NONE;
        char buf[256];
        snprintf(buf, sizeof buf, "%s 1D", what);
        compare(rc->p1d, rr->p1d, buf, has_err);
        if (s->csr2d) {
            snprintf(buf, sizeof buf, "%s 2D", what);
            compare(rc->p2d, rr->p2d, buf, has_err);
        }
        /* determinism: the same frame again gives the same bits */
        CHECK_MSG(faid_engine_process(c->cl, &f, r2, &d) == 0, "%s: %s", what, d.msg);
        CHECK_MSG(result_equal(rc, r2), "%s: second run differs", what);
    }
    faid_result_destroy(&rc);
    faid_result_destroy(&rr);
    faid_result_destroy(&r2);
    free(comp);
    free(raw);
}

#define NVARIANTS 5
static faid_setup setups[NVARIANTS];

static void test_variants(ctx *c)
{
    const variant vs[NVARIANTS] = {
        {FAID_EM_POISSON, 1, 1, 1, 1, 1, 1, 0.0f},   {FAID_EM_NONE, 1, 1, 1, 1, 1, 0, 0.0f},
        {FAID_EM_AZIMUTHAL, 1, 1, 1, 1, 1, 1, 0.0f}, {FAID_EM_POISSON, 0, 0, 0, 0, 0, 0, 0.0f},
        {FAID_EM_AZIMUTHAL, 0, 1, 0, 1, 1, 0, 0.6f},
    };
    for (int k = 0; k < NVARIANTS; k++) {
        faid_setup *s = &setups[k];
        make_setup(s, &vs[k]);
        faid_diag d = {0};
        /* the engines are reloaded from one setup to the next: this also exercises set_setup */
        CHECK_MSG(faid_engine_set_setup(c->cl, s, &d) == 0, "%s", d.msg);
        CHECK_MSG(faid_engine_set_setup(c->ref, s, &d) == 0, "%s", d.msg);
        char what[128];
        snprintf(what, sizeof what, "variant %d (%s) uint16", k, faid_error_model_name(vs[k].em));
        run_one(c, s, FAID_DT_U16, FAID_ENC_NONE, what);
        if (k == 0) {
            const faid_dtype ts[] = {FAID_DT_U32, FAID_DT_I32, FAID_DT_F32};
            for (int i = 0; i < 3; i++) {
                snprintf(what, sizeof what, "poisson %s", faid_dtype_name(ts[i]));
                run_one(c, s, ts[i], FAID_ENC_NONE, what);
            }
            run_one(c, s, FAID_DT_U32, FAID_ENC_BSLZ4, "poisson uint32 bslz4");
            run_one(c, s, FAID_DT_U16, FAID_ENC_BSLZ4, "poisson uint16 bslz4");
        }
    }
}

/* Fused and unfused kernels compute the same pixel function in the same order: same bits. */
static void test_fused_unfused(ctx *c)
{
    faid_setup *s = &setups[2]; /* azimuthal, with cake */
    faid_diag d = {0};
    CHECK_MSG(faid_engine_set_setup(c->cl, s, &d) == 0, "%s", d.msg);
    size_t nbytes;
    void *raw = make_frame(FAID_DT_U32, &nbytes);
    faid_frame f = {raw, nbytes, FAID_ENC_NONE, FAID_DT_U32, ROWS, COLS};
    faid_result *a = faid_result_new(s), *b = faid_result_new(s);
    CHECK_MSG(faid_engine_process(c->cl, &f, a, &d) == 0, "%s", d.msg);
    CHECK_MSG(faid_engine_set_fused(c->cl, 0, &d) == 0, "%s", d.msg);
    CHECK_MSG(faid_engine_process(c->cl, &f, b, &d) == 0, "%s", d.msg);
    CHECK_MSG(result_equal(a, b), "fused and unfused results differ");
    CHECK(faid_engine_set_fused(c->cl, 1, &d) == 0);
    faid_result_destroy(&a);
    faid_result_destroy(&b);
    free(raw);
}

/* A corrupt bslz4 frame is an error for that frame only; shape / dtype / size mismatches are
 * errors naming the cause. */
static void test_errors(ctx *c)
{
    faid_setup *s = &setups[0];
    faid_diag d = {0};
    CHECK(faid_engine_set_setup(c->cl, s, &d) == 0);
    CHECK(faid_engine_set_setup(c->ref, s, &d) == 0);
    size_t nbytes, es = 4, clen = 0;
    void *raw = make_frame(FAID_DT_U32, &nbytes);
    size_t cap = faid_bslz4_bound(nbytes, es, 0);
    uint8_t *good = malloc(cap), *bad = malloc(cap);
    CHECK(faid_bslz4_encode(raw, nbytes, es, 0, good, cap, &clen, NULL) == 0);
    memcpy(bad, good, clen);
    /* overwrite the start of block 0's LZ4 data: a literal run that overruns the block */
    memset(bad + 16, 0xFF, 24);
    faid_frame fg = {good, clen, FAID_ENC_BSLZ4, FAID_DT_U32, ROWS, COLS};
    faid_frame fb = fg;
    fb.data = bad;
    faid_result *r0 = faid_result_new(s), *r1 = faid_result_new(s);
    faid_engine *engines[2] = {c->cl, c->ref};
    for (int k = 0; k < 2; k++) {
        faid_engine *e = engines[k];
        CHECK_MSG(faid_engine_process(e, &fg, r0, &d) == 0, "%s", d.msg);
        faid_diag_clear(&d);
        int rc = faid_engine_process(e, &fb, r1, &d);
        CHECK_MSG(rc == FAID_ECORRUPT || rc == FAID_ETRUNC || rc == FAID_ESIZE,
                  "corrupt frame on %s gave %d (%s)", faid_engine_device_name(e), rc, d.msg);
        CHECK(d.msg[0] != '\0');
        if (e == c->cl) /* the block table is valid: the device decoder must catch it */
            CHECK_MSG(strstr(d.msg, "device") != NULL, "unexpected error: %s", d.msg);
        CHECK_MSG(faid_engine_process(e, &fg, r1, &d) == 0, "%s", d.msg);
        CHECK_MSG(result_equal(r0, r1), "good frame after a corrupt one differs on %s",
                  faid_engine_device_name(e));
        /* truncated payload */
        faid_frame ft = fg;
        ft.len = clen / 2;
        CHECK(faid_engine_process(e, &ft, r1, &d) < 0);
        /* wrong shape, unsupported dtype, raw size mismatch */
        faid_frame fs = fg;
        fs.rows = ROWS + 1;
        CHECK(faid_engine_process(e, &fs, r1, &d) == FAID_ESHAPE);
        fs = fg;
        fs.dtype = FAID_DT_F64;
        CHECK(faid_engine_process(e, &fs, r1, &d) == FAID_EDTYPE);
        faid_frame fr = {raw, nbytes - 4, FAID_ENC_NONE, FAID_DT_U32, ROWS, COLS};
        CHECK(faid_engine_process(e, &fr, r1, &d) == FAID_ESIZE);
        fr.len = nbytes;
        CHECK_MSG(faid_engine_process(e, &fr, r1, &d) == 0, "%s", d.msg);
        CHECK(result_equal(r0, r1));
    }
    /* a result made for another setup is refused */
    faid_result *other = faid_result_new(&setups[1]); /* no cake */
    CHECK(faid_engine_process(c->cl, &fg, other, &d) == FAID_ESIZE);
    faid_result_destroy(&other);
    faid_result_destroy(&r0);
    faid_result_destroy(&r1);
    free(good);
    free(bad);
    free(raw);
}

#define NPF       7
#define BAD_FRAME 3

/* Collects every frame in flight, each equal to its synchronous result; zero: whether the H2D
 * must have read the bytes in place. */
static void drain(faid_engine *e, faid_result *got, faid_result *const *sync, int zero,
                  const char *name)
{
    faid_diag d = {0};
    uint64_t tag;
    while (faid_engine_in_flight(e) > 0) {
        CHECK_MSG(faid_engine_collect(e, got, &tag, 1, &d) == 0, "%s", d.msg);
        CHECK(tag < NPF && result_equal(got, sync[tag]));
        if (zero && strcmp(name, "reference C") != 0)
            CHECK_MSG(got->t.zero_copy == 1, "%s: frame %llu was copied", name,
                      (unsigned long long)tag);
    }
}

/* Frames of several kinds (uint32 / uint16 bslz4, raw uint32, one corrupt) submitted with up to
 * slots x batch in flight and collected in order, each compared bit for bit with
 * faid_engine_process of one frame without batching; then the same frames from the zero-copy
 * inputs (slot buffer, engine pinned memory) and with block tables parsed by the caller. */
static void pipeline_on(faid_engine *e, const faid_setup *s, int slots, int batch)
{
    faid_diag d = {0};
    const char *name = faid_engine_device_name(e);
    CHECK_MSG(faid_engine_set_setup(e, s, &d) == 0, "%s", d.msg);
    CHECK(faid_engine_in_flight(e) == 0);
    void *raw[NPF];
    uint8_t *comp[NPF];
    faid_frame f[NPF];
    faid_result *sync[NPF], *got = faid_result_new(s);
    for (int k = 0; k < NPF; k++) {
        faid_dtype t = k == 4 ? FAID_DT_U16 : FAID_DT_U32;
        size_t nbytes, es = faid_dtype_size(t), clen = 0;
        raw[k] = make_frame(t, &nbytes);
        f[k] = (faid_frame){raw[k], nbytes, FAID_ENC_NONE, t, ROWS, COLS};
        size_t cap = faid_bslz4_bound(nbytes, es, 0);
        comp[k] = malloc(cap);
        CHECK(faid_bslz4_encode(raw[k], nbytes, es, 0, comp[k], cap, &clen, NULL) == 0);
        if (k != 5) { /* frame 5 goes uncompressed */
            f[k].data = comp[k];
            f[k].len = clen;
            f[k].encoding = FAID_ENC_BSLZ4;
        }
        if (k == BAD_FRAME) /* valid block table, corrupt LZ4 data in block 0 */
            memset(comp[k] + 16, 0xFF, 24);
        sync[k] = faid_result_new(s);
        int rc = faid_engine_process(e, &f[k], sync[k], &d);
        CHECK_MSG((rc == 0) == (k != BAD_FRAME), "%s: sync frame %d gave %d (%s)", name, k, rc,
                  d.msg);
    }
    CHECK_MSG(faid_engine_set_batch(e, batch, &d) == 0, "%s: %s", name, d.msg);
    CHECK_MSG(faid_engine_set_depth(e, slots, &d) == 0, "%s: %s", name, d.msg);
    const int depth = faid_engine_depth(e);
    CHECK(depth == slots * batch && faid_engine_batch(e) == batch);
    /* the synchronous path with batching on: same bits */
    CHECK_MSG(faid_engine_process(e, &f[0], got, &d) == 0, "%s", d.msg);
    CHECK_MSG(result_equal(got, sync[0]), "%s: batch %d: synchronous result differs", name, batch);
    /* nothing in flight: collect refuses and consumes nothing */
    uint64_t tag = 999;
    CHECK(faid_engine_collect(e, got, &tag, 1, &d) == FAID_EINVAL && tag == 999);
    /* submit all, collecting the oldest whenever every slot is taken */
    int next = 0, done = 0, want = 0, refused_full = 0, rejected = -1, busy_seen = 0;
    while (done < NPF) {
        int rc = FAID_EBUSY;
        if (next < NPF && faid_engine_in_flight(e) < depth)
            rc = faid_engine_submit(e, &f[next], 100 + (uint64_t)next, &d);
        /* FAID_EBUSY below depth: a slot closed early (dtype change) holds fewer frames */
        if (rc == FAID_EBUSY && next < NPF && faid_engine_in_flight(e) < depth)
            busy_seen = 1;
        if (rc != FAID_EBUSY) {
            if (rc) { /* the reference decodes at submit: the corrupt frame fails here */
                CHECK_MSG(next == BAD_FRAME, "%s: submit %d: %s", name, next, d.msg);
                CHECK(rc == FAID_ECORRUPT || rc == FAID_ETRUNC || rc == FAID_ESIZE);
                rejected = next;
                done++;
            }
            next++;
            if (faid_engine_in_flight(e) == depth && !refused_full) {
                refused_full = 1;
                CHECK(faid_engine_submit(e, &f[0], 1, &d) == FAID_EBUSY);
                CHECK(faid_engine_process(e, &f[0], got, &d) == FAID_EBUSY);
                CHECK(faid_engine_set_setup(e, s, &d) == FAID_EBUSY);
                void *p;
                size_t cap;
                CHECK(faid_engine_slot_buffer(e, &p, &cap, &d) == FAID_EBUSY);
            }
            continue;
        }
        rc = faid_engine_collect(e, got, &tag, 0, &d);
        if (rc == FAID_EBUSY)
            rc = faid_engine_collect(e, got, &tag, 1, &d);
        CHECK(rc != FAID_EBUSY && rc != FAID_EINVAL);
        int k = (int)tag - 100;
        if (want == rejected)
            want++;
        CHECK_MSG(k == want, "%s: collected tag %llu, expected %d", name, (unsigned long long)tag,
                  100 + want);
        want = k + 1;
        if (k == BAD_FRAME) {
            CHECK_MSG(rc == FAID_ECORRUPT && strstr(d.msg, "frame 103") != NULL,
                      "%s: corrupt frame: %d %s", name, rc, d.msg);
        } else if (k >= 0 && k < NPF) {
            CHECK_MSG(rc == 0, "%s: frame %d: %s", name, k, d.msg);
            CHECK_MSG(result_equal(got, sync[k]),
                      "%s: pipelined frame %d differs from the "
                      "synchronous result",
                      name, k);
        }
        done++;
    }
    CHECK(refused_full || depth >= NPF || (batch > 1 && busy_seen));
    CHECK(faid_engine_in_flight(e) == 0);
    /* zero-copy inputs: the slot buffer, then engine pinned memory; several in flight (a new
     * dtype opens a new slot: its frame's bytes in the old slot's buffer are then copied) */
    for (int k = 0; k < NPF; k++) {
        if (k == BAD_FRAME)
            continue;
        void *p;
        size_t cap;
        faid_frame g = f[k];
        int same = k == 0 || f[k].dtype == f[k - 1].dtype;
        if (k % 2) {
            int rc = faid_engine_slot_buffer(e, &p, &cap, &d);
            if (rc == FAID_EBUSY) {
                drain(e, got, sync, 1, name);
                rc = faid_engine_slot_buffer(e, &p, &cap, &d);
            }
            CHECK_MSG(rc == 0, "%s", d.msg);
        } else {
            p = faid_engine_host_alloc(e, f[k].len, &d);
            cap = f[k].len;
            CHECK_MSG(p != NULL, "%s", d.msg);
        }
        if (!p || cap < f[k].len)
            break;
        memcpy(p, f[k].data, f[k].len);
        g.data = p;
        int rc = faid_engine_submit(e, &g, (uint64_t)k, &d);
        if (rc == FAID_EBUSY) {
            drain(e, got, sync, 1, name);
            rc = faid_engine_submit(e, &g, (uint64_t)k, &d);
        }
        CHECK_MSG(rc == 0, "%s zero-copy %d: %s", name, k, d.msg);
        if (faid_engine_in_flight(e) == depth || k == NPF - 1 || !same)
            drain(e, got, sync, same || batch == 1, name);
    }
    CHECK(faid_engine_in_flight(e) == 0);
    /* block tables parsed by the caller: same bits; a table of other bytes is caught or at
     * worst decodes wrongly, never crashes; a table of another size is refused at submit */
    faid_block_table tab = {0}, tab16 = {0};
    CHECK(faid_block_table_alloc(&tab, 64, &d) == 0 && faid_block_table_alloc(&tab16, 64, &d) == 0);
    CHECK(faid_bslz4_table(f[4].data, f[4].len, 2, NPIX * 2, &tab16, &d) == 0);
    for (int k = 0; k < NPF; k++) {
        if (k == BAD_FRAME || f[k].encoding != FAID_ENC_BSLZ4 || f[k].dtype != FAID_DT_U32)
            continue;
        CHECK_MSG(faid_bslz4_table(f[k].data, f[k].len, 4, NPIX * 4, &tab, &d) == 0, "%s", d.msg);
        CHECK_MSG(faid_engine_submit_table(e, &f[k], &tab, (uint64_t)k, &d) == 0, "%s", d.msg);
        CHECK(faid_engine_collect(e, got, &tag, 1, &d) == 0 && tag == (uint64_t)k);
        CHECK_MSG(result_equal(got, sync[k]), "%s: frame %d with a given table differs", name, k);
        CHECK(faid_engine_submit_table(e, &f[k], &tab16, 0, &d) < 0);
        CHECK(faid_engine_in_flight(e) == 0);
    }
    CHECK(faid_bslz4_table(f[0].data, f[0].len, 4, NPIX * 4, &tab, &d) == 0);
    if (faid_engine_submit_table(e, &f[1], &tab, 1, &d) == 0) {
        int rc = faid_engine_collect(e, got, &tag, 1, &d);
        CHECK_MSG(rc == 0 || rc == FAID_ECORRUPT, "%s: foreign table gave %d (%s)", name, rc,
                  d.msg);
    }
    faid_block_table_free(&tab);
    faid_block_table_free(&tab16);
    CHECK(faid_engine_in_flight(e) == 0);
    CHECK(faid_engine_set_depth(e, FAID_ENGINE_DEPTH_MAX + 1, &d) == FAID_ERANGE);
    CHECK(faid_engine_depth(e) == depth);
    CHECK(faid_engine_set_batch(e, FAID_ENGINE_BATCH_MAX + 1, &d) == FAID_ERANGE);
    CHECK_MSG(faid_engine_set_depth(e, 1, &d) == 0, "%s", d.msg);
    CHECK_MSG(faid_engine_set_batch(e, 1, &d) == 0, "%s", d.msg);
    for (int k = 0; k < NPF; k++) {
        free(raw[k]);
        free(comp[k]);
        faid_result_destroy(&sync[k]);
    }
    faid_result_destroy(&got);
}

/* faid_engine_launch_open: a partly filled slot that is not the oldest starts at once (1), the
 * oldest or no open slot is left to collect (0), a launched slot takes no further frame, and
 * every frame gives the bits of faid_engine_process. */
static void launch_open_on(faid_engine *e, const faid_setup *s)
{
    faid_diag d = {0};
    const char *name = faid_engine_device_name(e);
    CHECK_MSG(faid_engine_set_setup(e, s, &d) == 0, "%s", d.msg);
    size_t nbytes;
    void *raw = make_frame(FAID_DT_U32, &nbytes);
    const faid_frame f = {raw, nbytes, FAID_ENC_NONE, FAID_DT_U32, ROWS, COLS};
    faid_result *want = faid_result_new(s), *got = faid_result_new(s);
    CHECK_MSG(faid_engine_process(e, &f, want, &d) == 0, "%s", d.msg);
    CHECK_MSG(faid_engine_set_batch(e, 2, &d) == 0 && faid_engine_set_depth(e, 2, &d) == 0, "%s",
              d.msg);
    CHECK(faid_engine_launch_open(e, &d) == 0); /* nothing in flight */
    CHECK(faid_engine_submit(e, &f, 0, &d) == 0);
    CHECK(faid_engine_launch_open(e, &d) == 0); /* the open slot is the oldest */
    CHECK(faid_engine_submit(e, &f, 1, &d) == 0);
    CHECK(faid_engine_launch_open(e, &d) == 0); /* the slot is full (launched) */
    CHECK(faid_engine_submit(e, &f, 2, &d) == 0);
    CHECK_MSG(faid_engine_launch_open(e, &d) == 1, "%s: partial slot not launched", name);
    CHECK(faid_engine_launch_open(e, &d) == 0);
    /* launched: frame 3 cannot join it, and both slots are in flight */
    CHECK(faid_engine_submit(e, &f, 3, &d) == FAID_EBUSY && faid_engine_in_flight(e) == 3);
    uint64_t tag = 99;
    for (uint64_t k = 0; k < 3; k++) {
        CHECK_MSG(faid_engine_collect(e, got, &tag, 1, &d) == 0, "%s", d.msg);
        CHECK(tag == k);
        CHECK_MSG(result_equal(got, want), "%s: frame %llu differs after an early launch", name,
                  (unsigned long long)k);
    }
    CHECK(faid_engine_in_flight(e) == 0);
    CHECK(faid_engine_set_batch(e, 1, &d) == 0 && faid_engine_set_depth(e, 1, &d) == 0);
    faid_result_destroy(&want);
    faid_result_destroy(&got);
    free(raw);
}

/* One submitting and one collecting thread (faid_engine_set_threaded): NTF frames (uint32 bslz4,
 * every fifth uint16 so that slots close early for another dtype, every seventh raw) submitted
 * by this thread, which hands its partly filled slot over (launch_open) before every pause and
 * retries while the engine is full; a second thread collects them with blocking collects. Every
 * frame comes out once, in submission order, with the bits of faid_engine_process. */
#define NTF 24

typedef struct tcollect {
    faid_engine *e;
    faid_result *got;
    faid_result *const *sync;
    int order_bad, bits_bad, failed; /* counted here, checked by the main thread */
} tcollect;

static void *collect_thread(void *arg)
{
    tcollect *t = arg;
    faid_diag d = {0};
    int idle = 0;
    for (int k = 0; k < NTF; k++) {
        uint64_t tag = 999;
        int rc = faid_engine_collect(t->e, t->got, &tag, 1, &d);
        if (rc == FAID_EINVAL && idle++ < 200000) {
            /* nothing in flight at the call (the submitter may have submitted since: retry; the
             * daemon's collect thread waits on its own ring instead) */
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            k--;
            continue;
        }
        if (rc) {
            t->failed++;
            continue;
        }
        if (tag != (uint64_t)k)
            t->order_bad++;
        else if (!result_equal(t->got, t->sync[k]))
            t->bits_bad++;
    }
    return NULL;
}

static void threaded_on(faid_engine *e, const faid_setup *s, int slots, int batch)
{
    faid_diag d = {0};
    const char *name = faid_engine_device_name(e);
    CHECK_MSG(faid_engine_set_setup(e, s, &d) == 0, "%s", d.msg);
    void *raw[NTF];
    uint8_t *comp[NTF];
    faid_frame f[NTF];
    faid_result *sync[NTF];
    for (int k = 0; k < NTF; k++) {
        faid_dtype t = k % 5 == 4 ? FAID_DT_U16 : FAID_DT_U32;
        size_t nbytes, es = faid_dtype_size(t), clen = 0;
        raw[k] = make_frame(t, &nbytes);
        f[k] = (faid_frame){raw[k], nbytes, FAID_ENC_NONE, t, ROWS, COLS};
        size_t cap = faid_bslz4_bound(nbytes, es, 0);
        comp[k] = malloc(cap);
        CHECK(faid_bslz4_encode(raw[k], nbytes, es, 0, comp[k], cap, &clen, NULL) == 0);
        if (k % 7 != 6) {
            f[k].data = comp[k];
            f[k].len = clen;
            f[k].encoding = FAID_ENC_BSLZ4;
        }
        sync[k] = faid_result_new(s);
        CHECK_MSG(faid_engine_process(e, &f[k], sync[k], &d) == 0, "%s: frame %d: %s", name, k,
                  d.msg);
    }
    CHECK_MSG(faid_engine_set_batch(e, batch, &d) == 0, "%s: %s", name, d.msg);
    CHECK_MSG(faid_engine_set_depth(e, slots, &d) == 0, "%s: %s", name, d.msg);
    CHECK_MSG(faid_engine_set_threaded(e, 1, &d) == 0, "%s: %s", name, d.msg);
    tcollect t = {e, faid_result_new(s), sync, 0, 0, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, collect_thread, &t) == 0);
    for (int k = 0; k < NTF; k++) {
        int rc, tries = 0;
        while ((rc = faid_engine_submit(e, &f[k], (uint64_t)k, &d)) == FAID_EBUSY &&
               tries++ < 100000) {
            faid_engine_launch_open(e, &d); /* full: nothing more joins the open slot */
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        CHECK_MSG(rc == 0, "%s: submit %d: %s", name, k, d.msg);
        if (k % 3 == 2) { /* no frame at hand: the partial batch goes, then a pause */
            CHECK(faid_engine_launch_open(e, &d) >= 0);
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK(faid_engine_launch_open(e, &d) >= 0);
    pthread_join(th, NULL);
    CHECK_MSG(t.failed == 0 && t.order_bad == 0 && t.bits_bad == 0,
              "%s, %d slots x %d: %d failed, %d out of order, %d with other bits", name, slots,
              batch, t.failed, t.order_bad, t.bits_bad);
    CHECK(faid_engine_in_flight(e) == 0);
    for (int k = 0; k < NTF && faid_engine_in_flight(e) > 0; k++) { /* after a failure only */
        uint64_t tag;
        faid_engine_launch_open(e, &d);
        faid_engine_collect(e, t.got, &tag, 1, &d);
    }
    CHECK(faid_engine_set_threaded(e, 0, &d) == 0);
    CHECK(faid_engine_set_batch(e, 1, &d) == 0 && faid_engine_set_depth(e, 1, &d) == 0);
    for (int k = 0; k < NTF; k++) {
        free(raw[k]);
        free(comp[k]);
        faid_result_destroy(&sync[k]);
    }
    faid_result_destroy(&t.got);
}

static void test_pipeline(ctx *c)
{
    threaded_on(c->cl, &setups[0], 3, 1);
    threaded_on(c->cl, &setups[0], 3, 2);
    threaded_on(c->ref, &setups[0], 2, 3);
    launch_open_on(c->cl, &setups[0]);
    launch_open_on(c->ref, &setups[0]);
    pipeline_on(c->cl, &setups[0], 3, 1); /* poisson with cake: two integration launches */
    pipeline_on(c->cl, &setups[1], 8, 1); /* deeper than the number of frames */
    pipeline_on(c->cl, &setups[0], 2, 3); /* batches of 3 (one with the corrupt frame) */
    pipeline_on(c->cl, &setups[1], 1, 4); /* error model none, one slot: partial batches */
    pipeline_on(c->cl, &setups[2], 2, 2); /* azimuthal: batched slots, frame after frame */
    pipeline_on(c->ref, &setups[0], 2, 1);
    pipeline_on(c->ref, &setups[0], 2, 2);
    /* unfused kernels with batches: frame after frame through the preprocess kernel */
    faid_diag d = {0};
    CHECK(faid_engine_set_fused(c->cl, 0, &d) == 0);
    pipeline_on(c->cl, &setups[0], 2, 2);
    CHECK(faid_engine_set_fused(c->cl, 1, &d) == 0);
}

/* The variants of the batched integration kernel (FAID_ENGINE_INTEGRATE, faid_engine.h) give the
 * same bits as the default: pipeline_on compares every batched frame with faid_engine_process of
 * the frame alone on the same engine, and that one-frame result (unroll8 changes the one-frame
 * kernel too) is compared with the default engine's. Poisson with dark and cake, error model
 * none, poisson without dark; an unknown name is refused. */
static void test_integrate_variants(ctx *c, const faid_setup *boot)
{
    enum { ALL = FAID_INTV_GATHER | FAID_INTV_ENORM | FAID_INTV_PREFETCH | FAID_INTV_UNROLL8 };
    static const struct {
        const char *env;
        int bits;
    } vs[] = {/* each #if of the kernel both ways: the default has them all off */
              {"gather,prefetch", FAID_INTV_GATHER | FAID_INTV_PREFETCH},
              {"gather,entrynorm,prefetch,unroll8", ALL}};
    faid_diag d = {0};
    size_t nbytes;
    void *raw = make_frame(FAID_DT_U32, &nbytes);
    const faid_frame f = {raw, nbytes, FAID_ENC_NONE, FAID_DT_U32, ROWS, COLS};
    faid_result *want = faid_result_new(&setups[0]), *got = faid_result_new(&setups[0]);
    CHECK_MSG(faid_engine_set_setup(c->cl, &setups[0], &d) == 0, "%s", d.msg);
    CHECK_MSG(faid_engine_process(c->cl, &f, want, &d) == 0, "%s", d.msg);
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++) {
        setenv("FAID_ENGINE_INTEGRATE", vs[k].env, 1);
        faid_engine *e = faid_engine_new(boot, "cpu", &d);
        unsetenv("FAID_ENGINE_INTEGRATE");
        CHECK_MSG(e != NULL, "%s: %s", vs[k].env, d.msg);
        if (!e)
            continue;
        CHECK_MSG(faid_engine_integrate_variant(e) == vs[k].bits, "%s: bits %d", vs[k].env,
                  faid_engine_integrate_variant(e));
        CHECK_MSG(faid_engine_set_setup(e, &setups[0], &d) == 0, "%s", d.msg);
        CHECK_MSG(faid_engine_process(e, &f, got, &d) == 0, "%s", d.msg);
        CHECK_MSG(result_equal(got, want), "%s: one frame differs from the default engine's",
                  vs[k].env);
        pipeline_on(e, &setups[0], 2, 3); /* poisson, dark, cake */
        if (vs[k].bits == ALL) {
            pipeline_on(e, &setups[1], 1, 4); /* error model none, partial batches */
            pipeline_on(e, &setups[3], 2, 2); /* poisson without dark or flat */
        }
        faid_engine_destroy(&e);
    }
    faid_result_destroy(&want);
    faid_result_destroy(&got);
    free(raw);
    CHECK(faid_engine_parse_integrate_variant("") == 0);
    CHECK(faid_engine_parse_integrate_variant("base") == 0);
    CHECK(faid_engine_parse_integrate_variant("gather,") == FAID_INTV_GATHER);
    CHECK(faid_engine_parse_integrate_variant("gathers") == -1);
    setenv("FAID_ENGINE_INTEGRATE", "gather,fast", 1);
    faid_engine *e = faid_engine_new(boot, "cpu", &d);
    unsetenv("FAID_ENGINE_INTEGRATE");
    CHECK(e == NULL && strstr(d.msg, "FAID_ENGINE_INTEGRATE") != NULL);
    faid_engine_destroy(&e);
}

/* Each lane's outputs are read back on their own after its stages (a frame does not wait for
 * the lanes after it); FAID_ENGINE_SLOT_D2H=1 keeps the one read-back per slot of before (plain
 * and rectangular, a lean cake). Both give every frame's bits: pipeline_on compares each with
 * faid_engine_process of the frame alone. */
static void test_slot_d2h(const faid_setup *boot)
{
    faid_diag d = {0};
    setenv("FAID_ENGINE_SLOT_D2H", "1", 1);
    faid_engine *e = faid_engine_new(boot, "cpu", &d);
    unsetenv("FAID_ENGINE_SLOT_D2H");
    CHECK_MSG(e != NULL, "%s", d.msg);
    if (!e)
        return;
    pipeline_on(e, &setups[0], 2, 3); /* poisson with cake, batches of 3 */
    CHECK_MSG(faid_engine_set_cake_arrays(e, 1, &d) == 0, "%s", d.msg);
    pipeline_on(e, &setups[0], 2, 2); /* the lean cake: the lanes' prefixes, one rectangle */
    faid_engine_destroy(&e);
}

int main(void)
{
    faid_log_set_level(FAID_LOG_ERROR);
    variant v0 = {FAID_EM_POISSON, 1, 1, 1, 1, 1, 1, 0.0f};
    faid_setup boot;
    make_setup(&boot, &v0);
    faid_diag d = {0};
    ctx c = {0};
    c.ref = faid_engine_new(&boot, "ref", &d);
    CHECK_MSG(c.ref != NULL, "ref engine: %s", d.msg);
    c.cl = faid_engine_new(&boot, "cpu", &d);
    if (!c.cl) {
        fprintf(stderr, "SKIP OpenCL part: %s\n", d.msg);
        faid_engine_destroy(&c.ref);
        free_setup(&boot);
        return faid_test_finish();
    }
    CHECK(strlen(faid_engine_device_name(c.cl)) > 0);
    CHECK(faid_engine_workgroup(c.cl, 0) >= 1);
    if (c.ref) {
        test_variants(&c);
        test_fused_unfused(&c);
        test_errors(&c);
        test_pipeline(&c);
        test_integrate_variants(&c, &boot);
        test_slot_d2h(&boot);
        printf("worst relative difference OpenCL vs reference: %.3g (tolerance %.0e)\n",
               max_err_seen, TOL);
    }
    faid_engine_destroy(&c.cl);
    faid_engine_destroy(&c.ref);
    CHECK(c.cl == NULL && c.ref == NULL);
    free_setup(&boot);
    for (int k = 0; k < NVARIANTS; k++)
        if (setups[k].csr)
            free_setup(&setups[k]);
    return faid_test_finish();
}
