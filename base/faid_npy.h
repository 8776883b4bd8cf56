/* faid_npy: reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order,
 * little-endian or byte-order-free types. Big-endian arrays are byte-swapped on read; Fortran
 * order is rejected with a message. Used for frames, masks, dark and flat fields, and outputs. */
#ifndef FAID_NPY_H
#define FAID_NPY_H

#include "faid_dtype.h"
#include "faid_err.h"

#include <stddef.h>

#define FAID_NPY_MAXDIM 4

typedef struct faid_array {
    faid_dtype dtype;
    int ndim;
    size_t shape[FAID_NPY_MAXDIM];
    size_t count; /* product of shape */
    void *data;   /* count * faid_dtype_size(dtype) bytes, owned */
} faid_array;

/* Reads path into out (zero it first). Errors name the file. */
int faid_npy_read(const char *path, faid_array *out, faid_diag *d);
/* Parses an in-memory .npy image (the bytes are copied into out). */
int faid_npy_parse(const void *buf, size_t len, const char *what, faid_array *out, faid_diag *d);
int faid_npy_write(const char *path, faid_dtype dtype, int ndim, const size_t *shape,
                   const void *data, faid_diag *d);
void faid_array_free(faid_array *a);

#endif
