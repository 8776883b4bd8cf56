/* faid_hits_send: hit frames on the hits channel (see faid_hits_send.h). */
#include "faid_hits_send.h"

#include "faid_aggregates.h"
#include "faid_codec.h"
#include "faid_log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static faid_ratelimit rl_hits;

static int grow(void **p, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    void *q = realloc(*p, need);
    if (!q)
        return FAID_ENOMEM;
    *p = q;
    *cap = need;
    return 0;
}

/* A msgpack-numpy array (binary keys nd, type, kind, shape, data: what Python's msgpack-numpy
 * needs; CrystFEL reads them too, with `type` as text). */
static void bin_key(faid_mpw *w, const char *k)
{
    faid_mpw_bin(w, k, strlen(k));
}

/* The head of a msgpack-numpy map up to its "data" key (the caller writes the data and ends the
 * map). */
static void np_head(faid_mpw *w, const char *key, const char *type, const uint64_t *shape,
                    int ndim)
{
    faid_mpw_key(w, key);
    faid_mpw_map_begin(w);
    bin_key(w, FAID_K_ND);
    faid_mpw_bool(w, 1);
    bin_key(w, FAID_K_TYPE);
    faid_mpw_key(w, type);
    bin_key(w, FAID_K_KIND);
    faid_mpw_bin(w, "", 0);
    bin_key(w, FAID_K_SHAPE);
    faid_mpw_array(w, (uint32_t)ndim);
    for (int i = 0; i < ndim; i++)
        faid_mpw_uint(w, shape[i]);
    bin_key(w, FAID_K_DATA);
}

static void put_np(faid_mpw *w, const char *key, const char *type, const uint64_t *shape, int ndim,
                   const void *data, size_t bytes)
{
    np_head(w, key, type, shape, ndim);
    faid_mpw_bin(w, data, bytes);
    faid_mpw_map_end(w);
}

/* A list of floats (CrystFEL reads peak coordinates as floats; integers would be misread). */
static void put_floats(faid_mpw *w, const char *key, const float *f, const int32_t *i, int32_t n)
{
    faid_mpw_key(w, key);
    faid_mpw_array(w, (uint32_t)n);
    for (int32_t k = 0; k < n; k++)
        faid_mpw_f64(w, f ? (double)f[k] : (double)i[k]);
}

/* Sends [identity, "", body] on the request ROUTER (never waits: a requester that went away
 * is simply not answered). */
static int reply(faid_server *s, const uint8_t *id, size_t idlen, const void *body, size_t len)
{
    return zmq_send(s->hits_rep, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
           zmq_send(s->hits_rep, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
           zmq_send(s->hits_rep, body, len, ZMQ_DONTWAIT) >= 0;
}

/* Reads every waiting request (the caller holds hits_mu): `next` queues its requester for the
 * next hit (OM's behaviour), `resetplots` clears the aggregates and is answered Ok, anything
 * else What?. A message that is not [identity, "", request] is read and dropped. */
static void service_locked(faid_server *s)
{
    for (;;) {
        uint8_t id[256], delim[8], req[64];
        int n1 = zmq_recv(s->hits_rep, id, sizeof id, ZMQ_DONTWAIT);
        if (n1 < 0)
            return;
        int more = 0;
        size_t ml = sizeof more;
        zmq_getsockopt(s->hits_rep, ZMQ_RCVMORE, &more, &ml);
        int n2 = more ? zmq_recv(s->hits_rep, delim, sizeof delim, 0) : -1;
        more = 0;
        if (n2 >= 0)
            zmq_getsockopt(s->hits_rep, ZMQ_RCVMORE, &more, &ml);
        int n3 = more ? zmq_recv(s->hits_rep, req, sizeof req, 0) : -1;
        for (more = n3 >= 0; more;) { /* drain extra parts */
            zmq_getsockopt(s->hits_rep, ZMQ_RCVMORE, &more, &ml);
            if (more && zmq_recv(s->hits_rep, req + 0, 0, 0) < 0)
                break;
        }
        if (n1 > (int)sizeof id || n2 != 0 || n3 < 0)
            continue;
        size_t rl = (size_t)n3 < sizeof req ? (size_t)n3 : sizeof req;
        if (rl == 4 && memcmp(req, "next", 4) == 0) {
            if (s->hits_nwaiting == FAID_HITS_WAITING) {
                reply(s, id, (size_t)n1, "What?", 5); /* too many waiting */
                continue;
            }
            memcpy(s->hits_waiting[s->hits_nwaiting].id, id, (size_t)n1);
            s->hits_waiting[s->hits_nwaiting].len = (size_t)n1;
            s->hits_nwaiting++;
        } else if (rl == 10 && memcmp(req, "resetplots", 10) == 0) {
            faid_aggr_reset(s->aggr);
            reply(s, id, (size_t)n1, "Ok", 2);
        } else {
            reply(s, id, (size_t)n1, "What?", 5);
        }
    }
}

void faid_hits_service(faid_server *s)
{
    if (!s->hits_rep)
        return;
    pthread_mutex_lock(&s->hits_mu);
    service_locked(s);
    pthread_mutex_unlock(&s->hits_mu);
}

/* The decoded frame as float32 with masked pixels NaN, in wk->hit_img. */
static int decode_frame(faid_worker *wk, const faid_slot *slot, const faid_setup *su, faid_diag *d)
{
    const faid_in_header *h = &slot->h;
    const size_t npix = su->npix, esz = faid_dtype_size(h->dtype);
    const size_t raw_bytes = npix * esz;
    if ((size_t)h->rows * (size_t)h->cols != npix)
        return faid_fail(d, FAID_ESHAPE, "hit frame shape differs from the setup");
    if (grow((void **)&wk->hit_raw, &wk->hit_raw_cap, raw_bytes) ||
        grow((void **)&wk->hit_img, &wk->hit_img_cap, npix * sizeof(float)))
        return faid_fail(d, FAID_ENOMEM, "out of memory for a hit frame");
    if (h->encoding == FAID_ENC_NONE) {
        if (slot->payload_len != raw_bytes)
            return faid_fail(d, FAID_ESIZE, "hit frame of %zu bytes, expected %zu",
                             slot->payload_len, raw_bytes);
        memcpy(wk->hit_raw, slot->payload, raw_bytes);
    } else {
        int rc = faid_decode(h->encoding, slot->payload, slot->payload_len, esz, wk->hit_raw,
                             raw_bytes, d);
        if (rc)
            return rc;
    }
    faid_dtype_to_f32(h->dtype, wk->hit_raw, npix, wk->hit_img);
    for (size_t i = 0; su->mask && i < npix; i++)
        if (su->mask[i])
            wk->hit_img[i] = NAN;
    return 0;
}

void faid_hits_send(faid_worker *wk, const faid_slot *slot, const faid_gen *g, const faid_result *r)
{
    faid_server *s = wk->srv;
    const faid_setup *su = g->setup;
    const faid_config *c = &su->cfg;
    const faid_peak_list *l = r->peaks;
    faid_diag d = {0};
    if ((!s->hits && !s->hits_rep) || !l || !r->is_hit || !slot->payload)
        return;
    if (decode_frame(wk, slot, su, &d)) {
        faid_stat_add(&s->stats.hits_dropped, 1);
        faid_log_ratelimited(&rl_hits, FAID_LOG_WARN, "hits", "frame %llu not sent: %s",
                             (unsigned long long)slot->h.frame_id, d.msg);
        return;
    }
    const int patches = c->hits_mode == FAID_HITS_PATCHES;
    const int pr = c->hits_patch_radius, side = 2 * pr + 1;
    const size_t nb = su->csr_bg ? (size_t)su->csr_bg->nbins : 0;
    size_t need = (size_t)l->n * 6 * 9 + 4096 + FAID_SERIES_UID_MAX;
    need += patches ? (size_t)l->n * ((size_t)side * side * 4 + 16) + nb * 12
                    : su->npix * sizeof(float);
    if (grow((void **)&wk->hit_msg, &wk->hit_msg_cap, need)) {
        faid_stat_add(&s->stats.hits_dropped, 1);
        return;
    }
    char event_id[FAID_SERIES_UID_MAX + 64];
    snprintf(event_id, sizeof event_id, "%s//%llu",
             slot->series_uid[0] ? slot->series_uid : "series",
             (unsigned long long)slot->h.frame_id);
    faid_mpw w;
    faid_mpw_init(&w, wk->hit_msg, wk->hit_msg_cap);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_TYPE);
    faid_mpw_key(&w, "hit");
    faid_mpw_key(&w, FAID_K_SERIES_ID);
    faid_mpw_uint(&w, slot->series_id);
    faid_mpw_key(&w, FAID_K_FRAME_ID);
    faid_mpw_uint(&w, slot->h.frame_id);
    faid_mpw_key(&w, FAID_K_EVENT_ID);
    faid_mpw_str(&w, event_id);
    faid_mpw_key(&w, FAID_K_TIMESTAMP);
    faid_mpw_f64(&w, slot->h.has_timestamp ? slot->h.timestamp : (double)slot->recv_wall_ns * 1e-9);
    faid_mpw_key(&w, FAID_K_BEAM_ENERGY); /* eV = h c / lambda */
    faid_mpw_f64(&w, 1.2398419843320026e-6 / su->geom.wavelength);
    faid_mpw_key(&w, FAID_K_DETECTOR_DISTANCE); /* mm */
    faid_mpw_f64(&w, su->geom.dist * 1e3);
    faid_mpw_key(&w, FAID_K_NUM_PEAKS);
    faid_mpw_uint(&w, (uint64_t)(r->num_peaks > 0 ? r->num_peaks : 0));
    faid_mpw_key(&w, FAID_K_SETUP_VERSION);
    faid_mpw_uint(&w, g->version);
    faid_mpw_key(&w, FAID_K_PEAK_LIST);
    faid_mpw_map_begin(&w);
    put_floats(&w, FAID_K_FS, l->x, NULL, l->n);
    put_floats(&w, FAID_K_SS, l->y, NULL, l->n);
    put_floats(&w, FAID_K_INTENSITY, l->intensity, NULL, l->n);
    put_floats(&w, FAID_K_NUM_PIXELS, NULL, l->npix, l->n);
    put_floats(&w, FAID_K_MAX_PIXEL_INTENSITY, l->max_pixel, NULL, l->n);
    put_floats(&w, FAID_K_SNR, l->snr, NULL, l->n);
    faid_mpw_key(&w, FAID_K_NUM_PEAKS);
    faid_mpw_uint(&w, (uint64_t)l->n);
    faid_mpw_map_end(&w);
    if (!patches) {
        uint64_t shape[2] = {(uint64_t)su->rows, (uint64_t)su->cols};
        put_np(&w, FAID_K_DETECTOR_DATA, "<f4", shape, 2, wk->hit_img, su->npix * sizeof(float));
    } else {
        /* each peak's (2r+1)^2 patch around its rounded centroid, NaN outside the frame; the
         * patch of peak k starts at (row, col) = origin[k] */
        const size_t pn = (size_t)side * (size_t)side;
        uint64_t shape[3] = {(uint64_t)l->n, (uint64_t)side, (uint64_t)side};
        np_head(&w, FAID_K_PEAK_PATCHES, "<f4", shape, 3);
        faid_mpw_bin_head(&w, (size_t)l->n * pn * sizeof(float)); /* the floats follow */
        for (int32_t k = 0; k < l->n; k++) {
            long r0 = lrintf(l->y[k]) - pr, c0 = lrintf(l->x[k]) - pr;
            for (int i = 0; i < side; i++)
                for (int j = 0; j < side; j++) {
                    long rr = r0 + i, cc = c0 + j;
                    float v = rr >= 0 && cc >= 0 && rr < su->rows && cc < su->cols
                                  ? wk->hit_img[(size_t)rr * (size_t)su->cols + (size_t)cc]
                                  : NAN;
                    faid_mpw_bytes(&w, &v, sizeof v); /* little-endian hosts only (as the rest) */
                }
        }
        faid_mpw_map_end(&w);
        faid_mpw_key(&w, FAID_K_PEAK_PATCH_ORIGIN);
        faid_mpw_array(&w, (uint32_t)l->n);
        for (int32_t k = 0; k < l->n; k++) {
            faid_mpw_array(&w, 2);
            faid_mpw_int(&w, lrintf(l->y[k]) - pr);
            faid_mpw_int(&w, lrintf(l->x[k]) - pr);
        }
        uint64_t sb[1] = {(uint64_t)nb};
        put_np(&w, FAID_K_BG_I, "<f4", sb, 1, r->bg ? r->bg->mean : NULL, nb * sizeof(float));
    }
    faid_mpw_map_end(&w);
    if (faid_mpw_finish(&w, &d)) {
        faid_stat_add(&s->stats.hits_dropped, 1);
        faid_log_ratelimited(&rl_hits, FAID_LOG_WARN, "hits", "frame %llu not sent: %s",
                             (unsigned long long)slot->h.frame_id, d.msg);
        return;
    }
    pthread_mutex_lock(&s->hits_mu);
    if (s->hits) {
        int ok = zmq_send(s->hits, wk->hit_msg, w.len, ZMQ_DONTWAIT) >= 0;
        faid_stat_add(ok ? &s->stats.hits_sent : &s->stats.hits_dropped, 1);
    }
    if (s->hits_rep) {
        service_locked(s);
        if (s->hits_nwaiting > 0) {
            /* the oldest requester gets this hit */
            if (reply(s, s->hits_waiting[0].id, s->hits_waiting[0].len, wk->hit_msg, w.len))
                faid_stat_add(&s->stats.hits_requested, 1);
            s->hits_nwaiting--;
            memmove(s->hits_waiting, s->hits_waiting + 1,
                    (size_t)s->hits_nwaiting * sizeof s->hits_waiting[0]);
        }
    }
    pthread_mutex_unlock(&s->hits_mu);
}
