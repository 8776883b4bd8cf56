/* faidctl aggregates: the aggregates (hit rate, num_peaks histogram, virtual powder pattern) of
 * several instances summed (faid_aggr_add): subscribes to each instance's output, keeps each
 * one's latest `aggregates` message, and once every instance reported (and, with --frames, the
 * sum counts that many frames) prints the sum and ends. proto/PROTOCOL.md 3.8. */
#include "faidctl.h"

#include "faid_client.h"
#include "faid_log.h"
#include "faid_npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: faidctl aggregates --from ENDPOINT... [--frames N] [--timeout S] [--json]\n"
        "                          [--powder FILE.npy] [--server-key FAID.pub --key CLIENT.key]\n"
        "Sums the aggregates of several instances (peaks on, peaks.aggregates_interval > 0):\n"
        "frames, hits and peaks, the num_peaks histogram and the virtual powder pattern add\n"
        "up, the hit rate is the instances' windows' rate weighted by their frames.\n"
        "  --from ENDPOINT  an instance's output (repeat for each)\n"
        "  --frames N       wait until the instances' latest aggregates count N frames\n"
        "                   together (default: one message from each is enough)\n"
        "  --timeout S      give up after S seconds (default 10; exit status 1)\n"
        "  --json           print the sum as one JSON line\n"
        "  --powder FILE    write the summed powder pattern as a <u8 [rows, cols] "
        ".npy\n" FAIDCTL_KEY_USAGE);
}

int faidctl_aggregates(int argc, char **argv)
{
    const char *powder = NULL;
    faidctl_from fo = {.timeout = 10, .timeout_max = 86400};
    long long want = 0;
    enum { O_FRAMES = 256, O_POWDER };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"frames", required_argument, NULL, O_FRAMES},
        {"powder", required_argument, NULL, O_POWDER},
        FAIDCTL_FROM_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_from_getopt(&fo, "aggregates", argc, argv, longopts, &first)) != -1) {
        char *end = NULL;
        switch (c) {
        case FAIDCTL_O_BAD:
            return 2;
        case 'h':
            usage(stdout);
            return 0;
        case O_FRAMES:
            want = strtoll(optarg, &end, 10);
            if (*end || want < 1) {
                fprintf(stderr, "faidctl aggregates: --frames needs a positive integer, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case O_POWDER:
            powder = optarg;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || fo.n == 0) {
        fprintf(stderr, "faidctl aggregates: %s\n",
                fo.n ? "unexpected argument" : "give each instance's output with --from");
        usage(stderr);
        return 2;
    }
    faid_curve_keys ck;
    int krc = faidctl_keys_load(&fo.keys, "aggregates", &ck);
    if (krc)
        return krc;
    faid_diag d;
    faid_diag_clear(&d);
    faid_sub *subs[FAID_MERGE_MAX_INSTANCES] = {0};
    uint8_t *latest[FAID_MERGE_MAX_INSTANCES] = {0};
    size_t latest_len[FAID_MERGE_MAX_INSTANCES] = {0};
    uint64_t latest_frames[FAID_MERGE_MAX_INSTANCES] = {0};
    faid_sub_opts so = {.curve = &ck};
    int status = 1;
    faid_aggr_sum sum = {0};
    for (int i = 0; i < fo.n; i++)
        if (!(subs[i] = faid_sub_new_opts(fo.from[i], FAID_SUB_PUB, &so, &d))) {
            fprintf(stderr, "faidctl aggregates: %s\n", d.msg);
            goto out;
        }
    faidctl_catch_stop();
    int64_t deadline = faid_now_ns() + (int64_t)(fo.timeout * 1e9);
    for (;;) {
        int have = 0;
        uint64_t frames = 0;
        for (int i = 0; i < fo.n; i++) {
            have += latest[i] != NULL;
            frames += latest_frames[i];
        }
        if (have == fo.n && frames >= (uint64_t)want)
            break;
        if (faidctl_stop || faid_now_ns() >= deadline) {
            fprintf(stderr,
                    "faidctl aggregates: %s after %g s: ", faidctl_stop ? "interrupted" : "timeout",
                    fo.timeout);
            for (int i = 0; i < fo.n; i++)
                if (!latest[i])
                    fprintf(stderr, "no aggregates from %s; ", fo.from[i]);
            fprintf(stderr, "%llu of %lld frames counted\n", (unsigned long long)frames, want);
            goto out;
        }
        zmq_pollitem_t items[FAID_MERGE_MAX_INSTANCES];
        for (int i = 0; i < fo.n; i++)
            items[i] = (zmq_pollitem_t){faid_sub_zsocket(subs[i]), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(items, fo.n, 100) <= 0)
            continue;
        for (int i = 0; i < fo.n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            faid_sub_msg msg;
            int rc = faid_sub_recv(subs[i], 0, &msg, &d);
            if (rc == FAID_EZMQ || rc == FAID_EAUTH) {
                fprintf(stderr, "faidctl aggregates: %s\n", d.msg);
                goto out;
            }
            if (rc || msg.m.type != FAID_OUT_AGGREGATES)
                continue;
            /* Checked now, so that a bad message names its instance at once. */
            faid_aggr_sum one = {0};
            rc = faid_aggr_add(&one, msg.body, msg.len, &d);
            uint64_t f = one.frames;
            faid_aggr_clear(&one);
            if (rc) {
                fprintf(stderr, "faidctl aggregates: %s: %s\n", fo.from[i], d.msg);
                continue;
            }
            uint8_t *copy = malloc(msg.len ? msg.len : 1);
            if (!copy) {
                fprintf(stderr, "faidctl aggregates: out of memory\n");
                goto out;
            }
            memcpy(copy, msg.body, msg.len);
            free(latest[i]);
            latest[i] = copy;
            latest_len[i] = msg.len;
            latest_frames[i] = f;
        }
    }
    for (int i = 0; i < fo.n; i++)
        if (faid_aggr_add(&sum, latest[i], latest_len[i], &d) != 0) {
            fprintf(stderr, "faidctl aggregates: %s: %s\n", fo.from[i], d.msg);
            goto out;
        }
    if (fo.json) {
        printf("{\"type\": \"aggregates\", \"merged\": true, \"instances\": %d, \"frames\": %llu, "
               "\"hits\": %llu, \"peaks\": %llu, \"hit_rate\": %.9g, \"hit_rate_window_frames\": "
               "%llu, \"num_peaks_bin_width\": %llu, \"num_peaks_histogram\": [",
               sum.instances, (unsigned long long)sum.frames, (unsigned long long)sum.hits,
               (unsigned long long)sum.peaks, sum.hit_rate, (unsigned long long)sum.window_frames,
               (unsigned long long)sum.bin_width);
        for (uint64_t k = 0; k < sum.nbins; k++)
            printf("%s%llu", k ? ", " : "", (unsigned long long)sum.histogram[k]);
        uint64_t total = 0;
        for (uint64_t k = 0; sum.powder && k < sum.rows * sum.cols; k++)
            total += sum.powder[k];
        printf("], \"powder_shape\": [%llu, %llu], \"powder_total\": %llu}\n",
               (unsigned long long)sum.rows, (unsigned long long)sum.cols,
               (unsigned long long)total);
    } else {
        printf("instances: %d\nframes: %llu\nhits: %llu\npeaks: %llu\n", sum.instances,
               (unsigned long long)sum.frames, (unsigned long long)sum.hits,
               (unsigned long long)sum.peaks);
        printf("hit_rate: %.4f (over the %llu frames of the instances' windows)\n", sum.hit_rate,
               (unsigned long long)sum.window_frames);
        printf("num_peaks histogram (bin width %llu):", (unsigned long long)sum.bin_width);
        for (uint64_t k = 0; k < sum.nbins; k++)
            if (sum.histogram[k])
                printf(" %llu+: %llu", (unsigned long long)(k * sum.bin_width),
                       (unsigned long long)sum.histogram[k]);
        printf("\nvirtual powder pattern: [%llu, %llu]\n", (unsigned long long)sum.rows,
               (unsigned long long)sum.cols);
    }
    if (powder) {
        if (!sum.powder) {
            fprintf(stderr, "faidctl aggregates: no powder pattern to write to %s\n", powder);
            goto out;
        }
        size_t shape[2] = {(size_t)sum.rows, (size_t)sum.cols};
        if (faid_npy_write(powder, FAID_DT_U64, 2, shape, sum.powder, &d) != 0) {
            fprintf(stderr, "faidctl aggregates: %s\n", d.msg);
            goto out;
        }
    }
    status = 0;
out:
    memset(&ck, 0, sizeof(ck));
    faid_aggr_clear(&sum);
    for (int i = 0; i < fo.n; i++) {
        free(latest[i]);
        faid_sub_destroy(&subs[i]);
    }
    return status;
}
