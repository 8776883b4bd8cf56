"""The series file's layout table (writer/faid_sfile.c, printed into docs/output-files.md by
faid-outdoc; the ctest docs.output_files keeps the page equal to the table) against a real file:
`faidctl process` with every writer option on (profiles, peaks, cake, a normalization factor that
adds the monitor, an optional output) writes a series file; every row of the table is in it with
its kind, and every group, dataset and attribute of the file is a row: nothing undocumented,
nothing documented missing. A row's `<key>` stands for every optional output on (start
`optional_outputs`): the file has a dataset under each key the configuration lists."""
import os
import pathlib
import re
import subprocess

import h5py
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("FAID_BIN") or ROOT / "build" / "bin").resolve()

CONFIG = """detector:
  preset: null
  shape: [64, 64]
  pixel_size: [1.0e-4, 1.0e-4]
geometry:
  dist: 0.05
  poni1: 0.0031
  poni2: 0.0033
  wavelength: 1.0e-10
integration:
  npt: 32
  npt_azim: 8
  unit: 2th_deg
  normalization_factor: 2.0
peaks:
  algorithm: peakfinder8
  max_num_peaks: 16
output:
  extra: [sum_normalization]
writer:
  directory: out
  cake: true
"""
EXTRA = ["sum_normalization"]


def layout_rows(marker):
    doc = (ROOT / "docs" / "output-files.md").read_text()
    m = re.search(r"<!-- layout:%s:begin[^\n]*-->\n(.*?)<!-- layout:%s:end -->" % (marker, marker),
                  doc, re.S)
    assert m, "docs/output-files.md lacks the layout:%s block" % marker
    rows = []
    for line in m.group(1).splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append({"path": cells[0].strip("`"), "kind": cells[1], "type": cells[2]})
    return rows


@pytest.fixture(scope="module")
def series_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("layout")
    (d / "out").mkdir()
    cfg = d / "faid.yaml"
    cfg.write_text(CONFIG)
    r = subprocess.run([str(BIN / "faidctl"), "process", "-q", "-c", str(cfg), "--device", "ref",
                        "--synthetic", "3", "-o", str(d)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    path = d / "out" / "synthetic.h5"
    assert path.exists(), sorted(os.listdir(d / "out"))
    return path


def file_objects(path):
    """{path: kind} of every group, dataset, attribute ("path@name") and hard link (a second name
    of an object seen first elsewhere) of a file, walking every name of every group."""
    out = {}
    with h5py.File(path, "r") as f:
        seen = {}

        def walk(g, prefix):
            for name in g:
                obj = g[name]
                p = prefix + "/" + name
                key = obj.id
                if key in seen:
                    out[p] = "link"
                    continue
                seen[key] = p
                out[p] = "group" if isinstance(obj, h5py.Group) else "dataset"
                for a in obj.attrs:
                    out[p + "@" + a] = "attribute"
                if isinstance(obj, h5py.Group):
                    walk(obj, p)

        walk(f, "")
        for a in f.attrs:
            out["/@" + a] = "attribute"
    return out


def expand(rows):
    """The rows with `<key>` made one row per optional output on."""
    out = []
    for r in rows:
        out += [dict(r, path=r["path"].replace("<key>", k)) for k in EXTRA] \
            if "<key>" in r["path"] else [r]
    return out


def test_every_row_in_the_file_and_every_object_a_row(series_file):
    rows = expand(layout_rows("series"))
    documented = {r["path"]: r["kind"] for r in rows}
    found = file_objects(series_file)
    # dataset attributes (long_name, units, doc) are the datasets' own, a group's NX_class its
    # row's type (checked below): documented in the row
    found = {p: k for p, k in found.items()
             if not (k == "attribute" and found.get(p.split("@")[0]) == "dataset")
             and not (p.endswith("@NX_class") and p != "/@NX_class")}
    missing = sorted(set(documented) - set(found))
    assert not missing, "rows of the layout table not in the file: %s" % missing
    extra = sorted(set(found) - set(documented))
    assert not extra, "objects of the file the layout table does not document: %s" % extra
    for p, kind in documented.items():
        assert found[p] == kind, (p, kind, found[p])
    with h5py.File(series_file, "r") as f:
        for r in rows:
            if r["kind"] == "group":
                assert f[r["path"]].attrs["NX_class"] == r["type"], r
            if r["kind"] == "link":
                assert f[r["path"]] == f[r["type"]], r


def test_row_types_and_units(series_file):
    rows = expand(layout_rows("series"))
    with h5py.File(series_file, "r") as f:
        for r in rows:
            if r["kind"] != "dataset":
                continue
            ds = f[r["path"]]
            t = r["type"]
            if t == "float32 or int32":
                assert ds.dtype in ("float32", "int32"), r
            elif t == "string":
                assert ds.dtype.kind in "SO", r
            elif t == "bool":
                assert ds.dtype == bool, r
            else:
                assert ds.dtype == t, (r, ds.dtype)
        ax = f["entry/data/radial_axis"]
        assert ax.attrs["units"] == "degrees" and ax.attrs["long_name"] == "2theta"
        assert f["entry/monitor/data"][()].tolist() == [2.0] * 3
        sn = f["entry/outputs/sum_normalization"]
        assert sn.shape == f["entry/data/I"].shape and sn[()].max() > 0
