/* Fuzz target of the dectris-v2 input format (proto/faid_input_dectris2.c, proto/faid_cbor.c):
 * the input is one CBOR message, decoded with input.protocol dectris-v2 and with auto detection,
 * for the first channel and for a named one. Any input must give 0 or an error with a message,
 * never a crash, an out-of-bounds view, a leak or an allocation sized by a hostile count. */
#include "faid_cbor.h"
#include "fuzz_parts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_input_part part = {data, size};
    static faid_input_msg m;
    const faid_input_protocol protos[2] = {FAID_PROTOCOL_DECTRIS_V2, FAID_PROTOCOL_AUTO};
    for (int k = 0; k < 2; k++) {
        faid_diag d;
        faid_diag_clear(&d);
        faid_input_opts o = {.channel = k ? "threshold_2" : NULL};
        int rc = faid_input_decode(protos[k], &part, 1, &o, &m, &d);
        fuzz_check(rc, &m, &d, &part, 1);
    }
    /* The cursor alone: skipping item after item ends inside the buffer. */
    faid_cbr r;
    faid_cbr_init(&r, data, size);
    faid_diag d;
    while (r.p < r.end) {
        faid_diag_clear(&d);
        int rc = faid_cbr_skip(&r, &d);
        if (rc > 0 || (rc < 0 && d.msg[0] == '\0') || r.p > r.end)
            abort();
        if (rc)
            break;
    }
    return 0;
}
