/* Fuzz target of the configuration loader: any bytes given as a YAML file must load or fail
 * with a message, never crash, hang or leak. A document that loads must also survive the dump
 * round trip: its dump loads back to an equal configuration (abort otherwise, so that the
 * corpus test fails). */
#include "faid_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static faid_config a, b;
    faid_diag d = {0};
    faid_config_default(&a);
    if (faid_config_load_string((const char *)data, size, "fuzz.yaml", &a, &d) != 0) {
        if (d.msg[0] == '\0')
            abort(); /* every failure carries a message */
        return 0;
    }
    char *s = faid_config_dump_alloc(&a, FAID_DUMP_PLAIN);
    if (!s)
        return 0;
    faid_config_default(&b);
    if (faid_config_load_string(s, strlen(s), "dump", &b, &d) != 0 || !faid_config_equal(&a, &b))
        abort();
    char buf[256];
    faid_config_get(&a, "integration.npt", buf, sizeof buf, &d);
    free(s);
    return 0;
}
