/* faid_client_dectris: DECTRIS stream v1 / v2 encoders (see faid_client_dectris.h). */
#include "faid_client_dectris.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- a minimal CBOR writer (RFC 8949 section 3: a head is major type << 5 | argument) ------- */

typedef struct cbw {
    uint8_t *buf;
    size_t cap, len;
    int overflow;
} cbw;

enum { MT_UINT = 0, MT_NEG = 1, MT_BYTES = 2, MT_TEXT = 3, MT_ARRAY = 4, MT_MAP = 5, MT_TAG = 6 };

static void put(cbw *w, const void *p, size_t n)
{
    if (w->overflow || w->cap - w->len < n) {
        w->overflow = 1;
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void head(cbw *w, int major, uint64_t v)
{
    uint8_t b[9];
    size_t n;
    uint8_t m = (uint8_t)(major << 5);
    if (v < 24) {
        b[0] = m | (uint8_t)v;
        n = 1;
    } else if (v <= 0xff) {
        b[0] = m | 24;
        b[1] = (uint8_t)v;
        n = 2;
    } else if (v <= 0xffff) {
        b[0] = m | 25;
        b[1] = (uint8_t)(v >> 8);
        b[2] = (uint8_t)v;
        n = 3;
    } else if (v <= 0xffffffffu) {
        b[0] = m | 26;
        for (int k = 0; k < 4; k++)
            b[1 + k] = (uint8_t)(v >> (24 - 8 * k));
        n = 5;
    } else {
        b[0] = m | 27;
        for (int k = 0; k < 8; k++)
            b[1 + k] = (uint8_t)(v >> (56 - 8 * k));
        n = 9;
    }
    put(w, b, n);
}

static void text(cbw *w, const char *s)
{
    size_t n = strlen(s);
    head(w, MT_TEXT, n);
    put(w, s, n);
}

static void bytes(cbw *w, const void *p, size_t n)
{
    head(w, MT_BYTES, n);
    put(w, p, n);
}

/* A float64 (major type 7, additional information 27), big-endian. */
static void f64(cbw *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    uint8_t b[9] = {0xfb};
    for (int k = 0; k < 8; k++)
        b[1 + k] = (uint8_t)(bits >> (56 - 8 * k));
    put(w, b, sizeof(b));
}

static void rational(cbw *w, uint64_t num, uint64_t den)
{
    head(w, MT_ARRAY, 2);
    head(w, MT_UINT, num);
    head(w, MT_UINT, den);
}

static int finish(const cbw *w, size_t *len, faid_diag *d)
{
    if (w->overflow)
        return faid_fail(d, FAID_ESIZE, "DECTRIS v2 message does not fit %zu bytes", w->cap);
    *len = w->len;
    return 0;
}

/* RFC 8746 typed-array tag of a little-endian array of t. */
static int typed_tag(faid_dtype t)
{
    switch (t) {
    case FAID_DT_U8:
        return 64;
    case FAID_DT_U16:
        return 69;
    case FAID_DT_U32:
        return 70;
    case FAID_DT_I8:
        return 72;
    case FAID_DT_I16:
        return 77;
    case FAID_DT_I32:
        return 78;
    case FAID_DT_F32:
        return 85;
    default:
        return -1;
    }
}

static const char *channel_of(const faid_dectris_series *s)
{
    return s->channel && s->channel[0] ? s->channel : "threshold_1";
}

static void series_keys(cbw *w, const faid_dectris_series *s)
{
    text(w, "series_id");
    head(w, MT_UINT, s->series_id);
    text(w, "series_unique_id");
    text(w, s->series_unique_id ? s->series_unique_id : "");
}

/* The opening every v2 message shares: the self-described CBOR tag, a map of NKEYS keys, its type
 * and the series keys (3 of the NKEYS). */
static void message_head(cbw *w, uint64_t nkeys, const char *type, const faid_dectris_series *s)
{
    head(w, MT_TAG, 55799);
    head(w, MT_MAP, nkeys);
    text(w, "type");
    text(w, type);
    series_keys(w, s);
}

int faid_dectris2_carries(faid_encoding e)
{
    return e == FAID_ENC_NONE || e == FAID_ENC_BSLZ4 || e == FAID_ENC_LZ4;
}

int faid_dectris2_start(const faid_dectris_series *s, uint8_t *buf, size_t cap, size_t *len,
                        faid_diag *d)
{
    if (typed_tag(s->dtype) < 0)
        return faid_fail(d, FAID_EDTYPE, "DECTRIS v2 cannot carry %s pixels",
                         faid_dtype_name(s->dtype));
    cbw w = {buf, cap, 0, 0};
    message_head(&w, s->has_geometry ? 16 : 8, "start", s);
    text(&w, "channels");
    head(&w, MT_ARRAY, 1);
    text(&w, channel_of(s));
    text(&w, "image_dtype");
    text(&w, faid_dtype_name(s->dtype));
    text(&w, "image_size_x");
    head(&w, MT_UINT, (uint64_t)s->cols);
    text(&w, "image_size_y");
    head(&w, MT_UINT, (uint64_t)s->rows);
    text(&w, "number_of_images");
    head(&w, MT_UINT, s->nimages > 0 ? (uint64_t)s->nimages : 0);
    if (s->has_geometry) {
        const struct {
            const char *key;
            double v;
        } g[] = {{"beam_center_x", s->beam_center_x},
                 {"beam_center_y", s->beam_center_y},
                 {"detector_distance", s->distance}, /* Jungfraujoch's key */
                 {"incident_wavelength", s->wavelength},
                 {"incident_energy", s->wavelength > 0 ? 12398.419843320026 / s->wavelength : 0},
                 {"pixel_size_x", s->pixel_size_x},
                 {"pixel_size_y", s->pixel_size_y}};
        for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
            text(&w, g[k].key);
            f64(&w, g[k].v);
        }
        /* DECTRIS's own: the detector's translation, z = distance. */
        text(&w, "detector_translation");
        head(&w, MT_ARRAY, 3);
        f64(&w, 0);
        f64(&w, 0);
        f64(&w, s->distance);
    }
    return finish(&w, len, d);
}

size_t faid_dectris2_image_bound(size_t payload_len)
{
    return payload_len + 512;
}

int faid_dectris2_image(const faid_dectris_series *s, uint64_t image_id, faid_encoding e,
                        const void *payload, size_t payload_len, uint8_t *buf, size_t cap,
                        size_t *len, faid_diag *d)
{
    int tag = typed_tag(s->dtype);
    if (tag < 0)
        return faid_fail(d, FAID_EDTYPE, "DECTRIS v2 cannot carry %s pixels",
                         faid_dtype_name(s->dtype));
    if (!faid_dectris2_carries(e))
        return faid_fail(d, FAID_EUNSUP, "DECTRIS v2 cannot carry %s frames (bslz4, lz4, none)",
                         faid_encoding_name(e));
    cbw w = {buf, cap, 0, 0};
    message_head(&w, 8, "image", s);
    text(&w, "image_id");
    head(&w, MT_UINT, image_id);
    /* 10 ms per frame at a 100 MHz time base, as a DCU's rationals look. */
    text(&w, "start_time");
    rational(&w, image_id * 1000000u, 100000000u);
    text(&w, "stop_time");
    rational(&w, image_id * 1000000u + 999990u, 100000000u);
    text(&w, "real_time");
    rational(&w, 999990u, 100000000u);
    text(&w, "data");
    head(&w, MT_MAP, 1);
    text(&w, channel_of(s));
    head(&w, MT_TAG, 40);
    head(&w, MT_ARRAY, 2);
    head(&w, MT_ARRAY, 2);
    head(&w, MT_UINT, (uint64_t)s->rows);
    head(&w, MT_UINT, (uint64_t)s->cols);
    head(&w, MT_TAG, (uint64_t)tag);
    if (e != FAID_ENC_NONE) {
        head(&w, MT_TAG, 56500);
        head(&w, MT_ARRAY, 3);
        text(&w, e == FAID_ENC_BSLZ4 ? "bslz4" : "lz4");
        head(&w, MT_UINT, e == FAID_ENC_BSLZ4 ? faid_dtype_size(s->dtype) : 0);
    }
    bytes(&w, payload, payload_len);
    return finish(&w, len, d);
}

int faid_dectris2_end(const faid_dectris_series *s, uint8_t *buf, size_t cap, size_t *len,
                      faid_diag *d)
{
    cbw w = {buf, cap, 0, 0};
    message_head(&w, 3, "end", s);
    return finish(&w, len, d);
}

/* ---- v1 ------------------------------------------------------------------------------------- */

const char *faid_dectris1_encoding(faid_encoding e, faid_dtype t)
{
    switch (e) {
    case FAID_ENC_NONE:
        return "<";
    case FAID_ENC_LZ4_RAW:
        return "lz4<";
    case FAID_ENC_BSLZ4:
        switch (faid_dtype_size(t)) {
        case 1:
            return "bs8-lz4<";
        case 2:
            return "bs16-lz4<";
        case 4:
            return "bs32-lz4<";
        default:
            return NULL;
        }
    default:
        return NULL;
    }
}

static int part(char *out, size_t cap, faid_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int part(char *out, size_t cap, faid_diag *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap)
        return faid_fail(d, FAID_ESIZE, "DECTRIS v1 part does not fit %zu bytes", cap);
    return 0;
}

int faid_dectris1_header(const faid_dectris_series *s, char *p1, char *p2, size_t cap, faid_diag *d)
{
    int rc =
        part(p1, cap, d, "{\"htype\":\"dheader-1.0\",\"series\":%llu,\"header_detail\":\"basic\"}",
             (unsigned long long)s->series_id);
    if (rc)
        return rc;
    char geo[512] = "";
    if (s->has_geometry)
        snprintf(geo, sizeof(geo),
                 ",\"beam_center_x\":%.17g,\"beam_center_y\":%.17g,\"detector_distance\":%.17g,"
                 "\"wavelength\":%.17g,\"x_pixel_size\":%.17g,\"y_pixel_size\":%.17g",
                 s->beam_center_x, s->beam_center_y, s->distance, s->wavelength, s->pixel_size_x,
                 s->pixel_size_y);
    return part(p2, cap, d,
                "{\"x_pixels_in_detector\":%d,\"y_pixels_in_detector\":%d,"
                "\"bit_depth_image\":%zu,\"nimages\":%lld,\"ntrigger\":1,"
                "\"trigger_mode\":\"ints\",\"software_version\":\"faidctl replay\"%s}",
                s->cols, s->rows, 8 * faid_dtype_size(s->dtype),
                (long long)(s->nimages > 0 ? s->nimages : 0), geo);
}

int faid_dectris1_image(const faid_dectris_series *s, uint64_t frame, faid_encoding e,
                        size_t blob_len, uint64_t frame_time_ns, char *p1, char *p2, char *p4,
                        size_t cap, faid_diag *d)
{
    const char *enc = faid_dectris1_encoding(e, s->dtype);
    if (!enc)
        return faid_fail(d, FAID_EUNSUP, "DECTRIS v1 cannot carry %s frames (bslz4, lz4-raw, none)",
                         faid_encoding_name(e));
    if (s->dtype != FAID_DT_U8 && s->dtype != FAID_DT_U16 && s->dtype != FAID_DT_U32)
        return faid_fail(d, FAID_EDTYPE, "DECTRIS v1 carries uint8/16/32 pixels, not %s",
                         faid_dtype_name(s->dtype));
    /* The hash would be the blob's MD5; faid does not check it and replay leaves it empty. */
    int rc =
        part(p1, cap, d, "{\"htype\":\"dimage-1.0\",\"series\":%llu,\"frame\":%llu,\"hash\":\"\"}",
             (unsigned long long)s->series_id, (unsigned long long)frame);
    if (!rc)
        rc = part(p2, cap, d,
                  "{\"htype\":\"dimage_d-1.0\",\"shape\":[%d,%d],\"type\":\"%s\","
                  "\"encoding\":\"%s\",\"size\":%zu}",
                  s->cols, s->rows, faid_dtype_name(s->dtype), enc, blob_len);
    if (!rc)
        rc = part(p4, cap, d,
                  "{\"htype\":\"dconfig-1.0\",\"start_time\":%llu,\"stop_time\":%llu,"
                  "\"real_time\":%llu}",
                  (unsigned long long)(frame * frame_time_ns),
                  (unsigned long long)(frame * frame_time_ns + frame_time_ns),
                  (unsigned long long)frame_time_ns);
    return rc;
}

int faid_dectris1_end(const faid_dectris_series *s, char *p1, size_t cap, faid_diag *d)
{
    return part(p1, cap, d, "{\"htype\":\"dseries_end-1.0\",\"series\":%llu}",
                (unsigned long long)s->series_id);
}
