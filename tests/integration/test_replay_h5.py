"""faidctl replay --h5 through the real daemon: small HDF5 files written by h5py + hdf5plugin
(bitshuffle-LZ4, LZ4, gzip, and an EIGER-style master file whose data_000001 / data_000002 are
external links to data files) are replayed in the DECTRIS v2 and native protocols. Every frame
must be accounted for (one result per frame, ids in order, end complete) with the numbers of
`faidctl process` on the same pixels read back by h5py; the file's geometry is stated in the
DECTRIS start. Nothing asserts on time. Harness: test_daemon.py."""

import os
import subprocess

import h5py
import hdf5plugin
import numpy as np
import pytest

from test_daemon import (BIN, FAIDCTL, LONG, ROWS, COLS, Receiver, arr, daemons,  # noqa: F401
                         ep, tmpdir_)


def write_nexus(path, stack, filt, geometry=True):
    with h5py.File(path, "w") as f:
        f.create_dataset("/entry/data/data", data=stack, chunks=(1,) + stack.shape[1:], **filt)
        if geometry:
            det = f.create_group("/entry/instrument/detector")
            det["beam_center_x"] = 60.5
            det["beam_center_y"] = 70.25
            det["detector_distance"] = 0.12
            det["x_pixel_size"] = 1e-4
            det["y_pixel_size"] = 1e-4
            f["/entry/instrument/beam/incident_wavelength"] = 0.9


def replay(d, path, *args):
    r = subprocess.run([FAIDCTL, "replay", "--h5", str(path), "--to", ep(d.ports["in"]),
                        "--timeout", str(LONG), *args], capture_output=True, text=True,
                       timeout=LONG)
    assert r.returncode == 0, r.stderr
    return r


def check(d, tmpdir, rx, stack, name, n_ends=1, ids=None):
    rx.collect_until_end(n_ends=n_ends)
    results = rx.of("result")
    assert [r["frame_id"] for r in results] == (list(range(len(stack))) if ids is None else ids)
    end = rx.of("end")[-1]
    assert end["frames_received"] == end["frames_processed"] == len(stack)
    assert not end["incomplete"]
    out = os.path.join(tmpdir, "ref-" + name)
    os.makedirs(out)
    np.save(os.path.join(out, name + ".npy"), stack)
    r = subprocess.run([FAIDCTL, "process", "-c", d.config, "--device", "cpu", "-o", out,
                        os.path.join(out, name + ".npy")], capture_output=True, text=True,
                       timeout=LONG)
    assert r.returncode == 0, r.stderr
    for k, res in enumerate(results):
        ref = np.loadtxt(os.path.join(out, "%s_%05d.dat" % (name, k)))
        for col, key in enumerate(("I", "sigma", "std", "count"), start=1):
            want = ref[:, col].astype(np.float32)
            assert np.array_equal(arr(res[key]).view(np.uint32), want.view(np.uint32)), (k, key)
    c = d.status()["counters"]
    assert c["received"] == c["processed"] + c["failed"] + c["dropped"]


def frames(n, dtype, seed):
    rng = np.random.default_rng(seed)
    return rng.poisson(25, (n, ROWS, COLS)).astype(dtype)


@pytest.mark.parametrize("codec", ["bslz4", "lz4", "gzip"])
def test_replay_h5_dectris_v2(daemons, tmpdir_, codec):
    filt = {"bslz4": hdf5plugin.Bitshuffle(nelems=0, cname="lz4"), "lz4": hdf5plugin.LZ4(),
            "gzip": {"compression": "gzip"}}[codec]
    stack = frames(5, np.uint16, 3)
    path = os.path.join(tmpdir_, "data.h5")
    write_nexus(path, stack, filt)
    d = daemons(lossless=True)
    rx = Receiver(d, lossless=True)
    r = replay(d, path, "--protocol", "dectris-v2", "--series-id", "9")
    assert ("%s chunks" % ("decoded" if codec == "gzip" else codec)) in r.stderr
    check(d, tmpdir_, rx, stack, "h5" + codec)
    st = rx.of("start")[0]
    assert st["series_id"] == 9 and st["input"]["protocol"] == "dectris-v2"
    rep = st["input"]["reported"]
    assert rep["beam_center_x"] == pytest.approx(60.5) and rep["beam_center_y"] == pytest.approx(
        70.25)
    assert rep["detector_distance"] == pytest.approx(0.12)
    assert rep["incident_wavelength"] == pytest.approx(0.9)
    assert d.terminate() == 0


def test_replay_h5_master_file_native(daemons, tmpdir_):
    """An EIGER master file: /entry/data/data_000001 and _000002 are external links to two data
    files; replayed in the native protocol, frames continue across the files."""
    a, b = frames(3, np.uint32, 4), frames(2, np.uint32, 5)
    filt = hdf5plugin.Bitshuffle(nelems=0, cname="lz4")
    for name, part in (("m_data_000001.h5", a), ("m_data_000002.h5", b)):
        with h5py.File(os.path.join(tmpdir_, name), "w") as f:
            f.create_dataset("/entry/data/data", data=part, chunks=(1, ROWS, COLS), **filt)
    master = os.path.join(tmpdir_, "m_master.h5")
    with h5py.File(master, "w") as f:
        f["/entry/data/data_000001"] = h5py.ExternalLink("m_data_000001.h5", "/entry/data/data")
        f["/entry/data/data_000002"] = h5py.ExternalLink("m_data_000002.h5", "/entry/data/data")
    d = daemons(lossless=True)
    rx = Receiver(d, lossless=True)
    r = replay(d, master)
    assert "frames: 5" in r.stdout
    check(d, tmpdir_, rx, np.concatenate([a, b]), "master")
    # --dataset picks one.
    replay(d, master, "--dataset", "/entry/data/data_000002", "--series-id", "2")
    rx.collect_until_end(n_ends=2)  # cumulative: both series
    assert [x["frame_id"] for x in rx.of("result") if x["series_id"] == 2] == [0, 1]
    assert d.terminate() == 0


def test_replay_h5_errors(tmpdir_):
    path = os.path.join(tmpdir_, "x.h5")
    with h5py.File(path, "w") as f:
        f["/other"] = np.zeros((2, 4, 4), np.uint16)
    r = subprocess.run([FAIDCTL, "replay", "--h5", path, "--to", "tcp://127.0.0.1:1"],
                       capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 1 and "/entry/data/data" in r.stderr
    r = subprocess.run([FAIDCTL, "replay", "--h5", path, "--dataset", "/other", "--encoding",
                        "lz4"], capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 2 and "as stored" in r.stderr
    r = subprocess.run([FAIDCTL, "replay", "--h5", os.path.join(tmpdir_, "none.h5")],
                       capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 1 and "cannot open" in r.stderr


def test_files_that_crash_libhdf5_are_an_error():
    # Found by the h5 fuzz target: on these files libhdf5 1.10 itself crashes (a read past a
    # buffer in H5F__accum_read under H5B2_open: SIGSEGV), and faidctl replay --h5 died with it.
    # faidctl now reads HDF5 in a child process: an error naming the file and exit status 1.
    # (Under ASan the child's crash is reported by ASan instead: still an error.)
    folder = os.path.join(os.path.dirname(__file__), "..", "fuzz", "libhdf5-crashes")
    files = sorted(os.listdir(folder))
    assert files
    for name in files:
        path = os.path.join(folder, name)
        r = subprocess.run([FAIDCTL, "replay", "--h5", path, "--to", "tcp://127.0.0.1:9",
                            "--timeout", "5"], capture_output=True, text=True, timeout=LONG)
        assert r.returncode == 1, (name, r.returncode, r.stderr[-2000:])
        assert path in r.stderr and ("HDF5 library crashed" in r.stderr or
                                     "HDF5 reader process failed" in r.stderr), r.stderr[-2000:]


def write_hits_file(path, stack, ids, encoding):
    """A faid hits file written by the hits-file module itself (tests/reference/nxmx_driver.c):
    each frame compressed here, handed over as it would arrive, with its frame id."""
    drv = subprocess.Popen([os.path.join(BIN, "nxmx_driver")], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    cmds = ["open path=%s rows=%d cols=%d dtype=%s encoding=%s pixel1=1e-4 pixel2=1e-4 dist=0.12 "
            "poni1=0.00702 poni2=0.00605 wavelength=0.9e-10 max_peaks=8 series=hits"
            % (path, ROWS, COLS, stack.dtype.name, encoding)]
    for k, (fr, fid) in enumerate(zip(stack, ids)):
        chunk = "%s.chunk%d" % (path, k)
        if encoding == "bslz4":
            filt = hdf5plugin.Bitshuffle(nelems=0, cname="lz4")
            with h5py.File(chunk + ".h5", "w", driver="core", backing_store=False) as f:
                ds = f.create_dataset("x", data=fr, chunks=fr.shape, **filt)
                data = bytes(ds.id.read_direct_chunk((0, 0))[1])
        else:
            import lz4.block
            data = lz4.block.compress(fr.tobytes(), store_size=False)
        with open(chunk, "wb") as f:
            f.write(data)
        cmds.append("append %d %s" % (fid, chunk))
    cmds += ["close", "quit"]
    out, _ = drv.communicate("\n".join(cmds) + "\n", timeout=LONG)
    assert drv.returncode == 0 and out.split() == ["ok"] * (len(cmds) - 1), out


@pytest.mark.parametrize("encoding,protocol", [("bslz4", "native"), ("lz4-raw", "native"),
                                               ("bslz4", "dectris-v2")])
def test_replay_hits_file_keeps_frame_ids(daemons, tmpdir_, encoding, protocol):
    """A hits file replayed into the daemon: the original frame ids, not 0, 1, 2, ..., and the
    same numbers as `faidctl process` on the pixels. A raw LZ4 block (lz4-raw) is stored behind
    an HDF5-LZ4 header, so it is replayed as an lz4 chunk."""
    stack = frames(4, np.uint16, 8)
    ids = [7, 19, 20, 100000]
    path = os.path.join(tmpdir_, "run_hits.h5")
    write_hits_file(path, stack, ids, encoding)
    d = daemons(lossless=True)
    rx = Receiver(d, lossless=True)
    r = replay(d, path, "--protocol", protocol, "--series-id", "4")
    sent = "bslz4" if encoding == "bslz4" else "lz4"
    assert "%s chunks" % sent in r.stderr and "frame ids from the file" in r.stderr
    assert "frames: 4" in r.stdout
    check(d, tmpdir_, rx, stack, "hits" + encoding, ids=ids)
    st = rx.of("start")[0]
    if protocol == "dectris-v2":
        rep = st["input"]["reported"]
        assert rep["beam_center_x"] == pytest.approx(60.5)
        assert rep["beam_center_y"] == pytest.approx(70.2)
        assert rep["detector_distance"] == pytest.approx(0.12)
    # --first-frame still renumbers; --frames beyond the file continues after the largest id.
    replay(d, path, "--series-id", "5", "--first-frame", "50")
    replay(d, path, "--series-id", "6", "--frames", "6")
    rx.collect_until_end(n_ends=3)
    assert [x["frame_id"] for x in rx.of("result") if x["series_id"] == 5] == [50, 51, 52, 53]
    assert [x["frame_id"] for x in rx.of("result") if x["series_id"] == 6] == ids + [100001,
                                                                                    100002]
    assert d.terminate() == 0
