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

typedef struct faid_server faid_server;

/* The daemon's run state (status "state"): idle, a series open (set by ingest as series open and
 * close), stopping (set by the lifecycle, never left). */
typedef enum { FAID_STATE_IDLE = 0, FAID_STATE_RUNNING, FAID_STATE_STOPPING } faid_state;

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
    const char *instance_name; /* instance.name as resolved: the name in the fan-out's hello */
} faid_handoff;

#endif
