"""Outputs the stages declare (engine/faid_outputs.h) reach a result of the real daemon under
their key: `sum_normalization` (the integrate stage's per-bin sum of the normalization, which with
`I` lets a client merge frames exactly), an optional output that `output.extra` turns on, on the
OpenCL device equals what the C reference device gives for the same frames, and sits on the wire
where its key table row puts it; without the option results do not carry it, and a key that is
no optional output stops the daemon at start with a message naming it."""

import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_daemon import (FAID, LONG, Receiver, Sender, arr, config_text, daemons,  # noqa: E402,F401
                         frames, free_port, tmpdir_)

EXTRA = "  extra: [sum_normalization]\n"


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
    dev = results_of(daemons(devices="cpu", npt=40, output_extra=EXTRA), imgs)
    ref = results_of(daemons(devices="ref", npt=40, output_extra=EXTRA), imgs)
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


def test_optional_output_off_by_default(daemons):
    got = results_of(daemons(devices="ref", npt=40), frames(2, seed=12))
    assert sorted(got) == [0, 1]
    for r in got.values():
        assert "sum_normalization" not in r and "count" in r, sorted(r)


def test_extra_key_not_optional_is_a_config_error(tmpdir_):
    ports = {k: free_port() for k in ("in", "out", "lossless", "ctl")}
    for key, says in (("count", "'count' is not an optional output (the optional ones: "
                                "sum_normalization)"),
                      ("no_such_key", "'no_such_key' is not an array key of the result message")):
        path = os.path.join(tmpdir_, "bad-%s.yaml" % key)
        with open(path, "w") as f:
            f.write(config_text(ports, devices="ref", output_extra="  extra: [%s]\n" % key))
        p = subprocess.run([FAID, "-c", path], capture_output=True, text=True, timeout=LONG)
        assert p.returncode != 0
        assert "output.extra" in p.stderr + p.stdout and says in p.stderr + p.stdout, p.stderr
