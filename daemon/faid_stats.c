/* faid_stats: counters, error/drop tables and the latency histogram (see faid_stats.h). */
#include "faid_stats.h"

#include "faid_outputs.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

const char *faid_where_name(faid_where s)
{
    static const char *const names[] = {"ingest", "worker", "output"};
    return (unsigned)s < FAID_NWHERE ? names[s] : "unknown";
}

const char *faid_drop_name(faid_drop_reason r)
{
    static const char *const names[] = {"queue.oldest", "queue.newest", "series.stale",
                                        "input.shutdown"};
    return (unsigned)r < FAID_NDROPS ? names[r] : "unknown";
}

const char *faid_msg_kind_name(faid_msg_kind k)
{
    static const char *const names[] = {"start", "result", "end", "error"};
    return (unsigned)k < FAID_NMSGKINDS ? names[k] : "unknown";
}

/* The engine's times with a histogram, after the queue's row (built once: the tables are
 * constant). */
static const faid_time_decl *timing_rows[FAID_TIMINGS_MAX];
static int ntiming_rows;
static pthread_once_t timing_once = PTHREAD_ONCE_INIT;

static void timing_init(void)
{
    ntiming_rows = 1; /* the queue */
    for (int i = 0; i < faid_times_count() && ntiming_rows < FAID_TIMINGS_MAX; i++)
        if (faid_times_at(i)->histogram)
            timing_rows[ntiming_rows++] = faid_times_at(i);
}

int faid_timing_count(void)
{
    pthread_once(&timing_once, timing_init);
    return ntiming_rows;
}

const faid_time_decl *faid_timing_decl(int t)
{
    return t > 0 && t < faid_timing_count() ? timing_rows[t] : NULL;
}

const char *faid_timing_name(int t)
{
    if (t == FAID_T_QUEUE)
        return "queue";
    const faid_time_decl *r = faid_timing_decl(t);
    return r ? r->name : "unknown";
}

const char *faid_timing_help(int t)
{
    if (t == FAID_T_QUEUE)
        return "waiting in the frame queue (received -> taken by a worker)";
    const faid_time_decl *r = faid_timing_decl(t);
    return r ? r->help : "";
}

const double faid_histo_le[FAID_HISTO_NB] = {1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3,
                                             2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1,  0.2,
                                             0.5,  1.0,  2.0,  5.0,  10.0};

void faid_histo_observe(faid_histo *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    double sec = (double)ns * 1e-9;
    int b = 0;
    while (b < FAID_HISTO_NB && sec > faid_histo_le[b])
        b++;
    faid_stat_add(&h->bucket[b], 1);
    faid_stat_add(&h->sum_ns, (uint64_t)ns);
}

void faid_stats_init(faid_stats *st)
{
    /* Plain zeroing is a valid initial state for these lock-free atomics on every target gcc
     * supports; atomic_init per field would say the same thing at length. */
    memset(st, 0, sizeof(*st));
}

void faid_stats_error(faid_stats *st, faid_where stage, int code)
{
    int idx = -code;
    if (idx < 0 || idx >= FAID_NCODES)
        idx = 0;
    if ((unsigned)stage >= FAID_NWHERE)
        stage = FAID_WHERE_INGEST;
    faid_stat_add(&st->errors[stage][idx], 1);
}

void faid_stats_drop(faid_stats *st, faid_drop_reason r)
{
    if ((unsigned)r < FAID_NDROPS)
        faid_stat_add(&st->drops[r], 1);
    faid_stat_add(&st->dropped, 1);
}

static int lat_bin(int64_t ns)
{
    double us = (double)ns / 1000.0;
    if (us <= 1.0)
        return 0;
    int b = (int)(log2(us) * FAID_LAT_PER_OCTAVE) + 1;
    return b >= FAID_LAT_BINS ? FAID_LAT_BINS - 1 : b;
}

void faid_stats_latency(faid_stats *st, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    faid_stat_add(&st->lat_hist[lat_bin(ns)], 1);
    faid_stat_add(&st->lat_count, 1);
    uint64_t cur = faid_stat_get(&st->lat_max_ns);
    while ((uint64_t)ns > cur &&
           !atomic_compare_exchange_weak_explicit(&st->lat_max_ns, &cur, (uint64_t)ns,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

double faid_stats_latency_quantile(faid_stats *st, double q)
{
    uint64_t counts[FAID_LAT_BINS], total = 0;
    for (int b = 0; b < FAID_LAT_BINS; b++) {
        counts[b] = faid_stat_get(&st->lat_hist[b]);
        total += counts[b];
    }
    if (total == 0)
        return 0.0;
    uint64_t want = (uint64_t)ceil(q * (double)total);
    if (want == 0)
        want = 1;
    uint64_t acc = 0;
    for (int b = 0; b < FAID_LAT_BINS; b++) {
        acc += counts[b];
        if (acc >= want)
            return b == 0 ? 1.0 : exp2((double)b / FAID_LAT_PER_OCTAVE);
    }
    return exp2((double)FAID_LAT_BINS / FAID_LAT_PER_OCTAVE);
}

void faid_stats_reset(faid_stats *st)
{
    for (int b = 0; b < FAID_LAT_BINS; b++)
        atomic_store_explicit(&st->lat_hist[b], 0, memory_order_relaxed);
    atomic_store_explicit(&st->lat_max_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&st->lat_count, 0, memory_order_relaxed);
    faid_stats_set_fps(st, 0.0);
}

void faid_stats_set_fps(faid_stats *st, double fps)
{
    uint64_t bits;
    memcpy(&bits, &fps, sizeof(bits));
    atomic_store_explicit(&st->fps_bits, bits, memory_order_relaxed);
}

double faid_stats_fps(faid_stats *st)
{
    uint64_t bits = faid_stat_get(&st->fps_bits);
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}
