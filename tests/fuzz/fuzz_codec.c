/* Fuzz target for the chunk parsers and CPU decoders of faid_codec: the bslz4 and HDF5-LZ4 block
 * table parsers and every decoder (bslz4, lz4, lz4-raw, none) get arbitrary bytes.
 *
 * Input layout: byte 0 selects the element size (bits 0-1: 1, 2, 4, 8) and the encoding tried
 * first (bits 2-3); byte 1 scales the decoded size given to the raw LZ4 decoder; the rest is the
 * chunk. The decoded size for the framed encodings comes from the chunk's own header when it is
 * small (to reach the block decoders), else a small wrong size (to reach the size checks). */
#include "faid_codec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_OUT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const size_t esz[] = {1, 2, 4, 8};
    size_t e = esz[data[0] & 3];
    faid_encoding first = (faid_encoding)((data[0] >> 2) & 3);
    size_t raw_out = ((size_t)data[1] + 1) * 64;
    const uint8_t *chunk = data + 2;
    size_t len = size - 2;

    size_t out_len = 64;
    uint64_t total = 0;
    uint32_t bbytes = 0;
    if (faid_bslz4_header(chunk, len, &total, &bbytes, NULL) == 0 && total <= FUZZ_MAX_OUT)
        out_len = (size_t)total;
    uint8_t *out = malloc(out_len + raw_out + 1);
    if (!out)
        return 0;

    faid_block_table t;
    if (faid_block_table_alloc(&t, 4096, NULL) == 0) {
        faid_diag d;
        if (faid_bslz4_table(chunk, len, e, 0, &t, &d) == 0 && t.nblocks) {
            /* The table must describe the chunk without leaving it. */
            for (uint32_t k = 0; k < t.nblocks; k++)
                if (t.offset[k] > len || t.csize[k] > len - t.offset[k])
                    abort();
            if (t.tail_offset + t.tail_bytes != len)
                abort();
        }
        faid_lz4h5_table(chunk, len, 0, &t, &d);
        faid_block_table_free(&t);
    }
    faid_diag d;
    faid_decode(first, chunk, len, e, out, first == FAID_ENC_LZ4_RAW ? raw_out : out_len, &d);
    faid_bslz4_decode(chunk, len, e, out, out_len, &d);
    faid_lz4h5_decode(chunk, len, out, out_len, &d);
    faid_lz4raw_decode(chunk, len, out, raw_out, &d);
    faid_decode(FAID_ENC_NONE, chunk, len, e, out, out_len, &d);
    free(out);
    return 0;
}
