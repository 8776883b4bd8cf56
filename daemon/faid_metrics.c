/* faid_metrics: Prometheus exposition of the daemon's counters (see faid_metrics.h). */
#include "faid_metrics.h"

#include "faid_aggregates.h"
#include "faid_log.h"
#include "faid_memstat.h"
#include "faid_state.h"

#include "faid_gen.h"
#include "faid_pool.h"
#include "faid_textbuf.h"
#include "faid_writer.h"
#include "faid_zap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const faid_metric_def defs[] = {
#define FAID_METRIC_DEF(id, name, type, labels, help) {name, type, labels, help},
    FAID_METRICS(FAID_METRIC_DEF)
#undef FAID_METRIC_DEF
};

/* Label values are escaped as the exposition format asks: backslash, quote, newline. */
static void label_value(faid_textbuf *b, const char *v)
{
    for (const char *c = v; *c; c++) {
        if (*c == '\\')
            faid_tb_puts(b, "\\\\");
        else if (*c == '"')
            faid_tb_puts(b, "\\\"");
        else if (*c == '\n')
            faid_tb_puts(b, "\\n");
        else
            faid_tb_printf(b, "%c", *c);
    }
}

static void sample_u(faid_textbuf *b, faid_metric_id id, const char *labels, uint64_t v)
{
    faid_tb_printf(b, "%s%s %llu\n", defs[id].name, labels, (unsigned long long)v);
}

static void sample_f(faid_textbuf *b, faid_metric_id id, const char *labels, double v)
{
    faid_tb_printf(b, "%s%s %.9g\n", defs[id].name, labels, v);
}

/* One histogram's samples; extra = `stage="x",` or "". */
static void histogram(faid_textbuf *b, faid_metric_id id, const char *extra, faid_histo *h)
{
    uint64_t cum = 0;
    for (int k = 0; k <= FAID_HISTO_NB; k++) {
        cum += faid_stat_get(&h->bucket[k]);
        if (k < FAID_HISTO_NB)
            faid_tb_printf(b, "%s_bucket{%sle=\"%g\"} %llu\n", defs[id].name, extra,
                           faid_histo_le[k], (unsigned long long)cum);
        else
            faid_tb_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n", defs[id].name, extra,
                           (unsigned long long)cum);
    }
    size_t el = strlen(extra);
    char lab[96] = "";
    if (el > 1 && el < sizeof lab - 2) /* `stage="x",` -> `{stage="x"}` */
        snprintf(lab, sizeof lab, "{%.*s}", (int)(el - 1), extra);
    faid_tb_printf(b, "%s_sum%s %.9f\n", defs[id].name, lab,
                   (double)faid_stat_get(&h->sum_ns) * 1e-9);
    faid_tb_printf(b, "%s_count%s %llu\n", defs[id].name, lab, (unsigned long long)cum);
}

static void device_label(char *out, size_t cap, int i)
{
    snprintf(out, cap, "{device=\"%d\"}", i);
}

/* The metrics that are one unlabelled faid_stats counter, each with the field it reads. */
#define FAID_PLAIN_METRICS(X)                                                                      \
    X(RECEIVED, received)                                                                          \
    X(RECEIVED_BYTES, received_bytes)                                                              \
    X(PROCESSED, processed)                                                                        \
    X(FAILED, failed)                                                                              \
    X(BAD_INPUT, bad_input)                                                                        \
    X(PUBLISHED, published)                                                                        \
    X(STALE, stale)                                                                                \
    X(IGNORED, ignored)                                                                            \
    X(FORWARDED, forwarded)                                                                        \
    X(FORWARD_DROPPED, forward_dropped)                                                            \
    X(LOSSLESS, lossless_sent)                                                                     \
    X(LL_RESENT, ll_resent)                                                                        \
    X(LL_ACKED, ll_acked)                                                                          \
    X(LL_REFUSED, ll_refused)                                                                      \
    X(LL_REFUSALS_UNANSWERED, ll_refused_unanswered)                                               \
    X(LL_PINGS, ll_pings)                                                                          \
    X(LL_NOT_RESENT, ll_not_resent)                                                                \
    X(LL_INPUT_DEFERRED, ll_input_deferred)                                                        \
    X(LL_OLD_CONNECTION, ll_old_conn)                                                              \
    X(LL_HELD, ll_held)                                                                            \
    X(LL_HELD_BYTES, ll_held_bytes)                                                                \
    X(LL_ACTIVE, ll_active)                                                                        \
    X(SERIES, series)                                                                              \
    X(SETUPS_REUSED, setups_reused)                                                                \
    X(SETUPS_REBUILT, setups_rebuilt)                                                              \
    X(GEOMETRY_REFUSED, start_geometry_refused)                                                    \
    X(MASKS_REFUSED, detector_masks_refused)                                                       \
    X(PEAK_FRAMES, peak_frames)                                                                    \
    X(HITS, hits)                                                                                  \
    X(PEAKS, peaks_found)                                                                          \
    X(HITS_REQUESTED, hits_requested)                                                              \
    X(HITS_DELIVERED, hits_delivered)                                                              \
    X(HITS_GONE, hits_requesters_gone)                                                             \
    X(HITS_DISPLACED, hits_requests_displaced)                                                     \
    X(HITS_REPEATED, hits_requests_repeated)                                                       \
    X(HITS_RESETS, hits_resets)                                                                    \
    X(HITS_WAITING, hits_waiting)

static void family(faid_textbuf *b, faid_server *s, faid_metric_id id, const faid_http_counts *hc)
{
    faid_stats *st = &s->stats;
    faid_writer_stats *ws = faid_writer_stats_of(s->writer);
    faid_tb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", defs[id].name, defs[id].help, defs[id].name,
                   defs[id].type);
    char lab[128];
    switch (id) {
#define FAID_PLAIN_CASE(ID, field)                                                                 \
    case FAID_M_##ID:                                                                              \
        sample_u(b, id, "", faid_stat_get(&st->field));                                            \
        break;
        FAID_PLAIN_METRICS(FAID_PLAIN_CASE)
#undef FAID_PLAIN_CASE
    case FAID_M_BUILD_INFO:
        faid_tb_printf(b, "%s{version=\"", defs[id].name);
        label_value(b, FAID_VERSION);
        faid_tb_printf(b, "\",protocol=\"%d\"} 1\n", FAID_PROTO_VERSION);
        break;
    case FAID_M_UP_SECONDS:
        sample_f(b, id, "", (double)(faid_now_ns() - s->start_mono_ns) * 1e-9);
        break;
    case FAID_M_SETUP_VERSION: {
        faid_gen *g = faid_server_current_gen(s);
        sample_u(b, id, "", g ? g->version : 0);
        faid_gen_release(&g);
        break;
    }
    case FAID_M_DROPPED:
        for (int r = 0; r < FAID_NDROPS; r++) {
            snprintf(lab, sizeof lab, "{reason=\"%s\"}", faid_drop_name((faid_drop_reason)r));
            sample_u(b, id, lab, faid_stat_get(&st->drops[r]));
        }
        break;
    case FAID_M_ERRORS:
        /* Only the codes that happened: stages x codes is a sparse table. */
        for (int sg = 0; sg < FAID_NWHERE; sg++)
            for (int c = 0; c < FAID_NCODES; c++) {
                uint64_t v = faid_stat_get(&st->errors[sg][c]);
                if (!v)
                    continue;
                snprintf(lab, sizeof lab, "{stage=\"%s\",code=\"%s\"}",
                         faid_where_name((faid_where)sg), faid_errname(-c));
                sample_u(b, id, lab, v);
            }
        break;
    case FAID_M_LL_GIVEN_UP:
        for (int k = 0; k < FAID_NMSGKINDS; k++) {
            snprintf(lab, sizeof lab, "{kind=\"%s\"}", faid_msg_kind_name((faid_msg_kind)k));
            sample_u(b, id, lab, faid_stat_get(&st->ll_given_up[k]));
        }
        break;
    case FAID_M_WRITER_FILES_OPEN:
        sample_u(b, id, "", faid_stat_get(&ws->files_open));
        break;
    case FAID_M_WRITER_FILES:
        sample_u(b, id, "", faid_stat_get(&ws->files_written));
        break;
    case FAID_M_WRITER_FRAMES:
        sample_u(b, id, "", faid_stat_get(&ws->frames_written));
        break;
    case FAID_M_WRITER_BYTES:
        sample_u(b, id, "", faid_stat_get(&ws->bytes_written));
        break;
    case FAID_M_WRITER_HITS:
        sample_u(b, id, "", faid_stat_get(&ws->hit_frames_written));
        break;
    case FAID_M_WRITER_SKIPPED:
        sample_u(b, id, "", faid_stat_get(&ws->frames_skipped));
        break;
    case FAID_M_WRITER_FREE:
        sample_u(b, id, "", faid_stat_get(&ws->free_bytes));
        break;
    case FAID_M_WRITER_ERRORS:
        for (int k = 0; k < FAID_NWERRS; k++) {
            snprintf(lab, sizeof lab, "{kind=\"%s\"}",
                     faid_writer_error_name((faid_writer_error)k));
            sample_u(b, id, lab, faid_stat_get(&ws->errors[k]));
        }
        break;
    case FAID_M_WRITER_DROPPED:
        for (int k = 0; k < FAID_NWQ; k++) {
            snprintf(lab, sizeof lab, "{kind=\"%s\"}", faid_wq_kind_name((faid_wq_kind)k));
            sample_u(b, id, lab, faid_stat_get(&ws->dropped[k]));
        }
        break;
    case FAID_M_SERIES_FRAMES:
        sample_u(b, id, "", faid_stat_get(&s->series_frames));
        break;
    case FAID_M_QUEUE:
        sample_u(b, id, "", faid_queue_len(s->frames));
        break;
    case FAID_M_QUEUE_CAP:
        sample_u(b, id, "", faid_queue_cap(s->frames));
        break;
    case FAID_M_IN_FLIGHT:
        for (int i = 0; i < s->nworkers; i++) {
            device_label(lab, sizeof lab, i);
            sample_u(b, id, lab, (uint64_t)atomic_load(&s->workers[i].in_flight));
        }
        break;
    case FAID_M_DEV_PROCESSED:
        for (int i = 0; i < s->nworkers; i++) {
            device_label(lab, sizeof lab, i);
            sample_u(b, id, lab, faid_stat_get(&s->workers[i].processed));
        }
        break;
    case FAID_M_DEV_FAILED:
        for (int i = 0; i < s->nworkers; i++) {
            device_label(lab, sizeof lab, i);
            sample_u(b, id, lab, faid_stat_get(&s->workers[i].failed));
        }
        break;
    case FAID_M_DEV_BUSY:
        for (int i = 0; i < s->nworkers; i++) {
            device_label(lab, sizeof lab, i);
            sample_f(b, id, lab, faid_bits_to_f64(atomic_load(&s->workers[i].busy_frac_bits)));
        }
        break;
    case FAID_M_DEV_INFO:
        for (int i = 0; i < s->nworkers; i++) {
            faid_tb_printf(b, "%s{device=\"%d\",name=\"", defs[id].name, i);
            label_value(b, s->workers[i].name);
            faid_tb_puts(b, "\"} 1\n");
        }
        break;
    case FAID_M_INPUT_CONN: {
        uint64_t acc = faid_stat_get(&s->in_accepted), clo = faid_stat_get(&s->in_closed);
        sample_u(b, id, "", acc > clo ? acc - clo : 0);
        break;
    }
    case FAID_M_HIT_RATE:
        sample_f(b, id, "", s->aggr ? faid_aggr_hit_rate(s->aggr, NULL) : 0.0);
        break;
    case FAID_M_FPS:
        sample_f(b, id, "", faid_stats_fps(st));
        break;
    case FAID_M_LATENCY:
        histogram(b, id, "", &st->latency);
        break;
    case FAID_M_STAGE:
        for (int t = 0; t < faid_timing_count(); t++) {
            snprintf(lab, sizeof lab, "stage=\"%s\",", faid_timing_name(t));
            histogram(b, id, lab, &st->timing[t]);
        }
        break;
    case FAID_M_CURVE_CLIENTS: {
        uint64_t admitted, refused;
        faid_zap_counts(s->zap, &admitted, &refused);
        sample_u(b, id, "{result=\"admitted\"}", admitted);
        sample_u(b, id, "{result=\"refused\"}", refused);
        break;
    }
    case FAID_M_LOG_SUPPRESSED:
        sample_u(b, id, "", faid_log_suppressed_total());
        break;
    case FAID_M_HTTP_CLIENTS:
        sample_u(b, id, "", (uint64_t)(hc->event_clients > 0 ? hc->event_clients : 0));
        break;
    case FAID_M_HTTP_CONNECTIONS:
        sample_u(b, id, "", hc->connections);
        break;
    case FAID_M_HTTP_SHED:
        sample_u(b, id, "{reason=\"header_wait\"}", hc->shed_header_wait);
        sample_u(b, id, "{reason=\"per_peer\"}", hc->shed_per_peer);
        sample_u(b, id, "{reason=\"over_limit\"}", hc->shed_over_limit);
        break;
    case FAID_M_HTTP_AUTH_REFUSED:
        sample_u(b, id, "", hc->auth_refused);
        break;
    case FAID_M_MEMORY: {
        faid_memstat m;
        faid_memstat_read(&m);
#define FAID_MEM_SAMPLE(field, kind) sample_u(b, id, "{kind=\"" kind "\"}", m.field);
        FAID_MEMSTAT_BYTES(FAID_MEM_SAMPLE)
#undef FAID_MEM_SAMPLE
        break;
    }
    case FAID_M_ARENAS: {
        faid_memstat m;
        faid_memstat_read(&m);
        sample_u(b, id, "", m.arenas);
        break;
    }
    case FAID_NMETRICS:
        break;
    }
}

char *faid_metrics_text(faid_server *s, const faid_http_counts *hc_in, size_t *len)
{
    faid_textbuf b = {0};
    const faid_http_counts zero = {0}, *hc = hc_in ? hc_in : &zero;
    for (int id = 0; id < FAID_NMETRICS; id++)
        family(&b, s, (faid_metric_id)id, hc);
    return faid_tb_take(&b, len);
}

char *faid_metrics_markdown(void)
{
    faid_textbuf b = {0};
    faid_tb_puts(&b, "| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for (int id = 0; id < FAID_NMETRICS; id++) {
        faid_tb_printf(&b, "| `%s` | %s | %s | %s", defs[id].name, defs[id].type,
                       defs[id].labels[0] ? defs[id].labels : "-", defs[id].help);
        if (id == FAID_M_STAGE) {
            faid_tb_puts(&b, " Stages:");
            for (int t = 0; t < faid_timing_count(); t++)
                faid_tb_printf(&b, "%s `%s` %s", t ? ";" : "", faid_timing_name(t),
                               faid_timing_help(t));
            faid_tb_puts(&b, ".");
        } else if (id == FAID_M_DROPPED) {
            faid_tb_puts(&b, " Reasons:");
            for (int r = 0; r < FAID_NDROPS; r++)
                faid_tb_printf(&b, "%s `%s`", r ? "," : "", faid_drop_name((faid_drop_reason)r));
            faid_tb_puts(&b, ".");
        } else if (id == FAID_M_ERRORS) {
            faid_tb_puts(&b, " Stages:");
            for (int sg = 0; sg < FAID_NWHERE; sg++)
                faid_tb_printf(&b, "%s `%s`", sg ? "," : "", faid_where_name((faid_where)sg));
            faid_tb_puts(&b, "; codes: the `FAID_E*` names of `faid_err.h`.");
        }
        faid_tb_puts(&b, " |\n");
    }
    faid_tb_printf(&b, "\nHistogram buckets (seconds):");
    for (int k = 0; k < FAID_HISTO_NB; k++)
        faid_tb_printf(&b, " %g", faid_histo_le[k]);
    faid_tb_puts(&b, ", +Inf.\n");
    return faid_tb_take(&b, NULL);
}
