/* faid_ingest: the ingest thread. Receives native input messages from the PULL socket into frame
 * slots (the ZeroMQ messages themselves become the frame: no copy), validates the envelope and
 * header against the current reduction setup, keeps the series state machine, and hands frames
 * to the frame queue under the configured backpressure policy.
 *
 * Every image message that carries a readable header is a frame of a series and produces exactly
 * one item for the publisher: a result (via a worker), an error or a drop. That invariant is what
 * lets the publisher emit a series' `end` only after all of its frames are accounted for.
 *
 * Per-frame problems are logged with rate limiting: a stream of garbage must not flood the log. */
#include "faid_server.h"

#include "faid_input.h"
#include "faid_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define POLL_MS 100

typedef struct ingest {
    faid_server *s;
    faid_queue_policy policy;
    int open;     /* a series is open */
    uint64_t seq; /* instance number of the open series */
    uint64_t series_id;
    char uid[FAID_SERIES_UID_MAX];
    uint64_t frames; /* frames of the open series so far */
    faid_input_msg msg; /* the message being handled (large: kept off the stack) */
} ingest;

static faid_ratelimit rl_bad, rl_drop;

/* Waits for a free slot. The publisher always drains (its only blocking send is bounded during
 * shutdown), so this returns eventually. */
static faid_slot *get_slot(ingest *in)
{
    for (;;) {
        faid_slot *slot = faid_slot_get(in->s, POLL_MS);
        if (slot)
            return slot;
    }
}

static void to_publisher(ingest *in, faid_slot *slot)
{
    /* Capacity equals the number of slots: never waits. */
    faid_queue_push(in->s->results, slot, -1);
}

static void set_status_series(ingest *in)
{
    faid_server *s = in->s;
    atomic_store(&s->series_id, in->series_id);
    pthread_mutex_lock(&s->info_mu);
    snprintf(s->series_uid, sizeof(s->series_uid), "%s", in->uid);
    pthread_mutex_unlock(&s->info_mu);
}

static void close_series(ingest *in, const char *reason)
{
    if (!in->open)
        return;
    faid_slot *ev = get_slot(in);
    ev->kind = FAID_SLOT_END;
    ev->reason = reason;
    ev->series_seq = in->seq;
    ev->series_id = in->series_id;
    snprintf(ev->series_uid, sizeof(ev->series_uid), "%s", in->uid);
    ev->series_frames = in->frames;
    to_publisher(in, ev);
    in->open = 0;
    atomic_store(&in->s->state, FAID_STATE_IDLE);
    FAID_INFO("ingest", "series %llu closed (%s): %llu frames", (unsigned long long)in->series_id,
              reason, (unsigned long long)in->frames);
}

/* Opens a series; when start_slot is given (an input start message) it becomes the event and
 * keeps its header for user_data. */
static void open_series(ingest *in, uint64_t series_id, const char *uid, const char *reason,
                        faid_slot *start_slot, int64_t nimages)
{
    faid_slot *ev = start_slot ? start_slot : get_slot(in);
    in->open = 1;
    in->seq++;
    in->series_id = series_id;
    snprintf(in->uid, sizeof(in->uid), "%s", uid);
    in->frames = 0;
    faid_stat_add(&in->s->stats.series, 1);
    set_status_series(in);
    atomic_store(&in->s->state, FAID_STATE_RUNNING);

    ev->kind = FAID_SLOT_START;
    ev->reason = reason;
    ev->nimages = nimages;
    ev->series_seq = in->seq;
    ev->series_id = series_id;
    snprintf(ev->series_uid, sizeof(ev->series_uid), "%s", uid);
    if (start_slot && start_slot->has_payload) {
        zmq_msg_close(&start_slot->payload);
        start_slot->has_payload = 0;
    }
    if (!ev->gen)
        ev->gen = faid_server_current_gen(in->s);
    to_publisher(in, ev);
    FAID_INFO("ingest", "series %llu opened (%s)", (unsigned long long)series_id, reason);
}

/* Turns slot into an error event and sends it on. The message in d names the problem. */
static void reject(ingest *in, faid_slot *slot, const faid_diag *d, int counted)
{
    faid_server *s = in->s;
    int code = d->code ? d->code : FAID_EFORMAT;
    slot->kind = FAID_SLOT_ERROR;
    slot->err_code = code;
    slot->err_stage = faid_stage_name(FAID_STAGE_INGEST);
    snprintf(slot->err_msg, sizeof(slot->err_msg), "%s", d->msg);
    slot->has_frame_id = slot->h.has_frame_id;
    slot->frame_id = slot->h.frame_id;
    slot->counted = counted;
    slot->series_id = counted ? in->series_id : (in->open ? in->series_id : slot->h.series_id);
    slot->series_seq = counted ? in->seq : 0;
    faid_stats_error(&s->stats, FAID_STAGE_INGEST, code);
    if (counted)
        faid_stat_add(&s->stats.failed, 1);
    else
        faid_stat_add(&s->stats.bad_input, 1);
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
static int validate_image(const faid_server *s, faid_slot *slot, faid_diag *d)
{
    const faid_in_header *h = &slot->h;
    const faid_setup *su = slot->gen->setup;
    size_t len = zmq_msg_size(&slot->payload);
    if (su->cfg.max_frame_bytes > 0 && (int64_t)len > su->cfg.max_frame_bytes)
        return faid_fail(d, FAID_ESIZE, "payload of %zu bytes exceeds max_frame_bytes %lld", len,
                         (long long)su->cfg.max_frame_bytes);
    if (h->rows != su->rows || h->cols != su->cols)
        return faid_fail(d, FAID_ESHAPE, "shape [%d, %d] does not match the setup's [%d, %d]",
                         h->rows, h->cols, su->rows, su->cols);
    uint64_t expect = (uint64_t)h->rows * (uint64_t)h->cols * faid_dtype_size(h->dtype);
    const uint8_t *p = zmq_msg_data(&slot->payload);
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
    const uint8_t *p = zmq_msg_data(&slot->payload);
    size_t len = zmq_msg_size(&slot->payload);
    int rc = h->encoding == FAID_ENC_BSLZ4
                 ? faid_bslz4_table(p, len, esz, expect, &slot->table, &d)
                 : faid_lz4h5_table(p, len, expect, &slot->table, &d);
    slot->has_table = rc == 0;
    slot->table_us = (double)(faid_now_ns() - t0) / 1e3;
}

/* Hands a valid frame to the workers under the backpressure policy. */
static void enqueue(ingest *in, faid_slot *slot)
{
    faid_server *s = in->s;
    if (in->policy == FAID_QUEUE_BLOCK) {
        /* Not reading the socket while we wait is the point: ZeroMQ's high-water mark then
         * pushes back to the sender. */
        while (faid_queue_push(s->frames, slot, POLL_MS) == FAID_ETIMEOUT) {
        }
        return;
    }
    faid_slot *victim = NULL;
    if (in->policy == FAID_QUEUE_DROP_NEWEST) {
        if (faid_queue_push(s->frames, slot, 0) == 0)
            return;
        victim = slot;
        faid_stats_drop(&s->stats, FAID_DROP_QUEUE_NEWEST);
    } else {
        void *ev = NULL;
        faid_queue_push_evict(s->frames, slot, &ev);
        if (!ev)
            return;
        victim = ev;
        faid_stats_drop(&s->stats, FAID_DROP_QUEUE_OLDEST);
    }
    faid_log_ratelimited(&rl_drop, FAID_LOG_WARN, "ingest", "queue full: dropped frame %llu (%s)",
                         (unsigned long long)victim->h.frame_id,
                         in->policy == FAID_QUEUE_DROP_NEWEST ? "drop_newest" : "drop_oldest");
    faid_slot_clear_frame(victim);
    victim->kind = FAID_SLOT_DROP;
    to_publisher(in, victim);
}

/* format_err: the input format's verdict on a message whose header was read (parts or payload
 * at fault), or NULL; such a frame still counts in its series. */
static void handle_image(ingest *in, faid_slot *slot, const faid_diag *format_err)
{
    faid_server *s = in->s;
    faid_in_header *h = &slot->h;
    if (!in->open || in->series_id != h->series_id ||
        (h->series_unique_id[0] && strcmp(in->uid, h->series_unique_id) != 0)) {
        close_series(in, "superseded");
        open_series(in, h->series_id, h->series_unique_id, "implicit", NULL, -1);
    }
    in->frames++;
    slot->counted = 1;
    slot->series_seq = in->seq;
    slot->series_id = in->series_id;
    snprintf(slot->series_uid, sizeof(slot->series_uid), "%s", in->uid);
    slot->has_frame_id = 1;
    slot->frame_id = h->frame_id;
    if (format_err) {
        reject(in, slot, format_err, 1);
        return;
    }
    faid_diag d;
    faid_diag_clear(&d);
    if (validate_image(s, slot, &d)) {
        reject(in, slot, &d, 1);
        return;
    }
    atomic_fetch_or(&s->dtypes_seen, 1u << (unsigned)h->dtype);
    parse_table(slot);
    slot->kind = FAID_SLOT_FRAME;
    enqueue(in, slot);
}

/* Receives every part of one message; the first two go into the slot, the rest are counted and
 * discarded so that the next message starts at its first part. */
static int receive(ingest *in, faid_slot *slot, int *nparts, size_t *bytes)
{
    zmq_msg_init(&slot->hdr);
    if (zmq_msg_recv(&slot->hdr, in->s->pull, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&slot->hdr);
        return -1;
    }
    slot->has_hdr = 1;
    *nparts = 1;
    *bytes = zmq_msg_size(&slot->hdr);
    int more = zmq_msg_more(&slot->hdr);
    while (more) {
        zmq_msg_t *m, scratch;
        if (*nparts == 1) {
            m = &slot->payload;
        } else {
            m = &scratch;
        }
        zmq_msg_init(m);
        /* The parts of a multipart message arrive together: this never waits. */
        if (zmq_msg_recv(m, in->s->pull, 0) < 0) {
            zmq_msg_close(m);
            break;
        }
        more = zmq_msg_more(m);
        *bytes += zmq_msg_size(m);
        if (m == &slot->payload)
            slot->has_payload = 1;
        else
            zmq_msg_close(m);
        (*nparts)++;
    }
    return 0;
}

static void handle_message(ingest *in, faid_slot *slot, int nparts, size_t bytes)
{
    faid_server *s = in->s;
    faid_diag d;
    faid_diag_clear(&d);
    slot->recv_mono_ns = faid_now_ns();
    slot->recv_wall_ns = faid_wall_ns();
    /* The input format decides (faid_input.h); ingest still keeps two parts, as many as the
     * native format has. */
    faid_input_part parts[2] = {
        {zmq_msg_data(&slot->hdr), zmq_msg_size(&slot->hdr)},
        {slot->has_payload ? zmq_msg_data(&slot->payload) : NULL,
         slot->has_payload ? zmq_msg_size(&slot->payload) : 0},
    };
    int rc = faid_input_decode(FAID_PROTOCOL_NATIVE, parts, nparts, NULL, &in->msg, &d);
    slot->h = in->msg.h;
    if (rc && !(in->msg.header_ok && slot->h.type == FAID_IN_IMAGE)) {
        faid_stat_add(&s->stats.received_bytes, bytes);
        /* An image whose header names its frame still counts as a frame of the open series
         * when we know which series that is; otherwise it is bad input outside any series. */
        reject(in, slot, &d, 0);
        return;
    }
    switch (slot->h.type) {
    case FAID_IN_IMAGE:
        faid_stat_add(&s->stats.received, 1);
        faid_stat_add(&s->stats.received_bytes, bytes);
        slot->gen = faid_server_current_gen(s);
        handle_image(in, slot, rc ? &d : NULL);
        return;
    case FAID_IN_START:
        faid_stat_add(&s->stats.received_bytes, bytes);
        close_series(in, "superseded");
        open_series(in, slot->h.series_id, slot->h.series_unique_id, "series", slot,
                    slot->h.nimages);
        return;
    case FAID_IN_END:
        faid_stat_add(&s->stats.received_bytes, bytes);
        if (!in->open || in->series_id != slot->h.series_id) {
            if (in->open)
                faid_fail(&d, FAID_EPROTO, "end of series %llu while series %llu is open",
                          (unsigned long long)slot->h.series_id, (unsigned long long)in->series_id);
            else
                faid_fail(&d, FAID_EPROTO, "end of series %llu but no series is open",
                          (unsigned long long)slot->h.series_id);
            reject(in, slot, &d, 0);
            return;
        }
        faid_slot_put(s, slot);
        close_series(in, "end");
        return;
    default:
        faid_fail(&d, FAID_EFORMAT, "unknown message type");
        reject(in, slot, &d, 0);
        return;
    }
}

void *faid_ingest_main(void *arg)
{
    faid_server *s = arg;
    ingest in = {.s = s, .policy = s->policy};
    zmq_pollitem_t item = {.socket = s->pull, .events = ZMQ_POLLIN};
    while (!atomic_load(&s->stop_ingest)) {
        int n = zmq_poll(&item, 1, POLL_MS);
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
        while (!atomic_load(&s->stop_ingest)) {
            faid_slot *slot = get_slot(&in);
            int nparts = 0;
            size_t bytes = 0;
            if (receive(&in, slot, &nparts, &bytes) != 0) {
                faid_slot_put(s, slot);
                break;
            }
            handle_message(&in, slot, nparts, bytes);
        }
    }
    close_series(&in, "shutdown");
    FAID_INFO("ingest", "stopped reading input");
    return NULL;
}
