"""faid's output messages (proto/PROTOCOL.md section 3) as dataclasses with numpy arrays.

Every message keeps its whole decoded map in `raw` (keys this module does not name included, as
the protocol asks of a receiver); the fields below are the ones a program usually needs. Arrays
(maps of `dtype`, `shape`, `data`) become read-only numpy arrays that view the message bytes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Union

import numpy as np


def decode_array(a: Dict[str, Any]) -> np.ndarray:
    """A protocol array map -> numpy array (a view on the message bytes, read-only)."""
    return np.frombuffer(a["data"], dtype=np.dtype(a["dtype"])).reshape(a["shape"])


def is_array(v: Any) -> bool:
    """Whether v is a protocol array map (`dtype`, `shape`, `data`; not a compressed one)."""
    return (isinstance(v, dict) and "dtype" in v and "shape" in v and "data" in v
            and "encoding" not in v)


@dataclass
class Message:
    """Any output message: its type, its topic and the whole decoded map."""
    type: str = ""
    topic: str = ""
    msg_number: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Start(Message):
    """`start` (3.1): a series begins, or results start using a new reduction setup."""
    series_id: int = 0
    series_unique_id: str = ""
    reason: str = ""
    nimages: int = -1
    setup_version: int = 0
    config_hash: str = ""
    unit: str = ""
    radial: Optional[np.ndarray] = None
    azimuthal: Optional[np.ndarray] = None
    geometry: Dict[str, Any] = field(default_factory=dict)
    parameters: Dict[str, Any] = field(default_factory=dict)
    devices: list = field(default_factory=list)
    user_data: Any = None


@dataclass
class Result(Message):
    """`result` (3.2): one reduced frame. `arrays` holds every array of the message by key
    (`I`, `sigma`, `std`, `count`, the cake and peak arrays when present)."""
    series_id: int = 0
    series_unique_id: str = ""
    frame_id: int = 0
    setup_version: int = 0
    device: int = 0
    I: Optional[np.ndarray] = None  # noqa: E741 (the protocol's name)
    sigma: Optional[np.ndarray] = None
    std: Optional[np.ndarray] = None
    count: Optional[np.ndarray] = None
    num_peaks: Optional[int] = None
    is_hit: Optional[bool] = None
    latency_us: float = 0.0
    timestamp: Optional[float] = None
    user_data: Any = None
    arrays: Dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: faid.merge: delivered after later frames (older than what the reorder window let through)
    late: bool = False


@dataclass
class End(Message):
    """`end` (3.3): every frame of the series is accounted for."""
    series_id: int = 0
    series_unique_id: str = ""
    reason: str = ""
    frames_received: int = 0
    frames_processed: int = 0
    frames_failed: int = 0
    frames_dropped: int = 0
    incomplete: bool = False


@dataclass
class Error(Message):
    """`error` (3.5): a frame or message faid refused."""
    series_id: int = 0
    frame_id: Optional[int] = None
    code: str = ""
    stage: str = ""
    message: str = ""


@dataclass
class Stats(Message):
    """`stats` (3.4): the control `status` reply, published periodically (PUB only)."""
    state: str = ""
    fps: float = 0.0
    counters: Dict[str, int] = field(default_factory=dict)


@dataclass
class Aggregates(Message):
    """`aggregates` (3.4a): hit rate and peak statistics (PUB only, peaks on)."""
    frames: int = 0
    hits: int = 0
    peaks: int = 0
    hit_rate: float = 0.0
    hit_rate_history: Optional[np.ndarray] = None
    hit_rate_timestamp_history: Optional[np.ndarray] = None
    num_peaks_histogram: Optional[np.ndarray] = None


AnyMessage = Union[Start, Result, End, Error, Stats, Aggregates, Message]

_CLASSES = {"start": Start, "result": Result, "end": End, "error": Error, "stats": Stats,
            "aggregates": Aggregates}


def from_map(m: Dict[str, Any], topic: Optional[str] = None) -> AnyMessage:
    """The dataclass of a decoded output map (a plain Message for a type this module does not
    know); arrays decoded, every key kept in `raw`."""
    cls = _CLASSES.get(m.get("type"), Message)
    kw: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in ("raw", "topic", "arrays") or f.name not in m:
            continue
        v = m[f.name]
        kw[f.name] = decode_array(v) if is_array(v) else v
    obj = cls(**kw)
    obj.topic = topic or m.get("type", "")
    obj.raw = m
    if cls is Result:
        obj.arrays = {k: decode_array(v) for k, v in m.items() if is_array(v)}
    return obj
