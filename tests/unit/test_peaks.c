/* Unit tests of the peak-finding modules: parameter defaults and checks, peak-list and background
 * allocation, the hit decision and the rolling hit rate. */
#include "faid_hits.h"
#include "faid_peaks.h"

#include "faid_test.h"

#include <string.h>

static void test_params(void)
{
    faid_peak_params p;
    faid_peak_params_default(&p);
    faid_diag d;
    CHECK(faid_peak_params_check(&p, &d) == 0);
    CHECK(p.cycles == 5 && p.patch_size == 3 && p.max_num_peaks == 2048);
    faid_peak_params q = p;
    q.patch_size = 4;
    CHECK(faid_peak_params_check(&q, &d) == FAID_ECONFIG && strstr(d.msg, "patch_size"));
    q = p;
    q.max_pixel_count = 1;
    CHECK(faid_peak_params_check(&q, &d) == FAID_ECONFIG && strstr(d.msg, "max_pixel_count"));
    q = p;
    q.has_max_peaks_for_hit = 1;
    q.max_peaks_for_hit = 3;
    CHECK(faid_peak_params_check(&q, &d) == FAID_ECONFIG && strstr(d.msg, "max_peaks_for_hit"));
    faid_peak_algorithm a;
    CHECK(faid_peak_algorithm_parse("peakfinder8", &a) == 0 && a == FAID_PEAKS_PEAKFINDER8);
    CHECK(faid_peak_algorithm_parse("pf9", &a) == FAID_EINVAL);
    CHECK(!strcmp(faid_peak_algorithm_name(FAID_PEAKS_PYFAI), "pyfai"));
    faid_clip_model m;
    CHECK(faid_clip_model_parse("hybrid", &m) == 0 && m == FAID_CLIP_HYBRID);
    CHECK(faid_clip_model_parse("none", &m) == FAID_EINVAL);
    CHECK(!strcmp(faid_clip_model_name(FAID_CLIP_POISSON), "poisson"));
}

static void test_lists(void)
{
    CHECK(faid_peak_list_new(0) == NULL);
    faid_peak_list *l = faid_peak_list_new(2);
    CHECK(l && l->n == 0 && l->capacity == 2);
    for (int i = 0; i < 3; i++)
        faid_peak_list_push(l, (float)i, 2.0f * (float)i, 10, 1, 10, 5, 3, i);
    CHECK(l->n == 2 && l->n_found == 3 && l->x[1] == 1.0f && l->y[1] == 2.0f && l->index[1] == 1);
    faid_peak_list_clear(l);
    CHECK(l->n == 0 && l->n_found == 0);
    faid_peak_list_destroy(&l);
    CHECK(l == NULL);
    faid_peak_list_destroy(&l);
    faid_background *b = faid_background_new(7);
    CHECK(b && b->nbins == 7 && b->mean && b->std && b->sem && b->count);
    faid_background_destroy(&b);
    CHECK(b == NULL);
    CHECK(faid_background_new(0) == NULL);
}

static void test_hits(void)
{
    faid_peak_params p;
    faid_peak_params_default(&p);
    p.min_peaks_for_hit = 3;
    CHECK(!faid_hits_is_hit(&p, 2) && faid_hits_is_hit(&p, 3) && faid_hits_is_hit(&p, 1000));
    p.has_max_peaks_for_hit = 1;
    p.max_peaks_for_hit = 5;
    CHECK(faid_hits_is_hit(&p, 5) && !faid_hits_is_hit(&p, 6));

    CHECK(faid_hits_new(0) == NULL);
    faid_hits *h = faid_hits_new(4);
    CHECK(h && faid_hits_rate(h) == 0.0 && faid_hits_window_frames(h) == 0);
    faid_hits_push(h, 1);
    CHECK(faid_hits_rate(h) == 1.0 && faid_hits_window_frames(h) == 1);
    faid_hits_push(h, 0);
    faid_hits_push(h, 0);
    faid_hits_push(h, 1);
    CHECK(faid_hits_rate(h) == 0.5 && faid_hits_window_frames(h) == 4);
    /* The first hit leaves the window: 0 0 1 0. */
    faid_hits_push(h, 0);
    CHECK(faid_hits_rate(h) == 0.25 && faid_hits_window_frames(h) == 4);
    /* A long run against a brute-force count over the last 4 decisions. */
    int hist[1000];
    for (int i = 0; i < 1000; i++) {
        hist[i] = (i * 7919 % 13) < 5;
        faid_hits_push(h, hist[i]);
        int lo = i - 3 < 0 ? 0 : i - 3, want = 0;
        for (int k = lo; k <= i; k++)
            want += hist[k];
        if (i >= 3)
            CHECK_MSG(faid_hits_rate(h) == want / 4.0, "frame %d", i);
    }
    CHECK(faid_hits_total_frames(h) == 1005 && faid_hits_window_frames(h) == 4);
    faid_hits_reset(h);
    CHECK(faid_hits_total_frames(h) == 0 && faid_hits_total_hits(h) == 0 &&
          faid_hits_rate(h) == 0.0);
    faid_hits_destroy(&h);
    CHECK(h == NULL);
}

int main(void)
{
    test_params();
    test_lists();
    test_hits();
    return faid_test_finish();
}
