"""Hardening of the lossless channel (proto/PROTOCOL.md 3.6) against faulty and hostile peers
(issue 20, defects 1, 2, 3, 4 and 6): each test reproduces one defect from outside, the way it
was found, with the real daemon on loopback and consumers written from the protocol text.

Memory is measured from outside: the daemon's resident size (VmRSS of /proc/PID/status). The
bounds are generous (a few times output.lossless_buffer, tens of MB) and still far below what
each defect cost. Nothing asserts on time: timeouts only turn hangs into failures; where a count
is bounded per interval, the bound is computed from the time the test actually took."""

import multiprocessing
import os
import re
import threading
import time

import msgpack
import zmq

from test_daemon import (LONG, LosslessReceiver, Receiver, Sender, daemons, ep,  # noqa: F401
                         frames, tmpdir_)

MiB = 1 << 20
# Under AddressSanitizer freed blocks wait in its quarantine (up to 256 MB) and count as
# resident: the memory bounds get that much room there (+27 MB seen for 320,000 refused hellos),
# and the counts asserted beside them are what still tells.
QUARANTINE = 64 * MiB if os.environ.get("FAID_SANITIZED") == "1" else 0


def rss(d):
    """The daemon's resident size in bytes, read from outside."""
    with open("/proc/%d/status" % d.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for faid")


def lossless(d):
    return d.status()["lossless"]


def wait_for(pred, what, timeout=LONG):
    t_end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > t_end:
            raise TimeoutError(what)
        time.sleep(0.02)


def stream(d, n, series_id=1):
    """A series of n frames sent from a thread (the sender blocks while faid pushes back)."""
    imgs = frames(3)

    def run():
        tx = Sender(d)
        tx.start(series_id=series_id, nimages=n)
        for i in range(n):
            tx.image(i, imgs[i % 3], series_id=series_id)
        tx.end(series_id=series_id)
        tx.sock.close(LONG * 1000)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def dealer(d, name=None, rcvhwm=None):
    s = d.ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    if rcvhwm is not None:
        s.setsockopt(zmq.RCVHWM, rcvhwm)
    if name:
        s.setsockopt(zmq.ROUTING_ID, name.encode())
    s.connect(ep(d.ports["lossless"]))
    return s


def recv_topic(s, topic, timeout=LONG):
    """Reads from s until a message of `topic` comes; returns its body."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if s.poll(200):
            t, body = s.recv_multipart()
            if t.decode() == topic:
                return msgpack.unpackb(body)
    raise TimeoutError("no %s" % topic)


def drain(s):
    """Every message already in s's buffers, by topic."""
    got = {}
    while True:
        try:
            parts = s.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return got
        got[parts[0].decode()] = got.get(parts[0].decode(), 0) + 1


HELLO = msgpack.packb({"type": "hello", "credit": 1})


def test_repeated_hello_queues_no_second_copy(daemons):
    """Defect 1: a consumer that repeats `hello` without reading got everything held re-sent
    at every hello although the earlier copies still sat in its queue (1 MiB buffer, 2,000
    hellos: RSS 13 -> 1,872 MB). A hello on the connection that holds them queues nothing
    again; the channel's memory stays within a few times output.lossless_buffer."""
    n, hellos = 300, 100
    d = daemons(lossless=True, npt=1000,
                output_extra="  sndhwm: 100000\n  lossless_buffer: 1048576\n"
                             "  lossless_overflow: drop_oldest\n")
    stream(d, n).join(LONG)
    d.wait_counters(lambda c: c["processed"] == n, "all frames processed")
    wait_for(lambda: lossless(d)["held"] > 0 and lossless(d)["held"] + sum(
        lossless(d)["given_up"].values()) == n + 2, "the stream held or given up")
    held = lossless(d)["held"]
    assert lossless(d)["held_bytes"] > MiB // 2  # the buffer is well filled: copies would show
    before = rss(d)
    greedy = dealer(d, name="greedy", rcvhwm=1)
    for k in range(hellos):
        greedy.send(msgpack.packb({"type": "hello", "credit": 65536}))
        wait_for(lambda: lossless(d)["sessions"] == k + 1, "hello %d handled" % k)
        # Paced like the consumer that found it (2,000 hellos in 4 s): hellos that arrive
        # together start one session after the other within one read, and only the last sends.
        time.sleep(0.06)
    grown = rss(d) - before
    ll = lossless(d)
    print("held %d (%d bytes), RSS %.1f -> %.1f MB" % (held, ll["held_bytes"], before / 1e6,
                                                      (before + grown) / 1e6))
    # Each held message went onto the connection once; the repeated hellos queued none again.
    assert ll["sent"] + ll["resent"] <= held, ll
    assert ll["not_resent"] >= (hellos - 1) * held // 2, ll
    assert grown < 4 * MiB + 16 * MiB + QUARANTINE, "RSS grew by %.1f MB" % (grown / 1e6)
    greedy.close()
    assert d.terminate() == 0


def _flood(port, peers, stop):
    """A process of `peers` DEALERs sending hello flat out until stop is set."""
    ctx = zmq.Context()
    socks = []
    for _ in range(peers):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, 0)
        s.connect(ep(port))
        socks.append(s)
    while not stop.is_set():
        for s in socks:
            for _ in range(64):
                try:
                    s.send(HELLO, zmq.NOBLOCK)
                except zmq.Again:
                    break
    ctx.destroy(linger=0)


def test_hello_flood_does_not_stop_publishing(daemons):
    """Defect 2 (the lossless channel's part): the publisher read the lossless ROUTER until it
    was empty, so 64 peers sending `hello` flat out stopped all publishing for 45 s (a PUB
    subscriber got 0 of 4,500 results). The channel reads a bounded number of consumer messages
    per pass of the publisher: results reach the PUB subscriber and the good lossless consumer
    while the flood goes on."""
    n = 300
    d = daemons(lossless=True, output_extra="  sndhwm: 100000\n")
    good = LosslessReceiver(d, name="good")
    good.settle()
    rx = Receiver(d, hwm=0)
    rx.settle()
    stop = multiprocessing.Event()
    floods = [multiprocessing.Process(target=_flood, args=(d.ports["lossless"], 32, stop),
                                      daemon=True) for _ in range(2)]
    for p in floods:
        p.start()
    try:
        wait_for(lambda: lossless(d)["refused"] > 10000, "the flood under way")
        tx = stream(d, n)
        # Both ends are read while the flood still runs: it stops only once they are complete.
        rx.collect_until_end()
        good.collect_until_end()
        flooding = all(p.is_alive() for p in floods)
    finally:
        stop.set()
        for p in floods:
            p.join(LONG)
    tx.join(LONG)
    assert flooding
    assert sorted(r["frame_id"] for r in rx.of("result")) == list(range(n))
    assert sorted(r["frame_id"] for r in good.of("result")) == list(range(n))
    ll = lossless(d)
    print("%d results during the flood; %d refused, %d passes left input for the next"
          % (n, ll["refused"], ll["input_deferred"]))
    assert ll["input_deferred"] > 0, ll  # the bound was reached, and results still flowed
    good.close()
    assert d.terminate() == 0


def test_refused_peer_answered_at_most_once_per_interval(daemons):
    """Defect 3: every `hello` from a refused peer queued a `refused` reply (about 300 bytes,
    up to 66,560 per peer): 16 peers that never read cost 309 MB. A refused peer is answered at
    most once per second, and at most 64 peers per second are: the rest is counted
    (lossless.refusals_unanswered), not queued."""
    peers, each = 16, 20000
    d = daemons(lossless=True)
    holder = LosslessReceiver(d, name="holder")
    holder.settle()
    before = rss(d)
    t0 = time.monotonic()
    socks = [dealer(d) for _ in range(peers)]
    for s in socks:
        for _ in range(each):
            s.send(HELLO)
    wait_for(lambda: lossless(d)["refused"] == peers * each, "every hello refused")
    elapsed = time.monotonic() - t0
    grown = rss(d) - before
    print("%d refused hellos in %.1f s: RSS %.1f -> %.1f MB" % (peers * each, elapsed,
                                                              before / 1e6, (before + grown) / 1e6))
    # Replies went out at most once per peer per second; everything else was only counted.
    for s in socks:
        assert drain(s).get("refused", 0) <= 2 + elapsed
    assert grown < 16 * MiB + QUARANTINE, "RSS grew by %.1f MB" % (grown / 1e6)
    ll = lossless(d)
    answered = ll["refused"] - ll["refusals_unanswered"]
    assert 1 <= answered <= peers * (2 + elapsed), (answered, elapsed, ll)
    assert ll["consumer"] == "holder" and ll["sessions"] == 1
    holder.close()
    assert d.terminate() == 0


def test_refused_hellos_probe_the_consumer_at_most_once_per_interval(daemons):
    """Defect 4: every refused `hello` also sent a `ping` to the active consumer (11.1 M pings
    in the 64-peer flood; the consumer received 50 of 6,002 series messages in 73 s). faid
    probes the active consumer at most once per 0.25 s, counts the probes (lossless.pings), and
    the consumer gets the whole series meanwhile."""
    n, hellos = 100, 20000
    d = daemons(lossless=True, output_extra="  sndhwm: 100000\n")
    holder = LosslessReceiver(d, name="holder")
    holder.settle()
    t0 = time.monotonic()
    tx = stream(d, n)
    other = dealer(d)
    for _ in range(hellos):
        other.send(HELLO)
    wait_for(lambda: lossless(d)["refused"] == hellos, "every hello refused")
    tx.join(LONG)
    # A second series after the flood: once its end is in, every ping sent before is read.
    stream(d, 1, series_id=2).join(LONG)
    holder.collect_until_end(n_ends=2)
    elapsed = time.monotonic() - t0
    print("%d refused hellos in %.1f s: %d pings" % (hellos, elapsed, holder.pings))
    assert holder.pings <= 1 + 4 * (elapsed + 1), (holder.pings, elapsed)
    ll = lossless(d)
    assert ll["pings"] == holder.pings, (holder.pings, ll)
    assert sorted(r["frame_id"] for r in holder.of("result") if r["series_id"] == 1) == list(
        range(n))
    holder.close()
    other.close()
    assert d.terminate() == 0


def test_restarting_consumer_old_connection_ack_counts_for_it(daemons):
    """Defect 6: a consumer that reconnected under the same name within about 50 ms had its
    last `ack` arrive on the renamed old connection, where it was refused as a stranger's
    `hello` (112 of 150 acks refused, 892 re-sends; the consumer reached message 227 of 1,002).
    The old connection's last messages are applied for the consumer it was: nothing refused,
    and a consumer in a restart loop takes the whole stream."""
    # Each run takes 4 messages, acknowledges the last and exits; the next run connects under
    # the same name at once. Its credit covers the whole stream, so faid has nothing waiting to
    # send and serves the channel every 50 ms: the closed connection (its ack unread) and the
    # new one arrive within the same wait, and ZeroMQ gives the old one a made-up name.
    n, take, credit = 30, 4, 100
    d = daemons(lossless=True)
    stream(d, n).join(LONG)
    wait_for(lambda: lossless(d)["held"] == n + 2, "the stream held")
    last, runs = -1, 0
    while last < n + 1 and runs < 100:
        conn = dealer(d, name="restarting")
        conn.send(msgpack.packb({"type": "hello", "credit": credit}))
        runs += 1
        inst = recv_topic(conn, "welcome")["instance"]
        # `take` messages (re-sent ones it already has among them), unless the stream ends first.
        for _ in range(take):
            if last == n + 1:
                break
            assert conn.poll(LONG * 1000), "no message after %d" % last
            m = msgpack.unpackb(conn.recv_multipart()[1])
            last = max(last, m["msg_number"])
        conn.send(msgpack.packb({"type": "ack", "seq": last, "instance": inst}))
        conn.close(LONG * 1000)  # the ack is on its way before the socket goes
    assert last == n + 1, "the consumer reached message %d of %d in %d runs" % (last, n + 1, runs)
    wait_for(lambda: lossless(d)["held"] == 0, "every message acknowledged")
    ll = lossless(d)
    assert ll["refused"] == 0 and ll["acked"] == n + 2, ll
    assert ll["sessions"] == runs, ll
    print("%d runs; %d acks over a renamed connection; %d re-sends" % (runs, ll["old_connection"],
                                                                    ll["resent"]))
    assert d.terminate() == 0


def test_consumer_session_lines_are_rate_limited(daemons):
    """Defect 10 (the lossless channel's part, found by tests/soak/probe_defects2.py after the
    fixes): a consumer in a hello/bye loop wrote two INFO lines per cycle (session started,
    consumer said bye), 2,290 lines for 2,000 cycles. Both lines are rate-limited like the
    channel's other peer-driven lines: every session still shown or counted as suppressed."""
    cycles = 150
    d = daemons(lossless=True)
    t0 = time.monotonic()
    for _ in range(cycles):
        s = dealer(d, name="looping")
        s.send(msgpack.packb({"type": "hello", "credit": 10}))
        recv_topic(s, "welcome")
        s.send(msgpack.packb({"type": "bye"}))
        s.close(LONG * 1000)
    wait_for(lambda: lossless(d)["sessions"] == cycles and lossless(d)["state"] == "waiting",
             "every session started and ended")
    elapsed = time.monotonic() - t0
    assert d.terminate() == 0  # reports what is still suppressed
    d.log.flush()
    d.log.seek(0)
    log = d.log.read()

    def accounted(shown_re, fmt_head):
        shown = len(re.findall(shown_re, log))
        supp = sum(int(x) for x in re.findall(r"\((\d+) more like \"%s" % re.escape(fmt_head),
                                              log))
        return shown, supp

    starts = accounted(r"INFO  lossless: consumer looping (connected|started a new session)",
                       "consumer %s %s (credit")
    # A session ends with its bye, or is replaced by the next hello before the bye is read.
    ends = accounted(r"INFO  lossless: consumer looping (said bye|disconnected|is gone)",
                     "consumer %s %s; ")
    print("%d cycles in %.1f s: session lines %d shown + %d suppressed, end lines %d + %d"
          % (cycles, elapsed, starts[0], starts[1], ends[0], ends[1]))
    assert sum(starts) == cycles and 1 <= sum(ends) <= cycles, (starts, ends)
    # At most 5 a second per line and one count of the suppressed ones a second (faid_log.h);
    # 2 lines per cycle before.
    for shown, _ in (starts, ends):
        assert shown <= 6 * (elapsed + 2), (shown, elapsed)
