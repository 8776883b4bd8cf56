/* peaks/pf8_radial.cl: peakfinder8's radial statistics (algorithms.md §12.2, faid_pf8.h step 1),
 * one work-group of PF8_LANES (64) work-items per integer-radius bin; the 5 iterations of a bin
 * depend on that bin alone, so they all run inside one launch. The plain C reference is
 * faid_pf8_radial_ref (daemon/core/faid_pf8.c), which reduces in exactly this order: work-item l
 * sums the bin's entries l, l+64, ... in float64, then a halving tree adds the partial sums, so
 * both give the same thresholds bit for bit.
 *
 * Arguments: pre4 (float4 per pixel; value = signal .s0, usable when valid[i] and .s3 != 0),
 * valid (uchar per pixel), indptr/indices (the pixels of each bin, faid_pf8_bins), nbins,
 * min_snr, adc (adc_threshold); outputs roff and rthr (nbins floats). */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#define PF8_LANES 64
#define PF8_ITERATIONS 5

kernel void faid_pf8_radial(const global float4 *pre4, const global uchar *valid,
                            const global int *indptr, const global int *indices, const int nbins,
                            const float min_snr, const float adc, global float *roff,
                            global float *rthr)
{
    local double ls[PF8_LANES], ls2[PF8_LANES];
    local int lc[PF8_LANES];
    local float lhi, llo, loff;
    const int b = get_group_id(0);
    const int lid = get_local_id(0);
    if (b >= nbins)
        return;
    const int k0 = indptr[b], k1 = indptr[b + 1];
    if (lid == 0) {
        lhi = 1e9f;
        llo = -1e9f;
        loff = 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int it = 0; it < PF8_ITERATIONS; it++) {
        const float hi = lhi, lo = llo;
        double s = 0.0, s2 = 0.0;
        int cnt = 0;
        for (int k = k0 + lid; k < k1; k += PF8_LANES) {
            int i = indices[k];
            float4 q = pre4[i];
            float v = q.s0;
            if (valid[i] && q.s3 != 0.0f && v < hi && v > lo) {
                s += (double)v;
                s2 += (double)v * (double)v;
                cnt++;
            }
        }
        ls[lid] = s;
        ls2[lid] = s2;
        lc[lid] = cnt;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int w = PF8_LANES / 2; w > 0; w >>= 1) {
            if (lid < w) {
                ls[lid] += ls[lid + w];
                ls2[lid] += ls2[lid + w];
                lc[lid] += lc[lid + w];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (lid == 0) {
            if (lc[0] == 0) {
                loff = 0.0f;
                lhi = FLT_MAX;
                llo = FLT_MIN;
            } else {
                double mean = ls[0] / lc[0];
                double var = ls2[0] / lc[0] - mean * mean;
                double sig = var > 0.0 ? sqrt(var) : 0.0;
                float h = (float)(mean + min_snr * sig);
                loff = (float)mean;
                lhi = h < adc ? adc : h;
                llo = (float)(mean - min_snr * sig);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        roff[b] = loff;
        rthr[b] = lhi;
    }
}
