"""The peak stages through `faidctl process` on both devices: the OpenCL device (PoCL here) and the
plain C reference must write identical .peaks files (same peaks, same order, every field), for
both finders, the three background error models, an integration error model other than Poisson
(the background then preprocesses again with the Poisson variance) and batches of two frames
(several lanes sharing one preprocessed-frame buffer per slot). The frames come from faidctl's own
synthetic generator (rings and moving Bragg spots, Poisson noise); each list must hold peaks."""

import subprocess

import pytest

import faidtools

FAID_BIN = faidtools.FAID_BIN
FAIDCTL = str(FAID_BIN / "faidctl")

CONFIG = faidtools.SMALL_DETECTOR + """peaks:
  algorithm: pyfai
  adc_threshold: 40
"""


def process(tmp, *args):
    env = faidtools.tool_env()
    r = subprocess.run([FAIDCTL, "process", "-q", "-c", str(tmp / "c.yaml"), *map(str, args)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("peaks_devices")
    (tmp / "c.yaml").write_text(CONFIG)
    process(tmp, "--synthetic", 4, "-o", tmp / "gen", "--device", "ref")
    return tmp


def peak_lines(path):
    return [line for line in path.read_text().splitlines() if not line.startswith("#")]


@pytest.mark.parametrize("alg,model,integ,batch", [
    ("pyfai", "azimuthal", "poisson", 1),
    ("pyfai", "hybrid", "azimuthal", 2),
    ("pyfai", "poisson", "none", 1),
    ("peakfinder8", "azimuthal", "poisson", 2),
    ("peakfinder8", "poisson", "azimuthal", 1),
])
def test_opencl_equals_reference(frames, alg, model, integ, batch):
    tag = f"{alg}_{model}_{integ}_{batch}"
    sets = ["--set", f"peaks.algorithm={alg}", "--set", f"peaks.error_model={model}",
            "--set", f"integration.error_model={integ}", "--set", f"pipeline.batch={batch}"]
    src = frames / "gen" / "synthetic.npy"
    process(frames, *sets, "-o", frames / f"ref_{tag}", "--device", "ref", src)
    process(frames, *sets, "-o", frames / f"cl_{tag}", "--device", "cpu", src)
    files = sorted((frames / f"ref_{tag}").glob("*.peaks"))
    assert len(files) == 4
    for f in files:
        other = frames / f"cl_{tag}" / f.name
        assert other.read_text() == f.read_text(), f.name
        assert len(peak_lines(f)) > 0, f.name
