/* Counters, the name filter and the summary of the unit-test harness (see faid_test.h). */
#include "faid_test.h"

#include <stdlib.h>
#include <string.h>

int faid_test_passed;
int faid_test_failed;
static int selected, skipped;

int faid_test_selected(const char *call)
{
    const char *want = getenv("FAID_TEST");
    if (!want || !*want) {
        selected++;
        return 1;
    }
    size_t n = strcspn(call, "( ");
    for (const char *p = want; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, call, n) == 0) {
            selected++;
            return 1;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    skipped++;
    return 0;
}

int faid_test_finish(void)
{
    const char *want = getenv("FAID_TEST");
    if (want && *want && selected == 0) {
        printf("FAID_TEST=%s names no test function of this executable\n", want);
        return 1;
    }
    if (skipped)
        printf("%d passed, %d failed (%d test functions left out by FAID_TEST)\n", faid_test_passed,
               faid_test_failed, skipped);
    else
        printf("%d passed, %d failed\n", faid_test_passed, faid_test_failed);
    return faid_test_failed ? 1 : 0;
}
