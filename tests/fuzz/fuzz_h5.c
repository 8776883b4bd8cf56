/* Fuzz target for `faidctl replay --h5` (client/faidctl_h5.c): the input is written as a file and
 * read the way replay reads it (in this process: faidctl_h5_read_here, which replay's reader
 * runs in a child process), once with the default dataset search (/entry/data/data, then an
 * EIGER master file's data_NNNNNN) and once naming /entry/data/data_000001. Any file must give 0
 * or an error code with a message, never a crash, hang, leak or unbounded allocation; every HDF5
 * object faid opens must be closed again (no identifier left open), and what a successful read
 * hands out must be consistent (n payloads, each non-empty, a frame shape within bounds, and
 * for a faid hits file one frame id per payload). The corpus holds hits files written by the
 * hits-file module (writer/faid_nxmx.c: bslz4, lz4, lz4-raw chunks with frame ids) and variants
 * with fewer ids than frames or ids of the wrong kind.
 *
 * libhdf5 itself is not instrumented (a Debian build): coverage feedback comes from faid's
 * reader, and a crash inside libhdf5 on a malformed file is reported as one, like any other. */
#include "faidctl_h5.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FAID_HAVE_HDF5
#include <hdf5.h>
#endif

static char path[64];

/* libhdf5 1.10 does not free everything it allocated while failing to open some malformed files
 * (a leak inside the library, with no identifier left open; the check below catches faid's own):
 * the leak checker ignores what libhdf5's code allocated. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libhdf5\n";
}

static void check(int rc, const faid_diag *d, const faidctl_h5 *h)
{
    if (rc != 0) {
        if (rc > 0 || d->code != rc || d->msg[0] == '\0')
            abort();
        if (h->n != 0 || h->data || h->len || h->frame_id || h->has_frame_ids)
            abort(); /* an error frees what was read */
        return;
    }
    if (h->n == 0 || !h->data || !h->len || h->rows <= 0 || h->cols <= 0 || h->rows > 65536 ||
        h->cols > 65536)
        abort();
    for (uint64_t k = 0; k < h->n; k++)
        if (!h->data[k] || h->len[k] == 0)
            abort();
    if (!h->has_frame_ids != !h->frame_id)
        abort(); /* a hits file's frame ids: one per frame handed out, or none */
    volatile uint64_t sum = 0;
    for (uint64_t k = 0; h->frame_id && k < h->n; k++)
        sum += h->frame_id[k]; /* each readable (ASan) */
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        /* tmpfs when there is one: each input is written, opened and read. */
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof(path), "%s/faid-fuzz-h5-%d.h5", dir, (int)getpid());
        setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 0;
    size_t at = 0;
    while (at < size) {
        ssize_t w = write(fd, data + at, size - at);
        if (w <= 0)
            break;
        at += (size_t)w;
    }
    close(fd);
    const char *datasets[] = {NULL, "/entry/data/data_000001"};
    for (int k = 0; k < 2; k++) {
        faidctl_h5 h;
        faid_diag d;
        faid_diag_clear(&d);
        int rc = faidctl_h5_read_here(path, datasets[k], &h, &d);
        check(rc, &d, &h);
        faidctl_h5_free(&h);
#ifdef FAID_HAVE_HDF5
        if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0)
            abort(); /* an HDF5 object left open */
#endif
    }
    return 0;
}
