/* faid_outputs: see faid_outputs.h. */
#include "faid_outputs.h"

#include "faid_proto_table.h"
#include "faid_stage.h"

#include <string.h>

/* The struct an extent's fields belong to (NULL: absent from this result). */
static const void *extent_base(const faid_result *r, faid_out_extent x)
{
    switch (x) {
    case FAID_OX_BINS:
        return r->p1d;
    case FAID_OX_CAKE:
        return r->p2d;
    case FAID_OX_BG:
        return r->bg;
    case FAID_OX_PEAKS:
        return r->peaks;
    case FAID_OX_SCALAR:
        return r;
    }
    return NULL;
}

/* Whether a cake output's field is among the leading cake arrays the result carries
 * (faid_result.cake_arrays: I, sigma, std, count in that order; 0 or 4 = all). */
static int cake_carried(const faid_result *r, const faid_output_decl *o)
{
    static const size_t order[4] = {offsetof(faid_profile, I), offsetof(faid_profile, sigma),
                                    offsetof(faid_profile, std), offsetof(faid_profile, count)};
    if (o->extent != FAID_OX_CAKE || r->cake_arrays <= 0 || r->cake_arrays >= 4)
        return 1;
    for (int k = 0; k < 4; k++)
        if (order[k] == o->field)
            return k < r->cake_arrays;
    return 1;
}

static int make_view(const faid_result *r, const faid_output_decl *o, faid_out_array *v)
{
    const char *base = extent_base(r, o->extent);
    if (!base || !cake_carried(r, o))
        return 0;
    *v = (faid_out_array){.key = o->key, .type = o->type};
    if (o->extent == FAID_OX_SCALAR) {
        if (o->type == FAID_OA_UINT) {
            int32_t x;
            memcpy(&x, base + o->field, sizeof x);
            v->value = x > 0 ? (uint64_t)x : 0;
        } else {
            int x;
            memcpy(&x, base + o->field, sizeof x);
            v->value = x != 0;
        }
        return 1;
    }
    memcpy(&v->data, base + o->field, sizeof(void *));
    v->ndim = 1;
    switch (o->extent) {
    case FAID_OX_BINS:
        v->shape[0] = (uint64_t)r->p1d->nbins;
        break;
    case FAID_OX_CAKE:
        v->ndim = 2;
        v->shape[0] = (uint64_t)r->p2d->nazim;
        v->shape[1] = (uint64_t)r->p2d->nrad;
        v->transposed = 1;
        break;
    case FAID_OX_BG:
        v->shape[0] = (uint64_t)r->bg->nbins;
        break;
    case FAID_OX_PEAKS:
        v->shape[0] = (uint64_t)(r->peaks->n > 0 ? r->peaks->n : 0);
        break;
    case FAID_OX_SCALAR:
        break;
    }
    return v->data != NULL;
}

int faid_outputs_on(const faid_output_decl *o, const char *extra)
{
    if (!o->optional)
        return 1;
    const char *name = faid_key_name(o->key);
    const size_t l = strlen(name);
    for (const char *p = extra; p && *p;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == l && memcmp(p, name, l) == 0)
            return 1;
        p = e ? e + 1 : p + n;
    }
    return 0;
}

int faid_outputs_fill(faid_result *r, const int *enabled, const char *extra)
{
    int n = 0;
    for (int i = 0; faid_stages[i]; i++) {
        const faid_stage *st = faid_stages[i];
        if (enabled && !enabled[i])
            continue;
        for (int k = 0; k < st->noutputs && n < FAID_RESULT_OUTPUTS; k++)
            if (faid_outputs_on(&st->outputs[k], extra))
                n += make_view(r, &st->outputs[k], &r->out[n]);
    }
    r->nout = n;
    return n;
}

int faid_outputs_check(const faid_config *cfg, faid_diag *d)
{
    const char *p = cfg->output_extra;
    while (*p) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        const faid_output_decl *o = faid_outputs_find(faid_key_lookup(p, n));
        if (!o || !o->optional) {
            char names[256] = "";
            size_t k = 0;
            for (int i = 0; faid_stages[i]; i++)
                for (int j = 0; j < faid_stages[i]->noutputs && k < sizeof names; j++)
                    if (faid_stages[i]->outputs[j].optional)
                        k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "",
                                              faid_key_name(faid_stages[i]->outputs[j].key));
            return faid_fail(d, FAID_ECONFIG,
                             "output.extra: '%.*s' is not an optional output (the optional ones: "
                             "%s)",
                             (int)n, p, names);
        }
        p = e ? e + 1 : p + n;
    }
    return FAID_OK;
}

size_t faid_outputs_bound(const faid_setup *s)
{
    const int peaks = s->cfg.peaks.algorithm != FAID_PEAKS_NONE && s->csr_bg;
    size_t bytes = 0;
    for (int i = 0; faid_stages[i]; i++)
        for (int k = 0; k < faid_stages[i]->noutputs; k++) {
            size_t n = 0;
            if (!faid_outputs_on(&faid_stages[i]->outputs[k], s->cfg.output_extra))
                continue;
            switch (faid_stages[i]->outputs[k].extent) {
            case FAID_OX_BINS:
                n = (size_t)s->csr->nbins;
                break;
            case FAID_OX_CAKE:
                n = s->csr2d ? (size_t)s->csr2d->nbins : 0;
                break;
            case FAID_OX_BG:
                n = peaks ? (size_t)s->csr_bg->nbins : 0;
                break;
            case FAID_OX_PEAKS:
                n = peaks ? (size_t)s->cfg.peaks.max_num_peaks : 0;
                break;
            case FAID_OX_SCALAR:
                n = 2; /* a uint 64 */
                break;
            }
            bytes += n * 4 + 64;
        }
    return bytes;
}

const faid_output_decl *faid_outputs_find(faid_key k)
{
    for (int i = 0; faid_stages[i]; i++)
        for (int j = 0; j < faid_stages[i]->noutputs; j++)
            if (faid_stages[i]->outputs[j].key == k)
                return &faid_stages[i]->outputs[j];
    return NULL;
}

/* The engine's own times, around the stages' (what the devices measure, not one stage). */
static const faid_time_decl engine_head[] = {
    {.name = "host",
     .help = "host work before the device: block table, copy into pinned staging",
     .key = FAID_KEY_HOST_US,
     .field = offsetof(faid_stage_times, stage_us),
     .histogram = 1,
     .status = FAID_KEY_HOST_US},
    FAID_TIME("transfer", TRANSFER_US, transfer_us, 1, "host <-> device copies"),
};
/* h2d and d2h: the parts of transfer, without a histogram (results and faid-bench show them:
 * issue 17 compares the daemon's stages with faid-bench's one by one) */
static const faid_time_decl engine_tail[] = {
    FAID_TIME("h2d", H2D_US, h2d_us, 0, "part of transfer: host -> device"),
    FAID_TIME("d2h", D2H_US, d2h_us, 0, "part of transfer: device -> host (the frame's share)"),
    FAID_TIME("compute", COMPUTE_US, total_us, 1, "the engine's total for the frame"),
};
#define NHEAD ((int)(sizeof engine_head / sizeof engine_head[0]))
#define NTAIL ((int)(sizeof engine_tail / sizeof engine_tail[0]))

int faid_times_count(void)
{
    int n = NHEAD + NTAIL;
    for (int i = 0; faid_stages[i]; i++)
        n += faid_stages[i]->ntimings;
    return n;
}

const faid_time_decl *faid_times_at(int i)
{
    if (i < 0)
        return NULL;
    if (i < NHEAD)
        return &engine_head[i];
    i -= NHEAD;
    for (int s = 0; faid_stages[s]; s++) {
        if (i < faid_stages[s]->ntimings)
            return &faid_stages[s]->timings[i];
        i -= faid_stages[s]->ntimings;
    }
    return i < NTAIL ? &engine_tail[i] : NULL;
}

const faid_time_decl *faid_times_status(faid_key k)
{
    for (int i = 0; k != FAID_KEY_UNKNOWN && i < faid_times_count(); i++)
        if (faid_times_at(i)->status == k)
            return faid_times_at(i);
    return NULL;
}

double faid_time_us(const faid_time_decl *t, const faid_stage_times *st)
{
    double v;
    memcpy(&v, (const char *)st + t->field, sizeof v);
    return v;
}
