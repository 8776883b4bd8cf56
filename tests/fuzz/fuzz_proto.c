/* Fuzz target for every decoder of proto/faid_proto.c that sees network bytes: the native input
 * header, control requests, output messages (as subscribers decode them), generic key lookup,
 * array maps, the msgpack skipper and the JSON renderer. Any byte sequence must give 0 or a
 * negative code with a message, never a crash, hang, leak or out-of-bounds access; a header that
 * decodes must encode again and decode to the same fields. */
#include "faid_proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int rc, const faid_diag *d)
{
    /* Failures must carry a message (what the daemon logs and answers). */
    if (rc > 0 || (rc < 0 && d->msg[0] == '\0'))
        abort();
}

static void roundtrip(const faid_in_header *h)
{
    uint8_t buf[4096];
    size_t len = 0;
    faid_diag d;
    faid_diag_clear(&d);
    if (h->user_data_len > 2048)
        return;
    if (faid_proto_encode_input(h, buf, sizeof(buf), &len, &d) != 0)
        abort();
    faid_in_header g;
    faid_diag_clear(&d);
    if (faid_proto_decode_input(buf, len, &g, &d) != 0)
        abort();
    if (g.type != h->type || g.series_id != h->series_id || g.user_data_len != h->user_data_len ||
        strcmp(g.series_unique_id, h->series_unique_id) != 0)
        abort();
    if (h->type == FAID_IN_IMAGE &&
        (g.frame_id != h->frame_id || g.rows != h->rows || g.cols != h->cols ||
         g.dtype != h->dtype || g.encoding != h->encoding))
        abort();
    if (h->user_data_len && memcmp(g.user_data, h->user_data, h->user_data_len) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_diag d;
    faid_diag_clear(&d);
    faid_in_header h;
    int rc = faid_proto_decode_input(data, size, &h, &d);
    check(rc, &d);
    if (rc == 0)
        roundtrip(&h);

    faid_diag_clear(&d);
    faid_ctl_request q;
    check(faid_proto_decode_request(data, size, &q, &d), &d);

    /* What a lossless consumer sends to the daemon's ROUTER; a message that decodes must encode
     * and decode to the same fields. */
    faid_diag_clear(&d);
    faid_ll_request lq;
    rc = faid_proto_decode_ll_request(data, size, &lq, &d);
    check(rc, &d);
    if (rc == 0 && lq.type != FAID_LL_BYE) {
        uint8_t lbuf[256];
        size_t llen = 0;
        faid_ll_request lg;
        if (faid_proto_encode_ll_request(&lq, lbuf, sizeof(lbuf), &llen, &d) != 0 ||
            faid_proto_decode_ll_request(lbuf, llen, &lg, &d) != 0 || lg.type != lq.type ||
            lg.credit != lq.credit || lg.has_seq != lq.has_seq || lg.seq != lq.seq ||
            (lq.has_seq && strcmp(lg.instance, lq.instance) != 0))
            abort();
    }

    faid_diag_clear(&d);
    faid_out_msg m;
    rc = faid_proto_decode_output(data, size, &m, &d);
    check(rc, &d);
    /* a result's arrays kept by key lie inside the message, their keys are terminated */
    for (int i = 0; rc == 0 && i < m.nextra; i++) {
        const faid_array_view *x = &m.extra[i].a;
        if (m.nextra > FAID_OUT_EXTRA || !memchr(m.extra[i].key, 0, sizeof m.extra[i].key) ||
            (x->nbytes && (x->data < data || x->data + x->nbytes > data + size)) ||
            faid_out_msg_array(&m, m.extra[i].key) == NULL)
            abort();
    }

    faid_diag_clear(&d);
    faid_mp_obj v;
    faid_mpr at;
    rc = faid_proto_map_find(data, size, "data", &v, &at, &d);
    check(rc, &d);

    faid_diag_clear(&d);
    faid_mpr r;
    faid_mpr_init(&r, data, size);
    faid_array_view a;
    check(faid_proto_read_array(&r, &a, &d), &d);

    faid_diag_clear(&d);
    faid_mpr_init(&r, data, size);
    while (r.p < r.end) {
        rc = faid_mpr_skip(&r, &d);
        check(rc, &d);
        if (rc)
            break;
    }

    char json[2048];
    faid_diag_clear(&d);
    rc = faid_mp_to_json(data, size, json, sizeof(json), 8, &d);
    check(rc, &d);
    if (strlen(json) >= sizeof(json))
        abort();
    /* faidctl --json never writes invalid UTF-8, whatever the bytes (issue 10). */
    if (rc == 0 && !faid_utf8_valid(json, strlen(json)))
        abort();

    /* The value checker accepts only what strict decoders read; what it accepts, the skipper
     * accepts too, ending at the same byte. */
    faid_diag_clear(&d);
    faid_mpr_init(&r, data, size);
    rc = faid_mp_check_value(&r, FAID_MP_MAX_DEPTH, "fuzz", &d);
    check(rc, &d);
    if (rc == 0) {
        faid_mpr s2;
        faid_mpr_init(&s2, data, size);
        if (faid_mpr_skip(&s2, &d) != 0 || s2.p != r.p)
            abort();
    }

    /* Every str faid writes is valid UTF-8 (invalid bytes become U+FFFD). */
    uint8_t out[4 * 512 + 8];
    faid_mpw w;
    faid_mpw_init(&w, out, sizeof(out));
    size_t n = size < 512 ? size : 512;
    faid_mpw_strn(&w, (const char *)data, n);
    faid_mp_obj o;
    faid_mpr_init(&r, out, w.len);
    if (w.overflow || faid_mpr_next(&r, &o, &d) != 0 || o.type != FAID_MP_STR ||
        !faid_utf8_valid(o.ptr, o.len) || r.p != r.end || (faid_utf8_valid(data, n) && o.len != n))
        abort();
    return 0;
}
