/* bslz4.cl: block-parallel decoding of bitshuffle-LZ4 chunks (HDF5 filter 32008, DECTRIS "bslz4")
 * and of HDF5-LZ4 chunks (DECTRIS v2 "lz4"), one work-group per block, OpenCL 1.2 C.
 *
 * The host (faid_clcodec.c) parses and validates the block table on the CPU and uploads it as a
 * packed uint32 array: offset[0..nblocks-1] (byte offset of block k's LZ4 data inside the chunk,
 * after its 4-byte length prefix) followed by csize[0..nblocks-1] (its compressed length).
 *
 * Launch: global size (nblocks + 1) x WG, local size WG. Group k < nblocks decodes block k; group
 * nblocks copies the raw tail (0 bytes is fine), so the tail is written whether or not there is a
 * partial block. (bslz4_decode with BPG 2: ceil(nblocks / 2) + 1 groups, group k < ceil(nblocks /
 * 2) decoding blocks 2k and 2k + 1, the next one the tail.)
 *
 * Build constants (-D):
 *   ELEM_SIZE   element size in bytes, 1, 2, 4 or 8 (bslz4_decode only)
 *   BLOCK_CAP   decoded bytes a group can hold in local memory, a multiple of 64; any block size
 *               of the chunk header up to BLOCK_CAP is decoded, the host rejects larger ones
 *   WG          work-group size (a power of two, at least 8); 32 = one warp per block on NVIDIA
 *               was the fastest measured (the parse is serial, so more groups beat wider ones)
 *   CMP_LOCAL   0 (default): parse the compressed block straight from global memory; 1: copy it
 *               into local memory first (CMP_CAP more bytes per group; slightly slower on H200;
 *               on an H100 one frame alone decodes 10 % faster, 61 vs 67 us, but frames in
 *               flight 11 % slower, 11,400 vs 12,800 frames/s decode + integrate: fewer groups
 *               fit beside the other frames' kernels)
 *   DEC_GLOBAL  0 (default): the decoded block in local memory; 1: in device memory, so that local
 *               memory no longer limits the blocks in flight (issue 17, GPU figures pending).
 *               Why: one frame decodes in 66 us on an H100 whatever its sequence count, and with
 *               frames in flight decode + integrate take 83.5 us per frame; 8 KiB of decoded
 *               block (+ 1 KiB the hardware reserves per block on sm_90) lets at most 25 groups
 *               of one warp run on an SM (228 KB), about 1.5 EIGER 4M frames (2,190 blocks) on
 *               132 SMs, and each block is a long serial chain, so throughput is latency x
 *               occupancy, not bytes (2.69 MB read + 17.9 MB written is ~6 us at 3.35 TB/s).
 *               bslz4_decode takes one more argument, a scratch of nblocks x
 *               SCRATCH_STRIDE(block_bytes) bytes (faid_clcodec.c keeps one per queue), block k
 *               at scratch + k x stride: written and read back by its own group, it stays in L2;
 *               the barriers then fence global memory too. lz4h5_decode (no shuffle) decodes
 *               straight into dst instead (so a failing block may leave bytes in its own part
 *               of dst, which the error flag makes undefined anyway). The SM's own limit of 32
 *               resident groups then bounds a one-warp group: 28 % more than 25.
 *   ZRUN        0 (default); 1: an overlapping match of offset 1-4 (a run of one byte, mostly 0
 *               in the empty bit planes of counting data, or of a 2-4 byte pattern) is written
 *               from the off source bytes held in registers, with no read of dec per byte and no
 *               modulo; offsets 1, 2 and 4 as one 16-byte vector store per item and round in the
 *               run's aligned middle (a block's tail is often one such match of thousands of
 *               bytes: 64 rounds of 4 loads + 4 stores per item become 16 stores). 2: also an
 *               overlapping match of at least 16 x WG bytes whose offset is a power of two
 *               dividing 16 x WG (512 with WG 32): each item gathers its 16 pattern bytes once
 *               and then stores them every round. Why: in the benchmark's EIGER 4M frames most
 *               decoded bytes come from one such match per block, offset 256 = one bit-plane row
 *               of a 2048-element block (the empty high planes repeat the row before), 5-7 KiB
 *               long: 67 % of the synthetic frame's bytes, 82 % of the low-count one's, against
 *               5 % (offset 1) and 6-9 % (offset 2) for level 1 (tests/bench/bslz4_stats.py).
 *   BPG         blocks per work-group of bslz4_decode, 1 (default) or 2: the two halves of the
 *               group (WG / 2 items each, a half-warp with WG 32) decode blocks 2k and 2k + 1.
 *               Every item parses both token streams (the same bytes for the whole group, so
 *               control flow stays uniform and the barriers legal), each half copies its own
 *               block's literals and matches (loops run to the larger count of the two halves),
 *               then the group unshuffles one block after the other. Why: with DEC_GLOBAL a
 *               one-warp group is limited by the SM's 32 resident groups, so two blocks per
 *               group is the next doubling of the blocks in flight (64 per SM), and a warp has
 *               two independent dependency chains to interleave. Not with CMP_LOCAL; with ZRUN 2
 *               a half's qualifying match is written as fill_period does (HW in place of WG);
 *               ZRUN 1's offsets 1-4 are not special-cased here. Without DEC_GLOBAL a group
 *               holds two blocks in local memory (16 KiB). The host (faid_clcodec.c) launches
 *               ceil(nblocks / 2) + 1 groups when the options it was given contain "BPG=2".
 *
 * Local memory per group: BLOCK_CAP (the decoded block, 8 KiB by default; none with DEC_GLOBAL;
 * twice that with BPG 2), + CMP_CAP with CMP_LOCAL. Every variant gives the same bytes and flags the same blocks
 * (unit.codec decodes its chunks with each and compares them with the CPU decoder). The unshuffled output goes from registers to global memory, 8 x ELEM_SIZE
 * contiguous bytes (one vector store) per column group of 8 elements.
 *
 * Robustness: every literal and match copy is bounded by the remaining input and output, offsets
 * must stay inside the block's own output, the decoded length must equal the expected one, and the
 * table entries are re-checked against the chunk length and the local capacities, so no input can
 * make a group read or write out of bounds. A failing group stores (block index + 1) into *err if
 * it is still 0, and writes nothing to dst (lz4h5_decode with DEC_GLOBAL: nothing outside its
 * own block's part of dst); the host must zero *err before the launch. The LZ4
 * end-of-block rules that liblz4 enforces (the last 5 bytes are literals, a literal run reaching
 * the last 12 output bytes or the last 8 input bytes ends the block) are enforced too, so that the
 * GPU and the CPU decoder agree on everything an LZ4 encoder can produce.
 *
 * All work-items parse the token stream redundantly (they read the same bytes, so control flow
 * is uniform and the barriers inside the loop are legal) and split each literal and match copy
 * between them. Copies of at most WG bytes (most of them: bit planes of counting data give a few
 * hundred sequences per block, with literal runs of 0-3 bytes and matches of 4-20) take one byte
 * per item with no loop; longer ones four bytes per item per round so that the loads overlap. On
 * NVIDIA the warp executes every instruction of this parse whatever the number of active lanes,
 * so the instructions per sequence largely set the decode time. A barrier precedes a match copy
 * only when its source overlaps output written since the last barrier. Output positions only
 * grow and copies read only below the current position, so there is no write-after-read hazard.
 *
 * Measured and dropped (H100, EIGER 4M uint32, 2026-11-22, docs/PERFORMANCE.md): parsing a ring of
 * 64 (or 256) sequences into records in local memory first and then copying every literal run at
 * once and the matches in order (fewer barriers, no copies inside the parse) made one frame 38 %
 * slower (92 vs 67 us on low-count frames, 93 vs 66 on the synthetic ones); with two blocks per
 * work-group, one item parsing each, 107 us; with 64 items per group 97 us. The decode time
 * hardly depends on the sequence count (34 per block on low-count frames, 55 on the synthetic
 * ones, same time), so the parse is not what these layouts could shorten.
 *
 * Device byte order is assumed little-endian (checked by the host). */

#ifndef WG
#define WG 32
#endif
#ifndef BLOCK_CAP
#define BLOCK_CAP 8192
#endif
#ifndef ELEM_SIZE
#define ELEM_SIZE 4
#endif

/* Work sharing: PAR_FOR(i, n) { body } runs body for i = 0..n-1 spread over the group. The trip
 * count of the outer loop is the same for every work-item (n is uniform) and the inner "loop"
 * runs once or not at all: a per-item trip count (for (i = lid; i < n; i += WG)) is miscompiled
 * by PoCL's work-group vectorizer when some items have no iteration. */
#define PAR_FOR(i, n)                                                                            \
    for (uint i##_base = 0, i##_n = (n); i##_base < i##_n; i##_base += WG)                       \
        for (uint i = i##_base + get_local_id(0); i < i##_n; i = i##_n)

/* CMP_LOCAL 1: copy each compressed block into local memory before parsing it (costs CMP_CAP
 * bytes of local memory per group); 0: parse it straight from global memory (through L1). */
#ifndef CMP_LOCAL
#define CMP_LOCAL 0
#endif

/* Room for the worst-case LZ4 expansion of a full block plus up to 3 bytes of misalignment. */
#define CMP_CAP (((BLOCK_CAP + BLOCK_CAP / 255 + 16 + 3) + 7) / 8 * 8)
#if CMP_LOCAL
#define CMP_SPACE __local
#else
#define CMP_SPACE __global
#endif

/* DEC_GLOBAL 1: the decoded block lives in global memory (L2) instead of local memory, see the
 * header; DEC_SPACE is where lz4_block writes and unshuffle reads, DEC_FENCE the fence of the
 * barriers that make one item's writes to it visible to the others. */
#ifndef DEC_GLOBAL
#define DEC_GLOBAL 0
#endif
#if DEC_GLOBAL
#define DEC_SPACE __global
#define DEC_FENCE (CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE)
#else
#define DEC_SPACE __local
#define DEC_FENCE CLK_LOCAL_MEM_FENCE
#endif

/* ZRUN 1: overlapping matches of offset 1-4 written as a repeated pattern; 2: and long ones of a
 * power-of-two offset dividing 16 x WG; see the header. */
#ifndef ZRUN
#define ZRUN 0
#endif

/* BPG 2: two blocks per work-group, see the header. */
#ifndef BPG
#define BPG 1
#endif
#if BPG != 1 && BPG != 2
#error "BPG must be 1 or 2"
#endif
#if BPG == 2 && CMP_LOCAL
#error "BPG 2 parses the compressed blocks from global memory (CMP_LOCAL 0)"
#endif
#define HW (WG / BPG)

/* The 8 elements of one column group as one vector of ELEM_SIZE ulongs. */
#if ELEM_SIZE == 1
#define OUTV ulong
#elif ELEM_SIZE == 2
#define OUTV ulong2
#elif ELEM_SIZE == 4
#define OUTV ulong4
#else
#define OUTV ulong8
#endif

/* Every item of the failing group stores the flag (same value, only on the error path): PoCL's
 * work-group vectorizer miscompiled the `if (get_local_id(0) == 0)` form. */
#define ERR_SET(err, gid) atomic_cmpxchg((err), 0, (int)(gid) + 1)

/* Transposes the 8x8 bit matrix in x (row r = byte r, column c = bit c). */
inline ulong transpose8(ulong x)
{
    ulong t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAUL;
    x = x ^ t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCUL;
    x = x ^ t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0UL;
    x = x ^ t ^ (t << 28);
    return x;
}

/* Copies chunk bytes [a, a + n) into local memory starting at cmp + (a & 3), with aligned 32-bit
 * loads for every word lying inside the range's last full word and byte loads after it. Bytes
 * read before a belong to the same aligned word, which lies inside the buffer. */
inline void load_block(__global const uchar *chunk, uint a, uint n, __local uint *cmpw)
{
    __global const uint *cw = (__global const uint *)chunk;
    __local uchar *cmp = (__local uchar *)cmpw;
    const uint w0 = a >> 2;
    const uint nw = ((a + n) >> 2) - w0;
    PAR_FOR(i, nw)
        cmpw[i] = cw[w0 + i];
    const uint done = nw * 4;
    const uint rest = a + n - 4 * w0 - done;
    PAR_FOR(i, rest)
        cmp[done + i] = chunk[4 * w0 + done + i];
}

/* Reads an LZ4 length extension; returns 0 on running past the input. */
inline int lz4_extend(CMP_SPACE const uchar *cmp, uint *ip, uint iend, uint *len)
{
    uint b;
    do {
        if (*ip >= iend)
            return 0;
        b = cmp[(*ip)++];
        *len += b;
    } while (b == 255);
    return 1;
}

#if ZRUN
/* Writes dec[op, op + mlen) as the repeated off-byte pattern pat (byte i = byte i % off of pat),
 * off 1..4, with no reads of dec; amis = the address of dec[0] modulo 16. For off 1, 2 or 4 (which
 * divide 16) every 16-byte aligned piece of the run holds the same 16 bytes, so the run's middle
 * is one vector store per item and round; off 3 is written a byte per item. */
inline void fill_pattern(DEC_SPACE uchar *dec, uint op, uint mlen, uint off, uint pat, uint amis)
{
    const uint lid = get_local_id(0);
    if (mlen <= WG) {
        const uint r = off == 3 ? lid % 3 : lid & (off - 1);
        if (lid < mlen)
            dec[op + lid] = (uchar)(pat >> (8 * r));
        return;
    }
    if (off == 3) {
        PAR_FOR(i, mlen)
            dec[op + i] = (uchar)(pat >> (8 * (i % 3)));
        return;
    }
    /* rep: the pattern over 32 bits (byte k = byte k % off of pat) */
    const uint rep = off == 1 ? pat * 0x01010101u : off == 2 ? pat | (pat << 16) : pat;
    const uint head = min((16 - ((amis + op) & 15)) & 15, mlen);
    PAR_FOR(i, head)
        dec[op + i] = (uchar)(rep >> (8 * (i & 3)));
    const uint nv = (mlen - head) / 16;
    const uint h3 = head & 3;
    const uint w = h3 ? (rep >> (8 * h3)) | (rep << (32 - 8 * h3)) : rep;
    DEC_SPACE uint4 *v = (DEC_SPACE uint4 *)(dec + op + head);
    PAR_FOR(i, nv)
        v[i] = (uint4)(w);
    const uint t0 = head + 16 * nv;
    PAR_FOR(i, mlen - t0)
        dec[op + t0 + i] = (uchar)(rep >> (8 * ((t0 + i) & 3)));
}
#endif

#if ZRUN >= 2
/* Writes dec[op, op + mlen) as the repetition of its off source bytes dec[src, src + off), off a
 * power of two dividing 16 x WG (so off < 16 x WG <= mlen): the 16-byte aligned piece j of the
 * run (j = this item's index + WG x round) holds the pattern from (head + 16 j) mod off =
 * (head + 16 x item) mod off, the same every round, so an item gathers its 16 bytes once and then
 * only stores. Reads only the source bytes, which precede op: no hazard with the stores. */
inline void fill_period(DEC_SPACE uchar *dec, uint src, uint op, uint mlen, uint off, uint amis)
{
    const uint m = off - 1;
    const uint head = (16 - ((amis + op) & 15)) & 15;
    PAR_FOR(i, head)
        dec[op + i] = dec[src + (i & m)];
    const uint nv = (mlen - head) / 16;
    const uint b = head + 16 * get_local_id(0);
    const uchar16 x = (uchar16)(
        dec[src + (b & m)], dec[src + ((b + 1) & m)], dec[src + ((b + 2) & m)],
        dec[src + ((b + 3) & m)], dec[src + ((b + 4) & m)], dec[src + ((b + 5) & m)],
        dec[src + ((b + 6) & m)], dec[src + ((b + 7) & m)], dec[src + ((b + 8) & m)],
        dec[src + ((b + 9) & m)], dec[src + ((b + 10) & m)], dec[src + ((b + 11) & m)],
        dec[src + ((b + 12) & m)], dec[src + ((b + 13) & m)], dec[src + ((b + 14) & m)],
        dec[src + ((b + 15) & m)]);
    DEC_SPACE uint4 *v = (DEC_SPACE uint4 *)(dec + op + head);
    PAR_FOR(i, nv)
        v[i] = as_uint4(x);
    const uint t0 = head + 16 * nv;
    PAR_FOR(i, mlen - t0)
        dec[op + t0 + i] = dec[src + ((t0 + i) & m)];
}
#endif

/* Decodes the LZ4 block cmp[ip0, ip0 + csize) into dec[0, oend). Returns 1 when the block is valid
 * and decodes to exactly oend bytes. Ends with a barrier, so dec is complete for every item.
 * amis: the address of dec[0] modulo 16 (used by ZRUN's vector stores). */
inline int lz4_block(CMP_SPACE const uchar *cmp, uint ip0, uint csize, DEC_SPACE uchar *dec,
                     uint oend, uint amis)
{
    uint ip = ip0;
    const uint iend = ip0 + csize;
    uint op = 0;
    uint synced = 0;
    int ok = 0;
    for (;;) {
        const uint token = cmp[ip++];
        uint lit = token >> 4;
        if (lit == 15 && !lz4_extend(cmp, &ip, iend, &lit))
            break;
        if (lit > iend - ip || lit > oend - op)
            break;
        /* "Fewer than 12 output or 8 input bytes would remain after the literals" (lit <= oend - op
         * <= BLOCK_CAP here, so the sums cannot wrap). */
        const int last = (oend - op < lit + 12) | (iend - ip < lit + 8);
        if (last && lit != iend - ip)
            break;
        if (lit <= WG) {
            /* Most literal runs are short (a few bytes in noisy bit planes): one slot per item. */
            const uint i = get_local_id(0);
            if (i < lit)
                dec[op + i] = cmp[ip + i];
        } else {
            for (uint b = 0; b < lit; b += 4 * WG) {
                const uint i = b + get_local_id(0);
                uchar v0 = 0, v1 = 0, v2 = 0, v3 = 0;
                if (i < lit)
                    v0 = cmp[ip + i];
                if (i + WG < lit)
                    v1 = cmp[ip + i + WG];
                if (i + 2 * WG < lit)
                    v2 = cmp[ip + i + 2 * WG];
                if (i + 3 * WG < lit)
                    v3 = cmp[ip + i + 3 * WG];
                if (i < lit)
                    dec[op + i] = v0;
                if (i + WG < lit)
                    dec[op + i + WG] = v1;
                if (i + 2 * WG < lit)
                    dec[op + i + 2 * WG] = v2;
                if (i + 3 * WG < lit)
                    dec[op + i + 3 * WG] = v3;
            }
        }
        ip += lit;
        op += lit;
        if (last) {
            ok = op == oend;
            break;
        }
        const uint off = (uint)cmp[ip] | ((uint)cmp[ip + 1] << 8);
        ip += 2;
        if (off - 1 >= op) /* offset 0 (wraps) or reaching before the block's output */
            break;
        uint mlen = token & 15;
        if (mlen == 15 && !lz4_extend(cmp, &ip, iend, &mlen))
            break;
        mlen += 4;
        if (oend - op < 5 || mlen > oend - op - 5 || ip >= iend)
            break;
        const uint src = op - off;
        if (src + min(mlen, off) > synced) {
            barrier(DEC_FENCE);
            synced = op;
        }
#if ZRUN >= 2
        if (mlen >= 16 * WG && (off & (off - 1)) == 0 && (16 * WG) % off == 0) {
            fill_period(dec, src, op, mlen, off, amis);
        } else
#endif
#if ZRUN
            if (off <= 4 && off < mlen) {
            /* a run of a repeated 1-4 byte pattern (mostly off 1, a run of zero bytes in the
             * empty bit planes of counting data): its off source bytes, then stores only */
            uint pat = dec[src];
            for (uint k = 1; k < off; k++)
                pat |= (uint)dec[src + k] << (8 * k);
            fill_pattern(dec, op, mlen, off, pat, amis);
        } else
#endif
            if (mlen <= WG) {
            /* The common short match: one byte per item, and a modulo only when the match
             * overlaps its own output (uniform branches, so the usual case skips it). */
            const uint i = get_local_id(0);
            uint r = i;
            if (off < mlen)
                r = i % off;
            if (i < mlen)
                dec[op + i] = dec[src + r];
        } else {
            /* Byte i comes from src + (i mod off) (a repeating pattern when the match overlaps its
             * own output); r tracks that index for this item's 4 bytes of each round of 4 x WG. */
            uint step = WG, period = 0xFFFFFFFFu, r = get_local_id(0);
            if (off < mlen) {
                step = WG % off;
                period = off;
                r %= off;
            }
            for (uint b = 0; b < mlen; b += 4 * WG) {
                const uint i = b + get_local_id(0);
                uint r1 = r + step;
                r1 -= r1 >= period ? period : 0;
                uint r2 = r1 + step;
                r2 -= r2 >= period ? period : 0;
                uint r3 = r2 + step;
                r3 -= r3 >= period ? period : 0;
                uchar v0 = 0, v1 = 0, v2 = 0, v3 = 0;
                if (i < mlen)
                    v0 = dec[src + r];
                if (i + WG < mlen)
                    v1 = dec[src + r1];
                if (i + 2 * WG < mlen)
                    v2 = dec[src + r2];
                if (i + 3 * WG < mlen)
                    v3 = dec[src + r3];
                if (i < mlen)
                    dec[op + i] = v0;
                if (i + WG < mlen)
                    dec[op + i + WG] = v1;
                if (i + 2 * WG < mlen)
                    dec[op + i + 2 * WG] = v2;
                if (i + 3 * WG < mlen)
                    dec[op + i + 3 * WG] = v3;
                r = r3 + step;
                r -= r >= period ? period : 0;
            }
        }
        op += mlen;
    }
    barrier(DEC_FENCE);
    return ok;
}

#if BPG == 2
/* One LZ4 stream's state in a two-block group. st: 0 running, 1 ended valid, -1 invalid, 2 no
 * block (an odd block count's last group). */
typedef struct lz_state {
    uint ip, iend, op, oend, synced;
    int st;
} lz_state;

/* One sequence of lz4_block for stream z, with the same checks: its literal run (*lit bytes from
 * cmp[*lip] to dec[*lop]) and its match (*mlen bytes ending at z->op, *moff back; *mlen 0 when
 * none); z->st becomes 1 at the valid end, -1 on an error; nothing when z->st != 0. */
inline void lz_step(__global const uchar *cmp, lz_state *z, uint *lit, uint *lip, uint *lop,
                    uint *moff, uint *mlen)
{
    *lit = 0;
    *lip = 0;
    *lop = 0;
    *moff = 1;
    *mlen = 0;
    if (z->st)
        return;
    uint ip = z->ip, op = z->op;
    const uint iend = z->iend, oend = z->oend;
    const uint token = cmp[ip++];
    uint l = token >> 4;
    if ((l == 15 && !lz4_extend(cmp, &ip, iend, &l)) || l > iend - ip || l > oend - op) {
        z->st = -1;
        return;
    }
    const int last = (oend - op < l + 12) | (iend - ip < l + 8);
    if (last && l != iend - ip) {
        z->st = -1;
        return;
    }
    *lit = l;
    *lip = ip;
    *lop = op;
    ip += l;
    op += l;
    if (last) {
        z->st = op == oend ? 1 : -1;
        z->op = op;
        return;
    }
    const uint off = (uint)cmp[ip] | ((uint)cmp[ip + 1] << 8);
    ip += 2;
    uint m = token & 15;
    if (off - 1 >= op || (m == 15 && !lz4_extend(cmp, &ip, iend, &m))) {
        z->st = -1;
        return;
    }
    m += 4;
    if (oend - op < 5 || m > oend - op - 5 || ip >= iend) {
        z->st = -1;
        return;
    }
    *moff = off;
    *mlen = m;
    z->ip = ip;
    z->op = op + m;
}

/* This half's literal run: n bytes s -> d by its HW items (j = the item's index in the half),
 * four per item per round; nmax (the larger run of the two halves) makes the loop uniform. */
inline void copy_lit2(__global const uchar *s, DEC_SPACE uchar *d, uint n, uint nmax, uint j)
{
    for (uint b = 0; b < nmax; b += 4 * HW) {
        const uint i = b + j;
        uchar v0 = 0, v1 = 0, v2 = 0, v3 = 0;
        if (i < n)
            v0 = s[i];
        if (i + HW < n)
            v1 = s[i + HW];
        if (i + 2 * HW < n)
            v2 = s[i + 2 * HW];
        if (i + 3 * HW < n)
            v3 = s[i + 3 * HW];
        if (i < n)
            d[i] = v0;
        if (i + HW < n)
            d[i + HW] = v1;
        if (i + 2 * HW < n)
            d[i + 2 * HW] = v2;
        if (i + 3 * HW < n)
            d[i + 3 * HW] = v3;
    }
}

/* This half's match: n bytes at d, byte i from d - off + (i mod off) (a repeating pattern when
 * the match overlaps its own output), as lz4_block's long copy; nmax as in copy_lit2. */
inline void copy_match2(DEC_SPACE uchar *d, uint off, uint n, uint nmax, uint j)
{
    DEC_SPACE const uchar *src = d - off;
    uint step = HW, period = 0xFFFFFFFFu, r = j;
    if (off < n) {
        step = HW % off;
        period = off;
        r %= off;
    }
    for (uint b = 0; b < nmax; b += 4 * HW) {
        const uint i = b + j;
        uint r1 = r + step;
        r1 -= r1 >= period ? period : 0;
        uint r2 = r1 + step;
        r2 -= r2 >= period ? period : 0;
        uint r3 = r2 + step;
        r3 -= r3 >= period ? period : 0;
        uchar v0 = 0, v1 = 0, v2 = 0, v3 = 0;
        if (i < n)
            v0 = src[r];
        if (i + HW < n)
            v1 = src[r1];
        if (i + 2 * HW < n)
            v2 = src[r2];
        if (i + 3 * HW < n)
            v3 = src[r3];
        if (i < n)
            d[i] = v0;
        if (i + HW < n)
            d[i + HW] = v1;
        if (i + 2 * HW < n)
            d[i + 2 * HW] = v2;
        if (i + 3 * HW < n)
            d[i + 3 * HW] = v3;
        r = r3 + step;
        r -= r >= period ? period : 0;
    }
}

/* The matches of both halves (at op0 / op1 of their blocks, mo* back, ml* bytes; dmine = this
 * half's block). With ZRUN 2 a half whose match qualifies for fill_period (at least 16 x HW
 * bytes, a power-of-two offset dividing 16 x HW) writes it the same way: 16 pattern bytes
 * gathered once per item, then vector stores (the block bases are 16-byte aligned); the other
 * half meanwhile copies. Every loop runs to the larger count of the two halves. */
inline void match2(DEC_SPACE uchar *dmine, uint op0, uint mo0, uint ml0, uint op1, uint mo1,
                   uint ml1, uint me, uint j)
{
    const uint op = me ? op1 : op0, off = me ? mo1 : mo0, n = me ? ml1 : ml0;
#if ZRUN >= 2
    const int f0 = ml0 >= 16 * HW && (mo0 & (mo0 - 1)) == 0 && (16 * HW) % mo0 == 0;
    const int f1 = ml1 >= 16 * HW && (mo1 & (mo1 - 1)) == 0 && (16 * HW) % mo1 == 0;
    const int fm = me ? f1 : f0;
    const uint h0 = (16 - (op0 & 15)) & 15, h1 = (16 - (op1 & 15)) & 15;
    const uint nv0 = f0 ? (ml0 - h0) / 16 : 0, nv1 = f1 ? (ml1 - h1) / 16 : 0;
    const uint head = me ? h1 : h0, nv = me ? nv1 : nv0, m = off - 1;
    DEC_SPACE uchar *d = dmine + op;
    DEC_SPACE const uchar *src = d - off;
    for (uint b = 0; b < 16; b += HW) {
        const uint i = b + j;
        if (fm && i < head)
            d[i] = src[i & m];
    }
    uchar16 x = (uchar16)(0);
    if (fm) {
        const uint c = head + 16 * j;
        x = (uchar16)(src[c & m], src[(c + 1) & m], src[(c + 2) & m], src[(c + 3) & m],
                      src[(c + 4) & m], src[(c + 5) & m], src[(c + 6) & m], src[(c + 7) & m],
                      src[(c + 8) & m], src[(c + 9) & m], src[(c + 10) & m], src[(c + 11) & m],
                      src[(c + 12) & m], src[(c + 13) & m], src[(c + 14) & m],
                      src[(c + 15) & m]);
    }
    DEC_SPACE uint4 *v = (DEC_SPACE uint4 *)(d + head);
    const uint nvmax = max(nv0, nv1);
    for (uint b = 0; b < nvmax; b += HW) {
        const uint i = b + j;
        if (i < nv)
            v[i] = as_uint4(x);
    }
    const uint t0 = head + 16 * nv;
    for (uint b = 0; b < 16; b += HW) {
        const uint i = b + j;
        if (fm && i < n - t0)
            d[t0 + i] = src[(t0 + i) & m];
    }
    copy_match2(d, off, fm ? 0 : n, max(f0 ? 0 : ml0, f1 ? 0 : ml1), j);
#else
    copy_match2(dmine + op, off, n, max(ml0, ml1), j);
#endif
}
#endif

/* Interleaves ELEM_SIZE byte planes (w[j]: byte i = byte j of element i of a group of 8) into the
 * 8 elements in memory order. */
inline OUTV zip_planes(const ulong *w)
{
#if ELEM_SIZE == 1
    return w[0];
#elif ELEM_SIZE == 2
    const uchar8 a = as_uchar8(w[0]), b = as_uchar8(w[1]);
    return (ulong2)(as_ulong((uchar8)(a.s0, b.s0, a.s1, b.s1, a.s2, b.s2, a.s3, b.s3)),
                    as_ulong((uchar8)(a.s4, b.s4, a.s5, b.s5, a.s6, b.s6, a.s7, b.s7)));
#elif ELEM_SIZE == 4
    const uchar8 a = as_uchar8(w[0]), b = as_uchar8(w[1]), c = as_uchar8(w[2]),
                 d = as_uchar8(w[3]);
    return (ulong4)(as_ulong((uchar8)(a.s0, b.s0, c.s0, d.s0, a.s1, b.s1, c.s1, d.s1)),
                    as_ulong((uchar8)(a.s2, b.s2, c.s2, d.s2, a.s3, b.s3, c.s3, d.s3)),
                    as_ulong((uchar8)(a.s4, b.s4, c.s4, d.s4, a.s5, b.s5, c.s5, d.s5)),
                    as_ulong((uchar8)(a.s6, b.s6, c.s6, d.s6, a.s7, b.s7, c.s7, d.s7)));
#elif ELEM_SIZE == 8
    const uchar8 a = as_uchar8(w[0]), b = as_uchar8(w[1]), c = as_uchar8(w[2]),
                 d = as_uchar8(w[3]), e = as_uchar8(w[4]), f = as_uchar8(w[5]),
                 g = as_uchar8(w[6]), h = as_uchar8(w[7]);
#define FAID_ZIP8(k) as_ulong((uchar8)(a.k, b.k, c.k, d.k, e.k, f.k, g.k, h.k))
    return (ulong8)(FAID_ZIP8(s0), FAID_ZIP8(s1), FAID_ZIP8(s2), FAID_ZIP8(s3), FAID_ZIP8(s4),
                    FAID_ZIP8(s5), FAID_ZIP8(s6), FAID_ZIP8(s7));
#undef FAID_ZIP8
#else
#error "ELEM_SIZE must be 1, 2, 4 or 8"
#endif
}

/* Bit-unshuffles the n-element block in dec into out (column group g, the 8 elements 8g..8g+7,
 * lands at out[g]). Row r of the shuffled bit matrix (r = 8j + k: byte j, bit k of every element)
 * holds n/8 bytes. Rows whose length is a multiple of 4 are read 32 bits at a time (4 column
 * groups per item); others a byte at a time. */
inline void unshuffle(DEC_SPACE const uchar *dec, uint n, __global OUTV *out)
{
    const uint row = n / 8;
    if ((row & 3) == 0) {
        DEC_SPACE const uint *dw = (DEC_SPACE const uint *)dec;
        const uint rw = row / 4;
        PAR_FOR(h, rw) {
            ulong w[4][ELEM_SIZE];
            for (uint j = 0; j < ELEM_SIZE; j++) {
                uchar4 r[8];
                for (uint k = 0; k < 8; k++)
                    r[k] = as_uchar4(dw[(8 * j + k) * rw + h]);
                w[0][j] = transpose8(as_ulong((uchar8)(r[0].s0, r[1].s0, r[2].s0, r[3].s0,
                                                       r[4].s0, r[5].s0, r[6].s0, r[7].s0)));
                w[1][j] = transpose8(as_ulong((uchar8)(r[0].s1, r[1].s1, r[2].s1, r[3].s1,
                                                       r[4].s1, r[5].s1, r[6].s1, r[7].s1)));
                w[2][j] = transpose8(as_ulong((uchar8)(r[0].s2, r[1].s2, r[2].s2, r[3].s2,
                                                       r[4].s2, r[5].s2, r[6].s2, r[7].s2)));
                w[3][j] = transpose8(as_ulong((uchar8)(r[0].s3, r[1].s3, r[2].s3, r[3].s3,
                                                       r[4].s3, r[5].s3, r[6].s3, r[7].s3)));
            }
            out[4 * h] = zip_planes(w[0]);
            out[4 * h + 1] = zip_planes(w[1]);
            out[4 * h + 2] = zip_planes(w[2]);
            out[4 * h + 3] = zip_planes(w[3]);
        }
    } else {
        PAR_FOR(g, row) {
            ulong w[ELEM_SIZE];
            for (uint j = 0; j < ELEM_SIZE; j++) {
                ulong x = 0;
                for (uint k = 0; k < 8; k++)
                    x |= (ulong)dec[(8 * j + k) * row + g] << (8 * k);
                w[j] = transpose8(x);
            }
            out[g] = zip_planes(w);
        }
    }
}

/* Table entry of this group, re-checked on the device: returns 0 when it cannot be decoded. */
inline int block_entry(__global const uint *table, uint nblocks, uint gid, uint chunk_len,
                       uint block_bytes, uint last_bytes, uint *off, uint *csize, uint *dbytes)
{
    *off = table[gid];
    *csize = table[nblocks + gid];
    *dbytes = gid + 1 == nblocks ? last_bytes : block_bytes;
    return *csize > 0 && (!CMP_LOCAL || *csize <= CMP_CAP - 3) && *csize <= chunk_len &&
           *off <= chunk_len - *csize && *dbytes > 0 && *dbytes <= BLOCK_CAP;
}

/* Group nblocks: the raw tail (bitshuffle) at the end of the output. */
inline void copy_tail(__global const uchar *chunk, uint chunk_len, uint tail_off, uint tail_bytes,
                      __global uchar *dst, ulong tail_dst)
{
    if (tail_bytes > chunk_len || tail_off > chunk_len - tail_bytes)
        return;
    PAR_FOR(i, tail_bytes)
        dst[tail_dst + i] = chunk[tail_off + i];
}

/* The decoded block's local buffer (default build): 8-byte aligned as before; ZRUN's vector
 * stores need 16. */
#if ZRUN
#define DECL_ALIGN __attribute__((aligned(16)))
#else
#define DECL_ALIGN
#endif

/* DEC_GLOBAL: bslz4_decode's extra argument, the scratch of the decoded blocks (block k at
 * scratch + k x SCRATCH_STRIDE(block_bytes), 16-byte aligned; the host sizes it as nblocks x
 * that stride and gives each launch in flight its own). */
#define SCRATCH_STRIDE(b) (((b) + 15u) & ~15u)
#if DEC_GLOBAL
#define SCRATCH_ARG , __global uchar *scratch
#else
#define SCRATCH_ARG
#endif

/* Arguments (both kernels):
 *   chunk, chunk_off  the compressed chunk starts at byte chunk_off (a multiple of 4) of chunk
 *   chunk_len         its length in bytes
 *   table, table_off  packed uint32 table (nblocks offsets, then nblocks compressed sizes)
 *                     starting at uint32 index table_off
 *   nblocks           number of LZ4 blocks
 *   block_bytes       decoded size of a full block (header block size), <= BLOCK_CAP
 *   last_bytes        decoded size of the last block
 *   tail_off          offset of the raw tail in the chunk, tail_bytes its length (0 for lz4)
 *   dst, dst_off      decoded byte b lands at dst[dst_off + b]; dst_off a multiple of 8
 *   err, err_idx      error flag err[err_idx], zeroed by the host; set to (failing block + 1)
 *   scratch           (bslz4_decode with DEC_GLOBAL only) nblocks x SCRATCH_STRIDE(block_bytes)
 *                     bytes of device memory this launch alone uses
 */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
bslz4_decode(__global const uchar *chunk, uint chunk_off, uint chunk_len, __global const uint *table,
             uint table_off, uint nblocks, uint block_bytes, uint last_bytes, uint tail_off,
             uint tail_bytes, __global uchar *dst, ulong dst_off, __global int *err,
             uint err_idx SCRATCH_ARG)
{
    chunk += chunk_off;
    table += table_off;
    dst += dst_off;
    err += err_idx;
#if !DEC_GLOBAL && BPG == 2
    __local ulong decl2[2][BLOCK_CAP / 8] DECL_ALIGN;
#elif !DEC_GLOBAL
    __local ulong decl[BLOCK_CAP / 8] DECL_ALIGN;
#endif
#if CMP_LOCAL
    __local ulong cmpl[CMP_CAP / 8];
#endif
    const uint gid = get_group_id(0);
    const uint ngroups = (nblocks + BPG - 1) / BPG; /* groups that decode blocks */
    if (gid >= ngroups) {
        if (gid == ngroups)
            copy_tail(chunk, chunk_len, tail_off, tail_bytes, dst,
                      nblocks ? (ulong)(nblocks - 1) * block_bytes + last_bytes : 0);
        return;
    }
#if BPG == 2
    /* Blocks 2 gid (items [0, HW)) and 2 gid + 1 (items [HW, WG)): every item parses both token
     * streams (the same bytes for the whole group: uniform control flow, legal barriers), each
     * half copies its own block's literals and matches, loops run to the larger of the two
     * halves' counts, then the whole group unshuffles one block after the other. */
    const uint lid = get_local_id(0), me = lid / HW, j = lid % HW;
    lz_state z0, z1;
    uint off0, cs0, db0, off1 = 0, cs1 = 0, db1 = 0;
    int ok0 = block_entry(table, nblocks, 2 * gid, chunk_len, block_bytes, last_bytes, &off0, &cs0,
                          &db0) &&
              db0 % (8 * ELEM_SIZE) == 0 && block_bytes % (8 * ELEM_SIZE) == 0;
    const int has1 = 2 * gid + 1 < nblocks;
    int ok1 = has1 &&
              block_entry(table, nblocks, 2 * gid + 1, chunk_len, block_bytes, last_bytes, &off1,
                          &cs1, &db1) &&
              db1 % (8 * ELEM_SIZE) == 0 && block_bytes % (8 * ELEM_SIZE) == 0;
#if DEC_GLOBAL
    ok0 = ok0 && db0 <= block_bytes;
    ok1 = ok1 && db1 <= block_bytes;
#endif
    z0.ip = z0.op = z0.synced = 0;
    z0.iend = cs0;
    z0.oend = db0;
    z0.st = ok0 ? 0 : -1;
    z1.ip = z1.op = z1.synced = 0;
    z1.iend = cs1;
    z1.oend = db1;
    z1.st = ok1 ? 0 : has1 ? -1 : 2;
    __global const uchar *cmp0 = chunk + (ok0 ? off0 : 0), *cmp1 = chunk + (ok1 ? off1 : 0);
#if DEC_GLOBAL
    __global uchar *dec0 = scratch + (ulong)(2 * gid) * SCRATCH_STRIDE(block_bytes);
    __global uchar *dec1 = dec0 + SCRATCH_STRIDE(block_bytes);
#else
    __local uchar *dec0 = (__local uchar *)decl2[0], *dec1 = (__local uchar *)decl2[1];
#endif
    __global const uchar *cmine = me ? cmp1 : cmp0;
    DEC_SPACE uchar *dmine = me ? dec1 : dec0;
    while (z0.st == 0 || z1.st == 0) {
        uint l0, lip0, lop0, mo0, ml0, l1, lip1, lop1, mo1, ml1;
        lz_step(cmp0, &z0, &l0, &lip0, &lop0, &mo0, &ml0);
        lz_step(cmp1, &z1, &l1, &lip1, &lop1, &mo1, &ml1);
        copy_lit2(cmine + (me ? lip1 : lip0), dmine + (me ? lop1 : lop0), me ? l1 : l0,
                  max(l0, l1), j);
        const uint op0 = z0.op - ml0, op1 = z1.op - ml1;
        if ((ml0 && op0 - mo0 + min(ml0, mo0) > z0.synced) ||
            (ml1 && op1 - mo1 + min(ml1, mo1) > z1.synced)) {
            barrier(DEC_FENCE);
            z0.synced = op0;
            z1.synced = op1;
        }
        match2(dmine, op0, mo0, ml0, op1, mo1, ml1, me, j);
    }
    barrier(DEC_FENCE);
    if (z0.st != 1)
        ERR_SET(err, 2 * gid);
    else
        unshuffle(dec0, db0 / ELEM_SIZE, (__global OUTV *)(dst + (ulong)(2 * gid) * block_bytes));
    if (z1.st == -1)
        ERR_SET(err, 2 * gid + 1);
    else if (z1.st == 1)
        unshuffle(dec1, db1 / ELEM_SIZE,
                  (__global OUTV *)(dst + (ulong)(2 * gid + 1) * block_bytes));
#else
    uint off, csize, dbytes;
    if (!block_entry(table, nblocks, gid, chunk_len, block_bytes, last_bytes, &off, &csize,
                     &dbytes) ||
        dbytes % (8 * ELEM_SIZE) != 0 || block_bytes % (8 * ELEM_SIZE) != 0
#if DEC_GLOBAL
        || dbytes > block_bytes
#endif
    ) {
        ERR_SET(err, gid);
        return;
    }
#if DEC_GLOBAL
    __global uchar *dec = scratch + (ulong)gid * SCRATCH_STRIDE(block_bytes);
#else
    __local uchar *dec = (__local uchar *)decl;
#endif
#if CMP_LOCAL
    load_block(chunk, off, csize, (__local uint *)cmpl);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int ok = lz4_block((__local const uchar *)cmpl, off & 3, csize, dec, dbytes, 0);
#else
    const int ok = lz4_block(chunk + off, 0, csize, dec, dbytes, 0);
#endif
    if (!ok) {
        ERR_SET(err, gid);
        return;
    }
    unshuffle(dec, dbytes / ELEM_SIZE, (__global OUTV *)(dst + (ulong)gid * block_bytes));
#endif
}

/* HDF5-LZ4 framing: no shuffle, any block size up to BLOCK_CAP, and a block whose compressed
 * length equals its decoded length is stored raw. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
lz4h5_decode(__global const uchar *chunk, uint chunk_off, uint chunk_len, __global const uint *table,
             uint table_off, uint nblocks, uint block_bytes, uint last_bytes, uint tail_off,
             uint tail_bytes, __global uchar *dst, ulong dst_off, __global int *err, uint err_idx)
{
    chunk += chunk_off;
    table += table_off;
    dst += dst_off;
    err += err_idx;
#if !DEC_GLOBAL
    __local ulong decl[BLOCK_CAP / 8] DECL_ALIGN;
#endif
#if CMP_LOCAL
    __local ulong cmpl[CMP_CAP / 8];
#endif
    const uint gid = get_group_id(0);
    if (gid >= nblocks)
        return;
    uint off, csize, dbytes;
    if (!block_entry(table, nblocks, gid, chunk_len, block_bytes, last_bytes, &off, &csize,
                     &dbytes) ||
        csize > dbytes) {
        ERR_SET(err, gid);
        return;
    }
    __global uchar *out = dst + (ulong)gid * block_bytes;
    if (csize == dbytes) {
        PAR_FOR(i, dbytes)
            out[i] = chunk[off + i];
        return;
    }
#if DEC_GLOBAL
    /* no shuffle: the block is decoded straight into its place in dst (its buffer is aligned to
     * at least 16 bytes: CL_DEVICE_MEM_BASE_ADDR_ALIGN) */
    const uint amis = (uint)((dst_off + (ulong)gid * block_bytes) & 15);
    __global uchar *dec = out;
#else
    const uint amis = 0;
    __local uchar *dec = (__local uchar *)decl;
#endif
#if CMP_LOCAL
    load_block(chunk, off, csize, (__local uint *)cmpl);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int ok = lz4_block((__local const uchar *)cmpl, off & 3, csize, dec, dbytes, amis);
#else
    const int ok = lz4_block(chunk + off, 0, csize, dec, dbytes, amis);
#endif
    if (!ok) {
        ERR_SET(err, gid);
        return;
    }
#if !DEC_GLOBAL
    PAR_FOR(i, dbytes)
        out[i] = dec[i];
#endif
}
