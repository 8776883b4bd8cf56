"""faid's input formats (proto/faid_input*.c) against independent encoders.

Messages in DECTRIS stream v1 and v2 are built by tests/reference/dectris_stream.py (cbor2, JSON,
hdf5plugin's HDF5 filters, lz4.block: written from the specification, nothing shared with faid's
decoders), written part by part to files and decoded by `faidctl inspect`, which prints what faid
makes of the message and writes the frame's pixels (and the start's mask / flatfield / count-rate
table) as .npy: those must equal the arrays that were encoded, bit for bit. Broken messages must
be refused with the named error, never crash. The real EIGER2 messages in shared/data are
decoded channel by channel and compared with the hdf5plugin decode of the same bytes.
"""
import json
import os
import pathlib
import subprocess

import cbor2
import numpy as np
import pytest

import dectris_stream as ds

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("FAID_BIN", REPO / "build" / "bin"))
FAIDCTL = BIN / "faidctl"
SHARED = pathlib.Path(os.environ.get("FAID_SHARED", REPO.parent / "shared"))
if not (SHARED / "data").exists():
    SHARED = pathlib.Path("/work/shared")
DECTRIS = SHARED / "data" / "dectris-stream2"

pytestmark = pytest.mark.skipif(not FAIDCTL.exists(), reason=f"{FAIDCTL} not built")


def frame(shape, dtype, seed):
    """Diffraction-like counts with a saturated gap (DECTRIS marks bad pixels with 2^N - 1)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    a = rng.poisson(2.0, n).astype(np.float64)
    spots = rng.integers(0, n, max(1, n // 300))
    a[spots] += rng.exponential(3000, spots.size)
    if dt.kind == "f":
        return (a * 0.5).astype(dt).reshape(shape)
    info = np.iinfo(dt)
    a = np.minimum(a, info.max - 2)
    a[n // 4: n // 4 + 30] = info.max
    return a.astype(dt).reshape(shape)


def inspect(tmp_path, parts, *args, npy=True, extra_npy=()):
    files = []
    for k, p in enumerate(parts):
        f = tmp_path / f"part{k}.bin"
        f.write_bytes(p)
        files.append(str(f))
    out = tmp_path / "frame.npy"
    if out.exists():
        out.unlink()
    cmd = [str(FAIDCTL), "inspect", *args]
    if npy:
        cmd += ["--npy", str(out)]
    for opt, path in extra_npy:
        cmd += [opt, str(path)]
    r = subprocess.run(cmd + files, capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), (r.returncode, r.stderr)  # never a crash
    info = json.loads(r.stdout)
    assert info["ok"] == (r.returncode == 0), (info, r.stderr)
    pixels = np.load(out) if npy and info["ok"] and info["type"] == "image" else None
    return info, pixels


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---- stream v2 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "int32", "float32"])
@pytest.mark.parametrize("compression", ["bslz4", "lz4", None])
def test_v2_image_every_encoding_and_dtype(tmp_path, dtype, compression):
    for shape in [(37, 53), (64, 128)]:
        a = frame(shape, dtype, seed=shape[0])
        msg = ds.v2_encode(ds.v2_image(3, "uid-3", 17, {"threshold_1": a}, compression))
        info, px = inspect(tmp_path, [msg])
        assert info["format"] == "dectris-v2" and info["type"] == "image"
        assert info["series_id"] == 3 and info["series_unique_id"] == "uid-3"
        assert info["frame_id"] == 17 and info["shape"] == list(shape)
        assert info["dtype"] == np.dtype(dtype).name
        assert info["encoding"] == (compression or "none")
        assert info["channel"] == "threshold_1" and info["channel_index"] == 0
        assert info["start_time"] == [17000000, 50000000]
        assert info["appendix_bytes"] == len(cbor2.dumps([1, "x"]))
        assert info["user_data"] == [1, "x"]  # as faid's output carries it (msgpack)
        assert same(px, a)
        # the protocol named explicitly reads the same message
        info2, px2 = inspect(tmp_path, [msg], "--protocol", "dectris-v2")
        assert info2["ok"] and same(px2, a)


@pytest.mark.parametrize("compression", ["bslz4", "lz4", None])
def test_v2_two_channels(tmp_path, compression):
    shape = (40, 70)
    t1, t2 = frame(shape, "uint16", 1), frame(shape, "uint16", 2)
    msg = ds.v2_encode(ds.v2_image(1, "u", 0, {"threshold_1": t1, "threshold_2": t2},
                                   compression))
    info, px = inspect(tmp_path, [msg])
    assert info["channel"] == "threshold_1" and same(px, t1)
    info, px = inspect(tmp_path, [msg], "--channel", "threshold_2")
    assert info["channel"] == "threshold_2" and info["channel_index"] == 1 and same(px, t2)
    info, _ = inspect(tmp_path, [msg], "--channel", "difference")
    assert not info["ok"] and info["code"] == "FAID_ERANGE"
    assert '"difference"' in info["message"] and "threshold_2" in info["message"]
    assert info["header_ok"] and info["frame_id"] == 0  # still a frame of its series


@pytest.mark.parametrize("compression", ["bslz4", None])
def test_v2_start_metadata_and_arrays(tmp_path, compression):
    shape = (33, 45)
    rng = np.random.default_rng(5)
    masks = {c: (rng.random(shape) < 0.05).astype(np.uint32) * (1 + k)
             for k, c in enumerate(["threshold_1", "threshold_2"])}
    flats = {c: (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
             for c in ["threshold_1", "threshold_2"]}
    table = np.linspace(0, 1e6, 1001).astype(np.float32)
    start = ds.v2_start(4, "uid-4", ["threshold_1", "threshold_2"], shape, "uint16", masks, flats,
                        table, compression,
                        # Jungfraujoch's extras: used where they mean something, else ignored
                        magic_number=0x52320000, detector_distance=0.155, error_value=-1,
                        pixel_bit_depth=16, jfjoch_release="1.0.0-rc.107",
                        az_int_bin_to_q=[0.1, 0.2], unknown_nested={"a": [{"b": None}]})
    msg = ds.v2_encode(start)
    for chan, idx in (("", 0), ("threshold_2", 1)):
        args = ["--channel", chan] if chan else []
        m, f, c = tmp_path / "m.npy", tmp_path / "f.npy", tmp_path / "c.npy"
        info, _ = inspect(tmp_path, [msg], *args, npy=False,
                          extra_npy=[("--mask-npy", m), ("--flatfield-npy", f),
                                     ("--countrate-npy", c)])
        assert info["ok"], info
        assert info["type"] == "start" and info["series_id"] == 4 and info["nimages"] == 5
        meta = info["meta"]
        assert meta["channels"] == ["threshold_1", "threshold_2"]
        assert meta["beam_center_x"] == 512.25 and meta["beam_center_y"] == 257.5
        assert meta["incident_wavelength"] == 1.0 and meta["incident_energy"] == 12398.4
        assert meta["pixel_size_x"] == 75e-6 and meta["image_size_x"] == shape[1]
        assert meta["image_size_y"] == shape[0] and meta["image_dtype"] == "uint16"
        assert meta["detector_translation"] == [0.0, 0.0, 0.125]
        assert meta["detector_distance"] == 0.155 and meta["magic_number"] == 0x52320000
        assert meta["error_value"] == -1 and meta["saturation_value"] == 60000
        assert meta["threshold_energy"] == 6000.0 + 1000 * idx
        assert meta["sensor_material"] == "Si" and meta["pixel_mask_enabled"] is True
        assert info["user_data"] == {"sample": "lysozyme", "n": [1, 2, 3]}
        name = ["threshold_1", "threshold_2"][idx]
        assert same(np.load(m), masks[name])
        assert same(np.load(f), flats[name])
        got_table = np.load(c)
        assert got_table.tobytes() == table.tobytes() and got_table.dtype == np.float32
    info, _ = inspect(tmp_path, [msg], "--channel", "difference", npy=False)
    assert not info["ok"] and info["code"] == "FAID_ERANGE"


def test_v2_end_other_and_untagged(tmp_path):
    info, _ = inspect(tmp_path, [ds.v2_encode(ds.v2_end(9, "uid-9"))])
    assert info["ok"] and info["type"] == "end" and info["series_id"] == 9
    # Jungfraujoch's extra message types are read and reported, not errors
    cal = ds.v2_encode({"type": "calibration", "name": "pedestal_g0",
                        "data": ds.v2_array(np.zeros((4, 4), np.float32))})
    info, _ = inspect(tmp_path, [cal])
    assert info["ok"] and info["type"] == "other" and info["other_type"] == "calibration"
    # a bare CBOR map (no tag 55799) is DECTRIS v2 only when the protocol says so
    bare = ds.v2_encode(ds.v2_end(9, "uid-9"), tagged=False)
    info, _ = inspect(tmp_path, [bare], "--protocol", "dectris-v2")
    assert info["ok"] and info["type"] == "end"
    info, _ = inspect(tmp_path, [bare])
    assert not info["ok"] and info["code"] == "FAID_EPROTO"


def test_user_data_to_msgpack(tmp_path):
    """user_data goes to faid's msgpack output: CBOR items converted, v1 appendices as text or
    bytes."""
    ud = {"a": [1, -2, 2**64 - 1, -2**63, 1.5, None, True, False, "\u00e9\U0001f499"],
          "b": b"\x00\x01", "tagged": cbor2.CBORTag(1, 1700000000), "nested": [[[{"x": {}}]]]}
    info, _ = inspect(tmp_path, [ds.v2_encode(ds.v2_end(1, "u") | {"user_data": ud})])
    want = dict(ud, b={"bin": 2}, tagged=1700000000)
    assert info["user_data"] == want
    deep = 0
    for _ in range(40):
        deep = [deep]
    info, _ = inspect(tmp_path, [ds.v2_encode(ds.v2_end(1, "u") | {"user_data": deep})])
    assert info["ok"] and "deeper" in info["user_data_error"]
    a = frame((4, 4), "uint8", 0)
    info, _ = inspect(tmp_path, ds.v1_image(1, 0, a, "<", b"\xff\xfe binary"))
    assert info["user_data"] == {"bin": 9}
    info, _ = inspect(tmp_path, ds.v1_end(1), npy=False)
    assert "user_data" not in info


def test_v2_unknown_fields_ignored(tmp_path):
    a = frame((20, 30), "uint32", 3)
    img = ds.v2_image(2, "u", 5, {"threshold_1": a}, "bslz4",
                      spots=[[1.5, 2.5, 100.0]], spot_count=1, az_int_profile=[1.0, float("nan")],
                      indexing_result=False, indexing_unit_cell={"a": 79.1, "b": 79.1},
                      xfel_pulse_id=123456789, bkg_estimate=1.5,
                      big_unknown=cbor2.CBORTag(99999, b"\x00" * 5000))
    # unknown keys before "data" too
    img = {"extra_first": {"x": [1, 2, {"y": b"zz"}]}, **img}
    info, px = inspect(tmp_path, [ds.v2_encode(img)])
    assert info["ok"] and same(px, a)


def test_v2_refusals(tmp_path):
    a = frame((16, 24), "uint16", 4)

    def refused(msg, code, *words, args=()):
        info, _ = inspect(tmp_path, [msg], *args, npy=False)
        assert not info["ok"] and info["code"] == code, info
        for w in words:
            assert w in info["message"], (w, info["message"])
        return info

    img = ds.v2_image(1, "u", 7, {"threshold_1": a}, None)
    # bslz4 element size that is not the pixel size
    bad = dict(img, data={"threshold_1": cbor2.CBORTag(40, [[16, 24], cbor2.CBORTag(
        69, cbor2.CBORTag(56500, ["bslz4", 4, ds.bslz4(a)]))])})
    info = refused(ds.v2_encode(bad), "FAID_EUNSUP", "element size 4")
    assert info["header_ok"] and info["frame_id"] == 7
    # Jungfraujoch's bitshuffle-zstd: refused by name
    refused(ds.v2_encode(dict(img, data={"threshold_1": ds.v2_array(a, "bszstd")})),
            "FAID_EUNSUP", "bszstd")
    # big-endian typed array (tag 65 = uint16 BE)
    refused(ds.v2_encode(dict(img, data={"threshold_1": cbor2.CBORTag(
        40, [[16, 24], cbor2.CBORTag(65, a.byteswap().tobytes())])})), "FAID_EDTYPE",
        "big-endian")
    # shape and bytes that disagree
    refused(ds.v2_encode(dict(img, data={"threshold_1": cbor2.CBORTag(
        40, [[16, 25], cbor2.CBORTag(69, a.tobytes())])})), "FAID_ESIZE", "data.threshold_1")
    refused(ds.v2_encode(dict(img, data={"threshold_1": cbor2.CBORTag(
        40, [[16, 25], ds.v2_typed(a, "lz4")])})), "FAID_ESIZE", "lz4 header")
    # missing keys
    refused(ds.v2_encode({k: v for k, v in img.items() if k != "image_id"}), "FAID_EFORMAT",
            "image_id")
    refused(ds.v2_encode({k: v for k, v in img.items() if k != "series_id"}), "FAID_EFORMAT",
            "series_id")
    refused(ds.v2_encode({k: v for k, v in img.items() if k != "type"}), "FAID_EFORMAT",
            '"type"')
    # a hostile count: an array head claiming 2^32 items in a short message
    hostile = bytes.fromhex("d9d9f7") + bytes([0xa2]) + cbor2.dumps("type") + \
        cbor2.dumps("image") + cbor2.dumps("data") + bytes([0x9b]) + (2**32).to_bytes(8, "big")
    refused(hostile, "FAID_ETRUNC", "items")
    hostile_map = bytes.fromhex("d9d9f7bbffffffffffffffff")
    refused(hostile_map, "FAID_ETRUNC", "pairs")
    # indefinite-length (chunked) strings are refused by name (containers are read, see
    # test_v2_indefinite_length_containers)
    refused(bytes.fromhex("d9d9f7bf") + cbor2.dumps("type") + b"\x7f" + cbor2.dumps("end") +
            b"\xff" + b"\xff", "FAID_EUNSUP", "chunked")
    # trailing bytes after the map
    refused(ds.v2_encode(ds.v2_end(1, "u")) + b"\x00", "FAID_EFORMAT", "trailing")


@pytest.mark.parametrize("nested", [True, False])
@pytest.mark.parametrize("compression", ["bslz4", None])
def test_v2_indefinite_length_containers(tmp_path, nested, compression):
    """Jungfraujoch (tinycbor) frames its message maps, and some nested maps and arrays, with
    indefinite length: the same messages must decode exactly as their definite-length twins."""
    a = frame((29, 41), "uint16", 11)
    b = frame((29, 41), "uint16", 12)
    img = ds.v2_image(6, "uid-6", 3, {"threshold_1": a, "threshold_2": b}, compression,
                      spots=[[1.5, 2.5, 100.0]], indexing_unit_cell={"a": 79.1, "b": [1, {}]})
    definite = ds.v2_encode(img)
    indef = ds.v2_encode_indefinite(img, nested)
    assert indef[3] == 0xbf and indef[-1] == 0xff and indef != definite
    assert cbor2.loads(indef) == cbor2.loads(definite)  # the reference reads the same object
    for args, want in (((), a), (("--channel", "threshold_2"), b)):
        info_d, px_d = inspect(tmp_path, [definite], *args)
        info_i, px_i = inspect(tmp_path, [indef], *args)
        assert info_i["ok"], info_i
        assert same(px_i, want) and same(px_i, px_d)
        for k in ("type", "series_id", "series_unique_id", "frame_id", "shape", "dtype",
                  "encoding", "channel", "channel_index", "start_time", "stop_time",
                  "real_time", "user_data"):
            assert info_i.get(k) == info_d.get(k), k
    # a start message: metadata, per-channel maps and arrays, user_data
    shape = (29, 41)
    masks = {"threshold_1": (a % 7 == 0).astype(np.uint32), "threshold_2": (b % 5 == 0)
             .astype(np.uint32)}
    table = np.linspace(0, 1e5, 101).astype(np.float32)
    start = ds.v2_start(6, "uid-6", ["threshold_1", "threshold_2"], shape, "uint16", masks,
                        None, table, compression, unknown_nested={"a": [{"b": None}]})
    sd, si = ds.v2_encode(start), ds.v2_encode_indefinite(start, nested)
    assert cbor2.loads(si) == cbor2.loads(sd)
    md, mi, cd, ci = (tmp_path / f"{n}.npy" for n in ("md", "mi", "cd", "ci"))
    info_d, _ = inspect(tmp_path, [sd], "--channel", "threshold_2", npy=False,
                        extra_npy=[("--mask-npy", md), ("--countrate-npy", cd)])
    info_i, _ = inspect(tmp_path, [si], "--channel", "threshold_2", npy=False,
                        extra_npy=[("--mask-npy", mi), ("--countrate-npy", ci)])
    assert info_i["ok"], info_i
    assert info_i["meta"] == info_d["meta"] and info_i["user_data"] == info_d["user_data"]
    assert info_i["meta"]["channels"] == ["threshold_1", "threshold_2"]
    assert info_i["meta"]["detector_translation"] == [0.0, 0.0, 0.125]
    assert same(np.load(mi), masks["threshold_2"]) and same(np.load(mi), np.load(md))
    assert np.load(ci).tobytes() == table.tobytes()
    # user_data with indefinite containers reaches msgpack with its counts
    ud = {"a": [1, [2, 3], {}], "m": {"x": [], "y": {"z": [None]}}, "t": cbor2.CBORTag(1, [5])}
    end = ds.v2_end(6, "uid-6") | {"user_data": ud}
    info, _ = inspect(tmp_path, [ds.v2_encode_indefinite(end, nested)], npy=False)
    assert info["ok"] and info["user_data"] == dict(ud, t=[5]), info


def test_v2_indefinite_length_refusals(tmp_path):
    a = frame((16, 24), "uint16", 4)
    img = ds.v2_image(1, "u", 7, {"threshold_1": a}, None)
    indef = ds.v2_encode_indefinite(img)

    def refused(msg, code, *words):
        info, _ = inspect(tmp_path, [msg], npy=False)
        assert not info["ok"] and info["code"] == code, info
        for w in words:
            assert w in info["message"], (w, info["message"])
        return info

    # the message map's break missing: the input ends where the break should be
    refused(indef[:-1], "FAID_ETRUNC", "message map", "break")
    # truncated inside the "data" map (after the map head and the channel name)
    cut = indef.index(cbor2.dumps("threshold_1")) + len(cbor2.dumps("threshold_1")) + 5
    refused(indef[:cut], "FAID_ETRUNC", '"data"')
    # the "data" map's break missing (the message map's break then closes "data" and the map
    # ends without its own)
    data_at = indef.index(cbor2.dumps("data") + b"\xbf")
    body = indef[data_at:]
    assert body.endswith(b"\xff\xff\xff")
    refused(indef[:-2] + b"\xff", "FAID_ETRUNC", "break")
    # a break where a value is expected, and a stray break at the top
    refused(bytes.fromhex("d9d9f7bf") + cbor2.dumps("type") + cbor2.dumps("end") +
            cbor2.dumps("series_id") + b"\xff\xff", "FAID_EFORMAT", "series_id", "break")
    refused(bytes.fromhex("d9d9f7bf") + cbor2.dumps("type") + b"\xff\xff", "FAID_EFORMAT",
            '"type"')
    # a truncated indefinite map somewhere in the middle never hangs nor crashes
    for cut in range(4, len(indef) - 1, 97):
        info, _ = inspect(tmp_path, [indef[:cut]], npy=False)
        assert not info["ok"] and info["message"], cut
    # nesting of indefinite containers deeper than the skip's stack
    deep = b"\x9f" * 70 + b"\xff" * 70
    refused(bytes.fromhex("d9d9f7bf") + cbor2.dumps("type") + cbor2.dumps("end") +
            cbor2.dumps("x") + deep + b"\xff", "FAID_EFORMAT", "deeper", '"x"')


def test_v2_truncations_and_bit_flips_never_crash(tmp_path):
    a = frame((16, 24), "uint16", 6)
    msg = ds.v2_encode(ds.v2_image(1, "u", 2, {"threshold_1": a, "threshold_2": a}, "bslz4"))
    rng = np.random.default_rng(8)
    cuts = sorted(set(rng.integers(1, len(msg), 40).tolist()) | {1, 2, 3, 4, len(msg) - 1})
    for cut in cuts:
        info, _ = inspect(tmp_path, [msg[:cut]], npy=False)
        assert not info["ok"] and info["message"], cut
    for _ in range(40):
        b = bytearray(msg)
        pos = int(rng.integers(3, 200))
        b[pos] ^= 1 << int(rng.integers(0, 8))
        info, px = inspect(tmp_path, [bytes(b)])
        if not info["ok"]:
            assert info["message"]


@pytest.mark.skipif(not DECTRIS.exists(), reason="DECTRIS sample messages not present")
def test_v2_real_eiger2_messages(tmp_path):
    files = sorted(DECTRIS.glob("*/*.cbor"))
    assert len(files) == 15
    images = 0
    for f in files:
        raw = f.read_bytes()
        ref = ds.v2_decode(raw)
        info, _ = inspect(tmp_path, [raw], npy=False)
        assert info["ok"], (f, info)
        assert info["type"] == ref["type"] and info["series_id"] == ref["series_id"]
        assert info["series_unique_id"] == ref["series_unique_id"]
        if ref["type"] != "image":
            continue
        assert info["frame_id"] == ref["image_id"]
        assert info["start_time"] == list(ref["start_time"])
        for k, (chan, want) in enumerate(ref["data"].items()):
            info, px = inspect(tmp_path, [raw], "--channel", chan)
            assert info["channel_index"] == k and info["shape"] == [514, 1030]
            assert same(px, want), (f, chan)
            images += 1
    assert images == 30


# ---- stream v1 ---------------------------------------------------------------------------------

V1_CASES = [("uint8", "<"), ("uint16", "<"), ("uint32", "<"),
            ("uint8", "lz4<"), ("uint16", "lz4<"), ("uint32", "lz4<"),
            ("uint8", "bs8-lz4<"), ("uint16", "bs16-lz4<"), ("uint32", "bs32-lz4<")]


@pytest.mark.parametrize("dtype,encoding", V1_CASES)
def test_v1_image_every_encoding(tmp_path, dtype, encoding):
    for shape in [(37, 53), (65, 130)]:
        a = frame(shape, dtype, seed=shape[1])
        for appendix in (None, b'{"user": "appendix", "n": 1}'):
            parts = ds.v1_image(12, 41, a, encoding, appendix)
            info, px = inspect(tmp_path, parts)
            assert info["format"] == "dectris-v1" and info["type"] == "image", info
            assert info["series_id"] == 12 and info["frame_id"] == 41
            assert info["shape"] == list(shape)  # [width, height] on the wire
            assert info["dtype"] == dtype and info["payload_part"] == 2
            enc = {"<": "none", "lz4<": "lz4-raw"}.get(encoding, "bslz4")
            assert info["encoding"] == enc
            assert info["start_time"] == [41000, 1000000000]
            assert info.get("appendix_bytes") == (len(appendix) if appendix else None)
            assert info.get("user_data") == (appendix.decode() if appendix else None)
            assert same(px, a)


@pytest.mark.parametrize("detail", ["none", "basic", "all"])
def test_v1_header_details(tmp_path, detail):
    shape = (30, 44)
    rng = np.random.default_rng(9)
    flat = (1 + 0.05 * rng.standard_normal(shape)).astype(np.float32)
    mask = ((rng.random(shape) < 0.03) * 4).astype(np.uint32)
    table = np.linspace(0, 5e5, 333).astype(np.float32)
    cfg = ds.v1_config(shape, "uint32", unknown_key={"value": [1, 2]}, wavelength={
        "value": 0.9, "unit": "A"})
    for appendix in (None, b"header appendix text"):
        parts = ds.v1_header(77, detail, cfg, flat, mask, table, appendix)
        m, f, c = tmp_path / "m.npy", tmp_path / "f.npy", tmp_path / "c.npy"
        extra = [("--mask-npy", m), ("--flatfield-npy", f), ("--countrate-npy", c)]
        info, _ = inspect(tmp_path, parts, npy=False,
                          extra_npy=extra if detail == "all" else [])
        assert info["ok"] and info["type"] == "start" and info["series_id"] == 77, info
        meta = info["meta"]
        assert meta["header_detail"] == detail
        assert info.get("appendix_bytes") == (len(appendix) if appendix else None)
        if detail == "none":
            assert meta["have"] == 0 and info["nimages"] == -1
            continue
        assert info["nimages"] == 10  # nimages x ntrigger
        assert meta["beam_center_x"] == 512.25 and meta["incident_wavelength"] == 0.9
        assert meta["detector_distance"] == 0.125 and meta["image_dtype"] == "uint32"
        assert meta["image_size_x"] == 44 and meta["image_size_y"] == 30
        assert meta["saturation_value"] == 60000 and meta["sensor_material"] == "Si"
        if detail == "all":
            assert same(np.load(m), mask) and same(np.load(f), flat)
            assert np.load(c).tobytes() == table.tobytes()
            assert meta["pixel_mask"]["shape"] == [30, 44]


def test_v1_end_and_out_of_step(tmp_path):
    info, _ = inspect(tmp_path, ds.v1_end(5))
    assert info["ok"] and info["type"] == "end" and info["series_id"] == 5
    a = frame((8, 8), "uint16", 1)
    parts = ds.v1_image(5, 0, a, "lz4<")
    # the parts after the first, read as a message of their own (ADEiger's "stray packet")
    info, _ = inspect(tmp_path, parts[1:], npy=False)
    assert not info["ok"] and info["code"] == "FAID_EPROTO" and "out of step" in info["message"]
    # a missing part, an extra part
    for bad in (parts[:3], parts + [b"x", b"y"], parts + [b"x"] * 8):
        info, _ = inspect(tmp_path, bad, npy=False)
        assert not info["ok"] and info["code"] == "FAID_EPROTO" and info["header_ok"]
        assert info["frame_id"] == 0 and "parts" in info["message"]
    info, _ = inspect(tmp_path, ds.v1_end(5) + [b"x"], npy=False)
    assert not info["ok"] and info["header_ok"]
    # header_detail basic without its configuration part
    info, _ = inspect(tmp_path, ds.v1_header(5, "basic")[:1], npy=False)
    assert not info["ok"] and "header_detail basic" in info["message"]


def test_v1_refusals(tmp_path):
    a = frame((10, 12), "uint16", 2)

    def refused(parts, code, *words):
        info, _ = inspect(tmp_path, parts, npy=False)
        assert not info["ok"] and info["code"] == code, info
        for w in words:
            assert w in info["message"], (w, info["message"])
        return info

    refused(ds.v1_image(1, 3, a, "bs32-lz4<", blob=ds.bslz4(a)), "FAID_EUNSUP", "32 bit")
    refused(ds.v1_image(1, 3, a, "lz4>", blob=b"x"), "FAID_EUNSUP", "big-endian")
    refused(ds.v1_image(1, 3, a, "zstd<", blob=b"x"), "FAID_EUNSUP", "zstd<")
    refused(ds.v1_image(1, 3, a, "<", blob=a.tobytes()[:-2]), "FAID_ESIZE", "part 3")
    p = ds.v1_image(1, 3, a, "lz4<")
    p[1] = ds.jpart({"htype": "dimage_d-1.0", "shape": [12, 10], "type": "uint16",
                     "encoding": "lz4<", "size": len(p[2]) + 1})
    refused(p, "FAID_ESIZE", '"size"')
    p = ds.v1_image(1, 3, a, "bs16-lz4<")
    p[1] = ds.jpart({"htype": "dimage_d-1.0", "shape": [12, 11], "type": "uint16",
                     "encoding": "bs16-lz4<"})
    refused(p, "FAID_ESIZE", "bitshuffle header")
    p = ds.v1_image(1, 3, a, "<")
    p[1] = ds.jpart({"htype": "dimage_d-1.0", "shape": [12, 10], "type": "float16",
                     "encoding": "<"})
    refused(p, "FAID_EDTYPE", "part 2")
    p = ds.v1_image(1, 3, a, "<")
    p[3] = b'{"htype": "dconfig-1.0", "start_time": '
    refused(p, "FAID_EFORMAT", "part 4", "not JSON")
    refused([b'{"htype": "dimage-1.0", "series": 1}'] + p[1:], "FAID_EFORMAT", '"frame"')
    refused([b'{"htype": "dimage-1.0", "series": -1, "frame": 0}'] + p[1:], "FAID_EFORMAT",
            '"series"')
    refused([b'{"htype": "dheader-1.0", "series": 1, "header_detail": "most"}'],
            "FAID_EFORMAT", "header_detail")
    refused([b'{"htype": "something-2.0"}'], "FAID_EPROTO", "something-2.0")
    refused([b'{"htype": "dimage-1.0", ' + b" " * 70000 + b"}"], "FAID_EPROTO")
    # corrupt lz4 data is not the decoder's business (the engine judges it): the message
    # decodes, the pixels do not
    p = ds.v1_image(1, 3, a, "lz4<", blob=b"\xff" * 20)
    info, px = inspect(tmp_path, p, npy=False)
    assert info["ok"]
    info = subprocess.run([str(FAIDCTL), "inspect", "--npy", str(tmp_path / "x.npy")] +
                          [str(tmp_path / f"part{k}.bin") for k in range(4)],
                          capture_output=True, text=True)
    assert info.returncode == 1 and "does not decode" in info.stderr


def test_v1_corrupt_parts_never_crash(tmp_path):
    a = frame((16, 20), "uint32", 7)
    base = ds.v1_header(1, "all", ds.v1_config((16, 20), "uint32"),
                        np.ones((16, 20), np.float32), np.zeros((16, 20), np.uint32),
                        np.ones(10, np.float32))
    img = ds.v1_image(1, 0, a, "bs32-lz4<")
    rng = np.random.default_rng(10)
    for parts in (base, img):
        for _ in range(30):
            k = int(rng.integers(0, len(parts)))
            p = list(parts)
            cut = int(rng.integers(0, max(1, len(p[k]))))
            p[k] = p[k][:cut]
            info, _ = inspect(tmp_path, p, npy=False)
            assert info["ok"] or info["message"]


# ---- auto detection ---------------------------------------------------------------------------

def test_auto_detection(tmp_path):
    a = frame((8, 8), "uint8", 1)
    info, _ = inspect(tmp_path, [ds.v2_encode(ds.v2_image(1, "u", 0, {"t": a}, None))])
    assert info["format"] == "dectris-v2"
    info, _ = inspect(tmp_path, ds.v1_image(1, 0, a, "<"))
    assert info["format"] == "dectris-v1"
    info, _ = inspect(tmp_path, [b"\x81\xa4type\xa3end"], npy=False)
    assert info["format"] == "native"
    info, _ = inspect(tmp_path, [b'{"type": "image"}'], npy=False)
    assert not info["ok"] and info["format"] == "" and info["code"] == "FAID_EPROTO"
    # a protocol named explicitly refuses the others' messages
    info, _ = inspect(tmp_path, ds.v1_image(1, 0, a, "<"), "--protocol", "dectris-v2", npy=False)
    assert not info["ok"] and info["code"] == "FAID_EPROTO"
    info, _ = inspect(tmp_path, ds.v1_image(1, 0, a, "<"), "--protocol", "native", npy=False)
    assert not info["ok"] and "not a native" in info["message"]
