/* process/integrate.cl: CSR integration, one work-group per bin (algorithms.md §7), for the 1D
 * radial and the 2D cake matrices alike (a bin is a CSR row; the host picks the matrix).
 * Concatenated after preprocess.cl (raw_t, EM, faid_pixel and the dw_* helpers come from there).
 * Build-time constants: UNROLL (default 4) entries each work-item loads before accumulating them;
 * NBATCH (default 1) frames faid_integrate_raw_b can take per launch.
 *
 * Kernels:
 *   faid_integrate_raw_b  fused, several frames per pass over the matrix (end of file); its
 *                         variants INT_GATHER and INT_ENORM are described there
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
 * Cost per entry (error models none / poisson): the integration is bound by arithmetic on a GPU,
 * not by memory, so a work-item adds an entry with a compensated sum that is not renormalized per
 * entry (acc_add: the float sum in hi, the exact rounding error of every addition plus the
 * product's own error in lo; about 8 operations instead of the 20 of a full double-float add),
 * and renormalizes once before the tree (acc_norm). S and O carry the exact error of the products
 * c*signal and c*norm (the mean I = S / O needs them); VV, O2 and N are sums of non-negative terms
 * whose products are only rounded (at most 2 ulp per term: far below the float32 outputs).
 * Count: a valid entry has count 1, so c*count is exact.
 *
 * Error models none / poisson: each work-item sums the entries lid, lid+wg, ... of the bin, then a
 * halving tree adds the partial sums (the sums are order-independent up to rounding).
 * Azimuthal: pyFAI's sequential recurrence VV += w^2 (x - mean_before)(x - mean_after), with
 * w = c*norm and x = signal/norm, depends strongly on the order of the entries, and merging
 * partial accumulators (§7.3 merge rule) can differ from the sequential result by tens of percent
 * when coefficients vary (pixel splitting). So the kernel reproduces the sequential order exactly:
 * the entries are taken in tiles of wg, an inclusive work-group scan (double-float) gives every
 * entry the prefix sums S and O of all entries before it in CSR order, and each entry's term
 * w^2 (S_a/O_a - x)((S_a + c*s)/(O_a + w) - x) is then independent of the others and summed like
 * the Poisson terms. The first valid entry of a bin (O_a == 0) contributes no variance, as in the
 * reference.
 *
 * Short rows (the 2D cake: hundreds of thousands of bins of about 20 entries) waste a work-group
 * per bin on the tree; faid_rows_pre / faid_rows_raw take one bin per work-item instead and add
 * its entries in CSR order (the azimuthal recurrence then needs no scan). The host picks per
 * matrix and device from the average row length (faid_engine.c), never from timings.
 *
 * Output: out[out_off + k*nbins + b] for k = 0 I, 1 sigma (standard error of the mean), 2 std,
 * 3 count, and out[sum_off + (k-4)*nbins + b] for k = 4 sum_signal, 5 sum_norm, 6 sum_variance,
 * 7 sum_norm_sq (sum_off = out_off + 4*nbins: one block of 8 arrays; the host may put the sums
 * elsewhere so that it need not read them back); I, sigma and std of a bin without valid pixels
 * (O2 == 0, as the reference tests it) are `empty`; with error model none sigma and std are
 * `empty` too. */

/* Entries per work-item per main-loop iteration (loads in flight per work-item). */
#ifndef UNROLL
#define UNROLL 4
#endif

typedef struct faid_acc {
    float2 s, vv, o, n, o2;
} faid_acc;

static inline faid_acc acc_zero(void)
{
    faid_acc a;
    a.s = a.vv = a.o = a.n = a.o2 = (float2)(0.0f);
    return a;
}

/* x + p + e without renormalizing: hi takes the float sum, lo the exact error of that addition
 * plus e (the error of the product p, or 0). |lo| stays a few ulp of the partial sums. */
static inline float2 acc_add(float2 x, float p, float e)
{
    float s = x.s0 + p;
    float bp = s - x.s0;
    float err = (x.s0 - (s - bp)) + (p - bp);
    return (float2)(s, x.s1 + (err + e));
}

/* Renormalized (|lo| <= ulp(hi)/2), as dw_add expects; the identity on normalized values. */
static inline faid_acc acc_norm(faid_acc a)
{
    a.s = dw_two_sum(a.s.s0, a.s.s1);
    a.vv = dw_two_sum(a.vv.s0, a.vv.s1);
    a.o = dw_two_sum(a.o.s0, a.o.s1);
    a.n = dw_two_sum(a.n.s0, a.n.s1);
    a.o2 = dw_two_sum(a.o2.s0, a.o2.s1);
    return a;
}

static inline faid_acc acc_merge(faid_acc a, faid_acc b)
{
    faid_acc r;
    r.s = dw_add(a.s, b.s);
    r.vv = dw_add(a.vv, b.vv);
    r.o = dw_add(a.o, b.o);
    r.n = dw_add(a.n, b.n);
    r.o2 = dw_add(a.o2, b.o2);
    return r;
}

static inline void acc_store(__local float2 *scratch, int lid, faid_acc a)
{
    __local float2 *p = scratch + 5 * lid;
    p[0] = a.s;
    p[1] = a.vv;
    p[2] = a.o;
    p[3] = a.n;
    p[4] = a.o2;
}

static inline faid_acc acc_load(__local const float2 *scratch, int lid)
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

/* Entry k of the matrix as (signal, variance, norm, count): from the preprocessed image, or
 * computed from the raw frame (fused). `fused` is a literal at every call site, so the unused
 * branch disappears after inlining. */
static inline float4 entry_q(int fused, __global const float4 *pre, __global const raw_t *raw,
                             __global const float *dark, __global const float *normp, int do_dark,
                             int do_dummy, float dummy, float delta_dummy, int idx)
{
    if (fused)
        return faid_pixel(raw, dark, normp, (uint)idx, do_dark, do_dummy, dummy, delta_dummy);
    return pre[idx];
}

/* As entry_q, with every load issued unconditionally (the index is a valid pixel either way), so
 * that the compiler can hoist them; same value. */
static inline float4 entry_q_nb(int fused, __global const float4 *pre, __global const raw_t *raw,
                                __global const float *dark, __global const float *normp,
                                int do_dark, int do_dummy, float dummy, float delta_dummy, int idx)
{
    if (fused)
        return faid_pixel_v(normp[idx], (float)raw[idx], do_dark ? dark[idx] : 0.0f, do_dark,
                            do_dummy, dummy, delta_dummy);
    return pre[idx];
}

#if EM != 2
/* Adds entry (c, q) to a, skipping entries that carry nothing (error models none / poisson). */
static inline void acc_entry(faid_acc *a, float c, float4 q)
{
    if (c == 0.0f || q.s3 == 0.0f)
        return;
    float ps = c * q.s0;
    a->s = acc_add(a->s, ps, fma(c, q.s0, -ps));
#if EM != 0
    a->vv = acc_add(a->vv, (c * c) * q.s1, 0.0f);
#endif
    float w = c * q.s2;
    a->o = acc_add(a->o, w, fma(c, q.s2, -w));
    a->o2 = acc_add(a->o2, w * w, 0.0f);
    a->n = acc_add(a->n, c, 0.0f); /* c * count, count == 1 */
}
#endif

/* Partial accumulator of this work-item over bin [start, end). */
static inline faid_acc integrate_entries(int fused, __global const float4 *pre,
                                         __global const raw_t *raw, __global const float *dark,
                                         __global const float *normp, int do_dark, int do_dummy,
                                         float dummy, float delta_dummy,
                                         __global const int *indices, __global const float *coef,
                                         int has_coef, int start, int end, __local float2 *scratch)
{
    int lid = get_local_id(0);
    int wg = get_local_size(0);
    faid_acc a = acc_zero();
#if EM == 2
    float2 carry_s = (float2)(0.0f), carry_o = (float2)(0.0f);
    for (int base = start; base < end; base += wg) {
        int k = base + lid;
        float2 cs = (float2)(0.0f), w = (float2)(0.0f);
        float c = 0.0f, x = 0.0f, cnt = 0.0f;
        int valid = 0;
        if (k < end) {
            c = has_coef ? coef[k] : 1.0f;
            float4 q = entry_q(fused, pre, raw, dark, normp, do_dark, do_dummy, dummy,
                               delta_dummy, indices[k]);
            valid = c != 0.0f && q.s3 != 0.0f;
            if (valid) {
                cs = dw_two_prod(c, q.s0);
                w = dw_two_prod(c, q.s2);
                x = q.s0 / q.s2;
                cnt = q.s3;
            }
        }
        /* inclusive scan of (c*s, w) over the tile, Hillis-Steele */
        scratch[2 * lid] = cs;
        scratch[2 * lid + 1] = w;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int off = 1; off < wg; off <<= 1) {
            float2 ps = (float2)(0.0f), po = (float2)(0.0f);
            if (lid >= off) {
                ps = scratch[2 * (lid - off)];
                po = scratch[2 * (lid - off) + 1];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lid >= off) {
                scratch[2 * lid] = dw_add(ps, scratch[2 * lid]);
                scratch[2 * lid + 1] = dw_add(po, scratch[2 * lid + 1]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        float2 ex_s = (float2)(0.0f), ex_o = (float2)(0.0f);
        if (lid > 0) {
            ex_s = scratch[2 * (lid - 1)];
            ex_o = scratch[2 * (lid - 1) + 1];
        }
        float2 tot_s = scratch[2 * (wg - 1)], tot_o = scratch[2 * (wg - 1) + 1];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (valid) {
            float2 o_a = dw_add(carry_o, ex_o);
            float2 w2 = dw_mul(w, w);
            if (o_a.s0 != 0.0f) {
                float2 s_a = dw_add(carry_s, ex_s);
                float mu_a = dw_div_to_fp(s_a, o_a);
                float mu_b = dw_div_to_fp(dw_add(s_a, cs), dw_add(o_a, w));
                a.vv = dw_add(a.vv, dw_mul_fp(w2, (mu_a - x) * (mu_b - x)));
            }
            a.o2 = dw_add(a.o2, w2);
            a.n = dw_add(a.n, dw_two_prod(c, cnt));
        }
        carry_s = dw_add(carry_s, tot_s);
        carry_o = dw_add(carry_o, tot_o);
    }
    /* every work-item holds the bin totals of S and O; only work-item 0 contributes them */
    if (lid == 0) {
        a.s = carry_s;
        a.o = carry_o;
    }
#else
    /* Each work-item takes the entries lid, lid + wg, ... in that order. The main loop takes
     * UNROLL of them at a time and issues every load (indices, coefficients, then the gathers)
     * before the first use, so that a work-item has UNROLL gathers in flight instead of one;
     * the accumulation order is unchanged, so are the bits. */
    int k = start + lid;
    for (; k + (UNROLL - 1) * wg < end; k += UNROLL * wg) {
        int idx[UNROLL];
        float c[UNROLL];
        float4 q[UNROLL];
        for (int u = 0; u < UNROLL; u++)
            idx[u] = indices[k + u * wg];
        for (int u = 0; u < UNROLL; u++)
            c[u] = has_coef ? coef[k + u * wg] : 1.0f;
        for (int u = 0; u < UNROLL; u++)
            q[u] = entry_q_nb(fused, pre, raw, dark, normp, do_dark, do_dummy, dummy, delta_dummy,
                              idx[u]);
        for (int u = 0; u < UNROLL; u++)
            acc_entry(&a, c[u], q[u]);
    }
    for (; k < end; k += wg) {
        float c = has_coef ? coef[k] : 1.0f;
        acc_entry(&a, c, entry_q_nb(fused, pre, raw, dark, normp, do_dark, do_dummy, dummy,
                                    delta_dummy, indices[k]));
    }
#endif
    return a;
}

/* The outputs of bin b from its (normalized) accumulator: I, sigma, std, count at out, the sums
 * at sums (see the top of the file). */
static inline void write_bin(faid_acc a, int b, int nbins, float empty, __global float *out,
                             __global float *sums)
{
    float count = a.n.s0;
    float vv = fmax(a.vv.s0, 0.0f);
    float mean = empty, sem = empty, std = empty;
    if (a.o2.s0 > 0.0f) {
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
    sums[b] = a.s.s0;
    sums[nbins + b] = a.o.s0;
    sums[2 * nbins + b] = vv;
    sums[3 * nbins + b] = a.o2.s0;
}

/* Tree reduction of the work-group's partial accumulators into scratch slot 0, taken by every
 * work-item: the one order of the merges, for a frame alone and in a batch alike. */
static inline void reduce_tree(faid_acc a, __local float2 *scratch)
{
    int lid = get_local_id(0);
    int wg = get_local_size(0);
    acc_store(scratch, lid, acc_norm(a));
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = wg >> 1; step > 0; step >>= 1) {
        if (lid < step) {
            faid_acc m = acc_merge(acc_load(scratch, lid), acc_load(scratch, lid + step));
            acc_store(scratch, lid, m);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* The tree reduction, then work-item 0 writes bin b. */
static inline void reduce_and_write(faid_acc a, __local float2 *scratch, int b, int nbins,
                                    float empty, __global float *out, __global float *sums)
{
    reduce_tree(a, scratch);
    if (get_local_id(0) != 0)
        return;
    write_bin(acc_load(scratch, 0), b, nbins, empty, out, sums);
}

/* Global size nbins * wg, local size wg (power of two); scratch holds 10 floats per work-item.
 * coef may be a dummy buffer when has_coef == 0 (every coefficient 1). */
__kernel void faid_integrate_pre(__global const float4 *pre, __global const int *indptr,
                                 __global const int *indices, __global const float *coef,
                                 int has_coef, int nbins, float empty, __global float *out,
                                 int out_off, int sum_off, __local float2 *scratch)
{
    int b = get_group_id(0);
    if (b >= nbins)
        return;
    faid_acc a = integrate_entries(0, pre, (__global const raw_t *)0, (__global const float *)0,
                                   (__global const float *)0, 0, 0, 0.0f, 0.0f, indices, coef,
                                   has_coef, indptr[b], indptr[b + 1], scratch);
    reduce_and_write(a, scratch, b, nbins, empty, out + out_off, out + sum_off);
}

/* The frame starts at element raw_off of raw (frames batched in one buffer). */
__kernel void faid_integrate_raw(__global const raw_t *raw, __global const float *dark,
                                 __global const float *normp, int do_dark, int do_dummy,
                                 float dummy, float delta_dummy, __global const int *indptr,
                                 __global const int *indices, __global const float *coef,
                                 int has_coef, int nbins, float empty, __global float *out,
                                 int out_off, int sum_off, __local float2 *scratch, uint raw_off)
{
    raw += raw_off;
    int b = get_group_id(0);
    if (b >= nbins)
        return;
    faid_acc a = integrate_entries(1, (__global const float4 *)0, raw, dark, normp, do_dark,
                                   do_dummy, dummy, delta_dummy, indices, coef, has_coef,
                                   indptr[b], indptr[b + 1], scratch);
    reduce_and_write(a, scratch, b, nbins, empty, out + out_off, out + sum_off);
}

#if EM != 2
#ifndef NBATCH
#define NBATCH 1
#endif
/* Variants of faid_integrate_raw_b (faid_engine.h, FAID_ENGINE_INTEGRATE), same bits as without:
 * INT_GATHER loads every frame's raw values of the UNROLL entries before adding the first;
 * INT_ENORM takes normp and dark in the matrix' entry order (normp[k] == the pixel factor of
 * entry k, copied at setup) instead of through the index; INT_PREFETCH loads the next UNROLL
 * indices and coefficients while this iteration's gathers are in flight. (UNROLL itself, the
 * variant unroll8, changes no sum's order either: a work-item adds its entries k, k + wg, ... in
 * that order whatever their grouping.) */
#ifndef INT_GATHER
#define INT_GATHER 0
#endif
#ifndef INT_PREFETCH
#define INT_PREFETCH 0
#endif
#if defined(INT_ENORM) && INT_ENORM
#define INT_FACTOR(k, idx) (k)
#else
#define INT_FACTOR(k, idx) (idx)
#endif

/* reduce_and_write without the early exit of the other work-items, and with a closing barrier,
 * so that the scratch can serve the next frame of a batch. Same arithmetic, same bits. */
static inline void reduce_write_sync(faid_acc a, __local float2 *scratch, int b, int nbins,
                                     float empty, __global float *out, __global float *sums)
{
    reduce_tree(a, scratch);
    if (get_local_id(0) == 0)
        write_bin(acc_load(scratch, 0), b, nbins, empty, out, sums);
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* faid_integrate_raw for nframes <= NBATCH frames in one pass over the matrix (error models none
 * and poisson): frame f starts at element f * raw_stride of raw and its profiles at
 * out[f * out_stride + out_off] (sums at out[f * sum_stride + sum_off]). Each entry's index, coefficient and static pixel factors (normp,
 * dark) are loaded once for all frames, which share the matrix traffic; each frame accumulates
 * exactly as in faid_integrate_raw (same entries per work-item, same order, same tree), so a
 * frame gives the same bits alone or in a batch. NBATCH is a build-time constant (registers:
 * 10 floats of accumulators per frame and work-item). */
__kernel void faid_integrate_raw_b(__global const raw_t *raw, uint raw_stride, int nframes,
                                   __global const float *dark, __global const float *normp,
                                   int do_dark, int do_dummy, float dummy, float delta_dummy,
                                   __global const int *indptr, __global const int *indices,
                                   __global const float *coef, int has_coef, int nbins,
                                   float empty, __global float *out, int out_off, int out_stride,
                                   int sum_off, int sum_stride, __local float2 *scratch)
{
    int b = get_group_id(0);
    if (b >= nbins)
        return;
    int lid = get_local_id(0);
    int wg = get_local_size(0);
    int start = indptr[b], end = indptr[b + 1];
    faid_acc a[NBATCH];
#pragma unroll
    for (int f = 0; f < NBATCH; f++)
        a[f] = acc_zero();
    int k = start + lid;
#if INT_PREFETCH
    /* the indices and coefficients of the next UNROLL entries, loaded one iteration ahead */
    int nidx[UNROLL];
    float nc[UNROLL];
    if (k + (UNROLL - 1) * wg < end)
        for (int u = 0; u < UNROLL; u++) {
            nidx[u] = indices[k + u * wg];
            nc[u] = has_coef ? coef[k + u * wg] : 1.0f;
        }
#endif
    for (; k + (UNROLL - 1) * wg < end; k += UNROLL * wg) {
        int idx[UNROLL];
        float c[UNROLL], n[UNROLL], dk[UNROLL];
#if INT_PREFETCH
        for (int u = 0; u < UNROLL; u++) {
            idx[u] = nidx[u];
            c[u] = nc[u];
        }
        const int kn = k + UNROLL * wg;
        if (kn + (UNROLL - 1) * wg < end)
            for (int u = 0; u < UNROLL; u++) {
                nidx[u] = indices[kn + u * wg];
                nc[u] = has_coef ? coef[kn + u * wg] : 1.0f;
            }
#else
        for (int u = 0; u < UNROLL; u++)
            idx[u] = indices[k + u * wg];
        for (int u = 0; u < UNROLL; u++)
            c[u] = has_coef ? coef[k + u * wg] : 1.0f;
#endif
        for (int u = 0; u < UNROLL; u++) {
            n[u] = normp[INT_FACTOR(k + u * wg, idx[u])];
            dk[u] = do_dark ? dark[INT_FACTOR(k + u * wg, idx[u])] : 0.0f;
        }
#if INT_GATHER
        /* every frame's loads first, then the sums in the default order */
        float v[NBATCH][UNROLL];
#pragma unroll
        for (int f = 0; f < NBATCH; f++)
            if (f < nframes)
                for (int u = 0; u < UNROLL; u++)
                    v[f][u] = (float)raw[(size_t)f * raw_stride + idx[u]];
#pragma unroll
        for (int f = 0; f < NBATCH; f++)
            if (f < nframes)
                for (int u = 0; u < UNROLL; u++)
                    acc_entry(&a[f], c[u], faid_pixel_v(n[u], v[f][u], dk[u], do_dark, do_dummy,
                                                        dummy, delta_dummy));
#else
#pragma unroll
        for (int f = 0; f < NBATCH; f++) {
            if (f < nframes) {
                __global const raw_t *rf = raw + (size_t)f * raw_stride;
                float v[UNROLL];
                for (int u = 0; u < UNROLL; u++)
                    v[u] = (float)rf[idx[u]];
                for (int u = 0; u < UNROLL; u++)
                    acc_entry(&a[f], c[u], faid_pixel_v(n[u], v[u], dk[u], do_dark, do_dummy,
                                                        dummy, delta_dummy));
            }
        }
#endif
    }
    for (; k < end; k += wg) {
        int idx = indices[k];
        float c = has_coef ? coef[k] : 1.0f;
        float n = normp[INT_FACTOR(k, idx)], dk = do_dark ? dark[INT_FACTOR(k, idx)] : 0.0f;
#pragma unroll
        for (int f = 0; f < NBATCH; f++)
            if (f < nframes)
                acc_entry(&a[f], c, faid_pixel_v(n, (float)raw[(size_t)f * raw_stride + idx], dk,
                                                 do_dark, do_dummy, dummy, delta_dummy));
    }
#pragma unroll
    for (int f = 0; f < NBATCH; f++)
        if (f < nframes)
            reduce_write_sync(a[f], scratch, b, nbins, empty,
                              out + (size_t)f * out_stride + out_off,
                              out + (size_t)f * sum_stride + sum_off);
}
#endif

/* ---- one work-item per bin (short rows) ---- */

#ifndef NBATCH
#define NBATCH 1
#endif

/* Entry (c, q) added to a bin summed in CSR order by one work-item. Azimuthal: pyFAI's
 * sequential recurrence itself, with the same terms as the scan of integrate_entries. */
static inline void row_entry(faid_acc *a, float c, float4 q)
{
#if EM == 2
    if (c == 0.0f || q.s3 == 0.0f)
        return;
    float2 cs = dw_two_prod(c, q.s0), w = dw_two_prod(c, q.s2);
    float x = q.s0 / q.s2;
    float2 w2 = dw_mul(w, w);
    float2 s_b = dw_add(a->s, cs), o_b = dw_add(a->o, w);
    if (a->o.s0 != 0.0f) {
        float mu_a = dw_div_to_fp(a->s, a->o);
        float mu_b = dw_div_to_fp(s_b, o_b);
        a->vv = dw_add(a->vv, dw_mul_fp(w2, (mu_a - x) * (mu_b - x)));
    }
    a->s = s_b;
    a->o = o_b;
    a->o2 = dw_add(a->o2, w2);
    a->n = dw_add(a->n, dw_two_prod(c, q.s3));
#else
    acc_entry(a, c, q);
#endif
}

/* Global size >= nbins (any local size): work-item b integrates bin b of the preprocessed
 * image. */
__kernel void faid_rows_pre(__global const float4 *pre, __global const int *indptr,
                            __global const int *indices, __global const float *coef, int has_coef,
                            int nbins, float empty, __global float *out, int out_off, int sum_off)
{
    int b = get_global_id(0);
    if (b >= nbins)
        return;
    faid_acc a = acc_zero();
    int end = indptr[b + 1];
    for (int k = indptr[b]; k < end; k++)
        row_entry(&a, has_coef ? coef[k] : 1.0f, pre[indices[k]]);
    write_bin(acc_norm(a), b, nbins, empty, out + out_off, out + sum_off);
}

/* Fused, nframes <= NBATCH frames per pass (any error model): frame f at element
 * raw_off + f * raw_stride of raw, its outputs at f * out_stride + out_off and
 * f * sum_stride + sum_off of out. Each frame adds the same entries in the same order as alone
 * (and as faid_rows_pre), so the bits do not depend on the batch. */
__kernel void faid_rows_raw(__global const raw_t *raw, uint raw_off, uint raw_stride, int nframes,
                            __global const float *dark, __global const float *normp, int do_dark,
                            int do_dummy, float dummy, float delta_dummy,
                            __global const int *indptr, __global const int *indices,
                            __global const float *coef, int has_coef, int nbins, float empty,
                            __global float *out, int out_off, int out_stride, int sum_off,
                            int sum_stride)
{
    int b = get_global_id(0);
    if (b >= nbins)
        return;
    raw += raw_off;
    faid_acc a[NBATCH];
#pragma unroll
    for (int f = 0; f < NBATCH; f++)
        a[f] = acc_zero();
    int end = indptr[b + 1];
    for (int k = indptr[b]; k < end; k++) {
        int idx = indices[k];
        float c = has_coef ? coef[k] : 1.0f;
        float n = normp[idx], dk = do_dark ? dark[idx] : 0.0f;
#pragma unroll
        for (int f = 0; f < NBATCH; f++)
            if (f < nframes)
                row_entry(&a[f], c,
                          faid_pixel_v(n, (float)raw[(size_t)f * raw_stride + idx], dk, do_dark,
                                       do_dummy, dummy, delta_dummy));
    }
#pragma unroll
    for (int f = 0; f < NBATCH; f++)
        if (f < nframes)
            write_bin(acc_norm(a[f]), b, nbins, empty, out + (size_t)f * out_stride + out_off,
                      out + (size_t)f * sum_stride + sum_off);
}
