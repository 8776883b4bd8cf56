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
const char *const faid_log_level_names[] = {"error", "warn", "info", "debug", NULL};

int faid_log_parse_level(const char *name, faid_log_level *out)
{
    for (int i = 0; faid_log_level_names[i]; i++) {
        if (strcmp(name, faid_log_level_names[i]) == 0) {
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

/* The sites that have suppressed something, linked once each (under g_lock). */
static faid_ratelimit *g_sites;
static uint64_t g_suppressed_total;

static void report(faid_log_level level, const char *component, const char *fmt, int64_t n)
{
    faid_log(level, component, "(%lld more like \"%s\" suppressed)", (long long)n, fmt);
}

void faid_log_ratelimited(faid_ratelimit *rl, faid_log_level level, const char *component,
                          const char *fmt, ...)
{
    if (level > g_level)
        return;
    /* Up to FAID_LOG_RATE lines per second per call site; the first line of the next window
     * (or faid_log_flush_suppressed) reports how many were held back. 100,000 series starts
     * wrote 300,005 lines in 6 s before every peer-driven line went through here (issue 20,
     * defect 10). */
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
    if (rl->emitted < FAID_LOG_RATE) {
        rl->emitted++;
        emit = 1;
    } else {
        rl->suppressed++;
        g_suppressed_total++;
        rl->level = level;
        rl->component = component;
        rl->fmt = fmt;
        if (!rl->listed) {
            rl->listed = 1;
            rl->next = g_sites;
            g_sites = rl;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!emit)
        return;
    if (suppressed)
        report(level, component, fmt, suppressed);
    va_list ap;
    va_start(ap, fmt);
    vlog(level, component, fmt, ap);
    va_end(ap);
}

void faid_log_flush_suppressed(int all)
{
    int64_t now = faid_now_ns();
    for (;;) {
        int64_t n = 0;
        faid_log_level level = FAID_LOG_INFO;
        const char *component = NULL, *fmt = NULL;
        pthread_mutex_lock(&g_lock);
        for (faid_ratelimit *rl = g_sites; rl; rl = rl->next) {
            if (rl->suppressed && (all || now - rl->window_start_ns > 1000000000)) {
                n = rl->suppressed;
                rl->suppressed = 0;
                level = rl->level;
                component = rl->component; /* string literals of the site: they stay valid */
                fmt = rl->fmt;
                break;
            }
        }
        pthread_mutex_unlock(&g_lock);
        if (!n)
            return;
        report(level, component, fmt, n);
    }
}

uint64_t faid_log_suppressed_total(void)
{
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_suppressed_total;
    pthread_mutex_unlock(&g_lock);
    return n;
}
