/* faid-bench: per-stage timings of the frame engine on one device (never a test).
 *
 * Builds the reduction setup from the embedded default configuration (EIGER 4M, 2167 x 2070,
 * 1000 bins in q_nm^-1, full pixel splitting, Poisson errors) with the command-line overrides,
 * times that build (geometry + CSR), generates realistic frames with faid_synth (Debye-Scherrer
 * rings, Bragg spots, Poisson noise, module gaps at the bad-pixel value; fixed seed) and
 * compresses them with bitshuffle-LZ4. Then for each variant it reduces --frames frames from
 * compressed bytes in host memory to profiles in host memory and reports the median per-stage
 * device times (OpenCL profiling events), the host staging time and the frames per second (wall
 * clock over the whole run):
 *   fused           faid_engine_process, one frame at a time, preprocessing inside integration
 *   separate        the same with a separate preprocess kernel
 *   pipelined       faid_engine_submit_table / collect with up to --depth x --batch frames in
 *                   flight, fused kernels, frames lying in engine pinned host memory (as a
 *                   receive pool would put them): the H2D reads them in place, no host copy;
 *                   --parsers threads parse the block tables ahead (the daemon's ingest threads)
 *   pipelined-copy  the same with frames in ordinary (pageable) memory, copied into the slot's
 *                   pinned staging by submit
 *   compute         "compute alone": pipelined with the frames already on the device
 *                   (faid_engine_set_resident): decode + integrate per frame, no H2D
 * With pipelined or compute, the PCIe floor of the frame size is measured in the same process
 * (pinned H2D of the mean compressed frame) and the GPU stage given as a percentage of it; the
 * engine's device memory is printed. --kind lowcount generates low-count frames (mostly 0 and 1,
 * about 17x compression) instead of the default synthetic ones; --detector PRESET sets the
 * detector preset (eiger_1m ... eiger_16m).
 * Every pipelined result is compared bit for bit with the synchronous fused result of the same
 * frame ("identical"; a 2D cake on a sample of the results, CHECK_2D_EVERY). One frame is also
 * checked against the "ref" engine (float64 C) and the worst relative difference printed.
 *
 * Usage: faid-bench [--device auto|cpu|gpu|N|ref] [--frames N] [--split no|bbox|full]
 *                   [--npt N] [--azim N] [--unit U] [--error-model M] [--dtype uint32]
 *                   [--config FILE] [--variants fused,separate,pipelined,pipelined-copy]
 *                   [--depth K] [--batch B] [--parsers P] [--no-check] [--json FILE]
 *                   [--dump DIR]
 * --depth K slots of --batch B frames each (pipelined variants; defaults 4 and 4): up to K x B
 * frames in flight, the B frames of a slot integrated in one pass over the CSR matrix.
 * --parsers P (pipelined variants): P threads parse the block tables ahead of the submitting
 * thread, as the daemon's ingest threads do (default min(4, CPUs - 1); 0: submit parses).
 * --dump DIR writes frame.npy, mask.npy (non-zero = masked), chunk.bslz4 and geometry.poni for
 * tests/bench/pyfai_reference.py and pyfai_peaks_reference.py.
 * --peaks pyfai|peakfinder8 adds the background (5 sigma-clipping cycles) and that peak finder
 * (parameters of tests/reference/peakrefs.py); every distinct frame's peak list is compared with
 * the reference device's (equal bit for bit expected).
 * --devices I,J,...|gpu:N runs the pipelined GPU stage on several devices at once (one engine
 * and one thread per device, frames round-robin), aggregate frames/s, and checks that every
 * device gives the same bits for the same frame; per device it prints where its submitting
 * thread spent the run, how busy the device was and the PCIe floor alone and with every device
 * copying at once (multi_main). --pinned shared: every device reads its frames from device 0's
 * pinned memory (the daemon's one input arena) instead of its own. */
#include "faid_cl.h"
#include "faid_codec.h"
#include "faid_config.h"
#include "faid_engine.h"
#include "faid_log.h"
#include "faid_npy.h"
#include "faid_progcache.h"
#include "faid_setup.h"
#include "faid_synth.h"

#include "bench_opt.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define NDISTINCT 4  /* distinct frames cycled through (spots move between them) */
#define RING      64 /* block tables parsed ahead by the parser threads */
/* The pipelined loop compares the 2D cake bit for bit with the synchronous result on the first
 * NDISTINCT x 4 collected frames and then on every CHECK_2D_EVERY-th one (the 1D profile, the
 * background and the peaks on every frame). Why: the comparison of a 360 x 1000 cake reads the
 * eight 360,000-bin arrays of two results (23 MB) on the one thread that also submits and
 * collects; done on every frame, that memcmp is what made the H200's pipelined cake (400
 * frames/s, 2026-11-21) slower than one frame at a time (483 frames/s, no comparison in that
 * loop); on the 2-core build host one such comparison took 1.8-2.3 ms (PoCL runs are bound by
 * the kernels and do not show it). A sample keeps the check honest without timing the
 * benchmark's own memcmp: the first 16 frames cover every lane of the default 4 x 4 ring's first
 * round, and a prime stride walks the samples through every slot and lane of the power-of-two
 * depth x batch ring. */
#define CHECK_2D_EVERY 17

typedef struct opts {
    const char *device;
    int frames;
    const char *split;
    int npt;
    int azim;
    const char *unit;
    const char *em;
    const char *dtype;
    const char *config;
    const char *variants;
    int depth;
    int batch;
    int parsers;
    int check;
    const char *json;
    const char *dump;
    const char *peaks;    /* none | pyfai | peakfinder8 */
    const char *devices;  /* NULL: one engine on --device; else the multi-device run */
    const char *kind;     /* frames: synthetic | lowcount */
    const char *detector; /* detector.preset override (eiger_1m ... eiger_16m), NULL: config */
    int cake_arrays;      /* --cake-arrays: leading cake arrays read back (0: all four) */
    const char *pinned;   /* --devices: own (frames pinned per device) | shared (device 0's) */
    int copy_threads;     /* --copy-threads: staging copies over N threads (0: the config's) */
    const char *sets;     /* --set KEY=VALUE[,KEY=VALUE...]: options applied last */
} opts;

static const char usage[] =
    "usage: faid-bench [--device auto|cpu|gpu|N|ref] [--frames N] [--split no|bbox|full]\n"
    "                  [--npt N] [--azim N] [--unit U] [--error-model M] [--dtype T]\n"
    "                  [--config FILE] [--variants fused,separate,pipelined,pipelined-copy]\n"
    "                  [--depth K] [--batch B] [--parsers P] [--no-check] [--json FILE]\n"
    "                  [--dump DIR] [--peaks none|pyfai|peakfinder8]\n"
    "                  [--devices I,J,...|gpu:N]  (GPU stage on several devices at once)\n"
    "                  [--pinned own|shared]  (--devices: frames pinned per device, or in\n"
    "                  device 0's memory for all, as the daemon's input arena)\n"
    "                  [--kind synthetic|lowcount] [--detector PRESET]\n"
    "                  [--cake-arrays 1..4]  (the cake's I, sigma, std, count read back;\n"
    "                  1 = the daemon's lean cake, output.cake lean)\n"
    "                  [--copy-threads 1..16]  (copies into pinned staging shared by N\n"
    "                  threads, as the daemon's pipeline.copy_threads)\n"
    "                  [--set KEY=VALUE[,KEY=VALUE...]]  (options applied after all the\n"
    "                  others, e.g. --set peaks.cycles=0,peaks.error_model=poisson)\n"
    "                  (variants also: compute = decode + integrate of frames already on\n"
    "                  the device)\n"
    "       faid-bench --zmq-ceiling [--frames N] [--preset NAME | --config FILE] ...\n"
    "                  (ZeroMQ transport ceiling; --zmq-ceiling --help)\n"
    "       faid-bench --zmq-sink | --fan-sink --endpoint EP ...\n"
    "                  (fan-bench.py's C receivers; --zmq-sink --help)\n"
    "       faid-bench --proto-encode [--npt N] [--peaks N] [--iters N]\n"
    "                  (CPU cost of writing one result message)\n"
    "       faid-bench --writer [--frames N] [--npt N] [--block N] [--hit-frames N]\n"
    "                  [--hit-bytes B] [--hit-peaks N] [--max-peaks N] [--rounds N]\n"
    "                  [--only hits] [--dir DIR]...\n"
    "                  (files of record: profiles/s; hits file vs plain sequential write)\n"
    "       faid-bench --host-path [--frames N] [--config FILE] [--dtype T]\n"
    "                  [--device SPEC] [--json FILE]\n"
    "                  (the daemon's host work per frame with and without the pinned\n"
    "                  input arena)\n"
    "       faid-bench --decode [--frames N] [--depth Q] [--config FILE] [--dtype T]\n"
    "                  [--device SPEC] [--json FILE]\n"
    "                  (the device decoder alone: one frame, and frames on Q queues)\n"
    "A value goes as --frames 2 or --frames=2; -h, --help prints this text (a mode's\n"
    "own: faid-bench --zmq-ceiling --help, ...).\n";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* S_F1..S_F6: the finder's launches in order (faid_stage_times.find_us; pyfai: flag, scan,
 * write; peakfinder8: prep, radial, candidates, fill, scan, write), printed with --peaks only */
enum {
    S_STAGE,
    S_TABLE,
    S_H2D,
    S_DEC,
    S_PRE,
    S_INT,
    S_PKPRE,
    S_CLIP,
    S_FIND,
    S_F1,
    S_F2,
    S_F3,
    S_F4,
    S_F5,
    S_F6,
    S_D2H,
    S_TOTAL,
    S_N
};
static const char *stage_names[S_N] = {
    "host staging", " table parse", "H2D",          "decode",     "preprocess",  "integrate",
    "peak prep",    "sigma clip",   "peak finding", " finder #1", " finder #2",  " finder #3",
    " finder #4",   " finder #5",   " finder #6",   "D2H",        "total (wall)"};
static const char *stage_keys[S_N] = {
    "stage_us", "table_us", "h2d_us",   "decode_us", "preprocess_us", "integrate_us",
    "pkpre_us", "clip_us",  "find_us",  "find1_us",  "find2_us",      "find3_us",
    "find4_us", "find5_us", "find6_us", "d2h_us",    "total_us"};

typedef struct variant_result {
    char name[32];
    double med[S_N];
    double fps;
    double max_rel_err;
    int checked;
    int device_decode;
    int depth;     /* frames in flight at most (1: synchronous) */
    int batch;     /* frames per integration launch */
    int zero_copy; /* the H2D read the frames in place */
    int identical; /* pipelined: -1 not compared, 1 every result equal to the synchronous one */
    int parsers;   /* threads parsing block tables ahead (pipelined) */
    size_t wg1;
    int rows1, rows2; /* one bin per work-item (faid_engine_rows_mode); -1 no 2D */
    double resident;  /* compute: fraction of frames decoded from the device copy (no H2D) */
    long checked_2d;  /* pipelined with a cake: results whose cake was compared */
} variant_result;

#define NVARIANTS 5
static const char *vnames[NVARIANTS] = {"fused", "separate", "pipelined", "pipelined-copy",
                                        "compute"};

/* Whether name is one of the comma-separated items of list. */
/* FNV-1a over the bytes of a profile's eight arrays: the synchronous results' bits in one figure,
 * so that runs of different integration variants (FAID_ENGINE_INTEGRATE) can be compared bit for
 * bit on the GPU (gpu-run.sh's issue-17 table, column "=base"). */
static uint64_t profile_hash(uint64_t h, const faid_profile *p)
{
    const float *a[8] = {p->I,          p->sigma,    p->std,          p->count,
                         p->sum_signal, p->sum_norm, p->sum_variance, p->sum_norm_sq};
    for (int k = 0; k < 8; k++) {
        const unsigned char *b = (const unsigned char *)a[k];
        for (size_t i = 0; i < (size_t)p->nbins * sizeof(float); i++) {
            h ^= b[i];
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

/* h with the bits of a background (mean, std, sem, count) and a peak list's fields hashed in:
 * the peak path's variants that only move loads must give the same bits as the defaults on the
 * device itself (gpu-run.sh's peak sets, issue 17 round 3) */
static uint64_t bytes_hash(uint64_t h, const void *a, size_t n)
{
    const unsigned char *b = a;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t peaks_hash(uint64_t h, const faid_result *r)
{
    const size_t nb = (size_t)r->bg->nbins * sizeof(float);
    const float *bg[4] = {r->bg->mean, r->bg->std, r->bg->sem, r->bg->count};
    for (int k = 0; k < 4; k++)
        h = bytes_hash(h, bg[k], nb);
    const faid_peak_list *l = r->peaks;
    const size_t n = (size_t)l->n * 4;
    const void *f[8] = {l->x,   l->y,         l->intensity, l->sigma,
                        l->snr, l->max_pixel, l->npix,      l->index};
    h = bytes_hash(h, &l->n, sizeof l->n);
    h = bytes_hash(h, &l->n_found, sizeof l->n_found);
    for (int k = 0; k < 8; k++)
        h = bytes_hash(h, f[k], n);
    return h;
}

static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p = q ? q + 1 : p + len;
    }
    return 0;
}

static int profile_same(const faid_profile *a, const faid_profile *b)
{
    size_t n = (size_t)a->nbins * sizeof(float);
    return a->nbins == b->nbins && !memcmp(a->I, b->I, n) && !memcmp(a->sigma, b->sigma, n) &&
           !memcmp(a->std, b->std, n) && !memcmp(a->count, b->count, n) &&
           !memcmp(a->sum_signal, b->sum_signal, n) && !memcmp(a->sum_norm, b->sum_norm, n) &&
           !memcmp(a->sum_variance, b->sum_variance, n) &&
           !memcmp(a->sum_norm_sq, b->sum_norm_sq, n);
}

/* Peak lists equal bit for bit (count, every field of every stored peak). */
static int peaks_same(const faid_peak_list *a, const faid_peak_list *b)
{
    if (!a || !b)
        return a == b;
    if (a->n != b->n || a->n_found != b->n_found)
        return 0;
    size_t f = (size_t)a->n * sizeof(float), i = (size_t)a->n * sizeof(int32_t);
    return !memcmp(a->x, b->x, f) && !memcmp(a->y, b->y, f) &&
           !memcmp(a->intensity, b->intensity, f) && !memcmp(a->sigma, b->sigma, f) &&
           !memcmp(a->snr, b->snr, f) && !memcmp(a->max_pixel, b->max_pixel, f) &&
           !memcmp(a->npix, b->npix, i) && !memcmp(a->index, b->index, i);
}

static int bg_same(const faid_background *a, const faid_background *b)
{
    if (!a || !b)
        return a == b;
    size_t n = (size_t)a->nbins * sizeof(float);
    return a->nbins == b->nbins && !memcmp(a->mean, b->mean, n) && !memcmp(a->std, b->std, n) &&
           !memcmp(a->sem, b->sem, n) && !memcmp(a->count, b->count, n);
}

/* with_2d 0 leaves the cake out of the comparison (see CHECK_2D_EVERY) */
static int result_same(const faid_result *a, const faid_result *b, int with_2d)
{
    return profile_same(a->p1d, b->p1d) && (!a->p2d || !with_2d || profile_same(a->p2d, b->p2d)) &&
           bg_same(a->bg, b->bg) && peaks_same(a->peaks, b->peaks) &&
           a->num_peaks == b->num_peaks && a->is_hit == b->is_hit;
}

/* Parser threads: frame i's table goes into ring[i % RING] once that slot is free for it. */
typedef struct parse_slot {
    faid_block_table tab;
    _Atomic long seq; /* 2 i: free for frame i; 2 i + 1: holds frame i's table */
} parse_slot;

typedef struct parse_job {
    parse_slot *ring;
    const uint8_t *const *src;
    const size_t *clen;
    size_t esz, raw_bytes;
    long nframes;
    long first, step; /* local frame i is global frame first + i * step */
    int nthreads, id;
    _Atomic int *failed;
    double *parse_us; /* per frame */
    char msg[1100];
} parse_job;

static void *parser_main(void *arg)
{
    parse_job *j = arg;
    for (long i = j->id; i < j->nframes; i += j->nthreads) {
        parse_slot *ps = &j->ring[i % RING];
        while (atomic_load_explicit(&ps->seq, memory_order_acquire) != 2 * i) {
            if (atomic_load(j->failed))
                return NULL;
            sched_yield();
        }
        int k = (int)((j->first + i * j->step) % NDISTINCT);
        faid_diag d = {0};
        int64_t t0 = faid_now_ns();
        if (faid_bslz4_table(j->src[k], j->clen[k], j->esz, j->raw_bytes, &ps->tab, &d)) {
            snprintf(j->msg, sizeof j->msg, "frame %ld: %s", i, d.msg);
            atomic_store(j->failed, 1);
            return NULL;
        }
        j->parse_us[i] = (double)(faid_now_ns() - t0) * 1e-3;
        atomic_store_explicit(&ps->seq, 2 * i + 1, memory_order_release);
    }
    return NULL;
}

static void record(double *row, const faid_stage_times *t)
{
    row[S_STAGE] = t->stage_us;
    row[S_TABLE] = t->table_us;
    row[S_H2D] = t->h2d_us;
    row[S_DEC] = t->decode_us;
    row[S_PRE] = t->preprocess_us;
    row[S_INT] = t->integrate_us;
    row[S_PKPRE] = t->pkpre_us;
    row[S_CLIP] = t->clip_us;
    row[S_FIND] = t->peaks_us - t->clip_us - t->pkpre_us;
    for (int k = 0; k < 6; k++)
        row[S_F1 + k] = t->find_us[k];
    row[S_D2H] = t->d2h_us;
    row[S_TOTAL] = t->total_us;
}

/* One pipelined run: nframes frames (local frame i = global frame first + i * step, the bytes of
 * distinct frame global % NDISTINCT) through engine e with up to its depth slots in flight, the
 * block tables parsed ahead by `parsers` threads; every result compared bit for bit with
 * sync[global % NDISTINCT]. Used by the pipelined variants (one engine) and by each device
 * thread of the multi-device run. */
typedef struct pipe_run {
    faid_engine *e;
    const uint8_t *const *src; /* NDISTINCT */
    const size_t *clen;
    faid_dtype dt;
    int rows, cols;
    size_t esz, raw_bytes;
    long nframes, first, step;
    int parsers, depth;
    parse_slot *ring; /* RING */
    double *parse_us; /* nframes */
    double *samples;  /* nframes x S_N */
    faid_result *res;
    faid_result *const *sync; /* NDISTINCT */
    int identical, device_decode, zero_copy;
    double wall_s;
    char err[1300];
    long checked_2d; /* results whose 2D cake was compared (CHECK_2D_EVERY) */
    /* Where the submitting thread's wall time went (seconds over the run): inside
     * faid_engine_submit_table, waiting for a parser's table, waiting for the device (a collect
     * that found the oldest frame unfinished, then blocked), collecting a finished frame, and
     * the benchmark's own bit comparison; and the device's event times summed over the frames
     * (kernels: decode, preprocess, integrate, peaks; copies: H2D, D2H), for --devices' table
     * of where each device's run went (issue 17: a slow device starved by its host thread or
     * slowed on the device). */
    double host_submit_s, host_parse_wait_s, host_wait_s, host_collect_s, host_check_s;
    double dev_kernels_us, dev_copies_us;
} pipe_run;

static int pipe_run_do(pipe_run *p)
{
    faid_engine *e = p->e;
    faid_diag d = {0};
    long submitted = 0, collected = 0;
    p->identical = 1;
    _Atomic int failed = 0;
    pthread_t th[64];
    parse_job jobs[64];
    int started = 0, rc = 0;
    for (int t = 0; t < RING; t++)
        atomic_store(&p->ring[t].seq, 2L * t);
    int64_t w0 = faid_now_ns(); /* the parsers are part of the run */
    for (int t = 0; t < p->parsers; t++) {
        jobs[t] =
            (parse_job){p->ring, p->src,     p->clen, p->esz,  p->raw_bytes, p->nframes, p->first,
                        p->step, p->parsers, t,       &failed, p->parse_us,  ""};
        if (pthread_create(&th[t], NULL, parser_main, &jobs[t])) {
            snprintf(p->err, sizeof p->err, "cannot start parser threads");
            atomic_store(&failed, 1);
            rc = -1;
            break;
        }
        started++;
    }
    int busy = 0; /* submit said FAID_EBUSY: every slot holds frames, collect first */
    while (!rc && collected < p->nframes) {
        if (submitted < p->nframes && faid_engine_in_flight(e) < p->depth && !busy) {
            long g = p->first + submitted * p->step;
            int k = (int)(g % NDISTINCT);
            faid_frame f = {p->src[k], p->clen[k], FAID_ENC_BSLZ4, p->dt, p->rows, p->cols};
            parse_slot *ps = &p->ring[submitted % RING];
            int64_t h0 = faid_now_ns();
            if (p->parsers) {
                while (atomic_load_explicit(&ps->seq, memory_order_acquire) != 2L * submitted + 1) {
                    if (atomic_load(&failed))
                        break;
                    sched_yield();
                }
                if (atomic_load(&failed)) {
                    for (int t = 0; t < started; t++)
                        if (jobs[t].msg[0])
                            snprintf(p->err, sizeof p->err, "parser: %s", jobs[t].msg);
                    rc = -1;
                    break;
                }
            }
            int64_t h1 = faid_now_ns();
            int src = faid_engine_submit_table(e, &f, p->parsers ? &ps->tab : NULL,
                                               (uint64_t)submitted, &d);
            p->host_parse_wait_s += (double)(h1 - h0) * 1e-9;
            p->host_submit_s += (double)(faid_now_ns() - h1) * 1e-9;
            if (src == FAID_EBUSY) {
                busy = 1;
                continue;
            }
            if (src) {
                snprintf(p->err, sizeof p->err, "frame %ld: %s", g, d.msg);
                rc = -1;
                break;
            }
            atomic_store_explicit(&ps->seq, 2L * (submitted + RING), memory_order_release);
            submitted++;
            continue;
        }
        uint64_t tag = 0;
        busy = 0;
        /* a poll first: a frame already done is host work (collect); one not done yet is time
         * the thread waits for the device (the blocking collect that follows) */
        int64_t c0 = faid_now_ns();
        int crc = faid_engine_collect(e, p->res, &tag, 0, &d);
        int64_t c1 = faid_now_ns();
        p->host_collect_s += (double)(c1 - c0) * 1e-9;
        if (crc == FAID_EBUSY) {
            faid_diag_clear(&d);
            crc = faid_engine_collect(e, p->res, &tag, 1, &d);
            p->host_wait_s += (double)(faid_now_ns() - c1) * 1e-9;
        }
        if (crc) {
            snprintf(p->err, sizeof p->err, "collect: %s", d.msg);
            rc = -1;
            break;
        }
        int64_t k0 = faid_now_ns();
        const faid_stage_times *rt = &p->res->t;
        p->dev_kernels_us += rt->decode_us + rt->preprocess_us + rt->integrate_us + rt->peaks_us;
        p->dev_copies_us += rt->h2d_us + rt->d2h_us;
        long g = p->first + (long)tag * p->step;
        const int with_2d = collected < 4 * NDISTINCT || collected % CHECK_2D_EVERY == 0;
        if (!result_same(p->res, p->sync[g % NDISTINCT], with_2d))
            p->identical = 0;
        p->checked_2d += with_2d && p->res->p2d;
        record(p->samples + (size_t)collected * S_N, &p->res->t);
        if (p->parsers)
            p->samples[(size_t)collected * S_N + S_TABLE] = p->parse_us[tag];
        p->device_decode = p->res->t.device_decode;
        p->zero_copy = p->res->t.zero_copy;
        collected++;
        p->host_check_s += (double)(faid_now_ns() - k0) * 1e-9;
    }
    p->wall_s = (double)(faid_now_ns() - w0) * 1e-9;
    if (rc) {
        atomic_store(&failed, 1);
        uint64_t tag;
        while (faid_engine_in_flight(e) > 0 &&
               faid_engine_collect(e, p->res, &tag, 1, &d) != FAID_EINVAL)
            ;
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    return rc;
}

/* Medians of the nframes x S_N samples into med. */
static void medians(const double *samples, long nframes, double *med)
{
    double *col = malloc(sizeof(double) * (size_t)nframes);
    for (int st = 0; st < S_N; st++) {
        med[st] = 0;
        if (!col)
            continue;
        for (long i = 0; i < nframes; i++)
            col[i] = samples[(size_t)i * S_N + st];
        med[st] = median(col, (int)nframes);
    }
    free(col);
}

/* Largest relative difference of a device's 1D profile (I, sigma) from the float64 C reference
 * that a run may show (every GPU and PoCL run so far: 2.2e-7 at most). */
#define BENCH_REL_TOL 1e-5

static double rel_err(const float *a, const float *ref, int n)
{
    double m = 0, w = 0;
    for (int i = 0; i < n; i++)
        m += fabs(ref[i]);
    m = n ? m / n : 0;
    for (int i = 0; i < n; i++) {
        double s = fmax(fabs(ref[i]), m);
        double e = fabs((double)a[i] - ref[i]);
        if (isnan(a[i]) != isnan(ref[i]))
            return INFINITY;
        if (s > 0 && e / s > w)
            w = e / s;
    }
    return w;
}

/* Compares the device's peaks and background of every distinct frame with the reference
 * device's: the lists must be equal bit for bit (the kernels reproduce the C references), the
 * background within float64 rounding. Prints one line; returns 1 when every list is equal. */
static int check_peaks(const char *who, faid_result *const *dev, faid_result *const *ref,
                       double *bg_err)
{
    int equal = 1;
    *bg_err = 0;
    printf("peaks on %s vs reference device (frames 0-%d):", who, NDISTINCT - 1);
    for (int k = 0; k < NDISTINCT; k++) {
        int same = peaks_same(dev[k]->peaks, ref[k]->peaks);
        equal &= same;
        const faid_background *b = dev[k]->bg, *rb = ref[k]->bg;
        *bg_err = fmax(*bg_err, fmax(rel_err(b->mean, rb->mean, rb->nbins),
                                     rel_err(b->std, rb->std, rb->nbins)));
        printf(" %d%s", dev[k]->peaks->n_found, same ? "" : "(DIFF)");
        if (!same)
            printf("[ref %d]", ref[k]->peaks->n_found);
    }
    printf(" peaks; lists %s; background worst rel. diff %.1e\n", equal ? "equal" : "DIFFER",
           *bg_err);
    return equal;
}

/* One device's run. Aligned to a cache line: each device thread writes its pipe_run's counters
 * and times on every frame, and without it the last of them shared a line with the next job's
 * first fields (its engine, frames and lengths, read by that device's thread on every frame). */
typedef struct dev_job {
    _Alignas(64) pipe_run p;
    pthread_barrier_t *go;
    int rc;
} dev_job;

static void *dev_main(void *arg)
{
    dev_job *j = arg;
    pthread_barrier_wait(j->go);
    j->rc = pipe_run_do(&j->p);
    return NULL;
}

static int pcie_floor(const char *spec, size_t bytes, int copies, double *event_gbs,
                      double *wall_gbs, pthread_barrier_t *go);

/* One device's PCIe floor in a thread of its own (--devices: every device's at once). */
typedef struct floor_job {
    const char *spec;
    size_t bytes;
    pthread_barrier_t *go;
    double ev_gbs, wall_gbs;
    int rc;
} floor_job;

static void *floor_main(void *arg)
{
    floor_job *f = arg;
    f->rc = pcie_floor(f->spec, f->bytes, 200, &f->ev_gbs, &f->wall_gbs, f->go);
    return NULL;
}

/* --devices: the GPU stage on several devices at once, one engine and one submitting thread
 * (plus its parser threads) per device, frames dealt round-robin (global frame i to device
 * i mod n), aggregate frames/s over the common wall time. Every device first reduces the
 * NDISTINCT frames synchronously; those results must equal device 0's bit for bit. Then each
 * device runs two rounds of its ring (2 x depth x batch frames, checked the same way) before the
 * timed run: changing the batch drops the engine's programs, and without that round every device
 * built its batched programs inside the timed window, one after another behind the process-wide
 * build lock (faid_progcache.c); the run counts builds in the timed window (0 expected).
 * After the run: where each device's submitting thread spent the run, how busy its device was,
 * and the PCIe floor of each device alone and of all at once (is the host's PCIe or memory the
 * shared limit?). --pinned shared puts every device's frames in one pinned buffer of device 0's
 * context, as the daemon's input arena (faid_pinned.h) is, instead of one per device. */
static int multi_main(const opts *o, const faid_setup *s, faid_dtype dt, uint8_t *const *comp,
                      const size_t *clen, size_t esz, size_t raw_bytes, faid_result *const *refk,
                      int peaks_on)
{
    enum { MAXDEV = 16 };
    char specs[MAXDEV][16];
    int nd = 0;
    faid_diag d = {0};
    if (strncmp(o->devices, "gpu:", 4) == 0) {
        int want = atoi(o->devices + 4), n = 0;
        faid_cl_device_info all[FAID_CL_MAX_DEVICES];
        if (faid_cl_list(all, FAID_CL_MAX_DEVICES, &n, &d)) {
            fprintf(stderr, "faid-bench: --devices: %s\n", d.msg);
            return 1;
        }
        for (int i = 0; i < n && nd < want && nd < MAXDEV; i++)
            if (all[i].is_gpu)
                snprintf(specs[nd++], sizeof specs[0], "%d", i);
        if (want < 1 || nd < want) {
            fprintf(stderr, "faid-bench: --devices %s: %d GPU(s) present\n", o->devices, nd);
            return 1;
        }
    } else {
        for (const char *p = o->devices; *p && nd < MAXDEV;) {
            const char *q = strchr(p, ',');
            size_t len = q ? (size_t)(q - p) : strlen(p);
            snprintf(specs[nd++], sizeof specs[0], "%.*s", (int)(len < 15 ? len : 15), p);
            p = q ? q + 1 : p + len;
        }
    }
    if (nd < 1) {
        fprintf(stderr, "faid-bench: --devices: no device named\n");
        return 2;
    }
    const int shared = strcmp(o->pinned, "shared") == 0;
    faid_engine *e[MAXDEV] = {0};
    faid_result *sync[MAXDEV][NDISTINCT] = {{0}};
    dev_job job[MAXDEV];
    void *pinned[MAXDEV][NDISTINCT] = {{0}};
    const uint8_t *src[MAXDEV][NDISTINCT];
    int identical = 1, peaks_ok = -1, warm_ok = 1;
    double bg_err = 0, mean_clen = 0;
    for (int k = 0; k < NDISTINCT; k++)
        mean_clen += (double)clen[k] / NDISTINCT;
    memset(job, 0, sizeof job);
    for (int j = 0; j < nd; j++) {
        int64_t t0 = faid_now_ns();
        if (!(e[j] = faid_engine_new(s, specs[j], &d)) || faid_engine_prepare(e[j], dt, &d)) {
            fprintf(stderr, "faid-bench: device %s: %s\n", specs[j], d.msg);
            return 1;
        }
        printf("device %d (%s): %s (engine init %.0f ms)\n", j, specs[j],
               faid_engine_device_name(e[j]), (double)(faid_now_ns() - t0) * 1e-6);
        for (int k = 0; k < NDISTINCT; k++) {
            faid_frame f = {comp[k], clen[k], FAID_ENC_BSLZ4, dt, s->rows, s->cols};
            if (!(sync[j][k] = faid_result_new(s)) ||
                faid_engine_process(e[j], &f, sync[j][k], &d)) {
                fprintf(stderr, "faid-bench: device %s frame %d: %s\n", specs[j], k, d.msg);
                return 1;
            }
            if (j > 0 && !result_same(sync[j][k], sync[0][k], 1)) {
                identical = 0;
                printf("device %d frame %d: result DIFFERS from device 0's\n", j, k);
            }
        }
        if (faid_engine_set_batch(e[j], o->batch, &d) ||
            faid_engine_set_depth(e[j], o->depth, &d) || faid_engine_prepare(e[j], dt, &d)) {
            fprintf(stderr, "faid-bench: device %s: %s\n", specs[j], d.msg);
            return 1;
        }
        for (int k = 0; k < NDISTINCT; k++) {
            if (shared && j > 0) {
                /* device 0's pinned bytes, as the daemon's one arena is for every worker */
                if (faid_engine_host_register(e[j], pinned[0][k], clen[k], &d)) {
                    fprintf(stderr, "faid-bench: --pinned shared: %s\n", d.msg);
                    return 1;
                }
                src[j][k] = pinned[0][k];
                continue;
            }
            if (!(pinned[j][k] = faid_engine_host_alloc(e[j], clen[k], &d))) {
                fprintf(stderr, "faid-bench: pinned frames: %s\n", d.msg);
                return 1;
            }
            memcpy(pinned[j][k], comp[k], clen[k]);
            src[j][k] = pinned[j][k];
        }
        long nf = (o->frames - j + nd - 1) / nd;
        long nwarm = 2L * faid_engine_depth(e[j]);
        long nbuf = (nf > nwarm ? nf : nwarm) + 1;
        pipe_run *p = &job[j].p;
        *p = (pipe_run){.e = e[j],
                        .src = src[j],
                        .clen = clen,
                        .dt = dt,
                        .rows = s->rows,
                        .cols = s->cols,
                        .esz = esz,
                        .raw_bytes = raw_bytes,
                        .nframes = nf,
                        .first = j,
                        .step = nd,
                        .parsers = o->parsers,
                        .depth = faid_engine_depth(e[j])};
        p->ring = calloc(RING, sizeof *p->ring);
        p->parse_us = calloc((size_t)nbuf, sizeof *p->parse_us);
        p->samples = calloc((size_t)nbuf * S_N, sizeof *p->samples);
        p->res = faid_result_new(s);
        p->sync = sync[j];
        if (!p->ring || !p->parse_us || !p->samples || !p->res) {
            fprintf(stderr, "faid-bench: out of memory\n");
            return 1;
        }
        for (int t = 0; t < RING; t++)
            if (faid_block_table_alloc(&p->ring[t].tab, faid_bslz4_max_blocks(raw_bytes, esz, 0),
                                       &d)) {
                fprintf(stderr, "faid-bench: %s\n", d.msg);
                return 1;
            }
        /* two rounds of the ring: the batched programs, every slot's queue and first launches */
        pipe_run w = *p;
        w.nframes = nwarm;
        if (pipe_run_do(&w)) {
            fprintf(stderr, "faid-bench: device %s warm-up: %s\n", specs[j], w.err);
            return 1;
        }
        warm_ok &= w.identical;
    }
    if (peaks_on && refk[0])
        peaks_ok = check_peaks("device 0", sync[0], refk, &bg_err);
    double wait0_ms = 0, wait1_ms = 0;
    const uint64_t builds0 = faid_progcache_builds(&wait0_ms);
    pthread_barrier_t go;
    pthread_t th[MAXDEV];
    pthread_barrier_init(&go, NULL, (unsigned)nd + 1);
    for (int j = 0; j < nd; j++) {
        job[j].go = &go;
        if (pthread_create(&th[j], NULL, dev_main, &job[j])) {
            fprintf(stderr, "faid-bench: cannot start device threads\n");
            return 1;
        }
    }
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    pthread_barrier_wait(&go);
    int64_t w0 = faid_now_ns();
    for (int j = 0; j < nd; j++)
        pthread_join(th[j], NULL);
    double wall = (double)(faid_now_ns() - w0) * 1e-9;
    getrusage(RUSAGE_SELF, &ru1);
    pthread_barrier_destroy(&go);
    /* the process's CPU time over the timed window (every thread: submitting, parsers, the
     * OpenCL runtime's own): CPUs kept busy = CPU seconds / wall */
#define TV_S(t) ((double)(t).tv_sec + (double)(t).tv_usec * 1e-6)
    const double cpu_user = TV_S(ru1.ru_utime) - TV_S(ru0.ru_utime);
    const double cpu_sys = TV_S(ru1.ru_stime) - TV_S(ru0.ru_stime);
#undef TV_S
    const uint64_t builds_timed = faid_progcache_builds(&wait1_ms) - builds0;
    int failed = 0, ident_pipe = warm_ok;
    for (int j = 0; j < nd; j++) {
        if (job[j].rc) {
            fprintf(stderr, "faid-bench: device %d: %s\n", j, job[j].p.err);
            failed = 1;
        }
        ident_pipe &= job[j].p.identical;
    }
    if (failed)
        return 1;
    /* the PCIe floor of each device alone, then of all at once (after the timed run) */
    floor_job fl[MAXDEV], fa[MAXDEV];
    memset(fl, 0, sizeof fl);
    memset(fa, 0, sizeof fa);
    const int cl_only = strcmp(specs[0], "ref") != 0;
    for (int j = 0; j < nd && cl_only; j++) {
        fl[j] = (floor_job){specs[j], (size_t)mean_clen, NULL, 0, 0, 0};
        if (strcmp(specs[j], "ref") != 0)
            floor_main(&fl[j]);
        else
            fl[j].rc = -1;
    }
    if (nd > 1 && cl_only) {
        pthread_barrier_t fgo;
        pthread_barrier_init(&fgo, NULL, (unsigned)nd);
        int started = 0;
        for (int j = 0; j < nd; j++) {
            fa[j] = (floor_job){specs[j], (size_t)mean_clen, &fgo, 0, 0, -1};
            if (pthread_create(&th[j], NULL, floor_main, &fa[j]))
                break;
            started++;
        }
        if (started < nd) {
            /* the barrier would never open: nothing to measure (a thread could not start) */
            fprintf(stderr, "faid-bench: cannot start the PCIe floor threads\n");
            return 1;
        }
        for (int j = 0; j < nd; j++)
            pthread_join(th[j], NULL);
        pthread_barrier_destroy(&fgo);
    } else {
        memcpy(fa, fl, sizeof fa);
    }
    double fps = o->frames / wall;
    printf("\nGPU stage on %d device(s), %d frames dealt round-robin, depth %d x batch %d, "
           "%d parser thread(s) per device, frames in %s pinned memory; median us per frame\n",
           nd, o->frames, o->depth, o->batch, o->parsers,
           shared ? "device 0's (shared)" : "each device's own");
    printf("%-4s %-30s %7s %9s %7s %7s %7s %7s %7s %7s %8s\n", "dev", "name", "frames", "fps",
           "h2d", "decode", "integr", "pkprep", "clip", "find", "latency");
    double med[MAXDEV][S_N];
    for (int j = 0; j < nd; j++) {
        medians(job[j].p.samples, job[j].p.nframes, med[j]);
        printf("%-4d %-30.30s %7ld %9.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %8.1f\n", j,
               faid_engine_device_name(e[j]), job[j].p.nframes, job[j].p.nframes / job[j].p.wall_s,
               med[j][S_H2D], med[j][S_DEC], med[j][S_INT], med[j][S_PKPRE], med[j][S_CLIP],
               med[j][S_FIND], med[j][S_TOTAL]);
    }
    /* where each device's run went: its submitting thread's wall time per frame, split, and its
     * device's summed event times over that wall (copies overlap kernels on their own engines;
     * kernels of different slots may overlap too, so a saturated device shows >= 100 %) */
    printf("\nwhere each device's run went: its submitting thread, us per frame (submit = inside "
           "faid_engine_submit_table; parse wait = for a parser's table; device wait = blocked "
           "on an unfinished frame; collect = a finished frame; check = the bit comparison; other "
           "= the rest of its wall); parse = a parser thread's median per table; device busy = "
           "summed OpenCL event times / its wall; PCIe floor = pinned H2D of the mean frame "
           "alone and with every device copying at once, GB/s\n");
    printf("%-4s %9s %7s %7s %7s %7s %7s %7s %7s %8s %8s %8s %8s\n", "dev", "fps", "submit",
           "pwait", "dwait", "collect", "check", "other", "parse", "kernels%", "copies%", "floor1",
           "floorN");
    double host[MAXDEV][6];
    for (int j = 0; j < nd; j++) {
        const pipe_run *p = &job[j].p;
        const double per = 1e6 / (double)p->nframes;
        host[j][0] = p->host_submit_s * per;
        host[j][1] = p->host_parse_wait_s * per;
        host[j][2] = p->host_wait_s * per;
        host[j][3] = p->host_collect_s * per;
        host[j][4] = p->host_check_s * per;
        host[j][5] =
            p->wall_s * per - host[j][0] - host[j][1] - host[j][2] - host[j][3] - host[j][4];
        printf("%-4d %9.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f%% %7.1f%% %8.1f %8.1f\n",
               j, p->nframes / p->wall_s, host[j][0], host[j][1], host[j][2], host[j][3],
               host[j][4], host[j][5], med[j][S_TABLE],
               100.0 * p->dev_kernels_us * 1e-6 / p->wall_s,
               100.0 * p->dev_copies_us * 1e-6 / p->wall_s, fl[j].rc ? 0.0 : fl[j].ev_gbs,
               fa[j].rc ? 0.0 : fa[j].ev_gbs);
    }
    printf("program builds in the timed window: %llu (threads waited %.1f ms for the build "
           "lock there); CPU busy over it: %.1f CPUs (user %.3f s, system %.3f s, wall %.3f s)\n",
           (unsigned long long)builds_timed, wait1_ms - wait0_ms, (cpu_user + cpu_sys) / wall,
           cpu_user, cpu_sys, wall);
    printf("aggregate: %.1f frames/s on %d device(s); results of every device bit-identical to "
           "device 0's: %s; pipelined results identical to synchronous: %s\n",
           fps, nd, identical ? "yes" : "NO", ident_pipe ? "yes" : "NO");
    if (o->json) {
        FILE *f = fopen(o->json, "w");
        if (!f) {
            fprintf(stderr, "faid-bench: cannot write %s\n", o->json);
            return 1;
        }
        fprintf(
            f,
            "{\n \"mode\": \"devices\", \"ndevices\": %d, \"frames\": %d, \"depth\": %d, "
            "\"batch\": %d, \"parsers\": %d,\n \"fps\": %.3f, \"identical_devices\": %d, "
            "\"identical_pipelined\": %d, \"peaks\": \"%s\", \"peaks_ref_equal\": %d, "
            "\"bg_rel_err\": %.3e,\n \"split\": \"%s\", \"dtype\": \"%s\", \"pinned\": "
            "\"%s\", \"builds_timed\": %llu, \"build_wait_ms\": %.3f, \"floor_bytes\": %.0f,\n"
            " \"wall_s\": %.6f, \"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, \"cpus_busy\": %.3f,\n"
            " \"devices\": [\n",
            nd, o->frames, o->depth, o->batch, o->parsers, fps, identical, ident_pipe,
            faid_peak_algorithm_name(s->cfg.peaks.algorithm), peaks_ok, bg_err,
            faid_split_name(s->cfg.split), faid_dtype_name(dt), shared ? "shared" : "own",
            (unsigned long long)builds_timed, wait1_ms - wait0_ms, mean_clen, wall, cpu_user,
            cpu_sys, (cpu_user + cpu_sys) / wall);
        static const char *hkeys[6] = {"host_submit_us",  "host_parse_wait_us", "host_wait_us",
                                       "host_collect_us", "host_check_us",      "host_other_us"};
        for (int j = 0; j < nd; j++) {
            const pipe_run *p = &job[j].p;
            fprintf(f, "  {\"name\": \"%s\", \"frames\": %ld, \"fps\": %.3f, \"wall_s\": %.6f",
                    faid_engine_device_name(e[j]), p->nframes, p->nframes / p->wall_s, p->wall_s);
            for (int st = 0; st < S_N; st++)
                fprintf(f, ", \"%s\": %.3f", stage_keys[st], med[j][st]);
            for (int h = 0; h < 6; h++)
                fprintf(f, ", \"%s\": %.3f", hkeys[h], host[j][h]);
            fprintf(f,
                    ", \"busy_kernels\": %.4f, \"busy_copies\": %.4f, \"floor_alone_gbs\": %.3f, "
                    "\"floor_together_gbs\": %.3f}%s\n",
                    p->dev_kernels_us * 1e-6 / p->wall_s, p->dev_copies_us * 1e-6 / p->wall_s,
                    fl[j].rc ? 0.0 : fl[j].ev_gbs, fa[j].rc ? 0.0 : fa[j].ev_gbs,
                    j + 1 < nd ? "," : "");
        }
        fprintf(f, " ]\n}\n");
        fclose(f);
    }
    for (int j = nd - 1; j >= 0; j--) {
        pipe_run *p = &job[j].p;
        for (int t = 0; t < RING; t++)
            faid_block_table_free(&p->ring[t].tab);
        free(p->ring);
        free(p->parse_us);
        free(p->samples);
        faid_result_destroy(&p->res);
        for (int k = 0; k < NDISTINCT; k++) {
            faid_engine_host_free(e[j], &pinned[j][k]);
            faid_result_destroy(&sync[j][k]);
        }
        faid_engine_destroy(&e[j]);
    }
    return identical && ident_pipe && peaks_ok != 0 ? 0 : 3;
}

static int write_poni(const char *path, const faid_config *cfg)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const faid_geometry *g = &cfg->geometry;
    const faid_detector_preset *p = cfg->preset[0] ? faid_detector_find(cfg->preset) : NULL;
    fprintf(f, "# faid-bench geometry\nponi_version: 2\n");
    if (p)
        fprintf(f, "Detector: %s\nDetector_config: {\"orientation\": %d}\n", p->name,
                g->orientation ? g->orientation : 3);
    else
        fprintf(f,
                "Detector: Detector\nDetector_config: {\"pixel1\": %.17g, \"pixel2\": %.17g, "
                "\"max_shape\": [%d, %d], \"orientation\": %d}\n",
                g->pixel1, g->pixel2, g->rows, g->cols, g->orientation ? g->orientation : 3);
    fprintf(f,
            "Distance: %.17g\nPoni1: %.17g\nPoni2: %.17g\nRot1: %.17g\nRot2: %.17g\n"
            "Rot3: %.17g\nWavelength: %.17g\n",
            g->dist, g->poni1, g->poni2, g->rot1, g->rot2, g->rot3, g->wavelength);
    return fclose(f);
}

/* The PCIe floor of the GPU stage, measured in the same run: back-to-back H2D copies of `bytes`
 * (the mean compressed frame) from pinned host memory (CL_MEM_ALLOC_HOST_PTR, mapped, as the
 * engine's staging and host_alloc memory) on the device of `spec`, in a context of its own.
 * *event_gbs: bytes / median copy time from the profiling events (the transfer alone, the
 * stricter floor); *wall_gbs: bytes x copies / wall time of the whole queue (with the per-copy
 * gaps). With go (several devices at once, --devices) every caller waits there after its
 * setup and warm-up, so that the timed copies of all devices overlap; it waits even when its
 * setup failed. Returns 0, or -1 with a message on stderr. */
static int pcie_floor(const char *spec, size_t bytes, int copies, double *event_gbs,
                      double *wall_gbs, pthread_barrier_t *go)
{
    faid_diag d = {0};
    faid_cl_device_info info;
    faid_cl_ctx *ctx = NULL;
    if (faid_cl_select(spec, &info, &d) || !(ctx = faid_cl_ctx_new(&info, 1, &d))) {
        fprintf(stderr, "faid-bench: PCIe floor: %s\n", d.msg);
        if (go)
            pthread_barrier_wait(go);
        return -1;
    }
    int rc = -1;
    cl_int err = CL_SUCCESS;
    cl_mem host =
        clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
    cl_mem dev = err == CL_SUCCESS
                     ? clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err)
                     : NULL;
    void *hp = err == CL_SUCCESS ? clEnqueueMapBuffer(ctx->queue, host, CL_TRUE, CL_MAP_WRITE, 0,
                                                      bytes, 0, NULL, NULL, &err)
                                 : NULL;
    cl_event *ev = calloc((size_t)copies, sizeof *ev);
    double *us = calloc((size_t)copies, sizeof *us);
    if (err == CL_SUCCESS && hp && ev && us) {
        memset(hp, 0x5a, bytes);
        for (int i = 0; i < 8 && err == CL_SUCCESS; i++) /* warm-up */
            err = clEnqueueWriteBuffer(ctx->queue, dev, CL_FALSE, 0, bytes, hp, 0, NULL, NULL);
        if (err == CL_SUCCESS)
            err = clFinish(ctx->queue);
        if (go) {
            pthread_barrier_wait(go);
            go = NULL;
        }
        int64_t t0 = faid_now_ns();
        for (int i = 0; i < copies && err == CL_SUCCESS; i++)
            err = clEnqueueWriteBuffer(ctx->queue, dev, CL_FALSE, 0, bytes, hp, 0, NULL, &ev[i]);
        if (err == CL_SUCCESS)
            err = clFinish(ctx->queue);
        double wall = (double)(faid_now_ns() - t0) * 1e-9;
        if (err == CL_SUCCESS) {
            for (int i = 0; i < copies; i++) {
                cl_ulong a = 0, b = 0;
                clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
                clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
                us[i] = b > a ? (double)(b - a) * 1e-3 : 0.0;
            }
            double med = median(us, copies);
            *event_gbs = med > 0 ? (double)bytes / (med * 1e3) : 0.0;
            *wall_gbs = wall > 0 ? (double)bytes * copies / wall * 1e-9 : 0.0;
            rc = 0;
        }
    }
    if (go)
        pthread_barrier_wait(go); /* setup failed before the barrier */
    if (rc)
        fprintf(stderr, "faid-bench: PCIe floor: OpenCL error %d\n", (int)err);
    for (int i = 0; ev && i < copies; i++)
        if (ev[i])
            clReleaseEvent(ev[i]);
    free(ev);
    free(us);
    if (hp)
        clEnqueueUnmapMemObject(ctx->queue, host, hp, 0, NULL, NULL);
    clFinish(ctx->queue);
    if (dev)
        clReleaseMemObject(dev);
    if (host)
        clReleaseMemObject(host);
    faid_cl_ctx_destroy(&ctx);
    return rc;
}

static int parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){"auto",
                100,
                NULL,
                0,
                -1,
                NULL,
                NULL,
                "uint32",
                NULL,
                "fused,separate,pipelined,pipelined-copy",
                FAID_ENGINE_DEPTH_DEFAULT,
                4,
                -1,
                1,
                NULL,
                NULL,
                "none",
                NULL,
                "synthetic",
                NULL,
                0,
                "own",
                0,
                NULL};
    const bench_shared sh = {.frames = &o->frames,
                             .config = &o->config,
                             .dtype = &o->dtype,
                             .device = &o->device,
                             .json = &o->json};
    const bench_opt own[] = {
        {"split", BENCH_STR, &o->split, NULL, 0, 0, NULL},
        {"npt", BENCH_INT, NULL, &o->npt, 0, 0, NULL},
        {"azim", BENCH_INT, NULL, &o->azim, 0, 0, NULL},
        {"unit", BENCH_STR, &o->unit, NULL, 0, 0, NULL},
        {"error-model", BENCH_STR, &o->em, NULL, 0, 0, NULL},
        {"variants", BENCH_STR, &o->variants, NULL, 0, 0, NULL},
        {"depth", BENCH_INT, NULL, &o->depth, 0, 0, NULL},
        {"batch", BENCH_INT, NULL, &o->batch, 0, 0, NULL},
        {"parsers", BENCH_INT, NULL, &o->parsers, 0, 0, NULL},
        {"dump", BENCH_STR, &o->dump, NULL, 0, 0, NULL},
        {"peaks", BENCH_STR, &o->peaks, NULL, 0, 0, NULL},
        {"devices", BENCH_STR, &o->devices, NULL, 0, 0, NULL},
        {"kind", BENCH_STR, &o->kind, NULL, 0, 0, NULL},
        {"detector", BENCH_STR, &o->detector, NULL, 0, 0, NULL},
        {"no-check", BENCH_OFF, NULL, &o->check, 0, 0, NULL},
        {"cake-arrays", BENCH_INT, NULL, &o->cake_arrays, 1, 4, NULL},
        {"pinned", BENCH_STR, &o->pinned, NULL, 0, 0, "own|shared"},
        {"copy-threads", BENCH_INT, NULL, &o->copy_threads, 1, 16, NULL},
        {"set", BENCH_STR, &o->sets, NULL, 0, 0, NULL},
    };
    int prc =
        bench_parse("faid-bench", argc, argv, &sh, own, (int)(sizeof own / sizeof own[0]), usage);
    if (prc)
        return prc;
    if (o->frames < 1) {
        fprintf(stderr, "faid-bench: --frames must be at least 1\n");
        return -1;
    }
    if (strcmp(o->peaks, "none") && strcmp(o->peaks, "pyfai") && strcmp(o->peaks, "peakfinder8")) {
        fprintf(stderr, "faid-bench: --peaks must be none, pyfai or peakfinder8\n");
        return -1;
    }
    if (strcmp(o->kind, "synthetic") && strcmp(o->kind, "lowcount")) {
        fprintf(stderr, "faid-bench: --kind must be synthetic or lowcount\n");
        return -1;
    }
    if (o->detector &&
        (strlen(o->detector) > 64 ||
         strspn(o->detector, "abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(o->detector))) {
        fprintf(stderr, "faid-bench: --detector: a preset name (e.g. eiger_16m)\n");
        return -1;
    }
    if (o->parsers < 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        o->parsers = ncpu > 1 ? (int)(ncpu - 1 < 4 ? ncpu - 1 : 4) : 0;
    }
    if (o->parsers > 64) {
        fprintf(stderr, "faid-bench: --parsers must be within 0..64\n");
        return -1;
    }
    if (o->batch < 1 || o->batch > FAID_ENGINE_BATCH_MAX) {
        fprintf(stderr, "faid-bench: --batch must be within 1..%d\n", FAID_ENGINE_BATCH_MAX);
        return -1;
    }
    if (o->depth < 1 || o->depth > FAID_ENGINE_DEPTH_MAX) {
        fprintf(stderr, "faid-bench: --depth must be within 1..%d\n", FAID_ENGINE_DEPTH_MAX);
        return -1;
    }
    for (const char *p = o->variants; *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        int known = 0;
        for (int v = 0; v < NVARIANTS; v++)
            known |= strlen(vnames[v]) == len && strncmp(p, vnames[v], len) == 0;
        if (!known) {
            fprintf(stderr,
                    "faid-bench: unknown variant '%.*s' (fused, separate, pipelined, "
                    "pipelined-copy, compute)\n",
                    (int)len, p);
            return -1;
        }
        p = q ? q + 1 : p + len;
    }
    return 0;
}

static int build_config(const opts *o, faid_config *cfg, faid_diag *d)
{
    faid_config_default(cfg);
    if (o->config && faid_config_load(o->config, cfg, d))
        return -1;
    char y[1024];
    size_t n = (size_t)snprintf(y, sizeof y, "integration:\n");
    if (o->split)
        n += (size_t)snprintf(y + n, sizeof y - n, "  split: %s\n", o->split);
    if (o->npt > 0)
        n += (size_t)snprintf(y + n, sizeof y - n, "  npt: %d\n", o->npt);
    if (o->azim >= 0)
        n += (size_t)snprintf(y + n, sizeof y - n, "  npt_azim: %d\n", o->azim);
    if (o->unit)
        n += (size_t)snprintf(y + n, sizeof y - n, "  unit: %s\n", o->unit);
    if (o->em)
        n += (size_t)snprintf(y + n, sizeof y - n, "  error_model: %s\n", o->em);
    if (n > strlen("integration:\n") && faid_config_load_string(y, n, "command line", cfg, d))
        return -1;
    if (o->detector) {
        n = (size_t)snprintf(y, sizeof y, "detector:\n  preset: %s\n", o->detector);
        if (faid_config_load_string(y, n, "command line (--detector)", cfg, d))
            return -1;
    }
    if (strcmp(o->peaks, "none") != 0) {
        /* The parameters of the project's peak tests (tests/reference/peakrefs.py: PYFAI_PARAMS,
         * PF8_PARAMS, chosen there for recall and precision), 5 clipping cycles; the background
         * bins are the profile's radial bins without pixel splitting. */
        n = (size_t)snprintf(y, sizeof y,
                             "peaks:\n  algorithm: %s\n  cycles: 5\n  error_model: azimuthal\n"
                             "  cutoff_clip: 5.0\n  cutoff_peak: 4.0\n  noise: 1.0\n"
                             "  patch_size: 5\n  connected: 2\n  adc_threshold: 20.0\n"
                             "  minimum_snr: 4.0\n  min_pixel_count: 2\n  max_pixel_count: 200\n"
                             "  local_bg_radius: 3\n  max_num_peaks: 2048\n",
                             o->peaks);
        if (faid_config_load_string(y, n, "command line (--peaks)", cfg, d))
            return -1;
    }
    /* --set: the probes of issue 17 (the clip's time per cycle and per error model) */
    if (o->sets) {
        char buf[1024];
        if (strlen(o->sets) >= sizeof buf)
            return faid_fail(d, FAID_EINVAL, "--set: longer than %zu characters", sizeof buf - 1);
        strcpy(buf, o->sets);
        char *save = NULL;
        for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq || eq == kv)
                return faid_fail(d, FAID_EINVAL, "--set %s: expected KEY=VALUE", kv);
            *eq = '\0';
            if (faid_config_set(cfg, kv, eq + 1, d)) {
                faid_diag_prefix(d, "--set: ");
                return -1;
            }
        }
    }
    return 0;
}

/* zmq_ceiling.c: the ZeroMQ transport ceiling, a separate mode of this executable. */
int faid_zmq_ceiling_main(int argc, char **argv);
/* zmq_sink.c: fan-bench.py's C receivers (a plain PULL, a faid-fan instance). */
int faid_zmq_sink_main(int argc, char **argv);
/* proto_encode.c: the CPU cost of writing one result message. */
int faid_proto_encode_main(int argc, char **argv);
int faid_writer_bench_main(int argc, char **argv);
/* host_path.c: the daemon's host work per frame with and without the pinned input arena. */
int faid_host_path_main(int argc, char **argv);
/* decode_bench.c: the device decoder alone, one frame and frames in flight. */
int faid_decode_bench_main(int argc, char **argv);

int main(int argc, char **argv)
{
    /* The mode switch is a pre-scan up to "--"; each mode parses the whole line itself. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--zmq-ceiling") == 0)
            return faid_zmq_ceiling_main(argc, argv);
        else if (strcmp(argv[i], "--zmq-sink") == 0 || strcmp(argv[i], "--fan-sink") == 0)
            return faid_zmq_sink_main(argc, argv);
        else if (strcmp(argv[i], "--proto-encode") == 0)
            return faid_proto_encode_main(argc, argv);
        else if (strcmp(argv[i], "--writer") == 0)
            return faid_writer_bench_main(argc, argv);
        else if (strcmp(argv[i], "--host-path") == 0)
            return faid_host_path_main(argc, argv);
        else if (strcmp(argv[i], "--decode") == 0)
            return faid_decode_bench_main(argc, argv);
    opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc > 0 ? 0 : 2; /* 1: --help */
    faid_log_set_name("faid-bench");
    faid_diag d = {0};
    faid_config cfg;
    if (build_config(&o, &cfg, &d)) {
        fprintf(stderr, "faid-bench: configuration: %s\n", d.msg);
        return 1;
    }
    faid_dtype dt = faid_dtype_parse(o.dtype);
    if (!faid_dtype_is_frame(dt)) {
        fprintf(stderr, "faid-bench: --dtype %s is not a frame type\n", o.dtype);
        return 2;
    }
    int64_t t0 = faid_now_ns();
    faid_setup *s = faid_setup_new(&cfg, 1, &d);
    double setup_ms = (double)(faid_now_ns() - t0) * 1e-6;
    if (!s) {
        fprintf(stderr, "faid-bench: setup: %s\n", d.msg);
        return 1;
    }
    printf("faid-bench: %dx%d %s, %d bins %s, split %s, error model %s%s\n", s->rows, s->cols,
           faid_dtype_name(dt), s->csr->nbins, faid_unit_name(cfg.unit), faid_split_name(cfg.split),
           faid_error_model_name(cfg.error_model), s->csr2d ? " + 2D cake" : "");
    printf("setup build (geometry + CSR): %.1f ms, nnz %lld (%.1f MB)\n", setup_ms,
           (long long)s->csr->nnz, (double)s->csr->nnz * (s->csr->data ? 8.0 : 4.0) / 1e6);

    /* frames */
    size_t esz = faid_dtype_size(dt), raw_bytes = s->npix * esz;
    size_t cap = faid_bslz4_bound(raw_bytes, esz, 0);
    uint8_t *raw[NDISTINCT] = {0}, *comp[NDISTINCT] = {0};
    size_t clen[NDISTINCT] = {0};
    faid_synth_params sp;
    faid_synth_default_params(&sp);
    if (strcmp(o.kind, "lowcount") == 0) {
        /* Low-count frames as serial crystallography and time-resolved series record them:
         * mostly 0 and 1 (mean 0.34 counts: 73 % zeros, 21 % ones), faint rings, a few Bragg
         * spots; they compress about 17x, as real low-count data do (bit planes above the
         * lowest two are nearly empty), so decoding, not PCIe, sets the pace. */
        sp.background = 1.2;
        sp.ring_amplitude = 1.5;
        sp.nspots = 30;
        sp.spot_amplitude = 300.0;
    }
    faid_synth *syn = faid_synth_new(&s->geom, s->mask, &sp, &d);
    if (!syn) {
        fprintf(stderr, "faid-bench: synthetic frames: %s\n", d.msg);
        return 1;
    }
    double mean_clen = 0;
    for (int k = 0; k < NDISTINCT; k++) {
        raw[k] = malloc(raw_bytes);
        comp[k] = malloc(cap);
        if (!raw[k] || !comp[k] || faid_synth_frame(syn, (uint64_t)k, dt, raw[k], raw_bytes, &d) ||
            faid_bslz4_encode(raw[k], raw_bytes, esz, 0, comp[k], cap, &clen[k], &d)) {
            fprintf(stderr, "faid-bench: frame %d: %s\n", k, d.msg[0] ? d.msg : "out of memory");
            return 1;
        }
        mean_clen += (double)clen[k] / NDISTINCT;
    }
    faid_synth_destroy(&syn);
    printf("frames (%s): %zu bytes raw, %.0f bytes bslz4 (ratio %.2f)\n", o.kind, raw_bytes,
           mean_clen, (double)raw_bytes / mean_clen);

    if (o.dump) {
        char path[4096];
        size_t shape[2] = {(size_t)s->rows, (size_t)s->cols};
        snprintf(path, sizeof path, "%s/frame.npy", o.dump);
        int bad = faid_npy_write(path, dt, 2, shape, raw[0], &d) != 0;
        snprintf(path, sizeof path, "%s/mask.npy", o.dump);
        bad |= faid_npy_write(path, FAID_DT_U8, 2, shape, s->mask, &d) != 0;
        snprintf(path, sizeof path, "%s/chunk.bslz4", o.dump);
        FILE *f = fopen(path, "wb");
        bad |= !f || fwrite(comp[0], 1, clen[0], f) != clen[0];
        if (f)
            bad |= fclose(f) != 0;
        snprintf(path, sizeof path, "%s/geometry.poni", o.dump);
        bad |= write_poni(path, &cfg) != 0;
        if (bad) {
            fprintf(stderr, "faid-bench: --dump %s: could not write the files\n", o.dump);
            return 1;
        }
        printf("dumped frame.npy, mask.npy, chunk.bslz4, geometry.poni into %s\n", o.dump);
    }

    /* reference results for the check: frame 0 (profile), with peaks every distinct frame */
    const int peaks_on = cfg.peaks.algorithm != FAID_PEAKS_NONE;
    faid_result *refk[NDISTINCT] = {0};
    faid_result *ref = NULL;
    if (o.check) {
        faid_engine *re = faid_engine_new(s, "ref", &d);
        for (int k = 0; k < (peaks_on ? NDISTINCT : 1); k++) {
            refk[k] = re ? faid_result_new(s) : NULL;
            faid_frame fk = {comp[k], clen[k], FAID_ENC_BSLZ4, dt, s->rows, s->cols};
            if (!refk[k] || faid_engine_process(re, &fk, refk[k], &d)) {
                fprintf(stderr, "faid-bench: reference: %s\n", d.msg);
                return 1;
            }
            printf("reference (C, float64) frame %d: %.1f ms%s\n", k, refk[k]->t.total_us * 1e-3,
                   peaks_on ? " (with background and peaks)" : "");
        }
        ref = refk[0];
        faid_engine_destroy(&re);
    }
    if (o.devices) {
        int rc = multi_main(&o, s, dt, comp, clen, esz, raw_bytes, refk, peaks_on);
        for (int k = 0; k < NDISTINCT; k++) {
            faid_result_destroy(&refk[k]);
            free(raw[k]);
            free(comp[k]);
        }
        faid_setup_destroy(&s);
        return rc;
    }

    t0 = faid_now_ns();
    faid_engine *e = faid_engine_new(s, o.device, &d);
    if (!e) {
        fprintf(stderr, "faid-bench: device %s: %s\n", o.device, d.msg);
        return 1;
    }
    if (faid_engine_prepare(e, dt, &d)) {
        fprintf(stderr, "faid-bench: kernels: %s\n", d.msg);
        return 1;
    }
    /* --copy-threads N (else pipeline.copy_threads of the configuration): the pipelined-copy
     * variant's copies into staging shared by N threads, as the daemon's worker does */
    const int copy_threads = o.copy_threads ? o.copy_threads : cfg.copy_threads;
    if (faid_engine_set_copy_threads(e, copy_threads, &d)) {
        fprintf(stderr, "faid-bench: --copy-threads %d: %s\n", copy_threads, d.msg);
        return 1;
    }
    /* --cake-arrays N: the D2H of the daemon's cake (its sums stay on the device, N of I, sigma,
     * std, count come back), set before any result so that the arrays left out are never
     * written in any result and compare equal (zero) */
    if (o.cake_arrays &&
        (faid_engine_set_sums_2d(e, 0, &d) || faid_engine_set_cake_arrays(e, o.cake_arrays, &d))) {
        fprintf(stderr, "faid-bench: --cake-arrays %d: %s\n", o.cake_arrays, d.msg);
        return 1;
    }
    double init_ms = (double)(faid_now_ns() - t0) * 1e-6;
    printf("device: %s (engine init incl. kernel builds %.0f ms)\n", faid_engine_device_name(e),
           init_ms);

    variant_result vr[NVARIANTS];
    int nv = 0;
    faid_result *res = faid_result_new(s);
    faid_result *sync[NDISTINCT] = {0};
    double *samples = malloc(sizeof(double) * (size_t)o.frames * S_N);
    if (!res || !samples) {
        fprintf(stderr, "faid-bench: out of memory\n");
        return 1;
    }
    /* block tables parsed ahead (pipelined variants) */
    parse_slot *ring = calloc(RING, sizeof *ring);
    double *parse_us = calloc((size_t)o.frames, sizeof *parse_us);
    if (!ring || !parse_us) {
        fprintf(stderr, "faid-bench: out of memory\n");
        return 1;
    }
    for (int t = 0; t < RING; t++)
        if (faid_block_table_alloc(&ring[t].tab, faid_bslz4_max_blocks(raw_bytes, esz, 0), &d)) {
            fprintf(stderr, "faid-bench: %s\n", d.msg);
            return 1;
        }
    /* the frames again, in engine pinned memory, for the zero-copy pipelined variant */
    void *pinned[NDISTINCT] = {0};
    /* synchronous fused results, compared bit for bit with every pipelined result (and, with
     * peaks, with the reference device's peak lists) */
    int peaks_ok = -1;
    double bg_err = 0;
    if (peaks_on || in_list(o.variants, "pipelined") || in_list(o.variants, "pipelined-copy") ||
        in_list(o.variants, "compute")) {
        for (int k = 0; k < NDISTINCT; k++) {
            faid_frame f = {comp[k], clen[k], FAID_ENC_BSLZ4, dt, s->rows, s->cols};
            sync[k] = faid_result_new(s);
            if (!sync[k] || faid_engine_process(e, &f, sync[k], &d)) {
                fprintf(stderr, "faid-bench: frame %d: %s\n", k, sync[k] ? d.msg : "out of memory");
                return 1;
            }
        }
    }
    uint64_t result_hash = 0xcbf29ce484222325ull;
    for (int k = 0; k < NDISTINCT; k++)
        if (sync[k]) {
            result_hash = profile_hash(result_hash, sync[k]->p1d);
            if (sync[k]->p2d)
                result_hash = profile_hash(result_hash, sync[k]->p2d);
        }
    uint64_t pk_hash = 0xcbf29ce484222325ull;
    for (int k = 0; k < NDISTINCT && peaks_on; k++)
        if (sync[k] && sync[k]->bg && sync[k]->peaks)
            pk_hash = peaks_hash(pk_hash, sync[k]);
    if (peaks_on && o.check)
        peaks_ok = check_peaks(faid_engine_device_name(e), sync, refk, &bg_err);
    int wrong = 0; /* a variant's frame 0 away from the reference: no figures, exit status 1 */
    for (int v = 0; v < NVARIANTS; v++) {
        if (!in_list(o.variants, vnames[v]))
            continue;
        if (strcmp(o.device, "ref") == 0 && v == 1)
            continue;
        const int pipe = v >= 2;
        if (faid_engine_set_fused(e, v != 1, &d) ||
            faid_engine_set_batch(e, pipe ? o.batch : 1, &d) ||
            faid_engine_set_depth(e, pipe ? o.depth : 1, &d)) {
            fprintf(stderr, "faid-bench: %s: %s\n", vnames[v], d.msg);
            return 1;
        }
        variant_result *r = &vr[nv++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", vnames[v]);
        r->wg1 = faid_engine_workgroup(e, 0);
        r->rows1 = faid_engine_rows_mode(e, 0);
        r->rows2 = faid_engine_workgroup(e, 1) ? faid_engine_rows_mode(e, 1) : -1;
        r->depth = faid_engine_depth(e);
        r->batch = faid_engine_batch(e);
        r->identical = -1;
        const uint8_t *src[NDISTINCT];
        for (int k = 0; k < NDISTINCT; k++)
            src[k] = comp[k];
        if (v == 2 || v == 4) {
            for (int k = 0; k < NDISTINCT; k++) {
                if (!pinned[k] && !(pinned[k] = faid_engine_host_alloc(e, clen[k], &d))) {
                    fprintf(stderr, "faid-bench: pinned frames: %s\n", d.msg);
                    return 1;
                }
                memcpy(pinned[k], comp[k], clen[k]);
                src[k] = pinned[k];
            }
        }
        /* warm-up (first launches, caches) */
        for (int k = 0; k < NDISTINCT; k++) {
            faid_frame f = {src[k], clen[k], FAID_ENC_BSLZ4, dt, s->rows, s->cols};
            if (faid_engine_process(e, &f, res, &d)) {
                fprintf(stderr, "faid-bench: %s warm-up: %s\n", r->name, d.msg);
                return 1;
            }
        }
        if (o.check) {
            faid_frame f0 = {comp[0], clen[0], FAID_ENC_BSLZ4, dt, s->rows, s->cols};
            if (faid_engine_process(e, &f0, res, &d) == 0) {
                r->checked = 1;
                r->max_rel_err = fmax(rel_err(res->p1d->I, ref->p1d->I, ref->p1d->nbins),
                                      rel_err(res->p1d->sigma, ref->p1d->sigma, ref->p1d->nbins));
                /* a variant that is wrong the same way every time passes the identity check
                 * (pipelined against synchronous); the reference catches it (every device run
                 * so far: 2.2e-7 at most; a decoder variant that wrote a pattern at the wrong
                 * offset gave 1.5e7 and was reported before this check) */
                if (!(r->max_rel_err <= BENCH_REL_TOL)) {
                    fprintf(stderr,
                            "faid-bench: %s: frame 0 differs from the C reference by %.3g "
                            "(relative, more than %g): the results are wrong\n",
                            r->name, r->max_rel_err, BENCH_REL_TOL);
                    wrong = 1;
                    break;
                }
            }
        }
        int64_t w0 = faid_now_ns();
        double wall = -1.0;
        if (!pipe) {
            for (int i = 0; i < o.frames; i++) {
                int k = i % NDISTINCT;
                faid_frame f = {src[k], clen[k], FAID_ENC_BSLZ4, dt, s->rows, s->cols};
                if (faid_engine_process(e, &f, res, &d)) {
                    fprintf(stderr, "faid-bench: %s frame %d: %s\n", r->name, i, d.msg);
                    return 1;
                }
                record(samples + (size_t)i * S_N, &res->t);
                r->device_decode = res->t.device_decode;
                r->zero_copy = res->t.zero_copy;
            }
        } else {
            pipe_run p = {.e = e,
                          .src = src,
                          .clen = clen,
                          .dt = dt,
                          .rows = s->rows,
                          .cols = s->cols,
                          .esz = esz,
                          .raw_bytes = raw_bytes,
                          .nframes = o.frames,
                          .first = 0,
                          .step = 1,
                          .parsers = o.parsers,
                          .depth = r->depth,
                          .ring = ring,
                          .parse_us = parse_us,
                          .samples = samples,
                          .res = res,
                          .sync = sync,
                          .identical = 1};
            r->parsers = o.parsers;
            if (v == 4) {
                /* compute alone: one round of depth x 4 frames uploads each lane's frame (the
                 * ring comes back to the same slot, so every lane then sees the same frame
                 * again), after which the timed run decodes the device copies: decode +
                 * integrate (+ the small D2H of the profiles) per frame, no H2D */
                long nwarm = (long)faid_engine_depth(e) * NDISTINCT;
                double *ws = malloc(sizeof(double) * (size_t)nwarm * S_N);
                double *wp = calloc((size_t)nwarm, sizeof *wp);
                pipe_run pw = p;
                pw.nframes = nwarm;
                pw.samples = ws;
                pw.parse_us = wp;
                faid_engine_set_resident(e, 1);
                int bad = !ws || !wp || pipe_run_do(&pw) || !pw.identical;
                free(ws);
                free(wp);
                if (bad) {
                    fprintf(stderr, "faid-bench: compute warm-up: %s\n",
                            pw.err[0] ? pw.err : "results differ");
                    return 1;
                }
            }
            if (pipe_run_do(&p)) {
                fprintf(stderr, "faid-bench: %s: %s\n", r->name, p.err);
                return 1;
            }
            faid_engine_set_resident(e, 0);
            r->identical = p.identical;
            r->checked_2d = p.checked_2d;
            if (v == 4) {
                long hits = 0;
                for (long i = 0; i < o.frames; i++)
                    hits += samples[(size_t)i * S_N + S_H2D] == 0.0;
                r->resident = (double)hits / o.frames;
            }
            r->device_decode = p.device_decode;
            r->zero_copy = p.zero_copy;
            wall = p.wall_s;
        }
        if (wall < 0)
            wall = (double)(faid_now_ns() - w0) * 1e-9;
        r->fps = o.frames / wall;
        medians(samples, o.frames, r->med);
    }
    if (wrong)
        goto cleanup;
    const size_t dev_bytes = faid_engine_device_bytes(e);
    if (faid_engine_set_depth(e, 1, &d) || faid_engine_set_batch(e, 1, &d))
        fprintf(stderr, "faid-bench: %s\n", d.msg);
    const size_t dev_bytes1 = faid_engine_device_bytes(e);
    /* the PCIe floor of this frame size, same run */
    double h2d_ev_gbs = 0, h2d_wall_gbs = 0;
    if (strcmp(o.device, "ref") != 0 &&
        (in_list(o.variants, "pipelined") || in_list(o.variants, "compute")) &&
        pcie_floor(o.device, (size_t)mean_clen, 200, &h2d_ev_gbs, &h2d_wall_gbs, NULL) == 0)
        printf("PCIe floor: pinned H2D of %.0f bytes: %.1f GB/s (copy events), %.1f GB/s "
               "(back-to-back wall) -> %.0f frames/s\n",
               mean_clen, h2d_ev_gbs, h2d_wall_gbs, h2d_ev_gbs * 1e9 / mean_clen);
    const double floor_fps = h2d_ev_gbs > 0 ? h2d_ev_gbs * 1e9 / mean_clen : 0.0;

    /* table */
    printf("\nmedian per frame over %d frames, microseconds (device stages from OpenCL events;\n"
           "total = submit to collect; frames/s = frames / wall time of the whole run)\n",
           o.frames);
    printf("%-14s", "stage");
    for (int v = 0; v < nv; v++)
        printf(" %14s", vr[v].name);
    printf("\n");
    for (int st = 0; st < S_N; st++) {
        if (st >= S_F1 && st <= S_F6 && !peaks_on)
            continue;
        printf("%-14s", stage_names[st]);
        for (int v = 0; v < nv; v++)
            printf(" %14.1f", vr[v].med[st]);
        printf("\n");
    }
    printf("%-14s", "frames/s");
    for (int v = 0; v < nv; v++)
        printf(" %14.1f", vr[v].fps);
    printf("\n%-14s", "in flight");
    for (int v = 0; v < nv; v++)
        printf(" %14d", vr[v].depth);
    printf("\n%-14s", "batch");
    for (int v = 0; v < nv; v++)
        printf(" %14d", vr[v].batch);
    printf("\n%-14s", "table parsers");
    for (int v = 0; v < nv; v++)
        printf(" %14d", vr[v].parsers);
    printf("\n%-14s", "zero-copy H2D");
    for (int v = 0; v < nv; v++)
        printf(" %14s", vr[v].zero_copy ? "yes" : "no");
    printf("\n%-14s", "identical");
    for (int v = 0; v < nv; v++)
        printf(" %14s", vr[v].identical < 0 ? "-" : vr[v].identical ? "yes" : "NO");
    if (s->csr2d) {
        printf("\n%-14s", "cake compared");
        for (int v = 0; v < nv; v++)
            printf(" %14ld", vr[v].checked_2d);
    }
    printf("\n%-14s", "% PCIe floor");
    for (int v = 0; v < nv; v++) {
        if (floor_fps > 0 && (strncmp(vr[v].name, "pipelined", 9) == 0))
            printf(" %13.1f%%", 100.0 * vr[v].fps / floor_fps);
        else
            printf(" %14s", "-");
    }
    printf("\n%-14s", "resident");
    for (int v = 0; v < nv; v++)
        printf(" %14.2f", vr[v].resident);
    printf("\n%-14s", "GPU decode");
    for (int v = 0; v < nv; v++)
        printf(" %14s", vr[v].device_decode ? "yes" : "no");
    printf("\n%-14s", "workgroup 1D");
    for (int v = 0; v < nv; v++)
        printf(" %14zu", vr[v].wg1);
    printf("\n%-14s", "bins 1D / 2D");
    for (int v = 0; v < nv; v++) {
        char m[32];
        snprintf(m, sizeof m, "%s / %s", vr[v].rows1 ? "rows" : "wg",
                 vr[v].rows2 < 0 ? "-"
                 : vr[v].rows2   ? "rows"
                                 : "wg");
        printf(" %14s", m);
    }
    if (o.check) {
        printf("\n%-14s", "max rel. err");
        for (int v = 0; v < nv; v++)
            printf(" %14.2e", vr[v].checked ? vr[v].max_rel_err : NAN);
    }
    printf("\n");
    printf("device memory: %.1f MB at depth %d x batch %d, %.1f MB at depth 1\n",
           (double)dev_bytes / 1e6, o.depth, o.batch, (double)dev_bytes1 / 1e6);
    for (int v = 0; v < nv; v++)
        if (strcmp(vr[v].name, "compute") == 0)
            printf("compute alone (frames on the device, decode + integrate): %.1f us per frame "
                   "(%.0f frames/s; median device times decode %.1f + integrate %.1f us)\n",
                   1e6 / vr[v].fps, vr[v].fps, vr[v].med[S_DEC], vr[v].med[S_INT]);

    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "faid-bench: cannot write %s\n", o.json);
            return 1;
        }
        fprintf(f,
                "{\n \"device\": \"%s\",\n \"rows\": %d, \"cols\": %d, \"dtype\": \"%s\",\n"
                " \"npt\": %d, \"npt_azim\": %d, \"cake_arrays\": %d, \"split\": \"%s\", "
                "\"unit\": \"%s\",\n"
                " \"error_model\": \"%s\", \"frames\": %d,\n \"raw_bytes\": %zu, "
                "\"chunk_bytes_mean\": %.0f,\n \"setup_build_ms\": %.3f, \"nnz\": %lld,"
                " \"engine_init_ms\": %.3f,\n \"peaks\": \"%s\", \"peaks_ref_equal\": %d,"
                " \"bg_rel_err\": %.3e, \"num_peaks\": [%d, %d, %d, %d],\n"
                " \"kind\": \"%s\", \"device_bytes\": %zu, \"device_bytes_depth1\": %zu,"
                " \"h2d_event_gbs\": %.3f, \"h2d_wall_gbs\": %.3f, \"floor_fps\": %.1f,\n"
                " \"integrate_variant\": %d, \"result_hash\": \"%016llx\", \"peaks_hash\": "
                "\"%016llx\",\n \"variants\": [\n",
                faid_engine_device_name(e), s->rows, s->cols, faid_dtype_name(dt), s->csr->npt_rad,
                s->csr2d ? s->csr2d->npt_azim : 0, o.cake_arrays ? o.cake_arrays : 4,
                faid_split_name(cfg.split), faid_unit_name(cfg.unit),
                faid_error_model_name(cfg.error_model), o.frames, raw_bytes, mean_clen, setup_ms,
                (long long)s->csr->nnz, init_ms, faid_peak_algorithm_name(cfg.peaks.algorithm),
                peaks_ok, bg_err, sync[0] ? sync[0]->num_peaks : -1,
                sync[1] ? sync[1]->num_peaks : -1, sync[2] ? sync[2]->num_peaks : -1,
                sync[3] ? sync[3]->num_peaks : -1, o.kind, dev_bytes, dev_bytes1, h2d_ev_gbs,
                h2d_wall_gbs, floor_fps, faid_engine_integrate_variant(e),
                (unsigned long long)result_hash, (unsigned long long)(peaks_on ? pk_hash : 0));
        for (int v = 0; v < nv; v++) {
            fprintf(f,
                    "  {\"name\": \"%s\", \"fps\": %.3f, \"device_decode\": %d, "
                    "\"workgroup\": %zu, \"depth\": %d, \"zero_copy\": %d, "
                    "\"identical\": %d, \"parsers\": %d, \"batch\": %d",
                    vr[v].name, vr[v].fps, vr[v].device_decode, vr[v].wg1, vr[v].depth,
                    vr[v].zero_copy, vr[v].identical, vr[v].parsers, vr[v].batch);
            fprintf(f, ", \"resident\": %.3f, \"checked_2d\": %ld", vr[v].resident,
                    vr[v].checked_2d);
            for (int st = 0; st < S_N; st++)
                fprintf(f, ", \"%s\": %.3f", stage_keys[st], vr[v].med[st]);
            if (vr[v].checked)
                fprintf(f, ", \"max_rel_err\": %.3e", vr[v].max_rel_err);
            fprintf(f, "}%s\n", v + 1 < nv ? "," : "");
        }
        fprintf(f, " ]\n}\n");
        fclose(f);
    }

cleanup:
    free(samples);
    for (int t = 0; t < RING; t++)
        faid_block_table_free(&ring[t].tab);
    free(ring);
    free(parse_us);
    for (int k = 0; k < NDISTINCT; k++) {
        faid_engine_host_free(e, &pinned[k]);
        faid_result_destroy(&sync[k]);
    }
    faid_result_destroy(&res);
    for (int k = 0; k < NDISTINCT; k++)
        faid_result_destroy(&refk[k]);
    faid_engine_destroy(&e);
    for (int k = 0; k < NDISTINCT; k++) {
        free(raw[k]);
        free(comp[k]);
    }
    faid_setup_destroy(&s);
    return wrong;
}
