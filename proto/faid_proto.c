/* faid_proto: msgpack writer/reader and the native input, output and control encodings (see
 * faid_proto.h and PROTOCOL.md). Everything here works on caller-provided buffers and never
 * allocates, so the daemon can use it per frame; every read is checked against the end of the
 * buffer because the bytes come from the network. */
#include "faid_proto.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------- */
/* Writer                                                                                        */

/* The packer's write callback: appends to the caller's buffer, or marks the writer overflowed
 * (every later write is dropped; faid_mpw_finish reports it once). */
static int put_cb(void *data, const char *p, size_t n)
{
    faid_mpw *w = data;
    if (w->overflow)
        return 0;
    if (n > w->cap - w->len) {
        w->overflow = 1;
        return 0;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    return 0;
}

static void put(faid_mpw *w, const void *p, size_t n)
{
    if (n)
        put_cb(w, p, n);
}

void faid_mpw_init(faid_mpw *w, void *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->overflow = 0;
    w->bad = 0;
    w->depth = 0;
    msgpack_packer_init(&w->pk, w, put_cb);
}

int faid_mpw_finish(const faid_mpw *w, faid_diag *d)
{
    if (w->overflow)
        return faid_fail(d, FAID_ESIZE, "msgpack message does not fit in %zu bytes", w->cap);
    if (w->bad || w->depth)
        return faid_fail(d, FAID_EINVAL,
                         "msgpack writer: %s (an encoder's begin/end or item count is wrong)",
                         w->bad ? "unbalanced containers" : "a container left open");
    return 0;
}

/* The end of every encoder: the message length into *out_len, or FAID_ESIZE when it overflowed. */
static int finish_len(const faid_mpw *w, size_t *out_len, faid_diag *d)
{
    int rc = faid_mpw_finish(w, d);
    if (rc)
        return rc;
    *out_len = w->len;
    return 0;
}

/* Item accounting. Every complete value (and every container head) is one item of the innermost
 * open container: a map of fixed size closes itself after 2n items, an array after n, a map begun
 * with faid_mpw_map_begin() counts its items until faid_mpw_map_end() writes its size. */
#define OPEN_ENDED UINT32_MAX

static void item(faid_mpw *w)
{
    if (!w->depth)
        return;
    faid_mpw_frame *f = &w->open[w->depth - 1];
    f->items++;
    if (f->want != OPEN_ENDED && f->items == f->want)
        w->depth--;
}

static void push(faid_mpw *w, uint32_t want)
{
    if (w->depth == FAID_MPW_MAX_OPEN) {
        w->bad = 1;
        return;
    }
    w->open[w->depth++] = (faid_mpw_frame){.want = want, .items = 0, .head = w->len};
}

void faid_mpw_nil(faid_mpw *w)
{
    msgpack_pack_nil(&w->pk);
    item(w);
}

void faid_mpw_bool(faid_mpw *w, int v)
{
    if (v)
        msgpack_pack_true(&w->pk);
    else
        msgpack_pack_false(&w->pk);
    item(w);
}

void faid_mpw_uint(faid_mpw *w, uint64_t v)
{
    msgpack_pack_uint64(&w->pk, v);
    item(w);
}

void faid_mpw_int(faid_mpw *w, int64_t v)
{
    msgpack_pack_int64(&w->pk, v);
    item(w);
}

void faid_mpw_f64(faid_mpw *w, double v)
{
    msgpack_pack_double(&w->pk, v);
    item(w);
}

/* Length of the valid UTF-8 sequence at p (1..4 bytes), 0 when the bytes there are not one:
 * strict, as Python's decoder: no overlongs, no surrogates, nothing above U+10FFFF. */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    if (c < 0x80)
        return 1;
    size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t cp = c & (0x7fu >> len);
    for (size_t j = 1; j < len; j++) {
        if ((p[j] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[j] & 0x3fu);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

int faid_utf8_valid(const void *s, size_t n)
{
    const uint8_t *p = s;
    for (size_t k = 0; k < n;) {
        size_t m = utf8_seq(p + k, n - k);
        if (!m)
            return 0;
        k += m;
    }
    return 1;
}

/* U+FFFD REPLACEMENT CHARACTER, written for each byte that starts no valid sequence. */
static const char REPLACEMENT[3] = {'\xef', '\xbf', '\xbd'};

static size_t utf8_sanitized_len(const uint8_t *p, size_t n)
{
    size_t out = 0;
    for (size_t k = 0; k < n;) {
        size_t m = utf8_seq(p + k, n - k);
        out += m ? m : sizeof(REPLACEMENT);
        k += m ? m : 1;
    }
    return out;
}

/* Every str faid writes is valid UTF-8, whatever its origin (a file name from the command line,
 * a message quoting input bytes): invalid bytes become U+FFFD, so that strict decoders (Python's
 * msgpack by default) read every message. Input text is validated where it enters (header keys,
 * user_data); this is the net under everything else. */
void faid_mpw_strn(faid_mpw *w, const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    if (n > UINT32_MAX) {
        w->overflow = 1;
        return;
    }
    if (faid_utf8_valid(p, n)) {
        msgpack_pack_str(&w->pk, n);
        put(w, s, n);
        item(w);
        return;
    }
    size_t sn = utf8_sanitized_len(p, n);
    if (sn > UINT32_MAX) {
        w->overflow = 1;
        return;
    }
    msgpack_pack_str(&w->pk, sn);
    for (size_t k = 0; k < n;) {
        size_t m = utf8_seq(p + k, n - k);
        if (m)
            put(w, p + k, m);
        else
            put(w, REPLACEMENT, sizeof(REPLACEMENT));
        k += m ? m : 1;
    }
    item(w);
}

void faid_mpw_str(faid_mpw *w, const char *s)
{
    faid_mpw_strn(w, s ? s : "", s ? strlen(s) : 0);
}

void faid_mpw_key(faid_mpw *w, const char *k)
{
    size_t n = strlen(k);
    msgpack_pack_str(&w->pk, n);
    put(w, k, n);
    item(w);
}

void faid_mpw_bin_head(faid_mpw *w, size_t n)
{
    if (n > UINT32_MAX) {
        w->overflow = 1;
        return;
    }
    msgpack_pack_bin(&w->pk, n);
    item(w);
}

void faid_mpw_bin(faid_mpw *w, const void *p, size_t n)
{
    faid_mpw_bin_head(w, n);
    put(w, p, n);
}

void faid_mpw_array(faid_mpw *w, uint32_t n)
{
    msgpack_pack_array(&w->pk, n);
    item(w);
    if (n)
        push(w, n);
}

void faid_mpw_map(faid_mpw *w, uint32_t n)
{
    msgpack_pack_map(&w->pk, n);
    item(w);
    if (n)
        push(w, n > UINT32_MAX / 2 ? UINT32_MAX - 1 : 2 * n);
}

/* A map of up to 65535 pairs whose size is written at its end: a map 16 head now (3 bytes,
 * patched by faid_mpw_map_end), so what is written in between never moves. */
void faid_mpw_map_begin(faid_mpw *w)
{
    static const uint8_t head[3] = {0xde, 0, 0};
    item(w);
    push(w, OPEN_ENDED);
    put(w, head, sizeof head);
}

void faid_mpw_map_end(faid_mpw *w)
{
    if (!w->depth || w->open[w->depth - 1].want != OPEN_ENDED) {
        w->bad = 1;
        return;
    }
    faid_mpw_frame *f = &w->open[--w->depth];
    if (f->items % 2 || f->items / 2 > 0xffff) {
        w->bad = 1;
        return;
    }
    if (w->overflow || f->head + 3 > w->len)
        return;
    w->buf[f->head + 1] = (uint8_t)(f->items / 2 >> 8);
    w->buf[f->head + 2] = (uint8_t)(f->items / 2);
}

void faid_mpw_raw(faid_mpw *w, const void *p, size_t n)
{
    put(w, p, n);
    item(w);
}

void faid_mpw_bytes(faid_mpw *w, const void *p, size_t n)
{
    put(w, p, n);
}

void faid_mpw_ndarray(faid_mpw *w, const char *dtype, const uint64_t *shape, int ndim,
                      const void *data, size_t nbytes)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_DTYPE);
    faid_mpw_key(w, dtype);
    faid_mpw_key(w, FAID_K_SHAPE);
    faid_mpw_array(w, (uint32_t)ndim);
    for (int k = 0; k < ndim; k++)
        faid_mpw_uint(w, shape[k]);
    faid_mpw_key(w, FAID_K_DATA);
    faid_mpw_bin(w, data, nbytes);
    faid_mpw_map_end(w);
}

void faid_mpw_ndarray_f32_transposed(faid_mpw *w, const float *data, uint64_t rows, uint64_t cols)
{
    uint64_t shape[2] = {cols, rows};
    size_t nbytes = (size_t)(rows * cols) * sizeof(float);
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_DTYPE);
    faid_mpw_key(w, "<f4");
    faid_mpw_key(w, FAID_K_SHAPE);
    faid_mpw_array(w, 2);
    faid_mpw_uint(w, shape[0]);
    faid_mpw_uint(w, shape[1]);
    faid_mpw_key(w, FAID_K_DATA);
    faid_mpw_bin_head(w, nbytes);
    if (w->overflow || w->cap - w->len < nbytes) {
        w->overflow = 1;
        return;
    }
    /* Column by column of the source: the output is written sequentially. */
    float *out = (float *)(void *)(w->buf + w->len);
    for (uint64_t c = 0; c < cols; c++)
        for (uint64_t r = 0; r < rows; r++)
            memcpy(out++, &data[r * cols + c], sizeof(float));
    w->len += nbytes;
    faid_mpw_map_end(w);
}

/* ------------------------------------------------------------------------------------------- */
/* Reader                                                                                        */

void faid_mpr_init(faid_mpr *r, const void *buf, size_t len)
{
    r->p = buf;
    r->end = r->p + (buf ? len : 0);
}

static int take(faid_mpr *r, size_t n, const uint8_t **out, faid_diag *d)
{
    if ((size_t)(r->end - r->p) < n)
        return faid_fail(d, FAID_ETRUNC, "msgpack: truncated (need %zu bytes, %zu left)", n,
                         (size_t)(r->end - r->p));
    *out = r->p;
    r->p += n;
    return 0;
}

static int take_be(faid_mpr *r, int n, uint64_t *v, faid_diag *d)
{
    const uint8_t *b = NULL;
    int rc = take(r, (size_t)n, &b, d);
    if (rc)
        return rc;
    uint64_t x = 0;
    for (int k = 0; k < n; k++)
        x = (x << 8) | b[k];
    *v = x;
    return 0;
}

static int take_bytes(faid_mpr *r, faid_mp_obj *o, faid_mp_type t, int lenbytes, faid_diag *d)
{
    uint64_t n = 0;
    int rc = take_be(r, lenbytes, &n, d);
    if (rc)
        return rc;
    o->type = t;
    o->len = (uint32_t)n;
    return take(r, (size_t)n, &o->ptr, d);
}

static int take_ext(faid_mpr *r, faid_mp_obj *o, size_t n, faid_diag *d)
{
    const uint8_t *t = NULL;
    int rc = take(r, 1, &t, d);
    if (rc)
        return rc;
    o->type = FAID_MP_EXT;
    o->ext_type = (int8_t)t[0];
    o->len = (uint32_t)n;
    return take(r, n, &o->ptr, d);
}

int faid_mpr_next(faid_mpr *r, faid_mp_obj *o, faid_diag *d)
{
    memset(o, 0, sizeof(*o));
    const uint8_t *b = NULL;
    int rc = take(r, 1, &b, d);
    if (rc)
        return rc;
    uint8_t c = b[0];
    uint64_t v = 0;
    if (c <= 0x7f) {
        o->type = FAID_MP_UINT;
        o->u = c;
        return 0;
    }
    if (c >= 0xe0) {
        o->type = FAID_MP_INT;
        o->i = (int8_t)c;
        return 0;
    }
    if ((c & 0xf0) == 0x80) {
        o->type = FAID_MP_MAP;
        o->len = c & 0x0f;
        return 0;
    }
    if ((c & 0xf0) == 0x90) {
        o->type = FAID_MP_ARRAY;
        o->len = c & 0x0f;
        return 0;
    }
    if ((c & 0xe0) == 0xa0) {
        o->type = FAID_MP_STR;
        o->len = c & 0x1f;
        return take(r, o->len, &o->ptr, d);
    }
    switch (c) {
    case 0xc0:
        o->type = FAID_MP_NIL;
        return 0;
    case 0xc2:
        o->type = FAID_MP_BOOL;
        o->b = 0;
        return 0;
    case 0xc3:
        o->type = FAID_MP_BOOL;
        o->b = 1;
        return 0;
    case 0xc4:
        return take_bytes(r, o, FAID_MP_BIN, 1, d);
    case 0xc5:
        return take_bytes(r, o, FAID_MP_BIN, 2, d);
    case 0xc6:
        return take_bytes(r, o, FAID_MP_BIN, 4, d);
    case 0xc7:
    case 0xc8:
    case 0xc9:
        if ((rc = take_be(r, c == 0xc7 ? 1 : c == 0xc8 ? 2 : 4, &v, d)))
            return rc;
        return take_ext(r, o, (size_t)v, d);
    case 0xca: {
        if ((rc = take_be(r, 4, &v, d)))
            return rc;
        uint32_t u = (uint32_t)v;
        float f;
        memcpy(&f, &u, 4);
        o->type = FAID_MP_FLOAT;
        o->f = f;
        return 0;
    }
    case 0xcb:
        if ((rc = take_be(r, 8, &v, d)))
            return rc;
        o->type = FAID_MP_FLOAT;
        memcpy(&o->f, &v, 8);
        return 0;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
        if ((rc = take_be(r, 1 << (c - 0xcc), &v, d)))
            return rc;
        o->type = FAID_MP_UINT;
        o->u = v;
        return 0;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
        int n = 1 << (c - 0xd0);
        if ((rc = take_be(r, n, &v, d)))
            return rc;
        int64_t s;
        if (n == 1)
            s = (int8_t)v;
        else if (n == 2)
            s = (int16_t)v;
        else if (n == 4)
            s = (int32_t)v;
        else
            s = (int64_t)v;
        if (s >= 0) {
            o->type = FAID_MP_UINT;
            o->u = (uint64_t)s;
        } else {
            o->type = FAID_MP_INT;
            o->i = s;
        }
        return 0;
    }
    case 0xd4:
        return take_ext(r, o, 1, d);
    case 0xd5:
        return take_ext(r, o, 2, d);
    case 0xd6:
        return take_ext(r, o, 4, d);
    case 0xd7:
        return take_ext(r, o, 8, d);
    case 0xd8:
        return take_ext(r, o, 16, d);
    case 0xd9:
        return take_bytes(r, o, FAID_MP_STR, 1, d);
    case 0xda:
        return take_bytes(r, o, FAID_MP_STR, 2, d);
    case 0xdb:
        return take_bytes(r, o, FAID_MP_STR, 4, d);
    case 0xdc:
    case 0xdd:
        if ((rc = take_be(r, c == 0xdc ? 2 : 4, &v, d)))
            return rc;
        o->type = FAID_MP_ARRAY;
        o->len = (uint32_t)v;
        return 0;
    case 0xde:
    case 0xdf:
        if ((rc = take_be(r, c == 0xde ? 2 : 4, &v, d)))
            return rc;
        o->type = FAID_MP_MAP;
        o->len = (uint32_t)v;
        return 0;
    default:
        return faid_fail(d, FAID_EFORMAT, "msgpack: invalid type byte 0x%02x", c);
    }
}

/* Iterative skip: a count of items still to read replaces recursion, so depth only matters as a
 * sanity limit on what senders may nest. Each container adds its children to the count; the
 * count cannot exceed the bytes left (every item takes at least one byte), which bounds the loop
 * against headers that claim billions of items. */
int faid_mpr_skip(faid_mpr *r, faid_diag *d)
{
    uint64_t pending = 1;
    while (pending > 0) {
        faid_mp_obj o;
        int rc = faid_mpr_next(r, &o, d);
        if (rc)
            return rc;
        pending--;
        uint64_t add = 0;
        if (o.type == FAID_MP_ARRAY)
            add = o.len;
        else if (o.type == FAID_MP_MAP)
            add = 2ull * o.len;
        pending += add;
        if (pending > (uint64_t)(r->end - r->p))
            return faid_fail(d, FAID_ETRUNC, "msgpack: container claims %llu items, %zu bytes left",
                             (unsigned long long)pending, (size_t)(r->end - r->p));
    }
    return 0;
}

int faid_mp_check_value(faid_mpr *r, int max_depth, const char *what, faid_diag *d)
{
    /* Iterative like faid_mpr_skip, with the containers still open on a stack: left[k] counts
     * the items container k still holds (maps: keys and values), keys[k] says whether the next
     * one is a key. Nothing recurses, so depth costs no C stack. */
    uint64_t left[FAID_MP_MAX_DEPTH + 2];
    uint8_t key_next[FAID_MP_MAX_DEPTH + 2];
    uint8_t is_map[FAID_MP_MAX_DEPTH + 2];
    if (max_depth < 0 || max_depth > FAID_MP_MAX_DEPTH)
        max_depth = FAID_MP_MAX_DEPTH;
    const uint8_t *start = r->p;
    int top = 0; /* open containers */
    left[0] = 1;
    is_map[0] = 0;
    key_next[0] = 0;
    while (top > 0 || left[0] > 0) {
        if (left[top] == 0) {
            top--;
            continue;
        }
        int as_key = is_map[top] && key_next[top];
        if (is_map[top])
            key_next[top] = !key_next[top];
        left[top]--;
        size_t at = (size_t)(r->p - start);
        faid_mp_obj o;
        int rc = faid_mpr_next(r, &o, d);
        if (rc)
            return rc;
        if (as_key && o.type != FAID_MP_STR && o.type != FAID_MP_BIN)
            return faid_fail(d, FAID_EFORMAT,
                             "%s: map key at byte %zu is not text (msgpack type %d): strict "
                             "decoders refuse it",
                             what, at, o.type);
        switch (o.type) {
        case FAID_MP_STR:
            if (!faid_utf8_valid(o.ptr, o.len))
                return faid_fail(d, FAID_EFORMAT, "%s: string at byte %zu is not valid UTF-8", what,
                                 at);
            break;
        case FAID_MP_EXT:
            return faid_fail(d, FAID_EFORMAT, "%s: msgpack ext type %d at byte %zu is not allowed",
                             what, o.ext_type, at);
        case FAID_MP_ARRAY:
        case FAID_MP_MAP: {
            uint64_t n = o.type == FAID_MP_MAP ? 2ull * o.len : o.len;
            if (n > (uint64_t)(r->end - r->p))
                return faid_fail(d, FAID_ETRUNC,
                                 "%s: container at byte %zu claims %llu items, %zu "
                                 "bytes left",
                                 what, at, (unsigned long long)n, (size_t)(r->end - r->p));
            if (top >= max_depth)
                return faid_fail(d, FAID_EFORMAT, "%s: nested deeper than %d levels", what,
                                 max_depth);
            top++;
            left[top] = n;
            is_map[top] = o.type == FAID_MP_MAP;
            key_next[top] = 1;
            break;
        }
        default:
            break;
        }
    }
    return 0;
}

int faid_mp_str_eq(const faid_mp_obj *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == FAID_MP_STR && o->len == n && (n == 0 || memcmp(o->ptr, s, n) == 0);
}

int faid_mp_to_u64(const faid_mp_obj *o, uint64_t *out)
{
    if (o->type == FAID_MP_UINT) {
        *out = o->u;
        return 0;
    }
    if (o->type == FAID_MP_FLOAT && o->f >= 0 && o->f < 18446744073709551616.0 &&
        o->f == floor(o->f)) {
        *out = (uint64_t)o->f;
        return 0;
    }
    return FAID_EFORMAT;
}

int faid_mp_to_i64(const faid_mp_obj *o, int64_t *out)
{
    if (o->type == FAID_MP_INT) {
        *out = o->i;
        return 0;
    }
    if (o->type == FAID_MP_UINT && o->u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)o->u;
        return 0;
    }
    if (o->type == FAID_MP_FLOAT && o->f >= -9223372036854775808.0 &&
        o->f < 9223372036854775808.0 && o->f == floor(o->f)) {
        *out = (int64_t)o->f;
        return 0;
    }
    return FAID_EFORMAT;
}

int faid_mp_to_f64(const faid_mp_obj *o, double *out)
{
    switch (o->type) {
    case FAID_MP_FLOAT:
        *out = o->f;
        return 0;
    case FAID_MP_UINT:
        *out = (double)o->u;
        return 0;
    case FAID_MP_INT:
        *out = (double)o->i;
        return 0;
    default:
        return FAID_EFORMAT;
    }
}

int faid_mp_to_cstr(const faid_mp_obj *o, char *out, size_t cap)
{
    if (cap == 0)
        return FAID_ESIZE;
    out[0] = '\0';
    if (o->type != FAID_MP_STR)
        return FAID_EFORMAT;
    if (o->len >= cap)
        return FAID_ESIZE;
    memcpy(out, o->ptr, o->len);
    out[o->len] = '\0';
    return 0;
}

/* Prints a str/bin value for a diagnostic, escaping what is not printable. */
static void printable(const faid_mp_obj *o, char *out, size_t cap)
{
    size_t j = 0;
    for (uint32_t k = 0; k < o->len && j + 5 < cap; k++) {
        uint8_t c = o->ptr[k];
        if (c >= 32 && c < 127 && c != '"' && c != '\\')
            out[j++] = (char)c;
        else
            j += (size_t)snprintf(out + j, cap - j, "\\x%02x", c);
    }
    out[j < cap ? j : cap - 1] = '\0';
}

/* Starts reading buf as one msgpack map: *o receives the map (o->len entries follow in r). */
static int open_map(faid_mpr *r, const void *buf, size_t len, faid_mp_obj *o, const char *what,
                    faid_diag *d)
{
    faid_mpr_init(r, buf, len);
    int rc = faid_mpr_next(r, o, d);
    if (rc)
        return rc;
    if (o->type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "%s is not a msgpack map", what);
    return 0;
}

int faid_proto_map_find(const void *buf, size_t len, const char *key, faid_mp_obj *val,
                        faid_mpr *at, faid_diag *d)
{
    faid_mpr r;
    faid_mp_obj o;
    int rc = open_map(&r, buf, len, &o, "message", d);
    if (rc)
        return rc;
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj kk;
        if ((rc = faid_mpr_next(&r, &kk, d)))
            return rc;
        if (faid_mp_str_eq(&kk, key)) {
            if ((rc = faid_mpr_next(&r, val, d)))
                return rc;
            if (at)
                *at = r;
            return 0;
        }
        if (kk.type == FAID_MP_ARRAY || kk.type == FAID_MP_MAP)
            return faid_fail(d, FAID_EFORMAT, "map key is a container");
        if ((rc = faid_mpr_skip(&r, d)))
            return rc;
    }
    return faid_fail(d, FAID_ERANGE, "key \"%s\" not found", key);
}

/* Reads a map key, which must be a string. */
static int read_key(faid_mpr *r, faid_mp_obj *k, faid_diag *d)
{
    int rc = faid_mpr_next(r, k, d);
    if (rc)
        return rc;
    if (k->type != FAID_MP_STR)
        return faid_fail(d, FAID_EFORMAT, "map key is not a string (msgpack type %d)", k->type);
    return 0;
}

/* The array map {dtype, shape, data}: its rules and their messages, shared by the two decoders
 * (faid_proto_read_array on the bounded cursor, array_from_msgpack on msgpack-c objects). Each
 * decoder walks the map its own way and hands every field here as a faid_mp_obj; array_check then
 * says whether the map was whole and its byte length matches the shape. */
enum { ARRAY_HAVE_DTYPE = 1, ARRAY_HAVE_SHAPE = 2, ARRAY_HAVE_DATA = 4 };

static int array_dtype(faid_array_view *a, const faid_mp_obj *v, faid_diag *d)
{
    if (faid_mp_to_cstr(v, a->descr, sizeof(a->descr)))
        return faid_fail(d, FAID_EFORMAT, "array: dtype is not a short string");
    a->dtype = faid_dtype_parse(a->descr);
    if (a->dtype == FAID_DT_INVALID)
        return faid_fail(d, FAID_EDTYPE, "array: unknown dtype \"%s\"", a->descr);
    if (a->descr[0] == '>' && faid_dtype_size(a->dtype) > 1)
        return faid_fail(d, FAID_EDTYPE, "array: big-endian dtype \"%s\"", a->descr);
    return 0;
}

/* The shape list's head; its entries follow through array_shape_entry. */
static int array_shape(faid_array_view *a, const faid_mp_obj *v, faid_diag *d)
{
    if (v->type != FAID_MP_ARRAY || v->len > FAID_PROTO_MAX_DIMS)
        return faid_fail(d, FAID_EFORMAT, "array: shape must be a list of at most %d ints",
                         FAID_PROTO_MAX_DIMS);
    a->ndim = (int)v->len;
    a->nelem = 1;
    return 0;
}

static int array_shape_entry(faid_array_view *a, uint32_t j, const faid_mp_obj *e, faid_diag *d)
{
    if (e->type != FAID_MP_UINT || e->u > (1ull << 40))
        return faid_fail(d, FAID_EFORMAT, "array: bad shape entry %u", j);
    a->shape[j] = e->u;
    a->nelem *= e->u;
    if (a->nelem > (1ull << 40))
        return faid_fail(d, FAID_EFORMAT, "array: shape too large");
    return 0;
}

static int array_data(faid_array_view *a, const faid_mp_obj *v, faid_diag *d)
{
    if (v->type != FAID_MP_BIN)
        return faid_fail(d, FAID_EFORMAT, "array: data is not bin");
    a->data = v->ptr;
    a->nbytes = v->len;
    return 0;
}

/* After the map: every field present, and data holds exactly nelem * itemsize bytes. */
static int array_check(const faid_array_view *a, unsigned have, faid_diag *d)
{
    if (!(have & ARRAY_HAVE_DTYPE) || !(have & ARRAY_HAVE_SHAPE) || !(have & ARRAY_HAVE_DATA))
        return faid_fail(d, FAID_EFORMAT, "array: missing %s",
                         !(have & ARRAY_HAVE_DTYPE)   ? "dtype"
                         : !(have & ARRAY_HAVE_SHAPE) ? "shape"
                                                      : "data");
    if (a->nelem * faid_dtype_size(a->dtype) != a->nbytes)
        return faid_fail(d, FAID_ESIZE, "array: %zu data bytes for %llu elements of %s", a->nbytes,
                         (unsigned long long)a->nelem, a->descr);
    return 0;
}

int faid_proto_read_array(faid_mpr *r, faid_array_view *a, faid_diag *d)
{
    memset(a, 0, sizeof(*a));
    faid_mp_obj o;
    int rc = faid_mpr_next(r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "array: expected a {dtype, shape, data} map");
    unsigned have = 0;
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj key, v;
        if ((rc = read_key(r, &key, d)))
            return rc;
        if (faid_mp_str_eq(&key, FAID_K_DTYPE)) {
            if ((rc = faid_mpr_next(r, &v, d)) || (rc = array_dtype(a, &v, d)))
                return rc;
            have |= ARRAY_HAVE_DTYPE;
        } else if (faid_mp_str_eq(&key, FAID_K_SHAPE)) {
            if ((rc = faid_mpr_next(r, &v, d)) || (rc = array_shape(a, &v, d)))
                return rc;
            for (uint32_t j = 0; j < v.len; j++) {
                faid_mp_obj e;
                if ((rc = faid_mpr_next(r, &e, d)) || (rc = array_shape_entry(a, j, &e, d)))
                    return rc;
            }
            have |= ARRAY_HAVE_SHAPE;
        } else if (faid_mp_str_eq(&key, FAID_K_DATA)) {
            if ((rc = faid_mpr_next(r, &v, d)) || (rc = array_data(a, &v, d)))
                return rc;
            have |= ARRAY_HAVE_DATA;
        } else if ((rc = faid_mpr_skip(r, d))) {
            return rc;
        }
    }
    return array_check(a, have, d);
}

/* A message against its rows of the key table (faid_proto_table.h). */
static int row_of(const faid_proto_row *rows, size_t nrows, faid_proto_msg m, faid_key k)
{
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].msg == m && rows[i].key == k)
            return (int)i;
    return -1;
}

int faid_proto_check_keys(faid_proto_msg m, faid_proto_msg also, const void *buf, size_t len,
                          faid_diag *d)
{
    size_t nrows;
    const faid_proto_row *rows = faid_proto_rows(&nrows);
    faid_mpr r;
    faid_mp_obj o;
    faid_mpr_init(&r, buf, len);
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "%s: not a map", faid_proto_msg_marker(m));
    unsigned char seen[FAID_NKEYS] = {0};
    for (uint32_t i = 0; i < o.len; i++) {
        faid_mp_obj k;
        if ((rc = faid_mpr_next(&r, &k, d)))
            return rc;
        if (k.type != FAID_MP_STR && k.type != FAID_MP_BIN)
            return faid_fail(d, FAID_EFORMAT, "%s: key %u is not a string",
                             faid_proto_msg_marker(m), i);
        faid_key key = faid_key_lookup(k.ptr, k.len);
        if (key == FAID_KEY_UNKNOWN ||
            (row_of(rows, nrows, m, key) < 0 &&
             (also == FAID_NPMSGS || row_of(rows, nrows, also, key) < 0)))
            return faid_fail(d, FAID_EFORMAT, "%s: key \"%.*s\" is not in the key table",
                             faid_proto_msg_marker(m), (int)k.len, (const char *)k.ptr);
        if (seen[key])
            return faid_fail(d, FAID_EFORMAT, "%s: key \"%s\" twice", faid_proto_msg_marker(m),
                             faid_key_name(key));
        seen[key] = 1;
        if ((rc = faid_mpr_skip(&r, d)))
            return rc;
    }
    for (size_t i = 0; i < nrows; i++)
        if ((rows[i].msg == m || rows[i].msg == also) && rows[i].presence == FAID_KP_REQ &&
            !seen[rows[i].key])
            return faid_fail(d, FAID_EFORMAT, "%s: required key \"%s\" missing",
                             faid_proto_msg_marker(rows[i].msg), faid_key_name(rows[i].key));
    return 0;
}

/* ------------------------------------------------------------------------------------------- */
/* JSON rendering                                                                                */

typedef struct json_out {
    char *buf;
    size_t cap, len;
    int cut;
} json_out;

static void jprintf(json_out *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jprintf(json_out *j, const char *fmt, ...)
{
    if (j->cut)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= j->cap - j->len) {
        j->cut = 1;
        j->buf[j->cap - 1] = '\0';
        return;
    }
    j->len += (size_t)n;
}

/* JSON text is UTF-8: a byte that starts no valid sequence is written as \ufffd, so that faidctl
 * --json never emits invalid UTF-8 whatever a peer sent. */
static void jstring(json_out *j, const uint8_t *p, uint32_t n)
{
    jprintf(j, "\"");
    for (uint32_t k = 0; k < n && !j->cut;) {
        uint8_t c = p[k];
        size_t m = utf8_seq(p + k, n - k);
        if (m == 0)
            jprintf(j, "\\ufffd");
        else if (c == '"' || c == '\\')
            jprintf(j, "\\%c", c);
        else if (c < 32 || c == 127)
            jprintf(j, "\\u%04x", c);
        else
            jprintf(j, "%.*s", (int)m, (const char *)p + k);
        k += m ? (uint32_t)m : 1;
    }
    jprintf(j, "\"");
}

/* JSON keys are strings: a msgpack key of another type is written as the string of its JSON
 * text (numbers, true/false/null) or of its kind (containers, bin, ext, skipped). */
static int json_key(faid_mpr *r, json_out *j, faid_diag *d)
{
    faid_mpr peek = *r;
    faid_mp_obj o;
    int rc = faid_mpr_next(&peek, &o, d);
    if (rc)
        return rc;
    switch (o.type) {
    case FAID_MP_STR:
        *r = peek;
        jstring(j, o.ptr, o.len);
        return 0;
    case FAID_MP_UINT:
        *r = peek;
        jprintf(j, "\"%llu\"", (unsigned long long)o.u);
        return 0;
    case FAID_MP_INT:
        *r = peek;
        jprintf(j, "\"%lld\"", (long long)o.i);
        return 0;
    case FAID_MP_FLOAT:
        *r = peek;
        jprintf(j, "\"%.17g\"", o.f);
        return 0;
    case FAID_MP_BOOL:
    case FAID_MP_NIL:
        *r = peek;
        jprintf(j, "\"%s\"", o.type == FAID_MP_NIL ? "null" : o.b ? "true" : "false");
        return 0;
    default:
        if ((rc = faid_mpr_skip(r, d)))
            return rc;
        jprintf(j, "\"<%s key>\"",
                o.type == FAID_MP_BIN   ? "bin"
                : o.type == FAID_MP_EXT ? "ext"
                                        : "container");
        return 0;
    }
}

static int json_value(faid_mpr *r, json_out *j, int depth, int max_items, faid_diag *d)
{
    faid_mp_obj o;
    if (depth > FAID_MP_MAX_DEPTH)
        return faid_fail(d, FAID_EFORMAT, "msgpack: nested deeper than %d", FAID_MP_MAX_DEPTH);
    int rc = faid_mpr_next(r, &o, d);
    if (rc)
        return rc;
    switch (o.type) {
    case FAID_MP_NIL:
        jprintf(j, "null");
        break;
    case FAID_MP_BOOL:
        jprintf(j, o.b ? "true" : "false");
        break;
    case FAID_MP_UINT:
        jprintf(j, "%llu", (unsigned long long)o.u);
        break;
    case FAID_MP_INT:
        jprintf(j, "%lld", (long long)o.i);
        break;
    case FAID_MP_FLOAT:
        if (isfinite(o.f))
            jprintf(j, "%.17g", o.f);
        else
            jprintf(j, "\"%s\"", isnan(o.f) ? "NaN" : o.f > 0 ? "Infinity" : "-Infinity");
        break;
    case FAID_MP_STR:
        jstring(j, o.ptr, o.len);
        break;
    case FAID_MP_BIN:
        jprintf(j, "{\"bin\": %u}", o.len);
        break;
    case FAID_MP_EXT:
        jprintf(j, "{\"ext\": %d, \"bytes\": %u}", o.ext_type, o.len);
        break;
    case FAID_MP_ARRAY:
    case FAID_MP_MAP: {
        int is_map = o.type == FAID_MP_MAP;
        jprintf(j, is_map ? "{" : "[");
        for (uint32_t k = 0; k < o.len; k++) {
            int show = max_items <= 0 || is_map || k < (uint32_t)max_items;
            if (!show) {
                for (uint32_t rest = k; rest < o.len; rest++)
                    if ((rc = faid_mpr_skip(r, d)))
                        return rc;
                jprintf(j, ", \"... %u more\"", o.len - k);
                break;
            }
            if (k)
                jprintf(j, ", ");
            if (is_map) {
                if ((rc = json_key(r, j, d)))
                    return rc;
                jprintf(j, ": ");
            }
            if ((rc = json_value(r, j, depth + 1, max_items, d)))
                return rc;
        }
        jprintf(j, is_map ? "}" : "]");
        break;
    }
    }
    return 0;
}

int faid_mp_to_json(const void *buf, size_t len, char *out, size_t cap, int max_items, faid_diag *d)
{
    if (cap == 0)
        return faid_fail(d, FAID_ESIZE, "json: no room");
    out[0] = '\0';
    json_out j = {out, cap, 0, 0};
    faid_mpr r;
    faid_mpr_init(&r, buf, len);
    int rc = json_value(&r, &j, 0, max_items, d);
    if (rc)
        return rc;
    if (j.cut)
        return faid_fail(d, FAID_ESIZE, "json: output cut at %zu bytes", cap);
    return 0;
}

/* ------------------------------------------------------------------------------------------- */
/* Native input                                                                                  */

const char *faid_in_type_name(faid_in_type t)
{
    switch (t) {
    case FAID_IN_START:
        return "start";
    case FAID_IN_IMAGE:
        return "image";
    case FAID_IN_END:
        return "end";
    case FAID_IN_OTHER:
        return "other";
    default:
        return "invalid";
    }
}

int faid_proto_is_native(const void *buf, size_t len)
{
    if (!buf || len == 0)
        return 0;
    uint8_t c = ((const uint8_t *)buf)[0];
    return (c & 0xf0) == 0x80 || c == 0xde || c == 0xdf;
}

static int read_rational(faid_mpr *r, const char *key, uint64_t out[2], faid_diag *d)
{
    faid_mp_obj o, a, b;
    int rc = faid_mpr_next(r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_ARRAY || o.len != 2)
        return faid_fail(d, FAID_EFORMAT, "header key \"%s\": expected [numerator, denominator]",
                         key);
    if ((rc = faid_mpr_next(r, &a, d)) || (rc = faid_mpr_next(r, &b, d)))
        return rc;
    if (faid_mp_to_u64(&a, &out[0]) || faid_mp_to_u64(&b, &out[1]))
        return faid_fail(d, FAID_EFORMAT, "header key \"%s\": entries must be unsigned ints", key);
    return 0;
}

static int read_u64_key(faid_mpr *r, const char *key, uint64_t *out, faid_diag *d)
{
    faid_mp_obj v;
    int rc = faid_mpr_next(r, &v, d);
    if (rc)
        return rc;
    if (faid_mp_to_u64(&v, out))
        return faid_fail(d, FAID_EFORMAT, "header key \"%s\": expected an unsigned integer", key);
    return 0;
}

static int read_str_key(faid_mpr *r, const char *key, char *out, size_t cap, faid_diag *d)
{
    faid_mp_obj v;
    int rc = faid_mpr_next(r, &v, d);
    if (rc)
        return rc;
    rc = faid_mp_to_cstr(&v, out, cap);
    if (rc == FAID_ESIZE)
        return faid_fail(d, FAID_EFORMAT, "header key \"%s\": string longer than %zu bytes", key,
                         cap - 1);
    if (rc)
        return faid_fail(d, FAID_EFORMAT, "header key \"%s\": expected a string", key);
    if (memchr(v.ptr, '\0', v.len))
        return faid_fail(d, FAID_EFORMAT, "header key \"%s\": string contains NUL", key);
    /* faid keeps and forwards these (series_unique_id in start, result, end, stats, status). */
    if (!faid_utf8_valid(v.ptr, v.len))
        return faid_fail(d, FAID_EFORMAT, "header key \"%s\": string is not valid UTF-8", key);
    return 0;
}

int faid_proto_decode_input(const void *buf, size_t len, faid_in_header *h, faid_diag *d)
{
    memset(h, 0, sizeof(*h));
    h->nimages = -1;
    h->dtype = FAID_DT_INVALID;
    if (!faid_proto_is_native(buf, len))
        return faid_fail(d, FAID_EFORMAT, "header is not a msgpack map (first byte 0x%02x)",
                         len ? ((const uint8_t *)buf)[0] : 0);
    faid_mpr r;
    faid_mp_obj o;
    int rc = open_map(&r, buf, len, &o, "header", d);
    if (rc)
        return rc;
    int have_version = 0, have_series = 0, have_shape = 0, have_encoding = 0;
    char text[64];
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj key, v;
        if ((rc = read_key(&r, &key, d)))
            return rc;
        if (faid_mp_str_eq(&key, FAID_K_TYPE)) {
            if ((rc = read_str_key(&r, FAID_K_TYPE, text, sizeof(text), d)))
                return rc;
            if (strcmp(text, "image") == 0)
                h->type = FAID_IN_IMAGE;
            else if (strcmp(text, "start") == 0)
                h->type = FAID_IN_START;
            else if (strcmp(text, "end") == 0)
                h->type = FAID_IN_END;
            else
                return faid_fail(d, FAID_EFORMAT,
                                 "header key \"type\": unknown message type \"%s\"", text);
        } else if (faid_mp_str_eq(&key, FAID_K_PROTOCOL_VERSION)) {
            uint64_t ver = 0;
            if ((rc = read_u64_key(&r, FAID_K_PROTOCOL_VERSION, &ver, d)))
                return rc;
            if (ver != FAID_PROTO_VERSION)
                return faid_fail(
                    d, FAID_EPROTO,
                    "header key \"protocol_version\": %llu is not supported (this is %d)",
                    (unsigned long long)ver, FAID_PROTO_VERSION);
            h->protocol_version = (uint32_t)ver;
            have_version = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_SERIES_ID)) {
            if ((rc = read_u64_key(&r, FAID_K_SERIES_ID, &h->series_id, d)))
                return rc;
            have_series = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_SERIES_UNIQUE_ID)) {
            if ((rc = read_str_key(&r, FAID_K_SERIES_UNIQUE_ID, h->series_unique_id,
                                   sizeof(h->series_unique_id), d)))
                return rc;
        } else if (faid_mp_str_eq(&key, FAID_K_FRAME_ID)) {
            if ((rc = read_u64_key(&r, FAID_K_FRAME_ID, &h->frame_id, d)))
                return rc;
            h->has_frame_id = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_SHAPE)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (v.type != FAID_MP_ARRAY || v.len != 2)
                return faid_fail(d, FAID_ESHAPE, "header key \"shape\": expected [rows, cols]");
            uint64_t dims[2] = {0, 0};
            for (int j = 0; j < 2; j++) {
                faid_mp_obj e;
                if ((rc = faid_mpr_next(&r, &e, d)))
                    return rc;
                if (faid_mp_to_u64(&e, &dims[j]) || dims[j] == 0 || dims[j] > (1u << 20))
                    return faid_fail(d, FAID_ESHAPE,
                                     "header key \"shape\": dimension %d must be in 1..%u", j,
                                     1u << 20);
            }
            h->rows = (int)dims[0];
            h->cols = (int)dims[1];
            have_shape = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_DTYPE)) {
            if ((rc = read_str_key(&r, FAID_K_DTYPE, text, sizeof(text), d)))
                return rc;
            h->dtype = faid_dtype_parse(text);
            if (!faid_dtype_is_frame(h->dtype))
                return faid_fail(d, FAID_EDTYPE, "header key \"dtype\": \"%s\" is not a frame type",
                                 text);
            if (text[0] == '>' && faid_dtype_size(h->dtype) > 1)
                return faid_fail(d, FAID_EDTYPE, "header key \"dtype\": big-endian \"%s\"", text);
        } else if (faid_mp_str_eq(&key, FAID_K_ENCODING)) {
            if ((rc = read_str_key(&r, FAID_K_ENCODING, text, sizeof(text), d)))
                return rc;
            if (faid_encoding_parse(text, &h->encoding) != 0)
                return faid_fail(d, FAID_EUNSUP, "header key \"encoding\": unknown encoding \"%s\"",
                                 text);
            have_encoding = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_TIMESTAMP)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_f64(&v, &h->timestamp))
                return faid_fail(d, FAID_EFORMAT, "header key \"timestamp\": expected a number");
            h->has_timestamp = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_START_TIME)) {
            if ((rc = read_rational(&r, FAID_K_START_TIME, h->start_time, d)))
                return rc;
            h->has_start_time = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_STOP_TIME)) {
            if ((rc = read_rational(&r, FAID_K_STOP_TIME, h->stop_time, d)))
                return rc;
            h->has_stop_time = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_REAL_TIME)) {
            if ((rc = read_rational(&r, FAID_K_REAL_TIME, h->real_time, d)))
                return rc;
            h->has_real_time = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_NIMAGES)) {
            uint64_t n = 0;
            if ((rc = read_u64_key(&r, FAID_K_NIMAGES, &n, d)))
                return rc;
            h->nimages = n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
        } else if (faid_mp_str_eq(&key, FAID_K_USER_DATA)) {
            /* Forwarded as sent into start and result: it must decode wherever they do. */
            const uint8_t *start = r.p;
            if ((rc = faid_mp_check_value(&r, FAID_MP_MAX_DEPTH, "header key \"user_data\"", d)))
                return rc;
            h->user_data = start;
            h->user_data_len = (size_t)(r.p - start);
        } else {
            /* Unknown keys are skipped so that newer senders work with older daemons. */
            if ((rc = faid_mpr_skip(&r, d)))
                return rc;
        }
    }
    if (r.p != r.end)
        return faid_fail(d, FAID_EFORMAT, "header: %zu trailing bytes after the map",
                         (size_t)(r.end - r.p));
    if (h->type == FAID_IN_INVALID)
        return faid_fail(d, FAID_EFORMAT, "header: missing key \"type\"");
    if (!have_version)
        return faid_fail(d, FAID_EFORMAT, "header: missing key \"protocol_version\"");
    if (!have_series)
        return faid_fail(d, FAID_EFORMAT, "header: missing key \"series_id\"");
    if (h->type == FAID_IN_IMAGE) {
        if (!h->has_frame_id)
            return faid_fail(d, FAID_EFORMAT, "image header: missing key \"frame_id\"");
        if (!have_shape)
            return faid_fail(d, FAID_EFORMAT, "image header: missing key \"shape\"");
        if (h->dtype == FAID_DT_INVALID)
            return faid_fail(d, FAID_EFORMAT, "image header: missing key \"dtype\"");
        if (!have_encoding)
            return faid_fail(d, FAID_EFORMAT, "image header: missing key \"encoding\"");
    }
    return 0;
}

static const char *encoding_wire_name(faid_encoding e)
{
    return faid_encoding_name(e);
}

int faid_proto_encode_input(const faid_in_header *h, void *buf, size_t cap, size_t *out_len,
                            faid_diag *d)
{
    if (h->type != FAID_IN_START && h->type != FAID_IN_IMAGE && h->type != FAID_IN_END)
        return faid_fail(d, FAID_EINVAL, "encode input: invalid message type");
    int image = h->type == FAID_IN_IMAGE;
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_TYPE);
    faid_mpw_str(&w, faid_in_type_name(h->type));
    faid_mpw_key(&w, FAID_K_PROTOCOL_VERSION);
    faid_mpw_uint(&w, FAID_PROTO_VERSION);
    faid_mpw_key(&w, FAID_K_SERIES_ID);
    faid_mpw_uint(&w, h->series_id);
    if (h->series_unique_id[0]) {
        faid_mpw_key(&w, FAID_K_SERIES_UNIQUE_ID);
        faid_mpw_str(&w, h->series_unique_id);
    }
    if (image) {
        const char *dt = faid_dtype_name(h->dtype);
        if (!faid_dtype_is_frame(h->dtype) || !dt)
            return faid_fail(d, FAID_EDTYPE, "encode input: invalid frame dtype");
        faid_mpw_key(&w, FAID_K_FRAME_ID);
        faid_mpw_uint(&w, h->frame_id);
        faid_mpw_key(&w, FAID_K_SHAPE);
        faid_mpw_array(&w, 2);
        faid_mpw_uint(&w, (uint64_t)(h->rows > 0 ? h->rows : 0));
        faid_mpw_uint(&w, (uint64_t)(h->cols > 0 ? h->cols : 0));
        faid_mpw_key(&w, FAID_K_DTYPE);
        faid_mpw_str(&w, dt);
        faid_mpw_key(&w, FAID_K_ENCODING);
        faid_mpw_str(&w, encoding_wire_name(h->encoding));
    }
    if (h->has_timestamp) {
        faid_mpw_key(&w, FAID_K_TIMESTAMP);
        faid_mpw_f64(&w, h->timestamp);
    }
    const struct {
        int has;
        const char *key;
        const uint64_t *v;
    } rat[3] = {{h->has_start_time, FAID_K_START_TIME, h->start_time},
                {h->has_stop_time, FAID_K_STOP_TIME, h->stop_time},
                {h->has_real_time, FAID_K_REAL_TIME, h->real_time}};
    for (int k = 0; k < 3; k++) {
        if (!rat[k].has)
            continue;
        faid_mpw_str(&w, rat[k].key);
        faid_mpw_array(&w, 2);
        faid_mpw_uint(&w, rat[k].v[0]);
        faid_mpw_uint(&w, rat[k].v[1]);
    }
    if (h->type == FAID_IN_START && h->nimages >= 0) {
        faid_mpw_key(&w, FAID_K_NIMAGES);
        faid_mpw_uint(&w, (uint64_t)h->nimages);
    }
    if (h->user_data && h->user_data_len) {
        faid_mpw_key(&w, FAID_K_USER_DATA);
        faid_mpw_raw(&w, h->user_data, h->user_data_len);
    }
    faid_mpw_map_end(&w);
    return finish_len(&w, out_len, d);
}

/* ------------------------------------------------------------------------------------------- */
/* Output                                                                                        */

static const char *const out_names[] = {
    "invalid",        FAID_TOPIC_START, FAID_TOPIC_RESULT,    FAID_TOPIC_END,
    FAID_TOPIC_STATS, FAID_TOPIC_ERROR, FAID_TOPIC_AGGREGATES};

#define NNAMES(a) (sizeof(a) / sizeof((a)[0]))

/* Entry v of a name table whose entry 0 is "invalid" (also for v out of range). */
static const char *table_name(const char *const *names, size_t n, int v)
{
    return v < 0 || (size_t)v >= n ? names[0] : names[v];
}

/* Index of the name (not NUL-terminated, len bytes) in a name table, 0 ("invalid") if absent. */
static int table_parse(const char *const *names, size_t n, const char *name, size_t len)
{
    for (size_t k = 1; k < n; k++)
        if (strlen(names[k]) == len && memcmp(names[k], name, len) == 0)
            return (int)k;
    return 0;
}

const char *faid_out_type_name(faid_out_type t)
{
    return table_name(out_names, NNAMES(out_names), (int)t);
}

faid_out_type faid_out_type_parse(const char *name, size_t len)
{
    return (faid_out_type)table_parse(out_names, NNAMES(out_names), name, len);
}

/* The peak arrays of a result, by key. */
/* ---- client-side decoding of faid's messages, on msgpack-c ------------------------------------
 * Each value is first walked by the bounded cursor reader (faid_mpr_skip: every container's
 * claimed size checked against the bytes left), and only then handed to msgpack-c's unpacker,
 * which reserves memory for a container's claimed size before reading a byte of it (5 bytes,
 * df 00 aa aa aa, made it malloc 512 MiB; df ff ff ff ff, 256 GiB): after the walk no claim
 * exceeds the message, so msgpack-c's zone stays below 48 bytes per byte received. Strings and
 * bins point into buf (msgpack-c references the input). */

/* A msgpack-c scalar as the cursor reader's object, for the faid_mp_to_* conversions. */
static void from_msgpack(const msgpack_object *o, faid_mp_obj *v)
{
    memset(v, 0, sizeof(*v));
    switch (o->type) {
    case MSGPACK_OBJECT_BOOLEAN:
        v->type = FAID_MP_BOOL;
        v->b = o->via.boolean;
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        v->type = FAID_MP_UINT;
        v->u = o->via.u64;
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        v->type = FAID_MP_INT;
        v->i = o->via.i64;
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        v->type = FAID_MP_FLOAT;
        v->f = o->via.f64;
        break;
    case MSGPACK_OBJECT_STR: /* msgpack-c gives an empty str or bin a NULL pointer */
        v->type = FAID_MP_STR;
        v->ptr = o->via.str.ptr ? (const uint8_t *)o->via.str.ptr : (const uint8_t *)"";
        v->len = o->via.str.size;
        break;
    case MSGPACK_OBJECT_BIN:
        v->type = FAID_MP_BIN;
        v->ptr = o->via.bin.ptr ? (const uint8_t *)o->via.bin.ptr : (const uint8_t *)"";
        v->len = o->via.bin.size;
        break;
    case MSGPACK_OBJECT_ARRAY:
        v->type = FAID_MP_ARRAY;
        v->len = o->via.array.size;
        break;
    case MSGPACK_OBJECT_MAP:
        v->type = FAID_MP_MAP;
        v->len = o->via.map.size;
        break;
    case MSGPACK_OBJECT_EXT:
        v->type = FAID_MP_EXT;
        break;
    default:
        v->type = FAID_MP_NIL;
        break;
    }
}

/* The faid_key a map key names (str or bin), FAID_KEY_UNKNOWN otherwise. */
static faid_key obj_key(const msgpack_object *k)
{
    if (k->type == MSGPACK_OBJECT_STR)
        return faid_key_lookup(k->via.str.ptr, k->via.str.size);
    if (k->type == MSGPACK_OBJECT_BIN)
        return faid_key_lookup(k->via.bin.ptr, k->via.bin.size);
    return FAID_KEY_UNKNOWN;
}

/* An array map {dtype, shape, data} (section "array" of the key table), checked by the same
 * helpers as faid_proto_read_array. */
static int array_from_msgpack(const msgpack_object *o, faid_array_view *a, faid_diag *d)
{
    memset(a, 0, sizeof(*a));
    if (o->type != MSGPACK_OBJECT_MAP)
        return faid_fail(d, FAID_EFORMAT, "array: expected a {dtype, shape, data} map");
    unsigned have = 0;
    for (uint32_t k = 0; k < o->via.map.size; k++) {
        const msgpack_object *v = &o->via.map.ptr[k].val;
        faid_mp_obj mv;
        int rc;
        from_msgpack(v, &mv);
        switch (obj_key(&o->via.map.ptr[k].key)) {
        case FAID_KEY_DTYPE:
            if ((rc = array_dtype(a, &mv, d)))
                return rc;
            have |= ARRAY_HAVE_DTYPE;
            break;
        case FAID_KEY_SHAPE:
            if ((rc = array_shape(a, &mv, d)))
                return rc;
            for (uint32_t j = 0; j < v->via.array.size; j++) {
                faid_mp_obj e;
                from_msgpack(&v->via.array.ptr[j], &e);
                if ((rc = array_shape_entry(a, j, &e, d)))
                    return rc;
            }
            have |= ARRAY_HAVE_SHAPE;
            break;
        case FAID_KEY_DATA:
            if ((rc = array_data(a, &mv, d)))
                return rc;
            have |= ARRAY_HAVE_DATA;
            break;
        default:
            break;
        }
    }
    return array_check(a, have, d);
}

/* The start message's peaks map: "algorithm" into m->peaks_algorithm, every other scalar as a
 * .peaks header line. Nested values are skipped. */
static int peak_params_from_msgpack(const msgpack_object *o, faid_out_msg *m, faid_diag *d)
{
    size_t used = strlen(m->peaks_params);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        faid_mp_obj key, v;
        from_msgpack(&o->via.map.ptr[i].key, &key);
        from_msgpack(&o->via.map.ptr[i].val, &v);
        if (key.type != FAID_MP_STR && key.type != FAID_MP_BIN)
            return faid_fail(d, FAID_EFORMAT, "key \"peaks\": key %u is not a string", i);
        if (v.type == FAID_MP_ARRAY || v.type == FAID_MP_MAP)
            continue;
        char name[64], val[96];
        printable(&key, name, sizeof(name));
        if (strcmp(name, "algorithm") == 0) {
            faid_mp_to_cstr(&v, m->peaks_algorithm, sizeof(m->peaks_algorithm));
            continue;
        }
        double x;
        if (v.type == FAID_MP_NIL)
            snprintf(val, sizeof val, "null");
        else if (v.type == FAID_MP_STR)
            faid_mp_to_cstr(&v, val, sizeof val);
        else if (v.type == FAID_MP_BOOL)
            snprintf(val, sizeof val, "%d", v.b ? 1 : 0);
        else if (faid_mp_to_f64(&v, &x) == 0)
            snprintf(val, sizeof val, "%.9g", x);
        else
            continue;
        int k =
            snprintf(m->peaks_params + used, sizeof(m->peaks_params) - used, "%s: %s\n", name, val);
        if (k < 0 || (size_t)k >= sizeof(m->peaks_params) - used)
            m->peaks_params[used] = '\0'; /* no room: cut at a whole line, read on */
        else
            used += (size_t)k;
    }
    return 0;
}

/* Where the array of key k goes in m, NULL when k names no array of an output message. */
static faid_array_view *out_array(faid_out_msg *m, faid_key k)
{
    switch (k) {
    case FAID_KEY_I:
        return &m->I;
    case FAID_KEY_SIGMA:
        return &m->sigma;
    case FAID_KEY_STD:
        return &m->std;
    case FAID_KEY_COUNT:
        return &m->count;
    case FAID_KEY_RADIAL:
        return &m->radial;
    case FAID_KEY_I2D:
        return &m->I_2d;
    case FAID_KEY_SIGMA2D:
        return &m->sigma_2d;
    case FAID_KEY_COUNT2D:
        return &m->count_2d;
    case FAID_KEY_PEAK_X:
        return &m->peak_x;
    case FAID_KEY_PEAK_Y:
        return &m->peak_y;
    case FAID_KEY_PEAK_INTENSITY:
        return &m->peak_intensity;
    case FAID_KEY_PEAK_SIGMA:
        return &m->peak_sigma;
    case FAID_KEY_PEAK_SNR:
        return &m->peak_snr;
    case FAID_KEY_PEAK_NPIX:
        return &m->peak_npix;
    case FAID_KEY_PEAK_MAX_PIXEL:
        return &m->peak_max_pixel;
    case FAID_KEY_BG_I:
        return &m->bg_I;
    case FAID_KEY_BG_SIGMA:
        return &m->bg_sigma;
    case FAID_KEY_BG_STD:
        return &m->bg_std;
    case FAID_KEY_BG_COUNT:
        return &m->bg_count;
    default:
        return NULL;
    }
}

/* True for the keys the faid_out_msg view holds (the only values handed to msgpack-c). */
static int out_key_used(faid_out_msg *m, faid_key k)
{
    if (out_array(m, k))
        return 1;
    switch (k) {
    case FAID_KEY_TYPE:
    case FAID_KEY_SERIES_ID:
    case FAID_KEY_FRAME_ID:
    case FAID_KEY_SETUP_VERSION:
    case FAID_KEY_MSG_NUMBER:
    case FAID_KEY_LATENCY_US:
    case FAID_KEY_DEVICE:
    case FAID_KEY_UNIT:
    case FAID_KEY_CODE:
    case FAID_KEY_MESSAGE:
    case FAID_KEY_STAGE:
    case FAID_KEY_NUM_PEAKS:
    case FAID_KEY_IS_HIT:
    case FAID_KEY_PEAKS:
        return 1;
    default:
        return 0;
    }
}

/* One value of the output message's top-level map, as msgpack-c decoded it. */
static int decode_output_value(faid_key key, const msgpack_object *vo, faid_out_msg *m,
                               faid_diag *d)
{
    faid_mp_obj v;
    from_msgpack(vo, &v);
    faid_array_view *arr = out_array(m, key);
    if (arr) {
        int rc = array_from_msgpack(vo, arr, d);
        if (rc)
            faid_diag_prefix(d, "key \"%s\": ", faid_key_name(key));
        return rc;
    }
    switch (key) {
    case FAID_KEY_TYPE:
        if (v.type == FAID_MP_STR)
            m->type = faid_out_type_parse((const char *)v.ptr, v.len);
        break;
    case FAID_KEY_SERIES_ID:
        faid_mp_to_u64(&v, &m->series_id);
        break;
    case FAID_KEY_FRAME_ID:
        m->has_frame_id = faid_mp_to_u64(&v, &m->frame_id) == 0;
        break;
    case FAID_KEY_SETUP_VERSION:
        faid_mp_to_u64(&v, &m->setup_version);
        break;
    case FAID_KEY_MSG_NUMBER:
        faid_mp_to_u64(&v, &m->msg_number);
        break;
    case FAID_KEY_LATENCY_US:
        faid_mp_to_f64(&v, &m->latency_us);
        break;
    case FAID_KEY_DEVICE: {
        int64_t dev;
        if (faid_mp_to_i64(&v, &dev) == 0 && dev >= -1 && dev < 1 << 20)
            m->device = (int)dev;
        break;
    }
    case FAID_KEY_UNIT:
        faid_mp_to_cstr(&v, m->unit, sizeof(m->unit));
        break;
    case FAID_KEY_CODE:
        faid_mp_to_cstr(&v, m->code, sizeof(m->code));
        break;
    case FAID_KEY_MESSAGE:
        if (v.type == FAID_MP_STR) {
            size_t n = v.len < sizeof(m->message) - 1 ? v.len : sizeof(m->message) - 1;
            memcpy(m->message, v.ptr, n);
            m->message[n] = '\0';
        }
        break;
    case FAID_KEY_STAGE:
        faid_mp_to_cstr(&v, m->stage, sizeof(m->stage));
        break;
    case FAID_KEY_NUM_PEAKS:
        m->has_peaks = faid_mp_to_u64(&v, &m->num_peaks) == 0;
        break;
    case FAID_KEY_IS_HIT:
        m->is_hit = v.type == FAID_MP_BOOL ? v.b != 0 : 0;
        break;
    case FAID_KEY_PEAKS:
        if (vo->type == MSGPACK_OBJECT_MAP)
            return peak_params_from_msgpack(vo, m, d);
        break;
    default:
        break;
    }
    return 0;
}

/* The top-level map is walked by the cursor reader (each value bounded by faid_mpr_skip); each
 * value the view holds is then decoded by msgpack-c from its own bytes. Values the view does not
 * hold (config, user_data, input, ...) never reach msgpack-c: user_data may nest 32 containers,
 * and msgpack-c's unpacker refuses more than 32 in all (MSGPACK_EMBED_STACK_SIZE). */
/* A result's value under a key without a field: kept when it is an array map (anything else, or
 * a malformed one, is skipped as an unknown key is). */
static void extra_array(faid_out_msg *m, const void *key, size_t klen, const uint8_t *at, size_t n)
{
    if (m->nextra >= FAID_OUT_EXTRA || n == 0 || !((at[0] & 0xf0) == 0x80 || at[0] == 0xde))
        return;
    faid_mpr r;
    faid_diag d = {0};
    faid_mpr_init(&r, at, n);
    faid_array_view a;
    if (faid_proto_read_array(&r, &a, &d) != 0)
        return;
    size_t kl = klen < sizeof m->extra[0].key ? klen : sizeof m->extra[0].key - 1;
    memcpy(m->extra[m->nextra].key, key, kl);
    m->extra[m->nextra].key[kl] = '\0';
    m->extra[m->nextra].a = a;
    m->nextra++;
}

const faid_array_view *faid_out_msg_array(const faid_out_msg *m, const char *key)
{
    faid_key k = faid_key_lookup(key, strlen(key));
    faid_array_view *a = out_array((faid_out_msg *)m, k);
    if (a)
        return a->ndim ? a : NULL;
    for (int i = 0; i < m->nextra; i++)
        if (strcmp(m->extra[i].key, key) == 0)
            return &m->extra[i].a;
    return NULL;
}

int faid_proto_decode_output(const void *buf, size_t len, faid_out_msg *m, faid_diag *d)
{
    memset(m, 0, sizeof(*m));
    m->device = -1;
    faid_mpr r;
    faid_mp_obj o;
    int rc = open_map(&r, buf, len, &o, "output message", d);
    if (rc)
        return rc;
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj key;
        if ((rc = read_key(&r, &key, d)))
            return rc;
        const uint8_t *at = r.p;
        if ((rc = faid_mpr_skip(&r, d)))
            return rc;
        faid_key fk = faid_key_lookup(key.ptr, key.len);
        if (!out_key_used(m, fk)) {
            if (m->type == FAID_OUT_RESULT)
                extra_array(m, key.ptr, key.len, at, (size_t)(r.p - at));
            continue;
        }
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        size_t off = 0;
        msgpack_unpack_return ur =
            msgpack_unpack_next(&u, (const char *)at, (size_t)(r.p - at), &off);
        if (ur == MSGPACK_UNPACK_SUCCESS)
            rc = decode_output_value(fk, &u.data, m, d);
        else
            rc = faid_fail(d, ur == MSGPACK_UNPACK_NOMEM_ERROR ? FAID_ENOMEM : FAID_EFORMAT,
                           "output message: key \"%s\": msgpack-c refused its value (%d)",
                           faid_key_name(fk), (int)ur);
        msgpack_unpacked_destroy(&u);
        if (rc)
            return rc;
    }
    if (m->type == FAID_OUT_INVALID)
        return faid_fail(d, FAID_EFORMAT, "output message: missing or unknown \"type\"");
    return 0;
}

void faid_proto_write_error(faid_mpw *w, const faid_out_error *e)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_str(w, FAID_TOPIC_ERROR);
    faid_mpw_key(w, FAID_K_SERIES_ID);
    faid_mpw_uint(w, e->series_id);
    if (e->has_frame_id) {
        faid_mpw_key(w, FAID_K_FRAME_ID);
        faid_mpw_uint(w, e->frame_id);
    }
    faid_mpw_key(w, FAID_K_CODE);
    faid_mpw_str(w, faid_errname(e->code));
    faid_mpw_key(w, FAID_K_ERRNO);
    faid_mpw_int(w, e->code);
    faid_mpw_key(w, FAID_K_STAGE);
    faid_mpw_str(w, e->stage ? e->stage : "");
    faid_mpw_key(w, FAID_K_MESSAGE);
    faid_mpw_str(w, e->message ? e->message : "");
    faid_mpw_key(w, FAID_K_MSG_NUMBER);
    faid_mpw_uint(w, e->msg_number);
    faid_mpw_map_end(w);
}

/* ------------------------------------------------------------------------------------------- */
/* Control                                                                                       */

static const char *const ctl_names[] = {"invalid", "status", "config", "reload",
                                        "reset",   "stop",   "ping",   "writer"};

const char *faid_ctl_cmd_name(faid_ctl_cmd c)
{
    return table_name(ctl_names, NNAMES(ctl_names), (int)c);
}

faid_ctl_cmd faid_ctl_cmd_parse(const char *name, size_t len)
{
    return (faid_ctl_cmd)table_parse(ctl_names, NNAMES(ctl_names), name, len);
}

int faid_proto_encode_request(const faid_ctl_request *q, void *buf, size_t cap, size_t *out_len,
                              faid_diag *d)
{
    if (q->cmd == FAID_CTL_INVALID || q->cmd > FAID_CTL_WRITER)
        return faid_fail(d, FAID_EINVAL, "control: invalid command");
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    int with_path = q->cmd == FAID_CTL_RELOAD && q->path[0];
    int with_key = q->cmd == FAID_CTL_CONFIG && q->key[0];
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_CMD);
    faid_mpw_str(&w, faid_ctl_cmd_name(q->cmd));
    if (with_path) {
        faid_mpw_key(&w, FAID_K_PATH);
        faid_mpw_strn(&w, q->path, strnlen(q->path, sizeof(q->path)));
    }
    if (with_key) {
        faid_mpw_key(&w, FAID_K_KEY);
        faid_mpw_strn(&w, q->key, strnlen(q->key, sizeof(q->key)));
    }
    if (q->cmd == FAID_CTL_WRITER && q->has_directory) {
        faid_mpw_key(&w, FAID_K_DIRECTORY);
        faid_mpw_strn(&w, q->directory, strnlen(q->directory, sizeof(q->directory)));
    }
    if (q->cmd == FAID_CTL_WRITER && q->has_prefix) {
        faid_mpw_key(&w, FAID_K_PREFIX);
        faid_mpw_strn(&w, q->prefix, strnlen(q->prefix, sizeof(q->prefix)));
    }
    faid_mpw_map_end(&w);
    return finish_len(&w, out_len, d);
}

int faid_proto_decode_request(const void *buf, size_t len, faid_ctl_request *q, faid_diag *d)
{
    memset(q, 0, sizeof(*q));
    const uint8_t *b = buf;
    if (!faid_proto_is_native(buf, len)) {
        /* A bare command word, possibly followed by whitespace or a newline from a shell. */
        size_t n = 0;
        while (n < len && b[n] > ' ' && b[n] < 127)
            n++;
        for (size_t k = n; k < len; k++)
            if (b[k] != ' ' && b[k] != '\n' && b[k] != '\r' && b[k] != '\t')
                return faid_fail(d, FAID_EFORMAT,
                                 "control: request is neither a msgpack map nor a command word");
        q->cmd = faid_ctl_cmd_parse((const char *)b, n);
        if (q->cmd == FAID_CTL_INVALID)
            return faid_fail(d, FAID_EINVAL, "control: unknown command \"%.*s\"",
                             (int)(n < 32 ? n : 32), (const char *)b);
        return 0;
    }
    faid_mpr r;
    faid_mp_obj o;
    int rc = open_map(&r, buf, len, &o, "control: request", d);
    if (rc)
        return rc;
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj key, v;
        if ((rc = read_key(&r, &key, d)))
            return rc;
        if (faid_mp_str_eq(&key, FAID_K_CMD)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (v.type != FAID_MP_STR)
                return faid_fail(d, FAID_EFORMAT, "control: \"cmd\" is not a string");
            q->cmd = faid_ctl_cmd_parse((const char *)v.ptr, v.len);
            if (q->cmd == FAID_CTL_INVALID) {
                char name[64];
                printable(&v, name, sizeof(name));
                return faid_fail(d, FAID_EINVAL, "control: unknown command \"%s\"", name);
            }
        } else if (faid_mp_str_eq(&key, FAID_K_PATH)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_cstr(&v, q->path, sizeof(q->path)) || memchr(v.ptr, '\0', v.len))
                return faid_fail(d, FAID_EFORMAT, "control: \"path\" is not a string that fits");
        } else if (faid_mp_str_eq(&key, FAID_K_KEY)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_cstr(&v, q->key, sizeof(q->key)) || memchr(v.ptr, '\0', v.len))
                return faid_fail(d, FAID_EFORMAT, "control: \"key\" is not a string that fits");
        } else if (faid_mp_str_eq(&key, FAID_K_DIRECTORY)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_cstr(&v, q->directory, sizeof(q->directory)) ||
                memchr(v.ptr, '\0', v.len))
                return faid_fail(d, FAID_EFORMAT,
                                 "control: \"directory\" is not a string that fits");
            q->has_directory = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_PREFIX)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_cstr(&v, q->prefix, sizeof(q->prefix)) || memchr(v.ptr, '\0', v.len))
                return faid_fail(d, FAID_EFORMAT,
                                 "control: \"prefix\" is not a string of at most 63 bytes");
            q->has_prefix = 1;
        } else if ((rc = faid_mpr_skip(&r, d))) {
            return rc;
        }
    }
    if (q->cmd == FAID_CTL_INVALID)
        return faid_fail(d, FAID_EFORMAT, "control: missing \"cmd\"");
    return 0;
}

/* ------------------------------------------------------------------------------------------- */
/* Lossless channel                                                                              */

static const char *const ll_names[] = {"invalid", "hello", "ack", "bye"};

const char *faid_ll_type_name(faid_ll_type t)
{
    return table_name(ll_names, NNAMES(ll_names), (int)t);
}

int faid_proto_encode_ll_request(const faid_ll_request *q, void *buf, size_t cap, size_t *out_len,
                                 faid_diag *d)
{
    if (q->type == FAID_LL_INVALID || q->type > FAID_LL_BYE)
        return faid_fail(d, FAID_EINVAL, "lossless: invalid consumer message type");
    size_t ilen = strnlen(q->instance, sizeof(q->instance));
    int with_seq = q->type != FAID_LL_BYE && q->has_seq;
    int with_credit = q->type != FAID_LL_BYE && q->credit > 0;
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_TYPE);
    faid_mpw_str(&w, faid_ll_type_name(q->type));
    if (with_credit) {
        faid_mpw_key(&w, FAID_K_CREDIT);
        faid_mpw_uint(&w, q->credit);
    }
    if (with_seq) {
        faid_mpw_key(&w, FAID_K_SEQ);
        faid_mpw_uint(&w, q->seq);
        faid_mpw_key(&w, FAID_K_INSTANCE);
        faid_mpw_strn(&w, q->instance, ilen);
    }
    faid_mpw_map_end(&w);
    return finish_len(&w, out_len, d);
}

int faid_proto_decode_ll_request(const void *buf, size_t len, faid_ll_request *q, faid_diag *d)
{
    memset(q, 0, sizeof(*q));
    faid_mpr r;
    faid_mp_obj o;
    int rc = open_map(&r, buf, len, &o, "lossless: consumer message", d);
    if (rc)
        return rc;
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj key, v;
        if ((rc = read_key(&r, &key, d)))
            return rc;
        int known = faid_mp_str_eq(&key, FAID_K_TYPE) || faid_mp_str_eq(&key, FAID_K_CREDIT) ||
                    faid_mp_str_eq(&key, FAID_K_SEQ) || faid_mp_str_eq(&key, FAID_K_INSTANCE);
        if (!known) {
            if ((rc = faid_mpr_skip(&r, d)))
                return rc;
            continue;
        }
        if ((rc = faid_mpr_next(&r, &v, d)))
            return rc;
        if (faid_mp_str_eq(&key, FAID_K_TYPE)) {
            if (v.type != FAID_MP_STR)
                return faid_fail(d, FAID_EFORMAT, "lossless: \"type\" is not a string");
            q->type =
                (faid_ll_type)table_parse(ll_names, NNAMES(ll_names), (const char *)v.ptr, v.len);
            if (q->type == FAID_LL_INVALID) {
                char name[64];
                printable(&v, name, sizeof(name));
                return faid_fail(d, FAID_EINVAL, "lossless: unknown consumer message \"%s\"", name);
            }
        } else if (faid_mp_str_eq(&key, FAID_K_CREDIT)) {
            if (faid_mp_to_u64(&v, &q->credit))
                return faid_fail(d, FAID_EFORMAT,
                                 "lossless: \"credit\" is not an unsigned integer");
        } else if (faid_mp_str_eq(&key, FAID_K_SEQ)) {
            if (faid_mp_to_u64(&v, &q->seq))
                return faid_fail(d, FAID_EFORMAT, "lossless: \"seq\" is not an unsigned integer");
            q->has_seq = 1;
        } else if (faid_mp_str_eq(&key, FAID_K_INSTANCE)) {
            /* Valid UTF-8 too: the instance is echoed in faid's messages, which strict msgpack
             * decoders must read. */
            if (faid_mp_to_cstr(&v, q->instance, sizeof(q->instance)) ||
                memchr(v.ptr, '\0', v.len) || !faid_utf8_valid(v.ptr, v.len))
                return faid_fail(d, FAID_EFORMAT,
                                 "lossless: \"instance\" is not a short UTF-8 string");
        }
    }
    if (q->type == FAID_LL_INVALID)
        return faid_fail(d, FAID_EFORMAT, "lossless: consumer message without \"type\"");
    return 0;
}
