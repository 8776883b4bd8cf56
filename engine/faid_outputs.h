/* faid_outputs: what a stage hands to the world, declared next to the stage.
 *
 * A stage's `outputs` table (faid_stage.h) names each output array or scalar it puts into a
 * faid_result: its protocol key (the row of proto/faid_proto_keys.h that documents it and fixes
 * its place on the wire), its element type, its extent (a function of the setup: the profile's
 * bins, the cake, the background's bins, the frame's peaks, or one value) and the field of the
 * result it lives in. After every collect the engine turns the declarations of the stages that
 * run for the setup into the result's `out` views (faid_out_array, faid_proto_out.h); the
 * publisher's and `faidctl process`' result messages are those views, written in key table
 * order by faid_proto_write_result, the clients decode them by key. So a new output costs the
 * stage (its declaration row, and its collect / ref_run filling the field) and one key row.
 * The field must exist: values with no home in faid_result yet need one (faid_engine.h, or
 * core's faid_profile / faid_background / faid_peak_list), a third file.
 * A stage's `timings` table names the frame times it accounts for (faid_stage_times fields).
 *
 * Adding an output: docs/ARCHITECTURE.md, "Adding an output". */
#ifndef FAID_OUTPUTS_H
#define FAID_OUTPUTS_H

#include "faid_engine.h"
#include "faid_proto_keys.h"

#include <stddef.h>

/* Where an output's values are, and how many: the part of faid_result its field belongs to. */
typedef enum {
    FAID_OX_BINS = 0, /* r->p1d (faid_profile), nbins values: the radial bins */
    FAID_OX_CAKE,     /* r->p2d (faid_profile), nrad x nazim ([nrad][nazim], published
                       * transposed as [npt_azim, npt]); absent without a cake */
    FAID_OX_BG,       /* r->bg (faid_background), nbins values; absent without peaks */
    FAID_OX_PEAKS,    /* r->peaks (faid_peak_list), n values (this frame's list); without peaks
                       * absent */
    FAID_OX_SCALAR,   /* a field of faid_result itself (int32_t for UINT, int for BOOL) */
} faid_out_extent;

typedef struct faid_output_decl {
    faid_key key;        /* its protocol key: a row of the result message in faid_proto_keys.h */
    faid_out_atype type; /* FAID_OA_F32 / FAID_OA_I32 arrays; FAID_OA_UINT (an int32_t, < 0
                          * written as 0) / FAID_OA_BOOL (an int) scalars */
    faid_out_extent extent;
    size_t field; /* offsetof the field in the extent's struct (arrays: its float * / int32_t *) */
    int optional; /* 1: published only when the configuration's output.extra lists its key */
} faid_output_decl;

/* A declaration row: FAID_OUTPUT(I, F32, BINS, faid_profile, I). */
#define FAID_OUTPUT(k, t, x, type_, member)                                                        \
    {                                                                                              \
        .key = FAID_KEY_##k, .type = FAID_OA_##t, .extent = FAID_OX_##x,                           \
        .field = offsetof(type_, member)                                                           \
    }
/* An optional output's row: off unless output.extra names its key (its bytes cost every result
 * message and file row, so outputs few consumers want are optional). */
#define FAID_OUTPUT_OPTIONAL(k, t, x, type_, member)                                               \
    {                                                                                              \
        .key = FAID_KEY_##k, .type = FAID_OA_##t, .extent = FAID_OX_##x,                           \
        .field = offsetof(type_, member), .optional = 1                                            \
    }

/* A time of the frame: a double field of faid_stage_times (microseconds), its name and meaning
 * (/metrics' faid_stage_seconds{stage=NAME} and its documentation), the result key it is
 * published under (FAID_KEY_UNKNOWN: none) and whether the daemon keeps a histogram of it. */
typedef struct faid_time_decl {
    const char *name;
    const char *help;
    faid_key key;
    size_t field; /* offsetof(faid_stage_times, ...) */
    int histogram;
    faid_key status; /* status devices[]' key for its mean per frame on each device since start or
                      * `reset` (FAID_KEY_UNKNOWN: none) */
    int peaks_only;  /* a peak stage's time: in a result only when it has peaks (r->peaks) */
} faid_time_decl;

/* A time row: FAID_TIME("decode", DECODE_US, decode_us, 1, "decompression ..."); key UNKNOWN
 * for none. */
#define FAID_TIME(name_, k, member, histo, help_)                                                  \
    {                                                                                              \
        .name = (name_), .help = (help_), .key = FAID_KEY_##k,                                     \
        .field = offsetof(faid_stage_times, member), .histogram = (histo)                          \
    }

/* Every time of a frame, in order: the engine's host and transfer times, each stage's `timings`
 * in pipeline order, the engine's total. faid_times_count() rows, faid_times_at(i) each (NULL out
 * of range); faid_time_us the value of row t in st. */
int faid_times_count(void);
const faid_time_decl *faid_times_at(int i);
/* The row status devices[] publish under key k (host_us: the engine's "host" row), NULL when
 * none. status' table_us is not an engine time: it is ingest's parse of the block table, before
 * the frame reaches a worker (the daemon's, as its queue time). */
const faid_time_decl *faid_times_status(faid_key k);
double faid_time_us(const faid_time_decl *t, const faid_stage_times *st);

/* The views of every output declared by the stages that run for this result (enabled: per stage
 * id, NULL = all) and that are on (optional ones only when `extra`, the configuration's
 * output_extra text "a,b", names them; NULL or "" = none) and present in the result (a cake
 * output only when its array is among the result's cake_arrays: the daemon's lean cake publishes
 * I_2d and no sigma_2d or count_2d): up to FAID_RESULT_OUTPUTS (faid_engine.h), in stage order.
 * Called by the engine after each collect; callers that fill a
 * result themselves may call it too. Returns the number of views. */
int faid_outputs_fill(faid_result *r, const int *enabled, const char *extra);

/* Whether output o is on for the output.extra text `extra` (always for one not optional). */
int faid_outputs_on(const faid_output_decl *o, const char *extra);

/* output.extra's check against the declarations: every key it lists is an optional output of a
 * stage; FAID_ECONFIG naming the first that is not (and the optional outputs there are). The
 * engine calls it for every setup it takes. */
int faid_outputs_check(const faid_config *cfg, faid_diag *d);

/* The largest message bytes the outputs of this setup that are on can take (arrays' data plus 64
 * bytes of key and header each), for sizing result buffers. */
size_t faid_outputs_bound(const faid_setup *s);

/* The declaration of key k (NULL when no stage declares it). */
const faid_output_decl *faid_outputs_find(faid_key k);

#endif
