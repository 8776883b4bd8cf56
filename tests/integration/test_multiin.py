"""Several input connections through the real daemon: `input.endpoint` as a list of four
endpoints (one PULL socket and one ingest thread each), fed by four real `faidctl replay`
processes on loopback at once. Every frame of every connection is processed exactly once, the
counters are exact (received = processed + failed + dropped, nothing failed or dropped), the
series that the four connections share (each one a source of the series tracker) ends once
after every frame of every source, and one bound endpoint taking several connections works as
well. Results may come out of order across connections: only sets are compared.

Nothing asserts on time: timeouts only turn a hang into a failure. Helpers come from
test_daemon.py (same folder)."""

import os
import subprocess
import time

import msgpack
import pytest
import zmq

import numpy as np

from test_daemon import (FAID, FAIDCTL, LONG, Daemon, Receiver, arr, config_text, ep,  # noqa: F401
                         frames, free_port, header, tmpdir_)

N_CONN = 4
N_FRAMES = 60  # per connection


@pytest.fixture
def multi(tmpdir_):
    started = []

    def start(n_inputs, **cfg):
        sub = os.path.join(tmpdir_, "d%d" % len(started))
        os.makedirs(sub)
        ports = [free_port() for _ in range(n_inputs)]
        # Daemon writes the configuration from its ports; the input line is then made a list.
        d = Daemon.__new__(Daemon)
        d.ports = {k: free_port() for k in ("in", "out", "lossless", "ctl")}
        d.ports["in"] = ports[0]
        text = config_text(d.ports, **cfg)
        eps = ", ".join('"%s"' % ep(p) for p in ports)
        text = text.replace('  endpoint: "%s"' % ep(ports[0]), "  endpoint: [%s]" % eps, 1)
        assert "[" + eps + "]" in text
        cfg_path = os.path.join(sub, "faid.yaml")
        with open(cfg_path, "w") as f:
            f.write(text)
        d.in_ports = ports
        d.config = cfg_path
        _launch(d, sub)
        started.append(d)
        d.wait_ready()
        return d

    yield start
    for d in started:
        d.stop()


def _launch(d, folder):
    d.log = open(os.path.join(folder, "faid.log"), "w+")
    e = dict(os.environ)
    e.setdefault("POCL_MAX_PTHREAD_COUNT", "2")
    d.proc = subprocess.Popen([FAID, "-c", d.config], stdout=d.log, stderr=subprocess.STDOUT,
                              env=e)
    d.ctx = zmq.Context()
    d.returncode = None


def replay(d, port, first, n, series=True, series_id=7):
    args = [FAIDCTL, "replay", "--to", ep(port), "-c", d.config, "--frames", str(n),
            "--first-frame", str(first), "--series-id", str(series_id), "--distinct", "4",
            "--timeout", str(LONG), "--quiet"]
    if not series:
        args.append("--no-series")
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_all(procs):
    for p in procs:
        out, _ = p.communicate(timeout=LONG)
        assert p.returncode == 0, out


def wait_ends(rx, total):
    """Every series that started has ended, and the ends count every frame."""
    t_end = time.monotonic() + LONG
    while time.monotonic() < t_end:
        starts, ends = rx.of("start"), rx.of("end")
        if ends and len(ends) == len(starts) and \
                sum(e["frames_received"] for e in ends) == total:
            return ends
        time.sleep(0.05)
    raise TimeoutError("series not all ended: %s" % [m["type"] for m in rx.msgs
                                                     if m["type"] != "result"])


def check_counters(d, total):
    st = d.wait_counters(lambda c: c["processed"] + c["failed"] + c["dropped"] >= total,
                         "%d frames accounted for" % total)
    c = st["counters"]
    assert c["received"] == total, c
    assert c["processed"] == total and c["failed"] == 0 and c["dropped"] == 0, c
    assert c["received"] == c["processed"] + c["failed"] + c["dropped"]
    return st


def test_four_endpoints_one_shared_series(multi):
    """Each connection starts series 7 (each joins it as a source), sends its frames with frame
    ids of its own range, and ends it: one start, one end after every frame of every source,
    every frame exactly once. The starts go out before any frame and the ends after every
    replay finished, so the series cannot close while a source is still sending (a source that
    ends before another one started would close it, and the late start opens it again)."""
    d = multi(N_CONN, lossless=True, depth=16)
    rx = Receiver(d, lossless=True)
    rx.settle()
    socks = []
    for p in d.in_ports:
        s = d.ctx.socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 2000)
        s.connect(ep(p))
        socks.append(s)
    for s in socks:
        s.send(msgpack.packb(dict(type="start", protocol_version=1, series_id=7,
                                  nimages=N_CONN * N_FRAMES)))
    # the starts are received (each on its own connection) before the frames are sent
    d.wait_counters(lambda c: c["series"] >= 1, "series opened")
    procs = [replay(d, p, 1000 * k, N_FRAMES, series=False) for k, p in enumerate(d.in_ports)]
    wait_all(procs)
    check_counters(d, N_CONN * N_FRAMES)
    for s in socks:
        s.send(msgpack.packb(dict(type="end", protocol_version=1, series_id=7)))
    rx.collect_until_end()
    starts, ends = rx.of("start"), rx.of("end")
    assert len(starts) == 1 and len(ends) == 1, [m["type"] for m in rx.msgs]
    end = ends[0]
    assert end["reason"] == "end" and not end["incomplete"], end
    assert end["frames_received"] == end["frames_processed"] == N_CONN * N_FRAMES, end
    ids = [r["frame_id"] for r in rx.of("result")]
    want = sorted(1000 * k + i for k in range(N_CONN) for i in range(N_FRAMES))
    assert sorted(ids) == want  # exactly once each
    assert all(r["series_id"] == 7 for r in rx.of("result"))
    st = d.status()
    assert st["input"]["accepted"] >= N_CONN
    for s in socks:
        s.close()
    assert d.terminate() == 0
    assert "series 7 closed (end): %d frames" % (N_CONN * N_FRAMES) in d.logtext()


def test_four_endpoints_replays_with_their_own_starts(multi):
    """Four replays, each with its own start and end of series 9, all at once: however their
    starts and ends interleave (one series, or a series closed by the first end and opened
    again by a later source's start), every frame is processed exactly once and the counters
    and the ends' frame counts add up."""
    d = multi(N_CONN, lossless=True, depth=16)
    rx = Receiver(d, lossless=True)
    rx.settle()
    procs = [replay(d, p, 1000 * k, N_FRAMES, series_id=9) for k, p in enumerate(d.in_ports)]
    wait_all(procs)
    check_counters(d, N_CONN * N_FRAMES)
    ends = wait_ends(rx, N_CONN * N_FRAMES)
    assert all(e["reason"] == "end" and not e["incomplete"] for e in ends), ends
    assert sum(e["frames_processed"] for e in ends) == N_CONN * N_FRAMES, ends
    assert sum(e["frames_received"] for e in ends) == N_CONN * N_FRAMES, ends
    ids = sorted(r["frame_id"] for r in rx.of("result"))
    assert ids == sorted(1000 * k + i for k in range(N_CONN) for i in range(N_FRAMES))
    assert d.terminate() == 0


def test_one_endpoint_several_connections(multi):
    """One bound endpoint, four replays connecting to it (ZeroMQ fair-queues them into its one
    ingest thread): the same exactly-once accounting."""
    d = multi(1, lossless=True, depth=16)
    rx = Receiver(d, lossless=True)
    rx.settle()
    procs = [replay(d, d.in_ports[0], 1000 * k, N_FRAMES, series_id=3) for k in range(N_CONN)]
    wait_all(procs)
    check_counters(d, N_CONN * N_FRAMES)
    wait_ends(rx, N_CONN * N_FRAMES)
    ids = sorted(r["frame_id"] for r in rx.of("result"))
    assert ids == sorted(1000 * k + i for k in range(N_CONN) for i in range(N_FRAMES))
    assert d.terminate() == 0


def test_pinned_arena_results_match_faidctl_process(multi, tmpdir_):
    """Frames copied into the pinned input arena by two ingest threads (input.pinned_copy: always)
    give the same bits as `faidctl process` on the same frames, same device; every frame went
    through the arena (status input.pinned_frames), none fell back."""
    d = multi(2, input_extra="  pinned_copy: always\n  pinned_receive: false\n")
    rx = Receiver(d)
    rx.settle()
    imgs = frames(6) + [f.astype(np.uint32) * 3 for f in frames(2, seed=9)]
    socks = []
    for p in d.in_ports:
        s = d.ctx.socket(zmq.PUSH)
        s.setsockopt(zmq.LINGER, 2000)
        s.connect(ep(p))
        socks.append(s)
    for s in socks:
        s.send(msgpack.packb(dict(type="start", protocol_version=1, series_id=5)))
    d.wait_counters(lambda c: c["series"] >= 1, "series opened")
    for i, img in enumerate(imgs):
        socks[i % 2].send_multipart([header(i, 5, img.shape, str(img.dtype)), img.tobytes()])
    d.wait_counters(lambda c: c["processed"] >= len(imgs), "all processed")
    for s in socks:
        s.send(msgpack.packb(dict(type="end", protocol_version=1, series_id=5)))
    rx.collect_until_end()
    st = d.status()
    assert st["input"]["endpoints"] == 2
    assert st["input"]["pinned_frames"] == len(imgs) and st["input"]["pinned_fallback"] == 0
    assert st["input"]["pinned_bytes"] > 0
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == list(range(len(imgs)))
    out = os.path.join(tmpdir_, "proc")
    os.makedirs(out)
    for dt in ("uint16", "uint32"):
        np.save(os.path.join(out, dt + ".npy"), np.stack([im for im in imgs if str(im.dtype) == dt]))
        r = subprocess.run([FAIDCTL, "process", "-c", d.config, "--device", "cpu", "-o", out,
                            os.path.join(out, dt + ".npy")], capture_output=True, text=True,
                           timeout=LONG)
        assert r.returncode == 0, r.stderr
    seen = {"uint16": 0, "uint32": 0}
    for i, img in enumerate(imgs):
        dt = str(img.dtype)
        ref = np.loadtxt(os.path.join(out, "%s_%05d.dat" % (dt, seen[dt])), dtype=np.float64)
        seen[dt] += 1
        for col, key in enumerate(("I", "sigma", "std", "count"), start=1):
            got = arr(results[i][key])
            want = ref[:, col].astype(np.float32)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (i, key)
    for s in socks:
        s.close()
    assert d.terminate() == 0


@pytest.mark.parametrize("contexts", ["default", "per_connection", "shared"])
def test_input_contexts(multi, contexts):
    """input.contexts: per_connection (the default) gives each input endpoint a ZeroMQ context of
    its own (status input.zmq_contexts = the number of endpoints), shared puts them all in the
    daemon's one context (1). Either way two replays at once on two endpoints are processed
    exactly once, and the connections are counted (each input's monitor lives in its context)."""
    extra = "" if contexts == "default" else "  contexts: %s\n" % contexts
    d = multi(2, lossless=True, depth=16, input_extra=extra)
    st = d.status()
    assert st["input"]["zmq_contexts"] == (1 if contexts == "shared" else 2), st["input"]
    rx = Receiver(d, lossless=True)
    rx.settle()
    n = 20
    procs = [replay(d, p, 1000 * k, n, series_id=4) for k, p in enumerate(d.in_ports)]
    wait_all(procs)
    check_counters(d, 2 * n)
    wait_ends(rx, 2 * n)
    ids = sorted(r["frame_id"] for r in rx.of("result"))
    assert ids == sorted(1000 * k + i for k in range(2) for i in range(n))
    # the connection monitors live in each input's context: the main thread still sees them
    assert d.status()["input"]["accepted"] >= 2
    assert d.terminate() == 0
