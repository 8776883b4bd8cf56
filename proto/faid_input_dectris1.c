/* faid_input_dectris1: DECTRIS stream v1 (multipart JSON + binary blobs) as an input format.
 * Detection: a first part that is a JSON object carrying "htype", as every v1 message's first
 * part does. */
#include "faid_input.h"

#include <string.h>

/* DECTRIS v1 first parts are small JSON objects; a longer part is not looked into. */
#define V1_DETECT_MAX 65536

static int v1_detect(const void *first, size_t len)
{
    const char *s = first;
    if (!s || len < 2 || len > V1_DETECT_MAX)
        return 0;
    size_t k = 0;
    while (k < len && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n'))
        k++;
    if (k >= len || s[k] != '{')
        return 0;
    static const char key[] = "\"htype\"";
    for (; k + sizeof(key) - 1 <= len; k++)
        if (memcmp(s + k, key, sizeof(key) - 1) == 0)
            return 1;
    return 0;
}

const faid_input_format faid_input_dectris_v1 = {
    .name = "dectris-v1",
    .protocol = FAID_PROTOCOL_DECTRIS_V1,
    .max_parts = FAID_INPUT_MAX_PARTS,
    .detect = v1_detect,
    .decode = NULL, /* the JSON decoder lands next */
};
