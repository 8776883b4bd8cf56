/* Shared by the input-format fuzz targets: splits one fuzz input into the parts of a multipart
 * ZeroMQ message and checks what a decoder handed out. Framing: a part is a 4-byte little-endian
 * length and that many bytes; a length running past the end takes the rest (so any input is some
 * message). Corpus files of multipart formats are written in this framing. */
#ifndef FAID_FUZZ_PARTS_H
#define FAID_FUZZ_PARTS_H

#include "faid_input.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* More parts than any format takes, so that part-count checks are exercised too. */
#define FUZZ_MAX_PARTS (FAID_INPUT_MAX_PARTS + 3)

static inline int fuzz_split(const uint8_t *data, size_t size, faid_input_part *parts)
{
    int n = 0;
    size_t at = 0;
    while (at < size && n < FUZZ_MAX_PARTS) {
        uint32_t len = 0;
        size_t hl = size - at < 4 ? size - at : 4;
        memcpy(&len, data + at, hl);
        at += hl;
        size_t take = len < size - at ? len : size - at;
        parts[n].data = data + at;
        parts[n].len = take;
        at += take;
        n++;
    }
    if (n == 0) {
        parts[0].data = data;
        parts[0].len = 0;
        n = 1;
    }
    return n;
}

static inline int fuzz_inside(const void *p, size_t len, const faid_input_part *parts, int n)
{
    const uint8_t *b = p;
    for (int k = 0; k < n; k++) {
        const uint8_t *s = parts[k].data;
        if (b >= s && b + len <= s + parts[k].len)
            return 1;
    }
    return len == 0;
}

/* What every successful or failed decode must satisfy; decodes small arrays fully. */
static inline void fuzz_check(int rc, const faid_input_msg *m, const faid_diag *d,
                              const faid_input_part *parts, int n)
{
    if (rc > 0 || (rc < 0 && d->msg[0] == '\0'))
        abort();
    if (rc)
        return;
    if (m->h.type == FAID_IN_IMAGE) {
        if (!m->payload || !fuzz_inside(m->payload, m->payload_len, parts, n))
            abort();
        if (m->payload_part < 0 || m->payload_part >= n || m->h.rows <= 0 || m->h.cols <= 0 ||
            !faid_dtype_is_frame(m->h.dtype))
            abort();
        size_t bytes = (size_t)m->h.rows * (size_t)m->h.cols * faid_dtype_size(m->h.dtype);
        if (bytes <= (1u << 18)) {
            void *buf = malloc(bytes);
            faid_diag dd;
            faid_diag_clear(&dd);
            int r2 = buf ? faid_decode(m->h.encoding, m->payload, m->payload_len,
                                       faid_dtype_size(m->h.dtype), buf, bytes, &dd)
                         : 0;
            if (r2 > 0 || (r2 < 0 && dd.msg[0] == '\0'))
                abort();
            free(buf);
        }
    }
    const faid_input_array *arrs[3] = {&m->meta.pixel_mask, &m->meta.flatfield,
                                       &m->meta.countrate_table};
    for (int k = 0; k < 3; k++) {
        const faid_input_array *a = arrs[k];
        if (!a->present)
            continue;
        if (!fuzz_inside(a->data, a->len, parts, n))
            abort();
        size_t bytes = faid_input_array_bytes(a);
        if (bytes <= (1u << 18)) {
            void *buf = malloc(bytes ? bytes : 1);
            faid_diag dd;
            faid_diag_clear(&dd);
            int r2 = buf ? faid_input_array_decode(a, buf, bytes, &dd) : 0;
            if (r2 > 0 || (r2 < 0 && dd.msg[0] == '\0'))
                abort();
            free(buf);
        }
    }
    if (m->appendix && !fuzz_inside(m->appendix, m->appendix_len, parts, n))
        abort();
    /* User data as the output would carry it: any msgpack it writes must read back. */
    static uint8_t ud[4096];
    faid_mpw w;
    faid_mpw_init(&w, ud, sizeof(ud));
    int written = 0;
    faid_diag dd;
    faid_diag_clear(&dd);
    int r3 = faid_input_user_data(m, &w, &written, &dd);
    if (r3 > 0 || (r3 < 0 && dd.msg[0] == '\0'))
        abort();
    if (r3 == 0 && written && !w.overflow) {
        faid_mpr r;
        faid_mpr_init(&r, ud, w.len);
        if (faid_mpr_skip(&r, &dd) != 0 || r.p != r.end)
            abort();
    }
}

/* The body of an input-format target: PARTS decoded with PROTOCOL and with auto detection, for
 * the first channel and for a named one, each result held to fuzz_check. */
static inline void fuzz_decode_both(faid_input_protocol protocol, const faid_input_part *parts,
                                    int n)
{
    static faid_input_msg m;
    const faid_input_protocol protos[2] = {protocol, FAID_PROTOCOL_AUTO};
    for (int k = 0; k < 2; k++) {
        faid_diag d;
        faid_diag_clear(&d);
        faid_input_opts o = {.channel = k ? "threshold_2" : NULL};
        int rc = faid_input_decode(protos[k], parts, n, &o, &m, &d);
        fuzz_check(rc, &m, &d, parts, n);
    }
}

#endif
