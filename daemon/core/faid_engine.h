/* faid_engine: the one code path that reduces a frame: decode -> preprocess -> integrate (1D and
 * optional 2D cake), on an OpenCL device or with the plain C reference ("ref"). The daemon's GPU
 * workers and `faidctl process` both call it, so the same frame and configuration give
 * bit-identical results on the same device.
 *
 * An engine owns its device context, programs and buffers (sized at creation from the setup: no
 * allocation per frame). Not thread-safe: one engine per worker thread. */
#ifndef FAID_ENGINE_H
#define FAID_ENGINE_H

#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_reduce.h"
#include "faid_setup.h"

#include <stdint.h>

typedef struct faid_frame {
    const void *data;        /* compressed or raw bytes */
    size_t len;
    faid_encoding encoding;
    faid_dtype dtype;
    int rows, cols;
} faid_frame;

/* Per-frame stage durations in microseconds. OpenCL stages come from profiling events (device
 * time); CPU stages (CPU decode of lz4 framings, the reference device) from the host clock.
 * With the fused kernel preprocess_us is 0 (preprocessing is inside integrate_us).
 * transfer_us = h2d_us + d2h_us; total_us is host wall time of faid_engine_process. */
typedef struct faid_stage_times {
    double decode_us, preprocess_us, integrate_us, transfer_us, total_us;
    double h2d_us, d2h_us;
    double stage_us;         /* host copy / CPU work into the pinned staging buffer */
    int device_decode;       /* 1 when the OpenCL decoder decoded the frame */
} faid_stage_times;

typedef struct faid_result {
    faid_profile *p1d;
    faid_profile *p2d;       /* NULL without cake */
    faid_stage_times t;
} faid_result;

typedef struct faid_engine faid_engine;

/* device: "auto" | "cpu" | "gpu" | "ref" | index from `faidctl devices`. */
faid_engine *faid_engine_new(const faid_setup *setup, const char *device, faid_diag *d);
void faid_engine_destroy(faid_engine **e);
/* Human name of the device ("NVIDIA H200 (NVIDIA CUDA)", "reference C"). */
const char *faid_engine_device_name(const faid_engine *e);
/* Replaces the setup (reload); the engine re-sizes what it must. */
int faid_engine_set_setup(faid_engine *e, const faid_setup *setup, faid_diag *d);

faid_result *faid_result_new(const faid_setup *setup);
void faid_result_destroy(faid_result **r);

/* Fused (default, 1): preprocessing inside the integration kernel, which gathers the raw frame
 * through the CSR indices. 0: a separate preprocess kernel writes a float4 image first. Both
 * give the same numbers; switching re-creates the frame buffers (not on the hot path). */
int faid_engine_set_fused(faid_engine *e, int fused, faid_diag *d);
/* Builds the kernels for frames of this dtype now (otherwise done on the first such frame). */
int faid_engine_prepare(faid_engine *e, faid_dtype dtype, faid_diag *d);
/* Integration work-group size used for matrix 0 (1D) or 1 (2D); 0 for the reference device.
 * It is a function of the device type and the matrix only (FAID_ENGINE_WG overrides it). */
size_t faid_engine_workgroup(const faid_engine *e, int which);

/* Reduces one frame. Errors (wrong shape/dtype for the setup, corrupt payload) name the cause. */
int faid_engine_process(faid_engine *e, const faid_frame *f, faid_result *r, faid_diag *d);

#endif
