/* Fuzz target for the REST API's own parsers of peer bytes (proto/faid_rest_api.h): the bearer
 * token file parser (faid_rest_tokens_parse), the Authorization header check against the tokens
 * it returned (faid_rest_tokens_check) and the route matcher (faid_rest_route_match). Any byte
 * sequence gives a table or an error naming the file (never echoing a token), a check gives -1
 * or the index of a token that equals what the header carries, a match gives a route whose path
 * is exactly the bytes given; never a crash, hang or leak. The input is split at its first NUL:
 * token file before it, header and path after it. */
#include "faid_rest_api.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t flen = nul ? (size_t)(nul - data) : size;
    const char *rest = nul ? (const char *)nul + 1 : "";
    size_t rlen = nul ? size - flen - 1 : 0;

    faid_rest_tokens *t = NULL;
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_rest_tokens_parse((const char *)data, flen, "fuzz.tokens", &t, &d);
    if (rc == 0) {
        if (!t || faid_rest_tokens_count(t) == 0)
            abort();
    } else if (t || strncmp(d.msg, "fuzz.tokens", 11) != 0) {
        abort();
    }
    char *hdr = malloc(rlen + 1);
    if (!hdr) {
        faid_rest_tokens_destroy(&t);
        return 0;
    }
    memcpy(hdr, rest, rlen);
    hdr[rlen] = '\0';
    char name[80];
    int i = faid_rest_tokens_check(t, hdr, name, sizeof name);
    if (i >= (int)faid_rest_tokens_count(t) || (!t && i != -1))
        abort();
    /* the same bytes as a path, under each method */
    static const char *methods[] = {"GET", "PUT", "POST", "HEAD", "DELETE", ""};
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        char allow[64];
        int r = faid_rest_route_match(methods[m], hdr, rlen, allow, sizeof allow);
        if (r >= 0 && (r >= FAID_NROUTES || strlen(faid_rest_routes[r].path) != rlen ||
                       memcmp(faid_rest_routes[r].path, hdr, rlen) != 0))
            abort();
        if (r < -2)
            abort();
    }
    free(hdr);
    faid_rest_tokens_destroy(&t);
    return 0;
}
