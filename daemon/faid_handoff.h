/* faid_handoff: what the ingest threads use of the server, and nothing more: the hand-off to the
 * workers (frame queue) and to the publisher (result queue), the pools and generations (through
 * faid_pool.h and faid_gen.h, which take the server as an opaque pointer), the counters, the
 * pinned arena, the stop flags and the series shown in status.
 *
 * The lifecycle (faid_server.c) fills one from its shared state (faid_state.h) and hands it to
 * faid_ingest_start; ingest keeps a copy. The pointers point into the server, which outlives
 * ingest; the plain values are fixed for the life of the process. So ingest reads none of the
 * server's other state (sockets of the publisher, workers, writer, HTTP, control). */
#ifndef FAID_HANDOFF_H
#define FAID_HANDOFF_H

#include "faid_config.h"
#include "faid_limits.h"
#include "faid_pinned.h"
#include "faid_queue.h"
#include "faid_stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct faid_server faid_server;

/* input.protocol fan: the frame ids this instance accounted for (result, error or drop
 * published) and has not yet named to the fan-out, as [series_id, first, last] ranges. The
 * publisher notes each frame as it publishes it; the ingest thread takes them into its next
 * credit (faid_fan_proto.h: the fan-out's outstanding set is then exact, whatever order several
 * devices finish in). Bounded by the frames the fan-out may send ahead (the instance's window)
 * beyond what a credit already named; its array grows to that and stays. */
typedef struct faid_fan_acct {
    pthread_mutex_t mu;
    uint64_t (*r)[3];
    size_t n, cap;
} faid_fan_acct;

/* Notes frame `frame` of series `series` (publisher). A frame that extends the last range
 * joins it; out of memory loses the note (the frame is then reported lost if the instance dies:
 * never the other way round). */
static inline void faid_fan_acct_note(faid_fan_acct *a, uint64_t series, uint64_t frame)
{
    pthread_mutex_lock(&a->mu);
    uint64_t *last = a->n ? a->r[a->n - 1] : NULL;
    if (last && last[0] == series && last[2] + 1 == frame) {
        last[2] = frame;
    } else if (last && last[0] == series && last[1] == frame + 1) {
        last[1] = frame;
    } else {
        if (a->n == a->cap) {
            size_t cap = a->cap ? 2 * a->cap : 64;
            void *p = realloc(a->r, cap * sizeof(*a->r));
            if (p) {
                a->r = p;
                a->cap = cap;
            }
        }
        if (a->n < a->cap) {
            a->r[a->n][0] = series;
            a->r[a->n][1] = a->r[a->n][2] = frame;
            a->n++;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

/* Takes up to max ranges, oldest first, into out (ingest); returns how many. */
static inline uint32_t faid_fan_acct_take(faid_fan_acct *a, uint64_t (*out)[3], uint32_t max)
{
    pthread_mutex_lock(&a->mu);
    uint32_t n = a->n < max ? (uint32_t)a->n : max;
    if (n) { /* none noted yet: a->r may still be NULL (memcpy's source must not be) */
        memcpy(out, a->r, n * sizeof(*out));
        memmove(a->r, a->r + n, (a->n - n) * sizeof(*a->r));
        a->n -= n;
    }
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* The daemon's run state (status "state"): idle, a series open (set by ingest as series open and
 * close), stopping (set by the lifecycle, never left). */
typedef enum { FAID_STATE_IDLE = 0, FAID_STATE_RUNNING, FAID_STATE_STOPPING } faid_state;

/* input.protocol fan: the link to the fan-out as status shows it (`fan_link`). */
typedef enum {
    FAID_FAN_LINK_OFF = 0, /* not an instance behind a fan-out */
    FAID_FAN_LINK_JOINING, /* hello sent, no answer yet */
    FAID_FAN_LINK_LIVE,    /* welcomed, the fan-out's beats come */
    FAID_FAN_LINK_REFUSED, /* refused (config_hash differs from the other instances') */
    FAID_FAN_LINK_SILENT,  /* no beat for fan.instance_timeout: the fan-out is taken for gone */
} faid_fan_link_state;

typedef struct faid_handoff {
    faid_server *srv; /* opaque: for faid_slot_get / faid_event_get / faid_server_current_gen ... */
    const faid_config *cfg; /* the configuration in force (input.*, series.timeout) */
    faid_stats *stats;
    faid_queue *frames;  /* to the workers (policy below) */
    faid_queue *results; /* to the publisher: series events; never full (faid_pool.h) */
    faid_queue_policy policy;
    void *const *pull; /* the PULL sockets, one per entry of input.endpoint (a DEALER with fan) */
    int npull;
    void *forward;       /* input.forward_endpoint's PUSH, or NULL */
    faid_pinned *pinned; /* input.pinned_bytes' arena, or NULL */
    atomic_uint_fast64_t *pin_frames, *pin_fallback;
    atomic_uint_fast64_t *pin_received; /* frames ingest found in the arena already */
    size_t max_user_data;
    atomic_int *stop_ingest;      /* set by the lifecycle: stop reading input */
    const int64_t *stop_since_ns; /* when the stop began (set before stop_ingest) */
    int64_t stop_grace_ns;        /* input.stop_timeout */
    atomic_int *state;            /* faid_state */
    /* the open (or last) series for status: id, unique id (under info_mu), frames so far */
    atomic_uint_fast64_t *series_id;
    pthread_mutex_t *info_mu;
    char *series_uid;
    size_t series_uid_size;
    uint32_t *series_shard, *series_shards; /* its shard stamp (under info_mu) */
    atomic_uint_fast64_t *series_frames;
    atomic_int_fast64_t *alive_ns; /* a heartbeat per input socket (the watchdog reads them) */
    atomic_uint *dtypes_seen;      /* bit per faid_dtype received, so a reload prepares those */
    int fan; /* input.protocol fan: an instance behind faid-fan (faid_fan_proto.h) */
    faid_fan_acct *fan_acct;   /* with fan: the frames to name in the next credit */
    atomic_int *fan_link;      /* with fan: faid_fan_link_state, for status */
    const char *instance_name; /* instance.name as resolved: the name in the fan-out's hello */
} faid_handoff;

#endif
