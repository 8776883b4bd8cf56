/* writer_bench: the files of record's write speed (`faid-bench --writer`, never a test; issue 15
 * point 7). In each directory given:
 *
 *  profiles  the series file (writer/faid_sfile.c) fed exactly as the daemon's writer thread
 *            feeds it: one start message, then --frames result messages of --npt bins (I, sigma,
 *            std, count; 64 distinct encoded bodies cycled), decoded and written in blocks of
 *            --block frames; profiles/s over open + appends + close + fsync, and the writer
 *            thread's CPU time per profile;
 *  hits      the hits file (writer/faid_nxmx.c): --hit-frames chunks of --hit-bytes bytes
 *            written as they arrive (direct chunk writes), each with --hit-peaks peaks in rows of
 *            --max-peaks (the CXI arrays), against a plain sequential write() of the same bytes
 *            in the same buffer size into a file of the same directory, in the same run. Each
 *            side is timed from before its file's creation to the end of its fsync: the plain
 *            side is open + write() per chunk + fsync + close; the hits side is faid_nxmx_open
 *            (create, layout, SWMR start, flush) + one faid_nxmx_append per chunk +
 *            faid_nxmx_close (final flush) + open + fsync + close. Unlinks (and a sync after
 *            each) are outside both clocks. A warm-up pair, then --rounds pairs, alternating which
 * side goes first; the median of the pairs' ratios is the figure.
 *
 *   faid-bench --writer [--frames N] [--npt N] [--block N] [--hit-frames N] [--hit-bytes B]
 *                       [--hit-peaks N] [--max-peaks N] [--rounds N] [--only hits]
 *                       [--dir DIR]...   (default: /dev/shm and .) */
#include "faid_nxmx.h"
#include "faid_proto.h"
#include "faid_proto_out.h"
#include "faid_sfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

#define NMSG 64

static int bench_profiles(const char *dir, int frames, int npt, int block)
{
    double *radial = malloc((size_t)npt * sizeof *radial);
    float *v = malloc((size_t)npt * 4 * sizeof *v);
    size_t cap = (size_t)npt * 64 + 65536;
    uint8_t *start = malloc(cap), *msgs = malloc(cap * NMSG);
    size_t lens[NMSG], slen;
    if (!radial || !v || !start || !msgs)
        return 1;
    for (int i = 0; i < npt; i++)
        radial[i] = 0.01 * (i + 1);
    faid_out_start so = {
        .software_version = "bench",
        .reason = "series",
        .series_id = 1,
        .series_uid = "bench",
        .nimages = frames,
        .setup_version = 1,
        .config_hash = "0",
        .dist = 0.1,
        .poni1 = 0.1,
        .poni2 = 0.1,
        .wavelength = 1e-10,
        .pixel1 = 75e-6,
        .pixel2 = 75e-6,
        .rows = 2167,
        .cols = 2070,
        .detector = "eiger_4m",
        .npt = npt,
        .unit = "q_nm^-1",
        .split = "full",
        .error_model = "poisson",
        .normalization_factor = 1,
        .mask_file = "",
        .dark_file = "",
        .flat_file = "",
        .radial = radial,
        .config_yaml = "",
        .input_protocol = "",
        .geometry_source = "configuration",
        .setup = "reused",
    };
    faid_mpw w;
    faid_mpw_init(&w, start, cap);
    faid_proto_write_start(&w, &so);
    if (faid_mpw_finish(&w, NULL))
        return 1;
    slen = w.len;
    srand(7);
    for (int m = 0; m < NMSG; m++) {
        for (int i = 0; i < 4 * npt; i++)
            v[i] = (float)(rand() % 100000) * 0.01f;
        const uint64_t n = (uint64_t)npt;
        const faid_out_array prof[] = {
            faid_out_f32(FAID_KEY_I, n, v),
            faid_out_f32(FAID_KEY_SIGMA, n, v + npt),
            faid_out_f32(FAID_KEY_STD, n, v + 2 * npt),
            faid_out_f32(FAID_KEY_COUNT, n, v + 3 * npt),
        };
        faid_out_result ro = {
            .series_id = 1,
            .series_uid = "bench",
            .frame_id = (uint64_t)m,
            .setup_version = 1,
            .outputs = prof,
            .noutputs = 4,
        };
        faid_mpw_init(&w, msgs + cap * m, cap);
        faid_proto_write_result(&w, &ro);
        if (faid_mpw_finish(&w, NULL))
            return 1;
        lens[m] = w.len;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/faid-writer-bench-%d.h5", dir, (int)getpid());
    unlink(path);
    faid_sfile_params p = {.path = path, .profiles = 1, .swmr = 1, .block_frames = block};
    faid_diag d = {0};
    faid_sfile *f = NULL;
    double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    int rc = faid_sfile_open(&f, &p, start, slen, &d);
    for (int i = 0; i < frames && !rc; i++)
        rc = faid_sfile_append(f, msgs + cap * (i % NMSG), lens[i % NMSG], &d);
    uint64_t bytes = f ? faid_sfile_bytes(f) : 0;
    if (!rc)
        rc = faid_sfile_close(&f, NULL, 0, "end", &d);
    double c1 = now_s(CLOCK_THREAD_CPUTIME_ID);
    if (!rc)
        fsync_path(path);
    double t1 = now_s(CLOCK_MONOTONIC);
    if (rc) {
        fprintf(stderr, "faid-bench --writer: %s\n", d.msg);
        faid_sfile_close(&f, NULL, 0, "error", &d);
    } else {
        bytes += 0;
        printf("profiles %-12s %d frames x %d bins, block %d: %.0f profiles/s (%.1f MB/s of "
               "data), writer CPU %.1f us/profile\n",
               dir, frames, npt, block, frames / (t1 - t0), 16.0 * npt * frames / (t1 - t0) / 1e6,
               (c1 - c0) * 1e6 / frames);
    }
    unlink(path);
    free(radial);
    free(v);
    free(start);
    free(msgs);
    return rc ? 1 : 0;
}

/* One timed side of the hits comparison, seconds from before the file's creation to the end of
 * its fsync. The file is unlinked, and the unlink synced, after the clock stops, never inside a
 * timed window: unlinking 800 MB on tmpfs costs as much as a fifth of writing them, and the
 * first version of this bench counted the plain file's unlink in the hits file's time (on a
 * disk, the next side's fsync would wait for the journal of the previous side's unlink). */
static double seq_side(const char *seq, const uint8_t *chunk, size_t len, int frames, double *cpu)
{
    double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    int fd = open(seq, O_WRONLY | O_CREAT | O_EXCL, 0644);
    for (int i = 0; i < frames && fd >= 0; i++)
        if (write(fd, chunk, len) != (ssize_t)len) {
            close(fd);
            fd = -1;
        }
    if (fd < 0 || fsync(fd) != 0 || close(fd) != 0) {
        fprintf(stderr, "faid-bench --writer: %s: sequential write failed\n", seq);
        unlink(seq);
        return -1;
    }
    double t1 = now_s(CLOCK_MONOTONIC);
    *cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    unlink(seq);
    sync();
    return t1 - t0;
}

static double hits_side(const faid_nxmx_params *p, const uint8_t *chunk, size_t len, int frames,
                        const faid_peak_list *pk, double *cpu)
{
    faid_diag d = {0};
    faid_nxmx *h = NULL;
    double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    int rc = faid_nxmx_open(&h, p, &d);
    for (int i = 0; i < frames && !rc; i++)
        rc = faid_nxmx_append(h, (uint64_t)i, chunk, len, pk, &d);
    if (!rc)
        rc = faid_nxmx_close(&h, &d);
    if (!rc)
        rc = fsync_path(p->path);
    double t1 = now_s(CLOCK_MONOTONIC);
    *cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    unlink(p->path);
    sync();
    if (rc) {
        fprintf(stderr, "faid-bench --writer: %s\n", d.msg[0] ? d.msg : "fsync failed");
        faid_nxmx_close(&h, &d);
        return -1;
    }
    return t1 - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    return n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int bench_hits(const char *dir, int frames, size_t bytes, int rounds, int max_peaks,
                      int npeaks)
{
    /* raw uint16 frames of `bytes` bytes (encoding none: the chunk is stored as it comes) */
    int cols = 1024, rows = (int)(bytes / 2 / (size_t)cols);
    size_t len = (size_t)rows * (size_t)cols * 2;
    uint8_t *chunk = malloc(len);
    float *pv = calloc((size_t)max_peaks * 6, sizeof(float));
    int32_t *pi = calloc((size_t)max_peaks * 2, sizeof(int32_t));
    double *ratio = calloc((size_t)rounds, sizeof(double));
    double *cratio = calloc((size_t)rounds, sizeof(double));
    if (!chunk || !pv || !pi || !ratio || !cratio || rows < 1)
        return 1;
    for (size_t i = 0; i < len; i++)
        chunk[i] = (uint8_t)(rand() >> 7);
    if (npeaks > max_peaks)
        npeaks = max_peaks;
    for (int i = 0; i < npeaks; i++) {
        pv[i] = (float)(rand() % cols);
        pv[max_peaks + i] = (float)(rand() % rows);
        for (int k = 2; k < 6; k++)
            pv[k * max_peaks + i] = (float)(rand() % 1000);
        pi[i] = 5;
    }
    faid_peak_list pk = {.n = npeaks,
                         .capacity = max_peaks,
                         .n_found = npeaks,
                         .x = pv,
                         .y = pv + max_peaks,
                         .intensity = pv + 2 * max_peaks,
                         .sigma = pv + 3 * max_peaks,
                         .snr = pv + 4 * max_peaks,
                         .max_pixel = pv + 5 * max_peaks,
                         .npix = pi,
                         .index = pi + max_peaks};
    char path[4096], seq[4096];
    snprintf(path, sizeof path, "%s/faid-writer-bench-%d_hits.h5", dir, (int)getpid());
    snprintf(seq, sizeof seq, "%s/faid-writer-bench-%d.seq", dir, (int)getpid());
    unlink(path);
    unlink(seq);
    faid_geometry g = {0};
    g.rows = rows;
    g.cols = cols;
    g.pixel1 = g.pixel2 = 75e-6;
    g.dist = 0.1;
    g.wavelength = 1e-10;
    g.orientation = 3;
    faid_nxmx_params p = {.path = path,
                          .geom = &g,
                          .dtype = FAID_DT_U16,
                          .encoding = FAID_ENC_NONE,
                          .max_peaks = max_peaks,
                          .swmr = 1};
    /* A warm-up pair (page cache, file system), then `rounds` pairs, the side that goes first
     * alternating; each pair's ratio is printed and their median is the figure. */
    int rc = 0;
    double mb = (double)len * frames / 1e6;
    printf("hits     %-12s %d chunks x %zu bytes, %d of %d peaks each; hits file vs sequential "
           "write, MB/s:",
           dir, frames, len, npeaks, max_peaks);
    for (int r = -1; r < rounds && !rc; r++) {
        double ts, th, cs = 0, ch = 0;
        if (r & 1) {
            th = hits_side(&p, chunk, len, frames, &pk, &ch);
            ts = seq_side(seq, chunk, len, frames, &cs);
        } else {
            ts = seq_side(seq, chunk, len, frames, &cs);
            th = hits_side(&p, chunk, len, frames, &pk, &ch);
        }
        if (ts <= 0 || th <= 0) {
            rc = 1;
            break;
        }
        if (r >= 0) {
            ratio[r] = ts / th;
            cratio[r] = cs / ch;
            printf(" %.0f/%.0f", mb / th, mb / ts);
        }
    }
    if (!rc) {
        /* the CPU time of the writing thread (user + system: on tmpfs the write is the kernel's
         * copy) is the steadier comparison on a shared machine; the wall-clock one is the target */
        qsort(ratio, (size_t)rounds, sizeof(double), cmp_double);
        qsort(cratio, (size_t)rounds, sizeof(double), cmp_double);
        printf("; ratio median %.0f %% (min %.0f %%, max %.0f %%), CPU time ratio median %.0f %%\n",
               100.0 * median(ratio, rounds), 100.0 * ratio[0], 100.0 * ratio[rounds - 1],
               100.0 * median(cratio, rounds));
    } else {
        printf("\n");
    }
    free(chunk);
    free(pv);
    free(pi);
    free(ratio);
    free(cratio);
    return rc;
}

int faid_writer_bench_main(int argc, char **argv)
{
    int frames = 50000, npt = 1000, block = 64, hit_frames = 200, rounds = 5, max_peaks = 2048;
    int hit_peaks = 30, profiles = 1;
    size_t hit_bytes = (size_t)4 << 20;
    const char *dirs[16];
    int ndirs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--writer") == 0)
            continue;
        if (!v) {
            fprintf(stderr, "faid-bench --writer: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--frames") == 0)
            frames = atoi(v);
        else if (strcmp(a, "--npt") == 0)
            npt = atoi(v);
        else if (strcmp(a, "--block") == 0)
            block = atoi(v);
        else if (strcmp(a, "--hit-frames") == 0)
            hit_frames = atoi(v);
        else if (strcmp(a, "--hit-bytes") == 0)
            hit_bytes = (size_t)atoll(v);
        else if (strcmp(a, "--rounds") == 0)
            rounds = atoi(v);
        else if (strcmp(a, "--max-peaks") == 0)
            max_peaks = atoi(v);
        else if (strcmp(a, "--hit-peaks") == 0)
            hit_peaks = atoi(v);
        else if (strcmp(a, "--only") == 0 && strcmp(v, "hits") == 0)
            profiles = 0;
        else if (strcmp(a, "--dir") == 0 && ndirs < 16)
            dirs[ndirs++] = v;
        else {
            fprintf(stderr, "faid-bench --writer: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (frames < 1 || npt < 1 || block < 1 || hit_frames < 1 || hit_bytes < 2048 || rounds < 1 ||
        max_peaks < 1 || hit_peaks < 0) {
        fprintf(stderr, "faid-bench --writer: counts must be positive\n");
        return 2;
    }
    if (!ndirs) {
        dirs[ndirs++] = "/dev/shm";
        dirs[ndirs++] = ".";
    }
    int rc = 0;
    for (int k = 0; k < ndirs; k++) {
        if (profiles)
            rc |= bench_profiles(dirs[k], frames, npt, block);
        rc |= bench_hits(dirs[k], hit_frames, hit_bytes, rounds, max_peaks, hit_peaks);
    }
    return rc;
}
