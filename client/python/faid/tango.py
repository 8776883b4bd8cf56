"""A Tango device server for faid (extra `tango`: `pip install ./client/python[tango]`; console
script `faid-tango`), so that BLISS, Sardana or any Tango client drives faid as a device.

    faid-tango INSTANCE            # a device of class Faid registered in the Tango database,
                                   # device properties ControlEndpoint, OutputEndpoint, ...

The device talks to faid over its control socket (status, reload, reset, stop) and its PUB
output (the latest profile, the hit rate of the aggregates messages):

- State: ON (faid idle), RUNNING (a series open), CLOSE (faid stopping), FAULT (faid does not
  answer); Status: a line with faid's state, series and counters, or why it does not answer;
- attributes (read-only): `faid_state`, `series_id`, `setup_version`, `config_hash`,
  `received`, `processed`, `failed`, `dropped` (counters), `fps`, `hit_rate`, `hits`,
  `messages_received` (from the output), `frame_id` and `profile` (the latest result's I, a spectrum) with `radial` (its bin
  centres) and `unit`;
- commands: `Reload` (a path, or "" for faid's start file; returns the new setup version),
  `Reset` (clears faid's aggregates), `Stop` (stops faid).

Device properties: `ControlEndpoint` (default tcp://127.0.0.1:5557), `OutputEndpoint`
(tcp://127.0.0.1:5556), `ServerKey` and `ClientKey` (CURVE key files, both or neither),
`Timeout` (seconds for a control reply, default 2: under a Tango client's default 3 s, so a
faid that does not answer makes the device FAULT, not the client's call time out)."""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
from tango import AttrWriteType, DevState
from tango.server import Device, attribute, command, device_property, run

from .control import Control
from .messages import decode_array
from .subscriber import Subscriber

_STATES = {"idle": DevState.ON, "running": DevState.RUNNING, "stopping": DevState.CLOSE}
_MAX_BINS = 1 << 20


class Faid(Device):
    """faid, the fast azimuthal integration daemon, as a Tango device (see the module)."""

    ControlEndpoint = device_property(dtype=str, default_value="tcp://127.0.0.1:5557")
    OutputEndpoint = device_property(dtype=str, default_value="tcp://127.0.0.1:5556")
    ServerKey = device_property(dtype=str, default_value="")
    ClientKey = device_property(dtype=str, default_value="")
    # Below a Tango client's default timeout (3 s), so that a faid that does not answer makes
    # the device FAULT rather than the client's call time out.
    Timeout = device_property(dtype=float, default_value=2.0)

    def init_device(self) -> None:
        super().init_device()
        keys = (self.ServerKey or None, self.ClientKey or None)
        self._ctl = Control(self.ControlEndpoint, timeout=self.Timeout, server_key=keys[0],
                            key=keys[1])
        self._sub: Optional[Subscriber] = Subscriber(self.OutputEndpoint, server_key=keys[0],
                                                     key=keys[1])
        self._latest: Dict[str, Any] = {}
        self._messages = 0
        self._status: Optional[Dict[str, Any]] = None
        self._why = ""

    def delete_device(self) -> None:
        if self._sub is not None:
            self._sub.close()
            self._sub = None

    # -- faid ------------------------------------------------------------------------------------

    def _refresh(self) -> Optional[Dict[str, Any]]:
        """faid's status now (None when it does not answer, the reason kept for Status)."""
        try:
            self._status = self._ctl.status()
            self._why = ""
        except (TimeoutError, OSError, RuntimeError) as e:
            self._status, self._why = None, str(e)
        return self._status

    def _drain(self) -> None:
        """Takes every message waiting on the output: the latest start, result, aggregates."""
        sub = self._sub
        m = sub.recv_map(0) if sub is not None else None
        while m is not None:
            self._messages += 1
            if m["type"] in ("start", "result", "aggregates"):
                self._latest[m["type"]] = m
            m = sub.recv_map(0)

    def _counter(self, key: str) -> int:
        st = self._refresh()
        return int(st["counters"][key]) if st else 0

    def dev_state(self) -> DevState:
        st = self._refresh()
        return DevState.FAULT if st is None else _STATES.get(st["state"], DevState.UNKNOWN)

    def dev_status(self) -> str:
        st = self._refresh()
        if st is None:
            return "faid at %s does not answer: %s" % (self.ControlEndpoint, self._why)
        c = st["counters"]
        return ("faid %s, series %d, setup %d: received %d, processed %d, failed %d, dropped %d"
                % (st["state"], st["series_id"], st["setup_version"], c["received"],
                   c["processed"], c["failed"], c["dropped"]))

    # -- attributes ------------------------------------------------------------------------------

    @attribute(dtype=str, access=AttrWriteType.READ, doc="faid's state: idle, running, stopping")
    def faid_state(self) -> str:
        st = self._refresh()
        return st["state"] if st else "unreachable"

    @attribute(dtype=int, doc="current or last series")
    def series_id(self) -> int:
        st = self._refresh()
        return int(st["series_id"]) if st else 0

    @attribute(dtype=int, doc="the reduction setup in force")
    def setup_version(self) -> int:
        st = self._refresh()
        return int(st["setup_version"]) if st else 0

    @attribute(dtype=str, doc="hash of the reduction parameters in force")
    def config_hash(self) -> str:
        st = self._refresh()
        return st["config_hash"] if st else ""

    @attribute(dtype=int, doc="frames received (image messages)")
    def received(self) -> int:
        return self._counter("received")

    @attribute(dtype=int, doc="frames reduced")
    def processed(self) -> int:
        return self._counter("processed")

    @attribute(dtype=int, doc="frames answered with an error")
    def failed(self) -> int:
        return self._counter("failed")

    @attribute(dtype=int, doc="frames dropped by the backpressure policy")
    def dropped(self) -> int:
        return self._counter("dropped")

    @attribute(dtype=float, unit="1/s", doc="results per second over the last stats interval")
    def fps(self) -> float:
        st = self._refresh()
        return float(st["fps"]) if st else 0.0

    @attribute(dtype=float, doc="hit fraction over faid's hit-rate window (peaks on; else 0)")
    def hit_rate(self) -> float:
        self._drain()
        a = self._latest.get("aggregates")
        return float(a["hit_rate"]) if a else 0.0

    @attribute(dtype=int, doc="hits since faid's start or reset (peaks on; else 0)")
    def hits(self) -> int:
        self._drain()
        a = self._latest.get("aggregates")
        return int(a["hits"]) if a else 0

    @attribute(dtype=int, doc="messages the device received from faid's output (stats every "
               "stats.interval: once one came, the device sees everything published)")
    def messages_received(self) -> int:
        self._drain()
        return self._messages

    @attribute(dtype=int, doc="frame of the latest profile (-1: none yet)")
    def frame_id(self) -> int:
        self._drain()
        r = self._latest.get("result")
        return int(r["frame_id"]) if r else -1

    @attribute(dtype=(np.float32,), max_dim_x=_MAX_BINS, doc="the latest result's profile I")
    def profile(self) -> np.ndarray:
        self._drain()
        r = self._latest.get("result")
        return np.array(decode_array(r["I"])) if r else np.zeros(0, np.float32)

    @attribute(dtype=(np.float64,), max_dim_x=_MAX_BINS, doc="the profile's bin centres")
    def radial(self) -> np.ndarray:
        self._drain()
        s = self._latest.get("start")
        return np.array(decode_array(s["radial"])) if s else np.zeros(0, np.float64)

    @attribute(dtype=str, doc="unit of radial (q_nm^-1, 2th_deg, r_mm, ...)")
    def unit(self) -> str:
        self._drain()
        s = self._latest.get("start")
        return s["unit"] if s else ""

    # -- commands --------------------------------------------------------------------------------

    @command(dtype_in=str, doc_in="configuration file to read once, or \"\" for faid's start "
             "file", dtype_out=int, doc_out="the new setup version")
    def Reload(self, path: str) -> int:
        return self._ctl.reload(path or None)

    @command(doc_in="clears faid's aggregates (latency, rates, hit rate, peak statistics)")
    def Reset(self) -> None:
        self._ctl.reset()
        self._latest.pop("aggregates", None)

    @command(doc_in="stops faid (as SIGTERM)")
    def Stop(self) -> None:
        self._ctl.stop()


def main(args=None, **kwargs):
    """`faid-tango INSTANCE`: runs the device server (pytango's `run`)."""
    return run((Faid,), args=args, **kwargs)


if __name__ == "__main__":
    main()
