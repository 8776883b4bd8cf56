"""Series accounting through the real daemon (native protocol; the DECTRIS streams have their own
tests): a rejected image naming another series does not split the open one (issue 10, defect 6),
stale messages of a closed series are dropped and counted, a series without an end closes after
input.series_timeout, a frame without a start opens its series from the configuration, and
`faidctl sub --out` writes results that arrive after the next series' start with their own
series' setup.

Nothing asserts on time: timeouts only turn a hang into a failure. Helpers come from
test_daemon.py (same folder)."""

import os
import subprocess

import numpy as np

from test_daemon import (FAIDCTL, LONG, Receiver, Sender, arr, daemons, ep, frames,  # noqa: F401
                         header, tmpdir_)


def series_msgs(msgs, series_id):
    return [m for m in msgs if m.get("series_id") == series_id and m["type"] in ("start", "end")]


def test_rejected_image_does_not_split_series(daemons):
    """Issue 10 defect 6: start(5), frames, one image naming series 6 with a wrong shape, more
    frames of 5, end(5). Before the fix the bad image closed 5 (superseded), opened 6, and the
    next good frame re-opened 5: two starts and two ends of 5, nimages lost, end(5) after a new
    start(5)."""
    d = daemons(lossless=True)
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    imgs = frames(6)
    tx.start(series_id=5, nimages=6)
    for i in range(3):
        tx.image(i, imgs[i], series_id=5)
    bad = np.zeros((7, 9), np.uint16)
    tx.raw([header(99, 6, bad.shape, "uint16"), bad.tobytes()])
    for i in range(3, 6):
        tx.image(i, imgs[i], series_id=5)
    tx.end(series_id=5)
    msgs = rx.collect_until_end()
    kinds = [(m["type"], m.get("series_id")) for m in msgs if m["type"] in ("start", "end")]
    assert kinds == [("start", 5), ("end", 5)], kinds
    start, end = rx.of("start")[0], rx.of("end")[0]
    assert start["nimages"] == 6 and start["reason"] == "series"
    assert end["reason"] == "end" and not end["incomplete"]
    assert end["frames_received"] == 6 and end["frames_processed"] == 6, end
    assert sorted(r["frame_id"] for r in rx.of("result")) == list(range(6))
    errs = rx.of("error")
    assert len(errs) == 1 and errs[0]["series_id"] == 6 and errs[0]["frame_id"] == 99
    assert errs[0]["code"] == "FAID_ESHAPE"
    c = d.wait_counters(lambda c: c["processed"] == 6, "6 processed")["counters"]
    assert c["received"] == c["processed"] + c["failed"] + c["dropped"] == 7
    assert c["series"] == 1
    assert d.terminate() == 0


def test_rejected_image_of_open_series_counts_in_it(daemons):
    d = daemons(lossless=True)
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    imgs = frames(2)
    tx.start(series_id=8)
    tx.image(0, imgs[0], series_id=8)
    bad = np.zeros((7, 9), np.uint16)
    tx.raw([header(1, 8, bad.shape, "uint16"), bad.tobytes()])
    tx.image(2, imgs[1], series_id=8)
    tx.end(series_id=8)
    rx.collect_until_end()
    end = rx.of("end")[0]
    assert (end["frames_received"], end["frames_processed"], end["frames_failed"]) == (3, 2, 1)
    assert len(rx.of("start")) == 1
    assert d.terminate() == 0


def test_stale_messages_dropped_and_counted(daemons):
    """Series 1 aborted (end sent), series 2 started, then frames and a second end of series 1
    still arrive: they are dropped, counted (counters.stale, drops series.stale, the end's
    stale_messages), and series 2 is untouched."""
    d = daemons(lossless=True)
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    imgs = frames(4)
    tx.start(series_id=1, nimages=10)
    tx.image(0, imgs[0], series_id=1)
    tx.end(series_id=1)
    tx.start(series_id=2, nimages=3)
    tx.image(0, imgs[1], series_id=2)
    tx.image(1, imgs[2], series_id=1)  # stale
    tx.image(2, imgs[3], series_id=1)  # stale
    tx.end(series_id=1)  # stale
    tx.image(1, imgs[2], series_id=2)
    tx.image(2, imgs[3], series_id=2)
    tx.end(series_id=2)
    msgs = rx.collect_until_end(n_ends=2)
    # end(1) waits for its result, so start(2) may come before it.
    for sid in (1, 2):
        assert [m["type"] for m in series_msgs(msgs, sid)] == ["start", "end"], msgs
    e1, e2 = rx.of("end")
    assert e1["frames_received"] == e1["frames_processed"] == 1 and e1["stale_messages"] == 0
    assert e2["frames_received"] == e2["frames_processed"] == 3 and e2["stale_messages"] == 3
    got = sorted((r["series_id"], r["frame_id"]) for r in rx.of("result"))
    assert got == [(1, 0), (2, 0), (2, 1), (2, 2)]
    st = d.status()
    c = st["counters"]
    assert c["stale"] == 3 and st["drops"]["series.stale"] == 2
    assert c["received"] == 6 and c["processed"] == 4 and c["dropped"] == 2
    assert c["received"] == c["processed"] + c["failed"] + c["dropped"]
    assert st["state"] == "idle"
    assert d.terminate() == 0


def test_missing_start_and_series_timeout(daemons):
    """faid started after the arm: the first frame opens the series from the configuration
    (reason implicit); its end never comes: input.series_timeout closes it (reason timeout).
    Its late end is stale; once series 4 has started, a late frame of 3 is stale too."""
    d = daemons(lossless=True, input_extra="  series_timeout: 1.0\n")
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    imgs = frames(3)
    tx.image(0, imgs[0], series_id=3)
    tx.image(1, imgs[1], series_id=3)
    msgs = rx.collect_until_end(timeout=LONG)
    assert [(m["type"], m.get("reason")) for m in msgs if m["type"] != "result"] == [
        ("start", "implicit"), ("end", "timeout")]
    assert rx.of("start")[0]["nimages"] == -1
    assert rx.of("end")[0]["frames_processed"] == 2
    tx.end(series_id=3)
    d.wait_counters(lambda c: c["stale"] == 1, "the late end counted stale")
    assert d.status()["state"] == "idle"
    tx.start(series_id=4)
    tx.image(2, imgs[2], series_id=3)
    d.wait_counters(lambda c: c["stale"] == 2, "the late frame counted stale")
    st = d.status()
    assert st["state"] == "running" and st["series_id"] == 4
    assert st["drops"]["series.stale"] == 1
    assert d.terminate() == 0
    assert "no start message" in d.logtext()


def test_sub_out_attributes_late_results_to_their_series(daemons, tmp_path):
    """faidctl sub --out: results of series A that arrive after series B's start (frames still on
    the device) are written with A's setup: its radial column and its name, not bin numbers and
    not B."""
    d = daemons(env={"FAID_TEST_WORKER_DELAY_US": "150000"})
    out = tmp_path / "out"
    sub = subprocess.Popen([FAIDCTL, "sub", "--from", ep(d.ports["out"]), "--out", str(out),
                            "--count", "6", "--timeout", str(LONG), "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rx = Receiver(d)
    rx.settle()
    tx = Sender(d)
    imgs = frames(4)
    tx.start(series_id=1, series_unique_id="runA")
    for i in range(4):
        tx.image(i, imgs[i], series_id=1)
    tx.start(series_id=2, series_unique_id="runB")
    tx.image(0, imgs[0], series_id=2)
    tx.image(1, imgs[1], series_id=2)
    tx.end(series_id=2)
    msgs = rx.collect_until_end(n_ends=2)
    so, se = sub.communicate(timeout=LONG)
    assert sub.returncode == 0, se
    kinds = [(m["type"], m["series_id"]) for m in msgs if m["type"] in ("start", "result")]
    late = kinds.index(("start", 2)) < max(i for i, k in enumerate(kinds) if k == ("result", 1))
    assert late, "no result of series 1 came after the start of series 2: %s" % kinds
    radial = arr(rx.of("start")[0]["radial"])
    for i in range(4):
        text = (out / ("runA_%05d.dat" % i)).read_text()
        assert "# series: runA\n" in text and "# series_id: 1\n" in text
        assert "# unit: q_nm^-1\n" in text
        data = np.loadtxt(out / ("runA_%05d.dat" % i))
        np.testing.assert_allclose(data[:, 0], radial, rtol=1e-14)
    assert sorted(os.listdir(out)) == ["runA_%05d.dat" % i for i in range(4)] + [
        "runB_%05d.dat" % i for i in range(2)]
    assert d.terminate() == 0
