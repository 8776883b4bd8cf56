/* host_path.c: the daemon's host work per frame before and after the pinned input arena, on the
 * CPU alone (no kernels), a mode of faid-bench:
 *
 *   faid-bench --host-path [--frames N] [--config FILE] [--dtype T] [--device SPEC] [--json F]
 *
 * Frames as `faidctl replay` sends them (synthetic, bslz4, the configuration's detector; default
 * EIGER 4M uint32). Each frame is first "received": copied into the next of a ring of receive
 * buffers (untimed; the ring is larger than the last-level cache, as ZeroMQ's fresh messages
 * are), then the two paths are timed on it:
 *
 *   before  ingest: the block table parsed from the received buffer;
 *           worker: the payload copied into the engine's pinned staging (what limited the daemon);
 *   after   ingest: the payload copied into a block of the pinned input arena (faid_pinned,
 *           page-locked through SPEC's OpenCL context; plain memory for ref), then the table
 *           parsed from that copy; worker: nothing (the H2D reads the arena in place).
 *
 * Prints the median and p99 of each part per frame and the host-side bound of one connection
 * (1e6 / the busiest thread's median), and, with --json, the figures. */
#include "faid_codec.h"
#include "faid_config.h"
#include "faid_dtype.h"
#include "faid_geometry.h"
#include "faid_log.h"
#include "faid_pinned.h"
#include "faid_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_opt.h"
#include "bench_setup.h"

int faid_host_path_main(int argc, char **argv);

#define NDISTINCT 4
#define NRECV     48 /* receive buffers: 48 x 2.7 MB, beyond a last-level cache */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double q(double *v, int n, double f)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(f * n);
    return v[i < n ? i : n - 1];
}

int faid_host_path_main(int argc, char **argv)
{
    int frames = 400;
    const char *config = NULL, *dtype = "uint32", *device = "ref", *json = NULL;
    const bench_shared sh = {
        .frames = &frames, .config = &config, .dtype = &dtype, .device = &device, .json = &json};
    static const bench_opt own[] = {{"host-path", BENCH_MODE, NULL, NULL, 0, 0, NULL}};
    const char *use = "usage: faid-bench --host-path [--frames N] [--config FILE] [--dtype T]\n"
                      "                  [--device SPEC] [--json FILE]\n"
                      "The daemon's host work per frame with and without the pinned input\n"
                      "arena (defaults: 400 frames, at least 10; uint32; device ref).\n";
    int prc = bench_parse("faid-bench --host-path", argc, argv, &sh, own, 1, use);
    if (prc)
        return prc > 0 ? 0 : 2;
    if (frames < 10)
        frames = 10;
    faid_diag d;
    faid_diag_clear(&d);
    faid_config cfg;
    faid_dtype dt;
    int src = bench_config_dtype("faid-bench --host-path", config, dtype, &cfg, &dt);
    if (src)
        return src;
    size_t npix = (size_t)cfg.rows * (size_t)cfg.cols, esz = faid_dtype_size(dt);
    size_t raw_bytes = npix * esz, cap = faid_bslz4_bound(raw_bytes, esz, 0);
    uint8_t *raw = malloc(raw_bytes), *comp[NDISTINCT] = {0}, *recv[NRECV] = {0}, *staging = NULL;
    size_t clen[NDISTINCT] = {0};
    double *t[5] = {0};
    faid_block_table tab = {0};
    faid_pinned *arena = NULL;
    int rc = 1;
    if (!raw)
        goto out;
    faid_synth *syn = faid_synth_for_config(&cfg, NULL, &d);
    if (!syn)
        goto out;
    size_t maxc = 0;
    for (int k = 0; k < NDISTINCT; k++) {
        comp[k] = malloc(cap);
        if (!comp[k] || faid_synth_frame(syn, (uint64_t)k, dt, raw, raw_bytes, &d) ||
            faid_bslz4_encode(raw, raw_bytes, esz, 0, comp[k], cap, &clen[k], &d)) {
            faid_synth_destroy(&syn);
            goto out;
        }
        maxc = clen[k] > maxc ? clen[k] : maxc;
    }
    faid_synth_destroy(&syn);
    for (int k = 0; k < NRECV; k++)
        if (!(recv[k] = malloc(maxc)))
            goto out;
    /* the engine's staging (before) and the arena (after), page-locked through SPEC */
    faid_pinned *stage_mem = faid_pinned_new(device, maxc + 4096, &d);
    arena = faid_pinned_new(device, 64 * maxc, &d);
    if (!stage_mem || !arena) {
        faid_pinned_destroy(&stage_mem);
        goto out;
    }
    staging = faid_pinned_alloc(stage_mem, maxc);
    if (faid_block_table_alloc(&tab, faid_bslz4_max_blocks(raw_bytes, esz, 0), &d))
        goto out_stage;
    for (int k = 0; k < 5; k++)
        t[k] = malloc((size_t)frames * sizeof(double));
    if (!staging || !t[0] || !t[1] || !t[2] || !t[3] || !t[4])
        goto out_stage;
    printf("host-path: %dx%d %s, %d distinct bslz4 frames, %.2f MB each, arena %s, %d frames\n",
           cfg.rows, cfg.cols, faid_dtype_name(dt), NDISTINCT, (double)clen[0] / 1e6,
           faid_pinned_locked(arena) ? "page-locked" : "plain memory", frames);
    void *held[8] = {0};
    for (int i = 0; i < frames; i++) {
        int k = i % NDISTINCT;
        uint8_t *rb = recv[i % NRECV];
        memcpy(rb, comp[k], clen[k]); /* the receive, untimed */
        int64_t t0 = faid_now_ns();
        int e1 = faid_bslz4_table(rb, clen[k], esz, raw_bytes, &tab, &d);
        int64_t t1 = faid_now_ns();
        memcpy(staging, rb, clen[k]);
        int64_t t2 = faid_now_ns();
        /* after: a fresh receive of the same bytes (the parse above warmed rb) */
        uint8_t *rb2 = recv[(i + NRECV / 2) % NRECV];
        memcpy(rb2, comp[k], clen[k]);
        /* the arena keeps a few frames in flight, given back oldest first */
        int slot = i % 8;
        faid_pinned_free(arena, held[slot]);
        int64_t t3 = faid_now_ns();
        uint8_t *blk = faid_pinned_alloc(arena, clen[k]);
        if (blk)
            memcpy(blk, rb2, clen[k]);
        int64_t t4 = faid_now_ns();
        int e2 = blk ? faid_bslz4_table(blk, clen[k], esz, raw_bytes, &tab, &d) : -1;
        int64_t t5 = faid_now_ns();
        held[slot] = blk;
        if (e1 || e2) {
            fprintf(stderr, "faid-bench --host-path: frame %d: %s\n", i,
                    blk ? d.msg : "arena full");
            goto out_stage;
        }
        t[0][i] = (double)(t1 - t0) / 1e3; /* before: ingest table */
        t[1][i] = (double)(t2 - t1) / 1e3; /* before: worker copy */
        t[2][i] = (double)(t4 - t3) / 1e3; /* after: ingest copy into the arena */
        t[3][i] = (double)(t5 - t4) / 1e3; /* after: ingest table from the copy */
        t[4][i] = (double)(t5 - t3) / 1e3; /* after: ingest total */
    }
    for (int s = 0; s < 8; s++)
        faid_pinned_free(arena, held[s]);
    double m[5], p99[5];
    for (int k = 0; k < 5; k++) {
        p99[k] = q(t[k], frames, 0.99);
        m[k] = q(t[k], frames, 0.5);
    }
    double before = m[0] > m[1] ? m[0] : m[1], after = m[4];
    printf("%-44s %10s %10s\n", "us per frame", "median", "p99");
    printf("%-44s %10.1f %10.1f\n", "before: ingest, table from the received bytes", m[0], p99[0]);
    printf("%-44s %10.1f %10.1f\n", "before: worker, copy into pinned staging", m[1], p99[1]);
    printf("%-44s %10.1f %10.1f\n", "after: ingest, copy into the pinned arena", m[2], p99[2]);
    printf("%-44s %10.1f %10.1f\n", "after: ingest, table from the copy", m[3], p99[3]);
    printf("%-44s %10.1f %10.1f\n", "after: ingest total (worker: no copy)", m[4], p99[4]);
    printf("host-side bound of one connection: before %.0f frames/s (busiest thread %.1f us), "
           "after %.0f frames/s (%.1f us)\n",
           1e6 / before, before, 1e6 / after, after);
    if (json) {
        FILE *f = fopen(json, "w");
        if (f) {
            fprintf(f,
                    "{\"frame_mb\": %.4f, \"locked\": %d, \"before_table_us\": %.2f, "
                    "\"before_copy_us\": %.2f, \"after_copy_us\": %.2f, \"after_table_us\": "
                    "%.2f, \"after_ingest_us\": %.2f, \"before_fps\": %.1f, \"after_fps\": "
                    "%.1f}\n",
                    (double)clen[0] / 1e6, faid_pinned_locked(arena), m[0], m[1], m[2], m[3], m[4],
                    1e6 / before, 1e6 / after);
            fclose(f);
        }
    }
    rc = 0;
out_stage:
    faid_pinned_destroy(&stage_mem);
out:
    if (rc && d.msg[0])
        fprintf(stderr, "faid-bench --host-path: %s\n", d.msg);
    faid_pinned_destroy(&arena);
    for (int k = 0; k < 5; k++)
        free(t[k]);
    faid_block_table_free(&tab);
    for (int k = 0; k < NRECV; k++)
        free(recv[k]);
    for (int k = 0; k < NDISTINCT; k++)
        free(comp[k]);
    free(raw);
    return rc;
}
