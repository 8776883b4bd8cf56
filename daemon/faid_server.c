/* faid_server: lifecycle of the daemon (sockets, pools, first generation, threads, orderly
 * shutdown). The pools are faid_pool.c's, generations and reload faid_gen.c's, the ingest
 * threads faid_ingest.c's. See faid_state.h for the thread design. */
#include "faid_server.h"
#include "faid_thread.h"

#include "faid_pool.h"
#include "faid_gen.h"

#include "faid_ingest.h"
#include "faid_rxalloc.h"

#include "faid_aggregates.h"
#include "faid_hits_send.h"

#include "faid_cl.h"
#include "faid_keyfile.h"
#include "faid_log.h"
#include "faid_memstat.h"
#include "faid_writer.h"
#include "faid_zap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------- */
/* Construction                                                                                  */

static int parse_devices(faid_server *s, const char *spec, faid_diag *d)
{
    s->nworkers = 0;
    if (strcmp(spec, "auto") == 0 || strcmp(spec, "gpu") == 0) {
        faid_cl_device_info all[FAID_CL_MAX_DEVICES];
        int n = 0;
        faid_diag ld;
        if (faid_cl_list(all, FAID_CL_MAX_DEVICES, &n, &ld) != 0)
            n = 0;
        for (int i = 0; i < n && s->nworkers < FAID_MAX_WORKERS; i++)
            if (all[i].is_gpu)
                snprintf(s->workers[s->nworkers++].spec, sizeof(s->workers[0].spec), "%d", i);
        if (s->nworkers == 0) {
            if (strcmp(spec, "gpu") == 0)
                return faid_fail(d, FAID_ENODEV, "devices: gpu: no OpenCL GPU found");
            /* auto without a GPU: the CPU OpenCL device, as the engine's "auto" picks it. */
            snprintf(s->workers[s->nworkers++].spec, sizeof(s->workers[0].spec), "auto");
        }
        return 0;
    }
    const char *p = spec;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0 || n >= sizeof(s->workers[0].spec))
            return faid_fail(d, FAID_ECONFIG, "devices: malformed list \"%s\"", spec);
        if (s->nworkers == FAID_MAX_WORKERS)
            return faid_fail(d, FAID_ECONFIG, "devices: more than %d devices", FAID_MAX_WORKERS);
        memcpy(s->workers[s->nworkers].spec, p, n);
        s->workers[s->nworkers].spec[n] = '\0';
        s->nworkers++;
        p += n + (comma ? 1 : 0);
    }
    if (s->nworkers == 0)
        return faid_fail(d, FAID_ECONFIG, "devices: empty list");
    return 0;
}

/* libzmq binds an ipc:// path by unlinking whatever socket file is there: a second faid on the
 * same ipc endpoints silently took over input and control from the first (tcp:// fails with
 * EADDRINUSE). A socket file that accepts a connection belongs to a live process: refuse it. A
 * stale file (connection refused) is left to libzmq to replace. */
static int ipc_in_use(const char *endpoint, faid_diag *d)
{
    if (strncmp(endpoint, "ipc://", 6) != 0)
        return 0;
    const char *path = endpoint + 6;
    if (path[0] == '@' || strcmp(path, "*") == 0)
        return 0; /* abstract names cannot be taken over; "*" is a fresh temporary name */
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path))
        return 0; /* libzmq refuses it with its own message */
    memcpy(sa.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int live = connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    if (live)
        return faid_fail(d, FAID_EZMQ,
                         "%s is in use by a running process (another faid?): stop it or choose "
                         "another endpoint",
                         endpoint);
    return 0;
}

int faid_endpoint_is_local(const char *endpoint)
{
    if (strncmp(endpoint, "ipc://", 6) == 0 || strncmp(endpoint, "inproc://", 9) == 0)
        return 1;
    static const char *const local[] = {
        "tcp://127.", "tcp://localhost:", "tcp://[::1]:", "tcp://lo:", "tcp://[::ffff:127."};
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
        if (strncmp(endpoint, local[i], strlen(local[i])) == 0)
            return 1;
    return 0;
}

/* security.curve: faid's key pair from security.secret_key_file (its public key derived from
 * the secret one, and checked against the file's public-key line when it has one) and the ZAP
 * handler with the keys of security.authorized_keys; before the first socket is bound. */
static int start_curve(faid_server *s, const faid_config *cfg, faid_diag *d)
{
    /* Checked here, not when the file is read: security.curve needs a restart, and a reload
     * that turns it on must say so rather than ask for the key files. */
    if (!cfg->secret_key_file[0])
        return faid_fail(d, FAID_ECONFIG,
                         "security.curve: CURVE needs faid's key pair: set "
                         "security.secret_key_file (faidctl keygen NAME writes one)");
    if (!cfg->authorized_keys[0])
        return faid_fail(d, FAID_ECONFIG,
                         "security.curve: CURVE needs security.authorized_keys, the folder of "
                         "the clients' *.pub keys (without it every client would be let in)");
    if (!zmq_has("curve"))
        return faid_fail(d, FAID_EUNSUP,
                         "security.curve: this libzmq was built without CURVE (libsodium)");
    faid_keytext kt;
    int rc = faid_keyfile_read(cfg->secret_key_file, 1, &kt, d);
    if (rc) {
        faid_diag_prefix(d, "security.secret_key_file: ");
        return rc;
    }
    char pub[41];
    if (zmq_curve_public(pub, kt.secret_key) != 0) {
        memset(&kt, 0, sizeof(kt));
        return faid_fail(d, FAID_EFORMAT, "security.secret_key_file %s: not a CURVE secret key",
                         cfg->secret_key_file);
    }
    if (kt.public_key[0] && strcmp(kt.public_key, pub) != 0) {
        memset(&kt, 0, sizeof(kt));
        return faid_fail(d, FAID_EFORMAT,
                         "security.secret_key_file %s: its public-key line does not belong to "
                         "its secret key",
                         cfg->secret_key_file);
    }
    memcpy(s->curve_secret, kt.secret_key, sizeof(s->curve_secret));
    memcpy(s->curve_public, pub, sizeof(s->curve_public));
    memset(&kt, 0, sizeof(kt));
    faid_zap_keys *keys = faid_zap_keys_load(cfg->authorized_keys, d);
    if (!keys)
        return d && d->code ? d->code : FAID_ECONFIG;
    size_t nkeys = faid_zap_keys_count(keys);
    if (!(s->zap = faid_zap_new(s->zctx, keys, d)))
        return d && d->code ? d->code : FAID_EZMQ;
    s->curve = 1;
    FAID_INFO("security", "CURVE on: server public key %s; %zu client key(s) authorized from %s",
              s->curve_public, nkeys, cfg->authorized_keys);
    if (nkeys == 0)
        FAID_WARN("security",
                  "security.authorized_keys %s holds no *.pub key: every client is "
                  "refused",
                  cfg->authorized_keys);
    return 0;
}

static void *make_socket_in(faid_server *s, void *zctx, int type, const char *endpoint, int bind,
                            int hwm, int linger, int64_t max_msg, const char *what, faid_diag *d)
{
    if (bind && ipc_in_use(endpoint, d)) {
        faid_diag_prefix(d, "%s socket: ", what);
        return NULL;
    }
    void *sock = zmq_socket(zctx, type);
    if (!sock) {
        faid_fail(d, FAID_EZMQ, "%s socket: %s", what, zmq_strerror(zmq_errno()));
        return NULL;
    }
    /* Bounded at the socket: libzmq drops the connection of a peer whose message part is
     * larger, before it allocates it. Checking the size after zmq_msg_recv let one 512 MiB
     * message take faid from 9.8 MB to 534 MB of memory (issue 10). */
    if (max_msg > 0 && zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_msg, sizeof(max_msg)) != 0) {
        faid_fail(d, FAID_EZMQ, "%s socket: ZMQ_MAXMSGSIZE %lld: %s", what, (long long)max_msg,
                  zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return NULL;
    }
    int opt = hwm;
    if (type == ZMQ_PULL || type == ZMQ_DEALER) {
        zmq_setsockopt(sock, ZMQ_RCVHWM, &opt, sizeof(opt));
        /* A connection that never completes the ZeroMQ handshake (an idle TCP connection)
         * holds a descriptor this long at most, not libzmq's default 30 s. */
        int hs = FAID_INPUT_HANDSHAKE_MS;
        zmq_setsockopt(sock, ZMQ_HANDSHAKE_IVL, &hs, sizeof(hs));
    } else if (type != ZMQ_REP)
        zmq_setsockopt(sock, ZMQ_SNDHWM, &opt, sizeof(opt));
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
    if (bind && s->curve) {
        /* Every socket faid serves; an input that connects to a detector stays plain. */
        int on = 1;
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &on, sizeof(on)) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, s->curve_secret, FAID_Z85_KEY_LEN) != 0 ||
            zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "faid", 4) != 0) {
            faid_fail(d, FAID_EZMQ, "%s socket: cannot make it a CURVE server: %s", what,
                      zmq_strerror(zmq_errno()));
            zmq_close(sock);
            return NULL;
        }
    } else if (bind && !faid_endpoint_is_local(endpoint)) {
        FAID_WARN("security",
                  "%s socket %s is reachable beyond this host without authentication or "
                  "encryption (security.curve is off)",
                  what, endpoint);
    }
    int rc = bind ? zmq_bind(sock, endpoint) : zmq_connect(sock, endpoint);
    if (rc != 0) {
        faid_fail(d, FAID_EZMQ, "%s socket: cannot %s %s: %s", what, bind ? "bind" : "connect",
                  endpoint, zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return NULL;
    }
    FAID_INFO("server", "%s: %s %s", what, bind ? "bound to" : "connected to", endpoint);
    return sock;
}

static void *make_socket(faid_server *s, int type, const char *endpoint, int bind, int hwm,
                         int linger, int64_t max_msg, const char *what, faid_diag *d)
{
    return make_socket_in(s, s->zctx, type, endpoint, bind, hwm, linger, max_msg, what, d);
}

/* The context input socket i is made in. input.contexts per_connection: one of its own with one
 * I/O thread, so that the connections' reads share no libzmq I/O thread, mailbox or lock with
 * each other or with the result sends (a shared context made 4 connections carry 2.23x one on
 * the H100 host against 3.4x for independent pairs, issue 17). A failure to make one falls back
 * to the shared context (logged): it costs speed, never the start. With security.curve the
 * ZAP handler answers in zctx only, so CURVE inputs stay there. */
/* input.pinned_receive: the I/O threads of a context the inputs use carry the name faid_rxalloc
 * knows them by (before the context's first socket starts them). */
static int name_input_threads(const faid_server *s, void *ctx)
{
    return s->rx_state == 1 ? zmq_ctx_set(ctx, ZMQ_THREAD_NAME_PREFIX, FAID_RXALLOC_PREFIX) : 0;
}

static void *input_context(faid_server *s, int i)
{
    if (!s->cfg.input_contexts || s->cfg.security_curve)
        return s->zctx;
    void *c = zmq_ctx_new();
    if (!c || zmq_ctx_set(c, ZMQ_IO_THREADS, 1) != 0 || name_input_threads(s, c) != 0) {
        FAID_WARN("server", "input %d: no ZeroMQ context of its own (%s): it shares the daemon's",
                  i, zmq_strerror(zmq_errno()));
        if (c)
            zmq_ctx_term(c);
        return s->zctx;
    }
    s->in_ctx[i] = c;
    s->in_nctx++;
    return c;
}

/* instance.name, or <host name>:<port of control.endpoint> (unique among one host's instances,
 * each of which needs its own control port). */
static void instance_name(faid_server *s, const faid_config *cfg)
{
    if (cfg->instance_name[0]) {
        snprintf(s->instance_name, sizeof(s->instance_name), "%s", cfg->instance_name);
        return;
    }
    char host[64] = "";
    if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
        snprintf(host, sizeof(host), "localhost");
    const char *colon = strrchr(cfg->control_endpoint, ':');
    const char *port = colon && colon[1] && !strchr(colon, '/') ? colon + 1 : "";
    snprintf(s->instance_name, sizeof(s->instance_name), "%s%s%s", host, port[0] ? ":" : "", port);
}

faid_server *faid_server_new(const faid_config *cfg, const char *config_path, faid_diag *d)
{
    faid_server *s = calloc(1, sizeof(*s));
    if (!s) {
        faid_fail(d, FAID_ENOMEM, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->policy = cfg->queue_policy;
    snprintf(s->config_path, sizeof(s->config_path), "%s", config_path ? config_path : "");
    pthread_mutex_init(&s->gen_mu, NULL);
    pthread_mutex_init(&s->ctl_mu, NULL);
    s->ctl_closed = 1; /* until the main loop serves control (faid_main.c) */
    pthread_mutex_init(&s->build_mu, NULL);
    pthread_mutex_init(&s->info_mu, NULL);
    pthread_mutex_init(&s->fan_acct.mu, NULL);
    faid_stats_init(&s->stats);
    s->start_mono_ns = faid_now_ns();
    s->aggr = faid_aggr_new();
    s->writer = faid_writer_new(cfg->writer_queue_bytes);
    if (!s->aggr || !s->writer) {
        faid_writer_destroy(&s->writer);
        faid_fail(d, FAID_ENOMEM, "out of memory");
        free(s);
        return NULL;
    }
    s->next_version = 1;
    s->max_user_data = FAID_MAX_USER_DATA;
    s->lossless_grace_ns = (int64_t)(cfg->lossless_shutdown_timeout * 1e9);
    s->ll_overflow = cfg->lossless_overflow;
    s->stop_grace_ns = (int64_t)(cfg->stop_timeout * 1e9);
    instance_name(s, cfg);
    s->series_shard = (uint32_t)cfg->instance_shard;
    s->series_shards = (uint32_t)cfg->instance_shards;
    atomic_init(&s->dtypes_seen, 0u);
    atomic_init(&s->in_accepted, 0u);
    atomic_init(&s->in_closed, 0u);
    atomic_init(&s->in_accept_failed, 0u);
    atomic_init(&s->in_over_cap, 0u);
    atomic_init(&s->pin_frames, 0u);
    atomic_init(&s->pin_fallback, 0u);
    atomic_init(&s->pin_received, 0u);

    if (parse_devices(s, cfg->devices, d))
        goto fail;
    for (int i = 0; i < s->nworkers; i++) {
        s->workers[i].srv = s;
        s->workers[i].index = i;
    }

    /* Enough slots that every stage can hold what its queue allows at once, plus events; the
     * result queue can hold all of them, so nobody ever waits to hand a slot to the publisher. */
    int depth = cfg->queue_depth > 0 ? cfg->queue_depth : 64;
    s->nslots = 2 * (size_t)depth + 2 * (size_t)s->nworkers + 16;
    s->slots = calloc(s->nslots, sizeof(faid_slot));
    s->pool = faid_queue_new(s->nslots);
    s->frames = faid_queue_new((size_t)depth);
    s->results = faid_queue_new(s->nslots + FAID_EVENTS);
    s->events = calloc(FAID_EVENTS, sizeof(faid_event));
    s->event_pool = faid_queue_new(FAID_EVENTS);
    if (!s->slots || !s->pool || !s->frames || !s->results || !s->events || !s->event_pool) {
        faid_fail(d, FAID_ENOMEM, "out of memory for %zu frame slots", s->nslots);
        goto fail;
    }
    for (size_t i = 0; i < FAID_EVENTS; i++)
        faid_queue_push(s->event_pool, &s->events[i], 0);
    for (size_t i = 0; i < s->nslots; i++) {
        s->slots[i].device = -1;
        faid_queue_push(s->pool, &s->slots[i], 0);
    }

    if (cfg->input_pinned_bytes > 0) {
        /* The arena is page-locked for the first worker's device; a failure only costs the
         * worker's copy (logged), never the start. */
        faid_diag pd;
        faid_diag_clear(&pd);
        s->pinned = faid_pinned_new(s->workers[0].spec, (size_t)cfg->input_pinned_bytes, &pd);
        if (!s->pinned)
            FAID_WARN("server",
                      "input.pinned_bytes: no pinned input arena (%s): the workers copy "
                      "every frame",
                      pd.msg);
        else
            FAID_INFO("server", "pinned input arena: %lld bytes (%s)",
                      (long long)cfg->input_pinned_bytes,
                      faid_pinned_locked(s->pinned) ? "page-locked" : "plain memory");
    }
    /* input.pinned_receive: before the first input context exists (its I/O thread is named,
     * and asks for message buffers, from its first socket on) */
    if (cfg->input_pinned_receive) {
        if (s->pinned && faid_rxalloc_start(s->pinned) == FAID_OK) {
            s->rx_state = 1;
            FAID_INFO("server", "input.pinned_receive: frames are received into the arena");
        } else {
            s->rx_state = 2;
            FAID_INFO("server", "input.pinned_receive: unavailable (%s): frames are copied",
                      !s->pinned ? "no pinned input arena"
                                 : "this build's allocator is its sanitizer's");
        }
    }
    s->gen = faid_gen_build(s, cfg, s->next_version++, d);
    if (!s->gen)
        goto fail;
    uint32_t tcap = faid_slot_table_blocks(s->gen->setup);
    for (size_t i = 0; i < s->nslots; i++)
        if (faid_slot_reserve_table(&s->slots[i], tcap, d)) {
            faid_diag_prefix(d, "frame slot block tables: ");
            goto fail;
        }
    for (int i = 0; i < s->nworkers; i++) {
        snprintf(s->workers[i].name, sizeof(s->workers[i].name), "%s",
                 faid_engine_device_name(s->gen->engines[i]));
        FAID_INFO("server", "worker %d: %s", i, s->workers[i].name);
    }

    s->zctx = zmq_ctx_new();
    if (!s->zctx) {
        faid_fail(d, FAID_EZMQ, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    /* input.io_threads, default two: the input connection's reads do not share a thread with
     * the result sends, and on loopback one connection moved 5.8 GB/s with two against 4.2 GB/s
     * with one (reference/performance.md). Must precede the first socket; a failure only costs
     * speed. */
    int nin = faid_config_endpoint_count(cfg->input_endpoint);
    int io_threads = cfg->io_threads > 0 ? cfg->io_threads : 2;
    /* Several input endpoints: at least one I/O thread each plus one for the sends, so that
     * every connection's reads run in parallel (libzmq gives a new connection the least loaded
     * I/O thread). */
    if (io_threads < nin + 1 && (!cfg->input_contexts || cfg->security_curve))
        io_threads = nin + 1;
    if (zmq_ctx_set(s->zctx, ZMQ_IO_THREADS, io_threads) != 0)
        FAID_WARN("server", "ZMQ_IO_THREADS %d: %s", io_threads, zmq_strerror(zmq_errno()));
    /* inputs in this context (input.contexts shared, or CURVE): its I/O threads receive them */
    if ((!cfg->input_contexts || cfg->security_curve) && name_input_threads(s, s->zctx) != 0)
        FAID_WARN("server", "ZMQ_THREAD_NAME_PREFIX: %s: frames are received into ordinary memory",
                  zmq_strerror(zmq_errno()));
    /* input.protocol: a value this build cannot honour stops the daemon here, never later. */
    faid_input_protocol proto;
    s->fan = strcmp(cfg->input_protocol, "fan") == 0;
    if (s->fan && nin != 1) {
        faid_fail(d, FAID_ECONFIG,
                  "input.protocol fan: input.endpoint names %d endpoints; an instance connects to "
                  "one fan-out",
                  nin);
        goto fail;
    }
    if (s->fan) {
        /* the detector formats are the fan-out's: each route names the one of its message */
    } else if (faid_input_protocol_parse(cfg->input_protocol, &proto) != 0) {
        faid_fail(d, FAID_ECONFIG, "input.protocol: unknown protocol \"%s\"", cfg->input_protocol);
        goto fail;
    }
    if (!s->fan && faid_input_available(proto, d)) {
        faid_diag_prefix(d, "input.protocol %s: ", cfg->input_protocol);
        goto fail;
    }
    if (cfg->security_curve && start_curve(s, cfg, d))
        goto fail;
    s->input_max_msg = cfg->max_frame_bytes + FAID_INPUT_HEADER_ALLOWANCE;
    if (nin < 1 || nin > FAID_MAX_ENDPOINTS) {
        faid_fail(d, FAID_ECONFIG, "input.endpoint: %d endpoints (1 to %d)", nin,
                  FAID_MAX_ENDPOINTS);
        goto fail;
    }
    for (int i = 0; i < nin; i++) {
        char ep[sizeof cfg->input_endpoint], what[32], mon[64];
        faid_config_endpoint_at(cfg->input_endpoint, i, ep, sizeof ep);
        snprintf(what, sizeof what, nin > 1 ? "input %d" : "input", i);
        /* fan: a DEALER connected to the fan-out's ROUTER, whatever input.mode says (the
         * fan-out binds); it receives routed detector messages and sends hello and credit. */
        void *ictx = input_context(s, i);
        s->pull[i] =
            make_socket_in(s, ictx, s->fan ? ZMQ_DEALER : ZMQ_PULL, ep,
                           s->fan ? 0 : cfg->input_bind, depth, 0, s->input_max_msg, what, d);
        if (!s->pull[i])
            goto fail;
        s->npull = i + 1;
        /* Connections of the input, watched by the main thread: a peer dropped for an oversized
         * message or a protocol error, and accepts that fail (descriptor limit), are counted
         * and logged there. */
        snprintf(mon, sizeof mon, "%s-%d", FAID_INPUT_MONITOR, i);
        if (zmq_socket_monitor(s->pull[i], mon,
                               ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                                   ZMQ_EVENT_ACCEPT_FAILED) != 0 ||
            !(s->input_mon[i] = zmq_socket(ictx, ZMQ_PAIR)) ||
            zmq_connect(s->input_mon[i], mon) != 0) {
            faid_fail(d, FAID_EZMQ, "input socket monitor: %s", zmq_strerror(zmq_errno()));
            goto fail;
        }
    }
    /* A subscriber that is behind holds at most this many messages in faid's memory (results of
     * a large 2D cake are megabytes each); beyond it ZeroMQ drops for that subscriber alone.
     * output.sndhwm 0 picks a bound that follows the queue. */
    int pub_hwm = cfg->sndhwm > 0 ? cfg->sndhwm : (2 * depth > 16 ? 2 * depth : 16);
    s->pub = make_socket(s, ZMQ_PUB, cfg->output_endpoint, 1, pub_hwm, 1000, FAID_PEER_MAX_MSG,
                         "output", d);
    if (!s->pub)
        goto fail;
    if (cfg->lossless_endpoint[0]) {
        s->router = make_socket(s, ZMQ_ROUTER, cfg->lossless_endpoint, 1, FAID_LL_SNDHWM, 1000,
                                FAID_PEER_MAX_MSG, "lossless output", d);
        if (!s->router)
            goto fail;
        s->ll = faid_lossless_new(s->zctx, s->router, (size_t)cfg->lossless_buffer,
                                  (int64_t)(cfg->lossless_consumer_timeout * 1e9), &s->stats, d);
        if (!s->ll)
            goto fail;
    }
    if (cfg->forward_endpoint[0]) {
        /* Sends never wait (ZMQ_DONTWAIT in ingest); this high-water mark is what a slow file
         * writer may lag behind before it loses messages. */
        s->forward = make_socket(s, ZMQ_PUSH, cfg->forward_endpoint, 1, depth, 0, FAID_PEER_MAX_MSG,
                                 "input forward", d);
        if (!s->forward)
            goto fail;
    }
    if (cfg->hits_endpoint[0]) {
        /* Hit frames for indexing or a hits-only writer: sends never wait; a consumer that
         * is behind loses hits beyond this many (they are counted, hits.dropped). */
        s->hits =
            make_socket(s, ZMQ_PUB, cfg->hits_endpoint, 1, 16, 0, FAID_PEER_MAX_MSG, "hits", d);
        if (!s->hits)
            goto fail;
    }
    if (cfg->hits_request_endpoint[0]) {
        s->hits_rep = make_socket(s, ZMQ_ROUTER, cfg->hits_request_endpoint, 1, 16, 0,
                                  FAID_CONTROL_MAX_MSG, "hits request", d);
        if (!s->hits_rep)
            goto fail;
        /* A reply to a requester that has gone fails (EHOSTUNREACH) instead of vanishing: its
         * waiting entry is freed and the hit goes to the next requester. */
        int one = 1;
        zmq_setsockopt(s->hits_rep, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    }
    if ((s->hits || s->hits_rep) &&
        !(s->hitsend = faid_hitsend_new(s->hits, s->hits_rep, &s->stats, s->aggr))) {
        faid_fail(d, FAID_ENOMEM, "out of memory");
        goto fail;
    }
    s->rep =
        make_socket(s, ZMQ_REP, cfg->control_endpoint, 1, 0, 0, FAID_CONTROL_MAX_MSG, "control", d);
    if (!s->rep)
        goto fail;
    return s;
fail:
    faid_server_destroy(&s);
    return NULL;
}

int faid_server_start(faid_server *s, faid_diag *d)
{
    for (int i = 0; i < s->nworkers; i++) {
        if (pthread_create(&s->workers[i].thread, NULL, faid_worker_main, &s->workers[i]))
            return faid_fail(d, FAID_ENOMEM, "cannot start worker thread %d", i);
        faid_thread_name(s->workers[i].thread, "faid-worker%d", i);
        s->workers[i].started = 1;
    }
    if (faid_writer_start(s->writer))
        return faid_fail(d, FAID_ENOMEM, "cannot start the writer thread");
    if (pthread_create(&s->publish_thread, NULL, faid_publish_main, s))
        return faid_fail(d, FAID_ENOMEM, "cannot start the publisher thread");
    faid_thread_name(s->publish_thread, "faid-publish");
    s->publish_started = 1;
    faid_handoff h = {
        .srv = s,
        .cfg = &s->cfg,
        .stats = &s->stats,
        .frames = s->frames,
        .results = s->results,
        .policy = s->policy,
        .pull = s->pull,
        .npull = s->npull,
        .forward = s->forward,
        .pinned = s->pinned,
        .pin_frames = &s->pin_frames,
        .pin_fallback = &s->pin_fallback,
        .pin_received = &s->pin_received,
        .max_user_data = s->max_user_data,
        .stop_ingest = &s->stop_ingest,
        .stop_since_ns = &s->stop_since_ns,
        .stop_grace_ns = s->stop_grace_ns,
        .state = &s->state,
        .series_id = &s->series_id,
        .info_mu = &s->info_mu,
        .series_uid = s->series_uid,
        .series_uid_size = sizeof s->series_uid,
        .series_shard = &s->series_shard,
        .series_shards = &s->series_shards,
        .series_frames = &s->series_frames,
        .alive_ns = s->ingest_alive_ns,
        .dtypes_seen = &s->dtypes_seen,
        .fan = s->fan,
        .fan_acct = &s->fan_acct,
        .fan_link = &s->fan_link,
        .instance_name = s->instance_name,
    };
    return faid_ingest_start(&h, &s->ingest, d);
}

void faid_server_shutdown(faid_server *s)
{
    if (!s->stop_since_ns)
        s->stop_since_ns = faid_now_ns();
    atomic_store(&s->state, FAID_STATE_STOPPING);
    atomic_store(&s->draining, 1);
    atomic_store(&s->stop_ingest, 1);
    /* Order matters: ingest stops and queues its last events, workers finish every queued
     * frame, then the publisher sends everything that is left. */
    faid_ingest_join(&s->ingest);
    if (s->frames)
        faid_queue_close(s->frames);
    for (int i = 0; i < s->nworkers; i++)
        if (s->workers[i].started) {
            pthread_join(s->workers[i].thread, NULL);
            s->workers[i].started = 0;
        }
    if (s->results)
        faid_queue_close(s->results);
    if (s->publish_started) {
        pthread_join(s->publish_thread, NULL);
        s->publish_started = 0;
    }
    /* The publisher queued its last messages: the writer writes them and closes its files. */
    faid_writer_stop(s->writer);
}

void faid_server_destroy(faid_server **ps)
{
    if (!ps || !*ps)
        return;
    faid_server *s = *ps;
    faid_server_shutdown(s);
    for (int i = 0; i < FAID_MAX_ENDPOINTS; i++) {
        if (s->pull[i] && s->input_mon[i])
            zmq_socket_monitor(s->pull[i], NULL, 0);
        if (s->input_mon[i])
            zmq_close(s->input_mon[i]);
        if (s->pull[i])
            zmq_close(s->pull[i]);
        s->input_mon[i] = s->pull[i] = NULL;
    }
    faid_lossless_destroy(&s->ll);
    void **socks[] = {&s->pub, &s->router, &s->forward, &s->hits, &s->hits_rep, &s->rep};
    for (size_t i = 0; i < sizeof(socks) / sizeof(socks[0]); i++)
        if (*socks[i]) {
            zmq_close(*socks[i]);
            *socks[i] = NULL;
        }
    if (s->slots)
        for (size_t i = 0; i < s->nslots; i++) {
            faid_slot_clear_frame(&s->slots[i]);
            free(s->slots[i].out);
            free(s->slots[i].ud);
            free(s->slots[i].hit_chunk);
            faid_block_table_free(&s->slots[i].table);
        }
    faid_zap_destroy(&s->zap); /* its socket too must close before the context ends */
    memset(s->curve_secret, 0, sizeof(s->curve_secret));
    for (int i = 0; i < FAID_MAX_ENDPOINTS; i++)
        if (s->in_ctx[i]) {
            zmq_ctx_term(s->in_ctx[i]);
            s->in_ctx[i] = NULL;
        }
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    faid_gen_release(&s->gen);
    faid_aggr_destroy(&s->aggr);
    faid_writer_destroy(&s->writer);
    /* every context has ended, so every message received into the arena is freed */
    if (s->rx_state == 1)
        faid_rxalloc_stop();
    /* after every slot and generation: the engines read from it until they are gone */
    faid_pinned_destroy(&s->pinned);
    faid_queue_destroy(&s->pool);
    faid_queue_destroy(&s->frames);
    faid_queue_destroy(&s->results);
    faid_queue_destroy(&s->event_pool);
    if (s->events)
        for (size_t i = 0; i < FAID_EVENTS; i++) {
            faid_gen_release(&s->events[i].gen);
            faid_gen_job_release(&s->events[i].build);
            free(s->events[i].user_data);
        }
    free(s->events);
    free(s->slots);
    pthread_mutex_destroy(&s->gen_mu);
    pthread_mutex_destroy(&s->ctl_mu);
    pthread_mutex_destroy(&s->build_mu);
    pthread_mutex_destroy(&s->info_mu);
    pthread_mutex_destroy(&s->fan_acct.mu);
    free(s->fan_acct.r);
    s->fan_acct.r = NULL;
    faid_hitsend_destroy(&s->hitsend);
    free(s);
    *ps = NULL;
}
