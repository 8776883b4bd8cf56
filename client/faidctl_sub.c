/* faidctl sub: subscribes to a daemon's output, shows a live one-line summary (results/s, latency,
 * frames missing by id, messages lost by sequence number, errors), optionally prints every message
 * as a JSON line and writes every profile as a .dat file (and a 2D cake as .npy files), and ends
 * after N results, the end of a series, a timeout or Ctrl-C with a summary on stdout.
 *
 * Gap accounting: frames may arrive out of order (several devices), so the frame ids seen in the
 * current series are kept in a bitmap and "missing" is the number of ids between the smallest and
 * the largest seen that never arrived. "lost" counts holes in msg_number, which the daemon numbers
 * without gaps over start/result/end/error: on the lossy PUB socket it shows what the high-water
 * mark dropped, including messages that carry no frame id. */
#include "faidctl.h"

#include "faid_client.h"
#include "faid_log.h"
#include "faid_proto.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_FROM "tcp://127.0.0.1:5556"
/* Frame ids beyond this many above the series' first id are counted but not tracked for gaps
 * (bounds the bitmap at 16 MiB whatever ids a sender invents). */
#define MAX_TRACKED_IDS (1ull << 27)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: faidctl sub [--from ENDPOINT]... [--lossless [--name NAME] [--credit N]]\n"
            "                   [--fan ENDPOINT] [--window N] [--max-wait S] [--dead-after S]\n"
            "                   [--count N] [--timeout S] [--until-end] [--out DIR] [--json]\n"
            "                   [--quiet] [--rcvhwm N] [--server-key FAID.pub --key CLIENT.key]\n"
            "  --from ENDPOINT  the daemon's output (default %s);\n"
            "                   repeated: one instance each, merged into one stream\n"
            "                   (proto/PROTOCOL.md, Several instances): each start once,\n"
            "                   results in frame order within the window, one end per\n"
            "                   series with summed totals and the frames never seen\n"
            "  --fan ENDPOINT   merged: the fan-out's PUB, whose lost reports are passed on\n"
            "                   and end the instance's part of the series\n"
            "  --window N       merged: results held for reordering (default 256)\n"
            "  --max-wait S     merged: longest a result waits for older frames (default 2)\n"
            "  --dead-after S   merged: an instance silent this long is done with its series\n"
            "                   (default 10; faid sends stats every stats.interval)\n"
            "  --lossless       ENDPOINT is the lossless channel (output.lossless_endpoint):\n"
            "                   acknowledged delivery, re-sent messages dropped by msg_number;\n"
            "                   while another consumer holds it, waits for its turn\n"
            "  --name NAME      lossless consumer name: a consumer restarted under the same\n"
            "                   name takes its place at once\n"
            "  --credit N       lossless: messages faid may send ahead of acks (default 256)\n"
            "  --count N        stop after N results\n"
            "  --timeout S      stop after S seconds (exit status 1 if --count was not reached)\n"
            "  --until-end      stop after the first series end message\n"
            "  --out DIR        write each profile to DIR/<series>_<frame_id>.dat, and a 2D\n"
            "                   cake to DIR/<series>_<frame_id>_2d_{I,sigma,count}.npy (those\n"
            "                   the result carries: I alone with faid's output.cake lean),\n"
            "                   peaks to DIR/<series>_<frame_id>.peaks\n"
            "  --json           print every message as one JSON line on stdout\n"
            "  --quiet          no live summary line on stderr\n"
            "  --rcvhwm N       receive high-water mark in messages (default "
            "ZeroMQ's)\n" FAIDCTL_KEY_USAGE
            "A refused CURVE handshake ends the command with exit status 1 and the reason.\n"
            "The summary on stdout counts results, missing and duplicate frames and lost\n"
            "messages (msg_number gaps); `rate` runs from the first message of any kind to\n"
            "the last, `result rate` from the first result to the last.\n",
            DEFAULT_FROM);
}

typedef struct id_tracker {
    int active;
    uint64_t series_id;
    uint64_t base, min, max; /* base = first id seen; bitmap bit k = id base + k */
    uint8_t *bits;
    size_t cap_bits;
    uint64_t unique, duplicates, untracked;
} id_tracker;

typedef struct sub_stats {
    uint64_t results, starts, ends, errors, stats, bad, lost;
    uint64_t missing_done, unique_done, duplicates_done; /* over finished series */
    int have_msgno;
    uint64_t last_msgno;
    double lat_sum, lat_max;
    uint64_t lat_n;
    double e2e_sum, e2e_max;
    uint64_t e2e_n;
    uint64_t files;
    uint64_t bytes;
    uint64_t late, never_seen, fan_lost, mismatched; /* merged (several --from) */
    int64_t first_ns, last_ns;
    int64_t first_result_ns, last_result_ns; /* the span of the results alone */
} sub_stats;

static uint64_t tracker_missing(const id_tracker *t)
{
    if (!t->active || t->unique == 0)
        return 0;
    uint64_t span = t->max - t->min + 1;
    return span > t->unique ? span - t->unique : 0;
}

static void tracker_finish(id_tracker *t, sub_stats *st)
{
    if (t->active) {
        st->missing_done += tracker_missing(t);
        st->unique_done += t->unique;
        st->duplicates_done += t->duplicates;
    }
    free(t->bits);
    memset(t, 0, sizeof(*t));
}

/* Records a frame id; returns 0, or FAID_ENOMEM. */
static int tracker_add(id_tracker *t, sub_stats *st, uint64_t series_id, uint64_t id)
{
    if (t->active && t->series_id != series_id)
        tracker_finish(t, st);
    if (!t->active) {
        t->active = 1;
        t->series_id = series_id;
        t->base = t->min = t->max = id;
    }
    if (id < t->min)
        t->min = id;
    if (id > t->max)
        t->max = id;
    if (id < t->base || id - t->base >= MAX_TRACKED_IDS) {
        /* Out of the bitmap: counted as unique, without duplicate detection. */
        t->unique++;
        t->untracked++;
        return 0;
    }
    uint64_t k = id - t->base;
    if (k >= t->cap_bits) {
        size_t ncap = t->cap_bits ? t->cap_bits : 4096;
        while (ncap <= k)
            ncap *= 2;
        uint8_t *nb = realloc(t->bits, ncap / 8);
        if (!nb)
            return FAID_ENOMEM;
        memset(nb + t->cap_bits / 8, 0, (ncap - t->cap_bits) / 8);
        t->bits = nb;
        t->cap_bits = ncap;
    }
    if (t->bits[k / 8] & (1u << (k % 8))) {
        t->duplicates++;
    } else {
        t->bits[k / 8] |= (uint8_t)(1u << (k % 8));
        t->unique++;
    }
    return 0;
}

static int make_dir(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0)
        return S_ISDIR(sb.st_mode) ? 0 : -1;
    return mkdir(dir, 0777);
}

static void live_line(const sub_stats *st, const id_tracker *t, int tty, double elapsed)
{
    double fps = elapsed > 0 ? (double)st->results / elapsed : 0;
    fprintf(stderr,
            "%ssub: %llu results  %.1f frames/s  latency %.2f ms (max %.2f)  missing %llu  "
            "lost %llu  errors %llu%s",
            tty ? "\r\033[K" : "", (unsigned long long)st->results, fps,
            st->lat_n ? st->lat_sum / (double)st->lat_n / 1000.0 : 0.0, st->lat_max / 1000.0,
            (unsigned long long)(st->missing_done + tracker_missing(t)),
            (unsigned long long)st->lost, (unsigned long long)(st->errors + st->bad),
            tty ? "" : "\n");
    fflush(stderr);
}

/* s as the inside of a JSON string (a series' unique id comes from the detector's stream). */
static void json_text(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\%c", ch);
        else if (ch < 0x20)
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", ch);
        else
            out[n++] = (char)ch;
    }
    out[n] = '\0';
}

/* The merged stream's own events (an end, a mismatch, a fan-out's lost report): shown and
 * counted; returns 1 on a fatal output error (never today). */
static int merged_event(const faid_merge_msg *mm, sub_stats *st, int json, char *jb, size_t cap,
                        int quiet, int tty)
{
    const char *nl = tty && !quiet ? "\n" : "";
    switch (mm->kind) {
    case FAID_MERGE_END: {
        const faid_merge_end *e = &mm->end;
        st->ends++;
        st->never_seen += e->missing;
        if (json) {
            /* One line, as the other messages: the merged end's fields (docs/faidctl.md). */
            char uid[6 * FAID_SERIES_UID_MAX + 1];
            json_text(uid, sizeof(uid), e->series_unique_id);
            size_t n = (size_t)snprintf(
                jb, cap,
                "{\"type\": \"end\", \"merged\": true, \"series_id\": %llu, "
                "\"series_unique_id\": \"%s\", \"instances\": %d, \"ended\": %d, \"silent\": "
                "%d, \"lost\": %d, \"frames_received\": %llu, \"frames_processed\": %llu, "
                "\"frames_failed\": %llu, \"frames_dropped\": %llu, \"stale_messages\": %llu, "
                "\"incomplete\": %s, \"delivered\": %llu, \"late\": %llu, \"duplicates\": "
                "%llu, \"refused\": %llu, \"untracked\": %llu, \"expected\": %llu, \"missing\": "
                "%llu, \"missing_truncated\": %s, \"fan_report\": %s, \"lost_delivered\": "
                "%llu, \"missing_frames\": [",
                (unsigned long long)e->series_id, uid, e->instances, e->ended, e->silent, e->lost,
                (unsigned long long)e->frames_received, (unsigned long long)e->frames_processed,
                (unsigned long long)e->frames_failed, (unsigned long long)e->frames_dropped,
                (unsigned long long)e->stale_messages, e->incomplete ? "true" : "false",
                (unsigned long long)e->delivered, (unsigned long long)e->late,
                (unsigned long long)e->duplicates, (unsigned long long)e->refused,
                (unsigned long long)e->untracked, (unsigned long long)e->expected,
                (unsigned long long)e->missing, e->ranges_truncated ? "true" : "false",
                e->fan_report ? "true" : "false", (unsigned long long)e->lost_delivered);
            for (int i = 0; i < e->nranges && n < cap; i++)
                n += (size_t)snprintf(jb + n, cap - n, "%s[%llu, %llu]", i ? ", " : "",
                                      (unsigned long long)e->ranges[i][0],
                                      (unsigned long long)e->ranges[i][1]);
            if (n < cap)
                snprintf(jb + n, cap - n, "]}");
            printf("%s\n", jb);
            fflush(stdout);
        }
        if (!quiet && (e->missing || e->incomplete))
            fprintf(stderr,
                    "%sfaidctl sub: series %llu ended over %d instances (%d ended, %d silent, %d "
                    "lost): %llu of %llu frames never seen\n",
                    nl, (unsigned long long)e->series_id, e->instances, e->ended, e->silent,
                    e->lost, (unsigned long long)e->missing, (unsigned long long)e->expected);
        return 0;
    }
    case FAID_MERGE_MISMATCH:
        st->mismatched++;
        st->errors++;
        fprintf(stderr, "%sfaidctl sub: %s\n", nl, mm->text);
        return 0;
    case FAID_MERGE_LOST:
        st->fan_lost += mm->lost.nframes;
        if (json) {
            faid_diag d;
            if (faid_mp_to_json(mm->msg.body, mm->msg.len, jb, cap, 8, &d) == 0) {
                printf("%s\n", jb);
                fflush(stdout);
            }
        }
        if (!quiet)
            fprintf(stderr, "%sfaidctl sub: the fan-out lost %llu frames of series %llu with %s\n",
                    nl, (unsigned long long)mm->lost.nframes,
                    (unsigned long long)mm->lost.series_id, mm->lost.instance);
        return 0;
    default:
        return 0;
    }
}

int faidctl_sub(int argc, char **argv)
{
    const char *outdir = NULL, *fan = NULL;
    faidctl_from fo = {.timeout = -1}; /* no timeout unless given */
    faid_merge_opts mo = {0};
    int lossless = 0, until_end = 0, quiet = 0, rcvhwm = 0;
    const char *name = NULL;
    long credit = 0;
    long long count = -1;
    enum {
        O_LOSSLESS = 256,
        O_NAME,
        O_CREDIT,
        O_UNTIL_END,
        O_QUIET,
        O_OUT,
        O_COUNT,
        O_RCVHWM,
        O_FAN,
        O_WINDOW,
        O_MAX_WAIT,
        O_DEAD_AFTER
    };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"lossless", no_argument, NULL, O_LOSSLESS},
        {"name", required_argument, NULL, O_NAME},
        {"credit", required_argument, NULL, O_CREDIT},
        {"until-end", no_argument, NULL, O_UNTIL_END},
        {"quiet", no_argument, NULL, O_QUIET},
        {"out", required_argument, NULL, O_OUT},
        {"count", required_argument, NULL, O_COUNT},
        {"rcvhwm", required_argument, NULL, O_RCVHWM},
        {"fan", required_argument, NULL, O_FAN},
        {"window", required_argument, NULL, O_WINDOW},
        {"max-wait", required_argument, NULL, O_MAX_WAIT},
        {"dead-after", required_argument, NULL, O_DEAD_AFTER},
        FAIDCTL_FROM_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_from_getopt(&fo, "sub", argc, argv, longopts, &first)) != -1) {
        char *end = NULL;
        switch (c) {
        case FAIDCTL_O_BAD:
            return 2;
        case 'h':
            usage(stdout);
            return 0;
        case O_FAN:
            fan = optarg;
            break;
        case O_WINDOW: {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 1 << 20) {
                fprintf(stderr, "faidctl sub: --window needs an integer in [1, %d], got '%s'\n",
                        1 << 20, optarg);
                return 2;
            }
            mo.window = (int)v;
            break;
        }
        case O_MAX_WAIT:
        case O_DEAD_AFTER: {
            double v = strtod(optarg, &end);
            if (*end || !(v > 0) || v > 86400) {
                fprintf(stderr, "faidctl sub: --%s needs seconds in (0, 86400], got '%s'\n",
                        c == O_MAX_WAIT ? "max-wait" : "dead-after", optarg);
                return 2;
            }
            *(c == O_MAX_WAIT ? &mo.max_wait_ms : &mo.dead_after_ms) = (int)(v * 1000 + 0.5);
            break;
        }
        case O_LOSSLESS:
            lossless = 1;
            break;
        case O_NAME:
            name = optarg;
            break;
        case O_CREDIT:
            credit = strtol(optarg, &end, 10);
            if (*end || credit < 1 || credit > 65536) {
                fprintf(stderr, "faidctl sub: --credit needs an integer in [1, 65536], got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case O_UNTIL_END:
            until_end = 1;
            break;
        case O_QUIET:
            quiet = 1;
            break;
        case O_OUT:
            outdir = optarg;
            break;
        case O_COUNT:
            count = strtoll(optarg, &end, 10);
            if (*end || count < 1) {
                fprintf(stderr, "faidctl sub: --count needs a positive integer, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case O_RCVHWM: {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 1 << 24) {
                fprintf(stderr, "faidctl sub: --rcvhwm needs a positive integer, got '%s'\n",
                        optarg);
                return 2;
            }
            rcvhwm = (int)v;
            break;
        }
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "faidctl sub: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (outdir && make_dir(outdir) != 0) {
        fprintf(stderr, "faidctl sub: cannot use output directory %s: %s\n", outdir,
                strerror(errno));
        return 1;
    }

    faid_diag d;
    faid_diag_clear(&d);
    faid_curve_keys ck;
    int krc = faidctl_keys_load(&fo.keys, "sub", &ck);
    if (krc)
        return krc;
    const int merged = fo.n > 1 || fan;
    if (merged && lossless) {
        memset(&ck, 0, sizeof(ck));
        fprintf(stderr, "faidctl sub: --lossless takes one --from endpoint (no merge)\n");
        return 2;
    }
    if (fo.n == 0)
        fo.from[fo.n++] = DEFAULT_FROM;
    const char *from = fo.from[fo.n - 1]; /* the one of an unmerged subscription */
    faid_sub *s = NULL;
    faid_merge *mg = NULL;
    if (merged) {
        mo.fan = fan;
        mo.rcvhwm = rcvhwm;
        mo.curve = &ck;
        mg = faid_merge_new(fo.from, fo.n, &mo, &d);
    } else {
        faid_sub_opts so = {
            .rcvhwm = rcvhwm, .name = name, .credit = (uint32_t)credit, .curve = &ck};
        s = faid_sub_new_opts(from, lossless ? FAID_SUB_LOSSLESS : FAID_SUB_PUB, &so, &d);
    }
    memset(&ck, 0, sizeof(ck));
    if (!s && !mg) {
        fprintf(stderr, "faidctl sub: %s\n", d.msg);
        return 1;
    }
    faidctl_catch_stop();

    int tty = isatty(STDERR_FILENO);
    sub_stats st;
    memset(&st, 0, sizeof(st));
    id_tracker tr;
    memset(&tr, 0, sizeof(tr));
    size_t json_cap = 1 << 20;
    char *json_buf = fo.json ? malloc(json_cap) : NULL;
    if (fo.json && !json_buf) {
        fprintf(stderr, "faidctl sub: out of memory\n");
        faid_sub_destroy(&s);
        faid_merge_destroy(&mg);
        return 1;
    }
    const char *why = "interrupted";
    int status = 0;
    int64_t t0 = faid_now_ns(), next_line = t0 + 1000000000LL;
    int64_t deadline = fo.timeout > 0 ? t0 + (int64_t)(fo.timeout * 1e9) : INT64_MAX;

    for (;;) {
        if (faidctl_stop)
            break;
        int64_t now = faid_now_ns();
        if (now >= deadline) {
            why = "timeout";
            break;
        }
        if (!quiet && now >= next_line) {
            live_line(&st, &tr, tty, (double)(now - t0) / 1e9);
            next_line = now + (tty ? 1000000000LL : 5000000000LL);
        }
        int64_t wait_ns = next_line - now;
        if (deadline - now < wait_ns)
            wait_ns = deadline - now;
        int wait_ms = (int)(wait_ns / 1000000) + 1;

        faid_sub_msg msg;
        int src = 0, rc;
        if (mg) {
            faid_merge_msg mm;
            rc = faid_merge_next(mg, wait_ms, &mm, &d);
            if (rc == 0 && mm.kind != FAID_MERGE_START && mm.kind != FAID_MERGE_RESULT &&
                mm.kind != FAID_MERGE_OTHER) {
                if (merged_event(&mm, &st, fo.json, json_buf, json_cap, quiet, tty)) {
                    why = "series end";
                    break;
                }
                if (until_end && mm.kind == FAID_MERGE_END) {
                    why = "series end";
                    break;
                }
                continue;
            }
            if (rc == 0) {
                msg = mm.msg;
                src = mm.source >= 0 ? mm.source : 0;
                st.late += mm.late != 0;
            }
        } else {
            rc = faid_sub_recv(s, wait_ms, &msg, &d);
        }
        if (rc == FAID_ETIMEOUT)
            continue;
        if (rc == FAID_EBUSY) {
            /* Another consumer holds the lossless channel: say so once, wait for the turn. */
            faid_sub_ll_stats ls;
            faid_sub_lossless_stats(s, &ls);
            if (ls.refused == 1)
                fprintf(stderr, "%sfaidctl sub: %s (waiting)\n", tty && !quiet ? "\n" : "", d.msg);
            continue;
        }
        if (rc == FAID_EZMQ || rc == FAID_EAUTH) {
            fprintf(stderr, "%sfaidctl sub: %s\n", tty && !quiet ? "\n" : "", d.msg);
            status = 1;
            why = rc == FAID_EAUTH ? "authentication failed" : "socket error";
            break;
        }
        if (rc) {
            st.bad++;
            fprintf(stderr, "%sfaidctl sub: %s\n", tty && !quiet ? "\n" : "", d.msg);
            continue;
        }
        const faid_out_msg *m = &msg.m;
        if (st.first_ns == 0)
            st.first_ns = msg.recv_wall_ns;
        st.last_ns = msg.recv_wall_ns;
        st.bytes += msg.len;
        if (m->type != FAID_OUT_STATS && !mg) {
            /* msg_number is per process: merged, frame ids say what is missing instead. */
            if (st.have_msgno && m->msg_number > st.last_msgno + 1)
                st.lost += m->msg_number - st.last_msgno - 1;
            /* A smaller number means the daemon restarted: start counting again. */
            st.have_msgno = 1;
            st.last_msgno = m->msg_number;
        }
        (void)src;
        if (fo.json) {
            /* Flushed per line so a pipe reader sees each message as it arrives. */
            if (faid_mp_to_json(msg.body, msg.len, json_buf, json_cap, 8, &d) == 0) {
                printf("%s\n", json_buf);
                fflush(stdout);
            } else
                fprintf(stderr, "faidctl sub: cannot render a %s message: %s\n",
                        faid_out_type_name(m->type), d.msg);
        }
        switch (m->type) {
        case FAID_OUT_START:
            st.starts++;
            if (tr.active && tr.series_id != m->series_id)
                tracker_finish(&tr, &st);
            break;
        case FAID_OUT_STATS:
            st.stats++;
            break;
        case FAID_OUT_ERROR:
            st.errors++;
            if (!quiet) {
                char frame[40] = "";
                if (m->has_frame_id)
                    snprintf(frame, sizeof(frame), ", frame %llu", (unsigned long long)m->frame_id);
                fprintf(stderr, "%sfaidctl sub: error from faid (series %llu%s): %s %s: %s\n",
                        tty ? "\n" : "", (unsigned long long)m->series_id, frame, m->stage, m->code,
                        m->message);
            }
            break;
        case FAID_OUT_END:
            st.ends++;
            break;
        case FAID_OUT_RESULT: {
            st.results++;
            if (st.first_result_ns == 0)
                st.first_result_ns = msg.recv_wall_ns;
            st.last_result_ns = msg.recv_wall_ns;
            if (m->latency_us > 0) {
                st.lat_sum += m->latency_us;
                st.lat_n++;
                if (m->latency_us > st.lat_max)
                    st.lat_max = m->latency_us;
            }
            faid_mp_obj v;
            uint64_t rns;
            if (faid_proto_map_find(msg.body, msg.len, FAID_K_RECEIVED_NS, &v, NULL, NULL) == 0 &&
                faid_mp_to_u64(&v, &rns) == 0 && rns > 0 && msg.recv_wall_ns > (int64_t)rns) {
                double e2e = (double)(msg.recv_wall_ns - (int64_t)rns) / 1000.0;
                st.e2e_sum += e2e;
                st.e2e_n++;
                if (e2e > st.e2e_max)
                    st.e2e_max = e2e;
            }
            if (m->has_frame_id && tracker_add(&tr, &st, m->series_id, m->frame_id) != 0) {
                fprintf(stderr, "faidctl sub: out of memory tracking frame ids\n");
                status = 1;
                why = "out of memory";
                goto done;
            }
            if (outdir) {
                /* The result's own series and setup, not the newest start's: results of
                 * one series can arrive after the next series' start. */
                const faid_series_info *si =
                    mg ? faid_merge_series_of(mg, m->series_id)
                       : faid_sub_series_of(s, m->series_id, m->setup_version);
                char stem[FAID_SERIES_UID_MAX + 32], path[4096];
                faid_dat_series_stem(stem, sizeof(stem), m->series_id,
                                     si ? si->series_unique_id : NULL);
                int n2d = 0;
                if (faid_dat_path(path, sizeof(path), outdir, stem, m->frame_id, &d) != 0 ||
                    faid_result_write_dat(si ? si : (s ? faid_sub_series(s) : NULL), m, path, &d) !=
                        0 ||
                    faid_result_write_2d_npy(m, outdir, stem, &n2d, &d) != 0 ||
                    (m->has_peaks && faid_result_write_peaks(si, m, outdir, stem, &d) != 0)) {
                    fprintf(stderr, "%sfaidctl sub: %s\n", tty && !quiet ? "\n" : "", d.msg);
                    status = 1;
                    why = "write error";
                    goto done;
                }
                st.files += 1 + (uint64_t)n2d + (m->has_peaks ? 1 : 0);
            }
            break;
        }
        default:
            break;
        }
        if (count > 0 && st.results >= (uint64_t)count) {
            why = "count reached";
            break;
        }
        if (until_end && m->type == FAID_OUT_END) {
            why = "series end";
            break;
        }
    }
    if (strcmp(why, "timeout") == 0 && count > 0)
        status = 1;
done:
    if (!quiet && tty)
        fputc('\n', stderr);
    tracker_finish(&tr, &st);
    double span = st.last_ns > st.first_ns ? (double)(st.last_ns - st.first_ns) / 1e9 : 0;
    printf("stopped: %s\n", why);
    printf("results: %llu\n", (unsigned long long)st.results);
    printf("unique frames: %llu\n", (unsigned long long)st.unique_done);
    printf("missing frames: %llu\n", (unsigned long long)st.missing_done);
    printf("duplicate frames: %llu\n", (unsigned long long)st.duplicates_done);
    printf("lost messages: %llu\n", (unsigned long long)st.lost);
    printf("messages: start %llu, end %llu, error %llu, stats %llu, undecodable %llu\n",
           (unsigned long long)st.starts, (unsigned long long)st.ends,
           (unsigned long long)st.errors, (unsigned long long)st.stats, (unsigned long long)st.bad);
    printf("rate: %.1f results/s over %.3f s, %.2f MB received\n",
           span > 0 ? (double)(st.results > 1 ? st.results - 1 : 0) / span : 0.0, span,
           (double)st.bytes / 1e6);
    /* The results' own span: the rate above runs from the first message to the last of any
     * kind, which a start long before or an end long after the results stretches (a bench's
     * sub waiting for ends of several senders printed 40 results/s for about 1,500). */
    double rspan = st.last_result_ns > st.first_result_ns
                       ? (double)(st.last_result_ns - st.first_result_ns) / 1e9
                       : 0;
    printf("result rate: %.1f results/s from the first result to the last, over %.3f s\n",
           rspan > 0 ? (double)(st.results - 1) / rspan : 0.0, rspan);
    if (st.lat_n)
        printf("latency (faid, received -> result): mean %.3f ms, max %.3f ms\n",
               st.lat_sum / (double)st.lat_n / 1000.0, st.lat_max / 1000.0);
    if (st.e2e_n)
        printf("latency (faid received -> here): mean %.3f ms, max %.3f ms\n",
               st.e2e_sum / (double)st.e2e_n / 1000.0, st.e2e_max / 1000.0);
    if (outdir)
        printf("files: %llu written to %s\n", (unsigned long long)st.files, outdir);
    if (mg)
        printf("merged: %d instances, late results %llu, frames never seen %llu, lost by the "
               "fan-out %llu, mismatched starts %llu\n",
               fo.n, (unsigned long long)st.late, (unsigned long long)st.never_seen,
               (unsigned long long)st.fan_lost, (unsigned long long)st.mismatched);
    if (lossless) {
        faid_sub_ll_stats ls;
        faid_sub_lossless_stats(s, &ls);
        printf("lossless: sessions %llu, refused %llu, re-sent duplicates dropped %llu\n",
               (unsigned long long)ls.sessions, (unsigned long long)ls.refused,
               (unsigned long long)ls.duplicates);
    }
    if (status == 1 && strcmp(why, "timeout") == 0)
        fprintf(stderr, "faidctl sub: timeout after %g s with %llu of %lld results\n", fo.timeout,
                (unsigned long long)st.results, count);
    fflush(stdout);
    free(json_buf);
    faid_sub_destroy(&s);
    faid_merge_destroy(&mg);
    return status;
}
