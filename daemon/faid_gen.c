/* faid_gen: generations (a reduction setup and the engines built from it), their builds for
 * series starts on a builder thread, and the swap on reload. See faid_gen.h. */
#include "faid_gen.h"
#include "faid_thread.h"

#include "faid_state.h"

#include "faid_log.h"
#include "faid_memstat.h"
#include "faid_outputs.h"
#include "faid_zap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------- */
/* Generations                                                                                   */

void faid_gen_acquire(faid_gen *g)
{
    if (g)
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

/* Lines of setups built for series starts and reloads, which peers on the input and control
 * sockets can ask for at any rate (issue 20: 1,500 mask changes, 200 reloads at 200 Hz): a
 * few per second come through, the rest are counted (faid_log.h). */
static faid_ratelimit rl_ready, rl_build, rl_build_fail, rl_keys, rl_reloaded;

static void gen_free(faid_gen *g)
{
    for (int i = 0; i < g->nworkers; i++) {
        faid_engine_destroy(&g->engines[i]);
        faid_result_destroy(&g->results[i]);
    }
    faid_setup_destroy(&g->setup);
    free(g->config_yaml);
    free(g->detector_mask);
    free(g);
}

void faid_gen_release(faid_gen **pg)
{
    if (!pg || !*pg)
        return;
    faid_gen *g = *pg;
    *pg = NULL;
    /* acq_rel: the thread that frees must see every use made by the others. */
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1)
        gen_free(g);
}

/* Upper bound of an encoded array map of nbytes data. */
static size_t array_bound(size_t nbytes)
{
    return nbytes + 64;
}

faid_gen *faid_gen_build(faid_server *s, const faid_config *cfg, uint64_t version, faid_diag *d)
{
    return faid_gen_build_masked(s, cfg, version, NULL, 0, d);
}

faid_gen *faid_gen_build_masked(faid_server *s, const faid_config *cfg, uint64_t version,
                                const uint8_t *detector_mask, uint64_t mask_hash, faid_diag *d)
{
    faid_gen *g = calloc(1, sizeof(*g));
    if (!g) {
        faid_fail(d, FAID_ENOMEM, "out of memory building setup %llu", (unsigned long long)version);
        return NULL;
    }
    atomic_init(&g->refs, 1);
    g->version = version;
    g->nworkers = s->nworkers;
    int64_t t0 = faid_now_ns();
    g->setup = faid_setup_new_masked(cfg, version, detector_mask, d);
    if (!g->setup)
        goto fail;
    g->geometry = cfg->geometry;
    pthread_mutex_lock(&s->gen_mu);
    g->cfg_version = s->cfg_version;
    pthread_mutex_unlock(&s->gen_mu);
    if (detector_mask) {
        g->detector_mask = malloc(g->setup->npix);
        if (!g->detector_mask) {
            faid_fail(d, FAID_ENOMEM, "out of memory for the detector mask");
            goto fail;
        }
        memcpy(g->detector_mask, detector_mask, g->setup->npix);
        g->detector_mask_hash = mask_hash;
        for (size_t i = 0; i < g->setup->npix; i++)
            g->detector_masked += detector_mask[i] != 0;
    }
    size_t nb = (size_t)g->setup->csr->nbins;
    /* Without the frame's user_data: the worker adds the length each frame carries (reserving
     * FAID_MAX_USER_DATA here gave every slot's result buffer 64 KiB more than a frame without
     * user_data needs: 2 MiB more in use once each slot had served, issue 10, defect 14). */
    /* The outputs the stages declare (each array's data and 64 bytes), the other keys. */
    g->result_bytes = faid_outputs_bound(g->setup) + 2048 + (g->setup->csr_bg ? 256 : 0);
    /* Before the engines build their programs: the blocks a frame makes anyone allocate
     * (libzmq's copy of a received frame, 4-byte pixels at most, compressed or not; a hit message,
     * the frame as float32; a result) stay in the arenas, the compiler's larger one-off buffers
     * are mapped (faid_memstat.h, issue 20 defect 11). A frame with a large user_data or
     * thousands of peaks may exceed it: it is then mapped too, which costs time, not memory. */
    size_t frame_bytes = g->setup->npix * 4 + g->setup->npix / 16 + 4096;
    size_t mmap_from =
        faid_malloc_fit(frame_bytes > g->result_bytes ? frame_bytes : g->result_bytes);
    FAID_DEBUG("setup", "setup %llu: blocks from %zu bytes are mapped", (unsigned long long)version,
               mmap_from);
    unsigned seen = atomic_load(&s->dtypes_seen);
    for (int i = 0; i < s->nworkers; i++) {
        g->engines[i] = faid_engine_new(g->setup, s->workers[i].spec, d);
        if (!g->engines[i]) {
            faid_diag_prefix(d, "device %s: ", s->workers[i].spec);
            goto fail;
        }
        size_t pin_bytes = 0;
        void *pin_base = faid_pinned_base(s->pinned, &pin_bytes);
        if (pin_base && faid_engine_host_register(g->engines[i], pin_base, pin_bytes, d)) {
            faid_diag_prefix(d, "device %s: pinned input arena: ", s->workers[i].spec);
            goto fail;
        }
        /* pipeline.inflight frames in slots of pipeline.batch frames each. */
        int batch = cfg->batch < 1                       ? 1
                    : cfg->batch > FAID_ENGINE_BATCH_MAX ? FAID_ENGINE_BATCH_MAX
                                                         : cfg->batch;
        int depth = cfg->inflight / batch;
        depth = depth < 1 ? 1 : depth > FAID_ENGINE_DEPTH_MAX ? FAID_ENGINE_DEPTH_MAX : depth;
        if (faid_engine_set_depth(g->engines[i], depth, d)) {
            faid_diag_prefix(d, "device %s: pipeline.inflight %d (%d slots): ", s->workers[i].spec,
                             cfg->inflight, depth);
            goto fail;
        }
        if (faid_engine_set_batch(g->engines[i], batch, d)) {
            faid_diag_prefix(d, "device %s: pipeline.batch %d: ", s->workers[i].spec, batch);
            goto fail;
        }
        if (faid_engine_set_copy_threads(g->engines[i], cfg->copy_threads, d)) {
            faid_diag_prefix(d, "device %s: pipeline.copy_threads %d: ", s->workers[i].spec,
                             cfg->copy_threads);
            goto fail;
        }
        /* Results carry I, sigma, std and count of the cake; its sums stay on the device. */
        if (faid_engine_set_sums_2d(g->engines[i], 0, d)) {
            faid_diag_prefix(d, "device %s: ", s->workers[i].spec);
            goto fail;
        }
        /* output.cake lean (and no writer.cake): the results carry I_2d alone, so the device
         * reads back only the cake's intensities, a quarter of its D2H (issue 17: 4.3 MB per
         * frame at 360 x 1000 was most of the cake's time on the H100). */
        if (faid_engine_set_cake_arrays(g->engines[i], cfg->output_cake || cfg->writer_cake ? 4 : 1,
                                        d)) {
            faid_diag_prefix(d, "device %s: ", s->workers[i].spec);
            goto fail;
        }
        /* Kernels for the frame types already seen are built now, not by the first frame. */
        for (int t = 1; t < 32; t++)
            if ((seen & (1u << t)) && faid_engine_prepare(g->engines[i], (faid_dtype)t, d)) {
                faid_diag_prefix(d, "device %s: ", s->workers[i].spec);
                goto fail;
            }
        g->results[i] = faid_result_new(g->setup);
        if (!g->results[i]) {
            faid_fail(d, FAID_ENOMEM, "out of memory for the result arrays");
            goto fail;
        }
    }
    g->config_yaml = faid_config_dump_alloc(cfg, FAID_DUMP_PLAIN);
    if (!g->config_yaml) {
        faid_fail(d, FAID_ENOMEM, "out of memory dumping the configuration");
        goto fail;
    }
    size_t nazim = g->setup->csr2d ? (size_t)g->setup->csr2d->npt_azim : 0;
    g->start_bytes = array_bound(nb * 8) + array_bound(nazim * 8) + strlen(g->config_yaml) +
                     4 * FAID_PATH_MAX + 8192 + (size_t)s->nworkers * 300 + FAID_MAX_USER_DATA;
    faid_log_ratelimited(&rl_ready, FAID_LOG_INFO, "setup",
                         "setup %llu ready: %dx%d pixels, %d bins, %d device(s), %.0f ms",
                         (unsigned long long)version, g->setup->rows, g->setup->cols, (int)nb,
                         s->nworkers, (double)(faid_now_ns() - t0) / 1e6);
    return g;
fail:
    gen_free(g);
    return NULL;
}

faid_gen *faid_server_current_gen(faid_server *s)
{
    pthread_mutex_lock(&s->gen_mu);
    faid_gen *g = s->gen;
    faid_gen_acquire(g);
    pthread_mutex_unlock(&s->gen_mu);
    return g;
}

void faid_server_swap_gen(faid_server *s, faid_gen *g)
{
    pthread_mutex_lock(&s->gen_mu);
    faid_gen *old = s->gen;
    s->gen = g;
    pthread_mutex_unlock(&s->gen_mu);
    faid_gen_release(&old);
}

/* ------------------------------------------------------------------------------------------- */
/* Reload                                                                                        */

/* Options that shape sockets, threads and pools: changing them needs a restart. */
static int check_fixed(const faid_config *a, const faid_config *b, faid_diag *d)
{
    /* Derived from the option table: every option without FAID_OPT_RELOAD (the "reload: no" of
     * the generated docs) must keep its effective value. A list written by hand here drifted
     * from the table three times (hits.mode, hits.patch_radius, http.endpoint were accepted;
     * input.max_frame_bytes, pipeline.inflight and pipeline.batch were half applied). */
    size_t n;
    const faid_option *opts = faid_config_options(&n);
    for (size_t i = 0; i < n; i++) {
        if (opts[i].flags & FAID_OPT_RELOAD)
            continue;
        char va[4096], vb[4096];
        if (faid_config_get(a, opts[i].name, va, sizeof va, NULL) != 0 ||
            faid_config_get(b, opts[i].name, vb, sizeof vb, NULL) != 0)
            return faid_fail(d, FAID_ECONFIG, "%s: cannot compare its value: needs a restart",
                             opts[i].name);
        if (strcmp(va, vb) != 0)
            return faid_fail(d, FAID_ECONFIG, "%s changed (%s -> %s): needs a restart",
                             opts[i].name, va, vb);
    }
    return 0;
}

/* The start message's geometry in the configuration's frame (shape, orientation). */
static void apply_start_geometry(faid_config *cfg, const faid_geometry *g)
{
    int rows = cfg->geometry.rows, cols = cfg->geometry.cols;
    int orient = cfg->geometry.orientation;
    cfg->geometry = *g;
    cfg->geometry.rows = rows;
    cfg->geometry.cols = cols;
    cfg->geometry.orientation = orient;
    cfg->pixel1 = g->pixel1;
    cfg->pixel2 = g->pixel2;
}

static int same_geometry(const faid_geometry *a, const faid_geometry *b)
{
    return a->dist == b->dist && a->poni1 == b->poni1 && a->poni2 == b->poni2 &&
           a->wavelength == b->wavelength && a->pixel1 == b->pixel1 && a->pixel2 == b->pixel2 &&
           a->rot1 == b->rot1 && a->rot2 == b->rot2 && a->rot3 == b->rot3;
}

/* A series' setup built on its own thread, so that ingest keeps reading the series' frames
 * meanwhile (a build takes a CSR matrix and engines: 1.1 s for an EIGER 4M mask, split bbox, on
 * the 2-core PoCL machine). Frames and the start event that need it hold references. */
struct faid_gen_job {
    atomic_int refs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;      /* under mu */
    faid_gen *gen; /* under mu: the generation built (a reference), NULL when it failed */
    double build_ms;
    faid_server *s;
    faid_config *cfg;
    uint8_t *mask; /* a copy (ingest reuses its buffer), or NULL */
    uint64_t hash;
    int start_geometry;
    faid_geometry geometry; /* the start message's, when start_geometry */
    pthread_t thread;
    int joinable;
};

const char *faid_setup_choice_name(int choice)
{
    switch (choice) {
    case FAID_SETUP_REUSED:
        return "reused";
    case FAID_SETUP_REBUILT:
        return "rebuilt";
    default:
        return "failed";
    }
}

faid_gen_job *faid_gen_job_acquire(faid_gen_job *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void faid_gen_job_release(faid_gen_job **pb)
{
    if (!pb || !*pb)
        return;
    faid_gen_job *b = *pb;
    *pb = NULL;
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* The builder drops its reference last thing, and ingest drops its own only after the join
     * (faid_gen_job_finish): whoever frees, the builder no longer touches the job. */
    faid_gen_release(&b->gen);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b->cfg);
    free(b->mask);
    free(b);
}

int faid_gen_job_done(faid_gen_job *b)
{
    pthread_mutex_lock(&b->mu);
    int done = b->done;
    pthread_mutex_unlock(&b->mu);
    return done;
}

faid_gen *faid_gen_job_wait(faid_gen_job *b, atomic_int_fast64_t *alive, double *build_ms)
{
    pthread_mutex_lock(&b->mu);
    while (!b->done) {
        if (alive)
            atomic_store_explicit(alive, faid_now_ns(), memory_order_relaxed);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    faid_gen *g = b->gen;
    faid_gen_acquire(g);
    if (build_ms)
        *build_ms = b->build_ms;
    pthread_mutex_unlock(&b->mu);
    return g;
}

void faid_gen_job_finish(faid_gen_job **pb)
{
    if (!pb || !*pb)
        return;
    faid_gen_job *b = *pb;
    if (b->joinable) {
        pthread_join(b->thread, NULL);
        b->joinable = 0;
    }
    faid_gen_job_release(pb);
}

static void *builder_main(void *arg)
{
    faid_gen_job *b = arg;
    faid_server *s = b->s;
    faid_diag d;
    faid_diag_clear(&d);
    /* build_mu: one build or reload at a time, each from the state in force. */
    pthread_mutex_lock(&s->build_mu);
    /* The configuration in force now (a reload may have come since the start message). */
    pthread_mutex_lock(&s->gen_mu);
    *b->cfg = s->cfg;
    pthread_mutex_unlock(&s->gen_mu);
    if (b->start_geometry)
        apply_start_geometry(b->cfg, &b->geometry);
    int64_t t0 = faid_now_ns();
    /* Test hook: FAID_TEST_SETUP_BUILD_DELAY_MS lengthens every series-start build, so the
     * integration tests can watch ingest, control and the queue during a build on a small
     * detector. */
    const char *dv = getenv("FAID_TEST_SETUP_BUILD_DELAY_MS");
    long delay_ms = dv && *dv ? strtol(dv, NULL, 10) : 0;
    if (delay_ms > 0 && delay_ms < 60000)
        nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000L}, NULL);
    faid_gen *g = faid_gen_build_masked(s, b->cfg, s->next_version, b->mask, b->hash, &d);
    double ms = (double)(faid_now_ns() - t0) / 1e6;
    if (g) {
        s->next_version++;
        g->start_geometry = b->start_geometry;
        faid_log_ratelimited(
            &rl_build, FAID_LOG_INFO, "server",
            "setup %llu built off the ingest thread: detector pixel mask %s (%llu pixels), "
            "geometry of the %s, %.0f ms",
            (unsigned long long)g->version, b->mask ? "applied" : "none",
            (unsigned long long)g->detector_masked,
            b->start_geometry ? "start message" : "configuration", ms);
        faid_gen_acquire(g);
        faid_server_swap_gen(s, g);
    } else {
        faid_log_ratelimited(&rl_build_fail, FAID_LOG_ERROR, "server",
                             "setup of a series start not built (%.0f ms): %s; the setup in "
                             "force stays",
                             ms, d.msg);
    }
    pthread_mutex_unlock(&s->build_mu);
    pthread_mutex_lock(&b->mu);
    b->gen = g;
    b->build_ms = ms;
    b->done = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    /* Never the last reference: ingest drops its own only after joining this thread. */
    faid_gen_job_release(&b);
    return NULL;
}

int faid_server_series_setup(faid_server *s, const uint8_t *mask, uint64_t hash,
                             const faid_geometry *start_geometry, faid_gen_job **build,
                             faid_setup_choice *choice, faid_diag *d)
{
    *build = NULL;
    *choice = FAID_SETUP_FAILED;
    faid_gen *cur = faid_server_current_gen(s);
    pthread_mutex_lock(&s->gen_mu);
    uint64_t cfg_version = s->cfg_version;
    pthread_mutex_unlock(&s->gen_mu);
    size_t npix = cur->setup->npix;
    /* The key: configuration version, mask (hash, then every byte: a hash match alone never
     * reuses), shape (the mask was checked against it), geometry source and geometry. */
    int same =
        cur->cfg_version == cfg_version && cur->detector_mask_hash == hash &&
        (!mask || (cur->detector_mask && memcmp(cur->detector_mask, mask, npix) == 0)) &&
        (start_geometry ? cur->start_geometry && same_geometry(start_geometry, &cur->geometry)
                        : !cur->start_geometry);
    if (same) {
        faid_gen_release(&cur);
        *choice = FAID_SETUP_REUSED;
        return 0;
    }
    faid_gen_job *b = calloc(1, sizeof(*b));
    if (!b) {
        faid_gen_release(&cur);
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    }
    atomic_init(&b->refs, 1);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->s = s;
    b->hash = hash;
    b->start_geometry = start_geometry != NULL;
    b->cfg = malloc(sizeof(*b->cfg));
    b->mask = mask ? malloc(npix) : NULL;
    faid_gen_release(&cur);
    if (!b->cfg || (mask && !b->mask)) {
        faid_gen_job_release(&b);
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    }
    if (mask)
        memcpy(b->mask, mask, npix);
    if (start_geometry)
        b->geometry = *start_geometry;
    /* The builder's reference; ingest's is the one returned. */
    faid_gen_job_acquire(b);
    if (pthread_create(&b->thread, NULL, builder_main, b) != 0) {
        atomic_fetch_sub(&b->refs, 1);
        faid_gen_job_release(&b);
        return faid_fail(d, FAID_ENOMEM, "cannot start the setup builder thread");
    }
    faid_thread_name(b->thread, "faid-builder");
    b->joinable = 1;
    *build = b;
    *choice = FAID_SETUP_REBUILT;
    return 0;
}

/* text: a configuration given whole (REST PUT /api/v1/config), else the file path or the start
 * file. */
static int reload(faid_server *s, const char *path, const char *text, size_t text_len,
                  uint64_t *version, faid_diag *d)
{
    /* A path from control is read once: it never replaces the start file, which SIGHUP and a
     * reload without a path re-read (the setup says which file it came from). */
    char file[FAID_PATH_MAX];
    if (text)
        snprintf(file, sizeof(file), "(the body of PUT /api/v1/config)");
    else
        snprintf(file, sizeof(file), "%s", path && *path ? path : s->config_path);
    faid_config *nc = malloc(sizeof(*nc));
    if (!nc)
        return faid_fail(d, FAID_ENOMEM, "reload: out of memory");
    faid_config_default(nc);
    int rc = 0;
    if (text)
        rc = faid_config_load_string(text, text_len, "PUT /api/v1/config", nc, d);
    else if (file[0])
        rc = faid_config_load(file, nc, d);
    if (!rc)
        rc = check_fixed(&s->cfg, nc, d);
    /* security.authorized_keys: read now, put in force with the rest (a folder that cannot be
     * read refuses the reload and the keys in force stay). */
    faid_zap_keys *keys = NULL;
    if (!rc && s->zap && !(keys = faid_zap_keys_load(nc->authorized_keys, d)))
        rc = d && d->code ? d->code : FAID_ECONFIG;
    if (!rc) {
        faid_log_level lvl;
        if (faid_log_parse_level(nc->log_level, &lvl) == 0)
            faid_log_set_level(lvl);
        /* The detector mask of the series in progress stays part of the setup. */
        pthread_mutex_lock(&s->build_mu);
        faid_gen *cur = faid_server_current_gen(s);
        faid_config built = *nc;
        /* ... and so does the start message's geometry (input.geometry_source start). */
        if (cur->start_geometry)
            apply_start_geometry(&built, &cur->geometry);
        faid_gen *g = faid_gen_build_masked(s, &built, s->next_version, cur->detector_mask,
                                            cur->detector_mask_hash, d);
        if (g)
            g->start_geometry = cur->start_geometry;
        faid_gen_release(&cur);
        if (!g) {
            rc = d && d->code ? d->code : FAID_ECONFIG;
        } else {
            s->next_version++;
            *version = g->version;
            pthread_mutex_lock(&s->gen_mu);
            s->cfg = *nc;
            s->cfg_version++;
            g->cfg_version = s->cfg_version;
            pthread_mutex_unlock(&s->gen_mu);
            faid_server_swap_gen(s, g);
            if (keys) {
                faid_log_ratelimited(&rl_keys, FAID_LOG_INFO, "security",
                                     "%zu client key(s) authorized from %s",
                                     faid_zap_keys_count(keys), nc->authorized_keys);
                faid_zap_set_keys(s->zap, keys);
                keys = NULL;
            }
            faid_log_ratelimited(&rl_reloaded, FAID_LOG_INFO, "server",
                                 "reloaded %s: setup version %llu", file[0] ? file : "(default)",
                                 (unsigned long long)*version);
        }
        pthread_mutex_unlock(&s->build_mu);
    }
    faid_zap_keys_destroy(&keys);
    if (rc)
        faid_diag_prefix(d, "reload %s: ", file[0] ? file : "(embedded default)");
    free(nc);
    return rc;
}

int faid_server_reload(faid_server *s, const char *path, uint64_t *version, faid_diag *d)
{
    return reload(s, path, NULL, 0, version, d);
}

int faid_server_reload_text(faid_server *s, const char *text, size_t len, uint64_t *version,
                            faid_diag *d)
{
    return reload(s, NULL, text, len, version, d);
}
