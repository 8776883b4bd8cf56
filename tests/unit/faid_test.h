/* Minimal unit-test harness: CHECK records a failure with file and line and goes on; each test
 * executable returns non-zero when any check failed and prints "N passed, N failed".
 *
 * main() calls each test function through RUN(test_name(args)), so that one test runs by name:
 * FAID_TEST=test_errors build/bin/test_config (a comma-separated list of names is fine; with
 * ctest: FAID_TEST=test_errors ctest -R unit.config). A FAID_TEST that names no test function of
 * the executable fails it, so a misspelt name cannot pass as a green run. */
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

/* Whether the test function called as `call` ("test_x(ctx)") runs: always without FAID_TEST,
 * else when its name is one of FAID_TEST's comma-separated names. */
int faid_test_selected(const char *call);

#define RUN(call)                                                                                  \
    do {                                                                                           \
        if (faid_test_selected(#call))                                                             \
            call;                                                                                  \
    } while (0)

/* Prints the summary line and returns the process exit status. */
int faid_test_finish(void);

#endif
