"""Subscriber of faid's monitoring output (the PUB socket, proto/PROTOCOL.md section 3).

    from faid import Subscriber
    with Subscriber("tcp://127.0.0.1:5556") as sub:
        for msg in sub.messages(timeout=10):
            if msg.type == "result":
                print(msg.frame_id, msg.I.max())

The PUB socket never waits for a subscriber: one that falls behind loses messages (a gap in
`msg_number`, counted in `lost`); a consumer that must see every frame uses the lossless channel
(faid.lossless). A SUB only receives what faid publishes after the subscription reached it."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterable, Iterator, Optional

import msgpack
import numpy as np
import zmq

from ._keys import AuthFailed, HandshakeMonitor, KeySpec, apply_curve
from .messages import AnyMessage, Start, decode_array, from_map

#: Every topic of the PUB socket.
TOPICS = ("start", "result", "end", "stats", "error", "aggregates")


class BadMessage(ValueError):
    """A message that is not a faid output map (undecodable msgpack, or no `type`)."""


def decode_body(body: bytes) -> Dict[str, Any]:
    """A message body -> its map; BadMessage when it is not a faid output map."""
    try:
        m = msgpack.unpackb(body, raw=False)
    except (ValueError, msgpack.exceptions.ExtraData, msgpack.exceptions.UnpackException) as e:
        raise BadMessage("undecodable message: %s" % e) from e
    if not isinstance(m, dict) or "type" not in m:
        raise BadMessage("message is not a faid output map")
    return m


class _Endpoint:
    """A socket connected to faid, with CURVE keys and handshake failures reported."""

    def __init__(self, kind: int, endpoint: str, server_key: Optional[KeySpec],
                 key: Optional[KeySpec], context: Optional[zmq.Context] = None):
        self.ctx = context or zmq.Context.instance()
        self.sock = self.ctx.socket(kind)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.endpoint = endpoint
        try:
            self.curve = apply_curve(self.sock, server_key, key)
        except Exception:
            self.sock.close(0)
            raise
        self.monitor = HandshakeMonitor(self.sock, endpoint, self.curve)
        self.start: Optional[Dict[str, Any]] = None  # the last start map
        self.last_msg_number: Optional[int] = None
        self.lost = 0  # messages missing by msg_number (the PUB high-water mark's drops)

    def _note(self, m: Dict[str, Any]) -> None:
        if m["type"] == "start":
            self.start = m
        n = m.get("msg_number") if m["type"] != "stats" else None
        if isinstance(n, int):
            if self.last_msg_number is not None and n > self.last_msg_number + 1:
                self.lost += n - self.last_msg_number - 1
            if self.last_msg_number is None or n > self.last_msg_number:
                self.last_msg_number = n

    def radial(self, series_id: Optional[int] = None, nbins: Optional[int] = None):
        """(bin centres, unit) of the last start (when it is of series_id and has nbins bins),
        else (bin indices, "bin")."""
        s = self.start
        if s and "radial" in s and (series_id is None or s.get("series_id") == series_id):
            r = decode_array(s["radial"])
            if nbins is None or r.size == nbins:
                return r, s.get("unit", "?")
        return np.arange(nbins or 0, dtype=np.float64), "bin"

    def last_start(self) -> Optional[Start]:
        """The last `start` received, as a dataclass."""
        return from_map(self.start) if self.start else None  # type: ignore[return-value]

    def recv_map(self, timeout: float) -> Optional[Dict[str, Any]]:  # pragma: no cover
        raise NotImplementedError

    def recv(self, timeout: float) -> Optional[AnyMessage]:
        """The next message as a dataclass (faid.messages), or None after timeout seconds."""
        m = self.recv_map(timeout)
        return None if m is None else from_map(m, m.get("topic"))

    def messages(self, timeout: Optional[float] = None, until_end: bool = False,
                 count: int = 0) -> Iterator[AnyMessage]:
        """Messages as they come; stops after timeout seconds in all (None: never), after a
        series `end` (until_end) or after count results."""
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
            if until_end and msg.type == "end":
                return

    def __iter__(self) -> Iterator[AnyMessage]:
        return self.messages()

    def _close_socket(self, linger_ms: int = 0) -> None:
        self.monitor.close()
        self.sock.close(linger_ms)

    def close(self) -> None:
        self._close_socket()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Subscriber(_Endpoint):
    """SUB socket on faid's `output.endpoint`: receives and decodes its messages.

    endpoint: faid's PUB address; topics: those to receive (default all of TOPICS);
    server_key, key: faid's `NAME.pub` and this client's `CLIENT.key` (files of `faidctl
    keygen`, or the z85 keys as bytes: key as a (public, secret) pair) for a faid with
    `security.curve`; rcvhwm: ZeroMQ receive high-water mark (0: ZeroMQ's default);
    max_message_bytes: a larger message drops the peer's connection instead of being read
    (ZMQ_MAXMSGSIZE; 0: no limit; libzmq does not make that connection again)."""

    def __init__(self, endpoint: str = "tcp://127.0.0.1:5556", topics: Iterable[str] = TOPICS,
                 server_key: Optional[KeySpec] = None, key: Optional[KeySpec] = None,
                 rcvhwm: int = 0, context: Optional[zmq.Context] = None,
                 max_message_bytes: int = 0):
        if not isinstance(endpoint, str):
            raise TypeError("Subscriber takes one endpoint; several instances' outputs as one "
                            "stream: faid.MergedSubscriber([...])")
        super().__init__(zmq.SUB, endpoint, server_key, key, context)
        if rcvhwm:
            self.sock.setsockopt(zmq.RCVHWM, rcvhwm)
        if max_message_bytes > 0:
            self.sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        self.topics = tuple(topics)
        for t in self.topics:
            self.sock.setsockopt(zmq.SUBSCRIBE, t.encode())
        self.sock.connect(endpoint)

    def recv_map(self, timeout: float) -> Optional[Dict[str, Any]]:
        """The next message as its decoded map with "topic" added, or None after timeout
        seconds. Raises AuthFailed when faid refused the handshake, BadMessage for a message
        that is not a faid output map."""
        deadline = time.monotonic() + timeout
        while True:
            self.monitor.check()
            left = deadline - time.monotonic()
            if not self.sock.poll(int(max(min(left, 0.1), 0) * 1000)):
                if time.monotonic() >= deadline:
                    self.monitor.check()
                    return None
                continue
            parts = self.sock.recv_multipart()
            m = decode_body(parts[-1])
            m["topic"] = parts[0].decode("utf-8", "replace") if len(parts) > 1 else m["type"]
            self._note(m)
            return m


__all__ = ["Subscriber", "TOPICS", "BadMessage", "AuthFailed", "decode_body"]
