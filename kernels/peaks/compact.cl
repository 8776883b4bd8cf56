/* peaks/compact.cl: ordered stream compaction of peak records, shared by the peak finders
 * (concatenated before pick_pyfai.cl or pf8_peaks.cl). Peak lists must not depend on the order
 * in which work-items run, and a list cut at its capacity must keep the *first* peaks (pixel
 * order for the pyfai picker, seed order for peakfinder8), so records are not appended through
 * a global atomic counter. Instead positions (in the list's order) are dealt to work-groups in
 * spans of PK_SPAN = PK_WG * PK_PPI consecutive positions:
 *   1. the finder marks its peaks in a flag byte per position and counts the peaks of every span
 *      (counts[span]);
 *   2. faid_pk_scan (one work-group) turns the counts into exclusive offsets and the total;
 *   3. the finder's write kernel (one work-group per span) returns at once for a span without
 *      peaks; elsewhere each flagged position gets its rank = span offset + rank in the span and,
 *      below the capacity, its record (recomputed by the function that decided it) written there.
 * Records are computed in parallel: one work-item computing them all in a row took 50-900 us
 * per frame on an H100 (a peakfinder8 seed is a chain of dependent loads).
 * Build-time constants: PK_WG (work-group size of the finder's pass, a power of two), PK_PPI
 * (positions per work-item of that pass), SCAN_WG (work-group size of faid_pk_scan), PK_SCAN_PF
 * (0, or N: faid_pk_scan loads a work-item's chunk of counts, when it has at most N, at once
 * into registers and writes the offsets from there, instead of a load per count in each of its
 * two loops; integer sums, so the same offsets: issue 17 round 3, FAID_PEAKS_KOPTS). */

#ifndef PK_WG
#define PK_WG 256
#endif
#ifndef PK_PPI
#define PK_PPI 4
#endif
#define PK_SPAN (PK_WG * PK_PPI)
#ifndef SCAN_WG
#define SCAN_WG 256
#endif
#ifndef PK_SCAN_PF
#define PK_SCAN_PF 0
#endif

/* Position of the j-th of this work-item's PK_PPI positions: consecutive work-items read
 * consecutive positions (coalesced loads), the span of a group is contiguous. */
static inline int pk_pos(int j)
{
    return (get_group_id(0) * PK_PPI + j) * PK_WG + get_local_id(0);
}

/* One work-group of SCAN_WG (faid_pk_scan): offsets[g] = sum of counts[0..g) for g <
 * ngroups, the sum of all (as the bits of an int) in out[out_off + 8 cap]. Each work-item scans
 * a contiguous chunk, a work-group scan joins them. */
kernel void faid_pk_scan(const global int *counts, const int ngroups, global int *offsets,
                         const int cap, global float *out, const int out_off)
{
    local int part[SCAN_WG];
    const int lid = get_local_id(0);
    const int chunk = (ngroups + SCAN_WG - 1) / SCAN_WG;
    const int g0 = min(lid * chunk, ngroups);
    const int g1 = min(g0 + chunk, ngroups);
    int s = 0;
#if PK_SCAN_PF > 0
    int cv[PK_SCAN_PF];
    const int inreg = chunk <= PK_SCAN_PF;
    if (inreg) {
#pragma unroll
        for (int u = 0; u < PK_SCAN_PF; u++)
            cv[u] = g0 + u < g1 ? counts[g0 + u] : 0;
#pragma unroll
        for (int u = 0; u < PK_SCAN_PF; u++)
            s += cv[u];
    } else
#endif
        for (int g = g0; g < g1; g++)
            s += counts[g];
    part[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < SCAN_WG; off <<= 1) {
        int a = lid >= off ? part[lid - off] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        part[lid] += a;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    int run = part[lid] - s;
#if PK_SCAN_PF > 0
    if (inreg) {
#pragma unroll
        for (int u = 0; u < PK_SCAN_PF; u++)
            if (g0 + u < g1) {
                offsets[g0 + u] = run;
                run += cv[u];
            }
    } else
#endif
        for (int g = g0; g < g1; g++) {
            offsets[g] = run;
            run += counts[g];
        }
    if (lid == SCAN_WG - 1)
        out[out_off + 8 * cap] = as_float(part[lid]);
}

/* Inclusive count of the set flags of work-items 0..lid of the work-group (PK_WG); the group's
 * total is then in scratch[PK_WG - 1] until the next call (callers read it, then barrier). */
static inline int pk_local_scan(local int *scratch, int flag)
{
    const int lid = get_local_id(0);
    scratch[lid] = flag;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < PK_WG; off <<= 1) {
        int a = lid >= off ? scratch[lid - off] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        scratch[lid] += a;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return scratch[lid];
}

/* The records' block at out + off: 8 arrays of cap values (x, y, intensity, sigma, snr,
 * max_pixel as floats; npix and index as the bits of ints), then the total (int bits): 8 cap + 1
 * floats, a segment of the engine's output buffer read back per frame. */
static inline void pk_store(global float *out, int cap, int rank, float x, float y,
                            float intensity, float sigma, float snr, float max_pixel, int npix,
                            int index)
{
    out[rank] = x;
    out[cap + rank] = y;
    out[2 * cap + rank] = intensity;
    out[3 * cap + rank] = sigma;
    out[4 * cap + rank] = snr;
    out[5 * cap + rank] = max_pixel;
    out[6 * cap + rank] = as_float(npix);
    out[7 * cap + rank] = as_float(index);
}

/* The write kernels (one work-group per span, the flag pass's layout) skip the spans without
 * peaks or beyond the capacity at once; in the others every work-item ranks its flagged
 * positions (pk_local_scan, row after row of the span) and computes its records, in parallel. */
