/* Fuzz target for the .npy reader (masks, dark and flat fields, faidctl process frames): any byte
 * sequence gives 0 or an error whose message names the file, never a crash, hang, leak or an
 * array whose shape and data disagree. On success the element count must equal the product of
 * the shape (computed here with overflow checks), the data must hold count elements of a valid
 * dtype, and writing the array back and parsing it again must give the same array. */
#include "faid_npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_roundtrip(const faid_array *a)
{
    /* Only small arrays: the point is the header, not the disk. */
    size_t nbytes = a->count * faid_dtype_size(a->dtype);
    if (nbytes > 4096 || a->dtype == FAID_DT_INVALID)
        return;
    char path[] = "/tmp/faid_fuzz_npy_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return;
    close(fd);
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_npy_write(path, a->dtype, a->ndim, a->shape, a->data, &d) == 0) {
        faid_array b;
        if (faid_npy_read(path, &b, &d) != 0 || b.dtype != a->dtype || b.ndim != a->ndim ||
            b.count != a->count || memcmp(b.shape, a->shape, sizeof a->shape) != 0 ||
            (nbytes && memcmp(b.data, a->data, nbytes) != 0))
            abort();
        faid_array_free(&b);
    }
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    faid_array a;
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_npy_parse(data, size, "fuzz.npy", &a, &d);
    if (rc != 0) {
        if (d.msg[0] == '\0' || strncmp(d.msg, "fuzz.npy", 8) != 0)
            abort();
        return 0;
    }
    if (a.ndim < 0 || a.ndim > FAID_NPY_MAXDIM || a.dtype == FAID_DT_INVALID || !a.data)
        abort();
    size_t count = 1;
    for (int i = 0; i < a.ndim; i++) {
        if (a.shape[i] && count > SIZE_MAX / a.shape[i])
            abort(); /* a shape whose product overflows was accepted */
        count *= a.shape[i];
    }
    size_t esize = faid_dtype_size(a.dtype);
    if (count != a.count || esize == 0 || (count && count > (size - 10) / esize))
        abort();
    /* Every byte of the data is readable (ASan checks the bounds). */
    volatile uint8_t sink = 0;
    const uint8_t *p = a.data;
    for (size_t i = 0; i < count * esize; i++)
        sink ^= p[i];
    (void)sink;
    check_roundtrip(&a);
    faid_array_free(&a);
    return 0;
}
