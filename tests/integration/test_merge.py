"""Several faid instances reducing one series (issue 18): the identity stamps (instance, shard,
shards) in start, result and end, and the merged view of `faidctl sub --from A --from B ...`
(proto/PROTOCOL.md, "Several instances"). The daemons are real, on loopback; each is fed its
own disjoint frames of one series by the test's own senders, as a fan-out would."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_daemon as td  # noqa: E402
from shards import (captured_series, dat_columns, instance_cfg, kill_last_mid_series,  # noqa: E402
                    peer_pub, read_until_start, replay, second_stalls, send_dealt, send_part,
                    sub_lines, sub_proc, three)
from test_daemon import Receiver, Sender, daemons, frames, tmpdir_  # noqa: E402,F401


def test_two_daemons_stamp_their_shard(daemons):
    """Each daemon stamps its own instance.* options into start, every result and end, and
    status says the same; a daemon without the options stamps <host>:<control port>, 0 of 1."""
    ds = [daemons(devices="ref", extra=instance_cfg("alpha", 0, 2)),
          daemons(devices="ref", extra=instance_cfg("beta", 1, 2)),
          daemons(devices="ref")]
    rxs = [Receiver(d) for d in ds]
    rxs[0].settle()
    imgs = frames(3)
    for k, d in enumerate(ds):
        send_part(d, range(k, len(imgs), 2), imgs, 7)
    want = [("alpha", 0, 2), ("beta", 1, 2), (None, 0, 1)]
    for d, rx, (name, shard, shards) in zip(ds, rxs, want):
        msgs = rx.collect_until_end()
        kinds = [m["type"] for m in msgs]
        assert "start" in kinds and "result" in kinds and "end" in kinds, kinds
        if name is None:
            name = msgs[0]["instance"]
            assert name.endswith(":%d" % d.ports["ctl"]), name
        for m in msgs:
            if m["type"] in ("start", "result", "end"):
                assert (m["instance"], m["shard"], m["shards"]) == (name, shard, shards), m["type"]
        st = d.status()
        assert (st["instance"], st["shard"], st["shards"]) == (name, shard, shards)


def test_shard_not_below_shards_is_refused(daemons, tmpdir_):
    """instance.shard must be below instance.shards: the daemon refuses to start, naming it."""
    import subprocess

    cfg = os.path.join(tmpdir_, "bad.yaml")
    ports = {k: td.free_port() for k in ("in", "out", "ctl")}
    with open(cfg, "w") as f:
        f.write(td.config_text(ports, devices="ref", extra=instance_cfg("x", 3, 3)))
    r = subprocess.run([td.FAID, "-c", cfg], capture_output=True, text=True, timeout=td.LONG)
    assert r.returncode != 0
    assert "instance.shard" in r.stderr and "below instance.shards" in r.stderr, r.stderr


# ---- the merged subscriber -------------------------------------------------------------------

def test_merged_sub_three_instances(daemons, tmpdir_):
    """Three daemons (shards 0, 1, 2 of 3) each reduce their own frames (frame % 3) of one
    series: the merged `faidctl sub` gives the start once, every frame once and in frame order,
    one end with the summed totals and nothing missing, and each profile equal to `faidctl
    process` on the same frame."""
    import subprocess

    ds = three(daemons)
    out = os.path.join(tmpdir_, "sub")
    p = sub_proc(ds, out)
    Receiver(ds[0]).settle()  # the subscriptions reach the PUB sockets
    n = 12
    imgs = frames(n, seed=3)
    send_dealt(ds, imgs, 5, nimages=n)
    lines, text, err = sub_lines(p)
    kinds = [m["type"] for m in lines if m["type"] in ("start", "result", "end")]
    assert kinds.count("start") == 1 and kinds[0] == "start", kinds
    assert kinds.count("end") == 1 and kinds[-1] == "end", kinds
    results = [m for m in lines if m["type"] == "result"]
    assert [r["frame_id"] for r in results] == list(range(n))
    assert {(r["frame_id"] % 3, r["shard"], r["shards"]) for r in results} == \
        {(k, k, 3) for k in range(3)}
    end = [m for m in lines if m["type"] == "end"][0]
    assert end["merged"] and end["instances"] == 3 and end["ended"] == 3, end
    assert end["frames_received"] == n and end["frames_processed"] == n, end
    assert end["missing"] == 0 and end["missing_frames"] == [] and not end["incomplete"], end
    assert end["late"] == 0 and end["duplicates"] == 0 and end["delivered"] == n, end

    # The same frames through faidctl process, frame by frame equal.
    ref = os.path.join(tmpdir_, "proc")
    os.makedirs(ref)
    np.save(os.path.join(ref, "all.npy"), np.stack(imgs))
    r = subprocess.run([td.FAIDCTL, "process", "-c", ds[0].config, "--device", "ref", "-o", ref,
                        os.path.join(ref, "all.npy")], capture_output=True, text=True,
                       timeout=td.LONG)
    assert r.returncode == 0, r.stderr
    for i in range(n):
        got = dat_columns(os.path.join(out, "series5_%05d.dat" % i))
        want = dat_columns(os.path.join(ref, "all_%05d.dat" % i))
        assert np.array_equal(got, want), i


def test_merged_sub_instance_killed(daemons, tmpdir_):
    """One of three instances is killed (SIGKILL) mid-series: the merged end comes once the
    others ended and the dead one fell silent, with its frames never reduced listed by id; every
    frame that was reduced is delivered once."""
    ds = three(daemons)
    p = sub_proc(ds, None, "--dead-after", "1.5")
    Receiver(ds[0]).settle()
    n = 18
    imgs = frames(n, seed=4)
    first, never = kill_last_mid_series(ds, imgs, 9)
    lines, text, err = sub_lines(p)
    results = [m["frame_id"] for m in lines if m["type"] == "result"]
    assert sorted(results) == sorted(set(range(n)) - set(never)), results
    assert len(results) == len(set(results))
    end = [m for m in lines if m["type"] == "end"]
    assert len(end) == 1, end
    end = end[0]
    assert end["instances"] == 3 and end["ended"] == 2 and end["silent"] == 1, end
    assert end["incomplete"] and end["missing"] == len(never), end
    listed = [i for a, b in end["missing_frames"] for i in range(a, b + 1)]
    assert listed == never, end
    assert end["frames_processed"] == n - len(never) - len(first), end  # the two that ended


def test_merged_sub_hostile_instance(daemons, tmpdir_):
    """A peer replaying a real instance's messages altered: its results in reverse order through
    a window of 2 (the late ones delivered and counted, none lost), one result twice (dropped,
    counted), one with a frame id of 2**40 (delivered, counted untracked): every frame once,
    nothing missing. A second run where its start has another config_hash: an error naming
    the instance, its results kept out and counted, its frames listed missing."""
    import time

    n = 10
    imgs = frames(n, seed=5)
    odd = list(range(1, n, 2))
    cap = captured_series(daemons, "b", 1, 2, odd, imgs, 3)
    start, results, end = cap[0], cap[1:-1], cap[-1]
    assert [r["frame_id"] for r in sorted(results, key=lambda r: r["frame_id"])] == odd
    huge = dict(results[0], frame_id=2 ** 40)

    for mismatch in (False, True):
        a = daemons(devices="ref", extra=instance_cfg("a", 0, 2))
        pub, port, fake = peer_pub()
        p = sub_proc([a, fake], None, "--window", "2", "--dead-after", "30")
        time.sleep(1.0)  # both subscriptions in place
        send_part(a, range(0, n, 2), imgs, 3, nimages=n)
        first = dict(start, config_hash="ffffffffffffffff") if mismatch else start
        rev = sorted(results, key=lambda r: -r["frame_id"])
        before = read_until_start(p)  # a's start is the series' reference
        replay(pub, [first, *rev, rev[0], huge, end])
        lines, text, err = sub_lines(p, before)
        pub.close(linger=0)
        got = [m["frame_id"] for m in lines if m["type"] == "result"]
        e = [m for m in lines if m["type"] == "end"]
        assert len(e) == 1, lines
        e = e[0]
        if not mismatch:
            assert sorted(got) == list(range(n)) + [2 ** 40], got
            assert e["duplicates"] == 1 and e["untracked"] == 1 and e["late"] >= 1, e
            assert e["missing"] == 0 and e["instances"] == 2 and e["ended"] == 2, e
        else:
            assert "instance b" in err and "config_hash ffffffffffffffff" in err, err
            assert sorted(got) == list(range(0, n, 2)), got
            assert e["refused"] == len(odd) + 2, e  # the reversed five, the repeat, the huge id
            listed = [i for lo, hi in e["missing_frames"] for i in range(lo, hi + 1)]
            assert listed == odd, e
        a.stop()


def test_aggregates_summed(daemons, tmpdir_):
    """`faidctl aggregates --from x3` over three instances (peaks on), each given its own frames
    of one series, equals the aggregates of one instance given all of them: frames, hits,
    peaks, the num_peaks histogram and the virtual powder pattern pixel by pixel."""
    import json
    import subprocess

    import test_peaks as tp

    n = 8
    imgs, truth = tp.spot_frames(n)
    ds = [daemons(devices="ref", extra=tp.PEAKS + instance_cfg("p%d" % k, k, 3))
          for k in range(3)]
    one = daemons(devices="ref", extra=tp.PEAKS)
    send_dealt(ds, imgs, 2)
    send_part(one, range(n), imgs, 2)

    def aggregates(group, name):
        path = os.path.join(tmpdir_, name + ".npy")
        args = [td.FAIDCTL, "aggregates", "--frames", str(n), "--json", "--powder", path]
        for d in group:
            args += ["--from", td.ep(d.ports["out"])]
        r = subprocess.run(args, capture_output=True, text=True, timeout=td.LONG)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout), np.load(path)

    merged, powder = aggregates(ds, "merged")
    single, powder1 = aggregates([one], "single")
    hits = sum(1 for t in truth if t)
    assert merged["instances"] == 3 and merged["frames"] == n and merged["hits"] == hits
    assert merged["peaks"] == tp.NSPOTS * hits and powder.sum() == merged["peaks"]
    for k in ("frames", "hits", "peaks", "num_peaks_histogram", "num_peaks_bin_width",
              "powder_shape"):
        assert merged[k] == single[k], k
    assert powder.dtype == np.uint64 and np.array_equal(powder, powder1)


@pytest.mark.parametrize("dealing,compact", [("round-robin", False), ("round-robin", True),
                                             ("blocks", True)])
def test_master_file_over_the_instances_files(daemons, tmpdir_, dealing, compact):
    """Three instances write their own series file of their frames of one series (dealt one by
    one, or in blocks); `faidctl merge-files` makes one master file whose per-frame datasets are
    virtual datasets over the three, rows in frame order (one mapping per frame; --compact: one
    per file, strided or one run): h5py reads every frame (equal to the instances' rows), pyFAI's
    NeXus reader finds the entry, and nexusformat the profiles (one mapping per frame: it takes
    each mapping for one row), as for a single file."""
    import re
    import subprocess

    import h5py
    import test_writer as tw

    n = 10
    imgs = frames(n, seed=6)
    outs, ds = [], []
    for k in range(3):
        out = os.path.join(tmpdir_, "files%d" % k)
        os.makedirs(out)
        outs.append(out)
        ds.append(daemons(devices="ref", extra=instance_cfg("w%d" % k, k, 3) +
                          tw.writer_cfg(out)))
    deal = ([range(k, n, 3) for k in range(3)] if dealing == "round-robin"
            else [range(0, 4), range(4, 7), range(7, 10)])
    for k, d in enumerate(ds):
        send_part(d, deal[k], imgs, 4, series_unique_id="lyso-merge", nimages=n)
    for d in ds:
        tw.wait_status(d, lambda w: w["files_written"] == 1, "file written")
    parts = [os.path.join(o, "lyso-merge.h5") for o in outs]
    master = os.path.join(tmpdir_, "lyso-merge_master.h5")
    r = subprocess.run([td.FAIDCTL, "merge-files", "-o", master, *(["--compact"] * compact),
                        *parts], capture_output=True, text=True, timeout=td.LONG)
    assert r.returncode == 0, r.stderr
    m = re.search(r"(\d+) virtual datasets of (\d+) mappings", r.stdout)
    per = 3 if compact else n
    assert m and int(m.group(1)) >= 6 and int(m.group(2)) == per * int(m.group(1)), r.stdout
    rows = {}
    for p in parts:
        with h5py.File(p, "r") as f:
            for fid, I in zip(f["entry/data/frame_id"][()], f["entry/data/I"][()]):
                rows[int(fid)] = I
    assert sorted(rows) == list(range(n))
    with h5py.File(master, "r") as f:
        data = f["entry/data"]
        assert data["I"].is_virtual and data["I"].shape == (n, 64)
        assert list(data["frame_id"][()]) == list(range(n))
        for i, I in enumerate(data["I"][()]):
            assert np.array_equal(I.view(np.uint32), rows[i].view(np.uint32)), i
        assert f["entry/faid/frames"][()] == n
        assert [s.decode() if isinstance(s, bytes) else s
                for s in f["entry/faid/source_files"][()]] == [os.path.realpath(p) for p in parts]
        assert tw.s(f.attrs["default"]) == "entry" and tw.s(f["entry"].attrs["default"]) == "data"
    if not compact:
        from nexusformat.nexus import nxload
        root = nxload(master)
        plot = root.plottable_data
        assert plot is not None and plot.nxsignal.nxname == "I"
        assert plot.nxsignal.shape == (n, 64)
        assert np.array_equal(plot.nxsignal.nxdata[3], rows[3])
        root.nxfile.close()
    from pyFAI.io.nexus import Nexus
    with Nexus(master, "r") as nx:
        assert [en.name for en in nx.get_entries()] == ["/entry"]
        assert nx.get_default_NXdata().name == "/entry/data"


def test_merged_sub_fan_lost_report(daemons, tmpdir_):
    """With --fan, the fan-out's `lost` report (series, instance, frames) is passed on as a line
    of its own and ends the named instance's part of the series at once: the merged end comes
    though that instance, alive, never sent its end (--dead-after is far), with the frames the
    report names listed missing. The test's PUB plays the fan-out's part of the contract."""
    import time

    import msgpack

    ds = [daemons(devices="ref", extra=instance_cfg("f%d" % k, k, 2)) for k in range(2)]
    pub, port, _ = peer_pub()
    p = sub_proc(ds, None, "--fan", td.ep(port), "--dead-after", "60")
    time.sleep(1.0)
    n = 8
    imgs = frames(n, seed=7)
    second_stalls(ds, imgs, 6, 2)
    before = read_until_start(p)
    time.sleep(0.5)  # f1's start and result reach the merge before the report
    pub.send_multipart([b"lost", msgpack.packb({"type": "lost", "series": 6, "instance": "f1",
                                                "frames": [3, [5, 7]]})])
    lines, text, err = sub_lines(p, before)
    pub.close(linger=0)
    lost = [m for m in lines if m["type"] == "lost"]
    assert len(lost) == 1 and lost[0]["frames"] == [3, [5, 7]], lines
    end = [m for m in lines if m["type"] == "end"]
    assert len(end) == 1 and end[0]["lost"] == 1 and end[0]["ended"] == 1, end
    listed = [i for a, b in end[0]["missing_frames"] for i in range(a, b + 1)]
    assert listed == [3, 5, 7], end
    assert sorted(m["frame_id"] for m in lines if m["type"] == "result") == [0, 1, 2, 4, 6]


def test_merged_sub_refuses_oversized_messages(daemons, tmpdir_):
    """A peer sending a 70 MB message (a result of frame 99 with 70 MB of user_data) loses its
    connection instead of having the message read and held (64 MiB per message at most); libzmq
    4.3.5 does not make that connection again, so the peer falls silent: its part of the series
    ends after --dead-after, its frames listed missing, frame 99 never delivered."""
    import time

    n = 6
    imgs = frames(n, seed=8)
    odd = list(range(1, n, 2))
    cap = captured_series(daemons, "b", 1, 2, odd, imgs, 3)
    a = daemons(devices="ref", extra=instance_cfg("a", 0, 2))
    pub, port, fake = peer_pub()
    p = sub_proc([a, fake], None, "--dead-after", "2")
    time.sleep(1.0)
    replay(pub, [cap[0], dict(cap[1], frame_id=99, user_data=b"x" * (70 << 20))])
    time.sleep(0.5)
    send_part(a, range(0, n, 2), imgs, 3, nimages=n)
    replay(pub, cap[1:])  # never arrives: the connection is gone
    lines, text, err = sub_lines(p)
    pub.close(linger=0)
    got = sorted(m["frame_id"] for m in lines if m["type"] == "result")
    assert got == [0, 2, 4], got
    end = [m for m in lines if m["type"] == "end"]
    assert len(end) == 1 and end[0]["ended"] == 1 and end[0]["silent"] == 1, end
    listed = [i for lo, hi in end[0]["missing_frames"] for i in range(lo, hi + 1)]
    assert listed == odd, end


def test_master_file_covers_the_hits_files(daemons, tmpdir_):
    """Three instances with peaks and writer.hits reduce their frames of one series (bslz4 as
    the detector sends them): instance 0 ends, instance 1 is killed (SIGKILL) once its hits are
    flushed, instance 2 gets no hit frame (so writes no hits file). `faidctl merge-files` over
    the three series files also writes MASTER_hits.h5: every hit of the series once, in frame
    order, as the instances stored them (h5py + hdf5plugin decode the pixels bit for bit; the
    CXI peak arrays row for row), read by the nxmx package as a single hits file, with the
    CrystFEL geometry beside it; /entry/faid says each instance's part (closed, open: its writer
    died, none: no hit frame) and the profiles' master reaches the frames and peaks at
    /entry/hits (h5py, from another working directory; nexusformat follows it too). The
    killed instance's files are still marked open: merge-files says so, and a SWMR reader of the
    master reads them (docs/output-files.md)."""
    import re
    import signal
    import subprocess
    import time

    import h5py
    import hdf5plugin  # noqa: F401  (registers the bitshuffle filter for h5py)
    import test_peaks as tp
    import test_writer as tw
    sys.path.insert(0, os.path.join(td.SRC, "tests", "reference"))
    import dectris_stream as dst

    n = 14
    imgs, truth = tp.spot_frames(n)  # even frames are hits
    deal = [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7, 10], [11, 13]]  # frame 12 reaches nobody
    outs, ds = [], []
    for k in range(3):
        out = os.path.join(tmpdir_, "hfiles%d" % k)
        os.makedirs(out)
        outs.append(out)
        ds.append(daemons(devices="ref", extra=tp.PEAKS + instance_cfg("h%d" % k, k, 3) +
                          tw.writer_cfg(out, hits="true", flush_interval=0.1)))
    for k, d in enumerate(ds):
        tx = Sender(d)
        tx.start(series_id=6, series_unique_id="lyso-hits", nimages=n)
        for i in deal[k]:
            tx.sock.send_multipart([td.header(i, 6, imgs[i].shape, "uint16", encoding="bslz4"),
                                    dst.bslz4(imgs[i])])
        if k != 1:
            tx.end(series_id=6)
    hits = [[i for i in part if truth[i]] for part in deal]
    assert [len(h) for h in hits] == [3, 3, 0]
    for k in (0, 2):
        tw.wait_status(ds[k], lambda w: w["files_written"] == 1, "file written")
    # instance 1 dies once a SWMR reader sees its hits and its frames flushed
    parts = [os.path.join(o, "lyso-hits.h5") for o in outs]
    hparts = [os.path.join(o, "lyso-hits_hits.h5") for o in outs]
    t_end = time.monotonic() + td.LONG
    seen = (0, 0)
    while seen != (len(deal[1]), len(hits[1])) and time.monotonic() < t_end:
        try:
            with h5py.File(parts[1], "r", swmr=True) as a, \
                    h5py.File(hparts[1], "r", swmr=True) as b:
                seen = (a["entry/data/frame_id"].shape[0], b["entry/result_1/nPeaks"].shape[0])
        except (OSError, KeyError, BlockingIOError):
            pass
        time.sleep(0.05)
    assert seen == (len(deal[1]), len(hits[1])), seen
    ds[1].proc.send_signal(signal.SIGKILL)
    ds[1].proc.wait(td.LONG)
    assert not os.path.exists(hparts[2])  # no hit frame, no hits file

    master = os.path.join(tmpdir_, "lyso-hits_master.h5")
    r = subprocess.run([td.FAIDCTL, "merge-files", "-o", master, *parts],
                       capture_output=True, text=True, timeout=td.LONG)
    assert r.returncode == 0, r.stderr
    hmaster = os.path.join(tmpdir_, "lyso-hits_master_hits.h5")
    assert re.search(r"lyso-hits_master_hits\.h5: 6 hit frames from 2 hits files", r.stdout), \
        r.stdout
    rows = {}  # frame id -> (pixels, nPeaks, peak x, peak y, intensity) as each instance stored
    for p in hparts[:2]:
        with h5py.File(p, "r", swmr=True) as f:
            res = f["entry/result_1"]
            for k, fid in enumerate(f["entry/data/frame_id"][()]):
                rows[int(fid)] = (f["entry/data/data"][k], res["nPeaks"][k], res["peakXPosRaw"][k],
                                  res["peakYPosRaw"][k], res["peakTotalIntensity"][k])
    want = sorted(i for part in hits for i in part)
    assert sorted(rows) == want == [0, 2, 4, 6, 8, 10]

    def strs(ds):
        return [v.decode() if isinstance(v, bytes) else v for v in ds[()]]

    # instance 1's files are still marked open by their killed writer: libhdf5 opens the sources
    # of a master opened as a SWMR reader as SWMR readers too (a plain reader is refused them)
    assert "lyso-hits_hits.h5: still marked open by its writer" in r.stderr, r.stderr
    with h5py.File(hmaster, "r", swmr=True) as f:
        data = f["entry/data/data"]
        assert data.is_virtual and data.shape == (len(want), td.ROWS, td.COLS)
        assert list(f["entry/data/frame_id"][()]) == want
        res = f["entry/result_1"]
        for k, fid in enumerate(want):
            assert np.array_equal(data[k], imgs[fid]), fid
            assert np.array_equal(data[k], rows[fid][0]), fid
            assert res["nPeaks"][k] == rows[fid][1] and rows[fid][1] > 0, fid
            for name, col in (("peakXPosRaw", 2), ("peakYPosRaw", 3), ("peakTotalIntensity", 4)):
                assert np.array_equal(res[name][k], rows[fid][col]), (name, fid)
        fa = f["entry/faid"]
        assert fa["frames"][()] == len(want)
        assert strs(fa["series_files"]) == [os.path.realpath(p) for p in parts]
        assert strs(fa["source_files"]) == [os.path.realpath(hparts[0]),
                                            os.path.realpath(hparts[1]), ""]
        assert list(fa["source_frames"][()]) == [3, 3, 0]
        assert strs(fa["source_state"]) == ["closed", "open", "none"]
        assert f["entry/instrument/detector/distance"][()] > 0
    import nxmx
    with h5py.File(hmaster, "r", swmr=True) as f:
        entries = nxmx.NXmx(f).entries
        assert len(entries) == 1 and len(entries[0].instruments[0].detectors) == 1
    geom = open(os.path.join(tmpdir_, "lyso-hits_master_hits.geom")).read()
    assert geom == open(os.path.join(outs[0], "lyso-hits_hits.geom")).read()
    assert "data = /entry/data/data" in geom and "peak_list = /entry/result_1" in geom
    # the profiles' master: every reduced frame, the dead instance's open file said, the hits
    # reached through it from another working directory
    reduced = sorted(deal[0] + deal[1] + deal[2])
    cwd = os.getcwd()
    os.chdir("/")
    try:
        with h5py.File(master, "r", swmr=True) as f:
            assert list(f["entry/data/frame_id"][()]) == reduced
            assert strs(f["entry/faid/source_state"]) == ["closed", "open", "closed"]
            assert list(f["entry/faid/source_frames"][()]) == [len(p) for p in deal]
            assert list(f["entry/hits/data/frame_id"][()]) == want
            assert np.array_equal(f["entry/hits/data/data"][1], imgs[2])
            assert f["entry/hits/result_1/nPeaks"][1] == rows[2][1]
    finally:
        os.chdir(cwd)
    from nexusformat.nexus import nxload  # the link does not lead NeXus readers astray
    root = nxload(master)
    try:
        assert root.plottable_data.nxsignal.nxname == "I"
        assert root["entry/hits/data/frame_id"].shape == (len(want),)
        assert root["entry/hits/result_1/nPeaks"].shape == (len(want),)
    finally:
        root.nxfile.close()


PARTIAL_WRITER = r"""
import os, sys
import h5py
import numpy as np
path, ids, rows, die = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3]), \
    sys.argv[4] == "die"
f = h5py.File(path, "w", libver="latest")
g = f.create_group("entry/data")
fid = g.create_dataset("frame_id", shape=(0,), maxshape=(None,), dtype="<u8", chunks=(16,))
I = g.create_dataset("I", shape=(0, 4), maxshape=(None, 4), dtype="<f4", chunks=(16, 4))
f.swmr_mode = True
fid.resize((len(ids),))
fid[:] = ids
I.resize((rows, 4))
I[:] = np.array(ids[:rows], dtype="<f4")[:, None] * np.arange(1, 5, dtype="<f4")
f.flush()
if die:
    os._exit(0)  # as a killed writer: the file stays marked open by its SWMR writer
f.close()
"""


def test_master_file_over_a_killed_writers_partial_file(tmpdir_):
    """A file whose writer died between two flushes may hold more frame ids than rows of another
    per-frame dataset (each reaches the file in blocks of its own): merge-files maps the rows
    every dataset has, names the frame ids left out and says the file is open; a file so shaped
    that its writer closed is refused, naming it. (The files are written by h5py here: a daemon
    killed at that moment cannot be aimed at.)"""
    import subprocess

    import h5py

    def write(name, ids, rows, how):
        path = os.path.join(tmpdir_, name)
        r = subprocess.run([sys.executable, "-c", PARTIAL_WRITER, path,
                            ",".join(map(str, ids)), str(rows), how],
                           capture_output=True, text=True, timeout=td.LONG)
        assert r.returncode == 0, r.stderr
        return path

    a = write("a.h5", [0, 2, 4], 3, "close")
    b = write("b.h5", [1, 3, 5], 2, "die")
    master = os.path.join(tmpdir_, "m.h5")
    r = subprocess.run([td.FAIDCTL, "merge-files", "-o", master, a, b], capture_output=True,
                       text=True, timeout=td.LONG)
    assert r.returncode == 0, r.stderr
    assert "b.h5: still marked open by its writer" in r.stderr, r.stderr
    assert "b.h5: 1 frame ids past its shortest per-frame dataset (2 rows) left out" in r.stderr
    with h5py.File(master, "r", swmr=True) as f:
        assert list(f["entry/data/frame_id"][()]) == [0, 1, 2, 3, 4]
        assert np.array_equal(f["entry/data/I"][()],
                              np.arange(5, dtype="<f4")[:, None] * np.arange(1, 5, dtype="<f4"))
        assert list(f["entry/faid/source_frames"][()]) == [3, 2]
        assert [s.decode() if isinstance(s, bytes) else s
                for s in f["entry/faid/source_state"][()]] == ["closed", "open"]
    c = write("c.h5", [1, 3, 5], 2, "close")
    r = subprocess.run([td.FAIDCTL, "merge-files", "-o", os.path.join(tmpdir_, "m2.h5"), a, c],
                       capture_output=True, text=True, timeout=td.LONG)
    assert r.returncode == 1 and "c.h5: /entry/data/I has 2 rows, frame_id 3" in r.stderr, \
        r.stderr
