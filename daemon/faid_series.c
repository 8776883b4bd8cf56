/* faid_series: series tracker (ingest) and ledger (publisher); see faid_series.h. Plain data
 * structures: no sockets, no threads, no allocation after creation. */
#include "faid_series.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *faid_series_reason_name(faid_series_reason r)
{
    static const char *const names[] = {
#define X(name, text) text,
        FAID_SERIES_REASONS(X)
#undef X
    };
    return (unsigned)r < FAID_SERIES_NREASONS ? names[r] : "unknown";
}

/* ---- tracker ------------------------------------------------------------------------------- */

typedef struct series_key {
    int used;
    uint64_t id;
    char uid[FAID_SERIES_UID_MAX];
} series_key;

struct faid_series {
    int64_t timeout_ns;
    uint64_t last_seq; /* seq of the open series, or of the last one */
    int open;
    series_key cur;
    int64_t nimages;
    uint64_t frames, stale, stale_total;
    uint32_t started, ended; /* source masks */
    int64_t last_ns;         /* last message of the open series */
    series_key recent[FAID_SERIES_RECENT];
    int recent_next;
    uint32_t shard, shards;         /* the open (or last) series' stamp */
    uint32_t def_shard, def_shards; /* instance.shard / instance.shards */
    int has_pending;                /* faid_series_set_shard named the next series' stamp */
    uint32_t pend_shard, pend_shards;
};

static const char *uid_or_empty(const char *uid)
{
    return uid ? uid : "";
}

/* Same series: equal ids, and equal unique ids when both sides have one. */
static int key_match(const series_key *k, uint64_t id, const char *uid)
{
    uid = uid_or_empty(uid);
    if (!k->used || k->id != id)
        return 0;
    return !k->uid[0] || !uid[0] || strcmp(k->uid, uid) == 0;
}

static uint32_t source_bit(int source)
{
    return source >= 0 && source < FAID_SERIES_MAX_SOURCES ? 1u << (unsigned)source : 1u;
}

static int recent_index(const faid_series *t, uint64_t id, const char *uid)
{
    for (int i = 0; i < FAID_SERIES_RECENT; i++)
        if (key_match(&t->recent[i], id, uid))
            return i;
    return -1;
}

static faid_series_event *emit(faid_series_out *out, faid_series_ev_kind kind,
                               faid_series_reason reason)
{
    faid_series_event *e = &out->ev[out->n++];
    memset(e, 0, sizeof(*e));
    e->kind = kind;
    e->reason = reason;
    return e;
}

static void close_open(faid_series *t, faid_series_reason reason, faid_series_out *out)
{
    if (!t->open)
        return;
    faid_series_event *e = emit(out, FAID_SERIES_EV_END, reason);
    e->seq = t->last_seq;
    e->series_id = t->cur.id;
    snprintf(e->uid, sizeof(e->uid), "%s", t->cur.uid);
    e->nimages = t->nimages;
    e->frames = t->frames;
    e->stale = t->stale;
    e->shard = t->shard;
    e->shards = t->shards;
    t->recent[t->recent_next] = t->cur;
    t->recent_next = (t->recent_next + 1) % FAID_SERIES_RECENT;
    t->open = 0;
}

static void open_new(faid_series *t, uint64_t id, const char *uid, int64_t nimages,
                     faid_series_reason reason, uint32_t started, int64_t now_ns,
                     faid_series_out *out)
{
    /* A series opened again (a new start with a reused id) is no longer "closed". */
    int r = recent_index(t, id, uid);
    if (r >= 0)
        t->recent[r].used = 0;
    t->open = 1;
    t->last_seq++;
    t->cur.used = 1;
    t->cur.id = id;
    snprintf(t->cur.uid, sizeof(t->cur.uid), "%s", uid_or_empty(uid));
    t->nimages = nimages;
    t->frames = 0;
    t->stale = 0;
    t->started = started;
    t->ended = 0;
    t->last_ns = now_ns;
    t->shard = t->has_pending ? t->pend_shard : t->def_shard;
    t->shards = t->has_pending ? t->pend_shards : t->def_shards;
    t->has_pending = 0;
    faid_series_event *e = emit(out, FAID_SERIES_EV_START, reason);
    e->seq = t->last_seq;
    e->series_id = id;
    snprintf(e->uid, sizeof(e->uid), "%s", t->cur.uid);
    e->nimages = nimages;
    e->shard = t->shard;
    e->shards = t->shards;
}

/* A frame of a closed series is stale when a newer series has begun since: another one is
 * open, or it is not the last one closed. A frame of the last series after its end, with
 * nothing open since, is a new run of it (a sender replaying the same series id), not stale. */
static int is_stale(const faid_series *t, uint64_t id, const char *uid)
{
    int r = recent_index(t, id, uid);
    if (r < 0)
        return 0;
    if (t->open)
        return 1;
    int last = (t->recent_next + FAID_SERIES_RECENT - 1) % FAID_SERIES_RECENT;
    return r != last;
}

static faid_series_verdict stale(faid_series *t)
{
    t->stale_total++;
    if (t->open)
        t->stale++;
    return FAID_SERIES_STALE;
}

faid_series *faid_series_new(int64_t timeout_ns)
{
    faid_series *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->timeout_ns = timeout_ns > 0 ? timeout_ns : 0;
    t->shards = t->def_shards = 1;
    return t;
}

void faid_series_destroy(faid_series **t)
{
    if (!t || !*t)
        return;
    free(*t);
    *t = NULL;
}

faid_series_verdict faid_series_start(faid_series *t, int source, uint64_t series_id,
                                      const char *uid, int64_t nimages, int64_t now_ns,
                                      faid_series_out *out)
{
    out->n = 0;
    uint32_t bit = source_bit(source);
    if (t->open && key_match(&t->cur, series_id, uid) && !(t->started & bit)) {
        /* Another connection of the same series, or the start of a series opened by its
         * first frame on another connection: join it. */
        t->started |= bit;
        if (t->nimages < 0)
            t->nimages = nimages;
        if (!t->cur.uid[0] && uid && uid[0])
            snprintf(t->cur.uid, sizeof(t->cur.uid), "%s", uid);
        t->last_ns = now_ns;
        return FAID_SERIES_ACCEPT;
    }
    close_open(t, FAID_SERIES_SUPERSEDED, out);
    open_new(t, series_id, uid, nimages, FAID_SERIES_SERIES, bit, now_ns, out);
    return FAID_SERIES_ACCEPT;
}

faid_series_verdict faid_series_frame(faid_series *t, int source, uint64_t series_id,
                                      const char *uid, int64_t now_ns, uint64_t *seq,
                                      faid_series_out *out)
{
    out->n = 0;
    (void)source;
    if (!(t->open && key_match(&t->cur, series_id, uid))) {
        if (is_stale(t, series_id, uid))
            return stale(t);
        close_open(t, FAID_SERIES_SUPERSEDED, out);
        open_new(t, series_id, uid, -1, FAID_SERIES_IMPLICIT, 0, now_ns, out);
    }
    t->frames++;
    t->last_ns = now_ns;
    *seq = t->last_seq;
    return FAID_SERIES_ACCEPT;
}

int faid_series_count_rejected(faid_series *t, int source, uint64_t series_id, const char *uid,
                               int64_t now_ns, uint64_t *seq)
{
    (void)source;
    if (!(t->open && key_match(&t->cur, series_id, uid)))
        return 0;
    t->frames++;
    t->last_ns = now_ns;
    *seq = t->last_seq;
    return 1;
}

faid_series_verdict faid_series_end(faid_series *t, int source, uint64_t series_id, const char *uid,
                                    int64_t now_ns, faid_series_out *out)
{
    out->n = 0;
    if (!(t->open && key_match(&t->cur, series_id, uid)))
        return recent_index(t, series_id, uid) >= 0 ? stale(t) : FAID_SERIES_UNKNOWN;
    t->ended |= source_bit(source);
    t->last_ns = now_ns;
    /* Opened by a frame (no start seen): the first end closes it. */
    if ((t->ended & t->started) == t->started)
        close_open(t, FAID_SERIES_END, out);
    return FAID_SERIES_ACCEPT;
}

void faid_series_tick(faid_series *t, int64_t now_ns, faid_series_out *out)
{
    out->n = 0;
    if (t->open && t->timeout_ns > 0 && now_ns - t->last_ns > t->timeout_ns)
        close_open(t, FAID_SERIES_TIMEOUT, out);
}

void faid_series_close(faid_series *t, faid_series_reason reason, faid_series_out *out)
{
    out->n = 0;
    close_open(t, reason, out);
}

int faid_series_current(const faid_series *t, uint64_t *series_id, const char **uid, uint64_t *seq)
{
    if (series_id)
        *series_id = t->cur.id;
    if (uid)
        *uid = t->cur.uid;
    if (seq)
        *seq = t->last_seq;
    return t->open;
}

uint64_t faid_series_stale_total(const faid_series *t)
{
    return t->stale_total;
}

void faid_series_set_default_shard(faid_series *t, uint32_t shard, uint32_t shards)
{
    if (shards == 0 || shard >= shards)
        return;
    t->def_shard = shard;
    t->def_shards = shards;
    if (!t->open && !t->last_seq) {
        t->shard = shard;
        t->shards = shards;
    }
}

void faid_series_set_shard(faid_series *t, uint32_t shard, uint32_t shards)
{
    if (shards == 0 || shard >= shards)
        return;
    t->has_pending = 1;
    t->pend_shard = shard;
    t->pend_shards = shards;
    if (t->open) {
        t->shard = shard;
        t->shards = shards;
    }
}

void faid_series_shard(const faid_series *t, uint32_t *shard, uint32_t *shards)
{
    *shard = t->shard;
    *shards = t->shards;
}

/* ---- ledger -------------------------------------------------------------------------------- */

typedef struct ledger_rec {
    int used, ended;
    int64_t end_ns;
    faid_series_record r;
} ledger_rec;

struct faid_series_ledger {
    int64_t end_wait_ns;
    size_t cap;
    ledger_rec *recs;
    ledger_rec *hit; /* last record counted: frames come in runs of one series */
};

faid_series_ledger *faid_series_ledger_new(size_t capacity, int64_t end_wait_ns)
{
    faid_series_ledger *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->cap = capacity ? capacity : 1;
    l->end_wait_ns = end_wait_ns;
    l->recs = calloc(l->cap, sizeof(*l->recs));
    if (!l->recs) {
        free(l);
        return NULL;
    }
    return l;
}

void faid_series_ledger_destroy(faid_series_ledger **l)
{
    if (!l || !*l)
        return;
    free((*l)->recs);
    free(*l);
    *l = NULL;
}

static ledger_rec *find_rec(faid_series_ledger *l, uint64_t seq)
{
    if (l->hit && l->hit->used && l->hit->r.seq == seq)
        return l->hit;
    for (size_t i = 0; i < l->cap; i++)
        if (l->recs[i].used && l->recs[i].r.seq == seq)
            return l->hit = &l->recs[i];
    return NULL;
}

static ledger_rec *new_rec(faid_series_ledger *l, const faid_series_event *ev)
{
    ledger_rec *x = NULL;
    for (size_t i = 0; i < l->cap && !x; i++)
        if (!l->recs[i].used)
            x = &l->recs[i];
    if (!x) {
        /* More series waiting than frames in flight can explain (capacity is the slot count):
         * the oldest is forgotten; should its end come, it is published incomplete. */
        x = &l->recs[0];
        for (size_t i = 1; i < l->cap; i++)
            if (l->recs[i].r.seq < x->r.seq)
                x = &l->recs[i];
    }
    memset(x, 0, sizeof(*x));
    x->used = 1;
    x->r.seq = ev->seq;
    x->r.series_id = ev->series_id;
    snprintf(x->r.uid, sizeof(x->r.uid), "%s", ev->uid);
    x->r.shard = ev->shard;
    x->r.shards = ev->shards;
    return x;
}

void faid_series_ledger_event(faid_series_ledger *l, const faid_series_event *ev, int64_t now_ns)
{
    ledger_rec *x = find_rec(l, ev->seq);
    if (ev->kind == FAID_SERIES_EV_START) {
        if (!x)
            new_rec(l, ev);
        return;
    }
    if (!x)
        x = new_rec(l, ev);
    x->ended = 1;
    x->end_ns = now_ns;
    x->r.reason = ev->reason;
    x->r.frames = ev->frames;
    x->r.stale = ev->stale;
    /* The end's stamp: set for the open series after its start (faid_series_set_shard). */
    x->r.shard = ev->shard;
    x->r.shards = ev->shards;
}

int faid_series_ledger_count(faid_series_ledger *l, uint64_t seq, faid_series_outcome o)
{
    ledger_rec *x = find_rec(l, seq);
    if (!x)
        return 0;
    switch (o) {
    case FAID_SERIES_PROCESSED:
        x->r.processed++;
        break;
    case FAID_SERIES_FAILED:
        x->r.failed++;
        break;
    case FAID_SERIES_DROPPED:
        x->r.dropped++;
        break;
    }
    return 1;
}

int faid_series_ledger_due(faid_series_ledger *l, int64_t now_ns, int flush,
                           faid_series_record *out)
{
    ledger_rec *best = NULL;
    for (size_t i = 0; i < l->cap; i++) {
        ledger_rec *x = &l->recs[i];
        if (!x->used || !x->ended)
            continue;
        uint64_t done = x->r.processed + x->r.failed + x->r.dropped;
        int due = done >= x->r.frames || flush || now_ns - x->end_ns > l->end_wait_ns;
        if (due && (!best || x->r.seq < best->r.seq))
            best = x;
    }
    if (!best)
        return 0;
    *out = best->r;
    out->incomplete = best->r.processed + best->r.failed + best->r.dropped < best->r.frames;
    best->used = 0;
    if (l->hit == best)
        l->hit = NULL;
    return 1;
}
