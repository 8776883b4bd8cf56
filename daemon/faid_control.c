/* faid_control: requests of the control socket (status, config, reload, reset, stop, ping, writer)
 * and the status body shared with the periodic stats message, read from the server's state into
 * the plain structs proto's encoder takes (faid_proto_write_status_entries). The REST routes
 * (faid_rest.c) send the same requests from the HTTP threads; s->ctl_mu makes them take turns
 * with the control socket. Runs on the main thread (or an HTTP thread), never a pipeline one, so a
 * reload (which builds a whole new reduction setup and engines) never delays a frame: the pipeline
 * keeps using the old generation until the new one is swapped in. */
#include "faid_state.h"

#include "faid_gen.h"
#include "faid_pool.h"
#include "faid_rxalloc.h"
#include "faid_writer.h"

#include "faid_aggregates.h"
#include "faid_log.h"
#include "faid_memstat.h"

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

void faid_counters_fill(faid_server *s, faid_counters_snap *c)
{
    faid_stats *st = &s->stats;
    faid_out_counters *o = &c->out;
    *o = (faid_out_counters){
        .received = faid_stat_get(&st->received),
        .received_bytes = faid_stat_get(&st->received_bytes),
        .processed = faid_stat_get(&st->processed),
        .failed = faid_stat_get(&st->failed),
        .dropped = faid_stat_get(&st->dropped),
        .published = faid_stat_get(&st->published),
        .lossless_sent = faid_stat_get(&st->lossless_sent),
        .bad_input = faid_stat_get(&st->bad_input),
        .series = faid_stat_get(&st->series),
        .stale = faid_stat_get(&st->stale),
        .ignored = faid_stat_get(&st->ignored),
        .forwarded = faid_stat_get(&st->forwarded),
        .forward_dropped = faid_stat_get(&st->forward_dropped),
        .hits_sent = faid_stat_get(&st->hits_sent),
        .hits_dropped = faid_stat_get(&st->hits_dropped),
        .hits_requested = faid_stat_get(&st->hits_requested),
        .hits_delivered = faid_stat_get(&st->hits_delivered),
        .hits_requesters_gone = faid_stat_get(&st->hits_requesters_gone),
        .hits_requests_displaced = faid_stat_get(&st->hits_requests_displaced),
        .hits_requests_repeated = faid_stat_get(&st->hits_requests_repeated),
        .hits_resets = faid_stat_get(&st->hits_resets),
        .setups_reused = faid_stat_get(&st->setups_reused),
        .setups_rebuilt = faid_stat_get(&st->setups_rebuilt),
        .start_geometry_refused = faid_stat_get(&st->start_geometry_refused),
        .detector_masks_refused = faid_stat_get(&st->detector_masks_refused),
        .log_suppressed = faid_log_suppressed_total(),
        .drops = c->drops,
        .ndrops = FAID_NDROPS,
        .errors = c->errors,
    };
    for (int r = 0; r < FAID_NDROPS; r++)
        c->drops[r] =
            (faid_out_count){faid_drop_name((faid_drop_reason)r), faid_stat_get(&st->drops[r])};
    /* Only the codes that happened: the errors map is sparse. */
    for (int sg = 0; sg < FAID_NWHERE; sg++)
        for (int code = 0; code < FAID_NCODES; code++) {
            uint64_t v = faid_stat_get(&st->errors[sg][code]);
            if (!v)
                continue;
            char *name = c->error_names[o->nerrors];
            snprintf(name, sizeof(c->error_names[0]), "%s.%s", faid_where_name((faid_where)sg),
                     faid_errname(-code));
            c->errors[o->nerrors++] = (faid_out_count){name, v};
        }
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

static const char *fan_link_name(int st)
{
    static const char *const names[] = {"off", "joining", "live", "refused", "silent"};
    return st >= 0 && st < (int)(sizeof(names) / sizeof(names[0])) ? names[st] : "off";
}

void faid_status_fill(faid_server *s, faid_status_snap *sn)
{
    faid_out_status *o = &sn->out;
    faid_gen *g = faid_server_current_gen(s);
    sn->g = g;
    pthread_mutex_lock(&s->info_mu);
    snprintf(sn->uid, sizeof(sn->uid), "%s", s->series_uid);
    const faid_out_identity id = {s->instance_name, s->series_shard, s->series_shards};
    pthread_mutex_unlock(&s->info_mu);
    faid_counters_fill(s, &sn->counters);

    /* The input's connections as libzmq reported them (monitor, main thread). */
    uint64_t acc = faid_stat_get(&s->in_accepted), clo = faid_stat_get(&s->in_closed);
    faid_stats *st = &s->stats;
    *o = (faid_out_status){
        .state = state_name(atomic_load(&s->state)),
        .series_id = atomic_load(&s->series_id),
        .series_uid = sn->uid,
        .id = id,
        .uptime_s = (double)(faid_now_ns() - s->start_mono_ns) / 1e9,
        .software_version = FAID_VERSION,
        .setup_version = g ? g->version : 0,
        .config_hash = g ? g->setup->config_hash : "",
        /* Which file is in force, and the start file SIGHUP re-reads: they differ after a
         * `reload PATH` from control. */
        .config_file = g ? g->setup->cfg.source : "",
        .config_start = s->config_path,
        .counters = sn->counters.out,
        .input = {.max_message_bytes = (uint64_t)s->input_max_msg,
                  .endpoints = (uint64_t)s->npull,
                  .pinned_bytes = s->pinned ? (uint64_t)s->cfg.input_pinned_bytes : 0,
                  .pinned_frames = faid_stat_get(&s->pin_frames),
                  .pinned_fallback = faid_stat_get(&s->pin_fallback),
                  .pinned_receive = s->rx_state == 1   ? "on"
                                    : s->rx_state == 2 ? "unavailable"
                                                       : "off",
                  .pinned_received = faid_stat_get(&s->pin_received),
                  .pinned_receive_fallback = s->rx_state == 1 ? faid_rxalloc_fallbacks() : 0,
                  .zmq_contexts = (uint64_t)(s->in_nctx + (s->in_nctx < s->npull)),
                  .connections = acc > clo ? acc - clo : 0,
                  .accepted = acc,
                  .closed = clo,
                  .accept_failed = faid_stat_get(&s->in_accept_failed),
                  .connection_cap = (uint64_t)s->in_conn_cap,
                  .over_cap = faid_stat_get(&s->in_over_cap),
                  .fan_link = fan_link_name(atomic_load(&s->fan_link))},
        .queue = {.depth = faid_queue_len(s->frames),
                  .capacity = faid_queue_cap(s->frames),
                  .policy = faid_queue_policy_names[s->policy],
                  .results_depth = faid_queue_len(s->results),
                  .free_slots = faid_queue_len(s->pool)},
        .fps = faid_stats_fps(st),
        .hits_waiting = faid_stat_get(&st->hits_waiting),
        .latency_us = {.p50 = faid_stats_latency_quantile(st, 0.50),
                       .p99 = faid_stats_latency_quantile(st, 0.99),
                       .max = (double)faid_stat_get(&st->lat_max_ns) / 1e3,
                       .samples = faid_stat_get(&st->lat_count)},
        .lossless = {.state = "off"},
        .devices = sn->devices,
        .ndevices = (size_t)s->nworkers,
    };

    faid_memstat m;
    faid_memstat_read(&m);
    o->memory.rss_bytes = m.rss_bytes;
    o->memory.rss_anon_bytes = m.rss_anon_bytes;
    o->memory.heap_bytes = m.heap_bytes;
    o->memory.mmap_bytes = m.mmap_bytes;
    o->memory.in_use_bytes = m.in_use_bytes;
    o->memory.free_bytes = m.free_bytes;
    o->memory.arenas = m.arenas;

    if (s->ll) {
        faid_lossless_consumer(s->ll, sn->consumer, sizeof(sn->consumer));
        for (int k = 0; k < FAID_NMSGKINDS; k++)
            sn->given_up[k] = (faid_out_count){faid_msg_kind_name((faid_msg_kind)k),
                                               faid_stat_get(&st->ll_given_up[k])};
        o->lossless.state = faid_stat_get(&st->ll_active) ? "active" : "waiting";
        o->lossless.consumer = sn->consumer;
        o->lossless.instance = faid_lossless_instance(s->ll);
        o->lossless.overflow = faid_ll_overflow_names[s->ll_overflow];
        o->lossless.held = faid_stat_get(&st->ll_held);
        o->lossless.held_bytes = faid_stat_get(&st->ll_held_bytes);
        o->lossless.capacity_bytes = faid_lossless_capacity(s->ll);
        o->lossless.sent = faid_stat_get(&st->lossless_sent);
        o->lossless.resent = faid_stat_get(&st->ll_resent);
        o->lossless.acked = faid_stat_get(&st->ll_acked);
        o->lossless.sessions = faid_stat_get(&st->ll_sessions);
        o->lossless.refused = faid_stat_get(&st->ll_refused);
        o->lossless.refusals_unanswered = faid_stat_get(&st->ll_refused_unanswered);
        o->lossless.pings = faid_stat_get(&st->ll_pings);
        o->lossless.not_resent = faid_stat_get(&st->ll_not_resent);
        o->lossless.input_deferred = faid_stat_get(&st->ll_input_deferred);
        o->lossless.old_connection = faid_stat_get(&st->ll_old_conn);
        o->lossless.given_up = sn->given_up;
        o->lossless.ngiven_up = FAID_NMSGKINDS;
    }

    faid_writer_stats *ws = faid_writer_stats_of(s->writer);
    _Static_assert(FAID_NWERRS <= 8 && FAID_NWQ <= 8, "faid_status_snap: writer arrays");
    faid_writer_current(s->writer, sn->wfile, sizeof sn->wfile, sn->wdir, sizeof sn->wdir);
    for (int k = 0; k < FAID_NWERRS; k++)
        sn->werrors[k] = (faid_out_count){faid_writer_error_name((faid_writer_error)k),
                                          faid_stat_get(&ws->errors[k])};
    for (int k = 0; k < FAID_NWQ; k++)
        sn->wdropped[k] =
            (faid_out_count){faid_wq_kind_name((faid_wq_kind)k), faid_stat_get(&ws->dropped[k])};
    o->writer.state = !atomic_load(&ws->on) ? "off" : sn->wfile[0] ? "writing" : "idle";
    o->writer.directory = atomic_load(&ws->on) ? sn->wdir : "";
    o->writer.file = sn->wfile;
    o->writer.files_open = faid_stat_get(&ws->files_open);
    o->writer.files_written = faid_stat_get(&ws->files_written);
    o->writer.frames_written = faid_stat_get(&ws->frames_written);
    o->writer.bytes_written = faid_stat_get(&ws->bytes_written);
    o->writer.frames_skipped = faid_stat_get(&ws->frames_skipped);
    o->writer.hit_frames_written = faid_stat_get(&ws->hit_frames_written);
    o->writer.free_bytes = faid_stat_get(&ws->free_bytes);
    o->writer.queued_bytes = faid_stat_get(&ws->queued_bytes);
    o->writer.errors = sn->werrors;
    o->writer.nerrors = FAID_NWERRS;
    o->writer.dropped = sn->wdropped;
    o->writer.ndropped = FAID_NWQ;

    for (int i = 0; i < s->nworkers; i++) {
        faid_worker *wk = &s->workers[i];
        double nt = (double)faid_stat_get(&wk->timed);
        sn->devices[i] = (faid_out_device){
            .spec = wk->spec,
            .name = wk->name,
            .processed = faid_stat_get(&wk->processed),
            .failed = faid_stat_get(&wk->failed),
            .busy = faid_bits_to_f64(atomic_load(&wk->busy_frac_bits)),
            .host_us = nt > 0 ? (double)faid_stat_get(&wk->host_ns) / 1e3 / nt : 0.0,
            .table_us = nt > 0 ? (double)faid_stat_get(&wk->table_ns) / 1e3 / nt : 0.0,
            .submit_us = nt > 0 ? (double)faid_stat_get(&wk->submit_ns) / 1e3 / nt : 0.0,
            .wait_us = nt > 0 ? (double)faid_stat_get(&wk->wait_ns) / 1e3 / nt : 0.0,
            .encode_us = nt > 0 ? (double)faid_stat_get(&wk->encode_ns) / 1e3 / nt : 0.0,
            .early_launches = faid_stat_get(&wk->early_launches),
        };
    }
}

void faid_status_snap_release(faid_status_snap *sn)
{
    faid_gen_release(&sn->g);
}

/* Control lines are driven by whoever can reach the control socket (issue 20, defect 10:
 * 20,000 malformed requests wrote 20,000 lines, 2.2 MB, in 1.8 s): rate-limited per line. */
/* rl_reset: `reset` is a request any control client can repeat flat out; 5,000 of them wrote
 * 5,000 INFO lines (issue 20 defect 10, found by tests/soak/probe_defects2.py). */
static faid_ratelimit rl_bad, rl_reload, rl_reset, rl_writer;

static void handle(faid_server *s, const void *req, size_t len, faid_mpw *w, int *stop)
{
    faid_ctl_request q;
    faid_diag d;
    faid_diag_clear(&d);
    *stop = 0;
    if (faid_proto_decode_request(req, len, &q, &d)) {
        faid_log_ratelimited(&rl_bad, FAID_LOG_WARN, "control", "bad request: %s", d.msg);
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
    case FAID_CTL_STATUS: {
        faid_status_snap sn;
        faid_status_fill(s, &sn);
        faid_proto_reply_begin(w, 1, q.cmd);
        faid_proto_write_status_entries(w, &sn.out);
        faid_status_snap_release(&sn);
        return;
    }
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
            faid_log_ratelimited(&rl_reload, FAID_LOG_WARN, "control",
                                 "%s (the current setup stays)", d.msg);
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
            atomic_store(&s->workers[i].submit_ns, 0);
            atomic_store(&s->workers[i].wait_ns, 0);
            atomic_store(&s->workers[i].encode_ns, 0);
            atomic_store(&s->workers[i].timed, 0);
        }
        faid_log_ratelimited(&rl_reset, FAID_LOG_INFO, "control", "aggregates reset");
        faid_proto_reply_begin(w, 1, q.cmd);
        return;
    case FAID_CTL_WRITER: {
        /* The target for the next series: set what was sent (validated whole first: nothing
         * changes on an error), then reply what is in force. */
        faid_gen *g = faid_server_current_gen(s);
        const char *root = g ? g->setup->cfg.writer_root : "";
        const char *cfg_dir = g ? g->setup->cfg.writer_directory : "";
        int rc = 0;
        if (q.has_prefix && faid_writer_prefix_check(q.prefix, &d))
            rc = d.code;
        if (!rc && (q.has_directory || q.has_prefix))
            rc = faid_writer_set_target(s->writer, q.has_directory ? q.directory : NULL,
                                        q.has_prefix ? q.prefix : NULL, root, &d);
        if (rc) {
            faid_gen_release(&g);
            faid_log_ratelimited(&rl_writer, FAID_LOG_WARN, "control", "%s", d.msg);
            faid_proto_reply_error(w, q.cmd, &d);
            return;
        }
        char dir[FAID_PATH_MAX], prefix[FAID_WRITER_PREFIX_MAX];
        faid_writer_target(s->writer, cfg_dir, dir, sizeof dir, prefix, sizeof prefix);
        faid_gen_release(&g);
        faid_proto_reply_begin(w, 1, q.cmd);
        faid_mpw_key(w, FAID_K_DIRECTORY);
        faid_mpw_str(w, dir);
        faid_mpw_key(w, FAID_K_PREFIX);
        faid_mpw_str(w, prefix);
        return;
    }
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
