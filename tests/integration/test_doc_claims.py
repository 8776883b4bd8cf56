"""Claims of the docs checked on the real daemon (docs/dev/doc-review.md lists them): the control
commands of the README's Control table run as written, `faidctl config get KEY` answers every
option of the option table with the value `faidctl config` shows, and the reload column of the
option table is what a reload does: for EVERY option, derived from `faidctl process
--dump-config=markdown`, a reload that changes it is accepted and applied (reload yes) or refused
naming the key and a restart (reload no). The daemon runs on the ref device on loopback ports.

Nothing asserts on time: timeouts only turn a hang into a failure."""

import json
import os
import re
import subprocess

import numpy as np
import pytest
import yaml

import test_daemon
from test_daemon import COLS, FAIDCTL, LONG, ROWS, SRC, daemons, free_port, tmpdir_  # noqa: F401


def option_rows():
    """The option table as (key, type, default, range, reload) from its Markdown dump."""
    md = subprocess.run([FAIDCTL, "process", "--dump-config=markdown"], capture_output=True,
                        text=True, check=True, timeout=LONG).stdout
    rows = []
    for line in md.splitlines():
        m = re.match(r"\| `([a-z_.]+)` \| ([^|]*) \|[^|]*\| ([^|]*) \| ([^|]*) \| (yes|no) \|",
                     line)
        if m:
            rows.append((m.group(1), m.group(2).strip(), m.group(3).strip(),
                         m.group(4).strip(), m.group(5) == "yes"))
    assert len(rows) > 50, md[:500]
    return rows


def ctl(d, *args, check=True):
    r = subprocess.run([FAIDCTL, *args, "--control", test_daemon.ep(d.ports["ctl"])],
                       capture_output=True, text=True, timeout=LONG)
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def get(d, key):
    return yaml.safe_load(ctl(d, "config", "get", key).stdout)


def effective(d):
    return yaml.safe_load(ctl(d, "config").stdout)


def lookup(cfg, key):
    for part in key.split("."):
        cfg = cfg[part]
    return cfg


def test_config_get_answers_every_option(daemons):
    d = daemons(devices="ref")
    cfg = effective(d)
    for key, _typ, default, *_ in option_rows():
        try:
            want = lookup(cfg, key)
        except KeyError:  # left out of the dump at its default (output.extra's help says so)
            want = yaml.safe_load(default.strip("`"))
        assert get(d, key) == want, key
    bad = ctl(d, "config", "get", "integration.nptt", check=False)
    assert bad.returncode == 1
    assert "unknown key 'integration.nptt'" in bad.stderr and "integration.npt" in bad.stderr
    js = json.loads(ctl(d, "config", "get", "detector.shape", "--json").stdout)
    assert js["ok"] is True and js["key"] == "detector.shape"
    assert yaml.safe_load(js["value"]) == [ROWS, COLS]
    assert d.terminate() == 0


def test_readme_control_commands_run(daemons):
    """Every `faidctl COMMAND` of the README's Control table runs against a daemon (the
    commands are read from the README, not listed here)."""
    d = daemons(devices="ref")
    readme = open(os.path.join(SRC, "README.md")).read()
    table = readme.split("## Control", 1)[1].split("\n## ", 1)[0]
    cmds = re.findall(r"^\| `faidctl ([^`]+)` \|", table, re.M)
    assert {c.split()[0] for c in cmds} >= {"status", "config", "reload", "reset", "stop"}, cmds
    for c in sorted(cmds, key=lambda c: c.startswith("stop")):  # stop last
        c = c.replace("[--directory DIR]", "")  # a folder of this host: the prefix alone here
        words = []
        for w in c.split():
            if w in ("[--json]", "[FILE]"):
                continue
            words.append(w.strip("[]"))
        if words[:2] == ["config", "get"]:
            words[2:] = ["integration.npt"]
        r = ctl(d, *words)
        if words[0] == "status":
            assert "counters" in r.stdout
        if "--json" in c:
            json.loads(ctl(d, *words, "--json").stdout)
    assert d.proc.wait(LONG) == 0
    d.returncode = 0


def changed(key, typ, rng, cur, tmp):
    """A valid value of option key other than its current value cur."""
    if typ == "choice":
        choices = [c.strip() for c in rng.split(",")]
        return next(c for c in choices if c != cur and c not in ("no", False))
    if typ == "bool":
        return not cur
    if typ == "path":
        path = os.path.join(tmp, key.replace(".", "_"))
        if key == "geometry.poni_file":
            path += ".poni"
            with open(path, "w") as f:
                f.write("poni_version: 2\nDetector: Detector\nDetector_config: {\"pixel1\": 1e-4, "
                        "\"pixel2\": 1e-4, \"max_shape\": [%d, %d]}\nDistance: 0.2\n"
                        "Poni1: 0.006\nPoni2: 0.006\nRot1: 0\nRot2: 0\nRot3: 0\n"
                        "Wavelength: 1e-10\n" % (ROWS, COLS))
        else:
            path += ".npy"
            np.save(path, np.zeros((ROWS, COLS), np.uint8 if "mask" in key else np.float32) + 1)
        return path
    if typ == "list of keys":  # output.extra: the optional outputs
        return [] if cur else ["sum_normalization"]
    if typ == "devices":
        return "cpu" if cur != "cpu" else "ref"
    if typ == "string" or "endpoint" in typ:  # "endpoint or list": one endpoint is a value
        if "endpoint" in key or "endpoint" in typ:  # fan.aggregates_from: endpoints too
            http = key.startswith("http") or key.endswith("http_endpoint")  # host:port ones
            return ("127.0.0.1:%d" if http else "tcp://127.0.0.1:%d") % free_port()
        if key == "detector.preset":
            return "eiger_1m"
        return "threshold_2"
    if typ.startswith("[") or isinstance(cur, list):
        if cur is None:
            return [-90.0, 90.0] if "azimuth" in key else [0.5, 10.0]
        if typ == "[integer, integer]":
            return [cur[0] + 8, cur[1]]
        return [v * 1.1 for v in cur]
    m = re.match(r"[\[(]([-0-9.e+]+), ([-0-9.e+]+)[\])]", rng)
    lo, hi = (float(m.group(1)), float(m.group(2))) if m else (None, None)
    if key == "peaks.patch_size":  # [3, 5], odd sides only (the table's text says so)
        return 8 - cur
    if typ == "integer":
        if cur is None:
            return 50
        return cur + 1 if hi is None or cur + 1 <= hi else cur - 1
    if cur is None:  # nullable numbers: polarization_factor, dummy
        return 0.5
    new = cur * 1.1 if cur else 0.01
    if hi is not None and new > hi:
        new = cur * 0.9
    return new


def set_key(doc, key, value):
    parts = key.split(".")
    for p in parts[:-1]:
        doc = doc.setdefault(p, {})
    doc[parts[-1]] = value


def test_reload_column_is_what_reload_does(daemons, tmpdir_):
    """For every option of the table: reload yes -> a reload changing it succeeds and `config
    get` shows the new value; reload no -> refused with the key and "restart" named, nothing
    changes. Derived from the table, so a new option is checked the day it is added."""
    d = daemons(devices="ref", npt=32)
    base = yaml.safe_load(open(d.config).read())
    version = d.status()["setup_version"]
    checked = {True: 0, False: 0}
    for key, typ, _default, rng, reload_ok in option_rows():
        cur = get(d, key)
        new = changed(key, typ, rng, cur, tmpdir_)
        doc = yaml.safe_load(yaml.safe_dump(base))
        set_key(doc, key, new)
        if key == "instance.shard":  # must stay below instance.shards (1 by default)
            set_key(doc, "instance.shards", new + 1)
        with open(d.config, "w") as f:
            yaml.safe_dump(doc, f)
        r = d.request({"cmd": "reload"})
        if reload_ok:
            assert r["ok"] is True, (key, new, r)
            version = r["setup_version"]
            got = get(d, key)
            if typ == "choice":  # YAML 1.1 readers take `no` for false: compare the text
                got = ctl(d, "config", "get", key).stdout.strip()
            if isinstance(new, float):
                assert got == pytest.approx(new, rel=1e-6), (key, new, got)
            elif isinstance(new, list) and isinstance(new[0], float):
                assert got == pytest.approx(new, rel=1e-6), (key, new, got)
            else:
                assert got == new, (key, new, got)
        else:
            assert r["ok"] is False and key in r["error"] and "restart" in r["error"], (key, r)
            assert get(d, key) == cur, key
            assert d.status()["setup_version"] == version, key
        checked[reload_ok] += 1
        # back to the start file, so that each option is changed alone
        with open(d.config, "w") as f:
            yaml.safe_dump(base, f)
        r = d.request({"cmd": "reload"})
        assert r["ok"] is True, (key, r)
        version = r["setup_version"]
    assert checked[True] > 30 and checked[False] > 20, checked
    assert d.terminate() == 0


def test_sub_out_file_names_as_documented(daemons, tmpdir_):
    """docs/configuration.md: `faidctl sub --out` writes OUTDIR/<series>_<frame>.dat, <series>
    being the series_unique_id, else series<series_id>. Through the lossless channel, so that no
    message can be missed whatever the timing."""
    d = daemons(devices="ref", lossless=True)
    out = os.path.join(tmpdir_, "subout")
    for sid, uid, stem in ((3, None, "series3"), (4, "run_a7", "run_a7")):
        cmd = [FAIDCTL, "replay", "--to", test_daemon.ep(d.ports["in"]), "-c", d.config,
               "--frames", "2", "--series-id", str(sid), "--quiet"]
        if uid:
            cmd += ["--series-unique-id", uid]
        subprocess.run(cmd, check=True, timeout=LONG, capture_output=True)
        r = subprocess.run([FAIDCTL, "sub", "--from", test_daemon.ep(d.ports["lossless"]),
                            "--lossless", "--until-end", "--timeout", str(LONG), "--out", out,
                            "--quiet"], capture_output=True, text=True, timeout=LONG)
        assert r.returncode == 0, r.stderr
        names = sorted(n for n in os.listdir(out) if n.startswith(stem + "_"))
        assert names == [f"{stem}_00000.dat", f"{stem}_00001.dat"], os.listdir(out)
    assert d.terminate() == 0


def test_bad_frames_are_counted_as_documented(daemons):
    """ARCHITECTURE.md "Backpressure and accounting" and PROTOCOL.md's user_data row: a frame
    with a usable header that fails (shape, user_data too large: FAID_ESIZE) is received and
    failed; a header that is not usable (protocol_version, dtype, encoding, malformed user_data:
    FAID_EFORMAT) is bad_input, not a frame."""
    import msgpack
    import zmq
    d = daemons(devices="ref")
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(test_daemon.ep(d.ports["in"]))
    img = np.zeros((ROWS, COLS), np.uint16).tobytes()

    def hdr(**kw):
        h = {"type": "image", "protocol_version": 1, "series_id": 9, "frame_id": 5,
             "shape": [ROWS, COLS], "dtype": "uint16", "encoding": "none"}
        h.update(kw)
        return msgpack.packb(h)

    cases = [("failed", "FAID_ESHAPE", dict(shape=[ROWS // 2, COLS])),
             ("failed", "FAID_ESIZE", dict(user_data="x" * (65 << 10))),
             ("bad_input", "FAID_EPROTO", dict(protocol_version=2)),
             ("bad_input", "FAID_EDTYPE", dict(dtype=">u2")),
             ("bad_input", None, dict(encoding="zstd")),
             ("bad_input", "FAID_EFORMAT", dict(user_data=msgpack.ExtType(1, b"ab")))]
    try:
        for what, code, kw in cases:
            before = d.status()
            push.send_multipart([hdr(**kw), img])
            n0 = before["counters"]["failed"] + before["counters"]["bad_input"]
            after = d.wait_counters(lambda c: c["failed"] + c["bad_input"] > n0, what)
            delta = {k: after["counters"][k] - before["counters"][k]
                     for k in ("received", "failed", "bad_input")}
            want = ({"received": 1, "failed": 1, "bad_input": 0} if what == "failed"
                    else {"received": 0, "failed": 0, "bad_input": 1})
            assert delta == want, (kw, delta)
            if code:
                assert sum(v for k, v in after["errors"].items() if k.endswith(code)) > \
                    sum(v for k, v in before["errors"].items() if k.endswith(code)), (kw, after["errors"])
    finally:
        push.close(0)
        ctx.term()
    assert d.terminate() == 0
