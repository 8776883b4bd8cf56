/* Fuzz target of the native input format (proto/faid_input*.c): the input is split into the
 * parts of one multipart message (fuzz_parts.h framing) and decoded with input.protocol
 * native and with auto detection, with and without a channel choice. Any input must give 0 or
 * an error with a message, never a crash, an out-of-bounds view, a leak or a large allocation. */
#include "fuzz_parts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_input_part parts[FUZZ_MAX_PARTS];
    int n = fuzz_split(data, size, parts);
    static faid_input_msg m;
    const faid_input_protocol protos[2] = {FAID_PROTOCOL_NATIVE, FAID_PROTOCOL_AUTO};
    for (int k = 0; k < 2; k++) {
        faid_diag d;
        faid_diag_clear(&d);
        faid_input_opts o = {.channel = k ? "threshold_2" : NULL};
        int rc = faid_input_decode(protos[k], parts, n, &o, &m, &d);
        fuzz_check(rc, &m, &d, parts, n);
    }
    return 0;
}
