/* zmq_sink: the C receivers of tests/bench/fan-bench.py (never a test), so that what that
 * benchmark measures is the sender or the fan-out, not a receiver in Python.
 *
 *   faid-bench --zmq-sink --endpoint EP [--bind] --frames N [--timeout S] [--json FILE]
 *       one PULL socket (bound or connected): receives N messages (every part of each) and
 *       releases them, nothing decoded; msg/s from the first message to the last, as
 *       --zmq-ceiling's receiver counts.
 *   faid-bench --fan-sink --endpoint EP [--name NAME] [--window W] [--credit-every K]
 *                         [--timeout S] [--json FILE]
 *       one faid-fan instance as the link sees it (proto/faid_fan_proto.h): a DEALER that says
 *       hello with window W, receives route + detector parts, releases them and grants credit
 *       every K images and every 100 ms (as faid does), until SIGTERM / SIGINT or --timeout.
 *
 * Both print one line and write JSON with the count, the bytes and the CLOCK_MONOTONIC times of
 * the first and the last message (the clock of Python's time.monotonic_ns(): the harness spans
 * several sinks with them). Exit status 0, 1 on an error, 2 on a usage error. */
#include "faid_fan_proto.h"
#include "faid_log.h"

#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench_opt.h"

int faid_zmq_sink_main(int argc, char **argv);

typedef struct zs_opts {
    int fan; /* --fan-sink */
    int frames;
    const char *endpoint;
    const char *name;
    const char *json;
    int bind;
    int window, credit_every, timeout_s;
} zs_opts;

static const char zs_usage[] =
    "usage: faid-bench --zmq-sink --endpoint EP [--bind] --frames N [--timeout S] [--json FILE]\n"
    "       faid-bench --fan-sink --endpoint EP [--name NAME] [--window W] [--credit-every K]\n"
    "                             [--timeout S] [--json FILE]\n"
    "--zmq-sink: a PULL socket that receives N messages and releases them (msg/s first to\n"
    "last); --fan-sink: one faid-fan instance (hello, credit every K images and every 100 ms)\n"
    "that receives and releases images until SIGTERM or --timeout. Defaults: window 64,\n"
    "credit every 8, timeout 300 s, name sink.\n";

static volatile sig_atomic_t zs_stop;

static void zs_on_signal(int sig)
{
    (void)sig;
    zs_stop = 1;
}

static int zs_send_link(void *sock, faid_fan_type type, const zs_opts *o, uint64_t done)
{
    faid_fan_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    snprintf(m.instance, sizeof m.instance, "%s", o->name);
    snprintf(m.config_hash, sizeof m.config_hash, "bench");
    m.window = (uint64_t)o->window;
    m.done = done;
    uint8_t buf[512];
    size_t len = 0;
    if (faid_fan_encode(&m, buf, sizeof buf, &len, NULL))
        return -1;
    return zmq_send(sock, buf, len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

int faid_zmq_sink_main(int argc, char **argv)
{
    zs_opts o = {.name = "sink", .window = 64, .credit_every = 8, .timeout_s = 300, .frames = 0};
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--fan-sink") == 0)
            o.fan = 1;
    const char *prog = o.fan ? "faid-bench --fan-sink" : "faid-bench --zmq-sink";
    int bind_flag = 1; /* --bind (a BENCH_OFF switch) sets it to 0 */
    const bench_shared sh = {.frames = o.fan ? NULL : &o.frames, .frames_min = 1, .json = &o.json};
    const bench_opt own[] = {
        {"zmq-sink", BENCH_MODE, NULL, NULL, 0, 0, NULL},
        {"fan-sink", BENCH_MODE, NULL, NULL, 0, 0, NULL},
        {"endpoint", BENCH_STR, &o.endpoint, NULL, 0, 0, NULL},
        {"bind", BENCH_OFF, NULL, &bind_flag, 0, 0, NULL},
        {"name", BENCH_STR, &o.name, NULL, 0, 0, NULL},
        {"window", BENCH_INT, NULL, &o.window, 1, 131072, NULL},
        {"credit-every", BENCH_INT, NULL, &o.credit_every, 1, 131072, NULL},
        {"timeout", BENCH_INT, NULL, &o.timeout_s, 1, 86400, NULL},
    };
    int prc = bench_parse(prog, argc, argv, &sh, own, (int)(sizeof own / sizeof own[0]), zs_usage);
    if (prc)
        return prc > 0 ? 0 : 2;
    o.bind = bind_flag == 0;
    if (!o.endpoint || (!o.fan && o.frames < 1)) {
        fprintf(stderr, "%s: --endpoint%s needed\n%s", prog, o.fan ? "" : " and --frames are",
                zs_usage);
        return 2;
    }
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
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = zs_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    void *ctx = zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, o.fan ? ZMQ_DEALER : ZMQ_PULL) : NULL;
    if (!sock) {
        fprintf(stderr, "%s: socket: %s\n", prog, zmq_strerror(zmq_errno()));
        return 1;
    }
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    /* credit bounds what the fan-out sends; a plain sink takes what its sender's HWM allows */
    if (o.fan)
        zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof zero);
    int rc = o.bind ? zmq_bind(sock, o.endpoint) : zmq_connect(sock, o.endpoint);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot %s %s: %s\n", prog, o.bind ? "bind" : "connect", o.endpoint,
                zmq_strerror(zmq_errno()));
        zmq_close(sock);
        zmq_ctx_term(ctx);
        return 1;
    }
    if (o.fan && zs_send_link(sock, FAID_FAN_HELLO, &o, 0) != 0) {
        fprintf(stderr, "%s: hello: %s\n", prog, zmq_strerror(zmq_errno()));
        rc = 1;
    }
    uint64_t count = 0, done = 0;
    double bytes = 0;
    int64_t first_ns = 0, last_ns = 0, t_end = faid_now_ns() + (int64_t)o.timeout_s * 1000000000;
    int64_t credit_ns = faid_now_ns();
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (rc == 0 && !zs_stop && (o.fan || count < (uint64_t)o.frames)) {
        int64_t now = faid_now_ns();
        if (now > t_end) {
            if (!o.fan) {
                fprintf(stderr, "%s: timeout after %d s with %llu of %d messages\n", prog,
                        o.timeout_s, (unsigned long long)count, o.frames);
                rc = 1;
            }
            break;
        }
        if (o.fan && now - credit_ns > 100000000) {
            zs_send_link(sock, FAID_FAN_CREDIT, &o, done);
            credit_ns = now;
        }
        zmq_pollitem_t item = {.socket = sock, .events = ZMQ_POLLIN};
        if (zmq_poll(&item, 1, 50) <= 0)
            continue;
        /* every message waiting, whole (multipart delivery is atomic) */
        for (;;) {
            if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0)
                break;
            int image = !o.fan;
            if (o.fan) {
                faid_fan_msg r;
                if (faid_fan_decode(zmq_msg_data(&m), zmq_msg_size(&m), &r, NULL) == 0) {
                    if (r.type == FAID_FAN_REFUSED) {
                        fprintf(stderr, "%s: refused by the fan-out: %s\n", prog, r.error);
                        rc = 1;
                    }
                    image = r.type == FAID_FAN_ROUTE && r.kind == FAID_FAN_KIND_IMAGE;
                }
            }
            size_t n = 0;
            while (zmq_msg_more(&m) && zmq_msg_recv(&m, sock, 0) >= 0) {
                n += zmq_msg_size(&m);
            }
            if (!image)
                continue;
            int64_t t = faid_now_ns();
            if (!count)
                first_ns = t;
            last_ns = t;
            count++;
            bytes += (double)n;
            if (o.fan && ++done % (uint64_t)o.credit_every == 0) {
                zs_send_link(sock, FAID_FAN_CREDIT, &o, done);
                credit_ns = t;
            }
            if (!o.fan && count >= (uint64_t)o.frames)
                break;
        }
    }
    zmq_msg_close(&m);
    if (o.fan)
        zs_send_link(sock, FAID_FAN_BYE, &o, done);
    double s = last_ns > first_ns ? (double)(last_ns - first_ns) / 1e9 : 0;
    double rate = s > 0 ? (double)(count - 1) / s : 0;
    printf("%s %s: %llu messages, %.1f MB after their first part, %.1f msg/s first to last\n", prog,
           o.name, (unsigned long long)count, bytes / 1e6, rate);
    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "%s: cannot write %s\n", prog, o.json);
            rc = 1;
        } else {
            fprintf(f,
                    "{\"name\": \"%s\", \"messages\": %llu, \"bytes\": %.0f, \"first_ns\": %lld, "
                    "\"last_ns\": %lld, \"msg_per_s\": %.1f}\n",
                    o.name, (unsigned long long)count, bytes, (long long)first_ns,
                    (long long)last_ns, rate);
            fclose(f);
        }
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return rc;
}
