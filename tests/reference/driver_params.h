/* driver_params: what the helper programs of the Python tests (the tests/reference drivers) share.
 * Each reads a parameter file of "key value" lines (key up to the first space, the rest of the
 * line as value), looks values up by key, loads input arrays from .npy files named by a key and
 * writes its results as 1-D .npy files into an output folder. Header-only so that
 * test_integrate_ref.py can still compile csr_driver.c alone, without the build. */
#ifndef FAID_DRIVER_PARAMS_H
#define FAID_DRIVER_PARAMS_H

#include "faid_geometry.h"
#include "faid_npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char key[64];
    char val[1024];
} driver_kv;

static driver_kv driver_params[128];
static int driver_nparams;

/* Reads PATH into the parameter table; returns 0, or -1 when the file cannot be opened. */
static inline int driver_read_params(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1200];
    while (driver_nparams < 128 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        *sp = 0;
        driver_kv *p = &driver_params[driver_nparams];
        snprintf(p->key, sizeof p->key, "%.63s", line);
        snprintf(p->val, sizeof p->val, "%.1023s", sp + 1);
        driver_nparams++;
    }
    fclose(f);
    return 0;
}

/* A driver's start: checks its command line (NAME PARAMS OUTDIR) and reads PARAMS. Returns
 * OUTDIR, or NULL (after a usage line) when the command line or PARAMS is unusable. */
static inline const char *driver_start(int argc, char **argv, const char *name)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PARAMS OUTDIR\n", name);
        return NULL;
    }
    if (driver_read_params(argv[1]))
        return NULL;
    return argv[2];
}

static inline const char *get(const char *key)
{
    for (int i = 0; i < driver_nparams; i++)
        if (!strcmp(driver_params[i].key, key))
            return driver_params[i].val;
    return NULL;
}

static inline double getd(const char *key, double def)
{
    const char *v = get(key);
    return v ? strtod(v, NULL) : def;
}

/* The array of the .npy file named by KEY (NULL when KEY is absent); exits with 2 when the file
 * cannot be read or is not N values of type WANT. */
static inline void *load(const char *key, faid_dtype want, size_t n, faid_array *a)
{
    const char *path = get(key);
    if (!path)
        return NULL;
    faid_diag d = {0};
    memset(a, 0, sizeof(*a));
    if (faid_npy_read(path, a, &d) || a->dtype != want || a->count != n) {
        fprintf(stderr, "%s: cannot use %s (%s)\n", key, path, d.msg);
        exit(2);
    }
    return a->data;
}

/* Writes DIR/NAME.npy, N values of type T; exits with 2 on failure. */
static inline void save(const char *dir, const char *name, faid_dtype t, size_t n, const void *data)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    size_t shape[1] = {n};
    faid_diag d = {0};
    if (faid_npy_write(path, t, 1, shape, data, &d)) {
        fprintf(stderr, "write %s: %s\n", path, d.msg);
        exit(2);
    }
}

/* The PONI geometry keys (dist, poni1, poni2, rot1..3, wavelength, pixel1, pixel2) into G, with
 * the drivers' defaults; rows, cols and orientation are left to the caller. */
static inline void driver_poni(faid_geometry *g)
{
    g->dist = getd("dist", 0.1);
    g->poni1 = getd("poni1", 0);
    g->poni2 = getd("poni2", 0);
    g->rot1 = getd("rot1", 0);
    g->rot2 = getd("rot2", 0);
    g->rot3 = getd("rot3", 0);
    g->wavelength = getd("wavelength", 1e-10);
    g->pixel1 = getd("pixel1", 1e-4);
    g->pixel2 = getd("pixel2", 1e-4);
}

#endif
