"""CURVE key files of `faidctl keygen` (docs/security.md) and the socket set-up they feed."""

from __future__ import annotations

import os
from typing import Optional, Tuple, Union

import zmq

KeyPair = Tuple[bytes, bytes]
#: A key given by a caller: a file (`NAME.pub`, `CLIENT.key`), or the z85 key(s) themselves.
KeySpec = Union[str, "os.PathLike[str]", bytes, KeyPair]


class AuthFailed(Exception):
    """The handshake with faid was refused: CURVE key not authorized, wrong server key, or one
    side uses CURVE and the other does not."""


def read_key(path: Union[str, "os.PathLike[str]"], secret: bool = False):
    """A key file of `faidctl keygen` (ZeroMQ certificate layout: `public-key = "..."`,
    `secret-key = "..."`) or a bare 40-character z85 line: the public key, or with secret=True
    the (public, secret) pair, as bytes. Raises ValueError naming the file when it holds none."""
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


def apply_curve(sock: zmq.Socket, server_key: Optional[KeySpec], key: Optional[KeySpec]) -> bool:
    """Makes sock a CURVE client of faid (before connect): server_key is faid's public key
    (`NAME.pub` or z85 bytes), key this client's pair (`CLIENT.key` or a (public, secret) tuple).
    Both None leaves the socket plain; returns whether CURVE is on."""
    if server_key is None and key is None:
        return False
    if server_key is None or key is None:
        raise ValueError("CURVE needs both server_key (faid's .pub) and key (CLIENT.key)")
    if not zmq.has("curve"):
        raise AuthFailed("this libzmq has no CURVE")
    srv = server_key if isinstance(server_key, bytes) else read_key(server_key)
    pub, sec = key if isinstance(key, tuple) else read_key(key, secret=True)
    sock.curve_serverkey = srv
    sock.curve_publickey = pub
    sock.curve_secretkey = sec
    return True


class HandshakeMonitor:
    """Watches a socket's handshakes and turns a refused one into AuthFailed with the reason
    (a faid that gets the other mechanism closes without saying why, so a few such failures in
    a row count as refused; libzmq retries every 100 ms)."""

    NODETAIL_LIMIT = 3

    def __init__(self, sock: zmq.Socket, endpoint: str, curve: bool):
        self.sock, self.endpoint, self.curve = sock, endpoint, curve
        self.nodetail = 0
        self.mon = sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED)

    def check(self) -> None:
        """Raises AuthFailed when the monitor reported a refused handshake."""
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

    def close(self) -> None:
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.mon.close(0)
