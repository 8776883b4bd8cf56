/* faid_client: ZeroMQ sockets and message handling for faid's clients (see faid_client.h).
 * Each object owns its own ZeroMQ context with one I/O thread, so objects are independent and a
 * destroy never waits on another object's sockets. Received messages are kept as zmq_msg_t and
 * decoded in place (proto's decoders hand out views), so a result is never copied. */
#include "faid_client.h"

#include "faid_dtype.h"
#include "faid_keyfile.h"
#include "faid_log.h"
#include "faid_npy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* ------------------------------------------------------------------------------------------- */
/* Common                                                                                        */

static int zfail(faid_diag *d, const char *what, const char *endpoint)
{
    return faid_fail(d, FAID_EZMQ, "%s %s: %s", what, endpoint, zmq_strerror(zmq_errno()));
}

static int set_int(void *sock, int opt, int v)
{
    return zmq_setsockopt(sock, opt, &v, sizeof v);
}

/* Opens a context and a socket of type and connects (or binds) it to endpoint. */
static int open_socket(void **ctx, void **sock, int type, const char *endpoint, int bind,
                       faid_diag *d)
{
    *sock = NULL;
    *ctx = zmq_ctx_new();
    if (!*ctx)
        return zfail(d, "cannot create a ZeroMQ context for", endpoint);
    *sock = zmq_socket(*ctx, type);
    if (!*sock) {
        int rc = zfail(d, "cannot create a socket for", endpoint);
        zmq_ctx_term(*ctx);
        *ctx = NULL;
        return rc;
    }
    /* Closing never blocks unless the caller asks for it later (the sender sets its own). */
    set_int(*sock, ZMQ_LINGER, 0);
    return 0;
}

static int attach(void *sock, const char *endpoint, int bind, faid_diag *d)
{
    int rc = bind ? zmq_bind(sock, endpoint) : zmq_connect(sock, endpoint);
    if (rc != 0)
        return zfail(d, bind ? "cannot bind" : "cannot connect to", endpoint);
    return 0;
}

/* ---- CURVE and the handshake monitor ---- */

#define MON_ENDPOINT "inproc://faid-client-monitor" /* each object has its own context */

int faid_curve_keys_load(faid_curve_keys *k, const char *server_pub_file, const char *key_file,
                         faid_diag *d)
{
    memset(k, 0, sizeof(*k));
    if (!server_pub_file && !key_file)
        return 0;
    if (!server_pub_file || !key_file)
        return faid_fail(d, FAID_EINVAL,
                         "CURVE needs both faid's public key (--server-key FAID.pub) and this "
                         "client's key pair (--key CLIENT.key)");
    if (!zmq_has("curve"))
        return faid_fail(d, FAID_EUNSUP, "this libzmq was built without CURVE (libsodium)");
    faid_keytext srv, me;
    int rc = faid_keyfile_read(server_pub_file, 0, &srv, d);
    if (!rc)
        rc = faid_keyfile_read(key_file, 1, &me, d);
    if (rc)
        return rc;
    char derived[41];
    if (zmq_curve_public(derived, me.secret_key) != 0) {
        memset(&me, 0, sizeof(me));
        return faid_fail(d, FAID_EFORMAT, "%s: not a CURVE secret key", key_file);
    }
    if (me.public_key[0] && strcmp(me.public_key, derived) != 0) {
        memset(&me, 0, sizeof(me));
        return faid_fail(d, FAID_EFORMAT,
                         "%s: its public-key line does not belong to its secret key", key_file);
    }
    memcpy(k->server_public, srv.public_key, sizeof(k->server_public));
    memcpy(k->public_key, derived, sizeof(k->public_key));
    memcpy(k->secret_key, me.secret_key, sizeof(k->secret_key));
    memset(&me, 0, sizeof(me));
    return 0;
}

static int use_curve(const faid_curve_keys *k)
{
    return k && k->server_public[0];
}

/* Makes sock a CURVE client when keys are given, and opens *mon, a PAIR receiving the socket's
 * handshake events (for plain sockets too: a plain client of a CURVE faid sees a mechanism
 * mismatch there). Before the socket connects. */
static int secure(void *ctx, void *sock, const faid_curve_keys *k, void **mon, const char *endpoint,
                  faid_diag *d)
{
    *mon = NULL;
    if (use_curve(k) && (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, k->server_public, 40) != 0 ||
                         zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, k->public_key, 40) != 0 ||
                         zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->secret_key, 40) != 0))
        return zfail(d, "cannot set the CURVE keys for", endpoint);
    if (zmq_socket_monitor(
            sock, MON_ENDPOINT,
            ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0)
        return zfail(d, "cannot watch the handshake with", endpoint);
    *mon = zmq_socket(ctx, ZMQ_PAIR);
    if (!*mon || zmq_connect(*mon, MON_ENDPOINT) != 0) {
        int rc = zfail(d, "cannot watch the handshake with", endpoint);
        if (*mon)
            zmq_close(*mon);
        *mon = NULL;
        return rc;
    }
    set_int(*mon, ZMQ_LINGER, 0);
    return 0;
}

/* Handshakes in a row that failed without detail before one is taken as refused: a faid
 * (libzmq 4.3.4) that gets the other mechanism than its own, or a CURVE hello under another
 * server key, closes the connection without saying why; libzmq reconnects every 100 ms, so
 * three take about 0.3 s, while a single one can be a faid that stopped mid-greeting. */
#define HS_NODETAIL_LIMIT 3

/* Reads the waiting handshake events: FAID_EAUTH with the reason on a refused handshake, else 0.
 * *nodetail counts the failures without detail since the last handshake that succeeded. */
static int mon_check(void *mon, const char *endpoint, int curve, int *nodetail, faid_diag *d)
{
    for (;;) {
        zmq_msg_t head, addr;
        zmq_msg_init(&head);
        if (zmq_msg_recv(&head, mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&head);
            return 0;
        }
        uint16_t ev = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&head) >= 6) {
            memcpy(&ev, zmq_msg_data(&head), 2);
            memcpy(&value, (const uint8_t *)zmq_msg_data(&head) + 2, 4);
        }
        int more = zmq_msg_more(&head);
        zmq_msg_close(&head);
        if (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, mon, 0);
            zmq_msg_close(&addr);
        }
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            return faid_fail(d, FAID_EAUTH,
                             "faid at %s refused this client's key (ZAP status %u): "
                             "authentication: is the .pub of --key in faid's "
                             "security.authorized_keys?",
                             endpoint, (unsigned)value);
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
            value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            return faid_fail(d, FAID_EAUTH,
                             curve ? "faid at %s does not use CURVE (security.curve is off): "
                                     "connect without --server-key and --key"
                                   : "faid at %s requires CURVE authentication: give "
                                     "--server-key FAID.pub and --key CLIENT.key",
                             endpoint);
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && curve)
            return faid_fail(d, FAID_EAUTH,
                             "CURVE handshake with faid at %s failed (protocol error 0x%x): "
                             "authentication: is --server-key faid's public key?",
                             endpoint, (unsigned)value);
        if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            *nodetail = 0;
        if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && ++*nodetail >= HS_NODETAIL_LIMIT)
            return faid_fail(d, FAID_EAUTH,
                             curve ? "CURVE handshake with faid at %s failed %d times: "
                                     "authentication: is --server-key faid's public key (the "
                                     "NAME.pub of its security.secret_key_file), and does faid "
                                     "run with security.curve?"
                                   : "handshake with faid at %s failed %d times: authentication: "
                                     "faid probably requires CURVE (give --server-key FAID.pub "
                                     "and --key CLIENT.key)",
                             endpoint, *nodetail);
    }
}

/* Waits up to timeout_ms (-1: forever) for events on sock while watching mon: 1 ready, 0 timeout
 * (or a signal), FAID_EAUTH on a refused handshake, FAID_EZMQ on a poll failure (d says why). */
static int wait_sock(void *sock, short events, void *mon, int curve, int *nodetail,
                     const char *endpoint, int timeout_ms, faid_diag *d)
{
    zmq_pollitem_t it[2] = {{sock, 0, events, 0}, {mon, 0, ZMQ_POLLIN, 0}};
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : faid_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        long wait = -1;
        if (timeout_ms >= 0) {
            int64_t left = deadline - faid_now_ns();
            wait = left > 0 ? (long)((left + 999999) / 1000000) : 0;
        }
        int n = zmq_poll(it, mon ? 2 : 1, wait);
        if (n < 0 && zmq_errno() == EINTR)
            return 0; /* a signal: let the caller look at its flags */
        if (n < 0)
            return zfail(d, "cannot poll", endpoint);
        if (mon && (it[1].revents & ZMQ_POLLIN)) {
            int rc = mon_check(mon, endpoint, curve, nodetail, d);
            if (rc)
                return rc;
        }
        if (it[0].revents & events)
            return 1;
        if (n == 0 || (timeout_ms >= 0 && faid_now_ns() >= deadline))
            return 0;
    }
}

static void close_monitored(void **ctx, void **sock, void **mon)
{
    if (*sock && *mon)
        zmq_socket_monitor(*sock, NULL, 0);
    if (*mon)
        zmq_close(*mon);
    *mon = NULL;
    if (*sock)
        zmq_close(*sock);
    *sock = NULL;
    if (*ctx)
        zmq_ctx_term(*ctx);
    *ctx = NULL;
}

/* ------------------------------------------------------------------------------------------- */
/* Arrays                                                                                        */

int faid_array_view_to_f64(const faid_array_view *a, double *out, size_t n, faid_diag *d)
{
    if (a->nelem != n)
        return faid_fail(d, FAID_ESIZE, "array of %llu elements where %zu were expected",
                         (unsigned long long)a->nelem, n);
    size_t es = faid_dtype_size(a->dtype);
    if (es == 0 || a->dtype == FAID_DT_INVALID || a->dtype == FAID_DT_BOOL)
        return faid_fail(d, FAID_EDTYPE, "array dtype \"%s\" has no numeric value", a->descr);
    if (a->nbytes < n * es)
        return faid_fail(d, FAID_ETRUNC, "array holds %zu bytes, %zu needed", a->nbytes, n * es);
    /* The data sits at any offset inside a msgpack buffer: copy through an aligned chunk. */
    uint64_t chunk[256];
    size_t per = sizeof(chunk) / es;
    for (size_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? n - i : per;
        memcpy(chunk, a->data + i * es, k * es);
        faid_dtype_to_f64(a->dtype, chunk, k, out + i);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------- */
/* Subscriber                                                                                    */

/* Lossless consumer timing: a hello is repeated this often until faid welcomes it; acks go out
 * once a quarter of the credit is delivered, or ACK_NS after a delivery, and at least every
 * HEARTBEAT_NS (faid counts a consumer silent for output.lossless_consumer_timeout as gone). */
#define HELLO_NS     (1000ll * 1000000ll)
#define ACK_NS       (100ll * 1000000ll)
#define HEARTBEAT_NS (1000ll * 1000000ll)
#define SLICE_MS     100

struct faid_sub {
    void *ctx, *sock, *mon;
    int curve, nodetail;
    faid_sub_kind kind;
    char endpoint[256];
    zmq_msg_t body; /* the message the last faid_sub_msg views */
    int have_body;
    faid_series_info series;
    /* the last starts (copies of series, newest at kept_next - 1), for results of older series */
    faid_series_info kept[FAID_SUB_SERIES_KEPT];
    int kept_next;
    /* lossless session */
    uint32_t credit;
    int welcomed;
    int64_t next_hello_ns, last_ack_ns;
    int has_last;          /* last_seq valid (in instance ll.instance) */
    uint64_t last_seq;     /* msg_number of the last message delivered */
    int delivered_pending; /* the last delivered message is not counted as consumed yet */
    uint64_t unacked;      /* consumed messages not acknowledged yet */
    int has_consumed;
    uint64_t consumed_seq; /* msg_number of the last message the caller is done with */
    faid_sub_ll_stats ll;
};

static int ll_send(faid_sub *s, faid_ll_type type)
{
    faid_ll_request q;
    memset(&q, 0, sizeof(q));
    q.type = type;
    q.credit = s->credit;
    q.has_seq = s->has_consumed;
    q.seq = s->consumed_seq;
    snprintf(q.instance, sizeof(q.instance), "%s", s->ll.instance);
    uint8_t buf[256];
    size_t len = 0;
    if (faid_proto_encode_ll_request(&q, buf, sizeof(buf), &len, NULL))
        return -1;
    if (zmq_send(s->sock, buf, len, ZMQ_DONTWAIT) < 0)
        return -1;
    s->last_ack_ns = faid_now_ns();
    s->unacked = 0;
    return 0;
}

/* Hello until welcomed; then acks by the rules above. */
static void ll_tick(faid_sub *s)
{
    int64_t now = faid_now_ns();
    if (!s->welcomed) {
        if (now >= s->next_hello_ns) {
            ll_send(s, FAID_LL_HELLO);
            s->next_hello_ns = now + HELLO_NS;
        }
        return;
    }
    if (s->unacked >= (s->credit + 3) / 4 || (s->unacked > 0 && now - s->last_ack_ns >= ACK_NS) ||
        now - s->last_ack_ns >= HEARTBEAT_NS)
        ll_send(s, FAID_LL_ACK);
}

faid_sub *faid_sub_new(const char *endpoint, faid_sub_kind kind, int rcvhwm, faid_diag *d)
{
    faid_sub_opts o = {.rcvhwm = rcvhwm};
    return faid_sub_new_opts(endpoint, kind, &o, d);
}

faid_sub *faid_sub_new_opts(const char *endpoint, faid_sub_kind kind, const faid_sub_opts *o,
                            faid_diag *d)
{
    static const faid_sub_opts none;
    if (!o)
        o = &none;
    if (!endpoint || !*endpoint) {
        faid_fail(d, FAID_EINVAL, "subscriber: no endpoint given");
        return NULL;
    }
    size_t nlen = o->name ? strlen(o->name) : 0;
    if (o->name && (nlen == 0 || nlen > 255)) {
        faid_fail(d, FAID_EINVAL, "subscriber: a consumer name has 1 to 255 bytes");
        return NULL;
    }
    faid_sub *s = calloc(1, sizeof(*s));
    if (!s) {
        faid_fail(d, FAID_ENOMEM, "subscriber: out of memory");
        return NULL;
    }
    s->kind = kind;
    s->credit = o->credit ? o->credit : 256;
    snprintf(s->endpoint, sizeof(s->endpoint), "%s", endpoint);
    if (open_socket(&s->ctx, &s->sock, kind == FAID_SUB_LOSSLESS ? ZMQ_DEALER : ZMQ_SUB, endpoint,
                    0, d))
        goto fail;
    s->curve = use_curve(o->curve);
    if (secure(s->ctx, s->sock, o->curve, &s->mon, endpoint, d))
        goto fail;
    if (o->max_message_bytes > 0) {
        int64_t mx = o->max_message_bytes;
        zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &mx, sizeof mx);
    }
    if (o->rcvhwm > 0)
        set_int(s->sock, ZMQ_RCVHWM, o->rcvhwm);
    else if (kind == FAID_SUB_LOSSLESS)
        set_int(s->sock, ZMQ_RCVHWM, 0); /* bounded by the credit */
    if (kind == FAID_SUB_LOSSLESS && nlen &&
        zmq_setsockopt(s->sock, ZMQ_ROUTING_ID, o->name, nlen) != 0) {
        zfail(d, "cannot use that consumer name at", endpoint);
        goto fail;
    }
    if (kind == FAID_SUB_PUB && zmq_setsockopt(s->sock, ZMQ_SUBSCRIBE, "", 0) != 0) {
        zfail(d, "cannot subscribe at", endpoint);
        goto fail;
    }
    if (attach(s->sock, endpoint, 0, d))
        goto fail;
    if (kind == FAID_SUB_LOSSLESS)
        ll_tick(s); /* the hello: queued until the connection is up */
    return s;
fail:
    faid_sub_destroy(&s);
    return NULL;
}

void faid_sub_destroy(faid_sub **ps)
{
    if (!ps || !*ps)
        return;
    faid_sub *s = *ps;
    if (s->have_body)
        zmq_msg_close(&s->body);
    if (s->kind == FAID_SUB_LOSSLESS && s->sock) {
        /* The caller is done with what it got: acknowledge it, leave, let it go out. */
        if (s->delivered_pending) {
            s->delivered_pending = 0;
            s->has_consumed = 1;
            s->consumed_seq = s->last_seq;
        }
        if (s->welcomed)
            ll_send(s, FAID_LL_ACK);
        ll_send(s, FAID_LL_BYE);
        set_int(s->sock, ZMQ_LINGER, 500);
    }
    close_monitored(&s->ctx, &s->sock, &s->mon);
    faid_series_info_clear(&s->series);
    for (int i = 0; i < FAID_SUB_SERIES_KEPT; i++)
        faid_series_info_clear(&s->kept[i]);
    free(s);
    *ps = NULL;
}

void faid_sub_lossless_stats(const faid_sub *s, faid_sub_ll_stats *out)
{
    *out = s->ll;
}

const faid_series_info *faid_sub_series(const faid_sub *s)
{
    return &s->series;
}

const faid_series_info *faid_sub_series_of(const faid_sub *s, uint64_t series_id,
                                           uint64_t setup_version)
{
    /* Newest first: a series id used again is the later one. */
    for (int k = 1; k <= FAID_SUB_SERIES_KEPT; k++) {
        const faid_series_info *si =
            &s->kept[(s->kept_next - k + 2 * FAID_SUB_SERIES_KEPT) % FAID_SUB_SERIES_KEPT];
        if (si->valid && si->series_id == series_id && si->setup_version == setup_version)
            return si;
    }
    return NULL;
}

/* Keeps a copy of the series information of the start just received. */
static void keep_series(faid_sub *s)
{
    faid_series_info *dst = &s->kept[s->kept_next];
    faid_series_info_clear(dst);
    *dst = s->series;
    dst->radial = NULL;
    if (s->series.nbins) {
        dst->radial = malloc(s->series.nbins * sizeof(double));
        if (!dst->radial) {
            /* Without memory this series' results are written with bin numbers. */
            memset(dst, 0, sizeof(*dst));
            return;
        }
        memcpy(dst->radial, s->series.radial, s->series.nbins * sizeof(double));
    }
    s->kept_next = (s->kept_next + 1) % FAID_SUB_SERIES_KEPT;
}

/* Copies a top-level string value of the message into out ("" when absent or not a string). */
static void find_str(const uint8_t *body, size_t len, const char *key, char *out, size_t cap)
{
    faid_mp_obj v;
    out[0] = '\0';
    if (faid_proto_map_find(body, len, key, &v, NULL, NULL) == 0 && v.type == FAID_MP_STR &&
        faid_mp_to_cstr(&v, out, cap) != 0)
        out[0] = '\0';
}

void faid_series_info_clear(faid_series_info *si)
{
    free(si->radial);
    memset(si, 0, sizeof(*si));
}

static int update_series(faid_series_info *si, const faid_sub_msg *msg, faid_diag *d)
{
    const faid_out_msg *m = &msg->m;
    double *radial = NULL;
    size_t n = (size_t)m->radial.nelem;
    if (n > 0) {
        radial = malloc(n * sizeof(double));
        if (!radial)
            return faid_fail(d, FAID_ENOMEM, "start message: no memory for %zu bins", n);
        int rc = faid_array_view_to_f64(&m->radial, radial, n, d);
        if (rc) {
            free(radial);
            faid_diag_prefix(d, "start message, key \"%s\": ", FAID_K_RADIAL);
            return rc;
        }
    }
    free(si->radial);
    si->radial = radial;
    si->nbins = n;
    si->valid = 1;
    si->series_id = m->series_id;
    si->setup_version = m->setup_version;
    snprintf(si->unit, sizeof(si->unit), "%s", m->unit);
    find_str(msg->body, msg->len, FAID_K_SERIES_UNIQUE_ID, si->series_unique_id,
             sizeof(si->series_unique_id));
    find_str(msg->body, msg->len, FAID_K_SOFTWARE_VERSION, si->software_version,
             sizeof(si->software_version));
    find_str(msg->body, msg->len, FAID_K_CONFIG_HASH, si->config_hash, sizeof(si->config_hash));
    snprintf(si->peaks_algorithm, sizeof(si->peaks_algorithm), "%s", m->peaks_algorithm);
    snprintf(si->peaks_params, sizeof(si->peaks_params), "%s", m->peaks_params);
    return 0;
}

/* Decodes msg->body (topic already set) and checks the topic against the type. */
static int decode_body(faid_sub_msg *msg, faid_series_info *si, faid_diag *d)
{
    int rc = faid_proto_decode_output(msg->body, msg->len, &msg->m, d);
    if (rc)
        return rc;
    if (msg->topic[0] && strcmp(msg->topic, faid_out_type_name(msg->m.type)) != 0)
        return faid_fail(d, FAID_EPROTO, "topic \"%s\" but type \"%s\"", msg->topic,
                         faid_out_type_name(msg->m.type));
    if (msg->m.type == FAID_OUT_START && si)
        return update_series(si, msg, d);
    return 0;
}

int faid_out_decode(const uint8_t *body, size_t len, faid_sub_msg *msg, faid_series_info *si,
                    faid_diag *d)
{
    memset(msg, 0, sizeof(*msg));
    msg->body = body;
    msg->len = len;
    msg->recv_wall_ns = faid_wall_ns();
    return decode_body(msg, si, d);
}

/* Reads every part of one message: [topic, body] on PUB and the lossless channel (or [body]).
 * Extra parts are consumed so the next receive starts on a new message; the body stays in
 * s->body. */
static int read_message(faid_sub *s, faid_sub_msg *msg, int *nparts, faid_diag *d)
{
    int more = 1;
    *nparts = 0;
    msg->topic[0] = '\0'; /* a message skipped before this one may have left its topic */
    zmq_msg_t part;
    while (more) {
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, s->sock, *nparts == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&part);
            return zfail(d, "cannot receive from", s->endpoint);
        }
        more = zmq_msg_more(&part);
        (*nparts)++;
        if (*nparts == 1 && more) {
            size_t tl = zmq_msg_size(&part);
            if (tl >= sizeof(msg->topic))
                tl = sizeof(msg->topic) - 1;
            memcpy(msg->topic, zmq_msg_data(&part), tl);
            msg->topic[tl] = '\0';
            zmq_msg_close(&part);
        } else if (!s->have_body) {
            s->body = part;
            s->have_body = 1;
        } else {
            zmq_msg_close(&part);
        }
    }
    msg->recv_wall_ns = faid_wall_ns();
    msg->body = zmq_msg_data(&s->body);
    msg->len = zmq_msg_size(&s->body);
    return 0;
}

/* A welcome, refusal or ping of the lossless channel: 1 when msg was one (handled), else 0. */
static int ll_control(faid_sub *s, const faid_sub_msg *msg, int *refused, faid_diag *d)
{
    if (strcmp(msg->topic, "ping") == 0)
        return 1;
    int welcome = strcmp(msg->topic, FAID_TOPIC_WELCOME) == 0;
    if (!welcome && strcmp(msg->topic, FAID_TOPIC_REFUSED) != 0)
        return 0;
    if (welcome) {
        char inst[FAID_LL_INSTANCE_MAX];
        find_str(msg->body, msg->len, FAID_K_INSTANCE, inst, sizeof(inst));
        /* msg_numbers restart with every faid run: what was delivered before says nothing. */
        if (strcmp(inst, s->ll.instance) != 0) {
            s->has_last = 0;
            s->has_consumed = 0;
            s->delivered_pending = 0;
            s->unacked = 0;
            snprintf(s->ll.instance, sizeof(s->ll.instance), "%s", inst);
        }
        s->welcomed = 1;
        s->ll.sessions++;
        s->last_ack_ns = faid_now_ns();
        return 1;
    }
    char why[512];
    find_str(msg->body, msg->len, FAID_K_MESSAGE, why, sizeof(why));
    s->welcomed = 0;
    s->ll.refused++;
    s->next_hello_ns = faid_now_ns() + HELLO_NS;
    *refused = 1;
    faid_fail(d, FAID_EBUSY, "faid at %s refused this consumer: %s", s->endpoint,
              why[0] ? why : "(no reason given)");
    return 1;
}

int faid_sub_recv(faid_sub *s, int timeout_ms, faid_sub_msg *msg, faid_diag *d)
{
    memset(msg, 0, sizeof(*msg));
    int lossless = s->kind == FAID_SUB_LOSSLESS;
    if (lossless && s->delivered_pending) {
        /* The caller came back for more: the message it had is consumed. */
        s->delivered_pending = 0;
        s->has_consumed = 1;
        s->consumed_seq = s->last_seq;
        s->unacked++;
    }
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : faid_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        if (s->have_body) {
            zmq_msg_close(&s->body);
            s->have_body = 0;
        }
        int wait_ms = timeout_ms;
        if (lossless) {
            ll_tick(s);
            int64_t left = deadline - faid_now_ns();
            if (left < 0)
                left = 0;
            wait_ms = left / 1000000 < SLICE_MS ? (int)(left / 1000000) : SLICE_MS;
        }
        int ready =
            wait_sock(s->sock, ZMQ_POLLIN, s->mon, s->curve, &s->nodetail, s->endpoint, wait_ms, d);
        if (ready < 0)
            return ready;
        if (ready == 0) {
            if (!lossless || faid_now_ns() >= deadline)
                return faid_fail(d, FAID_ETIMEOUT, "no message from %s within %d ms", s->endpoint,
                                 timeout_ms);
            continue;
        }
        int nparts = 0;
        int rc = read_message(s, msg, &nparts, d);
        if (rc)
            return rc;
        if (nparts > 2)
            return faid_fail(d, FAID_EPROTO, "message from %s has %d parts, expected at most 2",
                             s->endpoint, nparts);
        int refused = 0;
        if (lossless && ll_control(s, msg, &refused, d)) {
            if (refused)
                return FAID_EBUSY;
            continue;
        }
        rc = decode_body(msg, &s->series, d);
        if (rc) {
            faid_diag_prefix(d, "%s message from %s: ", msg->topic[0] ? msg->topic : "untitled",
                             s->endpoint);
            return rc;
        }
        if (lossless && msg->m.type != FAID_OUT_STATS) {
            uint64_t seq = msg->m.msg_number;
            if (s->has_last && seq <= s->last_seq) {
                s->ll.duplicates++;
                continue;
            }
            s->has_last = 1;
            s->last_seq = seq;
            s->delivered_pending = 1;
            s->ll.delivered++;
        }
        if (msg->m.type == FAID_OUT_START)
            keep_series(s);
        return 0;
    }
}

void *faid_sub_zsocket(const faid_sub *s)
{
    return s->sock;
}

const char *faid_sub_endpoint(const faid_sub *s)
{
    return s->endpoint;
}

/* ------------------------------------------------------------------------------------------- */
/* Control                                                                                       */

struct faid_ctl {
    void *ctx, *sock, *mon;
    int nodetail;
    faid_curve_keys keys;
    char endpoint[256];
    int timeout_ms;
    zmq_msg_t reply;
    int have_reply;
};

static int ctl_open(faid_ctl *c, faid_diag *d)
{
    int rc = open_socket(&c->ctx, &c->sock, ZMQ_REQ, c->endpoint, 0, d);
    if (rc)
        return rc;
    if ((rc = secure(c->ctx, c->sock, &c->keys, &c->mon, c->endpoint, d)))
        return rc;
    set_int(c->sock, ZMQ_SNDTIMEO, c->timeout_ms);
    return attach(c->sock, c->endpoint, 0, d);
}

faid_ctl *faid_ctl_new(const char *endpoint, int timeout_ms, faid_diag *d)
{
    return faid_ctl_new_curve(endpoint, timeout_ms, NULL, d);
}

faid_ctl *faid_ctl_new_curve(const char *endpoint, int timeout_ms, const faid_curve_keys *curve,
                             faid_diag *d)
{
    if (!endpoint || !*endpoint || timeout_ms <= 0) {
        faid_fail(d, FAID_EINVAL, "control: need an endpoint and a positive timeout");
        return NULL;
    }
    faid_ctl *c = calloc(1, sizeof(*c));
    if (!c) {
        faid_fail(d, FAID_ENOMEM, "control: out of memory");
        return NULL;
    }
    snprintf(c->endpoint, sizeof(c->endpoint), "%s", endpoint);
    c->timeout_ms = timeout_ms;
    if (use_curve(curve))
        c->keys = *curve;
    if (ctl_open(c, d)) {
        faid_ctl_destroy(&c);
        return NULL;
    }
    return c;
}

void faid_ctl_destroy(faid_ctl **pc)
{
    if (!pc || !*pc)
        return;
    faid_ctl *c = *pc;
    if (c->have_reply)
        zmq_msg_close(&c->reply);
    close_monitored(&c->ctx, &c->sock, &c->mon);
    memset(&c->keys, 0, sizeof(c->keys));
    free(c);
    *pc = NULL;
}

const char *faid_ctl_endpoint(const faid_ctl *c)
{
    return c->endpoint;
}

static int ctl_timeout(faid_ctl *c, faid_diag *d)
{
    /* A REQ socket that sent and got no answer cannot send again: start over with a new one. */
    close_monitored(&c->ctx, &c->sock, &c->mon);
    faid_diag tmp;
    if (ctl_open(c, &tmp))
        close_monitored(&c->ctx, &c->sock, &c->mon);
    return faid_fail(d, FAID_ETIMEOUT,
                     "no answer from faid at %s within %g s (not running or not reachable, or "
                     "the connection was never admitted: authentication?)",
                     c->endpoint, c->timeout_ms / 1000.0);
}

int faid_ctl_call(faid_ctl *c, const faid_ctl_request *q, faid_ctl_reply *r, faid_diag *d)
{
    memset(r, 0, sizeof(*r));
    if (c->have_reply) {
        zmq_msg_close(&c->reply);
        c->have_reply = 0;
    }
    if (!c->sock) {
        int rc = ctl_open(c, d);
        if (rc)
            return rc;
    }
    uint8_t req[1200];
    size_t len;
    int rc = faid_proto_encode_request(q, req, sizeof(req), &len, d);
    if (rc)
        return rc;
    if (zmq_send(c->sock, req, len, 0) < 0) {
        if (zmq_errno() == EAGAIN)
            return ctl_timeout(c, d);
        return zfail(d, "cannot send a request to", c->endpoint);
    }
    int ready = wait_sock(c->sock, ZMQ_POLLIN, c->mon, use_curve(&c->keys), &c->nodetail,
                          c->endpoint, c->timeout_ms, d);
    if (ready == FAID_EAUTH) {
        /* The request is stuck in this REQ socket: start over for the next call. */
        faid_diag tmp;
        close_monitored(&c->ctx, &c->sock, &c->mon);
        if (ctl_open(c, &tmp))
            close_monitored(&c->ctx, &c->sock, &c->mon);
        return ready;
    }
    if (ready < 0)
        return ready;
    if (ready == 0)
        return ctl_timeout(c, d);
    zmq_msg_init(&c->reply);
    c->have_reply = 1;
    if (zmq_msg_recv(&c->reply, c->sock, 0) < 0)
        return zfail(d, "cannot receive the reply from", c->endpoint);
    /* A multi-part reply is not part of the protocol: drain it so the socket stays usable. */
    int more = zmq_msg_more(&c->reply);
    while (more) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        if (zmq_msg_recv(&extra, c->sock, 0) < 0) {
            zmq_msg_close(&extra);
            break;
        }
        more = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
    }
    r->body = zmq_msg_data(&c->reply);
    r->len = zmq_msg_size(&c->reply);

    faid_mp_obj v;
    faid_diag fd;
    rc = faid_proto_map_find(r->body, r->len, FAID_K_OK, &v, NULL, &fd);
    if (rc || v.type != FAID_MP_BOOL)
        return faid_fail(d, FAID_EPROTO, "reply from %s to \"%s\" is not a control reply%s%s",
                         c->endpoint, faid_ctl_cmd_name(q->cmd), rc ? ": " : "", rc ? fd.msg : "");
    r->ok = v.b;
    if (!r->ok) {
        if (faid_proto_map_find(r->body, r->len, FAID_K_ERROR, &v, NULL, NULL) == 0 &&
            v.type == FAID_MP_STR) {
            size_t n = v.len < sizeof(r->error) - 1 ? v.len : sizeof(r->error) - 1;
            memcpy(r->error, v.ptr, n);
            r->error[n] = '\0';
        } else {
            snprintf(r->error, sizeof(r->error), "(no reason given)");
        }
    }
    return 0;
}

/* Human rendering of replies (faidctl status/config/...). */

static void put_indent(FILE *f, int n)
{
    for (int i = 0; i < n; i++)
        fputs("  ", f);
}

/* Prints a scalar (or a short array of scalars) on the current line; containers of other shapes
 * are left to print_value. Returns 1 when it printed, 0 when o is a container to expand. */
static int print_scalar(FILE *f, const faid_mp_obj *o)
{
    switch (o->type) {
    case FAID_MP_NIL:
        fprintf(f, "null");
        return 1;
    case FAID_MP_BOOL:
        fprintf(f, "%s", o->b ? "true" : "false");
        return 1;
    case FAID_MP_UINT:
        fprintf(f, "%llu", (unsigned long long)o->u);
        return 1;
    case FAID_MP_INT:
        fprintf(f, "%lld", (long long)o->i);
        return 1;
    case FAID_MP_FLOAT:
        fprintf(f, "%.10g", o->f);
        return 1;
    case FAID_MP_STR:
        if (o->len)
            fwrite(o->ptr, 1, o->len, f);
        return 1;
    case FAID_MP_BIN:
        fprintf(f, "<%u bytes>", o->len);
        return 1;
    case FAID_MP_EXT:
        fprintf(f, "<ext %d, %u bytes>", o->ext_type, o->len);
        return 1;
    default:
        return 0;
    }
}

static int print_value(FILE *f, faid_mpr *r, const faid_mp_obj *o, int depth, faid_diag *d);

/* Prints the items of the container whose head is o, one per line at depth; with inline_first
 * the first line continues the current one (a map as an item of a list: "- key: value"). */
static int print_children(FILE *f, faid_mpr *r, const faid_mp_obj *o, int depth, int inline_first,
                          faid_diag *d)
{
    int rc;
    for (uint32_t k = 0; k < o->len; k++) {
        faid_mp_obj key, v;
        if (k > 0 || !inline_first)
            put_indent(f, depth);
        if (o->type == FAID_MP_MAP) {
            if ((rc = faid_mpr_next(r, &key, d)))
                return rc;
            if (key.type == FAID_MP_ARRAY || key.type == FAID_MP_MAP)
                return faid_fail(d, FAID_EFORMAT, "reply: a map key is a container");
            print_scalar(f, &key);
            fprintf(f, ":");
            if ((rc = faid_mpr_next(r, &v, d)))
                return rc;
            if ((rc = print_value(f, r, &v, depth + 1, d)))
                return rc;
            continue;
        }
        fprintf(f, "-");
        if ((rc = faid_mpr_next(r, &v, d)))
            return rc;
        if (v.type == FAID_MP_MAP && v.len > 0) {
            if (depth + 1 > FAID_MP_MAX_DEPTH)
                return faid_fail(d, FAID_EFORMAT, "reply nested too deeply");
            fputc(' ', f);
            if ((rc = print_children(f, r, &v, depth + 1, 1, d)))
                return rc;
            continue;
        }
        if ((rc = print_value(f, r, &v, depth + 1, d)))
            return rc;
    }
    return 0;
}

/* Prints the value whose head is o after a "key:" already on the line. */
static int print_value(FILE *f, faid_mpr *r, const faid_mp_obj *o, int depth, faid_diag *d)
{
    if (depth > FAID_MP_MAX_DEPTH)
        return faid_fail(d, FAID_EFORMAT, "reply nested too deeply");
    if (o->type == FAID_MP_STR && o->len && memchr(o->ptr, '\n', o->len)) {
        /* Multi-line text (a YAML document): as a block under the key. */
        fprintf(f, " |\n");
        const char *p = (const char *)o->ptr, *end = p + o->len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
            put_indent(f, depth);
            fwrite(p, 1, n, f);
            fputc('\n', f);
            p += n + (nl ? 1 : 0);
        }
        return 0;
    }
    if (o->type != FAID_MP_ARRAY && o->type != FAID_MP_MAP) {
        fputc(' ', f);
        print_scalar(f, o);
        fputc('\n', f);
        return 0;
    }
    if (o->len == 0) {
        fprintf(f, " %s\n", o->type == FAID_MP_MAP ? "{}" : "[]");
        return 0;
    }
    /* Arrays of scalars fit on one line: peek at the items first. */
    if (o->type == FAID_MP_ARRAY) {
        faid_mpr peek = *r;
        int flat = 1;
        for (uint32_t k = 0; k < o->len && flat; k++) {
            faid_mp_obj it;
            if (faid_mpr_next(&peek, &it, NULL) || it.type == FAID_MP_ARRAY ||
                it.type == FAID_MP_MAP)
                flat = 0;
        }
        if (flat) {
            fprintf(f, " [");
            for (uint32_t k = 0; k < o->len; k++) {
                faid_mp_obj it;
                int rc = faid_mpr_next(r, &it, d);
                if (rc)
                    return rc;
                if (k < 16) {
                    fprintf(f, k ? ", " : "");
                    print_scalar(f, &it);
                } else if (k == 16) {
                    fprintf(f, ", ... (%u items)", o->len);
                }
            }
            fprintf(f, "]\n");
            return 0;
        }
    }
    fputc('\n', f);
    return print_children(f, r, o, depth, 0, d);
}

/* The human form of a reply: every key but the bookkeeping ones ("ok", "cmd"), nested. */
int faid_ctl_reply_print(FILE *f, const uint8_t *body, size_t len, faid_diag *d)
{
    faid_mpr r;
    faid_mp_obj o;
    faid_mpr_init(&r, body, len);
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EPROTO, "reply is not a map");
    int printed = 0;
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj key, v;
        if ((rc = faid_mpr_next(&r, &key, d)))
            return rc;
        if (key.type == FAID_MP_ARRAY || key.type == FAID_MP_MAP)
            return faid_fail(d, FAID_EFORMAT, "reply: a map key is a container");
        if (faid_mp_str_eq(&key, FAID_K_OK) || faid_mp_str_eq(&key, FAID_K_CMD) ||
            faid_mp_str_eq(&key, FAID_K_TYPE)) {
            if ((rc = faid_mpr_skip(&r, d)))
                return rc;
            continue;
        }
        if ((rc = faid_mpr_next(&r, &v, d)))
            return rc;
        /* The configuration is YAML already: print it as it is. */
        if (faid_mp_str_eq(&key, FAID_K_CONFIG) && v.type == FAID_MP_STR) {
            if (v.len) {
                fwrite(v.ptr, 1, v.len, f);
                if (v.ptr[v.len - 1] != '\n')
                    fputc('\n', f);
            }
            printed = 1;
            continue;
        }
        print_scalar(f, &key);
        fprintf(f, ":");
        if ((rc = print_value(f, &r, &v, 1, d)))
            return rc;
        printed = 1;
    }
    if (!printed)
        fprintf(f, "ok\n");
    return 0;
}

/* ------------------------------------------------------------------------------------------- */
/* Sender                                                                                        */

struct faid_sender {
    void *ctx, *sock, *mon;
    int curve, nodetail;
    char endpoint[256];
    int timeout_ms;
    uint8_t *hdr; /* encode buffer for headers */
    size_t hdr_cap;
};

faid_sender *faid_sender_new(const char *endpoint, int bind, int sndhwm, int timeout_ms,
                             faid_diag *d)
{
    return faid_sender_new_curve(endpoint, bind, sndhwm, timeout_ms, NULL, d);
}

faid_sender *faid_sender_new_curve(const char *endpoint, int bind, int sndhwm, int timeout_ms,
                                   const faid_curve_keys *curve, faid_diag *d)
{
    if (!endpoint || !*endpoint) {
        faid_fail(d, FAID_EINVAL, "sender: no endpoint given");
        return NULL;
    }
    faid_sender *s = calloc(1, sizeof(*s));
    if (!s) {
        faid_fail(d, FAID_ENOMEM, "sender: out of memory");
        return NULL;
    }
    snprintf(s->endpoint, sizeof(s->endpoint), "%s", endpoint);
    s->timeout_ms = timeout_ms;
    s->hdr_cap = 64 * 1024;
    s->hdr = malloc(s->hdr_cap);
    if (!s->hdr) {
        faid_fail(d, FAID_ENOMEM, "sender: out of memory");
        goto fail;
    }
    if (open_socket(&s->ctx, &s->sock, ZMQ_PUSH, endpoint, bind, d))
        goto fail;
    if (bind && use_curve(curve)) {
        faid_fail(d, FAID_EINVAL,
                  "sender: CURVE keys are for connecting to faid's bound input; "
                  "a bound sender serves faid's connect-mode input, which is "
                  "plain");
        goto fail;
    }
    s->curve = use_curve(curve);
    if (secure(s->ctx, s->sock, curve, &s->mon, endpoint, d))
        goto fail;
    /* Connecting: queue messages only on connections whose handshake completed, so a receiver
     * that is absent or refuses this client (CURVE) blocks the first send, which then reports
     * why, instead of filling a queue that is thrown away at exit. */
    if (!bind)
        set_int(s->sock, ZMQ_IMMEDIATE, 1);
    if (sndhwm > 0)
        set_int(s->sock, ZMQ_SNDHWM, sndhwm);
    set_int(s->sock, ZMQ_SNDTIMEO, timeout_ms);
    /* Queued frames must leave before the process exits: keep them up to the timeout. */
    set_int(s->sock, ZMQ_LINGER, timeout_ms);
    if (attach(s->sock, endpoint, bind, d))
        goto fail;
    return s;
fail:
    faid_sender_destroy(&s);
    return NULL;
}

void faid_sender_destroy(faid_sender **ps)
{
    if (!ps || !*ps)
        return;
    faid_sender *s = *ps;
    close_monitored(&s->ctx, &s->sock, &s->mon);
    free(s->hdr);
    free(s);
    *ps = NULL;
}

/* Before the first part of a message: waits until the socket takes a message (a receiver is
 * connected and has room) or the timeout, watching the handshake; 0 when it can be sent (then
 * the send itself, bounded by ZMQ_SNDTIMEO, does not wait), else an error. */
static int send_ready(faid_sender *s, const char *what, faid_diag *d)
{
    int64_t t0 = faid_now_ns();
    int rc = wait_sock(s->sock, ZMQ_POLLOUT, s->mon, s->curve, &s->nodetail, s->endpoint,
                       s->timeout_ms, d);
    if (rc == 1)
        return 0;
    if (rc == 0 && (s->timeout_ms < 0 || faid_now_ns() - t0 < (int64_t)s->timeout_ms * 1000000))
        return faid_fail(d, FAID_ESTOPPED, "%s: interrupted", what);
    if (rc == 0)
        return faid_fail(d, FAID_ETIMEOUT, "%s: no receiver took it at %s within %g s%s", what,
                         s->endpoint, s->timeout_ms / 1000.0, s->curve ? " (authentication?)" : "");
    return rc;
}

static int send_fail(faid_sender *s, const char *what, faid_diag *d)
{
    if (zmq_errno() == EAGAIN)
        return faid_fail(d, FAID_ETIMEOUT, "%s: no receiver took it at %s within %g s", what,
                         s->endpoint, s->timeout_ms / 1000.0);
    if (zmq_errno() == EINTR)
        return faid_fail(d, FAID_ESTOPPED, "%s: interrupted", what);
    return zfail(d, what, s->endpoint);
}

/* Sends the first part of a message (flags: ZMQ_SNDMORE or 0). Straight into the queue when it
 * has room; only when it has none (no receiver yet, or the queue at its high-water mark) through
 * send_ready's poll, which watches the handshake and the timeout. Polling before every message
 * cost three poll(2) and two getpid(2) per message in the sending thread (strace -c of `faidctl
 * replay`, 1000 EIGER 4M frames: 3,105 poll, 2,171 getpid; the ceiling's sender, which sends
 * blocking, none of its own). Small beside the send itself: the sending thread's CPU over about
 * 4,500 such frames went from 7.7 to 2.8 ms, while the I/O thread that writes them took 2.7 s
 * (perf stat --per-thread, 2-core box). On failure m is still the caller's to close. */
static int send_first(faid_sender *s, zmq_msg_t *m, int flags, const char *what, faid_diag *d)
{
    if (zmq_msg_send(m, s->sock, flags | ZMQ_DONTWAIT) >= 0)
        return 0;
    if (zmq_errno() != EAGAIN)
        return send_fail(s, what, d);
    int rc = send_ready(s, what, d);
    if (rc)
        return rc;
    if (zmq_msg_send(m, s->sock, flags) < 0)
        return send_fail(s, what, d);
    return 0;
}

int faid_sender_series(faid_sender *s, const faid_in_header *h, faid_diag *d)
{
    if (h->type != FAID_IN_START && h->type != FAID_IN_END)
        return faid_fail(d, FAID_EINVAL, "sender: a series message must be start or end");
    size_t len;
    int rc = faid_proto_encode_input(h, s->hdr, s->hdr_cap, &len, d);
    if (rc)
        return rc;
    const char *what = h->type == FAID_IN_START ? "series start" : "series end";
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, len) != 0)
        return zfail(d, "cannot prepare a message for", s->endpoint);
    memcpy(zmq_msg_data(&m), s->hdr, len);
    if ((rc = send_first(s, &m, 0, what, d)))
        zmq_msg_close(&m);
    return rc;
}

/* Zero-copy payloads belong to the caller, who keeps them until the sender is destroyed. */
static void keep_buffer(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

int faid_sender_parts(faid_sender *s, const void *const *parts, const size_t *lens, int n,
                      int zero_copy_part, faid_diag *d)
{
    if (n < 1)
        return faid_fail(d, FAID_EINVAL, "sender: a message needs at least one part");
    for (int k = 0; k < n; k++) {
        int flags = k + 1 < n ? ZMQ_SNDMORE : 0;
        zmq_msg_t m;
        int rc;
        if (k == zero_copy_part)
            rc = zmq_msg_init_data(&m, (void *)parts[k], lens[k], keep_buffer, NULL);
        else if ((rc = zmq_msg_init_size(&m, lens[k])) == 0 && lens[k])
            memcpy(zmq_msg_data(&m), parts[k], lens[k]);
        if (rc != 0)
            return zfail(d, "cannot prepare a part for", s->endpoint);
        /* Once the first part is queued ZeroMQ takes the others without blocking. */
        if (k == 0) {
            if ((rc = send_first(s, &m, flags, "part 1", d)))
                zmq_msg_close(&m);
            if (rc)
                return rc;
            continue;
        }
        if (zmq_msg_send(&m, s->sock, flags) < 0) {
            zmq_msg_close(&m);
            char what[32];
            snprintf(what, sizeof(what), "part %d", k + 1);
            return send_fail(s, what, d);
        }
    }
    return 0;
}

int faid_sender_image(faid_sender *s, const faid_in_header *h, const void *payload, size_t len,
                      int zero_copy, faid_diag *d)
{
    if (h->type != FAID_IN_IMAGE)
        return faid_fail(d, FAID_EINVAL, "sender: an image message needs type image");
    size_t hlen;
    int rc = faid_proto_encode_input(h, s->hdr, s->hdr_cap, &hlen, d);
    if (rc)
        return rc;
    zmq_msg_t m;
    if (zero_copy)
        rc = zmq_msg_init_data(&m, (void *)payload, len, keep_buffer, NULL);
    else if ((rc = zmq_msg_init_size(&m, len)) == 0)
        memcpy(zmq_msg_data(&m), payload, len);
    if (rc != 0)
        return zfail(d, "cannot prepare a frame for", s->endpoint);
    /* The header goes first with SNDMORE; once it is queued ZeroMQ takes the remaining parts of
     * the message without blocking, so a timeout can only hit the first part. */
    zmq_msg_t hm;
    if (zmq_msg_init_size(&hm, hlen) != 0) {
        zmq_msg_close(&m);
        return zfail(d, "cannot prepare a header for", s->endpoint);
    }
    memcpy(zmq_msg_data(&hm), s->hdr, hlen);
    if ((rc = send_first(s, &hm, ZMQ_SNDMORE, "image header", d))) {
        zmq_msg_close(&hm);
        zmq_msg_close(&m);
        return rc;
    }
    if (zmq_msg_send(&m, s->sock, 0) < 0) {
        zmq_msg_close(&m);
        return send_fail(s, "image payload", d);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------- */
/* .dat files                                                                                    */

/* A series stem as a file name part: characters outside [A-Za-z0-9._-] become '_'. */
static void clean_stem(char clean[256], const char *stem)
{
    size_t j = 0;
    for (const char *p = stem && *stem ? stem : "frame"; *p && j + 1 < 256; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        clean[j++] = ok ? ch : '_';
    }
    clean[j] = '\0';
}

int faid_dat_path(char *out, size_t cap, const char *dir, const char *stem, uint64_t frame_id,
                  faid_diag *d)
{
    char clean[256];
    clean_stem(clean, stem);
    int n = snprintf(out, cap, "%s%s%s_%05llu.dat", dir && *dir ? dir : "", dir && *dir ? "/" : "",
                     clean, (unsigned long long)frame_id);
    if (n < 0 || (size_t)n >= cap)
        return faid_fail(d, FAID_ESIZE, "output path for frame %llu in %s is too long",
                         (unsigned long long)frame_id, dir ? dir : ".");
    return 0;
}

void faid_dat_series_stem(char *out, size_t cap, uint64_t series_id, const char *unique_id)
{
    if (unique_id && *unique_id)
        snprintf(out, cap, "%s", unique_id);
    else
        snprintf(out, cap, "series%llu", (unsigned long long)series_id);
}

int faid_dat_write(const char *path, const faid_dat_meta *meta, const double *radial,
                   const double *I, const double *sigma, const double *std, const double *count,
                   size_t n, faid_diag *d)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return faid_fail(d, FAID_EIO, "%s: cannot create: %s", path, strerror(errno));
    const char *unit = meta->unit && *meta->unit ? meta->unit : "bin";
    fprintf(f, "# faid integrated profile\n");
    fprintf(f, "# unit: %s\n", unit);
    fprintf(f, "# software_version: %s\n",
            meta->software_version && *meta->software_version ? meta->software_version : "unknown");
    fprintf(f, "# config_hash: %s\n",
            meta->config_hash && *meta->config_hash ? meta->config_hash : "unknown");
    if (meta->series && *meta->series)
        fprintf(f, "# series: %s\n", meta->series);
    if (meta->has_series_id)
        fprintf(f, "# series_id: %llu\n", (unsigned long long)meta->series_id);
    if (meta->has_frame_id)
        fprintf(f, "# frame_id: %llu\n", (unsigned long long)meta->frame_id);
    if (meta->has_setup_version)
        fprintf(f, "# setup_version: %llu\n", (unsigned long long)meta->setup_version);
    for (const char *line = meta->extra; line && *line;) {
        const char *nl = strchr(line, '\n');
        int len = nl ? (int)(nl - line) : (int)strlen(line);
        if (len)
            fprintf(f, "# %.*s\n", len, line);
        line = nl ? nl + 1 : line + len;
    }
    fprintf(f, "# columns: %s I sigma std count\n", unit);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.15g %.9g %.9g %.9g %.9g\n", radial ? radial[i] : (double)i, I[i],
                sigma ? sigma[i] : NAN, std ? std[i] : NAN, count ? count[i] : 0.0);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return faid_fail(d, FAID_EIO, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

int faid_peaks_path(char *out, size_t cap, const char *dir, const char *stem, uint64_t frame_id,
                    faid_diag *d)
{
    int rc = faid_dat_path(out, cap, dir, stem, frame_id, d);
    if (rc)
        return rc;
    size_t n = strlen(out); /* ends in ".dat" */
    if (n + 3 > cap)
        return faid_fail(d, FAID_ESIZE, "output path for frame %llu in %s is too long",
                         (unsigned long long)frame_id, dir ? dir : ".");
    memcpy(out + n - 4, ".peaks", 7);
    return 0;
}

void faid_peaks_param_line(char *buf, size_t cap, const char *key, int is_num, double num,
                           const char *str)
{
    size_t n = strnlen(buf, cap);
    if (n + 1 >= cap)
        return;
    if (is_num)
        snprintf(buf + n, cap - n, "%s: %.9g\n", key, num);
    else
        snprintf(buf + n, cap - n, "%s: %s\n", key, str ? str : "null");
}

int faid_peaks_write(const char *path, const faid_peaks_meta *meta, size_t n, const double *x,
                     const double *y, const double *intensity, const double *sigma,
                     const double *snr, const double *npix, faid_diag *d)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return faid_fail(d, FAID_EIO, "%s: cannot create: %s", path, strerror(errno));
    fprintf(f, "# faid peak list\n");
    fprintf(f, "# algorithm: %s\n",
            meta->algorithm && *meta->algorithm ? meta->algorithm : "unknown");
    for (const char *line = meta->params; line && *line;) {
        const char *nl = strchr(line, '\n');
        int len = nl ? (int)(nl - line) : (int)strlen(line);
        if (len)
            fprintf(f, "# %.*s\n", len, line);
        line = nl ? nl + 1 : line + len;
    }
    fprintf(f, "# num_peaks: %llu\n", (unsigned long long)meta->num_peaks);
    fprintf(f, "# is_hit: %d\n", meta->is_hit ? 1 : 0);
    fprintf(f, "# columns: x y intensity sigma snr npix\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.9g %.9g %.9g %.9g %.9g %.0f\n", x ? x[i] : NAN, y ? y[i] : NAN,
                intensity ? intensity[i] : NAN, sigma ? sigma[i] : NAN, snr ? snr[i] : NAN,
                npix ? npix[i] : 0.0);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return faid_fail(d, FAID_EIO, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

int faid_result_write_peaks(const faid_series_info *si, const faid_out_msg *m, const char *dir,
                            const char *stem, faid_diag *d)
{
    if (!m->has_peaks)
        return faid_fail(d, FAID_EINVAL, "result carries no peaks");
    const faid_array_view *cols[6] = {&m->peak_x,     &m->peak_y,   &m->peak_intensity,
                                      &m->peak_sigma, &m->peak_snr, &m->peak_npix};
    size_t n = (size_t)m->peak_x.nelem;
    for (int k = 1; k < 6; k++)
        if (cols[k]->nelem != n)
            return faid_fail(d, FAID_EFORMAT, "peak arrays of different lengths (%zu, %llu)", n,
                             (unsigned long long)cols[k]->nelem);
    double *v = malloc((6 * n + 1) * sizeof *v);
    if (!v)
        return faid_fail(d, FAID_ENOMEM, "out of memory for %zu peaks", n);
    int rc = 0;
    for (int k = 0; k < 6 && !rc; k++)
        rc = n ? faid_array_view_to_f64(cols[k], v + (size_t)k * n, n, d) : 0;
    char path[4096];
    const int same = si && si->valid && si->series_id == m->series_id;
    faid_peaks_meta meta = {
        .algorithm = same ? si->peaks_algorithm : NULL,
        .params = same ? si->peaks_params : NULL,
        .num_peaks = m->num_peaks,
        .is_hit = m->is_hit,
    };
    if (!rc)
        rc = faid_peaks_path(path, sizeof path, dir, stem, m->frame_id, d);
    if (!rc)
        rc = faid_peaks_write(path, &meta, n, v, v + n, v + 2 * n, v + 3 * n, v + 4 * n, v + 5 * n,
                              d);
    free(v);
    return rc;
}

int faid_sub_write_dat(const faid_sub *s, const faid_sub_msg *msg, const char *path, faid_diag *d)
{
    const faid_series_info *si = faid_sub_series_of(s, msg->m.series_id, msg->m.setup_version);
    return faid_result_write_dat(si ? si : &s->series, &msg->m, path, d);
}

int faid_result_write_2d_npy(const faid_out_msg *m, const char *dir, const char *stem, int *nfiles,
                             faid_diag *d)
{
    if (nfiles)
        *nfiles = 0;
    if (m->type != FAID_OUT_RESULT || m->I_2d.nelem == 0)
        return 0;
    const faid_array_view *a[3] = {&m->I_2d, &m->sigma_2d, &m->count_2d};
    const char *key[3] = {FAID_K_I2D, FAID_K_SIGMA2D, FAID_K_COUNT2D};
    const char *name[3] = {"I", "sigma", "count"};
    unsigned long long frame = (unsigned long long)m->frame_id;
    if (m->I_2d.ndim != 2)
        return faid_fail(d, FAID_EFORMAT, "result of frame %llu: \"%s\" has %d dimensions, not 2",
                         frame, FAID_K_I2D, m->I_2d.ndim);
    size_t shape[2] = {(size_t)m->I_2d.shape[0], (size_t)m->I_2d.shape[1]};
    size_t n = (size_t)m->I_2d.nelem;
    double *v = malloc(n * sizeof(double));
    float *f = malloc(n * sizeof(float));
    char clean[256];
    clean_stem(clean, stem);
    int rc = v && f ? 0
                    : faid_fail(d, FAID_ENOMEM,
                                "result of frame %llu: out of memory for the 2D "
                                "cake",
                                frame);
    for (int k = 0; k < 3 && !rc; k++) {
        if (a[k]->nelem == 0)
            continue;
        if (a[k]->ndim != 2 || a[k]->shape[0] != shape[0] || a[k]->shape[1] != shape[1]) {
            rc = faid_fail(d, FAID_EFORMAT,
                           "result of frame %llu: \"%s\" is not shaped like "
                           "\"%s\" (%zu, %zu)",
                           frame, key[k], FAID_K_I2D, shape[0], shape[1]);
            break;
        }
        if ((rc = faid_array_view_to_f64(a[k], v, n, d))) {
            faid_diag_prefix(d, "result of frame %llu, key \"%s\": ", frame, key[k]);
            break;
        }
        for (size_t i = 0; i < n; i++)
            f[i] = (float)v[i];
        char path[4096];
        int len = snprintf(path, sizeof(path), "%s%s%s_%05llu_2d_%s.npy", dir && *dir ? dir : "",
                           dir && *dir ? "/" : "", clean, frame, name[k]);
        if (len < 0 || (size_t)len >= sizeof(path)) {
            rc = faid_fail(d, FAID_ESIZE, "output path for frame %llu in %s is too long", frame,
                           dir ? dir : ".");
            break;
        }
        if ((rc = faid_npy_write(path, FAID_DT_F32, 2, shape, f, d)))
            break;
        if (nfiles)
            (*nfiles)++;
    }
    free(v);
    free(f);
    return rc;
}

int faid_result_write_dat(const faid_series_info *si, const faid_out_msg *m, const char *path,
                          faid_diag *d)
{
    static const faid_series_info none;
    if (!si)
        si = &none;
    if (m->type != FAID_OUT_RESULT)
        return faid_fail(d, FAID_EINVAL, "%s: only result messages hold a profile", path);
    size_t n = (size_t)m->I.nelem;
    if (n == 0)
        return faid_fail(d, FAID_EPROTO, "result of frame %llu has no \"%s\" array",
                         (unsigned long long)m->frame_id, FAID_K_I);
    double *buf = malloc(4 * n * sizeof(double));
    if (!buf)
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory for %zu bins", path, n);
    double *I = buf, *sg = buf + n, *sd = buf + 2 * n, *ct = buf + 3 * n;
    const faid_array_view *opt[3] = {&m->sigma, &m->std, &m->count};
    double *optv[3] = {sg, sd, ct};
    int rc = faid_array_view_to_f64(&m->I, I, n, d);
    for (int k = 0; k < 3 && rc == 0; k++) {
        if (opt[k]->nelem == 0)
            optv[k] = NULL;
        else
            rc = faid_array_view_to_f64(opt[k], optv[k], n, d);
    }
    if (rc) {
        faid_diag_prefix(d, "result of frame %llu: ", (unsigned long long)m->frame_id);
        free(buf);
        return rc;
    }
    int axis = si->valid && si->nbins == n && si->series_id == m->series_id;
    faid_dat_meta meta = {
        .unit = axis ? si->unit : "bin",
        .software_version = si->valid ? si->software_version : NULL,
        .config_hash = si->valid ? si->config_hash : NULL,
        .series = si->valid ? si->series_unique_id : NULL,
        .has_series_id = 1,
        .series_id = m->series_id,
        .has_frame_id = m->has_frame_id,
        .frame_id = m->frame_id,
        .has_setup_version = 1,
        .setup_version = m->setup_version,
    };
    rc = faid_dat_write(path, &meta, axis ? si->radial : NULL, I, optv[0], optv[1], optv[2], n, d);
    free(buf);
    return rc;
}
