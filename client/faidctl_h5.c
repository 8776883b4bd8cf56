/* faidctl_h5: frames of an EIGER / NeXus HDF5 file read as stored (see faidctl_h5.h). */
#include "faidctl_h5.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FAID_HAVE_HDF5
#include <hdf5.h>

/* HDF5 filter ids registered for the compressors faid decodes. */
#define FILTER_BITSHUFFLE  32008
#define FILTER_LZ4         32004
#define BSHUF_LZ4          2    /* bitshuffle's cd_values[4]: compression after the shuffle */
#define DECODED_PER_STORED 2048 /* largest decoded / stored ratio read through libhdf5 */

/* True when every component of path exists (H5Lexists needs its parents to). */
static int exists(hid_t f, const char *path)
{
    char buf[512];
    if (strlen(path) >= sizeof(buf))
        return 0;
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (H5Lexists(f, buf, H5P_DEFAULT) <= 0)
                return 0;
            *p = c;
            if (!c)
                return 1;
        }
    }
}

static int read_scalar(hid_t f, const char *path, double *v)
{
    if (!exists(f, path))
        return 0;
    hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
    if (ds < 0)
        return 0;
    hid_t sp = H5Dget_space(ds);
    int ok = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1 &&
             H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0;
    if (sp >= 0)
        H5Sclose(sp);
    H5Dclose(ds);
    return ok;
}

/* libhdf5's in-memory type of exactly faid's element type (size faid_dtype_size). */
static hid_t native_of(faid_dtype dt)
{
    switch (dt) {
    case FAID_DT_U8:
        return H5T_NATIVE_UINT8;
    case FAID_DT_I8:
        return H5T_NATIVE_INT8;
    case FAID_DT_U16:
        return H5T_NATIVE_UINT16;
    case FAID_DT_I16:
        return H5T_NATIVE_INT16;
    case FAID_DT_U32:
        return H5T_NATIVE_UINT32;
    case FAID_DT_I32:
        return H5T_NATIVE_INT32;
    default:
        return H5T_NATIVE_FLOAT;
    }
}

static faid_dtype dtype_of(hid_t t, int *little)
{
    H5T_class_t c = H5Tget_class(t);
    size_t n = H5Tget_size(t);
    *little = H5Tget_order(t) == H5T_ORDER_LE || n == 1;
    if (c == H5T_FLOAT)
        return n == 4 ? FAID_DT_F32 : FAID_DT_INVALID;
    if (c != H5T_INTEGER)
        return FAID_DT_INVALID;
    int sgn = H5Tget_sign(t) == H5T_SGN_2;
    switch (n) {
    case 1:
        return sgn ? FAID_DT_I8 : FAID_DT_U8;
    case 2:
        return sgn ? FAID_DT_I16 : FAID_DT_U16;
    case 4:
        return sgn ? FAID_DT_I32 : FAID_DT_U32;
    default:
        return FAID_DT_INVALID;
    }
}

static int add_frame(faidctl_h5 *h, uint8_t *buf, size_t len, faid_diag *d)
{
    uint8_t **nd = realloc(h->data, (size_t)(h->n + 1) * sizeof(*nd));
    if (nd)
        h->data = nd;
    size_t *nl = realloc(h->len, (size_t)(h->n + 1) * sizeof(*nl));
    if (nl)
        h->len = nl;
    if (!nd || !nl) {
        free(buf);
        return faid_fail(d, FAID_ENOMEM, "out of memory for frame %llu", (unsigned long long)h->n);
    }
    h->data[h->n] = buf;
    h->len[h->n] = len;
    h->n++;
    return 0;
}

/* The frame ids beside the frames dataset `path` (its group's `frame_id`): 0 with h->frame_id
 * set (and *limit lowered to their count), 0 without ids, or an error for ids that are there
 * but not a 1-D integer dataset. */
static int read_frame_ids(hid_t f, const char *path, hsize_t *limit, faidctl_h5 *h, faid_diag *d)
{
    char p[300];
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) + 10 >= sizeof(p))
        return 0;
    snprintf(p, sizeof(p), "%.*s/frame_id", (int)(slash - path), path);
    if (!exists(f, p))
        return 0;
    hid_t ds = H5Dopen2(f, p, H5P_DEFAULT);
    if (ds < 0)
        return faid_fail(d, FAID_EFORMAT, "%s: cannot open", p);
    hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds);
    int rc = 0;
    hsize_t n = 0;
    if (sp < 0 || ty < 0 || H5Sget_simple_extent_ndims(sp) != 1 ||
        H5Tget_class(ty) != H5T_INTEGER) {
        rc = faid_fail(d, FAID_EFORMAT, "%s: not a 1-D integer dataset", p);
    } else {
        H5Sget_simple_extent_dims(sp, &n, NULL);
        if (n < *limit)
            *limit = n;
        /* Only the ids of frames there are: a file claiming 10^9 ids is not allocated for. */
        hsize_t want = *limit;
        h->frame_id = malloc((size_t)(want ? want : 1) * sizeof(uint64_t));
        hsize_t start = 0;
        hid_t msp = H5Screate_simple(1, &want, NULL);
        if (!h->frame_id) {
            rc = faid_fail(d, FAID_ENOMEM, "out of memory for %llu frame ids",
                           (unsigned long long)want);
        } else if (want > 0 &&
                   (msp < 0 ||
                    H5Sselect_hyperslab(sp, H5S_SELECT_SET, &start, NULL, &want, NULL) < 0 ||
                    H5Dread(ds, H5T_NATIVE_UINT64, msp, sp, H5P_DEFAULT, h->frame_id) < 0)) {
            rc = faid_fail(d, FAID_EIO, "%s: read failed", p);
        }
        if (msp >= 0)
            H5Sclose(msp);
        if (rc == 0)
            h->has_frame_ids = 1;
    }
    if (ty >= 0)
        H5Tclose(ty);
    if (sp >= 0)
        H5Sclose(sp);
    H5Dclose(ds);
    return rc;
}

/* Reads every frame of one dataset ([n, rows, cols] or one [rows, cols] frame) into h. */
static int read_dataset(hid_t f, const char *path, int with_ids, faidctl_h5 *h, faid_diag *d)
{
    hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
    if (ds < 0)
        return faid_fail(d, FAID_EIO,
                         "dataset %s: cannot open (missing, or an external link to "
                         "a data file that is not beside the master file)",
                         path);
    hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds), pl = H5Dget_create_plist(ds);
    int rc = 0;
    hsize_t dims[3] = {1, 0, 0};
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (nd == 3) {
        H5Sget_simple_extent_dims(sp, dims, NULL);
    } else if (nd == 2) {
        H5Sget_simple_extent_dims(sp, dims + 1, NULL);
    } else {
        rc = faid_fail(d, FAID_ESHAPE, "dataset %s has %d dimensions, not 2 or 3", path, nd);
        goto done;
    }
    int little = 0;
    faid_dtype dt = dtype_of(ty, &little);
    if (dt == FAID_DT_INVALID) {
        rc = faid_fail(d, FAID_EDTYPE, "dataset %s: element type is not a frame type", path);
        goto done;
    }
    if (dims[1] == 0 || dims[2] == 0 || dims[1] > 65536 || dims[2] > 65536) {
        rc = faid_fail(d, FAID_ESHAPE, "dataset %s: frame shape [%llu, %llu]", path,
                       (unsigned long long)dims[1], (unsigned long long)dims[2]);
        goto done;
    }
    /* Direct chunk read when a chunk is one frame and its filters are ones faid decodes. */
    faid_encoding enc = FAID_ENC_NONE;
    int direct = 0;
    if (nd == 3 && little && H5Pget_layout(pl) == H5D_CHUNKED) {
        hsize_t cd[3];
        int nf = H5Pget_nfilters(pl);
        if (H5Pget_chunk(pl, 3, cd) == 3 && cd[0] == 1 && cd[1] == dims[1] && cd[2] == dims[2]) {
            if (nf == 0) {
                direct = 1;
            } else if (nf == 1) {
                unsigned flags, cdv[16];
                size_t ncd = 16;
                char name[64];
                unsigned cfg;
                H5Z_filter_t id =
                    H5Pget_filter2(pl, 0, &flags, &ncd, cdv, sizeof(name), name, &cfg);
                if (id == FILTER_BITSHUFFLE && ncd >= 5 && cdv[4] == BSHUF_LZ4) {
                    direct = 1;
                    enc = FAID_ENC_BSLZ4;
                } else if (id == FILTER_LZ4) {
                    direct = 1;
                    enc = FAID_ENC_LZ4;
                }
            }
        }
    }
    if (h->n == 0) {
        h->rows = (int)dims[1];
        h->cols = (int)dims[2];
        h->dtype = dt;
        h->encoding = enc;
        h->direct = direct;
        snprintf(h->dataset, sizeof(h->dataset), "%s", path);
    } else if (h->rows != (int)dims[1] || h->cols != (int)dims[2] || h->dtype != dt ||
               h->encoding != enc || h->direct != direct) {
        rc = faid_fail(d, FAID_EFORMAT, "dataset %s differs from %s in shape, type or filters",
                       path, h->dataset);
        goto done;
    }
    size_t raw = (size_t)dims[1] * (size_t)dims[2] * faid_dtype_size(dt);
    /* Frame ids exist for one dataset of frames (a hits file), not for a master file's
     * data_000001, data_000002, ... */
    if (nd == 3 && with_ids) {
        rc = read_frame_ids(f, path, &dims[0], h, d);
        if (rc)
            goto done;
    }
    /* Frames read through libhdf5 are held decoded: a file may claim more of them than it stores
     * (unwritten chunks read as the fill value), e.g. 10^9 frames in a few kB, which would take
     * without end and without bound. The decoded size may exceed what is stored by at most
     * DECODED_PER_STORED (deflate's own limit is about 1032:1). */
    if (!direct) {
        hsize_t stored = H5Dget_storage_size(ds);
        if (stored == 0 || dims[0] > ((hsize_t)DECODED_PER_STORED * stored) / raw) {
            rc = faid_fail(d, FAID_ESIZE,
                           "dataset %s: %llu frames of %zu bytes but only %llu bytes stored", path,
                           (unsigned long long)dims[0], raw, (unsigned long long)stored);
            goto done;
        }
    }
    /* The memory type is faid's element type, never the file's "native" equivalent: for an
     * odd file type (a 4-byte float of non-IEEE precision, say) that can be wider than the
     * element and H5Dread wrote past the frame buffer (found by the h5 fuzz target). */
    hid_t mem = direct ? -1 : H5Tcopy(native_of(dt));
    /* The file the dataset lives in (a master file's data are external links to others). */
    hsize_t fsize = 0;
    hid_t df = H5Iget_file_id(ds);
    if (df < 0 || H5Fget_filesize(df, &fsize) < 0)
        fsize = 0;
    if (df >= 0)
        H5Fclose(df);
    hid_t msp = direct ? -1 : H5Screate_simple(2, dims + 1, NULL);
    for (hsize_t k = 0; k < dims[0] && rc == 0; k++) {
        uint8_t *buf;
        size_t len;
        if (direct) {
            hsize_t off[3] = {k, 0, 0};
            hsize_t sz = 0;
            uint32_t fmask = 0;
            /* A stored chunk lies inside its file: a chunk index claiming more (up to 4 GiB in
             * a 2 kB file, found by the h5 fuzz target) is not allocated for. */
            if (H5Dget_chunk_storage_size(ds, off, &sz) < 0 || sz == 0 || sz > ((hsize_t)1 << 32) ||
                sz > fsize) {
                rc = faid_fail(d, FAID_EIO, "%s frame %llu: no stored chunk", path,
                               (unsigned long long)k);
                break;
            }
            buf = malloc((size_t)sz);
            if (!buf) {
                rc = faid_fail(d, FAID_ENOMEM, "out of memory for a %llu-byte chunk",
                               (unsigned long long)sz);
                break;
            }
            if (H5Dread_chunk(ds, H5P_DEFAULT, off, &fmask, buf) < 0) {
                free(buf);
                rc = faid_fail(d, FAID_EIO, "%s frame %llu: direct chunk read failed", path,
                               (unsigned long long)k);
                break;
            }
            if (fmask == 1 && enc == FAID_ENC_LZ4 && sz == raw && sz < UINT32_MAX - 16) {
                /* Stored unfiltered (a hits file's raw LZ4 block as long as its pixels): an
                 * HDF5-LZ4 chunk of one block whose length equals its decoded size is those
                 * bytes as they are. */
                uint8_t *w = malloc((size_t)sz + 16);
                if (!w) {
                    free(buf);
                    rc = faid_fail(d, FAID_ENOMEM, "out of memory for a %llu-byte chunk",
                                   (unsigned long long)sz);
                    break;
                }
                uint64_t t = sz;
                for (int i = 7; i >= 0; i--, t >>= 8)
                    w[i] = (uint8_t)t;
                for (int j = 0; j < 2; j++)
                    for (int i = 3, u = 0; i >= 0; i--, u += 8)
                        w[8 + 4 * j + i] = (uint8_t)(sz >> u);
                memcpy(w + 16, buf, (size_t)sz);
                free(buf);
                buf = w;
                sz += 16;
                fmask = 0;
            }
            if (fmask != 0 && enc != FAID_ENC_NONE) {
                /* HDF5 stored this chunk without its filter (it did not compress): it would need
                 * another encoding than the other frames. */
                free(buf);
                rc = faid_fail(d, FAID_EFORMAT, "%s frame %llu: chunk stored unfiltered", path,
                               (unsigned long long)k);
                break;
            }
            len = (size_t)sz;
        } else {
            hsize_t start[3] = {k, 0, 0}, count[3] = {1, dims[1], dims[2]};
            buf = malloc(raw);
            hid_t fsp = H5Dget_space(ds);
            if (!buf || fsp < 0 ||
                (nd == 3 &&
                 H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0) ||
                H5Dread(ds, mem, msp, fsp, H5P_DEFAULT, buf) < 0) {
                free(buf);
                if (fsp >= 0)
                    H5Sclose(fsp);
                rc = faid_fail(d, FAID_EIO,
                               "%s frame %llu: read failed (a filter without its "
                               "plugin?)",
                               path, (unsigned long long)k);
                break;
            }
            H5Sclose(fsp);
            len = raw;
        }
        rc = add_frame(h, buf, len, d);
    }
    if (mem >= 0)
        H5Tclose(mem);
    if (msp >= 0)
        H5Sclose(msp);
done:
    if (pl >= 0)
        H5Pclose(pl);
    if (ty >= 0)
        H5Tclose(ty);
    if (sp >= 0)
        H5Sclose(sp);
    H5Dclose(ds);
    return rc;
}

int faidctl_h5_read_here(const char *path, const char *dataset, faidctl_h5 *h, faid_diag *d)
{
    memset(h, 0, sizeof(*h));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return faid_fail(d, FAID_EIO, "%s: cannot open as HDF5", path);
    int rc = 0;
    if (dataset) {
        rc = read_dataset(f, dataset, 1, h, d);
        h->ndatasets = 1;
    } else if (exists(f, "/entry/data/data")) {
        rc = read_dataset(f, "/entry/data/data", 1, h, d);
        h->ndatasets = 1;
    } else {
        /* EIGER master file: data_000001, data_000002, ... */
        for (int k = 1; k < 1000000 && rc == 0; k++) {
            char p[64];
            snprintf(p, sizeof(p), "/entry/data/data_%06d", k);
            if (!exists(f, p))
                break;
            rc = read_dataset(f, p, 0, h, d);
            h->ndatasets++;
        }
        if (rc == 0 && h->ndatasets == 0)
            rc = faid_fail(d, FAID_EFORMAT,
                           "%s: no /entry/data/data nor /entry/data/data_000001 (--dataset "
                           "names another)",
                           path);
    }
    if (rc == 0 && h->n == 0)
        rc = faid_fail(d, FAID_EFORMAT, "%s: no frames", path);
    if (rc == 0) {
        const char *det = "/entry/instrument/detector/";
        char p[128];
        double *v[] = {&h->beam_center_x, &h->beam_center_y, &h->distance, &h->pixel_size_x,
                       &h->pixel_size_y};
        const char *k[] = {"beam_center_x", "beam_center_y", "detector_distance", "x_pixel_size",
                           "y_pixel_size"};
        int found = 0;
        for (int i = 0; i < 5; i++) {
            snprintf(p, sizeof(p), "%s%s", det, k[i]);
            found += read_scalar(f, p, v[i]);
        }
        found += read_scalar(f, "/entry/instrument/beam/incident_wavelength", &h->wavelength);
        h->has_geometry = found == 6 && h->distance > 0 && h->pixel_size_x > 0 &&
                          h->pixel_size_y > 0 && h->wavelength > 0;
    }
    H5Fclose(f);
    if (rc)
        faidctl_h5_free(h);
    return rc;
}

#else

int faidctl_h5_read_here(const char *path, const char *dataset, faidctl_h5 *h, faid_diag *d)
{
    (void)dataset;
    memset(h, 0, sizeof(*h));
    return faid_fail(d, FAID_EUNSUP, "%s: this faidctl was built without libhdf5", path);
}

#endif

/* ---- the reader in a child process ---------------------------------------------------------
 * libhdf5 1.10 crashes on some malformed files (found by the h5 fuzz target, inside the library):
 * the file is read in a forked child, which sends what it read through a pipe: the return code,
 * the diagnostic, the header of h, then each frame as [length, bytes]. A child that dies becomes
 * an error naming the file and the signal. */

static int put_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int get_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static void child(int fd, const char *path, const char *dataset)
{
    faidctl_h5 h;
    faid_diag d;
    faid_diag_clear(&d);
    int32_t rc = faidctl_h5_read_here(path, dataset, &h, &d);
    faidctl_h5 head = h;
    head.data = NULL;
    head.len = NULL;
    head.frame_id = NULL;
    int bad = put_all(fd, &rc, sizeof(rc)) || put_all(fd, &d, sizeof(d)) ||
              put_all(fd, &head, sizeof(head));
    for (uint64_t k = 0; rc == 0 && !bad && k < h.n; k++) {
        uint64_t len = h.len[k];
        bad = put_all(fd, &len, sizeof(len)) || put_all(fd, h.data[k], h.len[k]);
    }
    if (rc == 0 && !bad && h.has_frame_ids)
        bad = put_all(fd, h.frame_id, (size_t)h.n * sizeof(uint64_t));
    _exit(bad ? 3 : 0);
}

int faidctl_h5_read(const char *path, const char *dataset, faidctl_h5 *h, faid_diag *d)
{
    memset(h, 0, sizeof(*h));
    int p[2];
    if (pipe(p) != 0)
        return faid_fail(d, FAID_EIO, "%s: pipe: %s", path, strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return faid_fail(d, FAID_EIO, "%s: fork: %s", path, strerror(errno));
    }
    if (pid == 0) {
        close(p[0]);
        child(p[1], path, dataset);
    }
    close(p[1]);
    int32_t rc = 0;
    faid_diag cd;
    faidctl_h5 head;
    int bad = get_all(p[0], &rc, sizeof(rc)) || get_all(p[0], &cd, sizeof(cd)) ||
              get_all(p[0], &head, sizeof(head));
    if (!bad && rc == 0) {
        head.data = calloc(head.n ? head.n : 1, sizeof(*head.data));
        head.len = calloc(head.n ? head.n : 1, sizeof(*head.len));
        uint64_t got = 0;
        bad = !head.data || !head.len;
        for (; !bad && got < head.n; got++) {
            uint64_t len;
            if (get_all(p[0], &len, sizeof(len)) || !(head.data[got] = malloc(len ? len : 1)) ||
                get_all(p[0], head.data[got], len)) {
                bad = 1;
                break;
            }
            head.len[got] = len;
        }
        head.frame_id = NULL;
        if (!bad && head.has_frame_ids) {
            head.frame_id = malloc((size_t)(head.n ? head.n : 1) * sizeof(uint64_t));
            bad = !head.frame_id || get_all(p[0], head.frame_id, (size_t)head.n * sizeof(uint64_t));
        }
        if (bad) {
            faidctl_h5_free(&head); /* unread entries are NULL */
        } else {
            *h = head;
        }
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(st)) {
        faidctl_h5_free(h);
        return faid_fail(
            d, FAID_EFORMAT,
            "%s: the HDF5 library crashed reading this file (signal %d): it is malformed", path,
            WTERMSIG(st));
    }
    if (bad || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        faidctl_h5_free(h);
        return faid_fail(d, FAID_EIO, "%s: the HDF5 reader process failed", path);
    }
    if (rc != 0) {
        if (d)
            *d = cd;
        return rc;
    }
    return 0;
}

void faidctl_h5_free(faidctl_h5 *h)
{
    for (uint64_t i = 0; h->data && i < h->n; i++)
        free(h->data[i]);
    free(h->data);
    free(h->len);
    free(h->frame_id);
    memset(h, 0, sizeof(*h));
}
