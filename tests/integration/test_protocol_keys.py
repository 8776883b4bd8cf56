"""The real daemon's messages against the key tables of proto/PROTOCOL.md, which faid-protodoc
generates from the one key table of the code (proto/faid_proto_keys.h; the ctest
docs.protocol_keys keeps the document equal to it). faid runs with peaks, a 2D cake, the hits
channel and the lossless channel; a series with user_data, hit and background frames and one
malformed frame, then control requests. Every message and nested map (start's geometry,
parameters and input, arrays, status sub-maps, the hit's peak list and msgpack-numpy arrays,
aggregates, control replies, the lossless channel's welcome) must carry only keys its table
lists and every key its table marks required: an encoder and the table cannot drift apart."""

import os
import re
import sys
import time

import msgpack
import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_daemon as td  # noqa: E402
import test_peaks as tp  # noqa: E402
from test_daemon import LONG, ep  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def key_tables():
    """{marker: {key: required}} from the generated blocks of PROTOCOL.md."""
    text = open(os.path.join(ROOT, "proto", "PROTOCOL.md")).read()
    out = {}
    for m in re.finditer(r"<!-- keys:(\S+):begin[^\n]*-->\n(.*?)<!-- keys:\1:end -->", text, re.S):
        rows = {}
        for line in m.group(2).splitlines()[2:]:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows[cells[0].strip("`")] = cells[2] == "required"
        out[m.group(1)] = rows
    return out


TABLES = key_tables()

# nested maps: key -> the table of its value (a list of maps: each entry)
NESTED = {
    "start": {"geometry": "start.geometry", "parameters": "start.parameters",
              "input": "start.input", "radial": "array", "azimuthal": "array"},
    "start.input": {"applied": "start.input.applied", "reported": "start.input.reported"},
    "result": {k: "array" for k in ("I", "sigma", "std", "count", "I_2d", "sigma_2d", "count_2d",
                                   "peak_x", "peak_y", "peak_intensity", "peak_sigma", "peak_snr",
                                   "peak_npix", "peak_max_pixel", "bg_I", "bg_sigma", "bg_std",
                                   "bg_count")},
    "aggregates": {"virtual_powder_plot": "aggregates.virtual_powder_plot",
                   "hit_rate_history": "array", "hit_rate_timestamp_history": "array",
                   "num_peaks_histogram": "array"},
    "status": {"input": "status.input", "queue": "status.queue",
               "latency_us": "status.latency_us", "lossless": "status.lossless",
               "devices": "status.devices", "memory": "status.memory", "writer": "status.writer"},
    "hit": {"peak_list": "hit.peak_list", "detector_data": "msgpack-numpy"},
}


def check(marker, m, also=(), path=None):
    """Asserts that map m has only the keys of table `marker` (and of `also`) and all required
    ones of `marker`; recurses into the nested maps NESTED names. Returns the keys seen."""
    path = path or marker
    assert isinstance(m, dict), (path, type(m))
    keys = {k.decode() if isinstance(k, bytes) else k for k in m}
    allowed = set(TABLES[marker])
    for a in also:
        allowed |= set(TABLES[a])
    assert keys <= allowed, f"{path}: keys not in the key table: {sorted(keys - allowed)}"
    required = {k for k, req in TABLES[marker].items() if req}
    assert required <= keys, f"{path}: required keys missing: {sorted(required - keys)}"
    for k, v in m.items():
        name = k.decode() if isinstance(k, bytes) else k
        sub = NESTED.get(marker, {}).get(name)
        if sub is None:
            continue
        for i, item in enumerate(v if isinstance(v, list) else [v]):
            check(sub, item, path=f"{path}.{name}" + (f"[{i}]" if isinstance(v, list) else ""))
    return keys


@pytest.fixture
def daemons(tmpdir_):
    yield from td.daemons.__wrapped__(tmpdir_)


tmpdir_ = td.tmpdir_


def test_daemon_messages_match_key_table(daemons):
    for marker in ("input", "array", "start", "result", "end", "aggregates", "error", "hit",
                   "status", "control.reply", "lossless.reply"):
        assert marker in TABLES, marker
    hits_port = td.free_port()
    d = daemons(devices="ref", npt=48, lossless=True,
                extra=tp.PEAKS + f'hits:\n  endpoint: "{ep(hits_port)}"\n')
    # a 2D cake too: reload with npt_azim (also gives a "setup" start and a reload reply)
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace("  split: full\n", "  split: full\n  npt_azim: 12\n"))
    r = d.request({"cmd": "reload"})
    check("control.reply", r)
    assert r["ok"], r

    rx = td.Receiver(d)
    hits = d.ctx.socket(zmq.SUB)
    hits.connect(ep(hits_port))
    hits.setsockopt(zmq.SUBSCRIBE, b"")
    ll = td.Receiver(d, lossless=True)
    rx.settle()
    ll.settle()
    imgs, _ = tp.spot_frames(4)
    tx = td.Sender(d)
    tx.start(series_id=9, nimages=len(imgs) + 1, series_unique_id="keys",
             user_data={"sample": "lysozyme", "n": [1, 2]})
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=9, timestamp=1.5 + i, start_time=[1, 2])
    tx.raw([td.header(len(imgs), 9), b"short"])  # payload of the wrong size: an error message
    tx.end(series_id=9)
    rx.collect_until_end()

    seen = {}
    for m in rx.msgs:
        seen.setdefault(m["type"], 0)
        seen[m["type"]] += 1
        if m["type"] == "stats":
            check("status", m)
        else:
            check(m["type"], m)
    assert {"start", "result", "end", "error"} <= set(seen), seen
    starts = rx.of("start")
    assert any(s["input"]["start_message"] for s in starts)
    results = rx.of("result")
    assert any("I_2d" in r and "user_data" not in r and "peak_x" in r for r in results)
    assert any("timestamp" in r and "start_time" in r for r in results)
    assert any(s.get("user_data") == {"sample": "lysozyme", "n": [1, 2]} for s in starts)

    # stats and aggregates come on their own clocks
    t_end = time.monotonic() + LONG
    kinds = set()
    while {"stats", "aggregates"} - kinds and time.monotonic() < t_end:
        if rx.sock.poll(1000):
            topic, body = rx.sock.recv_multipart()
            m = msgpack.unpackb(body)
            kinds.add(m["type"])
            check("status" if m["type"] == "stats" else m["type"], m)
    assert {"stats", "aggregates"} <= kinds, kinds

    # the hits channel: one map per hit frame (frames 0 and 2 have spots)
    assert hits.poll(LONG * 1000)
    check("hit", msgpack.unpackb(hits.recv(), raw=False))

    # the lossless channel carried the same stream after its welcome
    for m in ll.collect_until_end():
        check(m["type"], m)
    for m in ll.welcomes:
        check("lossless.reply", m)
    ll.close()

    # control replies
    check("control.reply", d.request({"cmd": "ping"}))
    check("control.reply", d.request({"cmd": "status"}), also=("status",))
    check("status", {k: v for k, v in d.request({"cmd": "status"}).items()
                     if k not in ("ok", "cmd")})
    check("control.reply", d.request({"cmd": "config"}))
    check("control.reply", d.request({"cmd": "reset"}))
    bad = d.request({"cmd": "fly"})
    assert bad["ok"] is False
    check("control.reply", bad)
    assert d.request({"cmd": "stop"})["ok"]
