/* faid_peaks: defaults, checks and names of the peak parameters; allocation of peak lists and
 * background profiles (types described in faid_peaks.h). */
#include "faid_peaks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const faid_peak_algorithm_names[] = {"none", "pyfai", "peakfinder8", NULL};
const char *const faid_clip_model_names[] = {"poisson", "azimuthal", "hybrid", NULL};

/* Names in a NULL-terminated table. */
#define NAMES_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

void faid_peak_params_default(faid_peak_params *p)
{
    memset(p, 0, sizeof(*p));
    p->algorithm = FAID_PEAKS_NONE;
    p->cutoff_clip = 0.0;
    p->cycles = 5;
    /* Poisson variance is far too small for picking on real frames (pyFAI's own finder then
     * reports thousands of noise peaks on rings): the azimuthal spread is the safe default. */
    p->error_model = FAID_CLIP_AZIMUTHAL;
    p->noise = 1.0;
    p->cutoff_peak = 3.0;
    p->patch_size = 3;
    p->connected = 2;
    p->adc_threshold = 100.0;
    p->minimum_snr = 5.0;
    p->min_pixel_count = 2;
    p->max_pixel_count = 200;
    p->local_bg_radius = 3;
    p->min_res = 0.0;
    p->max_res = 1200.0;
    p->max_num_peaks = 2048;
    p->min_peaks_for_hit = 10;
    p->has_max_peaks_for_hit = 0;
    p->max_peaks_for_hit = 0;
    p->hit_rate_window = 200;
}

int faid_peak_params_check(const faid_peak_params *p, faid_diag *d)
{
    if (!p)
        return faid_fail(d, FAID_EINVAL, "peaks: missing parameters");
    if ((int)p->algorithm < 0 || (int)p->algorithm >= NAMES_LEN(faid_peak_algorithm_names))
        return faid_fail(d, FAID_ECONFIG, "peaks.algorithm: unknown value %d", (int)p->algorithm);
    if ((int)p->error_model < 0 || (int)p->error_model >= NAMES_LEN(faid_clip_model_names))
        return faid_fail(d, FAID_ECONFIG, "peaks.error_model: unknown value %d",
                         (int)p->error_model);
    if (!(p->cutoff_clip >= 0.0) || !isfinite(p->cutoff_clip))
        return faid_fail(d, FAID_ECONFIG, "peaks.cutoff_clip: %g is not a finite value >= 0",
                         p->cutoff_clip);
    if (p->cycles < 0 || p->cycles > FAID_PEAKS_MAX_CYCLES)
        return faid_fail(d, FAID_ECONFIG, "peaks.cycles: %d is outside 0..%d", p->cycles,
                         FAID_PEAKS_MAX_CYCLES);
    if (!(p->noise >= 0.0) || !isfinite(p->noise))
        return faid_fail(d, FAID_ECONFIG, "peaks.noise: %g is not a finite value >= 0", p->noise);
    if (!(p->cutoff_peak > 0.0) || !isfinite(p->cutoff_peak))
        return faid_fail(d, FAID_ECONFIG, "peaks.cutoff_peak: %g is not a finite value > 0",
                         p->cutoff_peak);
    if (p->patch_size != 3 && p->patch_size != 5)
        return faid_fail(d, FAID_ECONFIG, "peaks.patch_size: %d is neither 3 nor 5", p->patch_size);
    if (p->connected < 1 || p->connected > p->patch_size * p->patch_size)
        return faid_fail(d, FAID_ECONFIG, "peaks.connected: %d is outside 1..%d", p->connected,
                         p->patch_size * p->patch_size);
    if (!isfinite(p->adc_threshold))
        return faid_fail(d, FAID_ECONFIG, "peaks.adc_threshold: not finite");
    if (!(p->minimum_snr >= 0.0) || !isfinite(p->minimum_snr))
        return faid_fail(d, FAID_ECONFIG, "peaks.minimum_snr: %g is not a finite value >= 0",
                         p->minimum_snr);
    if (p->min_pixel_count < 1)
        return faid_fail(d, FAID_ECONFIG, "peaks.min_pixel_count: %d < 1", p->min_pixel_count);
    if (p->max_pixel_count > FAID_PEAKS_MAX_PIXEL_COUNT)
        return faid_fail(d, FAID_ECONFIG, "peaks.max_pixel_count: %d is above %d",
                         p->max_pixel_count, FAID_PEAKS_MAX_PIXEL_COUNT);
    if (p->max_pixel_count < p->min_pixel_count)
        return faid_fail(d, FAID_ECONFIG, "peaks.max_pixel_count: %d is below min_pixel_count %d",
                         p->max_pixel_count, p->min_pixel_count);
    if (p->local_bg_radius < 1 || p->local_bg_radius > FAID_PEAKS_MAX_BG_RADIUS)
        return faid_fail(d, FAID_ECONFIG, "peaks.local_bg_radius: %d is outside 1..%d",
                         p->local_bg_radius, FAID_PEAKS_MAX_BG_RADIUS);
    if (!(p->min_res >= 0.0) || !isfinite(p->min_res) || !(p->max_res >= p->min_res) ||
        !isfinite(p->max_res))
        return faid_fail(d, FAID_ECONFIG,
                         "peaks.min_res/max_res: [%g, %g] is not a finite range from >= 0",
                         p->min_res, p->max_res);
    if (p->max_num_peaks < 1)
        return faid_fail(d, FAID_ECONFIG, "peaks.max_num_peaks: %d < 1", p->max_num_peaks);
    if (p->min_peaks_for_hit < 0)
        return faid_fail(d, FAID_ECONFIG, "peaks.min_peaks_for_hit: %d < 0", p->min_peaks_for_hit);
    if (p->has_max_peaks_for_hit && p->max_peaks_for_hit < p->min_peaks_for_hit)
        return faid_fail(d, FAID_ECONFIG,
                         "peaks.max_peaks_for_hit: %d is below min_peaks_for_hit %d",
                         p->max_peaks_for_hit, p->min_peaks_for_hit);
    if (p->hit_rate_window < 1)
        return faid_fail(d, FAID_ECONFIG, "peaks.hit_rate_window: %d < 1", p->hit_rate_window);
    return 0;
}

static int parse_name(const char *const *names, int n, const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

const char *faid_peak_algorithm_name(faid_peak_algorithm a)
{
    return (int)a >= 0 && (int)a < NAMES_LEN(faid_peak_algorithm_names)
               ? faid_peak_algorithm_names[a]
               : "?";
}

int faid_peak_algorithm_parse(const char *name, faid_peak_algorithm *out)
{
    int i = parse_name(faid_peak_algorithm_names, NAMES_LEN(faid_peak_algorithm_names), name);
    if (i < 0 || !out)
        return FAID_EINVAL;
    *out = (faid_peak_algorithm)i;
    return 0;
}

const char *faid_clip_model_name(faid_clip_model m)
{
    return (int)m >= 0 && (int)m < NAMES_LEN(faid_clip_model_names) ? faid_clip_model_names[m]
                                                                    : "?";
}

int faid_clip_model_parse(const char *name, faid_clip_model *out)
{
    int i = parse_name(faid_clip_model_names, NAMES_LEN(faid_clip_model_names), name);
    if (i < 0 || !out)
        return FAID_EINVAL;
    *out = (faid_clip_model)i;
    return 0;
}

faid_peak_list *faid_peak_list_new(int32_t capacity)
{
    if (capacity < 1 || capacity > (1 << 24))
        return NULL;
    faid_peak_list *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->capacity = capacity;
    size_t n = (size_t)capacity;
    float **f[] = {&l->x, &l->y, &l->intensity, &l->sigma, &l->snr, &l->max_pixel};
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
        *f[k] = calloc(n, sizeof(float));
    l->npix = calloc(n, sizeof(int32_t));
    l->index = calloc(n, sizeof(int32_t));
    if (!l->x || !l->y || !l->intensity || !l->sigma || !l->snr || !l->max_pixel || !l->npix ||
        !l->index)
        faid_peak_list_destroy(&l);
    return l;
}

void faid_peak_list_destroy(faid_peak_list **lp)
{
    if (!lp || !*lp)
        return;
    faid_peak_list *l = *lp;
    free(l->x);
    free(l->y);
    free(l->intensity);
    free(l->sigma);
    free(l->snr);
    free(l->max_pixel);
    free(l->npix);
    free(l->index);
    free(l);
    *lp = NULL;
}

void faid_peak_list_clear(faid_peak_list *l)
{
    if (l)
        l->n = l->n_found = 0;
}

void faid_peak_list_push(faid_peak_list *l, float x, float y, float intensity, float sigma,
                         float snr, float max_pixel, int32_t npix, int32_t index)
{
    if (l->n < l->capacity) {
        int32_t i = l->n++;
        l->x[i] = x;
        l->y[i] = y;
        l->intensity[i] = intensity;
        l->sigma[i] = sigma;
        l->snr[i] = snr;
        l->max_pixel[i] = max_pixel;
        l->npix[i] = npix;
        l->index[i] = index;
    }
    l->n_found++;
}

void faid_peaks_unpack(const float *rec, int32_t cap, faid_peak_list *l)
{
    int32_t total;
    memcpy(&total, rec + 8 * (size_t)cap, sizeof total);
    if (total < 0)
        total = 0;
    int32_t n = total < cap ? total : cap;
    if (n > l->capacity)
        n = l->capacity;
    size_t bytes = (size_t)n * sizeof(float);
    float *dst[6] = {l->x, l->y, l->intensity, l->sigma, l->snr, l->max_pixel};
    for (int a = 0; a < 6; a++)
        memcpy(dst[a], rec + (size_t)a * (size_t)cap, bytes);
    memcpy(l->npix, rec + 6 * (size_t)cap, bytes);
    memcpy(l->index, rec + 7 * (size_t)cap, bytes);
    l->n = n;
    l->n_found = total;
}

faid_background *faid_background_new(int32_t nbins)
{
    if (nbins < 1 || nbins > (1 << 26))
        return NULL;
    faid_background *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->nbins = nbins;
    b->mean = calloc((size_t)nbins, sizeof(float));
    b->std = calloc((size_t)nbins, sizeof(float));
    b->sem = calloc((size_t)nbins, sizeof(float));
    b->count = calloc((size_t)nbins, sizeof(float));
    if (!b->mean || !b->std || !b->sem || !b->count)
        faid_background_destroy(&b);
    return b;
}

void faid_background_destroy(faid_background **bp)
{
    if (!bp || !*bp)
        return;
    faid_background *b = *bp;
    free(b->mean);
    free(b->std);
    free(b->sem);
    free(b->count);
    free(b);
    *bp = NULL;
}

faid_peak_geom *faid_peak_geom_alloc(int rows, int cols, int32_t nbins)
{
    if (rows < 1 || cols < 1 || nbins < 1 || (int64_t)rows * cols > INT32_MAX / 4)
        return NULL;
    faid_peak_geom *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    size_t n = (size_t)rows * (size_t)cols;
    g->rows = g->panel_rows = rows;
    g->cols = g->panel_cols = cols;
    g->nbins = nbins;
    g->radius = malloc(n * sizeof(float));
    g->radius_px = calloc(n, sizeof(float));
    g->valid = calloc(n, 1);
    g->radius1d = calloc((size_t)nbins, sizeof(float));
    if (!g->radius || !g->radius_px || !g->valid || !g->radius1d) {
        faid_peak_geom_destroy(&g);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        g->radius[i] = NAN;
    return g;
}

void faid_peak_geom_destroy(faid_peak_geom **gp)
{
    if (!gp || !*gp)
        return;
    faid_peak_geom *g = *gp;
    free(g->radius);
    free(g->radius1d);
    free(g->radius_px);
    free(g->valid);
    free(g);
    *gp = NULL;
}

faid_peak_geom *faid_peak_geom_new(const faid_geometry *geo, const uint8_t *mask,
                                   const faid_csr *csr, faid_unit unit, const faid_peak_params *p,
                                   int panel_rows, int panel_cols, faid_diag *d)
{
    if (!geo || !csr || !p) {
        faid_fail(d, FAID_EINVAL, "peaks: missing geometry, matrix or parameters");
        return NULL;
    }
    if (csr->npt_azim != 0 || csr->npt_rad < 2) {
        faid_fail(d, FAID_EINVAL, "peaks: the background needs a 1D matrix of >= 2 bins");
        return NULL;
    }
    int rows = geo->rows, cols = geo->cols;
    if (panel_rows <= 0)
        panel_rows = rows;
    if (panel_cols <= 0)
        panel_cols = cols;
    if (rows % panel_rows || cols % panel_cols) {
        faid_fail(d, FAID_ESHAPE, "peaks: frame %dx%d is not a grid of %dx%d panels", rows, cols,
                  panel_rows, panel_cols);
        return NULL;
    }
    faid_peak_geom *g = faid_peak_geom_alloc(rows, cols, csr->npt_rad);
    size_t n = (size_t)rows * (size_t)cols;
    double *tmp = malloc(n * sizeof(double));
    if (!g || !tmp) {
        free(tmp);
        faid_peak_geom_destroy(&g);
        faid_fail(d, FAID_ENOMEM, "peaks: geometry maps for %dx%d pixels", rows, cols);
        return NULL;
    }
    g->panel_rows = panel_rows;
    g->panel_cols = panel_cols;
    for (int32_t b = 0; b < csr->npt_rad; b++)
        g->radius1d[b] = (float)csr->rad_centers[b];
    g->rad_min = (float)csr->rad_min;
    g->rad_max = (float)csr->rad_max;
    int rc = faid_geometry_radial_centers(geo, unit, tmp);
    if (rc) {
        free(tmp);
        faid_peak_geom_destroy(&g);
        faid_fail(d, rc, "peaks: radial positions in %s", faid_unit_name(unit));
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        g->radius[i] = mask && mask[i] ? NAN : (float)tmp[i];
    rc = faid_geometry_radial_centers(geo, FAID_UNIT_R_M, tmp);
    if (rc) {
        free(tmp);
        faid_peak_geom_destroy(&g);
        faid_fail(d, rc, "peaks: radial positions in r_m");
        return NULL;
    }
    const double px = sqrt(geo->pixel1 * geo->pixel2);
    for (size_t i = 0; i < n; i++) {
        float r = (float)(tmp[i] / px);
        g->radius_px[i] = r;
        g->valid[i] = (!mask || !mask[i]) && r >= p->min_res && r <= p->max_res;
    }
    free(tmp);
    return g;
}
