/* faid_aggregates: hit rate, peak-count histogram and virtual powder pattern over frames (see
 * faid_aggregates.h). */
#include "faid_aggregates.h"

#include "faid_codec.h"
#include "faid_hits.h"
#include "faid_log.h"
#include "faid_proto_out.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define POWDER_BLOCK 1024 /* pixels of a dirty block: 4 KB of counts */

struct faid_aggr {
    pthread_mutex_t mu;
    faid_hits *hits; /* rolling window */
    int window;
    uint64_t frames, hits_total, peaks_total;
    uint64_t hist[FAID_AGGR_NBINS];
    int hist_width; /* num_peaks per histogram bin */
    int rows, cols;
    uint32_t *powder; /* rows * cols, NULL until a frame with peaks arrives */
    /* The blocks of POWDER_BLOCK pixels that hold a count (a bit each, and their list): a reset
     * clears those alone, so its cost follows the peaks added since the last one, not the
     * detector (clearing the whole image, 4 MB at 1024 x 1024, 72 MB on an EIGER 16M, under
     * this lock, let `resetplots` flat out stop the pipeline for 30 s, issue 20). */
    uint64_t *dirty_bits;
    uint32_t *dirty, ndirty;
    double rate_hist[FAID_AGGR_HISTORY], ts_hist[FAID_AGGR_HISTORY];
    int nhist, hist_head;
    /* publisher side (one thread, which alone allocates them): snapshot and its compressed
     * form; a reshape by a worker leaves them alone (the encoder reads them unlocked) */
    uint32_t *snap;
    size_t snap_npix;
    uint8_t *comp;
    size_t comp_cap;
};

faid_aggr *faid_aggr_new(void)
{
    faid_aggr *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    return a;
}

double faid_aggr_hit_rate(faid_aggr *a, int *window_frames)
{
    pthread_mutex_lock(&a->mu);
    double rate = a->hits ? faid_hits_rate(a->hits) : 0.0;
    int n = a->hits ? faid_hits_window_frames(a->hits) : 0;
    pthread_mutex_unlock(&a->mu);
    if (window_frames)
        *window_frames = n;
    return rate;
}

void faid_aggr_destroy(faid_aggr **pa)
{
    if (!pa || !*pa)
        return;
    faid_aggr *a = *pa;
    faid_hits_destroy(&a->hits);
    free(a->powder);
    free(a->dirty_bits);
    free(a->dirty);
    free(a->snap);
    free(a->comp);
    pthread_mutex_destroy(&a->mu);
    free(a);
    *pa = NULL;
}

static void clear_locked(faid_aggr *a)
{
    if (a->hits)
        faid_hits_reset(a->hits);
    a->frames = a->hits_total = a->peaks_total = 0;
    memset(a->hist, 0, sizeof a->hist);
    a->nhist = a->hist_head = 0;
    const size_t npix = (size_t)a->rows * (size_t)a->cols;
    for (uint32_t i = 0; a->powder && i < a->ndirty; i++) {
        const size_t b = a->dirty[i], first = b * POWDER_BLOCK;
        const size_t n = npix - first < POWDER_BLOCK ? npix - first : POWDER_BLOCK;
        memset(a->powder + first, 0, n * sizeof *a->powder);
        a->dirty_bits[b / 64] &= ~(UINT64_C(1) << (b % 64));
    }
    a->ndirty = 0;
}

/* Counts a peak in pixel i of the pattern, marking its block dirty. */
static void count_pixel(faid_aggr *a, size_t i)
{
    const size_t b = i / POWDER_BLOCK;
    const uint64_t bit = UINT64_C(1) << (b % 64);
    if (!(a->dirty_bits[b / 64] & bit)) {
        a->dirty_bits[b / 64] |= bit;
        a->dirty[a->ndirty++] = (uint32_t)b;
    }
    a->powder[i]++;
}

void faid_aggr_reset(faid_aggr *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    clear_locked(a);
    pthread_mutex_unlock(&a->mu);
}

/* (Re)makes the window and the pattern for this setup; the caller holds the lock. */
static int shape_locked(faid_aggr *a, const faid_setup *s)
{
    const faid_peak_params *p = &s->cfg.peaks;
    if (!a->hits || a->window != p->hit_rate_window) {
        faid_hits_destroy(&a->hits);
        a->hits = faid_hits_new(p->hit_rate_window);
        a->window = a->hits ? p->hit_rate_window : 0;
        if (!a->hits)
            return FAID_ENOMEM;
    }
    /* bins of a width that puts the hit threshold about a quarter up the histogram */
    int w = (p->min_peaks_for_hit * 4 + FAID_AGGR_NBINS - 1) / FAID_AGGR_NBINS;
    a->hist_width = w < 1 ? 1 : w;
    if (a->powder && a->rows == s->rows && a->cols == s->cols)
        return 0;
    free(a->powder);
    free(a->dirty_bits);
    free(a->dirty);
    a->rows = s->rows;
    a->cols = s->cols;
    const size_t npix = (size_t)s->rows * (size_t)s->cols;
    const size_t nblocks = (npix + POWDER_BLOCK - 1) / POWDER_BLOCK;
    a->powder = calloc(npix, sizeof *a->powder);
    a->dirty_bits = calloc((nblocks + 63) / 64, sizeof *a->dirty_bits);
    a->dirty = malloc(nblocks * sizeof *a->dirty);
    a->ndirty = 0;
    if (a->powder && a->dirty_bits && a->dirty)
        return 0;
    free(a->powder);
    free(a->dirty_bits);
    free(a->dirty);
    a->powder = NULL;
    a->dirty_bits = NULL;
    a->dirty = NULL;
    return FAID_ENOMEM;
}

int faid_aggr_add(faid_aggr *a, const faid_setup *s, const faid_result *r)
{
    if (!a || !r->peaks)
        return 0;
    pthread_mutex_lock(&a->mu);
    int rc = shape_locked(a, s);
    a->frames++;
    a->hits_total += r->is_hit != 0;
    a->peaks_total += (uint64_t)(r->num_peaks > 0 ? r->num_peaks : 0);
    if (a->hits)
        faid_hits_push(a->hits, r->is_hit != 0);
    int b = r->num_peaks / a->hist_width;
    a->hist[b < 0 ? 0 : b >= FAID_AGGR_NBINS ? FAID_AGGR_NBINS - 1 : b]++;
    const faid_peak_list *l = r->peaks;
    for (int32_t i = 0; a->powder && i < l->n; i++) {
        long x = lrintf(l->x[i]), y = lrintf(l->y[i]);
        if (x >= 0 && y >= 0 && x < a->cols && y < a->rows)
            count_pixel(a, (size_t)y * (size_t)a->cols + (size_t)x);
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

static int encode(faid_aggr *a, int record, uint8_t **buf, size_t *cap, size_t *len, faid_diag *d)
{
    *len = 0;
    pthread_mutex_lock(&a->mu);
    if (!a->hits || !a->powder) {
        pthread_mutex_unlock(&a->mu);
        return 0;
    }
    const double rate = faid_hits_rate(a->hits);
    const int in_window = faid_hits_window_frames(a->hits);
    if (record) {
        int slot = (a->hist_head + a->nhist) % FAID_AGGR_HISTORY;
        if (a->nhist == FAID_AGGR_HISTORY)
            a->hist_head = (a->hist_head + 1) % FAID_AGGR_HISTORY;
        else
            a->nhist++;
        a->rate_hist[slot] = rate;
        a->ts_hist[slot] = (double)faid_wall_ns() * 1e-9;
    }
    double rh[FAID_AGGR_HISTORY], th[FAID_AGGR_HISTORY];
    for (int i = 0; i < a->nhist; i++) {
        rh[i] = a->rate_hist[(a->hist_head + i) % FAID_AGGR_HISTORY];
        th[i] = a->ts_hist[(a->hist_head + i) % FAID_AGGR_HISTORY];
    }
    const int nh = a->nhist;
    uint64_t hist[FAID_AGGR_NBINS];
    memcpy(hist, a->hist, sizeof hist);
    const uint64_t frames = a->frames, hits = a->hits_total, peaks = a->peaks_total;
    const int width = a->hist_width, window = a->window;
    const size_t npix = (size_t)a->rows * (size_t)a->cols;
    const int rows = a->rows, cols = a->cols;
    if (a->snap_npix != npix) {
        free(a->snap);
        a->snap = malloc(npix * sizeof *a->snap);
        a->snap_npix = a->snap ? npix : 0;
    }
    if (a->snap)
        memcpy(a->snap, a->powder, npix * sizeof *a->snap);
    pthread_mutex_unlock(&a->mu);
    if (!a->snap)
        return faid_fail(d, FAID_ENOMEM, "aggregates: out of memory for the powder pattern");

    /* the pattern (mostly zeros) compressed as bitshuffle-LZ4, as detector frames travel */
    size_t bound = faid_bslz4_bound(npix * 4, 4, 0), clen = 0;
    if (a->comp_cap < bound) {
        free(a->comp);
        a->comp_cap = 0;
        if (!(a->comp = malloc(bound)))
            return faid_fail(d, FAID_ENOMEM, "aggregates: out of memory");
        a->comp_cap = bound;
    }
    int rc = faid_bslz4_encode(a->snap, npix * 4, 4, 0, a->comp, a->comp_cap, &clen, d);
    if (rc)
        return rc;
    size_t need = clen + 2 * FAID_AGGR_HISTORY * 8 + FAID_AGGR_NBINS * 8 + 4096;
    if (*cap < need) {
        uint8_t *nb = realloc(*buf, need);
        if (!nb)
            return faid_fail(d, FAID_ENOMEM, "aggregates: out of memory");
        *buf = nb;
        *cap = need;
    }
    faid_out_aggregates o = {
        .frames = frames,
        .hits = hits,
        .peaks = peaks,
        .hit_rate = rate,
        .hit_rate_window = (uint64_t)window,
        .hit_rate_window_frames = (uint64_t)in_window,
        .rate_history = rh,
        .time_history = th,
        .n_history = (uint64_t)nh,
        .num_peaks_histogram = hist,
        .n_bins = FAID_AGGR_NBINS,
        .bin_width = (uint64_t)width,
        .rows = (uint64_t)rows,
        .cols = (uint64_t)cols,
        .powder_bslz4 = a->comp,
        .powder_bytes = clen,
    };
    faid_mpw w;
    faid_mpw_init(&w, *buf, *cap);
    faid_proto_write_aggregates(&w, &o);
    if ((rc = faid_mpw_finish(&w, d)))
        return rc;
    *len = w.len;
    return 0;
}

int faid_aggr_encode(faid_aggr *a, uint8_t **buf, size_t *cap, size_t *len, faid_diag *d)
{
    return encode(a, 1, buf, cap, len, d);
}

int faid_aggr_encode_peek(faid_aggr *a, uint8_t **buf, size_t *cap, size_t *len, faid_diag *d)
{
    return encode(a, 0, buf, cap, len, d);
}
