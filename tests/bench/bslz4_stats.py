#!/usr/bin/env python3
"""bslz4_stats.py CHUNK [ELEM_SIZE]: what the LZ4 blocks of one bitshuffle-LZ4 chunk (HDF5 filter
32008 framing, e.g. faid-bench --dump DIR's chunk.bslz4) are made of, for tuning
kernels/codec/bslz4.cl (issue 17): blocks, sequences per block, literal bytes, match bytes, and
the share of the decoded bytes written by overlapping matches of offset 1, 2, 3, 4 (ZRUN=1's
pattern fills), by those of at least 512 bytes with a power-of-two offset dividing 512 (ZRUN=2's
periodic fills with WG 32), and by matches longer than 32 bytes, and the offsets that write most.
Plain Python, no dependencies."""
import collections
import struct
import sys


def blocks(buf):
    total, bsize = struct.unpack(">QI", buf[:12])
    pos = 12
    while pos + 4 <= len(buf):
        n = struct.unpack(">I", buf[pos:pos + 4])[0]
        if n == 0 or pos + 4 + n > len(buf):
            break
        yield buf[pos + 4:pos + 4 + n]
        pos += 4 + n


def sequences(b):
    ip, n = 0, len(b)
    while ip < n:
        tok = b[ip]
        ip += 1
        lit = tok >> 4
        if lit == 15:
            while True:
                x = b[ip]
                ip += 1
                lit += x
                if x != 255:
                    break
        ip += lit
        if ip >= n:
            yield lit, 0, 0
            return
        off = b[ip] | (b[ip + 1] << 8)
        ip += 2
        ml = tok & 15
        if ml == 15:
            while True:
                x = b[ip]
                ip += 1
                ml += x
                if x != 255:
                    break
        yield lit, off, ml + 4


def main():
    buf = open(sys.argv[1], "rb").read()
    nb = nseq = lit = mat = longm = 0
    byoff = {1: 0, 2: 0, 3: 0, 4: 0}
    cnt = {1: 0, 2: 0, 3: 0, 4: 0}
    per = nper = 0
    offs = collections.Counter()
    for b in blocks(buf):
        nb += 1
        for l, off, m in sequences(b):
            nseq += 1
            lit += l
            mat += m
            if m > 32:
                longm += m
                offs[off] += m
            if m >= 512 and off and 512 % off == 0:
                per += m
                nper += 1
            if off in byoff and off < m:
                byoff[off] += m
                cnt[off] += 1
    dec = lit + mat
    print(f"{nb} blocks, {nseq / max(nb, 1):.1f} sequences per block, decoded {dec} bytes: "
          f"literals {100 * lit / dec:.1f} %, matches {100 * mat / dec:.1f} % "
          f"(longer than 32 bytes {100 * longm / dec:.1f} %)")
    for o in (1, 2, 3, 4):
        print(f"  overlapping matches of offset {o}: {cnt[o] / max(nb, 1):.2f} per block, "
              f"{100 * byoff[o] / dec:.1f} % of the decoded bytes")
    print(f"  matches of >= 512 bytes, offset a power of two dividing 512: {nper / max(nb, 1):.2f} "
          f"per block, {100 * per / dec:.1f} % of the decoded bytes")
    print("  offsets of the matches longer than 32 bytes, by bytes written: " +
          ", ".join(f"{o} {100 * v / dec:.1f} %" for o, v in offs.most_common(5)))


if __name__ == "__main__":
    main()
