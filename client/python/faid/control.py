"""faid's control socket (`control.endpoint`, a REP; proto/PROTOCOL.md section 4).

    from faid import Control
    ctl = Control("tcp://127.0.0.1:5557")
    print(ctl.status()["counters"]["processed"])
    ctl.reload("/etc/faid/beamtime.yaml")

Every request goes over a fresh REQ socket, so a reply lost with a timeout cannot wedge the next
request. A reply with `ok` false raises FaidError (its `error` and `code`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import msgpack
import zmq

from ._keys import KeySpec, apply_curve


class FaidError(RuntimeError):
    """faid answered a request with an error: `code` the symbolic faid error (or the REST
    problem's type), `key` the faulty key where one is named, `reply` the whole answer."""

    def __init__(self, message: str, code: str = "", key: Optional[str] = None,
                 reply: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.code, self.key, self.reply = code, key, reply or {}


class Control:
    """Client of the control socket. timeout: seconds to wait for each reply (TimeoutError
    after); server_key, key: CURVE as for Subscriber."""

    def __init__(self, endpoint: str = "tcp://127.0.0.1:5557", timeout: float = 10.0,
                 server_key: Optional[KeySpec] = None, key: Optional[KeySpec] = None,
                 context: Optional[zmq.Context] = None):
        self.endpoint = endpoint
        self.timeout = timeout
        self.server_key, self.key = server_key, key
        self.ctx = context or zmq.Context.instance()

    def request(self, cmd: str, **args: Any) -> Dict[str, Any]:
        """Sends {"cmd": cmd, **args} and returns the reply map; raises FaidError when `ok` is
        false, TimeoutError when no reply comes within the timeout."""
        s = self.ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        try:
            apply_curve(s, self.server_key, self.key)
            s.connect(self.endpoint)
            s.send(msgpack.packb(dict(cmd=cmd, **args)))
            if not s.poll(int(self.timeout * 1000)):
                raise TimeoutError("faid at %s did not answer %r within %g s"
                                   % (self.endpoint, cmd, self.timeout))
            r = msgpack.unpackb(s.recv(), raw=False)
        finally:
            s.close(0)
        if not isinstance(r, dict) or "ok" not in r:
            raise FaidError("faid at %s answered %r with something that is not a reply map"
                            % (self.endpoint, cmd))
        if not r["ok"]:
            raise FaidError("%s: %s" % (cmd, r.get("error", "failed")), r.get("code", ""),
                            None, r)
        return r

    def ping(self) -> Dict[str, Any]:
        """`protocol_version` and `software_version`."""
        return self.request("ping")

    def status(self) -> Dict[str, Any]:
        """The status map (state, counters, drops, errors, queue, fps, latency, lossless,
        devices, memory, writer)."""
        return self.request("status")

    def devices(self) -> List[Dict[str, Any]]:
        """Per compute device: index, spec, name, processed, failed, busy (status `devices`)."""
        return self.status()["devices"]

    def config(self, key: Optional[str] = None) -> str:
        """The effective configuration as YAML, or with key one option's value (YAML flow)."""
        if key is not None:
            return self.request("config", key=key)["value"]
        return self.request("config")["config"]

    def reload(self, path: Optional[str] = None) -> int:
        """Re-reads the start file (or reads path once); returns the new setup_version. On
        failure FaidError, and faid keeps its setup."""
        r = self.request("reload", path=path) if path else self.request("reload")
        return r.get("setup_version", 0)

    def reset(self) -> None:
        """Clears the aggregates (latency, rates, hit rate, peak histogram, powder pattern)."""
        self.request("reset")

    def stop(self) -> None:
        """Stops faid as SIGTERM does, after it replies."""
        self.request("stop")

    def writer(self, directory: Optional[str] = None,
               prefix: Optional[str] = None) -> Dict[str, Any]:
        """The writer's target for the next series: with directory and/or prefix sets it
        (control command `writer`, docs/control.md); returns the reply. A faid without the
        command answers FaidError (unknown command)."""
        args = {k: v for k, v in (("directory", directory), ("prefix", prefix)) if v is not None}
        return self.request("writer", **args)


__all__ = ["Control", "FaidError"]
