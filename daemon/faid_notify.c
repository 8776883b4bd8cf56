/* faid_notify: sd_notify READY / STATUS / STOPPING / WATCHDOG (see faid_notify.h). */
#include "faid_notify.h"

#include "faid_log.h"
#include "faid_state.h"

#include "faid_ingest.h"

#include <stdio.h>
#include <systemd/sd-daemon.h>

static uint64_t g_wd_ns;    /* watchdog period, 0 = off */
static int64_t g_next_ping; /* monotonic ns */
static int64_t g_next_status;
static int g_stale_logged;

#define STATUS_PERIOD_NS (5ll * 1000000000ll)

int faid_notify_init(int max_ms)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        g_wd_ns = usec * 1000ull;
        FAID_INFO("notify", "systemd watchdog every %.3f s", (double)usec / 2e6);
        /* Ticks four times per ping period, so a ping is never late by more than a quarter. */
        int ms = (int)(usec / 4000ull);
        if (ms < 10)
            ms = 10;
        return ms < max_ms ? ms : max_ms;
    }
    return max_ms;
}

static void status_line(faid_server *s, const char *what)
{
    sd_notifyf(0,
               "STATUS=%s: received %llu, processed %llu, failed %llu, dropped %llu, %.1f frames/s",
               what, (unsigned long long)faid_stat_get(&s->stats.received),
               (unsigned long long)faid_stat_get(&s->stats.processed),
               (unsigned long long)faid_stat_get(&s->stats.failed),
               (unsigned long long)faid_stat_get(&s->stats.dropped), faid_stats_fps(&s->stats));
}

void faid_notify_ready(faid_server *s)
{
    sd_notify(0, "READY=1");
    status_line(s, "ready");
    int64_t now = faid_now_ns();
    g_next_ping = now;
    g_next_status = now + STATUS_PERIOD_NS;
}

void faid_notify_stopping(void)
{
    sd_notify(0, "STOPPING=1\nSTATUS=stopping: finishing the frames in flight");
}

/* A heartbeat of 0: that thread has not run its loop yet (it is starting). */
static int old(atomic_int_fast64_t *beat, int64_t now, int64_t limit)
{
    int64_t v = atomic_load(beat);
    return v && now - v > limit;
}

/* The first thread whose heartbeat is older than limit, or NULL. */
static const char *stale_thread(faid_server *s, int64_t now, int64_t limit, char *buf, size_t cap)
{
    if (faid_ingest_running(s->ingest))
        for (int i = 0; i < s->npull; i++)
            if (old(&s->ingest_alive_ns[i], now, limit)) {
                snprintf(buf, cap, "ingest %d", i);
                return buf;
            }
    if (s->publish_started && old(&s->publish_alive_ns, now, limit))
        return "publisher";
    for (int i = 0; i < s->nworkers; i++)
        if (s->workers[i].started && old(&s->workers[i].alive_ns, now, limit)) {
            snprintf(buf, cap, "worker %d", i);
            return buf;
        }
    for (int i = 0; i < s->nworkers; i++)
        if (s->workers[i].started && old(&s->workers[i].collect_alive_ns, now, limit)) {
            snprintf(buf, cap, "worker %d collect", i);
            return buf;
        }
    return NULL;
}

void faid_notify_tick(faid_server *s)
{
    int64_t now = faid_now_ns();
    if (g_wd_ns && now >= g_next_ping) {
        char buf[32];
        const char *stale = stale_thread(s, now, (int64_t)(g_wd_ns / 2), buf, sizeof buf);
        if (!stale) {
            sd_notify(0, "WATCHDOG=1");
            g_next_ping = now + (int64_t)(g_wd_ns / 2);
            g_stale_logged = 0;
        } else if (!g_stale_logged) {
            /* No ping: systemd restarts faid if the thread does not come back in time. */
            FAID_ERROR("notify", "the %s thread has not turned for over %.3f s: watchdog not fed",
                       stale, (double)g_wd_ns / 2e9);
            g_stale_logged = 1;
        }
    }
    if (now >= g_next_status) {
        status_line(s, "running");
        g_next_status = now + STATUS_PERIOD_NS;
    }
}
