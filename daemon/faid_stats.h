/* faid_stats: the daemon's counters, written by the pipeline threads with relaxed atomics and
 * read by the control thread (status) and the publisher (stats, end). Frame counters satisfy,
 * once the pipeline is idle: received = processed + failed + dropped (bad_input counts messages
 * whose header could not be read at all, which are not frames of any series). Output losses
 * (lossless messages given up) are messages, not frames: they are counted per message kind in
 * ll_given_up and never touch the frame counters.
 * Errors are counted per stage and code, drops per reason; the latency histogram has
 * logarithmic bins (8 per octave of microseconds), so p50/p99 are exact to about 9 %. */
#ifndef FAID_STATS_H
#define FAID_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/* Where a frame's error happened (the `stage` of an error message, the `ingest.CODE` names of
 * the errors map and /metrics): not an engine stage (engine/faid_stage.h). */
typedef enum {
    FAID_WHERE_INGEST = 0,
    FAID_WHERE_WORKER,
    FAID_WHERE_OUTPUT,
    FAID_NWHERE
} faid_where;

typedef enum {
    FAID_DROP_QUEUE_OLDEST = 0,
    FAID_DROP_QUEUE_NEWEST,
    FAID_DROP_SERIES_STALE,   /* image of a series already closed (aborted series in flight) */
    FAID_DROP_INPUT_SHUTDOWN, /* read from the input after the stop timeout, not processed */
    FAID_NDROPS
} faid_drop_reason;

/* Kinds of the series-stream messages (what the lossless channel carries); output losses are
 * counted per kind, apart from the frame counters. */
typedef enum {
    FAID_MSG_START = 0,
    FAID_MSG_RESULT,
    FAID_MSG_END,
    FAID_MSG_ERROR,
    FAID_NMSGKINDS
} faid_msg_kind;

/* Where a processed frame's time goes (faid_stage_seconds{stage=...} on /metrics): row 0 is the
 * daemon's own, the wait in the frame queue; the rows after it are the engine's times that keep a
 * histogram (faid_times_at in engine/faid_outputs.h: the engine's host and transfer times, the
 * stages' declared times, the engine's total), in that order. The worker observes every row for
 * every result. */
#define FAID_T_QUEUE     0
#define FAID_TIMINGS_MAX 16
int faid_timing_count(void);
const char *faid_timing_name(int t);
const char *faid_timing_help(int t);
/* The engine's row behind timing t (NULL for the queue or out of range). */
const struct faid_time_decl *faid_timing_decl(int t);

/* A cumulative histogram for Prometheus: fixed bucket bounds (faid_histo_le, seconds, 1-2-5 from
 * 10 us to 10 s), never reset (faidctl reset clears only the aggregates of status). The count is
 * the sum of the buckets; the sum is kept in nanoseconds. */
#define FAID_HISTO_NB 19
typedef struct faid_histo {
    atomic_uint_fast64_t bucket[FAID_HISTO_NB + 1]; /* last: above the largest bound */
    atomic_uint_fast64_t sum_ns;
} faid_histo;
extern const double faid_histo_le[FAID_HISTO_NB];
void faid_histo_observe(faid_histo *h, int64_t ns);

#define FAID_NCODES         32
#define FAID_LAT_BINS       256
#define FAID_LAT_PER_OCTAVE 8

typedef struct faid_stats {
    atomic_uint_fast64_t received, received_bytes, processed, failed, dropped;
    atomic_uint_fast64_t published, lossless_sent, bad_input, series;
    atomic_uint_fast64_t stale;   /* messages (images, ends) of series already closed: dropped */
    atomic_uint_fast64_t ignored; /* messages of a type faid has no use for (format OTHER) */
    atomic_uint_fast64_t forwarded, forward_dropped; /* input.forward_endpoint */
    atomic_uint_fast64_t hits_sent, hits_dropped;    /* hits.endpoint */
    /* hits.request_endpoint: `next` requests that took a waiting entry, hits given to a
     * requester, requesters found gone (or not reading) when offered a hit or made room for,
     * waiting requesters answered What? to make room, repeated `next` of an identity already
     * waiting, `resetplots` served; the gauge hits_waiting. requested = delivered + gone +
     * displaced + waiting. */
    atomic_uint_fast64_t hits_requested, hits_delivered, hits_requesters_gone,
        hits_requests_displaced, hits_requests_repeated, hits_resets, hits_waiting;
    /* series starts whose setup was reused (same key) or built off the ingest thread */
    atomic_uint_fast64_t setups_reused, setups_rebuilt;
    /* series starts whose geometry (input.geometry_source start) or detector pixel mask was
     * refused: the configuration's geometry, or no detector mask, used instead */
    atomic_uint_fast64_t start_geometry_refused, detector_masks_refused;
    atomic_uint_fast64_t errors[FAID_NWHERE][FAID_NCODES];
    atomic_uint_fast64_t drops[FAID_NDROPS];
    atomic_uint_fast64_t lat_hist[FAID_LAT_BINS];
    atomic_uint_fast64_t lat_max_ns, lat_count;
    atomic_uint_fast64_t fps_bits; /* double, results per second over the last interval */
    /* lossless channel (faid_lossless): lossless_sent counts first sends; gauges: held
     * messages and bytes, active session (0/1) */
    atomic_uint_fast64_t ll_held, ll_held_bytes, ll_active;
    atomic_uint_fast64_t ll_resent, ll_acked, ll_refused, ll_sessions;
    /* what the channel bounds (PROTOCOL.md 3.6): refused requests not answered, liveness probes
     * sent, messages a repeated hello did not queue again, pumps that left consumer input for the
     * next pass, messages of a consumer's earlier connection applied for it */
    atomic_uint_fast64_t ll_refused_unanswered, ll_pings, ll_not_resent, ll_input_deferred,
        ll_old_conn;
    atomic_uint_fast64_t ll_given_up[FAID_NMSGKINDS];
    /* peaks.algorithm not none: frames searched for peaks, hits among them, peaks found
     * (cumulative, never reset: the `aggregates` topic has the resettable view) */
    atomic_uint_fast64_t peak_frames, hits, peaks_found;
    faid_histo latency; /* received -> result published, cumulative (Prometheus) */
    faid_histo timing[FAID_TIMINGS_MAX];
} faid_stats;

const char *faid_where_name(faid_where s);
const char *faid_drop_name(faid_drop_reason r);
const char *faid_msg_kind_name(faid_msg_kind k); /* == the topic */

void faid_stats_init(faid_stats *st);
static inline void faid_stat_add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}
static inline uint64_t faid_stat_get(atomic_uint_fast64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}
void faid_stats_error(faid_stats *st, faid_where stage, int code);
void faid_stats_drop(faid_stats *st, faid_drop_reason r);
void faid_stats_latency(faid_stats *st, int64_t ns);
/* Latency quantile q in [0, 1] in microseconds (upper edge of the bin), 0 without samples. */
double faid_stats_latency_quantile(faid_stats *st, double q);
/* Clears the aggregates (histogram, maximum, rate); counters stay cumulative. */
void faid_stats_reset(faid_stats *st);
void faid_stats_set_fps(faid_stats *st, double fps);
double faid_stats_fps(faid_stats *st);

#endif
