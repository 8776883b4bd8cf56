/* faidctl geometry: the per-pixel geometry faid computes from a pyFAI .poni file, as a summary,
 * as the values one pixel sees, or as a .npy array (for checks against pyFAI and for users who
 * want to know what q a pixel covers), or as the CrystFEL geometry of faid's hits files. Same
 * functions as the daemon's reduction setup and its hits-file writer. */
#include "faid_geometry.h"
#include "faid_npy.h"
#include "faid_nxmx.h"
#include "faidctl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: faidctl geometry --poni FILE [--detector NAME] [--shape ROWS,COLS]\n"
            "                        [--pixel P1,P2] [--orientation 0..4]\n"
            "                        [--at ROW,COL | --array NAME -o OUT.npy]\n"
            "                        [--unit UNIT] [--internal] [--polarization F]\n"
            "                        [--axis-offset RAD]\n"
            "       faidctl geometry --poni FILE [...] --crystfel [--with-mask] [-o OUT.geom]\n"
            "Without --at, --array or --crystfel: prints the geometry.\n"
            "--at ROW,COL   prints what pixel (ROW, COL) sees: 2theta, q, r, chi, solid angle.\n"
            "--array NAME   writes one per-pixel array:\n"
            "  center       radial position of pixel centres in --unit (rows x cols, float64)\n"
            "  corner       radial position of the corner grid ((rows+1) x (cols+1), float64)\n"
            "  corner_array pyFAI's corner_array(unit, scale=False): rows x cols x 4 x 2 float32\n"
            "  delta        pyFAI's delta_array(unit, scale=False) (float64)\n"
            "  chi, chi_corner, chi_delta   azimuth in rad (chi in [-pi, pi])\n"
            "  solid_angle  relative solid angle cos^3(alpha)\n"
            "  polarization polarization factor for --polarization F (and --axis-offset)\n"
            "  gap_mask     module gaps of the detector preset (uint8, 1 = gap)\n"
            "  2th_deg | 2th_rad | q_nm^-1 | q_A^-1 | r_mm | r_m   shorthand for center\n"
            "--unit         2th_deg | 2th_rad | q_nm^-1 (default) | q_A^-1 | r_mm | r_m\n"
            "--internal     center/corner in the unit's internal form (rad, nm^-1, m), as\n"
            "               pyFAI bins them\n"
            "--crystfel     the CrystFEL geometry file of faid's hits files for this geometry\n"
            "               (the file writer.hits writes next to each hits file): indexamajig\n"
            "               reads the frames and, with --peaks=cxi, the peaks; printed, or\n"
            "               written to -o OUT.geom (never overwriting)\n"
            "--with-mask    the hits files hold a pixel_mask (a mask was configured): the\n"
            "               geometry uses it\n");
}

static int parse_pair_int(const char *s, int *a, int *b)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end != ',')
        return 0;
    const char *s2 = end + 1;
    long y = strtol(s2, &end, 10);
    if (end == s2 || *end || x < 0 || y < 0 || x > 1000000 || y > 1000000)
        return 0;
    *a = (int)x;
    *b = (int)y;
    return 1;
}

static int parse_pair_double(const char *s, double *a, double *b)
{
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end != ',')
        return 0;
    const char *s2 = end + 1;
    double y = strtod(s2, &end);
    if (end == s2 || *end || !isfinite(x) || !isfinite(y))
        return 0;
    *a = x;
    *b = y;
    return 1;
}

static int parse_double(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end && isfinite(*v);
}

static int write_npy(const char *out, faid_dtype dt, int ndim, const size_t *shape,
                     const void *data)
{
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_npy_write(out, dt, ndim, shape, data, &d) != 0) {
        fprintf(stderr, "faidctl geometry: %s\n", d.msg);
        return 1;
    }
    return 0;
}

static void print_pixel(const faid_geometry *g, int row, int col)
{
    size_t n = (size_t)g->rows * (size_t)g->cols, k = (size_t)row * (size_t)g->cols + (size_t)col;
    double *a = malloc(n * sizeof *a);
    if (!a) {
        fprintf(stderr, "faidctl geometry: out of memory\n");
        return;
    }
    printf("pixel (%d, %d)\n", row, col);
    static const faid_unit show[] = {FAID_UNIT_2TH_DEG, FAID_UNIT_Q_NM, FAID_UNIT_Q_A,
                                     FAID_UNIT_R_MM};
    for (size_t i = 0; i < sizeof show / sizeof show[0]; i++)
        if (faid_geometry_radial_centers(g, show[i], a) == 0)
            printf("  %-11s %.9g\n", faid_unit_name(show[i]), a[k]);
    faid_geometry_chi_centers(g, a);
    printf("  %-11s %.9g\n", "chi_deg", a[k] * 180.0 / M_PI);
    faid_geometry_solid_angle(g, a);
    printf("  %-11s %.9g\n", "solid_angle", a[k]);
    free(a);
}

int faidctl_geometry(int argc, char **argv)
{
    const char *poni = NULL, *detname = NULL, *array = NULL, *out = NULL, *unitname = "q_nm^-1";
    int rows = -1, cols = -1, orientation = -1, internal = 0, at_row = -1, at_col = -1;
    double p1 = 0, p2 = 0, factor = 0, axis_offset = 0;
    int has_pixel = 0, has_factor = 0, crystfel = 0, with_mask = 0;
    enum {
        O_INTERNAL = 256,
        O_CRYSTFEL,
        O_WITH_MASK,
        O_PONI,
        O_DETECTOR,
        O_ARRAY,
        O_UNIT,
        O_SHAPE,
        O_AT,
        O_PIXEL,
        O_ORIENTATION,
        O_POLARIZATION,
        O_AXIS_OFFSET
    };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"internal", no_argument, NULL, O_INTERNAL},
        {"crystfel", no_argument, NULL, O_CRYSTFEL},
        {"with-mask", no_argument, NULL, O_WITH_MASK},
        {"poni", required_argument, NULL, O_PONI},
        {"detector", required_argument, NULL, O_DETECTOR},
        {"array", required_argument, NULL, O_ARRAY},
        {"output", required_argument, NULL, 'o'},
        {"unit", required_argument, NULL, O_UNIT},
        {"shape", required_argument, NULL, O_SHAPE},
        {"at", required_argument, NULL, O_AT},
        {"pixel", required_argument, NULL, O_PIXEL},
        {"orientation", required_argument, NULL, O_ORIENTATION},
        {"polarization", required_argument, NULL, O_POLARIZATION},
        {"axis-offset", required_argument, NULL, O_AXIS_OFFSET},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        const char *v = optarg;
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case O_INTERNAL:
            internal = 1;
            break;
        case O_CRYSTFEL:
            crystfel = 1;
            break;
        case O_WITH_MASK:
            with_mask = 1;
            break;
        case O_PONI:
            poni = v;
            break;
        case O_DETECTOR:
            detname = v;
            break;
        case O_ARRAY:
            array = v;
            break;
        case 'o':
            out = v;
            break;
        case O_UNIT:
            unitname = v;
            break;
        case O_SHAPE:
            if (!parse_pair_int(v, &rows, &cols) || rows < 1 || cols < 1) {
                fprintf(stderr, "faidctl geometry: --shape wants ROWS,COLS, got '%s'\n", v);
                return 2;
            }
            break;
        case O_AT:
            if (!parse_pair_int(v, &at_row, &at_col)) {
                fprintf(stderr, "faidctl geometry: --at wants ROW,COL, got '%s'\n", v);
                return 2;
            }
            break;
        case O_PIXEL:
            if (!parse_pair_double(v, &p1, &p2) || !(p1 > 0) || !(p2 > 0)) {
                fprintf(stderr, "faidctl geometry: --pixel wants P1,P2 in m, got '%s'\n", v);
                return 2;
            }
            has_pixel = 1;
            break;
        case O_ORIENTATION: {
            double o;
            if (!parse_double(v, &o) || o != floor(o) || o < 0 || o > 4) {
                fprintf(stderr, "faidctl geometry: --orientation wants 0..4, got '%s'\n", v);
                return 2;
            }
            orientation = (int)o;
            break;
        }
        case O_POLARIZATION:
            if (!parse_double(v, &factor) || factor < -1 || factor > 1) {
                fprintf(stderr, "faidctl geometry: --polarization wants -1..1, got '%s'\n", v);
                return 2;
            }
            has_factor = 1;
            break;
        case O_AXIS_OFFSET:
            if (!parse_double(v, &axis_offset)) {
                fprintf(stderr, "faidctl geometry: --axis-offset wants radians, got '%s'\n", v);
                return 2;
            }
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "faidctl geometry: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!poni) {
        fprintf(stderr, "faidctl geometry: --poni FILE is required\n");
        usage(stderr);
        return 2;
    }
    faid_unit unit;
    if (faid_unit_parse(unitname, &unit) != 0) {
        fprintf(stderr, "faidctl geometry: unknown unit '%s'\n", unitname);
        return 2;
    }
    if (array && faid_unit_parse(array, &unit) == 0)
        array = "center";

    faid_geometry g;
    memset(&g, 0, sizeof g);
    faid_diag d;
    faid_diag_clear(&d);
    char poni_det[128];
    if (faid_poni_read(poni, &g, poni_det, sizeof poni_det, &d) != 0) {
        fprintf(stderr, "faidctl geometry: %s\n", d.msg);
        return 1;
    }
    const faid_detector_preset *preset = faid_detector_find(detname ? detname : poni_det);
    if (detname && !preset) {
        fprintf(stderr, "faidctl geometry: unknown detector '%s'\n", detname);
        return 2;
    }
    if (detname)
        faid_geometry_apply_preset(&g, preset);
    if (rows > 0) {
        g.rows = rows;
        g.cols = cols;
    }
    if (has_pixel) {
        g.pixel1 = p1;
        g.pixel2 = p2;
    }
    if (orientation >= 0)
        g.orientation = orientation;
    if (faid_geometry_check(&g, poni, &d) != 0) {
        fprintf(stderr, "faidctl geometry: %s (use --shape, --pixel or --detector)\n", d.msg);
        return 1;
    }

    if (crystfel) {
        if (at_row >= 0 || array) {
            fprintf(stderr, "faidctl geometry: --crystfel goes without --at and --array\n");
            return 2;
        }
        /* Only the presence of a mask matters to the geometry text (it names the file's
         * pixel_mask); one byte stands for it. */
        static const uint8_t some_mask = 1;
        faid_nxmx_params hp = {.geom = &g,
                               .detector_name = preset ? preset->name : poni_det,
                               .dtype = FAID_DT_U32,
                               .encoding = FAID_ENC_BSLZ4,
                               .mask = with_mask ? &some_mask : NULL,
                               .max_peaks = 1};
        if (out) {
            if (faid_nxmx_write_crystfel_geom(out, &hp, &d) != 0) {
                fprintf(stderr, "faidctl geometry: %s\n", d.msg);
                return 1;
            }
            return 0;
        }
        int n = faid_nxmx_crystfel_geom(NULL, 0, &hp, &d);
        char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (n < 0 || !text) {
            fprintf(stderr, "faidctl geometry: %s\n", n < 0 ? d.msg : "out of memory");
            return 1;
        }
        faid_nxmx_crystfel_geom(text, (size_t)n + 1, &hp, &d);
        fputs(text, stdout);
        free(text);
        return 0;
    }
    if (at_row >= 0) {
        if (at_row >= g.rows || at_col >= g.cols) {
            fprintf(stderr, "faidctl geometry: pixel (%d, %d) outside %d x %d\n", at_row, at_col,
                    g.rows, g.cols);
            return 2;
        }
        print_pixel(&g, at_row, at_col);
        return 0;
    }
    if (!array) {
        printf("poni file    %s\ndetector     %s\nshape        %d x %d\n"
               "pixel1/2     %.17g %.17g m\ndist         %.17g m\nponi1/2      %.17g %.17g m\n"
               "rot1/2/3     %.17g %.17g %.17g rad\nwavelength   %.17g m\norientation  %d\n",
               poni, preset ? preset->name : (poni_det[0] ? poni_det : "(none)"), g.rows, g.cols,
               g.pixel1, g.pixel2, g.dist, g.poni1, g.poni2, g.rot1, g.rot2, g.rot3, g.wavelength,
               g.orientation ? g.orientation : 3);
        return 0;
    }
    if (!out) {
        fprintf(stderr, "faidctl geometry: --array needs -o OUT.npy\n");
        return 2;
    }

    size_t H = (size_t)g.rows, W = (size_t)g.cols;
    size_t centers[2] = {H, W}, corners[2] = {H + 1, W + 1}, carray[4] = {H, W, 4, 2};
    int rc = 0, status = 1;
    if (strcmp(array, "corner_array") == 0) {
        float *buf = malloc(H * W * 8 * sizeof *buf);
        rc = buf ? faid_geometry_corner_array(&g, unit, buf) : FAID_ENOMEM;
        if (rc == 0)
            status = write_npy(out, FAID_DT_F32, 4, carray, buf);
        free(buf);
    } else if (strcmp(array, "gap_mask") == 0) {
        if (!preset || preset->rows != g.rows || preset->cols != g.cols) {
            fprintf(stderr, "faidctl geometry: gap_mask needs a detector preset of this shape\n");
            return 2;
        }
        uint8_t *m = calloc(H * W, 1);
        if (!m)
            rc = FAID_ENOMEM;
        else {
            faid_detector_gap_mask(preset, m);
            status = write_npy(out, FAID_DT_U8, 2, centers, m);
        }
        free(m);
    } else {
        int corner = strcmp(array, "corner") == 0 || strcmp(array, "chi_corner") == 0;
        double *buf = malloc((corner ? (H + 1) * (W + 1) : H * W) * sizeof *buf);
        if (!buf) {
            rc = FAID_ENOMEM;
        } else if (strcmp(array, "center") == 0) {
            rc = internal ? faid_geometry_radial_centers_internal(&g, unit, buf)
                          : faid_geometry_radial_centers(&g, unit, buf);
        } else if (strcmp(array, "corner") == 0) {
            rc = internal ? faid_geometry_radial_corners_internal(&g, unit, buf)
                          : faid_geometry_radial_corners(&g, unit, buf);
        } else if (strcmp(array, "delta") == 0) {
            rc = faid_geometry_delta(&g, unit, buf);
        } else if (strcmp(array, "chi") == 0) {
            faid_geometry_chi_centers(&g, buf);
        } else if (strcmp(array, "chi_corner") == 0) {
            faid_geometry_chi_corners(&g, buf);
        } else if (strcmp(array, "chi_delta") == 0) {
            faid_geometry_chi_delta(&g, buf);
        } else if (strcmp(array, "solid_angle") == 0) {
            faid_geometry_solid_angle(&g, buf);
        } else if (strcmp(array, "polarization") == 0) {
            if (!has_factor) {
                fprintf(stderr, "faidctl geometry: polarization needs --polarization F\n");
                free(buf);
                return 2;
            }
            faid_geometry_polarization(&g, factor, axis_offset, buf);
        } else {
            fprintf(stderr, "faidctl geometry: unknown array '%s'\n", array);
            free(buf);
            return 2;
        }
        if (buf && rc == 0)
            status = write_npy(out, FAID_DT_F64, 2, corner ? corners : centers, buf);
        free(buf);
    }
    if (rc != 0) {
        fprintf(stderr, "faidctl geometry: %s: %s%s\n", array, faid_strerror(rc),
                rc == FAID_EINVAL && faid_unit_needs_wavelength(unit) && !(g.wavelength > 0)
                    ? " (q units need a wavelength in the .poni file)"
                    : "");
        return 1;
    }
    return status;
}
