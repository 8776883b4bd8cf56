/* peaks/sigma_clip.cl: the sigma-clipped background per radial bin (algorithms.md §8, pyFAI's
 * sigma_clip_ng semantics), one work-group per bin of the CSR matrix. The plain C reference is
 * faid_sigclip_ref (core/faid_sigclip.c); the rules are documented in faid_sigclip.h.
 *
 * Build-time constants (the host's choice: faid_sigclip_config in engine/faid_stage_sigclip.c):
 *   WG        work-group size, a power of two
 *   R         entries of the bin each work-item keeps in registers across all cycles
 *   LM        entries after those each work-item keeps in local memory (0: none; issue 17)
 *   PK_FUSED  defined: each pixel computed from the raw frame (process/preprocess.cl first)
 *   SC_GB     0, or N: the entries beyond the registers gathered N at a time, every load of a
 *             batch issued before any of them is used, and each pixel's loads (normp, raw,
 *             dark) issued together rather than raw after normp (issue 17, round 3: the gather is
 *             a chain of dependent global loads per work-item); and every pass's walk of the
 *             overflow entries (bins larger than WG (R + LM): about half of an EIGER 4M's bins
 *             at 1000 bins with the defaults) loads them SC_GB at a time before using them in
 *             the same order; the same values in the same places and the same sums in the same
 *             order, so the same bits (FAID_SIGCLIP_GB)
 *   SC_CG     0, 1 or 2: the gather coalesced (issue 17, round 5; FAID_SIGCLIP_CG): the
 *             work-group walks its bin's CSR range in chunks of WG x SC_CGU entries,
 *             lane-consecutive, and puts each entry where its owner keeps it; the entries after
 *             the registers then sit in local memory in the owner's CSR order (padded), not
 *             entry-major (below); 2: each chunk through a tile in local memory, so that the
 *             overflow entries are written coalesced too
 *   SC_CGU    entries per work-item and chunk of that gather (default 4)
 *   HAS_COEF  1 when the matrix carries coefficients (else every coefficient is 1)
 *   SC_EM     error model: 0 poisson, 1 azimuthal, 2 hybrid (faid_clip_model values)
 *
 * The bin's n entries are dealt in CSR order, m = ceil(n / WG) consecutive ones per work-item.
 * Each work-item gathers its entries once through the CSR indices (signal, norm, and the
 * variance where the model needs it) and keeps the first R of them in registers for every
 * clipping and integration pass; a clipped entry gets norm 0 there. Bins larger than WG * R
 * (none with the default R, which the host sizes from the largest bin) keep the entries beyond R
 * per work-item in `ovf` (global: nnz signals, nnz norms and, for the poisson and hybrid models,
 * nnz variances, indexed by the CSR position). So the frame is read from global memory once, not
 * once per pass.
 *
 * The count of a kept entry is its coefficient: the preprocessed frames' count is 1 for every
 * valid pixel (faid_pixel_v) and 0 for the others, which the validity test rejects.
 *
 * Arithmetic is float64 (cl_khr_fp64; H100/H200 run it at full rate): every device then makes
 * the same clipping decisions as the reference up to the rounding of sums taken in another
 * order. The azimuthal model's recurrence VV += w^2 (S_a/O_a - x)((S_a + c s)/(O_a + w) - x)
 * needs, for every entry, the sums S_a, O_a of the kept entries before it in CSR order: each
 * work-item's sums, an exclusive scan of those across the work-group (raking: 32 chunks scanned
 * sequentially, then their prefixes), then its entries in order from that prefix. The term is
 * evaluated as c^2 D^2 / (O_a (O_a + w)) with D = s O_a - n S_a (the same value: w (S_a/O_a -
 * x) = c D / O_a and the second factor is O_a / (O_a + w) times the first): one division per
 * entry instead of three. The clip test |s/n - mean| > k std is evaluated as |s - mean n| > k
 * std |n| and, only where the two sides are within 1e-12 of each other, as the reference writes
 * it: the same decisions without a division per entry and pass. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#ifndef WG
#define WG 256
#endif
#ifndef R
#define R 16
#endif
#ifndef LM
#define LM 0
#endif
#ifndef HAS_COEF
#define HAS_COEF 0
#endif
#ifndef SC_EM
#define SC_EM 1
#endif
#ifndef SC_GB
#define SC_GB 0
#endif
#ifndef SC_CG
#define SC_CG 0
#endif
#ifndef SC_CGU
#define SC_CGU 4
#endif
#ifndef SC_PERM
#define SC_PERM 0
#endif
/* SC_AZSEL (issue 17, round 8; FAID_PEAKS_KOPTS=-DSC_AZSEL=1): the azimuthal recurrence takes
 * every entry through sc_az_sel, selects instead of a branch per entry; the same bits */
#ifndef SC_AZSEL
#define SC_AZSEL 0
#endif
/* a kept entry into the recurrence, or with SC_AZSEL any entry (a not-kept one selects a) */
#if SC_AZSEL
#define SC_AZ(a, c, s, nn) ((a) = sc_az_sel((a), (c), (s), (nn)))
#else
#define SC_AZ(a, c, s, nn)                                                                     \
    do {                                                                                       \
        if ((nn) != 0.0f)                                                                      \
            (a) = sc_az_entry((a), (c), (s), (nn));                                            \
    } while (0)
#endif

/* SC_PERM (issue 17, round 6; FAID_SIGCLIP_PERM): raw, dark and normp hold the frame and its
 * corrections in the matrix' entry order (peaks/bg_permute.cl), so entry k's pixel is element k
 * and the CSR indices are not read; otherwise the pixel of entry k is the index of entry k.
 * Either way the same values reach the same sums. */
#if SC_PERM
#if !defined(PK_FUSED)
#error "SC_PERM reads the raw frame: build it with PK_FUSED"
#endif
#define SC_IX(k) (k)
#else
#define SC_IX(k) indices[(k)]
#endif

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
/* SC_GB: the same pixel with its loads independent of each other (written when faid_pixel read
 * raw only where normp was not 0; since round 8 it reads both at once too) */
#if SC_GB > 0 && defined(PK_FUSED)
#define SC_PIXEL(i)                                                                            \
    faid_pixel_v(normp[(i)], (float)((const global raw_t *)raw + raw_off)[(i)],              \
                 do_dark ? dark[(i)] : 0.0f, do_dark, do_dummy, dummy, delta_dummy)
#else
#define SC_PIXEL(i) PK_PIXEL(i)
#endif

#define EM_POISSON 0
#define EM_AZIMUTHAL 1
#define EM_HYBRID 2

/* the poisson and hybrid models sum the variance */
#define NEEDVAR (SC_EM != EM_AZIMUTHAL)
/* overflow entries as arrays of nnz floats: signal, norm (and variance) */
#define OVF_S(k) ovf[(k)]
#define OVF_N(k) ovf[nnz + (k)]
#define OVF_V(k) ovf[2 * nnz + (k)]
/* Storage index in ovf of a work-item's i-th overflow entry: its CSR position when LM is 0 (the
 * register kernel as measured), else transposed within the bin (entry i of every work-item side
 * by side, so that a pass over them reads consecutive floats across the work-group). Entry i of
 * work-item lid is its CSR position kb + R + LM + i; k0 + i WG + lid stays inside the bin's
 * [k0, k1): i < m - R - LM and (m - 1) WG < k1 - k0. */
#if LM > 0
#define OVI(i) (k0 + (i) * WG + lid)
#else
#define OVI(i) (kb + R + (i))
#endif
/* SC_GB: overflow entry i0 + u of this work-item (of nov) into bs[u], bn[u] (norm 0 past the
 * end); called for every u of a batch in an unrolled loop before any is used */
#define OVF_LOAD(i0, u, bs, bn)                                                                \
    {                                                                                          \
        const int ok_ = (i0) + (u) < nov;                                                      \
        const int o_ = OVI(ok_ ? (i0) + (u) : 0);                                              \
        bs[(u)] = ok_ ? OVF_S(o_) : 0.0f;                                                      \
        bn[(u)] = ok_ ? OVF_N(o_) : 0.0f;                                                      \
    }
/* a local entry's place: entry j of every work-item side by side (no bank conflicts) */
#define LMI(j) ((j) * WG + lid)

/* SC_CG, the coalesced gather (issue 17, round 5). Measured on one H100 (main b0d344a, EIGER 4M,
 * 1000 bins, fused, faid-bench one frame alone): the clip takes 111 us with 0 cycles and 159 us
 * with 5 (poisson 150 / 194), so the gather and the first integration are most of it, not the
 * cycles. Without SC_CG each work-item loads its own m = ceil(n / WG) consecutive entries: the 32
 * lanes of a warp read 32 places m entries apart, each load instruction 32 sectors of 32 bytes
 * for 4 useful bytes each (about 13.5 M sector requests per frame for 4.5 M entries x 3 arrays:
 * tens of microseconds of L1/L2 throughput alone), each a chain index -> pixel. With SC_CG the
 * work-group walks the bin in chunks of WG x SC_CGU entries, entry k0 + c + u WG + lid for lane
 * lid: the indices load coalesced and, consecutive CSR entries of a radial bin being mostly
 * neighbouring pixels, so do normp, raw and dark; each lane issues its SC_CGU entries' loads
 * before it uses any. Each entry (the same faid_pixel_v, sc_ok and coefficient tests) goes where
 * its owner o = p / m keeps its entry j = p - o m:
 *   j < R           a staging area in local memory (o R + j), read into the owner's registers
 *                   after one barrier (compile-time register indices only); the area is the
 *                   scan's arrays (12 KB for 256 work-items, dead until the first pass) where it
 *                   fits (R x (2 or 3 floats) <= 12: R <= 4 with the variance), else an array of
 *                   its own;
 *   R <= j < R + L  local memory in the owner's CSR order, o L + j - R with L = min(m - R, LM)
 *                   entries per owner, padded by one every 32 (q + q / 32) so that the passes'
 *                   reads at a stride of L do not all fall on one bank (LMX);
 *   beyond          ovf in the same places as without SC_CG (entry-major for LM > 0, the CSR
 *                   position for LM 0: written coalesced there).
 * Every work-item then holds the same values in the same places of its own order as without
 * SC_CG, and sums them in the same order: the same bits (tests/unit/test_peaks.c,
 * test_sigclip_cg). Registers (PoCL reports none; FAID_CL_VERBOSE=1 on NVIDIA's OpenCL does:
 * gpu-run.sh's "registers" lines; the probe: 128 a work-item, 2 work-groups per SM): the
 * gather's live state falls from SC_GB's batch (8 indices and 8 x normp, raw, dark, beside the
 * R register entries' own loads: about 40) to SC_CGU indices and SC_CGU x 3 loads (16 with 4);
 * the passes keep theirs (the float64 sums, thresholds, the R entries, SC_GB's 16 floats of an
 * overflow batch), so the kernel's count may now be the passes': gpu-run.sh's cggb0 (no batches
 * in the passes) and cgr1 (1 in registers) measure that. */
#define CGP(q) ((q) + ((q) >> 5))
/* SC_ORDER (issue 17, round 8; 0 by default, FAID_PEAKS_KOPTS=-DSC_ORDER=1): work-group g takes
 * bin order[g], the host's list of the bins from the largest to the smallest (ties in bin
 * order), so that the launch's last work-groups are its smallest bins; else bin g. Why: round
 * 8's profile of the clip at its register cap (one H100): the SMs active 56 % of the elapsed
 * cycles, 1,000 bins of 0 to 11,396 entries in 2.5 rounds of 396 work-groups leaving a tail of
 * large bins. Each work-group's bin is computed as before: the same bits. Measured (call i): one
 * frame alone 151 -> 143 us, but clip + picker pipelined 4,037 -> 3,917 frames/s (frames in
 * flight fill one launch's tail with the next one's work-groups already), so it stays off. */
#ifndef SC_ORDER
#define SC_ORDER 0
#endif
/* SC_ONCE (issue 17, round 9; 1 by default, FAID_PEAKS_KOPTS=-DSC_ONCE=0: every work-item as
 * before): a pass's totals are turned into the bin's mean, std and the next cycle's threshold by
 * work-item 0 alone, which hands them to the others through local memory at the barrier that
 * ended the pass already; before, each of the 256 work-items summed the 32 chunk variances and
 * took the float64 division, two square roots and the logarithm itself. Round 8's instruction
 * profile of the clip (one H100, tests/bench/results/h100-2026-11-27-round8-probe, call i):
 * that block, 335 instructions a warp and pass, was 8.4 % of the kernel's 40.4 M warp
 * instructions. The values stay in local memory (gs) and are read where they are used (the
 * loop's break, the next cycle's clip test, the result), so that no float64 of them is live in
 * registers across a pass (the kernel runs at a cap of 80 registers, FAID_SIGCLIP_MAXREG). The
 * same operations on the same values: the same bits. */
#ifndef SC_ONCE
#define SC_ONCE 1
#endif
/* p / m for the gather's entry p (0 <= p < 2^24) and the bin's m (>= 1): the float quotient by
 * the bin's reciprocal (rm, computed once), off by at most one, then corrected: the integer
 * quotient exactly, in 6 instructions instead of the integer division's 20 or so (round 8's
 * profile: 8 divisions a chunk) */
#ifndef SC_FDIV
#define SC_FDIV 1 /* FAID_PEAKS_KOPTS=-DSC_FDIV=0: the integer division */
#endif
#if SC_FDIV
#define SC_DIVM(p) sc_divm((p), m, rm)
#else
#define SC_DIVM(p) ((p) / m)
#endif
/* SC_CG 2: the chunk's tile (the registers' and the overflow entries; the local ones are stored
 * directly as with 1): entry p of the chunk at CGP(p - c0), the signals, then the norms (then the
 * variances), TCAP floats each. After the chunk's barrier each work-item takes its register
 * entries that lie in the chunk (an unrolled test per register), and the work-group writes the
 * chunk's overflow entries entry-major, consecutive work-items on consecutive owners: runs of
 * about WG SC_CGU / m floats instead of a 32-byte sector per entry (on the benchmark's matrix
 * 1.36 M overflow entries with R 4 + LM 12, 2.7 M scattered sector writes per frame with 1:
 * more than half of the 4.8 M sectors its gather reads). In the scan's arrays (12 WG floats)
 * where the tile fits (SC_CGU <= 5 without the variance, <= 3 with it), else an array of its own;
 * two barriers per chunk. The padding keeps the transposing reads (a stride of m) at 2-way bank
 * conflicts or fewer for m up to 48 but 31 (31-way: the bins of 7,681-7,936 entries with 256
 * work-items, a few reads per work-item and chunk) and 43 (3-way). */
#define TCAP (WG * SC_CGU + (WG * SC_CGU) / 32 + 1)
#define NVAL (NEEDVAR ? 3 : 2)
#if SC_CG && LM > 0
#define LMX(j) CGP(lid * lml + (j))
#define LMCAP (LM * WG + (LM * WG) / 32 + 1)
#else
#define LMX(j) LMI(j)
#define LMCAP (LM * WG)
#endif
#if SC_CG && LM > 0
#define CG_OVI(o, i, p) (k0 + (i) * WG + (o))
#else
#define CG_OVI(o, i, p) (k0 + (p))
#endif
/* SC_CG: a pixel's loads issued independently of each other (as SC_PIXEL with SC_GB) */
#ifdef PK_FUSED
#define CG_PIXEL(i)                                                                            \
    faid_pixel_v(normp[(i)], (float)((const global raw_t *)raw + raw_off)[(i)],              \
                 do_dark ? dark[(i)] : 0.0f, do_dark, do_dummy, dummy, delta_dummy)
#else
#define CG_PIXEL(i) pre4[(i)]
#endif
/* one entry (signal s, norm nn, variance v) into its places S and N and, where the model keeps
 * the variance, V (else the expression V is dropped unexpanded: lmv, rv and the ovf variances
 * exist only then): the gathers' one way to store an entry, in every layout */
#if NEEDVAR
#define SC_PUT(S, N, V, s, nn, v)                                                              \
    do {                                                                                       \
        S = (s);                                                                               \
        N = (nn);                                                                              \
        V = (v);                                                                               \
    } while (0)
#else
#define SC_PUT(S, N, V, s, nn, v)                                                              \
    do {                                                                                       \
        S = (s);                                                                               \
        N = (nn);                                                                              \
    } while (0)
#endif
/* an entry's variance as the sums take it: 0 where the model keeps none (the azimuthal model's
 * ovf holds no variances, its kernel no rv) */
#if NEEDVAR
#define OVF_VAR(k) OVF_V(k)
#define REG_VAR(j) rv[(j)]
#else
#define OVF_VAR(k) 0.0f
#define REG_VAR(j) 0.0f
#endif
#if NEEDVAR && LM > 0
#define LM_VAR(j) lmv[LMX(j)]
#else
#define LM_VAR(j) 0.0f
#endif
/* a register entry's coefficient */
#if HAS_COEF
#define REG_COEF(j) ((double)rc[(j)])
#else
#define REG_COEF(j) 1.0
#endif

/* raking: NCH chunks of CH work-items */
#define NCH (WG < 32 ? WG : 32)
#define CH (WG / NCH)
/* SC_RAKE (issue 17, round 8; 0 by default, FAID_PEAKS_KOPTS=-DSC_RAKE=1): the same raking sums
 * in the same order, the per-work-item values chunk-major in local memory, work-item i at
 * RK(i) = (i % CH) NCH + i / CH, so that the NCH work-items walking their chunks read
 * consecutive doubles (in work-item order they are 8 doubles apart with 256 work-items, a
 * 16-way bank conflict on every read of the 32 raking work-items). Round 8's profile of the clip
 * (one H100) had the two barriers after the raking's phases hold 16 % of its stall samples, but
 * the layout lost: clip + picker 3,867 frames/s pipelined against 4,039 without it, the clip
 * alone 159 us against 151 (the same call; every work-item's store is then the conflicted
 * access, 8 doubles apart, where only the 32 raking work-items' reads were). (Summing the six
 * chunk sums with six work-items, one each, gave PoCL 5 other bits with the hybrid model and was
 * dropped untried.) SC_RAKE=2: work-item order with a double of padding after each chunk,
 * work-item i at RK(i) = i + i / CH: the raking work-items' reads 9 doubles apart (18 banks: a
 * permutation of the banks over each half-warp, no conflict) and every work-item's store
 * consecutive but for one skip a chunk; LW = WG + NCH doubles an array: NCH x 52 bytes (1,664
 * with 256 work-items) that the host's local-memory check does not count (a benchmark knob; it
 * fits NVIDIA's 48 KB with the default shares of every model: 42.6 and 48.9 KB). */
#ifndef SC_RAKE
#define SC_RAKE 0
#endif
#if SC_RAKE == 2
#define RK(i) ((i) + (i) / CH)
#define LW (WG + NCH)
#elif SC_RAKE
#define RK(i) (((i) % CH) * NCH + (i) / CH)
#define LW WG
#else
#define RK(i) (i)
#define LW WG
#endif

static inline int sc_divm(int p, int m, float rm)
{
    int o = (int)((float)p * rm);
    o -= o * m > p;
    o += (o + 1) * m <= p;
    return o;
}

static inline int sc_ok(float4 q)
{
    return isfinite(q.s0) && isfinite(q.s1) && isfinite(q.s2) && q.s2 != 0.0f && q.s3 != 0.0f;
}

static inline float sc_coef(const global float *coefs, int k)
{
#if HAS_COEF
    return coefs[k];
#else
    return 1.0f;
#endif
}

/* A work-item's sums over its kept entries: S = sum c s, O = sum w (w = c n), sum w^2, the count
 * sum c and, for the poisson and hybrid models, sum c^2 var. */
typedef struct {
    double s, w, n2, c, var;
} sc_sums;

/* t with one entry (coefficient c, signal s, norm nn, variance v) taken in, or taken out when
 * out (a clipped entry): the one place of the float64 arithmetic of the sums, for the entries in
 * registers and in ovf alike. */
static inline sc_sums sc_sums_entry(sc_sums t, double c, float s, float nn, float v, int out)
{
    const double w = c * (double)nn;
    if (out) {
        t.s -= c * (double)s;
        t.w -= w;
        t.n2 -= w * w;
        t.c -= c;
#if NEEDVAR
        t.var -= c * c * (double)v;
#endif
    } else {
        t.s += c * (double)s;
        t.w += w;
        t.n2 += w * w;
        t.c += c;
#if NEEDVAR
        t.var += c * c * (double)v;
#endif
    }
    return t;
}

/* The azimuthal variance's recurrence over a work-item's kept entries in CSR order: s and o are
 * the sums S_a, O_a of the kept entries before the next one, vv the variance so far. */
typedef struct {
    double s, o, vv;
} sc_az;

/* a with one kept entry (coefficient c, signal s, norm nn) taken in (the term of the kernel's
 * header comment). */
static inline sc_az sc_az_entry(sc_az a, double c, float s, float nn)
{
    const double sd = (double)s, nd = (double)nn;
    const double w = c * nd;
    if (a.o != 0.0) {
        const double dd = fma(sd, a.o, -(nd * a.s));
        a.vv += c * c * (dd * dd) / (a.o * (a.o + w));
    }
    a.s += c * sd;
    a.o += w;
    return a;
}

/* sc_az_entry for any entry, kept (nn != 0) or not (a unchanged), without a branch (SC_AZSEL):
 * the same operations on the same values where it takes the entry in, selects where it does
 * not, so a work-item's divisions do not each wait for the previous entry's test. */
static inline sc_az sc_az_sel(sc_az a, double c, float s, float nn)
{
    const int kept = nn != 0.0f;
    const double sd = (double)s, nd = (double)nn;
    const double w = c * nd;
    const double dd = fma(sd, a.o, -(nd * a.s));
    const double term = c * c * (dd * dd) / (a.o * (a.o + w));
    a.vv = kept && a.o != 0.0 ? a.vv + term : a.vv;
    a.s = kept ? a.s + c * sd : a.s;
    a.o = kept ? a.o + w : a.o;
    return a;
}


/* Whether a kept entry (signal s, norm nn) is clipped: the reference's |s/nn - aver| > thr
 * (thr = k std). Decided in float32 as |s - aver nn| > thr |nn| where the two sides differ by more
 * than 1e-5 of their magnitude (the float32 rounding is below 4e-7 of it), else in float64 as
 * the reference writes it: the same decisions at a fraction of the float64 work. */
static inline int sc_clip(float s, float nn, float averf, float thrf, double aver, double thr)
{
    const float an = averf * nn;
    const float t = fabs(s - an), lim = thrf * fabs(nn);
    if (fabs(t - lim) > 1e-5f * (fabs(s) + fabs(an) + lim))
        return t > lim;
    return fabs((double)s / (double)nn - aver) > thr;
}

/* A pass's results from its totals g (S, O, sum w^2, count, sum c^2 var) and the NCH chunks'
 * azimuthal variances tv (az: the variance is theirs, else g's sum c^2 var): a1 the variance
 * sum, a2 O, a3 sum w^2, a4 the count, the mean S / O and std sqrt(a1 / a3) (NAN where a3 is
 * 0). The one place of this arithmetic, for SC_ONCE's work-item 0 and for every work-item
 * without it. */
typedef struct {
    double a1, a2, a3, a4, aver, std;
} sc_stats;

static inline sc_stats sc_pass_stats(const local double *g, const local double *tv, int az)
{
    double vtot = 0.0;
    for (int i = 0; i < NCH; i++)
        vtot += tv[i];
    sc_stats r;
    r.a1 = az ? vtot : g[4];
    r.a2 = g[1];
    r.a3 = g[2];
    r.a4 = g[3];
    if (r.a3 > 0.0) {
        r.aver = g[0] / r.a2;
        r.std = sqrt(r.a1 / r.a3);
    } else {
        r.aver = r.std = NAN;
    }
    return r;
}

/* The next cycle's clipping threshold k std for a pass's count a4 and std: k the larger of the
 * cutoff and Chauvenet's sqrt(2 log(max(a4, 3) / sqrt(2 pi))) */
static inline double sc_threshold(double a4, double std, float cutoff)
{
    const double nkept = a4 > 3.0 ? a4 : 3.0;
    double kk = sqrt(2.0 * log(nkept / sqrt(2.0 * M_PI)));
    if ((double)cutoff > kk)
        kk = (double)cutoff;
    return kk * std;
}

/* One work-group per bin; out[out_off ...] receives 4 arrays of nbins floats: mean, std, sem,
 * count.
 *
 * Written as one loop over passes (pass 0: the first integration; pass c >= 1: clipping cycle c,
 * then an integration) with every barrier in the kernel body and taken by every pass and model:
 * with functions holding barriers, PoCL 5's LLVM 15 crashed while inlining them. */
kernel void faid_sigma_clip(const global float4 *pre4, const global float *coefs,
                            const global int *indices, const global int *indptr,
                            global float *ovf, const int nbins, const float cutoff,
                            const int cycles, const float empty, global float *out,
                            const int out_off,
                            const global uchar *raw, const global float *dark,
                            const global float *normp, const uint raw_off, const int do_dark,
                            const int do_dummy, const float dummy, const float delta_dummy,
                            const global int *order)
{
    /* per work-item sums: S, O, sum w^2, count, sum c^2 var; removed; vv (with SC_CG one array,
     * the gather's staging area or tile before the first pass; without it the arrays as they
     * were, so that the default kernel is the one measured) */
#if SC_CG
    local double lsc[6 * LW];
    local double *const l0 = lsc, *const l1 = lsc + LW, *const l2 = lsc + 2 * LW;
    local double *const l3 = lsc + 3 * LW, *const l4 = lsc + 4 * LW, *const lv = lsc + 5 * LW;
#else
    local double l0[LW], l1[LW], l2[LW], l3[LW], l4[LW], lv[LW];
#endif
    local int lr[LW];
    /* per chunk: sums, then exclusive prefixes of S and O */
    local double t0[NCH], t1[NCH], t2[NCH], t3[NCH], t4[NCH], tv[NCH];
    local int tr[NCH];
    local double p0[NCH], p1[NCH];
    local double g[5];
#if SC_ONCE
    /* the pass's a1 .. a4, mean, std and the next cycle's threshold, from work-item 0 */
    local double gs[7];
#endif
    local int gr;
#if LM > 0
    /* the entries after the first R of each work-item: signal, norm (0: not valid or clipped) and
     * the variance where the model needs it */
    local float lms[LMCAP], lmn[LMCAP];
#if NEEDVAR
    local float lmv[LMCAP];
#endif
#endif
#if SC_CG == 1
#if R * NVAL <= 12
    local float *const stg = (local float *)lsc;
#else
    local float stg[R * WG * NVAL];
#endif
#elif SC_CG == 2
#if TCAP * NVAL <= 12 * WG
    local float *const tile = (local float *)lsc;
#else
    local float tile[TCAP * NVAL];
#endif
#endif
#if SC_ORDER
    const int b = order[get_group_id(0)];
#else
    (void)order;
    const int b = get_group_id(0);
#endif
    const int lid = get_local_id(0);
    if (b >= nbins)
        return;
    const int k0 = indptr[b], k1 = indptr[b + 1];
    const int nnz = indptr[nbins];
    const int m = (k1 - k0 + WG - 1) / WG;
    const float rm = 1.0f / (float)max(m, 1); /* SC_DIVM's */
    const int kb = k0 + lid * m;                   /* this work-item's first entry */
    const int ke = min(kb + m, k1);                /* and its end */
    const int nown = ke > kb ? ke - kb : 0;        /* entries it owns */
    const int nreg = nown < R ? nown : R;          /* of which in registers */
    const int nlm = min(max(nown - R, 0), LM);     /* in local memory */
    const int kov = kb + R + LM;                   /* CSR position of its first overflow entry */
    const int nov = ke - kov;                      /* its overflow entries (<= 0: none) */
    const int hybrid = SC_EM == EM_HYBRID;
    int az = SC_EM == EM_AZIMUTHAL || (hybrid && cycles > 0);
    double a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0;
    double aver = NAN, std = NAN;

    /* the entries, gathered once (norm 0: not valid or clipped) */
    float rs[R], rn[R];
#if NEEDVAR
    float rv[R];
#endif
#if HAS_COEF
    float rc[R];
#endif
#if SC_CG
    /* local entries per work-item in the CSR-order layout (LMX) */
    const int lml = min(max(m - R, 0), LM);
#if SC_CG == 2
#pragma unroll
    for (int j = 0; j < R; j++)
        SC_PUT(rs[j], rn[j], rv[j], 0.0f, 0.0f, 0.0f);
#endif
    {
        const int n = k1 - k0;
        for (int c0 = 0; c0 < n; c0 += WG * SC_CGU) {
            int ix[SC_CGU];
            float cf[SC_CGU];
            float4 q[SC_CGU];
            /* every load of the chunk issued before any is used: the loads past the bin's end
             * read its last entry and the pixel 0 (always there), and selects drop them; a
             * conditional load was issued only after the previous entry's test (issue 17,
             * round 8's profile: 16 round trips a chunk one after the other) */
#pragma unroll
            for (int u = 0; u < SC_CGU; u++) {
                const int p = c0 + u * WG + lid;
                const int kk = k0 + min(p, n - 1);
                const int iv = SC_IX(kk);
                const float cv = sc_coef(coefs, kk);
                ix[u] = p < n ? iv : -1;
                cf[u] = p < n ? cv : 0.0f;
            }
#ifdef PK_FUSED
            float pn[SC_CGU], pv[SC_CGU], pd[SC_CGU];
#pragma unroll
            for (int u = 0; u < SC_CGU; u++)
                pn[u] = normp[max(ix[u], 0)];
#pragma unroll
            for (int u = 0; u < SC_CGU; u++)
                pv[u] = (float)((const global raw_t *)raw + raw_off)[max(ix[u], 0)];
#pragma unroll
            for (int u = 0; u < SC_CGU; u++)
                pd[u] = do_dark ? dark[max(ix[u], 0)] : 0.0f;
#pragma unroll
            for (int u = 0; u < SC_CGU; u++) {
                const float4 qv =
                    faid_pixel_v(pn[u], pv[u], pd[u], do_dark, do_dummy, dummy, delta_dummy);
                q[u] = ix[u] >= 0 ? qv : (float4)(0.0f);
            }
#else
#pragma unroll
            for (int u = 0; u < SC_CGU; u++)
                q[u] = pre4[max(ix[u], 0)];
#pragma unroll
            for (int u = 0; u < SC_CGU; u++)
                q[u] = ix[u] >= 0 ? q[u] : (float4)(0.0f);
#endif
#pragma unroll
            for (int u = 0; u < SC_CGU; u++) {
                const int p = c0 + u * WG + lid;
                if (p < n) {
                    const int ok = cf[u] != 0.0f && sc_ok(q[u]);
                    const float s = ok ? q[u].s0 : 0.0f, nn = ok ? q[u].s2 : 0.0f;
                    const float v = ok ? q[u].s1 : 0.0f;
                    const int o = SC_DIVM(p), j = p - o * m; /* the owner, its entry */
#if SC_CG == 2
                    if (j < R || (LM > 0 && j >= R + lml)) {
                        const int t = CGP(u * WG + lid);
                        SC_PUT(tile[t], tile[TCAP + t], tile[2 * TCAP + t], s, nn, v);
                    }
#if LM > 0
                    else {
                        const int ql = CGP(o * lml + j - R);
                        SC_PUT(lms[ql], lmn[ql], lmv[ql], s, nn, v);
                    }
#else
                    else {
                        /* the register kernel's layout: coalesced */
                        SC_PUT(OVF_S(k0 + p), OVF_N(k0 + p), OVF_V(k0 + p), s, nn, v);
                    }
#endif
#else
                    if (j < R) {
                        SC_PUT(stg[o * R + j], stg[R * WG + o * R + j],
                               stg[2 * R * WG + o * R + j], s, nn, v);
                    }
#if LM > 0
                    else if (j < R + lml) {
                        const int ql = CGP(o * lml + j - R);
                        SC_PUT(lms[ql], lmn[ql], lmv[ql], s, nn, v);
                    }
#endif
                    else {
                        const int oi = CG_OVI(o, j - R - LM, p);
                        SC_PUT(OVF_S(oi), OVF_N(oi), OVF_V(oi), s, nn, v);
                    }
#endif /* SC_CG == 2 */
                    (void)v;
                }
            }
#if SC_CG == 2
            barrier(CLK_LOCAL_MEM_FENCE);
            const int cend = min(c0 + WG * SC_CGU, n);
            /* this work-item's register entries in the chunk */
#pragma unroll
            for (int j = 0; j < R; j++) {
                const int p = lid * m + j;
                if (j < nreg && p >= c0 && p < cend) {
                    const int t = CGP(p - c0);
                    SC_PUT(rs[j], rn[j], rv[j], tile[t], tile[TCAP + t], tile[2 * TCAP + t]);
                }
            }
#if LM > 0
            /* the chunk's overflow entries, entry i of owners oa, oa + 1, ... side by side */
            {
                const int novo = m - R - LM, oa = c0 / m;
                const int no = (cend - 1) / m - oa + 1;
                for (int e = lid; e < novo * no; e += WG) {
                    const int i = e / no, o = oa + (e - i * no);
                    const int p = o * m + R + LM + i;
                    if (p >= c0 && p < cend) {
                        const int t = CGP(p - c0), oi = k0 + i * WG + o;
                        SC_PUT(OVF_S(oi), OVF_N(oi), OVF_V(oi), tile[t], tile[TCAP + t],
                               tile[2 * TCAP + t]);
                    }
                }
            }
#endif
            /* the next chunk writes the tile */
            barrier(CLK_LOCAL_MEM_FENCE);
#endif
        }
    }
    /* global too: an overflow entry is written by the work-item that loaded it and read by its
     * owner */
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int in = j < nreg;
#if SC_CG == 1
        SC_PUT(rs[j], rn[j], rv[j], in ? stg[lid * R + j] : 0.0f,
               in ? stg[R * WG + lid * R + j] : 0.0f, in ? stg[2 * R * WG + lid * R + j] : 0.0f);
#endif
#if HAS_COEF
        rc[j] = in ? coefs[kb + j] : 0.0f;
#endif
        (void)in;
    }
    /* the staging area is the scan's arrays, which the first pass writes */
    barrier(CLK_LOCAL_MEM_FENCE);
#else
#pragma unroll
    for (int j = 0; j < R; j++) {
        float s = 0.0f, nn = 0.0f, v = 0.0f, c = 0.0f;
        if (j < nreg) {
            const int k = kb + j;
            c = sc_coef(coefs, k);
            const float4 q = SC_PIXEL(SC_IX(k));
            if (c != 0.0f && sc_ok(q)) {
                s = q.s0;
                v = q.s1;
                nn = q.s2;
            }
        }
        rs[j] = s;
        rn[j] = nn;
#if NEEDVAR
        rv[j] = v;
#else
        (void)v;
#endif
#if HAS_COEF
        rc[j] = c;
#endif
    }
#if SC_GB > 0
    /* the entries after the registers (local memory, then ovf), SC_GB at a time: the batch's
     * indices, then its pixels, then the stores, so that a work-item waits for one round trip of
     * each per batch instead of one per entry */
    for (int j0 = R; j0 < nown; j0 += SC_GB) {
        int ix[SC_GB];
        float4 q[SC_GB];
#pragma unroll
        for (int u = 0; u < SC_GB; u++)
            ix[u] = j0 + u < nown ? SC_IX(kb + j0 + u) : -1;
#pragma unroll
        for (int u = 0; u < SC_GB; u++)
            q[u] = ix[u] >= 0 ? SC_PIXEL(ix[u]) : (float4)(0.0f);
#pragma unroll
        for (int u = 0; u < SC_GB; u++) {
            const int j = j0 + u;
            if (j < nown) {
                const int ok = sc_coef(coefs, kb + j) != 0.0f && sc_ok(q[u]);
                const float s = ok ? q[u].s0 : 0.0f, nn = ok ? q[u].s2 : 0.0f;
                const float v = ok ? q[u].s1 : 0.0f;
#if LM > 0
                if (j < R + LM) {
                    SC_PUT(lms[LMI(j - R)], lmn[LMI(j - R)], lmv[LMI(j - R)], s, nn, v);
                } else
#endif
                {
                    const int o = OVI(j - R - LM);
                    SC_PUT(OVF_S(o), OVF_N(o), OVF_V(o), s, nn, v);
                }
                (void)v;
            }
        }
    }
#else
#if LM > 0
    for (int j = 0; j < nlm; j++) {
        const int k = kb + R + j;
        const float c = sc_coef(coefs, k);
        const float4 q = PK_PIXEL(SC_IX(k));
        const int ok = c != 0.0f && sc_ok(q);
        SC_PUT(lms[LMX(j)], lmn[LMX(j)], lmv[LMX(j)], ok ? q.s0 : 0.0f, ok ? q.s2 : 0.0f,
               ok ? q.s1 : 0.0f);
    }
#endif
    for (int k = kov; k < ke; k++) {
        const int o = OVI(k - kov);
        const float c = sc_coef(coefs, k);
        const float4 q = PK_PIXEL(SC_IX(k));
        const int ok = c != 0.0f && sc_ok(q);
        SC_PUT(OVF_S(o), OVF_N(o), OVF_V(o), ok ? q.s0 : 0.0f, ok ? q.s2 : 0.0f,
               ok ? q.s1 : 0.0f);
    }
#endif
#endif /* SC_CG */

    /* this work-item's sums over its kept entries: taken once, then a clipped entry's share is
     * taken out of them (the sums of a work-item left without entries are set to 0 exactly) */
    sc_sums t;
    t.s = t.w = t.n2 = t.c = t.var = 0.0;
    int tkept = 0;
#pragma unroll
    for (int j = 0; j < R; j++) {
        if (rn[j] != 0.0f) {
            t = sc_sums_entry(t, REG_COEF(j), rs[j], rn[j], REG_VAR(j), 0);
            tkept++;
        }
    }
#if LM > 0
    for (int j = 0; j < nlm; j++) {
        const float nn = lmn[LMX(j)];
        if (nn != 0.0f) {
            t = sc_sums_entry(t, (double)sc_coef(coefs, kb + R + j), lms[LMX(j)], nn, LM_VAR(j),
                              0);
            tkept++;
        }
    }
#endif
#if SC_GB > 0
    for (int i0 = 0; i0 < nov; i0 += SC_GB) {
        float bs[SC_GB], bn[SC_GB];
#pragma unroll
        for (int u = 0; u < SC_GB; u++)
            OVF_LOAD(i0, u, bs, bn)
#pragma unroll
        for (int u = 0; u < SC_GB; u++) {
            if (bn[u] != 0.0f) {
                t = sc_sums_entry(t, (double)sc_coef(coefs, kov + i0 + u), bs[u], bn[u],
                                  OVF_VAR(OVI(i0 + u)), 0);
                tkept++;
            }
        }
    }
#else
    for (int k = kov; k < ke; k++) {
        const int o = OVI(k - kov);
        const float nn = OVF_N(o);
        if (nn != 0.0f) {
            t = sc_sums_entry(t, (double)sc_coef(coefs, k), OVF_S(o), nn, OVF_VAR(o), 0);
            tkept++;
        }
    }
#endif

    for (int pass = 0; pass <= cycles; pass++) {
        int rem = 0;
        if (pass > 0) {
#if SC_ONCE
            const double pav = gs[4], thr = gs[6];
#else
            const double pav = aver, thr = sc_threshold(a4, std, cutoff);
#endif
            const float averf = (float)pav, thrf = (float)thr;
#pragma unroll
            for (int j = 0; j < R; j++) {
                if (rn[j] != 0.0f && sc_clip(rs[j], rn[j], averf, thrf, pav, thr)) {
                    t = sc_sums_entry(t, REG_COEF(j), rs[j], rn[j], REG_VAR(j), 1);
                    rn[j] = 0.0f;
                    rem++;
                }
            }
#if LM > 0
            for (int j = 0; j < nlm; j++) {
                const float nn = lmn[LMX(j)], s = lms[LMX(j)];
                if (nn != 0.0f && sc_clip(s, nn, averf, thrf, pav, thr)) {
                    t = sc_sums_entry(t, (double)sc_coef(coefs, kb + R + j), s, nn, LM_VAR(j), 1);
                    lmn[LMX(j)] = 0.0f;
                    rem++;
                }
            }
#endif
#if SC_GB > 0
            for (int i0 = 0; i0 < nov; i0 += SC_GB) {
                float bs[SC_GB], bn[SC_GB];
#pragma unroll
                for (int u = 0; u < SC_GB; u++)
                    OVF_LOAD(i0, u, bs, bn)
#pragma unroll
                for (int u = 0; u < SC_GB; u++) {
                    if (bn[u] != 0.0f && sc_clip(bs[u], bn[u], averf, thrf, pav, thr)) {
                        const int o = OVI(i0 + u);
                        t = sc_sums_entry(t, (double)sc_coef(coefs, kov + i0 + u), bs[u], bn[u],
                                          OVF_VAR(o), 1);
                        OVF_N(o) = 0.0f;
                        rem++;
                    }
                }
            }
#else
            for (int k = kov; k < ke; k++) {
                const int o = OVI(k - kov);
                const float nn = OVF_N(o);
                if (nn != 0.0f && sc_clip(OVF_S(o), nn, averf, thrf, pav, thr)) {
                    t = sc_sums_entry(t, (double)sc_coef(coefs, k), OVF_S(o), nn, OVF_VAR(o), 1);
                    OVF_N(o) = 0.0f;
                    rem++;
                }
            }
#endif
            tkept -= rem;
            if (tkept == 0)
                t.s = t.w = t.n2 = t.c = t.var = 0.0;
        }
        {
            const int q = RK(lid);
            l0[q] = t.s;
            l1[q] = t.w;
            l2[q] = t.n2;
            l3[q] = t.c;
            l4[q] = t.var;
            lr[q] = rem;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* raking: chunk lid's inclusive scan of S and O in place, and its sums */
        if (lid < NCH) {
            const int i0 = lid * CH;
            double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0;
            int sr = 0;
            for (int i = i0; i < i0 + CH; i++) {
                const int q = RK(i);
                s0 += l0[q];
                s1 += l1[q];
                l0[q] = s0;
                l1[q] = s1;
                s2 += l2[q];
                s3 += l3[q];
                s4 += l4[q];
                sr += lr[q];
            }
            t0[lid] = s0;
            t1[lid] = s1;
            t2[lid] = s2;
            t3[lid] = s3;
            t4[lid] = s4;
            tr[lid] = sr;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid == 0) {
            double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0;
            int sr = 0;
            for (int i = 0; i < NCH; i++) {
                p0[i] = s0;
                p1[i] = s1;
                s0 += t0[i];
                s1 += t1[i];
                s2 += t2[i];
                s3 += t3[i];
                s4 += t4[i];
                sr += tr[i];
            }
            g[0] = s0;
            g[1] = s1;
            g[2] = s2;
            g[3] = s3;
            g[4] = s4;
            gr = sr;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int removed = gr;
        if (pass > 0 && removed == 0 && !hybrid)
            break;
        if (pass > 0) {
            int last = removed == 0 || pass >= cycles;
            az = SC_EM == EM_AZIMUTHAL || (hybrid && !last);
        }
        /* the azimuthal variance: this work-item's entries in order from its prefix */
        double vv = 0.0;
        if (az) {
            const int ch = lid / CH;
            sc_az a;
            a.s = p0[ch] + (lid % CH ? l0[RK(lid - 1)] : 0.0);
            a.o = p1[ch] + (lid % CH ? l1[RK(lid - 1)] : 0.0);
            a.vv = 0.0;
#pragma unroll
            for (int j = 0; j < R; j++)
                SC_AZ(a, REG_COEF(j), rs[j], rn[j]);
#if LM > 0
            for (int j = 0; j < nlm; j++)
                SC_AZ(a, (double)sc_coef(coefs, kb + R + j), lms[LMX(j)], lmn[LMX(j)]);
#endif
#if SC_GB > 0
            for (int i0 = 0; i0 < nov; i0 += SC_GB) {
                float bs[SC_GB], bn[SC_GB];
#pragma unroll
                for (int u = 0; u < SC_GB; u++)
                    OVF_LOAD(i0, u, bs, bn)
#pragma unroll
                for (int u = 0; u < SC_GB; u++)
                    SC_AZ(a, (double)sc_coef(coefs, kov + i0 + u), bs[u], bn[u]);
            }
#else
            for (int k = kov; k < ke; k++) {
                const int o = OVI(k - kov);
                SC_AZ(a, (double)sc_coef(coefs, k), OVF_S(o), OVF_N(o));
            }
#endif
            vv = a.vv;
        }
        lv[RK(lid)] = vv;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < NCH) {
            double s = 0.0;
            for (int i = lid * CH; i < lid * CH + CH; i++)
                s += lv[RK(i)];
            tv[lid] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#if SC_ONCE
        if (lid == 0) {
            const sc_stats st = sc_pass_stats(g, tv, az);
            gs[0] = st.a1;
            gs[1] = st.a2;
            gs[2] = st.a3;
            gs[3] = st.a4;
            gs[4] = st.aver;
            gs[5] = st.std;
            gs[6] = sc_threshold(st.a4, st.std, cutoff);
        }
        /* every work-item has read gr before the next pass writes it, and gs is written (read
         * where it is used: the break below, the next pass's threshold, the result) */
        barrier(CLK_LOCAL_MEM_FENCE);
        /* (the next cycle's "nothing left to clip" test, here rather than before its first
         * barrier: PoCL 3.1 crashed on a break there once the kernel had loops of data-dependent
         * length) */
        if ((pass > 0 && removed == 0) || gs[1] == 0.0 || gs[3] == 0.0)
            break;
#else
        {
            const sc_stats st = sc_pass_stats(g, tv, az);
            a1 = st.a1;
            a2 = st.a2;
            a3 = st.a3;
            a4 = st.a4;
            aver = st.aver;
            std = st.std;
        }
        /* every work-item has read g, gr and tv before the next pass writes them */
        barrier(CLK_LOCAL_MEM_FENCE);
        if ((pass > 0 && removed == 0) || a2 == 0.0 || a4 == 0.0)
            break;
#endif
    }
    global float *bg = out + out_off;
    if (lid == 0) {
#if SC_ONCE
        /* the last pass's, written by this work-item */
        a1 = gs[0];
        a2 = gs[1];
        a3 = gs[2];
        a4 = gs[3];
        aver = gs[4];
        std = gs[5];
#endif
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
