/* peaks/sigma_clip.cl: the sigma-clipped background per radial bin (algorithms.md §8, pyFAI's
 * sigma_clip_ng semantics), one work-group per bin of the CSR matrix. The plain C reference is
 * faid_sigclip_ref (daemon/core/faid_sigclip.c); the rules are documented in faid_sigclip.h.
 *
 * Build-time constants:
 *   WG        work-group size, a power of two (the host picks min(256, device maximum))
 *   HAS_COEF  1 when the matrix carries coefficients (else every coefficient is 1)
 *   IPT       consecutive entries per work-item in a tile (default 4: one scan per WG * IPT
 *             entries instead of one per WG)
 *
 * Arithmetic is float64 (cl_khr_fp64; H100/H200 run it at full rate): every device then makes
 * the same clipping decisions as the reference up to the rounding of sums taken in another
 * order. Poisson sums: strided partial sums per work-item, then a halving tree. Azimuthal: the
 * reference's sequential recurrence VV += w^2 (S_a/O_a - x)((S_a + c s)/(O_a + w) - x) needs,
 * for every entry, the sums S_a, O_a of the kept entries before it in CSR order: entries are
 * taken in tiles of WG * IPT, IPT consecutive ones per work-item, an exclusive work-group scan of
 * the work-items' sums gives each work-item its prefix, and it walks its entries in order from
 * there.
 *
 * Compact copy: the first integration gathers each entry's preprocessed pixel through the CSR
 * indices once and writes it to `cpk` in CSR order (nnz float4, norm 0 where the entry is not
 * valid: coefficient 0, non-finite or norm 0); every later walk reads `cpk` contiguously
 * (coalesced 16 bytes per entry instead of an index, a scattered 16-byte gather and a scattered
 * clip flag). A clipped entry gets norm 0 in `cpk`, so the flags need no buffer of their own;
 * `pre4` itself is never written (the finders read it). Each entry is written and read by the
 * same work-item (the same k -> work-item mapping in every walk), so no global barrier is
 * needed. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#ifndef WG
#define WG 256
#endif
#ifndef HAS_COEF
#define HAS_COEF 0
#endif
#ifndef IPT
#define IPT 4
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
 * Written as one loop over passes (pass 0: the first integration; pass c >= 1: clipping cycle c,
 * then an integration) with every barrier in the kernel body: with the integration and the tree
 * sums as functions holding barriers, PoCL 5's LLVM 15 crashed while inlining them. Both models
 * take the same barriers (the tile scan is only used by the azimuthal one). */
kernel void faid_sigma_clip(const global float4 *pre4, const global float *coefs,
                            const global int *indices, const global int *indptr,
                            global float4 *cpk, const int nbins, const float cutoff,
                            const int cycles, const int em, const float empty,
                            global float *out, const int out_off)
{
    local double sa[WG], sb[WG];
    local double red[5 * WG];
    local int removed_l;
    const int b = get_group_id(0);
    const int lid = get_local_id(0);
    if (b >= nbins)
        return;
    const int k0 = indptr[b], k1 = indptr[b + 1];
    const int hybrid = em == EM_HYBRID;
    int az = em == EM_AZIMUTHAL || (hybrid && cycles > 0);
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0;
    double aver = NAN, std = NAN;
    const double two_pi_sqrt = sqrt(2.0 * M_PI);
    for (int pass = 0; pass <= cycles; pass++) {
        int removed = 0;
        if (pass > 0) {
            if (a2 == 0.0 || a4 == 0.0)
                break;
            double nkept = a4 > 3.0 ? a4 : 3.0;
            double kk = sqrt(2.0 * log(nkept / two_pi_sqrt));
            if ((double)cutoff > kk)
                kk = (double)cutoff;
            if (lid == 0)
                removed_l = 0;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int kb = k0 + lid * IPT; kb < k1; kb += WG * IPT) {
                for (int k = kb; k < kb + IPT && k < k1; k++) {
                    float4 q = cpk[k];
                    if (sc_ok(q)) {
                        double x = (double)q.s0 / (double)q.s2;
                        if (fabs(x - aver) > kk * std) {
                            cpk[k].s2 = 0.0f;
                            atomic_inc(&removed_l);
                        }
                    }
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            removed = removed_l;
            barrier(CLK_LOCAL_MEM_FENCE);
            if (removed == 0 && !hybrid)
                break;
            int last = removed == 0 || pass >= cycles;
            az = em == EM_AZIMUTHAL || (hybrid && !last);
        }
        /* Integration of the kept pixels: (S, VV, O, O2, N) in a0..a4. Tiles of WG * IPT
         * entries, IPT consecutive ones per work-item: the work-item's own sums, one scan of
         * those across the work-group, then its entries in order from that prefix. */
        double vv = 0.0, n2 = 0.0, cnt = 0.0, s = 0.0, n = 0.0;
        double carry_s = 0.0, carry_o = 0.0;
        for (int base = k0; base < k1; base += WG * IPT) {
            const int kb = base + lid * IPT;
            float4 qv[IPT];
            double cv[IPT];
            double ts = 0.0, tw = 0.0;
            for (int j = 0; j < IPT; j++) {
                const int k = kb + j;
                float4 q = (float4)(0.0f);
                double c = 0.0;
                if (k < k1) {
                    c = sc_coef(coefs, k);
                    if (pass == 0) {
                        q = pre4[indices[k]];
                        if (c == 0.0 || !sc_ok(q))
                            q.s2 = 0.0f;
                        cpk[k] = q;
                    } else {
                        q = cpk[k];
                    }
                }
                qv[j] = q;
                cv[j] = c;
                if (sc_ok(q)) {
                    ts += c * (double)q.s0;
                    tw += c * (double)q.s2;
                }
            }
            /* Inclusive Hillis-Steele scan of the work-items' (ts, tw). */
            sa[lid] = ts;
            sb[lid] = tw;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int off = 1; off < WG; off <<= 1) {
                double ta = lid >= off ? sa[lid - off] : 0.0;
                double tb = lid >= off ? sb[lid - off] : 0.0;
                barrier(CLK_LOCAL_MEM_FENCE);
                sa[lid] += ta;
                sb[lid] += tb;
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            double s_a = carry_s + (lid > 0 ? sa[lid - 1] : 0.0);
            double o_a = carry_o + (lid > 0 ? sb[lid - 1] : 0.0);
            const double tile_s = sa[WG - 1], tile_o = sb[WG - 1];
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int j = 0; j < IPT; j++) {
                const float4 q = qv[j];
                if (!sc_ok(q))
                    continue;
                const double c = cv[j];
                const double cs = c * (double)q.s0, w = c * (double)q.s2;
                const double x = (double)q.s0 / (double)q.s2;
                if (az) {
                    if (o_a != 0.0) {
                        double delta1 = s_a / o_a - x;
                        double delta2 = (s_a + cs) / (o_a + w) - x;
                        vv += w * w * delta1 * delta2;
                    }
                } else {
                    s += cs;
                    vv += c * c * (double)q.s1;
                    n += w;
                }
                n2 += w * w;
                cnt += c * (double)q.s3;
                s_a += cs;
                o_a += w;
            }
            carry_s += tile_s;
            carry_o += tile_o;
        }
        /* Halving-tree sums of the five partial sums. */
        red[lid] = s;
        red[WG + lid] = vv;
        red[2 * WG + lid] = n;
        red[3 * WG + lid] = n2;
        red[4 * WG + lid] = cnt;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int w = WG / 2; w > 0; w >>= 1) {
            if (lid < w)
                for (int j = 0; j < 5; j++)
                    red[j * WG + lid] += red[j * WG + lid + w];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        a0 = az ? carry_s : red[0];
        a1 = red[WG];
        a2 = az ? carry_o : red[2 * WG];
        a3 = red[3 * WG];
        a4 = red[4 * WG];
        barrier(CLK_LOCAL_MEM_FENCE);
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
