/* faid_cbor: bounds-checked CBOR cursor on libcbor's streaming decoder (see faid_cbor.h). */
#include "faid_cbor.h"

#include <cbor.h>
#include <math.h>
#include <string.h>

/* What one libcbor callback reports. */
typedef struct head {
    faid_cb_obj *o;
    int seen;
    int indef_string; /* a chunked byte or text string: refused */
} head;

#define CTX(c) ((head *)(c))

static void set_uint(void *c, uint64_t v)
{
    CTX(c)->o->type = FAID_CB_UINT;
    CTX(c)->o->u = v;
    CTX(c)->seen = 1;
}
static void cb_u8(void *c, uint8_t v)
{
    set_uint(c, v);
}
static void cb_u16(void *c, uint16_t v)
{
    set_uint(c, v);
}
static void cb_u32(void *c, uint32_t v)
{
    set_uint(c, v);
}
static void cb_u64(void *c, uint64_t v)
{
    set_uint(c, v);
}

static void set_neg(void *c, uint64_t v)
{
    CTX(c)->o->type = FAID_CB_NEGINT;
    CTX(c)->o->u = v;
    CTX(c)->seen = 1;
}
static void cb_n8(void *c, uint8_t v)
{
    set_neg(c, v);
}
static void cb_n16(void *c, uint16_t v)
{
    set_neg(c, v);
}
static void cb_n32(void *c, uint32_t v)
{
    set_neg(c, v);
}
static void cb_n64(void *c, uint64_t v)
{
    set_neg(c, v);
}

static void cb_bytes(void *c, cbor_data p, size_t n)
{
    CTX(c)->o->type = FAID_CB_BYTES;
    CTX(c)->o->ptr = p;
    CTX(c)->o->len = n;
    CTX(c)->seen = 1;
}
static void cb_text(void *c, cbor_data p, size_t n)
{
    CTX(c)->o->type = FAID_CB_TEXT;
    CTX(c)->o->ptr = p;
    CTX(c)->o->len = n;
    CTX(c)->seen = 1;
}
static void cb_indef_string(void *c)
{
    CTX(c)->indef_string = 1;
    CTX(c)->seen = 1;
}
static void cb_indef_array(void *c)
{
    CTX(c)->o->type = FAID_CB_ARRAY;
    CTX(c)->o->indef = 1;
    CTX(c)->seen = 1;
}
static void cb_indef_map(void *c)
{
    CTX(c)->o->type = FAID_CB_MAP;
    CTX(c)->o->indef = 1;
    CTX(c)->seen = 1;
}
static void cb_break(void *c)
{
    CTX(c)->o->type = FAID_CB_BREAK;
    CTX(c)->seen = 1;
}
static void cb_array(void *c, size_t n)
{
    CTX(c)->o->type = FAID_CB_ARRAY;
    CTX(c)->o->u = n;
    CTX(c)->seen = 1;
}
static void cb_map(void *c, size_t n)
{
    CTX(c)->o->type = FAID_CB_MAP;
    CTX(c)->o->u = n;
    CTX(c)->seen = 1;
}
static void cb_tag(void *c, uint64_t v)
{
    CTX(c)->o->type = FAID_CB_TAG;
    CTX(c)->o->u = v;
    CTX(c)->seen = 1;
}
static void cb_float(void *c, float v)
{
    CTX(c)->o->type = FAID_CB_FLOAT;
    CTX(c)->o->f = v;
    CTX(c)->seen = 1;
}
static void cb_double(void *c, double v)
{
    CTX(c)->o->type = FAID_CB_FLOAT;
    CTX(c)->o->f = v;
    CTX(c)->seen = 1;
}
static void cb_undef(void *c)
{
    CTX(c)->o->type = FAID_CB_UNDEF;
    CTX(c)->seen = 1;
}
static void cb_null(void *c)
{
    CTX(c)->o->type = FAID_CB_NULL;
    CTX(c)->seen = 1;
}
static void cb_bool(void *c, bool v)
{
    CTX(c)->o->type = FAID_CB_BOOL;
    CTX(c)->o->b = v;
    CTX(c)->seen = 1;
}

/* libcbor's names for the string callbacks are easy to swap: `byte_string` / `string` receive a
 * definite string, `byte_string_start` / `string_start` announce an indefinite one. */
static const struct cbor_callbacks callbacks = {
    .uint8 = cb_u8,
    .uint16 = cb_u16,
    .uint32 = cb_u32,
    .uint64 = cb_u64,
    .negint8 = cb_n8,
    .negint16 = cb_n16,
    .negint32 = cb_n32,
    .negint64 = cb_n64,
    .byte_string = cb_bytes,
    .byte_string_start = cb_indef_string,
    .string = cb_text,
    .string_start = cb_indef_string,
    .array_start = cb_array,
    .indef_array_start = cb_indef_array,
    .map_start = cb_map,
    .indef_map_start = cb_indef_map,
    .tag = cb_tag,
    .float2 = cb_float,
    .float4 = cb_float,
    .float8 = cb_double,
    .undefined = cb_undef,
    .null = cb_null,
    .boolean = cb_bool,
    .indef_break = cb_break,
};

void faid_cbr_init(faid_cbr *r, const void *buf, size_t len)
{
    r->p = buf;
    r->end = r->p + (buf ? len : 0);
}

int faid_cbr_next(faid_cbr *r, faid_cb_obj *o, faid_diag *d)
{
    memset(o, 0, sizeof(*o));
    size_t left = (size_t)(r->end - r->p);
    if (left == 0)
        return faid_fail(d, FAID_ETRUNC, "CBOR item missing at the end of the message");
    head h = {.o = o};
    struct cbor_decoder_result res = cbor_stream_decode(r->p, left, &callbacks, &h);
    if (res.status == CBOR_DECODER_NEDATA)
        return faid_fail(d, FAID_ETRUNC, "CBOR item truncated (%zu bytes left, needs more)", left);
    if (res.status != CBOR_DECODER_FINISHED || !h.seen || res.read == 0 || res.read > left)
        return faid_fail(d, FAID_EFORMAT, "malformed CBOR item (first byte 0x%02x)", r->p[0]);
    if (h.indef_string)
        return faid_fail(d, FAID_EUNSUP,
                         "indefinite-length (chunked) CBOR %s string (first byte 0x%02x) is not "
                         "supported",
                         (r->p[0] >> 5) == 2 ? "byte" : "text", r->p[0]);
    r->p += res.read;
    left -= res.read;
    /* Every item takes at least one byte: a count above the bytes left is a lie, refused before
     * anyone sizes anything by it. */
    if (o->type == FAID_CB_ARRAY && o->u > left)
        return faid_fail(d, FAID_ETRUNC, "CBOR array of %llu items with only %zu bytes left",
                         (unsigned long long)o->u, left);
    if (o->type == FAID_CB_MAP && (o->u > left / 2))
        return faid_fail(d, FAID_ETRUNC, "CBOR map of %llu pairs with only %zu bytes left",
                         (unsigned long long)o->u, left);
    if (o->type == FAID_CB_TAG && left == 0)
        return faid_fail(d, FAID_ETRUNC, "CBOR tag %llu without its item",
                         (unsigned long long)o->u);
    return 0;
}

int faid_cbr_more(faid_cbr *r, const faid_cb_obj *c, uint64_t k, int *more, const char *what,
                  faid_diag *d)
{
    if (!c->indef) {
        *more = k < c->u;
        return 0;
    }
    if (r->p >= r->end)
        return faid_fail(d, FAID_ETRUNC,
                         "%s: indefinite-length CBOR %s ends without its break byte 0xff "
                         "(message truncated after %llu %s)",
                         what, c->type == FAID_CB_MAP ? "map" : "array", (unsigned long long)k,
                         c->type == FAID_CB_MAP ? "pairs" : "items");
    *more = *r->p != 0xff;
    if (!*more)
        r->p++;
    return 0;
}

int faid_cb_array_of(const faid_cb_obj *o, uint64_t n)
{
    return o->type == FAID_CB_ARRAY && (o->indef || o->u == n);
}

int faid_cbr_end(faid_cbr *r, const faid_cb_obj *c, const char *what, faid_diag *d)
{
    if (!c->indef)
        return 0;
    int more = 0;
    int rc = faid_cbr_more(r, c, 0, &more, what, d);
    if (rc)
        return rc;
    if (more)
        return faid_fail(d, FAID_EFORMAT, "%s: indefinite-length CBOR array holds too many items",
                         what);
    return 0;
}

int faid_cbr_skip(faid_cbr *r, faid_diag *d)
{
    /* Items still owed by definite containers (and the item asked for) inside the innermost open
     * indefinite container; bounded by the bytes left thanks to the count rule above. Each open
     * indefinite container keeps its parent's count on a small stack. */
    uint64_t pending = 1;
    uint64_t saved[FAID_CB_MAX_INDEF_DEPTH];
    unsigned char is_map[FAID_CB_MAX_INDEF_DEPTH];
    int depth = 0;
    for (;;) {
        if (pending == 0) {
            if (depth == 0)
                return 0;
            if (r->p >= r->end)
                return faid_fail(d, FAID_ETRUNC,
                                 "indefinite-length CBOR %s ends without its break byte 0xff",
                                 is_map[depth - 1] ? "map" : "array");
            if (*r->p == 0xff) {
                r->p++;
                depth--;
                pending = saved[depth];
                continue;
            }
            /* One more element: an item, or a key and its value. */
            pending = is_map[depth - 1] ? 2 : 1;
        }
        faid_cb_obj o;
        int rc = faid_cbr_next(r, &o, d);
        if (rc)
            return rc;
        if (o.type == FAID_CB_BREAK)
            return faid_fail(d, FAID_EFORMAT,
                             "CBOR break byte 0xff where an item was expected (outside an "
                             "indefinite-length container, or between a map key and its value)");
        pending--;
        if ((o.type == FAID_CB_ARRAY || o.type == FAID_CB_MAP) && o.indef) {
            if (depth == FAID_CB_MAX_INDEF_DEPTH)
                return faid_fail(d, FAID_EFORMAT,
                                 "indefinite-length CBOR containers nested deeper than %d levels",
                                 FAID_CB_MAX_INDEF_DEPTH);
            saved[depth] = pending;
            is_map[depth] = o.type == FAID_CB_MAP;
            depth++;
            pending = 0;
            continue;
        }
        if (o.type == FAID_CB_ARRAY || o.type == FAID_CB_TAG)
            pending += o.type == FAID_CB_TAG ? 1 : o.u;
        else if (o.type == FAID_CB_MAP)
            pending += 2 * o.u;
        if (pending > (uint64_t)(r->end - r->p))
            return faid_fail(d, FAID_ETRUNC, "CBOR containers hold more items than bytes left");
    }
}

int faid_cb_text_eq(const faid_cb_obj *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == FAID_CB_TEXT && o->len == n && memcmp(o->ptr, s, n) == 0;
}

int faid_cb_to_u64(const faid_cb_obj *o, uint64_t *v, const char *what, faid_diag *d)
{
    if (o->type == FAID_CB_UINT) {
        *v = o->u;
        return 0;
    }
    if (o->type == FAID_CB_FLOAT && o->f >= 0 && o->f < 18446744073709551616.0 &&
        o->f == floor(o->f)) {
        *v = (uint64_t)o->f;
        return 0;
    }
    return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected an unsigned integer", what);
}

int faid_cb_to_i64(const faid_cb_obj *o, int64_t *v, const char *what, faid_diag *d)
{
    if (o->type == FAID_CB_UINT && o->u <= (uint64_t)INT64_MAX) {
        *v = (int64_t)o->u;
        return 0;
    }
    if (o->type == FAID_CB_NEGINT && o->u <= (uint64_t)INT64_MAX) {
        *v = -1 - (int64_t)o->u;
        return 0;
    }
    if (o->type == FAID_CB_FLOAT && o->f >= -9223372036854775808.0 &&
        o->f < 9223372036854775808.0 && o->f == floor(o->f)) {
        *v = (int64_t)o->f;
        return 0;
    }
    return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected an integer in int64 range", what);
}

int faid_cb_to_f64(const faid_cb_obj *o, double *v, const char *what, faid_diag *d)
{
    switch (o->type) {
    case FAID_CB_FLOAT:
        *v = o->f;
        return 0;
    case FAID_CB_UINT:
        *v = (double)o->u;
        return 0;
    case FAID_CB_NEGINT:
        *v = -1.0 - (double)o->u;
        return 0;
    default:
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected a number", what);
    }
}

int faid_cb_to_cstr(const faid_cb_obj *o, char *out, size_t cap, const char *what, faid_diag *d)
{
    if (o->type != FAID_CB_TEXT)
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": expected a text string", what);
    if (o->len >= cap)
        return faid_fail(d, FAID_ESIZE, "key \"%s\": text of %zu bytes, at most %zu allowed", what,
                         o->len, cap - 1);
    if (memchr(o->ptr, '\0', o->len))
        return faid_fail(d, FAID_EFORMAT, "key \"%s\": text contains NUL", what);
    memcpy(out, o->ptr, o->len);
    out[o->len] = '\0';
    return 0;
}

static int to_msgpack(faid_cbr *r, faid_mpw *w, int depth, faid_diag *d)
{
    if (depth > FAID_MP_MAX_DEPTH)
        return faid_fail(d, FAID_EFORMAT, "CBOR nested deeper than %d levels", FAID_MP_MAX_DEPTH);
    faid_cb_obj o;
    int rc;
    /* Tags only qualify the item that follows: keep the item. */
    do {
        if ((rc = faid_cbr_next(r, &o, d)))
            return rc;
    } while (o.type == FAID_CB_TAG);
    switch (o.type) {
    case FAID_CB_UINT:
        faid_mpw_uint(w, o.u);
        return 0;
    case FAID_CB_NEGINT:
        if (o.u <= (uint64_t)INT64_MAX)
            faid_mpw_int(w, -1 - (int64_t)o.u);
        else
            faid_mpw_f64(w, -1.0 - (double)o.u);
        return 0;
    case FAID_CB_FLOAT:
        faid_mpw_f64(w, o.f);
        return 0;
    case FAID_CB_BOOL:
        faid_mpw_bool(w, o.b);
        return 0;
    case FAID_CB_NULL:
    case FAID_CB_UNDEF:
        faid_mpw_nil(w);
        return 0;
    case FAID_CB_TEXT:
        faid_mpw_strn(w, (const char *)o.ptr, o.len);
        return 0;
    case FAID_CB_BYTES:
        faid_mpw_bin(w, o.ptr, o.len);
        return 0;
    case FAID_CB_ARRAY:
    case FAID_CB_MAP: {
        if (o.indef) {
            /* msgpack writes the count first: count by skipping over a copy of the cursor. */
            faid_cbr scan = *r;
            int more = 0;
            for (uint64_t k = 0;; k++) {
                if ((rc = faid_cbr_more(&scan, &o, k, &more, "CBOR container", d)))
                    return rc;
                if (!more) {
                    o.u = k;
                    break;
                }
                if ((rc = faid_cbr_skip(&scan, d)) ||
                    (o.type == FAID_CB_MAP && (rc = faid_cbr_skip(&scan, d))))
                    return rc;
            }
        }
        /* Counts are bounded by the bytes left (faid_cbr_next), so they fit msgpack's 32 bits
         * for any message under 4 GiB. */
        if (o.u > UINT32_MAX)
            return faid_fail(d, FAID_ERANGE, "CBOR container of %llu items",
                             (unsigned long long)o.u);
        uint64_t items = o.type == FAID_CB_MAP ? 2 * o.u : o.u;
        if (o.type == FAID_CB_MAP)
            faid_mpw_map(w, (uint32_t)o.u);
        else
            faid_mpw_array(w, (uint32_t)o.u);
        for (uint64_t k = 0; k < items; k++)
            if ((rc = to_msgpack(r, w, depth + 1, d)))
                return rc;
        if (o.indef) /* the scan above saw the break right here */
            r->p++;
        return 0;
    }
    case FAID_CB_TAG:
    case FAID_CB_BREAK:
        break;
    }
    return faid_fail(d, FAID_EFORMAT, "unexpected CBOR item");
}

int faid_cbor_to_msgpack(faid_cbr *r, faid_mpw *w, faid_diag *d)
{
    return to_msgpack(r, w, 0, d);
}
