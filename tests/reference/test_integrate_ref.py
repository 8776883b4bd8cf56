"""faid's CSR builder and reference integration (faid_csr.c, faid_reduce_ref.c) against pyFAI.

A small C driver (csr_driver.c, compiled here against libfaidcore.a) builds the matrix and reduces
one frame; pyFAI's integrate1d / integrate2d with method (split, "csr", "cython") give the
reference, computed at test time. Two ways of feeding positions:
  - "positions": pyFAI's own centre/corner/chi arrays are handed to faid_csr_build_from_positions,
    which isolates the CSR and reduction code from the geometry (matrices must then be identical);
  - "geometry": faid computes everything from the PONI parameters (faid_geometry).
A last test runs `faidctl process --device ref` when that command exists.
"""

import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

pyFAI = pytest.importorskip("pyFAI")
from pyFAI import units  # noqa: E402
from pyFAI.detectors import Detector  # noqa: E402
from pyFAI.integrator.azimuthal import AzimuthalIntegrator  # noqa: E402
from pyFAI.method_registry import IntegrationMethod  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("FAID_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BIN = os.environ.get("FAID_BIN", os.path.join(SRC, "build", "bin"))
LIBS = ["-lOpenCL", "-llz4", "-lyaml", "-lmsgpackc", "-lzmq", "-ljansson", "-lm", "-lpthread"]
STANDALONE = ["core/faid_csr.c", "core/faid_reduce_ref.c", "core/faid_geometry.c", "base/faid_npy.c",
              "base/faid_dtype.c", "base/faid_err.c", "base/faid_log.c"]
TOL = 1e-4


@pytest.fixture(scope="module")
def work():
    d = tempfile.mkdtemp(prefix="faid_csr_")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def driver(work):
    """Compiles csr_driver.c against the build's libfaidcore.a and the layers below it (or, when
    the library of this build cannot be found, against the few sources it needs)."""
    built = os.path.join(BIN, "csr_driver")
    if os.access(built, os.X_OK):
        return built
    exe = os.path.join(work, "csr_driver")
    build = os.path.dirname(os.path.abspath(BIN))
    lib = os.path.join(build, "libfaidcore.a")
    libs = [os.path.join(build, "libfaid%s.a" % layer) for layer in ("core", "proto", "base")]
    inc = ["-I", os.path.join(SRC, "core"), "-I", os.path.join(SRC, "base")]
    base = ["cc", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-D_DEFAULT_SOURCE"] + inc
    if os.path.exists(lib):
        cmd = base + [os.path.join(HERE, "csr_driver.c")] + libs + ["-o", exe] + LIBS
    else:
        srcs = [os.path.join(SRC, s) for s in STANDALONE]
        cmd = base + [os.path.join(HERE, "csr_driver.c")] + srcs + ["-o", exe, "-lm", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def corner_grid(c4):
    """pyFAI's per-pixel (H, W, 4) corners -> faid's shared (H+1, W+1) grid."""
    h, w = c4.shape[:2]
    g = np.empty((h + 1, w + 1))
    g[:h, :w] = c4[:, :, 0]
    g[h, :w] = c4[h - 1, :, 1]
    g[:h, w] = c4[:, w - 1, 3]
    g[h, w] = c4[h - 1, w - 1, 2]
    return g


GEOMS = [
    # (shape, pixel1, pixel2, dist, poni1, poni2, rot1, rot2, rot3, wavelength): beam on the
    # detector (chi discontinuity crosses it), tilted, and off-detector.
    ((300, 400), 100e-6, 100e-6, 0.1, 0.012, 0.020, 0.05, -0.03, 0.1, 1.0e-10),
    ((256, 320), 172e-6, 172e-6, 0.25, 0.030, 0.010, -0.2, 0.1, -0.4, 0.7e-10),
    ((320, 300), 150e-6, 120e-6, 0.08, -0.005, 0.045, 0.3, 0.2, 0.0, 1.5e-10),
]


def make_ai(gi):
    shape, p1, p2, dist, poni1, poni2, r1, r2, r3, wl = GEOMS[gi]
    det = Detector(p1, p2, max_shape=shape)
    return AzimuthalIntegrator(dist=dist, poni1=poni1, poni2=poni2, rot1=r1, rot2=r2, rot3=r3,
                               wavelength=wl, detector=det)


def make_data(gi, seed):
    shape = GEOMS[gi][0]
    rng = np.random.default_rng(seed)
    ai = make_ai(gi)
    tth = ai.twoThetaArray(shape)
    signal = 200 + 800 * np.exp(-((tth - 0.12) / 0.01) ** 2) + 300 * np.cos(ai.chiArray(shape)) ** 2
    frame = rng.poisson(signal).astype(np.int32)
    dark = rng.normal(5, 2, shape).astype(np.float32)
    flat = rng.uniform(0.8, 1.2, shape).astype(np.float32)
    mask = np.zeros(shape, np.uint8)
    mask[rng.random(shape) < 0.01] = 1
    mask[40:60, 30:90] = 1       # a block
    mask[:, 150:153] = 1         # a module gap
    frame[rng.random(shape) < 0.005] = -1   # dummy pixels
    return frame, dark, flat, mask


def write_params(path, kv):
    with open(path, "w") as f:
        for k, v in kv.items():
            if v is not None:
                f.write(f"{k} {v}\n")


def run_faid(driver, work, name, kv):
    out = os.path.join(work, name)
    os.makedirs(out, exist_ok=True)
    write_params(os.path.join(out, "params.txt"), kv)
    r = subprocess.run([driver, os.path.join(out, "params.txt"), out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = {}
    for f in os.listdir(out):
        if f.endswith(".npy"):
            res[f[:-4]] = np.load(os.path.join(out, f))
    return res


def save(work, name, arr):
    p = os.path.join(work, name + ".npy")
    np.save(p, np.ascontiguousarray(arr))
    return p


def pyfai_csr(ai, dim, split):
    meth = IntegrationMethod.select_method(dim, split, "csr", "cython")[0]
    data, ind, ptr = ai.engines[meth].engine.lut
    return data, ind, ptr


def worst(a, ref, sel):
    """max |a - ref| / max(|ref|, mean|ref|) over the selected bins."""
    if not sel.any():
        return 0.0
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    nan_a, nan_r = np.isnan(a) & sel, np.isnan(ref) & sel
    if (nan_a != nan_r).any():
        print("NaN mismatch: faid", int(nan_a.sum()), "pyFAI", int(nan_r.sum()))
        return float("nan")
    sel = sel & ~nan_r
    scale = np.maximum(np.abs(ref[sel]), np.mean(np.abs(ref[sel])))
    return float(np.max(np.abs(a[sel].astype(np.float64) - ref[sel]) / scale))


def first_pixel_bins(ai, res, nb, npix, exact):
    """pyFAI's 2D full-split builder starts with an uninitialised work box: the first pixel it
    processes (the smallest pixel index in its matrix, explicit zeros included) may get arbitrary
    coefficients. Returns the bins that pixel touches in pyFAI's or faid's matrix, to be left out
    of the comparison of results. With exact=True every other coefficient must be identical."""
    import scipy.sparse as sp
    data, ind, ptr = pyfai_csr(ai, 2, "full")
    first = int(ind.min())
    a = sp.csr_matrix((data, ind, ptr), shape=(nb, npix))
    a.eliminate_zeros()
    b = sp.csr_matrix((res["data"], res["indices"], res["indptr"]), shape=(nb, npix))
    if exact:
        cols = np.unique((a != b).tocoo().col)
        assert set(cols.tolist()) <= {first}, cols[:10]
    return (np.asarray(a[:, first].todense()).ravel() != 0) | \
        (np.asarray(b[:, first].todense()).ravel() != 0)


# (geometry, split, unit, dim, error model, radial range, azimuth range, corrections) chosen so
# that every split, unit, error model, dimension and option appears several times.
SPLITS = ["no", "bbox", "full"]
UNITS = ["q_nm^-1", "2th_deg", "q_A^-1", "r_mm", "2th_rad"]
MODELS = [None, "poisson", "azimuthal"]
RANGES = {"q_nm^-1": (5.0, 30.0), "2th_deg": (3.0, 20.0), "q_A^-1": (0.5, 3.0), "r_mm": (5, 40),
          "2th_rad": (0.05, 0.35)}


def cases():
    out = []
    k = 0
    for split in SPLITS:
        for dim in (1, 2):
            for model in MODELS:
                for variant in range(3 if dim == 1 else 2):
                    unit = UNITS[k % len(UNITS)]
                    gi = k % len(GEOMS)
                    rr = RANGES[unit] if variant in (1, 2) and k % 2 == 0 else (
                        RANGES[unit] if variant == 1 else None)
                    ar = [None, (-120.0, 75.0), (30.0, 300.0)][variant] if (k % 3) else None
                    corr = variant  # 0: all corrections, 1: dark+dummy only, 2: none
                    out.append((gi, split, unit, dim, model, rr, ar, corr))
                    k += 1
    return out


CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=["-".join(str(x) for x in c) for c in CASES])
def test_against_pyfai(driver, work, case):
    gi, split, unit, dim, model, rr, ar, corr = case
    ai = make_ai(gi)
    shape = GEOMS[gi][0]
    frame, dark, flat, mask = make_data(gi, gi * 7 + 1)
    name = "c%d_%s_%s_%d_%s_%s_%s_%d" % (gi, split, unit.replace("^", ""), dim, model, rr is not None,
                                         ar is not None, corr)
    w = os.path.join(work, name + "_in")
    os.makedirs(w, exist_ok=True)
    u = units.to_unit(unit)
    npt_rad, npt_azim = (400 if dim == 1 else 120), (0 if dim == 1 else 36)

    kw = dict(unit=unit, method=(split, "csr", "cython"), mask=mask, error_model=model,
              radial_range=rr, azimuth_range=ar, correctSolidAngle=(corr == 0))
    kv = {"positions": 1, "rows": shape[0], "cols": shape[1], "split": split, "unit": unit,
          "npt_rad": npt_rad, "npt_azim": npt_azim, "orientation": 3,
          "error_model": model or "none", "mask": save(w, "mask", mask.ravel())}
    if rr:
        kv["rad_range"] = "%r %r" % rr
    if ar:
        kv["azim_range"] = "%r %r" % ar
    if corr in (0, 1):
        kw.update(dark=dark, dummy=-1.0, delta_dummy=0.5)
        kv.update(dark=save(w, "dark", dark.ravel()), dummy=-1.0, delta_dummy=0.5)
    if corr == 0:
        kw.update(flat=flat, polarization_factor=0.95, normalization_factor=3.5)
        kv.update(flat=save(w, "flat", flat.ravel()), normalization_factor=3.5,
                  solid_angle=save(w, "sa", ai.solidAngleArray(shape).astype(np.float32).ravel()),
                  polarization=save(w, "pol", ai.polarization(shape, 0.95).astype(np.float32).ravel()))
    if dim == 2 and split != "full" and model == "poisson" and "dark" in kw:
        # pyFAI's 2D no/bbox CSR path forms the Poisson variance on the host as
        # max(raw,1) + max(dark,0); faid (like pyFAI's 1D, full-split and OpenCL paths) uses
        # max(raw,1). Compare like with like by giving pyFAI that variance explicitly.
        kw["variance"] = np.maximum(frame, 1.0).astype(np.float32)
        kw["error_model"] = None

    # positions exactly as pyFAI bins them (internal units; corners float32, centres float64)
    cen = ai.array_from_unit(shape, "center", u, scale=False).astype(np.float64)
    chic = ai.array_from_unit(shape, "center", units.CHI_DEG, scale=False).astype(np.float64)
    cor = ai.array_from_unit(shape, "corner", u, scale=False)
    kv["rad_center"] = save(w, "rc", cen.ravel())
    kv["chi_center"] = save(w, "cc", chic.ravel())
    kv["rad_corner"] = save(w, "rk", corner_grid(cor[..., 0]).ravel())
    kv["chi_corner"] = save(w, "ck", corner_grid(cor[..., 1]).ravel())
    kv["frame"] = save(w, "frame", frame)

    if dim == 1:
        ref = ai.integrate1d(frame, npt_rad, **kw)
        rad_ref = ref.radial
    else:
        ref = ai.integrate2d_ng(frame, npt_rad, npt_azim, **kw)
        rad_ref = ref.radial
    res = run_faid(driver, work, name, kv)

    nb = npt_rad * max(npt_azim, 1)

    def mine(key):
        a = res[key]
        assert a.size == nb
        return a if dim == 1 else a.reshape(npt_rad, npt_azim).T

    # bin centres
    assert np.allclose(res["rad_centers"], rad_ref, rtol=1e-12, atol=1e-12)
    if dim == 2:
        assert np.allclose(res["azim_centers"], ref.azimuthal, rtol=1e-12, atol=1e-9)

    sel = np.asarray(ref.count) > 0
    if split == "full" and dim == 2:
        # Every coefficient must be identical except the first pixel's (see first_pixel_bins).
        sel &= ~first_pixel_bins(ai, res, nb, frame.size, exact=True).reshape(npt_rad, npt_azim).T
    assert sel.sum() > max(10, 0.05 * sel.size)
    e_i = worst(mine("I"), np.asarray(ref.intensity), sel)
    e_c = worst(mine("count"), np.asarray(ref.count), sel)
    e_n = worst(mine("sum_norm"), np.asarray(ref.sum_normalization), sel)
    e_s = worst(mine("sum_signal"), np.asarray(ref.sum_signal), sel)
    msg = f"I {e_i:.2e} count {e_c:.2e} norm {e_n:.2e} signal {e_s:.2e}"
    if model or "variance" in kw:
        e_sig = worst(mine("sigma"), np.asarray(ref.sigma), sel)
        e_std = worst(mine("std"), np.asarray(ref.std), sel)
        e_var = worst(mine("sum_variance"), np.asarray(ref.sum_variance), sel)
        msg += f" sigma {e_sig:.2e} std {e_std:.2e} var {e_var:.2e}"
        assert e_sig <= TOL and e_std <= TOL and e_var <= TOL, msg
    else:
        # pyFAI's sem/std are `empty` (0) for every bin without an error model (2D: none at
        # all): so are faid's.
        assert np.all(mine("sigma")[sel] == 0.0) and np.all(mine("std")[sel] == 0.0), msg
        if ref.sem is not None and np.ndim(ref.sem) == np.ndim(ref.intensity):
            assert np.all(np.asarray(ref.sem)[sel] == 0.0)
    assert e_i <= TOL and e_c <= TOL and e_n <= TOL and e_s <= TOL, msg
    # empty bins carry the integrator's empty value, 0 (pyFAI 2026.9 uses it even with a dummy)
    empty_sel = (np.asarray(ref.count) == 0) & (mine("count") == 0)
    assert np.all(mine("I")[empty_sel] == 0.0) and np.all(np.asarray(ref.intensity)[empty_sel] == 0.0)
    print(name, msg)


@pytest.mark.parametrize("split", SPLITS)
def test_csr_matrix_identical(driver, work, split):
    """With pyFAI's own positions the 1D matrices are identical entry by entry."""
    gi = 0
    ai = make_ai(gi)
    shape = GEOMS[gi][0]
    _, _, _, mask = make_data(gi, 3)
    u = units.to_unit("2th_deg")
    w = os.path.join(work, "m_" + split)
    os.makedirs(w, exist_ok=True)
    cor = ai.array_from_unit(shape, "corner", u, scale=False)
    kv = {"positions": 1, "rows": shape[0], "cols": shape[1], "split": split, "unit": "2th_deg",
          "npt_rad": 300, "rad_range": "1.0 20.0", "azim_range": "-100 45",
          "mask": save(w, "mask", mask.ravel()),
          "rad_center": save(w, "rc", ai.array_from_unit(shape, "center", u, scale=False).ravel()),
          "chi_center": save(w, "cc", ai.chiArray(shape).astype(np.float64).ravel()),
          "rad_corner": save(w, "rk", corner_grid(cor[..., 0]).ravel()),
          "chi_corner": save(w, "ck", corner_grid(cor[..., 1]).ravel())}
    res = run_faid(driver, work, "m_" + split, kv)
    integ = ai.setup_sparse_integrator(shape, 300, mask=mask, pos0_range=(1.0 / u.scale, 20.0 / u.scale),
                                       pos1_range=ai.normalize_azimuth_range((-100, 45)), unit=u,
                                       split=split, algo="CSR", scale=False)
    data, ind, ptr = integ.lut
    keep = data != 0
    # drop pyFAI's explicit zeros (faid does not store them)
    rows = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    ptr2 = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=len(ptr) - 1))])
    assert np.array_equal(res["indptr"], ptr2)
    assert np.array_equal(res["indices"], ind[keep])
    mdat = res.get("data", np.ones(res["indices"].size, np.float32))
    assert np.array_equal(mdat, data[keep])


def test_eiger4m_full_split(driver, work):
    """EIGER 4M geometry through faid_geometry with full splitting: build time (reported, not
    asserted) and agreement of I and sigma with pyFAI."""
    shape = (2167, 2070)
    geo = dict(dist=0.15, poni1=0.08, poni2=0.075, rot1=0.01, rot2=-0.02, rot3=0.0, wavelength=1e-10)
    det = pyFAI.detector_factory("Eiger4M")
    ai = AzimuthalIntegrator(detector=det, **geo)
    rng = np.random.default_rng(5)
    frame = rng.poisson(100, shape).astype(np.uint32)
    mask = det.mask.astype(np.uint8)
    w = os.path.join(work, "eiger_in")
    os.makedirs(w, exist_ok=True)
    kv = {"rows": shape[0], "cols": shape[1], "pixel1": 75e-6, "pixel2": 75e-6, "orientation": 3,
          "split": "full", "unit": "q_nm^-1", "npt_rad": 1000, "error_model": "poisson",
          "mask": save(w, "mask", mask.ravel()), "frame": save(w, "frame", frame),
          "geometry_solid_angle": 1}
    kv.update(geo)
    out = os.path.join(work, "eiger")
    os.makedirs(out, exist_ok=True)
    write_params(os.path.join(out, "params.txt"), kv)
    r = subprocess.run([driver, os.path.join(out, "params.txt"), out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    print("EIGER 4M full split build:", r.stdout.strip())
    ref = ai.integrate1d(frame, 1000, unit="q_nm^-1", method=("full", "csr", "cython"), mask=mask,
                         error_model="poisson")
    sel = ref.count > 0
    assert np.allclose(np.load(os.path.join(out, "rad_centers.npy")), ref.radial, rtol=1e-9)
    e_i = worst(np.load(os.path.join(out, "I.npy")), ref.intensity, sel)
    e_s = worst(np.load(os.path.join(out, "sigma.npy")), ref.sigma, sel)
    print(f"EIGER 4M full: I {e_i:.2e} sigma {e_s:.2e}")
    assert e_i <= TOL and e_s <= TOL


@pytest.mark.parametrize("split,dim", [("bbox", 1), ("full", 1), ("no", 2), ("full", 2)])
def test_through_faid_geometry(driver, work, split, dim):
    """Positions from faid_geometry instead of pyFAI's arrays (end-to-end through the PONI)."""
    gi = 1
    shape, p1, p2, dist, poni1, poni2, r1, r2, r3, wl = GEOMS[gi]
    ai = make_ai(gi)
    frame, dark, flat, mask = make_data(gi, 11)
    w = os.path.join(work, f"g_{split}_{dim}")
    os.makedirs(w, exist_ok=True)
    npt_azim = 36 if dim == 2 else 0
    kv = {"rows": shape[0], "cols": shape[1], "pixel1": p1, "pixel2": p2, "dist": dist,
          "poni1": poni1, "poni2": poni2, "rot1": r1, "rot2": r2, "rot3": r3, "wavelength": wl,
          "orientation": 3, "split": split, "unit": "q_nm^-1", "npt_rad": 200, "npt_azim": npt_azim,
          "error_model": "poisson", "mask": save(w, "mask", mask.ravel()),
          "frame": save(w, "frame", frame), "geometry_solid_angle": 1,
          "geometry_polarization": 0.9, "dummy": -1.0, "delta_dummy": 0.5}
    res = run_faid(driver, work, f"g_{split}_{dim}", kv)
    kw = dict(unit="q_nm^-1", method=(split, "csr", "cython"), mask=mask, error_model="poisson",
              polarization_factor=0.9, dummy=-1.0, delta_dummy=0.5)
    if dim == 1:
        ref = ai.integrate1d(frame, 200, **kw)
        I, sig = res["I"], res["sigma"]
    else:
        ref = ai.integrate2d_ng(frame, 200, 36, **kw)
        I, sig = res["I"].reshape(200, 36).T, res["sigma"].reshape(200, 36).T
    sel = np.asarray(ref.count) > 0
    if split == "full" and dim == 2:
        sel &= ~first_pixel_bins(ai, res, 200 * 36, frame.size, exact=False).reshape(200, 36).T
    e_i, e_s = worst(I, np.asarray(ref.intensity), sel), worst(sig, np.asarray(ref.sigma), sel)
    print(f"geometry {split} {dim}D: I {e_i:.2e} sigma {e_s:.2e}")
    assert e_i <= TOL and e_s <= TOL


def faidctl_exists():
    return os.path.exists(os.path.join(BIN, "faidctl"))


@pytest.mark.skipif(not faidctl_exists(), reason="faidctl not built")
def test_faidctl_process_ref(work):
    """`faidctl process --device ref` gives the same profile as pyFAI (columns radial I sigma
    std count)."""
    gi = 0
    shape, p1, p2, dist, poni1, poni2, r1, r2, r3, wl = GEOMS[gi]
    ai = make_ai(gi)
    frame, _, _, mask = make_data(gi, 21)
    frame[frame < 0] = 0
    w = os.path.join(work, "ctl")
    os.makedirs(w, exist_ok=True)
    np.save(os.path.join(w, "mask.npy"), mask)
    np.save(os.path.join(w, "frame.npy"), frame)
    cfg = os.path.join(w, "cfg.yaml")
    with open(cfg, "w") as f:
        f.write(f"""detector:
  shape: [{shape[0]}, {shape[1]}]
  pixel_size: [{p1}, {p2}]
  mask: {os.path.join(w, 'mask.npy')}
geometry:
  dist: {dist}
  poni1: {poni1}
  poni2: {poni2}
  rot1: {r1}
  rot2: {r2}
  rot3: {r3}
  wavelength: {wl}
integration:
  npt: 300
  unit: 2th_deg
  split: bbox
  error_model: poisson
  solid_angle: true
""")

    out = os.path.join(w, "out")
    r = subprocess.run([os.path.join(BIN, "faidctl"), "process", "-c", cfg, "-o", out,
                        "--device", "ref", os.path.join(w, "frame.npy")], capture_output=True, text=True)
    txt = (r.stdout + r.stderr).lower()
    if r.returncode != 0 and ("not implemented" in txt or "unknown command" in txt):
        pytest.skip("faidctl process not implemented yet")
    assert r.returncode == 0, r.stderr
    dat = np.loadtxt(os.path.join(out, "frame_00000.dat"))
    ref = ai.integrate1d(frame, 300, unit="2th_deg", method=("bbox", "csr", "cython"), mask=mask,
                         error_model="poisson")
    sel = ref.count > 0
    assert dat.shape == (300, 5)
    assert np.allclose(dat[:, 0], ref.radial, rtol=1e-6)
    e = [worst(dat[:, k], r, sel) for k, r in ((1, ref.intensity), (2, ref.sigma), (3, ref.std),
                                                (4, ref.count))]
    print("faidctl process --device ref:", " ".join(f"{x:.2e}" for x in e))
    assert max(e) <= TOL, e
