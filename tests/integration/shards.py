"""The harness of the tests of several instances of one series (issue 18): test_merge.py
(faidctl's merged view and merge-files) and test_pymerge.py (the Python package's merged view).
Real daemons stamped with their shard, each fed its own frames of one series by the test's own
senders as a fan-out would; a PUB of the test's own that plays an instance or a fan-out; and
`faidctl sub --from ... --json` run as a user runs it, its lines read back."""

import json
import os
import signal
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_daemon as td  # noqa: E402
from test_daemon import Receiver, Sender  # noqa: E402


def instance_cfg(name, shard, shards):
    return f"instance:\n  name: {name}\n  shard: {shard}\n  shards: {shards}\n"


def three(daemons, tag="i"):
    """Three daemons, shards 0, 1 and 2 of 3, named <tag>0, <tag>1, <tag>2."""
    return [daemons(devices="ref", extra=instance_cfg("%s%d" % (tag, k), k, 3)) for k in range(3)]


def send_part(d, ids, imgs, series_id, end=True, **start):
    """One instance's part of a series: its start (the keys of `start`), frames `ids`, its end."""
    tx = Sender(d)
    tx.start(series_id=series_id, **start)
    for i in ids:
        tx.image(i, imgs[i], series_id=series_id)
    if end:
        tx.end(series_id=series_id)
    return tx


def send_dealt(ds, imgs, series_id, **start):
    """Every instance its part of one series, frame i to instance i % len(ds)."""
    for k, d in enumerate(ds):
        send_part(d, range(k, len(imgs), len(ds)), imgs, series_id, **start)


def kill_last_mid_series(ds, imgs, series_id):
    """The series dealt frame i to instance i % 3, the last instance SIGKILLed once it reduced
    its frames of the first half; the others end. Returns the killed one's frames reduced and
    those it never got."""
    n = len(imgs)
    txs = [Sender(d) for d in ds]
    for tx in txs:
        tx.start(series_id=series_id, nimages=n)
    first = [i for i in range(n) if i % 3 == 2 and i < n // 2]
    for i in first:
        txs[2].image(i, imgs[i], series_id=series_id)
    ds[2].wait_counters(lambda c: c["processed"] >= len(first), "shard 2's first frames")
    ds[2].proc.send_signal(signal.SIGKILL)
    ds[2].proc.wait()
    for k in (0, 1):
        for i in range(k, n, 3):
            txs[k].image(i, imgs[i], series_id=series_id)
        txs[k].end(series_id=series_id)
    never = sorted(i for i in range(n) if i % 3 == 2 and i not in first)
    return first, never


def second_stalls(ds, imgs, series_id, step):
    """Two instances start the series; the second reduces frame 1 and gets nothing more (alive,
    it never ends its part: what a fan-out's `lost` report is for); the first gets frames 0,
    step, 2 step, ... and ends."""
    txs = [Sender(d) for d in ds]
    for tx in txs:
        tx.start(series_id=series_id, nimages=len(imgs))
    txs[1].image(1, imgs[1], series_id=series_id)
    ds[1].wait_counters(lambda c: c["processed"] >= 1, "the second instance's frame 1")
    for i in range(0, len(imgs), step):
        txs[0].image(i, imgs[i], series_id=series_id)
    txs[0].end(series_id=series_id)


def peer_pub():
    """A PUB of the test's own on a free loopback port, to play an instance or a fan-out: the
    socket, its port and a stand-in with the `ports` a Daemon has (for sub_proc)."""
    import zmq

    pub = zmq.Context.instance().socket(zmq.PUB)
    port = td.free_port()
    pub.bind(td.ep(port))
    return pub, port, type("F", (), {"ports": {"out": port}})


def captured_series(daemons, name, shard, shards, ids, imgs, series_id):
    """A real daemon's start, results and end of frames `ids`, as published (msgpack bodies),
    for a test's own PUB to replay with alterations; the daemon is stopped afterwards."""
    d = daemons(devices="ref", extra=instance_cfg(name, shard, shards))
    rx = Receiver(d)
    rx.settle()
    send_part(d, ids, imgs, series_id, nimages=len(imgs))
    msgs = [m for m in rx.collect_until_end() if m["type"] in ("start", "result", "end")]
    d.stop()
    return msgs


def replay(sock, msgs):
    import msgpack

    for m in msgs:
        sock.send_multipart([m["type"].encode(), msgpack.packb(m)])


def sub_proc(ds, outdir, *extra):
    """faidctl sub --from each daemon's output, merged, every message as a JSON line."""
    args = [td.FAIDCTL, "sub", "--json", "--quiet", "--until-end", "--timeout", "60"]
    for d in ds:
        args += ["--from", td.ep(d.ports["out"])]
    if outdir:
        args += ["--out", outdir]
    return subprocess.Popen([*args, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def sub_lines(p, before=""):
    if before:
        # p.stdout was read from: its buffer holds what communicate() would miss
        out = before + p.stdout.read()
        err = p.stderr.read()
        p.wait(td.LONG)
    else:
        out, err = p.communicate(timeout=td.LONG * 2)
    assert p.returncode == 0, err
    lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    return lines, out, err


def read_until_start(p):
    """The merged stream's lines up to its first start (so that the test knows whose start the
    series' reference is)."""
    got = ""
    while True:
        ln = p.stdout.readline()
        assert ln, "faidctl sub ended before a start"
        got += ln
        if ln.startswith('{"type": "start"'):
            return got


def dat_columns(path):
    return np.loadtxt(path, comments="#", dtype=np.float64)
