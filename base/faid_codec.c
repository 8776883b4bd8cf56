/* faid_codec: CPU reference codecs (see faid_codec.h for the formats).
 *
 * LZ4 blocks go through liblz4 (LZ4_decompress_safe never writes past the destination we give it
 * and never reads past the source length). The bit (un)shuffle is faid's own: for every group of
 * 8 elements and every byte plane j it gathers 8 bytes into a 64-bit word and transposes that 8x8
 * bit matrix with three delta swaps (algorithms.md §1.3); the same transpose runs in the OpenCL
 * kernel, so the CPU path doubles as its reference. Framing is parsed into a faid_block_table
 * first (algorithms.md §1.4), so the CPU decoder and the GPU decoder accept exactly the same
 * chunks. */
#include "faid_codec.h"

#include <lz4.h>
#include <stdlib.h>
#include <string.h>

/* Largest element size faid accepts in a bslz4 header walk; bitshuffle itself has no limit but a
 * huge element size only shows up in corrupt metadata. */
#define FAID_BSLZ4_MAX_ELEM      1024
#define FAID_BSLZ4_DEFAULT_BLOCK 8192u

int faid_encoding_parse(const char *name, faid_encoding *out)
{
    static const struct {
        const char *name;
        faid_encoding enc;
    } names[] = {{"none", FAID_ENC_NONE},       {"raw", FAID_ENC_NONE},
                 {"bslz4", FAID_ENC_BSLZ4},     {"lz4", FAID_ENC_LZ4},
                 {"lz4-raw", FAID_ENC_LZ4_RAW}, {"lz4raw", FAID_ENC_LZ4_RAW}};
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].enc;
            return 0;
        }
    return -1;
}

const char *faid_encoding_name(faid_encoding e)
{
    switch (e) {
    case FAID_ENC_NONE:
        return "none";
    case FAID_ENC_BSLZ4:
        return "bslz4";
    case FAID_ENC_LZ4:
        return "lz4";
    case FAID_ENC_LZ4_RAW:
        return "lz4-raw";
    }
    return "unknown";
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Worst-case LZ4 output for n input bytes (LZ4_COMPRESSBOUND without its int limit). */
static uint64_t lz4_bound(uint64_t n)
{
    return n + n / 255 + 16;
}

uint64_t faid_bslz4_default_block_elems(size_t elem_size)
{
    if (elem_size == 0)
        return 0;
    uint64_t bs = (FAID_BSLZ4_DEFAULT_BLOCK / elem_size) & ~(uint64_t)7;
    return bs < 128 ? 128 : bs;
}

uint32_t faid_bslz4_max_blocks(uint64_t total_bytes, size_t elem_size, uint32_t block_bytes)
{
    if (elem_size == 0)
        return 0;
    uint64_t bs = block_bytes ? block_bytes / elem_size : faid_bslz4_default_block_elems(elem_size);
    if (bs < 8)
        bs = 8;
    uint64_t n = bs ? (total_bytes / elem_size) / bs + 1 : 0;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

int faid_bslz4_header(const uint8_t *src, size_t len, uint64_t *total_bytes, uint32_t *block_bytes,
                      faid_diag *d)
{
    if (!src || len < 12)
        return faid_fail(d, FAID_ETRUNC, "chunk of %zu bytes is shorter than its 12-byte header",
                         src ? len : 0);
    *total_bytes = be64(src);
    *block_bytes = be32(src + 8);
    return FAID_OK;
}

/* Reads the 12-byte header both block formats share and checks it against the chunk length and
 * the decoded size the caller expects (0: any); fmt names the format in messages. */
static int table_header(const uint8_t *src, size_t len, uint64_t expect_bytes, const char *fmt,
                        uint64_t *total, uint32_t *bbytes, faid_diag *d)
{
    int rc = faid_bslz4_header(src, len, total, bbytes, d);
    if (rc)
        return rc;
    if (len > UINT32_MAX)
        return faid_fail(d, FAID_EUNSUP, "%s: chunk of %zu bytes exceeds 4 GiB", fmt, len);
    if (expect_bytes && *total != expect_bytes)
        return faid_fail(d, FAID_ESIZE,
                         "%s: header says %llu decoded bytes, expected %llu from shape and dtype",
                         fmt, (unsigned long long)*total, (unsigned long long)expect_bytes);
    return FAID_OK;
}

/* Checks that the len-byte chunk can hold nb blocks (a 4-byte prefix and at least one byte each)
 * before t is filled with them, so a forged header cannot make the parser loop for long. */
static int table_reserve(faid_block_table *t, size_t len, uint64_t nb, uint64_t total,
                         const char *fmt, faid_diag *d)
{
    if (nb > (len - 12) / 5)
        return faid_fail(d, FAID_ETRUNC,
                         "%s: %zu bytes cannot hold the %llu blocks of a chunk that decodes to "
                         "%llu bytes",
                         fmt, len, (unsigned long long)nb, (unsigned long long)total);
    if (nb > t->cap)
        return faid_fail(d, FAID_ESIZE,
                         "chunk has %llu blocks, more than the %u the block table was sized for",
                         (unsigned long long)nb, t->cap);
    if (nb && (!t->offset || !t->csize))
        return faid_fail(d, FAID_EINVAL, "block table has no arrays");
    return FAID_OK;
}

/* Reads the big-endian length prefix of block k of nb at *pos and records the block in t; *pos
 * ends past the block. A length outside 1..maxc is corrupt; what names it in the message. */
static int table_block(faid_block_table *t, const uint8_t *src, size_t len, uint64_t *pos,
                       uint64_t k, uint64_t nb, uint64_t maxc, const char *fmt, const char *what,
                       faid_diag *d)
{
    if (len - *pos < 4)
        return faid_fail(d, FAID_ETRUNC,
                         "%s: chunk ends at byte %zu before the prefix of block %llu of %llu", fmt,
                         len, (unsigned long long)k, (unsigned long long)nb);
    uint32_t c = be32(src + *pos);
    *pos += 4;
    if (c == 0 || c > maxc)
        return faid_fail(d, FAID_ECORRUPT,
                         "%s: block %llu has %s %u (allowed 1..%llu) at byte %llu", fmt,
                         (unsigned long long)k, what, c, (unsigned long long)maxc,
                         (unsigned long long)(*pos - 4));
    if (c > len - *pos)
        return faid_fail(d, FAID_ETRUNC,
                         "%s: block %llu needs %u bytes at byte %llu but the chunk has only %zu",
                         fmt, (unsigned long long)k, c, (unsigned long long)*pos, len);
    t->offset[k] = (uint32_t)*pos;
    t->csize[k] = c;
    *pos += c;
    return FAID_OK;
}

int faid_bslz4_table(const uint8_t *src, size_t len, size_t elem_size, uint64_t expect_bytes,
                     faid_block_table *t, faid_diag *d)
{
    if (elem_size == 0 || elem_size > FAID_BSLZ4_MAX_ELEM)
        return faid_fail(d, FAID_EINVAL, "bslz4: element size %zu is not supported (1..%d)",
                         elem_size, FAID_BSLZ4_MAX_ELEM);
    uint64_t total = 0;
    uint32_t bbytes = 0;
    int rc = table_header(src, len, expect_bytes, "bslz4", &total, &bbytes, d);
    if (rc)
        return rc;
    if (total % elem_size)
        return faid_fail(d, FAID_EFORMAT,
                         "bslz4: decoded size %llu is not a multiple of the element size %zu",
                         (unsigned long long)total, elem_size);
    if (bbytes == 0 || bbytes % (8 * elem_size))
        return faid_fail(d, FAID_EFORMAT,
                         "bslz4: header block size %u bytes is not a positive multiple of 8 x %zu",
                         bbytes, elem_size);
    uint64_t n = total / elem_size;
    uint64_t bs = bbytes / elem_size;
    uint64_t nfull = n / bs;
    uint64_t m8 = (n % bs) & ~(uint64_t)7;
    uint64_t nb = nfull + (m8 > 0);
    uint64_t tail = (n % 8) * elem_size;
    rc = table_reserve(t, len, nb, total, "bslz4", d);
    if (rc)
        return rc;
    uint64_t pos = 12;
    for (uint64_t k = 0; k < nb; k++) {
        uint64_t dec = k < nfull ? bbytes : m8 * elem_size;
        rc = table_block(t, src, len, &pos, k, nb, lz4_bound(dec), "bslz4", "compressed length", d);
        if (rc)
            return rc;
    }
    if (len - pos < tail)
        return faid_fail(d, FAID_ETRUNC,
                         "bslz4: %llu raw tail bytes expected after the last block, %llu present",
                         (unsigned long long)tail, (unsigned long long)(len - pos));
    if (len - pos > tail)
        return faid_fail(d, FAID_EFORMAT,
                         "bslz4: %llu unexpected bytes after the blocks and the %llu-byte tail",
                         (unsigned long long)(len - pos - tail), (unsigned long long)tail);
    t->total_bytes = total;
    t->block_bytes = bbytes;
    t->elem_size = (uint32_t)elem_size;
    t->nblocks = (uint32_t)nb;
    t->last_bytes = nb == 0 ? 0 : (m8 ? (uint32_t)(m8 * elem_size) : bbytes);
    t->tail_offset = pos;
    t->tail_bytes = (uint32_t)tail;
    return FAID_OK;
}

int faid_lz4h5_table(const uint8_t *src, size_t len, uint64_t expect_bytes, faid_block_table *t,
                     faid_diag *d)
{
    uint64_t total = 0;
    uint32_t bbytes = 0;
    int rc = table_header(src, len, expect_bytes, "lz4", &total, &bbytes, d);
    if (rc)
        return rc;
    if (bbytes == 0 && total > 0)
        return faid_fail(d, FAID_EFORMAT, "lz4: header block size is 0");
    /* The HDF5 LZ4 filter clamps its block size to the chunk size when it writes. */
    uint64_t eff = bbytes < total ? bbytes : total;
    uint64_t nb = eff ? (total + eff - 1) / eff : 0;
    rc = table_reserve(t, len, nb, total, "lz4", d);
    if (rc)
        return rc;
    uint64_t pos = 12;
    for (uint64_t k = 0; k < nb; k++) {
        uint64_t dec = total - k * eff < eff ? total - k * eff : eff;
        /* A block that compresses to its own size or more is stored raw with length = size. */
        rc = table_block(t, src, len, &pos, k, nb, dec, "lz4", "length", d);
        if (rc)
            return rc;
    }
    if (pos != len)
        return faid_fail(d, FAID_EFORMAT, "lz4: %llu unexpected bytes after the last block",
                         (unsigned long long)(len - pos));
    t->total_bytes = total;
    t->block_bytes = (uint32_t)eff;
    t->elem_size = 1;
    t->nblocks = (uint32_t)nb;
    t->last_bytes = nb ? (uint32_t)(total - (nb - 1) * eff) : 0;
    t->tail_offset = pos;
    t->tail_bytes = 0;
    return FAID_OK;
}

/* Transposes the 8x8 bit matrix held in x (row r = byte r, column c = bit c): afterwards bit c of
 * byte r is what bit r of byte c was. Its own inverse. */
static inline uint64_t transpose8(uint64_t x)
{
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x = x ^ t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x = x ^ t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    x = x ^ t ^ (t << 28);
    return x;
}

void faid_bitshuffle(const void *in, void *out, size_t n, size_t elem_size)
{
    const uint8_t *src = in;
    uint8_t *dst = out;
    size_t row = n / 8;
    for (size_t g = 0; g < row; g++)
        for (size_t j = 0; j < elem_size; j++) {
            uint64_t w = 0;
            for (int i = 0; i < 8; i++)
                w |= (uint64_t)src[(8 * g + (size_t)i) * elem_size + j] << (8 * i);
            w = transpose8(w);
            for (int k = 0; k < 8; k++)
                dst[(8 * j + (size_t)k) * row + g] = (uint8_t)(w >> (8 * k));
        }
}

/* Unshuffles the 8 elements of column g: gathers byte plane j from rows 8j..8j+7, transposes,
 * and scatters into the 8 x E output bytes (one contiguous run per group). */
static inline void unshuffle_group(const uint8_t *src, uint8_t *dst, size_t row, size_t g, size_t e)
{
    uint8_t *o = dst + 8 * g * e;
    for (size_t j = 0; j < e; j++) {
        const uint8_t *r = src + 8 * j * row + g;
        uint64_t w = (uint64_t)r[0] | (uint64_t)r[row] << 8 | (uint64_t)r[2 * row] << 16 |
                     (uint64_t)r[3 * row] << 24 | (uint64_t)r[4 * row] << 32 |
                     (uint64_t)r[5 * row] << 40 | (uint64_t)r[6 * row] << 48 |
                     (uint64_t)r[7 * row] << 56;
        w = transpose8(w);
        for (size_t i = 0; i < 8; i++)
            o[i * e + j] = (uint8_t)(w >> (8 * i));
    }
}

void faid_bitunshuffle(const void *in, void *out, size_t n, size_t elem_size)
{
    size_t row = n / 8;
    /* Constant element sizes let the compiler unroll the byte-plane loop. */
    switch (elem_size) {
    case 1:
        for (size_t g = 0; g < row; g++)
            unshuffle_group(in, out, row, g, 1);
        break;
    case 2:
        for (size_t g = 0; g < row; g++)
            unshuffle_group(in, out, row, g, 2);
        break;
    case 4:
        for (size_t g = 0; g < row; g++)
            unshuffle_group(in, out, row, g, 4);
        break;
    default:
        for (size_t g = 0; g < row; g++)
            unshuffle_group(in, out, row, g, elem_size);
        break;
    }
}

/* One LZ4 block of known decoded size. */
static int lz4_block(const uint8_t *src, uint32_t csize, uint8_t *dst, uint32_t dsize,
                     const char *what, uint32_t k, faid_diag *d)
{
    if (csize > INT32_MAX || dsize > INT32_MAX)
        return faid_fail(d, FAID_EUNSUP, "%s: block %u is larger than 2 GiB", what, k);
    int got = LZ4_decompress_safe((const char *)src, (char *)dst, (int)csize, (int)dsize);
    if (got < 0)
        return faid_fail(d, FAID_ECORRUPT, "%s: block %u: corrupt LZ4 data", what, k);
    if ((uint32_t)got != dsize)
        return faid_fail(d, FAID_ECORRUPT, "%s: block %u decodes to %d bytes, expected %u", what, k,
                         got, dsize);
    return FAID_OK;
}

static int table_alloc(faid_block_table *t, uint64_t cap, faid_diag *d)
{
    memset(t, 0, sizeof *t);
    if (cap > UINT32_MAX)
        return faid_fail(d, FAID_ESIZE, "too many blocks");
    t->cap = (uint32_t)cap;
    t->offset = malloc((cap ? cap : 1) * sizeof *t->offset);
    t->csize = malloc((cap ? cap : 1) * sizeof *t->csize);
    if (!t->offset || !t->csize) {
        free(t->offset);
        free(t->csize);
        memset(t, 0, sizeof *t);
        return faid_fail(d, FAID_ENOMEM, "out of memory for a block table of %llu entries",
                         (unsigned long long)cap);
    }
    return FAID_OK;
}

int faid_block_table_alloc(faid_block_table *t, uint32_t cap, faid_diag *d)
{
    return table_alloc(t, cap, d);
}

void faid_block_table_free(faid_block_table *t)
{
    if (!t)
        return;
    free(t->offset);
    free(t->csize);
    memset(t, 0, sizeof *t);
}

/* Sizes a table for the chunk in src from its own header, bounded by what dst_len allows. */
static int table_for_chunk(const uint8_t *src, size_t len, size_t elem_size, size_t dst_len,
                           faid_block_table *t, faid_diag *d)
{
    uint64_t total = 0;
    uint32_t bbytes = 0;
    int rc = faid_bslz4_header(src, len, &total, &bbytes, d);
    if (rc)
        return rc;
    /* Every block costs at least 5 bytes of chunk, which bounds the table by the input too. */
    uint64_t cap = len / 5 + 1;
    uint64_t by_size = elem_size && bbytes ? (uint64_t)dst_len / bbytes + 1 : 1;
    if (by_size < cap)
        cap = by_size;
    return table_alloc(t, cap, d);
}

uint32_t faid_block_table_max_block(const faid_block_table *t)
{
    /* The parsers derive every block but the last from the header's block size and the last
     * from what is left of the decoded size, so neither exceeds total_bytes. */
    if (t->nblocks == 0)
        return 0;
    return t->nblocks > 1 && t->block_bytes > t->last_bytes ? t->block_bytes : t->last_bytes;
}

int faid_bslz4_decode_table(const uint8_t *src, const faid_block_table *t, void *dst,
                            size_t dst_len, void *scratch, faid_diag *d)
{
    if (t->total_bytes != dst_len)
        return faid_fail(d, FAID_ESIZE, "bslz4: chunk decodes to %llu bytes, expected %zu",
                         (unsigned long long)t->total_bytes, dst_len);
    uint8_t *out = dst;
    size_t e = t->elem_size;
    for (uint32_t k = 0; k < t->nblocks; k++) {
        uint32_t dec = k + 1 == t->nblocks ? t->last_bytes : t->block_bytes;
        int rc = lz4_block(src + t->offset[k], t->csize[k], scratch, dec, "bslz4", k, d);
        if (rc)
            return rc;
        faid_bitunshuffle(scratch, out + (size_t)k * t->block_bytes, dec / e, e);
    }
    if (t->tail_bytes)
        memcpy(out + dst_len - t->tail_bytes, src + t->tail_offset, t->tail_bytes);
    return FAID_OK;
}

int faid_bslz4_decode(const uint8_t *src, size_t len, size_t elem_size, void *dst, size_t dst_len,
                      faid_diag *d)
{
    faid_block_table t;
    int rc = table_for_chunk(src, len, elem_size, dst_len, &t, d);
    if (rc)
        return rc;
    rc = faid_bslz4_table(src, len, elem_size, dst_len, &t, d);
    uint8_t *scratch = NULL;
    if (!rc && t.nblocks) {
        /* What the blocks decode to, never the header's block size alone: a one-block chunk
         * may claim 4 GiB blocks (the codec fuzz target ran out of memory in seconds). */
        scratch = malloc(faid_block_table_max_block(&t));
        if (!scratch)
            rc = faid_fail(d, FAID_ENOMEM, "out of memory");
    }
    if (!rc)
        rc = faid_bslz4_decode_table(src, &t, dst, dst_len, scratch, d);
    free(scratch);
    faid_block_table_free(&t);
    return rc;
}

int faid_lz4h5_decode(const uint8_t *src, size_t len, void *dst, size_t dst_len, faid_diag *d)
{
    faid_block_table t;
    int rc = table_for_chunk(src, len, 1, dst_len, &t, d);
    if (rc)
        return rc;
    rc = faid_lz4h5_table(src, len, dst_len, &t, d);
    uint8_t *out = dst;
    for (uint32_t k = 0; !rc && k < t.nblocks; k++) {
        uint32_t dec = k + 1 == t.nblocks ? t.last_bytes : t.block_bytes;
        uint8_t *at = out + (size_t)k * t.block_bytes;
        if (t.csize[k] == dec)
            memcpy(at, src + t.offset[k], dec);
        else
            rc = lz4_block(src + t.offset[k], t.csize[k], at, dec, "lz4", k, d);
    }
    faid_block_table_free(&t);
    return rc;
}

int faid_lz4raw_decode(const uint8_t *src, size_t len, void *dst, size_t dst_len, faid_diag *d)
{
    if (len > INT32_MAX || dst_len > INT32_MAX)
        return faid_fail(d, FAID_EUNSUP, "lz4-raw: chunks over 2 GiB are not supported");
    if (len == 0)
        return faid_fail(d, FAID_ETRUNC, "lz4-raw: empty chunk");
    int got = LZ4_decompress_safe((const char *)src, dst, (int)len, (int)dst_len);
    if (got < 0)
        return faid_fail(d, FAID_ECORRUPT,
                         "lz4-raw: corrupt LZ4 data or it decodes to more than %zu bytes", dst_len);
    if ((size_t)got != dst_len)
        return faid_fail(d, FAID_ESIZE, "lz4-raw: chunk decodes to %d bytes, expected %zu", got,
                         dst_len);
    return FAID_OK;
}

int faid_decode(faid_encoding enc, const uint8_t *src, size_t len, size_t elem_size, void *dst,
                size_t dst_len, faid_diag *d)
{
    switch (enc) {
    case FAID_ENC_NONE:
        if (len != dst_len)
            return faid_fail(d, FAID_ESIZE, "uncompressed chunk has %zu bytes, expected %zu", len,
                             dst_len);
        if (len)
            memcpy(dst, src, len);
        return FAID_OK;
    case FAID_ENC_BSLZ4:
        return faid_bslz4_decode(src, len, elem_size, dst, dst_len, d);
    case FAID_ENC_LZ4:
        return faid_lz4h5_decode(src, len, dst, dst_len, d);
    case FAID_ENC_LZ4_RAW:
        return faid_lz4raw_decode(src, len, dst, dst_len, d);
    }
    return faid_fail(d, FAID_EINVAL, "unknown encoding %d", (int)enc);
}

size_t faid_bslz4_bound(size_t nbytes, size_t elem_size, size_t block_elems)
{
    if (elem_size == 0)
        return 0;
    uint64_t bs = block_elems ? block_elems : faid_bslz4_default_block_elems(elem_size);
    uint64_t n = nbytes / elem_size;
    uint64_t nb = n / bs + 1;
    return (size_t)(12 + nb * (4 + lz4_bound(bs * elem_size)) + 8 * elem_size);
}

int faid_bslz4_encode(const void *src, size_t nbytes, size_t elem_size, size_t block_elems,
                      uint8_t *dst, size_t cap, size_t *out_len, faid_diag *d)
{
    if (elem_size == 0 || elem_size > FAID_BSLZ4_MAX_ELEM)
        return faid_fail(d, FAID_EINVAL, "bslz4 encode: element size %zu is not supported",
                         elem_size);
    if (nbytes % elem_size)
        return faid_fail(d, FAID_EINVAL,
                         "bslz4 encode: %zu bytes is not a multiple of the element size %zu",
                         nbytes, elem_size);
    uint64_t bs = block_elems ? block_elems : faid_bslz4_default_block_elems(elem_size);
    if (bs % 8 || bs * elem_size > INT32_MAX / 2 || bs * elem_size > UINT32_MAX)
        return faid_fail(d, FAID_EINVAL,
                         "bslz4 encode: block of %llu elements is not a multiple of 8 or too large",
                         (unsigned long long)bs);
    if (cap < 12)
        return faid_fail(d, FAID_ESIZE, "bslz4 encode: output buffer too small");
    const uint8_t *in = src;
    uint64_t n = nbytes / elem_size;
    uint64_t nfull = n / bs;
    uint64_t m8 = (n % bs) & ~(uint64_t)7;
    uint64_t tail = (n % 8) * elem_size;
    put_be64(dst, nbytes);
    put_be32(dst + 8, (uint32_t)(bs * elem_size));
    size_t pos = 12;
    uint8_t *tmp = malloc(bs * elem_size + 1);
    if (!tmp)
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    int rc = FAID_OK;
    for (uint64_t k = 0; k < nfull + (m8 > 0); k++) {
        uint64_t ne = k < nfull ? bs : m8;
        int sz = (int)(ne * elem_size);
        faid_bitshuffle(in + k * bs * elem_size, tmp, ne, elem_size);
        if (cap - pos < 4 + lz4_bound((uint64_t)sz)) {
            rc = faid_fail(d, FAID_ESIZE, "bslz4 encode: output buffer too small");
            break;
        }
        int c = LZ4_compress_default((const char *)tmp, (char *)dst + pos + 4, sz,
                                     (int)lz4_bound((uint64_t)sz));
        if (c <= 0) {
            rc = faid_fail(d, FAID_EINVAL, "bslz4 encode: LZ4 compression failed");
            break;
        }
        put_be32(dst + pos, (uint32_t)c);
        pos += 4 + (size_t)c;
    }
    free(tmp);
    if (rc)
        return rc;
    if (cap - pos < tail)
        return faid_fail(d, FAID_ESIZE, "bslz4 encode: output buffer too small");
    memcpy(dst + pos, in + nbytes - tail, tail);
    *out_len = pos + tail;
    return FAID_OK;
}

size_t faid_lz4h5_bound(size_t nbytes, size_t block_bytes)
{
    uint64_t bs = block_bytes ? block_bytes : FAID_LZ4H5_DEFAULT_BLOCK;
    if (bs > nbytes)
        bs = nbytes ? nbytes : 1;
    uint64_t nb = (nbytes + bs - 1) / bs;
    return (size_t)(12 + nb * 4 + nbytes + nb * (bs / 255 + 16));
}

int faid_lz4h5_encode(const void *src, size_t nbytes, size_t block_bytes, uint8_t *dst, size_t cap,
                      size_t *out_len, faid_diag *d)
{
    uint64_t bs = block_bytes ? block_bytes : FAID_LZ4H5_DEFAULT_BLOCK;
    if (bs > nbytes)
        bs = nbytes;
    if (bs > LZ4_MAX_INPUT_SIZE)
        return faid_fail(d, FAID_EINVAL, "lz4 encode: block of %llu bytes is too large",
                         (unsigned long long)bs);
    if (cap < 12)
        return faid_fail(d, FAID_ESIZE, "lz4 encode: output buffer too small");
    put_be64(dst, nbytes);
    put_be32(dst + 8, (uint32_t)bs);
    const uint8_t *in = src;
    size_t pos = 12;
    for (uint64_t off = 0; off < nbytes; off += bs) {
        int sz = (int)(nbytes - off < bs ? nbytes - off : bs);
        if (cap - pos < 4 + (size_t)sz)
            return faid_fail(d, FAID_ESIZE, "lz4 encode: output buffer too small");
        int room = (int)(cap - pos - 4 < lz4_bound((uint64_t)sz) ? cap - pos - 4
                                                                 : lz4_bound((uint64_t)sz));
        int c = LZ4_compress_default((const char *)in + off, (char *)dst + pos + 4, sz, room);
        /* Like the HDF5 filter: a block that does not shrink is stored as it is. */
        if (c <= 0 || c >= sz) {
            c = sz;
            memcpy(dst + pos + 4, in + off, (size_t)sz);
        }
        put_be32(dst + pos, (uint32_t)c);
        pos += 4 + (size_t)c;
    }
    *out_len = pos;
    return FAID_OK;
}
