/* faid_input_dectris1: DECTRIS stream v1 ("legacy" SIMPLON stream: multipart JSON + binary blobs)
 * as an input format. The first part of every message is a JSON object with "htype":
 *
 *   dheader-1.0       series start; header_detail "none" (1 part), "basic" (+ detector
 *                     configuration object), "all" (+ dflatfield-1.0, dpixelmask-1.0,
 *                     dcountrate_table-1.0 headers, each followed by its blob); one optional
 *                     header-appendix part at the end
 *   dimage-1.0        image: dimage-1.0 {series, frame, hash}, dimage_d-1.0 {shape [x, y], type,
 *                     encoding, size}, the blob, dconfig-1.0 {start_time, stop_time, real_time in
 *                     ns}, one optional image-appendix part
 *   dseries_end-1.0   series end
 *
 * Encodings: "lz4<" (one raw LZ4 block), "bs8-lz4<" / "bs16-lz4<" / "bs32-lz4<" (bitshuffle-LZ4
 * with the 12-byte HDF5 framing, element size 8/16/32 bits, which must be the pixel size), "<"
 * (uncompressed little-endian). Shapes are [width, height] on the wire and [rows, cols] here.
 * JSON goes through jansson; each JSON part is bounded in size before it is parsed. The blob is
 * handed out where it lies (no copy). The MD5 "hash" of images is not verified (it costs CPU at
 * kHz rates and ZeroMQ delivers whole messages). */
#include "faid_input.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* DECTRIS v1 first parts are small JSON objects; a longer part is not looked into. */
#define V1_DETECT_MAX 65536
/* Bounds on the JSON parts parsed: per-frame headers are ~100 bytes; the detector
 * configuration part of header_detail basic/all holds the SIMPLON config (a few kB). */
#define V1_JSON_MAX        65536
#define V1_CONFIG_JSON_MAX (1u << 18)
#define V1_MAX_DIM         (1u << 20)

static int v1_detect(const void *first, size_t len)
{
    const char *s = first;
    if (!s || len < 2 || len > V1_DETECT_MAX)
        return 0;
    size_t k = 0;
    while (k < len && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n'))
        k++;
    if (k >= len || s[k] != '{')
        return 0;
    static const char key[] = "\"htype\"";
    for (; k + sizeof(key) - 1 <= len; k++)
        if (memcmp(s + k, key, sizeof(key) - 1) == 0)
            return 1;
    return 0;
}

/* Parses part `idx` (0-based) as a JSON object. */
static int load_part(const faid_input_part *p, int idx, size_t max, json_t **out, faid_diag *d)
{
    *out = NULL;
    if (p->len > max)
        return faid_fail(d, FAID_ESIZE, "part %d: JSON of %zu bytes, at most %zu accepted", idx + 1,
                         p->len, max);
    json_error_t err;
    json_t *j = json_loadb(p->data ? p->data : "", p->len, 0, &err);
    if (!j)
        return faid_fail(d, FAID_EFORMAT, "part %d: not JSON (%s at byte %d)", idx + 1, err.text,
                         err.position);
    if (!json_is_object(j)) {
        json_decref(j);
        return faid_fail(d, FAID_EFORMAT, "part %d: JSON is not an object", idx + 1);
    }
    *out = j;
    return 0;
}

static const char *htype_of(json_t *j)
{
    json_t *h = json_object_get(j, "htype");
    return json_is_string(h) ? json_string_value(h) : NULL;
}

/* Unsigned integer key of part idx. */
static int get_uint(json_t *j, int idx, const char *key, uint64_t *v, int required, int *have,
                    faid_diag *d)
{
    json_t *x = json_object_get(j, key);
    if (have)
        *have = 0;
    if (!x) {
        if (required)
            return faid_fail(d, FAID_EFORMAT, "part %d: missing key \"%s\"", idx + 1, key);
        return 0;
    }
    if (!json_is_integer(x) || json_integer_value(x) < 0)
        return faid_fail(d, FAID_EFORMAT, "part %d: key \"%s\": expected an unsigned integer",
                         idx + 1, key);
    *v = (uint64_t)json_integer_value(x);
    if (have)
        *have = 1;
    return 0;
}

/* "shape": [x, y] -> rows = y, cols = x (1D tables: [n] -> n x 1). */
static int get_shape(json_t *j, int idx, int allow_1d, uint64_t shape[2], int *ndim, faid_diag *d)
{
    json_t *s = json_object_get(j, "shape");
    size_t n = json_is_array(s) ? json_array_size(s) : 0;
    if (n != 2 && !(allow_1d && n == 1))
        return faid_fail(d, FAID_ESHAPE, "part %d: key \"shape\": expected [width, height]",
                         idx + 1);
    uint64_t v[2] = {1, 1};
    for (size_t k = 0; k < n; k++) {
        json_t *e = json_array_get(s, k);
        if (!json_is_integer(e) || json_integer_value(e) < 1 ||
            json_integer_value(e) > (json_int_t)V1_MAX_DIM * (n == 1 ? 16 : 1))
            return faid_fail(d, FAID_ESHAPE, "part %d: key \"shape\": dimension %zu out of range",
                             idx + 1, k);
        v[k] = (uint64_t)json_integer_value(e);
    }
    if (n == 1) {
        shape[0] = v[0];
        shape[1] = 1;
    } else {
        shape[0] = v[1]; /* rows = height */
        shape[1] = v[0]; /* cols = width */
    }
    *ndim = (int)n;
    return 0;
}

static int get_type(json_t *j, int idx, faid_dtype *dt, faid_diag *d)
{
    json_t *t = json_object_get(j, "type");
    if (!json_is_string(t))
        return faid_fail(d, FAID_EFORMAT, "part %d: missing text key \"type\"", idx + 1);
    const char *name = json_string_value(t);
    *dt = faid_dtype_parse(name);
    if (*dt == FAID_DT_INVALID || name[0] == '>')
        return faid_fail(d, FAID_EDTYPE, "part %d: key \"type\": \"%.32s\" is not supported",
                         idx + 1, name);
    return 0;
}

/* Encoding grammar [bs<BITS>-][lz4][<|>]: sets the faid encoding and, for bitshuffle, the
 * element size in bytes (0 otherwise). */
static int parse_encoding(const char *s, int idx, faid_encoding *enc, size_t *bs_elem, faid_diag *d)
{
    const char *p = s;
    *bs_elem = 0;
    int lz4 = 0;
    if (strncmp(p, "bs", 2) == 0) {
        if (strncmp(p, "bs8-", 4) == 0)
            *bs_elem = 1, p += 4;
        else if (strncmp(p, "bs16-", 5) == 0)
            *bs_elem = 2, p += 5;
        else if (strncmp(p, "bs32-", 5) == 0)
            *bs_elem = 4, p += 5;
        else
            goto bad;
    }
    if (strncmp(p, "lz4", 3) == 0)
        lz4 = 1, p += 3;
    if (strcmp(p, ">") == 0)
        return faid_fail(d, FAID_EUNSUP, "part %d: encoding \"%.32s\" is big-endian", idx + 1, s);
    if (strcmp(p, "<") != 0)
        goto bad;
    if (*bs_elem && !lz4)
        goto bad;
    *enc = *bs_elem ? FAID_ENC_BSLZ4 : lz4 ? FAID_ENC_LZ4_RAW : FAID_ENC_NONE;
    return 0;
bad:
    return faid_fail(d, FAID_EUNSUP,
                     "part %d: encoding \"%.32s\" is not supported (lz4<, bs8-lz4<, bs16-lz4<, "
                     "bs32-lz4<, <)",
                     idx + 1, s);
}

/* Checks a blob against shape x dtype for its encoding. */
static int check_blob(const faid_input_array *a, int idx, faid_diag *d)
{
    uint64_t expect = a->shape[0] * a->shape[1] * faid_dtype_size(a->dtype);
    if (a->encoding == FAID_ENC_NONE && a->len != expect)
        return faid_fail(d, FAID_ESIZE, "part %d: %zu bytes, expected %llu (%llu x %llu %s)",
                         idx + 1, a->len, (unsigned long long)expect,
                         (unsigned long long)a->shape[0], (unsigned long long)a->shape[1],
                         faid_dtype_name(a->dtype));
    if (a->encoding == FAID_ENC_BSLZ4) {
        uint64_t total = 0;
        uint32_t block = 0;
        int rc = faid_bslz4_header(a->data, a->len, &total, &block, d);
        if (rc) {
            faid_diag_prefix(d, "part %d: ", idx + 1);
            return rc;
        }
        if (total != expect)
            return faid_fail(d, FAID_ESIZE,
                             "part %d: bitshuffle header says %llu decoded bytes, expected %llu "
                             "(%llu x %llu %s)",
                             idx + 1, (unsigned long long)total, (unsigned long long)expect,
                             (unsigned long long)a->shape[0], (unsigned long long)a->shape[1],
                             faid_dtype_name(a->dtype));
    }
    if (a->encoding == FAID_ENC_LZ4_RAW && a->len == 0)
        return faid_fail(d, FAID_ETRUNC, "part %d: empty lz4 block", idx + 1);
    return 0;
}

/* ---- dheader-1.0 ---------------------------------------------------------------------------- */

static double num_value(json_t *x)
{
    /* SIMPLON values may come bare or as {"value": v, "unit": ...}. */
    if (json_is_object(x))
        x = json_object_get(x, "value");
    return json_is_number(x) ? json_number_value(x) : 0.0;
}

static int is_num(json_t *x)
{
    if (json_is_object(x))
        x = json_object_get(x, "value");
    return json_is_number(x);
}

static const char *str_value(json_t *x)
{
    if (json_is_object(x))
        x = json_object_get(x, "value");
    return json_is_string(x) ? json_string_value(x) : NULL;
}

/* Detector configuration keys (SIMPLON detector/config) -> start metadata. */
typedef enum { C_F64, C_I64, C_BOOL } ckind;
static const struct {
    const char *key;
    ckind kind;
    size_t off;
    uint32_t have;
    double scale;
} config_keys[] = {
    {"beam_center_x", C_F64, offsetof(faid_input_meta, beam_center_x), FAID_META_BEAM_CENTER, 1},
    {"beam_center_y", C_F64, offsetof(faid_input_meta, beam_center_y), FAID_META_BEAM_CENTER, 1},
    {"detector_distance", C_F64, offsetof(faid_input_meta, detector_distance), FAID_META_DISTANCE,
     1},
    {"wavelength", C_F64, offsetof(faid_input_meta, incident_wavelength), FAID_META_WAVELENGTH, 1},
    {"photon_energy", C_F64, offsetof(faid_input_meta, incident_energy), FAID_META_ENERGY, 1},
    {"x_pixel_size", C_F64, offsetof(faid_input_meta, pixel_size_x), FAID_META_PIXEL_SIZE, 1},
    {"y_pixel_size", C_F64, offsetof(faid_input_meta, pixel_size_y), FAID_META_PIXEL_SIZE, 1},
    {"x_pixels_in_detector", C_I64, offsetof(faid_input_meta, image_size_x), FAID_META_IMAGE_SIZE,
     1},
    {"y_pixels_in_detector", C_I64, offsetof(faid_input_meta, image_size_y), FAID_META_IMAGE_SIZE,
     1},
    {"count_time", C_F64, offsetof(faid_input_meta, count_time), FAID_META_COUNT_TIME, 1},
    {"frame_time", C_F64, offsetof(faid_input_meta, frame_time), FAID_META_FRAME_TIME, 1},
    {"countrate_correction_count_cutoff", C_I64, offsetof(faid_input_meta, saturation_value),
     FAID_META_SATURATION, 1},
    {"sensor_thickness", C_F64, offsetof(faid_input_meta, sensor_thickness), FAID_META_SENSOR, 1},
    {"threshold_energy", C_F64, offsetof(faid_input_meta, threshold_energy), FAID_META_THRESHOLD,
     1},
    {"pixel_mask_applied", C_BOOL, offsetof(faid_input_meta, pixel_mask_enabled),
     FAID_META_MASK_ENABLED, 1},
    {"flatfield_correction_applied", C_BOOL, offsetof(faid_input_meta, flatfield_enabled),
     FAID_META_FLATFIELD_ENABLED, 1},
    {"countrate_correction_applied", C_BOOL,
     offsetof(faid_input_meta, countrate_correction_enabled), FAID_META_COUNTRATE_ENABLED, 1},
};

static void read_config(json_t *cfg, faid_input_meta *m)
{
    for (size_t k = 0; k < sizeof(config_keys) / sizeof(config_keys[0]); k++) {
        json_t *x = json_object_get(cfg, config_keys[k].key);
        if (!x)
            continue;
        void *dst = (char *)m + config_keys[k].off;
        if (config_keys[k].kind == C_BOOL) {
            json_t *v = json_is_object(x) ? json_object_get(x, "value") : x;
            if (!json_is_boolean(v))
                continue;
            *(int *)dst = json_is_true(v);
        } else {
            if (!is_num(x))
                continue; /* unknown shapes of a key are ignored, as unknown keys are */
            double v = num_value(x) * config_keys[k].scale;
            if (config_keys[k].kind == C_F64)
                *(double *)dst = v;
            else if (v >= -9.2e18 && v <= 9.2e18)
                *(int64_t *)dst = (int64_t)v;
            else
                continue;
        }
        m->have |= config_keys[k].have;
    }
    /* nimages per trigger x triggers = images of the series. */
    json_t *ni = json_object_get(cfg, "nimages"), *nt = json_object_get(cfg, "ntrigger");
    if (is_num(ni) && num_value(ni) >= 0 && num_value(ni) < 9e18) {
        double n = num_value(ni) * (is_num(nt) && num_value(nt) >= 1 ? num_value(nt) : 1);
        if (n < 9e18) {
            m->nimages = (int64_t)n;
            m->have |= FAID_META_NIMAGES;
        }
    }
    json_t *bits = json_object_get(cfg, "bit_depth_image");
    if (is_num(bits)) {
        int b = (int)num_value(bits);
        m->image_dtype = b == 8    ? FAID_DT_U8
                         : b == 16 ? FAID_DT_U16
                         : b == 32 ? FAID_DT_U32
                                   : FAID_DT_INVALID;
        if (m->image_dtype != FAID_DT_INVALID)
            m->have |= FAID_META_DTYPE;
    }
    const char *s;
    if ((s = str_value(json_object_get(cfg, "sensor_material"))))
        snprintf(m->sensor_material, sizeof(m->sensor_material), "%s", s);
    if ((s = str_value(json_object_get(cfg, "description"))))
        snprintf(m->detector_description, sizeof(m->detector_description), "%s", s);
    if ((s = str_value(json_object_get(cfg, "detector_number"))))
        snprintf(m->detector_serial_number, sizeof(m->detector_serial_number), "%s", s);
}

/* The detail parts of header_detail "all": {htype, shape, type} + blob, three times. */
static int read_detail_array(const faid_input_part *parts, int idx, int nparts,
                             const char *want_htype, faid_input_array *a, faid_diag *d)
{
    if (idx + 1 >= nparts)
        return faid_fail(d, FAID_EPROTO, "header_detail all: parts %d-%d (%s) missing", idx + 1,
                         idx + 2, want_htype);
    json_t *j;
    int rc = load_part(&parts[idx], idx, V1_JSON_MAX, &j, d);
    if (rc)
        return rc;
    const char *h = htype_of(j);
    if (!h || strcmp(h, want_htype) != 0) {
        rc = faid_fail(d, FAID_EPROTO, "part %d: htype \"%.40s\", expected \"%s\"", idx + 1,
                       h ? h : "", want_htype);
        json_decref(j);
        return rc;
    }
    memset(a, 0, sizeof(*a));
    if (!(rc = get_shape(j, idx, 1, a->shape, &a->ndim, d)))
        rc = get_type(j, idx, &a->dtype, d);
    json_decref(j);
    if (rc)
        return rc;
    a->encoding = FAID_ENC_NONE;
    a->data = parts[idx + 1].data;
    a->len = parts[idx + 1].len;
    a->part = idx + 1;
    if ((rc = check_blob(a, idx + 1, d)))
        return rc;
    a->present = 1;
    return 0;
}

static int decode_header(json_t *j0, const faid_input_part *parts, int nparts, faid_input_msg *m,
                         faid_diag *d)
{
    int rc = get_uint(j0, 0, "series", &m->h.series_id, 1, NULL, d);
    if (rc)
        return rc;
    json_t *hd = json_object_get(j0, "header_detail");
    const char *detail = json_is_string(hd) ? json_string_value(hd) : "";
    int base;
    if (strcmp(detail, "none") == 0)
        base = 1;
    else if (strcmp(detail, "basic") == 0)
        base = 2;
    else if (strcmp(detail, "all") == 0)
        base = 8;
    else
        return faid_fail(d, FAID_EFORMAT,
                         "part 1: key \"header_detail\": \"%.32s\", expected none, basic or all",
                         detail);
    snprintf(m->meta.header_detail, sizeof(m->meta.header_detail), "%s", detail);
    m->header_ok = 1;
    if (nparts != base && nparts != base + 1)
        return faid_fail(d, FAID_EPROTO,
                         "dheader-1.0 with header_detail %s has %d parts, expected %d (or %d "
                         "with a header appendix)",
                         detail, nparts, base, base + 1);
    if (base >= 2) {
        json_t *cfg;
        if ((rc = load_part(&parts[1], 1, V1_CONFIG_JSON_MAX, &cfg, d)))
            return rc;
        read_config(cfg, &m->meta);
        json_decref(cfg);
    }
    if (base == 8) {
        if ((rc = read_detail_array(parts, 2, nparts, "dflatfield-1.0", &m->meta.flatfield, d)) ||
            (rc = read_detail_array(parts, 4, nparts, "dpixelmask-1.0", &m->meta.pixel_mask, d)) ||
            (rc = read_detail_array(parts, 6, nparts, "dcountrate_table-1.0",
                                    &m->meta.countrate_table, d)))
            return rc;
        if (!faid_dtype_is_float(m->meta.flatfield.dtype))
            return faid_fail(d, FAID_EDTYPE, "part 3: flatfield of type %s, expected float",
                             faid_dtype_name(m->meta.flatfield.dtype));
        if (faid_dtype_size(m->meta.pixel_mask.dtype) != 4 ||
            faid_dtype_is_float(m->meta.pixel_mask.dtype))
            return faid_fail(d, FAID_EDTYPE, "part 5: pixel mask of type %s, expected uint32",
                             faid_dtype_name(m->meta.pixel_mask.dtype));
    }
    if (nparts == base + 1) {
        m->appendix = parts[base].data;
        m->appendix_len = parts[base].len;
    }
    if (m->meta.have & FAID_META_NIMAGES)
        m->h.nimages = m->meta.nimages;
    return 0;
}

/* ---- dimage-1.0 ----------------------------------------------------------------------------- */

static int decode_image(json_t *j0, const faid_input_part *parts, int nparts, faid_input_msg *m,
                        faid_diag *d)
{
    int rc = get_uint(j0, 0, "series", &m->h.series_id, 1, NULL, d);
    if (rc || (rc = get_uint(j0, 0, "frame", &m->h.frame_id, 1, NULL, d)))
        return rc;
    m->h.has_frame_id = 1;
    m->header_ok = 1;
    if (nparts != 4 && nparts != 5)
        return faid_fail(d, FAID_EPROTO,
                         "dimage-1.0 message has %d parts, expected 4 (dimage-1.0, dimage_d-1.0, "
                         "data, dconfig-1.0) or 5 with an image appendix",
                         nparts);
    json_t *j1;
    if ((rc = load_part(&parts[1], 1, V1_JSON_MAX, &j1, d)))
        return rc;
    const char *h = htype_of(j1);
    faid_input_array a;
    memset(&a, 0, sizeof(a));
    size_t bs_elem = 0;
    uint64_t size = 0;
    int have_size = 0;
    json_t *enc = json_object_get(j1, "encoding");
    if (!h || strcmp(h, "dimage_d-1.0") != 0)
        rc = faid_fail(d, FAID_EPROTO, "part 2: htype \"%.40s\", expected \"dimage_d-1.0\"",
                       h ? h : "");
    else if (!(rc = get_shape(j1, 1, 0, a.shape, &a.ndim, d)) &&
             !(rc = get_type(j1, 1, &a.dtype, d)) &&
             !(rc = get_uint(j1, 1, "size", &size, 0, &have_size, d))) {
        if (!json_is_string(enc))
            rc = faid_fail(d, FAID_EFORMAT, "part 2: missing text key \"encoding\"");
        else
            rc = parse_encoding(json_string_value(enc), 1, &a.encoding, &bs_elem, d);
    }
    json_decref(j1);
    if (rc)
        return rc;
    if (!faid_dtype_is_frame(a.dtype))
        return faid_fail(d, FAID_EDTYPE, "part 2: pixel type %s is not a frame type",
                         faid_dtype_name(a.dtype));
    if (bs_elem && bs_elem != faid_dtype_size(a.dtype))
        return faid_fail(d, FAID_EUNSUP,
                         "part 2: bitshuffle element of %zu bit(s) differs from the %s pixels",
                         bs_elem * 8, faid_dtype_name(a.dtype));
    a.data = parts[2].data;
    a.len = parts[2].len;
    a.part = 2;
    if (have_size && size != a.len)
        return faid_fail(d, FAID_ESIZE, "part 3: %zu bytes, but part 2 says \"size\": %llu", a.len,
                         (unsigned long long)size);
    if ((rc = check_blob(&a, 2, d)))
        return rc;
    json_t *j3;
    if ((rc = load_part(&parts[3], 3, V1_JSON_MAX, &j3, d)))
        return rc;
    h = htype_of(j3);
    if (!h || strcmp(h, "dconfig-1.0") != 0) {
        rc = faid_fail(d, FAID_EPROTO, "part 4: htype \"%.40s\", expected \"dconfig-1.0\"",
                       h ? h : "");
    } else {
        /* Times in ns: passed on as DECTRIS rationals [ns, 1e9]. */
        static const char *const keys[3] = {"start_time", "stop_time", "real_time"};
        uint64_t *dst[3] = {m->h.start_time, m->h.stop_time, m->h.real_time};
        int *has[3] = {&m->h.has_start_time, &m->h.has_stop_time, &m->h.has_real_time};
        for (int k = 0; k < 3 && !rc; k++) {
            rc = get_uint(j3, 3, keys[k], &dst[k][0], 0, has[k], d);
            dst[k][1] = 1000000000u;
        }
    }
    json_decref(j3);
    if (rc)
        return rc;
    m->h.rows = (int)a.shape[0];
    m->h.cols = (int)a.shape[1];
    m->h.dtype = a.dtype;
    m->h.encoding = a.encoding;
    m->payload_part = 2;
    m->payload = a.data;
    m->payload_len = a.len;
    if (nparts == 5) {
        m->appendix = parts[4].data;
        m->appendix_len = parts[4].len;
    }
    return 0;
}

/* Each message kind checks its own part count before reading any part beyond the first, and
 * reads at most FAID_INPUT_MAX_PARTS parts. */
static int v1_decode(const faid_input_part *parts, int nparts, const faid_input_opts *o,
                     faid_input_msg *m, faid_diag *d)
{
    if (!v1_detect(parts[0].data, parts[0].len))
        return faid_fail(d, FAID_EPROTO,
                         "part 1 (%zu bytes) is not a JSON object with \"htype\": not a DECTRIS "
                         "stream v1 message",
                         parts[0].len);
    json_t *j0;
    int rc = load_part(&parts[0], 0, V1_JSON_MAX, &j0, d);
    if (rc)
        return rc;
    const char *h = htype_of(j0);
    if (!h) {
        rc = faid_fail(d, FAID_EFORMAT, "part 1: key \"htype\" is not text");
    } else if (strcmp(h, "dimage-1.0") == 0) {
        m->h.type = FAID_IN_IMAGE;
        rc = decode_image(j0, parts, nparts, m, d);
    } else if (strcmp(h, "dheader-1.0") == 0) {
        m->h.type = FAID_IN_START;
        rc = decode_header(j0, parts, nparts, m, d);
    } else if (strcmp(h, "dseries_end-1.0") == 0) {
        m->h.type = FAID_IN_END;
        rc = get_uint(j0, 0, "series", &m->h.series_id, 1, NULL, d);
        if (!rc) {
            m->header_ok = 1;
            if (nparts != 1)
                rc = faid_fail(d, FAID_EPROTO, "dseries_end-1.0 message has %d parts, expected 1",
                               nparts);
        }
    } else if (strcmp(h, "dimage_d-1.0") == 0 || strcmp(h, "dconfig-1.0") == 0 ||
               strcmp(h, "dflatfield-1.0") == 0 || strcmp(h, "dpixelmask-1.0") == 0 ||
               strcmp(h, "dcountrate_table-1.0") == 0) {
        rc = faid_fail(d, FAID_EPROTO,
                       "part 1 has htype \"%s\", which only follows a dimage-1.0 or dheader-1.0 "
                       "part: the parts are out of step",
                       h);
    } else {
        rc = faid_fail(d, FAID_EPROTO, "part 1: unknown htype \"%.40s\"", h);
    }
    json_decref(j0);
    return rc;
}

const faid_input_format faid_input_dectris_v1 = {
    .protocol = FAID_PROTOCOL_DECTRIS_V1,
    .max_parts = FAID_INPUT_MAX_PARTS,
    .detect = v1_detect,
    .decode = v1_decode,
};
