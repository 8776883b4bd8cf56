/* Unit tests of the stages' declared outputs (engine/faid_outputs.h): every declaration has a row
 * of the result message in the key table with its type, no key is declared twice, the views
 * faid_outputs_fill makes of a result with a cake and peaks are what the result holds, and the
 * result message written from those views (in any order) is byte for byte the one the fixed
 * fields faid_out_result had before the views wrote. */
#include "faid_test.h"

#include "faid_config.h"
#include "faid_outfill.h"
#include "faid_outputs.h"
#include "faid_proto_out.h"
#include "faid_setup.h"
#include "faid_stage.h"

#include <stdlib.h>
#include <string.h>

static const faid_proto_row *result_row(faid_key k)
{
    size_t n;
    const faid_proto_row *rows = faid_proto_rows(&n);
    for (size_t i = 0; i < n; i++)
        if (rows[i].msg == FAID_PMSG_RESULT && rows[i].key == k)
            return &rows[i];
    return NULL;
}

static void test_decls(void)
{
    static const char *const type_prefix[] = {
        [FAID_OA_F32] = "array `<f4`",
        [FAID_OA_I32] = "array `<i4`",
        [FAID_OA_UINT] = "uint",
        [FAID_OA_BOOL] = "bool",
    };
    int total = 0;
    for (int i = 0; faid_stages[i]; i++)
        for (int k = 0; k < faid_stages[i]->noutputs; k++) {
            const faid_output_decl *o = &faid_stages[i]->outputs[k];
            const faid_proto_row *row = result_row(o->key);
            const char *t = type_prefix[o->type];
            CHECK_MSG(row != NULL, "stage %s: output \"%s\" has no result row in faid_proto_keys.h",
                      faid_stages[i]->name, faid_key_name(o->key));
            CHECK_MSG(!row || strncmp(row->type, t, strlen(t)) == 0,
                      "stage %s: output \"%s\": the key table says %s, the declaration %s",
                      faid_stages[i]->name, faid_key_name(o->key), row ? row->type : "-", t);
            CHECK_MSG(faid_outputs_find(o->key) == o, "output \"%s\" declared twice",
                      faid_key_name(o->key));
            CHECK(!(o->extent == FAID_OX_SCALAR) == (o->type <= FAID_OA_I32));
            total++;
        }
    CHECK(total > 0 && total <= FAID_RESULT_OUTPUTS);
    CHECK(faid_outputs_find(FAID_KEY_SERIES_ID) == NULL);
}

static faid_setup *small_setup(void)
{
    static const char yaml[] =
        "detector: {preset: null, shape: [30, 40], pixel_size: [1.0e-4, 1.0e-4]}\n"
        "geometry: {dist: 0.05}\n"
        "integration: {npt: 20, npt_azim: 8}\n"
        "peaks: {algorithm: pyfai, max_num_peaks: 6}\n";
    faid_config c;
    faid_diag d = {0};
    faid_config_default(&c);
    CHECK_MSG(faid_config_load_string(yaml, sizeof yaml - 1, "test", &c, &d) == 0, "%s", d.msg);
    faid_setup *s = faid_setup_new(&c, 1, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    return s;
}

/* FNV-1a over the bytes, from offset 1469598103934665603 (the golden hash below was taken with
 * it). */
static uint64_t bytes_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static size_t encode(const faid_out_result *o, uint8_t *buf, size_t cap)
{
    faid_mpw w;
    faid_mpw_init(&w, buf, cap);
    faid_proto_write_result(&w, o);
    faid_diag d = {0};
    CHECK_MSG(faid_mpw_finish(&w, &d) == 0, "%s", d.msg);
    return w.len;
}

static void fill(float *p, size_t n, float base)
{
    for (size_t i = 0; i < n; i++)
        p[i] = base + (float)i;
}

static void test_views(void)
{
    faid_setup *s = small_setup();
    if (!s)
        return;
    faid_result *r = faid_result_new(s);
    CHECK(r && r->p2d && r->bg && r->peaks);
    if (!r || !r->p2d || !r->bg || !r->peaks) {
        faid_result_destroy(&r);
        faid_setup_destroy(&s);
        return;
    }
    const size_t nb = (size_t)r->p1d->nbins, n2 = (size_t)r->p2d->nbins;
    fill(r->p1d->I, nb, 1);
    fill(r->p1d->sigma, nb, 100);
    fill(r->p1d->std, nb, 200);
    fill(r->p1d->count, nb, 300);
    fill(r->p2d->I, n2, 1000);
    fill(r->p2d->sigma, n2, 2000);
    fill(r->p2d->count, n2, 3000);
    fill(r->bg->mean, (size_t)r->bg->nbins, 4000);
    fill(r->bg->sem, (size_t)r->bg->nbins, 5000);
    fill(r->bg->std, (size_t)r->bg->nbins, 6000);
    fill(r->bg->count, (size_t)r->bg->nbins, 7000);
    r->peaks->n = 3;
    r->peaks->n_found = 9;
    fill(r->peaks->x, 3, 10);
    fill(r->peaks->y, 3, 20);
    fill(r->peaks->intensity, 3, 30);
    fill(r->peaks->sigma, 3, 40);
    fill(r->peaks->snr, 3, 50);
    fill(r->peaks->max_pixel, 3, 60);
    for (int i = 0; i < 3; i++)
        r->peaks->npix[i] = 5 + i;
    r->num_peaks = 9;
    r->is_hit = 1;

    int enabled[FAID_STAGE_MAX];
    for (int i = 0; i < FAID_STAGE_MAX; i++)
        enabled[i] = 1;
    const int n = faid_outputs_fill(r, enabled, "sum_normalization");
    CHECK(n == r->nout && n > 0);
    for (int i = 0; i < n; i++) {
        const faid_out_array *v = &r->out[i];
        if (v->key == FAID_KEY_I2D)
            CHECK(v->ndim == 2 && v->transposed && v->shape[0] == (uint64_t)r->p2d->nazim &&
                  v->shape[1] == (uint64_t)r->p2d->nrad && v->data == r->p2d->I);
        if (v->key == FAID_KEY_PEAK_NPIX)
            CHECK(v->type == FAID_OA_I32 && v->shape[0] == 3 && v->data == r->peaks->npix);
        if (v->key == FAID_KEY_NUM_PEAKS)
            CHECK(v->type == FAID_OA_UINT && v->value == 9);
        if (v->key == FAID_KEY_BG_SIGMA)
            CHECK(v->data == r->bg->sem && v->shape[0] == (uint64_t)r->bg->nbins);
    }
    /* a stage that does not run for the setup contributes nothing */
    int only_int[FAID_STAGE_MAX] = {0};
    only_int[faid_stage_id(&faid_stage_integrate)] = 1;
    CHECK(faid_outputs_fill(r, only_int, "sum_normalization") == faid_stage_integrate.noutputs);
    faid_outputs_fill(r, enabled, "sum_normalization");

    faid_out_result views = {.series_id = 3, .series_uid = "u", .frame_id = 4};
    /* the views of the outputs faid_out_result had fixed fields for, reversed: the key table
     * fixes the order on the wire (outputs added since are left out, to compare with the fixed
     * fields' message) */
    static const faid_key fixed_keys[] = {
        FAID_KEY_I,          FAID_KEY_SIGMA,    FAID_KEY_STD,       FAID_KEY_COUNT,
        FAID_KEY_I2D,        FAID_KEY_SIGMA2D,  FAID_KEY_COUNT2D,   FAID_KEY_NUM_PEAKS,
        FAID_KEY_IS_HIT,     FAID_KEY_PEAK_X,   FAID_KEY_PEAK_Y,    FAID_KEY_PEAK_INTENSITY,
        FAID_KEY_PEAK_SIGMA, FAID_KEY_PEAK_SNR, FAID_KEY_PEAK_NPIX, FAID_KEY_PEAK_MAX_PIXEL,
        FAID_KEY_BG_I,       FAID_KEY_BG_SIGMA, FAID_KEY_BG_STD,    FAID_KEY_BG_COUNT,
    };
    faid_out_array rev[FAID_RESULT_OUTPUTS];
    size_t nrev = 0;
    for (int i = n - 1; i >= 0; i--)
        for (size_t k = 0; k < sizeof fixed_keys / sizeof fixed_keys[0]; k++)
            if (r->out[i].key == fixed_keys[k])
                rev[nrev++] = r->out[i];
    CHECK(nrev == sizeof fixed_keys / sizeof fixed_keys[0]);
    views.outputs = rev;
    views.noutputs = nrev;
    /* the fixed fields' message had the five engine times, 0 when not set */
    const faid_out_time zero[] = {
        {FAID_KEY_COMPUTE_US, 0},    {FAID_KEY_TRANSFER_US, 0}, {FAID_KEY_INTEGRATE_US, 0},
        {FAID_KEY_PREPROCESS_US, 0}, {FAID_KEY_DECODE_US, 0},
    };
    views.times = zero;
    views.ntimes = 5;
    const size_t cap = 1 << 16;
    uint8_t *b = malloc(cap);
    size_t lb = b ? encode(&views, b, cap) : 0;
    /* byte for byte the message the build with faid_out_result's fixed fields wrote from them for
     * this result (3596 bytes, hash c8a32993f1dd6d1b), plus the identity stamp of issue 18
     * (instance "", shard 0, shards 1: 25 bytes; without it the bytes are the old ones) */
    CHECK(lb == 3621 && bytes_hash(b, lb) == 0x23a41fda37fe997cull);
    free(b);
    faid_result_destroy(&r);
    faid_setup_destroy(&s);
}

/* A result's arrays without a field in faid_out_msg (an output of a newer daemon, or one this
 * decoder has a key but no field for) are decoded by key; other unknown values are skipped. */
static void test_decode_extra(void)
{
    static uint8_t buf[4096];
    const float v[3] = {1.5f, 2.5f, -3.0f};
    const int32_t iv[2] = {7, -8};
    const uint64_t n3 = 3, n2 = 2;
    faid_mpw w;
    faid_mpw_init(&w, buf, sizeof buf);
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, FAID_K_TYPE);
    faid_mpw_key(&w, FAID_TOPIC_RESULT);
    faid_mpw_key(&w, FAID_K_I);
    faid_mpw_ndarray(&w, "<f4", &n3, 1, v, sizeof v);
    faid_mpw_key(&w, "future_array");
    faid_mpw_ndarray(&w, "<i4", &n2, 1, iv, sizeof iv);
    faid_mpw_key(&w, "future_scalar");
    faid_mpw_uint(&w, 5);
    faid_mpw_key(&w, "future_map"); /* a map that is no array: skipped */
    faid_mpw_map_begin(&w);
    faid_mpw_key(&w, "a");
    faid_mpw_uint(&w, 1);
    faid_mpw_map_end(&w);
    faid_mpw_key(&w, FAID_K_SUM_NORMALIZATION);
    faid_mpw_ndarray(&w, "<f4", &n3, 1, v, sizeof v);
    faid_mpw_map_end(&w);
    faid_diag d = {0};
    CHECK(faid_mpw_finish(&w, &d) == 0);
    faid_out_msg m;
    CHECK_MSG(faid_proto_decode_output(buf, w.len, &m, &d) == 0, "%s", d.msg);
    CHECK(m.type == FAID_OUT_RESULT && m.I.nelem == 3);
    CHECK(m.nextra == 2);
    CHECK(strcmp(m.extra[0].key, "future_array") == 0 && m.extra[0].a.dtype == FAID_DT_I32 &&
          m.extra[0].a.nelem == 2 && memcmp(m.extra[0].a.data, iv, sizeof iv) == 0);
    const faid_array_view *s = faid_out_msg_array(&m, FAID_K_SUM_NORMALIZATION);
    CHECK(s && s->dtype == FAID_DT_F32 && s->nelem == 3 && memcmp(s->data, v, sizeof v) == 0);
    CHECK(faid_out_msg_array(&m, FAID_K_I) == &m.I);
    CHECK(faid_out_msg_array(&m, FAID_K_SIGMA) == NULL);
    CHECK(faid_out_msg_array(&m, "future_scalar") == NULL);
}

/* The times of a frame come from the engine's rows and the stages' tables; the result's time
 * keys are written in the key table's order whatever order the list gives them in. */
static void test_times(void)
{
    const char *names[32];
    int n = faid_times_count();
    CHECK(n > 0 && n < 32);
    for (int i = 0; i < n && i < 32; i++)
        names[i] = faid_times_at(i)->name;
    CHECK(faid_times_at(n) == NULL && faid_times_at(-1) == NULL);
    CHECK(strcmp(names[0], "host") == 0 && strcmp(names[1], "transfer") == 0);
    CHECK(strcmp(names[2], "decode") == 0 && strcmp(names[n - 1], "compute") == 0);
    for (int i = 0; i < n; i++) {
        const faid_time_decl *t = faid_times_at(i);
        CHECK_MSG(t->key == FAID_KEY_UNKNOWN || result_row(t->key) != NULL,
                  "time \"%s\": key without a result row", t->name);
        for (int j = 0; j < i; j++)
            CHECK_MSG(strcmp(names[i], names[j]) != 0, "time \"%s\" declared twice", names[i]);
    }

    faid_result r = {.t = {.decode_us = 1.25,
                           .preprocess_us = 2.5,
                           .integrate_us = 3.75,
                           .transfer_us = 4.5,
                           .h2d_us = 4.0,
                           .d2h_us = 0.5,
                           .total_us = 20.0,
                           .stage_us = 7.0,
                           .clip_us = 9.0,
                           .pkfind_us = 11.0}};
    faid_out_time t[16];
    faid_out_result a = {.series_uid = "", .latency_us = 30, .queue_us = 5};
    faid_out_result b = a;
    /* without peaks (r.peaks NULL) no clip_us / find_us: the peak stages' times are theirs */
    faid_out_result_times(&a, t, 16, &r);
    CHECK(a.ntimes == 8);
    for (size_t i = 0; i < a.ntimes; i++)
        CHECK(t[i].key != FAID_KEY_CLIP_US && t[i].key != FAID_KEY_FIND_US);
    faid_peak_list pl = {0};
    r.peaks = &pl;
    faid_out_time tp[16];
    faid_out_result c = a;
    faid_out_result_times(&c, tp, 16, &r);
    CHECK(c.ntimes == 10);
    int seen = 0;
    for (size_t i = 0; i < c.ntimes; i++)
        seen |= (tp[i].key == FAID_KEY_CLIP_US && tp[i].us == 9.0) |
                (tp[i].key == FAID_KEY_FIND_US && tp[i].us == 11.0) << 1;
    CHECK(seen == 3);
    /* the same times given in another order */
    const faid_out_time given[] = {
        {FAID_KEY_COMPUTE_US, 20.0},   {FAID_KEY_DECODE_US, 1.25},    {FAID_KEY_TRANSFER_US, 4.5},
        {FAID_KEY_PREPROCESS_US, 2.5}, {FAID_KEY_INTEGRATE_US, 3.75}, {FAID_KEY_D2H_US, 0.5},
        {FAID_KEY_H2D_US, 4.0},        {FAID_KEY_HOST_US, 7.0},
    };
    b.times = given;
    b.ntimes = 8;
    const float I = 1;
    const faid_out_array prof[] = {
        faid_out_f32(FAID_KEY_I, 1, &I), faid_out_f32(FAID_KEY_SIGMA, 1, &I),
        faid_out_f32(FAID_KEY_STD, 1, &I), faid_out_f32(FAID_KEY_COUNT, 1, &I)};
    a.outputs = b.outputs = prof;
    a.noutputs = b.noutputs = 4;
    uint8_t x[2048], y[2048];
    size_t lx = encode(&a, x, sizeof x), ly = encode(&b, y, sizeof y);
    CHECK(lx > 0 && lx == ly && memcmp(x, y, lx) == 0);
}

/* An optional output (sum_normalization) is viewed only when output.extra names it, and counts
 * in the result buffer's bound only then; output.extra naming a key no stage declares optional
 * is a configuration error naming the key. */
static void test_optional(void)
{
    const faid_output_decl *sn = faid_outputs_find(FAID_KEY_SUM_NORMALIZATION);
    CHECK(sn && sn->optional);
    CHECK(!faid_outputs_find(FAID_KEY_I)->optional);
    CHECK(!faid_outputs_on(sn, NULL) && !faid_outputs_on(sn, "") &&
          !faid_outputs_on(sn, "sum_normalizatio") && !faid_outputs_on(sn, "sum_normalization_x"));
    CHECK(faid_outputs_on(sn, "sum_normalization") && faid_outputs_on(sn, "x,sum_normalization"));
    CHECK(faid_outputs_on(faid_outputs_find(FAID_KEY_I), NULL));

    faid_setup *s = small_setup();
    faid_result *r = faid_result_new(s);
    CHECK(r != NULL);
    int only_int[FAID_STAGE_MAX] = {0};
    only_int[faid_stage_id(&faid_stage_integrate)] = 1;
    const int off = faid_outputs_fill(r, only_int, NULL);
    for (int i = 0; i < off; i++)
        CHECK(r->out[i].key != FAID_KEY_SUM_NORMALIZATION);
    CHECK(faid_outputs_fill(r, only_int, "sum_normalization") == off + 1);
    const size_t bound_off = faid_outputs_bound(s);
    snprintf(s->cfg.output_extra, sizeof s->cfg.output_extra, "sum_normalization");
    CHECK(faid_outputs_bound(s) == bound_off + (size_t)s->csr->nbins * 4 + 64);

    faid_diag d = {0};
    CHECK(faid_outputs_check(&s->cfg, &d) == FAID_OK);
    snprintf(s->cfg.output_extra, sizeof s->cfg.output_extra, "sum_normalization,count");
    CHECK(faid_outputs_check(&s->cfg, &d) == FAID_ECONFIG);
    CHECK_MSG(strstr(d.msg, "output.extra: 'count' is not an optional output") &&
                  strstr(d.msg, "sum_normalization"),
              "%s", d.msg);
    faid_result_destroy(&r);
    faid_setup_destroy(&s);
}

/* A lean cake (faid_result.cake_arrays 1, the daemon's output.cake lean): I_2d keeps its view,
 * sigma_2d and count_2d get none (their values were not read back); 2 keeps sigma_2d, 4 (what
 * faid_result_new sets) all three. */
static int has_view(const faid_result *r, faid_key k)
{
    for (int i = 0; i < r->nout; i++)
        if (r->out[i].key == k)
            return 1;
    return 0;
}

static void test_cake_arrays(void)
{
    faid_setup *s = small_setup();
    faid_result *r = s ? faid_result_new(s) : NULL;
    CHECK(r && r->p2d && r->cake_arrays == 4);
    if (!r || !r->p2d) {
        faid_result_destroy(&r);
        faid_setup_destroy(&s);
        return;
    }
    int only_int[FAID_STAGE_MAX] = {0};
    only_int[faid_stage_id(&faid_stage_integrate)] = 1;
    const int full = faid_outputs_fill(r, only_int, NULL);
    CHECK(has_view(r, FAID_KEY_I2D) && has_view(r, FAID_KEY_SIGMA2D) &&
          has_view(r, FAID_KEY_COUNT2D));
    r->cake_arrays = 1;
    CHECK(faid_outputs_fill(r, only_int, NULL) == full - 2);
    CHECK(has_view(r, FAID_KEY_I2D) && !has_view(r, FAID_KEY_SIGMA2D) &&
          !has_view(r, FAID_KEY_COUNT2D));
    CHECK(has_view(r, FAID_KEY_SIGMA) && has_view(r, FAID_KEY_COUNT)); /* the 1D profile stays */
    r->cake_arrays = 2;
    CHECK(faid_outputs_fill(r, only_int, NULL) == full - 1);
    CHECK(has_view(r, FAID_KEY_SIGMA2D) && !has_view(r, FAID_KEY_COUNT2D));
    faid_result_destroy(&r);
    faid_setup_destroy(&s);
}

/* status devices[].host_us is the engine's declared "host" time; table_us (ingest's parse) has no
 * engine row, nor has a key no status publishes. */
static void test_status_times(void)
{
    const faid_time_decl *h = faid_times_status(FAID_KEY_HOST_US);
    CHECK(h && strcmp(h->name, "host") == 0 && h->field == offsetof(faid_stage_times, stage_us));
    faid_stage_times t = {.stage_us = 12.5, .table_us = 3};
    CHECK(h && faid_time_us(h, &t) == 12.5);
    CHECK(faid_times_status(FAID_KEY_TABLE_US) == NULL);
    CHECK(faid_times_status(FAID_KEY_UNKNOWN) == NULL);
    int n = 0;
    for (int i = 0; i < faid_times_count(); i++)
        n += faid_times_at(i)->status != FAID_KEY_UNKNOWN;
    CHECK(n == 1);
}

int main(void)
{
    RUN(test_decls());
    RUN(test_optional());
    RUN(test_cake_arrays());
    RUN(test_status_times());
    RUN(test_views());
    RUN(test_decode_extra());
    RUN(test_times());
    return faid_test_finish();
}
