"""Independent frame generator for the peak-finding tests: detector-shaped frames with known Bragg
peaks, written as .npy stacks with a ground-truth list. numpy only, deterministic for a seed.

What a frame holds (expected counts, then Poisson noise):
  - a radially symmetric background about the beam centre: a diffuse term falling with radius, a
    broad solvent-like bump and a few sharper powder rings, scaled per frame, times the solid-angle
    factor cos^3(2 theta) of the flat, untilted detector;
  - Bragg peaks: 2-D Gaussians of known sub-pixel centre, width (sigma 0.7-1.4 px) and integrated
    intensity, integrated exactly over each pixel's area (product of erf differences); centres
    at least 10 px apart, 4 px clear of masked pixels and frame edges, off the flanks of
    the sharp powder rings (see RING_CLEAR_WIDTHS) and out of the far corners where a
    1-px ring of radius holds fewer than 100 valid pixels (see MIN_RING_PIXELS);
  - Poisson noise on the sum; pixels above the detector's count cutoff clip to it ("saturated":
    the cores of the few strongest peaks, and isolated hot pixels away from peaks that a peak finder
    must not report since they are single pixels);
  - masked module gaps (the preset's layout, filled with the detector's gap value) and a masked
    beam stop disc round the beam centre (mask: 1 = bad, faid's convention).

Frame kinds in a data set: "hit" (many peaks), "sparse" (a few peaks: below a hit threshold of 10)
and "background" (no peak at all, hot pixels included).

Coordinates: x = fast-axis (column) and y = slow-axis (row) positions in pixel-index coordinates,
the centre of pixel (row r, column c) being (x=c, y=r), as OM's peakfinder8 and faid's .peaks
files report them.

SNR definition (one number per true peak, independent of any peak finder): the photon-counting
signal-to-noise ratio of a 3 x 3 box sum centred on the pixel that holds the peak centre,
    SNR = S / sqrt(S + 9 B),
S = expected peak counts inside the box, B = mean expected background counts per pixel there.
It is what an ideal 3 x 3 aperture measurement of the peak would achieve; a peak of SNR 8 has a
brightest pixel about 5 background sigmas above the background when the background is high (and
more when it is low). The target SNR of each peak is drawn log-uniform over [snr_min, snr_max]
and the intensity solved from it.

Geometry: flat detector, no tilt (rot1 = rot2 = rot3 = 0), square pixels, so that the radius in
pixels that peakfinder8 takes and pyFAI's r_m / pixel size are the same number:
    r[row, col] = hypot(row + 0.5 - poni1 / pixel, col + 0.5 - poni2 / pixel).
The geometry is written as a version-2 .poni file so that faid and pyFAI read the same one.

Command line: python peakgen.py -o DIR [--preset eiger_2x2|pilatus_1m] [--hits N] [--sparse N]
[--background N] [--seed S]  writes DIR/frames.npy, mask.npy, geometry.poni, truth.json, truth.csv.
"""
import argparse
import json
import math
import pathlib

import numpy as np

# Detector presets. Module layout: modules of (rows, cols) separated by gaps of (rows, cols);
# gap_value is what the detector writes in gaps, cutoff the count at which pixels saturate.
PRESETS = {
    # a small EIGER-like detector (2 x 2 modules, EIGER's 37-row / 10-column gaps) that keeps
    # the ctest short
    "eiger_2x2": dict(modules=(2, 2), module=(200, 250), gap=(37, 10), pixel=75e-6,
                      dtype="uint32", gap_value=2**32 - 1, cutoff=60000, poni_detector=None,
                      dist=0.08),
    # PILATUS 1M: 5 x 2 modules of 195 x 487 pixels, 17-row / 7-column gaps (pyFAI's Pilatus1M)
    "pilatus_1m": dict(modules=(5, 2), module=(195, 487), gap=(17, 7), pixel=172e-6,
                       dtype="int32", gap_value=-1, cutoff=1048575, poni_detector="Pilatus1M",
                       dist=0.25),
}

BOX = 1              # half size of the SNR aperture (3 x 3)
MIN_SEPARATION = 10  # px between peak centres (patches and local backgrounds do not overlap)
EDGE_CLEAR = 4       # px: a peak centre has no masked pixel or frame edge this close
BEAMSTOP = 14        # px: radius of the masked beam stop disc
# No peak centre on the flanks of the sharp powder rings: within 2.5 ring widths + 5 px of a
# ring's radius. There peakfinder8's local-background test (the peak's maximum must exceed the
# largest below-threshold pixel of a disc of radius 2 * local_bg_radius, taken on raw values)
# rejects peaks by design, whatever the implementation; OM misses 6 % of the SNR >= 8 peaks
# placed there. The rings stay in every frame, so false peaks on them still count.
RING_CLEAR_WIDTHS, RING_CLEAR_PX = 2.5, 5.0
# No peak centre where the 1-px-wide ring of its integer radius holds fewer than this many valid
# pixels (the detector's far corners): there the radial statistics of peakfinder8 (and a radial
# background bin) hold so few pixels that the peak itself sets the threshold; OM then misses
# even SNR 60 peaks.
MIN_RING_PIXELS = 100


def preset_shape(p):
    (nr, nc), (mr, mc), (gr, gc) = p["modules"], p["module"], p["gap"]
    return nr * mr + (nr - 1) * gr, nc * mc + (nc - 1) * gc


def gap_mask(p):
    """1 in the module gaps, 0 on the modules."""
    shape = preset_shape(p)
    (nr, nc), (mr, mc), (gr, gc) = p["modules"], p["module"], p["gap"]
    m = np.ones(shape, np.uint8)
    for i in range(nr):
        for j in range(nc):
            r0, c0 = i * (mr + gr), j * (mc + gc)
            m[r0:r0 + mr, c0:c0 + mc] = 0
    return m


def radius_map(shape, centre):
    """Distance in pixels of every pixel centre from the beam centre (row, col), pixel-index
    coordinates."""
    rows, cols = np.mgrid[0:shape[0], 0:shape[1]]
    return np.hypot(rows - centre[0], cols - centre[1])


def _erf(a):
    return np.array([math.erf(v) for v in np.ravel(a)]).reshape(np.shape(a))


def _pixel_fractions(centre, sigma, lo, hi):
    """Fraction of a 1-D Gaussian (centre, sigma) falling in pixels lo..hi-1 (pixel k spans
    [k - 0.5, k + 0.5])."""
    edges = np.arange(lo, hi + 1) - 0.5
    cdf = 0.5 * (1.0 + _erf((edges - centre) / (sigma * math.sqrt(2.0))))
    return np.diff(cdf)


def peak_stamp(x, y, sigma, shape):
    """Expected-count fractions of a unit-intensity Gaussian peak: (row slice, col slice, 2-D
    fractions), clipped to the frame."""
    h = int(math.ceil(6 * sigma)) + 1
    r0, r1 = max(0, int(round(y)) - h), min(shape[0], int(round(y)) + h + 1)
    c0, c1 = max(0, int(round(x)) - h), min(shape[1], int(round(x)) + h + 1)
    fy = _pixel_fractions(y, sigma, r0, r1)
    fx = _pixel_fractions(x, sigma, c0, c1)
    return slice(r0, r1), slice(c0, c1), np.outer(fy, fx)


def box_fraction(x, y, sigma):
    """Fraction of the peak inside the 3 x 3 box centred on the pixel holding (x, y)."""
    cx, cy = int(round(x)), int(round(y))
    fx = _pixel_fractions(x, sigma, cx - BOX, cx + BOX + 1).sum()
    fy = _pixel_fractions(y, sigma, cy - BOX, cy + BOX + 1).sum()
    return fx * fy


def intensity_for_snr(snr, frac, bkg):
    """Integrated intensity I such that S = frac * I satisfies S / sqrt(S + 9 B) = snr."""
    npix = (2 * BOX + 1) ** 2
    s = 0.5 * (snr * snr + math.sqrt(snr**4 + 4 * snr * snr * npix * bkg))
    return s / frac


def snr_of(intensity, frac, bkg):
    s = frac * intensity
    return s / math.sqrt(s + (2 * BOX + 1) ** 2 * bkg)


class Setup:
    """Detector, geometry and the expected background shape of one data set."""

    def __init__(self, preset="eiger_2x2", seed=0):
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        self.name = preset
        self.p = p = PRESETS[preset]
        self.shape = preset_shape(p)
        self.pixel = p["pixel"]
        self.dtype = np.dtype(p["dtype"])
        rng = np.random.default_rng([seed, 1])
        # beam centre near the middle, off any pixel centre and off the gaps' symmetry
        self.centre = (self.shape[0] * rng.uniform(0.45, 0.55) + 0.37,
                       self.shape[1] * rng.uniform(0.45, 0.55) + 0.21)
        self.dist = p["dist"]
        self.wavelength = 1.0e-10
        # pyFAI: poni measured from the outer corner of pixel (0, 0); pixel centre at +0.5
        self.poni1 = (self.centre[0] + 0.5) * self.pixel
        self.poni2 = (self.centre[1] + 0.5) * self.pixel
        self.radius = radius_map(self.shape, self.centre)
        self.gaps = gap_mask(p)
        self.mask = self.gaps.copy()
        self.mask[self.radius < BEAMSTOP] = 1
        rmax = float(self.radius.max())
        # background shape (per frame scaled): diffuse + solvent bump + powder rings
        tth = np.arctan(self.radius * self.pixel / self.dist)
        solid = np.cos(tth) ** 3
        ring_r = np.sort(rng.uniform(0.2, 0.9, 3)) * rmax
        ring_w = rng.uniform(1.5, 3.0, 3)
        ring_a = rng.uniform(40.0, 250.0, 3)
        r = self.radius
        bg = 8.0 + 60.0 * np.exp(-r / (0.25 * rmax))
        bg += 50.0 * np.exp(-0.5 * ((r - 0.55 * rmax) / (0.12 * rmax)) ** 2)
        for rr, ww, aa in zip(ring_r, ring_w, ring_a):
            bg += aa * np.exp(-0.5 * ((r - rr) / ww) ** 2)
        self.background_shape = bg * solid
        self.rings = [dict(radius=float(a), width=float(b), amplitude=float(c))
                      for a, b, c in zip(ring_r, ring_w, ring_a)]
        # where a peak centre may go: no masked pixel or edge within EDGE_CLEAR
        bad = self.mask.astype(bool)
        grown = bad.copy()
        for dr in range(-EDGE_CLEAR, EDGE_CLEAR + 1):
            for dc in range(-EDGE_CLEAR, EDGE_CLEAR + 1):
                grown |= np.roll(np.roll(bad, dr, 0), dc, 1)
        grown[:EDGE_CLEAR + 1, :] = grown[-EDGE_CLEAR - 1:, :] = True
        grown[:, :EDGE_CLEAR + 1] = grown[:, -EDGE_CLEAR - 1:] = True
        for rr, ww in zip(ring_r, ring_w):
            grown |= np.abs(r - rr) < RING_CLEAR_WIDTHS * ww + RING_CLEAR_PX
        ring = np.rint(r).astype(np.int64)
        per_ring = np.bincount(ring[~bad], minlength=ring.max() + 1)
        grown |= per_ring[ring] < MIN_RING_PIXELS
        self.allowed = ~grown

    def poni_text(self):
        if self.p["poni_detector"]:
            det = f"Detector: {self.p['poni_detector']}\nDetector_config: {{}}\n"
        else:
            cfg = dict(pixel1=self.pixel, pixel2=self.pixel, max_shape=list(self.shape))
            det = f"Detector: Detector\nDetector_config: {json.dumps(cfg)}\n"
        return ("# written by tests/reference/peakgen.py\nponi_version: 2\n" + det +
                f"Distance: {self.dist!r}\nPoni1: {self.poni1!r}\nPoni2: {self.poni2!r}\n"
                "Rot1: 0.0\nRot2: 0.0\nRot3: 0.0\n"
                f"Wavelength: {self.wavelength!r}\n")

    def layout(self):
        """peakfinder8 slab layout: the frame as one ASIC (gaps are masked)."""
        return dict(asic_nx=self.shape[1], asic_ny=self.shape[0], nasics_x=1, nasics_y=1)


def _place(rng, allowed, taken, n):
    rows, cols = np.nonzero(allowed)
    out = []
    tries = 0
    while len(out) < n and tries < 50 * n + 100:
        tries += 1
        k = rng.integers(rows.size)
        y = rows[k] + rng.uniform(-0.5, 0.5)
        x = cols[k] + rng.uniform(-0.5, 0.5)
        if all((x - a) ** 2 + (y - b) ** 2 >= MIN_SEPARATION**2 for a, b in taken):
            taken.append((x, y))
            out.append((x, y))
    return out


def make_frame(setup, rng, kind, snr_range=(2.0, 300.0), n_hot=3, index=0):
    """One frame of kind hit / sparse / background: (frame array, list of true peaks, info)."""
    shape = setup.shape
    scale = rng.uniform(0.4, 1.6)
    mu_bg = setup.background_shape * scale
    mu = mu_bg.copy()
    n = {"hit": int(rng.integers(40, 90)), "sparse": int(rng.integers(2, 8)),
         "background": 0}[kind]
    taken = []
    peaks = []
    positions = _place(rng, setup.allowed, taken, n)
    lo, hi = math.log(snr_range[0]), math.log(snr_range[1])
    for j, (x, y) in enumerate(positions):
        sigma = rng.uniform(0.7, 1.4)
        cx, cy = int(round(x)), int(round(y))
        bkg = float(mu_bg[cy - BOX:cy + BOX + 1, cx - BOX:cx + BOX + 1].mean())
        frac = box_fraction(x, y, sigma)
        if kind == "hit" and j == 0 and rng.random() < 0.5:
            intensity = rng.uniform(1.0, 3.0) * setup.p["cutoff"] / 0.15   # clips at the cutoff
        else:
            intensity = intensity_for_snr(math.exp(rng.uniform(lo, hi)), frac, bkg)
        rs, cs, f = peak_stamp(x, y, sigma, shape)
        mu[rs, cs] += intensity * f
        peaks.append(dict(frame=index, x=float(x), y=float(y), sigma=float(sigma),
                          intensity=float(intensity), background=bkg,
                          snr=float(snr_of(intensity, frac, bkg)), saturated=False))
    img = rng.poisson(mu).astype(np.int64)
    cutoff = setup.p["cutoff"]
    for pk in peaks:
        cx, cy = int(round(pk["x"])), int(round(pk["y"]))
        pk["saturated"] = bool((img[cy - 2:cy + 3, cx - 2:cx + 3] >= cutoff).any())
    # isolated hot pixels, away from the peaks and the mask
    hot = _place(rng, setup.allowed, taken, n_hot)
    hot_px = [(int(round(y)), int(round(x))) for x, y in hot]
    for r, c in hot_px:
        img[r, c] = cutoff
    np.minimum(img, cutoff, out=img)
    img[setup.gaps.astype(bool)] = setup.p["gap_value"]
    info = dict(frame=index, kind=kind, background_scale=float(scale), num_peaks=len(peaks),
                hot_pixels=[[r, c] for r, c in hot_px])
    return img.astype(setup.dtype), peaks, info


class Dataset:
    def __init__(self, setup, frames, truth, info, seed):
        self.setup, self.frames, self.truth, self.info, self.seed = setup, frames, truth, info, seed

    def truth_of(self, frame):
        return [p for p in self.truth if p["frame"] == frame]


def make_dataset(preset="eiger_2x2", hits=6, sparse=2, background=2, seed=0,
                 snr_range=(2.0, 300.0)):
    """Frames in a fixed, shuffled order of kinds; everything follows from seed."""
    setup = Setup(preset, seed)
    rng = np.random.default_rng([seed, 2])
    kinds = ["hit"] * hits + ["sparse"] * sparse + ["background"] * background
    kinds = [kinds[i] for i in rng.permutation(len(kinds))]
    frames, truth, info = [], [], []
    for i, kind in enumerate(kinds):
        img, peaks, inf = make_frame(setup, rng, kind, snr_range, index=i)
        frames.append(img)
        truth += peaks
        info.append(inf)
    return Dataset(setup, np.stack(frames), truth, info, seed)


def write_dataset(ds, out):
    """frames.npy (N, rows, cols), mask.npy (uint8, 1 = bad), geometry.poni, truth.json (set-up,
    frames, peaks) and truth.csv (one line per peak)."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "frames.npy", ds.frames)
    np.save(out / "mask.npy", ds.setup.mask)
    (out / "geometry.poni").write_text(ds.setup.poni_text())
    s = ds.setup
    doc = dict(generator="tests/reference/peakgen.py", seed=ds.seed, preset=s.name,
               shape=list(s.shape), pixel=s.pixel, beam_centre_rc=list(s.centre),
               dtype=str(s.dtype), cutoff=s.p["cutoff"], gap_value=s.p["gap_value"],
               rings=s.rings, coordinates="x = column (fast), y = row (slow), pixel centre at "
               "integer index", snr="S / sqrt(S + 9 B) over the 3x3 box round the centre pixel",
               frames=ds.info, peaks=ds.truth)
    (out / "truth.json").write_text(json.dumps(doc, indent=1))
    cols = ["frame", "x", "y", "sigma", "intensity", "background", "snr", "saturated"]
    lines = [",".join(cols)]
    for p in ds.truth:
        lines.append(",".join(str(int(p[c])) if c in ("frame", "saturated") else f"{p[c]:.6g}"
                              for c in cols))
    (out / "truth.csv").write_text("\n".join(lines) + "\n")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--preset", default="eiger_2x2", choices=sorted(PRESETS))
    ap.add_argument("--hits", type=int, default=6)
    ap.add_argument("--sparse", type=int, default=2)
    ap.add_argument("--background", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    ds = make_dataset(a.preset, a.hits, a.sparse, a.background, a.seed)
    write_dataset(ds, a.out)
    print(f"{len(ds.frames)} frames, {len(ds.truth)} peaks -> {a.out}")


if __name__ == "__main__":
    main()
