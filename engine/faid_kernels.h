/* faid_kernels: the OpenCL sources of kernels/ embedded at build time (cmake/embed_kernels.cmake).
 * When the environment variable FAID_KERNEL_DIR names a folder, sources are read from there
 * instead, so kernels can be edited without rebuilding while developing. */
#ifndef FAID_KERNELS_H
#define FAID_KERNELS_H

#include <stddef.h>

typedef struct faid_kernel_source {
    const char *name; /* path relative to kernels/, e.g. "codec/bslz4.cl" */
    const char *text;
    size_t len;
} faid_kernel_source;

/* Terminated by an entry with name NULL. */
extern const faid_kernel_source faid_kernel_sources[];

#endif
