/* faid_rxalloc: frames received straight into the pinned input arena (input.pinned_receive).
 *
 * Without it a received frame crosses host memory twice before the device reads it: the kernel's
 * socket buffer into the ZeroMQ message (libzmq's I/O thread), then that message into pinned
 * memory (an ingest thread or the worker: 250 us alone for an EIGER 4M bslz4 frame of 2.69 MB
 * on the H100 host, 550-620 us inside a running daemon; issue 17). libzmq allocates a large
 * message's buffer itself with malloc, on its I/O thread, and its allocator hook is a draft
 * API that the Debian package does not carry. So the daemon's executable provides malloc, free,
 * calloc and realloc: every call goes to the C library's own allocator (__libc_malloc ...),
 * except a request of at least FAID_RXALLOC_MIN bytes made on an I/O thread of an input
 * context while receiving is on: that one is a block of the pinned input arena (faid_pinned.h)
 * when one fits now, else the C library's as before (counted). The I/O threads are known by
 * the name libzmq gives them: the input contexts get ZMQ_THREAD_NAME_PREFIX
 * FAID_RXALLOC_PREFIX, so theirs read "<prefix>/ZMQbg/IO/<n>"; each thread's verdict is kept
 * in a thread-local flag after its first large request. free and realloc recognize arena
 * blocks by address. The frame's bytes then already lie in memory the engine reads in place
 * (faid_engine_host_register): neither ingest nor the worker copies them.
 *
 * Builds with AddressSanitizer or ThreadSanitizer (which bring allocators of their own) leave
 * all of this out: faid_rxalloc_available() is 0 there and the daemon runs as with
 * input.pinned_receive false. Starting is idempotent; thread-safe throughout. */
#ifndef FAID_RXALLOC_H
#define FAID_RXALLOC_H

#include "faid_pinned.h"

#include <stddef.h>
#include <stdint.h>

/* smallest request taken from the arena: frames, not the protocol's small parts */
#define FAID_RXALLOC_MIN ((size_t)64 << 10)
/* the input contexts' ZMQ_THREAD_NAME_PREFIX */
#define FAID_RXALLOC_PREFIX 7302

/* 1 when this build carries the interposed allocator. */
int faid_rxalloc_available(void);
/* Input I/O threads' large requests go to arena from now on (arena must outlive every block:
 * call faid_rxalloc_stop after the last ZeroMQ context has ended). 0, or FAID_EUNSUP when the
 * build carries no interposed allocator. */
int faid_rxalloc_start(faid_pinned *arena);
/* No more arena blocks; blocks still out keep being recognized by free until then. Call once
 * every input context has terminated (their messages are freed), before the arena goes. */
void faid_rxalloc_stop(void);
/* Large requests of input I/O threads served from the arena, and those that found it full. */
uint64_t faid_rxalloc_blocks(void);
uint64_t faid_rxalloc_fallbacks(void);

#endif
