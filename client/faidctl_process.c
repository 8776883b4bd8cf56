/* faidctl process: reduces frames from files with the daemon's code path (faid_config ->
 * faid_setup -> faid_engine), for checking a configuration offline.
 *
 *   faidctl process [-c CONFIG.yaml] [-o OUTDIR] [--device D] [--set KEY=VALUE]... INPUT...
 *   faidctl process --synthetic N [--dtype T] [-o OUTDIR] ...
 *   faidctl process --dump-config[=plain|annotated|markdown] [-c CONFIG.yaml]
 *
 * INPUT is a .npy array of H x W or N x H x W frames (uint8/16/32, int8/16/32, float32), or one
 * compressed chunk (.bslz4 = bitshuffle-LZ4 as HDF5 filter 32008 writes it, .lz4 = HDF5-LZ4
 * framing) with --dtype (and --shape, default: the detector's). Each frame gives
 * OUTDIR/<stem>_<frame, 5 digits>.dat (columns radial I sigma std count) and, with a cake,
 * <stem>_<frame>_2d_{I,sigma,std,count}.npy of shape (npt_azim, npt_rad) plus
 * <stem>_2d_radial.npy and <stem>_2d_azimuthal.npy, and with peaks.algorithm not none
 * <stem>_<frame>.peaks (faid_peaks_write: parameters, num_peaks, is_hit, one line per peak). Errors
 * name the file, key or frame; the exit status is 0 only when every frame was reduced.
 * With writer.directory set, each input is also a series (its stem the series_unique_id) written
 * into <writer.directory>/<stem>.h5 by writer/faid_sfile.c from the start, result and end
 * messages the daemon would publish for it, encoded with the daemon's encoders: the same code
 * path as the daemon's writer, so the datasets are equal. */
#include "faidctl.h"

#include "faid_outfill.h"
#include "faid_client.h"
#include "faid_config.h"
#include "faid_engine.h"
#include "faid_file.h"
#include "faid_log.h"
#include "faid_npy.h"
#include "faid_proto_out.h"
#include "faid_setup.h"
#include "faid_sfile.h"
#include "faid_synth.h"
#include "faid_whits.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SETS 64

typedef struct opts {
    const char *config;
    const char *outdir;
    const char *device;
    const char *dtype;
    const char *encoding;
    int shape[2];
    int synthetic;
    const char *dump;
    const char *sets[MAX_SETS];
    int nsets;
    int quiet;
    char **inputs;
    int ninputs;
} opts;

typedef struct run {
    const opts *o;
    faid_setup *setup;
    faid_engine *engine;
    faid_result *result;
    const char *device_name;
    long frames_ok, frames_bad, frames_total, frames_done;
    int64_t t0, last_progress;
    char first_out[FAID_PATH_MAX + 300];
    char peaks_params[4096]; /* .peaks header lines (peaks.algorithm not none) */
    /* writer.directory set: each input is a series written as the daemon writes it (writer/) */
    faid_sfile *sf;
    faid_nxmx *hits;    /* writer.hits with peaks: the hit frames as read, opened at the first */
    faid_peak_list *pk; /* the peaks of the hit, read back from its result message */
    int hits_failed;
    uint8_t *msg; /* the message being encoded for it */
    size_t msg_cap;
    uint64_t series_id;
    char *config_yaml;
    long files_written, write_errors;
} run;

static void usage(FILE *f)
{
    fprintf(
        f, "usage: faidctl process [-c CONFIG.yaml] [-o OUTDIR] [--device D] [--set KEY=VALUE]...\n"
           "                       [--shape H,W] [--dtype T] [--encoding E] INPUT...\n"
           "       faidctl process --synthetic N [--dtype T] [-c CONFIG.yaml] [-o OUTDIR]\n"
           "       faidctl process --dump-config[=plain|annotated|markdown] [-c CONFIG.yaml]\n"
           "\n"
           "Reduces frames with the daemon's code path and writes one OUTDIR/<stem>_<frame>.dat\n"
           "per frame (columns: radial I sigma std count), plus .npy files for the 2D cake\n"
           "and, with peaks.algorithm set, OUTDIR/<stem>_<frame>.peaks (x y intensity sigma\n"
           "snr npix per peak). With writer.directory set (in the configuration, or\n"
           "--set writer.directory=DIR), each input is also one series file DIR/<stem>.h5,\n"
           "written by the daemon's writer from the same messages (docs/output-files.md).\n"
           "\n"
           "  -c, --config FILE   YAML configuration (default: the embedded EIGER 4M default)\n"
           "  -o, --out DIR       output folder, created if needed (default: .)\n"
           "  -d, --device D      auto (first GPU, else the CPU OpenCL device), gpu, cpu, ref\n"
           "                      (plain C reference) or an index from `faidctl devices`\n"
           "  --set KEY=VALUE     override one option, e.g. --set integration.npt=500\n"
           "  --shape H,W         frame shape of compressed chunks (default: the detector's)\n"
           "  --dtype T           element type of compressed chunks (uint8, uint16, uint32,\n"
           "                      int8, int16, int32, float32); of synthetic frames (uint32)\n"
           "  --encoding E        bslz4, lz4 or lz4-raw (default: from the file extension)\n"
           "  --synthetic N       generate N frames for the configured detector, save them as\n"
           "                      OUTDIR/synthetic.npy and reduce them\n"
           "  --dump-config[=S]   print the effective configuration (S = annotated: with help;\n"
           "                      markdown: the option reference table) and exit\n"
           "  -q, --quiet         no progress or summary on stderr\n"
           "\n"
           "INPUT: .npy (H x W or N x H x W), or .bslz4 / .lz4 chunk files (one frame each).\n");
}

static const char *stem_of(const char *path, char *out, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, cap, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = '\0';
    return out;
}

static const char *ext_of(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    return dot ? dot + 1 : "";
}

static int mkdirs(const char *dir, faid_diag *d)
{
    char buf[FAID_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return faid_fail(d, FAID_EINVAL, "%s: path too long", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return faid_fail(d, FAID_EIO, "%s: cannot create: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return faid_fail(d, FAID_EIO, "%s: cannot create: %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return faid_fail(d, FAID_EIO, "%s: not a folder", buf);
    return 0;
}

static int write_dat(run *r, const char *path, const char *input, const char *stem, long frame)
{
    const faid_profile *p = r->result->p1d;
    const faid_setup *s = r->setup;
    size_t n = (size_t)p->nbins;
    double *cols = malloc(4 * n * sizeof *cols);
    if (!cols) {
        fprintf(stderr, "faidctl process: %s: out of memory\n", path);
        return FAID_ENOMEM;
    }
    for (size_t b = 0; b < n; b++) {
        cols[b] = p->I[b];
        cols[n + b] = p->sigma[b];
        cols[2 * n + b] = p->std[b];
        cols[3 * n + b] = p->count[b];
    }
    char extra[3 * FAID_PATH_MAX];
    snprintf(extra, sizeof extra,
             "input: %s\ndevice: %s\nconfig: %s\nnpt: %d  split: %s  "
             "error_model: %s",
             input, r->device_name, s->cfg.source[0] ? s->cfg.source : "embedded default",
             s->cfg.npt, faid_split_name(s->cfg.split), faid_error_model_name(s->cfg.error_model));
    faid_dat_meta meta = {
        .unit = faid_unit_name(s->cfg.unit),
        .software_version = FAID_VERSION,
        .config_hash = s->config_hash,
        .series = stem,
        .has_frame_id = 1,
        .frame_id = (uint64_t)frame,
        .has_setup_version = 1,
        .setup_version = s->version,
        .extra = extra,
    };
    faid_diag d = {0};
    int rc = faid_dat_write(path, &meta, s->csr->rad_centers, cols, cols + n, cols + 2 * n,
                            cols + 3 * n, n, &d);
    free(cols);
    if (rc)
        fprintf(stderr, "faidctl process: %s\n", d.msg);
    return rc;
}

/* The cake as (npt_azim, npt_rad) arrays: the engine's bin is i_rad * npt_azim + i_azim. */
static int write_2d(run *r, const char *stem, long frame, faid_diag *d)
{
    const faid_profile *p = r->result->p2d;
    size_t nr = (size_t)p->nrad, na = (size_t)p->nazim;
    float *t = malloc(nr * na * sizeof *t);
    if (!t)
        return faid_fail(d, FAID_ENOMEM, "out of memory for the 2D result");
    const float *src[4] = {p->I, p->sigma, p->std, p->count};
    const char *name[4] = {"I", "sigma", "std", "count"};
    size_t shape[2] = {na, nr};
    int rc = 0;
    for (int k = 0; k < 4 && !rc; k++) {
        for (size_t ir = 0; ir < nr; ir++)
            for (size_t ia = 0; ia < na; ia++)
                t[ia * nr + ir] = src[k][ir * na + ia];
        char path[FAID_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s_%05ld_2d_%s.npy", r->o->outdir, stem, frame, name[k]);
        rc = faid_npy_write(path, FAID_DT_F32, 2, shape, t, d);
    }
    free(t);
    return rc;
}

static int write_2d_axes(run *r, const char *stem, faid_diag *d)
{
    const faid_csr *c = r->setup->csr2d;
    char path[FAID_PATH_MAX + 300];
    size_t n = (size_t)c->npt_rad;
    snprintf(path, sizeof path, "%s/%s_2d_radial.npy", r->o->outdir, stem);
    int rc = faid_npy_write(path, FAID_DT_F64, 1, &n, c->rad_centers, d);
    if (rc)
        return rc;
    n = (size_t)c->npt_azim;
    snprintf(path, sizeof path, "%s/%s_2d_azimuthal.npy", r->o->outdir, stem);
    return faid_npy_write(path, FAID_DT_F64, 1, &n, c->azim_centers, d);
}

/* The peak parameters in force as .peaks header lines, in the form `faidctl sub --out` writes
 * them from the start message (faid_peaks_param_line). */
static void peaks_params_text(run *r)
{
    size_t n;
    const faid_option *t = faid_config_options(&n);
    r->peaks_params[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(t[i].name, "peaks.", 6) != 0 || !faid_peak_param_echoed(t[i].name))
            continue;
        int is_num;
        double num;
        const char *str;
        int null = faid_config_value(&r->setup->cfg, &t[i], &is_num, &num, &str);
        faid_peaks_param_line(r->peaks_params, sizeof r->peaks_params, t[i].name + 6,
                              !null && is_num, num, null ? NULL : str);
    }
}

static int write_peaks(run *r, const char *stem, long frame, faid_diag *d)
{
    const faid_result *res = r->result;
    const faid_peak_list *l = res->peaks;
    size_t n = (size_t)l->n;
    double *c = malloc((6 * n + 1) * sizeof *c);
    if (!c)
        return faid_fail(d, FAID_ENOMEM, "out of memory for the peak list");
    for (size_t i = 0; i < n; i++) {
        c[i] = l->x[i];
        c[n + i] = l->y[i];
        c[2 * n + i] = l->intensity[i];
        c[3 * n + i] = l->sigma[i];
        c[4 * n + i] = l->snr[i];
        c[5 * n + i] = l->npix[i];
    }
    char path[FAID_PATH_MAX + 300];
    faid_peaks_meta meta = {
        .algorithm = faid_peak_algorithm_name(r->setup->cfg.peaks.algorithm),
        .params = r->peaks_params,
        .num_peaks = (uint64_t)(res->num_peaks > 0 ? res->num_peaks : 0),
        .is_hit = res->is_hit,
    };
    int rc = faid_peaks_path(path, sizeof path, r->o->outdir, stem, (uint64_t)frame, d);
    if (!rc)
        rc = faid_peaks_write(path, &meta, n, c, c + n, c + 2 * n, c + 3 * n, c + 4 * n, c + 5 * n,
                              d);
    free(c);
    return rc;
}

/* ---- the series file (writer.directory): the messages the daemon would publish, encoded with
 * its encoders, fed to the same writer (writer/faid_sfile.h) ---------------------------------- */

/* Encodes one message with enc into r->msg, growing it until it fits; its length, 0 on failure. */
typedef size_t (*encode_fn)(faid_mpw *w, const void *what);

static size_t encode(run *r, encode_fn enc, const void *what)
{
    for (;;) {
        faid_mpw w;
        faid_mpw_init(&w, r->msg, r->msg_cap);
        enc(&w, what);
        if (r->msg && faid_mpw_finish(&w, NULL) == 0)
            return w.len;
        size_t cap = r->msg_cap ? 2 * r->msg_cap : 1 << 16;
        if (cap > ((size_t)1 << 31))
            return 0;
        uint8_t *b = realloc(r->msg, cap);
        if (!b)
            return 0;
        r->msg = b;
        r->msg_cap = cap;
    }
}

static size_t enc_start(faid_mpw *w, const void *o)
{
    return faid_proto_write_start(w, o);
}

static size_t enc_result(faid_mpw *w, const void *o)
{
    return faid_proto_write_result(w, o);
}

static size_t enc_end(faid_mpw *w, const void *o)
{
    return faid_proto_write_end(w, o);
}

/* Opens the series file of one input (its stem names the series, as a series_unique_id). */
static int series_open(run *r, const char *stem)
{
    const faid_setup *su = r->setup;
    const faid_config *c = &su->cfg;
    r->series_id++;
    const char *devices[1] = {r->device_name};
    faid_out_start o = {
        .software_version = FAID_VERSION,
        .reason = "series",
        .series_id = r->series_id,
        .series_uid = stem,
        .nimages = -1,
        .setup_version = su->version,
        .devices = devices,
        .ndevices = 1,
        .config_yaml = r->config_yaml ? r->config_yaml : "",
        .input_protocol = "",
        .geometry_source = "configuration",
        .setup = "reused",
    };
    faid_out_start_setup(&o, su);
    size_t len = encode(r, enc_start, &o);
    faid_diag d = {0};
    if (!len) {
        fprintf(stderr, "faidctl process: %s: out of memory for the start message\n", stem);
        return FAID_ENOMEM;
    }
    faid_sfile_params p = {
        .profiles = c->writer_profiles,
        .peaks = c->writer_peaks,
        .cake = c->writer_cake,
        .swmr = 0,
        .block_frames = c->writer_block_frames,
    };
    char path[FAID_PATH_MAX + 300];
    int rc = 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        rc = faid_writer_file_name(path, sizeof path, c->writer_directory, stem, strlen(stem),
                                   r->series_id, "", attempt, &d);
        if (rc)
            break;
        struct stat st;
        if (lstat(path, &st) == 0) {
            rc = faid_fail(&d, FAID_EIO, "%s: exists", path);
            continue;
        }
        p.path = path;
        rc = faid_sfile_open(&r->sf, &p, r->msg, len, &d);
        break;
    }
    if (rc) {
        fprintf(stderr, "faidctl process: writer.directory: %s\n", d.msg);
        r->write_errors++;
    }
    return rc;
}

/* writer.hits: a hit frame as it was read (raw .npy pixels, or the chunk file's bytes) with the
 * peaks of its result message, into <stem>_hits.h5: the daemon's writer does the same with the
 * chunks as they arrived. */
static void series_hit(run *r, const char *stem, const faid_frame *fr, size_t len)
{
    const faid_setup *su = r->setup;
    if (!su->cfg.writer_hits || !su->csr_bg || r->hits_failed || !r->result->is_hit)
        return;
    faid_diag d = {0};
    uint64_t fid = 0;
    int hit = 0;
    if (!r->pk)
        r->pk = faid_peak_list_new(su->cfg.peaks.max_num_peaks);
    if (!r->pk || faid_whits_peaks(r->msg, len, r->pk, &fid, &hit, &d) != 0)
        goto fail;
    if (!r->hits) {
        char path[FAID_PATH_MAX + 320];
        faid_diag gd = {0};
        if (faid_whits_path(path, sizeof path, faid_sfile_path(r->sf), &d) ||
            faid_whits_open(&r->hits, path, su, stem, fr->dtype, fr->encoding, 0, &gd, &d))
            goto fail;
        if (gd.code)
            fprintf(stderr, "faidctl process: %s\n", gd.msg);
    }
    if (faid_nxmx_append(r->hits, fid, fr->data, fr->len, r->pk, &d) == 0)
        return;
fail:
    fprintf(stderr, "faidctl process: writer.hits: %s\n", d.msg[0] ? d.msg : "out of memory");
    r->write_errors++;
    r->hits_failed = 1;
    faid_nxmx_close(&r->hits, &d);
}

static void series_result(run *r, const char *stem, uint64_t frame_id, const faid_frame *fr)
{
    if (!r->sf)
        return;
    const faid_result *res = r->result;
    faid_out_result o = {
        .series_id = r->series_id,
        .frame_id = frame_id,
        .setup_version = r->setup->version,
    };
    faid_out_time times[32]; /* the engine's times with a result key: 6 today */
    faid_out_result_outputs(&o, res);
    faid_out_result_times(&o, times, sizeof times / sizeof times[0], res);
    size_t len = encode(r, enc_result, &o);
    faid_diag d = {0};
    if (!len || faid_sfile_append(r->sf, r->msg, len, &d)) {
        fprintf(stderr, "faidctl process: %s\n", len ? d.msg : "out of memory for a result");
        r->write_errors++;
        faid_nxmx_close(&r->hits, &d);
        faid_sfile_close(&r->sf, NULL, 0, "error", &d);
        return;
    }
    series_hit(r, stem, fr, len);
}

static void series_close(run *r, const char *stem)
{
    if (!r->sf)
        return;
    faid_out_end e = {
        .series_id = r->series_id,
        .series_uid = stem,
        .reason = "end",
        .frames_received = faid_sfile_frames(r->sf),
        .frames_processed = faid_sfile_frames(r->sf),
        .setup_version = r->setup->version,
    };
    size_t len = encode(r, enc_end, &e);
    faid_diag hd = {0};
    if (faid_nxmx_close(&r->hits, &hd)) {
        fprintf(stderr, "faidctl process: writer.hits: %s\n", hd.msg);
        r->write_errors++;
    }
    r->hits_failed = 0;
    char path[FAID_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s", faid_sfile_path(r->sf));
    faid_diag d = {0};
    if (faid_sfile_close(&r->sf, len ? r->msg : NULL, len, "end", &d)) {
        fprintf(stderr, "faidctl process: %s\n", d.msg);
        r->write_errors++;
        return;
    }
    r->files_written++;
    if (!r->o->quiet)
        fprintf(stderr, "faidctl process: series file %s\n", path);
}

static void progress(run *r, const char *input)
{
    if (r->o->quiet || r->frames_total < 20)
        return;
    int64_t now = faid_now_ns();
    if (now - r->last_progress < 1000000000ll && r->frames_done < r->frames_total)
        return;
    r->last_progress = now;
    double s = (double)(now - r->t0) * 1e-9;
    fprintf(stderr, "faidctl process: %s: %ld/%ld frames, %.1f frames/s\n", input, r->frames_done,
            r->frames_total, s > 0 ? (double)r->frames_done / s : 0.0);
}

/* Reduces one frame and writes its outputs; errors are reported and counted, never fatal. */
static void do_frame(run *r, const char *input, const char *stem, long idx, const faid_frame *f)
{
    faid_diag d = {0};
    int rc = faid_engine_process(r->engine, f, r->result, &d);
    r->frames_done++;
    if (rc) {
        fprintf(stderr, "faidctl process: %s: frame %ld: %s\n", input, idx,
                d.msg[0] ? d.msg : faid_strerror(rc));
        r->frames_bad++;
        return;
    }
    char path[FAID_PATH_MAX + 300];
    if (faid_dat_path(path, sizeof path, r->o->outdir, stem, (uint64_t)idx, &d) != 0 ||
        write_dat(r, path, input, stem, idx) != 0 ||
        (r->result->p2d && write_2d(r, stem, idx, &d) != 0) ||
        (r->result->peaks && write_peaks(r, stem, idx, &d) != 0)) {
        if (d.msg[0])
            fprintf(stderr, "faidctl process: %s: frame %ld: %s\n", input, idx, d.msg);
        r->frames_bad++;
        return;
    }
    if (!r->first_out[0])
        snprintf(r->first_out, sizeof r->first_out, "%s", path);
    series_result(r, stem, (uint64_t)idx, f);
    r->frames_ok++;
    progress(r, input);
}

static int check_frame_dtype(const char *input, faid_dtype t)
{
    if (faid_dtype_is_frame(t))
        return 0;
    fprintf(stderr,
            "faidctl process: %s: unsupported dtype %s (frames must be uint8, uint16, uint32, "
            "int8, int16, int32 or float32)\n",
            input, t == FAID_DT_INVALID ? "?" : faid_dtype_name(t));
    return FAID_EDTYPE;
}

static int process_array(run *r, const char *input, const char *stem, const faid_array *a)
{
    if (check_frame_dtype(input, a->dtype))
        return FAID_EDTYPE;
    if (a->ndim != 2 && a->ndim != 3) {
        fprintf(stderr,
                "faidctl process: %s: expected a 2-D (H x W) or 3-D (N x H x W) array, "
                "got %d dimension(s)\n",
                input, a->ndim);
        return FAID_ESHAPE;
    }
    size_t h = a->shape[a->ndim - 2], w = a->shape[a->ndim - 1];
    size_t n = a->ndim == 3 ? a->shape[0] : 1;
    if (h != (size_t)r->setup->rows || w != (size_t)r->setup->cols) {
        fprintf(stderr,
                "faidctl process: %s: frame shape %zu x %zu does not match the detector %d x %d "
                "(detector.preset / detector.shape in %s)\n",
                input, h, w, r->setup->rows, r->setup->cols,
                r->setup->cfg.source[0] ? r->setup->cfg.source : "the embedded default");
        return FAID_ESHAPE;
    }
    if (r->setup->csr2d) {
        faid_diag d = {0};
        if (write_2d_axes(r, stem, &d)) {
            fprintf(stderr, "faidctl process: %s\n", d.msg);
            return d.code;
        }
    }
    size_t fbytes = h * w * faid_dtype_size(a->dtype);
    if (r->setup->cfg.writer_directory[0])
        series_open(r, stem);
    for (size_t i = 0; i < n; i++) {
        faid_frame f = {
            (const char *)a->data + i * fbytes, fbytes, FAID_ENC_NONE, a->dtype, (int)h, (int)w};
        do_frame(r, input, stem, (long)i, &f);
    }
    series_close(r, stem);
    return 0;
}

static int process_input(run *r, const char *input)
{
    char stem[256];
    stem_of(input, stem, sizeof stem);
    const char *ext = ext_of(input);
    faid_diag d = {0};
    if (strcmp(ext, "npy") == 0) {
        faid_array a = {0};
        if (faid_npy_read(input, &a, &d)) {
            fprintf(stderr, "faidctl process: %s\n", d.msg);
            return d.code;
        }
        int rc = process_array(r, input, stem, &a);
        faid_array_free(&a);
        return rc;
    }
    faid_encoding enc;
    const char *encname = r->o->encoding              ? r->o->encoding
                          : strcmp(ext, "bslz4") == 0 ? "bslz4"
                          : strcmp(ext, "lz4") == 0   ? "lz4"
                                                      : NULL;
    if (!encname) {
        fprintf(stderr,
                "faidctl process: %s: unknown input type '.%s' (expected .npy, .bslz4 or "
                ".lz4, or give --encoding)\n",
                input, ext);
        return FAID_EFORMAT;
    }
    if (faid_encoding_parse(encname, &enc) != 0) {
        fprintf(stderr, "faidctl process: --encoding %s: expected bslz4, lz4 or lz4-raw\n",
                encname);
        return FAID_EINVAL;
    }
    if (!r->o->dtype) {
        fprintf(stderr,
                "faidctl process: %s: a compressed chunk needs --dtype (e.g. --dtype "
                "uint32)\n",
                input);
        return FAID_EINVAL;
    }
    faid_dtype t = faid_dtype_parse(r->o->dtype);
    if (check_frame_dtype(input, t))
        return FAID_EDTYPE;
    int h = r->o->shape[0] ? r->o->shape[0] : r->setup->rows;
    int w = r->o->shape[1] ? r->o->shape[1] : r->setup->cols;
    if (h != r->setup->rows || w != r->setup->cols) {
        fprintf(stderr, "faidctl process: %s: --shape %d,%d does not match the detector %d x %d\n",
                input, h, w, r->setup->rows, r->setup->cols);
        return FAID_ESHAPE;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (faid_file_read(input, &buf, &len, &d)) {
        fprintf(stderr, "faidctl process: %s\n", d.msg);
        return d.code;
    }
    if (r->setup->csr2d && write_2d_axes(r, stem, &d)) {
        fprintf(stderr, "faidctl process: %s\n", d.msg);
        free(buf);
        return d.code;
    }
    faid_frame f = {buf, len, enc, t, h, w};
    if (r->setup->cfg.writer_directory[0])
        series_open(r, stem);
    do_frame(r, input, stem, 0, &f);
    series_close(r, stem);
    free(buf);
    return 0;
}

/* Generates n frames, saves them as OUTDIR/synthetic.npy and returns that path. */
static int make_synthetic(run *r, int n, char *path, size_t cap)
{
    faid_diag d = {0};
    faid_dtype t = faid_dtype_parse(r->o->dtype ? r->o->dtype : "uint32");
    if (check_frame_dtype("--synthetic", t))
        return FAID_EDTYPE;
    faid_synth_params p;
    faid_synth_default_params(&p);
    faid_synth *s = faid_synth_new(&r->setup->geom, r->setup->mask, &p, &d);
    if (!s) {
        fprintf(stderr, "faidctl process: %s\n", d.msg);
        return d.code ? d.code : FAID_ENOMEM;
    }
    size_t fbytes = r->setup->npix * faid_dtype_size(t);
    uint8_t *buf = malloc(fbytes * (size_t)n);
    int rc = buf ? 0 : faid_fail(&d, FAID_ENOMEM, "out of memory for %d synthetic frames", n);
    for (int i = 0; i < n && !rc; i++)
        rc = faid_synth_frame(s, (uint64_t)i, t, buf + (size_t)i * fbytes, fbytes, &d);
    faid_synth_destroy(&s);
    if (!rc) {
        snprintf(path, cap, "%s/synthetic.npy", r->o->outdir);
        size_t shape[3] = {(size_t)n, (size_t)r->setup->rows, (size_t)r->setup->cols};
        rc = n == 1 ? faid_npy_write(path, t, 2, shape + 1, buf, &d)
                    : faid_npy_write(path, t, 3, shape, buf, &d);
    }
    free(buf);
    if (rc)
        fprintf(stderr, "faidctl process: --synthetic: %s\n", d.msg);
    else if (!r->o->quiet)
        fprintf(stderr, "faidctl process: wrote %d synthetic %s frame(s) of %d x %d to %s\n", n,
                faid_dtype_name(t), r->setup->rows, r->setup->cols, path);
    return rc;
}

/* Counts the frames of every input cheaply (for progress only); unknown = 1. */
static long count_frames(const opts *o)
{
    long total = 0;
    for (int i = 0; i < o->ninputs; i++) {
        long n = 1;
        FILE *f = strcmp(ext_of(o->inputs[i]), "npy") == 0 ? fopen(o->inputs[i], "rb") : NULL;
        if (f) {
            char hdr[512] = {0};
            size_t got = fread(hdr, 1, sizeof hdr - 1, f);
            fclose(f);
            hdr[got < sizeof hdr ? got : sizeof hdr - 1] = '\0';
            for (size_t k = 10; k < got; k++)
                if (hdr[k] == '\0')
                    hdr[k] = ' ';
            const char *s = strstr(hdr + (got > 10 ? 10 : 0), "'shape': (");
            if (s) {
                long a = 0, b = 0, c = 0;
                if (sscanf(s + 10, "%ld, %ld, %ld", &a, &b, &c) == 3 && a > 0)
                    n = a;
            }
        }
        total += n;
    }
    return total;
}

static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->outdir = ".";
    o->device = NULL;
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    if (!o->inputs)
        return 1;
    enum { O_DTYPE = 256, O_ENCODING, O_SHAPE, O_SET, O_SYNTHETIC, O_GENERATE, O_DUMP };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"config", required_argument, NULL, 'c'},
        {"out", required_argument, NULL, 'o'},
        {"device", required_argument, NULL, 'd'},
        {"quiet", no_argument, NULL, 'q'},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"encoding", required_argument, NULL, O_ENCODING},
        {"shape", required_argument, NULL, O_SHAPE},
        {"set", required_argument, NULL, O_SET},
        {"synthetic", required_argument, NULL, O_SYNTHETIC},
        {"generate", required_argument, NULL, O_GENERATE},
        {"dump-config", optional_argument, NULL, O_DUMP},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        const char *next = optarg;
        char *end;
        switch (c) {
        case 'h':
            usage(stdout);
            return -1;
        case 'c':
            o->config = next;
            break;
        case 'o':
            o->outdir = next;
            break;
        case 'd':
            o->device = next;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case O_DTYPE:
            o->dtype = next;
            break;
        case O_ENCODING:
            o->encoding = next;
            break;
        case O_SHAPE: {
            long h = strtol(next, &end, 10), w = 0;
            if (*end == ',' || *end == 'x')
                w = strtol(end + 1, &end, 10);
            if (*end || h <= 0 || w <= 0 || h > 65536 || w > 65536) {
                fprintf(stderr, "faidctl process: --shape %s: expected H,W\n", next);
                return 2;
            }
            o->shape[0] = (int)h;
            o->shape[1] = (int)w;
            break;
        }
        case O_SET:
            if (o->nsets == MAX_SETS || !strchr(next, '=')) {
                fprintf(stderr, "faidctl process: --set %s: expected KEY=VALUE\n", next);
                return 2;
            }
            o->sets[o->nsets++] = next;
            break;
        case O_SYNTHETIC:
        case O_GENERATE: {
            long n = strtol(next, &end, 10);
            if (*end || n < 1 || n > 100000) {
                fprintf(stderr, "faidctl process: --%s %s: expected a frame count\n",
                        c == O_SYNTHETIC ? "synthetic" : "generate", next);
                return 2;
            }
            o->synthetic = (int)n;
            break;
        }
        case O_DUMP:
            o->dump = next ? next : "plain";
            break;
        default:
            fprintf(stderr, "(see faidctl process --help)\n");
            return 2;
        }
    }
    for (int i = optind; i < argc; i++)
        o->inputs[o->ninputs++] = argv[i];
    return 0;
}

static int dump_config(const faid_config *cfg, const char *style)
{
    faid_dump_style s;
    if (strcmp(style, "plain") == 0)
        s = FAID_DUMP_PLAIN;
    else if (strcmp(style, "annotated") == 0)
        s = FAID_DUMP_ANNOTATED;
    else if (strcmp(style, "markdown") == 0)
        s = FAID_DUMP_MARKDOWN;
    else {
        fprintf(stderr,
                "faidctl process: --dump-config=%s: expected plain, annotated or "
                "markdown\n",
                style);
        return 2;
    }
    char *text = faid_config_dump_alloc(cfg, s);
    if (!text) {
        fprintf(stderr, "faidctl process: out of memory\n");
        return 1;
    }
    fputs(text, stdout);
    free(text);
    return 0;
}

int faidctl_process(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) {
        free(o.inputs);
        return rc < 0 ? 0 : rc;
    }
    faid_log_set_name("faidctl");
    faid_config *cfg = malloc(sizeof *cfg);
    if (!cfg) {
        free(o.inputs);
        return 1;
    }
    faid_config_default(cfg);
    faid_diag d = {0};
    run r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    int status = 1;
    char synth_path[FAID_PATH_MAX + 32] = "";
    if (o.config && faid_config_load(o.config, cfg, &d)) {
        fprintf(stderr, "faidctl process: %s\n", d.msg);
        goto out;
    }
    for (int i = 0; i < o.nsets; i++) {
        char key[128];
        const char *eq = strchr(o.sets[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - o.sets[i]), o.sets[i]);
        if (faid_config_set(cfg, key, eq + 1, &d)) {
            fprintf(stderr, "faidctl process: --set %s: %s\n", o.sets[i], d.msg);
            goto out;
        }
    }
    if (o.dump) {
        status = dump_config(cfg, o.dump);
        goto out;
    }
    if (o.ninputs == 0 && !o.synthetic) {
        fprintf(stderr, "faidctl process: no input (give .npy / .bslz4 / .lz4 files or "
                        "--synthetic N)\n");
        usage(stderr);
        status = 2;
        goto out;
    }
    const char *device = o.device ? o.device
                         : strcmp(cfg->devices, "auto") == 0 || strchr(cfg->devices, ',')
                             ? "auto"
                             : cfg->devices;
    if (mkdirs(o.outdir, &d)) {
        fprintf(stderr, "faidctl process: -o %s\n", d.msg);
        goto out;
    }
    int64_t t_setup = faid_now_ns();
    r.setup = faid_setup_new(cfg, 1, &d);
    if (!r.setup) {
        fprintf(stderr, "faidctl process: %s\n", d.msg);
        goto out;
    }
    r.engine = faid_engine_new(r.setup, device, &d);
    if (!r.engine && strcmp(device, "auto") == 0 && (d.code == FAID_ENODEV || d.code == FAID_ECL)) {
        fprintf(stderr, "faidctl process: no usable OpenCL device (%s); using the C reference\n",
                d.msg);
        faid_diag_clear(&d);
        r.engine = faid_engine_new(r.setup, "ref", &d);
    }
    if (!r.engine) {
        fprintf(stderr, "faidctl process: device %s: %s\n", device, d.msg);
        goto out;
    }
    /* The 2D outputs are I, sigma, std and count, as the daemon's: the cake's sums stay on the
     * device. */
    if (faid_engine_set_sums_2d(r.engine, 0, &d)) {
        fprintf(stderr, "faidctl process: device %s: %s\n", device, d.msg);
        goto out;
    }
    r.device_name = faid_engine_device_name(r.engine);
    r.config_yaml = faid_config_dump_alloc(cfg, FAID_DUMP_PLAIN);
    r.result = faid_result_new(r.setup);
    peaks_params_text(&r);
    if (!r.result) {
        fprintf(stderr, "faidctl process: out of memory for results\n");
        goto out;
    }
    if (!o.quiet)
        fprintf(stderr, "faidctl process: setup %s (%d x %d, %d bins%s) ready in %.2f s on %s\n",
                r.setup->config_hash, r.setup->rows, r.setup->cols, cfg->npt,
                r.setup->csr2d ? ", 2D cake" : "", (double)(faid_now_ns() - t_setup) * 1e-9,
                r.device_name);
    int input_errors = 0;
    if (o.synthetic) {
        if (make_synthetic(&r, o.synthetic, synth_path, sizeof synth_path)) {
            input_errors++;
        } else {
            o.inputs[o.ninputs++] = synth_path;
        }
    }
    r.frames_total = count_frames(&o);
    r.t0 = r.last_progress = faid_now_ns();
    for (int i = 0; i < o.ninputs; i++)
        if (process_input(&r, o.inputs[i]) != 0)
            input_errors++;
    double secs = (double)(faid_now_ns() - r.t0) * 1e-9;
    if (!o.quiet || r.frames_bad || input_errors) {
        fprintf(stderr,
                "faidctl process: %ld frame(s) reduced, %ld failed, %d input(s) unreadable, in "
                "%.3f s (%.1f frames/s) on %s; outputs in %s/%s%s\n",
                r.frames_ok, r.frames_bad, input_errors, secs,
                secs > 0 ? (double)r.frames_ok / secs : 0.0, r.device_name, o.outdir,
                r.setup->csr2d ? "<stem>_<frame>.dat and _2d_*.npy" : "<stem>_<frame>.dat",
                r.first_out[0] ? "" : " (none written)");
        if (r.first_out[0])
            fprintf(stderr, "faidctl process: first profile: %s\n", r.first_out);
    }
    status = (r.frames_bad || input_errors || r.write_errors || r.frames_ok == 0) ? 1 : 0;
out:
    faid_nxmx_close(&r.hits, &d);
    faid_peak_list_destroy(&r.pk);
    faid_sfile_close(&r.sf, NULL, 0, "error", &d);
    free(r.msg);
    free(r.config_yaml);
    faid_result_destroy(&r.result);
    faid_engine_destroy(&r.engine);
    faid_setup_destroy(&r.setup);
    free(cfg);
    free(o.inputs);
    return status;
}
