/* faid_series: the one place where series are accounted for. A series (an acquisition: arm,
 * frames, end) is opened by a start message or, when faid missed it (started after the arm,
 * start lost), by its first accepted frame; it is closed by its end message, by the next series'
 * start or frame (superseded), after input.series_timeout without any message of it (timeout),
 * or by shutdown. Messages naming a series that was already closed after a newer one began are
 * stale (an aborted series' frames still in flight after the next arm): the caller drops and
 * counts them. A frame of the last series after its end, with nothing newer, starts it again
 * (a sender replaying the same series id), implicitly.
 *
 * Two objects, each with one owner thread at a time, no sockets, no frame slots, no locks of
 * their own:
 *   faid_series (the tracker, owned by ingest: by whichever ingest thread holds the mutex the
 *     ingest threads share, faid_ingest.c) sees every start, end and *accepted* frame in
 *     arrival order and answers with a verdict (accept into series instance `seq`, or stale)
 *     and with small event records (start / end) for the publisher. Only frames that passed
 *     validation may drive it: a malformed image naming another series must not split the
 *     open one (issue 10, defect 6); the caller counts such a frame on its own.
 *   faid_series_ledger (owned by the publisher) receives those events and the outcome of every
 *     frame (processed, failed, dropped) and says when a series' end may be published: once all
 *     of its frames are accounted for, or after end_wait without the rest (incomplete).
 *
 * Several input connections feeding one series (Jungfraujoch splits a series over sockets and
 * sends start and end on each): every call names its source (0..FAID_SERIES_MAX_SOURCES-1).
 * A start of the open series from a source that has not started it yet joins that source; the
 * series closes when every source that joined has sent its end. With one connection (source 0)
 * this is the plain start / frames / end machine.
 *
 * Series identity: series_id plus series_unique_id. A side without a unique id (DECTRIS v1, the
 * native protocol without one) matches on series_id alone. Each opened series gets a new `seq`
 * (1, 2, ...), so two series with the same id are never confused downstream. */
#ifndef FAID_SERIES_H
#define FAID_SERIES_H

#include "faid_proto.h"

#include <stddef.h>
#include <stdint.h>

#define FAID_SERIES_MAX_SOURCES 32 /* bits of a uint32_t mask */
#define FAID_SERIES_RECENT      16 /* closed series remembered to recognise stale messages */

/* Why a series started or ended; the names are the `reason` values of PROTOCOL.md §3. */
#define FAID_SERIES_REASONS(X)                                                                     \
    X(SERIES, "series")         /* start: from a start message */                                  \
    X(IMPLICIT, "implicit")     /* start: first frame, no start message (configuration only) */    \
    X(END, "end")               /* end: from an end message */                                     \
    X(SUPERSEDED, "superseded") /* end: another series started */                                  \
    X(TIMEOUT, "timeout")       /* end: input.series_timeout without a message of it */            \
    X(SHUTDOWN, "shutdown")     /* end: faid stopped */

typedef enum {
#define X(name, text) FAID_SERIES_##name,
    FAID_SERIES_REASONS(X)
#undef X
        FAID_SERIES_NREASONS
} faid_series_reason;

const char *faid_series_reason_name(faid_series_reason r);

typedef enum { FAID_SERIES_EV_START = 1, FAID_SERIES_EV_END } faid_series_ev_kind;

/* A series event: a small record, copied by value. */
typedef struct faid_series_event {
    faid_series_ev_kind kind;
    faid_series_reason reason;
    uint64_t seq; /* instance number, unique for the life of the process */
    uint64_t series_id;
    char uid[FAID_SERIES_UID_MAX];
    int64_t nimages;        /* START: expected frames from the start message, -1 unknown */
    uint64_t frames;        /* END: frames accepted into the series */
    uint64_t stale;         /* END: stale messages dropped while the series was open */
    uint32_t shard, shards; /* the series' shard stamp (faid_series_set_shard) */
} faid_series_event;

/* One call emits at most two events: the end of the series it supersedes and a start. */
typedef struct faid_series_out {
    int n;
    faid_series_event ev[2];
} faid_series_out;

typedef enum {
    FAID_SERIES_ACCEPT = 0, /* belongs to the open series (possibly just opened) */
    FAID_SERIES_STALE,      /* names a series already closed: drop and count */
    FAID_SERIES_UNKNOWN,    /* an end naming a series neither open nor recently closed */
} faid_series_verdict;

typedef struct faid_series faid_series;

/* timeout_ns: close the open series after this long without a message of it; 0 = never.
 * NULL on allocation failure. */
faid_series *faid_series_new(int64_t timeout_ns);
void faid_series_destroy(faid_series **t);

/* A start message. Always accepted (a start is authoritative): closes the open series as
 * superseded unless it is the same series started by a source that had not joined it yet. */
faid_series_verdict faid_series_start(faid_series *t, int source, uint64_t series_id,
                                      const char *uid, int64_t nimages, int64_t now_ns,
                                      faid_series_out *out);
/* An accepted image. *seq receives the series instance it belongs to (ACCEPT). A frame of a
 * series that is not open opens it implicitly (superseding the open one), unless it is stale:
 * it names a recently closed series and a newer series began since (STALE). */
faid_series_verdict faid_series_frame(faid_series *t, int source, uint64_t series_id,
                                      const char *uid, int64_t now_ns, uint64_t *seq,
                                      faid_series_out *out);
/* An image that failed validation: it drives nothing (no series opened, closed or split), but
 * when it names the open series it is one of its frames (answered with an error): returns 1 and
 * sets *seq; 0 when it names no open series. */
int faid_series_count_rejected(faid_series *t, int source, uint64_t series_id, const char *uid,
                               int64_t now_ns, uint64_t *seq);
/* An end message. ACCEPT when it names the open series (it closes once every joined source
 * ended); STALE when it names a series already closed; UNKNOWN for a series never seen (the
 * caller answers it as a protocol error). Neither changes the open series. */
faid_series_verdict faid_series_end(faid_series *t, int source, uint64_t series_id, const char *uid,
                                    int64_t now_ns, faid_series_out *out);
/* Closes the open series when input.series_timeout has passed since its last message. */
void faid_series_tick(faid_series *t, int64_t now_ns, faid_series_out *out);
/* Closes the open series (shutdown). */
void faid_series_close(faid_series *t, faid_series_reason reason, faid_series_out *out);

/* The open series, or the last one when none is open: 1 when open. */
int faid_series_current(const faid_series *t, uint64_t *series_id, const char **uid, uint64_t *seq);
/* Stale messages dropped so far (all series). */
uint64_t faid_series_stale_total(const faid_series *t);

/* Shard stamps (issue 18, PROTOCOL.md "Several instances"): which part of a series this
 * instance reduces, `shard` of `shards`, stamped into the series' start, results and end.
 * faid_series_set_default_shard: the value of every series its input did not name one for
 * (instance.shard / instance.shards; 0 of 1 until called).
 * faid_series_set_shard: the input (a fan-out) names the shard for a series. It applies to the
 * series the next start opens (call it before handing that start to faid_series_start) and,
 * when a series is open, to that series' frames and end from now on; the series after the next
 * one falls back to the default. shards 0 or shard >= shards are ignored (the caller checks and
 * answers its peer). */
void faid_series_set_default_shard(faid_series *t, uint32_t shard, uint32_t shards);
void faid_series_set_shard(faid_series *t, uint32_t shard, uint32_t shards);
/* The shard stamp of the open series (or of the last one). */
void faid_series_shard(const faid_series *t, uint32_t *shard, uint32_t *shards);

/* ---- the publisher's ledger ---------------------------------------------------------------- */

typedef enum {
    FAID_SERIES_PROCESSED = 0,
    FAID_SERIES_FAILED,
    FAID_SERIES_DROPPED,
} faid_series_outcome;

/* What the end message of a series reports. */
typedef struct faid_series_record {
    uint64_t seq, series_id;
    char uid[FAID_SERIES_UID_MAX];
    faid_series_reason reason;
    uint64_t frames; /* accepted by ingest */
    uint64_t processed, failed, dropped, stale;
    int incomplete; /* published before every frame was accounted for */
    uint32_t shard, shards;
} faid_series_record;

typedef struct faid_series_ledger faid_series_ledger;

/* capacity: series tracked at once (a series stays until its end is published; the daemon
 * passes its slot count, as every series still waiting holds at least one frame in flight);
 * end_wait_ns: how long an ended series may wait for its outstanding frames. */
faid_series_ledger *faid_series_ledger_new(size_t capacity, int64_t end_wait_ns);
void faid_series_ledger_destroy(faid_series_ledger **l);
/* Applies a START or END event. */
void faid_series_ledger_event(faid_series_ledger *l, const faid_series_event *ev, int64_t now_ns);
/* One frame of series instance seq had this outcome (unknown seq: ignored, 0 returned; 1 when
 * counted). */
int faid_series_ledger_count(faid_series_ledger *l, uint64_t seq, faid_series_outcome o);
/* Takes out one series whose end is due: every frame accounted for, or ended longer than
 * end_wait ago, or (flush) any ended series. Returns 1 and fills *out, 0 when none is due. */
int faid_series_ledger_due(faid_series_ledger *l, int64_t now_ns, int flush,
                           faid_series_record *out);

#endif
