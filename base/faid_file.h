/* faid_file: whole-file reads for the inputs faid takes from disk (configuration, .poni, .npy
 * masks, darks, flats and frames, compressed chunks, kernel sources), with errors that name the
 * file. Opening never blocks and only regular files are read: a FIFO, device or directory is an
 * error, so a path given to `reload` can never freeze the daemon's control thread. */
#ifndef FAID_FILE_H
#define FAID_FILE_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

/* Reads the regular file path into a new buffer (*out, NUL-terminated one byte past *len;
 * free() it). FAID_EIO (cannot open, not a regular file, read error) or FAID_ESIZE (larger than
 * max_bytes) with a message naming the path. */
int faid_file_read_max(const char *path, size_t max_bytes, uint8_t **out, size_t *len,
                       faid_diag *d);
/* The same without a size limit. */
int faid_file_read(const char *path, uint8_t **out, size_t *len, faid_diag *d);

#endif
