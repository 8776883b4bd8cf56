/* faid_pool: the items that travel through the pipeline's queues.
 *
 * A frame slot (faid_slot) carries one received frame from ingest through a worker to the
 * publisher, and comes back as its result, error or drop; a series event (faid_event) carries a
 * series start or end from ingest to the publisher. Both come from fixed pools built at start
 * (faid_server.pool and .event_pool, sized in faid_server_new so that the result queue can
 * always take every item) and go back to them; nothing is allocated per frame. */
#ifndef FAID_POOL_H
#define FAID_POOL_H

#include "faid_gen.h"
#include "faid_input.h"
#include "faid_pinned.h"
#include "faid_series.h"

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

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
    uint32_t shard, shards; /* the series' shard stamp (faid_series_shard) */
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

/* Slot helpers (faid_pool.c). */
faid_slot *faid_slot_get(faid_server *s, int timeout_ms);
/* Event records (faid_pool.c): get waits up to timeout_ms (NULL when none came free). */
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

#endif
