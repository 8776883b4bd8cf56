/* decode_bench.c: the device decoder alone (kernels/codec/bslz4.cl through faid_clcodec), a mode
 * of faid-bench:
 *
 *   faid-bench --decode [--frames N] [--depth Q] [--config FILE] [--dtype T] [--device SPEC]
 *                       [--json F]
 *
 * Why (issue 17): "compute alone" (frames already on the device, decode + integrate, 16 in
 * flight) was 83.5 us per EIGER 4M frame on one H100 while the decode of one frame alone took 66
 * us and a batch of 4 frames' integration 65 us: how much of the 83.5 is the decoder with frames
 * in flight was not measured by itself. This mode measures it, with nothing else on the device.
 *
 * Four distinct synthetic frames (faid_synth, the configuration's detector; default EIGER 4M
 * uint32) are compressed (bslz4) and uploaded once with their block tables. Then:
 *   alone     one decode at a time on one queue, waited for; the kernel's device time (profiling
 *             events), median of the frames
 *   in flight N decodes enqueued round-robin on Q in-order queues (Q destination buffers), the
 *             wall time from the first enqueue to the end of the last: us per frame, frames/s
 * Checks: every error flag 0, and the last decode of every queue equal byte for byte to the frame
 * it decoded (printed as "ident"; a difference is an error, exit status 1). The decoder's own
 * tuning variables (FAID_CLCODEC_WG, FAID_CLCODEC_DEFINES) apply as in the engine. */
#include "faid_cl.h"
#include "faid_clcodec.h"
#include "faid_codec.h"
#include "faid_config.h"
#include "faid_dtype.h"
#include "faid_geometry.h"
#include "faid_log.h"
#include "faid_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_opt.h"
#include "bench_setup.h"

int faid_decode_bench_main(int argc, char **argv);

#define NDISTINCT 4
#define MAXQ      32

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int faid_decode_bench_main(int argc, char **argv)
{
    int frames = 500, depth = 8;
    const char *config = NULL, *dtype = "uint32", *device = "gpu", *json = NULL;
    const bench_shared sh = {
        .frames = &frames, .config = &config, .dtype = &dtype, .device = &device, .json = &json};
    static const bench_opt own_t[] = {{"decode", BENCH_MODE, NULL, NULL, 0, 0, NULL}};
    bench_opt own[2] = {own_t[0], {"depth", BENCH_INT, NULL, &depth, 1, MAXQ, NULL}};
    const char *use =
        "usage: faid-bench --decode [--frames N] [--depth Q] [--config FILE] [--dtype T]\n"
        "                  [--device SPEC] [--json FILE]\n"
        "The device decoder alone: one frame at a time (device time) and N frames on Q\n"
        "queues (defaults: 500 frames, at least 8; 8 queues; uint32; device gpu).\n";
    int prc = bench_parse("faid-bench --decode", argc, argv, &sh, own, 2, use);
    if (prc)
        return prc > 0 ? 0 : 2;
    if (frames < 8)
        frames = 8;
    faid_diag d;
    faid_diag_clear(&d);
    faid_config cfg;
    faid_dtype dt;
    int src = bench_config_dtype("faid-bench --decode", config, dtype, &cfg, &dt);
    if (src)
        return src;
    const size_t npix = (size_t)cfg.rows * (size_t)cfg.cols, esz = faid_dtype_size(dt);
    const size_t raw_bytes = npix * esz, cap = faid_bslz4_bound(raw_bytes, esz, 0);
    uint8_t *raw[NDISTINCT] = {0}, *comp = malloc(cap), *back = malloc(raw_bytes);
    uint32_t *packed = NULL;
    size_t clen[NDISTINCT] = {0};
    faid_block_table tab[NDISTINCT] = {0};
    double *alone = malloc((size_t)frames * sizeof(double));
    faid_cl_ctx *ctx = NULL;
    faid_clcodec *codec = NULL;
    cl_mem chunk[NDISTINCT] = {0}, table[NDISTINCT] = {0}, dst[MAXQ] = {0}, err = NULL;
    cl_command_queue q[MAXQ] = {0};
    int last_frame[MAXQ];
    int rc = 1;
    if (!comp || !back || !alone)
        goto out;
    faid_synth *syn = faid_synth_for_config(&cfg, NULL, &d);
    if (!syn)
        goto fail;
    faid_cl_device_info info;
    if (faid_cl_select(device, &info, &d) || !(ctx = faid_cl_ctx_new(&info, 1, &d)) ||
        !(codec = faid_clcodec_new(ctx, esz, raw_bytes, &d))) {
        faid_synth_destroy(&syn);
        goto fail;
    }
    size_t maxtab = 0;
    for (int k = 0; k < NDISTINCT; k++) {
        if (!(raw[k] = malloc(raw_bytes)) ||
            faid_synth_frame(syn, (uint64_t)k, dt, raw[k], raw_bytes, &d) ||
            faid_bslz4_encode(raw[k], raw_bytes, esz, 0, comp, cap, &clen[k], &d) ||
            faid_block_table_alloc(&tab[k], faid_bslz4_max_blocks(raw_bytes, esz, 0), &d) ||
            faid_bslz4_table(comp, clen[k], esz, raw_bytes, &tab[k], &d) ||
            faid_clcodec_supports(codec, FAID_ENC_BSLZ4, &tab[k], &d)) {
            faid_synth_destroy(&syn);
            goto fail;
        }
        size_t tb = faid_clcodec_table_bytes(&tab[k]);
        if (tb > maxtab) {
            free(packed);
            if (!(packed = malloc(tb)))
                goto out;
            maxtab = tb;
        }
        faid_clcodec_pack_table(&tab[k], packed);
        if (!(chunk[k] = faid_cl_buffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                        (clen[k] + 3) / 4 * 4, comp, &d)) ||
            !(table[k] =
                  faid_cl_buffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, tb, packed, &d))) {
            faid_synth_destroy(&syn);
            goto fail;
        }
    }
    faid_synth_destroy(&syn);
    cl_int e = CL_SUCCESS;
    const int zero[MAXQ] = {0};
    if (!(err = faid_cl_buffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero,
                               (void *)zero, &d)))
        goto fail;
    for (int i = 0; i < depth; i++) {
        last_frame[i] = -1;
        q[i] = clCreateCommandQueue(ctx->context, ctx->info.device, CL_QUEUE_PROFILING_ENABLE, &e);
        if (e != CL_SUCCESS) {
            faid_cl_fail(&d, e, "clCreateCommandQueue", __FILE__, __LINE__);
            goto fail;
        }
        if (!(dst[i] = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, raw_bytes, NULL, &d)))
            goto fail;
    }
    printf("decode: %s, %dx%d %s bslz4 %.2f MB (ratio %.1f), %u blocks, work-group %zu, "
           "FAID_CLCODEC_DEFINES '%s'\n",
           ctx->info.name, cfg.rows, cfg.cols, faid_dtype_name(dt), (double)clen[0] / 1e6,
           (double)raw_bytes / (double)clen[0], (unsigned)tab[0].nblocks, faid_clcodec_wg(codec),
           getenv("FAID_CLCODEC_DEFINES") ? getenv("FAID_CLCODEC_DEFINES") : "");
#define IO(k, i)                                                                                   \
    ((faid_clcodec_io){.chunk = chunk[(k)],                                                        \
                       .table = table[(k)],                                                        \
                       .dst = dst[(i)],                                                            \
                       .err = err,                                                                 \
                       .err_index = (size_t)(i)})
    /* one at a time: the kernel's device time */
    for (int f = 0; f < frames; f++) {
        const int k = f % NDISTINCT;
        cl_event ev = NULL;
        const faid_clcodec_io io = IO(k, 0);
        if (faid_clcodec_enqueue_io(codec, q[0], FAID_ENC_BSLZ4, &io, &tab[k], 0, NULL, &ev, &d))
            goto fail;
        cl_ulong t0 = 0, t1 = 0;
        e = clWaitForEvents(1, &ev);
        if (e == CL_SUCCESS)
            e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        if (e == CL_SUCCESS)
            e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        clReleaseEvent(ev);
        if (e != CL_SUCCESS) {
            faid_cl_fail(&d, e, "clWaitForEvents", __FILE__, __LINE__);
            goto fail;
        }
        alone[f] = (double)(t1 - t0) / 1e3;
        last_frame[0] = k;
    }
    qsort(alone, (size_t)frames, sizeof *alone, cmp_d);
    const double alone_us = alone[frames / 2];
    /* in flight: round-robin over the queues, a warm-up round first */
    double wall_us = 0.0;
    for (int round = 0; round < 2; round++) {
        const int n = round ? frames : depth;
        const int64_t t0 = faid_now_ns();
        for (int f = 0; f < n; f++) {
            const int k = f % NDISTINCT, i = f % depth;
            const faid_clcodec_io io = IO(k, i);
            if (faid_clcodec_enqueue_io(codec, q[i], FAID_ENC_BSLZ4, &io, &tab[k], 0, NULL, NULL,
                                        &d))
                goto fail;
            last_frame[i] = k;
            if ((e = clFlush(q[i])) != CL_SUCCESS) {
                faid_cl_fail(&d, e, "clFlush", __FILE__, __LINE__);
                goto fail;
            }
        }
        for (int i = 0; i < depth; i++)
            if ((e = clFinish(q[i])) != CL_SUCCESS) {
                faid_cl_fail(&d, e, "clFinish", __FILE__, __LINE__);
                goto fail;
            }
        wall_us = (double)(faid_now_ns() - t0) / 1e3;
    }
    /* checks: no error flag, the last frame of every queue as encoded */
    int flags[MAXQ] = {0}, ident = 1;
    if ((e = clEnqueueReadBuffer(q[0], err, CL_TRUE, 0, sizeof flags, flags, 0, NULL, NULL)) !=
        CL_SUCCESS) {
        faid_cl_fail(&d, e, "clEnqueueReadBuffer", __FILE__, __LINE__);
        goto fail;
    }
    for (int i = 0; i < depth; i++) {
        if (flags[i]) {
            fprintf(stderr, "faid-bench --decode: queue %d: the decoder flagged block %d\n", i,
                    flags[i] - 1);
            ident = 0;
            continue;
        }
        if ((e = clEnqueueReadBuffer(q[i], dst[i], CL_TRUE, 0, raw_bytes, back, 0, NULL, NULL)) !=
            CL_SUCCESS) {
            faid_cl_fail(&d, e, "clEnqueueReadBuffer", __FILE__, __LINE__);
            goto fail;
        }
        if (last_frame[i] >= 0 && memcmp(back, raw[last_frame[i]], raw_bytes) != 0) {
            fprintf(stderr, "faid-bench --decode: queue %d: frame %d decoded differently\n", i,
                    last_frame[i]);
            ident = 0;
        }
    }
    const double per = wall_us / frames;
    printf("one frame alone      %10.1f us (device time, median of %d)\n", alone_us, frames);
    printf("in flight, %2d queues %10.1f us per frame, %.0f frames/s (%d frames)\n", depth, per,
           1e6 / per, frames);
    printf("ident                %10s\n", ident ? "yes" : "NO");
    if (json) {
        FILE *f = fopen(json, "w");
        if (f) {
            fprintf(f,
                    "{\"device\": \"%s\", \"frame_mb\": %.4f, \"wg\": %zu, \"alone_us\": %.2f, "
                    "\"queues\": %d, \"inflight_us\": %.2f, \"fps\": %.1f, \"ident\": %d}\n",
                    ctx->info.name, (double)clen[0] / 1e6, faid_clcodec_wg(codec), alone_us, depth,
                    per, 1e6 / per, ident);
            fclose(f);
        }
    }
    rc = ident ? 0 : 1;
    goto out;
fail:
    fprintf(stderr, "faid-bench --decode: %s\n", d.msg);
    rc = 1;
out:
    for (int i = 0; i < MAXQ; i++) {
        if (q[i])
            clReleaseCommandQueue(q[i]);
        if (dst[i])
            clReleaseMemObject(dst[i]);
    }
    for (int k = 0; k < NDISTINCT; k++) {
        if (chunk[k])
            clReleaseMemObject(chunk[k]);
        if (table[k])
            clReleaseMemObject(table[k]);
        faid_block_table_free(&tab[k]);
        free(raw[k]);
    }
    if (err)
        clReleaseMemObject(err);
    faid_clcodec_destroy(&codec);
    faid_cl_ctx_destroy(&ctx);
    free(packed);
    free(alone);
    free(back);
    free(comp);
    return rc;
}
