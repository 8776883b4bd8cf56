/* faidctl_h5: frames of an EIGER / NeXus HDF5 file for `faidctl replay --h5`. Each frame's chunk
 * is read as stored with libhdf5's direct chunk read (H5Dread_chunk): bitshuffle-LZ4 chunks
 * (filter 32008 with LZ4) become bslz4 payloads and HDF5-LZ4 chunks (filter 32004) lz4 payloads
 * without ever being decompressed; an unfiltered dataset is sent raw. Datasets whose chunks are
 * not one frame each, or whose filters faid does not take, are read through H5Dread (libhdf5 and
 * its plugins decode) and sent uncompressed.
 *
 * Which dataset: --dataset PATH, else /entry/data/data, else the EIGER master file's
 * /entry/data/data_000001, data_000002, ... (external links to the data files) in order. The
 * geometry a DECTRIS start message states is read from /entry/instrument/detector (beam_center_x,
 * beam_center_y in pixels, detector_distance, x_pixel_size, y_pixel_size in m) and
 * /entry/instrument/beam/incident_wavelength (angstrom) when present.
 *
 * Frame ids: a dataset `frame_id` beside the frames (faid's hits files: /entry/data/frame_id, one
 * unsigned integer per frame) gives each frame its original id; when it holds fewer ids than
 * there are frames (a file read while it is written), only the frames with an id are read. A
 * hits-file chunk stored unfiltered under the LZ4 filter (filter mask 1: the raw LZ4 block that
 * was as long as its pixels) is sent as an HDF5-LZ4 chunk of one stored block. */
#ifndef FAIDCTL_H5_H
#define FAIDCTL_H5_H

#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faidctl_h5 {
    int rows, cols;
    faid_dtype dtype;
    faid_encoding encoding; /* of every payload: BSLZ4, LZ4 or NONE */
    uint64_t n;             /* frames */
    uint8_t **data;         /* n payloads, each malloc'ed */
    size_t *len;
    int direct;        /* 1: chunks as stored; 0: decoded by libhdf5 */
    char dataset[256]; /* the (first) dataset read */
    int ndatasets;
    int has_geometry;                    /* all of the geometry below was found */
    double beam_center_x, beam_center_y; /* pixels */
    double distance;                     /* m */
    double pixel_size_x, pixel_size_y;   /* m */
    double wavelength;                   /* angstrom */
    uint64_t *frame_id;                  /* n original frame ids, or NULL (the file has none) */
    int has_frame_ids;
} faidctl_h5;

/* Reads every frame of path (dataset: NULL = the defaults above) into h. The file is read by
 * libhdf5 in a child process: a malformed file on which libhdf5 crashes gives an error, never a
 * crash of the caller. */
int faidctl_h5_read(const char *path, const char *dataset, faidctl_h5 *h, faid_diag *d);
/* The same, in this process (the fuzz target: coverage is collected here). */
int faidctl_h5_read_here(const char *path, const char *dataset, faidctl_h5 *h, faid_diag *d);
void faidctl_h5_free(faidctl_h5 *h);

#endif
