/* faid_client_dectris: encoders of DECTRIS stream v1 and v2 messages, so that faidctl replay (and
 * tests) can stand in for a DECTRIS detector control unit. Written from the DECTRIS stream
 * specification, independently of faid's decoders (proto/faid_input_dectris*.c): the CBOR here is
 * produced by a small writer of its own (RFC 8949 heads), the v1 JSON parts by printf; only
 * constants (tag numbers, key names) are shared knowledge.
 *
 * v2: one CBOR item per message, tag 55799 first, map with "type" first. Images carry one channel
 * (tag 40 [[rows, cols], typed array tag 64/69/70/72/77/78/85 over the bytes, or over tag 56500
 * ["bslz4", element size, bytes] / ["lz4", 0, bytes]).
 * v1: dheader-1.0 (header_detail "basic": + the detector configuration part), dimage-1.0 +
 * dimage_d-1.0 + blob + dconfig-1.0, dseries_end-1.0; shapes [width, height]. */
#ifndef FAID_CLIENT_DECTRIS_H
#define FAID_CLIENT_DECTRIS_H

#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

/* What a series' messages say about it. */
typedef struct faid_dectris_series {
    uint64_t series_id;
    const char *series_unique_id; /* v2; NULL or "" = none */
    int rows, cols;
    faid_dtype dtype;
    int64_t nimages;
    const char *channel; /* v2 channel name; NULL = "threshold_1" */
    /* Geometry for the start message (has_geometry = 0: none sent). */
    int has_geometry;
    double beam_center_x, beam_center_y; /* pixels (x = columns, y = rows) */
    double distance;                     /* m */
    double wavelength;                   /* angstrom */
    double pixel_size_x, pixel_size_y;   /* m */
} faid_dectris_series;

/* The DECTRIS name of an encoding in each protocol, NULL when that protocol cannot carry it
 * (v2: none, bslz4, lz4; v1: none "<", lz4-raw "lz4<", bslz4 "bsNN-lz4<"). */
const char *faid_dectris1_encoding(faid_encoding e, faid_dtype t);
int faid_dectris2_carries(faid_encoding e);

/* v2 messages written into buf[cap]; FAID_ESIZE when it is too small. An image needs at most
 * faid_dectris2_image_bound(payload length) bytes. */
int faid_dectris2_start(const faid_dectris_series *s, uint8_t *buf, size_t cap, size_t *len,
                        faid_diag *d);
size_t faid_dectris2_image_bound(size_t payload_len);
int faid_dectris2_image(const faid_dectris_series *s, uint64_t image_id, faid_encoding e,
                        const void *payload, size_t payload_len, uint8_t *buf, size_t cap,
                        size_t *len, faid_diag *d);
int faid_dectris2_end(const faid_dectris_series *s, uint8_t *buf, size_t cap, size_t *len,
                      faid_diag *d);

/* v1 JSON parts as NUL-terminated text in the caller's buffers (cap bytes each; 1024 is ample).
 * Header: part 1 and the configuration part 2 (header_detail "basic"). Image: parts 1, 2 and 4
 * (the blob, part 3, is sent as it is); times in ns from the frame number and frame_time_ns. */
int faid_dectris1_header(const faid_dectris_series *s, char *p1, char *p2, size_t cap,
                         faid_diag *d);
int faid_dectris1_image(const faid_dectris_series *s, uint64_t frame, faid_encoding e,
                        size_t blob_len, uint64_t frame_time_ns, char *p1, char *p2, char *p4,
                        size_t cap, faid_diag *d);
int faid_dectris1_end(const faid_dectris_series *s, char *p1, size_t cap, faid_diag *d);

#endif
