"""Writes the seed corpora of the input-format fuzz targets (tests/fuzz/corpus/{native, dectris1,
dectris2}) from the independent encoders of dectris_stream.py and msgpack: good messages of every
kind and encoding, plus hand-made malformed ones. Multipart messages use the fuzz_parts.h
framing (4-byte little-endian length before each part). Run from anywhere:
    .venv/bin/python tests/reference/make_fuzz_corpus.py
The real EIGER2 messages are not copied (their folder's README asks not to); the ctest
fuzz.dectris2_eiger2 feeds them from the shared data folder when it is present.
"""
import pathlib
import struct

import cbor2
import msgpack
import numpy as np

import dectris_stream as ds

ROOT = pathlib.Path(__file__).resolve().parents[1] / "fuzz" / "corpus"


def framed(parts):
    return b"".join(struct.pack("<I", len(p)) + p for p in parts)


def write(folder, name, data):
    d = ROOT / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def small(dtype, shape=(6, 20), seed=0):
    rng = np.random.default_rng(seed)
    a = rng.poisson(3, shape).astype(dtype)
    a.flat[5] = np.iinfo(dtype).max if np.dtype(dtype).kind == "u" else a.flat[5]
    return a


def v2():
    a8, a16, a32 = small(np.uint8), small(np.uint16), small(np.uint32)
    for comp in ("bslz4", "lz4", None):
        write("dectris2", f"image_u16_{comp}.cbor",
              ds.v2_encode(ds.v2_image(1, "u1", 3, {"threshold_1": a16}, comp)))
    write("dectris2", "image_u8_2ch_bslz4.cbor", ds.v2_encode(
        ds.v2_image(1, "u1", 4, {"threshold_1": a8, "threshold_2": a8}, "bslz4")))
    write("dectris2", "image_u32_jfjoch_extras.cbor", ds.v2_encode(ds.v2_image(
        2, "j", 9, {"default": a32}, "bslz4", spots=[[1.0, 2.0, 30.0]], spot_count=1,
        az_int_profile=[1.0, 2.0], indexing_unit_cell={"a": 1.0})))
    mask = (small(np.uint32, seed=1) % 2).astype(np.uint32)
    flat = np.ones((6, 20), np.float32)
    write("dectris2", "start_all.cbor", ds.v2_encode(ds.v2_start(
        1, "u1", ["threshold_1", "threshold_2"], (6, 20), "uint16",
        {"threshold_1": mask, "threshold_2": mask}, {"threshold_1": flat, "threshold_2": flat},
        np.linspace(0, 1, 16).astype(np.float32), "bslz4", magic_number=1, error_value=-1)))
    write("dectris2", "start_plain.cbor", ds.v2_encode(ds.v2_start(
        1, "u1", ["threshold_1"], (6, 20), "uint8", {"threshold_1": mask}, None, None, None)))
    write("dectris2", "end.cbor", ds.v2_encode(ds.v2_end(1, "u1")))
    write("dectris2", "calibration.cbor", ds.v2_encode(
        {"type": "calibration", "data": ds.v2_array(flat)}))
    # malformed: hostile counts, wrong tags, bad compression, truncation, indefinite items
    write("dectris2", "bad_hostile_array.cbor",
          bytes.fromhex("d9d9f7a2") + cbor2.dumps("type") + cbor2.dumps("image") +
          cbor2.dumps("data") + bytes.fromhex("9b0000000100000000"))
    write("dectris2", "bad_hostile_map.cbor", bytes.fromhex("d9d9f7bbffffffffffffffff"))
    write("dectris2", "bad_hostile_bytes.cbor", bytes.fromhex("d9d9f7a1") + cbor2.dumps("x") +
          bytes.fromhex("5b7fffffffffffffff00"))
    write("dectris2", "bad_indefinite.cbor", bytes.fromhex("d9d9f7bf") + cbor2.dumps("type") +
          cbor2.dumps("end") + b"\xff")
    img = ds.v2_image(1, "u1", 3, {"threshold_1": a16}, "bslz4")
    write("dectris2", "bad_truncated.cbor", ds.v2_encode(img)[:-17])
    write("dectris2", "bad_modifier.cbor", ds.v2_encode(dict(img, data={"threshold_1": cbor2.CBORTag(
        40, [[6, 20], cbor2.CBORTag(69, cbor2.CBORTag(56500, ["bslz4", 4, ds.bslz4(a16)]))])})))
    write("dectris2", "bad_bigendian.cbor", ds.v2_encode(dict(img, data={"threshold_1": cbor2.CBORTag(
        40, [[6, 20], cbor2.CBORTag(65, a16.byteswap().tobytes())])})))
    write("dectris2", "bad_zstd.cbor", ds.v2_encode(dict(
        img, data={"threshold_1": ds.v2_array(a16, "bszstd")})))
    write("dectris2", "bad_nested_tags.cbor", bytes.fromhex("d9d9f7") + b"\xd8\x28" * 200 + b"\xa0")


def v1():
    a8, a16, a32 = small(np.uint8), small(np.uint16), small(np.uint32)
    for a, encs in ((a8, ("<", "lz4<", "bs8-lz4<")), (a16, ("lz4<", "bs16-lz4<")),
                    (a32, ("bs32-lz4<", "<"))):
        for enc in encs:
            name = enc.replace("<", "le").replace("-", "_")
            write("dectris1", f"image_{a.dtype.name}_{name}.bin", framed(ds.v1_image(1, 2, a, enc)))
    write("dectris1", "image_appendix.bin", framed(ds.v1_image(1, 3, a16, "lz4<", b"appendix")))
    cfg = ds.v1_config((6, 20), "uint16")
    for detail in ("none", "basic"):
        write("dectris1", f"header_{detail}.bin", framed(ds.v1_header(1, detail, cfg)))
    write("dectris1", "header_all_appendix.bin", framed(ds.v1_header(
        1, "all", cfg, np.ones((6, 20), np.float32), np.zeros((6, 20), np.uint32),
        np.linspace(0, 1, 8).astype(np.float32), b"{\"user\": 1}")))
    write("dectris1", "end.bin", framed(ds.v1_end(1)))
    parts = ds.v1_image(1, 2, a16, "bs16-lz4<")
    write("dectris1", "bad_out_of_step.bin", framed(parts[1:]))
    write("dectris1", "bad_missing_part.bin", framed(parts[:3]))
    write("dectris1", "bad_bs32_u16.bin", framed(ds.v1_image(1, 2, a16, "bs32-lz4<",
                                                            blob=ds.bslz4(a16))))
    write("dectris1", "bad_json.bin", framed([b'{"htype": "dimage-1.0", "series": [[[[',
                                              parts[1], parts[2], parts[3]]))
    write("dectris1", "bad_deep_json.bin", framed([b'{"htype": "dheader-1.0", "x": ' +
                                                   b"[" * 5000 + b"]" * 5000 + b"}"]))


def native():
    a16 = small(np.uint16)

    def header(**kv):
        return msgpack.packb(kv, use_bin_type=True)

    base = {"type": "image", "protocol_version": 1, "series_id": 1, "frame_id": 2,
            "shape": [6, 20], "dtype": "uint16"}
    write("native", "image_none.bin", framed([header(**base, encoding="none"), a16.tobytes()]))
    write("native", "image_bslz4.bin", framed([header(**base, encoding="bslz4",
                                                      user_data={"a": [1, 2]}), ds.bslz4(a16)]))
    write("native", "start.bin", framed([header(type="start", protocol_version=1, series_id=1,
                                                series_unique_id="run-1", nimages=3)]))
    write("native", "end.bin", framed([header(type="end", protocol_version=1, series_id=1)]))
    write("native", "bad_three_parts.bin", framed([header(**base, encoding="none"),
                                                   a16.tobytes(), b"x"]))
    write("native", "bad_version.bin", framed([header(type="end", protocol_version=9,
                                                      series_id=1)]))


if __name__ == "__main__":
    v2()
    v1()
    native()
