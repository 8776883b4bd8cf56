"""Hardening, round 2 (issue 20, defects 7-10): what a faulty or hostile peer can make faid do
with the geometry and the mask of a start message, with a large authorized_keys folder, and to
faid's own log. Each test reproduces one defect from outside, the way it was found, with the real
daemon and real clients.

Nothing asserts on time: timeouts only turn hangs into failures. Helpers come from
test_daemon.py, test_dectris_stream.py and test_security.py (same folder)."""

import http.client
import os
import re
import socket
import urllib.request

import numpy as np
import zmq

from test_daemon import (LONG, ROWS, COLS, Sender, Receiver, arr, daemons, ep,  # noqa: F401
                         free_port, tmpdir_)
from test_dectris_stream import Detector, counters_balance, ds
from test_security import client_keys, curve_daemon, keys  # noqa: F401

CH = ["threshold_1"]


def http_extra(port):
    return 'http:\n  endpoint: "127.0.0.1:%d"\n' % port


def metric(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=LONG) as r:
        text = r.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, "%s missing from /metrics" % name
    return int(float(m.group(1)))


def full_log(d):
    d.log.flush()
    d.log.seek(0)
    return d.log.read()


def test_absurd_start_geometry_is_refused_and_counted(daemons):
    # Defect 7: with input.geometry_source start, finite but absurd geometry from the wire built
    # a setup and published NaN radial bins. Each value outside the option table's range must
    # be refused (the configuration's geometry used), counted and named in the log; the series'
    # frames are reduced and accounted for as usual.
    port = free_port()
    d = daemons(lossless=True, input_extra="  geometry_source: start\n", extra=http_extra(port))
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    img = np.random.default_rng(7).poisson(20, (ROWS, COLS)).astype(np.uint16)
    # Series 1, stream v1, which names its keys otherwise: the log says them as the message did.
    det.send(ds.v1_header(1, "basic", config=ds.v1_config((ROWS, COLS), np.uint16,
                                                           wavelength=1e-300)))
    det.send(ds.v1_image(1, 0, img, "<"))
    det.send(ds.v1_end(1))
    # Series 2.., stream v2: one absurd value each, then all at once, then a sane start.
    sane = dict(beam_center_x=40.5, beam_center_y=90.25, incident_wavelength=0.8,
                pixel_size_x=75e-6, pixel_size_y=75e-6, detector_translation=[0.0, 0.0, 0.15])
    absurd = [dict(incident_wavelength=1e-300),  # 1e-310 m
              dict(detector_translation=[0.0, 0.0, 1e300]),
              dict(pixel_size_x=1e300, pixel_size_y=1e300),
              dict(beam_center_x=1e308, beam_center_y=1e308),
              dict(incident_wavelength=1e-300, detector_translation=[0.0, 0.0, 1e300],
                   pixel_size_x=1e300, pixel_size_y=1e300, beam_center_x=1e308,
                   beam_center_y=1e308)]
    for sid, bad in enumerate(absurd + [{}], start=2):
        geo = dict(sane, **bad)
        uid = "S%d" % sid
        det.send(ds.v2_encode(ds.v2_start(sid, uid, CH, (ROWS, COLS), "uint16", **geo)))
        det.send(ds.v2_encode(ds.v2_image(sid, uid, 0, {CH[0]: img}, "bslz4")))
        det.send(ds.v2_encode(ds.v2_end(sid, uid)))
    refused, n = 1 + len(absurd), 2 + len(absurd)
    rx.collect_until_end(n_ends=n)
    starts = {s["series_id"]: s for s in rx.of("start")}
    results = {r["series_id"]: r for r in rx.of("result")}
    assert sorted(starts) == sorted(results) == list(range(1, n + 1))
    for sid in range(1, n + 1):
        radial = arr(starts[sid]["radial"])
        assert np.isfinite(radial).all(), (sid, radial[:4])
        count = arr(results[sid]["count"])
        assert count.sum() > 0 and np.isfinite(arr(results[sid]["I"])[count > 0]).all(), sid
    for sid in range(1, refused + 1):
        assert starts[sid]["input"]["geometry_source"] == "configuration", starts[sid]["input"]
        assert starts[sid]["geometry"]["dist"] == 0.1
    last = starts[n]
    assert last["input"]["geometry_source"] == "start" and last["geometry"]["dist"] == 0.15
    c = d.status()["counters"]
    assert c["start_geometry_refused"] == refused, c
    assert metric(port, "faid_start_geometry_refused_total") == refused
    assert c["processed"] == n
    counters_balance(c)
    assert d.terminate() == 0
    det.close()
    # One line per refusal, rate-limited (5 a second): the first five name key and value; the
    # sixth, if it came within the same second, is counted in a suppressed line.
    log = full_log(d)
    for key, value in (("start message wavelength", "1e-300"), ("incident_wavelength", "1e-300"),
                       ("detector_translation", "1e+300"), ("pixel_size", "1e+300"),
                       ("beam_center", "1e+308")):
        assert re.search(r"WARN .*%s.*%s" % (key, re.escape(value)), log), (key, log[-3000:])
    shown = len(re.findall(r"WARN  ingest: series \d+: start message .* outside ", log))
    supp = sum(int(x) for x in re.findall(r"\((\d+) more like \"series %llu: start message", log))
    assert shown + supp == refused, (shown, supp)


def test_wrong_shape_detector_mask_is_counted(daemons):
    # Defect 8: a start message's detector pixel mask of the wrong shape was refused with one
    # ERROR line and no counter. It is counted in status and /metrics; the series goes on with
    # the setup in force.
    port = free_port()
    d = daemons(lossless=True, extra=http_extra(port))
    rx = Receiver(d, lossless=True)
    det = Detector(d, bind=False)
    img = np.random.default_rng(8).poisson(20, (ROWS, COLS)).astype(np.uint16)
    masks = {1: np.zeros((ROWS + 1, COLS), np.uint32), 2: np.zeros((ROWS, COLS), np.uint32),
             3: np.zeros((COLS // 2, 2 * ROWS), np.uint32)}
    for sid, m in masks.items():
        uid = "M%d" % sid
        det.send(ds.v2_encode(ds.v2_start(sid, uid, CH, (ROWS, COLS), "uint16",
                                          masks={CH[0]: m}, compression="bslz4")))
        det.send(ds.v2_encode(ds.v2_image(sid, uid, 0, {CH[0]: img}, "bslz4")))
        det.send(ds.v2_encode(ds.v2_end(sid, uid)))
    rx.collect_until_end(n_ends=len(masks))
    assert sorted(r["series_id"] for r in rx.of("result")) == [1, 2, 3]
    c = d.status()["counters"]
    assert c["detector_masks_refused"] == 2, c
    assert metric(port, "faid_detector_masks_refused_total") == 2
    counters_balance(c)
    assert "does not match the setup's" in full_log(d)
    assert d.terminate() == 0
    det.close()


def test_ten_thousand_authorized_keys(curve_daemon, keys):
    # Defect 9: security.authorized_keys took at most 4,096 *.pub files: with 10,001 faid exited
    # 1 at start and refused every reload. Now any number is read (up to a documented limit far
    # above any facility's); a client with any of the keys is served, after a reload too.
    n_extra = 10000
    pairs = [zmq.curve_keypair() for _ in range(n_extra)]
    for i, (pub, _) in enumerate(pairs):
        with open(os.path.join(keys["auth"], "k%05d.pub" % i), "w") as f:
            f.write(pub.decode() + "\n")
    assert len([n for n in os.listdir(keys["auth"]) if n.endswith(".pub")]) == n_extra + 1
    d = curve_daemon()  # its control requests carry client.pub's key
    assert d.status()["ok"]
    assert "10001 client key(s) authorized" in full_log(d)
    server = client_keys(keys)[0]

    def ping_as(pub, sec):
        s = d.ctx.socket(zmq.REQ)
        s.linger = 0
        s.curve_serverkey, s.curve_publickey, s.curve_secretkey = server, pub, sec
        s.connect(ep(d.ports["ctl"]))
        try:
            s.send(b"\x81\xa3cmd\xa4ping")
            assert s.poll(LONG * 1000), "no reply with a key of the folder"
            return s.recv()
        finally:
            s.close()

    for i in (0, 4095, 4096, n_extra - 1):  # both ends and around the old limit
        assert b"ok" in ping_as(*pairs[i]), i
    r = d.request({"cmd": "reload"})
    assert r["ok"], r
    assert b"ok" in ping_as(*pairs[n_extra - 1])
    assert d.terminate() == 0


def test_peer_driven_log_lines_are_bounded(daemons, tmpdir_):
    # Defect 10: 100,000 series starts wrote 300,005 INFO lines, 20,000 malformed control
    # requests 20,000 WARN lines, and the HTTP server logged every connection it refused. Every
    # peer-driven line is now rate-limited per call site with a count of what was suppressed,
    # reported with the next line of that site or within a second (at the stop at the latest).
    port = free_port()
    tokens = os.path.join(tmpdir_, "tokens")
    with open(tokens, "w") as f:
        f.write("ops:0123456789abcdef0123\n")
    os.chmod(tokens, 0o600)
    d = daemons(extra=http_extra(port) + "  token_file: %s\n" % tokens)
    n = 5000
    tx = Sender(d)
    for k in range(1, n + 1):
        tx.start(series_id=k)
    d.wait_counters(lambda c: c["series"] >= n, "%d series opened" % n)

    s = d.ctx.socket(zmq.REQ)
    s.linger = 0
    s.connect(ep(d.ports["ctl"]))
    for k in range(n):
        s.send(b"\xc1 not msgpack %d" % k)
        assert s.poll(LONG * 1000), "no reply to a malformed request"
        s.recv()
    s.close()

    # Many more connections than the HTTP server keeps (FAID_HTTP_SOFT_CONN = 64): those shed
    # are counted in /metrics, never logged one by one (issue 19 point 5: 470 lines before).
    held = []
    for _ in range(100):
        c = socket.create_connection(("127.0.0.1", port), timeout=LONG)
        held.append(c)
    for _ in range(1000):
        c = socket.create_connection(("127.0.0.1", port), timeout=LONG)
        c.close()
    for c in held:
        c.close()
    # 1000 REST requests with a wrong token: each refused (401), the lines rate-limited
    hc = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    for _ in range(n // 5):
        hc.request("POST", "/api/v1/reset", headers={"Authorization": "Bearer " + "w" * 20})
        r = hc.getresponse()
        r.read()
        assert r.status == 401
    hc.close()
    assert d.request({"cmd": "ping"})["ok"]
    assert d.terminate() == 0

    log = full_log(d)
    lines = log.splitlines()
    # 48 lines on the 2-core development machine; at most 6 a second per site however slow the
    # machine (sanitizers, load) makes the floods; 21,026 before the rate limits.
    assert len(lines) < 600, "%d log lines; the last ones:\n%s" % (len(lines),
                                                                     "\n".join(lines[-40:]))

    def accounted(shown_re, fmt_text):
        shown = len(re.findall(shown_re, log))
        supp = sum(int(x) for x in re.findall(r"\((\d+) more like \"%s\" suppressed\)"
                                              % re.escape(fmt_text), log))
        return shown, supp

    shown, supp = accounted(r"WARN  control: bad request", "bad request: %s")
    assert supp > 0 and shown + supp == n, (shown, supp)
    shown, supp = accounted(r"INFO  ingest: series \d+ opened",
                            "series %llu opened (%s start message)")
    assert supp > 0 and shown + supp == n, (shown, supp)
    shown, supp = accounted(r"WARN  http: POST /api/v1/reset: a wrong bearer token refused",
                            "%s %s: %s bearer token refused")
    assert supp > 0 and shown + supp == n // 5, (shown, supp)


def test_control_reset_lines_are_bounded(daemons):
    # Defect 10, found by tests/soak/probe_defects2.py after the fixes: control `reset`, a valid
    # request any control client can repeat flat out, wrote one INFO line each (5,000 resets:
    # 5,000 lines, 340 kB). It is rate-limited like the other peer-driven lines: every reset
    # shown or counted as suppressed.
    n = 2000
    d = daemons()
    s = d.ctx.socket(zmq.REQ)
    s.linger = 0
    s.connect(ep(d.ports["ctl"]))
    for _ in range(n):
        s.send(b"\x81\xa3cmd\xa5reset")
        assert s.poll(LONG * 1000), "no reply to reset"
        assert b"ok" in s.recv()
    s.close()
    assert d.terminate() == 0
    log = full_log(d)
    shown = len(re.findall(r"INFO  control: aggregates reset", log))
    supp = sum(int(x) for x in re.findall(r"\((\d+) more like \"aggregates reset\" suppressed\)",
                                          log))
    assert supp > 0 and shown + supp == n, (shown, supp)
