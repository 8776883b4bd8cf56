/* faid_hits: hit decision and rolling hit rate over a ring of the last `window` decisions (see
 * faid_hits.h). The window count is kept incrementally, so a push costs O(1). */
#include "faid_hits.h"

#include <stdlib.h>
#include <string.h>

struct faid_hits {
    int window;
    int filled; /* frames in the ring, <= window */
    int pos;    /* next slot to write */
    int hits_in_window;
    uint64_t frames, hits;
    uint8_t *ring;
};

int faid_hits_is_hit(const faid_peak_params *p, int32_t num_peaks)
{
    if (num_peaks < p->min_peaks_for_hit)
        return 0;
    if (p->has_max_peaks_for_hit && num_peaks > p->max_peaks_for_hit)
        return 0;
    return 1;
}

faid_hits *faid_hits_new(int window)
{
    if (window < 1 || window > (1 << 24))
        return NULL;
    faid_hits *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->ring = calloc((size_t)window, 1);
    if (!h->ring) {
        free(h);
        return NULL;
    }
    h->window = window;
    return h;
}

void faid_hits_destroy(faid_hits **hp)
{
    if (!hp || !*hp)
        return;
    free((*hp)->ring);
    free(*hp);
    *hp = NULL;
}

void faid_hits_push(faid_hits *h, int is_hit)
{
    uint8_t v = is_hit ? 1 : 0;
    if (h->filled == h->window)
        h->hits_in_window -= h->ring[h->pos];
    else
        h->filled++;
    h->ring[h->pos] = v;
    h->hits_in_window += v;
    h->pos = (h->pos + 1) % h->window;
    h->frames++;
    h->hits += v;
}

double faid_hits_rate(const faid_hits *h)
{
    return h->filled ? (double)h->hits_in_window / (double)h->filled : 0.0;
}

int faid_hits_window_frames(const faid_hits *h)
{
    return h->filled;
}
uint64_t faid_hits_total_frames(const faid_hits *h)
{
    return h->frames;
}
uint64_t faid_hits_total_hits(const faid_hits *h)
{
    return h->hits;
}

void faid_hits_reset(faid_hits *h)
{
    memset(h->ring, 0, (size_t)h->window);
    h->filled = h->pos = h->hits_in_window = 0;
    h->frames = h->hits = 0;
}
