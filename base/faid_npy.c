/* faid_npy: .npy reader and writer (see faid_npy.h). The header is a Python dict literal; this
 * parser accepts exactly what numpy writes ('descr', 'fortran_order', 'shape' in any order) and
 * rejects everything else with a message naming the file. */
#include "faid_npy.h"

#include "faid_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

void faid_array_free(faid_array *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* Finds the value text after 'key': in the header dict. */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static void byteswap(void *data, size_t count, size_t size)
{
    uint8_t *b = data;
    for (size_t i = 0; i < count; i++, b += size)
        for (size_t k = 0; k < size / 2; k++) {
            uint8_t t = b[k];
            b[k] = b[size - 1 - k];
            b[size - 1 - k] = t;
        }
}

int faid_npy_parse(const void *buf, size_t len, const char *what, faid_array *out, faid_diag *d)
{
    const uint8_t *b = buf;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(b, MAGIC, 6) != 0)
        return faid_fail(d, FAID_EFORMAT, "%s: not a .npy file (bad magic)", what);
    size_t hlen, hstart;
    if (b[6] == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (b[6] == 2 || b[6] == 3) {
        if (len < 12)
            return faid_fail(d, FAID_ETRUNC, "%s: truncated .npy header", what);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        return faid_fail(d, FAID_EFORMAT, "%s: unsupported .npy version %d", what, b[6]);
    }
    if (hlen > 65536 || hstart + hlen > len)
        return faid_fail(d, FAID_ETRUNC, "%s: truncated .npy header", what);
    char hdr[65537];
    memcpy(hdr, b + hstart, hlen);
    hdr[hlen] = '\0';

    const char *v = dict_value(hdr, "descr");
    if (!v || *v != '\'')
        return faid_fail(d, FAID_EFORMAT, "%s: .npy header has no 'descr'", what);
    char descr[16] = {0};
    size_t k = 0;
    for (v++; *v && *v != '\'' && k < sizeof descr - 1; v++)
        descr[k++] = *v;
    int big = descr[0] == '>';
    faid_dtype t = faid_dtype_parse(big ? descr + 1 : descr);
    if (t == FAID_DT_INVALID)
        return faid_fail(d, FAID_EDTYPE, "%s: unsupported .npy dtype '%s'", what, descr);

    v = dict_value(hdr, "fortran_order");
    if (!v)
        return faid_fail(d, FAID_EFORMAT, "%s: .npy header has no 'fortran_order'", what);
    if (strncmp(v, "True", 4) == 0)
        return faid_fail(d, FAID_EUNSUP,
                         "%s: Fortran-ordered .npy arrays are not supported "
                         "(save with numpy.ascontiguousarray)",
                         what);

    v = dict_value(hdr, "shape");
    if (!v || *v != '(')
        return faid_fail(d, FAID_EFORMAT, "%s: .npy header has no 'shape'", what);
    v++;
    int ndim = 0;
    size_t count = 1;
    while (*v && *v != ')') {
        while (*v == ' ' || *v == ',')
            v++;
        if (*v == ')')
            break;
        if (!isdigit((unsigned char)*v))
            return faid_fail(d, FAID_EFORMAT, "%s: bad .npy shape", what);
        if (ndim == FAID_NPY_MAXDIM)
            return faid_fail(d, FAID_EUNSUP,
                             "%s: .npy arrays of more than %d dimensions are "
                             "not supported",
                             what, FAID_NPY_MAXDIM);
        errno = 0;
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || n > ((size_t)1 << 40))
            return faid_fail(d, FAID_EFORMAT, "%s: bad .npy shape", what);
        out->shape[ndim++] = (size_t)n;
        /* Checked before multiplying: two dimensions of 2^40 wrapped the count to 0, which
         * passed the size check with a shape that promised 2^80 elements (fuzz_npy). */
        if (n && count > ((size_t)1 << 40) / n)
            return faid_fail(d, FAID_EFORMAT, "%s: .npy array too large", what);
        count *= (size_t)n;
        v = end;
    }
    size_t esize = faid_dtype_size(t);
    size_t need = count * esize;
    size_t data_off = hstart + hlen;
    if (len - data_off < need)
        return faid_fail(d, FAID_ETRUNC, "%s: .npy data truncated (%zu of %zu bytes)", what,
                         len - data_off, need);
    out->data = malloc(need ? need : 1);
    if (!out->data)
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory for %zu bytes", what, need);
    memcpy(out->data, b + data_off, need);
    if (big && esize > 1)
        byteswap(out->data, count, esize);
    out->dtype = t;
    out->ndim = ndim;
    out->count = count;
    return FAID_OK;
}

int faid_npy_read(const char *path, faid_array *out, faid_diag *d)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    int rc = faid_file_read(path, &buf, &len, d);
    if (rc)
        return rc;
    rc = faid_npy_parse(buf, len, path, out, d);
    free(buf);
    return rc;
}

int faid_npy_write(const char *path, faid_dtype dtype, int ndim, const size_t *shape,
                   const void *data, faid_diag *d)
{
    static const char *const descr[] = {
        [FAID_DT_U8] = "|u1",  [FAID_DT_U16] = "<u2", [FAID_DT_U32] = "<u4",  [FAID_DT_I8] = "|i1",
        [FAID_DT_I16] = "<i2", [FAID_DT_I32] = "<i4", [FAID_DT_F32] = "<f4",  [FAID_DT_F64] = "<f8",
        [FAID_DT_U64] = "<u8", [FAID_DT_I64] = "<i8", [FAID_DT_BOOL] = "|b1",
    };
    if (dtype <= FAID_DT_INVALID || dtype > FAID_DT_BOOL || ndim < 0 || ndim > FAID_NPY_MAXDIM)
        return faid_fail(d, FAID_EINVAL, "%s: cannot write this array type", path);
    char shp[128] = "";
    size_t count = 1, off = 0;
    for (int i = 0; i < ndim; i++) {
        off += (size_t)snprintf(shp + off, sizeof shp - off, "%zu%s", shape[i],
                                ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
        count *= shape[i];
    }
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr[dtype], shp);
    /* Pad with spaces so that magic + length + header + '\n' is a multiple of 64. */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return faid_fail(d, FAID_EIO, "%s: cannot create: %s", path, strerror(errno));
    uint16_t hlen = (uint16_t)(n + pad + 1);
    uint8_t pre[10];
    memcpy(pre, MAGIC, 6);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (uint8_t)(hlen & 0xff);
    pre[9] = (uint8_t)(hlen >> 8);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n;
    for (int i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    size_t nbytes = count * faid_dtype_size(dtype);
    ok = ok && (nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes);
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return faid_fail(d, FAID_EIO, "%s: write failed: %s", path, strerror(errno));
    return FAID_OK;
}
