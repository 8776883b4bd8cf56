"""The Python package's merged view over several faid instances (issue 18 point 4,
faid.MergedSubscriber, `faid-sub --from A --from B ...`): real daemons on loopback, each fed its
own frames of one series by the test's senders as a fan-out would, and the C client's merge
(`faidctl sub --from x3 --json`) subscribed to the same stream at the same time: the two clients
must deliver the same messages, counters and merged end (proto/PROTOCOL.md 3.8)."""

import os
import subprocess
import sys
import time

import msgpack
import numpy as np
import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_daemon as td  # noqa: E402
from test_daemon import LONG, Receiver, Sender, daemons, ep, frames, tmpdir_  # noqa: E402,F401
from shards import (captured_series, dat_columns, instance_cfg, kill_last_mid_series,  # noqa: E402
                    peer_pub, read_until_start, replay, second_stalls, send_dealt, send_part,
                    sub_lines, sub_proc, three)

SRC = os.environ.get("FAID_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
sys.path.insert(0, os.path.join(SRC, "client", "python"))

import faid  # noqa: E402
from faid import Lost, MergedEnd, MergedSubscriber, Mismatch  # noqa: E402
from faid.merge import parse_lost  # noqa: E402
from faid.subscriber import BadMessage  # noqa: E402


def settled(sub, names):
    """Waits until the merged subscriber received a stats message of every instance (faid
    publishes stats every 0.5 s here): its subscriptions are in place."""
    seen = set()
    t_end = time.monotonic() + LONG
    while not set(names) <= seen:
        assert time.monotonic() < t_end, "no stats from %s" % (set(names) - seen)
        m = sub.recv(0.5)
        if isinstance(m, faid.Stats):
            seen.add(m.raw.get("instance"))


def collect(sub):
    got = list(sub.messages(timeout=LONG, until_end=True))
    assert got and isinstance(got[-1], MergedEnd), [m.type for m in got]
    return [m for m in got if m.type in ("start", "result", "end", "lost", "mismatch")]


def test_py_merge_equals_faidctl_merge(daemons, tmpdir_):
    """Three daemons (shards 0, 1, 2 of 3) each reduce frame % 3 of one series; MergedSubscriber
    and `faidctl sub --from x3 --json` subscribe to the same run: the Python merge gives the start
    once, every frame once and in frame order, one MergedEnd with the summed totals and nothing
    missing; frame by frame the same frames from the same instances with the same profiles as
    the C merge (its --out .dat files), and the same merged end, key for key."""
    ds = three(daemons)
    out = os.path.join(tmpdir_, "sub")
    p = sub_proc(ds, out)
    n = 12
    imgs = frames(n, seed=3)
    with MergedSubscriber([ep(d.ports["out"]) for d in ds]) as sub:
        settled(sub, ["i0", "i1", "i2"])
        Receiver(ds[0]).settle()  # faidctl's subscriptions too
        send_dealt(ds, imgs, 5, nimages=n)
        got = collect(sub)
        assert sub.late == 0 and sub.never_seen == 0
    lines, _, _ = sub_lines(p)
    kinds = [m.type for m in got]
    assert kinds == ["start"] + ["result"] * n + ["end"], kinds
    assert isinstance(got[0], faid.Start) and got[0].series_id == 5 and got[0].nimages == n
    results = got[1:-1]
    assert [r.frame_id for r in results] == list(range(n))
    assert all(isinstance(r, faid.Result) and not r.late for r in results)
    assert [r.raw["instance"] for r in results] == ["i%d" % (i % 3) for i in range(n)]
    end = got[-1]
    assert end.merged and end.instances == 3 and end.ended == 3 and not end.incomplete, end
    assert end.frames_received == n and end.frames_processed == n, end
    assert end.missing == 0 and end.missing_frames == [] and end.delivered == n, end

    # The C merge of the same run: the same stream.
    c = [m for m in lines if m["type"] in ("start", "result", "end")]
    assert [m["type"] for m in c] == kinds
    assert c[0]["config_hash"] == got[0].config_hash and c[0]["series_id"] == 5
    assert [(m["frame_id"], m["instance"], m["msg_number"]) for m in c[1:-1]] == \
        [(r.frame_id, r.raw["instance"], r.msg_number) for r in results]
    for r in results:
        cols = dat_columns(os.path.join(out, "series5_%05d.dat" % r.frame_id))
        assert np.array_equal(cols[:, 1].astype(np.float32), r.I), r.frame_id
        assert np.array_equal(cols[:, 2].astype(np.float32), r.sigma), r.frame_id
    assert c[-1] == end.raw, (c[-1], end.raw)


def test_py_merge_instance_killed(daemons, tmpdir_):
    """One of three instances is SIGKILLed mid-series: the merged end comes once the two others
    ended and the dead one fell silent (dead_after 1.5 s), with the frames it never reduced
    listed missing by id; every frame that was reduced comes once; the C merge of the same run
    ends the series the same way, key for key."""
    ds = three(daemons, "k")
    p = sub_proc(ds, None, "--dead-after", "1.5")
    n = 18
    imgs = frames(n, seed=4)
    with MergedSubscriber([ep(d.ports["out"]) for d in ds], dead_after=1.5) as sub:
        settled(sub, ["k0", "k1", "k2"])
        Receiver(ds[0]).settle()
        first, never = kill_last_mid_series(ds, imgs, 9)
        got = collect(sub)
    lines, _, _ = sub_lines(p)
    ids = [m.frame_id for m in got if m.type == "result"]
    assert sorted(ids) == sorted(set(range(n)) - set(never)) and len(ids) == len(set(ids)), ids
    ends = [m for m in got if isinstance(m, MergedEnd)]
    assert len(ends) == 1
    end = ends[0]
    assert end.instances == 3 and end.ended == 2 and end.silent == 1 and end.incomplete, end
    assert [i for a, b in end.missing_frames for i in range(a, b + 1)] == never, end
    assert end.missing == len(never) and end.frames_processed == n - len(never) - len(first)
    c_end = [m for m in lines if m["type"] == "end"]
    assert c_end == [end.raw], (c_end, end.raw)


def test_py_merge_fan_lost_and_mismatch(daemons, tmpdir_):
    """The test's PUB plays a third instance whose start has another config_hash (a Mismatch
    naming it and its endpoint; its results kept out, counted refused, their frames missing)
    and a fan-out whose `lost` report names instance f1: the report comes as a Lost and ends
    f1's part at once (f1 alive, dead_after far). The C merge, given the same peers, agrees."""
    ds = [daemons(devices="ref", extra=instance_cfg("f%d" % k, k, 3)) for k in range(2)]
    fan, fport, _ = peer_pub()
    rogue, rport, fake = peer_pub()
    p = sub_proc([*ds, fake], None, "--fan", ep(fport), "--dead-after", "60")
    n = 9
    imgs = frames(n, seed=7)
    eps = [ep(d.ports["out"]) for d in ds] + [ep(rport)]
    with MergedSubscriber(eps, fan=ep(fport), dead_after=60) as sub:
        settled(sub, ["f0", "f1"])
        time.sleep(0.5)  # the PUBs bound here: subscriptions in place (no stats to wait for)
        second_stalls(ds, imgs, 6, 3)
        got = []  # up to f1's frame 1, delivered in order after f0's frame 0
        while not any(m.type == "result" and m.frame_id == 1 for m in got):
            m = sub.recv(LONG)
            assert m is not None, [m.type for m in got]
            if m.type in ("start", "result"):
                got.append(m)
        start = got[0]
        assert isinstance(start, faid.Start), got
        read_until_start(p)
        time.sleep(0.5)  # f1's start and result reach the C merge before the report
        base = dict(start.raw, instance="rogue", shard=2, config_hash="ffffffffffffffff")
        res = {"type": "result", "series_id": 6, "series_unique_id": start.series_unique_id,
               "instance": "rogue", "shard": 2, "shards": 3, "frame_id": 2}
        rogue.send_multipart([b"start", msgpack.packb(base)])
        rogue.send_multipart([b"result", msgpack.packb(res)])
        rogue.send_multipart([b"end", msgpack.packb({"type": "end", "series_id": 6,
                                                     "instance": "rogue", "shard": 2,
                                                     "shards": 3, "frames_processed": 3})])
        fan.send_multipart([b"lost", msgpack.packb({"type": "lost", "series": 6,
                                                    "instance": "f1", "frames": [4, [7, 7]]})])
        got += collect(sub)
    _, _, err = sub_lines(p)
    fan.close(linger=0)
    rogue.close(linger=0)
    mism = [m for m in got if isinstance(m, Mismatch)]
    assert len(mism) == 1 and mism[0].instance == "rogue" and mism[0].endpoint == ep(rport), mism
    assert "instance rogue" in mism[0].message and "ffffffffffffffff" in mism[0].message
    assert "instance rogue" in err  # the C merge named it too
    lost = [m for m in got if isinstance(m, Lost)]
    assert len(lost) == 1 and lost[0].instance == "f1" and lost[0].nframes == 2, lost
    assert lost[0].ranges == [[4, 4], [7, 7]] and sub.fan_lost == 2
    end = got[-1]
    assert end.lost == 1 and end.ended == 1 and end.refused == 1, end
    listed = [i for a, b in end.missing_frames for i in range(a, b + 1)]
    assert listed == [2, 4, 5, 7, 8], end  # rogue's 2 refused, f1's lost and never sent
    assert sorted(m.frame_id for m in got if m.type == "result") == [0, 1, 3, 6]


def test_py_merge_reorders_and_counts(daemons, tmpdir_):
    """A real instance (even frames) and a peer replaying another real instance's results (odd
    frames) in reverse order, one of them twice, one with frame id 2**40. Two merged subscribers
    on the same peers: with the default window every frame comes in frame order; through a
    window of 2 the frames older than the window let through come at once marked late (none
    lost). Both drop the repeat (duplicates 1), deliver the huge id (untracked 1), miss nothing."""
    n = 10
    imgs = frames(n, seed=5)
    odd = list(range(1, n, 2))
    cap = captured_series(daemons, "b", 1, 2, odd, imgs, 3)
    start, results, end = cap[0], cap[1:-1], cap[-1]
    rev = sorted(results, key=lambda r: -r["frame_id"])
    a = daemons(devices="ref", extra=instance_cfg("a", 0, 2))
    pub, port, _ = peer_pub()
    eps = [ep(a.ports["out"]), ep(port)]
    with MergedSubscriber(eps, max_wait=None, dead_after=30) as wide, \
            MergedSubscriber(eps, window=2, dead_after=30) as narrow:
        settled(wide, ["a"])
        settled(narrow, ["a"])
        time.sleep(0.5)  # the PUB bound here: subscriptions in place
        send_part(a, range(0, n, 2), imgs, 3, nimages=n)
        replay(pub, [start, *rev, rev[0], dict(results[0], frame_id=2 ** 40), end])
        got_w, got_n = collect(wide), collect(narrow)
    pub.close(linger=0)
    ids_w = [m.frame_id for m in got_w if m.type == "result"]
    assert ids_w == list(range(n)) + [2 ** 40], ids_w
    ids_n = [m.frame_id for m in got_n if m.type == "result"]
    assert sorted(ids_n) == list(range(n)) + [2 ** 40] and ids_n != sorted(ids_n), ids_n
    lates = [m.frame_id for m in got_n if m.type == "result" and m.late]
    for e, late in ((got_w[-1], []), (got_n[-1], lates)):
        assert e.duplicates == 1 and e.untracked == 1 and e.missing == 0, e
        assert e.instances == 2 and e.ended == 2 and e.delivered == n + 1, e
        assert e.late == len(late), (e, late)
    assert lates and narrow.late == len(lates) and wide.late == 0, lates


def test_py_merge_refuses_oversized_messages(daemons, tmpdir_):
    """max_message_bytes: a peer sending a larger message (a result of frame 99 with 2 MB of
    user_data, the limit 1 MiB) loses its connection instead of having it read and held; libzmq
    does not make that connection again, so the peer falls silent: its part of the series ends
    after dead_after, its frames listed missing, frame 99 never delivered. With the limit above
    the message, frame 99 is delivered (the check is what keeps it out)."""
    n = 6
    imgs = frames(n, seed=8)
    odd = list(range(1, n, 2))
    cap = captured_series(daemons, "b", 1, 2, odd, imgs, 3)
    for limit in (1 << 20, 4 << 20):
        a = daemons(devices="ref", extra=instance_cfg("a", 0, 2))
        pub, port, _ = peer_pub()
        with MergedSubscriber([ep(a.ports["out"]), ep(port)], dead_after=2,
                              max_message_bytes=limit) as sub:
            settled(sub, ["a"])
            time.sleep(0.5)  # the PUB bound here: subscription in place
            replay(pub, [cap[0], dict(cap[1], frame_id=99, user_data=b"x" * (2 << 20))])
            time.sleep(0.5)
            send_part(a, range(0, n, 2), imgs, 3, nimages=n)
            replay(pub, cap[1:])  # under the 1 MiB limit never arrives: the connection is gone
            got = collect(sub)
        pub.close(linger=0)
        ids = sorted(m.frame_id for m in got if m.type == "result")
        end = got[-1]
        if limit < 2 << 20:
            assert ids == [0, 2, 4], ids
            assert end.ended == 1 and end.silent == 1, end
            assert [i for lo, hi in end.missing_frames for i in range(lo, hi + 1)] == odd, end
        else:
            assert ids == list(range(n)) + [99], ids
            assert end.ended == 2 and end.missing == 0, end
        a.stop()


def test_parse_lost_refuses_malformed_reports():
    """A fan-out's report is checked as the C client checks it: each fault named."""
    ok = parse_lost({"type": "lost", "series": 3, "instance": "a", "frames": [1, [4, 6]]})
    assert (ok.series, ok.nframes, ok.ranges) == (3, 4, [[1, 1], [4, 6]])
    for bad, why in [({"frames": []}, "missing key 'series'"),
                     ({"series": 1}, "missing key 'frames'"),
                     ({"series": -1, "frames": []}, "not an unsigned integer"),
                     ({"series": 1, "frames": 5}, "not an array"),
                     ({"series": 1, "frames": [[5, 2]]}, "frames[0] is not a range"),
                     ({"series": 1, "frames": ["x"]}, "neither a frame id nor a range"),
                     ({"series": 1, "instance": "x" * 200, "frames": []}, "instance")]:
        with pytest.raises(BadMessage, match=None) as e:
            parse_lost(bad)
        assert why in str(e.value), (bad, e.value)
    many = parse_lost({"series": 1, "frames": list(range(0, 600, 2))})
    assert many.nframes == 300 and len(many.ranges) == 256 and many.truncated


def test_faid_sub_several_from(daemons, tmpdir_):
    """`faid-sub --from A --from B --from C` prints the merged stream: one start, results in
    frame order, one merged end line, and the merged summary."""
    ds = three(daemons, "s")
    n = 6
    args = [sys.executable, "-m", "faid.cli", "--until-end", "--stats", "--timeout", str(LONG)]
    for d in ds:
        args += ["--from", ep(d.ports["out"])]
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "client", "python"))
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    seen, head = set(), []
    while seen != {"s0", "s1", "s2"}:  # its subscriptions are in place: stats of each
        ln = p.stdout.readline()
        assert ln, p.stderr.read()
        head.append(ln)
        if ln.startswith("stats ") and " instance=" in ln:
            seen.add(ln.split(" instance=")[1].split()[0])
    send_dealt(ds, frames(n, seed=9), 4, nimages=n)
    out, err = p.communicate(timeout=LONG)
    assert p.returncode == 0, err
    out = "".join(head) + out
    lines = out.splitlines()
    assert sum(ln.startswith("start ") for ln in lines) == 1, out
    frames_ = [int(ln.split("frame=")[1].split()[0]) for ln in lines if ln.startswith("result ")]
    assert frames_ == list(range(n)), out
    ends = [ln for ln in lines if ln.startswith("end ")]
    assert len(ends) == 1 and "merged instances=3" in ends[0] and "missing=0" in ends[0], out
    assert "merged: 3 instances, late results 0, frames never seen 0" in out, out


def test_subscriber_of_several_endpoints_names_merged():
    """Subscriber takes one endpoint: given a list it says to use MergedSubscriber (a list would
    otherwise reach libzmq as one malformed address)."""
    with pytest.raises(TypeError, match="MergedSubscriber"):
        faid.Subscriber(["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"])
    with pytest.raises(ValueError, match="window 0 frames"):
        MergedSubscriber(["tcp://127.0.0.1:1"], window=0)


def test_py_merge_refuses_malformed_messages(daemons):
    """A peer's message the C client refuses (an unknown type, a topic that is not its type, a
    frame id that is not an unsigned integer, a result without frame_id, bytes that are not
    msgpack) raises BadMessage naming the peer; the merge goes on: a real instance's series
    afterwards comes whole."""
    a = daemons(devices="ref", extra=instance_cfg("a", 0, 1))
    pub, port, _ = peer_pub()
    with MergedSubscriber([ep(a.ports["out"]), ep(port)], dead_after=1) as sub:
        settled(sub, ["a"])
        time.sleep(0.5)  # the PUB bound here: subscription in place
        bad = [(b"hello", {"type": "hello"}, 'unknown "type"'),
               (b"end", {"type": "result", "frame_id": 1}, 'topic "end" but type "result"'),
               (b"result", {"type": "result", "frame_id": -1}, '"frame_id" is not an unsigned'),
               (b"result", {"type": "result", "series_id": 1}, "without frame_id"),
               (b"result", None, "undecodable")]
        for topic, m, _ in bad:
            pub.send_multipart([topic, b"\xc1" if m is None else msgpack.packb(m)])
        for _, _, why in bad:
            with pytest.raises(BadMessage) as e:
                while True:
                    m = sub.recv(LONG)
                    assert m is not None
            assert why in str(e.value) and ep(port) in str(e.value), (why, e.value)
        n = 3
        send_part(a, range(n), frames(n, seed=2), 8, nimages=n)
        got = collect(sub)
    pub.close(linger=0)
    assert [m.frame_id for m in got if m.type == "result"] == list(range(n))
    assert got[-1].missing == 0 and got[-1].ended == 1, got[-1]


def test_py_merge_fan_routed_report(daemons, tmpdir_):
    """The fan-out's `routed` report (every image id of the series it handed out) makes the
    merged end exact without a frame count in the start: missing = (routed + lost) - delivered;
    a frame a `lost` report named whose result came anyway is delivered, not missing, and counted
    lost_delivered. The test's PUB plays the fan-out; the C merge, given the same peers, ends
    with the same map, key for key."""
    ds = [daemons(devices="ref", extra=instance_cfg("f%d" % k, k, 2)) for k in range(2)]
    fan = zmq.Context.instance().socket(zmq.PUB)
    fport = td.free_port()
    fan.bind(ep(fport))
    p = sub_proc(ds, None, "--fan", ep(fport), "--dead-after", "60")
    imgs = frames(8, seed=5)
    eps = [ep(d.ports["out"]) for d in ds]
    with MergedSubscriber(eps, fan=ep(fport), dead_after=60) as sub:
        settled(sub, ["f0", "f1"])
        time.sleep(0.5)  # the PUB bound here: subscriptions in place
        txs = [Sender(d) for d in ds]
        for tx in txs:
            tx.start(series_id=7)  # no nimages: only the report says which ids to expect
        for i in (0, 2, 4, 6):
            txs[0].image(i, imgs[i], series_id=7)
        for i in (1, 3):
            txs[1].image(i, imgs[i], series_id=7)
        for d, k in zip(ds, (4, 2)):
            d.wait_counters(lambda c, k=k: c["processed"] >= k, "the frames reduced")
        before = read_until_start(p)
        got = []
        while len([m for m in got if m.type == "result"]) < 6:
            m = sub.recv(LONG)
            assert m is not None, [m.type for m in got]
            got.append(m)
        time.sleep(0.5)  # every result reached the C merge too
        # routed, then lost, on one socket: a merge that saw the lost report has the routed one
        fan.send_multipart([b"routed", msgpack.packb({"type": "routed", "series": 7,
                                                      "frames": [[0, 9]],
                                                      "incomplete": False})])
        fan.send_multipart([b"lost", msgpack.packb({"type": "lost", "series": 7,
                                                    "instance": "f1", "reason": "timed out",
                                                    "frames": [[3, 3], [5, 5]]})])
        # both merges have the reports before any instance ends (same order for both)
        while not any(isinstance(m, Lost) for m in got):
            m = sub.recv(LONG)
            assert m is not None, [m.type for m in got]
            got.append(m)
        while True:
            ln = p.stdout.readline()
            assert ln, "faidctl sub ended before the lost report"
            before += ln
            if ln.startswith('{"type": "lost"'):
                break
        txs[0].end(series_id=7)  # f1 was reported lost: it never ends (as an instance killed)
        got += collect(sub)
    lines, _, _ = sub_lines(p, before)
    fan.close(linger=0)
    end = got[-1]
    assert isinstance(end, MergedEnd), got
    assert end.fan_report is True and end.expected == 10, end
    assert end.ended == 1 and end.lost == 1, end
    assert end.lost_delivered == 1, end
    assert end.missing_frames == [[5, 5], [7, 9]] and end.missing == 4, end
    c_end = [m for m in lines if m["type"] == "end"]
    assert len(c_end) == 1 and c_end[0] == end.raw, (c_end, end.raw)
