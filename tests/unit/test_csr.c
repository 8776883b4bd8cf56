/* Unit tests of faid_csr (matrix structure and invariants) and faid_reduce_ref (preprocessing and
 * integration rules). Agreement with pyFAI itself is tested in
 * tests/reference/test_integrate_ref.py; here every expected value follows from the definitions,
 * not from stored numbers. */
#include "faid_csr.h"
#include "faid_reduce.h"
#include "faid_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static faid_geometry test_geometry(void)
{
    faid_geometry g = {0};
    g.dist = 0.1;
    g.poni1 = 0.006;
    g.poni2 = 0.009;
    g.rot1 = 0.04;
    g.rot2 = -0.02;
    g.rot3 = 0.3;
    g.wavelength = 1e-10;
    g.pixel1 = 100e-6;
    g.pixel2 = 120e-6;
    g.rows = 90;
    g.cols = 110;
    g.orientation = 3;
    return g;
}

static uint8_t *test_mask(const faid_geometry *g)
{
    size_t n = (size_t)g->rows * (size_t)g->cols;
    uint8_t *m = calloc(n, 1);
    for (size_t i = 0; i < n; i += 37)
        m[i] = 1;
    for (int r = 10; r < 20; r++)
        for (int c = 30; c < 50; c++)
            m[(size_t)r * (size_t)g->cols + (size_t)c] = 1;
    return m;
}

/* Structural invariants shared by every matrix; returns per-pixel coefficient sums in sums. */
static void check_structure(const faid_csr *csr, const uint8_t *mask, double *sums,
                            const char *what)
{
    CHECK_MSG(csr->indptr[0] == 0 && csr->indptr[csr->nbins] == csr->nnz, "%s: indptr ends", what);
    int sorted = 1, in_range = 1, masked_absent = 1, positive = 1;
    memset(sums, 0, (size_t)csr->npix * sizeof(double));
    for (int32_t b = 0; b < csr->nbins; b++) {
        for (int32_t k = csr->indptr[b]; k < csr->indptr[b + 1]; k++) {
            int32_t idx = csr->indices[k];
            if (idx < 0 || idx >= csr->npix) {
                in_range = 0;
                continue;
            }
            if (k > csr->indptr[b] && csr->indices[k - 1] >= idx)
                sorted = 0;
            if (mask && mask[idx])
                masked_absent = 0;
            double c = csr->data ? csr->data[k] : 1.0;
            if (c == 0.0)
                positive = 0;
            sums[idx] += c;
        }
    }
    CHECK_MSG(in_range, "%s: indices within the frame", what);
    CHECK_MSG(sorted, "%s: indices strictly increasing within each bin", what);
    CHECK_MSG(masked_absent, "%s: masked pixels absent", what);
    CHECK_MSG(positive, "%s: no stored zero coefficient", what);
}

static void test_splits_1d_2d(void)
{
    faid_geometry g = test_geometry();
    uint8_t *mask = test_mask(&g);
    size_t npix = (size_t)g.rows * (size_t)g.cols;
    double *sums = malloc(npix * sizeof(double));
    for (int s = 0; s < 3; s++) {
        for (int two_d = 0; two_d < 2; two_d++) {
            faid_csr_params p = {0};
            p.split = (faid_split)s;
            p.unit = FAID_UNIT_2TH_DEG;
            p.npt_rad = 64;
            p.npt_azim = two_d ? 24 : 0;
            faid_csr *csr = NULL;
            faid_diag d = {0};
            char what[64];
            snprintf(what, sizeof what, "split %s %dD", faid_split_name(p.split), two_d + 1);
            int rc = faid_csr_build(&g, mask, &p, &csr, &d);
            CHECK_MSG(rc == 0, "%s: %s", what, d.msg);
            if (rc)
                continue;
            CHECK(csr->nbins == 64 * (two_d ? 24 : 1));
            CHECK(csr->npix == (int32_t)npix);
            CHECK_MSG((s == FAID_SPLIT_NO) == (csr->data == NULL), "%s: data NULL iff no split",
                      what);
            check_structure(csr, mask, sums, what);
            /* Without ranges every unmasked pixel is in range: its coefficients sum to 1 (2D
             * full split approximates areas in float32, hence the looser bound). */
            double tol = (s == FAID_SPLIT_FULL && two_d) ? 1e-4 : 1e-5;
            int sum_ok = 1, all_present = 1;
            for (size_t i = 0; i < npix; i++) {
                if (mask[i])
                    continue;
                if (sums[i] == 0.0)
                    all_present = 0;
                else if (fabs(sums[i] - 1.0) > tol)
                    sum_ok = 0;
            }
            CHECK_MSG(all_present, "%s: every unmasked pixel present", what);
            CHECK_MSG(sum_ok, "%s: coefficients of each pixel sum to 1", what);
            if (s == FAID_SPLIT_NO) {
                int once = 1;
                for (size_t i = 0; i < npix; i++)
                    if (!mask[i] && sums[i] != 1.0)
                        once = 0;
                CHECK_MSG(once, "%s: each pixel exactly once", what);
            }
            /* Bin centres: min + (b + 1/2) * (max - min) / n. */
            int centres_ok = 1;
            double w = (csr->rad_max - csr->rad_min) / csr->npt_rad;
            for (int b = 0; b < csr->npt_rad; b++)
                if (fabs(csr->rad_centers[b] - (csr->rad_min + (b + 0.5) * w)) >
                    1e-9 * fabs(w) * 64)
                    centres_ok = 0;
            CHECK_MSG(centres_ok, "%s: radial bin centres", what);
            CHECK(csr->rad_min >= 0.0 && csr->rad_max > csr->rad_min);
            if (two_d) {
                double wa = (csr->azim_max - csr->azim_min) / csr->npt_azim;
                int az_ok = csr->azim_min >= -180.0001 && csr->azim_max <= 180.001;
                for (int b = 0; b < csr->npt_azim; b++)
                    if (fabs(csr->azim_centers[b] - (csr->azim_min + (b + 0.5) * wa)) > 1e-9)
                        az_ok = 0;
                CHECK_MSG(az_ok, "%s: azimuthal bin centres in degrees", what);
            }
            faid_csr_destroy(&csr);
            CHECK(csr == NULL);
        }
    }
    free(sums);
    free(mask);
}

static void test_ranges(void)
{
    faid_geometry g = test_geometry();
    size_t npix = (size_t)g.rows * (size_t)g.cols;
    double *tth = malloc(npix * sizeof(double));
    faid_geometry_radial_centers(&g, FAID_UNIT_2TH_DEG, tth);
    faid_csr_params p = {0};
    p.split = FAID_SPLIT_NO;
    p.unit = FAID_UNIT_2TH_DEG;
    p.npt_rad = 50;
    p.has_rad_range = 1;
    p.rad_range[0] = 3.0;
    p.rad_range[1] = 6.0;
    faid_csr *csr = NULL;
    faid_diag d = {0};
    CHECK(faid_csr_build(&g, NULL, &p, &csr, &d) == 0);
    if (csr) {
        CHECK(fabs(csr->rad_min - 3.0) < 1e-12);
        CHECK(csr->rad_max > 6.0 && csr->rad_max < 6.0 * (1 + 1e-6));
        double w = 3.0 / 50;
        /* Every pixel in the matrix lies in [3 - w, 6]: the (-1, 0) fractional bin also lands in
         * bin 0 (pyFAI's truncation). Every pixel inside [3, 6) is present. */
        uint8_t *seen = calloc(npix, 1);
        int ok = 1;
        for (int64_t k = 0; k < csr->nnz; k++) {
            int32_t i = csr->indices[k];
            seen[i] = 1;
            if (tth[i] < 3.0 - w - 1e-12 || tth[i] > 6.0 + 1e-9)
                ok = 0;
        }
        int complete = 1;
        for (size_t i = 0; i < npix; i++)
            if (tth[i] >= 3.0 && tth[i] < 6.0 && !seen[i])
                complete = 0;
        CHECK_MSG(ok, "radial range: only pixels within range (plus the bin-0 quirk)");
        CHECK_MSG(complete, "radial range: all pixels inside the range present");
        free(seen);
        faid_csr_destroy(&csr);
    }
    /* Azimuth range in 1D keeps fewer pixels than the full circle. */
    faid_csr *all = NULL, *part = NULL;
    p.has_rad_range = 0;
    CHECK(faid_csr_build(&g, NULL, &p, &all, &d) == 0);
    p.has_azim_range = 1;
    p.azim_range[0] = -90;
    p.azim_range[1] = 90;
    CHECK(faid_csr_build(&g, NULL, &p, &part, &d) == 0);
    if (all && part)
        CHECK(part->nnz > 0 && part->nnz < all->nnz);
    faid_csr_destroy(&all);
    faid_csr_destroy(&part);
    free(tth);
}

static void test_errors(void)
{
    faid_geometry g = test_geometry();
    faid_csr_params p = {0};
    p.split = FAID_SPLIT_BBOX;
    p.unit = FAID_UNIT_Q_NM;
    p.npt_rad = 0;
    faid_csr *csr = (faid_csr *)&p; /* must be reset to NULL on failure */
    faid_diag d = {0};
    CHECK(faid_csr_build(&g, NULL, &p, &csr, &d) == FAID_ERANGE && csr == NULL);
    CHECK(strstr(d.msg, "npt_rad") != NULL);
    p.npt_rad = 10;
    p.has_rad_range = 1;
    p.rad_range[0] = p.rad_range[1] = 2.0;
    CHECK(faid_csr_build(&g, NULL, &p, &csr, &d) == FAID_ERANGE);
    p.has_rad_range = 0;
    p.split = (faid_split)7;
    CHECK(faid_csr_build(&g, NULL, &p, &csr, &d) == FAID_EINVAL);
    p.split = FAID_SPLIT_NO;
    g.wavelength = 0; /* q without wavelength */
    CHECK(faid_csr_build(&g, NULL, &p, &csr, &d) < 0 && csr == NULL);
    g = test_geometry();
    g.rows = 0;
    CHECK(faid_csr_build(&g, NULL, &p, &csr, &d) == FAID_ESHAPE);
    faid_split s;
    CHECK(faid_split_parse("full", &s) == 0 && s == FAID_SPLIT_FULL);
    CHECK(faid_split_parse("diagonal", &s) == FAID_EINVAL);
    faid_error_model m;
    CHECK(faid_error_model_parse("azimuthal", &m) == 0 && m == FAID_EM_AZIMUTHAL);
    CHECK(faid_error_model_parse("hybrid", &m) == FAID_EINVAL);
    CHECK(!strcmp(faid_error_model_name(FAID_EM_POISSON), "poisson"));
    CHECK(faid_profile_new(0, 0) == NULL);
    faid_csr_destroy(NULL);
    faid_profile_destroy(NULL);
}

/* A hand-made matrix: bin 0 = pixels 0,1 (coefficients 1, 0.5), bin 1 empty, bin 2 = pixel 2. */
static void test_reduce(void)
{
    int32_t indptr[4] = {0, 2, 2, 3}, indices[3] = {0, 1, 2};
    float data[3] = {1.0f, 0.5f, 1.0f};
    faid_csr csr = {0};
    csr.nbins = 3;
    csr.npt_rad = 3;
    csr.nnz = 3;
    csr.npix = 4;
    csr.indptr = indptr;
    csr.indices = indices;
    csr.data = data;
    uint16_t raw[4] = {10, 40, 0, 7};
    float dark[4] = {2, 4, 1, 0}, flat[4] = {1, 2, 1, 1}, sa[4] = {0.5f, 1, 1, 1};
    uint8_t mask[4] = {0, 0, 0, 1};
    faid_corrections c = {0};
    c.npix = 4;
    c.mask = mask;
    c.dark = dark;
    c.flat = flat;
    c.solid_angle = sa;
    c.normalization_factor = 2.0f;
    c.error_model = FAID_EM_POISSON;
    c.empty = -7.0f;
    float pre[16];
    faid_diag d = {0};
    CHECK(faid_ref_preprocess(&c, FAID_DT_U16, raw, pre, &d) == 0);
    /* pixel 0: signal 10-2, variance max(10,1) (raw, before dark), norm 2*1*0.5 */
    CHECK(pre[0] == 8.0f && pre[1] == 10.0f && pre[2] == 1.0f && pre[3] == 1.0f);
    /* pixel 2: raw 0 -> variance 1, signal -1 */
    CHECK(pre[8] == -1.0f && pre[9] == 1.0f && pre[10] == 2.0f && pre[11] == 1.0f);
    /* pixel 3 masked: all zero */
    CHECK(pre[12] == 0 && pre[13] == 0 && pre[14] == 0 && pre[15] == 0);
    faid_profile *p = faid_profile_new(3, 0);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK(faid_ref_integrate(&csr, &c, pre, p, &d) == 0);
    /* bin 0: S = 8 + 0.5*36, N = 1 + 0.5*4, VV = 10 + 0.25*40, N2 = 1 + 0.25*16 */
    double S = 8 + 18, N = 3, VV = 20, N2 = 5;
    CHECK(fabsf(p->I[0] - (float)(S / N)) < 1e-6f);
    CHECK(fabsf(p->sigma[0] - (float)(sqrt(VV) / N)) < 1e-6f);
    CHECK(fabsf(p->std[0] - (float)sqrt(VV / N2)) < 1e-6f);
    CHECK(p->count[0] == 1.5f && p->sum_signal[0] == 26.0f && p->sum_norm[0] == 3.0f);
    CHECK(p->sum_variance[0] == 20.0f && p->sum_norm_sq[0] == 5.0f);
    /* empty bin */
    CHECK(p->I[1] == -7.0f && p->sigma[1] == -7.0f && p->std[1] == -7.0f && p->count[1] == 0);
    /* no error model: sigma and std are `empty` also in populated bins */
    c.error_model = FAID_EM_NONE;
    CHECK(faid_ref_preprocess(&c, FAID_DT_U16, raw, pre, &d) == 0);
    CHECK(faid_ref_integrate(&csr, &c, pre, p, &d) == 0);
    CHECK(p->sigma[0] == -7.0f && p->std[0] == -7.0f && fabsf(p->I[0] - 26.0f / 3) < 1e-6f);
    /* azimuthal: two pixels of corrected values 8 and 9, weights w = c*norm = 1 and 1 */
    float raw2[4] = {8, 9, 3, 0};
    faid_corrections c2 = {0};
    c2.npix = 4;
    c2.normalization_factor = 1.0f;
    c2.error_model = FAID_EM_AZIMUTHAL;
    data[1] = 1.0f;
    CHECK(faid_ref_preprocess(&c2, FAID_DT_F32, raw2, pre, &d) == 0);
    CHECK(faid_ref_integrate(&csr, &c2, pre, p, &d) == 0);
    /* mean 8.5; VV = sum w^2 (x - mean)^2 = 0.5; std = sqrt(VV / sum w^2) = 0.5 */
    CHECK(fabsf(p->I[0] - 8.5f) < 1e-6f && fabsf(p->std[0] - 0.5f) < 1e-6f);
    CHECK(fabsf(p->sigma[0] - (float)(sqrt(0.5) / 2)) < 1e-6f);
    /* dummy with tolerance and NaN raw invalidate pixels */
    float raw3[4] = {NAN, -1.2f, 5, 5};
    c2.do_dummy = 1;
    c2.dummy = -1.0f;
    c2.delta_dummy = 0.5f;
    CHECK(faid_ref_preprocess(&c2, FAID_DT_F32, raw3, pre, &d) == 0);
    CHECK(pre[3] == 0 && pre[7] == 0 && pre[11] == 1 && pre[15] == 1);
    /* size mismatch is an error, not a crash */
    faid_profile *small = faid_profile_new(2, 0);
    CHECK(faid_ref_integrate(&csr, &c2, pre, small, &d) == FAID_ESIZE);
    faid_profile_destroy(&small);
    faid_profile_destroy(&p);
    CHECK(p == NULL);
}

int main(void)
{
    RUN(test_splits_1d_2d());
    RUN(test_ranges());
    RUN(test_errors());
    RUN(test_reduce());
    return faid_test_finish();
}
