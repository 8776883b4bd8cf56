/* faid_gen: generations, the reduction setups the pipeline runs with.
 *
 * A generation is one reduction setup and what was built from it (one engine per worker, the
 * encoded sizes of its messages): immutable once published, shared by reference count. The
 * server holds the current one (faid_server.gen under gen_mu); each frame holds a reference to
 * the one current when it was received, so a reload takes effect exactly between two frames.
 * New generations come from three places, all serialised by faid_server.build_mu:
 *   start    faid_server_new builds the first one (faid_gen_build)
 *   reload   faid_server_reload re-reads the configuration, builds, swaps (main thread)
 *   series   a start message that brings another detector mask or geometry: the build runs on
 *            a builder thread (faid_gen_job) while ingest keeps reading; frames and the start
 *            event that need it hold references to the job and wait for it */
#ifndef FAID_GEN_H
#define FAID_GEN_H

#include "faid_config.h"
#include "faid_engine.h"
#include "faid_err.h"
#include "faid_limits.h"
#include "faid_setup.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct faid_server faid_server;

typedef struct faid_gen_job faid_gen_job;

/* One reduction setup and what was built from it: immutable once published. */
typedef struct faid_gen {
    atomic_int refs;
    uint64_t version;
    faid_setup *setup;
    int nworkers;
    faid_engine *engines[FAID_MAX_WORKERS]; /* engine i is only ever used by worker i */
    faid_result *results[FAID_MAX_WORKERS];
    char *config_yaml; /* effective configuration as YAML */
    /* Pixel mask of the detector's start message OR-ed into the configured one (npix bytes,
     * owned), or NULL; its hash (0 = none) tells ingest whether a series needs a new setup. */
    uint8_t *detector_mask;
    uint64_t detector_mask_hash;
    uint64_t detector_masked; /* pixels it masks */
    /* input.geometry_source start: the start message's geometry replaced the configuration's */
    int start_geometry;
    faid_geometry geometry; /* the one in force (start or configuration) */
    uint64_t cfg_version;   /* the configuration it was built from (faid_server.cfg_version) */
    size_t result_bytes;    /* upper bound of one encoded result body, its user_data aside */
    size_t start_bytes;     /* upper bound of one encoded start body */
} faid_gen;

void faid_gen_acquire(faid_gen *g);
void faid_gen_release(faid_gen **g);

/* Builds a generation from cfg for the server's workers (main thread, off the hot path). */
faid_gen *faid_gen_build(faid_server *s, const faid_config *cfg, uint64_t version, faid_diag *d);
/* The same with a detector pixel mask (npix bytes, copied; NULL = none) and its hash. */
faid_gen *faid_gen_build_masked(faid_server *s, const faid_config *cfg, uint64_t version,
                                const uint8_t *detector_mask, uint64_t mask_hash, faid_diag *d);
/* What a series start did to the setup: the key (configuration version, detector mask bytes,
 * shape, geometry source and geometry) matched the setup in force and it was reused, or a new
 * one is built off the ingest thread (and whether that build failed). */
typedef enum { FAID_SETUP_REUSED = 0, FAID_SETUP_REBUILT, FAID_SETUP_FAILED } faid_setup_choice;
const char *faid_setup_choice_name(int choice);

/* Makes a detector pixel mask (npix bytes or NULL = none, hash its FNV-1a or 0) and a start
 * message's geometry (or the configuration's: NULL) the setup of the series that starts (ingest,
 * at a series start). When they equal the setup in force, nothing is built: *build = NULL,
 * *choice REUSED. Otherwise a builder thread builds the generation from the configuration in
 * force with them and swaps it in when ready; *build is the caller's reference to that build
 * (never blocks on the build itself). An error (nothing started, the old setup stays). */
int faid_server_series_setup(faid_server *s, const uint8_t *mask, uint64_t hash,
                             const faid_geometry *start_geometry, faid_gen_job **build,
                             faid_setup_choice *choice, faid_diag *d);
/* A build's references: acquire for each frame or event that must wait for it. */
faid_gen_job *faid_gen_job_acquire(faid_gen_job *b);
void faid_gen_job_release(faid_gen_job **b);
/* 1 once the build finished (its generation, if any, is then current or was replaced). */
int faid_gen_job_done(faid_gen_job *b);
/* Waits for the build, storing the time in *alive every 100 ms (the caller's heartbeat), and
 * returns its generation with a reference for the caller, or NULL when the build failed.
 * *build_ms (may be NULL) receives the build's duration. */
faid_gen *faid_gen_job_wait(faid_gen_job *b, atomic_int_fast64_t *alive, double *build_ms);
/* Ingest's end of a build: waits for it, joins its thread and drops the reference. */
void faid_gen_job_finish(faid_gen_job **b);
/* Returns the current generation with a reference the caller must release. */
faid_gen *faid_server_current_gen(faid_server *s);
/* Makes g current (takes over the caller's reference). */
void faid_server_swap_gen(faid_server *s, faid_gen *g);
/* Re-reads path (or the current file) and swaps in the new setup; on failure the old one stays
 * and d says why. *version receives the new setup version. */
int faid_server_reload(faid_server *s, const char *path, uint64_t *version, faid_diag *d);
/* The same with a configuration given whole as YAML (or JSON) text: relative paths in it are
 * relative to the daemon's working directory; `config_file` in status then reads "". */
int faid_server_reload_text(faid_server *s, const char *text, size_t len, uint64_t *version,
                            faid_diag *d);

#endif
