/* faid_stage: the interface between the engine and its stages, and between the engine and its
 * two devices (OpenCL, plain C reference).
 *
 * A frame goes through the stages of faid_stages[] in order: decode, integrate (preprocessing
 * fused or not), then the slots for sigma clip, peak finding and hit decision. A stage brings
 *   - its buffers: `declare` puts them into the engine's resource table (faid_restab.h), sized
 *     from the setup: static data, per-slot device buffers, output segments read back per frame;
 *   - its kernels: built through the program cache (faid_progcache.h) in `cl_prepare`, arguments
 *     bound by name;
 *   - its commands: `cl_submit` at submit (decode: host staging, H2D, device decode) or
 *     `cl_close` when a slot of frames closes (everything downstream of the decoded frame);
 *   - its outputs: `cl_collect` moves the lane's read-back segments into the faid_result;
 *   - its timing: `times` adds its profiling events (or host clock) to the frame's stage times;
 *   - its reference: `ref_run` computes the same on the host for the "ref" device.
 * The engine core (faid_engine.c) owns the slot ring and the public API; the device ops tables
 * faid_devops_cl (faid_device_cl.c) and faid_devops_ref (faid_device_ref.c) run the stages.
 *
 * Adding a stage: see docs/ARCHITECTURE.md, "Adding a stage". */
#ifndef FAID_STAGE_H
#define FAID_STAGE_H

#include "faid_engine.h"
#include "faid_peaks_cl.h"
#include "faid_progcache.h"
#include "faid_restab.h"

#define FAID_STAGE_MAX 8  /* stages in faid_stages[] */
#define FAID_STAGE_EV  6  /* profiling events per stage and lane (and per stage and slot) */
#define FAID_STAGE_KC  96 /* cached kernels per stage and setup (faid_stage_kslot keys) */

/* What the stages see of the engine; lives as long as the engine. */
typedef struct faid_stage_env {
    faid_cl_ctx *ctx;             /* NULL on the reference device */
    faid_progcache *progs;        /* NULL on the reference device */
    int batch;                    /* frames per slot (NBATCH of the process programs) */
    int fused;                    /* preprocessing fused into the integration kernels */
    int sums2d;                   /* read the 2D sum arrays back */
    int cake_arrays;              /* leading cake arrays read back (1 = I .. 4 = I..count) */
    int rows_env;                 /* FAID_ENGINE_ROWS: -1 auto, 0 never, 1 always */
    size_t wg_override;           /* FAID_ENGINE_WG, 0 = none */
    int resident;                 /* faid_engine_set_resident (benchmarks) */
    void *dev;                    /* the device's own state */
    void *estate[FAID_STAGE_MAX]; /* a stage's engine-lifetime state (e.g. decoders) */
} faid_stage_env;

/* What belongs to one setup: its resource table and the stages' per-setup state. */
typedef struct faid_stage_res {
    const faid_setup *setup;
    size_t npix;
    faid_restab *rt;
    int enabled[FAID_STAGE_MAX];
    void *state[FAID_STAGE_MAX];
    /* The stages' kernels resolved once per setup (faid_stage_kslot): the program cache's lookup
     * formats the -D options and compares keys, a few microseconds per kernel and frame
     * otherwise. Valid for progcache generation kc_gen. */
    faid_kernel *kc[FAID_STAGE_MAX][FAID_STAGE_KC];
    uint64_t kc_gen;
} faid_stage_res;

/* One frame of a slot. */
typedef struct faid_stage_lane {
    uint64_t tag;
    double t_submit;
    cl_event ev[FAID_STAGE_MAX][FAID_STAGE_EV];
    /* decode stage's record of the frame (errors, times) */
    faid_block_table tab; /* host block table, capacity of the setup's largest chunk */
    int err_dirty;        /* the decode error flag may be non-zero: clear before a decode */
    faid_encoding enc;
    size_t len;
    uint32_t nblocks;
    int device_decode, zero_copy;
    const void *res_src; /* pinned bytes last uploaded to this lane (resident mode) */
    size_t res_len;
    double stage_us, table_us, cpu_decode_us;
    /* reference device: the result computed at submit, and a slot buffer made on demand */
    faid_result *ref_res;
    uint8_t *ref_stage;
} faid_stage_lane;

/* Up to `batch` frames processed together on one in-order queue. */
typedef struct faid_stage_slot {
    int index; /* for faid_restab_mem / faid_restab_host */
    cl_command_queue q;
    faid_stage_lane *lane;
    int nlanes;                                 /* lanes allocated (the batch it was made for) */
    int n;                                      /* lanes filled */
    int ncol;                                   /* lanes collected */
    int closed;                                 /* downstream stages and D2H enqueued */
    faid_dtype dtype;                           /* of every frame in the slot */
    cl_event ev[FAID_STAGE_MAX][FAID_STAGE_EV]; /* launches for the whole slot */
    cl_event ev_d2h;
} faid_stage_slot;

/* One frame on the reference device. */
typedef struct faid_ref_frame {
    const faid_frame *f;
    faid_result *res; /* profiles and times are written here */
} faid_ref_frame;

typedef struct faid_stage {
    const char *name;
    /* whether the stage runs for this setup (NULL: always) */
    int (*enabled)(const faid_stage_env *env, const faid_setup *s);
    /* buffers, outputs and per-setup state into res (NULL: none) */
    int (*declare)(faid_stage_env *env, faid_stage_res *res, int id, faid_diag *d);
    void (*release)(faid_stage_res *res, int id);
    void (*shutdown)(faid_stage_env *env, int id); /* engine-lifetime state */
    /* reference device */
    int (*ref_run)(faid_stage_env *env, faid_stage_res *res, faid_ref_frame *fr, faid_diag *d);
    /* OpenCL device */
    int (*cl_prepare)(faid_stage_env *env, faid_stage_res *res, int id, faid_dtype dt,
                      faid_diag *d);
    int (*cl_submit)(faid_stage_env *env, faid_stage_res *res, int id, faid_stage_slot *sl,
                     int lane, const faid_frame *f, const faid_block_table *table, faid_diag *d);
    int (*cl_close)(faid_stage_env *env, faid_stage_res *res, int id, faid_stage_slot *sl,
                    faid_diag *d);
    /* checks the lane's read-back outputs before any is used (decode error flag) */
    int (*cl_check)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                    const float *h_lane, faid_diag *d);
    int (*cl_collect)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                      const float *h_lane, faid_result *r, faid_diag *d);
    /* adds the stage's share of the frame's times from its events */
    void (*times)(const faid_stage_slot *sl, int lane, int id, faid_stage_times *t);
} faid_stage;

/* The pipeline, in order; terminated by NULL. */
extern const faid_stage *const faid_stages[];
extern const faid_stage faid_stage_decode;
extern const faid_stage faid_stage_integrate;
extern const faid_stage faid_stage_sigclip;
extern const faid_stage faid_stage_peaks;
extern const faid_stage faid_stage_hit;

/* What the peak stages (sigclip, peaks, hit) share for one setup, built by the sigclip stage's
 * declare when peaks.algorithm is not none. */
typedef struct faid_peak_setup {
    faid_peak_params p;        /* the setup's peaks: section */
    const faid_csr *csr_bg;    /* setup->csr_bg */
    faid_corrections corr;     /* the setup's corrections with the Poisson variance (what the
                                * background's poisson / hybrid models and the finders read) */
    faid_peak_geom *geom;      /* radius per pixel, validity, picking window */
    struct faid_pf8_bins *pf8; /* peakfinder8's integer-radius bins (NULL for pyfai) */
    faid_sigclip_cl_cfg sc;    /* the sigma clip kernel's build (OpenCL device) */
    const char *pre;           /* host buffer of the preprocessed frame the references read
                                * (reference device): "pre", or "pk_pre" when the integration's
                                * error model is not poisson */
} faid_peak_setup;

/* NULL when the peak stages are off for this setup. */
const faid_peak_setup *faid_stage_peak_setup(const faid_stage_res *res);

/* OpenCL side of the peak stages (faid_stage_sigclip.c, faid_stage_peaks.c). */
size_t faid_stage_peaks_wg(const faid_stage_env *env);
int faid_stage_peaks_scratch(faid_stage_env *env, faid_stage_res *res, const char *name,
                             size_t bytes, faid_diag *d);
/* Builds the finder's kernels (called by the sigclip stage's cl_prepare). */
int faid_stage_peaks_cl_prepare(faid_stage_env *env, faid_stage_res *res, faid_diag *d);
/* Enqueues the finder for lane `lane` of sl on the preprocessed frame pre (float4 per pixel),
 * the lane's background at bg_off floats in "out" (called by the sigclip stage's cl_close). */
int faid_stage_peaks_cl_lane(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl,
                             int lane, cl_mem pre, int bg_off, faid_diag *d);

/* ---- devices ---- */

typedef struct faid_devops {
    const char *kind; /* "opencl" | "ref" */
    int (*open)(faid_stage_env *env, const char *device, char *name, size_t name_len, faid_diag *d);
    void (*close)(faid_stage_env *env);
    int (*lane_open)(faid_stage_env *env, faid_stage_res *res, faid_stage_lane *ln, faid_diag *d);
    void (*lane_close)(faid_stage_lane *ln);
    int (*slot_open)(faid_stage_env *env, faid_stage_slot *sl, faid_diag *d);
    void (*slot_close)(faid_stage_env *env, faid_stage_slot *sl); /* frees the slot's queue */
    void (*slot_reset)(faid_stage_slot *sl);                      /* events; empty again */
    int (*prepare)(faid_stage_env *env, faid_stage_res *res, faid_dtype dt, faid_diag *d);
    int (*submit)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                  const faid_frame *f, const faid_block_table *table, faid_diag *d);
    int (*close_slot)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, faid_diag *d);
    int (*collect)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                   faid_result *r, int block, faid_diag *d);
    void (*flush)(faid_stage_slot *sl);  /* start what is queued */
    void (*finish)(faid_stage_slot *sl); /* wait for what is queued */
    /* pinned host memory (*handle: what host_free needs) */
    void *(*host_alloc)(faid_stage_env *env, size_t bytes, void **handle, faid_diag *d);
    void (*host_free)(faid_stage_env *env, void *ptr, void *handle);
    /* the staging area of lane `lane` of slot sl */
    int (*slot_buffer)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                       void **ptr, size_t *cap, faid_diag *d);
} faid_devops;

extern const faid_devops faid_devops_cl;
extern const faid_devops faid_devops_ref;

/* ---- helpers shared by stages and devices ---- */

double faid_stage_now_us(void);
/* Device time of a profiled command in microseconds (0 for NULL or unavailable). */
double faid_stage_ev_us(cl_event ev);
void faid_stage_release_event(cl_event *ev);
/* The element code of a frame dtype in the kernels (RAW_CODE), 0 when unsupported. */
int faid_stage_raw_code(faid_dtype t);
/* Largest bslz4 chunk of npix elements of any frame dtype. */
size_t faid_stage_max_comp(size_t npix);
/* Index of st in faid_stages[] (-1 when absent). */
int faid_stage_id(const faid_stage *st);
/* The per-setup cache entry `key` (0 <= key < FAID_STAGE_KC, the stage's own numbering) of stage
 * `id`: a stage looks its kernel up there first and, on NULL, gets it from the program cache
 * (building the options only then) and stores it. Emptied whenever the program cache's
 * generation changed. NULL when id or key is out of range (then no caching). */
faid_kernel **faid_stage_kslot(const faid_stage_env *env, faid_stage_res *res, int id, int key);
/* The staging area where a producer may write lane `lane` of slot `slot` (decode stage). */
int faid_stage_decode_slot_buffer(const faid_stage_res *res, int slot, int lane, void **ptr,
                                  size_t *cap);
/* Work-group size and rows mode the integrate stage chose for matrix `which`; 0 when absent. */
int faid_stage_integrate_matrix(const faid_stage_res *res, int which, size_t *wg, int *rows);
/* Whether [p, p + n) lies in the engine's pinned host memory (engine core). */
int faid_engine_is_pinned(const faid_stage_env *env, const void *p, size_t n);

#endif
