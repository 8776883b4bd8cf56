/* faid_h5: the small HDF5 helpers every file faid writes stands on (writer/: the library
 * faidwriter, shared by the daemon's writer and `faidctl process`, so that a series reduced live
 * and re-reduced offline go through the same code).
 *
 * Files are created exclusively (never overwriting: H5F_ACC_EXCL) with the 1.10 file format, the
 * oldest one HDF5's single-writer / multiple-reader mode (SWMR) accepts; a caller that wants
 * readers to follow the file live switches it to SWMR with H5Fstart_swmr_write once every group
 * and dataset exists. HDF5's own error stack printing is turned off once per process
 * (faid_h5_quiet): a failure is reported through faid_diag with the file it concerns. */
#ifndef FAID_H5_H
#define FAID_H5_H

#include <hdf5.h>
#include <stddef.h>

#include "faid_err.h"

/* Silences HDF5's automatic error printing and, when it comes before any other use of libhdf5,
 * turns off libhdf5's clean-up at exit (H5dont_atexit: see faid_h5.c). Thread-safe to call
 * repeatedly. */
void faid_h5_quiet(void);

/* Creates `path` exclusively (fails with FAID_EIO naming the path if it exists or cannot be
 * created) with libver bounds [1.10, latest]. Returns the file id (>= 0) or a negative faid
 * code with d filled. */
hid_t faid_h5_create(const char *path, faid_diag *d);

/* A UTF-8 string attribute, variable-length as h5py writes them, so that h5py hands readers a
 * str: pyFAI's Nexus reader calls str methods on `default` (with a fixed-size string it got bytes
 * and failed: "startswith first arg must be bytes", tests/integration/test_writer.py).
 * 0 or FAID_EIO. */
int faid_h5_attr_str(hid_t obj, const char *name, const char *value);

/* A string dataset (scalar, fixed-size UTF-8 string) in group `loc`. 0 or FAID_EIO. */
int faid_h5_dset_str(hid_t loc, const char *name, const char *value);

/* A numeric dataset in `loc` of file type `ftype`: a scalar (rank 0; n unused) or a vector of n
 * elements (rank 1), written from v (memory type mtype) unless v is NULL, with a `units`
 * attribute unless units is NULL. Every fixed-size dataset of the series and hits files is one.
 * Returns the dataset id (the caller closes it) or FAID_EIO. */
hid_t faid_h5_dset(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, hsize_t n,
                   const void *v, const char *units);

/* An extendible dataset [0, inner...] of `rank` dimensions in all (1 to 3; inner holds rank - 1
 * sizes), chunked by chunk_rows rows; rows never written read as *fill (file type `type`) when
 * fill is not NULL; chunks deflated (level 1) when deflate. The per-frame datasets of both files.
 * Returns the dataset id (the caller closes it) or FAID_EIO. */
hid_t faid_h5_growing(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *inner,
                      hsize_t chunk_rows, const void *fill, int deflate);

/* A group with its NX_class attribute. Returns the group id or a negative faid code. */
hid_t faid_h5_group(hid_t loc, const char *name, const char *nx_class);

#endif
