"""DECTRIS detector streams through the real daemon, end to end.

The messages come from the independent encoders of tests/reference/dectris_stream.py (cbor2, json,
hdf5plugin, lz4.block: nothing of faid's), pushed with pyzmq the way a detector does: faid in
`input.mode: connect` to a bound PUSH socket (stream v2, as a DCU serves it) and in `bind` mode
(stream v1). Series are aborted and restarted, stale and corrupt messages sit among good ones.
Checked: every good frame comes out exactly once, bit-identical to `faidctl process` on the same
pixels given as .npy (same configuration and device); every bad message is counted (bad_input,
failed or stale); faid keeps answering `status`. The real EIGER2 messages of
/work/shared/data/dectris-stream2 (no start message: faid falls back to its configuration) are
reduced the same way.

Nothing asserts on time: timeouts only turn a hang into a failure. Harness: test_daemon.py."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import zmq

from test_daemon import (FAIDCTL, LONG, Receiver, arr, daemons, ep, tmpdir_,  # noqa: F401
                         ROWS, COLS)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import dectris_stream as ds  # noqa: E402

REAL = "/work/shared/data/dectris-stream2"


class Detector:
    """A detector's PUSH socket: bound (faid connects, input.mode connect) or connected."""

    def __init__(self, daemon, bind=True):
        self.sock = daemon.ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.LINGER, 5000)
        self.sock.setsockopt(zmq.SNDTIMEO, LONG * 1000)
        if not bind:
            self.sock.connect(ep(daemon.ports["in"]))
            return
        # A detector that restarts binds the port again; its old socket lets go of it
        # asynchronously (ZeroMQ closes in the background).
        t_end = time.monotonic() + LONG
        while True:
            try:
                self.sock.bind(ep(daemon.ports["in"]))
                return
            except zmq.ZMQError as e:
                if e.errno != zmq.EADDRINUSE or time.monotonic() > t_end:
                    raise
                time.sleep(0.1)

    def send(self, parts):
        if isinstance(parts, (bytes, bytearray)):
            parts = [parts]
        self.sock.send_multipart(parts)

    def close(self):
        self.sock.close()


def masked_config(d, tmpdir_, name, mask):
    """The daemon's configuration with the detector's own mask (non-zero = bad) as
    detector.mask, written as <name>mask.yaml beside <name>mask.npy; returns its path."""
    mask_path = os.path.join(tmpdir_, name + "mask.npy")
    np.save(mask_path, (mask != 0).astype(np.uint8))
    masked_cfg = os.path.join(tmpdir_, name + "mask.yaml")
    with open(d.config) as f:
        text = f.read()
    with open(masked_cfg, "w") as f:
        f.write(text.replace("detector:\n", "detector:\n  mask: %s\n" % mask_path, 1))
    return masked_cfg


def reference(d, tmpdir, name, stack, config=None):
    """faidctl process on the stack (the daemon's configuration unless given, CPU device): per
    frame [bins, 5]."""
    out = os.path.join(tmpdir, "ref-" + name)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name + ".npy")
    np.save(path, np.ascontiguousarray(stack))
    r = subprocess.run([FAIDCTL, "process", "-c", config or d.config, "--device", "cpu", "-o",
                        out, path],
                       capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 0, r.stderr
    return [np.loadtxt(os.path.join(out, "%s_%05d.dat" % (name, k)), dtype=np.float64)
            for k in range(len(stack))]


def same_numbers(result, ref):
    for col, key in enumerate(("I", "sigma", "std", "count"), start=1):
        got = arr(result[key])
        want = ref[:, col].astype(np.float32)  # %.9g round-trips float32 exactly
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), key


def counters_balance(c):
    assert c["received"] == c["processed"] + c["failed"] + c["dropped"], c


def test_v2_connect_abort_restart_stale_and_corrupt(daemons, tmpdir_):
    d = daemons(lossless=True, input_mode="connect",
                input_extra='  protocol: dectris-v2\n')
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=True)  # a DCU binds; faid connects and retries until it is there
    rng = np.random.default_rng(7)
    chans = ["threshold_1", "threshold_2"]
    mk = lambda: {c: rng.poisson(30 + 20 * k, (ROWS, COLS)).astype(np.uint16)
                  for k, c in enumerate(chans)}
    mask = np.zeros((ROWS, COLS), np.uint32)
    mask[5, 7] = 1
    good = {}  # (series_id, frame_id) -> pixels of threshold_1

    def image(series, uid, fid, comp="bslz4", keep=True):
        frames = mk()
        if keep:
            good[(series, fid)] = frames["threshold_1"]
        det.send(ds.v2_encode(ds.v2_image(series, uid, fid, frames, comp)))

    start1 = ds.v2_start(1, "A", chans, (ROWS, COLS), "uint16", masks={c: mask for c in chans},
                         compression="bslz4")
    det.send(ds.v2_encode(start1))
    image(1, "A", 0)
    image(1, "A", 1, comp="lz4")
    # Aborted: the detector is re-armed without an end; series 1 messages still in flight.
    det.send(ds.v2_encode(ds.v2_start(2, "B", chans, (ROWS, COLS), "uint16")))
    image(1, "A", 2, keep=False)                       # stale
    det.send(ds.v2_encode(ds.v2_end(1, "A")))         # stale
    image(2, "B", 0)
    bad = [
        b"\xd9\xd9\xf7\xff\xff\xff",                   # tag then garbage
        ds.v2_encode(ds.v2_image(2, "B", 1, mk(), "bslz4"))[:300],  # truncated message
        ds.v2_encode({"type": "image", "series_id": 2}),            # missing keys
        ds.v2_encode(ds.v2_image(2, "B", 9, mk(), "zstd")),          # unknown compression
    ]
    for b in bad:
        det.send(b)
    image(2, "B", 1, comp=None)                        # uncompressed typed array
    # A frame whose compressed bytes are corrupt: valid CBOR, fails on the device.
    frames = mk()
    msg = ds.v2_image(2, "B", 7, frames, "bslz4")
    inner = msg["data"]["threshold_1"].value[1].value
    payload = bytearray(inner.value[2])
    payload[20:60] = b"\xff" * 40
    inner.value[2] = bytes(payload)
    det.send(ds.v2_encode(msg))
    image(2, "B", 2)
    det.send(ds.v2_encode(ds.v2_end(2, "B")))
    msgs = rx.collect_until_end(n_ends=2)

    starts, ends = rx.of("start"), rx.of("end")
    assert [(s["series_id"], s["reason"]) for s in starts] == [(1, "series"), (2, "series")]
    s1 = starts[0]
    assert s1["input"]["protocol"] == "dectris-v2" and s1["input"]["start_message"]
    rep = s1["input"]["reported"]
    assert rep["channels"] == chans and rep["pixel_mask"] and rep["image_size_x"] == COLS
    assert rep["beam_center_x"] == 512.25 and rep["image_dtype"] == "uint16"
    assert s1["input"]["shape_matches"] and s1["nimages"] == 5
    assert s1["user_data"] == {"sample": "lysozyme", "n": [1, 2, 3]}
    e = {m["series_id"]: m for m in ends}
    assert e[1]["reason"] == "superseded" and e[1]["frames_processed"] == 2
    assert e[2]["reason"] == "end" and e[2]["stale_messages"] == 2
    # frames 0, 1, 2 good; 7 corrupt on the device; 9 (zstd) refused by ingest after its header
    # named it: both are failed frames of series 2.
    assert e[2]["frames_received"] == 5 and e[2]["frames_processed"] == 3
    assert e[2]["frames_failed"] == 2 and not e[2]["incomplete"]

    results = rx.of("result")
    ids = sorted((r["series_id"], r["frame_id"]) for r in results)
    assert ids == sorted(good), ids  # every good frame exactly once
    assert all(r["user_data"] == [1, "x"] for r in results)
    # Series 1's start brought a pixel mask (OR-ed with the configured one: none here); series
    # 2's start none.
    assert s1["input"]["applied"]["pixel_mask"] and not starts[1]["input"]["applied"]["pixel_mask"]
    masked_cfg = masked_config(d, tmpdir_, "v2", mask)
    by = {(r["series_id"], r["frame_id"]): r for r in results}
    for sid, cfg in ((1, masked_cfg), (2, None)):
        keys = sorted(k for k in good if k[0] == sid)
        refs = reference(d, tmpdir_, "v2_%d" % sid, np.stack([good[k] for k in keys]), cfg)
        for k, ref in zip(keys, refs):
            same_numbers(by[k], ref)

    errors = rx.of("error")
    assert len(errors) == len(bad) + 1
    assert any(x.get("frame_id") == 7 and x["stage"] == "worker" for x in errors)
    st = d.status()
    c = st["counters"]
    assert c["stale"] == 2 and st["drops"]["series.stale"] == 1
    assert c["bad_input"] + c["failed"] == len(bad) + 1
    assert c["processed"] == len(good)
    counters_balance(c)

    # The detector restarts (its socket goes away and comes back): faid reconnects by itself and
    # the next series is read on the same connection settings.
    det.close()
    det = Detector(d, bind=True)
    det.send(ds.v2_encode(ds.v2_start(3, "C", chans, (ROWS, COLS), "uint16")))
    image(3, "C", 0)
    det.send(ds.v2_encode(ds.v2_end(3, "C")))
    rx.collect_until_end(n_ends=3)  # LosslessReceiver counts ends cumulatively: 1, 2 and 3
    assert [r["frame_id"] for r in rx.of("result") if r["series_id"] == 3] == [0]
    assert d.terminate() == 0
    det.close()


def test_v1_bind_every_encoding_drains_parts(daemons, tmpdir_):
    d = daemons(lossless=True)  # input.protocol auto
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(11)
    # dpixelmask-1.0 plays the start message's mask; shape [width, height] on the wire, so a
    # pixel off the diagonal catches a transposition.
    mask = np.zeros((ROWS, COLS), np.uint32)
    mask[3, 100:120] = 1
    mask[90, 7] = 4
    flat = np.ones((ROWS, COLS), np.float32)
    det.send(ds.v1_header(7, "all", config=ds.v1_config((ROWS, COLS), np.uint16),
                          flatfield=flat, mask=mask, countrate=np.arange(8, dtype=np.float32),
                          appendix=b'{"run": 3}'))
    good = []
    encs = [("bs16-lz4<", np.uint16), ("lz4<", np.uint16), ("<", np.uint16),
            ("bs32-lz4<", np.uint32), ("bs8-lz4<", np.uint8)]
    fid = 0
    for enc, dt in encs:
        a = rng.poisson(40, (ROWS, COLS)).astype(dt)
        good.append((fid, a))
        det.send(ds.v1_image(7, fid, a, enc, appendix=b"note" if fid == 0 else None))
        fid += 1
        if fid == 2:
            # Among them: a message with more parts than any format has (drained, answered),
            # an image without its dconfig part, and an image whose blob is cut short.
            det.send(ds.v1_image(7, 90, a, "<") + [b"x"] * 7)
            det.send(ds.v1_image(7, 91, a, "<")[:3])
            cut = ds.v1_image(7, 92, a, "bs16-lz4<")
            cut[2] = cut[2][:-50]
            det.send(cut)
    a = rng.poisson(40, (ROWS, COLS)).astype(np.uint16)
    good.append((fid, a))
    det.send(ds.v1_image(7, fid, a, "bs16-lz4<"))
    det.send(ds.v1_end(7))
    rx.collect_until_end()

    start = rx.of("start")[0]
    assert start["series_id"] == 7 and start["input"]["protocol"] == "dectris-v1"
    assert start["input"]["reported"]["pixel_mask"] and start["user_data"] == '{"run": 3}'
    end = rx.of("end")[0]
    assert end["reason"] == "end" and end["frames_processed"] == len(good)
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == [f for f, _ in good]
    assert results[0]["user_data"] == "note"
    assert start["input"]["applied"]["pixel_mask"]
    assert start["input"]["detector_masked_pixels"] == 21
    masked_cfg = masked_config(d, tmpdir_, "v1", mask)
    for dt in (np.uint8, np.uint16, np.uint32):
        sel = [(f, a) for f, a in good if a.dtype == dt]
        refs = reference(d, tmpdir_, "v1_" + np.dtype(dt).name, np.stack([a for _, a in sel]),
                         masked_cfg)
        for (f, _), ref in zip(sel, refs):
            same_numbers(results[f], ref)
    assert len(rx.of("error")) == 3
    c = d.status()["counters"]
    assert c["processed"] == len(good) and c["bad_input"] + c["failed"] == 3
    counters_balance(c)
    assert d.terminate() == 0
    det.close()


def test_v2_start_pixel_mask_ored_with_configured_mask(daemons, tmpdir_):
    """Merge rule: the pixel mask of a start message is OR-ed with detector.mask for that series;
    the next series, whose start has none, is reduced with the configured mask alone. Numbers
    equal faidctl process with the OR-ed mask (resp. the configured one) given as a file."""
    conf = np.zeros((ROWS, COLS), np.uint8)
    conf[:6, :] = 1
    conf_path = os.path.join(tmpdir_, "conf_mask.npy")
    np.save(conf_path, conf)
    d = daemons(lossless=True, detector_extra="  mask: %s\n" % conf_path)
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(5)
    dmask = np.zeros((ROWS, COLS), np.uint32)
    dmask.flat[rng.choice(ROWS * COLS, 400, replace=False)] = rng.choice([1, 2, 4, 8], 400)
    both = ((conf != 0) | (dmask != 0)).astype(np.uint8)
    both_path = os.path.join(tmpdir_, "both_mask.npy")
    np.save(both_path, both)
    both_cfg = os.path.join(tmpdir_, "both.yaml")
    with open(d.config) as f:
        text = f.read()
    with open(both_cfg, "w") as f:
        f.write(text.replace(conf_path, both_path))
    mk = lambda: rng.poisson(50, (ROWS, COLS)).astype(np.uint16)
    s1 = [mk() for _ in range(3)]
    s2 = [mk() for _ in range(2)]
    det.send(ds.v2_encode(ds.v2_start(1, "M", ["threshold_1"], (ROWS, COLS), "uint16",
                                      masks={"threshold_1": dmask}, compression="bslz4")))
    for i, a in enumerate(s1):
        det.send(ds.v2_encode(ds.v2_image(1, "M", i, {"threshold_1": a}, "bslz4")))
    det.send(ds.v2_encode(ds.v2_end(1, "M")))
    det.send(ds.v2_encode(ds.v2_start(2, "N", ["threshold_1"], (ROWS, COLS), "uint16")))
    for i, a in enumerate(s2):
        det.send(ds.v2_encode(ds.v2_image(2, "N", i, {"threshold_1": a}, "bslz4")))
    det.send(ds.v2_encode(ds.v2_end(2, "N")))
    rx.collect_until_end(n_ends=2)

    st1, st2 = rx.of("start")
    assert st1["input"]["applied"]["pixel_mask"]
    assert st1["input"]["detector_masked_pixels"] == int((dmask != 0).sum())
    assert st1["parameters"]["masked_pixels"] == int(both.sum())
    assert not st2["input"]["applied"]["pixel_mask"]
    assert st2["parameters"]["masked_pixels"] == int(conf.sum())
    assert st2["setup_version"] > st1["setup_version"] > 1
    res = {(r["series_id"], r["frame_id"]): r for r in rx.of("result")}
    assert sorted(res) == [(1, i) for i in range(3)] + [(2, i) for i in range(2)]
    for sid, stack, cfg in ((1, s1, both_cfg), (2, s2, None)):
        refs = reference(d, tmpdir_, "mask%d" % sid, np.stack(stack), config=cfg)
        for i, ref in enumerate(refs):
            assert res[(sid, i)]["setup_version"] == (st1 if sid == 1 else st2)["setup_version"]
            same_numbers(res[(sid, i)], ref)
    assert d.terminate() == 0
    det.close()


@pytest.mark.skipif(not os.path.isdir(REAL), reason="real EIGER2 messages not present")
def test_real_eiger2_messages_without_start(daemons, tmpdir_):
    """EIGER2 R 500K recordings: images and end, no start. faid opens each series from its
    configuration (reason implicit, said in the start's input map) and reduces threshold_1 of
    every image exactly as faidctl process reduces the same pixels."""
    d = daemons(lossless=True, input_mode="connect", shape=(514, 1030), split="no",
                max_frame_bytes=4 << 20)
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=True)
    folders = sorted(os.listdir(REAL))
    folders = [f for f in folders if os.path.isdir(os.path.join(REAL, f))]
    expect = []  # (folder, image message) in send order
    for f in folders:
        files = sorted(x for x in os.listdir(os.path.join(REAL, f)) if x.endswith(".cbor"))
        for name in files:
            raw = open(os.path.join(REAL, f, name), "rb").read()
            m = ds.v2_decode(raw)
            if m["type"] == "image":
                expect.append((f, m))
            det.send(raw)
        # each folder's series ends with its end message
    rx.collect_until_end(n_ends=len(folders))
    starts = rx.of("start")
    assert len(starts) == len(folders)
    assert all(s["reason"] == "implicit" and not s["input"]["start_message"] for s in starts)
    results = rx.of("result")
    assert len(results) == len(expect)
    # Results in order (one device): match them to the images sent.
    for (f, m), r in zip(expect, results):
        assert r["frame_id"] == m["image_id"] and r["series_id"] == m["series_id"]
        px = m["data"]["threshold_1"]
        ref = reference(d, tmpdir_, f + "_%d" % m["image_id"], px[None])[0]
        same_numbers(r, ref)
    c = d.status()["counters"]
    assert c["processed"] == len(expect) and c["failed"] == 0 and c["bad_input"] == 0
    counters_balance(c)
    assert d.terminate() == 0
    det.close()


def test_forward_endpoint_shares_the_stream(daemons, tmpdir_):
    """input.forward_endpoint: a file writer connected to faid's forward PUSH socket receives every
    raw input message exactly as the detector sent it (all parts, bad messages too); faid's own
    results are unaffected. Without a consumer the forward never blocks faid: what the socket
    cannot queue is dropped and counted."""
    fport = __import__("test_daemon").free_port()
    d = daemons(lossless=True, input_extra='  forward_endpoint: "%s"\n' % ep(fport))
    writer = d.ctx.socket(zmq.PULL)
    writer.setsockopt(zmq.LINGER, 0)
    writer.connect(ep(fport))
    time.sleep(0.5)  # the writer's connection is up before the stream starts
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(2)
    sent = [ds.v1_header(4, "basic", config=ds.v1_config((ROWS, COLS), np.uint16))]
    for f in range(3):
        sent.append(ds.v1_image(4, f, rng.poisson(9, (ROWS, COLS)).astype(np.uint16),
                                "bs16-lz4<", appendix=b"a%d" % f))
    sent.append([b"garbage"])
    sent.append(ds.v1_end(4))
    for m in sent:
        det.send(m)
    rx.collect_until_end()
    got = []
    while len(got) < len(sent) and writer.poll(LONG * 1000):
        got.append(writer.recv_multipart())
    assert got == sent
    assert len(rx.of("result")) == 3
    c = d.status()["counters"]
    assert c["forwarded"] == len(sent) and c["forward_dropped"] == 0

    # The writer goes away: faid keeps reading; the forward queue fills and then drops, counted.
    writer.close()
    n = 200
    for f in range(n):
        det.send(ds.v1_image(5, f, np.zeros((ROWS, COLS), np.uint16), "<"))
    det.send(ds.v1_end(5))
    rx.collect_until_end(n_ends=2)  # cumulative: series 4 and 5
    c = d.wait_counters(lambda c: c["processed"] == 3 + n, "all frames processed")["counters"]
    assert c["forwarded"] + c["forward_dropped"] == len(sent) + n + 1
    assert c["forward_dropped"] > 0
    assert d.terminate() == 0
    det.close()


def test_v2_input_channel_selects_the_threshold(daemons, tmpdir_):
    """input.channel: threshold_2 of two-channel images is reduced (not the first listed); an
    image without that channel is a failed frame naming it."""
    d = daemons(lossless=True, input_extra="  channel: threshold_2\n")
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(8)
    chans = ["threshold_1", "threshold_2"]
    t2 = []
    det.send(ds.v2_encode(ds.v2_start(6, "T", chans, (ROWS, COLS), "uint16")))
    for i in range(3):
        fr = {c: rng.poisson(10 + 30 * k, (ROWS, COLS)).astype(np.uint16)
              for k, c in enumerate(chans)}
        t2.append(fr["threshold_2"])
        det.send(ds.v2_encode(ds.v2_image(6, "T", i, fr, "bslz4")))
    det.send(ds.v2_encode(ds.v2_image(6, "T", 3, {"threshold_1": t2[0]}, "bslz4")))
    det.send(ds.v2_encode(ds.v2_end(6, "T")))
    rx.collect_until_end()
    res = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(res) == [0, 1, 2]
    for i, ref in enumerate(reference(d, tmpdir_, "t2", np.stack(t2))):
        same_numbers(res[i], ref)
    errs = rx.of("error")
    assert len(errs) == 1 and errs[0]["frame_id"] == 3 and "threshold_2" in errs[0]["message"]
    end = rx.of("end")[0]
    assert end["frames_received"] == 4 and end["frames_failed"] == 1
    assert d.terminate() == 0
    det.close()


def test_v2_geometry_source_start(daemons, tmpdir_):
    """input.geometry_source: start: a series is reduced with the geometry its start message
    states (beam centre in pixels, distance, wavelength, pixel size), equal to faidctl process
    with that geometry configured; a start without it falls back to the configuration."""
    d = daemons(lossless=True, input_extra="  geometry_source: start\n")
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(12)
    a = [rng.poisson(20, (ROWS, COLS)).astype(np.uint16) for _ in range(2)]
    start = ds.v2_start(1, "G", ["threshold_1"], (ROWS, COLS), "uint16", beam_center_x=40.5,
                        beam_center_y=90.25, incident_wavelength=0.8, pixel_size_x=75e-6,
                        pixel_size_y=80e-6, detector_translation=[0.0, 0.0, 0.15])
    det.send(ds.v2_encode(start))
    for i, x in enumerate(a):
        det.send(ds.v2_encode(ds.v2_image(1, "G", i, {"threshold_1": x}, "bslz4")))
    det.send(ds.v2_encode(ds.v2_end(1, "G")))
    bare = ds.v2_start(2, "H", ["threshold_1"], (ROWS, COLS), "uint16")
    for k in ("beam_center_x", "beam_center_y"):
        del bare[k]
    det.send(ds.v2_encode(bare))
    det.send(ds.v2_encode(ds.v2_image(2, "H", 0, {"threshold_1": a[0]}, "bslz4")))
    det.send(ds.v2_encode(ds.v2_end(2, "H")))
    rx.collect_until_end(n_ends=2)
    s1, s2 = rx.of("start")
    assert s1["input"]["geometry_source"] == "start"
    g = s1["geometry"]
    assert g["poni1"] == pytest.approx(90.25 * 80e-6) and g["poni2"] == pytest.approx(40.5 * 75e-6)
    assert g["dist"] == pytest.approx(0.15) and g["wavelength"] == pytest.approx(0.8e-10)
    assert g["pixel1"] == pytest.approx(80e-6) and g["pixel2"] == pytest.approx(75e-6)
    assert s2["input"]["geometry_source"] == "configuration" and s2["geometry"]["dist"] == 0.1
    cfg = os.path.join(tmpdir_, "startgeo.yaml")
    with open(d.config) as f:
        text = f.read()
    text = text.replace("pixel_size: [1.0e-4, 1.0e-4]", "pixel_size: [8.0e-5, 7.5e-5]")
    text = text.replace("  dist: 0.1\n", "  dist: 0.15\n")
    text = text.replace("  poni1: 0.0061\n", "  poni1: %r\n" % (90.25 * 80e-6))
    text = text.replace("  poni2: 0.0067\n", "  poni2: %r\n" % (40.5 * 75e-6))
    text = text.replace("  wavelength: 1.0e-10\n", "  wavelength: %r\n" % (0.8 * 1e-10))
    with open(cfg, "w") as f:
        f.write(text)
    res = {(r["series_id"], r["frame_id"]): r for r in rx.of("result")}
    for i, ref in enumerate(reference(d, tmpdir_, "startgeo", np.stack(a), config=cfg)):
        same_numbers(res[(1, i)], ref)
    same_numbers(res[(2, 0)], reference(d, tmpdir_, "confgeo", a[0][None])[0])
    np.testing.assert_allclose(arr(s1["radial"]),
                               np.loadtxt(os.path.join(tmpdir_, "ref-startgeo",
                                                       "startgeo_00000.dat"))[:, 0], rtol=1e-12)
    assert d.terminate() == 0
    det.close()
