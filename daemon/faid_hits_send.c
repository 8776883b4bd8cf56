/* faid_hits_send: hit frames on the hits channel (see faid_hits_send.h). */
#include "faid_hits_send.h"

#include "faid_aggregates.h"
#include "faid_codec.h"
#include "faid_log.h"
#include "faid_proto_out.h"

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
    faid_out_hit o = {
        .series_id = slot->series_id,
        .frame_id = slot->h.frame_id,
        .event_id = event_id,
        .timestamp = slot->h.has_timestamp ? slot->h.timestamp : (double)slot->recv_wall_ns * 1e-9,
        .beam_energy = 1.2398419843320026e-6 / su->geom.wavelength, /* eV = h c / lambda */
        .detector_distance = su->geom.dist * 1e3,                   /* mm */
        .num_peaks = (uint64_t)(r->num_peaks > 0 ? r->num_peaks : 0),
        .setup_version = g->version,
        .npeaks = l->n,
        .x = l->x,
        .y = l->y,
        .intensity = l->intensity,
        .npix = l->npix,
        .max_pixel = l->max_pixel,
        .snr = l->snr,
        .image = wk->hit_img,
        .rows = su->rows,
        .cols = su->cols,
        .patch_radius = patches ? pr : -1,
        .bg_I = r->bg ? r->bg->mean : NULL,
        .nbg = nb,
    };
    faid_mpw w;
    faid_mpw_init(&w, wk->hit_msg, wk->hit_msg_cap);
    faid_proto_write_hit(&w, &o);
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
