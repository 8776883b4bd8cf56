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
#include "faid_peaks.h"
#include "faid_reduce.h"

#include <stddef.h>
#include <stdint.h>

#define FAID_PATH_MAX           1024
#define FAID_CONFIG_MAX_OPTIONS 128

/* hits.mode: what a hit message on hits.endpoint carries */
enum { FAID_HITS_FRAME = 0, FAID_HITS_PATCHES = 1 };

typedef enum {
    FAID_QUEUE_BLOCK = 0,
    FAID_QUEUE_DROP_OLDEST,
    FAID_QUEUE_DROP_NEWEST
} faid_queue_policy;
/* What the lossless channel does when its buffer of unacknowledged messages is full. */
typedef enum { FAID_LL_OVERFLOW_BLOCK = 0, FAID_LL_OVERFLOW_DROP_OLDEST } faid_ll_overflow;
/* The names of queue.policy and output.lossless_overflow, indexed by the enums above and
 * NULL-terminated (the option table's choices; status and logs use them too). */
extern const char *const faid_queue_policy_names[];
extern const char *const faid_ll_overflow_names[];
/* pipeline.collect_launch: who launches a partly filled batch with a collect thread. */
typedef enum { FAID_COLLECT_LAUNCH_EAGER = 0, FAID_COLLECT_LAUNCH_FILL } faid_collect_launch;
extern const char *const faid_collect_launch_names[];

typedef struct faid_config {
    char source[FAID_PATH_MAX]; /* file it came from, "" = embedded default */

    /* detector */
    char preset[64]; /* "" = none */
    int rows, cols;
    double pixel1, pixel2; /* m */
    char mask_path[FAID_PATH_MAX];
    /* geometry */
    char poni_file[FAID_PATH_MAX];
    faid_geometry geometry; /* effective (poni file applied), rows/cols/pixels set */
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
    int npt_azim; /* 0 = no 2D cake */
    char dark_path[FAID_PATH_MAX];
    char flat_path[FAID_PATH_MAX];
    int has_dummy;
    double dummy, delta_dummy;
    double normalization_factor;
    double empty;

    /* peaks and hits (issue 6) */
    faid_peak_params peaks;
    double peaks_aggregates_interval; /* s, 0 = no aggregates topic */
    char hits_endpoint[256];          /* "" = none */
    char hits_request_endpoint[256];  /* "" = none */
    int hits_mode;                    /* FAID_HITS_FRAME | FAID_HITS_PATCHES */
    int hits_patch_radius;            /* pixels around a peak in patches mode */

    /* files of record (issue 15, daemon/faid_writer.c, writer/) */
    char writer_directory[FAID_PATH_MAX]; /* "" = no files */
    char writer_root[FAID_PATH_MAX];      /* directories control may choose lie inside it */
    int writer_profiles, writer_peaks, writer_cake, writer_hits;
    double writer_flush_interval; /* s between flushes of an open file */
    double writer_series_timeout; /* s without a message before the writer closes a file */
    int64_t writer_queue_bytes;   /* messages waiting for the writer thread, at most */
    int writer_block_frames;      /* frames per block write */

    /* daemon (issue "daemon") */
    char input_endpoint[1040];  /* one endpoint or several, comma-separated */
    int input_bind;             /* 1 = bind, 0 = connect */
    int64_t input_pinned_bytes; /* pinned input arena (faid_pinned.h), 0 = off */
    int input_pinned_copy;      /* 0 = auto (while frames wait), 1 = always, 2 = idle */
    int input_contexts;         /* 0 = shared, 1 = per_connection */
    int input_pinned_receive;   /* frames received into the pinned arena (faid_rxalloc.h) */
    int output_cake;            /* 0 = lean (I_2d), 1 = full (I_2d, sigma_2d, count_2d) */
    char input_protocol[32];    /* auto | native | dectris-v1 | dectris-v2 | fan */
    char input_channel[64];     /* DECTRIS v2 channel, "" = the first */
    char forward_endpoint[256]; /* PUSH re-sending raw input, "" = none */
    char output_endpoint[256];
    char lossless_endpoint[256];      /* "" = none */
    int sndhwm;                       /* PUB high-water mark, 0 = automatic */
    char output_extra[256];           /* output.extra: the optional outputs on, "a,b" ("": none) */
    double lossless_shutdown_timeout; /* s */
    int64_t lossless_buffer;          /* bytes of unacknowledged lossless messages kept */
    faid_ll_overflow lossless_overflow;
    double lossless_consumer_timeout; /* s of silence after which a consumer counts as gone */
    double stop_timeout;              /* s: input drained at a stop */
    char control_endpoint[256];
    /* identity of this instance among several (issue 18, PROTOCOL.md "Several instances") */
    char instance_name[128]; /* "" = <host name>:<control port>, resolved by the daemon */
    int instance_shard, instance_shards;
    char devices[128]; /* auto | cpu | ref | "0,1" */
    int queue_depth;
    faid_queue_policy queue_policy;
    int inflight;        /* frames in flight per device (slots with batch) */
    int batch;           /* frames per integration pass */
    int collect_poll_us; /* worker: poll the oldest frame and the queue every N us, 0 = block */
    int copy_threads;    /* threads per device copying a frame into pinned staging */
    int collect_thread;  /* a collect thread per device beside its worker */
    faid_collect_launch collect_launch; /* with it: who launches a partial batch */
    int64_t max_frame_bytes;
    int io_threads;            /* ZeroMQ I/O threads */
    double series_timeout;     /* s without a message before an open series closes */
    int input_geometry_source; /* 0 = configuration, 1 = start message */
    double stats_interval;     /* s */
    char log_level[16];
    char http_endpoint[256];             /* host:port of the HTTP server, "" = off */
    char http_token_file[FAID_PATH_MAX]; /* bearer tokens of the REST routes, "" = none */
    char http_tls_cert[FAID_PATH_MAX];   /* PEM certificate (chain) for HTTPS, "" = plain */
    char http_tls_key[FAID_PATH_MAX];    /* its PEM private key */
    int http_average;                    /* dashboard: profiles averaged */
    int security_curve;                  /* every socket faid serves is a CURVE server */
    char secret_key_file[FAID_PATH_MAX]; /* faid's NAME.key, "" = none */
    char authorized_keys[FAID_PATH_MAX]; /* folder of the clients' *.pub, "" = none */

    /* faid-fan (daemon/fan/): the fan-out's own sockets and policy */
    char fan_instances_endpoint[256];
    char fan_output_endpoint[256];
    char fan_control_endpoint[256];
    char fan_http_endpoint[256];    /* "" = off */
    char fan_tee_endpoint[256];     /* "" = off */
    char fan_aggregates_from[1040]; /* the instances' output endpoints, "a,b"; "" = none */
    int fan_tee_pub;                /* 0 = push, 1 = pub */
    int fan_policy;                 /* 0 = blocks, 1 = credit */
    int fan_block;
    int64_t fan_buffer_bytes;
    double fan_instance_timeout;
    double fan_end_timeout;
    int fan_config_flag; /* 0 = refuse, 1 = flag */
    int fan_io_threads;  /* ZeroMQ I/O threads of the instances' sockets */

    /* The detector and geometry keys as written (or their defaults): faid_config_resolve derives
     * the effective preset, rows/cols, pixel sizes and geometry above from them, the .poni file
     * and the presets, following the precedence documented in docs/configuration.md. */
    char key_preset[64];
    int key_shape[2];
    double key_pixel[2];
    faid_geometry key_geom;

    /* bookkeeping: line (1-based) where each option of the table was given, 0 = default */
    int given_line[FAID_CONFIG_MAX_OPTIONS];
} faid_config;

/* Splits an HTTP endpoint "host:port" or "[v6addr]:port" into host (brackets removed) and port
 * (1..65535); FAID_ECONFIG with a message in d when it is not one. */
int faid_config_split_hostport(const char *ep, char *host, size_t host_cap, int *port,
                               faid_diag *d);

/* Fills cfg with the embedded default. */
void faid_config_default(faid_config *cfg);
/* Loads a YAML file over the defaults; relative paths inside are relative to the file. */
int faid_config_load(const char *path, faid_config *cfg, faid_diag *d);
/* Applies a YAML document held in memory over cfg (what = name used in messages); relative
 * paths inside stay relative to the working directory. */
int faid_config_load_string(const char *yaml, size_t len, const char *what, faid_config *cfg,
                            faid_diag *d);
/* Writes the effective configuration as YAML that faid_config_load accepts; FAID_ESIZE when it
 * does not fit in cap bytes (NUL included). */
int faid_config_dump(const faid_config *cfg, char *buf, size_t cap);
/* The endpoints of a FAID_OT_ENDPOINTS value (text "a,b"): how many, and the i-th into out
 * (the same for the keys of a FAID_OT_KEYS value)
 * (NULL when i is out of range or it does not fit). */
#define FAID_MAX_ENDPOINTS 16
int faid_config_endpoint_count(const char *list);
const char *faid_config_endpoint_at(const char *list, int i, char *out, size_t cap);

/* 16 hex digits identifying the effective reduction parameters (geometry, detector, integration
 * options and the names of the mask/dark/flat files; faid_setup adds their contents). */
void faid_config_hash(const faid_config *cfg, char out[17]);

/* ---- the option table ---------------------------------------------------------------------- */

typedef enum {
    FAID_OT_INT,       /* int */
    FAID_OT_INT64,     /* int64_t */
    FAID_OT_DOUBLE,    /* double */
    FAID_OT_BOOL,      /* int 0/1 */
    FAID_OT_STRING,    /* char[cap]; with choices: one of them */
    FAID_OT_PATH,      /* char[FAID_PATH_MAX]; relative to the YAML file's folder; null = none */
    FAID_OT_ENUM,      /* int-sized enum, value = index in choices */
    FAID_OT_PAIR,      /* two doubles at off and off2: [a, b] */
    FAID_OT_SHAPE,     /* two ints at off and off2: [rows, cols] */
    FAID_OT_DEVICES,   /* auto | cpu | gpu | ref | index | [index, ...], stored as text "0,1" */
    FAID_OT_ENDPOINTS, /* a ZeroMQ endpoint or a list of 1..16, stored as text "a,b" */
    FAID_OT_KEYS,      /* a list of 0..16 array keys of the result message (PROTOCOL.md 3.2),
                        * stored as text "a,b" ("" = []); which of them a stage declares as an
                        * optional output is the engine's check (faid_outputs_check) */
} faid_opt_type;

enum {
    FAID_OPT_RELOAD = 1u << 0,    /* takes effect on `reload` without a restart */
    FAID_OPT_NULLABLE = 1u << 1,  /* null is a value ("absent"); has_off flags presence */
    FAID_OPT_REDUCTION = 1u << 2, /* enters the configuration hash */
    FAID_OPT_MIN_EXCL = 1u << 3,  /* the lower bound is exclusive */
    FAID_OPT_NONFINITE = 1u << 4, /* .nan / .inf accepted */
    FAID_OPT_ORDERED = 1u << 5,   /* PAIR: first < second */
    FAID_OPT_DERIVED = 1u << 6,   /* may come from the preset or the .poni file instead: the
                                   * annotated dump comments it out unless it was given */
    FAID_OPT_QUIET = 1u << 7,     /* left out of the plain dump (the start message's and
                                   * --dump-config's) and of the hash while at its default, so
                                   * configurations that do not set it dump and hash as before
                                   * the option existed */
};

typedef struct faid_option {
    const char *name; /* "integration.npt"; top-level keys have no dot */
    faid_opt_type type;
    const char *unit; /* "m", "rad", "deg", ... or "" */
    double min, max;  /* inclusive numeric range (each element of PAIR / SHAPE) */
    const char *def;  /* default as YAML text; NULL = computed (see help) */
    unsigned flags;
    const char *const *choices; /* ENUM / STRING: NULL-terminated allowed names */
    size_t off, off2;           /* offsetof(faid_config, ...): where a value is stored */
    size_t eff, eff2;           /* where the effective value is read (dump, get, hash) */
    int has_off;                /* offset of the presence flag (NULLABLE numbers), -1 = none */
    size_t cap;                 /* STRING / PATH / DEVICES capacity */
    const char *help;
} faid_option;

/* The table (*n entries). */
const faid_option *faid_config_options(size_t *n);
/* Looks an option up by its full name; NULL if unknown. */
const faid_option *faid_config_find(const char *key);
/* 1 when x is finite and inside o's numeric range (each element of a PAIR / SHAPE), what the
 * parser accepts: the check of values that reach the setup from elsewhere (a start message's
 * geometry, input.geometry_source start). */
int faid_config_in_range(const faid_option *o, double x);
/* o's range as the reference table writes it: "(0, 1e-06]", ">= 1", the choices, ... */
void faid_config_range_text(const faid_option *o, char *out, size_t cap);

/* Applies one option from YAML text (e.g. key "integration.npt", value "500", or "[0.5, 30]"),
 * then re-resolves the detector and geometry. Relative paths stay relative to the cwd. */
int faid_config_set(faid_config *cfg, const char *key, const char *value, faid_diag *d);
/* The effective value of a scalar option as a number (INT, INT64, DOUBLE, BOOL: *is_num = 1,
 * *num) or a name (ENUM, STRING: *str); returns 1 when it is null (NULLABLE, absent), 0 when set,
 * -1 for other types. */
int faid_config_value(const faid_config *cfg, const faid_option *o, int *is_num, double *num,
                      const char **str);
/* The peak parameters of cfg (a const faid_config *) as the entries of the start message's
 * "peaks" map: algorithm and every echoed peaks.* option (numbers as int or float, names as str,
 * null). The daemon's publisher and `faidctl process` (its series files) write the same map. */
struct faid_mpw;
void faid_config_put_peak_params(struct faid_mpw *w, void *cfg);
/* Whether option `name` is a peak parameter that `start` echoes and .peaks headers list (every
 * peaks.* key but peaks.algorithm, which has its own line, and peaks.aggregates_interval). */
int faid_peak_param_echoed(const char *name);
/* Writes the effective value of one option as YAML flow text (`config get`). */
int faid_config_get(const faid_config *cfg, const char *key, char *buf, size_t cap, faid_diag *d);
/* Recomputes detector and geometry from the options: preset -> detector.shape/pixel_size ->
 * poni_file (geometry; detector when no preset is given) -> explicit geometry keys. Called by the
 * loaders; needed only after editing fields by hand. */
int faid_config_resolve(faid_config *cfg, faid_diag *d);
/* 1 when every option of the table and the effective geometry are equal. */
int faid_config_equal(const faid_config *a, const faid_config *b);

typedef enum {
    FAID_DUMP_PLAIN = 0, /* effective configuration, loads back identically */
    FAID_DUMP_ANNOTATED, /* the same with every option's help, unit, range, default as comments */
    FAID_DUMP_MARKDOWN,  /* the reference table of docs/configuration.md (cfg ignored) */
} faid_dump_style;

/* As faid_config_dump, into a malloc'ed string (NULL when out of memory). */
char *faid_config_dump_alloc(const faid_config *cfg, faid_dump_style style);
/* The documented example (deploy/faid.example.yaml): the embedded default, annotated (what
 * `faidctl process --dump-config=annotated` prints without a configuration file). Options a preset
 * or a .poni file can supply are commented out there, so that a copy stays editable. */
char *faid_config_example(void);

/* 64-bit FNV-1a, chained from h (start with FAID_FNV_OFFSET). */
#define FAID_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t faid_fnv1a(uint64_t h, const void *data, size_t len);
/* The hash behind faid_config_hash; with_paths = 0 leaves out the file names (faid_setup hashes
 * the file contents instead). */
uint64_t faid_config_hash64(const faid_config *cfg, int with_paths);

#endif
