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

    faid_diag_clear(&d);
    faid_out_msg m;
    check(faid_proto_decode_output(data, size, &m, &d), &d);

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
    check(faid_mp_to_json(data, size, json, sizeof(json), 8, &d), &d);
    if (strlen(json) >= sizeof(json))
        abort();
    return 0;
}
