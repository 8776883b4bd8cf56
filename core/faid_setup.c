/* faid_setup: builds the immutable reduction setup from a configuration (see faid_setup.h).
 *
 * Order: mask (preset gaps OR user mask), dark and flat (any numeric .npy -> float32, shape
 * checked), solid angle and polarization (float64 from the geometry, stored float32), the
 * faid_corrections view, then the CSR matrices (1D, and the 2D cake when npt_azim > 0), which
 * leave masked pixels out. The config hash covers the reduction options and the contents of the
 * mask, dark and flat files, so two setups with the same hash reduce frames identically. */
#include "faid_setup.h"

#include "faid_log.h"
#include "faid_npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads an auxiliary per-pixel .npy file and checks it is rows x cols. */
static int read_aux(const char *path, const char *key, int rows, int cols, faid_array *a,
                    faid_diag *d)
{
    int rc = faid_npy_read(path, a, d);
    if (rc) {
        faid_diag_prefix(d, "%s: ", key);
        return rc;
    }
    if (a->ndim != 2 || a->shape[0] != (size_t)rows || a->shape[1] != (size_t)cols) {
        char shp[96] = "";
        size_t k = 0;
        for (int i = 0; i < a->ndim && k < sizeof shp; i++)
            k += (size_t)snprintf(shp + k, sizeof shp - k, "%s%zu", i ? ", " : "", a->shape[i]);
        faid_array_free(a);
        return faid_fail(d, FAID_ESHAPE, "%s: %s: shape (%s) does not match the detector (%d, %d)",
                         key, path, shp, rows, cols);
    }
    return 0;
}

int faid_config_bad_pixels(const faid_config *cfg, int rows, int cols, uint8_t *mask, faid_diag *d)
{
    if (cfg->preset[0]) {
        const faid_detector_preset *p = faid_detector_find(cfg->preset);
        if (p && p->rows == rows && p->cols == cols)
            faid_detector_gap_mask(p, mask);
        else if (p)
            FAID_WARN("setup",
                      "detector.shape %dx%d differs from preset %s (%dx%d): module gaps "
                      "not masked",
                      rows, cols, p->name, p->rows, p->cols);
    }
    if (!cfg->mask_path[0])
        return 0;
    faid_array a = {0};
    int rc = read_aux(cfg->mask_path, "detector.mask", rows, cols, &a, d);
    if (rc)
        return rc;
    double buf[4096];
    const size_t es = faid_dtype_size(a.dtype), npix = (size_t)rows * (size_t)cols;
    for (size_t i = 0; i < npix; i += 4096) {
        size_t n = npix - i < 4096 ? npix - i : 4096;
        faid_dtype_to_f64(a.dtype, (const char *)a.data + i * es, n, buf);
        for (size_t k = 0; k < n; k++)
            if (buf[k] != 0.0) /* NaN counts as masked too */
                mask[i + k] = 1;
    }
    faid_array_free(&a);
    return 0;
}

static int load_f32(const char *path, const char *key, faid_setup *s, float **out, faid_diag *d)
{
    if (!path[0])
        return 0;
    faid_array a = {0};
    int rc = read_aux(path, key, s->rows, s->cols, &a, d);
    if (rc)
        return rc;
    *out = malloc(s->npix * sizeof **out);
    if (!*out) {
        faid_array_free(&a);
        return faid_fail(d, FAID_ENOMEM, "%s: %s: out of memory", key, path);
    }
    faid_dtype_to_f32(a.dtype, a.data, s->npix, *out);
    faid_array_free(&a);
    return 0;
}

static float *geometry_f32(faid_setup *s, int polarization, faid_diag *d)
{
    double *tmp = malloc(s->npix * sizeof *tmp);
    float *out = malloc(s->npix * sizeof *out);
    if (!tmp || !out) {
        free(tmp);
        free(out);
        faid_fail(d, FAID_ENOMEM, "setup: out of memory for %zu pixels", s->npix);
        return NULL;
    }
    if (polarization)
        faid_geometry_polarization(&s->geom, s->cfg.polarization_factor, 0.0, tmp);
    else
        faid_geometry_solid_angle(&s->geom, tmp);
    for (size_t i = 0; i < s->npix; i++)
        out[i] = (float)tmp[i];
    free(tmp);
    return out;
}

static int build_csr(faid_setup *s, int npt_azim, faid_csr **out, faid_diag *d)
{
    const faid_config *cfg = &s->cfg;
    faid_csr_params p;
    memset(&p, 0, sizeof p);
    p.split = out == &s->csr_bg ? FAID_SPLIT_NO : cfg->split;
    p.unit = cfg->unit;
    p.npt_rad = cfg->npt;
    p.npt_azim = npt_azim;
    p.has_rad_range = cfg->has_radial_range;
    p.rad_range[0] = cfg->radial_range[0];
    p.rad_range[1] = cfg->radial_range[1];
    p.has_azim_range = cfg->has_azimuth_range;
    p.azim_range[0] = cfg->azimuth_range[0];
    p.azim_range[1] = cfg->azimuth_range[1];
    if (out == &s->csr_bg && !p.has_rad_range && s->csr) {
        /* the background's bins are the profile's bins (one radial axis for both) */
        p.has_rad_range = 1;
        p.rad_range[0] = s->csr->rad_min;
        p.rad_range[1] = s->csr->rad_max;
    }
    int rc = faid_csr_build(&s->geom, s->mask, &p, out, d);
    if (rc)
        faid_diag_prefix(d, "%s matrix: ",
                         out == &s->csr_bg ? "background"
                         : npt_azim        ? "2D integration"
                                           : "1D integration");
    return rc;
}

faid_setup *faid_setup_new(const faid_config *cfg, uint64_t version, faid_diag *d)
{
    return faid_setup_new_masked(cfg, version, NULL, d);
}

faid_setup *faid_setup_new_masked(const faid_config *cfg, uint64_t version,
                                  const uint8_t *detector_mask, faid_diag *d)
{
    if (!cfg) {
        faid_fail(d, FAID_EINVAL, "setup: no configuration");
        return NULL;
    }
    faid_setup *s = calloc(1, sizeof *s);
    if (!s) {
        faid_fail(d, FAID_ENOMEM, "setup: out of memory");
        return NULL;
    }
    s->version = version;
    s->cfg = *cfg;
    s->geom = cfg->geometry;
    s->rows = cfg->geometry.rows;
    s->cols = cfg->geometry.cols;
    int rc = faid_geometry_check(&s->geom, cfg->source[0] ? cfg->source : "configuration", d);
    if (rc)
        goto fail;
    s->npix = (size_t)s->rows * (size_t)s->cols;
    s->mask = calloc(s->npix, 1);
    if (!s->mask) {
        faid_fail(d, FAID_ENOMEM, "setup: out of memory for %zu pixels", s->npix);
        goto fail;
    }
    if ((rc = faid_config_bad_pixels(&s->cfg, s->rows, s->cols, s->mask, d)) ||
        (rc = load_f32(cfg->dark_path, "integration.dark", s, &s->dark, d)) ||
        (rc = load_f32(cfg->flat_path, "integration.flat", s, &s->flat, d)))
        goto fail;
    for (size_t i = 0; detector_mask && i < s->npix; i++)
        s->mask[i] |= detector_mask[i] != 0;
    if (cfg->solid_angle && !(s->solid_angle = geometry_f32(s, 0, d)))
        goto fail;
    if (cfg->has_polarization && !(s->polarization = geometry_f32(s, 1, d)))
        goto fail;

    faid_corrections *c = &s->corr;
    c->npix = s->npix;
    c->mask = s->mask;
    c->dark = s->dark;
    c->flat = s->flat;
    c->solid_angle = s->solid_angle;
    c->polarization = s->polarization;
    c->do_dummy = cfg->has_dummy;
    c->dummy = (float)cfg->dummy;
    c->delta_dummy = (float)cfg->delta_dummy;
    c->normalization_factor = (float)cfg->normalization_factor;
    c->error_model = cfg->error_model;
    c->empty = (float)cfg->empty;

    if ((rc = build_csr(s, 0, &s->csr, d)))
        goto fail;
    if (cfg->npt_azim > 0 && (rc = build_csr(s, cfg->npt_azim, &s->csr2d, d)))
        goto fail;
    if (cfg->peaks.algorithm != FAID_PEAKS_NONE && (rc = build_csr(s, 0, &s->csr_bg, d)))
        goto fail;

    /* Options without file names, then what the files hold as the reduction sees it. */
    uint64_t h = faid_config_hash64(cfg, 0);
    h = faid_fnv1a(h, "mask", 4);
    h = faid_fnv1a(h, s->mask, s->npix);
    if (s->dark) {
        h = faid_fnv1a(h, "dark", 4);
        h = faid_fnv1a(h, s->dark, s->npix * sizeof *s->dark);
    }
    if (s->flat) {
        h = faid_fnv1a(h, "flat", 4);
        h = faid_fnv1a(h, s->flat, s->npix * sizeof *s->flat);
    }
    snprintf(s->config_hash, sizeof s->config_hash, "%016llx", (unsigned long long)h);
    return s;

fail:
    faid_setup_destroy(&s);
    return NULL;
}

void faid_setup_destroy(faid_setup **ps)
{
    if (!ps || !*ps)
        return;
    faid_setup *s = *ps;
    faid_csr_destroy(&s->csr);
    faid_csr_destroy(&s->csr2d);
    faid_csr_destroy(&s->csr_bg);
    free(s->mask);
    free(s->solid_angle);
    free(s->polarization);
    free(s->dark);
    free(s->flat);
    free(s);
    *ps = NULL;
}
