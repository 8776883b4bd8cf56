/* Unit tests of faid_geometry that need no reference program: units, presets and their gap masks
 * (against an independent per-pixel rule), analytic untilted geometry, invariances of the
 * rotations, orientation renumbering, array layouts, and the .poni parser including its errors.
 * The comparisons with pyFAI itself live in tests/reference/test_geometry.py. */
#include "faid_geometry.h"
#include "faid_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static int near(double a, double b, double tol)
{
    return fabs(a - b) <= tol * fmax(1.0, fabs(b));
}

static double wrap(double a)
{
    while (a > M_PI)
        a -= 2 * M_PI;
    while (a <= -M_PI)
        a += 2 * M_PI;
    return a;
}

static faid_geometry base_geometry(void)
{
    faid_geometry g = {0};
    g.dist = 0.1;
    g.poni1 = 0.0071;
    g.poni2 = 0.0123;
    g.wavelength = 1.0332e-10;
    g.pixel1 = 75e-6;
    g.pixel2 = 100e-6;
    g.rows = 40;
    g.cols = 60;
    g.orientation = 3;
    return g;
}

static void test_units(void)
{
    for (int u = FAID_UNIT_Q_NM; u <= FAID_UNIT_R_M; u++) {
        faid_unit back;
        CHECK(faid_unit_parse(faid_unit_name((faid_unit)u), &back) == 0 && back == (faid_unit)u);
    }
    faid_unit u;
    CHECK(faid_unit_parse("q_nm^-1", &u) == 0 && u == FAID_UNIT_Q_NM);
    CHECK(faid_unit_parse("q_A^-1", &u) == 0 && u == FAID_UNIT_Q_A);
    CHECK(faid_unit_parse("2th_deg", &u) == 0 && u == FAID_UNIT_2TH_DEG);
    CHECK(faid_unit_parse("r_mm", &u) == 0 && u == FAID_UNIT_R_MM);
    CHECK(faid_unit_parse("q", &u) == FAID_EINVAL);
    CHECK(faid_unit_parse("chi_deg", &u) == FAID_EINVAL);
    CHECK(faid_unit_parse(NULL, &u) == FAID_EINVAL);
    CHECK(faid_unit_needs_wavelength(FAID_UNIT_Q_A) && !faid_unit_needs_wavelength(FAID_UNIT_R_MM));
    /* Scaled = internal * scale, for every unit. */
    faid_geometry g = base_geometry();
    size_t n = (size_t)g.rows * (size_t)g.cols;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (int k = FAID_UNIT_Q_NM; k <= FAID_UNIT_R_M; k++) {
        CHECK(faid_geometry_radial_centers(&g, (faid_unit)k, a) == 0);
        CHECK(faid_geometry_radial_centers_internal(&g, (faid_unit)k, b) == 0);
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            ok &= a[i] == b[i] * faid_unit_scale((faid_unit)k);
        CHECK_MSG(ok, "unit %s", faid_unit_name((faid_unit)k));
    }
    /* The two q units and the two 2theta units share their internal form. */
    CHECK(faid_geometry_radial_centers_internal(&g, FAID_UNIT_Q_A, a) == 0);
    CHECK(faid_geometry_radial_centers_internal(&g, FAID_UNIT_Q_NM, b) == 0);
    CHECK(memcmp(a, b, n * sizeof *a) == 0);
    g.wavelength = 0;
    CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_Q_NM, a) == FAID_EINVAL);
    CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_2TH_DEG, a) == 0);
    free(a);
    free(b);
}

static void test_presets(void)
{
    int count = 0;
    for (const faid_detector_preset *p = faid_detector_presets; p->name; p++, count++) {
        CHECK(faid_detector_find(p->name) == p);
        CHECK(faid_detector_find(p->alias) == p);
        CHECK(faid_detector_find(p->pyfai_alias) == p);
        char upper[64];
        snprintf(upper, sizeof upper, "%s", p->alias);
        for (char *c = upper; *c; c++)
            if (*c >= 'a' && *c <= 'z')
                *c = (char)(*c - 'a' + 'A');
        CHECK_MSG(faid_detector_find(upper) == p, "%s", upper);

        /* Gap mask against the rule "a row is in a gap when its offset within one module + gap
         * period is at or past the module size", applied pixel by pixel. */
        size_t n = (size_t)p->rows * (size_t)p->cols;
        uint8_t *m = calloc(n, 1);
        faid_detector_gap_mask(p, m);
        size_t bad = 0, masked = 0;
        for (int r = 0; r < p->rows; r++)
            for (int c = 0; c < p->cols; c++) {
                int gr = r % (p->module_rows + p->gap_rows) >= p->module_rows;
                int gc = c % (p->module_cols + p->gap_cols) >= p->module_cols;
                uint8_t v = m[(size_t)r * (size_t)p->cols + (size_t)c];
                bad += v != (gr || gc);
                masked += v;
            }
        CHECK_MSG(bad == 0, "%s: %zu pixels differ from the module rule", p->name, bad);
        CHECK(masked > 0 && masked < n);
        free(m);
    }
    CHECK(count == 12);
    CHECK(faid_detector_find("Eiger 4M") == faid_detector_find("eiger_4m"));
    CHECK(faid_detector_find("EIGER2_16M") == faid_detector_find("Eiger2 16M"));
    CHECK(faid_detector_find("Eiger4M") != faid_detector_find("Eiger2_4M"));
    CHECK(faid_detector_find("Eiger7M") == NULL);
    CHECK(faid_detector_find("") == NULL);
    CHECK(faid_detector_find(NULL) == NULL);
}

/* Untilted detector: everything follows from the in-plane offset (p1, p2) from the PONI. */
static void test_untilted_analytic(void)
{
    faid_geometry g = base_geometry();
    size_t n = (size_t)g.rows * (size_t)g.cols;
    double *tth = malloc(n * sizeof *tth), *q = malloc(n * sizeof *q), *r = malloc(n * sizeof *r);
    double *chi = malloc(n * sizeof *chi), *sa = malloc(n * sizeof *sa);
    double *pol = malloc(n * sizeof *pol);
    CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_2TH_RAD, tth) == 0);
    CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_Q_NM, q) == 0);
    CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_R_MM, r) == 0);
    faid_geometry_chi_centers(&g, chi);
    faid_geometry_solid_angle(&g, sa);
    faid_geometry_polarization(&g, 0.0, 0.0, pol);
    int bad = 0;
    for (int i = 0; i < g.rows; i++)
        for (int j = 0; j < g.cols; j++) {
            size_t k = (size_t)i * (size_t)g.cols + (size_t)j;
            double p1 = (i + 0.5) * g.pixel1 - g.poni1, p2 = (j + 0.5) * g.pixel2 - g.poni2;
            double rr = hypot(p1, p2), t = atan2(rr, g.dist);
            bad += !near(tth[k], t, 1e-12);
            bad += !near(q[k], 4e-9 * M_PI / g.wavelength * sin(t / 2), 1e-12);
            bad += !near(r[k], 1000 * rr, 1e-12);
            bad += !near(chi[k], atan2(p1, p2), 1e-12);
            double cosa = g.dist / sqrt(g.dist * g.dist + rr * rr);
            bad += !near(sa[k], cosa * cosa * cosa, 1e-12);
            bad += !near(pol[k], 0.5 * (1 + cos(t) * cos(t)), 1e-12);
        }
    CHECK_MSG(bad == 0, "%d analytic mismatches", bad);

    /* Pixel centred on the PONI: 2theta 0, solid angle 1. */
    g.poni1 = (10 + 0.5) * g.pixel1;
    g.poni2 = (20 + 0.5) * g.pixel2;
    faid_geometry_solid_angle(&g, sa);
    CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_2TH_DEG, tth) == 0);
    size_t k0 = 10 * (size_t)g.cols + 20;
    CHECK(sa[k0] == 1.0 && tth[k0] == 0.0);
    free(tth);
    free(q);
    free(r);
    free(chi);
    free(sa);
    free(pol);
}

/* rot3 turns the detector about the beam: 2theta and r unchanged, chi shifted by -rot3; any
 * rotation keeps |t| = |(p1, p2, L)|. */
static void test_rotation_invariants(void)
{
    faid_geometry g = base_geometry(), h = base_geometry();
    h.rot3 = 0.7;
    size_t n = (size_t)g.rows * (size_t)g.cols;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_2TH_RAD, a) == 0);
    CHECK(faid_geometry_radial_centers(&h, FAID_UNIT_2TH_RAD, b) == 0);
    int bad = 0;
    for (size_t k = 0; k < n; k++)
        bad += !near(a[k], b[k], 1e-12);
    faid_geometry_chi_centers(&g, a);
    faid_geometry_chi_centers(&h, b);
    for (size_t k = 0; k < n; k++)
        bad += fabs(wrap(b[k] - (a[k] - h.rot3))) > 1e-12;
    CHECK_MSG(bad == 0, "%d rot3 mismatches", bad);

    h.rot1 = 0.3;
    h.rot2 = -0.45;
    double p1 = 0.013, p2 = -0.021, t1, t2, t3;
    faid_geometry_t123(&h, p1 + h.poni1, p2 + h.poni2, &t1, &t2, &t3);
    CHECK(
        near(sqrt(t1 * t1 + t2 * t2 + t3 * t3), sqrt(p1 * p1 + p2 * p2 + h.dist * h.dist), 1e-14));
    /* The PONI lies on the detector normal through the sample: with rot1 = rot2 = 0 it sits on
     * the beam (2theta = 0). */
    h.rot1 = h.rot2 = 0;
    faid_geometry_t123(&h, h.poni1, h.poni2, &t1, &t2, &t3);
    CHECK(fabs(t1) < 1e-18 && fabs(t2) < 1e-18 && near(t3, h.dist, 1e-15));
    free(a);
    free(b);
}

/* Orientation renumbers pixels only (pyFAI 2026): orientation 2 = rows reversed, 4 = columns
 * reversed, 1 = both, 0 = 3. Checked on a tilted geometry, centres and corners. */
static void test_orientation(void)
{
    faid_geometry g = base_geometry();
    g.rot1 = 0.12;
    g.rot2 = -0.08;
    g.rot3 = 0.9;
    int H = g.rows, W = g.cols;
    size_t n = (size_t)(H + 1) * (size_t)(W + 1);
    double *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
    double *cref = malloc(n * sizeof *cref), *cgot = malloc(n * sizeof *cgot);
    for (int corner = 0; corner < 2; corner++) {
        int nr = H + corner, nc = W + corner;
        g.orientation = 3;
        if (corner) {
            CHECK(faid_geometry_radial_corners(&g, FAID_UNIT_Q_A, ref) == 0);
            faid_geometry_chi_corners(&g, cref);
        } else {
            CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_Q_A, ref) == 0);
            faid_geometry_chi_centers(&g, cref);
        }
        for (int o = 0; o <= 4; o++) {
            g.orientation = o;
            if (corner) {
                CHECK(faid_geometry_radial_corners(&g, FAID_UNIT_Q_A, got) == 0);
                faid_geometry_chi_corners(&g, cgot);
            } else {
                CHECK(faid_geometry_radial_centers(&g, FAID_UNIT_Q_A, got) == 0);
                faid_geometry_chi_centers(&g, cgot);
            }
            int fr = o == 1 || o == 2, fc = o == 1 || o == 4, bad = 0;
            for (int i = 0; i < nr; i++)
                for (int j = 0; j < nc; j++) {
                    size_t k = (size_t)i * (size_t)nc + (size_t)j;
                    size_t kr =
                        (size_t)(fr ? nr - 1 - i : i) * (size_t)nc + (size_t)(fc ? nc - 1 - j : j);
                    bad += got[k] != ref[kr] || cgot[k] != cref[kr];
                }
            CHECK_MSG(bad == 0, "orientation %d corner %d: %d differ", o, corner, bad);
        }
    }
    free(ref);
    free(got);
    free(cref);
    free(cgot);
}

static void test_corner_layouts(void)
{
    faid_geometry g = base_geometry();
    g.rot1 = -0.2;
    g.rot2 = 0.1;
    g.rot3 = 1.7;
    g.orientation = 4;
    int H = g.rows, W = g.cols;
    size_t nc = (size_t)(H + 1) * (size_t)(W + 1), n = (size_t)H * (size_t)W;
    double *grid = malloc(nc * sizeof *grid), *cgrid = malloc(nc * sizeof *cgrid);
    double *cen = malloc(n * sizeof *cen), *ccen = malloc(n * sizeof *ccen);
    double *delta = malloc(n * sizeof *delta), *cdelta = malloc(n * sizeof *cdelta);
    float *arr = malloc(n * 8 * sizeof *arr);
    CHECK(faid_geometry_radial_corners_internal(&g, FAID_UNIT_2TH_DEG, grid) == 0);
    faid_geometry_chi_corners(&g, cgrid);
    CHECK(faid_geometry_radial_centers_internal(&g, FAID_UNIT_2TH_DEG, cen) == 0);
    faid_geometry_chi_centers(&g, ccen);
    CHECK(faid_geometry_corner_array(&g, FAID_UNIT_2TH_DEG, arr) == 0);
    CHECK(faid_geometry_delta(&g, FAID_UNIT_2TH_DEG, delta) == 0);
    faid_geometry_chi_delta(&g, cdelta);
    int bad = 0;
    for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++) {
            size_t k = (size_t)i * (size_t)W + (size_t)j;
            size_t ck[4] = {(size_t)i * (W + 1) + j, (size_t)(i + 1) * (W + 1) + j,
                            (size_t)(i + 1) * (W + 1) + j + 1, (size_t)i * (W + 1) + j + 1};
            double dmax = 0, cmax = 0;
            for (int c = 0; c < 4; c++) {
                bad += arr[k * 8 + 2 * c] != (float)grid[ck[c]];
                bad += arr[k * 8 + 2 * c + 1] != (float)cgrid[ck[c]];
                dmax = fmax(dmax, fabs((double)(float)grid[ck[c]] - cen[k]));
                cmax = fmax(cmax, fabs(wrap((double)(float)cgrid[ck[c]] - ccen[k])));
            }
            bad += delta[k] != dmax;
            bad += !near(cdelta[k], cmax, 1e-12);
            /* The centre lies inside its corners' range. */
            double lo = fmin(fmin(grid[ck[0]], grid[ck[1]]), fmin(grid[ck[2]], grid[ck[3]]));
            double hi = fmax(fmax(grid[ck[0]], grid[ck[1]]), fmax(grid[ck[2]], grid[ck[3]]));
            bad += cen[k] < lo || cen[k] > hi;
        }
    CHECK_MSG(bad == 0, "%d layout mismatches", bad);
    free(grid);
    free(cgrid);
    free(cen);
    free(ccen);
    free(delta);
    free(cdelta);
    free(arr);
}

static void test_polarization(void)
{
    faid_geometry g = base_geometry();
    g.rot2 = 0.3;
    size_t n = (size_t)g.rows * (size_t)g.cols;
    double *tth = malloc(n * sizeof *tth), *chi = malloc(n * sizeof *chi);
    double *p = malloc(n * sizeof *p);
    CHECK(faid_geometry_radial_centers_internal(&g, FAID_UNIT_2TH_RAD, tth) == 0);
    faid_geometry_chi_centers(&g, chi);
    faid_geometry_polarization(&g, 0.99, 0.25, p);
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        double c2 = cos(tth[k]) * cos(tth[k]);
        double want = 0.5 * (1 + c2 - 0.99 * cos(2 * (chi[k] + 0.25)) * (1 - c2));
        bad += !near(p[k], want, 1e-14) || p[k] <= 0 || p[k] > 1;
    }
    CHECK_MSG(bad == 0, "%d polarization mismatches", bad);
    free(tth);
    free(chi);
    free(p);
}

static void test_check(void)
{
    faid_geometry g = base_geometry();
    faid_diag d;
    CHECK(faid_geometry_check(&g, "cfg", &d) == 0);
    g.dist = 0;
    CHECK(faid_geometry_check(&g, "cfg", &d) == FAID_ERANGE && strstr(d.msg, "cfg: dist"));
    g = base_geometry();
    g.rot2 = NAN;
    CHECK(faid_geometry_check(&g, "cfg", &d) == FAID_ERANGE && strstr(d.msg, "rot2"));
    g = base_geometry();
    g.orientation = 5;
    CHECK(faid_geometry_check(&g, "cfg", &d) == FAID_ERANGE);
    g = base_geometry();
    g.rows = 0;
    CHECK(faid_geometry_check(&g, "cfg", &d) == FAID_ERANGE);
}

static int parse(const char *text, faid_geometry *g, char *det, faid_diag *d)
{
    faid_diag_clear(d);
    return faid_poni_parse(text, strlen(text), "t.poni", g, det, 64, d);
}

static void test_poni(void)
{
    faid_geometry g;
    faid_diag d;
    char det[64];

    /* Version 2.1 as pyFAI writes it. */
    memset(&g, 0, sizeof g);
    const char *v21 =
        "# Nota: C-Order, 1 refers to the Y axis, 2 to the X axis\n"
        "# Calibration done on Sat Nov 21 23:07:04 2026\n"
        "poni_version: 2.1\n"
        "Detector: Detector\n"
        "Detector_config: {\"pixel1\": 7.5e-05, \"pixel2\": 0.0001, \"orientation\": 2, "
        "\"max_shape\": [20, 30]}\n"
        "Distance: 0.1\nPoni1: 0.0007\nPoni2: 0.0011\nRot1: 0.12\nRot2: -0.08\nRot3: 0.9\n"
        "Wavelength: 1.0332e-10\n";
    CHECK(parse(v21, &g, det, &d) == 0);
    CHECK(g.dist == 0.1 && g.poni1 == 0.0007 && g.poni2 == 0.0011 && g.rot1 == 0.12 &&
          g.rot2 == -0.08 && g.rot3 == 0.9 && g.wavelength == 1.0332e-10);
    CHECK(g.pixel1 == 7.5e-05 && g.pixel2 == 0.0001 && g.rows == 20 && g.cols == 30);
    CHECK(g.orientation == 2 && strcmp(det, "Detector") == 0);

    /* Version 1, preset by pyFAI alias, CRLF, BOM, comments, later lines win, case-insensitive
     * keys; no Detector_config: orientation 3, pixel sizes from the PixelSize lines. */
    memset(&g, 0, sizeof g);
    const char *v1 = "\xEF\xBB\xBF# comment: with colon\r\nDetector: Eiger 4M\r\n"
                     "PIXELSIZE1: 7.6e-05\r\nDistance: 0.2\r\n  poni1 : 0.08 \r\nPoni2: 0.07\r\n"
                     "\r\nSplineFile: None\r\ndistance: 0.25\r\n";
    CHECK(parse(v1, &g, det, &d) == 0);
    const faid_detector_preset *e4 = faid_detector_find("eiger_4m");
    CHECK(g.dist == 0.25 && g.poni1 == 0.08 && g.poni2 == 0.07 && g.rot1 == 0 && g.rot3 == 0);
    CHECK(g.rows == e4->rows && g.cols == e4->cols && g.pixel1 == 7.6e-05 &&
          g.pixel2 == e4->pixel2 && g.orientation == 3 && g.wavelength == 0);
    CHECK(strcmp(det, "Eiger4M") == 0);

    /* Unknown detector: the name comes back, the shape stays as the caller had it. */
    memset(&g, 0, sizeof g);
    g.rows = 7;
    g.cols = 9;
    CHECK(parse("Detector: Perkin\nDistance: 1\nPoni1: 0\nPoni2: 0\n", &g, det, &d) == 0);
    CHECK(strcmp(det, "Perkin") == 0 && g.rows == 7 && g.cols == 9 && g.dist == 1);

    /* Version 3 without parallax, nested JSON members ignored, binning [1, 1] accepted. */
    const char *v3 = "poni_version: 3\nDetector: Pilatus1M\nDetector_config: {\"pixel1\": "
                     "0.000172, \"pixel2\": 0.000172, \"orientation\": 3, \"sensor\": "
                     "{\"material\": \"Si\", \"t\": [1, {\"x\": [null, true]}]}, \"binning\": "
                     "[1, 1], \"splinefile\": null}\nDistance: 0.3\nPoni1: 0.1\nPoni2: 0.09\n"
                     "Parallax: False\n";
    CHECK(parse(v3, &g, det, &d) == 0);
    CHECK(g.rows == 1043 && g.cols == 981 && g.dist == 0.3 && strcmp(det, "Pilatus1M") == 0);

    /* Errors name the file and the line. */
    static const struct {
        const char *text;
        const char *where;
        int code;
    } bad[] = {
        {"Distance: 0.1\nPoni1: 0.01\nPoni2: abc\n", "t.poni:3:", FAID_EFORMAT},
        {"Distance: 0.1\nPoni1 0.01\n", "t.poni:2:", FAID_EFORMAT},
        {"Distance: 0.1\nPoni1: 0.01\nPoni2: 0\nFoo: 1\n", "t.poni:4:", FAID_EFORMAT},
        {"Distance: 0.1\nPoni1: 0.01\n", "Poni2", FAID_EFORMAT},
        {"Distance: 0\nPoni1: 0.01\nPoni2: 0\n", "t.poni:1:", FAID_ERANGE},
        {"Distance: inf\nPoni1: 0.01\nPoni2: 0\n", "t.poni:1:", FAID_EFORMAT},
        {"poni_version: 4\nDetector: x\nDistance: 1\nPoni1: 0\nPoni2: 0\n",
         "t.poni:1:", FAID_EUNSUP},
        {"poni_version: 2\nDistance: 1\nPoni1: 0\nPoni2: 0\n", "Detector", FAID_EFORMAT},
        {"Detector: Detector\nDetector_config: {\"pixel1\": 1e-4,}\nDistance: 1\nPoni1: 0\n"
         "Poni2: 0\n",
         "t.poni:2:", FAID_EFORMAT},
        {"Detector: Detector\nDetector_config: {\"max_shape\": [10.5, 3]}\nDistance: 1\n"
         "Poni1: 0\nPoni2: 0\n",
         "t.poni:2:", FAID_EFORMAT},
        {"Detector: Detector\nDetector_config: {\"splinefile\": \"a.spline\"}\nDistance: 1\n"
         "Poni1: 0\nPoni2: 0\n",
         "t.poni:2:", FAID_EUNSUP},
        {"Detector: Detector\nDetector_config: {\"binning\": [2, 2]}\nDistance: 1\n"
         "Poni1: 0\nPoni2: 0\n",
         "t.poni:2:", FAID_EUNSUP},
        {"Distance: 1\nPoni1: 0\nPoni2: 0\nParallax: True\n", "t.poni:4:", FAID_EUNSUP},
        {"Distance: 1\nPoni1: 0\nPoni2: 0\nSplineFile: /x.spline\n", "t.poni:4:", FAID_EUNSUP},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&g, 0, sizeof g);
        int rc = parse(bad[i].text, &g, det, &d);
        CHECK_MSG(rc == bad[i].code && strstr(d.msg, bad[i].where) != NULL,
                  "case %zu: rc %d msg '%s'", i, rc, d.msg);
    }

    /* Deep nesting and NUL bytes are errors, not crashes. */
    char deep[600];
    int k = snprintf(deep, sizeof deep, "Detector: Detector\nDetector_config: {\"a\": ");
    for (int i = 0; i < 100; i++)
        deep[k++] = '[';
    snprintf(deep + k, sizeof deep - (size_t)k, "\nDistance: 1\nPoni1: 0\nPoni2: 0\n");
    CHECK(parse(deep, &g, det, &d) == FAID_EFORMAT && strstr(d.msg, "t.poni:2:"));
    const char nul[] = "Distance: 1\nPoni1: 0\0\nPoni2: 0\n";
    faid_diag_clear(&d);
    CHECK(faid_poni_parse(nul, sizeof nul - 1, "n.poni", &g, det, 64, &d) == FAID_EFORMAT &&
          strstr(d.msg, "n.poni:2:"));

    /* faid_poni_read: round trip through a file, and a missing file. */
    char path[] = "/tmp/faid_test_geometry_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        fputs(v21, f);
        fclose(f);
        memset(&g, 0, sizeof g);
        CHECK(faid_poni_read(path, &g, det, sizeof det, &d) == 0 && g.rows == 20 && g.rot3 == 0.9);
        remove(path);
        CHECK(faid_poni_read(path, &g, det, sizeof det, &d) == FAID_EIO && strstr(d.msg, path));
    }
}

int main(void)
{
    RUN(test_units());
    RUN(test_presets());
    RUN(test_untilted_analytic());
    RUN(test_rotation_invariants());
    RUN(test_orientation());
    RUN(test_corner_layouts());
    RUN(test_polarization());
    RUN(test_check());
    RUN(test_poni());
    return faid_test_finish();
}
