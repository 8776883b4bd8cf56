/* faidctl merge-files: one master file over the series files that several instances wrote of one
 * series (docs/output-files.md, "A series over several instances"). The master file repeats the
 * first file's tree (groups, attributes, the datasets that do not grow with the frames, copied)
 * and makes every per-frame dataset (extendible along its first axis) an HDF5 virtual dataset
 * whose rows are the instances' rows in frame_id order: a reader opens one file and sees the
 * whole series; no frame data is copied. Where the series files have hits files beside them
 * (writer.hits: `x.h5` -> `x_hits.h5`, docs/hits-files.md), the same is done for those into
 * MASTER_hits.h5 (with the CrystFEL geometry beside it), which MASTER.h5 links at /entry/hits. */
#include "faidctl.h"

#include "faid_err.h"
#include "faid_whits.h"

#include <hdf5.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 1024
#define FRAME_ID  "/entry/data/frame_id"

/* The instances a master file speaks of: n of them, file[i] the job's file of instance i (-1:
 * none) and, with with_series (a hits master), series[i] its series file. */
typedef struct sources {
    int n;
    int file[MAX_FILES];
    const char *series[MAX_FILES];
    int with_series;
} sources;

typedef struct row {
    uint64_t frame, src_row;
    int file;
} row;

typedef struct job {
    hid_t in[MAX_FILES];
    char path[MAX_FILES][PATH_MAX]; /* absolute: the virtual datasets' source files */
    uint64_t nrows_in[MAX_FILES];
    /* opened only as a SWMR reader: still marked open by its writer (killed, or still writing) */
    int open[MAX_FILES];
    uint64_t taken[MAX_FILES]; /* rows the master maps of each file */
    uint64_t cut[MAX_FILES];   /* an open file's rows past its shortest per-frame dataset */
    int n;
    hid_t out;
    row *rows;
    uint64_t nrows, duplicates;
    /* objects of file 0 already made in the output (hard links to them stay links) */
    haddr_t addr[4096];
    char made[4096][300];
    int nmade;
    /* a file whose rows land at a constant stride of the master's rows, in order (frames dealt
     * round robin): one strided mapping instead of one per frame */
    int strided[MAX_FILES];
    uint64_t s_first[MAX_FILES], s_stride[MAX_FILES], s_count[MAX_FILES], s_src[MAX_FILES];
    int compact; /* --compact: strided and run mappings instead of one per frame */
    int virtual_datasets, copied, mappings;
    faid_diag *d;
    int failed;
} job;

static void usage(FILE *f)
{
    fprintf(f, "usage: faidctl merge-files -o MASTER.h5 [--compact] SERIES.h5...\n"
               "Writes MASTER.h5, one file over the series files several instances wrote of one\n"
               "series: the first file's tree, and each per-frame dataset (I, frame_id, peaks,\n"
               "...) a virtual dataset of every file's rows in frame_id order. The series files\n"
               "are named by their absolute paths (HDF5_VDS_PREFIX relocates them) and must\n"
               "stay. MASTER.h5 must not exist. Where hits files (writer.hits) lie beside the\n"
               "series files, MASTER_hits.h5 likewise holds every instance's hit frames and\n"
               "peaks in frame_id order (MASTER_hits.geom beside it, MASTER.h5's /entry/hits\n"
               "links it). docs/output-files.md, docs/hits-files.md.\n"
               "  -o, --out FILE   the master file to write\n"
               "  --compact        few mappings (one strided per file dealt round robin, one\n"
               "                   per run of frames): h5py and pyFAI read it, nexusformat\n"
               "                   takes each mapping for one row; default: one per frame\n");
}

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->frame != y->frame)
        return x->frame < y->frame ? -1 : 1;
    return x->file - y->file;
}

/* Copies every attribute of src onto dst (read and written in the file's own type). */
static herr_t copy_attr(hid_t src, const char *name, const H5A_info_t *info, void *arg)
{
    (void)info;
    hid_t dst = *(hid_t *)arg;
    hid_t a = H5Aopen(src, name, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    hid_t sp = a >= 0 ? H5Aget_space(a) : -1;
    herr_t rc = -1;
    if (t >= 0 && sp >= 0) {
        hssize_t np = H5Sget_simple_extent_npoints(sp);
        size_t sz = H5Tget_size(t) * (size_t)(np > 0 ? np : 1);
        void *buf = calloc(1, sz ? sz : 1);
        if (buf && H5Aread(a, t, buf) >= 0) {
            hid_t b = H5Acreate2(dst, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
            if (b >= 0 && H5Awrite(b, t, buf) >= 0)
                rc = 0;
            if (b >= 0)
                H5Aclose(b);
            if (H5Tdetect_class(t, H5T_VLEN) > 0 || H5Tis_variable_str(t) > 0)
                H5Dvlen_reclaim(t, sp, H5P_DEFAULT, buf);
        }
        free(buf);
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

static int copy_attrs(job *j, hid_t src, hid_t dst, const char *what)
{
    hsize_t idx = 0;
    if (H5Aiterate2(src, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, copy_attr, &dst) < 0) {
        j->failed = faid_fail(j->d, FAID_EIO, "cannot copy the attributes of %s", what);
        return -1;
    }
    return 0;
}

/* The per-frame dataset `name` as a virtual dataset over every file's rows. */
static int make_virtual(job *j, const char *name, hid_t ds0)
{
    hid_t t = H5Dget_type(ds0), sp0 = H5Dget_space(ds0);
    int rank = H5Sget_simple_extent_ndims(sp0);
    hsize_t dims[H5S_MAX_RANK], d2[H5S_MAX_RANK];
    H5Sget_simple_extent_dims(sp0, dims, NULL);
    H5Sclose(sp0);
    hsize_t srcdims[MAX_FILES][H5S_MAX_RANK];
    int rc = 0;
    for (int f = 0; f < j->n && !rc; f++) {
        hid_t ds =
            H5Lexists(j->in[f], name, H5P_DEFAULT) > 0 ? H5Dopen2(j->in[f], name, H5P_DEFAULT) : -1;
        hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
        hid_t tf = ds >= 0 ? H5Dget_type(ds) : -1;
        if (sp < 0 || H5Sget_simple_extent_ndims(sp) != rank || H5Tequal(t, tf) <= 0)
            rc = faid_fail(j->d, FAID_ESHAPE, "%s: %s missing or unlike %s's", j->path[f], name,
                           j->path[0]);
        else {
            H5Sget_simple_extent_dims(sp, d2, NULL);
            for (int k = 1; k < rank && !rc; k++)
                if (d2[k] != dims[k])
                    rc = faid_fail(j->d, FAID_ESHAPE, "%s: %s has another shape than in %s",
                                   j->path[f], name, j->path[0]);
            if (!rc && d2[0] < j->nrows_in[f])
                rc = faid_fail(j->d, FAID_ESHAPE, "%s: %s has %llu rows, frame_id %llu", j->path[f],
                               name, (unsigned long long)d2[0], (unsigned long long)j->nrows_in[f]);
            memcpy(srcdims[f], d2, sizeof(d2));
        }
        if (tf >= 0)
            H5Tclose(tf);
        if (sp >= 0)
            H5Sclose(sp);
        if (ds >= 0)
            H5Dclose(ds);
    }
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    dims[0] = j->nrows;
    hid_t vspace = H5Screate_simple(rank, dims, NULL);
    /* A file dealt round robin: one strided mapping. */
    for (int f = 0; f < j->n && !rc; f++) {
        if (!j->strided[f])
            continue;
        hsize_t start[H5S_MAX_RANK] = {0}, stride[H5S_MAX_RANK], count[H5S_MAX_RANK];
        hsize_t sstart[H5S_MAX_RANK] = {0};
        for (int k = 0; k < rank; k++)
            stride[k] = 1;
        memcpy(count, dims, sizeof(count));
        start[0] = j->s_first[f];
        stride[0] = j->s_stride[f];
        count[0] = j->s_count[f];
        sstart[0] = j->s_src[f];
        hid_t src = H5Screate_simple(rank, srcdims[f], NULL);
        if (H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start, stride, count, NULL) < 0 ||
            H5Sselect_hyperslab(src, H5S_SELECT_SET, sstart, NULL, count, NULL) < 0 ||
            H5Pset_virtual(dcpl, vspace, j->path[f], name, src) < 0)
            rc = faid_fail(j->d, FAID_EIO, "cannot map rows of %s", name);
        H5Sclose(src);
        j->mappings++;
    }
    /* The other files: one mapping per frame, or with --compact per run of rows that follow
     * each other in one file (a fan-out's blocks of frames give few). One per frame by default:
     * nexusformat reads a virtual dataset as one source row per mapping (a compact master file
     * of 10 frames in 3 mappings read as 3 rows there; h5py and pyFAI read it right). Three
     * files of 10,000 frames of 1000 bins: one mapping per frame, 3.4 s to make, read whole by
     * h5py in 2.8 s; compact (strided), 0.04 s, but 22.5 s to read whole. */
    for (uint64_t i = 0; i < j->nrows && !rc;) {
        if (j->strided[j->rows[i].file]) {
            i++;
            continue;
        }
        uint64_t k = i + 1;
        while (j->compact && k < j->nrows && j->rows[k].file == j->rows[i].file &&
               j->rows[k].src_row == j->rows[k - 1].src_row + 1)
            k++;
        hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
        memcpy(count, dims, sizeof(count));
        start[0] = i;
        count[0] = k - i;
        hid_t src = H5Screate_simple(rank, srcdims[j->rows[i].file], NULL);
        hsize_t sstart[H5S_MAX_RANK] = {0};
        sstart[0] = j->rows[i].src_row;
        if (H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Sselect_hyperslab(src, H5S_SELECT_SET, sstart, NULL, count, NULL) < 0 ||
            H5Pset_virtual(dcpl, vspace, j->path[j->rows[i].file], name, src) < 0)
            rc = faid_fail(j->d, FAID_EIO, "cannot map rows of %s", name);
        H5Sclose(src);
        j->mappings++;
        i = k;
    }
    hid_t ds = -1;
    if (!rc) {
        H5Sselect_all(vspace);
        ds = H5Dcreate2(j->out, name, t, vspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        if (ds < 0)
            rc = faid_fail(j->d, FAID_EIO, "cannot create the virtual dataset %s", name);
        else if (copy_attrs(j, ds0, ds, name))
            rc = j->failed;
    }
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(vspace);
    H5Pclose(dcpl);
    H5Tclose(t);
    j->virtual_datasets += !rc;
    return rc;
}

/* Remembers that file 0's object at addr is now `name` in the output. */
static void made(job *j, haddr_t addr, const char *name)
{
    if (j->nmade < (int)(sizeof(j->addr) / sizeof(j->addr[0]))) {
        j->addr[j->nmade] = addr;
        snprintf(j->made[j->nmade], sizeof(j->made[0]), "%s", name);
        j->nmade++;
    }
}

static herr_t visit(hid_t g, const char *name, const H5L_info_t *li, void *arg)
{
    job *j = arg;
    char path[300];
    if ((size_t)snprintf(path, sizeof(path), "/%s", name) >= sizeof(path)) {
        j->failed = faid_fail(j->d, FAID_ESIZE, "%s: an object's path is longer than %zu bytes",
                              j->path[0], sizeof(path) - 1);
        return -1;
    }
    if (li->type == H5L_TYPE_SOFT || li->type == H5L_TYPE_EXTERNAL) {
        char target[512] = "";
        if (li->type == H5L_TYPE_SOFT &&
            H5Lget_val(g, name, target, sizeof(target), H5P_DEFAULT) >= 0)
            H5Lcreate_soft(target, j->out, path, H5P_DEFAULT, H5P_DEFAULT);
        return 0;
    }
    H5O_info_t oi;
    if (H5Oget_info_by_name(g, name, &oi, H5P_DEFAULT) < 0) {
        j->failed = faid_fail(j->d, FAID_EIO, "%s: cannot read %s", j->path[0], path);
        return -1;
    }
    for (int i = 0; i < j->nmade; i++)
        if (j->addr[i] == oi.addr) {
            /* A second name of an object already made (the cake's frame_id): a link again. */
            if (H5Lcreate_hard(j->out, j->made[i], j->out, path, H5P_DEFAULT, H5P_DEFAULT) < 0) {
                j->failed = faid_fail(j->d, FAID_EIO, "cannot link %s", path);
                return -1;
            }
            return 0;
        }
    if (oi.type == H5O_TYPE_GROUP) {
        hid_t src = H5Gopen2(g, name, H5P_DEFAULT);
        hid_t dst = H5Gcreate2(j->out, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int bad = src < 0 || dst < 0 || copy_attrs(j, src, dst, path);
        if (src >= 0)
            H5Gclose(src);
        if (dst >= 0)
            H5Gclose(dst);
        if (bad) {
            if (!j->failed)
                j->failed = faid_fail(j->d, FAID_EIO, "cannot make the group %s", path);
            return -1;
        }
        made(j, oi.addr, path);
        return 0;
    }
    if (oi.type != H5O_TYPE_DATASET)
        return 0;
    hid_t ds = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hsize_t maxd[H5S_MAX_RANK];
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    int per_frame =
        rank >= 1 && H5Sget_simple_extent_dims(sp, NULL, maxd) >= 0 && maxd[0] == H5S_UNLIMITED;
    int rc = 0;
    if (per_frame) {
        rc = make_virtual(j, path, ds);
    } else if (H5Ocopy(g, name, j->out, path, H5P_DEFAULT, H5P_DEFAULT) < 0) {
        rc = faid_fail(j->d, FAID_EIO, "cannot copy %s", path);
    } else {
        j->copied++;
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    if (rc) {
        j->failed = rc;
        return -1;
    }
    made(j, oi.addr, path);
    return 0;
}

/* H5Lvisit: the fewest rows of any per-frame dataset (extendible along its first axis). */
static herr_t fewest_rows(hid_t g, const char *name, const H5L_info_t *li, void *arg)
{
    uint64_t *fewest = arg;
    H5O_info_t oi;
    if (li->type != H5L_TYPE_HARD || H5Oget_info_by_name(g, name, &oi, H5P_DEFAULT) < 0 ||
        oi.type != H5O_TYPE_DATASET)
        return 0;
    hid_t ds = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hsize_t dims[H5S_MAX_RANK], maxd[H5S_MAX_RANK];
    if (sp >= 0 && H5Sget_simple_extent_ndims(sp) >= 1 &&
        H5Sget_simple_extent_dims(sp, dims, maxd) >= 0 && maxd[0] == H5S_UNLIMITED &&
        dims[0] < *fewest)
        *fewest = dims[0];
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    return 0;
}

/* frame_id of file f: its rows. A file still marked open by its writer (killed between two
 * flushes) may hold more frame ids than peak rows or frames (each reaches the file in blocks of
 * its own, docs/hits-files.md): the master takes its rows that every per-frame dataset has and
 * counts the others in cut[f]. */
static int read_frames(job *j, int f)
{
    if (H5Lexists(j->in[f], "/entry", H5P_DEFAULT) <= 0 ||
        H5Lexists(j->in[f], "/entry/data", H5P_DEFAULT) <= 0 ||
        H5Lexists(j->in[f], FRAME_ID, H5P_DEFAULT) <= 0)
        return faid_fail(j->d, FAID_EFORMAT, "%s: no %s (not a faid series file?)", j->path[f],
                         FRAME_ID);
    hid_t ds = H5Dopen2(j->in[f], FRAME_ID, H5P_DEFAULT);
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hsize_t n = 0;
    int rc = 0;
    if (sp < 0 || H5Sget_simple_extent_ndims(sp) != 1 ||
        H5Sget_simple_extent_dims(sp, &n, NULL) < 0)
        rc = faid_fail(j->d, FAID_EFORMAT, "%s: %s is not one-dimensional", j->path[f], FRAME_ID);
    uint64_t *ids = !rc && n ? malloc(n * sizeof(uint64_t)) : NULL;
    row *more = !rc && n ? realloc(j->rows, (j->nrows + n) * sizeof(row)) : NULL;
    if (!rc && n && (!ids || !more))
        rc = faid_fail(j->d, FAID_ENOMEM, "out of memory for %llu frames", (unsigned long long)n);
    if (more)
        j->rows = more;
    if (!rc && n && H5Dread(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids) < 0)
        rc = faid_fail(j->d, FAID_EIO, "%s: cannot read %s", j->path[f], FRAME_ID);
    hsize_t usable = n;
    if (!rc && j->open[f]) {
        uint64_t fewest = n;
        H5Lvisit(j->in[f], H5_INDEX_NAME, H5_ITER_INC, fewest_rows, &fewest);
        usable = fewest;
        j->cut[f] = n - fewest;
        if (j->cut[f])
            fprintf(stderr,
                    "faidctl merge-files: %s: %llu frame ids past its shortest per-frame dataset "
                    "(%llu rows) left out: its writer died between two flushes\n",
                    j->path[f], (unsigned long long)j->cut[f], (unsigned long long)fewest);
    }
    uint64_t kept = 0;
    for (hsize_t i = 0; !rc && i < usable; i++) {
        if (ids[i] == UINT64_MAX)
            continue; /* a row a failed write left unwritten (docs/output-files.md) */
        j->rows[j->nrows + kept] = (row){ids[i], i, f};
        kept++;
    }
    j->nrows += kept;
    j->nrows_in[f] = usable;
    free(ids);
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    return rc;
}

/* Writes the strings v[0..n) as the dataset `name` (variable-length UTF-8). */
static int write_strings(job *j, const char *name, const char *const *v, int n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hsize_t len = (hsize_t)n;
    hid_t sp = H5Screate_simple(1, &len, NULL);
    hid_t ds = H5Dcreate2(j->out, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = 0;
    if (ds < 0 || H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        rc = faid_fail(j->d, FAID_EIO, "cannot write %s", name);
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    return rc;
}

/* Writes v[0..n) as the uint64 dataset `name`, one value as a scalar (one the template file
 * already has, such as a series file's /entry/faid/frames, is overwritten). */
static int write_u64(job *j, const char *name, const uint64_t *v, int n, int scalar)
{
    hsize_t len = (hsize_t)n;
    int have = H5Lexists(j->out, name, H5P_DEFAULT) > 0;
    hid_t sp = have ? -1 : scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &len, NULL);
    hid_t ds =
        have ? H5Dopen2(j->out, name, H5P_DEFAULT)
             : H5Dcreate2(j->out, name, H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = 0;
    if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        rc = faid_fail(j->d, FAID_EIO, "cannot write %s", name);
    if (ds >= 0)
        H5Dclose(ds);
    if (sp >= 0)
        H5Sclose(sp);
    return rc;
}

/* The group `path` of loc, NX_class NXcollection (a group of faid's own); -1 on failure. */
static hid_t make_collection(hid_t loc, const char *path)
{
    hid_t g = H5Gcreate2(loc, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen("NXcollection"));
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = g >= 0 ? H5Acreate2(g, "NX_class", t, sp, H5P_DEFAULT, H5P_DEFAULT) : -1;
    int bad = a < 0 || H5Awrite(a, t, "NXcollection") < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    if (bad && g >= 0) {
        H5Gclose(g);
        g = -1;
    }
    return g;
}

/* What the master file holds, in /entry/faid (made, an NXcollection, where the template file
 * has none: a hits file): `frames`, and per instance its `source_files` (the file read, "" for an
 * instance without one), `source_frames` (the rows mapped) and `source_state`: "closed" (closed
 * by its writer), "open" (still marked open: its writer was killed or still writes, the master
 * has the rows of its last flush) or "none" (no file: an instance that wrote no hit frame has no
 * hits file). With series files given (a hits master), `series_files` too. */
static int write_sources(job *j, const sources *src)
{
    if (H5Lexists(j->out, "/entry/faid", H5P_DEFAULT) <= 0) {
        hid_t g = make_collection(j->out, "/entry/faid");
        if (g < 0)
            return faid_fail(j->d, FAID_EIO, "cannot make /entry/faid");
        H5Gclose(g);
    }
    const char *files[MAX_FILES], *state[MAX_FILES];
    uint64_t rows[MAX_FILES];
    for (int i = 0; i < src->n; i++) {
        int f = src->file[i];
        files[i] = f < 0 ? "" : j->path[f];
        rows[i] = f < 0 ? 0 : j->taken[f];
        state[i] = f < 0 ? "none" : j->open[f] ? "open" : "closed";
    }
    uint64_t frames = j->nrows;
    int rc = write_u64(j, "/entry/faid/frames", &frames, 1, 1);
    if (!rc)
        rc = write_strings(j, "/entry/faid/source_files", files, src->n);
    if (!rc)
        rc = write_u64(j, "/entry/faid/source_frames", rows, src->n, 0);
    if (!rc)
        rc = write_strings(j, "/entry/faid/source_state", state, src->n);
    if (!rc && src->with_series)
        rc = write_strings(j, "/entry/faid/series_files", src->series, src->n);
    return rc;
}

static int merge(job *j, const char *outpath, const sources *src)
{
    int rc = 0;
    for (int f = 0; f < j->n && !rc; f++)
        rc = read_frames(j, f);
    if (rc)
        return rc;
    qsort(j->rows, j->nrows, sizeof(row), cmp_row);
    /* A frame in two files (an instance re-sent it): the first file's row is kept. */
    uint64_t w = 0;
    for (uint64_t i = 0; i < j->nrows; i++) {
        if (w && j->rows[w - 1].frame == j->rows[i].frame) {
            j->duplicates++;
            continue;
        }
        j->rows[w++] = j->rows[i];
    }
    j->nrows = w;
    for (uint64_t i = 0; i < j->nrows; i++)
        j->taken[j->rows[i].file]++;
    /* Which files land at a constant stride, rows in order. */
    uint64_t last_out[MAX_FILES], last_src[MAX_FILES];
    for (int f = 0; f < j->n; f++) {
        j->strided[f] = 1;
        j->s_count[f] = 0;
    }
    for (uint64_t i = 0; i < j->nrows; i++) {
        int f = j->rows[i].file;
        if (!j->strided[f])
            continue;
        if (j->s_count[f] == 0) {
            j->s_first[f] = i;
            j->s_src[f] = j->rows[i].src_row;
        } else if (j->rows[i].src_row != last_src[f] + 1 ||
                   (j->s_count[f] >= 2 && i - last_out[f] != j->s_stride[f])) {
            j->strided[f] = 0;
            continue;
        } else if (j->s_count[f] == 1) {
            j->s_stride[f] = i - last_out[f];
        }
        last_out[f] = i;
        last_src[f] = j->rows[i].src_row;
        j->s_count[f]++;
    }
    for (int f = 0; f < j->n; f++)
        if (j->s_count[f] < 2 || !j->compact)
            j->strided[f] = 0; /* zero or one row: the runs below map it */
    j->out = H5Fcreate(outpath, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    if (j->out < 0)
        return faid_fail(j->d, FAID_EIO, "cannot create %s (it must not exist)", outpath);
    hid_t r0 = H5Gopen2(j->in[0], "/", H5P_DEFAULT), r1 = H5Gopen2(j->out, "/", H5P_DEFAULT);
    if (copy_attrs(j, r0, r1, "/"))
        rc = j->failed;
    H5Gclose(r0);
    H5Gclose(r1);
    if (!rc && H5Lvisit(j->in[0], H5_INDEX_NAME, H5_ITER_INC, visit, j) < 0)
        rc = j->failed ? j->failed : faid_fail(j->d, FAID_EIO, "cannot walk %s", j->path[0]);
    if (!rc)
        rc = write_sources(j, src);
    if (H5Fclose(j->out) < 0 && !rc)
        rc = faid_fail(j->d, FAID_EIO, "cannot close %s", outpath);
    j->out = -1;
    return rc;
}

/* Opens the next source file of j, by its absolute path: a file still marked open by its
 * writer (killed, or still writing) is opened as a SWMR reader, and so marked. */
static int open_source(job *j, const char *p)
{
    int f = j->n;
    if (!realpath(p, j->path[f]))
        return faid_fail(j->d, FAID_EIO, "%s: no such file", p);
    j->in[f] = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (j->in[f] < 0) {
        j->in[f] = H5Fopen(p, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT);
        j->open[f] = j->in[f] >= 0;
        if (j->open[f]) /* what a reader of the master must know; the master says it too */
            fprintf(stderr,
                    "faidctl merge-files: %s: still marked open by its writer (killed, or still "
                    "writing): its rows of the last flush are mapped; open the master as a SWMR "
                    "reader (h5py: swmr=True), or run h5clear -s on it once its writer is gone\n",
                    j->path[f]);
    }
    j->n = f + 1;
    if (j->in[f] < 0)
        return faid_fail(j->d, FAID_EIO, "%s: not an HDF5 file libhdf5 can open", p);
    return 0;
}

static void close_sources(job *j)
{
    for (int f = 0; f < j->n; f++)
        if (j->in[f] >= 0)
            H5Fclose(j->in[f]);
    j->n = 0;
    if (j->out >= 0)
        H5Fclose(j->out);
    j->out = -1;
}

static void free_job(job *j)
{
    if (j)
        free(j->rows);
    free(j);
}

/* Copies the CrystFEL geometry beside the first hits file (`x_hits.h5` -> `x_hits.geom`, the
 * same for every instance of one reduction) beside the hits master: it names datasets of the
 * file, which the master has at the same paths. None there (a geometry CrystFEL cannot take,
 * docs/hits-files.md): none here either. */
static int copy_geometry(job *h, const char *hits_out)
{
    char from[PATH_MAX + 8], to[PATH_MAX + 8];
    size_t a = strlen(h->path[0]), b = strlen(hits_out);
    if (a < 3 || b < 3 || a > PATH_MAX || b > PATH_MAX)
        return 0;
    snprintf(from, sizeof from, "%.*s.geom", (int)(a - 3), h->path[0]);
    snprintf(to, sizeof to, "%.*s.geom", (int)(b - 3), hits_out);
    FILE *in = fopen(from, "rb");
    if (!in)
        return 0;
    int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int rc = 0;
    if (!out) {
        if (fd >= 0)
            close(fd);
        rc = faid_fail(h->d, FAID_EIO, "cannot create %s (it must not exist)", to);
    }
    char buf[65536];
    size_t got;
    while (!rc && (got = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, got, out) != got)
            rc = faid_fail(h->d, FAID_EIO, "cannot write %s", to);
    if (!rc && ferror(in))
        rc = faid_fail(h->d, FAID_EIO, "cannot read %s", from);
    if (out && fclose(out) != 0 && !rc)
        rc = faid_fail(h->d, FAID_EIO, "cannot write %s", to);
    fclose(in);
    return rc;
}

/* MASTER.h5's /entry/hits: an NXcollection of external links to the hits master's /entry/data
 * (frames, frame_id) and /entry/result_1 (the peaks), by the file's name (libhdf5 looks for it
 * beside MASTER.h5). Not one link to its /entry: nexusformat 2.1 recurses without end into an
 * NXentry linked inside an NXentry (RecursionError in nxload; these two links it follows). */
static int link_hits(job *j, const char *outpath, const char *hits_out)
{
    const char *base = strrchr(hits_out, '/');
    base = base ? base + 1 : hits_out;
    hid_t m = H5Fopen(outpath, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = m >= 0 ? make_collection(m, "/entry/hits") : -1;
    int bad =
        g < 0 || H5Lcreate_external(base, "/entry/data", g, "data", H5P_DEFAULT, H5P_DEFAULT) < 0 ||
        H5Lcreate_external(base, "/entry/result_1", g, "result_1", H5P_DEFAULT, H5P_DEFAULT) < 0;
    if (g >= 0)
        H5Gclose(g);
    if (m >= 0 && H5Fclose(m) < 0)
        bad = 1;
    return bad ? faid_fail(j->d, FAID_EIO, "%s: cannot link /entry/hits to %s", outpath, base) : 0;
}

/* The hits master: MASTER_hits.h5 over the hits files beside the series files (an instance
 * without one wrote no hit frame), the geometry beside it, and MASTER.h5's /entry/hits. */
static int merge_hits(job *j, const char *outpath, sources *src)
{
    char hits_out[PATH_MAX], hp[PATH_MAX];
    job *h = calloc(1, sizeof(*h));
    if (!h)
        return faid_fail(j->d, FAID_ENOMEM, "out of memory");
    h->d = j->d;
    h->out = -1;
    h->compact = j->compact;
    int rc = 0;
    src->with_series = 1;
    for (int f = 0; f < j->n && !rc; f++) {
        src->series[f] = j->path[f];
        src->file[f] = -1;
        rc = faid_whits_path(hp, sizeof hp, j->path[f], j->d);
        if (!rc && access(hp, F_OK) == 0) {
            src->file[f] = h->n;
            rc = open_source(h, hp);
        }
    }
    if (!rc && h->n == 0) {
        printf("no hits files beside the series files\n");
    } else if (!rc) {
        rc = faid_whits_path(hits_out, sizeof hits_out, outpath, j->d);
        if (!rc)
            rc = merge(h, hits_out, src);
        if (!rc)
            rc = copy_geometry(h, hits_out);
        if (!rc)
            rc = link_hits(j, outpath, hits_out);
        uint64_t cut = 0;
        for (int f = 0; f < h->n; f++)
            cut += h->cut[f];
        if (!rc)
            printf("%s: %llu hit frames from %d hits files (%d series files without one: no hit "
                   "frame), %llu rows of killed writers' files past their peaks or frames left "
                   "out, %llu frames in two files kept once\n",
                   hits_out, (unsigned long long)h->nrows, h->n, j->n - h->n,
                   (unsigned long long)cut, (unsigned long long)h->duplicates);
    }
    close_sources(h);
    free_job(h);
    return rc;
}

int faidctl_merge_files(int argc, char **argv)
{
    const char *outpath = NULL;
    int compact = 0;
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"out", required_argument, NULL, 'o'},
        {"compact", no_argument, NULL, 'c'},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'o':
            outpath = optarg;
            break;
        case 'c':
            compact = 1;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    int n = argc - optind;
    if (!outpath || n < 1 || n > MAX_FILES) {
        fprintf(stderr, "faidctl merge-files: %s\n",
                !outpath ? "-o MASTER.h5 is required" : "give 1 to 1024 series files");
        usage(stderr);
        return 2;
    }
    job *j = calloc(1, sizeof(*j));
    faid_diag d;
    faid_diag_clear(&d);
    if (!j) {
        fprintf(stderr, "faidctl merge-files: out of memory\n");
        return 1;
    }
    j->d = &d;
    j->out = -1;
    j->compact = compact;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported here, naming the file */
    sources *src = calloc(1, sizeof(*src));
    int rc = src ? 0 : faid_fail(&d, FAID_ENOMEM, "out of memory");
    for (int f = 0; f < n && !rc; f++) {
        rc = open_source(j, argv[optind + f]);
        if (src)
            src->file[f] = f;
    }
    if (!rc) {
        src->n = n;
        rc = merge(j, outpath, src);
    }
    if (!rc)
        printf("%s: %llu frames from %d files (%d virtual datasets of %d mappings, %d datasets "
               "copied), %llu frames in two files kept once\n",
               outpath, (unsigned long long)j->nrows, n, j->virtual_datasets, j->mappings,
               j->copied, (unsigned long long)j->duplicates);
    if (!rc)
        rc = merge_hits(j, outpath, src);
    close_sources(j);
    if (rc)
        fprintf(stderr, "faidctl merge-files: %s\n", d.msg);
    free(src);
    free_job(j);
    return rc ? 1 : 0;
}
