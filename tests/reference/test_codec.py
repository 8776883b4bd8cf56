"""Bit-exact agreement of faid's codecs with the HDF5 reference filters of hdf5plugin.

Reference chunks come from h5py + hdf5plugin (Bitshuffle(cname='lz4') = filter 32008, LZ4 =
filter 32004): a dataset whose single chunk is the whole array is written and its raw chunk read
back with read_direct_chunk. faid decodes them with `faidctl decode --device ref` (plain C) and
`--device cpu` (the OpenCL kernel on PoCL). The other direction hands chunks made by faid's encoder
(`test_codec encode`) to hdf5plugin through write_direct_chunk and reads the dataset. The DECTRIS
stream v2 samples (real EIGER2 bslz4 and lz4 arrays) are decoded by both sides when present.
"""
import os
import pathlib
import struct
import subprocess

import h5py
import hdf5plugin
import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("FAID_BIN", REPO / "build" / "bin"))
FAIDCTL = BIN / "faidctl"
ENCODER = BIN / "test_codec"
SHARED = pathlib.Path(os.environ.get("FAID_SHARED", REPO.parent / "shared"))
DECTRIS = SHARED / "data" / "dectris-stream2"

pytestmark = pytest.mark.skipif(not FAIDCTL.exists(), reason=f"{FAIDCTL} not built")

DEVICES = ["ref", "cpu"]


def data(shape, dtype, kind, seed=0):
    """Random bytes or diffraction-like counts (Poisson background, bright spots, masked gaps)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if kind == "random":
        return rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype).reshape(shape)
    a = rng.poisson(1.5, n).astype(np.float64)
    spots = rng.integers(0, n, max(1, n // 500))
    a[spots] += rng.exponential(2000, spots.size)
    if dtype.kind == "f":
        return (a * 0.37).astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    a = np.minimum(a, info.max - 1)
    if n > 64:
        a[n // 3 : n // 3 + 40] = info.max  # a gap of saturated / masked pixels
    return a.astype(dtype).reshape(shape)


def h5_filter(enc, nelems=0, nbytes=0):
    if enc == "bslz4":
        return hdf5plugin.Bitshuffle(nelems=nelems, cname="lz4")
    return hdf5plugin.LZ4(nbytes=nbytes)


def ref_chunk(tmp_path, arr, filt):
    with h5py.File(tmp_path / "ref.h5", "w") as f:
        ds = f.create_dataset("x", data=arr, chunks=arr.shape, **filt)
        mask, raw = ds.id.read_direct_chunk((0,) * arr.ndim)
        assert mask == 0
    return bytes(raw)


def ref_decode(tmp_path, raw, shape, dtype, filt):
    with h5py.File(tmp_path / "dec.h5", "w") as f:
        ds = f.create_dataset("x", shape=shape, dtype=dtype, chunks=shape, **filt)
        ds.id.write_direct_chunk((0,) * len(shape), raw)
        return ds[...]


def faid_decode(tmp_path, raw, shape, dtype, enc, device, check=True):
    src = tmp_path / "chunk.bin"
    out = tmp_path / "out.npy"
    src.write_bytes(raw)
    if out.exists():
        out.unlink()
    cmd = [str(FAIDCTL), "decode", str(src), "-o", str(out),
           "--shape", ",".join(str(s) for s in shape), "--dtype", np.dtype(dtype).name,
           "--encoding", enc, "--device", device]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if not check:
        return r
    assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"
    return np.load(out)


def faid_encode(tmp_path, arr, enc, block=0):
    src = tmp_path / "raw.bin"
    out = tmp_path / "enc.bin"
    src.write_bytes(np.ascontiguousarray(arr).tobytes())
    r = subprocess.run([str(ENCODER), "encode", enc, str(arr.dtype.itemsize), str(block),
                        str(src), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out.read_bytes()


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


COUNTS = [1, 7, 8, 2047, 2048, 2049]
DTYPES = ["uint8", "uint16", "uint32", "int32", "float32"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_bslz4_reference_chunks(tmp_path, dtype):
    for n in COUNTS:
        for kind in ("random", "diffraction"):
            arr = data((n,), dtype, kind, seed=n)
            raw = ref_chunk(tmp_path, arr, h5_filter("bslz4"))
            for dev in DEVICES:
                got = faid_decode(tmp_path, raw, arr.shape, dtype, "bslz4", dev)
                assert same(got, arr), (dtype, n, kind, dev)


@pytest.mark.parametrize("dtype,nelems", [("uint32", 256), ("uint16", 1000), ("uint8", 64),
                                          ("uint32", 4096), ("float32", 8)])
def test_bslz4_block_sizes(tmp_path, dtype, nelems):
    arr = data((37, 113), dtype, "diffraction", seed=nelems)
    filt = h5_filter("bslz4", nelems=nelems)
    raw = ref_chunk(tmp_path, arr, filt)
    assert struct.unpack(">I", raw[8:12])[0] == nelems * arr.dtype.itemsize
    for dev in DEVICES:
        assert same(faid_decode(tmp_path, raw, arr.shape, dtype, "bslz4", dev), arr), dev
    # and faid's encoder with the same block size, read by hdf5plugin
    mine = faid_encode(tmp_path, arr, "bslz4", nelems)
    assert same(ref_decode(tmp_path, mine, arr.shape, dtype, filt), arr)


def test_bslz4_eiger4m(tmp_path):
    shape = (2167, 2070)
    arr = data(shape, "uint32", "diffraction", seed=4)
    raw = ref_chunk(tmp_path, arr, h5_filter("bslz4"))
    for dev in DEVICES:
        assert same(faid_decode(tmp_path, raw, shape, "uint32", "bslz4", dev), arr), dev
    mine = faid_encode(tmp_path, arr, "bslz4")
    assert same(ref_decode(tmp_path, mine, shape, "uint32", h5_filter("bslz4")), arr)


@pytest.mark.parametrize("dtype", DTYPES)
def test_faid_encoder_read_by_hdf5plugin(tmp_path, dtype):
    for n in COUNTS + [20000]:
        for kind in ("random", "diffraction"):
            arr = data((n,), dtype, kind, seed=n + 1)
            for enc in ("bslz4", "lz4"):
                mine = faid_encode(tmp_path, arr, enc, 8192 if enc == "lz4" and n > 3000 else 0)
                got = ref_decode(tmp_path, mine, arr.shape, dtype, h5_filter(enc))
                assert same(got, arr), (dtype, n, kind, enc)


@pytest.mark.parametrize("nbytes", [0, 8192, 1000])
def test_lz4_reference_chunks(tmp_path, nbytes):
    for dtype, kind in (("uint16", "diffraction"), ("uint8", "random"), ("int32", "diffraction")):
        arr = data((101, 67), dtype, kind, seed=nbytes)
        raw = ref_chunk(tmp_path, arr, h5_filter("lz4", nbytes=nbytes))
        for dev in DEVICES:
            assert same(faid_decode(tmp_path, raw, arr.shape, dtype, "lz4", dev), arr), (dev,
                                                                                         dtype)


def test_uncompressed(tmp_path):
    arr = data((13, 17), "int16", "random")
    for dev in DEVICES:
        assert same(faid_decode(tmp_path, arr.tobytes(), arr.shape, "int16", "none", dev), arr)
    r = faid_decode(tmp_path, arr.tobytes()[:-1], arr.shape, "int16", "none", "ref", check=False)
    assert r.returncode == 1 and "chunk.bin" in r.stderr


def test_lz4_raw_block(tmp_path):
    # One raw LZ4 block: the payload of an HDF5-LZ4 chunk whose only block is compressed.
    arr = data((64, 64), "uint16", "diffraction", seed=3)
    raw = ref_chunk(tmp_path, arr, h5_filter("lz4"))
    (clen,) = struct.unpack(">I", raw[12:16])
    assert clen < arr.nbytes and len(raw) == 16 + clen
    for dev in DEVICES:
        assert same(faid_decode(tmp_path, raw[16:], arr.shape, "uint16", "lz4-raw", dev), arr)
    r = faid_decode(tmp_path, raw[16:-3], arr.shape, "uint16", "lz4-raw", "ref", check=False)
    assert r.returncode == 1 and "chunk.bin" in r.stderr


@pytest.mark.parametrize("enc", ["bslz4", "lz4"])
def test_truncated_and_corrupt(tmp_path, enc):
    arr = data((50, 90), "uint32", "diffraction", seed=9)
    raw = ref_chunk(tmp_path, arr, h5_filter(enc, nbytes=4096))
    rng = np.random.default_rng(5)
    for dev in DEVICES:
        # truncated anywhere: always an error naming the file, exit status 1
        for cut in (0, 5, 12, 15, len(raw) // 2, len(raw) - 1):
            r = faid_decode(tmp_path, raw[:cut], arr.shape, "uint32", enc, dev, check=False)
            assert r.returncode == 1, (dev, cut, r.stderr)
            assert "chunk.bin" in r.stderr
        # trailing garbage and a wrong expected shape
        r = faid_decode(tmp_path, raw + b"\0", arr.shape, "uint32", enc, dev, check=False)
        assert r.returncode == 1 and "unexpected" in r.stderr
        r = faid_decode(tmp_path, raw, (50, 91), "uint32", enc, dev, check=False)
        assert r.returncode == 1 and "expected" in r.stderr
        # a block length that is off by one is always caught
        bad = bytearray(raw)
        (c0,) = struct.unpack(">I", bad[12:16])
        bad[12:16] = struct.pack(">I", c0 - 1)
        r = faid_decode(tmp_path, bytes(bad), arr.shape, "uint32", enc, dev, check=False)
        assert r.returncode == 1, (dev, r.stderr)
        # random corruption: an error or a decode, never a crash
        for _ in range(6):
            bad = bytearray(raw)
            for pos in rng.integers(16, len(raw), 4):
                bad[pos] ^= 1 << int(rng.integers(0, 8))
            r = faid_decode(tmp_path, bytes(bad), arr.shape, "uint32", enc, dev, check=False)
            assert r.returncode in (0, 1), (dev, r.returncode, r.stderr)


# --- DECTRIS stream v2 samples ------------------------------------------------------------


class Tag:
    def __init__(self, tag, value):
        self.tag, self.value = tag, value


def cbor_load(buf):
    """Minimal CBOR decoder: enough of RFC 8949 for the DECTRIS stream v2 messages."""

    def arg(pos, info):
        if info < 24:
            return info, pos
        if info == 31:
            return None, pos
        size = {24: 1, 25: 2, 26: 4, 27: 8}[info]
        return int.from_bytes(buf[pos:pos + size], "big"), pos + size

    def item(pos):
        ib = buf[pos]
        major, info = ib >> 5, ib & 31
        pos += 1
        if major == 7:
            if info in (20, 21):
                return info == 21, pos
            if info in (22, 23):
                return None, pos
            if info == 25:
                return float(np.frombuffer(buf[pos:pos + 2], ">f2")[0]), pos + 2
            if info == 26:
                return struct.unpack(">f", buf[pos:pos + 4])[0], pos + 4
            if info == 27:
                return struct.unpack(">d", buf[pos:pos + 8])[0], pos + 8
            return info, pos
        n, pos = arg(pos, info)
        if major == 0:
            return n, pos
        if major == 1:
            return -1 - n, pos
        if major in (2, 3):
            if n is None:  # indefinite: concatenate chunks
                parts = []
                while buf[pos] != 0xFF:
                    p, pos = item(pos)
                    parts.append(p)
                return (b"" if major == 2 else "").join(parts), pos + 1
            s = bytes(buf[pos:pos + n])
            return (s if major == 2 else s.decode("utf-8")), pos + n
        if major == 4:
            out = []
            while (n is None and buf[pos] != 0xFF) or (n is not None and len(out) < n):
                v, pos = item(pos)
                out.append(v)
            return out, pos + (1 if n is None else 0)
        if major == 5:
            out = {}
            while (n is None and buf[pos] != 0xFF) or (n is not None and len(out) < n):
                k, pos = item(pos)
                v, pos = item(pos)
                out[k] = v
            return out, pos + (1 if n is None else 0)
        v, pos = item(pos)
        return Tag(n, v), pos

    v, end = item(0)
    return v


def dectris_arrays(path):
    """(channel, shape, dtype, algorithm, chunk bytes) of every compressed image array."""
    msg = cbor_load(path.read_bytes())
    while isinstance(msg, Tag):  # self-described CBOR (tag 55799)
        msg = msg.value
    assert msg["type"] == "image"
    out = []
    for channel, md in msg["data"].items():
        assert md.tag == 40
        dims, typed = md.value
        dtype = {64: "uint8", 69: "uint16", 70: "uint32", 85: "float32"}[typed.tag]
        comp = typed.value
        assert comp.tag == 56500
        alg, _, chunk = comp.value
        out.append((channel, tuple(dims), dtype, alg, chunk))
    return out


DECTRIS_FILES = sorted(DECTRIS.glob("*/00000[12].cbor")) if DECTRIS.is_dir() else []


@pytest.mark.skipif(not DECTRIS_FILES, reason=f"no DECTRIS samples under {DECTRIS}")
@pytest.mark.parametrize("path", DECTRIS_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_dectris_stream2(tmp_path, path):
    arrays = dectris_arrays(path)
    assert arrays
    for channel, shape, dtype, alg, chunk in arrays:
        assert shape == (514, 1030)
        filt = h5_filter("bslz4" if alg == "bslz4" else "lz4")
        ref = ref_decode(tmp_path, chunk, shape, dtype, filt)
        assert ref.any()
        for dev in DEVICES:
            got = faid_decode(tmp_path, chunk, shape, dtype, alg, dev)
            assert same(got, ref), (channel, dev)
