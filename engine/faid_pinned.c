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

struct faid_pinned {
    pthread_mutex_t mu;
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

void *faid_pinned_alloc(faid_pinned *p, size_t n)
{
    if (!p || n > p->cap)
        return NULL;
    size_t need = (n + HDR + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    size_t off;
    pthread_mutex_lock(&p->mu);
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
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
    } else if (p->tail - p->head >= need) {
        off = p->head;
        p->head += need;
    } else {
        pthread_mutex_unlock(&p->mu);
        return NULL;
    }
    blk *b = (blk *)(p->base + off);
    b->size = need;
    b->live = 1;
    p->nlive++;
    p->used += need;
    pthread_mutex_unlock(&p->mu);
    return p->base + off + HDR;
}

void faid_pinned_free(faid_pinned *p, void *block)
{
    if (!p || !block)
        return;
    blk *b = (blk *)((uint8_t *)block - HDR);
    pthread_mutex_lock(&p->mu);
    b->live = 0;
    p->nlive--;
    p->used -= b->size;
    if (p->nlive == 0) {
        p->head = p->tail = p->wrap = 0;
    } else {
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
    pthread_mutex_unlock(&p->mu);
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
