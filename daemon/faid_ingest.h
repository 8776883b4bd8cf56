/* faid_ingest: the ingest threads, one per input socket (input.endpoint).
 *
 * Each reads its PULL socket, validates and decodes the message (proto/faid_input.h), takes a
 * slot from the pool (faid_pool.h), parses a compressed payload's block table, and queues the
 * frame to the workers (policy block / drop_oldest / drop_newest); series starts and ends go to
 * the publisher as events. The series tracker is shared by the threads under one mutex. Ingest
 * sees of the server only its hand-off (faid_handoff.h: queues, counters, stop flags), the pools
 * (faid_pool.h) and the generations (faid_gen.h), never the shared state of faid_state.h; the
 * lifecycle (faid_server.c) fills the hand-off, starts and joins it through this header. */
#ifndef FAID_INGEST_H
#define FAID_INGEST_H

#include "faid_err.h"
#include "faid_handoff.h"

/* Threads. The ingest threads, one per input socket (faid_ingest.c): started with their shared
 * series tracker and a copy of h (*out set even on failure, for join); join waits for every one
 * of them (after *h->stop_ingest), then closes the open series (shutdown), queues its end, frees
 * the set and nulls *set. running: 1 while any was started and not joined. */
typedef struct faid_ingest_set faid_ingest_set;
int faid_ingest_start(const faid_handoff *h, faid_ingest_set **out, faid_diag *d);
void faid_ingest_join(faid_ingest_set **set);
int faid_ingest_running(const faid_ingest_set *set);

#endif
