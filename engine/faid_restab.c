/* faid_restab: an engine's buffers by name (see faid_restab.h). */
#include "faid_restab.h"
#include "faid_restab_cl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table grows with the declarations (it started as 32 fixed entries, which the peakfinder8
 * stage with a cake overflowed on OpenCL: 33 buffers); indices stay below FAID_RESTAB_OUT, the
 * index that names "out" (faid_restab_cl.h). */
#define RT_FIRST 32
#define RT_NAME  32 /* bytes of a name, its terminator included */

enum { E_STATIC, E_SLOT, E_OUT };

typedef struct rt_entry {
    char name[RT_NAME];
    uint32_t hash; /* of name: lookups compare it before the string */
    int kind;
    int flags;
    size_t bytes;  /* static: size; slot: lane stride */
    size_t floats; /* output */
    int readback;  /* output */
    size_t read;   /* output read back in part: floats per lane that come back, else 0 */
    int off;       /* output: lane-0 offset in floats */
    cl_mem mem;    /* static */
    void *host;    /* static on the reference device */
    cl_mem *smem;  /* slot: per slot */
    void **shost;  /* slot: mapped pointer (pinned) or host memory */
} rt_entry;

struct faid_restab {
    faid_cl_ctx *ctx;
    rt_entry *e; /* cap entries, n declared */
    int n, cap;
    int nslots, nlanes;
    size_t out_stride, far_floats;
    size_t out_read; /* floats per lane block the D2H brings back (<= out_stride) */
    cl_mem *out, *h_out;
    void **h_out_ptr;
    uint64_t gen; /* faid_restab_generation */
};

faid_restab *faid_restab_new(faid_cl_ctx *ctx)
{
    faid_restab *rt = calloc(1, sizeof *rt);
    if (rt)
        rt->ctx = ctx;
    return rt;
}

/* FNV-1a of a name. Lookups happen a dozen times per frame: comparing hashes first makes one
 * a string hash and a few integer compares (measured: string compares of every entry were about
 * 1 % of a 64 x 64 frame's host time on PoCL). */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

static rt_entry *find(const faid_restab *rt, const char *name)
{
    const uint32_t h = name_hash(name);
    for (int i = 0; i < rt->n; i++)
        if (rt->e[i].hash == h && strcmp(rt->e[i].name, name) == 0)
            return (rt_entry *)&rt->e[i];
    return NULL;
}

static rt_entry *add(faid_restab *rt, const char *name, int kind, faid_diag *d)
{
    if (find(rt, name)) {
        faid_fail(d, FAID_EINVAL, "engine: buffer %s declared twice", name);
        return NULL;
    }
    if (strlen(name) >= RT_NAME) {
        faid_fail(d, FAID_ERANGE, "engine: buffer name %s too long (at most %d characters)", name,
                  RT_NAME - 1);
        return NULL;
    }
    if (rt->out) {
        faid_fail(d, FAID_EINVAL, "engine: buffer %s declared after the slots were made", name);
        return NULL;
    }
    if (rt->n == rt->cap) {
        const int want = rt->cap ? 2 * rt->cap : RT_FIRST;
        const int cap = want < FAID_RESTAB_OUT ? want : FAID_RESTAB_OUT;
        rt_entry *grown = cap > rt->cap ? realloc(rt->e, (size_t)cap * sizeof *grown) : NULL;
        if (!grown) {
            faid_fail(d, cap > rt->cap ? FAID_ENOMEM : FAID_ERANGE,
                      "engine: buffer %s: no room beyond the %d buffers declared", name, rt->n);
            return NULL;
        }
        rt->e = grown;
        rt->cap = cap;
    }
    rt_entry *e = &rt->e[rt->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->hash = name_hash(e->name);
    e->kind = kind;
    return e;
}

int faid_restab_static(faid_restab *rt, const char *name, size_t bytes, const void *init,
                       faid_diag *d)
{
    rt_entry *e = add(rt, name, E_STATIC, d);
    if (!e)
        return d ? d->code : FAID_EINVAL;
    e->bytes = bytes;
    if (!rt->ctx) {
        e->host = malloc(bytes ? bytes : 1);
        if (!e->host) {
            rt->n--;
            return faid_fail(d, FAID_ENOMEM, "engine: out of memory for %s (%zu bytes)", name,
                             bytes);
        }
        if (init)
            memcpy(e->host, init, bytes);
        return FAID_OK;
    }
    cl_mem_flags fl = CL_MEM_READ_ONLY | (init ? CL_MEM_COPY_HOST_PTR : 0);
    e->mem = faid_cl_buffer(rt->ctx, fl, bytes ? bytes : 1, (void *)init, d);
    if (!e->mem) {
        rt->n--;
        return d && d->code ? d->code : FAID_ECL;
    }
    return FAID_OK;
}

int faid_restab_alias(faid_restab *rt, const char *name, const char *existing, faid_diag *d)
{
    rt_entry *src = find(rt, existing);
    if (!src || src->kind != E_STATIC)
        return faid_fail(d, FAID_EINVAL, "engine: alias %s of unknown buffer %s", name, existing);
    size_t bytes = src->bytes;
    cl_mem mem = src->mem;
    void *host = src->host;
    rt_entry *e = add(rt, name, E_STATIC, d);
    if (!e)
        return d ? d->code : FAID_EINVAL;
    e->bytes = bytes;
    if (mem) {
        e->mem = mem;
        clRetainMemObject(mem);
    } else {
        e->host = malloc(bytes ? bytes : 1);
        if (!e->host) {
            rt->n--;
            return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
        }
        memcpy(e->host, host, bytes);
    }
    return FAID_OK;
}

int faid_restab_declare(faid_restab *rt, const char *name, size_t lane_bytes, size_t align,
                        int flags, faid_diag *d)
{
    if (!align || (align & (align - 1)))
        return faid_fail(d, FAID_EINVAL, "engine: buffer %s: alignment %zu", name, align);
    rt_entry *e = add(rt, name, E_SLOT, d);
    if (!e)
        return d ? d->code : FAID_EINVAL;
    e->bytes = (lane_bytes + align - 1) & ~(align - 1);
    e->flags = flags;
    return FAID_OK;
}

int faid_restab_output(faid_restab *rt, const char *name, size_t floats, int readback, faid_diag *d)
{
    rt_entry *e = add(rt, name, E_OUT, d);
    if (!e)
        return d ? d->code : FAID_EINVAL;
    e->floats = floats;
    e->readback = readback != 0;
    return FAID_OK;
}

int faid_restab_output_part(faid_restab *rt, const char *name, size_t floats, size_t read,
                            faid_diag *d)
{
    for (int i = 0; i < rt->n; i++)
        if (rt->e[i].kind == E_OUT && rt->e[i].read)
            return faid_fail(d, FAID_EINVAL,
                             "engine: output %s read in part, and %s already is (one per table)",
                             name, rt->e[i].name);
    int rc = faid_restab_output(rt, name, floats, 1, d);
    if (!rc)
        rt->e[rt->n - 1].read = read < floats ? read : 0;
    return rc;
}

static void slot_entry_free(faid_restab *rt, rt_entry *e)
{
    for (int s = 0; s < rt->nslots; s++) {
        if (!rt->ctx) {
            if (e->shost)
                free(e->shost[s]);
            continue;
        }
        if (e->smem && e->smem[s] && e->shost && e->shost[s])
            clEnqueueUnmapMemObject(rt->ctx->queue, e->smem[s], e->shost[s], 0, NULL, NULL);
        if (e->smem && e->smem[s])
            clReleaseMemObject(e->smem[s]);
    }
    free(e->smem);
    free(e->shost);
    e->smem = NULL;
    e->shost = NULL;
}

void faid_restab_slots_free(faid_restab *rt)
{
    rt->gen++;
    if (!rt)
        return;
    for (int i = 0; i < rt->n; i++)
        if (rt->e[i].kind == E_SLOT)
            slot_entry_free(rt, &rt->e[i]);
    for (int s = 0; rt->out && s < rt->nslots; s++) {
        if (!rt->ctx) {
            free(rt->h_out_ptr[s]);
            continue;
        }
        if (rt->h_out[s] && rt->h_out_ptr[s])
            clEnqueueUnmapMemObject(rt->ctx->queue, rt->h_out[s], rt->h_out_ptr[s], 0, NULL, NULL);
        if (rt->h_out[s])
            clReleaseMemObject(rt->h_out[s]);
        if (rt->out[s])
            clReleaseMemObject(rt->out[s]);
    }
    if (rt->ctx)
        clFinish(rt->ctx->queue);
    free(rt->out);
    free(rt->h_out);
    free(rt->h_out_ptr);
    rt->out = rt->h_out = NULL;
    rt->h_out_ptr = NULL;
    rt->nslots = rt->nlanes = 0;
}

/* Lays the output segments out: read-back ones in declaration order inside a lane block,
 * the others after all lane blocks. */
static void layout(faid_restab *rt)
{
    size_t off = 0, far = 0;
    rt_entry *part = NULL;
    for (int i = 0; i < rt->n; i++) {
        rt_entry *e = &rt->e[i];
        if (e->kind == E_OUT && e->readback && e->read)
            part = e;
        else if (e->kind == E_OUT && e->readback) {
            e->off = (int)off;
            off += e->floats;
        }
    }
    rt->out_read = off;
    if (part) {
        /* last, so that what comes back is a prefix of the lane block */
        part->off = (int)off;
        rt->out_read = off + part->read;
        off += part->floats;
    }
    rt->out_stride = (off + 15) & ~(size_t)15;
    if (!part)
        rt->out_read = rt->out_stride;
    for (int i = 0; i < rt->n; i++) {
        rt_entry *e = &rt->e[i];
        if (e->kind == E_OUT && !e->readback) {
            e->off = (int)far; /* relative to the end of the lane blocks; stride = floats */
            far += e->floats;
        }
    }
    rt->far_floats = far;
}

static void *map(faid_restab *rt, cl_mem m, cl_map_flags fl, size_t bytes, faid_diag *d)
{
    cl_int err;
    void *p = clEnqueueMapBuffer(rt->ctx->queue, m, CL_TRUE, fl, 0, bytes, 0, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        faid_cl_fail(d, err, "clEnqueueMapBuffer", __FILE__, __LINE__);
        return NULL;
    }
    return p;
}

int faid_restab_slots(faid_restab *rt, int nslots, int nlanes, faid_diag *d)
{
    rt->gen++;
    if (rt->out)
        faid_restab_slots_free(rt);
    layout(rt);
    rt->nslots = nslots;
    rt->nlanes = nlanes;
    const size_t nl = (size_t)nlanes;
    rt->out = calloc((size_t)nslots, sizeof *rt->out);
    rt->h_out = calloc((size_t)nslots, sizeof *rt->h_out);
    rt->h_out_ptr = calloc((size_t)nslots, sizeof *rt->h_out_ptr);
    int rc = FAID_OK;
    if (!rt->out || !rt->h_out || !rt->h_out_ptr)
        rc = faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    for (int i = 0; !rc && i < rt->n; i++) {
        rt_entry *e = &rt->e[i];
        if (e->kind != E_SLOT)
            continue;
        e->smem = calloc((size_t)nslots, sizeof *e->smem);
        e->shost = calloc((size_t)nslots, sizeof *e->shost);
        if (!e->smem || !e->shost)
            rc = faid_fail(d, FAID_ENOMEM, "engine: out of memory");
        for (int s = 0; !rc && s < nslots; s++) {
            size_t bytes = nl * e->bytes;
            if (!rt->ctx) {
                if (!(e->shost[s] = malloc(bytes ? bytes : 1)))
                    rc = faid_fail(d, FAID_ENOMEM, "engine: out of memory for %s", e->name);
            } else if (e->flags & FAID_RES_PINNED) {
                e->smem[s] = faid_cl_buffer(rt->ctx, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR,
                                            bytes, NULL, d);
                if (!e->smem[s] || !(e->shost[s] = map(rt, e->smem[s], CL_MAP_WRITE, bytes, d)))
                    rc = d && d->code ? d->code : FAID_ECL;
            } else {
                e->smem[s] = faid_cl_buffer(rt->ctx, CL_MEM_READ_WRITE, bytes, NULL, d);
                if (!e->smem[s])
                    rc = d && d->code ? d->code : FAID_ECL;
            }
        }
    }
    const size_t out_bytes = nl * (rt->out_stride + rt->far_floats) * sizeof(float);
    for (int s = 0; !rc && s < nslots; s++) {
        if (!rt->ctx) {
            if (!(rt->h_out_ptr[s] = calloc(1, out_bytes ? out_bytes : 1)))
                rc = faid_fail(d, FAID_ENOMEM, "engine: out of memory");
            continue;
        }
        rt->out[s] = faid_cl_buffer(rt->ctx, CL_MEM_READ_WRITE, out_bytes, NULL, d);
        rt->h_out[s] = rt->out[s]
                           ? faid_cl_buffer(rt->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                            out_bytes, NULL, d)
                           : NULL;
        if (!rt->h_out[s] ||
            !(rt->h_out_ptr[s] = map(rt, rt->h_out[s], CL_MAP_READ | CL_MAP_WRITE, out_bytes, d))) {
            rc = d && d->code ? d->code : FAID_ECL;
            break;
        }
        /* outputs start zeroed (the decode error flags start clear) */
        memset(rt->h_out_ptr[s], 0, out_bytes);
        cl_int err = clEnqueueWriteBuffer(rt->ctx->queue, rt->out[s], CL_TRUE, 0, out_bytes,
                                          rt->h_out_ptr[s], 0, NULL, NULL);
        if (err != CL_SUCCESS)
            rc = faid_cl_fail(d, err, "clEnqueueWriteBuffer(out)", __FILE__, __LINE__);
    }
    if (rc)
        faid_restab_slots_free(rt);
    return rc;
}

void faid_restab_destroy(faid_restab **prt)
{
    if (!prt || !*prt)
        return;
    faid_restab *rt = *prt;
    faid_restab_slots_free(rt);
    for (int i = 0; i < rt->n; i++) {
        rt_entry *e = &rt->e[i];
        if (e->mem)
            clReleaseMemObject(e->mem);
        free(e->host);
    }
    free(rt->e);
    free(rt);
    *prt = NULL;
}

static int is_out(const char *name)
{
    return name[0] == 'o' && name[1] == 'u' && name[2] == 't' && name[3] == 0;
}

int faid_restab_index(const faid_restab *rt, const char *name)
{
    if (is_out(name))
        return FAID_RESTAB_OUT;
    const rt_entry *e = find(rt, name);
    return e ? (int)(e - rt->e) : -1;
}

cl_mem faid_restab_mem_at(const faid_restab *rt, int index, int slot)
{
    if (index == FAID_RESTAB_OUT)
        return rt->out && slot >= 0 && slot < rt->nslots ? rt->out[slot] : NULL;
    if (index < 0 || index >= rt->n)
        return NULL;
    const rt_entry *e = &rt->e[index];
    if (e->kind == E_STATIC)
        return e->mem;
    if (e->kind == E_SLOT && e->smem && slot >= 0 && slot < rt->nslots)
        return e->smem[slot];
    return NULL;
}

uint64_t faid_restab_generation(const faid_restab *rt)
{
    return rt ? rt->gen : 0;
}

cl_mem faid_restab_mem(const faid_restab *rt, const char *name, int slot)
{
    if (is_out(name))
        return rt->out && slot >= 0 && slot < rt->nslots ? rt->out[slot] : NULL;
    const rt_entry *e = find(rt, name);
    if (!e)
        return NULL;
    if (e->kind == E_STATIC)
        return e->mem;
    if (e->kind == E_SLOT && e->smem && slot >= 0 && slot < rt->nslots)
        return e->smem[slot];
    return NULL;
}

void *faid_restab_host(const faid_restab *rt, const char *name, int slot)
{
    if (is_out(name))
        return rt->h_out_ptr && slot >= 0 && slot < rt->nslots ? rt->h_out_ptr[slot] : NULL;
    const rt_entry *e = find(rt, name);
    if (!e)
        return NULL;
    if (e->kind == E_STATIC)
        return e->host;
    if (e->kind == E_SLOT && e->shost && slot >= 0 && slot < rt->nslots)
        return e->shost[slot];
    return NULL;
}

size_t faid_restab_lane_bytes(const faid_restab *rt, const char *name)
{
    const rt_entry *e = find(rt, name);
    return e && e->kind == E_SLOT ? e->bytes : 0;
}

int faid_restab_out(const faid_restab *rt, const char *name, int *off, int *stride)
{
    const rt_entry *e = find(rt, name);
    if (!e || e->kind != E_OUT) {
        *off = *stride = -1;
        return -1;
    }
    if (e->readback) {
        *off = e->off;
        *stride = (int)rt->out_stride;
    } else {
        /* the non-read-back area follows the lane blocks: lane f of this segment at
         * nlanes * out_stride + nlanes * off_in_far... laid out segment-major per lane */
        *off = (int)((size_t)rt->nlanes * rt->out_stride) + e->off;
        *stride = (int)rt->far_floats;
    }
    return 0;
}

size_t faid_restab_out_stride(const faid_restab *rt)
{
    return rt->out_stride;
}

size_t faid_restab_out_read(const faid_restab *rt)
{
    return rt->out_read;
}

size_t faid_restab_device_bytes(const faid_restab *rt)
{
    if (!rt || !rt->ctx)
        return 0;
    size_t total = 0;
    for (int i = 0; i < rt->n; i++) {
        const rt_entry *e = &rt->e[i];
        if (e->kind == E_STATIC && e->mem) {
            int dup = 0; /* an alias shares an earlier entry's buffer */
            for (int j = 0; j < i && !dup; j++)
                dup = rt->e[j].kind == E_STATIC && rt->e[j].mem == e->mem;
            total += dup ? 0 : e->bytes;
        } else if (e->kind == E_SLOT && e->smem && !(e->flags & FAID_RES_PINNED)) {
            total += (size_t)rt->nslots * (size_t)rt->nlanes * e->bytes;
        }
    }
    if (rt->out)
        total += (size_t)rt->nslots * (size_t)rt->nlanes * (rt->out_stride + rt->far_floats) *
                 sizeof(float);
    return total;
}
