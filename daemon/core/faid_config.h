/* faid_config: the effective configuration and the one option table behind it. Every option has
 * a name ("integration.npt"), type, unit, range, default, reloadable flag and help text; the
 * table drives YAML parsing (unknown keys and out-of-range values are errors naming the key and
 * line), `faid --dump-config`, the documented example in deploy/ and `config get`.
 * Without a file the embedded default applies: EIGER 4M preset, 1000 bins in q_nm^-1, full
 * split, poisson. */
#ifndef FAID_CONFIG_H
#define FAID_CONFIG_H

#include "faid_csr.h"
#include "faid_err.h"
#include "faid_geometry.h"
#include "faid_reduce.h"

#include <stddef.h>
#include <stdint.h>

#define FAID_PATH_MAX 1024

typedef enum { FAID_QUEUE_BLOCK = 0, FAID_QUEUE_DROP_OLDEST, FAID_QUEUE_DROP_NEWEST } faid_queue_policy;

typedef struct faid_config {
    char source[FAID_PATH_MAX];        /* file it came from, "" = embedded default */

    /* detector */
    char preset[64];                   /* "" = none */
    int rows, cols;
    double pixel1, pixel2;             /* m */
    char mask_path[FAID_PATH_MAX];
    /* geometry */
    char poni_file[FAID_PATH_MAX];
    faid_geometry geometry;            /* effective (poni file applied), rows/cols/pixels set */
    /* integration */
    int npt;
    faid_unit unit;
    faid_split split;
    faid_error_model error_model;
    int solid_angle;
    int has_polarization;
    double polarization_factor;
    int has_radial_range;
    double radial_range[2];
    int has_azimuth_range;
    double azimuth_range[2];
    int npt_azim;                      /* 0 = no 2D cake */
    char dark_path[FAID_PATH_MAX];
    char flat_path[FAID_PATH_MAX];
    int has_dummy;
    double dummy, delta_dummy;
    double normalization_factor;
    double empty;

    /* daemon (issue "daemon") */
    char input_endpoint[256];
    int input_bind;                    /* 1 = bind, 0 = connect */
    char input_protocol[32];           /* auto | native | dectris-v1 | dectris-v2 */
    char output_endpoint[256];
    char lossless_endpoint[256];       /* "" = none */
    char control_endpoint[256];
    char devices[128];                 /* auto | cpu | ref | "0,1" */
    int queue_depth;
    faid_queue_policy queue_policy;
    int inflight;                      /* frames in flight per device */
    int64_t max_frame_bytes;
    double stats_interval;             /* s */
    char log_level[16];
} faid_config;

/* Fills cfg with the embedded default. */
void faid_config_default(faid_config *cfg);
/* Loads a YAML file over the defaults; relative paths inside are relative to the file. */
int faid_config_load(const char *path, faid_config *cfg, faid_diag *d);
/* Applies a YAML document held in memory (what = name used in messages). */
int faid_config_load_string(const char *yaml, size_t len, const char *what, faid_config *cfg,
                            faid_diag *d);
/* Writes the effective configuration as YAML that faid_config_load accepts. */
int faid_config_dump(const faid_config *cfg, char *buf, size_t cap);
/* 16 hex digits identifying the effective reduction parameters. */
void faid_config_hash(const faid_config *cfg, char out[17]);

#endif
