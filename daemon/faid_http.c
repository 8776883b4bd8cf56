/* faid_http: the HTTP server, dashboard state and event streams (see faid_http.h). */
#include "faid_http.h"

#include "faid_aggregates.h"
#include "faid_log.h"
#include "faid_metrics.h"
#include "faid_state.h"

#include "faid_gen.h"
#include "faid_file.h"
#include "faid_pool.h"
#include "faid_rest.h"
#include "faid_textbuf.h"
#include "faid_web.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#define REBUILD_NS   (100ll * 1000000ll)   /* dashboard state at most 10 per second */
#define SEND_NS      (100ll * 1000000ll)   /* at most 10 events per second per browser */
#define KEEPALIVE_NS (15ll * 1000000000ll) /* a comment line keeps proxies from closing */
#define WAIT_NS      (100ll * 1000000ll)   /* event streams notice a stop within this */

/* A connection as faid tracks it (conn_mu): in_header while no request is in progress (its
 * header still arriving, or idle between requests): those are the ones shed when full. */
typedef struct conn_slot {
    struct MHD_Connection *c;
    int fd;
    int64_t t0;
    int in_header, shut, loopback;
    unsigned char addr[16];
} conn_slot;

/* A REST request being read (libmicrohttpd's per-request pointer). */
typedef struct api_req {
    int route;
    char *body;
    size_t len, cap;
    int too_big;
} api_req;

/* A result body (msgpack) handed over by the publisher. */
typedef struct snapshot {
    uint8_t *buf;
    size_t len, cap;
    uint64_t seq; /* order among all results offered */
} snapshot;

struct faid_http {
    struct MHD_Daemon *mhd;
    faid_rest_tokens *tokens;
    void (*on_stop)(void);
    char *tls_cert, *tls_key;
    pthread_mutex_t conn_mu;
    conn_slot conns[FAID_HTTP_MAX_CONN + 8];
    uint64_t nconns;
    atomic_uint_fast64_t shed_header_wait, shed_per_peer, shed_over_limit, auth_refused;
    _Atomic(faid_server *) srv;
    atomic_int health;
    atomic_int stopping;
    atomic_int clients;

    /* the publisher's snapshot of a result body */
    pthread_mutex_t snap_mu;
    snapshot last, hit; /* the latest result, the latest hit */
    uint64_t snap_seq;

    /* dashboard state (dash_mu) */
    pthread_mutex_t dash_mu;
    snapshot wlast, whit; /* swapped out of the snapshots, being decoded */
    int64_t built_ns;
    char *event; /* "data: {...}\n\n" */
    size_t event_len;
    uint64_t event_seq;
    /* latest profile, downsampled (npts points of k bins each) and the ring for the average */
    int have_profile, npts, k, nbins;
    uint64_t frame_id, series_id, setup_version;
    int device;
    double latency_us;
    float prof[FAID_HTTP_MAX_POINTS];
    float *ring; /* ring_cap x npts */
    int ring_cap, ring_fill, ring_pos;
    double x[FAID_HTTP_MAX_POINTS];
    int have_x;
    char unit[32];
    /* cake, downsampled to at most FAID_HTTP_MAX_POINTS cells */
    int cake_rows, cake_cols;
    float cake[FAID_HTTP_MAX_POINTS];

    /* the peaks of the latest hit (at most FAID_HTTP_MAX_POINTS of them) */
    int have_hit, hit_npk, det_rows, det_cols;
    uint64_t hit_frame_id, hit_series_id, hit_num_peaks;
    float hit_x[FAID_HTTP_MAX_POINTS], hit_y[FAID_HTTP_MAX_POINTS], hit_i[FAID_HTTP_MAX_POINTS];

    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
};

/* ---- snapshot (publisher thread) ------------------------------------------------------------ */

void faid_http_offer(faid_http *h, uint8_t **buf, size_t *cap, size_t len, int is_hit)
{
    /* A pointer swap, no copy: the snapshot takes the body and gives the slot its old buffer,
     * which the worker grows (faid_slot_reserve) only if it is smaller than a result: in steady
     * state never. So every result can be offered and the latest is always the one shown. */
    if (pthread_mutex_trylock(&h->snap_mu) != 0)
        return; /* a connection is swapping the previous one out (nanoseconds): skip this one */
    snapshot *sn = is_hit ? &h->hit : &h->last;
    uint8_t *old = sn->buf;
    size_t old_cap = sn->cap;
    sn->buf = *buf;
    sn->cap = *cap;
    sn->len = len;
    sn->seq = ++h->snap_seq;
    *buf = old;
    *cap = old_cap;
    pthread_mutex_unlock(&h->snap_mu);
}

/* ---- dashboard state (connection threads, dash_mu held) ------------------------------------- */

static float f32_at(const faid_array_view *a, uint64_t i)
{
    float v;
    memcpy(&v, a->data + i * 4, 4);
    return v;
}

/* Mean of the finite values of bins whose count is non-zero, NaN when there is none. */
static float block_mean(const faid_array_view *v, const faid_array_view *cnt, uint64_t r0,
                        uint64_t r1, uint64_t c0, uint64_t c1, uint64_t ncols)
{
    double sum = 0;
    int n = 0;
    for (uint64_t r = r0; r < r1; r++)
        for (uint64_t c = c0; c < c1; c++) {
            uint64_t i = r * ncols + c;
            float x = f32_at(v, i);
            if (cnt->nelem == v->nelem && f32_at(cnt, i) <= 0)
                continue;
            if (isfinite(x)) {
                sum += x;
                n++;
            }
        }
    return n ? (float)(sum / n) : NAN;
}

static void take_profile(faid_http *h, const faid_out_msg *m, int average)
{
    const faid_array_view *I = &m->I;
    if (I->dtype != FAID_DT_F32 || I->nelem == 0)
        return;
    int n = (int)I->nelem;
    int k = (n + FAID_HTTP_MAX_POINTS - 1) / FAID_HTTP_MAX_POINTS;
    int npts = (n + k - 1) / k;
    if (npts != h->npts || k != h->k || m->setup_version != h->setup_version ||
        average != h->ring_cap || m->series_id != h->series_id) {
        /* A new binning (reload) or a new series: the average restarts (and the axis is
         * rebuilt). */
        free(h->ring);
        h->ring = calloc((size_t)average * (size_t)npts, sizeof(float));
        h->ring_cap = h->ring ? average : 0;
        h->ring_fill = h->ring_pos = 0;
        h->have_x = 0;
    }
    h->npts = npts;
    h->k = k;
    h->nbins = n;
    for (int i = 0; i < npts; i++) {
        uint64_t a = (uint64_t)i * (uint64_t)k, b = a + (uint64_t)k;
        if (b > (uint64_t)n)
            b = (uint64_t)n;
        h->prof[i] = block_mean(I, &m->count, 0, 1, a, b, (uint64_t)n);
    }
    if (h->ring_cap) {
        memcpy(h->ring + (size_t)h->ring_pos * (size_t)npts, h->prof, (size_t)npts * sizeof(float));
        h->ring_pos = (h->ring_pos + 1) % h->ring_cap;
        if (h->ring_fill < h->ring_cap)
            h->ring_fill++;
    }
    h->frame_id = m->frame_id;
    h->series_id = m->series_id;
    h->setup_version = m->setup_version;
    h->device = m->device;
    h->latency_us = m->latency_us;
    h->have_profile = 1;

    const faid_array_view *C = &m->I_2d;
    h->cake_rows = h->cake_cols = 0;
    if (C->dtype == FAID_DT_F32 && C->ndim == 2 && C->nelem > 0) {
        uint64_t na = C->shape[0], nr = C->shape[1];
        uint64_t kk = 1;
        while (((na + kk - 1) / kk) * ((nr + kk - 1) / kk) > FAID_HTTP_MAX_POINTS)
            kk++;
        int rows = (int)((na + kk - 1) / kk), cols = (int)((nr + kk - 1) / kk);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) {
                uint64_t r0 = (uint64_t)r * kk, c0 = (uint64_t)c * kk;
                uint64_t r1 = r0 + kk > na ? na : r0 + kk, c1 = c0 + kk > nr ? nr : c0 + kk;
                h->cake[r * cols + c] = block_mean(C, &m->count_2d, r0, r1, c0, c1, nr);
            }
        h->cake_rows = rows;
        h->cake_cols = cols;
    }
}

/* The peaks of a hit: positions (fast, slow pixel coordinates) and intensities, the first
 * FAID_HTTP_MAX_POINTS of them. */
static void take_peaks(faid_http *h, const faid_out_msg *m)
{
    if (!m->has_peaks || m->peak_x.dtype != FAID_DT_F32 || m->peak_y.dtype != FAID_DT_F32 ||
        m->peak_x.nelem != m->peak_y.nelem)
        return;
    uint64_t n = m->peak_x.nelem < FAID_HTTP_MAX_POINTS ? m->peak_x.nelem : FAID_HTTP_MAX_POINTS;
    int has_i = m->peak_intensity.dtype == FAID_DT_F32 && m->peak_intensity.nelem >= n;
    for (uint64_t i = 0; i < n; i++) {
        h->hit_x[i] = f32_at(&m->peak_x, i);
        h->hit_y[i] = f32_at(&m->peak_y, i);
        h->hit_i[i] = has_i ? f32_at(&m->peak_intensity, i) : NAN;
    }
    h->hit_npk = (int)n;
    h->hit_num_peaks = m->num_peaks;
    h->hit_frame_id = m->frame_id;
    h->hit_series_id = m->series_id;
    h->have_hit = 1;
}

static void take_axis(faid_http *h, faid_server *s)
{
    if (!h->have_profile || h->have_x)
        return;
    faid_gen *g = faid_server_current_gen(s);
    if (g && g->version == h->setup_version && g->setup->csr->npt_rad == h->nbins) {
        const double *rc = g->setup->csr->rad_centers;
        for (int i = 0; i < h->npts; i++) {
            int a = i * h->k, b = a + h->k < h->nbins ? a + h->k : h->nbins;
            double sum = 0;
            for (int j = a; j < b; j++)
                sum += rc[j];
            h->x[i] = sum / (b - a);
        }
        snprintf(h->unit, sizeof h->unit, "%s", faid_unit_name(g->setup->cfg.unit));
        h->have_x = 1;
    }
    faid_gen_release(&g);
}

static void json_floats(faid_textbuf *b, const float *v, int n)
{
    faid_tb_puts(b, "[");
    for (int i = 0; i < n; i++) {
        if (i)
            faid_tb_puts(b, ",");
        faid_tb_json_num(b, v[i]);
    }
    faid_tb_puts(b, "]");
}

static const char *health_text(int st)
{
    switch (st) {
    case FAID_HEALTH_READY:
        return "ok";
    case FAID_HEALTH_STOPPING:
        return "stopping: finishing the frames in flight";
    default:
        return "starting: binding the sockets and building the reduction setup";
    }
}

static void build_json(faid_http *h, faid_server *s, faid_textbuf *b)
{
    faid_stats *st = &s->stats;
    faid_tb_puts(b, "data: {\"health\":");
    faid_tb_json_str(b, health_text(atomic_load(&h->health)));
    faid_tb_printf(b, ",\"version\":\"%s\"", FAID_VERSION);
    faid_tb_printf(b, ",\"series_id\":%llu,\"series_frames\":%llu",
                   (unsigned long long)atomic_load(&s->series_id),
                   (unsigned long long)faid_stat_get(&s->series_frames));
    faid_tb_printf(b,
                   ",\"counters\":{\"received\":%llu,\"processed\":%llu,\"failed\":%llu,"
                   "\"dropped\":%llu,\"bad_input\":%llu,\"published\":%llu}",
                   (unsigned long long)faid_stat_get(&st->received),
                   (unsigned long long)faid_stat_get(&st->processed),
                   (unsigned long long)faid_stat_get(&st->failed),
                   (unsigned long long)faid_stat_get(&st->dropped),
                   (unsigned long long)faid_stat_get(&st->bad_input),
                   (unsigned long long)faid_stat_get(&st->published));
    faid_tb_puts(b, ",\"fps\":");
    faid_tb_json_num(b, faid_stats_fps(st));
    /* The quantiles are upper bin edges (about 9 % wide): never shown above the maximum. */
    double lat_max = (double)faid_stat_get(&st->lat_max_ns) / 1e6;
    double p50 = faid_stats_latency_quantile(st, 0.5) / 1e3;
    double p99 = faid_stats_latency_quantile(st, 0.99) / 1e3;
    faid_tb_puts(b, ",\"latency_ms\":{\"p50\":");
    faid_tb_json_num(b, p50 < lat_max ? p50 : lat_max);
    faid_tb_puts(b, ",\"p99\":");
    faid_tb_json_num(b, p99 < lat_max ? p99 : lat_max);
    faid_tb_puts(b, ",\"max\":");
    faid_tb_json_num(b, lat_max);
    faid_tb_printf(b, "},\"queue\":{\"frames\":%zu,\"capacity\":%zu}", faid_queue_len(s->frames),
                   faid_queue_cap(s->frames));
    faid_tb_puts(b, ",\"drops\":{");
    for (int r = 0; r < FAID_NDROPS; r++) {
        faid_tb_printf(b, "%s", r ? "," : "");
        faid_tb_json_str(b, faid_drop_name((faid_drop_reason)r));
        faid_tb_printf(b, ":%llu", (unsigned long long)faid_stat_get(&st->drops[r]));
    }
    faid_tb_puts(b, "},\"errors\":{");
    int first = 1;
    for (int sg = 0; sg < FAID_NWHERE; sg++)
        for (int c = 0; c < FAID_NCODES; c++) {
            uint64_t v = faid_stat_get(&st->errors[sg][c]);
            if (!v)
                continue;
            faid_tb_printf(b, "%s\"%s.%s\":%llu", first ? "" : ",", faid_where_name((faid_where)sg),
                           faid_errname(-c), (unsigned long long)v);
            first = 0;
        }
    faid_tb_puts(b, "},\"devices\":[");
    for (int i = 0; i < s->nworkers; i++) {
        faid_worker *wk = &s->workers[i];
        faid_tb_printf(b, "%s{\"index\":%d,\"name\":", i ? "," : "", i);
        faid_tb_json_str(b, wk->name);
        faid_tb_printf(b, ",\"processed\":%llu,\"failed\":%llu,\"in_flight\":%d,\"busy\":",
                       (unsigned long long)faid_stat_get(&wk->processed),
                       (unsigned long long)faid_stat_get(&wk->failed), atomic_load(&wk->in_flight));
        faid_tb_json_num(b, faid_bits_to_f64(atomic_load(&wk->busy_frac_bits)));
        faid_tb_puts(b, "}");
    }
    faid_tb_puts(b, "]");
    if (s->aggr && faid_stat_get(&st->peak_frames)) {
        int window = 0;
        double rate = faid_aggr_hit_rate(s->aggr, &window);
        faid_tb_printf(b,
                       ",\"peaks\":{\"frames\":%llu,\"hits\":%llu,\"peaks\":%llu,\"window\":%d,"
                       "\"hit_rate\":",
                       (unsigned long long)faid_stat_get(&st->peak_frames),
                       (unsigned long long)faid_stat_get(&st->hits),
                       (unsigned long long)faid_stat_get(&st->peaks_found), window);
        faid_tb_json_num(b, rate);
        faid_tb_puts(b, "}");
    }
    if (h->have_hit) {
        faid_tb_printf(b,
                       ",\"hit\":{\"frame_id\":%llu,\"series_id\":%llu,\"num_peaks\":%llu,"
                       "\"rows\":%d,\"cols\":%d,\"x\":",
                       (unsigned long long)h->hit_frame_id, (unsigned long long)h->hit_series_id,
                       (unsigned long long)h->hit_num_peaks, h->det_rows, h->det_cols);
        json_floats(b, h->hit_x, h->hit_npk);
        faid_tb_puts(b, ",\"y\":");
        json_floats(b, h->hit_y, h->hit_npk);
        faid_tb_puts(b, ",\"intensity\":");
        json_floats(b, h->hit_i, h->hit_npk);
        faid_tb_puts(b, "}");
    }
    if (h->have_profile) {
        faid_tb_printf(b,
                       ",\"profile\":{\"frame_id\":%llu,\"series_id\":%llu,\"setup_version\":%llu,"
                       "\"device\":%d,\"bins\":%d,\"per_point\":%d,\"latency_us\":",
                       (unsigned long long)h->frame_id, (unsigned long long)h->series_id,
                       (unsigned long long)h->setup_version, h->device, h->nbins, h->k);
        faid_tb_json_num(b, h->latency_us);
        faid_tb_puts(b, ",\"unit\":");
        faid_tb_json_str(b, h->have_x ? h->unit : "bin");
        faid_tb_puts(b, ",\"x\":[");
        for (int i = 0; i < h->npts; i++) {
            if (i)
                faid_tb_puts(b, ",");
            faid_tb_json_num(b, h->have_x ? h->x[i] : (double)i * h->k);
        }
        faid_tb_puts(b, "],\"I\":");
        json_floats(b, h->prof, h->npts);
        /* The average of the profiles the dashboard took (not of every result). */
        float avg[FAID_HTTP_MAX_POINTS];
        for (int i = 0; i < h->npts; i++) {
            double sum = 0;
            int n = 0;
            for (int r = 0; r < h->ring_fill; r++) {
                float v = h->ring[(size_t)r * (size_t)h->npts + (size_t)i];
                if (isfinite(v)) {
                    sum += v;
                    n++;
                }
            }
            avg[i] = n ? (float)(sum / n) : NAN;
        }
        faid_tb_printf(b, ",\"average_of\":%d,\"average\":", h->ring_fill);
        json_floats(b, avg, h->npts);
        faid_tb_puts(b, "}");
        if (h->cake_rows) {
            faid_tb_printf(b, ",\"cake\":{\"rows\":%d,\"cols\":%d,\"v\":", h->cake_rows,
                           h->cake_cols);
            json_floats(b, h->cake, h->cake_rows * h->cake_cols);
            faid_tb_puts(b, "}");
        }
    }
    faid_tb_puts(b, "}\n\n");
}

/* Rebuilds the state when it is older than REBUILD_NS; returns its sequence number (changes
 * only when the text does). The caller holds dash_mu. */
static void rebuild(faid_http *h, faid_server *s)
{
    int64_t now = faid_now_ns();
    if (h->event && now - h->built_ns < REBUILD_NS)
        return;
    h->built_ns = now;
    size_t len = 0;
    int take_last = 0, take_hit = 0;
    pthread_mutex_lock(&h->snap_mu);
    /* Swapped out, not copied: the lock is held for nanoseconds. */
    if (h->last.len && h->last.seq != h->wlast.seq) {
        snapshot t = h->wlast;
        h->wlast = h->last;
        h->last = t;
        h->last.len = 0;
        take_last = 1;
    }
    if (h->hit.len && h->hit.seq != h->whit.seq) {
        snapshot t = h->whit;
        h->whit = h->hit;
        h->hit = t;
        h->hit.len = 0;
        take_hit = 1;
    }
    pthread_mutex_unlock(&h->snap_mu);
    if (take_last || take_hit) {
        faid_gen *g = faid_server_current_gen(s);
        int average = g ? g->setup->cfg.http_average : 10;
        if (g) {
            h->det_rows = g->setup->rows;
            h->det_cols = g->setup->cols;
        }
        faid_gen_release(&g);
        /* The profile shown is the newest result, hit or not. */
        const snapshot *prof =
            take_hit && (!take_last || h->whit.seq > h->wlast.seq) ? &h->whit : &h->wlast;
        faid_out_msg m;
        faid_diag d;
        faid_diag_clear(&d);
        memset(&m, 0, sizeof m);
        if (faid_proto_decode_output(prof->buf, prof->len, &m, &d) == 0 &&
            m.type == FAID_OUT_RESULT)
            take_profile(h, &m, average < 1 ? 1 : average);
        memset(&m, 0, sizeof m);
        if (take_hit && faid_proto_decode_output(h->whit.buf, h->whit.len, &m, &d) == 0 &&
            m.type == FAID_OUT_RESULT)
            take_peaks(h, &m);
    }
    take_axis(h, s);
    faid_textbuf b = {0};
    build_json(h, s, &b);
    char *text = faid_tb_take(&b, &len);
    if (!text)
        return;
    if (h->event && h->event_len == len && memcmp(h->event, text, len) == 0) {
        free(text);
        return;
    }
    free(h->event);
    h->event = text;
    h->event_len = len;
    h->event_seq++;
}

/* ---- event stream ---------------------------------------------------------------------------- */

typedef struct sse {
    faid_http *h;
    char *buf;
    size_t len, off, cap;
    uint64_t seq;
    int64_t last_send;
} sse;

static int sse_fill(sse *c, const char *text, size_t len)
{
    if (len > c->cap) {
        char *p = realloc(c->buf, len);
        if (!p)
            return -1;
        c->buf = p;
        c->cap = len;
    }
    memcpy(c->buf, text, len);
    c->len = len;
    c->off = 0;
    return 0;
}

static void wait_stop(faid_http *h, int64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ns;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&h->stop_mu);
    if (!atomic_load(&h->stopping))
        pthread_cond_timedwait(&h->stop_cv, &h->stop_mu, &ts);
    pthread_mutex_unlock(&h->stop_mu);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    sse *c = cls;
    faid_http *h = c->h;
    for (;;) {
        if (c->off < c->len) {
            size_t n = c->len - c->off < max ? c->len - c->off : max;
            memcpy(out, c->buf + c->off, n);
            c->off += n;
            return (ssize_t)n;
        }
        if (atomic_load(&h->stopping))
            return MHD_CONTENT_READER_END_OF_STREAM;
        int64_t now = faid_now_ns();
        faid_server *s = atomic_load(&h->srv);
        if (s && now - c->last_send >= SEND_NS) {
            int sent = 0;
            pthread_mutex_lock(&h->dash_mu);
            rebuild(h, s);
            if (h->event && h->event_seq != c->seq) {
                if (sse_fill(c, h->event, h->event_len) == 0) {
                    c->seq = h->event_seq;
                    sent = 1;
                }
            }
            pthread_mutex_unlock(&h->dash_mu);
            if (sent) {
                c->last_send = now;
                continue;
            }
        }
        if (now - c->last_send >= KEEPALIVE_NS) {
            static const char ka[] = ": keepalive\n\n";
            if (sse_fill(c, ka, sizeof ka - 1) == 0) {
                c->last_send = now;
                continue;
            }
        }
        wait_stop(h, WAIT_NS);
    }
}

static void sse_free(void *cls)
{
    sse *c = cls;
    atomic_fetch_sub(&c->h->clients, 1);
    free(c->buf);
    free(c);
}

/* ---- requests -------------------------------------------------------------------------------- */

static enum MHD_Result send_buf(struct MHD_Connection *conn, unsigned code, const char *type,
                                const void *data, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    /* Everything the page uses comes from faid itself. */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned code, const char *text)
{
    return send_buf(conn, code, "text/plain; charset=utf-8", text, strlen(text),
                    MHD_RESPMEM_MUST_COPY);
}

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return "application/octet-stream";
    if (strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    return "application/octet-stream";
}

static int is_loopback(const struct sockaddr *sa);
static void faid_http_counts_get(faid_http *h, faid_http_counts *c);

static conn_slot *slot_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (conn_slot *)ci->socket_context : NULL;
}

static void set_in_header(faid_http *h, struct MHD_Connection *conn, int in_header)
{
    pthread_mutex_lock(&h->conn_mu);
    conn_slot *sl = slot_of(conn);
    if (sl && sl->c == conn)
        sl->in_header = in_header;
    pthread_mutex_unlock(&h->conn_mu);
}

static enum MHD_Result send_answer(faid_http *h, struct MHD_Connection *conn, faid_rest_answer *a)
{
    if (a->status == MHD_HTTP_UNAUTHORIZED)
        atomic_fetch_add(&h->auth_refused, 1);
    if (!a->body)
        return send_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, a->body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(a->body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (a->challenge)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"faid\"");
    enum MHD_Result ret = MHD_queue_response(conn, a->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* The REST routes: the body is gathered (at most FAID_REST_MAX_BODY bytes), then faid_rest
 * answers. */
static enum MHD_Result on_api(faid_http *h, struct MHD_Connection *conn, const char *url,
                              const char *method, size_t *upload_data_size, const char *upload_data,
                              void **con_cls)
{
    api_req *r = *con_cls;
    faid_rest_answer a = {0};
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        *con_cls = r;
        char allow[64];
        r->route = faid_rest_route_match(method, url, strlen(url), allow, sizeof allow);
        if (r->route == -1) {
            faid_rest_problem_answer(&a, MHD_HTTP_NOT_FOUND,
                                     "no such route (see /api/v1/openapi.json)", NULL);
            return send_answer(h, conn, &a);
        }
        if (r->route == -2) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s takes %s", url, allow);
            faid_rest_problem_answer(&a, MHD_HTTP_METHOD_NOT_ALLOWED, msg, NULL);
            if (!a.body)
                return MHD_NO;
            struct MHD_Response *resp =
                MHD_create_response_from_buffer(a.len, a.body, MHD_RESPMEM_MUST_FREE);
            if (!resp) {
                free(a.body);
                return MHD_NO;
            }
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a.type);
            MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
            enum MHD_Result ret = MHD_queue_response(conn, a.status, resp);
            MHD_destroy_response(resp);
            return ret;
        }
        /* A declared body over the limit is refused before a byte of it is read. */
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > FAID_REST_MAX_BODY) {
            char msg[96];
            snprintf(msg, sizeof msg, "the body passes %u bytes", FAID_REST_MAX_BODY);
            faid_rest_problem_answer(&a, MHD_HTTP_CONTENT_TOO_LARGE, msg, NULL);
            r->route = -3; /* answered */
            return send_answer(h, conn, &a);
        }
        return MHD_YES;
    }
    if (r->route < 0) {
        *upload_data_size = 0; /* answered at the first call: the rest of the body is dropped */
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->too_big || r->len + n > FAID_REST_MAX_BODY) {
            /* A chunked body without a length that passes the limit: the connection closes. */
            return MHD_NO;
        }
        if (r->len + n > r->cap) {
            size_t cap = r->cap ? r->cap : 4096;
            while (cap < r->len + n)
                cap *= 2;
            char *p = realloc(r->body, cap);
            if (!p)
                return MHD_NO;
            r->body = p;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload_data, n);
        r->len += n;
        return MHD_YES;
    }
    faid_rest_call c = {
        .route = r->route,
        .auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
        .ctype = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
        .body = r->body,
        .body_len = r->len,
        .body_too_big = r->too_big,
        .tokens = h->tokens,
    };
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    c.loopback = ci && ci->client_addr && is_loopback(ci->client_addr);
    r->route = -3; /* answered */
    set_in_header(h, conn, 0);
    faid_rest_handle(atomic_load(&h->srv), &c, &a);
    int stop = a.stop;
    enum MHD_Result ret = send_answer(h, conn, &a);
    if (stop && h->on_stop)
        h->on_stop();
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    faid_http *h = cls;
    if (strncmp(url, FAID_REST_PREFIX "/", sizeof FAID_REST_PREFIX) == 0 ||
        strcmp(url, FAID_REST_PREFIX) == 0)
        return on_api(h, conn, url, method, upload_data_size, upload_data, con_cls);
    /* (a REST request stays sheddable until its body is in: a body sent a byte at a time
     * holds a place no longer than a header sent so) */
    set_in_header(h, conn, 0);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return send_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    if (*upload_data_size) {
        *upload_data_size = 0; /* a GET body is ignored */
        return MHD_YES;
    }
    faid_server *s = atomic_load(&h->srv);
    int health = atomic_load(&h->health);
    if (strcmp(url, "/healthz") == 0) {
        if (health == FAID_HEALTH_READY && s)
            return send_text(conn, MHD_HTTP_OK, "ok\n");
        char msg[160];
        snprintf(msg, sizeof msg, "%s\n", health_text(health));
        return send_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
    }
    if (strcmp(url, "/metrics") == 0) {
        if (!s)
            return send_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "starting\n");
        size_t len = 0;
        faid_http_counts hc;
        faid_http_counts_get(h, &hc);
        char *text = faid_metrics_text(s, &hc, &len);
        if (!text)
            return send_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        return send_buf(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, len,
                        MHD_RESPMEM_MUST_FREE);
    }
    if (strcmp(url, "/events") == 0) {
        if (atomic_fetch_add(&h->clients, 1) >= FAID_HTTP_MAX_EVENTS) {
            atomic_fetch_sub(&h->clients, 1);
            return send_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "too many dashboards open\n");
        }
        sse *c = calloc(1, sizeof *c);
        struct MHD_Response *r = c ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                       sse_read, c, sse_free)
                                   : NULL;
        if (!r) {
            free(c);
            atomic_fetch_sub(&h->clients, 1);
            return send_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        }
        c->h = h;
        c->last_send = faid_now_ns() - SEND_NS; /* the current state goes out at once */
        /* a stream is quiet up to KEEPALIVE_NS: it keeps the longer timeout of before */
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)60);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    const char *name = strcmp(url, "/") == 0 ? "index.html" : url + 1;
    for (const faid_web_file *f = faid_web_files; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return send_buf(conn, MHD_HTTP_OK, content_type(f->name), f->data, f->len,
                            MHD_RESPMEM_PERSISTENT);
    return send_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* libmicrohttpd's own messages are about what clients do (a connection over the limit, a
 * malformed request): 1,000 connections over the limit wrote 1,000 lines before they were
 * rate-limited (issue 20, defect 10). */
static faid_ratelimit rl_mhd;

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    faid_http *h = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (h && strstr(msg, "connection limit"))
        atomic_fetch_add(&h->shed_over_limit, 1);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    faid_log_ratelimited(&rl_mhd, FAID_LOG_WARN, "http", "libmicrohttpd: %s", msg);
}

static void shed(conn_slot *sl)
{
    /* The connection's thread sees the end of its socket and closes it; the descriptor is still
     * libmicrohttpd's (it is closed after the CLOSED notification, which takes conn_mu). */
    shutdown(sl->fd, SHUT_RDWR);
    sl->shut = 1;
}

static void peer_key(const struct sockaddr *sa, unsigned char key[16])
{
    memset(key, 0, 16);
    if (sa && sa->sa_family == AF_INET)
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    else if (sa && sa->sa_family == AF_INET6)
        memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    faid_http *h = cls;
    pthread_mutex_lock(&h->conn_mu);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_slot *sl = *socket_context;
        if (sl && sl->c == conn) {
            memset(sl, 0, sizeof *sl);
            h->nconns--;
        }
        *socket_context = NULL;
        pthread_mutex_unlock(&h->conn_mu);
        return;
    }
    conn_slot *sl = NULL;
    for (size_t i = 0; i < sizeof h->conns / sizeof h->conns[0] && !sl; i++)
        if (!h->conns[i].c)
            sl = &h->conns[i];
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!sl || !fi) {
        pthread_mutex_unlock(&h->conn_mu);
        return;
    }
    *sl = (conn_slot){.c = conn, .fd = fi->connect_fd, .t0 = faid_now_ns(), .in_header = 1};
    sl->loopback = ai && ai->client_addr && is_loopback(ai->client_addr);
    peer_key(ai ? ai->client_addr : NULL, sl->addr);
    *socket_context = sl;
    h->nconns++;
    size_t live = 0, same = 0;
    conn_slot *oldest = NULL;
    for (size_t i = 0; i < sizeof h->conns / sizeof h->conns[0]; i++) {
        conn_slot *o = &h->conns[i];
        if (!o->c || o->shut)
            continue;
        live++;
        same += !sl->loopback && memcmp(o->addr, sl->addr, 16) == 0;
        if (o != sl && o->in_header && (!oldest || o->t0 < oldest->t0))
            oldest = o;
    }
    if (same > FAID_HTTP_PER_PEER) {
        shed(sl);
        atomic_fetch_add(&h->shed_per_peer, 1);
    } else if (live > FAID_HTTP_SOFT_CONN && oldest) {
        shed(oldest);
        atomic_fetch_add(&h->shed_header_wait, 1);
    }
    pthread_mutex_unlock(&h->conn_mu);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    faid_http *h = cls;
    api_req *r = *con_cls;
    if (r) {
        free(r->body);
        free(r);
        *con_cls = NULL;
    }
    set_in_header(h, conn, 1); /* idle until its next request */
}

static void faid_http_counts_get(faid_http *h, faid_http_counts *c)
{
    pthread_mutex_lock(&h->conn_mu);
    c->connections = h->nconns;
    pthread_mutex_unlock(&h->conn_mu);
    c->event_clients = atomic_load(&h->clients);
    c->shed_header_wait = atomic_load(&h->shed_header_wait);
    c->shed_per_peer = atomic_load(&h->shed_per_peer);
    c->shed_over_limit = atomic_load(&h->shed_over_limit);
    c->auth_refused = atomic_load(&h->auth_refused);
}

static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

/* A PEM file for GnuTLS, NUL-terminated; a key must be its owner's alone. */
static char *read_pem(const char *what, const char *path, int secret, faid_diag *d)
{
    struct stat sb;
    if (secret && stat(path, &sb) == 0 && (sb.st_mode & 077)) {
        faid_fail(d, FAID_EAUTH,
                  "%s %s: a private key must be readable by its owner only (mode %03o; chmod "
                  "600 it)",
                  what, path, (unsigned)(sb.st_mode & 0777));
        return NULL;
    }
    uint8_t *bytes = NULL;
    size_t n = 0;
    if (faid_file_read_max(path, (size_t)1 << 20, &bytes, &n, d)) {
        faid_diag_prefix(d, "%s: ", what);
        return NULL;
    }
    char *text = malloc(n + 1);
    if (!text) {
        free(bytes);
        faid_fail(d, FAID_ENOMEM, "%s: out of memory", what);
        return NULL;
    }
    memcpy(text, bytes, n);
    text[n] = '\0';
    free(bytes);
    return text;
}

static void scrub_free(char **p)
{
    if (!*p)
        return;
    volatile char *c = *p;
    while (*c)
        *c++ = 0;
    free(*p);
    *p = NULL;
}

faid_http *faid_http_new(const faid_http_opts *o, faid_diag *d)
{
    const char *endpoint = o->endpoint;
    char host[256], port_s[16];
    int port = 0;
    if (faid_config_split_hostport(endpoint, host, sizeof host, &port, d))
        return NULL;
    snprintf(port_s, sizeof port_s, "%d", port);
    int tls = (o->tls_cert && o->tls_cert[0]) || (o->tls_key && o->tls_key[0]);
    if (tls && !(o->tls_cert && o->tls_cert[0] && o->tls_key && o->tls_key[0])) {
        faid_fail(d, FAID_ECONFIG, "http.tls_cert and http.tls_key: both or neither");
        return NULL;
    }
    if (tls && !MHD_is_feature_supported(MHD_FEATURE_TLS)) {
        faid_fail(d, FAID_EUNSUP, "http.tls_cert: this libmicrohttpd has no TLS (GnuTLS)");
        return NULL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host, port_s, &hints, &ai);
    if (rc != 0 || !ai) {
        faid_fail(d, FAID_ECONFIG, "http.endpoint '%s': cannot resolve '%s': %s", endpoint, host,
                  gai_strerror(rc));
        return NULL;
    }
    int loop = is_loopback(ai->ai_addr);
    faid_rest_tokens *tokens = NULL;
    if (o->token_file && o->token_file[0] && faid_rest_tokens_load(o->token_file, &tokens, d)) {
        freeaddrinfo(ai);
        return NULL;
    }
    if (!loop && !tokens) {
        /* The routes that change state would be open to the network: refused, not warned. */
        freeaddrinfo(ai);
        faid_fail(d, FAID_ECONFIG,
                  "http.endpoint '%s' is reachable beyond this host: set http.token_file (the "
                  "REST control routes need bearer tokens there; docs/control.md)",
                  endpoint);
        return NULL;
    }
    faid_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        faid_rest_tokens_destroy(&tokens);
        faid_fail(d, FAID_ENOMEM, "out of memory for the HTTP server");
        return NULL;
    }
    h->tokens = tokens;
    pthread_mutex_init(&h->snap_mu, NULL);
    pthread_mutex_init(&h->dash_mu, NULL);
    pthread_mutex_init(&h->stop_mu, NULL);
    pthread_mutex_init(&h->conn_mu, NULL);
    pthread_cond_init(&h->stop_cv, NULL);
    if (tls && (!(h->tls_cert = read_pem("http.tls_cert", o->tls_cert, 0, d)) ||
                !(h->tls_key = read_pem("http.tls_key", o->tls_key, 1, d)))) {
        freeaddrinfo(ai);
        faid_http_destroy(&h);
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0) |
                     (tls ? MHD_USE_TLS : 0);
    /* Why these limits (issue 19, point 5): with 32 connections and a 60 s timeout, 500
     * half-sent requests made /healthz fail while they stood. The per-IP limit of
     * libmicrohttpd is off: every local peer shares 127.0.0.1, and a local monitor must get in;
     * faid's own accounting (on_connection) sheds the oldest header-waiting connection. */
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, h},
        {MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)FAID_HTTP_MAX_CONN, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)FAID_HTTP_HEADER_S, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, h},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, h},
        {MHD_OPTION_THREAD_STACK_SIZE, (intptr_t)(1 << 20), NULL},
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, h->tls_cert},
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, h->tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    h->mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_ARRAY,
                              opts, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->mhd) {
        faid_fail(d, FAID_EIO,
                  "http.endpoint '%s': cannot listen (in use, not an address of this host, or "
                  "a certificate and key GnuTLS refuses)",
                  endpoint);
        faid_http_destroy(&h);
        return NULL;
    }
    if (!loop && !tls)
        FAID_WARN("http",
                  "http.endpoint %s is reachable beyond this host without TLS: bearer tokens "
                  "cross the network in clear (set http.tls_cert and http.tls_key)",
                  endpoint);
    FAID_INFO("http",
              "dashboard %s://%s/, metrics /metrics, health /healthz, REST /api/v1 (%zu "
              "token(s))",
              tls ? "https" : "http", endpoint, faid_rest_tokens_count(h->tokens));
    return h;
}

void faid_http_on_stop(faid_http *h, void (*fn)(void))
{
    h->on_stop = fn;
}

void faid_http_attach(faid_http *h, faid_server *s)
{
    atomic_store(&h->srv, s);
}

void faid_http_set_health(faid_http *h, faid_health state)
{
    atomic_store(&h->health, (int)state);
}

void faid_http_destroy(faid_http **ph)
{
    faid_http *h = *ph;
    if (!h)
        return;
    pthread_mutex_lock(&h->stop_mu);
    atomic_store(&h->stopping, 1);
    pthread_cond_broadcast(&h->stop_cv);
    pthread_mutex_unlock(&h->stop_mu);
    if (h->mhd)
        MHD_stop_daemon(h->mhd);
    pthread_mutex_destroy(&h->snap_mu);
    pthread_mutex_destroy(&h->dash_mu);
    pthread_mutex_destroy(&h->stop_mu);
    pthread_mutex_destroy(&h->conn_mu);
    pthread_cond_destroy(&h->stop_cv);
    faid_rest_tokens_destroy(&h->tokens);
    scrub_free(&h->tls_key);
    free(h->tls_cert);
    free(h->last.buf);
    free(h->hit.buf);
    free(h->wlast.buf);
    free(h->whit.buf);
    free(h->event);
    free(h->ring);
    free(h);
    *ph = NULL;
}
