/* faid_publish: the publisher thread. Sends every item of the result queue as [topic, body] on
 * the PUB socket (non-blocking: ZeroMQ drops for a subscriber that is behind, nobody else waits)
 * and, when configured, into the lossless channel (faid_lossless.h: kept until the consumer
 * acknowledges it, re-sent when it comes back; only a full buffer under the `block` overflow
 * policy makes the pipeline wait, and during shutdown that wait is bounded).
 *
 * It publishes the series events ingest's tracker made (faid_series.h): `start` before the first
 * result of a series, or of a new setup version; its ledger (the one owner of per-series
 * outcome counts) says when a series' `end` may go out: once every frame ingest accepted for it
 * has been accounted for (results from several devices may arrive after ingest's end event), or
 * after END_WAIT_NS without the rest (incomplete). Stats go out every stats_interval seconds. */
#include "faid_outfill.h"
#include "faid_state.h"

#include "faid_pool.h"
#include "faid_gen.h"

#include "faid_aggregates.h"
#include "faid_hits_send.h"
#include "faid_http.h"
#include "faid_log.h"
#include "faid_writer.h"

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define END_WAIT_NS (30ll * 1000000000ll)

typedef struct publisher {
    faid_server *s;
    uint8_t *buf; /* events: start, end, error, stats */
    size_t cap;
    uint64_t msg_number;
    uint64_t announced; /* highest setup version announced by a start */
    faid_series_ledger *ledger;
    int64_t drain_since_ns; /* first lossless wait during shutdown */
    /* stats interval bookkeeping */
    int64_t last_stats_ns;
    uint64_t last_processed;
    uint64_t last_busy[FAID_MAX_WORKERS];
    uint8_t *aggr_buf; /* aggregates message (grows to the compressed powder pattern) */
    size_t aggr_cap;
} publisher;

static faid_ratelimit rl_send, rl_giveup, rl_incomplete;

static int reserve(publisher *p, size_t n)
{
    if (p->cap >= n)
        return 0;
    uint8_t *b = realloc(p->buf, n);
    if (!b)
        return FAID_ENOMEM;
    p->buf = b;
    p->cap = n;
    return 0;
}

/* True once the lossless channel has waited its whole output.lossless_shutdown_timeout during a
 * shutdown (the clock starts at its first wait after the stop). */
static int drain_expired(publisher *p)
{
    faid_server *s = p->s;
    if (!atomic_load(&s->draining))
        return 0;
    int64_t now = faid_now_ns();
    if (!p->drain_since_ns)
        p->drain_since_ns = now;
    return now - p->drain_since_ns > s->lossless_grace_ns;
}

/* Hands one series-stream message to the lossless channel, which keeps it until the consumer
 * acknowledges it. The ring has room unless the consumer has been away or behind for a long
 * time; then output.lossless_overflow decides: drop_oldest gives the oldest message up (counted),
 * block serves the consumer until it acknowledges (the pipeline waits; during a shutdown at most
 * output.lossless_shutdown_timeout in total, then the oldest are given up). */
static void send_lossless(publisher *p, const char *topic, uint64_t seq, const void *body,
                          size_t len)
{
    faid_server *s = p->s;
    while (faid_lossless_put(s->ll, topic, seq, body, len) == FAID_EBUSY) {
        if (s->ll_overflow == FAID_LL_OVERFLOW_DROP_OLDEST || drain_expired(p)) {
            faid_lossless_give_up_oldest(s->ll);
            faid_log_ratelimited(&rl_giveup, FAID_LOG_WARN, "publish",
                                 "lossless buffer full (%zu bytes): oldest unacknowledged "
                                 "message given up (%s)",
                                 faid_lossless_capacity(s->ll),
                                 atomic_load(&s->draining) ? "shutdown timeout" : "drop_oldest");
            continue;
        }
        /* Waiting for the lossless consumer is that channel's contract, not a wedge. */
        atomic_store_explicit(&s->publish_alive_ns, faid_now_ns(), memory_order_relaxed);
        faid_lossless_pump(s->ll, 100);
    }
    faid_lossless_pump(s->ll, 0);
}

static void send_msg(publisher *p, const char *topic, const void *body, size_t len, int stream)
{
    faid_server *s = p->s;
    if (zmq_send(s->pub, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
        zmq_send(s->pub, body, len, ZMQ_DONTWAIT) >= 0) {
        faid_stat_add(&s->stats.published, 1);
    } else {
        faid_stats_error(&s->stats, FAID_WHERE_OUTPUT, FAID_EZMQ);
        faid_log_ratelimited(&rl_send, FAID_LOG_WARN, "publish", "PUB send: %s",
                             zmq_strerror(zmq_errno()));
    }
    /* Stream messages were just numbered: their msg_number is the channel's sequence number. */
    if (stream && s->ll)
        send_lossless(p, topic, p->msg_number - 1, body, len);
}

/* After the last message: waits (at most output.lossless_shutdown_timeout in total) for the
 * consumer to acknowledge what is held, then gives up the rest, counted and logged per kind. */
static void drain_lossless(publisher *p)
{
    faid_server *s = p->s;
    while (faid_lossless_held(s->ll) > 0 && !drain_expired(p))
        faid_lossless_pump(s->ll, 20);
    uint64_t before[FAID_NMSGKINDS];
    for (int k = 0; k < FAID_NMSGKINDS; k++)
        before[k] = faid_stat_get(&s->stats.ll_given_up[k]);
    uint64_t n = faid_lossless_give_up_all(s->ll);
    if (n)
        FAID_WARN("publish",
                  "lossless consumer did not acknowledge %llu message(s) within "
                  "output.lossless_shutdown_timeout: given up (start %llu, result %llu, end %llu, "
                  "error %llu)",
                  (unsigned long long)n,
                  (unsigned long long)(faid_stat_get(&s->stats.ll_given_up[FAID_MSG_START]) -
                                       before[FAID_MSG_START]),
                  (unsigned long long)(faid_stat_get(&s->stats.ll_given_up[FAID_MSG_RESULT]) -
                                       before[FAID_MSG_RESULT]),
                  (unsigned long long)(faid_stat_get(&s->stats.ll_given_up[FAID_MSG_END]) -
                                       before[FAID_MSG_END]),
                  (unsigned long long)(faid_stat_get(&s->stats.ll_given_up[FAID_MSG_ERROR]) -
                                       before[FAID_MSG_ERROR]));
    /* A last chance for the consumer's final acks and bye to be read. */
    faid_lossless_pump(s->ll, 0);
}

/* ------------------------------------------------------------------------------------------- */

/* What a start message says about its series. */
typedef struct start_info {
    const char *reason;
    uint64_t series_id;
    const char *uid;
    int64_t nimages;
    const uint8_t *user_data;
    size_t user_data_len;
    const faid_event *ev; /* the series start event (input echo), NULL for a setup start */
    uint32_t shard, shards;
} start_info;

static void publish_start(publisher *p, faid_gen *g, const start_info *in)
{
    faid_server *s = p->s;
    const faid_setup *su = g->setup;
    if (reserve(p, g->start_bytes)) {
        FAID_ERROR("publish", "out of memory for a start message");
        return;
    }
    const faid_event *e = in->ev;
    const char *devices[FAID_MAX_WORKERS];
    for (int i = 0; i < s->nworkers && i < FAID_MAX_WORKERS; i++)
        devices[i] = s->workers[i].name;
    faid_out_start o = {
        .software_version = FAID_VERSION,
        .reason = in->reason,
        .series_id = in->series_id,
        .series_uid = in->uid,
        .id = {s->instance_name, in->shard, in->shards},
        .nimages = in->nimages,
        .setup_version = g->version,
        .devices = devices,
        .ndevices = s->nworkers < FAID_MAX_WORKERS ? s->nworkers : FAID_MAX_WORKERS,
        .config_yaml = g->config_yaml,
        /* Geometry comes from the configuration unless input.geometry_source says start; the
         * detector's pixel mask is OR-ed into the configured one. Whether this series' start
         * reused the setup in force or built one (and how long that took, off the ingest
         * thread); a start announcing a reload's setup says "reload". */
        .input_protocol = e && e->has_input ? e->protocol : "",
        .geometry_source = g->start_geometry ? "start" : "configuration",
        .applied_pixel_mask = g->detector_mask != NULL,
        .detector_masked_pixels = g->detector_masked,
        .setup = e ? faid_setup_choice_name(e->setup) : "reload",
        .setup_build_ms = e ? e->build_ms : 0.0,
        .reported = e && e->has_input ? &e->meta : NULL,
        .user_data = in->user_data,
        .user_data_len = in->user_data_len,
    };
    faid_out_start_setup(&o, su);
    faid_mpw w;
    faid_mpw_init(&w, p->buf, p->cap);
    size_t off = faid_proto_write_start(&w, &o);
    if (faid_mpw_finish(&w, NULL)) {
        FAID_ERROR("publish", "start message larger than its %zu-byte buffer", p->cap);
        return;
    }
    faid_proto_put_msgnum(p->buf + off, p->msg_number++);
    send_msg(p, FAID_TOPIC_START, p->buf, w.len, 1);
    /* The writer takes the series stream as published (its settings: this setup's). */
    faid_writer_start_series(s->writer, g, in->reason && strcmp(in->reason, "setup") == 0, p->buf,
                             w.len);
    if (g->version > p->announced)
        p->announced = g->version;
}

static void publish_end(publisher *p, const faid_series_record *r)
{
    faid_server *s = p->s;
    if (reserve(p, 64 * 1024))
        return;
    faid_gen *g = faid_server_current_gen(s);
    faid_counters_snap counters;
    faid_counters_fill(s, &counters);
    faid_out_end e = {
        .series_id = r->series_id,
        .series_uid = r->uid,
        .id = {s->instance_name, r->shard, r->shards},
        .reason = faid_series_reason_name(r->reason),
        .frames_received = r->frames,
        .frames_processed = r->processed,
        .frames_failed = r->failed,
        .frames_dropped = r->dropped,
        .stale_messages = r->stale,
        .incomplete = r->incomplete,
        .setup_version = g ? g->version : 0,
        .counters = &counters.out,
    };
    faid_gen_release(&g);
    faid_mpw w;
    faid_mpw_init(&w, p->buf, p->cap);
    size_t off = faid_proto_write_end(&w, &e);
    if (faid_mpw_finish(&w, NULL) == 0) {
        faid_proto_put_msgnum(p->buf + off, p->msg_number++);
        send_msg(p, FAID_TOPIC_END, p->buf, w.len, 1);
        if (faid_writer_on(s->writer))
            faid_writer_end(s->writer, p->buf, w.len);
    }
    if (r->incomplete)
        /* A peer drives this line (a start with nimages, then another start): rate-limited
         * with the other peer-driven lines (issue 20 defect 10); the end message carries it. */
        faid_log_ratelimited(&rl_incomplete, FAID_LOG_WARN, "publish",
                             "series %llu ended incomplete: %llu of %llu frames accounted for",
                             (unsigned long long)r->series_id,
                             (unsigned long long)(r->processed + r->failed + r->dropped),
                             (unsigned long long)r->frames);
}

/* Publishes every end that is due (flush: every ended series, complete or not). */
static void publish_due_ends(publisher *p, int flush)
{
    faid_series_record r;
    while (faid_series_ledger_due(p->ledger, faid_now_ns(), flush, &r))
        publish_end(p, &r);
}

static void publish_error(publisher *p, const faid_slot *slot)
{
    if (reserve(p, 4096))
        return;
    faid_out_error e = {
        .series_id = slot->series_id,
        .has_frame_id = slot->has_frame_id,
        .frame_id = slot->frame_id,
        .code = slot->err_code,
        .stage = slot->err_stage,
        .message = slot->err_msg,
        .msg_number = p->msg_number,
    };
    faid_mpw w;
    faid_mpw_init(&w, p->buf, p->cap);
    faid_proto_write_error(&w, &e);
    if (faid_mpw_finish(&w, NULL) == 0) {
        p->msg_number++;
        send_msg(p, FAID_TOPIC_ERROR, p->buf, w.len, 1);
    }
}

static void handle_event(publisher *p, faid_event *e)
{
    faid_series_ledger_event(p->ledger, &e->ev, faid_now_ns());
    if (e->build) {
        /* The series' setup is being built: its start names that setup, so it waits for the
         * build (its frames wait in the frame queue meanwhile, behind the workers). */
        faid_gen *g = faid_gen_job_wait(e->build, &p->s->publish_alive_ns, &e->build_ms);
        if (g) {
            faid_gen_release(&e->gen);
            e->gen = g;
        } else {
            e->setup = FAID_SETUP_FAILED;
        }
        faid_gen_job_release(&e->build);
    }
    if (e->ev.kind == FAID_SERIES_EV_START && e->gen) {
        start_info in = {
            .reason = faid_series_reason_name(e->ev.reason),
            .series_id = e->ev.series_id,
            .uid = e->ev.uid,
            .nimages = e->ev.nimages,
            .user_data = e->user_data_len ? e->user_data : NULL,
            .user_data_len = e->user_data_len,
            .ev = e,
            .shard = e->ev.shard,
            .shards = e->ev.shards,
        };
        publish_start(p, e->gen, &in);
    }
    faid_event_put(p->s, e);
}

static void handle(publisher *p, void *item)
{
    faid_server *s = p->s;
    if (*(const faid_slot_kind *)item == FAID_ITEM_EVENT) {
        handle_event(p, item);
        publish_due_ends(p, 0);
        return;
    }
    faid_slot *slot = item;
    faid_series_outcome outcome = FAID_SERIES_PROCESSED;
    switch (slot->kind) {
    case FAID_SLOT_RESULT:
        /* A new setup is announced before its first result. */
        if (slot->gen && slot->gen->version > p->announced) {
            start_info in = {.reason = "setup",
                             .series_id = slot->series_id,
                             .uid = slot->series_uid,
                             .nimages = -1,
                             .shard = slot->shard,
                             .shards = slot->shards};
            publish_start(p, slot->gen, &in);
        }
        faid_proto_put_msgnum(slot->out + slot->msgnum_off, p->msg_number++);
        send_msg(p, FAID_TOPIC_RESULT, slot->out, slot->out_len, 1);
        if (faid_writer_on(s->writer)) {
            faid_writer_result(s->writer, slot->out, slot->out_len);
            /* the hit frame as it arrived, after its result (the writer takes its peaks) */
            if (slot->is_hit && slot->hit_chunk_len && faid_writer_hits_on(s->writer))
                faid_writer_hit(s->writer, slot->h.frame_id, slot->h.dtype, slot->h.encoding,
                                slot->hit_chunk, slot->hit_chunk_len);
        }
        faid_histo_observe(&s->stats.latency, faid_now_ns() - slot->recv_mono_ns);
        if (s->http)
            faid_http_offer(s->http, &slot->out, &slot->out_cap, slot->out_len, slot->is_hit);
        outcome = FAID_SERIES_PROCESSED;
        break;
    case FAID_SLOT_ERROR:
        publish_error(p, slot);
        outcome = FAID_SERIES_FAILED;
        break;
    case FAID_SLOT_DROP:
        outcome = FAID_SERIES_DROPPED;
        break;
    default:
        break;
    }
    if (slot->counted && slot->series_seq)
        faid_series_ledger_count(p->ledger, slot->series_seq, outcome);
    /* behind a fan-out: named exactly in the next credit (only once published: a frame the
     * instance dies holding stays the fan-out's to report lost) */
    if (s->fan && slot->has_frame_id &&
        (slot->kind == FAID_SLOT_RESULT || slot->kind == FAID_SLOT_ERROR ||
         slot->kind == FAID_SLOT_DROP))
        faid_fan_acct_note(&s->fan_acct, slot->h.series_id, slot->frame_id);
    faid_slot_put(s, slot);
    publish_due_ends(p, 0);
}

static void publish_stats(publisher *p, int64_t now)
{
    faid_server *s = p->s;
    double dt = (double)(now - p->last_stats_ns) / 1e9;
    uint64_t processed = faid_stat_get(&s->stats.processed);
    if (dt > 0) {
        faid_stats_set_fps(&s->stats, (double)(processed - p->last_processed) / dt);
        for (int i = 0; i < s->nworkers; i++) {
            uint64_t b = faid_stat_get(&s->workers[i].busy_ns);
            double frac = (double)(b - p->last_busy[i]) / 1e9 / dt;
            atomic_store(&s->workers[i].busy_frac_bits, faid_f64_to_bits(frac > 1 ? 1 : frac));
            p->last_busy[i] = b;
        }
    }
    p->last_processed = processed;
    p->last_stats_ns = now;
    if (reserve(p, 64 * 1024))
        return;
    faid_mpw w;
    faid_mpw_init(&w, p->buf, p->cap);
    faid_status_snap sn;
    faid_status_fill(s, &sn);
    faid_proto_write_stats(&w, &sn.out);
    faid_status_snap_release(&sn);
    if (faid_mpw_finish(&w, NULL) == 0)
        send_msg(p, FAID_TOPIC_STATS, p->buf, w.len, 0);
}

/* The aggregates message, when the setup in force finds peaks and something was added. */
static void publish_aggregates(publisher *p)
{
    size_t len = 0;
    faid_diag d = {0};
    if (faid_aggr_encode(p->s->aggr, &p->aggr_buf, &p->aggr_cap, &len, &d) != 0) {
        FAID_WARN("publish", "aggregates not sent: %s", d.msg);
        return;
    }
    if (!len)
        return;
    send_msg(p, FAID_TOPIC_AGGREGATES, p->aggr_buf, len, 0);
}

/* peaks.aggregates_interval of the setup in force, 0 when it finds no peaks. */
static double aggregates_interval(faid_server *s)
{
    faid_gen *g = faid_server_current_gen(s);
    double v = g && g->setup->csr_bg ? g->setup->cfg.peaks_aggregates_interval : 0.0;
    faid_gen_release(&g);
    return v;
}

static double stats_interval(faid_server *s)
{
    faid_gen *g = faid_server_current_gen(s);
    double v = g ? g->setup->cfg.stats_interval : 1.0;
    faid_gen_release(&g);
    return v;
}

void *faid_publish_main(void *arg)
{
    faid_server *s = arg;
    publisher *p = calloc(1, sizeof(*p));
    if (!p) {
        FAID_ERROR("publish", "out of memory: publisher not started");
        return NULL;
    }
    p->s = s;
    p->ledger = faid_series_ledger_new(s->nslots + FAID_EVENTS, END_WAIT_NS);
    if (!p->ledger) {
        free(p);
        FAID_ERROR("publish", "out of memory: publisher not started");
        return NULL;
    }
    p->last_stats_ns = faid_now_ns();
    /* Setup 1 is announced by the first series start; a reload before any series is announced by
     * the first result that uses it. */
    p->announced = 0;
    double interval = stats_interval(s);
    int64_t next_stats = interval > 0 ? p->last_stats_ns + (int64_t)(interval * 1e9) : INT64_MAX;
    int64_t next_aggr = p->last_stats_ns;
    int hits_more = 0; /* hits requests left unread by the last pass */
    for (;;) {
        int64_t now = faid_now_ns();
        atomic_store_explicit(&s->publish_alive_ns, now, memory_order_relaxed);
        /* The lossless consumer's acks and hellos are read between results: with messages
         * waiting for credit, often enough that a granted window is used at once (2 ms);
         * otherwise often enough that a consumer's hello is answered promptly (50 ms). */
        int wait_ms = !s->ll ? 200 : faid_lossless_pending(s->ll) ? 2 : 50;
        if (hits_more)
            wait_ms = 0;
        if (now >= next_aggr) {
            double ai = aggregates_interval(s);
            if (ai > 0)
                publish_aggregates(p);
            /* re-read each 200 ms while off, so a reload turning them on is seen */
            next_aggr = now + (ai > 0 ? (int64_t)(ai * 1e9) : 200000000);
        }
        if (next_stats != INT64_MAX) {
            int64_t left = (next_stats - now) / 1000000;
            wait_ms = left < 0 ? 0 : left < wait_ms ? (int)left : wait_ms;
        }
        void *item = NULL;
        int rc = faid_queue_pop(s->results, &item, wait_ms);
        if (rc == FAID_ESTOPPED)
            break;
        if (rc == 0)
            handle(p, item);
        if (s->ll)
            faid_lossless_pump(s->ll, 0);
        /* `next` requests queue, others are answered at once; a bounded number per pass, and
         * while more wait the next pass does not sleep */
        hits_more = faid_hits_service(s->hitsend);
        now = faid_now_ns();
        if (now >= next_stats) {
            publish_stats(p, now);
            interval = stats_interval(s);
            next_stats = interval > 0 ? now + (int64_t)(interval * 1e9) : INT64_MAX;
        } else if (next_stats == INT64_MAX) {
            interval = stats_interval(s);
            if (interval > 0)
                next_stats = now + (int64_t)(interval * 1e9);
        }
        /* Ends that waited END_WAIT_NS for frames that never came. */
        publish_due_ends(p, 0);
    }
    /* Everything is drained: ends still pending can no longer complete. */
    publish_due_ends(p, 1);
    if (s->ll)
        drain_lossless(p);
    publish_stats(p, faid_now_ns());
    if (aggregates_interval(s) > 0)
        publish_aggregates(p);
    faid_series_ledger_destroy(&p->ledger);
    free(p->buf);
    free(p->aggr_buf);
    free(p);
    FAID_INFO("publish", "publisher done");
    return NULL;
}
