/* Unit tests of series accounting (daemon/faid_series.c), without sockets: the tracker's verdicts
 * and events for start / frames / end, a missing start (implicit), a missing end (superseded,
 * timeout), stale messages of closed series, reused series ids, unique ids, several sources
 * feeding one series; the ledger's end decision (complete, waited too long, flush) and its
 * counts. The daemon's sources are not in a library, so the module is compiled into this test. */
#include "../../daemon/faid_series.c"

#include "faid_test.h"

#define MS 1000000ll

static int is_ev(const faid_series_event *e, faid_series_ev_kind k, faid_series_reason r,
                 uint64_t id)
{
    return e->kind == k && e->reason == r && e->series_id == id;
}

static void test_plain_series(void)
{
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq = 0;
    CHECK(faid_series_start(t, 0, 5, "", 100, 0, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_START, FAID_SERIES_SERIES, 5));
    CHECK(o.ev[0].nimages == 100 && o.ev[0].seq == 1);
    for (int k = 0; k < 10; k++) {
        CHECK(faid_series_frame(t, 0, 5, "", k, &seq, &o) == FAID_SERIES_ACCEPT);
        CHECK(o.n == 0 && seq == 1);
    }
    uint64_t id;
    const char *uid;
    CHECK(faid_series_current(t, &id, &uid, &seq) == 1 && id == 5 && seq == 1);
    CHECK(faid_series_end(t, 0, 5, "", 20, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_END, FAID_SERIES_END, 5));
    CHECK(o.ev[0].frames == 10 && o.ev[0].seq == 1 && o.ev[0].nimages == 100);
    CHECK(faid_series_current(t, &id, &uid, &seq) == 0 && id == 5);
    faid_series_destroy(&t);
    CHECK(t == NULL);
    faid_series_destroy(&t);
}

static void test_missing_start_and_end(void)
{
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq = 0;
    /* faid started after the arm: the first frame opens the series. */
    CHECK(faid_series_frame(t, 0, 7, "", 0, &seq, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_START, FAID_SERIES_IMPLICIT, 7));
    CHECK(o.ev[0].nimages == -1 && seq == 1);
    CHECK(faid_series_frame(t, 0, 7, "", 1, &seq, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    /* Its end was lost: the next start closes it. */
    CHECK(faid_series_start(t, 0, 8, "", -1, 2, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 2);
    CHECK(is_ev(&o.ev[0], FAID_SERIES_EV_END, FAID_SERIES_SUPERSEDED, 7) && o.ev[0].frames == 2);
    CHECK(is_ev(&o.ev[1], FAID_SERIES_EV_START, FAID_SERIES_SERIES, 8) && o.ev[1].seq == 2);
    /* A frame of a series never seen (start lost) closes 8 and opens 9 implicitly. */
    CHECK(faid_series_frame(t, 0, 9, "", 3, &seq, &o) == FAID_SERIES_ACCEPT && seq == 3);
    CHECK(o.n == 2 && is_ev(&o.ev[0], FAID_SERIES_EV_END, FAID_SERIES_SUPERSEDED, 8));
    CHECK(o.ev[0].frames == 0);
    CHECK(is_ev(&o.ev[1], FAID_SERIES_EV_START, FAID_SERIES_IMPLICIT, 9));
    /* Opened by a frame: the first end closes it. */
    CHECK(faid_series_end(t, 0, 9, "", 4, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_END, FAID_SERIES_END, 9));
    faid_series_close(t, FAID_SERIES_SHUTDOWN, &o);
    CHECK(o.n == 0);
    faid_series_destroy(&t);
}

static void test_rejected_frames_drive_nothing(void)
{
    /* Issue 10 defect 6 at the tracker: a rejected image naming series 6 inside series 5 is not a
     * frame of any series and changes nothing; one naming series 5 counts in series 5. */
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq = 0;
    faid_series_start(t, 0, 5, "", 40, 0, &o);
    faid_series_frame(t, 0, 5, "", 1, &seq, &o);
    CHECK(faid_series_count_rejected(t, 0, 6, "", 2, &seq) == 0);
    CHECK(faid_series_count_rejected(t, 0, 5, "", 3, &seq) == 1 && seq == 1);
    CHECK(faid_series_frame(t, 0, 5, "", 4, &seq, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(seq == 1);
    CHECK(faid_series_end(t, 0, 5, "", 5, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && o.ev[0].seq == 1 && o.ev[0].frames == 3 && o.ev[0].nimages == 40);
    /* And none with no series open. */
    CHECK(faid_series_count_rejected(t, 0, 5, "", 6, &seq) == 0);
    faid_series_destroy(&t);
}

static void test_timeout(void)
{
    faid_series *t = faid_series_new(1000 * MS);
    faid_series_out o;
    uint64_t seq;
    faid_series_start(t, 0, 1, "", -1, 0, &o);
    faid_series_frame(t, 0, 1, "", 500 * MS, &seq, &o);
    faid_series_tick(t, 1400 * MS, &o);
    CHECK(o.n == 0); /* 900 ms since the last frame */
    faid_series_tick(t, 1501 * MS, &o);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_END, FAID_SERIES_TIMEOUT, 1));
    CHECK(o.ev[0].frames == 1);
    faid_series_tick(t, 5000 * MS, &o);
    CHECK(o.n == 0);
    /* Its end arriving after the timeout is stale; a frame of it, with nothing newer begun,
     * starts it again. */
    CHECK(faid_series_end(t, 0, 1, "", 5001 * MS, &o) == FAID_SERIES_STALE && o.n == 0);
    CHECK(faid_series_stale_total(t) == 1);
    CHECK(faid_series_frame(t, 0, 1, "", 5002 * MS, &seq, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_START, FAID_SERIES_IMPLICIT, 1) && seq == 2);
    faid_series_destroy(&t);

    /* timeout 0: never. */
    t = faid_series_new(0);
    faid_series_start(t, 0, 1, "", -1, 0, &o);
    faid_series_tick(t, 1000000 * MS, &o);
    CHECK(o.n == 0);
    faid_series_destroy(&t);
}

static void test_stale_after_restart(void)
{
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq;
    /* Series 1 aborted (end), 2 started; frames and the end of 1 still in flight. */
    faid_series_start(t, 0, 1, "", 10, 0, &o);
    faid_series_frame(t, 0, 1, "", 1, &seq, &o);
    faid_series_end(t, 0, 1, "", 2, &o);
    faid_series_start(t, 0, 2, "", 10, 3, &o);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_START, FAID_SERIES_SERIES, 2));
    CHECK(faid_series_frame(t, 0, 1, "", 4, &seq, &o) == FAID_SERIES_STALE && o.n == 0);
    CHECK(faid_series_end(t, 0, 1, "", 5, &o) == FAID_SERIES_STALE && o.n == 0);
    CHECK(faid_series_frame(t, 0, 2, "", 6, &seq, &o) == FAID_SERIES_ACCEPT && seq == 2);
    CHECK(o.n == 0);
    /* An end of a series never seen is unknown (not stale); it does not close 2. */
    CHECK(faid_series_end(t, 0, 99, "", 7, &o) == FAID_SERIES_UNKNOWN && o.n == 0);
    CHECK(faid_series_end(t, 0, 2, "", 8, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && o.ev[0].frames == 1 && o.ev[0].stale == 2);
    CHECK(faid_series_stale_total(t) == 2);
    /* A start is authoritative: series 1 started again is a new instance, its frames count. */
    faid_series_start(t, 0, 1, "", -1, 9, &o);
    CHECK(o.n == 1 && o.ev[0].seq == 3);
    CHECK(faid_series_frame(t, 0, 1, "", 10, &seq, &o) == FAID_SERIES_ACCEPT && seq == 3);
    /* The same start again from the same source: a re-arm, a new instance. */
    faid_series_start(t, 0, 1, "", -1, 11, &o);
    CHECK(o.n == 2 && is_ev(&o.ev[0], FAID_SERIES_EV_END, FAID_SERIES_SUPERSEDED, 1));
    CHECK(o.ev[1].seq == 4);
    faid_series_destroy(&t);
}

static void test_unique_ids(void)
{
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq;
    faid_series_start(t, 0, 1, "A", -1, 0, &o);
    /* A frame without a unique id matches on the id. */
    CHECK(faid_series_frame(t, 0, 1, "", 1, &seq, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_frame(t, 0, 1, NULL, 1, &seq, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    /* Same id, another unique id: another series. */
    CHECK(faid_series_frame(t, 0, 1, "B", 2, &seq, &o) == FAID_SERIES_ACCEPT && seq == 2);
    CHECK(o.n == 2 && o.ev[0].kind == FAID_SERIES_EV_END && strcmp(o.ev[0].uid, "A") == 0);
    CHECK(o.ev[1].kind == FAID_SERIES_EV_START && strcmp(o.ev[1].uid, "B") == 0);
    CHECK(faid_series_frame(t, 0, 1, "A", 3, &seq, &o) == FAID_SERIES_STALE);
    faid_series_destroy(&t);
}

static void test_several_sources(void)
{
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq;
    /* Jungfraujoch: start and end on each of three sockets, frames spread over them. */
    CHECK(faid_series_start(t, 0, 4, "u", 9, 0, &o) == FAID_SERIES_ACCEPT && o.n == 1);
    CHECK(faid_series_frame(t, 1, 4, "u", 1, &seq, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_start(t, 1, 4, "u", 9, 2, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_start(t, 2, 4, "u", 9, 3, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_frame(t, 2, 4, "u", 4, &seq, &o) == FAID_SERIES_ACCEPT && seq == 1);
    CHECK(faid_series_end(t, 1, 4, "u", 5, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_frame(t, 0, 4, "u", 6, &seq, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_end(t, 0, 4, "u", 7, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_end(t, 2, 4, "u", 8, &o) == FAID_SERIES_ACCEPT);
    CHECK(o.n == 1 && is_ev(&o.ev[0], FAID_SERIES_EV_END, FAID_SERIES_END, 4));
    CHECK(o.ev[0].frames == 3);
    /* A series opened by a frame on one socket is joined by a late start on another. */
    faid_series_frame(t, 3, 5, "", 9, &seq, &o);
    CHECK(o.n == 1 && o.ev[0].reason == FAID_SERIES_IMPLICIT);
    CHECK(faid_series_start(t, 0, 5, "v", 20, 10, &o) == FAID_SERIES_ACCEPT && o.n == 0);
    CHECK(faid_series_end(t, 0, 5, "v", 11, &o) == FAID_SERIES_ACCEPT && o.n == 1);
    CHECK(o.ev[0].nimages == 20 && strcmp(o.ev[0].uid, "v") == 0);
    faid_series_destroy(&t);
}

static void test_recent_ring(void)
{
    /* More closed series than remembered: the oldest are forgotten (their stray frames then open
     * a series implicitly), the recent ones older than the last stay stale. */
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq;
    for (uint64_t id = 1; id <= FAID_SERIES_RECENT + 4; id++) {
        faid_series_start(t, 0, id, "", -1, 0, &o);
        faid_series_end(t, 0, id, "", 0, &o);
    }
    CHECK(faid_series_frame(t, 0, FAID_SERIES_RECENT + 3, "", 1, &seq, &o) == FAID_SERIES_STALE);
    CHECK(faid_series_frame(t, 0, 5, "", 1, &seq, &o) == FAID_SERIES_STALE);
    CHECK(faid_series_frame(t, 0, 1, "", 1, &seq, &o) == FAID_SERIES_ACCEPT && o.n == 1);
    /* Now 1 is open: the last closed one is stale too. */
    CHECK(faid_series_frame(t, 0, FAID_SERIES_RECENT + 4, "", 1, &seq, &o) == FAID_SERIES_STALE);
    faid_series_destroy(&t);
}

static faid_series_event ev(faid_series_ev_kind k, uint64_t seq, uint64_t frames)
{
    faid_series_event e = {.kind = k, .seq = seq, .series_id = 10 + seq, .frames = frames};
    e.reason = k == FAID_SERIES_EV_END ? FAID_SERIES_END : FAID_SERIES_SERIES;
    snprintf(e.uid, sizeof(e.uid), "s%llu", (unsigned long long)seq);
    return e;
}

static void test_ledger(void)
{
    faid_series_ledger *l = faid_series_ledger_new(4, 1000 * MS);
    faid_series_record r;
    faid_series_event e = ev(FAID_SERIES_EV_START, 1, 0);
    faid_series_ledger_event(l, &e, 0);
    for (int k = 0; k < 3; k++)
        CHECK(faid_series_ledger_count(l, 1, FAID_SERIES_PROCESSED) == 1);
    CHECK(faid_series_ledger_due(l, 0, 0, &r) == 0); /* not ended */
    e = ev(FAID_SERIES_EV_END, 1, 5);
    faid_series_ledger_event(l, &e, 10);
    CHECK(faid_series_ledger_due(l, 10, 0, &r) == 0); /* 3 of 5 */
    faid_series_ledger_count(l, 1, FAID_SERIES_FAILED);
    CHECK(faid_series_ledger_due(l, 10, 0, &r) == 0);
    faid_series_ledger_count(l, 1, FAID_SERIES_DROPPED);
    CHECK(faid_series_ledger_due(l, 10, 0, &r) == 1);
    CHECK(r.seq == 1 && r.series_id == 11 && strcmp(r.uid, "s1") == 0 && !r.incomplete);
    CHECK(r.processed == 3 && r.failed == 1 && r.dropped == 1 && r.frames == 5);
    CHECK(faid_series_ledger_due(l, 10, 1, &r) == 0); /* taken out */
    /* Unknown series: not counted. */
    CHECK(faid_series_ledger_count(l, 1, FAID_SERIES_PROCESSED) == 0);

    /* Waiting too long: incomplete. */
    e = ev(FAID_SERIES_EV_START, 2, 0);
    faid_series_ledger_event(l, &e, 0);
    faid_series_ledger_count(l, 2, FAID_SERIES_PROCESSED);
    e = ev(FAID_SERIES_EV_END, 2, 2);
    faid_series_ledger_event(l, &e, 0);
    CHECK(faid_series_ledger_due(l, 1000 * MS, 0, &r) == 0);
    CHECK(faid_series_ledger_due(l, 1001 * MS, 0, &r) == 1 && r.incomplete && r.processed == 1);

    /* An empty series ends at once; ends come out lowest seq first; flush takes the rest. */
    for (uint64_t s = 3; s <= 5; s++) {
        e = ev(FAID_SERIES_EV_START, s, 0);
        faid_series_ledger_event(l, &e, 0);
    }
    e = ev(FAID_SERIES_EV_END, 5, 0);
    faid_series_ledger_event(l, &e, 0);
    e = ev(FAID_SERIES_EV_END, 4, 1);
    faid_series_ledger_event(l, &e, 0);
    e = ev(FAID_SERIES_EV_END, 3, 0);
    faid_series_ledger_event(l, &e, 0);
    CHECK(faid_series_ledger_due(l, 0, 0, &r) == 1 && r.seq == 3);
    CHECK(faid_series_ledger_due(l, 0, 0, &r) == 1 && r.seq == 5);
    CHECK(faid_series_ledger_due(l, 0, 0, &r) == 0);
    CHECK(faid_series_ledger_due(l, 0, 1, &r) == 1 && r.seq == 4 && r.incomplete);

    /* Results that arrive before the end event are kept; an end without a known start makes a
     * record of its own. */
    e = ev(FAID_SERIES_EV_END, 9, 0);
    faid_series_ledger_event(l, &e, 0);
    CHECK(faid_series_ledger_due(l, 0, 0, &r) == 1 && r.seq == 9 && !r.incomplete);

    /* Full: the oldest is forgotten. */
    for (uint64_t s = 20; s < 25; s++) {
        e = ev(FAID_SERIES_EV_START, s, 0);
        faid_series_ledger_event(l, &e, 0);
    }
    CHECK(faid_series_ledger_count(l, 20, FAID_SERIES_PROCESSED) == 0);
    CHECK(faid_series_ledger_count(l, 24, FAID_SERIES_PROCESSED) == 1);
    faid_series_ledger_destroy(&l);
    CHECK(l == NULL);
}

static void test_names(void)
{
    CHECK(strcmp(faid_series_reason_name(FAID_SERIES_IMPLICIT), "implicit") == 0);
    CHECK(strcmp(faid_series_reason_name(FAID_SERIES_TIMEOUT), "timeout") == 0);
    CHECK(strcmp(faid_series_reason_name(FAID_SERIES_NREASONS), "unknown") == 0);
}

/* Shard stamps (issue 18): the default (instance.shard / instance.shards) on every series the
 * input names none for; faid_series_set_shard before a start stamps that series' start, frames
 * and end, and the series after it falls back to the default; a call while a series is open
 * stamps its frames and end from then on; nonsense (shards 0, shard >= shards) changes nothing. */
static void test_shard_stamps(void)
{
    faid_series *t = faid_series_new(0);
    faid_series_out o;
    uint64_t seq;
    uint32_t sh, n;
    faid_series_shard(t, &sh, &n);
    CHECK(sh == 0 && n == 1);
    faid_series_set_default_shard(t, 1, 3);
    faid_series_set_default_shard(t, 3, 3); /* ignored */
    faid_series_start(t, 0, 1, "", -1, 0, &o);
    CHECK(o.n == 1 && o.ev[0].shard == 1 && o.ev[0].shards == 3);
    faid_series_set_shard(t, 2, 4); /* for the next start, and the open series from now on */
    faid_series_frame(t, 0, 1, "", 1, &seq, &o);
    faid_series_shard(t, &sh, &n);
    CHECK(sh == 2 && n == 4);
    faid_series_end(t, 0, 1, "", 2, &o);
    CHECK(o.n == 1 && o.ev[0].shard == 2 && o.ev[0].shards == 4);
    faid_series_start(t, 0, 2, "", -1, 3, &o);
    CHECK(o.n == 1 && o.ev[0].shard == 2 && o.ev[0].shards == 4);
    faid_series_end(t, 0, 2, "", 4, &o);
    faid_series_set_shard(t, 0, 0); /* ignored */
    faid_series_start(t, 0, 3, "", -1, 5, &o);
    CHECK(o.n == 1 && o.ev[0].shard == 1 && o.ev[0].shards == 3); /* the default again */
    faid_series_ledger *l = faid_series_ledger_new(4, 0);
    faid_series_ledger_event(l, &o.ev[0], 5);
    faid_series_close(t, FAID_SERIES_SHUTDOWN, &o);
    faid_series_ledger_event(l, &o.ev[0], 6);
    faid_series_record r;
    CHECK(faid_series_ledger_due(l, 7, 1, &r) == 1 && r.shard == 1 && r.shards == 3);
    faid_series_ledger_destroy(&l);
    faid_series_destroy(&t);
}

int main(void)
{
    RUN(test_plain_series());
    RUN(test_missing_start_and_end());
    RUN(test_rejected_frames_drive_nothing());
    RUN(test_timeout());
    RUN(test_stale_after_restart());
    RUN(test_unique_ids());
    RUN(test_several_sources());
    RUN(test_recent_ring());
    RUN(test_ledger());
    RUN(test_names());
    RUN(test_shard_stamps());
    return faid_test_finish();
}
