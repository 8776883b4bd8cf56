/* peaks/sigma_clip.cl: the sigma-clipped background per radial bin (algorithms.md §8, pyFAI's
 * sigma_clip_ng semantics), one work-group per bin of the CSR matrix. The plain C reference is
 * faid_sigclip_ref (daemon/core/faid_sigclip.c); the rules are documented in faid_sigclip.h.
 *
 * Build-time constants:
 *   WG        work-group size, a power of two (the host picks min(256, device maximum))
 *   HAS_COEF  1 when the matrix carries coefficients (else every coefficient is 1)
 *
 * Arithmetic is float64 (cl_khr_fp64; H100/H200 run it at full rate): every device then makes
 * the same clipping decisions as the reference up to the rounding of sums taken in another
 * order. Work-item l owns the l-th of WG contiguous chunks of the bin's CSR entries. Per pass:
 * one walk over the chunk clips (cycles) and sums the kept entries (S, O = sum of c*signal and
 * c*norm, the Poisson variance, O2, count), a work-group scan of the chunk sums gives every
 * chunk its prefix and the bin's totals, and a halving tree the other sums. The azimuthal model
 * then walks the chunk again: the reference's sequential recurrence
 * VV += w^2 (S_a/O_a - x)((S_a + c s)/(O_a + w) - x) needs, for every entry, the sums S_a, O_a
 * of the kept entries before it in CSR order: the chunk's prefix plus a running sum.
 * Why chunks and not tiles of WG entries with a scan per tile (the first version): on an
 * H200 with EIGER 4M frames (1000 bins of up to ~10^4 pixels) that version spent ~600 us per
 * frame, the largest bins' work-groups walking dozens of tiles of 16 barriers each per pass;
 * a pass now takes 4 barriers plus two trees. Walks load 4 entries ahead (SC_AHEAD) before
 * using them in order, so a work-item has several gathers in flight.
 *
 * Clipped pixels are flagged in `clipped` (one byte per pixel, cleared for the bin's pixels at
 * the start), not written into the shared preprocessed buffer. A pixel belongs to one bin (no
 * pixel splitting) and to one chunk, read and written by its work-item only: no atomics and no
 * global barrier. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#ifndef WG
#define WG 256
#endif
#ifndef HAS_COEF
#define HAS_COEF 0
#endif

#define EM_POISSON 0
#define EM_AZIMUTHAL 1
#define EM_HYBRID 2

static inline int sc_ok(float4 q)
{
    return isfinite(q.s0) && isfinite(q.s1) && isfinite(q.s2) && q.s2 != 0.0f && q.s3 != 0.0f;
}

static inline double sc_coef(const global float *coefs, int k)
{
#if HAS_COEF
    return (double)coefs[k];
#else
    return 1.0;
#endif
}

/* One work-group per bin; em: error model 0 poisson, 1 azimuthal, 2 hybrid (faid_clip_model
 * values); out[out_off ...] receives 4 arrays of nbins floats: mean, std, sem, count.
 *
 * Written as one loop over passes (pass 0: the first integration; pass c >= 1: clipping cycle c
 * fused with the next integration's sums) with every barrier in the kernel body: with the
 * integration and the tree sums as functions holding barriers, PoCL 5's LLVM 15 crashed while
 * inlining them. */
#define SC_AHEAD 4

/* Loads entries k .. k + SC_AHEAD - 1 of the chunk (those below c1): pixel, coefficient,
 * clip flag and preprocessed value; ok[u] = 0 past the chunk's end. */
#define SC_LOAD(k)                                                                             \
    int ok[SC_AHEAD], idx[SC_AHEAD];                                                           \
    double cf[SC_AHEAD];                                                                       \
    float4 qv[SC_AHEAD];                                                                       \
    uchar cl[SC_AHEAD];                                                                        \
    for (int u = 0; u < SC_AHEAD; u++) {                                                       \
        ok[u] = (k) + u < c1;                                                                  \
        idx[u] = ok[u] ? indices[(k) + u] : 0;                                                 \
        cf[u] = ok[u] ? sc_coef(coefs, (k) + u) : 0.0;                                         \
    }                                                                                          \
    for (int u = 0; u < SC_AHEAD; u++) {                                                       \
        cl[u] = ok[u] ? clipped[idx[u]] : (uchar)1;                                            \
        qv[u] = ok[u] ? pre4[idx[u]] : (float4)(0.0f);                                         \
    }

kernel void faid_sigma_clip(const global float4 *pre4, const global float *coefs,
                            const global int *indices, const global int *indptr,
                            global uchar *clipped, const int nbins, const float cutoff,
                            const int cycles, const int em, const float empty,
                            global float *out, const int out_off)
{
    local double sa[WG], sb[WG];
    local double red[3 * WG];
    local int rem_l[WG];
    const int b = get_group_id(0);
    const int lid = get_local_id(0);
    if (b >= nbins)
        return;
    const int k0 = indptr[b], k1 = indptr[b + 1];
    const int chunk = (k1 - k0 + WG - 1) / WG;
    const int c0 = min(k0 + lid * chunk, k1), c1 = min(c0 + chunk, k1);
    for (int k = c0; k < c1; k++)
        clipped[indices[k]] = 0;
    const int hybrid = em == EM_HYBRID;
    int az = em == EM_AZIMUTHAL || (hybrid && cycles > 0);
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0;
    double aver = NAN, std = NAN;
    const double two_pi_sqrt = sqrt(2.0 * M_PI);
    for (int pass = 0; pass <= cycles; pass++) {
        const int clip = pass > 0;
        double kk = 0.0;
        if (clip) {
            if (a2 == 0.0 || a4 == 0.0)
                break;
            double nkept = a4 > 3.0 ? a4 : 3.0;
            kk = sqrt(2.0 * log(nkept / two_pi_sqrt));
            if ((double)cutoff > kk)
                kk = (double)cutoff;
        }
        /* Walk 1: clip (cycles) and sum the kept entries of the chunk. */
        int rem = 0;
        double cs_t = 0.0, w_t = 0.0, vp = 0.0, n2 = 0.0, cnt = 0.0;
        for (int k = c0; k < c1; k += SC_AHEAD) {
            SC_LOAD(k)
            for (int u = 0; u < SC_AHEAD; u++) {
                if (cf[u] == 0.0 || cl[u] || !sc_ok(qv[u]))
                    continue;
                if (clip && fabs((double)qv[u].s0 / (double)qv[u].s2 - aver) > kk * std) {
                    clipped[idx[u]] = 1;
                    rem++;
                    continue;
                }
                double c = cf[u];
                double w = c * (double)qv[u].s2;
                cs_t += c * (double)qv[u].s0;
                w_t += w;
                vp += c * c * (double)qv[u].s1;
                n2 += w * w;
                cnt += c * (double)qv[u].s3;
            }
        }
        /* Inclusive Hillis-Steele scan of the chunk sums (cs, w); halving-tree sums of the
         * Poisson variance, O2, count and the clipped pixels. */
        sa[lid] = cs_t;
        sb[lid] = w_t;
        red[lid] = vp;
        red[WG + lid] = n2;
        red[2 * WG + lid] = cnt;
        rem_l[lid] = rem;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int off = 1; off < WG; off <<= 1) {
            double ta = lid >= off ? sa[lid - off] : 0.0;
            double tb = lid >= off ? sb[lid - off] : 0.0;
            barrier(CLK_LOCAL_MEM_FENCE);
            sa[lid] += ta;
            sb[lid] += tb;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        for (int w = WG / 2; w > 0; w >>= 1) {
            if (lid < w) {
                red[lid] += red[lid + w];
                red[WG + lid] += red[WG + lid + w];
                red[2 * WG + lid] += red[2 * WG + lid + w];
                rem_l[lid] += rem_l[lid + w];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        const int removed = rem_l[0];
        if (clip) {
            if (removed == 0 && !hybrid)
                break;
            int last = removed == 0 || pass >= cycles;
            az = em == EM_AZIMUTHAL || (hybrid && !last);
        }
        a0 = sa[WG - 1];
        a2 = sb[WG - 1];
        a3 = red[WG];
        a4 = red[2 * WG];
        if (az) {
            /* Walk 2: the azimuthal recurrence, each entry with its exact prefix. */
            double s_run = lid > 0 ? sa[lid - 1] : 0.0, o_run = lid > 0 ? sb[lid - 1] : 0.0;
            /* S_a / O_a of an entry is the previous kept entry's (S_a + cs) / (O_a + w): the
             * same operands, so it is carried instead of divided again (same bits) */
            double m_run = o_run != 0.0 ? s_run / o_run : 0.0;
            double vv = 0.0;
            for (int k = c0; k < c1; k += SC_AHEAD) {
                SC_LOAD(k)
                for (int u = 0; u < SC_AHEAD; u++) {
                    if (cf[u] == 0.0 || cl[u] || !sc_ok(qv[u]))
                        continue;
                    double c = cf[u];
                    double cs = c * (double)qv[u].s0;
                    double w = c * (double)qv[u].s2;
                    double x = (double)qv[u].s0 / (double)qv[u].s2;
                    double m_next = (s_run + cs) / (o_run + w);
                    if (o_run != 0.0) {
                        double delta1 = m_run - x;
                        double delta2 = m_next - x;
                        vv += w * w * delta1 * delta2;
                    }
                    s_run += cs;
                    o_run += w;
                    m_run = m_next;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE); /* every work-item has read red[0 .. 3 WG) */
            red[lid] = vv;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int w = WG / 2; w > 0; w >>= 1) {
                if (lid < w)
                    red[lid] += red[lid + w];
                barrier(CLK_LOCAL_MEM_FENCE);
            }
        }
        a1 = red[0];
        barrier(CLK_LOCAL_MEM_FENCE); /* sa, sb, red, rem_l are rewritten by the next pass */
        if (a3 > 0.0) {
            aver = a0 / a2;
            std = sqrt(a1 / a3);
        } else {
            aver = std = NAN;
        }
        if (pass > 0 && removed == 0)
            break;
    }
    global float *bg = out + out_off;
    if (lid == 0) {
        bg[3 * nbins + b] = (float)a4;
        if (a3 > 0.0) {
            bg[b] = (float)aver;
            bg[nbins + b] = (float)std;
            bg[2 * nbins + b] = (float)(sqrt(a1) / a2);
        } else {
            bg[b] = bg[nbins + b] = bg[2 * nbins + b] = empty;
        }
    }
}
