"""Integration tests of the clients: faidctl replay, faidctl sub, faidctl status/config/stop and the
Python example subscriber (client/python/faid_subscriber.py).

Without a daemon: replay is checked against a Python PULL receiver (messages as PROTOCOL.md §2
lays them out, payloads equal to the .npy frames, bslz4 payloads that the reference bitshuffle
filter of hdf5plugin decodes into realistic frames), sub and the Python subscriber against a
Python PUSH peer that sends output messages (counts, frame ids, .dat contents), control against a
port where nobody answers (clear timeout message).

With the daemon: faidctl replay -> faid -> faidctl sub (PUB and lossless) and the Python
subscriber; counts and frame ids must match what was sent. Skipped while build/bin/faid is still
the placeholder. Every test uses free loopback ports and kills what it started."""

import json
import os
import re
import subprocess
import sys
import threading
import time

import msgpack
import numpy as np
import pytest
import zmq

from test_daemon import ep, free_port  # the harness's loopback endpoints

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BIN = os.environ.get("FAID_BIN", os.path.join(SRC, "build", "bin"))
FAIDCTL = os.path.join(BIN, "faidctl")
FAID = os.path.join(BIN, "faid")
PYSUB = os.path.join(SRC, "client", "python", "faid_subscriber.py")

# Generous limits only to turn a hang into a failure; nothing asserts on time.
LONG = 120


class Proc:
    """A child process whose stdout/stderr lines are collected by threads; always killed."""

    def __init__(self, args, env=None):
        self.args = args
        e = dict(os.environ, PYTHONUNBUFFERED="1")
        if env:
            e.update(env)
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=e)
        self.out, self.err = [], []
        self.threads = [threading.Thread(target=self._pump, args=(self.p.stdout, self.out)),
                        threading.Thread(target=self._pump, args=(self.p.stderr, self.err))]
        for t in self.threads:
            t.daemon = True
            t.start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink.append(line)

    def wait_line(self, pattern, timeout=LONG):
        rx = re.compile(pattern)
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            if any(rx.search(l) for l in list(self.out)):
                return True
            if self.p.poll() is not None:
                time.sleep(0.2)
                return any(rx.search(l) for l in list(self.out))
            time.sleep(0.05)
        return False

    def wait(self, timeout=LONG):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("%s did not finish within %d s; stderr:\n%s"
                                 % (" ".join(self.args), timeout, self.stderr()))
        for t in self.threads:
            t.join(5)
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)

    def stdout(self):
        return "".join(self.out)

    def stderr(self):
        return "".join(self.err)


@pytest.fixture
def procs():
    started = []

    def start(args, env=None):
        p = Proc(args, env)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


def run(args, timeout=LONG):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def summary_value(text, key):
    m = re.search(r"^%s: (\d+)" % re.escape(key), text, re.M)
    assert m, "no '%s:' line in:\n%s" % (key, text)
    return int(m.group(1))


SMALL_CONFIG = """\
detector:
  preset: null
  shape: [96, 120]
  pixel_size: [75.0e-6, 75.0e-6]
geometry:
  dist: 0.08
  poni1: 0.0036
  poni2: 0.0045
  wavelength: 1.0e-10
integration:
  npt: 64
"""


def write_config(tmp_path, extra=""):
    path = tmp_path / "faid.yaml"
    path.write_text(SMALL_CONFIG + extra)
    return str(path)


@pytest.fixture(scope="module", autouse=True)
def need_faidctl():
    if not os.access(FAIDCTL, os.X_OK):
        pytest.skip("faidctl not built at %s" % FAIDCTL)


# ------------------------------------------------------------------------------------------------
# replay against a Python receiver


def receive_series(sock, timeout_ms=LONG * 1000):
    """[header dicts] and [payload bytes or None] up to and including the end message."""
    sock.RCVTIMEO = timeout_ms
    headers, payloads = [], []
    while True:
        parts = sock.recv_multipart()
        h = msgpack.unpackb(parts[0], raw=False)
        headers.append(h)
        payloads.append(parts[1] if len(parts) > 1 else None)
        assert len(parts) == (2 if h["type"] == "image" else 1)
        if h["type"] == "end":
            return headers, payloads


def test_replay_npy_uncompressed(tmp_path, procs):
    rng = np.random.default_rng(5)
    stack = rng.integers(0, 5000, size=(3, 20, 30)).astype("<u2")
    single = rng.integers(0, 5000, size=(20, 30)).astype("<u2")
    np.save(tmp_path / "stack.npy", stack)
    np.save(tmp_path / "single.npy", single)
    frames = list(stack) + [single]
    ctx = zmq.Context.instance()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        rp = procs([FAIDCTL, "replay", "--to", ep(port), "--frames", "9", "--encoding", "none",
                    "--npy", str(tmp_path / "stack.npy"), "--npy", str(tmp_path / "single.npy"),
                    "--series-id", "9", "--series-unique-id", "run-9", "--first-frame", "100"])
        headers, payloads = receive_series(pull)
        assert rp.wait() == 0, rp.stderr()
    finally:
        pull.close()
    assert [h["type"] for h in headers] == ["start"] + ["image"] * 9 + ["end"]
    assert all(h["series_id"] == 9 and h["series_unique_id"] == "run-9" for h in headers)
    assert all(h["protocol_version"] == 1 for h in headers)
    assert headers[0]["nimages"] == 9
    images = headers[1:-1]
    assert [h["frame_id"] for h in images] == list(range(100, 109))
    for k, (h, p) in enumerate(zip(images, payloads[1:-1])):
        assert h["shape"] == [20, 30] and h["encoding"] == "none"
        assert np.dtype(h["dtype"]) == np.dtype("<u2")
        np.testing.assert_array_equal(np.frombuffer(p, "<u2").reshape(20, 30), frames[k % 4])
    out = rp.stdout()
    assert summary_value(out, "frames") == 9


def decode_bslz4(payload, shape, dtype, tmp_path):
    """Decodes a bslz4 chunk with the reference filter (hdf5plugin's bitshuffle)."""
    h5py = pytest.importorskip("h5py")
    hdf5plugin = pytest.importorskip("hdf5plugin")
    path = str(tmp_path / "chunk.h5")
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("d", shape=shape, dtype=dtype, chunks=shape,
                              **hdf5plugin.Bitshuffle(cname="lz4"))
        ds.id.write_direct_chunk((0, 0), payload)
    with h5py.File(path, "r") as f:
        return f["d"][...]


def test_replay_synthetic_bslz4(tmp_path, procs):
    cfg = write_config(tmp_path)
    ctx = zmq.Context.instance()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        rp = procs([FAIDCTL, "replay", "--to", ep(port), "--frames", "6", "-c", cfg,
                    "--distinct", "4", "--dtype", "uint32", "--seed", "7", "--rate", "200"])
        headers, payloads = receive_series(pull)
        assert rp.wait() == 0, rp.stderr()
    finally:
        pull.close()
    images = [(h, p) for h, p in zip(headers, payloads) if h["type"] == "image"]
    assert [h["frame_id"] for h, _ in images] == list(range(6))
    decoded = []
    for h, p in images:
        assert h["shape"] == [96, 120] and h["encoding"] == "bslz4" and h["dtype"] == "uint32"
        # 12-byte header: decoded size (u64 BE) and block size (u32 BE).
        assert int.from_bytes(p[:8], "big") == 96 * 120 * 4
        decoded.append(decode_bslz4(p, (96, 120), "<u4", tmp_path))
    # Pre-generated frames are cycled: frame k repeats as frame k + 4; neighbours differ.
    np.testing.assert_array_equal(decoded[0], decoded[4])
    np.testing.assert_array_equal(decoded[1], decoded[5])
    assert not np.array_equal(decoded[0], decoded[1])
    # Realistic content: counts around a background with Poisson scatter and bright features.
    f = decoded[0].astype(np.float64)
    assert f.mean() > 1 and f.max() > 5 * np.median(f)
    assert len(np.unique(decoded[0])) > 20


def test_replay_start_at(tmp_path, procs):
    """--start-at T: two replays started together send from wall-clock T (a benchmark's several
    connections then overlap), each prints its send window and how late it was; a T already
    past sends at once and says by how much; a bad T is refused naming the option."""
    cfg = write_config(tmp_path)
    ctx = zmq.Context.instance()
    pulls, ports = [], []
    for _ in range(2):
        pull = ctx.socket(zmq.PULL)
        pull.setsockopt(zmq.LINGER, 0)
        ports.append(pull.bind_to_random_port("tcp://127.0.0.1"))
        pulls.append(pull)
    try:
        # far enough ahead for a loaded machine (a sanitizer build) to be ready; a replay that
        # is not says by how much and sends at once, which the checks below allow
        t = time.time() + 4.0
        rps = [procs([FAIDCTL, "replay", "--to", ep(port), "--frames", "3", "-c", cfg,
                      "--distinct", "2", "--start-at", f"{t:.6f}", "--quiet"]) for port in ports]
        got = [receive_series(pull) for pull in pulls]
        for rp in rps:
            assert rp.wait() == 0, rp.stderr()
    finally:
        for pull in pulls:
            pull.close()
    for (headers, _), rp in zip(got, rps):
        assert [h["type"] for h in headers] == ["start", "image", "image", "image", "end"]
        # the frames' timestamps are taken as each is handed over: none before T
        assert min(h["timestamp"] for h in headers if h["type"] == "image") >= t
        w = re.search(r"^window: ([\d.]+) ([\d.]+)", rp.stdout(), re.M)
        assert w and t <= float(w.group(1)) <= float(w.group(2)), rp.stdout()
        late = re.search(r"^start-at: ([\d.]+), late by ([\d.]+) s", rp.stdout(), re.M)
        assert late and abs(float(late.group(1)) - t) < 1e-5, rp.stdout()
        # on time: the first frame went at T; late: at once, T + lateness or after
        assert float(w.group(1)) >= t + float(late.group(2)) - 0.01
    # a time already past: sent at once, lateness said on stdout and stderr
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        rp = procs([FAIDCTL, "replay", "--to", ep(port), "--frames", "1", "-c", cfg,
                    "--distinct", "1", "--start-at", f"{time.time() - 5:.3f}", "--quiet"])
        receive_series(pull)
        assert rp.wait() == 0, rp.stderr()
    finally:
        pull.close()
    late = re.search(r"^start-at: [\d.]+, late by ([\d.]+) s", rp.stdout(), re.M)
    assert late and float(late.group(1)) >= 5.0, rp.stdout()
    assert "after --start-at" in rp.stderr()
    for bad in ("soon", "-1", "0"):
        rc, out, err = run([FAIDCTL, "replay", "--start-at", bad])
        assert rc == 2 and "--start-at" in err, (bad, err)


def test_replay_errors(tmp_path):
    rc, out, err = run([FAIDCTL, "replay", "--frames", "x"])
    assert rc == 2 and "--frames" in err
    rc, out, err = run([FAIDCTL, "replay", "--npy", str(tmp_path / "missing.npy")])
    assert rc == 1 and "missing.npy" in err
    np.save(tmp_path / "f8.npy", np.zeros((4, 4)))
    rc, out, err = run([FAIDCTL, "replay", "--npy", str(tmp_path / "f8.npy")])
    assert rc == 1 and "--dtype" in err
    # Nobody listening: the send gives up after the timeout instead of hanging.
    rc, out, err = run([FAIDCTL, "replay", "--to", ep(free_port()), "--npy",
                        str(tmp_path / "f8.npy"), "--dtype", "uint16", "--frames", "100000",
                        "--hwm", "2", "--timeout", "0.5", "--quiet"])
    assert rc == 1 and "no receiver" in err


def test_replay_stalled_receiver_times_out(tmp_path):
    """A receiver that connects, takes the series' start and then nothing more: replay's sends
    go straight into the queue while it has room and wait (through the poll that watches the
    timeout) only once it is full; replay then gives up with the reason after --timeout and
    does not hang (the path of a full queue, which the sender no longer polls before every
    message)."""
    np.save(tmp_path / "big.npy", np.zeros((512, 512), np.uint16))
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 1)
    pull.setsockopt(zmq.LINGER, 0)
    port = free_port()
    pull.bind(ep(port))
    try:
        p = subprocess.Popen([FAIDCTL, "replay", "--to", ep(port), "--npy",
                              str(tmp_path / "big.npy"), "--encoding", "none", "--frames",
                              "2000", "--hwm", "2", "--timeout", "0.5", "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert pull.poll(LONG * 1000), "replay's start never came"
        start = msgpack.unpackb(pull.recv())
        assert start["type"] == "start", start
        out, err = p.communicate(timeout=LONG)
        assert p.returncode == 1, (out, err)
        assert "no receiver took it" in err and "within 0.5 s" in err, err
        sent = summary_value(out, "frames")
        assert 0 < sent < 2000, out  # some went into the queue, the rest waited and gave up
    finally:
        pull.close()
        ctx.term()


# ------------------------------------------------------------------------------------------------
# sub and the Python subscriber against a Python sender of output messages


def arr(a):
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": a.tobytes()}


class FakeLossless:
    """faid's side of the lossless channel (proto/PROTOCOL.md 3.6) as far as these tests need it:
    a ROUTER that waits for the consumer's hello, welcomes it and sends it [topic, body]."""

    def __init__(self, ctx):
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.peer = None
        self.sent = []

    def send_multipart(self, parts):
        if self.peer is None:
            assert self.sock.poll(LONG * 1000), "no hello from the consumer"
            peer, body = self.sock.recv_multipart()
            assert msgpack.unpackb(body)["type"] == "hello"
            self.peer = peer
            self.sock.send_multipart([peer, b"welcome", msgpack.packb(
                {"type": "welcome", "instance": "00000000000000aa", "credit": 256, "held": 0})])
        self.sock.send_multipart([self.peer] + parts)
        self.sent.append(parts)

    def resend(self, k):
        """Sends message k again, as faid does to a new session: same msg_number."""
        self.sock.send_multipart([self.peer] + self.sent[k])

    def close(self):
        self.sock.close()


def fake_output(sock, nframes, order, drop=(), resend=()):
    npt = 16
    radial = np.linspace(0.5, 30.0, npt)
    n = 0
    sock.send_multipart([b"start", msgpack.packb({
        "type": "start", "series_id": 4, "series_unique_id": "", "unit": "2th_deg",
        "radial": arr(radial), "config_hash": "00112233aabbccdd", "software_version": "x.y",
        "setup_version": 2, "msg_number": n})])
    profiles = {}
    for fid in order:
        n += 1
        I = (np.arange(npt) * (fid + 1) + 0.125).astype("<f4")
        profiles[fid] = I
        if fid in drop:
            continue
        sock.send_multipart([b"result", msgpack.packb({
            "type": "result", "series_id": 4, "frame_id": fid, "setup_version": 2,
            "I": arr(I), "sigma": arr(I / 10), "std": arr(I / 3),
            "count": arr(np.full(npt, 3.5, "<f4")), "latency_us": 250.0, "msg_number": n})])
    for k in resend:
        sock.resend(k)
    n += 1
    sock.send_multipart([b"end", msgpack.packb({
        "type": "end", "series_id": 4, "reason": "end", "frames_processed": nframes,
        "msg_number": n})])
    return radial, profiles


def test_sub_and_python_subscriber(tmp_path, procs):
    ctx = zmq.Context.instance()
    order = [0, 2, 1, 3, 5, 4, 6, 7, 9, 8]  # out of order, as from several devices
    drop = {6}                              # one frame lost: a gap the clients must see
    outdir = tmp_path / "out"
    for which in ("faidctl", "python"):
        push = FakeLossless(ctx)
        port = push.port
        try:
            if which == "faidctl":
                p = procs([FAIDCTL, "sub", "--from", ep(port), "--lossless", "--until-end",
                           "--timeout", str(LONG), "--out", str(outdir), "--quiet"])
            else:
                p = procs([sys.executable, PYSUB, "--from", ep(port), "--lossless",
                           "--until-end", "--timeout", str(LONG), "--plot", "--plot-file",
                           str(tmp_path / "latest.png")])
            # Two messages come again (as after a reconnection): dropped by msg_number.
            radial, profiles = fake_output(push, len(order), order, drop, resend=(0, 3))
            assert p.wait() == 0, p.stderr()
        finally:
            push.close()
        out = p.stdout()
        assert summary_value(out, "results") == len(order) - len(drop)
        assert summary_value(out, "missing frames") == 1
        assert summary_value(out, "lost messages") == 1
        assert "re-sent duplicates dropped 2" in out
        if which == "python":
            seen = [int(m) for m in re.findall(r"^result series=4 frame=(\d+)", out, re.M)]
            assert seen == [f for f in order if f not in drop]
            pytest.importorskip("matplotlib")
            assert (tmp_path / "latest.png").stat().st_size > 1000
    files = sorted(os.listdir(outdir))
    assert files == ["series4_%05d.dat" % f for f in sorted(order) if f not in drop]
    text = (outdir / "series4_00003.dat").read_text()
    assert "# unit: 2th_deg\n" in text and "# config_hash: 00112233aabbccdd\n" in text
    assert "# software_version: x.y\n" in text and "# frame_id: 3\n" in text
    data = np.loadtxt(outdir / "series4_00003.dat")
    assert data.shape == (16, 5)
    np.testing.assert_allclose(data[:, 0], radial, rtol=1e-14)  # 15 significant digits
    np.testing.assert_array_equal(data[:, 1].astype("<f4"), profiles[3])
    np.testing.assert_array_equal(data[:, 2].astype("<f4"), profiles[3] / 10)
    np.testing.assert_array_equal(data[:, 3].astype("<f4"), profiles[3] / 3)
    np.testing.assert_array_equal(data[:, 4], 3.5)


def test_sub_count_and_timeout(procs):
    ctx = zmq.Context.instance()
    push = FakeLossless(ctx)
    port = push.port
    try:
        p = procs([FAIDCTL, "sub", "--from", ep(port), "--lossless", "--count", "3",
                   "--timeout", str(LONG), "--quiet"])
        fake_output(push, 5, [0, 1, 2, 3, 4])
        assert p.wait() == 0, p.stderr()
        assert summary_value(p.stdout(), "results") == 3
        assert "stopped: count reached" in p.stdout()
    finally:
        push.close()
    # Nothing arrives: the timeout ends it, with status 1 because --count was not reached.
    rc, out, err = run([FAIDCTL, "sub", "--from", ep(free_port()), "--count", "1",
                        "--timeout", "0.5", "--quiet"])
    assert rc == 1 and "stopped: timeout" in out and summary_value(out, "results") == 0


def test_sub_result_rate_spans_the_results(procs):
    """sub's summary has the results' own rate, from the first result to the last: the plain
    `rate` runs from the first message of any kind to the last, which a start long before the
    results (or ends after them) stretches; benchmarks read the result rate."""
    ctx = zmq.Context.instance()
    push = FakeLossless(ctx)
    try:
        p = procs([FAIDCTL, "sub", "--from", ep(push.port), "--lossless", "--until-end",
                   "--timeout", str(LONG), "--quiet"])
        order = list(range(6))
        sent = []

        class Gapped:  # the start, a pause, the results 50 ms apart, a pause, the end
            def send_multipart(self, parts):
                if parts[0] in (b"result", b"end") and sent and sent[-1] != parts[0]:
                    time.sleep(0.5)
                elif parts[0] == b"result":
                    time.sleep(0.05)
                sent.append(parts[0])
                push.send_multipart(parts)

        fake_output(Gapped(), len(order), order)
        assert p.wait() == 0, p.stderr()
        out = p.stdout()
        assert summary_value(out, "results") == len(order)
        m = re.search(r"^rate: ([\d.]+) results/s over ([\d.]+) s", out, re.M)
        r = re.search(r"^result rate: ([\d.]+) results/s from the first result to the last, "
                      r"over ([\d.]+) s$", out, re.M)
        assert m and r, out
        rate, span = float(r.group(1)), float(r.group(2))
        assert 0 < span <= float(m.group(2)), out
        assert abs(rate * span - (len(order) - 1)) < 0.01 * len(order) + 0.1, out
    finally:
        push.close()


def test_control_without_daemon():
    port = free_port()
    for cmd in ("status", "config", "stop"):
        rc, out, err = run([FAIDCTL, cmd, "--control", ep(port), "--timeout", "0.5"])
        assert rc == 1
        assert "no answer from faid at %s within 0.5 s" % ep(port) in err
    rc, out, err = run([FAIDCTL, "status", "--bogus"])
    assert rc == 2


# ------------------------------------------------------------------------------------------------
# The whole chain with the daemon


def faid_is_placeholder():
    if not os.access(FAID, os.X_OK):
        return True
    try:
        r = subprocess.run([FAID, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False
    return "not implemented" in r.stdout + r.stderr


def ctl_json(port, cmd):
    rc, out, err = run([FAIDCTL, cmd, "--control", ep(port), "--timeout", "10", "--json"])
    assert rc == 0, err
    return json.loads(out)


def test_replay_faid_sub(tmp_path, procs):
    if faid_is_placeholder():
        pytest.skip("faid is still the placeholder")
    p_in, p_out, p_ll, p_ctl = (free_port() for _ in range(4))
    cfg = write_config(tmp_path, """\
input:
  endpoint: %s
  mode: bind
  io_threads: 3
output:
  endpoint: %s
  lossless_endpoint: %s
  sndhwm: 100
  lossless_shutdown_timeout: 2.5
control:
  endpoint: %s
devices: ref
stats:
  interval: 0.2
""" % (ep(p_in), ep(p_out), ep(p_ll), ep(p_ctl)))
    faid = procs([FAID, "-c", cfg])
    # Ready when the control socket answers.
    t_end = time.monotonic() + LONG
    while True:
        rc, out, err = run([FAIDCTL, "status", "--control", ep(p_ctl), "--timeout", "1"])
        if rc == 0:
            break
        assert faid.p.poll() is None, "faid exited:\n" + faid.stderr()
        assert time.monotonic() < t_end, "faid's control socket never answered"
    nframes = 25
    outdir = tmp_path / "dat"
    # PUB subscribers are ready once they saw a periodic stats message (no slow-joiner loss).
    sub = procs([FAIDCTL, "sub", "--from", ep(p_out), "--until-end", "--timeout", str(LONG),
                 "--json", "--quiet"])
    pysub = procs([sys.executable, PYSUB, "--from", ep(p_out), "--until-end", "--stats",
                   "--timeout", str(LONG)])
    lossless = procs([FAIDCTL, "sub", "--from", ep(p_ll), "--lossless", "--count",
                      str(nframes), "--timeout", str(LONG), "--out", str(outdir), "--quiet"])
    assert sub.wait_line(r'"type": "stats"'), sub.stderr()
    assert pysub.wait_line(r"^stats "), pysub.stderr()

    # No --to: replay sends where the configuration's input.endpoint listens.
    rc, out, err = run([FAIDCTL, "replay", "-c", cfg, "--frames", str(nframes), "--series-id",
                        "17", "--quiet"])
    assert rc == 0, err
    assert summary_value(out, "frames") == nframes

    for p in (sub, pysub, lossless):
        assert p.wait() == 0, p.stderr()
    want = list(range(nframes))
    msgs = [json.loads(l) for l in sub.out if l.startswith("{")]
    ids = sorted(m["frame_id"] for m in msgs if m["type"] == "result")
    assert ids == want
    assert all(m["series_id"] == 17 for m in msgs if m["type"] == "result")
    assert summary_value(sub.stdout(), "missing frames") == 0
    pyids = sorted(int(m) for m in re.findall(r"^result series=17 frame=(\d+)", pysub.stdout(),
                                              re.M))
    assert pyids == want
    assert summary_value(lossless.stdout(), "results") == nframes
    assert sorted(os.listdir(outdir)) == ["series17_%05d.dat" % f for f in want]
    prof = np.loadtxt(outdir / "series17_00003.dat")
    assert prof.shape == (64, 5) and np.all(np.diff(prof[:, 0]) > 0)
    assert np.nansum(prof[:, 4]) > 0 and np.nanmax(prof[:, 1]) > 0

    status = ctl_json(p_ctl, "status")
    assert status["ok"] is True and status["counters"]["received"] == nframes
    config = ctl_json(p_ctl, "config")
    assert "npt: 64" in config["config"]
    # The non-default socket settings reached the daemon's configuration.
    for line in ("io_threads: 3", "sndhwm: 100", "lossless_shutdown_timeout: 2.5"):
        assert line in config["config"], config["config"]
    rc, out, err = run([FAIDCTL, "status", "--control", ep(p_ctl)])
    assert rc == 0 and "counters:" in out
    rc, out, err = run([FAIDCTL, "stop", "--control", ep(p_ctl)])
    assert rc == 0, err
    assert faid.wait() == 0, faid.stderr()
