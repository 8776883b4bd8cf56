"""faid's geometry against pyFAI: per-pixel arrays (through `faidctl geometry`), .poni reading,
detector presets and their gap masks, and the positions pyFAI's integrators actually bin on.

Tolerance: |faid - pyFAI| <= 1e-6 * max(|pyFAI|, floor), with floor = 1e-3 * max|pyFAI| of the
array for radial values, solid angle and polarization (values near 0, e.g. 2theta at the PONI),
and floor = 1e-3 rad for chi (chi near 0). Arrays pyFAI stores in float32 (corner positions)
are compared with an extra absolute allowance of one float32 ulp of the array's largest value.
"""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import pyFAI
import pyFAI.detectors
from pyFAI.integrator.azimuthal import AzimuthalIntegrator
from pyFAI.io.ponifile import PoniFile

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAID_BIN = pathlib.Path(os.environ.get("FAID_BIN", ROOT / "build" / "bin"))
FAIDCTL = str(FAID_BIN / "faidctl")

UNITS = ["2th_deg", "2th_rad", "q_nm^-1", "q_A^-1", "r_mm", "r_m"]
REL = 1e-6

# name: (dist, poni1, poni2, rot1, rot2, rot3, orientation, shape, (pixel1, pixel2), wavelength)
GEOMETRIES = {
    "tilted": (0.1, 0.0071, 0.0123, 0.12, -0.08, 0.9, 3, (200, 300), (75e-6, 100e-6), 1.0332e-10),
    "large_tilts": (0.05, 0.004, -0.003, 0.6, 0.5, -2.5, 3, (200, 300), (172e-6, 150e-6), 0.7e-10),
    "poni_off_detector": (0.3, -0.02, 0.05, -0.05, 0.03, 0.2, 3, (200, 300), (75e-6, 75e-6), 1.5e-10),
    "centered_no_tilt": (0.12, 0.0075, 0.0150, 0.0, 0.0, 0.0, 3, (200, 300), (75e-6, 100e-6), 1e-10),
    "orientation1": (0.1, 0.0071, 0.0123, 0.12, -0.08, 0.9, 1, (200, 300), (75e-6, 100e-6), 1e-10),
    "orientation2": (0.1, 0.0071, 0.0123, -0.2, 0.1, 1.7, 2, (200, 300), (75e-6, 100e-6), 1e-10),
    "orientation4": (0.1, 0.0071, 0.0123, 0.3, 0.2, -0.4, 4, (200, 300), (75e-6, 100e-6), 1e-10),
    "orientation0": (0.1, 0.0071, 0.0123, 0.12, -0.08, 0.9, 0, (150, 120), (75e-6, 100e-6), 1e-10),
}


def close(a, b, floor, extra_abs=0.0):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    err = np.abs(a - b)
    lim = REL * np.maximum(np.abs(b), floor) + extra_abs
    bad = err > lim
    assert not bad.any(), (
        f"{bad.sum()} of {bad.size} differ; worst at {np.unravel_index(np.argmax(err - lim), a.shape)}:"
        f" faid {a.flat[np.argmax(err - lim)]!r} pyFAI {b.flat[np.argmax(err - lim)]!r}")


def radial_floor(b):
    return 1e-3 * float(np.max(np.abs(b)))


CHI_FLOOR = 1e-3


def faidctl(*args, check=True):
    res = subprocess.run([FAIDCTL, "geometry", *map(str, args)], capture_output=True, text=True)
    if check:
        assert res.returncode == 0, f"faidctl geometry {' '.join(map(str, args))}: {res.stderr}"
    return res


def faid_array(poni, name, tmp_path, *extra):
    out = tmp_path / f"{name.replace('^', '').replace('/', '_')}.npy"
    faidctl("--poni", poni, "--array", name, "-o", out, *extra)
    return np.load(out)


def make_ai(key):
    dist, p1, p2, r1, r2, r3, orient, shape, pix, wl = GEOMETRIES[key]
    det = pyFAI.detectors.Detector(pixel1=pix[0], pixel2=pix[1], max_shape=shape,
                                   orientation=orient)
    return AzimuthalIntegrator(dist=dist, poni1=p1, poni2=p2, rot1=r1, rot2=r2, rot3=r3,
                               detector=det, wavelength=wl)


@pytest.fixture(scope="module", params=sorted(GEOMETRIES))
def geom(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    ai = make_ai(request.param)
    poni = tmp / "geometry.poni"
    ai.save(str(poni))
    return ai, poni, tmp


def test_faidctl_exists():
    assert os.access(FAIDCTL, os.X_OK), f"{FAIDCTL} missing (set FAID_BIN)"


def test_chi_convention_default():
    # faid hard-wires pyFAI's default; notice if pyFAI ever changes it.
    assert AzimuthalIntegrator().chiDiscAtPi is True


def test_centers_scaled_and_internal(geom):
    ai, poni, tmp = geom
    shape = ai.detector.shape
    for unit in UNITS:
        ref = ai.center_array(shape, unit=unit, scale=True)
        close(faid_array(poni, "center", tmp, "--unit", unit), ref, radial_floor(ref))
        ref = ai.center_array(shape, unit=unit, scale=False)
        close(faid_array(poni, "center", tmp, "--unit", unit, "--internal"), ref,
              radial_floor(ref))
    # The unit name as array name is the scaled centre array.
    ref = ai.center_array(shape, unit="q_A^-1", scale=True)
    close(faid_array(poni, "q_A^-1", tmp), ref, radial_floor(ref))


def test_legacy_arrays(geom):
    """pyFAI's deprecated twoThetaArray/qArray/rArray/chiArray evaluate the geometry on float32
    pixel positions, so they differ from the exact values by what a position error of a few
    float32 ulp of the detector extent (E metres) makes: E/dist in 2theta, the matching q, E in
    r, E/r in chi. That allowance is added to the usual tolerance."""
    ai0, poni, tmp = geom
    ai = AzimuthalIntegrator(dist=ai0.dist, poni1=ai0.poni1, poni2=ai0.poni2, rot1=ai0.rot1,
                             rot2=ai0.rot2, rot3=ai0.rot3, wavelength=ai0.wavelength,
                             detector=ai0.detector)  # fresh caches
    shape = ai.detector.shape
    extent = max(shape[0] * ai.detector.pixel1, shape[1] * ai.detector.pixel2)
    E = 4 * float(np.finfo(np.float32).eps) * extent
    r = faid_array(poni, "center", tmp, "--unit", "r_m")
    tth = faid_array(poni, "center", tmp, "--unit", "2th_rad")
    q = faid_array(poni, "center", tmp, "--unit", "q_nm^-1")
    chi = faid_array(poni, "chi", tmp)
    with _nowarn():
        ref_tth, ref_q, ref_r, ref_chi = (ai.twoThetaArray(shape), ai.qArray(shape),
                                          ai.rArray(shape), ai.chiArray(shape))
    allow_tth = 2 * E / ai.dist
    close(tth, ref_tth, radial_floor(ref_tth), allow_tth)
    close(q, ref_q, radial_floor(ref_q), 2e-9 * np.pi / ai.wavelength * allow_tth)
    close(r, ref_r, radial_floor(ref_r), 2 * E)
    close(chi, ref_chi, CHI_FLOOR, 2 * E / np.maximum(r, 1e-9))


def _nowarn():
    import contextlib
    import warnings
    cm = contextlib.ExitStack()
    cm.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return cm


def test_chi(geom):
    ai, poni, tmp = geom
    ref = ai.center_array(ai.detector.shape, unit="chi_rad", scale=False)
    chi = faid_array(poni, "chi", tmp)
    close(chi, ref, CHI_FLOOR)
    assert chi.min() >= -np.pi and chi.max() <= np.pi


def test_solid_angle_and_polarization(geom):
    ai, poni, tmp = geom
    shape = ai.detector.shape
    ref = ai.solidAngleArray(shape)  # order 3, relative: pyFAI's default
    close(faid_array(poni, "solid_angle", tmp), ref, radial_floor(ref))
    for factor, offset in ((0.99, 0.0), (0.5, 0.3), (-0.7, -1.1), (0.0, 0.0)):
        ref = ai.polarization(shape, factor=factor, axis_offset=offset)
        got = faid_array(poni, "polarization", tmp, "--polarization", factor,
                         "--axis-offset", offset)
        close(got, ref, radial_floor(ref))


def test_corner_array_and_deltas(geom):
    ai, poni, tmp = geom
    shape = ai.detector.shape
    for unit in UNITS:
        ref = ai.corner_array(shape, unit=unit, scale=False)
        got = faid_array(poni, "corner_array", tmp, "--unit", unit)
        assert got.dtype == np.float32 and ref.dtype == np.float32
        ulp_rad = float(np.spacing(np.max(np.abs(ref[..., 0]))))
        close(got[..., 0], ref[..., 0], radial_floor(ref[..., 0]), ulp_rad)
        close(got[..., 1], ref[..., 1], CHI_FLOOR, float(np.spacing(np.float32(np.pi))))
        ref = ai.delta_array(shape, unit=unit, scale=False)
        close(faid_array(poni, "delta", tmp, "--unit", unit), ref, radial_floor(ref), ulp_rad)
    ref = ai.deltaChi(shape)
    close(faid_array(poni, "chi_delta", tmp), ref, radial_floor(ref),
          float(np.spacing(np.float32(np.pi))))


def test_corner_grid(geom):
    ai, poni, tmp = geom
    shape = ai.detector.shape
    grid = faid_array(poni, "corner", tmp, "--unit", "2th_deg")
    chi = faid_array(poni, "chi_corner", tmp)
    assert grid.shape == (shape[0] + 1, shape[1] + 1)
    ref = ai.corner_array(shape, unit="2th_deg", scale=True)
    # Corner k of pixel (i, j): 0 = (i, j), 1 = (i+1, j), 2 = (i+1, j+1), 3 = (i, j+1).
    views = [grid[:-1, :-1], grid[1:, :-1], grid[1:, 1:], grid[:-1, 1:]]
    cviews = [chi[:-1, :-1], chi[1:, :-1], chi[1:, 1:], chi[:-1, 1:]]
    for k in range(4):
        close(views[k], ref[..., k, 0], radial_floor(ref[..., 0]),
              float(np.spacing(np.max(ref[..., 0]))))
        close(cviews[k], ref[..., k, 1], CHI_FLOOR, float(np.spacing(np.float32(np.pi))))


@pytest.mark.parametrize("unit", ["2th_deg", "q_A^-1", "r_mm"])
def test_positions_pyfai_bins_on(tmp_path, unit):
    """The arrays held by the engines integrate1d/integrate2d build are faid's internal ones."""
    ai = make_ai("tilted")
    poni = tmp_path / "g.poni"
    ai.save(str(poni))
    shape = ai.detector.shape
    img = np.ones(shape, np.float32)
    ai.integrate1d(img, 50, unit=unit, method=("full", "csr", "cython"))
    ai.integrate1d(img, 50, unit=unit, method=("bbox", "csr", "cython"))
    ai.integrate2d(img, 50, 36, unit=unit, method=("full", "csr", "cython"))
    corners = faid_array(poni, "corner_array", tmp_path, "--unit", unit).astype(np.float64)
    centers = faid_array(poni, "center", tmp_path, "--unit", unit, "--internal")
    delta = faid_array(poni, "delta", tmp_path, "--unit", unit)
    seen = set()
    for method, engine in ai.engines.items():
        eng = engine.engine
        if method.split_lower == "full":
            pos = np.asarray(eng.pos).reshape(corners.shape)
            close(corners[..., 0], pos[..., 0], radial_floor(pos[..., 0]),
                  float(np.spacing(np.float32(np.max(pos[..., 0])))))
            seen.add(("full", method.dimension))
        elif method.split_lower == "bbox":
            close(centers.ravel(), np.asarray(eng.cpos0), radial_floor(eng.cpos0))
            close(delta.ravel(), np.asarray(eng.dpos0), radial_floor(eng.dpos0),
                  float(np.spacing(np.float32(np.max(eng.cpos0)))))
            seen.add(("bbox", method.dimension))
    assert seen == {("full", 1), ("bbox", 1), ("full", 2)}


def test_full_eiger4m_q(tmp_path):
    det = pyFAI.detectors.detector_factory("Eiger4M")
    ai = AzimuthalIntegrator(dist=0.15, poni1=0.081, poni2=0.077, rot1=0.02, rot2=-0.015,
                             rot3=0.3, detector=det, wavelength=0.9e-10)
    poni = tmp_path / "eiger4m.poni"
    ai.save(str(poni))
    ref = ai.center_array(det.shape, unit="q_nm^-1", scale=True)
    got = faid_array(poni, "center", tmp_path, "--unit", "q_nm^-1")
    assert got.shape == tuple(det.max_shape)
    close(got, ref, radial_floor(ref))


# --- .poni files -------------------------------------------------------------------------------

def summary(poni, *extra):
    out = faidctl("--poni", poni, *extra).stdout
    vals = {}
    for line in out.splitlines():
        key, _, rest = line.partition(" ")
        vals[key] = rest.split()
    return vals


def check_summary(vals, pf, shape, pixels, orientation):
    assert float(vals["dist"][0]) == pytest.approx(pf.dist, rel=1e-15)
    assert [float(x) for x in vals["poni1/2"][:2]] == pytest.approx([pf.poni1, pf.poni2],
                                                                    rel=1e-15)
    rots = [pf.rot1 or 0.0, pf.rot2 or 0.0, pf.rot3 or 0.0]
    assert [float(x) for x in vals["rot1/2/3"][:3]] == pytest.approx(rots, rel=1e-15, abs=0)
    assert float(vals["wavelength"][0]) == pytest.approx(pf.wavelength or 0.0, rel=1e-15)
    assert [int(vals["shape"][0]), int(vals["shape"][2])] == list(shape)
    assert [float(x) for x in vals["pixel1/2"][:2]] == pytest.approx(list(pixels), rel=1e-15)
    assert int(vals["orientation"][0]) == orientation


@pytest.mark.parametrize("key", sorted(GEOMETRIES))
def test_read_pyfai_v21(tmp_path, key):
    ai = make_ai(key)
    poni = tmp_path / "g.poni"
    ai.save(str(poni))
    assert "poni_version: 2.1" in poni.read_text()
    pf = PoniFile(str(poni))
    det = pf.detector
    check_summary(summary(poni), pf, det.shape, (det.pixel1, det.pixel2),
                  int(det.orientation))


@pytest.mark.parametrize("name", ["Eiger4M", "Pilatus1M", "Eiger2_9M", "Jungfrau4M"])
def test_read_pyfai_preset_v21(tmp_path, name):
    det = pyFAI.detectors.detector_factory(name, {"orientation": 2})
    ai = AzimuthalIntegrator(dist=0.2, poni1=0.05, poni2=0.06, rot1=0.01, rot2=0.02, rot3=0.03,
                             detector=det, wavelength=1.2e-10)
    poni = tmp_path / "p.poni"
    ai.save(str(poni))
    pf = PoniFile(str(poni))
    vals = summary(poni)
    assert vals["detector"][0] == name
    check_summary(vals, pf, det.max_shape, (det.pixel1, det.pixel2), 2)
    # The geometry read back drives the arrays: orientation 2 flips rows.
    ref = ai.center_array(det.shape, unit="2th_deg")
    got = faid_array(poni, "center", tmp_path, "--unit", "2th_deg")
    close(got, ref, radial_floor(ref))


def test_read_version2_and_3(tmp_path):
    ai = make_ai("tilted")
    pf = PoniFile(ai)
    pf.API_VERSION = 2  # pyFAI writes version 2 without orientation
    v2 = tmp_path / "v2.poni"
    with open(v2, "w") as fd:
        pf.write(fd)
    text = v2.read_text()
    assert "poni_version: 2\n" in text and "orientation" not in text
    ref = PoniFile(str(v2))
    check_summary(summary(v2), ref, ai.detector.shape, (75e-6, 100e-6), 3)

    v3 = tmp_path / "v3.poni"
    v3.write_text(text.replace("poni_version: 2\n", "poni_version: 3\n") + "Parallax: False\n")
    check_summary(summary(v3), PoniFile(str(v3)), ai.detector.shape, (75e-6, 100e-6), 3)


V1_TEXT = """# Nota: C-Order, 1 refers to the Y axis, 2 to the X axis
# Calibration done at Mon Jan  1 00:00:00 2024
PixelSize1: 7.5e-05
PixelSize2: 0.0001

distance: 0.2
Poni1: 0.011
PONI2: 0.0123
Rot1: 0.01
# Rot2: 99
Rot2: -0.02
Rot3: 0.5
SplineFile: None
Wavelength: 1.54e-10
Distance: 0.1234
"""


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_read_handwritten_v1(tmp_path, eol):
    poni = tmp_path / "v1.poni"
    poni.write_bytes(V1_TEXT.replace("\n", eol).encode())
    pf = PoniFile(str(poni))  # later lines win: Distance 0.1234
    assert pf.dist == 0.1234
    vals = summary(poni, "--shape", "200,300")
    check_summary(vals, pf, (200, 300), (pf.detector.pixel1, pf.detector.pixel2), 3)
    det = pyFAI.detectors.Detector(pixel1=pf.detector.pixel1, pixel2=pf.detector.pixel2,
                                   max_shape=(200, 300))
    ai = AzimuthalIntegrator(dist=pf.dist, poni1=pf.poni1, poni2=pf.poni2, rot1=pf.rot1,
                             rot2=pf.rot2, rot3=pf.rot3, wavelength=pf.wavelength, detector=det)
    ref = ai.center_array(det.shape, unit="q_A^-1")
    got = faid_array(poni, "center", tmp_path, "--unit", "q_A^-1", "--shape", "200,300")
    close(got, ref, radial_floor(ref))


def test_read_v1_named_detector(tmp_path):
    poni = tmp_path / "v1det.poni"
    poni.write_text("Detector: Eiger 4M\nDistance: 0.1\nPoni1: 0.08\nPoni2: 0.07\n"
                    "Rot1: 0\nRot2: 0\nRot3: 0\nWavelength: 1e-10\n")
    pf = PoniFile(str(poni))
    det = pf.detector
    vals = summary(poni)
    assert vals["detector"][0] == type(det).__name__
    check_summary(vals, pf, det.max_shape, (det.pixel1, det.pixel2), int(det.orientation))


BAD_FILES = [
    ("Distance: 0.1\nPoni1: 0.01\nPoni2: abc\n", 3, "Poni2"),
    ("Distance: 0.1\nPoni1: 0.01\nPoni2: 0.02\nRot7: 1\n", 4, "Rot7"),
    ("# c\nDistance: 0.1\nPoni1: 0.01\nPoni2 0.02\n", 4, "key: value"),
    ("poni_version: 2.1\nDetector: Detector\nDetector_config: {\"pixel1\": 7.5e-05, \n"
     "Distance: 0.1\nPoni1: 0.01\nPoni2: 0.02\n", 3, "Detector_config"),
    ("poni_version: 2.1\nDetector: Detector\nDetector_config: {\"orientation\": 7}\n"
     "Distance: 0.1\nPoni1: 0.01\nPoni2: 0.02\n", 3, "orientation"),
    ("poni_version: 9\nDetector: Detector\nDistance: 0.1\nPoni1: 0.01\nPoni2: 0.02\n", 1,
     "poni_version"),
    ("Distance: -0.1\nPoni1: 0.01\nPoni2: 0.02\n", 1, "Distance"),
    ("Distance: 0.1\nPoni1: 0.01\nPoni2: 0.02\nSplineFile: /data/frelon.spline\n", 4,
     "SplineFile"),
    ("Distance: 0.1\nPoni1: 0.01\nPoni2: 0.02\nWavelength: nan\n", 4, "Wavelength"),
]


@pytest.mark.parametrize("text,line,word", BAD_FILES)
def test_bad_poni_names_file_and_line(tmp_path, text, line, word):
    poni = tmp_path / "bad.poni"
    poni.write_text(text)
    res = faidctl("--poni", poni, "--shape", "10,10", "--pixel", "1e-4,1e-4", check=False)
    assert res.returncode == 1
    assert f"{poni}:{line}:" in res.stderr, res.stderr
    assert word in res.stderr


def test_missing_required_key(tmp_path):
    poni = tmp_path / "short.poni"
    poni.write_text("Distance: 0.1\nPoni1: 0.01\n")
    res = faidctl("--poni", poni, "--shape", "10,10", "--pixel", "1e-4,1e-4", check=False)
    assert res.returncode == 1 and str(poni) in res.stderr and "Poni2" in res.stderr


# --- presets -----------------------------------------------------------------------------------

PRESETS = ["Eiger1M", "Eiger4M", "Eiger9M", "Eiger16M", "Eiger2_1M", "Eiger2_4M", "Eiger2_9M",
           "Eiger2_16M", "Pilatus1M", "Pilatus2M", "Pilatus6M", "Jungfrau4M"]


@pytest.fixture(scope="module")
def any_poni(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("any")
    poni = tmp / "any.poni"
    poni.write_text("Distance: 0.1\nPoni1: 0.01\nPoni2: 0.02\nWavelength: 1e-10\n")
    return poni


@pytest.mark.parametrize("name", PRESETS)
def test_preset_gap_mask_equals_pyfai(tmp_path, any_poni, name):
    det = pyFAI.detectors.detector_factory(name)
    ref = det.mask
    assert ref is not None and ref.shape == tuple(det.max_shape)
    got = faid_array(any_poni, "gap_mask", tmp_path, "--detector", name)
    assert got.shape == ref.shape
    assert np.array_equal(got.astype(bool), ref.astype(bool))


@pytest.mark.parametrize("name", PRESETS)
def test_preset_lookup_spellings(any_poni, name):
    det = pyFAI.detectors.detector_factory(name)
    alias = det.aliases[0]
    spellings = {name, name.upper(), alias, alias.lower().replace(" ", "_"),
                 alias.lower().replace(" ", "")}
    for sp in spellings:
        assert pyFAI.detectors.detector_factory(sp).__class__ is det.__class__
        vals = summary(any_poni, "--detector", sp)
        assert vals["detector"][0] == name, sp
        assert [int(vals["shape"][0]), int(vals["shape"][2])] == list(det.max_shape)
        assert [float(x) for x in vals["pixel1/2"][:2]] == [det.pixel1, det.pixel2]


def test_unknown_preset_is_rejected(any_poni):
    res = faidctl("--poni", any_poni, "--detector", "Eiger7M", check=False)
    assert res.returncode == 2 and "Eiger7M" in res.stderr
