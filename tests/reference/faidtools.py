"""What the Python tests that run faid's command-line tools (faidctl, faid-bench) share: where the
built tools are (FAID_BIN, default build/bin), the environment they run in (PoCL held to two
threads unless the caller says otherwise: the test machines have few cores) and the small
detector configuration of the peak and benchmark checks (256 x 320 pixels of 100 um, a slightly
tilted PONI, 200 radial bins)."""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAID_BIN = pathlib.Path(os.environ.get("FAID_BIN", ROOT / "build" / "bin"))

SMALL_DETECTOR = """
detector:
  preset: null
  shape: [256, 320]
  pixel_size: [1.0e-4, 1.0e-4]
geometry:
  dist: 0.1
  poni1: 0.0131
  poni2: 0.0157
  rot1: 0.02
integration:
  npt: 200
"""


def tool_env():
    """The environment for a faid tool: this process's, POCL_MAX_PTHREAD_COUNT 2 by default."""
    env = dict(os.environ)
    env.setdefault("POCL_MAX_PTHREAD_COUNT", "2")
    return env
