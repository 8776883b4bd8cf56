/* faid_engine: decode -> preprocess -> integrate for one frame, on an OpenCL device or with the
 * plain C reference (see faid_engine.h).
 *
 * DESIGN. An engine owns one OpenCL context (its queue serves uploads and mappings), a cache of
 * programs keyed by (frame dtype, error model), pinned host buffers handed to the caller
 * (faid_engine_host_alloc) and a "resource set" derived from the current setup:
 *   static device arrays, uploaded once per setup: normp (normalization x flat x solid angle x
 *   polarization folded per pixel, 0 where a pixel can never contribute: mask, dummy flat, NaN),
 *   dark, and per matrix (1D, optional 2D cake) indptr / indices / coefficients;
 *   `depth` frame slots, each with its own in-order profiling queue, a pinned staging buffer
 *   (CL_MEM_ALLOC_HOST_PTR, mapped once) holding the block table and the compressed bytes, device
 *   buffers for the compressed chunk, the decoded frame, the preprocessed image (unfused path
 *   only) and the profiles followed by the decode error flag, and a pinned host mirror of the
 *   latter.
 * Everything is sized at creation / set_setup / set_depth from shape x the widest frame dtype
 * (4 bytes), so processing a frame allocates nothing.
 *
 * Frames in flight form a FIFO ring over the slots (head, inflight): submit fills the next slot
 * and enqueues all of its commands without waiting; collect waits for the oldest slot's last
 * command. Separate queues let the device overlap the H2D copy of one frame with the kernels of
 * another and run kernels of different frames side by side; the host prepares frame n+1 while the
 * device works. faid_engine_process is submit + collect of one frame, so both APIs run the same
 * commands with the same arguments and give the same bits.
 *
 * Per frame: CPU block-table parse (bslz4; skipped when the caller passes the table) or CPU decode
 * (lz4 blocks the device cannot take, lz4-raw) into staging, one H2D (two when the bytes lie in
 * engine pinned memory and are read in place), GPU decode when available, then either the fused
 * kernel (raw gathered through the CSR indices and preprocessed on the fly: one launch per matrix)
 * or preprocess + integrate, one D2H of all profile arrays and the decode error flag, the flag
 * checked before anything is used. That is 4 commands per frame in the common case.
 *
 * The work-group size of the integration is a pure function of the device type and the matrix
 * shape (no timing-based autotune), so the daemon and faidctl give bit-identical results. */
#include "faid_engine.h"

#include "faid_cl.h"
#include "faid_clcodec.h"
#include "faid_log.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* engine-owned pinned host buffers; local scratch per work-item (integrate.cl); output arrays
 * per bin */
#define FAID_ENGINE_MAX_HOST 64
#define ACC_BYTES            (10 * sizeof(float))
#define NOUT                 8
#define NDTYPES              (FAID_DT_BOOL + 1)
#define NEM                  3

typedef struct eng_matrix {
    int present;
    int nbins;
    int has_coef;
    int rows;     /* one work-item per bin (faid_rows_*), else one work-group per bin */
    size_t wg;    /* work-group per bin (rows == 0) */
    int out_off;  /* lane-relative float offsets of I..count and of the sums in d_out */
    int sum_off;  /* < 0: -1 - offset in the sums area after the lanes (not read back) */
    cl_mem indptr, indices, coef;
} eng_matrix;

enum { EV_H2D, EV_H2DT, EV_DEC, EV_PRE, EV_INT1, EV_INT2, EV_N };

/* One frame of a slot. */
typedef struct eng_lane {
    faid_block_table tab; /* host block table, capacity max_blocks */
    int err_dirty;        /* the decode error flag may be non-zero: clear before a decode */
    cl_event ev[EV_N];    /* EV_INT* only when integrated alone (not batched) */
    uint64_t tag;
    faid_encoding enc;
    size_t len;
    uint32_t nblocks;
    int device_decode, zero_copy;
    double t_submit, stage_us, table_us, cpu_decode_us;
    /* reference device: the result computed at submit, and a slot buffer made on demand */
    faid_result *ref_res;
    uint8_t *ref_stage;
} eng_lane;

/* A slot takes up to `batch` frames (lanes) that are integrated together; its commands go to its
 * own in-order queue, so slots overlap each other on the device. Lane f occupies
 *   staging, d_in  [f * lane_bytes, +lane_bytes): [ ... packed block table | chunk or frame ];
 *                  the table is packed to end exactly at table_bytes, so table + chunk go over
 *                  in one H2D copy
 *   d_raw          [f * raw_stride, +max_raw_bytes): the decoded frame, native dtype
 *   d_out, h_out   floats [f * out_stride, +nout): profiles, then the decode error flag (int) */
typedef struct eng_slot {
    cl_command_queue q;
    cl_mem staging;
    uint8_t *staging_ptr; /* mapped once */
    size_t lane_bytes;
    size_t table_bytes; /* bytes reserved for the block table at the start of a lane */
    cl_mem d_in;
    cl_mem d_raw;
    size_t raw_stride; /* bytes, a multiple of 4096 */
    cl_mem d_pre;      /* float4 per pixel (unfused path, lanes one after the other) */
    cl_mem d_out;
    cl_mem h_out; /* pinned mirror of d_out */
    float *h_out_ptr;
    size_t out_stride; /* floats */
    eng_lane *lane;
    int nlanes;          /* lanes allocated (the batch it was made for) */
    int n;               /* lanes filled */
    int ncol;            /* lanes collected */
    int closed;          /* integration and D2H enqueued */
    faid_dtype dtype;    /* of every frame in the slot (one program per batch) */
    cl_event ev_bint[2]; /* batched integration, per matrix */
    cl_event ev_d2h;
} eng_slot;

typedef struct eng_res {
    const faid_setup *setup;
    size_t npix;
    size_t max_raw_bytes;
    size_t max_comp_bytes;
    uint32_t max_blocks;
    size_t nout;     /* floats of a lane's profiles read back (the decode flag follows) */
    size_t nsum_far; /* floats of a lane's sums kept on the device only (2D sums off) */
    /* OpenCL */
    cl_mem d_normp, d_dark, d_one;
    int do_dark;
    eng_matrix m[2];
    eng_slot *slot;
    int nslots;
    /* reference */
    uint8_t *ref_raw;
    float *ref_pre;
} eng_res;

typedef struct eng_prog {
    cl_program prog;
    cl_kernel pre, int_pre, int_raw, int_batch; /* int_batch: NULL for the azimuthal model */
    cl_kernel rows_pre, rows_raw;
    /* largest work-group the integration kernels allow (registers) */
    size_t kwg_pre, kwg_raw, kwg_batch, kwg_rows_pre, kwg_rows_raw;
} eng_prog;

struct faid_engine {
    int is_ref;
    int fused;
    int sums2d;   /* read the 2D sum arrays back (default 1) */
    int rows_env; /* FAID_ENGINE_ROWS: -1 auto, 0 never, 1 always */
    char name[400];
    faid_cl_ctx *ctx;
    size_t wg_override;
    eng_prog progs[NDTYPES][NEM];
    int depth;      /* slots per resource set */
    int batch;      /* frames per slot, integrated in one pass over the matrix */
    int head, used; /* oldest slot in use, slots in use (FIFO ring) */
    int inflight;   /* frames submitted and not collected */
    struct {
        cl_mem mem;
        void *ptr;
        size_t bytes;
    } host[FAID_ENGINE_MAX_HOST]; /* faid_engine_host_alloc */
    int nhost;
    uint8_t *scratch; /* CPU decode of a frame that lies in its own slot buffer */
    size_t scratch_bytes;
    faid_clcodec *codec[3]; /* GPU decoders for 1-, 2- and 4-byte elements, built on demand */
    size_t codec_max[3];    /* decoded bytes each was built for */
    int codec_broken[3];    /* building failed once: decode on the CPU, do not retry */
    eng_res *res;
};

/* ------------------------------------------------------------------------------------------ */

static double now_us(void)
{
    return (double)faid_now_ns() * 1e-3;
}

static int raw_code(faid_dtype t)
{
    switch (t) {
    case FAID_DT_U8:
        return 1;
    case FAID_DT_U16:
        return 2;
    case FAID_DT_U32:
        return 4;
    case FAID_DT_I8:
        return -1;
    case FAID_DT_I16:
        return -2;
    case FAID_DT_I32:
        return -4;
    case FAID_DT_F32:
        return 32;
    default:
        return 0;
    }
}

static void release_mem(cl_mem *m)
{
    if (*m) {
        clReleaseMemObject(*m);
        *m = NULL;
    }
}

static int is_dummy_f(float x, float dummy, float delta)
{
    return delta != 0.0f ? fabsf(x - dummy) <= delta : x == dummy;
}

/* Folds the static per-pixel factors in the reference's float32 order (faid_ref_preprocess:
 * normalization x flat x polarization x solid angle); 0 marks a pixel that can never contribute
 * (masked, flat equal to the dummy, non-finite or zero norm). As in the reference, a flat equal to
 * 0 is rejected even without dummy checking (pyFAI's placeholder dummy). */
static void fold_norm(const faid_corrections *c, float *normp)
{
    const float dummy = c->do_dummy ? c->dummy : 0.0f;
    const float ddummy = c->do_dummy ? c->delta_dummy : 0.0f;
    for (size_t i = 0; i < c->npix; i++) {
        float n = 0.0f;
        if (!(c->mask && c->mask[i]) && !(c->flat && is_dummy_f(c->flat[i], dummy, ddummy))) {
            n = c->normalization_factor;
            if (c->flat)
                n *= c->flat[i];
            if (c->polarization)
                n *= c->polarization[i];
            if (c->solid_angle)
                n *= c->solid_angle[i];
            if (!isfinite(n))
                n = 0.0f;
        }
        normp[i] = n;
    }
}

/* Integration work-group: enough work-items per bin to keep a GPU busy on long rows (1D with
 * thousands of entries per bin), 32 (one NVIDIA warp) on short rows (2D cake); small on CPU
 * devices, where PoCL runs a work-group as a loop. */
static size_t choose_wg(const faid_cl_device_info *dev, const faid_csr *csr, size_t override)
{
    size_t wg;
    if (override) {
        wg = override;
    } else if (dev->is_gpu) {
        double avg = csr->nbins > 0 ? (double)csr->nnz / csr->nbins : 0.0;
        wg = 32;
        while (wg < 256 && (double)wg * 16.0 < avg)
            wg *= 2;
    } else {
        wg = 8;
    }
    size_t maxwg = dev->max_wg ? dev->max_wg : 1;
    while (wg > maxwg)
        wg >>= 1;
    size_t p = 1;
    while (p * 2 <= wg)
        p *= 2;
    return p;
}

/* Rows mode (one work-item per bin) for short rows: below this average number of entries per
 * bin a work-group per bin spends more on its reduction tree than on the entries (the 2D cake:
 * about 20 entries per bin). */
#define ROWS_MAX_AVG 64.0

static int choose_rows(const faid_csr *csr, int env)
{
    if (env >= 0)
        return env;
    double avg = csr->nbins > 0 ? (double)csr->nnz / csr->nbins : 0.0;
    return avg < ROWS_MAX_AVG;
}

/* ------------------------------------------------------------------------------------------ */
/* programs */

/* Program builds are serialized over the engines of the process, and a failed build is tried
 * once more: PoCL's kernel cache is not safe against concurrent use (two daemon workers, one
 * building while the other compiled at its first launch, gave "unable to rename temporary ..."
 * build failures). A real compile error fails twice, at the cost of a second build. */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

static void prog_release(eng_prog *p)
{
    if (p->pre)
        clReleaseKernel(p->pre);
    if (p->int_pre)
        clReleaseKernel(p->int_pre);
    if (p->int_raw)
        clReleaseKernel(p->int_raw);
    if (p->int_batch)
        clReleaseKernel(p->int_batch);
    if (p->rows_pre)
        clReleaseKernel(p->rows_pre);
    if (p->rows_raw)
        clReleaseKernel(p->rows_raw);
    if (p->prog)
        clReleaseProgram(p->prog);
    memset(p, 0, sizeof *p);
}

static int get_prog(faid_engine *e, faid_dtype dt, faid_error_model em, eng_prog **out,
                    faid_diag *d)
{
    int code = raw_code(dt);
    if (!code)
        return faid_fail(d, FAID_EDTYPE,
                         "frame dtype %s is not supported (uint8/16/32, "
                         "int8/16/32, float32)",
                         faid_dtype_name(dt));
    if ((int)em < 0 || (int)em >= NEM)
        return faid_fail(d, FAID_EINVAL, "error model %d unknown", (int)em);
    eng_prog *p = &e->progs[dt][em];
    if (p->prog) {
        *out = p;
        return FAID_OK;
    }
    char opts[128];
    snprintf(opts, sizeof opts, "-D RAW_CODE=%d -D EM=%d -D NBATCH=%d", code, (int)em, e->batch);
    const char *names[] = {"process/preprocess.cl", "process/integrate.cl"};
    int64_t t0 = faid_now_ns();
    pthread_mutex_lock(&build_lock);
    int rc = faid_cl_build(e->ctx, names, 2, opts, &p->prog, d);
    if (rc) {
        faid_diag d2 = {0};
        rc = faid_cl_build(e->ctx, names, 2, opts, &p->prog, &d2);
        if (!rc) {
            FAID_WARN("engine", "process kernels built on the second attempt on %s (first: %s)",
                      e->ctx->info.name, d ? d->msg : "?");
            faid_diag_clear(d);
        }
    }
    pthread_mutex_unlock(&build_lock);
    if (rc)
        return rc;
    cl_int err;
    p->pre = clCreateKernel(p->prog, "faid_preprocess", &err);
    if (err == CL_SUCCESS)
        p->int_pre = clCreateKernel(p->prog, "faid_integrate_pre", &err);
    if (err == CL_SUCCESS)
        p->int_raw = clCreateKernel(p->prog, "faid_integrate_raw", &err);
    if (err == CL_SUCCESS && em != FAID_EM_AZIMUTHAL)
        p->int_batch = clCreateKernel(p->prog, "faid_integrate_raw_b", &err);
    if (err == CL_SUCCESS)
        p->rows_pre = clCreateKernel(p->prog, "faid_rows_pre", &err);
    if (err == CL_SUCCESS)
        p->rows_raw = clCreateKernel(p->prog, "faid_rows_raw", &err);
    if (err != CL_SUCCESS) {
        prog_release(p);
        return faid_cl_fail(d, err, "clCreateKernel", __FILE__, __LINE__);
    }
    p->kwg_pre = p->kwg_raw = 0;
    clGetKernelWorkGroupInfo(p->int_pre, e->ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE,
                             sizeof p->kwg_pre, &p->kwg_pre, NULL);
    clGetKernelWorkGroupInfo(p->int_raw, e->ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE,
                             sizeof p->kwg_raw, &p->kwg_raw, NULL);
    p->kwg_batch = 0;
    if (p->int_batch)
        clGetKernelWorkGroupInfo(p->int_batch, e->ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE,
                                 sizeof p->kwg_batch, &p->kwg_batch, NULL);
    p->kwg_rows_pre = p->kwg_rows_raw = 0;
    clGetKernelWorkGroupInfo(p->rows_pre, e->ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE,
                             sizeof p->kwg_rows_pre, &p->kwg_rows_pre, NULL);
    clGetKernelWorkGroupInfo(p->rows_raw, e->ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE,
                             sizeof p->kwg_rows_raw, &p->kwg_rows_raw, NULL);
    FAID_DEBUG("engine", "built process kernels (%s) for %s in %.0f ms", opts, e->ctx->info.name,
               (double)(faid_now_ns() - t0) * 1e-6);
    *out = p;
    return FAID_OK;
}

/* The device decoder for elements of esz bytes, able to decode need bytes; NULL when the device
 * cannot host one (the engine then decodes on the CPU; logged once). */
static faid_clcodec *get_codec(faid_engine *e, size_t esz, size_t need)
{
    int i = esz == 1 ? 0 : esz == 2 ? 1 : 2;
    if (e->codec[i] && e->codec_max[i] >= need)
        return e->codec[i];
    if (e->codec_broken[i])
        return NULL;
    faid_clcodec_destroy(&e->codec[i]);
    faid_diag d = {0};
    pthread_mutex_lock(&build_lock);
    e->codec[i] = faid_clcodec_new(e->ctx, esz, need, &d);
    if (!e->codec[i] && d.code == FAID_ECL) /* see build_lock */
        e->codec[i] = faid_clcodec_new(e->ctx, esz, need, &d);
    pthread_mutex_unlock(&build_lock);
    if (!e->codec[i]) {
        e->codec_broken[i] = 1;
        FAID_WARN("engine",
                  "no device decoder for %zu-byte elements on %s, decoding on the CPU: "
                  "%s",
                  esz, e->name, d.msg);
        return NULL;
    }
    e->codec_max[i] = need;
    return e->codec[i];
}

/* ------------------------------------------------------------------------------------------ */
/* resources */

static void release_event(cl_event *ev)
{
    if (*ev) {
        clReleaseEvent(*ev);
        *ev = NULL;
    }
}

/* Events of every lane and of the slot; the slot is empty again. */
static void slot_reset(faid_engine *e, eng_slot *sl)
{
    (void)e;
    for (int f = 0; f < sl->nlanes; f++)
        for (int i = 0; i < EV_N; i++)
            release_event(&sl->lane[f].ev[i]);
    release_event(&sl->ev_bint[0]);
    release_event(&sl->ev_bint[1]);
    release_event(&sl->ev_d2h);
    sl->n = sl->ncol = sl->closed = 0;
}

static void slots_destroy(faid_engine *e, eng_res *r)
{
    if (!r->slot)
        return;
    for (int s = 0; s < r->nslots; s++) {
        eng_slot *sl = &r->slot[s];
        if (sl->q)
            clFinish(sl->q);
        slot_reset(e, sl);
        if (sl->staging && sl->staging_ptr)
            clEnqueueUnmapMemObject(e->ctx->queue, sl->staging, sl->staging_ptr, 0, NULL, NULL);
        if (sl->h_out && sl->h_out_ptr)
            clEnqueueUnmapMemObject(e->ctx->queue, sl->h_out, sl->h_out_ptr, 0, NULL, NULL);
        if (e->ctx)
            clFinish(e->ctx->queue);
        if (sl->q)
            clReleaseCommandQueue(sl->q);
        release_mem(&sl->staging);
        release_mem(&sl->d_in);
        release_mem(&sl->d_raw);
        release_mem(&sl->d_pre);
        release_mem(&sl->d_out);
        release_mem(&sl->h_out);
        for (int f = 0; f < sl->nlanes; f++) {
            faid_block_table_free(&sl->lane[f].tab);
            faid_result_destroy(&sl->lane[f].ref_res);
            free(sl->lane[f].ref_stage);
        }
        free(sl->lane);
    }
    free(r->slot);
    r->slot = NULL;
    r->nslots = 0;
    e->head = e->used = e->inflight = 0;
}

static void res_destroy(faid_engine *e, eng_res **pr)
{
    eng_res *r = *pr;
    if (!r)
        return;
    slots_destroy(e, r);
    for (int k = 0; k < 2; k++) {
        release_mem(&r->m[k].indptr);
        release_mem(&r->m[k].indices);
        release_mem(&r->m[k].coef);
    }
    release_mem(&r->d_normp);
    release_mem(&r->d_dark);
    release_mem(&r->d_one);
    free(r->ref_raw);
    free(r->ref_pre);
    free(r);
    *pr = NULL;
}

static int check_csr(const faid_csr *csr, size_t npix, const char *what, faid_diag *d)
{
    if (!csr)
        return faid_fail(d, FAID_ECONFIG, "setup has no %s integration matrix", what);
    if (csr->nbins <= 0 || !csr->indptr || (csr->nnz > 0 && !csr->indices))
        return faid_fail(d, FAID_ECONFIG, "%s integration matrix is empty or incomplete", what);
    if ((size_t)csr->npix != npix)
        return faid_fail(d, FAID_ESHAPE, "%s integration matrix is for %d pixels, setup has %zu",
                         what, (int)csr->npix, npix);
    if (csr->nnz > INT32_MAX)
        return faid_fail(d, FAID_ERANGE, "%s integration matrix: %lld entries exceed int32", what,
                         (long long)csr->nnz);
    return FAID_OK;
}

/* Uploads a blocking copy of host data into a new read-only device buffer. */
static cl_mem upload(faid_engine *e, const void *host, size_t bytes, faid_diag *d)
{
    return faid_cl_buffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, (void *)host, d);
}

static int res_matrix(faid_engine *e, eng_res *r, int k, const faid_csr *csr, faid_diag *d)
{
    eng_matrix *m = &r->m[k];
    m->present = 1;
    m->nbins = csr->nbins;
    m->has_coef = csr->data != NULL;
    m->rows = choose_rows(csr, e->rows_env);
    m->wg = choose_wg(&e->ctx->info, csr, e->wg_override);
    m->indptr = upload(e, csr->indptr, ((size_t)csr->nbins + 1) * sizeof(int32_t), d);
    if (!m->indptr)
        return d ? d->code : FAID_ECL;
    if (csr->nnz > 0) {
        m->indices = upload(e, csr->indices, (size_t)csr->nnz * sizeof(int32_t), d);
        if (!m->indices)
            return d ? d->code : FAID_ECL;
    } else {
        m->indices = r->d_one;
        clRetainMemObject(m->indices);
    }
    if (m->has_coef && csr->nnz > 0) {
        m->coef = upload(e, csr->data, (size_t)csr->nnz * sizeof(float), d);
        if (!m->coef)
            return d ? d->code : FAID_ECL;
    } else {
        m->has_coef = 0;
        m->coef = r->d_one;
        clRetainMemObject(m->coef);
    }
    return FAID_OK;
}

/* Largest valid bslz4 chunk of npix elements of any frame dtype (the codec rejects blocks smaller
 * than the default, so the default block count bounds the framing overhead). Other encodings are
 * decoded on the CPU straight from the caller's bytes and need no staging room of their own. */
static size_t max_comp_bound(size_t npix)
{
    size_t best = 0;
    const size_t sizes[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        size_t b = faid_bslz4_bound(npix * sizes[i], sizes[i], 0);
        if (b > best)
            best = b;
    }
    return best;
}

static int slot_create(faid_engine *e, eng_res *r, eng_slot *sl, faid_diag *d)
{
    cl_int err;
    const size_t nb = (size_t)e->batch;
    sl->q =
        clCreateCommandQueue(e->ctx->context, e->ctx->info.device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        sl->q = NULL;
        return faid_cl_fail(d, err, "clCreateCommandQueue(slot)", __FILE__, __LINE__);
    }
    sl->table_bytes = ((size_t)r->max_blocks * 2 * sizeof(uint32_t) + 63) & ~(size_t)63;
    sl->lane_bytes = sl->table_bytes +
                     (r->max_comp_bytes > r->max_raw_bytes ? r->max_comp_bytes : r->max_raw_bytes);
    sl->lane_bytes = (sl->lane_bytes + 4095) & ~(size_t)4095;
    sl->raw_stride = (r->max_raw_bytes + 4095) & ~(size_t)4095;
    sl->out_stride = (r->nout + 1 + 15) & ~(size_t)15;
    sl->staging = faid_cl_buffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR,
                                 nb * sl->lane_bytes, NULL, d);
    if (!sl->staging)
        return d ? d->code : FAID_ECL;
    sl->staging_ptr = clEnqueueMapBuffer(e->ctx->queue, sl->staging, CL_TRUE, CL_MAP_WRITE, 0,
                                         nb * sl->lane_bytes, 0, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return faid_cl_fail(d, err, "clEnqueueMapBuffer(staging)", __FILE__, __LINE__);
    const size_t out_bytes = nb * (sl->out_stride + r->nsum_far) * sizeof(float);
    sl->d_in = faid_cl_buffer(e->ctx, CL_MEM_READ_ONLY, nb * sl->lane_bytes, NULL, d);
    sl->d_raw =
        sl->d_in ? faid_cl_buffer(e->ctx, CL_MEM_READ_WRITE, nb * sl->raw_stride, NULL, d) : NULL;
    sl->d_out = sl->d_raw ? faid_cl_buffer(e->ctx, CL_MEM_READ_WRITE, out_bytes, NULL, d) : NULL;
    sl->h_out = sl->d_out ? faid_cl_buffer(e->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                           out_bytes, NULL, d)
                          : NULL;
    if (!sl->h_out)
        return d ? d->code : FAID_ECL;
    sl->h_out_ptr =
        clEnqueueMapBuffer(e->ctx->queue, sl->h_out, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                           out_bytes, 0, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return faid_cl_fail(d, err, "clEnqueueMapBuffer(results)", __FILE__, __LINE__);
    /* the decode error flags start clear (whole buffer zeroed); the engine clears a flag again
     * only after an error */
    memset(sl->h_out_ptr, 0, out_bytes);
    FAID_CL_TRY(d, clEnqueueWriteBuffer(e->ctx->queue, sl->d_out, CL_TRUE, 0, out_bytes,
                                        sl->h_out_ptr, 0, NULL, NULL));
    if (!e->fused) {
        sl->d_pre = faid_cl_buffer(e->ctx, CL_MEM_READ_WRITE, r->npix * 4 * sizeof(float), NULL, d);
        if (!sl->d_pre)
            return d ? d->code : FAID_ECL;
    }
    return FAID_OK;
}

/* The n frame slots of r (reference device: only the result each lane hands over). */
static int slots_create(faid_engine *e, eng_res *r, int n, faid_diag *d)
{
    r->slot = calloc((size_t)n, sizeof *r->slot);
    if (!r->slot)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    r->nslots = n;
    for (int k = 0; k < n; k++) {
        eng_slot *sl = &r->slot[k];
        int rc = FAID_OK;
        sl->lane = calloc((size_t)e->batch, sizeof *sl->lane);
        if (!sl->lane)
            rc = faid_fail(d, FAID_ENOMEM, "engine: out of memory");
        else
            sl->nlanes = e->batch;
        if (!rc && !e->is_ref)
            rc = slot_create(e, r, sl, d);
        for (int f = 0; !rc && f < e->batch; f++) {
            if (e->is_ref) {
                sl->lane[f].ref_res = faid_result_new(r->setup);
                if (!sl->lane[f].ref_res)
                    rc = faid_fail(d, FAID_ENOMEM, "engine: out of memory");
            } else {
                rc = faid_block_table_alloc(&sl->lane[f].tab, r->max_blocks, d);
            }
        }
        if (rc) {
            slots_destroy(e, r);
            return rc;
        }
    }
    return FAID_OK;
}

static int res_create(faid_engine *e, const faid_setup *s, eng_res **out, faid_diag *d)
{
    *out = NULL;
    if (!s)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    if (s->rows <= 0 || s->cols <= 0 || (size_t)s->rows * (size_t)s->cols != s->npix)
        return faid_fail(d, FAID_ESHAPE, "engine: setup shape %dx%d does not match %zu pixels",
                         s->rows, s->cols, s->npix);
    if (s->npix > (size_t)INT32_MAX / 4)
        return faid_fail(d, FAID_ERANGE, "engine: %zu pixels is too many", s->npix);
    if (s->corr.npix != s->npix)
        return faid_fail(d, FAID_ESHAPE, "engine: corrections cover %zu pixels, setup has %zu",
                         s->corr.npix, s->npix);
    int rc = check_csr(s->csr, s->npix, "1D", d);
    if (!rc && s->csr2d)
        rc = check_csr(s->csr2d, s->npix, "2D", d);
    if (rc)
        return rc;
    eng_res *r = calloc(1, sizeof *r);
    if (!r)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    r->setup = s;
    r->npix = s->npix;
    r->max_raw_bytes = s->npix * 4;
    r->max_comp_bytes = max_comp_bound(s->npix);
    r->max_blocks = faid_bslz4_max_blocks(r->max_raw_bytes, 1, 0);
    /* lane layout of d_out: 1D I..count, 1D sums, 2D I..count, 2D sums (or, with the 2D sums
     * off, those in an area after the lanes that is never read back), decode flag */
    const size_t n1 = (size_t)s->csr->nbins, n2 = s->csr2d ? (size_t)s->csr2d->nbins : 0;
    r->m[0].out_off = 0;
    r->m[0].sum_off = (int)(4 * n1);
    r->m[1].out_off = (int)(8 * n1);
    if (e->sums2d || !n2) {
        r->m[1].sum_off = (int)(8 * n1 + 4 * n2);
        r->nout = 8 * (n1 + n2);
        r->nsum_far = 0;
    } else {
        r->m[1].sum_off = -1;
        r->nout = 8 * n1 + 4 * n2;
        r->nsum_far = 4 * n2;
    }

    if (e->is_ref) {
        r->ref_raw = malloc(r->max_raw_bytes);
        r->ref_pre = malloc(s->npix * 4 * sizeof(float));
        if (!r->ref_raw || !r->ref_pre) {
            res_destroy(e, &r);
            return faid_fail(d, FAID_ENOMEM, "engine: out of memory for %zu pixels", s->npix);
        }
        if ((rc = slots_create(e, r, e->depth, d))) {
            res_destroy(e, &r);
            return rc;
        }
        *out = r;
        return FAID_OK;
    }

    float *normp = malloc(s->npix * sizeof(float));
    if (!normp) {
        res_destroy(e, &r);
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory for %zu pixels", s->npix);
    }
    fold_norm(&s->corr, normp);
    const float one = 1.0f;
    r->d_one = upload(e, &one, sizeof one, d);
    r->d_normp = r->d_one ? upload(e, normp, s->npix * sizeof(float), d) : NULL;
    free(normp);
    if (!r->d_normp)
        goto fail;
    r->do_dark = s->corr.dark != NULL;
    if (r->do_dark) {
        r->d_dark = upload(e, s->corr.dark, s->npix * sizeof(float), d);
        if (!r->d_dark)
            goto fail;
    } else {
        r->d_dark = r->d_one;
        clRetainMemObject(r->d_dark);
    }
    if ((rc = res_matrix(e, r, 0, s->csr, d)))
        goto fail_rc;
    if (s->csr2d && (rc = res_matrix(e, r, 1, s->csr2d, d)))
        goto fail_rc;
    if ((rc = slots_create(e, r, e->depth, d)))
        goto fail_rc;
    *out = r;
    return FAID_OK;
fail:
    rc = d && d->code ? d->code : FAID_ECL;
fail_rc:
    faid_diag_prefix(d, "engine setup on %s: ", e->name);
    res_destroy(e, &r);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* public API */

faid_engine *faid_engine_new(const faid_setup *setup, const char *device, faid_diag *d)
{
    faid_engine *e = calloc(1, sizeof *e);
    if (!e) {
        faid_fail(d, FAID_ENOMEM, "engine: out of memory");
        return NULL;
    }
    e->fused = 1;
    e->sums2d = 1;
    e->depth = 1;
    e->batch = 1;
    const char *ov = getenv("FAID_ENGINE_WG");
    if (ov && *ov) {
        long v = strtol(ov, NULL, 10);
        if (v > 0 && v <= 1024)
            e->wg_override = (size_t)v;
    }
    const char *rv = getenv("FAID_ENGINE_ROWS");
    e->rows_env = rv && (rv[0] == '0' || rv[0] == '1') && !rv[1] ? rv[0] - '0' : -1;
    if (!device || !*device)
        device = "auto";
    if (strcmp(device, "ref") == 0) {
        e->is_ref = 1;
        snprintf(e->name, sizeof e->name, "reference C");
    } else {
        faid_cl_device_info info;
        if (faid_cl_select(device, &info, d)) {
            free(e);
            return NULL;
        }
        e->ctx = faid_cl_ctx_new(&info, 1, d);
        if (!e->ctx) {
            free(e);
            return NULL;
        }
        snprintf(e->name, sizeof e->name, "%s (%s)", info.name, info.platform_name);
    }
    if (faid_engine_set_setup(e, setup, d)) {
        faid_engine_destroy(&e);
        return NULL;
    }
    return e;
}

void faid_engine_destroy(faid_engine **pe)
{
    if (!pe || !*pe)
        return;
    faid_engine *e = *pe;
    res_destroy(e, &e->res);
    while (e->nhost > 0) {
        void *p = e->host[e->nhost - 1].ptr;
        faid_engine_host_free(e, &p);
    }
    free(e->scratch);
    for (int t = 0; t < NDTYPES; t++)
        for (int m = 0; m < NEM; m++)
            prog_release(&e->progs[t][m]);
    for (int i = 0; i < 3; i++)
        faid_clcodec_destroy(&e->codec[i]);
    faid_cl_ctx_destroy(&e->ctx);
    free(e);
    *pe = NULL;
}

const char *faid_engine_device_name(const faid_engine *e)
{
    return e ? e->name : "";
}

int faid_engine_set_setup(faid_engine *e, const faid_setup *setup, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    if (e->inflight)
        return faid_fail(d, FAID_EBUSY,
                         "engine: %d frames in flight, collect them before a "
                         "reload",
                         e->inflight);
    /* build the new resources before dropping the old ones, so a failed reload keeps the engine
     * working with the previous setup */
    eng_res *r = NULL;
    int rc = res_create(e, setup, &r, d);
    if (rc)
        return rc;
    res_destroy(e, &e->res);
    e->res = r;
    return FAID_OK;
}

int faid_engine_set_fused(faid_engine *e, int fused, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    fused = fused != 0;
    if (e->inflight && e->fused != fused)
        return faid_fail(d, FAID_EBUSY, "engine: %d frames in flight", e->inflight);
    if (e->fused == fused || e->is_ref) {
        e->fused = fused;
        return FAID_OK;
    }
    e->fused = fused;
    if (!e->res)
        return FAID_OK;
    return faid_engine_set_setup(e, e->res->setup, d);
}

int faid_engine_set_sums_2d(faid_engine *e, int on, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    on = on != 0;
    if (e->sums2d == on)
        return FAID_OK;
    if (e->inflight)
        return faid_fail(d, FAID_EBUSY, "engine: %d frames in flight", e->inflight);
    e->sums2d = on;
    if (!e->res || e->is_ref)
        return FAID_OK;
    int rc = faid_engine_set_setup(e, e->res->setup, d);
    if (rc)
        e->sums2d = !on; /* the engine kept its previous resources */
    return rc;
}

int faid_engine_prepare(faid_engine *e, faid_dtype dtype, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    if (e->is_ref)
        return raw_code(dtype) ? FAID_OK
                               : faid_fail(d, FAID_EDTYPE, "frame dtype %s is not supported",
                                           faid_dtype_name(dtype));
    if (!e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    eng_prog *p;
    int rc = get_prog(e, dtype, e->res->setup->corr.error_model, &p, d);
    if (!rc)
        get_codec(e, faid_dtype_size(dtype), e->res->npix * faid_dtype_size(dtype));
    return rc;
}

size_t faid_engine_workgroup(const faid_engine *e, int which)
{
    if (!e || !e->res || e->is_ref || which < 0 || which > 1 || !e->res->m[which].present)
        return 0;
    return e->res->m[which].wg;
}

int faid_engine_rows_mode(const faid_engine *e, int which)
{
    if (!e || !e->res || e->is_ref || which < 0 || which > 1 || !e->res->m[which].present)
        return 0;
    return e->res->m[which].rows;
}

faid_result *faid_result_new(const faid_setup *setup)
{
    if (!setup || !setup->csr)
        return NULL;
    faid_result *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->p1d = faid_profile_new(setup->csr->nbins, 0);
    if (!r->p1d) {
        free(r);
        return NULL;
    }
    if (setup->csr2d) {
        r->p2d = faid_profile_new(setup->csr2d->npt_rad, setup->csr2d->npt_azim);
        if (!r->p2d) {
            faid_result_destroy(&r);
            return NULL;
        }
    }
    return r;
}

void faid_result_destroy(faid_result **pr)
{
    if (!pr || !*pr)
        return;
    faid_profile_destroy(&(*pr)->p1d);
    faid_profile_destroy(&(*pr)->p2d);
    free(*pr);
    *pr = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* processing */

static int check_frame(const eng_res *r, const faid_frame *f, faid_diag *d)
{
    const faid_setup *s = r->setup;
    if (!f)
        return faid_fail(d, FAID_EINVAL, "engine: NULL frame");
    if (f->rows != s->rows || f->cols != s->cols)
        return faid_fail(d, FAID_ESHAPE, "frame is %dx%d, the setup expects %dx%d", f->rows,
                         f->cols, s->rows, s->cols);
    if (!raw_code(f->dtype))
        return faid_fail(d, FAID_EDTYPE,
                         "frame dtype %s is not supported (uint8/16/32, "
                         "int8/16/32, float32)",
                         faid_dtype_name(f->dtype));
    if (!f->data && f->len)
        return faid_fail(d, FAID_EINVAL, "frame has no data");
    if (f->encoding == FAID_ENC_BSLZ4 && f->len > r->max_comp_bytes)
        return faid_fail(d, FAID_ESIZE,
                         "bslz4 payload of %zu bytes exceeds the %zu bytes a %dx%d "
                         "frame can take",
                         f->len, r->max_comp_bytes, s->rows, s->cols);
    return FAID_OK;
}

static int check_result(const eng_res *r, const faid_result *res, int code, faid_diag *d)
{
    const faid_setup *s = r->setup;
    if (!res)
        return faid_fail(d, FAID_EINVAL, "engine: NULL result");
    if (!res->p1d || res->p1d->nbins != s->csr->nbins)
        return faid_fail(d, code,
                         "result has %d bins, the setup %d (make the result with "
                         "faid_result_new after a reload)",
                         res->p1d ? res->p1d->nbins : 0, s->csr->nbins);
    if (s->csr2d && (!res->p2d || res->p2d->nbins != s->csr2d->nbins))
        return faid_fail(d, code, "result has no or a different 2D profile than the setup");
    return FAID_OK;
}

static int decode_cpu(const faid_frame *f, void *dst, size_t raw_bytes, faid_diag *d)
{
    size_t esz = faid_dtype_size(f->dtype);
    if (f->encoding == FAID_ENC_NONE) {
        if (f->len != raw_bytes)
            return faid_fail(d, FAID_ESIZE, "raw frame of %zu bytes, expected %zu", f->len,
                             raw_bytes);
        memcpy(dst, f->data, raw_bytes);
        return FAID_OK;
    }
    return faid_decode(f->encoding, f->data, f->len, esz, dst, raw_bytes, d);
}

static int process_ref(faid_engine *e, const faid_frame *f, faid_result *res, faid_diag *d)
{
    eng_res *r = e->res;
    const faid_setup *s = r->setup;
    size_t raw_bytes = r->npix * faid_dtype_size(f->dtype);
    double t0 = now_us();
    int rc = decode_cpu(f, r->ref_raw, raw_bytes, d);
    if (rc)
        return rc;
    double t1 = now_us();
    rc = faid_ref_preprocess(&s->corr, f->dtype, r->ref_raw, r->ref_pre, d);
    if (rc)
        return rc;
    double t2 = now_us();
    rc = faid_ref_integrate(s->csr, &s->corr, r->ref_pre, res->p1d, d);
    if (!rc && s->csr2d)
        rc = faid_ref_integrate(s->csr2d, &s->corr, r->ref_pre, res->p2d, d);
    if (rc)
        return rc;
    double t3 = now_us();
    memset(&res->t, 0, sizeof res->t);
    res->t.decode_us = t1 - t0;
    res->t.preprocess_us = t2 - t1;
    res->t.integrate_us = t3 - t2;
    res->t.total_us = t3 - t0;
    return FAID_OK;
}

static double ev_us(cl_event ev)
{
    if (!ev)
        return 0.0;
    cl_ulong a = 0, b = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) != CL_SUCCESS)
        return 0.0;
    return b > a ? (double)(b - a) * 1e-3 : 0.0;
}

/* The correction flags every raw-reading kernel takes after its buffers (do_dark, do_dummy,
 * dummy, delta_dummy), set from argument *a on; *a ends past them. */
static int set_corr_args(cl_kernel k, cl_uint *a, const eng_res *r, faid_diag *d)
{
    const faid_corrections *c = &r->setup->corr;
    cl_int do_dark = r->do_dark, do_dummy = c->do_dummy;
    cl_float dummy = c->dummy, ddummy = c->delta_dummy;
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof do_dark, &do_dark));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof do_dummy, &do_dummy));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof dummy, &dummy));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof ddummy, &ddummy));
    return FAID_OK;
}

/* The matrix m and the output buffer, as every integration kernel takes them (indptr, indices,
 * coef, has_coef, nbins, empty, d_out), set from argument *a on; *a ends past them. */
static int set_matrix_args(cl_kernel k, cl_uint *a, const eng_res *r, const eng_slot *sl,
                           const eng_matrix *m, faid_diag *d)
{
    cl_int nb = m->nbins, hc = m->has_coef;
    cl_float empty = r->setup->corr.empty;
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof(cl_mem), &m->indptr));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof(cl_mem), &m->indices));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof(cl_mem), &m->coef));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof hc, &hc));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof nb, &nb));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof empty, &empty));
    FAID_CL_TRY(d, clSetKernelArg(k, (*a)++, sizeof(cl_mem), &sl->d_out));
    return FAID_OK;
}

/* Arguments of the one-frame integration kernels (fused: the frame at element raw_off of
 * d_raw; unfused: d_pre). */
static int set_int_args(cl_kernel k, int fused, const eng_res *r, const eng_slot *sl,
                        const eng_matrix *m, size_t wg, cl_int out_off, cl_int sum_off,
                        cl_uint raw_off, faid_diag *d)
{
    cl_uint a = 0;
    int rc;
    if (fused) {
        FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &sl->d_raw));
        FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &r->d_dark));
        FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &r->d_normp));
        if ((rc = set_corr_args(k, &a, r, d)))
            return rc;
    } else {
        FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &sl->d_pre));
    }
    if ((rc = set_matrix_args(k, &a, r, sl, m, d)))
        return rc;
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof out_off, &out_off));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof sum_off, &sum_off));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, wg * ACC_BYTES, NULL));
    if (fused)
        FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof raw_off, &raw_off));
    return FAID_OK;
}

/* Arguments of the preprocessing kernel: frame at element raw_off of d_raw into d_pre. */
static int set_pre_args(cl_kernel k, const eng_res *r, const eng_slot *sl, cl_uint raw_off,
                        faid_diag *d)
{
    cl_uint a = 0;
    cl_int npix = (cl_int)r->npix;
    int rc;
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &sl->d_raw));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &r->d_dark));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &r->d_normp));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof npix, &npix));
    if ((rc = set_corr_args(k, &a, r, d)))
        return rc;
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &sl->d_pre));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof raw_off, &raw_off));
    return FAID_OK;
}

/* The chosen work-group size, halved while the compiled kernel cannot take it (a property of
 * device and program, so still the same on every run). */
static size_t launch_wg(size_t wg, size_t kmax)
{
    while (kmax && wg > kmax && wg > 1)
        wg >>= 1;
    return wg;
}

/* Element offset and lane stride of the sums of matrix m in d_out. */
static void sum_place(const eng_res *r, const eng_slot *sl, const eng_matrix *m, cl_int *off,
                      cl_int *stride)
{
    if (m->sum_off >= 0) {
        *off = m->sum_off;
        *stride = (cl_int)sl->out_stride;
    } else {
        *off = (cl_int)((size_t)sl->nlanes * sl->out_stride);
        *stride = (cl_int)r->nsum_far;
    }
}

/* Arguments of faid_integrate_raw_b (rows == 0) or faid_rows_raw (rows == 1) for the slot's n
 * frames. */
static int set_batch_args(cl_kernel k, int rows, const eng_res *r, const eng_slot *sl,
                          const eng_matrix *m, size_t wg, cl_uint raw_stride, faid_diag *d)
{
    cl_uint a = 0;
    cl_int n = sl->n, os = (cl_int)sl->out_stride;
    cl_int out_off = m->out_off, sum_off, ss;
    sum_place(r, sl, m, &sum_off, &ss);
    const cl_uint zero = 0;
    int rc;
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &sl->d_raw));
    if (rows)
        FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof zero, &zero));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof raw_stride, &raw_stride));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof n, &n));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &r->d_dark));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &r->d_normp));
    if ((rc = set_corr_args(k, &a, r, d)) || (rc = set_matrix_args(k, &a, r, sl, m, d)))
        return rc;
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof out_off, &out_off));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof os, &os));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof sum_off, &sum_off));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof ss, &ss));
    if (!rows)
        FAID_CL_TRY(d, clSetKernelArg(k, a++, wg * ACC_BYTES, NULL));
    return FAID_OK;
}

/* Arguments of faid_rows_pre for one lane. */
static int set_rows_pre_args(cl_kernel k, const eng_res *r, const eng_slot *sl,
                             const eng_matrix *m, int f, faid_diag *d)
{
    cl_uint a = 0;
    cl_int sum_off, ss;
    sum_place(r, sl, m, &sum_off, &ss);
    cl_int out_off = (cl_int)((size_t)f * sl->out_stride) + m->out_off;
    sum_off += f * ss;
    int rc;
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof(cl_mem), &sl->d_pre));
    if ((rc = set_matrix_args(k, &a, r, sl, m, d)))
        return rc;
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof out_off, &out_off));
    FAID_CL_TRY(d, clSetKernelArg(k, a++, sizeof sum_off, &sum_off));
    return FAID_OK;
}

/* Local and global size of a rows-mode launch over nbins work-items. */
static void rows_range(const faid_engine *e, size_t kmax, int nbins, size_t *lws, size_t *gws)
{
    size_t l = e->ctx->info.is_gpu ? 128 : 16;
    if (e->ctx->info.max_wg && l > e->ctx->info.max_wg)
        l = e->ctx->info.max_wg;
    l = launch_wg(l, kmax);
    *lws = l;
    *gws = ((size_t)nbins + l - 1) / l * l;
}

/* I..count from src, the sums from sums (NULL: not read back, left as they were). */
static void copy_profile(faid_profile *p, const float *src, const float *sums)
{
    size_t n = (size_t)p->nbins;
    float *dst[NOUT] = {p->I,          p->sigma,    p->std,          p->count,
                        p->sum_signal, p->sum_norm, p->sum_variance, p->sum_norm_sq};
    for (int k = 0; k < 4; k++)
        memcpy(dst[k], src + (size_t)k * n, n * sizeof(float));
    for (int k = 4; sums && k < NOUT; k++)
        memcpy(dst[k], sums + (size_t)(k - 4) * n, n * sizeof(float));
}

static void profile_assign(faid_profile *dst, const faid_profile *src)
{
    size_t n = (size_t)src->nbins * sizeof(float);
    memcpy(dst->I, src->I, n);
    memcpy(dst->sigma, src->sigma, n);
    memcpy(dst->std, src->std, n);
    memcpy(dst->count, src->count, n);
    memcpy(dst->sum_signal, src->sum_signal, n);
    memcpy(dst->sum_norm, src->sum_norm, n);
    memcpy(dst->sum_variance, src->sum_variance, n);
    memcpy(dst->sum_norm_sq, src->sum_norm_sq, n);
}

/* Whether [p, p + n) lies inside one of the engine's pinned host buffers. */
static int host_pinned(const faid_engine *e, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (int i = 0; i < e->nhost; i++) {
        const uint8_t *h = e->host[i].ptr;
        if (b >= h && n <= e->host[i].bytes && (size_t)(b - h) <= e->host[i].bytes - n)
            return 1;
    }
    return 0;
}

/* Host part of one frame on an OpenCL device, into lane f of slot sl, then its device commands on
 * the slot's queue, without waiting: H2D (block table + compressed bytes, or the decoded frame)
 * and the decode. The integration and the D2H follow when the slot closes (slot_close). */
static int cl_submit(faid_engine *e, eng_slot *sl, int f_lane, const faid_frame *f,
                     const faid_block_table *ftab, faid_diag *d)
{
    eng_res *r = e->res;
    eng_lane *ln = &sl->lane[f_lane];
    const faid_corrections *c = &r->setup->corr;
    size_t raw_bytes = r->npix * faid_dtype_size(f->dtype);
    int rc;
    eng_prog *p;
    if ((rc = get_prog(e, f->dtype, c->error_model, &p, d)))
        return rc;

    /* Where the bytes are: in this lane's staging (written there by the producer), in engine
     * pinned memory (the H2D reads them in place), or anywhere else (copied into staging). */
    size_t esz = faid_dtype_size(f->dtype);
    uint8_t *lane_base = sl->staging_ptr + (size_t)f_lane * sl->lane_bytes;
    uint8_t *stage = lane_base + sl->table_bytes;
    const size_t stage_cap = sl->lane_bytes - sl->table_bytes;
    const size_t in_off = (size_t)f_lane * sl->lane_bytes;  /* lane in d_in */
    const size_t raw_off = (size_t)f_lane * sl->raw_stride; /* lane in d_raw */
    const size_t flag_idx = (size_t)f_lane * sl->out_stride + r->nout;
    const uint8_t *src = f->data;
    const int in_stage = f->len > 0 && src == stage;
    if (!in_stage && f->len && src < lane_base + sl->lane_bytes && src + f->len > lane_base)
        return faid_fail(d, FAID_EINVAL,
                         "frame bytes overlap a slot's staging buffer without "
                         "starting at it (faid_engine_slot_buffer)");
    if (in_stage && f->len > stage_cap)
        return faid_fail(d, FAID_ESIZE, "frame of %zu bytes overruns the %zu-byte slot buffer",
                         f->len, stage_cap);
    const int pinned = !in_stage && f->len && host_pinned(e, src, f->len);
    const int lzx = f->encoding == FAID_ENC_BSLZ4 || f->encoding == FAID_ENC_LZ4;
    const faid_block_table *t = &ln->tab;
    faid_clcodec *codec = NULL;
    double h0 = now_us();
    /* Bytes to be copied into staging are copied first: the table walk then reads them from
     * the cache instead of taking one memory miss per block in the caller's cold buffer. */
    int copied = 0;
    if (lzx && !in_stage && !pinned && f->len <= stage_cap) {
        memcpy(stage, src, f->len);
        copied = 1;
    }
    double hc = now_us();
    if (lzx && ftab) {
        t = ftab; /* checked by check_table */
    } else if (lzx) {
        const uint8_t *walk = copied ? stage : src;
        rc = f->encoding == FAID_ENC_BSLZ4
                 ? faid_bslz4_table(walk, f->len, esz, raw_bytes, &ln->tab, d)
                 : faid_lz4h5_table(walk, f->len, raw_bytes, &ln->tab, d);
        if (rc && f->encoding == FAID_ENC_BSLZ4)
            return rc;
    }
    if (lzx) {
        /* an lz4 chunk whose table does not fit here is left to the CPU decoder's verdict */
        if (!rc && faid_clcodec_table_bytes(t) <= sl->table_bytes && f->len <= stage_cap) {
            codec = get_codec(e, esz, r->max_raw_bytes);
            if (codec && faid_clcodec_supports(codec, f->encoding, t, NULL) != FAID_OK)
                codec = NULL;
        }
        faid_diag_clear(d);
    }
    size_t tb = 0;
    if (codec) {
        tb = faid_clcodec_table_bytes(t);
        faid_clcodec_pack_table(t, (uint32_t *)(stage - tb));
    }
    double h1 = now_us();
    /* direct: the H2D reads the caller's pinned bytes; otherwise from stage */
    int direct = 0;
    if (codec) {
        direct = pinned;
        if (!in_stage && !pinned && !copied)
            memcpy(stage, src, f->len);
    } else if (f->encoding == FAID_ENC_NONE && (in_stage || pinned)) {
        if (f->len != raw_bytes)
            return faid_fail(d, FAID_ESIZE, "raw frame of %zu bytes, expected %zu", f->len,
                             raw_bytes);
        direct = pinned;
    } else if (in_stage) {
        /* CPU decode of bytes that sit where the decoded frame goes: through the scratch */
        if (e->scratch_bytes < raw_bytes) {
            free(e->scratch);
            e->scratch_bytes = 0;
            e->scratch = malloc(r->max_raw_bytes);
            if (!e->scratch)
                return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
            e->scratch_bytes = r->max_raw_bytes;
        }
        if ((rc = decode_cpu(f, e->scratch, raw_bytes, d)))
            return rc;
        memcpy(stage, e->scratch, raw_bytes);
    } else if ((rc = decode_cpu(f, stage, raw_bytes, d))) {
        return rc;
    }
    double h2 = now_us();

    cl_command_queue q = sl->q;
    cl_event *ev = ln->ev;
    rc = FAID_ECL;
    if (ln->err_dirty) {
        /* a corrupt frame left the flag set: clear it (only then: one command less per frame) */
        static const cl_int zero = 0;
        FAID_CL_TRY_GOTO(d, rc, fail,
                         clEnqueueWriteBuffer(q, sl->d_out, CL_FALSE, flag_idx * sizeof(float),
                                              sizeof zero, &zero, 0, NULL, NULL));
        ln->err_dirty = 0;
    }
    if (codec) {
        ln->err_dirty = 1;
        if (direct) {
            if (tb)
                FAID_CL_TRY_GOTO(d, rc, fail,
                                 clEnqueueWriteBuffer(q, sl->d_in, CL_FALSE,
                                                      in_off + sl->table_bytes - tb, tb, stage - tb,
                                                      0, NULL, &ev[EV_H2DT]));
            FAID_CL_TRY_GOTO(d, rc, fail,
                             clEnqueueWriteBuffer(q, sl->d_in, CL_FALSE, in_off + sl->table_bytes,
                                                  f->len, src, 0, NULL, &ev[EV_H2D]));
        } else {
            FAID_CL_TRY_GOTO(d, rc, fail,
                             clEnqueueWriteBuffer(q, sl->d_in, CL_FALSE,
                                                  in_off + sl->table_bytes - tb, tb + f->len,
                                                  stage - tb, 0, NULL, &ev[EV_H2D]));
        }
        faid_clcodec_io io = {sl->d_in,  in_off + sl->table_bytes,
                              sl->d_in,  in_off + sl->table_bytes - tb,
                              sl->d_raw, raw_off,
                              sl->d_out, flag_idx};
        if ((rc = faid_clcodec_enqueue_io(codec, q, f->encoding, &io, t, 0, NULL, &ev[EV_DEC], d)))
            goto fail;
        rc = FAID_ECL;
    } else {
        FAID_CL_TRY_GOTO(d, rc, fail,
                         clEnqueueWriteBuffer(q, sl->d_raw, CL_FALSE, raw_off, raw_bytes,
                                              direct ? (const void *)src : (const void *)stage, 0,
                                              NULL, &ev[EV_H2D]));
    }
    ln->enc = f->encoding;
    ln->len = f->len;
    ln->nblocks = codec ? t->nblocks : 0;
    ln->device_decode = codec != NULL;
    ln->zero_copy = direct || (in_stage && (codec || f->encoding == FAID_ENC_NONE));
    ln->table_us = h1 - hc;
    ln->stage_us = h2 - h0;
    ln->cpu_decode_us = codec || f->encoding == FAID_ENC_NONE ? 0.0 : h2 - h1;
    return FAID_OK;
fail:
    clFinish(q);
    for (int i = 0; i < EV_N; i++)
        release_event(&ln->ev[i]);
    return rc;
}

/* Enqueues the integration of the slot's n frames and one D2H of their profiles and decode
 * flags: one launch per matrix for the whole batch (fused kernels, error models none and
 * poisson, batch > 1), else the one-frame kernels lane after lane. */
static int slot_close(faid_engine *e, eng_slot *sl, faid_diag *d)
{
    eng_res *r = e->res;
    const faid_corrections *c = &r->setup->corr;
    cl_command_queue q = sl->q;
    eng_prog *p;
    int rc = get_prog(e, sl->dtype, c->error_model, &p, d);
    if (rc)
        return rc;
    const size_t esz = faid_dtype_size(sl->dtype);
    const int nm = r->m[1].present ? 2 : 1;
    rc = FAID_ECL;
    /* fused: one launch per matrix for the whole slot (rows mode, or the batch kernel), else one
     * per lane */
    int batched[2] = {0, 0}, per_lane = !e->fused;
    for (int m = 0; m < nm; m++) {
        const eng_matrix *mx = &r->m[m];
        batched[m] = e->fused && (mx->rows || (p->int_batch && e->batch > 1));
        if (!batched[m]) {
            per_lane = 1;
            continue;
        }
        cl_kernel k = mx->rows ? p->rows_raw : p->int_batch;
        size_t lws, gws;
        if (mx->rows) {
            rows_range(e, p->kwg_rows_raw, mx->nbins, &lws, &gws);
        } else {
            lws = launch_wg(mx->wg, p->kwg_batch);
            gws = (size_t)mx->nbins * lws;
        }
        if ((rc = set_batch_args(k, mx->rows, r, sl, mx, lws, (cl_uint)(sl->raw_stride / esz), d)))
            goto fail;
        rc = FAID_ECL;
        FAID_CL_TRY_GOTO(d, rc, fail,
                         clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, &lws, 0, NULL,
                                                &sl->ev_bint[m]));
    }
    for (int f = 0; per_lane && f < sl->n; f++) {
        eng_lane *ln = &sl->lane[f];
        cl_uint raw_off = (cl_uint)((size_t)f * sl->raw_stride / esz);
        if (!e->fused) {
            cl_kernel k = p->pre;
            if ((rc = set_pre_args(k, r, sl, raw_off, d)))
                goto fail;
            rc = FAID_ECL;
            size_t lws = e->ctx->info.is_gpu ? 256 : 64;
            if (lws > e->ctx->info.max_wg)
                lws = e->ctx->info.max_wg;
            size_t gws = (r->npix + lws - 1) / lws * lws;
            FAID_CL_TRY_GOTO(
                d, rc, fail,
                clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, &lws, 0, NULL, &ln->ev[EV_PRE]));
        }
        cl_int off = (cl_int)((size_t)f * sl->out_stride);
        for (int m = 0; m < nm; m++) {
            const eng_matrix *mx = &r->m[m];
            if (batched[m])
                continue;
            size_t lws, gws;
            cl_kernel k;
            if (mx->rows) { /* unfused here: fused rows are always batched */
                k = p->rows_pre;
                rows_range(e, p->kwg_rows_pre, mx->nbins, &lws, &gws);
                rc = set_rows_pre_args(k, r, sl, mx, f, d);
            } else {
                k = e->fused ? p->int_raw : p->int_pre;
                lws = launch_wg(mx->wg, e->fused ? p->kwg_raw : p->kwg_pre);
                gws = (size_t)mx->nbins * lws;
                cl_int soff, ss;
                sum_place(r, sl, mx, &soff, &ss);
                rc = set_int_args(k, e->fused, r, sl, mx, lws, off + mx->out_off,
                                  soff + f * ss, raw_off, d);
            }
            if (rc)
                goto fail;
            rc = FAID_ECL;
            FAID_CL_TRY_GOTO(d, rc, fail,
                             clEnqueueNDRangeKernel(q, k, 1, NULL, &gws, &lws, 0, NULL,
                                                    &ln->ev[EV_INT1 + m]));
        }
    }
    /* profiles and decode flags of every lane in one copy */
    FAID_CL_TRY_GOTO(d, rc, fail,
                     clEnqueueReadBuffer(q, sl->d_out, CL_FALSE, 0,
                                         (size_t)sl->n * sl->out_stride * sizeof(float),
                                         sl->h_out_ptr, 0, NULL, &sl->ev_d2h));
    FAID_CL_TRY_GOTO(d, rc, fail, clFlush(q));
    sl->closed = 1;
    return FAID_OK;
fail:
    clFinish(q);
    release_event(&sl->ev_bint[0]);
    release_event(&sl->ev_bint[1]);
    release_event(&sl->ev_d2h);
    return rc;
}

/* Waits for (or polls) the slot's D2H, checks lane f's decode flag, copies its profiles and stage
 * times into res. FAID_EBUSY only when polling found it unfinished (nothing consumed). */
static int cl_collect(faid_engine *e, eng_slot *sl, int f, faid_result *res, int block,
                      faid_diag *d)
{
    eng_res *r = e->res;
    eng_lane *ln = &sl->lane[f];
    int rc = FAID_ECL;
    if (!sl->closed && (rc = slot_close(e, sl, d)))
        goto out;
    rc = FAID_ECL;
    if (!block) {
        cl_int st = CL_COMPLETE;
        FAID_CL_TRY_GOTO(
            d, rc, out,
            clGetEventInfo(sl->ev_d2h, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        if (st > CL_COMPLETE)
            return FAID_EBUSY;
    }
    FAID_CL_TRY_GOTO(d, rc, out, clWaitForEvents(1, &sl->ev_d2h));
    const float *h = sl->h_out_ptr + (size_t)f * sl->out_stride;
    cl_int h_err;
    memcpy(&h_err, h + r->nout, sizeof h_err);
    if (h_err != 0) {
        rc = faid_fail(d, FAID_ECORRUPT,
                       "corrupt %s chunk: block %d failed to decode on the "
                       "device (%u blocks, %zu bytes)",
                       faid_encoding_name(ln->enc), (int)h_err - 1, ln->nblocks, ln->len);
        goto out;
    }
    if (ln->device_decode)
        ln->err_dirty = 0;
    copy_profile(res->p1d, h + r->m[0].out_off, h + r->m[0].sum_off);
    if (r->m[1].present)
        copy_profile(res->p2d, h + r->m[1].out_off,
                     r->m[1].sum_off >= 0 ? h + r->m[1].sum_off : NULL);
    const cl_event *ev = ln->ev;
    const double share = 1.0 / sl->n;
    memset(&res->t, 0, sizeof res->t);
    res->t.decode_us = ln->device_decode ? ev_us(ev[EV_DEC]) : ln->cpu_decode_us;
    res->t.preprocess_us = ev_us(ev[EV_PRE]);
    res->t.integrate_us = (ev_us(sl->ev_bint[0]) + ev_us(sl->ev_bint[1])) * share +
                          ev_us(ev[EV_INT1]) + ev_us(ev[EV_INT2]);
    res->t.h2d_us = ev_us(ev[EV_H2D]) + ev_us(ev[EV_H2DT]);
    res->t.d2h_us = ev_us(sl->ev_d2h) * share;
    res->t.transfer_us = res->t.h2d_us + res->t.d2h_us;
    res->t.stage_us = ln->stage_us;
    res->t.table_us = ln->table_us;
    res->t.device_decode = ln->device_decode;
    res->t.zero_copy = ln->zero_copy;
    res->t.batch = sl->n;
    res->t.total_us = now_us() - ln->t_submit;
    rc = FAID_OK;
out:
    if (rc)
        clFinish(sl->q);
    for (int i = 0; i < EV_N; i++)
        release_event(&ln->ev[i]);
    return rc;
}

/* A caller's block table must at least describe a chunk of this frame's size and dtype. */
static int check_table(const eng_res *r, const faid_frame *f, const faid_block_table *t,
                       faid_diag *d)
{
    size_t raw_bytes = r->npix * faid_dtype_size(f->dtype);
    if (t->total_bytes != raw_bytes)
        return faid_fail(d, FAID_ESIZE,
                         "block table of a chunk that decodes to %llu bytes given "
                         "with a frame of %zu bytes",
                         (unsigned long long)t->total_bytes, raw_bytes);
    if (f->encoding == FAID_ENC_BSLZ4 && t->elem_size != faid_dtype_size(f->dtype))
        return faid_fail(d, FAID_EINVAL, "block table of %u-byte elements given with a %s frame",
                         t->elem_size, faid_dtype_name(f->dtype));
    return FAID_OK;
}

/* The slot taking frames now (filled partly, not closed), or NULL. */
static eng_slot *open_slot(faid_engine *e)
{
    eng_res *r = e->res;
    if (!e->used)
        return NULL;
    eng_slot *sl = &r->slot[(e->head + e->used - 1) % r->nslots];
    return !sl->closed && sl->n < e->batch ? sl : NULL;
}

/* The slot and lane the next frame goes to, opening a slot if needed; NULL (FAID_EBUSY) when
 * every slot is in use. A frame of another dtype than the open slot's closes it first. */
static eng_slot *take_lane(faid_engine *e, faid_dtype dt, int *opened, faid_diag *d)
{
    eng_res *r = e->res;
    eng_slot *sl = open_slot(e);
    *opened = 0;
    if (sl && sl->dtype != dt) {
        if (!e->is_ref && slot_close(e, sl, d))
            FAID_DEBUG("engine", "closing a slot early failed: %s", d ? d->msg : "");
        sl->closed = 1;
        sl = NULL;
    }
    if (sl)
        return sl;
    if (e->used == r->nslots) {
        faid_fail(d, FAID_EBUSY, "engine: all %d slots are in flight (%d frames), collect first",
                  r->nslots, e->inflight);
        return NULL;
    }
    sl = &r->slot[(e->head + e->used) % r->nslots];
    sl->n = sl->ncol = sl->closed = 0;
    sl->dtype = dt;
    e->used++;
    *opened = 1;
    return sl;
}

int faid_engine_submit(faid_engine *e, const faid_frame *f, uint64_t tag, faid_diag *d)
{
    return faid_engine_submit_table(e, f, NULL, tag, d);
}

int faid_engine_submit_table(faid_engine *e, const faid_frame *f, const faid_block_table *table,
                             uint64_t tag, faid_diag *d)
{
    if (!e || !e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    int rc = check_frame(e->res, f, d);
    if (!rc && table && (f->encoding == FAID_ENC_BSLZ4 || f->encoding == FAID_ENC_LZ4))
        rc = check_table(e->res, f, table, d);
    else if (f && f->encoding != FAID_ENC_BSLZ4 && f->encoding != FAID_ENC_LZ4)
        table = NULL;
    if (rc)
        return rc;
    int opened;
    eng_slot *sl = take_lane(e, f->dtype, &opened, d);
    if (!sl)
        return FAID_EBUSY;
    eng_lane *ln = &sl->lane[sl->n];
    ln->t_submit = now_us();
    rc = e->is_ref ? process_ref(e, f, ln->ref_res, d) : cl_submit(e, sl, sl->n, f, table, d);
    if (rc) {
        if (opened)
            e->used--;
        return rc;
    }
    ln->tag = tag;
    sl->n++;
    e->inflight++;
    if (sl->n == e->batch) {
        /* full: integrate now (a failure shows at collect, which tries again) */
        if (e->is_ref)
            sl->closed = 1;
        else if (slot_close(e, sl, d))
            faid_diag_clear(d);
    } else if (!e->is_ref) {
        clFlush(sl->q); /* the H2D and the decode start while the batch fills */
    }
    return FAID_OK;
}

/* Collects the oldest frame (checked by the caller: one in flight, res matches the setup). */
static int collect_oldest(faid_engine *e, faid_result *res, uint64_t *tag, int block, int named,
                          faid_diag *d)
{
    eng_res *r = e->res;
    eng_slot *sl = &r->slot[e->head];
    int f = sl->ncol, rc = FAID_OK;
    eng_lane *ln = &sl->lane[f];
    if (e->is_ref) {
        profile_assign(res->p1d, ln->ref_res->p1d);
        if (res->p2d && ln->ref_res->p2d)
            profile_assign(res->p2d, ln->ref_res->p2d);
        res->t = ln->ref_res->t;
        sl->closed = 1;
    } else {
        rc = cl_collect(e, sl, f, res, block, d);
        if (rc == FAID_EBUSY)
            return rc;
        if (rc && named)
            faid_diag_prefix(d, "frame %llu: ", (unsigned long long)ln->tag);
    }
    if (tag)
        *tag = ln->tag;
    sl->ncol++;
    e->inflight--;
    if (sl->ncol == sl->n) {
        /* every frame of the slot is out: the slot is free */
        if (!e->is_ref && !sl->closed)
            clFinish(sl->q);
        slot_reset(e, sl);
        e->head = (e->head + 1) % r->nslots;
        e->used--;
    }
    return rc;
}

int faid_engine_collect(faid_engine *e, faid_result *res, uint64_t *tag, int block, faid_diag *d)
{
    if (!e || !e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    if (!e->inflight)
        return faid_fail(d, FAID_EINVAL, "engine: no frame in flight");
    int rc = check_result(e->res, res, FAID_EINVAL, d);
    if (rc)
        return rc;
    return collect_oldest(e, res, tag, block, 1, d);
}

int faid_engine_process(faid_engine *e, const faid_frame *f, faid_result *res, faid_diag *d)
{
    if (!e || !e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    if (e->inflight)
        return faid_fail(d, FAID_EBUSY, "engine: %d frames submitted and not collected",
                         e->inflight);
    int rc = check_frame(e->res, f, d);
    if (!rc)
        rc = check_result(e->res, res, FAID_ESIZE, d);
    if (rc)
        return rc;
    if (e->is_ref)
        return process_ref(e, f, res, d);
    int opened;
    eng_slot *sl = take_lane(e, f->dtype, &opened, d);
    if (!sl)
        return FAID_EBUSY;
    sl->lane[0].t_submit = now_us();
    if ((rc = cl_submit(e, sl, 0, f, NULL, d))) {
        e->used--;
        return rc;
    }
    sl->n = 1;
    e->inflight++;
    return collect_oldest(e, res, NULL, 1, 0, d);
}

/* ------------------------------------------------------------------------------------------ */
/* depth and zero-copy buffers */

/* Rebuilds the slots for depth x batch (nothing in flight); restores the previous shape when
 * that fails, so the engine keeps working. */
static int reshape(faid_engine *e, int depth, int batch, faid_diag *d)
{
    int old_depth = e->depth, old_batch = e->batch;
    if (batch != e->batch) /* NBATCH is a build constant of the process programs */
        for (int t = 0; t < NDTYPES; t++)
            for (int m = 0; m < NEM; m++)
                prog_release(&e->progs[t][m]);
    e->depth = depth;
    e->batch = batch;
    if (!e->res)
        return FAID_OK;
    slots_destroy(e, e->res);
    e->batch = batch;
    int rc = slots_create(e, e->res, depth, d);
    if (rc) {
        e->depth = old_depth;
        e->batch = old_batch;
        for (int t = 0; t < NDTYPES; t++)
            for (int m = 0; m < NEM; m++)
                prog_release(&e->progs[t][m]);
        faid_diag dd = {0};
        if (slots_create(e, e->res, old_depth, &dd))
            FAID_WARN("engine", "could not restore %d slots: %s", old_depth, dd.msg);
    }
    return rc;
}

int faid_engine_set_depth(faid_engine *e, int depth, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    if (depth == 0)
        depth = FAID_ENGINE_DEPTH_DEFAULT;
    if (depth < 1 || depth > FAID_ENGINE_DEPTH_MAX)
        return faid_fail(d, FAID_ERANGE, "engine: depth %d out of range 1..%d", depth,
                         FAID_ENGINE_DEPTH_MAX);
    if (e->inflight)
        return faid_fail(d, FAID_EBUSY,
                         "engine: %d frames in flight, collect them before "
                         "changing the depth",
                         e->inflight);
    if (e->res && e->res->nslots == depth) {
        e->depth = depth;
        return FAID_OK;
    }
    return reshape(e, depth, e->batch, d);
}

int faid_engine_set_batch(faid_engine *e, int batch, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    if (batch < 1 || batch > FAID_ENGINE_BATCH_MAX)
        return faid_fail(d, FAID_ERANGE, "engine: batch %d out of range 1..%d", batch,
                         FAID_ENGINE_BATCH_MAX);
    if (e->inflight)
        return faid_fail(d, FAID_EBUSY,
                         "engine: %d frames in flight, collect them before "
                         "changing the batch",
                         e->inflight);
    if (batch == e->batch)
        return FAID_OK;
    return reshape(e, e->depth, batch, d);
}

int faid_engine_batch(const faid_engine *e)
{
    return e ? e->batch : 0;
}

int faid_engine_depth(const faid_engine *e)
{
    return e && e->res ? e->res->nslots * e->batch : 0;
}

int faid_engine_in_flight(const faid_engine *e)
{
    return e ? e->inflight : 0;
}

int faid_engine_slot_buffer(faid_engine *e, void **ptr, size_t *cap, faid_diag *d)
{
    if (!e || !e->res || !ptr || !cap)
        return faid_fail(d, FAID_EINVAL, "engine: no setup or NULL argument");
    eng_res *r = e->res;
    eng_slot *sl = open_slot(e);
    if (!sl) {
        if (e->used == r->nslots)
            return faid_fail(d, FAID_EBUSY, "engine: all %d slots are in flight, collect first",
                             r->nslots);
        sl = &r->slot[(e->head + e->used) % r->nslots];
    }
    int f = sl == open_slot(e) ? sl->n : 0;
    size_t n = r->max_comp_bytes > r->max_raw_bytes ? r->max_comp_bytes : r->max_raw_bytes;
    if (e->is_ref) {
        eng_lane *ln = &sl->lane[f];
        if (!ln->ref_stage && !(ln->ref_stage = malloc(n)))
            return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
        *ptr = ln->ref_stage;
        *cap = n;
        return FAID_OK;
    }
    *ptr = sl->staging_ptr + (size_t)f * sl->lane_bytes + sl->table_bytes;
    *cap = sl->lane_bytes - sl->table_bytes;
    return FAID_OK;
}

void *faid_engine_host_alloc(faid_engine *e, size_t bytes, faid_diag *d)
{
    if (!e || !bytes) {
        faid_fail(d, FAID_EINVAL, "engine: NULL engine or 0 bytes");
        return NULL;
    }
    if (e->nhost == FAID_ENGINE_MAX_HOST) {
        faid_fail(d, FAID_ERANGE, "engine: more than %d pinned host buffers", FAID_ENGINE_MAX_HOST);
        return NULL;
    }
    cl_mem m = NULL;
    void *p;
    if (e->is_ref) {
        p = malloc(bytes);
        if (!p) {
            faid_fail(d, FAID_ENOMEM, "engine: out of memory for %zu bytes", bytes);
            return NULL;
        }
    } else {
        m = faid_cl_buffer(e->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, d);
        if (!m)
            return NULL;
        cl_int err;
        p = clEnqueueMapBuffer(e->ctx->queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0,
                               NULL, NULL, &err);
        if (err != CL_SUCCESS) {
            faid_cl_fail(d, err, "clEnqueueMapBuffer(host)", __FILE__, __LINE__);
            clReleaseMemObject(m);
            return NULL;
        }
    }
    e->host[e->nhost].mem = m;
    e->host[e->nhost].ptr = p;
    e->host[e->nhost].bytes = bytes;
    e->nhost++;
    return p;
}

void faid_engine_host_free(faid_engine *e, void **pp)
{
    if (!e || !pp || !*pp)
        return;
    for (int i = 0; i < e->nhost; i++) {
        if (e->host[i].ptr != *pp)
            continue;
        if (e->host[i].mem) {
            clEnqueueUnmapMemObject(e->ctx->queue, e->host[i].mem, e->host[i].ptr, 0, NULL, NULL);
            clFinish(e->ctx->queue);
            clReleaseMemObject(e->host[i].mem);
        } else {
            free(e->host[i].ptr);
        }
        e->host[i] = e->host[--e->nhost];
        *pp = NULL;
        return;
    }
}
