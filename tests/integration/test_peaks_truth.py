"""Peak finding through the daemon (issue 6, "Correctness"): the real faid on loopback ports,
frames of the independent generator (tests/reference/peakgen.py: rings, diffuse background, Bragg
peaks of known position / width / intensity over a wide SNR range, Poisson noise, masked module
gaps and beam stop, saturated cores, hot pixels, background-only frames) sent as uint32 images,
results read from the PUB socket.

Required for peaks.algorithm pyfai and peakfinder8, on the OpenCL (PoCL) and reference devices,
the same thresholds as tests/reference/test_peaks_vs_refs.py (which runs faidctl process): recall
and precision >= 0.98 for true peaks of SNR >= 8 (match radius 1.5 px), median centroid error
<= 0.3 px, is_hit == (num_peaks >= min_peaks_for_hit), no hit on a background-only frame; and
peakfinder8 results within 0.5 px of OM's peakfinder8 and pyfai results within 0.5 px of
pyFAI's OpenCL peak finder (PoCL) for >= 98 % of the peaks both ways.
Parameters: tests/reference/peakrefs.py (PF8_PARAMS, PYFAI_PARAMS, PYFAI_NPT, PYFAI_UNIT)."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import test_daemon as td  # noqa: E402  (the daemon harness: Daemon, Sender, Receiver)
from test_daemon import arr, ep  # noqa: E402

import peakgen  # noqa: E402
import peakrefs  # noqa: E402
import peakscore as ps  # noqa: E402

MIN_HIT = 10


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    ds = peakgen.make_dataset("eiger_2x2", hits=4, sparse=2, background=2, seed=5)
    out = peakgen.write_dataset(ds, tmp_path_factory.mktemp("peakdata"))
    return ds, out


@pytest.fixture(scope="module")
def pyfai_lists(data):
    return peakrefs.pyfai_lists(*data)


def config_for(data_dir):
    """A replacement for test_daemon.config_text: the generator's detector (geometry.poni, mask)
    and the test's peaks section, the harness's endpoints."""
    pf8, py = peakrefs.PF8_PARAMS, peakrefs.PYFAI_PARAMS

    def text(ports, devices="cpu", algorithm="peakfinder8", **_):
        return f"""detector:
  mask: {data_dir}/mask.npy
geometry:
  poni_file: {data_dir}/geometry.poni
integration:
  npt: {peakrefs.PYFAI_NPT}
  unit: {peakrefs.PYFAI_UNIT}
  split: 'no'
  solid_angle: false
input:
  endpoint: "{ep(ports['in'])}"
  mode: bind
  max_frame_bytes: 4000000
output:
  endpoint: "{ep(ports['out'])}"
control:
  endpoint: "{ep(ports['ctl'])}"
devices: {devices}
queue:
  depth: 16
  policy: block
peaks:
  algorithm: {algorithm}
  cutoff_clip: {py['cutoff_clip']!r}
  cycles: {py['cycles']}
  error_model: {py['error_model']}
  noise: {py['noise']!r}
  cutoff_peak: {py['cutoff_peak']!r}
  patch_size: {py['patch_size']}
  connected: {py['connected']}
  adc_threshold: {pf8['adc_threshold']!r}
  minimum_snr: {pf8['minimum_snr']!r}
  min_pixel_count: {pf8['min_pixel_count']}
  max_pixel_count: {pf8['max_pixel_count']}
  local_bg_radius: {pf8['local_bg_radius']}
  min_res: {pf8['min_res']}
  max_res: {pf8['max_res']}
  max_num_peaks: {pf8['max_num_peaks']}
  min_peaks_for_hit: {MIN_HIT}
"""
    return text


@pytest.fixture
def daemons(tmpdir_, data, monkeypatch):
    monkeypatch.setattr(td, "config_text", config_for(data[1]))
    yield from td.daemons.__wrapped__(tmpdir_)


tmpdir_ = td.tmpdir_


@pytest.mark.parametrize("device", ["cpu", "ref"])
@pytest.mark.parametrize("algorithm", ["peakfinder8", "pyfai"])
def test_daemon_peaks_vs_truth(daemons, data, request, device, algorithm):
    ds, _ = data
    d = daemons(devices=device, algorithm=algorithm)
    rx = td.Receiver(d)
    rx.settle()
    tx = td.Sender(d)
    tx.start(series_id=1, nimages=len(ds.frames), series_unique_id="truth")
    for i, img in enumerate(ds.frames):
        tx.image(i, np.ascontiguousarray(img), series_id=1)
    tx.end(series_id=1)
    rx.collect_until_end()
    results = {r["frame_id"]: r for r in rx.of("result")}
    assert sorted(results) == list(range(len(ds.frames))), sorted(results)
    assert rx.of("start")[-1]["peaks"]["algorithm"] == algorithm

    found, problems = [], []
    for i in range(len(ds.frames)):
        r = results[i]
        n = r["num_peaks"]
        x, y = arr(r["peak_x"]), arr(r["peak_y"])
        assert x.shape == y.shape == (n,), (i, n, x.shape)
        found.append(peakrefs.peaks_array(x, y, arr(r["peak_intensity"]), arr(r["peak_sigma"]),
                                          arr(r["peak_snr"]), arr(r["peak_npix"])))
        if bool(r["is_hit"]) != (n >= MIN_HIT):
            problems.append(f"frame {i}: is_hit {r['is_hit']} with num_peaks {n}")
        if ds.info[i]["kind"] == "background" and r["is_hit"]:
            problems.append(f"frame {i}: background-only frame reported as a hit ({n} peaks)")
    n = len(ds.frames)
    s = ps.score_vs_truth(ds.truth, found, n)
    report = ps.format_report(f"faid daemon {algorithm} ({device})", s,
                              ps.recall_by_snr(ds.truth, found, n))
    print(report)
    problems += ps.truth_problems(s)
    if algorithm == "peakfinder8":
        st = ds.setup
        om = peakrefs.om_peakfinder8(ds.frames, st.mask, st.radius, st.layout())
        fa, fb, na, nb = ps.agreement(found, om)
        print(f"vs OM: {fa:.4f} of {na} faid peaks, {fb:.4f} of {nb} OM peaks within 0.5 px")
        if not (fa >= 0.98 and fb >= 0.98):
            problems.append(f"vs OM: {fa:.4f} of {na} faid / {fb:.4f} of {nb} OM within 0.5 px")
    else:
        ref = request.getfixturevalue("pyfai_lists")
        fa, fb, na, nb = ps.agreement(found, ref)
        print(f"vs pyFAI: {fa:.4f} of {na} faid peaks, {fb:.4f} of {nb} pyFAI peaks within 0.5 px")
        if not (fa >= 0.98 and fb >= 0.98):
            problems.append(f"vs pyFAI: {fa:.4f} of {na} faid / {fb:.4f} of {nb} pyFAI within "
                            "0.5 px")
    assert not problems, report + "\n" + "\n".join(problems)
