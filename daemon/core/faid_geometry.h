/* faid_geometry: pyFAI's PONI geometry for a flat regular detector, .poni files, detector presets
 * with their module gaps, radial units, and the per-pixel arrays every reduction needs (positions
 * of pixel centres and corners in the radial unit and in chi, solid angle, polarization).
 * All arithmetic is float64 (algorithms.md §5). Rows = dim1 = slow axis (pixel1), columns = dim2 =
 * fast axis (pixel2); flat pixel index = row * cols + col. */
#ifndef FAID_GEOMETRY_H
#define FAID_GEOMETRY_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faid_geometry {
    double dist, poni1, poni2;    /* m */
    double rot1, rot2, rot3;      /* rad */
    double wavelength;            /* m; 0 = unknown (q units then unavailable) */
    double pixel1, pixel2;        /* m: rows, columns */
    int rows, cols;
    int orientation;              /* 1..4 as pyFAI; 0 treated as 3 (no flip) */
} faid_geometry;

/* Reads a pyFAI .poni file (versions 1 and 2, with the Detector_config JSON line). Fills g
 * (shape and pixel sizes when the file gives them) and the detector name (may be empty). */
int faid_poni_read(const char *path, faid_geometry *g, char *detector, size_t detector_cap,
                   faid_diag *d);

typedef struct faid_detector_preset {
    const char *name;       /* as pyFAI spells it, e.g. "Eiger4M", "Eiger2_4M", "Pilatus1M" */
    const char *alias;      /* faid's config spelling, e.g. "eiger_4m" */
    int rows, cols;
    double pixel1, pixel2;
    int module_rows, module_cols; /* module size in pixels (0 = no gaps) */
    int gap_rows, gap_cols;       /* gap widths in pixels between modules */
} faid_detector_preset;

/* Case-insensitive lookup by pyFAI name or alias; NULL if unknown. */
const faid_detector_preset *faid_detector_find(const char *name);
/* The table, terminated by an entry with name NULL. */
extern const faid_detector_preset faid_detector_presets[];
/* Sets mask[i] = 1 for every pixel in a module gap (as pyFAI's calc_mask); others untouched. */
void faid_detector_gap_mask(const faid_detector_preset *p, uint8_t *mask);

typedef enum {
    FAID_UNIT_Q_NM = 0, /* q_nm^-1 */
    FAID_UNIT_Q_A,      /* q_A^-1 */
    FAID_UNIT_2TH_DEG,  /* 2th_deg */
    FAID_UNIT_2TH_RAD,  /* 2th_rad */
    FAID_UNIT_R_MM,     /* r_mm */
    FAID_UNIT_R_M,      /* r_m */
} faid_unit;

int faid_unit_parse(const char *name, faid_unit *out);
const char *faid_unit_name(faid_unit u);

/* The detector-frame vector (t1, t2, t3) of a point at (p1, p2) metres on the detector. */
void faid_geometry_t123(const faid_geometry *g, double p1, double p2, double *t1, double *t2,
                        double *t3);

/* Radial position in unit u of every pixel centre (rows*cols values) or corner ((rows+1)*(cols+1)
 * values, corner (i, j) at index i*(cols+1)+j). Values as pyFAI's array_from_unit gives them in
 * the unit's scaled form (e.g. q in nm^-1, 2theta in degrees). */
int faid_geometry_radial_centers(const faid_geometry *g, faid_unit u, double *out);
int faid_geometry_radial_corners(const faid_geometry *g, faid_unit u, double *out);
/* chi in radians, in [-pi, pi), of centres / corners (same layouts). */
void faid_geometry_chi_centers(const faid_geometry *g, double *out);
void faid_geometry_chi_corners(const faid_geometry *g, double *out);
/* Relative solid angle (cos^3 alpha, order 3) of every pixel. */
void faid_geometry_solid_angle(const faid_geometry *g, double *out);
/* Polarization factor P of every pixel for factor f and axis offset (rad). */
void faid_geometry_polarization(const faid_geometry *g, double factor, double axis_offset,
                                double *out);

#endif
