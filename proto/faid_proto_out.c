/* faid_proto_out: the output encoders of faid_proto_out.h. */
#include "faid_proto_out.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

size_t faid_proto_msgnum_placeholder(faid_mpw *w)
{
    static const uint8_t ph[9] = {0xcf, 0, 0, 0, 0, 0, 0, 0, 0};
    faid_mpw_key(w, FAID_K_MSG_NUMBER);
    faid_mpw_raw(w, ph, sizeof(ph));
    return w->len - 8;
}

void faid_proto_put_msgnum(uint8_t *at, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        at[k] = (uint8_t)(v >> (8 * (7 - k)));
}

static void rational(faid_mpw *w, const char *key, const uint64_t v[2])
{
    faid_mpw_key(w, key);
    faid_mpw_array(w, 2);
    faid_mpw_uint(w, v[0]);
    faid_mpw_uint(w, v[1]);
}

static void kv_f64(faid_mpw *w, const char *key, double v)
{
    faid_mpw_key(w, key);
    faid_mpw_f64(w, v);
}

static void kv_uint(faid_mpw *w, const char *key, uint64_t v)
{
    faid_mpw_key(w, key);
    faid_mpw_uint(w, v);
}

static void write_output(faid_mpw *w, const faid_out_array *a)
{
    faid_mpw_key(w, faid_key_name(a->key));
    if (a->type == FAID_OA_UINT) {
        faid_mpw_uint(w, a->value);
    } else if (a->type == FAID_OA_BOOL) {
        faid_mpw_bool(w, a->value != 0);
    } else if (a->ndim == 2 && a->transposed && a->type == FAID_OA_F32) {
        faid_mpw_ndarray_f32_transposed(w, a->data, a->shape[1], a->shape[0]);
    } else {
        const int nd = a->ndim == 2 ? 2 : 1;
        const uint64_t n = nd == 2 ? a->shape[0] * a->shape[1] : a->shape[0];
        faid_mpw_ndarray(w, a->type == FAID_OA_I32 ? "<i4" : "<f4", a->shape, nd, a->data,
                         (size_t)n * 4);
    }
}

/* The place of each key among the result's rows of the key table (1-based; 0: no result row),
 * built once. Sorting a result's outputs and times by it costs about 1,100 instructions a result
 * (callgrind: 1000-bin result with peaks, 25,051 instructions for the whole encoding). */
static unsigned short result_rank[FAID_NKEYS];
static pthread_once_t rank_once = PTHREAD_ONCE_INIT;

static void rank_init(void)
{
    size_t nrows;
    const faid_proto_row *rows = faid_proto_rows(&nrows);
    unsigned short n = 0;
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].msg == FAID_PMSG_RESULT && rows[i].key > 0 && rows[i].key < FAID_NKEYS &&
            !result_rank[rows[i].key])
            result_rank[rows[i].key] = ++n;
}

static unsigned rank_of(faid_key k)
{
    return k > 0 && k < FAID_NKEYS ? result_rank[k] : 0;
}

/* The indices of keys[0..n) sorted by their result row (insertion sort of a few dozen); keys
 * without a row are left out. Returns how many are kept. */
#define SORT_MAX 64
static size_t by_row(const faid_key *keys, size_t n, size_t *order)
{
    pthread_once(&rank_once, rank_init);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned r = rank_of(keys[i]);
        if (!r)
            continue;
        size_t j = m++;
        while (j > 0 && rank_of(keys[order[j - 1]]) > r) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    return m;
}

/* The outputs in the order of the result's rows of the key table: a new output's place on the
 * wire is its row's (at most SORT_MAX of them). */
static void write_outputs(faid_mpw *w, const faid_out_array *a, size_t n)
{
    faid_key keys[SORT_MAX];
    size_t order[SORT_MAX];
    n = n < SORT_MAX ? n : SORT_MAX;
    for (size_t i = 0; i < n; i++)
        keys[i] = a[i].key;
    size_t m = by_row(keys, n, order);
    for (size_t i = 0; i < m; i++)
        write_output(w, &a[order[i]]);
}

/* The times in the order of the result's rows of the key table. */
static void write_times(faid_mpw *w, const faid_out_time *t, size_t n)
{
    faid_key keys[SORT_MAX];
    size_t order[SORT_MAX];
    n = n < SORT_MAX ? n : SORT_MAX;
    for (size_t i = 0; i < n; i++)
        keys[i] = t[i].key;
    size_t m = by_row(keys, n, order);
    for (size_t i = 0; i < m; i++) {
        faid_mpw_key(w, faid_key_name(t[order[i]].key));
        faid_mpw_f64(w, t[order[i]].us);
    }
}

/* The identity stamp (PROTOCOL.md "Several instances"): instance, shard, shards. An unset
 * stamp (faidctl process) reads as instance "" and shard 0 of 1. */
static void identity(faid_mpw *w, const faid_out_identity *id)
{
    faid_mpw_key(w, FAID_K_INSTANCE);
    faid_mpw_str(w, id->instance ? id->instance : "");
    kv_uint(w, FAID_K_SHARD, id->shards ? id->shard : 0);
    kv_uint(w, FAID_K_SHARDS, id->shards ? id->shards : 1);
}

size_t faid_proto_write_result(faid_mpw *w, const faid_out_result *r)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, FAID_TOPIC_RESULT);
    kv_uint(w, FAID_K_SERIES_ID, r->series_id);
    faid_mpw_key(w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(w, r->series_uid);
    identity(w, &r->id);
    kv_uint(w, FAID_K_FRAME_ID, r->frame_id);
    kv_uint(w, FAID_K_SETUP_VERSION, r->setup_version);
    faid_mpw_key(w, FAID_K_DEVICE);
    faid_mpw_int(w, r->device);
    write_outputs(w, r->outputs, r->noutputs);
    kv_uint(w, FAID_K_RECEIVED_NS, r->received_ns);
    kv_uint(w, FAID_K_DONE_NS, r->done_ns);
    kv_f64(w, FAID_K_LATENCY_US, r->latency_us);
    kv_f64(w, FAID_K_QUEUE_US, r->queue_us);
    write_times(w, r->times, r->ntimes);
    kv_uint(w, FAID_K_PAYLOAD_BYTES, r->payload_bytes);
    const faid_in_header *h = r->in;
    if (h && h->has_timestamp)
        kv_f64(w, FAID_K_TIMESTAMP, h->timestamp);
    if (h && h->has_start_time)
        rational(w, FAID_K_START_TIME, h->start_time);
    if (h && h->has_stop_time)
        rational(w, FAID_K_STOP_TIME, h->stop_time);
    if (h && h->has_real_time)
        rational(w, FAID_K_REAL_TIME, h->real_time);
    if (h && h->user_data) {
        faid_mpw_key(w, FAID_K_USER_DATA);
        faid_mpw_raw(w, h->user_data, h->user_data_len);
    }
    size_t off = faid_proto_msgnum_placeholder(w);
    faid_mpw_map_end(w);
    return off;
}

static void kv_int(faid_mpw *w, const char *key, int64_t v)
{
    faid_mpw_key(w, key);
    faid_mpw_int(w, v);
}

static void kv_str(faid_mpw *w, const char *key, const char *v)
{
    faid_mpw_key(w, key);
    faid_mpw_str(w, v ? v : "");
}

static void kv_f64_or_nil(faid_mpw *w, const char *key, int has, double v)
{
    faid_mpw_key(w, key);
    if (has)
        faid_mpw_f64(w, v);
    else
        faid_mpw_nil(w);
}

static void kv_range(faid_mpw *w, const char *key, int has, const double v[2])
{
    faid_mpw_key(w, key);
    if (!has) {
        faid_mpw_nil(w);
        return;
    }
    faid_mpw_array(w, 2);
    faid_mpw_f64(w, v[0]);
    faid_mpw_f64(w, v[1]);
}

/* What the start message reported (start.input.reported): the fields it gave. */
static void put_reported(faid_mpw *w, const faid_input_meta *m)
{
    faid_mpw_key(w, FAID_K_REPORTED);
    faid_mpw_map_begin(w);
    if (!m) {
        faid_mpw_map_end(w);
        return;
    }
    uint32_t h = m->have;
    if (h & FAID_META_BEAM_CENTER) {
        kv_f64(w, FAID_K_BEAM_CENTER_X, m->beam_center_x);
        kv_f64(w, FAID_K_BEAM_CENTER_Y, m->beam_center_y);
    }
    if (h & FAID_META_DISTANCE)
        kv_f64(w, FAID_K_DETECTOR_DISTANCE, m->detector_distance);
    if (h & FAID_META_WAVELENGTH)
        kv_f64(w, FAID_K_INCIDENT_WAVELENGTH, m->incident_wavelength);
    if (h & FAID_META_ENERGY)
        kv_f64(w, FAID_K_INCIDENT_ENERGY, m->incident_energy);
    if (h & FAID_META_PIXEL_SIZE) {
        kv_f64(w, FAID_K_PIXEL_SIZE_X, m->pixel_size_x);
        kv_f64(w, FAID_K_PIXEL_SIZE_Y, m->pixel_size_y);
    }
    if (h & FAID_META_IMAGE_SIZE) {
        kv_int(w, FAID_K_IMAGE_SIZE_X, m->image_size_x);
        kv_int(w, FAID_K_IMAGE_SIZE_Y, m->image_size_y);
    }
    if (h & FAID_META_DTYPE)
        kv_str(w, FAID_K_IMAGE_DTYPE, faid_dtype_name(m->image_dtype));
    if (h & FAID_META_NIMAGES)
        kv_int(w, FAID_K_NIMAGES, m->nimages);
    if (h & FAID_META_COUNT_TIME)
        kv_f64(w, FAID_K_COUNT_TIME, m->count_time);
    if (h & FAID_META_FRAME_TIME)
        kv_f64(w, FAID_K_FRAME_TIME, m->frame_time);
    if (h & FAID_META_SATURATION)
        kv_int(w, FAID_K_SATURATION_VALUE, m->saturation_value);
    faid_mpw_key(w, FAID_K_CHANNELS);
    int nch = m->nchannels < 0                         ? 0
              : m->nchannels > FAID_INPUT_MAX_CHANNELS ? FAID_INPUT_MAX_CHANNELS
                                                       : m->nchannels;
    faid_mpw_array(w, (uint32_t)nch);
    for (int k = 0; k < nch; k++)
        faid_mpw_str(w, m->channels[k]);
    faid_mpw_key(w, FAID_K_PIXEL_MASK);
    faid_mpw_bool(w, m->pixel_mask.present);
    faid_mpw_key(w, FAID_K_FLATFIELD);
    faid_mpw_bool(w, m->flatfield.present);
    faid_mpw_key(w, FAID_K_COUNTRATE_TABLE);
    faid_mpw_bool(w, m->countrate_table.present);
    faid_mpw_map_end(w);
}

size_t faid_proto_write_start(faid_mpw *w, const faid_out_start *s)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, FAID_TOPIC_START);
    kv_uint(w, FAID_K_MAGIC_NUMBER, FAID_PROTO_MAGIC);
    kv_uint(w, FAID_K_PROTOCOL_VERSION, FAID_PROTO_VERSION);
    kv_str(w, FAID_K_SOFTWARE_VERSION, s->software_version);
    kv_str(w, FAID_K_REASON, s->reason);
    kv_uint(w, FAID_K_SERIES_ID, s->series_id);
    kv_str(w, FAID_K_SERIES_UNIQUE_ID, s->series_uid);
    identity(w, &s->id);
    kv_int(w, FAID_K_NIMAGES, s->nimages);
    kv_uint(w, FAID_K_SETUP_VERSION, s->setup_version);
    kv_str(w, FAID_K_CONFIG_HASH, s->config_hash);

    faid_mpw_key(w, FAID_K_GEOMETRY);
    faid_mpw_map_begin(w);
    kv_f64(w, FAID_K_DIST, s->dist);
    kv_f64(w, FAID_K_PONI1, s->poni1);
    kv_f64(w, FAID_K_PONI2, s->poni2);
    kv_f64(w, FAID_K_ROT1, s->rot1);
    kv_f64(w, FAID_K_ROT2, s->rot2);
    kv_f64(w, FAID_K_ROT3, s->rot3);
    kv_f64(w, FAID_K_WAVELENGTH, s->wavelength);
    kv_f64(w, FAID_K_PIXEL1, s->pixel1);
    kv_f64(w, FAID_K_PIXEL2, s->pixel2);
    kv_int(w, FAID_K_ROWS, s->rows);
    kv_int(w, FAID_K_COLS, s->cols);
    kv_str(w, FAID_K_DETECTOR, s->detector);
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_PARAMETERS);
    faid_mpw_map_begin(w);
    kv_int(w, FAID_K_NPT, s->npt);
    kv_int(w, FAID_K_NPT_AZIM, s->npt_azim);
    kv_str(w, FAID_K_UNIT, s->unit);
    kv_str(w, FAID_K_SPLIT, s->split);
    kv_str(w, FAID_K_ERROR_MODEL, s->error_model);
    faid_mpw_key(w, FAID_K_SOLID_ANGLE);
    faid_mpw_bool(w, s->solid_angle);
    kv_f64_or_nil(w, FAID_K_POLARIZATION_FACTOR, s->has_polarization, s->polarization_factor);
    kv_range(w, FAID_K_RADIAL_RANGE, s->has_radial_range, s->radial_range);
    kv_range(w, FAID_K_AZIMUTH_RANGE, s->has_azimuth_range, s->azimuth_range);
    kv_f64_or_nil(w, FAID_K_DUMMY, s->has_dummy, s->dummy);
    kv_f64_or_nil(w, FAID_K_DELTA_DUMMY, s->has_dummy, s->delta_dummy);
    kv_f64(w, FAID_K_NORMALIZATION_FACTOR, s->normalization_factor);
    kv_f64(w, FAID_K_EMPTY, s->empty);
    kv_str(w, FAID_K_MASK_FILE, s->mask_file);
    kv_str(w, FAID_K_DARK_FILE, s->dark_file);
    kv_str(w, FAID_K_FLAT_FILE, s->flat_file);
    kv_uint(w, FAID_K_MASKED_PIXELS, s->masked_pixels);
    faid_mpw_map_end(w);

    kv_str(w, FAID_K_UNIT, s->unit);
    uint64_t n = (uint64_t)(s->npt > 0 ? s->npt : 0);
    faid_mpw_key(w, FAID_K_RADIAL);
    faid_mpw_ndarray(w, "<f8", &n, 1, s->radial, (size_t)n * sizeof(double));
    if (s->npt_azim > 0 && s->azimuthal) {
        uint64_t na = (uint64_t)s->npt_azim;
        faid_mpw_key(w, FAID_K_AZIMUTHAL);
        faid_mpw_ndarray(w, "<f8", &na, 1, s->azimuthal, (size_t)na * sizeof(double));
    }
    if (s->peak_params) {
        faid_mpw_key(w, FAID_K_PEAKS);
        faid_mpw_map_begin(w);
        s->peak_params(w, s->peak_params_arg);
        faid_mpw_map_end(w);
        /* centre of pixel (row r, column c) at (x = c, y = r) */
        kv_str(w, FAID_K_PEAK_COORDINATES, "pixel-index");
    }
    if (s->optional_outputs && *s->optional_outputs) {
        uint32_t nx = 1;
        for (const char *p = s->optional_outputs; *p; p++)
            nx += *p == ',';
        faid_mpw_key(w, FAID_K_OPTIONAL_OUTPUTS);
        faid_mpw_array(w, nx);
        for (const char *p = s->optional_outputs; p;) {
            const char *e = strchr(p, ',');
            faid_mpw_strn(w, p, e ? (size_t)(e - p) : strlen(p));
            p = e ? e + 1 : NULL;
        }
    }
    faid_mpw_key(w, FAID_K_DEVICES);
    faid_mpw_array(w, (uint32_t)(s->ndevices > 0 ? s->ndevices : 0));
    for (int i = 0; i < s->ndevices; i++)
        faid_mpw_str(w, s->devices[i]);
    kv_str(w, FAID_K_CONFIG, s->config_yaml);

    /* the input map: which format opened the series, whether a start message was seen, what it
     * reported and what faid used of it (PROTOCOL.md 2.1) */
    const faid_input_meta *m = s->reported;
    faid_mpw_key(w, FAID_K_INPUT);
    faid_mpw_map_begin(w);
    kv_str(w, FAID_K_PROTOCOL, s->input_protocol);
    faid_mpw_key(w, FAID_K_START_MESSAGE);
    faid_mpw_bool(w, m != NULL);
    kv_str(w, FAID_K_GEOMETRY_SOURCE, s->geometry_source);
    faid_mpw_key(w, FAID_K_APPLIED);
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_PIXEL_MASK);
    faid_mpw_bool(w, s->applied_pixel_mask);
    /* the detector's flatfield is its own correction, never applied twice */
    faid_mpw_key(w, FAID_K_FLATFIELD);
    faid_mpw_bool(w, 0);
    faid_mpw_map_end(w);
    kv_uint(w, FAID_K_DETECTOR_MASKED_PIXELS, s->detector_masked_pixels);
    kv_str(w, FAID_K_SETUP, s->setup);
    kv_f64(w, FAID_K_SETUP_BUILD_MS, s->setup_build_ms);
    faid_mpw_key(w, FAID_K_SHAPE_MATCHES);
    faid_mpw_bool(w, !m || !(m->have & FAID_META_IMAGE_SIZE) ||
                         (m->image_size_y == s->rows && m->image_size_x == s->cols));
    put_reported(w, m);
    faid_mpw_map_end(w);

    if (s->user_data && s->user_data_len) {
        faid_mpw_key(w, FAID_K_USER_DATA);
        faid_mpw_raw(w, s->user_data, s->user_data_len);
    }
    size_t off = faid_proto_msgnum_placeholder(w);
    faid_mpw_map_end(w);
    return off;
}

size_t faid_proto_write_end(faid_mpw *w, const faid_out_end *e)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, FAID_TOPIC_END);
    kv_uint(w, FAID_K_SERIES_ID, e->series_id);
    faid_mpw_key(w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(w, e->series_uid);
    identity(w, &e->id);
    faid_mpw_key(w, FAID_K_REASON);
    faid_mpw_str(w, e->reason);
    kv_uint(w, FAID_K_FRAMES_RECEIVED, e->frames_received);
    kv_uint(w, FAID_K_FRAMES_PROCESSED, e->frames_processed);
    kv_uint(w, FAID_K_FRAMES_FAILED, e->frames_failed);
    kv_uint(w, FAID_K_FRAMES_DROPPED, e->frames_dropped);
    kv_uint(w, FAID_K_STALE_MESSAGES, e->stale_messages);
    faid_mpw_key(w, FAID_K_INCOMPLETE);
    faid_mpw_bool(w, e->incomplete);
    if (e->counters)
        faid_proto_write_counters(w, e->counters);
    kv_uint(w, FAID_K_SETUP_VERSION, e->setup_version);
    size_t off = faid_proto_msgnum_placeholder(w);
    faid_mpw_map_end(w);
    return off;
}

static void f64_array(faid_mpw *w, const char *key, const double *v, uint64_t n)
{
    faid_mpw_key(w, key);
    faid_mpw_ndarray(w, "<f8", &n, 1, v, (size_t)n * sizeof(double));
}

void faid_proto_write_aggregates(faid_mpw *w, const faid_out_aggregates *a)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, FAID_TOPIC_AGGREGATES);
    kv_uint(w, FAID_K_FRAMES, a->frames);
    kv_uint(w, FAID_K_HITS, a->hits);
    kv_uint(w, FAID_K_PEAKS, a->peaks);
    kv_f64(w, FAID_K_HIT_RATE, a->hit_rate);
    kv_uint(w, FAID_K_HIT_RATE_WINDOW, a->hit_rate_window);
    kv_uint(w, FAID_K_HIT_RATE_WINDOW_FRAMES, a->hit_rate_window_frames);
    f64_array(w, FAID_K_HIT_RATE_HISTORY, a->rate_history, a->n_history);
    f64_array(w, FAID_K_HIT_RATE_TIMESTAMP_HISTORY, a->time_history, a->n_history);
    faid_mpw_key(w, FAID_K_NUM_PEAKS_HISTOGRAM);
    faid_mpw_ndarray(w, "<u8", &a->n_bins, 1, a->num_peaks_histogram,
                     (size_t)a->n_bins * sizeof(uint64_t));
    kv_uint(w, FAID_K_NUM_PEAKS_BIN_WIDTH, a->bin_width);
    /* the array map of faid's arrays with the encoding of its data */
    faid_mpw_key(w, FAID_K_VIRTUAL_POWDER_PLOT);
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_DTYPE);
    faid_mpw_key(w, "<u4");
    faid_mpw_key(w, FAID_K_SHAPE);
    faid_mpw_array(w, 2);
    faid_mpw_uint(w, a->rows);
    faid_mpw_uint(w, a->cols);
    faid_mpw_key(w, FAID_K_ENCODING);
    faid_mpw_key(w, "bslz4");
    faid_mpw_key(w, FAID_K_DATA);
    faid_mpw_bin(w, a->powder_bslz4, a->powder_bytes);
    faid_mpw_map_end(w);
    faid_mpw_map_end(w);
}

static void bin_key(faid_mpw *w, const char *k)
{
    faid_mpw_bin(w, k, strlen(k));
}

/* The head of a msgpack-numpy map (binary keys nd, type, kind, shape, data: what Python's
 * msgpack-numpy needs; CrystFEL reads them too, with `type` as text) up to its "data" key: the
 * caller writes the data and ends the map. */
static void np_head(faid_mpw *w, const char *key, const char *type, const uint64_t *shape, int ndim)
{
    faid_mpw_key(w, key);
    faid_mpw_map_begin(w);
    bin_key(w, FAID_K_ND);
    faid_mpw_bool(w, 1);
    bin_key(w, FAID_K_TYPE);
    faid_mpw_key(w, type);
    bin_key(w, FAID_K_KIND);
    faid_mpw_bin(w, "", 0);
    bin_key(w, FAID_K_SHAPE);
    faid_mpw_array(w, (uint32_t)ndim);
    for (int i = 0; i < ndim; i++)
        faid_mpw_uint(w, shape[i]);
    bin_key(w, FAID_K_DATA);
}

static void put_np(faid_mpw *w, const char *key, const char *type, const uint64_t *shape, int ndim,
                   const void *data, size_t bytes)
{
    np_head(w, key, type, shape, ndim);
    faid_mpw_bin(w, data, bytes);
    faid_mpw_map_end(w);
}

/* A list of floats (CrystFEL reads peak coordinates as floats; integers would be misread). */
static void put_floats(faid_mpw *w, const char *key, const float *f, const int32_t *i, int32_t n)
{
    faid_mpw_key(w, key);
    faid_mpw_array(w, (uint32_t)(n > 0 ? n : 0));
    for (int32_t k = 0; k < n; k++)
        faid_mpw_f64(w, f ? (double)f[k] : (double)i[k]);
}

void faid_proto_write_hit(faid_mpw *w, const faid_out_hit *h)
{
    const int32_t n = h->npeaks > 0 ? h->npeaks : 0;
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, "hit");
    kv_uint(w, FAID_K_SERIES_ID, h->series_id);
    kv_uint(w, FAID_K_FRAME_ID, h->frame_id);
    kv_str(w, FAID_K_EVENT_ID, h->event_id);
    kv_f64(w, FAID_K_TIMESTAMP, h->timestamp);
    kv_f64(w, FAID_K_BEAM_ENERGY, h->beam_energy);
    kv_f64(w, FAID_K_DETECTOR_DISTANCE, h->detector_distance);
    kv_uint(w, FAID_K_NUM_PEAKS, h->num_peaks);
    kv_uint(w, FAID_K_SETUP_VERSION, h->setup_version);
    faid_mpw_key(w, FAID_K_PEAK_LIST);
    faid_mpw_map_begin(w);
    put_floats(w, FAID_K_FS, h->x, NULL, n);
    put_floats(w, FAID_K_SS, h->y, NULL, n);
    put_floats(w, FAID_K_INTENSITY, h->intensity, NULL, n);
    put_floats(w, FAID_K_NUM_PIXELS, NULL, h->npix, n);
    put_floats(w, FAID_K_MAX_PIXEL_INTENSITY, h->max_pixel, NULL, n);
    put_floats(w, FAID_K_SNR, h->snr, NULL, n);
    kv_uint(w, FAID_K_NUM_PEAKS, (uint64_t)n);
    faid_mpw_map_end(w);
    if (h->patch_radius < 0) {
        uint64_t shape[2] = {(uint64_t)h->rows, (uint64_t)h->cols};
        put_np(w, FAID_K_DETECTOR_DATA, "<f4", shape, 2, h->image,
               (size_t)h->rows * (size_t)h->cols * sizeof(float));
    } else {
        /* each peak's (2r+1)^2 patch around its rounded centroid, NaN outside the frame; the
         * patch of peak k starts at (row, col) = origin[k] */
        const int pr = h->patch_radius, side = 2 * pr + 1;
        const size_t pn = (size_t)side * (size_t)side;
        uint64_t shape[3] = {(uint64_t)n, (uint64_t)side, (uint64_t)side};
        np_head(w, FAID_K_PEAK_PATCHES, "<f4", shape, 3);
        faid_mpw_bin_head(w, (size_t)n * pn * sizeof(float)); /* the floats follow */
        for (int32_t k = 0; k < n; k++) {
            long r0 = lrintf(h->y[k]) - pr, c0 = lrintf(h->x[k]) - pr;
            for (int i = 0; i < side; i++)
                for (int j = 0; j < side; j++) {
                    long rr = r0 + i, cc = c0 + j;
                    float v = rr >= 0 && cc >= 0 && rr < h->rows && cc < h->cols
                                  ? h->image[(size_t)rr * (size_t)h->cols + (size_t)cc]
                                  : NAN;
                    faid_mpw_bytes(w, &v, sizeof v); /* little-endian hosts only (as the rest) */
                }
        }
        faid_mpw_map_end(w);
        faid_mpw_key(w, FAID_K_PEAK_PATCH_ORIGIN);
        faid_mpw_array(w, (uint32_t)n);
        for (int32_t k = 0; k < n; k++) {
            faid_mpw_array(w, 2);
            faid_mpw_int(w, lrintf(h->y[k]) - pr);
            faid_mpw_int(w, lrintf(h->x[k]) - pr);
        }
        uint64_t sb[1] = {(uint64_t)h->nbg};
        put_np(w, FAID_K_BG_I, "<f4", sb, 1, h->bg_I, h->nbg * sizeof(float));
    }
    faid_mpw_map_end(w);
}

void faid_proto_reply_begin(faid_mpw *w, int ok, faid_ctl_cmd cmd)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_OK);
    faid_mpw_bool(w, ok);
    kv_str(w, FAID_K_CMD, faid_ctl_cmd_name(cmd));
}

void faid_proto_reply_error(faid_mpw *w, faid_ctl_cmd cmd, const faid_diag *d)
{
    faid_proto_reply_begin(w, 0, cmd);
    kv_str(w, FAID_K_ERROR, d->msg);
    kv_str(w, FAID_K_CODE, faid_errname(d->code ? d->code : FAID_EINVAL));
}

void faid_proto_write_ll_reply(faid_mpw *w, const faid_out_ll_reply *r)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, r->type);
    if (strcmp(r->type, FAID_TOPIC_WELCOME) == 0) {
        faid_mpw_key(w, FAID_K_INSTANCE);
        faid_mpw_str(w, r->instance);
        kv_uint(w, FAID_K_CREDIT, r->credit);
        kv_uint(w, FAID_K_HELD, r->held);
    } else if (strcmp(r->type, FAID_TOPIC_REFUSED) == 0) {
        faid_mpw_key(w, FAID_K_INSTANCE);
        faid_mpw_str(w, r->instance);
        faid_mpw_key(w, FAID_K_CONSUMER);
        faid_mpw_str(w, r->consumer);
        faid_mpw_key(w, FAID_K_MESSAGE);
        faid_mpw_str(w, r->message);
    }
    faid_mpw_map_end(w);
}

void faid_proto_write_counters(faid_mpw *w, const faid_out_counters *c)
{
    faid_mpw_key(w, FAID_K_COUNTERS);
    faid_mpw_map_begin(w);
    kv_uint(w, "received", c->received);
    kv_uint(w, "received_bytes", c->received_bytes);
    kv_uint(w, FAID_K_PROCESSED, c->processed);
    kv_uint(w, FAID_K_FAILED, c->failed);
    kv_uint(w, "dropped", c->dropped);
    kv_uint(w, "published", c->published);
    kv_uint(w, "lossless_sent", c->lossless_sent);
    kv_uint(w, "bad_input", c->bad_input);
    kv_uint(w, "series", c->series);
    kv_uint(w, "stale", c->stale);
    kv_uint(w, "ignored", c->ignored);
    kv_uint(w, "forwarded", c->forwarded);
    kv_uint(w, "forward_dropped", c->forward_dropped);
    kv_uint(w, "hits_sent", c->hits_sent);
    kv_uint(w, "hits_dropped", c->hits_dropped);
    kv_uint(w, "hits_requested", c->hits_requested);
    kv_uint(w, "hits_delivered", c->hits_delivered);
    kv_uint(w, "hits_requesters_gone", c->hits_requesters_gone);
    kv_uint(w, "hits_requests_displaced", c->hits_requests_displaced);
    kv_uint(w, "hits_requests_repeated", c->hits_requests_repeated);
    kv_uint(w, "hits_resets", c->hits_resets);
    kv_uint(w, "setups_reused", c->setups_reused);
    kv_uint(w, "setups_rebuilt", c->setups_rebuilt);
    kv_uint(w, "start_geometry_refused", c->start_geometry_refused);
    kv_uint(w, "detector_masks_refused", c->detector_masks_refused);
    kv_uint(w, "log_suppressed", c->log_suppressed);
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_DROPS);
    faid_mpw_map_begin(w);
    for (size_t i = 0; i < c->ndrops; i++)
        kv_uint(w, c->drops[i].name, c->drops[i].value);
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_ERRORS);
    faid_mpw_map_begin(w);
    for (size_t i = 0; i < c->nerrors; i++)
        kv_uint(w, c->errors[i].name, c->errors[i].value);
    faid_mpw_map_end(w);
}

void faid_proto_write_status_entries(faid_mpw *w, const faid_out_status *s)
{
    kv_str(w, FAID_K_STATE, s->state);
    kv_uint(w, FAID_K_SERIES_ID, s->series_id);
    kv_str(w, FAID_K_SERIES_UNIQUE_ID, s->series_uid);
    identity(w, &s->id);
    kv_f64(w, FAID_K_UPTIME_S, s->uptime_s);
    kv_str(w, FAID_K_SOFTWARE_VERSION, s->software_version);
    kv_uint(w, FAID_K_PROTOCOL_VERSION, FAID_PROTO_VERSION);
    kv_uint(w, FAID_K_SETUP_VERSION, s->setup_version);
    kv_str(w, FAID_K_CONFIG_HASH, s->config_hash);
    kv_str(w, FAID_K_CONFIG_FILE, s->config_file);
    kv_str(w, FAID_K_CONFIG_START, s->config_start);

    faid_proto_write_counters(w, &s->counters);

    faid_mpw_key(w, FAID_K_INPUT);
    faid_mpw_map_begin(w);
    kv_uint(w, FAID_K_MAX_MESSAGE_BYTES, s->input.max_message_bytes);
    kv_uint(w, FAID_K_ENDPOINTS, s->input.endpoints);
    kv_uint(w, FAID_K_PINNED_BYTES, s->input.pinned_bytes);
    kv_uint(w, FAID_K_PINNED_FRAMES, s->input.pinned_frames);
    kv_uint(w, FAID_K_PINNED_FALLBACK, s->input.pinned_fallback);
    kv_str(w, FAID_K_PINNED_RECEIVE, s->input.pinned_receive ? s->input.pinned_receive : "off");
    kv_uint(w, FAID_K_PINNED_RECEIVED, s->input.pinned_received);
    kv_uint(w, FAID_K_PINNED_RECEIVE_FALLBACK, s->input.pinned_receive_fallback);
    kv_uint(w, FAID_K_ZMQ_CONTEXTS, s->input.zmq_contexts);
    kv_uint(w, FAID_K_CONNECTIONS, s->input.connections);
    kv_uint(w, FAID_K_ACCEPTED, s->input.accepted);
    kv_uint(w, FAID_K_CLOSED, s->input.closed);
    kv_uint(w, FAID_K_ACCEPT_FAILED, s->input.accept_failed);
    kv_uint(w, FAID_K_CONNECTION_CAP, s->input.connection_cap);
    kv_uint(w, FAID_K_OVER_CAP, s->input.over_cap);
    kv_str(w, FAID_K_FAN_LINK, s->input.fan_link ? s->input.fan_link : "off");
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_QUEUE);
    faid_mpw_map_begin(w);
    kv_uint(w, FAID_K_DEPTH, s->queue.depth);
    kv_uint(w, FAID_K_CAPACITY, s->queue.capacity);
    kv_str(w, FAID_K_POLICY, s->queue.policy);
    kv_uint(w, FAID_K_RESULTS_DEPTH, s->queue.results_depth);
    kv_uint(w, FAID_K_FREE_SLOTS, s->queue.free_slots);
    faid_mpw_map_end(w);

    kv_f64(w, FAID_K_FPS, s->fps);
    kv_uint(w, FAID_K_HITS_WAITING, s->hits_waiting);
    faid_mpw_key(w, FAID_K_LATENCY_US);
    faid_mpw_map_begin(w);
    kv_f64(w, FAID_K_P50, s->latency_us.p50);
    kv_f64(w, FAID_K_P99, s->latency_us.p99);
    kv_f64(w, FAID_K_MAX, s->latency_us.max);
    kv_uint(w, FAID_K_SAMPLES, s->latency_us.samples);
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_LOSSLESS);
    faid_mpw_map_begin(w);
    const char *ll_state = s->lossless.state ? s->lossless.state : "off";
    kv_str(w, FAID_K_STATE, ll_state);
    if (strcmp(ll_state, "off") != 0) {
        kv_str(w, FAID_K_CONSUMER, s->lossless.consumer);
        kv_str(w, FAID_K_INSTANCE, s->lossless.instance);
        kv_str(w, FAID_K_OVERFLOW, s->lossless.overflow);
        kv_uint(w, FAID_K_HELD, s->lossless.held);
        kv_uint(w, FAID_K_HELD_BYTES, s->lossless.held_bytes);
        kv_uint(w, FAID_K_CAPACITY_BYTES, s->lossless.capacity_bytes);
        kv_uint(w, FAID_K_SENT, s->lossless.sent);
        kv_uint(w, FAID_K_RESENT, s->lossless.resent);
        kv_uint(w, FAID_K_ACKED, s->lossless.acked);
        kv_uint(w, FAID_K_SESSIONS, s->lossless.sessions);
        kv_uint(w, FAID_K_REFUSED, s->lossless.refused);
        kv_uint(w, FAID_K_REFUSALS_UNANSWERED, s->lossless.refusals_unanswered);
        kv_uint(w, FAID_K_PINGS, s->lossless.pings);
        kv_uint(w, FAID_K_NOT_RESENT, s->lossless.not_resent);
        kv_uint(w, FAID_K_INPUT_DEFERRED, s->lossless.input_deferred);
        kv_uint(w, FAID_K_OLD_CONNECTION, s->lossless.old_connection);
        faid_mpw_key(w, FAID_K_GIVEN_UP);
        faid_mpw_map_begin(w);
        for (size_t i = 0; i < s->lossless.ngiven_up; i++)
            kv_uint(w, s->lossless.given_up[i].name, s->lossless.given_up[i].value);
        faid_mpw_map_end(w);
    }
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_DEVICES);
    faid_mpw_array(w, (uint32_t)s->ndevices);
    for (size_t i = 0; i < s->ndevices; i++) {
        const faid_out_device *dv = &s->devices[i];
        faid_mpw_map_begin(w);
        kv_uint(w, FAID_K_INDEX, (uint64_t)i);
        kv_str(w, FAID_K_SPEC, dv->spec);
        kv_str(w, FAID_K_NAME, dv->name);
        kv_uint(w, FAID_K_PROCESSED, dv->processed);
        kv_uint(w, FAID_K_FAILED, dv->failed);
        kv_f64(w, FAID_K_BUSY, dv->busy);
        kv_f64(w, FAID_K_HOST_US, dv->host_us);
        kv_f64(w, FAID_K_TABLE_US, dv->table_us);
        kv_f64(w, FAID_K_SUBMIT_US, dv->submit_us);
        kv_f64(w, FAID_K_WAIT_US, dv->wait_us);
        kv_f64(w, FAID_K_ENCODE_US, dv->encode_us);
        kv_uint(w, FAID_K_EARLY_LAUNCHES, dv->early_launches);
        faid_mpw_map_end(w);
    }

    faid_mpw_key(w, FAID_K_MEMORY);
    faid_mpw_map_begin(w);
    kv_uint(w, FAID_K_RSS_BYTES, s->memory.rss_bytes);
    kv_uint(w, FAID_K_RSS_ANON_BYTES, s->memory.rss_anon_bytes);
    kv_uint(w, FAID_K_HEAP_BYTES, s->memory.heap_bytes);
    kv_uint(w, FAID_K_MMAP_BYTES, s->memory.mmap_bytes);
    kv_uint(w, FAID_K_IN_USE_BYTES, s->memory.in_use_bytes);
    kv_uint(w, FAID_K_FREE_BYTES, s->memory.free_bytes);
    kv_uint(w, FAID_K_ARENAS, s->memory.arenas);
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_WRITER);
    faid_mpw_map_begin(w);
    kv_str(w, FAID_K_STATE, s->writer.state ? s->writer.state : "off");
    kv_str(w, FAID_K_DIRECTORY, s->writer.directory ? s->writer.directory : "");
    kv_str(w, FAID_K_FILE, s->writer.file ? s->writer.file : "");
    kv_uint(w, FAID_K_FILES_OPEN, s->writer.files_open);
    kv_uint(w, FAID_K_FILES_WRITTEN, s->writer.files_written);
    kv_uint(w, FAID_K_FRAMES_WRITTEN, s->writer.frames_written);
    kv_uint(w, FAID_K_BYTES_WRITTEN, s->writer.bytes_written);
    kv_uint(w, FAID_K_HIT_FRAMES_WRITTEN, s->writer.hit_frames_written);
    kv_uint(w, FAID_K_FRAMES_SKIPPED, s->writer.frames_skipped);
    kv_uint(w, FAID_K_FREE_BYTES, s->writer.free_bytes);
    kv_uint(w, FAID_K_QUEUED_BYTES, s->writer.queued_bytes);
    faid_mpw_key(w, FAID_K_ERRORS);
    faid_mpw_map_begin(w);
    for (size_t i = 0; i < s->writer.nerrors; i++)
        kv_uint(w, s->writer.errors[i].name, s->writer.errors[i].value);
    faid_mpw_map_end(w);
    faid_mpw_key(w, FAID_K_DROPPED);
    faid_mpw_map_begin(w);
    for (size_t i = 0; i < s->writer.ndropped; i++)
        kv_uint(w, s->writer.dropped[i].name, s->writer.dropped[i].value);
    faid_mpw_map_end(w);
    faid_mpw_map_end(w);
}

void faid_proto_write_stats(faid_mpw *w, const faid_out_status *s)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, FAID_TOPIC_STATS);
    faid_proto_write_status_entries(w, s);
    faid_mpw_map_end(w);
}
