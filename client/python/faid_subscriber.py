#!/usr/bin/env python3
"""Example subscriber for faid's output (proto/PROTOCOL.md section 3), in a few lines of Python.

Every output message is [topic, body] with body a msgpack map whose first key is "type"; arrays are
maps {"dtype", "shape", "data"} that numpy reads with frombuffer. This script subscribes to the
monitoring PUB socket (or consumes the lossless channel with --lossless), prints one line per
result and a summary, and with --plot draws the latest profile with matplotlib (in a window, or
into a PNG file with --plot-file, which works without a display). With peak finding on
(peaks.algorithm in faid's configuration) each result line carries num_peaks and the hit flag,
the plot marks the frame's peaks on its profile over the sigma-clipped background, and a second
panel shows the hit rate that the `aggregates` messages report.

The lossless channel (proto/PROTOCOL.md 3.6) is a ROUTER in faid and a DEALER here: the
subscriber says hello with a credit, acknowledges what it has consumed (cumulatively, by
msg_number), repeats the hello every second while another consumer holds the channel, and drops
messages faid re-sends that it already has.

A faid running with CURVE (security.curve, docs/security.md) needs faid's public key and a key
pair of this client whose public half is in faid's security.authorized_keys: --server-key
FAID.pub --key CLIENT.key (files of `faidctl keygen`). A refused handshake ends the script with
the reason instead of waiting for messages that never come.

Needs pyzmq, msgpack and numpy; matplotlib only for --plot.

    python3 faid_subscriber.py --from tcp://127.0.0.1:5556 --count 100
    python3 faid_subscriber.py --from tcp://host:5558 --lossless --plot --plot-file latest.png
    python3 faid_subscriber.py --from tcp://host:5556 --server-key faid.pub --key me.key
"""

import argparse
import os
import sys
import time

import msgpack
import numpy as np
import zmq

TOPICS = ("start", "result", "end", "stats", "error", "aggregates")


def decode_array(a):
    """A protocol array map -> numpy array (a view on the message bytes, read-only)."""
    return np.frombuffer(a["data"], dtype=np.dtype(a["dtype"])).reshape(a["shape"])


class Refused(Exception):
    """faid refused this lossless consumer (another one holds the channel); keep calling recv()
    to wait for the turn."""


class AuthFailed(Exception):
    """The handshake with faid was refused (CURVE key not authorized, wrong server key, or one
    side uses CURVE and the other does not)."""


def read_key(path, secret=False):
    """A key file of `faidctl keygen` (ZeroMQ certificate layout: `public-key = "..."`,
    `secret-key = "..."`) or a bare 40-character z85 line: the public key, or with secret=True
    the (public, secret) pair, as bytes."""
    keys = {}
    with open(path, "rb") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(b"#"):
                continue
            for name in (b"public-key", b"secret-key"):
                if line.startswith(name) and b"=" in line:
                    keys[name] = line.split(b"=", 1)[1].strip().strip(b"\"'")
            if len(line) == 40 and b"=" not in line[:1] and b"public-key" not in keys:
                keys.setdefault(b"bare", line)
    pub = keys.get(b"public-key", keys.get(b"bare"))
    if secret:
        if b"secret-key" not in keys:
            raise ValueError("%s: no secret-key line (a NAME.key of faidctl keygen)" % path)
        sec = keys[b"secret-key"]
        return zmq.curve_public(sec), sec
    if pub is None or len(pub) != 40:
        raise ValueError("%s: no 40-character z85 public key" % path)
    return pub


class Subscriber:
    """Receives and decodes faid output messages; remembers the last start (radial axis, unit).

    Lossless: recv() acknowledges the message it returned before (at least once: a message not
    yet acknowledged when the consumer vanishes is re-sent to the next session) and drops
    re-sent messages already returned in this faid run (exactly once to the caller while this
    object lives)."""

    HELLO_S, ACK_S, HEARTBEAT_S = 1.0, 0.1, 1.0

    # Handshakes failing without detail in a row before it counts as refused (a faid that gets
    # the other mechanism closes without saying why; libzmq retries every 100 ms).
    NODETAIL_LIMIT = 3

    def __init__(self, endpoint, lossless=False, topics=TOPICS, rcvhwm=0, name=None, credit=256,
                 server_key=None, key=None):
        """server_key, key: faid's NAME.pub and this client's CLIENT.key (files, or the z85
        keys as bytes: server_key, and key as a (public, secret) pair) for a faid with CURVE."""
        if (server_key is None) != (key is None):
            raise ValueError("CURVE needs both server_key (faid's .pub) and key (CLIENT.key)")
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.DEALER if lossless else zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.curve = server_key is not None
        if self.curve:
            if not zmq.has("curve"):
                raise AuthFailed("this libzmq has no CURVE")
            srv = server_key if isinstance(server_key, bytes) else read_key(server_key)
            pub, sec = key if isinstance(key, tuple) else read_key(key, secret=True)
            self.sock.curve_serverkey = srv
            self.sock.curve_publickey = pub
            self.sock.curve_secretkey = sec
        self.endpoint = endpoint
        self.nodetail = 0
        self.mon = self.sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        if rcvhwm or lossless:
            self.sock.setsockopt(zmq.RCVHWM, rcvhwm)
        if lossless and name:
            self.sock.setsockopt(zmq.ROUTING_ID, name.encode())
        if not lossless:
            for t in topics:
                self.sock.setsockopt(zmq.SUBSCRIBE, t.encode())
        self.sock.connect(endpoint)
        self.lossless = lossless
        self.topics = set(topics)
        self.start = None
        # lossless session
        self.credit = credit
        self.instance = ""
        self.welcomed = False
        self.next_hello = 0.0
        self.last_ack = time.monotonic()
        self.last = None       # msg_number of the last message returned
        self.pending = False   # that message is not consumed yet
        self.consumed = None   # msg_number of the last consumed message
        self.unacked = 0
        self.duplicates = 0
        self.refused = 0
        if lossless:
            self._tick()

    def _send(self, typ):
        m = {"type": typ, "credit": self.credit}
        if self.consumed is not None:
            m.update(seq=self.consumed, instance=self.instance)
        try:
            self.sock.send(msgpack.packb(m), zmq.NOBLOCK)
        except zmq.Again:
            return
        self.last_ack = time.monotonic()
        self.unacked = 0

    def _tick(self):
        now = time.monotonic()
        if not self.welcomed:
            if now >= self.next_hello:
                self._send("hello")
                self.next_hello = now + self.HELLO_S
        elif (self.unacked >= (self.credit + 3) // 4
              or (self.unacked and now - self.last_ack >= self.ACK_S)
              or now - self.last_ack >= self.HEARTBEAT_S):
            self._send("ack")

    def _check_handshake(self):
        """Raises AuthFailed when the monitor reports a refused handshake."""
        from zmq.utils.monitor import recv_monitor_message
        while self.mon.poll(0):
            ev = recv_monitor_message(self.mon)
            e, v = ev["event"], ev["value"]
            if e == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.nodetail = 0
            elif e == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                raise AuthFailed("faid at %s refused this client's key (ZAP status %d): is its "
                                 ".pub in faid's security.authorized_keys?" % (self.endpoint, v))
            elif (e == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                  and v == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH):
                raise AuthFailed(("faid at %s does not use CURVE: connect without keys"
                                  if self.curve else "faid at %s requires CURVE: give "
                                  "--server-key FAID.pub and --key CLIENT.key") % self.endpoint)
            elif e == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and self.curve:
                raise AuthFailed("CURVE handshake with faid at %s failed (protocol error %#x): "
                                 "is the server key faid's?" % (self.endpoint, v))
            elif e == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                self.nodetail += 1
                if self.nodetail >= self.NODETAIL_LIMIT:
                    raise AuthFailed("handshake with faid at %s failed %d times: %s" % (
                        self.endpoint, self.nodetail,
                        "is the server key faid's public key, and does faid use CURVE?"
                        if self.curve else "faid probably requires CURVE (--server-key, --key)"))

    def recv(self, timeout_s):
        """The next message as a dict (with "topic" added), or None after timeout_s seconds.
        Lossless: raises Refused while another consumer holds the channel. Raises AuthFailed
        when faid refused the handshake."""
        if self.lossless and self.pending:
            self.pending = False
            self.consumed = self.last
            self.unacked += 1
        deadline = time.monotonic() + timeout_s
        while True:
            if self.lossless:
                self._tick()
            left = deadline - time.monotonic()
            wait = min(left, 0.1)  # also how soon a refused handshake is seen
            self._check_handshake()
            if not self.sock.poll(int(max(wait, 0) * 1000)):
                self._check_handshake()
                if time.monotonic() >= deadline:
                    return None
                continue
            parts = self.sock.recv_multipart()
            topic = parts[0].decode("utf-8", "replace") if len(parts) > 1 else None
            msg = msgpack.unpackb(parts[-1], raw=False)
            if not isinstance(msg, dict) or "type" not in msg:
                raise ValueError("message is not a faid output map")
            if self.lossless and topic in ("welcome", "refused", "ping"):
                if topic == "welcome":
                    if msg.get("instance") != self.instance:
                        # A new faid run: its msg_numbers start again.
                        self.last = self.consumed = None
                        self.pending = False
                        self.instance = msg.get("instance", "")
                    self.welcomed = True
                    self.last_ack = time.monotonic()
                elif topic == "refused":
                    self.welcomed = False
                    self.refused += 1
                    self.next_hello = time.monotonic() + self.HELLO_S
                    raise Refused(msg.get("message", "refused"))
                continue
            if self.lossless and msg["type"] != "stats" and "msg_number" in msg:
                n = msg["msg_number"]
                if self.last is not None and n <= self.last:
                    self.duplicates += 1
                    continue
                self.last = n
                self.pending = True
            msg["topic"] = topic or msg["type"]
            if msg["type"] == "start":
                self.start = msg
            return msg

    def radial(self, series_id, nbins):
        """Bin centres and unit for a result of series_id, or the bin index when unknown."""
        s = self.start
        if s and s.get("series_id") == series_id and "radial" in s:
            r = decode_array(s["radial"])
            if r.size == nbins:
                return r, s.get("unit", "?")
        return np.arange(nbins, dtype=np.float64), "bin"

    def peak_radial(self, msg):
        """Radial positions (in the start's unit) of a result's peaks, from their pixel
        centroids and the start's geometry. Rotations are left out: for marking peaks on the
        profile of a detector facing the beam; None when unknown."""
        s = self.start
        if not s or "geometry" not in s or "peak_x" not in msg:
            return None
        g = s["geometry"]
        x, y = decode_array(msg["peak_x"]), decode_array(msg["peak_y"])
        d1 = (y + 0.5) * g["pixel1"] - g["poni1"]
        d2 = (x + 0.5) * g["pixel2"] - g["poni2"]
        r = np.hypot(d1, d2)
        tth = np.arctan2(r, g["dist"])
        q_nm = 4e-9 * np.pi * np.sin(tth / 2) / g["wavelength"]
        return {"q_nm^-1": q_nm, "q_A^-1": q_nm / 10, "2th_deg": np.degrees(tth),
                "2th_rad": tth, "r_mm": r * 1e3, "r_m": r}.get(s.get("unit"))

    def close(self):
        if self.lossless:
            # Done with what it got: acknowledge it and leave.
            if self.pending:
                self.pending = False
                self.consumed = self.last
            if self.welcomed:
                self._send("ack")
            try:
                self.sock.send(msgpack.packb({"type": "bye"}), zmq.NOBLOCK)
            except zmq.Again:
                pass
            self._close_monitor()
            self.sock.close(500)
            return
        self._close_monitor()
        self.sock.close(0)

    def _close_monitor(self):
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.mon.close(0)


class Plotter:
    """Draws the latest profile (with peaks: its background and the peaks on it, and the hit
    rate history in a second panel); headless when it writes into a file."""

    def __init__(self, path):
        import matplotlib

        if path:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.plt = plt
        self.path = path
        self.fig, (self.ax, self.ax_hits) = plt.subplots(2, 1, figsize=(7, 7),
                                                         gridspec_kw={"height_ratios": [3, 1]})
        self.aggr = None
        if not path:
            plt.ion()
            plt.show(block=False)

    def update(self, x, unit, msg, peak_r=None):
        ax = self.ax
        ax.clear()
        y = decode_array(msg["I"])
        if "sigma" in msg:
            s = decode_array(msg["sigma"])
            ax.fill_between(x, y - s, y + s, alpha=0.3, linewidth=0)
        ax.plot(x, y, label="I")
        title = "series %s frame %s" % (msg.get("series_id"), msg.get("frame_id"))
        if "num_peaks" in msg:
            bg = decode_array(msg["bg_I"])
            if bg.size == x.size:
                ax.plot(x, bg, "--", label="background (sigma-clipped)")
            if peak_r is not None and peak_r.size:
                ax.plot(peak_r, np.interp(peak_r, x, y), "rv", label="peaks")
            ax.legend(loc="upper right", fontsize="small")
            title += ": %d peaks, %s" % (msg["num_peaks"], "hit" if msg["is_hit"] else "no hit")
        ax.set_xlabel(unit)
        ax.set_ylabel("I")
        ax.set_title(title)
        self.draw_hits()
        self.fig.tight_layout()
        if self.path:
            self.fig.savefig(self.path)
        else:
            self.plt.pause(0.001)


    def draw_hits(self):
        ax = self.ax_hits
        ax.clear()
        a = self.aggr
        if not a:
            ax.set_axis_off()
            return
        ax.set_axis_on()
        h, t = decode_array(a["hit_rate_history"]), decode_array(a["hit_rate_timestamp_history"])
        if h.size:
            ax.plot(t - t[-1], 100 * h)
        ax.set_xlabel("s")
        ax.set_ylabel("hit rate %")
        ax.set_title("hit rate %.1f %% over %d frames; %d hits in %d frames" % (
            100 * a["hit_rate"], a["hit_rate_window_frames"], a["hits"], a["frames"]),
            fontsize="small")

    def aggregates(self, msg):
        self.aggr = msg


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--from", dest="endpoint", default="tcp://127.0.0.1:5556",
                   help="faid's output endpoint (default %(default)s)")
    p.add_argument("--lossless", action="store_true",
                   help="ENDPOINT is the lossless channel (output.lossless_endpoint): "
                        "acknowledged delivery; waits while another consumer holds it")
    p.add_argument("--name", default=None,
                   help="lossless consumer name (a restarted consumer takes its place at once)")
    p.add_argument("--credit", type=int, default=256,
                   help="lossless: messages faid may send ahead of acks (default %(default)s)")
    p.add_argument("--count", type=int, default=0, help="stop after N results")
    p.add_argument("--timeout", type=float, default=0, help="stop after S seconds")
    p.add_argument("--until-end", action="store_true", help="stop after a series end message")
    p.add_argument("--quiet", action="store_true", help="no line per result, only the summary")
    p.add_argument("--stats", action="store_true", help="print a line per periodic stats message")
    p.add_argument("--plot", action="store_true", help="plot the latest profile (matplotlib)")
    p.add_argument("--plot-file", default=None,
                   help="with --plot: write the plot to this PNG instead of a window")
    p.add_argument("--plot-every", type=float, default=0.5,
                   help="with --plot: seconds between redraws (default %(default)s)")
    p.add_argument("--server-key", default=None,
                   help="faid's public key (NAME.pub of its security.secret_key_file), for a "
                        "faid with security.curve on; needs --key")
    p.add_argument("--key", default=None,
                   help="this client's key pair (CLIENT.key of `faidctl keygen CLIENT`; "
                        "CLIENT.pub in faid's security.authorized_keys)")
    args = p.parse_args(argv)
    if (args.server_key is None) != (args.key is None):
        p.error("--server-key and --key go together")

    if args.plot and not args.plot_file and not (os.environ.get("DISPLAY")
                                                 or os.environ.get("WAYLAND_DISPLAY")):
        args.plot_file = "faid_profile.png"
        print("no display: plotting into %s" % args.plot_file, file=sys.stderr)
    try:
        sub = Subscriber(args.endpoint, args.lossless, name=args.name, credit=args.credit,
                         server_key=args.server_key, key=args.key)
    except (OSError, ValueError, AuthFailed) as e:
        print("faid_subscriber: %s" % e, file=sys.stderr)
        return 1
    plotter = Plotter(args.plot_file) if args.plot else None
    t0 = time.monotonic()
    deadline = t0 + args.timeout if args.timeout > 0 else None
    results, errors, bad, lost, hits = 0, 0, 0, 0, 0
    hit_rate = None
    ids = {}
    last_msgno = None
    latencies = []
    last_plot = 0.0
    pending_plot = None
    why = "interrupted"
    try:
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                why = "timeout"
                break
            wait = 0.5 if deadline is None else min(0.5, deadline - now)
            try:
                msg = sub.recv(wait)
            except Refused as e:
                if sub.refused == 1:
                    print("refused by faid: %s (waiting)" % e, file=sys.stderr)
                continue
            except AuthFailed as e:
                print("faid_subscriber: %s" % e, file=sys.stderr)
                why = "authentication failed"
                break
            except (ValueError, msgpack.exceptions.ExtraData,
                    msgpack.exceptions.UnpackException) as e:
                bad += 1
                print("undecodable message: %s" % e, file=sys.stderr)
                continue
            if msg is None:
                continue
            kind = msg["type"]
            if kind != "stats" and "msg_number" in msg:
                n = msg["msg_number"]
                if last_msgno is not None and n > last_msgno + 1:
                    lost += n - last_msgno - 1
                last_msgno = n
            if kind == "start":
                if not args.quiet:
                    print("start series=%s unit=%s npt=%d setup=%s config_hash=%s" % (
                        msg.get("series_id"), msg.get("unit"),
                        decode_array(msg["radial"]).size if "radial" in msg else 0,
                        msg.get("setup_version"), msg.get("config_hash")))
            elif kind == "result":
                results += 1
                I = decode_array(msg["I"])
                x, unit = sub.radial(msg.get("series_id"), I.size)
                ids.setdefault(msg.get("series_id"), set()).add(msg.get("frame_id"))
                if "latency_us" in msg:
                    latencies.append(msg["latency_us"])
                hits += bool(msg.get("is_hit"))
                if not args.quiet:
                    k = int(np.nanargmax(I)) if I.size and np.isfinite(I).any() else 0
                    peaks = (" peaks=%d hit=%d" % (msg["num_peaks"], bool(msg["is_hit"]))
                             if "num_peaks" in msg else "")
                    print("result series=%s frame=%s npt=%d max_I=%.6g at %s=%.6g latency_ms=%.3f%s"
                          % (msg.get("series_id"), msg.get("frame_id"), I.size,
                             I[k] if I.size else float("nan"), unit, x[k] if I.size else 0,
                             msg.get("latency_us", 0) / 1000.0, peaks))
                if plotter:
                    pending_plot = (x, unit, msg, sub.peak_radial(msg))
            elif kind == "aggregates":
                hit_rate = msg["hit_rate"]
                if plotter:
                    plotter.aggregates(msg)
                if args.stats:
                    print("aggregates frames=%d hits=%d hit_rate=%.4f window=%d" % (
                        msg["frames"], msg["hits"], msg["hit_rate"],
                        msg["hit_rate_window_frames"]), flush=True)
            elif kind == "stats":
                if args.stats:
                    c = msg.get("counters", {})
                    print("stats state=%s fps=%s received=%s processed=%s dropped=%s" % (
                        msg.get("state"), msg.get("fps"), c.get("received"), c.get("processed"),
                        c.get("dropped")), flush=True)
            elif kind == "error":
                errors += 1
                print("error series=%s frame=%s %s %s: %s" % (
                    msg.get("series_id"), msg.get("frame_id"), msg.get("stage"),
                    msg.get("code"), msg.get("message")), file=sys.stderr)
            elif kind == "end" and not args.quiet:
                print("end series=%s reason=%s processed=%s failed=%s dropped=%s" % (
                    msg.get("series_id"), msg.get("reason"), msg.get("frames_processed"),
                    msg.get("frames_failed"), msg.get("frames_dropped")))
            if plotter and pending_plot and (time.monotonic() - last_plot >= args.plot_every):
                plotter.update(*pending_plot)
                pending_plot = None
                last_plot = time.monotonic()
            if args.count and results >= args.count:
                why = "count reached"
                break
            if args.until_end and kind == "end":
                why = "series end"
                break
    except KeyboardInterrupt:
        pass
    finally:
        if plotter and pending_plot:
            plotter.update(*pending_plot)
        sub.close()

    missing = sum(max(s) - min(s) + 1 - len(s) for s in ids.values() if s)
    print("stopped: %s" % why)
    print("results: %d" % results)
    print("missing frames: %d" % missing)
    print("lost messages: %d" % lost)
    print("errors: %d, undecodable: %d" % (errors, bad))
    if hits or hit_rate is not None:
        print("hits: %d of %d results%s" % (
            hits, results, "" if hit_rate is None else ", faid's hit rate %.4f" % hit_rate))
    if args.lossless:
        print("lossless: refused %d, re-sent duplicates dropped %d" % (sub.refused,
                                                                        sub.duplicates))
    if latencies:
        print("latency (faid, received -> result): mean %.3f ms, max %.3f ms" % (
            sum(latencies) / len(latencies) / 1000.0, max(latencies) / 1000.0))
    if args.count and results < args.count or why == "authentication failed":
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
