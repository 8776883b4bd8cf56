/* faid_codec: CPU reference codecs for detector chunks and the block table the GPU decoder uses.
 *
 * Encodings:
 *   FAID_ENC_NONE     raw little-endian elements
 *   FAID_ENC_BSLZ4    bitshuffle-LZ4 as HDF5 filter 32008 / DECTRIS "bslz4" writes it: 12-byte
 *                     big-endian header (total bytes u64, block bytes u32), per block a u32 BE
 *                     compressed length + raw LZ4 block of a bit-shuffled block, raw tail of
 *                     (n mod 8) elements
 *   FAID_ENC_LZ4      HDF5-LZ4 framing (DECTRIS v2 "lz4"): 12-byte BE header, per block u32 BE
 *                     length + LZ4 block, a block whose length equals its decoded size is raw
 *   FAID_ENC_LZ4_RAW  one raw LZ4 block, decoded size known (DECTRIS v1 "lz4<")
 *
 * Block counts: a bslz4 chunk of n elements with header block size bs elements holds n / bs full
 * blocks, then one partial block of (n mod bs) rounded down to a multiple of 8 elements when that
 * is not 0, then (n mod 8) x E raw tail bytes. An HDF5-LZ4 chunk holds ceil(total / B) blocks of
 * B = min(header block size, total) bytes, the last one shorter.
 *
 * Every decoder validates against the expected decoded size and fails with FAID_ECORRUPT /
 * FAID_ETRUNC / FAID_ESIZE and a message; no input can make it read or write out of bounds. */
#ifndef FAID_CODEC_H
#define FAID_CODEC_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    FAID_ENC_NONE = 0,
    FAID_ENC_BSLZ4,
    FAID_ENC_LZ4,
    FAID_ENC_LZ4_RAW,
} faid_encoding;

/* "none" | "bslz4" | "lz4" | "lz4-raw"; returns -1 on an unknown name. */
int faid_encoding_parse(const char *name, faid_encoding *out);
const char *faid_encoding_name(faid_encoding e);

/* Validated block table of one bslz4 (or HDF5-LZ4) chunk (algorithms.md §1.4). The arrays are
 * caller-owned with capacity `cap` entries; faid_bslz4_max_blocks() tells how many are needed. */
typedef struct faid_block_table {
    uint64_t total_bytes; /* decoded size from the header */
    uint32_t block_bytes; /* decoded size of a full block, from the header */
    uint32_t elem_size;
    uint32_t nblocks;     /* full blocks + at most one partial block */
    uint32_t last_bytes;  /* decoded size of the last block (== block_bytes when full) */
    uint64_t tail_offset; /* offset of the raw tail in the chunk */
    uint32_t tail_bytes;  /* (n_elem mod 8) * elem_size for bslz4, 0 for lz4 */
    uint32_t cap;
    uint32_t *offset; /* offset of block k's LZ4 data (after its 4-byte prefix) */
    uint32_t *csize;  /* compressed size of block k */
} faid_block_table;

/* Upper bound on the block count of a chunk that decodes to total_bytes when its header block
 * size is at least block_bytes (0 = the default 8192-byte block). A chunk with smaller blocks
 * than the table was sized for fails in the parsers with FAID_ESIZE and a message. */
uint32_t faid_bslz4_max_blocks(uint64_t total_bytes, size_t elem_size, uint32_t block_bytes);

/* Default bitshuffle block in elements: 8192 / E rounded down to a multiple of 8, at least 128
 * (2048 for E = 4). 0 for elem_size 0. */
uint64_t faid_bslz4_default_block_elems(size_t elem_size);

/* Default block of the HDF5 LZ4 filter (clamped to the chunk size when writing). */
#define FAID_LZ4H5_DEFAULT_BLOCK (1u << 30)

/* Allocates the arrays of t for cap blocks (t is overwritten); free with faid_block_table_free. */
int faid_block_table_alloc(faid_block_table *t, uint32_t cap, faid_diag *d);
void faid_block_table_free(faid_block_table *t);

/* Reads the 12-byte header common to the bslz4 and HDF5-LZ4 framings. */
int faid_bslz4_header(const uint8_t *src, size_t len, uint64_t *total_bytes, uint32_t *block_bytes,
                      faid_diag *d);

/* Parses and validates a bslz4 chunk header and block prefixes. expect_bytes is the decoded size
 * implied by shape x dtype (0 = take it from the header). */
int faid_bslz4_table(const uint8_t *src, size_t len, size_t elem_size, uint64_t expect_bytes,
                     faid_block_table *t, faid_diag *d);
/* Same for the HDF5-LZ4 framing. */
int faid_lz4h5_table(const uint8_t *src, size_t len, uint64_t expect_bytes, faid_block_table *t,
                     faid_diag *d);

/* Decoders: dst must hold exactly dst_len bytes, the expected decoded size. */
int faid_bslz4_decode(const uint8_t *src, size_t len, size_t elem_size, void *dst, size_t dst_len,
                      faid_diag *d);
/* Largest decoded size of one block of t (0 without blocks): at most t->total_bytes, even when
 * the header claims a block size far beyond the chunk's decoded size. */
uint32_t faid_block_table_max_block(const faid_block_table *t);
/* Decodes a chunk whose table faid_bslz4_table already built (no allocation: scratch holds
 * faid_block_table_max_block(t) bytes). */
int faid_bslz4_decode_table(const uint8_t *src, const faid_block_table *t, void *dst,
                            size_t dst_len, void *scratch, faid_diag *d);
int faid_lz4h5_decode(const uint8_t *src, size_t len, void *dst, size_t dst_len, faid_diag *d);
int faid_lz4raw_decode(const uint8_t *src, size_t len, void *dst, size_t dst_len, faid_diag *d);
/* Dispatch on the encoding. */
int faid_decode(faid_encoding enc, const uint8_t *src, size_t len, size_t elem_size, void *dst,
                size_t dst_len, faid_diag *d);

/* Bit-(un)shuffle of one block of n elements (n a multiple of 8), as bitshuffle defines it. */
void faid_bitshuffle(const void *in, void *out, size_t n, size_t elem_size);
void faid_bitunshuffle(const void *in, void *out, size_t n, size_t elem_size);

/* Encoders (for faidctl replay and the tests). block_elems 0 = the default (8192 bytes per block
 * for element sizes 1, 2, 4, 8). Bound first, then encode into dst of capacity cap. */
size_t faid_bslz4_bound(size_t nbytes, size_t elem_size, size_t block_elems);
int faid_bslz4_encode(const void *src, size_t nbytes, size_t elem_size, size_t block_elems,
                      uint8_t *dst, size_t cap, size_t *out_len, faid_diag *d);
size_t faid_lz4h5_bound(size_t nbytes, size_t block_bytes);
int faid_lz4h5_encode(const void *src, size_t nbytes, size_t block_bytes, uint8_t *dst, size_t cap,
                      size_t *out_len, faid_diag *d);

#endif
