/* faid_memstat: the daemon's memory as the kernel and the C library's allocator see it, for
 * status (`memory`), the stats message and /metrics. The resident size alone cannot tell a leak
 * (bytes handed out and never freed) from memory the allocator keeps free inside its arenas
 * (fragmentation, per-thread arenas grown to a working size): the soak of issue 10, defect 14
 * needed both. Read from /proc/self/status (VmRSS, RssAnon) and, with glibc, mallinfo2() and the
 * number of arenas malloc_info() lists; zeros where the C library does not tell. */
#ifndef FAID_MEMSTAT_H
#define FAID_MEMSTAT_H

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

#endif
