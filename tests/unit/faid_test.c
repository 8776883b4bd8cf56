/* Counters and summary for the unit-test harness (see faid_test.h). */
#include "faid_test.h"

int faid_test_passed;
int faid_test_failed;

int faid_test_finish(void)
{
    printf("%d passed, %d failed\n", faid_test_passed, faid_test_failed);
    return faid_test_failed ? 1 : 0;
}
