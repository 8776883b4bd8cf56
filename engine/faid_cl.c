/* faid_cl: OpenCL device discovery, contexts and program builds (see faid_cl.h). */
#include "faid_cl.h"

#include "faid_file.h"
#include "faid_kernels.h"
#include "faid_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *faid_cl_errname(cl_int err)
{
    switch (err) {
        // The table below is laid out by hand: clang-format 14 does not converge on it.
        // clang-format off
#define E(x) \
    case x:  \
        return #x;
        E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE)
        E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES)
        E(CL_OUT_OF_HOST_MEMORY) E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP)
        E(CL_IMAGE_FORMAT_MISMATCH) E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE)
        E(CL_MAP_FAILURE) E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) E(CL_COMPILE_PROGRAM_FAILURE)
        E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE) E(CL_DEVICE_PARTITION_FAILED)
        E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE)
        E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
        E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
        E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
        E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS)
        E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
        E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
        E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
        E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
        E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT)
        E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
        E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
        E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS) E(CL_INVALID_LINKER_OPTIONS)
        E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
            // clang-format on
            case -1001 : return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

int faid_cl_fail(faid_diag *d, cl_int err, const char *call, const char *file, int line)
{
    FAID_ERROR("opencl", "%s failed: %s (%d) at %s:%d", call, faid_cl_errname(err), (int)err, file,
               line);
    return faid_fail(d, FAID_ECL, "OpenCL call %s failed: %s (%d)", call, faid_cl_errname(err),
                     (int)err);
}

static void dev_string(cl_device_id dev, cl_device_info what, char *out, size_t cap)
{
    out[0] = '\0';
    if (clGetDeviceInfo(dev, what, cap, out, NULL) != CL_SUCCESS)
        out[0] = '\0';
    out[cap - 1] = '\0';
}

int faid_cl_list(faid_cl_device_info *out, int cap, int *n, faid_diag *d)
{
    *n = 0;
    cl_uint nplat = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &nplat);
    if (err == -1001 || nplat == 0)
        return FAID_OK; /* no ICD registered: no devices */
    if (err != CL_SUCCESS)
        return faid_cl_fail(d, err, "clGetPlatformIDs", __FILE__, __LINE__);
    cl_platform_id plats[16];
    if (nplat > 16)
        nplat = 16;
    FAID_CL_TRY(d, clGetPlatformIDs(nplat, plats, NULL));
    for (cl_uint p = 0; p < nplat; p++) {
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev) != CL_SUCCESS)
            continue;
        cl_device_id devs[FAID_CL_MAX_DEVICES];
        if (ndev > FAID_CL_MAX_DEVICES)
            ndev = FAID_CL_MAX_DEVICES;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ndev, devs, NULL) != CL_SUCCESS)
            continue;
        char pname[128] = "";
        clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        pname[sizeof pname - 1] = '\0';
        for (cl_uint i = 0; i < ndev && *n < cap; i++) {
            faid_cl_device_info *info = &out[*n];
            memset(info, 0, sizeof *info);
            info->index = *n;
            info->platform = plats[p];
            info->device = devs[i];
            snprintf(info->platform_name, sizeof info->platform_name, "%s", pname);
            dev_string(devs[i], CL_DEVICE_NAME, info->name, sizeof info->name);
            dev_string(devs[i], CL_DEVICE_VERSION, info->version, sizeof info->version);
            dev_string(devs[i], CL_DRIVER_VERSION, info->driver, sizeof info->driver);
            cl_device_type type = 0;
            clGetDeviceInfo(devs[i], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            info->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
            info->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
            clGetDeviceInfo(devs[i], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof info->global_mem,
                            &info->global_mem, NULL);
            clGetDeviceInfo(devs[i], CL_DEVICE_LOCAL_MEM_SIZE, sizeof info->local_mem,
                            &info->local_mem, NULL);
            clGetDeviceInfo(devs[i], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof info->compute_units,
                            &info->compute_units, NULL);
            clGetDeviceInfo(devs[i], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof info->max_wg,
                            &info->max_wg, NULL);
            cl_device_fp_config fp64 = 0;
            clGetDeviceInfo(devs[i], CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, NULL);
            info->has_fp64 = fp64 != 0;
            (*n)++;
        }
    }
    return FAID_OK;
}

int faid_cl_select(const char *spec, faid_cl_device_info *out, faid_diag *d)
{
    faid_cl_device_info all[FAID_CL_MAX_DEVICES];
    int n = 0;
    int rc = faid_cl_list(all, FAID_CL_MAX_DEVICES, &n, d);
    if (rc)
        return rc;
    if (n == 0)
        return faid_fail(d, FAID_ENODEV,
                         "no OpenCL device found (is an ICD such as "
                         "pocl-opencl-icd installed?)");
    int want_gpu = strcmp(spec, "auto") == 0 || strcmp(spec, "gpu") == 0;
    if (want_gpu || strcmp(spec, "cpu") == 0) {
        for (int i = 0; i < n; i++)
            if ((want_gpu && all[i].is_gpu) || (!want_gpu && all[i].is_cpu)) {
                *out = all[i];
                return FAID_OK;
            }
        if (strcmp(spec, "auto") == 0) {
            /* No GPU: the first CPU device, else the first device of any type (an
             * accelerator), the order `faidctl devices` marks as "auto". */
            for (int i = 0; i < n; i++)
                if (all[i].is_cpu) {
                    *out = all[i];
                    return FAID_OK;
                }
            *out = all[0];
            return FAID_OK;
        }
        return faid_fail(d, FAID_ENODEV, "no OpenCL %s device found", spec);
    }
    char *end;
    errno = 0;
    long idx = strtol(spec, &end, 10);
    if (errno || *end || end == spec)
        return faid_fail(d, FAID_EINVAL,
                         "device '%s': expected auto, cpu, gpu, ref or an index "
                         "from `faidctl devices`",
                         spec);
    if (idx < 0 || idx >= n)
        return faid_fail(d, FAID_ENODEV, "device %ld: only %d OpenCL device(s) present", idx, n);
    *out = all[idx];
    return FAID_OK;
}

faid_cl_ctx *faid_cl_ctx_new(const faid_cl_device_info *dev, int profiling, faid_diag *d)
{
    faid_cl_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        faid_fail(d, FAID_ENOMEM, "out of memory");
        return NULL;
    }
    c->info = *dev;
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev->platform, 0};
    c->context = clCreateContext(props, 1, &dev->device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        faid_cl_fail(d, err, "clCreateContext", __FILE__, __LINE__);
        free(c);
        return NULL;
    }
    c->queue = clCreateCommandQueue(c->context, dev->device,
                                    profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    if (err != CL_SUCCESS) {
        faid_cl_fail(d, err, "clCreateCommandQueue", __FILE__, __LINE__);
        clReleaseContext(c->context);
        free(c);
        return NULL;
    }
    return c;
}

void faid_cl_ctx_destroy(faid_cl_ctx **ctx)
{
    if (!ctx || !*ctx)
        return;
    faid_cl_ctx *c = *ctx;
    if (c->queue) {
        clFinish(c->queue);
        clReleaseCommandQueue(c->queue);
    }
    if (c->context)
        clReleaseContext(c->context);
    free(c);
    *ctx = NULL;
}

char *faid_cl_source(const char *name, size_t *len, faid_diag *d)
{
    const char *dir = getenv("FAID_KERNEL_DIR");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        uint8_t *buf;
        size_t n;
        if (faid_file_read(path, &buf, &n, d)) {
            faid_diag_prefix(d, "kernel source (FAID_KERNEL_DIR=%s): ", dir);
            return NULL;
        }
        if (len)
            *len = n;
        return (char *)buf;
    }
    for (const faid_kernel_source *k = faid_kernel_sources; k->name; k++) {
        if (strcmp(k->name, name) == 0) {
            char *buf = malloc(k->len + 1);
            if (!buf) {
                faid_fail(d, FAID_ENOMEM, "out of memory");
                return NULL;
            }
            memcpy(buf, k->text, k->len + 1);
            if (len)
                *len = k->len;
            return buf;
        }
    }
    faid_fail(d, FAID_EINVAL, "kernel source %s is not embedded in this build", name);
    return NULL;
}

/* Per kernel, the runtime's work-group size limit, local and private memory (FAID_CL_VERBOSE=1,
 * beside the build log): with the compiler's registers, what decides how many work-groups share a
 * compute unit. */
static void build_report(faid_cl_ctx *ctx, cl_program prog, const char *name)
{
    cl_kernel ks[64];
    cl_uint nk = 0;
    if (clCreateKernelsInProgram(prog, 64, ks, &nk) != CL_SUCCESS)
        return;
    for (cl_uint i = 0; i < nk; i++) {
        char kname[128] = "";
        size_t wg = 0;
        cl_ulong lmem = 0, pmem = 0;
        clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, sizeof kname - 1, kname, NULL);
        clGetKernelWorkGroupInfo(ks[i], ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg,
                                 NULL);
        clGetKernelWorkGroupInfo(ks[i], ctx->info.device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem,
                                 &lmem, NULL);
        clGetKernelWorkGroupInfo(ks[i], ctx->info.device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof pmem,
                                 &pmem, NULL);
        FAID_INFO("opencl", "built %s: kernel %s max work-group %zu, local %llu B, private %llu B",
                  name, kname, wg, (unsigned long long)lmem, (unsigned long long)pmem);
        clReleaseKernel(ks[i]);
    }
}

int faid_cl_build(faid_cl_ctx *ctx, const char *const *names, int nnames, const char *options,
                  cl_program *out, faid_diag *d)
{
    *out = NULL;
    char *srcs[16];
    size_t lens[16];
    if (nnames < 1 || nnames > 16)
        return faid_fail(d, FAID_EINVAL, "faid_cl_build: 1..16 sources");
    int rc = FAID_OK;
    int got = 0;
    for (; got < nnames; got++) {
        srcs[got] = faid_cl_source(names[got], &lens[got], d);
        if (!srcs[got]) {
            rc = d ? d->code : FAID_EIO;
            goto done;
        }
    }
    cl_int err;
    cl_program prog =
        clCreateProgramWithSource(ctx->context, (cl_uint)nnames, (const char **)srcs, lens, &err);
    if (err != CL_SUCCESS) {
        rc = faid_cl_fail(d, err, "clCreateProgramWithSource", __FILE__, __LINE__);
        goto done;
    }
    /* FAID_CL_VERBOSE=1: every program's build log also on success, at info level, and on
     * NVIDIA's OpenCL the programs built with -cl-nv-verbose, whose log then holds ptxas's
     * "Used N registers" per kernel: how many work-groups of the peak kernels an SM holds, which
     * docs/PERFORMANCE.md's occupancy analysis of issue 17 (round 3) could only estimate */
    const char *vb = getenv("FAID_CL_VERBOSE");
    const int verbose = vb && strcmp(vb, "1") == 0;
    char opts[2048];
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s%s", options ? options : "",
             verbose && strstr(ctx->info.name, "NVIDIA") ? " -cl-nv-verbose" : "");
    err = clBuildProgram(prog, 1, &ctx->info.device, opts, NULL, NULL);
    if (err == CL_SUCCESS && verbose) {
        size_t loglen = 0;
        clGetProgramBuildInfo(prog, ctx->info.device, CL_PROGRAM_BUILD_LOG, 0, NULL, &loglen);
        char *log = malloc(loglen + 1);
        if (log) {
            clGetProgramBuildInfo(prog, ctx->info.device, CL_PROGRAM_BUILD_LOG, loglen, log, NULL);
            log[loglen] = '\0';
            FAID_INFO("opencl", "built %s (%s) on %s:\n%s", names[nnames - 1], opts, ctx->info.name,
                      log);
            free(log);
        }
    }
    if (err != CL_SUCCESS) {
        size_t loglen = 0;
        clGetProgramBuildInfo(prog, ctx->info.device, CL_PROGRAM_BUILD_LOG, 0, NULL, &loglen);
        char *log = malloc(loglen + 1);
        if (log) {
            clGetProgramBuildInfo(prog, ctx->info.device, CL_PROGRAM_BUILD_LOG, loglen, log, NULL);
            log[loglen] = '\0';
            FAID_ERROR("opencl", "building %s (%s) on %s failed:\n%s", names[0], opts,
                       ctx->info.name, log);
        }
        rc = faid_fail(d, FAID_ECL, "building kernel %s on %s failed: %s%.600s", names[0],
                       ctx->info.name, faid_cl_errname(err), log ? log : "");
        free(log);
        clReleaseProgram(prog);
        goto done;
    }
    if (verbose)
        build_report(ctx, prog, names[nnames - 1]);
    *out = prog;
done:
    for (int i = 0; i < got; i++)
        free(srcs[i]);
    return rc;
}

cl_mem faid_cl_buffer(faid_cl_ctx *ctx, cl_mem_flags flags, size_t size, void *host, faid_diag *d)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->context, flags, size ? size : 4, host, &err);
    if (err != CL_SUCCESS) {
        faid_cl_fail(d, err, "clCreateBuffer", __FILE__, __LINE__);
        return NULL;
    }
    return m;
}
