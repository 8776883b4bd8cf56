/* process/preprocess.cl: per-pixel corrections of a raw detector frame (algorithms.md §4, pyFAI's
 * corrections4a semantics), and the double-float ("dw") arithmetic shared with integrate.cl.
 *
 * Build-time constants:
 *   RAW_CODE   element type of the raw frame as pyFAI codes it: unsigned +itemsize (1, 2, 4),
 *              signed -itemsize (-1, -2, -4), float32 32
 *   EM         error model: 0 none, 1 poisson, 2 azimuthal (faid_error_model values)
 *
 * Static per-pixel inputs are folded on the host once per setup (faid_engine.c), in the same
 * float32 operation order as the reference:
 *   normp[i] = normalization_factor * flat * polarization * solid_angle, or 0 for a pixel that
 *              can never contribute (masked, dummy flat, non-finite or zero norm)
 *   dark[i]  = dark current (only read when do_dark)
 * so the per-frame work is: raw -> (signal, variance, norm, count) with all-zero for invalid
 * pixels (masked, non-finite or dummy raw value, non-finite signal, zero norm). Poisson variance
 * is max(raw, 1) of the raw value before dark subtraction, as pyFAI does; the other models carry
 * variance 0. faid_ref_preprocess (faid_reduce_ref.c) is the reference of these rules.
 *
 * Never build with fast-math options: the dw helpers need IEEE float32 without re-association,
 * and contraction is switched off so that every device rounds the same expressions the same way. */
#pragma OPENCL FP_CONTRACT OFF

#ifndef RAW_CODE
#define RAW_CODE 4
#endif
#ifndef EM
#define EM 1
#endif

#if RAW_CODE == 1
typedef uchar raw_t;
#elif RAW_CODE == 2
typedef ushort raw_t;
#elif RAW_CODE == 4
typedef uint raw_t;
#elif RAW_CODE == -1
typedef char raw_t;
#elif RAW_CODE == -2
typedef short raw_t;
#elif RAW_CODE == -4
typedef int raw_t;
#elif RAW_CODE == 32
typedef float raw_t;
#else
#error "unsupported RAW_CODE"
#endif

/* ---- double-float arithmetic (value = hi + lo, |lo| <= ulp(hi)/2) ---- */

static inline float2 dw_two_sum(float a, float b)
{
    float s = a + b;
    float ap = s - b;
    float bp = s - ap;
    return (float2)(s, (a - ap) + (b - bp));
}

/* Requires |a| >= |b| (or a == 0). */
static inline float2 dw_fast_two_sum(float a, float b)
{
    float s = a + b;
    return (float2)(s, b - (s - a));
}

static inline float2 dw_two_prod(float a, float b)
{
    float p = a * b;
    return (float2)(p, fma(a, b, -p));
}

static inline float2 dw_add_fp(float2 x, float y)
{
    float2 s = dw_two_sum(x.s0, y);
    return dw_fast_two_sum(s.s0, x.s1 + s.s1);
}

static inline float2 dw_add(float2 x, float2 y)
{
    float2 s = dw_two_sum(x.s0, y.s0);
    float2 t = dw_two_sum(x.s1, y.s1);
    float2 v = dw_fast_two_sum(s.s0, s.s1 + t.s0);
    return dw_fast_two_sum(v.s0, t.s1 + v.s1);
}

static inline float2 dw_mul_fp(float2 x, float y)
{
    float2 p = dw_two_prod(x.s0, y);
    return dw_fast_two_sum(p.s0, fma(x.s1, y, p.s1));
}

static inline float2 dw_mul(float2 x, float2 y)
{
    float2 p = dw_two_prod(x.s0, y.s0);
    float l = fma(x.s1, y.s0, x.s0 * y.s1);
    return dw_fast_two_sum(p.s0, p.s1 + l);
}

/* x / y rounded to float: one Newton-style correction of the float quotient. */
static inline float dw_div_to_fp(float2 x, float2 y)
{
    float q = x.s0 / y.s0;
    float2 p = dw_mul_fp(y, q);
    float2 r = dw_add(x, (float2)(-p.s0, -p.s1));
    return q + (r.s0 + r.s1) / y.s0;
}

/* ---- one pixel ---- */

/* The per-pixel rule on values already loaded: n = normp[i], v = (float)raw[i], dk = dark[i]
 * (read only when do_dark). Split from the loads so that integrate.cl can issue the loads of
 * several entries before using any of them. Written without branches: every test selects, so a
 * compiler cannot move the caller's loads of v and dk behind the test of n (one GPU profile,
 * issue 17 round 8: with an early return for n == 0 both NVIDIA's compiler and LLVM's loaded
 * raw only after normp had arrived, two round trips per pixel one after the other, a third of
 * the sigma clip's stall samples); the same value for every input. */
static inline float4 faid_pixel_v(float n, float v, float dk, int do_dark, int do_dummy,
                                  float dummy, float delta_dummy)
{
    int bad = n == 0.0f;
#if RAW_CODE == 32
    /* an integer raw value converts to a finite float: only float frames need the test */
    bad |= !isfinite(v);
#endif
    const int is_dummy = delta_dummy != 0.0f ? fabs(v - dummy) <= delta_dummy : v == dummy;
    bad |= (do_dummy != 0) & is_dummy;
    const float s = do_dark ? v - dk : v;
#if RAW_CODE == 32
    bad |= !isfinite(s);
#else
    bad |= (do_dark != 0) & !isfinite(s); /* finite v minus a non-finite dark */
#endif
#if EM == 1
    const float var = fmax(v, 1.0f);
#else
    const float var = 0.0f; /* none; azimuthal estimates the variance from the spread instead */
#endif
    return bad ? (float4)(0.0f) : (float4)(s, var, n, 1.0f);
}

static inline float4 faid_pixel(__global const raw_t *raw, __global const float *dark,
                                __global const float *normp, uint i, int do_dark, int do_dummy,
                                float dummy, float delta_dummy)
{
    /* raw is read for a pixel of norm 0 too (its value is dropped): its load is then issued
     * beside normp's, not after it (issue 17 round 8's profiles of the picker's flag pass and
     * peakfinder8's prep: the wait for normp, then for raw, was their largest stall) */
    return faid_pixel_v(normp[i], (float)raw[i], do_dark ? dark[i] : 0.0f, do_dark, do_dummy,
                        dummy, delta_dummy);
}

/* One work-item per pixel; any work-group size. out[i] = (signal, variance, norm, count). The
 * frame starts at element raw_off of raw (frames batched in one buffer). */
__kernel void faid_preprocess(__global const raw_t *raw, __global const float *dark,
                              __global const float *normp, int npix, int do_dark, int do_dummy,
                              float dummy, float delta_dummy, __global float4 *out, uint raw_off)
{
    raw += raw_off;
    int i = get_global_id(0);
    if (i >= npix)
        return;
    out[i] = faid_pixel(raw, dark, normp, (uint)i, do_dark, do_dummy, dummy, delta_dummy);
}
