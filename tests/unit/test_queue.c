/* Unit tests of the daemon's bounded queue (daemon/faid_queue.c): FIFO order, capacity, timeouts,
 * eviction for drop_oldest, close semantics (pushes refused, pops drain then stop), and a
 * multi-producer / multi-consumer run where every item must arrive exactly once.
 * The daemon's sources are not in a library, so the module is compiled into this test. */
#include "../../daemon/faid_queue.c"

#include "faid_test.h"

#include <pthread.h>
#include <stdint.h>

static void test_fifo_and_capacity(void)
{
    faid_queue *q = faid_queue_new(3);
    CHECK(q != NULL);
    CHECK(faid_queue_new(0) == NULL);
    CHECK(faid_queue_cap(q) == 3);
    for (uintptr_t i = 1; i <= 3; i++)
        CHECK(faid_queue_push(q, (void *)i, 0) == 0);
    CHECK(faid_queue_len(q) == 3);
    CHECK(faid_queue_push(q, (void *)4, 0) == FAID_ETIMEOUT);
    CHECK(faid_queue_push(q, (void *)4, 20) == FAID_ETIMEOUT);
    void *p;
    for (uintptr_t i = 1; i <= 3; i++) {
        CHECK(faid_queue_pop(q, &p, 0) == 0);
        CHECK((uintptr_t)p == i);
    }
    CHECK(faid_queue_pop(q, &p, 0) == FAID_ETIMEOUT);
    CHECK(faid_queue_pop(q, &p, 20) == FAID_ETIMEOUT && p == NULL);
    /* Wrap around the ring several times. */
    for (uintptr_t i = 10; i < 30; i++) {
        CHECK(faid_queue_push(q, (void *)i, 0) == 0);
        CHECK(faid_queue_pop(q, &p, 0) == 0 && (uintptr_t)p == i);
    }
    faid_queue_destroy(&q);
    CHECK(q == NULL);
    faid_queue_destroy(&q);
}

static void test_evict(void)
{
    faid_queue *q = faid_queue_new(2);
    void *ev = (void *)1;
    CHECK(faid_queue_push_evict(q, (void *)10, &ev) == 0 && ev == NULL);
    CHECK(faid_queue_push_evict(q, (void *)11, &ev) == 0 && ev == NULL);
    CHECK(faid_queue_push_evict(q, (void *)12, &ev) == 0 && (uintptr_t)ev == 10);
    CHECK(faid_queue_push_evict(q, (void *)13, &ev) == 0 && (uintptr_t)ev == 11);
    void *p;
    CHECK(faid_queue_pop(q, &p, 0) == 0 && (uintptr_t)p == 12);
    CHECK(faid_queue_pop(q, &p, 0) == 0 && (uintptr_t)p == 13);
    faid_queue_close(q);
    CHECK(faid_queue_push_evict(q, (void *)14, &ev) == FAID_ESTOPPED && ev == NULL);
    faid_queue_destroy(&q);
}

static void test_close(void)
{
    faid_queue *q = faid_queue_new(4);
    CHECK(faid_queue_push(q, (void *)1, 0) == 0);
    CHECK(faid_queue_push(q, (void *)2, 0) == 0);
    faid_queue_close(q);
    CHECK(faid_queue_push(q, (void *)3, -1) == FAID_ESTOPPED);
    void *p;
    CHECK(faid_queue_pop(q, &p, -1) == 0 && (uintptr_t)p == 1);
    CHECK(faid_queue_pop(q, &p, -1) == 0 && (uintptr_t)p == 2);
    CHECK(faid_queue_pop(q, &p, -1) == FAID_ESTOPPED);
    faid_queue_destroy(&q);
}

/* A consumer blocked forever must be woken by close. */
static void *pop_forever(void *arg)
{
    void *p;
    static int rc;
    rc = faid_queue_pop(arg, &p, -1);
    return &rc;
}

static void test_close_wakes(void)
{
    faid_queue *q = faid_queue_new(1);
    pthread_t t;
    pthread_create(&t, NULL, pop_forever, q);
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    faid_queue_close(q);
    void *ret;
    pthread_join(t, &ret);
    CHECK(*(int *)ret == FAID_ESTOPPED);
    faid_queue_destroy(&q);
}

#define PRODUCERS    3
#define CONSUMERS    3
#define PER_PRODUCER 20000

typedef struct shared {
    faid_queue *q;
    int base;
    uint64_t sum, count;
    unsigned char *seen;
} shared;

static void *produce(void *arg)
{
    shared *s = arg;
    for (int i = 0; i < PER_PRODUCER; i++)
        faid_queue_push(s->q, (void *)(uintptr_t)(s->base + i + 1), -1);
    return NULL;
}

static void *consume(void *arg)
{
    shared *s = arg;
    void *p;
    while (faid_queue_pop(s->q, &p, -1) == 0) {
        uintptr_t v = (uintptr_t)p;
        s->sum += v;
        s->count++;
        s->seen[v]++; /* distinct v per item: no two consumers write the same byte */
    }
    return NULL;
}

static void test_threads(void)
{
    faid_queue *q = faid_queue_new(8);
    unsigned char *seen = calloc(PRODUCERS * PER_PRODUCER + 1, 1);
    shared prod[PRODUCERS], cons[CONSUMERS];
    pthread_t tp[PRODUCERS], tc[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) {
        cons[i] = (shared){.q = q, .seen = seen};
        pthread_create(&tc[i], NULL, consume, &cons[i]);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        prod[i] = (shared){.q = q, .base = i * PER_PRODUCER};
        pthread_create(&tp[i], NULL, produce, &prod[i]);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(tp[i], NULL);
    faid_queue_close(q);
    uint64_t sum = 0, count = 0;
    for (int i = 0; i < CONSUMERS; i++) {
        pthread_join(tc[i], NULL);
        sum += cons[i].sum;
        count += cons[i].count;
    }
    uint64_t n = PRODUCERS * PER_PRODUCER;
    CHECK(count == n);
    CHECK(sum == n * (n + 1) / 2);
    int once = 1;
    for (uint64_t v = 1; v <= n; v++)
        once &= seen[v] == 1;
    CHECK(once);
    free(seen);
    faid_queue_destroy(&q);
}

int main(void)
{
    RUN(test_fifo_and_capacity());
    RUN(test_evict());
    RUN(test_close());
    RUN(test_close_wakes());
    RUN(test_threads());
    return faid_test_finish();
}
