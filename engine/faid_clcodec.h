/* faid_clcodec: host side of the OpenCL bitshuffle-LZ4 / HDF5-LZ4 decoder (kernels/codec/bslz4.cl).
 *
 * Division of labour with the engine:
 *   ingest (CPU)  faid_bslz4_table() (or faid_lz4h5_table()) parses and validates the chunk's
 *                 block table; faid_clcodec_supports() says whether this decoder can take it (block
 *                 size within the local buffer, element size of this decoder); faid_clcodec_pack_
 *                 table() writes the table in the device layout straight into pinned staging.
 *   engine        owns pinned staging, the device buffers and the H2D copies, zeroes the error
 *                 flag, then calls faid_clcodec_enqueue() (one kernel launch per chunk, all
 *                 blocks) and reads the flag back with the results.
 *
 * Device table layout (faid_clcodec_pack_table): a packed little-endian uint32 array of
 * 2 x nblocks entries, offsets then sizes:
 *     table[k]            byte offset in the chunk of block k's LZ4 data (after its 4-byte prefix)
 *     table[nblocks + k]  compressed length of block k
 * The remaining scalars (nblocks, block and last-block size, tail offset and length) travel as
 * kernel arguments taken from the faid_block_table.
 *
 * Error flag: a device int. 0 = every block decoded; k > 0 = block k-1 is corrupt (when several
 * are, one of them). It is never cleared by the kernel, so the engine zeroes it before each chunk
 * (clEnqueueFillBuffer, or a cleared slot in a results buffer). On error the content of dst is
 * undefined: the frame must be reported as a decode error, never used.
 *
 * Threading: a faid_clcodec belongs to one thread (kernel arguments are set per enqueue). Create
 * one per worker thread and element size; all share the device context. */
#ifndef FAID_CLCODEC_H
#define FAID_CLCODEC_H

#include "faid_cl.h"
#include "faid_codec.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faid_clcodec faid_clcodec;

/* Builds the decoder for elements of elem_size bytes (1, 2, 4 or 8; HDF5-LZ4 chunks ignore it)
 * and chunks that decode to at most max_decoded_bytes. The program is compiled once here with
 * BLOCK_CAP = 8192 (the default bitshuffle block, 8 KiB of local memory per work-group);
 * chunks with larger header block sizes get a second program on first use, when the device's
 * local memory allows it. Environment FAID_CLCODEC_WG overrides the work-group size (default
 * 32, one warp per block on NVIDIA, the fastest measured; clamped to the device) and
 * FAID_CLCODEC_DEFINES adds build options for tuning experiments (e.g. "-D CMP_LOCAL=1"; the
 * variants are described in bslz4.cl's header). With "-D DEC_GLOBAL=1" the bslz4 blocks are
 * decoded in device memory: the decoder then owns one scratch buffer per queue it launches on
 * (one decoded chunk, nblocks x the block size rounded up to 16 bytes; the queue must be
 * in-order), released by faid_clcodec_destroy.
 * Returns NULL with d filled on failure. */
faid_clcodec *faid_clcodec_new(faid_cl_ctx *ctx, size_t elem_size, size_t max_decoded_bytes,
                               faid_diag *d);
void faid_clcodec_destroy(faid_clcodec **c);

/* Work-group size in use. */
size_t faid_clcodec_wg(const faid_clcodec *c);

/* Whether a chunk with this validated table can be decoded here (element size, block size,
 * decoded size); otherwise FAID_EUNSUP / FAID_ESIZE with a message, and the caller falls back
 * to the CPU decoder. enc is FAID_ENC_BSLZ4 or FAID_ENC_LZ4. */
int faid_clcodec_supports(const faid_clcodec *c, faid_encoding enc, const faid_block_table *t,
                          faid_diag *d);

/* Bytes of the packed device table for t (8 x nblocks), and the packing itself into out. */
size_t faid_clcodec_table_bytes(const faid_block_table *t);
void faid_clcodec_pack_table(const faid_block_table *t, uint32_t *out);

/* Where the inputs and outputs of one chunk live on the device. Offsets allow one buffer to hold
 * several chunks, tables, frames or flags. */
typedef struct faid_clcodec_io {
    cl_mem chunk; /* compressed bytes, chunk byte 0 at chunk_offset (multiple of 4) */
    size_t chunk_offset;
    cl_mem table; /* packed table at byte table_offset (multiple of 4) */
    size_t table_offset;
    cl_mem dst; /* t->total_bytes decoded bytes at dst_offset (multiple of 8 x
                   elem_size; 64 always works) */
    size_t dst_offset;
    cl_mem err; /* int error flag at index err_index (zeroed by the caller) */
    size_t err_index;
} faid_clcodec_io;

/* Enqueues the decode of one chunk on queue (NULL = the context's queue): one kernel launch of
 * nblocks + 1 work-groups, after the nwait events in wait; *done (if not NULL) receives the
 * launch's event. The chunk bytes and the packed table must already be (or be enqueued to be) on
 * the device. enc is FAID_ENC_BSLZ4 or FAID_ENC_LZ4. Host-side failures (unsupported table,
 * OpenCL errors) return an error code and enqueue nothing. */
int faid_clcodec_enqueue_io(faid_clcodec *c, cl_command_queue queue, faid_encoding enc,
                            const faid_clcodec_io *io, const faid_block_table *t, cl_uint nwait,
                            const cl_event *wait, cl_event *done, faid_diag *d);

/* The common case: bslz4, everything at offset 0 of its buffer, the context's queue. */
int faid_clcodec_enqueue(faid_clcodec *c, cl_mem chunk, cl_mem table, const faid_block_table *t,
                         cl_mem dst, cl_mem err_flag, cl_uint nwait, const cl_event *wait,
                         cl_event *done, faid_diag *d);

/* Convenience for faidctl decode and the tests: parses the table, uploads chunk and table,
 * decodes, downloads into dst (dst_len = the expected decoded size) and checks the error flag
 * (FAID_ECORRUPT naming the block). Buffers are kept in c and grown as needed; blocking.
 * enc: FAID_ENC_BSLZ4 or FAID_ENC_LZ4; others return FAID_EUNSUP (CPU only). */
int faid_clcodec_decode_host(faid_clcodec *c, faid_encoding enc, const uint8_t *src, size_t len,
                             void *dst, size_t dst_len, faid_diag *d);

#endif
