"""Scoring of peak lists against peakgen.py's ground truth and against each other, and the reader
of faid's `.peaks` files.

Definitions (all per data set, frames pooled):
  match      one-to-one, per frame: candidate pairs (true, found) closer than MATCH_RADIUS px,
             taken greedily by increasing distance.
  recall     matched true peaks of SNR >= snr_min / true peaks of SNR >= snr_min.
  precision  found peaks matched to a true peak (of any SNR: finding a faint true peak is not an
             error) / found peaks. A second detection of one true peak is unmatched, so it
             counts against precision (and is also reported as `duplicates`: found peaks that
             are unmatched but within MATCH_RADIUS of a true peak).
  centroid   median distance found - true over the matched pairs of SNR >= snr_min.
  agreement  between two lists A and B: fraction of A with a peak of B within AGREE_RADIUS and
             the fraction of B with a peak of A within AGREE_RADIUS ("both ways"); one-to-one
             greedy matching as above.
  is_hit     consistent: is_hit == (min_peaks <= num_peaks [<= max_peaks]) for every frame.
"""
import pathlib

import numpy as np

MATCH_RADIUS = 1.5   # px, found vs true
AGREE_RADIUS = 0.5   # px, one finder vs another
SNR_MIN = 8.0
# What the peak tests require of a finder against the truth (issue 6, "Correctness").
MIN_RECALL = 0.98
MIN_PRECISION = 0.98
MAX_CENTROID_ERROR = 0.3  # px, median


def match(ax, ay, bx, by, radius):
    """Greedy one-to-one matching of points a and b closer than radius: (ia, ib, dist)."""
    ax, ay, bx, by = (np.asarray(v, np.float64) for v in (ax, ay, bx, by))
    if ax.size == 0 or bx.size == 0:
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(0)
    d = np.hypot(ax[:, None] - bx[None, :], ay[:, None] - by[None, :])
    ia, ib = np.nonzero(d < radius)
    order = np.argsort(d[ia, ib], kind="stable")
    used_a, used_b, out = set(), set(), []
    for k in order:
        i, j = ia[k], ib[k]
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            out.append((i, j, d[i, j]))
    if not out:
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(0)
    a, b, dd = zip(*out)
    return np.array(a), np.array(b), np.array(dd)


def score_vs_truth(truth, found, nframes, snr_min=SNR_MIN, radius=MATCH_RADIUS):
    """truth: list of dicts (peakgen), found: list (per frame) of arrays with fields x, y.
    Returns a dict of numbers and the per-peak detail for reports."""
    n_true = n_true_hit = n_found = n_found_ok = n_dup = 0
    errs = []
    missed = []
    false = []
    for f in range(nframes):
        t = [p for p in truth if p["frame"] == f]
        tx = np.array([p["x"] for p in t])
        ty = np.array([p["y"] for p in t])
        snr = np.array([p["snr"] for p in t])
        fd = found[f]
        it, jf, d = match(tx, ty, fd["x"], fd["y"], radius)
        strong = snr >= snr_min
        n_true += int(strong.sum())
        hit = np.zeros(len(t), bool)
        hit[it] = True
        n_true_hit += int((hit & strong).sum())
        errs += list(d[strong[it]]) if it.size else []
        n_found += len(fd)
        n_found_ok += len(jf)
        used = np.zeros(len(fd), bool)
        used[jf] = True
        for j in np.nonzero(~used)[0]:
            near = (np.hypot(tx - fd["x"][j], ty - fd["y"][j]) < radius).any() if len(t) else False
            n_dup += int(near)
            false.append(dict(frame=f, x=float(fd["x"][j]), y=float(fd["y"][j]),
                              duplicate=bool(near)))
        for i in np.nonzero(strong & ~hit)[0]:
            missed.append(dict(t[i]))
    return dict(
        true_snr_ge_min=n_true, recall=n_true_hit / n_true if n_true else float("nan"),
        found=n_found, precision=n_found_ok / n_found if n_found else float("nan"),
        false_positives=n_found - n_found_ok, duplicates=n_dup,
        median_centroid_error=float(np.median(errs)) if errs else float("nan"),
        p90_centroid_error=float(np.percentile(errs, 90)) if errs else float("nan"),
        missed=missed, false=false)


def recall_by_snr(truth, found, nframes, edges=(2, 4, 6, 8, 12, 20, 50, 1e9),
                  radius=MATCH_RADIUS):
    """Recall per SNR bin: list of (lo, hi, n, recall)."""
    snr_all, hit_all = [], []
    for f in range(nframes):
        t = [p for p in truth if p["frame"] == f]
        it, _, _ = match([p["x"] for p in t], [p["y"] for p in t], found[f]["x"],
                         found[f]["y"], radius)
        hit = np.zeros(len(t), bool)
        hit[it] = True
        snr_all += [p["snr"] for p in t]
        hit_all += list(hit)
    snr_all, hit_all = np.array(snr_all), np.array(hit_all)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (snr_all >= lo) & (snr_all < hi)
        out.append((lo, hi, int(sel.sum()), float(hit_all[sel].mean()) if sel.any() else
                    float("nan")))
    return out


def agreement(a, b, radius=AGREE_RADIUS):
    """Two lists of per-frame peak arrays: (fraction of a matched in b, fraction of b matched in
    a, n_a, n_b)."""
    na = nb = m = 0
    for fa, fb in zip(a, b):
        ia, _, _ = match(fa["x"], fa["y"], fb["x"], fb["y"], radius)
        na += len(fa)
        nb += len(fb)
        m += len(ia)
    return (m / na if na else 1.0), (m / nb if nb else 1.0), na, nb


def truth_problems(s):
    """What a score_vs_truth result `s` misses of the required recall, precision and median
    centroid error, one line each; an empty list when it meets them all."""
    problems = []
    if not s["recall"] >= MIN_RECALL:
        problems.append(f"recall {s['recall']:.4f} < {MIN_RECALL}")
    if not s["precision"] >= MIN_PRECISION:
        problems.append(f"precision {s['precision']:.4f} < {MIN_PRECISION}")
    if not s["median_centroid_error"] <= MAX_CENTROID_ERROR:
        problems.append(f"median centroid error {s['median_centroid_error']:.3f} > "
                        f"{MAX_CENTROID_ERROR} px")
    return problems


def hit_consistent(num_peaks, is_hit, min_peaks, max_peaks=None):
    expect = [(n >= min_peaks) and (max_peaks is None or n <= max_peaks) for n in num_peaks]
    return [bool(h) == e for h, e in zip(is_hit, expect)]


def read_peaks_file(path):
    """faid's `<stem>_<frame 5 digits>.peaks`: `# key: value` header lines, then one line per
    peak `x y intensity sigma snr npix`. Returns (header dict, structured array)."""
    from peakrefs import PEAK_DTYPE
    header = {}
    rows = []
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("#"):
            if ":" in line:
                k, v = line[1:].split(":", 1)
                header[k.strip()] = v.strip()
            continue
        if line.strip():
            rows.append([float(v) for v in line.split()])
    arr = np.zeros(len(rows), PEAK_DTYPE)
    if rows:
        data = np.array(rows)
        if data.shape[1] < 6:
            raise ValueError(f"{path}: {data.shape[1]} columns, expected x y intensity sigma "
                             "snr npix")
        for k, name in enumerate(("x", "y", "intensity", "sigma", "snr", "npix")):
            arr[name] = data[:, k]
    return header, arr


def format_report(name, s, by_snr=None):
    lines = [f"{name}: recall(SNR>={SNR_MIN:g}) {s['recall']:.4f} of {s['true_snr_ge_min']}, "
             f"precision {s['precision']:.4f} of {s['found']} (false {s['false_positives']}, "
             f"duplicates {s['duplicates']}), centroid error median "
             f"{s['median_centroid_error']:.3f} px, p90 {s['p90_centroid_error']:.3f} px"]
    if by_snr:
        lines.append("  recall by SNR: " + ", ".join(
            f"[{lo:g},{hi:g}) {r:.2f} (n={n})" for lo, hi, n, r in by_snr if n))
    return "\n".join(lines)
