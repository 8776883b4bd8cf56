"""An ophyd-async device for faid (extra `bluesky`: `pip install ./client/python[bluesky]`), so
that a bluesky RunEngine plan records faid's reduced data with the scan.

    from bluesky import RunEngine, plans as bp
    from ophyd_async.core import init_devices
    from faid.bluesky import FaidDetector
    RE = RunEngine()
    with init_devices():
        faid = FaidDetector("tcp://daq:5557", "tcp://daq:5556")
    RE(bp.count([faid], num=5))

The device is a `StandardReadable` (a step-scan detector, no EPICS): its signals are soft
signals that `trigger()` fills from faid, over the control socket (status: counters, rate,
series) and the PUB output (the latest result's profile, the start's radial axis, the
aggregates' hit rate). ophyd-async's `StandardDetector` path (a controller arming hardware and a
writer it drives) does not fit: faid is fed by the detector, not armed by the plan, and writes
its files on its own; so the scan reads what faid has reduced at each point.

- `stage()` subscribes to the output (and waits for its first message, so nothing published
  from then on is missed) and, with a `path_provider` (ophyd-async's PathProvider), points
  faid's writer at the scan's directory and file name (control command `writer`: the writer's
  target for the next series; faid names the files `NAME_<series name>.h5`);
- `trigger()` reads faid into the signals;
- `unstage()` waits until the series is reduced: every series that started while staged has
  its `end` and faid is idle with every received frame accounted for (`received = processed +
  failed + dropped`), then leaves the output.

Fly scans (`Flyable`, `WritesStreamAssets`): `kickoff()` stages and notes the series files
already in the writer's directory; `complete()` waits as unstage does, then for the writer to
close its files, and pairs the new series files (by last write) with the series ends seen;
`collect()` (after `declare_stream(det, name=..., collect=True)`) emits for each file a
`stream_resource` (HDF5, `uri` file://localhost/PATH, dataset `/entry/data/I`, chunk shape
(writer.block_frames, npt)) and a `stream_datum` of its rows (the series' `frames_processed`,
rows in publication order), data key `NAME-I`. This needs the writer on and its directory
visible from where the device runs (the same host, or the same shared file system); a writer
that dropped or skipped rows makes the datum claim rows that read as unwritten (NaN).

Signals: read (hinted) `processed`, `fps`, `hit_rate`; read `received`, `failed`, `dropped`,
`series_id`, `frame_id`, `profile` (the latest I, float32 [npt]; NaN before the first
result), `radial` (its bin centres, from the series' start);
configuration `unit`, `config_hash`, `writer_file` (the series file faid writes, "" when none)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

import numpy as np
from bluesky.protocols import Flyable, StreamAsset, Triggerable, WritesStreamAssets
from event_model import ComposeStreamResource, DataKey
from ophyd_async.core import (Array1D, AsyncStatus, PathProvider, StandardReadable,
                              StandardReadableFormat, soft_signal_r_and_setter)

from ._keys import KeySpec
from .control import Control
from .messages import decode_array
from .subscriber import Subscriber


class FaidDetector(StandardReadable, Triggerable, Flyable, WritesStreamAssets):
    """faid as an ophyd-async step-scan detector (see the module).

    control, output: faid's control and PUB endpoints; path_provider: where the writer puts
    the scan's files (None: faid's own writer.directory and names); server_key, key: CURVE;
    timeout: seconds for a control reply and for the output's first message at stage;
    unstage_timeout: seconds unstage waits for the series to be reduced (TimeoutError after)."""

    def __init__(self, control: str = "tcp://127.0.0.1:5557",
                 output: str = "tcp://127.0.0.1:5556",
                 path_provider: Optional[PathProvider] = None,
                 server_key: Optional[KeySpec] = None, key: Optional[KeySpec] = None,
                 timeout: float = 10.0, unstage_timeout: float = 600.0, name: str = ""):
        self._ctl = Control(control, timeout=timeout, server_key=server_key, key=key)
        self._output = output
        self._keys = (server_key, key)
        self._path_provider = path_provider
        self._timeout = timeout
        self._unstage_timeout = unstage_timeout
        self._sub: Optional[Subscriber] = None
        self._lock = threading.Lock()
        self._open_series: set = set()  # series started while staged and not ended yet
        self._latest: Dict[str, Any] = {}
        self._set: Dict[str, Any] = {}
        self._ended: List[Tuple[int, int]] = []  # (series_id, frames_processed) of the ends seen
        self._fly: Optional[Dict[str, Any]] = None

        def sig(key, datatype, initial, units=None):
            s, setter = soft_signal_r_and_setter(datatype, initial, units=units)
            self._set[key] = setter
            return s

        with self.add_children_as_readables(StandardReadableFormat.HINTED_SIGNAL):
            self.processed = sig("processed", int, 0)
            self.fps = sig("fps", float, 0.0, units="1/s")
            self.hit_rate = sig("hit_rate", float, 0.0)
        with self.add_children_as_readables(StandardReadableFormat.UNCACHED_SIGNAL):
            self.received = sig("received", int, 0)
            self.failed = sig("failed", int, 0)
            self.dropped = sig("dropped", int, 0)
            self.series_id = sig("series_id", int, 0)
            self.frame_id = sig("frame_id", int, -1)
            self.profile = sig("profile", Array1D[np.float32], np.zeros(0, np.float32))
            self.radial = sig("radial", Array1D[np.float64], np.zeros(0, np.float64))
        with self.add_children_as_readables(StandardReadableFormat.CONFIG_SIGNAL):
            self.unit = sig("unit", str, "")
            self.config_hash = sig("config_hash", str, "")
            self.writer_file = sig("writer_file", str, "")
        super().__init__(name=name)

    # -- the output --------------------------------------------------------------------------

    def _drain(self, wait: float = 0.0) -> None:
        """Takes every message waiting on the output (the first within wait seconds) into
        _latest; notes series started and ended."""
        sub = self._sub
        if sub is None:
            return
        m = sub.recv_map(wait)
        while m is not None:
            t = m["type"]
            if t == "result":
                self._latest["result"] = m
            elif t == "start":
                self._latest["start"] = m
                self._open_series.add(m.get("series_id"))
            elif t == "end":
                self._open_series.discard(m.get("series_id"))
                self._ended.append((m.get("series_id"), int(m.get("frames_processed", 0))))
            elif t == "aggregates":
                self._latest["aggregates"] = m
            m = sub.recv_map(0)

    def _poll(self) -> Dict[str, Any]:
        with self._lock:
            self._drain()
            st = self._ctl.status()
            out: Dict[str, Any] = {"status": st}
            out.update(self._latest)
            return out

    def _apply(self, got: Dict[str, Any]) -> None:
        st = got["status"]
        c = st["counters"]
        for k in ("processed", "received", "failed", "dropped"):
            self._set[k](int(c[k]))
        self._set["fps"](float(st["fps"]))
        self._set["series_id"](int(st["series_id"]))
        self._set["config_hash"](st["config_hash"])
        self._set["writer_file"](st.get("writer", {}).get("file", ""))
        a = got.get("aggregates")
        if a is not None:
            self._set["hit_rate"](float(a["hit_rate"]))
        r = got.get("result")
        if r is not None:
            self._set["frame_id"](int(r["frame_id"]))
            self._set["profile"](np.array(decode_array(r["I"]), dtype=np.float32))
        s = got.get("start")
        if s is not None:
            self._set["radial"](np.array(decode_array(s["radial"]), dtype=np.float64))
            self._set["unit"](s["unit"])

    # -- bluesky verbs ---------------------------------------------------------------------------

    def _stage_sync(self) -> None:
        with self._lock:
            if self._sub is None:
                self._sub = Subscriber(self._output, server_key=self._keys[0],
                                       key=self._keys[1])
                # A SUB receives only what is published after its subscription reached faid:
                # the first message (stats come every stats.interval) shows that it has.
                self._drain(self._timeout)
            self._open_series.clear()
            # The event descriptor is made at the first read, maybe before any result: the
            # profile and its axis have npt bins from the start (NaN until faid sends them).
            npt = int(self._ctl.config(key="integration.npt"))
            # The configuration is read once, for the descriptor: the unit and hash in force.
            self._set["unit"](self._ctl.config(key="integration.unit").strip("\"'"))
            self._set["config_hash"](self._ctl.status()["config_hash"])
            if "result" not in self._latest:
                self._set["profile"](np.full(npt, np.nan, np.float32))
            if "start" not in self._latest:
                self._set["radial"](np.full(npt, np.nan, np.float64))
        if self._path_provider is not None:
            info = self._path_provider(self.name)
            # faid names a file PREFIX<series name>.h5: the scan's name, then "_".
            sep = "" if info.filename[-1:] in ("_", "-", ".", "") else "_"
            self._ctl.writer(directory=str(info.directory_path), prefix=info.filename + sep)

    @AsyncStatus.wrap
    async def stage(self) -> None:
        """Subscribes to faid's output and points its writer at the scan's files."""
        await asyncio.to_thread(self._stage_sync)
        await super().stage()

    @AsyncStatus.wrap
    async def trigger(self) -> None:
        """Reads faid's status and latest output into the signals."""
        self._apply(await asyncio.to_thread(self._poll))

    def _wait_reduced(self) -> None:
        deadline = time.monotonic() + self._unstage_timeout
        while True:
            with self._lock:
                self._drain(0.1)
                st = self._ctl.status()
                c = st["counters"]
                # The writer is a consumer of its own: its queue holds the series' last results
                # and end until its thread has put them in the file and closed it.
                w = st.get("writer", {})
                written = w.get("queued_bytes", 0) == 0 and w.get("state", "off") != "writing"
                if (not self._open_series and st["state"] == "idle" and written
                        and c["received"] == c["processed"] + c["failed"] + c["dropped"]):
                    return
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    "faid: series %s not reduced and written within %g s (state %s, writer %s, "
                    "%s bytes queued for the writer)" % (
                        sorted(self._open_series), self._unstage_timeout, st["state"],
                        w.get("state", "off"), w.get("queued_bytes", 0)))

    @AsyncStatus.wrap
    async def unstage(self) -> None:
        """Waits until what faid received is reduced (every series started while staged has
        ended) and its writer has closed the series' files, then leaves the output."""
        try:
            await asyncio.to_thread(self._wait_reduced)
            self._apply(await asyncio.to_thread(self._poll))
        finally:
            with self._lock:
                if self._sub is not None:
                    self._sub.close()
                    self._sub = None
            await super().unstage()

    # -- fly scan: the writer's files as stream resources -----------------------------------------

    def _writer_dir(self) -> Optional[str]:
        if self._path_provider is not None:
            return str(self._path_provider(self.name).directory_path)
        v = self._ctl.config(key="writer.directory").strip().strip("\"'")
        return None if v in ("null", "~", "") else v

    @staticmethod
    def _series_files(directory: Optional[str]) -> Dict[str, int]:
        """The series files of a directory (hits files left out) with their mtimes."""
        out: Dict[str, int] = {}
        if directory and os.path.isdir(directory):
            for e in os.scandir(directory):
                if e.name.endswith(".h5") and not e.name.endswith("_hits.h5") and e.is_file():
                    out[e.path] = e.stat().st_mtime_ns
        return out

    def _kickoff_sync(self) -> None:
        self._stage_sync()
        with self._lock:
            self._ended.clear()
        d = self._writer_dir()
        self._fly = {"dir": d, "before": set(self._series_files(d)), "files": [],
                     "npt": int(self._ctl.config(key="integration.npt")),
                     "block": int(self._ctl.config(key="writer.block_frames")),
                     "emitted": {}, "composer": ComposeStreamResource()}

    @AsyncStatus.wrap
    async def kickoff(self) -> None:
        """Starts a fly scan: stage(), and notes the writer's files already there."""
        await asyncio.to_thread(self._kickoff_sync)

    def _complete_sync(self) -> None:
        self._wait_reduced()
        fly = self._fly
        if fly is None:
            raise RuntimeError("faid: complete() without kickoff()")
        # The writer thread files what the publisher sent on its own time: wait until it has
        # closed every series file (the end written) and holds nothing more.
        deadline = time.monotonic() + self._unstage_timeout
        while fly["dir"]:
            w = self._ctl.status()["writer"]
            if w["files_open"] == 0 and w["queued_bytes"] == 0:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError("faid: the writer still holds %d files after %g s"
                                   % (w["files_open"], self._unstage_timeout))
            time.sleep(0.05)
        with self._lock:
            ended = list(self._ended)
        # The series files that appeared during the fly scan, in the order they were last
        # written (= the order the series ended), paired with the ends seen on the output.
        new = sorted((t, p) for p, t in self._series_files(fly["dir"]).items()
                     if p not in fly["before"])
        if fly["dir"] and len(new) != len(ended):
            raise RuntimeError("faid: %d series ended during the scan but %d new files in %s"
                               % (len(ended), len(new), fly["dir"]))
        fly["files"] = [(p, rows) for (_, p), (_, rows) in zip(new, ended)] if fly["dir"] else []

    @AsyncStatus.wrap
    async def complete(self) -> None:
        """Ends a fly scan: waits until the series are reduced (as unstage) and finds the
        series files faid wrote meanwhile."""
        await asyncio.to_thread(self._complete_sync)

    async def describe_collect(self) -> Dict[str, DataKey]:
        """One external key: the profiles I in the writer's files (`/entry/data/I`)."""
        fly = self._fly or {"npt": int(await asyncio.to_thread(self._ctl.config,
                                                               "integration.npt"))}
        return {self.name + "-I": DataKey(source="faid writer: /entry/data/I",
                                          shape=[1, fly["npt"]], dtype="array",
                                          dtype_numpy="<f4", external="STREAM:")}

    async def get_index(self) -> int:
        """Profiles written into the files of this fly scan."""
        return sum(rows for _, rows in (self._fly or {}).get("files", []))

    async def collect_asset_docs(self, index: Optional[int] = None) -> AsyncIterator[StreamAsset]:
        """A stream resource per series file (the HDF5 dataset /entry/data/I, rows in
        publication order) and stream datums for its rows not emitted yet."""
        fly = self._fly
        if fly is None:
            return
        for path, rows in fly["files"]:
            done = fly["emitted"].get(path)
            if done is None:
                bundle = fly["composer"](
                    mimetype="application/x-hdf5", uri="file://localhost" + os.path.abspath(path),
                    data_key=self.name + "-I",
                    parameters={"dataset": "/entry/data/I",
                                "chunk_shape": (fly["block"], fly["npt"])},
                    uid=None, validate=True)
                done = fly["emitted"][path] = [bundle, 0]
                yield "stream_resource", bundle.stream_resource_doc
            if rows > done[1]:
                yield "stream_datum", done[0].compose_stream_datum({"start": done[1],
                                                                    "stop": rows})
                done[1] = rows


__all__ = ["FaidDetector"]
