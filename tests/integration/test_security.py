"""CURVE authentication (security.curve) with the real daemon and the real clients.

`faidctl keygen` writes the key files (modes, no overwrite, readable by pyzmq's certificate
loader). A faid with CURVE admits faidctl status / sub / replay and the Python subscriber with an
authorized key, and refuses at once, with the reason, a client without a key, with a key that is
not authorized, or with the wrong server key; a key authorized later works after a reload. Every
socket faid serves is a CURVE server (checked with raw pyzmq sockets: plain refused, keyed
admitted), a connect-mode input stays plain, and without CURVE each socket bound beyond localhost
is logged as a warning, as is an http.endpoint beyond localhost. The harness's own control
requests, Sender and Receivers (test_daemon.py) carry the authorized client's keys."""

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time

import msgpack
import pytest
import zmq
import zmq.auth
from zmq.utils.monitor import recv_monitor_message

from test_daemon import (LONG, Receiver, Sender, config_text, daemons, ep, frames,  # noqa: F401
                         free_port, tmpdir_)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BIN = os.environ.get("FAID_BIN", os.path.join(SRC, "build", "bin"))
FAIDCTL = os.path.join(BIN, "faidctl")
FAID = os.path.join(BIN, "faid")
PYSUB = os.path.join(SRC, "client", "python", "faid_subscriber.py")


def run(args, timeout=LONG, env=None):
    e = dict(os.environ)
    for k in ("FAID_SERVER_KEY", "FAID_KEY"):
        e.pop(k, None)
    if env:
        e.update(env)
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                       env=e)
    return p.returncode, p.stdout, p.stderr


def keygen(path):
    rc, out, err = run([FAIDCTL, "keygen", path])
    assert rc == 0, err
    return str(path) + ".pub", str(path) + ".key"


@pytest.fixture
def keys(tmp_path):
    """faid's key pair, an authorized client, another client; the authorized_keys folder."""
    k = {}
    auth = tmp_path / "authorized"
    auth.mkdir()
    for name in ("server", "client", "other"):
        k[name + "_pub"], k[name + "_key"] = keygen(tmp_path / name)
    shutil.copy(k["client_pub"], auth / "client.pub")
    k["auth"] = str(auth)
    return k


def client_keys(keys, name="client"):
    """The harness's CURVE keys (test_daemon.curve_client) of client name against faid's key."""
    pub, sec = zmq.auth.load_certificate(keys[name + "_key"])
    return zmq.auth.load_certificate(keys["server_pub"])[0], pub, sec


@pytest.fixture
def curve_daemon(daemons, keys):
    """Starts faid with security.curve; the harness's sockets to it carry the client's keys."""
    sec = (f"security:\n  curve: true\n  secret_key_file: \"{keys['server_key']}\"\n"
           f"  authorized_keys: \"{keys['auth']}\"\n")

    def start(**cfg):
        cfg["extra"] = cfg.get("extra", "") + sec
        return daemons(curve=client_keys(keys), **cfg)

    return start


def handshake(endpoint, kind, keyset=None, timeout=3.0):
    """Connects a raw pyzmq socket of kind and returns "ok" when the handshake succeeded,
    "failed" when it failed (any reason), None when nothing happened within timeout."""
    ctx = zmq.Context()
    s = ctx.socket(kind)
    s.linger = 0
    if keyset:
        s.curve_serverkey, s.curve_publickey, s.curve_secretkey = keyset
    mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                               | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                               | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    s.connect(endpoint)
    try:
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            if mon.poll(100):
                ev = recv_monitor_message(mon)["event"]
                return "ok" if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED else "failed"
        return None
    finally:
        s.disable_monitor()
        mon.close(0)
        s.close(0)
        ctx.term()


# ------------------------------------------------------------------------------------------------

def test_keygen(tmp_path):
    pub, key = keygen(tmp_path / "k")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(pub).st_mode) & 0o077 != 0o077  # world-writable never
    # ZeroMQ's certificate layout: pyzmq reads both files; the pair belongs together.
    p1, s1 = zmq.auth.load_certificate(key)
    p2, s2 = zmq.auth.load_certificate(pub)
    assert s1 and s2 is None and p1 == p2 and len(p1) == 40
    assert zmq.curve_public(s1) == p1
    # Never overwritten, and nothing half-written when only one of the two exists.
    before = open(key).read()
    rc, out, err = run([FAIDCTL, "keygen", tmp_path / "k"])
    assert rc == 1 and "exists already" in err and open(key).read() == before
    os.unlink(tmp_path / "k.pub")
    rc, out, err = run([FAIDCTL, "keygen", tmp_path / "k"])
    assert rc == 1 and not os.path.exists(tmp_path / "k.pub")
    # Two pairs differ.
    _, key2 = keygen(tmp_path / "k2")
    assert zmq.auth.load_certificate(key2)[1] != s1
    rc, out, err = run([FAIDCTL, "keygen"])
    assert rc == 2


def test_config_errors(tmp_path, keys):
    ports = {k: free_port() for k in ("in", "out", "lossless", "ctl")}

    def start(sec):
        conf = tmp_path / "c.yaml"
        conf.write_text(config_text(ports, extra=sec))
        return run([FAID, "-c", conf], timeout=LONG)

    rc, out, err = start("security:\n  curve: true\n")
    assert rc == 1 and "security.secret_key_file" in err
    rc, out, err = start(f"security:\n  curve: true\n  secret_key_file: \"{keys['server_key']}\"\n")
    assert rc == 1 and "security.authorized_keys" in err
    loose = tmp_path / "loose.key"
    shutil.copy(keys["server_key"], loose)
    os.chmod(loose, 0o644)
    rc, out, err = start(f"security:\n  curve: true\n  secret_key_file: \"{loose}\"\n"
                         f"  authorized_keys: \"{keys['auth']}\"\n")
    assert rc == 1 and "owner only" in err
    rc, out, err = start(f"security:\n  curve: true\n  secret_key_file: \"{keys['server_pub']}\"\n"
                         f"  authorized_keys: \"{keys['auth']}\"\n")
    assert rc == 1 and "no secret-key" in err


def metrics(port):
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=LONG) as r:
        text = r.read().decode()
    return {res: int(float(v)) for res, v in
            re.findall(r'^faid_curve_clients_total\{result="(\w+)"\} (\S+)$', text, re.M)}


def test_curve_clients(curve_daemon, keys, tmp_path):
    http = free_port()
    d = curve_daemon(lossless=True, extra=f"http:\n  endpoint: \"127.0.0.1:{http}\"\n")
    ctl = ep(d.ports["ctl"])
    good = ["--server-key", keys["server_pub"], "--key", keys["client_key"]]
    other = ["--server-key", keys["server_pub"], "--key", keys["other_key"]]
    wrong_server = ["--server-key", keys["other_pub"], "--key", keys["client_key"]]

    # Control: refused at once with the reason, never a hang; admitted with the key.
    t0 = time.monotonic()
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, "--timeout", "30"])
    assert rc == 1 and "requires CURVE" in err
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, "--timeout", "30", *other])
    assert rc == 1 and "refused this client's key" in err
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, "--timeout", "30", *wrong_server])
    assert rc == 1 and "handshake" in err and "--server-key" in err
    assert time.monotonic() - t0 < 25  # three refusals, none waited for its 30 s timeout
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, *good])
    assert rc == 0 and "state: idle" in out, err
    # The same keys from the environment.
    rc, out, err = run([FAIDCTL, "config", "get", "security.curve", "--control", ctl],
                       env={"FAID_SERVER_KEY": keys["server_pub"], "FAID_KEY": keys["client_key"]})
    assert rc == 0 and out.strip() == "true", err
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, "--key", keys["client_key"]])
    assert rc == 2 and "both" in err
    assert "refused a CURVE client" in d.logtext()
    m = metrics(http)
    assert m["refused"] >= 1 and m["admitted"] >= 1, m

    # Data: replay (bound input) -> faid -> sub (PUB) and lossless, and the Python subscriber.
    outp, ll = ep(d.ports["out"]), ep(d.ports["lossless"])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    subs = [subprocess.Popen([FAIDCTL, "sub", "--from", outp, "--count", "6", "--timeout", "60",
                              "--quiet", *good], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True),
            subprocess.Popen([FAIDCTL, "sub", "--from", ll, "--lossless", "--count", "6",
                              "--timeout", "60", "--quiet", *good], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True),
            subprocess.Popen([sys.executable, PYSUB, "--from", outp, "--count", "6", "--timeout",
                              "60", "--quiet", "--server-key", keys["server_pub"], "--key",
                              keys["client_key"]], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)]
    sent = 0
    try:
        # A PUB subscriber gets only what is published after its handshake, and a loaded machine
        # may take seconds to start one: series of 6 frames go out until every subscriber has
        # its 6 results.
        for series in range(1, 40):
            rc, out, err = run([FAIDCTL, "replay", "--to", ep(d.ports["in"]), "-c", d.config,
                                "--frames", "6", "--series-id", series, "--quiet", *good])
            assert rc == 0, err
            sent += 6
            t_end = time.monotonic() + 1.0
            while time.monotonic() < t_end and any(p.poll() is None for p in subs):
                time.sleep(0.05)
            if all(p.poll() is not None for p in subs):
                break
        for p in subs:
            out, err = p.communicate(timeout=LONG)
            assert p.returncode == 0 and "results: 6" in out, (p.args, out, err)
    finally:
        for p in subs:
            if p.poll() is None:
                p.kill()

    # Refused data clients end at once with the reason (sub: exit 1, no waiting for --timeout).
    rc, out, err = run([FAIDCTL, "sub", "--from", outp, "--count", "1", "--timeout", "60",
                        "--quiet"])
    assert rc == 1 and "stopped: authentication failed" in out and "requires CURVE" in err
    rc, out, err = run([FAIDCTL, "sub", "--from", ll, "--lossless", "--count", "1", "--timeout",
                        "60", "--quiet", *other])
    assert rc == 1 and "refused this client's key" in err
    rc, out, err = run([sys.executable, PYSUB, "--from", outp, "--count", "1", "--timeout", "60",
                        "--quiet", "--server-key", keys["server_pub"], "--key",
                        keys["other_key"]])
    assert rc == 1 and "refused this client's key" in err
    rc, out, err = run([sys.executable, PYSUB, "--from", outp, "--count", "1", "--timeout", "60",
                        "--quiet"])
    assert rc == 1 and "requires CURVE" in err
    rc, out, err = run([FAIDCTL, "replay", "--to", ep(d.ports["in"]), "-c", d.config,
                        "--frames", "2", "--timeout", "60", "--quiet", *other])
    assert rc == 1 and "refused this client's key" in err
    rc, out, err = run([FAIDCTL, "replay", "--to", ep(d.ports["in"]), "-c", d.config,
                        "--frames", "2", "--timeout", "60", "--quiet"])
    assert rc == 1 and "requires CURVE" in err
    st = d.status()
    assert st["counters"]["received"] == sent  # only the authorized replays got in

    # A key authorized later works after a reload (and a broken *.pub refuses the reload).
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, *other])
    assert rc == 1
    shutil.copy(keys["other_pub"], os.path.join(keys["auth"], "other.pub"))
    with open(os.path.join(keys["auth"], "typo.pub"), "w") as f:
        f.write("not a key\n")
    rc, out, err = run([FAIDCTL, "reload", "--control", ctl, *good])
    assert rc == 1 and "typo.pub" in err
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, *other])
    assert rc == 1 and "refused this client's key" in err
    os.unlink(os.path.join(keys["auth"], "typo.pub"))
    rc, out, err = run([FAIDCTL, "reload", "--control", ctl, *good])
    assert rc == 0, err
    rc, out, err = run([FAIDCTL, "status", "--control", ctl, *other])
    assert rc == 0 and "state:" in out, err
    # ... and a key removed is refused after the next reload (SIGHUP this time).
    os.unlink(os.path.join(keys["auth"], "other.pub"))
    d.proc.send_signal(__import__("signal").SIGHUP)
    t_end = time.monotonic() + LONG
    while time.monotonic() < t_end:
        rc, out, err = run([FAIDCTL, "status", "--control", ctl, *other])
        if rc == 1:
            break
        time.sleep(0.2)
    assert rc == 1 and "refused this client's key" in err
    rc, out, err = run([FAIDCTL, "stop", "--control", ctl, *good])
    assert rc == 0
    assert d.proc.wait(LONG) == 0


def test_every_served_socket_is_curve(curve_daemon, keys):
    ports = {k: free_port() for k in ("fwd", "hits", "hreq")}
    d = curve_daemon(
        lossless=True,
        input_extra=f"  forward_endpoint: \"{ep(ports['fwd'])}\"\n",
        extra=f"hits:\n  endpoint: \"{ep(ports['hits'])}\"\n"
              f"  request_endpoint: \"{ep(ports['hreq'])}\"\n")
    good, other = d.curve, client_keys(keys, "other")
    served = {"input": (ep(d.ports["in"]), zmq.PUSH), "output": (ep(d.ports["out"]), zmq.SUB),
              "lossless": (ep(d.ports["lossless"]), zmq.DEALER),
              "control": (ep(d.ports["ctl"]), zmq.REQ),
              "input forward": (ep(ports["fwd"]), zmq.PULL),
              "hits": (ep(ports["hits"]), zmq.SUB), "hits request": (ep(ports["hreq"]), zmq.REQ)}
    for what, (endpoint, kind) in served.items():
        assert handshake(endpoint, kind) == "failed", what
        assert handshake(endpoint, kind, other) == "failed", what
        assert handshake(endpoint, kind, good) == "ok", what
    # input.contexts per_connection (the default) keeps CURVE inputs in the daemon's context,
    # where the ZAP handler refuses the other key (in a context of its own libzmq would admit
    # any CURVE client: no handler there)
    assert d.status()["input"]["zmq_contexts"] == 1
    log = d.logtext()
    assert "reachable beyond this host" not in log

    # The harness's own sockets with the keys: frames in through a Sender, results out through
    # the lossless channel and a SUB Receiver. A PUB subscriber sees only what follows its
    # handshake: series go out until it has a whole one.
    ll, rx = Receiver(d, lossless=True), Receiver(d)
    ll.settle()
    tx = Sender(d)
    imgs = frames(2)
    for series in range(1, 20):
        tx.start(series_id=series)
        for k, img in enumerate(imgs):
            tx.image(k, img, series_id=series)
        tx.end(series_id=series)
        ll.collect_until_end(n_ends=series)
        try:
            rx.collect_until_end(timeout=5)
        except TimeoutError:
            pass
        whole = [m["frame_id"] for m in rx.of("result") if m["series_id"] == series]
        if sorted(whole) == [0, 1]:
            break
    assert sorted(whole) == [0, 1], rx.msgs
    assert len(ll.of("result")) == 2 * series and len(ll.of("end")) == series
    ll.close()


def test_connect_mode_input_stays_plain(curve_daemon, keys):
    port = free_port()
    d = curve_daemon(input_mode="connect", extra="")
    # faid's input connects (to a detector that cannot speak CURVE): a plain bound sender feeds it.
    cfg = open(d.config).read()
    assert "mode: connect" in cfg
    good = ["--server-key", keys["server_pub"], "--key", keys["client_key"]]
    rc, out, err = run([FAIDCTL, "replay", "--bind", "--to", ep(d.ports["in"]), "-c", d.config,
                        "--frames", "4", "--quiet", "--timeout", "60"])
    assert rc == 0, err
    d.wait_counters(lambda c: c["processed"] == 4, "4 frames processed")
    # Keys make no sense for a bound replay.
    rc, out, err = run([FAIDCTL, "replay", "--bind", "--to", ep(port), "--frames", "1",
                        "--quiet", *good])
    assert rc == 1 and "plain" in err


def distinct_ports(n):
    got = []
    while len(got) < n:
        p = free_port()
        if p not in got:
            got.append(p)
    return got


def test_warnings_beyond_localhost(tmp_path):
    p = distinct_ports(5)
    ports = dict(zip(("in", "out", "lossless", "ctl"), p))
    conf = tmp_path / "c.yaml"
    # http.endpoint beyond localhost is refused without http.token_file (test_rest.py)
    text = config_text(ports)
    text = text.replace('"%s"' % ep(ports["out"]), '"tcp://*:%d"' % ports["out"])
    text = text.replace('"%s"' % ep(ports["in"]), '"tcp://0.0.0.0:%d"' % ports["in"])
    conf.write_text(text)
    p = subprocess.Popen([FAID, "-c", conf], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    try:
        lines = []
        t_end = time.monotonic() + LONG
        while time.monotonic() < t_end:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "main: ready" in line:
                break
        log = "".join(lines)
        assert "output socket tcp://*:%d is reachable beyond this host" % ports["out"] in log, log
        assert "input socket tcp://0.0.0.0:%d is reachable beyond this host" % ports["in"] in log
        assert "control socket" not in log  # 127.0.0.1: local
    finally:
        p.terminate()
        p.communicate(timeout=LONG)
