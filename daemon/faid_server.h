/* faid_server: the daemon's shared state and the interfaces between its threads.
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
 * received, so a reload takes effect exactly between two received frames. */
#ifndef FAID_SERVER_H
#define FAID_SERVER_H

#include "faid_config.h"
#include "faid_engine.h"
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

#define FAID_MAX_WORKERS 16

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

typedef struct faid_gen_job faid_gen_job;

/* One reduction setup and what was built from it: immutable once published. */
typedef struct faid_gen {
    atomic_int refs;
    uint64_t version;
    faid_setup *setup;
    int nworkers;
    faid_engine *engines[FAID_MAX_WORKERS]; /* engine i is only ever used by worker i */
    faid_result *results[FAID_MAX_WORKERS];
    char *config_yaml; /* effective configuration as YAML */
    /* Pixel mask of the detector's start message OR-ed into the configured one (npix bytes,
     * owned), or NULL; its hash (0 = none) tells ingest whether a series needs a new setup. */
    uint8_t *detector_mask;
    uint64_t detector_mask_hash;
    uint64_t detector_masked; /* pixels it masks */
    /* input.geometry_source start: the start message's geometry replaced the configuration's */
    int start_geometry;
    faid_geometry geometry; /* the one in force (start or configuration) */
    uint64_t cfg_version;   /* the configuration it was built from (faid_server.cfg_version) */
    size_t result_bytes;    /* upper bound of one encoded result body, its user_data aside */
    size_t start_bytes;     /* upper bound of one encoded start body */
} faid_gen;

void faid_gen_acquire(faid_gen *g);
void faid_gen_release(faid_gen **g);

typedef enum {
    FAID_SLOT_FREE = 0,
    FAID_SLOT_FRAME,  /* received image, on its way to a worker */
    FAID_SLOT_RESULT, /* encoded result body in out */
    FAID_SLOT_ERROR,  /* error to publish (err_*) */
    FAID_SLOT_DROP,   /* frame dropped by the policy: accounted, nothing published */
    FAID_ITEM_EVENT,  /* not a slot: a faid_event (series start or end) */
} faid_slot_kind;

#define FAID_ERRMSG_MAX 1024

typedef struct faid_slot {
    faid_slot_kind kind; /* first member, as in faid_event: the publisher tells them apart */
    zmq_msg_t part[FAID_INPUT_MAX_PARTS]; /* received parts, kept as the frame (no copy) */
    int nkept;                            /* parts held in part[] */
    const uint8_t *payload; /* image: the encoded frame, inside one of the parts or pin */
    void *pin;              /* the frame's copy in the pinned input arena, or NULL */
    faid_pinned *pin_arena; /* the arena pin came from */
    size_t payload_len;
    faid_in_header h; /* decoded header; user_data points into a part or into ud */
    uint8_t *ud;      /* user data converted to msgpack (non-native formats), max_user_data */
    /* Block table of a bslz4 / lz4 payload, parsed by ingest while the bytes are hot in its
     * cache, so the worker's submit skips that serial walk. Arrays allocated with the slot
     * (grown only when a reload brings a larger frame); has_table = 0 when the payload is not
     * of those encodings or its table did not parse: the engine then parses and judges it. */
    faid_block_table table;
    int has_table;
    double table_us; /* ingest time of that parse */
    faid_gen *gen;   /* reference held while the slot carries a frame or a start */
    /* A frame received while its series' setup is being built (faid_gen_job): the worker
     * waits for that build and reduces the frame with its generation; NULL otherwise. */
    faid_gen_job *build;
    int64_t recv_mono_ns, recv_wall_ns;
    /* series accounting: seq identifies a series instance even if series_id repeats */
    uint64_t series_seq;
    uint64_t series_id;
    char series_uid[FAID_SERIES_UID_MAX];
    int counted; /* this item accounts for one frame of series_seq (faid_series_ledger) */
    /* error */
    int err_code;
    const char *err_stage;
    int has_frame_id;
    uint64_t frame_id;
    char err_msg[FAID_ERRMSG_MAX];
    /* result: body encoded by the worker; msgnum_off = offset of a uint64 placeholder */
    uint8_t *out;
    size_t out_cap, out_len, msgnum_off;
    uint64_t setup_version;
    double latency_us;
    int device;
    int is_hit; /* result: peaks found made it a hit (the dashboard keeps the latest hit) */
    /* writer.hits: a hit's payload as it arrived, copied by the worker before the parts go back
     * (the publisher hands it to the writer); grown on demand, kept with the slot */
    uint8_t *hit_chunk;
    size_t hit_chunk_len, hit_chunk_cap;
} faid_slot;

/* A series start or end on its way from ingest to the publisher: a small record from its own
 * pool (series events never take a frame slot). Travels through the result queue, so a start
 * precedes every item of its series that ingest queues after it. */
typedef struct faid_event {
    faid_slot_kind kind; /* FAID_ITEM_EVENT; first member, as in faid_slot */
    faid_series_event ev;
    faid_gen *gen; /* START: the setup in force when the series opened (reference held) */
    /* START: the build of the series' setup still under way (the publisher waits for it and
     * announces its generation), or NULL; setup: what ingest decided (faid_setup_choice) */
    faid_gen_job *build;
    int setup;
    double build_ms; /* the build's duration (0 when reused) */
    /* START: user_data of the start message (a copy: start messages are once per series) */
    uint8_t *user_data;
    size_t user_data_len, user_data_cap;
    /* START from a start message: its format and what it said (arrays not kept) */
    int has_input;
    char protocol[16];
    faid_input_meta meta;
} faid_event;

#define FAID_EVENTS 64 /* event records: series ends and starts the publisher has not taken yet */

typedef struct faid_server faid_server;

#define FAID_HITS_WAITING 64 /* `next` requesters held at once (older ones are answered first) */
/* Requests read from hits.request_endpoint per call of faid_hits_service: the publisher reads
 * that many between two results at most. Reading until the socket was empty let requesters
 * sending flat out hold the publisher: a PUB subscriber got 17 of 100 results in 120 s under
 * 64 DEALERs sending `next` flat out (test_hardening_hits.py; now 100 of 100 in 3 s), 0 of 4,500
 * in the probe of issue 20. */
#define FAID_HITS_READ_BUDGET 64

typedef struct faid_worker {
    faid_server *srv;
    int index;
    char spec[32];  /* device spec handed to faid_engine_new */
    char name[256]; /* device name from the engine */
    pthread_t thread;
    int started;
    atomic_uint_fast64_t processed, failed, busy_ns;
    /* host time per processed frame, summed (status "host_us", "table_us"): the worker's
     * submit (copy into pinned staging, block table when ingest had none) and ingest's
     * block-table parse */
    atomic_uint_fast64_t host_ns, table_ns, timed;
    atomic_uint_fast64_t busy_frac_bits; /* double: busy fraction over the last interval */
    /* hits channel (faid_hits_send.c): the decoded hit frame and its message, grown on demand */
    uint8_t *hit_raw;
    float *hit_img;
    uint8_t *hit_msg;
    size_t hit_raw_cap, hit_img_cap, hit_msg_cap;
    atomic_int in_flight;         /* frames submitted to the engine, not collected */
    atomic_int_fast64_t alive_ns; /* heartbeat: the worker loop's last turn (watchdog) */
} faid_worker;

typedef enum { FAID_STATE_IDLE = 0, FAID_STATE_RUNNING, FAID_STATE_STOPPING } faid_state;

struct faid_server {
    faid_config cfg;                 /* effective configuration (main thread; guarded by gen_mu) */
    faid_queue_policy policy;        /* fixed for the life of the process */
    char config_path[FAID_PATH_MAX]; /* -c file (SIGHUP re-reads it), "" = embedded; fixed */
    void *zctx;
    void *pull[FAID_MAX_ENDPOINTS]; /* one PULL per entry of input.endpoint */
    int npull;
    void *pub, *router, *rep; /* router: the lossless channel, NULL when off */
    faid_lossless *ll;        /* the lossless channel's buffer and session */
    void *forward;  /* PUSH re-sending raw input messages (input.forward_endpoint), or NULL */
    void *hits;     /* PUB of hit frames (hits.endpoint), or NULL; workers send under hits_mu */
    void *hits_rep; /* ROUTER answering `next` (hits.request_endpoint), or NULL; under hits_mu */
    pthread_mutex_t hits_mu;
    struct {
        uint8_t id[256];
        size_t len;
    } hits_waiting[FAID_HITS_WAITING]; /* requesters of `next` not answered yet: a ring, the
                                        * oldest at hits_head, one entry per identity */
    int hits_head, hits_nwaiting;
    void *input_mon[FAID_MAX_ENDPOINTS]; /* PAIRs receiving the input sockets' connection events
                                          * (main thread) */
    int64_t input_max_msg;               /* ZMQ_MAXMSGSIZE of the input socket */
    /* input connections (main thread writes, status / stats read) */
    atomic_uint_fast64_t in_accepted, in_closed, in_accept_failed, in_over_cap;
    /* most accepted input connections kept open (faid_main.c, input_event); 0 = no cap */
    int64_t in_conn_cap;
    /* the pinned input arena (input.pinned_bytes), or NULL; frames copied into it by ingest and
     * frames that did not fit (the worker copied them) */
    faid_pinned *pinned;
    atomic_uint_fast64_t pin_frames, pin_fallback;
    faid_queue *pool, *frames, *results, *event_pool;
    faid_slot *slots;
    size_t nslots;
    faid_event *events; /* FAID_EVENTS records, free ones in event_pool */
    size_t max_user_data;
    int64_t lossless_grace_ns;    /* output.lossless_shutdown_timeout, fixed at start */
    faid_ll_overflow ll_overflow; /* output.lossless_overflow, fixed at start */
    int64_t stop_grace_ns;        /* input.stop_timeout, fixed at start */
    int64_t stop_since_ns;        /* when the stop began (set before stop_ingest) */

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
    struct faid_ingest_set *ingest; /* the ingest threads (faid_ingest.c), NULL when none */
    pthread_t publish_thread;
    int publish_started;

    atomic_int stop_ingest; /* stop reading input */
    atomic_int draining;    /* shutdown in progress (bounds the lossless channel's waits) */
    atomic_int state;       /* faid_state */
    atomic_uint_fast64_t series_id;
    pthread_mutex_t info_mu;
    char series_uid[FAID_SERIES_UID_MAX];

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

/* 1 when a ZeroMQ endpoint is reachable from this host only (ipc, inproc, tcp on 127.x,
 * localhost or [::1]); a socket bound elsewhere without CURVE is logged as a warning. */
int faid_endpoint_is_local(const char *endpoint);

/* Lifecycle (faid_server.c). new: sockets bound, pool and first generation built, no threads. */
faid_server *faid_server_new(const faid_config *cfg, const char *config_path, faid_diag *d);
int faid_server_start(faid_server *s, faid_diag *d);
/* Stops reading, drains every frame in flight through the pipeline, publishes end, joins. */
void faid_server_shutdown(faid_server *s);
void faid_server_destroy(faid_server **s);

/* Builds a generation from cfg for the server's workers (main thread, off the hot path). */
faid_gen *faid_gen_build(faid_server *s, const faid_config *cfg, uint64_t version, faid_diag *d);
/* The same with a detector pixel mask (npix bytes, copied; NULL = none) and its hash. */
faid_gen *faid_gen_build_masked(faid_server *s, const faid_config *cfg, uint64_t version,
                                const uint8_t *detector_mask, uint64_t mask_hash, faid_diag *d);
/* What a series start did to the setup: the key (configuration version, detector mask bytes,
 * shape, geometry source and geometry) matched the setup in force and it was reused, or a new
 * one is built off the ingest thread (and whether that build failed). */
typedef enum { FAID_SETUP_REUSED = 0, FAID_SETUP_REBUILT, FAID_SETUP_FAILED } faid_setup_choice;
const char *faid_setup_choice_name(int choice);

/* Makes a detector pixel mask (npix bytes or NULL = none, hash its FNV-1a or 0) and a start
 * message's geometry (or the configuration's: NULL) the setup of the series that starts (ingest,
 * at a series start). When they equal the setup in force, nothing is built: *build = NULL,
 * *choice REUSED. Otherwise a builder thread builds the generation from the configuration in
 * force with them and swaps it in when ready; *build is the caller's reference to that build
 * (never blocks on the build itself). An error (nothing started, the old setup stays). */
int faid_server_series_setup(faid_server *s, const uint8_t *mask, uint64_t hash,
                             const faid_geometry *start_geometry, faid_gen_job **build,
                             faid_setup_choice *choice, faid_diag *d);
/* A build's references: acquire for each frame or event that must wait for it. */
faid_gen_job *faid_gen_job_acquire(faid_gen_job *b);
void faid_gen_job_release(faid_gen_job **b);
/* 1 once the build finished (its generation, if any, is then current or was replaced). */
int faid_gen_job_done(faid_gen_job *b);
/* Waits for the build, storing the time in *alive every 100 ms (the caller's heartbeat), and
 * returns its generation with a reference for the caller, or NULL when the build failed.
 * *build_ms (may be NULL) receives the build's duration. */
faid_gen *faid_gen_job_wait(faid_gen_job *b, atomic_int_fast64_t *alive, double *build_ms);
/* Ingest's end of a build: waits for it, joins its thread and drops the reference. */
void faid_gen_job_finish(faid_gen_job **b);
/* Returns the current generation with a reference the caller must release. */
faid_gen *faid_server_current_gen(faid_server *s);
/* Makes g current (takes over the caller's reference). */
void faid_server_swap_gen(faid_server *s, faid_gen *g);
/* Re-reads path (or the current file) and swaps in the new setup; on failure the old one stays
 * and d says why. *version receives the new setup version. */
int faid_server_reload(faid_server *s, const char *path, uint64_t *version, faid_diag *d);

/* Slot helpers (faid_server.c). */
faid_slot *faid_slot_get(faid_server *s, int timeout_ms);
/* Event records (faid_server.c): get waits up to timeout_ms (NULL when none came free). */
faid_event *faid_event_get(faid_server *s, int timeout_ms);
void faid_event_put(faid_server *s, faid_event *ev);
/* Releases zmq messages and the generation reference and returns the slot to the pool. */
void faid_slot_put(faid_server *s, faid_slot *slot);
/* Releases the received parts (the payload and a native header's user_data with them). */
void faid_slot_release_parts(faid_slot *slot);
/* Drops the frame data (zmq messages, generation) but keeps the slot for an event. */
void faid_slot_clear_frame(faid_slot *slot);
/* Makes sure slot->out holds at least n bytes (grows only when a bigger setup appears). */
int faid_slot_reserve(faid_slot *slot, size_t n);
/* Block-table capacity for every bslz4 / lz4 frame of setup su the engine takes (default
 * blocks, up to 4-byte pixels: the engine's own table is sized the same way). */
uint32_t faid_slot_table_blocks(const faid_setup *su);
/* Makes sure slot->table holds at least cap blocks (grows only when a bigger setup appears). */
int faid_slot_reserve_table(faid_slot *slot, uint32_t cap, faid_diag *d);

/* Threads. The ingest threads, one per input socket (faid_ingest.c): started with their shared
 * series tracker; join waits for every one of them (after stop_ingest), then closes the open
 * series (shutdown) and queues its end. running: 1 while any was started and not joined. */
typedef struct faid_ingest_set faid_ingest_set;
int faid_ingest_start(faid_server *s, faid_diag *d);
void faid_ingest_join(faid_server *s);
int faid_ingest_running(const faid_server *s);
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
    faid_out_count errors[FAID_NSTAGES * FAID_NCODES];
    char error_names[FAID_NSTAGES * FAID_NCODES][64];
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
