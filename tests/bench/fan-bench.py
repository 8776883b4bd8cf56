#!/usr/bin/env python3
"""fan-bench.py: faid-fan alone against the one-connection ZeroMQ ceiling of the same run
(issue 18: the fan-out alone >= 95 % of that ceiling), with the control rows that tell a slow
sender or a slow receiver from a slow fan-out. Measures, never asserts on time.

Every row sends the same frames (PRESET, DISTINCT distinct bslz4 frames cycled, a header part and
the frame: what `faidctl replay` sends) and counts from the first message its receivers got to
the last (connection setup left out). The first three rows are paired: the ceiling, replay -> C
and fan io=N run in turn REPEAT times, each run printed, the table giving their medians and, as
issue 18's figure, the median of the fan/ceiling ratios of the same runs, and each run line the
sender's own rate (replay's first image sent to its last written out: the same window in both
rows, a check of the receivers'); the other rows are single runs against those medians. Every
receiver allocates alike (freed memory kept, as faid-fan does: before, the C sink faulted each
message in afresh and the ceiling's receiver did not):

  ceiling         `faid-bench --zmq-ceiling`: a C PUSH thread -> a C PULL thread, one tcp
                  loopback connection, one I/O thread each side: what one connection carries;
  replay -> C     `faidctl replay` -> one C PULL sink (`faid-bench --zmq-sink`), no fan-out:
                  the sender of the fan-out rows against the ceiling's sender;
  fan io=N        `faidctl replay` -> faid-fan (fan.io_threads N, the last entry of IO_THREADS)
                  -> SINKS C instance sinks (`faid-bench --fan-sink`: hello, credit every
                  CREDIT_EVERY images with a window of WINDOW, as faid does, then only receive
                  and release): the fan-out alone; ratio to the ceiling (issue 18's figure) and
                  to `replay -> C` (the fan-out's own share);
  replay -> py    the same into one Python (pyzmq) PULL sink (SINK_CONTROL_PY=1): whether a
                  Python receiver could take the whole stream (the sinks of earlier runs were
                  Python);
  fan io=M        one single-run row per other entry of IO_THREADS;
  fan py          the paired fan row's set-up with Python instance sinks (PY_SINKS=1);
  fan + tee       the paired fan row's set-up with fan.tee_endpoint (PUSH) and one C PULL sink
                  on it (TEE=1): the facility's writer takes a full copy, every byte is written
                  twice by faid-fan; the tee sink's messages and rate, tee_sent / tee_dropped.

Each fan row also prints every sink's images and its own first-to-last rate, and the fan-out's
status (routed, dropped, lost, its I/O threads); a row whose frames did not all arrive says so.

Environment: FAID_BIN (default build/bin), FAID_FAN (the faid-fan binary, default
FAID_BIN/faid-fan: another build's, to compare; IO_THREADS="" for one without fan.io_threads),
FRAMES (default 3000), REPEAT (paired runs, default 3), PRESET (default eiger_4m:
2.69 MB frames), DISTINCT (8), SINKS (4), IO_THREADS (default "1 4": the fan rows; "" = one row
with faid-fan's default), POLICY (blocks), BLOCK (16), WINDOW (64), CREDIT_EVERY (8),
SINK_CONTROL_PY (1), PY_SINKS (1), TEE (1), FAN_PERF (a file: `perf record -g` of faid-fan during the
first paired fan row, its report next to it as FILE.txt, `perf stat --per-thread` (page faults, CPU
time, context switches) as FILE.stat), TIMEOUT (s per step, default 300). Prints one
table (also to OUT/fan-bench.txt when OUT is set); exit status 0 when every step ran and every
frame reached its receivers."""
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import msgpack
import zmq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("FAID_BIN", os.path.join(ROOT, "build", "bin"))
FRAMES = int(os.environ.get("FRAMES", "3000"))
PRESET = os.environ.get("PRESET", "eiger_4m")
DISTINCT = int(os.environ.get("DISTINCT", "8"))
SINKS = int(os.environ.get("SINKS", "4"))
IO_THREADS = os.environ.get("IO_THREADS", "1 4").split() or [""]
POLICY = os.environ.get("POLICY", "blocks")
BLOCK = int(os.environ.get("BLOCK", "16"))
WINDOW = int(os.environ.get("WINDOW", "64"))
CREDIT_EVERY = int(os.environ.get("CREDIT_EVERY", "8"))
SINK_CONTROL_PY = os.environ.get("SINK_CONTROL_PY", "1") == "1"
PY_SINKS = os.environ.get("PY_SINKS", "1") == "1"
TEE = os.environ.get("TEE", "1") == "1"
FAN_PERF = os.environ.get("FAN_PERF", "")
REPEAT = max(1, int(os.environ.get("REPEAT", "3")))
FAN_IO = IO_THREADS[-1]  # the paired runs' fan.io_threads
TIMEOUT = float(os.environ.get("TIMEOUT", "300"))
OUT = os.environ.get("OUT", "")
BENCH = os.path.join(BIN, "faid-bench")
FAN = os.environ.get("FAID_FAN", os.path.join(BIN, "faid-fan"))


def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SENDER_RATE = {}  # endpoint -> replay's own rate (its "rate:" line)


def replay(endpoint):
    """faidctl replay of the run's frames; returns its exit status. Its own rate (frames/s from
    its first image sent to the last one written out, the queue flushed: the same window in
    every row, on the sender's side) goes to SENDER_RATE[endpoint]."""
    r = subprocess.run([os.path.join(BIN, "faidctl"), "replay", "--to", endpoint, "--frames",
                        str(FRAMES), "--preset", PRESET, "--distinct", str(DISTINCT), "--quiet",
                        "--timeout", str(int(TIMEOUT))], capture_output=True, text=True,
                       timeout=TIMEOUT + 30)
    if r.returncode:
        print("fan-bench: replay failed:", r.stdout[-500:], r.stderr[-500:], file=sys.stderr)
    for line in r.stdout.splitlines():
        if line.startswith("rate: "):
            SENDER_RATE[endpoint] = float(line.split()[1])
    return r.returncode


def py_pull_sink(endpoint, n, out):
    """A plain PULL sink in Python: receives n messages, (count, first, last) to out."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.bind(endpoint)
    got, first, last = 0, None, None
    t_end = time.monotonic() + TIMEOUT
    while got < n and time.monotonic() < t_end:
        if s.poll(100):
            s.recv_multipart(copy=False)
            now = time.monotonic_ns()
            first = first or now
            last = now
            got += 1
    out.put({"name": "py", "messages": got, "first_ns": first or 0, "last_ns": last or 0})
    s.close(linger=0)
    ctx.term()


def py_fan_sink(endpoint, name, out, stop):
    """One instance as the link sees it, in Python: hello, credit as it releases images."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.RCVHWM, 0)
    s.connect(endpoint)
    done = 0

    def send(typ):
        s.send(msgpack.packb({"type": typ, "instance": name, "config_hash": "bench",
                              "window": WINDOW, "done": done}))

    send("hello")
    first, last = None, None
    last_credit = time.monotonic()
    while not stop.is_set():
        if s.poll(50):
            parts = s.recv_multipart(copy=False)
            route = msgpack.unpackb(parts[0].bytes)
            if route.get("type") == "route" and route.get("kind") == "image":
                now = time.monotonic_ns()
                first = first or now
                last = now
                done += 1
                if done % CREDIT_EVERY == 0:
                    send("credit")
                    last_credit = time.monotonic()
        if time.monotonic() - last_credit > 0.1:
            send("credit")
            last_credit = time.monotonic()
    out.put({"name": name, "messages": done, "first_ns": first or 0, "last_ns": last or 0})
    s.close(linger=0)
    ctx.term()


def span_rate(rows):
    """Messages over the span from the first one any receiver got to the last."""
    n = sum(r["messages"] for r in rows)
    firsts = [r["first_ns"] for r in rows if r["messages"]]
    lasts = [r["last_ns"] for r in rows if r["messages"]]
    if n < 2 or not firsts or max(lasts) <= min(firsts):
        return n, None
    return n, (n - 1) / ((max(lasts) - min(firsts)) / 1e9)


def own_rate(r):
    if r["messages"] < 2 or r["last_ns"] <= r["first_ns"]:
        return None
    return (r["messages"] - 1) / ((r["last_ns"] - r["first_ns"]) / 1e9)


def control_c(tmp):
    """replay -> one C PULL sink."""
    ep = "tcp://127.0.0.1:%d" % port()
    js = os.path.join(tmp, "sink_c.json")
    sink = subprocess.Popen([BENCH, "--zmq-sink", "--bind", "--endpoint", ep, "--frames",
                             str(FRAMES + 2), "--timeout", str(int(TIMEOUT)), "--json", js],
                            stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    rc = replay(ep)
    src = sink.wait(TIMEOUT + 30)
    r = json.load(open(js)) if os.path.exists(js) else {"messages": 0}
    # the series' start and end are messages too: FRAMES + 2, the images' span is the same
    return {"rows": [r], "sender": SENDER_RATE.get(ep),
            "ok": rc == 0 and src == 0 and r["messages"] == FRAMES + 2}


def control_py():
    """replay -> one Python PULL sink."""
    ep = "tcp://127.0.0.1:%d" % port()
    out = mp.Queue()
    p = mp.Process(target=py_pull_sink, args=(ep, FRAMES + 2, out))
    p.start()
    time.sleep(0.5)
    rc = replay(ep)
    r = out.get(timeout=TIMEOUT)
    p.join(30)
    return {"rows": [r], "ok": rc == 0 and r["messages"] == FRAMES + 2}


def fan_row(tmp, io, sink_kind, perf, tee=False):
    p = {k: port() for k in ("in", "inst", "out", "ctl", "tee")}
    ep = {k: "tcp://127.0.0.1:%d" % v for k, v in p.items()}
    cmd = [FAN, "--set", "input.endpoint=" + ep["in"],
           "--set", "fan.instances_endpoint=" + ep["inst"],
           "--set", "fan.output_endpoint=" + ep["out"],
           "--set", "fan.control_endpoint=" + ep["ctl"],
           "--set", "fan.policy=" + POLICY, "--set", "fan.block=%d" % BLOCK,
           "--set", "fan.buffer_bytes=4294967296", "--log-level", "warn"]
    if io:
        cmd += ["--set", "fan.io_threads=" + io]
    tee_sink, tee_js = None, os.path.join(tmp, "tee_%s.json" % (io or "default"))
    if tee:  # the facility's writer on the tee: one C PULL sink taking every message
        cmd += ["--set", "fan.tee_endpoint=" + ep["tee"]]
        tee_sink = subprocess.Popen([BENCH, "--zmq-sink", "--endpoint", ep["tee"], "--frames",
                                     str(FRAMES + 2), "--timeout", str(int(3 * TIMEOUT)),
                                     "--json", tee_js], stdout=subprocess.DEVNULL)
    fan = subprocess.Popen(cmd)
    ctx = zmq.Context()

    def status():
        s = ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(ep["ctl"])
        s.send(msgpack.packb({"cmd": "status"}))
        if not s.poll(5000):
            raise TimeoutError("faid-fan does not answer")
        st = msgpack.unpackb(s.recv())
        s.close()
        return st

    sinks, jsons, stop, out = [], [], mp.Event(), mp.Queue()
    for k in range(SINKS):
        name = "sink%d" % k
        if sink_kind == "c":
            js = os.path.join(tmp, "%s_%s.json" % (name, io or "default"))
            jsons.append(js)
            sinks.append(subprocess.Popen(
                [BENCH, "--fan-sink", "--endpoint", ep["inst"], "--name", name, "--window",
                 str(WINDOW), "--credit-every", str(CREDIT_EVERY), "--timeout",
                 str(int(3 * TIMEOUT)), "--json", js], stdout=subprocess.DEVNULL))
        else:
            pr = mp.Process(target=py_fan_sink, args=(ep["inst"], name, out, stop))
            pr.start()
            sinks.append(pr)
    t_end = time.monotonic() + TIMEOUT
    while len([i for i in status()["instances"] if i["state"] == "live"]) < SINKS:
        assert time.monotonic() < t_end, "sinks never joined"
        time.sleep(0.1)
    rec = []
    if perf and not shutil.which("perf"):
        print("fan-bench: FAN_PERF set but no perf here: not recorded", file=sys.stderr)
        perf = ""
    if perf:
        rec = [subprocess.Popen(["perf", "record", "-g", "-F", "1999", "-o", perf, "-p",
                                 str(fan.pid)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL),
               subprocess.Popen(["perf", "stat", "-e", "page-faults,task-clock,context-switches",
                                 "--per-thread", "-o", perf + ".stat", "-p", str(fan.pid)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        time.sleep(0.5)
    rc = replay(ep["in"])
    # every image routed, then accounted for by its sink (credit back to the window: done = sent)
    while time.monotonic() < t_end:
        st = status()
        c = st["counters"]
        live = [i for i in st["instances"] if i["state"] == "live"]
        if c["routed"] + c["dropped"] >= FRAMES and all(i["credit"] == i["window"] for i in live):
            break
        time.sleep(0.1)
    for p in rec:
        p.send_signal(signal.SIGINT)
        p.wait(60)
    st = status()
    if sink_kind == "c":
        for s in sinks:
            s.send_signal(signal.SIGTERM)
        sink_rcs = [s.wait(60) for s in sinks]
        rows = [json.load(open(js)) if os.path.exists(js) else {"name": "?", "messages": 0,
                                                                 "first_ns": 0, "last_ns": 0}
                for js in jsons]
    else:
        stop.set()
        rows = [out.get(timeout=30) for _ in sinks]
        for s in sinks:
            s.join(30)
        sink_rcs = [s.exitcode for s in sinks]
    tee_row = None
    if tee_sink:
        try:
            tee_rc = tee_sink.wait(30)
        except subprocess.TimeoutExpired:
            tee_sink.send_signal(signal.SIGTERM)
            tee_rc = tee_sink.wait(30)
        tee_row = json.load(open(tee_js)) if os.path.exists(tee_js) else {"messages": 0}
        tee_row["rc"] = tee_rc
    fan.send_signal(signal.SIGTERM)
    fan_rc = fan.wait(60)
    n = sum(r["messages"] for r in rows)
    c = st["counters"]
    if tee_row:
        sink_rcs.append(0 if tee_row["messages"] == FRAMES + 2 else 1)
    return {"rows": sorted(rows, key=lambda r: r["name"]), "status": st, "fan_rc": fan_rc,
            "sender": SENDER_RATE.get(ep["in"]),
            "tee": tee_row,
            "ok": n == FRAMES and rc == 0 and fan_rc == 0 and c["dropped"] == 0
            and c["lost"] == 0 and all(x == 0 for x in sink_rcs)}


def perf_report(perf):
    try:
        r = subprocess.run(["perf", "report", "-i", perf, "--no-children", "--sort",
                            "comm,dso,symbol", "--stdio", "-g", "none", "--percent-limit", "1"],
                           capture_output=True, text=True, timeout=300)
        open(perf + ".txt", "w").write(r.stdout)
        return perf + ".txt"
    except (OSError, subprocess.SubprocessError) as e:
        return "perf report failed: %s" % e


def ceiling_run(tmp):
    """One run of the ceiling; its JSON (msg_per_s, message_bytes, ...) or None."""
    cj = os.path.join(tmp, "ceiling.json")
    r = subprocess.run([BENCH, "--zmq-ceiling", "--frames", str(FRAMES), "--preset", PRESET,
                        "--distinct", str(DISTINCT), "--json", cj], capture_output=True,
                       text=True, timeout=TIMEOUT)
    if r.returncode != 0:
        print("fan-bench: ceiling failed:", r.stderr, file=sys.stderr)
        return None
    return json.load(open(cj))


def fan_note(fr, tee):
    n, _ = span_rate(fr["rows"])
    cnt = fr["status"]["counters"]
    per = ", ".join("%s %d (%s/s)" % (x["name"], x["messages"],
                                       "-" if own_rate(x) is None else "%.0f" % own_rate(x))
                    for x in fr["rows"])
    note = ("%d of %d images; routed %d, dropped %d, lost %d; per sink %s; faid-fan rc %d"
            % (n, FRAMES, cnt["routed"], cnt["dropped"], cnt["lost"], per, fr["fan_rc"]))
    if tee:
        t = fr["tee"]
        note += ("; tee sink %d of %d messages (%s/s), tee_sent %d, tee_dropped %d"
                 % (t["messages"], FRAMES + 2,
                    "-" if own_rate(t) is None else "%.0f" % own_rate(t),
                    cnt["tee_sent"], cnt["tee_dropped"]))
    return note


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def main():
    tmp = tempfile.mkdtemp(prefix="fan-bench-")
    fmt = (lambda x: "-" if x is None else "%.2f" % x)
    rate_s = (lambda x: "-" if x is None else "%.0f" % x)
    ok = True
    # The paired runs: the ceiling, replay -> one C sink and replay -> faid-fan -> SINKS C sinks,
    # in turn, REPEAT times; each ratio is of runs next to each other in time, the figure of
    # issue 18 the median of the fan/ceiling ratios.
    runs, first_ceiling, perf_txt = [], None, None
    for k in range(REPEAT):
        ce = ceiling_run(tmp)
        if ce is None:
            return 1
        first_ceiling = first_ceiling or ce
        d = control_c(tmp)
        _, dr = span_rate(d["rows"])
        perf = FAN_PERF if FAN_PERF and k == 0 else ""
        fr = fan_row(tmp, FAN_IO, "c", perf, False)
        if perf and os.path.exists(perf):
            perf_txt = perf_report(perf)
        _, frr = span_rate(fr["rows"])
        ok = ok and d["ok"] and fr["ok"]
        runs.append({"ceiling": ce["msg_per_s"], "direct": dr, "fan": frr, "d": d, "fr": fr})
        line = ("run %d: ceiling %s, replay -> C sink %s (%s; the sender's own %s), replay -> "
                "faid-fan -> %d C sinks %s (%s x ceiling, %s x direct; the sender's own %s)%s"
                % (k + 1, rate_s(ce["msg_per_s"]), rate_s(dr),
                   fmt(dr / ce["msg_per_s"] if dr else None), rate_s(d.get("sender")), SINKS,
                   rate_s(frr), fmt(frr / ce["msg_per_s"] if frr else None),
                   fmt(frr / dr if frr and dr else None), rate_s(fr.get("sender")),
                   "" if d["ok"] and fr["ok"] else " NOT ALL FRAMES ARRIVED"))
        print(line, flush=True)
        runs[-1]["line"] = line
    c = median(r["ceiling"] for r in runs)
    rc_rate = median(r["direct"] for r in runs)
    fan_x = median(r["fan"] / r["ceiling"] if r["fan"] else None for r in runs)
    dir_x = median(r["direct"] / r["ceiling"] if r["direct"] else None for r in runs)
    fan_d = median(r["fan"] / r["direct"] if r["fan"] and r["direct"] else None for r in runs)
    last = runs[-1]
    results = [
        ("ceiling: C PUSH -> C PULL, 1 connection (median of %d)" % REPEAT,
         {"ok": True}, c, 1.0, None, ""),
        ("replay -> C PULL sink, no fan-out (median of %d)" % REPEAT,
         {"ok": all(r["d"]["ok"] for r in runs)}, rc_rate, dir_x, 1.0,
         "the sender alone: %d messages (start, images, end) per run" % (FRAMES + 2)),
        ("replay -> faid-fan io_threads %s -> %d C sinks (median of %d)"
         % (FAN_IO or "default", SINKS, REPEAT),
         {"ok": all(r["fr"]["ok"] for r in runs)}, median(r["fan"] for r in runs), fan_x, fan_d,
         "issue 18's figure: the median of the fan/ceiling ratios of the same runs; last run: "
         + fan_note(last["fr"], False)),
    ]
    # single runs, against the medians above
    if SINK_CONTROL_PY:
        ctp = control_py()
        n, rp = span_rate(ctp["rows"])
        results.append(("replay -> Python PULL sink, no fan-out", ctp, rp, None, None,
                        "a Python receiver taking the whole stream: %d messages" % n))
    rows = [(io, "c", False) for io in IO_THREADS if io != FAN_IO]
    if PY_SINKS:
        rows.append((FAN_IO, "python", False))
    if TEE:
        rows.append((FAN_IO, "c", True))
    for io, kind, tee in rows:
        fr = fan_row(tmp, io, kind, "", tee)
        n, rate = span_rate(fr["rows"])
        results.append(("replay -> faid-fan io_threads %s -> %d %s sinks%s"
                        % (io or "default", SINKS, "C" if kind == "c" else "Python",
                           " + tee -> C PULL sink" if tee else ""), fr, rate, None, None,
                        fan_note(fr, tee)))
    lines = ["fan-bench (%s, %d frames of %.2f MB, %d distinct, %d sinks, policy %s, block %d, "
             "window %d, %d paired runs; %d CPUs, load average %.1f at the end)"
             % (PRESET, FRAMES, first_ceiling["message_bytes"] / 1e6, DISTINCT, SINKS, POLICY,
                BLOCK, WINDOW, REPEAT, os.cpu_count() or 0, os.getloadavg()[0])]
    lines += [r["line"] for r in runs]
    lines += ["| row | msg/s | x ceiling | x replay -> C | frames / notes |",
              "|---|---|---|---|---|"]
    for name, res, rate, xc, xd, note in results:
        ok = ok and res["ok"]
        xc = xc if xc is not None else (rate / c if rate and c else None)
        xd = xd if xd is not None else (rate / rc_rate if rate and rc_rate else None)
        lines.append("| %s | %s | %s | %s | %s%s |"
                     % (name, rate_s(rate), fmt(xc), fmt(xd), note,
                        "" if res["ok"] else " NOT ALL FRAMES ARRIVED"))
    if perf_txt:
        lines.append("perf of faid-fan in the first paired fan row: %s" % perf_txt)
    text = "\n".join(lines)
    print(text)
    if OUT:
        os.makedirs(OUT, exist_ok=True)
        open(os.path.join(OUT, "fan-bench.txt"), "w").write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
