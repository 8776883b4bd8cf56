"""The Python package `faid` (client/python, issue 19) against the real daemon: the subscriber's
dataclasses and numpy arrays, the lossless consumer's exactly-once delivery across a restart of
the consumer (state file), the ZeroMQ control client, the REST client (skipped only while the
daemon has no /api/v1, docs/control.md), and the package itself (a wheel with its modules and
console scripts, built offline).

The tests import the package from the checkout (client/python), so they test these sources
whether or not an older copy is installed in the environment."""

import os
import shutil
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from test_daemon import (LONG, Sender, daemons, ep, frames, free_port,  # noqa: F401
                         tmpdir_)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
PKG = os.path.join(SRC, "client", "python")
sys.path.insert(0, PKG)

import faid  # noqa: E402
from faid import Control, FaidError, LosslessConsumer, Rest, RestError, Subscriber  # noqa: E402


def send_series(d, n, series_id=1, nimages=None):
    tx = Sender(d)
    imgs = frames(3)
    tx.start(series_id=series_id, nimages=n if nimages is None else nimages)
    for i in range(n):
        tx.image(i, imgs[i % 3], series_id=series_id)
    tx.end(series_id=series_id)
    return tx


def test_wheel_has_modules_and_console_scripts(tmp_path):
    # Built without network and without build isolation, from the setuptools already installed,
    # out of a copy (setuptools leaves build/ and faid.egg-info/ beside the sources).
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path), str(src)], capture_output=True, text=True,
                       timeout=LONG)
    assert r.returncode == 0, r.stderr
    whl = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
    assert len(whl) == 1 and whl[0].startswith("faid-"), whl
    with zipfile.ZipFile(tmp_path / whl[0]) as z:
        names = set(z.namelist())
        mods = {f for f in os.listdir(os.path.join(PKG, "faid")) if f.endswith(".py")}
        assert {"subscriber.py", "lossless.py", "control.py", "rest.py", "cli.py"} <= mods
        for mod in mods:  # every module of the sources ships
            assert "faid/" + mod in names, mod
        meta = z.read([n for n in names if n.endswith("/METADATA")][0]).decode()
        eps = z.read([n for n in names if n.endswith("/entry_points.txt")][0]).decode()
    for req in ("numpy", "pyzmq", "msgpack"):
        assert "Requires-Dist: %s" % req in meta, req
    assert "Provides-Extra: bluesky" in meta and "Provides-Extra: tango" in meta
    assert 'ophyd-async; extra == "bluesky"' in meta and 'pytango; extra == "tango"' in meta
    assert "faid-sub = faid.cli:main" in eps and "faid-tango = faid.tango:main" in eps


def test_subscriber_messages_as_dataclasses(daemons):
    d = daemons()
    with Subscriber(ep(d.ports["out"])) as sub:
        # A SUB sees only what is published after its subscription arrived: wait for a stats
        # message (stats.interval 0.5 s), which proves the subscription is in place.
        for m in sub.messages(timeout=LONG):
            if isinstance(m, faid.Stats):
                assert m.state == "idle" and "processed" in m.counters
                break
        send_series(d, 5, series_id=7)
        got = list(sub.messages(timeout=LONG, until_end=True))
    starts = [m for m in got if isinstance(m, faid.Start)]
    results = [m for m in got if isinstance(m, faid.Result)]
    ends = [m for m in got if isinstance(m, faid.End)]
    assert len(starts) == 1 and starts[0].series_id == 7 and starts[0].nimages == 5
    assert starts[0].unit == "q_nm^-1" and starts[0].radial.shape == (64,)
    assert starts[0].radial.dtype == np.float64 and np.all(np.diff(starts[0].radial) > 0)
    assert sorted(r.frame_id for r in results) == list(range(5))
    for r in results:
        assert r.series_id == 7 and r.I.dtype == np.float32 and r.I.shape == (64,)
        assert set(("I", "sigma", "std", "count")) <= set(r.arrays)
        assert r.raw["type"] == "result" and r.topic == "result"
        assert np.array_equal(r.arrays["I"], r.I)
    assert len(ends) == 1 and ends[0].frames_processed == 5 and ends[0].reason == "end"
    assert sub.lost == 0
    x, unit = sub.radial(7, 64)
    assert unit == "q_nm^-1" and np.array_equal(x, starts[0].radial)


def consume(c, n, into):
    """Takes n series-stream messages from consumer c into the list `into`."""
    while len(into) < n:
        m = c.recv(LONG)
        assert m is not None, "no message within %d s" % LONG
        into.append(m)


def test_lossless_exactly_once_across_consumer_restart(daemons, tmp_path):
    d = daemons(lossless=True)
    state = str(tmp_path / "consumer.state")
    n = 20
    a = LosslessConsumer(ep(d.ports["lossless"]), name="store", credit=8, state_file=state)
    send_series(d, n, series_id=3)
    first = []
    consume(a, 9, first)   # the start and 8 results
    a.commit()             # the application has stored the 9th too
    # The consumer dies: no ack for what it took last, no bye. faid still holds those messages.
    a._close_socket(0)
    saved = faid.lossless.load_state(state)
    assert saved[1] == first[-1].msg_number and len(saved[0]) == 16
    b = LosslessConsumer(ep(d.ports["lossless"]), name="store", credit=8, state_file=state)
    rest = []
    while not rest or rest[-1].type != "end":
        consume(b, len(rest) + 1, rest)
    b.close()
    nums = [m.msg_number for m in first + rest]
    assert nums == list(range(n + 2)), nums  # start, n results, end: each exactly once
    ids = sorted(m.frame_id for m in first + rest if m.type == "result")
    assert ids == list(range(n))
    assert faid.lossless.load_state(state)[1] == n + 1
    # The final ack reaches faid on its own time: wait for it to forget every message.
    for _ in range(LONG * 10):
        st = d.status()["lossless"]
        if st["held"] == 0:
            break
        time.sleep(0.1)
    assert st["held"] == 0 and st["acked"] >= n + 2 and st["sessions"] >= 2, st


def test_lossless_state_file_refused_when_not_ours(tmp_path):
    bad = tmp_path / "bad.state"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.state"):
        LosslessConsumer("tcp://127.0.0.1:1", state_file=str(bad))
    with pytest.raises(ValueError, match="credit"):
        LosslessConsumer("tcp://127.0.0.1:1", credit=0)


def test_control_client(daemons):
    d = daemons()
    ctl = Control(ep(d.ports["ctl"]), timeout=LONG)
    assert ctl.ping()["protocol_version"] == 1
    st = ctl.status()
    assert st["state"] == "idle" and st["queue"]["capacity"] == 8
    devs = ctl.devices()
    assert len(devs) == 1 and devs[0]["index"] == 0 and "name" in devs[0]
    assert ctl.config(key="integration.npt") == "64"
    assert "npt: 64" in ctl.config()
    send_series(d, 4)
    d.wait_counters(lambda c: c["processed"] == 4, "4 frames processed")
    assert ctl.status()["counters"]["processed"] == 4
    ctl.reset()
    assert ctl.status()["latency_us"]["samples"] == 0
    with pytest.raises(FaidError, match="nonexistent") as e:
        ctl.reload("/nonexistent/faid.yaml")
    assert e.value.code.startswith("FAID_E") and e.value.reply["ok"] is False
    v = ctl.status()["setup_version"]
    assert ctl.reload() == v + 1
    with pytest.raises(TimeoutError):
        Control("tcp://127.0.0.1:%d" % free_port(), timeout=0.3).ping()
    ctl.stop()
    assert d.proc.wait(LONG) == 0


def writer_command(ctl):
    """Whether this daemon knows the control command `writer` (issue 19's REST helper adds it);
    skips the test otherwise."""
    try:
        ctl.writer()
    except FaidError as e:
        if "writer" in str(e) and ("unknown" in str(e) or "cmd" in str(e)):
            pytest.skip("this daemon has no control command `writer` yet: %s" % e)
        raise


def test_control_writer_target(daemons, tmp_path):
    out = tmp_path / "scan"
    out.mkdir()
    d = daemons(extra="writer:\n  directory: %s\n" % tmp_path)
    ctl = Control(ep(d.ports["ctl"]), timeout=LONG)
    writer_command(ctl)
    ctl.writer(directory=str(out), prefix="scan42_")
    send_series(d, 3, series_id=5)
    d.wait_counters(lambda c: c["processed"] == 3, "3 frames processed")
    for _ in range(LONG * 10):
        if ctl.status()["writer"]["files_written"] >= 1:
            break
        time.sleep(0.1)
    files = sorted(os.listdir(out))
    assert files and all(f.startswith("scan42") for f in files), files


TOKEN = "beamline-token-0123456789"  # faid takes tokens of 16 to 256 visible bytes


# -- REST -----------------------------------------------------------------------------------------

def rest_daemon(daemons, tmp_path, tls=None):
    """A daemon with http.endpoint and a token file, and its Rest clients (with and without
    the token); skips while this faid has no REST API (no http.token_file option or no
    /api/v1/openapi.json), as the contract between issue 19's helpers says."""
    dump = subprocess.run([os.path.join(os.environ.get("FAID_BIN", os.path.join(SRC, "build",
                                                                                "bin")), "faid"),
                           "--dump-config"], capture_output=True, text=True, timeout=LONG).stdout
    if "token_file" not in dump:
        pytest.skip("this faid has no REST API yet (no http.token_file option)")
    tokens = tmp_path / "tokens"
    tokens.write_text("# operators\nbeamline:%s\n" % TOKEN)
    os.chmod(tokens, 0o600)
    port = free_port()
    extra = 'http:\n  endpoint: "127.0.0.1:%d"\n  token_file: %s\n' % (port, tokens)
    if tls:
        extra += "  tls_cert: %s\n  tls_key: %s\n" % tls
    d = daemons(extra=extra)
    url = "%s://127.0.0.1:%d" % ("https" if tls else "http", port)
    anon = Rest(url, timeout=LONG, verify=tls[0] if tls else True)
    try:
        anon.openapi()
    except RestError as e:
        if e.status == 404:
            pytest.skip("this faid has no /api/v1/openapi.json yet")
        raise
    return d, anon, Rest(url, token_file=str(tokens), timeout=LONG,
                         verify=tls[0] if tls else True)


def test_rest_client(daemons, tmp_path):
    d, anon, api = rest_daemon(daemons, tmp_path)
    doc = anon.openapi()
    assert doc["openapi"].startswith("3.") and "/api/v1/writer" in doc["paths"]
    st = anon.status()
    assert st["state"] == "idle" and st["config_hash"] == d.status()["config_hash"]
    devs = anon.devices()
    assert [x["name"] for x in devs] == [x["name"] for x in d.status()["devices"]]
    cfg = anon.config()
    assert "npt: 64" in cfg["yaml"] and cfg["config_hash"] == st["config_hash"]
    with pytest.raises(RestError) as e:
        anon.reset()  # state-changing: needs the bearer token
    assert e.value.status == 401
    api.reset()
    with pytest.raises(RestError) as e:
        api.put_config(yaml=cfg["yaml"].replace("npt: 64", "npt: -3"))
    assert e.value.status == 422 and e.value.key == "integration.npt", e.value.problem
    assert api.put_config(yaml=cfg["yaml"].replace("npt: 64", "npt: 48"))["setup_version"] > \
        st["setup_version"]
    assert Control(ep(d.ports["ctl"])).config(key="integration.npt") == "48"
    v = d.status()["setup_version"]
    api.put_config(path=d.config)
    assert d.status()["setup_version"] == v + 1
    api.set_writer(directory=str(tmp_path), prefix="scan7_")
    w = api.writer()
    assert w["directory"] == str(tmp_path) and w["prefix"] == "scan7_"
    api.stop()
    assert d.proc.wait(LONG) == 0


def test_rest_client_tls_verification(daemons, tmp_path):
    import urllib.error

    key, cert = str(tmp_path / "key.pem"), str(tmp_path / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=LONG)
    os.chmod(key, 0o600)
    d, anon, api = rest_daemon(daemons, tmp_path, tls=(cert, key))
    assert anon.status()["state"] == "idle"  # verified against the certificate as CA
    api.reset()
    # The system's CAs do not know this certificate: refused, unless verification is off.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        Rest(anon.base, timeout=LONG).status()
    assert Rest(anon.base, timeout=LONG, verify=False).status()["state"] == "idle"
    assert d.terminate() == 0


def test_rest_token_file_forms(tmp_path):
    p = tmp_path / "t"
    p.write_text("\n# c\nname: tok1\nother:tok2\n")
    assert faid.rest.read_token(str(p)) == "tok1"
    p.write_text("plain\n")
    assert faid.rest.read_token(str(p)) == "plain"
