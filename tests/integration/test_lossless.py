"""The lossless output channel (proto/PROTOCOL.md 3.6) and the stop's accounting, with the real
daemon on loopback: a consumer that stalls and vanishes loses nothing (what it had not
acknowledged is re-sent to the next session, with the same msg_number); with no consumer at all
the PUB stream keeps flowing and faid holds the messages until one comes; a second consumer is
refused with a message and takes over when the first leaves; a shutdown that gives up lossless
messages counts them per kind, apart from the frame counters; SIGTERM reads what the input
already holds and accounts for every frame of it.

The consumers here are written from the protocol text (LosslessReceiver in test_daemon.py) or
are the real clients (faidctl sub). Nothing asserts on time: timeouts only turn hangs into
failures."""

import json
import os
import subprocess
import threading
import time

import msgpack
import pytest  # noqa: F401
import zmq

from test_daemon import (FAIDCTL, LONG, LosslessReceiver, Receiver, Sender, daemons,  # noqa: F401
                         ep, frames, tmpdir_)


def stream(d, n, series_id=1, start=True, end=True):
    """Sends a series from a thread (the sender blocks while faid pushes back)."""
    imgs = frames(3)

    def run():
        tx = Sender(d)
        if start:
            tx.start(series_id=series_id, nimages=n)
        for i in range(n):
            tx.image(i, imgs[i % 3], series_id=series_id)
        if end:
            tx.end(series_id=series_id)
        tx.sock.close(LONG * 1000)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def wait_for(pred, what, timeout=LONG):
    t_end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > t_end:
            raise TimeoutError(what)
        time.sleep(0.02)


def lossless_status(d):
    return d.status()["lossless"]


@pytest.mark.parametrize("name", ["archive", None])
def test_consumer_stalls_vanishes_and_comes_back(daemons, name):
    # The consumer reads 200 results, stalls 1.5 s (faid keeps sending into its ZeroMQ buffers,
    # its credit is large), then vanishes without a word: what sat in its buffers dies with it.
    # A new consumer (same name: takes over at once; anonymous: accepted once faid sees the old
    # connection gone) gets everything that was not acknowledged, with the same msg_numbers.
    n = 1500
    d = daemons(lossless=True)
    a = LosslessReceiver(d, name=name)
    a.settle()
    tx = stream(d, n)
    wait_for(lambda: len(a.of("result")) >= 200, "first consumer got 200 results")
    a.stall()
    time.sleep(1.5)
    a.vanish()
    b = LosslessReceiver(d, name=name)
    b.collect_until_end()
    tx.join(LONG)
    wait_for(lambda: lossless_status(d)["held"] == 0, "every message acknowledged")

    first = {m["msg_number"]: m for m in a.msgs}
    second = {m["msg_number"]: m for m in b.msgs}
    # The first consumer acknowledged everything it read, so nothing it read comes again, and
    # together they hold the whole stream exactly once: start, 1500 results, end.
    assert not set(first) & set(second)
    assert sorted(first) + sorted(second) == list(range(n + 2))
    ids = sorted(m["frame_id"] for m in list(first.values()) + list(second.values())
                 if m["type"] == "result")
    assert ids == list(range(n))
    assert b.duplicates == 0

    st = d.status()
    c, ll = st["counters"], st["lossless"]
    assert c["received"] == c["processed"] == n and c["dropped"] == 0 and c["failed"] == 0
    assert ll["sent"] == n + 2 and ll["acked"] == n + 2, ll
    assert ll["given_up"] == {"start": 0, "result": 0, "end": 0, "error": 0}, ll
    assert ll["sessions"] == 2 and ll["state"] == "active"
    # What the first consumer had in its buffers (and what was on the way) went out again.
    assert ll["resent"] >= 1, ll
    assert c["lossless_sent"] == n + 2
    b.close()
    assert d.terminate() == 0


def test_no_consumer_pub_keeps_flowing(daemons):
    # Nobody reads the lossless channel: live monitors still get every result (the pipeline
    # never waits on the lossless send while the buffer has room); faid holds the messages and
    # hands all of them to the consumer that comes later.
    n = 1500
    d = daemons(lossless=True, output_extra="  sndhwm: 100000\n")
    rx = Receiver(d, hwm=0)
    rx.settle()
    tx = stream(d, n)
    rx.collect_until_end()
    tx.join(LONG)
    assert sorted(r["frame_id"] for r in rx.of("result")) == list(range(n))
    # The publisher sends on PUB before it files the message in the lossless buffer, so the
    # `end` seen on PUB may precede its entry there by a moment (seen once under ASan: held 1501).
    wait_for(lambda: lossless_status(d)["held"] == n + 2, "start, results and end held")
    ll = lossless_status(d)
    assert ll["state"] == "waiting" and ll["consumer"] == ""
    assert ll["held"] == n + 2 and ll["sent"] == 0 and ll["held_bytes"] > 0
    assert ll["given_up"] == {"start": 0, "result": 0, "end": 0, "error": 0}

    late = LosslessReceiver(d, credit=64)
    msgs = late.collect_until_end()
    assert [m["msg_number"] for m in msgs] == list(range(n + 2))
    assert sorted(m["frame_id"] for m in msgs if m["type"] == "result") == list(range(n))
    wait_for(lambda: lossless_status(d)["held"] == 0, "every message acknowledged")
    ll = lossless_status(d)
    assert ll["acked"] == n + 2 and ll["resent"] == 0 and ll["held_bytes"] == 0
    late.close()
    assert d.terminate() == 0


def test_full_buffer_drop_oldest_counts_what_it_gives_up(daemons):
    # A 64 kB buffer holds a few dozen results: with overflow drop_oldest and nobody reading,
    # the oldest messages are given up (counted per kind), the PUB stream and the frame counters
    # are untouched, and the consumer that comes later gets exactly the newest ones, in order.
    n = 200
    d = daemons(lossless=True, output_extra="  sndhwm: 100000\n  lossless_buffer: 65536\n"
                                            "  lossless_overflow: drop_oldest\n")
    rx = Receiver(d, hwm=0)
    rx.settle()
    stream(d, n).join(LONG)
    rx.collect_until_end()
    assert sorted(r["frame_id"] for r in rx.of("result")) == list(range(n))
    # The publisher hands a message to the lossless channel after its PUB send, so the end can
    # reach the PUB subscriber before the channel counts it (once in the ASan pass of CI: 42 held
    # + 159 given up = 201 of 202): wait for the channel to have seen every message.
    wait_for(lambda: (lambda ll: ll["held"] + sum(ll["given_up"].values()))(lossless_status(d))
             >= n + 2, "every message of the series in the lossless channel")
    ll = lossless_status(d)
    given = sum(ll["given_up"].values())
    assert ll["overflow"] == "drop_oldest" and given > 0 and ll["given_up"]["start"] == 1
    assert ll["held"] + given == n + 2 and 0 < ll["held_bytes"] <= 65536
    c = d.status()["counters"]
    assert c["received"] == c["processed"] == n and c["dropped"] == 0
    late = LosslessReceiver(d)
    msgs = late.collect_until_end()
    assert [m["msg_number"] for m in msgs] == list(range(n + 2 - ll["held"], n + 2))
    late.close()
    assert d.terminate() == 0


def test_second_consumer_refused_until_the_first_leaves(daemons):
    # One consumer at a time: a second one (faidctl sub, the C client library) is refused with
    # a message naming the holder, gets nothing meanwhile, and takes over when the first says
    # bye, receiving exactly what was published after the first left.
    d = daemons(lossless=True)
    a = LosslessReceiver(d, name="archive-a")
    a.settle()
    b = subprocess.Popen([FAIDCTL, "sub", "--from", ep(d.ports["lossless"]), "--lossless",
                          "--name", "archive-b", "--count", "20", "--timeout", str(LONG),
                          "--json", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: lossless_status(d)["refused"] >= 1, "second consumer refused")
        ll = lossless_status(d)
        assert ll["consumer"] == "archive-a" and ll["sessions"] == 1
        stream(d, 10, series_id=1).join(LONG)
        a.collect_until_end()
        assert sorted(r["frame_id"] for r in a.of("result")) == list(range(10))
        a.close()
        stream(d, 20, series_id=2).join(LONG)
        out, err = b.communicate(timeout=LONG)
    finally:
        if b.poll() is None:
            b.kill()
    assert b.returncode == 0, err
    assert "refused" in err and "archive-a" in err, err
    msgs = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    results = [m for m in msgs if m["type"] == "result"]
    assert [(r["series_id"], r["frame_id"]) for r in results] == [(2, i) for i in range(20)]
    assert "lossless: sessions 1, refused" in out
    ll = lossless_status(d)
    assert ll["sessions"] == 2 and ll["refused"] >= 1
    wait_for(lambda: lossless_status(d)["held"] <= 1, "faidctl acknowledged what it took")
    assert d.terminate() == 0


def drain_sub(rx, quiet_s=2.0):
    msgs = []
    while rx.sock.poll(int(quiet_s * 1000)):
        topic, body = rx.sock.recv_multipart()
        msgs.append(msgpack.unpackb(body))
    return msgs


def test_shutdown_gives_up_lossless_messages_apart_from_frames(daemons):
    # No consumer and a short shutdown timeout: the 52 stream messages (start, 50 results, end)
    # are given up at exit and counted per kind; the frame counters stay exact.
    n = 50
    d = daemons(lossless=True,
                output_extra="  sndhwm: 100000\n  lossless_shutdown_timeout: 0.5\n")
    rx = Receiver(d, hwm=0)
    rx.settle()
    stream(d, n).join(LONG)
    d.wait_counters(lambda c: c["processed"] == n, "all frames processed")
    assert d.terminate() == 0
    last = [m for m in drain_sub(rx) if m["type"] == "stats"][-1]
    c = last["counters"]
    assert c["received"] == c["processed"] == n
    assert c["dropped"] == 0 and c["failed"] == 0
    assert c["received"] == c["processed"] + c["failed"] + c["dropped"]
    assert sum(last["drops"].values()) == 0, last["drops"]
    assert last["lossless"]["given_up"] == {"start": 1, "result": n, "end": 1, "error": 0}
    assert last["lossless"]["held"] == 0
    assert "given up (start 1, result 50, end 1, error 0)" in d.logtext()


def test_sigterm_reads_what_the_input_holds(daemons):
    # A slow worker (20 ms a frame) and a sender far ahead of it: at SIGTERM most frames still sit
    # in ZeroMQ's buffers and the blocked sender. faid processes them for input.stop_timeout,
    # then reads the rest without processing: every frame sent is accounted for in the end
    # message and the counters (received = processed + dropped, the late ones as input.shutdown).
    n = 300
    d = daemons(depth=4, input_extra="  stop_timeout: 1.0\n",
                output_extra="  sndhwm: 100000\n", env={"FAID_TEST_WORKER_DELAY_US": "20000"})
    rx = Receiver(d, hwm=0)
    rx.settle()
    tx = stream(d, n, series_id=9, end=False)
    d.wait_counters(lambda c: c["processed"] >= 5, "some frames processed")
    assert d.terminate() == 0
    tx.join(LONG)
    msgs = drain_sub(rx)
    end = [m for m in msgs if m["type"] == "end"][-1]
    results = [m for m in msgs if m["type"] == "result"]
    assert end["reason"] == "shutdown" and not end["incomplete"]
    assert end["frames_received"] == n, end
    assert end["frames_processed"] + end["frames_dropped"] == n and end["frames_failed"] == 0
    assert end["frames_dropped"] > 0  # 300 frames at 20 ms need 6 s, the stop timeout is 1 s
    assert len(results) == end["frames_processed"]
    assert sorted(r["frame_id"] for r in results) == list(range(len(results)))
    last = [m for m in msgs if m["type"] == "stats"][-1]
    c = last["counters"]
    assert c["received"] == n and c["received"] == c["processed"] + c["failed"] + c["dropped"]
    assert last["drops"]["input.shutdown"] == end["frames_dropped"]


def test_sigterm_drain_is_not_ended_by_a_full_queue(daemons):
    # The stop's drain counted the input as empty once no message had come for 50 ms, and that
    # clock also ran while faid itself waited for a free slot of a full queue. With a worker
    # slower than that (100 ms a frame, depth 2) the drain ended after one message: 13 of 60
    # frames sent before the stop were read, 47 never (and under load the 20 ms worker of the
    # test above lost 77 of 300 the same way, 1 run in 8). Every frame sent before the stop
    # must be read and accounted for.
    n = 60
    d = daemons(depth=2, input_extra="  stop_timeout: 1.0\n",
                output_extra="  sndhwm: 100000\n", env={"FAID_TEST_WORKER_DELAY_US": "100000"})
    rx = Receiver(d, hwm=0)
    rx.settle()
    tx = stream(d, n, series_id=9, end=False)
    tx.join(LONG)  # the sender handed all n frames to ZeroMQ before the stop
    d.wait_counters(lambda c: c["processed"] >= 2, "some frames processed")
    assert d.terminate() == 0
    msgs = drain_sub(rx)
    end = [m for m in msgs if m["type"] == "end"][-1]
    assert end["frames_received"] == n, end
    assert end["frames_processed"] + end["frames_dropped"] == n and end["frames_dropped"] > 0
    c = [m for m in msgs if m["type"] == "stats"][-1]["counters"]
    assert c["received"] == n == c["processed"] + c["failed"] + c["dropped"], c
