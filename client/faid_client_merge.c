/* faid_client_merge: the merging subscriber (faid_client.h, "Merging subscriber"): one PUB
 * subscriber per instance, results of each series held in a min-heap by frame id until the
 * frames before them came (or the window forces them out), starts checked against the first,
 * ends summed once every instance is done with the series. Fixed allocations at creation (the
 * held results' bodies aside, bounded by window and window_bytes; the frame-id bitmaps, bounded
 * by FAID_MERGE_TRACKED_IDS). */
#include "faid_client.h"

#include "faid_log.h"
#include "faid_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define RECENT                 16 /* ended series remembered, so that their stragglers are not a new series */
#define MAX_HELD_DEFAULT_BYTES ((size_t)256 << 20)
#define NEEDS_SLOT             2 /* absorb(): every series slot taken, the oldest is closing */

typedef struct held {
    uint8_t *body;
    size_t len;
    uint64_t frame;
    int src;
    int64_t at_ns; /* monotonic arrival */
    char topic[16];
} held;

typedef struct mseries {
    int used, closing;
    uint64_t order; /* creation order: the oldest series is served first */
    uint64_t id;
    char uid[FAID_SERIES_UID_MAX];
    char hash[40];
    int64_t nimages;
    uint64_t started, ended, silent, lost, mismatch; /* masks by source */
    uint64_t parts;                                  /* the greatest `shards` stamp seen */
    faid_merge_end e;                                /* sums and counts so far */
    int has_next;
    uint64_t next; /* frames below it were delivered (or skipped by the window) */
    int *heap;     /* indices into held, by frame id */
    int nheap;
    uint8_t *bits; /* frame ids seen, from 0 */
    size_t cap_bits;
    uint8_t *lbits; /* frame ids a fan-out's lost report named */
    size_t cap_lbits;
    uint8_t *rbits; /* frame ids the fan-out's routed report named */
    size_t cap_rbits;
    int has_routed;  /* the routed report came (and was whole) */
    int64_t done_ns; /* when the instances were first all done (the report is awaited) */
    int has_seen;
    uint64_t min_seen, max_seen;
    faid_series_info si;
} mseries;

typedef struct inst {
    faid_sub *sub;
    char name[128];
    int64_t last_ns; /* monotonic: its last message of any kind */
} inst;

struct faid_merge {
    inst in[FAID_MERGE_MAX_INSTANCES];
    int n;
    faid_sub *fan;
    int window, max_wait_ms, dead_after_ms;
    int64_t now_ns; /* of the current due() pass */
    size_t window_bytes, held_bytes;
    held *pool; /* window + 1 entries; body NULL = free */
    int nheld;
    mseries ser[FAID_MERGE_SERIES];
    uint64_t next_order;
    uint64_t silent; /* instances silent for dead_after now */
    struct {
        uint64_t id;
        char uid[FAID_SERIES_UID_MAX];
        int used;
    } recent[RECENT];
    int recent_next;
    uint8_t *cur; /* the body delivered last (a held result), freed at the next call */
    int rr;       /* round-robin start of the next receive */
    /* A message that needs a series slot while all are taken (the oldest series is closing to
     * make room): a copy, taken up again before anything else is read. */
    uint8_t *pending;
    size_t pending_len;
    int pending_src;
    char pending_topic[16];
};

/* ---- small helpers --------------------------------------------------------------------------- */

static void find_cstr(const uint8_t *b, size_t n, const char *key, char *out, size_t cap)
{
    faid_mp_obj v;
    out[0] = '\0';
    if (faid_proto_map_find(b, n, key, &v, NULL, NULL) != 0 || v.type != FAID_MP_STR ||
        faid_mp_to_cstr(&v, out, cap) != 0)
        out[0] = '\0';
}

static uint64_t find_u64(const uint8_t *b, size_t n, const char *key)
{
    faid_mp_obj v;
    uint64_t x = 0;
    if (faid_proto_map_find(b, n, key, &v, NULL, NULL) != 0 || faid_mp_to_u64(&v, &x) != 0)
        return 0;
    return x;
}

static int64_t find_i64(const uint8_t *b, size_t n, const char *key, int64_t dflt)
{
    faid_mp_obj v;
    int64_t x = dflt;
    if (faid_proto_map_find(b, n, key, &v, NULL, NULL) != 0 || faid_mp_to_i64(&v, &x) != 0)
        return dflt;
    return x;
}

static int find_bool(const uint8_t *b, size_t n, const char *key)
{
    faid_mp_obj v;
    return faid_proto_map_find(b, n, key, &v, NULL, NULL) == 0 && v.type == FAID_MP_BOOL && v.b;
}

/* Same series: equal ids, and equal unique ids when both sides have one (as the daemon's). */
static int same_series(uint64_t id, const char *uid, uint64_t id2, const char *uid2)
{
    return id == id2 && (!uid[0] || !uid2[0] || strcmp(uid, uid2) == 0);
}

/* ---- the held results' heap (per series, by frame id) ------------------------------------------
 */

static int heap_less(const faid_merge *m, int a, int b)
{
    return m->pool[a].frame < m->pool[b].frame;
}

static void heap_push(faid_merge *m, mseries *s, int idx)
{
    int i = s->nheap++;
    s->heap[i] = idx;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!heap_less(m, s->heap[i], s->heap[p]))
            break;
        int t = s->heap[i];
        s->heap[i] = s->heap[p];
        s->heap[p] = t;
        i = p;
    }
}

static int heap_pop(faid_merge *m, mseries *s)
{
    int top = s->heap[0];
    s->heap[0] = s->heap[--s->nheap];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, k = i;
        if (l < s->nheap && heap_less(m, s->heap[l], s->heap[k]))
            k = l;
        if (r < s->nheap && heap_less(m, s->heap[r], s->heap[k]))
            k = r;
        if (k == i)
            break;
        int t = s->heap[i];
        s->heap[i] = s->heap[k];
        s->heap[k] = t;
        i = k;
    }
    return top;
}

/* ---- series ------------------------------------------------------------------------------------
 */

static mseries *series_find(faid_merge *m, uint64_t id, const char *uid)
{
    for (int i = 0; i < FAID_MERGE_SERIES; i++)
        if (m->ser[i].used && same_series(m->ser[i].id, m->ser[i].uid, id, uid))
            return &m->ser[i];
    return NULL;
}

static int recently_ended(const faid_merge *m, uint64_t id, const char *uid)
{
    for (int i = 0; i < RECENT; i++)
        if (m->recent[i].used && same_series(m->recent[i].id, m->recent[i].uid, id, uid))
            return 1;
    return 0;
}

static void forget_recent(faid_merge *m, uint64_t id, const char *uid)
{
    for (int i = 0; i < RECENT; i++)
        if (m->recent[i].used && same_series(m->recent[i].id, m->recent[i].uid, id, uid))
            m->recent[i].used = 0;
}

/* A free slot, or NULL when every slot is taken (the caller closes the oldest and waits). */
static mseries *series_new(faid_merge *m, uint64_t id, const char *uid)
{
    for (int i = 0; i < FAID_MERGE_SERIES; i++) {
        mseries *s = &m->ser[i];
        if (s->used)
            continue;
        int *heap = s->heap;
        memset(s, 0, sizeof(*s));
        s->heap = heap;
        s->used = 1;
        s->order = m->next_order++;
        s->id = id;
        snprintf(s->uid, sizeof(s->uid), "%s", uid);
        s->nimages = -1;
        s->e.series_id = id;
        snprintf(s->e.series_unique_id, sizeof(s->e.series_unique_id), "%s", uid);
        forget_recent(m, id, uid);
        return s;
    }
    return NULL;
}

static mseries *oldest_series(faid_merge *m)
{
    mseries *best = NULL;
    for (int i = 0; i < FAID_MERGE_SERIES; i++)
        if (m->ser[i].used && (!best || m->ser[i].order < best->order))
            best = &m->ser[i];
    return best;
}

static void series_free(faid_merge *m, mseries *s)
{
    m->recent[m->recent_next].used = 1;
    m->recent[m->recent_next].id = s->id;
    snprintf(m->recent[m->recent_next].uid, sizeof(m->recent[0].uid), "%s", s->uid);
    m->recent_next = (m->recent_next + 1) % RECENT;
    free(s->bits);
    free(s->lbits);
    free(s->rbits);
    faid_series_info_clear(&s->si);
    int *heap = s->heap;
    memset(s, 0, sizeof(*s));
    s->heap = heap;
}

/* Sets bit id in a bitmap grown on demand (ids below FAID_MERGE_TRACKED_IDS): 1 when it was
 * set now, 0 when it was set already, -1 beyond the bound or out of memory. */
static int bit_set(uint8_t **bits, size_t *cap, uint64_t id)
{
    if (id >= FAID_MERGE_TRACKED_IDS)
        return -1;
    if (id >= *cap) {
        size_t ncap = *cap ? *cap : 4096;
        while (ncap <= id)
            ncap *= 2;
        uint8_t *nb = realloc(*bits, ncap / 8);
        if (!nb)
            return -1;
        memset(nb + *cap / 8, 0, (ncap - *cap) / 8);
        *bits = nb;
        *cap = ncap;
    }
    if ((*bits)[id / 8] & (1u << (id % 8)))
        return 0;
    (*bits)[id / 8] |= (uint8_t)(1u << (id % 8));
    return 1;
}

static int bit_get(const uint8_t *bits, size_t cap, uint64_t id)
{
    return id < cap && (bits[id / 8] & (1u << (id % 8)));
}

/* Ranges [a, b] into a bitmap, clamped to the tracked ids. */
static void bits_range(uint8_t **bits, size_t *cap, uint64_t a, uint64_t b)
{
    if (a >= FAID_MERGE_TRACKED_IDS)
        return;
    if (b >= FAID_MERGE_TRACKED_IDS)
        b = FAID_MERGE_TRACKED_IDS - 1;
    for (uint64_t id = a; id <= b; id++)
        if (bit_set(bits, cap, id) < 0)
            return;
}

/* Records frame id as seen: 1 when it was new, 0 when a duplicate; ids beyond the bitmap's
 * bound are new (and counted untracked). */
static int mark_seen(mseries *s, uint64_t id)
{
    if (id >= FAID_MERGE_TRACKED_IDS) {
        s->e.untracked++;
        return 1;
    }
    if (!s->has_seen || id < s->min_seen)
        s->min_seen = id;
    if (!s->has_seen || id > s->max_seen)
        s->max_seen = id;
    s->has_seen = 1;
    if (id >= s->cap_bits) {
        size_t ncap = s->cap_bits ? s->cap_bits : 4096;
        while (ncap <= id)
            ncap *= 2;
        uint8_t *nb = realloc(s->bits, ncap / 8);
        if (!nb) {
            s->e.untracked++;
            return 1;
        }
        memset(nb + s->cap_bits / 8, 0, (ncap - s->cap_bits) / 8);
        s->bits = nb;
        s->cap_bits = ncap;
    }
    if (s->bits[id / 8] & (1u << (id % 8)))
        return 0;
    s->bits[id / 8] |= (uint8_t)(1u << (id % 8));
    return 1;
}

static int seen(const mseries *s, uint64_t id)
{
    return id < s->cap_bits && (s->bits[id / 8] & (1u << (id % 8)));
}

static int popcount64(uint64_t x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

/* Every instance that started the series is done with it, and every part of it is accounted
 * for: the series has `shards` parts (the stamps' count; unstamped instances, shards 1: one
 * per endpoint), each an instance that started and is done, or one that never started it and
 * is silent (died before). */
static int series_done(const faid_merge *m, mseries *s)
{
    if (s->closing)
        return 1;
    uint64_t done = s->ended | s->silent | s->lost;
    uint64_t in = s->started | s->mismatch; /* a mismatched instance too: its end is awaited */
    if (!s->started || (in & ~done))
        return 0;
    int parts = s->parts > 1 ? (int)s->parts : m->n;
    if (popcount64(in) + popcount64(m->silent & ~in) < parts)
        return 0;
    /* with a fan-out, its routed report (sent as it passes the end on, so usually here first)
     * for at most max_wait_ms: without it (the fan-out died) the end says so */
    if (!m->fan || s->has_routed)
        return 1;
    if (!s->done_ns)
        s->done_ns = m->now_ns;
    int64_t wait_ms = m->max_wait_ms > 0 ? m->max_wait_ms : 2000;
    return m->now_ns - s->done_ns > wait_ms * 1000000LL;
}

/* The merged end: the frames never seen, by range. */
static void finish_end(const faid_merge *m, mseries *s, faid_merge_end *e)
{
    (void)m;
    *e = s->e;
    int bits = 0, nended = 0, nsilent = 0, nlost = 0;
    for (int i = 0; i < 64; i++) {
        uint64_t b = 1ull << i;
        if (!(s->started & b))
            continue;
        bits++;
        if (s->ended & b)
            nended++;
        else if (s->lost & b)
            nlost++;
        else if (s->silent & b)
            nsilent++;
    }
    e->instances = bits;
    e->ended = nended;
    e->silent = nsilent;
    e->lost = nlost;
    if (nended < bits || s->closing)
        e->incomplete = 1;
    uint64_t lo, hi; /* inclusive */
    int have = 0;
    if (s->nimages > 0) {
        lo = 0;
        hi = (uint64_t)s->nimages - 1;
        have = 1;
    } else if (s->has_seen) {
        lo = s->min_seen;
        hi = s->max_seen;
        have = 1;
    }
    e->lost_delivered = 0;
    for (uint64_t id = 0; id < s->cap_lbits; id++)
        if (bit_get(s->lbits, s->cap_lbits, id) && seen(s, id))
            e->lost_delivered++;
    e->expected = have ? hi - lo + 1 : 0;
    e->missing = 0;
    e->nranges = 0;
    e->ranges_truncated = 0;
    if (s->has_routed) {
        /* exactly what the fan-out handed out or dropped, less what came */
        e->fan_report = 1;
        e->expected = 0;
        size_t top = s->cap_rbits > s->cap_lbits ? s->cap_rbits : s->cap_lbits;
        for (uint64_t id = 0; id < top; id++) {
            if (!bit_get(s->rbits, s->cap_rbits, id) && !bit_get(s->lbits, s->cap_lbits, id))
                continue;
            e->expected++;
            if (seen(s, id))
                continue;
            e->missing++;
            if (e->nranges && e->ranges[e->nranges - 1][1] + 1 == id) {
                e->ranges[e->nranges - 1][1] = id;
            } else if (e->nranges < FAID_MERGE_RANGES) {
                e->ranges[e->nranges][0] = e->ranges[e->nranges][1] = id;
                e->nranges++;
            } else {
                e->ranges_truncated = 1;
            }
        }
        return;
    }
    if (!have)
        return;
    if (hi >= FAID_MERGE_TRACKED_IDS)
        hi = FAID_MERGE_TRACKED_IDS - 1; /* beyond the bitmap: not judged */
    for (uint64_t id = lo; id <= hi && lo <= hi; id++) {
        if (seen(s, id))
            continue;
        uint64_t first = id;
        while (id + 1 <= hi && !seen(s, id + 1))
            id++;
        e->missing += id - first + 1;
        if (e->nranges < FAID_MERGE_RANGES) {
            e->ranges[e->nranges][0] = first;
            e->ranges[e->nranges][1] = id;
            e->nranges++;
        } else {
            e->ranges_truncated = 1;
        }
    }
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

faid_merge *faid_merge_new(const char *const *endpoints, int n, const faid_merge_opts *o,
                           faid_diag *d)
{
    static const faid_merge_opts none;
    if (!o)
        o = &none;
    if (n < 1 || n > FAID_MERGE_MAX_INSTANCES) {
        faid_fail(d, FAID_EINVAL, "merge: %d endpoints, expected 1 to %d", n,
                  FAID_MERGE_MAX_INSTANCES);
        return NULL;
    }
    if (o->window < 0 || o->window > (1 << 20)) {
        faid_fail(d, FAID_EINVAL, "merge: window %d frames, expected 1 to %d", o->window, 1 << 20);
        return NULL;
    }
    faid_merge *m = calloc(1, sizeof(*m));
    if (!m) {
        faid_fail(d, FAID_ENOMEM, "merge: out of memory");
        return NULL;
    }
    m->window = o->window ? o->window : FAID_MERGE_DEFAULT_WINDOW;
    m->window_bytes = o->window_bytes ? o->window_bytes : MAX_HELD_DEFAULT_BYTES;
    m->max_wait_ms = o->max_wait_ms ? o->max_wait_ms : 2000;
    m->dead_after_ms = o->dead_after_ms > 0 ? o->dead_after_ms : 10000;
    m->pool = calloc((size_t)m->window + 1, sizeof(*m->pool));
    int ok = m->pool != NULL;
    for (int i = 0; i < FAID_MERGE_SERIES && ok; i++)
        ok = (m->ser[i].heap = calloc((size_t)m->window + 1, sizeof(int))) != NULL;
    if (!ok) {
        faid_fail(d, FAID_ENOMEM, "merge: out of memory for a window of %d frames", m->window);
        faid_merge_destroy(&m);
        return NULL;
    }
    /* 64 MiB: a cake of 360 x 1000 bins with its three arrays is 4.3 MB; a frame-sized message
     * from a peer that is not faid is refused before it is held. */
    faid_sub_opts so = {.rcvhwm = o->rcvhwm,
                        .curve = o->curve,
                        .max_message_bytes =
                            o->max_message_bytes > 0 ? o->max_message_bytes : (int64_t)64 << 20};
    int64_t now = faid_now_ns();
    for (int i = 0; i < n; i++) {
        m->in[i].sub = faid_sub_new_opts(endpoints[i], FAID_SUB_PUB, &so, d);
        m->in[i].last_ns = now;
        m->n = i + 1;
        if (!m->in[i].sub) {
            faid_merge_destroy(&m);
            return NULL;
        }
    }
    if (o->fan && !(m->fan = faid_sub_new_opts(o->fan, FAID_SUB_PUB, &so, d))) {
        faid_diag_prefix(d, "fan-out: ");
        faid_merge_destroy(&m);
        return NULL;
    }
    return m;
}

void faid_merge_destroy(faid_merge **mp)
{
    if (!mp || !*mp)
        return;
    faid_merge *m = *mp;
    for (int i = 0; i < m->n; i++)
        faid_sub_destroy(&m->in[i].sub);
    faid_sub_destroy(&m->fan);
    if (m->pool)
        for (int i = 0; i <= m->window; i++)
            free(m->pool[i].body);
    free(m->pool);
    for (int i = 0; i < FAID_MERGE_SERIES; i++) {
        free(m->ser[i].bits);
        free(m->ser[i].heap);
        faid_series_info_clear(&m->ser[i].si);
    }
    free(m->cur);
    free(m->pending);
    free(m);
    *mp = NULL;
}

const faid_series_info *faid_merge_series_of(const faid_merge *m, uint64_t series_id)
{
    const mseries *best = NULL;
    for (int i = 0; i < FAID_MERGE_SERIES; i++) {
        const mseries *s = &m->ser[i];
        if (s->used && s->id == series_id && s->si.valid && (!best || s->order > best->order))
            best = s;
    }
    return best ? &best->si : NULL;
}

/* ---- the fan-out's lost report --------------------------------------------------------------- */

static void lost_add(faid_merge_lost *l, uint64_t a, uint64_t b)
{
    l->nframes += b - a + 1;
    if (l->nranges < FAID_MERGE_RANGES) {
        l->ranges[l->nranges][0] = a;
        l->ranges[l->nranges][1] = b;
        l->nranges++;
    } else {
        l->truncated = 1;
    }
}

int faid_merge_parse_lost(const uint8_t *body, size_t len, faid_merge_lost *out, faid_diag *d)
{
    memset(out, 0, sizeof(*out));
    faid_mpr r;
    faid_mp_obj o, k;
    faid_mpr_init(&r, body, len);
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "lost: not a map");
    int has_series = 0, has_frames = 0;
    for (uint32_t i = 0; i < o.len; i++) {
        if ((rc = faid_mpr_next(&r, &k, d)))
            return rc;
        if (k.type != FAID_MP_STR)
            return faid_fail(d, FAID_EFORMAT, "lost: a key is not a string");
        if (faid_mp_str_eq(&k, "series") || faid_mp_str_eq(&k, FAID_K_SERIES_ID)) {
            faid_mp_obj v;
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_u64(&v, &out->series_id) != 0)
                return faid_fail(d, FAID_EFORMAT, "lost: series is not an unsigned integer");
            has_series = 1;
        } else if (faid_mp_str_eq(&k, FAID_K_INSTANCE)) {
            faid_mp_obj v;
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (v.type != FAID_MP_STR || faid_mp_to_cstr(&v, out->instance, sizeof(out->instance)))
                return faid_fail(d, FAID_EFORMAT, "lost: instance is not a string of < %zu bytes",
                                 sizeof(out->instance));
        } else if (faid_mp_str_eq(&k, FAID_K_FRAMES)) {
            faid_mp_obj a;
            if ((rc = faid_mpr_next(&r, &a, d)))
                return rc;
            if (a.type != FAID_MP_ARRAY)
                return faid_fail(d, FAID_EFORMAT, "lost: frames is not an array");
            for (uint32_t j = 0; j < a.len; j++) {
                faid_mp_obj e;
                if ((rc = faid_mpr_next(&r, &e, d)))
                    return rc;
                uint64_t x, y;
                if (e.type == FAID_MP_ARRAY && e.len == 2) {
                    faid_mp_obj ea, eb;
                    if ((rc = faid_mpr_next(&r, &ea, d)) || (rc = faid_mpr_next(&r, &eb, d)))
                        return rc;
                    if (faid_mp_to_u64(&ea, &x) || faid_mp_to_u64(&eb, &y) || y < x)
                        return faid_fail(d, FAID_EFORMAT,
                                         "lost: frames[%u] is not a range [first, last]", j);
                    lost_add(out, x, y);
                } else if (faid_mp_to_u64(&e, &x) == 0) {
                    lost_add(out, x, x);
                } else {
                    return faid_fail(d, FAID_EFORMAT,
                                     "lost: frames[%u] is neither a frame id nor a range", j);
                }
            }
            has_frames = 1;
        } else if ((rc = faid_mpr_skip(&r, d))) {
            return rc;
        }
    }
    if (!has_series || !has_frames)
        return faid_fail(d, FAID_EFORMAT, "lost: missing key '%s'",
                         has_series ? FAID_K_FRAMES : "series");
    return 0;
}

/* ---- the stream --------------------------------------------------------------------------------
 */

/* Hands the held result idx of series s to the caller. */
static void deliver_held(faid_merge *m, mseries *s, int idx, faid_merge_msg *out)
{
    held *h = &m->pool[idx];
    free(m->cur);
    m->cur = h->body;
    if (!s->has_next || h->frame >= s->next) {
        s->has_next = 1;
        s->next = h->frame + 1;
    }
    faid_diag dd = {0};
    faid_out_decode(h->body, h->len, &out->msg, NULL, &dd); /* decoded once when it arrived */
    snprintf(out->msg.topic, sizeof(out->msg.topic), "%s", h->topic);
    out->kind = FAID_MERGE_RESULT;
    out->source = h->src;
    snprintf(out->instance, sizeof(out->instance), "%s", m->in[h->src].name);
    s->e.delivered++;
    m->held_bytes -= h->len;
    m->nheld--;
    h->body = NULL;
}

/* A result due now, or the end of a series that is done: 1 when *out was filled. */
static int due(faid_merge *m, int64_t now, faid_merge_msg *out)
{
    m->now_ns = now;
    /* Instances silent too long are done with their open series. */
    m->silent = 0;
    for (int k = 0; k < m->n; k++)
        if (now - m->in[k].last_ns > m->dead_after_ms * 1000000LL)
            m->silent |= 1ull << k;
    for (int i = 0; i < FAID_MERGE_SERIES; i++) {
        mseries *s = &m->ser[i];
        if (!s->used)
            continue;
        for (int k = 0; k < m->n; k++)
            if ((s->started & (1ull << k)) && now - m->in[k].last_ns > m->dead_after_ms * 1000000LL)
                s->silent |= 1ull << k;
    }
    int over = m->nheld > m->window || m->held_bytes > m->window_bytes;
    /* Oldest series first. */
    for (;;) {
        mseries *s = NULL;
        for (int i = 0; i < FAID_MERGE_SERIES; i++) {
            mseries *c = &m->ser[i];
            if (c->used && (!s || c->order < s->order))
                if (c->nheap || series_done(m, c))
                    s = c;
        }
        if (!s)
            return 0;
        if (s->nheap) {
            held *top = &m->pool[s->heap[0]];
            /* Nothing goes out before the series' start (another instance's result may come
             * before the first start). */
            int in_order = s->hash[0] && (s->has_next ? top->frame <= s->next : top->frame == 0);
            int waited = m->max_wait_ms > 0 && now - top->at_ns > m->max_wait_ms * 1000000LL;
            if (in_order || over || waited || series_done(m, s)) {
                deliver_held(m, s, heap_pop(m, s), out);
                return 1;
            }
            /* This series waits; a younger one may have something due. */
            int found = 0;
            for (int i = 0; i < FAID_MERGE_SERIES && !found; i++) {
                mseries *c = &m->ser[i];
                if (!c->used || c == s || c->order < s->order || !c->nheap)
                    continue;
                held *t = &m->pool[c->heap[0]];
                int ok = c->hash[0] && (c->has_next ? t->frame <= c->next : t->frame == 0);
                ok = ok || (m->max_wait_ms > 0 && now - t->at_ns > m->max_wait_ms * 1000000LL) ||
                     series_done(m, c);
                if (ok) {
                    deliver_held(m, c, heap_pop(m, c), out);
                    found = 1;
                }
            }
            return found;
        }
        /* Done and nothing held: the merged end. */
        memset(out, 0, sizeof(*out));
        out->kind = FAID_MERGE_END;
        out->source = -1;
        finish_end(m, s, &out->end);
        series_free(m, s);
        return 1;
    }
}

/* The instance a fan-out's report names: by its `instance` stamp, else by the endpoint given. */
static int src_of_name(const faid_merge *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (m->in[i].name[0] && strcmp(m->in[i].name, name) == 0)
            return i;
    for (int i = 0; i < m->n; i++)
        if (strcmp(faid_sub_endpoint(m->in[i].sub), name) == 0)
            return i;
    return -1;
}

/* One message from instance src (msg decoded). 1 when *out was filled for the caller; 0 when
 * it was absorbed; NEEDS_SLOT when it needs a series slot (the oldest is closing: call again
 * once it ended). */
static int absorb(faid_merge *m, int src, faid_sub_msg *msg, faid_merge_msg *out, faid_diag *d)
{
    inst *in = &m->in[src];
    const faid_out_msg *om = &msg->m;
    char name[128];
    find_cstr(msg->body, msg->len, FAID_K_INSTANCE, name, sizeof(name));
    if (name[0])
        snprintf(in->name, sizeof(in->name), "%s", name);
    uint64_t bit = 1ull << src;
    if (om->type != FAID_OUT_START && om->type != FAID_OUT_RESULT && om->type != FAID_OUT_END) {
        memset(out, 0, sizeof(*out));
        out->kind = FAID_MERGE_OTHER;
        out->source = src;
        snprintf(out->instance, sizeof(out->instance), "%s", in->name);
        out->msg = *msg;
        return 1;
    }
    char uid[FAID_SERIES_UID_MAX];
    find_cstr(msg->body, msg->len, FAID_K_SERIES_UNIQUE_ID, uid, sizeof(uid));
    mseries *s = series_find(m, om->series_id, uid);
    if (!s && om->type != FAID_OUT_START && recently_ended(m, om->series_id, uid)) {
        if (om->type == FAID_OUT_RESULT) {
            /* A straggler of a series already ended: delivered, marked late, never dropped. */
            memset(out, 0, sizeof(*out));
            out->kind = FAID_MERGE_RESULT;
            out->late = 1;
            out->source = src;
            snprintf(out->instance, sizeof(out->instance), "%s", in->name);
            out->msg = *msg;
            return 1;
        }
        return 0; /* an end after the merged end (the instance was taken for silent) */
    }
    if (!s) {
        s = series_new(m, om->series_id, uid);
        if (!s) {
            oldest_series(m)->closing = 1;
            return NEEDS_SLOT;
        }
    }
    uint64_t shards = find_u64(msg->body, msg->len, FAID_K_SHARDS);
    if (shards > s->parts && shards <= FAID_MERGE_MAX_INSTANCES)
        s->parts = shards;
    switch (om->type) {
    case FAID_OUT_START: {
        if (s->mismatch & bit)
            return 0; /* reported once per series and instance */
        char hash[40];
        find_cstr(msg->body, msg->len, FAID_K_CONFIG_HASH, hash, sizeof(hash));
        if (!s->hash[0]) {
            /* The series' first start: delivered. */
            snprintf(s->hash, sizeof(s->hash), "%s", hash);
            s->nimages = find_i64(msg->body, msg->len, FAID_K_NIMAGES, -1);
            s->started |= bit;
            faid_sub_msg tmp;
            faid_diag dd = {0};
            faid_out_decode(msg->body, msg->len, &tmp, &s->si, &dd);
            memset(out, 0, sizeof(*out));
            out->kind = FAID_MERGE_START;
            out->source = src;
            snprintf(out->instance, sizeof(out->instance), "%s", in->name);
            out->msg = *msg;
            return 1;
        }
        if (strcmp(hash, s->hash) != 0) {
            s->mismatch |= bit;
            memset(out, 0, sizeof(*out));
            out->kind = FAID_MERGE_MISMATCH;
            out->source = src;
            snprintf(out->instance, sizeof(out->instance), "%s", in->name);
            out->msg = *msg;
            snprintf(out->text, sizeof(out->text),
                     "instance %s (%s) reduces series %llu with config_hash %s, the series' "
                     "start has %s: its results of the series are left out",
                     in->name[0] ? in->name : "?", faid_sub_endpoint(in->sub),
                     (unsigned long long)s->id, hash, s->hash);
            return 1;
        }
        s->started |= bit;
        if (s->nimages < 0)
            s->nimages = find_i64(msg->body, msg->len, FAID_K_NIMAGES, -1);
        return 0;
    }
    case FAID_OUT_RESULT: {
        if (s->mismatch & bit) {
            s->e.refused++;
            return 0;
        }
        s->started |= bit; /* results without its start (joined mid-series) */
        if (!om->has_frame_id)
            return faid_fail(d, FAID_EPROTO, "result from %s without frame_id",
                             faid_sub_endpoint(in->sub));
        if (!mark_seen(s, om->frame_id)) {
            s->e.duplicates++;
            return 0;
        }
        if (s->has_next && om->frame_id < s->next) {
            /* Older than what the window let through: at once, marked late. */
            s->e.late++;
            s->e.delivered++;
            memset(out, 0, sizeof(*out));
            out->kind = FAID_MERGE_RESULT;
            out->late = 1;
            out->source = src;
            snprintf(out->instance, sizeof(out->instance), "%s", in->name);
            out->msg = *msg;
            return 1;
        }
        int idx = -1;
        for (int i = 0; i <= m->window; i++)
            if (!m->pool[i].body) {
                idx = i;
                break;
            }
        uint8_t *copy = idx >= 0 ? malloc(msg->len ? msg->len : 1) : NULL;
        if (!copy) {
            /* No room to hold it (cannot happen with the window enforced, or out of memory):
             * delivered at once rather than lost. */
            s->e.late++;
            s->e.delivered++;
            memset(out, 0, sizeof(*out));
            out->kind = FAID_MERGE_RESULT;
            out->late = 1;
            out->source = src;
            out->msg = *msg;
            return 1;
        }
        memcpy(copy, msg->body, msg->len);
        held *h = &m->pool[idx];
        h->body = copy;
        h->len = msg->len;
        h->frame = om->frame_id;
        h->src = src;
        h->at_ns = faid_now_ns();
        snprintf(h->topic, sizeof(h->topic), "%s", msg->topic);
        m->nheld++;
        m->held_bytes += msg->len;
        heap_push(m, s, idx);
        return 0;
    }
    case FAID_OUT_END:
        if (s->ended & bit)
            return 0;
        s->ended |= bit;
        if (s->mismatch & bit)
            return 0;
        s->started |= bit;
        s->e.frames_received += find_u64(msg->body, msg->len, FAID_K_FRAMES_RECEIVED);
        s->e.frames_processed += find_u64(msg->body, msg->len, FAID_K_FRAMES_PROCESSED);
        s->e.frames_failed += find_u64(msg->body, msg->len, FAID_K_FRAMES_FAILED);
        s->e.frames_dropped += find_u64(msg->body, msg->len, FAID_K_FRAMES_DROPPED);
        s->e.stale_messages += find_u64(msg->body, msg->len, FAID_K_STALE_MESSAGES);
        if (find_bool(msg->body, msg->len, FAID_K_INCOMPLETE))
            s->e.incomplete = 1;
        return 0;
    default:
        return 0;
    }
}

/* The fan-out's message: a lost report is passed on and ends the named instance's part. */
static int absorb_fan(faid_merge *m, faid_sub_msg *msg, faid_merge_msg *out, faid_diag *d)
{
    memset(out, 0, sizeof(*out));
    int rc = faid_merge_parse_lost(msg->body, msg->len, &out->lost, d);
    if (rc)
        return rc;
    int src = src_of_name(m, out->lost.instance);
    for (int i = 0; i < FAID_MERGE_SERIES; i++) {
        mseries *s = &m->ser[i];
        if (!s->used || s->id != out->lost.series_id)
            continue;
        if (src >= 0)
            s->lost |= 1ull << src;
        for (int k = 0; k < out->lost.nranges; k++)
            bits_range(&s->lbits, &s->cap_lbits, out->lost.ranges[k][0], out->lost.ranges[k][1]);
    }
    out->kind = FAID_MERGE_LOST;
    out->source = -1;
    snprintf(out->instance, sizeof(out->instance), "%s", out->lost.instance);
    out->msg = *msg;
    return 1;
}

/* The fan-out's routed report: the ids it handed out in a series, kept with the series (the
 * most recent of that id). Absorbed (nothing for the caller); a malformed one is an error. */
static int absorb_routed(faid_merge *m, const faid_sub_msg *msg, faid_diag *d)
{
    faid_mpr r;
    faid_mp_obj o, k, v;
    faid_mpr_init(&r, msg->body, msg->len);
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "routed: not a map");
    uint64_t series = 0;
    int has_series = 0, incomplete = 0;
    faid_mpr frames = r;
    int has_frames = 0;
    uint32_t nframes = 0;
    for (uint32_t i = 0; i < o.len; i++) {
        if ((rc = faid_mpr_next(&r, &k, d)))
            return rc;
        if (k.type != FAID_MP_STR)
            return faid_fail(d, FAID_EFORMAT, "routed: a key is not a string");
        if (faid_mp_str_eq(&k, FAID_K_SERIES)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (faid_mp_to_u64(&v, &series) != 0)
                return faid_fail(d, FAID_EFORMAT, "routed: series is not an unsigned integer");
            has_series = 1;
        } else if (faid_mp_str_eq(&k, FAID_K_INCOMPLETE)) {
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            incomplete = v.type == FAID_MP_BOOL && v.b;
        } else if (faid_mp_str_eq(&k, FAID_K_FRAMES)) {
            frames = r;
            if ((rc = faid_mpr_next(&r, &v, d)))
                return rc;
            if (v.type != FAID_MP_ARRAY)
                return faid_fail(d, FAID_EFORMAT, "routed: frames is not an array");
            nframes = v.len;
            for (uint32_t j = 0; j < v.len; j++) {
                faid_mp_obj e, a, b;
                uint64_t x, y;
                if ((rc = faid_mpr_next(&r, &e, d)))
                    return rc;
                if (e.type != FAID_MP_ARRAY || e.len != 2 || faid_mpr_next(&r, &a, d) ||
                    faid_mpr_next(&r, &b, d) || faid_mp_to_u64(&a, &x) || faid_mp_to_u64(&b, &y) ||
                    y < x)
                    return faid_fail(d, FAID_EFORMAT,
                                     "routed: frames[%u] is not a range [first, last]", j);
            }
            has_frames = 1;
        } else if ((rc = faid_mpr_skip(&r, d))) {
            return rc;
        }
    }
    if (!has_series || !has_frames)
        return faid_fail(d, FAID_EFORMAT, "routed: missing key '%s'",
                         has_series ? FAID_K_FRAMES : "series");
    mseries *s = NULL;
    for (int i = 0; i < FAID_MERGE_SERIES; i++)
        if (m->ser[i].used && m->ser[i].id == series && (!s || m->ser[i].order > s->order))
            s = &m->ser[i];
    if (!s || incomplete)
        return 0; /* not a series here, or not the whole set: the fallback judges */
    /* the ranges again, now checked */
    faid_mp_obj arr;
    faid_mpr_next(&frames, &arr, d);
    for (uint32_t j = 0; j < nframes; j++) {
        faid_mp_obj e, a, b;
        uint64_t x = 0, y = 0;
        faid_mpr_next(&frames, &e, d);
        faid_mpr_next(&frames, &a, d);
        faid_mpr_next(&frames, &b, d);
        faid_mp_to_u64(&a, &x);
        faid_mp_to_u64(&b, &y);
        bits_range(&s->rbits, &s->cap_rbits, x, y);
    }
    s->has_routed = 1;
    return 0;
}

/* Takes up the pending message again: 1 when *out was filled, 0 absorbed or still waiting. */
static int retry_pending(faid_merge *m, faid_merge_msg *out, faid_diag *d)
{
    faid_sub_msg msg;
    faid_diag dd = {0};
    if (faid_out_decode(m->pending, m->pending_len, &msg, NULL, &dd) != 0) {
        free(m->pending);
        m->pending = NULL;
        return 0;
    }
    snprintf(msg.topic, sizeof(msg.topic), "%s", m->pending_topic);
    int rc = absorb(m, m->pending_src, &msg, out, d);
    if (rc == NEEDS_SLOT)
        return 0;
    /* Delivered (its views point into the copy: kept until the next call) or absorbed. */
    free(m->cur);
    m->cur = m->pending;
    m->pending = NULL;
    return rc == 1;
}

int faid_merge_next(faid_merge *m, int timeout_ms, faid_merge_msg *out, faid_diag *d)
{
    free(m->cur);
    m->cur = NULL;
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : faid_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int64_t now = faid_now_ns();
        if (due(m, now, out))
            return 0;
        if (m->pending) {
            if (retry_pending(m, out, d))
                return 0;
            if (m->pending)
                continue; /* due() ends the closing series first */
        }
        if (now >= deadline)
            return faid_fail(d, FAID_ETIMEOUT, "no merged message within %d ms", timeout_ms);
        /* Wake up for the time-driven rules (max_wait, dead_after) at least every 100 ms. */
        int64_t left = (deadline - now) / 1000000;
        int wait = left < 100 ? (int)left + 1 : 100;
        zmq_pollitem_t items[FAID_MERGE_MAX_INSTANCES + 1];
        int n = 0;
        for (int i = 0; i < m->n; i++)
            items[n++] = (zmq_pollitem_t){faid_sub_zsocket(m->in[i].sub), 0, ZMQ_POLLIN, 0};
        if (m->fan)
            items[n++] = (zmq_pollitem_t){faid_sub_zsocket(m->fan), 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(items, n, wait);
        if (r < 0)
            return faid_fail(d, FAID_EZMQ, "merge: zmq_poll: %s", zmq_strerror(zmq_errno()));
        if (r == 0)
            continue;
        if (m->fan && (items[n - 1].revents & ZMQ_POLLIN)) {
            faid_sub_msg msg;
            int rc = faid_sub_recv(m->fan, 0, &msg, d);
            if (rc == FAID_EZMQ || rc == FAID_EAUTH)
                return rc;
            if (rc != FAID_ETIMEOUT && strcmp(msg.topic, FAID_K_ROUTED) == 0 && msg.body) {
                faid_diag dd = {0};
                if (absorb_routed(m, &msg, &dd) != 0) {
                    *d = dd;
                    return FAID_EFORMAT;
                }
                continue;
            }
            if (rc != FAID_ETIMEOUT && strcmp(msg.topic, "lost") == 0 && msg.body) {
                faid_diag dd = {0};
                if (absorb_fan(m, &msg, out, &dd) == 1)
                    return 0;
                *d = dd;
                return FAID_EFORMAT;
            }
            continue; /* the fan-out's other messages are not the instances' stream */
        }
        /* One message from a readable instance, in turn after the last one served. */
        for (int k = 0; k < m->n; k++) {
            int i = (m->rr + k) % m->n;
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            m->rr = (i + 1) % m->n;
            faid_sub_msg msg;
            int rc = faid_sub_recv(m->in[i].sub, 0, &msg, d);
            if (rc == FAID_ETIMEOUT)
                break;
            m->in[i].last_ns = faid_now_ns();
            if (rc)
                return rc;
            rc = absorb(m, i, &msg, out, d);
            if (rc == NEEDS_SLOT) {
                m->pending = malloc(msg.len ? msg.len : 1);
                if (!m->pending)
                    return faid_fail(d, FAID_ENOMEM, "merge: out of memory");
                memcpy(m->pending, msg.body, msg.len);
                m->pending_len = msg.len;
                m->pending_src = i;
                snprintf(m->pending_topic, sizeof(m->pending_topic), "%s", msg.topic);
                break;
            }
            if (rc == 1)
                return 0;
            if (rc < 0)
                return rc;
            break;
        }
    }
}
