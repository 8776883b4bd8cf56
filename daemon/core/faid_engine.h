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

typedef struct faid_stage_times {
    double decode_us, preprocess_us, integrate_us, transfer_us, total_us;
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

/* Reduces one frame. Errors (wrong shape/dtype for the setup, corrupt payload) name the cause. */
int faid_engine_process(faid_engine *e, const faid_frame *f, faid_result *r, faid_diag *d);

#endif
