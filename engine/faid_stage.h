/* faid_stage: the interface between the engine and its stages, and between the engine and its
 * two devices (OpenCL, plain C reference). Nothing here names the device's API: a stage speaks of
 * buffers by their names in the resource table, of kernels by their names, files and build
 * options, and of queues and events through opaque handles only the device opens.
 *
 * A frame goes through the stages of faid_stages[] in order: decode, integrate (preprocessing
 * fused or not), then the slots for sigma clip, peak finding and hit decision. A stage brings
 *   - its buffers: `declare` puts them into the engine's resource table (faid_restab.h), sized
 *     from the setup: static data, per-slot device buffers, output segments read back per frame;
 *   - its launches: `plan` describes, once per setup, frame dtype and slot layout, the kernels it
 *     runs when a slot of frames closes (faid_launch: kernel name, files and build options,
 *     work sizes, arguments by name: resource-table buffers, scalars, local memory); the device
 *     builds the kernels, resolves names to argument indices and buffers, caches the result and
 *     runs it for every slot (per-slot launches of every stage first, then lane after lane the
 *     per-lane launches of every stage in stage order);
 *   - its commands at submit (decode): `submit` lists what the device does for the frame
 *     (faid_dcmd: host-to-device writes, the clear of a flag, the device decode), after the
 *     stage's host work (staging, block table, CPU decode);
 *   - its outputs: `collect` moves the lane's read-back segments into the faid_result, and its
 *     `outputs` table names them (protocol key, type, extent, field: faid_outputs.h);
 *   - its timing: `times` adds its share of the frame's times from the device times of its
 *     commands (us[], filled by the device from the commands' events before collect), and its
 *     `timings` table names them (metrics, result keys: faid_outputs.h);
 *   - its reference: `ref_run` computes the same on the host for the "ref" device.
 * Stages exchange data only through named resources (the sigclip stage's preprocessed frame
 * "pk.pre" and background segment "bg" are what the peaks stage reads): no stage calls another.
 * The engine core (faid_engine.c) owns the slot ring and the public API; the device ops tables
 * faid_devops_cl (faid_device_cl.c) and faid_devops_ref (faid_device_ref.c) run the stages.
 *
 * Adding a stage: see docs/ARCHITECTURE.md, "Adding a stage". */
#ifndef FAID_STAGE_H
#define FAID_STAGE_H

#include "faid_engine.h"
#include "faid_outputs.h"
#include "faid_restab.h"

#include <pthread.h>

#define FAID_STAGE_MAX  8  /* stages in faid_stages[] */
#define FAID_STAGE_EV   6  /* device commands timed per stage and lane (and per stage and slot) */
#define FAID_LAUNCH_MAX 8  /* launches in one stage's plan */
#define FAID_PLAN_ARGS  48 /* arguments of one launch (peakfinder8's shared list: 42) */
#define FAID_DCMD_MAX   8  /* commands of one stage for one frame at submit */

/* Opaque handles of the device: a slot's in-order command queue and one timed command. */
typedef struct faid_dqueue_s *faid_dqueue;
typedef struct faid_devent_s *faid_devent;

/* What the stages may know of the device they run on. */
typedef struct faid_dev_info {
    char name[256];
    int is_gpu;
    size_t max_wg; /* most work-items in a work-group */
    int has_fp64;
    size_t local_mem; /* bytes of local memory per work-group (0: unknown) */
} faid_dev_info;

struct faid_devops;

/* What the stages see of the engine; lives as long as the engine. */
typedef struct faid_stage_env {
    const faid_dev_info *info;     /* NULL on the reference device */
    const struct faid_devops *ops; /* the device's ops (services such as the device decoder) */
    int batch;                     /* frames per slot (NBATCH of the process programs) */
    int fused;                     /* preprocessing fused into the integration kernels */
    int sums2d;                    /* read the 2D sum arrays back */
    int cake_arrays;               /* leading cake arrays read back (1 = I .. 4 = I..count) */
    int rows_env;                  /* FAID_ENGINE_ROWS: -1 auto, 0 never, 1 always */
    size_t wg_override;            /* FAID_ENGINE_WG, 0 = none */
    int int_variant;               /* FAID_ENGINE_INTEGRATE: FAID_INTV_* bits, 0 = none */
    int resident;                  /* faid_engine_set_resident (benchmarks) */
    int slot_d2h; /* FAID_ENGINE_SLOT_D2H=1: one read-back per slot after every lane (the path
                   * before per-lane reads; for measurements) */
    struct faid_pcopy *pcopy; /* faid_engine_set_copy_threads: staging copies shared by
                               * several threads (NULL: memcpy) */
    /* The engine's lock (faid_engine.c): a device's submit holds it around what it shares with
     * a collecting thread, the launch plans and every enqueue (OpenCL kernel arguments are set
     * on kernel objects that all slots share, so setting them and enqueuing is one step), and
     * not around its host work (the copy into staging). Nothing else in a device takes it: the
     * engine core holds it around close_slot, slot_reset and the ring. */
    pthread_mutex_t *mu;
    void *dev;                    /* the device's own state */
    void *estate[FAID_STAGE_MAX]; /* a stage's engine-lifetime state */
} faid_stage_env;

/* What belongs to one setup: its resource table and the stages' per-setup state. */
typedef struct faid_stage_res {
    const faid_setup *setup;
    size_t npix;
    faid_restab *rt;
    int enabled[FAID_STAGE_MAX];
    void *state[FAID_STAGE_MAX];
    /* The device's per-setup state: on OpenCL the stages' plans resolved once per frame dtype
     * (kernels built, argument indices and buffers looked up): resolving them per frame cost a
     * few microseconds per kernel (the program cache formats the options and compares keys). */
    void *dstate;
} faid_stage_res;

/* One frame of a slot. */
typedef struct faid_stage_lane {
    uint64_t tag;
    double t_submit;
    faid_devent ev[FAID_STAGE_MAX][FAID_STAGE_EV];
    double us[FAID_STAGE_MAX][FAID_STAGE_EV]; /* device time of ev[][] (collect fills it) */
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
    faid_devent ev_d2h; /* the read-back of this lane's outputs (OpenCL) */
    /* reference device: the result computed at submit, and a slot buffer made on demand */
    faid_result *ref_res;
    uint8_t *ref_stage;
} faid_stage_lane;

/* Up to `batch` frames processed together on one in-order queue. */
typedef struct faid_stage_slot {
    int index; /* for the resource table's per-slot buffers */
    faid_dqueue q;
    faid_stage_lane *lane;
    int nlanes;       /* lanes allocated (the batch it was made for) */
    int n;            /* lanes filled */
    int ncol;         /* lanes collected */
    int closed;       /* downstream stages and D2H enqueued */
    int launch_req;   /* engine core, threaded: the submitter has no frame for this open oldest
                       * slot; the collecting thread launches it (faid_engine_launch_open) */
    faid_dtype dtype; /* of every frame in the slot */
    faid_devent ev[FAID_STAGE_MAX][FAID_STAGE_EV]; /* launches for the whole slot */
    double us[FAID_STAGE_MAX][FAID_STAGE_EV];      /* device time of ev[][] */
} faid_stage_slot;

/* ---- launch plans ---- */

typedef enum faid_plan_arg_kind {
    FAID_PA_BUF,     /* a resource-table buffer by name ("out": the slot's output buffer) */
    FAID_PA_INT,     /* int32: v.i + lane x step */
    FAID_PA_UINT,    /* uint32: v.u + lane x step */
    FAID_PA_FLOAT,   /* float: v.f */
    FAID_PA_LOCAL,   /* local memory of `local` bytes per work-item of the launch */
    FAID_PA_NFRAMES, /* int32: the frames in the slot */
} faid_plan_arg_kind;

/* One named argument of a launch. */
typedef struct faid_plan_arg {
    const char *name; /* the kernel's parameter */
    faid_plan_arg_kind kind;
    const char *buf; /* FAID_PA_BUF */
    union {
        int32_t i;
        uint32_t u;
        float f;
    } v;
    int64_t step; /* per lane (per-lane launches) */
    size_t local; /* FAID_PA_LOCAL */
} faid_plan_arg;

/* One kernel launch (1D). The global size is `items` rounded up to the work-group, or `groups`
 * work-groups when items is 0. The work-group is `lws`, halved while the built kernel allows
 * fewer work-items when `shrink` is set; otherwise a kernel that allows fewer is refused at
 * planning time (naming `hint`, the knobs that set lws, when not NULL). Every parameter the
 * kernel names must be among the arguments; arguments it does not name are skipped (the finders'
 * kernels take what they name of one shared list). */
typedef struct faid_launch {
    const char *files[4]; /* kernel files relative to kernels/ */
    int nfiles;
    char opts[320]; /* build options (-D ...; the peak kernels' with FAID_PEAKS_KOPTS reach 300) */
    const char *kernel;
    size_t lws;
    int shrink;
    size_t items, groups;
    int per_lane; /* once per lane of the slot (else once for the slot) */
    int ev;       /* index of its event in the lane's (per_lane) or slot's ev[stage] */
    const char *hint;
    int narg;
    faid_plan_arg arg[FAID_PLAN_ARGS];
} faid_launch;

typedef struct faid_plan {
    int n;
    faid_launch l[FAID_LAUNCH_MAX];
} faid_plan;

/* Appends a launch to p and returns it (NULL when full: FAID_LAUNCH_MAX). */
faid_launch *faid_plan_add(faid_plan *p, const char *const *files, int nfiles, const char *opts,
                           const char *kernel);
/* Arguments of a launch (silently dropped beyond FAID_PLAN_ARGS: faid_plan_check reports it). */
void faid_pa_buf(faid_launch *l, const char *name, const char *buf);
void faid_pa_int(faid_launch *l, const char *name, int32_t v, int64_t step);
void faid_pa_uint(faid_launch *l, const char *name, uint32_t v, int64_t step);
void faid_pa_float(faid_launch *l, const char *name, float v);
void faid_pa_local(faid_launch *l, const char *name, size_t bytes_per_item);
void faid_pa_nframes(faid_launch *l, const char *name);
/* FAID_EINVAL naming stage and launch when a launch overflowed its argument list or the plan
 * its launch list. */
int faid_plan_check(const faid_plan *p, const char *stage, faid_diag *d);

/* ---- commands at submit ---- */

typedef enum faid_dcmd_op {
    FAID_DCMD_WRITE,  /* bytes from host src into buffer buf at off */
    FAID_DCMD_ZERO32, /* a 32-bit zero into buffer buf at off */
    FAID_DCMD_DECODE, /* the device decoder: chunk at in/off (table at tab_off) into dst/dst_off,
                       * error flag into "out" at flag_off (bytes) */
} faid_dcmd_op;

typedef struct faid_dcmd {
    faid_dcmd_op op;
    const char *buf;
    size_t off, bytes;
    const void *src;
    int ev; /* index of its event in the lane's ev[stage]; -1: none */
    /* FAID_DCMD_DECODE */
    faid_encoding enc;
    size_t esz;
    const faid_block_table *t;
    size_t tab_off;
    const char *dst;
    size_t dst_off, flag_off;
} faid_dcmd;

typedef struct faid_dcmds {
    int n;
    faid_dcmd c[FAID_DCMD_MAX];
} faid_dcmds;

/* Appends a command (NULL when full: the device then refuses the whole list). */
faid_dcmd *faid_dcmd_add(faid_dcmds *c, faid_dcmd_op op, int ev);

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
    /* compute devices: */
    /* ready for frames of dtype dt (beyond the plan: e.g. the device decoder) */
    int (*prepare)(faid_stage_env *env, faid_stage_res *res, int id, faid_dtype dt, faid_diag *d);
    /* the launches when a slot of frames of dtype dt closes (asked once per setup, dtype and
     * slot layout; the device caches what it resolves) */
    int (*plan)(const faid_stage_env *env, const faid_stage_res *res, int id, faid_dtype dt,
                faid_plan *p, faid_diag *d);
    /* host work of one frame into lane `lane` of sl at submit, and the device commands it needs
     * (appended to c; the device runs them right after) */
    int (*submit)(faid_stage_env *env, faid_stage_res *res, int id, faid_stage_slot *sl, int lane,
                  const faid_frame *f, const faid_block_table *table, faid_dcmds *c, faid_diag *d);
    /* checks the lane's read-back outputs before any is used (decode error flag) */
    int (*check)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                 const float *h_lane, faid_diag *d);
    int (*collect)(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                   const float *h_lane, faid_result *r, faid_diag *d);
    /* adds the stage's share of the frame's times from its commands' device times */
    void (*times)(const faid_stage_slot *sl, int lane, int id, faid_stage_times *t);
    /* the named outputs it puts into a result (faid_outputs.h): `noutputs` rows */
    const faid_output_decl *outputs;
    int noutputs;
    /* the frame times it accounts for (faid_outputs.h): `ntimings` rows */
    const faid_time_decl *timings;
    int ntimings;
} faid_stage;

/* Rows of a stage's table (a static array), for .noutputs. */
#define FAID_NROWS(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* The pipeline, in order; terminated by NULL. */
extern const faid_stage *const faid_stages[];
extern const faid_stage faid_stage_decode;
extern const faid_stage faid_stage_integrate;
extern const faid_stage faid_stage_sigclip;
extern const faid_stage faid_stage_peaks;
extern const faid_stage faid_stage_hit;

/* How the sigma clip kernel (kernels/peaks/sigma_clip.cl) is built for one device and matrix:
 * work-group size, entries per work-item kept in registers and in local memory (lm, 0: none, the
 * register kernel), the bytes of its overflow buffer (the entries of bins larger than
 * wg * (r + lm)) and the build options. */
typedef struct faid_sigclip_cfg {
    size_t wg;
    int r;
    int lm;
    int gb;  /* FAID_SIGCLIP_GB: entries gathered per batch beyond the registers (0: one by one) */
    int cg;  /* FAID_SIGCLIP_CG: 1, the gather coalesced across the work-group (sigma_clip.cl);
              * 2, each chunk through a tile in local memory (the overflow written coalesced) */
    int cgu; /* FAID_SIGCLIP_CGU: entries per work-item and chunk of that gather (0 without it) */
    size_t ovf_bytes;
    char opts[200];
} faid_sigclip_cfg;

/* wg: min(256, the device's maximum) unless FAID_SIGCLIP_WG (a power of two) says otherwise; lm:
 * entries per work-item in local memory (the local-memory variant of issue 17: fewer registers
 * per work-item, more work-groups per compute unit, overflow entries read coalesced), by default
 * 12 where that fits the device's local memory, else the largest share that fits, else 0 (the
 * register kernel), never an error (issue 17's GPU run, docs/PERFORMANCE.md); FAID_SIGCLIP_LM
 * (0-1024, 0 the register kernel) says otherwise, an error naming it when the device's local
 * memory is too small; r: 8 with the default lm > 0, else enough for what local memory does not
 * hold of the largest bin of csr (a multiple of 4, at most 64), unless FAID_SIGCLIP_R (1-128)
 * says otherwise. The variables are tuning knobs for benchmarks and tests (a small r exercises the
 * overflow path); a value out of range is an error naming it. gb: FAID_SIGCLIP_GB (0-16, default
 * 0), the entries beyond the registers gathered that many at a time with their loads issued
 * together (issue 17 round 3, a latency variant; 0 gathers them one by one). FAID_SIGCLIP_MAXREG
 * (0-255, default 0: the compiler's choice) caps the kernel's registers per work-item on NVIDIA's
 * OpenCL (-cl-nv-maxrregcount; ignored on other platforms): more work-groups per SM, perhaps
 * with spills. cg: FAID_SIGCLIP_CG (0-2, default 0), the gather coalesced across the
 * work-group in chunks of wg x cgu entries (FAID_SIGCLIP_CGU, 1-16, default 4), the local
 * entries kept in each work-item's CSR order (issue 17 round 5); 2 takes each chunk through a
 * tile in local memory, so that the overflow entries are written coalesced too. Every setting gives
 * the same bits for the same wg (the entries are summed in the same order wherever they are kept).
 */
int faid_sigclip_config(const faid_dev_info *info, const faid_csr *csr, faid_clip_model em,
                        faid_sigclip_cfg *cfg, faid_diag *d);

/* What the peak stages (sigclip, peaks, hit) share for one setup, built by the sigclip stage's
 * declare when peaks.algorithm is not none. */
typedef struct faid_peak_setup {
    faid_peak_params p;        /* the setup's peaks: section */
    const faid_csr *csr_bg;    /* setup->csr_bg */
    faid_corrections corr;     /* the setup's corrections with the Poisson variance (what the
                                * background's poisson / hybrid models and the finders read) */
    faid_peak_geom *geom;      /* radius per pixel, validity, picking window */
    struct faid_pf8_bins *pf8; /* peakfinder8's integer-radius bins (NULL for pyfai) */
    faid_sigclip_cfg sc;       /* the sigma clip kernel's build (compute devices) */
    int fused;                 /* FAID_PEAKS_FUSED=1, or unset with sc.lm > 0 (compute devices,
                                * issue 17): the sigma clip and the finders compute each pixel
                                * from the raw frame (kernels built with PK_FUSED), no
                                * preprocessed copy */
    char kopts[128];           /* FAID_PEAKS_KOPTS: extra -D options of the finders' programs */
    int fill_groups;           /* FAID_PF8_FILL_GROUPS: work-groups of faid_pf8_fill */
    int pf8_merge;             /* FAID_PF8_MERGE=1: faid_pf8_write finds its spans' offsets
                                * itself (-D PF8_WSCAN=1), no faid_pk_scan launch */
    int pf8_gather;            /* FAID_PF8_GATHER=1: faid_pf8_radial gathers the values from
                                * img through the bins' index list (-D PF8_GATHER=1), the prep
                                * writes img alone */
    int pf8_candfill;          /* FAID_PF8_CANDFILL=1: faid_pf8_cand evaluates its candidates
                                * (-D PF8_CANDFILL=1), no faid_pf8_fill launch */
    int perm;                  /* FAID_SIGCLIP_PERM (issue 17, round 6): 0, or the sigma clip
                                * reads its bin's pixels in the background matrix' entry order
                                * from a copy of the raw frame made per lane by faid_bg_scatter
                                * (1) or faid_bg_gather (2), kernels/peaks/bg_permute.cl */
    int pf8_noprep;            /* FAID_PF8_NOPREP=1: faid_pf8_radial computes the values
                                * (-D PF8_NOPREP=1), no faid_pf8_prep launch */
    const char *pre;           /* host buffer of the preprocessed frame the references read
                                * (reference device): "pre", or "pk_pre" when the integration's
                                * error model is not poisson */
} faid_peak_setup;

/* NULL when the peak stages are off for this setup. */
const faid_peak_setup *faid_stage_peak_setup(const faid_stage_res *res);

/* Work-group size of the peak kernels: 256, or less where the device allows less. */
size_t faid_stage_peaks_wg(const faid_stage_env *env);
/* A per-slot scratch buffer of `bytes` used by one lane at a time: declared as `batch` lanes of
 * bytes / batch so that the slot holds it once. */
int faid_stage_peaks_scratch(faid_stage_env *env, faid_stage_res *res, const char *name,
                             size_t bytes, faid_diag *d);
/* The raw-side arguments (raw, dark, normp, raw_off per lane, do_dark, do_dummy, dummy,
 * delta_dummy) of a launch on frames of dtype dt: the preprocess kernel's, and those of the peak
 * kernels that read pixels (used when built fused). */
void faid_stage_peaks_raw_args(const faid_stage_res *res, faid_dtype dt, faid_launch *l);
/* The build options of a peak kernel that reads pixels: base, and with ps->fused the raw
 * frame's element type, the Poisson model and PK_FUSED (process/preprocess.cl goes first);
 * FAID_EDTYPE for a dtype without a raw code, FAID_ERANGE when they do not fit n. */
int faid_stage_peaks_fused_opts(const faid_peak_setup *ps, faid_dtype dt, const char *base,
                                char *opts, size_t n, faid_diag *d);
/* The value a kernel built with FAID_PEAKS_KOPTS (ps->kopts) sees for NAME: V for -D NAME=V or
 * -DNAME=V, 1 for a bare -DNAME (the preprocessor's meaning), 0 when absent: the one reading of
 * those options on the host (the launch plans that follow a kernel option, and which buffers
 * the sigma clip needs). */
int faid_stage_peaks_kopt(const faid_peak_setup *ps, const char *name);

/* The per-pixel factor the kernels read as `normp` (flat x polarization x solid angle x the
 * normalization factor, 0 for masked pixels and dummy flats) into normp[npix]. */
void faid_stage_fold_norm(const faid_corrections *c, float *normp);
/* The static buffer `name` of csr's nnz floats: src (a per-pixel array) in the matrix' entry
 * order, entry k = src[indices[k]]. */
int faid_stage_entry_order(faid_stage_res *res, const char *name, const faid_csr *csr,
                           const float *src, faid_diag *d);

/* ---- devices ---- */

typedef struct faid_devops {
    const char *kind; /* "opencl" | "ref" */
    int (*open)(faid_stage_env *env, const char *device, char *name, size_t name_len, faid_diag *d);
    void (*close)(faid_stage_env *env);
    /* the resource table of a setup (device buffers or host memory) */
    faid_restab *(*restab_new)(faid_stage_env *env);
    /* frees the device's per-setup state (res->dstate) */
    void (*res_release)(faid_stage_env *env, faid_stage_res *res);
    /* drops the built programs (a build constant such as the batch changed) */
    void (*invalidate)(faid_stage_env *env);
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
    /* Services of a compute device to the decode stage (NULL on the reference device): */
    /* whether the device decoder takes `enc` chunks of esz-byte elements with block table t
     * (t NULL: only builds the decoder for frames of need bytes; a device that cannot host one
     * answers 0 from then on and frames are decoded on the CPU) */
    int (*decoder)(faid_stage_env *env, faid_encoding enc, size_t esz, size_t need,
                   const faid_block_table *t);
    /* bytes of block table t in the decoder's packed form, and the packing into dst */
    size_t (*table_bytes)(const faid_block_table *t);
    void (*pack_table)(const faid_block_table *t, void *dst);
} faid_devops;

extern const faid_devops faid_devops_cl;
extern const faid_devops faid_devops_ref;

/* ---- helpers shared by stages and devices ---- */

double faid_stage_now_us(void);
/* The element code of a frame dtype in the kernels (RAW_CODE), 0 when unsupported. */
int faid_stage_raw_code(faid_dtype t);
/* Work-group size of a pass with a work-item per pixel (or entry): 256 on a GPU, 64 elsewhere,
 * at most the device's limit. */
size_t faid_stage_pixel_wg(const faid_stage_env *env);
/* Largest bslz4 chunk of npix elements of any frame dtype. */
size_t faid_stage_max_comp(size_t npix);
/* Index of st in faid_stages[] (-1 when absent). */
int faid_stage_id(const faid_stage *st);
/* The staging area where a producer may write lane `lane` of slot `slot` (decode stage). */
int faid_stage_decode_slot_buffer(const faid_stage_res *res, int slot, int lane, void **ptr,
                                  size_t *cap);
/* Work-group size and rows mode the integrate stage chose for matrix `which`; 0 when absent. */
int faid_stage_integrate_matrix(const faid_stage_res *res, int which, size_t *wg, int *rows);
/* Whether [p, p + n) lies in the engine's pinned host memory (engine core). */
int faid_engine_is_pinned(const faid_stage_env *env, const void *p, size_t n);

#endif
