/* faid_rest: the REST control API's handlers (see faid_rest.h). */
#include "faid_rest.h"

#include "faid_aggregates.h"
#include "faid_codec.h"
#include "faid_log.h"
#include "faid_state.h"

#include "faid_gen.h"
#include "faid_pool.h"
#include "faid_textbuf.h"
#include "faid_writer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REPLY_CAP (1u << 20) /* a status reply is about 6 kB; a config reply holds the YAML */

static faid_ratelimit rl_auth, rl_ctl;

static const char *phrase(unsigned status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 503:
        return "Service Unavailable";
    default:
        return "Internal Server Error";
    }
}

void faid_rest_problem_answer(faid_rest_answer *a, unsigned status, const char *detail,
                              const char *key)
{
    a->status = status;
    a->type = "application/problem+json";
    a->body = faid_rest_problem(status, phrase(status), detail, key, &a->len);
}

static void json_answer(faid_rest_answer *a, char *text, size_t len)
{
    if (!text) {
        faid_rest_problem_answer(a, 500, "out of memory", NULL);
        return;
    }
    a->status = 200;
    a->type = "application/json";
    a->body = text;
    a->len = len;
}

/* ---- msgpack reply to JSON ------------------------------------------------------------------- */

static void json_strn(faid_textbuf *b, const uint8_t *p, size_t n)
{
    char small[256];
    char *tmp = n < sizeof small ? small : malloc(n + 1);
    if (!tmp) {
        b->oom = 1;
        return;
    }
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    faid_tb_json_str(b, tmp);
    if (tmp != small)
        free(tmp);
}

/* An array map ({dtype, shape, data}) as {"dtype", "shape", "data": [values]}. */
static void json_arrayview(faid_textbuf *b, const faid_array_view *v)
{
    faid_tb_puts(b, "{\"dtype\":");
    faid_tb_json_str(b, v->descr);
    faid_tb_puts(b, ",\"shape\":[");
    for (int i = 0; i < v->ndim; i++)
        faid_tb_printf(b, "%s%llu", i ? "," : "", (unsigned long long)v->shape[i]);
    faid_tb_puts(b, "],\"data\":[");
    size_t isz = faid_dtype_size(v->dtype);
    for (uint64_t i = 0; i < v->nelem && !b->oom; i++) {
        uint8_t one[8];
        double x;
        memcpy(one, v->data + i * isz, isz);
        faid_dtype_to_f64(v->dtype, one, 1, &x);
        if (i)
            faid_tb_puts(b, ",");
        if (v->dtype == FAID_DT_F32 || v->dtype == FAID_DT_F64)
            faid_tb_json_num(b, x);
        else
            faid_tb_printf(b, "%.0f", x);
    }
    faid_tb_puts(b, "]}");
}

/* A compressed array map ({dtype, shape, encoding, data}: the virtual powder plot) at r: decoded
 * and written as an array; 0 when it was one (r moved past it), 1 when it is another map. */
static int compressed_array(faid_textbuf *b, faid_mpr *r)
{
    faid_mpr c = *r;
    faid_mp_obj o, k, v;
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_mpr_next(&c, &o, &d) || o.type != FAID_MP_MAP || o.len != 4)
        return 1;
    char dtype[8] = "", enc[16] = "";
    uint64_t shape[FAID_PROTO_MAX_DIMS];
    int ndim = -1;
    const uint8_t *data = NULL;
    size_t dlen = 0;
    for (uint32_t i = 0; i < o.len; i++) {
        if (faid_mpr_next(&c, &k, &d) || k.type != FAID_MP_STR)
            return 1;
        if (faid_mp_str_eq(&k, FAID_K_SHAPE)) {
            if (faid_mpr_next(&c, &v, &d) || v.type != FAID_MP_ARRAY || v.len < 1 ||
                v.len > FAID_PROTO_MAX_DIMS)
                return 1;
            ndim = (int)v.len;
            for (int j = 0; j < ndim; j++) {
                faid_mp_obj e;
                if (faid_mpr_next(&c, &e, &d) || faid_mp_to_u64(&e, &shape[j]))
                    return 1;
            }
            continue;
        }
        if (faid_mpr_next(&c, &v, &d))
            return 1;
        if (faid_mp_str_eq(&k, FAID_K_DTYPE)) {
            if (faid_mp_to_cstr(&v, dtype, sizeof dtype))
                return 1;
        } else if (faid_mp_str_eq(&k, FAID_K_ENCODING)) {
            if (faid_mp_to_cstr(&v, enc, sizeof enc))
                return 1;
        } else if (faid_mp_str_eq(&k, FAID_K_DATA) && v.type == FAID_MP_BIN) {
            data = v.ptr;
            dlen = v.len;
        } else {
            return 1;
        }
    }
    faid_dtype dt = faid_dtype_parse(dtype);
    faid_encoding e;
    if (ndim < 1 || !data || dt == FAID_DT_INVALID || faid_encoding_parse(enc, &e))
        return 1;
    faid_array_view a = {.dtype = dt, .ndim = ndim, .nelem = 1};
    snprintf(a.descr, sizeof a.descr, "%s", dtype);
    size_t isz = faid_dtype_size(dt);
    for (int j = 0; j < ndim; j++) {
        a.shape[j] = shape[j];
        if (shape[j] && a.nelem > ((uint64_t)64 << 20) / isz / shape[j])
            return 1; /* over 64 MiB decoded: not faid's own */
        a.nelem *= shape[j];
    }
    a.nbytes = (size_t)a.nelem * isz;
    uint8_t *out = malloc(a.nbytes ? a.nbytes : 1);
    if (!out)
        return 1;
    if (faid_decode(e, data, dlen, isz, out, a.nbytes, &d)) {
        free(out);
        return 1;
    }
    a.data = out;
    json_arrayview(b, &a);
    free(out);
    *r = c;
    return 0;
}

/* One msgpack value (walked by the bounded reader; depth-limited) as JSON text. */
static int to_json(faid_textbuf *b, faid_mpr *r, int depth, faid_diag *d)
{
    if (depth > FAID_MP_MAX_DEPTH)
        return faid_fail(d, FAID_EFORMAT, "reply nested too deep");
    faid_mpr at = *r;
    faid_mp_obj o;
    int rc = faid_mpr_next(r, &o, d);
    if (rc)
        return rc;
    switch (o.type) {
    case FAID_MP_NIL:
        faid_tb_puts(b, "null");
        return 0;
    case FAID_MP_BOOL:
        faid_tb_puts(b, o.b ? "true" : "false");
        return 0;
    case FAID_MP_UINT:
        faid_tb_printf(b, "%llu", (unsigned long long)o.u);
        return 0;
    case FAID_MP_INT:
        faid_tb_printf(b, "%lld", (long long)o.i);
        return 0;
    case FAID_MP_FLOAT:
        faid_tb_json_num(b, o.f);
        return 0;
    case FAID_MP_STR:
        json_strn(b, o.ptr, o.len);
        return 0;
    case FAID_MP_BIN:
    case FAID_MP_EXT:
        faid_tb_printf(b, "{\"bytes\":%u}", (unsigned)o.len);
        return 0;
    case FAID_MP_ARRAY:
        faid_tb_puts(b, "[");
        for (uint32_t i = 0; i < o.len; i++) {
            if (i)
                faid_tb_puts(b, ",");
            if ((rc = to_json(b, r, depth + 1, d)))
                return rc;
        }
        faid_tb_puts(b, "]");
        return 0;
    case FAID_MP_MAP: {
        /* an array map reads as one (its data as a list) */
        faid_mpr try = at;
        faid_array_view v;
        faid_diag ad;
        faid_diag_clear(&ad);
        if (faid_proto_read_array(&try, &v, &ad) == 0 && v.dtype != FAID_DT_INVALID) {
            *r = try;
            json_arrayview(b, &v);
            return 0;
        }
        faid_mpr again = at;
        if (compressed_array(b, &again) == 0) {
            *r = again;
            return 0;
        }
        faid_tb_puts(b, "{");
        for (uint32_t i = 0; i < o.len; i++) {
            faid_mp_obj k;
            if ((rc = faid_mpr_next(r, &k, d)))
                return rc;
            if (k.type != FAID_MP_STR)
                return faid_fail(d, FAID_EFORMAT, "reply: a key that is not a string");
            if (i)
                faid_tb_puts(b, ",");
            json_strn(b, k.ptr, k.len);
            faid_tb_puts(b, ":");
            if ((rc = to_json(b, r, depth + 1, d)))
                return rc;
        }
        faid_tb_puts(b, "}");
        return 0;
    }
    }
    return faid_fail(d, FAID_EFORMAT, "reply: unknown type");
}

/* ---- errors to problems ---------------------------------------------------------------------- */

/* The option or request key an error message names: the first option of the table (or writer
 * key) that it quotes. */
static void key_of(const char *msg, char *key, size_t cap)
{
    key[0] = '\0';
    /* the writer's keys first: their messages may quote writer.root */
    if (strncmp(msg, "writer: directory", 17) == 0) {
        snprintf(key, cap, "directory");
        return;
    }
    if (strncmp(msg, "writer: prefix", 14) == 0) {
        snprintf(key, cap, "prefix");
        return;
    }
    size_t n;
    const faid_option *opts = faid_config_options(&n);
    const char *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = opts[i].name;
        size_t len = strlen(name);
        for (const char *p = strstr(msg, name); p; p = strstr(p + 1, name)) {
            char after = p[len];
            char before = p == msg ? ' ' : p[-1];
            if ((after == ':' || after == ' ' || after == '\0' || after == '\'') &&
                (before == ' ' || before == '\'' || before == '(' || before == ':')) {
                /* the earliest mention; the longest name at one place (peaks.x over peaks) */
                if (!best || p < best || (p == best && len > best_len)) {
                    best = p;
                    best_len = len;
                }
                break;
            }
        }
    }
    if (best) {
        snprintf(key, cap, "%.*s", (int)best_len, best);
        return;
    }
    if (strstr(msg, "\"path\"") || strstr(msg, "reload /"))
        snprintf(key, cap, "path");
}

static unsigned status_of(int code)
{
    switch (code) {
    case FAID_EAUTH:
        return 403;
    case FAID_EFORMAT:
    case FAID_ETRUNC:
        return 400;
    case FAID_ENOMEM:
        return 500;
    case FAID_ESTOPPED:
        return 503;
    default:
        return 422;
    }
}

static void fail_answer(faid_rest_answer *a, const faid_diag *d, const char *key)
{
    char k[128];
    if (key)
        snprintf(k, sizeof k, "%s", key);
    else
        key_of(d->msg, k, sizeof k);
    faid_rest_problem_answer(a, status_of(d->code), d->msg, k);
}

/* ---- control ----------------------------------------------------------------------------------
 */

/* Sends q through the control handler (under ctl_mu) and answers its reply as JSON. */
static void control(faid_server *s, const faid_ctl_request *q, faid_rest_answer *a)
{
    uint8_t req[2048];
    size_t len = 0;
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_proto_encode_request(q, req, sizeof req, &len, &d)) {
        fail_answer(a, &d, NULL);
        return;
    }
    uint8_t *reply = malloc(REPLY_CAP);
    if (!reply) {
        faid_rest_problem_answer(a, 500, "out of memory", NULL);
        return;
    }
    faid_mpw w;
    faid_mpw_init(&w, reply, REPLY_CAP);
    int stop = 0, closed;
    pthread_mutex_lock(&s->ctl_mu);
    closed = s->ctl_closed;
    if (!closed)
        faid_control_handle(s, req, len, &w, &stop);
    pthread_mutex_unlock(&s->ctl_mu);
    if (closed) {
        free(reply);
        faid_rest_problem_answer(a, 503, "starting or stopping: control is not served now", NULL);
        return;
    }
    a->stop = stop;
    if (w.overflow) {
        free(reply);
        faid_rest_problem_answer(a, 500, "reply too large", NULL);
        return;
    }
    faid_mp_obj ok, err, code;
    if (faid_proto_map_find(reply, w.len, FAID_K_OK, &ok, NULL, &d) == 0 &&
        ok.type == FAID_MP_BOOL && !ok.b) {
        faid_diag e;
        faid_diag_clear(&e);
        e.code = FAID_EINVAL;
        if (faid_proto_map_find(reply, w.len, FAID_K_ERROR, &err, NULL, &d) == 0)
            faid_mp_to_cstr(&err, e.msg, sizeof e.msg);
        char cname[32] = "";
        if (faid_proto_map_find(reply, w.len, FAID_K_CODE, &code, NULL, &d) == 0 &&
            faid_mp_to_cstr(&code, cname, sizeof cname) == 0)
            for (int c = 1; c < FAID_NCODES; c++)
                if (strcmp(faid_errname(-c), cname) == 0)
                    e.code = -c;
        free(reply);
        faid_log_ratelimited(&rl_ctl, FAID_LOG_INFO, "http", "REST %s refused: %s",
                             faid_ctl_cmd_name(q->cmd), e.msg);
        fail_answer(a, &e, NULL);
        return;
    }
    faid_textbuf b = {0};
    faid_mpr r;
    faid_mpr_init(&r, reply, w.len);
    faid_diag_clear(&d);
    int rc = to_json(&b, &r, 0, &d);
    free(reply);
    size_t n = 0;
    char *text = faid_tb_take(&b, &n);
    if (rc) {
        free(text);
        fail_answer(a, &d, NULL);
        return;
    }
    json_answer(a, text, n);
}

/* ---- routes -------------------------------------------------------------------------------------
 */

static void route_devices(faid_server *s, faid_rest_answer *a)
{
    faid_ctl_request q = {.cmd = FAID_CTL_STATUS};
    faid_rest_answer st = {0};
    control(s, &q, &st);
    if (st.status != 200) {
        *a = st;
        return;
    }
    json_error_t je;
    json_t *doc = json_loadb(st.body, st.len, 0, &je);
    free(st.body);
    json_t *devs = doc ? json_object_get(doc, "devices") : NULL;
    json_t *out = devs ? json_pack("{s:O}", "devices", devs) : NULL;
    char *text = out ? json_dumps(out, JSON_PRESERVE_ORDER) : NULL;
    json_decref(out);
    json_decref(doc);
    json_answer(a, text, text ? strlen(text) : 0);
}

static void route_aggregates(faid_server *s, faid_rest_answer *a)
{
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    faid_diag d;
    faid_diag_clear(&d);
    if (!s->aggr || faid_aggr_encode_peek(s->aggr, &buf, &cap, &len, &d) || len == 0) {
        free(buf);
        char *t = strdup("{\"available\":false}");
        json_answer(a, t, t ? strlen(t) : 0);
        return;
    }
    faid_textbuf b = {0};
    faid_tb_puts(&b, "{\"available\":true,");
    faid_mpr r;
    faid_mpr_init(&r, buf, len);
    faid_textbuf inner = {0};
    int rc = to_json(&inner, &r, 0, &d);
    free(buf);
    size_t n = 0;
    char *text = faid_tb_take(&inner, &n);
    if (rc || !text || n < 2 || text[0] != '{') {
        free(text);
        faid_tb_take(&b, &n);
        faid_rest_problem_answer(a, 500, rc ? d.msg : "out of memory", NULL);
        return;
    }
    faid_tb_puts(&b, text + 1); /* the message's own keys follow */
    free(text);
    char *out = faid_tb_take(&b, &n);
    json_answer(a, out, n);
}

static void route_config_get(faid_server *s, faid_rest_answer *a)
{
    faid_gen *g = faid_server_current_gen(s);
    json_t *o =
        json_pack("{s:s,s:s,s:s}", "yaml", g ? g->config_yaml : "", "source",
                  g ? g->setup->cfg.source : "", "config_hash", g ? g->setup->config_hash : "");
    faid_gen_release(&g);
    char *text = o ? json_dumps(o, JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    json_answer(a, text, text ? strlen(text) : 0);
}

static int ctype_is(const char *ctype, const char *want)
{
    if (!ctype)
        return 0;
    size_t n = strlen(want);
    return strncasecmp(ctype, want, n) == 0 &&
           (ctype[n] == '\0' || ctype[n] == ';' || ctype[n] == ' ');
}

static void route_config_put(faid_server *s, const faid_rest_call *c, faid_rest_answer *a)
{
    int is_json = ctype_is(c->ctype, "application/json");
    int is_yaml = ctype_is(c->ctype, "application/yaml") || ctype_is(c->ctype, "text/yaml") ||
                  ctype_is(c->ctype, "application/x-yaml");
    if (!is_json && !is_yaml) {
        faid_rest_problem_answer(
            a, 415, "PUT /api/v1/config takes application/yaml or application/json", NULL);
        return;
    }
    faid_diag d;
    faid_diag_clear(&d);
    if (is_json) {
        json_error_t je;
        json_t *o = json_loadb(c->body ? c->body : "", c->body_len, JSON_REJECT_DUPLICATES, &je);
        if (!o || !json_is_object(o)) {
            json_decref(o);
            char msg[300];
            snprintf(msg, sizeof msg, "the body is not a JSON object: %s (line %d, column %d)",
                     o ? "another JSON value" : je.text, je.line, je.column);
            faid_rest_problem_answer(a, 400, msg, NULL);
            return;
        }
        json_t *path = json_object_get(o, "path");
        if (path && json_object_size(o) == 1) {
            const char *p = json_string_value(path);
            faid_ctl_request q = {.cmd = FAID_CTL_RELOAD};
            if (!p || !*p || strlen(p) >= sizeof q.path) {
                json_decref(o);
                faid_rest_problem_answer(a, 422, "\"path\" must be a non-empty string that fits",
                                         "path");
                return;
            }
            snprintf(q.path, sizeof q.path, "%s", p);
            json_decref(o);
            control(s, &q, a);
            return;
        }
        json_decref(o);
        /* any other object is the configuration itself: JSON is YAML's flow style */
    }
    uint64_t version = 0;
    int closed, rc = 0;
    pthread_mutex_lock(&s->ctl_mu);
    closed = s->ctl_closed;
    if (!closed)
        rc = faid_server_reload_text(s, c->body ? c->body : "", c->body_len, &version, &d);
    pthread_mutex_unlock(&s->ctl_mu);
    if (closed) {
        faid_rest_problem_answer(a, 503, "starting or stopping: control is not served now", NULL);
        return;
    }
    if (rc) {
        faid_log_ratelimited(&rl_ctl, FAID_LOG_WARN, "http", "%s (the current setup stays)", d.msg);
        fail_answer(a, &d, NULL);
        return;
    }
    json_t *o =
        json_pack("{s:b,s:s,s:I}", "ok", 1, "cmd", "reload", "setup_version", (json_int_t)version);
    char *text = o ? json_dumps(o, JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    json_answer(a, text, text ? strlen(text) : 0);
}

static void route_writer_put(faid_server *s, const faid_rest_call *c, faid_rest_answer *a)
{
    if (!ctype_is(c->ctype, "application/json")) {
        faid_rest_problem_answer(a, 415, "PUT /api/v1/writer takes application/json", NULL);
        return;
    }
    json_error_t je;
    json_t *o = json_loadb(c->body ? c->body : "", c->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        faid_rest_problem_answer(a, 400, "the body is not a JSON object", NULL);
        return;
    }
    faid_ctl_request q = {.cmd = FAID_CTL_WRITER};
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        char *dst = NULL;
        size_t cap = 0;
        if (strcmp(k, "directory") == 0) {
            dst = q.directory;
            cap = sizeof q.directory;
            q.has_directory = 1;
        } else if (strcmp(k, "prefix") == 0) {
            dst = q.prefix;
            cap = sizeof q.prefix;
            q.has_prefix = 1;
        } else {
            char msg[200];
            snprintf(msg, sizeof msg, "unknown key '%.64s' (directory, prefix)", k);
            json_decref(o);
            faid_rest_problem_answer(a, 422, msg, "");
            return;
        }
        const char *str = json_string_value(v);
        if (!str || strlen(str) >= cap) {
            char msg[200];
            snprintf(msg, sizeof msg, "\"%s\" must be a string of at most %zu bytes", k, cap - 1);
            faid_rest_problem_answer(a, 422, msg, k);
            json_decref(o);
            return;
        }
        snprintf(dst, cap, "%s", str);
    }
    json_decref(o);
    control(s, &q, a);
}

void faid_rest_handle(faid_server *s, const faid_rest_call *c, faid_rest_answer *a)
{
    memset(a, 0, sizeof *a);
    if (c->route < 0 || c->route >= FAID_NROUTES) {
        faid_rest_problem_answer(a, 404, "no such route", NULL);
        return;
    }
    const faid_rest_route *rt = &faid_rest_routes[c->route];
    /* Tokens: state-changing routes from everyone, the others from peers beyond localhost. */
    if (rt->needs_token || !c->loopback) {
        if (!c->tokens) {
            faid_rest_problem_answer(a, 403,
                                     rt->needs_token
                                         ? "no http.token_file: the routes that change state "
                                           "are off (docs/control.md)"
                                         : "only this host may read without a token",
                                     NULL);
            return;
        }
        char name[80];
        if (faid_rest_tokens_check(c->tokens, c->auth, name, sizeof name) < 0) {
            faid_log_ratelimited(&rl_auth, FAID_LOG_WARN, "http", "%s %s: %s bearer token refused",
                                 rt->method, rt->path, c->auth ? "a wrong" : "no");
            faid_rest_problem_answer(a, 401,
                                     c->auth ? "the bearer token is not one of http.token_file"
                                             : "this route needs Authorization: Bearer <token>",
                                     NULL);
            a->challenge = 1;
            return;
        }
        if (rt->needs_token)
            FAID_DEBUG("http", "%s %s by token '%s'", rt->method, rt->path, name);
    }
    if (c->route == FAID_ROUTE_OPENAPI) {
        size_t n = 0;
        char *text = faid_rest_openapi_json(&n);
        json_answer(a, text, n);
        return;
    }
    if (!s) {
        faid_rest_problem_answer(a, 503, "starting: the reduction setup is being built", NULL);
        return;
    }
    if (c->body_too_big) {
        char msg[96];
        snprintf(msg, sizeof msg, "the body passed %u bytes", FAID_REST_MAX_BODY);
        faid_rest_problem_answer(a, 413, msg, NULL);
        return;
    }
    switch ((faid_route_id)c->route) {
    case FAID_ROUTE_STATUS:
        control(s, &(faid_ctl_request){.cmd = FAID_CTL_STATUS}, a);
        return;
    case FAID_ROUTE_DEVICES:
        route_devices(s, a);
        return;
    case FAID_ROUTE_AGGREGATES:
        route_aggregates(s, a);
        return;
    case FAID_ROUTE_CONFIG_GET:
        route_config_get(s, a);
        return;
    case FAID_ROUTE_CONFIG_PUT:
        route_config_put(s, c, a);
        return;
    case FAID_ROUTE_RESET:
        control(s, &(faid_ctl_request){.cmd = FAID_CTL_RESET}, a);
        return;
    case FAID_ROUTE_STOP:
        control(s, &(faid_ctl_request){.cmd = FAID_CTL_STOP}, a);
        return;
    case FAID_ROUTE_WRITER_GET:
        control(s, &(faid_ctl_request){.cmd = FAID_CTL_WRITER}, a);
        return;
    case FAID_ROUTE_WRITER_PUT:
        route_writer_put(s, c, a);
        return;
    default:
        faid_rest_problem_answer(a, 404, "no such route", NULL);
        return;
    }
}
