/* faid_csr: builds the sparse integration matrix on the CPU with pyFAI's semantics for pixel
 * splitting "no", "bbox" and "full", in 1D (radial) and 2D (radial x azimuthal cake).
 *
 * Everything runs in float64 on positions expressed in the unit's internal form (q in nm^-1,
 * 2theta in rad, r in m, chi in rad) exactly as pyFAI does, so that bin edges, range limits and
 * truncations land on the same side of every comparison. Coefficients are stored as float32,
 * indices as int32. Entries are produced pixel by pixel into a triplet list, then scattered into
 * CSR order with a counting sort that is stable in pixel order: indices are sorted within a bin.
 * Exact-zero coefficients (pyFAI keeps them) are dropped: they contribute nothing.
 *
 * pyFAI quirks reproduced on purpose (docs/integration.md, "Compatibility quirks"):
 *  - corner positions are rounded to float32 (pyFAI caches its corner arrays in float32), centres
 *    stay float64; bbox half-widths are |float32 corner - float64 centre|;
 *  - a fractional bin -1 < f < 0 truncates to bin 0 (no/bbox);
 *  - bbox: after clamping to [0, nbins-1] the edge fractions still use the unclamped position, so
 *    the part of a pixel outside the range is folded into the first/last bin;
 *  - full split: a pixel partly outside the radial range is renormalised to 1 over its in-range
 *    part; 1D areas are accumulated in float32, 2D areas with pyFAI's column-stacking scheme in
 *    float32 (slope, intercept and the partial-bin bounds rounded to float32 where pyFAI's are);
 *  - chi discontinuity at pi: a pixel whose corners straddle it is detected by the sign of an
 *    approximate algebraic area and its corners are moved by one period.
 * Written with pyFAI's splitBBox_common / splitpixel_common / regrid_common as the semantic
 * reference (read for behaviour, not copied). */
#include "faid_csr.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TWO_PI (2.0 * M_PI)
/* pyFAI's EPS32: 1 + float32 epsilon, used to make the upper range bound exclusive. */
#define EPS32 (1.0 + (double)FLT_EPSILON)

int faid_split_parse(const char *name, faid_split *out)
{
    if (!name || !out)
        return FAID_EINVAL;
    for (int i = 0; faid_split_names[i]; i++)
        if (!strcmp(name, faid_split_names[i])) {
            *out = (faid_split)i;
            return 0;
        }
    /* pyFAI's other spellings */
    if (!strcmp(name, "none"))
        *out = FAID_SPLIT_NO;
    else if (!strcmp(name, "pseudo"))
        *out = FAID_SPLIT_FULL;
    else
        return FAID_EINVAL;
    return 0;
}

const char *const faid_split_names[] = {"no", "bbox", "full", NULL};

const char *faid_split_name(faid_split s)
{
    return (int)s >= 0 && s <= FAID_SPLIT_FULL ? faid_split_names[s] : "?";
}

faid_unit faid_unit_internal(faid_unit u, double *scale)
{
    double s = 1.0;
    faid_unit in = u;
    switch (u) {
    case FAID_UNIT_Q_NM:
        break;
    case FAID_UNIT_Q_A:
        in = FAID_UNIT_Q_NM;
        s = 0.1;
        break;
    case FAID_UNIT_2TH_DEG:
        in = FAID_UNIT_2TH_RAD;
        s = 180.0 / M_PI;
        break;
    case FAID_UNIT_2TH_RAD:
        break;
    case FAID_UNIT_R_MM:
        in = FAID_UNIT_R_M;
        s = 1000.0;
        break;
    case FAID_UNIT_R_M:
        break;
    }
    if (scale)
        *scale = s;
    return in;
}

/* ---- triplet builder ------------------------------------------------------------------------ */

typedef struct {
    int32_t *bin, *pix;
    float *coef;
    int64_t n, cap;
    int32_t *count; /* per bin */
    int32_t nbins;
    int oom;
} builder;

static int builder_init(builder *b, int32_t nbins, int64_t cap)
{
    memset(b, 0, sizeof(*b));
    b->nbins = nbins;
    b->cap = cap < 1024 ? 1024 : cap;
    b->bin = malloc((size_t)b->cap * sizeof(int32_t));
    b->pix = malloc((size_t)b->cap * sizeof(int32_t));
    b->coef = malloc((size_t)b->cap * sizeof(float));
    b->count = calloc((size_t)nbins + 1, sizeof(int32_t));
    if (!b->bin || !b->pix || !b->coef || !b->count)
        return FAID_ENOMEM;
    return 0;
}

static void builder_free(builder *b)
{
    free(b->bin);
    free(b->pix);
    free(b->coef);
    free(b->count);
    memset(b, 0, sizeof(*b));
}

static void builder_add(builder *b, int64_t bin, int32_t pix, double coef)
{
    float c = (float)coef;
    if (c == 0.0f || bin < 0 || bin >= b->nbins || b->oom)
        return;
    if (b->n == b->cap) {
        int64_t ncap = b->cap * 2;
        int32_t *nb = realloc(b->bin, (size_t)ncap * sizeof(int32_t));
        if (nb)
            b->bin = nb;
        int32_t *np = realloc(b->pix, (size_t)ncap * sizeof(int32_t));
        if (np)
            b->pix = np;
        float *nc = realloc(b->coef, (size_t)ncap * sizeof(float));
        if (nc)
            b->coef = nc;
        if (!nb || !np || !nc || ncap > INT32_MAX) {
            b->oom = 1;
            return;
        }
        b->cap = ncap;
    }
    b->bin[b->n] = (int32_t)bin;
    b->pix[b->n] = pix;
    b->coef[b->n] = c;
    b->count[bin]++;
    b->n++;
}

static int builder_finish(builder *b, faid_csr *csr, int all_ones, faid_diag *d)
{
    if (b->oom)
        return faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory after %lld entries",
                         (long long)b->n);
    csr->nnz = b->n;
    csr->indptr = malloc(((size_t)b->nbins + 1) * sizeof(int32_t));
    csr->indices = malloc((size_t)(b->n ? b->n : 1) * sizeof(int32_t));
    if (!all_ones)
        csr->data = malloc((size_t)(b->n ? b->n : 1) * sizeof(float));
    if (!csr->indptr || !csr->indices || (!all_ones && !csr->data))
        return faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory for %lld entries",
                         (long long)b->n);
    int32_t acc = 0;
    for (int32_t i = 0; i < b->nbins; i++) {
        csr->indptr[i] = acc;
        acc += b->count[i];
    }
    csr->indptr[b->nbins] = acc;
    /* Reuse count[] as the write cursor of each bin: a stable scatter keeps pixel order. */
    for (int32_t i = 0; i < b->nbins; i++)
        b->count[i] = csr->indptr[i];
    for (int64_t k = 0; k < b->n; k++) {
        int32_t pos = b->count[b->bin[k]]++;
        csr->indices[pos] = b->pix[k];
        if (csr->data)
            csr->data[pos] = b->coef[k];
    }
    return 0;
}

/* ---- shared bin geometry -------------------------------------------------------------------- */

/* pyFAI's calc_upper_bound: the smallest "float32-epsilon larger" value, so that the maximum
 * itself falls inside the last bin. */
static double upper_bound(double maxin)
{
    return maxin > 0 ? maxin * EPS32 : maxin / EPS32;
}

/* Bin centres as numpy.linspace(min + d/2, max - d/2, n) computes them (last one set exactly). */
static void linspace_centers(double min, double max, int n, double *out)
{
    double delta = (max - min) / (double)n;
    double start = min + 0.5 * delta, stop = max - 0.5 * delta;
    if (n == 1) {
        out[0] = start;
        return;
    }
    double step = (stop - start) / (double)(n - 1);
    for (int i = 0; i < n; i++)
        out[i] = (double)i * step + start;
    out[n - 1] = stop;
}

/* Python's float modulo (result has the sign of the divisor). */
static double py_mod(double x, double m)
{
    double r = fmod(x, m);
    if (r != 0.0) {
        if ((m < 0) != (r < 0))
            r += m;
    } else {
        r = copysign(0.0, m);
    }
    return r;
}

/* Degrees to radians in [-pi, pi) as pyFAI's deg2rad with the discontinuity at pi. */
static double deg2rad_disc(double deg)
{
    double rp = py_mod(deg / 180.0, 2.0);
    if (rp >= 1.0)
        rp -= 2.0;
    return rp * M_PI;
}

/* Truncation toward zero of a fractional bin, as a C cast of a double to an integer; values are
 * range-checked by the callers before this is reached. */
static int64_t trunc_bin(double f)
{
    return (int64_t)f;
}

/* ---- full-split helpers --------------------------------------------------------------------- */

/* Approximate signed area of the quadrilateral ABCD, with pyFAI's operator precedence: only its
 * sign is used (to detect pixels crossing the chi discontinuity). */
static double area4p(const double v[8])
{
    double a0 = v[0], a1 = v[1], b0 = v[2], b1 = v[3], c0 = v[4], c1 = v[5], d0 = v[6], d1 = v[7];
    return 0.5 * ((c0 - a0) * (d1 - b1)) - ((c1 - a1) * (d0 - b0));
}

/* Moves the chi of the corners of a pixel that straddles the discontinuity at pi into one
 * continuous interval (v = 4 x (radial, chi)). A pixel's area in (radial, chi) is negative for
 * an ordinary pixel; orientations 2 and 4 mirror one axis and flip that sign. */
static void recenter(double v[8], int orientation)
{
    double sign = (orientation == 2 || orientation == 4) ? -1.0 : 1.0;
    double area = sign * area4p(v);
    if (area > 0) {
        for (int k = 0; k < 4; k++)
            if (v[2 * k + 1] < 0)
                v[2 * k + 1] += TWO_PI;
        double center1 = 0.25 * (v[1] + v[3] + v[5] + v[7]);
        if (center1 > M_PI)
            for (int k = 0; k < 4; k++)
                v[2 * k + 1] -= TWO_PI;
    }
}

static double calc_area(double i1, double i2, double slope, double intercept)
{
    return (i2 - i1) * (0.5 * slope * (i2 + i1) + intercept);
}

/* Adds to buffer (float32, nb bins in fractional-bin space) the signed area under the segment
 * start -> stop, slab by slab; the closed contour of a pixel sums to its area per slab. */
static void integrate1d(float *buffer, int64_t nb, double start0, double start1, double stop0,
                        double stop1)
{
    if (stop0 == start0)
        return;
    int64_t istart0 = (int64_t)floor(start0);
    int64_t istop0 = (int64_t)floor(stop0);
    double slope = (stop1 - start1) / (stop0 - start0);
    double intercept = start1 - slope * start0;
    if (nb > istop0 && istop0 == istart0 && istart0 >= 0) {
        buffer[istart0] = (float)(buffer[istart0] + calc_area(start0, stop0, slope, intercept));
        return;
    }
    if (stop0 > start0) {
        if (0 <= start0 && start0 < (double)nb)
            buffer[istart0] =
                (float)(buffer[istart0] + calc_area(start0, floor(start0 + 1), slope, intercept));
        int64_t lo = istart0 + 1 > 0 ? istart0 + 1 : 0;
        int64_t hi = istop0 < nb ? istop0 : nb;
        for (int64_t i = lo; i < hi; i++)
            buffer[i] =
                (float)(buffer[i] + calc_area((double)i, (double)(i + 1), slope, intercept));
        if ((double)nb > stop0 && stop0 >= 0)
            buffer[istop0] =
                (float)(buffer[istop0] + calc_area((double)istop0, stop0, slope, intercept));
    } else {
        if (0 <= start0 && start0 < (double)nb)
            buffer[istart0] =
                (float)(buffer[istart0] + calc_area(start0, (double)istart0, slope, intercept));
        int64_t from = (istart0 < nb ? istart0 : nb) - 1;
        int64_t to = istop0 > -1 ? istop0 : -1;
        for (int64_t i = from; i > to; i--)
            buffer[i] =
                (float)(buffer[i] + calc_area((double)(i + 1), (double)i, slope, intercept));
        if ((double)nb > stop0 && stop0 >= 0)
            buffer[istop0] =
                (float)(buffer[istop0] + calc_area(floor(stop0 + 1), stop0, slope, intercept));
    }
}

/* Stacks the signed area |a| of one column piece into the rows of column col of box (w1 rows
 * wide), one row of height <= width at a time from row 0 up: pyFAI's 2D full-split scheme. */
static void stack_area(float *box, int64_t nrow, int64_t col, float segment_area, float width)
{
    if (segment_area == 0.0f)
        return;
    float abs_area = fabsf(segment_area);
    float dA = width;
    for (int64_t h = 0; abs_area > 0 && h < nrow; h++) {
        if (dA > abs_area) {
            dA = abs_area;
            abs_area = -1;
        }
        box[col * nrow + h] =
            (float)((double)box[col * nrow + h] + copysign((double)dA, (double)segment_area));
        abs_area -= dA;
    }
}

/* calc_area with every operand rounded to float32 first (the sums and differences of the bounds
 * in float32, the rest in float64). pyFAI's area function is generic over the float type and its
 * 2D edge integration calls it with one bound held in a float32 variable (a bin edge P); that
 * call resolves to the float32 variant, which also rounds the other, float64 bound. */
static float calc_area_f(float i1, float i2, float slope, float intercept)
{
    double mean_height = 0.5 * (double)slope * (double)(i2 + i1) + (double)intercept;
    return (float)((double)(i2 - i1) * mean_height);
}

static void integrate2d(float *box, int64_t nrow, double start0, double start1, double stop0,
                        double stop1)
{
    if (start0 == stop0)
        return;
    float slope = (float)((stop1 - start1) / (stop0 - start0));
    float intercept = (float)(stop1 - (double)slope * stop0);
    float P, dP;
    if (start0 < stop0) {
        P = (float)ceil(start0);
        dP = (float)((double)P - start0);
        if ((double)P > stop0) {
            float sa = (float)calc_area(start0, stop0, slope, intercept);
            stack_area(box, nrow, (int64_t)start0, sa, (float)(stop0 - start0));
        } else {
            if (dP > 0) {
                float sa = calc_area_f((float)start0, P, slope, intercept);
                stack_area(box, nrow, (int64_t)P - 1, sa, dP);
            }
            for (int64_t i = (int64_t)floor((double)P); i < (int64_t)floor(stop0); i++) {
                float sa = (float)calc_area((double)i, (double)(i + 1), slope, intercept);
                stack_area(box, nrow, i, sa, 1.0f);
            }
            P = (float)floor(stop0);
            dP = (float)(stop0 - (double)P);
            if (dP > 0) {
                float sa = calc_area_f(P, (float)stop0, slope, intercept);
                stack_area(box, nrow, (int64_t)P, sa, fabsf(dP));
            }
        }
    } else {
        P = (float)floor(start0);
        if (stop0 > (double)P) {
            float sa = (float)calc_area(start0, stop0, slope, intercept);
            stack_area(box, nrow, (int64_t)start0, sa, (float)(start0 - stop0));
        } else {
            dP = (float)((double)P - start0);
            if (dP < 0) {
                float sa = calc_area_f((float)start0, P, slope, intercept);
                stack_area(box, nrow, (int64_t)P, sa, fabsf(dP));
            }
            for (int64_t i = (int64_t)start0; i > (int64_t)ceil(stop0); i--) {
                float sa = (float)calc_area((double)i, (double)(i - 1), slope, intercept);
                stack_area(box, nrow, i - 1, sa, 1.0f);
            }
            P = (float)ceil(stop0);
            dP = (float)(stop0 - (double)P);
            if (dP < 0) {
                float sa = calc_area_f(P, (float)stop0, slope, intercept);
                stack_area(box, nrow, (int64_t)stop0, sa, fabsf(dP));
            }
        }
    }
}

static double clipd(double v, double lo, double hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* ---- the builder ---------------------------------------------------------------------------- */

typedef struct {
    const faid_csr_positions *pos;
    const uint8_t *mask;
    int f64_corners;
    int rows, cols;
} pixsrc;

static double corner_val(const pixsrc *s, const double *grid, int i, int j)
{
    double v = grid[(size_t)i * (size_t)(s->cols + 1) + (size_t)j];
    return s->f64_corners ? v : (double)(float)v;
}

/* The four corners A=(i,j) B=(i+1,j) C=(i+1,j+1) D=(i,j+1) of pixel (i, j) of a grid. */
static void pixel_corners(const pixsrc *s, const double *grid, int i, int j, double out[4])
{
    out[0] = corner_val(s, grid, i, j);
    out[1] = corner_val(s, grid, i + 1, j);
    out[2] = corner_val(s, grid, i + 1, j + 1);
    out[3] = corner_val(s, grid, i, j + 1);
}

static int masked(const pixsrc *s, size_t idx)
{
    return s->mask && s->mask[idx];
}

/* Half-widths of the bounding boxes (pyFAI's "delta" arrays): max |corner - centre|, the chi one
 * with wrapped distances. */
static void bbox_deltas(const pixsrc *s, int need_chi, double *d0, double *d1)
{
    const faid_csr_positions *p = s->pos;
    for (int i = 0; i < s->rows; i++) {
        for (int j = 0; j < s->cols; j++) {
            size_t idx = (size_t)i * (size_t)s->cols + (size_t)j;
            double c[4], m = 0;
            pixel_corners(s, p->rad_corner, i, j, c);
            for (int k = 0; k < 4; k++) {
                double v = fabs(c[k] - p->rad_center[idx]);
                m = (k == 0 || v > m) ? v : m;
            }
            d0[idx] = m;
            if (need_chi) {
                pixel_corners(s, p->chi_corner, i, j, c);
                m = 0;
                for (int k = 0; k < 4; k++) {
                    double v = fabs(c[k] - p->chi_center[idx]);
                    if (!(v < TWO_PI - v))
                        v = TWO_PI - v;
                    m = (k == 0 || v > m) ? v : m;
                }
                d1[idx] = m;
            }
        }
    }
}

typedef struct {
    double min0, maxin0, max0, min1, maxin1, max1;
    int bins0, bins1;      /* radial bins; azimuthal bins (1 without a cake) */
    double delta0, delta1; /* their widths */
} bounds;

/* Ranges as pyFAI's calc_boundaries + calc_upper_bound: data extent over unmasked pixels unless
 * given, radial lower bound >= 0 (all faid units are positive), chi clipped to [-pi, pi]; then
 * the bins and their widths, and the ranges recorded in csr. */
static void calc_bounds(const faid_csr_params *p, double scale, double rmin, double rmax,
                        double cmin, double cmax, faid_csr *csr, bounds *b)
{
    b->min0 = rmin > 0.0 ? rmin : 0.0;
    b->maxin0 = rmax > 0.0 ? rmax : 0.0;
    /* pyFAI clips chi with pi rounded to float32 (3.1415927410...) */
    const double pi32 = (double)(float)M_PI;
    b->maxin1 = cmax < pi32 ? cmax : pi32;
    b->min1 = cmin > -pi32 ? cmin : -pi32;
    if (p->has_rad_range) {
        double lo = p->rad_range[0] / scale, hi = p->rad_range[1] / scale;
        b->min0 = lo < hi ? lo : hi;
        b->maxin0 = lo < hi ? hi : lo;
    }
    if (p->has_azim_range) {
        double lo = deg2rad_disc(p->azim_range[0]), hi = deg2rad_disc(p->azim_range[1]);
        if (hi <= lo)
            hi += TWO_PI;
        b->min1 = lo;
        b->maxin1 = hi;
    }
    b->max0 = upper_bound(b->maxin0);
    b->max1 = upper_bound(b->maxin1);
    b->bins0 = p->npt_rad;
    b->bins1 = p->npt_azim > 0 ? p->npt_azim : 1;
    b->delta0 = (b->max0 - b->min0) / (double)b->bins0;
    b->delta1 = (b->max1 - b->min1) / (double)b->bins1;
    csr->rad_min = b->min0;
    csr->rad_max = b->max0;
    csr->azim_min = b->min1;
    csr->azim_max = b->max1;
}

static int build_bbox(const pixsrc *s, const faid_csr_params *p, double scale, faid_csr *csr,
                      faid_diag *d)
{
    const faid_csr_positions *pp = s->pos;
    size_t npix = (size_t)s->rows * (size_t)s->cols;
    int two_d = p->npt_azim > 0;
    int use_chi = two_d || p->has_azim_range;
    int split = p->split == FAID_SPLIT_BBOX;
    double *d0 = NULL, *d1 = NULL;
    if (split) {
        d0 = calloc(npix, sizeof(double));
        d1 = use_chi ? calloc(npix, sizeof(double)) : NULL;
        if (!d0 || (use_chi && !d1)) {
            free(d0);
            free(d1);
            return faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory for %zu pixels", npix);
        }
        bbox_deltas(s, use_chi, d0, d1);
    }
    double rmin = INFINITY, rmax = -INFINITY, cmin = INFINITY, cmax = -INFINITY;
    for (size_t idx = 0; idx < npix; idx++) {
        if (masked(s, idx))
            continue;
        double c0 = pp->rad_center[idx], w0 = split ? d0[idx] : 0.0;
        if (c0 + w0 > rmax)
            rmax = c0 + w0;
        if (c0 - w0 < rmin)
            rmin = c0 - w0;
        if (use_chi) {
            double c1 = pp->chi_center[idx], w1 = split ? d1[idx] : 0.0;
            if (c1 + w1 > cmax)
                cmax = c1 + w1;
            if (c1 - w1 < cmin)
                cmin = c1 - w1;
        }
    }
    bounds b;
    calc_bounds(p, scale, rmin, rmax, cmin, cmax, csr, &b);
    const int bins0 = b.bins0, bins1 = b.bins1;
    const double delta0 = b.delta0, delta1 = b.delta1;

    builder bl;
    int rc = builder_init(&bl, csr->nbins, (int64_t)npix + (int64_t)npix / 2);
    if (rc) {
        builder_free(&bl);
        free(d0);
        free(d1);
        return faid_fail(d, rc, "CSR matrix: out of memory");
    }
    for (size_t idx = 0; idx < npix; idx++) {
        if (masked(s, idx))
            continue;
        double c0 = pp->rad_center[idx], w0 = split ? d0[idx] : 0.0;
        double f0min = (c0 - w0 - b.min0) / delta0, f0max = (c0 + w0 - b.min0) / delta0;
        if (!isfinite(f0min) || !isfinite(f0max))
            continue;
        /* trunc(f) < 0 <=> f <= -1: the (-1, 0) interval truncates to bin 0 (quirk). */
        if (f0max <= -1.0 || f0min >= (double)bins0)
            continue;
        int64_t b0min = f0min <= -1.0 ? 0 : trunc_bin(f0min);
        int64_t b0max = f0max >= (double)bins0 ? bins0 - 1 : trunc_bin(f0max);
        int32_t pix = (int32_t)idx;
        if (!two_d) {
            if (p->has_azim_range) {
                double c1 = pp->chi_center[idx], w1 = split ? d1[idx] : 0.0;
                /* whole pixels: skipped only when the chi box lies entirely outside */
                if (c1 + w1 < b.min1 || c1 - w1 > b.maxin1)
                    continue;
            }
            if (b0min == b0max) {
                builder_add(&bl, b0min, pix, 1.0);
            } else {
                double inv = 1.0 / (f0max - f0min);
                builder_add(&bl, b0min, pix, inv * ((double)(b0min + 1) - f0min));
                builder_add(&bl, b0max, pix, inv * (f0max - (double)b0max));
                for (int64_t k = b0min + 1; k < b0max; k++)
                    builder_add(&bl, k, pix, inv);
            }
            continue;
        }
        double c1 = pp->chi_center[idx], w1 = split ? d1[idx] : 0.0;
        double f1min = (c1 - w1 - b.min1) / delta1, f1max = (c1 + w1 - b.min1) / delta1;
        if (!isfinite(f1min) || !isfinite(f1max))
            continue;
        if (f1max <= -1.0 || f1min >= (double)bins1)
            continue;
        int64_t b1min = f1min <= -1.0 ? 0 : trunc_bin(f1min);
        int64_t b1max = f1max >= (double)bins1 ? bins1 - 1 : trunc_bin(f1max);
        if (b0min == b0max) {
            if (b1min == b1max) {
                builder_add(&bl, b0min * bins1 + b1min, pix, 1.0);
            } else {
                double down = (double)(b1min + 1) - f1min, up = f1max - (double)b1max;
                double inv = 1.0 / (f1max - f1min);
                builder_add(&bl, b0min * bins1 + b1min, pix, inv * down);
                builder_add(&bl, b0min * bins1 + b1max, pix, inv * up);
                for (int64_t j = b1min + 1; j < b1max; j++)
                    builder_add(&bl, b0min * bins1 + j, pix, inv);
            }
        } else if (b1min == b1max) {
            double inv = 1.0 / (f0max - f0min);
            double left = (double)(b0min + 1) - f0min, right = f0max - (double)b0max;
            builder_add(&bl, b0min * bins1 + b1min, pix, inv * left);
            builder_add(&bl, b0max * bins1 + b1min, pix, inv * right);
            for (int64_t i = b0min + 1; i < b0max; i++)
                builder_add(&bl, i * bins1 + b1min, pix, inv);
        } else {
            double left = (double)(b0min + 1) - f0min, right = f0max - (double)b0max;
            double down = (double)(b1min + 1) - f1min, up = f1max - (double)b1max;
            double inv = 1.0 / ((f0max - f0min) * (f1max - f1min));
            builder_add(&bl, b0min * bins1 + b1min, pix, inv * left * down);
            builder_add(&bl, b0min * bins1 + b1max, pix, inv * left * up);
            builder_add(&bl, b0max * bins1 + b1min, pix, inv * right * down);
            builder_add(&bl, b0max * bins1 + b1max, pix, inv * right * up);
            for (int64_t i = b0min + 1; i < b0max; i++) {
                builder_add(&bl, i * bins1 + b1min, pix, inv * down);
                for (int64_t j = b1min + 1; j < b1max; j++)
                    builder_add(&bl, i * bins1 + j, pix, inv);
                builder_add(&bl, i * bins1 + b1max, pix, inv * up);
            }
            for (int64_t j = b1min + 1; j < b1max; j++) {
                builder_add(&bl, b0min * bins1 + j, pix, inv * left);
                builder_add(&bl, b0max * bins1 + j, pix, inv * right);
            }
        }
    }
    free(d0);
    free(d1);
    rc = builder_finish(&bl, csr, p->split == FAID_SPLIT_NO, d);
    builder_free(&bl);
    return rc;
}

static int build_full(const pixsrc *s, const faid_csr_params *p, double scale, faid_csr *csr,
                      faid_diag *d)
{
    const faid_csr_positions *pp = s->pos;
    size_t npix = (size_t)s->rows * (size_t)s->cols;
    int two_d = p->npt_azim > 0;
    int orientation = pp->orientation;
    double rmin = INFINITY, rmax = -INFINITY, cmin = INFINITY, cmax = -INFINITY;
    for (int i = 0; i < s->rows; i++) {
        for (int j = 0; j < s->cols; j++) {
            if (masked(s, (size_t)i * (size_t)s->cols + (size_t)j))
                continue;
            double r[4], c[4];
            pixel_corners(s, pp->rad_corner, i, j, r);
            pixel_corners(s, pp->chi_corner, i, j, c);
            for (int k = 0; k < 4; k++) {
                rmin = r[k] < rmin ? r[k] : rmin;
                rmax = r[k] > rmax ? r[k] : rmax;
                cmin = c[k] < cmin ? c[k] : cmin;
                cmax = c[k] > cmax ? c[k] : cmax;
            }
        }
    }
    bounds b;
    calc_bounds(p, scale, rmin, rmax, cmin, cmax, csr, &b);
    const int bins0 = b.bins0, bins1 = b.bins1;
    const double delta0 = b.delta0, delta1 = b.delta1;

    builder bl;
    int rc = builder_init(&bl, csr->nbins, (int64_t)npix * 2);
    float *buffer = calloc((size_t)bins0 + 1, sizeof(float));
    size_t boxcap = 256;
    int64_t bw0 = 15, bw1 = 15;
    float *box = calloc(boxcap, sizeof(float));
    if (rc || !buffer || !box) {
        builder_free(&bl);
        free(buffer);
        free(box);
        return faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory");
    }
    for (int i = 0; i < s->rows && rc == 0; i++) {
        for (int j = 0; j < s->cols; j++) {
            size_t idx = (size_t)i * (size_t)s->cols + (size_t)j;
            if (masked(s, idx))
                continue;
            double r[4], c[4], v[8];
            pixel_corners(s, pp->rad_corner, i, j, r);
            pixel_corners(s, pp->chi_corner, i, j, c);
            int finite = 1;
            for (int k = 0; k < 4; k++) {
                v[2 * k] = r[k];
                v[2 * k + 1] = c[k];
                finite &= isfinite(r[k]) && isfinite(c[k]);
            }
            if (!finite)
                continue;
            recenter(v, orientation);
            int32_t pix = (int32_t)idx;
            if (!two_d) {
                double a0 = (v[0] - b.min0) / delta0, b0 = (v[2] - b.min0) / delta0;
                double c0 = (v[4] - b.min0) / delta0, d0 = (v[6] - b.min0) / delta0;
                double min0 = fmin(fmin(a0, b0), fmin(c0, d0));
                double max0 = fmax(fmax(a0, b0), fmax(c0, d0));
                if (max0 < 0 || min0 >= (double)bins0)
                    continue;
                if (p->has_azim_range) {
                    double min1 = fmin(fmin(v[1], v[3]), fmin(v[5], v[7]));
                    double max1 = fmax(fmax(v[1], v[3]), fmax(v[5], v[7]));
                    if (max1 < b.min1 || min1 > b.maxin1)
                        continue;
                }
                int64_t lo = (int64_t)floor(min0), hi = (int64_t)floor(max0);
                if (lo == hi) {
                    builder_add(&bl, lo, pix, 1.0);
                    continue;
                }
                lo = lo > 0 ? lo : 0;
                hi = hi + 1 < bins0 ? hi + 1 : bins0;
                integrate1d(buffer, bins0, a0, v[1], b0, v[3]);
                integrate1d(buffer, bins0, b0, v[3], c0, v[5]);
                integrate1d(buffer, bins0, c0, v[5], d0, v[7]);
                integrate1d(buffer, bins0, d0, v[7], a0, v[1]);
                double sum = 0.0;
                for (int64_t k = lo; k < hi; k++)
                    sum += buffer[k];
                /* A degenerate (zero-area) pixel would give 0/0 coefficients: it is skipped. */
                if (sum != 0.0) {
                    double inv = 1.0 / sum;
                    for (int64_t k = lo; k < hi; k++)
                        builder_add(&bl, k, pix, (double)buffer[k] * inv);
                }
                for (int64_t k = lo; k < hi; k++)
                    buffer[k] = 0.0f;
                continue;
            }
            double min0 = fmin(fmin(v[0], v[2]), fmin(v[4], v[6]));
            double max0 = fmax(fmax(v[0], v[2]), fmax(v[4], v[6]));
            double min1 = fmin(fmin(v[1], v[3]), fmin(v[5], v[7]));
            double max1 = fmax(fmax(v[1], v[3]), fmax(v[5], v[7]));
            if (max0 < b.min0 || min0 > b.maxin0 || max1 < b.min1 || min1 >= b.max1)
                continue;
            double f[8];
            for (int k = 0; k < 4; k++) {
                f[2 * k] = (clipd(v[2 * k], b.min0, b.maxin0) - b.min0) / delta0;
                f[2 * k + 1] = (clipd(v[2 * k + 1], b.min1, b.maxin1) - b.min1) / delta1;
            }
            min0 = fmin(fmin(f[0], f[2]), fmin(f[4], f[6]));
            max0 = fmax(fmax(f[0], f[2]), fmax(f[4], f[6]));
            min1 = fmin(fmin(f[1], f[3]), fmin(f[5], f[7]));
            max1 = fmax(fmax(f[1], f[3]), fmax(f[5], f[7]));
            double off0 = floor(min0), off1 = floor(min1);
            int64_t w0 = (int64_t)(ceil(max0) - off0), w1 = (int64_t)(ceil(max1) - off1);
            /* pyFAI keeps one (bw0+1) x (bw1+1) box, 16 x 16 at first, and reshapes it to the
             * current pixel's size only when that is larger on either axis. The row length
             * bounds how far an area is stacked, so the same shape rule is kept here. */
            if (w0 > bw0 || w1 > bw1) {
                bw0 = w0;
                bw1 = w1;
            }
            size_t need = (size_t)(bw0 + 1) * (size_t)(bw1 + 1);
            if (need > boxcap) {
                float *nb = realloc(box, need * sizeof(float));
                if (!nb) {
                    rc = faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory");
                    break;
                }
                box = nb;
                boxcap = need;
            }
            memset(box, 0, need * sizeof(float));
            for (int k = 0; k < 4; k++) {
                f[2 * k] -= off0;
                f[2 * k + 1] -= off1;
            }
            int64_t nrow = bw1 + 1;
            integrate2d(box, nrow, f[0], f[1], f[2], f[3]);
            integrate2d(box, nrow, f[2], f[3], f[4], f[5]);
            integrate2d(box, nrow, f[4], f[5], f[6], f[7]);
            integrate2d(box, nrow, f[6], f[7], f[0], f[1]);
            double sum = 0.0;
            for (int64_t a = 0; a < w0; a++)
                for (int64_t c2 = 0; c2 < w1; c2++)
                    sum += box[a * nrow + c2];
            if (sum == 0.0)
                continue;
            double inv = 1.0 / sum;
            int64_t io0 = (int64_t)off0, io1 = (int64_t)off1;
            for (int64_t a = 0; a < w0; a++)
                for (int64_t c2 = 0; c2 < w1; c2++)
                    builder_add(&bl, (io0 + a) * bins1 + io1 + c2, pix,
                                (double)box[a * nrow + c2] * inv);
        }
    }
    free(buffer);
    free(box);
    if (rc == 0)
        rc = builder_finish(&bl, csr, 0, d);
    builder_free(&bl);
    return rc;
}

void faid_csr_destroy(faid_csr **csr)
{
    if (!csr || !*csr)
        return;
    faid_csr *c = *csr;
    free(c->indptr);
    free(c->indices);
    free(c->data);
    free(c->rad_centers);
    free(c->azim_centers);
    free(c);
    *csr = NULL;
}

static int check_params(const faid_csr_params *p, faid_diag *d)
{
    if (!p)
        return faid_fail(d, FAID_EINVAL, "CSR matrix: no parameters");
    if (p->split != FAID_SPLIT_NO && p->split != FAID_SPLIT_BBOX && p->split != FAID_SPLIT_FULL)
        return faid_fail(d, FAID_EINVAL, "CSR matrix: unknown pixel splitting %d", (int)p->split);
    if (p->npt_rad < 1 || p->npt_rad > (1 << 24))
        return faid_fail(d, FAID_ERANGE, "CSR matrix: npt_rad %d out of range [1, 16777216]",
                         p->npt_rad);
    if (p->npt_azim < 0 || p->npt_azim > (1 << 20) ||
        (int64_t)p->npt_rad * (p->npt_azim ? p->npt_azim : 1) > INT32_MAX / 2)
        return faid_fail(d, FAID_ERANGE, "CSR matrix: npt_azim %d out of range", p->npt_azim);
    if (p->has_rad_range && (!isfinite(p->rad_range[0]) || !isfinite(p->rad_range[1]) ||
                             p->rad_range[0] == p->rad_range[1]))
        return faid_fail(d, FAID_ERANGE, "CSR matrix: radial range [%g, %g] is empty or not finite",
                         p->rad_range[0], p->rad_range[1]);
    if (p->has_azim_range && (!isfinite(p->azim_range[0]) || !isfinite(p->azim_range[1])))
        return faid_fail(d, FAID_ERANGE, "CSR matrix: azimuth range is not finite");
    return 0;
}

int faid_csr_build_from_positions(const faid_csr_positions *pos, const uint8_t *mask,
                                  const faid_csr_params *p, faid_csr **out, faid_diag *d)
{
    if (!out)
        return faid_fail(d, FAID_EINVAL, "CSR matrix: no output");
    *out = NULL;
    int rc = check_params(p, d);
    if (rc)
        return rc;
    if (!pos || pos->rows < 1 || pos->cols < 1 || (int64_t)pos->rows * pos->cols > INT32_MAX)
        return faid_fail(d, FAID_ESHAPE, "CSR matrix: bad detector shape");
    int two_d = p->npt_azim > 0;
    int use_chi = two_d || p->has_azim_range;
    if ((p->split != FAID_SPLIT_FULL && !pos->rad_center) ||
        (p->split != FAID_SPLIT_FULL && use_chi && !pos->chi_center) ||
        (p->split != FAID_SPLIT_NO && !pos->rad_corner) ||
        (((p->split == FAID_SPLIT_BBOX && use_chi) || p->split == FAID_SPLIT_FULL) &&
         !pos->chi_corner))
        return faid_fail(d, FAID_EINVAL, "CSR matrix: pixel positions missing for split %s",
                         faid_split_name(p->split));
    double scale;
    faid_unit_internal(p->unit, &scale);

    faid_csr *csr = calloc(1, sizeof(*csr));
    if (!csr)
        return faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory");
    csr->npt_rad = p->npt_rad;
    csr->npt_azim = p->npt_azim;
    csr->nbins = p->npt_rad * (two_d ? p->npt_azim : 1);
    csr->npix = pos->rows * pos->cols;
    pixsrc s = {pos, mask, p->f64_corners, pos->rows, pos->cols};
    if (p->split == FAID_SPLIT_FULL)
        rc = build_full(&s, p, scale, csr, d);
    else
        rc = build_bbox(&s, p, scale, csr, d);
    if (rc == 0) {
        csr->rad_centers = malloc((size_t)p->npt_rad * sizeof(double));
        csr->azim_centers = two_d ? malloc((size_t)p->npt_azim * sizeof(double)) : NULL;
        if (!csr->rad_centers || (two_d && !csr->azim_centers)) {
            rc = faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory");
        } else {
            linspace_centers(csr->rad_min, csr->rad_max, p->npt_rad, csr->rad_centers);
            for (int i = 0; i < p->npt_rad; i++)
                csr->rad_centers[i] *= scale;
            if (two_d) {
                linspace_centers(csr->azim_min, csr->azim_max, p->npt_azim, csr->azim_centers);
                for (int i = 0; i < p->npt_azim; i++)
                    csr->azim_centers[i] *= 180.0 / M_PI;
            }
            /* Edges reported in the user's units (degrees for chi). */
            csr->rad_min *= scale;
            csr->rad_max *= scale;
            csr->azim_min *= 180.0 / M_PI;
            csr->azim_max *= 180.0 / M_PI;
        }
    }
    if (rc) {
        faid_csr_destroy(&csr);
        return rc;
    }
    *out = csr;
    return 0;
}

int faid_csr_build(const faid_geometry *g, const uint8_t *mask, const faid_csr_params *p,
                   faid_csr **out, faid_diag *d)
{
    if (!out)
        return faid_fail(d, FAID_EINVAL, "CSR matrix: no output");
    *out = NULL;
    int rc = check_params(p, d);
    if (rc)
        return rc;
    if (!g || g->rows < 1 || g->cols < 1 || (int64_t)g->rows * g->cols > INT32_MAX)
        return faid_fail(d, FAID_ESHAPE, "CSR matrix: bad detector shape");
    size_t npix = (size_t)g->rows * (size_t)g->cols;
    size_t ncorner = (size_t)(g->rows + 1) * (size_t)(g->cols + 1);
    int two_d = p->npt_azim > 0;
    int use_chi = two_d || p->has_azim_range;
    int need_center = p->split != FAID_SPLIT_FULL;
    int need_chi_center = need_center && use_chi;
    int need_corner = p->split != FAID_SPLIT_NO;
    int need_chi_corner = p->split == FAID_SPLIT_FULL || (p->split == FAID_SPLIT_BBOX && use_chi);
    faid_unit in = faid_unit_internal(p->unit, NULL);

    double *rc_ = need_center ? malloc(npix * sizeof(double)) : NULL;
    double *cc = need_chi_center ? malloc(npix * sizeof(double)) : NULL;
    double *rk = need_corner ? malloc(ncorner * sizeof(double)) : NULL;
    double *ck = need_chi_corner ? malloc(ncorner * sizeof(double)) : NULL;
    if ((need_center && !rc_) || (need_chi_center && !cc) || (need_corner && !rk) ||
        (need_chi_corner && !ck)) {
        rc = faid_fail(d, FAID_ENOMEM, "CSR matrix: out of memory for positions");
        goto done;
    }
    if (need_center && (rc = faid_geometry_radial_centers(g, in, rc_)) != 0) {
        rc = faid_fail(d, rc, "CSR matrix: cannot compute %s positions (wavelength missing?)",
                       faid_unit_name(p->unit));
        goto done;
    }
    if (need_corner && (rc = faid_geometry_radial_corners(g, in, rk)) != 0) {
        rc = faid_fail(d, rc, "CSR matrix: cannot compute %s corner positions",
                       faid_unit_name(p->unit));
        goto done;
    }
    if (need_chi_center)
        faid_geometry_chi_centers(g, cc);
    if (need_chi_corner)
        faid_geometry_chi_corners(g, ck);
    faid_csr_positions pos = {
        g->rows, g->cols, rc_, cc, rk, ck, g->orientation ? g->orientation : 3};
    rc = faid_csr_build_from_positions(&pos, mask, p, out, d);
done:
    free(rc_);
    free(cc);
    free(rk);
    free(ck);
    return rc;
}
