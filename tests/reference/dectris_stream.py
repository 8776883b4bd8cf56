"""Independent encoders (and decoders) of DECTRIS stream v1 and v2 messages for faid's tests.

Written from the DECTRIS specification (stream v2: one CBOR item per message, self-described tag
55799, MultiDimArray tag 40, RFC 8746 typed arrays, compression tag 56500 ["bslz4"|"lz4",
modifier, bytes]; stream v1: multipart JSON + binary, dheader-1.0 / dimage-1.0 / dimage_d-1.0 /
dconfig-1.0 / dseries_end-1.0, shapes [width, height], encodings lz4< / bsNN-lz4< / <). Nothing
here comes from faid's decoders: CBOR is cbor2, the codecs are the HDF5 reference filters of
hdf5plugin (bitshuffle-LZ4 = 32008, LZ4 = 32004, read back as raw chunks through h5py) and
lz4.block for v1's single raw LZ4 block.
"""
import hashlib
import itertools
import json

import cbor2
import h5py
import hdf5plugin
import lz4.block
import numpy as np

# RFC 8746: tag = 64 + 16 f + 8 s + 4 e + ll (little-endian: e = 1; one-byte types: e = 0).
TYPED_TAG = {"|u1": 64, "<u2": 69, "<u4": 70, "<u8": 71, "|i1": 72, "<i2": 77, "<i4": 78,
             "<i8": 79, "<f4": 85, "<f8": 86}
TAG_SELF_DESCRIBED = 55799
TAG_MULTI_DIM = 40
TAG_COMPRESSION = 56500

_counter = itertools.count()


def h5_chunk(arr, filt):
    """The raw chunk an HDF5 filter writes for arr stored as one chunk (in-memory file)."""
    name = f"faid-test-{next(_counter)}.h5"
    with h5py.File(name, "w", driver="core", backing_store=False) as f:
        ds = f.create_dataset("x", data=arr, chunks=arr.shape, **filt)
        mask, raw = ds.id.read_direct_chunk((0,) * arr.ndim)
        assert mask == 0
    return bytes(raw)


def h5_unchunk(raw, shape, dtype, filt):
    """Decodes a raw chunk with the HDF5 filter (the reference decoder)."""
    name = f"faid-test-{next(_counter)}.h5"
    with h5py.File(name, "w", driver="core", backing_store=False) as f:
        ds = f.create_dataset("x", shape=shape, dtype=dtype, chunks=tuple(shape), **filt)
        ds.id.write_direct_chunk((0,) * len(shape), raw)
        return ds[...]


def bslz4(arr):
    return h5_chunk(np.ascontiguousarray(arr), hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))


def lz4_h5(arr, block=8192):
    return h5_chunk(np.ascontiguousarray(arr), hdf5plugin.LZ4(nbytes=block))


def le(arr):
    arr = np.ascontiguousarray(arr)
    return arr.astype(arr.dtype.newbyteorder("<")) if arr.dtype.byteorder == ">" else arr


# ---- stream v2 ---------------------------------------------------------------------------------

def v2_typed(arr, compression=None):
    arr = le(arr)
    tag = TYPED_TAG[arr.dtype.str]
    if compression == "bslz4":
        inner = cbor2.CBORTag(TAG_COMPRESSION, ["bslz4", arr.dtype.itemsize, bslz4(arr)])
    elif compression == "lz4":
        inner = cbor2.CBORTag(TAG_COMPRESSION, ["lz4", 0, lz4_h5(arr)])
    elif compression is None:
        inner = arr.tobytes()
    else:  # an algorithm name as is, for refusal tests
        inner = cbor2.CBORTag(TAG_COMPRESSION, [compression, arr.dtype.itemsize, arr.tobytes()])
    return cbor2.CBORTag(tag, inner)


def v2_array(arr, compression=None):
    """MultiDimArray: tag 40 over [[rows, cols], typed array] (row-major)."""
    return cbor2.CBORTag(TAG_MULTI_DIM, [list(arr.shape), v2_typed(arr, compression)])


def v2_encode(msg, tagged=True):
    return cbor2.dumps(cbor2.CBORTag(TAG_SELF_DESCRIBED, msg) if tagged else msg)


def cbor_indefinite(obj, nested=True):
    """CBOR of obj with its maps and arrays framed with indefinite length (0xbf / 0x9f ... break
    0xff), as Jungfraujoch's encoder (tinycbor) writes them; keys, scalars and strings are
    cbor2's. nested=False frames only the outermost container so; tags are kept around their
    item."""
    if isinstance(obj, cbor2.CBORTag):
        head = cbor2.dumps(cbor2.CBORTag(obj.tag, None))[:-1]  # the tag head without null
        return head + cbor_indefinite(obj.value, nested)
    if isinstance(obj, dict):
        body = b"".join(cbor2.dumps(k) + (cbor_indefinite(v) if nested else cbor2.dumps(v))
                        for k, v in obj.items())
        return b"\xbf" + body + b"\xff"
    if isinstance(obj, (list, tuple)):
        body = b"".join(cbor_indefinite(v) if nested else cbor2.dumps(v) for v in obj)
        return b"\x9f" + body + b"\xff"
    return cbor2.dumps(obj)


def v2_encode_indefinite(msg, nested=True):
    return cbor_indefinite(cbor2.CBORTag(TAG_SELF_DESCRIBED, msg), nested)


def v2_start(series_id, uid, channels, shape, dtype, masks=None, flatfields=None,
             countrate=None, compression=None, **extra):
    m = {"type": "start", "series_id": series_id, "series_unique_id": uid,
         "arm_date": cbor2.CBORTag(0, "2026-11-22T17:00:00.000+00:00"),
         "beam_center_x": 512.25, "beam_center_y": 257.5, "channels": list(channels),
         "count_time": 0.0099, "countrate_correction_enabled": countrate is not None,
         "detector_description": "EIGER2 R 500K (test)", "detector_serial_number": "E-32-0000",
         "detector_translation": [0.0, 0.0, 0.125], "flatfield_enabled": flatfields is not None,
         "frame_time": 0.01,
         "goniometer": {"omega": {"increment": 0.1, "start": 12.5}},
         "image_dtype": np.dtype(dtype).name, "image_size_x": shape[1],
         "image_size_y": shape[0], "incident_energy": 12398.4, "incident_wavelength": 1.0,
         "number_of_images": 5, "pixel_mask_enabled": masks is not None,
         "pixel_size_x": 75e-6, "pixel_size_y": 75e-6, "saturation_value": 60000,
         "sensor_material": "Si", "sensor_thickness": 450e-6,
         "threshold_energy": {c: 6000.0 + 1000 * k for k, c in enumerate(channels)},
         "user_data": {"sample": "lysozyme", "n": [1, 2, 3]},
         "virtual_pixel_interpolation_enabled": False}
    if masks is not None:
        m["pixel_mask"] = {c: v2_array(a, compression) for c, a in masks.items()}
    if flatfields is not None:
        m["flatfield"] = {c: v2_array(a, compression) for c, a in flatfields.items()}
    if countrate is not None:
        m["countrate_correction_lookup_table"] = v2_typed(countrate, compression)
    m.update(extra)
    return m


def v2_image(series_id, uid, image_id, frames, compression, **extra):
    m = {"type": "image", "series_id": series_id, "series_unique_id": uid,
         "image_id": image_id, "real_time": [999995, 50000000],
         "series_date": cbor2.CBORTag(0, "2026-11-22T17:00:00.000+00:00"),
         "start_time": [image_id * 1000000, 50000000],
         "stop_time": [image_id * 1000000 + 999995, 50000000], "user_data": [1, "x"],
         "data": {c: v2_array(a, compression) for c, a in frames.items()}}
    m.update(extra)
    return m


def v2_end(series_id, uid):
    return {"type": "end", "series_id": series_id, "series_unique_id": uid}


def v2_decode(raw):
    """Decodes a v2 message into plain Python: arrays become numpy (the reference reader)."""
    def hook(tag, immutable=False):
        if tag.tag == TAG_COMPRESSION:
            return ("compressed",) + tuple(tag.value)
        if 64 <= tag.tag <= 87:
            dt = {v: k for k, v in TYPED_TAG.items()}[tag.tag]
            return ("typed", np.dtype(dt), tag.value)
        if tag.tag == TAG_MULTI_DIM:
            shape, (_, dt, payload) = tag.value
            if isinstance(payload, tuple):
                _, alg, _mod, data = payload
                filt = (hdf5plugin.Bitshuffle(nelems=0, cname="lz4") if alg == "bslz4"
                        else hdf5plugin.LZ4())
                return h5_unchunk(data, tuple(shape), dt, filt)
            return np.frombuffer(payload, dt).reshape(shape)
        if tag.tag == TAG_SELF_DESCRIBED:
            return tag.value
        return tag
    return cbor2.loads(raw, tag_hook=hook)


# ---- stream v1 ---------------------------------------------------------------------------------

def jpart(obj):
    return json.dumps(obj).encode()


def v1_blob(arr, encoding):
    arr = le(arr)
    raw = arr.tobytes()
    if encoding == "<":
        return raw
    if encoding == "lz4<":
        return lz4.block.compress(raw, store_size=False)
    if encoding in ("bs8-lz4<", "bs16-lz4<", "bs32-lz4<"):
        bits = int(encoding[2:encoding.index("-")])
        assert bits == 8 * arr.dtype.itemsize, "the tests shuffle with the pixel size"
        return bslz4(arr)
    raise ValueError(encoding)


def v1_image(series, frame, arr, encoding, appendix=None, blob=None, **extra_d):
    """dimage-1.0 message: 4 parts, 5 with an image appendix. shape is [width, height]."""
    data = v1_blob(arr, encoding) if blob is None else blob
    d = {"htype": "dimage_d-1.0", "shape": [arr.shape[1], arr.shape[0]],
         "type": np.dtype(arr.dtype).name, "encoding": encoding, "size": len(data)}
    d.update(extra_d)
    parts = [jpart({"htype": "dimage-1.0", "series": series, "frame": frame,
                    "hash": hashlib.md5(data).hexdigest()}),
             jpart(d), data,
             jpart({"htype": "dconfig-1.0", "start_time": 1000 * frame,
                    "stop_time": 1000 * frame + 900, "real_time": 900})]
    if appendix is not None:
        parts.append(appendix)
    return parts


def v1_config(shape, dtype, **extra):
    c = {"beam_center_x": 512.25, "beam_center_y": 257.5, "count_time": 0.0099,
         "frame_time": 0.01, "nimages": 5, "ntrigger": 2, "trigger_mode": "ints",
         "x_pixels_in_detector": shape[1], "y_pixels_in_detector": shape[0],
         "bit_depth_image": 8 * np.dtype(dtype).itemsize, "wavelength": 1.0,
         "photon_energy": 12398.4, "detector_distance": 0.125, "x_pixel_size": 75e-6,
         "y_pixel_size": 75e-6, "sensor_thickness": 450e-6, "sensor_material": "Si",
         "description": "Dectris EIGER2 Si 500K", "detector_number": "E-32-0000",
         "countrate_correction_count_cutoff": 60000, "omega_start": 12.5,
         "omega_increment": 0.1, "software_version": "1.8.0"}
    c.update(extra)
    return c


def v1_header(series, detail, config=None, flatfield=None, mask=None, countrate=None,
              appendix=None):
    parts = [jpart({"htype": "dheader-1.0", "series": series, "header_detail": detail})]
    if detail in ("basic", "all"):
        parts.append(jpart(config))
    if detail == "all":
        for htype, a in (("dflatfield-1.0", flatfield), ("dpixelmask-1.0", mask),
                         ("dcountrate_table-1.0", countrate)):
            shape = [a.shape[1], a.shape[0]] if a.ndim == 2 else list(a.shape)
            parts.append(jpart({"htype": htype, "shape": shape, "type": a.dtype.name}))
            parts.append(le(a).tobytes())
    if appendix is not None:
        parts.append(appendix)
    return parts


def v1_end(series):
    return [jpart({"htype": "dseries_end-1.0", "series": series})]
