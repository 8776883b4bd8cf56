#!/usr/bin/env python3
"""One line per profiled kernel from Nsight Compute's text reports and cl_replay.py's outputs.

    ncu_summary.py DIR

DIR holds, per kernel K, `replay_K.txt` (cl_replay.py's output) and, where the kernel was
profiled, `ncu_K.txt` (`ncu --section ... --print-summary none`, its text report). Prints a table:
whether the replay wrote the recorded bytes, its median time, and what the profile says of where
the time goes (elapsed against the SMs' active cycles: how much of the GPU works; occupancy;
cycles between a warp's instructions and the largest stall reason among them; L2 and DRAM
throughput). A kernel whose replay wrote other bytes is profiled from a launch that is not
faid's: its profile columns say so instead of printing numbers.
"""
import glob
import os
import re
import sys

METRIC = re.compile(r"^ {4}(\S.*?)\s{2,}(\S*?)\s+([-\d.,]+)$")
STALL = re.compile(r"spends ([\d.]+) cycles being stalled (.+?)\. .*?This stall type represents "
                   r"about ([\d.]+)% of the total average of ([\d.]+) cycles")


def metrics(text):
    """Metric name -> float (the first occurrence: each name appears once per section)."""
    out = {}
    for line in text.splitlines():
        m = METRIC.match(line)
        if m and m.group(1) not in out:
            try:
                out[m.group(1)] = float(m.group(3).replace(",", ""))
            except ValueError:
                pass
    return out


def top_stall(text):
    """(cycles, reason) of the stall reason ncu names with the largest share, or None."""
    flat = " ".join(text.split())
    best = None
    for m in STALL.finditer(flat):
        reason = m.group(2)
        for cut in (" Find ", " To ", " On ", " This "):
            reason = reason.split(cut)[0]
        cand = (float(m.group(1)), reason.strip())
        if best is None or cand[0] > best[0]:
            best = cand
    return best


def hot_instructions(path, top=3):
    """The `top` machine instructions with the most stall samples, from the CSV of
    `ncu --page source --csv --print-source sass` (a column of all stall samples and one of the
    instruction's text): [(share of the samples, instruction)], or [] where the table has
    neither column."""
    import csv
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError:
        return []
    head = next((i for i, r in enumerate(rows) if any("Stall Sampling (All" in c for c in r)),
                None)
    if head is None:
        return []
    cols = rows[head]
    si = next(i for i, c in enumerate(cols) if "Stall Sampling (All" in c)
    ti = next((i for i, c in enumerate(cols) if c.strip() in ("Source", "Instruction")), None)
    if ti is None:
        return []
    got = []
    for r in rows[head + 1:]:
        if len(r) > max(si, ti):
            try:
                got.append((float(r[si].replace(",", "")), r[ti].strip()))
            except ValueError:
                pass
    total = sum(x for x, _ in got)
    if total <= 0:
        return []
    got.sort(key=lambda x: -x[0])
    return [(x / total, t) for x, t in got[:top]]


def replay_state(text):
    if "differ from the recorded launch" in text:
        return "DIFFER"
    if "identical" in text and "Traceback" not in text and "cl_replay:" not in text:
        return "same"
    return "FAILED"


def summarize(d):
    rows = []
    for rp in sorted(glob.glob(os.path.join(d, "replay_*.txt"))):
        k = os.path.basename(rp)[len("replay_"):-len(".txt")]
        rt = open(rp).read()
        state = replay_state(rt)
        med = re.search(r"median ([\d.]+) us", rt)
        row = {"kernel": k, "replay": state, "replay_us": float(med.group(1)) if med else None}
        np_ = os.path.join(d, "ncu_%s.txt" % k)
        if os.path.exists(np_):
            nt = open(np_).read()
            m = metrics(nt)
            if "Duration" not in m:
                row["profile"] = "no profile (%s)" % (
                    "no kernel profiled" if "No kernels were profiled" in nt else "ncu failed")
            elif state != "same":
                row["profile"] = "not faid's launch (replay %s)" % state
            else:
                row.update(m=m, stall=top_stall(nt))
        else:
            row["profile"] = "not profiled"
        rows.append(row)
    return rows


def fmt(x, spec="{:.0f}"):
    return "-" if x is None else spec.format(x)


def main():
    d = sys.argv[1]
    rows = summarize(d)
    hdr = ("kernel", "replay", "us", "ncu us", "elapsed", "SM act", "regs", "occ %",
           "cyc/ins", "instr", "L2 %", "DRAM %", "largest stall (cycles of cyc/ins)")
    w = (20, 6, 7, 7, 9, 9, 4, 6, 7, 11, 5, 6, 0)
    print("kernels profiled (a replay of one recorded launch each; ncu's own clocks: its "
          "durations are longer than faid-bench's)")
    print(" ".join(h.rjust(n) if n else h for h, n in zip(hdr, w)))
    for r in rows:
        head = (r["kernel"], r["replay"], fmt(r["replay_us"], "{:.1f}"))
        if "m" not in r:
            print(" ".join(str(x).rjust(n) for x, n in zip(head, w)) + "  " + r["profile"])
            continue
        m, st = r["m"], r["stall"]
        cells = head + (fmt(m.get("Duration"), "{:.1f}"), fmt(m.get("Elapsed Cycles")),
                        fmt(m.get("SM Active Cycles")), fmt(m.get("Registers Per Thread")),
                        fmt(m.get("Achieved Occupancy"), "{:.1f}"),
                        fmt(m.get("Warp Cycles Per Issued Instruction"), "{:.1f}"),
                        fmt(m.get("Executed Instructions")),
                        fmt(m.get("L2 Cache Throughput"), "{:.1f}"),
                        fmt(m.get("DRAM Throughput"), "{:.1f}"),
                        "%.1f %s" % st if st else "-")
        print(" ".join(str(x).rjust(n) if n else str(x) for x, n in zip(cells, w)))
        for share, ins in hot_instructions(os.path.join(d, "src_%s.csv" % r["kernel"])):
            print("%s %4.1f %% of the stall samples: %s" % (" " * 20, 100 * share, ins))


if __name__ == "__main__":
    main()
