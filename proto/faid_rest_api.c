/* faid_rest_api: route table, matcher, bearer tokens, OpenAPI document, problem documents (see
 * faid_rest_api.h). */
#include "faid_rest_api.h"

#include "faid_file.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const faid_rest_route faid_rest_routes[FAID_NROUTES] = {
#define FAID_REST_ROW(id, m, p, tok, sum, req, resp, type) {m, p, tok, sum, req, resp, type},
    FAID_REST_ROUTES(FAID_REST_ROW)
#undef FAID_REST_ROW
};

/* ---- matcher ----------------------------------------------------------------------------------
 */

int faid_rest_route_match(const char *method, const char *path, size_t path_len, char *allow,
                          size_t allow_cap)
{
    int found = 0;
    size_t used = 0;
    if (allow && allow_cap)
        allow[0] = '\0';
    for (int i = 0; i < FAID_NROUTES; i++) {
        const faid_rest_route *r = &faid_rest_routes[i];
        size_t n = strlen(r->path);
        if (n != path_len || memcmp(r->path, path, n) != 0)
            continue;
        if (strcmp(r->method, method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(r->method, "GET") == 0))
            return i;
        found = 1;
        if (allow && used < allow_cap) {
            int w = snprintf(allow + used, allow_cap - used, "%s%s", used ? ", " : "", r->method);
            used = w < 0 ? allow_cap : used + (size_t)w;
        }
    }
    return found ? -2 : -1;
}

/* ---- bearer tokens ------------------------------------------------------------------------------
 */

#define MAX_TOKENS   1024
#define NAME_MAX_LEN 64

typedef struct token {
    char name[NAME_MAX_LEN + 1];
    char tok[FAID_TOKEN_MAX + 1];
    size_t len;
} token;

struct faid_rest_tokens {
    size_t n;
    token t[];
};

static int visible(unsigned char c)
{
    return c > ' ' && c < 127;
}

int faid_rest_tokens_parse(const char *text, size_t len, const char *what, faid_rest_tokens **out,
                           faid_diag *d)
{
    *out = NULL;
    /* counted first, so the table is sized by what the file holds (at most MAX_TOKENS) */
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    size_t cap = lines < MAX_TOKENS ? lines : MAX_TOKENS;
    faid_rest_tokens *t = calloc(1, sizeof *t + cap * sizeof(token));
    if (!t)
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory", what);
    size_t pos = 0, lineno = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        size_t a = pos, b = end;
        pos = end + 1;
        while (a < b && (text[a] == ' ' || text[a] == '\t'))
            a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
            b--;
        if (a == b || text[a] == '#')
            continue;
        size_t colon = b;
        for (size_t k = a; k < b; k++) {
            if (!visible((unsigned char)text[k])) {
                faid_rest_tokens_destroy(&t);
                return faid_fail(d, FAID_EFORMAT,
                                 "%s: line %zu: a byte that is not visible ASCII (0x%02x) at "
                                 "column %zu",
                                 what, lineno, (unsigned)(unsigned char)text[k], k - a + 1);
            }
            if (text[k] == ':' && colon == b)
                colon = k;
        }
        size_t na = a, nb = colon < b ? colon : a; /* name [na, nb) */
        size_t ta = colon < b ? colon + 1 : a;     /* token [ta, b) */
        if (nb - na > NAME_MAX_LEN) {
            faid_rest_tokens_destroy(&t);
            return faid_fail(d, FAID_EFORMAT, "%s: line %zu: name longer than %d bytes", what,
                             lineno, NAME_MAX_LEN);
        }
        if (memchr(text + ta, ':', b - ta)) {
            faid_rest_tokens_destroy(&t);
            return faid_fail(d, FAID_EFORMAT, "%s: line %zu: more than one ':' (name:token)", what,
                             lineno);
        }
        if (b - ta < FAID_TOKEN_MIN || b - ta > FAID_TOKEN_MAX) {
            faid_rest_tokens_destroy(&t);
            return faid_fail(d, FAID_EFORMAT,
                             "%s: line %zu: a token of %zu bytes (%d to %d are accepted)", what,
                             lineno, b - ta, FAID_TOKEN_MIN, FAID_TOKEN_MAX);
        }
        if (t->n == cap) {
            faid_rest_tokens_destroy(&t);
            return faid_fail(d, FAID_ESIZE, "%s: more than %d tokens", what, MAX_TOKENS);
        }
        token *k = &t->t[t->n++];
        memcpy(k->name, text + na, nb - na);
        k->name[nb - na] = '\0';
        memcpy(k->tok, text + ta, b - ta);
        k->tok[b - ta] = '\0';
        k->len = b - ta;
    }
    if (!t->n) {
        faid_rest_tokens_destroy(&t);
        return faid_fail(d, FAID_EFORMAT, "%s: no token in it", what);
    }
    *out = t;
    return 0;
}

int faid_rest_tokens_load(const char *path, faid_rest_tokens **out, faid_diag *d)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && (sb.st_mode & 077))
        return faid_fail(d, FAID_EAUTH,
                         "http.token_file %s: a token file must be readable by its owner only "
                         "(mode %03o; chmod 600 it)",
                         path, (unsigned)(sb.st_mode & 0777));
    uint8_t *bytes = NULL;
    size_t n = 0;
    int rc = faid_file_read_max(path, (size_t)1 << 20, &bytes, &n, d);
    if (rc) {
        faid_diag_prefix(d, "http.token_file: ");
        return rc;
    }
    char what[512];
    snprintf(what, sizeof what, "http.token_file %s", path);
    rc = faid_rest_tokens_parse((const char *)bytes, n, what, out, d);
    free(bytes);
    return rc;
}

size_t faid_rest_tokens_count(const faid_rest_tokens *t)
{
    return t ? t->n : 0;
}

/* Equal in time that depends only on FAID_TOKEN_MAX: every byte of the buffer is compared. */
static int ct_equal(const token *k, const char *s, size_t n)
{
    unsigned diff = (unsigned)(k->len ^ n);
    for (size_t i = 0; i < FAID_TOKEN_MAX; i++) {
        unsigned char a = (unsigned char)k->tok[i < k->len ? i : 0];
        unsigned char b = (unsigned char)(i < n ? s[i] : 0);
        diff |= (unsigned)(i < k->len) & (unsigned)(a ^ b);
        diff |= (unsigned)(i < n && i >= k->len);
    }
    return diff == 0;
}

int faid_rest_tokens_check(const faid_rest_tokens *t, const char *auth, char *name, size_t cap)
{
    if (name && cap)
        name[0] = '\0';
    if (!t || !auth)
        return -1;
    if (strncasecmp(auth, "Bearer", 6) != 0 || (auth[6] != ' ' && auth[6] != '\t'))
        return -1;
    const char *s = auth + 7;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strnlen(s, FAID_TOKEN_MAX + 1);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n == 0 || n > FAID_TOKEN_MAX)
        return -1;
    int found = -1;
    for (size_t i = 0; i < t->n; i++) {
        int eq = ct_equal(&t->t[i], s, n);
        /* no early exit: every token is compared */
        found = eq && found < 0 ? (int)i : found;
    }
    if (found >= 0 && name && cap)
        snprintf(name, cap, "%s", t->t[found].name);
    return found;
}

void faid_rest_tokens_destroy(faid_rest_tokens **pt)
{
    faid_rest_tokens *t = *pt;
    if (!t)
        return;
    /* the secrets do not outlive the table */
    volatile unsigned char *p = (volatile unsigned char *)t->t;
    for (size_t i = 0; i < t->n * sizeof(token); i++)
        p[i] = 0;
    free(t);
    *pt = NULL;
}

/* ---- OpenAPI -----------------------------------------------------------------------------------
 */

/* The schemas the routes name (JSON Schema as OpenAPI 3.0 takes it). Loose where the body is
 * large (status: the keys of proto/PROTOCOL.md's status tables), exact where a client sends. */
static const struct {
    const char *name, *json;
} schemas[] = {
    {"Problem",
     "{\"type\":\"object\",\"required\":[\"type\",\"title\",\"status\",\"detail\"],"
     "\"properties\":{\"type\":{\"type\":\"string\"},\"title\":{\"type\":\"string\"},"
     "\"status\":{\"type\":\"integer\"},\"detail\":{\"type\":\"string\"},"
     "\"key\":{\"type\":\"string\",\"description\":\"the faulty key or option, when there is "
     "one\"}}}"},
    {"Status",
     "{\"type\":\"object\",\"description\":\"the control socket's status reply: the keys of "
     "proto/PROTOCOL.md's status tables\",\"required\":[\"ok\",\"cmd\",\"state\",\"series_id\","
     "\"counters\",\"devices\"],\"properties\":{\"ok\":{\"type\":\"boolean\"},"
     "\"cmd\":{\"type\":\"string\"},\"state\":{\"type\":\"string\",\"enum\":[\"idle\","
     "\"running\",\"stopping\"]},\"series_id\":{\"type\":\"integer\"},"
     "\"counters\":{\"type\":\"object\"},\"devices\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"object\"}}}}"},
    {"Devices",
     "{\"type\":\"object\",\"required\":[\"devices\"],\"properties\":{\"devices\":{\"type\":"
     "\"array\",\"items\":{\"type\":\"object\",\"required\":[\"name\",\"processed\",\"failed\"],"
     "\"properties\":{\"name\":{\"type\":\"string\"},\"spec\":{\"type\":\"string\"},"
     "\"processed\":{\"type\":\"integer\"},\"failed\":{\"type\":\"integer\"},\"busy\":{\"type\":"
     "\"number\"}}}}}}"},
    {"Array",
     "{\"type\":\"object\",\"description\":\"an array: its values as a flat list (row-major) "
     "and its shape\",\"required\":[\"dtype\",\"shape\",\"data\"],\"properties\":{\"dtype\":"
     "{\"type\":\"string\"},\"shape\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
     "\"data\":{\"type\":\"array\",\"items\":{\"type\":\"number\",\"nullable\":true}}}}"},
    {"Aggregates",
     "{\"type\":\"object\",\"description\":\"the aggregates message (proto/PROTOCOL.md) with its "
     "arrays as Array; empty ({\\\"available\\\": false}) before any frame with peaks\","
     "\"required\":[\"available\"],\"properties\":{\"available\":{\"type\":\"boolean\"},"
     "\"hit_rate\":{\"type\":\"number\"}},\"additionalProperties\":{\"anyOf\":[{\"$ref\":"
     "\"#/components/schemas/Array\"},{}]}}"},
    {"Config",
     "{\"type\":\"object\",\"required\":[\"yaml\",\"source\",\"config_hash\"],\"properties\":"
     "{\"yaml\":{\"type\":\"string\"},\"source\":{\"type\":\"string\"},\"config_hash\":{\"type\":"
     "\"string\"}}}"},
    {"ConfigBody",
     "{\"type\":\"object\",\"description\":\"{\\\"path\\\": file} reads that file once (as "
     "control reload PATH); any other object is the configuration itself\",\"properties\":"
     "{\"path\":{\"type\":\"string\"}}}"},
    {"Reloaded",
     "{\"type\":\"object\",\"required\":[\"ok\",\"cmd\",\"setup_version\"],\"properties\":"
     "{\"ok\":{\"type\":\"boolean\"},\"cmd\":{\"type\":\"string\"},\"setup_version\":"
     "{\"type\":\"integer\"}}}"},
    {"Done", "{\"type\":\"object\",\"required\":[\"ok\",\"cmd\"],\"properties\":{\"ok\":{\"type\":"
             "\"boolean\"},\"cmd\":{\"type\":\"string\"}}}"},
    {"Writer",
     "{\"type\":\"object\",\"required\":[\"ok\",\"cmd\",\"directory\",\"prefix\"],\"properties\":"
     "{\"ok\":{\"type\":\"boolean\"},\"cmd\":{\"type\":\"string\"},\"directory\":{\"type\":"
     "\"string\"},\"prefix\":{\"type\":\"string\"}}}"},
    {"WriterTarget",
     "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{\"directory\":"
     "{\"type\":\"string\",\"description\":\"absolute; inside writer.root when set; \\\"\\\": "
     "back to writer.directory\"},\"prefix\":{\"type\":\"string\",\"maxLength\":63,"
     "\"pattern\":\"^([A-Za-z0-9_][A-Za-z0-9_.-]*)?$\"}}}"},
    {"OpenAPI", "{\"type\":\"object\",\"required\":[\"openapi\",\"paths\"]}"},
};

static json_t *ref(const char *name)
{
    char buf[128];
    snprintf(buf, sizeof buf, "#/components/schemas/%s", name);
    return json_pack("{s:s}", "$ref", buf);
}

static json_t *problem_response(const char *why)
{
    return json_pack("{s:s,s:{s:{s:o}}}", "description", why, "content", "application/problem+json",
                     "schema", ref("Problem"));
}

static json_t *operation(const faid_rest_route *r, int id)
{
    json_t *op = json_object(), *resp = json_object();
    if (!op || !resp) {
        json_decref(op);
        json_decref(resp);
        return NULL;
    }
    char opid[64];
    snprintf(opid, sizeof opid, "%s", r->path + strlen(FAID_REST_PREFIX) + 1);
    for (char *c = opid; *c; c++)
        if (*c == '.' || *c == '/')
            *c = '_';
    char full[96];
    snprintf(full, sizeof full, "%s_%s", r->method, opid);
    for (char *c = full; *c && c < full + 4; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    json_object_set_new(op, "operationId", json_string(full));
    json_object_set_new(op, "summary", json_string(r->summary));
    json_object_set_new(op, "tags", json_pack("[s]", r->needs_token ? "control" : "read"));
    json_object_set_new(op, "security",
                        r->needs_token ? json_pack("[{s:[]}]", "bearer")
                                       : json_pack("[{},{s:[]}]", "bearer"));
    if (r->request_schema) {
        json_t *content =
            json_pack("{s:{s:o}}", "application/json", "schema", ref(r->request_schema));
        if (id == FAID_ROUTE_CONFIG_PUT)
            json_object_set_new(content, "application/yaml",
                                json_pack("{s:{s:s}}", "schema", "type", "string"));
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b,s:o}", "required", 1, "content", content));
        json_object_set_new(resp, "400", problem_response("malformed body (not JSON, not YAML)"));
        json_object_set_new(resp, "413", problem_response("body larger than 1 MiB"));
        json_object_set_new(resp, "415",
                            problem_response("a content type the route does not take"));
        json_object_set_new(resp, "422", problem_response("refused; `key` names the faulty key"));
    }
    json_object_set_new(resp, "200",
                        json_pack("{s:s,s:{s:{s:o}}}", "description", "done", "content",
                                  r->response_type, "schema", ref(r->response_schema)));
    json_object_set_new(resp, "401",
                        problem_response(r->needs_token
                                             ? "no token, or not one of http.token_file"
                                             : "a peer beyond localhost without a token"));
    if (r->needs_token)
        json_object_set_new(resp, "403", problem_response("no http.token_file: control is off"));
    json_object_set_new(resp, "503", problem_response("starting or stopping"));
    json_object_set_new(op, "responses", resp);
    return op;
}

char *faid_rest_openapi_json(size_t *len)
{
    json_t *doc = json_pack(
        "{s:s,s:{s:s,s:s,s:s},s:{},s:{s:{},s:{s:{s:s,s:s}}}}", "openapi", "3.0.3", "info", "title",
        "faid REST control API", "version", FAID_REST_PREFIX + 5, "description",
        "faid's control over HTTP (docs/control.md): the same requests as the ZeroMQ control "
        "socket, JSON in and out, errors as RFC 9457 problem documents.",
        "paths", "components", "schemas", "securitySchemes", "bearer", "type", "http", "scheme",
        "bearer");
    if (!doc)
        return NULL;
    json_t *paths = json_object_get(doc, "paths");
    json_t *sch = json_object_get(json_object_get(doc, "components"), "schemas");
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
        json_t *s = json_loads(schemas[i].json, 0, NULL);
        if (!s) {
            json_decref(doc);
            return NULL;
        }
        json_object_set_new(sch, schemas[i].name, s);
    }
    for (int i = 0; i < FAID_NROUTES; i++) {
        const faid_rest_route *r = &faid_rest_routes[i];
        json_t *item = json_object_get(paths, r->path);
        if (!item) {
            item = json_object();
            json_object_set_new(paths, r->path, item);
        }
        char m[8];
        size_t k = 0;
        for (; r->method[k] && k < sizeof m - 1; k++)
            m[k] = (char)(r->method[k] - 'A' + 'a');
        m[k] = '\0';
        json_object_set_new(item, m, operation(r, i));
    }
    char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (text && len)
        *len = strlen(text);
    return text;
}

/* ---- problems -----------------------------------------------------------------------------------
 */

char *faid_rest_problem(unsigned status, const char *title, const char *detail, const char *key,
                        size_t *len)
{
    /* A detail may quote what a peer sent: bytes beyond ASCII become '?' so that it stays
     * valid JSON text. */
    char safe[1024], skey[128];
    size_t n = 0;
    for (const char *c = detail ? detail : ""; *c && n < sizeof safe - 1; c++)
        safe[n++] = (unsigned char)*c < 127 && (unsigned char)*c >= ' ' ? *c : '?';
    safe[n] = '\0';
    n = 0;
    for (const char *c = key ? key : ""; *c && n < sizeof skey - 1; c++)
        skey[n++] = (unsigned char)*c < 127 && (unsigned char)*c >= ' ' ? *c : '?';
    skey[n] = '\0';
    /* "about:blank": the title is the status phrase (RFC 9457 4.2.1) */
    json_t *p = json_pack("{s:s,s:s,s:i,s:s}", "type", "about:blank", "title", title, "status",
                          (int)status, "detail", safe);
    if (!p)
        return NULL;
    if (skey[0])
        json_object_set_new(p, "key", json_string(skey));
    char *text = json_dumps(p, JSON_PRESERVE_ORDER);
    json_decref(p);
    if (text && len)
        *len = strlen(text);
    return text;
}
