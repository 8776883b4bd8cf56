/* faid_peaks: the data types of background estimation, peak finding and hit finding (issue 6),
 * shared by the plain C references (faid_sigclip, faid_pick, faid_pf8, faid_hits), the OpenCL
 * stages, the configuration (`peaks:` section), results and publishing.
 *
 *  - faid_peak_params: every parameter of the sigma-clipped background, both peak finders and the
 *    hit decision. Enum values are the index of their name in the option table's choices.
 *  - faid_peak_list: one frame's peaks as a struct of arrays. Coordinates are pixel-index
 *    coordinates as OM's peakfinder8 reports them: the centre of pixel (row r, column c) is at
 *    (x = c, y = r); x is the fast-axis (column) centroid, y the slow-axis (row) centroid.
 *    `n` peaks are stored (at most `capacity`); `n_found` counts every accepted peak, also those
 *    beyond the cap, so a subscriber sees that a list was cut.
 *  - faid_background: the sigma-clipped background per radial bin (mean of the corrected
 *    intensity of the pixels kept, their per-pixel standard deviation, the standard error of the
 *    mean and the number of pixels kept).
 * Semantics and every decision on the reference algorithms' quirks: docs/peaks.md. */
#ifndef FAID_PEAKS_H
#define FAID_PEAKS_H

#include "faid_csr.h"
#include "faid_err.h"

#include <stdint.h>

typedef enum {
    FAID_PEAKS_NONE = 0,
    FAID_PEAKS_PYFAI,       /* pyFAI-style picker over the sigma-clipped background */
    FAID_PEAKS_PEAKFINDER8, /* Cheetah / OM / CrystFEL peakfinder8 */
} faid_peak_algorithm;

/* Error model of the sigma clipping (pyFAI's ErrorModel without NO and VARIANCE). */
typedef enum {
    FAID_CLIP_POISSON = 0, /* pixel variance max(raw, 1) (+ dark variance) */
    FAID_CLIP_AZIMUTHAL,   /* variance from the spread of the corrected intensities in the bin */
    FAID_CLIP_HYBRID,      /* azimuthal while clipping, Poisson for the reported result */
} faid_clip_model;

#define FAID_PEAKS_MAX_CYCLES    64
#define FAID_PEAKS_MAX_BG_RADIUS 64
/* peakfinder8 keeps a component's pixels in a per-work-item queue of this many entries. */
#define FAID_PEAKS_MAX_PIXEL_COUNT 4096

typedef struct faid_peak_params {
    faid_peak_algorithm algorithm;
    /* sigma-clipped background (both algorithms publish it; the pyfai picker uses it) */
    double cutoff_clip; /* clip at cutoff_clip * std; 0 = Chauvenet's criterion */
    int cycles;         /* clipping iterations, 0..FAID_PEAKS_MAX_CYCLES */
    faid_clip_model error_model;
    double noise; /* detector noise floor added in quadrature to the bg std */
    /* pyfai picker */
    double cutoff_peak; /* pixel above bg + max(cutoff_peak * sigma, noise) */
    int patch_size;     /* 3 or 5 */
    int connected;      /* at least this many above-threshold pixels in the patch */
    /* peakfinder8 */
    double adc_threshold; /* ADU floor of the per-radius threshold */
    double minimum_snr;   /* radial sigma multiplier and final SNR cut */
    int min_pixel_count;
    int max_pixel_count;     /* <= FAID_PEAKS_MAX_PIXEL_COUNT */
    int local_bg_radius;     /* pixels, 1..FAID_PEAKS_MAX_BG_RADIUS */
    double min_res, max_res; /* radius window in pixels from the beam centre, inclusive */
    int max_num_peaks;       /* capacity of the peak list (both algorithms) */
    /* hits */
    int min_peaks_for_hit;
    int has_max_peaks_for_hit; /* 0: no upper limit */
    int max_peaks_for_hit;
    int hit_rate_window; /* frames in the rolling hit rate */
} faid_peak_params;

/* The defaults of the `peaks:` section (docs/peaks.md): algorithm none, Chauvenet clipping,
 * 5 cycles, azimuthal error model, noise 1, cutoff_peak 3, patch 3, connected 2, adc_threshold
 * 100, minimum_snr 5, pixel counts 2..200, local_bg_radius 3, resolution 0..1200 px, 2048 peaks,
 * 10 peaks for a hit, no maximum, a window of 200 frames. */
void faid_peak_params_default(faid_peak_params *p);

/* FAID_ECONFIG with the offending key in d when a value is out of its range or inconsistent
 * (min_pixel_count > max_pixel_count, min_res > max_res, ...). */
int faid_peak_params_check(const faid_peak_params *p, faid_diag *d);

/* Names as used in the configuration ("none", "pyfai", "peakfinder8"; "poisson", "azimuthal",
 * "hybrid"): the tables are indexed by the enum and NULL-terminated (the option table's
 * choices); parse returns FAID_EINVAL for an unknown name. */
extern const char *const faid_peak_algorithm_names[];
extern const char *const faid_clip_model_names[];
const char *faid_peak_algorithm_name(faid_peak_algorithm a);
int faid_peak_algorithm_parse(const char *name, faid_peak_algorithm *out);
const char *faid_clip_model_name(faid_clip_model m);
int faid_clip_model_parse(const char *name, faid_clip_model *out);

typedef struct faid_peak_list {
    int32_t n;        /* peaks stored */
    int32_t capacity; /* arrays' length */
    int32_t n_found;  /* peaks accepted, including those beyond capacity */
    float *x;         /* fast-axis (column) centroid, pixel-index coordinates */
    float *y;         /* slow-axis (row) centroid */
    float *intensity; /* background-subtracted integrated intensity */
    float *sigma;     /* pyfai: sqrt of the summed background variance; peakfinder8: local bg std */
    float *snr;       /* intensity / sigma */
    float *max_pixel; /* brightest pixel above the background */
    int32_t *npix;    /* pixels in the peak (pyfai: above-threshold pixels of the patch) */
    int32_t *index;   /* flat pixel index row * cols + col of the peak's seed pixel */
} faid_peak_list;

/* capacity >= 1 (usually max_num_peaks); NULL on failure. */
faid_peak_list *faid_peak_list_new(int32_t capacity);
void faid_peak_list_destroy(faid_peak_list **l);
void faid_peak_list_clear(faid_peak_list *l);
/* Appends one peak if there is room; n_found always counts it. */
void faid_peak_list_push(faid_peak_list *l, float x, float y, float intensity, float sigma,
                         float snr, float max_pixel, int32_t npix, int32_t index);

/* Fills l from the record block the OpenCL finders write (kernels/peaks/compact.cl): 8 arrays of
 * cap values (x, y, intensity, sigma, snr, max_pixel as float32; npix, index as int32 bits),
 * then the total number of peaks found (int32 bits). Keeps min(total, cap, l->capacity). */
void faid_peaks_unpack(const float *rec, int32_t cap, faid_peak_list *l);

typedef struct faid_background {
    int32_t nbins;
    float *mean;  /* sigma-clipped mean of the corrected intensity (pyFAI: intensity) */
    float *std;   /* per-pixel standard deviation of the kept pixels */
    float *sem;   /* standard error of the mean (pyFAI: sigma) */
    float *count; /* pixels kept */
} faid_background;

/* nbins >= 1; NULL on failure. */
faid_background *faid_background_new(int32_t nbins);
void faid_background_destroy(faid_background **b);

/* What the peak finders need of the geometry, built once per setup.
 *  - pyfai picker: `radius` per pixel in the background's radial unit (NaN where masked),
 *    background bin centres `radius1d` (uniformly spaced, as pyFAI assumes) and the picking
 *    window [rad_min, rad_max).
 *  - peakfinder8: `radius_px` per pixel in pixels from the beam centre, `valid` (1 = usable: not
 *    masked and min_res <= radius_px <= max_res, OM's convention) and the panel (ASIC) size;
 *    the frame is a grid of panels of panel_rows x panel_cols pixels. */
typedef struct faid_peak_geom {
    int rows, cols;
    int panel_rows, panel_cols;
    int32_t nbins;
    float *radius;   /* rows*cols */
    float *radius1d; /* nbins */
    float rad_min, rad_max;
    float *radius_px; /* rows*cols */
    uint8_t *valid;   /* rows*cols */
} faid_peak_geom;

/* Arrays allocated (radius NaN, valid 0), the whole frame one panel; for tests and drivers. */
faid_peak_geom *faid_peak_geom_alloc(int rows, int cols, int32_t nbins);
void faid_peak_geom_destroy(faid_peak_geom **g);
/* From the geometry, the mask (non-zero = bad, may be NULL) and the background's CSR matrix
 * (bin centres and range in `unit`, the matrix's unit): radius per pixel in `unit`, radius_px =
 * r_m / sqrt(pixel1 * pixel2), validity from mask and p->min_res/max_res. panel_rows/cols: the
 * panel size (0 = the whole frame); the frame must be a whole number of panels. */
faid_peak_geom *faid_peak_geom_new(const faid_geometry *g, const uint8_t *mask, const faid_csr *csr,
                                   faid_unit unit, const faid_peak_params *p, int panel_rows,
                                   int panel_cols, faid_diag *d);

/* OpenCL launch shape of the finders (faid_stage_peaks.c). Positions per
 * work-item of the flag / candidate pass (compact.cl's PK_PPI): 4 makes a span of 1,024 pixels,
 * 4,400 spans for a 4M frame to scan in the finish kernel instead of 17,500. */
#ifndef FAID_PK_PPI
#define FAID_PK_PPI 4
#endif
/* Work-groups of peakfinder8's fill kernel, which walks the candidate list (a few hundred to a
 * few thousand candidates per frame). */
#ifndef FAID_PF8_FILL_GROUPS
#define FAID_PF8_FILL_GROUPS 64
#endif

#endif
