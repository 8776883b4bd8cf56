"""faid.tango (issue 19): the Tango device server against the real daemon, driven by a real
Tango client (pytango's DeviceProxy through DeviceTestContext, no Tango database): State and
Status, the counters, the latest profile and its axis, the hit rate, and the commands Reload,
Reset and Stop."""

import os
import sys
import time

import numpy as np
import pytest

from test_daemon import LONG, Receiver, Sender, daemons, ep, free_port, tmpdir_  # noqa: F401
from test_peaks import PEAKS, spot_frames

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
sys.path.insert(0, os.path.join(SRC, "client", "python"))

tango = pytest.importorskip("tango", reason="extra `tango` of client/python not installed")
from tango.test_context import DeviceTestContext  # noqa: E402

from faid.tango import Faid  # noqa: E402


def context(d, **props):
    p = {"ControlEndpoint": ep(d.ports["ctl"]), "OutputEndpoint": ep(d.ports["out"]),
         "Timeout": 2.0}
    p.update(props)
    # The device server's port from the harness's locked counter, like every port of the tests.
    return DeviceTestContext(Faid, properties=p, host="127.0.0.1", port=free_port(),
                             process=False, timeout=LONG)


def test_device_reads_faid_and_runs_its_commands(daemons):
    d = daemons(devices="ref", extra=PEAKS)
    rx = Receiver(d)
    rx.settle()
    with context(d) as proxy:
        assert proxy.state() == tango.DevState.ON and proxy.faid_state == "idle"
        assert "faid idle" in proxy.status()
        # A SUB sees only what is published after its subscription reached faid: it has once a
        # message came (stats every 0.5 s).
        for _ in range(LONG * 20):
            if proxy.messages_received > 0:
                break
            time.sleep(0.05)
        assert proxy.messages_received > 0
        imgs, _ = spot_frames(6)
        tx = Sender(d)
        tx.start(series_id=21, nimages=len(imgs))
        for i, img in enumerate(imgs):
            tx.image(i, img, series_id=21)
        tx.end(series_id=21)
        rx.collect_until_end()
        d.wait_counters(lambda c: c["processed"] == 6, "6 frames processed")
        assert proxy.processed == 6 and proxy.received == 6 and proxy.failed == 0
        assert proxy.dropped == 0 and proxy.series_id == 21
        assert proxy.config_hash == d.status()["config_hash"]
        assert proxy.unit == "q_nm^-1"
        start = rx.of("start")[0]
        assert np.array_equal(proxy.radial, np.frombuffer(start["radial"]["data"], "<f8"))
        last = max(rx.of("result"), key=lambda r: r["msg_number"])
        for _ in range(LONG * 20):
            if proxy.frame_id == last["frame_id"]:
                break
            time.sleep(0.05)
        assert np.array_equal(proxy.profile, np.frombuffer(last["I"]["data"], "<f4"))
        for _ in range(LONG * 20):  # aggregates every 0.2 s: wait for one counting every frame
            if proxy.hits == 3:
                break
            time.sleep(0.05)
        assert proxy.hits == 3 and proxy.hit_rate == 0.5
        v = proxy.setup_version
        assert proxy.Reload("") == v + 1 and proxy.setup_version == v + 1
        with pytest.raises(tango.DevFailed, match="nonexistent"):
            proxy.Reload("/nonexistent/faid.yaml")
        assert proxy.setup_version == v + 1
        proxy.Reset()
        assert d.status()["latency_us"]["samples"] == 0
        proxy.Stop()
        assert d.proc.wait(LONG) == 0
        assert proxy.state() == tango.DevState.FAULT
        assert "does not answer" in proxy.status()


def test_device_without_faid_is_in_fault():
    p = {"ControlEndpoint": "tcp://127.0.0.1:%d" % free_port(), "Timeout": 0.3,
         "OutputEndpoint": "tcp://127.0.0.1:%d" % free_port()}
    with DeviceTestContext(Faid, properties=p, host="127.0.0.1", port=free_port(),
                           process=False, timeout=LONG) as proxy:
        assert proxy.state() == tango.DevState.FAULT
        assert proxy.faid_state == "unreachable"
        with pytest.raises(tango.DevFailed, match="did not answer"):
            proxy.Reset()
