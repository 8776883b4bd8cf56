"""`faid-sub` (and client/python/faid_subscriber.py): prints faid's output, one line per result
and a summary, and with --plot draws the latest profile; the command over faid.Subscriber and
faid.LosslessConsumer (client/python/README.md lists its options)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from ._keys import AuthFailed
from .lossless import LosslessConsumer, Refused
from .merge import MergedSubscriber, parse_lost
from .messages import decode_array
from .subscriber import BadMessage, Subscriber

DESCRIPTION = ("Example subscriber for faid's output (proto/PROTOCOL.md section 3), in a few "
               "lines of Python.")


def peak_radial(start: Optional[Dict[str, Any]], msg: Dict[str, Any]):
    """Radial positions (in the start's unit) of a result's peaks, from their pixel centroids
    and the start's geometry. Rotations are left out: for marking peaks on the profile of a
    detector facing the beam; None when unknown."""
    s = start
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


def main(argv: Optional[List[str]] = None, prog: Optional[str] = None) -> int:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    p.add_argument("--from", dest="endpoints", action="append", default=[],
                   metavar="ENDPOINT",
                   help="faid's output endpoint (default tcp://127.0.0.1:5556); repeated: one "
                        "instance each, merged into one stream (faid.MergedSubscriber: each "
                        "start once, results in frame order, one end with summed totals)")
    p.add_argument("--fan", default=None, metavar="ENDPOINT",
                   help="merged: the fan-out's PUB, whose lost reports are shown and end the "
                        "named instance's part of the series")
    p.add_argument("--window", type=int, default=256,
                   help="merged: results held for reordering (default %(default)s)")
    p.add_argument("--max-wait", type=float, default=2.0,
                   help="merged: longest a result waits for older frames, s (default "
                        "%(default)s)")
    p.add_argument("--dead-after", type=float, default=10.0,
                   help="merged: an instance silent this long is done with its series, s "
                        "(default %(default)s; faid sends stats every stats.interval)")
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
    args.endpoint = args.endpoints[0] if args.endpoints else "tcp://127.0.0.1:5556"
    merged = len(args.endpoints) > 1 or args.fan is not None
    if merged and args.lossless:
        p.error("--lossless takes one --from endpoint (no merge)")

    if args.plot and not args.plot_file and not (os.environ.get("DISPLAY")
                                                 or os.environ.get("WAYLAND_DISPLAY")):
        args.plot_file = "faid_profile.png"
        print("no display: plotting into %s" % args.plot_file, file=sys.stderr)
    try:
        if merged:
            sub = MergedSubscriber(args.endpoints or [args.endpoint], fan=args.fan,
                                   window=args.window, max_wait=args.max_wait,
                                   dead_after=args.dead_after, server_key=args.server_key,
                                   key=args.key)
        elif args.lossless:
            sub = LosslessConsumer(args.endpoint, name=args.name, credit=args.credit,
                                   server_key=args.server_key, key=args.key)
        else:
            sub = Subscriber(args.endpoint, server_key=args.server_key, key=args.key)
    except (OSError, ValueError, AuthFailed) as e:
        print("%s: %s" % (p.prog, e), file=sys.stderr)
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
                msg = sub.recv_map(wait)
            except Refused as e:
                if sub.refused == 1:
                    print("refused by faid: %s (waiting)" % e, file=sys.stderr)
                continue
            except AuthFailed as e:
                print("%s: %s" % (p.prog, e), file=sys.stderr)
                why = "authentication failed"
                break
            except BadMessage as e:
                bad += 1
                print("%s" % e, file=sys.stderr)
                continue
            if msg is None:
                continue
            kind = msg["type"]
            # msg_number is per process: merged, frame ids say what is missing instead.
            if kind != "stats" and "msg_number" in msg and not merged:
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
                    pending_plot = (x, unit, msg, peak_radial(sub.start, msg))
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
                    print("stats state=%s fps=%s received=%s processed=%s dropped=%s%s" % (
                        msg.get("state"), msg.get("fps"), c.get("received"), c.get("processed"),
                        c.get("dropped"), " instance=%s" % msg["instance"]
                        if msg.get("instance") else ""), flush=True)
            elif kind == "error":
                errors += 1
                print("error series=%s frame=%s %s %s: %s" % (
                    msg.get("series_id"), msg.get("frame_id"), msg.get("stage"),
                    msg.get("code"), msg.get("message")), file=sys.stderr)
            elif kind == "mismatch":
                errors += 1
                print(msg["message"], file=sys.stderr)
            elif kind == "lost":
                print("the fan-out lost %d frames of series %s with %s" % (
                    parse_lost(msg).nframes, msg.get("series"), msg.get("instance")),
                    file=sys.stderr)
            elif kind == "end" and msg.get("merged"):
                if not args.quiet:
                    print("end series=%s merged instances=%d ended=%d silent=%d lost=%d "
                          "processed=%d failed=%d dropped=%d missing=%d%s" % (
                              msg["series_id"], msg["instances"], msg["ended"], msg["silent"],
                              msg["lost"], msg["frames_processed"], msg["frames_failed"],
                              msg["frames_dropped"], msg["missing"],
                              " missing_frames=%s" % msg["missing_frames"]
                              if msg["missing"] else ""))
                if msg["missing"] or msg["incomplete"]:
                    print("series %s ended over %d instances (%d ended, %d silent, %d lost): "
                          "%d of %d frames never seen" % (
                              msg["series_id"], msg["instances"], msg["ended"], msg["silent"],
                              msg["lost"], msg["missing"], msg["expected"]), file=sys.stderr)
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
    if merged:
        print("merged: %d instances, late results %d, frames never seen %d, lost by the "
              "fan-out %d, mismatched starts %d" % (len(args.endpoints), sub.late,
                                                    sub.never_seen, sub.fan_lost,
                                                    sub.mismatched))
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
