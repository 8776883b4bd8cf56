/* Fuzz target of what faid-fan and its instances read from each other (proto/faid_fan_proto.c):
 * the input is split into the parts of one multipart message (fuzz_parts.h framing). Part 0 is
 * decoded as a link message (hello, credit with its accounted ranges and config_hash, bye from
 * an instance; welcome, refused, rejoin, route, beat from the fan-out); a message that decodes is
 * encoded again and must decode to the same fields (the encoder writes what the decoder reads).
 * Parts 1.. are the detector message a route carries, read as the fan-out's routing peek reads it
 * (auto detection: kind, series, frame). Any input must give 0 or an error with a message, never a
 * crash, an overread or a leak. */
#include "faid_fan_proto.h"
#include "fuzz_parts.h"

#include <stdlib.h>
#include <string.h>

static void check_link(const faid_input_part *p)
{
    faid_fan_msg m, again;
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_fan_decode(p->data, p->len, &m, &d);
    if (rc > 0 || (rc < 0 && !d.msg[0]))
        abort();
    if (rc)
        return;
    if (m.type == FAID_FAN_NONE || strlen(m.instance) >= sizeof(m.instance) ||
        strlen(m.error) >= sizeof(m.error) || strlen(m.protocol) >= sizeof(m.protocol))
        abort();
    uint8_t buf[FAID_FAN_LINK_MAX];
    size_t len = 0;
    if (faid_fan_encode(&m, buf, sizeof(buf), &len, &d) != 0)
        abort(); /* every decoded message fits: its strings are bounded */
    if (faid_fan_decode(buf, len, &again, &d) != 0)
        abort();
    if (again.type != m.type)
        abort();
    switch (m.type) {
    case FAID_FAN_HELLO:
        if (strcmp(again.instance, m.instance) || strcmp(again.config_hash, m.config_hash) ||
            again.window != m.window || again.done != m.done)
            abort();
        break;
    case FAID_FAN_CREDIT:
    case FAID_FAN_BYE:
        if (again.window != m.window || again.done != m.done ||
            strcmp(again.config_hash, m.config_hash) || again.has_accounted != m.has_accounted ||
            again.naccounted != m.naccounted ||
            memcmp(again.accounted, m.accounted, m.naccounted * sizeof(m.accounted[0])))
            abort();
        if (m.naccounted > FAID_FAN_ACCOUNTED_MAX)
            abort();
        for (uint32_t k = 0; k < m.naccounted; k++)
            if (m.accounted[k][2] < m.accounted[k][1])
                abort();
        break;
    case FAID_FAN_ROUTE:
        if (again.kind != m.kind || again.series_id != m.series_id ||
            again.has_frame_id != m.has_frame_id || again.frame_id != m.frame_id ||
            again.shard != m.shard || again.shards != m.shards ||
            strcmp(again.protocol, m.protocol))
            abort();
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_input_part parts[FUZZ_MAX_PARTS];
    int n = fuzz_split(data, size, parts);
    check_link(&parts[0]);
    if (n > 1)
        fuzz_decode_both(FAID_PROTOCOL_AUTO, parts + 1, n - 1);
    return 0;
}
