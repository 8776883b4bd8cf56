/* Fuzz target of the dectris-v2 input format (proto/faid_input_dectris2.c, proto/faid_cbor.c):
 * the input is one CBOR message, decoded with input.protocol dectris-v2 and with auto detection,
 * for the first channel and for a named one. Any input must give 0 or an error with a message,
 * never a crash, an out-of-bounds view, a leak or an allocation sized by a hostile count. */
#include "faid_cbor.h"
#include "fuzz_parts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_input_part part = {data, size};
    fuzz_decode_both(FAID_PROTOCOL_DECTRIS_V2, &part, 1);
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
