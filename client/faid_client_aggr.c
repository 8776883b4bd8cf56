/* faid_client_aggr: aggregates messages of several instances summed (faid_client.h). The message
 * is walked with the bounded cursor; the powder pattern is decoded into a buffer sized by the
 * shape the message claims, refused above FAID_AGGR_MAX_PIXELS before any allocation. */
#include "faid_client.h"

#include "faid_codec.h"
#include "faid_proto.h"

#include <stdlib.h>
#include <string.h>

typedef struct aggr_msg {
    uint64_t frames, hits, peaks, window_frames, bin_width;
    double hit_rate;
    faid_array_view hist;
    int has_powder;
    uint64_t rows, cols;
    const uint8_t *powder;
    size_t powder_len;
} aggr_msg;

static int u64_of(faid_mpr *r, const char *key, uint64_t *out, faid_diag *d)
{
    faid_mp_obj v;
    int rc = faid_mpr_next(r, &v, d);
    if (rc)
        return rc;
    if (faid_mp_to_u64(&v, out) != 0)
        return faid_fail(d, FAID_EFORMAT, "aggregates: %s is not an unsigned integer", key);
    return 0;
}

static int read_powder(faid_mpr *r, aggr_msg *a, faid_diag *d)
{
    faid_mp_obj o, k, v;
    int rc = faid_mpr_next(r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "aggregates: virtual_powder_plot is not a map");
    int have = 0;
    for (uint32_t i = 0; i < o.len; i++) {
        if ((rc = faid_mpr_next(r, &k, d)))
            return rc;
        if (faid_mp_str_eq(&k, FAID_K_SHAPE)) {
            if ((rc = faid_mpr_next(r, &v, d)))
                return rc;
            if (v.type != FAID_MP_ARRAY || v.len != 2)
                return faid_fail(d, FAID_EFORMAT,
                                 "aggregates: virtual_powder_plot.shape is not [rows, cols]");
            if ((rc = u64_of(r, "virtual_powder_plot.shape", &a->rows, d)) ||
                (rc = u64_of(r, "virtual_powder_plot.shape", &a->cols, d)))
                return rc;
            have |= 1;
        } else if (faid_mp_str_eq(&k, FAID_K_DTYPE) || faid_mp_str_eq(&k, FAID_K_ENCODING)) {
            int dt = faid_mp_str_eq(&k, FAID_K_DTYPE);
            if ((rc = faid_mpr_next(r, &v, d)))
                return rc;
            if (!faid_mp_str_eq(&v, dt ? "<u4" : "bslz4"))
                return faid_fail(d, FAID_EUNSUP, "aggregates: virtual_powder_plot.%s is not %s",
                                 dt ? "dtype" : "encoding", dt ? "<u4" : "bslz4");
        } else if (faid_mp_str_eq(&k, FAID_K_DATA)) {
            if ((rc = faid_mpr_next(r, &v, d)))
                return rc;
            if (v.type != FAID_MP_BIN)
                return faid_fail(d, FAID_EFORMAT,
                                 "aggregates: virtual_powder_plot.data is not bin");
            a->powder = v.ptr;
            a->powder_len = v.len;
            have |= 2;
        } else if ((rc = faid_mpr_skip(r, d))) {
            return rc;
        }
    }
    if (have != 3)
        return faid_fail(d, FAID_EFORMAT, "aggregates: virtual_powder_plot lacks %s",
                         have & 1 ? "data" : "shape");
    if (a->rows == 0 || a->cols == 0 || a->rows > FAID_AGGR_MAX_PIXELS / a->cols)
        return faid_fail(d, FAID_ERANGE,
                         "aggregates: virtual_powder_plot.shape [%llu, %llu] outside 1 .. %llu "
                         "pixels",
                         (unsigned long long)a->rows, (unsigned long long)a->cols,
                         (unsigned long long)FAID_AGGR_MAX_PIXELS);
    a->has_powder = 1;
    return 0;
}

static int parse(const uint8_t *body, size_t len, aggr_msg *a, faid_diag *d)
{
    memset(a, 0, sizeof(*a));
    faid_mpr r;
    faid_mp_obj o, k;
    faid_mpr_init(&r, body, len);
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "aggregates: not a map");
    int is_aggr = 0;
    for (uint32_t i = 0; i < o.len; i++) {
        if ((rc = faid_mpr_next(&r, &k, d)))
            return rc;
        if (k.type != FAID_MP_STR)
            return faid_fail(d, FAID_EFORMAT, "aggregates: a key is not a string");
        if (faid_mp_str_eq(&k, FAID_K_TYPE)) {
            faid_mp_obj v;
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            is_aggr = faid_mp_str_eq(&v, FAID_TOPIC_AGGREGATES);
        } else if (faid_mp_str_eq(&k, FAID_K_FRAMES)) {
            rc = u64_of(&r, FAID_K_FRAMES, &a->frames, d);
        } else if (faid_mp_str_eq(&k, FAID_K_HITS)) {
            rc = u64_of(&r, FAID_K_HITS, &a->hits, d);
        } else if (faid_mp_str_eq(&k, FAID_K_PEAKS)) {
            rc = u64_of(&r, FAID_K_PEAKS, &a->peaks, d);
        } else if (faid_mp_str_eq(&k, FAID_K_HIT_RATE_WINDOW_FRAMES)) {
            rc = u64_of(&r, FAID_K_HIT_RATE_WINDOW_FRAMES, &a->window_frames, d);
        } else if (faid_mp_str_eq(&k, FAID_K_NUM_PEAKS_BIN_WIDTH)) {
            rc = u64_of(&r, FAID_K_NUM_PEAKS_BIN_WIDTH, &a->bin_width, d);
        } else if (faid_mp_str_eq(&k, FAID_K_HIT_RATE)) {
            faid_mp_obj v;
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_f64(&v, &a->hit_rate) != 0 || !(a->hit_rate >= 0 && a->hit_rate <= 1))
                return faid_fail(d, FAID_EFORMAT, "aggregates: hit_rate is not a number in [0, 1]");
        } else if (faid_mp_str_eq(&k, FAID_K_NUM_PEAKS_HISTOGRAM)) {
            if ((rc = faid_proto_read_array(&r, &a->hist, d)))
                return rc;
            if (a->hist.ndim != 1 || a->hist.dtype != FAID_DT_U64 ||
                a->hist.nelem > FAID_AGGR_MAX_BINS)
                return faid_fail(d, FAID_EFORMAT,
                                 "aggregates: num_peaks_histogram is not <u8 [<= %d]",
                                 FAID_AGGR_MAX_BINS);
        } else if (faid_mp_str_eq(&k, FAID_K_VIRTUAL_POWDER_PLOT)) {
            rc = read_powder(&r, a, d);
        } else {
            rc = faid_mpr_skip(&r, d);
        }
        if (rc)
            return rc;
    }
    if (!is_aggr)
        return faid_fail(d, FAID_EPROTO, "not an aggregates message");
    return 0;
}

int faid_aggr_add(faid_aggr_sum *s, const uint8_t *body, size_t len, faid_diag *d)
{
    aggr_msg a;
    int rc = parse(body, len, &a, d);
    if (rc)
        return rc;
    if (s->instances && (a.bin_width != s->bin_width || a.hist.nelem != s->nbins))
        return faid_fail(d, FAID_ESHAPE,
                         "aggregates: num_peaks histogram of %llu bins of %llu, the sum has %llu "
                         "of %llu",
                         (unsigned long long)a.hist.nelem, (unsigned long long)a.bin_width,
                         (unsigned long long)s->nbins, (unsigned long long)s->bin_width);
    if (s->powder && a.has_powder && (a.rows != s->rows || a.cols != s->cols))
        return faid_fail(
            d, FAID_ESHAPE,
            "aggregates: virtual powder pattern [%llu, %llu], the sum has [%llu, %llu]",
            (unsigned long long)a.rows, (unsigned long long)a.cols, (unsigned long long)s->rows,
            (unsigned long long)s->cols);
    /* Everything that can fail before anything is added. */
    uint32_t *px = NULL;
    size_t npx = a.has_powder ? (size_t)(a.rows * a.cols) : 0;
    if (npx) {
        px = malloc(npx * sizeof(uint32_t));
        if (!px)
            return faid_fail(d, FAID_ENOMEM, "aggregates: out of memory for %zu pixels", npx);
        if ((rc = faid_bslz4_decode(a.powder, a.powder_len, 4, px, npx * 4, d))) {
            free(px);
            faid_diag_prefix(d, "aggregates: virtual_powder_plot: ");
            return rc;
        }
    }
    if (!s->histogram && a.hist.nelem) {
        s->histogram = calloc((size_t)a.hist.nelem, sizeof(uint64_t));
        if (!s->histogram) {
            free(px);
            return faid_fail(d, FAID_ENOMEM, "aggregates: out of memory");
        }
    }
    if (npx && !s->powder) {
        s->powder = calloc(npx, sizeof(uint64_t));
        if (!s->powder) {
            free(px);
            return faid_fail(d, FAID_ENOMEM, "aggregates: out of memory for %zu pixels", npx);
        }
        s->rows = a.rows;
        s->cols = a.cols;
    }
    for (size_t i = 0; i < npx; i++)
        s->powder[i] += px[i];
    free(px);
    for (uint64_t i = 0; i < a.hist.nelem; i++) {
        uint64_t v;
        memcpy(&v, a.hist.data + i * 8, 8); /* little-endian hosts, as the rest of faid */
        s->histogram[i] += v;
    }
    s->instances++;
    s->nbins = a.hist.nelem;
    s->bin_width = a.bin_width;
    s->frames += a.frames;
    s->hits += a.hits;
    s->peaks += a.peaks;
    s->window_frames += a.window_frames;
    s->window_hits += a.hit_rate * (double)a.window_frames;
    s->hit_rate = s->window_frames ? s->window_hits / (double)s->window_frames : 0.0;
    return 0;
}

void faid_aggr_clear(faid_aggr_sum *s)
{
    free(s->histogram);
    free(s->powder);
    memset(s, 0, sizeof(*s));
}
