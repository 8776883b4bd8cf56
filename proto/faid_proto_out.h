/* faid_proto_out: the encoders of faid's output messages that need no daemon state: start,
 * result, end, aggregates, hit, the status / stats body, the lossless channel's answers (welcome,
 * refused, ping) and the msg_number placeholder. The daemon fills plain structs and calls them
 * (aggregates too); the keys come from the key table (faid_proto_keys.h) and the map sizes are
 * counted by the writer. (error is in faid_proto.h.) */
#ifndef FAID_PROTO_OUT_H
#define FAID_PROTO_OUT_H

#include "faid_input.h"
#include "faid_proto.h"

/* Writes "msg_number" with a fixed-width placeholder (uint 64); returns the offset of its 8 value
 * bytes, which the publisher fills in when it sends (faid_proto_put_msgnum). */
size_t faid_proto_msgnum_placeholder(faid_mpw *w);
/* Fills the placeholder at `at` (big-endian, as msgpack's uint 64). */
void faid_proto_put_msgnum(uint8_t *at, uint64_t v);

/* Which instance made a message, and which part of the series it reduces (PROTOCOL.md
 * "Several instances"): written as instance, shard, shards after series_unique_id. A zeroed
 * stamp writes instance "", shard 0, shards 1. */
typedef struct faid_out_identity {
    const char *instance;
    uint32_t shard, shards;
} faid_out_identity;

/* One named output of a result: an array (float32 or int32, 1 or 2 dimensions) or a scalar (uint,
 * bool), under its protocol key. The engine makes one per output its stages declare
 * (engine/faid_outputs.h); the encoder writes them in the order of the result's rows in the key
 * table (faid_proto_keys.h), so a new output needs no encoder code. A key without a result row
 * is not written. */
typedef enum {
    FAID_OA_F32 = 0, /* array `<f4` */
    FAID_OA_I32,     /* array `<i4` */
    FAID_OA_UINT,    /* scalar: value */
    FAID_OA_BOOL,    /* scalar: value != 0 */
} faid_out_atype;

typedef struct faid_out_array {
    faid_key key;
    faid_out_atype type;
    int ndim;          /* arrays: 1 or 2 */
    uint64_t shape[2]; /* as published */
    int transposed;    /* 2D: data is [shape[1]][shape[0]] (the engine's cake), published
                        * transposed as [shape[0], shape[1]] */
    const void *data;
    uint64_t value; /* scalars */
} faid_out_array;

/* One engine time of a result under its key (decode_us, ...: the engine's and stages' declared
 * times, engine/faid_outputs.h), written in key table order like the outputs. */
typedef struct faid_out_time {
    faid_key key;
    double us;
} faid_out_time;

/* A result (PROTOCOL.md 3.2). Its outputs are the views `outputs` (the engine's,
 * faid_out_result_outputs: written in key table order whatever order they are given in) and its
 * engine times the list `times` (faid_out_result_times); there is no other way in, so the
 * daemon, `faidctl process`, the tests and the benchmarks write results through one path. Callers
 * that fill a result by hand make views with faid_out_f32 / _i32 / _cake / _uint / _bool. */
typedef struct faid_out_result {
    uint64_t series_id;
    const char *series_uid;
    faid_out_identity id;
    uint64_t frame_id;
    uint64_t setup_version;
    int device;
    const faid_out_array *outputs;
    size_t noutputs;
    uint64_t received_ns, done_ns, payload_bytes;
    double latency_us, queue_us;
    const faid_out_time *times;
    size_t ntimes;
    const faid_in_header *in; /* timestamp, start/stop/real_time and user_data passed through */
} faid_out_result;

/* Views of values filled by hand: an array of n float32 / int32, a cake of float32 in the
 * engine's [nrad][nazim] layout (published transposed, [nazim, nrad]), a uint or bool scalar. */
static inline faid_out_array faid_out_f32(faid_key k, uint64_t n, const float *p)
{
    return (faid_out_array){.key = k, .type = FAID_OA_F32, .ndim = 1, .shape = {n}, .data = p};
}
static inline faid_out_array faid_out_i32(faid_key k, uint64_t n, const int32_t *p)
{
    return (faid_out_array){.key = k, .type = FAID_OA_I32, .ndim = 1, .shape = {n}, .data = p};
}
static inline faid_out_array faid_out_cake(faid_key k, uint64_t nazim, uint64_t nrad,
                                           const float *p)
{
    return (faid_out_array){.key = k,
                            .type = FAID_OA_F32,
                            .ndim = 2,
                            .shape = {nazim, nrad},
                            .transposed = 1,
                            .data = p};
}
static inline faid_out_array faid_out_uint(faid_key k, uint64_t v)
{
    return (faid_out_array){.key = k, .type = FAID_OA_UINT, .value = v};
}
static inline faid_out_array faid_out_bool(faid_key k, int v)
{
    return (faid_out_array){.key = k, .type = FAID_OA_BOOL, .value = (uint64_t)(v != 0)};
}
/* Returns the offset of msg_number's value bytes. */
size_t faid_proto_write_result(faid_mpw *w, const faid_out_result *r);

/* A named count of the status maps the daemon names from its own tables: drops per
 * `stage.reason`, errors per `stage.CODE`, lossless given_up per message kind. */
typedef struct faid_out_count {
    const char *name;
    uint64_t value;
} faid_out_count;

/* The daemon-wide totals (PROTOCOL.md 3.3 end, 4 status): the "counters", "drops" and "errors"
 * entries. errors lists only the codes that happened (the map is sparse). */
typedef struct faid_out_counters {
    uint64_t received, received_bytes, processed, failed, dropped, published, lossless_sent,
        bad_input, series, stale, ignored, forwarded, forward_dropped, hits_sent, hits_dropped,
        hits_requested, hits_delivered, hits_requesters_gone, hits_requests_displaced,
        hits_requests_repeated, hits_resets, setups_reused, setups_rebuilt, start_geometry_refused,
        detector_masks_refused, log_suppressed;
    const faid_out_count *drops;
    size_t ndrops;
    const faid_out_count *errors;
    size_t nerrors;
} faid_out_counters;
/* Writes the "counters", "drops" and "errors" entries into a map the caller began. */
void faid_proto_write_counters(faid_mpw *w, const faid_out_counters *c);

/* One worker of status's "devices" (its index is its position). */
typedef struct faid_out_device {
    const char *spec, *name;
    uint64_t processed, failed;
    double busy, host_us, table_us;
    double submit_us, wait_us, encode_us; /* the worker's time per frame (status devices[]) */
    uint64_t early_launches;
} faid_out_device;

/* The status body (PROTOCOL.md 4, status reply and periodic stats message). */
typedef struct faid_out_status {
    const char *state;
    uint64_t series_id;
    const char *series_uid;
    faid_out_identity id; /* this instance; shard: the current or last series' */
    double uptime_s;
    const char *software_version;
    uint64_t setup_version;
    const char *config_hash, *config_file, *config_start;
    faid_out_counters counters;
    struct {
        uint64_t max_message_bytes, endpoints, pinned_bytes, pinned_frames, pinned_fallback,
            pinned_received, pinned_receive_fallback, zmq_contexts, connections, accepted, closed,
            accept_failed, connection_cap, over_cap;
        /* input.pinned_receive: "on", "off" or "unavailable" (NULL: "off") */
        const char *pinned_receive;
        /* input.protocol fan: the link to the fan-out (`"off"`, `"joining"`, `"live"`,
         * `"refused"`, `"silent"`) */
        const char *fan_link;
    } input;
    struct {
        uint64_t depth, capacity;
        const char *policy;
        uint64_t results_depth, free_slots;
    } queue;
    double fps;
    uint64_t hits_waiting;
    struct {
        double p50, p99, max;
        uint64_t samples;
    } latency_us;
    struct {
        const char *state; /* "off": the other fields are not written */
        const char *consumer, *instance, *overflow;
        uint64_t held, held_bytes, capacity_bytes, sent, resent, acked, sessions, refused;
        uint64_t refusals_unanswered, pings, not_resent, input_deferred, old_connection;
        const faid_out_count *given_up;
        size_t ngiven_up;
    } lossless;
    const faid_out_device *devices;
    size_t ndevices;
    struct {
        uint64_t rss_bytes, rss_anon_bytes, heap_bytes, mmap_bytes, in_use_bytes, free_bytes,
            arenas;
    } memory;
    struct {
        const char *state, *directory, *file;
        uint64_t files_open, files_written, frames_written, bytes_written, hit_frames_written,
            frames_skipped, free_bytes, queued_bytes;
        const faid_out_count *errors, *dropped;
        size_t nerrors, ndropped;
    } writer;
} faid_out_status;
/* Writes the status entries into a map the caller began (after faid_proto_reply_begin for the
 * status reply); faid_proto_write_stats writes the whole stats message (type "stats"). */
void faid_proto_write_status_entries(faid_mpw *w, const faid_out_status *s);
void faid_proto_write_stats(faid_mpw *w, const faid_out_status *s);

/* An end (PROTOCOL.md 3.3). counters: the "counters", "drops" and "errors" entries (NULL: none). */
typedef struct faid_out_end {
    uint64_t series_id;
    const char *series_uid;
    faid_out_identity id;
    const char *reason;
    uint64_t frames_received, frames_processed, frames_failed, frames_dropped, stale_messages;
    int incomplete;
    uint64_t setup_version;
    const faid_out_counters *counters;
} faid_out_end;
/* Returns the offset of msg_number's value bytes. */
size_t faid_proto_write_end(faid_mpw *w, const faid_out_end *e);

/* A start (PROTOCOL.md 3.1): what the series (or a reload's setup) is reduced with. */
typedef struct faid_out_start {
    const char *software_version;
    const char *reason;
    uint64_t series_id;
    const char *series_uid;
    faid_out_identity id;
    int64_t nimages;
    uint64_t setup_version;
    const char *config_hash;
    /* geometry */
    double dist, poni1, poni2, rot1, rot2, rot3, wavelength, pixel1, pixel2;
    int rows, cols;
    const char *detector;
    /* parameters */
    int npt, npt_azim; /* npt_azim 0: no cake */
    const char *unit, *split, *error_model;
    int solid_angle;
    int has_polarization, has_radial_range, has_azimuth_range, has_dummy;
    double polarization_factor, radial_range[2], azimuth_range[2], dummy, delta_dummy;
    double normalization_factor, empty;
    const char *mask_file, *dark_file, *flat_file;
    uint64_t masked_pixels;
    const double *radial;    /* npt bin centres */
    const double *azimuthal; /* npt_azim bin centres, with a cake */
    const char
        *optional_outputs; /* the optional outputs on, "a,b" (output.extra); NULL or "": none */
    /* with peaks: writes the entries of the "peaks" map (algorithm, parameters); NULL: none */
    void (*peak_params)(faid_mpw *w, void *arg);
    void *peak_params_arg;
    const char *const *devices;
    int ndevices;
    const char *config_yaml;
    /* input (section 2.1) */
    const char *input_protocol;
    const char *geometry_source;
    int applied_pixel_mask;
    uint64_t detector_masked_pixels;
    const char *setup;
    double setup_build_ms;
    const faid_input_meta *reported; /* the start message's metadata, NULL without one */
    const uint8_t *user_data;        /* one msgpack value, or NULL */
    size_t user_data_len;
} faid_out_start;
/* Returns the offset of msg_number's value bytes. */
size_t faid_proto_write_start(faid_mpw *w, const faid_out_start *s);

/* An aggregates message (PROTOCOL.md 3.4a). The powder pattern's counts arrive compressed
 * (bitshuffle-LZ4 of <u4 [rows, cols]). */
typedef struct faid_out_aggregates {
    uint64_t frames, hits, peaks;
    double hit_rate;
    uint64_t hit_rate_window, hit_rate_window_frames;
    const double *rate_history, *time_history; /* n_history each, oldest first */
    uint64_t n_history;
    const uint64_t *num_peaks_histogram; /* n_bins */
    uint64_t n_bins, bin_width;
    uint64_t rows, cols;
    const void *powder_bslz4;
    size_t powder_bytes;
} faid_out_aggregates;
void faid_proto_write_aggregates(faid_mpw *w, const faid_out_aggregates *a);

/* A hit on the hits channel (PROTOCOL.md 3.7), OM's and CrystFEL's live layout. With
 * patch_radius < 0 the whole frame goes as detector_data; otherwise each peak's
 * (2r+1)^2 patch around its rounded centroid (NaN outside the frame), their origins and the
 * background profile. image is the decoded frame, float32 [rows][cols]. */
typedef struct faid_out_hit {
    uint64_t series_id, frame_id;
    const char *event_id;
    double timestamp, beam_energy, detector_distance;
    uint64_t num_peaks, setup_version;
    int32_t npeaks;
    const float *x, *y, *intensity, *max_pixel, *snr;
    const int32_t *npix;
    const float *image;
    int rows, cols;
    int patch_radius;
    const float *bg_I;
    size_t nbg;
} faid_out_hit;
void faid_proto_write_hit(faid_mpw *w, const faid_out_hit *h);

/* Control replies (PROTOCOL.md 4): faid_proto_reply_begin begins the reply map with "ok" and
 * "cmd"; the command's keys follow (for status, the status body), then faid_mpw_map_end.
 * faid_proto_reply_error is a whole failed reply's keys after the begin: "error" and "code". */
void faid_proto_reply_begin(faid_mpw *w, int ok, faid_ctl_cmd cmd);
void faid_proto_reply_error(faid_mpw *w, faid_ctl_cmd cmd, const faid_diag *d);

/* The lossless channel's answers (PROTOCOL.md 3.6): topic "welcome" (instance, credit, held),
 * "refused" (instance, consumer, message) or "ping" (type only). */
typedef struct faid_out_ll_reply {
    const char *type;
    const char *instance;
    uint64_t credit, held;
    const char *consumer, *message;
} faid_out_ll_reply;
void faid_proto_write_ll_reply(faid_mpw *w, const faid_out_ll_reply *r);

#endif
