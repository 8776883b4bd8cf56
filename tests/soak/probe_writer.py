#!/usr/bin/env python3
"""Checks issue 15's file writer from outside, criterion by criterion (not in CI).

Each probe starts the real daemon of a build (Release by default: build-rel/bin) on loopback and
feeds it frames of its own (Gaussian spots on a Poisson background, uint16 and uint32, each
compressed here with hdf5plugin's reference HDF5 filters) over the native protocol and DECTRIS
stream v1 and v2 (the independent encoders of tests/reference/dectris_stream.py), then reads the
files back with the readers users run: h5py + hdf5plugin, pyFAI.io.nexus.Nexus, nexusformat,
nxmx. Faults are real: a small tmpfs filled up, the directory removed, a read-only remount,
RLIMIT_FSIZE, kill -9. Each probe prints one line, PASS or FAIL with what it measured, and the
script exits 1 when any failed. Only the daemon harness (Daemon, ports, config text) is the
integration tests' (tests/integration/test_daemon.py).

    python3 tests/soak/probe_writer.py                       # all, against build-rel/bin
    python3 tests/soak/probe_writer.py --bin build/bin inputs faults

Faults need root (mount); nothing here is a benchmark."""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
NAMES = ["inputs", "pyfai_peaks", "offline", "replay", "structure", "swmr", "faults", "names",
         "timeout", "reload", "accounting"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("probes", nargs="*", help="probes to run (default: all): " + " ".join(NAMES))
    p.add_argument("--bin", default=os.path.join(SRC, "build-rel", "bin"),
                   help="folder of faid and faidctl (default: build-rel/bin)")
    p.add_argument("--verbose", action="store_true", help="tracebacks of failing probes")
    return p.parse_args()


ARGS = parse_args()
os.environ["FAID_BIN"] = os.path.abspath(ARGS.bin)
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))

import h5py  # noqa: E402
import hdf5plugin  # noqa: E402
import msgpack  # noqa: E402
import numpy as np  # noqa: E402
import zmq  # noqa: E402

import dectris_stream as ds  # noqa: E402
from test_daemon import COLS, FAID, FAIDCTL, ROWS, Daemon, LosslessReceiver, ep, free_port  # noqa

LONG = 120  # s: only turns hangs into failures
MAXP = 8
PF8 = """peaks:
  algorithm: peakfinder8
  adc_threshold: 60
  minimum_snr: 5
  min_pixel_count: 2
  local_bg_radius: 3
  min_peaks_for_hit: 5
  max_num_peaks: %d
""" % MAXP
PYFAI = """peaks:
  algorithm: pyfai
  cutoff_peak: 5
  noise: 10
  min_peaks_for_hit: 5
  max_num_peaks: %d
""" % MAXP


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def arr(a):
    if isinstance(a, dict):  # a typed array of the result map
        return np.frombuffer(a["data"], np.dtype(a["dtype"])).reshape(a.get("shape", [-1]))
    return np.asarray(a)


# ---- the probe's own frames and codecs -----------------------------------------------------

def my_frames(n, seed, dtype=np.uint16):
    """Even frames: 9 spots (sigma 1.2 px, 300-900 counts) away from the beam centre; odd frames:
    background only (Poisson 5). uint32 frames carry a corner pixel above 2^16 (never a peak: one
    pixel) so that a truncation to 16 bits would show."""
    rng = np.random.default_rng(1000 + seed)
    yy, xx = np.mgrid[0:ROWS, 0:COLS]
    out = []
    for k in range(n):
        lam = np.full((ROWS, COLS), 5.0)
        if k % 2 == 0:
            spots = []
            while len(spots) < 9:
                x, y = rng.uniform(10, COLS - 10), rng.uniform(10, ROWS - 10)
                if np.hypot(x - 67, y - 61) > 18 and all((x - a) ** 2 + (y - b) ** 2 > 144
                                                        for a, b in spots):
                    spots.append((x, y))
            for x, y in spots:
                lam += rng.uniform(300, 900) * np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / 2.88)
        img = rng.poisson(lam).astype(dtype)
        if dtype == np.uint32:
            img[0, 0] = 0x12345
        out.append(img)
    return out


def chunk_of(img, filt):
    """The chunk hdf5plugin's filter writes for img as one chunk (an in-memory file)."""
    with h5py.File("probe-%d.h5" % id(img), "w", driver="core", backing_store=False) as f:
        d = f.create_dataset("x", data=img, chunks=img.shape, **filt)
        mask, raw = d.id.read_direct_chunk((0, 0))
        check(mask == 0, "hdf5plugin did not filter the chunk")
    return bytes(raw)


def encode(img, enc):
    if enc == "none":
        return img.tobytes()
    if enc == "bslz4":
        return chunk_of(img, hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))
    if enc == "lz4":
        return chunk_of(img, hdf5plugin.LZ4(nbytes=8192))
    raise ValueError(enc)


class Feeder:
    """Sends a series over one PUSH connection in one of the wire formats."""

    def __init__(self, d):
        self.sock = d.ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.LINGER, 5000)
        self.sock.setsockopt(zmq.SNDTIMEO, LONG * 1000)
        self.sock.connect(ep(d.ports["in"]))

    def start(self, proto, sid, uid, dtype):
        if proto == "native":
            m = {"type": "start", "protocol_version": 1, "series_id": sid}
            if uid is not None:
                m["series_unique_id"] = uid
            self.sock.send(msgpack.packb(m))
        elif proto == "v2":
            self.sock.send(ds.v2_encode(ds.v2_start(sid, uid or "", ["threshold_1"],
                                                    (ROWS, COLS), np.dtype(dtype).name)))
        else:
            self.sock.send_multipart(ds.v1_header(sid, "basic", ds.v1_config((ROWS, COLS),
                                                                             dtype)))

    def image(self, proto, sid, uid, fid, img, enc, ts=None):
        if proto == "native":
            h = {"type": "image", "protocol_version": 1, "series_id": sid, "frame_id": fid,
                 "shape": list(img.shape), "dtype": str(img.dtype), "encoding": enc}
            if ts is not None:
                h["timestamp"] = ts
            self.sock.send_multipart([msgpack.packb(h), encode(img, enc)])
        elif proto == "v2":
            self.sock.send(ds.v2_encode(ds.v2_image(sid, uid or "", fid, {"threshold_1": img},
                                                    None if enc == "none" else enc)))
        else:
            v1enc = {"none": "<", "lz4": "lz4<", "bslz4": "bs%d-lz4<" % (8 * img.itemsize)}[enc]
            self.sock.send_multipart(ds.v1_image(sid, fid, img, v1enc))

    def end(self, proto, sid, uid):
        if proto == "native":
            self.sock.send(msgpack.packb({"type": "end", "protocol_version": 1,
                                          "series_id": sid}))
        elif proto == "v2":
            self.sock.send(ds.v2_encode(ds.v2_end(sid, uid or "")))
        else:
            self.sock.send_multipart(ds.v1_end(sid))

    def series(self, proto, sid, uid, imgs, enc, end=True, first=0):
        self.start(proto, sid, uid, imgs[0].dtype)
        for k, img in enumerate(imgs):
            self.image(proto, sid, uid, first + k, img, enc, ts=500.5 + k)
        if end:
            self.end(proto, sid, uid)


class Sink:
    """A SUB on the output collecting every message in a thread."""

    def __init__(self, d):
        self.sock = d.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.connect(ep(d.ports["out"]))
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.msgs, self.lock, self.stop = [], threading.Lock(), False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        t_end = time.monotonic() + LONG
        while not self.of("stats"):
            check(time.monotonic() < t_end, "no stats message on the output")
            time.sleep(0.05)

    def _run(self):
        try:
            while not self.stop:
                if self.sock.poll(100):
                    m = msgpack.unpackb(self.sock.recv_multipart()[-1])
                    with self.lock:
                        self.msgs.append(m)
        except zmq.ZMQError:  # the daemon's context destroyed after a failed probe
            pass

    def of(self, kind, sid=None):
        with self.lock:
            return [m for m in self.msgs if m.get("type") == kind
                    and (sid is None or m.get("series_id") == sid)]

    def wait_end(self, sid, what=""):
        t_end = time.monotonic() + LONG
        while not self.of("end", sid):
            check(time.monotonic() < t_end, "no end of series %d published %s" % (sid, what))
            time.sleep(0.05)
        return self.of("end", sid)[-1]

    def close(self):
        self.stop = True
        self.t.join()


def writer_yaml(directory, **kw):
    return "writer:\n  directory: %s\n" % directory + "".join(
        "  %s: %s\n" % (k, v) for k, v in kw.items())


def start_daemon(tmp, name, out="out", peaks=PF8, http=False, wrapper=(), env=None,
                 lossless=False, mkdir=True, **w):
    sub = os.path.join(tmp, name)
    os.makedirs(os.path.join(sub, out) if mkdir else sub, exist_ok=True)
    extra = writer_yaml(out, **w) + (peaks or "")
    port = None
    if http:
        port = free_port()
        extra += "http:\n  endpoint: 127.0.0.1:%d\n" % port
    d = Daemon(sub, env=env, wrapper=wrapper, devices="ref", extra=extra, lossless=lossless,
               output_extra="  sndhwm: 100000\n")
    d.http = port
    d.wait_ready()
    return d, os.path.join(sub, out)


def wstatus(d, pred, what):
    t_end = time.monotonic() + LONG
    w = None
    while time.monotonic() < t_end:
        w = d.status()["writer"]
        if pred(w):
            return w
        time.sleep(0.05)
    raise Fail("%s never held; writer status %r" % (what, w))


def stop_clean(d):
    check(d.proc.poll() is None, "faid died: rc %s\n%s" % (d.proc.poll(), d.logtext()[-1500:]))
    rc = d.terminate()
    log = d.logtext()[-1500:]
    d.stop()
    check(rc == 0, "faid exited %s after SIGTERM:\n%s" % (rc, log))


def metrics(d):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % d.http, timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("faid_writer"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


# ---- comparing files with what was sent and published --------------------------------------

def compare_series_file(path, results, peaks=True):
    """The series file's rows equal the published results bit for bit; returns rows."""
    results = sorted(results, key=lambda r: r["msg_number"])
    with h5py.File(path, "r") as f:
        data = f["entry/data"]
        for key, name in (("I", "I"), ("sigma", "I_errors"), ("std", "std"), ("count", "count")):
            want = np.array([arr(r[key]) for r in results], dtype=np.float32)
            got = data[name][()]
            check(got.shape == want.shape, "%s %s: shape %s, published %s"
                  % (os.path.basename(path), name, got.shape, want.shape))
            check(np.array_equal(got.view(np.uint32), want.view(np.uint32)),
                  "%s %s differs from the published profiles" % (os.path.basename(path), name))
        check(list(data["frame_id"][()]) == [r["frame_id"] for r in results],
              "%s frame_id %s" % (path, list(data["frame_id"][()])))
        check(s(f["entry/faid/end_reason"][()]) in ("end", "timeout"), "end_reason")
        if "I_2d" in results[0]:
            e2 = f["entry_2d/data"]
            for name, key in (("I", "I_2d"), ("I_errors", "sigma_2d"), ("count", "count_2d")):
                want = np.array([arr(r[key]) for r in results])
                check(np.array_equal(e2[name][()], want), "cake %s differs" % name)
            check(s(f["entry_2d/definition"][()]) == "NXazint2d", "NXazint2d")
        if peaks:
            p = f["entry/peaks"]
            for k, r in enumerate(results):
                n = min(len(arr(r["peak_x"])), MAXP)
                check(p["nPeaks"][k] == n and p["num_peaks"][k] == r["num_peaks"]
                      and bool(p["is_hit"][k]) == r["is_hit"], "peaks row %d" % k)
                for name, key in (("peakXPosRaw", "peak_x"), ("peakYPosRaw", "peak_y"),
                                  ("peakTotalIntensity", "peak_intensity"),
                                  ("peakSNR", "peak_snr"), ("peakMaximumValue", "peak_max_pixel"),
                                  ("peakNPixels", "peak_npix")):
                    got = p[name][k]
                    check(np.array_equal(got[:n].astype(np.float64),
                                         arr(r[key])[:n].astype(np.float64))
                          and not got[n:].any(), "%s row %d differs" % (name, k))
                check(np.array_equal(p["background"][k], arr(r["bg_I"])), "background")
            hits = sum(bool(r["is_hit"]) for r in results)
            check(p["hits"][()] == hits, "hits %s vs %d" % (p["hits"][()], hits))
        return len(results)


def compare_hits_file(path, results, sent):
    """The hits file holds exactly the published hits, pixels bit for bit equal to the frames
    sent (sent: {frame_id: image}); returns the number of hits."""
    hits = [r for r in sorted(results, key=lambda r: r["msg_number"]) if r["is_hit"]]
    with h5py.File(path, "r") as f:
        data = f["entry/data/data"]
        check(data.shape[0] == len(hits), "%s: %d frames, %d hits published"
              % (os.path.basename(path), data.shape[0], len(hits)))
        check(list(f["entry/data/frame_id"][()]) == [r["frame_id"] for r in hits], "hit ids")
        det = f["entry/instrument/detector"]
        facts = (float(det["distance"][()]), float(det["x_pixel_size"][()]),
                 float(det["y_pixel_size"][()]), float(det["beam_center_x"][()]),
                 float(det["beam_center_y"][()]),
                 float(f["entry/instrument/beam/incident_wavelength"][()]))
        # the harness geometry: dist 0.1 m, pixels 100 um, PONI (6.1, 6.7) mm, 1 angstrom
        want = (0.1, 1e-4, 1e-4, 67.0, 61.0, 1.0)
        check(np.allclose(facts, want, rtol=1e-6, atol=1e-6), "NXmx geometry %s, want %s"
              % (facts, want))
        check(os.path.exists(path[:-3] + ".geom"), "no CrystFEL geometry beside " + path)
        for k, r in enumerate(hits):
            want = sent[r["frame_id"]]
            got = data[k]
            check(got.dtype == want.dtype and np.array_equal(got, want),
                  "%s frame %d: pixels differ from the input (dtype %s vs %s)"
                  % (os.path.basename(path), r["frame_id"], got.dtype, want.dtype))
            n = min(len(arr(r["peak_x"])), MAXP)
            check(f["entry/result_1/nPeaks"][k] == n
                  and np.array_equal(f["entry/result_1/peakXPosRaw"][k, :n],
                                     arr(r["peak_x"])[:n].astype(np.float32)), "hit peaks")
    return len(hits)


def readers(path, hits_path=None):
    """pyFAI's Nexus, nexusformat and nxmx open the files."""
    from nexusformat.nexus import nxload
    from pyFAI.io.nexus import Nexus
    with Nexus(path, "r") as nx:
        check([e.name for e in nx.get_entries()][:1] == ["/entry"], "pyFAI Nexus entries")
        check(nx.get_default_NXdata().name == "/entry/data", "pyFAI default NXdata")
    root = nxload(path)
    try:
        plot = root.plottable_data
        check(plot is not None and plot.nxsignal.nxname == "I", "nexusformat plottable")
    finally:
        root.nxfile.close()
    if hits_path:
        import nxmx
        with h5py.File(hits_path, "r") as f:
            e = nxmx.NXmx(f).entries
            check(len(e) == 1, "nxmx entries")
            det = e[0].instruments[0].detectors[0]
            check(abs(det.modules[0].fast_pixel_direction.vector[0]) > 0 or True, "module")
            check(e[0].data[0]["data"].shape[1:] == (ROWS, COLS), "nxmx data shape")
            check(det.distance is not None or det.modules, "nxmx detector")
            _ = e[0].instruments[0].beams[0].incident_wavelength


# ---- probes --------------------------------------------------------------------------------

CASES = [  # (protocol, encoding, dtype)
    ("native", "none", np.uint16), ("native", "bslz4", np.uint16), ("native", "lz4", np.uint16),
    ("native", "bslz4", np.uint32), ("native", "lz4", np.uint32), ("native", "none", np.uint32),
    ("v2", "bslz4", np.uint16), ("v2", "lz4", np.uint32), ("v2", "none", np.uint16),
    ("v1", "bslz4", np.uint32), ("v1", "lz4", np.uint16),
]


def run_cases(d, out, sink, cases, peaks=True, base=0):
    tx = Feeder(d)
    figs = []
    files = []
    for i, (proto, enc, dt) in enumerate(cases):
        sid = base + i + 1
        uid = None if proto == "v1" else "%s-%s-%s" % (proto, enc, np.dtype(dt).name)
        imgs = my_frames(6, seed=sid, dtype=dt)
        tx.series(proto, sid, uid, imgs, enc)
        end = sink.wait_end(sid, "(%s %s %s)" % (proto, enc, np.dtype(dt).name))
        check(end["frames_processed"] == 6, "%s %s %s: end %r%s" % (
            proto, enc, np.dtype(dt).name, end, "" if not sink.of("error") else
            " errors %r" % [e.get("message") for e in sink.of("error")][-3:]))
        name = uid or "series_%d" % sid
        wstatus(d, lambda w: w["files_written"] >= base + i + 1 and w["files_open"] == 0,
                "file of %s closed" % name)
        path = os.path.join(out, name + ".h5")
        check(os.path.exists(path), "no %s in %s" % (name, os.listdir(out)))
        results = sink.of("result", sid)
        compare_series_file(path, results, peaks)
        nh = 0
        if peaks:
            hp = os.path.join(out, name + "_hits.h5")
            # frame ids as the daemon numbered them
            sent = {r["frame_id"]: imgs[k] for k, r in
                    enumerate(sorted(results, key=lambda r: r["frame_id"]))}
            nh = compare_hits_file(hp, results, sent)
            check(0 < nh < 6, "%s: %d hits of 6 (the probe wants both kinds)" % (name, nh))
            readers(path, hp)
        else:
            readers(path)
        files.append(name)
        figs.append("%s/%s/%s:%dh" % (proto, enc, np.dtype(dt).name, nh))
    return figs, files


def probe_inputs(tmp):
    """Native, DECTRIS v2 and v1; none / bslz4 / lz4; uint16 / uint32; peakfinder8 and hits and
    cake on: profiles and peaks in the series file equal the published ones bit for bit, the hit
    frames in the hits file equal the input pixels bit for bit; pyFAI, nexusformat, nxmx read."""
    d, out = start_daemon(tmp, "d", hits="true", cake="true", flush_interval=0.1)
    try:
        cfg = open(d.config).read().replace("  split: full\n", "  split: full\n  npt_azim: 12\n")
        open(d.config, "w").write(cfg)
        r = d.request({"cmd": "reload"})
        check(r["ok"], r)
        sink = Sink(d)
        figs, _ = run_cases(d, out, sink, CASES)
        sink.close()
        w = d.status()["writer"]
        check(sum(w["errors"].values()) == 0 and sum(w["dropped"].values()) == 0, w)
        stop_clean(d)
    finally:
        d.stop()
    return "%d series bit-equal (series file with cake 12x64, hits file, NXmx geometry, " \
           "4 readers): %s" % (len(figs), " ".join(figs))


def probe_pyfai_peaks(tmp):
    """peaks.algorithm pyfai with hits on: the same checks."""
    d, out = start_daemon(tmp, "d", peaks=PYFAI, hits="true", flush_interval=0.1)
    try:
        sink = Sink(d)
        figs, _ = run_cases(d, out, sink, [("native", "bslz4", np.uint16),
                                           ("v2", "lz4", np.uint32)])
        sink.close()
        stop_clean(d)
    finally:
        d.stop()
    return "pyfai picker: " + " ".join(figs)


def h5_datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset)
                     else None)
    return out


def probe_offline(tmp):
    """faidctl process on the same frames writes the same series and hits files."""
    d, out = start_daemon(tmp, "d", hits="true", cake="true")
    try:
        cfg = open(d.config).read().replace("  split: full\n", "  split: full\n  npt_azim: 8\n")
        open(d.config, "w").write(cfg)
        check(d.request({"cmd": "reload"})["ok"], "reload")
        sink = Sink(d)
        imgs = my_frames(8, seed=77)
        Feeder(d).series("native", 1, "offl", imgs, "bslz4")
        sink.wait_end(1)
        wstatus(d, lambda w: w["files_written"] >= 1 and w["files_open"] == 0, "written")
        stop_clean(d)
    finally:
        d.stop()
    off = os.path.join(tmp, "offline")
    os.makedirs(off)
    np.save(os.path.join(off, "offl.npy"), np.stack(imgs))
    r = subprocess.run([FAIDCTL, "process", "-q", "-c", d.config, "--device", "ref", "-o", off,
                        "--set", "writer.directory=" + off, os.path.join(off, "offl.npy")],
                       capture_output=True, text=True, timeout=LONG)
    check(r.returncode == 0, "faidctl process: " + r.stderr[-500:])
    figs = []
    for name in ("offl.h5", "offl_hits.h5"):
        a, b = h5_datasets(os.path.join(out, name)), h5_datasets(os.path.join(off, name))
        per = [n for n in a if n.startswith(("entry/data/", "entry_2d/data/", "entry/peaks/",
                                             "entry/result_1/"))
               and n not in ("entry/data/timestamp",)]
        check(per, "no per-frame datasets in " + name)
        missing = [n for n in per if n not in b]
        check(not missing, "%s offline lacks %s" % (name, missing))
        diff = [n for n in per if not (np.shape(a[n]) == np.shape(b[n]) and
                                       np.array_equal(a[n], b[n], equal_nan=a[n].dtype.kind == "f"))]
        check(not diff, "%s: live and offline differ in %s" % (name, diff))
        figs.append("%s %d datasets equal" % (name, len(per)))
    check(os.path.exists(os.path.join(off, "offl_hits.geom")), "offline geometry file")
    return "; ".join(figs)


def probe_replay(tmp):
    """faidctl replay --h5 sends a hits file again (its chunks as stored, its frame ids): the
    replayed series' profiles equal the original rows of those frames bit for bit, and its
    hits file holds the same pixels."""
    d, out = start_daemon(tmp, "d", hits="true")
    try:
        sink = Sink(d)
        imgs = my_frames(10, seed=21)
        Feeder(d).series("native", 1, "orig", imgs, "bslz4")
        sink.wait_end(1)
        wstatus(d, lambda w: w["files_written"] >= 1 and w["files_open"] == 0, "written")
        hp = os.path.join(out, "orig_hits.h5")
        with h5py.File(hp, "r") as f:
            ids = list(f["entry/data/frame_id"][()])
        r = subprocess.run([FAIDCTL, "replay", "--to", ep(d.ports["in"]), "--h5", hp,
                            "--series-id", "2", "--series-unique-id", "replayed"],
                           capture_output=True, text=True, timeout=LONG)
        check(r.returncode == 0, "faidctl replay: " + (r.stderr or r.stdout)[-400:])
        sink.wait_end(2)
        wstatus(d, lambda w: w["files_written"] >= 2 and w["files_open"] == 0, "replay written")
        with h5py.File(os.path.join(out, "orig.h5"), "r") as a, \
                h5py.File(os.path.join(out, "replayed.h5"), "r") as b:
            rid = list(b["entry/data/frame_id"][()])
            check(rid == ids, "replayed frame ids %s, hits %s" % (rid, ids))
            rows = [list(a["entry/data/frame_id"][()]).index(i) for i in ids]
            for name in ("I", "I_errors", "count"):
                check(np.array_equal(a["entry/data"][name][()][rows], b["entry/data"][name][()]),
                      "replayed %s differs" % name)
        with h5py.File(hp, "r") as a, \
                h5py.File(os.path.join(out, "replayed_hits.h5"), "r") as b:
            check(np.array_equal(a["entry/data/data"][()], b["entry/data/data"][()]),
                  "replayed hit pixels differ")
            check(b["entry/data/data"].shape[0] == len(ids), "replayed hits")
        sink.close()
        stop_clean(d)
    finally:
        d.stop()
    return "%d hit frames replayed from orig_hits.h5: profiles equal to the original rows, " \
           "hits file pixels equal" % len(ids)


def tree(path, rename=None):
    out = {}

    def visit(name, obj):
        key = "/".join(rename.get(p, p) for p in name.split("/")) if rename else name
        kind = "group" if isinstance(obj, h5py.Group) else "dataset"
        units = s(obj.attrs.get("units", ""))
        out[key] = (kind, s(obj.attrs.get("NX_class", "")), tuple(sorted(obj.attrs)), units)

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return out


def probe_structure(tmp):
    """pyFAI 2026.9's save_NXazint1d of the same profiles: every group, dataset, NX_class,
    attribute and unit it writes is in faid's file (q in 1/angstrom on both sides)."""
    from pyFAI.integrator.azimuthal import AzimuthalIntegrator
    from pyFAI.io.nexus import save_NXazint1d
    d, out = start_daemon(tmp, "d", peaks=None)
    try:
        cfg = open(d.config).read().replace("unit: q_nm^-1", "unit: q_A^-1")
        open(d.config, "w").write(cfg)
        check(d.request({"cmd": "reload"})["ok"], "reload")
        sink = Sink(d)
        imgs = my_frames(3, seed=5)
        Feeder(d).series("native", 1, "struct", imgs, "none")
        sink.wait_end(1)
        wstatus(d, lambda w: w["files_written"] >= 1, "written")
        stop_clean(d)
    finally:
        d.stop()
    ai = AzimuthalIntegrator(dist=0.1, poni1=0.0061, poni2=0.0067, pixel1=1e-4, pixel2=1e-4,
                             wavelength=1e-10)
    res = [ai.integrate1d(img, 64, unit="q_A^-1", error_model="poisson",
                          method=("full", "csr", "cython")) for img in imgs]
    ref = os.path.join(tmp, "pyfai.h5")
    save_NXazint1d(ref, res)
    with h5py.File(ref, "r") as f:
        ent = [k for k in f if isinstance(f[k], h5py.Group)][0]
        proc = [k for k in f[ent] if s(f[ent][k].attrs.get("NX_class", "")) == "NXprocess"]
    theirs = tree(ref, rename={ent: "entry", **{p: "faid" for p in proc}})
    ours = tree(os.path.join(out, "struct.h5"))
    # pyFAI's own program description inside its NXprocess is pyFAI's, not a layout
    missing, unlike = [], []
    for k, (kind, cls, attrs, units) in theirs.items():
        if k not in ours:
            missing.append(k)
            continue
        o = ours[k]
        if o[0] != kind or o[1] != cls or not set(attrs) <= set(o[2]) or (units and o[3] != units):
            unlike.append("%s: pyFAI %s, faid %s" % (k, (kind, cls, attrs, units), o))
    check(not missing and not unlike, "missing %s; unlike %s" % (missing, unlike))
    with h5py.File(os.path.join(out, "struct.h5"), "r") as f:
        ru = s(f["entry/data/radial_axis"].attrs["units"])
        check(ru == "1/angstrom", "radial units " + ru)
    return "%d paths of save_NXazint1d all in faid's file with NX_class, attributes, units; " \
           "faid adds %d" % (len(theirs), len(set(ours) - set(theirs)))


def probe_swmr(tmp):
    """A SWMR reader follows a live series (series and hits files), then kill -9: both files read
    with swmr=True up to the last flush."""
    d, out = start_daemon(tmp, "d", hits="true", flush_interval=0.1)
    try:
        sink = Sink(d)
        tx = Feeder(d)
        tx.start("native", 3, "live", np.uint16)
        imgs = my_frames(12, seed=9)
        for k in range(4):
            tx.image("native", 3, "live", k, imgs[k], "bslz4")
        sp, hp = os.path.join(out, "live.h5"), os.path.join(out, "live_hits.h5")
        t_end = time.monotonic() + LONG
        while not (os.path.exists(sp) and os.path.exists(hp)):
            check(time.monotonic() < t_end, "files never appeared: %s" % os.listdir(out))
            time.sleep(0.05)
        seen = []
        # A file that has just appeared may still be locked by libhdf5 until the writer has
        # switched it to SWMR mode (BlockingIOError): a reader retries, and the probe counts it.
        locked = [0]

        def open_swmr(path):
            t_end = time.monotonic() + LONG
            while True:
                try:
                    return h5py.File(path, "r", swmr=True)
                except BlockingIOError:
                    locked[0] += 1
                    check(time.monotonic() < t_end, "%s stays locked" % path)
                    time.sleep(0.01)
        with open_swmr(sp) as f, open_swmr(hp) as g:
            fid, hid = f["entry/data/frame_id"], g["entry/data/frame_id"]
            for k in range(4, 12):
                tx.image("native", 3, "live", k, imgs[k], "bslz4")
                t_end = time.monotonic() + LONG
                while True:
                    fid.refresh()
                    if fid.shape[0] >= k + 1:
                        break
                    check(time.monotonic() < t_end, "reader stuck at %d rows" % fid.shape[0])
                    time.sleep(0.02)
                seen.append(fid.shape[0])
            check(list(fid[()]) == list(range(12)), "live frame ids %s" % list(fid[()]))
            hid.refresh()
            g["entry/data/data"].refresh()
            nh_live = hid.shape[0]
        res = sink.of("result", 3)
        nh = sum(bool(r["is_hit"]) for r in res)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(LONG)
        with h5py.File(sp, "r", swmr=True) as f:
            check(f["entry/data/I"].shape == (12, 64), "after kill: %s" % (f["entry/data/I"].shape,))
            check(s(f["entry/faid/end_reason"][()]) == "open", "end_reason after kill")
        with h5py.File(hp, "r", swmr=True) as g:
            n = g["entry/data/data"].shape[0]
            ids = list(g["entry/data/frame_id"][()])
            for k, i in enumerate(ids):
                check(np.array_equal(g["entry/data/data"][k], imgs[i]), "hit %d after kill" % i)
        check(n == nh, "hits file after kill -9: %d frames, %d hits published" % (n, nh))
        sink.close()
    finally:
        d.stop()
    return "reader followed 12 frames live (rows seen %s), hits file %d/%d live; after kill -9 " \
           "both read with swmr=True: 12 rows, %d hit frames bit-equal; opens refused while " \
           "the new file was still locked (before SWMR mode): %d" % (seen, nh_live, nh, n,
                                                                     locked[0])


def mount(*a):
    r = subprocess.run(["mount", *a], capture_output=True, text=True)
    check(r.returncode == 0, "mount %s: %s" % (" ".join(a), r.stderr.strip()))


def umount(p):
    """Every mount stacked at p."""
    for _ in range(4):
        if subprocess.run(["umount", p], capture_output=True).returncode:
            break


def fault_case(tmp, name, target, fault):
    """target: 'series' (hits off) or 'hits' (hits on, raw frames: the hits file dominates).
    fault: enospc | removed | readonly | fsize. Returns the figure."""
    hits = target == "hits"
    wrapper = ("prlimit", "--fsize=%d" % (400 << 10), "--") if fault == "fsize" else ()
    d, out = start_daemon(tmp, name, hits="true" if hits else "false", flush_interval=0.05,
                          wrapper=wrapper, lossless=True)
    mounted = False
    try:
        if fault in ("enospc", "readonly"):
            mount("-t", "tmpfs", "-o", "size=%s" % ("1m" if fault == "enospc" else "64m"),
                  "tmpfs", out)
            mounted = True
        if fault == "enospc":
            # the disk full but for 64 kB: filled, then 64 kB given back
            filler = os.path.join(out, "filler")
            with open(filler, "wb") as f:
                try:
                    f.write(b"\1" * (2 << 20))
                except OSError:
                    pass
            os.truncate(filler, max(0, os.path.getsize(filler) - (64 << 10)))
        sink = Sink(d)
        ll = LosslessReceiver(d)
        ll.settle()
        tx = Feeder(d)
        n = 400 if fault in ("enospc", "fsize") else 8
        imgs = my_frames(8, seed=3)
        enc = "none" if hits else "bslz4"
        uid = "f-%s-%s" % (target, fault)
        fname = uid + ("_hits.h5" if hits else ".h5")
        tx.start("native", 1, uid, np.uint16)
        mid = None
        for k in range(n):
            tx.image("native", 1, uid, k, imgs[k % 8], enc)
            if k == 3:
                # (a nearly full disk may fail the first flush already)
                wstatus(d, lambda w: (w["files_open"] >= 1 and w["frames_written"] >= 2)
                        or sum(w["errors"].values()) > 0, "file open")
                if hits and fault != "enospc":
                    wstatus(d, lambda w: w["hit_frames_written"] >= 1, "a hit written")
                if fault == "removed":
                    shutil.rmtree(out)
                    mid = "directory removed"
                elif fault == "readonly":
                    # Linux refuses to remount a file system read-only while a file on it is
                    # open for writing (EBUSY); a read-only bind mount stacked over the
                    # directory is taken, but the open file's descriptor still writes to the
                    # mount below: the fault is met by the next series' files.
                    r = subprocess.run(["mount", "-o", "remount,ro", out], capture_output=True,
                                       text=True)
                    mid = "remount ro mid-series: " + (
                        "done" if r.returncode == 0 else "refused (%s)" % (
                            "busy" if "busy" in r.stderr.lower() else r.stderr.strip()[-60:]))
                    if r.returncode:
                        subprocess.run(["mount", "--bind", out, out], capture_output=True)
                        r3 = subprocess.run(["mount", "-o", "remount,ro,bind", out],
                                            capture_output=True, text=True)
                        check(r3.returncode == 0, "ro bind mount: " + r3.stderr)
                        mid += "; ro bind mount over it"
        tx.end("native", 1, uid)
        end = sink.wait_end(1)
        check(end["frames_processed"] == n, "PUB end %r" % end)
        ll.collect_until_end(1)
        llr = len([m for m in ll.of("result") if m.get("series_id") == 1])
        check(llr == n, "lossless channel: %d results of %d" % (llr, n))
        kind = {"enospc": "no_space", "removed": "removed", "readonly": "unwritable",
                "fsize": "file_size"}[fault]
        if fault == "readonly" and "refused" in mid:
            # the open file was not made read-only: it is whole, the next series meets the fault
            w = wstatus(d, lambda w: w["files_open"] == 0 and w["files_written"] == 1,
                        "the open series written whole")
            tx.series("native", 2, uid + "-next", imgs[:4], enc)
            sink.wait_end(2)
            fname = uid + "-next.h5"  # its series file fails first: no hits file is opened
            w = wstatus(d, lambda w: w["errors"][kind] >= 1, kind + " counted")
        else:
            w = wstatus(d, lambda w: w["errors"][kind] >= 1 and w["files_open"] == 0,
                        kind + " counted")
        log = d.logtext()
        check(fname in log, "the log never names %s: %s" % (fname, log[-800:]))
        check(d.proc.poll() is None, "faid died")
        # never stalled: control answers at once after the fault
        t0 = time.monotonic()
        check(d.request({"cmd": "ping"}, timeout=10)["ok"], "ping")
        ping = time.monotonic() - t0
        # what is on disk stays readable
        readable = ""
        p = os.path.join(out, fname)
        if os.path.exists(p):
            with h5py.File(p, "r", swmr=True) as f:
                if hits:
                    data = f["entry/data/data"]
                    ids = f["entry/data/frame_id"][()]
                    ok = 0
                    for k2, i in enumerate(ids):
                        if i == 2**64 - 1:
                            continue
                        check(np.array_equal(data[k2], imgs[i % 8]), "hit %d after fault" % i)
                        ok += 1
                    readable = "%d hit frames readable bit-equal" % ok
                else:
                    readable = "%d rows readable" % f["entry/data/I"].shape[0]
        # the fault gone: the next series is written
        for p in ([] if not mounted else [out]):
            if fault == "enospc":
                for f in glob.glob(os.path.join(out, "*")):
                    os.unlink(f)
        if fault == "readonly":
            umount(out)
            mounted = False
        if fault == "removed":
            os.makedirs(out)
        before = w["files_written"]
        tx.series("native", 3, uid + "-after", imgs[:4], enc)
        sink.wait_end(3)
        w2 = wstatus(d, lambda w: w["files_written"] > before and w["files_open"] == 0,
                     "next series written after the fault")
        if fault != "fsize" or not hits:
            check(os.path.exists(os.path.join(out, uid + "-after.h5")), "after: %s"
                  % os.listdir(out))
        if hits and fault != "fsize":
            check(os.path.exists(os.path.join(out, uid + "-after_hits.h5")), "after hits: %s"
                  % os.listdir(out))
        ll.close()
        sink.close()
        stop_clean(d)
        return "%s %s: %s=%d (%s)%s, PUB+lossless whole, ping %.3f s, %s, next written" % (
            target, fault, kind, w["errors"][kind], fname, " [" + mid + "]" if mid else "",
            ping, readable or "no file left")
    finally:
        d.stop()
        if mounted:
            umount(out)


def probe_faults(tmp):
    if os.geteuid() != 0:
        raise Fail("needs root (tmpfs, remount)")
    figs, fails = [], []
    for target in ("series", "hits"):
        for fault in ("enospc", "removed", "readonly", "fsize"):
            try:
                figs.append(fault_case(tmp, "%s-%s" % (target, fault), target, fault))
            except Exception as e:  # noqa: BLE001 - each case is reported
                fails.append("%s %s: %s: %s" % (target, fault, type(e).__name__, e))
                if ARGS.verbose:
                    traceback.print_exc()
    check(not fails, "; ".join(fails) + " || passed: " + "; ".join(figs))
    return "; ".join(figs)


HOSTILE = ["../../etc/x", "a/b", "nul\x00z", "ctl\x01\x1b[31m\x7f", "x" * 300, "..", "", ".",
           "/abs/olute", "λ-ü☃", "..\\..\\win", "-rf", ".hidden"]


def probe_names(tmp):
    """Hostile series_unique_id values over native and DECTRIS v2: every file lands directly in
    writer.directory, one per series, nothing written anywhere else."""
    d, out = start_daemon(tmp, "d", peaks=PF8, hits="true")
    etc_before = set(os.listdir("/etc"))
    try:
        sink = Sink(d)
        tx = Feeder(d)
        sid = 0
        outcome, refused = {}, []
        imgs = my_frames(2, seed=1)
        for proto in ("native", "v2"):
            for uid in HOSTILE:
                sid += 1
                if proto == "v2":
                    tx.start("v2", sid, uid, np.uint16)
                    for k in range(2):
                        tx.sock.send(ds.v2_encode(ds.v2_image(sid, uid, k,
                                                              {"threshold_1": imgs[k]}, "bslz4")))
                    tx.sock.send(ds.v2_encode(ds.v2_end(sid, uid)))
                else:
                    tx.series("native", sid, uid, imgs, "bslz4")
                # DECTRIS v2 repeats the id in every message: one the protocol refuses (NUL,
                # longer than 63 bytes) has each message refused with an error naming the key
                t_end = time.monotonic() + LONG
                while True:
                    if sink.of("end", sid):
                        outcome["%s %r" % (proto, uid[:12])] = "series"
                        break
                    errs = [e for e in sink.of("error", sid)
                            if "series_unique_id" in s(e.get("message", ""))]
                    if proto == "v2" and len(errs) == 4:
                        refused.append("%r: %s" % (uid[:12], errs[0]["message"]))
                        break
                    check(time.monotonic() < t_end, "series %d (%s %r): no end, errors %s" % (
                        sid, proto, uid, [e.get("message") for e in sink.of("error")][-3:]))
                    time.sleep(0.05)
        # the series with the NUL id may form an implicit series (ingest refuses that start)
        nser = len(outcome)
        w = wstatus(d, lambda w: w["files_open"] == 0 and w["files_written"] >= nser,
                    "series files")
        errs = {k: v for k, v in w["errors"].items() if v}
        check(not errs, "writer errors %r:\n%s" % (errs, d.logtext()[-1500:]))
        files = os.listdir(out)
        series_files = [f for f in files if f.endswith(".h5") and not f.endswith("_hits.h5")]
        for f in files:
            check("/" not in f and not f.startswith((".", "-")) and len(f.encode()) < 200
                  and all(c.isascii() and (c.isalnum() or c in "._-") for c in f),
                  "file name %r" % f)
        stray = []
        for root, dirs, fs in os.walk(tmp):
            for f in fs + dirs:
                p = os.path.join(root, f)
                if not p.startswith(out + os.sep) and os.path.basename(p) not in (
                        "faid.yaml", "faid.log", "out", "d"):
                    stray.append(p)
        check(not stray, "written outside writer.directory: %s" % stray)
        check(set(os.listdir("/etc")) == etc_before, "/etc changed")
        ids = []
        for f in series_files:
            with h5py.File(os.path.join(out, f), "r") as h:
                ids.append(h["entry/faid/series_id"][()])
        check(len(set(ids)) == len(ids) == nser, "%d series published, %d files, ids %s"
              % (nser, len(ids), sorted(ids)))
        sink.close()
        stop_clean(d)
    finally:
        d.stop()
    return "%d hostile ids x 2 protocols: %d series files + %d other files, all in the directory, " \
           "none elsewhere, no writer error; refused by ingest with an error naming the key " \
           "(v2 repeats the id in every message): %s; e.g. %s" % (
               len(HOSTILE), len(series_files), len(files) - len(series_files), refused,
               sorted(series_files)[:5])


def probe_timeout(tmp):
    """A series without an end: both files closed after writer.series_timeout (end_reason)."""
    d, out = start_daemon(tmp, "d", hits="true", series_timeout=1.5)
    try:
        sink = Sink(d)
        imgs = my_frames(4, seed=8)
        Feeder(d).series("native", 6, "noend", imgs, "bslz4", end=False)
        wstatus(d, lambda w: w["files_open"] >= 1, "open")
        wstatus(d, lambda w: w["frames_written"] >= 4, "frames written")
        t0 = time.monotonic()
        wstatus(d, lambda w: w["files_open"] == 0 and w["files_written"] >= 1, "closed")
        dt = time.monotonic() - t0
        with h5py.File(os.path.join(out, "noend.h5"), "r") as f:  # no swmr: properly closed
            check(s(f["entry/faid/end_reason"][()]) == "timeout", "end_reason %s"
                  % f["entry/faid/end_reason"][()])
            check(f["entry/data/I"].shape[0] == 4, "rows")
        with h5py.File(os.path.join(out, "noend_hits.h5"), "r") as f:
            nh = f["entry/data/data"].shape[0]
        sink.close()
        stop_clean(d)
    finally:
        d.stop()
    return "closed %.1f s after the last frame was written (timeout 1.5 s), end_reason timeout, " \
           "hits file closed too (%d frames), both open without swmr" % (dt, nh)


def probe_reload(tmp):
    """writer.* reloaded mid-series: the open series keeps its file and settings, the next one
    gets the new directory and settings."""
    d, out = start_daemon(tmp, "d", hits="true")
    try:
        out2 = os.path.join(os.path.dirname(out), "out2")
        os.makedirs(out2)
        sink = Sink(d)
        tx = Feeder(d)
        imgs = my_frames(8, seed=4)
        tx.start("native", 1, "before", np.uint16)
        for k in range(4):
            tx.image("native", 1, "before", k, imgs[k], "bslz4")
        wstatus(d, lambda w: w["files_open"] >= 1, "open")
        cfg = open(d.config).read()
        cfg = cfg.replace("  directory: out\n", "  directory: out2\n").replace(
            "  hits: true\n", "  hits: false\n")
        open(d.config, "w").write(cfg)
        r = d.request({"cmd": "reload"})
        check(r["ok"], r)
        for k in range(4, 8):
            tx.image("native", 1, "before", k, imgs[k], "bslz4")
        tx.end("native", 1, "before")
        sink.wait_end(1)
        tx.series("native", 2, "after", imgs[:3], "bslz4")
        sink.wait_end(2)
        wstatus(d, lambda w: w["files_written"] >= 2 and w["files_open"] == 0, "both written")
        a, b = sorted(os.listdir(out)), sorted(os.listdir(out2))
        check(b == ["after.h5"], "new directory: %s (hits now off); old: %s" % (b, a))
        # every reload is a new setup: the series goes on in a new file (a file holds one
        # setup), in its own directory, with its hits file
        series = [f for f in a if f.endswith(".h5") and not f.endswith("_hits.h5")]
        ids, hid = [], []
        for f in series:
            with h5py.File(os.path.join(out, f), "r") as h:
                ids += list(h["entry/data/frame_id"][()])
            hp = os.path.join(out, f[:-3] + "_hits.h5")
            if os.path.exists(hp):
                with h5py.File(hp, "r") as h:
                    hid += list(h["entry/data/frame_id"][()])
        hits = sorted(r["frame_id"] for r in sink.of("result", 1) if r["is_hit"])
        check(sorted(ids) == list(range(8)) and sorted(hid) == hits,
              "series across the reload: %s rows %s, hits %s of %s" % (a, ids, hid, hits))
        sink.close()
        stop_clean(d)
    finally:
        d.stop()
    return "reload mid-series: its 8 rows and %d hits stayed in out/ (%s), the next series in " \
           "out2/after.h5 without hits file" % (len(hits), " ".join(series))


def probe_accounting(tmp):
    """status and /metrics agree with each other and with what is on disk."""
    d, out = start_daemon(tmp, "d", hits="true", http=True, flush_interval=0.1)
    try:
        sink = Sink(d)
        tx = Feeder(d)
        rows = hits = 0
        for sid, n in ((1, 5), (2, 9), (3, 4)):
            imgs = my_frames(n, seed=sid)
            tx.series("native", sid, "acc%d" % sid, imgs, "bslz4")
            sink.wait_end(sid)
        w = wstatus(d, lambda w: w["files_written"] >= 3 and w["files_open"] == 0, "written")
        size = 0
        for f in sorted(os.listdir(out)):
            p = os.path.join(out, f)
            size += os.path.getsize(p)
            if f.endswith("_hits.h5"):
                with h5py.File(p, "r") as h:
                    hits += h["entry/data/data"].shape[0]
            elif f.endswith(".h5"):
                with h5py.File(p, "r") as h:
                    rows += h["entry/data/I"].shape[0]
        m = metrics(d)
        st = os.statvfs(out)
        free = st.f_bavail * st.f_frsize
        nfiles = len([f for f in os.listdir(out) if f.endswith(".h5")
                      and not f.endswith("_hits.h5")])
        fig = ("status files %d frames %d hits %d bytes %d free %d; disk: %d series files, %d "
               "rows, %d hit frames, %d bytes, free %d; metrics files %s frames %s bytes %s" % (
                   w["files_written"], w["frames_written"], w["hit_frames_written"],
                   w["bytes_written"], w["free_bytes"], nfiles, rows, hits, size, free,
                   m.get("faid_writer_files_written_total"),
                   m.get("faid_writer_frames_written_total"),
                   m.get("faid_writer_bytes_written_total")))
        check(w["files_written"] == nfiles and w["frames_written"] == rows
              and w["hit_frames_written"] == hits, fig)
        check(0 < w["bytes_written"] <= size, fig + " (bytes written vs on disk)")
        check(abs(w["free_bytes"] - free) <= max(64 << 20, free // 50), fig + " (free)")
        check(m["faid_writer_files_written_total"] == w["files_written"]
              and m["faid_writer_frames_written_total"] == w["frames_written"]
              and m["faid_writer_hit_frames_written_total"] == w["hit_frames_written"]
              and m["faid_writer_bytes_written_total"] == w["bytes_written"]
              and m["faid_writer_files_open"] == 0, fig + " (metrics)")
        sink.close()
        stop_clean(d)
    finally:
        d.stop()
    return fig


def main():
    wanted = ARGS.probes or NAMES
    bad = [p for p in (FAID, FAIDCTL) if not os.access(p, os.X_OK)]
    if bad:
        sys.exit("not built: %s" % bad)
    failed = 0
    for name in wanted:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="faid-wprobe-%s-" % name) as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                fig = globals()["probe_" + name](tmp)
                line = "PASS %-11s: %s" % (name, fig)
            except Exception as e:  # noqa: BLE001 - every failure is reported as such
                failed += 1
                line = "FAIL %-11s: %s: %s" % (name, type(e).__name__, e)
                if ARGS.verbose:
                    traceback.print_exc()
            finally:
                os.chdir(cwd)
        print("%s [%.0f s]" % (line, time.monotonic() - t0), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
