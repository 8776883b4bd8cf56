/* peaks/compact.cl: ordered stream compaction of peak records, shared by the peak finders
 * (concatenated before pick_pyfai.cl or pf8_peaks.cl). Peak lists must not depend on the order
 * in which work-items run, and a list cut at its capacity must keep the *first* peaks (pixel
 * order for the pyfai picker, seed order for peakfinder8), so records are not appended through
 * a global atomic counter. Instead, with work-items laid out in the list's order:
 *   1. the finder's flag kernel decides every position (flag byte) and writes the number of
 *      peaks of its work-group (pk_group_count);
 *   2. faid_pk_scan (one work-group) turns the per-group counts into exclusive offsets and the
 *      total;
 *   3. the finder's write kernel gives every flagged position its rank = group offset + rank
 *      in the group (pk_local_rank) and, if the rank is below the capacity, recomputes its record
 *      (the same function as in step 1) and writes it there.
 * Build-time constant: PK_WG, the work-group size of steps 1 and 3 (a power of two). */

#ifndef PK_WG
#define PK_WG 256
#endif

/* Number of set flags in the work-group, written to counts[group] by work-item 0. */
static inline void pk_group_count(local int *scratch, int flag, global int *counts)
{
    const int lid = get_local_id(0);
    scratch[lid] = flag;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = PK_WG / 2; w > 0; w >>= 1) {
        if (lid < w)
            scratch[lid] += scratch[lid + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        counts[get_group_id(0)] = scratch[0];
}

/* Exclusive rank of this work-item's flag among the set flags of its work-group. */
static inline int pk_local_rank(local int *scratch, int flag)
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
    return scratch[lid] - flag;
}

/* One work-group of any power-of-two size SCAN_WG: offsets[g] = sum of counts[0..g), and the
 * sum of all, as the bits of an int, in out[total_off] (the records' block, see pk_store). Each
 * work-item scans a contiguous chunk, a work-group scan joins the chunks. */
#ifndef SCAN_WG
#define SCAN_WG 256
#endif
kernel void faid_pk_scan(const global int *counts, const int ngroups, global int *offsets,
                         global float *out, const int total_off)
{
    local int part[SCAN_WG];
    const int lid = get_local_id(0);
    const int chunk = (ngroups + SCAN_WG - 1) / SCAN_WG;
    const int g0 = lid * chunk;
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
