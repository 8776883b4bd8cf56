/* faid_publish: the publisher thread. Sends every item of the result queue as [topic, body] on
 * the PUB socket (non-blocking: ZeroMQ drops for a subscriber that is behind, nobody else waits)
 * and, when configured, on the lossless PUSH socket (blocking: a missing consumer stops the
 * pipeline, which is what "lossless" means; during shutdown that wait is bounded).
 *
 * It is also the accountant of series: it announces `start` before the first result of a series
 * or of a new setup version, counts results/errors/drops per series and publishes a series'
 * `end` only once every frame ingest saw for it has been accounted for (results from several
 * devices may arrive after ingest's end event). Stats go out every stats_interval seconds. */
#include "faid_server.h"

#include "faid_log.h"

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES        32
#define END_WAIT_NS       (30ll * 1000000000ll)

typedef struct series_rec {
    int used;
    uint64_t seq, series_id;
    char uid[FAID_SERIES_UID_MAX];
    uint64_t processed, failed, dropped;
    int end_pending;
    uint64_t frames;
    const char *reason;
    int64_t end_since_ns;
} series_rec;

typedef struct publisher {
    faid_server *s;
    uint8_t *buf; /* events: start, end, error, stats */
    size_t cap;
    uint64_t msg_number;
    uint64_t announced; /* highest setup version announced by a start */
    series_rec series[MAX_SERIES];
    int64_t drain_since_ns; /* first lossless wait during shutdown */
    /* stats interval bookkeeping */
    int64_t last_stats_ns;
    uint64_t last_processed;
    uint64_t last_busy[FAID_MAX_WORKERS];
} publisher;

static faid_ratelimit rl_send;

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

static void put_msgnum(uint8_t *at, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        at[k] = (uint8_t)(v >> (8 * (7 - k)));
}

/* Lossless send: waits for the consumer, except during shutdown where the total wait is bounded
 * so that a dead consumer cannot keep the daemon from exiting. */
static void send_lossless(publisher *p, const char *topic, const void *body, size_t len)
{
    faid_server *s = p->s;
    for (;;) {
        if (zmq_send(s->push, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
            /* Parts after the first are accepted together with it. */
            zmq_send(s->push, body, len, 0);
            faid_stat_add(&s->stats.lossless_sent, 1);
            return;
        }
        if (zmq_errno() != EAGAIN) {
            faid_stats_error(&s->stats, FAID_STAGE_OUTPUT, FAID_EZMQ);
            faid_log_ratelimited(&rl_send, FAID_LOG_WARN, "publish", "lossless send: %s",
                                 zmq_strerror(zmq_errno()));
            return;
        }
        if (atomic_load(&s->draining)) {
            int64_t now = faid_now_ns();
            if (!p->drain_since_ns)
                p->drain_since_ns = now;
            if (now - p->drain_since_ns > s->lossless_grace_ns) {
                faid_stats_drop(&s->stats, FAID_DROP_LOSSLESS_SHUTDOWN);
                return;
            }
        }
        zmq_pollitem_t it = {.socket = s->push, .events = ZMQ_POLLOUT};
        zmq_poll(&it, 1, 100);
    }
}

static void send_msg(publisher *p, const char *topic, const void *body, size_t len, int stream)
{
    faid_server *s = p->s;
    if (zmq_send(s->pub, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
        zmq_send(s->pub, body, len, ZMQ_DONTWAIT) >= 0) {
        faid_stat_add(&s->stats.published, 1);
    } else {
        faid_stats_error(&s->stats, FAID_STAGE_OUTPUT, FAID_EZMQ);
        faid_log_ratelimited(&rl_send, FAID_LOG_WARN, "publish", "PUB send: %s",
                             zmq_strerror(zmq_errno()));
    }
    if (stream && s->push)
        send_lossless(p, topic, body, len);
}

/* ------------------------------------------------------------------------------------------- */

static series_rec *find_series(publisher *p, uint64_t seq)
{
    for (int i = 0; i < MAX_SERIES; i++)
        if (p->series[i].used && p->series[i].seq == seq)
            return &p->series[i];
    return NULL;
}

static series_rec *new_series(publisher *p, const faid_slot *ev)
{
    series_rec *r = NULL;
    for (int i = 0; i < MAX_SERIES && !r; i++)
        if (!p->series[i].used)
            r = &p->series[i];
    if (!r) {
        /* Table full of series whose end never came (pathological senders): recycle the
         * oldest; its end, should it come, is then published as incomplete. */
        r = &p->series[0];
        for (int i = 1; i < MAX_SERIES; i++)
            if (p->series[i].seq < r->seq)
                r = &p->series[i];
    }
    memset(r, 0, sizeof(*r));
    r->used = 1;
    r->seq = ev->series_seq;
    r->series_id = ev->series_id;
    snprintf(r->uid, sizeof(r->uid), "%s", ev->series_uid);
    return r;
}

static void put_range(faid_mpw *w, int has, const double v[2])
{
    if (!has) {
        faid_mpw_nil(w);
        return;
    }
    faid_mpw_array(w, 2);
    faid_mpw_f64(w, v[0]);
    faid_mpw_f64(w, v[1]);
}

static void publish_start(publisher *p, faid_gen *g, const faid_slot *ev, const char *reason)
{
    faid_server *s = p->s;
    const faid_setup *su = g->setup;
    const faid_config *c = &su->cfg;
    if (reserve(p, g->start_bytes)) {
        FAID_ERROR("publish", "out of memory for a start message");
        return;
    }
    uint64_t masked = 0;
    for (size_t i = 0; su->mask && i < su->npix; i++)
        masked += su->mask[i] != 0;
    int has_user = ev && ev->kind == FAID_SLOT_START && ev->h.user_data;
    faid_mpw w;
    faid_mpw_init(&w, p->buf, p->cap);
    faid_mpw_map(&w, 17 + (su->csr2d ? 1 : 0) + (has_user ? 1 : 0));
    faid_mpw_str(&w, FAID_K_TYPE);
    faid_mpw_str(&w, FAID_TOPIC_START);
    faid_mpw_str(&w, FAID_K_MAGIC_NUMBER);
    faid_mpw_uint(&w, FAID_PROTO_MAGIC);
    faid_mpw_str(&w, FAID_K_PROTOCOL_VERSION);
    faid_mpw_uint(&w, FAID_PROTO_VERSION);
    faid_mpw_str(&w, FAID_K_SOFTWARE_VERSION);
    faid_mpw_str(&w, FAID_VERSION);
    faid_mpw_str(&w, "reason");
    faid_mpw_str(&w, reason);
    faid_mpw_str(&w, FAID_K_SERIES_ID);
    faid_mpw_uint(&w, ev ? ev->series_id : 0);
    faid_mpw_str(&w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(&w, ev ? ev->series_uid : "");
    faid_mpw_str(&w, FAID_K_NIMAGES);
    faid_mpw_int(&w, ev && ev->kind == FAID_SLOT_START ? ev->nimages : -1);
    faid_mpw_str(&w, FAID_K_SETUP_VERSION);
    faid_mpw_uint(&w, g->version);
    faid_mpw_str(&w, FAID_K_CONFIG_HASH);
    faid_mpw_str(&w, su->config_hash);

    const faid_geometry *ge = &su->geom;
    faid_mpw_str(&w, FAID_K_GEOMETRY);
    faid_mpw_map(&w, 12);
    faid_mpw_str(&w, "dist");
    faid_mpw_f64(&w, ge->dist);
    faid_mpw_str(&w, "poni1");
    faid_mpw_f64(&w, ge->poni1);
    faid_mpw_str(&w, "poni2");
    faid_mpw_f64(&w, ge->poni2);
    faid_mpw_str(&w, "rot1");
    faid_mpw_f64(&w, ge->rot1);
    faid_mpw_str(&w, "rot2");
    faid_mpw_f64(&w, ge->rot2);
    faid_mpw_str(&w, "rot3");
    faid_mpw_f64(&w, ge->rot3);
    faid_mpw_str(&w, "wavelength");
    faid_mpw_f64(&w, ge->wavelength);
    faid_mpw_str(&w, "pixel1");
    faid_mpw_f64(&w, ge->pixel1);
    faid_mpw_str(&w, "pixel2");
    faid_mpw_f64(&w, ge->pixel2);
    faid_mpw_str(&w, "rows");
    faid_mpw_int(&w, su->rows);
    faid_mpw_str(&w, "cols");
    faid_mpw_int(&w, su->cols);
    faid_mpw_str(&w, "detector");
    faid_mpw_str(&w, c->preset);

    faid_mpw_str(&w, FAID_K_PARAMETERS);
    faid_mpw_map(&w, 17);
    faid_mpw_str(&w, FAID_K_NPT);
    faid_mpw_int(&w, su->csr->npt_rad);
    faid_mpw_str(&w, FAID_K_NPT_AZIM);
    faid_mpw_int(&w, su->csr2d ? su->csr2d->npt_azim : 0);
    faid_mpw_str(&w, FAID_K_UNIT);
    faid_mpw_str(&w, faid_unit_name(c->unit));
    faid_mpw_str(&w, "split");
    faid_mpw_str(&w, faid_split_name(c->split));
    faid_mpw_str(&w, "error_model");
    faid_mpw_str(&w, faid_error_model_name(c->error_model));
    faid_mpw_str(&w, "solid_angle");
    faid_mpw_bool(&w, c->solid_angle);
    faid_mpw_str(&w, "polarization_factor");
    if (c->has_polarization)
        faid_mpw_f64(&w, c->polarization_factor);
    else
        faid_mpw_nil(&w);
    faid_mpw_str(&w, "radial_range");
    put_range(&w, c->has_radial_range, c->radial_range);
    faid_mpw_str(&w, "azimuth_range");
    put_range(&w, c->has_azimuth_range, c->azimuth_range);
    faid_mpw_str(&w, "dummy");
    if (c->has_dummy)
        faid_mpw_f64(&w, c->dummy);
    else
        faid_mpw_nil(&w);
    faid_mpw_str(&w, "delta_dummy");
    if (c->has_dummy)
        faid_mpw_f64(&w, c->delta_dummy);
    else
        faid_mpw_nil(&w);
    faid_mpw_str(&w, "normalization_factor");
    faid_mpw_f64(&w, c->normalization_factor);
    faid_mpw_str(&w, "empty");
    faid_mpw_f64(&w, c->empty);
    faid_mpw_str(&w, "mask_file");
    faid_mpw_str(&w, c->mask_path);
    faid_mpw_str(&w, "dark_file");
    faid_mpw_str(&w, c->dark_path);
    faid_mpw_str(&w, "flat_file");
    faid_mpw_str(&w, c->flat_path);
    faid_mpw_str(&w, "masked_pixels");
    faid_mpw_uint(&w, masked);

    faid_mpw_str(&w, FAID_K_UNIT);
    faid_mpw_str(&w, faid_unit_name(c->unit));
    uint64_t shape[1] = {(uint64_t)su->csr->npt_rad};
    faid_mpw_str(&w, FAID_K_RADIAL);
    faid_mpw_ndarray(&w, "<f8", shape, 1, su->csr->rad_centers,
                     (size_t)su->csr->npt_rad * sizeof(double));
    if (su->csr2d) {
        uint64_t sh2[1] = {(uint64_t)su->csr2d->npt_azim};
        faid_mpw_str(&w, FAID_K_AZIMUTHAL);
        faid_mpw_ndarray(&w, "<f8", sh2, 1, su->csr2d->azim_centers,
                         (size_t)su->csr2d->npt_azim * sizeof(double));
    }
    faid_mpw_str(&w, "devices");
    faid_mpw_array(&w, (uint32_t)s->nworkers);
    for (int i = 0; i < s->nworkers; i++)
        faid_mpw_str(&w, s->workers[i].name);
    faid_mpw_str(&w, FAID_K_CONFIG);
    faid_mpw_str(&w, g->config_yaml);
    if (has_user) {
        faid_mpw_str(&w, FAID_K_USER_DATA);
        faid_mpw_raw(&w, ev->h.user_data, ev->h.user_data_len);
    }
    size_t off = faid_put_msgnum_placeholder(&w);
    if (faid_mpw_finish(&w, NULL)) {
        FAID_ERROR("publish", "start message larger than its %zu-byte buffer", p->cap);
        return;
    }
    put_msgnum(p->buf + off, p->msg_number++);
    send_msg(p, FAID_TOPIC_START, p->buf, w.len, 1);
    if (g->version > p->announced)
        p->announced = g->version;
}

static void publish_end(publisher *p, series_rec *r, int incomplete)
{
    faid_server *s = p->s;
    if (reserve(p, 64 * 1024))
        return;
    faid_gen *g = faid_server_current_gen(s);
    faid_mpw w;
    faid_mpw_init(&w, p->buf, p->cap);
    faid_mpw_map(&w, 14);
    faid_mpw_str(&w, FAID_K_TYPE);
    faid_mpw_str(&w, FAID_TOPIC_END);
    faid_mpw_str(&w, FAID_K_SERIES_ID);
    faid_mpw_uint(&w, r->series_id);
    faid_mpw_str(&w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(&w, r->uid);
    faid_mpw_str(&w, "reason");
    faid_mpw_str(&w, r->reason ? r->reason : "end");
    faid_mpw_str(&w, "frames_received");
    faid_mpw_uint(&w, r->frames);
    faid_mpw_str(&w, "frames_processed");
    faid_mpw_uint(&w, r->processed);
    faid_mpw_str(&w, "frames_failed");
    faid_mpw_uint(&w, r->failed);
    faid_mpw_str(&w, "frames_dropped");
    faid_mpw_uint(&w, r->dropped);
    faid_mpw_str(&w, "incomplete");
    faid_mpw_bool(&w, incomplete);
    faid_counter_entries(s, &w);
    faid_mpw_str(&w, FAID_K_SETUP_VERSION);
    faid_mpw_uint(&w, g ? g->version : 0);
    faid_gen_release(&g);
    size_t off = faid_put_msgnum_placeholder(&w);
    if (faid_mpw_finish(&w, NULL) == 0) {
        put_msgnum(p->buf + off, p->msg_number++);
        send_msg(p, FAID_TOPIC_END, p->buf, w.len, 1);
    }
    if (incomplete)
        FAID_WARN("publish", "series %llu ended incomplete: %llu of %llu frames accounted for",
                  (unsigned long long)r->series_id,
                  (unsigned long long)(r->processed + r->failed + r->dropped),
                  (unsigned long long)r->frames);
    r->used = 0;
}

static void check_end(publisher *p, series_rec *r)
{
    if (r && r->end_pending && r->processed + r->failed + r->dropped >= r->frames)
        publish_end(p, r, 0);
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

static void handle(publisher *p, faid_slot *slot)
{
    faid_server *s = p->s;
    series_rec *r = slot->counted ? find_series(p, slot->series_seq) : NULL;
    switch (slot->kind) {
    case FAID_SLOT_START:
        r = new_series(p, slot);
        publish_start(p, slot->gen, slot, slot->reason ? slot->reason : "series");
        break;
    case FAID_SLOT_RESULT:
        /* A new setup is announced before its first result. */
        if (slot->gen && slot->gen->version > p->announced)
            publish_start(p, slot->gen, slot, "setup");
        put_msgnum(slot->out + slot->msgnum_off, p->msg_number++);
        send_msg(p, FAID_TOPIC_RESULT, slot->out, slot->out_len, 1);
        if (r)
            r->processed++;
        break;
    case FAID_SLOT_ERROR:
        publish_error(p, slot);
        if (r)
            r->failed++;
        break;
    case FAID_SLOT_DROP:
        if (r)
            r->dropped++;
        break;
    case FAID_SLOT_END:
        r = find_series(p, slot->series_seq);
        if (!r)
            r = new_series(p, slot);
        r->end_pending = 1;
        r->frames = slot->series_frames;
        r->reason = slot->reason;
        r->end_since_ns = faid_now_ns();
        break;
    default:
        break;
    }
    check_end(p, r);
    faid_slot_put(s, slot);
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
    faid_mpw_map(&w, 1 + FAID_STATUS_NKEYS);
    faid_mpw_str(&w, FAID_K_TYPE);
    faid_mpw_str(&w, FAID_TOPIC_STATS);
    faid_status_entries(s, &w);
    if (faid_mpw_finish(&w, NULL) == 0)
        send_msg(p, FAID_TOPIC_STATS, p->buf, w.len, 0);
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
    p->last_stats_ns = faid_now_ns();
    /* Setup 1 is announced by the first series start; a reload before any series is announced by
     * the first result that uses it. */
    p->announced = 0;
    double interval = stats_interval(s);
    int64_t next_stats = interval > 0 ? p->last_stats_ns + (int64_t)(interval * 1e9) : INT64_MAX;
    for (;;) {
        int64_t now = faid_now_ns();
        int wait_ms = 200;
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
        for (int i = 0; i < MAX_SERIES; i++)
            if (p->series[i].used && p->series[i].end_pending &&
                now - p->series[i].end_since_ns > END_WAIT_NS)
                publish_end(p, &p->series[i], 1);
    }
    /* Everything is drained: ends still pending can no longer complete. */
    for (int i = 0; i < MAX_SERIES; i++)
        if (p->series[i].used && p->series[i].end_pending)
            publish_end(p, &p->series[i],
                        p->series[i].processed + p->series[i].failed + p->series[i].dropped <
                            p->series[i].frames);
    publish_stats(p, faid_now_ns());
    free(p->buf);
    free(p);
    FAID_INFO("publish", "publisher done");
    return NULL;
}
