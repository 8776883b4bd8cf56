/* faid_rxalloc: frames received straight into the pinned input arena (see faid_rxalloc.h). */
#include "faid_rxalloc.h"

#include "faid_err.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RX_BUILT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define RX_BUILT 0
#endif
#endif
#ifndef RX_BUILT
#define RX_BUILT 1
#endif

static atomic_uint_fast64_t rx_blocks, rx_fallbacks;

int faid_rxalloc_available(void)
{
    return RX_BUILT;
}

uint64_t faid_rxalloc_blocks(void)
{
    return atomic_load_explicit(&rx_blocks, memory_order_relaxed);
}

uint64_t faid_rxalloc_fallbacks(void)
{
    return atomic_load_explicit(&rx_fallbacks, memory_order_relaxed);
}

#if RX_BUILT

/* the C library's allocator, which every other request goes to */
extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);

#define RX_STR2(x) #x
#define RX_STR(x)  RX_STR2(x)
/* what libzmq names an I/O thread of a context with our prefix, up to its number */
static const char rx_io_name[] = RX_STR(FAID_RXALLOC_PREFIX) "/ZMQbg/IO/";

static _Atomic(faid_pinned *) rx_new;   /* arena for new blocks (NULL: receiving off) */
static _Atomic(faid_pinned *) rx_owner; /* arena whose blocks free recognizes */

/* -1: not looked at yet, 0: another thread, 1: an input I/O thread */
static __thread signed char rx_thread = -1;

static int rx_is_input_io(void)
{
    if (rx_thread < 0) {
        char name[17] = "";
        rx_thread = prctl(PR_GET_NAME, name, 0, 0, 0) == 0 &&
                    strncmp(name, rx_io_name, sizeof rx_io_name - 1) == 0;
    }
    return rx_thread;
}

int faid_rxalloc_start(faid_pinned *arena)
{
    if (!arena)
        return FAID_EINVAL;
    atomic_store_explicit(&rx_owner, arena, memory_order_release);
    atomic_store_explicit(&rx_new, arena, memory_order_release);
    return FAID_OK;
}

void faid_rxalloc_stop(void)
{
    atomic_store_explicit(&rx_new, NULL, memory_order_release);
    atomic_store_explicit(&rx_owner, NULL, memory_order_release);
}

void *malloc(size_t n)
{
    if (n >= FAID_RXALLOC_MIN) {
        faid_pinned *a = atomic_load_explicit(&rx_new, memory_order_acquire);
        if (a && rx_is_input_io()) {
            void *p = faid_pinned_alloc(a, n);
            if (p) {
                atomic_fetch_add_explicit(&rx_blocks, 1, memory_order_relaxed);
                return p;
            }
            atomic_fetch_add_explicit(&rx_fallbacks, 1, memory_order_relaxed);
        }
    }
    return __libc_malloc(n);
}

void free(void *p)
{
    faid_pinned *a = p ? atomic_load_explicit(&rx_owner, memory_order_acquire) : NULL;
    if (a && faid_pinned_contains(a, p)) {
        faid_pinned_free(a, p);
        return;
    }
    __libc_free(p);
}

void *calloc(size_t n, size_t size)
{
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    faid_pinned *a = p ? atomic_load_explicit(&rx_owner, memory_order_acquire) : NULL;
    if (!a || !faid_pinned_contains(a, p))
        return __libc_realloc(p, n);
    /* an arena block (libzmq does not resize message buffers; any other caller still gets
     * realloc's meaning): moved into the C library's memory */
    if (n == 0) {
        faid_pinned_free(a, p);
        return NULL;
    }
    void *q = __libc_malloc(n);
    if (!q)
        return NULL;
    const size_t have = faid_pinned_block_bytes(p);
    memcpy(q, p, have < n ? have : n);
    faid_pinned_free(a, p);
    return q;
}

#else

int faid_rxalloc_start(faid_pinned *arena)
{
    (void)arena;
    return FAID_EUNSUP;
}

void faid_rxalloc_stop(void) {}

#endif
