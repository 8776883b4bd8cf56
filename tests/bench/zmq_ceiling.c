/* zmq_ceiling: the ZeroMQ transport ceiling that the whole daemon is measured against
 * (`faid-bench --zmq-ceiling`, never a test).
 *
 * A PUSH sender thread and a PULL receiver thread, each with its own ZeroMQ context (as faid and
 * `faidctl replay` are separate processes with one context each), move --frames messages over
 * tcp loopback (or ipc) on one connection. Each message is what `faidctl replay` sends per
 * frame: a small header part, then the frame's bitshuffle-LZ4 bytes sent zero-copy from a few
 * distinct synthetic frames of the detector (EIGER 4M uint32 by default: about 2.7 MB each). The
 * receiver only receives and releases the parts; nothing is decoded. The rate counts from the
 * first to the last message received, so connection setup is left out.
 *
 * Usage: faid-bench --zmq-ceiling [--frames N] [--preset NAME | --config FILE] [--dtype T]
 *                   [--distinct K] [--io-threads N] [--transport tcp|ipc] [--hwm N]
 *                   [--start-at T] [--json FILE]
 *
 * --start-at T (wall clock, seconds since the epoch): the sender waits until T before its first
 * message, so that several of these processes started together (daemon-bench's parallel pairs)
 * send at the same time; the JSON then carries the wall-clock times of the first and last
 * message received, from which the pairs' common span is taken. */
#include "faid_codec.h"
#include "faid_config.h"
#include "faid_dtype.h"
#include "faid_geometry.h"
#include "faid_log.h"
#include "faid_synth.h"

#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench_opt.h"

#define HEADER_BYTES 256 /* about the size of a native image header */
#define MAX_DISTINCT 16

int faid_zmq_ceiling_main(int argc, char **argv);

typedef struct zc_opts {
    int frames;
    const char *preset;
    const char *config;
    const char *dtype;
    int distinct;
    int io_threads;
    const char *transport;
    int hwm;
    const char *json;
    const char *start_at_s;
    double start_at;
} zc_opts;

typedef struct zc_run {
    const zc_opts *o;
    char endpoint[256];
    uint8_t *comp[MAX_DISTINCT];
    size_t clen[MAX_DISTINCT];
    int ndistinct;
    void *rx_ctx, *tx_ctx, *rx, *tx;
    /* receiver results */
    long received;
    double bytes;
    int64_t first_ns, last_ns, first_wall, last_wall;
    double late; /* --start-at: how late the sender was ready, s */
    int rx_err, tx_err;
    char rx_msg[160], tx_msg[160];
} zc_run;

static const char zc_usage[] =
    "usage: faid-bench --zmq-ceiling [--frames N] [--preset NAME | --config FILE]\n"
    "                  [--dtype T] [--distinct K] [--io-threads N] [--transport tcp|ipc]\n"
    "                  [--hwm N] [--start-at T] [--json FILE]\n"
    "PUSH -> PULL over one loopback connection, the frames of `faidctl replay`\n"
    "(header part + bslz4 payload, zero-copy), msg/s and GB/s from first to last\n"
    "message received. Defaults: 2000 frames, eiger_4m, uint32, 4 distinct, 1 I/O\n"
    "thread per side, tcp. --start-at T: the first message at wall-clock time T\n"
    "(seconds since the epoch), so that pairs started together send together.\n";

static int zc_parse(int argc, char **argv, zc_opts *o)
{
    *o = (zc_opts){.frames = 2000,
                   .dtype = "uint32",
                   .distinct = 4,
                   .io_threads = 1,
                   .transport = "tcp",
                   .hwm = 0};
    const bench_shared sh = {.frames = &o->frames,
                             .frames_min = 2,
                             .config = &o->config,
                             .dtype = &o->dtype,
                             .json = &o->json};
    const bench_opt own[] = {
        {"zmq-ceiling", BENCH_MODE, NULL, NULL, 0, 0, NULL},
        {"preset", BENCH_STR, &o->preset, NULL, 0, 0, NULL},
        {"distinct", BENCH_INT, NULL, &o->distinct, 1, MAX_DISTINCT, NULL},
        {"io-threads", BENCH_INT, NULL, &o->io_threads, 1, 64, NULL},
        {"transport", BENCH_STR, &o->transport, NULL, 0, 0, "tcp|ipc"},
        {"hwm", BENCH_INT, NULL, &o->hwm, 0, INT_MAX, NULL},
        {"start-at", BENCH_STR, &o->start_at_s, NULL, 0, 0, NULL},
    };
    int rc = bench_parse("faid-bench --zmq-ceiling", argc, argv, &sh, own,
                         (int)(sizeof own / sizeof own[0]), zc_usage);
    if (rc == 0 && o->start_at_s) {
        char *end = NULL;
        o->start_at = strtod(o->start_at_s, &end);
        if (end == o->start_at_s || *end || !(o->start_at > 0 && o->start_at < 1e11)) {
            fprintf(stderr, "faid-bench --zmq-ceiling: bad value '%s' for --start-at\n",
                    o->start_at_s);
            return -1;
        }
    }
    return rc;
}

/* The distinct compressed frames, generated as `faidctl replay` does for the same detector. */
static int zc_frames(zc_run *r, faid_diag *d)
{
    const zc_opts *o = r->o;
    faid_config cfg;
    faid_config_default(&cfg);
    if (o->config && faid_config_load(o->config, &cfg, d))
        return -1;
    if (o->preset) {
        char yaml[160];
        snprintf(yaml, sizeof yaml, "detector:\n  preset: %s\n", o->preset);
        if (!faid_detector_find(o->preset))
            return faid_fail(d, FAID_EINVAL, "unknown detector preset '%s'", o->preset);
        if (faid_config_load_string(yaml, strlen(yaml), "--preset", &cfg, d))
            return -1;
    }
    faid_dtype dt = faid_dtype_parse(o->dtype);
    if (!faid_dtype_is_frame(dt))
        return faid_fail(d, FAID_EINVAL, "--dtype %s is not a frame type", o->dtype);
    size_t npix = (size_t)cfg.rows * (size_t)cfg.cols, esz = faid_dtype_size(dt);
    size_t raw_bytes = npix * esz, cap = faid_bslz4_bound(raw_bytes, esz, 0);
    void *raw = malloc(raw_bytes);
    int rc = 0;
    if (!raw) {
        rc = faid_fail(d, FAID_ENOMEM, "out of memory for a %dx%d frame", cfg.rows, cfg.cols);
        goto out;
    }
    faid_synth *syn = faid_synth_for_config(&cfg, NULL, d);
    if (!syn) {
        rc = -1;
        goto out;
    }
    for (int k = 0; k < o->distinct && rc == 0; k++) {
        r->comp[k] = malloc(cap);
        if (!r->comp[k])
            rc = faid_fail(d, FAID_ENOMEM, "out of memory");
        else if ((rc = faid_synth_frame(syn, (uint64_t)k, dt, raw, raw_bytes, d)) == 0)
            rc = faid_bslz4_encode(raw, raw_bytes, esz, 0, r->comp[k], cap, &r->clen[k], d);
        r->ndistinct = k + 1;
    }
    faid_synth_destroy(&syn);
    printf("zmq-ceiling: %dx%d %s, %d distinct bslz4 frames, %.2f MB each\n", cfg.rows, cfg.cols,
           faid_dtype_name(dt), o->distinct, (double)r->clen[0] / 1e6);
out:
    free(raw);
    return rc;
}

static void *zc_receiver(void *arg)
{
    zc_run *r = arg;
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (r->received < r->o->frames) {
        int more = 1;
        while (more) {
            int n = zmq_msg_recv(&m, r->rx, 0);
            if (n < 0) {
                r->rx_err = 1;
                snprintf(r->rx_msg, sizeof r->rx_msg, "receive: %s", zmq_strerror(zmq_errno()));
                zmq_msg_close(&m);
                return NULL;
            }
            r->bytes += n;
            more = zmq_msg_more(&m);
        }
        int64_t now = faid_now_ns(), wall = faid_wall_ns();
        if (r->received == 0) {
            r->first_ns = now;
            r->first_wall = wall;
        }
        r->last_ns = now;
        r->last_wall = wall;
        r->received++;
    }
    zmq_msg_close(&m);
    return NULL;
}

static void *zc_sender(void *arg)
{
    zc_run *r = arg;
    uint8_t hdr[HEADER_BYTES];
    memset(hdr, 0xa5, sizeof hdr);
    if (r->o->start_at > 0) {
        const int64_t wait = (int64_t)(r->o->start_at * 1e9) - faid_wall_ns();
        if (wait > 0) {
            struct timespec ts = {(time_t)(wait / 1000000000LL), (long)(wait % 1000000000LL)};
            while (nanosleep(&ts, &ts) != 0)
                ;
        } else {
            r->late = (double)-wait / 1e9;
        }
    }
    for (long i = 0; i < r->o->frames; i++) {
        int k = (int)(i % r->ndistinct);
        zmq_msg_t m;
        /* The frames outlive the sockets, so no free function is needed. */
        zmq_msg_init_data(&m, r->comp[k], r->clen[k], NULL, NULL);
        if (zmq_send(r->tx, hdr, sizeof hdr, ZMQ_SNDMORE) < 0 || zmq_msg_send(&m, r->tx, 0) < 0) {
            r->tx_err = 1;
            snprintf(r->tx_msg, sizeof r->tx_msg, "send %ld: %s", i, zmq_strerror(zmq_errno()));
            zmq_msg_close(&m);
            return NULL;
        }
    }
    return NULL;
}

static int zc_sockets(zc_run *r, faid_diag *d)
{
    const zc_opts *o = r->o;
    r->rx_ctx = zmq_ctx_new();
    r->tx_ctx = zmq_ctx_new();
    if (!r->rx_ctx || !r->tx_ctx)
        return faid_fail(d, FAID_EZMQ, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    zmq_ctx_set(r->rx_ctx, ZMQ_IO_THREADS, o->io_threads);
    zmq_ctx_set(r->tx_ctx, ZMQ_IO_THREADS, o->io_threads);
    r->rx = zmq_socket(r->rx_ctx, ZMQ_PULL);
    r->tx = zmq_socket(r->tx_ctx, ZMQ_PUSH);
    if (!r->rx || !r->tx)
        return faid_fail(d, FAID_EZMQ, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int linger = 0;
    zmq_setsockopt(r->rx, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(r->tx, ZMQ_LINGER, &linger, sizeof linger);
    if (o->hwm > 0) {
        zmq_setsockopt(r->rx, ZMQ_RCVHWM, &o->hwm, sizeof o->hwm);
        zmq_setsockopt(r->tx, ZMQ_SNDHWM, &o->hwm, sizeof o->hwm);
    }
    if (strcmp(o->transport, "ipc") == 0)
        snprintf(r->endpoint, sizeof r->endpoint, "ipc:///tmp/faid-zmq-ceiling-%ld.ipc",
                 (long)getpid());
    else
        snprintf(r->endpoint, sizeof r->endpoint, "tcp://127.0.0.1:*");
    if (zmq_bind(r->rx, r->endpoint) != 0)
        return faid_fail(d, FAID_EZMQ, "bind %s: %s", r->endpoint, zmq_strerror(zmq_errno()));
    size_t len = sizeof r->endpoint;
    zmq_getsockopt(r->rx, ZMQ_LAST_ENDPOINT, r->endpoint, &len);
    if (zmq_connect(r->tx, r->endpoint) != 0)
        return faid_fail(d, FAID_EZMQ, "connect %s: %s", r->endpoint, zmq_strerror(zmq_errno()));
    return 0;
}

int faid_zmq_ceiling_main(int argc, char **argv)
{
    zc_opts o;
    int prc = zc_parse(argc, argv, &o);
    if (prc)
        return prc > 0 ? 0 : 2;
    faid_log_set_name("faid-bench");
    /* Every receiver of fan-bench.py allocates the same way (the ceiling's receiver, these
     * sinks, faid-fan): each message is megabytes, which glibc mapped fresh or gave back to the
     * kernel at its free, so the next one faulted its pages in again, zeroed. The ceiling's
     * process escaped that by chance (freeing its 16 MB raw frame raised glibc's dynamic
     * threshold), a sink did not: 30 page faults per EIGER 4M message in `--zmq-sink` against
     * 4 in the ceiling (perf stat, 1000 messages, 2-core box), a handicap of the rows without
     * the fan-out. Kept and reused instead, as faid-fan does (glibc's largest threshold). */
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    zc_run *r = calloc(1, sizeof(*r));
    if (!r) {
        fprintf(stderr, "faid-bench --zmq-ceiling: out of memory\n");
        return 1;
    }
    r->o = &o;
    faid_diag d = {0};
    int rc = 0;
    if (zc_frames(r, &d) || zc_sockets(r, &d)) {
        fprintf(stderr, "faid-bench --zmq-ceiling: %s\n", d.msg);
        rc = 1;
        goto out;
    }
    pthread_t rx, tx;
    if (pthread_create(&rx, NULL, zc_receiver, r) != 0) {
        fprintf(stderr, "faid-bench --zmq-ceiling: cannot start the receiver thread\n");
        rc = 1;
        goto out;
    }
    if (pthread_create(&tx, NULL, zc_sender, r) != 0) {
        fprintf(stderr, "faid-bench --zmq-ceiling: cannot start the sender thread\n");
        /* The receiver waits for frames that will never come: closing its context ends it. */
        zmq_ctx_shutdown(r->rx_ctx);
        pthread_join(rx, NULL);
        rc = 1;
        goto out;
    }
    pthread_join(tx, NULL);
    if (r->tx_err)
        zmq_ctx_shutdown(r->rx_ctx);
    pthread_join(rx, NULL);
    if (r->tx_err || r->rx_err) {
        fprintf(stderr, "faid-bench --zmq-ceiling: %s\n", r->tx_err ? r->tx_msg : r->rx_msg);
        rc = 1;
        goto out;
    }
    double s = (double)(r->last_ns - r->first_ns) / 1e9;
    /* The first message opens the clock, so it is not part of the rate. */
    double per = r->bytes / (double)r->received;
    double msgs = s > 0 ? (double)(r->received - 1) / s : 0;
    double gbs = msgs * per / 1e9;
    printf("zmq-ceiling: %s, %d I/O thread(s) per side, %ld messages of %.2f MB: %.0f msg/s, "
           "%.2f GB/s\n",
           o.transport, o.io_threads, r->received, per / 1e6, msgs, gbs);
    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "faid-bench --zmq-ceiling: cannot write %s\n", o.json);
            rc = 1;
        } else {
            fprintf(f,
                    "{\"transport\": \"%s\", \"io_threads\": %d, \"messages\": %ld, "
                    "\"message_bytes\": %.0f, \"seconds\": %.6f, \"msg_per_s\": %.1f, "
                    "\"gb_per_s\": %.4f, \"first_wall\": %.6f, \"last_wall\": %.6f, "
                    "\"start_at\": %.6f, \"late_s\": %.3f}\n",
                    o.transport, o.io_threads, r->received, per, s, msgs, gbs,
                    (double)r->first_wall / 1e9, (double)r->last_wall / 1e9, o.start_at, r->late);
            fclose(f);
        }
    }
out:
    if (r->tx)
        zmq_close(r->tx);
    if (r->rx)
        zmq_close(r->rx);
    if (r->tx_ctx)
        zmq_ctx_term(r->tx_ctx);
    if (r->rx_ctx)
        zmq_ctx_term(r->rx_ctx);
    if (strcmp(o.transport, "ipc") == 0 && r->endpoint[0])
        unlink(r->endpoint + strlen("ipc://"));
    for (int k = 0; k < r->ndistinct; k++)
        free(r->comp[k]);
    free(r);
    return rc;
}
