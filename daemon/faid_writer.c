/* faid_writer: see faid_writer.h. */
#include "faid_writer.h"
#include "faid_thread.h"

#include "faid_log.h"
#include "faid_proto.h"
#include "faid_queue.h"
#include "faid_state.h"

#include "faid_gen.h"
#include "faid_pool.h"
#include "faid_sfile.h"
#include "faid_whits.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

/* Items the queue holds at most, whatever their size (the byte budget is writer.queue_bytes):
 * 65536 results are 5 s at 12 kHz. */
#define QUEUE_ITEMS 65536
/* Files tried per series when a name is taken: <name>.h5, <name>-2.h5, ... */
#define NAME_ATTEMPTS 100

static const char *const err_names[] = {
#define FAID_WERR_NAME(e, name, help) name,
    FAID_WRITER_ERRORS(FAID_WERR_NAME)
#undef FAID_WERR_NAME
};
static const char *const kind_names[] = {"start", "result", "end", "hit"};

const char *faid_writer_error_name(faid_writer_error e)
{
    return e >= 0 && e < FAID_NWERRS ? err_names[e] : "?";
}

const char *faid_wq_kind_name(faid_wq_kind k)
{
    return k >= 0 && k < FAID_NWQ ? kind_names[k] : "?";
}

typedef struct witem {
    faid_wq_kind kind;
    faid_gen *gen; /* START: reference held */
    uint64_t frame_id;
    faid_dtype dtype;
    faid_encoding enc;
    uint64_t dropped_before; /* results dropped (queue full) before this item was queued */
    size_t len;
    uint8_t body[];
} witem;

/* A file being written: its series, the setup (settings) it was opened with, its clocks. */
typedef struct wfile {
    faid_sfile *sf; /* NULL: a free slot */
    uint64_t series_id;
    char uid[FAID_SERIES_UID_MAX];
    faid_gen *gen;
    /* the setup of the series' start: its writer.* settings (directory, what to write, flush
     * interval, timeout) hold for the whole series, across a reload's new setup within it (a
     * reload applies them from the next series) */
    faid_gen *wgen;
    uint64_t seq; /* the start that opened it (newest = highest) */
    int64_t last_msg_ns, next_flush_ns;
    /* writer.hits: the hits file (opened at the first hit: the frames' type and encoding are
     * those of the chunks as they arrive), the peaks of the last hit result, waiting for its
     * frame */
    int hits_on, hits_failed;
    faid_nxmx *hits;
    char hits_path[4200]; /* where the hits file was created, its identity there */
    dev_t hits_dev;
    ino_t hits_ino;
    faid_peak_list *pk;
    uint64_t pk_frame;
    int pk_valid;
} wfile;

/* Files open at once: a series' last results and end can come after the next series' start
 * (starts overtake results still on a device), so a file stays open until its end. */
#define MAX_OPEN 4

struct faid_writer {
    faid_queue *q;
    int64_t cap_bytes;
    pthread_t thread;
    int started;
    faid_writer_stats st;
    atomic_int hits_on;
    atomic_uint_fast64_t dropped_results; /* results dropped so far (the publisher adds) */
    uint64_t told_results;                /* writer's: dropped results told to a file */
    pthread_mutex_t mu;                   /* file and dir below (status reads them) */
    char file[4096];
    char dir[FAID_PATH_MAX];
    /* the target set by control `writer` / REST PUT /api/v1/writer (mu): "" keeps
     * writer.directory, and no prefix */
    char tdir[FAID_PATH_MAX];
    char tprefix[FAID_WRITER_PREFIX_MAX];
    /* the writer thread's own */
    wfile open[MAX_OPEN];
    uint64_t seq; /* starts seen */
    /* the last series whose file failed: its other results are counted as skipped */
    int has_failed;
    uint64_t failed_id;
    char failed_uid[FAID_SERIES_UID_MAX];
    int64_t next_space_ns;
    wfile *last_result; /* the file of the last result: its hit frame follows it */
};

static faid_ratelimit rl_err, rl_drop;

faid_writer *faid_writer_new(int64_t queue_bytes)
{
    faid_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->q = faid_queue_new(QUEUE_ITEMS);
    if (!w->q) {
        free(w);
        return NULL;
    }
    w->cap_bytes = queue_bytes;
    pthread_mutex_init(&w->mu, NULL);
    return w;
}

faid_writer_stats *faid_writer_stats_of(faid_writer *w)
{
    return &w->st;
}

int faid_writer_on(faid_writer *w)
{
    return w && atomic_load_explicit(&w->st.on, memory_order_relaxed);
}

int faid_writer_hits_on(faid_writer *w)
{
    return w && atomic_load_explicit(&w->hits_on, memory_order_relaxed);
}

/* The directory a series with configuration c goes to: the target's, else writer.directory. */
static void effective_dir(faid_writer *w, const faid_config *c, char *dir, size_t cap, char *prefix,
                          size_t pcap)
{
    pthread_mutex_lock(&w->mu);
    snprintf(dir, cap, "%s", w->tdir[0] ? w->tdir : c->writer_directory);
    if (prefix)
        snprintf(prefix, pcap, "%s", w->tprefix);
    pthread_mutex_unlock(&w->mu);
}

int faid_writer_prefix_check(const char *prefix, faid_diag *d)
{
    size_t n = strlen(prefix);
    if (n >= FAID_WRITER_PREFIX_MAX)
        return faid_fail(d, FAID_EINVAL, "writer: prefix: longer than %d bytes",
                         FAID_WRITER_PREFIX_MAX - 1);
    if (strstr(prefix, ".."))
        return faid_fail(d, FAID_EINVAL, "writer: prefix '%s': contains '..'", prefix);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)prefix[i];
        /* the characters faid_writer_file_name keeps; a leading '.' or '-' hides the file or
         * reads as an option */
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ((ch == '-' || ch == '.') && i > 0);
        if (!ok)
            return faid_fail(d, FAID_EINVAL,
                             "writer: prefix: byte %zu (0x%02x) is not a letter, digit, '_', "
                             "'-' or '.' (and '-', '.' not first); no '/'",
                             i, ch);
    }
    return 0;
}

int faid_writer_set_target(faid_writer *w, const char *dir, const char *prefix, const char *root,
                           faid_diag *d)
{
    char real[FAID_PATH_MAX] = "";
    if (prefix && faid_writer_prefix_check(prefix, d))
        return d->code;
    if (dir && dir[0]) {
        if (dir[0] != '/')
            return faid_fail(d, FAID_EINVAL, "writer: directory '%s': not an absolute path", dir);
        char buf[PATH_MAX];
        if (!realpath(dir, buf))
            return faid_fail(d, FAID_EINVAL, "writer: directory '%s': %s", dir, strerror(errno));
        struct stat st;
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
            return faid_fail(d, FAID_EINVAL, "writer: directory '%s': not a directory", dir);
        if (root && root[0]) {
            /* Compared after both are resolved, so neither '..' nor a link leads out. */
            char rbuf[PATH_MAX];
            if (!realpath(root, rbuf))
                return faid_fail(d, FAID_ECONFIG, "writer.root '%s': %s", root, strerror(errno));
            size_t rn = strlen(rbuf);
            int inside = strncmp(buf, rbuf, rn) == 0 &&
                         (buf[rn] == '\0' || buf[rn] == '/' || (rn == 1 && rbuf[0] == '/'));
            if (!inside)
                return faid_fail(d, FAID_ERANGE, "writer: directory '%s': outside writer.root %s",
                                 dir, rbuf);
        }
        if (strlen(buf) >= sizeof real)
            return faid_fail(d, FAID_ESIZE, "writer: directory '%s': path too long", dir);
        memcpy(real, buf, strlen(buf) + 1);
    }
    pthread_mutex_lock(&w->mu);
    if (dir)
        snprintf(w->tdir, sizeof w->tdir, "%s", real);
    if (prefix)
        snprintf(w->tprefix, sizeof w->tprefix, "%s", prefix);
    pthread_mutex_unlock(&w->mu);
    FAID_INFO("writer", "target for the next series: directory %s, prefix '%s'",
              dir ? (real[0] ? real : "(writer.directory)") : "(unchanged)",
              prefix ? prefix : "(unchanged)");
    return 0;
}

void faid_writer_target(faid_writer *w, const char *cfg_dir, char *dir, size_t dcap, char *prefix,
                        size_t pcap)
{
    pthread_mutex_lock(&w->mu);
    snprintf(dir, dcap, "%s", w->tdir[0] ? w->tdir : cfg_dir ? cfg_dir : "");
    snprintf(prefix, pcap, "%s", w->tprefix);
    pthread_mutex_unlock(&w->mu);
}

void faid_writer_current(faid_writer *w, char *file, size_t cap, char *dir, size_t dcap)
{
    pthread_mutex_lock(&w->mu);
    snprintf(file, cap, "%s", w->file);
    snprintf(dir, dcap, "%s", w->dir);
    pthread_mutex_unlock(&w->mu);
}

/* ---- publisher side ---------------------------------------------------------------------------
 */

static void item_free(faid_writer *w, witem *it)
{
    if (!it)
        return;
    atomic_fetch_sub_explicit(&w->st.queued_bytes, it->len, memory_order_relaxed);
    faid_gen_release(&it->gen);
    free(it);
}

static void offer(faid_writer *w, faid_wq_kind kind, faid_gen *g, const void *body, size_t len,
                  uint64_t frame_id, faid_dtype dtype, faid_encoding enc)
{
    uint64_t held = atomic_load_explicit(&w->st.queued_bytes, memory_order_relaxed);
    witem *it = NULL;
    if ((int64_t)(held + len) <= w->cap_bytes)
        it = malloc(sizeof *it + len);
    if (it) {
        it->kind = kind;
        it->gen = NULL;
        it->frame_id = frame_id;
        it->dtype = dtype;
        it->enc = enc;
        it->len = len;
        it->dropped_before = atomic_load(&w->dropped_results);
        memcpy(it->body, body, len);
        atomic_fetch_add_explicit(&w->st.queued_bytes, len, memory_order_relaxed);
        if (g) {
            faid_gen_acquire(g);
            it->gen = g;
        }
        if (faid_queue_push(w->q, it, 0) == 0) {
            return;
        }
        item_free(w, it);
    }
    faid_stat_add(&w->st.dropped[kind], 1);
    if (kind == FAID_WQ_RESULT)
        atomic_fetch_add(&w->dropped_results, 1);
    faid_log_ratelimited(&rl_drop, FAID_LOG_WARN, "writer",
                         "writer queue full (writer.queue_bytes %lld): a %s message was not "
                         "written (counted in writer.dropped; the file records it)",
                         (long long)w->cap_bytes, faid_wq_kind_name(kind));
}

void faid_writer_start_series(faid_writer *w, faid_gen *g, int within, const void *body, size_t len)
{
    const faid_config *c = &g->setup->cfg;
    /* Test hook: FAID_TEST_WRITER_SWITCH_DELAY_MS holds the publisher before a start turns the
     * writer's switches, so the workers reduce the series' first frames before the switches
     * follow that start (integration.writer_faults). */
    const char *dv = getenv("FAID_TEST_WRITER_SWITCH_DELAY_MS");
    long delay_ms = dv && *dv ? strtol(dv, NULL, 10) : 0;
    if (delay_ms > 0 && delay_ms < 60000)
        nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000L}, NULL);
    /* a new setup within a series keeps what the series' start turned on (writer.* settings
     * apply from the next series); hits need the new setup's peak finder too */
    if (!within) {
        char dir[FAID_PATH_MAX];
        effective_dir(w, c, dir, sizeof dir, NULL, 0);
        atomic_store(&w->st.on, dir[0] != 0);
        atomic_store(&w->hits_on, dir[0] && c->writer_hits && g->setup->csr_bg);
    } else if (!g->setup->csr_bg) {
        atomic_store(&w->hits_on, 0);
    }
    offer(w, FAID_WQ_START, g, body, len, 0, FAID_DT_INVALID, FAID_ENC_NONE);
}

void faid_writer_result(faid_writer *w, const void *body, size_t len)
{
    offer(w, FAID_WQ_RESULT, NULL, body, len, 0, FAID_DT_INVALID, FAID_ENC_NONE);
}

void faid_writer_end(faid_writer *w, const void *body, size_t len)
{
    offer(w, FAID_WQ_END, NULL, body, len, 0, FAID_DT_INVALID, FAID_ENC_NONE);
}

void faid_writer_hit(faid_writer *w, uint64_t frame_id, faid_dtype dtype, faid_encoding enc,
                     const void *chunk, size_t len)
{
    offer(w, FAID_WQ_HIT, NULL, chunk, len, frame_id, dtype, enc);
}

/* ---- the writer thread ------------------------------------------------------------------------
 */

static faid_writer_error classify(int e)
{
    switch (e) {
    case ENOSPC:
    case EDQUOT:
        return FAID_WERR_NO_SPACE;
    case EFBIG:
        return FAID_WERR_FILE_SIZE;
    case ESTALE:
        return FAID_WERR_REMOVED;
    case ENOENT:
    case ENOTDIR:
    case EACCES:
    case EPERM:
    case EROFS:
        return FAID_WERR_UNWRITABLE;
    default:
        return FAID_WERR_IO;
    }
}

/* libhdf5 does not always leave the system error in errno: a full file system and a file at the
 * size limit are recognised from the file system and the limit. */
static int probe_errno(int e, const char *path, const char *dir)
{
    if (e && e != EIO)
        return e;
    struct statvfs v;
    if (dir[0] && statvfs(dir, &v) == 0 && v.f_bavail == 0)
        return ENOSPC;
    struct rlimit rl;
    struct stat st;
    if (path && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        stat(path, &st) == 0 && (rlim_t)st.st_size + 65536 >= rl.rlim_cur)
        return EFBIG;
    return e ? e : EIO;
}

static void set_file(faid_writer *w, const char *file)
{
    pthread_mutex_lock(&w->mu);
    snprintf(w->file, sizeof w->file, "%s", file ? file : "");
    pthread_mutex_unlock(&w->mu);
}

static void count_error(faid_writer *w, int err, const char *path, const faid_diag *d)
{
    faid_writer_error k =
        d->code == FAID_EIO ? classify(probe_errno(err, path, w->dir)) : FAID_WERR_MESSAGE;
    faid_stat_add(&w->st.errors[k], 1);
    faid_log_ratelimited(&rl_err, FAID_LOG_ERROR, "writer", "%s (writer.errors %s)", d->msg,
                         faid_writer_error_name(k));
}

/* The series a message belongs to: series_id and series_unique_id. */
static void series_of(const void *body, size_t len, uint64_t *id, char uid[FAID_SERIES_UID_MAX])
{
    faid_mp_obj o;
    faid_diag d = {0};
    *id = 0;
    uid[0] = 0;
    if (faid_proto_map_find(body, len, "series_id", &o, NULL, &d) == 0)
        faid_mp_to_u64(&o, id);
    if (faid_proto_map_find(body, len, "series_unique_id", &o, NULL, &d) == 0 &&
        o.type == FAID_MP_STR && o.len < FAID_SERIES_UID_MAX) {
        memcpy(uid, o.ptr, o.len);
        uid[o.len] = 0;
    }
}

static wfile *find_file(faid_writer *w, uint64_t id, const char *uid)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (w->open[i].sf && w->open[i].series_id == id && strcmp(w->open[i].uid, uid) == 0)
            return &w->open[i];
    return NULL;
}

static wfile *newest(faid_writer *w)
{
    wfile *n = NULL;
    for (int i = 0; i < MAX_OPEN; i++)
        if (w->open[i].sf && (!n || w->open[i].seq > n->seq))
            n = &w->open[i];
    return n;
}

/* The newest open file names status' `file`. */
static void show_newest(faid_writer *w)
{
    wfile *n = newest(w);
    set_file(w, n ? faid_sfile_path(n->sf) : NULL);
}

/* Frames and bytes written are published as they reach the file (block writes). */
static void account(faid_writer *w, wfile *f, uint64_t frames0, uint64_t bytes0)
{
    uint64_t f1 = faid_sfile_frames(f->sf), b1 = faid_sfile_bytes(f->sf);
    faid_stat_add(&w->st.frames_written, f1 - frames0);
    faid_stat_add(&w->st.bytes_written, b1 - bytes0);
}

static void release(faid_writer *w, wfile *f)
{
    faid_diag ignore = {0};
    faid_nxmx_close(&f->hits, &ignore);
    faid_peak_list_destroy(&f->pk);
    if (w->last_result == f)
        w->last_result = NULL;
    faid_gen_release(&f->gen);
    faid_gen_release(&f->wgen);
    memset(f, 0, sizeof *f);
    atomic_fetch_sub(&w->st.files_open, 1);
    show_newest(w);
}

/* The hits file failed: counted, closed; the series file goes on. */
static void fail_hits(faid_writer *w, wfile *f, const char *path, int err, const faid_diag *d)
{
    count_error(w, err, path, d);
    faid_diag ignore = {0};
    faid_nxmx_close(&f->hits, &ignore);
    f->hits_failed = 1;
}

/* True (and the error counted, the hits file closed) when the hits file is no longer at its
 * path: unlinked, replaced, or its directory removed. Writing on would succeed into a file
 * nobody can open and count hits that are lost (tests/soak/probe_writer.py found the hits file
 * unlinked mid-series silently taking every later hit); the series file checks the same at its
 * flushes (faid_sfile.c). */
static int hits_gone(faid_writer *w, wfile *f)
{
    struct stat st;
    if (!f->hits ||
        (stat(f->hits_path, &st) == 0 && st.st_dev == f->hits_dev && st.st_ino == f->hits_ino))
        return 0;
    faid_diag d = {0};
    faid_fail(&d, FAID_EIO, "%s: the file was removed (or its directory) while written",
              f->hits_path);
    fail_hits(w, f, NULL, ESTALE, &d);
    return 1;
}

static void flush_hits(faid_writer *w, wfile *f)
{
    if (!f->hits || hits_gone(w, f))
        return;
    faid_diag d = {0};
    errno = 0;
    if (faid_nxmx_flush(f->hits, &d))
        fail_hits(w, f, NULL, errno, &d);
}

static void close_hits(faid_writer *w, wfile *f)
{
    if (!f->hits || hits_gone(w, f))
        return;
    faid_diag d = {0};
    errno = 0;
    uint64_t b0 = faid_nxmx_bytes(f->hits);
    if (faid_nxmx_close(&f->hits, &d))
        count_error(w, errno, NULL, &d);
    (void)b0;
}

/* One hit frame as it arrived: into the hits file of the file whose result came just before. */
static void write_hit(faid_writer *w, const witem *it)
{
    wfile *f = w->last_result;
    if (!f || !f->sf || !f->hits_on || f->hits_failed || !f->pk_valid ||
        f->pk_frame != it->frame_id)
        return;
    f->pk_valid = 0;
    faid_diag d = {0};
    char path[4200] = "";
    if (!f->hits) {
        faid_diag gd = {0};
        if (faid_whits_path(path, sizeof path, faid_sfile_path(f->sf), &d) == 0) {
            char name[64];
            if (!f->uid[0])
                snprintf(name, sizeof name, "series %llu", (unsigned long long)f->series_id);
            errno = 0;
            if (faid_whits_open(&f->hits, path, f->gen->setup, f->uid[0] ? f->uid : name, it->dtype,
                                it->enc, 1, &gd, &d) == 0) {
                if (gd.code)
                    FAID_WARN("writer", "%s", gd.msg);
            }
        }
        if (!f->hits) {
            fail_hits(w, f, path, errno, &d);
            return;
        }
        struct stat st;
        snprintf(f->hits_path, sizeof f->hits_path, "%s", path);
        if (stat(path, &st) == 0) {
            f->hits_dev = st.st_dev;
            f->hits_ino = st.st_ino;
        }
    }
    /* one stat(2) per hit frame, beside the write of its chunk: a hit counted as written is in
     * a file that can be opened */
    if (hits_gone(w, f))
        return;
    uint64_t b0 = faid_nxmx_bytes(f->hits);
    errno = 0;
    int rc = faid_nxmx_append(f->hits, it->frame_id, it->body, it->len, f->pk, &d);
    int err = errno;
    faid_stat_add(&w->st.bytes_written, faid_nxmx_bytes(f->hits) - b0);
    if (rc == FAID_ESIZE || rc == FAID_EFORMAT || rc == FAID_ETRUNC) {
        count_error(w, 0, NULL, &d); /* that frame only */
        return;
    }
    if (rc) {
        fail_hits(w, f, NULL, err, &d);
        return;
    }
    faid_stat_add(&w->st.hit_frames_written, 1);
}

/* A write failed: the file is closed as far as it can be and the series' other results skipped. */
static void fail_file(faid_writer *w, wfile *f, int err, const faid_diag *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", faid_sfile_path(f->sf));
    count_error(w, err, path, d);
    /* the series' hits file: closed here, its own failure (removed with the directory, the
     * disk full) counted and named, never left to a silent close */
    close_hits(w, f);
    faid_diag ignore = {0};
    faid_sfile_close(&f->sf, NULL, 0, "error", &ignore);
    w->failed_id = f->series_id;
    snprintf(w->failed_uid, sizeof w->failed_uid, "%s", f->uid);
    w->has_failed = 1;
    release(w, f);
}

/* Closes a file; reason is used when there is no end message. */
static void close_file(faid_writer *w, wfile *f, const void *end, size_t len, const char *reason)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", faid_sfile_path(f->sf));
    uint64_t frames = faid_sfile_frames(f->sf);
    faid_diag d = {0};
    /* The last block is written (and counted) by a flush before the end is written. */
    uint64_t f0 = faid_sfile_frames(f->sf), b0 = faid_sfile_bytes(f->sf);
    errno = 0;
    int rc = faid_sfile_flush(f->sf, &d);
    int err = errno;
    account(w, f, f0, b0);
    if (rc) {
        fail_file(w, f, err, &d);
        return;
    }
    close_hits(w, f);
    errno = 0;
    rc = faid_sfile_close(&f->sf, end, len, reason, &d);
    err = errno;
    release(w, f);
    if (rc) {
        count_error(w, err, path, &d);
        return;
    }
    faid_stat_add(&w->st.files_written, 1);
    FAID_INFO("writer", "%s: %llu frame(s) written (%s)", path, (unsigned long long)frames,
              end ? "end" : reason);
}

/* wgen: the setup whose writer.* settings the file takes (a reference handed over), NULL: the
 * start's own. */
static void open_file(faid_writer *w, witem *it, uint64_t series_id, const char *uid,
                      faid_gen *wgen)
{
    const faid_config *c = &(wgen ? wgen : it->gen)->setup->cfg;
    char wdir[FAID_PATH_MAX], prefix[FAID_WRITER_PREFIX_MAX];
    effective_dir(w, c, wdir, sizeof wdir, prefix, sizeof prefix);
    pthread_mutex_lock(&w->mu);
    snprintf(w->dir, sizeof w->dir, "%s", wdir);
    pthread_mutex_unlock(&w->mu);
    /* The prefix goes before the series' name (its own name when the start had none). */
    char named[FAID_WRITER_PREFIX_MAX + FAID_SERIES_UID_MAX + 32];
    if (prefix[0]) {
        if (uid[0])
            snprintf(named, sizeof named, "%s%s", prefix, uid);
        else
            snprintf(named, sizeof named, "%sseries_%llu", prefix, (unsigned long long)series_id);
    } else {
        snprintf(named, sizeof named, "%s", uid);
    }
    /* a slot: the free one, else the oldest file is closed (its end never came) */
    wfile *f = NULL;
    for (int i = 0; i < MAX_OPEN && !f; i++)
        if (!w->open[i].sf)
            f = &w->open[i];
    if (!f) {
        f = &w->open[0];
        for (int i = 1; i < MAX_OPEN; i++)
            if (w->open[i].seq < f->seq)
                f = &w->open[i];
        close_file(w, f, NULL, 0, "superseded");
    }
    faid_sfile_params p = {
        .peaks = c->writer_peaks,
        .cake = c->writer_cake,
        .profiles = c->writer_profiles,
        .swmr = 1,
        .block_frames = c->writer_block_frames,
    };
    char path[4096] = "";
    faid_diag d = {0};
    int rc = 0, err = 0;
    for (int attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
        faid_diag_clear(&d);
        rc = faid_writer_file_name(path, sizeof path, wdir, named, strlen(named), series_id, "",
                                   attempt, &d);
        if (rc)
            break;
        struct stat st;
        if (lstat(path, &st) == 0) { /* taken (a file, a link, anything): never touched */
            rc = faid_fail(&d, FAID_EIO, "%s: exists", path);
            err = EEXIST;
            continue;
        }
        p.path = path;
        errno = 0;
        rc = faid_sfile_open(&f->sf, &p, it->body, it->len, &d);
        err = errno;
        if (rc != FAID_EIO || err != EEXIST)
            break;
    }
    if (rc) {
        f->sf = NULL;
        faid_gen_release(&wgen);
        count_error(w, err, path, &d);
        w->failed_id = series_id;
        snprintf(w->failed_uid, sizeof w->failed_uid, "%s", uid);
        w->has_failed = 1;
        return;
    }
    f->series_id = series_id;
    snprintf(f->uid, sizeof f->uid, "%s", uid);
    f->gen = it->gen;
    it->gen = NULL;
    if (!wgen)
        faid_gen_acquire(wgen = f->gen);
    f->wgen = wgen;
    f->hits_on = c->writer_hits && f->gen->setup->csr_bg;
    if (c->writer_hits && !f->gen->setup->csr_bg)
        FAID_WARN("writer",
                  "%s: writer.hits is on but peaks.algorithm is none: no hits file "
                  "(a hit is what the peak finder decides)",
                  path);
    if (f->hits_on) {
        f->pk = faid_peak_list_new(f->gen->setup->cfg.peaks.max_num_peaks);
        f->hits_on = f->pk != NULL;
    }
    f->seq = w->seq;
    int64_t now = faid_now_ns();
    f->last_msg_ns = now;
    f->next_flush_ns = now + (int64_t)(c->writer_flush_interval * 1e9);
    w->next_space_ns = 0;
    faid_stat_add(&w->st.files_open, 1);
    show_newest(w);
    FAID_INFO("writer", "%s: writing series %llu", path, (unsigned long long)series_id);
}

/* Results dropped before `upto` (the publisher's count when an item was queued, or now) and not
 * yet told to a file: the file of their series counts them (/entry/faid/frames_missing). The
 * dropped results precede the item in the stream, so they belong to its series' file (to the
 * series before it for a start); with the queue empty, to the newest file. */
static void tell_dropped(faid_writer *w, wfile *f, uint64_t upto)
{
    if (upto <= w->told_results)
        return;
    if (f && f->sf)
        faid_sfile_missing(f->sf, upto - w->told_results);
    w->told_results = upto;
}

static void handle(faid_writer *w, witem *it)
{
    uint64_t id;
    char uid[FAID_SERIES_UID_MAX];
    series_of(it->body, it->len, &id, uid);
    wfile *f = it->kind == FAID_WQ_HIT ? NULL : find_file(w, id, uid);
    switch (it->kind) {
    case FAID_WQ_START: {
        /* Test hook: FAID_TEST_WRITER_START_DELAY_MS holds the writer thread at every start, so
         * the integration tests can fill its queue (writer.queue_bytes) on a small detector. */
        const char *dv = getenv("FAID_TEST_WRITER_START_DELAY_MS");
        long delay_ms = dv && *dv ? strtol(dv, NULL, 10) : 0;
        if (delay_ms > 0 && delay_ms < 60000)
            nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000L}, NULL);
        /* A start of a series whose file is open (a reload's setup start, or the series id
         * again) closes that file: a file holds one setup. Files of other series stay open
         * until their end (their last results may still come after this start). */
        faid_mp_obj reason;
        faid_diag d = {0};
        int setup = faid_proto_map_find(it->body, it->len, "reason", &reason, NULL, &d) == 0 &&
                    faid_mp_str_eq(&reason, "setup");
        tell_dropped(w, newest(w), it->dropped_before); /* the series before this start */
        if (setup) {
            /* A reload within the series: its frames go on in a new file (a file holds one
             * setup) with the writer settings of the series' start; a series not being
             * written (writer off at its start, or its file failed) stays so. */
            faid_gen *wg = f ? f->wgen : NULL;
            if (wg)
                faid_gen_acquire(wg);
            if (f)
                close_file(w, f, NULL, 0, "setup");
            w->seq++;
            if (wg && it->gen)
                open_file(w, it, id, uid, wg);
            else
                faid_gen_release(&wg);
            break;
        }
        if (f)
            close_file(w, f, NULL, 0, "superseded");
        w->seq++;
        w->has_failed = 0;
        char tdir[FAID_PATH_MAX] = "";
        if (it->gen)
            effective_dir(w, &it->gen->setup->cfg, tdir, sizeof tdir, NULL, 0);
        if (tdir[0])
            open_file(w, it, id, uid, NULL);
        break;
    }
    case FAID_WQ_RESULT:
        if (f) {
            uint64_t f0 = faid_sfile_frames(f->sf), b0 = faid_sfile_bytes(f->sf);
            tell_dropped(w, f, it->dropped_before);
            faid_diag d = {0};
            errno = 0;
            int rc = faid_sfile_append(f->sf, it->body, it->len, &d);
            int err = errno;
            f->last_msg_ns = faid_now_ns();
            if (rc == FAID_EINVAL || rc == FAID_EFORMAT) {
                count_error(w, 0, NULL, &d); /* that message only */
            } else if (rc) {
                account(w, f, f0, b0);
                fail_file(w, f, err, &d);
            } else {
                account(w, f, f0, b0);
            }
            if (f->sf && f->hits_on && !f->hits_failed) {
                uint64_t fid = 0;
                int hit = 0;
                f->pk_valid =
                    faid_whits_peaks(it->body, it->len, f->pk, &fid, &hit, &d) == 0 && hit;
                f->pk_frame = fid;
                w->last_result = f;
            }
        } else if (w->has_failed && w->failed_id == id && strcmp(w->failed_uid, uid) == 0) {
            faid_stat_add(&w->st.frames_skipped, 1);
        }
        break;
    case FAID_WQ_END:
        if (f) {
            tell_dropped(w, f, it->dropped_before);
            close_file(w, f, it->body, it->len, "end");
        }
        break;
    case FAID_WQ_HIT:
        tell_dropped(w, w->last_result, it->dropped_before);
        write_hit(w, it);
        break;
    default:
        break;
    }
}

/* Periodic work: flushes, series timeouts, free space of the directory. */
static void tick(faid_writer *w, int64_t now)
{
    for (int i = 0; i < MAX_OPEN; i++) {
        wfile *f = &w->open[i];
        if (!f->sf)
            continue;
        const faid_config *c = &f->wgen->setup->cfg;
        if (now - f->last_msg_ns > (int64_t)(c->writer_series_timeout * 1e9)) {
            close_file(w, f, NULL, 0, "timeout");
        } else if (now >= f->next_flush_ns) {
            uint64_t b0 = faid_sfile_bytes(f->sf), f0 = faid_sfile_frames(f->sf);
            faid_diag d = {0};
            errno = 0;
            int rc = faid_sfile_flush(f->sf, &d);
            int err = errno;
            account(w, f, f0, b0);
            if (rc) {
                fail_file(w, f, err, &d);
            } else {
                flush_hits(w, f);
                f->next_flush_ns = now + (int64_t)(c->writer_flush_interval * 1e9);
            }
        }
    }
    if (now >= w->next_space_ns) {
        struct statvfs v;
        char dir[FAID_PATH_MAX];
        pthread_mutex_lock(&w->mu);
        snprintf(dir, sizeof dir, "%s", w->dir);
        pthread_mutex_unlock(&w->mu);
        uint64_t free_b = dir[0] && statvfs(dir, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
        atomic_store(&w->st.free_bytes, free_b);
        w->next_space_ns = now + 1000000000ll;
    }
}

static void *writer_main(void *arg)
{
    faid_writer *w = arg;
    for (;;) {
        int64_t now = faid_now_ns();
        int wait_ms = 200;
        for (int i = 0; i < MAX_OPEN; i++) {
            if (!w->open[i].sf)
                continue;
            int64_t left = (w->open[i].next_flush_ns - now) / 1000000;
            wait_ms = left < 0 ? 0 : left < wait_ms ? (int)left : wait_ms;
        }
        void *item = NULL;
        int rc = faid_queue_pop(w->q, &item, wait_ms);
        if (rc == FAID_ESTOPPED)
            break;
        if (rc == 0) {
            handle(w, item);
            item_free(w, item);
        } else {
            /* nothing queued: what was dropped since belongs to the newest series */
            tell_dropped(w, newest(w), atomic_load(&w->dropped_results));
        }
        tick(w, faid_now_ns());
    }
    for (int i = 0; i < MAX_OPEN; i++)
        if (w->open[i].sf)
            close_file(w, &w->open[i], NULL, 0, "shutdown");
    return NULL;
}

int faid_writer_start(faid_writer *w)
{
    if (pthread_create(&w->thread, NULL, writer_main, w))
        return FAID_ENOMEM;
    faid_thread_name(w->thread, "faid-writer");
    w->started = 1;
    return 0;
}

void faid_writer_stop(faid_writer *w)
{
    if (!w)
        return;
    faid_queue_close(w->q);
    if (w->started) {
        pthread_join(w->thread, NULL);
        w->started = 0;
    }
}

void faid_writer_destroy(faid_writer **pw)
{
    if (!pw || !*pw)
        return;
    faid_writer *w = *pw;
    faid_writer_stop(w);
    void *item;
    while (faid_queue_pop(w->q, &item, 0) == 0)
        item_free(w, item);
    faid_queue_destroy(&w->q);
    pthread_mutex_destroy(&w->mu);
    free(w);
    *pw = NULL;
}
