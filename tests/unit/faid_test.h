/* Minimal unit-test harness: CHECK records a failure with file and line and goes on; each test
 * executable returns non-zero when any check failed and prints "N passed, N failed". */
#ifndef FAID_TEST_H
#define FAID_TEST_H
#include <stdio.h>

extern int faid_test_passed;
extern int faid_test_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            faid_test_passed++;                                                                    \
        } else {                                                                                   \
            faid_test_failed++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (cond) {                                                                                \
            faid_test_passed++;                                                                    \
        } else {                                                                                   \
            faid_test_failed++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Prints the summary line and returns the process exit status. */
int faid_test_finish(void);

#endif
