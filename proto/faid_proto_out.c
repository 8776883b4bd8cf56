/* faid_proto_out: the output encoders of faid_proto_out.h. */
#include "faid_proto_out.h"

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

static void f32_array(faid_mpw *w, const char *key, const float *v, uint64_t n)
{
    faid_mpw_key(w, key);
    faid_mpw_ndarray(w, "<f4", &n, 1, v, (size_t)n * sizeof(float));
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

size_t faid_proto_write_result(faid_mpw *w, const faid_out_result *r)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, FAID_TOPIC_RESULT);
    kv_uint(w, FAID_K_SERIES_ID, r->series_id);
    faid_mpw_key(w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(w, r->series_uid);
    kv_uint(w, FAID_K_FRAME_ID, r->frame_id);
    kv_uint(w, FAID_K_SETUP_VERSION, r->setup_version);
    faid_mpw_key(w, FAID_K_DEVICE);
    faid_mpw_int(w, r->device);
    f32_array(w, FAID_K_I, r->I, r->npt);
    f32_array(w, FAID_K_SIGMA, r->sigma, r->npt);
    f32_array(w, FAID_K_STD, r->std, r->npt);
    f32_array(w, FAID_K_COUNT, r->count, r->npt);
    if (r->cake_nrad && r->cake_nazim) {
        faid_mpw_key(w, FAID_K_I2D);
        faid_mpw_ndarray_f32_transposed(w, r->I_2d, r->cake_nrad, r->cake_nazim);
        faid_mpw_key(w, FAID_K_SIGMA2D);
        faid_mpw_ndarray_f32_transposed(w, r->sigma_2d, r->cake_nrad, r->cake_nazim);
        faid_mpw_key(w, FAID_K_COUNT2D);
        faid_mpw_ndarray_f32_transposed(w, r->count_2d, r->cake_nrad, r->cake_nazim);
    }
    if (r->has_peaks) {
        const uint64_t np = r->npeaks;
        kv_uint(w, FAID_K_NUM_PEAKS, r->num_peaks);
        faid_mpw_key(w, FAID_K_IS_HIT);
        faid_mpw_bool(w, r->is_hit);
        f32_array(w, FAID_K_PEAK_X, r->peak_x, np);
        f32_array(w, FAID_K_PEAK_Y, r->peak_y, np);
        f32_array(w, FAID_K_PEAK_INTENSITY, r->peak_intensity, np);
        f32_array(w, FAID_K_PEAK_SIGMA, r->peak_sigma, np);
        f32_array(w, FAID_K_PEAK_SNR, r->peak_snr, np);
        faid_mpw_key(w, FAID_K_PEAK_NPIX);
        faid_mpw_ndarray(w, "<i4", &np, 1, r->peak_npix, (size_t)np * sizeof(int32_t));
        f32_array(w, FAID_K_PEAK_MAX_PIXEL, r->peak_max_pixel, np);
        f32_array(w, FAID_K_BG_I, r->bg_I, r->nbg);
        f32_array(w, FAID_K_BG_SIGMA, r->bg_sigma, r->nbg);
        f32_array(w, FAID_K_BG_STD, r->bg_std, r->nbg);
        f32_array(w, FAID_K_BG_COUNT, r->bg_count, r->nbg);
    }
    kv_uint(w, FAID_K_RECEIVED_NS, r->received_ns);
    kv_uint(w, FAID_K_DONE_NS, r->done_ns);
    kv_f64(w, FAID_K_LATENCY_US, r->latency_us);
    kv_f64(w, FAID_K_QUEUE_US, r->queue_us);
    kv_f64(w, FAID_K_DECODE_US, r->decode_us);
    kv_f64(w, FAID_K_PREPROCESS_US, r->preprocess_us);
    kv_f64(w, FAID_K_INTEGRATE_US, r->integrate_us);
    kv_f64(w, FAID_K_TRANSFER_US, r->transfer_us);
    kv_f64(w, FAID_K_COMPUTE_US, r->compute_us);
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

size_t faid_proto_write_end(faid_mpw *w, const faid_out_end *e)
{
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_TYPE);
    faid_mpw_key(w, FAID_TOPIC_END);
    kv_uint(w, FAID_K_SERIES_ID, e->series_id);
    faid_mpw_key(w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(w, e->series_uid);
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
        e->counters(w, e->arg);
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
