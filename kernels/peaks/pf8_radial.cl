/* peaks/pf8_radial.cl: peakfinder8's per-pixel values and radial statistics (algorithms.md
 * §12.2, faid_pf8.h step 1).
 *
 * faid_pf8_prep, one work-item per pixel in image order (coalesced): the value of every pixel,
 * v = pre4.s0 when it is usable (valid[i] and pre4.s3 != 0), else NaN, written twice: img[i]
 * (image order, what pf8_peaks.cl reads instead of the 16-byte pre4 and the validity byte) and
 * cval[pos_of[i]] (the pixel's entry in the bins' order, faid_pf8_bins). NaN fails every
 * comparison, so "usable and v > t" and "v > t" agree, and so do the window tests. Work-items
 * below nzero also clear zero[] (the finder's per-frame counters).
 *
 * faid_pf8_radial, one work-group of PF8_LANES (FAID_PF8_LANES, 64) work-items per
 * integer-radius bin, reads the bin's values contiguously from cval, 5 times (the 5 iterations
 * of a bin depend on that bin alone, so they all run inside one launch; a bin's values stay in
 * cache across them). Before, every iteration gathered the 16-byte pre4 of each pixel through
 * the index list: 935 us per 4M frame on an H200 for the whole finder. The plain C reference is
 * faid_pf8_radial_ref (core/faid_pf8.c), which reduces in exactly this order: work-item l
 * sums the bin's entries l, l+PF8_LANES, ... in float64, then a halving tree adds the partial
 * sums, so both give the same thresholds bit for bit.
 *
 * Arguments: pre4 (float4 per pixel), valid (uchar per pixel), pos_of (the entry of each pixel
 * in the bins' order), npix; cval (npix values in the bins' order), indptr (the bins' entry
 * ranges), nbins, min_snr, adc (adc_threshold); outputs img, cval, roff and rthr (nbins
 * floats). */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

/* PF8_GATHER=1 (issue 17, round 4; the host's FAID_PF8_GATHER=1, off by default until a GPU run
 * decides): faid_pf8_prep writes img alone (round 3's H100 run: prep 75 us against a 28 us floor,
 * its cval[pos_of[i]] stores scattered over the bins), and faid_pf8_radial's first iteration reads
 * each entry's value from img through the bins' index list (indices, in pixel order within a bin)
 * and keeps it in cval[k] for the four others, read back by the work-item that wrote it: the same
 * values in the same lanes and order, so the same thresholds bit for bit. */
#ifndef PF8_GATHER
#define PF8_GATHER 0
#endif
/* PF8_NOPREP=1 (the host's FAID_PF8_NOPREP=1, which drops the faid_pf8_prep launch; off until a
 * GPU run decides): faid_pf8_radial's first iteration computes each entry's value itself from
 * the pixel it names (PK_PIXEL and the validity byte, as faid_pf8_prep) and writes it to both
 * cval[k] and img[i]; its work-items also clear zero[]. The same values, lanes and order as
 * above: the same thresholds; one launch less, the image-order stores scattered instead. */
#ifndef PF8_NOPREP
#define PF8_NOPREP 0
#endif

/* PF8_PREP4=1 (FAID_PEAKS_KOPTS=-DPF8_PREP4=1, issue 17 round 5, off until a GPU run decides; the
 * host launches a quarter of the work-items): faid_pf8_prep decides 4 pixels per work-item,
 * pixel (4 group + j) local size + lid (coalesced), every load of the 4 (normp, raw, dark,
 * valid, pos_of) issued before any value is used. What the prep moves per pixel (fused):
 * normp 4 + raw 4 + valid 1 + pos_of 4 bytes read, img 4 + cval 4 written = 21 B, 94 MB for an
 * EIGER 4M, 28 us at 3.35 TB/s; measured 69 us on one H100 with one pixel per work-item (14
 * registers), whose loads are two chains (normp, then raw where normp is not 0; pos_of, then
 * the scattered store; since round 8 faid_pixel issues normp's and raw's loads together). The
 * same values in the same places. */
#ifndef PF8_PREP4
#define PF8_PREP4 0
#endif
/* PF8_BANDN = R x cols (the host's, from FAID_PEAKS_KOPTS=-DPF8_BAND=R; 0: off; round 5, off
 * until a GPU run decides): faid_pf8_prep takes a band of R whole rows per work-group. The prep's
 * cval[pos_of[i]] stores are what costs: peakfinder8's bins are rings one pixel wide, so 32
 * consecutive pixels of a row fall in about 20 bins and their entries in about 21 separate
 * 32-byte sectors of cval (EIGER 4M: 2,992,128 sectors for 140,178 warps, 5.3x the 560,712 of a
 * coalesced store: about 96 MB of the prep's 172 MB). A bin's entries are in pixel order, so
 * the entries of a band's pixels in a bin are consecutive in cval: the work-group writes each
 * band pixel's value into local memory (and img, coalesced), then stores cval in the bins'
 * order, entry t of the band from bvals[bperm[t]] to cval[baddr[t]] (two static tables of the
 * setup, in the band's entry order: the pixel's place in the band, its entry), runs of
 * consecutive addresses: 1,672,287 sectors with R = 1, 1,170,841 with 2, 913,919 with 4
 * (1.6x), 788,873 with 8 (counted from the EIGER 4M's bins). The same value into the same
 * entry: the same cval and img. */
#ifndef PF8_BANDN
#define PF8_BANDN 0
#endif

#ifndef PF8_LANES
#define PF8_LANES 64 /* = FAID_PF8_LANES, passed by the host */
#endif
#define PF8_ITERATIONS 5

/* A pixel's float4 (signal, variance, norm, count): read from the preprocessed frame pre4, or,
 * built with PK_FUSED (issue 17: the Poisson preprocess folded into the reads), computed from the
 * raw frame by faid_pixel, the function of faid_preprocess (process/preprocess.cl, concatenated
 * before this file, built with EM=1): the same bits without writing and re-reading a 16-byte
 * copy of every pixel. The raw-side parameters are the preprocess kernel's, in every build. */
#ifdef PK_FUSED
#define PK_PIXEL(i)                                                                            \
    faid_pixel((const global raw_t *)raw + raw_off, dark, normp, (uint)(i), do_dark, do_dummy, \
               dummy, delta_dummy)
#else
#define PK_PIXEL(i) pre4[(i)]
#endif
/* PF8_PREP4: a pixel's float4 with its loads independent of each other (above) */
#ifdef PK_FUSED
#define PF8_PIXEL_NB(i)                                                                        \
    faid_pixel_v(normp[(i)], (float)((const global raw_t *)raw + raw_off)[(i)],              \
                 do_dark ? dark[(i)] : 0.0f, do_dark, do_dummy, dummy, delta_dummy)
#else
#define PF8_PIXEL_NB(i) pre4[(i)]
#endif

kernel void faid_pf8_prep(const global float4 *pre4, const global uchar *valid,
                          const global int *pos_of, const int npix, global float *img,
                          global float *cval, global int *zero, const int nzero,
                          const global uchar *raw, const global float *dark,
                          const global float *normp, const uint raw_off, const int do_dark,
                          const int do_dummy, const float dummy, const float delta_dummy,
                          const global ushort *bperm, const global int *baddr)
{
#if PF8_BANDN > 0 && !PF8_GATHER
    local float bvals[PF8_BANDN];
    for (int z = get_global_id(0); z < nzero; z += get_global_size(0))
        zero[z] = 0;
    const int lid = get_local_id(0), ls = get_local_size(0);
    const int b0 = get_group_id(0) * PF8_BANDN;
    const int n = min(PF8_BANDN, npix - b0);
    /* 4 pixels a round, every load of the 4 issued before any value is used */
    for (int p0 = lid; p0 < n; p0 += 4 * ls) {
        float4 pq[4];
        uchar pv[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int i = p0 + j * ls < n ? b0 + p0 + j * ls : b0; /* the band's first stands in */
            pq[j] = PF8_PIXEL_NB(i);
            pv[j] = valid[i];
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int p = p0 + j * ls;
            if (p < n) {
                const float v = pv[j] && pq[j].s3 != 0.0f ? pq[j].s0 : NAN;
                img[b0 + p] = v;
                bvals[p] = v;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = lid; t < n; t += ls)
        cval[baddr[b0 + t]] = bvals[bperm[b0 + t]];
#elif PF8_PREP4
    for (int z = get_global_id(0); z < nzero; z += get_global_size(0))
        zero[z] = 0;
    const int ls = get_local_size(0), i0 = get_group_id(0) * 4 * ls + get_local_id(0);
    float4 pq[4];
    uchar pv[4];
#if !PF8_GATHER
    int pp[4];
#endif
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int p = i0 + j * ls < npix ? i0 + j * ls : 0; /* pixel 0 stands in past the end */
        pq[j] = PF8_PIXEL_NB(p);
        pv[j] = valid[p];
#if !PF8_GATHER
        pp[j] = pos_of[p];
#endif
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int i = i0 + j * ls;
        if (i < npix) {
            const float v = pv[j] && pq[j].s3 != 0.0f ? pq[j].s0 : NAN;
            img[i] = v;
#if !PF8_GATHER
            cval[pp[j]] = v;
#endif
        }
    }
#else
    const int i = get_global_id(0);
    if (i < nzero)
        zero[i] = 0;
    if (i >= npix)
        return;
    const float4 q = PK_PIXEL(i);
    const float v = valid[i] && q.s3 != 0.0f ? q.s0 : NAN;
    img[i] = v;
#if !PF8_GATHER
    cval[pos_of[i]] = v;
#endif
#endif
}

kernel void faid_pf8_radial(global float *cval, const global int *indptr, const int nbins,
                            const float min_snr, const float adc, global float *roff,
                            global float *rthr, global float *img, const global int *indices,
                            const global float4 *pre4, const global uchar *valid,
                            global int *zero, const int nzero, const global uchar *raw,
                            const global float *dark, const global float *normp,
                            const uint raw_off, const int do_dark, const int do_dummy,
                            const float dummy, const float delta_dummy)
{
    local double ls[PF8_LANES], ls2[PF8_LANES];
    local int lc[PF8_LANES];
    local float lhi, llo, loff;
    const int b = get_group_id(0);
    const int lid = get_local_id(0);
#if PF8_NOPREP
    for (int z = get_global_id(0); z < nzero; z += get_global_size(0))
        zero[z] = 0;
#endif
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
#if PF8_NOPREP
            float v;
            if (it == 0) {
                const int i = indices[k];
                const float4 q = PK_PIXEL(i);
                v = valid[i] && q.s3 != 0.0f ? q.s0 : NAN;
                img[i] = v;
                cval[k] = v;
            } else {
                v = cval[k];
            }
#elif PF8_GATHER
            float v;
            if (it == 0) {
                v = img[indices[k]];
                cval[k] = v;
            } else {
                v = cval[k];
            }
#else
            const float v = cval[k];
#endif
            if (v < hi && v > lo) {
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
