"""The setup of a series start, through the real daemon: reused when nothing changed, built off
the ingest thread when the detector's pixel mask changed.

DECTRIS stream v2 messages from the independent encoder of tests/reference/dectris_stream.py (cbor2,
hdf5plugin), pushed with pyzmq. Checked: consecutive series whose starts bring the same mask keep
the setup (faid's start says `input.setup` "reused", the same `setup_version`, status counts it);
a different mask builds a new setup whose version the series' results carry, with the numbers of
`faidctl process` given the OR-ed mask as a file; while a build is under way (made long with the
test hook FAID_TEST_SETUP_BUILD_DELAY_MS) faid keeps answering control and keeps reading the
series' frames, which wait for the new setup without being lost, and the queue policy still
counts what it drops. Nothing asserts on time: timeouts only turn a hang into a failure; the
stall at a series start is measured by tests/bench/series-start-bench.py."""

import os
import time

import numpy as np

from test_daemon import LONG, Receiver, daemons, tmpdir_, ROWS, COLS  # noqa: F401
from test_dectris_stream import Detector, counters_balance, reference, same_numbers, ds

CH = ["threshold_1"]


def masked_config(d, tmpdir, name, mask):
    """The daemon's configuration with detector.mask = mask (a .npy beside it)."""
    path = os.path.join(tmpdir, name + ".npy")
    np.save(path, (mask != 0).astype(np.uint8))
    cfg = os.path.join(tmpdir, name + ".yaml")
    with open(d.config) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace("detector:\n", "detector:\n  mask: %s\n" % path, 1))
    return cfg


def send_series(det, sid, uid, stack, mask):
    det.send(ds.v2_encode(ds.v2_start(sid, uid, CH, (ROWS, COLS), "uint16",
                                      masks=None if mask is None else {CH[0]: mask},
                                      compression="bslz4")))
    for i, a in enumerate(stack):
        det.send(ds.v2_encode(ds.v2_image(sid, uid, i, {CH[0]: a}, "bslz4")))
    det.send(ds.v2_encode(ds.v2_end(sid, uid)))


def test_same_mask_reuses_setup_other_mask_rebuilds(daemons, tmpdir_):
    d = daemons(lossless=True)
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(11)
    m1 = np.zeros((ROWS, COLS), np.uint32)
    m1.flat[rng.choice(ROWS * COLS, 300, replace=False)] = 1
    m2 = m1.copy()
    m2[40:44, :] = 8  # one more row band: a different mask of the same shape
    mk = lambda: rng.poisson(40, (ROWS, COLS)).astype(np.uint16)
    stacks = {1: [mk() for _ in range(3)], 2: [mk() for _ in range(3)],
              3: [mk() for _ in range(3)]}
    send_series(det, 1, "A", stacks[1], m1)
    send_series(det, 2, "B", stacks[2], m1.copy())
    send_series(det, 3, "C", stacks[3], m2)
    rx.collect_until_end(n_ends=3)

    st = {s["series_id"]: s for s in rx.of("start")}
    assert sorted(st) == [1, 2, 3]
    assert st[1]["input"]["setup"] == "rebuilt"
    assert st[2]["input"]["setup"] == "reused"
    assert st[2]["input"]["setup_build_ms"] == 0
    assert st[2]["setup_version"] == st[1]["setup_version"]
    assert st[3]["input"]["setup"] == "rebuilt"
    assert st[3]["setup_version"] > st[1]["setup_version"]
    assert st[3]["input"]["detector_masked_pixels"] == int((m2 != 0).sum())
    c = d.status()["counters"]
    assert c["setups_reused"] == 1 and c["setups_rebuilt"] == 2, c
    assert "setup reused" in d.logtext()

    res = {(r["series_id"], r["frame_id"]): r for r in rx.of("result")}
    assert sorted(res) == [(s, i) for s in (1, 2, 3) for i in range(3)]
    cfgs = {1: masked_config(d, tmpdir_, "m1", m1), 3: masked_config(d, tmpdir_, "m2", m2)}
    cfgs[2] = cfgs[1]
    for sid in (1, 2, 3):
        refs = reference(d, tmpdir_, "s%d" % sid, np.stack(stacks[sid]), config=cfgs[sid])
        for i, ref in enumerate(refs):
            assert res[(sid, i)]["setup_version"] == st[sid]["setup_version"]
            same_numbers(res[(sid, i)], ref)
    counters_balance(d.status()["counters"])
    assert d.terminate() == 0
    det.close()


def test_ingest_and_control_go_on_during_a_build(daemons, tmpdir_):
    """A build made to last 3 s: before it ends, ingest has read every frame of the series (the
    queue holds them), control answers, and no result and no start of the series has come out;
    after it, every frame is reduced with the new setup."""
    d = daemons(lossless=True, depth=8, env={"FAID_TEST_SETUP_BUILD_DELAY_MS": "3000"})
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(12)
    mask = np.zeros((ROWS, COLS), np.uint32)
    mask[:, 60:64] = 1
    stack = [rng.poisson(40, (ROWS, COLS)).astype(np.uint16) for _ in range(5)]
    send_series(det, 1, "D", stack, mask)
    t_end = time.monotonic() + LONG
    while True:
        assert time.monotonic() < t_end, "ingest never read the frames"
        c = d.status()["counters"]  # control answers during the build
        if c["received"] == len(stack):
            break
        time.sleep(0.05)
    assert d.request({"cmd": "ping"})["ok"]
    # Still building: the series' start and results wait for the new setup (3 s).
    assert c["processed"] == 0 and not rx.of("start") and not rx.of("result"), c
    rx.collect_until_end(n_ends=1)
    (st,) = rx.of("start")
    assert st["input"]["setup"] == "rebuilt" and st["input"]["setup_build_ms"] >= 3000
    res = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(res) == list(range(len(stack)))
    refs = reference(d, tmpdir_, "built", np.stack(stack),
                     config=masked_config(d, tmpdir_, "mb", mask))
    for i, ref in enumerate(refs):
        assert res[i]["setup_version"] == st["setup_version"]
        same_numbers(res[i], ref)
    assert d.terminate() == 0
    det.close()


def test_queue_policy_applies_during_a_build(daemons, tmpdir_):
    """drop_newest with a queue of 4 while the frames wait for a 3 s build: frames beyond what
    the queue (and the worker waiting with one) holds are dropped and counted, in the series' end
    too; the rest are reduced with the new setup."""
    d = daemons(lossless=True, depth=4, policy="drop_newest",
                env={"FAID_TEST_SETUP_BUILD_DELAY_MS": "3000"})
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    rng = np.random.default_rng(13)
    mask = np.zeros((ROWS, COLS), np.uint32)
    mask[10, :] = 1
    stack = [rng.poisson(40, (ROWS, COLS)).astype(np.uint16) for _ in range(12)]
    send_series(det, 1, "E", stack, mask)
    rx.collect_until_end(n_ends=1)
    st_all = d.wait_counters(lambda c: c["received"] == len(stack) and
                             c["processed"] + c["dropped"] == len(stack), "every frame accounted")
    counters_balance(st_all["counters"])
    assert st_all["drops"]["queue.newest"] > 0, st_all["drops"]
    (st,) = rx.of("start")
    res = rx.of("result")
    assert len(res) == st_all["counters"]["processed"]
    assert all(r["setup_version"] == st["setup_version"] for r in res)
    (end,) = rx.of("end")
    assert end["frames_received"] == len(stack) and not end["incomplete"], end
    assert end["frames_dropped"] == st_all["drops"]["queue.newest"], end
    assert end["frames_processed"] == len(res), end
    assert d.terminate() == 0
    det.close()
