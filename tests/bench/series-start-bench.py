#!/usr/bin/env python3
"""series-start-bench.py: how long faid's ingest stops reading at a series start whose DECTRIS
stream v2 start message brings a detector pixel mask, on an EIGER 4M-sized setup. Measures,
never asserts on time.

faid runs on free loopback ports with the embedded default setup (EIGER 4M preset, 2167 x 2070,
1000 bins, split full) or CONFIG, devices DEVICE (default cpu), queue.depth 16, policy block.
Series, each a v2 start (pixel_mask of threshold_1, bslz4) followed at once by FRAMES images
(uint16, bslz4, encoded before the clock starts) and an end:
  1. mask A (a new setup is needed),
  2. mask A again (the same key: reused),
  3. mask B (another setup),
  4. mask B again.
Per series, from the moment the start message is sent: `read` = until status counters.received
has grown by FRAMES (ingest has read every image: the stall at the series start plus reading),
`start` = until faid's `start` is on the SUB socket, `first` = until the first result. The start's
`input.setup` and `setup_build_ms` are printed when faid sends them (older builds do not).

  FAID=build/bin/faid tests/bench/series-start-bench.py     (FRAMES=4, DEVICE=cpu by default)

Needs the shared venv (pyzmq, msgpack, cbor2, hdf5plugin) and tests/reference/dectris_stream.py."""

import os
import socket
import subprocess
import sys
import tempfile
import time

import msgpack
import numpy as np
import zmq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import dectris_stream as ds  # noqa: E402

FAID = os.environ.get("FAID", os.path.join(ROOT, "build", "bin", "faid"))
FRAMES = int(os.environ.get("FRAMES", "4"))
DEVICE = os.environ.get("DEVICE", "cpu")
CONFIG = os.environ.get("CONFIG", "")
ROWS, COLS = 2167, 2070
CH = ["threshold_1"]
TIMEOUT = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ports = {k: free_port() for k in ("in", "out", "ctl")}
    ep = lambda k: "tcp://127.0.0.1:%d" % ports[k]
    tmp = tempfile.mkdtemp(prefix="faid-series-start-")
    base = open(CONFIG).read() if CONFIG else ""
    cfg = os.path.join(tmp, "faid.yaml")
    with open(cfg, "w") as f:
        f.write(base + f"""
input:
  endpoint: "{ep('in')}"
  max_frame_bytes: 30000000
output:
  endpoint: "{ep('out')}"
control:
  endpoint: "{ep('ctl')}"
devices: {DEVICE}
queue:
  depth: 16
  policy: block
""")
    log = open(os.path.join(tmp, "faid.log"), "w+")
    proc = subprocess.Popen([FAID, "-c", cfg], stdout=log, stderr=subprocess.STDOUT)
    ctx = zmq.Context()

    def request(req):
        s = ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(ep("ctl"))
        s.send(msgpack.packb(req))
        if not s.poll(TIMEOUT * 1000):
            raise TimeoutError(req)
        r = msgpack.unpackb(s.recv())
        s.close()
        return r

    t_end = time.monotonic() + TIMEOUT
    while True:
        try:
            if request({"cmd": "ping"})["ok"]:
                break
        except TimeoutError:
            pass
        if proc.poll() is not None or time.monotonic() > t_end:
            log.seek(0)
            sys.exit("faid did not start:\n" + log.read())
    sub = ctx.socket(zmq.SUB)
    sub.connect(ep("out"))
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    push = ctx.socket(zmq.PUSH)
    push.connect(ep("in"))
    time.sleep(0.5)

    rng = np.random.default_rng(3)
    masks = {}
    for name in "AB":
        m = np.zeros((ROWS, COLS), np.uint32)
        m.flat[rng.choice(ROWS * COLS, 4000, replace=False)] = 1  # 0.1 % bad pixels
        masks[name] = m
    arrays = [rng.poisson(2, (ROWS, COLS)).astype(np.uint16) for _ in range(FRAMES)]

    rows = []
    plan = [(1, "A"), (2, "A"), (3, "B"), (4, "B")]
    for sid, mname in plan:
        uid = "bench-%d" % sid
        start = ds.v2_encode(ds.v2_start(sid, uid, CH, (ROWS, COLS), "uint16",
                                         masks={CH[0]: masks[mname]}, compression="bslz4"))
        # Encoded before the clock starts.
        frames = [ds.v2_encode(ds.v2_image(sid, uid, i, {CH[0]: a}, "bslz4"))
                  for i, a in enumerate(arrays)]
        c0 = request({"cmd": "status"})["counters"]["received"]
        t0 = time.monotonic()
        push.send(start)
        for f in frames:
            push.send(f)
        push.send(ds.v2_encode(ds.v2_end(sid, uid)))
        t_read = t_start = t_first = None
        ended = False
        info = {}
        while t_read is None or t_start is None or t_first is None or not ended:
            if time.monotonic() - t0 > TIMEOUT:
                sys.exit("series %d: timed out" % sid)
            if t_read is None and \
                    request({"cmd": "status"})["counters"]["received"] - c0 >= FRAMES:
                t_read = time.monotonic() - t0
            while sub.poll(0):
                topic, body = sub.recv_multipart()
                m = msgpack.unpackb(body)
                now = time.monotonic() - t0
                if m.get("series_id") != sid:
                    continue
                if m["type"] == "start" and t_start is None:
                    t_start = now
                    info = m.get("input", {})
                elif m["type"] == "result" and t_first is None:
                    t_first = now
                elif m["type"] == "end":
                    ended = True  # each series is timed alone: its end before the next start
            time.sleep(0.005)
        rows.append((sid, mname, info.get("setup", "-"), info.get("setup_build_ms"),
                     t_read, t_start, t_first))
    request({"cmd": "stop"})
    proc.wait(TIMEOUT)
    print("faid %s, EIGER 4M (%d x %d), %d frames per series, devices %s" %
          (FAID, ROWS, COLS, FRAMES, DEVICE))
    print("%-6s %-4s %-8s %9s %9s %9s %9s" %
          ("series", "mask", "setup", "build_ms", "read_ms", "start_ms", "first_ms"))
    for sid, mname, setup, bms, tr, ts, tf in rows:
        print("%-6d %-4s %-8s %9s %9.0f %9.0f %9.0f" %
              (sid, mname, setup, "-" if bms is None else "%.0f" % bms, tr * 1e3, ts * 1e3,
               tf * 1e3))
    log.seek(0)
    for line in log:
        if "setup" in line and ("series" in line or "built" in line):
            print("  log:", line.rstrip())


if __name__ == "__main__":
    main()
