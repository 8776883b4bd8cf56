/* Unit tests of faid_log's rate limiting (base/faid_log.c): a site lets FAID_LOG_RATE
 * lines a second through and counts the rest; faid_log_flush_suppressed reports every count
 * once, as one line naming the site's format; the total is what status `log_suppressed` shows.
 * stderr is redirected into a temporary file to read the lines back. */
#include "faid_log.h"
#include "faid_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *read_all(FILE *f)
{
    fflush(stderr);
    long n = ftell(f);
    char *buf = calloc(1, (size_t)n + 1);
    rewind(f);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n)
        buf[0] = '\0';
    return buf;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

int main(void)
{
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL);
    if (!tmp)
        return faid_test_finish();
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);

    static faid_ratelimit rl, quiet;
    uint64_t before = faid_log_suppressed_total();
    for (int i = 0; i < 100; i++)
        faid_log_ratelimited(&rl, FAID_LOG_WARN, "test", "flood line %d", i);
    /* below the level in force: neither written nor counted */
    for (int i = 0; i < 10; i++)
        faid_log_ratelimited(&quiet, FAID_LOG_DEBUG, "test", "debug line %d", i);
    uint64_t held = faid_log_suppressed_total() - before;
    faid_log_flush_suppressed(0); /* the window has not ended: nothing yet */
    char *mid = read_all(tmp);
    faid_log_flush_suppressed(1); /* the stop: every count */
    faid_log_flush_suppressed(1); /* reported once */
    fseek(tmp, 0, SEEK_END);
    char *all = read_all(tmp);

    dup2(saved, STDERR_FILENO);
    close(saved);
    /* Under a slow machine the 100 calls could span a window: the counts still add up. */
    CHECK(mid && all);
    if (mid && all) {
        int shown = count(all, "test: flood line ");
        CHECK_MSG(shown >= FAID_LOG_RATE && shown < 100, "%d lines shown", shown);
        CHECK_MSG(held == (uint64_t)(100 - shown), "held %llu, shown %d", (unsigned long long)held,
                  shown);
        char want[96];
        snprintf(want, sizeof want, "(%d more like \"flood line %%d\" suppressed)", 100 - shown);
        CHECK_MSG(strstr(all, want) != NULL, "no '%s' in:\n%s", want, all);
        CHECK(count(all, "more like") == 1);
        CHECK(count(mid, "more like") == 0 || strstr(mid, want) != NULL);
        CHECK(count(all, "debug line") == 0 && count(all, "WARN  test:") == shown + 1);
    }
    free(mid);
    free(all);
    fclose(tmp);
    return faid_test_finish();
}
