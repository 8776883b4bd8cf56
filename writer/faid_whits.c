/* faid_whits: see faid_whits.h. */
#include "faid_whits.h"

#include "faid_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int faid_whits_path(char *out, size_t cap, const char *series_path, faid_diag *d)
{
    size_t n = strlen(series_path);
    if (n > 3 && strcmp(series_path + n - 3, ".h5") == 0)
        n -= 3;
    int w = snprintf(out, cap, "%.*s_hits.h5", (int)n, series_path);
    if (w < 0 || (size_t)w >= cap)
        return faid_fail(d, FAID_ESIZE, "%s: hits file path too long", series_path);
    return 0;
}

int faid_whits_open(faid_nxmx **out, const char *path, const faid_setup *su, const char *series,
                    faid_dtype dt, faid_encoding enc, int swmr, faid_diag *geom_err, faid_diag *d)
{
    faid_nxmx_params p = {
        .path = path,
        .geom = &su->geom,
        .detector_name = su->cfg.preset[0] ? su->cfg.preset : NULL,
        .dtype = dt,
        .encoding = enc,
        .mask = su->mask,
        .max_peaks = su->cfg.peaks.max_num_peaks,
        .series = series,
        .swmr = swmr,
    };
    int rc = faid_nxmx_open(out, &p, d);
    if (rc)
        return rc;
    char geom[4096];
    faid_nxmx_geom_path(geom, sizeof geom, path);
    faid_nxmx_write_crystfel_geom(geom, &p, geom_err);
    return 0;
}

/* Copies the first n float32 (or int32) values of a into dst. */
static void copy_f32(const faid_array_view *a, int32_t n, float *dst)
{
    for (int32_t i = 0; i < n; i++)
        memcpy(&dst[i], a->data + 4 * (size_t)i, 4);
}

int faid_whits_peaks(const void *result, size_t len, faid_peak_list *l, uint64_t *frame_id,
                     int *is_hit, faid_diag *d)
{
    faid_out_msg *m = malloc(sizeof *m);
    if (!m)
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    int rc = faid_proto_decode_output(result, len, m, d);
    if (!rc && (m->type != FAID_OUT_RESULT || !m->has_peaks))
        rc = faid_fail(d, FAID_EFORMAT, "result without peaks");
    if (!rc) {
        const faid_array_view *cols[] = {&m->peak_x,     &m->peak_y,   &m->peak_intensity,
                                         &m->peak_sigma, &m->peak_snr, &m->peak_max_pixel,
                                         &m->peak_npix};
        uint64_t n = m->peak_x.nelem;
        for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++)
            if (cols[k]->nelem != n || cols[k]->nbytes != 4 * n)
                rc = faid_fail(d, FAID_EFORMAT, "frame %llu: peak arrays of unequal length",
                               (unsigned long long)m->frame_id);
        if (!rc) {
            int32_t k = n < (uint64_t)l->capacity ? (int32_t)n : l->capacity;
            copy_f32(&m->peak_x, k, l->x);
            copy_f32(&m->peak_y, k, l->y);
            copy_f32(&m->peak_intensity, k, l->intensity);
            copy_f32(&m->peak_sigma, k, l->sigma);
            copy_f32(&m->peak_snr, k, l->snr);
            copy_f32(&m->peak_max_pixel, k, l->max_pixel);
            memcpy(l->npix, m->peak_npix.data, 4 * (size_t)k);
            memset(l->index, 0, 4 * (size_t)k);
            l->n = k;
            l->n_found = m->num_peaks > INT32_MAX ? INT32_MAX : (int32_t)m->num_peaks;
            *frame_id = m->frame_id;
            *is_hit = m->is_hit;
        }
    }
    free(m);
    return rc;
}
