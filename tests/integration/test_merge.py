"""Several faid instances reducing one series (issue 18): the identity stamps (instance, shard,
shards) in start, result and end, and the merged view of `faidctl sub --from A --from B ...`
(proto/PROTOCOL.md, "Several instances"). The daemons are real, on loopback; each is fed its
own disjoint frames of one series by the test's own senders, as a fan-out would."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_daemon as td  # noqa: E402
from test_daemon import Receiver, Sender, daemons, frames, tmpdir_  # noqa: E402,F401


def instance_cfg(name, shard, shards):
    return f"instance:\n  name: {name}\n  shard: {shard}\n  shards: {shards}\n"


def test_two_daemons_stamp_their_shard(daemons):
    """Each daemon stamps its own instance.* options into start, every result and end, and
    status says the same; a daemon without the options stamps <host>:<control port>, 0 of 1."""
    ds = [daemons(devices="ref", extra=instance_cfg("alpha", 0, 2)),
          daemons(devices="ref", extra=instance_cfg("beta", 1, 2)),
          daemons(devices="ref")]
    rxs = [Receiver(d) for d in ds]
    rxs[0].settle()
    imgs = frames(3)
    for k, d in enumerate(ds):
        tx = Sender(d)
        tx.start(series_id=7)
        for i in range(k, len(imgs), 2):
            tx.image(i, imgs[i], series_id=7)
        tx.end(series_id=7)
    want = [("alpha", 0, 2), ("beta", 1, 2), (None, 0, 1)]
    for d, rx, (name, shard, shards) in zip(ds, rxs, want):
        msgs = rx.collect_until_end()
        kinds = [m["type"] for m in msgs]
        assert "start" in kinds and "result" in kinds and "end" in kinds, kinds
        if name is None:
            name = msgs[0]["instance"]
            assert name.endswith(":%d" % d.ports["ctl"]), name
        for m in msgs:
            if m["type"] in ("start", "result", "end"):
                assert (m["instance"], m["shard"], m["shards"]) == (name, shard, shards), m["type"]
        st = d.status()
        assert (st["instance"], st["shard"], st["shards"]) == (name, shard, shards)


def test_shard_not_below_shards_is_refused(daemons, tmpdir_):
    """instance.shard must be below instance.shards: the daemon refuses to start, naming it."""
    import subprocess

    cfg = os.path.join(tmpdir_, "bad.yaml")
    ports = {k: td.free_port() for k in ("in", "out", "ctl")}
    with open(cfg, "w") as f:
        f.write(td.config_text(ports, devices="ref", extra=instance_cfg("x", 3, 3)))
    r = subprocess.run([td.FAID, "-c", cfg], capture_output=True, text=True, timeout=td.LONG)
    assert r.returncode != 0
    assert "instance.shard" in r.stderr and "below instance.shards" in r.stderr, r.stderr
