"""faid.bluesky (issue 19): the ophyd-async device driven by a real bluesky RunEngine against
the real daemon (no EPICS): a plan records faid's counters, hit rate and latest profile with
the scan; unstage waits until the series is reduced; stage points the writer at the scan's
files (skipped only while the daemon has no control command `writer`)."""

import os
import sys

import numpy as np
import pytest

from test_daemon import LONG, Receiver, Sender, daemons, ep, frames, tmpdir_  # noqa: F401
from test_peaks import PEAKS, spot_frames

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
sys.path.insert(0, os.path.join(SRC, "client", "python"))

pytest.importorskip("ophyd_async", reason="extra `bluesky` of client/python not installed")
from bluesky import RunEngine  # noqa: E402
from bluesky import plan_stubs as bps  # noqa: E402
from bluesky import preprocessors as bpp  # noqa: E402
from ophyd_async.core import (StaticFilenameProvider, StaticPathProvider,  # noqa: E402
                              init_devices)

from faid import Control, FaidError  # noqa: E402
from faid.bluesky import FaidDetector  # noqa: E402


@pytest.fixture
def RE():
    re = RunEngine({})
    yield re
    re.loop.call_soon_threadsafe(re.loop.stop)  # the RunEngine's event-loop thread


def detector(d, **kw):
    with init_devices():
        det = FaidDetector(ep(d.ports["ctl"]), ep(d.ports["out"]), timeout=LONG,
                           unstage_timeout=LONG, **kw)
    return det  # named "det" by init_devices


def send(d, imgs, series_id):
    tx = Sender(d)
    tx.start(series_id=series_id, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=series_id)
    tx.end(series_id=series_id)


def test_plan_records_counters_hit_rate_and_profile(daemons, RE):
    d = daemons(devices="ref", extra=PEAKS)
    rx = Receiver(d)
    rx.settle()
    det = detector(d)
    imgs, _ = spot_frames(6)
    docs = []
    RE.subscribe(lambda name, doc: docs.append((name, doc)))

    @bpp.stage_decorator([det])
    @bpp.run_decorator(md={"plan_name": "faid_series"})
    def plan():
        send(d, imgs, series_id=11)
        for _ in range(LONG * 10):  # read until faid has reduced the series and said so
            yield from bps.trigger_and_read([det])
            done = (yield from bps.rd(det.processed)) == len(imgs)
            if done and (yield from bps.rd(det.hit_rate)) == 0.5:
                break
            yield from bps.sleep(0.1)

    RE(plan())
    rx.collect_until_end()
    names = [n for n, _ in docs]
    assert names[0] == "start" and names[-1] == "stop" and "descriptor" in names
    assert docs[-1][1]["exit_status"] == "success"
    desc = [doc for n, doc in docs if n == "descriptor"][0]
    events = [doc for n, doc in docs if n == "event"]
    last = events[-1]["data"]
    assert last["det-processed"] == 6 and last["det-received"] == 6 and last["det-failed"] == 0
    # peakfinder8 finds the even frames' spots: hits 0, 2, 4; the window of 4 holds 2 and 4.
    assert last["det-hit_rate"] == 0.5 and last["det-series_id"] == 11
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert last["det-frame_id"] == 5
    want = np.frombuffer(results[5]["I"]["data"], "<f4")
    assert np.array_equal(np.asarray(last["det-profile"], np.float32), want)
    start = rx.of("start")[0]
    assert np.array_equal(np.asarray(last["det-radial"]),
                          np.frombuffer(start["radial"]["data"], "<f8"))
    assert desc["data_keys"]["det-profile"]["shape"] == [want.size]
    conf = desc["configuration"]["det"]["data"]
    assert conf["det-config_hash"] == start["config_hash"] and conf["det-unit"] == "q_nm^-1"
    assert set(desc["hints"]["det"]["fields"]) == {"det-processed", "det-fps", "det-hit_rate"}


def test_unstage_waits_for_the_series_to_be_reduced(daemons, RE):
    # 20 ms a frame in the worker: the series takes 0.6 s to reduce after it has been sent.
    d = daemons(env={"FAID_TEST_WORKER_DELAY_US": "20000"})
    det = detector(d)
    n = 30

    @bpp.stage_decorator([det])
    @bpp.run_decorator()
    def plan():
        send(d, frames(3) * (n // 3), series_id=4)
        yield from bps.trigger_and_read([det])

    RE(plan())
    st = d.status()
    assert st["state"] == "idle" and st["counters"]["processed"] == n, st["counters"]


def test_stage_points_the_writer_at_the_scan(daemons, RE, tmp_path):
    scan = tmp_path / "scan"
    scan.mkdir()
    # The writer thread is held 1.5 s at the series' start: the series is reduced long before
    # its file is written, and unstage must wait for the file all the same (CI on 2 cores saw
    # the file still open when unstage returned).
    d = daemons(extra="writer:\n  directory: %s\n" % tmp_path,
                env={"FAID_TEST_WRITER_START_DELAY_MS": "1500"})
    try:
        Control(ep(d.ports["ctl"]), timeout=LONG).writer()
    except FaidError as e:
        pytest.skip("this daemon has no control command `writer` yet: %s" % e)
    det = detector(d, path_provider=StaticPathProvider(StaticFilenameProvider("scan42"), scan))

    @bpp.stage_decorator([det])
    @bpp.run_decorator()
    def plan():
        send(d, frames(3), series_id=8)
        yield from bps.trigger_and_read([det])

    RE(plan())
    files = sorted(os.listdir(scan))
    assert files and all(f.startswith("scan42") for f in files), files
    assert d.status()["writer"]["files_written"] >= 1


def test_fly_scan_stream_resources_point_into_the_writer_files(daemons, RE, tmp_path):
    import h5py

    out = tmp_path / "files"
    out.mkdir()
    d = daemons(extra="writer:\n  directory: %s\n" % out)
    rx = Receiver(d)
    rx.settle()
    det = detector(d)
    docs = []
    RE.subscribe(lambda name, doc: docs.append((name, doc)))
    imgs = frames(3) * 2

    @bpp.stage_decorator([det])
    @bpp.run_decorator()
    def plan():
        yield from bps.declare_stream(det, name="faid", collect=True)
        yield from bps.kickoff(det, wait=True)
        send(d, imgs, series_id=9)
        yield from bps.complete(det, wait=True)
        yield from bps.collect(det, name="faid")

    RE(plan())
    rx.collect_until_end()
    assert docs[-1][1]["exit_status"] == "success", docs[-1]
    desc = [doc for n, doc in docs if n == "descriptor"][0]
    assert desc["name"] == "faid" and desc["data_keys"]["det-I"]["external"] == "STREAM:"
    res = [doc for n, doc in docs if n == "stream_resource"]
    datums = [doc for n, doc in docs if n == "stream_datum"]
    assert len(res) == 1 and len(datums) == 1
    assert res[0]["data_key"] == "det-I" and res[0]["mimetype"] == "application/x-hdf5"
    assert res[0]["parameters"]["dataset"] == "/entry/data/I"
    assert datums[0]["indices"] == {"start": 0, "stop": len(imgs)}
    assert datums[0]["seq_nums"] == {"start": 1, "stop": len(imgs) + 1}
    path = res[0]["uri"][len("file://localhost"):]
    assert os.path.dirname(path) == str(out)
    # What the documents point at is what faid published: the rows of the file are the results.
    results = {r["frame_id"]: r for r in rx.of("result")}
    with h5py.File(path, "r") as f:
        rows = f[res[0]["parameters"]["dataset"]][()]
        ids = f["entry/data/frame_id"][()]
    assert rows.shape == (len(imgs), 64)
    for row, fid in zip(rows, ids):
        assert np.array_equal(row, np.frombuffer(results[int(fid)]["I"]["data"], "<f4"))
