/* faid_memstat: the daemon's memory as the kernel and the C library's allocator see it, for
 * status (`memory`), the stats message and /metrics. The resident size alone cannot tell a leak
 * (bytes handed out and never freed) from memory the allocator keeps free inside its arenas
 * (fragmentation, per-thread arenas grown to a working size): the soak of issue 10, defect 14
 * needed both. Read from /proc/self/status (VmRSS, RssAnon) and, with glibc, mallinfo2() and the
 * number of arenas malloc_info() lists; zeros where the C library does not tell. */
#ifndef FAID_MEMSTAT_H
#define FAID_MEMSTAT_H

#include <stddef.h>
#include <stdint.h>

typedef struct faid_memstat {
    uint64_t rss_bytes;      /* resident (VmRSS) */
    uint64_t rss_anon_bytes; /* its anonymous part (RssAnon): heaps, mappings, stacks */
    uint64_t heap_bytes;     /* held by the allocator's arenas (main heap and thread arenas) */
    uint64_t mmap_bytes;     /* large blocks mapped one by one (in use) */
    uint64_t in_use_bytes;   /* handed out by malloc and not freed (arenas + mapped blocks) */
    uint64_t free_bytes;     /* free inside the arenas, kept by the allocator */
    uint64_t arenas;         /* malloc arenas (the main one + those made for threads) */
} faid_memstat;

/* The byte-valued fields, each with the `kind` label of the faid_memory_bytes metric. */
#define FAID_MEMSTAT_BYTES(X)                                                                      \
    X(rss_bytes, "rss")                                                                            \
    X(rss_anon_bytes, "rss_anon")                                                                  \
    X(heap_bytes, "heap")                                                                          \
    X(mmap_bytes, "mmap")                                                                          \
    X(in_use_bytes, "in_use")                                                                      \
    X(free_bytes, "free")

/* Fills m (fields it cannot read stay 0). Takes each arena's lock in turn, briefly: status,
 * stats (once per stats.interval) and /metrics call it, not the frame path. */
void faid_memstat_read(faid_memstat *m);

/* The allocator's policy for large blocks, fitted to the setup (issue 20, defect 11). glibc
 * serves a block of at least its mmap threshold with a mapping of its own, given back to the
 * kernel when freed, and everything smaller from its arenas; out of the box the threshold
 * follows the largest mapped block freed so far (up to 32 MiB). Each reload with an OpenCL device
 * builds programs, and the runtime's compiler reads and frees buffers of 0.4-2 MB (PoCL: its
 * cached program files, clang's source tables): the first one freed lifted the threshold to 2 MB,
 * so the next ones were carved out of the arenas between the new setup's long-lived blocks and
 * left holes there (PoCL, peaks, hits, 64x64 frames: free bytes 27.5 MB after 4 reloads, and
 * after 32; the bytes in use 0.3 MB apart). This fixes the threshold at the largest block the
 * setup's frame path allocates per frame (`per_frame_bytes`: a received frame, a result or hit
 * message; at least 128 KiB, glibc's default; at most 32 MiB, its maximum), so per-frame blocks
 * keep coming from the arenas (no mapping per frame) and anything larger, the compiler's one-off
 * buffers, is mapped and handed back whole: free bytes 6.6 MB after 4 reloads, 8.2 MB after 32
 * (tests/integration/test_hardening_memory.py). The trim threshold (free memory at the top of
 * an arena that is given back) becomes twice that, as glibc's own rule sets it. The cost: a
 * frame whose blocks exceed the threshold (a user_data near its limit, thousands of peaks) gets
 * a mapping of its own, a few page faults more. Called before each setup's engines are built
 * (faid_gen_build_masked: the main thread on reload, the builder thread for a series' own
 * setup); the setting is the process's. Returns the threshold set, 0 where the allocator is not
 * glibc's (AddressSanitizer, other C libraries). */
size_t faid_malloc_fit(size_t per_frame_bytes);

#endif
