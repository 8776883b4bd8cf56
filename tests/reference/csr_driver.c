/* csr_driver: a small program compiled by tests/reference/test_integrate_ref.py against
 * libfaidcore.a. It builds a CSR matrix (from pixel positions given as .npy files, or from a PONI
 * geometry through faid_geometry), preprocesses and integrates one frame with the reference C code,
 * and writes every array as .npy into an output folder so the test can compare them with pyFAI.
 *
 * Usage: csr_driver PARAMS OUTDIR, PARAMS holding "key value..." lines (see the test). */
#include "driver_params.h"
#include "faid_csr.h"
#include "faid_geometry.h"
#include "faid_npy.h"
#include "faid_reduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    const char *out = driver_start(argc, argv, "csr_driver");
    if (!out)
        return 2;
    faid_diag d = {0};

    faid_csr_params p = {0};
    if (faid_split_parse(get("split"), &p.split) || faid_unit_parse(get("unit"), &p.unit)) {
        fprintf(stderr, "bad split/unit\n");
        return 2;
    }
    p.npt_rad = (int)getd("npt_rad", 100);
    p.npt_azim = (int)getd("npt_azim", 0);
    if (get("rad_range")) {
        p.has_rad_range = 1;
        sscanf(get("rad_range"), "%lf %lf", &p.rad_range[0], &p.rad_range[1]);
    }
    if (get("azim_range")) {
        p.has_azim_range = 1;
        sscanf(get("azim_range"), "%lf %lf", &p.azim_range[0], &p.azim_range[1]);
    }
    p.f64_corners = (int)getd("f64_corners", 0);
    int rows = (int)getd("rows", 0), cols = (int)getd("cols", 0);
    size_t npix = (size_t)rows * (size_t)cols, ncorner = (size_t)(rows + 1) * (size_t)(cols + 1);
    faid_array am = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0};
    const uint8_t *mask = load("mask", FAID_DT_U8, npix, &am);

    faid_csr *csr = NULL;
    struct timespec t0, t1;
    faid_geometry g = {0};
    int rc;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (get("positions")) {
        faid_csr_positions pos = {rows,
                                  cols,
                                  load("rad_center", FAID_DT_F64, npix, &a1),
                                  load("chi_center", FAID_DT_F64, npix, &a2),
                                  load("rad_corner", FAID_DT_F64, ncorner, &a3),
                                  load("chi_corner", FAID_DT_F64, ncorner, &a4),
                                  (int)getd("orientation", 3)};
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = faid_csr_build_from_positions(&pos, mask, &p, &csr, &d);
    } else {
        driver_poni(&g);
        g.rows = rows;
        g.cols = cols;
        g.orientation = (int)getd("orientation", 3);
        rc = faid_csr_build(&g, mask, &p, &csr, &d);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc) {
        fprintf(stderr, "build: %s\n", d.msg);
        return 1;
    }
    printf("build_s %.6f nnz %lld\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
           (long long)csr->nnz);
    save(out, "indptr", FAID_DT_I32, (size_t)csr->nbins + 1, csr->indptr);
    save(out, "indices", FAID_DT_I32, (size_t)csr->nnz, csr->indices);
    if (csr->data)
        save(out, "data", FAID_DT_F32, (size_t)csr->nnz, csr->data);
    save(out, "rad_centers", FAID_DT_F64, (size_t)csr->npt_rad, csr->rad_centers);
    if (csr->azim_centers)
        save(out, "azim_centers", FAID_DT_F64, (size_t)csr->npt_azim, csr->azim_centers);

    if (get("frame")) {
        faid_array fr = {0}, ad = {0}, af = {0}, as = {0}, ap = {0};
        d.msg[0] = 0;
        if (faid_npy_read(get("frame"), &fr, &d) || fr.count != npix) {
            fprintf(stderr, "frame: %s\n", d.msg);
            return 2;
        }
        faid_corrections c = {0};
        c.npix = npix;
        c.mask = mask;
        c.dark = load("dark", FAID_DT_F32, npix, &ad);
        c.flat = load("flat", FAID_DT_F32, npix, &af);
        c.solid_angle = load("solid_angle", FAID_DT_F32, npix, &as);
        c.polarization = load("polarization", FAID_DT_F32, npix, &ap);
        double *tmp = NULL;
        float *sa = NULL, *pol = NULL;
        if (get("geometry_solid_angle")) {
            tmp = malloc(npix * sizeof(double));
            sa = malloc(npix * sizeof(float));
            faid_geometry_solid_angle(&g, tmp);
            for (size_t i = 0; i < npix; i++)
                sa[i] = (float)tmp[i];
            c.solid_angle = sa;
        }
        if (get("geometry_polarization")) {
            if (!tmp)
                tmp = malloc(npix * sizeof(double));
            pol = malloc(npix * sizeof(float));
            faid_geometry_polarization(&g, getd("geometry_polarization", 0), 0.0, tmp);
            for (size_t i = 0; i < npix; i++)
                pol[i] = (float)tmp[i];
            c.polarization = pol;
        }
        c.do_dummy = get("dummy") != NULL;
        c.dummy = (float)getd("dummy", 0);
        c.delta_dummy = (float)getd("delta_dummy", 0);
        c.normalization_factor = (float)getd("normalization_factor", 1.0);
        c.empty = (float)getd("empty", 0.0);
        if (faid_error_model_parse(get("error_model") ? get("error_model") : "none",
                                   &c.error_model)) {
            fprintf(stderr, "bad error model\n");
            return 2;
        }
        float *pre = malloc(npix * 4 * sizeof(float));
        faid_profile *prof = faid_profile_new(csr->npt_rad, csr->npt_azim);
        if (!pre || !prof)
            return 3;
        if (faid_ref_preprocess(&c, fr.dtype, fr.data, pre, &d) ||
            faid_ref_integrate(csr, &c, pre, prof, &d)) {
            fprintf(stderr, "reduce: %s\n", d.msg);
            return 1;
        }
        size_t nb = (size_t)prof->nbins;
        save(out, "I", FAID_DT_F32, nb, prof->I);
        save(out, "sigma", FAID_DT_F32, nb, prof->sigma);
        save(out, "std", FAID_DT_F32, nb, prof->std);
        save(out, "count", FAID_DT_F32, nb, prof->count);
        save(out, "sum_signal", FAID_DT_F32, nb, prof->sum_signal);
        save(out, "sum_norm", FAID_DT_F32, nb, prof->sum_norm);
        save(out, "sum_variance", FAID_DT_F32, nb, prof->sum_variance);
        save(out, "sum_norm_sq", FAID_DT_F32, nb, prof->sum_norm_sq);
        faid_profile_destroy(&prof);
        free(pre);
        free(tmp);
        free(sa);
        free(pol);
        faid_array_free(&fr);
        faid_array_free(&ad);
        faid_array_free(&af);
        faid_array_free(&as);
        faid_array_free(&ap);
    }
    faid_csr_destroy(&csr);
    faid_array_free(&am);
    faid_array_free(&a1);
    faid_array_free(&a2);
    faid_array_free(&a3);
    faid_array_free(&a4);
    return 0;
}
