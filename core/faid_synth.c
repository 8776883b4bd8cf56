/* faid_synth: synthetic detector frames (see faid_synth.h). The expected image is built once in
 * 2theta (so it needs no wavelength) and chi; frames add spots and Poisson noise from a
 * xoshiro256** stream seeded by (seed, frame index) through splitmix64. Poisson draws use Knuth's
 * product method below lambda = 12 and a rounded normal deviate above, which is accurate enough
 * for test data and keeps a 4M-pixel frame at a few tens of milliseconds. */
#include "faid_synth.h"

#include "faid_setup.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct faid_synth {
    int rows, cols;
    size_t npix;
    faid_synth_params p;
    float *expect; /* expected counts per pixel, < 0 = bad pixel */
    float *omega;  /* relative solid angle, to scale the spots */
};

void faid_synth_default_params(faid_synth_params *p)
{
    memset(p, 0, sizeof *p);
    p->seed = 12345;
    p->background = 20.0;
    p->ring_amplitude = 400.0;
    p->nrings = 6;
    p->ring_width = 0.004;
    p->nspots = 20;
    p->spot_amplitude = 3000.0;
    p->spot_sigma = 1.2;
    p->poisson = 1;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct rng {
    uint64_t s[4];
} rng;

static void rng_seed(rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1342543DE82EF95ull);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Uniform in (0, 1). */
static double rng_unif(rng *r)
{
    return ((double)(rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double rng_normal(rng *r)
{
    double u = rng_unif(r), v = rng_unif(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double poisson(rng *r, double lambda)
{
    if (lambda <= 0)
        return 0;
    if (lambda < 12.0) {
        double l = exp(-lambda), p = 1.0;
        int k = 0;
        do {
            k++;
            p *= rng_unif(r);
        } while (p > l && k < 200);
        return k - 1;
    }
    double x = floor(lambda + sqrt(lambda) * rng_normal(r) + 0.5);
    return x < 0 ? 0 : x;
}

double faid_synth_bad_value(faid_dtype t)
{
    switch (t) {
    case FAID_DT_U8:
        return 255.0;
    case FAID_DT_U16:
        return 65535.0;
    case FAID_DT_U32:
        return 4294967295.0;
    case FAID_DT_I8:
    case FAID_DT_I16:
    case FAID_DT_I32:
        return -1.0;
    default:
        return NAN;
    }
}

/* Largest count a valid pixel may hold (saturation), below the bad-pixel value. */
static double max_count(faid_dtype t)
{
    switch (t) {
    case FAID_DT_U8:
        return 254.0;
    case FAID_DT_U16:
        return 65534.0;
    case FAID_DT_U32:
        return 4294967294.0;
    case FAID_DT_I8:
        return 127.0;
    case FAID_DT_I16:
        return 32767.0;
    case FAID_DT_I32:
        return 2147483647.0;
    default:
        return 3.0e38;
    }
}

static void store(faid_dtype t, void *out, size_t i, double v)
{
    switch (t) {
    case FAID_DT_U8:
        ((uint8_t *)out)[i] = (uint8_t)v;
        break;
    case FAID_DT_U16:
        ((uint16_t *)out)[i] = (uint16_t)v;
        break;
    case FAID_DT_U32:
        ((uint32_t *)out)[i] = (uint32_t)v;
        break;
    case FAID_DT_I8:
        ((int8_t *)out)[i] = (int8_t)v;
        break;
    case FAID_DT_I16:
        ((int16_t *)out)[i] = (int16_t)v;
        break;
    case FAID_DT_I32:
        ((int32_t *)out)[i] = (int32_t)v;
        break;
    default:
        ((float *)out)[i] = (float)v;
        break;
    }
}

faid_synth *faid_synth_new(const faid_geometry *g, const uint8_t *mask, const faid_synth_params *p,
                           faid_diag *d)
{
    if (!g || g->rows <= 0 || g->cols <= 0 || !p) {
        faid_fail(d, FAID_EINVAL, "synth: empty geometry");
        return NULL;
    }
    if (p->nrings < 0 || p->nrings > FAID_SYNTH_MAX_RINGS || p->nspots < 0 || p->nspots > 100000 ||
        !(p->spot_sigma > 0) || !(p->ring_width > 0) || !(p->background >= 0)) {
        faid_fail(d, FAID_EINVAL, "synth: parameters out of range");
        return NULL;
    }
    faid_synth *s = calloc(1, sizeof *s);
    size_t npix = (size_t)g->rows * (size_t)g->cols;
    double *tth = malloc(npix * sizeof *tth);
    double *chi = malloc(npix * sizeof *chi);
    if (s) {
        s->expect = malloc(npix * sizeof *s->expect);
        s->omega = malloc(npix * sizeof *s->omega);
    }
    if (!s || !tth || !chi || !s->expect || !s->omega) {
        free(tth);
        free(chi);
        faid_synth_destroy(&s);
        faid_fail(d, FAID_ENOMEM, "synth: out of memory for %d x %d pixels", g->rows, g->cols);
        return NULL;
    }
    s->rows = g->rows;
    s->cols = g->cols;
    s->npix = npix;
    s->p = *p;
    int rc = faid_geometry_radial_centers(g, FAID_UNIT_2TH_RAD, tth);
    if (rc) {
        free(tth);
        free(chi);
        faid_synth_destroy(&s);
        faid_fail(d, rc, "synth: cannot compute pixel positions");
        return NULL;
    }
    faid_geometry_chi_centers(g, chi);
    double tmax = 0;
    for (size_t i = 0; i < npix; i++)
        if (tth[i] > tmax)
            tmax = tth[i];
    if (!(tmax > 0))
        tmax = 1.0;
    double *om = malloc(npix * sizeof *om);
    if (!om) {
        free(tth);
        free(chi);
        faid_synth_destroy(&s);
        faid_fail(d, FAID_ENOMEM, "synth: out of memory");
        return NULL;
    }
    faid_geometry_solid_angle(g, om);
    /* Rings at fixed fractions of the largest angle, so every detector shows several; each ring
     * has its own texture phase and strength. */
    double pos[FAID_SYNTH_MAX_RINGS], amp[FAID_SYNTH_MAX_RINGS], phase[FAID_SYNTH_MAX_RINGS];
    for (int r = 0; r < p->nrings; r++) {
        pos[r] = tmax * (0.12 + 0.78 * (r + 0.5) / p->nrings);
        amp[r] = p->ring_amplitude * (1.0 - 0.6 * r / (p->nrings > 1 ? p->nrings - 1 : 1));
        phase[r] = 0.9 * r;
    }
    double w = p->ring_width * tmax;
    for (size_t i = 0; i < npix; i++) {
        if (mask && mask[i]) {
            s->expect[i] = -1.0f;
            s->omega[i] = 0.0f;
            continue;
        }
        double t = tth[i];
        double v = p->background * (0.25 + 0.75 * exp(-t / (0.3 * tmax)));
        for (int r = 0; r < p->nrings; r++) {
            double x = (t - pos[r]) / w;
            if (x > -6 && x < 6)
                v += amp[r] * exp(-0.5 * x * x) * (1.0 + 0.3 * cos(2.0 * chi[i] + phase[r]));
        }
        s->omega[i] = (float)om[i];
        s->expect[i] = (float)(v * om[i]);
    }
    free(om);
    free(tth);
    free(chi);
    return s;
}

void faid_synth_destroy(faid_synth **ps)
{
    if (!ps || !*ps)
        return;
    free((*ps)->expect);
    free((*ps)->omega);
    free(*ps);
    *ps = NULL;
}

int faid_synth_frame(faid_synth *s, uint64_t index, faid_dtype dtype, void *out, size_t out_len,
                     faid_diag *d)
{
    if (!s || !out)
        return faid_fail(d, FAID_EINVAL, "synth: no generator or output");
    if (!faid_dtype_is_frame(dtype))
        return faid_fail(d, FAID_EDTYPE, "synth: %s is not a frame dtype", faid_dtype_name(dtype));
    size_t es = faid_dtype_size(dtype);
    if (out_len < s->npix * es)
        return faid_fail(d, FAID_ESIZE, "synth: output holds %zu bytes, frame needs %zu", out_len,
                         s->npix * es);
    rng r;
    rng_seed(&r, s->p.seed, index);
    double top = max_count(dtype), badv = faid_synth_bad_value(dtype);
    for (size_t i = 0; i < s->npix; i++) {
        double lam = s->expect[i];
        if (lam < 0) {
            store(dtype, out, i, badv);
            continue;
        }
        double v = s->p.poisson ? poisson(&r, lam) : floor(lam + 0.5);
        store(dtype, out, i, v > top ? top : v);
    }
    /* Bragg spots: a Poisson draw of each spot's own counts added on top (the sum of Poisson
     * variables is Poisson), within 4 sigma. */
    int half = (int)ceil(4.0 * s->p.spot_sigma);
    for (int k = 0; k < s->p.nspots; k++) {
        int r0 = (int)(rng_unif(&r) * s->rows), c0 = (int)(rng_unif(&r) * s->cols);
        double u = rng_unif(&r);
        double a = s->p.spot_amplitude * (0.05 + 0.95 * u * u);
        double inv = 1.0 / (2.0 * s->p.spot_sigma * s->p.spot_sigma);
        for (int y = r0 - half; y <= r0 + half; y++) {
            if (y < 0 || y >= s->rows)
                continue;
            for (int x = c0 - half; x <= c0 + half; x++) {
                if (x < 0 || x >= s->cols)
                    continue;
                size_t i = (size_t)y * (size_t)s->cols + (size_t)x;
                if (s->expect[i] < 0)
                    continue;
                double dy = y - r0, dx = x - c0;
                double lam = a * s->omega[i] * exp(-(dx * dx + dy * dy) * inv);
                double add = s->p.poisson ? poisson(&r, lam) : floor(lam + 0.5);
                double cur;
                faid_dtype_to_f64(dtype, (const char *)out + i * es, 1, &cur);
                double v = cur + add;
                store(dtype, out, i, v > top ? top : v);
            }
        }
    }
    return 0;
}

faid_synth *faid_synth_for_config(const faid_config *cfg, const faid_synth_params *p, faid_diag *d)
{
    if (cfg->rows <= 0 || cfg->cols <= 0) {
        faid_fail(d, FAID_ESHAPE, "the configuration gives no detector shape");
        return NULL;
    }
    faid_geometry g = cfg->geometry;
    g.rows = cfg->rows;
    g.cols = cfg->cols;
    const size_t npix = (size_t)g.rows * (size_t)g.cols;
    uint8_t *mask = calloc(npix, 1);
    if (!mask) {
        faid_fail(d, FAID_ENOMEM, "out of memory for the mask of a %dx%d detector", g.rows, g.cols);
        return NULL;
    }
    faid_synth_params dp;
    faid_synth_default_params(&dp);
    faid_synth *s = faid_config_bad_pixels(cfg, g.rows, g.cols, mask, d)
                        ? NULL
                        : faid_synth_new(&g, mask, p ? p : &dp, d);
    free(mask);
    return s;
}
