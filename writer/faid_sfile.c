/* faid_sfile: see faid_sfile.h. */
#define _GNU_SOURCE /* memfd_create */
#include "faid_sfile.h"

#include "faid_h5.h"
#include "faid_outputs.h"
#include "faid_proto.h"
#include "faid_proto_table.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_BLOCK 64
/* A chunk holds at most this many bytes (block_frames rows of a dataset, fewer when a row is
 * large: a cake row of 360 x 1000 bins is 1.4 MB, so its chunks are one frame). */
#define CHUNK_BYTES (1u << 20)

/* Optional outputs a series file writes at most (start optional_outputs; further ones are not). */
#define SFILE_XMAX 8

/* The per-frame datasets, in the order they are created. */
enum {
    C_I,
    C_SIGMA,
    C_STD,
    C_COUNT,
    C_FRAME_ID,
    C_TIMESTAMP,
    C_MONITOR,
    C_NPEAKS,
    C_NUM_PEAKS,
    C_IS_HIT,
    C_PX,
    C_PY,
    C_PINT,
    C_PSIGMA,
    C_PSNR,
    C_PNPIX,
    C_PMAX,
    C_BG,
    C_BG_ERR,
    C_I2D,
    C_SIGMA2D,
    C_COUNT2D,
    C_X0, /* the optional outputs on (start optional_outputs), /entry/outputs/<key> */
    C_N = C_X0 + SFILE_XMAX
};

typedef struct col {
    hid_t dset;   /* < 0: not written in this file */
    hid_t type;   /* memory and file type */
    size_t esize; /* bytes per element */
    int rank;     /* of one frame's row: 0, 1 or 2 */
    hsize_t row[2];
    size_t row_elems;
    uint8_t *buf; /* block rows */
} col;

struct faid_sfile {
    char path[4096];
    hid_t file;
    hid_t bool_type;
    col c[C_N];
    int block;
    int nbuf;           /* frames in the block buffers */
    uint64_t written;   /* frames written to the datasets */
    uint64_t bytes;     /* data bytes written */
    uint64_t series_id; /* of the start */
    uint64_t setup_version;
    uint64_t npt, npt_azim, max_peaks, hits, missing;
    int profiles, has_peaks, has_cake, has_monitor;
    double monitor;
    int norm_written;
    hid_t norm, end_time, end_reason, frames_missing, frame_count, hit_rate, nhits;
    dev_t dev;
    ino_t ino;
    char xkey[SFILE_XMAX][32]; /* the optional outputs' keys, columns C_X0 + i */
    int xpeaks[SFILE_XMAX];    /* 1: per peak, zero padded to max_peaks */
    int nx;
    int failed;     /* a write failed: the file is frozen (see fail_io) */
    int fail_errno; /* its system error */
};

/* ---- the layout (docs/output-files.md) ------------------------------------------------------ */

#define G(p, cls, when, m)                                                                         \
    {                                                                                              \
        p, "group", cls, "", "", when, m                                                           \
    }
#define DS(p, t, shape, u, when, m)                                                                \
    {                                                                                              \
        p, "dataset", t, shape, u, when, m                                                         \
    }
#define AT(p, t, when, m)                                                                          \
    {                                                                                              \
        p, "attribute", t, "scalar", "", when, m                                                   \
    }
#define LN(p, target, when, m)                                                                     \
    {                                                                                              \
        p, "link", target, "", "", when, m                                                         \
    }
static const faid_layout_row rows[] = {
    AT("/@NX_class", "string", "always", "`NXroot`"),
    AT("/@default", "string", "always", "`entry`: the entry plotted by default"),
    AT("/@creator", "string", "always", "`faid`"),
    AT("/@file_name", "string", "always", "the file's name"),
    AT("/@file_time", "string", "always", "creation time, ISO 8601 UTC"),
    AT("/@file_update_time", "string", "always",
       "as file_time (attributes cannot change in SWMR mode: /entry/end_time has the last write)"),
    AT("/@HDF5_Version", "string", "always", "libhdf5 version that wrote the file"),
    G("/entry", "NXentry", "always", "the profiles, as pyFAI's `save_NXazint1d` lays them out"),
    AT("/entry@default", "string", "always", "`data`"),
    DS("/entry/definition", "string", "scalar", "", "always", "`NXazint1d`"),
    DS("/entry/title", "string", "scalar", "", "always",
       "the series: its unique id, else `series <series_id>`"),
    DS("/entry/program_name", "string", "scalar", "", "always", "`faid`"),
    DS("/entry/start_time", "string", "scalar", "", "always", "file created, ISO 8601 UTC"),
    DS("/entry/end_time", "string", "scalar", "", "always",
       "last written (equal to start_time until the series ends)"),
    DS("/entry/solid_angle_applied", "bool", "scalar", "", "always", "`integration.solid_angle`"),
    DS("/entry/polarization_applied", "bool", "scalar", "", "always",
       "`integration.polarization_factor` not null"),
    DS("/entry/normalization_applied", "bool", "scalar", "", "always",
       "true: the profiles are weighted averages (pyFAI's `weighted_average`)"),
    DS("/entry/monitor_applied", "bool", "scalar", "", "always",
       "`integration.normalization_factor` is not 1"),
    G("/entry/instrument", "NXinstrument", "always", ""),
    DS("/entry/instrument/name", "string", "scalar", "", "always",
       "detector preset (`detector.preset`), else `detector`"),
    G("/entry/instrument/source", "NXsource", "always", ""),
    DS("/entry/instrument/source/name", "string", "scalar", "", "always", "`source`"),
    DS("/entry/instrument/source/type", "string", "scalar", "", "always", "`synchrotron`"),
    DS("/entry/instrument/source/probe", "string", "scalar", "", "always", "`x-ray`"),
    G("/entry/instrument/monochromator", "NXmonochromator", "always", ""),
    DS("/entry/instrument/monochromator/wavelength", "float64", "scalar", "angstrom", "always",
       "`geometry.wavelength`"),
    DS("/entry/instrument/monochromator/energy", "float64", "scalar", "keV", "always",
       "from the wavelength (hc / lambda)"),
    G("/entry/faid", "NXprocess", "always",
      "faid's counterpart of pyFAI's `pyFAI` NXprocess: what reduced the data"),
    DS("/entry/faid/program", "string", "scalar", "", "always", "`faid`"),
    DS("/entry/faid/version", "string", "scalar", "", "always", "faid's version (start message)"),
    DS("/entry/faid/date", "string", "scalar", "", "always", "file created, ISO 8601 UTC"),
    DS("/entry/faid/sequence_index", "int64", "scalar", "", "always", "1"),
    DS("/entry/faid/series_id", "uint64", "scalar", "", "always", "the series' `series_id`"),
    DS("/entry/faid/series_unique_id", "string", "scalar", "", "always",
       "the series' unique id as sent (may be empty)"),
    DS("/entry/faid/setup_version", "uint64", "scalar", "", "always",
       "the reduction setup of every frame in the file"),
    DS("/entry/faid/config_hash", "string", "scalar", "", "always",
       "16 hex digits of the reduction parameters"),
    DS("/entry/faid/end_reason", "string", "scalar", "", "always",
       "`open` while written; then the end's reason (`end`, `timeout`, `superseded`, "
       "`shutdown`) or why the writer closed it (`timeout`, `setup`, `shutdown`)"),
    DS("/entry/faid/frames", "uint64", "scalar", "", "always",
       "frames written as of the last flush (after a failed write, rows libhdf5 could not store "
       "read as unwritten: frame_id 2^64 - 1, NaN)"),
    DS("/entry/faid/frames_missing", "uint64", "scalar", "", "always",
       "results of the series the writer could not take (its queue was full): counted, never "
       "silent"),
    G("/entry/faid/poni", "NXnote", "always", "the geometry in force"),
    DS("/entry/faid/poni/format", "string", "scalar", "", "always", "`text/json`"),
    DS("/entry/faid/poni/data", "string", "scalar", "", "always",
       "PONI geometry as JSON (pyFAI's poni_version 2.1 keys, SI units)"),
    G("/entry/faid/configuration", "NXnote", "always", "the effective configuration"),
    DS("/entry/faid/configuration/format", "string", "scalar", "", "always", "`text/yaml`"),
    DS("/entry/faid/configuration/data", "string", "scalar", "", "always",
       "as `faid --dump-config` (start `config`)"),
    G("/entry/faid/integrate", "NXcollection", "always", "integration parameters"),
    DS("/entry/faid/integrate/error_model", "string", "scalar", "", "always",
       "`integration.error_model`"),
    DS("/entry/faid/integrate/integration_method", "string", "scalar", "", "always",
       "JSON: dim, split, algo `csr`, impl `faid`"),
    DS("/entry/faid/integrate/compute_engine", "string", "scalar", "", "always",
       "the devices, comma-separated"),
    DS("/entry/faid/integrate/method_called", "string", "scalar", "", "always", "`faid`"),
    DS("/entry/faid/integrate/has_dark_correction", "bool", "scalar", "", "always", ""),
    DS("/entry/faid/integrate/has_flat_correction", "bool", "scalar", "", "always", ""),
    DS("/entry/faid/integrate/has_mask_applied", "bool", "scalar", "", "always", ""),
    DS("/entry/faid/integrate/has_solidangle_correction", "bool", "scalar", "", "always", ""),
    DS("/entry/faid/integrate/normalization_factor", "float64", "scalar", "", "always", ""),
    DS("/entry/faid/integrate/polarization_factor", "string", "scalar", "", "always",
       "the factor, or `None`"),
    DS("/entry/faid/integrate/weighted_average", "bool", "scalar", "", "always", "true"),
    DS("/entry/faid/integrate/metadata", "string", "scalar", "", "always", "`null`"),
    G("/entry/data", "NXdata", "always", "the profiles: the entry's default plot"),
    AT("/entry/data@signal", "string", "always", "`I`"),
    AT("/entry/data@axes", "string [2]", "always", "`.`, `radial_axis`"),
    AT("/entry/data@interpretation", "string", "always", "`spectrum`"),
    DS("/entry/data/radial_axis", "float64", "[bins]", "per unit", "always",
       "bin centres in `integration.unit`; attrs `units` and `long_name` (see Units)"),
    DS("/entry/data/I", "float32", "[frames, bins]", "arbitrary units", "writer.profiles",
       "integrated intensity (result `I`)"),
    DS("/entry/data/I_errors", "float32", "[frames, bins]", "arbitrary units", "writer.profiles",
       "standard error of the mean (result `sigma`, pyFAI's `sem`)"),
    DS("/entry/data/norm", "float32", "[bins]", "arbitrary units", "writer.profiles",
       "pixels per bin of the first frame"),
    DS("/entry/data/std", "float32", "[frames, bins]", "arbitrary units", "writer.profiles",
       "faid: standard deviation per bin (result `std`)"),
    DS("/entry/data/count", "float32", "[frames, bins]", "", "writer.profiles",
       "faid: (fractional) pixels per bin of each frame (result `count`)"),
    DS("/entry/data/frame_id", "uint64", "[frames]", "", "always",
       "faid: the frame's id as sent (rows are in publication order); 2^64 - 1 in a row a "
       "failed write left unwritten (its floats NaN)"),
    DS("/entry/data/timestamp", "float64", "[frames]", "s", "always",
       "faid: the input header's timestamp (seconds since the epoch), NaN when absent"),
    G("/entry/monitor", "NXmonitor", "normalization_factor != 1", ""),
    DS("/entry/monitor/data", "float64", "[frames]", "", "normalization_factor != 1",
       "`integration.normalization_factor` per frame"),
    G("/entry/sample", "NXsample", "always", ""),
    DS("/entry/sample/name", "string", "scalar", "", "always", "the series' title"),
    G("/entry/peaks", "NXcollection", "writer.peaks and peak finding on",
      "the peaks in the Cheetah / CrystFEL CXI layout (CrystFEL: `peak_list = /entry/peaks`, "
      "`--peaks=cxi`)"),
    DS("/entry/peaks/nPeaks", "int32", "[frames]", "", "writer.peaks and peak finding on",
       "peaks stored in the row (at most max_peaks)"),
    DS("/entry/peaks/peakXPosRaw", "float32", "[frames, max_peaks]", "pixels",
       "writer.peaks and peak finding on",
       "fast-axis (column) centroid, pixel-index convention (the `.peaks` files'); 0 padded"),
    DS("/entry/peaks/peakYPosRaw", "float32", "[frames, max_peaks]", "pixels",
       "writer.peaks and peak finding on", "slow-axis (row) centroid"),
    DS("/entry/peaks/peakTotalIntensity", "float32", "[frames, max_peaks]", "counts",
       "writer.peaks and peak finding on", "background-subtracted integrated intensity"),
    DS("/entry/peaks/peakSigma", "float32", "[frames, max_peaks]", "counts",
       "writer.peaks and peak finding on", "faid: its sigma"),
    DS("/entry/peaks/peakSNR", "float32", "[frames, max_peaks]", "",
       "writer.peaks and peak finding on", "intensity / sigma"),
    DS("/entry/peaks/peakNPixels", "float32", "[frames, max_peaks]", "",
       "writer.peaks and peak finding on", "pixels of the peak"),
    DS("/entry/peaks/peakMaximumValue", "float32", "[frames, max_peaks]", "counts",
       "writer.peaks and peak finding on", "brightest pixel above the background"),
    DS("/entry/peaks/num_peaks", "uint64", "[frames]", "", "writer.peaks and peak finding on",
       "every peak found (may exceed nPeaks when the list was cut at max_peaks)"),
    DS("/entry/peaks/is_hit", "bool", "[frames]", "", "writer.peaks and peak finding on",
       "the frame is a hit (`peaks.min_peaks_for_hit`)"),
    DS("/entry/peaks/background", "float32", "[frames, bins]", "arbitrary units",
       "writer.peaks and peak finding on",
       "sigma-clipped background on the radial bins (result `bg_I`)"),
    DS("/entry/peaks/background_errors", "float32", "[frames, bins]", "arbitrary units",
       "writer.peaks and peak finding on", "its standard error (result `bg_sigma`)"),
    DS("/entry/peaks/hits", "uint64", "scalar", "", "writer.peaks and peak finding on",
       "hits in the file (set at each flush)"),
    DS("/entry/peaks/hit_rate", "float64", "scalar", "", "writer.peaks and peak finding on",
       "hits / frames of the file (set at each flush)"),
    G("/entry_2d", "NXentry", "writer.cake and integration.npt_azim > 0",
      "the cake as an NXazint2d entry"),
    AT("/entry_2d@default", "string", "writer.cake and integration.npt_azim > 0", "`data`"),
    DS("/entry_2d/definition", "string", "scalar", "", "writer.cake and integration.npt_azim > 0",
       "`NXazint2d`"),
    DS("/entry_2d/title", "string", "scalar", "", "writer.cake and integration.npt_azim > 0",
       "as /entry/title"),
    G("/entry_2d/data", "NXdata", "writer.cake and integration.npt_azim > 0", ""),
    AT("/entry_2d/data@signal", "string", "writer.cake and integration.npt_azim > 0", "`I`"),
    AT("/entry_2d/data@axes", "string [3]", "writer.cake and integration.npt_azim > 0",
       "`.`, `azimuthal_axis`, `radial_axis`"),
    AT("/entry_2d/data@interpretation", "string", "writer.cake and integration.npt_azim > 0",
       "`image`"),
    DS("/entry_2d/data/radial_axis", "float64", "[bins]", "per unit",
       "writer.cake and integration.npt_azim > 0", "as /entry/data/radial_axis"),
    DS("/entry_2d/data/azimuthal_axis", "float64", "[azimuthal bins]", "degrees",
       "writer.cake and integration.npt_azim > 0", "azimuthal bin centres (chi)"),
    DS("/entry_2d/data/I", "float32", "[frames, azimuthal bins, bins]", "arbitrary units",
       "writer.cake and integration.npt_azim > 0", "result `I_2d`"),
    DS("/entry_2d/data/I_errors", "float32", "[frames, azimuthal bins, bins]", "arbitrary units",
       "writer.cake and integration.npt_azim > 0", "result `sigma_2d`"),
    DS("/entry_2d/data/count", "float32", "[frames, azimuthal bins, bins]", "",
       "writer.cake and integration.npt_azim > 0", "result `count_2d`"),
    G("/entry/outputs", "NXcollection", "output.extra set",
      "the optional outputs the results carry (start `optional_outputs`), one dataset each, named "
      "after its result key: a new optional output reaches the file with no writer change"),
    DS("/entry/outputs/<key>", "float32 or int32", "[frames, ...]", "", "output.extra lists it",
       "the result array `<key>` of each frame, its type and per-frame shape the result's "
       "(`[bins]`, `[azimuthal bins, bins]`; per peak `[max_peaks]`, zero padded); "
       "e.g. `sum_normalization`"),
    LN("/entry_2d/data/frame_id", "/entry/data/frame_id",
       "writer.cake and integration.npt_azim > 0", "hard link: the same dataset"),
};

const faid_layout faid_sfile_layout = {
    .name = "series file",
    .file_name = "`<series>.h5` in `writer.directory`",
    .summary = "One file per series: the profiles (NXazint1d), the per-frame additions, the peaks "
               "(CXI arrays) and the cake (NXazint2d), written while the series runs.",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
};

/* ---- decoding the start ---------------------------------------------------------------------- */

/* Finds `key` in the top-level map, or in its map `parent`. */
static int find(const void *buf, size_t len, const char *parent, const char *key, faid_mp_obj *o,
                faid_mpr *at)
{
    faid_diag d = {0};
    if (!parent)
        return faid_proto_map_find(buf, len, key, o, at, &d);
    faid_mp_obj pm;
    faid_mpr r;
    if (faid_proto_map_find(buf, len, parent, &pm, &r, &d) || pm.type != FAID_MP_MAP)
        return FAID_ERANGE;
    for (uint32_t i = 0; i < pm.len; i++) {
        faid_mp_obj k;
        if (faid_mpr_next(&r, &k, &d))
            return FAID_EFORMAT;
        if (faid_mp_str_eq(&k, key)) {
            faid_mpr before = r;
            if (faid_mpr_next(&r, o, &d))
                return FAID_EFORMAT;
            if (at)
                *at = (o->type == FAID_MP_MAP || o->type == FAID_MP_ARRAY) ? r : before;
            return 0;
        }
        if (faid_mpr_skip(&r, &d))
            return FAID_EFORMAT;
    }
    return FAID_ERANGE;
}

static double num_or(const void *b, size_t n, const char *parent, const char *key, double dflt)
{
    faid_mp_obj o;
    double v;
    if (find(b, n, parent, key, &o, NULL) || faid_mp_to_f64(&o, &v))
        return dflt;
    return v;
}

static void str_or(const void *b, size_t n, const char *parent, const char *key, char *out,
                   size_t cap, const char *dflt)
{
    faid_mp_obj o;
    if (find(b, n, parent, key, &o, NULL) || o.type != FAID_MP_STR) {
        if (out != dflt) /* the default may be out itself (a close keeps its reason) */
            snprintf(out, cap, "%s", dflt);
        return;
    }
    size_t l = o.len < cap - 1 ? o.len : cap - 1;
    memcpy(out, o.ptr, l);
    out[l] = 0;
    for (size_t i = 0; i < l; i++) /* a NUL inside would cut the string: show it */
        if (!out[i])
            out[i] = '?';
}

/* A float64 array (start `radial`, `azimuthal`) as a malloc'd copy. */
static double *f64_array(const void *b, size_t n, const char *key, uint64_t *count)
{
    faid_mp_obj o;
    faid_mpr r;
    faid_diag d = {0};
    faid_array_view a;
    if (find(b, n, NULL, key, &o, &r) || o.type != FAID_MP_MAP)
        return NULL;
    /* faid_proto_read_array wants the reader on the map head: step back to it. */
    faid_mpr head;
    faid_mpr_init(&head, b, n);
    faid_mp_obj top;
    if (faid_mpr_next(&head, &top, &d))
        return NULL;
    for (uint32_t i = 0; i < top.len; i++) {
        faid_mp_obj k;
        if (faid_mpr_next(&head, &k, &d))
            return NULL;
        if (faid_mp_str_eq(&k, key)) {
            if (faid_proto_read_array(&head, &a, &d) || a.dtype != FAID_DT_F64 || !a.nelem)
                return NULL;
            double *v = malloc(a.nbytes);
            if (v)
                memcpy(v, a.data, a.nbytes);
            *count = a.nelem;
            return v;
        }
        if (faid_mpr_skip(&head, &d))
            return NULL;
    }
    return NULL;
}

/* ---- HDF5 helpers -----------------------------------------------------------------------------
 */

static void iso_now(char out[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
}

/* A fixed-size string dataset of `size` bytes (so that it can be rewritten in SWMR mode). */
static hid_t str_fixed(hid_t loc, const char *name, const char *value, size_t size)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, size);
    H5Tset_cset(t, H5T_CSET_UTF8);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (ds >= 0) {
        char *v = calloc(1, size + 1);
        if (!v || H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, strncpy(v, value, size)) < 0) {
            H5Dclose(ds);
            ds = -1;
        }
        free(v);
    }
    H5Sclose(sp);
    H5Tclose(t);
    return ds;
}

/* A string dataset that may be empty (read back as b"", where faid_h5_dset_str writes " "). */
static int str_fixed_close(hid_t loc, const char *name, const char *value)
{
    hid_t ds = str_fixed(loc, name, value, value[0] ? strlen(value) : 1);
    if (ds < 0)
        return FAID_EIO;
    H5Dclose(ds);
    return 0;
}

static int str_rewrite(hid_t ds, const char *value)
{
    hid_t t = H5Dget_type(ds);
    size_t size = H5Tget_size(t);
    char *v = calloc(1, size + 1);
    herr_t rc = v ? H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, strncpy(v, value, size)) : -1;
    free(v);
    H5Tclose(t);
    return rc < 0 ? FAID_EIO : 0;
}

/* An attribute holding an array of variable-length strings (NXdata `axes`, as h5py writes a list
 * of str). */
static int attr_strs(hid_t obj, const char *name, const char *const *v, int n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hsize_t dim = (hsize_t)n;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, t, v) >= 0 ? 0 : FAID_EIO;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return rc;
}

/* A scalar numeric dataset; returns its id (kept open) or < 0. */
static hid_t scalar(hid_t loc, const char *name, hid_t type, const void *v, const char *units)
{
    return faid_h5_dset(loc, name, type, type, 0, 0, v, units);
}

static int scalar_close(hid_t loc, const char *name, hid_t type, const void *v, const char *units)
{
    hid_t ds = scalar(loc, name, type, v, units);
    if (ds < 0)
        return FAID_EIO;
    H5Dclose(ds);
    return 0;
}

static int bool_ds(faid_sfile *f, hid_t loc, const char *name, int v)
{
    int8_t b = v ? 1 : 0;
    return scalar_close(loc, name, f->bool_type, &b, NULL);
}

/* The `doc` attribute pyFAI puts on the integrate collection's datasets. */
static int doc(hid_t loc, const char *name, const char *text)
{
    hid_t o = H5Oopen(loc, name, H5P_DEFAULT);
    if (o < 0)
        return FAID_EIO;
    int rc = faid_h5_attr_str(o, "doc", text);
    H5Oclose(o);
    return rc;
}

/* A 1D float64 dataset (axes). */
static int f64_vec(hid_t loc, const char *name, const double *v, uint64_t n, const char *long_name,
                   const char *units)
{
    hid_t ds = faid_h5_dset(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, n, v, NULL);
    if (ds < 0)
        return FAID_EIO;
    int rc = faid_h5_attr_str(ds, "long_name", long_name) || faid_h5_attr_str(ds, "units", units)
                 ? FAID_EIO
                 : 0;
    H5Dclose(ds);
    return rc;
}

/* A per-frame dataset [0, row...], extendible along frames, chunked by blocks. */
static int make_col(faid_sfile *f, int id, hid_t loc, const char *name, hid_t type, int rank,
                    hsize_t r0, hsize_t r1, const char *long_name, const char *units)
{
    col *c = &f->c[id];
    c->type = type;
    c->esize = H5Tget_size(type);
    c->rank = rank;
    c->row[0] = r0;
    c->row[1] = r1;
    c->row_elems = rank == 0 ? 1 : rank == 1 ? (size_t)r0 : (size_t)(r0 * r1);
    size_t rowb = c->row_elems * c->esize;
    c->buf = calloc((size_t)f->block, rowb);
    if (!c->buf)
        return FAID_ENOMEM;
    hsize_t inner[2] = {r0, r1}, chunk_rows = (hsize_t)f->block;
    while (chunk_rows > 1 && chunk_rows * rowb > CHUNK_BYTES)
        chunk_rows /= 2;
    /* Rows a failed write left unwritten (the extent can reach the file before the data):
     * NaN, frame_id 2^64 - 1, never a plausible value (docs/output-files.md). */
    float nan32 = NAN;
    double nan64 = NAN;
    uint64_t none = UINT64_MAX;
    const void *fill = H5Tequal(type, H5T_IEEE_F32LE) > 0   ? (const void *)&nan32
                       : H5Tequal(type, H5T_IEEE_F64LE) > 0 ? (const void *)&nan64
                       : id == C_FRAME_ID                   ? (const void *)&none
                                                            : NULL;
    c->dset = faid_h5_growing(loc, name, type, rank + 1, inner, chunk_rows, fill, 0);
    if (c->dset < 0)
        return FAID_EIO;
    if ((long_name && faid_h5_attr_str(c->dset, "long_name", long_name)) ||
        (units && faid_h5_attr_str(c->dset, "units", units)))
        return FAID_EIO;
    return 0;
}

static int write_col(faid_sfile *f, col *c, int n)
{
    hsize_t at = f->written;
    hsize_t dims[3] = {at + (hsize_t)n, c->row[0], c->row[1]};
    if (H5Dset_extent(c->dset, dims) < 0)
        return FAID_EIO;
    hid_t fs = H5Dget_space(c->dset);
    hsize_t start[3] = {at, 0, 0}, count[3] = {(hsize_t)n, c->row[0], c->row[1]};
    hid_t ms = H5Screate_simple(c->rank + 1, count, NULL);
    herr_t rc =
        fs >= 0 && ms >= 0 ? H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) : -1;
    if (rc >= 0)
        rc = H5Dwrite(c->dset, c->type, ms, fs, H5P_DEFAULT, c->buf);
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    if (rc < 0)
        return FAID_EIO;
    f->bytes += (uint64_t)n * c->row_elems * c->esize;
    return 0;
}

/* A failed write (full disk, file size limit, I/O error) freezes the file, as the hits file does
 * (faid_nxmx.c): nothing more is written to it, and at close libhdf5's last metadata writes go to
 * a memory file (memfd) put in place of the file's descriptor. The file keeps what its last
 * successful flush made it, readable (SWMR readers, or after h5clear -s); letting libhdf5 go on
 * writing after the failure could leave a superblock that announces more than the file holds. */
static int fail_io(faid_sfile *f, faid_diag *d, int err, const char *what)
{
    if (!err)
        err = EIO;
    f->failed = 1;
    f->fail_errno = err;
    faid_fail(d, FAID_EIO, "%s: %s: %s", f->path, what, strerror(err));
    errno = err;
    return FAID_EIO;
}

static int frozen(faid_sfile *f, faid_diag *d)
{
    faid_fail(d, FAID_EIO,
              "%s: not written: an earlier write to this file failed (it keeps the %llu frames of "
              "its last flush)",
              f->path, (unsigned long long)f->written);
    errno = EIO;
    return FAID_EIO;
}

/* Puts a memory file in place of the frozen file's descriptor before libhdf5 closes it. Under a
 * file size limit (EFBIG) the memory file has the same limit and libhdf5's close failed again,
 * keeping that file's structures (1040 bytes leaked per file, LeakSanitizer in
 * integration.writer::test_file_size_limit): there /dev/null takes the writes (the limit is for
 * regular files), libhdf5 reads none back at close. */
static void divert(faid_sfile *f)
{
    int *fd = NULL;
    int mem = f->fail_errno == EFBIG ? -1 : memfd_create("faid-frozen-series-file", MFD_CLOEXEC);
    if (mem < 0)
        mem = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (mem >= 0 && H5Fget_vfd_handle(f->file, H5P_DEFAULT, (void **)&fd) >= 0 && fd && *fd >= 0)
        dup2(mem, *fd);
    if (mem >= 0)
        close(mem);
}

/* True (and d filled) when the file is no longer at its path: the directory was removed or the
 * file unlinked or replaced. Writing on would succeed into a file nobody can open. */
static int gone(faid_sfile *f, faid_diag *d)
{
    struct stat st;
    if (stat(f->path, &st) == 0 && st.st_dev == f->dev && st.st_ino == f->ino)
        return 0;
    faid_fail(d, FAID_EIO, "%s: the file was removed (or its directory) while written", f->path);
    errno = ESTALE;
    f->failed = 1;
    return 1;
}

static int write_block(faid_sfile *f, faid_diag *d)
{
    if (!f->nbuf)
        return 0;
    for (int i = 0; i < C_N; i++) {
        if (f->c[i].dset < 0)
            continue;
        errno = 0;
        if (write_col(f, &f->c[i], f->nbuf))
            return fail_io(f, d, errno, "block write failed");
    }
    f->written += (uint64_t)f->nbuf;
    f->nbuf = 0;
    return 0;
}

static void close_all(faid_sfile *f)
{
    for (int i = 0; i < C_N; i++) {
        if (f->c[i].dset >= 0)
            H5Dclose(f->c[i].dset);
        f->c[i].dset = -1;
        free(f->c[i].buf);
        f->c[i].buf = NULL;
    }
    hid_t *ids[] = {&f->norm,        &f->end_time, &f->end_reason, &f->frames_missing,
                    &f->frame_count, &f->hit_rate, &f->nhits};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (*ids[i] >= 0)
            H5Dclose(*ids[i]);
        *ids[i] = -1;
    }
    if (f->bool_type >= 0)
        H5Tclose(f->bool_type);
    f->bool_type = -1;
    if (f->file >= 0)
        H5Fclose(f->file);
    f->file = -1;
}

/* ---- the layout ----------------------------------------------------------------------------- */

typedef struct start_view {
    char version[64], uid[256], unit[32], hash[32], detector[64], split[16], error_model[16];
    char mask_file[32], dark_file[32], flat_file[32], devices[256];
    uint64_t series_id, setup_version;
    double dist, poni1, poni2, rot1, rot2, rot3, wavelength, pixel1, pixel2;
    double polarization, normalization;
    int rows, cols, solid_angle, has_polarization, npt, npt_azim;
    double *radial, *azimuthal;
    uint64_t nradial, nazimuthal;
    int has_peaks;
    int64_t max_peaks;
    char xkey[SFILE_XMAX][32]; /* optional_outputs */
    int nx;
} start_view;

static int read_start(const void *b, size_t n, start_view *s, faid_diag *d)
{
    faid_mp_obj o;
    if (find(b, n, NULL, "type", &o, NULL) || !faid_mp_str_eq(&o, "start"))
        return faid_fail(d, FAID_EFORMAT, "start message: type is not \"start\"");
    str_or(b, n, NULL, "software_version", s->version, sizeof s->version, "");
    str_or(b, n, NULL, "series_unique_id", s->uid, sizeof s->uid, "");
    str_or(b, n, NULL, "unit", s->unit, sizeof s->unit, "");
    str_or(b, n, NULL, "config_hash", s->hash, sizeof s->hash, "");
    str_or(b, n, "geometry", "detector", s->detector, sizeof s->detector, "");
    str_or(b, n, "parameters", "split", s->split, sizeof s->split, "");
    str_or(b, n, "parameters", "error_model", s->error_model, sizeof s->error_model, "");
    str_or(b, n, "parameters", "mask_file", s->mask_file, sizeof s->mask_file, "");
    str_or(b, n, "parameters", "dark_file", s->dark_file, sizeof s->dark_file, "");
    str_or(b, n, "parameters", "flat_file", s->flat_file, sizeof s->flat_file, "");
    s->series_id = (uint64_t)num_or(b, n, NULL, "series_id", 0);
    if (!find(b, n, NULL, "series_id", &o, NULL))
        faid_mp_to_u64(&o, &s->series_id);
    if (!find(b, n, NULL, "setup_version", &o, NULL))
        faid_mp_to_u64(&o, &s->setup_version);
    s->dist = num_or(b, n, "geometry", "dist", NAN);
    s->poni1 = num_or(b, n, "geometry", "poni1", NAN);
    s->poni2 = num_or(b, n, "geometry", "poni2", NAN);
    s->rot1 = num_or(b, n, "geometry", "rot1", 0);
    s->rot2 = num_or(b, n, "geometry", "rot2", 0);
    s->rot3 = num_or(b, n, "geometry", "rot3", 0);
    s->wavelength = num_or(b, n, "geometry", "wavelength", NAN);
    s->pixel1 = num_or(b, n, "geometry", "pixel1", NAN);
    s->pixel2 = num_or(b, n, "geometry", "pixel2", NAN);
    s->rows = (int)num_or(b, n, "geometry", "rows", 0);
    s->cols = (int)num_or(b, n, "geometry", "cols", 0);
    s->npt = (int)num_or(b, n, "parameters", "npt", 0);
    s->npt_azim = (int)num_or(b, n, "parameters", "npt_azim", 0);
    s->solid_angle =
        !find(b, n, "parameters", "solid_angle", &o, NULL) &&
        ((o.type == FAID_MP_BOOL && o.b) || num_or(b, n, "parameters", "solid_angle", 0));
    s->has_polarization =
        !find(b, n, "parameters", "polarization_factor", &o, NULL) && o.type == FAID_MP_FLOAT;
    s->polarization = num_or(b, n, "parameters", "polarization_factor", 0);
    s->normalization = num_or(b, n, "parameters", "normalization_factor", 1);
    faid_mp_obj dv;
    faid_mpr r;
    if (!find(b, n, NULL, "devices", &dv, &r) && dv.type == FAID_MP_ARRAY) {
        size_t at = 0;
        faid_diag dd = {0};
        for (uint32_t i = 0; i < dv.len; i++) {
            faid_mp_obj e;
            if (faid_mpr_next(&r, &e, &dd) || e.type != FAID_MP_STR)
                break;
            int w = snprintf(s->devices + at, sizeof s->devices - at, "%s%.*s", i ? ", " : "",
                             (int)e.len, (const char *)e.ptr);
            if (w < 0 || (size_t)w >= sizeof s->devices - at)
                break;
            at += (size_t)w;
        }
    }
    faid_mp_obj xv;
    faid_mpr xr;
    if (!find(b, n, NULL, "optional_outputs", &xv, &xr) && xv.type == FAID_MP_ARRAY) {
        faid_diag dd = {0};
        for (uint32_t i = 0; i < xv.len && s->nx < SFILE_XMAX; i++) {
            faid_mp_obj e;
            if (faid_mpr_next(&xr, &e, &dd) || e.type != FAID_MP_STR)
                break;
            if (e.len < sizeof s->xkey[0])
                snprintf(s->xkey[s->nx++], sizeof s->xkey[0], "%.*s", (int)e.len,
                         (const char *)e.ptr);
        }
    }
    s->has_peaks = !find(b, n, NULL, "peaks", &o, NULL) && o.type == FAID_MP_MAP;
    s->max_peaks = (int64_t)num_or(b, n, "peaks", "max_num_peaks", 0);
    s->radial = f64_array(b, n, "radial", &s->nradial);
    if (s->npt_azim > 0)
        s->azimuthal = f64_array(b, n, "azimuthal", &s->nazimuthal);
    if (!s->radial || s->npt < 1 || s->nradial != (uint64_t)s->npt)
        return faid_fail(d, FAID_EFORMAT, "start message: `radial` is not %d float64 bin centres",
                         s->npt);
    if (s->npt_azim > 0 && (!s->azimuthal || s->nazimuthal != (uint64_t)s->npt_azim))
        return faid_fail(d, FAID_EFORMAT,
                         "start message: `azimuthal` is not %d float64 bin centres", s->npt_azim);
    if (!(s->wavelength > 0))
        return faid_fail(d, FAID_EFORMAT, "start message: geometry.wavelength missing");
    if (s->has_peaks && (s->max_peaks < 1 || s->max_peaks > 1000000))
        return faid_fail(d, FAID_EFORMAT, "start message: peaks.max_num_peaks missing");
    return 0;
}

/* Long name and units of faid's radial units: NXazint1d names 2theta (degrees) and q
 * (1/angstrom); the other units are written in their own unit, labelled. */
static void unit_labels(const char *unit, const char **long_name, const char **units)
{
    static const struct {
        const char *name, *long_name, *units;
    } t[] = {
        {"2th_deg", "2theta", "degrees"}, {"q_A^-1", "q", "1/angstrom"}, {"q_nm^-1", "q", "1/nm"},
        {"2th_rad", "2theta", "radians"}, {"r_mm", "r", "mm"},           {"r_m", "r", "m"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(unit, t[i].name) == 0) {
            *long_name = t[i].long_name;
            *units = t[i].units;
            return;
        }
    *long_name = "radial";
    *units = unit;
}

/* /entry/outputs: a column per optional output the start announces, shaped by its declaration
 * (engine/faid_outputs.h): bins, the cake, the background's bins, the peaks (max_peaks). An array
 * whose extent this series does not have (a cake without one), a scalar (results keep no scalar
 * by key) or a key of a newer faid is left out. */
static int write_outputs(faid_sfile *f, hid_t e, const start_view *s)
{
    if (!s->nx)
        return 0;
    hid_t og = faid_h5_group(e, "outputs", "NXcollection");
    if (og < 0)
        return 1;
    int bad = 0;
    for (int i = 0; i < s->nx && !bad; i++) {
        const faid_output_decl *o =
            faid_outputs_find(faid_key_lookup(s->xkey[i], strlen(s->xkey[i])));
        if (!o || !o->optional || (o->type != FAID_OA_F32 && o->type != FAID_OA_I32))
            continue;
        hsize_t r0 = (hsize_t)s->npt, r1 = 0;
        int rank = 1;
        if ((o->extent == FAID_OX_CAKE && s->npt_azim < 1) ||
            ((o->extent == FAID_OX_BG || o->extent == FAID_OX_PEAKS) && !f->has_peaks) ||
            o->extent == FAID_OX_SCALAR)
            continue;
        if (o->extent == FAID_OX_CAKE) {
            rank = 2;
            r0 = (hsize_t)s->npt_azim;
            r1 = (hsize_t)s->npt;
        } else if (o->extent == FAID_OX_PEAKS) {
            r0 = (hsize_t)f->max_peaks;
        }
        bad |= make_col(f, C_X0 + f->nx, og, s->xkey[i],
                        o->type == FAID_OA_F32 ? H5T_IEEE_F32LE : H5T_STD_I32LE, rank, r0, r1, NULL,
                        NULL);
        snprintf(f->xkey[f->nx], sizeof f->xkey[0], "%s", s->xkey[i]);
        f->xpeaks[f->nx++] = o->extent == FAID_OX_PEAKS;
    }
    H5Gclose(og);
    return bad;
}

static int write_layout(faid_sfile *f, const faid_sfile_params *p, const start_view *s,
                        const void *start, size_t len, faid_diag *d)
{
    hid_t fl = f->file;
    char now[32], title[300], text[1024];
    iso_now(now);
    if (p->title)
        snprintf(title, sizeof title, "%s", p->title);
    else if (s->uid[0])
        snprintf(title, sizeof title, "%s", s->uid);
    else
        snprintf(title, sizeof title, "series %llu", (unsigned long long)s->series_id);
    const char *base = strrchr(f->path, '/');
    base = base ? base + 1 : f->path;
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    char h5v[32];
    snprintf(h5v, sizeof h5v, "%u.%u.%u", maj, min, rel);
    int bad = faid_h5_attr_str(fl, "NX_class", "NXroot") ||
              faid_h5_attr_str(fl, "default", "entry") || faid_h5_attr_str(fl, "creator", "faid") ||
              faid_h5_attr_str(fl, "file_name", base) || faid_h5_attr_str(fl, "file_time", now) ||
              faid_h5_attr_str(fl, "file_update_time", now) ||
              faid_h5_attr_str(fl, "HDF5_Version", h5v);

    hid_t e = faid_h5_group(fl, "entry", "NXentry");
    if (e < 0)
        return faid_fail(d, FAID_EIO, "%s: /entry not created", f->path);
    bad |= faid_h5_attr_str(e, "default", "data") ||
           faid_h5_dset_str(e, "definition", "NXazint1d") || faid_h5_dset_str(e, "title", title) ||
           faid_h5_dset_str(e, "program_name", "faid") || faid_h5_dset_str(e, "start_time", now);
    f->end_time = str_fixed(e, "end_time", now, 32);
    bad |= f->end_time < 0;
    bad |= bool_ds(f, e, "solid_angle_applied", s->solid_angle) ||
           bool_ds(f, e, "polarization_applied", s->has_polarization) ||
           bool_ds(f, e, "normalization_applied", 1) ||
           bool_ds(f, e, "monitor_applied", s->normalization != 1.0);

    hid_t ins = faid_h5_group(e, "instrument", "NXinstrument");
    bad |= ins < 0;
    if (ins >= 0) {
        bad |= faid_h5_dset_str(ins, "name", s->detector[0] ? s->detector : "detector");
        hid_t src = faid_h5_group(ins, "source", "NXsource");
        bad |= src < 0 || faid_h5_dset_str(src, "name", "source") ||
               faid_h5_dset_str(src, "type", "synchrotron") ||
               faid_h5_dset_str(src, "probe", "x-ray");
        if (src >= 0)
            H5Gclose(src);
        hid_t mono = faid_h5_group(ins, "monochromator", "NXmonochromator");
        double wl_a = s->wavelength * 1e10;
        /* hc = 12.398419843320026 keV angstrom (CODATA 2018) */
        double kev = 12.398419843320026 / wl_a;
        bad |= mono < 0 || scalar_close(mono, "wavelength", H5T_NATIVE_DOUBLE, &wl_a, "angstrom") ||
               scalar_close(mono, "energy", H5T_NATIVE_DOUBLE, &kev, "keV");
        if (mono >= 0)
            H5Gclose(mono);
        H5Gclose(ins);
    }

    hid_t pr = faid_h5_group(e, "faid", "NXprocess");
    bad |= pr < 0;
    if (pr >= 0) {
        int64_t one = 1;
        uint64_t zero = 0;
        bad |= faid_h5_dset_str(pr, "program", "faid") ||
               faid_h5_dset_str(pr, "version", s->version) || faid_h5_dset_str(pr, "date", now) ||
               scalar_close(pr, "sequence_index", H5T_NATIVE_INT64, &one, NULL) ||
               scalar_close(pr, "series_id", H5T_NATIVE_UINT64, &s->series_id, NULL) ||
               str_fixed_close(pr, "series_unique_id", s->uid) ||
               scalar_close(pr, "setup_version", H5T_NATIVE_UINT64, &s->setup_version, NULL) ||
               faid_h5_dset_str(pr, "config_hash", s->hash);
        f->end_reason = str_fixed(pr, "end_reason", "open", 16);
        f->frame_count = scalar(pr, "frames", H5T_NATIVE_UINT64, &zero, NULL);
        f->frames_missing = scalar(pr, "frames_missing", H5T_NATIVE_UINT64, &zero, NULL);
        bad |= f->end_reason < 0 || f->frame_count < 0 || f->frames_missing < 0;
        hid_t poni = faid_h5_group(pr, "poni", "NXnote");
        snprintf(text, sizeof text,
                 "{\n  \"poni_version\": 2.1,\n  \"dist\": %.17g,\n  \"poni1\": %.17g,\n  "
                 "\"poni2\": %.17g,\n  \"rot1\": %.17g,\n  \"rot2\": %.17g,\n  \"rot3\": %.17g,\n  "
                 "\"detector\": \"%s\",\n  \"detector_config\": {\n    \"pixel1\": %.17g,\n    "
                 "\"pixel2\": %.17g,\n    \"max_shape\": [%d, %d],\n    \"orientation\": 3\n  "
                 "},\n  \"wavelength\": %.17g\n}",
                 s->dist, s->poni1, s->poni2, s->rot1, s->rot2, s->rot3, "Detector", s->pixel1,
                 s->pixel2, s->rows, s->cols, s->wavelength);
        bad |= poni < 0 || faid_h5_dset_str(poni, "format", "text/json") ||
               faid_h5_dset_str(poni, "data", text);
        if (poni >= 0)
            H5Gclose(poni);
        hid_t cf = faid_h5_group(pr, "configuration", "NXnote");
        faid_mp_obj o;
        char *yaml = NULL;
        if (!find(start, len, NULL, "config", &o, NULL) && o.type == FAID_MP_STR) {
            yaml = malloc((size_t)o.len + 1);
            if (yaml) {
                memcpy(yaml, o.ptr, o.len);
                yaml[o.len] = 0;
            }
        }
        bad |= cf < 0 || faid_h5_dset_str(cf, "format", "text/yaml") ||
               faid_h5_dset_str(cf, "data", yaml ? yaml : "");
        free(yaml);
        if (cf >= 0)
            H5Gclose(cf);
        hid_t ig = faid_h5_group(pr, "integrate", "NXcollection");
        snprintf(text, sizeof text,
                 "{\"dim\": %d, \"split\": \"%s\", \"algo\": \"csr\", \"impl\": \"faid\", "
                 "\"target\": null}",
                 1, s->split);
        char pol[64];
        if (s->has_polarization)
            snprintf(pol, sizeof pol, "%.17g", s->polarization);
        else
            snprintf(pol, sizeof pol, "None");
        bad |=
            ig < 0 || faid_h5_dset_str(ig, "error_model", s->error_model) ||
            faid_h5_dset_str(ig, "integration_method", text) ||
            faid_h5_dset_str(ig, "compute_engine", s->devices[0] ? s->devices : "faid") ||
            faid_h5_dset_str(ig, "method_called", "faid") ||
            bool_ds(f, ig, "has_dark_correction", s->dark_file[0] != 0) ||
            bool_ds(f, ig, "has_flat_correction", s->flat_file[0] != 0) ||
            bool_ds(f, ig, "has_mask_applied", 1) ||
            bool_ds(f, ig, "has_solidangle_correction", s->solid_angle) ||
            scalar_close(ig, "normalization_factor", H5T_NATIVE_DOUBLE, &s->normalization, NULL) ||
            faid_h5_dset_str(ig, "polarization_factor", pol) ||
            bool_ds(f, ig, "weighted_average", 1) || faid_h5_dset_str(ig, "metadata", "null");
        bad |= ig < 0 ||
               doc(ig, "polarization_factor",
                   "Between -1 and +1, 0 for circular, None for no-correction") ||
               doc(ig, "normalization_factor",
                   "User-provided normalization factor, usually to account for incident flux") ||
               doc(ig, "method_called",
                   "name of the function called (faid: the daemon's "
                   "reduction, as `faidctl process`)") ||
               doc(ig, "compute_engine", "the compute devices that reduced the frames") ||
               doc(ig, "error_model", "how is variance assessed from signal ?") ||
               doc(ig, "weighted_average",
                   "use the weighted average (as in -ng engines) or the "
                   "unweighted one (as in -legacy) ?") ||
               doc(ig, "integration_method",
                   "dict with the type of splitting, the kind of algorithm and its "
                   "implementation");
        if (ig >= 0)
            H5Gclose(ig);
        H5Gclose(pr);
    }

    const char *ln, *un;
    unit_labels(s->unit, &ln, &un);
    hsize_t npt = (hsize_t)s->npt;
    hid_t dg = faid_h5_group(e, "data", "NXdata");
    bad |= dg < 0;
    if (dg >= 0) {
        static const char *const axes[] = {".", "radial_axis"};
        bad |= faid_h5_attr_str(dg, "signal", "I") || attr_strs(dg, "axes", axes, 2) ||
               faid_h5_attr_str(dg, "interpretation", "spectrum") ||
               f64_vec(dg, "radial_axis", s->radial, npt, ln, un);
        if (f->profiles) {
            bad |= make_col(f, C_I, dg, "I", H5T_IEEE_F32LE, 1, npt, 0, "intensity",
                            "arbitrary units") ||
                   make_col(f, C_SIGMA, dg, "I_errors", H5T_IEEE_F32LE, 1, npt, 0,
                            "estimated errors on intensity", "arbitrary units");
            f->norm = faid_h5_dset(dg, "norm", H5T_IEEE_F32LE, 0, 1, npt, NULL, NULL);
            bad |= f->norm < 0 ||
                   faid_h5_attr_str(f->norm, "long_name",
                                    "number of pixels contributing to the corresponding bin") ||
                   faid_h5_attr_str(f->norm, "units", "arbitrary units");
            bad |= make_col(f, C_STD, dg, "std", H5T_IEEE_F32LE, 1, npt, 0, "standard deviation",
                            "arbitrary units") ||
                   make_col(f, C_COUNT, dg, "count", H5T_IEEE_F32LE, 1, npt, 0,
                            "pixels contributing to the bin", NULL);
        }
        bad |= make_col(f, C_FRAME_ID, dg, "frame_id", H5T_STD_U64LE, 0, 0, 0, "frame id", NULL) ||
               make_col(f, C_TIMESTAMP, dg, "timestamp", H5T_IEEE_F64LE, 0, 0, 0,
                        "input timestamp (seconds since the epoch)", "s");
        H5Gclose(dg);
    }
    if (s->normalization != 1.0) {
        hid_t mg = faid_h5_group(e, "monitor", "NXmonitor");
        bad |= mg < 0 || make_col(f, C_MONITOR, mg, "data", H5T_IEEE_F64LE, 0, 0, 0, NULL, NULL);
        if (mg >= 0)
            H5Gclose(mg);
        f->has_monitor = 1;
        f->monitor = s->normalization;
    }
    hid_t sg = faid_h5_group(e, "sample", "NXsample");
    bad |= sg < 0 || faid_h5_dset_str(sg, "name", title);
    if (sg >= 0)
        H5Gclose(sg);

    if (f->has_peaks) {
        hsize_t mp = (hsize_t)f->max_peaks;
        hid_t pg = faid_h5_group(e, "peaks", "NXcollection");
        bad |= pg < 0;
        if (pg >= 0) {
            double zero = 0;
            uint64_t z = 0;
            bad |=
                make_col(f, C_NPEAKS, pg, "nPeaks", H5T_STD_I32LE, 0, 0, 0, NULL, NULL) ||
                make_col(f, C_PX, pg, "peakXPosRaw", H5T_IEEE_F32LE, 1, mp, 0, NULL, "pixels") ||
                make_col(f, C_PY, pg, "peakYPosRaw", H5T_IEEE_F32LE, 1, mp, 0, NULL, "pixels") ||
                make_col(f, C_PINT, pg, "peakTotalIntensity", H5T_IEEE_F32LE, 1, mp, 0, NULL,
                         "counts") ||
                make_col(f, C_PSIGMA, pg, "peakSigma", H5T_IEEE_F32LE, 1, mp, 0, NULL, "counts") ||
                make_col(f, C_PSNR, pg, "peakSNR", H5T_IEEE_F32LE, 1, mp, 0, NULL, NULL) ||
                make_col(f, C_PNPIX, pg, "peakNPixels", H5T_IEEE_F32LE, 1, mp, 0, NULL, NULL) ||
                make_col(f, C_PMAX, pg, "peakMaximumValue", H5T_IEEE_F32LE, 1, mp, 0, NULL,
                         "counts") ||
                make_col(f, C_NUM_PEAKS, pg, "num_peaks", H5T_STD_U64LE, 0, 0, 0, NULL, NULL) ||
                make_col(f, C_IS_HIT, pg, "is_hit", f->bool_type, 0, 0, 0, NULL, NULL) ||
                make_col(f, C_BG, pg, "background", H5T_IEEE_F32LE, 1, npt, 0,
                         "sigma-clipped background", "arbitrary units") ||
                make_col(f, C_BG_ERR, pg, "background_errors", H5T_IEEE_F32LE, 1, npt, 0,
                         "standard error of the background", "arbitrary units");
            f->nhits = scalar(pg, "hits", H5T_NATIVE_UINT64, &z, NULL);
            f->hit_rate = scalar(pg, "hit_rate", H5T_NATIVE_DOUBLE, &zero, NULL);
            bad |= f->nhits < 0 || f->hit_rate < 0;
            H5Gclose(pg);
        }
    }
    bad |= write_outputs(f, e, s);
    H5Gclose(e);

    if (f->has_cake) {
        hid_t e2 = faid_h5_group(fl, "entry_2d", "NXentry");
        bad |= e2 < 0;
        if (e2 >= 0) {
            bad |= faid_h5_attr_str(e2, "default", "data") ||
                   faid_h5_dset_str(e2, "definition", "NXazint2d") ||
                   faid_h5_dset_str(e2, "title", title);
            hid_t g2 = faid_h5_group(e2, "data", "NXdata");
            bad |= g2 < 0;
            if (g2 >= 0) {
                static const char *const axes2[] = {".", "azimuthal_axis", "radial_axis"};
                hsize_t na = (hsize_t)s->npt_azim;
                bad |= faid_h5_attr_str(g2, "signal", "I") || attr_strs(g2, "axes", axes2, 3) ||
                       faid_h5_attr_str(g2, "interpretation", "image") ||
                       f64_vec(g2, "radial_axis", s->radial, npt, ln, un) ||
                       f64_vec(g2, "azimuthal_axis", s->azimuthal, na, "chi", "degrees") ||
                       make_col(f, C_I2D, g2, "I", H5T_IEEE_F32LE, 2, na, npt, "intensity",
                                "arbitrary units") ||
                       make_col(f, C_SIGMA2D, g2, "I_errors", H5T_IEEE_F32LE, 2, na, npt,
                                "estimated errors on intensity", "arbitrary units") ||
                       make_col(f, C_COUNT2D, g2, "count", H5T_IEEE_F32LE, 2, na, npt,
                                "pixels contributing to the bin", NULL);
                bad |= H5Lcreate_hard(fl, "/entry/data/frame_id", g2, "frame_id", H5P_DEFAULT,
                                      H5P_DEFAULT) < 0;
                H5Gclose(g2);
            }
            H5Gclose(e2);
        }
    }
    if (bad)
        return faid_fail(d, FAID_EIO, "%s: layout not written: %s", f->path,
                         errno ? strerror(errno) : "HDF5 error");
    return 0;
}

int faid_sfile_open(faid_sfile **out, const faid_sfile_params *p, const void *start, size_t len,
                    faid_diag *d)
{
    *out = NULL;
    if (!p || !p->path || !start)
        return faid_fail(d, FAID_EINVAL, "series file: no path or start message");
    start_view s;
    memset(&s, 0, sizeof s);
    int rc = read_start(start, len, &s, d);
    if (rc) {
        free(s.radial);
        free(s.azimuthal);
        faid_diag_prefix(d, "%s: ", p->path);
        return rc;
    }
    faid_sfile *f = calloc(1, sizeof *f);
    if (!f) {
        free(s.radial);
        free(s.azimuthal);
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory", p->path);
    }
    snprintf(f->path, sizeof f->path, "%s", p->path);
    f->file = f->bool_type = -1;
    f->norm = f->end_time = f->end_reason = f->frames_missing = f->frame_count = f->hit_rate =
        f->nhits = -1;
    for (int i = 0; i < C_N; i++)
        f->c[i].dset = -1;
    f->block = p->block_frames > 0 ? p->block_frames : DEFAULT_BLOCK;
    f->series_id = s.series_id;
    f->setup_version = s.setup_version;
    f->npt = (uint64_t)s.npt;
    f->npt_azim = (uint64_t)(s.npt_azim > 0 ? s.npt_azim : 0);
    f->profiles = p->profiles;
    f->has_peaks = p->peaks && s.has_peaks;
    f->max_peaks = (uint64_t)(s.max_peaks > 0 ? s.max_peaks : 0);
    f->has_cake = p->cake && s.npt_azim > 0;
    errno = 0;
    f->file = faid_h5_create(p->path, d);
    int err = errno;
    if (f->file < 0) {
        f->file = -1;
        free(s.radial);
        free(s.azimuthal);
        free(f);
        errno = err;
        return FAID_EIO;
    }
    struct stat st;
    if (stat(p->path, &st) == 0) {
        f->dev = st.st_dev;
        f->ino = st.st_ino;
    }
    f->bool_type = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t v0 = 0, v1 = 1;
    H5Tenum_insert(f->bool_type, "FALSE", &v0);
    H5Tenum_insert(f->bool_type, "TRUE", &v1);
    errno = 0;
    rc = write_layout(f, p, &s, start, len, d);
    free(s.radial);
    free(s.azimuthal);
    if (!rc && p->swmr && H5Fstart_swmr_write(f->file) < 0)
        rc = faid_fail(d, FAID_EIO, "%s: SWMR write mode not started", f->path);
    if (!rc && H5Fflush(f->file, H5F_SCOPE_GLOBAL) < 0)
        rc = fail_io(f, d, errno, "layout not flushed");
    if (rc) {
        err = errno;
        close_all(f);
        unlink(f->path);
        free(f);
        errno = err;
        return rc;
    }
    *out = f;
    return 0;
}

/* ---- appending ------------------------------------------------------------------------------ */

static int take(const faid_array_view *a, uint64_t want, void *dst, faid_dtype t)
{
    if (a->dtype != t || a->nelem != want)
        return FAID_EFORMAT;
    memcpy(dst, a->data, a->nbytes);
    return 0;
}

/* An optional output's row: the array under its key, of the column's type, the row's length
 * (per peak: at most max_peaks, zero padded). */
static int take_output(const faid_sfile *f, int i, const faid_out_msg *m, uint8_t *dst)
{
    const col *c = &f->c[C_X0 + i];
    const faid_array_view *a = faid_out_msg_array(m, f->xkey[i]);
    const faid_dtype t = H5Tequal(c->type, H5T_IEEE_F32LE) > 0 ? FAID_DT_F32 : FAID_DT_I32;
    if (!a)
        return FAID_EFORMAT;
    if (!f->xpeaks[i])
        return take(a, c->row_elems, dst, t);
    if (a->dtype != t)
        return FAID_EFORMAT;
    const uint64_t n = a->nelem < c->row_elems ? a->nelem : c->row_elems;
    memset(dst, 0, c->row_elems * c->esize);
    memcpy(dst, a->data, (size_t)n * c->esize);
    return 0;
}

/* Peak column k of the row: the first n values of a (float32, or int32 converted), zero padded. */
static void take_peaks(const faid_array_view *a, uint64_t n, uint64_t width, float *dst)
{
    memset(dst, 0, width * sizeof *dst);
    for (uint64_t i = 0; i < n && i < a->nelem; i++) {
        if (a->dtype == FAID_DT_F32) {
            memcpy(&dst[i], a->data + 4 * i, 4);
        } else if (a->dtype == FAID_DT_I32) {
            int32_t v;
            memcpy(&v, a->data + 4 * i, 4);
            dst[i] = (float)v;
        }
    }
}

int faid_sfile_append(faid_sfile *f, const void *result, size_t len, faid_diag *d)
{
    if (f->failed)
        return frozen(f, d);
    faid_out_msg *m = malloc(sizeof *m);
    if (!m)
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory", f->path);
    int rc = faid_proto_decode_output(result, len, m, d);
    if (rc || m->type != FAID_OUT_RESULT) {
        free(m);
        if (!rc)
            return faid_fail(d, FAID_EINVAL, "%s: not a result message", f->path);
        faid_diag_prefix(d, "%s: result: ", f->path);
        return rc;
    }
    if (m->series_id != f->series_id || m->setup_version != f->setup_version) {
        rc = faid_fail(d, FAID_EINVAL,
                       "%s: frame %llu is of series %llu setup %llu, the file of series %llu "
                       "setup %llu",
                       f->path, (unsigned long long)m->frame_id, (unsigned long long)m->series_id,
                       (unsigned long long)m->setup_version, (unsigned long long)f->series_id,
                       (unsigned long long)f->setup_version);
        free(m);
        return rc;
    }
    int k = f->nbuf;
    col *c = f->c;
#define ROW(id) (c[id].buf + (size_t)k * c[id].row_elems * c[id].esize)
    if (f->profiles)
        rc = take(&m->I, f->npt, ROW(C_I), FAID_DT_F32) ||
             take(&m->sigma, f->npt, ROW(C_SIGMA), FAID_DT_F32) ||
             take(&m->std, f->npt, ROW(C_STD), FAID_DT_F32) ||
             take(&m->count, f->npt, ROW(C_COUNT), FAID_DT_F32);
    if (!rc && f->has_cake)
        rc = take(&m->I_2d, f->npt * f->npt_azim, ROW(C_I2D), FAID_DT_F32) ||
             take(&m->sigma_2d, f->npt * f->npt_azim, ROW(C_SIGMA2D), FAID_DT_F32) ||
             take(&m->count_2d, f->npt * f->npt_azim, ROW(C_COUNT2D), FAID_DT_F32);
    if (!rc && f->has_peaks) {
        if (!m->has_peaks) {
            rc = 1;
        } else {
            uint64_t n = m->peak_x.nelem < f->max_peaks ? m->peak_x.nelem : f->max_peaks;
            int32_t np = (int32_t)n;
            uint64_t found = m->num_peaks;
            int8_t hit = m->is_hit ? 1 : 0;
            memcpy(ROW(C_NPEAKS), &np, 4);
            memcpy(ROW(C_NUM_PEAKS), &found, 8);
            memcpy(ROW(C_IS_HIT), &hit, 1);
            take_peaks(&m->peak_x, n, f->max_peaks, (float *)(void *)ROW(C_PX));
            take_peaks(&m->peak_y, n, f->max_peaks, (float *)(void *)ROW(C_PY));
            take_peaks(&m->peak_intensity, n, f->max_peaks, (float *)(void *)ROW(C_PINT));
            take_peaks(&m->peak_sigma, n, f->max_peaks, (float *)(void *)ROW(C_PSIGMA));
            take_peaks(&m->peak_snr, n, f->max_peaks, (float *)(void *)ROW(C_PSNR));
            take_peaks(&m->peak_npix, n, f->max_peaks, (float *)(void *)ROW(C_PNPIX));
            take_peaks(&m->peak_max_pixel, n, f->max_peaks, (float *)(void *)ROW(C_PMAX));
            rc = take(&m->bg_I, f->npt, ROW(C_BG), FAID_DT_F32) ||
                 take(&m->bg_sigma, f->npt, ROW(C_BG_ERR), FAID_DT_F32);
            f->hits += hit;
        }
    }
    for (int i = 0; !rc && i < f->nx; i++)
        rc = take_output(f, i, m, ROW(C_X0 + i));
    if (rc) {
        uint64_t id = m->frame_id;
        free(m);
        return faid_fail(d, FAID_EFORMAT,
                         "%s: frame %llu: the result's arrays are not those the start announced "
                         "(%llu bins%s)",
                         f->path, (unsigned long long)id, (unsigned long long)f->npt,
                         f->has_peaks ? ", peaks" : "");
    }
    memcpy(ROW(C_FRAME_ID), &m->frame_id, 8);
    faid_mp_obj o;
    double ts = NAN;
    if (!find(result, len, NULL, "timestamp", &o, NULL))
        faid_mp_to_f64(&o, &ts);
    memcpy(ROW(C_TIMESTAMP), &ts, 8);
    if (f->has_monitor)
        memcpy(ROW(C_MONITOR), &f->monitor, 8);
#undef ROW
    if (!f->norm_written && f->norm >= 0) {
        f->norm_written = 1;
        if (H5Dwrite(f->norm, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, c[C_COUNT].buf) <
            0) {
            free(m);
            return fail_io(f, d, errno, "norm not written");
        }
    }
    free(m);
    if (++f->nbuf == f->block)
        return write_block(f, d);
    return 0;
}

static int write_counts(faid_sfile *f)
{
    uint64_t n = f->written;
    int bad = f->frame_count >= 0 &&
              H5Dwrite(f->frame_count, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &n) < 0;
    bad |= f->frames_missing >= 0 && H5Dwrite(f->frames_missing, H5T_NATIVE_UINT64, H5S_ALL,
                                              H5S_ALL, H5P_DEFAULT, &f->missing) < 0;
    if (f->has_peaks) {
        double rate = n ? (double)f->hits / (double)n : 0.0;
        bad |= H5Dwrite(f->nhits, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &f->hits) < 0 ||
               H5Dwrite(f->hit_rate, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &rate) < 0;
    }
    char now[32];
    iso_now(now);
    bad |= f->end_time >= 0 && str_rewrite(f->end_time, now) != 0;
    return bad ? FAID_EIO : 0;
}

int faid_sfile_flush(faid_sfile *f, faid_diag *d)
{
    if (f->failed)
        return frozen(f, d);
    if (gone(f, d))
        return FAID_EIO;
    int rc = write_block(f, d);
    if (rc)
        return rc;
    errno = 0;
    if (write_counts(f) || H5Fflush(f->file, H5F_SCOPE_GLOBAL) < 0)
        return fail_io(f, d, errno, "flush failed");
    return 0;
}

void faid_sfile_missing(faid_sfile *f, uint64_t n)
{
    f->missing += n;
}

int faid_sfile_close(faid_sfile **fp, const void *end, size_t len, const char *reason, faid_diag *d)
{
    faid_sfile *f = *fp;
    if (!f)
        return 0;
    *fp = NULL;
    char why[32];
    snprintf(why, sizeof why, "%s", reason ? reason : "closed");
    if (end)
        str_or(end, len, NULL, "reason", why, sizeof why, why);
    int rc = f->failed ? frozen(f, d) : gone(f, d) ? FAID_EIO : write_block(f, d);
    int err = errno;
    if (!rc) {
        errno = 0;
        if (write_counts(f) || (f->end_reason >= 0 && str_rewrite(f->end_reason, why)))
            rc = fail_io(f, d, errno, "end not written");
    }
    errno = 0;
    if (f->failed)
        divert(f);
    hid_t file = f->file;
    f->file = -1;
    close_all(f);
    if (file >= 0 && H5Fclose(file) < 0 && !rc)
        rc = fail_io(f, d, errno, "close failed");
    if (rc && !err)
        err = errno;
    free(f);
    errno = rc ? err : 0;
    return rc;
}

uint64_t faid_sfile_frames(const faid_sfile *f)
{
    return f->written + (uint64_t)f->nbuf;
}

uint64_t faid_sfile_bytes(const faid_sfile *f)
{
    return f->bytes;
}

const char *faid_sfile_path(const faid_sfile *f)
{
    return f->path;
}

/* ---- file names ----------------------------------------------------------------------------- */

int faid_writer_file_name(char *out, size_t cap, const char *dir, const char *uid, size_t uid_len,
                          uint64_t series_id, const char *suffix, int attempt, faid_diag *d)
{
    char name[128], fallback[32];
    if (!uid || !uid_len) {
        snprintf(fallback, sizeof fallback, "series_%llu", (unsigned long long)series_id);
        uid = fallback;
        uid_len = strlen(fallback);
    }
    size_t n = 0;
    int changed = uid_len > 100;
    uint32_t h = 2166136261u; /* FNV-1a of the original bytes */
    for (size_t i = 0; i < uid_len; i++) {
        unsigned char ch = (unsigned char)uid[i];
        h = (h ^ ch) * 16777619u;
        if (n == 100)
            continue;
        /* a leading '.' would hide the file (or make `..`); a leading '-' makes a name that
         * shell commands take for options (`rm *` with `-rf.h5` there) */
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ((ch == '-' || ch == '.') && n > 0);
        if (!ok)
            changed = 1;
        name[n++] = ok ? (char)ch : '_';
    }
    name[n] = 0;
    char tag[16] = "", num[16] = "";
    if (changed)
        snprintf(tag, sizeof tag, "-%08x", h);
    if (attempt > 0)
        snprintf(num, sizeof num, "-%d", attempt + 1);
    int w = snprintf(out, cap, "%s/%s%s%s%s.h5", dir, name, tag, num, suffix ? suffix : "");
    if (w < 0 || (size_t)w >= cap)
        return faid_fail(d, FAID_ESIZE, "writer.directory %s: file path too long", dir);
    return 0;
}
