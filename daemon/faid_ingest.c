/* faid_ingest: the ingest threads, one per input socket (each entry of input.endpoint, up to
 * FAID_MAX_ENDPOINTS). Each receives input messages from its PULL socket into frame slots (the
 * ZeroMQ parts themselves become the frame: no copy), decodes them through the input format
 * (input.protocol; faid_input.h: native, DECTRIS stream v1, v2, Jungfraujoch), validates images
 * against the current reduction setup, hands series starts, ends and accepted frames to the one
 * series tracker (faid_series.h, shared by the threads under a mutex, ingest_shared below), and
 * hands frames to the frame queue under the configured backpressure policy. Optionally every raw
 * message is re-sent on the forward PUSH socket (input.forward_endpoint) so that a file writer
 * shares the stream.
 *
 * Every image message that carries a readable header is a frame and produces exactly one item
 * for the publisher: a result (via a worker), an error or a drop, or it is dropped here as stale
 * (counted). That invariant is what lets the publisher emit a series' `end` only after all of
 * its frames are accounted for.
 *
 * Per-frame problems are logged with rate limiting: a stream of garbage must not flood the log. */
#include "faid_ingest.h"
#include "faid_thread.h"

#include "faid_gen.h"
#include "faid_handoff.h"
#include "faid_pool.h"

#include "faid_fan_proto.h"
#include "faid_input.h"
#include "faid_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 100

/* What the ingest threads share, under mu: the series tracker (faid_series.h has one owner at a
 * time: whichever thread holds mu), the open series' setup build and the start mask buffers.
 * Every call that drives the tracker and hands its events to the publisher holds mu from the
 * tracker call to the last event queued, so a start precedes every frame accepted after it
 * whichever thread accepts that frame. Receiving, decoding, validation, the block-table parse
 * and the push into the frame queue run outside it, in parallel on every thread. */
typedef struct ingest_shared {
    pthread_mutex_t mu;
    faid_series *series; /* the series tracker */
    /* a start message's pixel mask: decoded values and the mask made of them (grown per size) */
    uint32_t *mask_raw;
    uint8_t *mask;
    size_t mask_cap;
    /* the open series' setup: being built off ingest (NULL once in force or reused), and
     * what its start decided (faid_setup_choice), echoed in faid's start */
    faid_gen_job *build;
    faid_setup_choice choice;
    pthread_mutex_t fw_mu; /* the forward socket (input.forward_endpoint), shared by the threads */
} ingest_shared;

/* One ingest thread: one input socket (an entry of input.endpoint), which is source `source` of
 * the series tracker. */
typedef struct ingest {
    const faid_handoff *s; /* the server as ingest sees it (the set's copy) */
    ingest_shared *sh;
    int source; /* index of the endpoint in input.endpoint */
    void *pull; /* its PULL socket */
    pthread_t thread;
    int started;
    faid_queue_policy policy;
    faid_input_protocol protocol; /* input.protocol */
    faid_input_msg msg;           /* the message being handled (large: kept off the stack) */
    int discard; /* stopping and past input.stop_timeout: frames are counted, not processed */
    /* input.protocol fan: the link to the fan-out (faid_fan_proto.h) on the DEALER `pull` */
    int fan;
    int fan_welcomed;       /* the last hello was welcomed */
    int64_t fan_hello_ns;   /* when the last hello went out (0: none yet) */
    int64_t fan_credit_ns;  /* when the last credit went out */
    uint64_t fan_done;      /* done in the last credit */
    int64_t fan_beat_ns;    /* the fan-out's last message of any kind (its beats: every 100 ms) */
    faid_fan_msg fan_route; /* the route of the message being handled */
    faid_fan_msg fan_out;   /* the link message being sent (large: off the stack) */
    uint8_t fan_buf[FAID_FAN_LINK_MAX];
    char fan_name[FAID_FAN_NAME_MAX];
} ingest;

/* The ingest threads and their shared state (faid_ingest_start / faid_ingest_join). */
struct faid_ingest_set {
    faid_handoff h; /* the server as ingest sees it (faid_handoff.h) */
    ingest_shared sh;
    int n;
    ingest *in[FAID_MAX_ENDPOINTS];
};

static void lock(ingest *in)
{
    pthread_mutex_lock(&in->sh->mu);
}
static void unlock(ingest *in)
{
    pthread_mutex_unlock(&in->sh->mu);
}

static faid_ratelimit rl_bad, rl_drop, rl_stale;
/* Series lines: a start message is a peer's to send as often as it likes (issue 20, defect 10:
 * 100,000 starts wrote 300,005 lines in 6 s). A few per second, what a beamtime sends, all come
 * through; a flood is counted per line. */
static faid_ratelimit rl_user_data, rl_implicit, rl_opened, rl_closed, rl_setup, rl_setup_fail,
    rl_geometry, rl_no_geometry, rl_mask;

/* Waits for a free slot. The publisher always drains (its only blocking send is bounded during
 * shutdown), so this returns eventually. */
static faid_slot *get_slot(ingest *in)
{
    for (;;) {
        faid_slot *slot = faid_slot_get(in->s->srv, POLL_MS);
        if (slot)
            return slot;
    }
}

static void to_publisher(ingest *in, void *item)
{
    /* Capacity equals the number of slots plus event records: never waits. */
    faid_queue_push(in->s->results, item, -1);
}

static void set_status_series(ingest *in)
{
    const faid_handoff *s = in->s;
    uint64_t id = 0;
    const char *uid = "";
    int open = faid_series_current(in->sh->series, &id, &uid, NULL);
    uint32_t shard, shards;
    faid_series_shard(in->sh->series, &shard, &shards);
    atomic_store(s->series_id, id);
    pthread_mutex_lock(s->info_mu);
    snprintf(s->series_uid, s->series_uid_size, "%s", uid);
    *s->series_shard = shard;
    *s->series_shards = shards;
    pthread_mutex_unlock(s->info_mu);
    if (atomic_load(s->state) != FAID_STATE_STOPPING)
        atomic_store(s->state, open ? FAID_STATE_RUNNING : FAID_STATE_IDLE);
}

/* What a start message said, for faid's start (the arrays stay behind: they point into the
 * message, which is released once handled). */
static void copy_start_info(const faid_handoff *s, faid_event *e, const faid_input_msg *m)
{
    e->has_input = 1;
    snprintf(e->protocol, sizeof(e->protocol), "%s",
             m->format ? faid_input_protocol_name(m->format->protocol) : "");
    e->meta = m->meta;
    faid_input_array *arrays[] = {&e->meta.pixel_mask, &e->meta.flatfield,
                                  &e->meta.countrate_table};
    for (size_t k = 0; k < sizeof(arrays) / sizeof(arrays[0]); k++) {
        arrays[k]->data = NULL;
        arrays[k]->len = 0;
    }
    /* user_data of the start message as one msgpack value (DECTRIS CBOR / appendix converted).
     * The record's buffer is sized by what the message carries: none without user_data, its
     * length for a native header's, max_user_data only where a conversion's size is not known
     * before it runs. Reserving max_user_data for every start made each of the FAID_EVENTS
     * records hold 64 KiB once it had carried a start: allocated memory in use grew by 1.9 MB
     * over the first 13 minutes of a soak (one series every 25 s) before it levelled off, the
     * heap profile's third largest consumer (issue 10, defect 14; tests/soak/README.md). */
    size_t need = m->h.user_data             ? m->h.user_data_len
                  : m->appendix && m->format ? s->max_user_data
                                             : 0;
    if (need == 0)
        return;
    if (need > s->max_user_data) /* refused below as before: larger than max_user_data */
        need = s->max_user_data;
    if (e->user_data_cap < need) {
        uint8_t *b = realloc(e->user_data, need);
        if (!b)
            return;
        e->user_data = b;
        e->user_data_cap = need;
    }
    faid_mpw w;
    faid_mpw_init(&w, e->user_data, e->user_data_cap);
    int written = 0;
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_input_user_data(m, &w, &written, &d) == 0 && written && faid_mpw_finish(&w, NULL) == 0)
        e->user_data_len = w.len;
    else if (written)
        faid_log_ratelimited(&rl_user_data, FAID_LOG_WARN, "ingest",
                             "start message user_data not passed on: %s",
                             d.msg[0] ? d.msg : "larger than 64 KiB");
}

/* Hands the tracker's events to the publisher, in order. A start carries the setup in force now
 * and, when it came from a start message (start), what that message said. */
static void emit(ingest *in, const faid_series_out *out, const faid_input_msg *start)
{
    const faid_handoff *s = in->s;
    for (int i = 0; i < out->n; i++) {
        const faid_series_event *sev = &out->ev[i];
        faid_event *e;
        /* The publisher returns records as it goes: this wait ends. */
        while (!(e = faid_event_get(s->srv, POLL_MS))) {
        }
        e->ev = *sev;
        if (sev->kind == FAID_SERIES_EV_START) {
            atomic_store(s->series_frames, 0);
            e->gen = faid_server_current_gen(s->srv);
            e->build = faid_gen_job_acquire(in->sh->build);
            e->setup = in->sh->choice;
            faid_stat_add(&s->stats->series, 1);
            if (start && sev->reason == FAID_SERIES_SERIES)
                copy_start_info(s, e, start);
            if (sev->reason == FAID_SERIES_IMPLICIT)
                faid_log_ratelimited(
                    &rl_implicit, FAID_LOG_WARN, "ingest",
                    "series %llu opened by its first frame (no start message: faid "
                    "started after the arm or the start was lost): using the "
                    "configuration",
                    (unsigned long long)sev->series_id);
            else
                faid_log_ratelimited(&rl_opened, FAID_LOG_INFO, "ingest",
                                     "series %llu opened (%s start message)",
                                     (unsigned long long)sev->series_id, e->protocol);
        } else {
            faid_log_ratelimited(&rl_closed, FAID_LOG_INFO, "ingest",
                                 "series %llu closed (%s): %llu frames, %llu stale messages",
                                 (unsigned long long)sev->series_id,
                                 faid_series_reason_name(sev->reason),
                                 (unsigned long long)sev->frames, (unsigned long long)sev->stale);
        }
        to_publisher(in, e);
    }
    if (out->n)
        set_status_series(in);
}

/* A message of a series already closed (an aborted series still in flight): dropped, counted;
 * an image also counts as a dropped frame so that received = processed + failed + dropped. */
static void drop_stale(ingest *in, faid_slot *slot, int image)
{
    const faid_handoff *s = in->s;
    faid_stat_add(&s->stats->stale, 1);
    if (image)
        faid_stats_drop(s->stats, FAID_DROP_SERIES_STALE);
    faid_log_ratelimited(&rl_stale, FAID_LOG_WARN, "ingest",
                         "stale %s of series %llu (already closed): dropped",
                         faid_in_type_name(slot->h.type), (unsigned long long)slot->h.series_id);
    faid_slot_put(s->srv, slot);
}

/* Turns slot into an error event and sends it on. The message in d names the problem. frame: an
 * image whose header was readable (a frame: counted as failed; in the ledger of series seq when
 * seq != 0); otherwise a message without a usable header (bad_input). */
static void reject(ingest *in, faid_slot *slot, const faid_diag *d, int frame, uint64_t seq)
{
    const faid_handoff *s = in->s;
    int code = d->code ? d->code : FAID_EFORMAT;
    slot->kind = FAID_SLOT_ERROR;
    slot->err_code = code;
    slot->err_stage = faid_where_name(FAID_WHERE_INGEST);
    snprintf(slot->err_msg, sizeof(slot->err_msg), "%s", d->msg);
    slot->has_frame_id = slot->h.has_frame_id;
    slot->frame_id = slot->h.frame_id;
    slot->counted = seq != 0;
    slot->series_seq = seq;
    /* The error names the series the message named (0 when unreadable). */
    slot->series_id = slot->h.series_id;
    faid_stats_error(s->stats, FAID_WHERE_INGEST, code);
    if (frame)
        faid_stat_add(&s->stats->failed, 1);
    else
        faid_stat_add(&s->stats->bad_input, 1);
    if (slot->has_frame_id)
        faid_log_ratelimited(&rl_bad, FAID_LOG_WARN, "ingest", "frame %llu: %s: %s",
                             (unsigned long long)slot->frame_id, faid_errname(code), d->msg);
    else
        faid_log_ratelimited(&rl_bad, FAID_LOG_WARN, "ingest", "bad message: %s: %s",
                             faid_errname(code), d->msg);
    faid_slot_clear_frame(slot);
    to_publisher(in, slot);
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v = (v << 8) | p[k];
    return v;
}

/* Cheap checks before a frame occupies a device: sizes against the setup. The full decode is
 * validated by the engine (the worker answers corrupt payloads). */
static int validate_image(const faid_handoff *s, faid_slot *slot, faid_diag *d)
{
    const faid_in_header *h = &slot->h;
    const faid_setup *su = slot->gen->setup;
    size_t len = slot->payload_len;
    if (su->cfg.max_frame_bytes > 0 && (int64_t)len > su->cfg.max_frame_bytes)
        return faid_fail(d, FAID_ESIZE, "payload of %zu bytes exceeds max_frame_bytes %lld", len,
                         (long long)su->cfg.max_frame_bytes);
    if (h->rows != su->rows || h->cols != su->cols)
        return faid_fail(d, FAID_ESHAPE, "shape [%d, %d] does not match the setup's [%d, %d]",
                         h->rows, h->cols, su->rows, su->cols);
    uint64_t expect = (uint64_t)h->rows * (uint64_t)h->cols * faid_dtype_size(h->dtype);
    const uint8_t *p = slot->payload;
    switch (h->encoding) {
    case FAID_ENC_NONE:
        if (len != expect)
            return faid_fail(d, FAID_ESIZE, "raw payload of %zu bytes, expected %llu (%dx%d %s)",
                             len, (unsigned long long)expect, h->rows, h->cols,
                             faid_dtype_name(h->dtype));
        break;
    case FAID_ENC_BSLZ4:
    case FAID_ENC_LZ4:
        if (len < 12)
            return faid_fail(d, FAID_ETRUNC,
                             "%s payload of %zu bytes is shorter than its "
                             "12-byte header",
                             faid_encoding_name(h->encoding), len);
        if (be64(p) != expect)
            return faid_fail(d, FAID_ESIZE, "%s header says %llu decoded bytes, expected %llu",
                             faid_encoding_name(h->encoding), (unsigned long long)be64(p),
                             (unsigned long long)expect);
        break;
    case FAID_ENC_LZ4_RAW:
        if (len == 0)
            return faid_fail(d, FAID_ETRUNC, "empty lz4-raw payload");
        break;
    }
    if (h->user_data_len > s->max_user_data)
        return faid_fail(d, FAID_ESIZE, "user_data of %zu bytes is too large", h->user_data_len);
    return 0;
}

/* The user data of a frame as the result carries it: the native format's msgpack value is used
 * where it was received; a DECTRIS v2 CBOR item or v1 appendix is converted into the slot's own
 * buffer (allocated once per slot, at most max_user_data). */
static int user_data_for_result(ingest *in, faid_slot *slot, faid_diag *d)
{
    const faid_input_msg *m = &in->msg;
    if (!m->appendix || slot->h.user_data)
        return 0;
    if (!slot->ud) {
        slot->ud = malloc(in->s->max_user_data);
        if (!slot->ud)
            return faid_fail(d, FAID_ENOMEM, "out of memory for user_data");
    }
    faid_mpw w;
    faid_mpw_init(&w, slot->ud, in->s->max_user_data);
    int written = 0;
    int rc = faid_input_user_data(m, &w, &written, d);
    if (rc)
        return rc;
    if (faid_mpw_finish(&w, NULL))
        return faid_fail(d, FAID_ESIZE, "user_data larger than %zu bytes once converted",
                         in->s->max_user_data);
    if (written) {
        slot->h.user_data = slot->ud;
        slot->h.user_data_len = w.len;
    }
    return 0;
}

/* Parses the block table of a valid bslz4 / lz4 frame into the slot now, while the payload
 * just received is hot in this thread's cache: the worker's submit then skips a serial walk
 * through ~2,200 block prefixes (100-300 us on a cold EIGER 4M frame) and its one thread only
 * copies. The table depends only on the payload, the dtype and the decoded size, which
 * validate_image has matched with the setup of slot->gen, the one the worker will use. A table
 * that does not parse is not answered here: the slot goes on without one and the engine parses
 * and judges the frame exactly as it would have (bslz4: the worker's error; lz4: the CPU
 * decoder's verdict), so errors keep their message, code and stage. */
static void parse_table(faid_slot *slot)
{
    const faid_in_header *h = &slot->h;
    slot->has_table = 0;
    if (h->encoding != FAID_ENC_BSLZ4 && h->encoding != FAID_ENC_LZ4)
        return;
    int64_t t0 = faid_now_ns();
    faid_diag d;
    faid_diag_clear(&d);
    /* Grows only after a reload to a larger frame; without memory the engine parses. */
    if (faid_slot_reserve_table(slot, faid_slot_table_blocks(slot->gen->setup), &d))
        return;
    size_t esz = faid_dtype_size(h->dtype);
    uint64_t expect = (uint64_t)h->rows * (uint64_t)h->cols * esz;
    const uint8_t *p = slot->payload;
    size_t len = slot->payload_len;
    int rc = h->encoding == FAID_ENC_BSLZ4 ? faid_bslz4_table(p, len, esz, expect, &slot->table, &d)
                                           : faid_lz4h5_table(p, len, expect, &slot->table, &d);
    slot->has_table = rc == 0;
    slot->table_us = (double)(faid_now_ns() - t0) / 1e3;
}

/* Whether a further message is ready on this thread's input socket (ZMQ_EVENTS). */
static int input_waiting(ingest *in)
{
    int ev = 0;
    size_t sz = sizeof ev;
    return zmq_getsockopt(in->pull, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN);
}

/* Copies the payload of a valid frame into the pinned input arena (input.pinned_bytes), so the
 * engine's H2D reads it in place and the worker does no copy: the copy runs here, on one of the
 * ingest threads, and the block-table parse that follows walks the copy while it is in this
 * core's cache. With input.pinned_copy auto only while frames wait in the frame queue: measured
 * with faid-bench --host-path (EIGER 4M, 2.69 MB bslz4, the 2-core development machine), the copy
 * is 240-300 us and the parse 40-50 us, so one ingest thread doing both for every frame is
 * busier than the worker was (its copy alone): the copy goes where the time is to spare. lz4-raw
 * frames are decoded on the CPU by the worker: nothing to gain. A frame that does not fit now keeps
 * its ZeroMQ message (the worker copies it): counted, never waited for. The copy's time is part of
 * the frame's table_us. */
static void to_pinned(ingest *in, faid_slot *slot)
{
    const faid_handoff *s = in->s;
    if (!s->pinned || slot->payload_len == 0)
        return;
    /* input.pinned_receive: libzmq's I/O thread received the frame into the arena already */
    if (faid_pinned_contains(s->pinned, slot->payload)) {
        faid_stat_add(s->pin_received, 1);
        return;
    }
    if (slot->h.encoding == FAID_ENC_LZ4_RAW)
        return;
    /* input.pinned_copy auto: with no frame waiting the workers keep up, and this thread may be
     * the one that limits (one connection): the worker copies. */
    if (s->cfg->input_pinned_copy != 1 && faid_queue_len(s->frames) == 0)
        return;
    /* input.pinned_copy idle: frames wait, but so does the next message of this socket: this
     * thread is the one that limits, the worker copies. With peak finding the queue is rarely
     * empty (the device stage is the slower one), so auto had ingest copy every frame: its copy
     * and table were 439 us per frame on the H100 host (issue 17), the one connection's
     * limit. */
    if (s->cfg->input_pinned_copy == 2 && input_waiting(in))
        return;
    uint8_t *b = faid_pinned_alloc(s->pinned, slot->payload_len);
    if (!b) {
        faid_stat_add(s->pin_fallback, 1);
        return;
    }
    memcpy(b, slot->payload, slot->payload_len);
    slot->pin = b;
    slot->pin_arena = s->pinned;
    slot->payload = b;
    faid_stat_add(s->pin_frames, 1);
}

/* Hands a valid frame to the workers under the backpressure policy. */
static void enqueue(ingest *in, faid_slot *slot)
{
    const faid_handoff *s = in->s;
    if (in->policy == FAID_QUEUE_BLOCK) {
        /* Not reading the socket while we wait is the point: ZeroMQ's high-water mark then
         * pushes back to the sender. */
        while (faid_queue_push(s->frames, slot, POLL_MS) == FAID_ETIMEOUT)
            atomic_store_explicit(&s->alive_ns[in->source], faid_now_ns(), memory_order_relaxed);
        return;
    }
    faid_slot *victim = NULL;
    if (in->policy == FAID_QUEUE_DROP_NEWEST) {
        if (faid_queue_push(s->frames, slot, 0) == 0)
            return;
        victim = slot;
        faid_stats_drop(s->stats, FAID_DROP_QUEUE_NEWEST);
    } else {
        void *ev = NULL;
        faid_queue_push_evict(s->frames, slot, &ev);
        if (!ev)
            return;
        victim = ev;
        faid_stats_drop(s->stats, FAID_DROP_QUEUE_OLDEST);
    }
    faid_log_ratelimited(&rl_drop, FAID_LOG_WARN, "ingest", "queue full: dropped frame %llu (%s)",
                         (unsigned long long)victim->h.frame_id,
                         faid_queue_policy_names[in->policy]);
    faid_slot_clear_frame(victim);
    victim->kind = FAID_SLOT_DROP;
    to_publisher(in, victim);
}

/* The setup a frame accepted now is reduced with: the generation in force, and the build of
 * its series' setup while that is under way (the worker then waits for it; validation against
 * the generation in force holds, as a build never changes the shape). Under mu, right after
 * the tracker accepted the frame, so that a frame of a series gets that series' setup whichever
 * thread opened it. */
static void frame_setup(ingest *in, faid_slot *slot)
{
    if (in->sh->build && faid_gen_job_done(in->sh->build))
        faid_gen_job_finish(&in->sh->build);
    faid_gen_release(&slot->gen);
    faid_gen_job_release(&slot->build);
    slot->gen = faid_server_current_gen(in->s->srv);
    slot->build = faid_gen_job_acquire(in->sh->build);
}

/* The setup of a series that opens: reused when its key (configuration version, detector mask
 * bytes, shape, geometry source) matches the one in force, the common case of a beamtime whose
 * every start brings the same mask; otherwise built off this thread, which goes on reading the
 * series' frames meanwhile (a build of an EIGER 4M mask takes 1.1 s on the 2-core PoCL machine,
 * longer than a detector control unit buffers). A build still under way from the previous start
 * is waited for first: builds follow one another. */
static void series_setup(ingest *in, const uint8_t *mask, uint64_t hash, const faid_geometry *geo,
                         uint64_t series_id, int64_t t0)
{
    faid_gen_job_finish(&in->sh->build);
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_server_series_setup(in->s->srv, mask, hash, geo, &in->sh->build, &in->sh->choice,
                                 &d)) {
        faid_log_ratelimited(&rl_setup_fail, FAID_LOG_ERROR, "ingest",
                             "series %llu: setup of its start not built: %s; the setup in force "
                             "stays",
                             (unsigned long long)series_id, d.msg);
        in->sh->choice = FAID_SETUP_FAILED;
        return;
    }
    faid_stat_add(in->sh->choice == FAID_SETUP_REUSED ? &in->s->stats->setups_reused
                                                      : &in->s->stats->setups_rebuilt,
                  1);
    faid_log_ratelimited(
        &rl_setup, FAID_LOG_INFO, "ingest", "series %llu: setup %s (%s; ingest held %.1f ms)",
        (unsigned long long)series_id, faid_setup_choice_name(in->sh->choice),
        in->sh->choice == FAID_SETUP_REUSED ? "same configuration, detector mask and geometry"
                                            : "building off the ingest thread",
        (double)(faid_now_ns() - t0) / 1e6);
}

/* An image: validated against the setup first, and only a valid one reaches the series
 * tracker (issue 10, defect 6: a malformed image naming series 6 inside series 5 must not split
 * series 5). A rejected image counts as a failed frame of the open series when it names that
 * series, otherwise of no series (its error names the series it claimed). format_err: the input
 * format's verdict on an image whose header was read (a part or the payload at fault), or NULL. */
static void handle_image(ingest *in, faid_slot *slot, const faid_diag *format_err)
{
    const faid_handoff *s = in->s;
    faid_in_header *h = &slot->h;
    slot->has_frame_id = 1;
    slot->frame_id = h->frame_id;
    faid_diag d;
    faid_diag_clear(&d);
    if (format_err || validate_image(s, slot, &d) || user_data_for_result(in, slot, &d)) {
        uint64_t seq = 0;
        lock(in);
        faid_series_count_rejected(in->sh->series, in->source, h->series_id, h->series_unique_id,
                                   faid_now_ns(), &seq);
        unlock(in);
        if (seq)
            faid_stat_add(s->series_frames, 1);
        reject(in, slot, format_err ? format_err : &d, 1, seq);
        return;
    }
    faid_series_out out;
    uint64_t seq = 0;
    lock(in);
    if (faid_series_frame(in->sh->series, in->source, h->series_id, h->series_unique_id,
                          faid_now_ns(), &seq, &out) == FAID_SERIES_STALE) {
        unlock(in);
        drop_stale(in, slot, 1);
        return;
    }
    if (out.n && out.ev[out.n - 1].kind == FAID_SERIES_EV_START)
        /* No start message: the configuration alone, without a detector mask an earlier series'
         * start brought (the same shape, so the validation above holds). */
        series_setup(in, NULL, 0, NULL, h->series_id, faid_now_ns());
    frame_setup(in, slot);
    emit(in, &out, NULL);
    faid_stat_add(s->series_frames, 1);
    slot->counted = 1;
    slot->series_seq = seq;
    slot->series_id = h->series_id;
    const char *uid = "";
    faid_series_current(in->sh->series, NULL, &uid, NULL);
    snprintf(slot->series_uid, sizeof(slot->series_uid), "%s", uid);
    faid_series_shard(in->sh->series, &slot->shard, &slot->shards);
    unlock(in);
    if (in->discard) {
        /* Read after the stop timeout: accounted for (the series' end counts it), not processed. */
        faid_stats_drop(s->stats, FAID_DROP_INPUT_SHUTDOWN);
        faid_slot_clear_frame(slot);
        slot->kind = FAID_SLOT_DROP;
        to_publisher(in, slot);
        return;
    }
    atomic_fetch_or(s->dtypes_seen, 1u << (unsigned)h->dtype);
    int64_t t0 = faid_now_ns();
    to_pinned(in, slot);
    parse_table(slot);
    slot->table_us = (double)(faid_now_ns() - t0) / 1e3;
    slot->kind = FAID_SLOT_FRAME;
    enqueue(in, slot);
}

/* Re-sends the raw message on the forward socket (input.forward_endpoint) without ever waiting:
 * a file writer that is behind or absent loses messages there (counted), faid does not. */
static void forward(ingest *in, faid_slot *slot, int nkept, int nparts)
{
    const faid_handoff *s = in->s;
    if (!s->forward)
        return;
    if (nkept < nparts) {
        /* Parts beyond what any format has were not kept: the message cannot be re-sent whole. */
        faid_stat_add(&s->stats->forward_dropped, 1);
        return;
    }
    /* ZeroMQ sockets are not thread-safe: the ingest threads take turns on the one socket. */
    pthread_mutex_lock(&in->sh->fw_mu);
    int ok = 1;
    for (int k = 0; k < nkept && ok; k++) {
        zmq_msg_t copy;
        zmq_msg_init(&copy);
        /* A reference-counted copy for large parts: no byte is copied. */
        zmq_msg_copy(&copy, &slot->part[k]);
        int flags = ZMQ_DONTWAIT | (k + 1 < nkept ? ZMQ_SNDMORE : 0);
        if (zmq_msg_send(&copy, s->forward, flags) < 0) {
            zmq_msg_close(&copy);
            /* Only the first part can be refused: once it is queued, the rest of the message is
             * accepted with it (ZeroMQ's atomic multipart delivery). */
            ok = 0;
        }
    }
    pthread_mutex_unlock(&in->sh->fw_mu);
    faid_stat_add(ok ? &s->stats->forwarded : &s->stats->forward_dropped, 1);
}

/* ---- input.protocol fan: the instance's side of the fan-out link ---------------------------- */

static faid_ratelimit rl_fan;

/* Frames this instance has accounted for (results, errors, drops): what its credit's `done`
 * reports, so the fan-out knows which of the frames it handed over are safe. */
static uint64_t fan_done(const faid_handoff *s)
{
    return faid_stat_get(&s->stats->processed) + faid_stat_get(&s->stats->failed) +
           faid_stat_get(&s->stats->dropped);
}

/* Frames the fan-out may hand over beyond those accounted for: the frame queue and as many
 * again in the socket and the workers, so the queue stays fed while a credit travels. */
static uint64_t fan_window(const faid_handoff *s)
{
    return 2 * (uint64_t)s->cfg->queue_depth;
}

static void fan_send(ingest *in, faid_fan_type type)
{
    const faid_handoff *s = in->s;
    faid_fan_msg *m = &in->fan_out;
    memset(m, 0, sizeof(*m));
    m->type = type;
    m->window = fan_window(s);
    m->done = fan_done(s);
    /* the configuration hash in force: a reload may have changed it (the fan-out checks it
     * against the other instances' again) */
    faid_gen *g = faid_server_current_gen(s->srv);
    snprintf(m->config_hash, sizeof(m->config_hash), "%s", g ? g->setup->config_hash : "");
    faid_gen_release(&g);
    if (type == FAID_FAN_HELLO) {
        snprintf(m->instance, sizeof(m->instance), "%s", in->fan_name);
    } else {
        /* the frames published since the last credit, by id */
        m->has_accounted = 1;
        m->naccounted = faid_fan_acct_take(s->fan_acct, m->accounted, FAID_FAN_ACCOUNTED_MAX);
    }
    size_t len = 0;
    if (faid_fan_encode(m, in->fan_buf, sizeof(in->fan_buf), &len, NULL))
        return;
    /* Never waits: a fan-out that is not there yet gets the next one. The ranges of a credit
     * the socket did not take are not named again: those frames stay outstanding at the
     * fan-out and are reported lost if this instance dies (a merged subscriber that has their
     * results counts them lost_delivered), never the other way round. */
    if (zmq_send(in->pull, in->fan_buf, len, ZMQ_DONTWAIT) < 0)
        return;
    int64_t now = faid_now_ns();
    if (type == FAID_FAN_HELLO)
        in->fan_hello_ns = now;
    in->fan_credit_ns = now;
    in->fan_done = m->done;
}

/* The fan-out silent for fan.instance_timeout (no beat, no route: it beats every 100 ms): taken
 * for gone. The open series ends (reason timeout: its end is published once every frame held
 * is accounted for), so that a merged view of the instances ends too, with the frames the
 * fan-out held listed missing; status fan_link says silent, and hello goes out again each
 * second (a fan-out that comes back is joined anew). */
static void fan_silent(ingest *in, int64_t now)
{
    const faid_handoff *s = in->s;
    in->fan_welcomed = 0;
    in->fan_hello_ns = now;
    atomic_store(s->fan_link, FAID_FAN_LINK_SILENT);
    faid_log_ratelimited(&rl_fan, FAID_LOG_WARN, "ingest",
                         "fan-out silent for %.1f s (fan.instance_timeout %.1f s): taken for "
                         "gone; the open series ends (timeout), hello again each second",
                         (double)(now - in->fan_beat_ns) / 1e9, s->cfg->fan_instance_timeout);
    faid_series_out out;
    lock(in);
    if (faid_series_current(in->sh->series, NULL, NULL, NULL)) {
        faid_series_close(in->sh->series, FAID_SERIES_TIMEOUT, &out);
        emit(in, &out, NULL);
        set_status_series(in);
    }
    unlock(in);
}

/* Hello until welcomed (again each second: a fan-out that starts later, or refused this
 * instance, hears it again); then credit whenever done grew or frames are to be named, and every
 * 100 ms as heartbeat (each credit carries the config_hash in force: a reload is told within
 * 100 ms). */
static void fan_tick(ingest *in)
{
    if (!in->fan)
        return;
    int64_t now = faid_now_ns();
    if (!in->fan_welcomed) {
        if (!in->fan_hello_ns || now - in->fan_hello_ns > 1000000000ll)
            fan_send(in, FAID_FAN_HELLO);
        return;
    }
    if (now - in->fan_beat_ns > (int64_t)(in->s->cfg->fan_instance_timeout * 1e9)) {
        fan_silent(in, now);
        return;
    }
    pthread_mutex_lock(&in->s->fan_acct->mu);
    size_t pending = in->s->fan_acct->n;
    pthread_mutex_unlock(&in->s->fan_acct->mu);
    /* at most 16 credits a turn (4,096 ranges): the rest goes with the next turn */
    for (int k = 0; k < 16 && (pending || k == 0); k++) {
        if (!pending && fan_done(in->s) == in->fan_done && now - in->fan_credit_ns <= 100000000ll)
            break;
        fan_send(in, FAID_FAN_CREDIT);
        pending = pending > FAID_FAN_ACCOUNTED_MAX ? pending - FAID_FAN_ACCOUNTED_MAX : 0;
    }
}

/* A link message of the fan-out that is not a route (welcome, refused, rejoin). */
static void fan_control(ingest *in, const faid_fan_msg *m)
{
    switch (m->type) {
    case FAID_FAN_BEAT:
        break; /* the fan-out is alive (receive() noted the time) */
    case FAID_FAN_WELCOME:
        in->fan_welcomed = 1;
        in->fan_beat_ns = faid_now_ns();
        atomic_store(in->s->fan_link, FAID_FAN_LINK_LIVE);
        FAID_INFO("ingest", "fan-out welcomed instance %s%s", in->fan_name,
                  m->flagged ? " (flagged: its config_hash differs from the others')" : "");
        fan_send(in, FAID_FAN_CREDIT);
        break;
    case FAID_FAN_REFUSED:
        in->fan_welcomed = 0;
        /* hello again in a second (not at once: a refused instance must not flood) */
        in->fan_hello_ns = faid_now_ns();
        atomic_store(in->s->fan_link, FAID_FAN_LINK_REFUSED);
        faid_log_ratelimited(&rl_fan, FAID_LOG_ERROR, "ingest",
                             "fan-out refused instance %s: %s (hello again in 1 s)", in->fan_name,
                             m->error);
        break;
    case FAID_FAN_REJOIN:
        in->fan_welcomed = 0;
        atomic_store(in->s->fan_link, FAID_FAN_LINK_JOINING);
        faid_log_ratelimited(&rl_fan, FAID_LOG_WARN, "ingest",
                             "fan-out had counted instance %s out (silent too long): hello again",
                             in->fan_name);
        fan_send(in, FAID_FAN_HELLO);
        break;
    default:
        faid_log_ratelimited(&rl_fan, FAID_LOG_WARN, "ingest", "fan-out sent a %s message: ignored",
                             faid_fan_type_name(m->type));
        break;
    }
}

/* The instance's name on the link: instance.name as the daemon resolved it (by default the
 * host name and the control endpoint's port), the name its start, results and end carry, so the
 * fan-out's lost reports and status name an instance as its own messages do. */
static void fan_name(ingest *in)
{
    snprintf(in->fan_name, sizeof(in->fan_name), "%s",
             in->s->instance_name ? in->s->instance_name : "");
}

/* Receives every part of one message into the slot: up to FAID_INPUT_MAX_PARTS are kept (no
 * format has more), further ones are received and released, so the next message always starts
 * at its first part whatever a sender does (formats.md: never read leftover parts as the next
 * message). *nparts counts them all. */
static int receive(ingest *in, faid_slot *slot, int *nparts, size_t *bytes)
{
    if (in->fan) {
        /* The fan-out's route frame first; a link message alone is handled here and the
         * caller polls again. */
        zmq_msg_t route;
        zmq_msg_init(&route);
        if (zmq_msg_recv(&route, in->pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&route);
            return -1;
        }
        faid_diag d;
        faid_diag_clear(&d);
        int more = zmq_msg_more(&route);
        in->fan_beat_ns = faid_now_ns(); /* any message of the fan-out: it is alive */
        int rc = faid_fan_decode(zmq_msg_data(&route), zmq_msg_size(&route), &in->fan_route, &d);
        zmq_msg_close(&route);
        if (rc == 0 && in->fan_route.type != FAID_FAN_ROUTE)
            fan_control(in, &in->fan_route);
        else if (rc || !more)
            faid_log_ratelimited(&rl_fan, FAID_LOG_WARN, "ingest", "fan-out link: %s",
                                 rc ? d.msg : "a route without a detector message");
        if (rc || in->fan_route.type != FAID_FAN_ROUTE || !more) {
            while (more) { /* the rest of a message that is not a route */
                zmq_msg_t scratch;
                zmq_msg_init(&scratch);
                if (zmq_msg_recv(&scratch, in->pull, 0) < 0) {
                    zmq_msg_close(&scratch);
                    break;
                }
                more = zmq_msg_more(&scratch);
                zmq_msg_close(&scratch);
            }
            /* not a detector message: the caller reads on */
            return 1;
        }
        faid_input_protocol p = FAID_PROTOCOL_AUTO;
        if (faid_input_protocol_parse(in->fan_route.protocol, &p) != 0 || p == FAID_PROTOCOL_FAN)
            p = FAID_PROTOCOL_AUTO;
        in->protocol = p;
        /* the detector message follows in the same multipart message: never waits */
        zmq_msg_init(&slot->part[0]);
        if (zmq_msg_recv(&slot->part[0], in->pull, 0) < 0) {
            zmq_msg_close(&slot->part[0]);
            return -1;
        }
    } else {
        zmq_msg_init(&slot->part[0]);
        if (zmq_msg_recv(&slot->part[0], in->pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&slot->part[0]);
            return -1;
        }
    }
    slot->nkept = 1;

    *nparts = 1;
    *bytes = zmq_msg_size(&slot->part[0]);
    int more = zmq_msg_more(&slot->part[0]);
    while (more) {
        zmq_msg_t scratch;
        zmq_msg_t *m = slot->nkept < FAID_INPUT_MAX_PARTS ? &slot->part[slot->nkept] : &scratch;
        zmq_msg_init(m);
        /* The parts of a multipart message arrive together: this never waits. */
        if (zmq_msg_recv(m, in->pull, 0) < 0) {
            zmq_msg_close(m);
            break;
        }
        more = zmq_msg_more(m);
        *bytes += zmq_msg_size(m);
        if (m == &scratch)
            zmq_msg_close(m);
        else
            slot->nkept++;
        (*nparts)++;
    }
    return 0;
}

/* The detector pixel mask a start message brings (merge rule: OR-ed with the configured mask):
 * decoded into in->mask (non-zero = bad), *hash its FNV-1a (never 0). Returns 0 with *mask NULL
 * when the message has none; an error (logged by the caller) when it cannot be used. */
static int start_mask(ingest *in, const faid_input_meta *meta, const uint8_t **mask, uint64_t *hash,
                      faid_diag *d)
{
    *mask = NULL;
    *hash = 0;
    const faid_input_array *a = &meta->pixel_mask;
    if (!a->present)
        return 0;
    faid_gen *g = faid_server_current_gen(in->s->srv);
    int rows = g->setup->rows, cols = g->setup->cols;
    faid_gen_release(&g);
    if (a->ndim != 2 || a->shape[0] != (uint64_t)rows || a->shape[1] != (uint64_t)cols)
        return faid_fail(
            d, FAID_ESHAPE, "pixel mask of shape [%llu, %llu] does not match the setup's [%d, %d]",
            (unsigned long long)a->shape[0], (unsigned long long)a->shape[1], rows, cols);
    size_t npix = (size_t)rows * (size_t)cols;
    size_t esz = faid_dtype_size(a->dtype);
    if (esz == 0 || esz > 4)
        return faid_fail(d, FAID_EDTYPE, "pixel mask of type %s", faid_dtype_name(a->dtype));
    if (in->sh->mask_cap < npix) {
        free(in->sh->mask_raw);
        free(in->sh->mask);
        in->sh->mask_cap = 0;
        in->sh->mask_raw = malloc(npix * sizeof(uint32_t));
        in->sh->mask = malloc(npix);
        if (!in->sh->mask_raw || !in->sh->mask)
            return faid_fail(d, FAID_ENOMEM, "out of memory for a %zu-pixel mask", npix);
        in->sh->mask_cap = npix;
    }
    int rc = faid_input_array_decode(a, in->sh->mask_raw, npix * esz, d);
    if (rc)
        return rc;
    const uint8_t *raw = (const uint8_t *)in->sh->mask_raw;
    for (size_t i = 0; i < npix; i++) {
        uint32_t v = 0;
        for (size_t b = 0; b < esz; b++)
            v |= raw[i * esz + b];
        in->sh->mask[i] = v != 0;
    }
    *mask = in->sh->mask;
    *hash = faid_fnv1a(14695981039346656037ull, in->sh->mask, npix) | 1;
    return 0;
}

/* One value of a start message against the option table's range of the configuration key it
 * becomes (faid_config.c): 1 when inside; else a line naming the message's key, its value, what
 * it became and the range, and 0. */
static int start_value_ok(uint64_t series_id, const char *wire_key, double wire, const char *key,
                          double value)
{
    const faid_option *o = faid_config_find(key);
    if (!o || faid_config_in_range(o, value))
        return 1;
    char range[64];
    faid_config_range_text(o, range, sizeof range);
    faid_log_ratelimited(&rl_geometry, FAID_LOG_WARN, "ingest",
                         "series %llu: start message %s %g gives %s %g %s, outside %s: the "
                         "configuration's geometry is used",
                         (unsigned long long)series_id, wire_key, wire, key, value, o->unit, range);
    return 0;
}

/* input.geometry_source start: the geometry a start message states (beam centre in pixels,
 * distance, wavelength or energy, pixel size; no rotations), as pyFAI's PONI. 0 when the option
 * is off or the message lacks a value (then the configuration's, said in the log), and when a
 * value is outside the range the option table gives its configuration key (counted in
 * start_geometry_refused): finite but absurd values (a wavelength of 1e-310 m, a distance of
 * 1e300 m) built a setup whose every radial bin was NaN (issue 20, defect 7); NaN and infinity
 * are outside every range. */
static int start_geometry(ingest *in, const faid_input_msg *msg, faid_geometry *g,
                          uint64_t series_id)
{
    if (!in->s->cfg->input_geometry_source)
        return 0;
    const faid_input_meta *m = &msg->meta;
    /* the keys as the message spelled them, for the log: stream v1's config names or v2's */
    int v1 = msg->format == &faid_input_dectris_v1;
    int has_dist = (m->have & FAID_META_DISTANCE) || (m->have & FAID_META_TRANSLATION);
    int has_wl = (m->have & FAID_META_WAVELENGTH) || (m->have & FAID_META_ENERGY);
    if (!(m->have & FAID_META_BEAM_CENTER) || !(m->have & FAID_META_PIXEL_SIZE) || !has_dist ||
        !has_wl) {
        faid_log_ratelimited(&rl_no_geometry, FAID_LOG_WARN, "ingest",
                             "series %llu: the start message lacks beam centre, distance, "
                             "wavelength or pixel size: the configuration's geometry is used",
                             (unsigned long long)series_id);
        return 0;
    }
    memset(g, 0, sizeof(*g));
    g->pixel1 = m->pixel_size_y;
    g->pixel2 = m->pixel_size_x;
    g->poni1 = m->beam_center_y * m->pixel_size_y;
    g->poni2 = m->beam_center_x * m->pixel_size_x;
    int by_distance = (m->have & FAID_META_DISTANCE) != 0;
    g->dist = by_distance ? m->detector_distance : m->detector_translation[2];
    /* h c = 12398.4198 eV angstrom */
    int by_wavelength = (m->have & FAID_META_WAVELENGTH) != 0;
    double wl_a = by_wavelength ? m->incident_wavelength : 12398.419843320026 / m->incident_energy;
    g->wavelength = wl_a * 1e-10;
    /* pixel sizes first: the beam centre's check means something only with them in range */
    int ok =
        start_value_ok(series_id, v1 ? "y_pixel_size" : "pixel_size_y", m->pixel_size_y,
                       "detector.pixel_size", g->pixel1) &&
        start_value_ok(series_id, v1 ? "x_pixel_size" : "pixel_size_x", m->pixel_size_x,
                       "detector.pixel_size", g->pixel2) &&
        start_value_ok(series_id, "beam_center_y", m->beam_center_y, "geometry.poni1", g->poni1) &&
        start_value_ok(series_id, "beam_center_x", m->beam_center_x, "geometry.poni2", g->poni2) &&
        start_value_ok(series_id, by_distance ? "detector_distance" : "detector_translation[2]",
                       g->dist, "geometry.dist", g->dist) &&
        start_value_ok(series_id,
                       by_wavelength ? (v1 ? "wavelength" : "incident_wavelength")
                                     : (v1 ? "photon_energy" : "incident_energy"),
                       by_wavelength ? m->incident_wavelength : m->incident_energy,
                       "geometry.wavelength", g->wavelength);
    if (!ok)
        faid_stat_add(&in->s->stats->start_geometry_refused, 1);
    return ok;
}

/* A start message: the tracker opens (or joins) the series; a new series gets the detector's
 * pixel mask of its start message (or none) in its setup before its start event, which carries
 * that setup and what the message said (echoed in faid's start) and its user data. */
static void handle_start(ingest *in, faid_slot *slot)
{
    const faid_input_msg *m = &in->msg;
    faid_series_out out;
    int64_t nimages = slot->h.nimages;
    if (m->meta.have & FAID_META_NIMAGES)
        nimages = m->meta.nimages;
    lock(in);
    faid_series_start(in->sh->series, in->source, slot->h.series_id, slot->h.series_unique_id,
                      nimages, faid_now_ns(), &out);
    if (out.n && out.ev[out.n - 1].kind == FAID_SERIES_EV_START) {
        /* ingest's time on the start: mask decode, hash, key, and a build only started */
        int64_t t0 = faid_now_ns();
        const uint8_t *mask = NULL;
        uint64_t hash = 0;
        faid_diag d;
        faid_diag_clear(&d);
        faid_geometry geo;
        int use_geo = start_geometry(in, m, &geo, slot->h.series_id);
        if (start_mask(in, &m->meta, &mask, &hash, &d)) {
            faid_stat_add(&in->s->stats->detector_masks_refused, 1);
            faid_log_ratelimited(&rl_mask, FAID_LOG_ERROR, "ingest",
                                 "series %llu: detector pixel mask not applied: %s",
                                 (unsigned long long)slot->h.series_id, d.msg);
            mask = NULL;
            hash = 0;
            faid_diag_clear(&d);
        }
        series_setup(in, mask, hash, use_geo ? &geo : NULL, slot->h.series_id, t0);
    }
    emit(in, &out, m);
    unlock(in);
    faid_slot_put(in->s->srv, slot);
}

static void handle_message(ingest *in, faid_slot *slot, int nparts, size_t bytes)
{
    const faid_handoff *s = in->s;
    faid_diag d;
    faid_diag_clear(&d);
    slot->recv_mono_ns = faid_now_ns();
    slot->recv_wall_ns = faid_wall_ns();
    faid_stat_add(&s->stats->received_bytes, bytes);
    faid_input_part parts[FAID_INPUT_MAX_PARTS];
    for (int k = 0; k < slot->nkept; k++) {
        parts[k].data = zmq_msg_data(&slot->part[k]);
        parts[k].len = zmq_msg_size(&slot->part[k]);
    }
    faid_input_opts opts = {.channel = s->cfg->input_channel};
    int rc = faid_input_decode(in->protocol, parts, nparts, &opts, &in->msg, &d);
    slot->h = in->msg.h;
    if (rc && !(in->msg.header_ok && slot->h.type == FAID_IN_IMAGE)) {
        /* An image whose header names its frame still counts as a frame; anything else that
         * does not decode is bad input outside any series. */
        reject(in, slot, &d, 0, 0);
        return;
    }
    faid_series_out out;
    switch (slot->h.type) {
    case FAID_IN_IMAGE:
        faid_stat_add(&s->stats->received, 1);
        /* validation against the generation in force (a build never changes what it checks);
         * the setup the frame is reduced with is decided once the tracker accepted it */
        faid_gen_release(&slot->gen);
        faid_gen_job_release(&slot->build);
        slot->gen = faid_server_current_gen(s->srv);
        slot->payload = in->msg.payload;
        slot->payload_len = in->msg.payload_len;
        handle_image(in, slot, rc ? &d : NULL);
        return;
    case FAID_IN_START:
        if (in->fan && in->fan_route.shards) {
            /* the fan-out's place of this instance in the series, stamped into its start */
            lock(in);
            faid_series_set_shard(in->sh->series, in->fan_route.shard, in->fan_route.shards);
            unlock(in);
        }
        handle_start(in, slot);
        return;
    case FAID_IN_END:
        lock(in);
        switch (faid_series_end(in->sh->series, in->source, slot->h.series_id,
                                slot->h.series_unique_id, faid_now_ns(), &out)) {
        case FAID_SERIES_STALE:
            unlock(in);
            drop_stale(in, slot, 0);
            return;
        case FAID_SERIES_UNKNOWN: {
            uint64_t cur = 0;
            int open = faid_series_current(in->sh->series, &cur, NULL, NULL);
            unlock(in);
            if (open)
                faid_fail(&d, FAID_EPROTO, "end of series %llu while series %llu is open",
                          (unsigned long long)slot->h.series_id, (unsigned long long)cur);
            else
                faid_fail(&d, FAID_EPROTO, "end of series %llu but no series is open",
                          (unsigned long long)slot->h.series_id);
            reject(in, slot, &d, 0, 0);
            return;
        }
        default:
            break;
        }
        emit(in, &out, NULL);
        unlock(in);
        faid_slot_put(s->srv, slot);
        return;
    case FAID_IN_OTHER:
        /* A message type the format defines but faid has no use for (Jungfraujoch calibration,
         * metadata): counted, not an error. */
        faid_stat_add(&s->stats->ignored, 1);
        faid_slot_put(s->srv, slot);
        return;
    default:
        faid_fail(&d, FAID_EFORMAT, "unknown message type");
        reject(in, slot, &d, 0, 0);
        return;
    }
}

/* The stop: messages the input socket already holds (ZeroMQ's queue, the kernel's buffers, a
 * sender blocked by the high-water mark) are not thrown away unseen. They are processed as usual
 * until input.stop_timeout after the stop; after it they are still read and counted (frames as
 * dropped, input.shutdown, in their series' end) but not processed, for at most DISCARD_MAX_NS
 * more, which bounds the stop against a sender that never pauses. The input counts as drained
 * once faid found nothing to read for IDLE_NS: the clock runs only while it looks, not while it
 * hands a frame to a full queue (a 100 ms worker at depth 2 made the drain stop after one
 * message, 47 of 60 frames sent before the stop never read: the idle clock had counted faid's
 * own wait for a slot). */
#define IDLE_NS        (50ll * 1000000ll)
#define DISCARD_MAX_NS (1000ll * 1000000ll)

static void drain(ingest *in)
{
    const faid_handoff *s = in->s;
    int64_t stop = *s->stop_since_ns ? *s->stop_since_ns : faid_now_ns();
    int64_t deadline = stop + s->stop_grace_ns;
    int64_t idle_since = 0; /* when faid last found the input empty; 0 after a message */
    uint64_t discarded0 = faid_stat_get(&s->stats->drops[FAID_DROP_INPUT_SHUTDOWN]);
    uint64_t handled = 0;
    for (;;) {
        int64_t now = faid_now_ns();
        if ((idle_since && now - idle_since > IDLE_NS) || now > deadline + DISCARD_MAX_NS)
            break;
        in->discard = now > deadline;
        faid_slot *slot = get_slot(in);
        int nparts = 0;
        size_t bytes = 0;
        int r = receive(in, slot, &nparts, &bytes);
        fan_tick(in);
        if (r > 0) {
            faid_slot_put(s->srv, slot);
            continue;
        }
        if (r != 0) {
            faid_slot_put(s->srv, slot);
            if (!idle_since)
                idle_since = faid_now_ns();
            zmq_pollitem_t item = {.socket = in->pull, .events = ZMQ_POLLIN};
            zmq_poll(&item, 1, 10);
            continue;
        }
        idle_since = 0;
        handled++;
        forward(in, slot, slot->nkept, nparts);
        handle_message(in, slot, nparts, bytes);
    }
    if (in->fan && in->fan_welcomed)
        fan_send(in, FAID_FAN_BYE); /* the fan-out sends nothing more */
    uint64_t discarded = faid_stat_get(&s->stats->drops[FAID_DROP_INPUT_SHUTDOWN]) - discarded0;
    if (discarded)
        FAID_WARN("ingest",
                  "stop: %llu frame(s) read after input.stop_timeout (%.1f s) were not processed "
                  "(counted as dropped, input.shutdown)",
                  (unsigned long long)discarded, (double)s->stop_grace_ns / 1e9);
    FAID_INFO("ingest", "stop: %llu message(s) read from the input after the stop",
              (unsigned long long)handled);
}

static void *ingest_main(void *arg)
{
    ingest *in = arg;
    const faid_handoff *s = in->s;
    zmq_pollitem_t item = {.socket = in->pull, .events = ZMQ_POLLIN};
    faid_series_out out;
    while (!atomic_load(s->stop_ingest)) {
        atomic_store_explicit(&s->alive_ns[in->source], faid_now_ns(), memory_order_relaxed);
        lock(in);
        faid_series_tick(in->sh->series, faid_now_ns(), &out);
        emit(in, &out, NULL);
        unlock(in);
        fan_tick(in);
        /* fan: a short poll, so that credit follows the results closely (the fan-out sends
         * no more than the window beyond what was accounted for) */
        int n = zmq_poll(&item, 1, in->fan ? 5 : POLL_MS);
        if (n < 0 && zmq_errno() != EINTR) {
            /* Never spin on a failing poll (e.g. out of descriptors): wait as a timeout would. */
            faid_log_ratelimited(&rl_bad, FAID_LOG_WARN, "ingest", "zmq_poll: %s",
                                 zmq_strerror(zmq_errno()));
            nanosleep(&(struct timespec){0, POLL_MS * 1000000L}, NULL);
            continue;
        }
        if (n <= 0 || !(item.revents & ZMQ_POLLIN))
            continue;
        /* Drain what is ready before polling again, but look at the stop flag per message so a
         * stop is prompt even under a flood. */
        while (!atomic_load(s->stop_ingest)) {
            atomic_store_explicit(&s->alive_ns[in->source], faid_now_ns(), memory_order_relaxed);
            faid_slot *slot = get_slot(in);
            int nparts = 0;
            size_t bytes = 0;
            int r = receive(in, slot, &nparts, &bytes);
            if (r != 0) {
                faid_slot_put(s->srv, slot);
                if (r > 0) /* a fan-out link message: read on */
                    continue;
                break;
            }
            fan_tick(in);
            forward(in, slot, slot->nkept, nparts);
            handle_message(in, slot, nparts, bytes);
        }
    }
    drain(in);
    FAID_INFO("ingest", "stopped reading input %d", in->source);
    return NULL;
}

int faid_ingest_start(const faid_handoff *h, faid_ingest_set **out, faid_diag *d)
{
    faid_ingest_set *set = calloc(1, sizeof(*set));
    if (!set)
        return faid_fail(d, FAID_ENOMEM, "out of memory for ingest");
    pthread_mutex_init(&set->sh.mu, NULL);
    pthread_mutex_init(&set->sh.fw_mu, NULL);
    set->h = *h;
    const faid_handoff *s = &set->h;
    *out = set;
    set->sh.series = faid_series_new((int64_t)(s->cfg->series_timeout * 1e9));
    if (!set->sh.series)
        return faid_fail(d, FAID_ENOMEM, "out of memory for the series tracker");
    faid_series_set_default_shard(set->sh.series, (uint32_t)s->cfg->instance_shard,
                                  (uint32_t)s->cfg->instance_shards);
    faid_input_protocol proto;
    /* Checked at start (faid_server_new): a value that cannot be honoured never gets here. */
    if (faid_input_protocol_parse(s->cfg->input_protocol, &proto) != 0)
        proto = FAID_PROTOCOL_AUTO;
    for (int i = 0; i < s->npull; i++) {
        ingest *in = calloc(1, sizeof(*in));
        if (!in)
            return faid_fail(d, FAID_ENOMEM, "out of memory for ingest thread %d", i);
        set->in[set->n++] = in;
        in->s = s;
        in->sh = &set->sh;
        in->source = i;
        in->pull = s->pull[i];
        in->policy = s->policy;
        in->protocol = proto;
        in->fan = s->fan;
        if (in->fan)
            atomic_store(s->fan_link, FAID_FAN_LINK_JOINING);
        if (in->fan)
            fan_name(in);
        atomic_store(&s->alive_ns[i], faid_now_ns());
        if (pthread_create(&in->thread, NULL, ingest_main, in))
            return faid_fail(d, FAID_ENOMEM, "cannot start ingest thread %d", i);
        faid_thread_name(in->thread, "faid-ingest%d", i);
        in->started = 1;
    }
    return 0;
}

int faid_ingest_running(const faid_ingest_set *set)
{
    for (int i = 0; set && i < set->n; i++)
        if (set->in[i]->started)
            return 1;
    return 0;
}

void faid_ingest_join(faid_ingest_set **setp)
{
    faid_ingest_set *set = *setp;
    if (!set)
        return;
    for (int i = 0; i < set->n; i++)
        if (set->in[i]->started) {
            pthread_join(set->in[i]->thread, NULL);
            set->in[i]->started = 0;
        }
    /* Every thread has stopped: the open series ends now, after the last frame of every
     * input. */
    if (set->sh.series && set->n) {
        faid_series_out out;
        faid_series_close(set->sh.series, FAID_SERIES_SHUTDOWN, &out);
        emit(set->in[0], &out, NULL);
    }
    faid_series_destroy(&set->sh.series);
    faid_gen_job_finish(&set->sh.build);
    free(set->sh.mask_raw);
    free(set->sh.mask);
    for (int i = 0; i < set->n; i++)
        free(set->in[i]);
    pthread_mutex_destroy(&set->sh.mu);
    pthread_mutex_destroy(&set->sh.fw_mu);
    free(set);
    *setp = NULL;
    FAID_INFO("ingest", "stopped reading input");
}
