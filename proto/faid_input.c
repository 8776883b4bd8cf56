/* faid_input: the registry of input formats, protocol names, per-message detection and the
 * helpers every format shares (auxiliary arrays of start messages). The formats themselves live
 * in faid_input_native.c, faid_input_dectris1.c and faid_input_dectris2.c. */
#include "faid_input.h"

#include "faid_cbor.h"

#include <string.h>

/* The one list of input.protocol names (the option table's choices too), by faid_input_protocol. */
const char *const faid_input_protocol_names[] = {
    [FAID_PROTOCOL_AUTO] = "auto",
    [FAID_PROTOCOL_NATIVE] = "native",
    [FAID_PROTOCOL_DECTRIS_V1] = "dectris-v1",
    [FAID_PROTOCOL_DECTRIS_V2] = "dectris-v2",
    [FAID_PROTOCOL_FAN] = "fan",
    [FAID_PROTOCOL_FAN + 1] = NULL,
};
#define NPROTOCOLS (sizeof(faid_input_protocol_names) / sizeof(faid_input_protocol_names[0]) - 1)

/* Each protocol's format, by faid_input_protocol (NULL for auto and fan). */
static const faid_input_format *const formats[NPROTOCOLS] = {
    [FAID_PROTOCOL_NATIVE] = &faid_input_native,
    [FAID_PROTOCOL_DECTRIS_V1] = &faid_input_dectris_v1,
    [FAID_PROTOCOL_DECTRIS_V2] = &faid_input_dectris_v2,
};

/* Detection order of auto: the CBOR tag and the JSON object are unambiguous first bytes
 * (d9 / '{'), disjoint from a msgpack map (0x80-0x8f, 0xde, 0xdf), so the order only matters
 * for garbage. */
static const faid_input_format *const auto_order[] = {
    &faid_input_dectris_v2,
    &faid_input_dectris_v1,
    &faid_input_native,
};

int faid_input_protocol_parse(const char *name, faid_input_protocol *out)
{
    for (size_t k = 0; name && k < NPROTOCOLS; k++)
        if (strcmp(name, faid_input_protocol_names[k]) == 0) {
            *out = (faid_input_protocol)k;
            return 0;
        }
    return -1;
}

const char *faid_input_protocol_name(faid_input_protocol p)
{
    return (unsigned)p < NPROTOCOLS ? faid_input_protocol_names[p] : "invalid";
}

const faid_input_format *faid_input_format_of(faid_input_protocol p)
{
    return (unsigned)p < NPROTOCOLS ? formats[p] : NULL;
}

const faid_input_format *faid_input_detect(faid_input_protocol p, const void *first, size_t len)
{
    if (p != FAID_PROTOCOL_AUTO)
        return faid_input_format_of(p);
    for (size_t k = 0; k < sizeof(auto_order) / sizeof(auto_order[0]); k++)
        if (auto_order[k]->detect(first, len))
            return auto_order[k];
    return NULL;
}

int faid_input_available(faid_input_protocol p, faid_diag *d)
{
    if ((unsigned)p < NPROTOCOLS)
        return 0;
    return faid_fail(d, FAID_EUNSUP, "input.protocol %d is not known", (int)p);
}

int faid_input_decode(faid_input_protocol p, const faid_input_part *parts, int nparts,
                      const faid_input_opts *o, faid_input_msg *m, faid_diag *d)
{
    memset(m, 0, sizeof(*m));
    m->h.nimages = -1;
    m->nparts = nparts;
    m->payload_part = -1;
    m->channel_index = -1;
    if (nparts < 1 || !parts)
        return faid_fail(d, FAID_EPROTO, "message without parts");
    const faid_input_format *f = faid_input_detect(p, parts[0].data, parts[0].len);
    if (!f) {
        const uint8_t *b = parts[0].data;
        return faid_fail(d, FAID_EPROTO,
                         "part 1 (%zu bytes, first byte 0x%02x) is neither DECTRIS stream v2 "
                         "CBOR, DECTRIS stream v1 JSON nor a native msgpack map",
                         parts[0].len, parts[0].len ? b[0] : 0);
    }
    m->format = f;
    static const faid_input_opts none = {0};
    int rc = f->decode(parts, nparts, o ? o : &none, m, d);
    /* Whatever the format: faid keeps and re-emits the series name, so it must be text that
     * every decoder reads (issue 10: bytes ff fe made start, result, end, stats and status
     * unreadable for Python's msgpack until the next series). */
    if (!rc && !faid_utf8_valid(m->h.series_unique_id, strlen(m->h.series_unique_id)))
        rc = faid_fail(d, FAID_EFORMAT, "%s: series_unique_id is not valid UTF-8",
                       faid_input_protocol_name(f->protocol));
    return rc;
}

size_t faid_input_array_bytes(const faid_input_array *a)
{
    if (!a || !a->present)
        return 0;
    return (size_t)(a->shape[0] * a->shape[1]) * faid_dtype_size(a->dtype);
}

int faid_input_array_decode(const faid_input_array *a, void *dst, size_t dst_len, faid_diag *d)
{
    if (!a->present)
        return faid_fail(d, FAID_EINVAL, "array not present");
    size_t want = faid_input_array_bytes(a);
    if (dst_len != want)
        return faid_fail(d, FAID_ESIZE, "array of %llu x %llu %s needs %zu bytes, buffer has %zu",
                         (unsigned long long)a->shape[0], (unsigned long long)a->shape[1],
                         faid_dtype_name(a->dtype), want, dst_len);
    return faid_decode(a->encoding, a->data, a->len, faid_dtype_size(a->dtype), dst, dst_len, d);
}

/* Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static int valid_utf8(const uint8_t *p, size_t n)
{
    size_t k = 0;
    while (k < n) {
        uint8_t c = p[k];
        size_t more = c < 0x80         ? 0
                      : (c >> 5) == 6  ? 1
                      : (c >> 4) == 14 ? 2
                      : (c >> 3) == 30 ? 3
                                       : 9;
        if (more == 9 || more >= n - k)
            return 0;
        uint32_t cp = more == 0   ? c
                      : more == 1 ? (c & 0x1fu)
                      : more == 2 ? (c & 0x0fu)
                                  : (c & 0x07u);
        for (size_t j = 1; j <= more; j++) {
            if ((p[k + j] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[k + j] & 0x3fu);
        }
        static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min[more] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        k += more + 1;
    }
    return 1;
}

int faid_input_user_data(const faid_input_msg *m, faid_mpw *w, int *written, faid_diag *d)
{
    *written = 0;
    if (m->h.user_data) {
        faid_mpw_raw(w, m->h.user_data, m->h.user_data_len);
        *written = 1;
        return 0;
    }
    if (!m->appendix || !m->format)
        return 0;
    if (m->format->protocol == FAID_PROTOCOL_DECTRIS_V2) {
        faid_cbr r;
        faid_cbr_init(&r, m->appendix, m->appendix_len);
        size_t at = w->len;
        int rc = faid_cbor_to_msgpack(&r, w, d);
        /* CBOR allows map keys of any type; the msgpack faid forwards must read everywhere
         * (faid_mp_check_value: text keys, UTF-8, bounded depth). */
        if (!rc && !w->overflow) {
            faid_mpr mr;
            faid_mpr_init(&mr, w->buf + at, w->len - at);
            rc = faid_mp_check_value(&mr, FAID_MP_MAX_DEPTH, "converted to msgpack", d);
        }
        if (rc) {
            faid_diag_prefix(d, "key \"user_data\": ");
            return rc;
        }
    } else if (valid_utf8(m->appendix, m->appendix_len)) {
        faid_mpw_strn(w, (const char *)m->appendix, m->appendix_len);
    } else {
        faid_mpw_bin(w, m->appendix, m->appendix_len);
    }
    *written = 1;
    return 0;
}
