/* faidctl replay: a stand-in detector. It sends a series of frames to a faid instance in the
 * native protocol (proto/PROTOCOL.md §2), or as a DECTRIS detector would in stream v1 or v2
 * (--protocol; faid_client_dectris.c encodes those): a start message, N images and an end
 * message, over a PUSH socket that connects (or binds with --bind), at a set rate or as fast as the
 * receiver takes them.
 *
 * Frames are synthetic (faid_synth: Debye-Scherrer rings, Bragg spots, Poisson noise, module gaps
 * at the bad-pixel value) for the detector of a preset or configuration file, or come from .npy
 * files (2-D frames or 3-D stacks). Compression is not free, so a handful of distinct frames are
 * generated and encoded before the first send and then cycled; each payload is handed to ZeroMQ
 * without a copy, so the send rate is bounded by the socket, not by this program. */
#include "faidctl.h"
#include "faidctl_h5.h"

#include "faid_client.h"
#include "faid_client_dectris.h"
#include "faid_codec.h"
#include "faid_config.h"
#include "faid_dtype.h"
#include "faid_geometry.h"
#include "faid_input.h"
#include "faid_log.h"
#include "faid_npy.h"
#include "faid_proto.h"
#include "faid_synth.h"

#include <errno.h>
#include <limits.h>
#include <lz4.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TO "tcp://127.0.0.1:5555"
#define MAX_NPY    64

/* The DECTRIS side of the sender: one message of stream v1 (JSON parts, the frame's blob
 * without a copy) or v2 (one CBOR item, the frame copied into it). */
typedef struct dectris_out {
    faid_input_protocol proto;
    faid_dectris_series ser;
    uint8_t *buf; /* v2 message buffer */
    size_t cap;
    char p1[1024], p2[1024], p4[1024]; /* v1 JSON parts */
    int copy;                          /* --copy: v1 blobs copied too */
} dectris_out;

static int dectris_send(dectris_out *x, faid_sender *s, faid_in_type type, uint64_t frame,
                        const void *payload, size_t len, faid_encoding enc, double rate,
                        faid_diag *d)
{
    const void *parts[4];
    size_t lens[4];
    int rc;
    if (x->proto == FAID_PROTOCOL_DECTRIS_V2) {
        size_t n = 0;
        rc = type == FAID_IN_START ? faid_dectris2_start(&x->ser, x->buf, x->cap, &n, d)
             : type == FAID_IN_END
                 ? faid_dectris2_end(&x->ser, x->buf, x->cap, &n, d)
                 : faid_dectris2_image(&x->ser, frame, enc, payload, len, x->buf, x->cap, &n, d);
        if (rc)
            return rc;
        parts[0] = x->buf;
        lens[0] = n;
        return faid_sender_parts(s, parts, lens, 1, -1, d);
    }
    if (type == FAID_IN_START) {
        if ((rc = faid_dectris1_header(&x->ser, x->p1, x->p2, sizeof(x->p1), d)))
            return rc;
        parts[0] = x->p1;
        parts[1] = x->p2;
        lens[0] = strlen(x->p1);
        lens[1] = strlen(x->p2);
        return faid_sender_parts(s, parts, lens, 2, -1, d);
    }
    if (type == FAID_IN_END) {
        if ((rc = faid_dectris1_end(&x->ser, x->p1, sizeof(x->p1), d)))
            return rc;
        parts[0] = x->p1;
        lens[0] = strlen(x->p1);
        return faid_sender_parts(s, parts, lens, 1, -1, d);
    }
    uint64_t frame_ns = rate > 0 ? (uint64_t)(1e9 / rate) : 1000000u;
    if ((rc = faid_dectris1_image(&x->ser, frame, enc, len, frame_ns, x->p1, x->p2, x->p4,
                                  sizeof(x->p1), d)))
        return rc;
    parts[0] = x->p1;
    parts[1] = x->p2;
    parts[2] = payload;
    parts[3] = x->p4;
    lens[0] = strlen(x->p1);
    lens[1] = strlen(x->p2);
    lens[2] = len;
    lens[3] = strlen(x->p4);
    return faid_sender_parts(s, parts, lens, 4, x->copy ? -1 : 2, d);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: faidctl replay [--to ENDPOINT] [--bind] [--frames N] [--rate HZ]\n"
            "                      [--preset NAME | -c CONFIG | --npy FILE... |\n"
            "                       --h5 MASTER_OR_DATA.h5 [--dataset PATH]] [options]\n"
            "  --to ENDPOINT        where faid's input listens (default: input.endpoint and\n"
            "                       input.mode of the -c configuration, else %s)\n"
            "  --bind               bind ENDPOINT instead of connecting to it\n"
            "  --frames N           number of frames to send (default 100)\n"
            "  --rate HZ            frames per second (default: as fast as possible)\n"
            "  --start-at T         send the first frame at wall-clock time T (seconds since\n"
            "                       the epoch), after the frames are made and the series start\n"
            "                       is sent: several replays started at once then send\n"
            "                       together (a late one says by how much)\n"
            "  --preset NAME        synthetic frames for this detector (e.g. eiger_4m, pilatus1m)\n"
            "  -c, --config FILE    synthetic frames for the detector and geometry of a faid\n"
            "                       configuration (default: faid's embedded default)\n"
            "  --npy FILE           send the frames of a .npy file (2-D frame or 3-D stack);\n"
            "                       repeatable, frames are cycled in order\n"
            "  --h5 FILE            send the frames of an EIGER / NeXus HDF5 file or of a\n"
            "                       faid hits file, each chunk as stored (direct chunk read:\n"
            "                       bitshuffle-LZ4 and LZ4 chunks are never decompressed), with\n"
            "                       the file's geometry in a DECTRIS start and a hits file's\n"
            "                       frame ids; --frames defaults to the file's frame count\n"
            "  --dataset PATH       dataset in the HDF5 file (default /entry/data/data, else the\n"
            "                       master file's /entry/data/data_000001, _000002, ...)\n"
            "  --dtype TYPE         uint8|uint16|uint32|int8|int16|int32|float32 (default uint32\n"
            "                       for synthetic frames, the file's type for .npy)\n"
            "  --encoding ENC       bslz4|lz4|lz4-raw|none (default bslz4; dectris-v1 carries\n"
            "                       bslz4, lz4-raw, none; dectris-v2 bslz4, lz4, none)\n"
            "  --protocol P         native (default), dectris-v1 (JSON multipart, as a DCU's\n"
            "                       stream v1) or dectris-v2 (CBOR, stream v2)\n"
            "  --distinct K         synthetic frames generated before sending (default 8)\n"
            "  --seed S             seed of the synthetic frames (default 12345)\n"
            "  --series-id ID       series id (default 1)\n"
            "  --series-unique-id S unique series name (default none)\n"
            "  --first-frame ID     frame id of the first frame (default 0; --h5 of a file\n"
            "                       with frame ids, such as faid's hits files: those ids)\n"
            "  --no-series          send only images (no start/end messages)\n"
            "  --timeout S          give up when a send waits longer than S s (default 30)\n"
            "  --hwm N              send high-water mark in messages (default ZeroMQ's)\n"
            "  --copy               copy each payload into the socket (default zero-copy)\n"
            "  --quiet              no progress lines on stderr\n"
            "  --server-key FILE, --key FILE\n"
            "                       CURVE keys for a faid with security.curve on whose input\n"
            "                       is bound (faidctl sub --help says more)\n",
            DEFAULT_TO);
}

/* One raw LZ4 block (DECTRIS v1 "lz4<"): the decoded size is implied by shape and dtype. */
static int lz4raw_encode(const void *src, size_t n, uint8_t *dst, size_t cap, size_t *out_len,
                         faid_diag *d)
{
    if (n > LZ4_MAX_INPUT_SIZE || cap > INT32_MAX)
        return faid_fail(d, FAID_ESIZE, "%zu bytes are too many for one LZ4 block", n);
    int k = LZ4_compress_default(src, (char *)dst, (int)n, (int)cap);
    if (k <= 0)
        return faid_fail(d, FAID_ESIZE, "LZ4 compression of %zu bytes failed", n);
    *out_len = (size_t)k;
    return 0;
}

typedef struct frame_buf {
    uint8_t *data;
    size_t len;
} frame_buf;

typedef struct replay_frames {
    int rows, cols;
    faid_dtype dtype;
    faid_encoding encoding;
    size_t raw_bytes; /* per frame, decoded */
    int n;
    frame_buf *f;
} replay_frames;

static void frames_free(replay_frames *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->f[i].data);
    free(r->f);
    r->f = NULL;
    r->n = 0;
}

/* Encodes raw (rows*cols elements of r->dtype) into a new buffer appended to r. */
static int frames_add(replay_frames *r, const void *raw, faid_diag *d)
{
    size_t es = faid_dtype_size(r->dtype);
    size_t nbytes = r->raw_bytes;
    size_t cap;
    switch (r->encoding) {
    case FAID_ENC_BSLZ4:
        cap = faid_bslz4_bound(nbytes, es, 0);
        break;
    case FAID_ENC_LZ4:
        cap = faid_lz4h5_bound(nbytes, 0);
        break;
    case FAID_ENC_LZ4_RAW:
        cap = nbytes <= LZ4_MAX_INPUT_SIZE ? (size_t)LZ4_compressBound((int)nbytes) : 0;
        break;
    default:
        cap = nbytes;
        break;
    }
    uint8_t *dst = malloc(cap ? cap : 1);
    frame_buf *nf = realloc(r->f, (size_t)(r->n + 1) * sizeof(*nf));
    if (!dst || !nf) {
        free(dst);
        if (nf)
            r->f = nf;
        return faid_fail(d, FAID_ENOMEM, "out of memory for frame %d (%zu bytes)", r->n, cap);
    }
    r->f = nf;
    size_t len = 0;
    int rc = 0;
    switch (r->encoding) {
    case FAID_ENC_BSLZ4:
        rc = faid_bslz4_encode(raw, nbytes, es, 0, dst, cap, &len, d);
        break;
    case FAID_ENC_LZ4:
        rc = faid_lz4h5_encode(raw, nbytes, 0, dst, cap, &len, d);
        break;
    case FAID_ENC_LZ4_RAW:
        rc = lz4raw_encode(raw, nbytes, dst, cap, &len, d);
        break;
    default:
        memcpy(dst, raw, nbytes);
        len = nbytes;
        break;
    }
    if (rc) {
        free(dst);
        faid_diag_prefix(d, "encoding frame %d: ", r->n);
        return rc;
    }
    r->f[r->n].data = dst;
    r->f[r->n].len = len;
    r->n++;
    return 0;
}

/* Stores v, rounded and clamped to the range of t, as element i of dst. */
static void store_as(faid_dtype t, void *dst, size_t i, double v)
{
    if (t == FAID_DT_F32) {
        ((float *)dst)[i] = (float)v;
        return;
    }
    double lo = 0, hi = 0;
    switch (t) {
    case FAID_DT_U8:
        hi = 255;
        break;
    case FAID_DT_U16:
        hi = 65535;
        break;
    case FAID_DT_U32:
        hi = 4294967295.0;
        break;
    case FAID_DT_I8:
        lo = -128;
        hi = 127;
        break;
    case FAID_DT_I16:
        lo = -32768;
        hi = 32767;
        break;
    default:
        lo = -2147483648.0;
        hi = 2147483647.0;
        break;
    }
    v = v != v ? 0 : v < lo ? lo : v > hi ? hi : v + (v >= 0 ? 0.5 : -0.5);
    switch (t) {
    case FAID_DT_U8:
        ((uint8_t *)dst)[i] = (uint8_t)v;
        break;
    case FAID_DT_U16:
        ((uint16_t *)dst)[i] = (uint16_t)v;
        break;
    case FAID_DT_U32:
        ((uint32_t *)dst)[i] = (uint32_t)v;
        break;
    case FAID_DT_I8:
        ((int8_t *)dst)[i] = (int8_t)v;
        break;
    case FAID_DT_I16:
        ((int16_t *)dst)[i] = (int16_t)v;
        break;
    default:
        ((int32_t *)dst)[i] = (int32_t)v;
        break;
    }
}

/* Frames from .npy files: every 2-D array is a frame, every 3-D array a stack of frames. All must
 * share one frame shape; with want_dtype set they are converted to it, else they keep their own
 * (which must be a frame type, the same in every file). */
static int load_npy(const char *const *paths, int npaths, faid_dtype want_dtype, replay_frames *r,
                    faid_diag *d)
{
    for (int p = 0; p < npaths; p++) {
        faid_array a;
        memset(&a, 0, sizeof(a));
        int rc = faid_npy_read(paths[p], &a, d);
        if (rc)
            return rc;
        int rows, cols;
        size_t nfr;
        if (a.ndim == 2) {
            nfr = 1;
            rows = (int)a.shape[0];
            cols = (int)a.shape[1];
        } else if (a.ndim == 3) {
            nfr = a.shape[0];
            rows = (int)a.shape[1];
            cols = (int)a.shape[2];
        } else {
            faid_array_free(&a);
            return faid_fail(d, FAID_ESHAPE, "%s: %d-D array; frames are 2-D, stacks 3-D", paths[p],
                             a.ndim);
        }
        faid_dtype dt = want_dtype != FAID_DT_INVALID ? want_dtype : a.dtype;
        if (!faid_dtype_is_frame(dt)) {
            faid_array_free(&a);
            return faid_fail(d, FAID_EDTYPE,
                             "%s: dtype %s is not a frame type; choose one with --dtype", paths[p],
                             faid_dtype_name(a.dtype));
        }
        if (r->n == 0 && p == 0) {
            r->rows = rows;
            r->cols = cols;
            r->dtype = dt;
            r->raw_bytes = (size_t)rows * (size_t)cols * faid_dtype_size(dt);
        } else if (rows != r->rows || cols != r->cols || dt != r->dtype) {
            faid_array_free(&a);
            return faid_fail(d, FAID_ESHAPE, "%s: frames of %dx%d %s after %dx%d %s", paths[p],
                             rows, cols, faid_dtype_name(dt), r->rows, r->cols,
                             faid_dtype_name(r->dtype));
        }
        if (rows <= 0 || cols <= 0 || nfr == 0) {
            faid_array_free(&a);
            return faid_fail(d, FAID_ESHAPE, "%s: holds no frame", paths[p]);
        }
        size_t npix = (size_t)rows * (size_t)cols, es_in = faid_dtype_size(a.dtype);
        void *conv = NULL;
        double *tmp = NULL;
        if (dt != a.dtype) {
            conv = malloc(r->raw_bytes);
            tmp = malloc(npix * sizeof(double));
            if (!conv || !tmp) {
                free(conv);
                free(tmp);
                faid_array_free(&a);
                return faid_fail(d, FAID_ENOMEM, "%s: out of memory", paths[p]);
            }
        }
        for (size_t k = 0; k < nfr && rc == 0; k++) {
            const uint8_t *src = (const uint8_t *)a.data + k * npix * es_in;
            if (conv) {
                faid_dtype_to_f64(a.dtype, src, npix, tmp);
                for (size_t i = 0; i < npix; i++)
                    store_as(dt, conv, i, tmp[i]);
                src = conv;
            }
            rc = frames_add(r, src, d);
        }
        free(conv);
        free(tmp);
        faid_array_free(&a);
        if (rc) {
            faid_diag_prefix(d, "%s: ", paths[p]);
            return rc;
        }
    }
    return 0;
}

/* Synthetic frames for the detector of a preset, a configuration file or the default. */
static int make_synthetic(const char *preset, const char *config, int distinct, uint64_t seed,
                          replay_frames *r, char *input_ep, size_t ep_cap, int *ep_bind,
                          faid_geometry *geo_out, faid_diag *d)
{
    int rc = 0;
    faid_config *cfg = malloc(sizeof(*cfg));
    if (!cfg)
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    faid_config_default(cfg);
    if (config) {
        rc = faid_config_load(config, cfg, d);
    } else if (preset) {
        for (const char *c = preset; *c && rc == 0; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
                rc = faid_fail(d, FAID_EINVAL, "unknown detector preset '%s'", preset);
        if (rc == 0 && !faid_detector_find(preset))
            rc = faid_fail(d, FAID_EINVAL, "unknown detector preset '%s'", preset);
        char yaml[160];
        snprintf(yaml, sizeof(yaml), "detector:\n  preset: %s\n", preset);
        if (rc == 0)
            rc = faid_config_load_string(yaml, strlen(yaml), "--preset", cfg, d);
    }
    void *raw = NULL;
    faid_synth *syn = NULL;
    if (rc)
        goto out;
    /* Where a daemon with this configuration listens ("*" meaning this host), or where it
     * connects to, which this sender then binds. */
    /* A list of input endpoints: the first one (--to names another). */
    char first_ep[1040];
    if (input_ep && faid_config_endpoint_at(cfg->input_endpoint, 0, first_ep, sizeof first_ep)) {
        const char *star = strstr(first_ep, "://*");
        *ep_bind = !cfg->input_bind;
        if (star && cfg->input_bind)
            snprintf(input_ep, ep_cap, "%.*s://127.0.0.1%.*s", (int)(star - first_ep), first_ep,
                     (int)(ep_cap > 32 ? ep_cap - 32 : 1), star + 4);
        else
            snprintf(input_ep, ep_cap, "%.*s", (int)(ep_cap - 1), first_ep);
    }
    faid_geometry g = cfg->geometry;
    g.rows = cfg->rows;
    g.cols = cfg->cols;
    if (g.rows <= 0 || g.cols <= 0) {
        rc = faid_fail(d, FAID_ESHAPE, "the configuration gives no detector shape");
        goto out;
    }
    if (geo_out)
        *geo_out = g;
    size_t npix = (size_t)g.rows * (size_t)g.cols;
    r->rows = g.rows;
    r->cols = g.cols;
    r->raw_bytes = npix * faid_dtype_size(r->dtype);
    raw = malloc(r->raw_bytes);
    if (!raw) {
        rc = faid_fail(d, FAID_ENOMEM, "out of memory for a %dx%d frame", g.rows, g.cols);
        goto out;
    }
    faid_synth_params sp;
    faid_synth_default_params(&sp);
    sp.seed = seed;
    syn = faid_synth_for_config(cfg, &sp, d);
    if (!syn) {
        rc = d && d->code ? d->code : FAID_EINVAL;
        goto out;
    }
    for (int k = 0; k < distinct && rc == 0 && !faidctl_stop; k++) {
        rc = faid_synth_frame(syn, (uint64_t)k, r->dtype, raw, r->raw_bytes, d);
        if (rc == 0)
            rc = frames_add(r, raw, d);
    }
out:
    faid_synth_destroy(&syn);
    free(raw);
    free(cfg);
    return rc;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || !*s || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

static void sleep_until(int64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000LL), (long)(t_ns % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !faidctl_stop)
        ;
}

static void progress(uint64_t sent, uint64_t total, uint64_t bytes, double elapsed, int tty)
{
    fprintf(stderr, "%sreplay: %llu/%llu frames  %.1f frames/s  %.1f MB/s%s", tty ? "\r\033[K" : "",
            (unsigned long long)sent, (unsigned long long)total,
            elapsed > 0 ? (double)sent / elapsed : 0.0,
            elapsed > 0 ? (double)bytes / 1e6 / elapsed : 0.0, tty ? "" : "\n");
    fflush(stderr);
}

int faidctl_replay(int argc, char **argv)
{
    const char *to = NULL, *preset = NULL, *config = NULL, *h5 = NULL, *h5_dataset = NULL;
    int frames_given = 0, enc_given = 0, first_given = 0;
    uint64_t *ids = NULL; /* --h5: the file's frame ids (a hits file), n_ids of them */
    uint64_t n_ids = 0, next_id = 0;
    char config_to[300] = "";
    int config_bind = 0;
    const char *npy[MAX_NPY];
    int nnpy = 0, bind = 0, no_series = 0, quiet = 0, copy = 0, hwm = 0;
    uint64_t frames = 100, series_id = 1, first = 0, seed = 12345, distinct = 8;
    double rate = 0, timeout = 30, start_at = 0;
    char series_uid[FAID_SERIES_UID_MAX] = "";
    faid_dtype dtype = FAID_DT_INVALID;
    faid_encoding enc = FAID_ENC_BSLZ4;
    faid_input_protocol proto = FAID_PROTOCOL_NATIVE;

    enum {
        O_BIND = 256,
        O_NO_SERIES,
        O_QUIET,
        O_COPY,
        O_TO,
        O_PRESET,
        O_NPY,
        O_H5,
        O_DATASET,
        O_FRAMES,
        O_SERIES_ID,
        O_FIRST_FRAME,
        O_SEED,
        O_DISTINCT,
        O_HWM,
        O_RATE,
        O_START_AT,
        O_TIMEOUT,
        O_SERIES_UID,
        O_DTYPE,
        O_ENCODING,
        O_PROTOCOL
    };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"bind", no_argument, NULL, O_BIND},
        {"no-series", no_argument, NULL, O_NO_SERIES},
        {"quiet", no_argument, NULL, O_QUIET},
        {"copy", no_argument, NULL, O_COPY},
        {"to", required_argument, NULL, O_TO},
        {"preset", required_argument, NULL, O_PRESET},
        {"config", required_argument, NULL, 'c'},
        {"npy", required_argument, NULL, O_NPY},
        {"h5", required_argument, NULL, O_H5},
        {"dataset", required_argument, NULL, O_DATASET},
        {"frames", required_argument, NULL, O_FRAMES},
        {"series-id", required_argument, NULL, O_SERIES_ID},
        {"first-frame", required_argument, NULL, O_FIRST_FRAME},
        {"seed", required_argument, NULL, O_SEED},
        {"distinct", required_argument, NULL, O_DISTINCT},
        {"hwm", required_argument, NULL, O_HWM},
        {"rate", required_argument, NULL, O_RATE},
        {"start-at", required_argument, NULL, O_START_AT},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"series-unique-id", required_argument, NULL, O_SERIES_UID},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"encoding", required_argument, NULL, O_ENCODING},
        {"protocol", required_argument, NULL, O_PROTOCOL},
        FAIDCTL_KEY_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    faidctl_keys keys = {0};
    int c, first_opt = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first_opt)) != -1) {
        const char *v = optarg;
        char *end;
        int bad = 0;
        if (faidctl_keys_option(&keys, c, optarg))
            continue;
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case O_BIND:
            bind = 1;
            break;
        case O_NO_SERIES:
            no_series = 1;
            break;
        case O_QUIET:
            quiet = 1;
            break;
        case O_COPY:
            copy = 1;
            break;
        case O_TO:
            to = v;
            break;
        case O_PRESET:
            preset = v;
            break;
        case 'c':
            config = v;
            break;
        case O_NPY:
            if (nnpy == MAX_NPY) {
                fprintf(stderr, "faidctl replay: at most %d --npy files\n", MAX_NPY);
                return 2;
            }
            npy[nnpy++] = v;
            break;
        case O_H5:
            h5 = v;
            break;
        case O_DATASET:
            h5_dataset = v;
            break;
        case O_FRAMES:
            bad = parse_u64(v, &frames) != 0;
            frames_given = 1;
            break;
        case O_SERIES_ID:
            bad = parse_u64(v, &series_id) != 0;
            break;
        case O_FIRST_FRAME:
            bad = parse_u64(v, &first) != 0;
            first_given = 1;
            break;
        case O_SEED:
            bad = parse_u64(v, &seed) != 0;
            break;
        case O_DISTINCT:
            bad = parse_u64(v, &distinct) != 0 || distinct < 1 || distinct > 4096;
            break;
        case O_HWM: {
            uint64_t h;
            bad = parse_u64(v, &h) != 0 || h < 1 || h > (1u << 24);
            hwm = bad ? 0 : (int)h;
            break;
        }
        case O_RATE:
            rate = strtod(v, &end);
            bad = *end || !(rate >= 0 && rate < 1e9);
            break;
        case O_START_AT:
            start_at = strtod(v, &end);
            bad = *end || !(start_at > 0 && start_at < 1e11);
            break;
        case O_TIMEOUT:
            timeout = strtod(v, &end);
            bad = *end || !(timeout > 0 && timeout < 86400);
            break;
        case O_SERIES_UID:
            bad = strlen(v) >= sizeof(series_uid);
            if (!bad)
                snprintf(series_uid, sizeof(series_uid), "%s", v);
            break;
        case O_DTYPE:
            dtype = faid_dtype_parse(v);
            bad = !faid_dtype_is_frame(dtype);
            break;
        case O_ENCODING:
            bad = faid_encoding_parse(v, &enc) != 0;
            enc_given = 1;
            break;
        case O_PROTOCOL:
            bad = faid_input_protocol_parse(v, &proto) != 0 || proto == FAID_PROTOCOL_AUTO ||
                  proto == FAID_PROTOCOL_FAN;
            break;
        default:
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "faidctl replay: bad value '%s' for --%s\n", v,
                    faidctl_optname(longopts, c));
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "faidctl replay: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if ((preset != NULL) + (config != NULL) + (nnpy > 0) + (h5 != NULL) > 1) {
        fprintf(stderr, "faidctl replay: choose one of --preset, -c, --npy and --h5\n");
        return 2;
    }
    if (h5_dataset && !h5) {
        fprintf(stderr, "faidctl replay: --dataset needs --h5\n");
        return 2;
    }
    if (h5 && (enc_given || dtype != FAID_DT_INVALID)) {
        fprintf(stderr, "faidctl replay: --h5 sends the file's chunks as stored: no --encoding "
                        "or --dtype\n");
        return 2;
    }
    if (!h5 && ((proto == FAID_PROTOCOL_DECTRIS_V2 && !faid_dectris2_carries(enc)) ||
                (proto == FAID_PROTOCOL_DECTRIS_V1 && !faid_dectris1_encoding(enc, FAID_DT_U16)))) {
        fprintf(stderr, "faidctl replay: %s cannot carry %s frames\n",
                faid_input_protocol_name(proto), faid_encoding_name(enc));
        return 2;
    }

    faidctl_catch_stop();
#if defined(__GLIBC__)
    /* --copy hands ZeroMQ a fresh copy of every frame, freed by its I/O thread after the send:
     * glibc gave the freed memory back to the kernel and the next copy faulted it in again,
     * zeroed (perf stat, 500 EIGER 4M frames of 2.69 MB on the 2-core box: 112,000 page faults
     * more than zero-copy, 225 per frame). Kept and reused instead, as faid-fan does; the
     * process holds at most what the send queue holds. */
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif

    faid_diag d;
    faid_diag_clear(&d);
    replay_frames fr;
    memset(&fr, 0, sizeof(fr));
    faid_geometry geo;
    memset(&geo, 0, sizeof(geo));
    fr.encoding = enc;
    int64_t tg = faid_now_ns();
    int rc;
    if (h5) {
        faidctl_h5 hf;
        rc = faidctl_h5_read(h5, h5_dataset, &hf, &d);
        if (rc == 0) {
            /* The chunks as stored become the frames (ownership moves to fr). */
            fr.rows = hf.rows;
            fr.cols = hf.cols;
            fr.dtype = hf.dtype;
            fr.encoding = enc = hf.encoding;
            fr.raw_bytes = (size_t)hf.rows * (size_t)hf.cols * faid_dtype_size(hf.dtype);
            fr.f = calloc(hf.n, sizeof(*fr.f));
            if (!fr.f || hf.n > INT32_MAX) {
                rc = faid_fail(&d, FAID_ENOMEM, "out of memory for %llu frames",
                               (unsigned long long)hf.n);
            } else {
                for (uint64_t k = 0; k < hf.n; k++) {
                    fr.f[k].data = hf.data[k];
                    fr.f[k].len = hf.len[k];
                    hf.data[k] = NULL;
                }
                fr.n = (int)hf.n;
            }
            if (!frames_given)
                frames = hf.n;
            /* A hits file's frames keep their original ids (unless --first-frame says
             * otherwise); frames sent beyond them continue after the largest. */
            if (hf.has_frame_ids && !first_given && rc == 0) {
                ids = hf.frame_id;
                hf.frame_id = NULL;
                n_ids = hf.n;
                for (uint64_t k = 0; k < n_ids; k++)
                    next_id = ids[k] >= next_id ? ids[k] + 1 : next_id;
            }
            if (hf.has_geometry) {
                /* As a DECTRIS start states it: beam centre in pixels, distance (m), wavelength
                 * (m here, angstrom on the wire). */
                geo.pixel1 = hf.pixel_size_y;
                geo.pixel2 = hf.pixel_size_x;
                geo.poni1 = hf.beam_center_y * hf.pixel_size_y;
                geo.poni2 = hf.beam_center_x * hf.pixel_size_x;
                geo.dist = hf.distance;
                geo.wavelength = hf.wavelength * 1e-10;
                geo.orientation = 3;
            }
            if (!quiet)
                fprintf(stderr, "replay: %s: %s%s, %llu frames, %s chunks%s%s\n", h5, hf.dataset,
                        hf.ndatasets > 1 ? " and following" : "", (unsigned long long)hf.n,
                        hf.direct ? faid_encoding_name(hf.encoding) : "decoded",
                        hf.has_geometry ? ", geometry from the file" : "",
                        ids ? ", frame ids from the file" : "");
            faidctl_h5_free(&hf);
        }
        if (rc == 0 &&
            ((proto == FAID_PROTOCOL_DECTRIS_V2 && !faid_dectris2_carries(enc)) ||
             (proto == FAID_PROTOCOL_DECTRIS_V1 && !faid_dectris1_encoding(enc, fr.dtype))))
            rc = faid_fail(&d, FAID_EUNSUP, "%s cannot carry the file's %s chunks",
                           faid_input_protocol_name(proto), faid_encoding_name(enc));
    } else if (nnpy) {
        rc = load_npy(npy, nnpy, dtype, &fr, &d);
    } else {
        fr.dtype = dtype != FAID_DT_INVALID ? dtype : FAID_DT_U32;
        uint64_t k = distinct < frames ? distinct : frames ? frames : 1;
        rc = make_synthetic(preset, config, (int)k, seed, &fr, config ? config_to : NULL,
                            sizeof(config_to), &config_bind, &geo, &d);
    }
    if (rc) {
        fprintf(stderr, "faidctl replay: %s\n", d.msg);
        frames_free(&fr);
        free(ids);
        return 1;
    }
    if (faidctl_stop) {
        frames_free(&fr);
        free(ids);
        return 1;
    }
    uint64_t enc_total = 0;
    for (int k = 0; k < fr.n; k++)
        enc_total += fr.f[k].len;
    if (!quiet)
        fprintf(stderr,
                "replay: %d distinct %dx%d %s frames, %s, %.2f MB each on average (%.1fx), "
                "prepared in %.2f s\n",
                fr.n, fr.rows, fr.cols, faid_dtype_name(fr.dtype), faid_encoding_name(enc),
                (double)enc_total / fr.n / 1e6,
                enc_total ? (double)fr.raw_bytes * fr.n / (double)enc_total : 0.0,
                (double)(faid_now_ns() - tg) / 1e9);

    if (!to && config_to[0]) {
        to = config_to;
        bind = config_bind;
    } else if (!to) {
        to = DEFAULT_TO;
    }
    /* Keys only for faid's bound input; a bound replay serves faid's connect-mode input, which
     * stays plain ($FAID_SERVER_KEY / $FAID_KEY are then not used; explicit keys are refused). */
    faid_curve_keys ck;
    memset(&ck, 0, sizeof(ck));
    int krc = bind && !keys.server_key && !keys.key ? 0 : faidctl_keys_load(&keys, "replay", &ck);
    if (krc) {
        frames_free(&fr);
        free(ids);
        return krc;
    }
    faid_sender *s = faid_sender_new_curve(to, bind, hwm, (int)(timeout * 1000 + 0.5), &ck, &d);
    memset(&ck, 0, sizeof(ck));
    if (!s) {
        fprintf(stderr, "faidctl replay: %s\n", d.msg);
        frames_free(&fr);
        free(ids);
        return 1;
    }
    faid_in_header h;
    memset(&h, 0, sizeof(h));
    h.series_id = series_id;
    snprintf(h.series_unique_id, sizeof(h.series_unique_id), "%s", series_uid);
    h.nimages = (int64_t)frames;
    int status = 0;
    dectris_out dx;
    memset(&dx, 0, sizeof(dx));
    dx.proto = proto;
    dx.copy = copy;
    dx.ser = (faid_dectris_series){.series_id = series_id,
                                   .series_unique_id = series_uid,
                                   .rows = fr.rows,
                                   .cols = fr.cols,
                                   .dtype = fr.dtype,
                                   .nimages = (int64_t)frames};
    /* The geometry of synthetic frames goes into a DECTRIS start as a detector would state it:
     * beam centre in pixels (poni / pixel size) and distance, which says the same as the PONI
     * only without rotations and with pyFAI's default orientation. */
    if (geo.dist > 0 && geo.rot1 == 0 && geo.rot2 == 0 && geo.rot3 == 0 &&
        (geo.orientation == 0 || geo.orientation == 3) && geo.pixel1 > 0 && geo.pixel2 > 0) {
        dx.ser.has_geometry = 1;
        dx.ser.beam_center_x = geo.poni2 / geo.pixel2;
        dx.ser.beam_center_y = geo.poni1 / geo.pixel1;
        dx.ser.distance = geo.dist;
        dx.ser.wavelength = geo.wavelength * 1e10;
        dx.ser.pixel_size_x = geo.pixel2;
        dx.ser.pixel_size_y = geo.pixel1;
    }
    if (proto == FAID_PROTOCOL_DECTRIS_V2) {
        size_t most = 0;
        for (int k = 0; k < fr.n; k++)
            most = fr.f[k].len > most ? fr.f[k].len : most;
        dx.cap = faid_dectris2_image_bound(most);
        if (!(dx.buf = malloc(dx.cap))) {
            fprintf(stderr, "faidctl replay: out of memory\n");
            status = 1;
        }
    }
    if (!no_series && status == 0) {
        h.type = FAID_IN_START;
        rc = proto == FAID_PROTOCOL_NATIVE
                 ? faid_sender_series(s, &h, &d)
                 : dectris_send(&dx, s, FAID_IN_START, 0, NULL, 0, enc, rate, &d);
        if (rc) {
            fprintf(stderr, "faidctl replay: %s\n", d.msg);
            status = 1;
        }
    }
    /* --start-at: every replay of a multi-connection benchmark sends from the same moment (the
     * frames' preparation took 0.6 s longer in one of four replays started together on a
     * 64-core host, 2026-11-27, so their windows overlapped for half the run) */
    double late = 0.0;
    if (start_at > 0 && status == 0) {
        const int64_t wait = (int64_t)(start_at * 1e9) - faid_wall_ns();
        if (wait > 0)
            sleep_until(faid_now_ns() + wait);
        else
            late = (double)-wait / 1e9;
    }
    int tty = isatty(STDERR_FILENO);
    uint64_t sent = 0, bytes = 0;
    const int64_t w0 = faid_wall_ns();
    int64_t t0 = faid_now_ns(), next_line = t0 + 1000000000LL;
    h.type = FAID_IN_IMAGE;
    h.rows = fr.rows;
    h.cols = fr.cols;
    h.dtype = fr.dtype;
    h.encoding = enc;
    h.has_timestamp = 1;
    for (uint64_t k = 0; k < frames && status == 0 && !faidctl_stop; k++) {
        if (rate > 0)
            sleep_until(t0 + (int64_t)((double)k * 1e9 / rate));
        const frame_buf *b = &fr.f[k % (uint64_t)fr.n];
        h.frame_id = !ids ? first + k : k < n_ids ? ids[k] : next_id + (k - n_ids);
        h.timestamp = (double)faid_wall_ns() / 1e9;
        rc = proto == FAID_PROTOCOL_NATIVE
                 ? faid_sender_image(s, &h, b->data, b->len, !copy, &d)
                 : dectris_send(&dx, s, FAID_IN_IMAGE, h.frame_id, b->data, b->len, enc, rate, &d);
        if (rc) {
            fprintf(stderr, "%sfaidctl replay: frame %llu: %s\n", tty && !quiet ? "\n" : "",
                    (unsigned long long)h.frame_id, d.msg);
            status = 1;
            break;
        }
        sent++;
        bytes += b->len;
        int64_t now = faid_now_ns();
        if (!quiet && now >= next_line) {
            progress(sent, frames, bytes, (double)(now - t0) / 1e9, tty);
            next_line = now + (tty ? 1000000000LL : 5000000000LL);
        }
    }
    int64_t t1 = faid_now_ns();
    /* The end message goes out even after an interruption, so the daemon closes the series. */
    if (!no_series && !(status && (rc == FAID_ETIMEOUT || rc == FAID_EAUTH))) {
        h.type = FAID_IN_END;
        rc = proto == FAID_PROTOCOL_NATIVE
                 ? faid_sender_series(s, &h, &d)
                 : dectris_send(&dx, s, FAID_IN_END, 0, NULL, 0, enc, rate, &d);
        if (rc) {
            fprintf(stderr, "faidctl replay: %s\n", d.msg);
            status = 1;
        }
    }
    if (!quiet && tty)
        fputc('\n', stderr);
    /* Destroying waits for the queued frames to leave (bounded by the timeout); the payloads
     * handed over without a copy are freed only after that. */
    faid_sender_destroy(&s);
    int64_t t2 = faid_now_ns();
    const int64_t w2 = w0 + (t2 - t0);
    frames_free(&fr);
    free(dx.buf);

    /* Sends only queue a frame: the rate counts until the last one has left (the flush). */
    double el = (double)(t2 - t0) / 1e9;
    printf("frames: %llu\n", (unsigned long long)sent);
    printf("series: %llu%s%s\n", (unsigned long long)series_id, series_uid[0] ? " " : "",
           series_uid);
    if (ids)
        printf("frame ids: %llu frames from the file (first %llu)\n", (unsigned long long)sent,
               (unsigned long long)(n_ids ? ids[0] : 0));
    else
        printf("frame ids: %llu..%llu\n", (unsigned long long)first,
               (unsigned long long)(sent ? first + sent - 1 : first));
    free(ids);
    printf("bytes: %.2f MB sent (%.2f MB decoded)\n", (double)bytes / 1e6,
           (double)fr.raw_bytes * (double)sent / 1e6);
    printf("rate: %.1f frames/s, %.1f MB/s over %.3f s (of which %.3f s flushing the queue)\n",
           el > 0 ? (double)sent / el : 0.0, el > 0 ? (double)bytes / 1e6 / el : 0.0, el,
           (double)(t2 - t1) / 1e9);
    printf("window: %.6f %.6f (wall clock, s: the first frame handed over, the last one gone)\n",
           (double)w0 / 1e9, (double)w2 / 1e9);
    if (start_at > 0) {
        printf("start-at: %.6f, late by %.3f s\n", start_at, late);
        if (late > 0.01)
            fprintf(stderr, "faidctl replay: ready %.3f s after --start-at\n", late);
    }
    if (faidctl_stop && status == 0) {
        fprintf(stderr, "faidctl replay: interrupted after %llu frames\n",
                (unsigned long long)sent);
        status = 1;
    }
    return status;
}
