/* nxmx_driver: drives the hits-file module (writer/faid_nxmx.h) for
 * tests/reference/test_nxmx_file.py. It reads one command per line on stdin and answers each with
 * one line on stdout, "ok [value]" or "err FAID_CODE message", so a test can write, flush, look at
 * the file with real readers (h5py, nxmx) while it is open, and go on:
 *
 *   open key=value ...   faid_nxmx_open: path, rows, cols, dtype, encoding, pixel1, pixel2, dist,
 *                        poni1, poni2, rot1, rot2, rot3, wavelength (m), orientation, max_peaks,
 *                        series, swmr, detector, mask (a file of rows*cols bytes)
 *   append ID CHUNK [PEAKS]  faid_nxmx_append of the bytes of file CHUNK with frame id ID and the
 *                        peaks of file PEAKS: float32 records (x, y, intensity, snr, npix,
 *                        max_pixel), as many as the file holds
 *   repeat N ID0 CHUNK   appends the chunk of file CHUNK N times (ids ID0, ID0 + 1, ...) and
 *                        answers "ok SECONDS" (the figure of docs/hits-files.md's speed line)
 *   flush | frames | bytes | close
 *   geom PATH            faid_nxmx_write_crystfel_geom with the parameters of the last open
 *   geompath HITS        faid_nxmx_geom_path
 *   layout               the rows of faid_nxmx_file_layout, one per line (path, kind, type, shape,
 *                        units, when, tab-separated), then "ok N"
 *   quit */
#include "faid_nxmx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *b = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                fclose(f);
                return NULL;
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    *len = n;
    return b ? b : malloc(1);
}

typedef struct state {
    faid_nxmx *h;
    faid_nxmx_params p;
    faid_geometry g;
    char path[4096], series[512], detector[256];
    uint8_t *mask;
} state;

static void reply(int rc, const faid_diag *d, const char *value)
{
    if (rc < 0)
        printf("err %s %s\n", faid_errname(rc), d->msg);
    else
        printf("ok%s%s\n", value ? " " : "", value ? value : "");
    fflush(stdout);
}

static int do_open(state *s, char *args, faid_diag *d)
{
    memset(&s->g, 0, sizeof(s->g));
    memset(&s->p, 0, sizeof(s->p));
    free(s->mask);
    s->mask = NULL;
    s->g.orientation = 3;
    s->p.geom = &s->g;
    s->p.dtype = FAID_DT_U16;
    s->p.max_peaks = 16;
    const char *maskfile = NULL;
    for (char *t = strtok(args, " \t\n"); t; t = strtok(NULL, " \t\n")) {
        char *eq = strchr(t, '=');
        if (!eq)
            return faid_fail(d, FAID_EINVAL, "driver: '%s' is not key=value", t);
        *eq = '\0';
        const char *k = t, *v = eq + 1;
        double x = atof(v);
        if (!strcmp(k, "path"))
            snprintf(s->path, sizeof(s->path), "%s", v), s->p.path = s->path;
        else if (!strcmp(k, "rows"))
            s->g.rows = (int)x;
        else if (!strcmp(k, "cols"))
            s->g.cols = (int)x;
        else if (!strcmp(k, "dtype"))
            s->p.dtype = faid_dtype_parse(v);
        else if (!strcmp(k, "encoding")) {
            if (faid_encoding_parse(v, &s->p.encoding) < 0)
                return faid_fail(d, FAID_EINVAL, "driver: encoding %s", v);
        } else if (!strcmp(k, "pixel1"))
            s->g.pixel1 = x;
        else if (!strcmp(k, "pixel2"))
            s->g.pixel2 = x;
        else if (!strcmp(k, "dist"))
            s->g.dist = x;
        else if (!strcmp(k, "poni1"))
            s->g.poni1 = x;
        else if (!strcmp(k, "poni2"))
            s->g.poni2 = x;
        else if (!strcmp(k, "rot1"))
            s->g.rot1 = x;
        else if (!strcmp(k, "rot2"))
            s->g.rot2 = x;
        else if (!strcmp(k, "rot3"))
            s->g.rot3 = x;
        else if (!strcmp(k, "wavelength"))
            s->g.wavelength = x;
        else if (!strcmp(k, "orientation"))
            s->g.orientation = (int)x;
        else if (!strcmp(k, "max_peaks"))
            s->p.max_peaks = (int32_t)x;
        else if (!strcmp(k, "series"))
            snprintf(s->series, sizeof(s->series), "%s", v), s->p.series = s->series;
        else if (!strcmp(k, "detector"))
            snprintf(s->detector, sizeof(s->detector), "%s", v), s->p.detector_name = s->detector;
        else if (!strcmp(k, "swmr"))
            s->p.swmr = (int)x;
        else if (!strcmp(k, "mask"))
            maskfile = v;
        else
            return faid_fail(d, FAID_EINVAL, "driver: unknown key %s", k);
    }
    if (maskfile) {
        size_t n = 0;
        s->mask = slurp(maskfile, &n);
        if (!s->mask || n != (size_t)s->g.rows * (size_t)s->g.cols)
            return faid_fail(d, FAID_EINVAL, "driver: mask %s: %zu bytes", maskfile, n);
        s->p.mask = s->mask;
    }
    return faid_nxmx_open(&s->h, &s->p, d);
}

static int do_append(state *s, char *args, faid_diag *d)
{
    char *id = strtok(args, " \t\n"), *cf = strtok(NULL, " \t\n"), *pf = strtok(NULL, " \t\n");
    if (!id || !cf)
        return faid_fail(d, FAID_EINVAL, "driver: append ID CHUNK [PEAKS]");
    size_t len = 0;
    uint8_t *chunk = slurp(cf, &len);
    if (!chunk)
        return faid_fail(d, FAID_EIO, "driver: %s unreadable", cf);
    faid_peak_list *l = NULL;
    if (pf) {
        size_t plen = 0;
        float *rec = (float *)slurp(pf, &plen);
        int32_t n = (int32_t)(plen / (6 * sizeof(float)));
        l = rec ? faid_peak_list_new(n > 0 ? n : 1) : NULL;
        for (int32_t i = 0; l && i < n; i++) {
            const float *r = rec + 6 * i;
            faid_peak_list_push(l, r[0], r[1], r[2], r[2] / (r[3] != 0 ? r[3] : 1), r[3], r[5],
                                (int32_t)r[4], 0);
        }
        free(rec);
        if (!l) {
            free(chunk);
            return faid_fail(d, FAID_EIO, "driver: peaks %s unreadable", pf);
        }
    }
    int rc = faid_nxmx_append(s->h, strtoull(id, NULL, 10), chunk, len, l, d);
    faid_peak_list_destroy(&l);
    free(chunk);
    return rc;
}

static int do_repeat(state *s, char *args, double *secs, faid_diag *d)
{
    char *n = strtok(args, " \t\n"), *id = strtok(NULL, " \t\n"), *cf = strtok(NULL, " \t\n");
    if (!n || !id || !cf)
        return faid_fail(d, FAID_EINVAL, "driver: repeat N ID0 CHUNK");
    size_t len = 0;
    uint8_t *chunk = slurp(cf, &len);
    if (!chunk)
        return faid_fail(d, FAID_EIO, "driver: %s unreadable", cf);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = 0;
    uint64_t count = strtoull(n, NULL, 10), first = strtoull(id, NULL, 10);
    for (uint64_t k = 0; k < count && rc == 0; k++)
        rc = faid_nxmx_append(s->h, first + k, chunk, len, NULL, d);
    if (rc == 0)
        rc = faid_nxmx_flush(s->h, d);
    clock_gettime(CLOCK_MONOTONIC, &b);
    *secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    free(chunk);
    return rc;
}

int main(void)
{
    state s;
    memset(&s, 0, sizeof(s));
    char line[16384];
    while (fgets(line, sizeof(line), stdin)) {
        faid_diag d;
        faid_diag_clear(&d);
        char *cmd = line + strspn(line, " \t\n");
        size_t cl = strcspn(cmd, " \t\n");
        if (cl == 0)
            continue;
        char *rest = cmd + cl;
        if (*rest)
            *rest++ = '\0';
        char val[4200];
        if (!strcmp(cmd, "open")) {
            reply(do_open(&s, rest, &d), &d, NULL);
        } else if (!strcmp(cmd, "append")) {
            reply(do_append(&s, rest, &d), &d, NULL);
        } else if (!strcmp(cmd, "repeat")) {
            double secs = 0;
            int rc = do_repeat(&s, rest, &secs, &d);
            snprintf(val, sizeof(val), "%.6f", secs);
            reply(rc, &d, val);
        } else if (!strcmp(cmd, "flush")) {
            reply(faid_nxmx_flush(s.h, &d), &d, NULL);
        } else if (!strcmp(cmd, "frames")) {
            snprintf(val, sizeof(val), "%llu", (unsigned long long)faid_nxmx_frames(s.h));
            reply(0, &d, val);
        } else if (!strcmp(cmd, "bytes")) {
            snprintf(val, sizeof(val), "%llu", (unsigned long long)faid_nxmx_bytes(s.h));
            reply(0, &d, val);
        } else if (!strcmp(cmd, "close")) {
            reply(faid_nxmx_close(&s.h, &d), &d, NULL);
        } else if (!strcmp(cmd, "geom")) {
            char *p = strtok(rest, " \t\n");
            reply(p ? faid_nxmx_write_crystfel_geom(p, &s.p, &d)
                    : faid_fail(&d, FAID_EINVAL, "driver: geom PATH"),
                  &d, NULL);
        } else if (!strcmp(cmd, "geompath")) {
            char *p = strtok(rest, " \t\n");
            if (p)
                faid_nxmx_geom_path(val, sizeof(val), p);
            reply(p ? 0 : faid_fail(&d, FAID_EINVAL, "driver: geompath HITS"), &d, p ? val : NULL);
        } else if (!strcmp(cmd, "layout")) {
            const faid_layout *l = &faid_nxmx_file_layout;
            for (size_t i = 0; i < l->nrows; i++) {
                const faid_layout_row *r = &l->rows[i];
                printf("%s\t%s\t%s\t%s\t%s\t%s\n", r->path, r->kind, r->type, r->shape, r->units,
                       r->when);
            }
            snprintf(val, sizeof(val), "%zu", l->nrows);
            reply(0, &d, val);
        } else if (!strcmp(cmd, "quit")) {
            break;
        } else {
            reply(faid_fail(&d, FAID_EINVAL, "driver: unknown command %s", cmd), &d, NULL);
        }
    }
    faid_diag d;
    faid_nxmx_close(&s.h, &d);
    free(s.mask);
    return 0;
}
