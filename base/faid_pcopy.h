/* faid_pcopy: one large memcpy shared by a few threads. A worker that copies a 2.69 MB EIGER 4M
 * frame into pinned staging spends 200-330 us on it (one thread's memcpy is bound by its own
 * memory latency, not by the memory bus); split over N threads the copy takes about 1/N of
 * that where the bus has room. Issue 17: with four input connections and one GPU the one worker
 * per device spent 149 of its 228 us per result copying the frames outside the pinned arena.
 *
 * A pool has n - 1 threads of its own; faid_pcopy_run gives each a share of the bytes, copies
 * one share itself and returns when every share is done, so the copy is complete on return, as
 * memcpy's. Copies below FAID_PCOPY_MIN bytes, or with a pool of one, are a plain memcpy. The
 * bytes end up exactly as memcpy leaves them. One caller at a time per pool (the engine's
 * worker thread); the pool's threads sleep between copies. */
#ifndef FAID_PCOPY_H
#define FAID_PCOPY_H

#include "faid_err.h"

#include <stddef.h>

#define FAID_PCOPY_MAX 16            /* threads of a pool, the caller included */
#define FAID_PCOPY_MIN (256u * 1024) /* smaller copies are not split */

typedef struct faid_pcopy faid_pcopy;

/* A pool of n threads in all (the caller and n - 1 of its own), 1..FAID_PCOPY_MAX; NULL with d
 * saying why (n out of range, no thread could be started). */
faid_pcopy *faid_pcopy_new(int n, faid_diag *d);
/* Stops and joins the pool's threads; NULL is fine; *p becomes NULL. */
void faid_pcopy_destroy(faid_pcopy **p);
/* Threads of the pool, the caller included (1 for NULL). */
int faid_pcopy_threads(const faid_pcopy *p);
/* memcpy(dst, src, n) over the pool's threads (p NULL: memcpy). The areas must not overlap. */
void faid_pcopy_run(faid_pcopy *p, void *dst, const void *src, size_t n);

#endif
