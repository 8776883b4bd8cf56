/* peaks_driver: a small program run by tests/reference/test_peaks.py. It builds the 1D matrix of a
 * PONI geometry (no pixel splitting), preprocesses one frame with the reference code (Poisson
 * variance), computes the sigma-clipped background and, when asked, runs a peak finder
 * (faid_pick_ref or faid_pf8_ref), and writes every result as .npy into an output folder so the
 * test can compare them with pyFAI and OM. With "opencl DEVICE" the background also comes from the
 * OpenCL kernels through the engine's stage path, as production runs them: a setup of the same
 * detector, geometry, mask and corrections, its background matrix replaced by the one used here
 * (pyFAI's when given), the frame reduced by an engine on DEVICE; those results are written with
 * the suffix "_cl".
 *
 * Usage: peaks_driver PARAMS OUTDIR, PARAMS holding "key value" lines (see the test). */
#include "driver_params.h"
#include "faid_config.h"
#include "faid_csr.h"
#include "faid_engine.h"
#include "faid_geometry.h"
#include "faid_npy.h"
#include "faid_pf8.h"
#include "faid_pick.h"
#include "faid_reduce.h"
#include "faid_setup.h"
#include "faid_sigclip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void save_peaks(const char *dir, const faid_peak_list *l)
{
    size_t n = (size_t)l->n;
    save(dir, "peak_x", FAID_DT_F32, n, l->x);
    save(dir, "peak_y", FAID_DT_F32, n, l->y);
    save(dir, "peak_intensity", FAID_DT_F32, n, l->intensity);
    save(dir, "peak_sigma", FAID_DT_F32, n, l->sigma);
    save(dir, "peak_snr", FAID_DT_F32, n, l->snr);
    save(dir, "peak_max_pixel", FAID_DT_F32, n, l->max_pixel);
    save(dir, "peak_npix", FAID_DT_I32, n, l->npix);
    save(dir, "peak_index", FAID_DT_I32, n, l->index);
    int32_t nf = l->n_found;
    save(dir, "peak_n_found", FAID_DT_I32, 1, &nf);
}

static void die(const char *what, const faid_diag *d)
{
    fprintf(stderr, "%s: %s\n", what, d->msg);
    exit(1);
}

static void *dup_or_die(const void *src, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(3);
    }
    memcpy(p, src, bytes);
    return p;
}

/* The background of `frame` (float32) on the OpenCL device `device` through the engine: the setup
 * of geometry g, mask, unit, npt, solid angle and peak parameters p, its background matrix made
 * equal to csr. */
static faid_background *engine_background(const char *device, const faid_geometry *g,
                                          const uint8_t *mask, const char *unit,
                                          const faid_csr *csr, const faid_peak_params *p,
                                          const float *frame)
{
    faid_diag d = {0};
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "detector:\n  preset: null\n  shape: [%d, %d]\n  pixel_size: [%.17g, %.17g]\n"
             "  orientation: %d\n"
             "geometry:\n  dist: %.17g\n  poni1: %.17g\n  poni2: %.17g\n  rot1: %.17g\n"
             "  rot2: %.17g\n  rot3: %.17g\n  wavelength: %.17g\n"
             "integration:\n  npt: %d\n  unit: %s\n  split: no\n  solid_angle: %s\n"
             "  error_model: poisson\n  empty: %.17g\n",
             g->rows, g->cols, g->pixel1, g->pixel2, g->orientation, g->dist, g->poni1, g->poni2,
             g->rot1, g->rot2, g->rot3, g->wavelength, csr->nbins, unit,
             getd("solid_angle", 0) != 0 ? "true" : "false", getd("empty", 0.0));
    faid_config cfg;
    faid_config_default(&cfg);
    if (faid_config_load_string(yaml, strlen(yaml), "peaks_driver", &cfg, &d))
        die("engine configuration", &d);
    cfg.peaks = *p;
    cfg.peaks.algorithm = FAID_PEAKS_PYFAI; /* the background stage runs with a finder only */
    faid_setup *s = faid_setup_new_masked(&cfg, 1, mask, &d);
    if (!s)
        die("engine setup", &d);
    faid_csr *m = s->csr_bg;
    if (!m || m->nbins != csr->nbins)
        die("engine background matrix", &d);
    free(m->indptr);
    free(m->indices);
    free(m->data);
    m->indptr = dup_or_die(csr->indptr, ((size_t)csr->nbins + 1) * sizeof(int32_t));
    m->indices = dup_or_die(csr->indices, (size_t)csr->nnz * sizeof(int32_t));
    m->data = csr->data ? dup_or_die(csr->data, (size_t)csr->nnz * sizeof(float)) : NULL;
    m->nnz = csr->nnz;
    faid_engine *e = faid_engine_new(s, device, &d);
    if (!e)
        die("engine", &d);
    faid_result *r = faid_result_new(s);
    faid_frame f = {frame, s->npix * sizeof(float), FAID_ENC_NONE, FAID_DT_F32, s->rows, s->cols};
    if (!r || faid_engine_process(e, &f, r, &d))
        die("engine background", &d);
    faid_background *bg = faid_background_new(csr->nbins);
    if (!bg)
        die("engine background", &d);
    size_t nb = (size_t)csr->nbins * sizeof(float);
    memcpy(bg->mean, r->bg->mean, nb);
    memcpy(bg->std, r->bg->std, nb);
    memcpy(bg->sem, r->bg->sem, nb);
    memcpy(bg->count, r->bg->count, nb);
    faid_result_destroy(&r);
    faid_engine_destroy(&e);
    faid_setup_destroy(&s);
    return bg;
}

int main(int argc, char **argv)
{
    const char *out = driver_start(argc, argv, "peaks_driver");
    if (!out)
        return 2;
    faid_diag d = {0};

    faid_geometry g = {0};
    driver_poni(&g);
    g.rows = (int)getd("rows", 0);
    g.cols = (int)getd("cols", 0);
    g.orientation = 3;
    size_t npix = (size_t)g.rows * (size_t)g.cols;
    faid_array am = {0}, af = {0}, ar = {0};
    const uint8_t *mask = load("mask", FAID_DT_U8, npix, &am);
    const float *frame = load("frame", FAID_DT_F32, npix, &af);
    if (!frame) {
        fprintf(stderr, "frame (float32 .npy) required\n");
        return 2;
    }

    faid_csr_params cp = {0};
    cp.split = FAID_SPLIT_NO;
    if (faid_unit_parse(get("unit") ? get("unit") : "q_nm^-1", &cp.unit)) {
        fprintf(stderr, "bad unit\n");
        return 2;
    }
    cp.npt_rad = (int)getd("npt", 100);
    faid_csr *csr = NULL;
    if (faid_csr_build(&g, mask, &cp, &csr, &d))
        die("csr", &d);
    faid_array aip = {0}, aix = {0};
    if (get("csr_indptr")) {
        /* pyFAI's own matrix, to compare the clipping alone. */
        const int32_t *ip = load("csr_indptr", FAID_DT_I32, (size_t)csr->nbins + 1, &aip);
        const char *path = get("csr_indices");
        if (!path || faid_npy_read(path, &aix, &d) || aix.dtype != FAID_DT_I32 ||
            aix.count != (size_t)ip[csr->nbins])
            die("csr_indices", &d);
        memcpy(csr->indptr, ip, ((size_t)csr->nbins + 1) * sizeof(int32_t));
        free(csr->indices);
        csr->indices = aix.data;
        aix.data = NULL;
        csr->nnz = ip[csr->nbins];
        free(csr->data);
        csr->data = NULL;
    }

    faid_corrections c = {0};
    c.npix = npix;
    c.mask = mask;
    c.normalization_factor = 1.0f;
    c.error_model = FAID_EM_POISSON;
    float *sa = NULL;
    if (getd("solid_angle", 0) != 0) {
        double *tmp = malloc(npix * sizeof(double));
        sa = malloc(npix * sizeof(float));
        faid_geometry_solid_angle(&g, tmp);
        for (size_t i = 0; i < npix; i++)
            sa[i] = (float)tmp[i];
        free(tmp);
        c.solid_angle = sa;
    }
    float *pre = malloc(npix * 4 * sizeof(float));
    if (!pre || faid_ref_preprocess(&c, FAID_DT_F32, frame, pre, &d))
        die("preprocess", &d);

    faid_peak_params p;
    faid_peak_params_default(&p);
    p.cutoff_clip = getd("cutoff_clip", p.cutoff_clip);
    p.cycles = (int)getd("cycles", p.cycles);
    if (get("error_model") && faid_clip_model_parse(get("error_model"), &p.error_model)) {
        fprintf(stderr, "bad error model\n");
        return 2;
    }
    p.noise = getd("noise", p.noise);
    p.cutoff_peak = getd("cutoff_peak", p.cutoff_peak);
    p.patch_size = (int)getd("patch_size", p.patch_size);
    p.connected = (int)getd("connected", p.connected);
    p.adc_threshold = getd("adc_threshold", p.adc_threshold);
    p.minimum_snr = getd("minimum_snr", p.minimum_snr);
    p.min_pixel_count = (int)getd("min_pixel_count", p.min_pixel_count);
    p.max_pixel_count = (int)getd("max_pixel_count", p.max_pixel_count);
    p.local_bg_radius = (int)getd("local_bg_radius", p.local_bg_radius);
    p.min_res = getd("min_res", p.min_res);
    p.max_res = getd("max_res", p.max_res);
    p.max_num_peaks = (int)getd("max_num_peaks", p.max_num_peaks);
    if (faid_peak_params_check(&p, &d))
        die("params", &d);

    faid_background *bg = faid_background_new(csr->nbins);
    if (!bg || faid_sigclip_ref(csr, pre, &p, (float)getd("empty", 0.0), bg, NULL, &d))
        die("sigma clip", &d);
    size_t nb = (size_t)csr->nbins;
    save(out, "bg_mean", FAID_DT_F32, nb, bg->mean);
    save(out, "bg_std", FAID_DT_F32, nb, bg->std);
    save(out, "bg_sem", FAID_DT_F32, nb, bg->sem);
    save(out, "bg_count", FAID_DT_F32, nb, bg->count);
    save(out, "rad_centers", FAID_DT_F64, (size_t)csr->npt_rad, csr->rad_centers);

    if (get("opencl")) {
        faid_background *bc = engine_background(
            get("opencl"), &g, mask, get("unit") ? get("unit") : "q_nm^-1", csr, &p, frame);
        save(out, "bg_mean_cl", FAID_DT_F32, nb, bc->mean);
        save(out, "bg_std_cl", FAID_DT_F32, nb, bc->std);
        save(out, "bg_sem_cl", FAID_DT_F32, nb, bc->sem);
        save(out, "bg_count_cl", FAID_DT_F32, nb, bc->count);
        faid_background_destroy(&bc);
    }

    const char *alg = get("algorithm");
    if (alg && strcmp(alg, "none")) {
        faid_peak_geom *pg = faid_peak_geom_new(
            &g, mask, csr, cp.unit, &p, (int)getd("panel_rows", 0), (int)getd("panel_cols", 0), &d);
        if (!pg)
            die("geometry", &d);
        const float *rpx = load("radius_px", FAID_DT_F32, npix, &ar);
        if (rpx)
            for (size_t i = 0; i < npix; i++) {
                pg->radius_px[i] = rpx[i];
                pg->valid[i] = (!mask || !mask[i]) && rpx[i] >= p.min_res && rpx[i] <= p.max_res;
            }
        faid_peak_list *l = faid_peak_list_new(p.max_num_peaks);
        if (!l)
            return 3;
        if (!strcmp(alg, "pyfai")) {
            if (faid_pick_ref(pg, pre, bg, &p, l, &d))
                die("pick", &d);
        } else {
            faid_pf8_bins *b = faid_pf8_bins_new(pg, &d);
            if (!b || faid_pf8_ref(pg, b, pre, &p, l, &d))
                die("peakfinder8", &d);
            faid_pf8_bins_destroy(&b);
        }
        save_peaks(out, l);
        faid_peak_list_destroy(&l);
        faid_peak_geom_destroy(&pg);
        faid_array_free(&ar);
    }
    faid_background_destroy(&bg);
    faid_csr_destroy(&csr);
    free(pre);
    free(sa);
    faid_array_free(&am);
    faid_array_free(&aip);
    faid_array_free(&af);
    return 0;
}
