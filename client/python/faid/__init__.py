"""Python client of faid, the fast azimuthal integration daemon.

- `Subscriber`: the monitoring output (PUB), messages as dataclasses with numpy arrays;
- `MergedSubscriber`: several instances' outputs as one stream (start once, results in frame
  order, one end with summed totals and the frames never seen);
- `LosslessConsumer`: the lossless channel, exactly once to the application, resumable;
- `Control`: the ZeroMQ control socket (status, reload, reset, stop, devices, writer target);
- `Rest`: the REST API under /api/v1 (bearer token, TLS);
- `faid.bluesky` (extra `bluesky`): an ophyd-async device; `faid.tango` (extra `tango`): a
  Tango device server.

The wire protocol is proto/PROTOCOL.md of the faid sources."""

from ._keys import AuthFailed, read_key
from .control import Control, FaidError
from .lossless import LosslessConsumer, Refused
from .merge import Lost, MergedEnd, MergedSubscriber, Mismatch
from .messages import (Aggregates, End, Error, Message, Result, Start, Stats, decode_array,
                       from_map)
from .rest import Rest, RestError
from .subscriber import TOPICS, BadMessage, Subscriber

__version__ = "0.1.0"

__all__ = ["Subscriber", "MergedSubscriber", "MergedEnd", "Lost", "Mismatch", "LosslessConsumer",
           "Control", "Rest", "FaidError", "RestError", "AuthFailed", "Refused", "BadMessage",
           "read_key", "decode_array", "from_map", "Message", "Start", "Result", "End", "Error",
           "Stats", "Aggregates", "TOPICS"]
