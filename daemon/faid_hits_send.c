/* faid_hits_send: hit frames on the hits channel (see faid_hits_send.h). */
#include "faid_hits_send.h"

#include "faid_aggregates.h"
#include "faid_codec.h"
#include "faid_log.h"
#include "faid_proto_out.h"
#include "faid_stats.h"

#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static faid_ratelimit rl_hits;

/* One worker's buffers: the decoded hit frame and its message, grown on demand. */
typedef struct hit_bufs {
    uint8_t *hit_raw;
    float *hit_img;
    uint8_t *hit_msg;
    size_t hit_raw_cap, hit_img_cap, hit_msg_cap;
} hit_bufs;

struct faid_hitsend {
    void *hits;     /* PUB of hit frames (hits.endpoint), or NULL; borrowed from the server */
    void *hits_rep; /* ROUTER answering `next` (hits.request_endpoint), or NULL; borrowed */
    pthread_mutex_t hits_mu; /* workers send and the publisher serves requests under it */
    struct {
        uint8_t id[256];
        size_t len;
    } hits_waiting[FAID_HITS_WAITING]; /* requesters of `next` not answered yet: a ring, the
                                        * oldest at hits_head, one entry per identity */
    int hits_head, hits_nwaiting;
    faid_stats *stats;               /* the server's counters (hits_*) */
    faid_aggr *aggr;                 /* cleared by `resetplots` */
    hit_bufs bufs[FAID_MAX_WORKERS]; /* bufs[i] is only ever used by worker i */
};

faid_hitsend *faid_hitsend_new(void *pub, void *rep, faid_stats *stats, faid_aggr *aggr)
{
    faid_hitsend *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->hits = pub;
    h->hits_rep = rep;
    h->stats = stats;
    h->aggr = aggr;
    pthread_mutex_init(&h->hits_mu, NULL);
    return h;
}

void faid_hitsend_destroy(faid_hitsend **ph)
{
    if (!ph || !*ph)
        return;
    faid_hitsend *h = *ph;
    pthread_mutex_destroy(&h->hits_mu);
    for (int i = 0; i < FAID_MAX_WORKERS; i++) {
        free(h->bufs[i].hit_raw);
        free(h->bufs[i].hit_img);
        free(h->bufs[i].hit_msg);
    }
    free(h);
    *ph = NULL;
}

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

/* Sends [identity, "", body] on the request ROUTER, never waiting. 0, or the errno of the failed
 * send: EHOSTUNREACH when the requester has gone (ZMQ_ROUTER_MANDATORY), EAGAIN when it does not
 * read its replies (its queue is full). */
static int reply(faid_hitsend *s, const uint8_t *id, size_t idlen, const void *body, size_t len)
{
    if (zmq_send(s->hits_rep, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return zmq_errno();
    /* Once the identity frame is taken the rest of the message goes to that peer's pipe. */
    if (zmq_send(s->hits_rep, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(s->hits_rep, body, len, ZMQ_DONTWAIT) < 0)
        return zmq_errno();
    return 0;
}

/* The waiting requesters are a ring of FAID_HITS_WAITING entries, oldest at hits_head. */
static int waiting_at(const faid_hitsend *s, int i)
{
    return (s->hits_head + i) % FAID_HITS_WAITING;
}

static int is_waiting(const faid_hitsend *s, const uint8_t *id, size_t len)
{
    for (int i = 0; i < s->hits_nwaiting; i++) {
        const int k = waiting_at(s, i);
        if (s->hits_waiting[k].len == len && memcmp(s->hits_waiting[k].id, id, len) == 0)
            return 1;
    }
    return 0;
}

static void pop_oldest(faid_hitsend *s)
{
    s->hits_head = waiting_at(s, 1);
    s->hits_nwaiting--;
    atomic_store_explicit(&s->stats->hits_waiting, (uint64_t)s->hits_nwaiting,
                          memory_order_relaxed);
}

/* A `next` from identity id: one waiting entry per identity (a repeat is counted and ignored).
 * With every entry taken the oldest requester is answered What? (ask again) and makes room: the
 * table then holds the newest requesters, so requesters that left cannot keep a live one out
 * (64 that sent `next` and closed made the 65th wait for 64 hits to go to nobody, issue 20). */
static void queue_next(faid_hitsend *s, const uint8_t *id, size_t len)
{
    if (is_waiting(s, id, len)) {
        faid_stat_add(&s->stats->hits_requests_repeated, 1);
        return;
    }
    if (s->hits_nwaiting == FAID_HITS_WAITING) {
        const int k = s->hits_head;
        int rc = reply(s, s->hits_waiting[k].id, s->hits_waiting[k].len, "What?", 5);
        faid_stat_add(rc == EHOSTUNREACH ? &s->stats->hits_requesters_gone
                                         : &s->stats->hits_requests_displaced,
                      1);
        pop_oldest(s);
    }
    const int k = waiting_at(s, s->hits_nwaiting);
    memcpy(s->hits_waiting[k].id, id, len);
    s->hits_waiting[k].len = len;
    s->hits_nwaiting++;
    atomic_store_explicit(&s->stats->hits_waiting, (uint64_t)s->hits_nwaiting,
                          memory_order_relaxed);
    faid_stat_add(&s->stats->hits_requested, 1);
}

/* Gives the hit msg to the oldest waiting requester still there: one that has gone (or stopped
 * reading) frees its entry, counted, and the hit goes to the next. */
static void deliver_locked(faid_hitsend *s, const void *msg, size_t len)
{
    while (s->hits_nwaiting > 0) {
        const int k = s->hits_head;
        int rc = reply(s, s->hits_waiting[k].id, s->hits_waiting[k].len, msg, len);
        pop_oldest(s);
        if (rc == 0) {
            faid_stat_add(&s->stats->hits_delivered, 1);
            return;
        }
        faid_stat_add(&s->stats->hits_requesters_gone, 1);
    }
}

/* Reads at most FAID_HITS_READ_BUDGET requests (the caller holds hits_mu): `next` queues its
 * requester for the next hit (OM's behaviour), `resetplots` clears the aggregates and is
 * answered Ok, anything else What?. A message that is not [identity, "", request] is read and
 * dropped. Returns 1 when the budget ran out (more may be waiting), 0 once the socket is empty. */
static int service_locked(faid_hitsend *s)
{
    for (int n = 0; n < FAID_HITS_READ_BUDGET; n++) {
        uint8_t id[256], delim[8], req[64];
        int n1 = zmq_recv(s->hits_rep, id, sizeof id, ZMQ_DONTWAIT);
        if (n1 < 0)
            return 0;
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
            queue_next(s, id, (size_t)n1);
        } else if (rl == 10 && memcmp(req, "resetplots", 10) == 0) {
            faid_aggr_reset(s->aggr);
            faid_stat_add(&s->stats->hits_resets, 1);
            reply(s, id, (size_t)n1, "Ok", 2);
        } else {
            reply(s, id, (size_t)n1, "What?", 5);
        }
    }
    return 1;
}

int faid_hits_service(faid_hitsend *s)
{
    if (!s || !s->hits_rep)
        return 0;
    pthread_mutex_lock(&s->hits_mu);
    int more = service_locked(s);
    pthread_mutex_unlock(&s->hits_mu);
    return more;
}

/* The decoded frame as float32 with masked pixels NaN, in wk->hit_img. */
static int decode_frame(hit_bufs *wk, const faid_slot *slot, const faid_setup *su, faid_diag *d)
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

void faid_hits_send(faid_hitsend *s, int worker, const faid_slot *slot, const faid_gen *g,
                    const faid_result *r)
{
    hit_bufs *wk = &s->bufs[worker];
    const faid_setup *su = g->setup;
    const faid_config *c = &su->cfg;
    const faid_peak_list *l = r->peaks;
    faid_diag d = {0};
    if ((!s->hits && !s->hits_rep) || !l || !r->is_hit || !slot->payload)
        return;
    if (decode_frame(wk, slot, su, &d)) {
        faid_stat_add(&s->stats->hits_dropped, 1);
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
        faid_stat_add(&s->stats->hits_dropped, 1);
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
        faid_stat_add(&s->stats->hits_dropped, 1);
        faid_log_ratelimited(&rl_hits, FAID_LOG_WARN, "hits", "frame %llu not sent: %s",
                             (unsigned long long)slot->h.frame_id, d.msg);
        return;
    }
    pthread_mutex_lock(&s->hits_mu);
    if (s->hits) {
        int ok = zmq_send(s->hits, wk->hit_msg, w.len, ZMQ_DONTWAIT) >= 0;
        faid_stat_add(ok ? &s->stats->hits_sent : &s->stats->hits_dropped, 1);
    }
    if (s->hits_rep) {
        service_locked(s); /* a `next` that came just before this hit waits for it */
        deliver_locked(s, wk->hit_msg, w.len);
    }
    pthread_mutex_unlock(&s->hits_mu);
}
