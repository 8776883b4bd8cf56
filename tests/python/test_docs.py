"""The README's configuration reference is the option table: the block between the
options:begin/end markers must equal what `faidctl process --dump-config=markdown` generates, and
the README's two quick-start commands must name scripts that exist."""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("FAID_BIN") or ROOT / "build" / "bin")


def test_readme_option_table_is_generated():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- options:begin[^\n]*-->\n(.*?)\n<!-- options:end -->", readme, re.S)
    assert m, "README.md lacks the options:begin/end markers"
    gen = subprocess.run([str(BIN / "faidctl"), "process", "--dump-config=markdown"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert m.group(1).strip() == gen, ("README.md's option table differs from the option table; "
                                       "regenerate it with faidctl process --dump-config=markdown")
    for key in ("integration.npt", "input.endpoint", "queue.policy", "geometry.poni_file"):
        assert f"`{key}`" in gen


def test_readme_commands_exist():
    readme = (ROOT / "README.md").read_text()
    for cmd in ("bash deploy/demo.sh", "bash tests/run-all.sh"):
        assert cmd in readme
        assert (ROOT / cmd.split()[1]).is_file()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tests/run-all.sh" in ci
