#!/usr/bin/env python3
"""Re-checks issue 10's defects 1-13 from outside, the way each was found (not in CI).

Each probe starts the real daemon of a build (Release by default: build-rel/bin) on loopback
(or ipc://) and attacks it with pyzmq peers, faidctl and signals, as the hostile-but-fair prober
of issue 10 did; where a defect applies to them, again through the DECTRIS stream v2 input and
with CURVE on. It prints one line per defect, PASS or FAIL with the figures measured, and exits 1
when any probe fails. The harness (Daemon, Sender, receivers, the DECTRIS encoders) is the
integration tests' own: tests/integration/test_daemon.py and tests/reference/dectris_stream.py.

    python3 tests/soak/probe_defects.py                     # all, against build-rel/bin
    python3 tests/soak/probe_defects.py --bin build/bin 1 2 6
    python3 tests/soak/probe_defects.py --fuzz-build build-fuzz 9 13   # clang, FAID_FUZZ=ON

Figures are of the machine it runs on; nothing here is a benchmark. tests/soak/README.md says
what each probe does and what passes."""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("defects", nargs="*", type=int, help="defect numbers (default: 1-13)")
    p.add_argument("--bin", default=os.path.join(SRC, "build-rel", "bin"),
                   help="folder of faid and faidctl (default: build-rel/bin)")
    p.add_argument("--fuzz-build", default=os.path.join(SRC, "build-fuzz"),
                   help="FAID_FUZZ=ON build folder for defects 9 and 13 (configured with clang "
                        "and built here when missing)")
    p.add_argument("--big", type=int, default=512, help="MiB of the oversized message (defect 1)")
    p.add_argument("--conns", type=int, default=1000, help="idle connections (defect 7)")
    p.add_argument("--verbose", action="store_true", help="tracebacks of failing probes")
    return p.parse_args()


ARGS = parse_args()
os.environ["FAID_BIN"] = os.path.abspath(ARGS.bin)
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))

import msgpack  # noqa: E402
import numpy as np  # noqa: E402
import zmq  # noqa: E402
import zmq.auth  # noqa: E402

import dectris_stream as ds  # noqa: E402
from test_daemon import (COLS, FAID, FAIDCTL, ROWS, Daemon, LosslessReceiver, Sender,  # noqa: E402
                         config_text, ep, frames, header)

PROMPT = 10  # s: a control answer slower than this counts as "control unreachable"
LONG = int(os.environ.get("PROBE_LONG", "120"))  # s: only turns hangs into failures


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def start(tmp, name, **cfg):
    sub = os.path.join(tmp, name)
    os.makedirs(sub)
    d = Daemon(sub, **cfg)
    d.wait_ready()
    return d


def hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_request(d, req, timeout=PROMPT):
    t0 = time.monotonic()
    try:
        r = d.request(req, timeout=timeout)
    except TimeoutError:
        return None, time.monotonic() - t0
    return r, time.monotonic() - t0


def sigterm(d, timeout=PROMPT):
    """SIGTERM; returns (exit status or None when it did not exit in time, seconds)."""
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    try:
        rc = d.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        rc = None
    d.returncode = rc if rc is not None else d.returncode
    return rc, time.monotonic() - t0


def curve_setup(tmp):
    """faid's key pair and an authorized client (faidctl keygen); returns (security yaml,
    harness keys)."""
    auth = os.path.join(tmp, "authorized")
    os.makedirs(auth, exist_ok=True)
    for name in ("server", "client"):
        r = subprocess.run([FAIDCTL, "keygen", os.path.join(tmp, name)], capture_output=True,
                           text=True, timeout=LONG)
        check(r.returncode == 0, "faidctl keygen: " + r.stderr)
    shutil.copy(os.path.join(tmp, "client.pub"), os.path.join(auth, "client.pub"))
    sec = ("security:\n  curve: true\n  secret_key_file: \"%s\"\n  authorized_keys: \"%s\"\n"
           % (os.path.join(tmp, "server.key"), auth))
    pub, secret = zmq.auth.load_certificate(os.path.join(tmp, "client.key"))
    server = zmq.auth.load_certificate(os.path.join(tmp, "server.pub"))[0]
    return sec, (server, pub, secret), auth


def v2_start_msg(series, uid, nimages=5):
    return ds.v2_encode(ds.v2_start(series, uid, ["threshold_1"], (ROWS, COLS), "uint16",
                                    number_of_images=nimages))


def v2_image_msg(series, uid, fid, img, comp="bslz4"):
    return ds.v2_encode(ds.v2_image(series, uid, fid, {"threshold_1": img}, comp))


class Sink:
    """A SUB on faid's output decoding every message with msgpack's defaults (strict UTF-8,
    default nesting limits); decode failures are counted, not raised."""

    def __init__(self, d):
        self.sock = d.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        if d.curve:
            self.sock.curve_serverkey, self.sock.curve_publickey, self.sock.curve_secretkey = \
                d.curve
        self.sock.connect(ep(d.ports["out"]))
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.msgs, self.bad = [], []
        # Subscribed once the first stats message (every 0.5 s) arrives: a fixed sleep is too
        # short for a CURVE handshake on a loaded machine.
        t_end = time.monotonic() + LONG
        while not self.of("stats"):
            check(time.monotonic() < t_end, "no stats message on the output")
            self.drain(quiet=0.2)
        self.msgs.clear()

    def drain(self, until=None, quiet=2.0, timeout=LONG):
        # Without `until`: collects for `quiet` seconds (stats arrive every 0.5 s, so waiting
        # for a quiet spell would never end).
        t_end = time.monotonic() + (timeout if until is not None else quiet)
        while time.monotonic() < t_end:
            if not self.sock.poll(100):
                continue
            parts = self.sock.recv_multipart()
            try:
                m = msgpack.unpackb(parts[-1])
                self.msgs.append(m)
            except Exception as e:  # noqa: BLE001 - what Python's decoder says is the figure
                self.bad.append((parts[0][:20], type(e).__name__))
                continue
            if until is not None and until(self):
                return
        if until is not None:
            raise Fail("output did not reach its end; got %s"
                       % [(m.get("type"), m.get("series_id"), m.get("message"))
                          for m in self.msgs if m.get("type") != "stats"][-12:])

    def of(self, kind):
        return [m for m in self.msgs if m.get("type") == kind]


# ---- defect 1 ------------------------------------------------------------------------------------

def probe_1(tmp):
    """512 MiB to the input (native; DECTRIS v2 with CURVE) and to the control socket: peak RSS."""
    big = b"\0" * (ARGS.big << 20)
    figs, over = [], []
    sec, keys, _ = curve_setup(tmp)
    for label, cfg, curve in (("native", {}, None),
                              ("dectris-v2+curve", {"input_extra": "  protocol: dectris-v2\n",
                                                    "extra": sec}, keys)):
        d = start(tmp, "d1-" + label.replace("+", "-"), curve=curve, **cfg)
        try:
            img = frames(1)[0]
            tx = Sender(d)
            if curve is None:
                tx.image(0, img)
            else:
                tx.raw([v2_start_msg(1, "u1")])
                tx.raw([v2_image_msg(1, "u1", 0, img)])
            d.wait_counters(lambda c: c["processed"] == 1, "first frame processed")
            h0 = hwm_kib(d.proc.pid)
            big_tx = Sender(d)
            big_tx.sock.setsockopt(zmq.LINGER, 0)
            big_tx.sock.send(big, copy=False)
            t_end = time.monotonic() + LONG
            while d.status()["input"]["closed"] < 1:
                check(time.monotonic() < t_end, "%s: the big message had no visible effect" % label)
                time.sleep(0.1)
            big_tx.sock.close()
            grown_in = hwm_kib(d.proc.pid) - h0
            # Control: a REQ with the same 512 MiB.
            junk = d.ctx.socket(zmq.REQ)
            junk.setsockopt(zmq.LINGER, 0)
            if curve:
                junk.curve_serverkey, junk.curve_publickey, junk.curve_secretkey = curve
            junk.connect(ep(d.ports["ctl"]))
            junk.send(big, copy=False)
            time.sleep(3)
            r, lat = timed_request(d, {"cmd": "ping"})
            junk.close()
            grown = hwm_kib(d.proc.pid) - h0
            check(r is not None and r["ok"], "%s: control silent after the big request" % label)
            tx.image(1, img) if curve is None else tx.raw([v2_image_msg(1, "u1", 1, img)])
            d.wait_counters(lambda c: c["processed"] == 2, "frame after the flood processed")
            figs.append("%s: peak RSS +%.1f MB after input, +%.1f MB after control (%d MiB each)"
                        % (label, grown_in / 1024, grown / 1024, ARGS.big))
            check(grown < (ARGS.big << 10) // 8, figs[-1])
            # The same bytes as one multipart message of parts each under the limit: libzmq
            # hands faid no part before the last one arrived, so ZMQ_MAXMSGSIZE (per part)
            # does not bound it.
            nparts = ARGS.big // 2
            for where in ("input", "control"):
                part = b"\0" * ((1 << 20) if where == "input" else (60 << 10))
                n = nparts if where == "input" else (nparts << 20) // len(part)
                h1 = hwm_kib(d.proc.pid)
                s_ = d.ctx.socket(zmq.PUSH if where == "input" else zmq.REQ)
                s_.setsockopt(zmq.LINGER, 0)
                if curve:
                    s_.curve_serverkey, s_.curve_publickey, s_.curve_secretkey = curve
                s_.connect(ep(d.ports["in" if where == "input" else "ctl"]))
                s_.send_multipart([header(5)] + [part] * n, copy=False)
                time.sleep(4)
                s_.close()
                r, _ = timed_request(d, {"cmd": "ping"})
                check(r is not None, "%s: control silent after the multipart message" % label)
                figs.append("%s: %d x %d KiB parts to the %s: peak RSS +%.1f MB"
                            % (label, n, len(part) >> 10, where, (hwm_kib(d.proc.pid) - h1)
                               / 1024))
                if hwm_kib(d.proc.pid) - h1 >= (ARGS.big << 10) // 8:
                    over.append(figs[-1])
            rc, _ = sigterm(d)
            check(rc == 0, "%s: exit %s" % (label, rc))
        finally:
            d.stop()
    check(not over, "; ".join(figs) + "; UNBOUNDED: " + "; ".join(over))
    return "; ".join(figs)


# ---- defect 2 ------------------------------------------------------------------------------------

def raw_str_msgpack(obj, placeholder, raw):
    b = msgpack.packb(obj)
    ph = placeholder.encode()
    return b.replace(bytes([0xa0 | len(ph)]) + ph, bytes([0xa0 | len(raw)]) + raw)


def cbor_text(s):
    b = s.encode()
    assert len(b) < 24
    return bytes([0x60 | len(b)]) + b


def outputs_decode(d, sink, label, lossless=None):
    """Every output decodes with Python's defaults: PUB (sink), lossless, status, stats,
    faidctl status --json. Returns a figure."""
    st_raw = None
    s = d.ctx.socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    if d.curve:
        s.curve_serverkey, s.curve_publickey, s.curve_secretkey = d.curve
    s.connect(ep(d.ports["ctl"]))
    s.send(msgpack.packb({"cmd": "status"}))
    check(s.poll(PROMPT * 1000), "%s: no status answer" % label)
    st_raw = s.recv()
    s.close()
    try:
        msgpack.unpackb(st_raw)
        st_ok = True
    except Exception:  # noqa: BLE001
        st_ok = False
    bad = len(sink.bad) + (0 if st_ok else 1) + (len(lossless.bad) if lossless else 0)
    check(not sink.bad, "%s: %d PUB messages undecodable: %s" % (label, len(sink.bad),
                                                              sink.bad[:4]))
    check(st_ok, "%s: control status undecodable" % label)
    return bad


def probe_2(tmp):
    figs = []
    # Native: the messages, then a good series; PUB, lossless, status, faidctl.
    d = start(tmp, "d2-native", lossless=True)
    try:
        faidsub = subprocess.Popen([FAIDCTL, "sub", "--from", ep(d.ports["out"]), "--json",
                                    "--count", "1000", "--timeout", "15", "--quiet"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sink = Sink(d)
        ll = LosslessReceiver(d)
        ll.settle()
        tx = Sender(d)
        img = frames(1)[0]
        tx.raw([raw_str_msgpack(dict(type="start", protocol_version=1, series_id=2, nimages=3,
                                     series_unique_id="@@"), "@@", b"\xff\xfe")])
        tx.raw([raw_str_msgpack(dict(type="image", protocol_version=1, series_id=2, frame_id=0,
                                     series_unique_id="@@", shape=[ROWS, COLS], dtype="uint16",
                                     encoding="none"), "@@", b"\xff\xfe"), img.tobytes()])
        deep = header(1, series_id=2, user_data="@@@@@@@@").replace(
            b"\xa8@@@@@@@@", b"\x91" * 3000 + b"\xa1x")
        tx.raw([deep, img.tobytes()])
        deep_map = header(2, series_id=2, user_data="@@@@@@@@").replace(
            b"\xa8@@@@@@@@", b"\x81\xa1d" * 3000 + b"\xa1x")
        tx.raw([deep_map, img.tobytes()])
        tx.raw([raw_str_msgpack(dict(type="end", protocol_version=1, series_id=2,
                                     series_unique_id="@@"), "@@", b"\xff\xfe")])
        # Values that end up quoted in error messages: dtype, encoding, type, a key name.
        for k, field in enumerate(("dtype", "encoding", "type")):
            h = dict(type="image", protocol_version=1, series_id=2, frame_id=10 + k,
                     shape=[ROWS, COLS], dtype="uint16", encoding="none")
            h[field] = "@@"
            tx.raw([raw_str_msgpack(h, "@@", b"\xff\xfe"), img.tobytes()])
        h = msgpack.packb(dict(type="image", protocol_version=1, series_id=2, frame_id=13,
                               shape=[ROWS, COLS], dtype="uint16", encoding="none", QQ=1))
        tx.raw([h.replace(b"\xa2QQ", b"\xa2\xff\xfe"), img.tobytes()])
        # Control requests quoting bad text back: an unknown command, a path, a config key.
        ctl_bad = 0
        for req in (dict(cmd="@@"), dict(cmd="reload", path="@@"), dict(cmd="config", key="@@"),
                    dict(cmd="config", get="@@")):
            s_ = d.ctx.socket(zmq.REQ)
            s_.setsockopt(zmq.LINGER, 0)
            s_.connect(ep(d.ports["ctl"]))
            s_.send(raw_str_msgpack(req, "@@", b"\xff\xfe"))
            check(s_.poll(PROMPT * 1000), "native: no answer to %r" % req)
            ans = s_.recv()
            s_.close()
            try:
                msgpack.unpackb(ans)
            except Exception:  # noqa: BLE001
                ctl_bad += 1
                sink.bad.append(("control %r" % req, repr(ans[:80])))
        tx.start(series_id=3, series_unique_id="ok")
        tx.image(0, img, series_id=3)
        tx.end(series_id=3)
        sink.drain(until=lambda s: any(m.get("series_id") == 3 for m in s.of("end")))
        t_end = time.monotonic() + LONG
        while not ll.of("end") or ll.of("end")[-1].get("series_id") != 3:
            check(time.monotonic() < t_end, "native: lossless consumer got no end(3)")
            time.sleep(0.1)
        sink.drain(quiet=1.5)  # a stats message or two
        n_stats = len(sink.of("stats"))
        outputs_decode(d, sink, "native")
        r = subprocess.run([FAIDCTL, "status", "--json", "--control", ep(d.ports["ctl"])],
                           capture_output=True, timeout=LONG)
        json.loads(r.stdout.decode("utf-8"))
        out, _ = faidsub.communicate(timeout=LONG)
        try:
            lines = [json.loads(x) for x in out.decode("utf-8").splitlines()
                     if x.startswith("{")]
        except (UnicodeDecodeError, ValueError) as e:
            raise Fail("native: faidctl sub --json wrote invalid UTF-8/JSON: %s" % e)
        errs = sink.of("error")
        figs.append("native: %d PUB msgs (%d errors, %d stats) + %d lossless + status + %d "
                    "faidctl JSON lines all decode" % (len(sink.msgs), len(errs), n_stats,
                                                       len(ll.msgs), len(lines)))
        check(len(sink.of("result")) >= 1, "native: no result of the good series")
        ll.close()
        check(d.terminate() == 0, "native: exit status")
    finally:
        d.stop()

    # DECTRIS stream v2 (with CURVE): a start whose text fields are not UTF-8, user_data 3000
    # deep, an image with a bad series_unique_id, then a good series.
    sec, keys, _ = curve_setup(tmp)
    d = start(tmp, "d2-v2", curve=keys, input_extra="  protocol: dectris-v2\n", extra=sec)
    try:
        sink = Sink(d)
        tx = Sender(d)
        img = frames(1)[0]
        m = ds.v2_start(4, "PH_UID", ["threshold_1"], (ROWS, COLS), "uint16",
                        detector_description="PH_DESC", detector_serial_number="PH_SER",
                        sensor_material="PH_MAT", number_of_images=2,
                        goniometer={"PH_AXIS": {"increment": 0.1, "start": 1.0}},
                        user_data={"PH_KEY": "PH_VAL", "deep": "PH_DEEP"})
        raw = ds.v2_encode(m)
        for ph in ("PH_UID", "PH_DESC", "PH_SER", "PH_MAT", "PH_AXIS", "PH_KEY", "PH_VAL"):
            raw = raw.replace(cbor_text(ph), b"\x62\xff\xfe")
        raw = raw.replace(cbor_text("PH_DEEP"), b"\x81" * 3000 + b"\x61x")
        tx.raw([raw])
        for ph_frame in range(2):
            im = ds.v2_encode(ds.v2_image(4, "PH_UID", ph_frame, {"threshold_1": img}, "bslz4",
                                          user_data={"s": "PH_VAL", "deep": "PH_DEEP"}))
            im = im.replace(cbor_text("PH_UID"), b"\x62\xff\xfe")
            im = im.replace(cbor_text("PH_VAL"), b"\x62\xff\xfe")
            im = im.replace(cbor_text("PH_DEEP"), b"\x81" * 3000 + b"\x61x")
            tx.raw([im])
        tx.raw([ds.v2_encode(ds.v2_end(4, "x")).replace(cbor_text("x"), b"\x62\xff\xfe")])
        # The same start with each field bad alone (is any one of them echoed?).
        for k, ph in enumerate(("PH_UID", "PH_DESC", "PH_SER", "PH_MAT", "PH_AXIS", "PH_KEY",
                                "PH_VAL")):
            one = ds.v2_encode(m).replace(cbor_text(ph), b"\x62\xff\xfe")
            for other in ("PH_UID", "PH_DESC", "PH_SER", "PH_MAT", "PH_AXIS", "PH_KEY",
                          "PH_VAL", "PH_DEEP"):
                one = one.replace(cbor_text(other), cbor_text("ok%d" % k))
            one = one.replace(b"\x04", b"\x04", 1)
            tx.raw([one])
            tx.raw([v2_image_msg(4, "ok%d" % k, 0, img)])
        # Values quoted in error messages: message type, compression name, channel, dtype.
        tx.raw([ds.v2_encode({"type": "PH_T", "series_id": 4}).replace(cbor_text("PH_T"),
                                                                       b"\x62\xff\xfe")])
        im = ds.v2_encode(ds.v2_image(4, "ok0", 1, {"threshold_1": img}, "PH_C"))
        tx.raw([im.replace(cbor_text("PH_C"), b"\x62\xff\xfe")])
        im = ds.v2_encode(ds.v2_image(4, "ok0", 2, {"PH_CH": img}, "bslz4"))
        tx.raw([im.replace(cbor_text("PH_CH"), b"\x62\xff\xfe")])
        st_ = ds.v2_encode(ds.v2_start(6, "six", ["threshold_1"], (ROWS, COLS), "uint16",
                                       image_dtype="PH_DT"))
        tx.raw([st_.replace(cbor_text("PH_DT"), b"\x62\xff\xfe")])
        tx.raw([v2_start_msg(5, "good")])
        tx.raw([v2_image_msg(5, "good", 0, img)])
        tx.raw([ds.v2_encode(ds.v2_end(5, "good"))])
        sink.drain(until=lambda s: any(m.get("series_id") == 5 for m in s.of("end")))
        sink.drain(quiet=1.5)
        outputs_decode(d, sink, "dectris-v2+curve")
        c = d.status()["counters"]
        check(c["received"] == c["processed"] + c["failed"] + c["dropped"],
              "v2: counters do not balance %r" % c)
        figs.append("dectris-v2+curve: %d PUB msgs (%d errors, %d starts) + status all decode"
                    % (len(sink.msgs), len(sink.of("error")), len(sink.of("start"))))
        check(d.terminate() == 0, "v2: exit status")
    finally:
        d.stop()
    return "; ".join(figs)


# ---- defect 3 ------------------------------------------------------------------------------------

def sender_thread(d, n, series_id=1, img_every=None, proto="native"):
    imgs = frames(3)

    def run():
        tx = Sender(d)
        if proto == "native":
            tx.start(series_id=series_id, nimages=n)
            for i in range(n):
                tx.image(i, imgs[i % 3], series_id=series_id)
            tx.end(series_id=series_id)
        else:
            tx.raw([v2_start_msg(series_id, "s%d" % series_id, n)])
            for i in range(n):
                tx.raw([v2_image_msg(series_id, "s%d" % series_id, i, imgs[i % 3])])
            tx.raw([ds.v2_encode(ds.v2_end(series_id, "s%d" % series_id))])
        tx.sock.close(LONG * 1000)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def wait_for(pred, what, timeout=LONG):
    t_end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > t_end:
            raise Fail("timed out: " + what)
        time.sleep(0.02)


def probe_3(tmp):
    n = 1500
    figs = []
    sec, keys, _ = curve_setup(tmp)
    for label, cfg, curve in (("native", {}, None),
                              ("dectris-v2+curve", {"input_extra": "  protocol: dectris-v2\n",
                                                    "extra": sec}, keys)):
        d = start(tmp, "d3-" + label.replace("+", "-"), lossless=True, curve=curve, **cfg)
        try:
            a = LosslessReceiver(d, name="archive")
            a.settle()
            tx = sender_thread(d, n, proto="native" if curve is None else "v2")
            wait_for(lambda: len([m for m in a.msgs if m["type"] == "result"]) >= 250,
                     "first consumer got 250 results")
            a.stall()
            # A second consumer meanwhile must get nothing.
            b2 = LosslessReceiver(d, name="intruder")
            time.sleep(1.5)
            a.vanish()
            b = LosslessReceiver(d, name="archive")
            wait_for(lambda: b.of("end"), "second consumer got the end")
            tx.join(LONG)
            wait_for(lambda: d.status()["lossless"]["held"] == 0, "all acknowledged")
            got = {}
            for m in a.msgs + b.msgs:
                got.setdefault(m["msg_number"], 0)
                got[m["msg_number"]] += 1
            ids = sorted(m["frame_id"] for m in a.msgs + b.msgs if m["type"] == "result")
            st = d.status()
            ll = st["lossless"]
            stolen = len(b2.msgs)
            fig = ("%s: %d results of %d (first %d, second %d, dup %d), intruder got %d, "
                   "sent %d resent %d given_up %d"
                   % (label, len(set(ids)), n, len([m for m in a.msgs if m["type"] == "result"]),
                      len([m for m in b.msgs if m["type"] == "result"]), b.duplicates, stolen,
                      ll["sent"], ll["resent"], sum(ll["given_up"].values())))
            figs.append(fig)
            check(ids == list(range(n)) and sorted(got) == list(range(n + 2)), fig)
            check(stolen == 0 and b2.refusals, fig)
            b.close()
            b2.done.set()
            check(d.terminate() == 0, "exit status")
        finally:
            d.stop()
    # No consumer at all: PUB subscribers still see every result.
    d = start(tmp, "d3-nocons", lossless=True, output_extra="  sndhwm: 100000\n")
    try:
        sink = Sink(d)
        tx = sender_thread(d, n)
        sink.drain(until=lambda s: bool(s.of("end")))
        tx.join(LONG)
        r = len(sink.of("result"))
        figs.append("no consumer: PUB got %d/%d, held %d" % (r, n, d.status()["lossless"]["held"]))
        check(r == n, figs[-1])
        check(d.terminate() == 0, "exit status")
    finally:
        d.stop()
    return "; ".join(figs)


# ---- defect 4 ------------------------------------------------------------------------------------

def with_key(text, section, line):
    head = section + ":\n"
    return text.replace(head, head + "  " + line + "\n", 1)


def probe_4(tmp):
    sec, keys, auth = curve_setup(tmp)
    d = start(tmp, "d4", curve=keys, extra=sec)
    figs = []
    try:
        fifo = os.path.join(tmp, "pipe.fifo")
        os.mkfifo(fifo)
        base = config_text(d.ports, extra=sec)
        cases = {"file": None,
                 "mask": with_key(base, "detector", "mask: " + fifo),
                 "dark": with_key(base, "integration", "dark: " + fifo),
                 "flat": with_key(base, "integration", "flat: " + fifo),
                 "poni": with_key(base, "geometry", "poni_file: " + fifo),
                 "mask=/dev/zero": with_key(base, "detector", "mask: /dev/zero"),
                 "secret_key=fifo": base.replace(os.path.join(tmp, "server.key"), fifo)}
        worst = 0.0
        for what, text in cases.items():
            if text is None:
                path = fifo
            else:
                path = os.path.join(tmp, "with_%s.yaml" % what.replace("/", "_"))
                with open(path, "w") as f:
                    f.write(text)
            r, lat = timed_request(d, {"cmd": "reload", "path": path})
            worst = max(worst, lat)
            check(r is not None, "reload naming a FIFO (%s) got no answer in %d s" % (what, PROMPT))
            check(r["ok"] is False, "%s: reload accepted: %r" % (what, r))
            st, lat = timed_request(d, {"cmd": "status"})
            check(st is not None and st["ok"], "%s: status unanswered after reload" % what)
        # faidctl reload of the FIFO itself.
        t0 = time.monotonic()
        try:
            p = subprocess.run([FAIDCTL, "reload", "--control", ep(d.ports["ctl"]),
                                "--server-key", os.path.join(tmp, "server.pub"),
                                "--key", os.path.join(tmp, "client.key"), fifo],
                               capture_output=True, text=True, timeout=PROMPT)
            check(p.returncode != 0, "faidctl reload FIFO succeeded")
        except subprocess.TimeoutExpired:
            raise Fail("faidctl reload FIFO hung")
        worst = max(worst, time.monotonic() - t0)
        # A FIFO among the authorized keys (re-read on every reload).
        os.mkfifo(os.path.join(auth, "evil.pub"))
        r, lat = timed_request(d, {"cmd": "reload"})
        worst = max(worst, lat)
        check(r is not None, "reload with a FIFO in authorized_keys got no answer")
        os.unlink(os.path.join(auth, "evil.pub"))
        st, _ = timed_request(d, {"cmd": "status"})
        check(st is not None and st["ok"], "status after authorized_keys FIFO")
        figs.append("%d reload cases refused, slowest answer %.2f s (authorized_keys FIFO: %s)"
                    % (len(cases) + 1, worst, "refused" if not r["ok"] else "accepted"))
        rc, t = sigterm(d)
        check(rc == 0, "SIGTERM: exit %s after %.1f s" % (rc, t))
        figs.append("SIGTERM exit 0 in %.2f s" % t)
    finally:
        d.stop()
    # -c FIFO at start: must not block.
    fifo2 = os.path.join(tmp, "start.fifo")
    os.mkfifo(fifo2)
    try:
        p = subprocess.run([FAID, "-c", fifo2], capture_output=True, text=True, timeout=PROMPT)
        check(p.returncode != 0 and fifo2 in p.stderr, "faid -c FIFO: rc %s %s"
              % (p.returncode, p.stderr[-200:]))
        figs.append("faid -c FIFO: exit %d" % p.returncode)
    except subprocess.TimeoutExpired:
        raise Fail("faid -c FIFO blocked for %d s" % PROMPT)
    return "; ".join(figs)


# ---- defect 5 ------------------------------------------------------------------------------------

def probe_5(tmp):
    figs = []
    env = dict(os.environ, POCL_MAX_PTHREAD_COUNT="2")
    ctx = zmq.Context()
    for label, shared in (("in+out+ctl+lossless", ("in", "out", "ctl", "lossless")),
                          ("out only", ("out",)), ("lossless only", ("lossless",)),
                          ("ctl only", ("ctl",))):
        sub = os.path.join(tmp, "d5-" + label.replace(" ", "_").replace("+", "_"))
        os.makedirs(sub)
        from test_daemon import free_port
        eps = {k: "ipc://%s/%s.sock" % (sub, k) for k in ("in", "out", "ctl", "lossless")}

        def cfg(name):
            ports = {k: free_port() for k in ("in", "out", "ctl", "lossless")}
            text = config_text(ports, lossless=True)
            for k in shared:
                text = text.replace('"%s"' % ep(ports[k]), '"%s"' % eps[k])
            path = os.path.join(sub, name + ".yaml")
            with open(path, "w") as f:
                f.write(text)
            return path, ports

        c1, p1 = cfg("first")
        c2, _ = cfg("second")
        first = subprocess.Popen([FAID, "-c", c1], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=env)
        try:
            ctl = eps["ctl"] if "ctl" in shared else ep(p1["ctl"])

            def ping():
                s = ctx.socket(zmq.REQ)
                s.setsockopt(zmq.LINGER, 0)
                s.connect(ctl)
                try:
                    s.send(msgpack.packb({"cmd": "status"}))
                    return msgpack.unpackb(s.recv()) if s.poll(2000) else None
                finally:
                    s.close()

            t_end = time.monotonic() + LONG
            while ping() is None:
                check(first.poll() is None and time.monotonic() < t_end, "first did not start")
            try:
                second = subprocess.run([FAID, "-c", c2], capture_output=True, text=True,
                                        env=env, timeout=60)
            except subprocess.TimeoutExpired:
                raise Fail("%s: the second instance kept running" % label)
            check(second.returncode != 0, "%s: second instance started (rc 0)" % label)
            check("in use" in second.stderr, "%s: %s" % (label, second.stderr[-300:]))
            check(first.poll() is None and ping() is not None, "%s: first lost control" % label)
            figs.append("%s: second exit %d" % (label, second.returncode))
        finally:
            first.send_signal(signal.SIGTERM)
            try:
                first.wait(PROMPT)
            except subprocess.TimeoutExpired:
                first.kill()
                first.wait()
    ctx.destroy(linger=0)
    return "; ".join(figs)


# ---- defect 6 ------------------------------------------------------------------------------------

def probe_6(tmp):
    figs = []
    for label in ("native", "dectris-v2", "dectris-v1"):
        cfg = {} if label == "native" else {"input_extra": "  protocol: %s\n" % label}
        d = start(tmp, "d6-" + label, **cfg)
        try:
            sink = Sink(d)
            tx = Sender(d)
            imgs = frames(6)
            bad = np.zeros((7, 9), np.uint16)
            if label == "native":
                tx.start(series_id=5, nimages=6)
                for i in range(3):
                    tx.image(i, imgs[i], series_id=5)
                tx.raw([header(99, 6, bad.shape, "uint16"), bad.tobytes()])
                # A start of series 6 that is malformed (a key of the wrong type): rejected too.
                tx.raw([msgpack.packb(dict(type="start", protocol_version=1, series_id=6,
                                           nimages="many"))])
                for i in range(3, 6):
                    tx.image(i, imgs[i], series_id=5)
                tx.end(series_id=5)
            elif label == "dectris-v1":
                tx.raw(ds.v1_header(5, "basic", ds.v1_config((ROWS, COLS), "uint16", nimages=6,
                                                             ntrigger=1)))
                for i in range(3):
                    tx.raw(ds.v1_image(5, i, imgs[i], "lz4<"))
                tx.raw(ds.v1_image(6, 99, bad, "lz4<"))
                tx.raw([ds.jpart({"htype": "dheader-1.0", "series": 7})])  # no header_detail
                for i in range(3, 6):
                    tx.raw(ds.v1_image(5, i, imgs[i], "lz4<"))
                tx.raw(ds.v1_end(5))
            else:
                tx.raw([v2_start_msg(5, "five", 6)])
                for i in range(3):
                    tx.raw([v2_image_msg(5, "five", i, imgs[i])])
                tx.raw([ds.v2_encode(ds.v2_image(6, "six", 99, {"threshold_1": bad}, "bslz4"))])
                tx.raw([v2_start_msg(7, "seven", 6)[:40]])  # a truncated start of series 7
                # A start of series 9 with a number_of_images of the wrong type.
                tx.raw([ds.v2_encode(ds.v2_start(9, "nine", ["threshold_1"], (ROWS, COLS),
                                                 "uint16", number_of_images="many"))])
                for i in range(3, 6):
                    tx.raw([v2_image_msg(5, "five", i, imgs[i])])
                tx.raw([ds.v2_encode(ds.v2_end(5, "five"))])
            sink.drain(until=lambda s: bool(s.of("end")))
            sink.drain(quiet=1.0)
            seq = [(m["type"], m.get("series_id")) for m in sink.msgs
                   if m["type"] in ("start", "end")]
            s5 = [m for m in sink.of("start") if m.get("series_id") == 5]
            e5 = [m for m in sink.of("end") if m.get("series_id") == 5]
            fig = "%s: %s, nimages %s, end(5) processed %s" % (
                label, seq, s5[0].get("nimages") if s5 else None,
                e5[0].get("frames_processed") if e5 else None)
            figs.append(fig)
            check(seq == [("start", 5), ("end", 5)], fig)
            check(s5[0]["nimages"] == 6 and e5[0]["frames_processed"] == 6
                  and e5[0]["reason"] == "end", fig)
            check(d.terminate() == 0, "exit")
        finally:
            d.stop()
    return "; ".join(figs)


# ---- defect 7 ------------------------------------------------------------------------------------

def probe_7(tmp):
    figs = []
    sec, keys, _ = curve_setup(tmp)
    variants = (("default limits", {}, None, ARGS.conns),
                ("ulimit -n 256", {"wrapper": ("sh", "-c", 'ulimit -n 256 && exec "$@"', "sh")},
                 None, 600),
                ("curve", {"extra": sec}, keys, ARGS.conns))
    for label, cfg, curve, nconn in variants:
        d = start(tmp, "d7-" + label.replace(" ", "_"), curve=curve, **cfg)
        conns = []
        try:
            for _ in range(nconn):
                c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                c.setblocking(False)
                c.connect_ex(("127.0.0.1", d.ports["in"]))
                conns.append(c)
            time.sleep(1)
            cpu0, w0 = cpu_s(d.proc.pid), time.monotonic()
            worst = 0.0
            unanswered = 0
            while time.monotonic() - w0 < 5:
                r, lat = timed_request(d, {"cmd": "ping"}, timeout=PROMPT)
                worst = max(worst, lat)
                unanswered += r is None
                time.sleep(0.25)
            cpu, wall = cpu_s(d.proc.pid) - cpu0, time.monotonic() - w0
            inp = d.status()["input"]
            img = frames(1)[0]
            Sender(d).image(0, img)
            d.wait_counters(lambda c: c["processed"] == 1, "frame beside the idle connections")
            fig = ("%s, %d conns: CPU %.2f s in %.1f s, control worst %.2f s, %d unanswered, "
                   "%s failed accepts, %s closed over the cap of %s"
                   % (label, nconn, cpu, wall, worst, unanswered, inp["accept_failed"],
                      inp.get("over_cap"), inp.get("connection_cap")))
            figs.append(fig)
            check(cpu < 0.5 * wall and unanswered == 0, fig)
        finally:
            for c in conns:
                c.close()
            d.stop()
    return "; ".join(figs)


# ---- defect 8 ------------------------------------------------------------------------------------

def probe_8(tmp):
    d = start(tmp, "d8", npt=64)
    try:
        other = os.path.join(tmp, "other.yaml")
        with open(other, "w") as f:
            f.write(config_text(d.ports, npt=96))
        r = subprocess.run([FAIDCTL, "reload", "--control", ep(d.ports["ctl"]), other],
                           capture_output=True, text=True, timeout=LONG)
        check(r.returncode == 0, "faidctl reload: " + r.stderr)
        st = d.status()
        after_reload = (st["config_file"], st.get("config_start_file"))
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: d.status()["setup_version"] == 3, "SIGHUP reload")
        st = d.status()
        cfg = d.request({"cmd": "config"})
        fig = ("after reload PATH status names %s; after SIGHUP %s, npt 64 back: %s"
               % (os.path.basename(after_reload[0]), os.path.basename(st["config_file"]),
                  "npt: 64" in cfg["config"]))
        check(after_reload[0] == other and st["config_file"] == d.config
              and "npt: 64" in cfg["config"], fig)
        check(d.terminate() == 0, "exit")
        return fig
    finally:
        d.stop()


# ---- defect 9 ------------------------------------------------------------------------------------

def bslz4_huge_block(img, block=0xFFFFFFF0):
    """A real bitshuffle-LZ4 chunk of img written as one block (hdf5plugin), its header's block
    size then set to ~4 GiB: still a valid chunk (a block larger than the data is one short last
    block), which faid may decode or refuse but must not allocate 4 GiB for."""
    import hdf5plugin
    chunk = ds.h5_chunk(np.ascontiguousarray(img), hdf5plugin.Bitshuffle(nelems=img.size,
                                                                         cname="lz4"))
    return chunk[:8] + block.to_bytes(4, "big") + chunk[12:]


def probe_9(tmp):
    figs = []
    chunk = bslz4_huge_block(frames(1)[0])
    for label, devices in (("ref", "ref"), ("cpu", "cpu")):
        for proto in ("native", "dectris-v2"):
            cfg = {"devices": devices}
            if proto != "native":
                cfg["input_extra"] = "  protocol: dectris-v2\n"
            d = start(tmp, "d9-%s-%s" % (label, proto), **cfg)
            try:
                img = frames(1)[0]
                tx = Sender(d)
                if proto == "native":
                    tx.image(0, img, encoding="none")
                else:
                    tx.raw([v2_start_msg(1, "u")])
                    tx.raw([v2_image_msg(1, "u", 0, img, comp=None)])
                d.wait_counters(lambda c: c["processed"] == 1, "first frame")
                h0 = hwm_kib(d.proc.pid)
                for k in range(5):
                    if proto == "native":
                        tx.raw([header(1 + k, encoding="bslz4"), chunk])
                    else:
                        m = ds.v2_image(1, "u", 1 + k, {"threshold_1": img}, "bslz4")
                        m["data"]["threshold_1"].value[1].value.value[2] = chunk
                        tx.raw([ds.v2_encode(m)])
                st = d.wait_counters(lambda c: c["processed"] + c["failed"] + c["bad_input"]
                                     >= 6, "5 handled")
                grown = (hwm_kib(d.proc.pid) - h0) / 1024
                c = st["counters"]
                fig = ("%s/%s: 5 chunks claiming 4 GiB blocks: %d decoded, %d refused, peak RSS "
                       "+%.1f MB" % (proto, label, c["processed"] - 1,
                                     c["failed"] + c["bad_input"], grown))
                figs.append(fig)
                check(grown < 64, fig)
                check(d.terminate() == 0, "exit")
            finally:
                d.stop()
    fz = fuzz_build()
    if fz:
        # The codec fuzz target under an RSS cap: once ran out of memory in under 10 s.
        corpus = tempfile.mkdtemp(dir=tmp)
        shutil.copytree(os.path.join(SRC, "tests", "fuzz", "corpus", "codec"),
                        os.path.join(corpus, "c"))
        with open(os.path.join(corpus, "c", "huge-block"), "wb") as f:
            f.write(b"\x01\x00" + chunk)  # element size 2, then the chunk
        # libFuzzer's default RSS cap (2 GiB; ASan's quarantine alone keeps 256 MB) and any
        # single allocation over 64 MB reported as out-of-memory: the harness's own buffers are
        # at most 1 MiB, so only a size taken from the chunk's header could exceed it.
        r = subprocess.run([os.path.join(fz, "bin", "fuzz_codec"), "-max_total_time=20",
                            "-malloc_limit_mb=64", "-artifact_prefix=%s/" % tmp,
                            os.path.join(corpus, "c")],
                           capture_output=True, text=True, timeout=120)
        last = [ln for ln in r.stderr.splitlines() if "cov:" in ln]
        fig = "fuzz_codec 20 s, malloc cap 64 MB: rc %d, %s" % (
            r.returncode, last[-1].split("\t")[0].strip() if last else "no stats")
        figs.append(fig)
        check(r.returncode == 0, fig + "\n" + r.stderr[-1500:])
    else:
        figs.append("fuzz target not built (no clang): codec fuzz run skipped")
    return "; ".join(figs)


def fuzz_build():
    out = os.path.abspath(ARGS.fuzz_build)
    if not shutil.which("clang"):
        return None
    if not os.path.exists(os.path.join(out, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", SRC, "-B", out, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DFAID_FUZZ=ON", "-DCMAKE_C_COMPILER=clang"], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", out, "-j2", "--target", "fuzz_codec"], check=True,
                   stdout=subprocess.DEVNULL)
    return out


# ---- defect 10 -----------------------------------------------------------------------------------

def probe_10(tmp):
    n = 50
    d = start(tmp, "d10", lossless=True,
              output_extra="  sndhwm: 100000\n  lossless_shutdown_timeout: 0.5\n")
    try:
        sink = Sink(d)
        tx = sender_thread(d, n)
        tx.join(LONG)
        bad = Sender(d)
        for k in range(2):  # two frames that fail: error messages on the lossless channel too
            bad.raw([header(100 + k, encoding="bslz4"), b"\0" * 20])
        d.wait_counters(lambda c: c["processed"] == n and c["failed"] + c["bad_input"] >= 2,
                        "all frames handled")
        rc, _ = sigterm(d, LONG)
        sink.drain(quiet=2.0)
        last = sink.of("stats")[-1]
        c = last["counters"]
        gu = last["lossless"]["given_up"]
        fig = ("received %d processed %d failed %d dropped %d; lossless given up %s"
               % (c["received"], c["processed"], c["failed"], c["dropped"], gu))
        check(rc == 0, "exit %s" % rc)
        check(c["received"] == c["processed"] + c["failed"] + c["dropped"] and c["dropped"] == 0
              and gu["result"] == n and gu["start"] == 1 and gu["end"] == 1, fig)
        return fig
    finally:
        d.stop()


# ---- defect 11 -----------------------------------------------------------------------------------

def probe_11(tmp):
    figs = []
    n = 999
    for label in ("native", "dectris-v2"):
        cfg = {} if label == "native" else {"input_extra": "  protocol: dectris-v2\n"
                                                            "  stop_timeout: 1.0\n"}
        if label == "native":
            cfg["input_extra"] = "  stop_timeout: 1.0\n"
        d = start(tmp, "d11-" + label, depth=4, output_extra="  sndhwm: 100000\n",
                  env={"FAID_TEST_WORKER_DELAY_US": "20000"}, **cfg)
        try:
            sink = Sink(d)
            sent = [0]
            imgs = frames(3)
            if label != "native":  # encoded before: the sender must outrun the slow worker
                v2msgs = [v2_image_msg(9, "nine", i, imgs[i % 3]) for i in range(n)]

            def run():
                # The sender keeps almost nothing on its side (SNDHWM 1, and it outruns the
                # slow worker, so faid's drain sees it pause): a frame that send() took is in
                # the kernel's buffers or in faid's and must be accounted, but for the one or
                # two still in the sender's own pipe when faid closes.
                tx = d.ctx.socket(zmq.PUSH)
                tx.setsockopt(zmq.SNDHWM, 1)
                tx.setsockopt(zmq.SNDTIMEO, 5000)
                tx.connect(ep(d.ports["in"]))
                tx = type("Tx", (), {"sock": tx, "raw": lambda self, p: self.sock.send_multipart(p),
                                     "start": Sender.start, "image": Sender.image})()
                try:
                    if label == "native":
                        tx.start(series_id=9, nimages=n)
                    else:
                        tx.raw([v2_start_msg(9, "nine", n)])
                    for i in range(n):
                        if label == "native":
                            tx.image(i, imgs[i % 3], series_id=9)
                        else:
                            tx.raw([v2msgs[i]])
                        sent[0] += 1
                except zmq.Again:
                    pass
                tx.sock.close(5000)

            t = threading.Thread(target=run, daemon=True)
            t.start()
            d.wait_counters(lambda c: c["processed"] >= 5, "some processed")
            rc, secs = sigterm(d, LONG)
            t.join(LONG)
            sink.drain(quiet=2.0)
            end = [m for m in sink.of("end")]
            stats = sink.of("stats")
            c = stats[-1]["counters"] if stats else {}
            e = end[-1] if end else {}
            fig = ("%s: sent %d, end received %s processed %s dropped %s failed %s; counters "
                   "received %s = processed %s + failed %s + dropped %s; exit %s in %.1f s"
                   % (label, sent[0], e.get("frames_received"), e.get("frames_processed"),
                      e.get("frames_dropped"), e.get("frames_failed"), c.get("received"),
                      c.get("processed"), c.get("failed"), c.get("dropped"), rc, secs))
            figs.append(fig)
            check(rc == 0 and e and c, fig)
            check(e["frames_processed"] + e["frames_dropped"] + e["frames_failed"]
                  == e["frames_received"], fig)
            check(c["received"] == c["processed"] + c["failed"] + c["dropped"], fig)
            # The sender's own pipe (SNDHWM 1) and the frame its I/O thread is writing are the
            # sender's: at most 2 frames that send() took may never have reached faid.
            check(0 <= sent[0] - e["frames_received"] <= 2,
                  fig + " (frames sent but not accounted)"
                  + ("\n" + d.logtext()[-1500:] if ARGS.verbose else ""))
        finally:
            d.stop()
    return "; ".join(figs)


# ---- defect 12 -----------------------------------------------------------------------------------

def probe_12(tmp):
    figs = []
    texts = {"empty": "", "comments": "# nothing\n# here\n", "blank": "\n  \n\n",
             "doc-marker": "---\n", "null": "~\n", "comment+marker": "# c\n---\n...\n",
             "bare-sections": "detector:\n#  preset: eiger2_4m\ninput:\n#  endpoint: x\n",
             "null-sections": "detector: null\ninput: ~\n", "empty-section": "detector: {}\n"}
    for label, text in texts.items():
        path = os.path.join(tmp, "%s.yaml" % label)
        with open(path, "w") as f:
            f.write(text)
        try:
            p = subprocess.run([FAID, "-c", path], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise Fail("%s config: faid started (still running after 30 s)" % label)
        check(p.returncode != 0 and path in p.stderr, "%s: rc %d, %s" % (label, p.returncode,
                                                                          p.stderr[-200:]))
    figs.append("faid -c refuses %d empty, comment-only or option-less files naming them"
                % len(texts))
    d = start(tmp, "d12")
    try:
        for label in texts:
            r, _ = timed_request(d, {"cmd": "reload", "path": os.path.join(tmp, label + ".yaml")})
            check(r is not None and r["ok"] is False, "reload of %s config: %r" % (label, r))
        figs.append("reload refuses all %d" % len(texts))
        check(d.terminate() == 0, "exit")
    finally:
        d.stop()
    return "; ".join(figs)


# ---- defect 13 -----------------------------------------------------------------------------------

def probe_13(tmp):
    fz = fuzz_build()
    if not fz:
        raise Fail("no clang: the fuzz build cannot be checked")
    # Edges libFuzzer sees from an empty corpus: with the library instrumented the codec target
    # climbs far above the ~20 edges of a harness-only build within seconds.
    corpus = os.path.join(tmp, "c13")
    os.makedirs(corpus)
    r = subprocess.run([os.path.join(fz, "bin", "fuzz_codec"), "-max_total_time=15",
                        "-artifact_prefix=%s/" % tmp, corpus],
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if "cov:" in ln]

    def cov(line):
        return int(line.split("cov:")[1].split()[0]) if line else 0
    c0, c1 = cov(lines[0] if lines else ""), cov(lines[-1] if lines else "")
    # Every object of the libraries under test carries coverage instrumentation itself (an
    # object with no code, e.g. embedded kernel text, has none to carry).
    libs = []
    for lib in ("libfaidbase.a", "libfaidproto.a", "libfaidcore.a", "libfaidengine.a",
                "libfaidclient.a"):
        path = os.path.join(fz, lib)
        objs = subprocess.run(["ar", "t", path], capture_output=True, text=True).stdout.split()
        nm = subprocess.run(["nm", "-A", path], capture_output=True, text=True).stdout
        inst = {ln.split(":")[1] for ln in nm.splitlines() if "__sanitizer_cov_" in ln}
        libs.append("%s %d/%d objects" % (lib, len(inst), len(objs)))
        codec = [o for o in objs if o.startswith("faid_codec")]
        check(not codec or all(o in inst for o in codec), lib + ": codec not instrumented")
    fig = "fuzz_codec from an empty corpus: cov %d -> %d in 15 s; instrumented: %s" % (
        c0, c1, ", ".join(libs))
    check(r.returncode == 0 and c1 > 100, fig)
    return fig


PROBES = {k: globals()["probe_%d" % k] for k in range(1, 14)}


def main():
    wanted = ARGS.defects or sorted(PROBES)
    check_bin = [p for p in (FAID, FAIDCTL) if not os.access(p, os.X_OK)]
    if check_bin:
        sys.exit("not built: %s" % check_bin)
    failed = 0
    for k in wanted:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="faid-probe%d-" % k) as tmp:
            try:
                fig = PROBES[k](tmp)
                line = "PASS defect %2d: %s" % (k, fig)
            except Exception as e:  # noqa: BLE001 - every failure is reported as such
                failed += 1
                line = "FAIL defect %2d: %s: %s" % (k, type(e).__name__, e)
                if ARGS.verbose:
                    traceback.print_exc()
        print("%s [%.0f s]" % (line, time.monotonic() - t0), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
