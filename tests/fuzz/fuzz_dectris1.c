/* Fuzz target of the dectris-v1 input format (proto/faid_input*.c): the input is split into the
 * parts of one multipart message (fuzz_parts.h framing) and decoded with input.protocol
 * dectris-v1 and with auto detection, with and without a channel choice. Any input must give 0 or
 * an error with a message, never a crash, an out-of-bounds view, a leak or a large allocation. */
#include "fuzz_parts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_input_part parts[FUZZ_MAX_PARTS];
    int n = fuzz_split(data, size, parts);
    fuzz_decode_both(FAID_PROTOCOL_DECTRIS_V1, parts, n);
    return 0;
}
