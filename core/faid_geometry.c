/* faid_geometry: PONI geometry, .poni reader, detector presets and per-pixel arrays (see
 * faid_geometry.h for the conventions and for what pyFAI bins on). The arithmetic follows pyFAI's
 * own evaluation order (detector position = pixel * (index + 0.5), then minus the PONI, then the
 * rotation), so that values agree with it to a few ulp rather than merely to the formula. */
#include "faid_geometry.h"

#include "faid_file.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---------------------------------------------------------------------------------------------
 * Detector presets: shapes, pixel sizes, module sizes and gaps as pyFAI.detectors defines them
 * (MAX_SHAPE, PIXEL_SIZE, MODULE_SIZE, MODULE_GAP of the classes Eiger*, Eiger2_*, Pilatus*M,
 * Jungfrau4M). */

const faid_detector_preset faid_detector_presets[] = {
    {"Eiger1M", "eiger_1m", 1065, 1030, 75e-6, 75e-6, 514, 1030, 37, 10, "Eiger 1M"},
    {"Eiger4M", "eiger_4m", 2167, 2070, 75e-6, 75e-6, 514, 1030, 37, 10, "Eiger 4M"},
    {"Eiger9M", "eiger_9m", 3269, 3110, 75e-6, 75e-6, 514, 1030, 37, 10, "Eiger 9M"},
    {"Eiger16M", "eiger_16m", 4371, 4150, 75e-6, 75e-6, 514, 1030, 37, 10, "Eiger 16M"},
    {"Eiger2_1M", "eiger2_1m", 1062, 1028, 75e-6, 75e-6, 512, 1028, 38, 12, "Eiger2 1M"},
    {"Eiger2_4M", "eiger2_4m", 2162, 2068, 75e-6, 75e-6, 512, 1028, 38, 12, "Eiger2 4M"},
    {"Eiger2_9M", "eiger2_9m", 3262, 3108, 75e-6, 75e-6, 512, 1028, 38, 12, "Eiger2 9M"},
    {"Eiger2_16M", "eiger2_16m", 4362, 4148, 75e-6, 75e-6, 512, 1028, 38, 12, "Eiger2 16M"},
    {"Pilatus1M", "pilatus_1m", 1043, 981, 172e-6, 172e-6, 195, 487, 17, 7, "Pilatus 1M"},
    {"Pilatus2M", "pilatus_2m", 1679, 1475, 172e-6, 172e-6, 195, 487, 17, 7, "Pilatus 2M"},
    {"Pilatus6M", "pilatus_6m", 2527, 2463, 172e-6, 172e-6, 195, 487, 17, 7, "Pilatus 6M"},
    {"Jungfrau4M", "jungfrau_4m", 2164, 2068, 75e-6, 75e-6, 514, 1030, 36, 8, "Jungfrau 4M"},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL},
};

/* Lower-cases and drops ' ', '_' and '-' so that pyFAI's class names, its aliases and faid's
 * config spelling compare equal. Returns 0 if the result does not fit. */
static int normalize_name(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (; *in; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == ' ' || c == '_' || c == '-')
            continue;
        if (n + 1 >= cap)
            return 0;
        out[n++] = (char)tolower(c);
    }
    out[n] = '\0';
    return 1;
}

const faid_detector_preset *faid_detector_find(const char *name)
{
    char want[64], have[64];
    if (!name || !normalize_name(name, want, sizeof want) || !want[0])
        return NULL;
    for (const faid_detector_preset *p = faid_detector_presets; p->name; p++) {
        const char *spellings[3] = {p->name, p->alias, p->pyfai_alias};
        for (int k = 0; k < 3; k++)
            if (normalize_name(spellings[k], have, sizeof have) && strcmp(want, have) == 0)
                return p;
    }
    return NULL;
}

/* pyFAI's module mask: gap g starts after every module, i.e. at module, module + (module + gap),
 * ... and is cut at the detector edge. */
void faid_detector_gap_mask(const faid_detector_preset *p, uint8_t *mask)
{
    if (!p || !mask || p->rows <= 0 || p->cols <= 0)
        return;
    size_t cols = (size_t)p->cols;
    if (p->module_rows > 0 && p->gap_rows > 0)
        for (int r0 = p->module_rows; r0 < p->rows; r0 += p->module_rows + p->gap_rows)
            for (int r = r0; r < r0 + p->gap_rows && r < p->rows; r++)
                memset(mask + (size_t)r * cols, 1, cols);
    if (p->module_cols > 0 && p->gap_cols > 0)
        for (int c0 = p->module_cols; c0 < p->cols; c0 += p->module_cols + p->gap_cols)
            for (int r = 0; r < p->rows; r++)
                for (int c = c0; c < c0 + p->gap_cols && c < p->cols; c++)
                    mask[(size_t)r * cols + (size_t)c] = 1;
}

void faid_geometry_apply_preset(faid_geometry *g, const faid_detector_preset *p)
{
    if (!g || !p)
        return;
    g->rows = p->rows;
    g->cols = p->cols;
    g->pixel1 = p->pixel1;
    g->pixel2 = p->pixel2;
}

/* ---------------------------------------------------------------------------------------------
 * Units. */

const char *const faid_unit_names[] = {
    [FAID_UNIT_Q_NM] = "q_nm^-1",    [FAID_UNIT_Q_A] = "q_A^-1", [FAID_UNIT_2TH_DEG] = "2th_deg",
    [FAID_UNIT_2TH_RAD] = "2th_rad", [FAID_UNIT_R_MM] = "r_mm",  [FAID_UNIT_R_M] = "r_m",
    [FAID_UNIT_R_M + 1] = NULL,
};
static const double unit_scales[] = {
    [FAID_UNIT_Q_NM] = 1.0,    [FAID_UNIT_Q_A] = 0.1,     [FAID_UNIT_2TH_DEG] = 180.0 / M_PI,
    [FAID_UNIT_2TH_RAD] = 1.0, [FAID_UNIT_R_MM] = 1000.0, [FAID_UNIT_R_M] = 1.0,
};
#define NUNITS ((int)(sizeof unit_scales / sizeof unit_scales[0]))

static int unit_valid(faid_unit u)
{
    return (int)u >= 0 && (int)u < NUNITS;
}

int faid_unit_parse(const char *name, faid_unit *out)
{
    if (!name)
        return FAID_EINVAL;
    for (int i = 0; i < NUNITS; i++)
        if (strcmp(name, faid_unit_names[i]) == 0) {
            if (out)
                *out = (faid_unit)i;
            return 0;
        }
    return FAID_EINVAL;
}

const char *faid_unit_name(faid_unit u)
{
    return unit_valid(u) ? faid_unit_names[u] : "unknown";
}

double faid_unit_scale(faid_unit u)
{
    return unit_valid(u) ? unit_scales[u] : 1.0;
}

int faid_unit_needs_wavelength(faid_unit u)
{
    return u == FAID_UNIT_Q_NM || u == FAID_UNIT_Q_A;
}

/* ---------------------------------------------------------------------------------------------
 * Geometry. */

int faid_geometry_check(const faid_geometry *g, const char *what, faid_diag *d)
{
    if (!what)
        what = "geometry";
    if (!g)
        return faid_fail(d, FAID_EINVAL, "%s: no geometry", what);
    const struct {
        const char *name;
        double v;
    } vals[] = {{"dist", g->dist},
                {"poni1", g->poni1},
                {"poni2", g->poni2},
                {"rot1", g->rot1},
                {"rot2", g->rot2},
                {"rot3", g->rot3},
                {"wavelength", g->wavelength},
                {"pixel1", g->pixel1},
                {"pixel2", g->pixel2}};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        if (!isfinite(vals[i].v))
            return faid_fail(d, FAID_ERANGE, "%s: %s is not a finite number", what, vals[i].name);
    if (g->dist <= 0)
        return faid_fail(d, FAID_ERANGE, "%s: dist must be > 0 m (got %g)", what, g->dist);
    if (g->pixel1 <= 0 || g->pixel2 <= 0)
        return faid_fail(d, FAID_ERANGE, "%s: pixel sizes must be > 0 m (got %g, %g)", what,
                         g->pixel1, g->pixel2);
    if (g->wavelength < 0)
        return faid_fail(d, FAID_ERANGE, "%s: wavelength must be >= 0 m (got %g)", what,
                         g->wavelength);
    if (g->rows < 1 || g->rows > 65536 || g->cols < 1 || g->cols > 65536)
        return faid_fail(d, FAID_ERANGE, "%s: detector shape %d x %d out of range 1..65536", what,
                         g->rows, g->cols);
    if (g->orientation < 0 || g->orientation > 4)
        return faid_fail(d, FAID_ERANGE, "%s: orientation must be 0..4 (got %d)", what,
                         g->orientation);
    return 0;
}

/* The rotation as pyFAI's _geometry extension evaluates it (same products in the same order). */
typedef struct rot {
    double s1, c1, s2, c2, s3, c3;
} rot;

static rot make_rot(const faid_geometry *g)
{
    rot r = {sin(g->rot1), cos(g->rot1), sin(g->rot2), cos(g->rot2), sin(g->rot3), cos(g->rot3)};
    return r;
}

static inline void t123(const rot *r, double p1, double p2, double L, double *t1, double *t2,
                        double *t3)
{
    *t1 = p1 * r->c2 * r->c3 + p2 * (r->c3 * r->s1 * r->s2 - r->c1 * r->s3) -
          L * (r->c1 * r->c3 * r->s2 + r->s1 * r->s3);
    *t2 = p1 * r->c2 * r->s3 + p2 * (r->c1 * r->c3 + r->s1 * r->s2 * r->s3) -
          L * (-(r->c3 * r->s1) + r->c1 * r->s2 * r->s3);
    *t3 = p1 * r->s2 - p2 * r->c2 * r->s1 + L * r->c1 * r->c2;
}

void faid_geometry_t123(const faid_geometry *g, double p1, double p2, double *t1, double *t2,
                        double *t3)
{
    rot r = make_rot(g);
    t123(&r, p1 - g->poni1, p2 - g->poni2, g->dist, t1, t2, t3);
}

static int flips_rows(const faid_geometry *g)
{
    return g->orientation == 1 || g->orientation == 2;
}

static int flips_cols(const faid_geometry *g)
{
    return g->orientation == 1 || g->orientation == 4;
}

/* Detector coordinate (m, relative to the PONI) of centre (corner = 0) or corner (corner = 1)
 * index k along an axis of n pixels, after the orientation's renumbering. */
static inline double axis_pos(double pixel, double poni, int k, int n, int flip, int corner)
{
    double idx = flip ? (double)(corner ? n - k : n - 1 - k) : (double)k;
    return pixel * (corner ? idx : idx + 0.5) - poni;
}

/* Evaluates the radial value of one point in internal units. */
static inline double radial_of(faid_unit u, double t1, double t2, double t3, double qfac)
{
    double r = sqrt(t1 * t1 + t2 * t2);
    switch (u) {
    case FAID_UNIT_R_MM:
    case FAID_UNIT_R_M:
        return r;
    case FAID_UNIT_2TH_DEG:
    case FAID_UNIT_2TH_RAD:
        return atan2(r, t3);
    case FAID_UNIT_Q_NM:
    case FAID_UNIT_Q_A:
        return qfac * sin(0.5 * atan2(r, t3));
    }
    return 0;
}

enum { WANT_RADIAL = 1, WANT_CHI = 2 };

/* Shared loop over centres (corner = 0, rows x cols) or corners (corner = 1, rows+1 x cols+1):
 * fills rad (internal unit, may be NULL) and chi (may be NULL). */
static int grid_eval(const faid_geometry *g, faid_unit u, int corner, double *rad, double *chi)
{
    if (!g || g->rows <= 0 || g->cols <= 0)
        return FAID_EINVAL;
    if (rad && (!unit_valid(u) || (faid_unit_needs_wavelength(u) && !(g->wavelength > 0))))
        return FAID_EINVAL;
    int nr = g->rows + corner, nc = g->cols + corner;
    rot r = make_rot(g);
    double qfac = rad && faid_unit_needs_wavelength(u) ? 4.0e-9 * M_PI / g->wavelength : 0.0;
    int fr = flips_rows(g), fc = flips_cols(g);
    double *p2s = malloc((size_t)nc * sizeof *p2s);
    if (!p2s)
        return FAID_ENOMEM;
    for (int j = 0; j < nc; j++)
        p2s[j] = axis_pos(g->pixel2, g->poni2, j, g->cols, fc, corner);
    for (int i = 0; i < nr; i++) {
        double p1 = axis_pos(g->pixel1, g->poni1, i, g->rows, fr, corner);
        size_t base = (size_t)i * (size_t)nc;
        for (int j = 0; j < nc; j++) {
            double t1, t2, t3;
            t123(&r, p1, p2s[j], g->dist, &t1, &t2, &t3);
            if (rad)
                rad[base + (size_t)j] = radial_of(u, t1, t2, t3, qfac);
            if (chi)
                chi[base + (size_t)j] = atan2(t1, t2);
        }
    }
    free(p2s);
    return 0;
}

static void scale_inplace(double *v, size_t n, double s)
{
    if (s != 1.0)
        for (size_t k = 0; k < n; k++)
            v[k] *= s;
}

static size_t ncenters(const faid_geometry *g)
{
    return (size_t)g->rows * (size_t)g->cols;
}

static size_t ncorners(const faid_geometry *g)
{
    return (size_t)(g->rows + 1) * (size_t)(g->cols + 1);
}

int faid_geometry_radial_centers_internal(const faid_geometry *g, faid_unit u, double *out)
{
    return grid_eval(g, u, 0, out, NULL);
}

int faid_geometry_radial_corners_internal(const faid_geometry *g, faid_unit u, double *out)
{
    return grid_eval(g, u, 1, out, NULL);
}

int faid_geometry_radial_centers(const faid_geometry *g, faid_unit u, double *out)
{
    int rc = grid_eval(g, u, 0, out, NULL);
    if (rc == 0)
        scale_inplace(out, ncenters(g), faid_unit_scale(u));
    return rc;
}

int faid_geometry_radial_corners(const faid_geometry *g, faid_unit u, double *out)
{
    int rc = grid_eval(g, u, 1, out, NULL);
    if (rc == 0)
        scale_inplace(out, ncorners(g), faid_unit_scale(u));
    return rc;
}

/* The void functions cannot report a failure (only out of memory is possible once the shape is
 * valid): they leave NaN so that nothing downstream mistakes the output for positions. */
static void fill_nan(double *out, size_t n)
{
    for (size_t k = 0; k < n; k++)
        out[k] = NAN;
}

void faid_geometry_chi_centers(const faid_geometry *g, double *out)
{
    if (g && out && g->rows > 0 && g->cols > 0 && grid_eval(g, FAID_UNIT_R_M, 0, NULL, out) != 0)
        fill_nan(out, ncenters(g));
}

void faid_geometry_chi_corners(const faid_geometry *g, double *out)
{
    if (g && out && g->rows > 0 && g->cols > 0 && grid_eval(g, FAID_UNIT_R_M, 1, NULL, out) != 0)
        fill_nan(out, ncorners(g));
}

int faid_geometry_corner_array(const faid_geometry *g, faid_unit u, float *out)
{
    if (!g || g->rows <= 0 || g->cols <= 0 || !out)
        return FAID_EINVAL;
    size_t n = ncorners(g);
    double *rad = malloc(n * sizeof *rad), *chi = malloc(n * sizeof *chi);
    int rc = rad && chi ? grid_eval(g, u, 1, rad, chi) : FAID_ENOMEM;
    if (rc == 0) {
        size_t nc = (size_t)g->cols + 1;
        for (size_t i = 0; i < (size_t)g->rows; i++)
            for (size_t j = 0; j < (size_t)g->cols; j++) {
                const size_t k[4] = {i * nc + j, (i + 1) * nc + j, (i + 1) * nc + j + 1,
                                     i * nc + j + 1};
                float *o = out + (i * (size_t)g->cols + j) * 8;
                for (int c = 0; c < 4; c++) {
                    o[2 * c] = (float)rad[k[c]];
                    o[2 * c + 1] = (float)chi[k[c]];
                }
            }
    }
    free(rad);
    free(chi);
    return rc;
}

/* Max over the 4 corners of |float32(corner) - centre|; wrapped for chi. */
static int delta_common(const faid_geometry *g, faid_unit u, int want_chi, double *out)
{
    if (!g || g->rows <= 0 || g->cols <= 0 || !out)
        return FAID_EINVAL;
    size_t n = ncorners(g);
    double *corner = malloc(n * sizeof *corner);
    if (!corner)
        return FAID_ENOMEM;
    int rc = want_chi ? grid_eval(g, u, 1, NULL, corner) : grid_eval(g, u, 1, corner, NULL);
    if (rc == 0)
        rc = want_chi ? grid_eval(g, u, 0, NULL, out) : grid_eval(g, u, 0, out, NULL);
    if (rc == 0) {
        size_t nc = (size_t)g->cols + 1;
        for (size_t i = 0; i < (size_t)g->rows; i++)
            for (size_t j = 0; j < (size_t)g->cols; j++) {
                const size_t k[4] = {i * nc + j, (i + 1) * nc + j, (i + 1) * nc + j + 1,
                                     i * nc + j + 1};
                double *o = out + i * (size_t)g->cols + j;
                double centre = *o, delta = 0;
                for (int c = 0; c < 4; c++) {
                    double dd = fabs((double)(float)corner[k[c]] - centre);
                    if (want_chi && 2.0 * M_PI - dd < dd)
                        dd = 2.0 * M_PI - dd;
                    if (dd > delta)
                        delta = dd;
                }
                *o = delta;
            }
    }
    free(corner);
    return rc;
}

int faid_geometry_delta(const faid_geometry *g, faid_unit u, double *out)
{
    return delta_common(g, u, 0, out);
}

void faid_geometry_chi_delta(const faid_geometry *g, double *out)
{
    if (g && out && g->rows > 0 && g->cols > 0 && delta_common(g, FAID_UNIT_R_M, 1, out) != 0)
        fill_nan(out, ncenters(g));
}

void faid_geometry_solid_angle(const faid_geometry *g, double *out)
{
    if (!g || g->rows <= 0 || g->cols <= 0 || !out)
        return;
    int fr = flips_rows(g), fc = flips_cols(g);
    double L = g->dist;
    for (int i = 0; i < g->rows; i++) {
        double p1 = axis_pos(g->pixel1, g->poni1, i, g->rows, fr, 0);
        for (int j = 0; j < g->cols; j++) {
            double p2 = axis_pos(g->pixel2, g->poni2, j, g->cols, fc, 0);
            double cosa = L / sqrt(L * L + (p1 * p1 + p2 * p2));
            out[(size_t)i * (size_t)g->cols + (size_t)j] = pow(cosa, 3.0);
        }
    }
}

void faid_geometry_polarization(const faid_geometry *g, double factor, double axis_offset,
                                double *out)
{
    if (!g || g->rows <= 0 || g->cols <= 0 || !out)
        return;
    size_t n = ncenters(g);
    double *chi = malloc(n * sizeof *chi);
    if (!chi || grid_eval(g, FAID_UNIT_2TH_RAD, 0, out, chi) != 0) {
        fill_nan(out, n);
        free(chi);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        double c = cos(out[k]);
        double c2 = c * c;
        out[k] = 0.5 * (1.0 + c2 - factor * cos(2.0 * (chi[k] + axis_offset)) * (1.0 - c2));
    }
    free(chi);
}

/* ---------------------------------------------------------------------------------------------
 * .poni reader. A line is "key: value" (the first ':' splits; keys are case-insensitive, later
 * lines override earlier ones as in pyFAI), '#' starts a comment line, blank lines are skipped.
 * The Detector_config value is a JSON object, parsed with jansson. */

typedef struct span {
    const char *p;
    size_t n;
} span;

typedef struct poni_ctx {
    const char *name;
    faid_diag *d;
} poni_ctx;

static int span_ieq(span s, const char *lit)
{
    size_t n = strlen(lit);
    if (s.n != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s.p[i]) != tolower((unsigned char)lit[i]))
            return 0;
    return 1;
}

static span span_trim(span s)
{
    while (s.n && isspace((unsigned char)s.p[0])) {
        s.p++;
        s.n--;
    }
    while (s.n && isspace((unsigned char)s.p[s.n - 1]))
        s.n--;
    return s;
}

/* Parses a whole span as a finite float (what Python's float() takes, minus nan/inf/underscores).
 */
static int span_double(span s, double *out)
{
    char buf[128];
    s = span_trim(s);
    if (s.n == 0 || s.n >= sizeof buf)
        return 0;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (!(isdigit((unsigned char)c) || c == '+' || c == '-' || c == '.' || c == 'e' ||
              c == 'E'))
            return 0;
    }
    memcpy(buf, s.p, s.n);
    buf[s.n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end != buf + s.n || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

/* Shows at most 40 printable characters of a span in a message. */
static const char *span_show(span s, char *buf, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < s.n && n + 4 < cap && i < 40; i++)
        buf[n++] = isprint((unsigned char)s.p[i]) ? s.p[i] : '?';
    if (s.n > 40 && n + 4 < cap) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* --- Detector_config JSON (jansson) ----------------------------------------------------- */

/* Kinds of value that the interesting keys take. */
typedef enum { JV_OTHER = 0, JV_NULL, JV_NUMBER, JV_STRING, JV_BOOL, JV_ARRAY2 } jv_kind;

typedef struct jvalue {
    jv_kind kind;
    double num;
    double arr[2]; /* a 2-element array of numbers */
    span str;
} jvalue;

static jvalue jv_of(json_t *x)
{
    jvalue v = {0};
    if (json_is_null(x)) {
        v.kind = JV_NULL;
    } else if (json_is_number(x)) {
        v.kind = JV_NUMBER;
        v.num = json_number_value(x);
    } else if (json_is_string(x)) {
        v.kind = JV_STRING;
        v.str.p = json_string_value(x);
        v.str.n = json_string_length(x);
    } else if (json_is_boolean(x)) {
        v.kind = JV_BOOL;
        v.num = json_is_true(x);
    } else if (json_is_array(x) && json_array_size(x) == 2 &&
               json_is_number(json_array_get(x, 0)) && json_is_number(json_array_get(x, 1))) {
        v.kind = JV_ARRAY2;
        v.arr[0] = json_number_value(json_array_get(x, 0));
        v.arr[1] = json_number_value(json_array_get(x, 1));
    }
    return v;
}

/* What Detector_config sets. */
typedef struct detcfg {
    int has_pixel1, has_pixel2, has_shape, has_orientation;
    double pixel1, pixel2;
    int rows, cols, orientation;
    poni_ctx *pc;
    int line;
} detcfg;

static int is_int_in(double v, double lo, double hi)
{
    return v == floor(v) && v >= lo && v <= hi;
}

static int detcfg_member(void *ctx, span key, const jvalue *v)
{
    detcfg *c = ctx;
    poni_ctx *pc = c->pc;
    char show[64];
    if (span_ieq(key, "pixel1") || span_ieq(key, "pixel2")) {
        int first = span_ieq(key, "pixel1");
        if (v->kind == JV_NULL)
            return 0;
        if (v->kind != JV_NUMBER || !(v->num > 0))
            return faid_fail(pc->d, FAID_EFORMAT,
                             "%s:%d: Detector_config: %s must be a positive number (m)", pc->name,
                             c->line, first ? "pixel1" : "pixel2");
        if (first) {
            c->pixel1 = v->num;
            c->has_pixel1 = 1;
        } else {
            c->pixel2 = v->num;
            c->has_pixel2 = 1;
        }
    } else if (span_ieq(key, "max_shape")) {
        if (v->kind == JV_NULL)
            return 0;
        if (v->kind != JV_ARRAY2 || !is_int_in(v->arr[0], 1, 65536) ||
            !is_int_in(v->arr[1], 1, 65536))
            return faid_fail(pc->d, FAID_EFORMAT,
                             "%s:%d: Detector_config: max_shape must be [rows, cols] with "
                             "integers in 1..65536",
                             pc->name, c->line);
        c->rows = (int)v->arr[0];
        c->cols = (int)v->arr[1];
        c->has_shape = 1;
    } else if (span_ieq(key, "orientation")) {
        if (v->kind == JV_NULL)
            return 0;
        if (v->kind != JV_NUMBER || !is_int_in(v->num, 0, 4))
            return faid_fail(pc->d, FAID_EFORMAT,
                             "%s:%d: Detector_config: orientation must be an integer 0..4",
                             pc->name, c->line);
        c->orientation = (int)v->num;
        c->has_orientation = 1;
    } else if (span_ieq(key, "splinefile") || span_ieq(key, "x_offset_file") ||
               span_ieq(key, "y_offset_file")) {
        if (v->kind == JV_NULL || (v->kind == JV_STRING && v->str.n == 0))
            return 0;
        return faid_fail(pc->d, FAID_EUNSUP,
                         "%s:%d: Detector_config: %s (distortion correction) is not supported: "
                         "faid handles flat regular detectors only",
                         pc->name, c->line, span_show(key, show, sizeof show));
    } else if (span_ieq(key, "binning")) {
        /* pyFAI writes no binning for unbinned detectors; [1, 1] or 1 mean the same. */
        if (v->kind == JV_NULL || (v->kind == JV_NUMBER && v->num == 1) ||
            (v->kind == JV_ARRAY2 && v->arr[0] == 1 && v->arr[1] == 1))
            return 0;
        return faid_fail(pc->d, FAID_EUNSUP,
                         "%s:%d: Detector_config: binning other than [1, 1] is not supported; "
                         "give pixel1, pixel2 and max_shape of the binned image instead",
                         pc->name, c->line);
    }
    /* Other members (module_size, sensor, ...) do not change a flat detector's geometry; pyFAI
     * too ignores members it does not know. */
    return 0;
}

static int parse_detector_config(poni_ctx *pc, int line, span value, detcfg *c)
{
    c->pc = pc;
    c->line = line;
    json_error_t err;
    json_t *obj = json_loadb(value.p, value.n, 0, &err);
    if (!obj)
        return faid_fail(pc->d, FAID_EFORMAT,
                         "%s:%d: Detector_config: malformed JSON near byte %d (%s)", pc->name, line,
                         err.position, err.text);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return faid_fail(pc->d, FAID_EFORMAT, "%s:%d: Detector_config is not a JSON object",
                         pc->name, line);
    }
    const char *key;
    json_t *x;
    int rc = 0;
    /* Members in file order (jansson keeps insertion order), so the first fault is named. */
    json_object_foreach(obj, key, x)
    {
        jvalue v = jv_of(x);
        span k = {key, strlen(key)};
        if ((rc = detcfg_member(c, k, &v)) < 0)
            break;
    }
    json_decref(obj);
    return rc < 0 ? rc : 0;
}

/* --- lines ------------------------------------------------------------------------------------ */

enum {
    K_VERSION,
    K_DETECTOR,
    K_DETCONFIG,
    K_DIST,
    K_PONI1,
    K_PONI2,
    K_ROT1,
    K_ROT2,
    K_ROT3,
    K_WAVELENGTH,
    K_PIXEL1,
    K_PIXEL2,
    K_SPLINE,
    K_PARALLAX,
    K_COUNT
};

static const struct {
    const char *key;
    int id;
} poni_keys[] = {
    {"poni_version", K_VERSION},
    {"detector", K_DETECTOR},
    {"detector_config", K_DETCONFIG},
    {"distance", K_DIST},
    {"dist", K_DIST},
    {"poni1", K_PONI1},
    {"poni2", K_PONI2},
    {"rot1", K_ROT1},
    {"rot2", K_ROT2},
    {"rot3", K_ROT3},
    {"wavelength", K_WAVELENGTH},
    {"pixelsize1", K_PIXEL1},
    {"pixelsize2", K_PIXEL2},
    {"splinefile", K_SPLINE},
    {"parallax", K_PARALLAX},
};

static int is_none(span v)
{
    return span_ieq(v, "none") || span_ieq(v, "null");
}

/* Parses the numeric value of key id found on line `line`. */
static int poni_number(poni_ctx *pc, const span *vals, const int *lines, int id, const char *label,
                       double *out)
{
    char show[64];
    if (!span_double(vals[id], out))
        return faid_fail(pc->d, FAID_EFORMAT, "%s:%d: %s: '%s' is not a finite number", pc->name,
                         lines[id], label, span_show(vals[id], show, sizeof show));
    return 0;
}

int faid_poni_parse(const char *text, size_t len, const char *name, faid_geometry *g,
                    char *detector, size_t detector_cap, faid_diag *d)
{
    poni_ctx pc = {name ? name : "poni", d};
    span vals[K_COUNT];
    int lines[K_COUNT] = {0};
    char show[64];
    if (!g || (!text && len))
        return faid_fail(d, FAID_EINVAL, "%s: no text or no geometry to fill", pc.name);
    if (detector && detector_cap)
        detector[0] = '\0';
    memset(vals, 0, sizeof vals);

    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) /* UTF-8 byte-order mark */
        p += 3;
    for (int line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        span ln = {p, (size_t)((nl ? nl : end) - p)};
        p = nl ? nl + 1 : end;
        if (memchr(ln.p, '\0', ln.n))
            return faid_fail(d, FAID_EFORMAT, "%s:%d: NUL byte in a text file", pc.name, line);
        span t = span_trim(ln);
        if (t.n == 0 || t.p[0] == '#')
            continue;
        const char *colon = memchr(t.p, ':', t.n);
        if (!colon)
            return faid_fail(d, FAID_EFORMAT, "%s:%d: expected 'key: value', got '%s'", pc.name,
                             line, span_show(t, show, sizeof show));
        span key = span_trim((span){t.p, (size_t)(colon - t.p)});
        span value = span_trim((span){colon + 1, (size_t)(t.p + t.n - colon - 1)});
        int id = -1;
        for (size_t k = 0; k < sizeof poni_keys / sizeof poni_keys[0]; k++)
            if (span_ieq(key, poni_keys[k].key))
                id = poni_keys[k].id;
        if (id < 0)
            return faid_fail(d, FAID_EFORMAT,
                             "%s:%d: unknown key '%s' (expected poni_version, Detector, "
                             "Detector_config, Distance, Poni1, Poni2, Rot1, Rot2, Rot3, "
                             "Wavelength, PixelSize1, PixelSize2, SplineFile or Parallax)",
                             pc.name, line, span_show(key, show, sizeof show));
        vals[id] = value;
        lines[id] = line;
    }

    /* Version: as pyFAI, a Detector_config line makes a file at least version 2. */
    double version = 1;
    if (lines[K_VERSION]) {
        int rc = poni_number(&pc, vals, lines, K_VERSION, "poni_version", &version);
        if (rc)
            return rc;
    }
    if (!(version == 1 || version == 2 || version == 2.1 || version == 3))
        return faid_fail(d, version > 3 ? FAID_EUNSUP : FAID_EFORMAT,
                         "%s:%d: poni_version %g is not one of 1, 2, 2.1, 3", pc.name,
                         lines[K_VERSION], version);
    if (lines[K_DETCONFIG] && version < 2)
        version = 2;
    if (version >= 2 && !lines[K_DETECTOR])
        return faid_fail(d, FAID_EFORMAT, "%s: poni_version %g needs a 'Detector:' line", pc.name,
                         version);
    if (lines[K_PARALLAX]) {
        span v = vals[K_PARALLAX];
        if (span_ieq(v, "true"))
            return faid_fail(d, FAID_EUNSUP, "%s:%d: parallax correction is not supported", pc.name,
                             lines[K_PARALLAX]);
        if (!span_ieq(v, "false") && !is_none(v))
            return faid_fail(d, FAID_EFORMAT, "%s:%d: Parallax must be True or False", pc.name,
                             lines[K_PARALLAX]);
    }
    if (lines[K_SPLINE] && vals[K_SPLINE].n && !is_none(vals[K_SPLINE]))
        return faid_fail(d, FAID_EUNSUP,
                         "%s:%d: SplineFile (distortion correction) is not supported: faid "
                         "handles flat regular detectors only",
                         pc.name, lines[K_SPLINE]);

    /* Geometry parameters. */
    static const struct {
        int id;
        const char *label;
        int required;
    } params[] = {{K_DIST, "Distance", 1},
                  {K_PONI1, "Poni1", 1},
                  {K_PONI2, "Poni2", 1},
                  {K_ROT1, "Rot1", 0},
                  {K_ROT2, "Rot2", 0},
                  {K_ROT3, "Rot3", 0},
                  {K_WAVELENGTH, "Wavelength", 0}};
    double pv[7];
    for (int k = 0; k < 7; k++) {
        int id = params[k].id;
        pv[k] = 0;
        if (!lines[id]) {
            if (params[k].required)
                return faid_fail(d, FAID_EFORMAT, "%s: no '%s:' line", pc.name, params[k].label);
            continue;
        }
        if (id == K_WAVELENGTH && is_none(vals[id]))
            continue;
        int rc = poni_number(&pc, vals, lines, id, params[k].label, &pv[k]);
        if (rc)
            return rc;
    }
    if (!(pv[0] > 0))
        return faid_fail(d, FAID_ERANGE, "%s:%d: Distance must be > 0 m (got %g)", pc.name,
                         lines[K_DIST], pv[0]);
    if (pv[6] < 0)
        return faid_fail(d, FAID_ERANGE, "%s:%d: Wavelength must be >= 0 m (got %g)", pc.name,
                         lines[K_WAVELENGTH], pv[6]);

    /* Detector: preset first, then what the file says explicitly. */
    faid_geometry out = *g;
    out.dist = pv[0];
    out.poni1 = pv[1];
    out.poni2 = pv[2];
    out.rot1 = pv[3];
    out.rot2 = pv[4];
    out.rot3 = pv[5];
    out.wavelength = pv[6];
    out.orientation = 3;
    if (lines[K_DETECTOR]) {
        span dn = vals[K_DETECTOR];
        char dname[128];
        if (dn.n >= sizeof dname)
            return faid_fail(d, FAID_EFORMAT, "%s:%d: detector name too long", pc.name,
                             lines[K_DETECTOR]);
        memcpy(dname, dn.p, dn.n);
        dname[dn.n] = '\0';
        if (!is_none(dn)) {
            const faid_detector_preset *pre = faid_detector_find(dname);
            if (pre)
                faid_geometry_apply_preset(&out, pre);
            if (detector && detector_cap) {
                snprintf(detector, detector_cap, "%s", pre ? pre->name : dname);
            }
        }
    }
    if (version == 1) {
        static const int ids[2] = {K_PIXEL1, K_PIXEL2};
        for (int k = 0; k < 2; k++) {
            if (!lines[ids[k]])
                continue;
            double v;
            int rc = poni_number(&pc, vals, lines, ids[k], k ? "PixelSize2" : "PixelSize1", &v);
            if (rc)
                return rc;
            if (!(v > 0))
                return faid_fail(d, FAID_ERANGE, "%s:%d: PixelSize%d must be > 0 m", pc.name,
                                 lines[ids[k]], k + 1);
            if (k)
                out.pixel2 = v;
            else
                out.pixel1 = v;
        }
    }
    if (lines[K_DETCONFIG]) {
        detcfg c;
        memset(&c, 0, sizeof c);
        int rc = parse_detector_config(&pc, lines[K_DETCONFIG], vals[K_DETCONFIG], &c);
        if (rc)
            return rc;
        if (c.has_pixel1)
            out.pixel1 = c.pixel1;
        if (c.has_pixel2)
            out.pixel2 = c.pixel2;
        if (c.has_shape) {
            out.rows = c.rows;
            out.cols = c.cols;
        }
        if (c.has_orientation)
            out.orientation = c.orientation ? c.orientation : 3;
    }
    *g = out;
    return 0;
}

#define PONI_MAX_BYTES (1u << 20)

int faid_poni_read(const char *path, faid_geometry *g, char *detector, size_t detector_cap,
                   faid_diag *d)
{
    if (!path)
        return faid_fail(d, FAID_EINVAL, "poni: no file name");
    /* Regular files only, opened without blocking (faid_file.h). */
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc = faid_file_read_max(path, PONI_MAX_BYTES, &buf, &n, d);
    if (rc == FAID_ESIZE)
        return faid_fail(d, FAID_ESIZE, "%s: larger than %u bytes: not a .poni file", path,
                         PONI_MAX_BYTES);
    if (rc)
        return rc;
    rc = faid_poni_parse((const char *)buf, n, path, g, detector, detector_cap, d);
    free(buf);
    return rc;
}
