"""faid's peakfinder8 (faid_pf8.c) against OM's peakfinder8 (PyPI `ondamonitor`) on the same
frames, radius map, mask, panel layout and parameters.

Required by issue 6: >= 98 % of the peaks of each side within 0.5 pixel of a peak of the other.
The test also records how close the two really are: on these frames the lists are identical in
order, position, intensity, pixel count, sigma and SNR (faid differs from OM only in quirks that
these frames do not trigger, docs/peaks.md).

ondamonitor 23.8.3's Python wrapper does not import with NumPy 2 (it names numpy.float_) and maps
its outputs off by one (its `snr` is the local sigma), so the test loads OM's compiled extension
directly and reads the outputs by position (fs, ss, intensity, com index, npix, max, sigma, snr)."""

import glob
import importlib.util
import os
import shutil
import tempfile

import numpy as np
import pytest

pytest.importorskip("pyFAI")

from peaks_frames import SHAPE, make_ai, make_frame, run_driver, save  # noqa: E402


def om_peakfinder8():
    import sysconfig
    site = sysconfig.get_paths()["platlib"]
    found = glob.glob(os.path.join(site, "om", "algorithms", "_crystallography*.so"))
    if not found:
        pytest.skip("ondamonitor is not installed (pip install ondamonitor)")
    spec = importlib.util.spec_from_file_location("om.algorithms._crystallography", found[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.peakfinder_8


@pytest.fixture(scope="module")
def work():
    d = tempfile.mkdtemp(prefix="faid_pf8_")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run_om(pf8, frame, mask, r, prm, panels):
    omask = (1 - mask).astype(np.int8)
    omask[r < prm["min_res"]] = 0
    omask[r > prm["max_res"]] = 0
    ny, nx = SHAPE[0] // panels[0], SHAPE[1] // panels[1]
    empty = np.zeros(1, np.int32)
    pk = pf8(prm["max_num_peaks"], frame.astype(np.float32), omask, r, 0, empty, empty, 0,
             nx, ny, panels[1], panels[0], prm["adc_threshold"], prm["minimum_snr"],
             prm["min_pixel_count"], prm["max_pixel_count"], prm["local_bg_radius"])
    return {"x": np.array(pk[0]), "y": np.array(pk[1]), "intensity": np.array(pk[2]),
            "npix": np.array(pk[4], dtype=int), "max_pixel": np.array(pk[5]),
            "sigma": np.array(pk[6]), "snr": np.array(pk[7])}


def matched(ax, ay, bx, by, tol=0.5):
    """Fraction of the a peaks with a b peak within tol pixels."""
    if len(ax) == 0:
        return 1.0
    if len(bx) == 0:
        return 0.0
    d = np.hypot(ax[:, None] - bx[None, :], ay[:, None] - by[None, :])
    return float((d.min(axis=1) <= tol).mean())


BASE = dict(adc_threshold=20.0, minimum_snr=5.0, min_pixel_count=2, max_pixel_count=200,
            local_bg_radius=3, min_res=0, max_res=1200, max_num_peaks=2048)
CASES = [
    # (seed, spots, parameter overrides, panels (rows, cols))
    (1, 40, {}, (1, 1)),
    (2, 60, {}, (2, 1)),
    (3, 120, {"local_bg_radius": 4, "min_pixel_count": 1, "max_pixel_count": 30}, (2, 2)),
    (4, 80, {"min_res": 40, "max_res": 250, "adc_threshold": 50.0}, (1, 2)),
    (5, 150, {"max_num_peaks": 25}, (2, 1)),
    (6, 0, {}, (1, 1)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_peakfinder8_matches_om(work, case):
    pf8 = om_peakfinder8()
    seed, nspots, over, panels = CASES[case]
    prm = dict(BASE, **over)
    ai = make_ai()
    frame, mask, _ = make_frame(seed, nspots=nspots, ai=ai)
    r = (ai.rArray(SHAPE) / 100e-6).astype(np.float32)
    om = run_om(pf8, frame, mask, r, prm, panels)
    kv = dict(prm, frame=save(work, f"f{case}", frame), mask=save(work, f"m{case}", mask),
              radius_px=save(work, "r", r), algorithm="peakfinder8",
              panel_rows=SHAPE[0] // panels[0], panel_cols=SHAPE[1] // panels[1])
    fa = run_driver(work, f"pf8_{case}", kv)
    fx, fy = fa["peak_x"], fa["peak_y"]
    a = matched(om["x"], om["y"], fx, fy)
    b = matched(fx, fy, om["x"], om["y"])
    print(f"case {case}: OM {len(om['x'])} peaks, faid {len(fx)} (found {fa['peak_n_found'][0]});"
          f" OM->faid {a:.3f}, faid->OM {b:.3f}")
    assert a >= 0.98 and b >= 0.98
    if nspots == 0:
        assert len(fx) == 0 and len(om["x"]) == 0
    else:
        assert len(fx) > 0
    assert len(fx) <= prm["max_num_peaks"]
    # Same order (seed order) and same numbers on these frames.
    if len(fx) == len(om["x"]):
        np.testing.assert_allclose(fx, om["x"], atol=1e-3)
        np.testing.assert_allclose(fy, om["y"], atol=1e-3)
        np.testing.assert_allclose(fa["peak_intensity"], om["intensity"], rtol=1e-4, atol=1e-2)
        np.testing.assert_array_equal(fa["peak_npix"], om["npix"])
        np.testing.assert_allclose(fa["peak_snr"], om["snr"], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(fa["peak_max_pixel"], om["max_pixel"], rtol=1e-4, atol=1e-2)
