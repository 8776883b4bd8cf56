/* peaks/compact.cl: ordered stream compaction of peak records, shared by the peak finders
 * (concatenated before pick_pyfai.cl or pf8_peaks.cl). Peak lists must not depend on the order
 * in which work-items run, and a list cut at its capacity must keep the *first* peaks (pixel
 * order for the pyfai picker, seed order for peakfinder8), so records are not appended through
 * a global atomic counter. Instead positions (in the list's order) are dealt to work-groups in
 * spans of PK_SPAN = PK_WG * PK_PPI consecutive positions:
 *   1. the finder marks its peaks in a flag byte per position and counts the peaks of every span
 *      (counts[span]);
 *   2. one work-group (the finder's finish kernel) turns the counts into exclusive offsets and
 *      the total (pk_scan), then walks only the spans that hold peaks (pk_span_next), giving each
 *      flagged position its rank = span offset + rank in the span; a rank below the capacity
 *      gets its record (recomputed by the function that decided it) written there.
 * Step 2 reads the flag bytes of the few spans with peaks, 16 at a time, so its cost follows the
 * number of peaks, not the frame size (a full pass over a 4M frame cost 10-20 us per kernel).
 * Build-time constants: PK_WG (work-group size of the finder's pass, a power of two), PK_PPI
 * (positions per work-item of that pass), SCAN_WG (work-group size of the finish kernel). */

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

/* Position of the j-th of this work-item's PK_PPI positions: consecutive work-items read
 * consecutive positions (coalesced loads), the span of a group is contiguous. */
static inline int pk_pos(int j)
{
    return (get_group_id(0) * PK_PPI + j) * PK_WG + get_local_id(0);
}

/* offsets[g] = sum of counts[0..g) for g < ngroups, the sum of all (as the bits of an int) in
 * out[total_off]; run by every work-item of the finish kernel's one work-group, which sees the
 * offsets on return. Each work-item scans a contiguous chunk, a work-group scan joins them. */
static inline void pk_scan(local int *part, const global int *counts, int ngroups,
                           global int *offsets, global float *out, int total_off)
{
    const int lid = get_local_id(0);
    const int chunk = (ngroups + SCAN_WG - 1) / SCAN_WG;
    const int g0 = min(lid * chunk, ngroups);
    const int g1 = min(g0 + chunk, ngroups);
    int s = 0;
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
    for (int g = g0; g < g1; g++) {
        offsets[g] = run;
        run += counts[g];
    }
    if (lid == SCAN_WG - 1)
        out[total_off] = as_float(part[lid]);
    barrier(CLK_GLOBAL_MEM_FENCE);
}

/* The next position >= o, below o1, whose flag is `want`, or o1. Skips 16 zero bytes at a time
 * (span starts are multiples of PK_SPAN, the flag buffer is 64-byte aligned). */
static inline int pk_span_next(const global uchar *flag, int o, int o1, uchar want)
{
    while (o < o1) {
        if ((o & 15) == 0 && o + 16 <= o1) {
            uint4 v = vload4(0, (const global uint *)(flag + o));
            if ((v.x | v.y | v.z | v.w) == 0) {
                o += 16;
                continue;
            }
        }
        if (flag[o] == want)
            return o;
        o++;
    }
    return o1;
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

/* The walk of a finish kernel over the spans with peaks, written out in each finish kernel
 * (NVIDIA's OpenCL C 1.2 compiler refuses variadic macros, so the record's statements cannot be
 * passed to a macro):
 *     for (int g = get_local_id(0); g < ngroups; g += SCAN_WG) {
 *         int left = counts[g], rank = offsets[g];
 *         const int o1 = pk_span_end(g, npos);
 *         for (int o = g * PK_SPAN; left > 0 && rank < cap; o++, left--, rank++) {
 *             if ((o = pk_span_next(flag, o, o1, want)) >= o1)
 *                 break;
 *             ... the record of position o at rank ...
 *         }
 *     }
 * Each work-item takes every SCAN_WG-th span; within a span, flagged positions (flag == want)
 * come in order and get consecutive ranks from the span's offset, up to the capacity. */
static inline int pk_span_end(int g, int npos)
{
    return min((g + 1) * PK_SPAN, npos);
}
