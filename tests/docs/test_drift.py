"""Docs that cannot drift from the code, checked offline on the built binaries: the option
reference of docs/configuration.md and docs/faidctl.md are what the binaries generate; every
command, option, config key, metric, drop reason, stage, control command, fuzz target, module
and installed path the docs name exists; the README's offline commands and the docs' YAML examples run; the .dat / .peaks
formats and exit statuses are as documented; the Containerfile installs what the binaries link.
docs/dev/doc-review.md lists the claim each test guards. Regenerate docs/faidctl.md and
the option reference with `FAID_BIN=build/bin python3 tests/docs/test_drift.py --write`."""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("FAID_BIN") or ROOT / "build" / "bin").resolve()


CONF_DOC = ROOT / "docs" / "configuration.md"
OPTIONS_RE = re.compile(r"<!-- BEGIN OPTION TABLE[^\n]*-->\n(.*?)\n<!-- END OPTION TABLE -->", re.S)


def option_table():
    return subprocess.run([str(BIN / "faidctl"), "process", "--dump-config=markdown"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_option_table_is_generated():
    """docs/configuration.md's option reference is exactly what the option table generates
    (regenerate with --write, below), and the README carries no copy of it to drift."""
    m = OPTIONS_RE.search(CONF_DOC.read_text())
    assert m, "docs/configuration.md lacks the BEGIN/END OPTION TABLE markers"
    gen = option_table()
    assert m.group(1).strip() == gen, (
        "docs/configuration.md's option table differs from the option table; regenerate it with "
        "`FAID_BIN=build/bin python3 tests/docs/test_drift.py --write`")
    for key in ("integration.npt", "input.endpoint", "queue.policy", "geometry.poni_file"):
        assert f"`{key}`" in gen
    readme = (ROOT / "README.md").read_text()
    assert "| `integration.npt` |" not in readme and "docs/configuration.md" in readme


def test_docs_index_lists_every_doc():
    """docs/README.md is the index of every document: each page of docs/ and docs/dev/ (and
    each README of tests/) is linked there, and every link leads to a file."""
    index = (ROOT / "docs" / "README.md").read_text()
    links = set(re.findall(r"\]\(([^)#]+)\)", index))
    for link in links:
        assert (ROOT / "docs" / link).is_file(), f"docs/README.md links a missing file: {link}"
    pages = {p.relative_to(ROOT / "docs").as_posix()
             for p in [*(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("dev/*.md")]}
    pages |= {"../" + p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*/README.md")}
    pages |= {"../tests/README.md"}
    missing = pages - {"README.md"} - links
    assert not missing, f"docs/README.md lacks: {sorted(missing)}"


def test_every_test_has_a_feature_label():
    """`ctest -L FEATURE` finds a feature's tests: every test file has a row in the label map of
    tests/CMakeLists.txt, and every label of the map is in tests/README.md's label table."""
    cm = (ROOT / "tests" / "CMakeLists.txt").read_text()
    rows = dict(re.findall(r"\b([a-z0-9]+\.[a-z0-9_]+)=([a-z,]+)",
                           cm.split("set(faid_labels", 1)[1].split(")", 1)[0]))
    tests = {"unit.client_only_link", "docs.protocol_keys", "docs.output_files"}
    for kind, pat, pre in (("unit", "test_*.c", "test_"), ("fuzz", "fuzz_*.c", "fuzz_"),
                           ("reference", "test_*.py", "test_"), ("docs", "test_*.py", "test_"),
                           ("integration", "test_*.py", "test_")):
        tests |= {f"{kind}.{p.stem[len(pre):]}" for p in (ROOT / "tests" / kind).glob(pat)}
    assert tests - set(rows) == set(), f"tests without a feature label: {tests - set(rows)}"
    table = (ROOT / "tests" / "README.md").read_text().split("## Features and their labels", 1)[1]
    listed = dict(re.findall(r"^\| `([a-z]+)` \| [^|]* \| ([^|]*) \|$", table, re.M))
    labels = {l for v in rows.values() for l in v.split(",")}
    assert labels == set(listed), (labels - set(listed), set(listed) - labels)
    for label, names in listed.items():
        want = {t for t, v in rows.items() if label in v.split(",")}
        assert set(re.findall(r"\b[a-z]+\.[a-z0-9_]+\b", names)) == want, (label, names, want)


def test_one_unit_test_function_by_name():
    """tests/README.md: `FAID_TEST=NAME` runs only that function of a unit test, and a name that
    matches none fails the run instead of passing with nothing run."""
    env = dict(os.environ, FAID_TEST="test_errors")
    r = subprocess.run([str(BIN / "test_config")], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "left out by FAID_TEST" in r.stdout, r.stdout + r.stderr
    one = int(re.search(r"(\d+) passed", r.stdout).group(1))
    full = subprocess.run([str(BIN / "test_config")], capture_output=True, text=True)
    assert 0 < one < int(re.search(r"(\d+) passed", full.stdout).group(1))
    env["FAID_TEST"] = "test_no_such_function"
    r = subprocess.run([str(BIN / "test_config")], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "names no test function" in r.stdout, r.stdout
    assert "FAID_TEST=test_errors ./bin/test_config" in (ROOT / "tests" / "README.md").read_text()


def test_readme_commands_exist():
    readme = (ROOT / "README.md").read_text()
    for cmd in ("bash deploy/demo.sh", "bash tests/run-all.sh"):
        assert cmd in readme
        assert (ROOT / cmd.split()[1]).is_file()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tests/run-all.sh" in ci


# ---- drift tests of the docs review (docs/dev/doc-review.md lists the claims each one guards) ----

import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

import numpy as np  # noqa: E402

# docs/dev/ (the doc review, which quotes the wrong claims it fixed) is not scanned.
SRC_DOCS = [ROOT / "README.md", ROOT / "proto" / "PROTOCOL.md",
            *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "deploy").glob("*.md")), ROOT / "deploy" / "faid.service",
            ROOT / "deploy" / "demo.sh", ROOT / "tests" / "fuzz" / "README.md",
            ROOT / "tests" / "bench" / "README.md"]
OPT_RE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b")
CLI_DOC = ROOT / "docs" / "faidctl.md"


def run(*args, check=True, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, check=check,
                          timeout=600, **kw)


def help_text(*cmd):
    r = run(BIN / cmd[0], *cmd[1:], "--help", check=False)
    assert r.returncode == 0, (cmd, r.stderr)
    return r.stdout + r.stderr


def faidctl_commands():
    cmds = re.findall(r"^  ([a-z]+(?:-[a-z]+)*)  ", help_text("faidctl"), re.M)
    assert len(cmds) >= 10, cmds
    return cmds


def cli_reference():
    """docs/faidctl.md's generated block: every --help text, verbatim."""
    parts = ["### `faid --help`\n\n```\n" + help_text("faid").rstrip() + "\n```",
             "### `faidctl --help`\n\n```\n" + help_text("faidctl").rstrip() + "\n```"]
    for c in faidctl_commands():
        parts.append(f"### `faidctl {c} --help`\n\n```\n" + help_text("faidctl", c).rstrip()
                     + "\n```")
    return "\n\n".join(parts)


def cli_block(text):
    m = re.search(r"<!-- help:begin[^\n]*-->\n(.*?)\n<!-- help:end -->", text, re.S)
    assert m, f"{CLI_DOC} lacks the help:begin/end markers"
    return m


def test_cli_reference_is_generated():
    """docs/faidctl.md holds every --help text as the binaries print it, so every command and
    option of faid and faidctl is documented; regenerate with
    `python3 tests/docs/test_drift.py --write` after changing a --help text."""
    text = CLI_DOC.read_text()
    assert cli_block(text).group(1).strip() == cli_reference().strip(), (
        "docs/faidctl.md differs from the --help texts: regenerate it with "
        "`FAID_BIN=build/bin python3 tests/docs/test_drift.py --write`")


def test_exit_status_as_documented(tmp_path):
    """docs/faidctl.md: 0 on success, 1 when the work failed, 2 on a usage error. Every command
    answers an unknown option with 2; the offline commands given a missing file answer 1."""
    assert run(BIN / "faidctl", "no-such-command", check=False).returncode == 2
    assert run(BIN / "faid", "--no-such-option", check=False).returncode == 2
    for c in faidctl_commands():
        r = run(BIN / "faidctl", c, "--no-such-option", check=False)
        assert r.returncode == 2, (c, r.stderr)
    missing = tmp_path / "missing"
    for args in (["decode", f"{missing}.bslz4", "-o", tmp_path / "x.npy", "--shape", "2,2",
                  "--dtype", "uint8"], ["inspect", missing], ["geometry", "--poni", missing],
                 ["process", "-o", tmp_path, "--device", "ref", f"{missing}.npy"],
                 ["replay", "--npy", f"{missing}.npy"]):
        r = run(BIN / "faidctl", *args, check=False)
        assert r.returncode == 1, (args, r.stderr)
    assert run(BIN / "faid", "-c", missing, check=False).returncode == 1


def test_control_commands_agree():
    """The control commands of PROTOCOL.md section 4's table are the key table's `cmd` values,
    and every one but `ping` is a faidctl command with a row in the README's Control table."""
    proto = (ROOT / "proto" / "PROTOCOL.md").read_text()
    sec4 = proto.split("\n## 4.", 1)[1]
    table = sec4.split("| cmd | arguments |", 1)[1].split("\n\n", 1)[0]
    rows = set(re.findall(r"^\| `([a-z]+)` \|", table, re.M))
    keyrow = re.search(r"^\| `cmd` \| str \| required \| ([^|]*)\|", sec4, re.M).group(1)
    assert rows == set(re.findall(r"`([a-z]+)`", keyrow)), (rows, keyrow)
    readme = (ROOT / "README.md").read_text()
    control = readme.split("## Control", 1)[1].split("\n## ", 1)[0]
    in_readme = set(re.findall(r"^\| `faidctl ([a-z]+)", control, re.M))
    assert rows - {"ping"} <= set(faidctl_commands()) and rows - {"ping"} == in_readme, (
        rows, in_readme)


def test_faidctl_commands_in_readme_and_help_agree():
    """Every faidctl command of `faidctl --help` is named in the README, and every `faidctl
    WORD` the docs name is a command."""
    cmds = set(faidctl_commands())
    readme = (ROOT / "README.md").read_text()
    in_readme = set(re.findall(r"faidctl ([a-z]+(?:-[a-z]+)*)", readme)) - {"at", "into"}
    assert cmds - in_readme == set(), f"commands missing from the README: {cmds - in_readme}"
    for p in SRC_DOCS:
        named = set(re.findall(r"`[^`\n]*?faidctl ([a-z]+(?:-[a-z]+)*)[^`\n]*`", p.read_text()))
        assert named <= cmds, f"{p.name} names faidctl commands that do not exist: {named - cmds}"


def test_documented_command_lines_use_existing_options():
    """Every option written after `faidctl CMD` or `faid` in the docs (code and backticks) is
    one that command's --help lists (`faid --dump-config --annotated` was documented and
    refused)."""
    cmds = faidctl_commands()
    hopts = {c: set(OPT_RE.findall(help_text("faidctl", c))) | {"--help", "-h"} for c in cmds}
    fopts = set(OPT_RE.findall(help_text("faid")))
    bopts = (set(OPT_RE.findall(help_text("faid-bench")))
             | set(OPT_RE.findall(help_text("faid-bench", "--zmq-ceiling")))
             if (BIN / "faid-bench").exists() else None)
    bad = []
    for p in SRC_DOCS + [ROOT / "deploy" / "faid.example.yaml"]:
        for line in p.read_text().splitlines():
            for m in re.finditer(r"faidctl ([a-z]+)([^`|;\n]*)", line):
                if m.group(1) not in hopts:
                    continue
                rest = re.split(r"\s#|\)|\. |, ", m.group(2))[0]
                bad += [(str(p.relative_to(ROOT)), m.group(1), o) for o in set(OPT_RE.findall(rest)) - hopts[m.group(1)]]
            for m in re.finditer(r"(?<![\w/.-])faid ((?:--?[a-z][\w=-]*\s*)+)", line):
                bad += [(str(p.relative_to(ROOT)), "faid", o) for o in set(OPT_RE.findall(m.group(1))) - fopts]
            spans = re.findall(r"`(faid-bench [^`]*)`", line)
            if line.lstrip().startswith("faid-bench "):
                spans.append(line)
            for span in spans if bopts is not None else ():
                bad += [(str(p.relative_to(ROOT)), "faid-bench", o)
                        for o in set(OPT_RE.findall(span)) - bopts]
    assert not bad, f"options the binaries do not have: {bad}"


def option_keys():
    md = run(BIN / "faidctl", "process", "--dump-config=markdown").stdout
    return set(re.findall(r"^\| `([a-z_.]+)` \|", md, re.M))


# Dotted names in the docs that are not options: status / start keys and drop reasons.
NOT_OPTIONS = {
    "input.closed", "input.setup", "input.reported", "input.applied", "input.start_message",
    "input.shape_matches", "input.detector_masked_pixels", "input.protocol", "input.accepted",
    "lossless.given_up", "input.applied.pixel_mask", "input.applied.flatfield",
    "input.connections", "input.max_message_bytes", "hits.dropped",
    "input.endpoints", "input.pinned_frames", "input.pinned_fallback", "input.pinned_received",
    "input.pinned_receive_fallback",
    "input.zmq_contexts",
    "control.request", "control.reply",  # PROTOCOL.md's generated-table markers
    "integration.nptt",  # the misspelt key of configuration.md's error-message example
    "geometry.poni",  # a file faid-bench --dump writes
}


def test_config_keys_named_in_docs_exist():
    """Every `section.key` the docs name in backticks (or as `section.key:` in YAML prose) is an
    option of the table, a drop reason of the metric table, or a status / start key listed in
    NOT_OPTIONS."""
    keys = option_keys()
    sections = {k.split(".")[0] for k in keys if "." in k}
    metrics = run(BIN / "faid", "--dump-metrics").stdout
    reasons = set(re.search(r"Reasons: ([^|]*)\.", metrics).group(1).replace("`", "")
                  .replace(" ", "").split(","))
    ctests = {f"integration.{p.stem[5:]}" for p in (ROOT / "tests" / "integration").glob("test_*.py")}
    allowed = keys | reasons | NOT_OPTIONS | ctests
    bad = []
    for p in SRC_DOCS + [ROOT / "deploy" / "faid.example.yaml"]:
        for m in re.finditer(r"(?<![\w./-])([a-z]+)\.([a-z_]+(?:\.[a-z_]+)?)(?![\w(/-]|\.[a-z])",
                             p.read_text()):
            name = m.group(0)
            if m.group(1) in sections and name not in allowed and not name.endswith(".md"):
                bad.append((str(p.relative_to(ROOT)), name))
    assert not bad, f"names that look like options but are none: {sorted(set(bad))}"
    # an option spelt with an underscore for its dot (`stats_interval` was in PROTOCOL.md)
    under = {k.replace(".", "_"): k for k in keys if "." in k}
    for p in SRC_DOCS:
        for w in re.findall(r"`([a-z_]+)`", p.read_text()):
            assert w not in under, f"{p.relative_to(ROOT)}: `{w}` is option {under[w]}"


def test_metric_names_in_docs_exist():
    """Every faid_* metric name the README and docs/operations.md use (PromQL examples
    included) is in the metric table, and every metric of the table is in docs/operations.md."""
    metrics = run(BIN / "faid", "--dump-metrics").stdout
    names = set(re.findall(r"^\| `(faid_[a-z_]+)` \| (?:counter|gauge|histogram)", metrics, re.M))
    hist = set(re.findall(r"^\| `(faid_[a-z_]+)` \| histogram", metrics, re.M))
    known = names | {h + s for h in hist for s in ("_bucket", "_sum", "_count")}
    for p in (ROOT / "README.md", ROOT / "docs" / "operations.md"):
        used = set(re.findall(r"(?<![\w/])(faid_[a-z_]+_(?:total|seconds|frames|ratio|info|"
                              r"rate|bucket|sum|count|version|clients|connections|messages|"
                              r"bytes|connected|second))\b", p.read_text()))
        assert used <= known, f"{p.name}: metrics that do not exist: {used - known}"
    ops = (ROOT / "docs" / "operations.md").read_text()
    assert all(f"`{n}`" in ops for n in names)


def test_drop_reasons_and_stages_in_protocol():
    """PROTOCOL.md's `drops` reasons and the stage timings are the tables' (faid_stats.h)."""
    metrics = run(BIN / "faid", "--dump-metrics").stdout
    reasons = re.search(r"Reasons: ([^|]*)\.", metrics).group(1).replace("`", "").split(", ")
    stages = re.findall(r"`([a-z]+)` [a-z]", re.search(r"faid_stage_seconds`[^\n]*Stages: ([^|]*)\|",
                                                          metrics).group(1))
    err_stages = re.findall(r"`([a-z]+)`", re.search(r"faid_errors_total`[^\n]*Stages: ([^;]*);",
                                                     metrics).group(1))
    proto = (ROOT / "proto" / "PROTOCOL.md").read_text()
    for r in reasons:
        assert f"`{r.strip()}`" in proto, r
    for s in stages:
        assert s == "host" or f"`{s}_us`" in proto, s
    errors_row = re.search(r"^\| `errors` \| map[^\n]*stage\.CODE[^\n]*", proto, re.M).group(0)
    assert len(err_stages) >= 3
    for s in err_stages:
        assert f"`{s}`" in errors_row, s


def test_python_subscriber_options_documented():
    """client/python/README.md's option table lists exactly the options of
    faid_subscriber.py --help."""
    sub = ROOT / "client" / "python"
    r = run(sys.executable, sub / "faid_subscriber.py", "--help")
    have = set(OPT_RE.findall(r.stdout)) - {"--help", "-h"}
    table = re.findall(r"^\| (`--[^|]*) \|", (sub / "README.md").read_text(), re.M)
    documented = set(OPT_RE.findall(" ".join(table)))
    assert have == documented, (f"undocumented: {have - documented}; "
                                f"documented but missing: {documented - have}")


def test_fuzz_targets_documented():
    """"Every parser of external bytes has a fuzz target": each tests/fuzz/fuzz_NAME.c is in
    tests/fuzz/README.md's table and has a seed corpus, and each parser module of proto/ has a
    target."""
    fuzz = ROOT / "tests" / "fuzz"
    readme = (fuzz / "README.md").read_text()
    targets = sorted(p.stem[len("fuzz_"):] for p in fuzz.glob("fuzz_*.c"))
    for t in targets:
        assert f"`{t}`" in readme, f"fuzz target {t} missing from tests/fuzz/README.md"
        assert any((fuzz / "corpus" / t).iterdir()), f"fuzz target {t} has no seeds"
    for p in (ROOT / "proto").glob("faid_input_*.c"):
        assert p.stem[len("faid_input_"):] in targets, f"{p.name} has no fuzz target"
    # The README names the one external format without a target (HDF5, parsed by libhdf5).
    said = "reads, are parsed by libhdf5 and have none" in (ROOT / "README.md").read_text()
    assert said != any("h5" in t or "hdf5" in t for t in targets), (
        "README.md's fuzz sentence disagrees with tests/fuzz/ about HDF5")


def test_service_paths_exist_after_install():
    """deploy/faid.service runs /usr/local/bin/faid and points Documentation= at
    /usr/local/share/doc/faid: `cmake --install` (prefix /usr/local) puts them there, without
    the developers' pages of docs/dev/."""
    unit = (ROOT / "deploy" / "faid.service").read_text()
    build = BIN.parent
    with tempfile.TemporaryDirectory() as tmp:
        run("cmake", "--install", build, "--prefix", tmp)
        paths = re.findall(r"/usr/local/(\S+)", "\n".join(
            l for l in unit.splitlines() if l.startswith(("ExecStart", "Documentation"))))
        assert paths
        for rel in paths:
            rel = rel.split()[0]
            assert (pathlib.Path(tmp) / rel).exists(), f"{rel} is not installed"
        # users get the docs and their index, not the developers' review of them (docs/dev/)
        docdir = pathlib.Path(tmp) / "share" / "doc" / "faid"
        assert (docdir / "configuration.md").is_file()
        assert (docdir / "README.md").read_text() == (ROOT / "README.md").read_text()
        assert not list(docdir.rglob("doc-review.md")), "docs/dev/doc-review.md is installed"


def needed_packages(binary):
    """Debian packages of the shared libraries binary links directly (readelf NEEDED, one
    dpkg -S for all of them)."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                        run("readelf", "-d", binary).stdout)
    where = dict(re.findall(r"^\s*(\S+) => (\S+)", run("ldd", binary).stdout, re.M))
    paths = {lib: os.path.realpath(where[lib]) for lib in needed}
    out = run("dpkg", "-S", *paths.values(), *[where[l] for l in needed], check=False).stdout
    owner = {}
    for line in out.splitlines():
        pkg, _, path = line.partition(": ")
        owner[path.strip()] = pkg.split(":")[0]
    pkgs = set()
    for lib in needed:
        pkg = owner.get(paths[lib]) or owner.get(where[lib]) or owner.get(
            where[lib].replace("/usr/lib/", "/lib/", 1))
        assert pkg, (lib, paths[lib], out)
        pkgs.add(pkg)
    # libc, and the sanitizer runtimes of an ASan/UBSan build (not a dependency of faid's)
    return {p for p in pkgs if p != "libc6" and not re.match(r"lib(a|ub|l|t)san\d", p)}


def test_containerfile_has_what_the_binaries_link():
    """deploy/Containerfile's run stage installs the package of every library faid and faidctl
    link, and its build stage every -dev package deploy/install-deps.sh installs for the build."""
    if not shutil.which("dpkg") or not shutil.which("readelf"):
        pytest.skip("needs dpkg and readelf (Debian)")
    cf = (ROOT / "deploy" / "Containerfile").read_text()
    build_stage, run_stage = cf.split("\nFROM ", 2)[1:]
    for b in ("faid", "faidctl"):
        missing = {p for p in needed_packages(BIN / b) if p not in run_stage.split()}
        assert not missing, f"Containerfile run stage lacks {missing} ({b} links them)"
    deps = (ROOT / "deploy" / "install-deps.sh").read_text()
    pkgs = re.search(r"pkgs=\((.*?)\)", deps, re.S).group(1).split()
    dev = {p for p in pkgs if p.endswith("-dev") and p != "libclang-rt-dev"} | {"opencl-c-headers"}
    missing = dev - set(build_stage.split())
    assert not missing, f"Containerfile build stage lacks {missing} (install-deps.sh builds with them)"


def test_every_module_in_architecture():
    """docs/ARCHITECTURE.md's module tables name every .c of daemon/, the layer folders
    (base/, core/, engine/) and proto/."""
    arch = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    missing = [str(p.relative_to(ROOT)) for d in ("daemon", "base", "core", "engine", "proto")
               for p in sorted((ROOT / d).glob("*.c")) if p.stem not in arch]
    assert not missing, f"modules missing from docs/ARCHITECTURE.md: {missing}"


def test_reference_versions_are_the_pinned_ones():
    """The pyFAI version the docs compare against is the one tests/reference/requirements.txt pins
    (the tests that back the docs' numbers run on it)."""
    pin = re.search(r"^pyFAI==([\d.]+)", (ROOT / "tests" / "reference" / "requirements.txt")
                    .read_text(), re.M | re.I).group(1)
    for p in SRC_DOCS:
        for v in re.findall(r"pyFAI (20\d\d\.\d+(?:\.\d+)?)", p.read_text()):
            assert pin.startswith(v), (str(p.relative_to(ROOT)), v, pin)


def test_peaks_file_as_documented(tmp_path):
    """configuration.md's .peaks format: header lines `algorithm`, every other peaks.* parameter
    (from the option table, less aggregates_interval), `num_peaks`, `is_hit`, `columns`, then
    the columns of its code block."""
    (tmp_path / "c.yaml").write_text(
        "detector: {preset: null, shape: [64, 80], pixel_size: [1.0e-4, 1.0e-4]}\n"
        "geometry: {dist: 0.1, poni1: 0.003, poni2: 0.004}\nintegration: {npt: 32}\n"
        "peaks: {algorithm: pyfai}\n")
    run(BIN / "faidctl", "process", "-c", tmp_path / "c.yaml", "--synthetic", "1", "--device",
        "ref", "-o", tmp_path, "-q")
    lines = (tmp_path / "synthetic_00000.peaks").read_text().splitlines()
    keys = [l[1:].split(":")[0].strip() for l in lines if l.startswith("#") and ":" in l]
    params = sorted(k.split(".", 1)[1] for k in option_keys() if k.startswith("peaks."))
    params = [k for k in params if k not in ("algorithm", "aggregates_interval")]
    assert keys[0] == "algorithm" and keys[-3:] == ["num_peaks", "is_hit", "columns"], keys
    assert sorted(keys[1:-3]) == params, keys
    conf = (ROOT / "docs" / "configuration.md").read_text()
    cols = re.search(r"then one line per\npeak:\n\n```\n([^\n]+)\n```", conf).group(1)
    assert next(l for l in lines if l.startswith("# columns:")) == "# columns: " + cols


def test_embedded_default_as_documented():
    """configuration.md (and the README's quick start): without a file, EIGER 4M (2167 x 2070
    pixels of 75 um), distance 0.1 m, PONI at the detector centre, no tilt, 1 A, 1000 bins in
    q_nm^-1, full split, Poisson errors, solid angle on."""
    import yaml
    cfg = yaml.safe_load(run(BIN / "faid", "--dump-config").stdout)
    det, geo, integ = cfg["detector"], cfg["geometry"], cfg["integration"]
    assert det["preset"] == "eiger_4m" and det["shape"] == [2167, 2070]
    assert det["pixel_size"] == [75e-6, 75e-6]
    assert geo["dist"] == 0.1 and geo["wavelength"] == 1e-10
    assert [geo["rot1"], geo["rot2"], geo["rot3"]] == [0, 0, 0]
    assert abs(geo["poni1"] - 2167 * 75e-6 / 2) < 1e-12 and abs(geo["poni2"] - 2070 * 75e-6 / 2) < 1e-12
    assert (integ["npt"], integ["unit"], integ["split"], integ["error_model"], integ["solid_angle"]) \
        == (1000, "q_nm^-1", "full", "poisson", True)
    conf = " ".join((ROOT / "docs" / "configuration.md").read_text().split())
    assert "EIGER 4M preset (2167 x 2070 pixels of 75 um" in conf
    assert "1000 bins in q_nm^-1, full pixel splitting, Poisson errors, solid-angle correction on" \
        in conf


def test_yaml_examples_load():
    """Every YAML block of the docs that is a faid configuration (all but Prometheus') loads:
    `faidctl process -c BLOCK --dump-config` exits 0 (a .poni file it names is made here)."""
    blocks = []
    for p in SRC_DOCS:
        blocks += [(p, b) for b in re.findall(r"```ya?ml\n(.*?)```", p.read_text(), re.S)
                   if "scrape_configs" not in b]
    assert len(blocks) >= 2, blocks
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        for poni in set(re.findall(r"([\w.-]+\.poni)\b", " ".join(b for _, b in blocks))):
            (t / poni).write_text("poni_version: 2\nDetector: Eiger4M\nDetector_config: {}\n"
                                  "Distance: 0.1\nPoni1: 0.08\nPoni2: 0.08\nRot1: 0\nRot2: 0\n"
                                  "Rot3: 0\nWavelength: 1e-10\n")
        for i, (p, b) in enumerate(blocks):
            (t / f"b{i}.yaml").write_text(b)
            r = run(BIN / "faidctl", "process", "-c", t / f"b{i}.yaml", "--dump-config",
                    check=False)
            assert r.returncode == 0, (str(p.relative_to(ROOT)), b, r.stderr)


def test_readme_offline_commands_run():
    """The README's "Using it" block: every command that needs no running daemon (faid
    --dump-config, faidctl devices, process, decode, geometry, inspect; not replay, sub, status,
    aggregates, merge-files) runs as written, on files made here, and exits 0."""
    sys.path.insert(0, str(ROOT / "tests" / "reference"))
    import dectris_stream as ds  # noqa: E402
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Using it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [l.split("  #")[0].strip() for l in block.strip().splitlines()]
    offline = [l for l in lines
               if not re.search(r"faidctl (replay|sub|status|aggregates|merge-files)|faid -c ", l)]
    assert len(offline) >= 6, offline
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        (t / "beamline.yaml").write_text(
            "detector: {preset: null, shape: [64, 80], pixel_size: [1.0e-4, 1.0e-4]}\n"
            "geometry: {dist: 0.1, poni1: 0.003, poni2: 0.004}\nintegration: {npt: 50}\n"
            "devices: ref\n")
        rng = np.random.default_rng(1)
        np.save(t / "frames.npy", rng.poisson(5, (2, 64, 80)).astype(np.uint16))
        big = rng.poisson(3, (2167, 2070)).astype(np.uint32)
        (t / "chunk.bslz4").write_bytes(ds.bslz4(big))
        (t / "calib.poni").write_text(
            "poni_version: 2\nDetector: Eiger4M\nDetector_config: {}\nDistance: 0.1\n"
            "Poni1: 0.08\nPoni2: 0.08\nRot1: 0\nRot2: 0\nRot3: 0\nWavelength: 1e-10\n")
        small = rng.poisson(5, (64, 80)).astype(np.uint16)
        (t / "msg.cbor").write_bytes(ds.v2_encode(ds.v2_image(1, "s1", 0, {"threshold_1": small},
                                                              "bslz4")))
        for line in offline:
            cmd = line.replace("build/bin/", str(BIN) + "/")
            r = subprocess.run(cmd, shell=True, cwd=tmp, capture_output=True, text=True,
                               timeout=600)
            assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        assert np.array_equal(np.load(t / "frame.npy"), small)
        dats = sorted((t / "out").glob("frames_*.dat"))
        assert [d.name for d in dats] == ["frames_00000.dat", "frames_00001.dat"]
        # docs/configuration.md lists the .dat header lines: they are the ones written
        conf = (ROOT / "docs" / "configuration.md").read_text()
        listed = re.search(r"digits \(`img_00000.dat`\)\. `#` header lines \((.*?)\), then",
                           conf, re.S).group(1)
        listed = set(re.findall(r"`([a-z_]+)`", listed))
        header = [l[1:].strip() for l in dats[0].read_text().splitlines() if l.startswith("#")]
        written = {k for l in header for k in re.findall(r"([a-z_]+):", l)}
        assert written == listed, (written, listed)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        text = CLI_DOC.read_text()
        m = cli_block(text)
        CLI_DOC.write_text(text[:m.start(1)] + cli_reference() + text[m.end(1):])
        print(f"wrote {CLI_DOC}")
        text = CONF_DOC.read_text()
        m = OPTIONS_RE.search(text)
        CONF_DOC.write_text(text[:m.start(1)] + option_table() + text[m.end(1):])
        print(f"wrote {CONF_DOC}")
    else:
        sys.exit("usage: FAID_BIN=build/bin python3 tests/docs/test_drift.py --write")
