/* proto_encode: the CPU cost of writing one result message (`faid-bench --proto-encode`, never a
 * test). Encodes the result the daemon publishes for a 1D integration (the keys, scalars and the
 * four <f4 arrays of --npt bins; with --peaks also the peak arrays and background profile) into a
 * preallocated buffer, --iters times, and prints the mean thread CPU ns per message, once through
 * fixed map heads and, where the writer counts map sizes (FAID_MPW_COUNTED), once through
 * begin/end; then the client's decoding of that message (faid_proto_decode_output), in ns per
 * message. */
#include "faid_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_opt.h"

/* CPU time of this thread (ns): the machines these numbers come from are shared, and wall time
 * counted the waits for a core. */
static int64_t cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

typedef struct pe_opts {
    int npt, npeaks, iters;
} pe_opts;

static void arr(faid_mpw *w, const char *key, const float *v, uint64_t n)
{
    faid_mpw_str(w, key);
    faid_mpw_ndarray(w, "<f4", &n, 1, v, (size_t)n * sizeof(float));
}

/* The result's keys in the daemon's order; counted: map sizes by the writer. */
static size_t encode(faid_mpw *w, uint8_t *buf, size_t cap, const float *v, const pe_opts *o,
                     int counted, uint64_t i)
{
    faid_mpw_init(w, buf, cap);
    const int peaks = o->npeaks > 0;
#ifdef FAID_MPW_COUNTED
    if (counted)
        faid_mpw_map_begin(w);
    else
#endif
        faid_mpw_map(w, 22 + (peaks ? 13 : 0));
    faid_mpw_str(w, FAID_K_TYPE);
    faid_mpw_str(w, "result");
    faid_mpw_str(w, FAID_K_SERIES_ID);
    faid_mpw_uint(w, 7);
    faid_mpw_str(w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(w, "run-0042");
    faid_mpw_str(w, FAID_K_FRAME_ID);
    faid_mpw_uint(w, i);
    faid_mpw_str(w, FAID_K_SETUP_VERSION);
    faid_mpw_uint(w, 1);
    faid_mpw_str(w, FAID_K_DEVICE);
    faid_mpw_int(w, 0);
    const uint64_t n = (uint64_t)o->npt, np = (uint64_t)o->npeaks;
    arr(w, FAID_K_I, v, n);
    arr(w, FAID_K_SIGMA, v, n);
    arr(w, FAID_K_STD, v, n);
    arr(w, FAID_K_COUNT, v, n);
    if (peaks) {
        faid_mpw_str(w, FAID_K_NUM_PEAKS);
        faid_mpw_uint(w, np);
        faid_mpw_str(w, FAID_K_IS_HIT);
        faid_mpw_bool(w, 1);
        arr(w, FAID_K_PEAK_X, v, np);
        arr(w, FAID_K_PEAK_Y, v, np);
        arr(w, FAID_K_PEAK_INTENSITY, v, np);
        arr(w, FAID_K_PEAK_SIGMA, v, np);
        arr(w, FAID_K_PEAK_SNR, v, np);
        faid_mpw_str(w, FAID_K_PEAK_NPIX);
        faid_mpw_ndarray(w, "<i4", &np, 1, v, (size_t)np * 4);
        arr(w, FAID_K_PEAK_MAX_PIXEL, v, np);
        arr(w, FAID_K_BG_I, v, n);
        arr(w, FAID_K_BG_SIGMA, v, n);
        arr(w, FAID_K_BG_STD, v, n);
        arr(w, FAID_K_BG_COUNT, v, n);
    }
    faid_mpw_str(w, FAID_K_RECEIVED_NS);
    faid_mpw_uint(w, 1700000000000000000ull + i);
    faid_mpw_str(w, FAID_K_DONE_NS);
    faid_mpw_uint(w, 1700000000000100000ull + i);
    const char *us[] = {FAID_K_LATENCY_US,    FAID_K_QUEUE_US,     FAID_K_DECODE_US,
                        FAID_K_PREPROCESS_US, FAID_K_INTEGRATE_US, FAID_K_TRANSFER_US,
                        FAID_K_COMPUTE_US};
    for (int k = 0; k < 7; k++) {
        faid_mpw_str(w, us[k]);
        faid_mpw_f64(w, 12.5 + k);
    }
    faid_mpw_str(w, FAID_K_PAYLOAD_BYTES);
    faid_mpw_uint(w, 1234567);
    faid_mpw_str(w, FAID_K_TIMESTAMP);
    faid_mpw_f64(w, 1700000000.25);
    faid_mpw_str(w, FAID_K_MSG_NUMBER);
    faid_mpw_uint(w, i);
#ifdef FAID_MPW_COUNTED
    if (counted)
        faid_mpw_map_end(w);
#endif
    return faid_mpw_finish(w, NULL) ? 0 : w->len;
}

int faid_proto_encode_main(int argc, char **argv)
{
    pe_opts o = {.npt = 1000, .npeaks = 0, .iters = 200000};
    const bench_opt own[] = {{"proto-encode", BENCH_MODE, NULL, NULL, 0, 0, NULL},
                             {"npt", BENCH_INT, NULL, &o.npt, 0, 0, NULL},
                             {"peaks", BENCH_INT, NULL, &o.npeaks, 0, 0, NULL},
                             {"iters", BENCH_INT, NULL, &o.iters, 0, 0, NULL}};
    const char *prog = "faid-bench --proto-encode";
    const char *use = "usage: faid-bench --proto-encode [--npt N] [--peaks N] [--iters N]\n"
                      "The CPU cost of writing one result message (defaults: 1000 bins, no\n"
                      "peaks, 200000 iterations).\n";
    int prc = bench_parse(prog, argc, argv, &(bench_shared){0}, own, 4, use);
    if (prc)
        return prc > 0 ? 0 : 2;
    if (o.npt < 1 || o.npeaks < 0 || o.iters < 1) {
        fprintf(stderr, "%s: --npt and --iters must be at least 1, --peaks at least 0\n", prog);
        return 2;
    }
    size_t nv = (size_t)(o.npt > o.npeaks ? o.npt : o.npeaks);
    float *v = calloc(nv, sizeof(float));
    size_t cap = 64 * 1024 + 10 * nv * sizeof(float);
    uint8_t *buf = malloc(cap);
    if (!v || !buf)
        return 1;
    for (size_t k = 0; k < nv; k++)
        v[k] = (float)k * 0.5f;
    faid_mpw w;
    int modes = 1;
#ifdef FAID_MPW_COUNTED
    modes = 2;
#endif
    printf("{\"mode\": \"proto-encode\", \"npt\": %d, \"peaks\": %d, \"iters\": %d", o.npt,
           o.npeaks, o.iters);
    for (int counted = 0; counted < modes; counted++) {
        size_t len = 0;
        uint64_t sink = 0;
        for (int k = 0; k < 1000; k++) /* warm-up */
            sink += encode(&w, buf, cap, v, &o, counted, (uint64_t)k);
        int64_t t0 = cpu_ns();
        for (int k = 0; k < o.iters; k++) {
            len = encode(&w, buf, cap, v, &o, counted, (uint64_t)k);
            sink += buf[len / 2];
        }
        double ns = (double)(cpu_ns() - t0) / o.iters;
        printf(", \"%s_ns_per_result\": %.1f, \"%s_bytes\": %zu", counted ? "begin_end" : "fixed",
               ns, counted ? "begin_end" : "fixed", len);
        if (!len || sink == 1)
            printf(", \"error\": \"message did not fit\"");
    }
    /* the client's side: faid_proto_decode_output of the same message */
    size_t len = encode(&w, buf, cap, v, &o, 0, 7);
    faid_out_msg m;
    faid_diag d = {0};
    if (len && faid_proto_decode_output(buf, len, &m, &d) == 0 && m.I.nelem == (uint64_t)o.npt) {
        int64_t t0 = cpu_ns();
        uint64_t sink = 0;
        for (int k = 0; k < o.iters; k++) {
            faid_proto_decode_output(buf, len, &m, &d);
            sink += m.frame_id;
        }
        printf(", \"decode_ns_per_result\": %.1f", (double)(cpu_ns() - t0) / o.iters + 0 * sink);
    } else {
        printf(", \"decode_error\": \"%s\"", d.msg);
    }
    printf("}\n");
    free(v);
    free(buf);
    return 0;
}
