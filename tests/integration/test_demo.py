"""The README's main command, deploy/demo.sh, end to end on the binaries of this build: faid starts
on loopback, faidctl replay sends synthetic EIGER 4M frames, faidctl sub writes one profile per
frame, and faid stops with exit status 0."""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("FAID_BIN") or str(ROOT / "build" / "bin")


def test_demo_runs_and_stops_cleanly():
    env = dict(os.environ, FAID_DEMO_PREBUILT="1", FAID_BIN=BIN, FAID_DEMO_FRAMES="3")
    r = subprocess.run(["bash", str(ROOT / "deploy" / "demo.sh")], capture_output=True, text=True,
                       env=env, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "faid exit status 0" in out, out[-4000:]
    m = re.search(r"profiles: (\d+) files in (\S+)", out)
    assert m and int(m.group(1)) == 3, out[-4000:]
    dats = sorted(pathlib.Path(m.group(2)).glob("*.dat"))
    assert len(dats) == 3
    rows = [l for l in dats[0].read_text().splitlines() if not l.startswith("#")]
    assert len(rows) == 1000 and all(len(l.split()) == 5 for l in rows)
