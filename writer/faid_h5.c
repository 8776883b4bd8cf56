/* faid_h5: see faid_h5.h. */
#include "faid_h5.h"

#include <pthread.h>
#include <string.h>

static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;

static void quiet_now(void)
{
    /* No libhdf5 clean-up at exit: faid closes its files itself, and libhdf5 1.10.8 crashes in
     * that clean-up (H5F__close_cb, SIGSEGV) on a file whose H5Fclose had failed (a hits file
     * under a file size limit: reference.nxmx_file). Only effective before libhdf5's first use. */
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void faid_h5_quiet(void)
{
    pthread_once(&quiet_once, quiet_now);
}

hid_t faid_h5_create(const char *path, faid_diag *d)
{
    faid_h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        return faid_fail(d, FAID_EIO, "%s: HDF5 file access list not created", path);
    if (H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_LATEST) < 0) {
        H5Pclose(fapl);
        return faid_fail(d, FAID_EIO, "%s: HDF5 1.10 file format not available", path);
    }
    hid_t f = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return faid_fail(d, FAID_EIO,
                         "%s: not created (it exists, or the directory is not "
                         "writable or full)",
                         path);
    return f;
}

static hid_t str_type(const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return t;
    size_t n = strlen(value);
    if (H5Tset_size(t, n ? n : 1) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0 ||
        H5Tset_strpad(t, H5T_STR_NULLPAD) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static int write_str(hid_t loc, const char *name, const char *value, int attr)
{
    hid_t t = str_type(value);
    if (t < 0)
        return FAID_EIO;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t o = -1;
    int rc = FAID_EIO;
    if (sp >= 0) {
        o = attr ? H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)
                 : H5Dcreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (o >= 0) {
            const char *v = value[0] ? value : " ";
            herr_t w = attr ? H5Awrite(o, t, v) : H5Dwrite(o, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
            rc = w < 0 ? FAID_EIO : 0;
            if (attr)
                H5Aclose(o);
            else
                H5Dclose(o);
        }
        H5Sclose(sp);
    }
    H5Tclose(t);
    return rc;
}

int faid_h5_attr_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return FAID_EIO;
    int rc = FAID_EIO;
    hid_t sp = -1, a = -1;
    if (H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
        (sp = H5Screate(H5S_SCALAR)) >= 0 &&
        (a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
        H5Awrite(a, t, &value) >= 0)
        rc = 0;
    if (a >= 0)
        H5Aclose(a);
    if (sp >= 0)
        H5Sclose(sp);
    H5Tclose(t);
    return rc;
}

int faid_h5_dset_str(hid_t loc, const char *name, const char *value)
{
    return write_str(loc, name, value, 0);
}

hid_t faid_h5_dset(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, hsize_t n,
                   const void *v, const char *units)
{
    hid_t sp = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
    if (sp < 0)
        return FAID_EIO;
    hid_t ds = H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(sp);
    if (ds < 0)
        return FAID_EIO;
    if ((v && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) ||
        (units && faid_h5_attr_str(ds, "units", units))) {
        H5Dclose(ds);
        return FAID_EIO;
    }
    return ds;
}

hid_t faid_h5_growing(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *inner,
                      hsize_t chunk_rows, const void *fill, int deflate)
{
    hsize_t dims[3] = {0, 0, 0}, maxd[3] = {H5S_UNLIMITED, 0, 0}, chunk[3] = {chunk_rows, 0, 0};
    for (int i = 1; i < rank && i < 3; i++)
        dims[i] = maxd[i] = chunk[i] = inner[i - 1];
    hid_t sp = H5Screate_simple(rank, dims, maxd);
    hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = FAID_EIO;
    if (sp >= 0 && pl >= 0 && H5Pset_chunk(pl, rank, chunk) >= 0 &&
        (!fill || H5Pset_fill_value(pl, type, fill) >= 0) &&
        (!deflate || H5Pset_deflate(pl, 1) >= 0))
        ds = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (pl >= 0)
        H5Pclose(pl);
    if (sp >= 0)
        H5Sclose(sp);
    return ds < 0 ? FAID_EIO : ds;
}

hid_t faid_h5_group(hid_t loc, const char *name, const char *nx_class)
{
    hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return FAID_EIO;
    if (nx_class && faid_h5_attr_str(g, "NX_class", nx_class) < 0) {
        H5Gclose(g);
        return FAID_EIO;
    }
    return g;
}
