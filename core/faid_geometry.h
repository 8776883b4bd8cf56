/* faid_geometry: pyFAI's PONI geometry for a flat regular detector, .poni files, detector presets
 * with their module gaps, radial units, and the per-pixel arrays every reduction needs (positions
 * of pixel centres and corners in the radial unit and in chi, solid angle, polarization).
 * All arithmetic is float64 (algorithms.md §5). Rows = dim1 = slow axis (pixel1), columns = dim2 =
 * fast axis (pixel2); flat pixel index = row * cols + col.
 *
 * What pyFAI (2026.9) bins on, and therefore what the CSR builder must use to agree with it:
 *  - integrate1d/integrate2d (the "ng" engine) build their sparse matrix through
 *    setup_sparse_integrator(..., scale=False): every position array is in the unit's INTERNAL
 *    form, never the scaled one: 2theta in rad (2th_deg and 2th_rad alike), q in nm^-1 (q_nm^-1
 *    and q_A^-1 alike), r in m (r_mm and r_m alike), chi in rad. radial_range is divided by the
 *    unit's scale before the build, and the output bin centres are multiplied by it afterwards.
 *    faid_unit_scale() gives that factor; the *_internal functions below give the positions.
 *  - pixel centres (no split, bbox split): center_array(), float64.
 *  - pixel corners (full split): corner_array(), an (H, W, 4, 2) array of FLOAT32 values (computed
 *    in float64, then rounded), [..., 0] radial, [..., 1] chi; corner k of pixel (i, j) is
 *    0: (i, j), 1: (i+1, j), 2: (i+1, j+1), 3: (i, j+1) in corner-grid indices.
 *    faid_geometry_corner_array() reproduces it bit for bit up to libm rounding.
 *  - bbox half-widths: delta_array() = max over the 4 corners of |float32 corner - float64 centre|
 *    (for chi the wrapped distance min(d, 2pi - d)), float64: faid_geometry_delta(),
 *    faid_geometry_chi_delta().
 *  - chi = atan2(t1, t2) with pyFAI's default chiDiscAtPi = True: no remapping, so values lie in
 *    atan2's [-pi, pi]; points on the discontinuity line itself (t1 = +0, t2 < 0) give +pi.
 *  - orientation (1..4, 0 = 3) only renumbers pixels: orientation 2 reads row i as H-1-i (corner
 *    row i as H-i), 4 does so for columns, 1 for both. pyFAI 2026.9 no longer negates t1/t2; the
 *    tests check this against it.
 *  - solid angle: pyFAI evaluates it on float32 pixel indices and stores float32; polarization is
 *    computed in float64 and stored float32. faid returns float64 (agreement ~1e-7 relative). */
#ifndef FAID_GEOMETRY_H
#define FAID_GEOMETRY_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faid_geometry {
    double dist, poni1, poni2; /* m */
    double rot1, rot2, rot3;   /* rad */
    double wavelength;         /* m; 0 = unknown (q units then unavailable) */
    double pixel1, pixel2;     /* m: rows, columns */
    int rows, cols;
    int orientation; /* 1..4 as pyFAI; 0 treated as 3 (no flip) */
} faid_geometry;

/* Checks that g describes a usable geometry: finite parameters, dist > 0, pixel sizes > 0,
 * rows and cols in 1..65536, orientation 0..4, wavelength >= 0. `what` names the source in the
 * message (a file, "config"). */
int faid_geometry_check(const faid_geometry *g, const char *what, faid_diag *d);

/* Reads a pyFAI .poni file (versions 1, 2, 2.1 and 3 without parallax, with the Detector_config
 * JSON line). Fills g (shape and pixel sizes when the file gives them) and the detector name (may
 * be empty). Distance, Poni1 and Poni2 are required; rotations default to 0, wavelength to 0 (not
 * given). Pixel sizes and shape come from the detector preset named by "Detector:" (when faid
 * knows it), then from Detector_config (pixel1, pixel2, max_shape) or version-1 PixelSize1/2
 * lines; what the file does not give is left as it was in g. orientation is set from
 * Detector_config, else to 3 (pyFAI's default). Unknown detector names are not an error: the name
 * is returned and the shape must then come from elsewhere. Errors name the file and line. */
int faid_poni_read(const char *path, faid_geometry *g, char *detector, size_t detector_cap,
                   faid_diag *d);
/* The same on text in memory (len bytes, need not be NUL-terminated); `name` is used in messages.
 */
int faid_poni_parse(const char *text, size_t len, const char *name, faid_geometry *g,
                    char *detector, size_t detector_cap, faid_diag *d);

typedef struct faid_detector_preset {
    const char *name;  /* as pyFAI spells it, e.g. "Eiger4M", "Eiger2_4M", "Pilatus1M" */
    const char *alias; /* faid's config spelling, e.g. "eiger_4m" */
    int rows, cols;
    double pixel1, pixel2;
    int module_rows, module_cols; /* module size in pixels (0 = no gaps) */
    int gap_rows, gap_cols;       /* gap widths in pixels between modules */
    const char *pyfai_alias;      /* pyFAI's alias, e.g. "Eiger 4M" */
} faid_detector_preset;

/* Case-insensitive lookup by pyFAI name or alias; NULL if unknown. Spaces, '_' and '-' are
 * ignored, so "Eiger4M", "Eiger 4M", "eiger_4m" and "EIGER_4M" all find the same preset. */
const faid_detector_preset *faid_detector_find(const char *name);
/* The table, terminated by an entry with name NULL. */
extern const faid_detector_preset faid_detector_presets[];
/* Sets mask[i] = 1 for every pixel in a module gap (as pyFAI's calc_mask); others untouched. */
void faid_detector_gap_mask(const faid_detector_preset *p, uint8_t *mask);
/* Sets rows, cols, pixel1, pixel2 of g from the preset. */
void faid_geometry_apply_preset(faid_geometry *g, const faid_detector_preset *p);

typedef enum {
    FAID_UNIT_Q_NM = 0, /* q_nm^-1 */
    FAID_UNIT_Q_A,      /* q_A^-1 */
    FAID_UNIT_2TH_DEG,  /* 2th_deg */
    FAID_UNIT_2TH_RAD,  /* 2th_rad */
    FAID_UNIT_R_MM,     /* r_mm */
    FAID_UNIT_R_M,      /* r_m */
} faid_unit;

/* The names, indexed by faid_unit and NULL-terminated (the option table's choices): exact pyFAI
 * names "q_nm^-1", "q_A^-1", "2th_deg", "2th_rad", "r_mm", "r_m". parse returns 0 or
 * FAID_EINVAL. */
extern const char *const faid_unit_names[];
int faid_unit_parse(const char *name, faid_unit *out);
const char *faid_unit_name(faid_unit u);
/* pyFAI's unit.scale: display value = internal value * scale (1, 0.1, 180/pi, 1, 1000, 1). */
double faid_unit_scale(faid_unit u);
/* 1 for the q units (they need a wavelength). */
int faid_unit_needs_wavelength(faid_unit u);

/* The detector-frame vector (t1, t2, t3) of a point at (p1, p2) metres on the detector. */
void faid_geometry_t123(const faid_geometry *g, double p1, double p2, double *t1, double *t2,
                        double *t3);

/* Radial position in unit u of every pixel centre (rows*cols values) or corner ((rows+1)*(cols+1)
 * values, corner (i, j) at index i*(cols+1)+j). Values as pyFAI's array_from_unit gives them in
 * the unit's scaled form (e.g. q in nm^-1, 2theta in degrees). Return FAID_EINVAL for a q unit
 * without wavelength or an empty shape. */
int faid_geometry_radial_centers(const faid_geometry *g, faid_unit u, double *out);
int faid_geometry_radial_corners(const faid_geometry *g, faid_unit u, double *out);
/* The same in the unit's internal form (scale=False): what pyFAI bins on (see the top). */
int faid_geometry_radial_centers_internal(const faid_geometry *g, faid_unit u, double *out);
int faid_geometry_radial_corners_internal(const faid_geometry *g, faid_unit u, double *out);
/* pyFAI's corner_array(unit=u, scale=False): rows*cols*4*2 float32, layout described at the top. */
int faid_geometry_corner_array(const faid_geometry *g, faid_unit u, float *out);
/* pyFAI's delta_array(unit=u, scale=False) (rows*cols, internal unit) and its chi counterpart
 * (rad). */
int faid_geometry_delta(const faid_geometry *g, faid_unit u, double *out);
void faid_geometry_chi_delta(const faid_geometry *g, double *out);
/* chi in radians of centres / corners (same layouts), pyFAI's convention: see the top. */
void faid_geometry_chi_centers(const faid_geometry *g, double *out);
void faid_geometry_chi_corners(const faid_geometry *g, double *out);
/* Relative solid angle (cos^3 alpha, order 3) of every pixel. */
void faid_geometry_solid_angle(const faid_geometry *g, double *out);
/* Polarization factor P of every pixel for factor f and axis offset (rad). */
void faid_geometry_polarization(const faid_geometry *g, double factor, double axis_offset,
                                double *out);

#endif
