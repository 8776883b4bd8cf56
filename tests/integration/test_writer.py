"""The files of record (issue 15, `writer:`): the real daemon writes each series into
writer.directory while it publishes it, and real readers read the files back: h5py (+ hdf5plugin),
pyFAI's own pyFAI.io.nexus.Nexus, nexusformat.

Covered: the profiles, frame ids and timestamps in the file equal the published ones bit for bit;
the NXazint1d structure matches what pyFAI's save_NXazint1d writes (same groups, datasets,
attributes, plus faid's additions); the default NXdata is found by nexusformat; status and
/metrics count what was written; a file is readable while written (SWMR) and after kill -9 up to
the last flush; faults (full disk, directory removed, file size limit) are errors naming the file,
counted by kind, the series goes on over PUB and writing resumes with the next series; hostile
series names never write outside writer.directory; a series without an end is closed after
writer.series_timeout.

Nothing asserts on time: timeouts only turn hangs into failures."""

import os
import resource
import shutil
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

import test_daemon as td
from test_daemon import LONG, Receiver, Sender, arr, frames

tmpdir_ = td.tmpdir_
daemons = td.daemons


def writer_cfg(directory="out", **kw):
    lines = ["writer:", f"  directory: {directory}"]
    for k, v in kw.items():
        lines.append(f"  {k}: {v}")
    return "\n".join(lines) + "\n"


def start_writer(daemons, tmpdir_, out="out", env=None, preexec=None, **kw):
    """A daemon whose writer.directory is <its folder>/out (relative to its configuration)."""
    sub = os.path.join(tmpdir_, "d%d" % len(os.listdir(tmpdir_)))
    os.makedirs(os.path.join(sub, out), exist_ok=True)
    d = td.Daemon(sub, env=env, extra=writer_cfg(out, **kw) + kw.pop("extra", ""))
    return d, os.path.join(sub, out)


def wait_status(d, pred, what):
    t_end = time.monotonic() + LONG
    st = None
    while time.monotonic() < t_end:
        st = d.status()
        if pred(st["writer"]):
            return st["writer"]
        time.sleep(0.05)
    raise TimeoutError("%s never held; last writer status %r" % (what, st and st["writer"]))


@pytest.fixture
def wdaemon(tmpdir_):
    started = []

    def start(out="out", env=None, wrapper=(), **kw):
        sub = os.path.join(tmpdir_, "w%d" % len(started))
        os.makedirs(os.path.join(sub, out), exist_ok=True)
        cfg = dict(kw.pop("cfg", {}))
        extra = cfg.pop("extra", "")
        # a PUB queue that a loaded test box's Python subscriber cannot overflow: the tests
        # count every published result and end
        cfg.setdefault("output_extra", "  sndhwm: 100000\n")
        d = td.Daemon(sub, env=env, wrapper=wrapper, extra=writer_cfg(out, **kw) + extra, **cfg)
        started.append(d)
        d.wait_ready()
        return d, os.path.join(sub, out)

    yield start
    codes = []
    for d in started:
        killed = d.proc.poll() is not None  # the kill -9 test's
        d.stop()
        if not killed:
            codes.append(d.returncode)
    # every daemon exits cleanly after SIGTERM: no crash, and under the sanitizers no leak
    assert all(c == 0 for c in codes), "faid exit statuses %s" % codes


def send_series(d, n, series_id=1, uid=None, end=True, first=0, seed=1, tx=None):
    """One series on tx (a new connection when None: series sent on different connections may
    interleave at faid's input, as they would from two detectors)."""
    tx = tx or Sender(d)
    kw = {"series_unique_id": uid} if uid is not None else {}
    tx.start(series_id=series_id, **kw)
    imgs = frames(n, seed=seed)
    for i, img in enumerate(imgs):
        tx.image(first + i, img, series_id=series_id, timestamp=1000.25 + i)
    if end:
        tx.end(series_id=series_id)
    return imgs


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def test_series_file_holds_the_published_profiles(wdaemon):
    d, out = wdaemon(flush_interval=0.2)
    rx = Receiver(d)
    rx.settle()
    send_series(d, 7, series_id=5, uid="lyso-01")
    rx.collect_until_end()
    w = wait_status(d, lambda w: w["files_written"] == 1, "file written")
    path = os.path.join(out, "lyso-01.h5")
    assert os.listdir(out) == ["lyso-01.h5"]
    assert w["frames_written"] == 7 and w["bytes_written"] > 7 * 64 * 4 * 4
    assert w["state"] == "idle" and w["directory"] == out and w["free_bytes"] > 0
    assert sum(w["errors"].values()) == 0 and sum(w["dropped"].values()) == 0

    start = rx.of("start")[0]
    results = sorted(rx.of("result"), key=lambda r: r["msg_number"])
    with h5py.File(path, "r") as f:
        e = f["entry"]
        assert s(f.attrs["default"]) == "entry" and s(e.attrs["default"]) == "data"
        assert s(e["definition"][()]) == "NXazint1d"
        data = e["data"]
        assert s(data.attrs["signal"]) == "I"
        for key, name in (("I", "I"), ("sigma", "I_errors"), ("std", "std"), ("count", "count")):
            want = np.array([arr(r[key]) for r in results])
            got = data[name][()]
            assert got.dtype == np.float32 and got.shape == want.shape
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name
        assert list(data["frame_id"][()]) == [r["frame_id"] for r in results]
        assert list(data["timestamp"][()]) == [1000.25 + i for i in range(7)]
        assert np.array_equal(data["radial_axis"][()], arr(start["radial"]))
        assert s(data["radial_axis"].attrs["units"]) == "1/nm"  # q_nm^-1: written in nm^-1
        assert s(data["radial_axis"].attrs["long_name"]) == "q"
        assert s(e["faid/end_reason"][()]) == "end"
        assert e["faid/frames"][()] == 7 and e["faid/frames_missing"][()] == 0
        assert e["faid/series_id"][()] == 5 and s(e["faid/series_unique_id"][()]) == "lyso-01"
        assert s(e["faid/configuration/data"][()]) == start["config"]
        wl = e["instrument/monochromator/wavelength"]
        assert wl[()] == pytest.approx(1.0) and s(wl.attrs["units"]) == "angstrom"

    # nexusformat follows the default attributes to the profiles
    from nexusformat.nexus import nxload
    root = nxload(path)
    plot = root.plottable_data
    assert plot is not None and plot.nxsignal.nxname == "I"
    assert plot.nxsignal.shape == (7, 64)
    root.nxfile.close()
    # pyFAI's own NeXus reader finds the NXazint1d entry
    from pyFAI.io.nexus import Nexus
    with Nexus(path, "r") as nx:
        entries = nx.get_entries()
        assert [en.name for en in entries] == ["/entry"]
        assert nx.get_default_NXdata().name == "/entry/data"

    # /metrics counts the same
    st = d.status()
    assert st["writer"]["files_written"] == 1


def test_optional_output_in_the_series_file(wdaemon):
    """An optional output the configuration turns on (output.extra) reaches the file of record by
    its key, /entry/outputs/<key>, bit-equal to the published arrays, announced in the start
    (optional_outputs); a series without the option has no /entry/outputs."""
    d, out = wdaemon(flush_interval=0.2,
                     cfg={"output_extra": "  sndhwm: 100000\n  extra: [sum_normalization]\n"})
    rx = Receiver(d)
    rx.settle()
    send_series(d, 4, series_id=6, uid="extra-01")
    rx.collect_until_end()
    wait_status(d, lambda w: w["files_written"] == 1, "file written")
    assert rx.of("start")[0]["optional_outputs"] == ["sum_normalization"]
    results = sorted(rx.of("result"), key=lambda r: r["msg_number"])
    want = np.array([arr(r["sum_normalization"]) for r in results])
    with h5py.File(os.path.join(out, "extra-01.h5"), "r") as f:
        assert s(f["entry/outputs"].attrs["NX_class"]) == "NXcollection"
        got = f["entry/outputs/sum_normalization"][()]
        assert got.dtype == np.float32 and got.shape == want.shape == (4, 64)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))

    d2, out2 = wdaemon(flush_interval=0.2)
    rx2 = Receiver(d2)
    rx2.settle()
    send_series(d2, 2, series_id=7, uid="plain-01")
    rx2.collect_until_end()
    wait_status(d2, lambda w: w["files_written"] == 1, "file written")
    assert "optional_outputs" not in rx2.of("start")[0]
    with h5py.File(os.path.join(out2, "plain-01.h5"), "r") as f:
        assert "outputs" not in f["entry"]


def tree(path, rename=None):
    """{path: (kind, NX_class, sorted attribute names)} of a file."""
    out = {}

    def visit(name, obj):
        key = "/".join(rename.get(p, p) for p in name.split("/")) if rename else name
        kind = "group" if isinstance(obj, h5py.Group) else "dataset"
        out[key] = (kind, s(obj.attrs.get("NX_class", "")), tuple(sorted(obj.attrs)))

    with h5py.File(path, "r") as f:
        f.visititems(visit)
        out["/"] = ("group", s(f.attrs.get("NX_class", "")), tuple(sorted(f.attrs)))
    return out


def test_structure_matches_pyfai_save_nxazint1d(wdaemon, tmpdir_):
    """pyFAI 2026.9's save_NXazint1d is the reference: every group, dataset and attribute it
    writes for the same profiles is in faid's file (its NXprocess `pyFAI` is faid's `faid`), with
    the same NX_class; faid's file may add to it."""
    from pyFAI.io.nexus import save_NXazint1d
    from pyFAI.integrator.azimuthal import AzimuthalIntegrator

    d, out = wdaemon()
    rx = Receiver(d)
    rx.settle()
    imgs = send_series(d, 3, uid="ref")
    rx.collect_until_end()
    wait_status(d, lambda w: w["files_written"] == 1, "file written")
    ours = os.path.join(out, "ref.h5")

    ai = AzimuthalIntegrator(dist=0.1, poni1=0.0061, poni2=0.0067, pixel1=1e-4, pixel2=1e-4,
                             wavelength=1e-10)
    # pyFAI's writer takes 2th_deg and q_A^-1 only: its profiles of the same frames in q_A^-1
    results = [ai.integrate1d(img, 64, unit="q_A^-1", error_model="poisson",
                              method=("full", "csr", "cython")) for img in imgs]
    ref = os.path.join(tmpdir_, "pyfai.h5")
    save_NXazint1d(ref, results)

    theirs = tree(ref, rename={"pyFAI": "faid"})
    mine = tree(ours)
    missing = sorted(set(theirs) - set(mine))
    assert not missing, "pyFAI's layout has paths faid's file lacks: %s" % missing
    for p, (kind, cls, attrs) in theirs.items():
        k2, c2, a2 = mine[p]
        assert k2 == kind and c2 == cls, (p, (kind, cls), (k2, c2))
        # root attributes are the NeXus file's bookkeeping: faid writes the same names
        assert set(attrs) <= set(a2), (p, set(attrs) - set(a2))
    with h5py.File(ref, "r") as a, h5py.File(ours, "r") as b:
        for p in ("entry/data/I", "entry/data/I_errors"):
            assert a[p].shape == b[p].shape and a[p].dtype == b[p].dtype, p
            assert a[p].maxshape == b[p].maxshape, p
        assert list(a["entry/data"].attrs["axes"]) == list(b["entry/data"].attrs["axes"])
        for p in ("entry/solid_angle_applied", "entry/polarization_applied",
                  "entry/normalization_applied", "entry/monitor_applied"):
            assert a[p].dtype == b[p].dtype == np.bool_, p
        params = rx.of("start")[0]["parameters"]
        assert b["entry/solid_angle_applied"][()] == params["solid_angle"]
        assert b["entry/polarization_applied"][()] == (params["polarization_factor"] is not None)


def test_file_readable_while_written_and_after_kill9(wdaemon):
    """SWMR: a reader follows the file while the series runs; kill -9 leaves it readable up to
    the last flush."""
    d, out = wdaemon(flush_interval=0.1)
    tx = Sender(d)
    tx.start(series_id=9, series_unique_id="live")
    imgs = frames(4)
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=9)
    d.wait_counters(lambda c: c["processed"] >= 4, "4 processed")
    path = os.path.join(out, "live.h5")
    t_end = time.monotonic() + LONG
    n = 0
    while n < 4 and time.monotonic() < t_end:
        if os.path.exists(path):
            with h5py.File(path, "r", swmr=True) as f:
                n = f["entry/data/I"].shape[0]
        time.sleep(0.05)
    assert n == 4, "the reader never saw the 4 frames flushed"
    # the series goes on while a reader holds the file open
    with h5py.File(path, "r", swmr=True) as f:
        ds = f["entry/data/frame_id"]
        for i, img in enumerate(frames(3, seed=5)):
            tx.image(10 + i, img, series_id=9)
        t_end = time.monotonic() + LONG
        while ds.shape[0] < 7 and time.monotonic() < t_end:
            time.sleep(0.05)
            ds.refresh()
        assert list(ds[()]) == [0, 1, 2, 3, 10, 11, 12]
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(LONG)
    # A file whose writer died is still marked as open by a SWMR writer: SWMR readers open it
    # (plain readers after `h5clear -s`, docs/output-files.md).
    with h5py.File(path, "r", swmr=True) as f:
        assert f["entry/data/I"].shape == (7, 64)
        assert list(f["entry/data/frame_id"][()]) == [0, 1, 2, 3, 10, 11, 12]
        assert s(f["entry/faid/end_reason"][()]) == "open"  # never closed


def test_series_without_end_closed_after_timeout(wdaemon):
    d, out = wdaemon(series_timeout=0.5)
    send_series(d, 2, series_id=4, uid="noend", end=False)
    wait_status(d, lambda w: w["files_written"] == 1, "file closed by the timeout")
    with h5py.File(os.path.join(out, "noend.h5"), "r") as f:
        assert s(f["entry/faid/end_reason"][()]) == "timeout"
        assert f["entry/data/I"].shape == (2, 64)


PEAKS = """peaks:
  algorithm: peakfinder8
  adc_threshold: 60
  minimum_snr: 5
  min_pixel_count: 2
  local_bg_radius: 3
  min_peaks_for_hit: 5
  max_num_peaks: 8
"""


def reload_with(d, old, new):
    with open(d.config) as f:
        text = f.read()
    assert old in text
    with open(d.config, "w") as f:
        f.write(text.replace(old, new))
    r = d.request({"cmd": "reload"})
    assert r["ok"], r


def test_peaks_and_cake_in_the_file(wdaemon):
    """Peak finding on: is_hit, num_peaks, the background and the CXI peak arrays of each frame
    equal the published ones; the hit rate; writer.cake: the NXazint2d entry holds the published
    cake. The cake is turned on by a reload (settings apply from the next series)."""
    from test_peaks import spot_frames
    d, out = wdaemon(cake="true", cfg=dict(devices="ref", extra=PEAKS))
    reload_with(d, "  split: full\n", "  split: full\n  npt_azim: 12\n")
    rx = Receiver(d)
    rx.settle()
    imgs, _ = spot_frames(4)
    tx = Sender(d)
    tx.start(series_id=2, series_unique_id="xtal")
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=2)
    tx.end(series_id=2)
    rx.collect_until_end()
    wait_status(d, lambda w: w["files_written"] == 1, "file written")
    results = sorted(rx.of("result"), key=lambda r: r["msg_number"])
    assert any(r["is_hit"] for r in results) and not all(r["is_hit"] for r in results)
    start = rx.of("start")[-1]
    with h5py.File(os.path.join(out, "xtal.h5"), "r") as f:
        p = f["entry/peaks"]
        assert p["peakXPosRaw"].shape == (4, 8)
        for k, r in enumerate(results):
            n = min(len(arr(r["peak_x"])), 8)
            assert p["nPeaks"][k] == n and p["num_peaks"][k] == r["num_peaks"]
            assert bool(p["is_hit"][k]) == r["is_hit"]
            for name, key in (("peakXPosRaw", "peak_x"), ("peakYPosRaw", "peak_y"),
                              ("peakTotalIntensity", "peak_intensity"), ("peakSNR", "peak_snr"),
                              ("peakMaximumValue", "peak_max_pixel"), ("peakSigma", "peak_sigma")):
                assert np.array_equal(p[name][k, :n], arr(r[key])[:n]), name
                assert not p[name][k, n:].any()
            assert np.array_equal(p["peakNPixels"][k, :n], arr(r["peak_npix"])[:n])
            assert np.array_equal(p["background"][k], arr(r["bg_I"]))
            assert np.array_equal(p["background_errors"][k], arr(r["bg_sigma"]))
        hits = sum(r["is_hit"] for r in results)
        assert p["hits"][()] == hits and p["hit_rate"][()] == pytest.approx(hits / 4)
        e2 = f["entry_2d"]
        assert s(e2["definition"][()]) == "NXazint2d"
        assert np.array_equal(e2["data/azimuthal_axis"][()], arr(start["azimuthal"]))
        for name, key in (("I", "I_2d"), ("I_errors", "sigma_2d"), ("count", "count_2d")):
            want = np.array([arr(r[key]) for r in results])
            assert want.shape == (4, 12, 64)
            assert np.array_equal(e2["data"][name][()], want), name
        assert list(e2["data/frame_id"][()]) == [0, 1, 2, 3]


def documented_name(uid):
    """docs/output-files.md's naming rule: bytes outside [A-Za-z0-9._-] and a leading '.' or '-'
    become '_', at most 100 bytes; when anything changed, '-' and the FNV-1a hash (8 hex digits)
    of the original bytes follow."""
    raw = uid.encode()
    h = 2166136261
    for c in raw:
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    out = "".join(chr(c) if (chr(c).isascii() and (chr(c).isalnum() or chr(c) == "_")) or
                  (chr(c) in ".-" and i > 0) else "_" for i, c in enumerate(raw[:100]))
    changed = out.encode() != raw
    return out + ("-%08x" % h if changed else "") + ".h5"


def test_hostile_series_names_stay_in_the_directory(wdaemon, tmpdir_):
    """series_unique_id comes from the wire: ../../etc/x, a/b, control and NUL bytes, a name
    that is only dots, one a shell would take for options: each gives a file inside
    writer.directory, named by the documented rule, never elsewhere, never an obscure
    failure."""
    d, out = wdaemon()
    names = ["../../etc/x", "a/b", "ctl\x01\x1fz", "..", "ok-1.2_3", "-rf", "nul\x00z"]
    tx = Sender(d)
    for i, uid in enumerate(names):
        send_series(d, 1, series_id=i + 1, uid=uid, tx=tx)
    wait_status(d, lambda w: w["files_written"] == len(names), "every series written")
    files = sorted(os.listdir(out))
    assert len(files) == len(names)
    assert "ok-1.2_3.h5" in files  # a clean name is kept as it is
    # ingest refuses a start whose id holds NUL: its frames open an implicit series, unnamed
    assert "series_7.h5" in files
    for f in files:
        assert "/" not in f and not f.startswith((".", "-"))
        with h5py.File(os.path.join(out, f), "r") as h:
            assert s(h["entry/faid/series_unique_id"][()]) in names[:6] + [""]
    assert sorted(files) == sorted(documented_name(u) for u in names[:6] + ["series_7"])
    # nothing was written above the directory
    assert sorted(os.listdir(os.path.dirname(out))) == ["faid.log", "faid.yaml", "out"]
    assert not os.path.exists(os.path.join(tmpdir_, "etc"))


def test_same_series_twice_never_overwrites(wdaemon):
    d, out = wdaemon()
    tx = Sender(d)  # one connection: series 1 whole before series 2
    send_series(d, 1, series_id=1, uid="again", tx=tx)
    send_series(d, 2, series_id=2, uid="again", tx=tx)
    wait_status(d, lambda w: w["files_written"] == 2, "both written")
    assert sorted(os.listdir(out)) == ["again-2.h5", "again.h5"]
    with h5py.File(os.path.join(out, "again.h5"), "r") as a, \
            h5py.File(os.path.join(out, "again-2.h5"), "r") as b:
        assert a["entry/data/I"].shape[0] == 1 and b["entry/data/I"].shape[0] == 2


def series_goes_on(d, rx, n, series_id, uid):
    """Sends a series of n frames and checks it is published whole (PUB never notices the
    writer's faults)."""
    before = len(rx.of("end"))
    send_series(d, n, series_id=series_id, uid=uid)
    rx.collect_until_end(n_ends=1)
    end = rx.of("end")[before]
    assert end["series_id"] == series_id and end["frames_processed"] == n
    return end


def test_full_disk_is_counted_and_writing_resumes(wdaemon, tmpdir_):
    """ENOSPC: a 2 MB tmpfs filled but for 64 kB; a series of 300 frames does not fit: a clear
    error naming the file, counted as no_space, the series is published whole; once space is
    freed the next series is written."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d, out = wdaemon(flush_interval=0.05)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", out],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip("tmpfs not mountable here: " + r.stderr)
    try:
        filler = os.path.join(out, "filler")
        with open(filler, "wb") as f:
            try:
                f.write(b"\0" * (2 << 20))
            except OSError:
                pass
        sz = os.path.getsize(filler)
        os.truncate(filler, max(0, sz - (64 << 10)))
        rx = Receiver(d)
        rx.settle()
        series_goes_on(d, rx, 300, 1, "full")
        w = wait_status(d, lambda w: w["errors"]["no_space"] >= 1, "no_space counted")
        assert w["files_open"] == 0
        assert "full.h5" in d.logtext() and "writer.errors no_space" in d.logtext()
        os.unlink(filler)
        series_goes_on(d, rx, 5, 2, "after")
        wait_status(d, lambda w: w["files_written"] >= 1, "next series written")
        with h5py.File(os.path.join(out, "after.h5"), "r") as f:
            assert f["entry/data/I"].shape == (5, 64)
        assert d.status()["writer"]["free_bytes"] > 0
    finally:
        d.stop()
        subprocess.run(["umount", out], check=False)


def test_directory_removed_mid_series(wdaemon):
    """The directory removed while a file is written: error `removed` naming the file at the next
    flush; the next series (directory still missing) is counted `unwritable`; once it exists
    again, writing resumes. PUB publishes every series whole."""
    d, out = wdaemon(flush_interval=0.05)
    rx = Receiver(d)
    rx.settle()
    tx = Sender(d)
    tx.start(series_id=1, series_unique_id="gone")
    for i, img in enumerate(frames(3)):
        tx.image(i, img, series_id=1)
    wait_status(d, lambda w: w["frames_written"] >= 3, "frames written")
    shutil.rmtree(out)
    for i, img in enumerate(frames(3, seed=2)):
        tx.image(10 + i, img, series_id=1)
    tx.end(series_id=1)
    rx.collect_until_end()
    assert rx.of("end")[0]["frames_processed"] == 6
    w = wait_status(d, lambda w: w["errors"]["removed"] >= 1, "removed counted")
    assert "gone.h5" in d.logtext()
    series_goes_on(d, rx, 2, 2, "nodir")
    wait_status(d, lambda w: w["errors"]["unwritable"] >= 1, "unwritable counted")
    assert "nodir.h5" in d.logtext()
    os.makedirs(out)
    series_goes_on(d, rx, 2, 3, "back")
    wait_status(d, lambda w: w["files_written"] >= 1, "writing resumed")
    assert os.listdir(out) == ["back.h5"]
    assert w["files_written"] == 0


def test_file_size_limit(wdaemon):
    """RLIMIT_FSIZE (prlimit --fsize): the daemon ignores SIGXFSZ, the write fails with EFBIG:
    counted as file_size; the daemon lives on and the series is published whole."""
    # the reference device: PoCL would write its kernel cache under the limit too
    d, out = wdaemon(flush_interval=0.05, wrapper=("prlimit", "--fsize=262144", "--"),
                     cfg=dict(devices="ref"))
    rx = Receiver(d)
    rx.settle()
    # The first frames are flushed before the frames that cross the limit are sent: sent at
    # once, all 400 could reach the writer before its first flush (a late flush on a loaded
    # machine; writer.flush_interval 5 fails this way every run), and the frozen file then held
    # no frame to check. The writer's thread finishes a flush before it takes the next result,
    # so once a reader sees the first frames' ids in the file, they are all of a flush.
    first, n = 8, 400
    imgs = frames(n, seed=1)
    tx = Sender(d)
    tx.start(series_id=1, series_unique_id="big")
    for i in range(first):
        tx.image(i, imgs[i], series_id=1, timestamp=1000.25 + i)
    path = os.path.join(out, "big.h5")
    t_end = time.monotonic() + LONG
    seen = []
    while seen != list(range(first)) and time.monotonic() < t_end:
        try:  # the file may not be there yet, or not yet a SWMR file
            with h5py.File(path, "r", swmr=True) as f:
                seen = list(f["entry/data/frame_id"][()])
        except (OSError, KeyError):
            pass
        time.sleep(0.05)
    assert seen == list(range(first)), "the first %d frames never flushed: %s" % (first, seen)
    assert d.status()["writer"]["errors"]["file_size"] == 0
    for i in range(first, n):
        tx.image(i, imgs[i], series_id=1, timestamp=1000.25 + i)
    tx.end(series_id=1)
    rx.collect_until_end(n_ends=1)
    end = rx.of("end")[0]
    assert end["series_id"] == 1 and end["frames_processed"] == n
    wait_status(d, lambda w: w["errors"]["file_size"] >= 1, "file_size counted")
    assert d.proc.poll() is None
    assert "big.h5" in d.logtext()
    # frozen at the failure: the file stays readable (SWMR mark still set) and holds at least
    # the frames of the flush above; in each dataset a row is either written or marked unwritten
    # (frame_id 2^64 - 1, NaN): libhdf5 may have stored the extent of rows whose chunks it could
    # not write
    with h5py.File(path, "r", swmr=True) as f:
        ids = f["entry/data/frame_id"][()]
        I = f["entry/data/I"][()]
        assert len(ids) >= first and (ids[:first] == np.arange(first)).all()
        assert all(ids[k] in (k, 2**64 - 1) for k in range(len(ids)))
        nan_rows = np.isnan(I).all(axis=1)
        assert not nan_rows[:first].any() and not np.isnan(I[~nan_rows]).any()
    series_goes_on(d, rx, 2, 2, "small")
    wait_status(d, lambda w: w["files_written"] >= 1, "a small file still fits")


def test_faidctl_process_writes_the_same_file(wdaemon, tmpdir_):
    """faidctl process with writer.directory writes the series file from the same frames with the
    same code: every dataset of the profiles (and the cake) equals the daemon's, bit for bit."""
    d, out = wdaemon(cake="true")
    reload_with(d, "  split: full\n", "  split: full\n  npt_azim: 8\n")
    rx = Receiver(d)
    rx.settle()
    imgs = frames(5, seed=4)
    tx = Sender(d)
    tx.start(series_id=1, series_unique_id="eq")
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=1)
    tx.end(series_id=1)
    rx.collect_until_end()
    wait_status(d, lambda w: w["files_written"] == 1, "file written")
    off = os.path.join(tmpdir_, "offline")
    os.makedirs(off)
    np.save(os.path.join(off, "eq.npy"), np.stack(imgs))
    r = subprocess.run([td.FAIDCTL, "process", "-q", "-c", d.config, "--device", "cpu", "-o", off,
                        "--set", "writer.directory=" + off, os.path.join(off, "eq.npy")],
                       capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 0, r.stderr
    with h5py.File(os.path.join(out, "eq.h5"), "r") as a, \
            h5py.File(os.path.join(off, "eq.h5"), "r") as b:
        names = []
        a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        per_frame = [n for n in names if n.startswith(("entry/data/", "entry_2d/data/"))
                     and n != "entry/data/timestamp"]
        assert "entry_2d/data/I" in per_frame and "entry/data/I" in per_frame
        for n in per_frame:
            assert a[n].shape == b[n].shape and a[n].dtype == b[n].dtype, n
            assert np.array_equal(a[n][()], b[n][()]), n
        assert s(b["entry/faid/series_unique_id"][()]) == "eq"
        assert s(b["entry/faid/end_reason"][()]) == "end"
        # the published profiles are the file's (both files hold them)
        results = sorted(rx.of("result"), key=lambda m: m["frame_id"])
        assert np.array_equal(b["entry/data/I"][()], np.array([arr(m["I"]) for m in results]))


def test_hits_file_holds_the_hit_frames_as_they_arrived(wdaemon, tmpdir_):
    """writer.hits through the real daemon: the hit frames of the series, sent bitshuffle-LZ4
    compressed, are in <series>_hits.h5 as they arrived (h5py + hdf5plugin decode them to the
    sent pixels bit for bit) with their frame ids and the published peaks, the CrystFEL geometry
    beside it; the nxmx package reads it."""
    import sys
    sys.path.insert(0, os.path.join(td.SRC, "tests", "reference"))
    import dectris_stream as ds
    import hdf5plugin  # noqa: F401  (registers the bitshuffle filter for h5py)
    from test_peaks import spot_frames
    d, out = wdaemon(hits="true", flush_interval=0.1, cfg=dict(devices="ref", extra=PEAKS))
    rx = Receiver(d)
    rx.settle()
    imgs, _ = spot_frames(6)
    tx = Sender(d)
    tx.start(series_id=3, series_unique_id="hits")
    for i, img in enumerate(imgs):
        tx.sock.send_multipart([td.header(100 + i, 3, img.shape, "uint16", encoding="bslz4"),
                                ds.bslz4(img)])
    tx.end(series_id=3)
    rx.collect_until_end()
    wait_status(d, lambda w: w["files_written"] == 1, "file written")
    results = sorted(rx.of("result"), key=lambda r: r["msg_number"])
    hits = [r for r in results if r["is_hit"]]
    assert 0 < len(hits) < len(results)
    w = d.status()["writer"]
    assert w["hit_frames_written"] == len(hits) and sum(w["errors"].values()) == 0, (w, d.logtext())
    assert sorted(os.listdir(out)) == ["hits.h5", "hits_hits.geom", "hits_hits.h5"]
    with h5py.File(os.path.join(out, "hits_hits.h5"), "r") as f:
        data = f["entry/data/data"]
        assert data.shape == (len(hits), td.ROWS, td.COLS) and data.dtype == np.uint16
        assert list(f["entry/data/frame_id"][()]) == [r["frame_id"] for r in hits]
        for k, r in enumerate(hits):
            assert np.array_equal(data[k], imgs[r["frame_id"] - 100])
            n = min(len(arr(r["peak_x"])), 8)
            assert f["entry/result_1/nPeaks"][k] == n
            assert np.array_equal(f["entry/result_1/peakXPosRaw"][k, :n], arr(r["peak_x"])[:n])
    import nxmx
    with h5py.File(os.path.join(out, "hits_hits.h5"), "r") as f:
        entries = nxmx.NXmx(f).entries
        assert len(entries) == 1
        assert entries[0].data[0].signal == "data" if hasattr(entries[0].data[0], "signal") else True
    geom = open(os.path.join(out, "hits_hits.geom")).read()
    assert "peak_list = /entry/result_1" in geom

    # faidctl process writes the hits file of the same frames (read from a .npy: stored raw)
    off = os.path.join(tmpdir_, "offline")
    os.makedirs(off)
    np.save(os.path.join(off, "hits.npy"), np.stack(imgs))
    r = subprocess.run([td.FAIDCTL, "process", "-q", "-c", d.config, "--device", "ref", "-o", off,
                        "--set", "writer.directory=" + off, os.path.join(off, "hits.npy")],
                       capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(os.path.join(off, "hits_hits.geom"))
    with h5py.File(os.path.join(out, "hits_hits.h5"), "r") as a, \
            h5py.File(os.path.join(off, "hits_hits.h5"), "r") as b:
        assert list(b["entry/data/frame_id"][()]) == [r["frame_id"] - 100 for r in hits]
        assert np.array_equal(a["entry/data/data"][()], b["entry/data/data"][()])
        for name in ("nPeaks", "peakXPosRaw", "peakYPosRaw", "peakTotalIntensity", "peakSNR"):
            assert np.array_equal(a["entry/result_1"][name][()], b["entry/result_1"][name][()])


def test_full_writer_queue_is_counted_never_waited_for(wdaemon):
    """The writer thread held at the series start (test hook) while 1000 results arrive: what
    does not fit in writer.queue_bytes (1 MiB) is not queued, counted as dropped results, and
    the file says how many it misses; PUB publishes every result."""
    d, out = wdaemon(queue_bytes=1048576, series_timeout=1.0,
                     env={"FAID_TEST_WRITER_START_DELAY_MS": "4000"}, cfg=dict(depth=64))
    rx = Receiver(d)
    rx.settle()
    n = 1000
    tx = Sender(d)
    tx.start(series_id=1, series_unique_id="burst")
    img = frames(1)[0]
    for i in range(n):
        tx.image(i, img, series_id=1)
    tx.end(series_id=1)
    rx.collect_until_end()
    assert rx.of("end")[0]["frames_processed"] == n
    w = wait_status(d, lambda w: w["files_written"] == 1, "file written")
    dropped = w["dropped"]["result"]
    assert dropped > 0, w
    # the end may have been dropped too: the file is then closed by writer.series_timeout
    with h5py.File(os.path.join(out, "burst.h5"), "r") as f:
        written = f["entry/data/I"].shape[0]
        assert f["entry/faid/frames_missing"][()] == dropped, (w, d.logtext()[-3000:])
        assert written + dropped == n
        assert written == w["frames_written"]
    assert "writer queue full" in d.logtext()


def test_writer_settings_reload_from_the_next_series(wdaemon):
    """writer.* is reloadable: a reload turning the writer off leaves the next series unwritten
    (status state off), one pointing it at another directory writes the next series there."""
    d, out = wdaemon()
    send_series(d, 1, series_id=1, uid="one")
    wait_status(d, lambda w: w["files_written"] == 1, "first written")
    reload_with(d, "  directory: out\n", "  directory: null\n")
    rx = Receiver(d)
    rx.settle()
    series_goes_on(d, rx, 2, 2, "two")
    assert wait_status(d, lambda w: w["state"] == "off", "writer off")["files_written"] == 1
    out2 = os.path.join(os.path.dirname(out), "out2")
    os.makedirs(out2)
    reload_with(d, "  directory: null\n", "  directory: out2\n")
    series_goes_on(d, rx, 2, 3, "three")
    wait_status(d, lambda w: w["files_written"] == 2, "third written")
    assert os.listdir(out) == ["one.h5"] and os.listdir(out2) == ["three.h5"]


def test_read_only_directory_is_unwritable_then_resumes(wdaemon):
    """The directory made read-only (a read-only bind mount over it: root ignores permissions):
    the series' file cannot be created, counted as unwritable naming the file, the series is
    published whole; once writable again the next series is written."""
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    d, out = wdaemon()
    r = subprocess.run(["mount", "--bind", out, out], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("bind mount not possible here: " + r.stderr)
    try:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", out], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        rx = Receiver(d)
        rx.settle()
        series_goes_on(d, rx, 3, 1, "ro")
        wait_status(d, lambda w: w["errors"]["unwritable"] >= 1, "unwritable counted")
        assert "ro.h5" in d.logtext() and os.listdir(out) == []
    finally:
        subprocess.run(["umount", out], check=False)
    series_goes_on(d, rx, 2, 2, "rw")
    wait_status(d, lambda w: w["files_written"] == 1, "written again")
    assert os.listdir(out) == ["rw.h5"]


def test_writer_settings_reloaded_mid_series_apply_from_the_next_series(wdaemon):
    """A reload while a series is written (every reload is a new setup, announced by a `setup`
    start within the series) leaves that series with the writer settings of its start: its
    frames after the reload go on in its directory (a new file: a file holds one setup) and
    with its hits file; the new directory and writer.hits take effect at the next series.
    Found by tests/soak/probe_writer.py (probe reload): the rest of the series went to the new
    directory, without its hits file."""
    from test_peaks import spot_frames
    d, out = wdaemon(hits="true", cfg=dict(devices="ref", extra=PEAKS))
    out2 = os.path.join(os.path.dirname(out), "out2")
    os.makedirs(out2)
    rx = Receiver(d)
    rx.settle()
    imgs, _ = spot_frames(8)
    tx = Sender(d)
    tx.start(series_id=1, series_unique_id="before")
    for i in range(4):
        tx.image(i, imgs[i], series_id=1)
    wait_status(d, lambda w: w["frames_written"] >= 4, "4 frames written")
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace("  directory: out\n", "  directory: out2\n")
                .replace("  hits: true\n", "  hits: false\n"))
    assert d.request({"cmd": "reload"})["ok"]
    for i in range(4, 8):
        tx.image(i, imgs[i], series_id=1)
    tx.end(series_id=1)
    rx.collect_until_end()
    send_series(d, 2, series_id=2, uid="after", tx=tx)
    wait_status(d, lambda w: w["files_written"] == 3 and w["files_open"] == 0, "3 files written")
    # the series keeps its directory and its hits file across the reload's new setup
    assert os.listdir(out2) == ["after.h5"]
    assert sorted(f for f in os.listdir(out) if f.endswith(".h5")) == [
        "before-2.h5", "before-2_hits.h5", "before.h5", "before_hits.h5"]
    with h5py.File(os.path.join(out, "before.h5"), "r") as a, \
            h5py.File(os.path.join(out, "before-2.h5"), "r") as b:
        assert s(a["entry/faid/end_reason"][()]) == "setup"
        assert list(a["entry/data/frame_id"][()]) + list(b["entry/data/frame_id"][()]) == \
            list(range(8))
    hits = sorted(r["frame_id"] for r in rx.of("result") if r["is_hit"])
    got = []
    for name in ("before_hits.h5", "before-2_hits.h5"):
        with h5py.File(os.path.join(out, name), "r") as f:
            got += list(f["entry/data/frame_id"][()])
    assert sorted(got) == hits
