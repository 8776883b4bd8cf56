/* faid_file: whole-file reads for the small inputs faid takes from disk (.npy frames, compressed
 * chunks, kernel sources), with errors that name the file. */
#ifndef FAID_FILE_H
#define FAID_FILE_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

/* Reads path into a new buffer (*out, NUL-terminated one byte past *len; free() it). */
int faid_file_read(const char *path, uint8_t **out, size_t *len, faid_diag *d);

#endif
