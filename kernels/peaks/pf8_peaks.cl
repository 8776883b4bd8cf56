/* peaks/pf8_peaks.cl: peakfinder8's candidate peaks, local background and acceptance
 * (algorithms.md §12.3-§12.5, faid_pf8.h steps 2-4), after compact.cl. Positions are laid out
 * in seed order (panel by panel, then rows, then columns), so that the ordered compaction of
 * compact.cl yields OM's order and cut. The per-seed function mirrors pf8_seed of
 * core/faid_pf8.c statement by statement (float32 in OM's order, FP_CONTRACT OFF,
 * correctly rounded division and sqrt), so lists are bit-identical to the reference. Pixel
 * values come from img (pf8_radial.cl's faid_pf8_prep: the signal, NaN where not usable).
 *
 * Connected components without a global labelling pass: a pixel is a seed when it is an interior
 * above-threshold pixel, none of its four earlier neighbours is one, and the flood fill from it
 * (OM's neighbour order) meets no earlier interior pixel of its component. Components of more
 * than max_pixel_count pixels are rejected (as OM does), so the fill stops there: a work-item
 * visits at most PF8_MAXQ pixels, kept in a private queue.
 *
 * Build-time constants: PF8_MAXQ (= max_pixel_count), PK_WG, PK_PPI, SCAN_WG (compact.cl).
 * Kernels, one lane after the other on one queue:
 *   faid_pf8_cand    PK_PPI positions per work-item (global size npos rounded up to PK_SPAN,
 *                    divided by PK_PPI): the cheap tests (interior, above threshold, no earlier
 *                    interior above-threshold neighbour), flag[o] = 1 for a candidate, whose
 *                    position is appended to cand[] (ncand = counts[ngroups], one atomic each:
 *                    candidates are a few per thousand pixels)
 *   faid_pf8_fill    a fixed grid walking cand[]: the flood fill, background and acceptance of
 *                    the candidates only; an accepted seed gets flag[o] = 2 and counts its span
 *                    (counts[] cleared by faid_pf8_prep)
 *   faid_pk_scan     (compact.cl) offsets and total
 *   faid_pf8_write   one work-group per span: the records of the first cap accepted seeds
 * (PF8_CANDFILL: faid_pf8_cand does the fill's work, no fill launch; PF8_WSCAN: the write does
 * the scan's, no scan launch; below.) */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#ifndef PF8_MAXQ
#define PF8_MAXQ 200
#endif
/* Issue 17 variants, build options (FAID_PEAKS_KOPTS), on by default since the GPU run (one H100,
 * EIGER 4M: peakfinder8's find 414 us a frame with both, 698 us without, docs/PERFORMANCE.md);
 * =0 selects the kernels before. Both give the same lists bit for bit (the fill visits the same
 * pixels in the same order):
 *   PF8_HASH=1        the fill's "already queued" test through an open-addressing table of the
 *                     queue's pixels once the queue holds PF8_HSTART of them (a linear scan of
 *                     the queue before: O(n^2) per component, a long chain for one work-item
 *                     when a spot has a hundred pixels above threshold)
 *   PF8_LOCAL_CAND=1  faid_pf8_cand appends a work-group's candidates in local memory and
 *                     reserves their place in cand[] with one global atomic per work-group
 *                     (one per candidate before); cand[]'s order never mattered (the fill marks
 *                     flags, the write kernel ranks them in position order) */
#ifndef PF8_HASH
#define PF8_HASH 1
#endif
#ifndef PF8_LOCAL_CAND
#define PF8_LOCAL_CAND 1
#endif
/* Issue 17, round 4 variants (build options through FAID_PEAKS_KOPTS, off by default until a GPU
 * run decides; the same lists bit for bit: the same function decides and computes each record,
 * only where its inputs come from changes). Round 3's H100 run (EIGER 4M, one frame alone):
 * candidates / fill / scan / write 30 / 163 / 8 / 109 us, the write recomputing every accepted
 * seed's flood fill, disc and sums, the fill's every neighbour test a chain of three loads
 * (bin_of, then rthr, beside img):
 *   PF8_CLASS=1  faid_pf8_cand writes each pixel's class byte, cls[i] = 1 when img[i] >
 *                rthr[bin_of[i]] (above), 2 when img[i] < rthr[bin_of[i]] (below, what the
 *                background disc keeps), 0 otherwise (NaN, equal): the fill's and the disc's
 *                tests read one byte; the 8 neighbours of a queued pixel and the disc's values
 *                are loaded before they are tested, so that their loads are in flight together
 *   PF8_RECS=1   (needs PF8_LOCAL_CAND) the fill stores each accepted seed's record (6 floats,
 *                npix) at rec[8 c] for candidate c < nrec; faid_pf8_cand records where each
 *                span's candidates start in cand[] and how many (cspan[2 g], cspan[2 g + 1]), so
 *                that faid_pf8_write finds a flagged position's candidate through a local map of
 *                its span and copies the record instead of running pf8_seed again (it still runs
 *                it for a candidate c >= nrec, a frame with more candidates than rec holds)
 *   PF8_CANDFILL=1 (the host's FAID_PF8_CANDFILL=1, which drops the faid_pf8_fill launch; needs
 *                PF8_LOCAL_CAND) faid_pf8_cand evaluates its span's candidates itself once it
 *                has them: the synthetic EIGER 4M frame has 18 candidates (17 spots of 21-28
 *                pixels above threshold, numpy count of the frame faid-bench dumps), so the fill
 *                was one work-item's chain of some 400 dependent global loads per spot. Here the
 *                work-group loads a PF8_WS x PF8_WS window around the seed (value, bin, class:
 *                1024 pixels, 4 loads per work-item) into local memory and one work-item runs
 *                pf8_seed on it, in the reference's order; a pixel outside the window (a
 *                component or disc reaching further) is read from global memory, with the same
 *                value. A span with more than PF8_WINMAX candidates (dense noise) walks them a
 *                work-item each without the window.
 *   PF8_WINFILL=1 the same windows in faid_pf8_fill, which stays a launch of its own: one
 *                work-group per candidate (the grid walks cand[] a work-group at a time), so
 *                that the candidates' pass stays the lean kernel it was (PF8_CANDFILL inlines
 *                the seed's code, its registers and stack, into the pass over every pixel)
 *   PF8_WSCAN=1  (the host's FAID_PF8_MERGE=1, which also drops the faid_pk_scan launch)
 *                faid_pf8_write finds its span's offset itself, the sum of counts[0..g) (integer
 *                sums: any order gives the same), and group 0 writes the total
 * Round 4's H100 run (2026-11-26, one frame alone, tests/bench/results/h100-2026-11-26-round4-pf8):
 * peakfinder8's find 414 us by round 3's defaults, 312 with PF8_RECS (write 110 -> 10 us), 291
 * with PF8_CLASS too (fill 166 -> 137), 284 with the scan merged (FAID_PF8_MERGE); pipelined clip
 * + peakfinder8 2,645 -> 2,689 frames/s. These three are the defaults since; CANDFILL (267 us
 * alone, but 2,427 pipelined: the pass over every pixel carries the seed's code), GATHER,
 * NOPREP and WINFILL lost and stay off. */
/* Issue 17, round 7 (FAID_PEAKS_KOPTS=-DPF8_SPREAD=32; 0, off, until a GPU run decides; the same
 * lists bit for bit: each candidate is evaluated by the same function):
 *   PF8_SPREAD=W  faid_pf8_fill gives each candidate a run of W work-items of its own (one warp
 *                 with 32), of which the first evaluates it, when the launch has a run for every
 *                 candidate; else one candidate per work-item, as before. Why: the fill walks
 *                 cand[] from work-item 0, so the benchmark's 18 candidates were 18 lanes of
 *                 one warp on one SM, each lane its own flood fill and background disc, the
 *                 warp executing every lane's branches one after the other. Nsight Compute on
 *                 a replay of the launch (one H100, 2026-11-27, tests/bench/cl_replay.py,
 *                 tests/bench/results/h100-2026-11-27-round7-probe/): 176.7 us, 280,919 cycles
 *                 elapsed against 2,722 active cycles per SM on average (one SM busy), 152,007
 *                 warp instructions, 4.97 threads active per warp, 12.7 cycles between a warp's
 *                 instructions (34 % of them waiting on L1TEX). The busy warp issued an
 *                 instruction about every 2 cycles, its lanes' paths hiding each other's
 *                 latency, so a candidate alone in its warp (a chain of about 33,000
 *                 instructions) may not finish sooner: the GPU run decides (r4win, a work-group
 *                 per candidate, measured 438 us against 137). */
#ifndef PF8_SPREAD
#define PF8_SPREAD 0
#endif
/*   PF8_WGSEED=C  faid_pf8_fill evaluates each candidate with a whole work-group when the launch
 *                 has at most C candidates per work-group (else one per work-item, as before):
 *                 the flood fill a level at a time (every pair of a queued pixel and one of its 8
 *                 neighbours of the level tested at once, a new pixel queued from the first pair
 *                 that meets it, in pair order: the reference's queue), the queued pixels' and
 *                 the background disc's values loaded by the group into local memory, and one
 *                 work-item summing them in the reference's order. A component that leaves a
 *                 window of PF8_WGW x PF8_WGW pixels (default 64) around the seed is walked by
 *                 one work-item with pf8_seed. Why: the same profile; one candidate is a chain
 *                 of about 33,000 instructions, most of them its flood fill's 8 neighbour tests
 *                 per pixel and its disc's 144 pixels one after the other. Compiled only where
 *                 PF8_MAXQ <= 512 (the queue and its values in local memory), used where
 *                 4 x local_bg_radius <= PF8_WGD (default 32: the disc's side).
 *                 The default (C = 4) since round 8's run (one H100, 2026-11-27, EIGER 4M,
 *                 tests/bench/results/h100-2026-11-27-round8-probe/): the fill 136 -> 44 us one
 *                 frame alone, peakfinder8's find 282 -> 190 us, clip + peakfinder8 pipelined
 *                 2,796 -> 2,886 frames/s (PF8_SPREAD: 86 us, 2,795); -DPF8_WGSEED=0 turns it
 *                 off. */
#ifndef PF8_WGSEED
#define PF8_WGSEED 4
#endif
#ifndef PF8_WGW
#define PF8_WGW 64
#endif
#ifndef PF8_WGD
#define PF8_WGD 32 /* the disc's side in local memory: local_bg_radius up to 8 */
#endif
#if PF8_WGSEED && PF8_MAXQ > 512
#undef PF8_WGSEED
#define PF8_WGSEED 0
#endif
#ifndef PF8_CLASS
#define PF8_CLASS 1
#endif
#ifndef PF8_RECS
#define PF8_RECS PF8_LOCAL_CAND
#endif
#ifndef PF8_WSCAN
#define PF8_WSCAN 0
#endif
#ifndef PF8_CANDFILL
#define PF8_CANDFILL 0
#endif
#ifndef PF8_WINFILL
#define PF8_WINFILL 0
#endif
#define PF8_WINDOWS (PF8_CANDFILL || PF8_WINFILL)
#ifndef PF8_WS
#define PF8_WS 32 /* PF8_CANDFILL: the window's side (pixels) */
#endif
#ifndef PF8_WINMAX
#define PF8_WINMAX 8 /* PF8_CANDFILL: a span with more candidates walks them a work-item each */
#endif
#define PF8_NOWIN (-(1 << 29)) /* a window origin that holds no pixel */
/* the global class bytes are read only where a launch before wrote them all */
#define PF8_GCLS (PF8_CLASS && !PF8_CANDFILL)
#if PF8_CANDFILL && !PF8_LOCAL_CAND
#error "PF8_CANDFILL needs PF8_LOCAL_CAND (the span's candidates in local memory)"
#endif
#if PF8_RECS && !PF8_LOCAL_CAND
#error "PF8_RECS needs PF8_LOCAL_CAND (a span's candidates contiguous in cand[])"
#endif
#ifndef PF8_HSTART
#define PF8_HSTART 16 /* queue length from which the table is used */
#endif
/* table size: a power of two at least twice PF8_MAXQ */
#if PF8_MAXQ <= 64
#define PF8_HTBITS 7
#elif PF8_MAXQ <= 128
#define PF8_HTBITS 8
#elif PF8_MAXQ <= 256
#define PF8_HTBITS 9
#elif PF8_MAXQ <= 512
#define PF8_HTBITS 10
#elif PF8_MAXQ <= 1024
#define PF8_HTBITS 11
#else
#undef PF8_HASH
#define PF8_HASH 0 /* larger components: the scan (no table that large in private memory) */
#endif
#define PF8_HT (1 << PF8_HTBITS)

#define PF8_ARGS                                                                               \
    const global float *img, const global int *bin_of, const global float *roff,               \
        const global float *rthr, const global uchar *cls, const int rows, const int cols,     \
        const int prows, const int pcols, const int min_pix, const int bg_radius,              \
        const float min_snr
#define PF8_PASS                                                                               \
    img, bin_of, roff, rthr, cls, rows, cols, prows, pcols, min_pix, bg_radius, min_snr
/* the window of PF8_CANDFILL: class, value and bin of the pixels (wr0..wr0+PF8_WS) x
 * (wc0..wc0+PF8_WS) of the frame, in local memory; PF8_NOWIN: none */
#define PF8_WARGS                                                                              \
    local const uchar *wcls, local const float *wimg, local const int *wbin, const int wr0,   \
        const int wc0
#define PF8_NOWIN_PASS                                                                         \
    (local const uchar *)0, (local const float *)0, (local const int *)0, PF8_NOWIN, PF8_NOWIN

#if PF8_WINDOWS
#define PF8_WIX(gr, gc)                                                                        \
    ((uint)((gr) - wr0) < (uint)PF8_WS && (uint)((gc) - wc0) < (uint)PF8_WS                     \
         ? ((gr) - wr0) * PF8_WS + ((gc) - wc0)                                                \
         : -1)
#else
#define PF8_WIX(gr, gc) (-1)
#endif

#if PF8_WINDOWS
/* The window of seed pixel (ss, fs) of panel (pss, pfs), centred on it: its origin in *wr0, *wc0,
 * and this work-item's share (t = lid, lid + lsz, ...) of its pixels' class, value and bin in
 * local memory (pixels outside the frame are left alone: PF8_WIX never reads them, as pf8_seed
 * tests the frame's bounds first). The callers hold the barriers before and after. */
static inline void pf8_window_load(const global float *img, const global int *bin_of,
                                   const global float *rthr, const int rows, const int cols,
                                   const int prows, const int pcols, const int pss, const int pfs,
                                   const int ss, const int fs, const int lid, const int lsz,
                                   local uchar *wcls, local float *wimg, local int *wbin,
                                   int *wr0, int *wc0)
{
    *wr0 = pss * prows + ss - PF8_WS / 2;
    *wc0 = pfs * pcols + fs - PF8_WS / 2;
    for (int t = lid; t < PF8_WS * PF8_WS; t += lsz) {
        const int r = *wr0 + t / PF8_WS, c = *wc0 + t % PF8_WS;
        if (r >= 0 && r < rows && c >= 0 && c < cols) {
            const int q = r * cols + c, b = bin_of[q];
            const float v = img[q], th = rthr[b];
            wimg[t] = v;
            wbin[t] = b;
            wcls[t] = v > th ? 1 : v < th ? 2 : 0;
        }
    }
}
#endif

/* Pixel q = (gr, gc) of the frame, from the window where it holds q, else from global memory:
 * above (img > rthr), below (img < rthr), value, bin. */
static inline int pf8_above(PF8_ARGS, PF8_WARGS, int gr, int gc, int q)
{
    const int w = PF8_WIX(gr, gc);
    if (w >= 0)
        return wcls[w] == 1;
#if PF8_GCLS
    return cls[q] == 1;
#else
    return img[q] > rthr[bin_of[q]];
#endif
}

static inline int pf8_below(PF8_ARGS, PF8_WARGS, int gr, int gc, int q, float v)
{
    const int w = PF8_WIX(gr, gc);
    if (w >= 0)
        return wcls[w] == 2;
#if PF8_GCLS
    return cls[q] == 2;
#else
    return v < rthr[bin_of[q]];
#endif
}

static inline float pf8_img(PF8_ARGS, PF8_WARGS, int gr, int gc, int q)
{
    const int w = PF8_WIX(gr, gc);
    return w >= 0 ? wimg[w] : img[q];
}

static inline int pf8_bin(PF8_ARGS, PF8_WARGS, int gr, int gc, int q)
{
    const int w = PF8_WIX(gr, gc);
    return w >= 0 ? wbin[w] : bin_of[q];
}
#define PF8_AT PF8_PASS, wcls, wimg, wbin, wr0, wc0

constant int pf8_nb_fs[8] = {-1, 0, 1, -1, 1, -1, 0, 1};
constant int pf8_nb_ss[8] = {-1, -1, -1, 0, 0, 1, 1, 1};

/* Pixel index of seed-order position o. */
static inline int pf8_pixel(int o, int cols, int prows, int pcols, int *pss, int *pfs, int *ss,
                            int *fs)
{
    int psize = prows * pcols;
    int panel = o / psize, rem = o % psize;
    int npc = cols / pcols;
    *pss = panel / npc;
    *pfs = panel % npc;
    *ss = rem / pcols;
    *fs = rem % pcols;
    return (*pss * prows + *ss) * cols + *pfs * pcols + *fs;
}

/* The local background of a peak from its disc's counted pixels (np of them, their sum, sum of
 * squares): offset and sigma; the radial offset of the centre's bin where none counted.
 * pf8_seed's statements, shared by the fill's one-work-item and work-group paths. */
static inline void pf8_local_bg(int np, float bsum, float bsum2, const global float *roff,
                                const global int *bin_of, int com_at, float *loff, float *lsig)
{
    if (np) {
        *loff = bsum / (float)np;
        *lsig = bsum2 / (float)np - *loff * *loff;
        *lsig = *lsig >= 0.0f ? sqrt(*lsig) : 0.01f;
    } else {
        *loff = roff[bin_of[com_at]];
        *lsig = 0.01f;
    }
}

/* Acceptance of a peak from its second sums over the queue (tot, raw, sum_fs, sum_ss, max_i) and
 * its local background: 1 with the record in rec[0..5] (x, y, intensity, sigma, snr, max pixel),
 * 0 when peakfinder8 rejects it. pf8_seed's statements, shared as pf8_local_bg. */
static inline int pf8_accept(float tot, float raw, float sum_fs, float sum_ss, float max_i,
                             float loff, float lsig, float bg_max, float min_snr, int fs0, int ss0,
                             int PC, int PR, float *rec)
{
    if (fabs((double)raw) < 1e-10)
        return 0;
    const float com_fs = sum_fs / fabs(raw), com_ss = sum_ss / fabs(raw);
    const float snr = fabs((double)lsig) > 1e-10 ? tot / lsig : 0.0f;
    if (snr < min_snr)
        return 0;
    if (max_i < bg_max - loff)
        return 0;
    if (com_fs < (float)fs0 || com_fs > (float)(fs0 + PC - 1) || com_ss < (float)ss0 ||
        com_ss > (float)(ss0 + PR - 1))
        return 0;
    rec[0] = com_fs;
    rec[1] = com_ss;
    rec[2] = tot;
    rec[3] = lsig;
    rec[4] = snr;
    rec[5] = max_i;
    return 1;
}

static int pf8_seed(PF8_ARGS, PF8_WARGS, int pss, int pfs, int ss, int fs, float *rec,
                    int *npix_out)
{
    const int W = cols, PR = prows, PC = pcols;
    const int ss0 = pss * PR, fs0 = pfs * PC;
#define PIX(lss, lfs) ((ss0 + (lss)) * W + fs0 + (lfs))
/* panel-local (lss, lfs) */
#define ABOVE(lss, lfs) pf8_above(PF8_AT, ss0 + (lss), fs0 + (lfs), PIX(lss, lfs))
#define INTERIOR(lss, lfs) ((lss) >= 1 && (lss) <= PR - 2 && (lfs) >= 1 && (lfs) <= PC - 2)
    if (!INTERIOR(ss, fs))
        return 0;
    const int me = PIX(ss, fs);
    if (!ABOVE(ss, fs))
        return 0;
    for (int k = 0; k < 4; k++) {
        int nss = ss + pf8_nb_ss[k], nfs = fs + pf8_nb_fs[k];
        if (INTERIOR(nss, nfs) && ABOVE(nss, nfs))
            return 0;
    }
    int queue[PF8_MAXQ];
    int n = 1, head = 0;
    queue[0] = me;
#if PF8_HASH
    int ht[PF8_HT]; /* queue index of the pixel hashed there, -1: empty (once hashed) */
    int hashed = 0;
    uint hslot = 0;
#endif
    while (head < n) {
        int cur = queue[head++];
        int css = cur / W - ss0, cfs = cur % W - fs0;
#if PF8_CLASS || PF8_WINDOWS
        uchar up[8]; /* the neighbours' tests, loaded together before the ordered walk */
        for (int k = 0; k < 8; k++) {
            int nss = css + pf8_nb_ss[k], nfs = cfs + pf8_nb_fs[k];
            int in = nss >= 0 && nss < PR && nfs >= 0 && nfs < PC;
            up[k] = in ? ABOVE(in ? nss : 0, in ? nfs : 0) : 0;
        }
#endif
        for (int k = 0; k < 8; k++) {
            int nss = css + pf8_nb_ss[k], nfs = cfs + pf8_nb_fs[k];
            if (nss < 0 || nss >= PR || nfs < 0 || nfs >= PC)
                continue;
            int q = PIX(nss, nfs);
#if PF8_CLASS || PF8_WINDOWS
            if (!up[k])
                continue;
#else
            if (!ABOVE(nss, nfs))
                continue;
#endif
            int seen = 0;
#if PF8_HASH
            if (hashed) {
                uint h = ((uint)q * 2654435761u) >> (32 - PF8_HTBITS);
                while (ht[h] >= 0 && !seen) {
                    seen = queue[ht[h]] == q;
                    h = (h + 1) & (PF8_HT - 1);
                }
                hslot = h;
            } else
#endif
                for (int m = 0; m < n && !seen; m++)
                    seen = queue[m] == q;
            if (seen)
                continue;
            if (INTERIOR(nss, nfs) && q < me)
                return 0;
            if (n == PF8_MAXQ)
                return 0;
            queue[n++] = q;
#if PF8_HASH
            if (hashed) {
                ht[hslot] = n - 1;
            } else if (n == PF8_HSTART) {
                for (int t = 0; t < PF8_HT; t++)
                    ht[t] = -1;
                for (int m = 0; m < n; m++) {
                    uint h = ((uint)queue[m] * 2654435761u) >> (32 - PF8_HTBITS);
                    while (ht[h] >= 0)
                        h = (h + 1) & (PF8_HT - 1);
                    ht[h] = m;
                }
                hashed = 1;
            }
#endif
        }
    }
    if (n < min_pix)
        return 0;
    float sum_i = 0.0f, sum_fs = 0.0f, sum_ss = 0.0f;
    for (int m = 0; m < n; m++) {
        int q = queue[m];
        const int qr = q / W, qc = q % W;
        float ci = pf8_img(PF8_AT, qr, qc, q) - roff[pf8_bin(PF8_AT, qr, qc, q)];
        sum_i += ci;
        sum_fs += ci * (float)qc;
        sum_ss += ci * (float)qr;
    }
    if (fabs((double)sum_i) < 1e-10)
        return 0;
    float com_fs = sum_fs / fabs(sum_i), com_ss = sum_ss / fabs(sum_i);
    int com_fs_r = (int)rint(com_fs), com_ss_r = (int)rint(com_ss);
    int cfi = com_fs_r - fs0, csi = com_ss_r - ss0;
    const int rw = 2 * bg_radius;
    int np = 0;
    float bsum = 0.0f, bsum2 = 0.0f, bg_max = 0.0f;
#if PF8_CLASS || PF8_WINDOWS
    /* the disc's loads unconditional (a pixel outside the panel or the disc reads the seed's and
     * is not counted), so that a row's loads can be in flight together; sums in the same order */
    for (int sj = -rw; sj < rw; sj++) {
        const int lss = csi + sj;
        const int row_in = lss >= 0 && lss < PR;
#pragma unroll 4
        for (int fi = -rw; fi < rw; fi++) {
            const int lfs = cfi + fi;
            const int in = row_in && lfs >= 0 && lfs < PC && fi * fi + sj * sj <= rw * rw;
            const int ul = in ? lss : ss, uf = in ? lfs : fs;
            const int q = PIX(ul, uf);
            const float v = pf8_img(PF8_AT, ss0 + ul, fs0 + uf, q);
            const int c = pf8_below(PF8_AT, ss0 + ul, fs0 + uf, q, v);
            if (in && c) {
                np++;
                bsum += v;
                bsum2 += v * v;
                if (v > bg_max)
                    bg_max = v;
            }
        }
    }
#else
    for (int sj = -rw; sj < rw; sj++) {
        for (int fi = -rw; fi < rw; fi++) {
            int lfs = cfi + fi, lss = csi + sj;
            if (lfs < 0 || lfs >= PC || lss < 0 || lss >= PR)
                continue;
            if (fi * fi + sj * sj > rw * rw)
                continue;
            int q = PIX(lss, lfs);
            float v = img[q];
            if (v < rthr[bin_of[q]]) {
                np++;
                bsum += v;
                bsum2 += v * v;
                if (v > bg_max)
                    bg_max = v;
            }
        }
    }
#endif
    float loff, lsig;
    pf8_local_bg(np, bsum, bsum2, roff, bin_of, com_ss_r * W + com_fs_r, &loff, &lsig);
    float tot = 0.0f, raw = 0.0f, max_i = 0.0f;
    sum_fs = 0.0f;
    sum_ss = 0.0f;
    for (int m = 0; m < n; m++) {
        int q = queue[m];
        float v = pf8_img(PF8_AT, q / W, q % W, q);
        float ci = v - loff;
        tot += ci;
        raw += v;
        sum_fs += v * (float)(q % W);
        sum_ss += v * (float)(q / W);
        if (ci > max_i)
            max_i = ci;
    }
    if (!pf8_accept(tot, raw, sum_fs, sum_ss, max_i, loff, lsig, bg_max, min_snr, fs0, ss0, PC,
                    PR, rec))
        return 0;
    *npix_out = n;
    return 1;
#undef PIX
#undef ABOVE
#undef INTERIOR
}

/* The cheap tests of pf8_seed: 1 when position (pss, pfs, ss, fs) may seed a peak. */
static inline int pf8_cand(const global float *img, const global int *bin_of,
                           const global float *rthr, int W, int PR, int PC, int pss, int pfs,
                           int ss, int fs)
{
    const int ss0 = pss * PR, fs0 = pfs * PC;
#define PIX(lss, lfs) ((ss0 + (lss)) * W + fs0 + (lfs))
#define ABOVE(i) (img[(i)] > rthr[bin_of[(i)]])
#define INTERIOR(lss, lfs) ((lss) >= 1 && (lss) <= PR - 2 && (lfs) >= 1 && (lfs) <= PC - 2)
    if (!INTERIOR(ss, fs) || !ABOVE(PIX(ss, fs)))
        return 0;
    for (int k = 0; k < 4; k++) {
        int nss = ss + pf8_nb_ss[k], nfs = fs + pf8_nb_fs[k];
        if (INTERIOR(nss, nfs) && ABOVE(PIX(nss, nfs)))
            return 0;
    }
    return 1;
#undef PIX
#undef ABOVE
#undef INTERIOR
}

/* Kernel signatures are spelt out (no PF8_ARGS) so that the engine's program cache can read
 * their parameter names; every build takes every parameter (cls, cspan, recs, nrec unused where
 * the variants are off). */
#if PF8_RECS
#ifdef PF8_NREC_MAX /* a test knob: fewer records kept, so that the write's fallback runs */
#define PF8_NREC min(nrec, PF8_NREC_MAX)
#else
#define PF8_NREC nrec
#endif
/* candidate c's record for faid_pf8_write */
static inline void pf8_keep(global float *recs, int nrec, int c, const float *rec, int npix)
{
    if (c < PF8_NREC) {
        global float *r = recs + 8 * (size_t)c;
        for (int k = 0; k < 6; k++)
            r[k] = rec[k];
        r[6] = as_float(npix);
    }
}
#endif

kernel void faid_pf8_cand(const global float *img, const global int *bin_of,
                          const global float *roff, const global float *rthr, const int rows,
                          const int cols, const int prows, const int pcols, const int min_pix,
                          const int bg_radius, const float min_snr, global uchar *flag,
                          global int *counts, const int ngroups, global int *cand,
                          global uchar *cls, global int *cspan, global float *recs,
                          const int nrec)
{
#if PF8_LOCAL_CAND
    local int lc[PK_SPAN];
    local int lcnt, lbase;
#if PF8_CANDFILL
    local uchar wcls[PF8_WS * PF8_WS];
    local float wimg[PF8_WS * PF8_WS];
    local int wbin[PF8_WS * PF8_WS];
    local int nacc;
#endif
    const int lid = get_local_id(0);
    if (lid == 0)
        lcnt = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int j = 0; j < PK_PPI; j++) {
        const int o = pk_pos(j);
        if (o < rows * cols) {
            int pss, pfs, ss, fs;
            const int i = pf8_pixel(o, cols, prows, pcols, &pss, &pfs, &ss, &fs);
            int f = pf8_cand(img, bin_of, rthr, cols, prows, pcols, pss, pfs, ss, fs);
            flag[o] = (uchar)f;
#if PF8_CLASS
            const float v = img[i], t = rthr[bin_of[i]];
            cls[i] = v > t ? 1 : v < t ? 2 : 0;
#endif
#if PF8_LOCAL_CAND
            if (f)
                lc[atomic_inc(&lcnt)] = o;
#else
            if (f)
                cand[atomic_inc(&counts[ngroups])] = o;
#endif
        }
    }
#if PF8_LOCAL_CAND
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        lbase = lcnt ? atomic_add(&counts[ngroups], lcnt) : 0;
#if PF8_RECS
        cspan[2 * get_group_id(0)] = lbase;
        cspan[2 * get_group_id(0) + 1] = lcnt;
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = lid; i < lcnt; i += PK_WG)
        cand[lbase + i] = lc[i];
#endif
#if PF8_CANDFILL
    /* the span's candidates, evaluated here (faid_pf8_fill's work): flag[o] = 2 for an accepted
     * seed (after this work-group's 0 / 1: the barrier orders them), counts[g] = accepted */
    if (lid == 0)
        nacc = 0;
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    const int nc = lcnt;
    if (nc <= PF8_WINMAX) {
        for (int k = 0; k < nc; k++) {
            const int o = lc[k];
            int pss, pfs, ss, fs;
            pf8_pixel(o, cols, prows, pcols, &pss, &pfs, &ss, &fs);
            int wr0, wc0;
            barrier(CLK_LOCAL_MEM_FENCE); /* the window of the candidate before is done with */
            pf8_window_load(img, bin_of, rthr, rows, cols, prows, pcols, pss, pfs, ss, fs, lid,
                            PK_WG, wcls, wimg, wbin, &wr0, &wc0);
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lid == 0) {
                float rec[6];
                int npix;
                if (pf8_seed(PF8_PASS, wcls, wimg, wbin, wr0, wc0, pss, pfs, ss, fs, rec, &npix)) {
                    flag[o] = 2;
                    nacc++;
#if PF8_RECS
                    pf8_keep(recs, nrec, lbase + k, rec, npix);
#endif
                }
            }
        }
    } else {
        for (int k = lid; k < nc; k += PK_WG) {
            const int o = lc[k];
            int pss, pfs, ss, fs;
            pf8_pixel(o, cols, prows, pcols, &pss, &pfs, &ss, &fs);
            float rec[6];
            int npix;
            if (pf8_seed(PF8_PASS, PF8_NOWIN_PASS, pss, pfs, ss, fs, rec, &npix)) {
                flag[o] = 2;
                atomic_inc(&nacc);
#if PF8_RECS
                pf8_keep(recs, nrec, lbase + k, rec, npix);
#endif
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0)
        counts[get_group_id(0)] = nacc;
#endif
}

kernel void faid_pf8_fill(const global float *img, const global int *bin_of,
                          const global float *roff, const global float *rthr,
                          const global uchar *cls, const int rows, const int cols,
                          const int prows, const int pcols, const int min_pix,
                          const int bg_radius, const float min_snr, global uchar *flag,
                          global int *counts, const int ngroups, const global int *cand,
                          global float *recs, const int nrec)
{
    const int n = counts[ngroups];
#if PF8_WINFILL
    local uchar wcls[PF8_WS * PF8_WS];
    local float wimg[PF8_WS * PF8_WS];
    local int wbin[PF8_WS * PF8_WS];
    const int lid = get_local_id(0), lsz = get_local_size(0);
    for (int c = get_group_id(0); c < n; c += get_num_groups(0)) {
        const int o = cand[c];
        int pss, pfs, ss, fs;
        pf8_pixel(o, cols, prows, pcols, &pss, &pfs, &ss, &fs);
        int wr0, wc0;
        barrier(CLK_LOCAL_MEM_FENCE); /* the window of the candidate before is done with */
        pf8_window_load(img, bin_of, rthr, rows, cols, prows, pcols, pss, pfs, ss, fs, lid, lsz,
                        wcls, wimg, wbin, &wr0, &wc0);
        barrier(CLK_LOCAL_MEM_FENCE);
        float rec[6];
        int npix;
        if (lid == 0 && pf8_seed(PF8_PASS, wcls, wimg, wbin, wr0, wc0, pss, pfs, ss, fs, rec, &npix)) {
            flag[o] = 2;
            atomic_inc(&counts[o / PK_SPAN]);
#if PF8_RECS
            pf8_keep(recs, nrec, c, rec, npix);
#endif
        }
    }
#else
#if PF8_WGSEED
    /* PF8_WGSEED (above): a work-group per candidate, its work spread over the group. Every
     * branch below that holds a barrier depends on values every work-item holds alike (n, the
     * candidate, what the shared scalars say after a barrier). */
    local int wq[PF8_MAXQ];              /* the queue: pixel indices in the reference's order */
    local int wkey[PF8_WGW * PF8_WGW];   /* the window around the seed: INT_MAX not met, -1
                                            queued, else the first pair that met it this level */
    local float wv[PF8_MAXQ], wci[PF8_MAXQ]; /* the queued pixels' values, value - offset */
    local float dv[PF8_WGD * PF8_WGD];   /* the background disc's values */
    local uchar din[PF8_WGD * PF8_WGD];  /* and whether each is counted */
    local int scan[PK_WG];
    local int sh[4];                     /* rejected, outside the window, disc centre row, col */
    if (n <= PF8_WGSEED * (int)get_num_groups(0) && 4 * bg_radius <= PF8_WGD) {
        const int lid = get_local_id(0), lsz = get_local_size(0);
        const int W = cols, PR = prows, PC = pcols;
        for (int c = get_group_id(0); c < n; c += get_num_groups(0)) {
            const int o = cand[c];
            int pss, pfs, ss, fs;
            pf8_pixel(o, cols, prows, pcols, &pss, &pfs, &ss, &fs);
            const int ss0 = pss * PR, fs0 = pfs * PC, me = (ss0 + ss) * W + fs0 + fs;
            /* window origin: the seed at its centre */
            const int r0 = ss0 + ss - PF8_WGW / 2, c0 = fs0 + fs - PF8_WGW / 2;
#define WG_ABOVE(lss, lfs)                                                                     \
    pf8_above(PF8_PASS, PF8_NOWIN_PASS, ss0 + (lss), fs0 + (lfs), (ss0 + (lss)) * W + fs0 + (lfs))
#define WG_INTERIOR(lss, lfs) ((lss) >= 1 && (lss) <= PR - 2 && (lfs) >= 1 && (lfs) <= PC - 2)
            /* the cheap tests, as pf8_seed's first lines (every work-item alike) */
            int ok = WG_INTERIOR(ss, fs) && WG_ABOVE(ss, fs);
            for (int k = 0; k < 4 && ok; k++) {
                const int nss = ss + pf8_nb_ss[k], nfs = fs + pf8_nb_fs[k];
                if (WG_INTERIOR(nss, nfs) && WG_ABOVE(nss, nfs))
                    ok = 0;
            }
            if (!ok)
                continue;
            barrier(CLK_LOCAL_MEM_FENCE); /* the candidate before is done with the arrays */
            for (int t = lid; t < PF8_WGW * PF8_WGW; t += lsz)
                wkey[t] = INT_MAX;
            if (lid == 0) {
                wq[0] = me;
                sh[0] = sh[1] = 0;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lid == 0)
                wkey[(PF8_WGW / 2) * PF8_WGW + PF8_WGW / 2] = -1;
            /* The flood fill a level at a time: the pairs (queue entry a + t / 8, neighbour t % 8)
             * of the level [a, b) in t order are the reference's walk of the queue; a pixel
             * joins the queue from the first pair that meets it (the smallest t), in t order,
             * so the queue is the reference's, and a component it rejects (an earlier interior
             * pixel, more than PF8_MAXQ pixels) is rejected here. */
            int a = 0, b = 1, rej = 0, out = 0;
            while (a < b && !rej && !out) {
                const int npair = 8 * (b - a);
                for (int t = lid; t < npair; t += lsz) {
                    const int cur = wq[a + t / 8], k = t % 8;
                    const int nss = cur / W - ss0 + pf8_nb_ss[k], nfs = cur % W - fs0 + pf8_nb_fs[k];
                    if (nss >= 0 && nss < PR && nfs >= 0 && nfs < PC && WG_ABOVE(nss, nfs)) {
                        const int wr = ss0 + nss - r0, wc = fs0 + nfs - c0;
                        if ((uint)wr < (uint)PF8_WGW && (uint)wc < (uint)PF8_WGW)
                            atomic_min(&wkey[wr * PF8_WGW + wc], t);
                        else
                            sh[1] = 1; /* the component leaves the window */
                    }
                }
                barrier(CLK_LOCAL_MEM_FENCE);
                int added = 0; /* alike in every work-item: sums of the scans */
                for (int t0 = 0; t0 < npair; t0 += lsz) {
                    const int t = t0 + lid;
                    int win = 0, q = 0, wi = 0, nss = 0, nfs = 0;
                    if (t < npair) {
                        const int cur = wq[a + t / 8], k = t % 8;
                        nss = cur / W - ss0 + pf8_nb_ss[k];
                        nfs = cur % W - fs0 + pf8_nb_fs[k];
                        const int wr = ss0 + nss - r0, wc = fs0 + nfs - c0;
                        if (nss >= 0 && nss < PR && nfs >= 0 && nfs < PC &&
                            (uint)wr < (uint)PF8_WGW && (uint)wc < (uint)PF8_WGW) {
                            wi = wr * PF8_WGW + wc;
                            win = wkey[wi] == t;
                            q = (ss0 + nss) * W + fs0 + nfs;
                        }
                    }
                    scan[lid] = win;
                    barrier(CLK_LOCAL_MEM_FENCE);
                    for (int off = 1; off < lsz; off <<= 1) {
                        const int v = lid >= off ? scan[lid - off] : 0;
                        barrier(CLK_LOCAL_MEM_FENCE);
                        scan[lid] += v;
                        barrier(CLK_LOCAL_MEM_FENCE);
                    }
                    const int pos = b + added + scan[lid] - win;
                    added += scan[lsz - 1];
                    if (win) {
                        wkey[wi] = -1;
                        if (WG_INTERIOR(nss, nfs) && q < me)
                            sh[0] = 1; /* an earlier interior pixel of the component */
                        if (pos >= PF8_MAXQ)
                            sh[0] = 1; /* more than max_pixel_count pixels */
                        else
                            wq[pos] = q;
                    }
                    barrier(CLK_LOCAL_MEM_FENCE); /* scan[] and wq[] before they are read */
                }
                rej = sh[0];
                out = sh[1];
                a = b;
                b += added;
                barrier(CLK_LOCAL_MEM_FENCE); /* sh[] read by all before it changes */
            }
            if (out) {
                /* a component larger than the window: the reference's walk, one work-item */
                float rec[6];
                int npix;
                if (lid == 0 && pf8_seed(PF8_PASS, PF8_NOWIN_PASS, pss, pfs, ss, fs, rec, &npix)) {
                    flag[o] = 2;
                    atomic_inc(&counts[o / PK_SPAN]);
#if PF8_RECS
                    pf8_keep(recs, nrec, c, rec, npix);
#endif
                }
                continue;
            }
            const int nq = b;
            if (rej || nq < min_pix)
                continue;
            for (int m = lid; m < nq; m += lsz) {
                const int q = wq[m];
                const float v = img[q];
                wv[m] = v;
                wci[m] = v - roff[bin_of[q]];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            /* the sums in queue order, then the disc's centre (one work-item, pf8_seed's
             * statements) */
            float sum_i = 0.0f, sum_fs = 0.0f, sum_ss = 0.0f;
            if (lid == 0) {
                for (int m = 0; m < nq; m++) {
                    const int q = wq[m];
                    const float ci = wci[m];
                    sum_i += ci;
                    sum_fs += ci * (float)(q % W);
                    sum_ss += ci * (float)(q / W);
                }
                sh[0] = fabs((double)sum_i) < 1e-10;
                if (!sh[0]) {
                    const float com_fs = sum_fs / fabs(sum_i), com_ss = sum_ss / fabs(sum_i);
                    sh[2] = (int)rint(com_ss);
                    sh[3] = (int)rint(com_fs);
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            const int zero_i = sh[0], com_ss_r = sh[2], com_fs_r = sh[3];
            barrier(CLK_LOCAL_MEM_FENCE);
            if (zero_i)
                continue;
            const int cfi = com_fs_r - fs0, csi = com_ss_r - ss0;
            const int rw = 2 * bg_radius, side = 2 * rw;
            int np = 0;
            float bsum = 0.0f, bsum2 = 0.0f, bg_max = 0.0f;
            /* the disc, loaded by the group into local memory in the reference's order (row by
             * row), summed in that order by one work-item below */
            for (int t = lid; t < side * side; t += lsz) {
                const int sj = t / side - rw, fi = t % side - rw;
                const int lss = csi + sj, lfs = cfi + fi;
                const int in = lss >= 0 && lss < PR && lfs >= 0 && lfs < PC &&
                               fi * fi + sj * sj <= rw * rw;
                int cnt = 0;
                float v = 0.0f;
                if (in) {
                    const int q = (ss0 + lss) * W + fs0 + lfs;
                    v = img[q];
                    cnt = pf8_below(PF8_PASS, PF8_NOWIN_PASS, ss0 + lss, fs0 + lfs, q, v);
                }
                dv[t] = v;
                din[t] = (uchar)cnt;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            /* every work-item sums the same local values in the same order (so every one holds
             * the same record); one writes it */
            for (int u = 0; u < side * side; u++) {
                if (din[u]) {
                    const float x = dv[u];
                    np++;
                    bsum += x;
                    bsum2 += x * x;
                    if (x > bg_max)
                        bg_max = x;
                }
            }
            float loff, lsig;
            pf8_local_bg(np, bsum, bsum2, roff, bin_of, com_ss_r * W + com_fs_r, &loff, &lsig);
            float tot = 0.0f, raw = 0.0f, max_i = 0.0f;
            float sfs = 0.0f, sss = 0.0f;
            for (int m = 0; m < nq; m++) {
                const int q = wq[m];
                const float v = wv[m];
                const float ci = v - loff;
                tot += ci;
                raw += v;
                sfs += v * (float)(q % W);
                sss += v * (float)(q / W);
                if (ci > max_i)
                    max_i = ci;
            }
            float rec[6];
            const int acc = pf8_accept(tot, raw, sfs, sss, max_i, loff, lsig, bg_max, min_snr, fs0,
                                       ss0, PC, PR, rec);
            if (acc && lid == 0) {
                flag[o] = 2;
                atomic_inc(&counts[o / PK_SPAN]);
#if PF8_RECS
                pf8_keep(recs, nrec, c, rec, nq);
#endif
            }
            /* (needed by PoCL 5: without a barrier here every work-item of the group took the
             * branch of work-item 0 above, the region before the loop's next iteration holding
             * the continues of the tests above; every peak was counted 256 times) */
            barrier(CLK_LOCAL_MEM_FENCE);
#undef WG_ABOVE
#undef WG_INTERIOR
        }
        return;
    }
#endif
    /* PF8_SPREAD (above): with at most one candidate per PF8_SPREAD work-items, candidate c goes
     * to the first work-item of run lw of group g, c = lw x groups + g (consecutive candidates on
     * consecutive groups, so on different SMs); else one per work-item. n is the same for every
     * work-item, so the choice is the launch's. */
    int c0 = get_global_id(0), cstep = get_global_size(0);
#if PF8_SPREAD > 1
    if (n <= (int)(get_global_size(0) / PF8_SPREAD)) {
        const int lid = get_local_id(0);
        c0 = lid % PF8_SPREAD ? n
                              : (lid / PF8_SPREAD) * (int)get_num_groups(0) + (int)get_group_id(0);
        cstep = n; /* one candidate at most */
    }
#endif
    for (int c = c0; c < n; c += cstep) {
        const int o = cand[c];
        int pss, pfs, ss, fs;
        pf8_pixel(o, cols, prows, pcols, &pss, &pfs, &ss, &fs);
        float rec[6];
        int npix;
        if (pf8_seed(PF8_PASS, PF8_NOWIN_PASS, pss, pfs, ss, fs, rec, &npix)) {
            flag[o] = 2;
            atomic_inc(&counts[o / PK_SPAN]);
#if PF8_RECS
            pf8_keep(recs, nrec, c, rec, npix);
#endif
        }
    }
#endif
}

/* One work-group per span (compact.cl): the records of the accepted seeds whose rank < cap. */
kernel void faid_pf8_write(const global float *img, const global int *bin_of,
                           const global float *roff, const global float *rthr,
                           const global uchar *cls, const int rows, const int cols,
                           const int prows, const int pcols, const int min_pix,
                           const int bg_radius, const float min_snr, const global uchar *flag,
                           const global int *counts, const global int *offsets,
                           const int ngroups, const int cap, global float *out,
                           const int out_off, const global int *cand, const global int *cspan,
                           const global float *recs, const int nrec)
{
    local int scratch[PK_WG];
#if PF8_RECS
    local int map[PK_SPAN]; /* the span's candidates: map[position in the span] = index in cand[] */
#endif
    const int g = get_group_id(0);
#if PF8_WSCAN
    /* the span's offset (faid_pk_scan's work): the spans before it; group 0 sums them all for
     * the total */
    if (g != 0 && counts[g] == 0)
        return;
    {
        const int lid = get_local_id(0), upto = g == 0 ? ngroups : g;
        int s = 0;
        for (int k = lid; k < upto; k += PK_WG)
            s += counts[k];
        scratch[lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int w = PK_WG / 2; w > 0; w >>= 1) {
            if (lid < w)
                scratch[lid] += scratch[lid + w];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    int base = g == 0 ? 0 : scratch[0];
    if (g == 0 && get_local_id(0) == 0)
        out[out_off + 8 * cap] = as_float(scratch[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    int base = offsets[g];
#endif
    if (counts[g] == 0 || base >= cap)
        return;
#if PF8_RECS
    const int span0 = g * PK_SPAN, cb = cspan[2 * g], cn = cspan[2 * g + 1];
    for (int k = get_local_id(0); k < cn; k += PK_WG)
        map[cand[cb + k] - span0] = cb + k;
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int j = 0; j < PK_PPI; j++) {
        const int o = pk_pos(j);
        const int f = o < rows * cols && flag[o] == 2;
        const int rank = base + pk_local_scan(scratch, f) - 1;
        base += scratch[PK_WG - 1];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (f && rank < cap) {
            int pss, pfs, ss, fs;
            int i = pf8_pixel(o, cols, prows, pcols, &pss, &pfs, &ss, &fs);
#if PF8_RECS
            const int c = map[o - span0];
            if (c < PF8_NREC) {
                const global float *r = recs + 8 * (size_t)c;
                pk_store(out + out_off, cap, rank, r[0], r[1], r[2], r[3], r[4], r[5],
                         as_int(r[6]), i);
                continue;
            }
#endif
            float rec[6];
            int npix;
            pf8_seed(PF8_PASS, PF8_NOWIN_PASS, pss, pfs, ss, fs, rec, &npix);
            pk_store(out + out_off, cap, rank, rec[0], rec[1], rec[2], rec[3], rec[4], rec[5],
                     npix, i);
        }
    }
}
