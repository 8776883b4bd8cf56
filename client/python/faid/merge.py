"""One merged stream over several faid instances (proto/PROTOCOL.md 3.8 "Several instances").

    from faid import MergedSubscriber, MergedEnd
    with MergedSubscriber(["tcp://a:5556", "tcp://b:5556", "tcp://c:5556"]) as sub:
        for msg in sub.messages(until_end=True):
            if msg.type == "result":
                print(msg.frame_id, msg.I.max())        # in frame order within the window
            elif isinstance(msg, MergedEnd):
                print(msg.frames_processed, msg.missing_frames)

The same rules, bounds and counters as the C client's `faid_merge` (client/faid_client_merge.c,
`faidctl sub --from A --from B ...`), so that the two clients deliver the same stream:

- each series' `start` once (the first seen); another instance's start with another
  `config_hash` is delivered as a `Mismatch` naming the instance and its endpoint, and that
  instance's results of the series are kept out (counted `refused`, their frames missing);
- results of a series in frame order: a result waits until the frames before it came, or the
  window is full (`window` results, `window_bytes` bytes), or it waited `max_wait` seconds, or
  the series is done; an older frame than the window let through comes at once with
  `Result.late` set (never dropped); a frame id seen before is dropped (`duplicates`);
- one `MergedEnd` per series once every instance that started it ended, fell silent for
  `dead_after` seconds or was named in the fan-out's `lost` report, and every part (`shards`
  stamps; unstamped: one per endpoint) is accounted for: totals summed, frames never seen listed;
- errors, stats, aggregates of each instance, and the fan-out's `Lost` reports, as they come.

Memory stays bounded whatever the peers send: messages of at most `max_message_bytes`, the
window, 8 series at once (a ninth closes the oldest, which ends `incomplete`), a frame-id
bitmap of 2**24 ids per series (ids beyond it delivered and counted `untracked`), 256 missing
ranges per end."""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import zmq

from ._keys import KeySpec
from .messages import AnyMessage, End, Message, Start, decode_array, from_map
from .subscriber import TOPICS, BadMessage, Subscriber, decode_body

#: The C client's bounds (client/faid_client.h, "Merging subscriber").
MAX_INSTANCES = 64
SERIES = 8
RECENT = 16  # ended series remembered, so that their stragglers are not a new series
TRACKED_IDS = 1 << 24
RANGES = 256
DEFAULT_WINDOW = 256
DEFAULT_WINDOW_BYTES = 256 << 20
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
_UID_MAX, _NAME_MAX, _HASH_MAX = 64, 128, 40  # C buffers: strings must fit below these


@dataclass
class MergedEnd(End):
    """The merged `end` of a series over several instances. `raw` holds the same keys, in the
    same order, as the line `faidctl sub --json` prints for it (docs/faidctl.md)."""
    merged: bool = True
    instances: int = 0  # those that started the series
    ended: int = 0
    silent: int = 0
    lost: int = 0
    stale_messages: int = 0
    delivered: int = 0
    late: int = 0
    duplicates: int = 0
    refused: int = 0
    untracked: int = 0
    expected: int = 0
    missing: int = 0
    missing_truncated: bool = False
    fan_report: bool = False  # expected and missing from the fan-out's routed and lost reports
    lost_delivered: int = 0  # frames a lost report named whose result was delivered
    missing_frames: List[List[int]] = field(default_factory=list)  # [first, last] ranges


@dataclass
class Lost(Message):
    """The fan-out's `lost` report: frames of `series` handed to `instance` and never reduced."""
    series: int = 0
    instance: str = ""
    frames: list = field(default_factory=list)  # as sent: ids and [first, last] ranges
    nframes: int = 0
    ranges: List[List[int]] = field(default_factory=list)  # at most 256, nframes counts all
    truncated: bool = False


@dataclass
class Mismatch(Message):
    """An instance's start of a series whose `config_hash` differs from the series' start: its
    results of the series are left out."""
    series_id: int = 0
    instance: str = ""
    endpoint: str = ""
    config_hash: str = ""
    expected: str = ""
    message: str = ""


def _cstr(m: Dict[str, Any], key: str, cap: int) -> str:
    v = m.get(key)
    return v if isinstance(v, str) and len(v.encode()) < cap else ""


def _u64(m: Dict[str, Any], key: str) -> int:
    v = m.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64 else 0


def _i64(m: Dict[str, Any], key: str, dflt: int) -> int:
    v = m.get(key)
    ok = isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63
    return v if ok else dflt


def _same(id1: int, uid1: str, id2: int, uid2: str) -> bool:
    """Same series: equal ids, and equal unique ids when both sides have one."""
    return id1 == id2 and (not uid1 or not uid2 or uid1 == uid2)


def parse_lost(m: Dict[str, Any]) -> Lost:
    """A fan-out's `lost` map -> Lost; BadMessage naming what is wrong (as the C client)."""
    out = Lost(type="lost", topic="lost", raw=m)
    series = m.get("series", m.get("series_id"))
    if "series" not in m and "series_id" not in m:
        raise BadMessage("lost: missing key 'series'")
    if not isinstance(series, int) or isinstance(series, bool) or not 0 <= series < 1 << 64:
        raise BadMessage("lost: series is not an unsigned integer")
    out.series = series
    if "instance" in m:
        if not isinstance(m["instance"], str) or len(m["instance"].encode()) >= _NAME_MAX:
            raise BadMessage("lost: instance is not a string of < %d bytes" % _NAME_MAX)
        out.instance = m["instance"]
    if "frames" not in m:
        raise BadMessage("lost: missing key 'frames'")
    if not isinstance(m["frames"], list):
        raise BadMessage("lost: frames is not an array")

    def uint(x):
        return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 64

    for j, e in enumerate(m["frames"]):
        if isinstance(e, list) and len(e) == 2:
            if not (uint(e[0]) and uint(e[1])) or e[1] < e[0]:
                raise BadMessage("lost: frames[%d] is not a range [first, last]" % j)
            a, b = e
        elif uint(e):
            a = b = e
        else:
            raise BadMessage("lost: frames[%d] is neither a frame id nor a range" % j)
        out.nframes += b - a + 1
        if len(out.ranges) < RANGES:
            out.ranges.append([a, b])
        else:
            out.truncated = True
    out.frames = m["frames"]
    return out


class _Held:
    __slots__ = ("m", "topic", "frame", "src", "at", "size")

    def __init__(self, m, topic, frame, src, at, size):
        self.m, self.topic, self.frame = m, topic, frame
        self.src, self.at, self.size = src, at, size


class _Series:
    def __init__(self, order: int, sid: int, uid: str):
        self.closing = False
        self.order, self.id, self.uid = order, sid, uid
        self.hash = ""
        self.nimages = -1
        # masks by source, as the C client's
        self.started = self.ended = self.silent = self.lost = self.mismatch = 0
        self.parts = 0  # the greatest `shards` stamp seen
        self.e = dict(frames_received=0, frames_processed=0, frames_failed=0, frames_dropped=0,
                      stale_messages=0, incomplete=False, delivered=0, late=0, duplicates=0,
                      refused=0, untracked=0)
        self.has_next = False
        self.next = 0  # frames below it were delivered (or let through by the window)
        self.heap: List[Tuple[int, int, _Held]] = []
        self.bits = bytearray()  # frame ids seen, from 0 (grows by doubling, < 2**24 bits)
        self.lbits = bytearray()  # frame ids a fan-out's lost report named
        self.rbits = bytearray()  # frame ids the fan-out's routed report named
        self.has_routed = False
        self.done_at: Optional[float] = None  # instances all done: the report is awaited
        self.has_seen = False
        self.min_seen = self.max_seen = 0
        self.start: Optional[Dict[str, Any]] = None

    def mark_seen(self, fid: int) -> bool:
        """True when fid is new, False for a duplicate; ids beyond the bitmap are new."""
        if fid >= TRACKED_IDS:
            self.e["untracked"] += 1
            return True
        if not self.has_seen or fid < self.min_seen:
            self.min_seen = fid
        if not self.has_seen or fid > self.max_seen:
            self.max_seen = fid
        self.has_seen = True
        if fid >= len(self.bits) * 8:
            ncap = len(self.bits) * 8 or 4096
            while ncap <= fid:
                ncap *= 2
            self.bits.extend(bytes(ncap // 8 - len(self.bits)))
        if self.bits[fid >> 3] & (1 << (fid & 7)):
            return False
        self.bits[fid >> 3] |= 1 << (fid & 7)
        return True

    def seen(self, fid: int) -> bool:
        return _bit(self.bits, fid)


def _bit(bits: bytearray, fid: int) -> bool:
    return fid < len(bits) * 8 and bool(bits[fid >> 3] & (1 << (fid & 7)))


def _ids(*maps: bytearray):
    """The ids set in any of the bitmaps, ascending (zero bytes skipped)."""
    n = max(len(b) for b in maps)
    for i in range(n):
        byte = 0
        for b in maps:
            if i < len(b):
                byte |= b[i]
        if byte:
            for k in range(8):
                if byte >> k & 1:
                    yield i * 8 + k


def _bits_range(bits: bytearray, a: int, b: int) -> None:
    """Ids a..b (inclusive) into a bitmap grown by doubling, clamped to the tracked ids (as the
    C client's)."""
    if a >= TRACKED_IDS:
        return
    b = min(b, TRACKED_IDS - 1)
    if b >= len(bits) * 8:
        ncap = len(bits) * 8 or 4096
        while ncap <= b:
            ncap *= 2
        bits.extend(bytes(ncap // 8 - len(bits)))
    fid = a
    while fid <= b and fid & 7:
        bits[fid >> 3] |= 1 << (fid & 7)
        fid += 1
    nbytes = (b + 1 - fid) >> 3
    if nbytes > 0:
        bits[fid >> 3:(fid >> 3) + nbytes] = b"\xff" * nbytes
        fid += nbytes * 8
    while fid <= b:
        bits[fid >> 3] |= 1 << (fid & 7)
        fid += 1


class MergedSubscriber:
    """SUB sockets on several faid instances' `output.endpoint`, delivered as one stream (see the
    module's text). Messages are the package's dataclasses (faid.messages) plus `MergedEnd`,
    `Lost` and `Mismatch` of this module.

    endpoints: the instances' PUB addresses (1 to 64); fan: the fan-out's PUB (its `lost`
    reports), or None; window: results held for reordering (256); window_bytes: bytes of held
    results (256 MiB); max_wait: seconds a result waits for older frames (2; None: no limit);
    dead_after: seconds of silence after which an instance is done with its series (10; faid
    publishes `stats` every `stats.interval`, so a live instance is never silent);
    max_message_bytes: a larger message drops that peer's connection (64 MiB); rcvhwm,
    server_key, key, context: as for Subscriber, for every connection.

    Counters over the whole run: `late`, `never_seen` (frames listed missing by the ends),
    `fan_lost` (frames the fan-out reported lost), `mismatched` (starts refused)."""

    def __init__(self, endpoints: Sequence[str], fan: Optional[str] = None,
                 window: int = DEFAULT_WINDOW, window_bytes: int = DEFAULT_WINDOW_BYTES,
                 max_wait: Optional[float] = 2.0, dead_after: float = 10.0,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, rcvhwm: int = 0,
                 server_key: Optional[KeySpec] = None, key: Optional[KeySpec] = None,
                 context: Optional[zmq.Context] = None):
        endpoints = list(endpoints)
        if not 1 <= len(endpoints) <= MAX_INSTANCES:
            raise ValueError("merge: %d endpoints, expected 1 to %d" % (len(endpoints),
                                                                          MAX_INSTANCES))
        if not 1 <= window <= 1 << 20:
            raise ValueError("merge: window %d frames, expected 1 to %d" % (window, 1 << 20))
        if window_bytes <= 0 or dead_after <= 0 or max_message_bytes <= 0:
            raise ValueError("merge: window_bytes, dead_after and max_message_bytes must be > 0")
        self.window, self.window_bytes = window, window_bytes
        self.max_wait = max_wait if max_wait is not None and max_wait > 0 else None
        self.dead_after = dead_after
        self.subs: List[Subscriber] = []
        self.names: List[str] = []  # each instance's `instance` stamp, once seen
        self.fan: Optional[Subscriber] = None
        opts = dict(topics=("",), server_key=server_key, key=key, rcvhwm=rcvhwm,
                    context=context, max_message_bytes=max_message_bytes)
        try:
            for ep in endpoints:
                self.subs.append(Subscriber(ep, **opts))
                self.names.append("")
            if fan:
                self.fan = Subscriber(fan, **opts)
        except Exception:
            self.close()
            raise
        now = time.monotonic()
        self.last = [now] * len(self.subs)  # each instance's last message of any kind
        self.ser: List[_Series] = []
        self.recent: List[Tuple[int, str]] = []
        self.next_order = 0
        self.silent_mask = 0
        self.now = time.monotonic()
        self.nheld = 0
        self.held_bytes = 0
        self.seq = itertools.count()  # heap tie-break
        self.rr = 0
        self.pending: Optional[Tuple[int, str, Dict[str, Any], int]] = None
        self.start: Optional[Dict[str, Any]] = None  # the last start delivered
        self.late = self.never_seen = self.fan_lost = self.mismatched = 0

    # ---- series ----

    def _find(self, sid: int, uid: str) -> Optional[_Series]:
        for s in self.ser:
            if _same(s.id, s.uid, sid, uid):
                return s
        return None

    def _recently_ended(self, sid: int, uid: str) -> bool:
        return any(_same(i, u, sid, uid) for i, u in self.recent)

    def _new(self, sid: int, uid: str) -> Optional[_Series]:
        if len(self.ser) >= SERIES:
            return None
        s = _Series(self.next_order, sid, uid)
        self.next_order += 1
        self.ser.append(s)
        self.recent = [(i, u) for i, u in self.recent if not _same(i, u, sid, uid)]
        return s

    def _free(self, s: _Series) -> None:
        self.recent.append((s.id, s.uid))
        del self.recent[:-RECENT]
        self.ser.remove(s)

    def _done(self, s: _Series) -> bool:
        """Every instance that started the series is done with it, and every part of it is
        accounted for (an instance that never started it counts when silent)."""
        if s.closing:
            return True
        done = s.ended | s.silent | s.lost
        inn = s.started | s.mismatch
        if not s.started or (inn & ~done):
            return False
        parts = s.parts if s.parts > 1 else len(self.subs)
        if bin(inn).count("1") + bin(self.silent_mask & ~inn).count("1") < parts:
            return False
        # with a fan-out, its routed report (sent as it passes the end on) for at most
        # max_wait (2 s without one): without it (the fan-out died) the end says so
        if self.fan is None or s.has_routed:
            return True
        if s.done_at is None:
            s.done_at = self.now
        return self.now - s.done_at > (self.max_wait or 2.0)

    def _end(self, s: _Series) -> MergedEnd:
        nst = nend = nsil = nlost = 0
        for i in range(64):
            b = 1 << i
            if not s.started & b:
                continue
            nst += 1
            if s.ended & b:
                nend += 1
            elif s.lost & b:
                nlost += 1
            elif s.silent & b:
                nsil += 1
        e = dict(s.e)
        if nend < nst or s.closing:
            e["incomplete"] = True
        have = True
        if s.nimages > 0:
            lo, hi = 0, s.nimages - 1
        elif s.has_seen:
            lo, hi = s.min_seen, s.max_seen
        else:
            have, lo, hi = False, 0, 0
        lost_delivered = sum(1 for fid in _ids(s.lbits) if s.seen(fid))
        expected = hi - lo + 1 if have else 0
        missing, ranges, trunc = 0, [], False
        if s.has_routed:
            # exactly what the fan-out handed out or dropped, less what came
            expected = 0
            for fid in _ids(s.rbits, s.lbits):
                expected += 1
                if s.seen(fid):
                    continue
                missing += 1
                if ranges and ranges[-1][1] + 1 == fid:
                    ranges[-1][1] = fid
                elif len(ranges) < RANGES:
                    ranges.append([fid, fid])
                else:
                    trunc = True
        elif have:
            hi = min(hi, TRACKED_IDS - 1)  # beyond the bitmap: not judged
            fid = lo
            while fid <= hi:
                if s.seen(fid):
                    fid += 1
                    continue
                first = fid
                while fid + 1 <= hi and not s.seen(fid + 1):
                    fid += 1
                missing += fid - first + 1
                if len(ranges) < RANGES:
                    ranges.append([first, fid])
                else:
                    trunc = True
                fid += 1
        raw = {"type": "end", "merged": True, "series_id": s.id, "series_unique_id": s.uid,
               "instances": nst, "ended": nend, "silent": nsil, "lost": nlost,
               "frames_received": e["frames_received"],
               "frames_processed": e["frames_processed"], "frames_failed": e["frames_failed"],
               "frames_dropped": e["frames_dropped"], "stale_messages": e["stale_messages"],
               "incomplete": e["incomplete"], "delivered": e["delivered"], "late": e["late"],
               "duplicates": e["duplicates"], "refused": e["refused"],
               "untracked": e["untracked"], "expected": expected, "missing": missing,
               "missing_truncated": trunc, "fan_report": s.has_routed,
               "lost_delivered": lost_delivered, "missing_frames": ranges}
        out = MergedEnd(**{k: v for k, v in raw.items() if k != "type"})
        out.type = out.topic = "end"
        out.reason = "merged"
        out.raw = raw
        self.never_seen += missing
        return out

    # ---- delivery ----

    def _deliver(self, s: _Series, h: _Held) -> AnyMessage:
        if not s.has_next or h.frame >= s.next:
            s.has_next, s.next = True, h.frame + 1
        s.e["delivered"] += 1
        self.held_bytes -= h.size
        self.nheld -= 1
        return from_map(h.m, h.topic)

    def _ready(self, s: _Series, now: float) -> bool:
        top = s.heap[0][2]
        in_order = bool(s.hash) and (top.frame <= s.next if s.has_next else top.frame == 0)
        waited = self.max_wait is not None and now - top.at > self.max_wait
        return in_order or waited

    def _due(self, now: float) -> Optional[AnyMessage]:
        """A result due now, or the end of a series that is done."""
        self.now = now
        self.silent_mask = 0
        for k in range(len(self.subs)):
            if now - self.last[k] > self.dead_after:
                self.silent_mask |= 1 << k
        for s in self.ser:
            s.silent |= s.started & self.silent_mask
        over = self.nheld > self.window or self.held_bytes > self.window_bytes
        s = None
        for c in self.ser:  # oldest series first
            if (c.heap or self._done(c)) and (s is None or c.order < s.order):
                s = c
        if s is None:
            return None
        if s.heap:
            if over or self._ready(s, now) or self._done(s):
                return self._deliver(s, heapq.heappop(s.heap)[2])
            # This series waits; a younger one may have something due.
            for c in self.ser:
                if c is s or c.order < s.order or not c.heap:
                    continue
                if self._ready(c, now) or self._done(c):
                    return self._deliver(c, heapq.heappop(c.heap)[2])
            return None
        end = self._end(s)
        self._free(s)
        return end

    def _late(self, m: Dict[str, Any], topic: str) -> AnyMessage:
        self.late += 1
        out = from_map(m, topic)
        out.late = True  # type: ignore[union-attr]
        return out

    def _absorb(self, src: int, topic: str, m: Dict[str, Any], size: int):
        """One message of instance src: a message to deliver, None when absorbed, or the string
        "slot" when it needs a series slot (the oldest series is closing to make room)."""
        name = _cstr(m, "instance", _NAME_MAX)
        if name:
            self.names[src] = name
        bit = 1 << src
        kind = m["type"]
        if kind not in ("start", "result", "end"):
            return from_map(m, topic)
        sid = _u64(m, "series_id")
        uid = _cstr(m, "series_unique_id", _UID_MAX)
        s = self._find(sid, uid)
        if s is None and kind != "start" and self._recently_ended(sid, uid):
            if kind == "result":  # a straggler of a series already ended: delivered, late
                return self._late(m, topic)
            return None  # an end after the merged end (the instance was taken for silent)
        if s is None:
            s = self._new(sid, uid)
            if s is None:
                min(self.ser, key=lambda c: c.order).closing = True
                return "slot"
        shards = _u64(m, "shards")
        if s.parts < shards <= MAX_INSTANCES:
            s.parts = shards
        if kind == "start":
            if s.mismatch & bit:
                return None  # reported once per series and instance
            h = _cstr(m, "config_hash", _HASH_MAX)
            if not s.hash:  # the series' first start: delivered
                s.hash = h
                s.nimages = _i64(m, "nimages", -1)
                s.started |= bit
                s.start = m
                self.start = m
                return from_map(m, topic)
            if h != s.hash:
                s.mismatch |= bit
                self.mismatched += 1
                ep = self.subs[src].endpoint
                text = ("instance %s (%s) reduces series %d with config_hash %s, the series' "
                        "start has %s: its results of the series are left out"
                        % (self.names[src] or "?", ep, s.id, h, s.hash))
                return Mismatch(type="mismatch", topic=topic, msg_number=m.get("msg_number"),
                                raw=m, series_id=s.id, instance=self.names[src], endpoint=ep,
                                config_hash=h, expected=s.hash, message=text)
            s.started |= bit
            if s.nimages < 0:
                s.nimages = _i64(m, "nimages", -1)
            return None
        if kind == "result":
            if s.mismatch & bit:
                s.e["refused"] += 1
                return None
            s.started |= bit  # results without its start (joined mid-series)
            fid = m.get("frame_id")
            if not isinstance(fid, int) or isinstance(fid, bool) or not 0 <= fid < 1 << 64:
                raise BadMessage("result from %s without frame_id" % self.subs[src].endpoint)
            if not s.mark_seen(fid):
                s.e["duplicates"] += 1
                return None
            if (s.has_next and fid < s.next) or self.nheld > self.window:
                # Older than what the window let through (or no room to hold it): at once,
                # marked late, never dropped.
                s.e["late"] += 1
                s.e["delivered"] += 1
                return self._late(m, topic)
            h = _Held(m, topic, fid, src, time.monotonic(), size)
            heapq.heappush(s.heap, (fid, next(self.seq), h))
            self.nheld += 1
            self.held_bytes += size
            return None
        # end
        if s.ended & bit:
            return None
        s.ended |= bit
        if s.mismatch & bit:
            return None
        s.started |= bit
        for k in ("frames_received", "frames_processed", "frames_failed", "frames_dropped",
                  "stale_messages"):
            s.e[k] += _u64(m, k)
        if m.get("incomplete") is True:
            s.e["incomplete"] = True
        return None

    def _absorb_fan(self, m: Dict[str, Any]) -> Lost:
        lost = parse_lost(m)
        src = next((i for i, n in enumerate(self.names) if n and n == lost.instance), -1)
        if src < 0:
            src = next((i for i, s in enumerate(self.subs) if s.endpoint == lost.instance), -1)
        for s in self.ser:
            if s.id == lost.series:
                if src >= 0:
                    s.lost |= 1 << src
                for a, b in lost.ranges:
                    _bits_range(s.lbits, a, b)
        self.fan_lost += lost.nframes
        return lost

    def _absorb_routed(self, m: Dict[str, Any]) -> None:
        """The fan-out's routed report: the ids it handed out in a series, kept with the series
        (the most recent of that id); BadMessage when malformed (as the C client)."""
        series = m.get("series")
        if series is None:
            raise BadMessage("routed: missing key 'series'")
        if not isinstance(series, int) or isinstance(series, bool) or not 0 <= series < 1 << 64:
            raise BadMessage("routed: series is not an unsigned integer")
        frames = m.get("frames")
        if frames is None:
            raise BadMessage("routed: missing key 'frames'")
        if not isinstance(frames, list):
            raise BadMessage("routed: frames is not an array")
        ranges = []
        for j, r in enumerate(frames):
            ok = isinstance(r, list) and len(r) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 64 for x in r)
            if not ok or r[1] < r[0]:
                raise BadMessage("routed: frames[%d] is not a range [first, last]" % j)
            ranges.append(r)
        target = None
        for s in self.ser:
            if s.id == series and (target is None or s.order > target.order):
                target = s
        if target is None or m.get("incomplete") is True:
            return  # not a series here, or not the whole set: the fallback judges
        for a, b in ranges:
            _bits_range(target.rbits, a, b)
        target.has_routed = True

    def _recv(self, sub: Subscriber,
              fan: bool = False) -> Optional[Tuple[str, Dict[str, Any], int]]:
        """One message [topic, body] of sub, decoded; an instance's checked as the C client
        checks it (faid_out_decode): a known type, the topic its type, ids unsigned."""
        try:
            parts = sub.sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return None
        try:
            m = decode_body(parts[-1])
        except BadMessage as e:
            raise BadMessage("%s from %s" % (e, sub.endpoint)) from e
        topic = parts[0].decode("utf-8", "replace") if len(parts) > 1 else m["type"]
        if not fan:
            if m["type"] not in TOPICS:
                raise BadMessage('output message from %s: missing or unknown "type"'
                                 % sub.endpoint)
            if topic != m["type"]:
                raise BadMessage('message from %s: topic "%s" but type "%s"'
                                 % (sub.endpoint, topic, m["type"]))
            for k in ("series_id", "frame_id"):
                v = m.get(k)
                if v is not None and (not isinstance(v, int) or isinstance(v, bool)
                                      or not 0 <= v < 1 << 64):
                    raise BadMessage('message from %s: "%s" is not an unsigned integer'
                                     % (sub.endpoint, k))
        return topic, m, len(parts[-1])

    def recv(self, timeout: float) -> Optional[AnyMessage]:
        """The next message of the merged stream, or None after timeout seconds. Raises
        AuthFailed when an instance refused the handshake, BadMessage for a message that is not
        a faid output map (or a result without frame_id, a malformed `lost` report)."""
        deadline = time.monotonic() + timeout
        poller = zmq.Poller()
        socks = self.subs + ([self.fan] if self.fan else [])
        for s in socks:
            poller.register(s.sock, zmq.POLLIN)
        while True:
            now = time.monotonic()
            out = self._due(now)
            if out is not None:
                return out
            if self.pending is not None:
                src, topic, m, size = self.pending
                r = self._absorb(src, topic, m, size)
                if r != "slot":
                    self.pending = None
                    if r is not None:
                        return r
                continue  # _due() ends the closing series first
            if now >= deadline:
                return None
            for s in socks:
                s.monitor.check()
            # Wake up for the time-driven rules (max_wait, dead_after) at least every 100 ms.
            ready = dict(poller.poll(int(min(deadline - now, 0.1) * 1000) + 1))
            if not ready:
                continue
            if self.fan is not None and ready.get(self.fan.sock):
                got = self._recv(self.fan, fan=True)
                if got and got[0] == "routed":
                    self._absorb_routed(got[1])
                    continue
                if got and got[0] == "lost":
                    return self._absorb_fan(got[1])
                continue  # the fan-out's other messages are not the instances' stream
            n = len(self.subs)
            for k in range(n):
                i = (self.rr + k) % n
                if not ready.get(self.subs[i].sock):
                    continue
                self.rr = (i + 1) % n
                self.last[i] = time.monotonic()
                got = self._recv(self.subs[i])
                if got is None:
                    break
                self.subs[i]._note(got[1])
                r = self._absorb(i, *got)
                if r == "slot":
                    self.pending = (i, *got)
                elif r is not None:
                    return r
                break

    def recv_map(self, timeout: float) -> Optional[Dict[str, Any]]:
        """As recv, the message's map (`raw`) with "topic" added; a late result's map has
        "late": True (a key faid never sends)."""
        msg = self.recv(timeout)
        if msg is None:
            return None
        m = msg.raw
        m["topic"] = msg.topic
        if getattr(msg, "late", False) is True:
            m["late"] = True
        return m

    def messages(self, timeout: Optional[float] = None, until_end: bool = False,
                 count: int = 0) -> Iterator[AnyMessage]:
        """Messages as they come; stops after timeout seconds in all (None: never), after a
        merged end (until_end) or after count results."""
        deadline = None if timeout is None else time.monotonic() + timeout
        results = 0
        while True:
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                return
            msg = self.recv(left)
            if msg is None:
                continue
            yield msg
            if msg.type == "result":
                results += 1
                if count and results >= count:
                    return
            if until_end and isinstance(msg, MergedEnd):
                return

    def __iter__(self) -> Iterator[AnyMessage]:
        return self.messages()

    def series_start(self, series_id: int) -> Optional[Start]:
        """The start of an open series (the newest with this id), as a dataclass."""
        best = None
        for s in self.ser:
            if s.id == series_id and s.start and (best is None or s.order > best.order):
                best = s
        return from_map(best.start) if best else None  # type: ignore[return-value]

    def radial(self, series_id: Optional[int] = None, nbins: Optional[int] = None):
        """(bin centres, unit) of the last start delivered (when it is of series_id and has
        nbins bins), else (bin indices, "bin")."""
        s = self.start
        if s and "radial" in s and (series_id is None or s.get("series_id") == series_id):
            r = decode_array(s["radial"])
            if nbins is None or r.size == nbins:
                return r, s.get("unit", "?")
        return np.arange(nbins or 0, dtype=np.float64), "bin"

    def close(self) -> None:
        for s in self.subs + ([self.fan] if self.fan else []):
            s.close()
        self.subs, self.fan = [], None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["MergedSubscriber", "MergedEnd", "Lost", "Mismatch", "parse_lost"]
