/* Unit tests of the pinned input arena's ring (engine/faid_pinned.c) on plain memory (the
 * reference device): blocks never overlap and stay inside the arena, a full arena refuses
 * instead of waiting, blocks given back out of order free their space once the tail reaches
 * them, the ring wraps, and a random multi-threaded alloc/free run with a byte pattern per block
 * finds no block overwritten by another and ends with nothing used. And the copy into pinned
 * staging shared by several threads (base/faid_pcopy.c): every size, offset and pool gives the
 * bytes memcpy gives, and leaves the bytes around the destination alone. */
#include "faid_pcopy.h"
#include "faid_pinned.h"

#include "faid_test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_basic(void)
{
    faid_diag d;
    faid_diag_clear(&d);
    CHECK(faid_pinned_new("ref", 100, &d) == NULL && d.code == FAID_EINVAL);
    faid_pinned *p = faid_pinned_new("ref", 64 * 1024, &d);
    CHECK(p != NULL);
    /* the ring alone (test_keep: the blocks kept for reuse) */
    faid_pinned_set_keep(p, 0);
    size_t cap = 0;
    uint8_t *base = faid_pinned_base(p, &cap);
    CHECK(base && cap == 64 * 1024 && !faid_pinned_locked(p));
    CHECK(faid_pinned_alloc(p, cap + 1) == NULL);
    /* 10 KiB blocks: 6 fit (with their headers), the 7th does not */
    uint8_t *b[8] = {0};
    for (int i = 0; i < 6; i++) {
        b[i] = faid_pinned_alloc(p, 10 * 1024);
        CHECK(b[i] != NULL && ((uintptr_t)b[i] & 63) == 0);
        CHECK(b[i] >= base && b[i] + 10 * 1024 <= base + cap);
        if (i)
            CHECK(b[i] >= b[i - 1] + 10 * 1024);
        /* what faid_rxalloc's free and realloc go by: inside or not, and a block's size */
        CHECK(faid_pinned_contains(p, b[i]) && faid_pinned_contains(p, b[i] + 10 * 1024 - 1));
        CHECK(faid_pinned_block_bytes(b[i]) >= 10 * 1024 &&
              faid_pinned_block_bytes(b[i]) < 10 * 1024 + 64);
    }
    CHECK(!faid_pinned_contains(p, base + cap) && !faid_pinned_contains(p, base - 1));
    CHECK(!faid_pinned_contains(p, &cap) && !faid_pinned_contains(NULL, base));
    CHECK(faid_pinned_alloc(p, 10 * 1024) == NULL);
    /* out of order: the second block back frees nothing yet (the tail is at the first) */
    faid_pinned_free(p, b[1]);
    CHECK(faid_pinned_alloc(p, 10 * 1024) == NULL);
    faid_pinned_free(p, b[0]);
    /* now the first two blocks' space is free: the ring wraps to the start */
    b[6] = faid_pinned_alloc(p, 15 * 1024);
    CHECK(b[6] != NULL && b[6] < b[2]);
    CHECK(faid_pinned_alloc(p, 10 * 1024) == NULL);
    for (int i = 2; i < 7; i++)
        faid_pinned_free(p, b[i]);
    CHECK(faid_pinned_used(p) == 0);
    /* empty again: the whole arena in one block */
    b[7] = faid_pinned_alloc(p, cap - 64);
    CHECK(b[7] == base + 64);
    faid_pinned_free(p, b[7]);
    faid_pinned_free(p, NULL);
    faid_pinned_destroy(&p);
    CHECK(p == NULL);
    faid_pinned_destroy(&p);
}

#define THREADS 4
#define ROUNDS  20000
#define HELD    6

typedef struct {
    faid_pinned *p;
    unsigned seed;
    int id, bad, refused;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    uint8_t *held[HELD] = {0};
    size_t len[HELD] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int k = (int)(rand_r(&w->seed) % HELD);
        if (held[k]) {
            for (size_t i = 0; i < len[k]; i++)
                w->bad += held[k][i] != (uint8_t)(k + 7 * w->id);
            faid_pinned_free(w->p, held[k]);
            held[k] = NULL;
        } else {
            len[k] = 1 + rand_r(&w->seed) % 9000;
            held[k] = faid_pinned_alloc(w->p, len[k]);
            if (held[k])
                memset(held[k], (uint8_t)(k + 7 * w->id), len[k]);
            else
                w->refused++;
        }
    }
    for (int k = 0; k < HELD; k++)
        faid_pinned_free(w->p, held[k]);
    return NULL;
}

/* Blocks given back are reused, the last one first, for a request of their size (within an
 * eighth); other sizes go to the ring; a full ring takes the kept blocks back first. */
static void test_keep(void)
{
    faid_diag d;
    faid_diag_clear(&d);
    faid_pinned *p = faid_pinned_new("ref", 64 * 1024, &d);
    CHECK(p != NULL);
    size_t cap = 0;
    uint8_t *base = faid_pinned_base(p, &cap);
    uint8_t *a = faid_pinned_alloc(p, 10 * 1024), *b = faid_pinned_alloc(p, 10 * 1024);
    CHECK(a && b && b > a);
    faid_pinned_free(p, a);
    faid_pinned_free(p, b);
    CHECK(faid_pinned_used(p) == 0);
    /* the last one given back first, then the one before */
    CHECK(faid_pinned_alloc(p, 10 * 1024) == b);
    CHECK(faid_pinned_alloc(p, 9 * 1024 + 512) == a); /* within an eighth */
    CHECK(faid_pinned_reused(p) == 2);
    faid_pinned_free(p, a);
    /* half the size would waste half the block: from the ring, after b */
    uint8_t *c = faid_pinned_alloc(p, 5 * 1024);
    CHECK(c && c > b && faid_pinned_reused(p) == 2);
    /* more than the ring has left: the kept block (a) goes back to the ring, whose tail then
     * passes it (it is the first block), so the ring wraps into a's space and the rest */
    uint8_t *e = faid_pinned_alloc(p, 40 * 1024);
    CHECK(e == NULL); /* a's 10 KiB + the end's free space are not one piece */
    uint8_t *f = faid_pinned_alloc(p, 10 * 1024);
    CHECK(f != NULL && f != a); /* a went back to the ring: not handed out as kept */
    faid_pinned_free(p, b);
    faid_pinned_free(p, c);
    faid_pinned_free(p, f);
    CHECK(faid_pinned_used(p) == 0);
    /* keep 0: every block straight back to the ring, the kept ones too */
    faid_pinned_set_keep(p, 0);
    uint8_t *g = faid_pinned_alloc(p, 60 * 1024);
    CHECK(g == base + 64); /* the whole arena free again: one block from its start */
    faid_pinned_free(p, g);
    CHECK(faid_pinned_used(p) == 0);
    (void)cap;
    faid_pinned_destroy(&p);
    CHECK(p == NULL);
}

static void test_threads(void)
{
    faid_diag d;
    faid_diag_clear(&d);
    faid_pinned *p = faid_pinned_new("ref", 128 * 1024, &d);
    CHECK(p != NULL);
    pthread_t t[THREADS];
    worker ws[THREADS];
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < THREADS; i++) {
        ws[i].p = p;
        ws[i].id = i; /* one byte pattern per (thread, block) */
        ws[i].seed = 1234u + (unsigned)i;
        pthread_create(&t[i], NULL, run, &ws[i]);
    }
    int bad = 0, refused = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        bad += ws[i].bad;
        refused += ws[i].refused;
    }
    CHECK(bad == 0);
    CHECK(refused > 0); /* 4 threads x 6 blocks of up to 9 KB overfill 128 KiB at times */
    CHECK(faid_pinned_used(p) == 0);
    faid_pinned_destroy(&p);
}

/* faid_pcopy_run equals memcpy for pools of 1 to 5 threads, sizes around the split threshold and
 * around share boundaries, unaligned source and destination; the bytes just before and after the
 * destination stay as they were; pools out of range are refused naming the range. */
static void test_pcopy(void)
{
    const size_t big = 3 * 1024 * 1024 + 7, pad = 64;
    uint8_t *src = malloc(big + pad), *dst = malloc(big + 2 * pad), *want = malloc(big + 2 * pad);
    CHECK(src && dst && want);
    if (!src || !dst || !want) {
        free(src);
        free(dst);
        free(want);
        return;
    }
    for (size_t i = 0; i < big + pad; i++)
        src[i] = (uint8_t)(i * 2654435761u >> 13);
    const size_t sizes[] = {0,
                            1,
                            100,
                            FAID_PCOPY_MIN - 1,
                            FAID_PCOPY_MIN,
                            FAID_PCOPY_MIN + 13,
                            FAID_PCOPY_MIN * 3 + 64,
                            2690568,
                            big};
    faid_diag d = {0};
    for (int n = 1; n <= 5; n++) {
        faid_pcopy *p = faid_pcopy_new(n, &d);
        CHECK_MSG(p != NULL, "%d threads: %s", n, d.msg);
        CHECK(faid_pcopy_threads(p) == n);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (size_t so = 0; so < 3; so++) {
                const size_t len = sizes[k], doff = pad + (so * 7) % 64;
                memset(dst, 0xA5, big + 2 * pad);
                memset(want, 0xA5, big + 2 * pad);
                memcpy(want + doff, src + so, len);
                faid_pcopy_run(p, dst + doff, src + so, len);
                CHECK_MSG(memcmp(dst, want, big + 2 * pad) == 0,
                          "%d threads, %zu bytes, offset %zu: differs from memcpy", n, len, so);
            }
        faid_pcopy_destroy(&p);
        CHECK(p == NULL);
    }
    /* no pool: memcpy */
    memset(dst, 0, 1000);
    faid_pcopy_run(NULL, dst, src, 1000);
    CHECK(memcmp(dst, src, 1000) == 0 && faid_pcopy_threads(NULL) == 1);
    faid_pcopy_destroy(NULL);
    CHECK(faid_pcopy_new(0, &d) == NULL && strstr(d.msg, "1..16") != NULL);
    CHECK(faid_pcopy_new(FAID_PCOPY_MAX + 1, &d) == NULL && d.code == FAID_ERANGE);
    free(src);
    free(dst);
    free(want);
}

int main(void)
{
    RUN(test_basic());
    RUN(test_keep());
    RUN(test_threads());
    RUN(test_pcopy());
    return faid_test_finish();
}
