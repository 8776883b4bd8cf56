/* Fuzz target for the lossless output channel (daemon/faid_lossless.c, PROTOCOL.md 3.6): the
 * real module on a real ROUTER socket (inproc), driven by two DEALER consumers whose hello / ack /
 * bye messages come from the fuzz input, interleaved with the publisher's puts, pumps and
 * give-ups. What a consumer sends is external bytes: any request, in any order, with any credit,
 * msg_number and instance, must leave faid's ring consistent.
 *
 * Checked after every step: held messages = accepted puts - acknowledged - given up (stats);
 * every series message a consumer receives is one that was put, byte for byte (its body starts
 * with its msg_number and the rest is a pattern derived from it); no message is acknowledged
 * before it was sent. Welcome and refused replies must be maps with an instance string.
 *
 * Input: a sequence of operations, one byte each (low 3 bits) followed by its operands:
 *   0 put: kind (byte), length (byte x 8)          4 pump, then read both consumers
 *   1 consumer A: structured request (6+ bytes)    5 give up the oldest message
 *   2 consumer A: raw request (length byte, bytes) 6 give up everything
 *   3 consumer B: structured request               7 consumer A reconnects (same routing id)
 * At most 512 operations and 8 reconnections per input. */
#include "faid_lossless.h"
#include "faid_log.h"
#include "faid_proto.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define RING_BYTES 8192

typedef struct fz {
    const uint8_t *p;
    size_t n, at;
} fz;

static int take(fz *f)
{
    return f->at < f->n ? f->p[f->at++] : -1;
}

static uint64_t take64(fz *f, int nbytes)
{
    uint64_t v = 0;
    for (int k = 0; k < nbytes; k++) {
        int b = take(f);
        v |= (uint64_t)(b < 0 ? 0 : b) << (8 * k);
    }
    return v;
}

static uint8_t pattern(uint64_t seq, size_t k)
{
    return (uint8_t)(seq * 31u + k * 7u + 1u);
}

static void *ctx;
static unsigned serial;

/* libzmq 4.3 keeps the session of a ROUTER_HANDOVER peer that a reconnection under the same
 * routing id replaced until the ROUTER closes, and then does not free all of it (libzmq issues
 * 3238 and 4407; its objects are C++, faid allocates nothing per connection): the leak checker
 * ignores what libzmq's own code allocated. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libzmq.so\n";
}

typedef struct peer {
    void *sock;
    uint8_t id[8];
    size_t idlen;
    uint64_t last_seq; /* last series msg_number received */
    int has_last;
} peer;

static void *dealer(const char *ep, const peer *pr)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(s, ZMQ_ROUTING_ID, pr->id, pr->idlen);
    /* libFuzzer's timer (SIGALRM, -timeout) interrupts libzmq calls: EINTR means again. */
    int rc;
    while ((rc = zmq_connect(s, ep)) != 0 && zmq_errno() == EINTR)
        ;
    if (rc != 0) {
        fprintf(stderr, "fuzz_lossless: connect %s: %s\n", ep, zmq_strerror(zmq_errno()));
        abort();
    }
    return s;
}

static void send_req(peer *pr, const char *instance, fz *f)
{
    faid_ll_request q;
    memset(&q, 0, sizeof(q));
    int t = take(f);
    q.type = (faid_ll_type)(FAID_LL_HELLO + (t < 0 ? 0 : t) % 3);
    int c = take(f);
    q.credit = c < 0 ? 0 : (c & 0x80) ? take64(f, 8) : (uint64_t)c; /* huge credits too */
    int s = take(f);
    q.has_seq = s >= 0 && (s & 1);
    if (s >= 0 && (s & 2))
        q.seq = take64(f, 8);
    else /* near what it has seen, so that acks land inside the ring */
        q.seq = pr->last_seq + (uint64_t)(int64_t)(int8_t)take(f);
    snprintf(q.instance, sizeof(q.instance), "%s",
             (s >= 0 && (s & 4)) ? "0123456789abcdef" : instance);
    uint8_t buf[256];
    size_t len = 0;
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_proto_encode_ll_request(&q, buf, sizeof(buf), &len, &d) != 0)
        abort();
    zmq_send(pr->sock, buf, len, ZMQ_DONTWAIT);
}

/* Reads what faid sent this consumer; checks each series message against what was put. */
static void drain(peer *pr, uint64_t next_seq)
{
    for (;;) {
        char topic[32];
        int tn = zmq_recv(pr->sock, topic, sizeof(topic) - 1, ZMQ_DONTWAIT);
        if (tn < 0)
            return;
        topic[tn < (int)sizeof(topic) - 1 ? tn : (int)sizeof(topic) - 1] = '\0';
        int more = 0;
        size_t ml = sizeof(more);
        zmq_getsockopt(pr->sock, ZMQ_RCVMORE, &more, &ml);
        if (!more)
            abort(); /* faid always sends [topic, body] */
        zmq_msg_t body;
        zmq_msg_init(&body);
        int n;
        while ((n = zmq_msg_recv(&body, pr->sock, 0)) < 0 && zmq_errno() == EINTR)
            ;
        if (n < 0)
            abort();
        const uint8_t *b = zmq_msg_data(&body);
        size_t bl = zmq_msg_size(&body);
        if (!strcmp(topic, FAID_TOPIC_WELCOME) || !strcmp(topic, FAID_TOPIC_REFUSED)) {
            faid_mp_obj v;
            if (faid_proto_map_find(b, bl, FAID_K_INSTANCE, &v, NULL, NULL) != 0 ||
                v.type != FAID_MP_STR)
                abort();
        } else if (strcmp(topic, "ping") != 0) {
            uint64_t seq;
            if (bl < sizeof(seq))
                abort();
            memcpy(&seq, b, sizeof(seq));
            if (seq >= next_seq)
                abort(); /* never put */
            for (size_t k = sizeof(seq); k < bl; k++)
                if (b[k] != pattern(seq, k))
                    abort();
            pr->last_seq = seq;
            pr->has_last = 1;
        }
        zmq_msg_close(&body);
    }
}

static uint64_t given_up(const faid_stats *st)
{
    uint64_t n = 0;
    for (int k = 0; k < FAID_NMSGKINDS; k++)
        n += st->ll_given_up[k];
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A context per input: zmq_ctx_term waits until every socket is gone, so no input sees
     * the last one's sockets (inproc needs no I/O thread). */
    faid_log_set_level(FAID_LOG_ERROR); /* the session's INFO lines, once per input, slow it */
    ctx = zmq_ctx_new();
    if (!ctx)
        abort();
    zmq_ctx_set(ctx, ZMQ_IO_THREADS, 0);
    fz f = {data, size, 0};
    char ep[64];
    snprintf(ep, sizeof(ep), "inproc://fuzz-lossless-%u", serial++);
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0, hwm = FAID_LL_SNDHWM;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(router, ZMQ_SNDHWM, &hwm, sizeof(hwm));
    int brc;
    while ((brc = zmq_bind(router, ep)) != 0 && zmq_errno() == EINTR)
        ;
    if (brc != 0) {
        fprintf(stderr, "fuzz_lossless: bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
        abort();
    }
    static faid_stats st;
    faid_stats_init(&st);
    faid_diag d;
    faid_diag_clear(&d);
    /* First byte: the consumer timeout (0: any other consumer takes over at once). */
    int64_t timeout_ns = take(&f) & 1 ? 10000000000ll : 0;
    faid_lossless *ll = faid_lossless_new(ctx, router, RING_BYTES, timeout_ns, &st, &d);
    if (!ll)
        abort();
    peer a = {.id = {'A'}, .idlen = 1}, b = {.id = {'B', 0, 'b'}, .idlen = 3};
    int idb = take(&f);
    if (idb > 0) /* consumer A's routing id from the input (ZeroMQ reserves a leading 0 byte) */
        a.idlen = (size_t)(idb % 8) + 1, a.id[0] = (uint8_t)idb;
    a.sock = dealer(ep, &a);
    b.sock = dealer(ep, &b);
    const char *kinds[] = {FAID_TOPIC_START, FAID_TOPIC_RESULT, FAID_TOPIC_END, FAID_TOPIC_ERROR};
    uint64_t next_seq = 0, accepted = 0;
    uint8_t body[8 + 255 * 8];
    int ops = 0, reconnects = 0;
    for (int op; (op = take(&f)) >= 0 && ops < 512; ops++) {
        switch (op & 7) {
        case 0: {
            int k = take(&f), l = take(&f);
            size_t len = 8 + (size_t)(l < 0 ? 0 : l) * 8;
            if (l == 255)
                len = RING_BYTES + 64; /* larger than the ring: given up at once */
            uint8_t *bp = len <= sizeof(body) ? body : malloc(len);
            if (!bp)
                abort();
            memcpy(bp, &next_seq, 8);
            for (size_t j = 8; j < len; j++)
                bp[j] = pattern(next_seq, j);
            int rc = faid_lossless_put(ll, kinds[(k < 0 ? 0 : k) % 4], next_seq, bp, len);
            if (rc == 0)
                accepted++;
            else if (rc != FAID_EBUSY && rc != FAID_ESIZE)
                abort();
            if (rc == FAID_ESIZE)
                accepted++; /* counted as given up */
            if (bp != body)
                free(bp);
            if (rc != FAID_EBUSY)
                next_seq++;
            break;
        }
        case 1:
            send_req(&a, faid_lossless_instance(ll), &f);
            break;
        case 2: {
            int l = take(&f);
            size_t len = l < 0 ? 0 : (size_t)l;
            if (len > f.n - f.at)
                len = f.n - f.at;
            zmq_send(a.sock, f.p + f.at, len, ZMQ_DONTWAIT);
            f.at += len;
            break;
        }
        case 3:
            send_req(&b, faid_lossless_instance(ll), &f);
            break;
        case 4:
            faid_lossless_pump(ll, 0);
            drain(&a, next_seq);
            drain(&b, next_seq);
            break;
        case 5:
            faid_lossless_give_up_oldest(ll);
            break;
        case 6:
            faid_lossless_give_up_all(ll);
            break;
        case 7:
            if (reconnects++ == 8) /* sockets are reaped asynchronously: a bounded number */
                break;
            zmq_close(a.sock);
            a.sock = dealer(ep, &a);
            break;
        }
        if (faid_lossless_held(ll) != accepted - st.ll_acked - given_up(&st))
            abort();
        if (st.ll_acked > st.lossless_sent)
            abort(); /* acknowledged before it was ever sent */
    }
    faid_lossless_pump(ll, 0);
    drain(&a, next_seq);
    drain(&b, next_seq);
    faid_lossless_give_up_all(ll);
    if (faid_lossless_held(ll) != 0 || accepted != st.ll_acked + given_up(&st))
        abort();
    zmq_close(a.sock);
    zmq_close(b.sock);
    faid_lossless_destroy(&ll);
    zmq_close(router);
    while (zmq_ctx_term(ctx) != 0 && zmq_errno() == EINTR)
        ;
    return 0;
}
