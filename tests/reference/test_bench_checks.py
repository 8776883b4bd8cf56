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


def bench(tmp, *args, ok=True, env_extra=None):
    env = faidtools.tool_env()
    env.update(env_extra or {})
    (tmp / "c.yaml").write_text(CONFIG)
    r = subprocess.run([BENCH, "--config", str(tmp / "c.yaml"), *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=600)
    if ok:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    return r


def checked_peaks(tmp, name, finder, env, variants="fused"):
    """faid-bench on PoCL (4 frames, 2 slots of 2) with the extra environment env: its lists
    equal to the reference device's and every frame with peaks; its JSON."""
    js = tmp / f"{name}.json"
    r = bench(tmp, "--device", "cpu", "--frames", 4, "--depth", 2, "--batch", 2,
              "--variants", variants, "--peaks", finder, "--json", js, env_extra=env)
    assert "lists equal" in r.stdout, r.stdout
    j = json.loads(js.read_text())
    assert j["peaks_ref_equal"] == 1 and all(n > 0 for n in j["num_peaks"])
    return j


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
        # the defaults since issue 17's GPU run fold the preprocess into the reads where the
        # local-memory sigma clip fits (PoCL's 2 MB does): no peak-stage preprocess
        assert x["clip_us"] > 0 and x["find_us"] > 0 and x["pkpre_us"] == 0
        # each of the finder's launches timed apart (issue 17): 3 for the picker; pf8's 6
        # places, the 5th (the scan) empty since the write finds its offsets (FAID_PF8_MERGE,
        # the default after round 4's GPU run)
        launched = (1, 2, 3) if finder == "pyfai" else (1, 2, 3, 4, 6)
        assert all(x[f"find{k}_us"] > 0 for k in launched), x
        assert all(x[f"find{k}_us"] == 0 for k in range(1, 7) if k not in launched), x


OLD = {"FAID_PEAKS_FUSED": "0", "FAID_SIGCLIP_LM": "0",
       "FAID_PEAKS_KOPTS": "-DPF8_HASH=0,-DPF8_LOCAL_CAND=0"}
ALL = {"FAID_PEAKS_FUSED": "1", "FAID_SIGCLIP_LM": "4", "FAID_SIGCLIP_R": "4",
       "FAID_PEAKS_KOPTS": "-DPF8_HASH=1,-DPF8_LOCAL_CAND=1,-DPP_PREFETCH=1,-DPP_WSCAN1=1,"
                           "-DPK_SCAN_PF=32",
       "FAID_PF8_FILL_GROUPS": "8", "FAID_SIGCLIP_GB": "8", "FAID_SIGCLIP_CG": "1"}


@pytest.mark.parametrize("name,env,fused", [("all", ALL, True), ("reg", OLD, False)])
def test_peak_kernel_variants_checked(tmp_path, name, env, fused):
    """Issue 17's variants as gpu-run.sh's sets "all" and "reg" (the kernels before the GPU run,
    named explicitly) select them: the same lists as the reference device, and a peak-stage
    preprocess only when it is not folded into the reads."""
    j = checked_peaks(tmp_path, "v", "peakfinder8", env, "fused,pipelined")
    for x in j["variants"]:
        assert x["clip_us"] > 0, x
        assert (x["pkpre_us"] == 0) == fused, (name, x)


def test_round3_variants_same_bits(tmp_path):
    """Issue 17 round 3's latency variants (gpu-run.sh's set r3: the sigma clip's gather and
    overflow walks in batches, the picker's loads issued together, its records ranked with one
    scan, the span scan's counts loaded at once) and round 5's coalesced gather give the
    background and the
    peak lists of the defaults bit for bit (faid-bench's peaks_hash, gpu-run.sh's "=default"
    column), with 32 work-items so that the small detector's bins overflow the registers and
    local memory."""
    hashes = {}
    r3 = {"FAID_SIGCLIP_GB": "3",
          "FAID_PEAKS_KOPTS": "-DPP_PREFETCH=1,-DPP_WSCAN1=1,-DPK_SCAN_PF=32"}
    # and round 5's coalesced gather (gpu-run.sh's set cg), chunks of 32 x 3 entries
    cg = {"FAID_SIGCLIP_CG": "1", "FAID_SIGCLIP_CGU": "3"}
    for name, env in (("default", {}), ("r3", r3), ("cg", cg)):
        env["FAID_SIGCLIP_WG"] = "32"
        hashes[name] = checked_peaks(tmp_path, name, "pyfai", env)["peaks_hash"]
    assert hashes["r3"] == hashes["cg"] == hashes["default"] != "0000000000000000", hashes


def test_cl_verbose_build_logs(tmp_path):
    """FAID_CL_VERBOSE=1 logs every program's build (gpu-run.sh reads ptxas's registers per
    kernel from it on NVIDIA's OpenCL); without it a successful build logs nothing."""
    args = ("--device", "cpu", "--frames", 2, "--depth", 1, "--batch", 1, "--variants", "fused",
            "--peaks", "pyfai")
    r = bench(tmp_path, *args, env_extra={"FAID_CL_VERBOSE": "1"})
    assert "built peaks/sigma_clip.cl" in r.stderr and "built peaks/pick_pyfai.cl" in r.stderr, \
        r.stderr[-2000:]
    r = bench(tmp_path, *args)
    assert "built " not in r.stderr, r.stderr[-2000:]


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


def test_devices_time_no_builds_and_say_where_the_run_went(tmp_path):
    """Issue 17, four GPUs: the timed window of --devices holds no program build (changing the
    batch drops an engine's programs; before the warm-up round every device built its batched
    programs inside the window, one after another behind the process-wide build lock, which is
    what made each of four H200s slower than one alone), and each device's row says where its
    submitting thread's wall went, how busy its device was and its PCIe floor alone and with
    every device copying at once."""
    for pinned in ("own", "shared"):
        js = tmp_path / f"{pinned}.json"
        r = bench(tmp_path, "--devices", "cpu,cpu", "--frames", 6, "--depth", 2, "--batch", 2,
                  "--pinned", pinned, "--json", js)
        assert "program builds in the timed window: 0" in r.stdout, r.stdout
        j = json.loads(js.read_text())
        assert j["builds_timed"] == 0 and j["pinned"] == pinned
        assert j["identical_devices"] == 1 and j["identical_pipelined"] == 1
        assert j["floor_bytes"] > 0
        # the process's CPU time over the timed window, as CPUs kept busy
        assert j["wall_s"] > 0 and j["cpu_user_s"] + j["cpu_sys_s"] > 0 and j["cpus_busy"] > 0
        for d in j["devices"]:
            parts = [d[k] for k in ("host_submit_us", "host_parse_wait_us", "host_wait_us",
                                    "host_collect_us", "host_check_us")]
            per_frame = d["wall_s"] * 1e6 / d["frames"]
            assert all(x >= 0 for x in parts) and d["host_submit_us"] > 0, d
            # the parts are measured inside the wall: they never add up to more
            assert sum(parts) <= per_frame * 1.0001, (parts, per_frame)
            assert abs(sum(parts) + d["host_other_us"] - per_frame) < 1e-3 * per_frame + 0.01
            assert d["busy_kernels"] > 0 and d["busy_copies"] > 0, d
            assert d["floor_alone_gbs"] > 0 and d["floor_together_gbs"] > 0, d
    r = bench(tmp_path, "--devices", "cpu", "--pinned", "nowhere", "--frames", 1, ok=False)
    assert r.returncode == 2 and "--pinned" in r.stderr, r.stderr


def test_bad_options_are_refused(tmp_path):
    r = bench(tmp_path, "--peaks", "magic", ok=False)
    assert r.returncode == 2 and "--peaks must be" in r.stderr
    r = bench(tmp_path, "--devices", "gpu:64", "--frames", 1, "--no-check", ok=False)
    assert r.returncode != 0 and "GPU(s) present" in r.stderr


def test_compute_alone_and_pcie_floor(tmp_path):
    """The compute variant decodes the frames already on the device (no H2D for any timed frame)
    and gives the synchronous bits; the PCIe floor and the device memory are measured; low-count
    frames compress better than the synthetic ones."""
    sizes = {}
    for kind in ("synthetic", "lowcount"):
        js = tmp_path / f"{kind}.json"
        r = bench(tmp_path, "--device", "cpu", "--frames", 8, "--depth", 2, "--batch", 2,
                  "--variants", "pipelined,compute", "--kind", kind, "--json", js)
        assert "compute alone" in r.stdout and "PCIe floor" in r.stdout, r.stdout
        j = json.loads(js.read_text())
        assert j["kind"] == kind
        v = {x["name"]: x for x in j["variants"]}
        assert v["compute"]["identical"] == 1 and v["pipelined"]["identical"] == 1
        assert v["compute"]["resident"] == 1.0 and v["compute"]["h2d_us"] == 0
        assert v["pipelined"]["resident"] == 0.0 and v["pipelined"]["h2d_us"] > 0
        assert v["compute"]["decode_us"] > 0 and v["compute"]["max_rel_err"] < 1e-5
        assert j["floor_fps"] > 0 and j["h2d_event_gbs"] > 0
        assert j["device_bytes"] >= j["device_bytes_depth1"] > 0
        sizes[kind] = j["chunk_bytes_mean"]
    assert sizes["lowcount"] < sizes["synthetic"]


def test_results_checked_against_the_reference(tmp_path):
    """A build whose results are wrong the same way every time passes the pipelined-against-
    synchronous identity check; faid-bench compares frame 0 with the C reference too and stops
    with exit status 1 naming the difference (here a decoder built for 2-byte elements, which
    unshuffles the uint32 frames' bit planes wrongly), instead of printing figures."""
    r = bench(tmp_path, "--device", "cpu", "--frames", 4, "--variants", "pipelined", ok=False,
              env_extra={"FAID_CLCODEC_DEFINES": "-D ELEM_SIZE=2"})
    assert r.returncode == 1 and "differs from the C reference" in r.stderr, r.stdout + r.stderr


def test_decode_alone_checked(tmp_path):
    """faid-bench --decode (the device decoder alone, issue 17): one frame at a time and frames
    on several queues, every decoded frame's last copy compared byte for byte with the frame that
    was encoded (ident); a decoder build that decodes wrongly is caught (exit 1, naming the
    queue), and a queue count out of range is refused."""
    js = tmp_path / "d.json"
    r = bench(tmp_path, "--decode", "--device", "cpu", "--frames", 8, "--depth", 3, "--json", js)
    assert "one frame alone" in r.stdout and "in flight,  3 queues" in r.stdout, r.stdout
    j = json.loads(js.read_text())
    assert j["ident"] == 1 and j["queues"] == 3 and j["alone_us"] > 0 and j["fps"] > 0
    # a decoder built for 2-byte elements unshuffles the uint32 frame's bit planes wrongly (the
    # later -D wins): the comparison must fail
    r = bench(tmp_path, "--decode", "--device", "cpu", "--frames", 8, "--depth", 2, ok=False,
              env_extra={"FAID_CLCODEC_DEFINES": "-D ELEM_SIZE=2"})
    assert r.returncode == 1 and "decoded differently" in r.stderr, r.stdout + r.stderr
    r = bench(tmp_path, "--decode", "--depth", 0, ok=False)
    assert r.returncode == 2 and "--depth" in r.stderr


def test_integrate_variants_checked(tmp_path):
    """gpu-run.sh's integration variants (FAID_ENGINE_INTEGRATE): the run reports the variant
    and checks its batched results bit for bit against its one-frame results, whose hash equals
    the default kernel's (gpu-run.sh's "=base"); an unknown variant stops the run naming the
    variable."""
    runs = {}
    for name, var in (("base", ""), ("all", "gather,entrynorm,prefetch,unroll8")):
        js = tmp_path / f"{name}.json"
        r = bench(tmp_path, "--device", "cpu", "--frames", 8, "--depth", 2, "--batch", 3,
                  "--split", "full", "--variants", "pipelined,compute", "--kind", "synthetic",
                  "--json", js, env_extra={"FAID_ENGINE_INTEGRATE": var})
        runs[name] = j = json.loads(js.read_text())
        v = {x["name"]: x for x in j["variants"]}
        assert v["pipelined"]["identical"] == 1 and v["compute"]["identical"] == 1, r.stdout
        assert v["pipelined"]["batch"] == 3
    assert runs["base"]["integrate_variant"] == 0 and runs["all"]["integrate_variant"] == 15
    assert len(runs["base"]["result_hash"]) == 16
    assert runs["all"]["result_hash"] == runs["base"]["result_hash"]
    r = bench(tmp_path, "--device", "cpu", "--frames", 1, "--no-check", ok=False,
              env_extra={"FAID_ENGINE_INTEGRATE": "fastest"})
    assert r.returncode != 0 and "FAID_ENGINE_INTEGRATE" in r.stderr, r.stderr


def test_bad_kind_and_detector_are_refused(tmp_path):
    r = bench(tmp_path, "--kind", "noise", ok=False)
    assert r.returncode == 2 and "--kind must be" in r.stderr
    r = bench(tmp_path, "--detector", "../x", ok=False)
    assert r.returncode == 2 and "--detector" in r.stderr
    r = bench(tmp_path, "--detector", "no_such_detector", "--frames", 1, "--no-check", ok=False)
    assert r.returncode != 0 and "no_such_detector" in r.stderr


def test_cake_pipelined_compared_on_a_sample(tmp_path):
    """With a 2D cake the pipelined loop compares the cake bit for bit on the first 16 results
    and then on every 17th (faid_bench.c CHECK_2D_EVERY: comparing a 360 x 1000 cake on every
    frame cost about 2 ms per frame, more than the GPU stage itself); the 1D profile on every
    result. 40 frames: results 0-15, 17 and 34."""
    js = tmp_path / "cake.json"
    r = bench(tmp_path, "--device", "cpu", "--frames", 40, "--depth", 2, "--batch", 2,
              "--azim", 36, "--variants", "fused,pipelined", "--json", js)
    assert "cake compared" in r.stdout, r.stdout
    j = json.loads(js.read_text())
    assert j["npt_azim"] == 36
    v = {x["name"]: x for x in j["variants"]}
    assert v["pipelined"]["identical"] == 1
    assert v["pipelined"]["checked_2d"] == 18
    assert v["fused"]["checked_2d"] == 0
    assert v["pipelined"]["max_rel_err"] < 1e-5


def test_command_line_getopt():
    """faid-bench reads its options with getopt_long: `--frames=N` is `--frames N`, a usage error
    names the option and exits 2, `--help` exits 0; in each mode too. Nothing is benchmarked: every
    line here stops at the parser."""
    env = faidtools.tool_env()

    def fb(*args):
        return subprocess.run([BENCH, *args], env=env, capture_output=True, text=True, timeout=60)

    for mode in ([], ["--zmq-ceiling"], ["--proto-encode"], ["--host-path"], ["--decode"]):
        r = fb(*mode, "--help")
        assert r.returncode == 0 and r.stdout.startswith("usage: faid-bench"), r.stdout + r.stderr
        assert fb(*mode, "-h").stdout == r.stdout
        r = fb(*mode, "--no-such-option")
        assert r.returncode == 2 and "--no-such-option" in r.stderr, r.stderr
    frames_mode = ([], ["--zmq-ceiling"], ["--host-path"], ["--decode"])
    for mode in frames_mode:
        for bad in ("x", "2x", ""):
            joined, split = fb(*mode, f"--frames={bad}"), fb(*mode, "--frames", bad)
            assert joined.returncode == 2 and "'--frames'" in joined.stderr, joined.stderr
            assert (split.returncode, split.stderr) == (joined.returncode, joined.stderr)
    # A valid value reaches the checks after parsing, in both spellings alike.
    for form in (["--frames=0"], ["--frames", "0"]):
        r = fb(*form)
        assert r.returncode == 2 and "--frames must be at least 1" in r.stderr, r.stderr
    for form in (["--frames=1"], ["--frames", "1"]):
        r = fb("--zmq-ceiling", *form)
        assert r.returncode == 2 and "bad value '1' for --frames" in r.stderr, r.stderr
    r = fb("--proto-encode", "--iters=0")
    assert r.returncode == 2 and "--iters" in r.stderr, r.stderr
    r = fb("--frames", "2", "--", "stray")
    assert r.returncode == 2 and "'stray'" in r.stderr, r.stderr
    r = fb("--frames")
    assert r.returncode == 2 and "'--frames' needs a value" in r.stderr, r.stderr


def test_cake_lean_read_back(tmp_path):
    """--cake-arrays 1 (the daemon's lean cake, output.cake lean): only the cake's intensities
    come back from the device; the pipelined results still equal the synchronous ones bit for bit
    (the cake compared on its sample) and the json says what was read back."""
    js = tmp_path / "lean.json"
    r = bench(tmp_path, "--device", "cpu", "--frames", 20, "--depth", 2, "--batch", 2,
              "--azim", 36, "--variants", "fused,pipelined", "--cake-arrays", 1, "--json", js)
    j = json.loads(js.read_text())
    assert j["cake_arrays"] == 1 and j["npt_azim"] == 36
    v = {x["name"]: x for x in j["variants"]}
    assert v["pipelined"]["identical"] == 1 and v["pipelined"]["checked_2d"] > 0
    assert v["pipelined"]["max_rel_err"] < 1e-5
    bad = bench(tmp_path, "--device", "cpu", "--frames", 2, "--cake-arrays", 5, ok=False)
    assert bad.returncode != 0 and "cake-arrays" in bad.stderr, bad.stderr


RECORDED = ("faid_sigma_clip", "faid_pick_flag", "bslz4_decode", "faid_integrate_raw")


def test_launch_recorder_replays_to_the_same_bytes(tmp_path):
    """The launch recorder (tests/bench/clrec/) preloaded into faid-bench records one launch per
    named kernel; cl_replay.py launches each again from its record and gets the bytes the
    recorded launch wrote. A record changed (the sigma clip's cutoff) replays to other bytes
    and exit status 1: the comparison is the replay's proof."""
    import os
    import shutil
    import sys

    rec = tmp_path / "rec"
    env = {"LD_PRELOAD": str(FAID_BIN.parent / "lib" / "libfaid_clrec.so"),
           "FAID_CLREC_DIR": str(rec), "FAID_CLREC_KERNELS": ",".join(RECORDED),
           "FAID_CLREC_SKIP": "1"}
    if os.environ.get("FAID_SANITIZED"):
        # the recorder goes before the sanitizer's runtime in the list of libraries
        env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    r = bench(tmp_path, "--device", "cpu", "--frames", 3, "--variants", "fused", "--depth", 1,
              "--batch", 1, "--peaks", "pyfai", "--no-check", env_extra=env)
    replay = [sys.executable, str(faidtools.ROOT / "tests" / "bench" / "cl_replay.py")]
    for k in RECORDED:
        d = rec / k
        assert ("faid_clrec: recorded %s (launch 1)" % k) in r.stderr, r.stderr[-2000:]
        meta = json.loads((d / "meta.json").read_text())
        assert meta["kernel"] == k and meta["local"] and (d / "program.bin").stat().st_size > 0
        kinds = {a["kind"] for a in meta["args"]}
        assert "mem" in kinds and "unset" not in kinds, meta["args"]
        # the launch wrote something: a replay that wrote nothing would not match
        assert any((d / f.name.replace(".in", ".out")).read_bytes() != f.read_bytes()
                   for f in d.glob("arg*.in")), k
        # --repeat: launches after the checked one, with the buffers still alive
        p = subprocess.run([*replay, "--repeat", "1", str(d)], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "differ" not in p.stdout and "identical" in p.stdout, p.stdout
        assert "median" in p.stdout, p.stdout

    bad = tmp_path / "clip-changed"
    shutil.copytree(rec / "faid_sigma_clip", bad)
    meta = json.loads((bad / "meta.json").read_text())
    # faid_sigma_clip(pre4, coefs, indices, indptr, ovf, nbins, cutoff, ...): cutoff 5 -> 1
    assert meta["args"][6] == {"kind": "scalar", "size": 4, "hex": "0000a040"}, meta["args"][6]
    meta["args"][6]["hex"] = "0000803f"
    (bad / "meta.json").write_text(json.dumps(meta))
    p = subprocess.run([*replay, str(bad)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "differ from the recorded launch" in p.stdout, p.stdout + p.stderr


def test_replay_ptx_without_the_opencl_registers():
    """cl_replay.py's CUDA backend replaces NVIDIA OpenCL's environment registers (the launch's
    offsets and grid size, which a CUDA launch does not set) and refuses one it does not know."""
    import sys
    sys.path.insert(0, str(faidtools.ROOT / "tests" / "bench"))
    import cl_replay
    ptx = ("\tmov.b32 \t%r214, %envreg0;\n\tmov.u32 \t%r215, %ctaid.x;\n"
           "\tmov.b32 \t%r5, %envreg3;\n\tmov.b32 \t%r278, %envreg6;\n")
    out = cl_replay.ptx_for_cuda(ptx)
    assert "envreg" not in out
    assert "mov.u32 %r214, 0;" in out and "mov.u32 %r5, 0;" in out
    assert "mov.u32 %r278, %nctaid.x;" in out and "%ctaid.x;" in out
    with pytest.raises(ValueError, match="envreg12"):
        cl_replay.ptx_for_cuda("\tmov.b32 \t%r1, %envreg12;\n")
    with pytest.raises(ValueError, match="otherwise than by mov"):
        cl_replay.ptx_for_cuda("\tadd.s32 \t%r1, %envreg0, %r2;\n")


def test_replay_ptx_keeps_the_register_cap():
    """cl_replay.py's CUDA backend writes the recorded build's register cap
    (-cl-nv-maxrregcount=N, which NVIDIA's OpenCL passes to ptxas, not into the PTX) as
    `.maxnreg N` on the replayed kernel's entry alone, once, and leaves the text as it is
    without a cap."""
    import sys
    sys.path.insert(0, str(faidtools.ROOT / "tests" / "bench"))
    import cl_replay
    ptx = (".visible .entry faid_pre(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"
           ".visible .entry faid_sigma_clip(\n\t.param .u64 a,\n\t.param .u32 b\n)\n{\n"
           "\tret;\n}\n")
    opts = "-cl-std=CL1.2 -D WG=256 -cl-nv-maxrregcount=80"
    out = cl_replay.ptx_maxnreg(ptx, "faid_sigma_clip", opts)
    assert out.count(".maxnreg 80") == 1
    assert out.index(".maxnreg 80") > out.index("faid_sigma_clip(")
    assert out.index(".maxnreg 80") < out.index("{", out.index("faid_sigma_clip("))
    assert cl_replay.ptx_maxnreg(out, "faid_sigma_clip", opts) == out
    assert cl_replay.ptx_maxnreg(ptx, "faid_sigma_clip", "-D WG=256") == ptx
    assert cl_replay.ptx_maxnreg(ptx, "faid_other", opts) == ptx


def test_pf8_fill_spread_same_bits(tmp_path):
    """Round 7's PF8_SPREAD (a run of 32 work-items per candidate in peakfinder8's fill, the
    first evaluating it) gives the defaults' lists bit for bit, both where every candidate gets
    its run (the default grid) and where the launch falls back to one candidate per work-item
    (one work-group: 8 runs for more candidates than that); so does PF8_WGSEED=0 (a candidate
    per work-item; the default since round 8 is a work-group per candidate, which unit.peaks'
    test_pf8_variants checks on harder frames), as gpu-run.sh's sets r7spread and r8wg0 run
    them."""
    hashes = {}
    sets = {"default": {}, "spread": {"FAID_PEAKS_KOPTS": "-DPF8_SPREAD=32"},
            "spread1g": {"FAID_PEAKS_KOPTS": "-DPF8_SPREAD=32", "FAID_PF8_FILL_GROUPS": "1"},
            "wg0": {"FAID_PEAKS_KOPTS": "-DPF8_WGSEED=0"}}
    for name, env in sets.items():
        hashes[name] = checked_peaks(tmp_path, name, "peakfinder8", env)["peaks_hash"]
    assert hashes["spread"] == hashes["spread1g"] == hashes["wg0"] == hashes["default"] \
        != "0" * 16, hashes


def test_profile_kernels_on_pocl(tmp_path):
    """tests/bench/profile-kernels.sh as gpu-run.sh's PROFILE_KERNELS step runs it, here with
    the pyopencl replay and no profiler: every named kernel recorded by one of its three runs
    (the picker, peakfinder8, the pipelined stage) replays to the recorded bytes; a kernel no
    run launches is named as such."""
    import os
    import sys
    (tmp_path / "c.yaml").write_text(CONFIG)
    out = tmp_path / "prof"
    env = faidtools.tool_env()
    env.update(OUT=str(out), BACKEND="opencl", PYTHON=sys.executable, DEVICE="cpu", NCU="none",
               REPEAT="1", FAID_BIN=str(FAID_BIN),
               BENCH_EXTRA="--config %s" % (tmp_path / "c.yaml"),
               KERNELS="faid_sigma_clip faid_pf8_fill faid_integrate_raw_b faid_nowhere")
    if os.environ.get("FAID_SANITIZED"):
        env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    r = subprocess.run(["bash", str(faidtools.ROOT / "tests" / "bench" / "profile-kernels.sh")],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in (out / "summary.txt").read_text().splitlines()
            if line.startswith(" ") or line.startswith("faid")}
    for k in ("faid_sigma_clip", "faid_pf8_fill", "faid_integrate_raw_b"):
        assert k in rows and rows[k][1] == "same", (k, r.stdout)
        assert any((out / "records").glob("*/%s/meta.json" % k)), k
    assert "faid_nowhere: no launch recorded" in r.stdout


def test_ncu_summary_reads_the_h100_profiles():
    """ncu_summary.py on round 7's stored H100 outputs: the two kernels whose replay wrote the
    recorded bytes with their profile's numbers, the others marked (their launches were not
    faid's: the environment registers, since replaced)."""
    import sys
    d = faidtools.ROOT / "tests" / "bench" / "results" / "h100-2026-11-27-round7-probe"
    r = subprocess.run([sys.executable, str(faidtools.ROOT / "tests" / "bench" / "ncu_summary.py"),
                        str(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[2:]}
    fill = rows["faid_pf8_fill"].split()
    assert fill[1:10] == ["same", "137.7", "176.7", "280919", "2722", "48", "8.2", "12.7",
                          "152007"], fill
    assert "L1TEX" in rows["faid_pf8_prep"] and " 81.8 " in rows["faid_pf8_prep"]
    assert "DIFFER" in rows["faid_sigma_clip"] and "FAILED" in rows["faid_pick_flag"]


def test_ncu_summary_hot_instructions(tmp_path):
    """The three machine instructions with the most stall samples, from a per-instruction CSV in
    the columns ncu's source page names (the page's exact layout on the GPU host is not yet
    seen: a table without those columns gives nothing, not an error)."""
    import sys
    sys.path.insert(0, str(faidtools.ROOT / "tests" / "bench"))
    import ncu_summary
    p = tmp_path / "src.csv"
    p.write_text('"Address","Source","Warp Stall Sampling (All Samples)"\n'
                 '"0x10","LDG.E R2, [R4.64]","1,200"\n"0x20","DADD R6, R6, R8","300"\n'
                 '"0x30","BAR.SYNC 0x0","500"\n"0x40","EXIT","0"\n')
    got = ncu_summary.hot_instructions(str(p))
    assert [t for _, t in got] == ["LDG.E R2, [R4.64]", "BAR.SYNC 0x0", "DADD R6, R6, R8"]
    assert abs(got[0][0] - 0.6) < 1e-12
    p.write_text('"Address","Source"\n"0x10","EXIT"\n')
    assert ncu_summary.hot_instructions(str(p)) == []
    assert ncu_summary.hot_instructions(str(tmp_path / "none.csv")) == []
