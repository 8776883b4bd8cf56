"""Integration tests of faid-fan (issue 18): the real fan-out in front of real faid instances
(`devices: ref`, a 128 x 128 detector) on loopback, fed by senders that behave as the detectors
do (a round-robin PUSH socket; DECTRIS stream v1, v2 and Jungfraujoch messages from the
independent encoders of tests/reference/dectris_stream.py, faid's native messages).

Covered: every input protocol through one fan-out and three instances, each frame reduced exactly
once across them and bit-identical to `faidctl process` on the same frame; a tee consumer that
receives every message; `faidctl status` against the fan-out; kill -9 of one instance mid-series
(every frame reduced once or reported lost by id on the fan-out's PUB, the others go on); a
stalled instance (SIGSTOP: counted out after fan.instance_timeout, its frames reported lost, the
series completes on the others); a fourth instance joining mid-series (it gets the series' start
first, then frames from a later block); an instance whose configuration differs is refused
(or flagged and used, fan.config_mismatch flag); fan.policy credit; the full buffer (images
dropped at once, reported lost with instance ""); a hostile peer on the instances' endpoint
(garbage, an oversized part, a hello claiming a huge window: capped); the fan-out in a network
namespace of its own where this machine lets the test make one; the dashboard of the whole run
on the fan-out's HTTP server in headless Chromium (three instances with peak finding: the summed
frame count and hit rate equal `faidctl aggregates`), and its JSON whatever an instance's name.

Nothing asserts on time: timeouts only turn a hang into a failure."""

import os
import signal
import subprocess
import sys
import time
import urllib.request

import msgpack
import numpy as np
import pytest
import zmq

from chromium_page import needs_chromium
from test_daemon import (BIN, FAIDCTL, LONG, COLS, ROWS, Daemon, Receiver, assert_profile_bits,
                         config_text, ep, frames, free_port, header, process_refs)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import dectris_stream as ds  # noqa: E402
from test_protocol_keys import check as check_keys  # noqa: E402

FAN = os.path.join(BIN, "faid-fan")


class Fan:
    """faid-fan on free ports; input bound (a detector connects) or connecting to a detector's
    bound PUSH (input_mode connect, input_port its port)."""

    def __init__(self, tmpdir, input_mode="bind", input_port=None, sets=(), wrapper=(),
                 host="127.0.0.1"):
        self.host = host
        self.ports = {k: free_port() for k in ("in", "inst", "out", "ctl", "tee", "http")}
        if input_port:
            self.ports["in"] = input_port
        args = {
            "input.endpoint": ep(self.ports["in"]) if input_port else self.ep("in"),
            "input.mode": input_mode,
            "fan.instances_endpoint": self.ep("inst"),
            "fan.output_endpoint": self.ep("out"),
            "fan.control_endpoint": self.ep("ctl"),
            "fan.tee_endpoint": self.ep("tee"),
            "fan.http_endpoint": "%s:%d" % (host, self.ports["http"]),
            "fan.instance_timeout": "1.0",
            "fan.block": "4",
        }
        cmd = [*wrapper, FAN]
        for k, v in args.items():
            cmd += ["--set", "%s=%s" % (k, v)]
        for s in sets:
            cmd += ["--set", s]
        self.log = open(os.path.join(tmpdir, "fan.log"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.ctx = zmq.Context()
        # the fan-out's own messages (lost), subscribed before anything is sent
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.connect(self.ep("out"))
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.lost_msgs = []
        self.routed_msgs = []

    def request(self, req, timeout=LONG):
        s = self.ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(self.ep("ctl"))
        try:
            s.send(msgpack.packb(req))
            if not s.poll(timeout * 1000):
                raise TimeoutError("no reply to %r" % (req,))
            return msgpack.unpackb(s.recv())
        finally:
            s.close()

    def ep(self, name):
        return "tcp://%s:%d" % (self.host, self.ports[name])

    def status(self):
        assert self.proc.poll() is None, "faid-fan exited:\n" + self.logtext()
        r = self.request({"cmd": "status"})
        assert r["ok"], r
        return r

    def wait(self, pred, what):
        t_end = time.monotonic() + LONG
        while time.monotonic() < t_end:
            st = self.status()
            if pred(st):
                return st
            time.sleep(0.05)
        raise TimeoutError("%s never held; last status %r\n%s" % (what, st, self.logtext()))

    def live(self, st):
        return sorted(i["instance"] for i in st["instances"] if i["state"] == "live")

    def poll_lost(self, timeout=0.0):
        t_end = time.monotonic() + timeout
        while True:
            if self.sub.poll(int(max(0.0, t_end - time.monotonic()) * 1000)):
                topic, body = self.sub.recv_multipart()
                m = msgpack.unpackb(body)
                assert topic in (b"lost", b"routed") and m["type"] == topic.decode(), (topic, m)
                (self.lost_msgs if topic == b"lost" else self.routed_msgs).append(m)
                continue
            if time.monotonic() >= t_end:
                return self.lost_msgs

    def lost_frames(self, series):
        out = []
        for m in self.lost_msgs:
            if m["series"] == series:
                for a, b in m["frames"]:
                    out += range(a, b + 1)
        return out

    def logtext(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-6000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(LONG)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
            assert rc == 0, "faid-fan exited with %s:\n%s" % (rc, self.logtext())
        self.ctx.destroy(linger=0)
        self.log.close()


class Instance(Daemon):
    """faid as an instance behind the fan-out: input.protocol fan, connected to its ROUTER."""

    def __init__(self, tmpdir, fan, npt=64, wrapper=(), extra="", out_port=None, devices="ref"):
        self.ports = {k: free_port() for k in ("out", "lossless", "ctl")}
        if out_port:
            self.ports["out"] = out_port
        self.ports["in"] = fan.ports["inst"]
        self.config = os.path.join(tmpdir, "faid.yaml")
        with open(self.config, "w") as f:
            text = config_text(self.ports, npt=npt, devices=devices, depth=8, input_mode="connect",
                               input_extra="  protocol: fan\n", output_extra="  sndhwm: 10000\n",
                               extra=extra)
            # sndhwm: the test's receivers read only between phases; a burst beyond the
            # default 16 queued messages would be dropped for them (PUB semantics)
            f.write(text.replace(ep(fan.ports["inst"]), fan.ep("inst")))
        self.log = open(os.path.join(tmpdir, "faid.log"), "w+")
        self.proc = subprocess.Popen([*wrapper, os.path.join(BIN, "faid"), "-c", self.config],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.ctx = zmq.Context()
        self.curve = None
        self.returncode = None


@pytest.fixture
def rig(tmp_path):
    """start_fan(**kw) and start_instance(fan, **kw); everything is stopped at the end."""
    started = []

    def start_fan(**kw):
        f = Fan(str(tmp_path), **kw)
        started.append(f)
        return f

    def start_instance(fan, **kw):
        sub = tmp_path / ("i%d" % len(started))
        sub.mkdir()
        d = Instance(str(sub), fan, **kw)
        started.append(d)
        d.wait_ready()
        d.rx = Receiver(d)
        return d

    yield start_fan, start_instance
    for x in reversed(started):
        if isinstance(x, Instance) and x.proc.poll() is None:
            try:
                os.kill(x.proc.pid, signal.SIGCONT)
            except OSError:
                pass
        x.stop()


def three(rig, **fan_kw):
    start_fan, start_instance = rig
    fan = start_fan(**fan_kw)
    insts = [start_instance(fan) for _ in range(3)]
    fan.wait(lambda st: len(fan.live(st)) == 3, "three live instances")
    for d in insts:
        d.rx.settle()
    return fan, insts


def collect_ends(insts, n_ends=1):
    for d in insts:
        d.rx.collect_until_end(n_ends)


def results_of(insts, series):
    return [r for d in insts for r in d.rx.of("result") if r["series_id"] == series]


def check_against_process(inst, imgs, results, tmp_path, stem):
    """Every result equals `faidctl process` on the same frame (same configuration, device)."""
    refs = process_refs(inst, str(tmp_path / ("proc-" + stem)), imgs, "ref", stem)
    for res in results:
        assert_profile_bits(res, refs[res["frame_id"]])


class Tee:
    """The facility's writer on fan.tee_endpoint (PULL): every message, parts as received."""

    def __init__(self, fan):
        self.sock = fan.ctx.socket(zmq.PULL)
        self.sock.connect(fan.ep("tee"))
        self.msgs = []

    def collect(self, n):
        t_end = time.monotonic() + LONG
        while len(self.msgs) < n:
            assert time.monotonic() < t_end, "tee got %d of %d messages" % (len(self.msgs), n)
            if self.sock.poll(1000):
                self.msgs.append(self.sock.recv_multipart())
        return self.msgs


# ---- senders: a detector's PUSH socket, bound (the fan-out connects) or connecting -----------


class Detector:
    def __init__(self, ctx, port=None, connect_to=None):
        self.sock = ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.sock.setsockopt(zmq.SNDTIMEO, LONG * 1000)
        if connect_to:
            self.sock.connect(connect_to)
        else:
            self.sock.bind(ep(port))

    def send(self, parts):
        self.sock.send_multipart(parts if isinstance(parts, list) else [parts])

    def close(self):
        self.sock.close()


def native_series(series, imgs, first=0):
    msgs = [[msgpack.packb(dict(type="start", protocol_version=1, series_id=series,
                                nimages=len(imgs)))]]
    for k, img in enumerate(imgs):
        msgs.append([header(first + k, series, img.shape, str(img.dtype)), img.tobytes()])
    msgs.append([msgpack.packb(dict(type="end", protocol_version=1, series_id=series))])
    return msgs


def v2_series(series, imgs, jungfraujoch=False):
    uid = "fan-%d" % series
    extra = {}
    if jungfraujoch:
        extra = {"magic_number": 0x52320004, "detector_distance": 0.125, "error_value": -1}
    start = ds.v2_start(series, uid, ["default"], (ROWS, COLS), np.uint16, **extra)
    msgs = [[ds.v2_encode(start)]]
    if jungfraujoch:  # a message type faid has no use for: to every instance, counted there
        msgs.append([ds.v2_encode({"type": "calibration", "series_id": series})])
    for k, img in enumerate(imgs):
        msgs.append([ds.v2_encode(ds.v2_image(series, uid, k, {"default": img}, "bslz4"))])
    msgs.append([ds.v2_encode(ds.v2_end(series, uid))])
    return msgs


def v1_series(series, imgs):
    cfg = ds.v1_config((ROWS, COLS), np.uint16)
    msgs = [ds.v1_header(series, "basic", config=cfg)]
    for k, img in enumerate(imgs):
        msgs.append(ds.v1_image(series, k, img, "bs16-lz4<"))
    msgs.append(ds.v1_end(series))
    return msgs


SERIES = {"native": native_series, "dectris-v1": v1_series, "dectris-v2": v2_series,
          "jungfraujoch": lambda s, imgs: v2_series(s, imgs, jungfraujoch=True)}


# ------------------------------------------------------------------------------------------------


def test_every_protocol_each_frame_once(rig, tmp_path):
    """Native, DECTRIS v1, v2 and Jungfraujoch through one fan-out (input.protocol auto, bound:
    the sender connects as a DCU's PUSH would be connected to) and three instances: every
    instance gets each series' start and end, every frame is reduced by exactly one of them,
    bit-identical to `faidctl process`; the tee receives every message; `faidctl status` lists
    the instances."""
    fan, insts = three(rig)
    tee = Tee(fan)
    time.sleep(0.3)  # the tee's and the receivers' connections are up
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    imgs = frames(24, seed=5)
    sent = 0
    for n, (proto, make) in enumerate(SERIES.items()):
        series = 10 + n
        msgs = make(series, imgs)
        for m in msgs:
            det.send(m)
        sent += len(msgs)
        collect_ends(insts)
        results = results_of(insts, series)
        ids = sorted(r["frame_id"] for r in results)
        assert ids == list(range(len(imgs))), (proto, ids)
        per = [len([r for r in d.rx.of("result") if r["series_id"] == series]) for d in insts]
        assert all(p > 0 for p in per), (proto, per)  # blocks of 4 went to every instance
        for d in insts:
            starts = [s for s in d.rx.of("start") if s["series_id"] == series]
            ends = [e for e in d.rx.of("end") if e["series_id"] == series]
            assert len(starts) == 1 and len(ends) == 1, (proto, starts, ends)
            assert ends[0]["frames_received"] == len(
                [r for r in d.rx.of("result") if r["series_id"] == series])
        check_against_process(insts[0], imgs, results, tmp_path, proto.replace("-", "_"))
    msgs = tee.collect(sent)
    assert len(msgs) == sent
    st = fan.status()
    assert st["counters"]["lost"] == 0 and st["counters"]["dropped"] == 0
    assert st["counters"]["routed"] == 4 * len(imgs)
    assert st["counters"]["tee_sent"] == sent and st["counters"]["tee_dropped"] == 0
    assert sorted(i["sent"] for i in st["instances"]) and sum(
        i["sent"] for i in st["instances"]) == 4 * len(imgs)
    assert len({i["config_hash"] for i in st["instances"]}) == 1
    # the reply has exactly the keys of the key table (proto/PROTOCOL.md section 3.9)
    check_keys("fanout-status", {k: v for k, v in st.items() if k not in ("ok", "cmd")})
    for i in st["instances"]:
        check_keys("fanout-status.instances", i)
    # the Jungfraujoch calibration message reached every instance, which counts it as ignored
    for d in insts:
        assert d.status()["counters"]["ignored"] == 1
    out = subprocess.run([FAIDCTL, "status", "--control", fan.ep("ctl")],
                         capture_output=True, text=True, timeout=LONG)
    assert out.returncode == 0, out.stderr
    for i in st["instances"]:
        assert i["instance"] in out.stdout
    metrics = subprocess.run(["curl", "-sf", "http://%s:%d/metrics" % (fan.host, fan.ports["http"])],
                             capture_output=True, text=True, timeout=LONG)
    if metrics.returncode == 0:  # curl present
        assert "faid_fan_routed_total %d" % (4 * len(imgs)) in metrics.stdout or \
            "faid_fan_routed_total" in metrics.stdout
    det.close()


def test_dectris_v2_round_robin_detector(rig, tmp_path):
    """A DCU as the specification says: a bound PUSH socket that round-robins over its
    clients. The fan-out is its one client (input.mode connect): the start and end reach every
    instance, each frame reaches one."""
    start_fan, start_instance = rig
    ctx = zmq.Context()
    port = free_port()
    det = Detector(ctx, port=port)
    fan = start_fan(input_mode="connect", input_port=port)
    insts = [start_instance(fan) for _ in range(3)]
    fan.wait(lambda st: len(fan.live(st)) == 3, "three live instances")
    for d in insts:
        d.rx.settle()
    imgs = frames(16, seed=7)
    for m in v2_series(3, imgs):
        det.send(m)
    collect_ends(insts)
    ids = sorted(r["frame_id"] for r in results_of(insts, 3))
    assert ids == list(range(16))
    det.close()
    ctx.destroy(linger=0)


def send_slowly(det, msgs, until=None):
    for m in msgs:
        det.send(m)
        if until:
            until()


def kill_mid_series(fan, det, victim, msgs, stop_at, kill_at, reduced):
    """The victim's death mid-series as the kill tests stage it: msgs[:stop_at] sent; once the
    victim has reduced `reduced` frames it is stopped (SIGSTOP), so that what msgs[stop_at:kill_at]
    route to it waits in its hands; every frame of those routed (msgs[0] is the start), it is
    killed (-9) and reaped; then the rest is sent."""
    for m in msgs[:stop_at]:
        det.send(m)
    victim.wait_counters(lambda c: c["processed"] >= reduced, "the victim reduced frames")
    os.kill(victim.proc.pid, signal.SIGSTOP)
    for m in msgs[stop_at:kill_at]:
        det.send(m)
    fan.wait(lambda st: st["counters"]["routed"] == kill_at - 1, f"{kill_at - 1} frames routed")
    victim.proc.kill()
    victim.proc.wait()
    for m in msgs[kill_at:]:
        det.send(m)


def test_kill_instance_mid_series(rig):
    """kill -9 of one instance mid-series: the others go on and end the series; every frame is
    reduced exactly once or reported lost by series and frame id on the fan-out's PUB."""
    fan, insts = three(rig)
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    imgs = frames(48, seed=3)
    msgs = native_series(7, imgs)
    victim = insts[1]
    # frames in its hands when it dies
    kill_mid_series(fan, det, victim, msgs, 13, 25, 2)
    survivors = [insts[0], insts[2]]
    collect_ends(survivors)
    st = fan.wait(lambda st: st["counters"]["routed"] + st["counters"]["dropped"] == len(imgs),
                  "every image routed")
    # the victim's results up to its death (its SUB socket kept what arrived)
    got_victim = victim.rx.sock.poll(500)
    while victim.rx.sock.poll(200):
        topic, body = victim.rx.sock.recv_multipart()
        victim.rx.msgs.append(msgpack.unpackb(body))
    del got_victim
    results = [r["frame_id"] for d in insts for r in d.rx.of("result") if r["series_id"] == 7]
    assert len(results) == len(set(results)), "a frame was reduced twice"
    fan.poll_lost(1.0)
    lost = fan.lost_frames(7)
    for m in fan.lost_msgs:
        check_keys("fanout-lost", m)
    assert lost, "frames handed to the killed instance were not reported lost"
    assert all(m["instance"] == [i for i in fan.status()["instances"]
                                 if i["state"] == "dead"][0]["instance"] for m in fan.lost_msgs)
    assert set(results) | set(lost) == set(range(len(imgs))), (sorted(results), sorted(lost))
    dead = [i for i in st["instances"] if i["state"] == "dead"]
    assert len(dead) == 1 and dead[0]["lost"] == len(set(lost))
    assert st["counters"]["lost"] == len(set(lost))
    for d in survivors:
        assert d.proc.poll() is None


def test_merged_sub_over_fan_out_with_killed_instance(rig):
    """The two halves of issue 18 together: `faidctl sub --from i1 --from i2 --from i3 --fan
    <fan-out's PUB>` over a fan-out whose second instance is killed (-9) mid-series. The fan-out's
    `lost` report, as faid-fan sends it (series, instance by its `instance.name`, frames as
    ranges), is parsed by the merged subscriber, passed on, and ends the dead instance's part
    (--dead-after is far beyond the test): one start, one merged end, every frame delivered once
    or listed missing, none both."""
    import json

    fan, insts = three(rig)
    names = [d.status()["instance"] for d in insts]
    assert len(set(names)) == 3, names  # instance.name: host name and control port
    sub = subprocess.Popen(
        [FAIDCTL, "sub", "--json", "--quiet", "--until-end", "--timeout", "60", "--dead-after",
         "600", *[a for d in insts for a in ("--from", ep(d.ports["out"]))], "--fan",
         fan.ep("out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # the merge's subscriptions are up before the start is published
        det = Detector(fan.ctx, connect_to=fan.ep("in"))
        imgs = frames(48, seed=11)
        msgs = native_series(8, imgs)
        victim = insts[1]
        kill_mid_series(fan, det, victim, msgs, 13, 25, 2)
        out, err = sub.communicate(timeout=LONG * 2)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()
    assert sub.returncode == 0, err
    lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    lost = [m for m in lines if m["type"] == "lost"]
    assert lost and all(m["instance"] == names[1] for m in lost), lost
    starts = [m for m in lines if m["type"] == "start" and m["series_id"] == 8]
    ends = [m for m in lines if m["type"] == "end" and m["series_id"] == 8]
    assert len(starts) == 1 and len(ends) == 1, (starts, ends)
    assert ends[0]["lost"] == 1 and ends[0]["ended"] == 2, ends[0]
    delivered = [m["frame_id"] for m in lines if m["type"] == "result" and m["series_id"] == 8]
    assert len(delivered) == len(set(delivered)), "a frame was delivered twice"
    missing = [i for a, b in ends[0]["missing_frames"] for i in range(a, b + 1)]
    assert not set(delivered) & set(missing), (sorted(delivered), missing)
    assert sorted(delivered + missing) == list(range(len(imgs))), (sorted(delivered), missing)
    assert missing, "the killed instance held frames it never reduced"
    # what the merge lists missing is what the fan-out reported lost and nobody reduced
    reported = set()
    for m in lost:
        for r in m["frames"]:
            a, b = (r, r) if isinstance(r, int) else r
            reported |= set(range(a, b + 1))
    assert set(missing) <= reported, (missing, sorted(reported))
    det.close()


def test_stalled_instance(rig):
    """SIGSTOP of one instance: it stops granting credit, is counted out after
    fan.instance_timeout, the frames it held are reported lost and the series completes on the
    others; resumed, it says hello again and is live once more."""
    fan, insts = three(rig)
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    imgs = frames(48, seed=4)
    msgs = native_series(8, imgs)
    stalled = insts[2]
    for m in msgs[:13]:
        det.send(m)
    stalled.wait_counters(lambda c: c["processed"] >= 1, "the stalled one reduced frames")
    os.kill(stalled.proc.pid, signal.SIGSTOP)
    for m in msgs[9:]:
        det.send(m)
    others = insts[:2]
    collect_ends(others)
    st = fan.wait(lambda st: any(i["state"] == "dead" for i in st["instances"]),
                  "the stalled instance counted out")
    fan.poll_lost(1.0)
    lost = set(fan.lost_frames(8))
    results = [r["frame_id"] for d in others for r in d.rx.of("result") if r["series_id"] == 8]
    results += [r["frame_id"] for r in stalled.rx.of("result") if r["series_id"] == 8]
    assert len(results) == len(set(results))
    assert lost, "the stalled instance's frames were not reported lost"
    assert set(results) | lost == set(range(len(imgs))), (sorted(results), sorted(lost))
    os.kill(stalled.proc.pid, signal.SIGCONT)
    fan.wait(lambda st: len(fan.live(st)) == 3, "the resumed instance live again")


def test_fourth_instance_joins_mid_series(rig):
    """An instance that joins while a series is open gets the series' start first, then
    frames from a later block; every frame is still reduced exactly once."""
    start_fan, start_instance = rig
    fan, insts = three(rig)
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    imgs = frames(64, seed=6)
    msgs = native_series(9, imgs)
    for m in msgs[:17]:
        det.send(m)
    fan.wait(lambda st: st["counters"]["routed"] == 16, "the first 16 frames routed")
    late = start_instance(fan)
    fan.wait(lambda st: len(fan.live(st)) == 4, "four live instances")
    late.rx.settle()
    for m in msgs[17:]:
        det.send(m)
    collect_ends(insts + [late])
    results = [r["frame_id"] for d in insts + [late] for r in d.rx.of("result")
               if r["series_id"] == 9]
    assert sorted(results) == list(range(len(imgs)))
    late_ids = [r["frame_id"] for r in late.rx.of("result")]
    assert late_ids and min(late_ids) >= 16
    # its series opened by the start the fan-out handed it on joining, not by a frame (its
    # SUB may have connected after that start was published: the log tells)
    log = late.logtext()
    assert "series 9 opened (native start message)" in log, log
    assert "opened by its first frame" not in log, log
    st = fan.status()
    shards = {i["instance"]: (i["shard"], i["shards"]) for i in st["instances"]}
    assert sorted(s for s, _ in shards.values()) == [0, 1, 2, 3]


def test_mismatched_configuration_refused(rig):
    """An instance whose configuration hash differs from the instances already there is refused
    (fan.config_mismatch refuse): status says so, it gets no frame, the others get them all."""
    start_fan, start_instance = rig
    fan = start_fan()
    good = [start_instance(fan) for _ in range(2)]
    fan.wait(lambda st: len(fan.live(st)) == 2, "two live instances")
    odd = start_instance(fan, npt=65)
    st = fan.wait(lambda st: any(i["state"] == "refused" for i in st["instances"]),
                  "the odd instance refused")
    refused = [i for i in st["instances"] if i["state"] == "refused"]
    assert len(refused) == 1 and refused[0]["config_hash"] != good[0].status()["config_hash"]
    assert refused[0]["config_hash"] == odd.status()["config_hash"]
    for d in good:
        d.rx.settle()
    odd.rx.settle()
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    for m in native_series(5, frames(12, seed=2)):
        det.send(m)
    collect_ends(good)
    assert sorted(r["frame_id"] for r in results_of(good, 5)) == list(range(12))
    assert odd.status()["counters"]["received"] == 0
    t_end = time.monotonic() + LONG
    while "refused" not in odd.logtext():
        assert time.monotonic() < t_end, odd.logtext()
        time.sleep(0.1)


def test_credit_policy_each_frame_once(rig):
    """fan.policy credit: each image to the instance with the most free credit; every frame is
    still reduced exactly once and every instance gets the start and the end."""
    fan, insts = three(rig, sets=("fan.policy=credit",))
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    imgs = frames(30, seed=8)
    for m in native_series(4, imgs):
        det.send(m)
    collect_ends(insts)
    assert sorted(r["frame_id"] for r in results_of(insts, 4)) == list(range(30))
    st = fan.status()
    assert st["policy"] == "credit" and st["counters"]["routed"] == 30


def zmq_io_threads(pid):
    """The ZeroMQ I/O threads of a process (libzmq names them ZMQbg/IO/N)."""
    names = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.append(f.read().strip())
        except OSError:
            pass  # a thread that ended meanwhile
    return sorted(n for n in names if n.startswith("ZMQbg/IO/"))


def test_io_threads_spread_the_instances(rig):
    """fan.io_threads: the instances' sockets live in a context with that many ZeroMQ I/O
    threads (the input has one of its own), so the instances' connections are written by
    several threads; every frame is still reduced exactly once and in its block. A value out of
    range is refused at start with the key named."""
    r = subprocess.run([FAN, "--set", "fan.io_threads=0"], capture_output=True, text=True,
                       timeout=LONG)
    assert r.returncode == 2 and "fan.io_threads" in r.stderr, (r.returncode, r.stderr)
    fan, insts = three(rig, sets=("fan.io_threads=3",))
    assert len(zmq_io_threads(fan.proc.pid)) == 3 + 1, zmq_io_threads(fan.proc.pid)
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    imgs = frames(36, seed=12)
    for m in native_series(7, imgs):
        det.send(m)
    collect_ends(insts)
    got = {id(d): sorted(r["frame_id"] for r in results_of([d], 7)) for d in insts}
    assert sorted(f for v in got.values() for f in v) == list(range(36))
    for v in got.values():  # fan.block 4: whole blocks per instance
        assert v and all(f // 4 * 4 in v for f in v), v
    st = fan.status()
    assert st["counters"]["routed"] == 36 and st["counters"]["dropped"] == 0


def test_full_buffer_drops_and_reports(rig):
    """With no instance to take them, images wait in the buffer (fan.buffer_bytes, here its
    minimum of 1 MiB): those that do not fit are dropped at once, counted and reported lost
    with instance "" by frame id; the sender is never blocked; an instance that then joins gets
    the start and the frames that waited."""
    start_fan, start_instance = rig
    fan = start_fan(sets=("fan.buffer_bytes=1048576",))
    time.sleep(0.3)
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    imgs = frames(60, seed=9)  # 32 KiB each: about 32 fit
    msgs = native_series(6, imgs)
    for m in msgs[:-1]:
        det.send(m)
    st = fan.wait(lambda st: st["counters"]["received"] == len(msgs) - 1, "every message read")
    dropped = st["counters"]["dropped"]
    assert 0 < dropped < len(imgs)
    fan.poll_lost(1.0)
    lost = fan.lost_frames(6)
    assert len(lost) == dropped and all(m["instance"] == "" for m in fan.lost_msgs)
    assert lost == list(range(len(imgs) - dropped, len(imgs)))  # the newest did not fit
    late = start_instance(fan)
    fan.wait(lambda st: len(fan.live(st)) == 1, "the instance live")
    late.rx.settle()
    det.send(msgs[-1])
    late.rx.collect_until_end()
    # the waiting frames went out as soon as it joined, maybe before its SUB was connected:
    # its end accounts for them
    end = late.rx.of("end")[0]
    assert end["frames_received"] == end["frames_processed"] == len(imgs) - dropped


@pytest.fixture
def netns():
    """A network namespace of its own for the fan-out, reached from this one over a veth pair
    (10.77.N.1 inside, 10.77.N.254 here); skipped where it cannot be made (not root, no
    ip(8), no veth)."""
    n = os.getpid() % 250
    name, here, there = "faidfan%d" % os.getpid(), "ffh%d" % os.getpid(), "ffn%d" % os.getpid()
    steps = [["ip", "netns", "add", name],
             ["ip", "link", "add", here[:15], "type", "veth", "peer", "name", there[:15]],
             ["ip", "link", "set", there[:15], "netns", name],
             ["ip", "addr", "add", "10.77.%d.254/24" % n, "dev", here[:15]],
             ["ip", "link", "set", here[:15], "up"],
             ["ip", "-n", name, "addr", "add", "10.77.%d.1/24" % n, "dev", there[:15]],
             ["ip", "-n", name, "link", "set", there[:15], "up"],
             ["ip", "-n", name, "link", "set", "lo", "up"]]
    made = False
    try:
        for cmd in steps:
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            except OSError as e:
                pytest.skip("network namespaces: %s: %s" % (" ".join(cmd), e))
            if r.returncode != 0:
                pytest.skip("network namespaces cannot be made here: %s: %s"
                            % (" ".join(cmd), r.stderr.strip()))
            made = True
        yield name, "10.77.%d.1" % n
    finally:
        if made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
            subprocess.run(["ip", "link", "del", here[:15]], capture_output=True, timeout=30)


def test_fan_out_in_its_own_network_namespace(rig, netns):
    """The fan-out in a network namespace of its own (as on a host of its own: every byte
    between it, the sender, the instances and the tee crosses a veth link, not loopback): three
    instances, each frame reduced once, the tee gets every message."""
    start_fan, start_instance = rig
    name, addr = netns
    fan = start_fan(host=addr, wrapper=("ip", "netns", "exec", name))
    insts = [start_instance(fan) for _ in range(3)]
    fan.wait(lambda st: len(fan.live(st)) == 3, "three live instances")
    tee = Tee(fan)
    for d in insts:
        d.rx.settle()
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    msgs = v2_series(2, frames(24, seed=11))
    for m in msgs:
        det.send(m)
    collect_ends(insts)
    assert sorted(r["frame_id"] for r in results_of(insts, 2)) == list(range(24))
    assert len(tee.collect(len(msgs))) == len(msgs)


def test_hostile_link_peer(rig):
    """Whoever reaches the instances' endpoint: garbage, a link message that is not a map, one of
    an unknown type, an oversized part (beyond 64 KiB: the connection is dropped) and a hello
    claiming a window of 2^62 frames never crash or wedge the fan-out; the claimed window is
    capped (131072, what faid may ask at most), so such a peer cannot hoard the stream; real
    instances still get every frame."""
    start_fan, start_instance = rig
    fan = start_fan()
    good = start_instance(fan)
    peer = fan.ctx.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.connect(fan.ep("inst"))
    for junk in (b"", b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"type": "nonsense"}),
                 msgpack.packb({"type": "hello"}), b"\x00" * 70000):
        peer.send(junk)
    big = fan.ctx.socket(zmq.DEALER)
    big.setsockopt(zmq.LINGER, 0)
    big.connect(fan.ep("inst"))
    big.send(msgpack.packb({"type": "hello", "instance": "hoarder", "config_hash":
                            good.status()["config_hash"], "window": 1 << 62, "done": 0}))
    st = fan.wait(lambda st: any(i["instance"] == "hoarder" for i in st["instances"]),
                  "the hoarder's hello")
    hoarder = [i for i in st["instances"] if i["instance"] == "hoarder"][0]
    assert hoarder["window"] == 131072, hoarder
    # it never credits: counted out after fan.instance_timeout, and the frames go to the other
    fan.wait(lambda st: [i["state"] for i in st["instances"] if i["instance"] == "hoarder"]
             == ["dead"], "the silent hoarder counted out")
    good.rx.settle()
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    for m in native_series(12, frames(8, seed=12)):
        det.send(m)
    good.rx.collect_until_end()
    assert sorted(r["frame_id"] for r in good.rx.of("result")) == list(range(8))
    assert fan.proc.poll() is None


def test_hostile_instance_name_in_the_dashboard_json(rig):
    """An instance name is a peer's text (the link refuses what is not UTF-8): quotes, a
    backslash and control characters in a hello's name still give /api/v1/fan as JSON (what the
    dashboard parses), the name intact once decoded."""
    import json
    import urllib.request

    start_fan, _ = rig
    fan = start_fan()
    fan.status()  # up: its HTTP server listens
    peer = fan.ctx.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.connect(fan.ep("inst"))
    name = 'ev"il\\\n\x01\x7f\u00e9'.encode()
    peer.send(msgpack.packb({b"type": b"hello", b"instance": name, b"config_hash": b"x",
                             b"window": 1, b"done": 0}, use_bin_type=False))
    url = "http://%s:%d/api/v1/fan" % (fan.host, fan.ports["http"])
    t_end = time.monotonic() + LONG
    while True:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                url, timeout=LONG) as r:
            st = json.loads(r.read().decode("utf-8"))  # strict: fails on a bad byte or escape
        if st["instances"] or time.monotonic() > t_end:
            break
        time.sleep(0.1)
    assert st["fan"] is True and st["aggregates"] is None
    assert [i["name"] for i in st["instances"]] == ['ev"il\\\n\x01\x7f\u00e9']


def test_mismatched_configuration_flagged(rig):
    """fan.config_mismatch flag: the instance whose configuration differs is used, and marked
    flagged in status (its welcome says so too: its log)."""
    start_fan, start_instance = rig
    fan = start_fan(sets=("fan.config_mismatch=flag",))
    good = start_instance(fan)
    fan.wait(lambda st: len(fan.live(st)) == 1, "one live instance")
    odd = start_instance(fan, npt=65)
    st = fan.wait(lambda st: len(fan.live(st)) == 2, "both live")
    flags = {i["config_hash"]: i["flagged"] for i in st["instances"]}
    assert flags == {good.status()["config_hash"]: False, odd.status()["config_hash"]: True}
    for d in (good, odd):
        d.rx.settle()
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    for m in native_series(13, frames(16, seed=13)):
        det.send(m)
    collect_ends([good, odd])
    assert sorted(r["frame_id"] for r in results_of([good, odd], 13)) == list(range(16))
    assert odd.rx.of("result") and "flagged" in odd.logtext()


@needs_chromium
def test_dashboard_of_the_whole_run(rig):
    """The dashboard on the fan-out's HTTP server (fan.aggregates_from: the three instances'
    outputs) in headless Chromium: the same page as faid's, it finds it is on the fan-out and
    shows the three instances live and their aggregates summed: the frame count and hit rate
    equal `faidctl aggregates --from x3` over the same instances; it loads with no script or
    console error and asks nothing but the fan-out."""
    import json

    pytest.importorskip("websocket")
    import test_peaks as tp
    from chromium_page import open_page, page_faults, screenshot

    start_fan, start_instance = rig
    outs = [free_port() for _ in range(3)]
    fan = start_fan(sets=["fan.aggregates_from=[%s]" % ", ".join(ep(p) for p in outs)])
    insts = [start_instance(fan, extra=tp.PEAKS, out_port=p) for p in outs]
    fan.wait(lambda st: len(fan.live(st)) == 3, "three live instances")
    n = 24  # blocks of 4: 8 frames to each instance
    imgs, truth = tp.spot_frames(n)
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    for m in native_series(7, imgs):
        det.send(m)
    base = "http://%s:%d/" % (fan.host, fan.ports["http"])
    with open_page(base) as dt:
        status = "document.getElementById('status') && document.getElementById('status').dataset"
        dt.wait_eval(status + ".fanFrames", lambda v: v == str(n), "the summed frame count")
        assert dt.eval(status + ".fanInstances") == "3"
        args = [FAIDCTL, "aggregates", "--frames", str(n), "--json"]
        for p in outs:
            args += ["--from", ep(p)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=LONG)
        assert r.returncode == 0, r.stderr
        want = json.loads(r.stdout)
        assert want["instances"] == 3 and want["frames"] == n
        assert want["hits"] == sum(1 for t in truth if t)
        assert float(dt.eval(status + ".fanHitRate")) == want["hit_rate"]
        text = dt.eval("document.getElementById('fan-hitrate').textContent")
        assert text.startswith("%.1f %%" % (100 * want["hit_rate"])), text
        assert dt.eval("document.getElementById('fan-frames').textContent").startswith(
            "%d (3 of 3 instances" % n)
        assert dt.eval("document.getElementById('fan-hits').textContent") == "%d / %d" % (
            want["hits"], want["peaks"])
        rows = dt.eval("[...document.getElementById('fan-instances').tBodies[0].rows]"
                       ".map((r) => r.cells[1].textContent)")
        assert rows == ["live"] * 3, rows
        assert not dt.eval("document.getElementById('fan-powder-box').hidden")
        assert dt.eval("document.body.classList.contains('fan')")
        screenshot(dt, "dashboard-fan.png")
        seen = page_faults(dt, base)
        assert not seen["errors"], seen["errors"]
        assert base + "api/v1/fan" in seen["urls"], seen["urls"]
        assert not seen["outside"], seen["outside"]
    det.close()


def test_tee_each_message_once_when_an_instance_is_gone(rig):
    """An image whose send to an instance fails (the instance's connection closed before the
    fan-out counted it out) goes to another instance; the tee still gets it once (it got it
    twice: once per attempt), and tee_sent counts every detector message once."""
    start_fan, start_instance = rig
    fan = start_fan(sets=("fan.instance_timeout=30",))  # gone by its connection, not by silence
    tee = Tee(fan)
    good = start_instance(fan)
    ghost = fan.ctx.socket(zmq.DEALER)
    ghost.setsockopt(zmq.LINGER, 0)
    ghost.connect(fan.ep("inst"))
    ghost.send(msgpack.packb({"type": "hello", "instance": "ghost", "config_hash":
                              good.status()["config_hash"], "window": 64, "done": 0}))
    fan.wait(lambda st: len(fan.live(st)) == 2, "two live instances")
    good.rx.settle()
    time.sleep(0.3)  # the tee's connection is up
    msgs = native_series(31, frames(16, seed=31))
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    det.send(msgs[0])
    assert ghost.poll(LONG * 1000), "the ghost never got the series' start"
    ghost.close()  # its blocks' sends fail from now on (ROUTER_MANDATORY: host unreachable)
    time.sleep(0.5)  # the fan-out's I/O thread has seen the connection close
    for m in msgs[1:]:
        det.send(m)
    good.rx.collect_until_end()
    assert sorted(r["frame_id"] for r in good.rx.of("result")) == list(range(16))
    st = fan.wait(lambda st: [i["state"] for i in st["instances"]
                              if i["instance"] == "ghost"] == ["dead"], "the ghost counted out")
    assert "instance ghost:" in fan.logtext()  # a send to it failed: the case under test
    got = tee.collect(len(msgs))
    while tee.sock.poll(300):  # anything beyond the series: a duplicate
        got.append(tee.sock.recv_multipart())
    ids = [msgpack.unpackb(m[0])["frame_id"] for m in got if len(m) == 2]
    assert sorted(ids) == list(range(16)), ids
    assert st["counters"]["tee_sent"] == len(msgs) and st["counters"]["tee_dropped"] == 0


def test_tee_drop_names_the_message(rig):
    """With no consumer on fan.tee_endpoint the tee drops (it never blocks the detector): each
    drop is counted and the log names what was dropped (series, kind, frame id), so a writer
    that missed messages can be told which."""
    start_fan, start_instance = rig
    fan = start_fan()
    good = start_instance(fan)
    fan.wait(lambda st: len(fan.live(st)) == 1, "one live instance")
    good.rx.settle()
    msgs = native_series(32, frames(2, seed=32))
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    for m in msgs:
        det.send(m)
    good.rx.collect_until_end()
    st = fan.wait(lambda st: st["counters"]["tee_dropped"] == len(msgs), "every message dropped")
    assert st["counters"]["tee_sent"] == 0
    log = fan.logtext()
    assert "tee: dropped the start of series 32" in log, log
    assert "tee: dropped the image of series 32, frame 0" in log, log


# ---- exact losses, reloads, several senders (issue 18 points 2 and 4) -------------------------


def merged_sub(fan, insts, *extra):
    """`faidctl sub --json --until-end` over the instances and the fan-out's PUB."""
    return subprocess.Popen(
        [FAIDCTL, "sub", "--json", "--quiet", "--until-end", *extra,
         *[a for d in insts for a in ("--from", ep(d.ports["out"]))], "--fan", fan.ep("out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def merged_lines(sub):
    import json
    try:
        out, err = sub.communicate(timeout=LONG * 2)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()
    assert sub.returncode == 0, err
    return [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]


def ids(ranges):
    out = []
    for r in ranges:
        a, b = (r, r) if isinstance(r, int) else r
        out += range(a, b + 1)
    return out


def test_exact_losses_instance_with_two_devices_killed(rig):
    """kill -9 of an instance reducing on two devices (`devices: [0, 0]`, two PoCL workers: results leave out
    of order) mid-series, behind a merged `faidctl sub --fan`. Its credits name the frame ids it
    published, so the fan-out's `lost` report is exact: every frame without a result is in it
    (none lost silently), and one it names that did reach a subscriber (published after the
    instance's last credit) is delivered, not missing, and counted lost_delivered. The start
    says no frame count: the fan-out's `routed` report tells the merge which ids to expect, so
    delivered + missing is every id exactly once (fan_report true)."""
    start_fan, start_instance = rig
    fan = start_fan()
    insts = [start_instance(fan), start_instance(fan, devices="[0, 0]")]
    fan.wait(lambda st: len(fan.live(st)) == 2, "two live instances")
    victim = insts[1]
    assert len(victim.status()["devices"]) == 2, victim.status()["devices"]
    names = [d.status()["instance"] for d in insts]
    sub = merged_sub(fan, insts, "--timeout", "60", "--dead-after", "600")
    try:
        time.sleep(1.0)  # the merge's subscriptions are up before the start is published
        det = Detector(fan.ctx, connect_to=fan.ep("in"))
        n = 64
        imgs = frames(n, seed=17)
        msgs = native_series(9, imgs)
        msgs[0] = [msgpack.packb(dict(type="start", protocol_version=1, series_id=9))]
        kill_mid_series(fan, det, victim, msgs, 25, 41, 4)
        lines = merged_lines(sub)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()
    det.close()
    lost = [m for m in lines if m["type"] == "lost"]
    assert lost and all(m["instance"] == names[1] for m in lost), lost
    reported = ids(r for m in lost for r in m["frames"])
    assert len(reported) == len(set(reported)), "a frame reported lost twice"
    ends = [m for m in lines if m["type"] == "end" and m["series_id"] == 9]
    assert len(ends) == 1, ends
    end = ends[0]
    delivered = [m["frame_id"] for m in lines if m["type"] == "result" and m["series_id"] == 9]
    assert len(delivered) == len(set(delivered)), "a frame was delivered twice"
    missing = ids(end["missing_frames"])
    assert end["fan_report"] is True and end["expected"] == n, end
    assert not set(delivered) & set(missing), (sorted(delivered), missing)
    assert sorted(delivered + missing) == list(range(n)), (sorted(delivered), missing)
    assert missing, "the killed instance held frames it never reduced"
    # exact: every frame without a result was reported lost by the fan-out (none silently) ...
    assert set(missing) <= set(reported), (missing, sorted(reported))
    # ... and what it reported that came anyway is counted, not listed
    assert end["lost_delivered"] == len(set(reported) & set(delivered)), (end, reported)
    assert end["missing"] == len(set(reported) - set(delivered)), (end, reported)
    st = fan.status()
    assert st["counters"]["lost"] == len(reported), st["counters"]


def test_fan_out_killed_mid_series(rig):
    """kill -9 of the fan-out mid-series: the instances hear no beat for fan.instance_timeout,
    say so (status `fan_link` "silent", their log) and end the open series; the merged view
    ends without the fan-out's report (fan_report false) and lists the frames it held or never
    received: every id of the start's nimages never seen."""
    start_fan, start_instance = rig
    fan = start_fan()
    extra = "fan:\n  instance_timeout: 1.0\n"
    insts = [start_instance(fan, extra=extra) for _ in range(2)]
    fan.wait(lambda st: len(fan.live(st)) == 2, "two live instances")
    for d in insts:
        assert d.status()["input"]["fan_link"] == "live", d.status()["input"]
    sub = merged_sub(fan, insts, "--timeout", "60", "--dead-after", "600")
    try:
        time.sleep(1.0)
        det = Detector(fan.ctx, connect_to=fan.ep("in"))
        n = 40
        msgs = native_series(10, frames(n, seed=19))
        for m in msgs[:21]:  # the start and frames 0..19
            det.send(m)
        t_end = time.monotonic() + LONG
        while sum(d.status()["counters"]["processed"] for d in insts) < 20:
            assert time.monotonic() < t_end, "20 frames never reduced"
            time.sleep(0.05)
        fan.proc.kill()
        fan.proc.wait()
        for m in msgs[21:31]:  # frames the dead fan-out never passes on
            det.send(m)
        lines = merged_lines(sub)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()
    det.close()
    ends = [m for m in lines if m["type"] == "end" and m["series_id"] == 10]
    assert len(ends) == 1, ends
    end = ends[0]
    delivered = sorted(m["frame_id"] for m in lines
                       if m["type"] == "result" and m["series_id"] == 10)
    assert delivered == list(range(20)), delivered
    assert end["fan_report"] is False and end["expected"] == n, end
    assert ids(end["missing_frames"]) == list(range(20, n)), end
    for d in insts:
        st = d.status()
        assert st["input"]["fan_link"] == "silent", st["input"]
        assert "fan-out silent" in d.logtext()
        assert [m["reason"] for m in d.rx.collect_until_end(1) if m["type"] == "end"] == \
            ["timeout"]


def test_reload_that_changes_the_reduction_is_refused(rig):
    """An instance whose configuration changes (SIGHUP reload: another npt) tells the fan-out
    its new config_hash in its next credit; it now differs from the other instance's, so the
    fan-out refuses it (fan.config_mismatch refuse) and says so in status, and the instance's
    status says refused. Later frames all go to the other instance."""
    start_fan, start_instance = rig
    fan = start_fan()
    insts = [start_instance(fan) for _ in range(2)]
    fan.wait(lambda st: len(fan.live(st)) == 2, "two live instances")
    a, b = insts
    name_b = b.status()["instance"]
    old_hash = b.status()["config_hash"]
    with open(b.config) as f:
        text = f.read()
    assert "npt: 64" in text
    with open(b.config, "w") as f:
        f.write(text.replace("npt: 64", "npt: 80"))
    b.proc.send_signal(signal.SIGHUP)
    t_end = time.monotonic() + LONG
    while b.status()["config_hash"] == old_hash:
        assert time.monotonic() < t_end, "the reload never happened"
        time.sleep(0.05)
    st = fan.wait(lambda st: any(i["instance"] == name_b and i["state"] == "refused"
                                 for i in st["instances"]), "the reloaded instance refused")
    row = [i for i in st["instances"] if i["instance"] == name_b][0]
    assert row["config_hash"] == b.status()["config_hash"], row
    assert fan.live(st) == [a.status()["instance"]]
    assert "after a reload" in fan.logtext()
    t_end = time.monotonic() + LONG
    while b.status()["input"]["fan_link"] != "refused":
        assert time.monotonic() < t_end, b.status()["input"]
        time.sleep(0.05)
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    for m in native_series(11, frames(8, seed=23)):
        det.send(m)
    a.rx.collect_until_end(1)
    assert sorted(r["frame_id"] for r in a.rx.of("result") if r["series_id"] == 11) == \
        list(range(8))
    det.close()


def test_two_senders_one_end_after_both(rig):
    """Two senders into one fan-out (two PUSH sockets on its bound input, as two `faidctl
    replay` or a detector's modules on two connections), each sending the series' start, half
    of its frames and an end: the series ends at the instances once, after both ends (status
    ends_awaited counts the one still to come), with every frame in it. A sender that never
    sends its end: the series ends fan.end_timeout after the first end, the log naming the
    input."""
    start_fan, start_instance = rig
    fan = start_fan(sets=("fan.end_timeout=1.0",))
    insts = [start_instance(fan) for _ in range(2)]
    fan.wait(lambda st: len(fan.live(st)) == 2, "two live instances")
    for d in insts:
        d.rx.settle()
    dets = [Detector(fan.ctx, connect_to=fan.ep("in")) for _ in range(2)]
    n = 24
    imgs = frames(n, seed=29)
    msgs = native_series(12, imgs)
    start, images, end = msgs[0], msgs[1:-1], msgs[-1]

    def received(k):
        fan.wait(lambda st: st["counters"]["received"] == k, "%d messages received" % k)

    dets[0].send(start)
    received(1)
    dets[1].send(start)
    received(2)
    assert fan.status()["ends_awaited"] == 2
    for m in images[: n // 2]:
        dets[0].send(m)
    dets[0].send(end)
    received(2 + n // 2 + 1)
    st = fan.wait(lambda st: st["counters"]["routed"] == n // 2, "the first half routed")
    assert st["ends_awaited"] == 1 and st["state"] == "running", st
    # /metrics carries the same gauge (its text is refreshed twice a second)
    url = "http://%s:%d/metrics" % (fan.host, fan.ports["http"])
    deadline = time.monotonic() + LONG
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while "faid_fan_ends_awaited 1\n" not in opener.open(url, timeout=LONG).read().decode():
        assert time.monotonic() < deadline, "faid_fan_ends_awaited 1 never in /metrics"
        time.sleep(0.1)
    for m in images[n // 2:]:
        dets[1].send(m)
    dets[1].send(end)
    for d in insts:
        d.rx.collect_until_end(1)
    st = fan.wait(lambda st: st["state"] == "idle", "the series ended")
    assert st["ends_awaited"] == 0
    ends = [m for d in insts for m in d.rx.of("end") if m["series_id"] == 12]
    assert len(ends) == 2 and all(e["reason"] == "end" for e in ends), ends
    assert sum(e["frames_received"] for e in ends) == n, ends
    got = sorted(r["frame_id"] for d in insts for r in d.rx.of("result") if r["series_id"] == 12)
    assert got == list(range(n)), got
    # the second sender never ends series 13: fan.end_timeout ends it, naming the input
    msgs = native_series(13, imgs[:4])
    dets[0].send(msgs[0])
    received(2 + n + 2 + 1)
    dets[1].send(msgs[0])
    for m in msgs[1:]:
        dets[0].send(m)
    for d in insts:
        d.rx.collect_until_end(1)  # one more end each
    assert "no end from input %s (2 start(s), 1 end(s))" % fan.ep("in") in fan.logtext()
    ends = [m for d in insts for m in d.rx.of("end") if m["series_id"] == 13]
    assert len(ends) == 2 and sum(e["frames_received"] for e in ends) == 4, ends
    for d in dets:
        d.close()


def test_credit_names_frames_out_of_order(rig):
    """The fan-out's side of exact losses, deterministically: an instance (here a DEALER
    speaking the link, as faid does) that was sent frames 0..3 and published 1 and 3 first (two
    devices finishing out of order) names them in its credit; when it then leaves, the frames
    reported lost are exactly 0 and 2, never the oldest two by count. The `routed` report of the
    series names all four."""
    start_fan, _ = rig
    fan = start_fan()
    fan.status()
    time.sleep(0.5)  # the test's SUB on the fan-out's PUB is connected before anything is lost
    peer = fan.ctx.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.connect(fan.ep("inst"))
    peer.send(msgpack.packb({"type": "hello", "instance": "two-devices",
                             "config_hash": "0123456789abcdef", "window": 4, "done": 0}))

    def link():
        assert peer.poll(LONG * 1000), "nothing from the fan-out"
        parts = peer.recv_multipart()
        return msgpack.unpackb(parts[0]), parts[1:]

    while link()[0]["type"] != "welcome":
        pass
    det = Detector(fan.ctx, connect_to=fan.ep("in"))
    msgs = native_series(14, frames(4, seed=31))
    for m in msgs[:5]:
        det.send(m)
    got = []
    while len(got) < 4:
        m, _ = link()
        if m["type"] == "route" and m["kind"] == "image":
            got.append(m["frame_id"])
    assert got == [0, 1, 2, 3]
    peer.send(msgpack.packb({"type": "credit", "window": 4, "done": 2,
                             "accounted": [[14, 1, 1], [14, 3, 3]]}))
    peer.send(msgpack.packb({"type": "bye", "window": 4, "done": 2, "accounted": []}))
    fan.wait(lambda st: st["counters"]["lost"] == 2, "two frames reported lost")
    t_end = time.monotonic() + LONG
    while not fan.lost_msgs:
        assert time.monotonic() < t_end, "no lost report"
        fan.poll_lost(0.2)
    assert fan.lost_frames(14) == [0, 2], fan.lost_msgs
    assert fan.lost_msgs[0]["instance"] == "two-devices" and fan.lost_msgs[0]["reason"] == "left"
    det.send(msgs[5])
    fan.wait(lambda st: st["state"] == "idle", "the series ended")
    while not fan.routed_msgs:
        assert time.monotonic() < t_end, "no routed report"
        fan.poll_lost(0.2)
    check_keys("fanout-routed", fan.routed_msgs[0])
    assert fan.routed_msgs[0]["series"] == 14 and fan.routed_msgs[0]["frames"] == [[0, 3]]
    peer.close()
    det.close()
