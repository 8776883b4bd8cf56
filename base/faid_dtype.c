/* faid_dtype: type table and conversions (see faid_dtype.h). */
#include "faid_dtype.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

static const struct {
    faid_dtype t;
    size_t size;
    const char *name;
    const char *npy;
} table[] = {
    {FAID_DT_U8, 1, "uint8", "u1"},    {FAID_DT_U16, 2, "uint16", "u2"},
    {FAID_DT_U32, 4, "uint32", "u4"},  {FAID_DT_I8, 1, "int8", "i1"},
    {FAID_DT_I16, 2, "int16", "i2"},   {FAID_DT_I32, 4, "int32", "i4"},
    {FAID_DT_F32, 4, "float32", "f4"}, {FAID_DT_F64, 8, "float64", "f8"},
    {FAID_DT_U64, 8, "uint64", "u8"},  {FAID_DT_I64, 8, "int64", "i8"},
    {FAID_DT_BOOL, 1, "bool", "b1"},
};
#define NTYPES (sizeof table / sizeof table[0])

size_t faid_dtype_size(faid_dtype t)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (table[i].t == t)
            return table[i].size;
    return 0;
}

const char *faid_dtype_name(faid_dtype t)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (table[i].t == t)
            return table[i].name;
    return "invalid";
}

faid_dtype faid_dtype_parse(const char *name)
{
    if (!name)
        return FAID_DT_INVALID;
    if (name[0] == '<' || name[0] == '|' || name[0] == '=')
        name++;
    for (size_t i = 0; i < NTYPES; i++)
        if (strcasecmp(name, table[i].name) == 0 || strcmp(name, table[i].npy) == 0)
            return table[i].t;
    if (strcasecmp(name, "float") == 0)
        return FAID_DT_F32;
    if (strcasecmp(name, "double") == 0)
        return FAID_DT_F64;
    return FAID_DT_INVALID;
}

int faid_dtype_is_frame(faid_dtype t)
{
    return t == FAID_DT_U8 || t == FAID_DT_U16 || t == FAID_DT_U32 || t == FAID_DT_I8 ||
           t == FAID_DT_I16 || t == FAID_DT_I32 || t == FAID_DT_F32;
}

int faid_dtype_is_float(faid_dtype t)
{
    return t == FAID_DT_F32 || t == FAID_DT_F64;
}

#define CONVERT(OUT_T)                                                                             \
    switch (t) {                                                                                   \
    case FAID_DT_BOOL:                                                                             \
    case FAID_DT_U8:                                                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const uint8_t *)src)[i];                                             \
        break;                                                                                     \
    case FAID_DT_U16:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const uint16_t *)src)[i];                                            \
        break;                                                                                     \
    case FAID_DT_U32:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const uint32_t *)src)[i];                                            \
        break;                                                                                     \
    case FAID_DT_U64:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const uint64_t *)src)[i];                                            \
        break;                                                                                     \
    case FAID_DT_I8:                                                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const int8_t *)src)[i];                                              \
        break;                                                                                     \
    case FAID_DT_I16:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const int16_t *)src)[i];                                             \
        break;                                                                                     \
    case FAID_DT_I32:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const int32_t *)src)[i];                                             \
        break;                                                                                     \
    case FAID_DT_I64:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const int64_t *)src)[i];                                             \
        break;                                                                                     \
    case FAID_DT_F32:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const float *)src)[i];                                               \
        break;                                                                                     \
    case FAID_DT_F64:                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (OUT_T)((const double *)src)[i];                                              \
        break;                                                                                     \
    default:                                                                                       \
        memset(dst, 0, n * sizeof(OUT_T));                                                         \
    }

void faid_dtype_to_f64(faid_dtype t, const void *src, size_t n, double *dst)
{
    CONVERT(double)
}
void faid_dtype_to_f32(faid_dtype t, const void *src, size_t n, float *dst)
{
    CONVERT(float)
}
