"""Outputs the stages declare (engine/faid_outputs.h) reach a result of the real daemon under
their key: `sum_normalization` (the integrate stage's per-bin sum of the normalization, which with
`I` lets a client merge frames exactly) on the OpenCL device equals what the C reference device
gives for the same frames, and sits on the wire where its key table row puts it."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_daemon import Receiver, Sender, arr, daemons, frames, tmpdir_  # noqa: E402,F401


def results_of(d, imgs):
    rx = Receiver(d)
    rx.settle()
    tx = Sender(d)
    tx.start(series_id=3, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=3)
    tx.end(series_id=3)
    rx.collect_until_end()
    return {r["frame_id"]: r for r in rx.of("result")}


def test_sum_normalization_matches_reference(daemons):
    imgs = frames(3, seed=11)
    dev = results_of(daemons(devices="cpu", npt=40), imgs)
    ref = results_of(daemons(devices="ref", npt=40), imgs)
    assert sorted(dev) == sorted(ref) == [0, 1, 2]
    for i in range(3):
        assert "sum_normalization" in dev[i], sorted(dev[i])
        got, want = arr(dev[i]["sum_normalization"]), arr(ref[i]["sum_normalization"])
        assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == (40,)
        # the device sums in compensated float32, the reference in float64 (docs/ARCHITECTURE.md)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
        assert np.all(want[arr(ref[i]["count"]) > 0] > 0)
        # the key table's order: after the 1D profile, before the timings
        keys = list(dev[i])
        assert keys.index("count") < keys.index("sum_normalization") < keys.index("received_ns")
