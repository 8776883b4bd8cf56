/* faid_server: lifecycle of the daemon (sockets, slot pool, generations, threads, orderly
 * shutdown) and reload. See faid_server.h for the thread design. */
#include "faid_server.h"

#include "faid_aggregates.h"

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

#define MAX_USER_DATA (64 * 1024)

/* ------------------------------------------------------------------------------------------- */
/* Generations                                                                                   */

void faid_gen_acquire(faid_gen *g)
{
    if (g)
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

/* Lines of setups built for series starts and reloads, which peers on the input and control
 * sockets can ask for at any rate (issue 20: 1,500 mask changes, 200 reloads at 200 Hz): a
 * few per second come through, the rest are counted (faid_log.h). */
static faid_ratelimit rl_ready, rl_build, rl_build_fail, rl_keys, rl_reloaded;

static void gen_free(faid_gen *g)
{
    for (int i = 0; i < g->nworkers; i++) {
        faid_engine_destroy(&g->engines[i]);
        faid_result_destroy(&g->results[i]);
    }
    faid_setup_destroy(&g->setup);
    free(g->config_yaml);
    free(g->detector_mask);
    free(g);
}

void faid_gen_release(faid_gen **pg)
{
    if (!pg || !*pg)
        return;
    faid_gen *g = *pg;
    *pg = NULL;
    /* acq_rel: the thread that frees must see every use made by the others. */
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1)
        gen_free(g);
}

/* Upper bound of an encoded array map of nbytes data. */
static size_t array_bound(size_t nbytes)
{
    return nbytes + 64;
}

faid_gen *faid_gen_build(faid_server *s, const faid_config *cfg, uint64_t version, faid_diag *d)
{
    return faid_gen_build_masked(s, cfg, version, NULL, 0, d);
}

faid_gen *faid_gen_build_masked(faid_server *s, const faid_config *cfg, uint64_t version,
                                const uint8_t *detector_mask, uint64_t mask_hash, faid_diag *d)
{
    faid_gen *g = calloc(1, sizeof(*g));
    if (!g) {
        faid_fail(d, FAID_ENOMEM, "out of memory building setup %llu", (unsigned long long)version);
        return NULL;
    }
    atomic_init(&g->refs, 1);
    g->version = version;
    g->nworkers = s->nworkers;
    int64_t t0 = faid_now_ns();
    g->setup = faid_setup_new_masked(cfg, version, detector_mask, d);
    if (!g->setup)
        goto fail;
    g->geometry = cfg->geometry;
    pthread_mutex_lock(&s->gen_mu);
    g->cfg_version = s->cfg_version;
    pthread_mutex_unlock(&s->gen_mu);
    if (detector_mask) {
        g->detector_mask = malloc(g->setup->npix);
        if (!g->detector_mask) {
            faid_fail(d, FAID_ENOMEM, "out of memory for the detector mask");
            goto fail;
        }
        memcpy(g->detector_mask, detector_mask, g->setup->npix);
        g->detector_mask_hash = mask_hash;
        for (size_t i = 0; i < g->setup->npix; i++)
            g->detector_masked += detector_mask[i] != 0;
    }
    size_t nb = (size_t)g->setup->csr->nbins;
    size_t nb2 = g->setup->csr2d ? (size_t)g->setup->csr2d->nbins : 0;
    /* Without the frame's user_data: the worker adds the length each frame carries (reserving
     * MAX_USER_DATA here gave every slot's result buffer 64 KiB more than a frame without
     * user_data needs: 2 MiB more in use once each slot had served, issue 10, defect 14). */
    g->result_bytes = 4 * array_bound(nb * 4) + 3 * array_bound(nb2 * 4) + 2048;
    if (g->setup->csr_bg) /* peaks: 7 arrays of max_num_peaks, 4 of background bins */
        g->result_bytes += 7 * array_bound((size_t)cfg->peaks.max_num_peaks * 4) +
                           4 * array_bound((size_t)g->setup->csr_bg->nbins * 4) + 256;
    /* Before the engines build their programs: the blocks a frame makes anyone allocate
     * (libzmq's copy of a received frame, 4-byte pixels at most, compressed or not; a hit message,
     * the frame as float32; a result) stay in the arenas, the compiler's larger one-off buffers
     * are mapped (faid_memstat.h, issue 20 defect 11). A frame with a large user_data or
     * thousands of peaks may exceed it: it is then mapped too, which costs time, not memory. */
    size_t frame_bytes = g->setup->npix * 4 + g->setup->npix / 16 + 4096;
    size_t mmap_from =
        faid_malloc_fit(frame_bytes > g->result_bytes ? frame_bytes : g->result_bytes);
    FAID_DEBUG("setup", "setup %llu: blocks from %zu bytes are mapped", (unsigned long long)version,
               mmap_from);
    unsigned seen = atomic_load(&s->dtypes_seen);
    for (int i = 0; i < s->nworkers; i++) {
        g->engines[i] = faid_engine_new(g->setup, s->workers[i].spec, d);
        if (!g->engines[i]) {
            faid_diag_prefix(d, "device %s: ", s->workers[i].spec);
            goto fail;
        }
        size_t pin_bytes = 0;
        void *pin_base = faid_pinned_base(s->pinned, &pin_bytes);
        if (pin_base && faid_engine_host_register(g->engines[i], pin_base, pin_bytes, d)) {
            faid_diag_prefix(d, "device %s: pinned input arena: ", s->workers[i].spec);
            goto fail;
        }
        /* pipeline.inflight frames in slots of pipeline.batch frames each. */
        int batch = cfg->batch < 1                       ? 1
                    : cfg->batch > FAID_ENGINE_BATCH_MAX ? FAID_ENGINE_BATCH_MAX
                                                         : cfg->batch;
        int depth = cfg->inflight / batch;
        depth = depth < 1 ? 1 : depth > FAID_ENGINE_DEPTH_MAX ? FAID_ENGINE_DEPTH_MAX : depth;
        if (faid_engine_set_depth(g->engines[i], depth, d)) {
            faid_diag_prefix(d, "device %s: pipeline.inflight %d (%d slots): ", s->workers[i].spec,
                             cfg->inflight, depth);
            goto fail;
        }
        if (faid_engine_set_batch(g->engines[i], batch, d)) {
            faid_diag_prefix(d, "device %s: pipeline.batch %d: ", s->workers[i].spec, batch);
            goto fail;
        }
        /* Results carry I, sigma, std and count of the cake; its sums stay on the device. */
        if (faid_engine_set_sums_2d(g->engines[i], 0, d)) {
            faid_diag_prefix(d, "device %s: ", s->workers[i].spec);
            goto fail;
        }
        /* Kernels for the frame types already seen are built now, not by the first frame. */
        for (int t = 1; t < 32; t++)
            if ((seen & (1u << t)) && faid_engine_prepare(g->engines[i], (faid_dtype)t, d)) {
                faid_diag_prefix(d, "device %s: ", s->workers[i].spec);
                goto fail;
            }
        g->results[i] = faid_result_new(g->setup);
        if (!g->results[i]) {
            faid_fail(d, FAID_ENOMEM, "out of memory for the result arrays");
            goto fail;
        }
    }
    g->config_yaml = faid_config_dump_alloc(cfg, FAID_DUMP_PLAIN);
    if (!g->config_yaml) {
        faid_fail(d, FAID_ENOMEM, "out of memory dumping the configuration");
        goto fail;
    }
    size_t nazim = g->setup->csr2d ? (size_t)g->setup->csr2d->npt_azim : 0;
    g->start_bytes = array_bound(nb * 8) + array_bound(nazim * 8) + strlen(g->config_yaml) +
                     4 * FAID_PATH_MAX + 8192 + (size_t)s->nworkers * 300 + MAX_USER_DATA;
    faid_log_ratelimited(&rl_ready, FAID_LOG_INFO, "setup",
                         "setup %llu ready: %dx%d pixels, %d bins, %d device(s), %.0f ms",
                         (unsigned long long)version, g->setup->rows, g->setup->cols, (int)nb,
                         s->nworkers, (double)(faid_now_ns() - t0) / 1e6);
    return g;
fail:
    gen_free(g);
    return NULL;
}

faid_gen *faid_server_current_gen(faid_server *s)
{
    pthread_mutex_lock(&s->gen_mu);
    faid_gen *g = s->gen;
    faid_gen_acquire(g);
    pthread_mutex_unlock(&s->gen_mu);
    return g;
}

void faid_server_swap_gen(faid_server *s, faid_gen *g)
{
    pthread_mutex_lock(&s->gen_mu);
    faid_gen *old = s->gen;
    s->gen = g;
    pthread_mutex_unlock(&s->gen_mu);
    faid_gen_release(&old);
}

/* ------------------------------------------------------------------------------------------- */
/* Slots                                                                                         */

faid_slot *faid_slot_get(faid_server *s, int timeout_ms)
{
    void *p = NULL;
    if (faid_queue_pop(s->pool, &p, timeout_ms))
        return NULL;
    faid_slot *slot = p;
    slot->kind = FAID_SLOT_FREE;
    slot->counted = 0;
    slot->series_seq = 0;
    slot->has_frame_id = 0;
    slot->err_msg[0] = '\0';
    slot->err_code = 0;
    slot->err_stage = NULL;
    slot->out_len = 0;
    slot->series_uid[0] = '\0';
    slot->device = -1;
    slot->has_table = 0;
    slot->table_us = 0.0;
    memset(&slot->h, 0, sizeof(slot->h));
    return slot;
}

faid_event *faid_event_get(faid_server *s, int timeout_ms)
{
    void *p = NULL;
    if (faid_queue_pop(s->event_pool, &p, timeout_ms))
        return NULL;
    faid_event *e = p;
    e->kind = FAID_ITEM_EVENT;
    memset(&e->ev, 0, sizeof(e->ev));
    e->user_data_len = 0;
    e->setup = FAID_SETUP_REUSED;
    e->build_ms = 0;
    return e;
}

void faid_event_put(faid_server *s, faid_event *e)
{
    faid_gen_release(&e->gen);
    faid_gen_job_release(&e->build);
    e->user_data_len = 0;
    /* The pool's capacity is the number of records: this never waits. */
    faid_queue_push(s->event_pool, e, -1);
}

void faid_slot_release_parts(faid_slot *slot)
{
    if (slot->pin) {
        faid_pinned_free(slot->pin_arena, slot->pin);
        slot->pin = NULL;
    }
    for (int k = 0; k < slot->nkept; k++)
        zmq_msg_close(&slot->part[k]);
    slot->nkept = 0;
    slot->payload = NULL;
    slot->payload_len = 0;
    slot->h.user_data = NULL;
    slot->h.user_data_len = 0;
}

void faid_slot_clear_frame(faid_slot *slot)
{
    faid_slot_release_parts(slot);
    faid_gen_release(&slot->gen);
    faid_gen_job_release(&slot->build);
}

void faid_slot_put(faid_server *s, faid_slot *slot)
{
    faid_slot_clear_frame(slot);
    slot->kind = FAID_SLOT_FREE;
    /* The pool's capacity is the number of slots: this never waits. */
    faid_queue_push(s->pool, slot, -1);
}

int faid_slot_reserve(faid_slot *slot, size_t n)
{
    if (slot->out_cap >= n)
        return 0;
    uint8_t *p = realloc(slot->out, n);
    if (!p)
        return FAID_ENOMEM;
    slot->out = p;
    slot->out_cap = n;
    return 0;
}

uint32_t faid_slot_table_blocks(const faid_setup *su)
{
    return faid_bslz4_max_blocks((uint64_t)su->rows * (uint64_t)su->cols * 4u, 1, 0);
}

int faid_slot_reserve_table(faid_slot *slot, uint32_t cap, faid_diag *d)
{
    if (slot->table.cap >= cap && slot->table.offset)
        return 0;
    faid_block_table_free(&slot->table);
    return faid_block_table_alloc(&slot->table, cap, d);
}

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

static void *make_socket(faid_server *s, int type, const char *endpoint, int bind, int hwm,
                         int linger, int64_t max_msg, const char *what, faid_diag *d)
{
    if (bind && ipc_in_use(endpoint, d)) {
        faid_diag_prefix(d, "%s socket: ", what);
        return NULL;
    }
    void *sock = zmq_socket(s->zctx, type);
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
    if (type == ZMQ_PULL) {
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
    pthread_mutex_init(&s->build_mu, NULL);
    pthread_mutex_init(&s->info_mu, NULL);
    pthread_mutex_init(&s->hits_mu, NULL);
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
    s->max_user_data = MAX_USER_DATA;
    s->lossless_grace_ns = (int64_t)(cfg->lossless_shutdown_timeout * 1e9);
    s->ll_overflow = cfg->lossless_overflow;
    s->stop_grace_ns = (int64_t)(cfg->stop_timeout * 1e9);
    atomic_init(&s->dtypes_seen, 0u);
    atomic_init(&s->in_accepted, 0u);
    atomic_init(&s->in_closed, 0u);
    atomic_init(&s->in_accept_failed, 0u);
    atomic_init(&s->in_over_cap, 0u);
    atomic_init(&s->pin_frames, 0u);
    atomic_init(&s->pin_fallback, 0u);

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
    if (io_threads < nin + 1)
        io_threads = nin + 1;
    if (zmq_ctx_set(s->zctx, ZMQ_IO_THREADS, io_threads) != 0)
        FAID_WARN("server", "ZMQ_IO_THREADS %d: %s", io_threads, zmq_strerror(zmq_errno()));
    /* input.protocol: a value this build cannot honour stops the daemon here, never later. */
    faid_input_protocol proto;
    if (faid_input_protocol_parse(cfg->input_protocol, &proto) != 0) {
        faid_fail(d, FAID_ECONFIG, "input.protocol: unknown protocol \"%s\"", cfg->input_protocol);
        goto fail;
    }
    if (faid_input_available(proto, d)) {
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
        s->pull[i] =
            make_socket(s, ZMQ_PULL, ep, cfg->input_bind, depth, 0, s->input_max_msg, what, d);
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
            !(s->input_mon[i] = zmq_socket(s->zctx, ZMQ_PAIR)) ||
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
        s->workers[i].started = 1;
    }
    if (faid_writer_start(s->writer))
        return faid_fail(d, FAID_ENOMEM, "cannot start the writer thread");
    if (pthread_create(&s->publish_thread, NULL, faid_publish_main, s))
        return faid_fail(d, FAID_ENOMEM, "cannot start the publisher thread");
    s->publish_started = 1;
    return faid_ingest_start(s, d);
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
    faid_ingest_join(s);
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
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    faid_gen_release(&s->gen);
    faid_aggr_destroy(&s->aggr);
    faid_writer_destroy(&s->writer);
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
    pthread_mutex_destroy(&s->build_mu);
    pthread_mutex_destroy(&s->info_mu);
    pthread_mutex_destroy(&s->hits_mu);
    for (int i = 0; i < s->nworkers; i++) {
        free(s->workers[i].hit_raw);
        free(s->workers[i].hit_img);
        free(s->workers[i].hit_msg);
    }
    free(s);
    *ps = NULL;
}

/* ------------------------------------------------------------------------------------------- */
/* Reload                                                                                        */

/* Options that shape sockets, threads and pools: changing them needs a restart. */
static int check_fixed(const faid_config *a, const faid_config *b, faid_diag *d)
{
    /* Derived from the option table: every option without FAID_OPT_RELOAD (the "reload: no" of
     * the generated docs) must keep its effective value. A list written by hand here drifted
     * from the table three times (hits.mode, hits.patch_radius, http.endpoint were accepted;
     * input.max_frame_bytes, pipeline.inflight and pipeline.batch were half applied). */
    size_t n;
    const faid_option *opts = faid_config_options(&n);
    for (size_t i = 0; i < n; i++) {
        if (opts[i].flags & FAID_OPT_RELOAD)
            continue;
        char va[4096], vb[4096];
        if (faid_config_get(a, opts[i].name, va, sizeof va, NULL) != 0 ||
            faid_config_get(b, opts[i].name, vb, sizeof vb, NULL) != 0)
            return faid_fail(d, FAID_ECONFIG, "%s: cannot compare its value: needs a restart",
                             opts[i].name);
        if (strcmp(va, vb) != 0)
            return faid_fail(d, FAID_ECONFIG, "%s changed (%s -> %s): needs a restart",
                             opts[i].name, va, vb);
    }
    return 0;
}

/* The start message's geometry in the configuration's frame (shape, orientation). */
static void apply_start_geometry(faid_config *cfg, const faid_geometry *g)
{
    int rows = cfg->geometry.rows, cols = cfg->geometry.cols;
    int orient = cfg->geometry.orientation;
    cfg->geometry = *g;
    cfg->geometry.rows = rows;
    cfg->geometry.cols = cols;
    cfg->geometry.orientation = orient;
    cfg->pixel1 = g->pixel1;
    cfg->pixel2 = g->pixel2;
}

static int same_geometry(const faid_geometry *a, const faid_geometry *b)
{
    return a->dist == b->dist && a->poni1 == b->poni1 && a->poni2 == b->poni2 &&
           a->wavelength == b->wavelength && a->pixel1 == b->pixel1 && a->pixel2 == b->pixel2 &&
           a->rot1 == b->rot1 && a->rot2 == b->rot2 && a->rot3 == b->rot3;
}

/* A series' setup built on its own thread, so that ingest keeps reading the series' frames
 * meanwhile (a build takes a CSR matrix and engines: 1.1 s for an EIGER 4M mask, split bbox, on
 * the 2-core PoCL machine). Frames and the start event that need it hold references. */
struct faid_gen_job {
    atomic_int refs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;      /* under mu */
    faid_gen *gen; /* under mu: the generation built (a reference), NULL when it failed */
    double build_ms;
    faid_server *s;
    faid_config *cfg;
    uint8_t *mask; /* a copy (ingest reuses its buffer), or NULL */
    uint64_t hash;
    int start_geometry;
    faid_geometry geometry; /* the start message's, when start_geometry */
    pthread_t thread;
    int joinable;
};

const char *faid_setup_choice_name(int choice)
{
    switch (choice) {
    case FAID_SETUP_REUSED:
        return "reused";
    case FAID_SETUP_REBUILT:
        return "rebuilt";
    default:
        return "failed";
    }
}

faid_gen_job *faid_gen_job_acquire(faid_gen_job *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void faid_gen_job_release(faid_gen_job **pb)
{
    if (!pb || !*pb)
        return;
    faid_gen_job *b = *pb;
    *pb = NULL;
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* The builder drops its reference last thing, and ingest drops its own only after the join
     * (faid_gen_job_finish): whoever frees, the builder no longer touches the job. */
    faid_gen_release(&b->gen);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b->cfg);
    free(b->mask);
    free(b);
}

int faid_gen_job_done(faid_gen_job *b)
{
    pthread_mutex_lock(&b->mu);
    int done = b->done;
    pthread_mutex_unlock(&b->mu);
    return done;
}

faid_gen *faid_gen_job_wait(faid_gen_job *b, atomic_int_fast64_t *alive, double *build_ms)
{
    pthread_mutex_lock(&b->mu);
    while (!b->done) {
        if (alive)
            atomic_store_explicit(alive, faid_now_ns(), memory_order_relaxed);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    faid_gen *g = b->gen;
    faid_gen_acquire(g);
    if (build_ms)
        *build_ms = b->build_ms;
    pthread_mutex_unlock(&b->mu);
    return g;
}

void faid_gen_job_finish(faid_gen_job **pb)
{
    if (!pb || !*pb)
        return;
    faid_gen_job *b = *pb;
    if (b->joinable) {
        pthread_join(b->thread, NULL);
        b->joinable = 0;
    }
    faid_gen_job_release(pb);
}

static void *builder_main(void *arg)
{
    faid_gen_job *b = arg;
    faid_server *s = b->s;
    faid_diag d;
    faid_diag_clear(&d);
    /* build_mu: one build or reload at a time, each from the state in force. */
    pthread_mutex_lock(&s->build_mu);
    /* The configuration in force now (a reload may have come since the start message). */
    pthread_mutex_lock(&s->gen_mu);
    *b->cfg = s->cfg;
    pthread_mutex_unlock(&s->gen_mu);
    if (b->start_geometry)
        apply_start_geometry(b->cfg, &b->geometry);
    int64_t t0 = faid_now_ns();
    /* Test hook: FAID_TEST_SETUP_BUILD_DELAY_MS lengthens every series-start build, so the
     * integration tests can watch ingest, control and the queue during a build on a small
     * detector. */
    const char *dv = getenv("FAID_TEST_SETUP_BUILD_DELAY_MS");
    long delay_ms = dv && *dv ? strtol(dv, NULL, 10) : 0;
    if (delay_ms > 0 && delay_ms < 60000)
        nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000L}, NULL);
    faid_gen *g = faid_gen_build_masked(s, b->cfg, s->next_version, b->mask, b->hash, &d);
    double ms = (double)(faid_now_ns() - t0) / 1e6;
    if (g) {
        s->next_version++;
        g->start_geometry = b->start_geometry;
        faid_log_ratelimited(
            &rl_build, FAID_LOG_INFO, "server",
            "setup %llu built off the ingest thread: detector pixel mask %s (%llu pixels), "
            "geometry of the %s, %.0f ms",
            (unsigned long long)g->version, b->mask ? "applied" : "none",
            (unsigned long long)g->detector_masked,
            b->start_geometry ? "start message" : "configuration", ms);
        faid_gen_acquire(g);
        faid_server_swap_gen(s, g);
    } else {
        faid_log_ratelimited(&rl_build_fail, FAID_LOG_ERROR, "server",
                             "setup of a series start not built (%.0f ms): %s; the setup in "
                             "force stays",
                             ms, d.msg);
    }
    pthread_mutex_unlock(&s->build_mu);
    pthread_mutex_lock(&b->mu);
    b->gen = g;
    b->build_ms = ms;
    b->done = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    /* Never the last reference: ingest drops its own only after joining this thread. */
    faid_gen_job_release(&b);
    return NULL;
}

int faid_server_series_setup(faid_server *s, const uint8_t *mask, uint64_t hash,
                             const faid_geometry *start_geometry, faid_gen_job **build,
                             faid_setup_choice *choice, faid_diag *d)
{
    *build = NULL;
    *choice = FAID_SETUP_FAILED;
    faid_gen *cur = faid_server_current_gen(s);
    pthread_mutex_lock(&s->gen_mu);
    uint64_t cfg_version = s->cfg_version;
    pthread_mutex_unlock(&s->gen_mu);
    size_t npix = cur->setup->npix;
    /* The key: configuration version, mask (hash, then every byte: a hash match alone never
     * reuses), shape (the mask was checked against it), geometry source and geometry. */
    int same =
        cur->cfg_version == cfg_version && cur->detector_mask_hash == hash &&
        (!mask || (cur->detector_mask && memcmp(cur->detector_mask, mask, npix) == 0)) &&
        (start_geometry ? cur->start_geometry && same_geometry(start_geometry, &cur->geometry)
                        : !cur->start_geometry);
    if (same) {
        faid_gen_release(&cur);
        *choice = FAID_SETUP_REUSED;
        return 0;
    }
    faid_gen_job *b = calloc(1, sizeof(*b));
    if (!b) {
        faid_gen_release(&cur);
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    }
    atomic_init(&b->refs, 1);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->s = s;
    b->hash = hash;
    b->start_geometry = start_geometry != NULL;
    b->cfg = malloc(sizeof(*b->cfg));
    b->mask = mask ? malloc(npix) : NULL;
    faid_gen_release(&cur);
    if (!b->cfg || (mask && !b->mask)) {
        faid_gen_job_release(&b);
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    }
    if (mask)
        memcpy(b->mask, mask, npix);
    if (start_geometry)
        b->geometry = *start_geometry;
    /* The builder's reference; ingest's is the one returned. */
    faid_gen_job_acquire(b);
    if (pthread_create(&b->thread, NULL, builder_main, b) != 0) {
        atomic_fetch_sub(&b->refs, 1);
        faid_gen_job_release(&b);
        return faid_fail(d, FAID_ENOMEM, "cannot start the setup builder thread");
    }
    b->joinable = 1;
    *build = b;
    *choice = FAID_SETUP_REBUILT;
    return 0;
}

int faid_server_reload(faid_server *s, const char *path, uint64_t *version, faid_diag *d)
{
    /* A path from control is read once: it never replaces the start file, which SIGHUP and a
     * reload without a path re-read (the setup says which file it came from). */
    char file[FAID_PATH_MAX];
    snprintf(file, sizeof(file), "%s", path && *path ? path : s->config_path);
    faid_config *nc = malloc(sizeof(*nc));
    if (!nc)
        return faid_fail(d, FAID_ENOMEM, "reload: out of memory");
    faid_config_default(nc);
    int rc = 0;
    if (file[0])
        rc = faid_config_load(file, nc, d);
    if (!rc)
        rc = check_fixed(&s->cfg, nc, d);
    /* security.authorized_keys: read now, put in force with the rest (a folder that cannot be
     * read refuses the reload and the keys in force stay). */
    faid_zap_keys *keys = NULL;
    if (!rc && s->zap && !(keys = faid_zap_keys_load(nc->authorized_keys, d)))
        rc = d && d->code ? d->code : FAID_ECONFIG;
    if (!rc) {
        faid_log_level lvl;
        if (faid_log_parse_level(nc->log_level, &lvl) == 0)
            faid_log_set_level(lvl);
        /* The detector mask of the series in progress stays part of the setup. */
        pthread_mutex_lock(&s->build_mu);
        faid_gen *cur = faid_server_current_gen(s);
        faid_config built = *nc;
        /* ... and so does the start message's geometry (input.geometry_source start). */
        if (cur->start_geometry)
            apply_start_geometry(&built, &cur->geometry);
        faid_gen *g = faid_gen_build_masked(s, &built, s->next_version, cur->detector_mask,
                                            cur->detector_mask_hash, d);
        if (g)
            g->start_geometry = cur->start_geometry;
        faid_gen_release(&cur);
        if (!g) {
            rc = d && d->code ? d->code : FAID_ECONFIG;
        } else {
            s->next_version++;
            *version = g->version;
            pthread_mutex_lock(&s->gen_mu);
            s->cfg = *nc;
            s->cfg_version++;
            g->cfg_version = s->cfg_version;
            pthread_mutex_unlock(&s->gen_mu);
            faid_server_swap_gen(s, g);
            if (keys) {
                faid_log_ratelimited(&rl_keys, FAID_LOG_INFO, "security",
                                     "%zu client key(s) authorized from %s",
                                     faid_zap_keys_count(keys), nc->authorized_keys);
                faid_zap_set_keys(s->zap, keys);
                keys = NULL;
            }
            faid_log_ratelimited(&rl_reloaded, FAID_LOG_INFO, "server",
                                 "reloaded %s: setup version %llu", file[0] ? file : "(default)",
                                 (unsigned long long)*version);
        }
        pthread_mutex_unlock(&s->build_mu);
    }
    faid_zap_keys_destroy(&keys);
    if (rc)
        faid_diag_prefix(d, "reload %s: ", file[0] ? file : "(embedded default)");
    free(nc);
    return rc;
}
