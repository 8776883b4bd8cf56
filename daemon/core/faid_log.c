/* faid_log: formatting and rate limiting of log lines (see faid_log.h). */
#include "faid_log.h"

#include "faid_err.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static faid_log_level g_level = FAID_LOG_INFO;
static char g_name[32] = "faid";
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};

void faid_log_set_level(faid_log_level level)
{
    g_level = level;
}
faid_log_level faid_log_get_level(void)
{
    return g_level;
}

int faid_log_parse_level(const char *name, faid_log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (faid_log_level)i;
            return FAID_OK;
        }
    }
    return FAID_EINVAL;
}

void faid_log_set_name(const char *program)
{
    snprintf(g_name, sizeof g_name, "%s", program);
}

int64_t faid_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t faid_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void vlog(faid_log_level level, const char *component, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int64_t now = faid_wall_ns();
    time_t secs = (time_t)(now / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&g_lock);
    fprintf(stderr, "%s.%03dZ %s[%d] %s %s: %s\n", stamp, (int)((now / 1000000) % 1000), g_name,
            (int)getpid(), level_names[level], component, msg);
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}

void faid_log(faid_log_level level, const char *component, const char *fmt, ...)
{
    if (level > g_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, component, fmt, ap);
    va_end(ap);
}

void faid_log_ratelimited(faid_ratelimit *rl, faid_log_level level, const char *component,
                          const char *fmt, ...)
{
    if (level > g_level)
        return;
    /* Up to 5 lines per second per call site; the first line of the next window reports how
     * many were held back. The counters are only approximate under contention, which is fine. */
    int64_t now = faid_now_ns();
    pthread_mutex_lock(&g_lock);
    int64_t suppressed = 0;
    int emit = 0;
    if (now - rl->window_start_ns > 1000000000) {
        suppressed = rl->suppressed;
        rl->window_start_ns = now;
        rl->emitted = 0;
        rl->suppressed = 0;
    }
    if (rl->emitted < 5) {
        rl->emitted++;
        emit = 1;
    } else {
        rl->suppressed++;
    }
    pthread_mutex_unlock(&g_lock);
    if (!emit)
        return;
    if (suppressed)
        faid_log(level, component, "(%lld similar messages suppressed)", (long long)suppressed);
    va_list ap;
    va_start(ap, fmt);
    vlog(level, component, fmt, ap);
    va_end(ap);
}
