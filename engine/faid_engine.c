/* faid_engine: decode -> preprocess -> integrate (-> peak stages) for one frame, on an OpenCL
 * device or with the plain C reference (see faid_engine.h).
 *
 * DESIGN. The engine core holds what is common to every device and stage: the public API, the
 * checks of frames and results, the FIFO ring of frame slots, the pinned host buffers handed to
 * the caller, and the per-setup resources. The work itself is done by the stages of faid_stages[]
 * (faid_stage.h: decode, integrate, ...), each contributing its buffers to the resource table
 * (faid_restab.h), its kernels through the program cache (faid_progcache.h), its outputs and its
 * timing, run by one of two device ops tables: OpenCL (faid_device_cl.c) or the reference
 * (faid_device_ref.c). Everything is sized at creation / set_setup / set_depth from the setup,
 * so processing a frame allocates nothing.
 *
 * Frames in flight form a FIFO ring over the slots (head, used): submit fills the next lane of
 * the open slot (or opens the next slot) and enqueues its commands without waiting; a slot closes
 * when full, when collect reaches it, or when a frame of another dtype arrives; collect waits for
 * the oldest slot. faid_engine_process is submit + collect of one frame, so both APIs run the
 * same commands with the same arguments and give the same bits.
 *
 * THREADS. One thread may submit while another collects (faid_engine.h says what each may
 * call). The lock `mu` guards the ring (head, used, inflight, filling, a slot's n / ncol /
 * closed / launch_req) and every enqueue on the slots' queues: the device's submit takes it
 * for its enqueues only (env.mu), so the copy of a frame into staging runs beside a collect's
 * wait and result copy, which run without it. The order a slot's queue relies on (a lane's
 * H2D and decode, then the slot's launches and read-backs) holds because a slot is closed under
 * the lock and never while a submit fills one of its lanes (filling: the collector waits). */
#include "faid_engine.h"

#include "faid_log.h"
#include "faid_pcopy.h"
#include "faid_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAID_ENGINE_MAX_HOST 64

typedef struct eng_res {
    faid_stage_res s;
    size_t max_comp; /* largest valid bslz4 chunk of a frame */
    faid_stage_slot *slot;
    int nslots;
} eng_res;

struct faid_engine {
    faid_stage_env env; /* first: faid_engine_is_pinned finds the engine from it */
    const faid_devops *ops;
    char name[400];
    int depth;      /* slots per resource set */
    int head, used; /* oldest slot in use, slots in use (FIFO ring) */
    int inflight;   /* frames submitted and not collected */
    int filling;    /* a submit is between taking a lane of the open slot and enqueuing it */
    int threaded;   /* faid_engine_set_threaded: a blocking collect leaves an open slot to the
                     * submitter (full, another dtype, faid_engine_launch_open) */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a lane was enqueued, a slot was closed or freed */
    struct {
        void *handle;
        void *ptr;
        size_t bytes;
        int external;             /* faid_engine_host_register: the caller's, never freed here */
    } host[FAID_ENGINE_MAX_HOST]; /* faid_engine_host_alloc / _register */
    int nhost;
    eng_res *res;
};

int faid_engine_is_pinned(const faid_stage_env *env, const void *p, size_t n)
{
    const faid_engine *e = (const faid_engine *)env;
    const uint8_t *b = p;
    for (int i = 0; i < e->nhost; i++) {
        const uint8_t *h = e->host[i].ptr;
        if (b >= h && n <= e->host[i].bytes && (size_t)(b - h) <= e->host[i].bytes - n)
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* resources */

static void slots_destroy(faid_engine *e, eng_res *r)
{
    if (!r->slot)
        return;
    for (int s = 0; s < r->nslots; s++) {
        faid_stage_slot *sl = &r->slot[s];
        e->ops->slot_close(&e->env, sl);
        for (int f = 0; sl->lane && f < sl->nlanes; f++)
            e->ops->lane_close(&sl->lane[f]);
        free(sl->lane);
    }
    faid_restab_slots_free(r->s.rt);
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
    if (e->ops->res_release)
        e->ops->res_release(&e->env, &r->s);
    for (int i = 0; faid_stages[i]; i++)
        if (faid_stages[i]->release)
            faid_stages[i]->release(&r->s, i);
    faid_restab_destroy(&r->s.rt);
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

/* The n frame slots of r: the resource table's slot buffers, a queue and `batch` lanes each. */
static int slots_create(faid_engine *e, eng_res *r, int n, faid_diag *d)
{
    int rc = faid_restab_slots(r->s.rt, n, e->env.batch, d);
    if (rc)
        return rc;
    r->slot = calloc((size_t)n, sizeof *r->slot);
    if (!r->slot) {
        faid_restab_slots_free(r->s.rt);
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    }
    r->nslots = n;
    for (int k = 0; k < n; k++) {
        faid_stage_slot *sl = &r->slot[k];
        sl->index = k;
        sl->lane = calloc((size_t)e->env.batch, sizeof *sl->lane);
        if (!sl->lane)
            rc = faid_fail(d, FAID_ENOMEM, "engine: out of memory");
        else
            sl->nlanes = e->env.batch;
        if (!rc)
            rc = e->ops->slot_open(&e->env, sl, d);
        for (int f = 0; !rc && f < sl->nlanes; f++)
            rc = e->ops->lane_open(&e->env, &r->s, &sl->lane[f], d);
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
    if (!r || !(r->s.rt = e->ops->restab_new(&e->env))) {
        free(r);
        return faid_fail(d, FAID_ENOMEM, "engine: out of memory");
    }
    r->s.setup = s;
    r->s.npix = s->npix;
    r->max_comp = faid_stage_max_comp(s->npix);
    for (int i = 0; !rc && faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        r->s.enabled[i] = !st->enabled || st->enabled(&e->env, s);
        if (r->s.enabled[i] && st->declare && (rc = st->declare(&e->env, &r->s, i, d)))
            faid_diag_prefix(d, "stage %s: ", st->name);
    }
    if (!rc)
        rc = slots_create(e, r, e->depth, d);
    if (rc) {
        if (e->env.info)
            faid_diag_prefix(d, "engine setup on %s: ", e->name);
        res_destroy(e, &r);
        return rc;
    }
    *out = r;
    return FAID_OK;
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
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->env.mu = &e->mu;
    e->env.fused = 1;
    e->env.sums2d = 1;
    e->env.cake_arrays = 4;
    e->env.batch = 1;
    e->depth = 1;
    const char *ov = getenv("FAID_ENGINE_WG");
    if (ov && *ov) {
        long v = strtol(ov, NULL, 10);
        if (v > 0 && v <= 1024)
            e->env.wg_override = (size_t)v;
    }
    const char *iv = getenv("FAID_ENGINE_INTEGRATE");
    e->env.int_variant = faid_engine_parse_integrate_variant(iv);
    if (e->env.int_variant < 0) {
        faid_fail(d, FAID_EINVAL,
                  "FAID_ENGINE_INTEGRATE=\"%s\": unknown variant (known: base, gather, "
                  "entrynorm, prefetch, unroll8, comma-separated)",
                  iv);
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e);
        return NULL;
    }
    const char *rv = getenv("FAID_ENGINE_ROWS");
    e->env.rows_env = rv && (rv[0] == '0' || rv[0] == '1') && !rv[1] ? rv[0] - '0' : -1;
    const char *sd = getenv("FAID_ENGINE_SLOT_D2H");
    e->env.slot_d2h = sd && strcmp(sd, "1") == 0;
    if (!device || !*device)
        device = "auto";
    e->ops = strcmp(device, "ref") == 0 ? &faid_devops_ref : &faid_devops_cl;
    e->env.ops = e->ops;
    if (e->ops->open(&e->env, device, e->name, sizeof e->name, d)) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e);
        return NULL;
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
    for (int i = 0; faid_stages[i]; i++)
        if (faid_stages[i]->shutdown)
            faid_stages[i]->shutdown(&e->env, i);
    e->ops->close(&e->env);
    faid_pcopy_destroy(&e->env.pcopy);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
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
    int rc = faid_outputs_check(&setup->cfg, d);
    if (rc)
        return rc;
    eng_res *r = NULL;
    rc = res_create(e, setup, &r, d);
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
    if (e->inflight && e->env.fused != fused)
        return faid_fail(d, FAID_EBUSY, "engine: %d frames in flight", e->inflight);
    if (e->env.fused == fused || !e->env.info) {
        e->env.fused = fused;
        return FAID_OK;
    }
    e->env.fused = fused;
    if (!e->res)
        return FAID_OK;
    return faid_engine_set_setup(e, e->res->s.setup, d);
}

int faid_engine_set_resident(faid_engine *e, int on)
{
    if (!e)
        return FAID_EINVAL;
    e->env.resident = on != 0;
    return FAID_OK;
}

int faid_engine_set_copy_threads(faid_engine *e, int n, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    if (n < 1 || n > FAID_PCOPY_MAX)
        return faid_fail(d, FAID_ERANGE, "engine: %d copy threads out of range 1..%d", n,
                         FAID_PCOPY_MAX);
    if (faid_pcopy_threads(e->env.pcopy) == n)
        return FAID_OK;
    faid_pcopy *p = NULL;
    if (n > 1 && !(p = faid_pcopy_new(n, d)))
        return d && d->code ? d->code : FAID_ENOMEM;
    faid_pcopy_destroy(&e->env.pcopy);
    e->env.pcopy = p;
    return FAID_OK;
}

size_t faid_engine_device_bytes(const faid_engine *e)
{
    return e && e->res ? faid_restab_device_bytes(e->res->s.rt) : 0;
}

int faid_engine_set_sums_2d(faid_engine *e, int on, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    on = on != 0;
    if (e->env.sums2d == on)
        return FAID_OK;
    if (e->inflight)
        return faid_fail(d, FAID_EBUSY, "engine: %d frames in flight", e->inflight);
    e->env.sums2d = on;
    if (!e->res || !e->env.info)
        return FAID_OK;
    int rc = faid_engine_set_setup(e, e->res->s.setup, d);
    if (rc)
        e->env.sums2d = !on; /* the engine kept its previous resources */
    return rc;
}

int faid_engine_set_cake_arrays(faid_engine *e, int n, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    if (n < 1 || n > 4)
        return faid_fail(d, FAID_EINVAL, "engine: %d cake arrays (1 to 4)", n);
    if (e->env.cake_arrays == n)
        return FAID_OK;
    if (e->inflight)
        return faid_fail(d, FAID_EBUSY, "engine: %d frames in flight", e->inflight);
    int was = e->env.cake_arrays;
    e->env.cake_arrays = n;
    if (!e->res || !e->env.info)
        return FAID_OK;
    int rc = faid_engine_set_setup(e, e->res->s.setup, d);
    if (rc)
        e->env.cake_arrays = was; /* the engine kept its previous resources */
    return rc;
}

int faid_engine_prepare(faid_engine *e, faid_dtype dtype, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    if (!e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    return e->ops->prepare(&e->env, &e->res->s, dtype, d);
}

size_t faid_engine_workgroup(const faid_engine *e, int which)
{
    size_t wg = 0;
    int rows = 0;
    if (e && e->res)
        faid_stage_integrate_matrix(&e->res->s, which, &wg, &rows);
    return wg;
}

int faid_engine_parse_integrate_variant(const char *s)
{
    static const struct {
        const char *name;
        int bit;
    } names[] = {{"base", 0},
                 {"gather", FAID_INTV_GATHER},
                 {"entrynorm", FAID_INTV_ENORM},
                 {"prefetch", FAID_INTV_PREFETCH},
                 {"unroll8", FAID_INTV_UNROLL8}};
    int bits = 0;
    while (s && *s) {
        size_t n = strcspn(s, ",");
        int found = 0;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (n == strlen(names[k].name) && strncmp(s, names[k].name, n) == 0) {
                bits |= names[k].bit;
                found = 1;
            }
        if (!found && n > 0)
            return -1;
        s += n;
        if (*s == ',')
            s++;
    }
    return bits;
}

int faid_engine_integrate_variant(const faid_engine *e)
{
    return e ? e->env.int_variant : 0;
}

int faid_engine_rows_mode(const faid_engine *e, int which)
{
    size_t wg = 0;
    int rows = 0;
    if (e && e->res)
        faid_stage_integrate_matrix(&e->res->s, which, &wg, &rows);
    return rows;
}

faid_result *faid_result_new(const faid_setup *setup)
{
    if (!setup || !setup->csr)
        return NULL;
    faid_result *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->cake_arrays = 4;
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
    if (setup->cfg.peaks.algorithm != FAID_PEAKS_NONE && setup->csr_bg) {
        r->bg = faid_background_new(setup->csr_bg->nbins);
        r->peaks = faid_peak_list_new(setup->cfg.peaks.max_num_peaks);
        if (!r->bg || !r->peaks) {
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
    faid_background_destroy(&(*pr)->bg);
    faid_peak_list_destroy(&(*pr)->peaks);
    free(*pr);
    *pr = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* processing */

static int check_frame(const eng_res *r, const faid_frame *f, faid_diag *d)
{
    const faid_setup *s = r->s.setup;
    if (!f)
        return faid_fail(d, FAID_EINVAL, "engine: NULL frame");
    if (f->rows != s->rows || f->cols != s->cols)
        return faid_fail(d, FAID_ESHAPE, "frame is %dx%d, the setup expects %dx%d", f->rows,
                         f->cols, s->rows, s->cols);
    if (!faid_stage_raw_code(f->dtype))
        return faid_fail(d, FAID_EDTYPE,
                         "frame dtype %s is not supported (uint8/16/32, "
                         "int8/16/32, float32)",
                         faid_dtype_name(f->dtype));
    if (!f->data && f->len)
        return faid_fail(d, FAID_EINVAL, "frame has no data");
    const size_t max_comp = r->max_comp;
    if (f->encoding == FAID_ENC_BSLZ4 && f->len > max_comp)
        return faid_fail(d, FAID_ESIZE,
                         "bslz4 payload of %zu bytes exceeds the %zu bytes a %dx%d "
                         "frame can take",
                         f->len, max_comp, s->rows, s->cols);
    return FAID_OK;
}

static int check_result(const eng_res *r, const faid_result *res, int code, faid_diag *d)
{
    const faid_setup *s = r->s.setup;
    if (!res)
        return faid_fail(d, FAID_EINVAL, "engine: NULL result");
    if (!res->p1d || res->p1d->nbins != s->csr->nbins)
        return faid_fail(d, code,
                         "result has %d bins, the setup %d (make the result with "
                         "faid_result_new after a reload)",
                         res->p1d ? res->p1d->nbins : 0, s->csr->nbins);
    if (s->csr2d && (!res->p2d || res->p2d->nbins != s->csr2d->nbins))
        return faid_fail(d, code, "result has no or a different 2D profile than the setup");
    if (s->csr_bg && (!res->bg || res->bg->nbins != s->csr_bg->nbins || !res->peaks ||
                      res->peaks->capacity < s->cfg.peaks.max_num_peaks))
        return faid_fail(d, code,
                         "result has no or a different background / peak list than the setup "
                         "(make the result with faid_result_new after a reload)");
    return FAID_OK;
}

/* A caller's block table must at least describe a chunk of this frame's size and dtype. */
static int check_table(const eng_res *r, const faid_frame *f, const faid_block_table *t,
                       faid_diag *d)
{
    size_t raw_bytes = r->s.npix * faid_dtype_size(f->dtype);
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

/* The slot taking frames now (filled partly, not closed, not handed to the collector), or
 * NULL. Under mu. */
static faid_stage_slot *open_slot(faid_engine *e)
{
    eng_res *r = e->res;
    if (!e->used)
        return NULL;
    faid_stage_slot *sl = &r->slot[(e->head + e->used - 1) % r->nslots];
    return !sl->closed && !sl->launch_req && sl->n < e->env.batch ? sl : NULL;
}

/* The slot and lane the next frame goes to, opening a slot if needed; NULL (FAID_EBUSY) when
 * every slot is in use. A frame of another dtype than the open slot's closes it first. */
static faid_stage_slot *take_lane(faid_engine *e, faid_dtype dt, int *opened, faid_diag *d)
{
    eng_res *r = e->res;
    faid_stage_slot *sl = open_slot(e);
    *opened = 0;
    if (sl && sl->dtype != dt) {
        if (e->ops->close_slot(&e->env, &r->s, sl, d))
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
    sl->n = sl->ncol = sl->closed = sl->launch_req = 0;
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
    pthread_mutex_lock(&e->mu);
    faid_stage_slot *sl = take_lane(e, f->dtype, &opened, d);
    if (!sl) {
        pthread_cond_broadcast(&e->cv); /* take_lane may have closed a slot (another dtype) */
        pthread_mutex_unlock(&e->mu);
        return FAID_EBUSY;
    }
    const int lane = sl->n;
    e->filling = 1;
    pthread_mutex_unlock(&e->mu);
    /* the host work (copy into staging, table) without the lock: a collect runs beside it */
    faid_stage_lane *ln = &sl->lane[lane];
    ln->t_submit = faid_stage_now_us();
    rc = e->ops->submit(&e->env, &e->res->s, sl, lane, f, table, d);
    pthread_mutex_lock(&e->mu);
    e->filling = 0;
    if (rc) {
        if (opened)
            e->used--; /* the slot opened last: only the submitter opens slots */
    } else {
        ln->tag = tag;
        sl->n++;
        e->inflight++;
        if (sl->n == e->env.batch) {
            /* full: run the downstream stages now (a failure shows at collect, which tries
             * again) */
            if (e->ops->close_slot(&e->env, &e->res->s, sl, d))
                faid_diag_clear(d);
        } else {
            e->ops->flush(sl); /* the H2D and the decode start while the batch fills */
        }
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* Collects the oldest frame (checked by the caller: one in flight, res matches the setup). Called
 * and returns with mu held; waits for the device without it once the slot is closed. */
static int collect_oldest(faid_engine *e, faid_result *res, uint64_t *tag, int block, int named,
                          faid_diag *d)
{
    eng_res *r = e->res;
    faid_stage_slot *sl = &r->slot[e->head];
    int rc;
    /* The slot's launches and read-backs go on its queue after every lane's H2D and decode:
     * never while a submit is filling one of its lanes. Threaded, a blocking collect leaves an
     * open slot to the submitter, which closes it when full or hands it over (launch_req) when
     * it has no frame for it: otherwise every batch would be closed at its first frame. */
    while (!sl->closed && ((e->filling && open_slot(e) == sl) ||
                           (e->threaded && !sl->launch_req && sl->n < e->env.batch))) {
        if (!block)
            return FAID_EBUSY;
        pthread_cond_wait(&e->cv, &e->mu);
    }
    if (!sl->closed && e->ops->close_slot(&e->env, &r->s, sl, d) == FAID_OK)
        sl->closed = 1;
    faid_diag_clear(d);
    int f = sl->ncol;
    faid_stage_lane *ln = &sl->lane[f];
    if (sl->closed) {
        /* launched: the wait and the copy into res touch this lane and res alone */
        pthread_mutex_unlock(&e->mu);
        rc = e->ops->collect(&e->env, &r->s, sl, f, res, block, d);
        pthread_mutex_lock(&e->mu);
    } else {
        /* the launch failed: the device's collect tries it again (under mu: it enqueues) and
         * reports the failure for this frame */
        rc = e->ops->collect(&e->env, &r->s, sl, f, res, block, d);
    }
    if (rc == FAID_EBUSY)
        return rc;
    if (rc == FAID_OK) {
        res->cake_arrays = e->env.cake_arrays;
        faid_outputs_fill(res, r->s.enabled, r->s.setup->cfg.output_extra);
    }
    if (rc && named)
        faid_diag_prefix(d, "frame %llu: ", (unsigned long long)ln->tag);
    if (tag)
        *tag = ln->tag;
    sl->ncol++;
    e->inflight--;
    if (sl->ncol == sl->n) {
        /* every frame of the slot is out: the slot is free */
        if (!sl->closed)
            e->ops->finish(sl);
        e->ops->slot_reset(sl);
        e->head = (e->head + 1) % r->nslots;
        e->used--;
    }
    pthread_cond_broadcast(&e->cv);
    return rc;
}

int faid_engine_collect(faid_engine *e, faid_result *res, uint64_t *tag, int block, faid_diag *d)
{
    if (!e || !e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    int rc = check_result(e->res, res, FAID_EINVAL, d);
    if (rc)
        return rc;
    pthread_mutex_lock(&e->mu);
    if (!e->inflight)
        rc = faid_fail(d, FAID_EINVAL, "engine: no frame in flight");
    else
        rc = collect_oldest(e, res, tag, block, 1, d);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int faid_engine_launch_open(faid_engine *e, faid_diag *d)
{
    if (!e || !e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    faid_stage_slot *sl = open_slot(e);
    if (!sl || sl->n == 0) {
        rc = 0;
    } else if (sl == &e->res->slot[e->head]) {
        if (e->threaded) {
            sl->launch_req = 1; /* the collector, waiting for it, launches it */
            pthread_cond_broadcast(&e->cv);
        }
        rc = 0;
    } else if ((rc = e->ops->close_slot(&e->env, &e->res->s, sl, d)) == FAID_OK) {
        sl->closed = 1;
        rc = 1;
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int faid_engine_set_threaded(faid_engine *e, int on, faid_diag *d)
{
    if (!e)
        return faid_fail(d, FAID_EINVAL, "engine: NULL");
    pthread_mutex_lock(&e->mu);
    int n = e->inflight;
    if (!n)
        e->threaded = on != 0;
    pthread_mutex_unlock(&e->mu);
    if (n)
        return faid_fail(d, FAID_EBUSY,
                         "engine: %d frames in flight, collect them before "
                         "changing the threading",
                         n);
    return FAID_OK;
}

int faid_engine_process(faid_engine *e, const faid_frame *f, faid_result *res, faid_diag *d)
{
    if (!e || !e->res)
        return faid_fail(d, FAID_EINVAL, "engine: no setup");
    int rc = check_frame(e->res, f, d);
    if (!rc)
        rc = check_result(e->res, res, FAID_ESIZE, d);
    if (rc)
        return rc;
    /* not with a pipeline in use: one thread, nothing in flight (the lock only keeps the
     * device's submit, which takes it for its enqueues, consistent) */
    pthread_mutex_lock(&e->mu);
    const int n = e->inflight;
    int opened;
    faid_stage_slot *sl = n ? NULL : take_lane(e, f->dtype, &opened, d);
    pthread_mutex_unlock(&e->mu);
    if (n)
        return faid_fail(d, FAID_EBUSY, "engine: %d frames submitted and not collected", n);
    if (!sl)
        return FAID_EBUSY;
    sl->lane[0].t_submit = faid_stage_now_us();
    rc = e->ops->submit(&e->env, &e->res->s, sl, 0, f, NULL, d);
    pthread_mutex_lock(&e->mu);
    if (rc) {
        e->used--;
    } else {
        sl->n = 1;
        sl->launch_req =
            1; /* a slot of one frame: launched by the collect below, threaded or not */
        e->inflight++;
        rc = collect_oldest(e, res, NULL, 1, 0, d);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* depth and zero-copy buffers */

/* Rebuilds the slots for depth x batch (nothing in flight); restores the previous shape when
 * that fails, so the engine keeps working. */
static int reshape(faid_engine *e, int depth, int batch, faid_diag *d)
{
    int old_depth = e->depth, old_batch = e->env.batch;
    if (batch != e->env.batch && e->ops->invalidate) /* NBATCH: a build constant of programs */
        e->ops->invalidate(&e->env);
    e->depth = depth;
    e->env.batch = batch;
    if (!e->res)
        return FAID_OK;
    slots_destroy(e, e->res);
    int rc = slots_create(e, e->res, depth, d);
    if (rc) {
        e->depth = old_depth;
        e->env.batch = old_batch;
        if (e->ops->invalidate)
            e->ops->invalidate(&e->env);
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
    return reshape(e, depth, e->env.batch, d);
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
    if (batch == e->env.batch)
        return FAID_OK;
    return reshape(e, e->depth, batch, d);
}

int faid_engine_batch(const faid_engine *e)
{
    return e ? e->env.batch : 0;
}

int faid_engine_depth(const faid_engine *e)
{
    return e && e->res ? e->res->nslots * e->env.batch : 0;
}

int faid_engine_in_flight(const faid_engine *e)
{
    if (!e)
        return 0;
    faid_engine *m = (faid_engine *)e; /* the lock, not the engine, changes */
    pthread_mutex_lock(&m->mu);
    int n = e->inflight;
    pthread_mutex_unlock(&m->mu);
    return n;
}

int faid_engine_slot_buffer(faid_engine *e, void **ptr, size_t *cap, faid_diag *d)
{
    if (!e || !e->res || !ptr || !cap)
        return faid_fail(d, FAID_EINVAL, "engine: no setup or NULL argument");
    eng_res *r = e->res;
    pthread_mutex_lock(&e->mu);
    faid_stage_slot *sl = open_slot(e);
    int f = sl ? sl->n : 0;
    const int full = !sl && e->used == r->nslots;
    if (!sl && !full)
        sl = &r->slot[(e->head + e->used) % r->nslots];
    pthread_mutex_unlock(&e->mu);
    if (full)
        return faid_fail(d, FAID_EBUSY, "engine: all %d slots are in flight, collect first",
                         r->nslots);
    return e->ops->slot_buffer(&e->env, &r->s, sl, f, ptr, cap, d);
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
    void *handle = NULL;
    void *p = e->ops->host_alloc(&e->env, bytes, &handle, d);
    if (!p)
        return NULL;
    e->host[e->nhost].handle = handle;
    e->host[e->nhost].ptr = p;
    e->host[e->nhost].bytes = bytes;
    e->host[e->nhost].external = 0;
    e->nhost++;
    return p;
}

int faid_engine_host_register(faid_engine *e, void *ptr, size_t bytes, faid_diag *d)
{
    if (!e || !ptr || !bytes)
        return faid_fail(d, FAID_EINVAL, "engine: NULL engine or memory, or 0 bytes");
    if (e->nhost == FAID_ENGINE_MAX_HOST)
        return faid_fail(d, FAID_ERANGE, "engine: more than %d pinned host buffers",
                         FAID_ENGINE_MAX_HOST);
    e->host[e->nhost].handle = NULL;
    e->host[e->nhost].ptr = ptr;
    e->host[e->nhost].bytes = bytes;
    e->host[e->nhost].external = 1;
    e->nhost++;
    return FAID_OK;
}

void faid_engine_host_free(faid_engine *e, void **pp)
{
    if (!e || !pp || !*pp)
        return;
    for (int i = 0; i < e->nhost; i++) {
        if (e->host[i].ptr != *pp)
            continue;
        if (!e->host[i].external)
            e->ops->host_free(&e->env, e->host[i].ptr, e->host[i].handle);
        e->host[i] = e->host[--e->nhost];
        *pp = NULL;
        return;
    }
}
