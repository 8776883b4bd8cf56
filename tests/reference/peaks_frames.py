"""Synthetic frames with Bragg spots for the peak-finding reference tests (test_sigclip_ref.py,
test_pf8_om.py): a tilted geometry, a smooth background with a diffuse ring (falling with q),
Gaussian spots of known position over a wide intensity range, Poisson noise, a module gap and
scattered bad pixels. Also the helpers that run peaks_driver."""

import os
import subprocess

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BIN = os.environ.get("FAID_BIN", os.path.join(SRC, "build", "bin"))

SHAPE = (384, 448)
GEOM = dict(dist=0.08, poni1=0.0201, poni2=0.0223, rot1=0.01, rot2=-0.02, rot3=0.0,
            wavelength=1e-10, pixel1=100e-6, pixel2=100e-6)


def make_ai():
    from pyFAI.detectors import Detector
    from pyFAI.integrator.azimuthal import AzimuthalIntegrator
    det = Detector(GEOM["pixel1"], GEOM["pixel2"], max_shape=SHAPE)
    g = {k: v for k, v in GEOM.items() if not k.startswith("pixel")}
    return AzimuthalIntegrator(detector=det, **g)


def make_frame(seed, nspots=40, ai=None):
    """Returns (frame float32, mask uint8, spots (x, y, amplitude))."""
    rng = np.random.default_rng(seed)
    ai = ai or make_ai()
    q = ai.qArray(SHAPE)
    img = 30 * np.exp(-q / 20) + 40 * np.exp(-((q - 15) / 0.6) ** 2) + 5
    yy, xx = np.mgrid[0:SHAPE[0], 0:SHAPE[1]]
    spots = []
    for _ in range(nspots):
        y = rng.uniform(6, SHAPE[0] - 6)
        x = rng.uniform(6, SHAPE[1] - 6)
        a = rng.uniform(50, 2000)
        s = rng.uniform(0.6, 1.3)
        img = img + a * np.exp(-((yy - y) ** 2 + (xx - x) ** 2) / (2 * s * s))
        spots.append((x, y, a))
    frame = rng.poisson(img).astype(np.float32)
    mask = np.zeros(SHAPE, np.uint8)
    mask[:, 200:203] = 1
    mask[rng.random(SHAPE) < 0.003] = 1
    return frame, mask, np.array(spots)


def driver_path():
    exe = os.path.join(BIN, "peaks_driver")
    assert os.access(exe, os.X_OK), f"{exe} not built"
    return exe


def run_driver(work, name, kv):
    """Writes kv as the driver's parameter file, runs it and returns its .npy outputs."""
    out = os.path.join(work, name)
    os.makedirs(out, exist_ok=True)
    base = dict(rows=SHAPE[0], cols=SHAPE[1], **GEOM)
    base.update(kv)
    with open(os.path.join(out, "params.txt"), "w") as f:
        for k, v in base.items():
            if v is not None:
                f.write(f"{k} {v}\n")
    r = subprocess.run([driver_path(), os.path.join(out, "params.txt"), out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}


def save(work, name, arr):
    p = os.path.join(work, name + ".npy")
    np.save(p, np.ascontiguousarray(arr))
    return p
