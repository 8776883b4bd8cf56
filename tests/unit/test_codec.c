/* Unit tests of faid_codec (CPU) and faid_clcodec (OpenCL, on whatever device "auto" picks):
 * the 8x8 transpose against the bit-level definition of bitshuffle, the block-table parser's
 * edge cases (algorithms.md §1.4), encoder -> decoder round trips for many sizes, element sizes
 * and block sizes, the HDF5-LZ4 and raw LZ4 framings, and corrupt or truncated chunks, which
 * must fail with an error code and never touch memory out of bounds (this suite also runs under
 * ASan). The GPU decoder must agree byte for byte with the CPU decoder on every valid chunk and
 * raise its error flag on corrupt ones. */
#include "faid_clcodec.h"
#include "faid_codec.h"
#include "faid_log.h"
#include "faid_test.h"

#include <lz4.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Diffraction-like content: mostly small counts, a few bright pixels, so that the high bit
 * planes compress well and the low ones do not. */
static void fill(uint8_t *buf, size_t n, size_t e, int kind)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (kind == 0)
            v = rng();
        else if (kind == 1)
            v = (rng() % 16 == 0) ? rng() % 5000 : rng() % 4;
        else if (kind == 3) /* sparse counts as in a real EIGER frame: mostly 0 and 1 */
            v = rng() % 1000 < 2 ? rng() % 50000
                                 : (rng() % 100 < 60   ? 0
                                    : rng() % 100 < 75 ? 1
                                                       : rng() % 6);
        else
            v = 0;
        for (size_t j = 0; j < e; j++)
            buf[i * e + j] = (uint8_t)(v >> (8 * (j % 8)));
    }
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* Bit-level definition: bit r of element e goes to shuffled bit r*n + e (LSB-first bytes). */
static void test_bitshuffle_definition(void)
{
    const size_t sizes[] = {1, 2, 3, 4, 8};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t e = sizes[si];
        for (size_t n = 8; n <= 64; n += 8) {
            uint8_t in[64 * 8], ref[64 * 8], out[64 * 8], back[64 * 8];
            fill(in, n, e, 0);
            memset(ref, 0, sizeof ref);
            for (size_t el = 0; el < n; el++)
                for (size_t r = 0; r < 8 * e; r++) {
                    int bit = (in[el * e + r / 8] >> (r % 8)) & 1;
                    size_t to = r * n + el;
                    ref[to / 8] |= (uint8_t)(bit << (to % 8));
                }
            faid_bitshuffle(in, out, n, e);
            CHECK_MSG(memcmp(out, ref, n * e) == 0, "bitshuffle e=%zu n=%zu", e, n);
            faid_bitunshuffle(out, back, n, e);
            CHECK_MSG(memcmp(back, in, n * e) == 0, "bitunshuffle e=%zu n=%zu", e, n);
        }
    }
}

static int table_new(faid_block_table *t, uint32_t cap)
{
    return faid_block_table_alloc(t, cap, NULL);
}

/* Builds a bslz4 chunk by hand: header with the given block size, blocks compressed with liblz4
 * from shuffled data, tail; optional trailing garbage. */
static size_t encode(const uint8_t *data, size_t nbytes, size_t e, size_t bs_elems, uint8_t **out)
{
    size_t cap = faid_bslz4_bound(nbytes, e, bs_elems);
    *out = malloc(cap + 64);
    size_t len = 0;
    faid_diag d;
    int rc = faid_bslz4_encode(data, nbytes, e, bs_elems, *out, cap, &len, &d);
    CHECK_MSG(rc == 0, "encode: %s", d.msg);
    return rc ? 0 : len;
}

static void test_table_edges(void)
{
    faid_block_table t;
    faid_diag d;
    CHECK(table_new(&t, 64) == 0);
    uint8_t data[4096 * 4];
    fill(data, 4096, 4, 1);

    /* n = 2048 x 2 uint32 with the default block (2048 elements): 2 full blocks, no tail. */
    uint8_t *c;
    size_t len = encode(data, 4096 * 4, 4, 0, &c);
    CHECK(faid_bslz4_table(c, len, 4, 4096 * 4, &t, &d) == 0);
    CHECK(t.nblocks == 2 && t.last_bytes == 8192 && t.tail_bytes == 0 && t.block_bytes == 8192);
    CHECK(t.tail_offset == len);
    CHECK(t.offset[0] == 16);
    /* Trailing garbage after a chunk without a tail. */
    CHECK(faid_bslz4_table(c, len + 1, 4, 0, &t, &d) == FAID_EFORMAT);
    /* Wrong expected size. */
    CHECK(faid_bslz4_table(c, len, 4, 4096 * 4 + 4, &t, &d) == FAID_ESIZE);
    /* Every truncation fails. */
    int all = 1;
    for (size_t cut = 0; cut < len; cut++)
        if (faid_bslz4_table(c, cut, 4, 0, &t, &d) == 0)
            all = 0;
    CHECK(all);
    /* Zero and oversized block length. */
    uint8_t *bad = malloc(len);
    memcpy(bad, c, len);
    put_be32(bad + 12, 0);
    CHECK(faid_bslz4_table(bad, len, 4, 0, &t, &d) == FAID_ECORRUPT);
    put_be32(bad + 12, 8192 + 8192 / 255 + 17);
    CHECK(faid_bslz4_table(bad, len, 4, 0, &t, &d) == FAID_ECORRUPT);
    put_be32(bad + 12, 0x7fffffff);
    CHECK(faid_bslz4_table(bad, len, 4, 0, &t, &d) != 0);
    /* Header block size not a multiple of 8 x E, zero, total not a multiple of E. */
    memcpy(bad, c, len);
    put_be32(bad + 8, 8192 + 4);
    CHECK(faid_bslz4_table(bad, len, 4, 0, &t, &d) == FAID_EFORMAT);
    put_be32(bad + 8, 0);
    CHECK(faid_bslz4_table(bad, len, 4, 0, &t, &d) == FAID_EFORMAT);
    memcpy(bad, c, len);
    put_be64(bad, 4096 * 4 + 2);
    CHECK(faid_bslz4_table(bad, len, 4, 0, &t, &d) == FAID_EFORMAT);
    /* Huge total with a short chunk: clear error, no giant allocation. */
    put_be64(bad, (uint64_t)1 << 40);
    CHECK(faid_bslz4_table(bad, len, 4, 0, &t, &d) == FAID_ETRUNC);
    CHECK(faid_bslz4_decode(bad, len, 4, data, sizeof data, &d) == FAID_ESIZE);
    free(bad);
    free(c);

    /* Tail without partial block: n = 2048 + 5, n mod bs = 5 < 8. */
    len = encode(data, 2053 * 4, 4, 0, &c);
    CHECK(faid_bslz4_table(c, len, 4, 0, &t, &d) == 0);
    CHECK(t.nblocks == 1 && t.tail_bytes == 20 && t.tail_offset == len - 20);
    CHECK(faid_bslz4_table(c, len - 1, 4, 0, &t, &d) == FAID_ETRUNC);
    free(c);
    /* Partial block and a tail of >= 4 bytes: n = 2048 + 100 (96 in the partial block, 4 tail). */
    len = encode(data, 2148 * 4, 4, 0, &c);
    CHECK(faid_bslz4_table(c, len, 4, 0, &t, &d) == 0);
    CHECK(t.nblocks == 2 && t.last_bytes == 96 * 4 && t.tail_bytes == 16);
    free(c);
    /* Only a tail: 7 elements. */
    len = encode(data, 7 * 2, 2, 0, &c);
    CHECK(len == 12 + 14);
    CHECK(faid_bslz4_table(c, len, 2, 0, &t, &d) == 0);
    CHECK(t.nblocks == 0 && t.tail_bytes == 14 && t.tail_offset == 12);
    free(c);
    /* Empty chunk. */
    len = encode(data, 0, 4, 0, &c);
    CHECK(len == 12 && faid_bslz4_table(c, len, 4, 0, &t, &d) == 0 && t.nblocks == 0);
    free(c);
    /* Non-default block size (32 elements) gives many blocks; a table too small says so. */
    len = encode(data, 4096 * 4, 4, 32, &c);
    CHECK(faid_bslz4_table(c, len, 4, 0, &t, &d) == FAID_ESIZE);
    faid_block_table big;
    CHECK(table_new(&big, faid_bslz4_max_blocks(4096 * 4, 4, 128)) == 0);
    CHECK(faid_bslz4_table(c, len, 4, 0, &big, &d) == 0 && big.nblocks == 128 &&
          big.block_bytes == 128);
    faid_block_table_free(&big);
    free(c);
    faid_block_table_free(&t);
}

/* Issue 10 defect 9: a one-block chunk whose header claims a block size far beyond its decoded
 * size (here 4 GiB - 8 for 512 decoded bytes) is valid bitshuffle (the only block is the partial
 * one) and must decode with scratch for what it needs. The decoder allocated the header's block
 * size: in a child whose address space is capped 1 GiB above what it uses, that allocation
 * failed (FAID_ENOMEM) instead of decoding. ASan reserves terabytes of shadow, so the cap is
 * left out there; the decode itself is checked either way. */
static int decode_oversized_block(const uint8_t *c, size_t len, const uint8_t *want, size_t n)
{
    uint8_t back[512];
    faid_diag d = {0};
    int rc = faid_bslz4_decode(c, len, 1, back, n, &d);
    if (rc) {
        fprintf(stderr, "oversized header block: %s\n", d.msg);
        return rc;
    }
    return memcmp(back, want, n) == 0 ? 0 : FAID_ECORRUPT;
}

static void test_oversized_header_block(void)
{
    enum { N = 512 };
    uint8_t data[N];
    fill(data, N, 1, 1);
    uint8_t *c;
    size_t len = encode(data, N, 1, N, &c); /* one full block of N elements */
    if (!len)
        return;
    put_be32(c + 8, 0xfffffff8u);
    faid_block_table t;
    faid_diag d;
    CHECK(table_new(&t, 4) == 0);
    CHECK(faid_bslz4_table(c, len, 1, N, &t, &d) == 0);
    CHECK(t.nblocks == 1 && t.last_bytes == N && faid_block_table_max_block(&t) == N);
    faid_block_table_free(&t);
    CHECK(decode_oversized_block(c, len, data, N) == 0);
#if !defined(__SANITIZE_ADDRESS__)
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1)
            _exit(3);
        fclose(f);
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (1u << 30);
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(4);
        _exit(decode_oversized_block(c, len, data, N) == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "decode under a 1 GiB address-space margin: status 0x%x", status);
#endif
    free(c);
}

static void test_roundtrips(void)
{
    const size_t esz[] = {1, 2, 4, 8, 3};
    const size_t counts[] = {0,    1,    7,    8,    9,    63,   64,   100,  1023, 1024, 1025,
                             2047, 2048, 2049, 4095, 4096, 4103, 8191, 8192, 8193, 20000};
    const size_t blocks[] = {0, 8, 64, 128, 1000, 4096};
    size_t maxn = 20000;
    uint8_t *data = malloc(maxn * 8);
    uint8_t *back = malloc(maxn * 8 + 1);
    int failures = 0;
    for (size_t ei = 0; ei < sizeof esz / sizeof esz[0]; ei++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
            for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
                size_t e = esz[ei], n = counts[ci], bs = blocks[bi];
                if (bs && bs < 64 && n > 4096)
                    continue;
                fill(data, n, e, (int)((ci + bi) % 3));
                uint8_t *c;
                size_t len = encode(data, n * e, e, bs, &c);
                faid_diag d;
                memset(back, 0xA5, n * e + 1);
                int rc = faid_bslz4_decode(c, len, e, back, n * e, &d);
                if (rc || memcmp(back, data, n * e) || back[n * e] != 0xA5) {
                    failures++;
                    fprintf(stderr, "bslz4 round trip e=%zu n=%zu bs=%zu: %s\n", e, n, bs,
                            rc ? d.msg : "data differ");
                }
                /* Decoding to a wrong size fails. */
                if (faid_bslz4_decode(c, len, e, back, n * e + e, &d) != FAID_ESIZE)
                    failures++;
                free(c);
            }
    CHECK(failures == 0);

    /* HDF5-LZ4 framing, including raw blocks (random data) and a clamped block size. */
    failures = 0;
    const size_t lz_blocks[] = {0, 1000, 8192, 65536};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
        for (size_t bi = 0; bi < sizeof lz_blocks / sizeof lz_blocks[0]; bi++)
            for (int kind = 0; kind < 3; kind++) {
                size_t nb = counts[ci] * 4;
                fill(data, counts[ci], 4, kind);
                size_t cap = faid_lz4h5_bound(nb, lz_blocks[bi]);
                uint8_t *c = malloc(cap);
                size_t len = 0;
                faid_diag d;
                int rc = faid_lz4h5_encode(data, nb, lz_blocks[bi], c, cap, &len, &d);
                if (!rc)
                    rc = faid_lz4h5_decode(c, len, back, nb, &d);
                if (rc || memcmp(back, data, nb)) {
                    failures++;
                    fprintf(stderr, "lz4 round trip n=%zu bs=%zu: %s\n", nb, lz_blocks[bi],
                            rc ? d.msg : "data differ");
                }
                if (len > 12 && faid_lz4h5_decode(c, len - 1, back, nb, &d) == 0)
                    failures++;
                if (faid_lz4h5_decode(c, len, back, nb + 1, &d) != FAID_ESIZE)
                    failures++;
                free(c);
            }
    CHECK(failures == 0);

    /* One raw LZ4 block (DECTRIS v1 lz4<). */
    fill(data, 5000, 2, 1);
    int bound = LZ4_compressBound(10000);
    uint8_t *c = malloc((size_t)bound);
    int len = LZ4_compress_default((const char *)data, (char *)c, 10000, bound);
    faid_diag d;
    CHECK(faid_lz4raw_decode(c, (size_t)len, back, 10000, &d) == 0 &&
          memcmp(back, data, 10000) == 0);
    CHECK(faid_lz4raw_decode(c, (size_t)len, back, 9999, &d) != 0);
    CHECK(faid_lz4raw_decode(c, (size_t)len, back, 10001, &d) == FAID_ESIZE);
    CHECK(faid_lz4raw_decode(c, (size_t)len - 1, back, 10000, &d) != 0);
    CHECK(faid_decode(FAID_ENC_LZ4_RAW, c, (size_t)len, 2, back, 10000, &d) == 0);
    CHECK(faid_decode(FAID_ENC_NONE, data, 100, 2, back, 100, &d) == 0 &&
          memcmp(back, data, 100) == 0);
    CHECK(faid_decode(FAID_ENC_NONE, data, 100, 2, back, 102, &d) == FAID_ESIZE);
    free(c);

    faid_encoding enc;
    CHECK(faid_encoding_parse("bslz4", &enc) == 0 && enc == FAID_ENC_BSLZ4);
    CHECK(faid_encoding_parse("lz4-raw", &enc) == 0 && enc == FAID_ENC_LZ4_RAW);
    CHECK(faid_encoding_parse("zstd", &enc) == -1);
    CHECK(strcmp(faid_encoding_name(FAID_ENC_LZ4), "lz4") == 0);
    free(data);
    free(back);
}

/* Random corruption of valid chunks: any result is fine except a crash or an out-of-bounds access
 * (ASan), and a decode that claims success must have produced a full-size output. Corrupting a
 * block's LZ4 token stream so that its length is wrong must be reported. */
static void test_corruption(void)
{
    uint8_t data[3000 * 4], back[3000 * 4];
    fill(data, 3000, 4, 1);
    uint8_t *c;
    size_t len = encode(data, sizeof data, 4, 0, &c);
    uint8_t *m = malloc(len);
    int errors = 0;
    for (int r = 0; r < 2000; r++) {
        memcpy(m, c, len);
        int nflip = 1 + (int)(rng() % 4);
        for (int k = 0; k < nflip; k++)
            m[rng() % len] ^= (uint8_t)(1u << (rng() % 8));
        faid_diag d;
        if (faid_bslz4_decode(m, len, 4, back, sizeof back, &d) != 0)
            errors++;
    }
    CHECK(errors > 0);
    /* A block length one short of the real one always fails: the data no longer parse to the
     * block's size and the tail no longer lines up. */
    memcpy(m, c, len);
    uint32_t c0 =
        ((uint32_t)m[12] << 24) | ((uint32_t)m[13] << 16) | ((uint32_t)m[14] << 8) | m[15];
    put_be32(m + 12, c0 - 1);
    faid_diag d;
    CHECK(faid_bslz4_decode(m, len, 4, back, sizeof back, &d) != 0);
    free(m);
    free(c);
}

/* Frames whose bit planes repeat with a period of q bytes (q = 1..4): element i takes the value
 * pat[(i / 8) % q], so every row of the shuffled block is a run of a q-byte pattern and the LZ4
 * encoder writes long overlapping matches of offset q (bslz4.cl's ZRUN path), with a few noisy
 * elements so that literals and ordinary matches come in between. */
static void fill_periodic(uint8_t *buf, size_t n, size_t e, uint32_t q)
{
    uint64_t pat[4];
    for (uint32_t k = 0; k < 4; k++)
        pat[k] = rng() % 1000;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = pat[(i / 8) % q];
        if (rng() % 512 == 0)
            v = rng();
        for (size_t j = 0; j < e; j++)
            buf[i * e + j] = (uint8_t)(v >> (8 * (j % 8)));
    }
}

/* HDF5-LZ4 chunks (no shuffle; blocks of 1000 bytes start at every 8-byte alignment, raw blocks
 * from random data) through the device decoder cc (built for at least 4 x 12345 bytes), against
 * the CPU encoder's input. */
static void gpu_lz4(faid_clcodec *cc, const char *defines, const size_t *counts, size_t ncounts,
                    uint8_t *data, uint8_t *back)
{
    faid_diag d;
    const size_t lz_blocks[] = {1000, 4096, 8192};
    int failures = 0;
    for (size_t ci = 0; ci < ncounts; ci++)
        for (size_t bi = 0; bi < sizeof lz_blocks / sizeof lz_blocks[0]; bi++)
            for (uint32_t q = 0; q <= 4; q++) {
                size_t nb = counts[ci] * 4;
                if (q)
                    fill_periodic(data, counts[ci], 4, q);
                else
                    fill(data, counts[ci], 4, (int)((ci + bi) % 3));
                size_t cap = faid_lz4h5_bound(nb, lz_blocks[bi]);
                uint8_t *c = malloc(cap);
                size_t len = 0;
                int rc = faid_lz4h5_encode(data, nb, lz_blocks[bi], c, cap, &len, &d);
                memset(back, 0xA5, nb + 16);
                if (!rc)
                    rc = faid_clcodec_decode_host(cc, FAID_ENC_LZ4, c, len, back, nb, &d);
                if (rc || memcmp(back, data, nb) || back[nb] != 0xA5) {
                    failures++;
                    fprintf(stderr, "GPU lz4 [%s] n=%zu bs=%zu q=%u: %s\n", defines, nb,
                            lz_blocks[bi], q, rc ? d.msg : "data differ");
                }
                free(c);
            }
    CHECK_MSG(failures == 0, "lz4 [%s]", defines);
}

/* The OpenCL decoder built with the extra options `defines` (FAID_CLCODEC_DEFINES, after those of
 * the environment) against the CPU decoder: every chunk decoded byte for byte the same and
 * nothing written past the output, the corrupt chunks flagged. */
static void gpu_variant(faid_cl_ctx *ctx, const char *defines, int all_sizes)
{
    const char *env = getenv("FAID_CLCODEC_DEFINES");
    char *saved = env ? strdup(env) : NULL;
    char opts[256];
    snprintf(opts, sizeof opts, "%s %s", saved ? saved : "", defines);
    setenv("FAID_CLCODEC_DEFINES", opts, 1);
    faid_diag d;
    /* the variants with the element sizes of detector data (one program build each) */
    const size_t esz[] = {2, 4, 1, 8};
    const size_t nesz = all_sizes ? 4 : 2;
    const size_t counts[] = {1, 7, 8, 9, 100, 2047, 2048, 2049, 4103, 8192, 12345};
    const size_t blocks[] = {0, 8, 256, 1000, 2048};
    size_t maxn = 12345;
    uint8_t *data = malloc(maxn * 8);
    uint8_t *back = malloc(maxn * 8 + 16);
    for (size_t ei = 0; ei < nesz; ei++) {
        size_t e = esz[ei];
        faid_clcodec *cc = faid_clcodec_new(ctx, e, maxn * e, &d);
        CHECK_MSG(cc != NULL, "clcodec e=%zu [%s]: %s", e, defines, d.msg);
        if (!cc)
            continue;
        int failures = 0;
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
            for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
                for (uint32_t q = 0; q <= 4; q++) {
                    size_t n = counts[ci], bs = blocks[bi];
                    if (bs * e > 8192 || (q && n < 2000))
                        continue;
                    if (q)
                        fill_periodic(data, n, e, q);
                    else
                        fill(data, n, e, (int)((ci + bi) % 3));
                    uint8_t *c;
                    size_t len = encode(data, n * e, e, bs, &c);
                    memset(back, 0xA5, n * e + 16);
                    int rc = faid_clcodec_decode_host(cc, FAID_ENC_BSLZ4, c, len, back, n * e, &d);
                    if (rc || memcmp(back, data, n * e) || back[n * e] != 0xA5) {
                        failures++;
                        fprintf(stderr, "GPU bslz4 [%s] e=%zu n=%zu bs=%zu q=%u: %s\n", defines, e,
                                n, bs, q, rc ? d.msg : "data differ");
                    }
                    free(c);
                }
        CHECK_MSG(failures == 0, "e=%zu [%s]", e, defines);

        /* Corrupt chunks: the table parser or the kernel's error flag must catch what the CPU
         * decoder catches for a wrong block length, and nothing may crash. */
        size_t n = 6000;
        fill(data, n, e, 1);
        uint8_t *c;
        size_t len = encode(data, n * e, e, 0, &c);
        uint8_t *m = malloc(len);
        int gpu_err = 0, agree = 1;
        for (int r = 0; r < 60; r++) {
            memcpy(m, c, len);
            for (int k = 0; k < 3; k++)
                m[12 + 4 + rng() % (len - 16)] ^= (uint8_t)(1u << (rng() % 8));
            int rg = faid_clcodec_decode_host(cc, FAID_ENC_BSLZ4, m, len, back, n * e, &d);
            gpu_err += rg != 0;
            uint8_t *ref = malloc(n * e);
            int rr = faid_bslz4_decode(m, len, e, ref, n * e, &d);
            if (rr == 0 && rg == 0 && memcmp(ref, back, n * e) != 0)
                agree = 0;
            free(ref);
        }
        CHECK_MSG(gpu_err > 0, "[%s]", defines);
        CHECK_MSG(agree, "[%s]", defines);
        memcpy(m, c, len);
        uint32_t c0 =
            ((uint32_t)m[12] << 24) | ((uint32_t)m[13] << 16) | ((uint32_t)m[14] << 8) | m[15];
        put_be32(m + 12, c0 - 1);
        CHECK(faid_clcodec_decode_host(cc, FAID_ENC_BSLZ4, m, len, back, n * e, &d) != 0);
        free(m);
        free(c);
        if (e == 4) /* the same program's lz4h5_decode */
            gpu_lz4(cc, defines, counts, sizeof counts / sizeof counts[0], data, back);
        faid_clcodec_destroy(&cc);
        CHECK(cc == NULL);
    }

    free(data);
    free(back);
    if (saved)
        setenv("FAID_CLCODEC_DEFINES", saved, 1);
    else
        unsetenv("FAID_CLCODEC_DEFINES");
    free(saved);
}

/* The OpenCL decoder against the CPU decoder, on whatever device "auto" selects (PoCL here), in
 * its default build and in each tuning variant of bslz4.cl's header (issue 17: ZRUN 1 and 2,
 * DEC_GLOBAL, BPG 2 and their combinations, the ones tests/bench/gpu-run.sh runs), which must
 * give the same bytes. */
static void test_gpu(void)
{
    faid_cl_device_info dev;
    faid_diag d;
    if (faid_cl_select(getenv("FAID_TEST_DEVICE") ? getenv("FAID_TEST_DEVICE") : "auto", &dev,
                       &d) != 0) {
        printf("test_codec: no OpenCL device (%s), GPU decoder not tested\n", d.msg);
        return;
    }
    faid_cl_ctx *ctx = faid_cl_ctx_new(&dev, 0, &d);
    CHECK_MSG(ctx != NULL, "%s", d.msg);
    if (!ctx)
        return;
    const char *variants[] = {"",
                              "-D ZRUN=1",
                              "-D ZRUN=2",
                              "-D DEC_GLOBAL=1",
                              "-D DEC_GLOBAL=1 -D ZRUN=2",
                              "-D CMP_LOCAL=1 -D ZRUN=2",
                              "-D BPG=2 -D DEC_GLOBAL=1",
                              "-D BPG=2 -D ZRUN=2",
                              "-D BPG=2 -D DEC_GLOBAL=1 -D ZRUN=2"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        gpu_variant(ctx, variants[i], i == 0);
    faid_cl_ctx_destroy(&ctx);
}

/* `test_codec encode bslz4|lz4 ELEM_SIZE BLOCK IN OUT`: encodes the raw bytes of IN with faid's
 * encoder (BLOCK in elements for bslz4, in bytes for lz4; 0 = default) so that the Python tests
 * can hand faid's chunks to hdf5plugin. */
static int encode_file(char **argv)
{
    size_t e = strtoul(argv[3], NULL, 10), block = strtoul(argv[4], NULL, 10);
    FILE *f = fopen(argv[5], "rb");
    if (!f) {
        fprintf(stderr, "test_codec encode: cannot open %s\n", argv[5]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *in = malloc((size_t)n + 1);
    size_t got = fread(in, 1, (size_t)n, f);
    fclose(f);
    int lz = strcmp(argv[2], "lz4") == 0;
    size_t cap = lz ? faid_lz4h5_bound(got, block) : faid_bslz4_bound(got, e, block);
    uint8_t *out = malloc(cap);
    size_t len = 0;
    faid_diag d;
    int rc = lz ? faid_lz4h5_encode(in, got, block, out, cap, &len, &d)
                : faid_bslz4_encode(in, got, e, block, out, cap, &len, &d);
    if (!rc) {
        f = fopen(argv[6], "wb");
        if (!f || fwrite(out, 1, len, f) != len)
            rc = FAID_EIO;
        if (f)
            fclose(f);
    } else {
        fprintf(stderr, "test_codec encode: %s\n", d.msg);
    }
    free(in);
    free(out);
    return rc ? 1 : 0;
}

/* `test_codec bench [DEVICE [FRAMES [ELEM_SIZE [KIND]]]]` (KIND 3: sparse counts, 1: denser):
 * throughput of the device decoder on an EIGER 4M diffraction-like frame (2167 x 2070), one launch
 * per frame, input already on the device (what the engine does after its H2D copy). Prints numbers;
 * asserts only correctness. */
static int bench(int argc, char **argv)
{
    const char *spec = argc > 2 ? argv[2] : "auto";
    int frames = argc > 3 ? atoi(argv[3]) : 200;
    size_t e = argc > 4 ? strtoul(argv[4], NULL, 10) : 4;
    int kind = argc > 5 ? atoi(argv[5]) : 3;
    size_t n = 2167 * 2070, nbytes = n * e;
    faid_diag d;
    uint8_t *frame = malloc(nbytes), *back = malloc(nbytes);
    rng_state = 12345;
    fill(frame, n, e, kind);
    uint8_t *c;
    size_t len = encode(frame, nbytes, e, 0, &c);
    int64_t t0 = faid_now_ns();
    int reps = 3;
    for (int r = 0; r < reps; r++)
        faid_bslz4_decode(c, len, e, back, nbytes, &d);
    double cpu_ms = (double)(faid_now_ns() - t0) / 1e6 / reps;
    faid_block_table t;
    faid_block_table_alloc(&t, faid_bslz4_max_blocks(nbytes, e, 0), &d);
    t0 = faid_now_ns();
    for (int r = 0; r < 100; r++)
        faid_bslz4_table(c, len, e, nbytes, &t, &d);
    double table_us = (double)(faid_now_ns() - t0) / 1e3 / 100;
    printf("frame %zu x %zu B, chunk %zu B (ratio %.2f), %u blocks; CPU: table %.1f us, "
           "decode %.2f ms/frame (1 thread)\n",
           n, e, len, (double)nbytes / (double)len, t.nblocks, table_us, cpu_ms);
    faid_cl_device_info dev;
    if (faid_cl_select(spec, &dev, &d)) {
        printf("no device: %s\n", d.msg);
        return 1;
    }
    faid_cl_ctx *ctx = faid_cl_ctx_new(&dev, 1, &d);
    faid_clcodec *cc = ctx ? faid_clcodec_new(ctx, e, nbytes, &d) : NULL;
    if (!cc) {
        printf("setup failed: %s\n", d.msg);
        return 1;
    }
    if (getenv("FAID_BENCH_PTX")) { /* the device's compiled program, e.g. NVIDIA's PTX */
        char opts[384];
        const char *extra = getenv("FAID_CLCODEC_DEFINES"); /* the variant's, as the decoder's */
        snprintf(opts, sizeof opts, "-D ELEM_SIZE=%zu -D BLOCK_CAP=8192 -D WG=%zu %s", e,
                 faid_clcodec_wg(cc), extra ? extra : "");
        const char *names[] = {"codec/bslz4.cl"};
        cl_program prog;
        if (faid_cl_build(ctx, names, 1, opts, &prog, &d) == 0) {
            size_t bsz = 0;
            clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bsz, &bsz, NULL);
            unsigned char *bin = malloc(bsz + 1);
            clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
            FILE *pf = fopen(getenv("FAID_BENCH_PTX"), "wb");
            if (pf) {
                fwrite(bin, 1, bsz, pf);
                fclose(pf);
            }
            free(bin);
            clReleaseProgram(prog);
        }
    }
    uint32_t *packed = malloc(faid_clcodec_table_bytes(&t));
    faid_clcodec_pack_table(&t, packed);
    cl_mem bc = faid_cl_buffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, len, c, &d);
    cl_mem bt = faid_cl_buffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               faid_clcodec_table_bytes(&t), packed, &d);
    cl_mem bd = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, nbytes, NULL, &d);
    int zero = 0, flag = -1;
    cl_mem be = faid_cl_buffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 4, &zero, &d);
    cl_event ev;
    int rc = faid_clcodec_enqueue(cc, bc, bt, &t, bd, be, 0, NULL, &ev, &d);
    clFinish(ctx->queue);
    clEnqueueReadBuffer(ctx->queue, be, CL_TRUE, 0, 4, &flag, 0, NULL, NULL);
    clEnqueueReadBuffer(ctx->queue, bd, CL_TRUE, 0, nbytes, back, 0, NULL, NULL);
    int ok = rc == 0 && flag == 0 && memcmp(back, frame, nbytes) == 0;
    printf("device %s, WG %zu: first launch %s\n", dev.name, faid_clcodec_wg(cc),
           ok ? "correct" : "WRONG");
    clReleaseEvent(ev);
    double best = 1e30, sum = 0;
    t0 = faid_now_ns();
    if (getenv("FAID_BENCH_ANYWAY"))
        ok = 1;
    /* About a second of work first, so that the GPU leaves its idle clocks. */
    int64_t warm_until = faid_now_ns() + 1000000000;
    while (ok && faid_now_ns() < warm_until) {
        for (int f = 0; f < 50; f++)
            faid_clcodec_enqueue(cc, bc, bt, &t, bd, be, 0, NULL, NULL, &d);
        clFinish(ctx->queue);
    }
    for (int f = 0; f < frames && ok; f++) {
        rc = faid_clcodec_enqueue(cc, bc, bt, &t, bd, be, 0, NULL, &ev, &d);
        if (rc)
            break;
        clWaitForEvents(1, &ev);
        cl_ulong a = 0, b = 0;
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
        double us = (double)(b - a) / 1e3;
        sum += us;
        if (us < best)
            best = us;
        clReleaseEvent(ev);
    }
    double wall_sync = (double)(faid_now_ns() - t0) / 1e3 / frames;
    t0 = faid_now_ns();
    for (int f = 0; f < frames && ok; f++)
        faid_clcodec_enqueue(cc, bc, bt, &t, bd, be, 0, NULL, NULL, &d);
    clFinish(ctx->queue);
    double wall_async = (double)(faid_now_ns() - t0) / 1e3 / frames;
    printf("kernel: best %.1f us, mean %.1f us (%.0f frames/s, %.0f GB/s decoded); "
           "back-to-back launches %.1f us/frame (%.0f frames/s); synchronous %.1f us\n",
           best, sum / frames, 1e6 / (sum / frames), (double)nbytes / (sum / frames) / 1e3,
           wall_async, 1e6 / wall_async, wall_sync);
    /* Frames in flight on several in-order queues (one decoder and output per queue, as the
     * engine would have per in-flight frame): kernels of different frames overlap. At least one
     * frame per queue, so that every output checked below was written. */
    for (int nq = 2; nq <= 4 && ok; nq *= 2) {
        const int qframes = frames < nq ? nq : frames;
        cl_command_queue qs[4];
        cl_mem dsts[4], errs[4];
        faid_clcodec *ccs[4];
        for (int q = 0; q < nq; q++) {
            cl_int cerr;
            qs[q] = clCreateCommandQueue(ctx->context, dev.device, 0, &cerr);
            dsts[q] = faid_cl_buffer(ctx, CL_MEM_READ_WRITE, nbytes, NULL, &d);
            errs[q] = faid_cl_buffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 4, &zero, &d);
            ccs[q] = faid_clcodec_new(ctx, e, nbytes, &d);
        }
        for (int pass = 0; pass < 2; pass++) {
            t0 = faid_now_ns();
            for (int f = 0; f < qframes; f++) {
                int q = f % nq;
                faid_clcodec_io io = {.chunk = bc, .table = bt, .dst = dsts[q], .err = errs[q]};
                faid_clcodec_enqueue_io(ccs[q], qs[q], FAID_ENC_BSLZ4, &io, &t, 0, NULL, NULL, &d);
                if (q == nq - 1)
                    for (int k = 0; k < nq; k++)
                        clFlush(qs[k]);
            }
            for (int q = 0; q < nq; q++)
                clFinish(qs[q]);
        }
        double us = (double)(faid_now_ns() - t0) / 1e3 / qframes;
        int good = 1;
        for (int q = 0; q < nq; q++) {
            clEnqueueReadBuffer(qs[q], errs[q], CL_TRUE, 0, 4, &flag, 0, NULL, NULL);
            clEnqueueReadBuffer(qs[q], dsts[q], CL_TRUE, 0, nbytes, back, 0, NULL, NULL);
            good &= flag == 0 && memcmp(back, frame, nbytes) == 0;
            clReleaseMemObject(dsts[q]);
            clReleaseMemObject(errs[q]);
            clReleaseCommandQueue(qs[q]);
            faid_clcodec_destroy(&ccs[q]);
        }
        printf("%d queues: %.1f us/frame (%.0f frames/s)%s\n", nq, us, 1e6 / us,
               good ? "" : " WRONG");
        ok &= good;
    }
    clReleaseMemObject(bc);
    clReleaseMemObject(bt);
    clReleaseMemObject(bd);
    clReleaseMemObject(be);
    faid_clcodec_destroy(&cc);
    faid_cl_ctx_destroy(&ctx);
    faid_block_table_free(&t);
    free(packed);
    free(c);
    free(frame);
    free(back);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "encode") == 0)
        return encode_file(argv);
    if (argc >= 2 && strcmp(argv[1], "bench") == 0)
        return bench(argc, argv);
    RUN(test_bitshuffle_definition());
    RUN(test_table_edges());
    RUN(test_oversized_header_block());
    RUN(test_roundtrips());
    RUN(test_corruption());
    if (!getenv("FAID_TEST_NO_GPU"))
        RUN(test_gpu());
    return faid_test_finish();
}
