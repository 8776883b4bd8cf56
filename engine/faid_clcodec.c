/* faid_clcodec: builds and launches the block-parallel LZ4 decoders of kernels/codec/bslz4.cl
 * (see faid_clcodec.h for the contract with the engine and the device table layout).
 *
 * A decoder holds up to FAID_CLCODEC_VARIANTS programs that differ only in their local buffer
 * capacity (BLOCK_CAP): 8192 bytes is built at creation and serves the default bitshuffle block;
 * a chunk with a larger header block size builds the next power of two on first use, if the
 * device's local memory holds it. The chosen program never depends on the data beyond that, so
 * the hot path allocates nothing.
 *
 * The DEC_GLOBAL build of bslz4.cl (FAID_CLCODEC_DEFINES="-D DEC_GLOBAL=1", a tuning variant,
 * issue 17) decodes each block into device memory instead of local memory: its bslz4 kernel
 * takes one more argument, a scratch of nblocks x 16-byte-rounded block size. Launches on one
 * in-order queue run one after the other, so the decoder keeps one scratch per queue it is
 * given (at most FAID_CLCODEC_QUEUES, a reference held on each), grown to the largest chunk
 * seen: the engine's slots have a queue each, so the scratch in use is one decoded frame per
 * slot. The build is recognised by the kernel's argument count. */
#include "faid_clcodec.h"

#include "faid_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAID_CLCODEC_VARIANTS 4
#define FAID_CLCODEC_BASE_CAP 8192u
/* Queues a DEC_GLOBAL decoder keeps a scratch for: the engine's slots (FAID_ENGINE_DEPTH_MAX,
 * 32) and the context's queue fit. */
#define FAID_CLCODEC_QUEUES 64
/* bslz4.cl's argument count without and with the DEC_GLOBAL scratch. */
#define FAID_CLCODEC_NARGS 14

typedef struct clcodec_variant {
    uint32_t cap;
    cl_program prog;
    cl_kernel bslz4;
    cl_kernel lz4h5;
    int scratch; /* the bslz4 kernel takes the DEC_GLOBAL scratch (argument 14) */
    int bpg;     /* blocks per work-group of the bslz4 kernel (BPG, 1 or 2) */
} clcodec_variant;

/* DEC_GLOBAL: the scratch of the launches on one queue. */
typedef struct clcodec_scratch {
    cl_command_queue q; /* retained */
    cl_mem buf;
    size_t cap;
} clcodec_scratch;

struct faid_clcodec {
    faid_cl_ctx *ctx;
    size_t elem_size;
    size_t max_decoded;
    size_t wg;
    uint32_t max_cap;
    clcodec_variant var[FAID_CLCODEC_VARIANTS];
    int nvar;
    /* State of faid_clcodec_decode_host only. */
    cl_mem h_chunk, h_table, h_dst, h_err;
    size_t h_chunk_cap, h_table_cap, h_dst_cap;
    faid_block_table h_t;
    uint32_t *h_packed;
    size_t h_packed_cap;
    /* DEC_GLOBAL builds only */
    clcodec_scratch scr[FAID_CLCODEC_QUEUES];
    int nscr;
};

/* DEC_GLOBAL: bytes of scratch a bslz4 chunk needs (bslz4.cl's SCRATCH_STRIDE). Blocks are at
 * least 8 bytes, so this is less than 3 x (decoded bytes + one block): bounded by the decoder's
 * max_decoded_bytes, which faid_clcodec_supports enforces first. */
static uint64_t scratch_bytes(const faid_block_table *t)
{
    return (uint64_t)t->nblocks * (((uint64_t)t->block_bytes + 15) & ~(uint64_t)15);
}

/* Local memory of one work-group for a given capacity, at most (with the CMP_LOCAL
 * buffer of bslz4.cl; the default build uses only the first term). */
static size_t local_bytes(uint32_t cap)
{
    size_t cmp = ((size_t)cap + cap / 255 + 16 + 3 + 7) / 8 * 8;
    return cap + cmp;
}

static void variant_release(clcodec_variant *v)
{
    if (v->bslz4)
        clReleaseKernel(v->bslz4);
    if (v->lz4h5)
        clReleaseKernel(v->lz4h5);
    if (v->prog)
        clReleaseProgram(v->prog);
    memset(v, 0, sizeof *v);
}

static int variant_build(faid_clcodec *c, uint32_t cap, clcodec_variant *v, faid_diag *d)
{
    memset(v, 0, sizeof *v);
    char opts[512];
    const char *extra = getenv("FAID_CLCODEC_DEFINES");
    snprintf(opts, sizeof opts, "-D ELEM_SIZE=%zu -D BLOCK_CAP=%u -D WG=%zu %s", c->elem_size, cap,
             c->wg, extra ? extra : "");
    const char *names[] = {"codec/bslz4.cl"};
    int rc = faid_cl_build(c->ctx, names, 1, opts, &v->prog, d);
    if (rc)
        return rc;
    cl_int err;
    v->bslz4 = clCreateKernel(v->prog, "bslz4_decode", &err);
    if (err == CL_SUCCESS)
        v->lz4h5 = clCreateKernel(v->prog, "lz4h5_decode", &err);
    if (err != CL_SUCCESS) {
        rc = faid_cl_fail(d, err, "clCreateKernel", __FILE__, __LINE__);
        variant_release(v);
        return rc;
    }
    cl_uint nargs = 0;
    err = clGetKernelInfo(v->bslz4, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL);
    if (err != CL_SUCCESS) {
        rc = faid_cl_fail(d, err, "clGetKernelInfo", __FILE__, __LINE__);
        variant_release(v);
        return rc;
    }
    v->scratch = nargs == FAID_CLCODEC_NARGS + 1;
    /* BPG (bslz4.cl) changes the launch's group count: taken from the options given */
    v->bpg = extra && strstr(extra, "BPG=2") ? 2 : 1;
    size_t kwg = 0;
    err = clGetKernelWorkGroupInfo(v->bslz4, c->ctx->info.device, CL_KERNEL_WORK_GROUP_SIZE,
                                   sizeof kwg, &kwg, NULL);
    if (err == CL_SUCCESS && kwg < c->wg) {
        rc = faid_fail(d, FAID_EUNSUP,
                       "bslz4 decoder: %s allows work-groups of %zu items for this kernel, %zu "
                       "needed (set FAID_CLCODEC_WG)",
                       c->ctx->info.name, kwg, c->wg);
        variant_release(v);
        return rc;
    }
    v->cap = cap;
    FAID_DEBUG("clcodec", "built bslz4 decoder on %s: %s, %zu bytes of local memory per group%s",
               c->ctx->info.name, opts, local_bytes(cap),
               v->scratch ? " (DEC_GLOBAL: blocks decoded in device memory)" : "");
    return FAID_OK;
}

faid_clcodec *faid_clcodec_new(faid_cl_ctx *ctx, size_t elem_size, size_t max_decoded_bytes,
                               faid_diag *d)
{
    if (!ctx) {
        faid_fail(d, FAID_EINVAL, "bslz4 decoder: no OpenCL context");
        return NULL;
    }
    if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8) {
        faid_fail(d, FAID_EUNSUP,
                  "bslz4 decoder: element size %zu is not supported on the device (1, 2, 4, 8)",
                  elem_size);
        return NULL;
    }
    cl_bool little = CL_TRUE;
    if (clGetDeviceInfo(ctx->info.device, CL_DEVICE_ENDIAN_LITTLE, sizeof little, &little, NULL) ==
            CL_SUCCESS &&
        !little) {
        faid_fail(d, FAID_EUNSUP, "bslz4 decoder: device %s is big-endian", ctx->info.name);
        return NULL;
    }
    faid_clcodec *c = calloc(1, sizeof *c);
    if (!c) {
        faid_fail(d, FAID_ENOMEM, "out of memory");
        return NULL;
    }
    c->ctx = ctx;
    c->elem_size = elem_size;
    c->max_decoded = max_decoded_bytes;
    size_t wg = 32;
    const char *env = getenv("FAID_CLCODEC_WG");
    if (env && *env) {
        char *end;
        unsigned long v = strtoul(env, &end, 10);
        if (*end || v < 8 || v > 1024 || (v & (v - 1))) {
            faid_fail(d, FAID_ECONFIG, "FAID_CLCODEC_WG=%s: expected a power of two in 8..1024",
                      env);
            free(c);
            return NULL;
        }
        wg = v;
    }
    while (wg > 8 && ctx->info.max_wg && wg > ctx->info.max_wg)
        wg /= 2;
    c->wg = wg;
    uint32_t cap = FAID_CLCODEC_BASE_CAP;
    cl_ulong local = ctx->info.local_mem;
    if (local && local_bytes(cap) > local) {
        faid_fail(d, FAID_EUNSUP,
                  "bslz4 decoder: %s has %llu bytes of local memory, %zu needed per work-group",
                  ctx->info.name, (unsigned long long)local, local_bytes(cap));
        free(c);
        return NULL;
    }
    /* Largest power-of-two capacity that leaves room for at least one group (limited to 1 MiB). */
    c->max_cap = cap;
    while (c->max_cap < (1u << 20) && (!local || local_bytes(c->max_cap * 2) <= local))
        c->max_cap *= 2;
    int rc = variant_build(c, cap, &c->var[0], d);
    if (rc) {
        free(c);
        return NULL;
    }
    c->nvar = 1;
    return c;
}

void faid_clcodec_destroy(faid_clcodec **pc)
{
    if (!pc || !*pc)
        return;
    faid_clcodec *c = *pc;
    for (int i = 0; i < c->nvar; i++)
        variant_release(&c->var[i]);
    cl_mem bufs[] = {c->h_chunk, c->h_table, c->h_dst, c->h_err};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            clReleaseMemObject(bufs[i]);
    for (int i = 0; i < c->nscr; i++) {
        if (c->scr[i].buf)
            clReleaseMemObject(c->scr[i].buf);
        clReleaseCommandQueue(c->scr[i].q);
    }
    faid_block_table_free(&c->h_t);
    free(c->h_packed);
    free(c);
    *pc = NULL;
}

size_t faid_clcodec_wg(const faid_clcodec *c)
{
    return c ? c->wg : 0;
}

int faid_clcodec_supports(const faid_clcodec *c, faid_encoding enc, const faid_block_table *t,
                          faid_diag *d)
{
    if (enc != FAID_ENC_BSLZ4 && enc != FAID_ENC_LZ4)
        return faid_fail(d, FAID_EUNSUP, "the device decoder handles bslz4 and lz4, not %s",
                         faid_encoding_name(enc));
    if (enc == FAID_ENC_BSLZ4 && t->elem_size != c->elem_size)
        return faid_fail(d, FAID_EUNSUP,
                         "bslz4 chunk of %u-byte elements given to the decoder for %zu-byte ones",
                         t->elem_size, c->elem_size);
    if (t->nblocks && t->block_bytes > c->max_cap)
        return faid_fail(d, FAID_EUNSUP,
                         "%s block size %u bytes exceeds the %u bytes the device decoder holds in "
                         "local memory on %s",
                         faid_encoding_name(enc), t->block_bytes, c->max_cap, c->ctx->info.name);
    if (c->max_decoded && t->total_bytes > c->max_decoded)
        return faid_fail(
            d, FAID_ESIZE,
            "chunk decodes to %llu bytes, more than the %zu the decoder was set up for",
            (unsigned long long)t->total_bytes, c->max_decoded);
    if (t->tail_offset + t->tail_bytes > UINT32_MAX || t->total_bytes > ((uint64_t)1 << 40))
        return faid_fail(d, FAID_EUNSUP, "chunk too large for the device decoder");
    if (enc == FAID_ENC_BSLZ4 && c->var[0].scratch &&
        scratch_bytes(t) > 3 * ((uint64_t)t->total_bytes + c->max_cap))
        return faid_fail(d, FAID_EUNSUP,
                         "bslz4 chunk of %u blocks of %u bytes needs more scratch than the device "
                         "decoder allows",
                         t->nblocks, t->block_bytes);
    return FAID_OK;
}

size_t faid_clcodec_table_bytes(const faid_block_table *t)
{
    return (size_t)t->nblocks * 2 * sizeof(uint32_t);
}

void faid_clcodec_pack_table(const faid_block_table *t, uint32_t *out)
{
    if (t->nblocks == 0)
        return;
    memcpy(out, t->offset, (size_t)t->nblocks * sizeof(uint32_t));
    memcpy(out + t->nblocks, t->csize, (size_t)t->nblocks * sizeof(uint32_t));
}

/* The variant whose capacity holds block_bytes, building it on first need. */
static int variant_for(faid_clcodec *c, uint32_t block_bytes, clcodec_variant **out, faid_diag *d)
{
    uint32_t need = FAID_CLCODEC_BASE_CAP;
    while (need < block_bytes)
        need *= 2;
    for (int i = 0; i < c->nvar; i++)
        if (c->var[i].cap == need) {
            *out = &c->var[i];
            return FAID_OK;
        }
    if (c->nvar == FAID_CLCODEC_VARIANTS)
        return faid_fail(d, FAID_EUNSUP, "bslz4 decoder: too many distinct block sizes");
    int rc = variant_build(c, need, &c->var[c->nvar], d);
    if (rc)
        return rc;
    FAID_INFO("clcodec", "built a device decoder for %u-byte blocks on %s", need,
              c->ctx->info.name);
    *out = &c->var[c->nvar++];
    return FAID_OK;
}

/* DEC_GLOBAL: the scratch of queue q, at least size bytes (grown when smaller: a buffer still
 * used by a launch in flight lives until that launch ends). */
static int scratch_for(faid_clcodec *c, cl_command_queue q, size_t size, cl_mem *out, faid_diag *d)
{
    clcodec_scratch *s = NULL;
    for (int i = 0; i < c->nscr && !s; i++)
        if (c->scr[i].q == q)
            s = &c->scr[i];
    if (!s) {
        if (c->nscr == FAID_CLCODEC_QUEUES)
            return faid_fail(d, FAID_EUNSUP,
                             "bslz4 decoder (DEC_GLOBAL): more than %d queues use one decoder",
                             FAID_CLCODEC_QUEUES);
        cl_command_queue_properties props = 0;
        FAID_CL_TRY(d, clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL));
        if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
            return faid_fail(d, FAID_EUNSUP,
                             "bslz4 decoder (DEC_GLOBAL): its scratch needs an in-order queue");
        FAID_CL_TRY(d, clRetainCommandQueue(q));
        s = &c->scr[c->nscr++];
        s->q = q;
    }
    if (!s->buf || s->cap < size) {
        if (s->buf)
            clReleaseMemObject(s->buf);
        s->cap = 0;
        s->buf = faid_cl_buffer(c->ctx, CL_MEM_READ_WRITE, size < 64 ? 64 : size, NULL, d);
        if (!s->buf)
            return d ? d->code : FAID_ECL;
        s->cap = size < 64 ? 64 : size;
    }
    *out = s->buf;
    return FAID_OK;
}

int faid_clcodec_enqueue_io(faid_clcodec *c, cl_command_queue queue, faid_encoding enc,
                            const faid_clcodec_io *io, const faid_block_table *t, cl_uint nwait,
                            const cl_event *wait, cl_event *done, faid_diag *d)
{
    int rc = faid_clcodec_supports(c, enc, t, d);
    if (rc)
        return rc;
    if (io->chunk_offset % 4 || io->table_offset % 4 || io->dst_offset % (8 * c->elem_size))
        return faid_fail(d, FAID_EINVAL,
                         "device decoder: chunk and table offsets must be multiples of 4 and the "
                         "output offset a multiple of %zu",
                         8 * c->elem_size);
    if (io->chunk_offset > UINT32_MAX - (t->tail_offset + t->tail_bytes) ||
        io->table_offset / 4 > UINT32_MAX || io->err_index > UINT32_MAX)
        return faid_fail(d, FAID_EINVAL, "device decoder: buffer offsets too large");
    clcodec_variant *v = NULL;
    rc = variant_for(c, t->nblocks ? t->block_bytes : 0, &v, d);
    if (rc)
        return rc;
    cl_kernel k = enc == FAID_ENC_BSLZ4 ? v->bslz4 : v->lz4h5;
    cl_uint chunk_off = (cl_uint)io->chunk_offset;
    cl_uint chunk_len = (cl_uint)(t->tail_offset + t->tail_bytes);
    cl_uint table_off = (cl_uint)(io->table_offset / 4);
    cl_uint nblocks = t->nblocks;
    cl_uint block_bytes = t->block_bytes;
    cl_uint last_bytes = t->last_bytes;
    cl_uint tail_off = (cl_uint)t->tail_offset;
    cl_uint tail_bytes = t->tail_bytes;
    cl_ulong dst_off = io->dst_offset;
    cl_uint err_idx = (cl_uint)io->err_index;
    cl_mem table = io->table ? io->table : io->chunk; /* any valid buffer when nblocks is 0 */
    FAID_CL_TRY(d, clSetKernelArg(k, 0, sizeof(cl_mem), &io->chunk));
    FAID_CL_TRY(d, clSetKernelArg(k, 1, sizeof chunk_off, &chunk_off));
    FAID_CL_TRY(d, clSetKernelArg(k, 2, sizeof chunk_len, &chunk_len));
    FAID_CL_TRY(d, clSetKernelArg(k, 3, sizeof(cl_mem), &table));
    FAID_CL_TRY(d, clSetKernelArg(k, 4, sizeof table_off, &table_off));
    FAID_CL_TRY(d, clSetKernelArg(k, 5, sizeof nblocks, &nblocks));
    FAID_CL_TRY(d, clSetKernelArg(k, 6, sizeof block_bytes, &block_bytes));
    FAID_CL_TRY(d, clSetKernelArg(k, 7, sizeof last_bytes, &last_bytes));
    FAID_CL_TRY(d, clSetKernelArg(k, 8, sizeof tail_off, &tail_off));
    FAID_CL_TRY(d, clSetKernelArg(k, 9, sizeof tail_bytes, &tail_bytes));
    FAID_CL_TRY(d, clSetKernelArg(k, 10, sizeof(cl_mem), &io->dst));
    FAID_CL_TRY(d, clSetKernelArg(k, 11, sizeof dst_off, &dst_off));
    FAID_CL_TRY(d, clSetKernelArg(k, 12, sizeof(cl_mem), &io->err));
    FAID_CL_TRY(d, clSetKernelArg(k, 13, sizeof err_idx, &err_idx));
    if (enc == FAID_ENC_BSLZ4 && v->scratch) {
        cl_mem scr = NULL;
        rc = scratch_for(c, queue ? queue : c->ctx->queue, (size_t)scratch_bytes(t), &scr, d);
        if (rc)
            return rc;
        FAID_CL_TRY(d, clSetKernelArg(k, FAID_CLCODEC_NARGS, sizeof(cl_mem), &scr));
    }
    size_t local = c->wg;
    size_t bpg = enc == FAID_ENC_BSLZ4 ? (size_t)v->bpg : 1;
    size_t global = (((size_t)t->nblocks + bpg - 1) / bpg + 1) * c->wg;
    FAID_CL_TRY(d, clEnqueueNDRangeKernel(queue ? queue : c->ctx->queue, k, 1, NULL, &global,
                                          &local, nwait, nwait ? wait : NULL, done));
    return FAID_OK;
}

int faid_clcodec_enqueue(faid_clcodec *c, cl_mem chunk, cl_mem table, const faid_block_table *t,
                         cl_mem dst, cl_mem err_flag, cl_uint nwait, const cl_event *wait,
                         cl_event *done, faid_diag *d)
{
    faid_clcodec_io io = {.chunk = chunk, .table = table, .dst = dst, .err = err_flag};
    return faid_clcodec_enqueue_io(c, NULL, FAID_ENC_BSLZ4, &io, t, nwait, wait, done, d);
}

/* Grows a device buffer of decode_host to at least size bytes. */
static int ensure_buffer(faid_clcodec *c, cl_mem *buf, size_t *cap, size_t size, cl_mem_flags flags,
                         faid_diag *d)
{
    if (*buf && *cap >= size)
        return FAID_OK;
    if (*buf)
        clReleaseMemObject(*buf);
    *cap = 0;
    size_t want = size < 64 ? 64 : size;
    *buf = faid_cl_buffer(c->ctx, flags, want, NULL, d);
    if (!*buf)
        return d ? d->code : FAID_ECL;
    *cap = want;
    return FAID_OK;
}

int faid_clcodec_decode_host(faid_clcodec *c, faid_encoding enc, const uint8_t *src, size_t len,
                             void *dst, size_t dst_len, faid_diag *d)
{
    if (enc != FAID_ENC_BSLZ4 && enc != FAID_ENC_LZ4)
        return faid_fail(d, FAID_EUNSUP, "the device decoder handles bslz4 and lz4, not %s",
                         faid_encoding_name(enc));
    uint64_t total;
    uint32_t bbytes;
    int rc = faid_bslz4_header(src, len, &total, &bbytes, d);
    if (rc)
        return rc;
    /* Table sized from what the chunk can hold (5 bytes per block at least) and its output. */
    uint64_t cap = len / 5 + 1;
    uint64_t eff = bbytes ? bbytes : 1;
    if ((uint64_t)dst_len / eff + 1 < cap)
        cap = (uint64_t)dst_len / eff + 1;
    if (cap > c->h_t.cap) {
        faid_block_table_free(&c->h_t);
        rc = faid_block_table_alloc(&c->h_t, (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap), d);
        if (rc)
            return rc;
    }
    faid_block_table *t = &c->h_t;
    rc = enc == FAID_ENC_BSLZ4 ? faid_bslz4_table(src, len, c->elem_size, dst_len, t, d)
                               : faid_lz4h5_table(src, len, dst_len, t, d);
    if (rc)
        return rc;
    if (t->total_bytes != dst_len)
        return faid_fail(d, FAID_ESIZE, "chunk decodes to %llu bytes, expected %zu",
                         (unsigned long long)t->total_bytes, dst_len);
    rc = faid_clcodec_supports(c, enc, t, d);
    if (rc)
        return rc;
    size_t tb = faid_clcodec_table_bytes(t);
    if (tb > c->h_packed_cap) {
        free(c->h_packed);
        c->h_packed_cap = 0;
        c->h_packed = malloc(tb);
        if (!c->h_packed)
            return faid_fail(d, FAID_ENOMEM, "out of memory");
        c->h_packed_cap = tb;
    }
    faid_clcodec_pack_table(t, c->h_packed);
    size_t chunk_alloc = (len + 3) / 4 * 4;
    if ((rc = ensure_buffer(c, &c->h_chunk, &c->h_chunk_cap, chunk_alloc, CL_MEM_READ_ONLY, d)) ||
        (rc = ensure_buffer(c, &c->h_table, &c->h_table_cap, tb, CL_MEM_READ_ONLY, d)) ||
        (rc = ensure_buffer(c, &c->h_dst, &c->h_dst_cap, dst_len, CL_MEM_READ_WRITE, d)))
        return rc;
    if (!c->h_err) {
        c->h_err = faid_cl_buffer(c->ctx, CL_MEM_READ_WRITE, sizeof(cl_int), NULL, d);
        if (!c->h_err)
            return d ? d->code : FAID_ECL;
    }
    cl_command_queue q = c->ctx->queue;
    cl_int zero = 0, flag = 0;
    if (len)
        FAID_CL_TRY(d, clEnqueueWriteBuffer(q, c->h_chunk, CL_FALSE, 0, len, src, 0, NULL, NULL));
    if (tb)
        FAID_CL_TRY(
            d, clEnqueueWriteBuffer(q, c->h_table, CL_FALSE, 0, tb, c->h_packed, 0, NULL, NULL));
    FAID_CL_TRY(d,
                clEnqueueWriteBuffer(q, c->h_err, CL_FALSE, 0, sizeof zero, &zero, 0, NULL, NULL));
    faid_clcodec_io io = {
        .chunk = c->h_chunk, .table = c->h_table, .dst = c->h_dst, .err = c->h_err};
    rc = faid_clcodec_enqueue_io(c, q, enc, &io, t, 0, NULL, NULL, d);
    if (rc) {
        clFinish(q);
        return rc;
    }
    FAID_CL_TRY(d, clEnqueueReadBuffer(q, c->h_err, CL_TRUE, 0, sizeof flag, &flag, 0, NULL, NULL));
    if (flag)
        return faid_fail(d, FAID_ECORRUPT, "%s: block %d of %u is corrupt (device decoder)",
                         faid_encoding_name(enc), flag - 1, t->nblocks);
    if (dst_len)
        FAID_CL_TRY(d, clEnqueueReadBuffer(q, c->h_dst, CL_TRUE, 0, dst_len, dst, 0, NULL, NULL));
    return FAID_OK;
}
