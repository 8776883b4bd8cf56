/* faid_file: whole-file reads (see faid_file.h).
 *
 * Every file faid reads by name (configuration, .poni, mask, dark, flat, frames, kernels) goes
 * through here, and the daemon does it on the thread that also answers the control socket and
 * signals. So the open never waits (O_NONBLOCK: a FIFO would otherwise block in open() until a
 * writer appears, freezing control and SIGTERM), only regular files are read (fstat: a FIFO,
 * a device or a directory is refused with a message naming the path), and the size is known
 * and bounded before any allocation. */
#include "faid_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

int faid_file_read_max(const char *path, size_t max_bytes, uint8_t **out, size_t *len, faid_diag *d)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return faid_fail(d, FAID_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return faid_fail(d, FAID_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return faid_fail(d, FAID_EIO, "%s: is %s, expected a regular file", path,
                         kind_of(st.st_mode));
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)max_bytes ||
        (uint64_t)st.st_size >= (uint64_t)SIZE_MAX) {
        close(fd);
        return faid_fail(d, FAID_ESIZE, "%s: %lld bytes, more than the %zu bytes allowed here",
                         path, (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n + 1);
    if (!b) {
        close(fd);
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    /* The file may shrink under us (short read) or grow (ignored beyond its size at fstat). */
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            free(b);
            return faid_fail(d, FAID_EIO, "%s: short read (%zu of %zu bytes)%s%s", path, got, n,
                             e ? ": " : "", e ? strerror(e) : "");
        }
        got += (size_t)r;
    }
    close(fd);
    b[n] = '\0';
    *out = b;
    *len = n;
    return FAID_OK;
}

int faid_file_read(const char *path, uint8_t **out, size_t *len, faid_diag *d)
{
    return faid_file_read_max(path, SIZE_MAX - 1, out, len, d);
}
