"""Integration tests of the faid daemon: the real binary on free loopback ports with a small
detector (PoCL CPU device), driven by Python senders and receivers that speak proto/PROTOCOL.md.

Covered: N frames in -> N results with the right ids, each bit-identical to `faidctl process` on
the same frame, configuration and device; malformed messages of every kind among good ones (the
good ones all processed, the bad ones counted and answered, the daemon survives); SIGTERM during a
stream (everything received is published, `end` accounts for every frame, exit 0); a subscriber
that stops reading does not stall the pipeline; block / drop_oldest / drop_newest under overload
(received = processed + dropped); control requests. Reload lives in test_daemon_reload.py.

Nothing asserts on time: timeouts only turn a hang into a failure. Every daemon is stopped (and
killed if it must be) even when a test fails."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import msgpack
import numpy as np
import pytest
import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BIN = os.environ.get("FAID_BIN", os.path.join(SRC, "build", "bin"))
FAID = os.path.join(BIN, "faid")
FAIDCTL = os.path.join(BIN, "faidctl")
LONG = 120  # s, only to turn hangs into failures

ROWS, COLS = 128, 128


def _port_range():
    """Ports below the kernel's ephemeral range: the kernel never gives them to an outgoing
    connection or to another process's bind to port 0, which the old way of picking (bind to 0,
    close, hand the number out) suffered from: CI's sanitizer pass saw one daemon given the same
    port for input and output (EADDRINUSE, integration.peaks) and a port taken by another test
    between picking and binding (integration.doc_claims)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    hi = max(lo, 2048)
    return max(1024, hi - 12000), hi


_PORT_STATE = os.path.join(tempfile.gettempdir(), "faid-test-ports.%d" % os.getuid())


def free_port():
    """A loopback TCP port that no test process on this machine has been given recently: one
    counter, shared by every concurrent test process through a locked file, walks the range
    below the ephemeral ports, and a port that cannot be bound right now is skipped."""
    import fcntl

    lo, hi = _port_range()
    with open(_PORT_STATE, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        try:
            nxt = int(f.read().strip() or 0)
        except ValueError:
            nxt = 0
        port = None
        for _ in range(hi - lo):
            cand = lo + nxt % (hi - lo)
            nxt += 1
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", cand))
                except OSError:
                    continue
            port = cand
            break
        f.seek(0)
        f.truncate()
        f.write(str(nxt))
    if port is None:
        raise RuntimeError("no free loopback port in %d-%d" % (lo, hi - 1))
    return port


def ep(port):
    return "tcp://127.0.0.1:%d" % port


def config_text(ports, npt=64, dist=0.1, policy="block", depth=8, devices="cpu", lossless=False,
                split="full", extra="", input_mode="bind", input_extra="", shape=(ROWS, COLS),
                max_frame_bytes=200000, output_extra="",
                detector_extra=""):
    return f"""detector:
  preset: null
  shape: [{shape[0]}, {shape[1]}]
  pixel_size: [1.0e-4, 1.0e-4]
{detector_extra}
geometry:
  dist: {dist}
  poni1: 0.0061
  poni2: 0.0067
  wavelength: 1.0e-10
integration:
  npt: {npt}
  unit: q_nm^-1
  split: {split}
input:
  endpoint: "{ep(ports['in'])}"
  mode: {input_mode}
  max_frame_bytes: {max_frame_bytes}
{input_extra}output:
  endpoint: "{ep(ports['out'])}"
  lossless_endpoint: {('"' + ep(ports['lossless']) + '"') if lossless else 'null'}
{output_extra}control:
  endpoint: "{ep(ports['ctl'])}"
devices: {devices}
queue:
  depth: {depth}
  policy: {policy}
stats:
  interval: 0.5
{extra}"""


def curve_client(sock, keys):
    """Makes sock a CURVE client when keys is (the server's public key, the client's public key,
    the client's secret key), Z85 as zmq.auth.load_certificate reads them; None leaves it plain."""
    if keys:
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = keys


class Daemon:
    """faid running on free ports; stop() is idempotent and always leaves no process behind.
    curve: the client keys (see curve_client) of the harness's sockets to it: its control
    requests, Senders and Receivers."""

    curve = None  # also for daemons launched without __init__ (test_multiin builds its own config)

    def __init__(self, tmpdir, env=None, wrapper=(), curve=None, **cfg):
        self.ports = {k: free_port() for k in ("in", "out", "lossless", "ctl")}
        self.config = os.path.join(tmpdir, "faid.yaml")
        with open(self.config, "w") as f:
            f.write(config_text(self.ports, **cfg))
        self.log = open(os.path.join(tmpdir, "faid.log"), "w+")
        e = dict(os.environ)
        e.setdefault("POCL_MAX_PTHREAD_COUNT", "2")
        if env:
            e.update(env)
        self.proc = subprocess.Popen([*wrapper, FAID, "-c", self.config], stdout=self.log,
                                     stderr=subprocess.STDOUT, env=e)
        self.ctx = zmq.Context()
        self.curve = curve
        self.returncode = None

    def request(self, req, timeout=LONG):
        """One control request on a fresh REQ socket (a lost reply cannot wedge later ones)."""
        s = self.ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        curve_client(s, self.curve)
        s.connect(ep(self.ports["ctl"]))
        try:
            s.send(msgpack.packb(req) if isinstance(req, dict) else req)
            if not s.poll(timeout * 1000):
                raise TimeoutError("no reply to %r" % (req,))
            return msgpack.unpackb(s.recv())
        finally:
            s.close()

    def wait_ready(self):
        t_end = time.monotonic() + LONG
        while time.monotonic() < t_end:
            assert self.proc.poll() is None, "faid exited early:\n" + self.logtext()
            try:
                if self.request({"cmd": "ping"}, timeout=2)["ok"]:
                    return
            except TimeoutError:
                pass
        raise TimeoutError("faid did not answer ping:\n" + self.logtext())

    def status(self):
        r = self.request({"cmd": "status"})
        assert r["ok"], r
        return r

    def wait_counters(self, pred, what):
        t_end = time.monotonic() + LONG
        while time.monotonic() < t_end:
            st = self.status()
            if pred(st["counters"]):
                return st
            time.sleep(0.1)
        raise TimeoutError("%s never held; last status %r" % (what, st))

    def logtext(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-6000:]

    def terminate(self):
        """SIGTERM and wait: returns the exit status."""
        if self.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.returncode = self.proc.wait(LONG)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.returncode = self.proc.wait()
            if self.returncode != 0:
                # pytest shows captured stderr of a failing test: the daemon's last log lines
                # (an ASan or libzmq report included) say why it did not exit cleanly.
                sys.stderr.write("faid exited with %s; its log:\n%s\n"
                                 % (self.returncode, self.logtext()))
        return self.returncode

    def stop(self):
        if self.proc.poll() is None:
            self.terminate()
        self.ctx.destroy(linger=0)
        self.log.close()


@pytest.fixture
def tmpdir_():
    with tempfile.TemporaryDirectory(prefix="faid-daemon-") as d:
        yield d


@pytest.fixture
def daemons(tmpdir_):
    started = []

    def start(env=None, wrapper=(), **cfg):
        sub = os.path.join(tmpdir_, "d%d" % len(started))
        os.makedirs(sub)
        d = Daemon(sub, env=env, wrapper=wrapper, **cfg)
        started.append(d)
        d.wait_ready()
        return d

    yield start
    for d in started:
        d.stop()


def header(frame_id, series_id=1, shape=(ROWS, COLS), dtype="uint16", encoding="none", **kw):
    h = {"type": "image", "protocol_version": 1, "series_id": series_id, "frame_id": frame_id,
         "shape": list(shape), "dtype": dtype, "encoding": encoding}
    h.update(kw)
    return msgpack.packb(h)


def frames(n, seed=1, dtype=np.uint16):
    rng = np.random.default_rng(seed)
    return [rng.poisson(20 + 5 * k % 7, (ROWS, COLS)).astype(dtype) for k in range(n)]


class Sender:
    def __init__(self, daemon):
        self.sock = daemon.ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.sock.setsockopt(zmq.SNDTIMEO, LONG * 1000)
        curve_client(self.sock, daemon.curve)
        self.sock.connect(ep(daemon.ports["in"]))

    def start(self, series_id=1, **kw):
        self.sock.send(msgpack.packb(dict(type="start", protocol_version=1, series_id=series_id,
                                          **kw)))

    def end(self, series_id=1):
        self.sock.send(msgpack.packb(dict(type="end", protocol_version=1, series_id=series_id)))

    def image(self, frame_id, img, series_id=1, **kw):
        self.sock.send_multipart([header(frame_id, series_id, img.shape, str(img.dtype), **kw),
                                  img.tobytes()])

    def raw(self, parts):
        self.sock.send_multipart(parts)


class Receiver:
    """SUB (all topics) collecting decoded messages; Receiver(d, lossless=True) is a
    LosslessReceiver (the acknowledging consumer of the lossless channel)."""

    def __new__(cls, daemon, lossless=False, hwm=None, **kw):
        if lossless and cls is Receiver:
            return LosslessReceiver(daemon, **kw)
        return super().__new__(cls)

    def __init__(self, daemon, lossless=False, hwm=None):
        self.sock = daemon.ctx.socket(zmq.SUB)
        if hwm is not None:
            self.sock.setsockopt(zmq.RCVHWM, hwm)
        curve_client(self.sock, daemon.curve)
        self.sock.connect(ep(daemon.ports["out"]))
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.msgs = []
        self.lock = threading.Lock()

    def settle(self):
        # A SUB only sees what is published after its subscription reached the PUB socket.
        time.sleep(0.5)

    def collect_until_end(self, n_ends=1, timeout=LONG):
        ends = 0
        t_end = time.monotonic() + timeout
        while ends < n_ends:
            left = t_end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no end message; got %s" % [m["type"] for m in self.msgs])
            if not self.sock.poll(int(min(left, 1.0) * 1000)):
                continue
            topic, body = self.sock.recv_multipart()
            m = msgpack.unpackb(body)
            assert m["type"] == topic.decode(), (topic, m["type"])
            assert next(iter(m)) == "type", "first key must be type"
            self.msgs.append(m)
            if m["type"] == "end":
                ends += 1
        return self.msgs

    def of(self, kind):
        return [m for m in self.msgs if m["type"] == kind]


class LosslessReceiver:
    """A consumer of the lossless channel written from proto/PROTOCOL.md 3.6 alone (not the client
    library): DEALER (named when `name` is given), hello with a credit, a cumulative ack after
    every message and every 0.3 s, re-sent messages dropped by msg_number, in a thread of its
    own. stall() stops reading (messages still pile up in its ZeroMQ buffers), vanish() closes
    the socket without a bye, close() says bye."""

    def __init__(self, daemon, name=None, credit=100000, hello_seq=None, instance=""):
        self.sock = daemon.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        if name:
            self.sock.setsockopt(zmq.ROUTING_ID, name.encode())
        curve_client(self.sock, daemon.curve)
        self.sock.connect(ep(daemon.ports["lossless"]))
        self.credit = credit
        self.msgs, self.refusals, self.welcomes = [], [], []
        self.duplicates = 0
        self.pings = 0  # liveness probes faid sent (when another peer asked for the channel)
        self.last = hello_seq  # msg_number of the last message in hand
        self.acked = None      # last msg_number acknowledged
        self.instance = instance
        self.lock = threading.Lock()
        self.stalled = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _send(self, typ):
        m = {"type": typ, "credit": self.credit}
        if self.last is not None:
            m.update(seq=self.last, instance=self.instance)
        self.sock.send(msgpack.packb(m))
        if typ == "ack":
            self.acked = self.last

    def _run(self):
        try:
            self._loop()
        except zmq.ZMQError:
            pass  # the context went away with the daemon fixture

    def _loop(self):
        welcomed = False
        next_hello = 0.0
        last_ack = time.monotonic()
        while not self.done.is_set():
            now = time.monotonic()
            if self.stalled.is_set():
                time.sleep(0.01)
                continue
            if not welcomed and now >= next_hello:
                self._send("hello")
                next_hello = now + 1.0
            if welcomed and now - last_ack > 0.3:
                self._send("ack")
                last_ack = now
            if not self.sock.poll(20):
                continue
            parts = self.sock.recv_multipart()
            topic, m = parts[0].decode(), msgpack.unpackb(parts[-1])
            assert len(parts) == 2 and m["type"] == topic, (topic, m)
            with self.lock:
                if topic == "welcome":
                    if m["instance"] != self.instance:
                        self.last = None
                    self.instance = m["instance"]
                    self.welcomes.append(m)
                    welcomed = True
                elif topic == "refused":
                    self.refusals.append(m)
                    welcomed = False
                    next_hello = time.monotonic() + 1.0
                elif topic == "ping":
                    self.pings += 1
                elif self.last is not None and m["msg_number"] <= self.last:
                    self.duplicates += 1
                else:
                    assert next(iter(m)) == "type", "first key must be type"
                    self.msgs.append(m)
                    self.last = m["msg_number"]
                    self._send("ack")
                    last_ack = time.monotonic()

    def settle(self):
        t_end = time.monotonic() + LONG
        while not self.welcomes and time.monotonic() < t_end:
            time.sleep(0.02)
        assert self.welcomes, "no welcome from faid"

    def stall(self):
        self.stalled.set()

    def vanish(self):
        """Closes the socket as a crashed consumer would: no bye, buffers lost."""
        self.done.set()
        self.thread.join(LONG)
        self.sock.close(0)

    def close(self):
        self.done.set()
        self.thread.join(LONG)
        if not self.sock.closed:
            self.sock.send(msgpack.packb({"type": "bye"}))
            self.sock.close(500)

    def collect_until_end(self, n_ends=1, timeout=LONG):
        t_end = time.monotonic() + timeout
        while len(self.of("end")) < n_ends:
            if time.monotonic() > t_end:
                raise TimeoutError("no end message; got %s" % [m["type"] for m in self.msgs])
            time.sleep(0.02)
        with self.lock:
            return list(self.msgs)

    def of(self, kind):
        with self.lock:
            return [m for m in self.msgs if m["type"] == kind]


def arr(a):
    return np.frombuffer(a["data"], a["dtype"]).reshape(a["shape"])


def process_refs(d, out, imgs, device, stem="f"):
    """`faidctl process` on daemon d's configuration over imgs (written as OUT/STEM.npy) on
    device: its 1D profiles (.dat rows, float64) per frame, the reference the daemon's results
    are compared with bit for bit."""
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, stem + ".npy"), np.stack(imgs))
    p = subprocess.run([FAIDCTL, "process", "-c", d.config, "--device", device, "-o", out,
                        os.path.join(out, stem + ".npy")], capture_output=True, text=True,
                       timeout=LONG)
    assert p.returncode == 0, p.stderr
    return [np.loadtxt(os.path.join(out, "%s_%05d.dat" % (stem, k)), dtype=np.float64)
            for k in range(len(imgs))]


def thread_names(d):
    """The names of daemon d's threads now (/proc/PID/task/*/comm)."""
    names = set()
    for t in os.listdir("/proc/%d/task" % d.proc.pid):
        try:
            with open("/proc/%d/task/%s/comm" % (d.proc.pid, t)) as f:
                names.add(f.read().strip())
        except OSError:
            pass  # a thread that ended meanwhile
    return names


def series_with_bits(d, out, imgs, series_id, device):
    """imgs sent to daemon d as series series_id and received on its lossless channel: every
    frame answered exactly once, each with the bits `faidctl process` gives on device (its
    references written under out). The results by frame id."""
    rx = Receiver(d, lossless=True)
    rx.settle()
    tx = Sender(d)
    tx.start(series_id=series_id, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=series_id)
    tx.end(series_id=series_id)
    rx.collect_until_end()
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == list(range(len(imgs)))
    assert len(rx.of("result")) == len(imgs)
    for i, ref in enumerate(process_refs(d, out, imgs, device)):
        assert_profile_bits(results[i], ref)
    return results


def assert_profile_bits(res, ref):
    """A result's I, sigma, std and count are bit for bit the float32 of `faidctl process`'s
    .dat columns (%.9g round-trips float32 exactly)."""
    for col, key in enumerate(("I", "sigma", "std", "count"), start=1):
        want = ref[:, col].astype(np.float32)
        assert np.array_equal(arr(res[key]).view(np.uint32), want.view(np.uint32)), key


# ------------------------------------------------------------------------------------------------


def test_results_match_faidctl_process(daemons, tmpdir_):
    d = daemons()
    rx = Receiver(d)
    rx.settle()
    tx = Sender(d)
    imgs = frames(5) + [f.astype(np.uint32) * 3 for f in frames(2, seed=9)]
    tx.start(series_id=42, nimages=len(imgs), user_data={"sample": "lysozyme"})
    for i, img in enumerate(imgs):
        tx.image(100 + i, img, series_id=42, timestamp=1234.5 + i, user_data={"k": i})
    tx.end(series_id=42)
    msgs = rx.collect_until_end()

    starts, results, ends = rx.of("start"), rx.of("result"), rx.of("end")
    assert len(starts) == 1 and starts[0]["series_id"] == 42 and starts[0]["nimages"] == len(imgs)
    assert starts[0]["user_data"] == {"sample": "lysozyme"}
    assert starts[0]["protocol_version"] == 1 and starts[0]["magic_number"] == 0x46414944
    assert msgs.index(starts[0]) < min(msgs.index(r) for r in results)
    assert sorted(r["frame_id"] for r in results) == [100 + i for i in range(len(imgs))]
    assert ends[0]["frames_received"] == len(imgs) and ends[0]["frames_processed"] == len(imgs)
    assert ends[0]["reason"] == "end" and not ends[0]["incomplete"]
    nums = [m["msg_number"] for m in msgs if "msg_number" in m]
    assert nums == list(range(len(nums))), "PUB stream has gaps or disorder: %s" % nums
    radial = arr(starts[0]["radial"])
    assert radial.shape == (64,)

    # The same frames through faidctl process (same config, same device) give the same bits.
    out = os.path.join(tmpdir_, "proc")
    os.makedirs(out)
    for dt in ("uint16", "uint32"):
        stack = np.stack([im for im in imgs if str(im.dtype) == dt])
        np.save(os.path.join(out, dt + ".npy"), stack)
        r = subprocess.run([FAIDCTL, "process", "-c", d.config, "--device", "cpu", "-o", out,
                            os.path.join(out, dt + ".npy")], capture_output=True, text=True,
                           timeout=LONG)
        assert r.returncode == 0, r.stderr
    by_id = {r["frame_id"]: r for r in results}
    seen = {"uint16": 0, "uint32": 0}
    for i, img in enumerate(imgs):
        dt = str(img.dtype)
        k = seen[dt]
        seen[dt] += 1
        ref = np.loadtxt(os.path.join(out, "%s_%05d.dat" % (dt, k)), dtype=np.float64)
        res = by_id[100 + i]
        assert res["setup_version"] == 1 and res["series_id"] == 42
        assert res["user_data"] == {"k": i} and res["timestamp"] == 1234.5 + i
        assert res["latency_us"] >= 0 and res["received_ns"] <= res["done_ns"]
        np.testing.assert_allclose(ref[:, 0], radial, rtol=1e-12)
        for col, key in enumerate(("I", "sigma", "std", "count"), start=1):
            got = arr(res[key])
            assert got.dtype == np.float32 and got.shape == (64,)
            want = ref[:, col].astype(np.float32)  # %.9g round-trips float32 exactly
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (i, key)
    assert d.terminate() == 0


def test_malformed_messages(daemons):
    # Lossless output: the burst of error messages must not be thinned by the PUB high-water mark.
    malformed_among_good(daemons(lossless=True))


def sanitized(path):
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    return "libasan" in r.stdout or "libubsan" in r.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None or sanitized(FAID),
                    reason="needs valgrind and a build without sanitizers")
def test_malformed_messages_under_valgrind(daemons):
    # The same stream with faid under memcheck (plain C reference device: valgrind cannot follow
    # an OpenCL runtime's JIT code usefully): any invalid access, use of uninitialised memory or
    # definite leak makes it exit 99 instead of 0.
    vg = ("valgrind", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
          "--show-leak-kinds=definite", "--quiet")
    d = daemons(lossless=True, devices="ref", wrapper=vg)
    malformed_among_good(d)
    assert d.returncode == 0, d.logtext()


def malformed_among_good(d):
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    good = frames(1 + 18 // 3)
    ok = lambda i: tx.image(i, good[i])
    bslz4_garbage = (ROWS * COLS * 2).to_bytes(8, "big") + (8192).to_bytes(4, "big") + \
        b"\x00\x00\x10\x00" + os.urandom(300)
    bad = [
        # (parts, frame id named by the error or None)
        ([b"not msgpack at all"], None),
        ([b""], None),
        ([msgpack.packb([1, 2, 3])], None),
        ([b"\x8f\xa1a"], None),                                # truncated map
        ([b"\xdf\xff\xff\xff\xff"], None),                     # map claiming 4G entries
        ([msgpack.packb({"type": "image", "protocol_version": 1, "series_id": 1}), b"x"], None),
        ([header(1001, protocol_version=99), good[0].tobytes()], None),
        ([header(1002), good[0].tobytes(), b"third part"], 1002),
        ([header(1003)], 1003),
        ([header(1004, shape=(ROWS, COLS // 2)), good[0][:, :COLS // 2].tobytes()], 1004),
        ([header(1005, dtype="float64"), good[0].astype(np.float64).tobytes()], None),
        ([header(1006, encoding="zstd"), good[0].tobytes()], None),
        ([header(1007), good[0].tobytes()[:-2]], 1007),       # raw payload too short
        ([header(1008, dtype="uint32"), b"\0" * 190000], 1008),  # wrong size
        ([header(1009), b"\0" * 300000], 1009),               # over max_frame_bytes
        ([header(1010, encoding="bslz4"), bslz4_garbage], 1010),  # corrupt compressed data
        ([header(1011, encoding="bslz4"), b"\0" * 11], 1011),  # truncated bslz4 header
        ([msgpack.packb({"type": "end", "protocol_version": 1, "series_id": 77})], None),
    ]
    ok(0)
    for k, (parts, _) in enumerate(bad):
        tx.raw(parts)
        if k % 3 == 2:
            ok(1 + k // 3)
    tx.end()
    rx.collect_until_end()

    results = rx.of("result")
    assert sorted(r["frame_id"] for r in results) == list(range(len(good)))
    errors = rx.of("error")
    assert len(errors) == len(bad), [e["message"] for e in errors]
    named = sorted(e["frame_id"] for e in errors if "frame_id" in e)
    expect_named = sorted(fid for _, fid in bad if fid is not None)
    assert set(expect_named) <= set(named)
    for e in errors:
        assert e["code"].startswith("FAID_E") and e["message"] and e["stage"] in ("ingest",
                                                                                 "worker")
    corrupt = [e for e in errors if e.get("frame_id") == 1010]
    assert corrupt and corrupt[0]["stage"] == "worker"
    st = d.status()
    c = st["counters"]
    assert c["processed"] == len(good)
    assert c["failed"] + c["bad_input"] == len(bad)
    assert c["received"] == c["processed"] + c["failed"] + c["dropped"]
    assert sum(st["errors"].values()) == len(bad)
    # Still alive and serving after all that.
    tx.image(500, good[0])
    d.wait_counters(lambda c: c["processed"] == len(good) + 1, "late frame processed")
    assert d.request(b"ping")["ok"]
    assert d.terminate() == 0


def test_sigterm_during_stream_publishes_everything(daemons):
    d = daemons(lossless=True, env={"FAID_TEST_WORKER_DELAY_US": "20000"})
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    imgs = frames(3)
    tx.start(series_id=5)
    n = 60
    for i in range(n):
        tx.image(i, imgs[i % 3], series_id=5)
    d.wait_counters(lambda c: c["processed"] >= 3, "some frames processed")
    assert d.terminate() == 0
    msgs = rx.collect_until_end(timeout=30)
    end = rx.of("end")[0]
    results = rx.of("result")
    assert end["reason"] == "shutdown" and not end["incomplete"]
    assert end["frames_received"] >= 3
    assert end["frames_received"] == end["frames_processed"] + end["frames_failed"] + \
        end["frames_dropped"]
    assert end["frames_failed"] == 0 and end["frames_dropped"] == 0
    assert len(results) == end["frames_processed"]
    ids = [r["frame_id"] for r in results]
    assert len(set(ids)) == len(ids)
    # Frames are received in order, so what was received is a prefix of what was sent.
    assert sorted(ids) == list(range(len(ids)))
    nums = [m["msg_number"] for m in msgs]
    assert nums == list(range(len(nums))), "lossless stream must have no gaps"


def test_control_requests(daemons):
    d = daemons()
    st = d.status()
    for key in ("state", "counters", "drops", "errors", "queue", "fps", "latency_us", "devices",
                "setup_version", "config_hash"):
        assert key in st
    assert st["state"] == "idle" and st["queue"]["policy"] == "block"
    assert st["queue"]["capacity"] == 8 and len(st["devices"]) == 1
    cfg = d.request({"cmd": "config"})
    assert cfg["ok"] and "npt: 64" in cfg["config"] and cfg["source"] == d.config
    bad = d.request({"cmd": "fly"})
    assert bad["ok"] is False and "fly" in bad["error"]
    assert d.request(b"\x93\x01\x02")["ok"] is False
    assert d.request({"cmd": "reset"})["ok"]
    # Failed reload (missing file): the old setup stays.
    r = d.request({"cmd": "reload", "path": "/nonexistent/faid.yaml"})
    assert r["ok"] is False and "nonexistent" in r["error"]
    assert d.status()["setup_version"] == st["setup_version"]
    assert d.request({"cmd": "stop"})["ok"]
    assert d.proc.wait(LONG) == 0


def test_stalled_subscriber_does_not_stall_pipeline(daemons):
    # Big profiles make each result large (64 kB), so the stalled subscriber's buffers (faid's
    # high-water mark, the kernel's socket buffers) fill after a fraction of the frames.
    d = daemons(npt=4000, split="no")
    stalled = Receiver(d, hwm=1)
    stalled.settle()
    tx = Sender(d)
    img = frames(1)[0]
    n = 400
    for i in range(n):
        tx.image(i, img)
    d.wait_counters(lambda c: c["processed"] == n, "all frames processed")
    st = d.status()
    assert st["counters"]["dropped"] == 0 and st["counters"]["published"] >= n
    # The stalled subscriber lost results (the PUB dropped them for it alone, once its buffers
    # were full): it holds only the first ones.
    nums = []
    while stalled.sock.poll(300):
        topic, body = stalled.sock.recv_multipart()
        if topic == b"result":
            nums.append(msgpack.unpackb(body)["msg_number"])
    assert 0 < len(nums) < n, len(nums)
    assert nums == sorted(nums)
    assert d.terminate() == 0


@pytest.mark.parametrize("policy", ["block", "drop_oldest", "drop_newest"])
def test_backpressure_policies(daemons, policy):
    d = daemons(policy=policy, depth=4, lossless=True,
                env={"FAID_TEST_WORKER_DELAY_US": "30000"})
    rx = Receiver(d, lossless=True)
    tx = Sender(d)
    imgs = frames(2)
    n = 40
    tx.start(series_id=3)
    for i in range(n):
        tx.image(i, imgs[i % 2], series_id=3)
    tx.end(series_id=3)
    rx.collect_until_end()
    end = rx.of("end")[0]
    ids = sorted(r["frame_id"] for r in rx.of("result"))
    assert end["frames_received"] == n
    assert end["frames_received"] == end["frames_processed"] + end["frames_dropped"]
    assert end["frames_failed"] == 0 and len(ids) == end["frames_processed"]
    c = d.status()["counters"]
    assert c["received"] == c["processed"] + c["dropped"]
    drops = d.status()["drops"]
    if policy == "block":
        assert end["frames_dropped"] == 0 and ids == list(range(n))
    else:
        # The worker needs 30 ms per frame, the 40 frames arrive far faster: a 4-deep queue must
        # overflow. Which frames survive follows from the policy alone.
        assert end["frames_dropped"] > 0
        reason = "queue.oldest" if policy == "drop_oldest" else "queue.newest"
        assert drops[reason] == end["frames_dropped"]
        if policy == "drop_oldest":
            assert n - 1 in ids  # the newest frame is never evicted
        else:
            assert 0 in ids  # the first frame found an empty queue
    assert d.terminate() == 0


def test_cake_results_match_faidctl_process(daemons, tmpdir_):
    # With integration.npt_azim the result carries the 2D cake, laid out (npt_azim, npt) like
    # pyFAI's integrate2d and faidctl process's *_2d_*.npy, with the same bits; output.cake full:
    # I_2d, sigma_2d and count_2d.
    d = daemons(extra="", npt=48, lossless=True, output_extra="  cake: full\n")
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace("  split: full\n", "  split: full\n  npt_azim: 36\n"))
    r = d.request({"cmd": "reload"})
    assert r["ok"], r
    rx = Receiver(d)
    rx.settle()
    # faidctl sub --out on the lossless output (which waits for it) writes the cake as .npy.
    subdir = os.path.join(tmpdir_, "sub")
    sub = subprocess.Popen([FAIDCTL, "sub", "--from", ep(d.ports["lossless"]), "--lossless",
                            "--count", "3", "--timeout", str(LONG), "--out", subdir, "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tx = Sender(d)
    imgs = frames(3, seed=5)
    tx.start(series_id=7, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=7)
    tx.end(series_id=7)
    rx.collect_until_end()
    results = {r["frame_id"]: r for r in rx.of("result")}
    sub_out, sub_err = sub.communicate(timeout=LONG)
    assert sub.returncode == 0, sub_err
    assert "files: 12 written" in sub_out, sub_out
    stems = {f.split("_00000_2d_")[0] for f in os.listdir(subdir) if "_00000_2d_" in f}
    assert len(stems) == 1, sorted(os.listdir(subdir))
    stem = stems.pop()
    for i in range(len(imgs)):
        for key, name in (("I_2d", "I"), ("sigma_2d", "sigma"), ("count_2d", "count")):
            got = np.load(os.path.join(subdir, "%s_%05d_2d_%s.npy" % (stem, i, name)))
            want = arr(results[i][key])
            assert got.dtype == np.float32 and got.shape == want.shape == (36, 48), key
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), key
    start = [s for s in rx.of("start") if s["setup_version"] == results[0]["setup_version"]][-1]
    assert arr(start["azimuthal"]).shape == (36,)

    out = os.path.join(tmpdir_, "cake")
    os.makedirs(out)
    np.save(os.path.join(out, "f.npy"), np.stack(imgs))
    p = subprocess.run([FAIDCTL, "process", "-c", d.config, "--device", "cpu", "-o", out,
                        os.path.join(out, "f.npy")], capture_output=True, text=True, timeout=LONG)
    assert p.returncode == 0, p.stderr
    for i in range(len(imgs)):
        for key, name in (("I_2d", "I"), ("sigma_2d", "sigma"), ("count_2d", "count")):
            got = arr(results[i][key])
            want = np.load(os.path.join(out, "f_%05d_2d_%s.npy" % (i, name)))
            assert got.shape == want.shape == (36, 48), (key, got.shape, want.shape)
            assert np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32)), key
    assert d.terminate() == 0


@pytest.mark.parametrize("device,batch", [("cpu", 1), ("cpu", 2), ("ref", 1)])
def test_cake_lean_carries_intensities_only(daemons, tmpdir_, device, batch):
    """output.cake lean (the default): a cake result carries I_2d alone, no sigma_2d or count_2d
    (the OpenCL device read back only the cake's intensities: a prefix of each lane's output
    block, one rectangular copy for a batch of two), with the same bits as `faidctl process`
    gives for I; the 1D profile is complete."""
    d = daemons(extra="pipeline:\n  batch: %d\n" % batch, npt=48, lossless=True,
                devices=device)
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace("  split: full\n", "  split: full\n  npt_azim: 36\n"))
    r = d.request({"cmd": "reload"})
    assert r["ok"], r
    rx = Receiver(d)
    rx.settle()
    tx = Sender(d)
    imgs = frames(3, seed=6)
    tx.start(series_id=8, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=8)
    tx.end(series_id=8)
    rx.collect_until_end()
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == [0, 1, 2]
    for res in results.values():
        assert "I_2d" in res and "sigma_2d" not in res and "count_2d" not in res, sorted(res)
        for key in ("I", "sigma", "std", "count"):
            assert arr(res[key]).shape == (48,), key
    out = os.path.join(tmpdir_, "cake")
    refs = process_refs(d, out, imgs, device)
    for i in range(len(imgs)):
        got = arr(results[i]["I_2d"])
        want = np.load(os.path.join(out, "f_%05d_2d_I.npy" % i))
        assert got.shape == want.shape == (36, 48)
        assert np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))
        # the 1D profile of every lane, which lies before the cake in each lane's block
        assert_profile_bits(results[i], refs[i])
    assert d.terminate() == 0


@pytest.mark.parametrize("mode", ["auto", "idle"])
def test_pinned_copy_idle_leaves_the_copy_to_the_worker_while_input_waits(daemons, mode):
    """input.pinned_copy: a slow worker (300 ms per frame, one in flight) and a frame queue of two;
    eight frames sent at once. auto: ingest copies every frame that finds frames waiting in the
    queue (frames 2-7 at least); idle: not while the next message already waits on the input
    socket: frames 4, 5 and 6 (read while the rest of the burst was queued in the socket behind
    them) are never copied, the last one is. Every frame is processed either way."""
    d = daemons(env={"FAID_TEST_WORKER_DELAY_US": "300000"}, depth=2,
                input_extra="  pinned_copy: %s\n  pinned_receive: false\n" % mode,
                extra="pipeline:\n  inflight: 1\n  batch: 1\n")
    tx = Sender(d)
    imgs = frames(8, seed=3)
    tx.start(series_id=3, nimages=len(imgs))
    d.wait_counters(lambda c: c["series"] >= 1, "series opened")
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=3)
    st = d.wait_counters(lambda c: c["processed"] == len(imgs), "all processed")
    copied = st["input"]["pinned_frames"]
    assert st["input"]["pinned_fallback"] == 0
    if mode == "auto":
        assert copied >= 6, st["input"]
    else:
        assert 1 <= copied <= 5, st["input"]
    tx.end(series_id=3)
    assert d.terminate() == 0


def test_partial_batch_launched_before_wait(daemons, tmpdir_):
    """pipeline.batch 2: a slot holding one frame that is not the oldest in flight starts as soon
    as no further frame waits, instead of after every frame before it is collected (status
    devices[].early_launches; issue 17: a frame arriving at 1 kHz while the previous one was in
    flight waited for it before its own integration and peak stages). Frame 0 is uint32 and the
    others uint16: a frame of another dtype closes the open slot, so frame 0 is alone in its slot
    however the frames arrive, and the worker (held 0.3 s after each collect) meets a partly
    filled slot behind one in flight whatever the interleaving. Every frame answered once, with
    the bits of `faidctl process` on the same device."""
    d = daemons(devices="ref", lossless=True, env={"FAID_TEST_WORKER_DELAY_US": "300000"},
                extra="pipeline:\n  inflight: 4\n  batch: 2\n")
    rx = Receiver(d, lossless=True)
    rx.settle()
    tx = Sender(d)
    imgs = [frames(1, seed=5, dtype=np.uint32)[0]] + frames(3, seed=6)
    tx.start(series_id=3, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=3)
    tx.end(series_id=3)
    rx.collect_until_end()
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == list(range(len(imgs))) and len(rx.of("result")) == len(imgs)
    # without peaks no peak stage times; the engine's host and transfer parts are there
    assert all("clip_us" not in r and "find_us" not in r and "h2d_us" in r
               for r in results.values())
    st = d.status()
    assert st["devices"][0]["early_launches"] >= 1, st["devices"]
    assert st["counters"]["received"] == st["counters"]["processed"] == len(imgs)
    out = os.path.join(tmpdir_, "early")
    for stem, first, part in (("a", 0, imgs[:1]), ("b", 1, imgs[1:])):
        for k, ref in enumerate(process_refs(d, out, part, "ref", stem)):
            assert_profile_bits(results[first + k], ref)
    assert d.terminate() == 0


def test_copy_threads_same_results(daemons, tmpdir_):
    """pipeline.copy_threads 3 with no pinned arena: the worker and two threads copy each frame
    (1 MB, above the split threshold) into staging, a share each; every frame is answered with
    the bits `faidctl process` gives on the same device."""
    shape = (512, 512)
    d = daemons(devices="ref", lossless=True, shape=shape, max_frame_bytes=4000000,
                input_extra="  pinned_bytes: 0\n", extra="pipeline:\n  copy_threads: 3\n")
    assert "copy_threads: 3" in subprocess.run(
        [FAIDCTL, "config", "--control", ep(d.ports["ctl"])], capture_output=True, text=True,
        timeout=LONG).stdout
    rng = np.random.default_rng(8)
    imgs = [rng.poisson(30 + k, shape).astype(np.uint32) for k in range(4)]
    series_with_bits(d, os.path.join(tmpdir_, "copy"), imgs, 4, "ref")
    assert d.terminate() == 0


def test_threads_named(daemons):
    """The daemon's threads carry names (`top -H`, `ps -L`, gdb, daemon-bench's per-thread CPU):
    one ingest per input endpoint, one worker per device, the publisher, the writer."""
    d = daemons()
    names = thread_names(d)
    assert {"faid-ingest0", "faid-worker0", "faid-publish", "faid-writer"} <= names, names
    assert d.terminate() == 0


def pinned_receive_on(st):
    """status input.pinned_receive: "on", or "unavailable" in a sanitizer build (its allocator
    is the sanitizer's: faid_rxalloc.h); anything else fails."""
    mode = st["input"]["pinned_receive"]
    if mode == "unavailable" and os.environ.get("ASAN_OPTIONS"):
        return False
    assert mode == "on", st["input"]
    return True


@pytest.mark.parametrize("contexts", ["per_connection", "shared"])
def test_pinned_receive_same_results(daemons, tmpdir_, contexts):
    """input.pinned_receive: the 1 MB frames are received by libzmq's input I/O thread straight
    into the pinned arena (its own context's, or the daemon's shared one), so nobody copies them
    (status input.pinned_received counts every frame, pinned_frames none), and each result has
    the bits `faidctl process` gives on the same device."""
    shape = (512, 512)
    d = daemons(devices="ref", lossless=True, shape=shape, max_frame_bytes=4000000,
                input_extra="  pinned_receive: true\n  pinned_copy: always\n"
                "  contexts: %s\n" % contexts)
    rng = np.random.default_rng(12)
    imgs = [rng.poisson(20 + k, shape).astype(np.uint32) for k in range(5)]
    series_with_bits(d, os.path.join(tmpdir_, "rx"), imgs, 4, "ref")
    st = d.status()
    if pinned_receive_on(st):
        assert st["input"]["pinned_received"] == len(imgs), st["input"]
        # pinned_copy always would have copied every frame that was not in the arena already
        assert st["input"]["pinned_frames"] == 0, st["input"]
        assert st["input"]["pinned_receive_fallback"] == 0, st["input"]
    assert d.terminate() == 0


def test_pinned_receive_arena_full_falls_back(daemons, tmpdir_):
    """input.pinned_receive with an arena of 2.5 MB and 1 MB frames, held 0.2 s each by the
    worker: frames received while two are held find the arena full and are received into
    ordinary memory (status input.pinned_receive_fallback), never waited for; every frame is
    answered once with the bits of `faidctl process`, and received + fallen back = sent."""
    shape = (512, 512)
    d = daemons(devices="ref", lossless=True, shape=shape, max_frame_bytes=4000000, depth=8,
                env={"FAID_TEST_WORKER_DELAY_US": "200000"},
                input_extra="  pinned_receive: true\n  pinned_bytes: 2621440\n",
                extra="pipeline:\n  inflight: 1\n  batch: 1\n")
    rng = np.random.default_rng(13)
    imgs = [rng.poisson(25 + k, shape).astype(np.uint32) for k in range(6)]
    series_with_bits(d, os.path.join(tmpdir_, "rxfull"), imgs, 5, "ref")
    st = d.status()
    if pinned_receive_on(st):
        inp = st["input"]
        assert inp["pinned_receive_fallback"] >= 1, inp
        assert inp["pinned_received"] >= 1, inp
        assert inp["pinned_received"] + inp["pinned_receive_fallback"] == len(imgs), inp
    assert d.terminate() == 0


@pytest.mark.parametrize("batch", [1, 2])
def test_collect_poll_same_results(daemons, tmpdir_, batch):
    """pipeline.collect_poll_us: the worker checks the oldest frame and the queue instead of
    waiting for the oldest frame, so frames that arrive while others are in flight are submitted
    at once. Frames sent a few at a time, some while others are in flight: every frame is
    answered once, with the bits `faidctl process` gives."""
    d = daemons(lossless=True, extra="pipeline:\n  inflight: 4\n  batch: %d\n"
                "  collect_poll_us: 200\n" % batch)
    rx = Receiver(d, lossless=True)
    rx.settle()
    tx = Sender(d)
    imgs = frames(9, seed=11)
    tx.start(series_id=6, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=6)
        if i % 3 == 2:
            time.sleep(0.02)
    tx.end(series_id=6)
    rx.collect_until_end()
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == list(range(len(imgs)))
    assert len(rx.of("result")) == len(imgs)
    for i, ref in enumerate(process_refs(d, os.path.join(tmpdir_, "poll"), imgs, "cpu")):
        assert_profile_bits(results[i], ref)
    c = d.status()["counters"]
    assert c["received"] == c["processed"] == len(imgs), c
    assert d.terminate() == 0
