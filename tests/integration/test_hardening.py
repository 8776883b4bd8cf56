"""Hardening of the daemon against hostile or careless peers and operators (issue 10): each test
reproduces one defect from outside, the way it was found, with the real daemon and real clients.

Nothing asserts on time: timeouts only turn hangs into failures. Helpers come from
test_daemon.py (same folder)."""

import json
import os
import signal
import socket
import subprocess
import time

import msgpack
import zmq

from test_daemon import (FAID, FAIDCTL, LONG, ROWS, COLS, Daemon, Receiver, Sender,  # noqa: F401
                         config_text, daemons, ep, frames, header, tmpdir_)

# A control request that hangs would hang the test: well under LONG, far over any real answer.
PROMPT = 20


def with_key(text, section, line):
    """Inserts `line` (indented) right after the `section:` line of a config text."""
    head = section + ":\n"
    assert head in text
    return text.replace(head, head + "  " + line + "\n", 1)


def test_fifo_paths_are_refused_and_control_keeps_answering(daemons, tmpdir_):
    # Defect 4: a reload naming a FIFO (the file itself, or its mask / dark / flat / .poni) froze
    # the main thread in open(): control stopped answering and SIGTERM was ignored until
    # something wrote to the FIFO. Each must be refused with a message naming the path.
    d = daemons(npt=64)
    fifo = os.path.join(tmpdir_, "pipe.fifo")
    os.mkfifo(fifo)
    base = config_text(d.ports, npt=64)
    cases = {
        "file": None,
        "mask": with_key(base, "detector", "mask: " + fifo),
        "dark": with_key(base, "integration", "dark: " + fifo),
        "flat": with_key(base, "integration", "flat: " + fifo),
        "poni": with_key(base, "geometry", "poni_file: " + fifo),
    }
    for what, text in cases.items():
        if text is None:
            path = fifo
        else:
            path = os.path.join(tmpdir_, "with_%s.yaml" % what)
            with open(path, "w") as f:
                f.write(text)
        r = d.request({"cmd": "reload", "path": path}, timeout=PROMPT)
        assert r["ok"] is False, (what, r)
        assert fifo in r["error"] and "FIFO" in r["error"], (what, r["error"])
        st = d.request({"cmd": "status"}, timeout=PROMPT)
        assert st["ok"] and st["setup_version"] == 1, (what, st)
    # SIGHUP re-reads the start file, which is fine: the daemon is still whole.
    d.proc.send_signal(signal.SIGHUP)
    assert d.request({"cmd": "ping"}, timeout=PROMPT)["ok"]
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(LONG) == 0


def test_reload_path_does_not_replace_the_start_file(daemons, tmpdir_):
    # Defect 8: `faidctl reload PATH` silently became the file every later SIGHUP re-read.
    # Now PATH is read once; SIGHUP and a reload without path re-read the -c file, and status
    # names both the file in force and the start file.
    d = daemons(npt=64)
    other = os.path.join(tmpdir_, "other.yaml")
    with open(other, "w") as f:
        f.write(config_text(d.ports, npt=96))
    st = d.status()
    assert st["config_file"] == d.config and st["config_start_file"] == d.config
    r = subprocess.run([FAIDCTL, "reload", "--control", "tcp://127.0.0.1:%d" % d.ports["ctl"],
                        os.path.relpath(other)], capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 0, r.stderr
    st = d.status()
    assert st["setup_version"] == 2
    assert st["config_file"] == other and st["config_start_file"] == d.config, st
    assert "npt: 96" in d.request({"cmd": "config"})["config"]
    assert d.request({"cmd": "config"})["source"] == other

    d.proc.send_signal(signal.SIGHUP)
    t_end = time.monotonic() + LONG
    while d.status()["setup_version"] != 3:
        assert time.monotonic() < t_end, "SIGHUP reload did not happen:\n" + d.logtext()
        time.sleep(0.05)
    st = d.status()
    assert st["config_file"] == d.config and st["config_start_file"] == d.config, st
    assert "npt: 64" in d.request({"cmd": "config"})["config"]

    assert d.request({"cmd": "reload", "path": other})["ok"]
    assert d.request({"cmd": "reload"})["setup_version"] == 5
    st = d.status()
    assert st["config_file"] == d.config and "npt: 64" in d.request({"cmd": "config"})["config"]
    assert d.terminate() == 0


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/%d/status" % pid)


def test_oversized_message_is_dropped_at_the_socket(daemons):
    # Defect 1: input.max_frame_bytes was checked after libzmq had received the whole message, so
    # one huge message raised faid's peak memory by its size. Now ZMQ_MAXMSGSIZE (the limit
    # plus 1 MiB for headers) drops the sender's connection before the part is allocated; the
    # closed connection is counted and logged, the daemon keeps working.
    d = daemons()  # input.max_frame_bytes: 200000
    st = d.status()
    assert st["input"]["max_message_bytes"] == 200000 + (1 << 20)
    # One good frame first, so that the first frame's own costs (kernel builds) are in the peak.
    Sender(d).image(1, frames(1)[0])
    d.wait_counters(lambda c: c["processed"] == 1, "first frame processed")
    hwm0 = vm_hwm_kib(d.proc.pid)
    big = 64 << 20
    tx = Sender(d)
    tx.raw([header(1, shape=(ROWS, COLS)), b"\0" * big])
    t_end = time.monotonic() + LONG
    while True:
        st = d.status()
        if st["input"]["closed"] >= 1 or st["counters"]["failed"] >= 1:
            break
        assert time.monotonic() < t_end, "the oversized message had no effect: %r" % st
        time.sleep(0.1)
    grown = vm_hwm_kib(d.proc.pid) - hwm0
    assert st["counters"]["failed"] == 0 and st["counters"]["received"] == 1, st["counters"]
    assert st["input"]["closed"] >= 1, st["input"]
    assert grown < (big >> 10) // 4, "peak RSS grew by %d KiB for a %d KiB message" % (
        grown, big >> 10)
    assert "closed" in d.logtext() and str(200000 + (1 << 20)) in d.logtext()
    # Control answers (a request far over its own 64 KiB cap is dropped, not read) ...
    junk = d.ctx.socket(zmq.REQ)
    junk.setsockopt(zmq.LINGER, 0)
    junk.connect(ep(d.ports["ctl"]))
    junk.send(b"\0" * (8 << 20))
    assert d.request({"cmd": "ping"}, timeout=PROMPT)["ok"]
    junk.close()
    # ... and a good frame from a new connection is still processed.
    Sender(d).image(2, frames(1)[0])
    d.wait_counters(lambda c: c["processed"] == 2, "good frame processed")
    assert d.terminate() == 0


def test_second_instance_on_the_same_ipc_endpoints_refuses_to_start(tmpdir_):
    # Defect 5: libzmq binds ipc:// by unlinking the socket file, so a second faid on the same
    # ipc endpoints silently took input and control over from the first. Now the second exits
    # with a message naming the endpoint, and the first keeps serving.
    eps = {k: "ipc://%s/%s.sock" % (tmpdir_, k) for k in ("in", "out", "ctl")}
    text = config_text({"in": 1, "out": 2, "ctl": 3, "lossless": 4})
    for k, tcp in (("in", ep(1)), ("out", ep(2)), ("ctl", ep(3))):
        text = text.replace('"%s"' % tcp, '"%s"' % eps[k])
    cfg = os.path.join(tmpdir_, "ipc.yaml")
    with open(cfg, "w") as f:
        f.write(text)
    env = dict(os.environ, POCL_MAX_PTHREAD_COUNT="2")
    ctx = zmq.Context()
    first = subprocess.Popen([FAID, "-c", cfg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env, text=True)
    try:
        def ping():
            s = ctx.socket(zmq.REQ)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(eps["ctl"])
            try:
                s.send(b"status")
                if not s.poll(PROMPT * 1000):
                    return None
                return msgpack.unpackb(s.recv())
            finally:
                s.close()

        t_end = time.monotonic() + LONG
        while ping() is None:
            assert first.poll() is None and time.monotonic() < t_end, "first faid did not start"
        second = subprocess.run([FAID, "-c", cfg], capture_output=True, text=True, env=env,
                                timeout=LONG)
        assert second.returncode != 0, second.stderr
        assert eps["in"] in second.stderr and "in use" in second.stderr, second.stderr
        # The first still owns its sockets: control answers and a frame is processed.
        assert first.poll() is None
        tx = ctx.socket(zmq.PUSH)
        tx.setsockopt(zmq.LINGER, 1000)
        tx.connect(eps["in"])
        tx.send_multipart([header(0), frames(1)[0].tobytes()])
        t_end = time.monotonic() + LONG
        while True:
            st = ping()
            assert st is not None, "the first faid lost its control socket"
            if st["counters"]["processed"] == 1:
                break
            assert time.monotonic() < t_end, st["counters"]
            time.sleep(0.1)
        tx.close()
        first.send_signal(signal.SIGTERM)
        assert first.wait(LONG) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        ctx.destroy(linger=0)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def nofile_limits(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return soft, hard
    raise AssertionError("no descriptor limit in /proc/%d/limits" % pid)


def test_idle_connections_do_not_exhaust_descriptors(daemons):
    # Defect 7: a few hundred idle TCP connections on the data port exhausted faid's descriptors
    # (soft limit 1024; 256 here to keep the test small): libzmq retried the failing accept() in
    # a loop (3 s of CPU in 5 s) and control was unreachable. faid raises its soft limit to the
    # hard one at start; the connections are counted; CPU stays low and control answers.
    d = daemons(wrapper=("sh", "-c", 'ulimit -Sn 256 && exec "$@"', "sh"))
    soft, hard = nofile_limits(d.proc.pid)
    assert soft == hard, (soft, hard)
    conns = []
    try:
        for _ in range(400):
            conns.append(socket.create_connection(("127.0.0.1", d.ports["in"]), timeout=PROMPT))
        t_end = time.monotonic() + LONG
        while d.request({"cmd": "status"}, timeout=PROMPT)["input"]["connections"] < 400:
            assert time.monotonic() < t_end, d.status()["input"]
            time.sleep(0.2)
        cpu0, wall0 = cpu_seconds(d.proc.pid), time.monotonic()
        time.sleep(3)
        cpu, wall = cpu_seconds(d.proc.pid) - cpu0, time.monotonic() - wall0
        # Idle with 400 connections: a spinning accept loop would use a whole core.
        assert cpu < 0.5 * wall, "faid used %.2f s of CPU in %.2f s" % (cpu, wall)
        st = d.request({"cmd": "status"}, timeout=PROMPT)
        assert st["ok"] and st["input"]["accept_failed"] == 0, st["input"]
        # Frames still get through beside the idle connections.
        Sender(d).image(0, frames(1)[0])
        d.wait_counters(lambda c: c["processed"] == 1, "frame processed")
        # faid drops connections that never complete the ZeroMQ handshake after 5 s (libzmq's
        # default is 30 s): a behaviour bound, checked with a wide margin, not a speed.
        t_end = time.monotonic() + 20
        while d.request({"cmd": "status"}, timeout=PROMPT)["input"]["closed"] < 400:
            assert time.monotonic() < t_end, d.status()["input"]
            time.sleep(0.2)
    finally:
        for c in conns:
            c.close()
    assert d.terminate() == 0


def test_descriptor_hard_limit_is_survived(daemons):
    # Defect 7 at the hard limit itself: with soft = hard = 256 descriptors, 600 TCP connections
    # to the data port. At the limit libzmq's listeners retry a failing accept() without pause:
    # tests/soak/probe_defects.py saw 4.0 s of CPU in 5.4 s and control answering after 5.2 s
    # (256 descriptors, 600 connections), and control's own connection had to wait for a
    # descriptor freed by the 5 s handshake timeout. So faid keeps the input below the limit:
    # input connections beyond input.connection_cap (the limit less a reserve of 192 here) are
    # shut down as soon as the main thread reads their accept event (input.over_cap).
    # The cap acts after the accept: while a burst arrives, libzmq's I/O thread can accept beyond
    # it before the main thread has shut the first down (235 against 164 and accept failures in
    # 5 of 15 runs of ASan builds, 171 in 1 of 3 runs of the normal build on an idle 2-core
    # machine, 2026-11-26; docs/operations.md). What must hold: control answers throughout; once
    # the burst has been met the cap holds with no accept failing any more and no busy loop while
    # the 600 connections stay; afterwards the input works again with every counter consistent.
    d = daemons(wrapper=("sh", "-c", 'ulimit -n 256 && exec "$@"', "sh"))
    assert nofile_limits(d.proc.pid) == ("256", "256")
    assert d.status()["input"]["connection_cap"] == 256 - 192
    conns = []
    try:
        for _ in range(600):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", d.ports["in"]))
            conns.append(c)

        def status():
            # control answers within PROMPT at every sample, burst or not
            return d.request({"cmd": "status"}, timeout=PROMPT)["input"]

        t_end = time.monotonic() + LONG
        while status()["over_cap"] == 0:
            assert time.monotonic() < t_end, status()
            time.sleep(0.2)
        # The burst met: the cap holds (give or take one accept backlog, 100, that libzmq takes
        # before faid shuts them) once libzmq has reported the connections faid shut as closed
        # and the kernel's backlog of pending connects is drained, i.e. no accept for a second
        # (under ASan on a loaded 2-core machine the drain went on after the count first fell
        # under the bound: 172 against 164 a moment later, CI of 2026-11-26).
        t_end = time.monotonic() + LONG
        prev = None
        while True:
            st = status()
            if st["connections"] <= st["connection_cap"] + 100 and st["accepted"] == prev:
                break
            prev = st["accepted"]
            assert time.monotonic() < t_end, st
            time.sleep(1.0)
        # With the 600 connections still there: no accept fails any more and no thread spins
        # (a spinning accept loop would use a core), and control keeps answering.
        failed0 = status()["accept_failed"]
        cpu0, wall0 = cpu_seconds(d.proc.pid), time.monotonic()
        while time.monotonic() - wall0 < 3:
            st = status()
            assert st["connections"] <= st["connection_cap"] + 100, st
            time.sleep(0.2)
        cpu, wall = cpu_seconds(d.proc.pid) - cpu0, time.monotonic() - wall0
        assert cpu < 0.5 * wall, "faid used %.2f s of CPU in %.2f s at the limit" % (cpu, wall)
        st = status()
        assert st["accept_failed"] == failed0, (failed0, st)
        assert st["accepted"] >= 64 and st["over_cap"] > 0, st
    finally:
        for c in conns:
            c.close()
    # Recovery: every accepted connection is closed again and frames get through.
    t_end = time.monotonic() + LONG
    while True:
        st = d.request({"cmd": "status"}, timeout=PROMPT)["input"]
        if st["connections"] == 0 and st["closed"] == st["accepted"]:
            break
        assert time.monotonic() < t_end, st
        time.sleep(0.2)
    Sender(d).image(0, frames(1)[0])
    d.wait_counters(lambda c: c["processed"] == 1, "frame processed after the flood")
    assert d.terminate() == 0


def packb_with_raw_str(obj, placeholder, raw):
    """msgpack of obj where the str `placeholder` is replaced by the bytes `raw` as a str (which
    Python's packer cannot produce from a str)."""
    b = msgpack.packb(obj)
    ph = placeholder.encode()
    assert len(ph) == len(raw) < 32
    return b.replace(bytes([0xa0 | len(ph)]) + ph, bytes([0xa0 | len(raw)]) + raw)


def header_with_user_data(frame_id, raw):
    """An image header whose user_data is the msgpack bytes `raw`, as given (hand-made values
    that Python's packer cannot produce: invalid UTF-8, 3000 levels)."""
    b = header(frame_id, user_data="@@@@@@@@")
    return b.replace(b"\xa8@@@@@@@@", raw)


def test_every_output_decodes_with_strict_msgpack_and_json(tmpdir_):
    # Defect 2: a series_unique_id of bytes ff fe made start, result, end, stats and the control
    # status undecodable for Python's msgpack with default settings until the next series;
    # user_data nested 3000 deep gave Python a StackError; faidctl sub --json wrote invalid
    # UTF-8. Now faid refuses such input with an error naming the key and writes only valid
    # UTF-8 (a file name that is not UTF-8, here the configuration's folder, becomes U+FFFD).
    # Every message below is decoded with msgpack.unpackb's defaults (Receiver does).
    odd = os.path.join(tmpdir_, os.fsdecode(b"cfg-\xff\xfe"))
    os.makedirs(odd)
    d = Daemon(odd, lossless=True)
    try:
        d.wait_ready()
        sub = subprocess.Popen([FAIDCTL, "sub", "--from", ep(d.ports["out"]), "--json",
                                "--until-end", "--timeout", str(LONG), "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        rx = Receiver(d)
        lx = Receiver(d, lossless=True)
        rx.settle()
        tx = Sender(d)
        img = frames(1)[0]
        bad = [
            packb_with_raw_str(dict(type="start", protocol_version=1, series_id=2,
                                    series_unique_id="@@"), "@@", b"\xff\xfe"),
            packb_with_raw_str(dict(type="image", protocol_version=1, series_id=2, frame_id=7,
                                    series_unique_id="@@", shape=[ROWS, COLS], dtype="uint16",
                                    encoding="none"), "@@", b"\xff\xfe"),
            header_with_user_data(8, b"\x81\xa1d" * 3000 + b"\xa6bottom"),
            header_with_user_data(9, b"\x81\xa1k\xa2\xff\xfe"),  # {"k": str of ff fe}
            header_with_user_data(10, b"\x81\x01\xa1x"),  # {1: "x"}: a key that is not text
        ]
        for k, h in enumerate(bad):
            tx.raw([h] if k == 0 else [h, img.tobytes()])
        tx.start(series_id=3, series_unique_id="série-α", user_data={"ok": "ü"})
        for i in range(3):
            tx.image(i, img, series_id=3, user_data={"i": i, "t": "ß"})
        tx.end(series_id=3)
        msgs = rx.collect_until_end()
        lx.collect_until_end()
        # A stats message after the series (they carry the status entries).
        t_end = time.monotonic() + LONG
        while not rx.of("stats") or rx.of("stats")[-1]["counters"]["processed"] < 3:
            assert time.monotonic() < t_end, "no stats message"
            if rx.sock.poll(1000):
                topic, body = rx.sock.recv_multipart()
                rx.msgs.append(msgpack.unpackb(body))
        errors = rx.of("error")
        assert len(errors) == len(bad), [e["message"] for e in errors]
        text = " | ".join(e["message"] for e in errors)
        assert text.count("UTF-8") == 3 and "nested deeper" in text and "not text" in text, text
        start = [m for m in msgs if m["type"] == "start" and m.get("series_id") == 3][0]
        assert start["series_unique_id"] == "série-α" and start["user_data"] == {"ok": "ü"}
        res = sorted(rx.of("result"), key=lambda r: r["frame_id"])
        assert [r["user_data"] for r in res] == [{"i": i, "t": "ß"} for i in range(3)]
        assert "\ufffd" in start["config"]  # the configuration's folder name, made text
        st = d.status()
        assert st["config_file"] == os.path.join(tmpdir_, "cfg-\ufffd\ufffd", "faid.yaml"), st
        assert st["series_unique_id"] == "série-α"
        # faidctl: JSON lines that are valid UTF-8 and valid JSON.
        out, err = sub.communicate(timeout=LONG)
        assert sub.returncode == 0, err
        text = out.decode("utf-8")  # strict: raises on invalid UTF-8
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        kinds = [m["type"] for m in lines]
        assert kinds.count("error") == len(bad) and kinds.count("result") == 3, kinds
        assert "missing frames: 0" in text
        r = subprocess.run([FAIDCTL, "status", "--json", "--control", ep(d.ports["ctl"])],
                           capture_output=True, timeout=LONG)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.decode("utf-8"))["config_file"].endswith("faid.yaml")
        assert d.terminate() == 0
    finally:
        d.stop()

