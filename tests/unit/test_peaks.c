/* Unit tests of the peak-finding modules: parameter defaults and checks, peak-list and background
 * allocation, the hit decision and the rolling hit rate; then the OpenCL kernels of
 * kernels/peaks/ against the plain C references on synthetic frames with spots (faid_synth),
 * through the engine's stage path as production runs them: an engine on the OpenCL device (batches
 * of two frames, so every lane offset is exercised) against one on the reference device (whose
 * stages run faid_sigclip_ref, faid_pick_ref, faid_pf8_ref): the background within float
 * tolerance, the peak lists of both finders identical (count, order and every field, bit for
 * bit), for the three error models, both patch sizes, several panel layouts (FAID_PEAKS_PANELS),
 * a list cut at its capacity and dense lists (thousands of peaks); the sigma clip's overflow path
 * (bins larger than its registers hold) the same way. Also the references' own sanity: the spots
 * faid_synth puts in are found. Last, the peak stages from compressed integer frames: OpenCL and
 * reference devices give the same background, peaks, num_peaks and is_hit. */
#include "faid_cl.h"
#include "faid_config.h"
#include "faid_csr.h"
#include "faid_engine.h"
#include "faid_hits.h"
#include "faid_peaks.h"
#include "faid_pf8.h"
#include "faid_pick.h"
#include "faid_reduce.h"
#include "faid_setup.h"
#include "faid_sigclip.h"
#include "faid_stage.h"
#include "faid_synth.h"

#include "faid_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_params(void)
{
    faid_peak_params p;
    faid_peak_params_default(&p);
    faid_diag d;
    CHECK(faid_peak_params_check(&p, &d) == 0);
    CHECK(p.cycles == 5 && p.patch_size == 3 && p.max_num_peaks == 2048);
    faid_peak_params q = p;
    q.patch_size = 4;
    CHECK(faid_peak_params_check(&q, &d) == FAID_ECONFIG && strstr(d.msg, "patch_size"));
    q = p;
    q.max_pixel_count = 1;
    CHECK(faid_peak_params_check(&q, &d) == FAID_ECONFIG && strstr(d.msg, "max_pixel_count"));
    q = p;
    q.has_max_peaks_for_hit = 1;
    q.max_peaks_for_hit = 3;
    CHECK(faid_peak_params_check(&q, &d) == FAID_ECONFIG && strstr(d.msg, "max_peaks_for_hit"));
    faid_peak_algorithm a;
    CHECK(faid_peak_algorithm_parse("peakfinder8", &a) == 0 && a == FAID_PEAKS_PEAKFINDER8);
    CHECK(faid_peak_algorithm_parse("pf9", &a) == FAID_EINVAL);
    CHECK(!strcmp(faid_peak_algorithm_name(FAID_PEAKS_PYFAI), "pyfai"));
    faid_clip_model m;
    CHECK(faid_clip_model_parse("hybrid", &m) == 0 && m == FAID_CLIP_HYBRID);
    CHECK(faid_clip_model_parse("none", &m) == FAID_EINVAL);
    CHECK(!strcmp(faid_clip_model_name(FAID_CLIP_POISSON), "poisson"));
}

static void test_lists(void)
{
    CHECK(faid_peak_list_new(0) == NULL);
    faid_peak_list *l = faid_peak_list_new(2);
    CHECK(l && l->n == 0 && l->capacity == 2);
    for (int i = 0; i < 3; i++)
        faid_peak_list_push(l, (float)i, 2.0f * (float)i, 10, 1, 10, 5, 3, i);
    CHECK(l->n == 2 && l->n_found == 3 && l->x[1] == 1.0f && l->y[1] == 2.0f && l->index[1] == 1);
    faid_peak_list_clear(l);
    CHECK(l->n == 0 && l->n_found == 0);
    faid_peak_list_destroy(&l);
    CHECK(l == NULL);
    faid_peak_list_destroy(&l);
    faid_background *b = faid_background_new(7);
    CHECK(b && b->nbins == 7 && b->mean && b->std && b->sem && b->count);
    faid_background_destroy(&b);
    CHECK(b == NULL);
    CHECK(faid_background_new(0) == NULL);
}

static void test_hits(void)
{
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.min_peaks_for_hit = 3;
    CHECK(!faid_hits_is_hit(&p, 2) && faid_hits_is_hit(&p, 3) && faid_hits_is_hit(&p, 1000));
    p.has_max_peaks_for_hit = 1;
    p.max_peaks_for_hit = 5;
    CHECK(faid_hits_is_hit(&p, 5) && !faid_hits_is_hit(&p, 6));

    CHECK(faid_hits_new(0) == NULL);
    faid_hits *h = faid_hits_new(4);
    CHECK(h && faid_hits_rate(h) == 0.0 && faid_hits_window_frames(h) == 0);
    faid_hits_push(h, 1);
    CHECK(faid_hits_rate(h) == 1.0 && faid_hits_window_frames(h) == 1);
    faid_hits_push(h, 0);
    faid_hits_push(h, 0);
    faid_hits_push(h, 1);
    CHECK(faid_hits_rate(h) == 0.5 && faid_hits_window_frames(h) == 4);
    /* The first hit leaves the window: 0 0 1 0. */
    faid_hits_push(h, 0);
    CHECK(faid_hits_rate(h) == 0.25 && faid_hits_window_frames(h) == 4);
    /* A long run against a brute-force count over the last 4 decisions. */
    int hist[1000];
    for (int i = 0; i < 1000; i++) {
        hist[i] = (i * 7919 % 13) < 5;
        faid_hits_push(h, hist[i]);
        int lo = i - 3 < 0 ? 0 : i - 3, want = 0;
        for (int k = lo; k <= i; k++)
            want += hist[k];
        if (i >= 3)
            CHECK_MSG(faid_hits_rate(h) == want / 4.0, "frame %d", i);
    }
    CHECK(faid_hits_total_frames(h) == 1005 && faid_hits_window_frames(h) == 4);
    faid_hits_reset(h);
    CHECK(faid_hits_total_frames(h) == 0 && faid_hits_total_hits(h) == 0 &&
          faid_hits_rate(h) == 0.0);
    faid_hits_destroy(&h);
    CHECK(h == NULL);
}

#define NFRAMES 2 /* frames of a set: one slot of a batch-2 engine */

/* A small tilted detector with rings, spots and a module gap (float32 frames; the engine
 * preprocesses them with Poisson variance, no other correction), and its 1D matrix without pixel
 * splitting (the background's bins). */
typedef struct frame_set {
    faid_geometry g;
    uint8_t *mask;
    float *raw[NFRAMES];
    faid_csr *csr;
} frame_set;

static int make_frames_sized(frame_set *fs, uint64_t seed, int nspots, int rows, int cols)
{
    memset(fs, 0, sizeof *fs);
    faid_geometry *g = &fs->g;
    g->dist = 0.1;
    g->poni1 = 0.0131;
    g->poni2 = 0.0157;
    g->rot1 = 0.02;
    g->rot2 = -0.01;
    g->wavelength = 1e-10;
    g->pixel1 = g->pixel2 = 100e-6;
    g->rows = rows;
    g->cols = cols;
    size_t n = (size_t)g->rows * (size_t)g->cols;
    fs->mask = calloc(n, 1);
    if (!fs->mask)
        return -1;
    for (int r = 0; r < g->rows; r++)
        for (int c = 150; c < 153; c++)
            fs->mask[(size_t)r * (size_t)g->cols + (size_t)c] = 1;
    fs->mask[5000] = fs->mask[40000] = 1;
    faid_synth_params sp;
    faid_synth_default_params(&sp);
    sp.seed = seed;
    sp.nspots = nspots;
    sp.spot_amplitude = 2000.0;
    sp.spot_sigma = 1.0;
    faid_diag d;
    faid_synth *sy = faid_synth_new(g, fs->mask, &sp, &d);
    if (!sy)
        return -1;
    for (int k = 0; k < NFRAMES; k++)
        if (!(fs->raw[k] = malloc(n * sizeof(float))) ||
            faid_synth_frame(sy, seed + (uint64_t)k, FAID_DT_F32, fs->raw[k], n * sizeof(float),
                             &d))
            return -1;
    faid_synth_destroy(&sy);
    faid_csr_params cp = {0};
    cp.split = FAID_SPLIT_NO;
    cp.unit = FAID_UNIT_Q_NM;
    cp.npt_rad = 200;
    return faid_csr_build(g, fs->mask, &cp, &fs->csr, &d);
}

static int make_frames(frame_set *fs, uint64_t seed, int nspots)
{
    return make_frames_sized(fs, seed, nspots, 256, 320);
}

static void free_frames(frame_set *fs)
{
    free(fs->mask);
    for (int k = 0; k < NFRAMES; k++)
        free(fs->raw[k]);
    faid_csr_destroy(&fs->csr);
}

static int lists_equal(const faid_peak_list *a, const faid_peak_list *b)
{
    if (a->n != b->n || a->n_found != b->n_found)
        return 0;
    size_t n = (size_t)a->n;
    return !memcmp(a->x, b->x, n * 4) && !memcmp(a->y, b->y, n * 4) &&
           !memcmp(a->intensity, b->intensity, n * 4) && !memcmp(a->sigma, b->sigma, n * 4) &&
           !memcmp(a->snr, b->snr, n * 4) && !memcmp(a->max_pixel, b->max_pixel, n * 4) &&
           !memcmp(a->npix, b->npix, n * 4) && !memcmp(a->index, b->index, n * 4);
}

static double bg_worst(const faid_background *a, const faid_background *b)
{
    double worst = 0.0;
    for (int32_t i = 0; i < a->nbins; i++) {
        const float *x[4] = {a->mean, a->std, a->sem, a->count};
        const float *y[4] = {b->mean, b->std, b->sem, b->count};
        for (int k = 0; k < 4; k++) {
            double e = fabs((double)x[k][i] - (double)y[k][i]) / fmax(1e-3, fabs((double)y[k][i]));
            if (!(e <= worst))
                worst = isnan(e) ? INFINITY : e;
        }
    }
    return worst;
}

/* The setup of frame set fs with peak parameters p (algorithm none: pyfai, whose background is
 * the same), corrections off but the mask, the matrices without pixel splitting. */
static faid_setup *fs_setup(const frame_set *fs, const faid_peak_params *p, faid_diag *d)
{
    const faid_geometry *g = &fs->g;
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "detector:\n  preset: null\n  shape: [%d, %d]\n  pixel_size: [%.17g, %.17g]\n"
             "geometry:\n  dist: %.17g\n  poni1: %.17g\n  poni2: %.17g\n  rot1: %.17g\n"
             "  rot2: %.17g\n  wavelength: %.17g\n"
             "integration:\n  npt: 200\n  unit: q_nm^-1\n  split: no\n  solid_angle: false\n"
             "  error_model: poisson\n"
             "peaks:\n  algorithm: pyfai\n",
             g->rows, g->cols, g->pixel1, g->pixel2, g->dist, g->poni1, g->poni2, g->rot1, g->rot2,
             g->wavelength);
    faid_config cfg;
    faid_config_default(&cfg);
    if (faid_config_load_string(yaml, strlen(yaml), "test", &cfg, d))
        return NULL;
    cfg.peaks = *p;
    if (p->algorithm == FAID_PEAKS_NONE)
        cfg.peaks.algorithm = FAID_PEAKS_PYFAI;
    return faid_setup_new_masked(&cfg, 1, fs->mask, d);
}

/* The two engines the comparisons run on, made once (the OpenCL one keeps its programs across
 * setups): OpenCL with batches of NFRAMES frames, and the reference. */
static faid_engine *e_cl, *e_ref;

static int engines_open(const faid_setup *s)
{
    faid_diag d;
    const char *dev = getenv("FAID_TEST_DEVICE") ? getenv("FAID_TEST_DEVICE") : "cpu";
    if (!(e_cl = faid_engine_new(s, dev, &d))) {
        printf("test_peaks: no OpenCL engine (%s), kernels not tested\n", d.msg);
        return -1;
    }
    CHECK_MSG(faid_engine_set_batch(e_cl, NFRAMES, &d) == 0, "%s", d.msg);
    e_ref = faid_engine_new(s, "ref", &d);
    CHECK_MSG(e_ref != NULL, "%s", d.msg);
    return e_ref ? 0 : -1;
}

/* The setups the engines may still point to: the current one, and every one a failed setup
 * change left them on. */
static faid_setup *kept[64];
static int nkept;

static void setups_keep(faid_setup *s, int switched)
{
    while (switched && nkept > 0)
        faid_setup_destroy(&kept[--nkept]);
    if (nkept < (int)(sizeof kept / sizeof kept[0]))
        kept[nkept++] = s; /* else leaked: the test has failed already */
}

static void engines_close(void)
{
    faid_engine_destroy(&e_cl);
    faid_engine_destroy(&e_ref);
    while (nkept > 0)
        faid_setup_destroy(&kept[--nkept]);
}

/* Runs the frames of fs through both engines with parameters p (panel grid prows x pcols, 0 = the
 * whole frame); checks background and peaks of every frame; returns the peaks the reference found
 * in the first frame (-1 on failure). Every setup change rebuilds the stages' buffers and plans,
 * as a reload does. */
static int compare_one(frame_set *fs, const faid_peak_params *p, int prows, int pcols,
                       const char *what)
{
    faid_diag d;
    char panels[64];
    snprintf(panels, sizeof panels, "%dx%d", prows, pcols);
    setenv("FAID_PEAKS_PANELS", panels, 1);
    faid_setup *s = fs_setup(fs, p, &d);
    CHECK_MSG(s != NULL, "%s: %s", what, d.msg);
    if (!s)
        return -1;
    int found = -1;
    if (!e_cl && engines_open(s)) {
        faid_setup_destroy(&s);
        return -1;
    }
    int switched = faid_engine_set_setup(e_cl, s, &d) == 0;
    CHECK_MSG(switched, "%s: %s", what, d.msg);
    int ok = faid_engine_set_setup(e_ref, s, &d) == 0;
    CHECK_MSG(ok, "%s: %s", what, d.msg);
    setups_keep(s, switched && ok);
    if (!switched || !ok) {
        unsetenv("FAID_PEAKS_PANELS");
        return -1;
    }
    faid_result *rc[NFRAMES] = {0}, *rr = faid_result_new(s);
    const size_t n = s->npix;
    for (int k = 0; k < NFRAMES; k++)
        rc[k] = faid_result_new(s);
    for (int k = 0; k < NFRAMES && rc[k] && rr; k++) {
        faid_frame f = {fs->raw[k], n * 4, FAID_ENC_NONE, FAID_DT_F32, s->rows, s->cols};
        CHECK_MSG(faid_engine_submit(e_cl, &f, (uint64_t)k, &d) == 0, "%s: %s", what, d.msg);
    }
    for (int k = 0; k < NFRAMES && rc[k] && rr; k++) {
        uint64_t tag = 99;
        CHECK_MSG(faid_engine_collect(e_cl, rc[k], &tag, 1, &d) == 0 && tag == (uint64_t)k,
                  "%s: %s", what, d.msg);
    }
    for (int k = 0; k < NFRAMES && rc[k] && rr; k++) {
        faid_frame f = {fs->raw[k], n * 4, FAID_ENC_NONE, FAID_DT_F32, s->rows, s->cols};
        CHECK_MSG(faid_engine_process(e_ref, &f, rr, &d) == 0, "%s: reference: %s", what, d.msg);
        double w = bg_worst(rc[k]->bg, rr->bg);
        CHECK_MSG(w < 1e-5, "%s, frame %d: background differs by %g", what, k, w);
        if (p->algorithm != FAID_PEAKS_NONE) {
            CHECK_MSG(lists_equal(rc[k]->peaks, rr->peaks),
                      "%s, frame %d: kernel %d/%d peaks, reference %d/%d", what, k, rc[k]->peaks->n,
                      rc[k]->peaks->n_found, rr->peaks->n, rr->peaks->n_found);
            if (k == 0)
                found = rr->peaks->n_found;
            if (getenv("FAID_TEST_VERBOSE"))
                printf("%s, frame %d: %d peaks (%d kept)\n", what, k, rr->peaks->n_found,
                       rr->peaks->n);
        }
    }
    for (int k = 0; k < NFRAMES; k++)
        faid_result_destroy(&rc[k]);
    faid_result_destroy(&rr);
    unsetenv("FAID_PEAKS_PANELS");
    return found;
}

/* Whether an OpenCL device is there to test the kernels on. */
static int have_cl(void)
{
    faid_cl_device_info dev;
    faid_diag d;
    if (faid_cl_select(getenv("FAID_TEST_DEVICE") ? getenv("FAID_TEST_DEVICE") : "cpu", &dev, &d) !=
        0) {
        printf("test_peaks: no OpenCL device (%s), kernels not tested\n", d.msg);
        return 0;
    }
    return 1;
}

static void test_kernels(void)
{
    if (!have_cl())
        return;
    frame_set fs;
    CHECK(make_frames(&fs, 7, 25) == 0);
    faid_peak_params p;
    faid_peak_params_default(&p);
    const faid_clip_model models[] = {FAID_CLIP_POISSON, FAID_CLIP_AZIMUTHAL, FAID_CLIP_HYBRID};
    for (int m = 0; m < 3; m++) {
        p.error_model = models[m];
        p.algorithm = FAID_PEAKS_NONE;
        compare_one(&fs, &p, 0, 0, faid_clip_model_name(models[m]));
        p.cutoff_clip = 3.0;
        p.algorithm = FAID_PEAKS_PYFAI;
        int n = compare_one(&fs, &p, 0, 0, "pyfai, patch 3");
        CHECK_MSG(n >= 15, "pyfai picker (%s) found %d peaks of 25 spots",
                  faid_clip_model_name(models[m]), n);
        p.cutoff_clip = 0.0;
    }
    p.error_model = FAID_CLIP_AZIMUTHAL;
    p.algorithm = FAID_PEAKS_PYFAI;
    p.patch_size = 5;
    p.connected = 3;
    compare_one(&fs, &p, 0, 0, "pyfai, patch 5");
    p.patch_size = 3;
    p.connected = 2;
    p.max_num_peaks = 4;
    CHECK(compare_one(&fs, &p, 0, 0, "pyfai, capacity 4") > 4);
    p.max_num_peaks = 2048;

    p.algorithm = FAID_PEAKS_PEAKFINDER8;
    p.adc_threshold = 50.0;
    int n = compare_one(&fs, &p, 0, 0, "peakfinder8, one panel");
    CHECK_MSG(n >= 15, "peakfinder8 found %d peaks of 25 spots", n);
    compare_one(&fs, &p, 128, 160, "peakfinder8, 2x2 panels");
    p.min_pixel_count = 1;
    p.max_pixel_count = 8;
    p.local_bg_radius = 5;
    p.min_res = 30;
    p.max_res = 150;
    compare_one(&fs, &p, 64, 0, "peakfinder8, 4x1 panels, narrow");
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PEAKFINDER8;
    p.adc_threshold = 50.0;
    p.max_num_peaks = 5;
    CHECK(compare_one(&fs, &p, 0, 160, "peakfinder8, capacity 5") > 5);
    free_frames(&fs);

    /* A frame without spots: no peaks from either finder. */
    CHECK(make_frames(&fs, 8, 0) == 0);
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PYFAI;
    p.cutoff_peak = 5.0;
    p.connected = 3;
    CHECK(compare_one(&fs, &p, 0, 0, "pyfai, background only") == 0);
    p.algorithm = FAID_PEAKS_PEAKFINDER8;
    p.adc_threshold = 50.0;
    CHECK(compare_one(&fs, &p, 0, 0, "peakfinder8, background only") == 0);
    free_frames(&fs);

    /* Dense lists: noise peaks all over the frame (several flags in most 1,024-pixel spans of
     * compact.cl, most peakfinder8 candidates rejected by the fill), whole and cut at a capacity
     * that falls inside a span. */
    CHECK(make_frames(&fs, 9, 400) == 0);
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PYFAI;
    p.cutoff_peak = 0.5;
    p.connected = 1;
    n = compare_one(&fs, &p, 0, 0, "pyfai, dense");
    CHECK_MSG(n > 2000, "pyfai, dense: %d peaks", n);
    p.max_num_peaks = n > 2 ? n / 2 + 1 : 1;
    CHECK(compare_one(&fs, &p, 0, 0, "pyfai, dense, cut") == n);
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PEAKFINDER8;
    p.adc_threshold = 0.0;
    p.minimum_snr = 1.0;
    p.min_pixel_count = 1;
    n = compare_one(&fs, &p, 0, 0, "peakfinder8, dense");
    CHECK_MSG(n > 500, "peakfinder8, dense: %d peaks", n);
    p.max_num_peaks = n > 2 ? n / 2 + 1 : 1;
    CHECK(compare_one(&fs, &p, 128, 160, "peakfinder8, dense, 2x2 panels, cut") > p.max_num_peaks);
    /* a panel grid that is no grid: the setup is refused, naming the variable */
    setenv("FAID_PEAKS_PANELS", "128by160", 1);
    faid_diag d;
    faid_setup *bad = fs_setup(&fs, &p, &d);
    CHECK(bad != NULL && e_cl != NULL);
    if (bad && e_cl) {
        CHECK(faid_engine_set_setup(e_cl, bad, &d) == FAID_EINVAL);
        CHECK(strstr(d.msg, "FAID_PEAKS_PANELS") != NULL);
    }
    faid_setup_destroy(&bad);
    unsetenv("FAID_PEAKS_PANELS");
    free_frames(&fs);
}

/* peakfinder8's round 4 variants (issue 17; pf8_peaks.cl, pf8_radial.cl): each pixel's class byte
 * (PF8_CLASS), the fill's records copied by the write (PF8_RECS, and with PF8_NREC_MAX=7 a list
 * whose first records are copied and the rest recomputed), the write finding its spans' offsets
 * (FAID_PF8_MERGE=1: no scan launch) and the radial statistics gathering from img
 * (FAID_PF8_GATHER=1) or computing the values itself (FAID_PF8_NOPREP=1: no prep launch), the
 * fill in the candidates' pass (FAID_PF8_CANDFILL=1, windows in local memory) or windows in the
 * fill launch (PF8_WINFILL), and round 7's fill by runs of a warp (PF8_SPREAD) or by work-groups
 * (PF8_WGSEED), fused and not: lists
 * bit for bit the reference's on frames with 60 spots (some overlapping, one panel and 2x2 panels:
 * spots cut by panel borders and the module gap) and with dense noise peaks (thousands of
 * candidates, more than the records kept), whole and cut at a capacity inside a span; values scaled
 * off the integers, so that a sum taken in another order changes bits. */
static void test_pf8_variants(void)
{
    if (!have_cl())
        return;
    static const struct {
        const char *kopts, *merge, *gather, *candfill, *fused, *noprep;
    } v[] = {
        {"-DPF8_CLASS=1,-DPF8_RECS=1", "0", "0", "0", "", "0"},
        /* round 3's kernels (class bytes, records and the merged scan are the defaults now) */
        {"-DPF8_CLASS=0,-DPF8_RECS=0", "0", "0", "0", "", "0"},
        {"-DPF8_CLASS=1,-DPF8_RECS=1,-DPF8_NREC_MAX=7", "1", "1", "0", "0", "0"},
        {"-DPF8_CLASS=0,-DPF8_RECS=1", "1", "1", "0", "", "0"},
        /* the fill in the candidates' pass: windows for up to 8 candidates a span, a work-item
         * each beyond (the dense frame), the records copied or recomputed */
        {"-DPF8_RECS=1", "1", "0", "1", "", "0"},
        {"-DPF8_RECS=0", "0", "1", "1", "", "0"},
        /* windows for every span and of 8 x 8 pixels: components and discs reach past them */
        {"-DPF8_RECS=1,-DPF8_WINMAX=100000,-DPF8_WS=8", "1", "0", "1", "", "0"},
        /* no prep launch: the radial pass computes the values, fused and from the copy */
        {"-DPF8_RECS=1", "1", "0", "1", "", "1"},
        {"-DPF8_CLASS=1,-DPF8_RECS=0", "0", "0", "0", "0", "1"},
        /* the windows in the fill launch, a work-group per candidate */
        {"-DPF8_RECS=1,-DPF8_WINFILL=1", "1", "0", "0", "", "1"},
        {"-DPF8_CLASS=1,-DPF8_WINFILL=1,-DPF8_WS=8", "0", "0", "0", "", "0"},
        /* round 7: a warp's run of work-items per candidate (where the launch has one for
         * each; the dense frame falls back to one per work-item) */
        {"-DPF8_SPREAD=32", "1", "0", "0", "", "0"},
        /* a work-group per candidate, the flood fill a level at a time, for every candidate
         * (the dense frame too): with the window of 64 x 64 pixels, and of 8 x 8 (components
         * that leave it walked by one work-item) without class bytes and records, not fused
         * (the default threshold, 4 a group, is reference.bench_checks') */
        {"-DPF8_WGSEED=1000000", "1", "0", "0", "", "0"},
        /* a candidate per work-item, as before round 8 made the work-groups the default */
        {"-DPF8_WGSEED=0", "1", "0", "0", "", "0"},
        {"-DPF8_WGSEED=1000000,-DPF8_WGW=8,-DPF8_CLASS=0,-DPF8_RECS=0", "0", "0", "0", "0", "0"},
    };
    frame_set sp, dn;
    CHECK(make_frames(&sp, 21, 60) == 0);
    CHECK(make_frames(&dn, 9, 400) == 0);
    /* Poisson counts are integers, whose float sums (a disc of 144 counts, their squares) are
     * exact in any order: values with a full mantissa make an order change show in the bits */
    const size_t npx = (size_t)sp.g.rows * (size_t)sp.g.cols;
    for (int f = 0; f < NFRAMES; f++)
        for (size_t i = 0; i < npx; i++) {
            if (sp.raw[f])
                sp.raw[f][i] *= 0.7310585f;
            if (dn.raw[f])
                dn.raw[f][i] *= 0.7310585f;
        }
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        engines_close(); /* the next compare_one opens engines with these knobs */
        setenv("FAID_PEAKS_KOPTS", v[k].kopts, 1);
        setenv("FAID_PF8_MERGE", v[k].merge, 1);
        setenv("FAID_PF8_GATHER", v[k].gather, 1);
        setenv("FAID_PEAKS_FUSED", v[k].fused, 1);
        setenv("FAID_PF8_CANDFILL", v[k].candfill, 1);
        setenv("FAID_PF8_NOPREP", v[k].noprep, 1);
        char tag[160], what[200];
        snprintf(tag, sizeof tag, "pf8 %s merge %s gather %s candfill %s noprep %s fused '%s'",
                 v[k].kopts, v[k].merge, v[k].gather, v[k].candfill, v[k].noprep, v[k].fused);
        faid_peak_params p;
        faid_peak_params_default(&p);
        p.algorithm = FAID_PEAKS_PEAKFINDER8;
        p.adc_threshold = 50.0;
        snprintf(what, sizeof what, "%s, spots", tag);
        int n = compare_one(&sp, &p, 0, 0, what);
        CHECK_MSG(n > 20, "%s: %d peaks", what, n);
        snprintf(what, sizeof what, "%s, spots, 2x2 panels", tag);
        CHECK(compare_one(&sp, &p, 128, 160, what) > 7);
        p.adc_threshold = 0.0;
        p.minimum_snr = 1.0;
        p.min_pixel_count = 1;
        snprintf(what, sizeof what, "%s, dense", tag);
        n = compare_one(&dn, &p, 0, 0, what);
        CHECK_MSG(n > 500, "%s: %d peaks", what, n);
        p.max_num_peaks = n > 2 ? n / 2 + 1 : 1;
        snprintf(what, sizeof what, "%s, dense, cut", tag);
        CHECK(compare_one(&dn, &p, 128, 160, what) > p.max_num_peaks);
        unsetenv("FAID_PEAKS_KOPTS");
        unsetenv("FAID_PF8_MERGE");
        unsetenv("FAID_PF8_GATHER");
        unsetenv("FAID_PEAKS_FUSED");
        unsetenv("FAID_PF8_CANDFILL");
        unsetenv("FAID_PF8_NOPREP");
    }
    engines_close();
    free_frames(&sp);
    free_frames(&dn);
}

/* The sigma clip's overflow path (sigma_clip.cl: entries of bins larger than WG * R kept in global
 * memory instead of registers), forced by a small work-group and register share through the
 * tuning variables: same background and peaks as the reference, for the three error models. */
static void test_sigclip_overflow(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set fs;
    CHECK(make_frames(&fs, 7, 25) == 0);
    setenv("FAID_SIGCLIP_LM", "0", 1); /* the register kernel, not the local-memory default */
    setenv("FAID_SIGCLIP_WG", "32", 1);
    setenv("FAID_SIGCLIP_R", "2", 1); /* 64 entries per bin in registers: most bins overflow */
    faid_peak_params p;
    faid_peak_params_default(&p);
    const faid_clip_model models[] = {FAID_CLIP_POISSON, FAID_CLIP_AZIMUTHAL, FAID_CLIP_HYBRID};
    for (int m = 0; m < 3; m++) {
        p.error_model = models[m];
        p.algorithm = FAID_PEAKS_NONE;
        compare_one(&fs, &p, 0, 0, "overflow, background only");
        p.algorithm = FAID_PEAKS_PYFAI;
        CHECK(compare_one(&fs, &p, 0, 0, "overflow, pyfai") >= 15);
    }
    unsetenv("FAID_SIGCLIP_WG");
    unsetenv("FAID_SIGCLIP_R");
    /* the configuration itself, for a device of 256 work-items */
    faid_dev_info info = {.name = "test device", .max_wg = 256};
    setenv("FAID_SIGCLIP_WG", "32", 1);
    setenv("FAID_SIGCLIP_R", "2", 1);
    faid_sigclip_cfg cfg;
    CHECK(faid_sigclip_config(&info, fs.csr, p.error_model, &cfg, &d) == 0);
    CHECK(cfg.wg == 32 && cfg.r == 2 && cfg.ovf_bytes >= (size_t)fs.csr->nnz * 8);
    setenv("FAID_SIGCLIP_R", "0", 1); /* out of range: an error naming the variable */
    CHECK(faid_sigclip_config(&info, fs.csr, p.error_model, &cfg, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_R") != NULL);
    setenv("FAID_SIGCLIP_R", "4", 1);
    setenv("FAID_SIGCLIP_WG", "48", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, p.error_model, &cfg, &d) == FAID_EINVAL);
    unsetenv("FAID_SIGCLIP_WG");
    unsetenv("FAID_SIGCLIP_R");
    CHECK(faid_sigclip_config(&info, fs.csr, p.error_model, &cfg, &d) == 0);
    CHECK(cfg.ovf_bytes == 4 * sizeof(float)); /* the default holds the largest bin */
    setenv("FAID_SIGCLIP_WG", "512", 1);       /* more than the device allows: refused, named */
    CHECK(faid_sigclip_config(&info, fs.csr, p.error_model, &cfg, &d) == FAID_EUNSUP);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_WG") != NULL);
    unsetenv("FAID_SIGCLIP_WG");
    unsetenv("FAID_SIGCLIP_LM");
    free_frames(&fs);
}

static int bg_same_bits(const faid_background *a, const faid_background *b)
{
    size_t n = (size_t)a->nbins * sizeof(float);
    return a->nbins == b->nbins && !memcmp(a->mean, b->mean, n) && !memcmp(a->std, b->std, n) &&
           !memcmp(a->sem, b->sem, n) && !memcmp(a->count, b->count, n);
}

/* The results (background, peaks) of the frames of fs on a fresh engine of device dev (NULL: the
 * OpenCL test device), built as the environment's tuning variables say (they are read when the
 * engine takes its setup; a fresh engine, so that the shared one's program cache is left alone);
 * 0 on success. */
static int run_frames(frame_set *fs, const faid_peak_params *p, const char *dev, faid_result **out,
                      faid_diag *d)
{
    if (!dev)
        dev = getenv("FAID_TEST_DEVICE") ? getenv("FAID_TEST_DEVICE") : "cpu";
    faid_setup *s = fs_setup(fs, p, d);
    faid_engine *e = s ? faid_engine_new(s, dev, d) : NULL;
    int rc = e ? 0 : -1;
    for (int k = 0; k < NFRAMES && !rc; k++) {
        faid_frame f = {fs->raw[k], s->npix * 4, FAID_ENC_NONE, FAID_DT_F32, s->rows, s->cols};
        if (!(out[k] = faid_result_new(s)))
            rc = -1;
        else
            rc = faid_engine_process(e, &f, out[k], d);
    }
    faid_engine_destroy(&e);
    faid_setup_destroy(&s);
    return rc;
}

/* The sigma clip's local-memory variant (FAID_SIGCLIP_LM, issue 17): entries kept in registers,
 * local memory and the transposed overflow buffer at once (32 work-items, 1 + 2 entries each on
 * chip: most bins overflow), and all of a bin on chip (1 + 63): the background bit for bit the
 * register kernel's of the same work-group size (the same sums in the same order) and peaks equal
 * to the reference, for the three error models; a local share larger than the device's local
 * memory is an error naming the variable. */
static void test_sigclip_local(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set fs;
    CHECK(make_frames(&fs, 7, 25) == 0);
    faid_peak_params p;
    faid_peak_params_default(&p);
    const faid_clip_model models[] = {FAID_CLIP_POISSON, FAID_CLIP_AZIMUTHAL, FAID_CLIP_HYBRID};
    static const char *const lms[] = {"2", "63"};
    p.algorithm = FAID_PEAKS_PYFAI;
    for (int m = 0; m < 3; m++) {
        p.error_model = models[m];
        faid_result *reg[NFRAMES] = {0}, *loc[NFRAMES] = {0}, *ref[NFRAMES] = {0};
        CHECK_MSG(run_frames(&fs, &p, "ref", ref, &d) == 0, "reference: %s", d.msg);
        setenv("FAID_SIGCLIP_WG", "32", 1);
        setenv("FAID_SIGCLIP_LM", "0", 1); /* the register kernel, every bin in registers */
        setenv("FAID_SIGCLIP_R", "64", 1);
        CHECK_MSG(run_frames(&fs, &p, NULL, reg, &d) == 0, "register kernel: %s", d.msg);
        setenv("FAID_SIGCLIP_R", "1", 1);
        for (int l = 0; l < 2; l++) {
            setenv("FAID_SIGCLIP_LM", lms[l], 1);
            CHECK_MSG(run_frames(&fs, &p, NULL, loc, &d) == 0, "LM=%s: %s", lms[l], d.msg);
            for (int k = 0; k < NFRAMES; k++) {
                CHECK_MSG(reg[k] && loc[k] && bg_same_bits(loc[k]->bg, reg[k]->bg),
                          "LM=%s, model %d, frame %d: background differs from the register "
                          "kernel's",
                          lms[l], m, k);
                CHECK_MSG(loc[k] && ref[k] && bg_worst(loc[k]->bg, ref[k]->bg) < 1e-5 &&
                              lists_equal(loc[k]->peaks, ref[k]->peaks) &&
                              ref[k]->peaks->n_found >= 15,
                          "LM=%s, model %d, frame %d: background or peaks differ from the "
                          "reference's",
                          lms[l], m, k);
                faid_result_destroy(&loc[k]);
            }
        }
        unsetenv("FAID_SIGCLIP_LM");
        unsetenv("FAID_SIGCLIP_WG");
        unsetenv("FAID_SIGCLIP_R");
        for (int k = 0; k < NFRAMES; k++) {
            faid_result_destroy(&reg[k]);
            faid_result_destroy(&ref[k]);
        }
    }
    /* the configuration itself, for a device of 256 work-items and 48 KB of local memory */
    faid_dev_info info = {.name = "test device", .max_wg = 256, .local_mem = 49152};
    faid_sigclip_cfg cfg;
    setenv("FAID_SIGCLIP_LM", "12", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.lm == 12 && strstr(cfg.opts, "-D LM=12") != NULL && cfg.r >= 4);
    setenv("FAID_SIGCLIP_LM", "16", 1); /* 32 KB of entries + 15.5 KB: too much for 48 KB... */
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_POISSON, &cfg, &d) == FAID_EUNSUP);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_LM") != NULL);
    /* ...with the variance, not without */
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    setenv("FAID_SIGCLIP_LM", "-1", 1); /* out of range */
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_LM") != NULL);
    setenv("FAID_SIGCLIP_LM", "0", 1); /* the register kernel (the default before issue 17's run) */
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.lm == 0 && strstr(cfg.opts, "LM") == NULL && cfg.r >= 4);
    unsetenv("FAID_SIGCLIP_LM");
    /* the default: LM=12, R=4 and the gather 8 at a time where they fit (the entries without the
     * variance; round 4's GPU run)... */
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.lm == 12 && cfg.r == 4 && cfg.gb == 8 && strstr(cfg.opts, "-D LM=12") != NULL &&
          strstr(cfg.opts, "-D SC_GB=8") != NULL);
    /* ...the largest share that fits where 12 does not (with the variance: 10, 46 KB), without
     * an error... */
    CHECK_MSG(faid_sigclip_config(&info, fs.csr, FAID_CLIP_POISSON, &cfg, &d) == 0, "%s", d.msg);
    CHECK(cfg.lm == 10 && cfg.r == 4 && strstr(cfg.opts, "-D LM=10") != NULL);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_HYBRID, &cfg, &d) == 0 && cfg.lm == 10);
    /* ...an explicit R stays... */
    setenv("FAID_SIGCLIP_R", "8", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.lm == 12 && cfg.r == 8);
    unsetenv("FAID_SIGCLIP_R");
    /* ...and the register kernel where no share fits */
    faid_dev_info small = {.name = "small device", .max_wg = 256, .local_mem = 16384};
    CHECK(faid_sigclip_config(&small, fs.csr, FAID_CLIP_POISSON, &cfg, &d) == 0);
    CHECK(cfg.lm == 0 && strstr(cfg.opts, "LM") == NULL && cfg.r >= 4);
    free_frames(&fs);
}

/* Issue 17 round 3's latency variants: the sigma clip's gather in batches (FAID_SIGCLIP_GB) and
 * the picker's loads issued together (FAID_PEAKS_KOPTS=-DPP_PREFETCH=1). They change where loads
 * are issued, not what is summed, so the background must be bit for bit the same kernel's
 * without them and the peaks the reference's: for the three error models, with each work-item's
 * entries in registers, local memory and the overflow buffer at once (32 work-items, 1 + 2 on
 * chip, a batch of 3 so that batches straddle the three), the register kernel's overflow (CSR
 * layout), the preprocessed copy instead of the raw frame, and patch sizes 3 and 5 (each patch
 * row loaded at once), and 5 built with PP_PF_HW 1 (the loop as before); a batch out of range is
 * refused, named; FAID_SIGCLIP_MAXREG adds NVIDIA's register cap on NVIDIA's devices only (80
 * by default with the default local-memory kernel). */
static void test_round3_variants(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set fs;
    CHECK(make_frames(&fs, 11, 25) == 0);
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PYFAI;
    const faid_clip_model models[] = {FAID_CLIP_POISSON, FAID_CLIP_AZIMUTHAL, FAID_CLIP_HYBRID};
    /* base environment (variable, value pairs, NULL-terminated) */
    static const char *const kinds[][8] = {
        {"FAID_SIGCLIP_LM", "2", "FAID_SIGCLIP_R", "1", "FAID_PEAKS_FUSED", "1", NULL},
        {"FAID_SIGCLIP_LM", "0", "FAID_SIGCLIP_R", "2", "FAID_PEAKS_FUSED", "1", NULL},
        {"FAID_SIGCLIP_LM", "2", "FAID_SIGCLIP_R", "1", "FAID_PEAKS_FUSED", "0", NULL},
    };
    for (int m = 0; m < 3; m++) {
        p.error_model = models[m];
        /* patch 3 (the default), 5 (the benchmark's), and 5 past a PP_PF_HW of 1 */
        p.patch_size = m == 0 ? 3 : 5;
        const char *ppf = m == 2 ? "-DPP_PREFETCH=1,-DPP_PF_HW=1,-DPP_WSCAN1=1,-DPK_SCAN_PF=4"
                                 : "-DPP_PREFETCH=1,-DPP_WSCAN1=1,-DPK_SCAN_PF=4";
        faid_result *ref[NFRAMES] = {0};
        CHECK_MSG(run_frames(&fs, &p, "ref", ref, &d) == 0, "reference: %s", d.msg);
        for (int k = 0; k < 3; k++) {
            faid_result *base[NFRAMES] = {0}, *var[NFRAMES] = {0};
            setenv("FAID_SIGCLIP_WG", "32", 1);
            for (int e = 0; kinds[k][e]; e += 2)
                setenv(kinds[k][e], kinds[k][e + 1], 1);
            CHECK_MSG(run_frames(&fs, &p, NULL, base, &d) == 0, "kind %d: %s", k, d.msg);
            setenv("FAID_SIGCLIP_GB", "3", 1);
            setenv("FAID_PEAKS_KOPTS", ppf, 1);
            CHECK_MSG(run_frames(&fs, &p, NULL, var, &d) == 0, "kind %d, variants: %s", k, d.msg);
            unsetenv("FAID_SIGCLIP_GB");
            unsetenv("FAID_PEAKS_KOPTS");
            unsetenv("FAID_SIGCLIP_WG");
            for (int e = 0; kinds[k][e]; e += 2)
                unsetenv(kinds[k][e]);
            for (int f = 0; f < NFRAMES; f++) {
                CHECK_MSG(base[f] && var[f] && bg_same_bits(var[f]->bg, base[f]->bg),
                          "model %d, kind %d, frame %d: FAID_SIGCLIP_GB changed the background", m,
                          k, f);
                CHECK_MSG(var[f] && ref[f] && lists_equal(var[f]->peaks, ref[f]->peaks) &&
                              ref[f]->peaks->n_found >= 15,
                          "model %d, kind %d, frame %d: PP_PREFETCH peaks %d, reference %d", m, k,
                          f, var[f] ? var[f]->peaks->n_found : -1,
                          ref[f] ? ref[f]->peaks->n_found : -1);
                faid_result_destroy(&base[f]);
                faid_result_destroy(&var[f]);
            }
        }
        for (int f = 0; f < NFRAMES; f++)
            faid_result_destroy(&ref[f]);
    }
    /* a frame of 360 spans: faid_pk_scan's work-items take 2 counts each (PK_SCAN_PF), and
     * one where they take 2 but PK_SCAN_PF is 1 (the loop as before) */
    frame_set big;
    CHECK(make_frames_sized(&big, 13, 120, 576, 640) == 0);
    p.error_model = FAID_CLIP_AZIMUTHAL;
    p.patch_size = 5;
    static const char *const scans[] = {"-DPP_PREFETCH=1,-DPP_WSCAN1=1,-DPK_SCAN_PF=4",
                                        "-DPP_WSCAN1=1,-DPK_SCAN_PF=1"};
    faid_result *bref[NFRAMES] = {0}, *bdef[NFRAMES] = {0};
    CHECK_MSG(run_frames(&big, &p, "ref", bref, &d) == 0, "reference: %s", d.msg);
    CHECK_MSG(run_frames(&big, &p, NULL, bdef, &d) == 0, "defaults: %s", d.msg);
    for (int v = 0; v < 2; v++) {
        faid_result *var[NFRAMES] = {0};
        setenv("FAID_PEAKS_KOPTS", scans[v], 1);
        CHECK_MSG(run_frames(&big, &p, NULL, var, &d) == 0, "%s: %s", scans[v], d.msg);
        unsetenv("FAID_PEAKS_KOPTS");
        for (int f = 0; f < NFRAMES; f++) {
            CHECK_MSG(var[f] && bdef[f] && bg_same_bits(var[f]->bg, bdef[f]->bg) && bref[f] &&
                          lists_equal(var[f]->peaks, bref[f]->peaks) &&
                          bref[f]->peaks->n_found >= 60,
                      "%s, frame %d: peaks %d, reference %d", scans[v], f,
                      var[f] ? var[f]->peaks->n_found : -1, bref[f] ? bref[f]->peaks->n_found : -1);
            faid_result_destroy(&var[f]);
        }
    }
    for (int f = 0; f < NFRAMES; f++) {
        faid_result_destroy(&bref[f]);
        faid_result_destroy(&bdef[f]);
    }
    free_frames(&big);
    faid_dev_info info = {.name = "test device", .max_wg = 256, .local_mem = 49152};
    faid_sigclip_cfg cfg;
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.gb == 8 && strstr(cfg.opts, "-D SC_GB=8") != NULL); /* on with the default LM */
    setenv("FAID_SIGCLIP_GB", "0", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.gb == 0 && strstr(cfg.opts, "SC_GB") == NULL); /* =0 turns it off */
    unsetenv("FAID_SIGCLIP_GB");
    setenv("FAID_SIGCLIP_LM", "0", 1); /* off with the register kernel unless set */
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.gb == 0 && strstr(cfg.opts, "SC_GB") == NULL);
    unsetenv("FAID_SIGCLIP_LM");
    setenv("FAID_SIGCLIP_GB", "8", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.gb == 8 && strstr(cfg.opts, "-D SC_GB=8") != NULL);
    setenv("FAID_SIGCLIP_GB", "17", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_GB") != NULL);
    unsetenv("FAID_SIGCLIP_GB");
    /* the register cap: NVIDIA's compiler option on NVIDIA's devices only; 80 by default with
     * the default local-memory kernel (round 8), none with an explicit share or with 0 */
    faid_dev_info nv = {.name = "NVIDIA H100 80GB HBM3", .max_wg = 1024, .local_mem = 49152};
    CHECK(faid_sigclip_config(&nv, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(strstr(cfg.opts, " -cl-nv-maxrregcount=80") != NULL);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(strstr(cfg.opts, "maxrregcount") == NULL);
    setenv("FAID_SIGCLIP_LM", "4", 1);
    CHECK(faid_sigclip_config(&nv, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(strstr(cfg.opts, "maxrregcount") == NULL);
    unsetenv("FAID_SIGCLIP_LM");
    setenv("FAID_SIGCLIP_MAXREG", "0", 1);
    CHECK(faid_sigclip_config(&nv, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(strstr(cfg.opts, "maxrregcount") == NULL);
    setenv("FAID_SIGCLIP_MAXREG", "80", 1);
    CHECK(faid_sigclip_config(&nv, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(strstr(cfg.opts, " -cl-nv-maxrregcount=80") != NULL);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(strstr(cfg.opts, "maxrregcount") == NULL);
    setenv("FAID_SIGCLIP_MAXREG", "256", 1);
    CHECK(faid_sigclip_config(&nv, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_MAXREG") != NULL);
    unsetenv("FAID_SIGCLIP_MAXREG");
    free_frames(&fs);
}

/* run_frames with coefficients in the background matrix (coef: not 0; sigma_clip.cl's HAS_COEF):
 * every seventh entry 0 (left out of every sum), the others 0.5, 0.625, ... 1.0 (exact in float) */
/* As run_frames_coef, and with dark set a dark image (0 to 4 counts, a few pixels above their
 * frame's value) in the setup's corrections. */
static int run_frames_dark(frame_set *fs, const faid_peak_params *p, const char *dev, int coef,
                           int dark, faid_result **out, faid_diag *d)
{
    if (!coef && !dark)
        return run_frames(fs, p, dev, out, d);
    if (!dev)
        dev = getenv("FAID_TEST_DEVICE") ? getenv("FAID_TEST_DEVICE") : "cpu";
    faid_setup *s = fs_setup(fs, p, d);
    faid_csr *m = s ? s->csr_bg : NULL;
    int rc = m ? 0 : -1;
    if (!rc && coef && !m->data &&
        !(m->data = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof(float))))
        rc = -1;
    for (int64_t k = 0; !rc && coef && k < m->nnz; k++)
        m->data[k] = k % 7 == 3 ? 0.0f : 0.5f + 0.125f * (float)(k % 5);
    if (!rc && dark) {
        if (!(s->dark = malloc(s->npix * sizeof(float))))
            rc = -1;
        for (size_t i = 0; !rc && i < s->npix; i++)
            s->dark[i] = (float)((i * 2654435761u) % 17) * 0.25f;
        s->corr.dark = s->dark;
    }
    faid_engine *e = rc ? NULL : faid_engine_new(s, dev, d);
    rc = e ? 0 : -1;
    for (int k = 0; k < NFRAMES && !rc; k++) {
        faid_frame f = {fs->raw[k], s->npix * 4, FAID_ENC_NONE, FAID_DT_F32, s->rows, s->cols};
        if (!(out[k] = faid_result_new(s)))
            rc = -1;
        else
            rc = faid_engine_process(e, &f, out[k], d);
    }
    faid_engine_destroy(&e);
    faid_setup_destroy(&s);
    return rc;
}

static int run_frames_coef(frame_set *fs, const faid_peak_params *p, const char *dev, int coef,
                           faid_result **out, faid_diag *d)
{
    return run_frames_dark(fs, p, dev, coef, 0, out, d);
}

/* Issue 17 round 5: the sigma clip's coalesced gather (FAID_SIGCLIP_CG=1, sigma_clip.cl's
 * SC_CG; 2: each chunk through a tile in local memory, the overflow written coalesced, the tile
 * in the scan's arrays or, with 8 entries a work-item or 4 with the variance, an array of its
 * own) puts every entry where the gather without it puts it, so the background is bit for bit
 * the same kernel's without it and the peaks are the C reference's: for the three error models,
 * with and without coefficients, 32 work-items and each layout of the entries: registers, local
 * memory and overflow at once (1 + 2 on chip: most bins above the local capacity), all of a bin
 * on chip (1 + 63), the register kernel's overflow (LM 0: CSR positions), and 5 in registers
 * (staged in the scan's arrays without the variance, in an array of its own with it); chunks of
 * 3, 4 and 8 entries per work-item (a chunk straddles the owners' layouts). The knobs' checks:
 * on in the build options, out of range refused and named, the local memory it needs counted. */
static void test_sigclip_cg(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set fs;
    CHECK(make_frames(&fs, 17, 25) == 0);
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PYFAI;
    const faid_clip_model models[] = {FAID_CLIP_POISSON, FAID_CLIP_AZIMUTHAL, FAID_CLIP_HYBRID};
    /* LM, R and the chunk of each layout */
    static const char *const kinds[][3] = {
        {"2", "1", "4"}, {"63", "1", "3"}, {"0", "2", "8"}, {"3", "5", "3"}};
    for (int m = 0; m < 3; m++) {
        p.error_model = models[m];
        for (int coef = 0; coef < 2; coef++) {
            faid_result *ref[NFRAMES] = {0};
            CHECK_MSG(run_frames_coef(&fs, &p, "ref", coef, ref, &d) == 0, "reference: %s", d.msg);
            for (int k = 0; k < 4; k++) {
                if (coef && (k == 1 || k == 2))
                    continue; /* coefficients: with overflow and registers (kinds 0 and 3) */
                faid_result *base[NFRAMES] = {0};
                setenv("FAID_SIGCLIP_WG", "32", 1);
                setenv("FAID_PEAKS_FUSED", k == 2 ? "0" : "1", 1);
                setenv("FAID_SIGCLIP_LM", kinds[k][0], 1);
                setenv("FAID_SIGCLIP_R", kinds[k][1], 1);
                CHECK_MSG(run_frames_coef(&fs, &p, NULL, coef, base, &d) == 0, "kind %d: %s", k,
                          d.msg);
                for (int cg = 1; cg <= 2; cg++) {
                    faid_result *var[NFRAMES] = {0};
                    setenv("FAID_SIGCLIP_CG", cg == 1 ? "1" : "2", 1);
                    setenv("FAID_SIGCLIP_CGU", kinds[k][2], 1);
                    CHECK_MSG(run_frames_coef(&fs, &p, NULL, coef, var, &d) == 0,
                              "kind %d, cg %d: %s", k, cg, d.msg);
                    unsetenv("FAID_SIGCLIP_CG");
                    unsetenv("FAID_SIGCLIP_CGU");
                    for (int f = 0; f < NFRAMES; f++) {
                        CHECK_MSG(base[f] && var[f] && bg_same_bits(var[f]->bg, base[f]->bg),
                                  "model %d, coef %d, kind %d, cg %d, frame %d: FAID_SIGCLIP_CG "
                                  "changed the background",
                                  m, coef, k, cg, f);
                        CHECK_MSG(var[f] && ref[f] && bg_worst(var[f]->bg, ref[f]->bg) < 1e-5 &&
                                      lists_equal(var[f]->peaks, ref[f]->peaks) &&
                                      ref[f]->peaks->n_found >= 15,
                                  "model %d, coef %d, kind %d, cg %d, frame %d: peaks %d, "
                                  "reference %d",
                                  m, coef, k, cg, f, var[f] ? var[f]->peaks->n_found : -1,
                                  ref[f] ? ref[f]->peaks->n_found : -1);
                        faid_result_destroy(&var[f]);
                    }
                }
                unsetenv("FAID_SIGCLIP_LM");
                unsetenv("FAID_SIGCLIP_R");
                unsetenv("FAID_SIGCLIP_WG");
                unsetenv("FAID_PEAKS_FUSED");
                for (int f = 0; f < NFRAMES; f++)
                    faid_result_destroy(&base[f]);
            }
            for (int f = 0; f < NFRAMES; f++)
                faid_result_destroy(&ref[f]);
        }
    }
    faid_dev_info info = {.name = "test device", .max_wg = 256, .local_mem = 49152};
    faid_sigclip_cfg cfg;
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    /* on by default with the default kernel (round 5's H100 runs), chunks of 4 (round 8's) */
    CHECK(cfg.cg == 1 && cfg.cgu == 4 && cfg.lm == 12 && cfg.r == 4 &&
          strstr(cfg.opts, " -D SC_CG=1 -D SC_CGU=4") != NULL);
    /* an explicit share of registers or local memory keeps the kernel it names: off */
    setenv("FAID_SIGCLIP_R", "4", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.cg == 0 && strstr(cfg.opts, "SC_CG") == NULL);
    unsetenv("FAID_SIGCLIP_R");
    setenv("FAID_SIGCLIP_LM", "12", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.cg == 0 && strstr(cfg.opts, "SC_CG") == NULL);
    unsetenv("FAID_SIGCLIP_LM");
    setenv("FAID_SIGCLIP_CG", "0", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.cg == 0 && strstr(cfg.opts, "SC_CG") == NULL);
    setenv("FAID_SIGCLIP_CG", "1", 1);
    setenv("FAID_SIGCLIP_CGU", "4", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.cg == 1 && cfg.cgu == 4 && cfg.lm == 12 && cfg.r == 4 &&
          strstr(cfg.opts, " -D SC_CG=1 -D SC_CGU=4") != NULL);
    unsetenv("FAID_SIGCLIP_CGU");
    /* the padded entries and the poisson variance: 10 fit in 48 KB as without it */
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_POISSON, &cfg, &d) == 0 && cfg.lm == 10);
    setenv("FAID_SIGCLIP_CGU", "8", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(strstr(cfg.opts, " -D SC_CGU=8") != NULL);
    setenv("FAID_SIGCLIP_CGU", "17", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_CGU") != NULL);
    unsetenv("FAID_SIGCLIP_CGU");
    /* 8 in registers with the variance: a staging array of its own (24 KB), too much with 10 */
    setenv("FAID_SIGCLIP_R", "8", 1);
    setenv("FAID_SIGCLIP_LM", "10", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_POISSON, &cfg, &d) == FAID_EUNSUP);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_CG") != NULL);
    unsetenv("FAID_SIGCLIP_R");
    unsetenv("FAID_SIGCLIP_LM");
    /* 2: the tile in the scan's arrays (4 entries a work-item without the variance, 3 with it:
     * LM as with 1), else an array of its own (4 with the variance: 10 no longer fits) */
    setenv("FAID_SIGCLIP_CG", "2", 1);
    setenv("FAID_SIGCLIP_CGU", "4", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0);
    CHECK(cfg.cg == 2 && cfg.lm == 12 && strstr(cfg.opts, " -D SC_CG=2 -D SC_CGU=4") != NULL);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_POISSON, &cfg, &d) == 0 && cfg.lm < 10);
    setenv("FAID_SIGCLIP_CGU", "3", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_POISSON, &cfg, &d) == 0 && cfg.lm == 10);
    /* the default chunks of 4: the tile in the scan's arrays; of 8: an array of its own, a
     * smaller share */
    unsetenv("FAID_SIGCLIP_CGU");
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0 && cfg.cgu == 4 &&
          cfg.lm == 12);
    setenv("FAID_SIGCLIP_CGU", "8", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == 0 && cfg.cgu == 8 &&
          cfg.lm < 12);
    unsetenv("FAID_SIGCLIP_CGU");
    setenv("FAID_SIGCLIP_CG", "3", 1);
    CHECK(faid_sigclip_config(&info, fs.csr, FAID_CLIP_AZIMUTHAL, &cfg, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "FAID_SIGCLIP_CG") != NULL);
    unsetenv("FAID_SIGCLIP_CG");
    free_frames(&fs);
}

/* Round 8's sigma clip options through FAID_PEAKS_KOPTS: SC_AZSEL=1 (the azimuthal recurrence
 * takes every entry through selects instead of a branch per entry) and SC_RAKE=1 and 2 (the
 * raking's values chunk-major in local memory, or padded after each chunk) and SC_FDIV=0 (the
 * gather's owners by the integer division instead of the bin's float reciprocal) and SC_ORDER=1
 * (the work-groups from the largest bin to the smallest, not in bin order), and round 9's
 * SC_ONCE=0 (every work-item computing the pass's mean, std and threshold itself, where the
 * default has work-item 0 compute them for all): the background
 * bit for bit the default's and the lists the reference's, for the models that run the recurrence
 * (azimuthal, hybrid), with each place an entry can live (registers and local memory one at a
 * time with the overflow, the batched overflow walk, the coalesced gather, the register kernel's
 * overflow), with work-groups of 32, 64 and 256 (chunks of 1, 2 and 8 work-items) and with
 * coefficients. */
static void test_sigclip_kopts(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set fs;
    CHECK(make_frames(&fs, 29, 25) == 0);
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PYFAI;
    const faid_clip_model models[] = {FAID_CLIP_AZIMUTHAL, FAID_CLIP_HYBRID};
    static const char *const opts[] = {"-DSC_AZSEL=1", "-DSC_RAKE=1",  "-DSC_RAKE=2",
                                       "-DSC_FDIV=0",  "-DSC_ORDER=1", "-DSC_ONCE=0"};
    /* LM, R, CG, GB, WG of each layout ("" unset: the default kernel) */
    static const char *const kinds[][5] = {{"2", "1", "0", "0", "32"},
                                           {"3", "1", "0", "4", "32"},
                                           {"3", "5", "1", "0", "64"},
                                           {"0", "2", "0", "0", "32"},
                                           {"", "", "", "", "256"}};
    static const char *const knobs[] = {"FAID_SIGCLIP_LM", "FAID_SIGCLIP_R", "FAID_SIGCLIP_CG",
                                        "FAID_SIGCLIP_GB", "FAID_SIGCLIP_WG"};
    for (int m = 0; m < 2; m++) {
        p.error_model = models[m];
        for (int coef = 0; coef < 2; coef++) {
            faid_result *ref[NFRAMES] = {0};
            CHECK_MSG(run_frames_coef(&fs, &p, "ref", coef, ref, &d) == 0, "reference: %s", d.msg);
            for (int k = 0; k < (int)(sizeof kinds / sizeof kinds[0]); k++) {
                if (coef && k != 2 && k != 4)
                    continue;
                setenv("FAID_PEAKS_FUSED", "1", 1);
                for (int e = 0; e < 5; e++)
                    if (kinds[k][e][0])
                        setenv(knobs[e], kinds[k][e], 1);
                faid_result *base[NFRAMES] = {0};
                CHECK_MSG(run_frames_coef(&fs, &p, NULL, coef, base, &d) == 0, "kind %d: %s", k,
                          d.msg);
                for (int o = 0; o < (int)(sizeof opts / sizeof opts[0]); o++) {
                    faid_result *var[NFRAMES] = {0};
                    setenv("FAID_PEAKS_KOPTS", opts[o], 1);
                    CHECK_MSG(run_frames_coef(&fs, &p, NULL, coef, var, &d) == 0, "kind %d, %s: %s",
                              k, opts[o], d.msg);
                    unsetenv("FAID_PEAKS_KOPTS");
                    for (int f = 0; f < NFRAMES; f++) {
                        CHECK_MSG(base[f] && var[f] && bg_same_bits(var[f]->bg, base[f]->bg),
                                  "model %d, coef %d, kind %d, frame %d: %s changed the "
                                  "background",
                                  m, coef, k, f, opts[o]);
                        CHECK_MSG(var[f] && ref[f] && lists_equal(var[f]->peaks, ref[f]->peaks) &&
                                      ref[f]->peaks->n_found >= 15,
                                  "model %d, coef %d, kind %d, frame %d, %s: peaks %d, reference "
                                  "%d",
                                  m, coef, k, f, opts[o], var[f] ? var[f]->peaks->n_found : -1,
                                  ref[f] ? ref[f]->peaks->n_found : -1);
                        faid_result_destroy(&var[f]);
                    }
                }
                for (int f = 0; f < NFRAMES; f++)
                    faid_result_destroy(&base[f]);
                for (int e = 0; e < 5; e++)
                    unsetenv(knobs[e]);
                unsetenv("FAID_PEAKS_FUSED");
            }
            for (int f = 0; f < NFRAMES; f++)
                faid_result_destroy(&ref[f]);
        }
    }
    free_frames(&fs);
}

/* Issue 17 round 6: the sigma clip from a copy of the frame in the background matrix' entry
 * order (FAID_SIGCLIP_PERM=1: made by a scatter in pixel order, 2: by a gather; sigma_clip.cl's
 * SC_PERM, peaks/bg_permute.cl), with the corrections (normp, dark) copied into that order: the
 * background bit for bit the same kernel's without the copy and the peaks the reference's, for
 * the three error models, with and without coefficients and a dark image, in every layout that
 * reads pixels (below); the copy refused without the fused kernels and out of range, naming the
 * variable. */
static void test_sigclip_perm(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set fs;
    CHECK(make_frames(&fs, 23, 25) == 0);
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PYFAI;
    const faid_clip_model models[] = {FAID_CLIP_POISSON, FAID_CLIP_AZIMUTHAL, FAID_CLIP_HYBRID};
    /* LM, R, CG, GB of each layout, so that every place the kernel reads a pixel is taken: the
     * registers and local memory one entry at a time and the overflow (0), the batched gather
     * (1), the coalesced gather (2), the register kernel's overflow in CSR order (3). Every
     * model with 0 and 2 (and coefficients with 2), the azimuthal one with 1 and 3: each
     * combination is an OpenCL build of its own, seconds each on PoCL without its cache. */
    static const char *const kinds[][4] = {
        {"2", "1", "0", "0"}, {"3", "1", "0", "4"}, {"3", "5", "1", "0"}, {"0", "2", "0", "0"}};
    for (int m = 0; m < 3; m++) {
        p.error_model = models[m];
        for (int v = 0; v < 3; v++) {
            const int coef = v == 1, dark = v == 2;
            faid_result *ref[NFRAMES] = {0};
            CHECK_MSG(run_frames_dark(&fs, &p, "ref", coef, dark, ref, &d) == 0, "reference: %s",
                      d.msg);
            for (int k = 0; k < 4; k++) {
                if ((k == 1 || k == 3) && (v || models[m] != FAID_CLIP_AZIMUTHAL))
                    continue;
                if (coef && k != 2)
                    continue;
                faid_result *base[NFRAMES] = {0};
                setenv("FAID_SIGCLIP_WG", "32", 1);
                setenv("FAID_PEAKS_FUSED", "1", 1);
                setenv("FAID_SIGCLIP_LM", kinds[k][0], 1);
                setenv("FAID_SIGCLIP_R", kinds[k][1], 1);
                setenv("FAID_SIGCLIP_CG", kinds[k][2], 1);
                setenv("FAID_SIGCLIP_GB", kinds[k][3], 1);
                CHECK_MSG(run_frames_dark(&fs, &p, NULL, coef, dark, base, &d) == 0, "kind %d: %s",
                          k, d.msg);
                for (int pm = 1; pm <= 2; pm++) {
                    faid_result *var[NFRAMES] = {0};
                    setenv("FAID_SIGCLIP_PERM", pm == 1 ? "1" : "2", 1);
                    CHECK_MSG(run_frames_dark(&fs, &p, NULL, coef, dark, var, &d) == 0,
                              "kind %d, perm %d: %s", k, pm, d.msg);
                    unsetenv("FAID_SIGCLIP_PERM");
                    for (int f = 0; f < NFRAMES; f++) {
                        CHECK_MSG(base[f] && var[f] && bg_same_bits(var[f]->bg, base[f]->bg),
                                  "model %d, coef %d, dark %d, kind %d, perm %d, frame %d: "
                                  "FAID_SIGCLIP_PERM changed the background",
                                  m, coef, dark, k, pm, f);
                        CHECK_MSG(var[f] && ref[f] && bg_worst(var[f]->bg, ref[f]->bg) < 1e-5 &&
                                      lists_equal(var[f]->peaks, ref[f]->peaks) &&
                                      ref[f]->peaks->n_found >= 15,
                                  "model %d, coef %d, dark %d, kind %d, perm %d, frame %d: peaks "
                                  "%d, reference %d",
                                  m, coef, dark, k, pm, f, var[f] ? var[f]->peaks->n_found : -1,
                                  ref[f] ? ref[f]->peaks->n_found : -1);
                        faid_result_destroy(&var[f]);
                    }
                }
                unsetenv("FAID_SIGCLIP_LM");
                unsetenv("FAID_SIGCLIP_R");
                unsetenv("FAID_SIGCLIP_CG");
                unsetenv("FAID_SIGCLIP_GB");
                unsetenv("FAID_SIGCLIP_WG");
                unsetenv("FAID_PEAKS_FUSED");
                for (int f = 0; f < NFRAMES; f++)
                    faid_result_destroy(&base[f]);
            }
            for (int f = 0; f < NFRAMES; f++)
                faid_result_destroy(&ref[f]);
        }
    }
    /* refused: without the fused kernels, and out of range */
    faid_result *out[NFRAMES] = {0};
    setenv("FAID_PEAKS_FUSED", "0", 1);
    setenv("FAID_SIGCLIP_PERM", "1", 1);
    CHECK(run_frames(&fs, &p, NULL, out, &d) != 0 && strstr(d.msg, "FAID_SIGCLIP_PERM") != NULL);
    unsetenv("FAID_PEAKS_FUSED");
    setenv("FAID_SIGCLIP_PERM", "3", 1);
    CHECK(run_frames(&fs, &p, NULL, out, &d) != 0 && strstr(d.msg, "FAID_SIGCLIP_PERM") != NULL);
    unsetenv("FAID_SIGCLIP_PERM");
    for (int f = 0; f < NFRAMES; f++)
        faid_result_destroy(&out[f]);
    free_frames(&fs);
}

/* 1 when an OpenCL engine with environment variable var = val refuses s or frame f with an
 * error naming var. */
static int engine_refused(faid_setup *s, const char *dev, const char *var, const char *val,
                          const faid_frame *f, faid_result *r)
{
    faid_diag d = {0};
    setenv(var, val, 1);
    faid_engine *e = faid_engine_new(s, dev, &d);
    int rc = e ? faid_engine_process(e, f, r, &d) : -1;
    unsetenv(var);
    faid_engine_destroy(&e);
    return rc != 0 && strstr(d.msg, var) != NULL;
}

/* The peak stages through the engine: the OpenCL device (its defaults since issue 17's GPU run:
 * fused, the local-memory sigma clip where it fits, peakfinder8's hash and local candidates) and
 * the reference device give the same background (float64 rounding), the same peak list and the
 * same hit decision for each finder; so do the kernels before that run, selected explicitly
 * (FAID_PEAKS_FUSED=0, FAID_SIGCLIP_LM=0, FAID_PEAKS_KOPTS=-DPF8_HASH=0,-DPF8_LOCAL_CAND=0),
 * whose background is bit for bit the default's, and FAID_PEAKS_FUSED=1 with the register kernel
 * (uint32 and uint16 frames), and peakfinder8's kernel variants (FAID_PEAKS_KOPTS: the fill's hash
 * table from the second queued pixel on, candidates compacted in local memory;
 * FAID_PF8_FILL_GROUPS=1: one work-group walks every candidate); malformed values of these
 * variables and of round 4's FAID_PF8_MERGE, FAID_PF8_GATHER, FAID_PF8_CANDFILL and FAID_PF8_NOPREP
 * are refused, naming them. */
static void test_engine_devices(void)
{
    static const char *const algs[] = {"pyfai", "peakfinder8"};
    for (int a = 0; a < 2; a++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 "detector:\n  preset: null\n  shape: [256, 320]\n  pixel_size: [1.0e-4, 1.0e-4]\n"
                 "geometry:\n  dist: 0.1\n  poni1: 0.0131\n  poni2: 0.0157\n  rot1: 0.02\n"
                 "integration:\n  npt: 200\n  error_model: azimuthal\n"
                 "peaks:\n  algorithm: %s\n  adc_threshold: 40\n  min_peaks_for_hit: 5\n",
                 algs[a]);
        faid_config cfg;
        faid_config_default(&cfg);
        faid_diag d;
        CHECK_MSG(faid_config_load_string(yaml, strlen(yaml), "test", &cfg, &d) == 0, "%s", d.msg);
        faid_setup *s = faid_setup_new(&cfg, 1, &d);
        CHECK_MSG(s != NULL, "%s", d.msg);
        if (!s)
            return;
        faid_engine *ecl =
            faid_engine_new(s, getenv("FAID_TEST_DEVICE") ? getenv("FAID_TEST_DEVICE") : "cpu", &d);
        if (!ecl) {
            printf("test_peaks: no OpenCL engine (%s), engine stages not compared\n", d.msg);
            faid_setup_destroy(&s);
            return;
        }
        faid_engine *eref = faid_engine_new(s, "ref", &d);
        CHECK_MSG(eref != NULL, "%s", d.msg);
        const char *dev = getenv("FAID_TEST_DEVICE") ? getenv("FAID_TEST_DEVICE") : "cpu";
        /* the kernels before issue 17's GPU run, selected explicitly */
        setenv("FAID_PEAKS_FUSED", "0", 1);
        setenv("FAID_SIGCLIP_LM", "0", 1);
        setenv("FAID_PEAKS_KOPTS", "-DPF8_HASH=0,-DPF8_LOCAL_CAND=0", 1);
        faid_engine *eold = faid_engine_new(s, dev, &d);
        unsetenv("FAID_PEAKS_FUSED");
        unsetenv("FAID_SIGCLIP_LM");
        unsetenv("FAID_PEAKS_KOPTS");
        CHECK_MSG(eold != NULL, "old kernels: %s", d.msg);
        setenv("FAID_PEAKS_FUSED", "1", 1);
        setenv("FAID_SIGCLIP_LM", "0", 1);
        faid_engine *efz = faid_engine_new(s, dev, &d);
        unsetenv("FAID_PEAKS_FUSED");
        unsetenv("FAID_SIGCLIP_LM");
        CHECK_MSG(efz != NULL, "fused: %s", d.msg);
        setenv("FAID_PEAKS_KOPTS", "-D PF8_HASH=1 -DPF8_HSTART=2,-DPF8_LOCAL_CAND=1", 1);
        setenv("FAID_PF8_FILL_GROUPS", "1", 1);
        faid_engine *ekv = faid_engine_new(s, dev, &d);
        unsetenv("FAID_PEAKS_KOPTS");
        unsetenv("FAID_PF8_FILL_GROUPS");
        CHECK_MSG(ekv != NULL, "kernel variants: %s", d.msg);
        faid_synth_params sp;
        faid_synth_default_params(&sp);
        sp.nspots = 20;
        sp.spot_amplitude = 2000.0;
        faid_synth *sy = faid_synth_new(&s->geom, s->mask, &sp, &d);
        size_t n = s->npix;
        uint32_t *raw = malloc(n * sizeof(uint32_t));
        faid_result *rc = faid_result_new(s), *rr = faid_result_new(s), *rf = faid_result_new(s);
        if (eref && eold && efz && ekv && sy && raw && rc && rr && rf) {
            for (uint64_t k = 0; k < 3; k++) {
                const faid_dtype dt = k == 2 ? FAID_DT_U16 : FAID_DT_U32;
                const size_t nb = n * faid_dtype_size(dt);
                CHECK(faid_synth_frame(sy, k, dt, raw, nb, &d) == 0);
                faid_frame f = {raw, nb, FAID_ENC_NONE, dt, s->rows, s->cols};
                CHECK_MSG(faid_engine_process(ecl, &f, rc, &d) == 0, "%s", d.msg);
                CHECK_MSG(faid_engine_process(eref, &f, rr, &d) == 0, "%s", d.msg);
                CHECK_MSG(faid_engine_process(eold, &f, rf, &d) == 0, "old: %s", d.msg);
                CHECK_MSG(bg_same_bits(rf->bg, rc->bg),
                          "%s frame %d: the default background differs from the old kernels'",
                          algs[a], (int)k);
                CHECK_MSG(lists_equal(rf->peaks, rr->peaks), "%s frame %d, old: %d / %d peaks",
                          algs[a], (int)k, rf->peaks->n_found, rr->peaks->n_found);
                CHECK_MSG(faid_engine_process(efz, &f, rf, &d) == 0, "fused: %s", d.msg);
                CHECK_MSG(bg_same_bits(rf->bg, rc->bg), "%s frame %d: fused background differs",
                          algs[a], (int)k);
                CHECK_MSG(lists_equal(rf->peaks, rr->peaks), "%s frame %d, fused: %d / %d peaks",
                          algs[a], (int)k, rf->peaks->n_found, rr->peaks->n_found);
                CHECK_MSG(faid_engine_process(ekv, &f, rf, &d) == 0, "variants: %s", d.msg);
                CHECK_MSG(lists_equal(rf->peaks, rr->peaks),
                          "%s frame %d, kernel variants: %d / %d peaks", algs[a], (int)k,
                          rf->peaks->n_found, rr->peaks->n_found);
                if (k == 0) {
                    CHECK(engine_refused(s, dev, "FAID_PEAKS_FUSED", "2", &f, rf));
                    CHECK(engine_refused(s, dev, "FAID_PEAKS_KOPTS", "-D PF8_HASH=1;", &f, rf));
                    CHECK(engine_refused(s, dev, "FAID_PF8_FILL_GROUPS", "0", &f, rf));
                    CHECK(engine_refused(s, dev, "FAID_PF8_MERGE", "2", &f, rf));
                    CHECK(engine_refused(s, dev, "FAID_PF8_GATHER", "yes", &f, rf));
                    CHECK(engine_refused(s, dev, "FAID_PF8_CANDFILL", "-1", &f, rf));
                    CHECK(engine_refused(s, dev, "FAID_PF8_NOPREP", "on", &f, rf));
                }
                double w = bg_worst(rc->bg, rr->bg);
                CHECK_MSG(w < 1e-5, "%s frame %d: background differs by %g", algs[a], (int)k, w);
                CHECK_MSG(lists_equal(rc->peaks, rr->peaks), "%s frame %d: %d / %d peaks", algs[a],
                          (int)k, rc->peaks->n_found, rr->peaks->n_found);
                CHECK(rc->num_peaks == rr->num_peaks && rc->is_hit == rr->is_hit);
                CHECK_MSG(rr->num_peaks >= 10 && rr->is_hit, "%s: %d peaks", algs[a],
                          rr->num_peaks);
            }
        }
        free(raw);
        faid_result_destroy(&rc);
        faid_result_destroy(&rr);
        faid_result_destroy(&rf);
        faid_engine_destroy(&eold);
        faid_engine_destroy(&efz);
        faid_engine_destroy(&ekv);
        faid_synth_destroy(&sy);
        faid_engine_destroy(&ecl);
        faid_engine_destroy(&eref);
        faid_setup_destroy(&s);
    }
}

/* Adds a spot of amplitude amp (3 x 3 pixels around (r, c), sigma 0.8 pixel) to every frame of
 * fs, leaving masked pixels as they are. */
static void plant(frame_set *fs, int r, int c, float amp)
{
    const int rows = fs->g.rows, cols = fs->g.cols;
    for (int k = 0; k < NFRAMES; k++)
        for (int i = -1; i <= 1; i++)
            for (int j = -1; j <= 1; j++) {
                if (r + i < 0 || r + i >= rows || c + j < 0 || c + j >= cols)
                    continue;
                const size_t q = (size_t)(r + i) * (size_t)cols + (size_t)(c + j);
                if (!fs->mask[q])
                    fs->raw[k][q] += amp * expf(-(float)(i * i + j * j) / (2.0f * 0.64f));
            }
}

/* The host's reading of FAID_PEAKS_KOPTS (faid_stage_peaks_kopt): the value the kernels' build
 * sees, so that a launch plan or a buffer that follows a kernel option matches it. A bare -DNAME
 * is 1 to the preprocessor; read as 0 (as before round 9), -DPP_CAND,-DPP_MERGE built the
 * merged kernels under the other launch plan and faid-bench crashed. */
static void test_kopt_values(void)
{
    faid_peak_setup ps;
    memset(&ps, 0, sizeof ps);
    static const struct {
        const char *kopts, *name;
        int want;
    } cases[] = {
        {"", "SC_ORDER", 0},
        {"-DSC_ORDER=1", "SC_ORDER", 1},
        {"-D SC_ORDER=3", "SC_ORDER", 3},
        {"-DSC_ORDER=0", "SC_ORDER", 0},
        {"-DSC_ORDER", "SC_ORDER", 1},
        {"-DPP_CAND -DPP_MERGE", "PP_CAND", 1},
        {"-DPP_CAND -DPP_MERGE", "PP_MERGE", 1},
        {"-DPP_CAND_PF=1", "PP_CAND", 0}, /* another name that begins the same */
        {"-DXSC_ORDER=1", "SC_ORDER", 0}, /* another name that ends the same */
        {"-DPF8_BAND=4 -DSC_ONCE=0", "PF8_BAND", 4},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        snprintf(ps.kopts, sizeof ps.kopts, "%s", cases[i].kopts);
        const int got = faid_stage_peaks_kopt(&ps, cases[i].name);
        CHECK_MSG(got == cases[i].want, "'%s': %s = %d, expected %d", cases[i].kopts, cases[i].name,
                  got, cases[i].want);
    }
}

/* The picker's candidates first (FAID_PEAKS_KOPTS=-DPP_CAND=1, issue 17 round 5: faid_pick_flag
 * decides the first test of every pixel, then the patch test of its candidates; faid_pick_write
 * reads each span's sorted list of peaks instead of ranking its flags), with and without its
 * loads issued at once (PP_CAND_PF), fused and from the preprocessed copy, patch 3 and 5: lists
 * bit for bit the reference's on frames with spots planted at the spans' borders (1,024
 * positions: PK_WG 256 x PK_PPI 4; first and last position of a span, a patch across one), the
 * image's borders and corners, next to masked pixels and on both sides of the module gap
 * (columns 150-152), a row of 64 spots (spans holding many peaks, each found in any order in
 * the candidates' list), and a list cut at its capacity inside a span (max_num_peaks 40); and
 * the scan merged into the write (-DPP_MERGE=1: each span's offset and the total found there),
 * with and without PP_CAND. It failed (checks failed of 96) with the write reading a span's
 * list backwards (8), the flag pass skipping its last row of candidates (8), one work-item's
 * peaks ranked one too far (6), PP_MERGE's total missing the last span (6) and its offsets one
 * too far (6). */
static void test_pick_cand(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set fs;
    CHECK(make_frames(&fs, 31, 12) == 0);
    /* (row, col, 1 when a peak): spans' first and last positions (1024, 2047, 3072, 4095 and
     * a patch across 6144), the image's borders and corners (on the border: candidates whose
     * patch leaves the image, never peaks; 2 pixels in: peaks whose 5 x 5 patch reaches the
     * border), next to the masked pixels 5000 (row 15, column 200) and 40000 (row 125, column
     * 0: in the 5 x 5 patch of (124, 2)), both sides of the module gap */
    static const int sites[][3] = {
        {3, 64, 1},    {6, 127, 1},   {9, 192, 1},  {12, 255, 1},  {19, 63, 1},
        {0, 10, 0},    {255, 300, 0}, {100, 0, 0},  {120, 319, 0}, {0, 0, 0},
        {255, 319, 0}, {128, 0, 0},   {2, 40, 1},   {253, 40, 1},  {40, 2, 1},
        {44, 317, 1},  {15, 201, 1},  {16, 198, 1}, {124, 2, 1},   {50, 149, 1},
        {60, 153, 1},  {70, 148, 1},  {80, 154, 1}, {203, 191, 1}, {207, 196, 1},
    };
    const int nsites = (int)(sizeof sites / sizeof sites[0]);
    for (int t = 0; t < nsites; t++)
        plant(&fs, sites[t][0], sites[t][1], 3000.0f);
    for (int c = 2; c < 320; c += 5) /* row 230: 64 spots, 15 spans' worth of positions */
        plant(&fs, 230, c, 1500.0f + 10.0f * (float)c);
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PYFAI;
    p.error_model = FAID_CLIP_AZIMUTHAL;
    /* build options, fused, patch_size, max_num_peaks */
    static const struct {
        const char *kopts, *fused;
        int patch, cap;
    } cases[] = {
        {"-DPP_CAND=1", "1", 3, 2048},
        {"-DPP_CAND=1,-DPP_CAND_PF=1", "1", 5, 2048},
        {"-DPP_CAND=1,-DPP_MERGE=1", "0", 3, 2048},
        {"-DPP_CAND=1,-DPP_CAND_PF=1,-DPP_MERGE=1", "0", 5, 40},
        {"-DPP_MERGE=1", "1", 5, 40}, /* the scan merged into the write that ranks flags */
    };
    for (int v = 0; v < (int)(sizeof cases / sizeof cases[0]); v++) {
        p.patch_size = cases[v].patch;
        p.max_num_peaks = cases[v].cap;
        faid_result *ref[NFRAMES] = {0}, *var[NFRAMES] = {0};
        CHECK_MSG(run_frames(&fs, &p, "ref", ref, &d) == 0, "reference: %s", d.msg);
        /* the planted sites the reference calls peaks (within a pixel) as the table says */
        int planted = 0;
        for (int t = 0; t < nsites && ref[0] && p.max_num_peaks > 1000; t++) {
            const faid_peak_list *l = ref[0]->peaks;
            int hit = 0;
            for (int q = 0; q < l->n && !hit; q++) {
                const int r = l->index[q] / fs.g.cols, c = l->index[q] % fs.g.cols;
                hit = abs(r - sites[t][0]) <= 1 && abs(c - sites[t][1]) <= 1;
            }
            planted += hit == sites[t][2];
            CHECK_MSG(hit == sites[t][2], "case %d: site (%d, %d) %s", v, sites[t][0], sites[t][1],
                      hit ? "a peak" : "not a peak");
        }
        setenv("FAID_PEAKS_KOPTS", cases[v].kopts, 1);
        setenv("FAID_PEAKS_FUSED", cases[v].fused, 1);
        CHECK_MSG(run_frames(&fs, &p, NULL, var, &d) == 0, "%s: %s", cases[v].kopts, d.msg);
        unsetenv("FAID_PEAKS_KOPTS");
        unsetenv("FAID_PEAKS_FUSED");
        if (getenv("FAID_TEST_VERBOSE"))
            printf("pick_cand %d: %d peaks, %d of %d planted sites as expected\n", v,
                   ref[0] ? ref[0]->peaks->n_found : -1, planted, nsites);
        for (int f = 0; f < NFRAMES; f++) {
            CHECK_MSG(var[f] && ref[f] && lists_equal(var[f]->peaks, ref[f]->peaks) &&
                          ref[f]->peaks->n_found >= 70,
                      "case %d (%s, patch %d, cap %d), frame %d: peaks %d/%d, reference %d/%d", v,
                      cases[v].kopts, p.patch_size, p.max_num_peaks, f,
                      var[f] ? var[f]->peaks->n : -1, var[f] ? var[f]->peaks->n_found : -1,
                      ref[f] ? ref[f]->peaks->n : -1, ref[f] ? ref[f]->peaks->n_found : -1);
            faid_result_destroy(&var[f]);
            faid_result_destroy(&ref[f]);
        }
    }
    free_frames(&fs);
}

/* peakfinder8's prep variants of issue 17 round 5 (FAID_PEAKS_KOPTS): 4 pixels per work-item
 * with their loads issued at once (-DPF8_PREP4=1, a quarter of the work-items) and a band of R
 * rows per work-group, cval stored in the bins' order from local memory (-DPF8_BAND=R, its
 * tables built by the host), fused and from the preprocessed copy, and with the radial pass
 * gathering from img (FAID_PF8_GATHER=1, where the band is moot): lists bit for bit the
 * reference's on a 250 x 317 frame (79,250 pixels: the last work-group of PREP4 runs past the
 * end, the last band of 3 rows holds one) with 60 spots and the module gap, and on dense noise
 * peaks; a band past the limits is refused, named. It failed (checks failed of 34) with PREP4
 * skipping each work-item's last pixel (8) and with a band's stores skipping its last entry
 * (4). */
static void test_pf8_prep4(void)
{
    if (!have_cl())
        return;
    faid_diag d;
    frame_set sp;
    CHECK(make_frames_sized(&sp, 23, 60, 250, 317) == 0);
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.algorithm = FAID_PEAKS_PEAKFINDER8;
    static const struct {
        const char *kopts, *fused, *gather;
    } v[] = {
        {"-DPF8_PREP4=1", "1", "0"}, {"-DPF8_PREP4=1", "0", "1"},
        {"-DPF8_BAND=3", "1", "0"},  {"-DPF8_BAND=1,-DPF8_PREP4=1", "0", "0"},
        {"-DPF8_BAND=3", "1", "1"},
    };
    const int nv = (int)(sizeof v / sizeof v[0]);
    for (int dense = 0; dense < 2; dense++) {
        p.adc_threshold = dense ? 0.0 : 50.0;
        p.minimum_snr = dense ? 1.0 : p.minimum_snr;
        p.min_pixel_count = dense ? 1 : p.min_pixel_count;
        faid_result *ref[NFRAMES] = {0};
        CHECK_MSG(run_frames(&sp, &p, "ref", ref, &d) == 0, "reference: %s", d.msg);
        for (int k = 0; k < nv; k++) {
            faid_result *var[NFRAMES] = {0};
            setenv("FAID_PEAKS_KOPTS", v[k].kopts, 1);
            setenv("FAID_PEAKS_FUSED", v[k].fused, 1);
            setenv("FAID_PF8_GATHER", v[k].gather, 1);
            CHECK_MSG(run_frames(&sp, &p, NULL, var, &d) == 0, "%s: %s", v[k].kopts, d.msg);
            unsetenv("FAID_PEAKS_KOPTS");
            unsetenv("FAID_PEAKS_FUSED");
            unsetenv("FAID_PF8_GATHER");
            for (int f = 0; f < NFRAMES; f++) {
                CHECK_MSG(var[f] && ref[f] && lists_equal(var[f]->peaks, ref[f]->peaks) &&
                              ref[f]->peaks->n_found > (dense ? 300 : 20),
                          "%s, fused %s, gather %s, %s, frame %d: peaks %d, reference %d",
                          v[k].kopts, v[k].fused, v[k].gather, dense ? "dense" : "spots", f,
                          var[f] ? var[f]->peaks->n_found : -1,
                          ref[f] ? ref[f]->peaks->n_found : -1);
                faid_result_destroy(&var[f]);
            }
        }
        for (int f = 0; f < NFRAMES; f++)
            faid_result_destroy(&ref[f]);
    }
    /* 300 rows of 317 pixels: more than a ushort's places in a band */
    faid_result *bad[NFRAMES] = {0};
    setenv("FAID_PEAKS_KOPTS", "-DPF8_BAND=300", 1);
    CHECK(run_frames(&sp, &p, NULL, bad, &d) != 0 && strstr(d.msg, "PF8_BAND=300") != NULL);
    unsetenv("FAID_PEAKS_KOPTS");
    for (int f = 0; f < NFRAMES; f++)
        faid_result_destroy(&bad[f]);
    free_frames(&sp);
}

int main(void)
{
    RUN(test_params());
    RUN(test_lists());
    RUN(test_hits());
    RUN(test_kernels());
    RUN(test_sigclip_overflow());
    RUN(test_sigclip_local());
    RUN(test_pf8_variants());
    RUN(test_round3_variants());
    RUN(test_sigclip_cg());
    RUN(test_sigclip_perm());
    RUN(test_sigclip_kopts());
    RUN(test_kopt_values());
    RUN(test_pick_cand());
    RUN(test_pf8_prep4());
    engines_close();
    RUN(test_engine_devices());
    return faid_test_finish();
}
