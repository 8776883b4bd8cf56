#!/usr/bin/env python3
"""Example subscriber for faid's output (proto/PROTOCOL.md section 3), in a few lines of Python.

Every output message is [topic, body] with body a msgpack map whose first key is "type"; arrays are
maps {"dtype", "shape", "data"} that numpy reads with frombuffer. This script subscribes to the
monitoring PUB socket (or consumes the lossless channel with --lossless), prints one line per
result and a summary, and with --plot draws the latest profile with matplotlib (in a window, or
into a PNG file with --plot-file, which works without a display). With peak finding on
(peaks.algorithm in faid's configuration) each result line carries num_peaks and the hit flag,
the plot marks the frame's peaks on its profile over the sigma-clipped background, and a second
panel shows the hit rate that the `aggregates` messages report.

The lossless channel (proto/PROTOCOL.md 3.6) is a ROUTER in faid and a DEALER here: the
subscriber says hello with a credit, acknowledges what it has consumed (cumulatively, by
msg_number), repeats the hello every second while another consumer holds the channel, and drops
messages faid re-sends that it already has.

A faid running with CURVE (security.curve, docs/security.md) needs faid's public key and a key
pair of this client whose public half is in faid's security.authorized_keys: --server-key
FAID.pub --key CLIENT.key (files of `faidctl keygen`). A refused handshake ends the script with
the reason instead of waiting for messages that never come.

Needs pyzmq, msgpack and numpy; matplotlib only for --plot. The code is the `faid` package
beside this script (`pip install ./client/python` installs it, with this command as `faid-sub`):
the script runs from a checkout without installing anything.

    python3 faid_subscriber.py --from tcp://127.0.0.1:5556 --count 100
    python3 faid_subscriber.py --from tcp://host:5558 --lossless --plot --plot-file latest.png
    python3 faid_subscriber.py --from tcp://host:5556 --server-key faid.pub --key me.key
"""

import os
import sys

# The package next to this script, installed or not.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import faid  # noqa: E402
from faid import AuthFailed, LosslessConsumer, Refused, decode_array  # noqa: E402,F401
from faid.cli import main  # noqa: E402


def Subscriber(endpoint, lossless=False, topics=faid.TOPICS, rcvhwm=0, name=None, credit=256,
               server_key=None, key=None):
    """This script's former class, for code that imported it: a faid.Subscriber, or with
    lossless a faid.LosslessConsumer, whose recv() returns the message maps (with "topic")."""
    if lossless:
        s = LosslessConsumer(endpoint, name=name, credit=credit, server_key=server_key, key=key)
    else:
        s = faid.Subscriber(endpoint, topics, server_key=server_key, key=key, rcvhwm=rcvhwm)
    s.recv = s.recv_map
    return s

if __name__ == "__main__":
    sys.exit(main(prog="faid_subscriber.py"))
