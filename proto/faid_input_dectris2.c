/* faid_input_dectris2: DECTRIS stream v2 (one CBOR item per ZeroMQ message, self-described with
 * tag 55799 = d9 d9 f7) and Jungfraujoch's CBOR superset as an input format.
 *
 * A message is a map with text keys whose "type" is "start", "image" or "end" (Jungfraujoch adds
 * "calibration" and "metadata", reported as FAID_IN_OTHER). Images carry "data": a map channel ->
 * MultiDimArray (tag 40 over [[rows, cols], typed array]); typed arrays are RFC 8746 tags 64-87
 * over a byte string, or over tag 56500 ["bslz4" | "lz4", modifier, bytes] (DECTRIS compression
 * tag). The selected channel's bytes are handed out where they lie in the message (no copy).
 * Start messages give geometry, dtype, channels, and per channel the pixel mask, flatfield and
 * threshold; unknown keys (Jungfraujoch's extras among them) are skipped. Every read goes
 * through faid_cbor's cursor, which refuses container counts larger than the bytes left. Maps and
 * arrays are walked with faid_cbr_more, so definite and indefinite lengths (Jungfraujoch's
 * tinycbor writes the latter) read the same. */
#include "faid_input.h"

#include "faid_cbor.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TAG_SELF_DESCRIBED 55799u
#define TAG_MULTI_DIM      40u
#define TAG_MULTI_DIM_COL  1040u
#define TAG_TYPED_FIRST    64u
#define TAG_TYPED_LAST     87u
#define TAG_COMPRESSION    56500u
/* Largest accepted image dimension, as the native header's shape check. */
#define V2_MAX_DIM (1u << 20)

static int v2_detect(const void *first, size_t len)
{
    const uint8_t *b = first;
    return b && len >= 3 && b[0] == 0xd9 && b[1] == 0xd9 && b[2] == 0xf7;
}

/* RFC 8746 typed-array tag -> faid dtype: tag = 64 + 16 f + 8 s + 4 e + ll. Multi-byte
 * big-endian arrays and half / quad floats are refused. */
static int typed_dtype(uint64_t tag, faid_dtype *dt, faid_diag *d, const char *key)
{
    unsigned t = (unsigned)(tag - TAG_TYPED_FIRST);
    unsigned f = (t >> 4) & 1, s = (t >> 3) & 1, e = (t >> 2) & 1, ll = t & 3;
    static const faid_dtype uints[4] = {FAID_DT_U8, FAID_DT_U16, FAID_DT_U32, FAID_DT_U64};
    static const faid_dtype ints[4] = {FAID_DT_I8, FAID_DT_I16, FAID_DT_I32, FAID_DT_I64};
    static const faid_dtype floats[4] = {FAID_DT_INVALID, FAID_DT_F32, FAID_DT_F64,
                                         FAID_DT_INVALID};
    *dt = f ? floats[ll] : s ? ints[ll] : uints[ll];
    if (*dt == FAID_DT_INVALID)
        return faid_fail(d, FAID_EDTYPE,
                         "key \"%s\": typed-array tag %llu (%s float) is not "
                         "supported",
                         key, (unsigned long long)tag, ll == 0 ? "half" : "quad");
    if (!e && faid_dtype_size(*dt) > 1)
        return faid_fail(d, FAID_EDTYPE,
                         "key \"%s\": typed-array tag %llu is big-endian, only little-endian "
                         "arrays are supported",
                         key, (unsigned long long)tag);
    return 0;
}

/* Reads a typed array (tag 64-87 over bytes or over the compression tag) into a. The caller
 * sets a->shape first; the sizes are checked here against shape x dtype. */
static int read_typed(faid_cbr *r, const char *key, faid_input_array *a, faid_diag *d)
{
    faid_cb_obj o;
    int rc = faid_cbr_next(r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_CB_TAG || o.u < TAG_TYPED_FIRST || o.u > TAG_TYPED_LAST)
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected a typed array (CBOR tag 64-87)",
                         key);
    if ((rc = typed_dtype(o.u, &a->dtype, d, key)))
        return rc;
    size_t esz = faid_dtype_size(a->dtype);
    uint64_t modifier = 0;
    if ((rc = faid_cbr_next(r, &o, d)))
        return rc;
    a->encoding = FAID_ENC_NONE;
    if (o.type == FAID_CB_TAG) {
        if (o.u != TAG_COMPRESSION)
            return faid_fail(d, FAID_EFORMAT,
                             "key \"%s\": typed array holds tag %llu, expected bytes or the "
                             "compression tag 56500",
                             key, (unsigned long long)o.u);
        faid_cb_obj alg, mod;
        if ((rc = faid_cbr_next(r, &o, d)))
            return rc;
        if (!faid_cb_array_of(&o, 3))
            return faid_fail(d, FAID_EFORMAT,
                             "key \"%s\": compression tag 56500 must hold [algorithm, "
                             "modifier, bytes]",
                             key);
        faid_cb_obj arr = o;
        if ((rc = faid_cbr_next(r, &alg, d)) || (rc = faid_cbr_next(r, &mod, d)) ||
            (rc = faid_cbr_next(r, &o, d)) || (rc = faid_cbr_end(r, &arr, key, d)))
            return rc;
        if (alg.type != FAID_CB_TEXT || mod.type != FAID_CB_UINT)
            return faid_fail(d, FAID_EFORMAT,
                             "key \"%s\": compression tag 56500: algorithm must be text and "
                             "modifier an unsigned integer",
                             key);
        modifier = mod.u;
        if (faid_cb_text_eq(&alg, "bslz4")) {
            a->encoding = FAID_ENC_BSLZ4;
        } else if (faid_cb_text_eq(&alg, "lz4")) {
            a->encoding = FAID_ENC_LZ4;
        } else {
            char name[32];
            snprintf(name, sizeof(name), "%.*s", (int)(alg.len < 24 ? alg.len : 24),
                     (const char *)alg.ptr);
            return faid_fail(d, FAID_EUNSUP,
                             "key \"%s\": compression \"%s\" is not supported (bslz4, lz4)", key,
                             name);
        }
    }
    if (o.type != FAID_CB_BYTES)
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": typed array data is not a byte string", key);
    a->data = o.ptr;
    a->len = o.len;
    a->part = 0;
    uint64_t expect = a->shape[0] * a->shape[1] * esz;
    if (a->encoding == FAID_ENC_NONE) {
        if (a->len != expect)
            return faid_fail(d, FAID_ESIZE,
                             "key \"%s\": %zu data bytes, expected %llu (%llu x %llu %s)", key,
                             a->len, (unsigned long long)expect, (unsigned long long)a->shape[0],
                             (unsigned long long)a->shape[1], faid_dtype_name(a->dtype));
    } else {
        if (a->encoding == FAID_ENC_BSLZ4 && modifier != esz)
            return faid_fail(d, FAID_EUNSUP,
                             "key \"%s\": bslz4 element size %llu differs from the typed "
                             "array's %zu bytes",
                             key, (unsigned long long)modifier, esz);
        uint64_t total = 0;
        uint32_t block = 0;
        if ((rc = faid_bslz4_header(a->data, a->len, &total, &block, d))) {
            faid_diag_prefix(d, "key \"%s\": ", key);
            return rc;
        }
        if (total != expect)
            return faid_fail(d, FAID_ESIZE,
                             "key \"%s\": %s header says %llu decoded bytes, expected %llu "
                             "(%llu x %llu %s)",
                             key, faid_encoding_name(a->encoding), (unsigned long long)total,
                             (unsigned long long)expect, (unsigned long long)a->shape[0],
                             (unsigned long long)a->shape[1], faid_dtype_name(a->dtype));
    }
    a->present = 1;
    return 0;
}

/* Reads a MultiDimArray: tag 40 over [[rows, cols], typed array]. */
static int read_mda(faid_cbr *r, const char *key, faid_input_array *a, faid_diag *d)
{
    memset(a, 0, sizeof(*a));
    faid_cb_obj o;
    int rc = faid_cbr_next(r, &o, d);
    if (rc)
        return rc;
    if (o.type == FAID_CB_TAG && o.u == TAG_MULTI_DIM_COL)
        return faid_fail(d, FAID_EUNSUP, "key \"%s\": column-major array (tag 1040)", key);
    if (o.type != FAID_CB_TAG || o.u != TAG_MULTI_DIM)
        return faid_fail(d, FAID_EFORMAT,
                         "key \"%s\": expected a multi-dimensional array "
                         "(CBOR tag 40)",
                         key);
    faid_cb_obj outer, dims;
    if ((rc = faid_cbr_next(r, &outer, d)))
        return rc;
    if (!faid_cb_array_of(&outer, 2))
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": tag 40 must hold [dimensions, array]", key);
    if ((rc = faid_cbr_next(r, &dims, d)))
        return rc;
    if (!faid_cb_array_of(&dims, 2))
        return faid_fail(d, FAID_ESHAPE, "key \"%s\": dimensions must be [rows, cols]", key);
    for (int k = 0; k < 2; k++) {
        faid_cb_obj e;
        if ((rc = faid_cbr_next(r, &e, d)))
            return rc;
        if (e.type != FAID_CB_UINT || e.u == 0 || e.u > V2_MAX_DIM)
            return faid_fail(d, FAID_ESHAPE, "key \"%s\": dimension %d must be in 1..%u", key, k,
                             V2_MAX_DIM);
        a->shape[k] = e.u;
    }
    if ((rc = faid_cbr_end(r, &dims, key, d)))
        return rc;
    a->ndim = 2;
    if ((rc = read_typed(r, key, a, d)))
        return rc;
    return faid_cbr_end(r, &outer, key, d);
}

static int read_rational(faid_cbr *r, const char *key, uint64_t out[2], faid_diag *d)
{
    faid_cb_obj o, a, b;
    int rc = faid_cbr_next(r, &o, d);
    if (rc)
        return rc;
    if (!faid_cb_array_of(&o, 2))
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected [numerator, denominator]", key);
    if ((rc = faid_cbr_next(r, &a, d)) || (rc = faid_cbr_next(r, &b, d)) ||
        (rc = faid_cbr_end(r, &o, key, d)))
        return rc;
    if (faid_cb_to_u64(&a, &out[0], key, d) || faid_cb_to_u64(&b, &out[1], key, d))
        return FAID_EFORMAT;
    return 0;
}

static int next_value(faid_cbr *r, faid_cb_obj *o, faid_diag *d)
{
    return faid_cbr_next(r, o, d);
}

/* Text of a value whose length is only informative (descriptions): cut to fit. */
static int read_text_cut(faid_cbr *r, const char *key, char *out, size_t cap, faid_diag *d)
{
    faid_cb_obj o;
    int rc = next_value(r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_CB_TEXT)
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected a text string", key);
    size_t n = o.len < cap - 1 ? o.len : cap - 1;
    for (size_t k = 0; k < n; k++)
        out[k] = o.ptr[k] ? (char)o.ptr[k] : '?';
    out[n] = '\0';
    return 0;
}

/* Numeric start keys: one table row per key. */
typedef enum { K_F64, K_I64, K_BOOL } kkind;
static const struct {
    const char *key;
    kkind kind;
    size_t off;
    uint32_t have;
} start_keys[] = {
    {"beam_center_x", K_F64, offsetof(faid_input_meta, beam_center_x), FAID_META_BEAM_CENTER},
    {"beam_center_y", K_F64, offsetof(faid_input_meta, beam_center_y), FAID_META_BEAM_CENTER},
    {"detector_distance", K_F64, offsetof(faid_input_meta, detector_distance), FAID_META_DISTANCE},
    {"incident_wavelength", K_F64, offsetof(faid_input_meta, incident_wavelength),
     FAID_META_WAVELENGTH},
    {"incident_energy", K_F64, offsetof(faid_input_meta, incident_energy), FAID_META_ENERGY},
    {"pixel_size_x", K_F64, offsetof(faid_input_meta, pixel_size_x), FAID_META_PIXEL_SIZE},
    {"pixel_size_y", K_F64, offsetof(faid_input_meta, pixel_size_y), FAID_META_PIXEL_SIZE},
    {"image_size_x", K_I64, offsetof(faid_input_meta, image_size_x), FAID_META_IMAGE_SIZE},
    {"image_size_y", K_I64, offsetof(faid_input_meta, image_size_y), FAID_META_IMAGE_SIZE},
    {"number_of_images", K_I64, offsetof(faid_input_meta, nimages), FAID_META_NIMAGES},
    {"count_time", K_F64, offsetof(faid_input_meta, count_time), FAID_META_COUNT_TIME},
    {"frame_time", K_F64, offsetof(faid_input_meta, frame_time), FAID_META_FRAME_TIME},
    {"saturation_value", K_I64, offsetof(faid_input_meta, saturation_value), FAID_META_SATURATION},
    {"error_value", K_I64, offsetof(faid_input_meta, error_value), FAID_META_ERROR_VALUE},
    {"sensor_thickness", K_F64, offsetof(faid_input_meta, sensor_thickness), FAID_META_SENSOR},
    {"magic_number", K_I64, offsetof(faid_input_meta, magic_number), FAID_META_MAGIC},
    {"pixel_mask_enabled", K_BOOL, offsetof(faid_input_meta, pixel_mask_enabled),
     FAID_META_MASK_ENABLED},
    {"flatfield_enabled", K_BOOL, offsetof(faid_input_meta, flatfield_enabled),
     FAID_META_FLATFIELD_ENABLED},
    {"countrate_correction_enabled", K_BOOL,
     offsetof(faid_input_meta, countrate_correction_enabled), FAID_META_COUNTRATE_ENABLED},
};

static int read_start_number(faid_cbr *r, size_t row, faid_input_meta *meta, faid_diag *d)
{
    faid_cb_obj o;
    int rc = next_value(r, &o, d);
    if (rc)
        return rc;
    void *dst = (char *)meta + start_keys[row].off;
    const char *key = start_keys[row].key;
    switch (start_keys[row].kind) {
    case K_F64:
        if ((rc = faid_cb_to_f64(&o, dst, key, d)))
            return rc;
        break;
    case K_I64:
        /* magic_number is a uint64 that may exceed int64: keep its bits. */
        if (o.type == FAID_CB_UINT && start_keys[row].have == FAID_META_MAGIC) {
            memcpy(dst, &o.u, sizeof(o.u));
            break;
        }
        if ((rc = faid_cb_to_i64(&o, dst, key, d)))
            return rc;
        break;
    case K_BOOL:
        if (o.type != FAID_CB_BOOL)
            return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected true or false", key);
        *(int *)dst = o.b;
        break;
    }
    meta->have |= start_keys[row].have;
    return 0;
}

/* Per-channel map (pixel_mask, flatfield, threshold_energy): the value of channel `want`, or
 * of the first entry when want is "". reader(r, key) reads one value at r into out. */
typedef int (*value_reader)(faid_cbr *r, const char *key, void *out, faid_diag *d);

static int read_channel_map(faid_cbr *r, const char *key, const char *want, value_reader rd,
                            void *out, int *found, faid_diag *d)
{
    faid_cb_obj o;
    int rc = next_value(r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_CB_MAP)
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected a map channel -> value", key);
    *found = 0;
    for (uint64_t k = 0;; k++) {
        int more = 0;
        if ((rc = faid_cbr_more(r, &o, k, &more, key, d)))
            return rc;
        if (!more)
            break;
        faid_cb_obj name;
        if ((rc = faid_cbr_next(r, &name, d)))
            return rc;
        if (name.type != FAID_CB_TEXT)
            return faid_fail(d, FAID_EFORMAT, "key \"%s\": channel names must be text", key);
        int take = !*found && (want[0] == '\0' || faid_cb_text_eq(&name, want));
        if (take) {
            if ((rc = rd(r, key, out, d)))
                return rc;
            *found = 1;
        } else if ((rc = faid_cbr_skip(r, d))) {
            faid_diag_prefix(d, "key \"%s\": ", key);
            return rc;
        }
    }
    return 0;
}

static int rd_mda(faid_cbr *r, const char *key, void *out, faid_diag *d)
{
    return read_mda(r, key, out, d);
}

static int rd_f64(faid_cbr *r, const char *key, void *out, faid_diag *d)
{
    faid_cb_obj o;
    int rc = next_value(r, &o, d);
    return rc ? rc : faid_cb_to_f64(&o, out, key, d);
}

/* A 1D typed array (count-rate lookup table), possibly compressed. */
static int read_table(faid_cbr *r, const char *key, faid_input_array *a, faid_diag *d)
{
    memset(a, 0, sizeof(*a));
    /* Peek: the table's length is only known from its bytes. */
    faid_cbr peek = *r;
    faid_cb_obj o;
    int rc = faid_cbr_next(&peek, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_CB_TAG || o.u < TAG_TYPED_FIRST || o.u > TAG_TYPED_LAST)
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected a typed array", key);
    faid_dtype dt;
    if ((rc = typed_dtype(o.u, &dt, d, key)))
        return rc;
    if ((rc = faid_cbr_next(&peek, &o, d)))
        return rc;
    size_t n = 0, esz = faid_dtype_size(dt);
    if (o.type == FAID_CB_BYTES) {
        n = o.len / esz;
    } else {
        /* Compressed: the element count follows from the 12-byte header of the bytes. */
        faid_cb_obj arr, alg, mod, bytes;
        if ((rc = faid_cbr_next(&peek, &arr, d)) || (rc = faid_cbr_next(&peek, &alg, d)) ||
            (rc = faid_cbr_next(&peek, &mod, d)) || (rc = faid_cbr_next(&peek, &bytes, d)))
            return rc;
        uint64_t total = 0;
        uint32_t block = 0;
        if (bytes.type != FAID_CB_BYTES ||
            faid_bslz4_header(bytes.ptr, bytes.len, &total, &block, d))
            return faid_fail(d, FAID_EFORMAT, "key \"%s\": unreadable compressed table", key);
        n = (size_t)(total / esz);
    }
    if (n == 0 || n > (size_t)V2_MAX_DIM * 16)
        return faid_fail(d, FAID_ESIZE, "key \"%s\": table of %zu entries", key, n);
    a->ndim = 1;
    a->shape[0] = n;
    a->shape[1] = 1;
    return read_typed(r, key, a, d);
}

/* Skips the value of top-level key `key`; an error (a truncated value, an indefinite-length
 * container without its break) names the key. */
static int skip_value(faid_cbr *r, const faid_cb_obj *key, faid_diag *d)
{
    int rc = faid_cbr_skip(r, d);
    if (rc)
        faid_diag_prefix(d, "key \"%.*s\": ", (int)(key->len < 64 ? key->len : 64),
                         (const char *)key->ptr);
    return rc;
}

/* Positions r on the message map (after the optional self-described tag: DECTRIS always sends
 * it, and auto detection relies on it; with input.protocol dectris-v2 a bare map is read too). */
static int open_map(faid_cbr *r, const faid_input_part *p, faid_cb_obj *o, faid_diag *d)
{
    faid_cbr_init(r, p->data, p->len);
    const uint8_t *b = p->data;
    if (!v2_detect(p->data, p->len) && (p->len == 0 || (b[0] & 0xe0) != 0xa0))
        return faid_fail(d, FAID_EPROTO,
                         "part 1 (%zu bytes, first byte 0x%02x) is neither tagged CBOR "
                         "(d9 d9 f7) nor a CBOR map: not a DECTRIS stream v2 message",
                         p->len, p->len ? b[0] : 0);
    int rc = faid_cbr_next(r, o, d);
    if (rc)
        return rc;
    if (o->type == FAID_CB_TAG && o->u == TAG_SELF_DESCRIBED && (rc = faid_cbr_next(r, o, d)))
        return rc;
    if (o->type != FAID_CB_MAP)
        return faid_fail(d, FAID_EPROTO,
                         "part 1 is not a CBOR map (after the optional tag 55799): not a "
                         "DECTRIS stream v2 message");
    return 0;
}

/* Pass 1 over the top-level map: the type and, for starts, the channel list (needed before the
 * per-channel maps, whatever the key order). */
static int scan_top(const faid_input_part *p, faid_input_msg *m, faid_diag *d)
{
    faid_cbr r;
    faid_cb_obj o;
    int rc = open_map(&r, p, &o, d);
    if (rc)
        return rc;
    int have_type = 0;
    for (uint64_t k = 0;; k++) {
        int more = 0;
        if ((rc = faid_cbr_more(&r, &o, k, &more, "message map", d)))
            return rc;
        if (!more)
            break;
        faid_cb_obj key, v;
        if ((rc = faid_cbr_next(&r, &key, d)))
            return rc;
        if (key.type != FAID_CB_TEXT)
            return faid_fail(d, FAID_EFORMAT, "map key %llu is not text", (unsigned long long)k);
        if (faid_cb_text_eq(&key, "type")) {
            if ((rc = faid_cbr_next(&r, &v, d)))
                return rc;
            if (v.type != FAID_CB_TEXT)
                return faid_fail(d, FAID_EFORMAT, "key \"type\": expected text");
            have_type = 1;
            if (faid_cb_text_eq(&v, "image"))
                m->h.type = FAID_IN_IMAGE;
            else if (faid_cb_text_eq(&v, "start"))
                m->h.type = FAID_IN_START;
            else if (faid_cb_text_eq(&v, "end"))
                m->h.type = FAID_IN_END;
            else {
                m->h.type = FAID_IN_OTHER;
                snprintf(
                    m->other_type, sizeof(m->other_type), "%.*s",
                    (int)(v.len < sizeof(m->other_type) - 1 ? v.len : sizeof(m->other_type) - 1),
                    (const char *)v.ptr);
                for (char *c = m->other_type; *c; c++)
                    if (*c < 0x20 || *c > 0x7e)
                        *c = '?';
            }
        } else if (faid_cb_text_eq(&key, "channels")) {
            if ((rc = faid_cbr_next(&r, &v, d)))
                return rc;
            if (v.type != FAID_CB_ARRAY)
                return faid_fail(d, FAID_EFORMAT, "key \"channels\": expected an array of names");
            m->meta.nchannels = 0;
            for (uint64_t c = 0;; c++) {
                int more_names = 0;
                if ((rc = faid_cbr_more(&r, &v, c, &more_names, "key \"channels\"", d)))
                    return rc;
                if (!more_names)
                    break;
                if (c >= FAID_INPUT_MAX_CHANNELS)
                    return faid_fail(
                        d, FAID_ERANGE, "key \"channels\": %llu channels or more, at most %d",
                        (unsigned long long)(v.indef ? c + 1 : v.u), FAID_INPUT_MAX_CHANNELS);
                faid_cb_obj name;
                if ((rc = faid_cbr_next(&r, &name, d)))
                    return rc;
                m->meta.nchannels = (int)c + 1;
                if ((rc = faid_cb_to_cstr(&name, m->meta.channels[c], FAID_INPUT_NAME_MAX,
                                          "channels", d)))
                    return rc;
            }
        } else if ((rc = skip_value(&r, &key, d))) {
            return rc;
        }
    }
    if (r.p != r.end)
        return faid_fail(d, FAID_EFORMAT, "%zu trailing bytes after the message map",
                         (size_t)(r.end - r.p));
    if (!have_type)
        return faid_fail(d, FAID_EFORMAT, "missing key \"type\"");
    return 0;
}

/* The image's "data" map: the selected channel's array becomes the frame. */
static int read_image_data(faid_cbr *r, const faid_input_opts *o, faid_input_msg *m, faid_diag *d)
{
    faid_cb_obj v;
    int rc = faid_cbr_next(r, &v, d);
    if (rc)
        return rc;
    if (v.type != FAID_CB_MAP)
        return faid_fail(d, FAID_EFORMAT, "key \"data\": expected a map channel -> array");
    const char *want = o->channel ? o->channel : "";
    char names[256] = "";
    size_t nl = 0;
    faid_input_array a;
    memset(&a, 0, sizeof(a));
    uint64_t k = 0;
    for (;; k++) {
        int more = 0;
        if ((rc = faid_cbr_more(r, &v, k, &more, "key \"data\"", d)))
            return rc;
        if (!more)
            break;
        faid_cb_obj name;
        if ((rc = faid_cbr_next(r, &name, d)))
            return rc;
        if (name.type != FAID_CB_TEXT)
            return faid_fail(d, FAID_EFORMAT, "key \"data\": channel names must be text");
        if (nl < sizeof(names) - 1) {
            int w = snprintf(names + nl, sizeof(names) - nl, "%s\"%.*s\"", k ? ", " : "",
                             (int)(name.len < 64 ? name.len : 64), (const char *)name.ptr);
            nl = w > 0 ? nl + (size_t)w : nl;
            if (nl > sizeof(names) - 1)
                nl = sizeof(names) - 1;
        }
        int take = !a.present && (want[0] == '\0' || faid_cb_text_eq(&name, want));
        if (!take) {
            if ((rc = faid_cbr_skip(r, d))) {
                faid_diag_prefix(d, "key \"data\": ");
                return rc;
            }
            continue;
        }
        char key[FAID_INPUT_NAME_MAX + 8];
        snprintf(key, sizeof(key), "data.%.*s", (int)(name.len < 64 ? name.len : 64),
                 (const char *)name.ptr);
        if ((rc = read_mda(r, key, &a, d)))
            return rc;
        m->channel_index = (int)k;
        snprintf(m->channel, sizeof(m->channel), "%.*s",
                 (int)(name.len < FAID_INPUT_NAME_MAX - 1 ? name.len : FAID_INPUT_NAME_MAX - 1),
                 (const char *)name.ptr);
    }
    if (!a.present) {
        if (want[0])
            return faid_fail(d, FAID_ERANGE,
                             "image %llu: channel \"%s\" (input.channel) is not in \"data\" "
                             "(has %s)",
                             (unsigned long long)m->h.frame_id, want, k ? names : "none");
        return faid_fail(d, FAID_EFORMAT, "image %llu: key \"data\" holds no channel",
                         (unsigned long long)m->h.frame_id);
    }
    if (!faid_dtype_is_frame(a.dtype))
        return faid_fail(d, FAID_EDTYPE,
                         "image %llu: channel \"%s\" has pixel type %s, not a "
                         "frame type",
                         (unsigned long long)m->h.frame_id, m->channel, faid_dtype_name(a.dtype));
    m->h.rows = (int)a.shape[0];
    m->h.cols = (int)a.shape[1];
    m->h.dtype = a.dtype;
    m->h.encoding = a.encoding;
    m->payload_part = 0;
    m->payload = a.data;
    m->payload_len = a.len;
    return 0;
}

static int v2_decode(const faid_input_part *parts, int nparts, const faid_input_opts *o,
                     faid_input_msg *m, faid_diag *d)
{
    int rc = scan_top(&parts[0], m, d);
    if (rc)
        return rc;
    /* The channel a start's per-channel maps are read for. */
    char want[FAID_INPUT_NAME_MAX] = "";
    if (o->channel && o->channel[0]) {
        snprintf(want, sizeof(want), "%s", o->channel);
        if (m->h.type == FAID_IN_START && m->meta.nchannels > 0) {
            int found = 0;
            for (int c = 0; c < m->meta.nchannels; c++)
                found |= strcmp(m->meta.channels[c], want) == 0;
            if (!found)
                return faid_fail(d, FAID_ERANGE,
                                 "start: channel \"%s\" (input.channel) is not among the %d "
                                 "channels of key \"channels\"",
                                 want, m->meta.nchannels);
        }
    } else if (m->meta.nchannels > 0) {
        snprintf(want, sizeof(want), "%s", m->meta.channels[0]);
    }

    faid_cbr r;
    faid_cb_obj v;
    if ((rc = open_map(&r, &parts[0], &v, d)))
        return rc;
    const faid_cb_obj top = v;
    int have_series = 0, have_image_id = 0, have_data = 0;
    for (uint64_t k = 0;; k++) {
        int more = 0;
        if ((rc = faid_cbr_more(&r, &top, k, &more, "message map", d)))
            return rc;
        if (!more)
            break;
        faid_cb_obj key;
        if ((rc = faid_cbr_next(&r, &key, d)))
            return rc;
        int common = 1;
        if (faid_cb_text_eq(&key, "series_id")) {
            if ((rc = next_value(&r, &v, d)) ||
                (rc = faid_cb_to_u64(&v, &m->h.series_id, "series_id", d)))
                return rc;
            have_series = 1;
        } else if (faid_cb_text_eq(&key, "series_unique_id")) {
            if ((rc = next_value(&r, &v, d)) ||
                (rc = faid_cb_to_cstr(&v, m->h.series_unique_id, sizeof(m->h.series_unique_id),
                                      "series_unique_id", d)))
                return rc;
        } else if (faid_cb_text_eq(&key, "user_data")) {
            const uint8_t *at = r.p;
            if ((rc = skip_value(&r, &key, d)))
                return rc;
            m->appendix = at;
            m->appendix_len = (size_t)(r.p - at);
        } else {
            common = 0;
        }
        if (common)
            continue;
        if (m->h.type == FAID_IN_IMAGE) {
            if (faid_cb_text_eq(&key, "image_id")) {
                if ((rc = next_value(&r, &v, d)) ||
                    (rc = faid_cb_to_u64(&v, &m->h.frame_id, "image_id", d)))
                    return rc;
                m->h.has_frame_id = 1;
                have_image_id = 1;
                continue;
            }
            if (faid_cb_text_eq(&key, "data")) {
                /* Read after the loop, once image_id is known for the messages. */
                faid_cbr at = r;
                if ((rc = skip_value(&r, &key, d)))
                    return rc;
                have_data = 1;
                m->payload = at.p; /* position of the data map, replaced below */
                m->payload_len = (size_t)(r.p - at.p);
                continue;
            }
            uint64_t *rat = faid_cb_text_eq(&key, "start_time")  ? m->h.start_time
                            : faid_cb_text_eq(&key, "stop_time") ? m->h.stop_time
                            : faid_cb_text_eq(&key, "real_time") ? m->h.real_time
                                                                 : NULL;
            if (rat) {
                char name[16];
                snprintf(name, sizeof(name), "%.*s", (int)key.len, (const char *)key.ptr);
                if ((rc = read_rational(&r, name, rat, d)))
                    return rc;
                if (rat == m->h.start_time)
                    m->h.has_start_time = 1;
                else if (rat == m->h.stop_time)
                    m->h.has_stop_time = 1;
                else
                    m->h.has_real_time = 1;
                continue;
            }
        } else if (m->h.type == FAID_IN_START) {
            faid_input_meta *meta = &m->meta;
            size_t row = 0, nrows = sizeof(start_keys) / sizeof(start_keys[0]);
            while (row < nrows && !faid_cb_text_eq(&key, start_keys[row].key))
                row++;
            if (row < nrows) {
                if ((rc = read_start_number(&r, row, meta, d)))
                    return rc;
                continue;
            }
            int found = 0;
            if (faid_cb_text_eq(&key, "image_dtype")) {
                char text[32];
                if ((rc = next_value(&r, &v, d)) ||
                    (rc = faid_cb_to_cstr(&v, text, sizeof(text), "image_dtype", d)))
                    return rc;
                meta->image_dtype = faid_dtype_parse(text);
                if (!faid_dtype_is_frame(meta->image_dtype))
                    return faid_fail(d, FAID_EDTYPE,
                                     "key \"image_dtype\": \"%s\" is not a "
                                     "frame type",
                                     text);
                meta->have |= FAID_META_DTYPE;
            } else if (faid_cb_text_eq(&key, "pixel_mask")) {
                if ((rc = read_channel_map(&r, "pixel_mask", want, rd_mda, &meta->pixel_mask,
                                           &found, d)))
                    return rc;
                if (found && faid_dtype_size(meta->pixel_mask.dtype) != 4)
                    return faid_fail(d, FAID_EDTYPE,
                                     "key \"pixel_mask\": %s mask, expected "
                                     "32-bit",
                                     faid_dtype_name(meta->pixel_mask.dtype));
            } else if (faid_cb_text_eq(&key, "flatfield")) {
                if ((rc = read_channel_map(&r, "flatfield", want, rd_mda, &meta->flatfield, &found,
                                           d)))
                    return rc;
                if (found && !faid_dtype_is_float(meta->flatfield.dtype))
                    return faid_fail(d, FAID_EDTYPE, "key \"flatfield\": %s, expected float",
                                     faid_dtype_name(meta->flatfield.dtype));
            } else if (faid_cb_text_eq(&key, "threshold_energy")) {
                if ((rc = read_channel_map(&r, "threshold_energy", want, rd_f64,
                                           &meta->threshold_energy, &found, d)))
                    return rc;
                if (found)
                    meta->have |= FAID_META_THRESHOLD;
            } else if (faid_cb_text_eq(&key, "countrate_correction_lookup_table")) {
                if ((rc = read_table(&r, "countrate_correction_lookup_table",
                                     &meta->countrate_table, d)))
                    return rc;
            } else if (faid_cb_text_eq(&key, "detector_translation")) {
                if ((rc = next_value(&r, &v, d)))
                    return rc;
                if (!faid_cb_array_of(&v, 3))
                    return faid_fail(d, FAID_EFORMAT,
                                     "key \"detector_translation\": expected 3 numbers");
                const faid_cb_obj tr = v;
                for (int j = 0; j < 3; j++) {
                    faid_cb_obj e;
                    if ((rc = faid_cbr_next(&r, &e, d)) ||
                        (rc = faid_cb_to_f64(&e, &meta->detector_translation[j],
                                             "detector_translation", d)))
                        return rc;
                }
                if ((rc = faid_cbr_end(&r, &tr, "detector_translation", d)))
                    return rc;
                meta->have |= FAID_META_TRANSLATION;
            } else if (faid_cb_text_eq(&key, "sensor_material")) {
                if ((rc = read_text_cut(&r, "sensor_material", meta->sensor_material,
                                        sizeof(meta->sensor_material), d)))
                    return rc;
                meta->have |= FAID_META_SENSOR;
            } else if (faid_cb_text_eq(&key, "detector_description")) {
                if ((rc = read_text_cut(&r, "detector_description", meta->detector_description,
                                        sizeof(meta->detector_description), d)))
                    return rc;
            } else if (faid_cb_text_eq(&key, "detector_serial_number")) {
                if ((rc = read_text_cut(&r, "detector_serial_number", meta->detector_serial_number,
                                        sizeof(meta->detector_serial_number), d)))
                    return rc;
            } else if ((rc = skip_value(&r, &key, d))) {
                return rc;
            }
            continue;
        }
        /* Unknown keys (goniometer, arm_date, series_date, Jungfraujoch's extras, ...). */
        if ((rc = skip_value(&r, &key, d)))
            return rc;
    }
    if (m->h.type == FAID_IN_OTHER)
        return 0;
    if (!have_series)
        return faid_fail(d, FAID_EFORMAT, "%s message: missing key \"series_id\"",
                         faid_in_type_name(m->h.type));
    if (m->h.type == FAID_IN_START && (m->meta.have & FAID_META_NIMAGES))
        m->h.nimages = m->meta.nimages;
    if (m->h.type == FAID_IN_IMAGE && !have_image_id)
        return faid_fail(d, FAID_EFORMAT, "image message: missing key \"image_id\"");
    m->header_ok = 1;
    if (nparts != 1)
        return faid_fail(d, FAID_EPROTO,
                         "DECTRIS stream v2 %s message has %d parts, expected 1 (one CBOR item)",
                         faid_in_type_name(m->h.type), nparts);
    if (m->h.type != FAID_IN_IMAGE)
        return 0;
    if (!have_data)
        return faid_fail(d, FAID_EFORMAT, "image %llu: missing key \"data\"",
                         (unsigned long long)m->h.frame_id);
    faid_cbr at;
    faid_cbr_init(&at, m->payload, m->payload_len);
    m->payload = NULL;
    m->payload_len = 0;
    return read_image_data(&at, o, m, d);
}

const faid_input_format faid_input_dectris_v2 = {
    .protocol = FAID_PROTOCOL_DECTRIS_V2,
    .max_parts = 1,
    .detect = v2_detect,
    .decode = v2_decode,
};
