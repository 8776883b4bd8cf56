/* faid_queue: bounded pointer FIFO (see faid_queue.h). A ring buffer guarded by one mutex; the
 * critical sections are a few loads and stores, which is far below the per-frame work, so a
 * lock-free ring would not pay for its complexity here. */
#include "faid_queue.h"

#include "faid_err.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct faid_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    void **items;
    size_t cap, head, len;
    int closed;
};

faid_queue *faid_queue_new(size_t cap)
{
    if (cap == 0)
        return NULL;
    faid_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->items = calloc(cap, sizeof(void *));
    if (!q->items) {
        free(q);
        return NULL;
    }
    q->cap = cap;
    pthread_mutex_init(&q->mu, NULL);
    /* Waits use CLOCK_MONOTONIC so that wall clock steps cannot stretch a timeout. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->not_empty, &ca);
    pthread_cond_init(&q->not_full, &ca);
    pthread_condattr_destroy(&ca);
    return q;
}

void faid_queue_destroy(faid_queue **pq)
{
    if (!pq || !*pq)
        return;
    faid_queue *q = *pq;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->items);
    free(q);
    *pq = NULL;
}

static void deadline_after(struct timespec *ts, int timeout_ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Waits on cv until pred() holds, the queue closes or the deadline passes. Returns 0 when the
 * caller should re-check its condition, FAID_ETIMEOUT when the time is up. */
static int wait_on(faid_queue *q, pthread_cond_t *cv, int timeout_ms, const struct timespec *ts)
{
    if (timeout_ms == 0)
        return FAID_ETIMEOUT;
    if (timeout_ms < 0) {
        pthread_cond_wait(cv, &q->mu);
        return 0;
    }
    return pthread_cond_timedwait(cv, &q->mu, ts) == ETIMEDOUT ? FAID_ETIMEOUT : 0;
}

static void put_locked(faid_queue *q, void *item)
{
    q->items[(q->head + q->len) % q->cap] = item;
    q->len++;
    pthread_cond_signal(&q->not_empty);
}

static void *take_locked(faid_queue *q)
{
    void *item = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    pthread_cond_signal(&q->not_full);
    return item;
}

int faid_queue_push(faid_queue *q, void *item, int timeout_ms)
{
    struct timespec ts;
    if (timeout_ms > 0)
        deadline_after(&ts, timeout_ms);
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    for (;;) {
        if (q->closed) {
            rc = FAID_ESTOPPED;
            break;
        }
        if (q->len < q->cap) {
            put_locked(q, item);
            break;
        }
        if (wait_on(q, &q->not_full, timeout_ms, &ts) == FAID_ETIMEOUT) {
            /* A signal may have arrived together with the timeout: check once more. */
            if (!q->closed && q->len < q->cap) {
                put_locked(q, item);
                break;
            }
            rc = q->closed ? FAID_ESTOPPED : FAID_ETIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int faid_queue_pop(faid_queue *q, void **item, int timeout_ms)
{
    struct timespec ts;
    if (timeout_ms > 0)
        deadline_after(&ts, timeout_ms);
    *item = NULL;
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    for (;;) {
        if (q->len > 0) {
            *item = take_locked(q);
            break;
        }
        if (q->closed) {
            rc = FAID_ESTOPPED;
            break;
        }
        if (wait_on(q, &q->not_empty, timeout_ms, &ts) == FAID_ETIMEOUT) {
            if (q->len > 0) {
                *item = take_locked(q);
                break;
            }
            rc = q->closed ? FAID_ESTOPPED : FAID_ETIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int faid_queue_push_evict(faid_queue *q, void *item, void **evicted)
{
    *evicted = NULL;
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    if (q->closed) {
        rc = FAID_ESTOPPED;
    } else {
        if (q->len == q->cap)
            *evicted = take_locked(q);
        put_locked(q, item);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void faid_queue_close(faid_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

size_t faid_queue_len(faid_queue *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t faid_queue_cap(const faid_queue *q)
{
    return q->cap;
}
