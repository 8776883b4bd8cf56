"""Integration tests of peak finding in the daemon (issue 6): the real faid on loopback ports with
peaks.algorithm set (reference device and PoCL's CPU OpenCL device), frames with
Bragg-like spots at known positions and background-only frames sent by a Python sender.

Checked: every result carries num_peaks, is_hit (consistent with peaks.min_peaks_for_hit),
the peaks as struct-of-arrays of num_peaks entries near the planted spots, and the background
profile on the profile's bins; `start` echoes the peak parameters; the `aggregates` topic counts
frames and hits, histograms num_peaks and accumulates the peaks into the virtual powder pattern
(bitshuffle-LZ4 compressed), and control `reset` clears it; `faidctl sub --out` writes .peaks
files equal to those of `faidctl process` on the same frames; a frame whose shape is not the
detector's is a clear error. Timeouts only turn hangs into failures."""

import os
import subprocess
import sys
import time

import msgpack
import numpy as np
import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_daemon as td  # noqa: E402  (the daemon harness: Daemon, Sender, Receiver)
from test_daemon import LONG, FAIDCTL, arr, ep  # noqa: E402

ROWS, COLS = td.ROWS, td.COLS
NSPOTS = 12
MIN_HIT = 5

PEAKS = f"""peaks:
  algorithm: peakfinder8
  adc_threshold: 60
  minimum_snr: 5
  min_pixel_count: 2
  local_bg_radius: 3
  min_peaks_for_hit: {MIN_HIT}
  hit_rate_window: 4
  aggregates_interval: 0.2
"""


def spot_frames(n, seed=3):
    """Frames k even: NSPOTS Gaussian spots (sigma 1 px, 400-900 counts at the peak, 10 px apart
    at least, 15 px from the beam centre at least) on a Poisson background of 4 counts; k odd: background only. Returns the frames and, per frame,
    the spots' (x = column, y = row) centres."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:ROWS, 0:COLS]
    out, truth = [], []
    for k in range(n):
        lam = np.full((ROWS, COLS), 4.0)
        spots = []
        if k % 2 == 0:
            while len(spots) < NSPOTS:
                x, y = rng.uniform(8, COLS - 8), rng.uniform(8, ROWS - 8)
                # not next to the beam centre (67, 61): peakfinder8's radial statistics of the
                # innermost rings have a handful of pixels, which one spot dominates
                if np.hypot(x - 67, y - 61) > 15 and all(
                        (x - a) ** 2 + (y - b) ** 2 > 100 for a, b in spots):
                    spots.append((x, y))
            for x, y in spots:
                lam += rng.uniform(400, 900) * np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / 2.0)
        out.append(rng.poisson(lam).astype(np.uint16))
        truth.append(spots)
    return out, truth


@pytest.fixture
def daemons(tmpdir_):
    yield from td.daemons.__wrapped__(tmpdir_)


tmpdir_ = td.tmpdir_


def read_peaks(path):
    head, rows = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("# ") and ": " in line:
                k, v = line[2:].rstrip("\n").split(": ", 1)
                head[k] = v
            elif not line.startswith("#"):
                rows.append([float(v) for v in line.split()])
    return head, np.array(rows).reshape(-1, 6)


@pytest.mark.parametrize("device", ["ref", "cpu"])
def test_peaks_results_aggregates_files(daemons, tmpdir_, device):
    d = daemons(devices=device, npt=48, lossless=True, extra=PEAKS)
    rx = td.Receiver(d)
    rx.settle()
    subdir = os.path.join(tmpdir_, "sub")
    imgs, truth = spot_frames(6)
    sub = subprocess.Popen([FAIDCTL, "sub", "--from", ep(d.ports["lossless"]), "--lossless",
                            "--count", str(len(imgs)), "--timeout", str(LONG), "--out", subdir,
                            "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tx = td.Sender(d)
    tx.start(series_id=3, nimages=len(imgs), series_unique_id="spots")
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=3)
    tx.end(series_id=3)
    rx.collect_until_end()
    sub_out, sub_err = sub.communicate(timeout=LONG)
    assert sub.returncode == 0, sub_err

    start = rx.of("start")[-1]
    assert start["peaks"]["algorithm"] == "peakfinder8"
    assert start["peaks"]["min_peaks_for_hit"] == MIN_HIT
    assert start["peaks"]["adc_threshold"] == 60.0
    assert start["peaks"]["max_peaks_for_hit"] is None
    assert start["peak_coordinates"] == "pixel-index"

    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == list(range(len(imgs)))
    for i, r in results.items():
        n = r["num_peaks"]
        assert r["is_hit"] == (n >= MIN_HIT), (i, n, r["is_hit"])
        x, y = arr(r["peak_x"]), arr(r["peak_y"])
        for k in ("peak_x", "peak_y", "peak_intensity", "peak_sigma", "peak_snr", "peak_npix",
                  "peak_max_pixel"):
            assert arr(r[k]).shape == (n,), k
        assert arr(r["peak_npix"]).dtype == np.int32
        for k in ("bg_I", "bg_sigma", "bg_std", "bg_count"):
            assert arr(r[k]).shape == (48,), k
        bg = arr(r["bg_I"])
        assert np.nanmedian(bg[arr(r["bg_count"]) > 0]) > 0
        # the peak stages' times (issue 17: the daemon's results stage by stage)
        assert r["clip_us"] > 0 and r["find_us"] > 0, (r["clip_us"], r["find_us"])
        assert {"host_us", "h2d_us", "d2h_us"} <= set(r), sorted(r)
        if truth[i]:
            # every planted spot found, within 0.5 px, and nothing else
            assert n == NSPOTS, (i, n)
            found = np.stack([x, y], 1)
            for sx, sy in truth[i]:
                dist = np.hypot(found[:, 0] - sx, found[:, 1] - sy).min()
                assert dist < 0.5, (i, sx, sy, dist)
            assert r["is_hit"]
        else:
            assert n == 0 and not r["is_hit"], (i, n)

    # aggregates: wait for one that has seen every frame
    aggr = None
    t_end = time.monotonic() + LONG
    sock = d.ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.SUBSCRIBE, b"aggregates")
    sock.connect(ep(d.ports["out"]))
    while time.monotonic() < t_end:
        if sock.poll(1000):
            topic, body = sock.recv_multipart()
            m = msgpack.unpackb(body)
            if m["frames"] == len(imgs):
                aggr = m
                break
    assert aggr is not None, "no aggregates message with every frame"
    assert aggr["type"] == "aggregates" and next(iter(aggr)) == "type"
    assert aggr["hits"] == sum(1 for t in truth if t)
    assert aggr["peaks"] == NSPOTS * aggr["hits"]
    hist = arr(aggr["num_peaks_histogram"])
    w = aggr["num_peaks_bin_width"]
    assert hist.sum() == len(imgs) and hist[0] == len(imgs) - aggr["hits"]
    assert hist[NSPOTS // w] == aggr["hits"]
    assert aggr["hit_rate_window"] == 4 and 0 <= aggr["hit_rate"] <= 1
    assert len(arr(aggr["hit_rate_history"])) == len(arr(aggr["hit_rate_timestamp_history"])) >= 1
    vp = aggr["virtual_powder_plot"]
    assert vp["encoding"] == "bslz4" and vp["shape"] == [ROWS, COLS]
    powder = decode_bslz4(vp["data"], ROWS * COLS, 4).view("<u4").reshape(ROWS, COLS)
    assert powder.sum() == aggr["peaks"]
    for i, r in results.items():
        for px, py in zip(arr(r["peak_x"]), arr(r["peak_y"])):
            assert powder[int(round(py)), int(round(px))] >= 1

    # reset clears them
    assert d.request({"cmd": "reset"})["ok"]
    t_end = time.monotonic() + LONG
    cleared = None
    while time.monotonic() < t_end and cleared is None:
        if sock.poll(1000):
            m = msgpack.unpackb(sock.recv_multipart()[1])
            if m["frames"] == 0:
                cleared = m
    sock.close(0)
    assert cleared is not None, "aggregates not cleared by reset"
    assert cleared["hits"] == 0 and arr(cleared["num_peaks_histogram"]).sum() == 0
    assert decode_bslz4(cleared["virtual_powder_plot"]["data"], ROWS * COLS, 4).sum() == 0

    # .peaks of faidctl sub --out == .peaks of faidctl process on the same frames
    out = os.path.join(tmpdir_, "proc")
    os.makedirs(out)
    np.save(os.path.join(out, "f.npy"), np.stack(imgs))
    p = subprocess.run([FAIDCTL, "process", "-c", d.config, "--device", device, "-o", out,
                        os.path.join(out, "f.npy")], capture_output=True, text=True, timeout=LONG)
    assert p.returncode == 0, p.stderr
    for i in range(len(imgs)):
        with open(os.path.join(subdir, "spots_%05d.peaks" % i)) as f:
            a = f.read()
        with open(os.path.join(out, "f_%05d.peaks" % i)) as f:
            b = f.read()
        assert a == b, (i, a[:400], b[:400])
        head, rows = read_peaks(os.path.join(out, "f_%05d.peaks" % i))
        assert head["algorithm"] == "peakfinder8" and head["min_peaks_for_hit"] == str(MIN_HIT)
        assert int(head["num_peaks"]) == results[i]["num_peaks"] == len(rows)
        assert head["is_hit"] == ("1" if results[i]["is_hit"] else "0")
        assert np.allclose(rows[:, 0], arr(results[i]["peak_x"]), rtol=1e-7, atol=0)
        assert np.array_equal(rows[:, 5], arr(results[i]["peak_npix"]))
    assert d.terminate() == 0


def decode_bslz4(data, nelem, esize):
    """Bitshuffle-LZ4 chunk (HDF5 filter 32008 layout) read back through h5py + hdf5plugin (an
    independent decoder: the chunk is stored as a raw chunk and read through the filter)."""
    import h5py
    import hdf5plugin
    import io
    f = h5py.File(io.BytesIO(), "w")
    ds = f.create_dataset("x", shape=(nelem,), chunks=(nelem,), dtype="<u%d" % esize,
                          **hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))
    ds.id.write_direct_chunk((0,), bytes(data))
    out = ds[...]
    f.close()
    return out


def test_shape_mismatch_is_a_clear_error(daemons, tmpdir_):
    d = daemons(devices="ref", npt=48, extra=PEAKS)
    rx = td.Receiver(d)
    rx.settle()
    tx = td.Sender(d)
    tx.start(series_id=4)
    tx.image(0, np.zeros((ROWS, COLS + 3), np.uint16), series_id=4)
    tx.image(1, spot_frames(1)[0][0], series_id=4)
    tx.end(series_id=4)
    rx.collect_until_end()
    errs = rx.of("error")
    assert len(errs) == 1 and errs[0]["frame_id"] == 0
    assert "shape" in errs[0]["message"], errs[0]
    assert [r["frame_id"] for r in rx.of("result")] == [1]
    assert rx.of("result")[0]["num_peaks"] == NSPOTS
    # offline: a .npy of another shape than the detector's
    out = os.path.join(tmpdir_, "bad")
    os.makedirs(out)
    np.save(os.path.join(out, "b.npy"), np.zeros((ROWS + 1, COLS), np.uint16))
    p = subprocess.run([FAIDCTL, "process", "-c", d.config, "--device", "ref", "-o", out,
                        os.path.join(out, "b.npy")], capture_output=True, text=True, timeout=LONG)
    assert p.returncode != 0 and "shape" in p.stderr.lower(), p.stderr
    assert not [f for f in os.listdir(out) if f.endswith(".peaks")]
    assert d.terminate() == 0


@pytest.mark.parametrize("mode", ["frame", "patches"])
def test_hits_channel(daemons, mode):
    """hits.endpoint: one single-frame msgpack map per hit, nothing for the other frames, in the
    layout CrystFEL's --zmq-input reads (peak_list of float lists, beam_energy, detector_distance,
    msgpack-numpy detector_data with binary keys) or, in patches mode, the peaks' patches."""
    port = td.free_port()
    extra = PEAKS + f'hits:\n  endpoint: "{ep(port)}"\n  mode: {mode}\n  patch_radius: 3\n'
    d = daemons(devices="ref", npt=48, extra=extra)
    hs = d.ctx.socket(zmq.SUB)
    hs.setsockopt(zmq.SUBSCRIBE, b"")
    hs.connect(ep(port))
    rx = td.Receiver(d)
    rx.settle()
    imgs, truth = spot_frames(4, seed=11)
    tx = td.Sender(d)
    tx.start(series_id=5, series_unique_id="hits")
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=5)
    tx.end(series_id=5)
    rx.collect_until_end()
    results = {r["frame_id"]: r for r in rx.of("result")}
    want = sorted(i for i, r in results.items() if r["is_hit"])
    assert want == [i for i, t in enumerate(truth) if t]
    got = {}
    t_end = time.monotonic() + LONG
    while len(got) < len(want) and time.monotonic() < t_end:
        if hs.poll(1000):
            parts = hs.recv_multipart()
            assert len(parts) == 1, "a hit is one frame (CrystFEL reads one frame per message)"
            m = msgpack.unpackb(parts[0], raw=False)
            got[m["frame_id"]] = m
    hs.close(0)
    assert sorted(got) == want
    for i, m in got.items():
        r = results[i]
        assert m["type"] == "hit" and m["num_peaks"] == r["num_peaks"]
        assert m["event_id"] == "hits//%d" % i
        assert m["detector_distance"] == pytest.approx(100.0)
        assert m["beam_energy"] == pytest.approx(12398.42, rel=1e-5)
        pl = m["peak_list"]
        assert all(isinstance(v, float) for v in pl["fs"] + pl["ss"] + pl["intensity"])
        assert np.array_equal(np.float32(pl["fs"]), arr(r["peak_x"]))
        assert np.array_equal(np.float32(pl["ss"]), arr(r["peak_y"]))
        assert np.array_equal(np.float32(pl["num_pixels"]), arr(r["peak_npix"]))
        if mode == "frame":
            dd = m["detector_data"]
            assert dd[b"nd"] is True and dd[b"type"] == "<f4" and dd[b"kind"] == b""
            assert dd[b"shape"] == [ROWS, COLS]
            img = np.frombuffer(dd[b"data"], "<f4").reshape(ROWS, COLS)
            assert np.array_equal(img, imgs[i].astype(np.float32))
        else:
            assert "detector_data" not in m
            pp = m["peak_patches"]
            n = r["num_peaks"]
            assert pp[b"shape"] == [n, 7, 7]
            patches = np.frombuffer(pp[b"data"], "<f4").reshape(n, 7, 7)
            padded = np.pad(imgs[i].astype(np.float32), 3, constant_values=np.nan)
            for k, (r0, c0) in enumerate(m["peak_patch_origin"]):
                assert r0 == round(float(pl["ss"][k])) - 3 and c0 == round(float(pl["fs"][k])) - 3
                assert np.array_equal(patches[k], padded[r0 + 3:r0 + 10, c0 + 3:c0 + 10],
                                      equal_nan=True)
            assert np.frombuffer(m["bg_I"][b"data"], "<f4").shape == (48,)
    st = d.status()
    assert st["counters"]["hits_sent"] == len(want) and st["counters"]["hits_dropped"] == 0
    assert d.terminate() == 0


def test_python_subscriber_shows_peaks_and_hit_rate(daemons, tmpdir_):
    """client/python/faid_subscriber.py: result lines with num_peaks and the hit flag, the hit
    rate from the aggregates messages, and a plot of the profile with the peaks (headless)."""
    d = daemons(devices="ref", npt=48, extra=PEAKS)
    png = os.path.join(tmpdir_, "p.png")
    imgs, truth = spot_frames(4, seed=21)
    pysub = os.path.join(td.SRC, "client", "python", "faid_subscriber.py")
    sub = subprocess.Popen([sys.executable, pysub, "--from", ep(d.ports["out"]), "--count",
                            str(len(imgs)), "--timeout", str(LONG), "--stats", "--plot",
                            "--plot-file", png, "--plot-every", "0"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # the SUB's subscription reaches faid
    tx = td.Sender(d)
    tx.start(series_id=6)
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=6)
        time.sleep(0.3)  # lets aggregates go out between results
    tx.end(series_id=6)
    out, err = sub.communicate(timeout=LONG)
    assert sub.returncode == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("result ")]
    assert len(lines) == len(imgs), out
    for ln in lines:
        frame = int(ln.split("frame=")[1].split()[0])
        want = "peaks=%d hit=%d" % ((NSPOTS, 1) if truth[frame] else (0, 0))
        assert ln.endswith(want), (ln, want)
    assert "aggregates frames=" in out, out
    assert "hits: %d of %d results, faid's hit rate" % (sum(1 for t in truth if t), len(imgs)) in out
    assert os.path.getsize(png) > 1000
    assert d.terminate() == 0


def test_hits_request_socket(daemons):
    """hits.request_endpoint: OM's request socket as CrystFEL's --zmq-request=next uses it: a
    REQ sends `next` and gets the next hit as one frame; `resetplots` -> Ok; else What?."""
    port = td.free_port()
    d = daemons(devices="ref", npt=48,
                extra=PEAKS + f'hits:\n  request_endpoint: "{ep(port)}"\n')
    req = d.ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(ep(port))

    def ask(what, timeout=LONG):
        req.send(what)
        assert req.poll(timeout * 1000), "no reply to %r" % what
        parts = req.recv_multipart()
        assert len(parts) == 1
        return parts[0]

    assert ask(b"resetplots") == b"Ok"
    assert ask(b"hello") == b"What?"
    req.send(b"next")  # waits for the next hit
    time.sleep(0.5)  # the request is queued before the frames arrive
    imgs, truth = spot_frames(3, seed=31)
    tx = td.Sender(d)
    tx.start(series_id=8, series_unique_id="req")
    for k in (1, 0):  # a background-only frame first: no hit, no answer
        tx.image(k, imgs[k], series_id=8)
    assert req.poll(LONG * 1000)
    m = msgpack.unpackb(req.recv(), raw=False)
    assert m["type"] == "hit" and m["frame_id"] == 0 and m["event_id"] == "req//0"
    assert m["num_peaks"] == NSPOTS and len(m["peak_list"]["fs"]) == NSPOTS
    assert m["detector_data"][b"shape"] == [ROWS, COLS]
    # a second request gets the following hit (frame 2)
    req.send(b"next")
    time.sleep(0.5)
    tx.image(2, imgs[2], series_id=8)
    tx.end(series_id=8)
    assert req.poll(LONG * 1000)
    assert msgpack.unpackb(req.recv(), raw=False)["frame_id"] == 2
    req.close(0)
    # the counter is raised right after the reply is sent: poll, the reply may arrive first
    deadline = time.time() + LONG
    while d.status()["counters"]["hits_requested"] < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert d.status()["counters"]["hits_requested"] == 2
    assert d.terminate() == 0
