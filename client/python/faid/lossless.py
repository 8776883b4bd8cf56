"""Consumer of faid's lossless channel (`output.lossless_endpoint`, proto/PROTOCOL.md 3.6).

faid keeps every message of the series stream (start, result, end, error) until the consumer
acknowledges it and sends it again to every new session until then; this consumer hands each
message to the application once:

- a message returned by recv() counts as consumed when recv() is called again (or commit() or
  close()); only consumed messages are acknowledged (cumulatively, by `msg_number`), so what the
  application had not finished when it died comes again;
- messages faid sends again that were already consumed (same faid `instance`, `msg_number` not
  greater) are dropped (`duplicates`);
- with `state_file`, the last consumed (`instance`, `msg_number`) is written to that file (a
  new file renamed over the old one) before it is acknowledged, and a consumer started again
  with the same file sends it in its `hello` and drops what it had consumed: exactly once
  across a restart of the consumer, as long as the application has finished with a message
  when it asks for the next.

    from faid import LosslessConsumer
    with LosslessConsumer("tcp://127.0.0.1:5558", name="writer", state_file="faid.seq") as c:
        for msg in c.messages(until_end=True):
            store(msg)            # consumed (and acknowledged) when the loop asks for the next

One consumer holds the channel at a time: another one is refused (Refused from recv()) and
repeats its hello every second until the channel is free."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Optional, Tuple

import msgpack
import zmq

from ._keys import KeySpec
from .subscriber import _Endpoint, decode_body


class Refused(Exception):
    """faid refused this consumer (another one holds the channel); keep calling recv() to wait
    for the turn."""


def load_state(path: str) -> Tuple[str, Optional[int]]:
    """(instance, last consumed msg_number) saved in a state file; ("", None) when it does not
    exist. Raises ValueError naming the file when it is not a state file of this module."""
    try:
        with open(path) as f:
            s = json.load(f)
    except FileNotFoundError:
        return "", None
    except (OSError, ValueError) as e:
        raise ValueError("%s: not a faid lossless state file (%s)" % (path, e)) from e
    if (not isinstance(s, dict) or not isinstance(s.get("instance"), str)
            or not isinstance(s.get("seq"), int) or s["seq"] < 0):
        raise ValueError("%s: not a faid lossless state file (needs instance and seq)" % path)
    return s["instance"], s["seq"]


def save_state(path: str, instance: str, seq: int) -> None:
    """Writes the state file: a new file renamed over the old one, so a crash leaves either."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump({"instance": instance, "seq": seq}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class LosslessConsumer(_Endpoint):
    """DEALER on faid's lossless channel: hello with a credit, cumulative acknowledgements of
    what was consumed, re-sent duplicates dropped, optional resumable state.

    name: the consumer's ZeroMQ routing id (a consumer restarted under its name takes over its
    old connection at once); credit: messages faid may send beyond the acknowledged (1-65536);
    state_file: where the last consumed (instance, msg_number) is kept (see the module);
    server_key, key: CURVE as for Subscriber."""

    HELLO_S, ACK_S, HEARTBEAT_S = 1.0, 0.1, 1.0

    def __init__(self, endpoint: str = "tcp://127.0.0.1:5558", name: Optional[str] = None,
                 credit: int = 256, state_file: Optional[str] = None,
                 server_key: Optional[KeySpec] = None, key: Optional[KeySpec] = None,
                 context: Optional[zmq.Context] = None):
        if not 1 <= credit <= 65536:
            raise ValueError("credit %d: must be 1 to 65536 (proto/PROTOCOL.md 3.6)" % credit)
        super().__init__(zmq.DEALER, endpoint, server_key, key, context)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        if name:
            self.sock.setsockopt(zmq.ROUTING_ID, name.encode())
        self.state_file = state_file
        self.instance, self.consumed = load_state(state_file) if state_file else ("", None)
        self.last = self.consumed  # msg_number of the last message returned
        self.sock.connect(endpoint)
        self.credit = credit
        self.welcomed = False
        self.next_hello = 0.0
        self.last_ack = time.monotonic()
        self.pending = False   # the last message returned is not consumed yet
        self.unacked = 0
        self.duplicates = 0    # re-sent messages dropped
        self.refused = 0       # refusals received
        self._tick()

    # -- protocol -------------------------------------------------------------------------------

    def _send(self, typ: str) -> None:
        m: Dict[str, Any] = {"type": typ, "credit": self.credit}
        if self.consumed is not None:
            m.update(seq=self.consumed, instance=self.instance)
        try:
            self.sock.send(msgpack.packb(m), zmq.NOBLOCK)
        except zmq.Again:
            return
        self.last_ack = time.monotonic()
        self.unacked = 0

    def _tick(self) -> None:
        now = time.monotonic()
        if not self.welcomed:
            if now >= self.next_hello:
                self._send("hello")
                self.next_hello = now + self.HELLO_S
        elif (self.unacked >= (self.credit + 3) // 4
              or (self.unacked and now - self.last_ack >= self.ACK_S)
              or now - self.last_ack >= self.HEARTBEAT_S):
            self._send("ack")

    def commit(self) -> None:
        """Marks the last message returned as consumed (saved to the state file, acknowledged
        with the next ack). recv() and close() do this by themselves."""
        if not self.pending:
            return
        self.pending = False
        self.consumed = self.last
        self.unacked += 1
        if self.state_file and self.consumed is not None:
            save_state(self.state_file, self.instance, self.consumed)

    def recv_map(self, timeout: float) -> Optional[Dict[str, Any]]:
        """Consumes the message returned before, then returns the next one as its map (with
        "topic"), or None after timeout seconds. Raises Refused while another consumer holds
        the channel, AuthFailed when faid refused the handshake."""
        self.commit()
        deadline = time.monotonic() + timeout
        while True:
            self._tick()
            self.monitor.check()
            left = deadline - time.monotonic()
            if not self.sock.poll(int(max(min(left, 0.1), 0) * 1000)):
                if time.monotonic() >= deadline:
                    self.monitor.check()
                    return None
                continue
            parts = self.sock.recv_multipart()
            topic = parts[0].decode("utf-8", "replace") if len(parts) > 1 else None
            m = decode_body(parts[-1])
            if topic in ("welcome", "refused", "ping"):
                if topic == "welcome":
                    if m.get("instance") != self.instance:
                        # A new faid run: its msg_numbers start again.
                        self.last = self.consumed = None
                        self.pending = False
                        self.instance = m.get("instance", "")
                    self.welcomed = True
                    self.last_ack = time.monotonic()
                elif topic == "refused":
                    self.welcomed = False
                    self.refused += 1
                    self.next_hello = time.monotonic() + self.HELLO_S
                    raise Refused(m.get("message", "refused"))
                continue
            n = m.get("msg_number")
            if isinstance(n, int):
                if self.last is not None and n <= self.last:
                    self.duplicates += 1
                    continue
                self.last = n
                self.pending = True
            m["topic"] = topic or m["type"]
            self._note(m)
            return m

    def close(self, consumed: bool = True) -> None:
        """Leaves the channel: with consumed (default) the last message returned counts as
        consumed and is acknowledged; a `bye` ends the session (what is not acknowledged stays
        held by faid for the next consumer)."""
        if consumed:
            self.commit()
        if self.welcomed:
            self._send("ack")
        try:
            self.sock.send(msgpack.packb({"type": "bye"}), zmq.NOBLOCK)
        except zmq.Again:
            pass
        self._close_socket(500)


__all__ = ["LosslessConsumer", "Refused", "load_state", "save_state"]
