/* faid_state: the daemon's shared state and the interfaces between its threads.
 *
 * DESIGN (docs/ARCHITECTURE.md has the long form).
 *   main thread     control socket (REP), signals (self-pipe), reload: builds the next
 *                   "generation" (reduction setup + one engine per worker) off the hot path
 *   ingest threads  one per input socket (input.endpoint): PULL socket -> validates -> frame
 *                   queue (policy block/drop_oldest/drop_newest); series bookkeeping in one
 *                   tracker they share under a mutex; events (start, end, error, drop) go
 *                   straight to the result queue
 *   worker i        frame queue -> engine of device i -> encodes the result message in the slot
 *                   -> result queue
 *   publisher       result queue -> PUB (non-blocking) and the optional lossless channel
 *                   (ROUTER, acknowledged, bounded buffer: faid_lossless.h); start/end
 *                   bookkeeping, periodic stats
 * Ownership: a frame slot is owned by exactly one place at a time (free pool, ingest, frame queue,
 * a worker, result queue, publisher) and travels by pointer through bounded queues; the pool is
 * sized so that the result queue can always take every slot, hence pushes to it never wait.
 * Shared otherwise: atomic counters (faid_stats) and the current generation pointer (mutex +
 * reference count). Each frame holds a reference to the generation that was current when it was
 * received, so a reload takes effect exactly between two received frames.
 *
 * Every pipeline module but ingest (workers, publisher, control, HTTP, metrics, writer, pools,
 * generations) includes this header; ingest sees the server through its hand-off
 * (faid_handoff.h, filled by faid_server.c); only faid_main.c includes faid_server.h, the lifecycle
 * that builds, starts and stops them, so no module depends back on the lifecycle. */
#ifndef FAID_STATE_H
#define FAID_STATE_H

#include "faid_config.h"
#include "faid_engine.h"
#include "faid_handoff.h"
#include "faid_limits.h"
#include "faid_input.h"
#include "faid_lossless.h"
#include "faid_pinned.h"
#include "faid_proto.h"
#include "faid_proto_out.h"
#include "faid_queue.h"
#include "faid_series.h"
#include "faid_setup.h"
#include "faid_stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <zmq.h>

/* Message-part limits enforced by libzmq at the sockets (ZMQ_MAXMSGSIZE): a larger part drops
 * the peer's connection before anything is allocated for it. Input: input.max_frame_bytes plus
 * room for headers (user_data up to 64 KiB, DECTRIS JSON / CBOR start messages); control
 * requests are a command and at most a path; PUB and PUSH only ever receive subscriptions. */
#define FAID_INPUT_HEADER_ALLOWANCE ((int64_t)1 << 20)
#define FAID_CONTROL_MAX_MSG        ((int64_t)64 << 10)
#define FAID_PEER_MAX_MSG           ((int64_t)4 << 10)
#define FAID_INPUT_MONITOR          "inproc://faid-input-monitor"
/* Longest ZeroMQ handshake of an input connection (a detector's takes milliseconds). */
#define FAID_INPUT_HANDSHAKE_MS 5000

typedef struct faid_server faid_server;
/* The generations (faid_gen.h) and the pools' items (faid_pool.h) are held here by pointer only:
 * those modules read this state, so this header does not include theirs. */
typedef struct faid_gen faid_gen;
typedef struct faid_slot faid_slot;
typedef struct faid_event faid_event;

typedef struct faid_worker {
    faid_server *srv;
    int index;
    char spec[32];  /* device spec handed to faid_engine_new */
    char name[256]; /* device name from the engine */
    pthread_t thread;
    int started;
    atomic_uint_fast64_t processed, failed, busy_ns;
    /* host time per processed frame, summed (status "host_us", "table_us"): the worker's
     * submit (copy into pinned staging, block table when ingest had none: the engine's "host"
     * row, which declares host_us, faid_times_status) and ingest's block-table parse (the
     * daemon's time, before the engine: no engine row) */
    atomic_uint_fast64_t host_ns, table_ns, timed;
    /* the worker's own time, summed (status "submit_us", "wait_us", "encode_us", per timed
     * frame): handing frames to the engine, in the engine's collect (waiting for the device
     * included), and after it (result message, aggregates, statistics). Issue 17: whether the
     * one worker per device or its device is the limit shows here. */
    atomic_uint_fast64_t submit_ns, wait_ns, encode_ns;
    /* partly filled slots launched before the worker waited for older frames (status
     * "early_launches", faid_engine_launch_open) */
    atomic_uint_fast64_t early_launches;
    atomic_uint_fast64_t busy_frac_bits;  /* double: busy fraction over the last interval */
    atomic_int in_flight;                 /* frames submitted to the engine, not collected */
    atomic_int_fast64_t alive_ns;         /* heartbeat: the worker loop's last turn (watchdog) */
    atomic_int_fast64_t collect_alive_ns; /* heartbeat of its collect thread (pipeline.
                                           * collect_thread; 0 = none running) */
} faid_worker;

struct faid_server {
    faid_config cfg;                 /* effective configuration (main thread; guarded by gen_mu) */
    faid_queue_policy policy;        /* fixed for the life of the process */
    char config_path[FAID_PATH_MAX]; /* -c file (SIGHUP re-reads it), "" = embedded; fixed */
    void *zctx;
    /* input.contexts per_connection: the context of input socket i (one I/O thread each), NULL
     * where the input is in zctx */
    void *in_ctx[FAID_MAX_ENDPOINTS];
    int in_nctx;                    /* ZeroMQ contexts the input sockets use (status) */
    void *pull[FAID_MAX_ENDPOINTS]; /* one PULL per entry of input.endpoint (a DEALER with fan) */
    int npull;
    int fan;                /* input.protocol fan: an instance behind faid-fan (faid_fan_proto.h) */
    faid_fan_acct fan_acct; /* with fan: frames published, not yet named in a credit */
    atomic_int fan_link;    /* with fan: faid_fan_link_state (status fan_link) */
    void *pub, *router, *rep; /* router: the lossless channel, NULL when off */
    faid_lossless *ll;        /* the lossless channel's buffer and session */
    void *forward;  /* PUSH re-sending raw input messages (input.forward_endpoint), or NULL */
    void *hits;     /* PUB of hit frames (hits.endpoint), or NULL; used by hitsend */
    void *hits_rep; /* ROUTER answering `next` (hits.request_endpoint), or NULL; by hitsend */
    /* the hit sender (faid_hits_send.h) over those sockets, NULL when both are off */
    struct faid_hitsend *hitsend;
    void *input_mon[FAID_MAX_ENDPOINTS]; /* PAIRs receiving the input sockets' connection events
                                          * (main thread) */
    int64_t input_max_msg;               /* ZMQ_MAXMSGSIZE of the input socket */
    /* input connections (main thread writes, status / stats read) */
    atomic_uint_fast64_t in_accepted, in_closed, in_accept_failed, in_over_cap;
    /* most accepted input connections kept open (faid_main.c, input_event); 0 = no cap */
    int64_t in_conn_cap;
    /* the pinned input arena (input.pinned_bytes), or NULL; frames copied into it by ingest and
     * frames that did not fit (the worker copied them); input.pinned_receive (faid_rxalloc.h:
     * 0 off, 1 on, 2 asked for but unavailable) and the frames received straight into it */
    faid_pinned *pinned;
    atomic_uint_fast64_t pin_frames, pin_fallback, pin_received;
    int rx_state;
    faid_queue *pool, *frames, *results, *event_pool;
    faid_slot *slots;
    size_t nslots;
    faid_event *events; /* FAID_EVENTS records, free ones in event_pool */
    size_t max_user_data;
    int64_t lossless_grace_ns;    /* output.lossless_shutdown_timeout, fixed at start */
    faid_ll_overflow ll_overflow; /* output.lossless_overflow, fixed at start */
    int64_t stop_grace_ns;        /* input.stop_timeout, fixed at start */
    int64_t stop_since_ns;        /* when the stop began (set before stop_ingest) */
    /* identity (instance.*, fixed at start): stamped into start, result, end and status */
    char instance_name[128];

    pthread_mutex_t gen_mu;
    faid_gen *gen;         /* current generation */
    uint64_t next_version; /* under build_mu */
    uint64_t cfg_version;  /* bumped by every reload that takes effect (under gen_mu) */
    /* Serialises building and swapping in a generation: reload (main thread) and a series start
     * that brings another detector mask (ingest) each read the state in force, build, swap. */
    pthread_mutex_t build_mu;
    atomic_uint dtypes_seen; /* bit per faid_dtype, so a reload prepares those kernels */

    int nworkers;
    faid_worker workers[FAID_MAX_WORKERS];
    struct faid_ingest_set *ingest; /* the ingest threads (faid_ingest.h: they see the server
                                     * through a faid_handoff only), NULL when none */
    pthread_t publish_thread;
    int publish_started;

    atomic_int stop_ingest; /* stop reading input */
    atomic_int draining;    /* shutdown in progress (bounds the lossless channel's waits) */
    atomic_int state;       /* faid_state */
    /* Control requests take turns under ctl_mu (the ZeroMQ socket on the main thread, the REST
     * routes on HTTP threads); ctl_closed (under ctl_mu): the main loop has stopped serving, so
     * REST control answers 503 while the server shuts down. */
    pthread_mutex_t ctl_mu;
    int ctl_closed;
    atomic_uint_fast64_t series_id;
    pthread_mutex_t info_mu;
    char series_uid[FAID_SERIES_UID_MAX];
    uint32_t series_shard, series_shards; /* under info_mu: the current or last series' stamp */

    faid_stats stats;
    int64_t start_mono_ns;
    struct faid_writer *writer; /* files of record (faid_writer.h): the publisher feeds it */
    struct faid_aggr *aggr; /* peaks aggregates (faid_aggregates.h): workers add, publisher sends */
    atomic_uint_fast64_t series_frames; /* frames of the open (or last) series so far */
    /* heartbeats of the ingest and publisher loops (monotonic ns): the systemd watchdog is fed
     * only while every pipeline thread turns (faid_notify) */
    atomic_int_fast64_t ingest_alive_ns[FAID_MAX_ENDPOINTS], publish_alive_ns;
    struct faid_http *http; /* the HTTP server, or NULL (off); the publisher offers it results */
    /* security.curve: every socket faid binds is a CURVE server with this key pair (z85, fixed
     * at start) and the ZAP handler admits the clients of security.authorized_keys */
    int curve;
    char curve_secret[41], curve_public[41];
    struct faid_zap *zap; /* NULL without CURVE */
};

/* Threads (faid_worker.c, faid_publish.c); the ingest threads are faid_ingest.h's. */
void *faid_worker_main(void *worker);
void *faid_publish_main(void *server);

/* Control (faid_control.c): handles one request, writes the reply body into w. Sets *stop when
 * the daemon must stop after replying. */
void faid_control_handle(faid_server *s, const void *req, size_t len, faid_mpw *w, int *stop);
/* The daemon-wide counters (status, stats and end) as proto's encoder takes them
 * (faid_proto_write_counters), with the storage of their named maps. */
typedef struct faid_counters_snap {
    faid_out_counters out;
    faid_out_count drops[FAID_NDROPS];
    faid_out_count errors[FAID_NWHERE * FAID_NCODES];
    char error_names[FAID_NWHERE * FAID_NCODES][64];
} faid_counters_snap;
void faid_counters_fill(faid_server *s, faid_counters_snap *c);

/* The status body (status reply, stats message) read from the server's state, for
 * faid_proto_write_status_entries / faid_proto_write_stats. It holds the setup in force (its
 * hash and file) until faid_status_snap_release. */
typedef struct faid_status_snap {
    faid_out_status out;
    faid_counters_snap counters;
    char uid[FAID_SERIES_UID_MAX];
    char consumer[512];
    faid_out_count given_up[FAID_NMSGKINDS];
    faid_out_device devices[FAID_MAX_WORKERS];
    faid_gen *g;
    /* writer (faid_writer.h): the file being written, its directory, errors and drops by kind */
    char wfile[4096], wdir[FAID_PATH_MAX];
    faid_out_count werrors[8], wdropped[8];
} faid_status_snap;
void faid_status_fill(faid_server *s, faid_status_snap *sn);
void faid_status_snap_release(faid_status_snap *sn);
double faid_bits_to_f64(uint64_t bits);
uint64_t faid_f64_to_bits(double v);

#endif
