"""faid-bench's correctness checks, run on a small detector on the OpenCL device here (PoCL), so
that the GPU benchmark's checks are known to work before GPU time is spent on them: with
--peaks, every distinct frame's peak list equals the reference device's and every pipelined
result equals the synchronous one; with --devices, two engines give the same bits for the same
frames and the frames are dealt between them. Timings are printed by faid-bench and not
asserted (benchmarks measure, tests check)."""

import json
import subprocess

import pytest

import faidtools

FAID_BIN = faidtools.FAID_BIN
BENCH = str(FAID_BIN / "faid-bench")

CONFIG = faidtools.SMALL_DETECTOR


def bench(tmp, *args, ok=True):
    env = faidtools.tool_env()
    (tmp / "c.yaml").write_text(CONFIG)
    r = subprocess.run([BENCH, "--config", str(tmp / "c.yaml"), *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=600)
    if ok:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    return r


@pytest.mark.parametrize("finder", ["pyfai", "peakfinder8"])
def test_peaks_checked_against_reference(tmp_path, finder):
    js = tmp_path / "b.json"
    r = bench(tmp_path, "--device", "cpu", "--frames", 6, "--depth", 2, "--batch", 2,
              "--variants", "fused,pipelined", "--peaks", finder, "--json", js)
    assert "lists equal" in r.stdout, r.stdout
    j = json.loads(js.read_text())
    assert j["peaks"] == finder
    assert j["peaks_ref_equal"] == 1
    assert all(n > 0 for n in j["num_peaks"]), j["num_peaks"]   # frames with peaks
    v = {x["name"]: x for x in j["variants"]}
    assert v["pipelined"]["identical"] == 1
    for x in v.values():
        assert x["max_rel_err"] < 1e-5
        assert x["clip_us"] > 0 and x["find_us"] > 0 and x["pkpre_us"] > 0


def test_two_engines_same_bits(tmp_path):
    js = tmp_path / "m.json"
    r = bench(tmp_path, "--devices", "cpu,cpu", "--frames", 7, "--depth", 2, "--batch", 2,
              "--peaks", "pyfai", "--json", js)
    assert "bit-identical to device 0's: yes" in r.stdout, r.stdout
    j = json.loads(js.read_text())
    assert j["ndevices"] == 2
    assert j["identical_devices"] == 1 and j["identical_pipelined"] == 1
    assert j["peaks_ref_equal"] == 1
    assert [d["frames"] for d in j["devices"]] == [4, 3]   # round-robin
    assert j["fps"] > 0


def test_bad_options_are_refused(tmp_path):
    r = bench(tmp_path, "--peaks", "magic", ok=False)
    assert r.returncode == 2 and "--peaks must be" in r.stderr
    r = bench(tmp_path, "--devices", "gpu:64", "--frames", 1, "--no-check", ok=False)
    assert r.returncode != 0 and "GPU(s) present" in r.stderr
