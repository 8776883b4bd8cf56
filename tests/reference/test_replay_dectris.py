"""faidctl replay --protocol dectris-v1 | dectris-v2 against independent readers.

A PULL socket (pyzmq) receives what replay sends for a .npy stack; every message is decoded with
the readers of dectris_stream.py (cbor2, json, hdf5plugin, lz4.block: nothing of faid's) and the
frames must equal the stack pixel for pixel, in order, between one start and one end. The same
messages then go through faid's own decoders (faidctl inspect) as a round trip.
"""
import json
import os
import pathlib
import subprocess

import hdf5plugin
import lz4.block
import numpy as np
import pytest
import zmq

import dectris_stream as ds

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("FAID_BIN", REPO / "build" / "bin"))
FAIDCTL = BIN / "faidctl"

pytestmark = pytest.mark.skipif(not FAIDCTL.exists(), reason=f"{FAIDCTL} not built")


def receive_replay(tmp_path, stack, protocol, encoding):
    np.save(tmp_path / "stack.npy", stack)
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    pull.setsockopt(zmq.RCVTIMEO, 20000)
    r = subprocess.Popen([str(FAIDCTL), "replay", "--to", f"tcp://127.0.0.1:{port}", "--npy",
                          str(tmp_path / "stack.npy"), "--frames", str(len(stack)),
                          "--protocol", protocol, "--encoding", encoding, "--series-id", "42",
                          "--series-unique-id", "rehearsal-1", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    msgs = []
    try:
        for _ in range(len(stack) + 2):
            msgs.append(pull.recv_multipart())
    finally:
        out, err = r.communicate(timeout=60)
        pull.close(0)
        ctx.term()
    assert r.returncode == 0, err
    return msgs


def v1_pixels(parts):
    d = json.loads(parts[1])
    w, h = d["shape"]
    dt = np.dtype(d["type"])
    enc, blob = d["encoding"], parts[2]
    assert d["size"] == len(blob)
    if enc == "<":
        raw = blob
    elif enc == "lz4<":
        raw = lz4.block.decompress(blob, uncompressed_size=w * h * dt.itemsize)
    else:
        assert enc == f"bs{8 * dt.itemsize}-lz4<"
        return ds.h5_unchunk(blob, (h, w), dt, hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))
    return np.frombuffer(raw, dt).reshape(h, w)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32"])
@pytest.mark.parametrize("encoding", ["bslz4", "lz4-raw", "none"])
def test_replay_dectris_v1(tmp_path, dtype, encoding):
    rng = np.random.default_rng(1)
    stack = rng.poisson(5, (4, 21, 34)).astype(dtype)
    msgs = receive_replay(tmp_path, stack, "dectris-v1", encoding)
    start = json.loads(msgs[0][0])
    assert start["htype"] == "dheader-1.0" and start["series"] == 42 and len(msgs[0]) == 2
    cfg = json.loads(msgs[0][1])
    assert cfg["x_pixels_in_detector"] == 34 and cfg["y_pixels_in_detector"] == 21
    assert cfg["bit_depth_image"] == 8 * np.dtype(dtype).itemsize and cfg["nimages"] == 4
    for k, parts in enumerate(msgs[1:-1]):
        assert len(parts) == 4
        p1, p4 = json.loads(parts[0]), json.loads(parts[3])
        assert p1["htype"] == "dimage-1.0" and p1["series"] == 42 and p1["frame"] == k
        assert json.loads(parts[1])["htype"] == "dimage_d-1.0"
        assert p4["htype"] == "dconfig-1.0" and p4["stop_time"] > p4["start_time"]
        px = v1_pixels(parts)
        assert px.dtype == stack.dtype and np.array_equal(px, stack[k])
        # and faid's own decoder reads the same
        for j, p in enumerate(parts):
            (tmp_path / f"p{j}").write_bytes(p)
        out = subprocess.run([str(FAIDCTL), "inspect", "--npy", str(tmp_path / "f.npy")] +
                             [str(tmp_path / f"p{j}") for j in range(4)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout
        assert np.array_equal(np.load(tmp_path / "f.npy"), stack[k])
    assert json.loads(msgs[-1][0]) == {"htype": "dseries_end-1.0", "series": 42}


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "int32", "float32"])
@pytest.mark.parametrize("encoding", ["bslz4", "lz4", "none"])
def test_replay_dectris_v2(tmp_path, dtype, encoding):
    rng = np.random.default_rng(2)
    stack = (rng.poisson(5, (3, 19, 40)) * 3).astype(dtype)
    msgs = receive_replay(tmp_path, stack, "dectris-v2", encoding)
    assert all(len(m) == 1 and m[0][:3] == b"\xd9\xd9\xf7" for m in msgs)
    start = ds.v2_decode(msgs[0][0])
    assert start["type"] == "start" and start["series_id"] == 42
    assert start["series_unique_id"] == "rehearsal-1" and start["image_dtype"] == dtype
    assert start["image_size_x"] == 40 and start["image_size_y"] == 19
    assert start["number_of_images"] == 3 and list(start["channels"]) == ["threshold_1"]
    for k, m in enumerate(msgs[1:-1]):
        img = ds.v2_decode(m[0])
        assert img["type"] == "image" and img["image_id"] == k and img["series_id"] == 42
        px = img["data"]["threshold_1"]
        assert px.dtype == stack.dtype and np.array_equal(px, stack[k])
        (tmp_path / "m.cbor").write_bytes(m[0])
        out = subprocess.run([str(FAIDCTL), "inspect", "--npy", str(tmp_path / "f.npy"),
                              str(tmp_path / "m.cbor")], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout
        assert np.array_equal(np.load(tmp_path / "f.npy"), stack[k])
    end = ds.v2_decode(msgs[-1][0])
    assert dict(end) == {"type": "end", "series_id": 42, "series_unique_id": "rehearsal-1"}


def test_replay_refuses_what_a_protocol_cannot_carry(tmp_path):
    for proto, enc in (("dectris-v1", "lz4"), ("dectris-v2", "lz4-raw")):
        r = subprocess.run([str(FAIDCTL), "replay", "--protocol", proto, "--encoding", enc,
                            "--frames", "1"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "cannot carry" in r.stderr
    r = subprocess.run([str(FAIDCTL), "replay", "--protocol", "auto"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2


@pytest.mark.parametrize("protocol", ["dectris-v1", "dectris-v2"])
def test_replay_start_states_the_geometry(tmp_path, protocol):
    """Synthetic frames of a configuration: the start carries its geometry as a DCU would
    (beam centre in pixels = poni / pixel size, distance, wavelength, pixel sizes)."""
    cfg = tmp_path / "faid.yaml"
    cfg.write_text("detector:\n  shape: [40, 60]\n  pixel_size: [7.5e-05, 7.5e-05]\n"
                   "geometry:\n  dist: 0.2\n  poni1: 0.0015\n  poni2: 0.00225\n"
                   "  wavelength: 0.8e-10\n")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    pull.setsockopt(zmq.RCVTIMEO, 20000)
    r = subprocess.Popen([str(FAIDCTL), "replay", "--to", f"tcp://127.0.0.1:{port}", "-c",
                          str(cfg), "--frames", "1", "--protocol", protocol, "--dtype",
                          "uint16", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        msgs = [pull.recv_multipart() for _ in range(3)]
    finally:
        _, err = r.communicate(timeout=60)
        pull.close(0)
        ctx.term()
    assert r.returncode == 0, err
    if protocol == "dectris-v2":
        s = ds.v2_decode(msgs[0][0])
        got = (s["beam_center_x"], s["beam_center_y"], s["detector_distance"],
               s["incident_wavelength"], s["pixel_size_x"], s["pixel_size_y"])
        assert list(s["detector_translation"]) == [0.0, 0.0, 0.2]
        assert s["incident_energy"] == pytest.approx(12398.419843320026 / 0.8)
    else:
        c = json.loads(msgs[0][1])
        got = (c["beam_center_x"], c["beam_center_y"], c["detector_distance"], c["wavelength"],
               c["x_pixel_size"], c["y_pixel_size"])
    assert got == pytest.approx((30.0, 20.0, 0.2, 0.8, 7.5e-05, 7.5e-05), rel=1e-12)
    # faid's decoder reads the same back
    for j, p in enumerate(msgs[0]):
        (tmp_path / f"s{j}").write_bytes(p)
    out = subprocess.run([str(FAIDCTL), "inspect"] +
                         [str(tmp_path / f"s{j}") for j in range(len(msgs[0]))],
                         capture_output=True, text=True)
    meta = json.loads(out.stdout)["meta"]
    assert (meta["beam_center_x"], meta["beam_center_y"], meta["detector_distance"]) == \
        pytest.approx((30.0, 20.0, 0.2), rel=1e-12)
    assert meta["incident_wavelength"] == pytest.approx(0.8, rel=1e-12)
