#!/usr/bin/env python3
"""Reference pipeline timing: pyFAI + silx on the same OpenCL device, on the same frame as
faid-bench, so the two numbers come from one run on one machine.

Measured per frame (median over --frames):
  silx_decode      silx GPU bitshuffle-LZ4 decompression of the chunk sent from host memory
  pyfai_host       pyFAI integrate1d, CSR full split, OpenCL, frame sent from host memory
  pyfai_device     same, frame already in device memory
  pipeline         chunk in host memory -> silx decode on device -> pyFAI integrate -> profile in
                   host memory (what faid-bench's end-to-end figure measures)
  cython           pyFAI CSR cython (CPU, all cores), a few frames only
Writes one JSON object (--json) and a short table on stdout.
"""
import argparse
import json
import statistics
import sys
import time

import numpy


def median_time(fn, n):
    fn()  # warm-up
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frame", required=True, help=".npy frame (H x W)")
    ap.add_argument("--chunk", required=True, help="bitshuffle-LZ4 chunk of the same frame")
    ap.add_argument("--poni", required=True, help="geometry as a .poni file")
    ap.add_argument("--npt", type=int, default=1000)
    ap.add_argument("--unit", default="q_nm^-1")
    ap.add_argument("--split", default="full")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--cython-frames", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()

    import pyFAI
    import pyopencl
    import pyopencl.array as cla
    from pyFAI.integrator.azimuthal import AzimuthalIntegrator
    from silx.opencl.codec.bitshuffle_lz4 import BitshuffleLz4

    frame = numpy.load(args.frame)
    with open(args.chunk, "rb") as f:
        chunk = f.read()
    ai = AzimuthalIntegrator()
    ai.load(args.poni)
    if ai.detector.shape is None or tuple(ai.detector.shape) != frame.shape:
        ai.detector.shape = ai.detector.max_shape = frame.shape
    kw = dict(unit=args.unit, error_model="poisson", correctSolidAngle=True)
    method = (args.split, "csr", "opencl")
    t0 = time.perf_counter()
    ref = ai.integrate1d(frame, args.npt, method=method, **kw)
    setup_s = time.perf_counter() - t0
    engine = [e for k, e in ai.engines.items() if "OpenCL" in str(k)][0].engine
    queue = engine.queue
    device = queue.device
    dec = BitshuffleLz4(len(chunk), frame.size, frame.dtype, ctx=engine.ctx)

    def silx_decode():
        out = dec.decompress(chunk)
        queue.finish()
        return out

    check = silx_decode().get()
    decode_ok = bool(numpy.array_equal(check.reshape(frame.shape), frame))

    gframe = cla.to_device(queue, frame)
    res = {}
    res["silx_decode_us"] = 1e6 * median_time(silx_decode, args.frames)
    res["pyfai_host_us"] = 1e6 * median_time(
        lambda: ai.integrate1d(frame, args.npt, method=method, **kw), args.frames)
    res["pyfai_device_us"] = 1e6 * median_time(
        lambda: ai.integrate1d(gframe, args.npt, method=method, **kw), args.frames)

    def pipeline():
        g = dec.decompress(chunk)
        return ai.integrate1d(g.reshape(frame.shape), args.npt, method=method, **kw)

    res["pipeline_us"] = 1e6 * median_time(pipeline, args.frames)
    res["pipeline_fps"] = 1e6 / res["pipeline_us"]
    if args.cython_frames > 0:
        cmeth = (args.split, "csr", "cython")
        ai.integrate1d(frame, args.npt, method=cmeth, **kw)
        res["cython_us"] = 1e6 * median_time(
            lambda: ai.integrate1d(frame, args.npt, method=cmeth, **kw), args.cython_frames)
    res.update(device=device.name.strip(), platform=device.platform.name.strip(),
               pyfai=pyFAI.version, frames=args.frames, setup_s=setup_s,
               silx_decode_bit_exact=decode_ok, shape=list(frame.shape),
               dtype=str(frame.dtype), chunk_bytes=len(chunk))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    print(f"reference pyFAI {pyFAI.version} + silx on {res['device']} ({res['platform']})")
    for k in ("silx_decode_us", "pyfai_host_us", "pyfai_device_us", "pipeline_us", "cython_us"):
        if k in res:
            print(f"  {k:18s} {res[k]:12.1f}")
    print(f"  pipeline_fps       {res['pipeline_fps']:12.1f}")
    print(f"  silx decode bit-exact: {decode_ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
