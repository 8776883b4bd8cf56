#!/usr/bin/env python3
"""Replays one kernel launch recorded by the launch recorder (tests/bench/clrec/faid_clrec.c) and
checks that it writes what the recorded launch wrote.

    cl_replay.py [--backend opencl|cuda] [--device TEXT] [--repeat N] RECORD_DIR

RECORD_DIR is one kernel's record (FAID_CLREC_DIR/KERNEL: meta.json, program.bin, argNN.in,
argNN.out). The buffers are uploaded from argNN.in, the scalars and the geometry are the
recorded ones, and after the first launch every buffer is compared with argNN.out, byte for
byte: the exit status is 1 when one differs (the replay is then not the launch it claims to
be), 2 for a record this backend cannot launch (the reason is printed).

Backends:
  opencl  pyopencl: the recorded binary through clCreateProgramWithBinary, on the first device
          whose name contains --device (default: the record's device name)
  cuda    cupy: the recorded binary must be PTX (NVIDIA's OpenCL): loaded as a CUDA module and
          launched with grid = global / local. This is the launch that Nsight Compute profiles
          (it reads CUDA launches only, not OpenCL ones):
              ncu --section WarpStateStats ... python3 cl_replay.py --backend cuda DIR
          Local-memory arguments and a global offset are refused (exit status 2).

--repeat N launches it N times more after the check and prints the median time per launch
(events of the backend; the buffers keep whatever the launches left in them, so later launches
may take other paths than the first; the first is the one compared and profiled).
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np


def load(rec):
    with open(os.path.join(rec, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(rec, "program.bin"), "rb") as f:
        binary = f.read()
    ins, outs = {}, {}
    for i, a in enumerate(meta["args"]):
        if a["kind"] == "mem":
            p = os.path.join(rec, "arg%02d" % i)
            ins[i] = np.fromfile(p + ".in", dtype=np.uint8)
            outs[i] = np.fromfile(p + ".out", dtype=np.uint8)
            if ins[i].size != a["size"] or outs[i].size != a["size"]:
                sys.exit("cl_replay: %s argument %d: %d/%d bytes in the files, %d in meta.json" % (
                    rec, i, ins[i].size, outs[i].size, a["size"]))
        elif a["kind"] == "unset":
            sys.exit("cl_replay: %s argument %d was never set" % (rec, i))
    return meta, binary, ins, outs


def scalar(a):
    """A scalar argument as the numpy scalar of its size holding the recorded bytes."""
    raw = bytes.fromhex(a["hex"])
    t = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(len(raw))
    if t is None or len(raw) != a["size"]:
        raise ValueError("a scalar of %d bytes" % a["size"])
    return np.frombuffer(raw, dtype=t)[0]


def compare(meta, outs, got):
    """Per buffer argument: identical, or the count of bytes that differ."""
    bad = 0
    for i, want in outs.items():
        g = got[i]
        n = int(np.count_nonzero(g != want))
        if n:
            bad += 1
            extra = ""
            if want.size % 4 == 0:
                wf, gf = want.view(np.float32), g.view(np.float32)
                d = np.flatnonzero(wf.view(np.uint32) != gf.view(np.uint32))
                extra = "; first differing float32 #%d: %r vs recorded %r" % (d[0], gf[d[0]],
                                                                                wf[d[0]])
            print("  argument %d: %d of %d bytes differ from the recorded launch%s" % (
                i, n, want.size, extra))
        else:
            print("  argument %d: %d bytes, identical" % (i, want.size))
    return bad


def run_opencl(meta, binary, ins, args):
    import pyopencl as cl
    want = args.device or meta["device"]
    devs = [d for p in cl.get_platforms() for d in p.get_devices() if want in d.name]
    if not devs:
        sys.exit("cl_replay: no OpenCL device named like %r" % want)
    dev = devs[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(ctx, [dev], [binary]).build(options=meta["build_options"])
    k = getattr(prg, meta["kernel"])
    bufs = {}
    for i, a in enumerate(meta["args"]):
        if a["kind"] == "mem":
            bufs[i] = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                hostbuf=ins[i])
            k.set_arg(i, bufs[i])
        elif a["kind"] == "local":
            k.set_arg(i, cl.LocalMemory(a["size"]))
        else:
            k.set_arg(i, scalar(a))
    gws, lws, off = meta["global"], meta["local"], meta["offset"]

    def launch():
        e = cl.enqueue_nd_range_kernel(q, k, gws, lws, global_work_offset=off)
        e.wait()
        return (e.profile.end - e.profile.start) * 1e-3

    # the kernel's arguments refer to these buffers: they live as long as the launches do (the
    # kernel object does not hold them; freed, the next launch reads released memory)
    launch.keep = (ctx, prg, bufs)

    t0 = launch()
    got = {}
    for i in bufs:
        got[i] = np.empty_like(ins[i])
        cl.enqueue_copy(q, got[i], bufs[i])
    return t0, got, launch, dev.name


# NVIDIA's OpenCL reads the launch's offsets from environment registers that its runtime sets
# and a CUDA launch does not (they hold other values there: a replayed sigma clip took 6.8 us
# and wrote other bytes, one H100, 2026-11-27): get_group_id(0) is %envreg0 + %ctaid.x,
# get_global_id(0) %envreg3 + %ctaid.x * %ntid.x + %tid.x, get_global_size(0) %envreg6 * %ntid.x
# (read from the PTX of faid's kernels). A replay has no offsets and one launch for the grid.
ENVREG = {0: "0", 1: "0", 2: "0", 3: "0", 4: "0", 5: "0",
          6: "%nctaid.x", 7: "%nctaid.y", 8: "%nctaid.z"}


def ptx_for_cuda(ptx):
    """The PTX text with every read of an environment register replaced by its value in a launch
    without offsets; ValueError naming a register it does not know."""
    import re

    def sub(m):
        k = int(m.group(3))
        if k not in ENVREG:
            raise ValueError("%%envreg%d (line: %s)" % (k, m.group(0).strip()))
        v = ENVREG[k]
        return "%smov.u32 %s, %s;" % (m.group(1), m.group(2), v)
    out = re.sub(r"(\s*)mov\.[bu]32\s+(%r\d+),\s*%envreg(\d+);", sub, ptx)
    left = re.search(r".*%envreg\d+.*", out)
    if left:
        raise ValueError("an environment register read otherwise than by mov: %s" %
                         left.group(0).strip())
    return out


def ptx_maxnreg(ptx, kernel, options):
    """The PTX text with the register cap of the recorded build (NVIDIA's -cl-nv-maxrregcount=N,
    a ptxas option that the PTX does not carry) written as `.maxnreg N` on the kernel's entry, so
    that a CUDA replay runs at the occupancy of faid's launch (round 8: the sigma clip's replay
    used 128 registers where faid's build was capped at 80); the text unchanged without a cap or
    where the entry has one."""
    import re
    m = re.search(r"-cl-nv-maxrregcount[= ](\d+)", options or "")
    if not m:
        return ptx
    entry = re.compile(r"(\.entry\s+%s\s*\([^()]*\))(\s*)(?=\{)" % re.escape(kernel))
    e = entry.search(ptx)
    if not e or ".maxnreg" in ptx[e.start():ptx.find("{", e.end())]:
        return ptx
    return ptx[:e.end(1)] + "\n.maxnreg %s" % m.group(1) + ptx[e.end(1):]


def run_cuda(meta, binary, ins, args):
    import cupy as cp
    if meta["offset"] and any(meta["offset"]):
        print("cl_replay: a global offset %s: the cuda backend launches without one" %
              meta["offset"])
        sys.exit(2)
    if not binary.lstrip().startswith((b"//", b".version")):
        print("cl_replay: program.bin is not PTX text (recorded on %s)" % meta["device"])
        sys.exit(2)
    if meta["local"] is None:
        print("cl_replay: the recorded launch left the work-group size to the runtime")
        sys.exit(2)
    try:
        ptx = ptx_maxnreg(ptx_for_cuda(binary.rstrip(b"\0").decode()), meta["kernel"],
                          meta.get("build_options"))
    except ValueError as e:
        print("cl_replay: the PTX reads a register a CUDA launch does not set: %s" % e)
        sys.exit(2)
    path = os.path.join(args.record, "program.ptx")
    with open(path, "w") as f:
        f.write(ptx)
    try:
        fn = cp.RawModule(path=path).get_function(meta["kernel"])
    except cp.cuda.driver.CUDADriverError as e:
        # the driver says only "invalid image": ptxas, where it is installed, says why
        import shutil
        import subprocess
        why = ""
        if shutil.which("ptxas"):
            cc = cp.cuda.Device().compute_capability
            r = subprocess.run(["ptxas", "-arch=sm_%s" % cc, path, "-o", os.devnull],
                               capture_output=True, text=True)
            why = (r.stdout + r.stderr).strip()[-2000:]
        print("cl_replay: CUDA does not load %s: %s\n%s" % (path, e, why))
        sys.exit(2)
    bufs, cargs = {}, []
    for i, a in enumerate(meta["args"]):
        if a["kind"] == "mem":
            bufs[i] = cp.asarray(ins[i])
            cargs.append(bufs[i])
        elif a["kind"] == "local":
            print("cl_replay: argument %d is local memory (%d bytes): not replayed through "
                  "CUDA" % (i, a["size"]))
            sys.exit(2)
        else:
            cargs.append(scalar(a))
    lws = list(meta["local"]) + [1] * (3 - len(meta["local"]))
    gws = list(meta["global"]) + [1] * (3 - len(meta["global"]))
    if any(g % l for g, l in zip(gws, lws)):
        print("cl_replay: global %s is not a multiple of local %s" % (gws, lws))
        sys.exit(2)
    grid = tuple(g // l for g, l in zip(gws, lws))
    start, end = cp.cuda.Event(), cp.cuda.Event()

    def launch():
        start.record()
        fn(grid, tuple(lws), tuple(cargs))
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e3

    t0 = launch()
    got = {i: cp.asnumpy(b) for i, b in bufs.items()}
    return t0, got, launch, cp.cuda.runtime.getDeviceProperties(0)["name"].decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("record")
    ap.add_argument("--backend", choices=("opencl", "cuda"), default="opencl")
    ap.add_argument("--device", default=None)
    ap.add_argument("--repeat", type=int, default=0)
    args = ap.parse_args()
    meta, binary, ins, outs = load(args.record)
    run = run_opencl if args.backend == "opencl" else run_cuda
    t0, got, launch, devname = run(meta, binary, ins, args)
    print("%s on %s (%s): global %s, local %s, first launch %.1f us" % (
        meta["kernel"], devname, args.backend, meta["global"], meta["local"], t0))
    bad = compare(meta, outs, got)
    if args.repeat > 0:
        ts = [launch() for _ in range(args.repeat)]
        print("%s: median %.1f us over %d more launches (min %.1f, max %.1f)" % (
            meta["kernel"], statistics.median(ts), len(ts), min(ts), max(ts)))
    if bad:
        print("cl_replay: %d buffer(s) differ from the recorded launch" % bad)
        sys.exit(1)


if __name__ == "__main__":
    main()
