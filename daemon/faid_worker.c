/* faid_worker: one thread per compute device. Takes frames from the frame queue, reduces each
 * with the engine of the generation the frame was received under (switching engines between
 * frames when a reload happened), and encodes the result message into the frame's slot, so the
 * publisher only sends bytes.
 *
 * Up to pipeline.inflight frames are in flight per device (engine submit/collect): the CPU part
 * and the upload of one frame overlap the kernels of the previous ones; with pipeline.batch B
 * the engine integrates B of them per pass over the CSR matrix. Frames complete in
 * submission order, so results of one worker leave in reception order.
 *
 * pipeline.collect_thread splits the loop in two: the worker pops, copies and submits frames and
 * never waits for a result unless the engine is full (then for the collect thread's signal); the
 * device's collect thread waits for the oldest frame in flight, encodes its result and hands it
 * on, in submission order. The two share the in-flight ring (under wstate.mu) and the engine
 * (one submitter, one collector: faid_engine.h). Issue 17: serial, with peaks on one H100, the
 * worker spent 354-399 us per result submitting (mostly the copy into staging) and 264-283 us
 * waiting for the oldest frame, one after the other; a frame that arrived meanwhile waited. */
#include "faid_outfill.h"
#include "faid_outputs.h"
#include "faid_state.h"

#include "faid_pool.h"
#include "faid_gen.h"
#include "faid_writer.h"

#include "faid_aggregates.h"
#include "faid_hits_send.h"
#include "faid_log.h"
#include "faid_thread.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 200

static faid_ratelimit rl_err;

/* The result message of a frame (faid_proto_write_result in proto/). */
static int encode_result(faid_worker *wk, faid_slot *slot, const faid_result *r, int64_t pop_ns,
                         int64_t done_mono, int64_t done_wall)
{
    faid_out_result o = {
        .series_id = slot->series_id,
        .series_uid = slot->series_uid,
        .id = {wk->srv->instance_name, slot->shard, slot->shards},
        .frame_id = slot->h.frame_id,
        .setup_version = slot->gen->version,
        .device = wk->index,
        .received_ns = (uint64_t)slot->recv_wall_ns,
        .done_ns = (uint64_t)done_wall,
        .payload_bytes = slot->payload_len,
        .latency_us = (double)(done_mono - slot->recv_mono_ns) / 1e3,
        .queue_us = (double)(pop_ns - slot->recv_mono_ns) / 1e3,
        .in = &slot->h,
    };
    faid_out_time times[FAID_TIMINGS_MAX];
    faid_out_result_outputs(&o, r);
    faid_out_result_times(&o, times, FAID_TIMINGS_MAX, r);
    faid_mpw w;
    faid_mpw_init(&w, slot->out, slot->out_cap);
    slot->msgnum_off = faid_proto_write_result(&w, &o);
    if (faid_mpw_finish(&w, NULL))
        return FAID_ESIZE;
    slot->out_len = w.len;
    return 0;
}

/* writer.hits: the hit's payload as it arrived, for the writer (the parts go back below). */
static void keep_hit_chunk(faid_slot *slot)
{
    if (slot->hit_chunk_cap < slot->payload_len) {
        uint8_t *b = realloc(slot->hit_chunk, slot->payload_len);
        if (!b) {
            FAID_WARN("worker", "out of memory for a hit frame's copy: not written (writer.hits)");
            return;
        }
        slot->hit_chunk = b;
        slot->hit_chunk_cap = slot->payload_len;
    }
    memcpy(slot->hit_chunk, slot->payload, slot->payload_len);
    slot->hit_chunk_len = slot->payload_len;
}

static void fail_frame(faid_worker *wk, faid_slot *slot, const faid_diag *d)
{
    faid_server *s = wk->srv;
    int code = d->code ? d->code : FAID_EINVAL;
    slot->kind = FAID_SLOT_ERROR;
    slot->err_code = code;
    slot->err_stage = faid_where_name(FAID_WHERE_WORKER);
    snprintf(slot->err_msg, sizeof(slot->err_msg), "%s", d->msg);
    slot->has_frame_id = 1;
    slot->frame_id = slot->h.frame_id;
    faid_stats_error(&s->stats, FAID_WHERE_WORKER, code);
    faid_stat_add(&s->stats.failed, 1);
    faid_stat_add(&wk->failed, 1);
    faid_log_ratelimited(&rl_err, FAID_LOG_WARN, "worker", "device %d: frame %llu: %s: %s",
                         wk->index, (unsigned long long)slot->frame_id, faid_errname(code), d->msg);
    faid_slot_clear_frame(slot);
}

/* Frames submitted to the engine and not yet collected, oldest first (the engine completes
 * them in submission order): at most its slots x frames per slot. */
#define RING (FAID_ENGINE_DEPTH_MAX * FAID_ENGINE_BATCH_MAX)
typedef struct inflight {
    faid_slot *slot[RING];
    int64_t pop_ns[RING];
    int head, n;
} inflight;

typedef struct wstate {
    faid_worker *wk;
    faid_gen *active; /* the worker's; a frame in flight holds its own in slot->gen */
    inflight q;       /* threaded: under mu */
    long delay_us;
    long poll_us;      /* pipeline.collect_poll_us (fixed for the life of the process) */
    int64_t busy_from; /* start of the current busy period (something in flight); threaded: mu */
    /* pipeline.collect_thread and pipeline.collect_launch (fixed for the life of the process) */
    int threaded;
    int eager; /* the worker launches a partial batch when it has no frame at hand */
    pthread_t collector;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* q changed (a frame in flight, one collected) or quit */
    int quit;          /* the worker ends: the collector leaves once q is empty */
} wstate;

static void finish(wstate *w, faid_slot *slot, int rc, faid_diag *d, int64_t pop_ns)
{
    faid_worker *wk = w->wk;
    faid_server *s = wk->srv;
    faid_gen *g = slot->gen; /* the generation the frame was submitted under (w->active then) */
    int64_t done_mono = faid_now_ns();
    const int64_t t_finish = done_mono;
    int64_t done_wall = faid_wall_ns();
    if (rc == 0 && faid_slot_reserve(slot, g->result_bytes + slot->h.user_data_len) != 0)
        rc = faid_fail(d, FAID_ENOMEM, "out of memory for the result message");
    if (rc == 0 &&
        (rc = encode_result(wk, slot, g->results[wk->index], pop_ns, done_mono, done_wall)) != 0)
        faid_fail(d, rc, "result message larger than its %zu-byte buffer", slot->out_cap);
    if (rc == 0 && g->results[wk->index]->peaks) {
        const faid_result *res = g->results[wk->index];
        faid_stat_add(&s->stats.peak_frames, 1);
        faid_stat_add(&s->stats.hits, res->is_hit ? 1 : 0);
        faid_stat_add(&s->stats.peaks_found, res->num_peaks > 0 ? (uint64_t)res->num_peaks : 0);
        slot->is_hit = res->is_hit;
        if (faid_aggr_add(s->aggr, g->setup, res) != 0)
            FAID_WARN("worker", "aggregates: out of memory for the powder pattern");
    } else {
        slot->is_hit = 0;
    }
    if (rc) {
        fail_frame(wk, slot, d);
    } else {
        slot->kind = FAID_SLOT_RESULT;
        slot->setup_version = g->version;
        slot->device = wk->index;
        slot->latency_us = (double)(done_mono - slot->recv_mono_ns) / 1e3;
        faid_stats_latency(&s->stats, done_mono - slot->recv_mono_ns);
        faid_stat_add(&s->stats.processed, 1);
        faid_stat_add(&wk->processed, 1);
        const faid_stage_times *t = &g->results[wk->index]->t;
        faid_histo *hs = s->stats.timing;
        faid_histo_observe(&hs[FAID_T_QUEUE], pop_ns - slot->recv_mono_ns);
        for (int k = 1; k < faid_timing_count(); k++)
            faid_histo_observe(&hs[k], (int64_t)(faid_time_us(faid_timing_decl(k), t) * 1e3));
        /* status devices[].host_us: the engine's row that declares it (its "host" time) */
        const faid_time_decl *host_row = faid_times_status(FAID_KEY_HOST_US);
        if (host_row)
            faid_stat_add(&wk->host_ns, (uint64_t)(faid_time_us(host_row, t) * 1e3));
        faid_stat_add(&wk->table_ns, (uint64_t)(slot->table_us * 1e3));
        faid_stat_add(&wk->timed, 1);
        faid_stat_add(&wk->encode_ns, (uint64_t)(faid_now_ns() - t_finish));
        if (s->hitsend && g->results[wk->index]->is_hit)
            faid_hits_send(s->hitsend, wk->index, slot, g, g->results[wk->index]);
        slot->hit_chunk_len = 0;
        /* The frame's own setup decides too: the writer's switch follows the starts the
         * publisher has handled, and the workers may reduce a series' first frames before the
         * publisher hands it that series' start (integration.writer_faults: all 3 hits lost
         * while the publisher was held). The publisher, which hands the writer the start before
         * the results, gates what is written. */
        const faid_config *gc = &g->setup->cfg;
        if (g->results[wk->index]->is_hit &&
            (faid_writer_hits_on(s->writer) ||
             (gc->writer_directory[0] && gc->writer_hits && g->setup->csr_bg)))
            keep_hit_chunk(slot);
        /* The payload is no longer needed; the generation reference stays with the slot until
         * the publisher has announced that setup. */
        faid_slot_release_parts(slot);
    }
    faid_queue_push(s->results, slot, -1);
}

/* Collects the oldest frame in flight and hands it on: waiting for it (block), or only when it is
 * done (!block: 0 when it is not, nothing consumed). 1 when a frame was handed on. */
static int collect_oldest(wstate *w, int block)
{
    faid_worker *wk = w->wk;
    faid_slot *slot = w->q.slot[w->q.head];
    int64_t pop_ns = w->q.pop_ns[w->q.head];
    faid_diag d;
    faid_diag_clear(&d);
    uint64_t tag = 0;
    const int64_t t0 = faid_now_ns();
    faid_gen *g = slot->gen;
    int rc = faid_engine_collect(g->engines[wk->index], g->results[wk->index], &tag, block, &d);
    if (!block && rc == FAID_EBUSY)
        return 0;
    faid_stat_add(&wk->wait_ns, (uint64_t)(faid_now_ns() - t0));
    if (rc == FAID_EINVAL || rc == FAID_EBUSY) {
        /* Nothing was consumed: the engine lost track of the frame. Answer it rather than
         * leaving its series without an end. */
        faid_diag_prefix(&d, "collect: ");
    } else if (rc == 0 && tag != slot->frame_id) {
        rc = faid_fail(&d, FAID_EINVAL, "engine returned frame %llu, expected %llu",
                       (unsigned long long)tag, (unsigned long long)slot->frame_id);
    }
    if (w->delay_us > 0) {
        struct timespec ts = {w->delay_us / 1000000, (w->delay_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    w->q.head = (w->q.head + 1) % RING;
    w->q.n--;
    atomic_store_explicit(&wk->in_flight, w->q.n, memory_order_relaxed);
    int64_t now = faid_now_ns();
    faid_stat_add(&wk->busy_ns, (uint64_t)(now - w->busy_from));
    w->busy_from = now;
    finish(w, slot, rc, &d, pop_ns);
    return 1;
}

/* Collects the oldest frame in flight (waiting for it) and hands it on. */
static void collect_one(wstate *w)
{
    collect_oldest(w, 1);
}

/* pipeline.collect_poll_us: frames in flight, none queued. Returns once the oldest frame was
 * collected or a frame waits in the queue (the main loop submits it while the device works on
 * the ones before it), checking both every poll_us. Blocking on the oldest frame instead makes a
 * frame that arrives meanwhile wait for that frame's whole device time before its own transfer
 * starts: at a fixed rate that wait is part of its latency (issue 17: p99 2.99 ms at 1 kHz with
 * peaks, device time per frame about 0.5 ms). */
static void collect_or_frame(wstate *w, long poll_us)
{
    faid_server *s = w->wk->srv;
    struct timespec ts = {poll_us / 1000000, (poll_us % 1000000) * 1000};
    while (!collect_oldest(w, 0) && faid_queue_len(s->frames) == 0) {
        const int64_t t0 = faid_now_ns();
        atomic_store_explicit(&w->wk->alive_ns, t0, memory_order_relaxed);
        nanosleep(&ts, NULL);
        faid_stat_add(&w->wk->wait_ns, (uint64_t)(faid_now_ns() - t0)); /* status wait_us */
    }
}

/* No frame waits and frames are in flight: the worker is about to wait for the oldest. A slot of
 * pipeline.batch frames that is partly filled and not the oldest starts now (the engine's
 * faid_engine_launch_open): no frame can join it while the worker waits, and otherwise its
 * frames' integration and peak stages would start only once the worker has collected every
 * frame before them, one slot's device time later (issue 17: with peaks about 0.5 ms a frame on
 * an H100; at 1 kHz the latency p99 was 3.0-3.9 ms with batch 2, 2.5 ms with batch 1). */
static void launch_open(wstate *w)
{
    faid_worker *wk = w->wk;
    faid_diag d;
    faid_diag_clear(&d);
    const int64_t t0 = faid_now_ns();
    int rc = faid_engine_launch_open(w->active->engines[wk->index], &d);
    faid_stat_add(&wk->submit_ns, (uint64_t)(faid_now_ns() - t0));
    if (rc > 0)
        faid_stat_add(&wk->early_launches, 1);
    else if (rc < 0)
        FAID_DEBUG("worker", "device %d: a partial batch not launched (collect retries): %s",
                   wk->index, d.msg);
}

/* ---- pipeline.collect_thread ---- */

/* Waits on w->cv for at most POLL_MS, so that the waiting thread's heartbeat turns (mu held). */
static void wait_turn(wstate *w, atomic_int_fast64_t *alive)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)POLL_MS * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    atomic_store_explicit(alive, faid_now_ns(), memory_order_relaxed);
}

/* The collect thread: waits for the oldest frame in flight (the engine's blocking collect),
 * hands it on (finish: result message, statistics, results queue) and takes the next, in
 * submission order, until the worker ends and nothing is left in flight. */
static void *collect_main(void *arg)
{
    wstate *w = arg;
    faid_worker *wk = w->wk;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        atomic_store_explicit(&wk->collect_alive_ns, faid_now_ns(), memory_order_relaxed);
        if (w->q.n == 0) {
            if (w->quit)
                break;
            wait_turn(w, &wk->collect_alive_ns);
            continue;
        }
        faid_slot *slot = w->q.slot[w->q.head];
        const int64_t pop_ns = w->q.pop_ns[w->q.head];
        pthread_mutex_unlock(&w->mu);
        faid_gen *g = slot->gen;
        faid_diag d;
        faid_diag_clear(&d);
        uint64_t tag = 0;
        const int64_t t0 = faid_now_ns();
        int rc = faid_engine_collect(g->engines[wk->index], g->results[wk->index], &tag, 1, &d);
        faid_stat_add(&wk->wait_ns, (uint64_t)(faid_now_ns() - t0));
        if (rc == FAID_EINVAL || rc == FAID_EBUSY)
            faid_diag_prefix(&d, "collect: "); /* nothing consumed: answer it (collect_oldest) */
        else if (rc == 0 && tag != slot->frame_id)
            rc = faid_fail(&d, FAID_EINVAL, "engine returned frame %llu, expected %llu",
                           (unsigned long long)tag, (unsigned long long)slot->frame_id);
        if (w->delay_us > 0) {
            struct timespec ts = {w->delay_us / 1000000, (w->delay_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&w->mu);
        w->q.head = (w->q.head + 1) % RING;
        w->q.n--;
        atomic_store_explicit(&wk->in_flight, w->q.n, memory_order_relaxed);
        const int64_t now = faid_now_ns();
        faid_stat_add(&wk->busy_ns, (uint64_t)(now - w->busy_from));
        w->busy_from = now;
        pthread_cond_broadcast(&w->cv); /* room for the worker, or the drain it waits for */
        pthread_mutex_unlock(&w->mu);
        finish(w, slot, rc, &d, pop_ns);
        pthread_mutex_lock(&w->mu);
    }
    atomic_store_explicit(&wk->collect_alive_ns, 0, memory_order_relaxed);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Threaded: waits until fewer than n frames are in flight (the collect thread took the oldest).
 * Idle time, as the wait for a frame: not in status wait_us, which is the collect thread's time
 * in the engine's collect (submit_us the worker's, wait_us + encode_us the collect thread's). */
static void wait_below(wstate *w, int n)
{
    pthread_mutex_lock(&w->mu);
    while (w->q.n >= n && w->q.n > 0)
        wait_turn(w, &w->wk->alive_ns);
    pthread_mutex_unlock(&w->mu);
}

static int in_flight(wstate *w)
{
    if (!w->threaded)
        return w->q.n;
    pthread_mutex_lock(&w->mu);
    int n = w->q.n;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* Every frame in flight collected and handed on (threaded: by the collect thread, the partial
 * batch handed to it first). */
static void drain(wstate *w)
{
    if (w->threaded) {
        if (in_flight(w) > 0) {
            if (w->eager)
                launch_open(w);
            wait_below(w, 1);
        }
        return;
    }
    while (w->q.n > 0)
        collect_one(w);
}

/* A frame received while its series' setup was being built is reduced with that setup: the
 * frames in flight (older setups) complete first, then the worker waits for the build. The frame
 * queue is bounded, so ingest's backpressure policy applies meanwhile. A failed build leaves
 * the frame with the setup it was received under. */
static void resolve_build(wstate *w, faid_slot *slot)
{
    if (!slot->build)
        return;
    if (!faid_gen_job_done(slot->build))
        drain(w);
    faid_gen *g = faid_gen_job_wait(slot->build, &w->wk->alive_ns, NULL);
    if (g) {
        faid_gen_release(&slot->gen);
        slot->gen = g;
    }
    faid_gen_job_release(&slot->build);
}

static void submit(wstate *w, faid_slot *slot, int64_t pop_ns)
{
    faid_worker *wk = w->wk;
    resolve_build(w, slot);
    if (slot->gen != w->active) {
        /* Frames arrive in reception order, so a worker only ever moves to newer setups. The
         * frames of the old engine complete first; the reference keeps that engine alive while
         * this worker may use it. */
        drain(w);
        faid_gen_release(&w->active);
        w->active = slot->gen;
        faid_gen_acquire(w->active);
        if (w->threaded && w->eager) {
            faid_diag dt;
            faid_diag_clear(&dt);
            /* a new engine, nothing in flight: cannot fail (logged if it did) */
            if (faid_engine_set_threaded(w->active->engines[wk->index], 1, &dt))
                FAID_WARN("worker", "device %d: %s", wk->index, dt.msg);
        }
    }
    faid_frame f = {
        .data = slot->payload,
        .len = slot->payload_len,
        .encoding = slot->h.encoding,
        .dtype = slot->h.dtype,
        .rows = slot->h.rows,
        .cols = slot->h.cols,
    };
    slot->frame_id = slot->h.frame_id;
    faid_diag d;
    faid_diag_clear(&d);
    if (!w->threaded && w->q.n == 0)
        w->busy_from = faid_now_ns();
    int rc;
    /* With batches a slot closed before it was full holds fewer frames, so the engine may be
     * full before depth frames are in flight: the oldest frame makes room. */
    const faid_block_table *table = slot->has_table ? &slot->table : NULL;
    for (;;) {
        const int64_t t0 = faid_now_ns();
        rc = faid_engine_submit_table(w->active->engines[wk->index], &f, table, slot->h.frame_id,
                                      &d);
        faid_stat_add(&wk->submit_ns, (uint64_t)(faid_now_ns() - t0));
        const int n = in_flight(w);
        if (rc != FAID_EBUSY || n == 0)
            break;
        faid_diag_clear(&d);
        if (w->threaded)
            wait_below(w, n); /* the collect thread frees a slot */
        else
            collect_one(w);
    }
    if (rc) {
        /* Refused at submit (malformed block table, ...): not in flight, answer it now. */
        finish(w, slot, rc, &d, pop_ns);
        return;
    }
    if (w->threaded)
        pthread_mutex_lock(&w->mu);
    if (w->threaded && w->q.n == 0)
        w->busy_from = faid_now_ns();
    int tail = (w->q.head + w->q.n) % RING;
    w->q.slot[tail] = slot;
    w->q.pop_ns[tail] = pop_ns;
    w->q.n++;
    atomic_store_explicit(&wk->in_flight, w->q.n, memory_order_relaxed);
    if (w->threaded) {
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* pipeline.collect_thread: the worker's loop beside the collect thread. It waits only for room
 * in the engine (depth frames in flight) and, with nothing queued, for the next frame. A partial
 * batch: pipeline.collect_launch eager hands it over before that wait (launch_open: a slot that
 * is not the oldest starts now, the oldest is launched by the collect thread; the engine is
 * threaded, so the collect thread waits for that); fill leaves it open for the frames that
 * arrive until the collect thread reaches it and launches it (the engine's collect closes the
 * oldest slot, as for the serial worker). Issue 17: frames arriving one at a time made eager
 * launch every batch with one frame (one H100, peaks, input.pinned_receive: the worker's
 * submit_us 127 against 48 serial, 1,679 against 1,794 results/s). */
static void run_threaded(wstate *w)
{
    faid_worker *wk = w->wk;
    faid_server *s = wk->srv;
    for (;;) {
        atomic_store_explicit(&wk->alive_ns, faid_now_ns(), memory_order_relaxed);
        int depth = w->active ? faid_engine_depth(w->active->engines[wk->index]) : 1;
        if (depth > RING)
            depth = RING;
        const int n = in_flight(w);
        if (n >= depth) {
            wait_below(w, depth);
            continue;
        }
        void *item = NULL;
        int rc = faid_queue_pop(s->frames, &item, 0);
        if (rc && rc != FAID_ESTOPPED) {
            if (n && w->eager)
                launch_open(w); /* no frame at hand: the partial batch goes now */
            rc = faid_queue_pop(s->frames, &item, POLL_MS);
        }
        if (rc == FAID_ESTOPPED) {
            drain(w);
            break;
        }
        if (rc)
            continue;
        submit(w, item, faid_now_ns());
    }
}

void *faid_worker_main(void *arg)
{
    faid_worker *wk = arg;
    faid_server *s = wk->srv;
    wstate w = {.wk = wk, .poll_us = s->cfg.collect_poll_us};
    /* Test hook: FAID_TEST_WORKER_DELAY_US makes every frame take at least that long, so the
     * integration tests can overload the pipeline deterministically on a fast machine. */
    const char *dv = getenv("FAID_TEST_WORKER_DELAY_US");
    if (dv && *dv)
        w.delay_us = strtol(dv, NULL, 10);
    if (w.delay_us > 0)
        FAID_WARN("worker", "device %d: test delay of %ld us per frame", wk->index, w.delay_us);
    w.eager = s->cfg.collect_launch == FAID_COLLECT_LAUNCH_EAGER;
    if (s->cfg.collect_thread) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, &ca);
        pthread_condattr_destroy(&ca);
        w.threaded = pthread_create(&w.collector, NULL, collect_main, &w) == 0;
        if (w.threaded)
            faid_thread_name(w.collector, "faid-collect%d", wk->index);
        else
            FAID_WARN("worker",
                      "device %d: no collect thread (pthread_create failed): the "
                      "worker collects itself",
                      wk->index);
    }
    if (w.threaded) {
        run_threaded(&w);
        pthread_mutex_lock(&w.mu);
        w.quit = 1;
        pthread_cond_broadcast(&w.cv);
        pthread_mutex_unlock(&w.mu);
        pthread_join(w.collector, NULL);
    }
    for (; !w.threaded;) {
        atomic_store_explicit(&wk->alive_ns, faid_now_ns(), memory_order_relaxed);
        int depth = w.active ? faid_engine_depth(w.active->engines[wk->index]) : 1;
        if (depth > RING)
            depth = RING;
        if (w.q.n >= depth) {
            collect_one(&w);
            continue;
        }
        /* With frames in flight, only take what is already queued; otherwise wait. */
        void *item = NULL;
        int rc = faid_queue_pop(s->frames, &item, w.q.n ? 0 : POLL_MS);
        if (rc == FAID_ESTOPPED) {
            drain(&w);
            break;
        }
        if (rc) {
            if (w.q.n)
                launch_open(&w);
            if (w.q.n && w.poll_us > 0)
                collect_or_frame(&w, w.poll_us);
            else if (w.q.n)
                collect_one(&w);
            continue;
        }
        submit(&w, item, faid_now_ns());
    }
    if (s->cfg.collect_thread) {
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
    }
    faid_gen_release(&w.active);
    return NULL;
}
