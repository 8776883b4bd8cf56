/* faid_lossless: the lossless output channel (proto/PROTOCOL.md 3.6). faid binds a ROUTER socket;
 * one consumer at a time connects a DEALER, says hello with a credit (how many unacknowledged
 * messages it lets faid send ahead) and acknowledges cumulatively by msg_number. Every message
 * of the series stream (start, result, end, error) is copied into a bounded byte ring when it is
 * published and stays there until the consumer acknowledges it; a new session (hello, or the
 * consumer reconnecting under the same or another name) re-sends everything unacknowledged from
 * the oldest, with the same msg_number, so the consumer can drop duplicates; a hello on the
 * connection that already holds them re-sends nothing (a second copy would only queue behind
 * the first), and the last messages of a consumer's earlier connection still count for it.
 * Peers other than the consumer are answered and probed for at a bounded rate (PROTOCOL.md
 * 3.6, "What the channel bounds"). What faid finally
 * gives up (ring full under `drop_oldest`, or unacknowledged when the shutdown timeout ends) is
 * counted per message kind in the stats (lossless.given_up) and logged.
 *
 * DESIGN. Owned and used by the publisher thread alone (the socket, the ring, the session); the
 * control thread only reads the atomic counters in faid_stats and the consumer name through
 * faid_lossless_consumer(), which takes the module's mutex. The ring is allocated once at start
 * (output.lossless_buffer bytes): no allocation per message. While the consumer is away the ring
 * fills without slowing anything; the publisher never blocks on the socket (every send is
 * non-blocking), only, with overflow policy `block`, on a full ring. */
#ifndef FAID_LOSSLESS_H
#define FAID_LOSSLESS_H

#include "faid_err.h"
#include "faid_stats.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faid_lossless faid_lossless;

/* Send high-water mark the ROUTER needs (set before it binds): above the largest credit, so a
 * send within a consumer's credit never meets it. */
#define FAID_LL_SNDHWM (65536 + 1024)

/* router: a bound ZMQ_ROUTER socket of context zctx (ownership stays with the caller, which
 * closes it after destroying this; the channel watches its accepted connections through a
 * socket monitor of its own). cap: ring bytes. consumer_timeout_ns: silence after which the
 * active consumer counts as gone. NULL on failure (d says why). */
faid_lossless *faid_lossless_new(void *zctx, void *router, size_t cap, int64_t consumer_timeout_ns,
                                 faid_stats *st, faid_diag *d);
void faid_lossless_destroy(faid_lossless **ll);

/* Keeps a copy of one series-stream message (topic start/result/end/error, seq = its
 * msg_number). 0; FAID_EBUSY when the ring has no room now (the caller applies the overflow
 * policy); FAID_ESIZE when the message is larger than the whole ring (then it was given up and
 * counted). */
int faid_lossless_put(faid_lossless *ll, const char *topic, uint64_t seq, const void *body,
                      size_t len);
/* Gives up the oldest message held (counted per kind); 0, or FAID_EINVAL when none is held. */
int faid_lossless_give_up_oldest(faid_lossless *ll);
/* Gives up everything held; returns how many messages that was. */
uint64_t faid_lossless_give_up_all(faid_lossless *ll);

/* Serves the consumer: waits up to timeout_ms (0 = not at all) for peer messages, handles at
 * most 64 of those that are there (hello, ack, bye; the rest waits for the next pump, so a
 * flood of them never holds the publisher up), then sends what the credit allows. */
void faid_lossless_pump(faid_lossless *ll, int timeout_ms);

/* 1 when the channel has work for the next pump at once: a consumer session holds messages not
 * yet sent to it (its credit is used up), or the last pump left peer messages unread. */
int faid_lossless_pending(const faid_lossless *ll);
/* Messages held (unacknowledged). */
uint64_t faid_lossless_held(const faid_lossless *ll);
/* Copies the active consumer's name ("" when none) into out; any thread. */
void faid_lossless_consumer(faid_lossless *ll, char *out, size_t cap);
/* The 16-hex-digit instance id of this run (welcome messages, status). */
const char *faid_lossless_instance(const faid_lossless *ll);
size_t faid_lossless_capacity(const faid_lossless *ll);

#endif
