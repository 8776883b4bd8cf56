/* faid_peaks_cl: the OpenCL side of background estimation and peak finding: builds the programs
 * of kernels/peaks/ for one device, uploads the per-setup tables (the background's CSR matrix,
 * the geometry maps, peakfinder8's radius bins) and runs, on a preprocessed frame already on the
 * device, the sigma-clipped background (sigma_clip.cl) and the configured finder
 * (pick_pyfai.cl or pf8_radial.cl + pf8_peaks.cl, both through compact.cl). Results equal the
 * plain C references (faid_sigclip_ref, faid_pick_ref, faid_pf8_ref): peak lists bit for bit,
 * the background to float64 rounding (tests/unit/test_peaks.c).
 *
 * One object holds one set of per-frame device buffers: use one per frame in flight. Launches
 * go to the context's in-order queue; faid_peaks_cl_read waits for them. The device needs
 * cl_khr_fp64 (every NVIDIA datacenter GPU and PoCL have it). */
#ifndef FAID_PEAKS_CL_H
#define FAID_PEAKS_CL_H

#include "faid_cl.h"
#include "faid_csr.h"
#include "faid_peaks.h"

typedef struct faid_peaks_cl faid_peaks_cl;

/* How the sigma clip kernel (kernels/peaks/sigma_clip.cl) is built for one device and matrix:
 * work-group size, entries per work-item kept in registers and in local memory (lm, 0: none, the
 * register kernel), the bytes of its overflow buffer (the entries of bins larger than
 * wg * (r + lm)) and the build options. Shared by faid_peaks_cl and the engine's sigclip stage. */
typedef struct faid_sigclip_cl_cfg {
    size_t wg;
    int r;
    int lm;
    size_t ovf_bytes;
    char opts[200];
} faid_sigclip_cl_cfg;

/* wg: min(256, the device's maximum) unless FAID_SIGCLIP_WG (a power of two) says otherwise; lm:
 * 0 (the register kernel, the default) unless FAID_SIGCLIP_LM (1-1024 entries per work-item in
 * local memory, the local-memory variant of issue 17: fewer registers per work-item, more
 * work-groups per compute unit, overflow entries read coalesced) says otherwise, an error
 * naming it when the device's local memory is too small; r: enough for what local memory does not
 * hold of the largest bin of csr (a multiple of 4, at most 64) unless FAID_SIGCLIP_R (1-128) says
 * otherwise. The variables are tuning knobs for benchmarks and tests (a small r exercises the
 * overflow path); a value out of range is an error naming it. Every setting gives the same bits
 * for the same wg (the entries are summed in the same order wherever they are kept). */
int faid_sigclip_cl_config(const faid_cl_ctx *ctx, const faid_csr *csr, faid_clip_model em,
                           faid_sigclip_cl_cfg *cfg, faid_diag *d);

/* csr: the background's 1D matrix without pixel splitting; g: geometry maps (its panel grid
 * for peakfinder8); p: parameters (copied; algorithm none runs the background only). */
faid_peaks_cl *faid_peaks_cl_new(faid_cl_ctx *ctx, const faid_csr *csr, const faid_peak_geom *g,
                                 const faid_peak_params *p, faid_diag *d);
void faid_peaks_cl_destroy(faid_peaks_cl **k);

/* Enqueues the background and the finder on pre4 (npix float4 signal, variance, norm, count;
 * Poisson variance for the poisson and hybrid error models); `empty` fills bins without pixels.
 * Events of the first and last launch in *first / *last when not NULL (profiling). */
int faid_peaks_cl_enqueue(faid_peaks_cl *k, cl_mem pre4, float empty, cl_event *first,
                          cl_event *last, faid_diag *d);
/* Blocking reads of the last enqueued frame's background and peaks (peaks may be NULL). */
int faid_peaks_cl_read(faid_peaks_cl *k, faid_background *bg, faid_peak_list *out, faid_diag *d);
/* Uploads a host frame, enqueues and reads: for tests and the reference comparisons. */
int faid_peaks_cl_run_host(faid_peaks_cl *k, const float *pre4, float empty, faid_background *bg,
                           faid_peak_list *out, faid_diag *d);

#endif
