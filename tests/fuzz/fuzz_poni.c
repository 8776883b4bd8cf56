/* Fuzz target for the .poni parser: any byte sequence must give 0 or an error code with a message,
 * never a crash, hang or leak; a successful parse must leave a geometry whose numbers are finite.
 */
#include "faid_geometry.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_geometry g;
    memset(&g, 0, sizeof g);
    char det[64];
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_poni_parse((const char *)data, size, "fuzz.poni", &g, det, sizeof det, &d);
    if (rc == 0) {
        if (!isfinite(g.dist) || !(g.dist > 0) || !isfinite(g.poni1) || !isfinite(g.poni2) ||
            !isfinite(g.rot1) || !isfinite(g.rot2) || !isfinite(g.rot3) ||
            !isfinite(g.wavelength) || g.orientation < 1 || g.orientation > 4 ||
            memchr(det, '\0', sizeof det) == NULL)
            abort();
    } else if (d.msg[0] == '\0' || strncmp(d.msg, "fuzz.poni", 9) != 0) {
        abort();
    }
    return 0;
}
