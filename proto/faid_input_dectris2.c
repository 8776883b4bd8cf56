/* faid_input_dectris2: DECTRIS stream v2 (CBOR, one part per message) and Jungfraujoch's CBOR
 * superset as an input format. Detection: the self-described CBOR tag 55799 (d9 d9 f7) that
 * every DECTRIS v2 message starts with. */
#include "faid_input.h"

static int v2_detect(const void *first, size_t len)
{
    const uint8_t *b = first;
    return b && len >= 3 && b[0] == 0xd9 && b[1] == 0xd9 && b[2] == 0xf7;
}

const faid_input_format faid_input_dectris_v2 = {
    .name = "dectris-v2",
    .protocol = FAID_PROTOCOL_DECTRIS_V2,
    .max_parts = 1,
    .detect = v2_detect,
    .decode = NULL, /* the CBOR decoder lands next */
};
