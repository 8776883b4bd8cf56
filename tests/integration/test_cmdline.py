"""Command lines of faid and faidctl (getopt_long): every command answers --help with its usage and
exit 0; `--opt value` and `--opt=value` mean the same; `--` ends the options; an unknown option or
one without its value is a usage error (exit 2) that names the option. Checked on the real
binaries, with a daemon where the command needs one."""

import os
import subprocess

import pytest

from test_daemon import Daemon, ep, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BIN = os.environ.get("FAID_BIN", os.path.join(SRC, "build", "bin"))
FAIDCTL = os.path.join(BIN, "faidctl")
FAID = os.path.join(BIN, "faid")

COMMANDS = ["devices", "decode", "process", "geometry", "inspect", "replay", "sub", "status",
            "config", "reload", "reset", "stop", "keygen"]


def run(args, timeout=60):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_and_usage_errors(cmd):
    rc, out, err = run([FAIDCTL, cmd, "--help"])
    assert rc == 0 and out.startswith("usage: faidctl %s" % cmd), (out, err)
    rc2, out2, _ = run([FAIDCTL, cmd, "-h"])
    assert rc2 == 0 and out2 == out
    rc, out, err = run([FAIDCTL, cmd, "--no-such-option"])
    assert rc == 2 and "faidctl %s: unknown option '--no-such-option'" % cmd in err


def test_faidctl_top_level():
    rc, out, err = run([FAIDCTL, "--help"])
    assert rc == 0 and all(c in out for c in COMMANDS)
    rc, out, err = run([FAIDCTL, "frobnicate"])
    assert rc == 2 and "unknown command 'frobnicate'" in err


def test_missing_value_is_named():
    for cmd, opt in (("sub", "--count"), ("status", "--control"), ("replay", "--to"),
                     ("process", "-c"), ("geometry", "--poni")):
        rc, out, err = run([FAIDCTL, cmd, opt])
        assert rc == 2 and "option '%s' needs a value" % opt in err, (cmd, err)


def test_equals_form_and_double_dash_without_daemon(tmp_path):
    port = free_port()
    expect = "no answer from faid at %s within 0.3 s" % ep(port)
    for args in (["--control", ep(port), "--timeout", "0.3"],
                 ["--control=" + ep(port), "--timeout=0.3"],
                 ["--timeout=0.3", "--control", ep(port)]):
        rc, out, err = run([FAIDCTL, "status", *args])
        assert rc == 1 and expect in err, (args, err)
    # Values that look like options are taken as values.
    rc, out, err = run([FAIDCTL, "sub", "--from", ep(port), "--count", "-3"])
    assert rc == 2 and "--count needs a positive integer, got '-3'" in err
    rc, out, err = run([FAIDCTL, "replay", "--frames=x"])
    assert rc == 2 and "bad value 'x' for --frames" in err
    # After --, an operand that starts with a dash is an operand.
    rc, out, err = run([FAIDCTL, "status", "--control", ep(port), "--", "--json"])
    assert rc == 2 and "unexpected argument '--json'" in err
    # geometry: the same output whichever form the values take.
    poni = tmp_path / "g.poni"
    poni.write_text("Detector: Pilatus1M\nDistance: 0.1\nPoni1: 0.08\nPoni2: 0.08\n"
                    "Rot1: 0\nRot2: 0\nRot3: 0\nWavelength: 1e-10\n")
    a = run([FAIDCTL, "geometry", "--poni", poni, "--at", "10,20", "--unit", "2th_deg"])
    b = run([FAIDCTL, "geometry", "--poni=%s" % poni, "--at=10,20", "--unit=2th_deg"])
    assert a[0] == 0 and a == b


def test_faid_command_line(tmp_path):
    rc, out, err = run([FAID, "--help"])
    assert rc == 0 and out.startswith("usage: faid")
    rc, out, err = run([FAID, "--bogus"])
    assert rc == 2 and "unknown option '--bogus'" in err
    rc, out, err = run([FAID, "-c"])
    assert rc == 2 and "'-c'" in err
    rc, out, err = run([FAID, "stray"])
    assert rc == 2 and "unexpected argument 'stray'" in err
    conf = tmp_path / "c.yaml"
    conf.write_text("integration:\n  npt: 77\n")
    dumps = [run([FAID, *a, "--dump-config"]) for a in
             (["-c", conf], ["--config", conf], ["--config=%s" % conf], ["-c%s" % conf])]
    assert dumps[0][0] == 0 and "npt: 77" in dumps[0][1]
    assert all(d == dumps[0] for d in dumps)
    rc, out, err = run([FAID, "--log-level=loud", "--dump-config"])
    assert rc == 0  # --dump-config exits before the level is applied
    rc, out, err = run([FAID, "--version"])
    assert rc == 0 and out.startswith("faid ")


def test_control_forms_with_daemon(tmp_path):
    d = Daemon(str(tmp_path))
    try:
        d.wait_ready()
        ctl = ep(d.ports["ctl"])
        a = run([FAIDCTL, "config", "--control", ctl])
        b = run([FAIDCTL, "config", "--control=%s" % ctl])
        assert a[0] == 0 and a == b and "integration:" in a[1]
        # Options after the operand (GNU order) and --json=less spelling errors.
        rc, out, err = run([FAIDCTL, "reload", d.config, "--control", ctl, "--json"])
        assert rc == 0 and out.lstrip().startswith("{"), err
        rc, out, err = run([FAIDCTL, "status", "--control", ctl, "--json=yes"])
        assert rc == 2 and "--json" in err
    finally:
        d.stop()
