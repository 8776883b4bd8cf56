"""pipeline.collect_thread (issue 17, speed round 5): a collect thread per device beside its worker,
through the real daemon on loopback (PoCL's CPU device and the reference device).

The worker pops, copies and submits frames; the collect thread waits for the oldest frame in
flight, encodes its result and hands it on. Checked, each with the thread on: every frame is
answered once, in reception order (the lossless stream's results, as published), with the bits of
`faidctl process` (= the serial worker's) for batches of 1 and 2, partial batches (a frame of
another dtype closes a slot; the test delay hook keeps frames in flight), peaks on (the result's
peaks and background equal those of a serial daemon on the same frames); the frame accounting
stays exact under overload (drop_oldest: every drop counted, received = processed + dropped); a
reload between two series while frames of the first are in flight and a new mask mid-stream
(a setup built while frames are in flight), each series with its own setup's bits; a stop with frames in flight (every frame received is answered before the end).
A collect thread that lost, repeated or reordered a frame fails the order and count assertions.
Timeouts only turn hangs into failures."""

import os
import sys
import time
import types

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_daemon as td  # noqa: E402
from test_daemon import (LONG, Receiver, Sender, arr, assert_profile_bits, frames,  # noqa: E402
                         process_refs, tmpdir_)  # noqa: F401

daemons = td.daemons


def pipeline(inflight=4, batch=1, collect=True, launch="eager", **more):
    text = "pipeline:\n  inflight: %d\n  batch: %d\n  collect_thread: %s\n" % (
        inflight, batch, "true" if collect else "false")
    text += "  collect_launch: %s\n" % launch
    return text + "".join("  %s: %s\n" % kv for kv in more.items())


def send_series(tx, sid, imgs, pause_every=0, **kw):
    tx.start(series_id=sid, nimages=len(imgs), **kw)
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=sid)
        if pause_every and i % pause_every == pause_every - 1:
            time.sleep(0.02)
    tx.end(series_id=sid)


def in_order(rx, sid=None):
    """The frame ids of the published results (of series sid), in publication order."""
    return [r["frame_id"] for r in rx.of("result") if sid is None or r["series_id"] == sid]


@pytest.mark.parametrize("device,batch,launch", [("cpu", 1, "eager"), ("cpu", 2, "eager"),
                                                 ("ref", 2, "eager"), ("cpu", 2, "fill")])
def test_same_bits_in_order(daemons, tmpdir_, device, batch, launch):
    """Frames sent a few at a time, some while others are in flight: each answered once, in
    reception order, with the bits `faidctl process` gives (the serial worker's); the
    configuration says the thread is on and it runs beside the worker (faid-collect0)."""
    d = daemons(devices=device, lossless=True, extra=pipeline(batch=batch, launch=launch))
    assert d.request({"cmd": "config"})["config"].count("collect_thread: true") == 1
    names = td.thread_names(d)
    assert {"faid-worker0", "faid-collect0"} <= names, names
    rx = Receiver(d, lossless=True)
    rx.settle()
    imgs = frames(11, seed=21)
    send_series(Sender(d), 6, imgs, pause_every=3)
    rx.collect_until_end()
    assert in_order(rx) == list(range(len(imgs)))
    results = {r["frame_id"]: r for r in rx.of("result")}
    for i, ref in enumerate(process_refs(d, os.path.join(tmpdir_, "p"), imgs, device)):
        assert_profile_bits(results[i], ref)
    st = d.status()
    c = st["counters"]
    assert c["received"] == c["processed"] == len(imgs) and c["failed"] == 0, c
    dev = st["devices"][0]
    assert dev["processed"] == len(imgs)
    # submit_us: the worker's own time; wait_us + encode_us: the collect thread's
    assert dev["submit_us"] > 0 and dev["wait_us"] > 0 and dev["encode_us"] > 0, dev
    assert d.terminate() == 0


@pytest.mark.parametrize("launch", ["eager", "fill"])
def test_partial_batches_in_order(daemons, tmpdir_, launch):
    """pipeline.batch 2 on the reference device, held 0.2 s after each collect: frames 0 and 3 are
    uint32, the others uint16, so slots close early for another dtype and partial batches stand
    behind frames in flight: launched by the worker when it has no frame at hand (collect_launch
    eager) or by the collect thread when it reaches them (fill). Every frame answered once, in
    order, with the bits of `faidctl process` (of each dtype's frames)."""
    d = daemons(devices="ref", lossless=True, env={"FAID_TEST_WORKER_DELAY_US": "200000"},
                extra=pipeline(inflight=4, batch=2, launch=launch))
    rx = Receiver(d, lossless=True)
    rx.settle()
    wide = frames(2, seed=5, dtype=np.uint32)
    narrow = frames(4, seed=6)
    imgs = [wide[0], narrow[0], narrow[1], wide[1], narrow[2], narrow[3]]
    send_series(Sender(d), 3, imgs)
    rx.collect_until_end()
    assert in_order(rx) == list(range(len(imgs)))
    results = {r["frame_id"]: r for r in rx.of("result")}
    refs = {}
    for name, idx in (("w", [0, 3]), ("n", [1, 2, 4, 5])):
        for k, ref in zip(idx, process_refs(d, os.path.join(tmpdir_, name),
                                            [imgs[i] for i in idx], "ref", name)):
            refs[k] = ref
    for i in range(len(imgs)):
        assert_profile_bits(results[i], refs[i])
    st = d.status()
    c = st["counters"]
    assert c["received"] == c["processed"] == len(imgs), c
    if launch == "fill":  # only the collect thread launches partial batches
        assert st["devices"][0]["early_launches"] == 0, st["devices"]
    assert d.terminate() == 0


def test_overload_accounting_exact(daemons):
    """drop_oldest, a queue of 4, a device held 30 ms a frame, 40 frames at once: frames are
    dropped and every one is counted; the results that come out are distinct, in increasing
    order, and received = processed + dropped in the end and in status."""
    d = daemons(policy="drop_oldest", depth=4, lossless=True,
                env={"FAID_TEST_WORKER_DELAY_US": "30000"}, extra=pipeline(inflight=4))
    rx = Receiver(d, lossless=True)
    rx.settle()
    imgs = frames(2)
    n = 40
    tx = Sender(d)
    tx.start(series_id=3)
    for i in range(n):
        tx.image(i, imgs[i % 2], series_id=3)
    tx.end(series_id=3)
    rx.collect_until_end()
    end = rx.of("end")[0]
    ids = in_order(rx)
    assert end["frames_received"] == n
    assert end["frames_dropped"] > 0 and end["frames_failed"] == 0
    assert end["frames_received"] == end["frames_processed"] + end["frames_dropped"]
    assert len(ids) == end["frames_processed"] and ids == sorted(set(ids)), ids
    assert n - 1 in ids  # the newest frame is never evicted
    st = d.status()
    c = st["counters"]
    assert c["received"] == c["processed"] + c["dropped"] and c["processed"] == len(ids), c
    assert st["drops"]["queue.oldest"] == end["frames_dropped"]
    assert d.terminate() == 0


def test_reload_between_series_with_frames_in_flight(daemons, tmpdir_):
    """Series 1 (npt 64) sent and read while the device is held 30 ms a frame, then a reload to
    npt 48, then series 2: the worker drains series 1's frames (old setup) through the collect
    thread before it moves to the new engine. Every frame of both answered once, in order, each
    with the bits of `faidctl process` on its own setup."""
    d = daemons(lossless=True, env={"FAID_TEST_WORKER_DELAY_US": "30000"},
                extra=pipeline(inflight=4, batch=2))
    rx = Receiver(d, lossless=True)
    rx.settle()
    tx = Sender(d)
    one, two = frames(8, seed=31), frames(6, seed=32)
    send_series(tx, 1, one)
    d.wait_counters(lambda c: c["received"] == len(one), "series 1 read")
    new_cfg = os.path.join(tmpdir_, "npt48.yaml")
    with open(d.config) as f:
        text = f.read()
    with open(new_cfg, "w") as f:
        f.write(text.replace("  npt: 64\n", "  npt: 48\n"))
    r = d.request({"cmd": "reload", "path": new_cfg})
    assert r["ok"], r
    send_series(tx, 2, two)
    rx.collect_until_end(n_ends=2)
    assert [(r["series_id"], r["frame_id"]) for r in rx.of("result")] == \
        [(1, i) for i in range(len(one))] + [(2, i) for i in range(len(two))]
    res = {(r["series_id"], r["frame_id"]): r for r in rx.of("result")}
    v1, v2 = res[(1, 0)]["setup_version"], res[(2, 0)]["setup_version"]
    assert v2 > v1
    old = process_refs(d, os.path.join(tmpdir_, "s1"), one, "cpu")
    new = process_refs(types.SimpleNamespace(config=new_cfg), os.path.join(tmpdir_, "s2"), two,
                       "cpu")
    for i, ref in enumerate(old):
        assert res[(1, i)]["setup_version"] == v1 and arr(res[(1, i)]["I"]).shape == (64,)
        assert_profile_bits(res[(1, i)], ref)
    for i, ref in enumerate(new):
        assert res[(2, i)]["setup_version"] == v2 and arr(res[(2, i)]["I"]).shape == (48,)
        assert_profile_bits(res[(2, i)], ref)
    c = d.status()["counters"]
    assert c["received"] == c["processed"] == len(one) + len(two), c
    assert d.terminate() == 0


def test_new_mask_mid_stream_with_frames_in_flight(daemons, tmpdir_):
    """DECTRIS stream v2: series 1 with mask m1, then at once series 2 with another mask, each
    needing a setup built off the ingest thread (made to last 0.5 s), the device held 30 ms a
    frame (batch 2): series 2's frames reach the worker while series 1's are in flight and wait
    for their build, the collect thread answering series 1 first. Both series complete, in
    order, each frame with the numbers of `faidctl process` given its own mask."""
    from test_dectris_stream import Detector, counters_balance, reference, same_numbers
    from test_series_setup import masked_config, send_series as send_v2
    d = daemons(lossless=True, depth=16, extra=pipeline(inflight=4, batch=2),
                env={"FAID_TEST_WORKER_DELAY_US": "30000", "FAID_TEST_SETUP_BUILD_DELAY_MS": "500"})
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(14)
    m1 = np.zeros((td.ROWS, td.COLS), np.uint32)
    m1.flat[rng.choice(td.ROWS * td.COLS, 200, replace=False)] = 1
    m2 = m1.copy()
    m2[10:14, :] = 2
    stacks = {sid: [rng.poisson(40, (td.ROWS, td.COLS)).astype(np.uint16) for _ in range(6)]
              for sid in (1, 2)}
    send_v2(det, 1, "M1", stacks[1], m1)
    send_v2(det, 2, "M2", stacks[2], m2)
    rx.collect_until_end(n_ends=2)
    st = {s["series_id"]: s for s in rx.of("start")}
    assert st[1]["input"]["setup"] == st[2]["input"]["setup"] == "rebuilt"
    assert st[2]["setup_version"] > st[1]["setup_version"]
    assert [(r["series_id"], r["frame_id"]) for r in rx.of("result")] == \
        [(sid, i) for sid in (1, 2) for i in range(6)]
    res = {(r["series_id"], r["frame_id"]): r for r in rx.of("result")}
    for sid, mask in ((1, m1), (2, m2)):
        cfg = masked_config(d, tmpdir_, "m%d" % sid, mask)
        for i, ref in enumerate(reference(d, tmpdir_, "s%d" % sid, np.stack(stacks[sid]),
                                          config=cfg)):
            assert res[(sid, i)]["setup_version"] == st[sid]["setup_version"]
            same_numbers(res[(sid, i)], ref)
    c = d.status()["counters"]
    counters_balance(c)
    assert c["processed"] == 12, c
    assert d.terminate() == 0
    det.close()


@pytest.mark.parametrize("launch", ["eager", "fill"])
def test_stop_with_frames_in_flight_answers_them(daemons, launch):
    """SIGTERM while frames are queued and in flight (device held 20 ms a frame, batch 2): every
    frame received is answered before the end, once, in order, with no gap in the lossless
    stream; the end is complete and its counts add up."""
    d = daemons(lossless=True, env={"FAID_TEST_WORKER_DELAY_US": "20000"},
                extra=pipeline(inflight=4, batch=2, launch=launch))
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    imgs = frames(3)
    tx.start(series_id=5)
    for i in range(60):
        tx.image(i, imgs[i % 3], series_id=5)
    d.wait_counters(lambda c: c["processed"] >= 3, "some frames processed")
    assert d.terminate() == 0
    msgs = rx.collect_until_end(timeout=30)
    end = rx.of("end")[0]
    ids = in_order(rx)
    assert end["reason"] == "shutdown" and not end["incomplete"]
    assert end["frames_received"] >= 3
    assert end["frames_failed"] == 0 and end["frames_dropped"] == 0
    assert end["frames_received"] == end["frames_processed"] == len(ids)
    assert ids == list(range(len(ids)))
    nums = [m["msg_number"] for m in msgs]
    assert nums == list(range(len(nums))), "lossless stream must have no gaps"


PEAKS = """peaks:
  algorithm: peakfinder8
  adc_threshold: 60
  minimum_snr: 5
  min_pixel_count: 2
  local_bg_radius: 3
  min_peaks_for_hit: 5
"""
PEAK_KEYS = ("I", "sigma", "std", "count", "bg_I", "bg_sigma", "bg_std", "bg_count", "peak_x",
             "peak_y", "peak_intensity", "peak_sigma", "peak_snr", "peak_npix", "peak_max_pixel")


@pytest.mark.parametrize("device", ["cpu", "ref"])
def test_peaks_same_as_serial(daemons, device):
    """Peaks on (peakfinder8), batch 2: a daemon with the collect thread and one without, the
    same frames (spots on even frames): the same results in the same order, every profile,
    background and peak array bit for bit, the same hit decisions and the same hit count."""
    from test_peaks import spot_frames
    imgs, truth = spot_frames(8, seed=4)
    out = {}
    for collect in (False, True):
        d = daemons(devices=device, npt=48, lossless=True,
                    extra=PEAKS + pipeline(inflight=4, batch=2, collect=collect))
        rx = Receiver(d, lossless=True)
        rx.settle()
        send_series(Sender(d), 9, imgs, pause_every=3)
        rx.collect_until_end()
        assert in_order(rx) == list(range(len(imgs)))
        out[collect] = (rx.of("result"), d.status()["counters"])
        assert d.terminate() == 0
    (serial, cs), (threaded, ct) = out[False], out[True]
    assert sum(1 for t in truth if t) == sum(r["is_hit"] for r in threaded) > 0
    for a, b in zip(serial, threaded):
        assert a["frame_id"] == b["frame_id"]
        assert (a["num_peaks"], a["is_hit"]) == (b["num_peaks"], b["is_hit"])
        for k in PEAK_KEYS:
            assert np.array_equal(arr(a[k]).view(np.uint32), arr(b[k]).view(np.uint32)), k
    assert ct["processed"] == cs["processed"] == len(imgs)
