/* faid: the server's entry point. Parses the command line, loads the configuration (or the
 * embedded default), starts the pipeline threads and then serves the control socket and signals
 * on the main thread until told to stop.
 *
 * Signals only set a flag and write one byte to a self-pipe that the main loop polls together
 * with the control socket, so handling happens in ordinary code: SIGHUP reloads, SIGTERM/SIGINT
 * stop (stop reading, finish and publish every frame in flight, publish end, exit 0). */
#include "faid_server.h"

#include "faid_pool.h"

#include "faid_http.h"
#include "faid_log.h"
#include "faid_metrics.h"
#include "faid_notify.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop, g_reload;
static int g_wake[2] = {-1, -1};

/* POST /api/v1/stop (an HTTP thread): the same as control `stop` or SIGTERM. */
static void rest_stop(void)
{
    g_stop = 1;
    ssize_t n = write(g_wake[1], "s", 1);
    (void)n;
}

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGHUP)
        g_reload = 1;
    else
        g_stop = 1;
    if (g_wake[1] >= 0) {
        char c = 1;
        ssize_t n = write(g_wake[1], &c, 1);
        (void)n; /* a full pipe already holds a wake-up */
    }
    errno = saved;
}

static int install_signals(void)
{
    if (pipe(g_wake) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(g_wake[i], F_SETFL, fcntl(g_wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(g_wake[i], F_SETFD, FD_CLOEXEC);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A file at the size limit (RLIMIT_FSIZE) is a write error of the writer (EFBIG, counted),
     * not a signal that ends the daemon. */
    signal(SIGXFSZ, SIG_IGN);
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: faid [-c CONFIG.yaml] [--log-level LEVEL]\n"
            "       faid [-c CONFIG.yaml] --dump-config\n"
            "       faid --dump-metrics\n"
            "       faid --help | --version\n"
            "\n"
            "Fast azimuthal integration daemon: receives detector frames on a ZeroMQ PULL socket,\n"
            "integrates them on the configured OpenCL devices and publishes the profiles on a PUB\n"
            "socket (proto/PROTOCOL.md). Runs in the foreground and logs to stderr.\n"
            "\n"
            "  -c, --config FILE   configuration (YAML); without it the embedded default runs\n"
            "                      (every option also reads --opt=value; -- ends the options)\n"
            "  --dump-config       print the effective configuration and exit\n"
            "  --dump-metrics      print the reference of the /metrics metrics (Markdown)\n"
            "  --log-level LEVEL   error | warn | info | debug (overrides log.level)\n"
            "  -h, --help          this text\n"
            "  -V, --version       version of faid and of its wire protocol\n"
            "\n"
            "Signals: SIGHUP re-reads the -c file (never a file loaded by `faidctl reload FILE`);\n"
            "SIGTERM / SIGINT process what the input already holds (input.stop_timeout), finish\n"
            "the frames in flight, publish the series end and exit 0.\n");
}

static faid_ratelimit rl_conn;

/* Every input connection costs a descriptor. With the usual soft limit of 1024, a few hundred
 * idle TCP connections on the data port exhausted it: libzmq's listener then retried the failing
 * accept() in a loop (3 s of CPU in 5 s) and control could not accept faidctl. The soft limit is
 * raised to the hard one (deploy/faid.service sets 65536); the rest is the deployment's job
 * (deploy/multi-host.md, "Deploying the input"). */
static int64_t raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    rlim_t before = rl.rlim_cur;
    /* An unlimited hard limit is not a valid soft one: the kernel's nr_open default. */
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > ((rlim_t)1 << 20)
                      ? ((rlim_t)1 << 20)
                      : rl.rlim_max;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            FAID_WARN("main", "cannot raise the descriptor limit from %llu to %llu: %s",
                      (unsigned long long)before, (unsigned long long)rl.rlim_max, strerror(errno));
            return (int64_t)before;
        }
    }
    FAID_INFO("main", "descriptor limit %llu (was %llu)", (unsigned long long)rl.rlim_cur,
              (unsigned long long)before);
    return (int64_t)rl.rlim_cur;
}

/* The input connections faid keeps open: the descriptor limit less a reserve (a quarter, 192 to
 * 1024) for faid's own descriptors (about 30), control clients, files, and the burst of one
 * accept backlog (libzmq's 100) that libzmq takes before the cap reacts; below 208 descriptors,
 * a quarter of them. At the limit itself libzmq's listeners retry a failing accept() without
 * pause (control's has no monitor to slow it): tests/soak/probe_defects.py saw 4.0 s of CPU in
 * 5.4 s and control answering after 5.2 s (soft = hard = 256, 600 idle connections), so the
 * input must not be the one to reach it. */
static int64_t connection_cap(int64_t nofile)
{
    if (nofile <= 0)
        return 0;
    int64_t reserve = nofile / 4;
    reserve = reserve < 192 ? 192 : reserve > 1024 ? 1024 : reserve;
    if (nofile > reserve + 16)
        return nofile - reserve;
    return nofile / 4 > 0 ? nofile / 4 : 1;
}

/* Whether fd is still an accepted (not listening) socket of the input endpoint `where`: the
 * monitor reports a connection after the fact, and by then it may have closed and its number
 * been reused. TCP: same local port; ipc: a Unix stream socket. */
static int input_fd_matches(int fd, const char *where)
{
    int listening = 0;
    socklen_t ol = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || listening)
        return 0;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
        return 0;
    if (strncmp(where, "ipc://", 6) == 0) {
        const struct sockaddr_un *un = (const struct sockaddr_un *)&sa;
        return sa.ss_family == AF_UNIX && sl > offsetof(struct sockaddr_un, sun_path) &&
               strncmp(un->sun_path, where + 6, sizeof un->sun_path) == 0;
    }
    const char *colon = strrchr(where, ':');
    if (strncmp(where, "tcp://", 6) != 0 || !colon)
        return 0;
    long port = strtol(colon + 1, NULL, 10);
    if (sa.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&sa)->sin_port) == port;
    if (sa.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&sa)->sin6_port) == port;
    return 0;
}

/* One event of the input socket's monitor: [uint16 event, uint32 value][endpoint]. Returns the
 * event, 0 when none was waiting. */
static int input_event(faid_server *s, void *mon)
{
    zmq_msg_t head, addr;
    zmq_msg_init(&head);
    zmq_msg_init(&addr);
    if (zmq_msg_recv(&head, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&head);
        zmq_msg_close(&addr);
        return 0;
    }
    if (zmq_msg_more(&head))
        zmq_msg_recv(&addr, mon, 0);
    uint16_t ev = 0;
    uint32_t value = 0;
    if (zmq_msg_size(&head) >= 6) {
        memcpy(&ev, zmq_msg_data(&head), 2);
        memcpy(&value, (const uint8_t *)zmq_msg_data(&head) + 2, 4);
    }
    char where[256];
    size_t n = zmq_msg_size(&addr) < sizeof(where) - 1 ? zmq_msg_size(&addr) : sizeof(where) - 1;
    memcpy(where, zmq_msg_data(&addr), n);
    where[n] = '\0';
    zmq_msg_close(&head);
    zmq_msg_close(&addr);
    switch (ev) {
    case ZMQ_EVENT_ACCEPTED: {
        faid_stat_add(&s->in_accepted, 1);
        FAID_DEBUG("input", "connection on %s", where);
        uint64_t open = faid_stat_get(&s->in_accepted) - faid_stat_get(&s->in_closed);
        if (s->in_conn_cap > 0 && open > (uint64_t)s->in_conn_cap &&
            input_fd_matches((int)value, where)) {
            /* libzmq owns the descriptor: shutdown() makes its engine see the end of the
             * stream and close the connection (counted as closed by its own event). */
            shutdown((int)value, SHUT_RDWR);
            faid_stat_add(&s->in_over_cap, 1);
            faid_log_ratelimited(&rl_conn, FAID_LOG_WARN, "input",
                                 "a connection on %s closed at once: %lld input connections are "
                                 "open (the cap: descriptor limit less a reserve; status "
                                 "input.over_cap counts these)",
                                 where, (long long)s->in_conn_cap);
        }
        break;
    }
    case ZMQ_EVENT_CONNECTED:
        faid_stat_add(&s->in_accepted, 1);
        FAID_DEBUG("input", "connection on %s", where);
        break;
    case ZMQ_EVENT_DISCONNECTED:
        /* libzmq does not say why; an oversized part is one cause, so the limit is named. */
        faid_stat_add(&s->in_closed, 1);
        /* Info, not warning: most closes are a sender that finished. */
        faid_log_ratelimited(&rl_conn, FAID_LOG_INFO, "input",
                             "a connection on %s closed: the peer left, or it sent a message "
                             "part over %lld bytes (input.max_frame_bytes + %lld for headers) or "
                             "broke the ZeroMQ protocol, and was dropped before it was read",
                             where, (long long)s->input_max_msg,
                             (long long)FAID_INPUT_HEADER_ALLOWANCE);
        break;
    case ZMQ_EVENT_ACCEPT_FAILED:
        faid_stat_add(&s->in_accept_failed, 1);
        faid_log_ratelimited(&rl_conn, FAID_LOG_WARN, "input",
                             "cannot accept a connection on %s: %s", where, strerror((int)value));
        break;
    default:
        break;
    }
    return ev;
}

/* Serves the control socket until a stop is requested; tick_ms: period of the systemd
 * notifications (watchdog, status). */
static void serve(faid_server *s, int tick_ms)
{
    size_t cap = 256 * 1024;
    uint8_t *reply = malloc(cap);
    if (!reply) {
        FAID_ERROR("main", "out of memory for control replies");
        return;
    }
    /* control, the signal pipe, then one monitor per input socket */
    zmq_pollitem_t items[2 + FAID_MAX_ENDPOINTS] = {
        {.socket = s->rep, .events = ZMQ_POLLIN},
        {.socket = NULL, .fd = g_wake[0], .events = ZMQ_POLLIN},
    };
    for (int i = 0; i < s->npull; i++)
        items[2 + i] = (zmq_pollitem_t){.socket = s->input_mon[i], .events = ZMQ_POLLIN};
    while (!g_stop) {
        int n = zmq_poll(items, 2 + s->npull, tick_ms);
        faid_notify_tick(s);
        /* a flood that ended still gets its count of suppressed lines within a second */
        faid_log_flush_suppressed(0);
        if (n < 0 && zmq_errno() == ETERM)
            break;
        if (n < 0 && zmq_errno() != EINTR) {
            /* A transient failure (e.g. out of descriptors) must neither stop the daemon nor
             * make this loop spin. */
            faid_log_ratelimited(&rl_conn, FAID_LOG_ERROR, "main", "zmq_poll: %s",
                                 zmq_strerror(zmq_errno()));
            nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
            continue;
        }
        int failed = 0;
        for (int i = 0; i < s->npull; i++) {
            if (!(items[2 + i].revents & ZMQ_POLLIN))
                continue;
            int ev = 1;
            for (int k = 0; k < 64 && ev; k++)
                failed += (ev = input_event(s, s->input_mon[i])) == ZMQ_EVENT_ACCEPT_FAILED;
        }
        /* At the descriptor limit libzmq retries accept() without pause and reports each
         * failure: counting them must not make this thread spin as well. */
        if (failed)
            nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
        if (items[1].revents & ZMQ_POLLIN) {
            char buf[64];
            while (read(g_wake[0], buf, sizeof(buf)) > 0) {
            }
        }
        if (g_reload) {
            g_reload = 0;
            uint64_t version = 0;
            faid_diag d;
            faid_diag_clear(&d);
            FAID_INFO("main", "SIGHUP: reloading");
            pthread_mutex_lock(&s->ctl_mu);
            int rc = faid_server_reload(s, NULL, &version, &d);
            pthread_mutex_unlock(&s->ctl_mu);
            if (rc)
                FAID_WARN("main", "%s (the current setup stays)", d.msg);
        }
        if (!(items[0].revents & ZMQ_POLLIN))
            continue;
        zmq_msg_t req;
        zmq_msg_init(&req);
        if (zmq_msg_recv(&req, s->rep, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&req);
            continue;
        }
        /* A multipart request is answered from its first part; the rest is discarded so the
         * REP socket stays in step. */
        int more = zmq_msg_more(&req);
        while (more) {
            zmq_msg_t extra;
            zmq_msg_init(&extra);
            if (zmq_msg_recv(&extra, s->rep, 0) < 0) {
                zmq_msg_close(&extra);
                break;
            }
            more = zmq_msg_more(&extra);
            zmq_msg_close(&extra);
        }
        faid_mpw w;
        faid_mpw_init(&w, reply, cap);
        int stop = 0;
        pthread_mutex_lock(&s->ctl_mu);
        faid_control_handle(s, zmq_msg_data(&req), zmq_msg_size(&req), &w, &stop);
        pthread_mutex_unlock(&s->ctl_mu);
        zmq_msg_close(&req);
        if (w.overflow) {
            faid_mpw_init(&w, reply, cap);
            faid_mpw_map_begin(&w);
            faid_mpw_key(&w, FAID_K_OK);
            faid_mpw_bool(&w, 0);
            faid_mpw_key(&w, FAID_K_ERROR);
            faid_mpw_key(&w, "reply too large");
            faid_mpw_map_end(&w);
        }
        zmq_send(s->rep, reply, w.len, 0);
        if (stop)
            g_stop = 1;
    }
    free(reply);
}

int main(int argc, char **argv)
{
    const char *config_path = NULL;
    const char *level_arg = NULL;
    int dump = 0;
    faid_log_set_name("faid");
    enum { O_DUMP_CONFIG = 256, O_DUMP_METRICS, O_LOG_LEVEL };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"config", required_argument, NULL, 'c'},
        {"dump-config", no_argument, NULL, O_DUMP_CONFIG},
        {"dump-metrics", no_argument, NULL, O_DUMP_METRICS},
        {"log-level", required_argument, NULL, O_LOG_LEVEL},
        {NULL, 0, NULL, 0},
    };
    int opt;
    opterr = 0; /* faid's own messages below */
    while ((opt = getopt_long(argc, argv, ":hVc:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("faid %s (protocol %d)\n", FAID_VERSION, FAID_PROTO_VERSION);
            return 0;
        case O_DUMP_METRICS: {
            char *md = faid_metrics_markdown();
            if (md)
                fputs(md, stdout);
            free(md);
            return md ? 0 : 1;
        }
        case O_DUMP_CONFIG:
            dump = 1;
            break;
        case 'c':
            config_path = optarg;
            break;
        case O_LOG_LEVEL:
            level_arg = optarg;
            break;
        default: {
            const char *what = argv[optind - 1];
            char shortname[3] = {'-', (char)optopt, '\0'};
            if (optopt > 0 && optopt < 128 && strncmp(what, "--", 2) != 0)
                what = shortname;
            fprintf(stderr, "faid: %s '%s'\n\n",
                    opt == ':' ? "option needs a value:" : "unknown option", what);
            usage(stderr);
            return 2;
        }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "faid: unexpected argument '%s'\n\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    faid_config *cfg = malloc(sizeof(*cfg));
    if (!cfg) {
        fprintf(stderr, "faid: out of memory\n");
        return 1;
    }
    faid_config_default(cfg);
    faid_diag d;
    faid_diag_clear(&d);
    if (config_path && faid_config_load(config_path, cfg, &d)) {
        fprintf(stderr, "faid: %s\n", d.msg);
        free(cfg);
        return 1;
    }
    if (dump) {
        char *text = faid_config_dump_alloc(cfg, FAID_DUMP_PLAIN);
        int ok = text != NULL;
        if (ok)
            fputs(text, stdout);
        free(text);
        free(cfg);
        return ok ? 0 : 1;
    }
    faid_log_level lvl;
    if (level_arg) {
        if (faid_log_parse_level(level_arg, &lvl)) {
            fprintf(stderr, "faid: --log-level '%s': expected error, warn, info or debug\n",
                    level_arg);
            free(cfg);
            return 2;
        }
        faid_log_set_level(lvl);
    } else if (faid_log_parse_level(cfg->log_level, &lvl) == 0) {
        faid_log_set_level(lvl);
    }
    if (install_signals() != 0) {
        fprintf(stderr, "faid: cannot create the signal pipe: %s\n", strerror(errno));
        free(cfg);
        return 1;
    }
    FAID_INFO("main", "faid %s starting (%s)", FAID_VERSION,
              config_path ? config_path : "embedded default configuration");
    int64_t nofile = raise_nofile();
    /* The HTTP server comes first, so /healthz answers "starting" while the kernels build. */
    faid_http *http = NULL;
    faid_http_opts hopts = {.endpoint = cfg->http_endpoint,
                            .token_file = cfg->http_token_file,
                            .tls_cert = cfg->http_tls_cert,
                            .tls_key = cfg->http_tls_key};
    if (cfg->http_endpoint[0] && !(http = faid_http_new(&hopts, &d))) {
        FAID_ERROR("main", "%s", d.msg);
        free(cfg);
        return 1;
    }
    int tick_ms = faid_notify_init(500);
    faid_server *s = faid_server_new(cfg, config_path, &d);
    free(cfg);
    if (!s) {
        FAID_ERROR("main", "%s", d.msg);
        faid_http_destroy(&http);
        return 1;
    }
    s->http = http;
    s->in_conn_cap = connection_cap(nofile);
    FAID_INFO("main", "input connections capped at %lld", (long long)s->in_conn_cap);
    if (http)
        faid_http_attach(http, s);
    if (faid_server_start(s, &d)) {
        FAID_ERROR("main", "%s", d.msg);
        faid_http_destroy(&http);
        faid_server_destroy(&s);
        return 1;
    }
    FAID_INFO("main", "ready");
    pthread_mutex_lock(&s->ctl_mu);
    s->ctl_closed = 0; /* REST control is served from now on */
    pthread_mutex_unlock(&s->ctl_mu);
    if (http) {
        faid_http_on_stop(http, rest_stop);
        faid_http_set_health(http, FAID_HEALTH_READY);
    }
    faid_notify_ready(s);
    serve(s, tick_ms);
    FAID_INFO("main", "stopping: finishing the frames in flight");
    pthread_mutex_lock(&s->ctl_mu);
    s->ctl_closed = 1; /* a REST request in progress has finished; later ones get 503 */
    pthread_mutex_unlock(&s->ctl_mu);
    if (http)
        faid_http_set_health(http, FAID_HEALTH_STOPPING);
    faid_notify_stopping();
    faid_server_shutdown(s);
    /* The publisher has stopped offering results; the event streams end within 100 ms. */
    s->http = NULL;
    faid_http_destroy(&http);
    faid_log_flush_suppressed(1); /* every pipeline thread has stopped */
    uint64_t given_up = 0;
    for (int k = 0; k < FAID_NMSGKINDS; k++)
        given_up += faid_stat_get(&s->stats.ll_given_up[k]);
    /* Frames (received = processed + failed + dropped) and output messages are separate books. */
    FAID_INFO("main",
              "frames: received %llu, processed %llu, failed %llu, dropped %llu; lossless "
              "messages: sent %llu, acknowledged %llu, given up %llu",
              (unsigned long long)faid_stat_get(&s->stats.received),
              (unsigned long long)faid_stat_get(&s->stats.processed),
              (unsigned long long)faid_stat_get(&s->stats.failed),
              (unsigned long long)faid_stat_get(&s->stats.dropped),
              (unsigned long long)faid_stat_get(&s->stats.lossless_sent),
              (unsigned long long)faid_stat_get(&s->stats.ll_acked), (unsigned long long)given_up);
    faid_server_destroy(&s);
    close(g_wake[0]);
    close(g_wake[1]);
    FAID_INFO("main", "bye");
    return 0;
}
