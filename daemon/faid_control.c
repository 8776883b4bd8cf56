/* faid_control: requests of the control socket (status, config, reload, reset, stop, ping) and the
 * status map shared with the periodic stats message. Runs on the main thread, so a reload (which
 * builds a whole new reduction setup and engines) never delays a frame: the pipeline keeps using
 * the old generation until the new one is swapped in. */
#include "faid_server.h"

#include "faid_aggregates.h"
#include "faid_log.h"

#include <stdio.h>
#include <string.h>

double faid_bits_to_f64(uint64_t bits)
{
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

uint64_t faid_f64_to_bits(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return bits;
}

static void kv_uint(faid_mpw *w, const char *k, uint64_t v)
{
    faid_mpw_key(w, k);
    faid_mpw_uint(w, v);
}

void faid_counter_entries(faid_server *s, faid_mpw *w)
{
    faid_stats *st = &s->stats;
    faid_mpw_key(w, FAID_K_COUNTERS);
    faid_mpw_map_begin(w);
    kv_uint(w, "received", faid_stat_get(&st->received));
    kv_uint(w, "received_bytes", faid_stat_get(&st->received_bytes));
    kv_uint(w, FAID_K_PROCESSED, faid_stat_get(&st->processed));
    kv_uint(w, FAID_K_FAILED, faid_stat_get(&st->failed));
    kv_uint(w, "dropped", faid_stat_get(&st->dropped));
    kv_uint(w, "published", faid_stat_get(&st->published));
    kv_uint(w, "lossless_sent", faid_stat_get(&st->lossless_sent));
    kv_uint(w, "bad_input", faid_stat_get(&st->bad_input));
    kv_uint(w, "series", faid_stat_get(&st->series));
    kv_uint(w, "stale", faid_stat_get(&st->stale));
    kv_uint(w, "ignored", faid_stat_get(&st->ignored));
    kv_uint(w, "forwarded", faid_stat_get(&st->forwarded));
    kv_uint(w, "forward_dropped", faid_stat_get(&st->forward_dropped));
    kv_uint(w, "hits_sent", faid_stat_get(&st->hits_sent));
    kv_uint(w, "hits_dropped", faid_stat_get(&st->hits_dropped));
    kv_uint(w, "hits_requested", faid_stat_get(&st->hits_requested));
    kv_uint(w, "setups_reused", faid_stat_get(&st->setups_reused));
    kv_uint(w, "setups_rebuilt", faid_stat_get(&st->setups_rebuilt));
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_DROPS);
    faid_mpw_map_begin(w);
    for (int r = 0; r < FAID_NDROPS; r++)
        kv_uint(w, faid_drop_name((faid_drop_reason)r), faid_stat_get(&st->drops[r]));
    faid_mpw_map_end(w);

    /* Only the codes that happened: the table is sparse (the writer counts the entries). */
    faid_mpw_key(w, FAID_K_ERRORS);
    faid_mpw_map_begin(w);
    for (int sg = 0; sg < FAID_NSTAGES; sg++)
        for (int c = 0; c < FAID_NCODES; c++) {
            uint64_t v = faid_stat_get(&st->errors[sg][c]);
            if (v) {
                char key[64];
                snprintf(key, sizeof(key), "%s.%s", faid_stage_name((faid_stage)sg),
                         faid_errname(-c));
                kv_uint(w, key, v);
            }
        }
    faid_mpw_map_end(w);
}

static const char *state_name(int st)
{
    switch (st) {
    case FAID_STATE_RUNNING:
        return "running";
    case FAID_STATE_STOPPING:
        return "stopping";
    default:
        return "idle";
    }
}

static const char *policy_name(faid_queue_policy p)
{
    switch (p) {
    case FAID_QUEUE_DROP_OLDEST:
        return "drop_oldest";
    case FAID_QUEUE_DROP_NEWEST:
        return "drop_newest";
    default:
        return "block";
    }
}

void faid_status_entries(faid_server *s, faid_mpw *w)
{
    faid_gen *g = faid_server_current_gen(s);
    char uid[FAID_SERIES_UID_MAX];
    pthread_mutex_lock(&s->info_mu);
    snprintf(uid, sizeof(uid), "%s", s->series_uid);
    pthread_mutex_unlock(&s->info_mu);

    faid_mpw_key(w, FAID_K_STATE);
    faid_mpw_str(w, state_name(atomic_load(&s->state)));
    kv_uint(w, FAID_K_SERIES_ID, atomic_load(&s->series_id));
    faid_mpw_key(w, FAID_K_SERIES_UNIQUE_ID);
    faid_mpw_str(w, uid);
    faid_mpw_key(w, FAID_K_UPTIME_S);
    faid_mpw_f64(w, (double)(faid_now_ns() - s->start_mono_ns) / 1e9);
    faid_mpw_key(w, FAID_K_SOFTWARE_VERSION);
    faid_mpw_str(w, FAID_VERSION);
    kv_uint(w, FAID_K_PROTOCOL_VERSION, FAID_PROTO_VERSION);
    kv_uint(w, FAID_K_SETUP_VERSION, g ? g->version : 0);
    faid_mpw_key(w, FAID_K_CONFIG_HASH);
    faid_mpw_str(w, g ? g->setup->config_hash : "");
    /* Which file is in force, and the start file SIGHUP re-reads: they differ after a
     * `reload PATH` from control. */
    faid_mpw_key(w, FAID_K_CONFIG_FILE);
    faid_mpw_str(w, g ? g->setup->cfg.source : "");
    faid_mpw_key(w, FAID_K_CONFIG_START);
    faid_mpw_str(w, s->config_path);
    faid_gen_release(&g);

    faid_counter_entries(s, w);

    /* The input's connections as libzmq reported them (monitor, main thread). */
    uint64_t acc = faid_stat_get(&s->in_accepted), clo = faid_stat_get(&s->in_closed);
    faid_mpw_key(w, FAID_K_INPUT);
    faid_mpw_map_begin(w);
    kv_uint(w, FAID_K_MAX_MESSAGE_BYTES, (uint64_t)s->input_max_msg);
    kv_uint(w, FAID_K_ENDPOINTS, (uint64_t)s->npull);
    kv_uint(w, FAID_K_PINNED_BYTES, s->pinned ? (uint64_t)s->cfg.input_pinned_bytes : 0);
    kv_uint(w, FAID_K_PINNED_FRAMES, faid_stat_get(&s->pin_frames));
    kv_uint(w, FAID_K_PINNED_FALLBACK, faid_stat_get(&s->pin_fallback));
    kv_uint(w, FAID_K_CONNECTIONS, acc > clo ? acc - clo : 0);
    kv_uint(w, FAID_K_ACCEPTED, acc);
    kv_uint(w, FAID_K_CLOSED, clo);
    kv_uint(w, FAID_K_ACCEPT_FAILED, faid_stat_get(&s->in_accept_failed));
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_QUEUE);
    faid_mpw_map_begin(w);
    kv_uint(w, FAID_K_DEPTH, faid_queue_len(s->frames));
    kv_uint(w, FAID_K_CAPACITY, faid_queue_cap(s->frames));
    faid_mpw_key(w, FAID_K_POLICY);
    faid_mpw_str(w, policy_name(s->policy));
    kv_uint(w, FAID_K_RESULTS_DEPTH, faid_queue_len(s->results));
    kv_uint(w, FAID_K_FREE_SLOTS, faid_queue_len(s->pool));
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_FPS);
    faid_mpw_f64(w, faid_stats_fps(&s->stats));
    faid_mpw_key(w, FAID_K_LATENCY_US);
    faid_mpw_map_begin(w);
    faid_mpw_key(w, FAID_K_P50);
    faid_mpw_f64(w, faid_stats_latency_quantile(&s->stats, 0.50));
    faid_mpw_key(w, FAID_K_P99);
    faid_mpw_f64(w, faid_stats_latency_quantile(&s->stats, 0.99));
    faid_mpw_key(w, FAID_K_MAX);
    faid_mpw_f64(w, (double)faid_stat_get(&s->stats.lat_max_ns) / 1e3);
    kv_uint(w, FAID_K_SAMPLES, faid_stat_get(&s->stats.lat_count));
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_LOSSLESS);
    faid_mpw_map_begin(w);
    if (!s->ll) {
        faid_mpw_key(w, FAID_K_STATE);
        faid_mpw_str(w, "off");
    } else {
        faid_stats *st = &s->stats;
        char consumer[512];
        faid_lossless_consumer(s->ll, consumer, sizeof(consumer));
        faid_mpw_key(w, FAID_K_STATE);
        faid_mpw_str(w, faid_stat_get(&st->ll_active) ? "active" : "waiting");
        faid_mpw_key(w, FAID_K_CONSUMER);
        faid_mpw_str(w, consumer);
        faid_mpw_key(w, FAID_K_INSTANCE);
        faid_mpw_str(w, faid_lossless_instance(s->ll));
        faid_mpw_key(w, FAID_K_OVERFLOW);
        faid_mpw_str(w, s->ll_overflow == FAID_LL_OVERFLOW_DROP_OLDEST ? "drop_oldest" : "block");
        kv_uint(w, FAID_K_HELD, faid_stat_get(&st->ll_held));
        kv_uint(w, FAID_K_HELD_BYTES, faid_stat_get(&st->ll_held_bytes));
        kv_uint(w, FAID_K_CAPACITY_BYTES, faid_lossless_capacity(s->ll));
        kv_uint(w, FAID_K_SENT, faid_stat_get(&st->lossless_sent));
        kv_uint(w, FAID_K_RESENT, faid_stat_get(&st->ll_resent));
        kv_uint(w, FAID_K_ACKED, faid_stat_get(&st->ll_acked));
        kv_uint(w, FAID_K_SESSIONS, faid_stat_get(&st->ll_sessions));
        kv_uint(w, FAID_K_REFUSED, faid_stat_get(&st->ll_refused));
        faid_mpw_key(w, FAID_K_GIVEN_UP);
        faid_mpw_map_begin(w);
        for (int k = 0; k < FAID_NMSGKINDS; k++)
            kv_uint(w, faid_msg_kind_name((faid_msg_kind)k), faid_stat_get(&st->ll_given_up[k]));
        faid_mpw_map_end(w);
    }
    faid_mpw_map_end(w);

    faid_mpw_key(w, FAID_K_DEVICES);
    faid_mpw_array(w, (uint32_t)s->nworkers);
    for (int i = 0; i < s->nworkers; i++) {
        faid_worker *wk = &s->workers[i];
        faid_mpw_map_begin(w);
        kv_uint(w, FAID_K_INDEX, (uint64_t)i);
        faid_mpw_key(w, FAID_K_SPEC);
        faid_mpw_str(w, wk->spec);
        faid_mpw_key(w, FAID_K_NAME);
        faid_mpw_str(w, wk->name);
        kv_uint(w, FAID_K_PROCESSED, faid_stat_get(&wk->processed));
        kv_uint(w, FAID_K_FAILED, faid_stat_get(&wk->failed));
        faid_mpw_key(w, FAID_K_BUSY);
        faid_mpw_f64(w, faid_bits_to_f64(atomic_load(&wk->busy_frac_bits)));
        double nt = (double)faid_stat_get(&wk->timed);
        faid_mpw_key(w, FAID_K_HOST_US);
        faid_mpw_f64(w, nt > 0 ? (double)faid_stat_get(&wk->host_ns) / 1e3 / nt : 0.0);
        faid_mpw_key(w, FAID_K_TABLE_US);
        faid_mpw_f64(w, nt > 0 ? (double)faid_stat_get(&wk->table_ns) / 1e3 / nt : 0.0);
        faid_mpw_map_end(w);
    }
}


static void handle(faid_server *s, const void *req, size_t len, faid_mpw *w, int *stop)
{
    faid_ctl_request q;
    faid_diag d;
    faid_diag_clear(&d);
    *stop = 0;
    if (faid_proto_decode_request(req, len, &q, &d)) {
        FAID_WARN("control", "bad request: %s", d.msg);
        faid_proto_reply_error(w, FAID_CTL_INVALID, &d);
        return;
    }
    FAID_DEBUG("control", "request %s", faid_ctl_cmd_name(q.cmd));
    switch (q.cmd) {
    case FAID_CTL_PING:
        faid_proto_reply_begin(w, 1, q.cmd);
        kv_uint(w, FAID_K_PROTOCOL_VERSION, FAID_PROTO_VERSION);
        faid_mpw_key(w, FAID_K_SOFTWARE_VERSION);
        faid_mpw_str(w, FAID_VERSION);
        return;
    case FAID_CTL_STATUS:
        faid_proto_reply_begin(w, 1, q.cmd);
        faid_status_entries(s, w);
        return;
    case FAID_CTL_CONFIG: {
        faid_gen *g = faid_server_current_gen(s);
        if (q.key[0]) {
            /* `faidctl config get KEY`: one option's effective value, from the option table. */
            char value[4096];
            if (!g || faid_config_get(&g->setup->cfg, q.key, value, sizeof value, &d) != 0) {
                if (!g)
                    faid_fail(&d, FAID_EINVAL, "no configuration in force");
                faid_gen_release(&g);
                faid_proto_reply_error(w, q.cmd, &d);
                return;
            }
            faid_gen_release(&g);
            faid_proto_reply_begin(w, 1, q.cmd);
            faid_mpw_key(w, FAID_K_KEY);
            faid_mpw_str(w, q.key);
            faid_mpw_key(w, FAID_K_VALUE);
            faid_mpw_str(w, value);
            return;
        }
        faid_proto_reply_begin(w, 1, q.cmd);
        faid_mpw_key(w, FAID_K_CONFIG);
        faid_mpw_str(w, g ? g->config_yaml : "");
        faid_mpw_key(w, FAID_K_SOURCE);
        faid_mpw_str(w, g ? g->setup->cfg.source : "");
        faid_gen_release(&g);
        return;
    }
    case FAID_CTL_RELOAD: {
        uint64_t version = 0;
        if (faid_server_reload(s, q.path, &version, &d)) {
            FAID_WARN("control", "%s (the current setup stays)", d.msg);
            faid_proto_reply_error(w, q.cmd, &d);
            return;
        }
        faid_proto_reply_begin(w, 1, q.cmd);
        kv_uint(w, FAID_K_SETUP_VERSION, version);
        return;
    }
    case FAID_CTL_RESET:
        faid_stats_reset(&s->stats);
        faid_aggr_reset(s->aggr);
        for (int i = 0; i < s->nworkers; i++) {
            atomic_store(&s->workers[i].busy_frac_bits, 0);
            atomic_store(&s->workers[i].host_ns, 0);
            atomic_store(&s->workers[i].table_ns, 0);
            atomic_store(&s->workers[i].timed, 0);
        }
        FAID_INFO("control", "aggregates reset");
        faid_proto_reply_begin(w, 1, q.cmd);
        return;
    case FAID_CTL_STOP:
        FAID_INFO("control", "stop requested");
        faid_proto_reply_begin(w, 1, q.cmd);
        *stop = 1;
        return;
    default:
        faid_fail(&d, FAID_EINVAL, "unsupported command");
        faid_proto_reply_error(w, q.cmd, &d);
        return;
    }
}

/* The reply begun by faid_proto_reply_begin / faid_proto_reply_error in handle() ends here. */
void faid_control_handle(faid_server *s, const void *req, size_t len, faid_mpw *w, int *stop)
{
    handle(s, req, len, w, stop);
    faid_mpw_map_end(w);
}
