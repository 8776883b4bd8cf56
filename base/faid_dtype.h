/* faid_dtype: element types of frames and auxiliary arrays, with their sizes and the names used in
 * configuration, protocol and .npy descriptors. */
#ifndef FAID_DTYPE_H
#define FAID_DTYPE_H

#include <stddef.h>

typedef enum {
    FAID_DT_INVALID = 0,
    FAID_DT_U8,
    FAID_DT_U16,
    FAID_DT_U32,
    FAID_DT_I8,
    FAID_DT_I16,
    FAID_DT_I32,
    FAID_DT_F32,
    FAID_DT_F64,
    FAID_DT_U64,
    FAID_DT_I64,
    FAID_DT_BOOL,
} faid_dtype;

size_t faid_dtype_size(faid_dtype t);
/* Short name: "uint8", "uint16", "uint32", "int8", "int16", "int32", "float32", "float64", ... */
const char *faid_dtype_name(faid_dtype t);
/* Accepts the short names and numpy-like spellings ("u2", "<u2", "uint16", "f4", "float"). */
faid_dtype faid_dtype_parse(const char *name);
/* True for the types a frame may have: uint8/16/32, int8/16/32, float32. */
int faid_dtype_is_frame(faid_dtype t);
int faid_dtype_is_float(faid_dtype t);

/* Converts n elements of type t at src to double / float. */
void faid_dtype_to_f64(faid_dtype t, const void *src, size_t n, double *dst);
void faid_dtype_to_f32(faid_dtype t, const void *src, size_t n, float *dst);

#endif
