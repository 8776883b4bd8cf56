/* faid_nxmx: the hits-only NXmx file (see faid_nxmx.h). */
#define _GNU_SOURCE /* memfd_create */
#include "faid_nxmx.h"

#include "faid_h5.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

/* Registered HDF5 filter ids and the client data their readers need (formats.md §11). */
#define FILTER_BITSHUFFLE 32008
#define FILTER_LZ4        32004
#define BSHUF_LZ4         2 /* bitshuffle cd_values[4]: LZ4 after the shuffle */
#define LZ4H5_HEADER      12
/* Rows of the per-frame arrays in one chunk: about 64 KiB of peak values per chunk, so that a
 * SWMR reader's refresh and a flush touch a few chunks, not one per frame. */
#define PEAK_CHUNK_BYTES 65536
#define ID_CHUNK         1024
/* Zero runs of 4 * 2^j bytes, j < ZERO_SEGS, cover any peak row (max_peaks <= 2^20). */
#define ZERO_SEGS 21

/* The peak chunks are built here as zlib streams (the deflate filter's format) and written with
 * direct chunk writes, the file's bytes of float32 assumed little-endian as the host's. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "faid_nxmx.c writes the host's float32 as the file's little-endian float32"
#endif

/* Every path the module writes: the layout table below and the code use the same names. */
#define P_ENTRY       "/entry"
#define P_DATA        "/entry/data"
#define P_FRAMES      "/entry/data/data"
#define P_FRAME_ID    "/entry/data/frame_id"
#define P_RESULT      "/entry/result_1"
#define P_NPEAKS      "/entry/result_1/nPeaks"
#define P_INSTRUMENT  "/entry/instrument"
#define P_DETECTOR    "/entry/instrument/detector"
#define P_TRANSFORMS  "/entry/instrument/detector/transformations"
#define P_TRANSLATION "/entry/instrument/detector/transformations/translation"
#define P_MODULE      "/entry/instrument/detector/module"
#define P_MODULE_OFF  "/entry/instrument/detector/module/module_offset"
#define P_BEAM        "/entry/instrument/beam"
#define P_SAMPLE      "/entry/sample"

/* The CXI peak arrays [frames, max_peaks] in the order of faid_nxmx.pk. */
enum { PK_X, PK_Y, PK_I, PK_SNR, PK_NPIX, PK_MAX, PK_N };
static const char *const peak_names[PK_N] = {"peakXPosRaw", "peakYPosRaw", "peakTotalIntensity",
                                             "peakSNR",     "peakNPixels", "peakMaximumValue"};

#define ROW(p, k, t, s, u, w, m)                                                                   \
    {                                                                                              \
        p, k, t, s, u, w, m                                                                        \
    }
static const faid_layout_row rows[] = {
    ROW(P_ENTRY, "group", "NXentry", "", "", "always", "the hits of one series"),
    ROW(P_ENTRY "@default", "attribute", "string", "scalar", "", "always",
        "\"data\": the NXdata plotted by default"),
    ROW(P_ENTRY "/definition", "dataset", "string", "scalar", "", "always", "\"NXmx\""),
    ROW(P_ENTRY "/series", "dataset", "string", "scalar", "", "series known",
        "series_unique_id, else the series id"),
    ROW(P_DATA, "group", "NXdata", "", "", "always", "the hit frames"),
    ROW(P_DATA "@signal", "attribute", "string", "scalar", "", "always", "\"data\""),
    ROW(P_FRAMES, "dataset", "detector dtype", "[frames, rows, cols]", "counts", "always",
        "each hit frame as it arrived: one chunk per frame, written with a direct chunk write "
        "under filter 32008 (bslz4), 32004 (lz4, lz4-raw with an HDF5-LZ4 header) or none"),
    ROW(P_FRAME_ID, "dataset", "uint64", "[frames]", "", "always",
        "the original frame id of each hit frame"),
    ROW(P_RESULT, "group", "NXcollection", "", "", "always",
        "the peaks of the hit frames in the CXI layout (CrystFEL peak_list, --peaks=cxi)"),
    ROW(P_NPEAKS, "dataset", "int32", "[frames]", "", "always",
        "peaks stored in the row (at most max_peaks)"),
    ROW(P_RESULT "/peakXPosRaw", "dataset", "float32", "[frames, max_peaks]", "pixel", "always",
        "fast-axis (column) centroid, pixel-index convention (centre of column c at c); 0 past "
        "nPeaks"),
    ROW(P_RESULT "/peakYPosRaw", "dataset", "float32", "[frames, max_peaks]", "pixel", "always",
        "slow-axis (row) centroid, pixel-index convention"),
    ROW(P_RESULT "/peakTotalIntensity", "dataset", "float32", "[frames, max_peaks]", "counts",
        "always", "background-subtracted integrated intensity"),
    ROW(P_RESULT "/peakSNR", "dataset", "float32", "[frames, max_peaks]", "", "always",
        "intensity / sigma"),
    ROW(P_RESULT "/peakNPixels", "dataset", "float32", "[frames, max_peaks]", "", "always",
        "pixels in the peak"),
    ROW(P_RESULT "/peakMaximumValue", "dataset", "float32", "[frames, max_peaks]", "counts",
        "always", "brightest pixel above the background"),
    ROW(P_INSTRUMENT, "group", "NXinstrument", "", "", "always", ""),
    ROW(P_DETECTOR, "group", "NXdetector", "", "", "always", ""),
    ROW(P_DETECTOR "/description", "dataset", "string", "scalar", "", "always",
        "the detector's name (\"detector\" when not known)"),
    ROW(P_DETECTOR "/distance", "dataset", "float64", "scalar", "m", "always",
        "sample to detector along the beam, at the beam centre"),
    ROW(P_DETECTOR "/detector_distance", "dataset", "float64", "scalar", "m", "always",
        "the same, under DECTRIS' name"),
    ROW(P_DETECTOR "/beam_center_x", "dataset", "float64", "scalar", "pixel", "always",
        "direct beam along the fast axis, pixel-corner convention (centre of column c at c + 0.5)"),
    ROW(P_DETECTOR "/beam_center_y", "dataset", "float64", "scalar", "pixel", "always",
        "direct beam along the slow axis, pixel-corner convention"),
    ROW(P_DETECTOR "/x_pixel_size", "dataset", "float64", "scalar", "m", "always",
        "pixel size along the fast axis"),
    ROW(P_DETECTOR "/y_pixel_size", "dataset", "float64", "scalar", "m", "always",
        "pixel size along the slow axis"),
    ROW(P_DETECTOR "/bit_depth_image", "dataset", "int32", "scalar", "", "always",
        "bits per pixel of the frames"),
    ROW(P_DETECTOR "/pixel_mask", "dataset", "uint32", "[rows, cols]", "", "mask given",
        "1 = masked pixel (NXmx bit 0), 0 = good"),
    ROW(P_DETECTOR "/pixel_mask_applied", "dataset", "bool", "scalar", "", "mask given",
        "false: the frames are as the detector sent them"),
    ROW(P_DETECTOR "/depends_on", "dataset", "string", "scalar", "", "always",
        "\"" P_TRANSLATION "\""),
    ROW(P_TRANSFORMS, "group", "NXtransformations", "", "", "always", ""),
    ROW(P_TRANSLATION, "dataset", "float64", "scalar", "m", "always",
        "the distance along the beam: transformation_type translation, vector [0, 0, 1], "
        "depends_on \".\""),
    ROW(P_MODULE, "group", "NXdetector_module", "", "", "always", "the frame as one module"),
    ROW(P_MODULE "/data_origin", "dataset", "int32", "[2]", "", "always", "[0, 0]"),
    ROW(P_MODULE "/data_size", "dataset", "int32", "[2]", "", "always", "[rows, cols]"),
    ROW(P_MODULE_OFF, "dataset", "float64", "scalar", "m", "always",
        "0, translation with offset [beam_center_x * x_pixel_size, beam_center_y * "
        "y_pixel_size, 0] m: the first pixel's corner seen from the beam"),
    ROW(P_MODULE "/fast_pixel_direction", "dataset", "float64", "scalar", "m", "always",
        "x_pixel_size, translation, vector [-1, 0, 0] (McStas frame: x horizontal, y up, z "
        "along the beam)"),
    ROW(P_MODULE "/slow_pixel_direction", "dataset", "float64", "scalar", "m", "always",
        "y_pixel_size, translation, vector [0, -1, 0]"),
    ROW(P_BEAM, "group", "NXbeam", "", "", "always", ""),
    ROW(P_BEAM "/incident_wavelength", "dataset", "float64", "scalar", "angstrom",
        "wavelength known", "the wavelength of the geometry"),
    ROW(P_SAMPLE, "group", "NXsample", "", "", "always", ""),
    ROW(P_SAMPLE "/depends_on", "dataset", "string", "scalar", "", "always", "\".\""),
    ROW(P_SAMPLE "/beam", "link", P_BEAM, "", "", "always", "the same NXbeam"),
};

const faid_layout faid_nxmx_file_layout = {
    .name = "hits file",
    .file_name = "<series>_hits.h5 (and <series>_hits.geom, its CrystFEL geometry)",
    .summary = "the hit frames of a series exactly as they arrived, in the NXmx layout (DIALS, "
               "the nxmx package, CrystFEL), with their frame ids and peaks in the CXI layout",
    .rows = rows,
    .nrows = sizeof(rows) / sizeof(rows[0]),
};

struct faid_nxmx {
    char *path;
    hid_t file;
    hid_t frames, ids, npeaks, pk[PK_N];
    int rows, cols;
    size_t raw_bytes;
    faid_encoding enc;
    int32_t max_peaks;
    uint64_t n, bytes;
    uint64_t flushed; /* frames at the last successful flush */
    int failed;       /* a write failed: the file is left as its last flush wrote it */
    /* Rows not yet in the file (written a block at a time, and all of them at each flush):
     * frame ids and peak counts of rows [id_base, n), the peaks of rows [pk_base, n) of the
     * current peak chunk (pk_base a multiple of crow, the chunk's rows). */
    uint64_t id_base, pk_base;
    uint64_t *idbuf;
    int32_t *npbuf;
    float *pkbuf;  /* PK_N x crow x max_peaks */
    int32_t *pkn;  /* peaks in each row of the current chunk */
    hsize_t crow;  /* rows of a peak chunk */
    uint8_t *zbuf; /* one peak chunk as a zlib stream */
    size_t zcap;
    uint8_t *zseg[ZERO_SEGS]; /* raw deflate of 4 * 2^j zero bytes, byte-aligned, standalone */
    size_t zseg_len[ZERO_SEGS];
    uint8_t *wrap; /* LZ4_RAW chunk with its HDF5-LZ4 header */
    size_t wrap_cap;
    uint8_t *plain; /* LZ4_RAW chunk decoded (the rare block as long as its pixels) */
};

/* ---- geometry ------------------------------------------------------------------------------ */

/* Direct beam on the detector: the point whose lab vector has t1 = t2 = 0 (the PONI geometry is
 * affine in the detector coordinates, so three evaluations give it exactly), in pixels of the
 * frame as it arrives (pixel-corner convention: column c spans [c, c + 1)), and the distance
 * from the sample to it along the beam. FAID_EINVAL when the detector plane contains the beam. */
static int beam_centre(const faid_geometry *g, double *bcx, double *bcy, double *dist, faid_diag *d)
{
    double t0[3], ta[3], tb[3];
    faid_geometry_t123(g, 0, 0, &t0[0], &t0[1], &t0[2]);
    faid_geometry_t123(g, 1, 0, &ta[0], &ta[1], &ta[2]);
    faid_geometry_t123(g, 0, 1, &tb[0], &tb[1], &tb[2]);
    double a1 = ta[0] - t0[0], a2 = ta[1] - t0[1], b1 = tb[0] - t0[0], b2 = tb[1] - t0[1];
    double det = a1 * b2 - a2 * b1;
    if (!(fabs(det) > 1e-12))
        return faid_fail(d, FAID_EINVAL, "geometry: the detector plane contains the beam");
    double p1 = (-t0[0] * b2 + t0[1] * b1) / det;
    double p2 = (-a1 * t0[1] + a2 * t0[0]) / det;
    double t1, t2, t3;
    faid_geometry_t123(g, p1, p2, &t1, &t2, &t3);
    double y = p1 / g->pixel1, x = p2 / g->pixel2;
    /* Orientations 1, 2 read rows from the bottom, 1, 4 columns from the right (pyFAI). */
    if (g->orientation == 1 || g->orientation == 2)
        y = g->rows - y;
    if (g->orientation == 1 || g->orientation == 4)
        x = g->cols - x;
    *bcx = x;
    *bcy = y;
    *dist = fabs(t3);
    return 0;
}

static int check_params(const faid_nxmx_params *p, faid_diag *d)
{
    const char *what = p && p->path ? p->path : "hits file";
    if (!p || !p->path || !p->path[0])
        return faid_fail(d, FAID_EINVAL, "hits file: no path");
    if (!p->geom)
        return faid_fail(d, FAID_EINVAL, "%s: no geometry", what);
    int rc = faid_geometry_check(p->geom, what, d);
    if (rc)
        return rc;
    if (!faid_dtype_is_frame(p->dtype))
        return faid_fail(d, FAID_EINVAL, "%s: dtype %s is not a frame type", what,
                         faid_dtype_name(p->dtype));
    if (p->encoding < FAID_ENC_NONE || p->encoding > FAID_ENC_LZ4_RAW)
        return faid_fail(d, FAID_EINVAL, "%s: unknown encoding %d", what, (int)p->encoding);
    if (p->max_peaks < 1 || p->max_peaks > (1 << 20))
        return faid_fail(d, FAID_EINVAL, "%s: max_peaks must be 1..%d (got %d)", what, 1 << 20,
                         (int)p->max_peaks);
    return 0;
}

/* ---- small HDF5 helpers -------------------------------------------------------------------- */

static hid_t file_type(faid_dtype t)
{
    switch (t) {
    case FAID_DT_U8:
        return H5T_STD_U8LE;
    case FAID_DT_I8:
        return H5T_STD_I8LE;
    case FAID_DT_U16:
        return H5T_STD_U16LE;
    case FAID_DT_I16:
        return H5T_STD_I16LE;
    case FAID_DT_U32:
        return H5T_STD_U32LE;
    case FAID_DT_I32:
        return H5T_STD_I32LE;
    default:
        return H5T_IEEE_F32LE;
    }
}

static int attr_f64v(hid_t obj, const char *name, const double *v, hsize_t n)
{
    hid_t sp = H5Screate_simple(1, &n, NULL);
    if (sp < 0)
        return FAID_EIO;
    hid_t a = H5Acreate2(obj, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, H5T_NATIVE_DOUBLE, v) >= 0 ? 0 : FAID_EIO;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

/* A scalar float64 dataset with its units; returns the dataset id (caller closes) or < 0. */
static hid_t dset_f64(hid_t loc, const char *name, double v, const char *units)
{
    return faid_h5_dset(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, 0, &v, units);
}

static int scalar_f64(hid_t loc, const char *name, double v, const char *units)
{
    hid_t ds = dset_f64(loc, name, v, units);
    if (ds < 0)
        return FAID_EIO;
    H5Dclose(ds);
    return 0;
}

static int small_i32(hid_t loc, const char *name, const int32_t *v, hsize_t n, int scalar)
{
    hid_t ds = faid_h5_dset(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT32, !scalar, n, v, NULL);
    if (ds < 0)
        return FAID_EIO;
    H5Dclose(ds);
    return 0;
}

/* A transformation axis: scalar value with units, its type, vector, offset and dependency. */
static int axis(hid_t loc, const char *name, double value, const double vector[3],
                const double offset[3], const char *depends_on)
{
    hid_t ds = dset_f64(loc, name, value, "m");
    if (ds < 0)
        return FAID_EIO;
    int rc = faid_h5_attr_str(ds, "transformation_type", "translation") ||
             attr_f64v(ds, "vector", vector, 3) ||
             (offset &&
              (attr_f64v(ds, "offset", offset, 3) || faid_h5_attr_str(ds, "offset_units", "m"))) ||
             faid_h5_attr_str(ds, "depends_on", depends_on);
    H5Dclose(ds);
    return rc ? FAID_EIO : 0;
}

/* The frames dataset: one chunk per frame, the filter that decodes the chunks as they come.
 * The filter is optional, so libhdf5 accepts it without the plugin (none is loaded in faid);
 * its client data are given in full, as a reader needs them (formats.md §11). */
static hid_t frames_dataset(hid_t loc, const faid_nxmx_params *p)
{
    hsize_t inner[2] = {(hsize_t)p->geom->rows, (hsize_t)p->geom->cols};
    hsize_t dims[3] = {0, inner[0], inner[1]}, maxd[3] = {H5S_UNLIMITED, inner[0], inner[1]};
    hsize_t chunk[3] = {1, inner[0], inner[1]};
    hid_t sp = H5Screate_simple(3, dims, maxd);
    hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = -1;
    int ok = sp >= 0 && pl >= 0 && H5Pset_chunk(pl, 3, chunk) >= 0;
    if (ok && p->encoding == FAID_ENC_BSLZ4) {
        const unsigned cd[5] = {0, 4, (unsigned)faid_dtype_size(p->dtype), 0, BSHUF_LZ4};
        ok = H5Pset_filter(pl, FILTER_BITSHUFFLE, H5Z_FLAG_OPTIONAL, 5, cd) >= 0;
    } else if (ok && (p->encoding == FAID_ENC_LZ4 || p->encoding == FAID_ENC_LZ4_RAW)) {
        const unsigned cd[1] = {0};
        ok = H5Pset_filter(pl, FILTER_LZ4, H5Z_FLAG_OPTIONAL, 1, cd) >= 0;
    }
    if (ok)
        ds = H5Dcreate2(loc, "data", file_type(p->dtype), sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (pl >= 0)
        H5Pclose(pl);
    if (sp >= 0)
        H5Sclose(sp);
    return ds;
}

static int write_mask(hid_t det, const faid_nxmx_params *p)
{
    hsize_t dims[2] = {(hsize_t)p->geom->rows, (hsize_t)p->geom->cols};
    size_t n = (size_t)dims[0] * (size_t)dims[1];
    uint32_t *m = malloc(n * sizeof(*m));
    if (!m)
        return FAID_ENOMEM;
    for (size_t i = 0; i < n; i++)
        m[i] = p->mask[i] ? 1u : 0u;
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = -1;
    /* A mask is mostly zeros: deflate keeps a 4M-pixel one at a few kB. */
    if (sp >= 0 && pl >= 0 && H5Pset_chunk(pl, 2, dims) >= 0 && H5Pset_deflate(pl, 1) >= 0)
        ds = H5Dcreate2(det, "pixel_mask", H5T_STD_U32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    int rc = ds >= 0 && H5Dwrite(ds, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, m) >= 0
                 ? 0
                 : FAID_EIO;
    free(m);
    if (ds >= 0)
        H5Dclose(ds);
    if (pl >= 0)
        H5Pclose(pl);
    if (sp >= 0)
        H5Sclose(sp);
    if (rc)
        return rc;
    hid_t bsp = H5Screate(H5S_SCALAR);
    uint8_t no = 0;
    hid_t b = bsp >= 0 ? H5Dcreate2(det, "pixel_mask_applied", H5T_NATIVE_HBOOL, bsp, H5P_DEFAULT,
                                    H5P_DEFAULT, H5P_DEFAULT)
                       : -1;
    rc = b >= 0 && H5Dwrite(b, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, &no) >= 0
             ? 0
             : FAID_EIO;
    if (b >= 0)
        H5Dclose(b);
    if (bsp >= 0)
        H5Sclose(bsp);
    return rc;
}

/* The NXinstrument / NXsample part: detector geometry and beam. */
static int write_instrument(hid_t f, const faid_nxmx_params *p, faid_diag *d)
{
    const faid_geometry *g = p->geom;
    double bcx, bcy, dist;
    int rc = beam_centre(g, &bcx, &bcy, &dist, d);
    if (rc)
        return rc;
    hid_t ins = faid_h5_group(f, P_INSTRUMENT, "NXinstrument");
    hid_t det = ins >= 0 ? faid_h5_group(f, P_DETECTOR, "NXdetector") : -1;
    hid_t tr = det >= 0 ? faid_h5_group(f, P_TRANSFORMS, "NXtransformations") : -1;
    hid_t mod = tr >= 0 ? faid_h5_group(f, P_MODULE, "NXdetector_module") : -1;
    hid_t beam = mod >= 0 ? faid_h5_group(f, P_BEAM, "NXbeam") : -1;
    hid_t smp = beam >= 0 ? faid_h5_group(f, P_SAMPLE, "NXsample") : -1;
    rc = smp >= 0 ? 0 : FAID_EIO;
    const double z[3] = {0, 0, 1}, fx[3] = {-1, 0, 0}, sy[3] = {0, -1, 0}, ux[3] = {1, 0, 0};
    const double zero[3] = {0, 0, 0};
    const double corner[3] = {bcx * g->pixel2, bcy * g->pixel1, 0};
    const int32_t origin[2] = {0, 0}, size[2] = {g->rows, g->cols};
    const int32_t bits = (int32_t)(8 * faid_dtype_size(p->dtype));
    if (rc == 0)
        rc = faid_h5_dset_str(det, "description",
                              p->detector_name && p->detector_name[0] ? p->detector_name
                                                                      : "detector") ||
                     scalar_f64(det, "distance", dist, "m") ||
                     scalar_f64(det, "detector_distance", dist, "m") ||
                     scalar_f64(det, "beam_center_x", bcx, "pixel") ||
                     scalar_f64(det, "beam_center_y", bcy, "pixel") ||
                     scalar_f64(det, "x_pixel_size", g->pixel2, "m") ||
                     scalar_f64(det, "y_pixel_size", g->pixel1, "m") ||
                     small_i32(det, "bit_depth_image", &bits, 1, 1) ||
                     faid_h5_dset_str(det, "depends_on", P_TRANSLATION) ||
                     axis(tr, "translation", dist, z, NULL, ".") ||
                     small_i32(mod, "data_origin", origin, 2, 0) ||
                     small_i32(mod, "data_size", size, 2, 0) ||
                     axis(mod, "module_offset", 0.0, ux, corner, P_TRANSLATION) ||
                     axis(mod, "fast_pixel_direction", g->pixel2, fx, zero, P_MODULE_OFF) ||
                     axis(mod, "slow_pixel_direction", g->pixel1, sy, zero, P_MODULE_OFF) ||
                     faid_h5_dset_str(smp, "depends_on", ".")
                 ? FAID_EIO
                 : 0;
    if (rc == 0 && p->mask)
        rc = write_mask(det, p);
    if (rc == 0 && g->wavelength > 0)
        rc = scalar_f64(beam, "incident_wavelength", g->wavelength * 1e10, "angstrom");
    if (rc == 0 && H5Lcreate_hard(f, P_BEAM, f, P_SAMPLE "/beam", H5P_DEFAULT, H5P_DEFAULT) < 0)
        rc = FAID_EIO;
    hid_t gs[] = {smp, beam, mod, tr, det, ins};
    for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++)
        if (gs[i] >= 0)
            H5Gclose(gs[i]);
    if (rc)
        return faid_fail(d, rc, "%s: detector and beam groups not written%s", p->path,
                         rc == FAID_ENOMEM ? " (out of memory)" : "");
    return 0;
}

static int write_layout(faid_nxmx *h, const faid_nxmx_params *p, faid_diag *d)
{
    hid_t f = h->file;
    hid_t entry = faid_h5_group(f, P_ENTRY, "NXentry");
    hid_t data = entry >= 0 ? faid_h5_group(f, P_DATA, "NXdata") : -1;
    hid_t res = data >= 0 ? faid_h5_group(f, P_RESULT, "NXcollection") : -1;
    int rc = res >= 0 && faid_h5_attr_str(entry, "default", "data") == 0 &&
                     faid_h5_dset_str(entry, "definition", "NXmx") == 0 &&
                     (!p->series || faid_h5_dset_str(entry, "series", p->series) == 0) &&
                     faid_h5_attr_str(data, "signal", "data") == 0
                 ? 0
                 : FAID_EIO;
    if (rc == 0) {
        h->frames = frames_dataset(data, p);
        h->ids = faid_h5_growing(data, "frame_id", H5T_STD_U64LE, 1, NULL, ID_CHUNK, NULL, 0);
        h->npeaks = faid_h5_growing(res, "nPeaks", H5T_STD_I32LE, 1, NULL, ID_CHUNK, NULL, 0);
        hsize_t w = (hsize_t)p->max_peaks;
        for (int k = 0; k < PK_N; k++)
            h->pk[k] = faid_h5_growing(res, peak_names[k], H5T_IEEE_F32LE, 2, &w, h->crow, NULL, 1);
        rc = h->frames >= 0 && h->ids >= 0 && h->npeaks >= 0 ? 0 : FAID_EIO;
        for (int k = 0; k < PK_N; k++)
            rc = h->pk[k] < 0 ? FAID_EIO : rc;
    }
    if (res >= 0)
        H5Gclose(res);
    if (data >= 0)
        H5Gclose(data);
    if (entry >= 0)
        H5Gclose(entry);
    if (rc)
        return faid_fail(d, rc, "%s: the NXmx layout could not be written", p->path);
    return write_instrument(f, p, d);
}

/* ---- the per-frame rows: written a block at a time -------------------------------------- */

/* Why blocks: profiled (perf, faid-bench --writer with 16 KiB chunks and max_peaks 2048),
 * appending a frame cost 117 us, 43 % of it zlib deflating the six peak rows (48 KiB, almost all
 * zeros past nPeaks) through libhdf5's deflate filter and most of the rest eight H5Dset_extent +
 * H5Dwrite of one row each; against 1.4 ms for the 4 MiB chunk itself on tmpfs that was 8 %. Now
 * frame ids and peak counts go to the file a block of ID_CHUNK rows at a time, and each peak
 * chunk is built here as a zlib stream (what the deflate filter stores and any reader inflates):
 * each row's peaks as a stored block, its zeros as precomputed deflate segments, the adler32
 * combined arithmetically, so no byte is deflated per frame. Everything buffered is written at
 * each flush (a partial peak chunk is rewritten whole when it fills), so a SWMR reader and a
 * killed writer's file see every row up to the last flush, as before. */

/* Raw deflate of 4 * 2^j zero bytes, ended by a full flush: byte-aligned, referring to nothing
 * before it, so segments and stored blocks concatenate into one valid deflate stream. */
static int zero_segments(faid_nxmx *h)
{
    size_t most = 4 * (size_t)h->max_peaks * (size_t)h->crow; /* a chunk's bytes */
    uint8_t *zeros = calloc(most, 1);
    int rc = zeros ? 0 : FAID_ENOMEM;
    for (int j = 0; rc == 0 && j < ZERO_SEGS && ((size_t)4 << j) <= most; j++) {
        size_t len = (size_t)4 << j;
        z_stream z;
        memset(&z, 0, sizeof(z));
        if (deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_RLE) != Z_OK) {
            rc = FAID_ENOMEM;
            break;
        }
        size_t cap = deflateBound(&z, (uLong)len) + 64;
        h->zseg[j] = malloc(cap);
        if (h->zseg[j]) {
            z.next_in = zeros;
            z.avail_in = (uInt)len;
            z.next_out = h->zseg[j];
            z.avail_out = (uInt)cap;
            if (deflate(&z, Z_FULL_FLUSH) != Z_OK || z.avail_in != 0 || z.avail_out == 0)
                rc = FAID_ENOMEM;
            h->zseg_len[j] = cap - z.avail_out;
        } else {
            rc = FAID_ENOMEM;
        }
        deflateEnd(&z);
    }
    free(zeros);
    if (rc)
        return rc;
    /* room for a chunk of full rows; put_peaks grows it for a longer stream */
    h->zcap = most + 5 * (size_t)h->crow * (4 * (size_t)h->max_peaks / 65535 + 1) + 16;
    h->zbuf = malloc(h->zcap);
    return h->zbuf ? 0 : FAID_ENOMEM;
}

/* Appends a run of `zeros` zero bytes (a multiple of 4) as deflate segments to o + *at, or only
 * counts its bytes when o is NULL. */
static void put_zeros(const faid_nxmx *h, uint8_t *o, size_t *at, size_t zeros)
{
    for (int j = ZERO_SEGS - 1; j >= 0 && zeros; j--)
        if (zeros & ((size_t)4 << j)) {
            if (o)
                memcpy(o + *at, h->zseg[j], h->zseg_len[j]);
            *at += h->zseg_len[j];
            zeros -= (size_t)4 << j;
        }
}

/* Peak array k's current chunk as a zlib stream: rows [0, nrows) from the buffer, the chunk's
 * other rows zero; each row's peaks a stored block, each run of zeros (a row's tail, empty rows,
 * the rows not yet written) deflate segments. With o NULL, only counts the stream's bytes. */
static size_t peak_chunk_stream(const faid_nxmx *h, uint8_t *o, int k, hsize_t nrows)
{
    size_t at = 0, width = 4 * (size_t)h->max_peaks, zeros = 0;
    if (o) {
        o[0] = 0x78; /* zlib head: deflate, 32 KiB window, no dictionary, 0x7801 % 31 == 0 */
        o[1] = 0x01;
    }
    at = 2;
    for (hsize_t r = 0; r < h->crow; r++) {
        size_t used = r < nrows ? 4 * (size_t)h->pkn[r] : 0;
        const uint8_t *v =
            (const uint8_t *)(h->pkbuf + ((size_t)k * h->crow + r) * (size_t)h->max_peaks);
        if (used) {
            put_zeros(h, o, &at, zeros);
            zeros = 0;
        }
        for (size_t off = 0; off < used;) {
            size_t n = used - off < 65535 ? used - off : 65535;
            if (o) {
                o[at] = 0x00; /* stored block, not final; byte-aligned */
                o[at + 1] = (uint8_t)(n & 0xff);
                o[at + 2] = (uint8_t)(n >> 8);
                o[at + 3] = (uint8_t)(~n & 0xff);
                o[at + 4] = (uint8_t)((~n >> 8) & 0xff);
                memcpy(o + at + 5, v + off, n);
            }
            at += 5 + n;
            off += n;
        }
        zeros += width - used;
    }
    put_zeros(h, o, &at, zeros);
    if (o) {
        /* the adler32 of the chunk's zeros, row by row: of z zero bytes from the start value 1,
         * A = 1 and B = z mod 65521 */
        uLong adler = adler32(0L, Z_NULL, 0);
        for (hsize_t r = 0; r < h->crow; r++) {
            size_t used = r < nrows ? 4 * (size_t)h->pkn[r] : 0;
            if (used)
                adler = adler32(
                    adler,
                    (const uint8_t *)(h->pkbuf + ((size_t)k * h->crow + r) * (size_t)h->max_peaks),
                    (uInt)used);
            size_t z = width - used;
            if (z)
                adler = adler32_combine(adler, ((uLong)(z % 65521) << 16) | 1, (z_off_t)z);
        }
        const uint8_t end[5] = {0x01, 0x00, 0x00, 0xff, 0xff}; /* final empty stored block */
        memcpy(o + at, end, 5);
        for (int i = 0; i < 4; i++)
            o[at + 5 + i] = (uint8_t)((adler >> (8 * (3 - i))) & 0xff);
    }
    return at + 5 + 4;
}

/* Writes the buffered rows [id_base, n) of frame_id and nPeaks; `what` names the part that
 * failed. */
static int put_ids(faid_nxmx *h, const char **what)
{
    uint64_t n = h->n;
    if (n > h->id_base) {
        hsize_t start = h->id_base, count = n - h->id_base, dims = n;
        hid_t ds[2] = {h->ids, h->npeaks}, mem[2] = {H5T_NATIVE_UINT64, H5T_NATIVE_INT32};
        const void *buf[2] = {h->idbuf, h->npbuf};
        for (int i = 0; i < 2; i++) {
            *what = i ? "peaks" : "frame id";
            if (H5Dset_extent(ds[i], &dims) < 0)
                return FAID_EIO;
            hid_t fsp = H5Dget_space(ds[i]);
            hid_t msp = H5Screate_simple(1, &count, NULL);
            int rc =
                fsp >= 0 && msp >= 0 &&
                        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
                        H5Dwrite(ds[i], mem[i], msp, fsp, H5P_DEFAULT, buf[i]) >= 0
                    ? 0
                    : FAID_EIO;
            if (msp >= 0)
                H5Sclose(msp);
            if (fsp >= 0)
                H5Sclose(fsp);
            if (rc)
                return rc;
        }
        h->id_base = n;
    }
    return 0;
}

/* Writes the current peak chunk (rows [pk_base, n), the rest zero), whole: when it is full (and
 * the next chunk begins) or at a flush (rewritten when it fills). */
static int put_peaks(faid_nxmx *h, const char **what)
{
    uint64_t n = h->n;
    if (n > h->pk_base) {
        *what = "peaks";
        hsize_t dims[2] = {n, (hsize_t)h->max_peaks}, off[2] = {h->pk_base, 0};
        for (int k = 0; k < PK_N; k++) {
            size_t len = peak_chunk_stream(h, NULL, k, n - h->pk_base);
            if (len > h->zcap) {
                uint8_t *z = realloc(h->zbuf, len);
                if (!z)
                    return FAID_ENOMEM;
                h->zbuf = z;
                h->zcap = len;
            }
            peak_chunk_stream(h, h->zbuf, k, n - h->pk_base);
            if (H5Dset_extent(h->pk[k], dims) < 0 ||
                H5Dwrite_chunk(h->pk[k], H5P_DEFAULT, 0, off, len, h->zbuf) < 0)
                return FAID_EIO;
        }
        if (n - h->pk_base == h->crow) {
            h->pk_base = n;
            memset(h->pkn, 0, h->crow * sizeof(*h->pkn));
        }
    }
    return 0;
}

/* ---- the file ------------------------------------------------------------------------------ */

static void close_ids(faid_nxmx *h)
{
    hid_t *ds[] = {&h->frames, &h->ids, &h->npeaks};
    for (size_t i = 0; i < 3; i++)
        if (*ds[i] >= 0) {
            H5Dclose(*ds[i]);
            *ds[i] = -1;
        }
    for (int k = 0; k < PK_N; k++)
        if (h->pk[k] >= 0) {
            H5Dclose(h->pk[k]);
            h->pk[k] = -1;
        }
}

static void free_handle(faid_nxmx *h)
{
    free(h->path);
    free(h->idbuf);
    free(h->npbuf);
    free(h->pkbuf);
    free(h->pkn);
    free(h->zbuf);
    for (int j = 0; j < ZERO_SEGS; j++)
        free(h->zseg[j]);
    free(h->wrap);
    free(h->plain);
    free(h);
}

/* The units of every dataset row of the table that the code above did not already give. */
static int write_units(hid_t f, const char *path, faid_diag *d)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const faid_layout_row *r = &rows[i];
        if (strcmp(r->kind, "dataset") != 0 || !r->units[0] ||
            H5Lexists(f, r->path, H5P_DEFAULT) <= 0)
            continue;
        hid_t ds = H5Dopen2(f, r->path, H5P_DEFAULT);
        int rc = ds < 0 ? FAID_EIO : 0;
        if (rc == 0 && H5Aexists(ds, "units") == 0)
            rc = faid_h5_attr_str(ds, "units", r->units);
        if (ds >= 0)
            H5Dclose(ds);
        if (rc)
            return faid_fail(d, FAID_EIO, "%s: units of %s not written", path, r->path);
    }
    return 0;
}

int faid_nxmx_open(faid_nxmx **out, const faid_nxmx_params *p, faid_diag *d)
{
    *out = NULL;
    int rc = check_params(p, d);
    if (rc)
        return rc;
    faid_nxmx *h = calloc(1, sizeof(*h));
    if (!h)
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory", p->path);
    h->file = h->frames = h->ids = h->npeaks = -1;
    for (int k = 0; k < PK_N; k++)
        h->pk[k] = -1;
    h->rows = p->geom->rows;
    h->cols = p->geom->cols;
    h->raw_bytes = (size_t)h->rows * (size_t)h->cols * faid_dtype_size(p->dtype);
    h->enc = p->encoding;
    h->max_peaks = p->max_peaks;
    h->path = strdup(p->path);
    h->crow = PEAK_CHUNK_BYTES / (4 * (hsize_t)p->max_peaks);
    if (h->crow < 1)
        h->crow = 1;
    h->idbuf = malloc(ID_CHUNK * sizeof(*h->idbuf));
    h->npbuf = malloc(ID_CHUNK * sizeof(*h->npbuf));
    h->pkbuf = malloc((size_t)PK_N * h->crow * (size_t)p->max_peaks * sizeof(float));
    h->pkn = calloc(h->crow, sizeof(*h->pkn));
    if (!h->path || !h->idbuf || !h->npbuf || !h->pkbuf || !h->pkn || zero_segments(h) != 0) {
        free_handle(h);
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory", p->path);
    }
    h->file = faid_h5_create(p->path, d);
    if (h->file < 0) {
        rc = (int)h->file;
        free_handle(h);
        return rc;
    }
    rc = write_layout(h, p, d);
    if (rc == 0)
        rc = write_units(h->file, p->path, d);
    if (rc == 0 && p->swmr && H5Fstart_swmr_write(h->file) < 0)
        rc = faid_fail(d, FAID_EIO, "%s: SWMR write mode refused", p->path);
    if (rc == 0 && H5Fflush(h->file, H5F_SCOPE_LOCAL) < 0)
        rc = faid_fail(d, FAID_EIO, "%s: flush failed (disk full?)", p->path);
    if (rc) {
        close_ids(h);
        H5Fclose(h->file);
        unlink(p->path); /* created by us a moment ago, exclusively */
        free_handle(h);
        return rc;
    }
    *out = h;
    return 0;
}

/* HDF5-LZ4 framing of one raw LZ4 block: decoded size (u64 BE), block size (u32 BE, the whole
 * frame in one block), then the block's length (u32 BE) and the block itself. */
static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xff);
        v >>= 8;
    }
}

/* Checks the chunk and gives the bytes to store and their filter mask. */
static int prepare(faid_nxmx *h, uint64_t fid, const uint8_t *c, size_t len, const void **store,
                   size_t *store_len, uint32_t *mask, faid_diag *d)
{
    *store = c;
    *store_len = len;
    *mask = 0;
    uint64_t total = 0;
    uint32_t block = 0;
    switch (h->enc) {
    case FAID_ENC_NONE:
        if (len != h->raw_bytes)
            return faid_fail(d, FAID_ESIZE, "%s: frame %llu: %zu bytes, a raw frame has %zu",
                             h->path, (unsigned long long)fid, len, h->raw_bytes);
        return 0;
    case FAID_ENC_BSLZ4:
    case FAID_ENC_LZ4:
        if (faid_bslz4_header(c, len, &total, &block, d) != 0) {
            faid_diag_prefix(d, "%s: frame %llu: ", h->path, (unsigned long long)fid);
            return d ? d->code : FAID_EFORMAT;
        }
        if (total != h->raw_bytes)
            return faid_fail(
                d, FAID_ESIZE, "%s: frame %llu: the chunk decodes to %llu bytes, a frame has %zu",
                h->path, (unsigned long long)fid, (unsigned long long)total, h->raw_bytes);
        return 0;
    case FAID_ENC_LZ4_RAW:
        break;
    }
    if (len == 0 || len > UINT32_MAX || h->raw_bytes > UINT32_MAX)
        return faid_fail(d, FAID_ESIZE, "%s: frame %llu: a %zu-byte LZ4 block for %zu bytes",
                         h->path, (unsigned long long)fid, len, h->raw_bytes);
    if (len == h->raw_bytes) {
        /* The HDF5-LZ4 reader takes a block as long as its decoded size for stored bytes: this
         * one (LZ4 output exactly as long as the pixels) is decoded and stored unfiltered
         * (filter mask bit 0), the one case where the file holds other bytes than arrived. */
        if (!h->plain && !(h->plain = malloc(h->raw_bytes)))
            return faid_fail(d, FAID_ENOMEM, "%s: out of memory", h->path);
        if (faid_lz4raw_decode(c, len, h->plain, h->raw_bytes, d) != 0) {
            faid_diag_prefix(d, "%s: frame %llu: ", h->path, (unsigned long long)fid);
            return d ? d->code : FAID_ECORRUPT;
        }
        *store = h->plain;
        *mask = 1;
        return 0;
    }
    size_t need = len + LZ4H5_HEADER + 4;
    if (need > h->wrap_cap) {
        uint8_t *w = realloc(h->wrap, need);
        if (!w)
            return faid_fail(d, FAID_ENOMEM, "%s: out of memory", h->path);
        h->wrap = w;
        h->wrap_cap = need;
    }
    put_be(h->wrap, h->raw_bytes, 8);
    put_be(h->wrap + 8, h->raw_bytes, 4);
    put_be(h->wrap + 12, len, 4);
    memcpy(h->wrap + 16, c, len);
    *store = h->wrap;
    *store_len = need;
    return 0;
}

/* After a failed write (disk full, file size limit, I/O error) the file is frozen: nothing more
 * is written to it, and at close libhdf5's last metadata writes go to an anonymous memory file
 * (memfd) put in place of the file's descriptor, never to the file. Why: with a file size limit,
 * letting libhdf5 flush after the failure rewrote the superblock with an end of file beyond what
 * could be written (432,403 bytes announced in a file cut at 400,000), and no reader would open
 * the file at all; frozen, it stays what the last successful flush made it: readable (with
 * swmr=True, or after h5clear -s: the writer's SWMR mark stays set, as after a kill), with the
 * frames flushed by then
 * (reference.nxmx_file::test_file_size_limit_leaves_the_last_flush_readable). When even that close
 * fails (the file size limit applies to the memory file too), libhdf5 keeps the file's structures
 * (a leak of that one file, its descriptor on the memory file) and faid_h5_quiet's H5dont_atexit
 * keeps libhdf5 from crashing on them at exit. */
static void freeze(faid_nxmx *h)
{
    h->failed = 1;
}

static int frozen(const faid_nxmx *h, uint64_t frame_id, int is_frame, faid_diag *d)
{
    if (is_frame)
        return faid_fail(d, FAID_EIO,
                         "%s: frame %llu: not written: an earlier write to this file failed (it "
                         "keeps the %llu frames of its last flush)",
                         h->path, (unsigned long long)frame_id, (unsigned long long)h->flushed);
    return faid_fail(d, FAID_EIO,
                     "%s: not flushed: an earlier write to this file failed (it keeps the %llu "
                     "frames of its last flush)",
                     h->path, (unsigned long long)h->flushed);
}

int faid_nxmx_append(faid_nxmx *h, uint64_t frame_id, const void *chunk, size_t chunk_len,
                     const faid_peak_list *peaks, faid_diag *d)
{
    if (!h)
        return faid_fail(d, FAID_EINVAL, "hits file: not open");
    if (!chunk)
        return faid_fail(d, FAID_EINVAL, "%s: frame %llu: no chunk", h->path,
                         (unsigned long long)frame_id);
    if (h->failed)
        return frozen(h, frame_id, 1, d);
    const void *store;
    size_t store_len;
    uint32_t mask;
    int rc = prepare(h, frame_id, chunk, chunk_len, &store, &store_len, &mask, d);
    if (rc)
        return rc;
    uint64_t n = h->n;
    hsize_t dims[3] = {n + 1, (hsize_t)h->rows, (hsize_t)h->cols}, off[3] = {n, 0, 0};
    const char *what = "frame";
    if (H5Dset_extent(h->frames, dims) < 0 ||
        H5Dwrite_chunk(h->frames, H5P_DEFAULT, mask, off, store_len, store) < 0)
        rc = FAID_EIO;
    int32_t np = 0;
    if (peaks && peaks->n > 0)
        np = peaks->n < h->max_peaks ? peaks->n : h->max_peaks;
    if (rc == 0) {
        h->idbuf[n - h->id_base] = frame_id;
        h->npbuf[n - h->id_base] = np;
        hsize_t r = n - h->pk_base;
        h->pkn[r] = np;
        for (int k = 0; k < PK_N; k++) {
            float *row = h->pkbuf + ((size_t)k * h->crow + r) * (size_t)h->max_peaks;
            for (int32_t i = 0; i < np; i++) {
                switch (k) {
                case PK_X:
                    row[i] = peaks->x[i];
                    break;
                case PK_Y:
                    row[i] = peaks->y[i];
                    break;
                case PK_I:
                    row[i] = peaks->intensity[i];
                    break;
                case PK_SNR:
                    row[i] = peaks->snr[i];
                    break;
                case PK_NPIX:
                    row[i] = (float)peaks->npix[i];
                    break;
                default:
                    row[i] = peaks->max_pixel[i];
                    break;
                }
            }
        }
        h->n = n + 1;
        /* a full block of ids or a full peak chunk goes to the file now */
        if (h->n - h->id_base == ID_CHUNK)
            rc = put_ids(h, &what);
        if (rc == 0 && h->n - h->pk_base == h->crow)
            rc = put_peaks(h, &what);
    }
    if (rc) {
        h->n = n;
        freeze(h);
        return faid_fail(d, rc,
                         "%s: frame %llu: %s not written (disk full, file size limit or "
                         "the directory gone?); the file keeps the %llu frames of its last flush",
                         h->path, (unsigned long long)frame_id, what,
                         (unsigned long long)h->flushed);
    }
    h->bytes += store_len;
    return 0;
}

int faid_nxmx_flush(faid_nxmx *h, faid_diag *d)
{
    if (!h)
        return faid_fail(d, FAID_EINVAL, "hits file: not open");
    if (h->failed)
        return frozen(h, 0, 0, d);
    const char *what = "";
    if (put_ids(h, &what) != 0 || put_peaks(h, &what) != 0 ||
        H5Fflush(h->file, H5F_SCOPE_LOCAL) < 0) {
        freeze(h);
        return faid_fail(d, FAID_EIO,
                         "%s: flush failed (disk full, file size limit or the "
                         "directory gone?); the file keeps the %llu frames of its last flush",
                         h->path, (unsigned long long)h->flushed);
    }
    h->flushed = h->n;
    return 0;
}

uint64_t faid_nxmx_frames(const faid_nxmx *h)
{
    return h ? h->n : 0;
}

uint64_t faid_nxmx_bytes(const faid_nxmx *h)
{
    return h ? h->bytes : 0;
}

int faid_nxmx_close(faid_nxmx **hp, faid_diag *d)
{
    if (!hp || !*hp)
        return 0;
    faid_nxmx *h = *hp;
    *hp = NULL;
    int rc = h->failed ? frozen(h, 0, 0, d) : faid_nxmx_flush(h, d);
    close_ids(h);
    if (h->failed) {
        /* Frozen: libhdf5's closing writes go to a memory file (see freeze). */
        int *fd = NULL;
        int mem = memfd_create("faid-frozen-hits-file", MFD_CLOEXEC);
        if (mem < 0)
            mem = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (mem >= 0 && H5Fget_vfd_handle(h->file, H5P_DEFAULT, (void **)&fd) >= 0 && fd &&
            *fd >= 0)
            dup2(mem, *fd);
        if (mem >= 0)
            close(mem);
    }
    if (H5Fclose(h->file) < 0 && rc == 0)
        rc = faid_fail(d, FAID_EIO, "%s: close failed", h->path);
    free_handle(h);
    return rc;
}

/* ---- CrystFEL geometry --------------------------------------------------------------------- */

int faid_nxmx_crystfel_geom(char *buf, size_t cap, const faid_nxmx_params *p, faid_diag *d)
{
    if (!p || !p->geom)
        return faid_fail(d, FAID_EINVAL, "CrystFEL geometry: no geometry");
    const faid_geometry *g = p->geom;
    int rc = faid_geometry_check(g, "CrystFEL geometry", d);
    if (rc)
        return rc;
    /* CrystFEL's panels have square pixels (one `res`). */
    if (fabs(g->pixel1 - g->pixel2) > 1e-6 * g->pixel2)
        return faid_fail(d, FAID_EUNSUP,
                         "CrystFEL geometry: pixels of %g x %g m are not square (CrystFEL "
                         "takes one res per panel)",
                         g->pixel1, g->pixel2);
    double bcx, bcy, dist;
    rc = beam_centre(g, &bcx, &bcy, &dist, d);
    if (rc)
        return rc;
    char wl[96];
    if (g->wavelength > 0)
        snprintf(wl, sizeof(wl), "wavelength = %.10g A\n", g->wavelength * 1e10);
    else
        snprintf(wl, sizeof(wl), "; wavelength = ? A   (not known to faid: set it before use)\n");
    char mask[160] = "";
    if (p->mask)
        snprintf(mask, sizeof(mask),
                 "mask = " P_DETECTOR "/pixel_mask\n"
                 "mask_bad = 0xffff\n");
    int n = snprintf(buf, cap,
                     "; CrystFEL geometry of faid's hits file%s%s (NXmx, %d x %d frames)\n"
                     "; frames: %s [frame, ss, fs]; peaks: %s in the CXI layout, for\n"
                     ";   indexamajig --peaks=cxi (keep its default half-pixel shift: faid's\n"
                     ";   peak positions put the centre of pixel (ss, fs) at (ss, fs))\n"
                     "; lab frame as in the NXmx file: x horizontal, y up, z along the beam\n"
                     "; beam centre (%.6f, %.6f) pixels from the first pixel's corner\n"
                     "%s"
                     "clen = %.10g\n"
                     "coffset = 0\n"
                     "adu_per_photon = 1\n"
                     "res = %.10g\n"
                     "data = %s\n"
                     "dim0 = %%\n"
                     "dim1 = ss\n"
                     "dim2 = fs\n"
                     "peak_list = %s\n"
                     "peak_list_type = cxi\n"
                     "%s"
                     "\n"
                     "p0/min_fs = 0\n"
                     "p0/max_fs = %d\n"
                     "p0/min_ss = 0\n"
                     "p0/max_ss = %d\n"
                     "p0/corner_x = %.10g\n"
                     "p0/corner_y = %.10g\n"
                     "p0/fs = -1.000000x +0.000000y\n"
                     "p0/ss = +0.000000x -1.000000y\n",
                     p->series ? " of series " : "", p->series ? p->series : "", g->rows, g->cols,
                     P_FRAMES, P_RESULT, bcx, bcy, wl, dist, 1.0 / g->pixel2, P_FRAMES, P_RESULT,
                     mask, g->cols - 1, g->rows - 1, bcx, bcy);
    if (n < 0)
        return faid_fail(d, FAID_EINVAL, "CrystFEL geometry: formatting failed");
    return n;
}

int faid_nxmx_write_crystfel_geom(const char *path, const faid_nxmx_params *p, faid_diag *d)
{
    int n = faid_nxmx_crystfel_geom(NULL, 0, p, d);
    if (n < 0)
        return n;
    char *text = malloc((size_t)n + 1);
    if (!text)
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory", path);
    faid_nxmx_crystfel_geom(text, (size_t)n + 1, p, d);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(text);
        return faid_fail(d, FAID_EIO, "%s: not created: %s", path, strerror(e));
    }
    size_t off = 0;
    int rc = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, text + off, (size_t)n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = faid_fail(d, FAID_EIO, "%s: write failed: %s", path,
                           w < 0 ? strerror(errno) : "no progress");
            break;
        }
        off += (size_t)w;
    }
    if (close(fd) != 0 && rc == 0)
        rc = faid_fail(d, FAID_EIO, "%s: close failed: %s", path, strerror(errno));
    free(text);
    if (rc)
        unlink(path);
    return rc;
}

int faid_nxmx_geom_path(char *buf, size_t cap, const char *hits_path)
{
    size_t n = strlen(hits_path);
    if (n > 3 && strcmp(hits_path + n - 3, ".h5") == 0)
        return snprintf(buf, cap, "%.*s.geom", (int)(n - 3), hits_path);
    return snprintf(buf, cap, "%s.geom", hits_path);
}
