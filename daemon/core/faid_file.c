/* faid_file: whole-file reads (see faid_file.h). */
#include "faid_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int faid_file_read(const char *path, uint8_t **out, size_t *len, faid_diag *d)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return faid_fail(d, FAID_EIO, "%s: cannot open: %s", path, strerror(errno));
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return faid_fail(d, FAID_EIO, "%s: cannot tell its size (not a regular file?)", path);
    }
    uint8_t *b = malloc((size_t)n + 1);
    if (!b) {
        fclose(f);
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory for %ld bytes", path, n);
    }
    size_t got = fread(b, 1, (size_t)n, f);
    int err = ferror(f);
    fclose(f);
    if (got != (size_t)n || err) {
        free(b);
        return faid_fail(d, FAID_EIO, "%s: short read (%zu of %ld bytes)", path, got, n);
    }
    b[n] = '\0';
    *out = b;
    *len = (size_t)n;
    return FAID_OK;
}
