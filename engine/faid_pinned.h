/* faid_pinned: one arena of page-locked (pinned) host memory that the ingest threads copy each
 * received frame into, so that the engine's H2D reads it in place (faid_engine_host_register)
 * instead of the worker copying it into its own pinned staging first. The copy moves from the
 * one worker thread per device to the ingest threads (one per input endpoint, in parallel), and
 * it is fused with the block-table parse, which then walks the copy while it is in the cache.
 *
 * The arena is allocated once, at start (OpenCL CL_MEM_ALLOC_HOST_PTR on a context of its own
 * for the first worker's device, mapped for the life of the daemon; plain aligned memory for the
 * reference device). Blocks are taken in arrival order from a ring and given back when the frame
 * is done, in any order: the ring's tail moves over blocks given back, so one slow frame only
 * holds back the space behind it. A frame that does not fit (arena full, or the frame larger
 * than the arena) is not waited for: it keeps its ZeroMQ message and the worker copies it, as
 * without the arena. Thread-safe (one mutex: two pointer updates per frame).
 *
 * The last FAID_PINNED_KEEP blocks given back are kept for the next allocation of their size
 * (within an eighth) before the ring is asked: in a steady stream of equal frames the same
 * dozen blocks then go round, memory still in the caches and the TLB, instead of the ring
 * walking the whole arena (512 MB: each frame in memory untouched for hundreds of frames). On
 * one H100 host the block-table parse from an arena block took 210 us against 109 from the
 * ZeroMQ message's recycled buffer (tests/bench/results/h100-2026-11-27-round5-probe4). When
 * the ring is full the kept blocks go back to it first. */
#ifndef FAID_PINNED_H
#define FAID_PINNED_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faid_pinned faid_pinned;

/* bytes: arena size; device: the devices spec of the engine that will read it ("ref", "cpu",
 * "gpu", "auto", an index). NULL on failure (d says why). */
faid_pinned *faid_pinned_new(const char *device, size_t bytes, faid_diag *d);
void faid_pinned_destroy(faid_pinned **p);
/* The whole arena (for faid_engine_host_register) and whether it is page-locked memory (0: plain
 * memory, the reference device or an OpenCL runtime that gave none). */
void *faid_pinned_base(const faid_pinned *p, size_t *bytes);
int faid_pinned_locked(const faid_pinned *p);
/* A block of n bytes (64-byte aligned), or NULL when it does not fit now. */
void *faid_pinned_alloc(faid_pinned *p, size_t n);
/* Gives a block back (NULL: nothing). */
void faid_pinned_free(faid_pinned *p, void *block);
/* blocks kept for reuse by default, and the most (faid_pinned_set_keep) */
#define FAID_PINNED_KEEP 16
/* Blocks given back that are kept for reuse (0: every block goes straight back to the ring, the
 * plain ring order; at most 32). */
void faid_pinned_set_keep(faid_pinned *p, int n);
/* Allocations served from kept blocks (tests, benchmarks). */
uint64_t faid_pinned_reused(faid_pinned *p);
/* Whether ptr lies inside the arena (a block, or bytes within one). */
int faid_pinned_contains(const faid_pinned *p, const void *ptr);
/* The bytes a block returned by faid_pinned_alloc can hold (at least what was asked). */
size_t faid_pinned_block_bytes(const void *block);
/* Bytes in blocks not yet given back (tests, status). */
size_t faid_pinned_used(faid_pinned *p);

#endif
