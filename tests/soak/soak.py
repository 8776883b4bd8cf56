#!/usr/bin/env python3
"""Soak test of the faid daemon (not part of CI: it runs for minutes to hours).

Starts faid on free loopback ports with a small detector and streams small frames at it for a long
time, with about 1 % malformed traffic of several kinds, periodic reloads of the configuration
(alternating between two setups), a churn of PUB subscribers (one connects, reads a while and
leaves, again and again) and an acknowledging consumer on the lossless channel; with --peaks
also peakfinder8 on (half the frames are hits), a hits subscriber and a `next` requester. Every
--sample seconds it records the daemon's resident memory (VmRSS), open file descriptors,
threads and counters; at the end it prints the frames in and out, the counters, whether the
frame accounting holds (received = processed + failed + dropped; every good frame sent came out
of the lossless channel once) and the RSS slope over the whole run and over its second half, and
exits 1 when the accounting does not hold.

    python3 tests/soak/soak.py                                 # the full run: 10^6 frames
    python3 tests/soak/soak.py --frames 60000 --rate 400       # a few minutes
    python3 tests/soak/soak.py --frames 20000 --wrapper "valgrind --tool=massif \\
        --massif-out-file=/tmp/faid.massif" --devices ref      # heap profile (ref device:
                                                               # valgrind cannot follow PoCL)

Needs pyzmq, msgpack and numpy (the shared venv). The daemon is build/bin/faid unless --faid
says otherwise; its log goes to --log (default: a file in the temporary directory, printed on
failure)."""

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import msgpack
import numpy as np
import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ep(port):
    return "tcp://127.0.0.1:%d" % port


PEAKS = """peaks:
  algorithm: peakfinder8
  adc_threshold: 60
  minimum_snr: 5
  min_pixel_count: 2
  local_bg_radius: 3
  min_peaks_for_hit: 5
  hit_rate_window: 200
  aggregates_interval: 0.5
"""


def config(ports, rows, cols, npt, devices, depth, lossless_buffer, peaks=False):
    extra = ""
    if peaks:
        extra = PEAKS + f"""hits:
  endpoint: "{ep(ports['hits'])}"
  request_endpoint: "{ep(ports['hreq'])}"
"""
    return extra + f"""detector:
  preset: null
  shape: [{rows}, {cols}]
  pixel_size: [1.0e-4, 1.0e-4]
geometry:
  dist: 0.1
  poni1: {rows * 0.5e-4}
  poni2: {cols * 0.5e-4}
  wavelength: 1.0e-10
integration:
  npt: {npt}
  unit: q_nm^-1
  split: full
input:
  endpoint: "{ep(ports['in'])}"
  mode: bind
  max_frame_bytes: {rows * cols * 4 + 4096}
output:
  endpoint: "{ep(ports['out'])}"
  lossless_endpoint: "{ep(ports['ll'])}"
  lossless_buffer: {lossless_buffer}
control:
  endpoint: "{ep(ports['ctl'])}"
devices: {devices}
queue:
  depth: {depth}
  policy: block
stats:
  interval: 1.0
log:
  level: warn
"""


class Daemon:
    def __init__(self, args, tmp):
        self.ports = {k: free_port() for k in ("in", "out", "ll", "ctl", "hits", "hreq")}
        self.cfgs = []
        for k, npt in enumerate((args.npt, args.npt + 16)):
            path = os.path.join(tmp, "faid%d.yaml" % k)
            with open(path, "w") as f:
                f.write(config(self.ports, args.rows, args.cols, npt, args.devices, args.depth,
                               args.lossless_buffer, args.peaks))
            self.cfgs.append(path)
        self.log_path = args.log or os.path.join(tmp, "faid.log")
        self.log = open(self.log_path, "w")
        env = dict(os.environ)
        env.setdefault("POCL_MAX_PTHREAD_COUNT", "2")
        cmd = shlex.split(args.wrapper) + [args.faid, "-c", self.cfgs[0]]
        self.faid = args.faid
        self.lossless_buffer = 0 if args.no_lossless else args.lossless_buffer
        self.pinned_bytes = 0  # from status, once faid answers
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.ctx = zmq.Context()
        self.pid = None

    def request(self, req, timeout=30.0):
        s = self.ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(ep(self.ports["ctl"]))
        try:
            s.send(msgpack.packb(req))
            if not s.poll(int(timeout * 1000)):
                raise TimeoutError("no reply to %r" % (req,))
            return msgpack.unpackb(s.recv())
        finally:
            s.close()

    def wait_ready(self, timeout=300):
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            if self.proc.poll() is not None:
                raise RuntimeError("faid exited early, see " + self.log_path)
            try:
                if self.request({"cmd": "ping"}, timeout=2)["ok"]:
                    break
            except TimeoutError:
                pass
        else:
            raise TimeoutError("faid never answered")
        self.pid = self.find_pid()
        self.pinned_bytes = self.request({"cmd": "status"})["input"].get("pinned_bytes", 0)

    def find_pid(self):
        """The faid process itself. A wrapper may be faid (valgrind execs its tool in place) or
        its parent or grandparent (heaptrack is a shell script that starts faid with its
        preload library, with helper processes beside it): the first descendant whose executable
        is the faid binary, else the process started."""
        want = os.path.realpath(self.faid)
        todo, seen = [self.proc.pid], set()
        while todo:
            pid = todo.pop(0)
            if pid in seen:
                continue
            seen.add(pid)
            try:
                if os.path.realpath("/proc/%d/exe" % pid) == want:
                    return pid
            except OSError:
                pass
            try:
                for task in os.listdir("/proc/%d/task" % pid):
                    with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                        todo += [int(x) for x in f.read().split()]
            except OSError:
                pass
        return self.proc.pid

    def sample(self):
        st = {}
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k in ("VmRSS", "VmHWM", "Threads", "RssAnon", "RssFile"):
                        st[k] = int(v.split()[0])
            st["fds"] = len(os.listdir("/proc/%d/fd" % self.pid))
        except OSError:
            pass
        st.update(self.anon_split())
        return st

    def anon_split(self):
        """The resident anonymous memory (smaps `Anonymous`, kB) of the two big buffers faid
        allocates once, told apart by their size, and of everything else (malloc arenas,
        stacks, runtime buffers): the lossless ring (output.lossless_buffer, mapped; its pages
        follow what is held) and the input arena (input.pinned_bytes; plain memory with the ref
        device and PoCL, whose pages stay resident once a backlog has reached them)."""
        ring = arena = other = 0
        lo_ring, lo_arena = self.lossless_buffer, self.pinned_bytes
        size = 0
        try:
            with open("/proc/%d/smaps" % self.pid) as f:
                for line in f:
                    if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                        a, b = line.split(" ", 1)[0].split("-")
                        size = int(b, 16) - int(a, 16)
                    elif line.startswith("Anonymous:"):
                        kb = int(line.split()[1])
                        if lo_ring and lo_ring <= size <= lo_ring + (64 << 10):
                            ring += kb
                        elif lo_arena and lo_arena <= size <= lo_arena + (1 << 20):
                            arena += kb
                        else:
                            other += kb
        except OSError:
            return {}
        return {"ring": ring, "inarena": arena, "otheranon": other}

    def stop(self, timeout=600):
        if self.proc.poll() is None:
            # To faid itself: a wrapper script (heaptrack) would not pass the signal on.
            try:
                os.kill(self.pid or self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.ctx.destroy(linger=0)
        self.log.close()
        return self.proc.returncode


def malformed(kind, fid, rows, cols, good):
    """One malformed message of kind k (cycled); each is rejected by faid and counted."""
    hdr = lambda **kw: msgpack.packb(dict({"type": "image", "protocol_version": 1, "series_id": 0,
                                           "frame_id": fid, "shape": [rows, cols],
                                           "dtype": "uint16", "encoding": "none"}, **kw))
    kinds = [
        lambda: [b"\x00garbage that is not msgpack"],
        lambda: [b"\x8f\xa1a"],                                            # truncated map
        lambda: [hdr(shape=[rows, cols // 2]), good[:len(good) // 2]],     # wrong shape
        lambda: [hdr(), good[:-2]],                                        # short payload
        lambda: [hdr(encoding="zstd"), good],                              # unknown encoding
        lambda: [hdr(encoding="bslz4"),                                    # corrupt bslz4
                 (rows * cols * 2).to_bytes(8, "big") + (8192).to_bytes(4, "big") +
                 b"\x00\x00\x10\x00" + os.urandom(200)],
        lambda: [hdr(), good, b"third part"],                              # three parts
        lambda: [hdr()],                                                   # no payload
        lambda: [hdr(protocol_version=99), good],                          # unknown version
    ]
    return kinds[kind % len(kinds)]()


class Sender(threading.Thread):
    def __init__(self, d, args):
        super().__init__(daemon=True)
        self.d, self.args = d, args
        self.good = self.bad = self.series = 0
        self.done = threading.Event()
        rng = np.random.default_rng(7)
        self.frames = [rng.poisson(20, (args.rows, args.cols)).astype(np.uint16).tobytes()
                       for _ in range(8)]
        if args.peaks:  # frames 0, 2, 4, 6: 6-14 bright spots (hits), the others background
            yy, xx = np.mgrid[0:args.rows, 0:args.cols]
            for k in range(0, 8, 2):
                lam = np.full((args.rows, args.cols), 4.0)
                for _ in range(6 + k):
                    x, y = rng.uniform(6, args.cols - 6), rng.uniform(6, args.rows - 6)
                    lam += rng.uniform(400, 900) * np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / 2)
                self.frames[k] = rng.poisson(lam).astype(np.uint16).tobytes()

    def run(self):
        a = self.args
        sock = self.d.ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 10000)
        sock.setsockopt(zmq.SNDHWM, 1000)
        sock.connect(ep(self.d.ports["in"]))
        t0 = time.monotonic()
        sid = 0
        bad_every = max(1, int(round(1 / a.malformed))) if a.malformed > 0 else 0
        n = 0
        while n < a.frames and not STOP.is_set():
            if n % a.series_len == 0:
                if sid:
                    sock.send(msgpack.packb({"type": "end", "protocol_version": 1,
                                             "series_id": sid}))
                sid += 1
                self.series += 1
                sock.send(msgpack.packb({"type": "start", "protocol_version": 1,
                                         "series_id": sid, "nimages": a.series_len}))
            if bad_every and (n + self.bad) % bad_every == bad_every - 1:
                parts = malformed(self.bad, 10_000_000 + self.bad, a.rows, a.cols,
                                  self.frames[0])
                if parts[0][:1] in (b"\x8f", b"\x00") or b"protocol_version" not in parts[0]:
                    pass
                else:  # image headers name the current series
                    h = msgpack.unpackb(parts[0])
                    h["series_id"] = sid
                    parts[0] = msgpack.packb(h)
                sock.send_multipart(parts)
                self.bad += 1
                continue
            h = msgpack.packb({"type": "image", "protocol_version": 1, "series_id": sid,
                               "frame_id": n % a.series_len, "shape": [a.rows, a.cols],
                               "dtype": "uint16", "encoding": "none"})
            sock.send_multipart([h, self.frames[n % len(self.frames)]], copy=False)
            n += 1
            self.good = n
            if a.rate > 0:
                ahead = n / a.rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
        if sid:
            sock.send(msgpack.packb({"type": "end", "protocol_version": 1, "series_id": sid}))
        sock.close()
        self.done.set()


class LosslessConsumer(threading.Thread):
    """Acknowledging consumer of the lossless channel (proto/PROTOCOL.md 3.6)."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.results = self.errors = self.starts = self.ends = self.duplicates = 0
        self.gaps = 0
        self.last = None
        self.instance = ""

    def run(self):
        sock = self.d.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTING_ID, b"soak-archiver")
        sock.connect(ep(self.d.ports["ll"]))
        credit = 1024
        sock.send(msgpack.packb({"type": "hello", "credit": credit}))
        last_ack, unacked = time.monotonic(), 0
        try:
            while not CONSUMER_STOP.is_set():
                now = time.monotonic()
                if unacked and (unacked >= credit // 4 or now - last_ack > 0.1) or \
                        now - last_ack > 1.0:
                    m = {"type": "ack", "credit": credit}
                    if self.last is not None:
                        m.update(seq=self.last, instance=self.instance)
                    sock.send(msgpack.packb(m))
                    last_ack, unacked = now, 0
                if not sock.poll(50):
                    continue
                topic, body = sock.recv_multipart()
                m = msgpack.unpackb(body)
                t = m["type"]
                if t == "welcome":
                    self.instance = m["instance"]
                    continue
                if t in ("ping", "refused"):
                    continue
                n = m["msg_number"]
                if self.last is not None and n <= self.last:
                    self.duplicates += 1
                    continue
                if self.last is not None and n != self.last + 1:
                    self.gaps += n - self.last - 1
                self.last = n
                unacked += 1
                if t == "result":
                    self.results += 1
                elif t == "error":
                    self.errors += 1
                elif t == "start":
                    self.starts += 1
                elif t == "end":
                    self.ends += 1
            if self.last is not None:
                sock.send(msgpack.packb({"type": "ack", "seq": self.last,
                                         "instance": self.instance}))
            sock.send(msgpack.packb({"type": "bye"}))
        except zmq.ZMQError:
            pass
        finally:
            sock.close(500)


class Churn(threading.Thread):
    """PUB subscribers that come and go: each connects, reads for `stay` seconds and leaves."""

    def __init__(self, d, every, stay):
        super().__init__(daemon=True)
        self.d, self.every, self.stay = d, every, stay
        self.subscribers = self.messages = 0

    def run(self):
        while not STOP.is_set():
            sock = self.d.ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SUBSCRIBE, b"" if self.subscribers % 2 else b"result")
            sock.connect(ep(self.d.ports["out"]))
            self.subscribers += 1
            t_end = time.monotonic() + self.stay
            try:
                while time.monotonic() < t_end and not STOP.is_set():
                    if sock.poll(50):
                        sock.recv_multipart()
                        self.messages += 1
            except zmq.ZMQError:
                return
            sock.close(0)
            STOP.wait(max(0.0, self.every - self.stay))


class Hits(threading.Thread):
    """--peaks: a requester on hits.request_endpoint (REQ `next`, a new socket every 20 answers,
    a `resetplots` now and then) and a subscriber of hits.endpoint that comes and goes."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.requested = self.received = 0

    def run(self):
        sub = None
        req = None
        n = 0
        try:
            while not STOP.is_set():
                if req is None:
                    req = self.d.ctx.socket(zmq.REQ)
                    req.setsockopt(zmq.LINGER, 0)
                    req.connect(ep(self.d.ports["hreq"]))
                    sub = self.d.ctx.socket(zmq.SUB)
                    sub.setsockopt(zmq.LINGER, 0)
                    sub.setsockopt(zmq.SUBSCRIBE, b"")
                    sub.connect(ep(self.d.ports["hits"]))
                req.send(b"resetplots" if n % 50 == 49 else b"next")
                n += 1
                self.requested += 1
                t_end = time.monotonic() + 2.0
                got = False
                while time.monotonic() < t_end and not STOP.is_set():
                    if sub.poll(0):
                        sub.recv_multipart()
                        self.received += 1
                    if req.poll(20):
                        req.recv_multipart()
                        got = True
                        break
                if not got or n % 20 == 0:
                    req.close(0)
                    sub.close(0)
                    req = sub = None
        except zmq.ZMQError:
            pass
        finally:
            for s in (req, sub):
                if s is not None:
                    s.close(0)


STOP = threading.Event()
CONSUMER_STOP = threading.Event()


def slope_mb_per_min(samples, frac_from=0.0, key="rss_kb"):
    pts = [(s["t"], s[key] / 1024.0) for s in samples if key in s]
    if not pts:
        return float("nan")
    t_last = pts[-1][0]
    pts = [p for p in pts if p[0] >= frac_from * t_last]
    if len(pts) < 3:
        return float("nan")
    t = np.array([p[0] for p in pts]) / 60.0
    y = np.array([p[1] for p in pts])
    return float(np.polyfit(t, y, 1)[0])


# used = in_use - mmap: the bytes in use inside the arenas (the mapped blocks are the big buffers
# allocated once: the lossless ring, the input arena; counted at their mapped, not resident, size).
# ring, inarena, otheranon: the resident anonymous memory split by mapping (Daemon.anon_split).
MEM_KINDS = ("rss", "anon", "used", "free", "heap", "mmap", "ring", "inarena", "otheranon")


def minute_means(samples):
    """Mean of each kind of memory (MB) over each whole minute of the run."""
    out = {}
    for s in samples:
        out.setdefault(int(s["t"] // 60), []).append(s)
    return [{"minute": m, **{k: float(np.mean([s.get(k + "_kb", 0) for s in v])) / 1024
                             for k in MEM_KINDS}}
            for m, v in sorted(out.items())]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=1_000_000, help="good frames to send")
    p.add_argument("--rate", type=float, default=0, help="frames/s (0 = as fast as faid takes)")
    p.add_argument("--malformed", type=float, default=0.01, help="fraction of malformed messages")
    p.add_argument("--series-len", type=int, default=10000, help="frames per series")
    p.add_argument("--reload-every", type=float, default=20.0, help="s between reloads (0 = off)")
    p.add_argument("--churn-every", type=float, default=2.0, help="s between subscribers (0 = off)")
    p.add_argument("--churn-stay", type=float, default=1.0, help="s each subscriber stays")
    p.add_argument("--no-lossless", action="store_true", help="no lossless consumer")
    p.add_argument("--peaks", action="store_true",
                   help="peakfinder8 on, half the frames hits, a hits requester and subscriber")
    p.add_argument("--sample", type=float, default=5.0, help="s between samples")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--cols", type=int, default=64)
    p.add_argument("--npt", type=int, default=64)
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--lossless-buffer", type=int, default=64 << 20)
    p.add_argument("--devices", default="cpu")
    p.add_argument("--faid", default=os.path.join(ROOT, "build", "bin", "faid"))
    p.add_argument("--wrapper", default="", help="command prefix, e.g. valgrind --tool=massif")
    p.add_argument("--log", default=None, help="faid's log file")
    p.add_argument("--json", default=None, help="write the samples and the summary here")
    args = p.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="faid-soak-")
    d = Daemon(args, tmp)
    samples = []
    summary = {}
    ok = False
    try:
        d.wait_ready()
        consumer = None if args.no_lossless else LosslessConsumer(d)
        if consumer:
            consumer.start()
        churn = Churn(d, args.churn_every, min(args.churn_stay, args.churn_every)) \
            if args.churn_every > 0 else None
        if churn:
            churn.start()
        hits = Hits(d) if args.peaks else None
        if hits:
            hits.start()
        tx = Sender(d, args)
        t0 = time.monotonic()
        tx.start()
        reloads = reload_failures = 0
        next_reload = t0 + args.reload_every if args.reload_every > 0 else float("inf")
        next_sample = t0
        print("%7s %9s %7s %9s %9s %7s %7s %9s %8s %7s %7s %7s %7s %7s %3s %6s %6s %5s %4s" % (
            "t_s", "sent", "bad", "received", "processed", "failed", "dropped", "ll_results",
            "rss_MB", "anon", "file", "used", "free", "heap", "ar", "ring", "inar", "fds", "thr"),
            flush=True)

        def take_sample():
            st = d.request({"cmd": "status"})
            c = st["counters"]
            m = d.sample()
            mem = st.get("memory", {})
            s = {"t": time.monotonic() - t0, "sent": tx.good, "bad": tx.bad,
                 "received": c["received"], "processed": c["processed"], "failed": c["failed"],
                 "dropped": c["dropped"], "bad_input": c["bad_input"],
                 "ll_results": consumer.results if consumer else 0,
                 "ll_held": st.get("lossless", {}).get("held", 0),
                 "rss_kb": m.get("VmRSS", 0), "hwm_kb": m.get("VmHWM", 0),
                 "anon_kb": m.get("RssAnon", 0), "file_kb": m.get("RssFile", 0),
                 "fds": m.get("fds", 0), "threads": m.get("Threads", 0),
                 # The allocator's view (status memory, PROTOCOL.md 4): bytes handed out and
                 # not freed, free bytes it keeps in its arenas, arenas' size, mapped blocks.
                 "in_use_kb": mem.get("in_use_bytes", 0) / 1024,
                 "free_kb": mem.get("free_bytes", 0) / 1024,
                 "heap_kb": mem.get("heap_bytes", 0) / 1024,
                 "mmap_kb": mem.get("mmap_bytes", 0) / 1024,
                 "used_kb": (mem.get("in_use_bytes", 0) - mem.get("mmap_bytes", 0)) / 1024,
                 # RssAnon split (smaps): lossless ring, input arena, the rest
                 "ring_kb": m.get("ring", 0), "inarena_kb": m.get("inarena", 0),
                 "otheranon_kb": m.get("otheranon", 0),
                 "arenas": mem.get("arenas", 0),
                 "reloads": reloads, "subscribers": churn.subscribers if churn else 0}
            samples.append(s)
            print("%7.1f %9d %7d %9d %9d %7d %7d %9d %8.1f %7.1f %7.1f %7.2f %7.2f %7.2f %3d "
                  "%6.2f %6.2f %5d %4d" % (
                      s["t"], s["sent"], s["bad"], s["received"], s["processed"], s["failed"],
                      s["dropped"], s["ll_results"], s["rss_kb"] / 1024, s["anon_kb"] / 1024,
                      s["file_kb"] / 1024, s["used_kb"] / 1024, s["free_kb"] / 1024,
                      s["heap_kb"] / 1024, s["arenas"], s["ring_kb"] / 1024,
                      s["inarena_kb"] / 1024, s["fds"], s["threads"]), flush=True)
            return st

        while not tx.done.is_set():
            now = time.monotonic()
            if now >= next_reload:
                r = d.request({"cmd": "reload", "path": d.cfgs[(reloads + 1) % 2]}, timeout=120)
                reloads += 1
                reload_failures += not r.get("ok")
                next_reload = now + args.reload_every
            if now >= next_sample:
                take_sample()
                next_sample = now + args.sample
            if d.proc.poll() is not None:
                raise RuntimeError("faid exited during the soak, see " + d.log_path)
            time.sleep(0.05)
        # Wait until every message sent is accounted for, then one last sample.
        want = tx.good + tx.bad
        t_end = time.monotonic() + 600
        while time.monotonic() < t_end:
            st = d.request({"cmd": "status"})
            c = st["counters"]
            ll_done = consumer is None or consumer.results >= c["processed"]
            if c["received"] + c["bad_input"] >= want and \
                    c["processed"] + c["failed"] + c["dropped"] >= c["received"] and ll_done:
                break
            time.sleep(0.5)
        st = take_sample()
        STOP.set()
        c = st["counters"]
        elapsed = samples[-1]["t"]
        summary = {
            "elapsed_s": elapsed, "frames_sent": tx.good, "malformed_sent": tx.bad,
            "series": tx.series, "reloads": reloads, "reload_failures": reload_failures,
            "subscribers": churn.subscribers if churn else 0,
            "sub_messages": churn.messages if churn else 0,
            "hits_requested": hits.requested if hits else 0,
            "hits_received": hits.received if hits else 0,
            "counters": c, "drops": st["drops"], "lossless": st.get("lossless"),
            "ll_results": consumer.results if consumer else None,
            "ll_errors": consumer.errors if consumer else None,
            "ll_gaps": consumer.gaps if consumer else None,
            "ll_duplicates": consumer.duplicates if consumer else None,
            "rss_first_mb": samples[0]["rss_kb"] / 1024, "rss_last_mb": samples[-1]["rss_kb"] / 1024,
            "rss_max_mb": max(s["rss_kb"] for s in samples) / 1024,
            "rss_slope_mb_min": slope_mb_per_min(samples),
            "rss_slope_second_half_mb_min": slope_mb_per_min(samples, 0.5),
            # Resident memory in two parts (/proc/PID/status): anonymous (heaps, mappings:
            # where a leak shows) and file-backed (code and data pages of the libraries,
            # libLLVM's 112 MB with PoCL, faulted in as code paths first run: bounded by the
            # files' size, not a leak).
            "anon_first_mb": samples[0]["anon_kb"] / 1024, "anon_last_mb": samples[-1]["anon_kb"] / 1024,
            "anon_slope_second_half_mb_min": slope_mb_per_min(samples, 0.5, "anon_kb"),
            "file_first_mb": samples[0]["file_kb"] / 1024, "file_last_mb": samples[-1]["file_kb"] / 1024,
            "file_slope_second_half_mb_min": slope_mb_per_min(samples, 0.5, "file_kb"),
            # Slopes (MB/min) of each kind of memory over the whole run, its second half and
            # its last third, and the minute means: a leak raises used; arenas growing to a
            # working size or fragmenting raise free (and heap) with used flat.
            "slopes_mb_min": {k: {"all": slope_mb_per_min(samples, 0.0, k + "_kb"),
                                  "second_half": slope_mb_per_min(samples, 0.5, k + "_kb"),
                                  "last_third": slope_mb_per_min(samples, 2 / 3, k + "_kb")}
                              for k in MEM_KINDS},
            "minute_means_mb": minute_means(samples),
            "arenas_first": samples[0].get("arenas", 0), "arenas_last": samples[-1].get("arenas", 0),
            "arenas_max": max(s.get("arenas", 0) for s in samples),
            "fds_first": samples[0]["fds"], "fds_last": samples[-1]["fds"],
            "fds_max": max(s["fds"] for s in samples),
        }
        checks = {
            "received = processed + failed + dropped":
                c["received"] == c["processed"] + c["failed"] + c["dropped"],
            "every good frame received": c["received"] >= tx.good,
            "every message seen": c["received"] + c["bad_input"] == tx.good + tx.bad,
            "no reload failed": reload_failures == 0,
        }
        if consumer:
            checks["lossless results = processed"] = consumer.results == c["processed"]
            checks["no gap on the lossless channel"] = consumer.gaps == 0
        summary["checks"] = checks
        ok = all(checks.values())
    finally:
        STOP.set()
        CONSUMER_STOP.set()
        time.sleep(0.3)
        rc = d.stop()
        summary["exit_status"] = rc
        ok = ok and rc == 0
    print()
    print("frames in: %d good + %d malformed in %d series over %.0f s (%.0f frames/s)" % (
        summary["frames_sent"], summary["malformed_sent"], summary["series"],
        summary["elapsed_s"], summary["frames_sent"] / max(summary["elapsed_s"], 1e-9)))
    c = summary["counters"]
    print("counters: received %d, processed %d, failed %d, dropped %d, bad_input %d" % (
        c["received"], c["processed"], c["failed"], c["dropped"], c["bad_input"]))
    if summary["ll_results"] is not None:
        print("frames out (lossless consumer): %d results, %d errors, %d gaps, %d duplicates" % (
            summary["ll_results"], summary["ll_errors"], summary["ll_gaps"],
            summary["ll_duplicates"]))
    print("reloads: %d (%d failed); PUB subscribers: %d (%d messages)" % (
        summary["reloads"], summary["reload_failures"], summary["subscribers"],
        summary["sub_messages"]))
    if args.peaks:
        print("hits: %d requests on the request socket, %d hit messages to the subscribers" % (
            summary["hits_requested"], summary["hits_received"]))
    print("RSS: %.1f MB first, %.1f MB last, %.1f MB max; slope %.3f MB/min overall, %.3f MB/min "
          "over the second half" % (summary["rss_first_mb"], summary["rss_last_mb"],
                                    summary["rss_max_mb"], summary["rss_slope_mb_min"],
                                    summary["rss_slope_second_half_mb_min"]))
    print("  of which anonymous: %.1f -> %.1f MB, %.3f MB/min over the second half; file-backed "
          "(library pages): %.1f -> %.1f MB, %.3f MB/min" % (
              summary["anon_first_mb"], summary["anon_last_mb"],
              summary["anon_slope_second_half_mb_min"], summary["file_first_mb"],
              summary["file_last_mb"], summary["file_slope_second_half_mb_min"]))
    print("memory slopes, MB/min (whole run / second half / last third):")
    for k in MEM_KINDS:
        sl = summary["slopes_mb_min"][k]
        print("  %-9s %7.3f %7.3f %7.3f" % (k, sl["all"], sl["second_half"], sl["last_third"]))
    print("malloc arenas: %d first, %d last, %d max" % (
        summary["arenas_first"], summary["arenas_last"], summary["arenas_max"]))
    print("minute means, MB (%s):" % ", ".join(MEM_KINDS))
    for mm in summary["minute_means_mb"]:
        print("  %3d  %s" % (mm["minute"], "  ".join("%7.2f" % mm[k] for k in MEM_KINDS)))
    print("file descriptors: %d first, %d last, %d max" % (
        summary["fds_first"], summary["fds_last"], summary["fds_max"]))
    for k, v in summary.get("checks", {}).items():
        print("check: %-40s %s" % (k, "ok" if v else "FAILED"))
    print("faid exit status: %s" % summary["exit_status"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "samples": samples, "summary": summary}, f, indent=1)
    if not ok:
        print("soak FAILED; faid's log: %s" % d.log_path, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
