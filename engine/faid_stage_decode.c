/* faid_stage_decode: the first stage. Takes the frame's bytes from wherever the caller left them
 * to a decoded frame ("raw", native dtype) on the device.
 *
 * Per frame on a compute device (at submit, without waiting): the bytes are copied into the
 * lane's pinned staging (or read in place when they lie in engine pinned memory or already in
 * the staging), the bslz4/lz4 block table is parsed (skipped when the caller passes it) and
 * packed in front of the chunk, so table + chunk go over in one H2D; the device decoder (the
 * device's `decoder` service: faid_clcodec on OpenCL) writes the raw frame and sets the decode
 * error flag (output segment "decode_flag") on a corrupt block. Encodings the device decoder
 * does not take (lz4-raw, oversized blocks) are decoded on the CPU into the staging, and the raw
 * frame goes over. The stage does the host work and lists the device's commands (faid_dcmd:
 * writes, the flag's clear, the decode); the device runs them. check refuses a lane whose flag
 * is set before any of its outputs is used. Reference device: CPU decode into the static "raw".
 *
 * Buffers: staging (pinned, per lane: packed table | chunk or frame), in (device copy of it),
 * raw (decoded frame, 4096-byte aligned lanes); output: decode_flag (1 float). */
#include "faid_stage.h"

#include "faid_log.h"
#include "faid_pcopy.h"

#include <stdlib.h>
#include <string.h>

typedef struct dec_res {
    size_t max_raw_bytes;  /* shape x the widest dtype (4 bytes) */
    size_t max_comp_bytes; /* largest valid bslz4 chunk */
    uint32_t max_blocks;
    size_t table_bytes; /* bytes reserved for the block table at the start of a lane */
} dec_res;

typedef struct dec_env {
    uint8_t *scratch; /* CPU decode of a frame that lies in its own slot buffer */
    size_t scratch_bytes;
} dec_env;

enum { EV_H2D, EV_H2DT, EV_DEC };

static int dec_declare(faid_stage_env *env, faid_stage_res *res, int id, faid_diag *d)
{
    dec_res *dr = calloc(1, sizeof *dr);
    if (!dr)
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    res->state[id] = dr;
    if (!env->estate[id] && !(env->estate[id] = calloc(1, sizeof(dec_env))))
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    dr->max_raw_bytes = res->npix * 4;
    dr->max_comp_bytes = faid_stage_max_comp(res->npix);
    dr->max_blocks = faid_bslz4_max_blocks(dr->max_raw_bytes, 1, 0);
    dr->table_bytes = ((size_t)dr->max_blocks * 2 * sizeof(uint32_t) + 63) & ~(size_t)63;
    if (!env->info)
        return faid_restab_static(res->rt, "raw", dr->max_raw_bytes, NULL, d);
    size_t lane = dr->table_bytes +
                  (dr->max_comp_bytes > dr->max_raw_bytes ? dr->max_comp_bytes : dr->max_raw_bytes);
    int rc = faid_restab_declare(res->rt, "staging", lane, 4096, FAID_RES_PINNED, d);
    if (!rc)
        rc = faid_restab_declare(res->rt, "in", lane, 4096, FAID_RES_DEVICE, d);
    if (!rc)
        rc = faid_restab_declare(res->rt, "raw", dr->max_raw_bytes, 4096, FAID_RES_DEVICE, d);
    if (!rc)
        rc = faid_restab_output(res->rt, "decode_flag", 1, 1, d);
    return rc;
}

static void dec_release(faid_stage_res *res, int id)
{
    free(res->state[id]);
    res->state[id] = NULL;
}

static void dec_shutdown(faid_stage_env *env, int id)
{
    dec_env *de = env->estate[id];
    if (!de)
        return;
    free(de->scratch);
    free(de);
    env->estate[id] = NULL;
}

static int decode_cpu(const faid_stage_env *env, const faid_frame *f, void *dst, size_t raw_bytes,
                      faid_diag *d)
{
    size_t esz = faid_dtype_size(f->dtype);
    if (f->encoding == FAID_ENC_NONE) {
        if (f->len != raw_bytes)
            return faid_fail(d, FAID_ESIZE, "raw frame of %zu bytes, expected %zu", f->len,
                             raw_bytes);
        faid_pcopy_run(env ? env->pcopy : NULL, dst, f->data, raw_bytes);
        return FAID_OK;
    }
    return faid_decode(f->encoding, f->data, f->len, esz, dst, raw_bytes, d);
}

static int dec_ref_run(faid_stage_env *env, faid_stage_res *res, faid_ref_frame *fr, faid_diag *d)
{
    (void)env;
    double t0 = faid_stage_now_us();
    void *raw = faid_restab_host(res->rt, "raw", 0);
    int rc = decode_cpu(env, fr->f, raw, res->npix * faid_dtype_size(fr->f->dtype), d);
    fr->res->t.decode_us = faid_stage_now_us() - t0;
    return rc;
}

static int dec_prepare(faid_stage_env *env, faid_stage_res *res, int id, faid_dtype dt,
                       faid_diag *d)
{
    (void)id;
    (void)d;
    env->ops->decoder(env, FAID_ENC_BSLZ4, faid_dtype_size(dt), res->npix * faid_dtype_size(dt),
                      NULL);
    return FAID_OK;
}

/* Host part of one frame into lane f of slot sl, then its commands for the slot's queue (the
 * device runs them without waiting): H2D (block table + compressed bytes, or the decoded frame)
 * and the decode. */
static int dec_submit(faid_stage_env *env, faid_stage_res *res, int id, faid_stage_slot *sl,
                      int f_lane, const faid_frame *f, const faid_block_table *ftab, faid_dcmds *c,
                      faid_diag *d)
{
    dec_res *dr = res->state[id];
    dec_env *de = env->estate[id];
    faid_stage_lane *ln = &sl->lane[f_lane];
    const size_t raw_bytes = res->npix * faid_dtype_size(f->dtype);
    int rc = FAID_OK;

    /* Where the bytes are: in this lane's staging (written there by the producer), in engine
     * pinned memory (the H2D reads them in place), or anywhere else (copied into staging). */
    const size_t esz = faid_dtype_size(f->dtype);
    const size_t lane_bytes = faid_restab_lane_bytes(res->rt, "staging");
    const size_t raw_stride = faid_restab_lane_bytes(res->rt, "raw");
    uint8_t *lane_base =
        (uint8_t *)faid_restab_host(res->rt, "staging", sl->index) + (size_t)f_lane * lane_bytes;
    uint8_t *stage = lane_base + dr->table_bytes;
    const size_t stage_cap = lane_bytes - dr->table_bytes;
    const size_t in_off = (size_t)f_lane * lane_bytes;  /* lane in d_in */
    const size_t raw_off = (size_t)f_lane * raw_stride; /* lane in d_raw */
    int flag_off, out_stride;
    faid_restab_out(res->rt, "decode_flag", &flag_off, &out_stride);
    const size_t flag_idx = (size_t)f_lane * (size_t)out_stride + (size_t)flag_off;
    const uint8_t *src = f->data;
    const int in_stage = f->len > 0 && src == stage;
    if (!in_stage && f->len && src < lane_base + lane_bytes && src + f->len > lane_base)
        return faid_fail(d, FAID_EINVAL,
                         "frame bytes overlap a slot's staging buffer without "
                         "starting at it (faid_engine_slot_buffer)");
    if (in_stage && f->len > stage_cap)
        return faid_fail(d, FAID_ESIZE, "frame of %zu bytes overruns the %zu-byte slot buffer",
                         f->len, stage_cap);
    const int pinned = !in_stage && f->len && faid_engine_is_pinned(env, src, f->len);
    const int lzx = f->encoding == FAID_ENC_BSLZ4 || f->encoding == FAID_ENC_LZ4;
    const faid_block_table *t = &ln->tab;
    int codec = 0;
    double h0 = faid_stage_now_us();
    /* Bytes to be copied into staging are copied first: the table walk then reads them from
     * the cache instead of taking one memory miss per block in the caller's cold buffer. */
    int copied = 0;
    if (lzx && !in_stage && !pinned && f->len <= stage_cap) {
        faid_pcopy_run(env->pcopy, stage, src, f->len);
        copied = 1;
    }
    double hc = faid_stage_now_us();
    if (lzx && ftab) {
        t = ftab; /* checked by the engine (check_table) */
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
        if (!rc && env->ops->table_bytes(t) <= dr->table_bytes && f->len <= stage_cap)
            codec = env->ops->decoder(env, f->encoding, esz, dr->max_raw_bytes, t);
        faid_diag_clear(d);
    }
    size_t tb = 0;
    if (codec) {
        tb = env->ops->table_bytes(t);
        env->ops->pack_table(t, stage - tb);
    }
    double h1 = faid_stage_now_us();
    /* direct: the H2D reads the caller's pinned bytes; otherwise from stage */
    int direct = 0;
    if (codec) {
        direct = pinned;
        if (!in_stage && !pinned && !copied)
            faid_pcopy_run(env->pcopy, stage, src, f->len);
    } else if (f->encoding == FAID_ENC_NONE && (in_stage || pinned)) {
        if (f->len != raw_bytes)
            return faid_fail(d, FAID_ESIZE, "raw frame of %zu bytes, expected %zu", f->len,
                             raw_bytes);
        direct = pinned;
    } else if (in_stage) {
        /* CPU decode of bytes that sit where the decoded frame goes: through the scratch */
        if (de->scratch_bytes < raw_bytes) {
            free(de->scratch);
            de->scratch_bytes = 0;
            de->scratch = malloc(dr->max_raw_bytes);
            if (!de->scratch)
                return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
            de->scratch_bytes = dr->max_raw_bytes;
        }
        if ((rc = decode_cpu(env, f, de->scratch, raw_bytes, d)))
            return rc;
        memcpy(stage, de->scratch, raw_bytes);
    } else if ((rc = decode_cpu(env, f, stage, raw_bytes, d))) {
        return rc;
    }
    double h2 = faid_stage_now_us();

    faid_dcmd *x;
    if (ln->err_dirty) {
        /* a corrupt frame left the flag set: clear it (only then: one command less per frame) */
        if ((x = faid_dcmd_add(c, FAID_DCMD_ZERO32, -1))) {
            x->buf = "out";
            x->off = flag_idx * sizeof(float);
        }
        ln->err_dirty = 0;
    }
    if (codec) {
        ln->err_dirty = 1;
        if (direct && env->resident && ln->res_src == src && ln->res_len == f->len) {
            /* resident (benchmarks): this lane's device copy already holds these bytes */
        } else if (direct) {
            if (tb && (x = faid_dcmd_add(c, FAID_DCMD_WRITE, EV_H2DT))) {
                x->buf = "in";
                x->off = in_off + dr->table_bytes - tb;
                x->bytes = tb;
                x->src = stage - tb;
            }
            if ((x = faid_dcmd_add(c, FAID_DCMD_WRITE, EV_H2D))) {
                x->buf = "in";
                x->off = in_off + dr->table_bytes;
                x->bytes = f->len;
                x->src = src;
            }
            ln->res_src = src;
            ln->res_len = f->len;
        } else {
            ln->res_src = NULL;
            if ((x = faid_dcmd_add(c, FAID_DCMD_WRITE, EV_H2D))) {
                x->buf = "in";
                x->off = in_off + dr->table_bytes - tb;
                x->bytes = tb + f->len;
                x->src = stage - tb;
            }
        }
        if ((x = faid_dcmd_add(c, FAID_DCMD_DECODE, EV_DEC))) {
            x->enc = f->encoding;
            x->esz = esz;
            x->t = t;
            x->buf = "in";
            x->off = in_off + dr->table_bytes;
            x->tab_off = in_off + dr->table_bytes - tb;
            x->dst = "raw";
            x->dst_off = raw_off;
            x->flag_off = flag_idx;
        }
    } else if ((x = faid_dcmd_add(c, FAID_DCMD_WRITE, EV_H2D))) {
        x->buf = "raw";
        x->off = raw_off;
        x->bytes = raw_bytes;
        x->src = direct ? (const void *)src : (const void *)stage;
    }
    ln->enc = f->encoding;
    ln->len = f->len;
    ln->nblocks = codec ? t->nblocks : 0;
    ln->device_decode = codec != 0;
    ln->zero_copy = direct || (in_stage && (codec || f->encoding == FAID_ENC_NONE));
    ln->table_us = h1 - hc;
    ln->stage_us = h2 - h0;
    ln->cpu_decode_us = codec || f->encoding == FAID_ENC_NONE ? 0.0 : h2 - h1;
    return FAID_OK;
}

static int dec_check(faid_stage_env *env, faid_stage_res *res, faid_stage_slot *sl, int lane,
                     const float *h_lane, faid_diag *d)
{
    (void)env;
    faid_stage_lane *ln = &sl->lane[lane];
    int off, stride;
    faid_restab_out(res->rt, "decode_flag", &off, &stride);
    int32_t h_err;
    memcpy(&h_err, h_lane + off, sizeof h_err);
    if (h_err != 0)
        return faid_fail(d, FAID_ECORRUPT,
                         "corrupt %s chunk: block %d failed to decode on the "
                         "device (%u blocks, %zu bytes)",
                         faid_encoding_name(ln->enc), (int)h_err - 1, ln->nblocks, ln->len);
    if (ln->device_decode)
        ln->err_dirty = 0;
    return FAID_OK;
}

static void dec_times(const faid_stage_slot *sl, int lane, int id, faid_stage_times *t)
{
    const faid_stage_lane *ln = &sl->lane[lane];
    const double *us = ln->us[id];
    t->decode_us += ln->device_decode ? us[EV_DEC] : ln->cpu_decode_us;
    t->h2d_us += us[EV_H2D] + us[EV_H2DT];
    t->stage_us = ln->stage_us;
    t->table_us = ln->table_us;
    t->device_decode = ln->device_decode;
    t->zero_copy = ln->zero_copy;
}

static const faid_time_decl dec_timings[] = {
    FAID_TIME("decode", DECODE_US, decode_us, 1, "decompression (bitshuffle-LZ4 / LZ4)"),
};

const faid_stage faid_stage_decode = {
    .name = "decode",
    .declare = dec_declare,
    .release = dec_release,
    .shutdown = dec_shutdown,
    .ref_run = dec_ref_run,
    .prepare = dec_prepare,
    .submit = dec_submit,
    .check = dec_check,
    .times = dec_times,
    .timings = dec_timings,
    .ntimings = FAID_NROWS(dec_timings),
};

int faid_stage_decode_slot_buffer(const faid_stage_res *res, int slot, int lane, void **ptr,
                                  size_t *cap)
{
    const dec_res *dr = res->state[faid_stage_id(&faid_stage_decode)];
    uint8_t *base = faid_restab_host(res->rt, "staging", slot);
    size_t lane_bytes = faid_restab_lane_bytes(res->rt, "staging");
    if (!dr || !base)
        return FAID_EINVAL;
    *ptr = base + (size_t)lane * lane_bytes + dr->table_bytes;
    *cap = lane_bytes - dr->table_bytes;
    return FAID_OK;
}
