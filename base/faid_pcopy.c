/* faid_pcopy: one large memcpy shared by a few threads (see faid_pcopy.h).
 *
 * A copy is a job with a number: run publishes the areas and the share size under the mutex,
 * bumps the number and wakes the threads; thread i copies share i, the caller share 0; the last
 * share done wakes the caller. Shares are multiples of 64 bytes, so with a 64-byte aligned
 * destination (the engine's staging) no two threads write one cache line. */
#include "faid_pcopy.h"
#include "faid_thread.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pc_thread {
    struct faid_pcopy *p;
    int idx;
} pc_thread;

struct faid_pcopy {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t th[FAID_PCOPY_MAX];
    pc_thread arg[FAID_PCOPY_MAX];
    int n;       /* threads in all, the caller included */
    int started; /* threads of the pool's own running */
    int stop;
    uint64_t job;
    int pending; /* shares of the current job not copied yet */
    uint8_t *dst;
    const uint8_t *src;
    size_t len, share;
};

static void copy_share(uint8_t *dst, const uint8_t *src, size_t len, size_t share, int i)
{
    const size_t off = share * (size_t)i;
    if (off < len)
        memcpy(dst + off, src + off, len - off < share ? len - off : share);
}

static void *pc_main(void *arg)
{
    pc_thread *t = arg;
    faid_pcopy *p = t->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->job == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop)
            break;
        seen = p->job;
        uint8_t *dst = p->dst;
        const uint8_t *src = p->src;
        const size_t len = p->len, share = p->share;
        pthread_mutex_unlock(&p->mu);
        copy_share(dst, src, len, share, t->idx);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

faid_pcopy *faid_pcopy_new(int n, faid_diag *d)
{
    if (n < 1 || n > FAID_PCOPY_MAX) {
        faid_fail(d, FAID_ERANGE, "copy threads: %d out of range 1..%d", n, FAID_PCOPY_MAX);
        return NULL;
    }
    faid_pcopy *p = calloc(1, sizeof *p);
    if (!p) {
        faid_fail(d, FAID_ENOMEM, "copy threads: out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n = n;
    for (int i = 1; i < n; i++) {
        p->arg[i] = (pc_thread){p, i};
        if (pthread_create(&p->th[i], NULL, pc_main, &p->arg[i]) != 0) {
            faid_fail(d, FAID_ENOMEM, "copy threads: thread %d of %d could not be started", i + 1,
                      n);
            faid_pcopy_destroy(&p);
            return NULL;
        }
        faid_thread_name(p->th[i], "faid-copy%d", i);
        p->started = i;
    }
    return p;
}

void faid_pcopy_destroy(faid_pcopy **pp)
{
    if (!pp || !*pp)
        return;
    faid_pcopy *p = *pp;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->started; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
    *pp = NULL;
}

int faid_pcopy_threads(const faid_pcopy *p)
{
    return p ? p->n : 1;
}

void faid_pcopy_run(faid_pcopy *p, void *dst, const void *src, size_t n)
{
    if (!p || p->n < 2 || n < FAID_PCOPY_MIN) {
        memcpy(dst, src, n);
        return;
    }
    size_t share = (n + (size_t)p->n - 1) / (size_t)p->n;
    share = (share + 63) & ~(size_t)63;
    pthread_mutex_lock(&p->mu);
    p->dst = dst;
    p->src = src;
    p->len = n;
    p->share = share;
    p->pending = p->n - 1;
    p->job++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    copy_share(dst, src, n, share, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
