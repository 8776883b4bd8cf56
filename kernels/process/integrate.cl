/* process/integrate.cl: CSR integration, one work-group per bin (algorithms.md §7), for the 1D
 * radial and the 2D cake matrices alike (a bin is a CSR row; the host picks the matrix).
 * Concatenated after preprocess.cl (raw_t, EM, faid_pixel and the dw_* helpers come from there).
 *
 * Kernels:
 *   faid_integrate_pre  reads preprocessed pixels (float4 signal, variance, norm, count) written
 *                       by faid_preprocess
 *   faid_integrate_raw  fused: gathers the raw frame through the CSR indices and preprocesses each
 *                       entry on the fly (no float4 image in global memory; one launch per matrix)
 * Both produce the same numbers bit for bit (same pixel function, same order).
 *
 * Work-group: any power of two (get_local_size(0)), chosen by the host once per device and matrix;
 * local scratch = 10 floats per work-item (passed as a __local argument). The reduction order is
 * fixed (strided per-work-item partial sums, then a halving tree), so the same device, matrix and
 * work-group size give bit-identical results run after run. No atomics, no sub-groups.
 *
 * Accumulators per work-item, all double-float (hi, lo): S = sum c*signal, VV = sum c^2*variance
 * (poisson, none) or the weighted incremental variance (azimuthal), O = sum c*norm,
 * N = sum c*count, O2 = sum (c*norm)^2.
 *
 * Output: out[out_off + k*nbins + b] for k = 0 I, 1 sigma (standard error of the mean), 2 std,
 * 3 count, 4 sum_signal, 5 sum_norm, 6 sum_variance, 7 sum_norm_sq; I, sigma and std of a bin without
 * valid pixels (count 0) are `empty`; with error model none sigma and std are `empty` too. */

typedef struct faid_acc {
    float2 s, vv, o, n, o2;
} faid_acc;

inline faid_acc acc_zero(void)
{
    faid_acc a;
    a.s = a.vv = a.o = a.n = a.o2 = (float2)(0.0f);
    return a;
}

#if EM == 2
/* Weighted incremental variance (pyFAI's azimuthal model, §7.3). */
inline void acc_add(faid_acc *a, float c, float4 q)
{
    if (!(isfinite(q.s0) && isfinite(q.s2) && q.s3 > 0.0f && c > 0.0f))
        return;
    float2 w = dw_two_prod(c, q.s2);
    float2 w2 = dw_mul(w, w);
    if (a->o2.s0 <= 0.0f) {
        a->s = dw_two_prod(c, q.s0);
        a->vv = (float2)(0.0f);
        a->o = w;
        a->n = dw_two_prod(c, q.s3);
        a->o2 = w2;
        return;
    }
    float x = q.s0 / q.s2;
    float mu_a = dw_div_to_fp(a->s, a->o);
    a->s = dw_add(a->s, dw_two_prod(c, q.s0));
    a->o = dw_add(a->o, w);
    a->o2 = dw_add(a->o2, w2);
    float mu_b = dw_div_to_fp(a->s, a->o);
    a->vv = dw_add(a->vv, dw_mul_fp(w2, (mu_a - x) * (mu_b - x)));
    a->n = dw_add(a->n, dw_two_prod(c, q.s3));
}

/* Merge rule of §7.3: order so that O_a >= O_b, then
 * VV = VV_a + VV_b + (mu_a - mu_b)^2 * O_a * O2_b / O. */
inline faid_acc acc_merge(faid_acc a, faid_acc b)
{
    if (b.o2.s0 <= 0.0f)
        return a;
    if (a.o2.s0 <= 0.0f)
        return b;
    if (a.o.s0 < b.o.s0) {
        faid_acc t = a;
        a = b;
        b = t;
    }
    faid_acc r;
    r.s = dw_add(a.s, b.s);
    r.o = dw_add(a.o, b.o);
    r.o2 = dw_add(a.o2, b.o2);
    r.n = dw_add(a.n, b.n);
    float d = dw_div_to_fp(a.s, a.o) - dw_div_to_fp(b.s, b.o);
    float term = d * d * a.o.s0 * (b.o2.s0 / r.o.s0);
    r.vv = dw_add_fp(dw_add(a.vv, b.vv), term);
    return r;
}
#else
inline void acc_add(faid_acc *a, float c, float4 q)
{
    if (!(isfinite(q.s0) && isfinite(q.s1) && isfinite(q.s2) && q.s3 > 0.0f))
        return;
    float2 w = dw_two_prod(c, q.s2);
    a->s = dw_add(a->s, dw_two_prod(c, q.s0));
    a->vv = dw_add(a->vv, dw_mul_fp(dw_two_prod(c, c), q.s1));
    a->o = dw_add(a->o, w);
    a->o2 = dw_add(a->o2, dw_mul(w, w));
    a->n = dw_add(a->n, dw_two_prod(c, q.s3));
}

inline faid_acc acc_merge(faid_acc a, faid_acc b)
{
    faid_acc r;
    r.s = dw_add(a.s, b.s);
    r.vv = dw_add(a.vv, b.vv);
    r.o = dw_add(a.o, b.o);
    r.n = dw_add(a.n, b.n);
    r.o2 = dw_add(a.o2, b.o2);
    return r;
}
#endif

inline void acc_store(__local float2 *scratch, int lid, faid_acc a)
{
    __local float2 *p = scratch + 5 * lid;
    p[0] = a.s;
    p[1] = a.vv;
    p[2] = a.o;
    p[3] = a.n;
    p[4] = a.o2;
}

inline faid_acc acc_load(__local const float2 *scratch, int lid)
{
    __local const float2 *p = scratch + 5 * lid;
    faid_acc a;
    a.s = p[0];
    a.vv = p[1];
    a.o = p[2];
    a.n = p[3];
    a.o2 = p[4];
    return a;
}

/* Tree reduction of the work-group's partial accumulators, then work-item 0 writes bin b. */
inline void reduce_and_write(faid_acc a, __local float2 *scratch, int b, int nbins, float empty,
                             __global float *out)
{
    int lid = get_local_id(0);
    int wg = get_local_size(0);
    acc_store(scratch, lid, a);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int half = wg >> 1; half > 0; half >>= 1) {
        if (lid < half)
            acc_store(scratch, lid, acc_merge(acc_load(scratch, lid), acc_load(scratch, lid + half)));
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid != 0)
        return;
    a = acc_load(scratch, 0);
    float count = a.n.s0;
    float vv = fmax(a.vv.s0, 0.0f);
    float mean = empty, sem = empty, std = empty;
    if (count > 0.0f) {
        mean = dw_div_to_fp(a.s, a.o);
#if EM != 0
        sem = sqrt(vv) / a.o.s0;
        std = sqrt(vv / a.o2.s0);
#endif
    }
    out[b] = mean;
    out[nbins + b] = sem;
    out[2 * nbins + b] = std;
    out[3 * nbins + b] = count;
    out[4 * nbins + b] = a.s.s0;
    out[5 * nbins + b] = a.o.s0;
    out[6 * nbins + b] = vv;
    out[7 * nbins + b] = a.o2.s0;
}

/* Global size nbins * wg, local size wg (power of two). coef may be a dummy buffer when
 * has_coef == 0 (every coefficient 1). */
__kernel void faid_integrate_pre(__global const float4 *pre, __global const int *indptr,
                                 __global const int *indices, __global const float *coef,
                                 int has_coef, int nbins, float empty, __global float *out,
                                 int out_off, __local float2 *scratch)
{
    int b = get_group_id(0);
    if (b >= nbins)
        return;
    int lid = get_local_id(0);
    int wg = get_local_size(0);
    faid_acc a = acc_zero();
    int end = indptr[b + 1];
    for (int k = indptr[b] + lid; k < end; k += wg) {
        float c = has_coef ? coef[k] : 1.0f;
        acc_add(&a, c, pre[indices[k]]);
    }
    reduce_and_write(a, scratch, b, nbins, empty, out + out_off);
}

__kernel void faid_integrate_raw(__global const raw_t *raw, __global const float *dark,
                                 __global const float *normp, int do_dark, int do_dummy,
                                 float dummy, float delta_dummy, __global const int *indptr,
                                 __global const int *indices, __global const float *coef,
                                 int has_coef, int nbins, float empty, __global float *out,
                                 int out_off, __local float2 *scratch)
{
    int b = get_group_id(0);
    if (b >= nbins)
        return;
    int lid = get_local_id(0);
    int wg = get_local_size(0);
    faid_acc a = acc_zero();
    int end = indptr[b + 1];
    for (int k = indptr[b] + lid; k < end; k += wg) {
        float c = has_coef ? coef[k] : 1.0f;
        float4 q = faid_pixel(raw, dark, normp, (uint)indices[k], do_dark, do_dummy, dummy,
                              delta_dummy);
        acc_add(&a, c, q);
    }
    reduce_and_write(a, scratch, b, nbins, empty, out + out_off);
}
