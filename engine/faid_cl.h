/* faid_cl: the OpenCL runtime shared by every GPU stage: device discovery and selection, one
 * context and in-order queue per device, program builds from the embedded kernels with -D
 * constants, and the single error path for cl* calls (FAID_CL_TRY / faid_cl_fail), which logs the
 * call, the code and its symbolic name.
 *
 * Device indices are the order of `faidctl devices`: platforms in ICD order, devices in platform
 * order. "auto" picks the first GPU, else the first CPU device (PoCL); "cpu" the first CPU device.
 */
#ifndef FAID_CL_H
#define FAID_CL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "faid_err.h"

#define FAID_CL_MAX_DEVICES 32

typedef struct faid_cl_device_info {
    int index;
    cl_platform_id platform;
    cl_device_id device;
    char platform_name[128];
    char name[256];
    char version[128];
    char driver[128];
    int is_gpu;
    int is_cpu;
    cl_ulong global_mem;
    cl_ulong local_mem;
    cl_uint compute_units;
    size_t max_wg;
    int has_fp64;
} faid_cl_device_info;

/* Lists every OpenCL device. *n receives the count (0 is not an error). */
int faid_cl_list(faid_cl_device_info *out, int cap, int *n, faid_diag *d);
/* spec: "auto" | "cpu" | "gpu" | decimal index. */
int faid_cl_select(const char *spec, faid_cl_device_info *out, faid_diag *d);

const char *faid_cl_errname(cl_int err);
/* Logs "call failed: CL_XXX (code) at file:line", records it in d, returns FAID_ECL. */
int faid_cl_fail(faid_diag *d, cl_int err, const char *call, const char *file, int line);

#define FAID_CL_TRY(d, call)                                                                       \
    do {                                                                                           \
        cl_int faid_cl_err_ = (call);                                                              \
        if (faid_cl_err_ != CL_SUCCESS)                                                            \
            return faid_cl_fail((d), faid_cl_err_, #call, __FILE__, __LINE__);                     \
    } while (0)

/* As FAID_CL_TRY but jumps to label after storing the faid code in rc. */
#define FAID_CL_TRY_GOTO(d, rc, label, call)                                                       \
    do {                                                                                           \
        cl_int faid_cl_err_ = (call);                                                              \
        if (faid_cl_err_ != CL_SUCCESS) {                                                          \
            (rc) = faid_cl_fail((d), faid_cl_err_, #call, __FILE__, __LINE__);                     \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct faid_cl_ctx {
    faid_cl_device_info info;
    cl_context context;
    cl_command_queue queue; /* in-order; profiling enabled when asked */
} faid_cl_ctx;

faid_cl_ctx *faid_cl_ctx_new(const faid_cl_device_info *dev, int profiling, faid_diag *d);
void faid_cl_ctx_destroy(faid_cl_ctx **ctx);

/* Returns the kernel source text by its name relative to kernels/ (FAID_KERNEL_DIR honoured).
 * The returned buffer is malloc'ed; the caller frees it. */
char *faid_cl_source(const char *name, size_t *len, faid_diag *d);

/* Builds a program from the named kernel files (concatenated in order) with the given options
 * (e.g. "-D ELEM_SIZE=4"). "-cl-std=CL1.2" is always added; fast-math options never are (the
 * compensated sums rely on IEEE arithmetic). On failure the build log goes to the log and d. */
int faid_cl_build(faid_cl_ctx *ctx, const char *const *names, int nnames, const char *options,
                  cl_program *out, faid_diag *d);

/* Creates a buffer; on failure returns NULL and fills d. */
cl_mem faid_cl_buffer(faid_cl_ctx *ctx, cl_mem_flags flags, size_t size, void *host, faid_diag *d);

#endif
