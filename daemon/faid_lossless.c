/* faid_lossless: the lossless output channel: a ROUTER socket, one consumer session with credit
 * and cumulative acknowledgements, and a bounded ring of unacknowledged messages (see
 * faid_lossless.h for the design, proto/PROTOCOL.md 3.6 for the wire protocol). */
#include "faid_lossless.h"

#include "faid_log.h"
#include "faid_proto_out.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zmq.h>

/* A consumer that asks for nothing gets this credit; no consumer gets more than the maximum (the
 * ROUTER's send high-water mark is set above it, so a send within credit never meets it). */
#define CREDIT_DEFAULT 256
#define CREDIT_MAX     (FAID_LL_SNDHWM - 1024)
#define REQ_MAX        4096 /* longest consumer message handled; longer ones are ignored */
#define ID_MAX         255  /* ZeroMQ routing ids are at most 255 bytes */
#define RELEASE_CHUNK  ((size_t)1 << 20)
/* Consumer messages read per pump, i.e. per pass of the publisher. Reading until the socket was
 * empty let 64 peers sending hello flat out stop all publishing for 45 s; the rest now waits in
 * ZeroMQ's buffers (and, once they are full, in the peers' own), and the next pass comes within
 * 2 ms (faid_lossless_pending). A pass of 256 refused hellos costs about 0.3 ms: 16 peers' 320,000
 * hellos were read in 2.9 s, with a result between any two passes. */
#define READS_PER_PASS 256
/* A refused peer is answered at most once per REFUSE_INTERVAL_NS, and at most REFUSE_PEERS
 * peers are within an interval: every answer sits in the peer's queue until it reads, and
 * answering every hello cost 22 MB per peer that never read (1.38 GB for 64 such peers). The
 * client libraries repeat their hello once a second, so a reading standby still hears why. */
#define REFUSE_INTERVAL_NS 1000000000ll
#define REFUSE_PEERS       64
/* The active consumer is probed (a ping: is its connection still there?) at most this often,
 * however many other peers ask: a ping per refused hello was 11.1 M pings in a 64-peer flood,
 * and the consumer's series messages waited behind them. */
#define PROBE_INTERVAL_NS 250000000ll
/* Earlier connections of the active consumer whose last messages (an ack sent just before it
 * restarted) are still applied for it. */
#define OLD_CONNS 8

/* One message in the ring: this header, the body, padding to 8 bytes. */
typedef struct entry {
    uint64_t seq;
    uint32_t len;
    uint8_t kind;
    uint8_t pad[3];
} entry;

struct faid_lossless {
    void *sock;
    faid_stats *st;
    int64_t consumer_timeout_ns;
    char instance[17];
    /* The ring: entries are contiguous from head; when one does not fit before the end, data
     * stops at wrap_end and continues at 0 (wrapped). send_pos is the first entry not yet sent
     * in this session (== tail when all are sent); inflight entries [head, send_pos) were sent
     * and await their ack. */
    uint8_t *buf;
    size_t cap, head, tail, wrap_end, send_pos, used;
    int wrapped;
    uint64_t count, inflight;
    int has_sent;
    uint64_t max_sent; /* highest seq ever sent: later sends of lower seqs are re-sends */
    /* The session. */
    int active;
    uint8_t id[ID_MAX];
    size_t idlen;
    uint64_t credit;
    int64_t last_heard_ns;
    pthread_mutex_t mu; /* guards name (read by the control thread) */
    char name[2 * ID_MAX + 1];
    /* Connections. A routing id names a consumer, not a connection: a consumer that restarts
     * under its name takes the name over (ZeroMQ renames the old connection with an id of its
     * own), and a repeated hello comes on the connection that already holds what was sent. The
     * ROUTER's accept events (socket monitor, read through mon) give each accepted descriptor a
     * new serial (conn_of_fd; prev_of_fd: the connection the descriptor had before, whose last
     * messages may still be read after a new connection took the descriptor over); a message's
     * connection is the serial of the descriptor it came from (ZMQ_SRCFD). 0: not known
     * (inproc, a descriptor beyond the table). */
    void *mon;
    uint64_t *conn_of_fd, *prev_of_fd;
    size_t nfd;
    uint64_t conn_serial;
    uint64_t conn;                 /* the session's connection */
    uint64_t old_conns[OLD_CONNS]; /* the consumer's earlier connections in this session */
    unsigned nold;
    /* Refused peers answered within the last REFUSE_INTERVAL_NS (idlen 0: a free entry). */
    struct answered {
        uint8_t id[ID_MAX];
        uint8_t idlen;
        int64_t at_ns;
    } answered[REFUSE_PEERS];
    int64_t probe_ns; /* last liveness probe of the active consumer, and what it found */
    int probe_ok;
    int input_left; /* the last pump stopped at READS_PER_PASS with input waiting */
};

static faid_ratelimit rl_req, rl_refused, rl_hello;
/* A consumer's session lines are peer-driven too: a consumer in a hello/bye loop wrote two INFO
 * lines per cycle, 2,290 for 2,000 cycles (issue 20, defect 10, found by probe_defects2.py). */
static faid_ratelimit rl_session, rl_end;

static size_t entry_size(size_t len)
{
    return (sizeof(entry) + len + 7) & ~(size_t)7;
}

static entry *at(const faid_lossless *ll, size_t pos)
{
    return (entry *)(void *)(ll->buf + pos);
}

static faid_msg_kind kind_of(const char *topic)
{
    if (strcmp(topic, FAID_TOPIC_START) == 0)
        return FAID_MSG_START;
    if (strcmp(topic, FAID_TOPIC_END) == 0)
        return FAID_MSG_END;
    if (strcmp(topic, FAID_TOPIC_ERROR) == 0)
        return FAID_MSG_ERROR;
    return FAID_MSG_RESULT;
}

/* The routing id as text: printable ids as they are, others in hex. */
static void id_text(const uint8_t *id, size_t n, char *out, size_t cap)
{
    int printable = n > 0;
    for (size_t i = 0; i < n; i++)
        printable &= id[i] > ' ' && id[i] < 127;
    size_t j = 0;
    if (printable) {
        j = n < cap - 1 ? n : cap - 1;
        memcpy(out, id, j);
    } else {
        for (size_t i = 0; i < n && j + 3 <= cap; i++)
            j += (size_t)snprintf(out + j, cap - j, "%02x", id[i]);
    }
    out[j] = '\0';
}

static void gauges(faid_lossless *ll)
{
    atomic_store_explicit(&ll->st->ll_held, ll->count, memory_order_relaxed);
    atomic_store_explicit(&ll->st->ll_held_bytes, ll->used, memory_order_relaxed);
    atomic_store_explicit(&ll->st->ll_active, (uint64_t)ll->active, memory_order_relaxed);
}

/* Starts watching the ROUTER's accepted connections (see `conn_of_fd`). Without it (no
 * descriptor table, the monitor refused) every message's connection is unknown: a repeated
 * hello then re-sends as a new session does, and a renamed connection's last ack is a
 * stranger's. */
static void watch_start(faid_lossless *ll, void *zctx, void *router)
{
    struct rlimit rl;
    size_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (size_t)rl.rlim_cur
                   : (size_t)1 << 20;
    if (n > ((size_t)1 << 20))
        n = (size_t)1 << 20;
    /* Zero pages until a descriptor is used: a few kB resident for the usual few hundred. */
    ll->conn_of_fd = calloc(n, sizeof(*ll->conn_of_fd));
    ll->prev_of_fd = calloc(n, sizeof(*ll->prev_of_fd));
    if (!ll->conn_of_fd || !ll->prev_of_fd) {
        free(ll->conn_of_fd);
        free(ll->prev_of_fd);
        ll->conn_of_fd = ll->prev_of_fd = NULL;
        return;
    }
    char ep[64];
    snprintf(ep, sizeof(ep), "inproc://faid-lossless-conns-%p", (void *)ll);
    int hwm = 10000; /* accept events are read every pass; a burst waits here */
    if (zmq_socket_monitor(router, ep, ZMQ_EVENT_ACCEPTED) != 0 ||
        !(ll->mon = zmq_socket(zctx, ZMQ_PAIR)) ||
        zmq_setsockopt(ll->mon, ZMQ_RCVHWM, &hwm, sizeof(hwm)) != 0 ||
        zmq_connect(ll->mon, ep) != 0) {
        FAID_WARN("lossless",
                  "cannot watch the channel's connections (%s): a repeated hello "
                  "re-sends what is held",
                  zmq_strerror(zmq_errno()));
        if (ll->mon)
            zmq_close(ll->mon);
        ll->mon = NULL;
        zmq_socket_monitor(router, NULL, 0);
        free(ll->conn_of_fd);
        free(ll->prev_of_fd);
        ll->conn_of_fd = ll->prev_of_fd = NULL;
        return;
    }
    ll->nfd = n;
}

/* Reads the accept events that are there: each accepted descriptor gets a new serial. An
 * accept's event is queued before any message of that connection can be read, so reading them
 * after a message and before looking its connection up always finds a new connection new. */
static void watch_read(faid_lossless *ll)
{
    if (!ll->mon)
        return;
    for (;;) {
        uint8_t ev[6];
        char addr[8];
        int n = zmq_recv(ll->mon, ev, sizeof(ev), ZMQ_DONTWAIT);
        if (n < 0)
            return;
        int more = 0;
        size_t ms = sizeof(more);
        zmq_getsockopt(ll->mon, ZMQ_RCVMORE, &more, &ms);
        while (more && zmq_recv(ll->mon, addr, sizeof(addr), 0) >= 0)
            zmq_getsockopt(ll->mon, ZMQ_RCVMORE, &more, &ms);
        uint16_t event;
        uint32_t fd;
        memcpy(&event, ev, sizeof(event));
        memcpy(&fd, ev + 2, sizeof(fd));
        if (n == (int)sizeof(ev) && event == ZMQ_EVENT_ACCEPTED && fd < ll->nfd) {
            ll->prev_of_fd[fd] = ll->conn_of_fd[fd];
            ll->conn_of_fd[fd] = ++ll->conn_serial;
        }
    }
}

/* The connection a message from descriptor fd came over: the descriptor's latest (prev: the one
 * before, a message read after a new connection took the descriptor over). */
static uint64_t conn_of(const faid_lossless *ll, int fd, int prev)
{
    if (fd < 0 || (size_t)fd >= ll->nfd)
        return 0;
    return prev ? ll->prev_of_fd[fd] : ll->conn_of_fd[fd];
}

faid_lossless *faid_lossless_new(void *zctx, void *router, size_t cap, int64_t consumer_timeout_ns,
                                 faid_stats *st, faid_diag *d)
{
    faid_lossless *ll = calloc(1, sizeof(*ll));
    if (!ll) {
        faid_fail(d, FAID_ENOMEM, "output.lossless_buffer: out of memory");
        return NULL;
    }
    cap &= ~(size_t)7;
    /* Mapped, not malloc'ed: pages cost memory only once written, and whole chunks the head has
     * passed are handed back (release), so the resident size follows what is held. */
    void *m = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ll->buf = m == MAP_FAILED ? NULL : m;
    if (!ll->buf) {
        faid_fail(d, FAID_ENOMEM, "output.lossless_buffer: cannot allocate %zu bytes", cap);
        free(ll);
        return NULL;
    }
    ll->cap = cap;
    ll->sock = router;
    ll->st = st;
    ll->consumer_timeout_ns = consumer_timeout_ns;
    pthread_mutex_init(&ll->mu, NULL);
    /* Distinguishes this run's msg_numbers from an earlier run's (they restart at 0). */
    uint64_t x = (uint64_t)faid_wall_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)ll;
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    snprintf(ll->instance, sizeof(ll->instance), "%016llx", (unsigned long long)x);
    /* Sends to a consumer that is gone fail (EHOSTUNREACH) instead of vanishing; a consumer that
     * reconnects under the same name takes over its old connection. */
    int one = 1;
    zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
    zmq_setsockopt(router, ZMQ_ROUTER_HANDOVER, &one, sizeof(one));
    watch_start(ll, zctx, router);
    return ll;
}

void faid_lossless_destroy(faid_lossless **pll)
{
    if (!pll || !*pll)
        return;
    faid_lossless *ll = *pll;
    if (ll->mon) {
        zmq_socket_monitor(ll->sock, NULL, 0);
        zmq_close(ll->mon);
    }
    free(ll->conn_of_fd);
    free(ll->prev_of_fd);
    pthread_mutex_destroy(&ll->mu);
    if (ll->buf)
        munmap(ll->buf, ll->cap);
    free(ll);
    *pll = NULL;
}

/* ---- the ring -------------------------------------------------------------------------------- */

/* A position that reached the end of the data before the wrap continues at 0. */
static size_t normalize(const faid_lossless *ll, size_t pos)
{
    return ll->wrapped && pos == ll->wrap_end ? 0 : pos;
}

/* Hands the whole chunks of [lo, hi), which hold no data any more, back to the kernel. Without
 * it the tail's walk through the ring touches every page of output.lossless_buffer within
 * minutes even when only a few messages are ever held (64 MiB of resident memory after about
 * two minutes at 400 results/s of 1.5 kB): an RSS climb that only levels off at the buffer's
 * size. A chunk is released once, when the head leaves it; faulting it in again costs a page
 * clear when the tail comes back. */
static void release(faid_lossless *ll, size_t lo, size_t hi)
{
    size_t a = (lo + RELEASE_CHUNK - 1) / RELEASE_CHUNK * RELEASE_CHUNK;
    size_t b = hi / RELEASE_CHUNK * RELEASE_CHUNK;
    if (b > a)
        madvise(ll->buf + a, b - a, MADV_DONTNEED);
}

static void pop_head(faid_lossless *ll)
{
    entry *e = at(ll, ll->head);
    size_t sz = entry_size(e->len);
    int was_sent = ll->inflight > 0;
    /* Free behind the head: [0, head) unwrapped, [tail, head) wrapped. */
    size_t lo = ll->wrapped ? ll->tail : 0, h0 = ll->head / RELEASE_CHUNK * RELEASE_CHUNK;
    ll->head += sz;
    size_t h1 = ll->head;
    if (ll->wrapped && ll->head == ll->wrap_end) {
        h1 = ll->cap;
        ll->head = 0;
        ll->wrapped = 0;
    }
    release(ll, lo > h0 ? lo : h0, h1);
    ll->used -= sz;
    ll->count--;
    if (was_sent)
        ll->inflight--;
    else
        ll->send_pos = ll->head;
    if (ll->count == 0) {
        ll->head = ll->tail = ll->send_pos = 0;
        ll->wrapped = 0;
    }
}

int faid_lossless_put(faid_lossless *ll, const char *topic, uint64_t seq, const void *body,
                      size_t len)
{
    size_t sz = entry_size(len);
    faid_msg_kind kind = kind_of(topic);
    if (sz > ll->cap || len > UINT32_MAX) {
        faid_stat_add(&ll->st->ll_given_up[kind], 1);
        FAID_WARN("lossless",
                  "message %llu (%s, %zu bytes) is larger than output.lossless_buffer "
                  "(%zu bytes): given up",
                  (unsigned long long)seq, topic, len, ll->cap);
        return FAID_ESIZE;
    }
    if (ll->count == 0) {
        ll->head = ll->tail = ll->send_pos = 0;
        ll->wrapped = 0;
    }
    size_t pos;
    if (!ll->wrapped) {
        if (ll->cap - ll->tail >= sz) {
            pos = ll->tail;
        } else if (ll->head >= sz) {
            int all_sent = ll->inflight == ll->count;
            ll->wrap_end = ll->tail;
            ll->wrapped = 1;
            pos = 0;
            if (all_sent)
                ll->send_pos = 0;
        } else {
            return FAID_EBUSY;
        }
    } else if (ll->head - ll->tail >= sz) {
        pos = ll->tail;
    } else {
        return FAID_EBUSY;
    }
    entry *e = at(ll, pos);
    e->seq = seq;
    e->len = (uint32_t)len;
    e->kind = (uint8_t)kind;
    memcpy(e + 1, body, len);
    ll->tail = pos + sz;
    ll->used += sz;
    ll->count++;
    gauges(ll);
    return 0;
}

int faid_lossless_give_up_oldest(faid_lossless *ll)
{
    if (ll->count == 0)
        return FAID_EINVAL;
    faid_stat_add(&ll->st->ll_given_up[at(ll, ll->head)->kind], 1);
    pop_head(ll);
    gauges(ll);
    return 0;
}

uint64_t faid_lossless_give_up_all(faid_lossless *ll)
{
    uint64_t n = 0;
    while (faid_lossless_give_up_oldest(ll) == 0)
        n++;
    return n;
}

/* Cumulative acknowledgement: every message up to seq that was ever sent is delivered. */
static void ack(faid_lossless *ll, uint64_t seq)
{
    while (ll->count > 0 && ll->has_sent) {
        entry *e = at(ll, ll->head);
        if (e->seq > seq || e->seq > ll->max_sent)
            break;
        pop_head(ll);
        faid_stat_add(&ll->st->ll_acked, 1);
    }
    gauges(ll);
}

uint64_t faid_lossless_held(const faid_lossless *ll)
{
    return ll->count;
}

int faid_lossless_pending(const faid_lossless *ll)
{
    return ll->input_left || (ll->active && ll->inflight < ll->count);
}

size_t faid_lossless_capacity(const faid_lossless *ll)
{
    return ll->cap;
}

const char *faid_lossless_instance(const faid_lossless *ll)
{
    return ll->instance;
}

void faid_lossless_consumer(faid_lossless *ll, char *out, size_t cap)
{
    pthread_mutex_lock(&ll->mu);
    snprintf(out, cap, "%s", ll->active ? ll->name : "");
    pthread_mutex_unlock(&ll->mu);
}

/* ---- the session ----------------------------------------------------------------------------- */

/* Sends [id, topic, body] without waiting; the zmq errno on failure. */
static int send3(faid_lossless *ll, const uint8_t *id, size_t idlen, const char *topic,
                 const void *body, size_t len)
{
    if (zmq_send(ll->sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return zmq_errno();
    /* The parts after the routing id are accepted together with it. */
    zmq_send(ll->sock, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(ll->sock, body, len, ZMQ_DONTWAIT);
    return 0;
}

static void end_session(faid_lossless *ll, const char *why)
{
    if (!ll->active)
        return;
    faid_log_ratelimited(&rl_end, FAID_LOG_INFO, "lossless",
                         "consumer %s %s; %llu message(s) unacknowledged, kept", ll->name, why,
                         (unsigned long long)ll->count);
    pthread_mutex_lock(&ll->mu);
    ll->active = 0;
    pthread_mutex_unlock(&ll->mu);
    /* Everything unacknowledged goes out again in the next session. */
    ll->send_pos = ll->head;
    ll->inflight = 0;
    ll->nold = 0;
    gauges(ll);
}

/* Is the active consumer still connected? A ping to its routing id fails with EHOSTUNREACH
 * once its connection is gone (ZMQ_ROUTER_MANDATORY). At most one probe per
 * PROBE_INTERVAL_NS: in between, the last probe's answer. */
static int active_connected(faid_lossless *ll, int64_t now)
{
    if (ll->probe_ns && now - ll->probe_ns < PROBE_INTERVAL_NS)
        return ll->probe_ok;
    uint8_t body[32];
    faid_mpw w;
    faid_mpw_init(&w, body, sizeof(body));
    faid_proto_write_ll_reply(&w, &(faid_out_ll_reply){.type = "ping"});
    int err = send3(ll, ll->id, ll->idlen, "ping", body, w.len);
    if (err == 0)
        faid_stat_add(&ll->st->ll_pings, 1);
    ll->probe_ns = now;
    ll->probe_ok = err != EHOSTUNREACH;
    return ll->probe_ok;
}

/* held: the welcome's `held` (messages about to be sent). */
static void reply(faid_lossless *ll, const uint8_t *id, size_t idlen, int welcome, uint64_t held,
                  const char *message)
{
    uint8_t body[1024];
    faid_mpw w;
    faid_mpw_init(&w, body, sizeof(body));
    faid_out_ll_reply r = {
        .type = welcome ? FAID_TOPIC_WELCOME : FAID_TOPIC_REFUSED,
        .instance = ll->instance,
        .credit = ll->credit,
        .held = held,
        .consumer = ll->name,
        .message = message,
    };
    faid_proto_write_ll_reply(&w, &r);
    if (faid_mpw_finish(&w, NULL) == 0)
        send3(ll, id, idlen, welcome ? FAID_TOPIC_WELCOME : FAID_TOPIC_REFUSED, body, w.len);
}

static uint64_t clamp_credit(uint64_t c, uint64_t keep)
{
    if (c == 0)
        return keep;
    return c > CREDIT_MAX ? CREDIT_MAX : c;
}

static int is_old_conn(const faid_lossless *ll, uint64_t conn)
{
    if (!conn)
        return 0;
    if (conn == ll->conn)
        return 1;
    for (unsigned i = 0; i < ll->nold; i++)
        if (ll->old_conns[i] == conn)
            return 1;
    return 0;
}

/* The active consumer now speaks over conn: its earlier connection is remembered (its last
 * messages may still come), the oldest forgotten. */
static void move_conn(faid_lossless *ll, uint64_t conn)
{
    if (ll->conn && ll->conn != conn) {
        if (ll->nold == OLD_CONNS) {
            memmove(ll->old_conns, ll->old_conns + 1, (OLD_CONNS - 1) * sizeof(ll->old_conns[0]));
            ll->nold--;
        }
        ll->old_conns[ll->nold++] = ll->conn;
    }
    ll->conn = conn;
}

static void start_session(faid_lossless *ll, const uint8_t *id, size_t idlen,
                          const faid_ll_request *q, int64_t now, uint64_t conn)
{
    int same = ll->active && idlen == ll->idlen && memcmp(id, ll->id, idlen) == 0;
    pthread_mutex_lock(&ll->mu);
    memcpy(ll->id, id, idlen);
    ll->idlen = idlen;
    id_text(id, idlen, ll->name, sizeof(ll->name));
    ll->active = 1;
    pthread_mutex_unlock(&ll->mu);
    if (same) {
        move_conn(ll, conn);
    } else {
        ll->nold = 0;
        ll->conn = conn;
        ll->probe_ns = 0; /* a probe's answer was about the consumer before */
    }
    ll->credit = clamp_credit(q->credit, CREDIT_DEFAULT);
    ll->last_heard_ns = now;
    ll->send_pos = ll->head;
    ll->inflight = 0;
    /* A consumer that still has messages of this run (it tells its last one) does not get them
     * again. */
    if (q->has_seq && strcmp(q->instance, ll->instance) == 0)
        ack(ll, q->seq);
    faid_stat_add(&ll->st->ll_sessions, 1);
    faid_log_ratelimited(&rl_session, FAID_LOG_INFO, "lossless",
                         "consumer %s %s (credit %llu); re-sending %llu unacknowledged "
                         "message(s)",
                         ll->name, same ? "started a new session" : "connected",
                         (unsigned long long)ll->credit, (unsigned long long)ll->count);
    reply(ll, id, idlen, 1, ll->count, NULL);
    gauges(ll);
}

/* A hello on the connection that already holds what this session sent: those messages are in
 * its queue or in its hands, and a second copy would only pile up behind the first (a consumer
 * repeating hello without reading grew faid by 1.86 GB with a 1 MiB buffer). The session goes
 * on; only what was not sent yet is about to come. */
static void repeat_hello(faid_lossless *ll, const faid_ll_request *q, int64_t now)
{
    ll->credit = clamp_credit(q->credit, CREDIT_DEFAULT);
    ll->last_heard_ns = now;
    if (q->has_seq && strcmp(q->instance, ll->instance) == 0)
        ack(ll, q->seq);
    faid_stat_add(&ll->st->ll_sessions, 1);
    faid_stat_add(&ll->st->ll_not_resent, ll->inflight);
    faid_log_ratelimited(&rl_hello, FAID_LOG_INFO, "lossless",
                         "consumer %s said hello again on the same connection (credit %llu): "
                         "%llu message(s) on the way to it not sent again",
                         ll->name, (unsigned long long)ll->credit,
                         (unsigned long long)ll->inflight);
    reply(ll, ll->id, ll->idlen, 1, ll->count - ll->inflight, NULL);
    gauges(ll);
}

/* A message that came over an earlier connection of the active consumer (it restarted under its
 * name): an ack still counts for it, a hello or bye is the earlier run's and changes nothing. */
static void old_connection(faid_lossless *ll, const faid_ll_request *q)
{
    faid_stat_add(&ll->st->ll_old_conn, 1);
    if (q->type == FAID_LL_ACK && q->has_seq && strcmp(q->instance, ll->instance) == 0)
        ack(ll, q->seq);
}

/* Answers a refused peer unless it was answered within REFUSE_INTERVAL_NS, or REFUSE_PEERS
 * others were; 1 when it was answered. */
static int refuse(faid_lossless *ll, const uint8_t *id, size_t idlen, int64_t now)
{
    struct answered *slot = NULL;
    for (size_t i = 0; i < REFUSE_PEERS; i++) {
        struct answered *a = &ll->answered[i];
        if (a->idlen == idlen && memcmp(a->id, id, idlen) == 0) {
            if (now - a->at_ns < REFUSE_INTERVAL_NS)
                return 0;
            slot = a;
            break;
        }
        if (!slot && (a->idlen == 0 || now - a->at_ns >= REFUSE_INTERVAL_NS))
            slot = a;
    }
    if (!slot)
        return 0;
    memcpy(slot->id, id, idlen);
    slot->idlen = (uint8_t)idlen;
    slot->at_ns = now;
    char msg[768];
    snprintf(msg, sizeof(msg),
             "another consumer (%s) holds the lossless channel; one consumer at a time: "
             "retry later, you are accepted once it leaves or is silent for %.1f s",
             ll->name, (double)ll->consumer_timeout_ns / 1e9);
    reply(ll, id, idlen, 0, ll->count, msg);
    return 1;
}

/* fd: the descriptor the message came over (-1: not known). */
static void handle(faid_lossless *ll, const uint8_t *id, size_t idlen, const faid_ll_request *q,
                   int64_t now, int fd)
{
    int is_active = ll->active && idlen == ll->idlen && memcmp(id, ll->id, idlen) == 0;
    uint64_t conn = conn_of(ll, fd, 0);
    /* Under the consumer's name but over a connection older than the session's: the earlier
     * run's last messages, read after the new run's hello. */
    if (is_active && conn && ll->conn && conn < ll->conn) {
        old_connection(ll, q);
        return;
    }
    /* An ack under a name ZeroMQ made up for the consumer's earlier connection when the
     * restarted consumer took its name over (that connection had closed with the ack unread:
     * 112 of 150 such acks were refused as strangers' hellos, and the consumer was sent again
     * what it had). Its descriptor may already be the new connection's. */
    if (!is_active && ll->active && q->type == FAID_LL_ACK &&
        (is_old_conn(ll, conn) || is_old_conn(ll, conn_of(ll, fd, 1)))) {
        old_connection(ll, q);
        return;
    }
    if (q->type == FAID_LL_BYE) {
        if (is_active)
            end_session(ll, "said bye");
        return;
    }
    if (is_active) {
        ll->last_heard_ns = now;
        if (q->type == FAID_LL_HELLO) {
            if (conn && conn == ll->conn)
                repeat_hello(ll, q, now);
            else
                start_session(ll, id, idlen, q, now, conn);
            return;
        }
        if (conn && ll->conn && conn > ll->conn) {
            /* Its connection was replaced without a hello (the DEALER reconnected on its own):
             * what was on the way went down with the old one. */
            move_conn(ll, conn);
            ll->send_pos = ll->head;
            ll->inflight = 0;
        }
        ll->credit = clamp_credit(q->credit, ll->credit);
        if (q->has_seq && strcmp(q->instance, ll->instance) == 0)
            ack(ll, q->seq);
        return;
    }
    /* Another peer (a hello, or an ack from a consumer faid does not know: it reconnected to
     * a restarted faid): it takes the channel when nobody holds it, or the holder is gone or
     * has been silent past output.lossless_consumer_timeout. */
    if (ll->active && now - ll->last_heard_ns <= ll->consumer_timeout_ns &&
        active_connected(ll, now)) {
        char who[2 * ID_MAX + 1];
        id_text(id, idlen, who, sizeof(who));
        faid_stat_add(&ll->st->ll_refused, 1);
        faid_log_ratelimited(&rl_refused, FAID_LOG_WARN, "lossless",
                             "consumer %s refused: %s holds the channel", who, ll->name);
        if (!refuse(ll, id, idlen, now))
            faid_stat_add(&ll->st->ll_refused_unanswered, 1);
        return;
    }
    if (ll->active)
        end_session(ll, "is gone (disconnected or silent)");
    start_session(ll, id, idlen, q, now, conn);
}

/* Reads at most READS_PER_PASS consumer messages. */
static void receive(faid_lossless *ll)
{
    watch_read(ll);
    ll->input_left = 0;
    for (int reads = 0;; reads++) {
        if (reads == READS_PER_PASS) {
            int ev = 0;
            size_t es = sizeof(ev);
            if (zmq_getsockopt(ll->sock, ZMQ_EVENTS, &ev, &es) == 0 && (ev & ZMQ_POLLIN)) {
                ll->input_left = 1;
                faid_stat_add(&ll->st->ll_input_deferred, 1);
            }
            return;
        }
        uint8_t id[ID_MAX + 1], req[REQ_MAX];
        int idlen = zmq_recv(ll->sock, id, sizeof(id), ZMQ_DONTWAIT);
        if (idlen < 0)
            return;
        int more = 0, fd = -1;
        size_t ms = sizeof(more);
        zmq_getsockopt(ll->sock, ZMQ_RCVMORE, &more, &ms);
        int len = -1, parts = 0;
        while (more) {
            zmq_msg_t part;
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, ll->sock, 0) < 0) {
                zmq_msg_close(&part);
                break;
            }
            if (parts++ == 0) {
                /* The descriptor of the connection it came over (-1 when not known). */
                fd = zmq_msg_get(&part, ZMQ_SRCFD);
                len = (int)zmq_msg_size(&part);
                if (len <= (int)sizeof(req))
                    memcpy(req, zmq_msg_data(&part), (size_t)len);
            }
            more = zmq_msg_more(&part);
            zmq_msg_close(&part);
        }
        if (idlen > ID_MAX || len < 0 || len > (int)sizeof(req) || parts != 1) {
            faid_log_ratelimited(&rl_req, FAID_LOG_WARN, "lossless",
                                 "consumer message ignored: %d part(s), %d bytes", parts, len);
            continue;
        }
        faid_ll_request q;
        faid_diag d;
        faid_diag_clear(&d);
        if (faid_proto_decode_ll_request(req, (size_t)len, &q, &d)) {
            faid_log_ratelimited(&rl_req, FAID_LOG_WARN, "lossless", "consumer message ignored: %s",
                                 d.msg);
            continue;
        }
        /* After the message: its connection's accept event is in by now. */
        watch_read(ll);
        handle(ll, id, (size_t)idlen, &q, faid_now_ns(), fd);
    }
}

static void send_window(faid_lossless *ll)
{
    while (ll->active && ll->inflight < ll->count && ll->inflight < ll->credit) {
        entry *e = at(ll, ll->send_pos);
        int err =
            send3(ll, ll->id, ll->idlen, faid_msg_kind_name((faid_msg_kind)e->kind), e + 1, e->len);
        if (err == EHOSTUNREACH) {
            end_session(ll, "disconnected");
            return;
        }
        if (err)
            return; /* its pipe is full: the next pump tries again */
        if (ll->has_sent && e->seq <= ll->max_sent) {
            faid_stat_add(&ll->st->ll_resent, 1);
        } else {
            faid_stat_add(&ll->st->lossless_sent, 1);
            ll->max_sent = e->seq;
            ll->has_sent = 1;
        }
        ll->send_pos = normalize(ll, ll->send_pos + entry_size(e->len));
        ll->inflight++;
    }
}

void faid_lossless_pump(faid_lossless *ll, int timeout_ms)
{
    if (timeout_ms > 0) {
        zmq_pollitem_t it = {.socket = ll->sock, .events = ZMQ_POLLIN};
        zmq_poll(&it, 1, timeout_ms);
    }
    receive(ll);
    send_window(ll);
}
