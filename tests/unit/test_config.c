/* Unit tests of faid_config, faid_setup and faid_synth: the embedded default, every key of the
 * option table (generically, through `config get`) and the keys of the issue by field, errors
 * that name key and line (unknown key, out of range, wrong type, duplicates, YAML syntax), the
 * detector/geometry precedence (preset -> shape/pixel_size -> .poni -> explicit keys), relative
 * paths, dump -> load round trips, the hash, that deploy/faid.example.yaml and the table in
 * docs/configuration.md are exactly what the table generates, the setup's mask/dark/flat handling
 * and its errors, and the synthetic frames' bad-pixel and determinism guarantees. */
#include "faid_config.h"
#include "faid_input.h"
#include "faid_log.h"
#include "faid_npy.h"
#include "faid_setup.h"
#include "faid_synth.h"
#include "faid_test.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static void write_text(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) == (size_t)n)
        b[n] = '\0';
    else {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

/* Loads YAML text over the defaults; returns the code, message in d. */
static int load(const char *yaml, faid_config *c, faid_diag *d)
{
    faid_config_default(c);
    faid_diag_clear(d);
    return faid_config_load_string(yaml, strlen(yaml), "t.yaml", c, d);
}

static int load_file(const char *name, const char *yaml, faid_config *c, faid_diag *d)
{
    write_text(name, yaml);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    faid_config_default(c);
    faid_diag_clear(d);
    return faid_config_load(path, c, d);
}

static void test_default(void)
{
    faid_config c;
    faid_config_default(&c);
    const faid_detector_preset *e4 = faid_detector_find("Eiger4M");
    CHECK(e4 != NULL);
    if (!e4)
        return;
    CHECK(strcmp(c.preset, e4->alias) == 0);
    CHECK(c.rows == e4->rows && c.cols == e4->cols);
    CHECK(c.geometry.rows == e4->rows && c.geometry.cols == e4->cols);
    CHECK(c.pixel1 == e4->pixel1 && c.geometry.pixel2 == e4->pixel2);
    CHECK(c.npt == 1000 && c.unit == FAID_UNIT_Q_NM && c.split == FAID_SPLIT_FULL);
    CHECK(c.error_model == FAID_EM_POISSON && c.solid_angle == 1 && !c.has_polarization);
    CHECK(c.geometry.dist == 0.1 && c.geometry.wavelength == 1e-10);
    CHECK(c.geometry.poni1 == 0.5 * e4->rows * e4->pixel1);
    CHECK(c.geometry.poni2 == 0.5 * e4->cols * e4->pixel2);
    CHECK(c.npt_azim == 0 && !c.has_radial_range && !c.has_dummy && c.source[0] == '\0');
    CHECK(strcmp(c.devices, "auto") == 0 && c.queue_depth == 64 && c.input_bind == 1);
    /* every default of the table passes its own validation */
    size_t n;
    const faid_option *t = faid_config_options(&n);
    for (size_t i = 0; i < n; i++) {
        if (!t[i].def)
            continue;
        faid_config x;
        faid_diag d = {0};
        faid_config_default(&x);
        CHECK_MSG(faid_config_set(&x, t[i].name, t[i].def, &d) == 0, "%s: %s", t[i].name, d.msg);
    }
    /* an empty file and an empty document give the defaults */
    faid_config y;
    faid_diag d = {0};
    CHECK(load("", &y, &d) == 0 && faid_config_equal(&c, &y));
    CHECK(load("# nothing\n", &y, &d) == 0 && faid_config_equal(&c, &y));
}

/* A valid non-default value for every option, as YAML text. */
static const char *sample_value(const faid_option *o, char *buf, size_t cap)
{
    if (strcmp(o->name, "detector.preset") == 0)
        return "pilatus_1m";
    if (strcmp(o->name, "http.endpoint") == 0 || strcmp(o->name, "fan.http_endpoint") == 0)
        return "\"[::1]:8080\"";
    if (strstr(o->name, "endpoint"))
        return "\"tcp://10.0.0.1:7000\"";
    switch (o->type) {
    case FAID_OT_INT:
    case FAID_OT_INT64:
        snprintf(buf, cap, "%.0f", o->min + 1 <= o->max ? o->min + 1 : o->min);
        if (o->def && strcmp(buf, o->def) == 0) /* min + 1 is the default: take the minimum */
            snprintf(buf, cap, "%.0f", o->min);
        return buf;
    case FAID_OT_DOUBLE:
        snprintf(buf, cap, "%.17g",
                 o->max < 1e300 ? 0.25 * o->min + 0.75 * o->max
                                : (o->min > -1e300 ? o->min + 2.5 : 3.5));
        if (!strpbrk(buf, ".e"))
            strcat(buf, ".0");
        return buf;
    case FAID_OT_BOOL: /* the other value than the default */
        return o->def && strcmp(o->def, "false") == 0 ? "true" : "false";
    case FAID_OT_ENUM:
    case FAID_OT_STRING:
        if (o->choices) {
            for (int k = 0; o->choices[k]; k++)
                if (!o->def || strcmp(o->choices[k], o->def) != 0)
                    return o->choices[k];
            return o->choices[0];
        }
        return "some-name";
    case FAID_OT_PATH:
        return "/data/file.npy";
    case FAID_OT_PAIR:
        snprintf(buf, cap, "[%.17g, %.17g]",
                 o->min > -1e300 ? 0.5 * o->min + 0.5 * o->max - 0.1 * o->max : 1.0,
                 o->max < 1e300 ? 0.75 * o->max : 2.0);
        return buf;
    case FAID_OT_SHAPE:
        return "[100, 120]";
    case FAID_OT_DEVICES:
        return "[0, 2]";
    case FAID_OT_ENDPOINTS:
        return "[\"tcp://*:5555\", \"ipc:///tmp/faid-in-2\"]";
    case FAID_OT_KEYS:
        return "[sum_normalization]";
    }
    return "";
}

/* An enum option's choices are its module's name table (one copy of each), and each module's
 * name and parse functions agree with it. */
static void test_enum_names_single_table(void)
{
    static const struct {
        const char *key;
        const char *const *names;
    } owned[] = {
        {"integration.unit", faid_unit_names},
        {"integration.split", faid_split_names},
        {"integration.error_model", faid_error_model_names},
        {"peaks.algorithm", faid_peak_algorithm_names},
        {"peaks.error_model", faid_clip_model_names},
        {"log.level", faid_log_level_names},
        {"queue.policy", faid_queue_policy_names},
        {"output.lossless_overflow", faid_ll_overflow_names},
        {"input.protocol", faid_input_protocol_names},
    };
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) {
        const faid_option *o = faid_config_find(owned[k].key);
        CHECK_MSG(o && o->choices == owned[k].names, "%s: choices are not the module's table",
                  owned[k].key);
    }
    for (int i = 0; faid_unit_names[i]; i++) {
        faid_unit u;
        CHECK(faid_unit_parse(faid_unit_names[i], &u) == 0 && (int)u == i &&
              !strcmp(faid_unit_name(u), faid_unit_names[i]));
    }
    for (int i = 0; faid_split_names[i]; i++) {
        faid_split s;
        CHECK(faid_split_parse(faid_split_names[i], &s) == 0 && (int)s == i &&
              !strcmp(faid_split_name(s), faid_split_names[i]));
    }
    for (int i = 0; faid_error_model_names[i]; i++) {
        faid_error_model m;
        CHECK(faid_error_model_parse(faid_error_model_names[i], &m) == 0 && (int)m == i &&
              !strcmp(faid_error_model_name(m), faid_error_model_names[i]));
    }
    for (int i = 0; faid_peak_algorithm_names[i]; i++) {
        faid_peak_algorithm a;
        CHECK(faid_peak_algorithm_parse(faid_peak_algorithm_names[i], &a) == 0 && (int)a == i &&
              !strcmp(faid_peak_algorithm_name(a), faid_peak_algorithm_names[i]));
    }
    for (int i = 0; faid_clip_model_names[i]; i++) {
        faid_clip_model m;
        CHECK(faid_clip_model_parse(faid_clip_model_names[i], &m) == 0 && (int)m == i &&
              !strcmp(faid_clip_model_name(m), faid_clip_model_names[i]));
    }
    for (int i = 0; faid_log_level_names[i]; i++) {
        faid_log_level l;
        CHECK(faid_log_parse_level(faid_log_level_names[i], &l) == 0 && (int)l == i);
    }
    for (int i = 0; faid_input_protocol_names[i]; i++) {
        faid_input_protocol p;
        CHECK(faid_input_protocol_parse(faid_input_protocol_names[i], &p) == 0 && (int)p == i &&
              !strcmp(faid_input_protocol_name(p), faid_input_protocol_names[i]));
        const faid_input_format *f = faid_input_format_of(p);
        /* auto and fan (an instance behind faid-fan: each route names the format) have none */
        CHECK(p == FAID_PROTOCOL_AUTO || p == FAID_PROTOCOL_FAN ? f == NULL
                                                                : f && f->protocol == p);
    }
    /* pyFAI's other spellings still parse */
    faid_split s;
    faid_error_model m;
    CHECK(faid_split_parse("pseudo", &s) == 0 && s == FAID_SPLIT_FULL);
    CHECK(faid_error_model_parse("poissonian", &m) == 0 && m == FAID_EM_POISSON);
    CHECK(faid_split_parse("diagonal", &s) == FAID_EINVAL);
}

static void test_every_key(void)
{
    size_t n;
    const faid_option *t = faid_config_options(&n);
    CHECK(n >= 40);
    for (size_t i = 0; i < n; i++) {
        const faid_option *o = &t[i];
        char vbuf[160], yaml[512];
        const char *v = sample_value(o, vbuf, sizeof vbuf);
        /* values the cross-checks of the peaks section accept (the middle of the range is not
         * a patch size; min_res must stay below max_res, max_peaks_for_hit above the minimum) */
        if (strcmp(o->name, "peaks.patch_size") == 0)
            v = "5";
        else if (strcmp(o->name, "peaks.min_res") == 0)
            v = "100.0";
        else if (strcmp(o->name, "peaks.max_peaks_for_hit") == 0)
            v = "500";
        const char *dot = strchr(o->name, '.');
        /* Paths must exist where a file is read at load time (poni_file); give a real one. */
        if (strcmp(o->name, "geometry.poni_file") == 0)
            continue;
        if (strcmp(o->name, "security.curve") == 0) /* the bool's default is false */
            snprintf(yaml, sizeof yaml, "# header\nsecurity:\n  curve: true\n");
        else if (strcmp(o->name, "instance.shard") == 0) /* below instance.shards */
            snprintf(yaml, sizeof yaml, "# header\ninstance:\n  shard: %s\n  shards: 65536\n", v);
        else if (strcmp(o->name, "detector.shape") == 0) /* a shape alone needs a pixel size */
            snprintf(yaml, sizeof yaml,
                     "# header\ndetector:\n  shape: %s\n  pixel_size: "
                     "[1.0e-4, 1.0e-4]\n",
                     v);
        else if (dot)
            snprintf(yaml, sizeof yaml, "# header\n%.*s:\n  %s: %s\n", (int)(dot - o->name),
                     o->name, dot + 1, v);
        else
            snprintf(yaml, sizeof yaml, "%s: %s\n", o->name, v);
        faid_config c, def;
        faid_diag d;
        faid_config_default(&def);
        int rc = load(yaml, &c, &d);
        CHECK_MSG(rc == 0, "%s = %s: %s", o->name, v, d.msg);
        if (rc)
            continue;
        char got[512], want[512];
        CHECK(faid_config_get(&c, o->name, got, sizeof got, &d) == 0);
        CHECK(faid_config_get(&def, o->name, want, sizeof want, &d) == 0);
        CHECK_MSG(strcmp(got, want) != 0, "%s: value %s left the default %s", o->name, v, want);
        CHECK_MSG(c.given_line[i] == 3 || !dot, "%s: line %d", o->name, c.given_line[i]);
        /* the value reads back: setting `got` again changes nothing */
        faid_config c2 = c;
        CHECK_MSG(faid_config_set(&c2, o->name, got, &d) == 0 && faid_config_equal(&c, &c2),
                  "%s: get/set round trip of %s: %s", o->name, got, d.msg);
    }
}

/* http.endpoint: host:port or [v6]:port; anything else is refused with the key named. */
static void test_http_endpoint(void)
{
    char host[64];
    int port = 0;
    faid_diag d;
    CHECK(faid_config_split_hostport("127.0.0.1:8080", host, sizeof host, &port, &d) == 0);
    CHECK(strcmp(host, "127.0.0.1") == 0 && port == 8080);
    CHECK(faid_config_split_hostport("[::1]:9", host, sizeof host, &port, &d) == 0);
    CHECK(strcmp(host, "::1") == 0 && port == 9);
    CHECK(faid_config_split_hostport("localhost:65535", host, sizeof host, &port, &d) == 0);
    static const char *const bad[] = {"8080",       "::1:8080", "[::1]8080", "host:", "host:0",
                                      "host:65536", "host:8x",  ":8080",     "[]:80", "tcp://a:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(faid_config_split_hostport(bad[i], host, sizeof host, &port, &d) == FAID_ECONFIG,
                  "%s accepted", bad[i]);
    faid_config c;
    CHECK(load("http:\n  endpoint: \"tcp://127.0.0.1:80\"\n", &c, &d) == FAID_ECONFIG);
    CHECK(strstr(d.msg, "http.endpoint") != NULL);
    CHECK(load("http:\n  endpoint: null\n", &c, &d) == 0 && c.http_endpoint[0] == '\0');
}

static void test_issue_keys(void)
{
    static const char yaml[] =
        "detector: {preset: eiger_4m, shape: [2167, 2070], pixel_size: [75.0e-6, 75.0e-6], "
        "mask: mask.npy}\n"
        "geometry: {dist: 0.25, poni1: 0.05, poni2: 0.06, rot1: 0.01, rot2: -0.02, rot3: 0.03, "
        "wavelength: 0.8e-10}\n"
        "integration: {npt: 1000, unit: q_nm^-1, split: full, error_model: poisson,\n"
        "  solid_angle: true, polarization_factor: 0.99, radial_range: [0.5, 30.0],\n"
        "  azimuth_range: [-90, 90], npt_azim: 360, dark: dark.npy, flat: flat.npy,\n"
        "  dummy: -1.0, delta_dummy: 0.5, normalization_factor: 1.0, empty: .nan}\n"
        "input: {endpoint: 'tcp://*:5555', mode: connect, protocol: dectris-v2, max_frame_bytes: "
        "1048576}\n"
        "output: {endpoint: 'tcp://*:5556', lossless_endpoint: null}\n"
        "control: {endpoint: 'tcp://127.0.0.1:5557'}\n"
        "devices: [0, 1]\n"
        "queue: {depth: 64, policy: drop_oldest}\n"
        "pipeline: {inflight: 2}\n"
        "stats: {interval: 0.5}\n"
        "log: {level: debug}\n";
    faid_config c;
    faid_diag d;
    int rc = load(yaml, &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(strcmp(c.preset, "eiger_4m") == 0 && c.rows == 2167 && c.cols == 2070);
    CHECK(strcmp(c.mask_path, "mask.npy") == 0); /* from memory: no folder to resolve against */
    CHECK(c.geometry.dist == 0.25 && c.geometry.poni1 == 0.05 && c.geometry.poni2 == 0.06);
    CHECK(c.geometry.rot1 == 0.01 && c.geometry.rot2 == -0.02 && c.geometry.rot3 == 0.03);
    CHECK(c.geometry.wavelength == 0.8e-10);
    CHECK(c.has_polarization && c.polarization_factor == 0.99);
    CHECK(c.has_radial_range && c.radial_range[0] == 0.5 && c.radial_range[1] == 30.0);
    CHECK(c.has_azimuth_range && c.azimuth_range[0] == -90 && c.azimuth_range[1] == 90);
    CHECK(c.npt_azim == 360 && strcmp(c.dark_path, "dark.npy") == 0);
    CHECK(strcmp(c.flat_path, "flat.npy") == 0);
    CHECK(c.has_dummy && c.dummy == -1.0 && c.delta_dummy == 0.5 && isnan(c.empty));
    CHECK(c.input_bind == 0 && strcmp(c.input_protocol, "dectris-v2") == 0);
    CHECK(strcmp(c.input_endpoint, "tcp://*:5555") == 0 && c.max_frame_bytes == 1048576);
    CHECK(c.lossless_endpoint[0] == '\0' &&
          strcmp(c.control_endpoint, "tcp://127.0.0.1:5557") == 0);
    CHECK(strcmp(c.devices, "0,1") == 0 && c.queue_policy == FAID_QUEUE_DROP_OLDEST);
    CHECK(c.inflight == 2 && c.stats_interval == 0.5 && strcmp(c.log_level, "debug") == 0);
    /* devices as words and single indices; polarization back to none */
    CHECK(load("devices: ref\n", &c, &d) == 0 && strcmp(c.devices, "ref") == 0);
    CHECK(load("devices: 3\n", &c, &d) == 0 && strcmp(c.devices, "3") == 0);
    CHECK(load("integration: {polarization_factor: ~}\n", &c, &d) == 0 && !c.has_polarization);
    CHECK(load("integration:\n  npt_azim:\n", &c, &d) == 0 && c.npt_azim == 0);
}

/* Expects failure with code, "t.yaml:LINE: KEY" and a fragment in the message. */
static void expect_error(const char *yaml, int code, int line, const char *key, const char *frag)
{
    faid_config c;
    faid_diag d;
    int rc = load(yaml, &c, &d);
    char where[160];
    snprintf(where, sizeof where, "t.yaml:%d:%s%s", line, *key ? " " : "", key);
    CHECK_MSG(rc == code, "%s: code %d, want %d (%s)", yaml, rc, code, d.msg);
    CHECK_MSG(strstr(d.msg, where) != NULL, "%s: message '%s' lacks '%s'", yaml, d.msg, where);
    CHECK_MSG(!frag || strstr(d.msg, frag), "%s: message '%s' lacks '%s'", yaml, d.msg, frag);
}

static void test_errors(void)
{
    expect_error("integration:\n  npt: 10\n  nptt: 5\n", FAID_ECONFIG, 3,
                 "unknown key 'integration.nptt'", "did you mean 'integration.npt'");
    expect_error("detector:\n  preset: eiger_4m\n\ngeometri:\n  dist: 1\n", FAID_ECONFIG, 4,
                 "unknown key 'geometri'", NULL);
    expect_error("bogus: 1\n", FAID_ECONFIG, 1, "unknown key 'bogus'", NULL);
    expect_error("integration:\n  npt: 0\n", FAID_ERANGE, 2, "integration.npt", "out of range");
    expect_error("integration:\n  npt: 100001\n", FAID_ERANGE, 2, "integration.npt", "100000");
    expect_error("integration:\n  npt: 1.5\n", FAID_ECONFIG, 2, "integration.npt", "integer");
    expect_error("integration:\n  npt: \"10\"\n", FAID_ECONFIG, 2, "integration.npt", "string");
    expect_error("integration:\n  npt: [1]\n", FAID_ECONFIG, 2, "integration.npt", NULL);
    expect_error("integration:\n  npt: null\n", FAID_ECONFIG, 2, "integration.npt", "required");
    expect_error("geometry:\n  dist: 0\n", FAID_ERANGE, 2, "geometry.dist", "(0");
    expect_error("geometry:\n  dist: -.inf\n", FAID_ERANGE, 2, "geometry.dist", "finite");
    expect_error("geometry:\n  dist: 0x10\n", FAID_ECONFIG, 2, "geometry.dist", "number");
    expect_error("geometry:\n  wavelength: 1e-3\n", FAID_ERANGE, 2, "geometry.wavelength", NULL);
    expect_error("integration:\n  polarization_factor: 1.5\n", FAID_ERANGE, 2,
                 "integration.polarization_factor", NULL);
    expect_error("integration:\n  solid_angle: 1\n", FAID_ECONFIG, 2, "integration.solid_angle",
                 "true or false");
    expect_error("integration:\n  unit: q\n", FAID_ECONFIG, 2, "integration.unit", "q_nm^-1");
    expect_error("integration:\n  split: pseudo\n", FAID_ECONFIG, 2, "integration.split", NULL);
    expect_error("integration:\n  radial_range: [3, 1]\n", FAID_ERANGE, 2,
                 "integration.radial_range", "smaller");
    expect_error("integration:\n  azimuth_range: [0, 400]\n", FAID_ERANGE, 2,
                 "integration.azimuth_range", NULL);
    expect_error("integration:\n  radial_range: [1, 2, 3]\n", FAID_ECONFIG, 2,
                 "integration.radial_range", "2 values");
    expect_error("integration:\n  radial_range: 3\n", FAID_ECONFIG, 2, "integration.radial_range",
                 "list");
    expect_error("detector:\n  shape: [0, 10]\n", FAID_ERANGE, 2, "detector.shape", NULL);
    expect_error("detector:\n  shape: [a, 10]\n", FAID_ECONFIG, 2, "detector.shape", NULL);
    expect_error("detector:\n  preset: eiger_5m\n", FAID_ECONFIG, 2, "detector.preset", "eiger_4m");
    expect_error("detector:\n  mask: ''\n", FAID_ECONFIG, 2, "detector.mask", "null");
    expect_error("devices: fast\n", FAID_ECONFIG, 1, "devices", NULL);
    expect_error("devices: [0, -1]\n", FAID_ERANGE, 1, "devices", NULL);
    expect_error("queue:\n  policy: lifo\n", FAID_ECONFIG, 2, "queue.policy", "drop_oldest");
    expect_error("input:\n  endpoint: localhost\n", FAID_ECONFIG, 2, "input.endpoint", "ZeroMQ");
    expect_error("input:\n  mode: listen\n", FAID_ECONFIG, 2, "input.mode", NULL);
    expect_error("log:\n  level: verbose\n", FAID_ECONFIG, 2, "log.level", NULL);
    expect_error("integration:\n  npt: 5\n  npt: 6\n", FAID_ECONFIG, 3,
                 "duplicate key 'integration.npt'", "line 2");
    expect_error("integration: {npt: 5}\nintegration: {npt: 6}\n", FAID_ECONFIG, 2,
                 "duplicate section 'integration'", NULL);
    expect_error("integration: 5\n", FAID_ECONFIG, 1, "integration", "mapping");
    expect_error("- a\n- b\n", FAID_ECONFIG, 1, "", "mapping");
    expect_error("a: 1\n---\nb: 2\n", FAID_ECONFIG, 3, "", "one YAML document");
    expect_error("integration:\n  npt: [1,\n", FAID_ECONFIG, 3, "", "YAML syntax error");
    expect_error("detector: {preset: null}\n", FAID_ECONFIG, 1, "detector.preset",
                 "shape is unknown");
    expect_error("detector:\n  shape: [10, 10]\n", FAID_ECONFIG, 2, "detector.shape",
                 "pixel size is unknown");
    /* a failed load reports the first error only and a missing file names it */
    faid_config c;
    faid_diag d = {0};
    faid_config_default(&c);
    CHECK(faid_config_load("/nonexistent/faid.yaml", &c, &d) == FAID_EIO);
    CHECK(strstr(d.msg, "/nonexistent/faid.yaml") != NULL);
    CHECK(faid_config_set(&c, "integration.npts", "5", &d) == FAID_ECONFIG);
    CHECK(strstr(d.msg, "integration.npt") != NULL);
    CHECK(faid_config_set(&c, "integration.npt", "-5", &d) == FAID_ERANGE);
    char buf[8];
    CHECK(faid_config_get(&c, "nope", buf, sizeof buf, &d) == FAID_ECONFIG);
    CHECK(faid_config_get(&c, "input.endpoint", buf, 4, &d) == FAID_ESIZE);
}

/* Issue 10 defect 12: an empty or comment-only file used to start the built-in default (EIGER
 * 4M, input on every interface) without a word. It is an error naming the file; `{}` says
 * "the defaults" on purpose. */
static void test_empty_file(void)
{
    static const char *const empty[] = {"", "\n\n", "# nothing here\n  # at all\n", "~\n", "---\n"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        faid_config c;
        faid_diag d = {0};
        CHECK_MSG(load_file("empty.yaml", empty[i], &c, &d) == FAID_ECONFIG, "case %zu", i);
        CHECK_MSG(strstr(d.msg, "empty.yaml") && strstr(d.msg, "empty configuration"),
                  "case %zu: %s", i, d.msg);
    }
    /* Sections without keys (every key under them commented out) set nothing either: found by
     * tests/soak/probe_defects.py after the fix above, which let them start the defaults. */
    static const char *const bare[] = {"detector:\n", "detector:\n#  preset: eiger2_4m\ninput:\n",
                                       "detector: null\ninput: null\n", "detector: {}\n"};
    for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++) {
        faid_config c;
        faid_diag d = {0};
        CHECK_MSG(load_file("bare.yaml", bare[i], &c, &d) == FAID_ECONFIG, "bare case %zu", i);
        CHECK_MSG(strstr(d.msg, "bare.yaml") && strstr(d.msg, "sets no option"),
                  "bare case %zu: %s", i, d.msg);
    }
    faid_config c, def;
    faid_diag d = {0};
    faid_config_default(&def);
    CHECK_MSG(load_file("braces.yaml", "{}\n", &c, &d) == 0, "%s", d.msg);
    snprintf(def.source, sizeof def.source, "%s", c.source);
    CHECK(faid_config_equal(&c, &def));
}

/* A version-2 .poni for a detector faid has no preset for (test_precedence, test_round_trip:
 * each writes it, so that each runs alone, FAID_TEST=test_round_trip). */
static void write_custom_poni(void)
{
    write_text(
        "custom.poni",
        "# Nota: C-Order, 1 refers to the Y axis, 2 to the X axis\n"
        "poni_version: 2\n"
        "Detector: Detector\n"
        "Detector_config: {\"pixel1\": 0.0001, \"pixel2\": 0.00012, \"max_shape\": [100, 120]}\n"
        "Distance: 0.2\nPoni1: 0.005\nPoni2: 0.006\nRot1: 0.01\nRot2: 0.02\nRot3: 0.03\n"
        "Wavelength: 1.2e-10\n");
}

static void test_precedence(void)
{
    /* A .poni for a detector faid has no preset for, and one naming a known model. */
    write_custom_poni();
    write_text("eiger.poni", "poni_version: 2\nDetector: Eiger4M\nDetector_config: {}\n"
                             "Distance: 0.3\nPoni1: 0.08\nPoni2: 0.07\nRot1: 0\nRot2: 0\nRot3: 0\n"
                             "Wavelength: 0.9e-10\n");
    faid_config c;
    faid_diag d;
    /* the .poni's detector replaces the default preset, its geometry applies */
    int rc = load_file("p1.yaml", "geometry: {poni_file: custom.poni}\n", &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(c.preset[0] == '\0' && c.rows == 100 && c.cols == 120);
    CHECK(c.pixel1 == 0.0001 && c.pixel2 == 0.00012);
    CHECK(c.geometry.dist == 0.2 && c.geometry.poni1 == 0.005 && c.geometry.poni2 == 0.006);
    CHECK(c.geometry.rot1 == 0.01 && c.geometry.rot2 == 0.02 && c.geometry.rot3 == 0.03);
    CHECK(c.geometry.wavelength == 1.2e-10);
    char want[PATH_MAX + 32], real[PATH_MAX];
    CHECK(realpath(tmpdir, real) != NULL);
    snprintf(want, sizeof want, "%s/custom.poni", real);
    CHECK_MSG(strcmp(c.poni_file, want) == 0, "%s vs %s", c.poni_file, want);
    /* an explicit key overrides the file, key by key */
    rc = load_file("p2.yaml", "geometry:\n  poni_file: custom.poni\n  dist: 0.5\n  rot3: 0\n", &c,
                   &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(c.geometry.dist == 0.5 && c.geometry.rot3 == 0 && c.geometry.rot2 == 0.02);
    CHECK(c.geometry.poni1 == 0.005);
    /* a preset wins over the .poni's detector; the geometry still comes from the file */
    rc = load_file("p3.yaml",
                   "detector: {preset: pilatus_1m}\ngeometry: {poni_file: custom.poni}\n", &c, &d);
    const faid_detector_preset *pil = faid_detector_find("pilatus_1m");
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(pil && c.rows == pil->rows && c.cols == pil->cols && c.pixel1 == pil->pixel1);
    CHECK(strcmp(c.preset, "pilatus_1m") == 0 && c.geometry.dist == 0.2);
    /* explicit shape / pixel_size win over the .poni's detector */
    rc = load_file("p4.yaml",
                   "detector: {shape: [50, 60], pixel_size: [2.0e-4, 2.0e-4]}\n"
                   "geometry: {poni_file: custom.poni}\n",
                   &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(c.rows == 50 && c.cols == 60 && c.pixel1 == 2e-4 && c.geometry.pixel2 == 2e-4);
    /* a .poni naming a known detector selects its preset (gaps included) */
    rc = load_file("p5.yaml", "geometry: {poni_file: eiger.poni}\n", &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(strcmp(c.preset, "eiger_4m") == 0 && c.rows == 2167 && c.geometry.dist == 0.3);
    CHECK(c.geometry.wavelength == 0.9e-10);
    /* shape alone drops the default preset; the PONI defaults to the centre */
    rc = load("detector: {shape: [10, 20], pixel_size: [1.0e-4, 2.0e-4]}\n", &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    CHECK(c.preset[0] == '\0' && c.geometry.poni1 == 5 * 1e-4 && c.geometry.poni2 == 10 * 2e-4);
    /* a preset with an explicit shape override keeps the preset name */
    rc = load("detector: {preset: eiger_4m, shape: [100, 100]}\n", &c, &d);
    CHECK(rc == 0 && strcmp(c.preset, "eiger_4m") == 0 && c.rows == 100);
    /* a missing .poni names the key, the line and the file */
    rc = load_file("p6.yaml", "\ngeometry:\n  poni_file: missing.poni\n", &c, &d);
    CHECK(rc == FAID_EIO);
    CHECK_MSG(strstr(d.msg, ":3: geometry.poni_file") && strstr(d.msg, "missing.poni"), "%s",
              d.msg);
    /* a failed load leaves source as it was */
    CHECK(c.source[0] == '\0');
}

static void test_relative_paths(void)
{
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    CHECK(mkdir(sub, 0777) == 0);
    faid_config c;
    faid_diag d;
    int rc = load_file("sub/r.yaml",
                       "detector: {mask: m.npy}\nintegration:\n  dark: ../d.npy\n"
                       "  flat: /abs/f.npy\n",
                       &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    char real[PATH_MAX], want[PATH_MAX + 32];
    CHECK(realpath(sub, real) != NULL);
    snprintf(want, sizeof want, "%s/m.npy", real);
    CHECK_MSG(strcmp(c.mask_path, want) == 0, "%s", c.mask_path);
    snprintf(want, sizeof want, "%s/../d.npy", real);
    CHECK(strcmp(c.dark_path, want) == 0);
    CHECK(strcmp(c.flat_path, "/abs/f.npy") == 0);
    CHECK(strstr(c.source, "sub/r.yaml") != NULL);
}

static void test_round_trip(void)
{
    static const char *docs[] = {
        "{}\n",
        "detector: {preset: null, shape: [100, 120], pixel_size: [1.0e-4, 1.2e-4], mask: /m.npy,"
        " orientation: 2}\n"
        "geometry: {dist: 0.123456789012345, poni1: -0.001, poni2: 3.3e-3, rot1: 0.1,"
        " rot2: -0.2, rot3: 3.0, wavelength: 7.3e-11}\n"
        "integration: {npt: 77, unit: 2th_deg, split: bbox, error_model: azimuthal,"
        " solid_angle: false, polarization_factor: -0.3, radial_range: [1, 50.5],"
        " azimuth_range: [-45.5, 170], npt_azim: 90, dark: 'with space.npy', flat: "
        "\"q\\\"uote.npy\","
        " dummy: -2, delta_dummy: 0.1, normalization_factor: 1e5, empty: -.inf}\n"
        "input: {io_threads: 3}\n"
        "output: {lossless_endpoint: 'ipc:///tmp/x', sndhwm: 7, lossless_shutdown_timeout: 0.25}\n"
        "devices: [1, 0]\nqueue: {depth: 3, policy: drop_newest}\nlog: {level: error}\n",
        "geometry: {poni_file: custom.poni, rot1: 0.5}\n",
    };
    write_custom_poni();
    for (size_t k = 0; k < sizeof docs / sizeof docs[0]; k++) {
        faid_config a, b;
        faid_diag d;
        int rc = load_file("rt.yaml", docs[k], &a, &d);
        CHECK_MSG(rc == 0, "doc %zu: %s", k, d.msg);
        char *s = faid_config_dump_alloc(&a, FAID_DUMP_PLAIN);
        CHECK(s != NULL);
        if (!s)
            continue;
        faid_config_default(&b);
        rc = faid_config_load_string(s, strlen(s), "dump", &b, &d);
        CHECK_MSG(rc == 0, "doc %zu: dump does not load: %s\n%s", k, d.msg, s);
        CHECK_MSG(faid_config_equal(&a, &b), "doc %zu: round trip differs\n%s", k, s);
        char *s2 = faid_config_dump_alloc(&b, FAID_DUMP_PLAIN);
        /* identical but for the source line */
        CHECK(s2 && strcmp(strchr(s, '\n'), strchr(s2, '\n')) == 0);
        /* the annotated form loads to the same configuration too */
        char *an = faid_config_dump_alloc(&a, FAID_DUMP_ANNOTATED);
        faid_config_default(&b);
        CHECK(an && faid_config_load_string(an, strlen(an), "annotated", &b, &d) == 0 &&
              faid_config_equal(&a, &b));
        char buf[16];
        CHECK(faid_config_dump(&a, buf, sizeof buf) == FAID_ESIZE);
        free(s);
        free(s2);
        free(an);
    }
}

/* output.extra: a list of result array keys; at its default ([]) the plain dump and the hash
 * leave it out (the start message of a configuration that does not set it is what it was before
 * the option), set it dumps, loads back and changes the hash; a key that is not an array of the
 * result message, a scalar or a key listed twice are errors naming the option and the key. */
static void test_output_extra(void)
{
    faid_config a, b;
    faid_diag d;
    char ha[17], hb[17];
    faid_config_default(&a);
    char *s = faid_config_dump_alloc(&a, FAID_DUMP_PLAIN);
    CHECK(s && !strstr(s, "extra:"));
    free(s);
    faid_config_hash(&a, ha);
    static const char none[] = "output: {extra: []}\n";
    faid_config_default(&b);
    CHECK(faid_config_load_string(none, sizeof none - 1, "t", &b, &d) == 0);
    faid_config_hash(&b, hb);
    CHECK(strcmp(ha, hb) == 0 && faid_config_equal(&a, &b));

    static const char on[] = "output: {extra: [sum_normalization]}\n";
    faid_config_default(&a);
    CHECK_MSG(faid_config_load_string(on, sizeof on - 1, "t", &a, &d) == 0, "%s", d.msg);
    CHECK(strcmp(a.output_extra, "sum_normalization") == 0);
    faid_config_hash(&a, ha);
    CHECK(strcmp(ha, hb) != 0);
    s = faid_config_dump_alloc(&a, FAID_DUMP_PLAIN);
    CHECK(s && strstr(s, "\n  extra: [sum_normalization]\n"));
    faid_config_default(&b);
    CHECK(s && faid_config_load_string(s, strlen(s), "dump", &b, &d) == 0 &&
          faid_config_equal(&a, &b));
    free(s);
    char got[64];
    CHECK(faid_config_get(&a, "output.extra", got, sizeof got, &d) == 0 &&
          strcmp(got, "[sum_normalization]") == 0);

    static const struct {
        const char *doc, *says;
    } bad[] = {
        {"output: {extra: [no_such_key]}\n", "'no_such_key' is not an array key"},
        {"output: {extra: [frame_id]}\n", "'frame_id' is not an array key"},
        {"output: {extra: sum_normalization}\n", "expected a list of result keys"},
        {"output: {extra: [sum_normalization, sum_normalization]}\n", "listed twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        faid_config_default(&b);
        CHECK(faid_config_load_string(bad[i].doc, strlen(bad[i].doc), "t", &b, &d) == FAID_ECONFIG);
        CHECK_MSG(strstr(d.msg, "output.extra") && strstr(d.msg, bad[i].says), "%s: %s", bad[i].doc,
                  d.msg);
    }
}

static void test_hash(void)
{
    faid_config a, b;
    faid_diag d;
    char ha[17], hb[17];
    faid_config_default(&a);
    faid_config_default(&b);
    faid_config_hash(&a, ha);
    faid_config_hash(&b, hb);
    CHECK(strlen(ha) == 16 && strcmp(ha, hb) == 0);
    CHECK(faid_config_set(&b, "integration.npt", "999", &d) == 0);
    faid_config_hash(&b, hb);
    CHECK(strcmp(ha, hb) != 0);
    /* non-reduction options leave it alone */
    faid_config_default(&b);
    CHECK(faid_config_set(&b, "queue.depth", "7", &d) == 0);
    faid_config_hash(&b, hb);
    CHECK(strcmp(ha, hb) == 0);
    CHECK(faid_config_set(&b, "integration.dark", "x.npy", &d) == 0);
    CHECK(faid_config_hash64(&b, 1) != faid_config_hash64(&a, 1));
    CHECK(faid_config_hash64(&b, 0) == faid_config_hash64(&a, 0));
}

/* The peaks: and hits: sections (issue 6): defaults as the issue lists them, every key parsed
 * into faid_peak_params, ranges and cross-checks refused naming the key and line. */
static void test_peaks_keys(void)
{
    faid_config c;
    faid_diag d = {0};
    faid_config_default(&c);
    faid_peak_params def;
    faid_peak_params_default(&def);
    CHECK(c.peaks.algorithm == FAID_PEAKS_NONE && c.peaks.error_model == FAID_CLIP_AZIMUTHAL);
    CHECK(c.peaks.cycles == 5 && c.peaks.cutoff_clip == 0.0 && c.peaks.noise == 1.0);
    CHECK(c.peaks.cutoff_peak == 3.0 && c.peaks.patch_size == 3 && c.peaks.connected == 2);
    CHECK(c.peaks.adc_threshold == 100.0 && c.peaks.minimum_snr == 5.0);
    CHECK(c.peaks.min_pixel_count == 2 && c.peaks.max_pixel_count == 200);
    CHECK(c.peaks.local_bg_radius == 3 && c.peaks.min_res == 0.0 && c.peaks.max_res == 1200.0);
    CHECK(c.peaks.max_num_peaks == 2048 && c.peaks.min_peaks_for_hit == 10);
    CHECK(!c.peaks.has_max_peaks_for_hit && c.peaks.hit_rate_window == 200);
    CHECK(memcmp(&c.peaks, &def, sizeof def) == 0); /* the table's defaults are the library's */
    CHECK(c.hits_endpoint[0] == 0 && c.hits_mode == FAID_HITS_FRAME);

    const char *y = "peaks:\n  algorithm: peakfinder8\n  cutoff_clip: 4.5\n  cycles: 3\n"
                    "  error_model: hybrid\n  noise: 2.0\n  cutoff_peak: 2.5\n  patch_size: 5\n"
                    "  connected: 7\n  adc_threshold: 50\n  minimum_snr: 6\n"
                    "  min_pixel_count: 3\n  max_pixel_count: 90\n  local_bg_radius: 4\n"
                    "  min_res: 20\n  max_res: 800\n  max_num_peaks: 500\n"
                    "  min_peaks_for_hit: 15\n  max_peaks_for_hit: 400\n"
                    "  hit_rate_window: 50\n  aggregates_interval: 0.5\n"
                    "hits:\n  endpoint: tcp://*:5560\n  mode: patches\n  patch_radius: 6\n";
    CHECK_MSG(load(y, &c, &d) == 0, "%s", d.msg);
    CHECK(c.peaks.algorithm == FAID_PEAKS_PEAKFINDER8 && c.peaks.error_model == FAID_CLIP_HYBRID);
    CHECK(c.peaks.cutoff_clip == 4.5 && c.peaks.cycles == 3 && c.peaks.noise == 2.0);
    CHECK(c.peaks.cutoff_peak == 2.5 && c.peaks.patch_size == 5 && c.peaks.connected == 7);
    CHECK(c.peaks.adc_threshold == 50 && c.peaks.minimum_snr == 6);
    CHECK(c.peaks.min_pixel_count == 3 && c.peaks.max_pixel_count == 90);
    CHECK(c.peaks.local_bg_radius == 4 && c.peaks.min_res == 20 && c.peaks.max_res == 800);
    CHECK(c.peaks.max_num_peaks == 500 && c.peaks.min_peaks_for_hit == 15);
    CHECK(c.peaks.has_max_peaks_for_hit && c.peaks.max_peaks_for_hit == 400);
    CHECK(c.peaks.hit_rate_window == 50 && c.peaks_aggregates_interval == 0.5);
    CHECK(strcmp(c.hits_endpoint, "tcp://*:5560") == 0 && c.hits_mode == FAID_HITS_PATCHES);
    CHECK(c.hits_patch_radius == 6);
    char buf[64];
    CHECK(faid_config_get(&c, "peaks.algorithm", buf, sizeof buf, &d) == 0 &&
          strcmp(buf, "peakfinder8") == 0);

    CHECK(load("peaks:\n  algorithm: dials\n", &c, &d) == FAID_ECONFIG);
    CHECK(strstr(d.msg, "peaks.algorithm") != NULL);
    CHECK(load("peaks:\n  patch_size: 4\n", &c, &d) == FAID_ECONFIG);
    CHECK(strstr(d.msg, "t.yaml:2: peaks.patch_size") != NULL);
    CHECK(load("peaks:\n  cycles: 65\n", &c, &d) != 0 && strstr(d.msg, "peaks.cycles"));
    CHECK(load("peaks:\n  min_pixel_count: 10\n  max_pixel_count: 5\n", &c, &d) != 0);
    CHECK(strstr(d.msg, "t.yaml:3: peaks.max_pixel_count") != NULL);
    CHECK(load("peaks:\n  min_res: 900\n  max_res: 100\n", &c, &d) != 0);
    CHECK(strstr(d.msg, "peaks.min_res") != NULL);
    CHECK(load("peaks:\n  min_peaks_for_hit: 10\n  max_peaks_for_hit: 5\n", &c, &d) != 0);
    CHECK(strstr(d.msg, "peaks.max_peaks_for_hit") != NULL);
    CHECK(load("hits:\n  mode: everything\n", &c, &d) != 0 && strstr(d.msg, "hits.mode"));
}

static void test_generated_docs(void)
{
    const char *src = getenv("FAID_SOURCE_DIR");
    if (!src || !*src)
        src = FAID_SOURCE_DIR;
    char path[1024];
    snprintf(path, sizeof path, "%s/deploy/faid.example.yaml", src);
    char *ex = read_text(path);
    char *gen = faid_config_example();
    CHECK_MSG(ex != NULL, "%s missing", path);
    CHECK(gen != NULL);
    if (ex && gen)
        CHECK_MSG(strcmp(ex, gen) == 0,
                  "%s is stale: regenerate it with `faidctl process "
                  "--dump-config=annotated > deploy/faid.example.yaml`",
                  path);
    if (ex) {
        faid_config c, def;
        faid_diag d = {0};
        faid_config_default(&c);
        faid_config_default(&def);
        CHECK_MSG(faid_config_load(path, &c, &d) == 0, "%s", d.msg);
        CHECK(faid_config_equal(&c, &def));
        /* every key of the table appears, set or commented out, under its section */
        size_t n;
        const faid_option *t = faid_config_options(&n);
        for (size_t i = 0; i < n; i++) {
            const char *dot = strchr(t[i].name, '.');
            char sec[64], k1[96], k2[96];
            const char *at = ex;
            if (dot) {
                snprintf(sec, sizeof sec, "\n%.*s:\n", (int)(dot - t[i].name), t[i].name);
                at = strstr(ex, sec);
                snprintf(k1, sizeof k1, "\n  %s: ", dot + 1);
                snprintf(k2, sizeof k2, "\n  # %s: ", dot + 1);
            } else {
                snprintf(k1, sizeof k1, "\n%s: ", t[i].name);
                snprintf(k2, sizeof k2, "\n# %s: ", t[i].name);
            }
            CHECK_MSG(at && (strstr(at, k1) || strstr(at, k2)), "%s not in the example", t[i].name);
        }
    }
    free(ex);
    free(gen);
    snprintf(path, sizeof path, "%s/docs/configuration.md", src);
    char *md = read_text(path);
    char *table = faid_config_dump_alloc(NULL, FAID_DUMP_MARKDOWN);
    CHECK_MSG(md != NULL, "%s missing", path);
    if (md && table)
        CHECK_MSG(strstr(md, table) != NULL,
                  "%s: option table is stale: regenerate it with "
                  "`faidctl process --dump-config=markdown`",
                  path);
    free(md);
    free(table);
}

/* ---- setup and synth ------------------------------------------------------------------------ */

static void save_npy(const char *name, faid_dtype t, int rows, int cols, const void *data)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    size_t shape[2] = {(size_t)rows, (size_t)cols};
    faid_npy_write(path, t, 2, shape, data, NULL);
}

static void test_setup(void)
{
    enum { R = 30, C = 40 };
    static uint16_t m[R * C];
    static double dark[R * C];
    static int32_t flat[R * C];
    for (int i = 0; i < R * C; i++) {
        m[i] = (uint16_t)(i % 97 == 0 ? 3 : 0);
        dark[i] = 0.5 * (i % 7);
        flat[i] = 1 + i % 3;
    }
    save_npy("m.npy", FAID_DT_U16, R, C, m);
    save_npy("dark.npy", FAID_DT_F64, R, C, dark);
    save_npy("flat.npy", FAID_DT_I32, R, C, flat);
    save_npy("wrong.npy", FAID_DT_F32, C, R, dark);
    const char *base = "detector: {preset: null, shape: [30, 40], pixel_size: [1.0e-4, 1.0e-4],"
                       " mask: m.npy}\ngeometry: {dist: 0.05}\n"
                       "integration: {npt: 20, npt_azim: 8, dark: dark.npy, flat: flat.npy,"
                       " polarization_factor: 0.9, dummy: -1, normalization_factor: 2}\n";
    faid_config c;
    faid_diag d;
    int rc = load_file("s.yaml", base, &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    faid_setup *s = faid_setup_new(&c, 7, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    if (s) {
        CHECK(s->version == 7 && s->rows == R && s->cols == C && s->npix == R * C);
        int same = 1;
        for (int i = 0; i < R * C; i++)
            same &= (s->mask[i] != 0) == (m[i] != 0) && s->dark[i] == (float)dark[i] &&
                    s->flat[i] == (float)flat[i];
        CHECK(same);
        CHECK(s->solid_angle && s->polarization && s->corr.polarization == s->polarization);
        CHECK(s->corr.do_dummy && s->corr.dummy == -1.0f && s->corr.normalization_factor == 2.0f);
        CHECK(s->csr && s->csr->nbins == 20 && s->csr2d && s->csr2d->npt_azim == 8);
        CHECK(strlen(s->config_hash) == 16);
        /* masked pixels never enter the matrix */
        int clean = 1;
        for (int64_t k = 0; s->csr && k < s->csr->nnz; k++)
            clean &= s->mask[s->csr->indices[k]] == 0;
        CHECK(clean);
        /* the hash follows the file contents, not only the names */
        char h1[17];
        memcpy(h1, s->config_hash, sizeof h1);
        faid_setup_destroy(&s);
        CHECK(s == NULL);
        dark[5] += 1;
        save_npy("dark.npy", FAID_DT_F64, R, C, dark);
        s = faid_setup_new(&c, 8, &d);
        CHECK(s && strcmp(s->config_hash, h1) != 0);
        faid_setup_destroy(&s);
    }
    /* a preset's gaps are masked */
    rc = load("detector: {preset: eiger_1m}\nintegration: {npt: 10, split: 'no'}\n", &c, &d);
    CHECK(rc == 0);
    s = faid_setup_new(&c, 1, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    if (s) {
        const faid_detector_preset *p = faid_detector_find("eiger_1m");
        size_t gaps = 0;
        for (size_t i = 0; i < s->npix; i++)
            gaps += s->mask[i] != 0;
        CHECK(p && gaps == (size_t)p->gap_rows * (size_t)p->cols);
        CHECK(s->solid_angle && !s->polarization && !s->dark && !s->csr2d);
        faid_setup_destroy(&s);
    }
    /* wrong shape and missing files name the key and the file */
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "%s", base);
    char *at = strstr(yaml, "dark.npy");
    memcpy(at, "wrong.npy, flat: flat.npy, polarization_factor: 0.9}\n",
           strlen("wrong.npy, flat: flat.npy, polarization_factor: 0.9}\n") + 1);
    rc = load_file("s2.yaml", yaml, &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    s = faid_setup_new(&c, 1, &d);
    CHECK(s == NULL && d.code == FAID_ESHAPE);
    CHECK_MSG(strstr(d.msg, "integration.dark") && strstr(d.msg, "wrong.npy") &&
                  strstr(d.msg, "(40, 30)") && strstr(d.msg, "(30, 40)"),
              "%s", d.msg);
    rc = load("detector: {preset: null, shape: [30, 40], pixel_size: [1.0e-4, 1.0e-4],"
              " mask: /nonexistent/m.npy}\n",
              &c, &d);
    s = faid_setup_new(&c, 1, &d);
    CHECK(rc == 0 && s == NULL && d.code == FAID_EIO);
    CHECK_MSG(strstr(d.msg, "detector.mask") && strstr(d.msg, "/nonexistent/m.npy"), "%s", d.msg);
}

static void test_synth(void)
{
    faid_geometry g = {0.05, 1.5e-3, 2.0e-3, 0.01, 0, 0, 1e-10, 1e-4, 1e-4, 30, 40, 3};
    uint8_t mask[30 * 40] = {0};
    for (int i = 0; i < 40; i++)
        mask[10 * 40 + i] = 1;
    faid_synth_params p;
    faid_synth_default_params(&p);
    faid_diag d = {0};
    faid_synth *s = faid_synth_new(&g, mask, &p, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    if (!s)
        return;
    static const faid_dtype types[] = {FAID_DT_U8,  FAID_DT_U16, FAID_DT_U32,
                                       FAID_DT_I16, FAID_DT_I32, FAID_DT_F32};
    static uint8_t a[30 * 40 * 4], b[30 * 40 * 4];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        faid_dtype t = types[k];
        CHECK(faid_synth_frame(s, 3, t, a, sizeof a, &d) == 0);
        CHECK(faid_synth_frame(s, 3, t, b, sizeof b, &d) == 0);
        size_t nb = 30 * 40 * faid_dtype_size(t);
        CHECK(memcmp(a, b, nb) == 0);
        double v[30 * 40];
        faid_dtype_to_f64(t, a, 30 * 40, v);
        double bad = faid_synth_bad_value(t), sum = 0;
        int ok_bad = 1, ok_valid = 1;
        for (int i = 0; i < 30 * 40; i++) {
            if (mask[i])
                ok_bad &= isnan(bad) ? isnan(v[i]) : v[i] == bad;
            else {
                ok_valid &= v[i] >= 0 && (isnan(bad) ? !isnan(v[i]) : v[i] != bad);
                sum += v[i];
            }
        }
        CHECK_MSG(ok_bad && ok_valid, "dtype %s", faid_dtype_name(t));
        CHECK(sum > 0);
        CHECK(faid_synth_frame(s, 4, t, b, sizeof b, &d) == 0 && memcmp(a, b, nb) != 0);
    }
    CHECK(faid_synth_frame(s, 0, FAID_DT_F64, a, sizeof a, &d) == FAID_EDTYPE);
    CHECK(faid_synth_frame(s, 0, FAID_DT_U32, a, 100, &d) == FAID_ESIZE);
    faid_synth_destroy(&s);
    CHECK(s == NULL);
}

/* faid_synth_for_config: the configuration's shape and bad pixels (the mask file here; the
 * preset's gaps below), faid_synth_frame's bad value exactly there; a mask of another shape and
 * a configuration without a shape are refused with the key or the reason named. */
static void test_synth_for_config(void)
{
    enum { R = 30, C = 40 };
    static uint8_t m[R * C];
    for (int i = 0; i < R * C; i++)
        m[i] = (uint8_t)(i / C == 12 || i % 53 == 0);
    save_npy("sm.npy", FAID_DT_U8, R, C, m);
    save_npy("sm_wrong.npy", FAID_DT_U8, C, R, m);
    faid_config c;
    faid_diag d;
    int rc = load_file("sfc.yaml",
                       "detector: {preset: null, shape: [30, 40], pixel_size: [1.0e-4, 1.0e-4],"
                       " mask: sm.npy}\ngeometry: {dist: 0.05}\n",
                       &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    faid_synth *s = faid_synth_for_config(&c, NULL, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    static uint32_t f[R * C];
    if (s) {
        CHECK(faid_synth_frame(s, 1, FAID_DT_U32, f, sizeof f, &d) == 0);
        int exact = 1;
        for (int i = 0; i < R * C; i++)
            exact &= (f[i] == 0xffffffffu) == (m[i] != 0);
        CHECK(exact);
        faid_synth_destroy(&s);
    }
    rc = load_file("sfc2.yaml",
                   "detector: {preset: null, shape: [30, 40], pixel_size: [1.0e-4, 1.0e-4],"
                   " mask: sm_wrong.npy}\ngeometry: {dist: 0.05}\n",
                   &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    s = faid_synth_for_config(&c, NULL, &d);
    CHECK(s == NULL && d.code == FAID_ESHAPE);
    CHECK_MSG(strstr(d.msg, "detector.mask") && strstr(d.msg, "sm_wrong.npy"), "%s", d.msg);
    /* a preset's module gaps: the same pixels as the setup masks */
    rc = load_file("sfc3.yaml", "detector: {preset: eiger_1m}\ngeometry: {dist: 0.1}\n", &c, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    s = faid_synth_for_config(&c, NULL, &d);
    faid_setup *su = faid_setup_new(&c, 1, &d);
    CHECK_MSG(s && su, "%s", d.msg);
    if (s && su) {
        uint16_t *g = malloc(su->npix * sizeof *g);
        CHECK(g && faid_synth_frame(s, 0, FAID_DT_U16, g, su->npix * sizeof *g, &d) == 0);
        size_t same = 0, gaps = 0;
        for (size_t i = 0; g && i < su->npix; i++) {
            same += (g[i] == 0xffff) == (su->mask[i] != 0);
            gaps += su->mask[i] != 0;
        }
        CHECK(g && same == su->npix && gaps > 0);
        free(g);
    }
    faid_synth_destroy(&s);
    faid_setup_destroy(&su);
    faid_config_default(&c);
    c.rows = 0;
    s = faid_synth_for_config(&c, NULL, &d);
    CHECK(s == NULL && d.code == FAID_ESHAPE && strstr(d.msg, "no detector shape"));
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/faid_test_config_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "cannot create a temporary folder\n");
        return 1;
    }
    RUN(test_default());
    RUN(test_every_key());
    RUN(test_enum_names_single_table());
    RUN(test_issue_keys());
    RUN(test_http_endpoint());
    RUN(test_errors());
    RUN(test_empty_file());
    RUN(test_precedence());
    RUN(test_relative_paths());
    RUN(test_round_trip());
    RUN(test_hash());
    RUN(test_output_extra());
    RUN(test_peaks_keys());
    RUN(test_generated_docs());
    RUN(test_setup());
    RUN(test_synth());
    RUN(test_synth_for_config());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return faid_test_finish();
}
