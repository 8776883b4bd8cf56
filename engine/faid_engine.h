/* faid_engine: the one code path that reduces a frame: decode -> preprocess -> integrate (1D and
 * optional 2D cake), on an OpenCL device or with the plain C reference ("ref"). The daemon's GPU
 * workers and `faidctl process` both call it, so the same frame and configuration give
 * bit-identical results on the same device.
 *
 * An engine owns its device context, programs and buffers (sized at creation from the setup: no
 * allocation per frame).
 *
 * Threads. An engine is used by one thread, with one exception: the pipelined API may be split
 * between ONE submitting thread (faid_engine_submit / _submit_table, faid_engine_launch_open,
 * faid_engine_slot_buffer, faid_engine_depth, faid_engine_batch) and ONE collecting thread
 * (faid_engine_collect); faid_engine_in_flight may be called from either. Everything else
 * (creation, set_*, prepare, process, host_alloc / _register / _free, destroy) is for one thread
 * while no other uses the engine and, where it says so, nothing is in flight. The two threads
 * share a lock for the ring of slots and the device's enqueues only: a submit's copy into
 * staging runs beside a collect's wait for the device and its copy into the result. A frame's
 * bytes handed to submit must stay untouched until collect returned it where the zero-copy
 * rules below say so; the result passed to collect belongs to the collecting thread. */
#ifndef FAID_ENGINE_H
#define FAID_ENGINE_H

#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_peaks.h"
#include "faid_proto_out.h"
#include "faid_reduce.h"
#include "faid_setup.h"

#include <stdint.h>

typedef struct faid_frame {
    const void *data; /* compressed or raw bytes */
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
    double stage_us;   /* host copy / CPU work into the pinned staging buffer */
    double table_us;   /* part of stage_us: block-table parse + packing (bslz4, lz4) */
    int device_decode; /* 1 when the OpenCL decoder decoded the frame */
    int zero_copy;     /* 1 when the H2D read the frame where the caller left it (pinned) */
    int batch;         /* frames integrated in the same launch (integrate_us and d2h_us
                          are this frame's share: the launch time / batch) */
    double peaks_us;   /* background, peak finding and hit decision (peaks.algorithm) */
    double clip_us;    /* part of peaks_us: the sigma clip */
    double pkpre_us;   /* part of peaks_us: the peak stages' Poisson preprocess (OpenCL) */
    double find_us[6]; /* part of peaks_us: the finder's launches in order (OpenCL; pyfai: flag,
                        * scan, write; peakfinder8: prep, radial, candidates, fill, scan, write),
                        * for faid-bench (issue 17: which kernel costs) */
    double pkfind_us;  /* part of peaks_us: the finder's launches together (the sum of find_us;
                        * the reference device: its finder's host time) */
} faid_stage_times;

#define FAID_RESULT_OUTPUTS 48 /* named outputs of one result, at most (faid_outputs.h) */

typedef struct faid_result {
    faid_profile *p1d;
    faid_profile *p2d; /* NULL without cake */
    faid_stage_times t;
    /* peaks.algorithm not none (else NULL / 0): the sigma-clipped background on the profile's
     * radial bins (setup->csr_bg), the peaks (at most peaks.max_num_peaks), num_peaks = every
     * peak found (peaks->n_found, which may exceed the list's length when it was cut) and the
     * hit decision on num_peaks (faid_hits_is_hit). */
    faid_background *bg;
    faid_peak_list *peaks;
    int32_t num_peaks;
    int is_hit;
    /* The named outputs above as the stages declare them (faid_outputs.h): one view per output
     * present in this result, remade by every collect; the encoders and writers iterate them. */
    faid_out_array out[FAID_RESULT_OUTPUTS];
    int nout;
    /* Leading arrays of the cake (I, sigma, std, count) this result carries: 4 (faid_result_new),
     * or what faid_engine_set_cake_arrays says (the daemon's lean cake: 1, I alone). The cake's
     * declared outputs past them get no view: their values were not read back. */
    int cake_arrays;
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
/* Whether the 2D profile's sum arrays (sum_signal, sum_norm, sum_variance, sum_norm_sq) are read
 * back from the device (default 1). 0: only I, sigma, std and count of the cake travel (half of
 * its 8 x nbins floats per frame; the daemon and faidctl use no more) and the result's 2D sums
 * are left as they were. The 1D sums always come back. Rebuilds the frame buffers (not on the hot
 * path); FAID_EBUSY while frames are in flight. */
int faid_engine_set_sums_2d(faid_engine *e, int on, faid_diag *d);
/* How many of the cake's arrays I, sigma, std, count (in that order) a result carries: 1 (I alone,
 * the daemon's lean cake results, output.cake lean) to 4 (default). The others stay on the device
 * (the integrate stage declares its cake segment read in part, the device reads back the prefix),
 * their arrays in the result are left as they were and its declared outputs for them (sigma_2d,
 * count_2d) get no view, so no result message carries them; with the 2D sums read back all four
 * come back but still only these are published. Rebuilds the frame buffers as
 * faid_engine_set_sums_2d does. */
int faid_engine_set_cake_arrays(faid_engine *e, int n, faid_diag *d);
/* Builds the kernels for frames of this dtype now (otherwise done on the first such frame). */
int faid_engine_prepare(faid_engine *e, faid_dtype dtype, faid_diag *d);
/* Integration work-group size chosen for matrix 0 (1D) or 1 (2D); 0 for the reference device.
 * It is a function of the device type and the matrix only (FAID_ENGINE_WG overrides it); a launch
 * halves it while the compiled kernel allows less (its work-group limit on the device, e.g.
 * registers). */
size_t faid_engine_workgroup(const faid_engine *e, int which);
/* 1 when matrix 0 (1D) or 1 (2D) is integrated one bin per work-item (rows shorter than 64
 * entries on average, e.g. the 2D cake; FAID_ENGINE_ROWS=0/1 forces it, for experiments: the
 * reduction order and so the bits differ between the two modes), 0 otherwise (one work-group
 * per bin of faid_engine_workgroup work-items). */
int faid_engine_rows_mode(const faid_engine *e, int which);

/* Variants of the batched integration kernel (faid_integrate_raw_b: error models none and
 * poisson, batch > 1, one work-group per bin), chosen when the engine is made from
 * FAID_ENGINE_INTEGRATE, a comma-separated list of the names below ("" or "base": none; an
 * unknown name fails faid_engine_new naming it). They are for measurements on the GPU
 * (tests/bench/gpu-run.sh runs each beside the default): each frame adds the same entries in the
 * same order as the default kernel, so every variant gives the same bits (unit.engine checks it).
 *   gather     every frame's raw values of UNROLL entries are loaded before the first is added
 *              (UNROLL x NBATCH gathers in flight per work-item instead of UNROLL)
 *   entrynorm  the static per-pixel factors (normp, dark) copied at setup into the matrix' entry
 *              order and streamed with the coefficients instead of gathered through the indices
 *              (4 bytes more per entry and factor read in order, one gather less per entry)
 *   prefetch   the next UNROLL indices and coefficients loaded while this iteration's gathers
 *              are in flight (one dependent memory round trip per iteration instead of two)
 *   unroll8    8 entries per work-item and iteration instead of 4 (UNROLL; it applies to the
 *              one-frame kernels too: a work-item still adds its entries in the same order) */
#define FAID_INTV_GATHER   1
#define FAID_INTV_ENORM    2
#define FAID_INTV_PREFETCH 4
#define FAID_INTV_UNROLL8  8
/* The FAID_INTV_* bits of a FAID_ENGINE_INTEGRATE value; -1 for an unknown name. */
int faid_engine_parse_integrate_variant(const char *s);
/* The FAID_INTV_* bits the engine runs with. */
int faid_engine_integrate_variant(const faid_engine *e);

/* Reduces one frame. Errors (wrong shape/dtype for the setup, corrupt payload) name the cause.
 * Refused (FAID_EBUSY) while frames submitted with faid_engine_submit are in flight. It runs the
 * same code as submit + collect, so both give the same bits for the same frame. */
int faid_engine_process(faid_engine *e, const faid_frame *f, faid_result *r, faid_diag *d);

/* ---- Pipelined API: up to `depth` frames in flight ----
 *
 * Each slot has its own pinned staging, device buffers and in-order command queue, so the H2D
 * copy of one frame overlaps the kernels of another and the host prepares frame n+1 while the
 * device works on frame n. Frames complete in submission order (FIFO):
 *
 *     faid_engine_set_depth(e, 0, &d);              // default depth
 *     while (more) {
 *         if (faid_engine_in_flight(e) == faid_engine_depth(e))
 *             rc = faid_engine_collect(e, res, &tag, 1, &d);   // oldest frame
 *         faid_engine_submit(e, &frame, frame_id, &d);
 *     }
 *     while (faid_engine_in_flight(e)) faid_engine_collect(e, res, &tag, 1, &d);
 *
 * On OpenCL each frame's outputs are read back as soon as its own stages are done, not after
 * the whole slot's (FAID_ENGINE_SLOT_D2H=1 at engine creation: one read-back per slot after its
 * last frame, the path before, for measurements).
 * The reference device runs the frame at submit and hands the result over at collect.
 * set_setup, set_fused and set_depth are refused (FAID_EBUSY) while frames are in flight. */
#define FAID_ENGINE_DEPTH_DEFAULT 4
#define FAID_ENGINE_DEPTH_MAX     32
#define FAID_ENGINE_BATCH_MAX     8

/* Number of slots (0 = FAID_ENGINE_DEPTH_DEFAULT, at most FAID_ENGINE_DEPTH_MAX). An engine
 * starts with depth 1 (what faid_engine_process needs); each slot of an EIGER 4M costs, per
 * frame of its batch, about 18 MB of pinned host memory and 36 MB of device memory. */
int faid_engine_set_depth(faid_engine *e, int depth, faid_diag *d);
/* Frames per slot (1..FAID_ENGINE_BATCH_MAX, default 1): the frames of a slot are integrated in
 * one pass over the CSR matrix (one launch per matrix for all of them; fused kernels, error
 * models none and poisson; otherwise frame after frame), which shares the matrix traffic. A slot
 * integrates when it is full, or when collect reaches one of its frames (a partial batch), or
 * when a frame of another dtype arrives. Every frame gives the same bits whatever the batch.
 * Rebuilds the slots and the process programs (not on the hot path). */
int faid_engine_set_batch(faid_engine *e, int batch, faid_diag *d);
int faid_engine_batch(const faid_engine *e);
/* Frames that may be in flight: depth x batch. With batch > 1 a slot closed before it was full
 * holds fewer frames, so submit may answer FAID_EBUSY earlier: collect then. */
int faid_engine_depth(const faid_engine *e);
int faid_engine_in_flight(const faid_engine *e);

/* Queues one frame and returns without waiting for the device. The CPU work (block-table parse,
 * copy into pinned staging, or CPU decode for encodings the device decoder does not take) happens
 * here; errors found here (shape, dtype, malformed table) are returned at once and the frame is
 * not in flight. FAID_EBUSY when every slot is in flight (collect first). The caller's bytes may
 * be reused as soon as submit returns, except when they lie in engine memory (next paragraph). */
int faid_engine_submit(faid_engine *e, const faid_frame *f, uint64_t tag, faid_diag *d);

/* As faid_engine_submit, with the chunk's block table already parsed (bslz4, lz4: by
 * faid_bslz4_table / faid_lz4h5_table on these very bytes, e.g. in an ingest thread while the
 * bytes are hot in its cache), so this thread skips the parse: a serial walk through the chunk
 * that costs 100-300 us on a cold EIGER 4M frame. The table is read only during the call. A
 * table of other bytes cannot make the device read or write out of bounds (the decoder
 * re-checks every entry) but gives a decode error or a wrong frame. NULL: as faid_engine_submit. */
int faid_engine_submit_table(faid_engine *e, const faid_frame *f, const faid_block_table *table,
                             uint64_t tag, faid_diag *d);

/* Waits (block != 0) for the oldest frame in flight, or checks it (block == 0), and moves its
 * profiles and stage times into r. Returns 0 with *tag = the frame's tag; FAID_EBUSY (block == 0,
 * the oldest frame is not done) or FAID_EINVAL (nothing in flight, NULL or mismatched result):
 * no frame was consumed; any other negative code: the oldest frame failed (e.g. FAID_ECORRUPT
 * from the device decoder), it is consumed, *tag names it and d says why. */
int faid_engine_collect(faid_engine *e, faid_result *r, uint64_t *tag, int block, faid_diag *d);

/* With batches: starts the downstream stages of the slot taking frames now (a partial batch)
 * when it is not the oldest slot in flight, so that its frames run while the caller waits for
 * older ones instead of after them (collect launches a partial slot only when it reaches it).
 * For a caller that has no further frame at hand and is about to wait: no frame can join the
 * slot meanwhile anyway. The frames give the same bits (a batch of fewer frames). Returns 1 when
 * it launched a slot, 0 when there was none to launch (no slot open, or the open slot is the
 * oldest: collect launches it), a negative code when the launch failed (the slot stays open and
 * collect tries again, reporting the failure for its frames). */
int faid_engine_launch_open(faid_engine *e, faid_diag *d);

/* A collecting thread beside the submitting one (off by default; FAID_EBUSY while frames are in
 * flight). On, a blocking collect whose oldest slot is still open (a partial batch) does not
 * launch it at once, which would close every batch at its first frame while the collector
 * waits: it waits until the submitter fills the slot, closes it for a frame of another dtype,
 * or calls faid_engine_launch_open with no frame at hand, which on a threaded engine hands the
 * oldest open slot to the collector (it launches it; launch_open still returns 0 for it). So a
 * submitter with no further frame must call faid_engine_launch_open before it waits for the
 * collector, or the collector waits for ever. Off: collect launches the oldest slot itself. */
int faid_engine_set_threaded(faid_engine *e, int on, faid_diag *d);

/* Zero-copy input. (1) The staging area of the slot the next submit takes: a producer (network
 * receive) may write the frame's bytes there and submit a frame whose data points at it; the
 * area is valid until that submit. FAID_EBUSY when every slot is in flight. (2) Pinned host
 * memory owned by the engine (any number of buffers, freed by faid_engine_host_free or with the
 * engine, surviving set_setup): a frame whose bytes lie in it is copied to the device straight
 * from there, without the memcpy into staging; such bytes must stay untouched until the frame
 * is collected. The reference device gets plain memory. */
/* Benchmarks only ("compute alone"): with on != 0, a bslz4/lz4 frame whose bytes lie in engine
 * pinned memory skips the H2D when the lane it lands in last uploaded the same bytes (same
 * address and length): the decode reads the copy already on the device. The bytes must not have
 * changed since (faid-bench's frames never do). Off by default; the daemon never sets it. */
int faid_engine_set_resident(faid_engine *e, int on);
/* Threads that copy a frame into pinned staging when its bytes lie outside engine pinned memory
 * (faid_pcopy.h): 1 (default) = the calling thread's memcpy; n (up to FAID_PCOPY_MAX) = the
 * caller and n - 1 threads of the engine's own, each a share of the frame. The same bytes reach
 * the device. Issue 17: the daemon's one worker per device copied such frames itself, 149 of
 * its 228 us per result with four input connections on one H100. */
int faid_engine_set_copy_threads(faid_engine *e, int n, faid_diag *d);
/* Device memory held by the engine's buffers for the current setup and depth, in bytes (0 on
 * the reference device). */
size_t faid_engine_device_bytes(const faid_engine *e);

int faid_engine_slot_buffer(faid_engine *e, void **ptr, size_t *cap, faid_diag *d);
/* (3) Host memory the caller owns (the daemon's pinned input arena, faid_pinned.h) is treated
 * as (2): a frame whose bytes lie in it is copied to the device from there, so those bytes must
 * stay untouched until the frame is collected. The memory outlives the engine; the engine never
 * frees it (faid_engine_host_free only forgets it). Memory that is not page-locked for this
 * device is still read correctly, at the speed of a pageable copy. */
int faid_engine_host_register(faid_engine *e, void *ptr, size_t bytes, faid_diag *d);
void *faid_engine_host_alloc(faid_engine *e, size_t bytes, faid_diag *d);
void faid_engine_host_free(faid_engine *e, void **p);

#endif
