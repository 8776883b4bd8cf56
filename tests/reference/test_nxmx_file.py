"""The hits-only NXmx file (writer/faid_nxmx.c) read back by real readers: frames compressed here
by hdf5plugin's own filters (bitshuffle-LZ4, LZ4) or python-lz4 (a raw LZ4 block), written by the
module through tests/reference/nxmx_driver.c, must decode with h5py + hdf5plugin bit for bit to the
input pixels; the `nxmx` package (what DIALS reads NXmx with) must find the geometry and the
frames; the CXI peak arrays must equal the peaks given; every row of the layout table must exist;
a file is never overwritten; a SWMR reader sees the frames after each flush; the CrystFEL
geometry file states the same geometry as the NXmx groups."""

import os
import subprocess
import zlib

import h5py
import hdf5plugin
import lz4.block
import numpy as np
import nxmx
import pytest
from pyFAI.integrator.azimuthal import AzimuthalIntegrator

import faidtools
from dectris_stream import bslz4, lz4_h5

DRIVER = str(faidtools.FAID_BIN / "nxmx_driver")
ROWS, COLS = 37, 53
PX = 75e-6
GEOM = dict(pixel1=PX, pixel2=PX, dist=0.1, poni1=0.0015, poni2=0.002, wavelength=1e-10)


class Driver:
    def __init__(self):
        self.p = subprocess.Popen([DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)

    def __call__(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline().strip()
        assert out, "driver died on " + line
        return out

    def ok(self, line):
        r = self(line)
        assert r.startswith("ok"), (line, r)
        return r[3:]

    def lines_until_ok(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        rows = []
        while True:
            out = self.p.stdout.readline()
            assert out
            if out.startswith("ok"):
                return rows
            rows.append(out.rstrip("\n").split("\t"))

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=60) == 0


@pytest.fixture
def drv():
    d = Driver()
    yield d
    d.close()


def open_cmd(path, dtype="uint16", encoding="bslz4", max_peaks=4, swmr=0, mask=None, **geom):
    g = dict(GEOM, **geom)
    words = [f"path={path}", f"rows={ROWS}", f"cols={COLS}", f"dtype={dtype}",
             f"encoding={encoding}", f"max_peaks={max_peaks}", f"swmr={swmr}", "series=run-7",
             "detector=EIGER2_test"] + [f"{k}={v!r}" for k, v in g.items()]
    if mask is not None:
        words.append(f"mask={mask}")
    return "open " + " ".join(words)


def encode(arr, encoding):
    if encoding == "bslz4":
        return bslz4(arr)
    if encoding == "lz4":
        return lz4_h5(arr)
    if encoding == "lz4-raw":
        return lz4.block.compress(arr.tobytes(), store_size=False)
    return arr.tobytes()


def frames(n, dtype, seed):
    rng = np.random.default_rng(seed)
    stack = rng.poisson(30, (n, ROWS, COLS)).astype(dtype)
    stack[:, 3, 4] = np.iinfo(dtype).max  # a saturated pixel: every bit of the type survives
    return stack


def peaks_of(k, n):
    """n peak records (x, y, intensity, snr, npix, max_pixel) of frame k."""
    i = np.arange(n, dtype=np.float32)
    return np.stack([i * 1.25 + k, i * 0.5 + 2 * k, 100 + i, 5 + i, 3 + i, 40 + i], axis=1)


def write_hits(drv, tmp_path, name, stack, encoding, ids, npeaks, max_peaks=4, mask=None,
               swmr=0):
    path = str(tmp_path / name)
    maskfile = None
    if mask is not None:
        maskfile = str(tmp_path / (name + ".mask"))
        mask.astype(np.uint8).tofile(maskfile)
    drv.ok(open_cmd(path, stack.dtype.name, encoding, max_peaks, swmr, maskfile))
    for k, (fr, fid, n) in enumerate(zip(stack, ids, npeaks)):
        chunk = tmp_path / "chunk.bin"
        chunk.write_bytes(encode(fr, encoding))
        pk = tmp_path / "peaks.bin"
        peaks_of(k, n).astype(np.float32).tofile(pk)
        drv.ok(f"append {fid} {chunk} {pk if n >= 0 else ''}".rstrip())
    return path


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
@pytest.mark.parametrize("encoding", ["bslz4", "lz4", "lz4-raw", "none"])
def test_frames_bit_for_bit_and_peaks(drv, tmp_path, encoding, dtype):
    stack = frames(4, dtype, 11)
    ids = [5, 9, 1000000000007, 12]
    npeaks = [0, 3, 6, 4]  # 6 > max_peaks: cut at 4
    path = write_hits(drv, tmp_path, "hits.h5", stack, encoding, ids, npeaks)
    assert drv.ok("frames") == "4"
    drv.ok("close")
    with h5py.File(path, "r") as f:
        ds = f["/entry/data/data"]
        assert ds.shape == stack.shape and ds.dtype == dtype
        assert ds.chunks == (1, ROWS, COLS) and ds.maxshape[0] is None
        want = {"bslz4": {"32008": (0, 4, np.dtype(dtype).itemsize, 0, 2)},
                "lz4": {"32004": (0,)}, "lz4-raw": {"32004": (0,)}, "none": {}}[encoding]
        assert ds._filters == want
        for k in range(len(stack)):
            assert np.array_equal(ds[k], stack[k]), k
            mask, raw = ds.id.read_direct_chunk((k, 0, 0))
            assert mask == 0
            if encoding in ("bslz4", "lz4", "none"):
                assert bytes(raw) == encode(stack[k], encoding)  # stored as it arrived
            else:  # the raw block behind the 16-byte HDF5-LZ4 header, untouched
                block = encode(stack[k], encoding)
                assert bytes(raw)[16:] == block and len(raw) == len(block) + 16
        assert list(f["/entry/data/frame_id"][()]) == ids
        assert f["/entry/data/frame_id"].dtype == np.uint64
        res = f["/entry/result_1"]
        assert list(res["nPeaks"][()]) == [0, 3, 4, 4]
        names = ["peakXPosRaw", "peakYPosRaw", "peakTotalIntensity", "peakSNR", "peakNPixels",
                 "peakMaximumValue"]
        for k, n in enumerate(npeaks):
            m = min(n, 4)
            rec = peaks_of(k, n)
            for col, name in enumerate(names):
                row = res[name][k]
                assert res[name].shape == (4, 4) and res[name].dtype == np.float32
                assert np.array_equal(row[:m], rec[:m, col]), (k, name)
                assert not row[m:].any()


PEAK_NAMES = ["peakXPosRaw", "peakYPosRaw", "peakTotalIntensity", "peakSNR", "peakNPixels",
              "peakMaximumValue"]


def check_peak_rows(res, npeaks, max_peaks):
    assert list(res["nPeaks"][()]) == [min(n, max_peaks) for n in npeaks]
    for k, n in enumerate(npeaks):
        m = min(n, max_peaks)
        rec = peaks_of(k, n)
        for col, name in enumerate(PEAK_NAMES):
            row = res[name][k]
            assert np.array_equal(row[:m], rec[:m, col]), (k, name)
            assert not row[m:].any(), (k, name)


@pytest.mark.parametrize("max_peaks", [4096, 20000])
def test_peak_rows_in_blocks_across_flushes_and_chunk_edges(drv, tmp_path, max_peaks):
    """The per-frame rows are written a block at a time and each peak chunk is built by faid as a
    zlib stream (stored blocks for the peaks, deflate segments for the zeros): rows full, cut,
    empty and partly filled, a chunk flushed half full and rewritten when it fills (4096: 4 rows
    a chunk), a row longer than a stored block (20000 peaks: 80 kB, one row a chunk), read back
    by a SWMR reader after each flush and by libhdf5's deflate filter and zlib after close."""
    stack = frames(10, np.uint16, 5)
    npeaks = [0, max_peaks, max_peaks + 900, 1, 0, 0, 7, max_peaks - 1, 3, 0]
    path = str(tmp_path / "blocks.h5")
    drv.ok(open_cmd(path, "uint16", "bslz4", max_peaks, 1))

    def put(k):
        (tmp_path / "c.bin").write_bytes(bslz4(stack[k]))
        peaks_of(k, npeaks[k]).astype(np.float32).tofile(tmp_path / "p.bin")
        drv.ok(f"append {70 + k} {tmp_path / 'c.bin'} {tmp_path / 'p.bin'}")

    for k in range(2):
        put(k)
    drv.ok("flush")
    with h5py.File(path, "r", libver="latest", swmr=True) as f:
        res = f["/entry/result_1"]
        check_peak_rows(res, npeaks[:2], max_peaks)
        for k in range(2, 6):
            put(k)
        drv.ok("flush")
        for name in PEAK_NAMES + ["nPeaks"]:
            res[name].refresh()
        f["/entry/data/frame_id"].refresh()
        check_peak_rows(res, npeaks[:6], max_peaks)
        assert list(f["/entry/data/frame_id"][()]) == list(range(70, 76))
    for k in range(6, 10):
        put(k)
    drv.ok("close")
    with h5py.File(path, "r") as f:
        res = f["/entry/result_1"]
        check_peak_rows(res, npeaks, max_peaks)
        assert list(f["/entry/data/frame_id"][()]) == list(range(70, 80))
        ds = res["peakXPosRaw"]
        assert ds.compression == "gzip"
        rows = ds.chunks[0]
        for c in range(0, 10, rows):
            mask, raw = ds.id.read_direct_chunk((c, 0))
            assert mask == 0
            want = np.zeros((rows, max_peaks), np.float32)
            got = ds[c:c + rows]
            want[:len(got)] = got
            assert zlib.decompress(bytes(raw)) == want.tobytes()


def test_kill9_leaves_every_flushed_row(tmp_path):
    """SIGKILL after a flush and 11 more appends (ids and peaks of those still in faid's buffers,
    a peak chunk half full at the flush): a SWMR reader gets every frame flushed, with its id and
    peaks; the rows appended after the flush may be missing, never wrong."""
    drv = Driver()
    stack = frames(20, np.uint16, 8)
    npeaks = [(k * 7) % 40 for k in range(20)]
    path = str(tmp_path / "killed.h5")
    drv.ok(open_cmd(path, "uint16", "bslz4", 2048, 1))
    for k in range(20):
        (tmp_path / "c.bin").write_bytes(bslz4(stack[k]))
        peaks_of(k, npeaks[k]).astype(np.float32).tofile(tmp_path / "p.bin")
        drv.ok(f"append {300 + k} {tmp_path / 'c.bin'} {tmp_path / 'p.bin'}")
        if k == 8:
            drv.ok("flush")
    drv.p.kill()
    drv.p.wait()
    with h5py.File(path, "r", libver="latest", swmr=True) as f:
        ids = f["/entry/data/frame_id"][()]
        n = len(ids)
        assert 9 <= n <= 20 and list(ids) == list(range(300, 300 + n))
        assert f["/entry/data/data"].shape[0] >= n
        assert np.array_equal(f["/entry/data/data"][:n], stack[:n])
        res = f["/entry/result_1"]
        rows = min(n, res["peakSNR"].shape[0], res["nPeaks"].shape[0])
        assert rows >= 9
        check_peak_rows({name: res[name][:rows] for name in PEAK_NAMES + ["nPeaks"]},
                        npeaks[:rows], 2048)


def test_frame_ids_past_a_block(drv, tmp_path):
    """Frame ids and peak counts go to the file 1024 rows at a time: 1030 frames."""
    stack = frames(1, np.uint16, 6)
    path = str(tmp_path / "ids.h5")
    drv.ok(open_cmd(path, "uint16", "bslz4"))
    (tmp_path / "c.bin").write_bytes(bslz4(stack[0]))
    drv.ok(f"repeat 1030 5000 {tmp_path / 'c.bin'}")
    drv.ok("close")
    with h5py.File(path, "r") as f:
        assert list(f["/entry/data/frame_id"][()]) == list(range(5000, 6030))
        assert f["/entry/data/data"].shape[0] == 1030
        assert not f["/entry/result_1/nPeaks"][()].any()
        assert f["/entry/result_1/peakSNR"].shape == (1030, 4)
        assert not f["/entry/result_1/peakSNR"][()].any()


def test_bslz4_chunks_of_other_block_sizes(drv, tmp_path):
    """The dataset's cd_values say "default block"; a chunk made with another block size (its
    header says which) still decodes: the filter reads the block size from the chunk."""
    from dectris_stream import h5_chunk

    stack = frames(3, np.uint32, 6)
    path = str(tmp_path / "blocks.h5")
    drv.ok(open_cmd(path, "uint32", "bslz4"))
    for k, nelems in enumerate((256, 1024, 4096)):
        (tmp_path / "c.bin").write_bytes(
            h5_chunk(stack[k], hdf5plugin.Bitshuffle(nelems=nelems, cname="lz4")))
        drv.ok(f"append {k} {tmp_path / 'c.bin'}")
    drv.ok("close")
    with h5py.File(path, "r") as f:
        assert np.array_equal(f["/entry/data/data"][()], stack)


def test_lz4_raw_block_as_long_as_its_pixels(drv, tmp_path):
    """A raw LZ4 block exactly as long as the frame reads as stored bytes under the HDF5-LZ4
    framing: the module stores that frame decoded and unfiltered (filter mask 1)."""
    raw_len = ROWS * COLS * 2
    rng = np.random.default_rng(3)
    for lit in range(raw_len - 200, raw_len):
        buf = np.zeros(raw_len, np.uint8)
        buf[:lit] = rng.integers(0, 256, lit)
        block = lz4.block.compress(buf.tobytes(), store_size=False)
        if len(block) == raw_len:
            break
    else:
        pytest.fail("no LZ4 block of exactly the frame's length found")
    frame = buf.view(np.uint16).reshape(ROWS, COLS)
    path = str(tmp_path / "edge.h5")
    drv.ok(open_cmd(path, "uint16", "lz4-raw"))
    (tmp_path / "c.bin").write_bytes(block)
    drv.ok(f"append 3 {tmp_path / 'c.bin'}")
    drv.ok("close")
    with h5py.File(path, "r") as f:
        ds = f["/entry/data/data"]
        assert np.array_equal(ds[0], frame)
        assert ds.id.read_direct_chunk((0, 0, 0))[0] == 1


def test_nxmx_reads_geometry_and_frames(drv, tmp_path):
    stack = frames(3, np.uint16, 5)
    mask = np.zeros((ROWS, COLS), bool)
    mask[10:12, :] = True
    path = write_hits(drv, tmp_path, "hits.h5", stack, "bslz4", [1, 2, 3], [1, 1, 1],
                      mask=mask)
    drv.ok("close")
    with h5py.File(path, "r") as f:
        nx = nxmx.NXmx(f)
        (entry,) = nx.entries
        assert entry.definition == "NXmx"
        (data,) = entry.data
        assert nxmx.h5str(data.signal) == "data"
        assert np.array_equal(data["data"][()], stack)
        (ins,) = entry.instruments
        (det,) = ins.detectors
        assert det.distance.to("m").magnitude == pytest.approx(0.1, rel=1e-12)
        assert det.beam_center_x.to("pixel").magnitude == pytest.approx(0.002 / PX, rel=1e-12)
        assert det.beam_center_y.to("pixel").magnitude == pytest.approx(0.0015 / PX, rel=1e-12)
        assert f["/entry/instrument/detector/x_pixel_size"][()] == PX
        assert f["/entry/instrument/detector/y_pixel_size"][()] == PX
        (beam,) = ins.beams
        assert beam.incident_wavelength.to("angstrom").magnitude == pytest.approx(1.0)
        assert f["/entry/sample/beam"] == f["/entry/instrument/beam"]
        assert np.array_equal(det.pixel_mask[()], mask.astype(np.uint32))
        assert det.pixel_mask_applied is False
        assert det.bit_depth_image == 16
        (mod,) = det.modules
        assert list(mod.data_size) == [ROWS, COLS] and list(mod.data_origin) == [0, 0]
        # The lab position of the beam centre, through nxmx's own transformation chains:
        # module origin + bcx * fast + bcy * slow = (0, 0, distance).
        fast = mod.fast_pixel_direction
        slow = mod.slow_pixel_direction
        origin = nxmx.get_cumulative_transformation(
            nxmx.get_dependency_chain(fast.depends_on))[0][:3, 3]
        fvec = fast.vector * fast[()].to("mm").magnitude
        svec = slow.vector * slow[()].to("mm").magnitude
        bc = origin + det.beam_center_x.magnitude * fvec + det.beam_center_y.magnitude * svec
        assert np.allclose(bc, [0, 0, 100.0], atol=1e-9)
        chain = nxmx.get_dependency_chain(det.depends_on)
        assert chain[0].transformation_type == "translation"


def test_beam_centre_of_a_tilted_geometry_is_pyfais(drv, tmp_path):
    """With rot1/rot2 the file states the direct beam position and distance as pyFAI's Fit2D
    conversion computes them (centre in pixels from the first pixel's corner)."""
    geom = dict(GEOM, rot1=0.05, rot2=-0.03)
    path = str(tmp_path / "tilt.h5")
    drv.ok(open_cmd(path, rot1=0.05, rot2=-0.03))
    drv.ok("close")
    ai = AzimuthalIntegrator(dist=geom["dist"], poni1=geom["poni1"], poni2=geom["poni2"],
                             rot1=geom["rot1"], rot2=geom["rot2"], pixel1=PX, pixel2=PX,
                             wavelength=geom["wavelength"])
    f2d = ai.getFit2D()
    with h5py.File(path, "r") as f:
        det = f["/entry/instrument/detector"]
        assert det["beam_center_x"][()] == pytest.approx(f2d["centerX"], rel=1e-9)
        assert det["beam_center_y"][()] == pytest.approx(f2d["centerY"], rel=1e-9)
        assert det["distance"][()] * 1e3 == pytest.approx(f2d["directDist"], rel=1e-9)


def test_layout_rows_all_exist(drv, tmp_path):
    stack = frames(2, np.uint32, 1)
    path = write_hits(drv, tmp_path, "hits.h5", stack, "lz4", [7, 8], [2, 0],
                      mask=np.ones((ROWS, COLS), bool))
    rows = drv.lines_until_ok("layout")
    drv.ok("close")
    assert len(rows) > 30
    conditions = {r[5] for r in rows}
    assert conditions == {"always", "mask given", "wavelength known", "series known"}
    with h5py.File(path, "r") as f:
        for path_, kind, typ, shape, units, when in rows:
            if kind == "attribute":
                obj, name = path_.split("@")
                assert name in f[obj].attrs, path_
                continue
            assert path_ in f, path_
            obj = f[path_]
            if kind == "group":
                assert isinstance(obj, h5py.Group)
                assert nxmx.h5str(obj.attrs["NX_class"]) == typ, path_
            elif kind == "link":
                assert obj == f[typ], path_
            else:
                assert isinstance(obj, h5py.Dataset), path_
                if typ in ("float64", "float32", "int32", "uint32", "uint64"):
                    assert obj.dtype == np.dtype(typ), path_
                elif typ == "string":
                    assert obj.dtype.kind in "SO", path_
                elif typ == "detector dtype":
                    assert obj.dtype == np.uint32
                if shape == "scalar":
                    assert obj.shape == (), path_
                if units:
                    assert nxmx.h5str(obj.attrs["units"]) == units, path_
        # nothing in the file that the table does not list
        listed = {r[0] for r in rows if r[1] != "attribute"}
        seen = []
        f.visit(lambda name: seen.append("/" + name))
        assert set(seen) <= listed, set(seen) - listed


def test_never_overwrites(drv, tmp_path):
    path = tmp_path / "taken.h5"
    path.write_bytes(b"precious")
    r = drv(open_cmd(str(path)))
    assert r.startswith("err FAID_EIO") and str(path) in r
    assert path.read_bytes() == b"precious"
    geom = tmp_path / "taken.geom"
    geom.write_text("precious")
    drv.ok(open_cmd(str(tmp_path / "free.h5")))
    r = drv(f"geom {geom}")
    assert r.startswith("err FAID_EIO") and str(geom) in r
    assert geom.read_text() == "precious"
    drv.ok("close")


def test_unwritable_directory_and_bad_chunks_name_the_file_and_frame(drv, tmp_path):
    r = drv(open_cmd(str(tmp_path / "no" / "such" / "dir.h5")))
    assert r.startswith("err FAID_EIO") and "dir.h5" in r
    stack = frames(2, np.uint16, 2)
    path = write_hits(drv, tmp_path, "hits.h5", stack[:1], "bslz4", [40], [0])
    wrong = tmp_path / "wrong.bin"
    wrong.write_bytes(bslz4(stack[1][:-1]))  # one row short
    r = drv(f"append 41 {wrong}")
    assert r.startswith("err FAID_ESIZE") and "hits.h5" in r and "frame 41" in r
    wrong.write_bytes(b"\x00" * 5)
    r = drv(f"append 42 {wrong}")
    assert r.startswith("err") and "frame 42" in r
    assert drv.ok("frames") == "1"
    drv.ok("close")
    with h5py.File(path, "r") as f:
        assert f["/entry/data/data"].shape[0] == 1 and list(f["/entry/data/frame_id"]) == [40]
    r = drv(open_cmd(str(tmp_path / "raw.h5"), encoding="none"))
    assert r == "ok"
    (tmp_path / "short.bin").write_bytes(stack[0].tobytes()[:-2])
    r = drv(f"append 5 {tmp_path / 'short.bin'}")
    assert r.startswith("err FAID_ESIZE") and "frame 5" in r
    drv.ok("close")
    r = drv(open_cmd(str(tmp_path / "bad.h5"), dtype="float64"))
    assert r.startswith("err FAID_EINVAL") and not (tmp_path / "bad.h5").exists()
    r = drv(open_cmd(str(tmp_path / "bad.h5"), max_peaks=0))
    assert r.startswith("err FAID_EINVAL") and not (tmp_path / "bad.h5").exists()


def test_swmr_reader_sees_frames_after_flush(drv, tmp_path):
    stack = frames(5, np.uint16, 9)
    path = str(tmp_path / "live.h5")
    drv.ok(open_cmd(path, swmr=1))

    def put(k):
        (tmp_path / "c.bin").write_bytes(bslz4(stack[k]))
        drv.ok(f"append {100 + k} {tmp_path / 'c.bin'}")

    put(0)
    put(1)
    drv.ok("flush")
    with h5py.File(path, "r", libver="latest", swmr=True) as f:
        ds, ids = f["/entry/data/data"], f["/entry/data/frame_id"]
        assert ds.shape[0] == 2 and np.array_equal(ds[()], stack[:2])
        put(2)
        put(3)
        put(4)
        drv.ok("flush")
        ds.refresh()
        ids.refresh()
        assert ds.shape[0] == 5 and np.array_equal(ds[()], stack)
        assert list(ids[()]) == [100, 101, 102, 103, 104]
    drv.ok("close")


def parse_geom(text):
    out = {}
    for line in text.splitlines():
        line = line.split(";", 1)[0].strip()
        if not line:
            continue
        k, v = (s.strip() for s in line.split("=", 1))
        assert k not in out, k
        out[k] = v
    return out


def test_crystfel_geometry(drv, tmp_path):
    """CrystFEL is not in Debian 12: the file is parsed here, every value checked, and the lab
    position CrystFEL computes for a pixel (corner + fs * fs_vec + ss * ss_vec, in pixels, at
    clen) compared with the NXmx file's for the same pixel."""
    mask = np.zeros((ROWS, COLS), bool)
    mask[0, 0] = True
    path = write_hits(drv, tmp_path, "run_hits.h5", frames(1, np.uint16, 1), "bslz4", [1], [2],
                      mask=mask)
    gp = drv.ok(f"geompath {path}")
    assert gp == str(tmp_path / "run_hits.geom")
    drv.ok(f"geom {gp}")
    drv.ok("close")
    g = parse_geom(open(gp).read())
    known = {"wavelength", "clen", "coffset", "adu_per_photon", "res", "data", "dim0", "dim1",
             "dim2", "peak_list", "peak_list_type", "mask", "mask_bad", "p0/min_fs",
             "p0/max_fs", "p0/min_ss", "p0/max_ss", "p0/corner_x", "p0/corner_y", "p0/fs",
             "p0/ss"}
    assert set(g) == known
    assert g["wavelength"] == "1 A"
    assert float(g["clen"]) == pytest.approx(0.1, rel=1e-9)
    assert float(g["res"]) == pytest.approx(1 / PX, rel=1e-9)
    assert (g["data"], g["dim0"], g["dim1"], g["dim2"]) == ("/entry/data/data", "%", "ss", "fs")
    assert (g["peak_list"], g["peak_list_type"]) == ("/entry/result_1", "cxi")
    assert g["mask"] == "/entry/instrument/detector/pixel_mask"
    assert int(g["mask_bad"], 16) & 1
    assert (g["p0/min_fs"], g["p0/max_fs"]) == ("0", str(COLS - 1))
    assert (g["p0/min_ss"], g["p0/max_ss"]) == ("0", str(ROWS - 1))
    with h5py.File(path, "r") as f:
        det = f["/entry/instrument/detector"]
        bcx, bcy = det["beam_center_x"][()], det["beam_center_y"][()]
        assert f[g["data"]].shape == (1, ROWS, COLS)
        assert set(f[g["peak_list"]]) >= {"nPeaks", "peakXPosRaw", "peakYPosRaw",
                                          "peakTotalIntensity"}
        assert f[g["mask"]][0, 0] & int(g["mask_bad"], 16)

        def vec(s):
            parts = dict((p[-1], float(p[:-1])) for p in s.split())
            return np.array([parts.get("x", 0.0), parts.get("y", 0.0)])

        corner = np.array([float(g["p0/corner_x"]), float(g["p0/corner_y"])])
        fs, ss = vec(g["p0/fs"]), vec(g["p0/ss"])
        mod = f["/entry/instrument/detector/module"]
        origin = mod["module_offset"].attrs["offset"]
        fx = mod["fast_pixel_direction"].attrs["vector"]
        sy = mod["slow_pixel_direction"].attrs["vector"]
        for pfs, pss in [(0, 0), (bcx, bcy), (COLS - 1, 7), (12.5, ROWS - 1)]:
            cf = (corner + pfs * fs + pss * ss) / float(g["res"])
            nx = origin + pfs * PX * fx + pss * PX * sy
            assert np.allclose(cf, nx[:2], atol=1e-12), (pfs, pss)
        assert np.allclose(corner, [bcx, bcy])


def test_crystfel_geometry_needs_square_pixels_and_tells_unknown_wavelength(drv, tmp_path):
    drv.ok(open_cmd(str(tmp_path / "a.h5"), pixel1=1e-4, pixel2=7.5e-5))
    r = drv(f"geom {tmp_path / 'a.geom'}")
    assert r.startswith("err FAID_EUNSUP") and "square" in r
    assert not (tmp_path / "a.geom").exists()
    drv.ok("close")
    drv.ok(open_cmd(str(tmp_path / "b.h5"), wavelength=0))
    drv.ok(f"geom {tmp_path / 'b.geom'}")
    drv.ok("close")
    text = (tmp_path / "b.geom").read_text()
    assert "wavelength" not in parse_geom(text) and "not known" in text
    with h5py.File(tmp_path / "b.h5", "r") as f:
        assert "incident_wavelength" not in f["/entry/instrument/beam"]


def test_faidctl_geometry_crystfel_is_the_modules(drv, tmp_path):
    """`faidctl geometry --crystfel` prints what the writer puts next to a hits file."""
    poni = tmp_path / "g.poni"
    poni.write_text("poni_version: 2.1\nDetector: Detector\n"
                    'Detector_config: {"pixel1": 7.5e-05, "pixel2": 7.5e-05, '
                    f'"max_shape": [{ROWS}, {COLS}], "orientation": 2}}\n'
                    "Distance: 0.1\nPoni1: 0.0015\nPoni2: 0.002\nRot1: 0.01\nRot2: 0\nRot3: 0\n"
                    "Wavelength: 1e-10\n")
    faidctl = str(faidtools.FAID_BIN / "faidctl")
    r = subprocess.run([faidctl, "geometry", "--poni", str(poni), "--crystfel", "--with-mask"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    mask = tmp_path / "m.bin"
    np.ones((ROWS, COLS), np.uint8).tofile(mask)
    drv.ok(open_cmd(str(tmp_path / "h.h5"), mask=str(mask), rot1=0.01, orientation=2))
    drv.ok(f"geom {tmp_path / 'h.geom'}")
    drv.ok("close")
    mine = parse_geom((tmp_path / "h.geom").read_text())
    assert parse_geom(r.stdout) == mine
    assert float(mine["p0/corner_y"]) == pytest.approx(ROWS - 0.0015 / PX, rel=1e-9)
    out = tmp_path / "cmd.geom"
    r = subprocess.run([faidctl, "geometry", "--poni", str(poni), "--crystfel", "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "mask" not in parse_geom(out.read_text())
    r = subprocess.run([faidctl, "geometry", "--poni", str(poni), "--crystfel", "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and str(out) in r.stderr


def test_file_size_limit_leaves_the_last_flush_readable(tmp_path):
    """A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored as the daemon does) stops the writes: the
    error names the file and the frame, later appends and flushes fail at once, close reports
    it, and the file stays as its last flush left it: a SWMR reader gets every flushed frame.
    The same process then writes another file (libhdf5 is not left broken) and exits cleanly
    (libhdf5 1.10.8 used to crash at exit after the failed close)."""
    import resource
    import signal

    limit = 200000

    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    drv = Driver.__new__(Driver)
    drv.p = subprocess.Popen([DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             preexec_fn=pre)
    rng = np.random.default_rng(4)
    stack = rng.integers(0, 60000, (80, ROWS, COLS)).astype(np.uint16)  # incompressible
    path = str(tmp_path / "full.h5")
    drv.ok(open_cmd(path, swmr=1))
    flushed, err = 0, None
    for k, fr in enumerate(stack):
        (tmp_path / "c.bin").write_bytes(bslz4(fr))
        r = drv(f"append {500 + k} {tmp_path / 'c.bin'}")
        if not r.startswith("ok"):
            err = r
            break
        r = drv("flush")
        if not r.startswith("ok"):
            err = r
            break
        flushed = k + 1
    assert err is not None, "the limit was never reached"
    assert err.startswith("err FAID_EIO") and path in err
    assert f"keeps the {flushed} frames" in err
    r = drv(f"append 999 {tmp_path / 'c.bin'}")
    assert r.startswith("err FAID_EIO") and "frame 999" in r and "earlier write" in r
    assert drv("flush").startswith("err FAID_EIO")
    assert drv("close").startswith("err FAID_EIO")
    assert os.path.getsize(path) <= limit
    with h5py.File(path, "r", libver="latest", swmr=True) as f:
        assert f["/entry/data/data"].shape[0] == flushed > 0
        assert np.array_equal(f["/entry/data/data"][()], stack[:flushed])
        assert list(f["/entry/data/frame_id"][()]) == list(range(500, 500 + flushed))
    small = write_hits(drv, tmp_path, "after.h5", stack[:1], "none", [1], [0])
    drv.ok("close")
    with h5py.File(small, "r") as f:
        assert np.array_equal(f["/entry/data/data"][0], stack[0])
    drv.close()
