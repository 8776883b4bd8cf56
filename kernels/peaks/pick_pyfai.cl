/* peaks/pick_pyfai.cl: the pyFAI-style peak picker (algorithms.md §9, §10), one work-item per
 * pixel in pixel order, after compact.cl. The plain C reference is faid_pick_ref
 * (core/faid_pick.c); this file mirrors its float32 arithmetic statement by statement so
 * that both give the same bits (FP_CONTRACT OFF, correctly rounded sqrt, no fast-math).
 *
 * Kernels:
 *   faid_pick_flag    global size = npix rounded up to PK_SPAN, divided by PK_PPI; local size
 *                     PK_WG: decides every pixel (PK_PPI per work-item, coalesced), writes
 *                     flag[i] and the count of its span (compact.cl)
 *   faid_pick_write   after faid_pk_scan, one work-group per span: the records of the flagged
 *                     pixels whose rank < cap (spans without peaks return at once)
 * Arguments common to both: pre4 (float4 signal, variance, norm, count), radius (per pixel, NaN
 * = masked), radius1d (bin centres, uniform), bg + bg_off (sigma_clip.cl's output: mean then
 * std, nbins each), rows, cols, nbins,
 * rad_min, rad_max, cutoff (cutoff_peak), noise, hw (patch_size / 2), connected.
 *
 * PP_PREFETCH (0 unless FAID_PEAKS_KOPTS=-DPP_PREFETCH=1; issue 17, round 3, a latency variant):
 * faid_pick_flag loads radius, normp and raw of its PK_PPI pixels all at once before deciding any
 * of them (the kernel as measured walks them one after the other, each a chain radius -> bg and
 * normp -> raw), and a patch test (pixels above the threshold) loads each row of its patch at once
 * (2 hw + 1 neighbours) when hw <= PP_PF_HW (default 2: patch_size 3, the default, and 5, the
 * benchmark's), then sums them in the same order: the same statements on the same values, so the
 * same bits.
 * PP_WSCAN1 (0 unless FAID_PEAKS_KOPTS=-DPP_WSCAN1=1; round 3): faid_pick_write ranks the flags of
 * all PK_PPI (at most 4) rows of its span with one scan of 16-bit counters packed in a ulong
 * instead of one scan per row (16 barriers instead of 64): the same ranks, so the same lists.
 *
 * PP_CAND (0 unless FAID_PEAKS_KOPTS=-DPP_CAND=1; issue 17, round 5, "candidates first"): on the
 * benchmark's EIGER 4M frames (patch_size 5, connected 2, cutoff_peak 4, noise 1, azimuthal
 * background) 1,899-2,056 of the 4,485,690 pixels pass the first test (x > 0 and x >= cutoff
 * sigma: 0.044 %), in 1,440-1,492 of the 140,178 warps of 32 and 1,161-1,210 of the 4,381 spans,
 * and 25-29 are peaks (counted on the reference device, four frames). So the patch loop is not
 * what makes the flag pass 78 us against its 17-20 us floor (one H100): the pass over every
 * pixel is, and each of its work-items carried the patch loop's code between its pixels. With
 * PP_CAND, faid_pick_flag first decides the first test of its PK_PPI pixels alone (straight-line
 * code, no patch loop between them; with PP_CAND_PF=1 their radius, normp and raw loads issued
 * at once, as PP_PREFETCH), appending the candidates to a list in local memory (local atomics:
 * their order does not matter, each is decided alone), then its work-items run the patch test of
 * the list's candidates (k = lid, lid + PK_WG, ...: no lane waits on a non-candidate), marking
 * the peaks in local memory. It writes no flag byte (4.5 MB of the pass's 58 MB): a span with
 * peaks (about 27 of 4,381) gets the sorted list of its peaks' positions in the span (ushort,
 * in pk.flag, 2 bytes per position: the host sizes it from the option), and faid_pick_write
 * then computes record k of span g from entry k, without ranking the span's 1,024 flags (its 4
 * scans of 16 barriers each, 24 us with its scan before it). The same function decides every
 * pixel, the same offsets rank the peaks (pixel order), so the same lists.
 * PP_MERGE (0 unless FAID_PEAKS_KOPTS=-DPP_MERGE=1, which also drops the faid_pk_scan launch on
 * the host: 8 us of the 111 on one H100; round 5): faid_pick_write finds its span's offset
 * itself, the sum of counts[0..g) (integer sums: any order gives the same), and group 0 writes
 * the total, as peakfinder8's PF8_WSCAN (its default since round 4's H100 run). */
#pragma OPENCL FP_CONTRACT OFF

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
#ifndef PP_PREFETCH
#define PP_PREFETCH 0
#endif
#ifndef PP_PF_HW
#define PP_PF_HW 2
#endif
#ifndef PP_WSCAN1
#define PP_WSCAN1 0
#endif
#ifndef PP_CAND
#define PP_CAND 0
#endif
#ifndef PP_CAND_PF
#define PP_CAND_PF 0
#endif
#ifndef PP_MERGE
#define PP_MERGE 0
#endif
/* PP_PREFETCH: a pixel's float4 with its loads independent of each other (written when
 * faid_pixel read raw only where normp was not 0; since round 8 it reads both at once too) */
#ifdef PK_FUSED
#define PP_PIXEL_NB(i)                                                                         \
    faid_pixel_v(normp[(i)], (float)((const global raw_t *)raw + raw_off)[(i)],              \
                 do_dark ? dark[(i)] : 0.0f, do_dark, do_dummy, dummy, delta_dummy)
#else
#define PP_PIXEL_NB(i) pre4[(i)]
#endif
#define PK_RAW_PARAMS                                                                          \
    const global uchar *raw, const global float *dark, const global float *normp,              \
        const uint raw_off, const int do_dark, const int do_dummy, const float dummy,          \
        const float delta_dummy
#define PK_RAW_PASS raw, dark, normp, raw_off, do_dark, do_dummy, dummy, delta_dummy

/* (value, sigma) of an in-image pixel from its radius and its float4's signal s0 and norm s2 */
static inline float2 pp_from(float rad, float s0, float s2, const global float *radius1d,
                             const global float *bg_mean, const global float *bg_std, int nb,
                             float rad_min, float rad_max, float noise)
{
    float background = INFINITY, uncert = 0.0f;
    if (isfinite(rad) && rad >= rad_min && rad < rad_max) {
        float step = radius1d[1] - radius1d[0];
        float pos = (rad - radius1d[0]) / step;
        pos = pos < 0.0f ? 0.0f : (pos > (float)(nb - 1) ? (float)(nb - 1) : pos);
        int k = (int)pos;
        if (k + 1 < nb) {
            float f = pos - (float)k;
            background = bg_mean[k] * (1.0f - f) + bg_mean[k + 1] * f;
            uncert = bg_std[k] * (1.0f - f) + bg_std[k + 1] * f;
        } else {
            background = bg_mean[nb - 1];
            uncert = bg_std[nb - 1];
        }
    }
    float v = s2 > 0.0f ? s0 / s2 - background : 0.0f;
    return (float2)(v, sqrt(uncert * uncert + noise * noise));
}

static inline float2 pp_value(const global float4 *pre4, const global float *radius,
                              const global float *radius1d, const global float *bg_mean,
                              const global float *bg_std, int rows, int cols, int nb,
                              float rad_min, float rad_max, float noise, PK_RAW_PARAMS, int r,
                              int c)
{
    if (r < 0 || r >= rows || c < 0 || c >= cols)
        return (float2)(-1.0f, 0.0f);
    int i = r * cols + c;
    float rad = radius[i];
    float4 q = PK_PIXEL(i);
    return pp_from(rad, q.s0, q.s2, radius1d, bg_mean, bg_std, nb, rad_min, rad_max, noise);
}

#define PP_ARGS                                                                                \
    const global float4 *pre4, const global float *radius, const global float *radius1d,       \
        const global float *bg, const int bg_off, const int rows, const int cols,              \
        const int nb, const float rad_min, const float rad_max,                \
        const float cutoff, const float noise, const int hw, const int connected,         \
        PK_RAW_PARAMS
#define PP_PASS pre4, radius, radius1d, bg + bg_off, bg + bg_off + nb, rows, cols, nb, rad_min, rad_max
#define PP_DPASS pre4, radius, radius1d, bg, bg_off, rows, cols, nb, rad_min, rad_max

/* Neighbour (i, j) of a patch, of value and sigma y, taken into pp_decide_x's sums (active,
 * local_max, m0, m1, sum, sum_var): the one place of those statements for both of its walks, in
 * their order, so the same bits. A neighbour outside the image or masked refuses the patch
 * (active -1) and leaves the walk's inner loop (break). A macro, not a function, so that the
 * statements are the kernel's own, as measured. */
#define PP_TAKE(y, i, j)                                                                       \
    if ((y).s0 > 0.0f) {                                                                       \
        if ((y).s0 >= cutoff * (y).s1)                                                         \
            active++;                                                                          \
        local_max = fmax(local_max, (y).s0);                                                   \
        m0 += (float)(i) * (y).s0;                                                             \
        m1 += (float)(j) * (y).s0;                                                             \
        sum += (y).s0;                                                                         \
        sum_var += (y).s1 * (y).s1;                                                            \
    } else if ((y).s1 <= 0.0f) {                                                               \
        active = -1;                                                                           \
        break;                                                                                 \
    }

/* 1 and the record (x, y, intensity, sigma, max, npix) when pixel (r, c), of value and sigma x,
 * is a peak. */
static int pp_decide_x(PP_ARGS, float2 x, int r, int c, float *rec, int *npix)
{
    if (!(x.s0 > 0.0f && x.s0 >= cutoff * x.s1))
        return 0;
    int active = 0;
    float local_max = x.s0, sum = 0.0f, sum_var = 0.0f, m0 = 0.0f, m1 = 0.0f;
#if PP_PREFETCH
    if (hw <= PP_PF_HW) {
        /* row by row: the row's 2 hw + 1 neighbours loaded at once, then the loop below's
         * statements in its order */
        for (int i = -hw; i <= hw && active >= 0; i++) {
            float nrad[2 * PP_PF_HW + 1];
            float4 nq[2 * PP_PF_HW + 1];
            const int rin = r + i >= 0 && r + i < rows;
#pragma unroll
            for (int j = -PP_PF_HW; j <= PP_PF_HW; j++) {
                const int in = rin && j >= -hw && j <= hw && c + j >= 0 && c + j < cols;
                const int p = in ? (r + i) * cols + c + j : 0;
                nrad[j + PP_PF_HW] = in ? radius[p] : 0.0f;
                nq[j + PP_PF_HW] = in ? PP_PIXEL_NB(p) : (float4)(0.0f);
            }
            /* over the constant range, so that the arrays are indexed by constants (registers,
             * not stack memory); the same j from -hw to hw in the same order */
#pragma unroll
            for (int j = -PP_PF_HW; j <= PP_PF_HW; j++) {
                if (j < -hw || j > hw)
                    continue;
                const int in = rin && c + j >= 0 && c + j < cols;
                float2 y = in ? pp_from(nrad[j + PP_PF_HW], nq[j + PP_PF_HW].s0,
                                        nq[j + PP_PF_HW].s2, radius1d, bg + bg_off,
                                        bg + bg_off + nb, nb, rad_min, rad_max, noise)
                              : (float2)(-1.0f, 0.0f);
                PP_TAKE(y, i, j)
            }
        }
    } else
#endif
    for (int i = -hw; i <= hw && active >= 0; i++) {
        for (int j = -hw; j <= hw; j++) {
            float2 y = pp_value(PP_PASS, noise, PK_RAW_PASS, r + i, c + j);
            PP_TAKE(y, i, j)
        }
    }
    if (!(x.s0 == local_max && active >= connected))
        return 0;
    rec[0] = m1 / sum + (float)c;
    rec[1] = m0 / sum + (float)r;
    rec[2] = sum;
    rec[3] = sqrt(sum_var);
    rec[4] = x.s0;
    *npix = active;
    return 1;
}

/* 1 and the record (x, y, intensity, sigma, max, npix) when pixel (r, c) is a peak. */
static int pp_decide(PP_ARGS, int r, int c, float *rec, int *npix)
{
    float2 x = pp_value(PP_PASS, noise, PK_RAW_PASS, r, c);
    return pp_decide_x(PP_DPASS, cutoff, noise, hw, connected, PK_RAW_PASS, x, r, c, rec, npix);
}

/* Kernel signatures are spelt out (no PP_ARGS) so that the engine's program cache can read their
 * parameter names. */
kernel void faid_pick_flag(const global float4 *pre4, const global float *radius,
                           const global float *radius1d, const global float *bg, const int bg_off,
                           const int rows, const int cols, const int nb, const float rad_min,
                           const float rad_max, const float cutoff, const float noise,
                           const int hw, const int connected, global uchar *flag,
                           global int *counts,
                           const global uchar *raw, const global float *dark,
                           const global float *normp, const uint raw_off, const int do_dark,
                           const int do_dummy, const float dummy, const float delta_dummy)
{
    local int n;
    if (get_local_id(0) == 0)
        n = 0;
#if PP_CAND
    /* candidates first (PP_CAND above): positions of the span's candidates (any order), the
     * span's peaks (position p = j PK_WG + lid of pixel pk_pos(j)) */
    local ushort lcand[PK_SPAN];
    local uchar lpeak[PK_SPAN];
    local int ncand, scratch[PK_WG];
    const int lid = get_local_id(0), g = get_group_id(0), npx = rows * cols;
    if (lid == 0)
        ncand = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
#if PP_CAND_PF
    float prad[PK_PPI];
    float4 pq[PK_PPI];
#pragma unroll
    for (int j = 0; j < PK_PPI; j++) {
        const int i = pk_pos(j);
        const int in = i < npx;
        prad[j] = in ? radius[i] : 0.0f;
        pq[j] = in ? PP_PIXEL_NB(i) : (float4)(0.0f);
    }
#endif
#pragma unroll
    for (int j = 0; j < PK_PPI; j++) {
        const int i = pk_pos(j);
        lpeak[j * PK_WG + lid] = 0;
        if (i < npx) {
            /* pp_value's statements for an in-image pixel, then pp_decide_x's first test */
#if PP_CAND_PF
            const float2 x = pp_from(prad[j], pq[j].s0, pq[j].s2, radius1d, bg + bg_off,
                                     bg + bg_off + nb, nb, rad_min, rad_max, noise);
#else
            const float rad = radius[i];
            const float4 q = PK_PIXEL(i);
            const float2 x = pp_from(rad, q.s0, q.s2, radius1d, bg + bg_off, bg + bg_off + nb, nb,
                                     rad_min, rad_max, noise);
#endif
            if (x.s0 > 0.0f && x.s0 >= cutoff * x.s1)
                lcand[atomic_inc(&ncand)] = (ushort)(j * PK_WG + lid);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int nc = ncand;
    for (int k = lid; k < nc; k += PK_WG) {
        const int p = lcand[k];
        const int i = g * PK_SPAN + p;
        float rec[5];
        int npix;
        if (pp_decide(PP_DPASS, cutoff, noise, hw, connected, PK_RAW_PASS, i / cols, i % cols,
                      rec, &npix)) {
            lpeak[p] = 1;
            atomic_inc(&n);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int np = n; /* the same in every work-item: the branch below is the group's */
    if (np > 0) {
        /* the peaks' positions in order: work-item lid ranks its PK_PPI from lid PK_PPI on */
        int s = 0;
        for (int t = 0; t < PK_PPI; t++)
            s += lpeak[lid * PK_PPI + t];
        int r = pk_local_scan(scratch, s) - s;
        global ushort *plist = (global ushort *)flag + g * PK_SPAN;
        for (int t = 0; t < PK_PPI; t++)
            if (lpeak[lid * PK_PPI + t])
                plist[r++] = (ushort)(lid * PK_PPI + t);
    }
    if (lid == 0)
        counts[g] = np;
#else
    barrier(CLK_LOCAL_MEM_FENCE);
#if PP_PREFETCH
    /* every pixel's loads first (pp_value's, in the same order of operations after them) */
    float prad[PK_PPI];
    float4 pq[PK_PPI];
#pragma unroll
    for (int j = 0; j < PK_PPI; j++) {
        const int i = pk_pos(j);
        const int in = i < rows * cols;
        prad[j] = in ? radius[i] : 0.0f;
        pq[j] = in ? PP_PIXEL_NB(i) : (float4)(0.0f);
    }
#pragma unroll
    for (int j = 0; j < PK_PPI; j++) {
        const int i = pk_pos(j);
        if (i < rows * cols) {
            float rec[5];
            int npix;
            const float2 x = pp_from(prad[j], pq[j].s0, pq[j].s2, radius1d, bg + bg_off,
                                     bg + bg_off + nb, nb, rad_min, rad_max, noise);
            int f = pp_decide_x(PP_DPASS, cutoff, noise, hw, connected, PK_RAW_PASS, x, i / cols,
                                i % cols, rec, &npix);
            flag[i] = (uchar)f;
            if (f)
                atomic_inc(&n);
        }
    }
#else
    for (int j = 0; j < PK_PPI; j++) {
        const int i = pk_pos(j);
        if (i < rows * cols) {
            float rec[5];
            int npix;
            /* pp_value's statements for the in-image pixel i, and its row and column (an integer
             * division: about 30 instructions of the pass's 190 per pixel in round 8's profile)
             * only for a pixel that passes pp_decide_x's first test: the same decision */
            const float rad = radius[i];
            const float4 q = PK_PIXEL(i);
            const float2 x = pp_from(rad, q.s0, q.s2, radius1d, bg + bg_off, bg + bg_off + nb, nb,
                                     rad_min, rad_max, noise);
            int f = 0;
            if (x.s0 > 0.0f && x.s0 >= cutoff * x.s1)
                f = pp_decide_x(PP_DPASS, cutoff, noise, hw, connected, PK_RAW_PASS, x, i / cols,
                                i % cols, rec, &npix);
            flag[i] = (uchar)f;
            if (f)
                atomic_inc(&n);
        }
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0)
        counts[get_group_id(0)] = n;
#endif
}

/* The offset of span g in the list: offsets[g] (faid_pk_scan's), or with PP_MERGE the sum of
 * counts[0..g) found here by the work-group (red: PK_WG ints of local memory), group 0 summing
 * all of them for the total at out[8 cap]; -1 when the span writes nothing (no peaks, or all of
 * them past the capacity). */
static inline int pp_span_base(const global int *counts, const global int *offsets,
                               const int ngroups, const int cap, global float *out, local int *red)
{
    const int g = get_group_id(0);
#if PP_MERGE
    if (g != 0 && counts[g] == 0)
        return -1; /* the group's branch: counts[g] is the same for all its work-items */
    const int lid = get_local_id(0), upto = g == 0 ? ngroups : g;
    int s = 0;
    for (int k = lid; k < upto; k += PK_WG)
        s += counts[k];
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = PK_WG / 2; w > 0; w >>= 1) {
        if (lid < w)
            red[lid] += red[lid + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int sum = red[0];
    if (g == 0 && lid == 0)
        out[8 * cap] = as_float(sum);
    const int base = g == 0 ? 0 : sum;
#else
    (void)ngroups;
    (void)out;
    (void)red;
    const int base = offsets[g];
#endif
    return counts[g] == 0 || base >= cap ? -1 : base;
}

/* One work-group per span (compact.cl): the records of the flagged pixels whose rank < cap. */
kernel void faid_pick_write(const global float4 *pre4, const global float *radius,
                            const global float *radius1d, const global float *bg,
                            const int bg_off, const int rows, const int cols, const int nb,
                            const float rad_min, const float rad_max, const float cutoff,
                            const float noise, const int hw, const int connected,
                            const global uchar *flag, const global int *counts,
                            const global int *offsets, const int cap, global float *out,
                            const int out_off, const int ngroups,
                            const global uchar *raw, const global float *dark,
                            const global float *normp, const uint raw_off, const int do_dark,
                            const int do_dummy, const float dummy, const float delta_dummy)
{
#if PP_MERGE
    local int red[PK_WG];
#else
    local int red[1]; /* unused */
#endif
    const int span_base = pp_span_base(counts, offsets, ngroups, cap, out + out_off, red);
    if (span_base < 0)
        return;
#if PP_CAND
    /* record k of span g from entry k of the span's sorted list (faid_pick_flag, PP_CAND) */
    const int g = get_group_id(0);
    const int base = span_base, cnt = counts[g];
    if (cnt == 0 || base >= cap)
        return;
    const global ushort *plist = (const global ushort *)flag + g * PK_SPAN;
    for (int k = get_local_id(0); k < cnt && base + k < cap; k += PK_WG) {
        const int i = g * PK_SPAN + plist[k];
        float rec[5];
        int npix;
        pp_decide(PP_DPASS, cutoff, noise, hw, connected, PK_RAW_PASS, i / cols, i % cols, rec,
                  &npix);
        pk_store(out + out_off, cap, base + k, rec[0], rec[1], rec[2], rec[3], rec[2] / rec[3],
                 rec[4], npix, i);
    }
#elif PP_WSCAN1 && PK_PPI <= 4
    local ulong pscan[PK_WG];
    const int g = get_group_id(0);
    const int base = span_base;
    if (counts[g] == 0 || base >= cap)
        return;
    const int lid = get_local_id(0);
    ulong v = 0;
    for (int j = 0; j < PK_PPI; j++) {
        const int i = pk_pos(j);
        if (i < rows * cols && flag[i] == 1)
            v |= 1ul << (16 * j);
    }
    /* inclusive scan of the packed counters (each at most PK_WG <= 65535: no carry between
     * them) */
    pscan[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < PK_WG; off <<= 1) {
        const ulong a = lid >= off ? pscan[lid - off] : 0ul;
        barrier(CLK_LOCAL_MEM_FENCE);
        pscan[lid] += a;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const ulong incl = pscan[lid], tot = pscan[PK_WG - 1];
    int before = base; /* the flags of the span's rows before row j */
    for (int j = 0; j < PK_PPI; j++) {
        const int f = (int)((v >> (16 * j)) & 1ul);
        const int rank = before + (int)((incl >> (16 * j)) & 0xfffful) - 1;
        before += (int)((tot >> (16 * j)) & 0xfffful);
        const int i = pk_pos(j);
        if (f && rank < cap) {
            float rec[5];
            int npix;
            pp_decide(PP_DPASS, cutoff, noise, hw, connected, PK_RAW_PASS, i / cols, i % cols,
                      rec, &npix);
            pk_store(out + out_off, cap, rank, rec[0], rec[1], rec[2], rec[3], rec[2] / rec[3],
                     rec[4], npix, i);
        }
    }
#else
    local int scratch[PK_WG];
    const int g = get_group_id(0);
    int base = span_base;
    if (counts[g] == 0 || base >= cap)
        return;
    for (int j = 0; j < PK_PPI; j++) {
        const int i = pk_pos(j);
        const int f = i < rows * cols && flag[i] == 1;
        const int rank = base + pk_local_scan(scratch, f) - 1;
        base += scratch[PK_WG - 1];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (f && rank < cap) {
            float rec[5];
            int npix;
            pp_decide(PP_DPASS, cutoff, noise, hw, connected, PK_RAW_PASS, i / cols, i % cols,
                      rec, &npix);
            pk_store(out + out_off, cap, rank, rec[0], rec[1], rec[2], rec[3], rec[2] / rec[3],
                     rec[4], npix, i);
        }
    }
#endif
}
