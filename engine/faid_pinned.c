/* faid_pinned: the pinned arena the ingest threads receive frames into (see faid_pinned.h).
 *
 * The ring: live blocks lie in [tail, head) or, once wrapped, in [tail, wrap) and [0, head).
 * Every block starts with a 64-byte header (its size, whether it is live); alloc takes space at
 * head (wrapping to 0 when the end is too short), free marks the block and moves the tail over
 * every block at the tail that was given back. */
#include "faid_pinned.h"

#include "faid_cl.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HDR   64
#define ALIGN 64

typedef struct blk {
    size_t size; /* bytes including this header */
    int live;
} blk;

/* freed blocks kept for the next allocation of their size (faid_pinned.h) */
#define KEEP_MAX 32

struct faid_pinned {
    pthread_mutex_t mu;
    blk *keep[KEEP_MAX]; /* given back, still live in the ring, the last one freed on top */
    int nkeep, keep_max;
    uint64_t kept_hits; /* allocations served from keep */
    uint8_t *base;
    size_t cap;
    size_t head, tail, wrap; /* wrap: end of the live area before 0 (0 = not wrapped) */
    size_t nlive, used;
    int locked; /* page-locked (OpenCL) memory */
    faid_cl_ctx *ctx;
    cl_mem mem;
};

faid_pinned *faid_pinned_new(const char *device, size_t bytes, faid_diag *d)
{
    if (bytes < 4096) {
        faid_fail(d, FAID_EINVAL, "pinned arena of %zu bytes is too small", bytes);
        return NULL;
    }
    faid_pinned *p = calloc(1, sizeof(*p));
    if (!p) {
        faid_fail(d, FAID_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    p->cap = bytes & ~(size_t)(ALIGN - 1);
    p->keep_max = FAID_PINNED_KEEP;
    if (device && strcmp(device, "ref") != 0) {
        faid_cl_device_info info;
        cl_int err = CL_SUCCESS;
        if (faid_cl_select(device, &info, d) || !(p->ctx = faid_cl_ctx_new(&info, 0, d)))
            goto fail;
        p->mem = clCreateBuffer(p->ctx->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, p->cap,
                                NULL, &err);
        if (err != CL_SUCCESS) {
            faid_cl_fail(d, err, "clCreateBuffer(pinned arena)", __FILE__, __LINE__);
            goto fail;
        }
        p->base = clEnqueueMapBuffer(p->ctx->queue, p->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                     p->cap, 0, NULL, NULL, &err);
        if (err != CL_SUCCESS) {
            faid_cl_fail(d, err, "clEnqueueMapBuffer(pinned arena)", __FILE__, __LINE__);
            goto fail;
        }
        if (((uintptr_t)p->base & (ALIGN - 1)) != 0) {
            faid_fail(d, FAID_ECL, "pinned arena mapped at an address not %d-byte aligned", ALIGN);
            goto fail;
        }
        p->locked = 1;
    } else {
        void *m = NULL;
        if (posix_memalign(&m, 4096, p->cap) != 0) {
            faid_fail(d, FAID_ENOMEM, "out of memory for a %zu-byte input arena", p->cap);
            goto fail;
        }
        p->base = m;
    }
    return p;
fail:
    faid_pinned_destroy(&p);
    return NULL;
}

void faid_pinned_destroy(faid_pinned **pp)
{
    if (!pp || !*pp)
        return;
    faid_pinned *p = *pp;
    if (p->mem) {
        if (p->base) {
            clEnqueueUnmapMemObject(p->ctx->queue, p->mem, p->base, 0, NULL, NULL);
            clFinish(p->ctx->queue);
        }
        clReleaseMemObject(p->mem);
    } else {
        free(p->base);
    }
    faid_cl_ctx_destroy(&p->ctx);
    pthread_mutex_destroy(&p->mu);
    free(p);
    *pp = NULL;
}

void *faid_pinned_base(const faid_pinned *p, size_t *bytes)
{
    if (bytes)
        *bytes = p ? p->cap : 0;
    return p ? p->base : NULL;
}

int faid_pinned_locked(const faid_pinned *p)
{
    return p ? p->locked : 0;
}

/* A block of need bytes (header included) from the ring, or NULL; p->mu held. */
static blk *ring_alloc(faid_pinned *p, size_t need)
{
    size_t off;
    if (p->nlive == 0)
        p->head = p->tail = p->wrap = 0;
    if (!p->wrap) {
        if (p->cap - p->head >= need) {
            off = p->head;
            p->head += need;
        } else if (p->tail >= need) {
            p->wrap = p->head;
            off = 0;
            p->head = need;
        } else {
            return NULL;
        }
    } else if (p->tail - p->head >= need) {
        off = p->head;
        p->head += need;
    } else {
        return NULL;
    }
    blk *b = (blk *)(p->base + off);
    b->size = need;
    b->live = 1;
    p->nlive++;
    return b;
}

/* Block b back to the ring: the tail moves over every block given back before it; p->mu held. */
static void ring_release(faid_pinned *p, blk *b)
{
    b->live = 0;
    p->nlive--;
    if (p->nlive == 0) {
        p->head = p->tail = p->wrap = 0;
        return;
    }
    for (;;) {
        if (p->wrap && p->tail == p->wrap) {
            p->tail = 0;
            p->wrap = 0;
            continue;
        }
        if (!p->wrap && p->tail == p->head)
            break;
        blk *t = (blk *)(p->base + p->tail);
        if (t->live)
            break;
        p->tail += t->size;
    }
}

void *faid_pinned_alloc(faid_pinned *p, size_t n)
{
    if (!p || n > p->cap)
        return NULL;
    size_t need = (n + HDR + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    blk *b = NULL;
    pthread_mutex_lock(&p->mu);
    /* the block given back last that fits without wasting more than an eighth of it: the
     * memory the frames before used, still in the cache and the TLB */
    for (int i = p->nkeep - 1; i >= 0; i--) {
        blk *k = p->keep[i];
        if (k->size >= need && k->size - need <= k->size / 8) {
            b = k;
            memmove(&p->keep[i], &p->keep[i + 1], (size_t)(p->nkeep - 1 - i) * sizeof(blk *));
            p->nkeep--;
            p->kept_hits++;
            break;
        }
    }
    if (!b && !(b = ring_alloc(p, need)) && p->nkeep > 0) {
        /* full: the kept blocks go back to the ring, then one more try */
        for (int i = 0; i < p->nkeep; i++)
            ring_release(p, p->keep[i]);
        p->nkeep = 0;
        b = ring_alloc(p, need);
    }
    if (b)
        p->used += b->size;
    pthread_mutex_unlock(&p->mu);
    return b ? (uint8_t *)b + HDR : NULL;
}

void faid_pinned_free(faid_pinned *p, void *block)
{
    if (!p || !block)
        return;
    blk *b = (blk *)((uint8_t *)block - HDR);
    pthread_mutex_lock(&p->mu);
    p->used -= b->size;
    if (p->nkeep < p->keep_max) {
        p->keep[p->nkeep++] = b;
    } else {
        /* the oldest kept block makes room (the most recent ones are the warmest) */
        if (p->nkeep > 0) {
            ring_release(p, p->keep[0]);
            memmove(&p->keep[0], &p->keep[1], (size_t)(p->nkeep - 1) * sizeof(blk *));
            p->keep[p->nkeep - 1] = b;
        } else {
            ring_release(p, b);
        }
    }
    pthread_mutex_unlock(&p->mu);
}

void faid_pinned_set_keep(faid_pinned *p, int n)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->keep_max = n < 0 ? 0 : n > KEEP_MAX ? KEEP_MAX : n;
    while (p->nkeep > p->keep_max) {
        ring_release(p, p->keep[0]);
        memmove(&p->keep[0], &p->keep[1], (size_t)(p->nkeep - 1) * sizeof(blk *));
        p->nkeep--;
    }
    pthread_mutex_unlock(&p->mu);
}

uint64_t faid_pinned_reused(faid_pinned *p)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    uint64_t r = p->kept_hits;
    pthread_mutex_unlock(&p->mu);
    return r;
}

size_t faid_pinned_used(faid_pinned *p)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    size_t u = p->used;
    pthread_mutex_unlock(&p->mu);
    return u;
}

int faid_pinned_contains(const faid_pinned *p, const void *ptr)
{
    return p && (const uint8_t *)ptr >= p->base && (const uint8_t *)ptr < p->base + p->cap;
}

size_t faid_pinned_block_bytes(const void *block)
{
    const blk *b = (const blk *)((const uint8_t *)block - HDR);
    return b->size - HDR;
}
