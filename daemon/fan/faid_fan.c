/* faid-fan: the fan-out in front of several faid instances (issue 18; docs/fan-out.md).
 *
 * A DECTRIS detector (stream v1, v2), Jungfraujoch or a native sender pushes one stream on a
 * round-robin PUSH socket: several faid instances connected to it would each get some images
 * and only one of them the series' start and end. faid-fan takes that stream (input.endpoint,
 * input.mode, input.protocol, as faid does), reads of each message only what routing needs
 * (its kind, series and frame id: the input format's header, never the pixels) and hands it on
 * without copying its bytes (the received zmq_msg_t parts are moved into the instance's socket):
 *
 *   - start and end (and the format's other messages) to every instance;
 *   - images in blocks of fan.block frame ids per instance in turn (fan.policy blocks), or
 *     each to the instance with the most free credit (credit);
 *   - optionally a copy of everything to fan.tee_endpoint (the facility's own writer).
 *
 * Threads: one per input endpoint, each with a ZeroMQ context and I/O thread of its own (one
 * shared context limits a fan-out's throughput), which receive, classify and queue messages;
 * the main thread owns the instances' ROUTER, the PUB of its own messages, the control REP,
 * the tee (one context of fan.io_threads I/O threads, which write every byte to the instances)
 * and routes the queue, taking all of it under one lock per wake-up. The queue holds at most
 * fan.buffer_bytes: an image that does not fit is dropped at once (counted, reported lost with
 * instance ""), so the detector is never blocked beyond that buffer.
 *
 * Instances (faid with input.protocol fan) connect a DEALER, say hello with their name and
 * configuration hash, and grant credit as their queue frees (faid_fan_proto.h). An instance
 * whose hash differs from those already there is refused (fan.config_mismatch refuse) or
 * flagged; one that says bye or is silent for fan.instance_timeout gets nothing more, and the
 * frames it had not accounted for are reported lost by series and frame id (status, and a
 * `lost` message on fan.output_endpoint). One that joins while a series is open gets the
 * series' start first and its frames from the next block on. */
#include "faid_config.h"
#include "faid_fan_proto.h"
#include "faid_input.h"
#include "faid_log.h"
#include "faid_proto.h"
#include "faid_proto_keys.h"

#include "faid_client.h"
#include "faid_fan_http.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_INSTANCES 64
#define BLOCK_MAP     4096 /* recent blocks' owners (blocks policy) */
#define MAX_DROPS     1024 /* frame ranges dropped by the buffer, not yet reported */
#define MAX_RID       256
/* The most [first, last] ranges of the ids handed out in one series (the `routed` report):
 * 65,536 ranges are 1.2 MB of msgpack at most; a series routed in blocks of fan.block frames
 * takes one range per block and instance change, a million frames in blocks of 16 at most
 * 62,500. Beyond it the report says incomplete. */
#define MAX_ROUTED 65536
/* The most frames an instance may claim as its window: faid asks 2 x queue.depth (at most
 * 131072); a peer claiming more would only hoard the stream. */
#define MAX_WINDOW 131072u

/* ---- one detector message on its way -------------------------------------------------------- */

typedef enum { K_OTHER = 0, K_START, K_IMAGE, K_END, K_BAD } msg_kind;

typedef struct fmsg {
    struct fmsg *next;
    zmq_msg_t part[FAID_INPUT_MAX_PARTS];
    int n;
    size_t bytes;
    msg_kind kind;
    uint64_t series_id, frame_id;
    const char *protocol; /* the format's name (static) */
    int teed;             /* offered to the tee: an image routed again is not copied again */
    int src;              /* the input endpoint it came from (index in input.endpoint) */
} fmsg;

static void fmsg_free(fmsg **pm)
{
    fmsg *m = *pm;
    if (!m)
        return;
    for (int k = 0; k < m->n; k++)
        zmq_msg_close(&m->part[k]);
    free(m);
    *pm = NULL;
}

/* ---- the queue from the input threads to the router ----------------------------------------- */

typedef struct drop_range {
    uint64_t series_id, first, last;
} drop_range;

typedef struct fan_queue {
    pthread_mutex_t mu;
    fmsg *head, *tail;
    size_t bytes, budget;
    int efd; /* eventfd: the router polls it */
    /* images dropped because the buffer was full, as ranges, until the router reports them */
    drop_range drops[MAX_DROPS];
    int ndrops;
    uint64_t drops_unreported; /* dropped beyond MAX_DROPS ranges (counted only) */
} fan_queue;

/* counters (relaxed atomics: input threads write, the router reads for status and metrics) */
typedef struct fan_counters {
    atomic_uint_fast64_t received, received_bytes, bad_input, dropped, routed, broadcast, lost,
        tee_sent, tee_dropped, refused, joined, left, died, queued_bytes;
} fan_counters;

static fan_counters C;
static atomic_int stop_flag;

static void cnt(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}
static uint64_t get(atomic_uint_fast64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static void note_drop(fan_queue *q, uint64_t series, uint64_t frame)
{
    drop_range *last = q->ndrops ? &q->drops[q->ndrops - 1] : NULL;
    if (last && last->series_id == series && last->last + 1 == frame) {
        last->last = frame;
        return;
    }
    if (q->ndrops == MAX_DROPS) {
        q->drops_unreported++;
        return;
    }
    q->drops[q->ndrops++] = (drop_range){series, frame, frame};
}

/* Queues m, or drops it when the buffer is full: an image always then; another kind (start,
 * end: small) only beyond twice the budget, which a detector never sends. */
static void queue_push(fan_queue *q, fmsg *m)
{
    pthread_mutex_lock(&q->mu);
    size_t limit = m->kind == K_IMAGE ? q->budget : 2 * q->budget;
    /* q->bytes counts what the router holds too (route() takes the list out of the queue): a
     * message larger than the whole budget still goes through when nothing else is held */
    if (q->bytes + m->bytes > limit && q->bytes) {
        if (m->kind == K_IMAGE)
            note_drop(q, m->series_id, m->frame_id);
        pthread_mutex_unlock(&q->mu);
        cnt(&C.dropped, 1);
        fmsg_free(&m);
        return;
    }
    int was_empty = q->head == NULL;
    m->next = NULL;
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->bytes += m->bytes;
    atomic_store(&C.queued_bytes, q->bytes);
    pthread_mutex_unlock(&q->mu);
    if (was_empty) {
        uint64_t one = 1;
        ssize_t w = write(q->efd, &one, sizeof(one));
        (void)w;
    }
}

static fmsg *queue_peek(fan_queue *q)
{
    pthread_mutex_lock(&q->mu);
    fmsg *m = q->head;
    pthread_mutex_unlock(&q->mu);
    return m;
}

static void queue_pop(fan_queue *q)
{
    pthread_mutex_lock(&q->mu);
    fmsg *m = q->head;
    if (m) {
        q->head = m->next;
        if (!q->head)
            q->tail = NULL;
        q->bytes -= m->bytes;
        atomic_store(&C.queued_bytes, q->bytes);
    }
    pthread_mutex_unlock(&q->mu);
    fmsg_free(&m);
}

/* ---- input threads --------------------------------------------------------------------------- */

typedef struct input {
    pthread_t thread;
    int started;
    int index; /* in input.endpoint */
    void *ctx, *sock;
    char endpoint[256];
    faid_input_protocol protocol;
    fan_queue *q;
    faid_input_msg msg; /* large: off the stack */
} input;

static faid_ratelimit rl_in, rl_inst, rl_send, rl_join, rl_lost, rl_aggr;

/* What routing needs of one message: the input format's header decode (the payload is only
 * pointed at, never decoded). */
static void classify(input *in, fmsg *m, int nparts)
{
    faid_input_part parts[FAID_INPUT_MAX_PARTS];
    for (int k = 0; k < m->n; k++) {
        parts[k].data = zmq_msg_data(&m->part[k]);
        parts[k].len = zmq_msg_size(&m->part[k]);
    }
    faid_diag d;
    faid_diag_clear(&d);
    faid_input_opts opts = {.channel = NULL};
    int rc = faid_input_decode(in->protocol, parts, nparts, &opts, &in->msg, &d);
    const faid_input_msg *im = &in->msg;
    m->protocol = im->format ? faid_input_protocol_name(im->format->protocol) : "native";
    m->series_id = im->h.series_id;
    m->frame_id = im->h.frame_id;
    if (rc && !(im->header_ok && im->h.type == FAID_IN_IMAGE)) {
        m->kind = K_BAD;
        faid_log_ratelimited(&rl_in, FAID_LOG_WARN, "fan", "input %s: unreadable message: %s",
                             in->endpoint, d.msg);
        return;
    }
    switch (im->h.type) {
    case FAID_IN_START:
        m->kind = K_START;
        break;
    case FAID_IN_IMAGE:
        m->kind = K_IMAGE;
        break;
    case FAID_IN_END:
        m->kind = K_END;
        break;
    default:
        m->kind = K_OTHER;
        break;
    }
}

static void *input_main(void *arg)
{
    input *in = arg;
    zmq_pollitem_t item = {.socket = in->sock, .events = ZMQ_POLLIN};
    while (!atomic_load(&stop_flag)) {
        if (zmq_poll(&item, 1, 100) <= 0)
            continue;
        for (;;) {
            fmsg *m = calloc(1, sizeof(*m));
            if (!m)
                break;
            zmq_msg_init(&m->part[0]);
            if (zmq_msg_recv(&m->part[0], in->sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m->part[0]);
                free(m);
                break;
            }
            m->n = 1;
            m->bytes = zmq_msg_size(&m->part[0]);
            int nparts = 1, more = zmq_msg_more(&m->part[0]);
            while (more) {
                zmq_msg_t scratch;
                zmq_msg_t *p = m->n < FAID_INPUT_MAX_PARTS ? &m->part[m->n] : &scratch;
                zmq_msg_init(p);
                if (zmq_msg_recv(p, in->sock, 0) < 0) {
                    zmq_msg_close(p);
                    break;
                }
                more = zmq_msg_more(p);
                m->bytes += zmq_msg_size(p);
                nparts++;
                if (p == &scratch)
                    zmq_msg_close(p);
                else
                    m->n++;
            }
            cnt(&C.received, 1);
            cnt(&C.received_bytes, m->bytes);
            m->src = in->index;
            if (nparts > m->n) {
                /* more parts than any format has: not a message this fan-out can pass on whole */
                m->kind = K_BAD;
                faid_log_ratelimited(&rl_in, FAID_LOG_WARN, "fan",
                                     "input %s: a message of %d parts (at most %d): dropped",
                                     in->endpoint, nparts, FAID_INPUT_MAX_PARTS);
            } else {
                classify(in, m, nparts);
            }
            if (m->kind == K_BAD)
                cnt(&C.bad_input, 1);
            queue_push(in->q, m);
        }
    }
    return NULL;
}

/* ---- instances ------------------------------------------------------------------------------- */

typedef enum { I_FREE = 0, I_LIVE, I_DEAD, I_LEFT, I_REFUSED } inst_state;
static const char *const inst_state_names[] = {"free", "live", "dead", "left", "refused"};

typedef struct inst {
    inst_state state;
    uint8_t rid[MAX_RID];
    size_t rid_len;
    char name[FAID_FAN_NAME_MAX];
    char hash[17];
    int flagged;
    uint32_t gen;           /* +1 per hello: blocks of an earlier connection are not its own */
    uint64_t order;         /* join order (shards follow it) */
    uint64_t window, done0; /* window and done of the hello */
    uint64_t done, sent;    /* since the hello: frames accounted for by it, sent to it */
    int64_t last_ns;
    int in_series; /* got the open series' start */
    uint32_t shard, shards;
    /* frames sent and not yet accounted for, oldest first (a ring); out_done marks those a
     * credit named since (exactly, by id: they leave once everything older left too) */
    uint64_t *out_series, *out_frame;
    uint8_t *out_done;
    size_t out_cap, out_head, out_n, out_live;
    /* totals over the life of the fan-out */
    uint64_t frames_sent, frames_lost, messages_sent;
} inst;

typedef struct block_owner {
    int used;
    uint64_t series_id, block;
    int inst;
    uint32_t gen;
} block_owner;

typedef struct fan {
    faid_config *cfg;
    void *ctx, *router, *pub, *rep, *tee;
    fan_queue q;
    int ninputs;
    input *in[FAID_MAX_ENDPOINTS];
    inst inst[MAX_INSTANCES];
    uint64_t next_order;
    int64_t timeout_ns;
    /* the open series */
    int series_open;
    uint64_t series_id;
    fmsg *start; /* copies of its start's parts, for instances that join */
    uint32_t shards_next;
    /* several senders of the series: starts and ends per input endpoint; the end goes to the
     * instances once every input sent as many ends as starts (or fan.end_timeout after the
     * first end: `end` is the copy then sent) */
    uint64_t starts[FAID_MAX_ENDPOINTS], ends[FAID_MAX_ENDPOINTS];
    fmsg *end;
    int64_t end_ns;
    int64_t beat_ns; /* the last beat to the instances */
    /* the image ids of the open series handed to an instance, as ranges in routing order */
    uint64_t (*routed)[2];
    size_t nrouted, cap_routed;
    int routed_incomplete;
    block_owner blocks[BLOCK_MAP];
    int rr; /* next instance in turn (blocks) */
    int64_t t0_ns;
    faid_fan_http *http;
    int64_t metrics_ns; /* when the metrics text was last handed to http */
    /* fan.aggregates_from: a subscriber per instance output and its latest aggregates body */
    int naggr;
    faid_sub *aggr_sub[FAID_MAX_ENDPOINTS];
    uint8_t *aggr_body[FAID_MAX_ENDPOINTS];
    size_t aggr_len[FAID_MAX_ENDPOINTS];
    int aggr_dirty;  /* a new body came since aggr_json was built */
    char *aggr_json; /* the "aggregates" value of /api/v1/fan, rebuilt only when dirty */
} fan;

static uint64_t inst_credit(const inst *it)
{
    uint64_t allowed = it->done + it->window;
    return allowed > it->sent ? allowed - it->sent : 0;
}

static int out_push(inst *it, uint64_t series, uint64_t frame)
{
    if (it->out_n == it->out_cap) {
        size_t cap = it->out_cap ? 2 * it->out_cap : 256;
        uint64_t *s = malloc(cap * sizeof(*s)), *f = malloc(cap * sizeof(*f));
        uint8_t *dn = malloc(cap);
        if (!s || !f || !dn) {
            free(s);
            free(f);
            free(dn);
            return -1;
        }
        for (size_t k = 0; k < it->out_n; k++) {
            size_t j = (it->out_head + k) % it->out_cap;
            s[k] = it->out_series[j];
            f[k] = it->out_frame[j];
            dn[k] = it->out_done[j];
        }
        free(it->out_series);
        free(it->out_frame);
        free(it->out_done);
        it->out_series = s;
        it->out_frame = f;
        it->out_done = dn;
        it->out_cap = cap;
        it->out_head = 0;
    }
    size_t j = (it->out_head + it->out_n) % it->out_cap;
    it->out_series[j] = series;
    it->out_frame[j] = frame;
    it->out_done[j] = 0;
    it->out_n++;
    it->out_live++;
    return 0;
}

/* Drops accounted entries from the ring's head; when accounted entries behind an old
 * unaccounted one hold more than half of it, squeezes them out (the ring stays within twice the
 * frames really outstanding, plus 256). */
static void out_trim(inst *it)
{
    while (it->out_n && it->out_done[it->out_head]) {
        it->out_head = (it->out_head + 1) % it->out_cap;
        it->out_n--;
    }
    if (it->out_n <= 2 * it->out_live + 256)
        return;
    size_t w = 0;
    for (size_t k = 0; k < it->out_n; k++) {
        size_t j = (it->out_head + k) % it->out_cap;
        if (it->out_done[j])
            continue;
        size_t t = (it->out_head + w) % it->out_cap;
        it->out_series[t] = it->out_series[j];
        it->out_frame[t] = it->out_frame[j];
        it->out_done[t] = 0;
        w++;
    }
    it->out_n = w;
}

/* Publishes one `lost` message: frames of one series as [first, last] ranges. */
static void publish_lost(fan *f, const char *instance, const char *reason, uint64_t series,
                         const uint64_t (*ranges)[2], size_t nranges)
{
    size_t cap = 512 + nranges * 20; /* the name (< 128 bytes), reason, keys; 19 per range */
    uint8_t *buf = malloc(cap);
    if (!buf)
        return;
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_TYPE);
    faid_mpw_key(&w, FAID_K_LOST);
    faid_mpw_key(&w, FAID_K_SERIES);
    faid_mpw_uint(&w, series);
    faid_mpw_key(&w, FAID_K_INSTANCE);
    faid_mpw_str(&w, instance);
    faid_mpw_key(&w, FAID_K_REASON);
    faid_mpw_key(&w, reason);
    faid_mpw_key(&w, FAID_K_FRAMES);
    faid_mpw_array(&w, (uint32_t)nranges);
    for (size_t k = 0; k < nranges; k++) {
        faid_mpw_array(&w, 2);
        faid_mpw_uint(&w, ranges[k][0]);
        faid_mpw_uint(&w, ranges[k][1]);
    }
    faid_mpw_map_end(&w);
    if (faid_mpw_finish(&w, NULL) == 0) {
        zmq_send(f->pub, FAID_K_LOST, strlen(FAID_K_LOST), ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(f->pub, buf, w.len, ZMQ_DONTWAIT);
    }
    free(buf);
}

/* Reports every frame sent to it and not accounted for as lost, series by series. */
static void report_outstanding(fan *f, inst *it, const char *reason)
{
    if (!it->out_n || !it->out_live) {
        it->out_n = it->out_head = it->out_live = 0;
        return;
    }
    uint64_t(*ranges)[2] = malloc(it->out_n * sizeof(*ranges));
    size_t nr = 0;
    uint64_t series = 0, total = 0;
    for (size_t k = 0; k <= it->out_n; k++) {
        size_t j = (it->out_head + k) % (it->out_cap ? it->out_cap : 1);
        int end = k == it->out_n;
        if (!end && it->out_done[j])
            continue;
        if (!end && ranges && nr && it->out_series[j] == series &&
            it->out_frame[j] == ranges[nr - 1][1] + 1) {
            ranges[nr - 1][1] = it->out_frame[j];
            continue;
        }
        if (nr && (end || it->out_series[j] != series)) {
            publish_lost(f, it->name, reason, series, (const uint64_t(*)[2])ranges, nr);
            nr = 0;
        }
        if (end || !ranges)
            continue;
        series = it->out_series[j];
        ranges[nr][0] = ranges[nr][1] = it->out_frame[j];
        nr++;
    }
    total = it->out_live;
    faid_log_ratelimited(&rl_lost, FAID_LOG_WARN, "fan",
                         "instance %s %s: %llu frame(s) it had not accounted for reported lost",
                         it->name, reason, (unsigned long long)total);
    it->frames_lost += total;
    cnt(&C.lost, total);
    free(ranges);
    it->out_n = 0;
    it->out_head = 0;
    it->out_live = 0;
}

static void inst_end(fan *f, inst *it, inst_state st, const char *reason)
{
    if (it->state != I_LIVE)
        return;
    it->state = st;
    cnt(st == I_LEFT ? &C.left : st == I_REFUSED ? &C.refused : &C.died, 1);
    report_outstanding(f, it, reason);
    it->in_series = 0;
}

static inst *inst_by_rid(fan *f, const void *rid, size_t len)
{
    for (int i = 0; i < MAX_INSTANCES; i++)
        if (f->inst[i].state != I_FREE && f->inst[i].rid_len == len &&
            memcmp(f->inst[i].rid, rid, len) == 0)
            return &f->inst[i];
    return NULL;
}

/* Sends one link message (no detector parts) to the instance of routing id rid. */
static void send_link(fan *f, const void *rid, size_t rid_len, const faid_fan_msg *m)
{
    uint8_t buf[512];
    size_t len = 0;
    if (faid_fan_encode(m, buf, sizeof(buf), &len, NULL))
        return;
    if (zmq_send(f->router, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return;
    zmq_send(f->router, buf, len, ZMQ_DONTWAIT);
}

/* Sends a detector message to one instance with its route in front. move: the parts are moved
 * into the socket (the last receiver of them), else reference-counted copies are sent. Returns
 * 0, or -1 when the instance is gone (its connection closed). */
static int send_detector(fan *f, inst *it, fmsg *m, int move)
{
    faid_fan_msg r;
    memset(&r, 0, sizeof(r));
    r.type = FAID_FAN_ROUTE;
    snprintf(r.protocol, sizeof(r.protocol), "%s", m->protocol ? m->protocol : "");
    r.kind = m->kind == K_START   ? FAID_FAN_KIND_START
             : m->kind == K_IMAGE ? FAID_FAN_KIND_IMAGE
             : m->kind == K_END   ? FAID_FAN_KIND_END
                                  : FAID_FAN_KIND_OTHER;
    r.series_id = m->series_id;
    r.has_frame_id = m->kind == K_IMAGE;
    r.frame_id = m->frame_id;
    r.shard = it->shard;
    r.shards = it->shards;
    uint8_t buf[FAID_FAN_ROUTE_MAX];
    size_t len = 0;
    if (faid_fan_encode(&r, buf, sizeof(buf), &len, NULL))
        return -1;
    /* ROUTER_MANDATORY: a routing id whose connection is gone fails here (EHOSTUNREACH)
     * instead of the message vanishing */
    if (zmq_send(f->router, it->rid, it->rid_len, ZMQ_SNDMORE) < 0) {
        faid_log_ratelimited(&rl_send, FAID_LOG_WARN, "fan", "instance %s: %s", it->name,
                             zmq_strerror(zmq_errno()));
        return -1;
    }
    /* once the routing id is queued, the rest of the message goes with it */
    zmq_send(f->router, buf, len, ZMQ_SNDMORE);
    for (int k = 0; k < m->n; k++) {
        int flags = k + 1 < m->n ? ZMQ_SNDMORE : 0;
        if (move) {
            zmq_msg_send(&m->part[k], f->router, flags);
        } else {
            zmq_msg_t c;
            zmq_msg_init(&c);
            zmq_msg_copy(&c, &m->part[k]);
            if (zmq_msg_send(&c, f->router, flags) < 0)
                zmq_msg_close(&c);
        }
    }
    if (move) {
        /* the parts now belong to the socket: fresh empty ones keep fmsg_free valid */
        for (int k = 0; k < m->n; k++)
            zmq_msg_init(&m->part[k]);
    }
    it->messages_sent++;
    return 0;
}

static faid_ratelimit rl_tee;

/* Each detector message is offered to the tee once: an image whose send to an instance failed
 * is routed again, and was copied to the tee again (test_tee_each_message_once_when_an_instance_
 * is_gone: frame 4 twice). */
static void tee(fan *f, fmsg *m)
{
    if (!f->tee || m->teed)
        return;
    m->teed = 1;
    for (int k = 0; k < m->n; k++) {
        zmq_msg_t c;
        zmq_msg_init(&c);
        zmq_msg_copy(&c, &m->part[k]);
        if (zmq_msg_send(&c, f->tee, ZMQ_DONTWAIT | (k + 1 < m->n ? ZMQ_SNDMORE : 0)) < 0) {
            int e = zmq_errno();
            zmq_msg_close(&c);
            /* only the first part can be refused (atomic multipart delivery) */
            cnt(&C.tee_dropped, 1);
            char frame[40] = "";
            if (m->kind == K_IMAGE)
                snprintf(frame, sizeof(frame), ", frame %llu", (unsigned long long)m->frame_id);
            faid_log_ratelimited(
                &rl_tee, FAID_LOG_WARN, "fan", "tee: dropped the %s of series %llu%s: %s",
                m->kind == K_START   ? "start"
                : m->kind == K_IMAGE ? "image"
                : m->kind == K_END   ? "end"
                                     : "message",
                (unsigned long long)m->series_id, frame,
                e == EAGAIN ? "no consumer connected, or its queue is full" : zmq_strerror(e));
            return;
        }
    }
    cnt(&C.tee_sent, 1);
}

/* The open series' start to an instance that joins while it is open: it is the next shard. */
static void join_series(fan *f, inst *it)
{
    if (!f->series_open || !f->start)
        return;
    it->shard = f->shards_next++;
    it->shards = f->shards_next;
    if (send_detector(f, it, f->start, 0) == 0)
        it->in_series = 1;
}

static const char *ref_hash(const fan *f, const inst *it);

static void handle_hello(fan *f, const void *rid, size_t rid_len, const faid_fan_msg *m)
{
    inst *it = NULL;
    /* the same name again (a restarted instance, a rejoin): its slot */
    for (int i = 0; i < MAX_INSTANCES && !it; i++)
        if (f->inst[i].state != I_FREE && strcmp(f->inst[i].name, m->instance) == 0)
            it = &f->inst[i];
    if (it && it->state == I_LIVE && (it->rid_len != rid_len || memcmp(it->rid, rid, rid_len)))
        inst_end(f, it, I_DEAD, "replaced by a new connection");
    for (int i = 0; i < MAX_INSTANCES && !it; i++)
        if (f->inst[i].state == I_FREE)
            it = &f->inst[i];
    if (!it)
        for (int i = 0; i < MAX_INSTANCES && !it; i++)
            if (f->inst[i].state != I_LIVE)
                it = &f->inst[i];
    faid_fan_msg rep;
    memset(&rep, 0, sizeof(rep));
    if (!it) {
        rep.type = FAID_FAN_REFUSED;
        snprintf(rep.error, sizeof(rep.error), "the fan-out serves %d instances at most",
                 MAX_INSTANCES);
        send_link(f, rid, rid_len, &rep);
        cnt(&C.refused, 1);
        return;
    }
    /* the configuration hash of the instances already there (the unflagged live ones) */
    const char *ref = ref_hash(f, it);
    int differs = ref && strcmp(ref, m->config_hash) != 0;
    if (rid_len > MAX_RID)
        rid_len = MAX_RID;
    if (it->state == I_FREE || strcmp(it->name, m->instance) != 0) {
        free(it->out_series);
        free(it->out_frame);
        free(it->out_done);
        uint32_t gen = it->gen;
        memset(it, 0, sizeof(*it));
        it->gen = gen;
    }
    memcpy(it->rid, rid, rid_len);
    it->rid_len = rid_len;
    snprintf(it->name, sizeof(it->name), "%s", m->instance);
    snprintf(it->hash, sizeof(it->hash), "%s", m->config_hash);
    if (differs && !f->cfg->fan_config_flag) {
        it->state = I_REFUSED;
        rep.type = FAID_FAN_REFUSED;
        snprintf(rep.error, sizeof(rep.error),
                 "config_hash %s differs from the other instances' %s (fan.config_mismatch "
                 "refuse): every instance must run the same reduction",
                 m->config_hash, ref);
        faid_log_ratelimited(&rl_inst, FAID_LOG_ERROR, "fan", "instance %s refused: %s",
                             m->instance, rep.error);
        send_link(f, rid, rid_len, &rep);
        cnt(&C.refused, 1);
        return;
    }
    it->state = I_LIVE;
    it->flagged = differs;
    it->gen++;
    it->order = f->next_order++;
    it->window = m->window < MAX_WINDOW ? m->window : MAX_WINDOW;
    it->done0 = m->done;
    it->done = 0;
    it->sent = 0;
    it->out_n = 0;
    it->out_head = 0;
    it->out_live = 0;
    it->in_series = 0;
    it->last_ns = faid_now_ns();
    cnt(&C.joined, 1);
    faid_log_ratelimited(&rl_join, FAID_LOG_INFO, "fan",
                         "instance %s joined (config_hash %s%s, window %llu)", it->name, it->hash,
                         differs ? ", FLAGGED: differs from the others'" : "",
                         (unsigned long long)it->window);
    rep.type = FAID_FAN_WELCOME;
    rep.flagged = differs;
    send_link(f, rid, rid_len, &rep);
    join_series(f, it);
}

/* The configuration hash of the live, unflagged instances other than it (NULL: none). */
static const char *ref_hash(const fan *f, const inst *it)
{
    for (int i = 0; i < MAX_INSTANCES; i++)
        if (&f->inst[i] != it && f->inst[i].state == I_LIVE && !f->inst[i].flagged)
            return f->inst[i].hash;
    return NULL;
}

/* A credit's config_hash that changed (the instance reloaded): checked against the other
 * instances' again, as at its hello. Refused (fan.config_mismatch refuse): it gets nothing
 * more, the frames it had not accounted for are reported lost, it says hello again each
 * second (refused while it differs). */
static void rehash(fan *f, inst *it, const char *hash)
{
    const char *ref = ref_hash(f, it);
    int differs = ref && strcmp(ref, hash) != 0;
    char old[sizeof(it->hash)];
    snprintf(old, sizeof(old), "%s", it->hash);
    snprintf(it->hash, sizeof(it->hash), "%s", hash);
    if (!differs) {
        it->flagged = 0;
        faid_log_ratelimited(&rl_inst, FAID_LOG_INFO, "fan",
                             "instance %s reloaded: config_hash %s -> %s (as the others')",
                             it->name, old, hash);
        return;
    }
    if (f->cfg->fan_config_flag) {
        it->flagged = 1;
        faid_log_ratelimited(&rl_inst, FAID_LOG_WARN, "fan",
                             "instance %s reloaded: config_hash %s differs from the other "
                             "instances' %s: FLAGGED (fan.config_mismatch flag)",
                             it->name, hash, ref);
        return;
    }
    faid_fan_msg rep;
    memset(&rep, 0, sizeof(rep));
    rep.type = FAID_FAN_REFUSED;
    snprintf(rep.error, sizeof(rep.error),
             "config_hash %s (after a reload) differs from the other instances' %s "
             "(fan.config_mismatch refuse): every instance must run the same reduction",
             hash, ref);
    faid_log_ratelimited(&rl_inst, FAID_LOG_ERROR, "fan", "instance %s refused: %s", it->name,
                         rep.error);
    inst_end(f, it, I_REFUSED, "refused after a reload (config_hash differs)");
    send_link(f, it->rid, it->rid_len, &rep);
}

static void handle_credit(fan *f, inst *it, const faid_fan_msg *m)
{
    uint64_t done = m->done >= it->done0 ? m->done - it->done0 : 0;
    if (done > it->sent) /* never more than it was sent: credit stays within its window */
        done = it->sent;
    if (m->has_accounted) {
        /* exactly the frames named: whatever order its devices finished them in */
        for (size_t k = 0; k < it->out_n && it->out_live; k++) {
            size_t j = (it->out_head + k) % it->out_cap;
            if (it->out_done[j])
                continue;
            for (uint32_t r = 0; r < m->naccounted; r++)
                if (it->out_series[j] == m->accounted[r][0] &&
                    it->out_frame[j] >= m->accounted[r][1] &&
                    it->out_frame[j] <= m->accounted[r][2]) {
                    it->out_done[j] = 1;
                    it->out_live--;
                    break;
                }
        }
        out_trim(it);
    } else {
        /* a peer that names no ids: the oldest leave first (by count) */
        uint64_t newly = done > it->done ? done - it->done : 0;
        while (newly && it->out_n) {
            if (!it->out_done[it->out_head]) {
                it->out_live--;
                newly--;
            }
            it->out_head = (it->out_head + 1) % it->out_cap;
            it->out_n--;
        }
        out_trim(it);
    }
    if (done > it->done)
        it->done = done;
    it->window = m->window < MAX_WINDOW ? m->window : MAX_WINDOW;
    it->last_ns = faid_now_ns();
    if (m->config_hash[0] && strcmp(m->config_hash, it->hash) != 0)
        rehash(f, it, m->config_hash);
}

static void handle_router(fan *f)
{
    for (;;) {
        zmq_msg_t rid, body;
        zmq_msg_init(&rid);
        if (zmq_msg_recv(&rid, f->router, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&rid);
            return;
        }
        zmq_msg_init(&body);
        int ok = zmq_msg_more(&rid) && zmq_msg_recv(&body, f->router, 0) >= 0;
        int more = ok && zmq_msg_more(&body);
        while (more) { /* a link message is one part: the rest is ignored */
            zmq_msg_t scratch;
            zmq_msg_init(&scratch);
            if (zmq_msg_recv(&scratch, f->router, 0) < 0) {
                zmq_msg_close(&scratch);
                break;
            }
            more = zmq_msg_more(&scratch);
            zmq_msg_close(&scratch);
        }
        faid_fan_msg m;
        faid_diag d;
        faid_diag_clear(&d);
        if (!ok || faid_fan_decode(zmq_msg_data(&body), zmq_msg_size(&body), &m, &d) != 0) {
            faid_log_ratelimited(&rl_inst, FAID_LOG_WARN, "fan", "instance link: %s",
                                 ok ? d.msg : "a message without a body");
            zmq_msg_close(&rid);
            zmq_msg_close(&body);
            continue;
        }
        const void *r = zmq_msg_data(&rid);
        size_t rl = zmq_msg_size(&rid);
        inst *it = inst_by_rid(f, r, rl);
        switch (m.type) {
        case FAID_FAN_HELLO:
            handle_hello(f, r, rl, &m);
            break;
        case FAID_FAN_CREDIT:
            if (it && it->state == I_LIVE) {
                handle_credit(f, it, &m);
            } else if (!it || it->state == I_DEAD) {
                /* counted out (silent too long) or unknown here (the fan-out restarted) */
                faid_fan_msg rj = {.type = FAID_FAN_REJOIN};
                send_link(f, r, rl, &rj);
            }
            break;
        case FAID_FAN_BYE:
            if (it && it->state == I_LIVE) {
                handle_credit(f, it, &m);
                faid_log_ratelimited(&rl_join, FAID_LOG_INFO, "fan", "instance %s left", it->name);
                inst_end(f, it, I_LEFT, "left");
            }
            break;
        default:
            faid_log_ratelimited(&rl_inst, FAID_LOG_WARN, "fan",
                                 "instance link: a %s message from an instance: ignored",
                                 faid_fan_type_name(m.type));
            break;
        }
        zmq_msg_close(&rid);
        zmq_msg_close(&body);
    }
}

/* ---- routing --------------------------------------------------------------------------------- */

static int live_count(const fan *f)
{
    int n = 0;
    for (int i = 0; i < MAX_INSTANCES; i++)
        n += f->inst[i].state == I_LIVE;
    return n;
}

/* The instance an image goes to, or -1 when none can take it now (the image waits). */
static int pick(fan *f, const fmsg *m)
{
    if (f->cfg->fan_policy == 1) { /* credit: the most free credit */
        int best = -1;
        uint64_t bc = 0;
        for (int i = 0; i < MAX_INSTANCES; i++) {
            uint64_t c = f->inst[i].state == I_LIVE ? inst_credit(&f->inst[i]) : 0;
            if (c > bc) {
                bc = c;
                best = i;
            }
        }
        return best;
    }
    uint64_t block = m->frame_id / (uint64_t)f->cfg->fan_block;
    block_owner *b = &f->blocks[block % BLOCK_MAP];
    if (!(b->used && b->series_id == m->series_id && b->block == block &&
          f->inst[b->inst].state == I_LIVE && f->inst[b->inst].gen == b->gen)) {
        /* a new block (or its owner is gone): the next live instance in turn */
        int chosen = -1;
        for (int k = 0; k < MAX_INSTANCES && chosen < 0; k++) {
            int i = (f->rr + k) % MAX_INSTANCES;
            if (f->inst[i].state == I_LIVE)
                chosen = i;
        }
        if (chosen < 0)
            return -1;
        f->rr = (chosen + 1) % MAX_INSTANCES;
        *b = (block_owner){1, m->series_id, block, chosen, f->inst[chosen].gen};
    }
    return inst_credit(&f->inst[b->inst]) > 0 ? b->inst : -1;
}

/* A copy of m whose parts share m's bytes (reference-counted), or NULL. */
static fmsg *fmsg_copy(const fmsg *m)
{
    fmsg *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    *c = *m;
    c->next = NULL;
    for (int k = 0; k < m->n; k++) {
        zmq_msg_init(&c->part[k]);
        zmq_msg_copy(&c->part[k], (zmq_msg_t *)&m->part[k]);
    }
    return c;
}

static void routed_note(fan *f, uint64_t frame)
{
    if (f->nrouted && f->routed[f->nrouted - 1][1] + 1 == frame) {
        f->routed[f->nrouted - 1][1] = frame;
        return;
    }
    if (f->nrouted == f->cap_routed) {
        size_t cap = f->cap_routed ? 2 * f->cap_routed : 256;
        void *p = cap <= MAX_ROUTED ? realloc(f->routed, cap * sizeof(*f->routed)) : NULL;
        if (!p) {
            f->routed_incomplete = 1;
            return;
        }
        f->routed = p;
        f->cap_routed = cap;
    }
    f->routed[f->nrouted][0] = f->routed[f->nrouted][1] = frame;
    f->nrouted++;
}

static int range_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The `routed` report of the open series (its end passed on, or superseded): its ids sorted and
 * joined. */
static void publish_routed(fan *f)
{
    qsort(f->routed, f->nrouted, sizeof(*f->routed), range_cmp);
    size_t n = 0;
    for (size_t k = 0; k < f->nrouted; k++) {
        if (n && f->routed[k][0] <= f->routed[n - 1][1] + 1) {
            if (f->routed[k][1] > f->routed[n - 1][1])
                f->routed[n - 1][1] = f->routed[k][1];
            continue;
        }
        f->routed[n][0] = f->routed[k][0];
        f->routed[n][1] = f->routed[k][1];
        n++;
    }
    size_t cap = 128 + n * 20;
    uint8_t *buf = malloc(cap);
    if (buf) {
        faid_mpw w;
        faid_mpw_init(&w, buf, cap);
        faid_mpw_map_begin(&w);
        faid_mpw_key(&w, FAID_K_TYPE);
        faid_mpw_key(&w, FAID_K_ROUTED);
        faid_mpw_key(&w, FAID_K_SERIES);
        faid_mpw_uint(&w, f->series_id);
        faid_mpw_key(&w, FAID_K_FRAMES);
        faid_mpw_array(&w, (uint32_t)n);
        for (size_t k = 0; k < n; k++) {
            faid_mpw_array(&w, 2);
            faid_mpw_uint(&w, f->routed[k][0]);
            faid_mpw_uint(&w, f->routed[k][1]);
        }
        faid_mpw_key(&w, FAID_K_INCOMPLETE);
        faid_mpw_bool(&w, f->routed_incomplete);
        faid_mpw_map_end(&w);
        if (faid_mpw_finish(&w, NULL) == 0) {
            zmq_send(f->pub, FAID_K_ROUTED, strlen(FAID_K_ROUTED), ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(f->pub, buf, w.len, ZMQ_DONTWAIT);
        }
        free(buf);
    }
    f->nrouted = 0;
    f->routed_incomplete = 0;
}

static void open_series(fan *f, fmsg *m)
{
    if (f->series_open)
        publish_routed(f); /* superseded */
    fmsg_free(&f->start);
    f->start = fmsg_copy(m);
    fmsg_free(&f->end);
    memset(f->starts, 0, sizeof(f->starts));
    memset(f->ends, 0, sizeof(f->ends));
    f->starts[m->src] = 1;
    f->series_open = 1;
    f->series_id = m->series_id;
    memset(f->blocks, 0, sizeof(f->blocks));
    /* shards in join order */
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        int idx = 0;
        uint64_t last = 0;
        for (;;) {
            int next = -1;
            for (int i = 0; i < MAX_INSTANCES; i++) {
                inst *it = &f->inst[i];
                if (it->state != I_LIVE || (idx && it->order <= last))
                    continue;
                if (next < 0 || it->order < f->inst[next].order)
                    next = i;
            }
            if (next < 0)
                break;
            last = f->inst[next].order;
            if (pass == 0)
                n++;
            else {
                f->inst[next].shard = (uint32_t)idx;
                f->inst[next].shards = (uint32_t)n;
            }
            idx++;
        }
    }
    f->shards_next = (uint32_t)n;
}

/* Done with the head of the router's list: its bytes are counted free at the end of route(). */
static fmsg *route_next(fmsg *m, size_t *freed)
{
    fmsg *next = m->next;
    *freed += m->bytes;
    fmsg_free(&m);
    return next;
}

/* Ends of the open series still to come: starts minus ends over its inputs (status and
 * /metrics). */
static uint64_t ends_awaited(const fan *f)
{
    uint64_t awaited = 0;
    for (int i = 0; f->series_open && i < FAID_MAX_ENDPOINTS; i++)
        awaited += f->starts[i] > f->ends[i] ? f->starts[i] - f->ends[i] : 0;
    return awaited;
}

/* Every input that started the open series sent as many ends as starts. */
static int all_ended(const fan *f)
{
    for (int i = 0; i < FAID_MAX_ENDPOINTS; i++)
        if (f->ends[i] < f->starts[i])
            return 0;
    return 1;
}

/* m (start, end, other) to every live instance; an end of the open series closes it. */
static void broadcast(fan *f, fmsg *m)
{
    for (int i = 0; i < MAX_INSTANCES; i++) {
        inst *it = &f->inst[i];
        if (it->state != I_LIVE)
            continue;
        if (m->kind == K_START)
            it->in_series = 1;
        if (send_detector(f, it, m, 0) != 0)
            inst_end(f, it, I_DEAD, "gone (connection closed)");
    }
    cnt(&C.broadcast, 1);
    if (m->kind == K_END && m->series_id == f->series_id) {
        if (f->series_open)
            publish_routed(f);
        f->series_open = 0;
        fmsg_free(&f->start);
        fmsg_free(&f->end);
        for (int i = 0; i < MAX_INSTANCES; i++)
            f->inst[i].in_series = 0;
    }
}

/* Routes what the queue holds until it is empty or its head must wait for credit. The list is
 * taken out of the queue under one lock, and what waits is put back in front of what came
 * meanwhile under one more, with the bytes routed: two lock round trips per wake-up instead of
 * two per message (a peek and a pop, each contending with the input threads' pushes). */
static void route(fan *f)
{
    pthread_mutex_lock(&f->q.mu);
    fmsg *m = f->q.head, *tail = f->q.tail;
    f->q.head = f->q.tail = NULL;
    pthread_mutex_unlock(&f->q.mu);
    if (!m)
        return;
    size_t freed = 0;
    while (m) {
        if (m->kind == K_BAD) {
            tee(f, m);
            m = route_next(m, &freed);
            continue;
        }
        if (m->kind == K_IMAGE) {
            int i = pick(f, m);
            if (i < 0)
                break; /* waits for credit or an instance (the buffer bounds the wait) */
            inst *it = &f->inst[i];
            tee(f, m);
            if (send_detector(f, it, m, 1) != 0) {
                inst_end(f, it, I_DEAD, "gone (connection closed)");
                continue; /* the image goes to another instance */
            }
            it->sent++;
            it->frames_sent++;
            if (f->series_open && m->series_id == f->series_id)
                routed_note(f, m->frame_id);
            if (out_push(it, m->series_id, m->frame_id) != 0)
                FAID_WARN("fan", "out of memory for the frames of instance %s", it->name);
            cnt(&C.routed, 1);
            m = route_next(m, &freed);
            continue;
        }
        if (m->kind == K_START && f->series_open && m->series_id == f->series_id) {
            /* another input (or sender) starting the open series: it joins the series, whose
             * start the instances have */
            f->starts[m->src]++;
            tee(f, m);
            m = route_next(m, &freed);
            continue;
        }
        if (m->kind == K_END && f->series_open && m->series_id == f->series_id) {
            f->ends[m->src]++;
            if (!all_ended(f)) {
                /* another input has yet to end it: the end waits (fan.end_timeout) */
                if (!f->end) {
                    f->end = fmsg_copy(m);
                    f->end_ns = faid_now_ns();
                }
                tee(f, m);
                m = route_next(m, &freed);
                continue;
            }
        }
        /* start, end and the format's other messages: every instance */
        if (m->kind == K_START)
            open_series(f, m);
        tee(f, m);
        broadcast(f, m);
        m = route_next(m, &freed);
    }
    pthread_mutex_lock(&f->q.mu);
    if (m) { /* m..tail wait: in front of what the inputs queued meanwhile */
        tail->next = f->q.head;
        if (!f->q.head)
            f->q.tail = tail;
        f->q.head = m;
    }
    f->q.bytes -= freed;
    atomic_store(&C.queued_bytes, f->q.bytes);
    pthread_mutex_unlock(&f->q.mu);
}

/* Instances silent for fan.instance_timeout are counted out; images the buffer dropped are
 * reported. */
static void housekeeping(fan *f)
{
    int64_t now = faid_now_ns();
    if (f->end && f->series_open && now - f->end_ns > (int64_t)(f->cfg->fan_end_timeout * 1e9)) {
        char who[512] = "";
        size_t n = 0;
        for (int i = 0; i < f->ninputs && n < sizeof(who); i++)
            if (f->ends[i] < f->starts[i]) {
                int w = snprintf(who + n, sizeof(who) - n, "%s%s (%llu start(s), %llu end(s))",
                                 n ? ", " : "", f->in[i]->endpoint,
                                 (unsigned long long)f->starts[i], (unsigned long long)f->ends[i]);
                if (w < 0)
                    break;
                n += (size_t)w;
            }
        FAID_WARN("fan",
                  "series %llu: no end from input %s within fan.end_timeout (%.1f s) of the "
                  "first end: ended without it",
                  (unsigned long long)f->series_id, who, f->cfg->fan_end_timeout);
        fmsg *e = f->end;
        f->end = NULL;
        broadcast(f, e);
        fmsg_free(&e);
    }
    if (now - f->beat_ns > 100000000ll) {
        /* the beat: an instance that hears nothing for fan.instance_timeout takes the fan-out
         * for gone and ends its open series */
        faid_fan_msg b = {.type = FAID_FAN_BEAT};
        for (int i = 0; i < MAX_INSTANCES; i++)
            if (f->inst[i].state == I_LIVE)
                send_link(f, f->inst[i].rid, f->inst[i].rid_len, &b);
        f->beat_ns = now;
    }
    for (int i = 0; i < MAX_INSTANCES; i++) {
        inst *it = &f->inst[i];
        if (it->state == I_LIVE && now - it->last_ns > f->timeout_ns) {
            faid_log_ratelimited(&rl_inst, FAID_LOG_WARN, "fan",
                                 "instance %s silent for %.1f s: counted out", it->name,
                                 (double)(now - it->last_ns) / 1e9);
            inst_end(f, it, I_DEAD, "timed out");
        }
    }
    drop_range drops[MAX_DROPS];
    int n;
    pthread_mutex_lock(&f->q.mu);
    n = f->q.ndrops;
    memcpy(drops, f->q.drops, (size_t)n * sizeof(drops[0]));
    f->q.ndrops = 0;
    pthread_mutex_unlock(&f->q.mu);
    for (int k = 0; k < n;) {
        int j = k;
        uint64_t r[MAX_DROPS][2];
        size_t nr = 0;
        while (j < n && drops[j].series_id == drops[k].series_id) {
            r[nr][0] = drops[j].first;
            r[nr][1] = drops[j].last;
            nr++;
            j++;
        }
        publish_lost(f, "", "buffer full", drops[k].series_id, (const uint64_t(*)[2])r, nr);
        k = j;
    }
}

/* ---- status ---------------------------------------------------------------------------------- */

static void write_status(fan *f, faid_mpw *w)
{
    faid_mpw_key(w, FAID_K_SOFTWARE_VERSION);
    faid_mpw_str(w, FAID_VERSION);
    faid_mpw_key(w, FAID_K_UPTIME_S);
    faid_mpw_f64(w, (double)(faid_now_ns() - f->t0_ns) / 1e9);
    faid_mpw_key(w, FAID_K_STATE);
    faid_mpw_key(w, f->series_open ? "running" : "idle");
    faid_mpw_key(w, FAID_K_SERIES_ID);
    faid_mpw_uint(w, f->series_id);
    faid_mpw_key(w, FAID_K_POLICY);
    faid_mpw_key(w, f->cfg->fan_policy ? "credit" : "blocks");
    faid_mpw_key(w, FAID_K_ENDS_AWAITED);
    faid_mpw_uint(w, ends_awaited(f));
    faid_mpw_key(w, FAID_K_COUNTERS);
    struct {
        const char *k;
        atomic_uint_fast64_t *v;
    } rows[] = {
        {"received", &C.received},
        {"received_bytes", &C.received_bytes},
        {"bad_input", &C.bad_input},
        {"routed", &C.routed},
        {"broadcast", &C.broadcast},
        {"dropped", &C.dropped},
        {"lost", &C.lost},
        {"tee_sent", &C.tee_sent},
        {"tee_dropped", &C.tee_dropped},
        {"joined", &C.joined},
        {"left", &C.left},
        {"died", &C.died},
        {"refused", &C.refused},
        {"queued_bytes", &C.queued_bytes},
    };
    faid_mpw_map(w, (uint32_t)(sizeof(rows) / sizeof(rows[0])));
    for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
        faid_mpw_key(w, rows[k].k);
        faid_mpw_uint(w, get(rows[k].v));
    }
    int n = 0;
    for (int i = 0; i < MAX_INSTANCES; i++)
        n += f->inst[i].state != I_FREE;
    faid_mpw_key(w, FAID_K_INSTANCES);
    faid_mpw_array(w, (uint32_t)n);
    for (int i = 0; i < MAX_INSTANCES; i++) {
        inst *it = &f->inst[i];
        if (it->state == I_FREE)
            continue;
        faid_mpw_map_begin(w);
        faid_mpw_key(w, FAID_K_INSTANCE);
        faid_mpw_str(w, it->name);
        faid_mpw_key(w, FAID_K_STATE);
        faid_mpw_key(w, inst_state_names[it->state]);
        faid_mpw_key(w, FAID_K_CONFIG_HASH);
        faid_mpw_str(w, it->hash);
        faid_mpw_key(w, FAID_K_FLAGGED);
        faid_mpw_bool(w, it->flagged);
        faid_mpw_key(w, FAID_K_CREDIT);
        faid_mpw_uint(w, it->state == I_LIVE ? inst_credit(it) : 0);
        faid_mpw_key(w, FAID_K_WINDOW);
        faid_mpw_uint(w, it->window);
        faid_mpw_key(w, FAID_K_SENT);
        faid_mpw_uint(w, it->frames_sent);
        faid_mpw_key(w, FAID_K_LOST);
        faid_mpw_uint(w, it->frames_lost);
        faid_mpw_key(w, FAID_K_SHARD);
        faid_mpw_uint(w, it->shard);
        faid_mpw_key(w, FAID_K_SHARDS);
        faid_mpw_uint(w, it->shards);
        faid_mpw_map_end(w);
    }
}

static void handle_control(fan *f)
{
    zmq_msg_t req;
    zmq_msg_init(&req);
    if (zmq_msg_recv(&req, f->rep, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&req);
        return;
    }
    int more = zmq_msg_more(&req);
    while (more) {
        zmq_msg_t scratch;
        zmq_msg_init(&scratch);
        if (zmq_msg_recv(&scratch, f->rep, 0) < 0) {
            zmq_msg_close(&scratch);
            break;
        }
        more = zmq_msg_more(&scratch);
        zmq_msg_close(&scratch);
    }
    faid_ctl_request q;
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_proto_decode_request(zmq_msg_data(&req), zmq_msg_size(&req), &q, &d);
    zmq_msg_close(&req);
    size_t cap = 64 * 1024;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        zmq_send(f->rep, "", 0, 0);
        return;
    }
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_OK);
    int ok = rc == 0 && (q.cmd == FAID_CTL_STATUS || q.cmd == FAID_CTL_PING);
    faid_mpw_bool(&w, ok);
    if (rc == 0) {
        faid_mpw_key(&w, FAID_K_CMD);
        faid_mpw_key(&w, faid_ctl_cmd_name(q.cmd));
    }
    if (!ok) {
        faid_mpw_key(&w, FAID_K_ERROR);
        if (rc)
            faid_mpw_str(&w, d.msg);
        else
            faid_mpw_key(&w, "faid-fan answers status and ping only");
    } else if (q.cmd == FAID_CTL_PING) {
        faid_mpw_key(&w, FAID_K_SOFTWARE_VERSION);
        faid_mpw_str(&w, FAID_VERSION);
    } else {
        write_status(f, &w);
    }
    faid_mpw_map_end(&w);
    if (faid_mpw_finish(&w, NULL) != 0) {
        faid_mpw_init(&w, buf, cap);
        faid_mpw_map(&w, 2);
        faid_mpw_key(&w, FAID_K_OK);
        faid_mpw_bool(&w, 0);
        faid_mpw_key(&w, FAID_K_ERROR);
        faid_mpw_key(&w, "reply too large");
    }
    zmq_send(f->rep, buf, w.len, 0);
    free(buf);
}

/* ---- metrics (fan.http_endpoint) ------------------------------------------------------------ */

static int metrics_text(fan *f, char *out, size_t cap)
{
    size_t n = 0;
#define M(name, help, type, value)                                                                 \
    do {                                                                                           \
        int w = snprintf(out + n, cap - n,                                                         \
                         "# HELP faid_fan_%s %s\n# TYPE faid_fan_%s %s\n"                          \
                         "faid_fan_%s %llu\n",                                                     \
                         name, help, name, type, name, (unsigned long long)(value));               \
        if (w < 0 || (size_t)w >= cap - n)                                                         \
            return -1;                                                                             \
        n += (size_t)w;                                                                            \
    } while (0)
    M("received_total", "Detector messages received.", "counter", get(&C.received));
    M("received_bytes_total", "Bytes of detector messages received.", "counter",
      get(&C.received_bytes));
    M("bad_input_total", "Messages whose header could not be read (tee only).", "counter",
      get(&C.bad_input));
    M("routed_total", "Images handed to an instance.", "counter", get(&C.routed));
    M("broadcast_total", "Start, end and other messages sent to every instance.", "counter",
      get(&C.broadcast));
    M("dropped_total", "Images dropped because fan.buffer_bytes was full.", "counter",
      get(&C.dropped));
    M("lost_total", "Frames handed to an instance that died or left before accounting for them.",
      "counter", get(&C.lost));
    M("tee_sent_total", "Messages copied to fan.tee_endpoint.", "counter", get(&C.tee_sent));
    M("tee_dropped_total", "Messages the tee consumer could not take.", "counter",
      get(&C.tee_dropped));
    M("queued_bytes", "Bytes waiting in the fan-out's buffer.", "gauge", get(&C.queued_bytes));
    M("instances_live", "Instances receiving frames.", "gauge", (uint64_t)live_count(f));
    M("ends_awaited", "Ends of the open series still to come from its senders (fan.end_timeout).",
      "gauge", ends_awaited(f));
#undef M
    for (int i = 0; i < MAX_INSTANCES; i++) {
        inst *it = &f->inst[i];
        if (it->state == I_FREE)
            continue;
        int w =
            snprintf(out + n, cap - n,
                     "faid_fan_instance_sent_total{instance=\"%s\",state=\"%s\"} %llu\n"
                     "faid_fan_instance_lost_total{instance=\"%s\",state=\"%s\"} %llu\n",
                     it->name, inst_state_names[it->state], (unsigned long long)it->frames_sent,
                     it->name, inst_state_names[it->state], (unsigned long long)it->frames_lost);
        if (w < 0 || (size_t)w >= cap - n)
            return -1;
        n += (size_t)w;
    }
    return (int)n;
}

/* ---- the instances' aggregates (fan.aggregates_from) ----------------------------------------- */

/* Takes what the instances' outputs sent (at most 64 messages each per pass, so that a busy
 * output cannot hold up routing) and keeps each one's latest aggregates body, checked by the
 * parser faidctl aggregates uses (faid_aggr_add) so that a bad one never reaches the sum. */
static void aggr_poll(fan *f)
{
    for (int i = 0; i < f->naggr; i++) {
        for (int k = 0; k < 64; k++) {
            faid_diag d;
            faid_diag_clear(&d);
            faid_sub_msg msg;
            int rc = faid_sub_recv(f->aggr_sub[i], 0, &msg, &d);
            if (rc == FAID_ETIMEOUT)
                break;
            if (rc == 0 && msg.m.type != FAID_OUT_AGGREGATES)
                continue;
            faid_aggr_sum one = {0};
            if (rc == 0)
                rc = faid_aggr_add(&one, msg.body, msg.len, &d);
            faid_aggr_clear(&one);
            uint8_t *copy = rc ? NULL : malloc(msg.len ? msg.len : 1);
            if (!copy) {
                faid_log_ratelimited(&rl_aggr, FAID_LOG_WARN, "fan", "aggregates of %s: %s",
                                     faid_sub_endpoint(f->aggr_sub[i]),
                                     rc ? d.msg : "out of memory");
                if (rc == FAID_EZMQ)
                    break;
                continue;
            }
            memcpy(copy, msg.body, msg.len);
            free(f->aggr_body[i]);
            f->aggr_body[i] = copy;
            f->aggr_len[i] = msg.len;
            f->aggr_dirty = 1;
        }
    }
}

typedef struct jbuf {
    char *p;
    size_t n, cap;
    int oom;
} jbuf;

static void jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jb_printf(jbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)w < b->cap - b->n) {
            b->n += (size_t)w;
            return;
        }
        size_t cap = 2 * b->cap + (size_t)w;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* A JSON string of a peer's name (an instance's hello: UTF-8 without NUL, faid_fan_decode
 * checks that, but any other character): quotes, backslashes and control characters escaped, so
 * that the answer stays JSON a browser parses whatever a peer said. */
static void jb_str(jbuf *b, const char *str)
{
    jb_printf(b, "\"");
    for (const unsigned char *s = (const unsigned char *)str; *s; s++) {
        if (*s == '"' || *s == '\\')
            jb_printf(b, "\\%c", *s);
        else if (*s < 0x20 || *s == 0x7f)
            jb_printf(b, "\\u%04x", *s);
        else
            jb_printf(b, "%c", *s);
    }
    jb_printf(b, "\"");
}

/* The side of the powder image in the JSON: the pattern summed in at most 64 x 64 blocks, so the
 * answer stays small (<= 4,096 numbers) whatever the detector. */
#define POWDER_SIDE 64

/* The JSON of GET /api/v1/fan: the fan-out's counters, its instances with their state, and the
 * instances' latest aggregates summed (null before any came or without fan.aggregates_from). */
static void api_json(fan *f, jbuf *b)
{
    jb_printf(b,
              "{\"fan\":true,\"counters\":{\"received\":%llu,\"routed\":%llu,\"dropped\":%llu,"
              "\"lost\":%llu},\"instances\":[",
              (unsigned long long)get(&C.received), (unsigned long long)get(&C.routed),
              (unsigned long long)get(&C.dropped), (unsigned long long)get(&C.lost));
    int first = 1;
    for (int i = 0; i < MAX_INSTANCES; i++) {
        inst *it = &f->inst[i];
        if (it->state == I_FREE)
            continue;
        jb_printf(b, "%s{\"name\":", first ? "" : ",");
        jb_str(b, it->name);
        jb_printf(b, ",\"state\":\"%s\",\"flagged\":%s,\"sent\":%llu,\"lost\":%llu}",
                  inst_state_names[it->state], it->flagged ? "true" : "false",
                  (unsigned long long)it->frames_sent, (unsigned long long)it->frames_lost);
        first = 0;
    }
    jb_printf(b, "],\"aggregates_from\":%d,\"aggregates\":%s}", f->naggr,
              f->aggr_json ? f->aggr_json : "null");
}

/* The "aggregates" value of /api/v1/fan: the instances' latest aggregates summed, null before any
 * came. Summed again only when a new message came (the powder pattern of a 4M detector is 32 MB
 * per instance to decode: not twice a second on the router's thread for nothing). */
static void aggr_json_build(fan *f, jbuf *b)
{
    faid_aggr_sum sum = {0};
    faid_diag d;
    faid_diag_clear(&d);
    for (int i = 0; i < f->naggr; i++)
        if (f->aggr_body[i] && faid_aggr_add(&sum, f->aggr_body[i], f->aggr_len[i], &d) != 0)
            faid_log_ratelimited(&rl_aggr, FAID_LOG_WARN, "fan",
                                 "aggregates of %s left out of the sum: %s",
                                 faid_sub_endpoint(f->aggr_sub[i]), d.msg);
    if (!sum.instances) {
        faid_aggr_clear(&sum);
        jb_printf(b, "null");
        return;
    }
    jb_printf(b,
              "{\"instances\":%d,\"frames\":%llu,\"hits\":%llu,\"peaks\":%llu,\"hit_rate\":%.9g,"
              "\"hit_rate_window_frames\":%llu,\"num_peaks_bin_width\":%llu,"
              "\"num_peaks_histogram\":[",
              sum.instances, (unsigned long long)sum.frames, (unsigned long long)sum.hits,
              (unsigned long long)sum.peaks, sum.hit_rate, (unsigned long long)sum.window_frames,
              (unsigned long long)sum.bin_width);
    for (uint64_t k = 0; k < sum.nbins; k++)
        jb_printf(b, "%s%llu", k ? "," : "", (unsigned long long)sum.histogram[k]);
    jb_printf(b, "],\"powder_shape\":[%llu,%llu],\"powder\":", (unsigned long long)sum.rows,
              (unsigned long long)sum.cols);
    if (!sum.powder || !sum.rows || !sum.cols) {
        jb_printf(b, "null}");
        faid_aggr_clear(&sum);
        return;
    }
    uint64_t r2 = sum.rows < POWDER_SIDE ? sum.rows : POWDER_SIDE;
    uint64_t c2 = sum.cols < POWDER_SIDE ? sum.cols : POWDER_SIDE;
    uint64_t cells[POWDER_SIDE * POWDER_SIDE] = {0}, total = 0;
    for (uint64_t y = 0; y < sum.rows; y++)
        for (uint64_t x = 0; x < sum.cols; x++) {
            uint64_t v = sum.powder[y * sum.cols + x];
            cells[(y * r2 / sum.rows) * c2 + x * c2 / sum.cols] += v;
            total += v;
        }
    jb_printf(b, "{\"rows\":%llu,\"cols\":%llu,\"total\":%llu,\"v\":[", (unsigned long long)r2,
              (unsigned long long)c2, (unsigned long long)total);
    for (uint64_t k = 0; k < r2 * c2; k++)
        jb_printf(b, "%s%llu", k ? "," : "", (unsigned long long)cells[k]);
    jb_printf(b, "]}}");
    faid_aggr_clear(&sum);
}

/* The metrics text for the HTTP server, twice a second (built here, on the router's thread). */
static void metrics_update(fan *f)
{
    int64_t now = faid_now_ns();
    if (!f->http || now - f->metrics_ns < 500000000ll)
        return;
    f->metrics_ns = now;
    size_t cap = 64 * 1024;
    char *buf = malloc(cap);
    if (!buf)
        return;
    int n = metrics_text(f, buf, cap);
    if (n >= 0)
        faid_fan_http_set(f->http, buf, (size_t)n);
    free(buf);
    if (f->aggr_dirty) {
        jbuf a = {.cap = 16 * 1024};
        if ((a.p = malloc(a.cap))) {
            aggr_json_build(f, &a);
            if (!a.oom) {
                free(f->aggr_json);
                f->aggr_json = a.p;
                f->aggr_dirty = 0;
            } else {
                free(a.p);
            }
        }
    }
    jbuf b = {.cap = 16 * 1024};
    if (!(b.p = malloc(b.cap)))
        return;
    api_json(f, &b);
    if (!b.oom)
        faid_fan_http_set_api(f->http, b.p, b.n);
    free(b.p);
}

/* ---- start and main loop --------------------------------------------------------------------- */

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, 1);
}

static void *bound(fan *f, int type, const char *ep, const char *what, faid_diag *d)
{
    void *s = zmq_socket(f->ctx, type);
    if (!s) {
        faid_fail(d, FAID_EZMQ, "%s socket: %s", what, zmq_strerror(zmq_errno()));
        return NULL;
    }
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
    int64_t max = type == ZMQ_ROUTER || type == ZMQ_REP ? 64 * 1024 : -1;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max));
    if (zmq_bind(s, ep) != 0) {
        faid_fail(d, FAID_EZMQ, "%s socket: cannot bind %s: %s", what, ep,
                  zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    FAID_INFO("fan", "%s: bound to %s", what, ep);
    return s;
}

static int fan_start(fan *f, faid_diag *d)
{
    const faid_config *cfg = f->cfg;
    faid_input_protocol proto;
    if (strcmp(cfg->input_protocol, "fan") == 0 ||
        faid_input_protocol_parse(cfg->input_protocol, &proto) != 0)
        return faid_fail(d, FAID_ECONFIG,
                         "input.protocol: \"%s\" is not a detector format faid-fan reads (auto, "
                         "native, dectris-v1, dectris-v2)",
                         cfg->input_protocol);
    f->timeout_ns = (int64_t)(cfg->fan_instance_timeout * 1e9);
    f->t0_ns = faid_now_ns();
    pthread_mutex_init(&f->q.mu, NULL);
    f->q.budget = (size_t)cfg->fan_buffer_bytes;
    f->q.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->q.efd < 0)
        return faid_fail(d, FAID_EIO, "eventfd: %s", strerror(errno));
    f->ctx = zmq_ctx_new();
    if (!f->ctx)
        return faid_fail(d, FAID_EZMQ, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    /* fan.io_threads: each instance connection is served by one of these threads, which writes
     * every byte sent to it; with ZeroMQ's default of one, that one thread wrote the whole
     * stream to every instance (and the tee) while the input's thread read it (perf of faid-fan
     * on 2 cores, 1000 EIGER 4M frames: the two I/O threads 93-96 % of its samples, each one
     * kernel copy of every byte; docs/fan-out.md, Threads and memory) */
    if (zmq_ctx_set(f->ctx, ZMQ_IO_THREADS, cfg->fan_io_threads) != 0)
        return faid_fail(d, FAID_EZMQ, "fan.io_threads %d: %s", cfg->fan_io_threads,
                         zmq_strerror(zmq_errno()));
    if (!(f->router = bound(f, ZMQ_ROUTER, cfg->fan_instances_endpoint, "instances", d)))
        return d->code;
    int on = 1, hwm = 1000000;
    zmq_setsockopt(f->router, ZMQ_ROUTER_MANDATORY, &on, sizeof(on));
    /* credit bounds the images an instance is sent; starts and ends are few */
    zmq_setsockopt(f->router, ZMQ_SNDHWM, &hwm, sizeof(hwm));
    if (!(f->pub = bound(f, ZMQ_PUB, cfg->fan_output_endpoint, "output", d)))
        return d->code;
    if (!(f->rep = bound(f, ZMQ_REP, cfg->fan_control_endpoint, "control", d)))
        return d->code;
    if (cfg->fan_tee_endpoint[0] && !(f->tee = bound(f, cfg->fan_tee_pub ? ZMQ_PUB : ZMQ_PUSH,
                                                     cfg->fan_tee_endpoint, "tee", d)))
        return d->code;
    if (cfg->fan_http_endpoint[0] && !(f->http = faid_fan_http_start(cfg->fan_http_endpoint, d)))
        return d->code;
    f->naggr =
        cfg->fan_aggregates_from[0] ? faid_config_endpoint_count(cfg->fan_aggregates_from) : 0;
    for (int i = 0; i < f->naggr && i < FAID_MAX_ENDPOINTS; i++) {
        char ep[1040];
        faid_config_endpoint_at(cfg->fan_aggregates_from, i, ep, sizeof ep);
        /* a small queue: only the latest aggregates message of each instance counts */
        faid_sub_opts so = {.rcvhwm = 64};
        if (!(f->aggr_sub[i] = faid_sub_new_opts(ep, FAID_SUB_PUB, &so, d))) {
            faid_diag_prefix(d, "fan.aggregates_from: ");
            return d->code;
        }
        FAID_INFO("fan", "aggregates of %s", ep);
    }
    f->ninputs = faid_config_endpoint_count(cfg->input_endpoint);
    if (f->ninputs < 1 || f->ninputs > FAID_MAX_ENDPOINTS)
        return faid_fail(d, FAID_ECONFIG, "input.endpoint: %d endpoints (1 to %d)", f->ninputs,
                         FAID_MAX_ENDPOINTS);
    for (int i = 0; i < f->ninputs; i++) {
        input *in = calloc(1, sizeof(*in));
        if (!in)
            return faid_fail(d, FAID_ENOMEM, "out of memory for input %d", i);
        f->in[i] = in;
        in->index = i;
        in->q = &f->q;
        in->protocol = proto;
        faid_config_endpoint_at(cfg->input_endpoint, i, in->endpoint, sizeof(in->endpoint));
        /* a context and I/O thread per input: one shared context limits a fan-out */
        in->ctx = zmq_ctx_new();
        if (!in->ctx)
            return faid_fail(d, FAID_EZMQ, "input %s: zmq_ctx_new", in->endpoint);
        zmq_ctx_set(in->ctx, ZMQ_IO_THREADS, 1);
        in->sock = zmq_socket(in->ctx, ZMQ_PULL);
        int64_t max = cfg->max_frame_bytes + 1024 * 1024;
        int linger = 0;
        zmq_setsockopt(in->sock, ZMQ_MAXMSGSIZE, &max, sizeof(max));
        zmq_setsockopt(in->sock, ZMQ_LINGER, &linger, sizeof(linger));
        int rc = cfg->input_bind ? zmq_bind(in->sock, in->endpoint)
                                 : zmq_connect(in->sock, in->endpoint);
        if (rc != 0)
            return faid_fail(d, FAID_EZMQ, "input socket: cannot %s %s: %s",
                             cfg->input_bind ? "bind" : "connect", in->endpoint,
                             zmq_strerror(zmq_errno()));
        FAID_INFO("fan", "input: %s %s (%s)", cfg->input_bind ? "bound to" : "connected to",
                  in->endpoint, cfg->input_protocol);
        if (pthread_create(&in->thread, NULL, input_main, in))
            return faid_fail(d, FAID_ENOMEM, "cannot start input thread %d", i);
        in->started = 1;
    }
    return 0;
}

static void fan_stop(fan *f)
{
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < f->ninputs; i++) {
        input *in = f->in[i];
        if (!in)
            continue;
        if (in->started)
            pthread_join(in->thread, NULL);
        if (in->sock)
            zmq_close(in->sock);
        if (in->ctx)
            zmq_ctx_term(in->ctx);
        free(in);
    }
    fmsg *m;
    while ((m = queue_peek(&f->q)))
        queue_pop(&f->q);
    fmsg_free(&f->start);
    fmsg_free(&f->end);
    free(f->routed);
    faid_fan_http_stop(&f->http);
    for (int i = 0; i < f->naggr; i++) {
        faid_sub_destroy(&f->aggr_sub[i]);
        free(f->aggr_body[i]);
    }
    free(f->aggr_json);
    for (int i = 0; i < MAX_INSTANCES; i++) {
        free(f->inst[i].out_series);
        free(f->inst[i].out_frame);
        free(f->inst[i].out_done);
    }
    void *socks[] = {f->router, f->pub, f->rep, f->tee};
    for (size_t k = 0; k < 4; k++)
        if (socks[k])
            zmq_close(socks[k]);
    if (f->ctx)
        zmq_ctx_term(f->ctx);
    if (f->q.efd >= 0)
        close(f->q.efd);
    pthread_mutex_destroy(&f->q.mu);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: faid-fan [-c CONFIG] [--set KEY=VALUE ...] [--log-level LEVEL]\n"
            "  Fan-out of one detector stream to several faid instances (docs/fan-out.md).\n"
            "  -c, --config FILE   YAML configuration: input.* (the detector stream) and fan.*\n"
            "                      (docs/configuration.md); other sections are ignored\n"
            "  --set KEY=VALUE     one option over the file (repeatable), e.g.\n"
            "                      --set fan.policy=credit\n"
            "  --log-level LEVEL   error, warn, info or debug\n"
            "  -V, --version       print the version\n");
}

int main(int argc, char **argv)
{
    faid_log_set_name("faid-fan");
    enum { O_SET = 256, O_LOG };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, O_SET},
        {"log-level", required_argument, NULL, O_LOG},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *level = NULL;
    const char *sets[64];
    int nsets = 0, opt;
    while ((opt = getopt_long(argc, argv, "hVc:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("faid-fan %s\n", FAID_VERSION);
            return 0;
        case 'c':
            config_path = optarg;
            break;
        case O_SET:
            if (nsets == 64) {
                fprintf(stderr, "faid-fan: at most 64 --set\n");
                return 2;
            }
            sets[nsets++] = optarg;
            break;
        case O_LOG:
            level = optarg;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "faid-fan: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    faid_config *cfg = malloc(sizeof(*cfg));
    if (!cfg) {
        fprintf(stderr, "faid-fan: out of memory\n");
        return 1;
    }
    faid_config_default(cfg);
    faid_diag d;
    faid_diag_clear(&d);
    if (config_path && faid_config_load(config_path, cfg, &d)) {
        fprintf(stderr, "faid-fan: %s\n", d.msg);
        free(cfg);
        return 1;
    }
    for (int k = 0; k < nsets; k++) {
        char key[128];
        const char *eq = strchr(sets[k], '=');
        if (!eq || (size_t)(eq - sets[k]) >= sizeof(key)) {
            fprintf(stderr, "faid-fan: --set '%s': expected KEY=VALUE\n", sets[k]);
            free(cfg);
            return 2;
        }
        memcpy(key, sets[k], (size_t)(eq - sets[k]));
        key[eq - sets[k]] = 0;
        if (faid_config_set(cfg, key, eq + 1, &d)) {
            fprintf(stderr, "faid-fan: --set %s: %s\n", key, d.msg);
            free(cfg);
            return 2;
        }
    }
    faid_log_level lvl;
    if (faid_log_parse_level(level ? level : cfg->log_level, &lvl) == 0)
        faid_log_set_level(lvl);
    /* Detector messages are megabytes each, allocated by the input's I/O thread and freed by
     * an instance connection's after the send: glibc returned the freed top of its arena to the
     * kernel and the next messages faulted the pages in again, zeroed (93,000-162,000 page
     * faults per 1000 EIGER 4M messages of 2.69 MB in the input I/O thread, 10-38 % of its
     * samples in three profiles; perf on 2 cores, 2026-11-26). Kept instead (M_TRIM_THRESHOLD) and
     * taken from the heap rather than a fresh mmap each (M_MMAP_THRESHOLD, at glibc's largest, 32
     * MB): 12,600-17,800 faults per 1000, those of the heap's growth to the most faid-fan held,
     * which the buffer and the instances' windows bound; its resident memory stays at that peak. */
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    fan *f = calloc(1, sizeof(*f));
    if (!f) {
        free(cfg);
        return 1;
    }
    f->cfg = cfg;
    f->q.efd = -1;
    int rc = fan_start(f, &d);
    if (rc) {
        fprintf(stderr, "faid-fan: %s\n", d.msg);
    } else {
        FAID_INFO("fan", "running: policy %s, block %d, buffer %lld bytes, %d I/O threads",
                  cfg->fan_policy ? "credit" : "blocks", cfg->fan_block,
                  (long long)cfg->fan_buffer_bytes, cfg->fan_io_threads);
        while (!atomic_load(&stop_flag)) {
            zmq_pollitem_t items[3] = {
                {.socket = f->router, .events = ZMQ_POLLIN},
                {.socket = f->rep, .events = ZMQ_POLLIN},
                {.fd = f->q.efd, .events = ZMQ_POLLIN},
            };
            zmq_poll(items, 3, 20);
            if (items[2].revents & ZMQ_POLLIN) {
                uint64_t v;
                ssize_t r = read(f->q.efd, &v, sizeof(v));
                (void)r;
            }
            handle_router(f);
            if (items[1].revents & ZMQ_POLLIN)
                handle_control(f);
            route(f);
            housekeeping(f);
            aggr_poll(f);
            metrics_update(f);
        }
        FAID_INFO("fan", "stopping");
    }
    fan_stop(f);
    free(f);
    free(cfg);
    return rc ? 1 : 0;
}
