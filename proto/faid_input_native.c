/* faid_input_native: faid's own input protocol (proto/PROTOCOL.md section 2) as an input format:
 * a msgpack header map in part 1 (faid_proto_decode_input), the encoded frame as part 2 of an
 * image; start and end are single parts. The payload is handed out where it was received. */
#include "faid_input.h"

static int native_detect(const void *first, size_t len)
{
    return faid_proto_is_native(first, len);
}

static int native_decode(const faid_input_part *parts, int nparts, const faid_input_opts *o,
                         faid_input_msg *m, faid_diag *d)
{
    if (!faid_proto_is_native(parts[0].data, parts[0].len)) {
        const uint8_t *b = parts[0].data;
        return faid_fail(d, FAID_EPROTO,
                         "first part is not a msgpack map (first byte 0x%02x, %zu bytes): not a "
                         "native faid message",
                         parts[0].len ? b[0] : 0, parts[0].len);
    }
    int rc = faid_proto_decode_input(parts[0].data, parts[0].len, &m->h, d);
    if (rc)
        return rc;
    m->header_ok = 1;
    switch (m->h.type) {
    case FAID_IN_IMAGE:
        if (nparts != 2)
            return faid_fail(d, FAID_EPROTO,
                             "image message has %d part(s), expected 2 (header, payload)", nparts);
        m->payload_part = 1;
        m->payload = parts[1].data;
        m->payload_len = parts[1].len;
        return 0;
    case FAID_IN_START:
        if (nparts != 1)
            return faid_fail(d, FAID_EPROTO, "start message has %d parts, expected 1", nparts);
        if (m->h.nimages >= 0) {
            m->meta.nimages = m->h.nimages;
            m->meta.have |= FAID_META_NIMAGES;
        }
        return 0;
    case FAID_IN_END:
        if (nparts != 1)
            return faid_fail(d, FAID_EPROTO, "end message has %d parts, expected 1", nparts);
        return 0;
    default:
        return faid_fail(d, FAID_EFORMAT, "unknown message type");
    }
}

const faid_input_format faid_input_native = {
    .protocol = FAID_PROTOCOL_NATIVE,
    .max_parts = 2,
    .detect = native_detect,
    .decode = native_decode,
};
