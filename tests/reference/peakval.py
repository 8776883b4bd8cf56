"""Prints how the reference peak finders (OM's peakfinder8, pyFAI's OpenCL finder) and,
optionally, faid's `.peaks` files score against peakgen.py's ground truth: the numbers behind
test_peak_harness.py and test_peaks_vs_refs.py on larger or other data sets.

    python peakval.py [--preset pilatus_1m] [--seeds 0,1] [--no-pyfai] [--npt N]
                      [--faid-peaks NAME=DIR ...]

With --faid-peaks (repeatable), DIR holds faid's frames_<i>.peaks files for the data set of the
(single) seed, e.g. from `faidctl process -c CONF -o DIR DATA/frames.npy` with DATA written by
`python peakgen.py -o DATA --preset P --seed S` (same --hits/--sparse/--background) and CONF as
test_peaks_vs_refs.write_config writes it. --npt: background bins of pyFAI's finder (default
peakrefs.PYFAI_NPT; use about the largest radius in pixels, and the same in faid's config).
"""
import argparse
import pathlib
import tempfile
import time

import peakgen
import peakrefs
import peakscore as ps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="eiger_2x2", choices=sorted(peakgen.PRESETS))
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--hits", type=int, default=6)
    ap.add_argument("--sparse", type=int, default=2)
    ap.add_argument("--background", type=int, default=2)
    ap.add_argument("--no-pyfai", action="store_true")
    ap.add_argument("--npt", type=int, default=peakrefs.PYFAI_NPT)
    ap.add_argument("--faid-peaks", action="append", default=[])
    a = ap.parse_args()
    for seed in [int(s) for s in a.seeds.split(",")]:
        ds = peakgen.make_dataset(a.preset, a.hits, a.sparse, a.background, seed)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix="peakval_"))
        peakgen.write_dataset(ds, tmp)
        s, n = ds.setup, len(ds.frames)
        print(f"== {a.preset} seed {seed}: {n} frames, {len(ds.truth)} true peaks, "
              f"{sum(p['snr'] >= ps.SNR_MIN for p in ds.truth)} of SNR >= {ps.SNR_MIN:g}")
        lists = {}
        t = time.time()
        lists["OM peakfinder8"] = peakrefs.om_peakfinder8(ds.frames, s.mask, s.radius,
                                                          s.layout())
        print(f"   OM: {time.time() - t:.1f} s")
        if not a.no_pyfai:
            t = time.time()
            lists["pyFAI OCL_PeakFinder"] = peakrefs.pyfai_peakfinder(
                ds.frames, tmp / "geometry.poni", s.mask, npt=a.npt)
            print(f"   pyFAI: {time.time() - t:.1f} s")
        for spec in a.faid_peaks:
            name, _, folder = spec.partition("=")
            lists[f"faid {name}"] = [
                ps.read_peaks_file(pathlib.Path(folder) / f"frames_{i:05d}.peaks")[1]
                for i in range(n)]
        for name, found in lists.items():
            sc = ps.score_vs_truth(ds.truth, found, n)
            print(ps.format_report(name, sc, ps.recall_by_snr(ds.truth, found, n)))
            bg = [len(found[i]) for i in range(n) if ds.info[i]["kind"] == "background"]
            print(f"  peaks on background-only frames: {bg}")
        names = list(lists)
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                fa, fb, na, nb = ps.agreement(lists[names[i]], lists[names[j]])
                print(f"{names[i]} vs {names[j]}: {fa:.4f} of {na} / {fb:.4f} of {nb} within "
                      f"{ps.AGREE_RADIUS} px")


if __name__ == "__main__":
    main()
