/* faid_rest_api: the REST control API's wire side (docs/control.md), with no server in it so that
 * tests, fuzzers and the daemon share it:
 *   - the route table FAID_REST_ROUTES: method, path, whether a bearer token is needed, the
 *     OpenAPI summary, request and response schemas. The daemon's handlers (daemon/faid_rest.c)
 *     are indexed by it and GET /api/v1/openapi.json is generated from it
 *     (faid_rest_openapi_json), so the document cannot list a route the server lacks;
 *   - the route matcher (faid_rest_route_match) and the bearer-token file parser and check
 *     (faid_rest_tokens_*), the parsers of peer bytes that are faid's own (the JSON bodies go
 *     through jansson; fuzzed by tests/fuzz/fuzz_http.c);
 *   - RFC 9457 problem documents (faid_rest_problem). */
#ifndef FAID_REST_API_H
#define FAID_REST_API_H

#include "faid_err.h"

#include <stddef.h>

#define FAID_REST_PREFIX "/api/v1"

/* X(ID, "METHOD", "path", needs_token, "summary", "request schema" or NULL, "response schema",
 * "response content type"). A route whose needs_token is 1 changes state: it needs
 * `Authorization: Bearer <token>` from http.token_file from every peer; the others need one only
 * from peers beyond localhost. */
/* clang-format off */
#define FAID_REST_ROUTES(X)                                                                        \
    X(STATUS, "GET", "/api/v1/status", 0,                                                          \
      "The control socket's status (same keys)", NULL, "Status", "application/json")              \
    X(DEVICES, "GET", "/api/v1/devices", 0,                                                        \
      "The devices reducing frames and their counters", NULL, "Devices", "application/json")       \
    X(AGGREGATES, "GET", "/api/v1/aggregates", 0,                                                  \
      "Hit rate, peak-count histogram and virtual powder (arrays as lists with their shape)",      \
      NULL, "Aggregates", "application/json")                                                      \
    X(CONFIG_GET, "GET", "/api/v1/config", 0,                                                      \
      "The configuration in force (YAML), its file and hash", NULL, "Config", "application/json") \
    X(CONFIG_PUT, "PUT", "/api/v1/config", 1,                                                      \
      "Reload: a configuration given whole (YAML or JSON) or {\"path\": file}, as control reload", \
      "ConfigBody", "Reloaded", "application/json")                                                \
    X(RESET, "POST", "/api/v1/reset", 1,                                                           \
      "Reset the counters and aggregates, as control reset", NULL, "Done", "application/json")     \
    X(STOP, "POST", "/api/v1/stop", 1,                                                             \
      "Stop: finish the frames in flight, publish end, exit, as control stop", NULL, "Done",       \
      "application/json")                                                                          \
    X(WRITER_GET, "GET", "/api/v1/writer", 0,                                                      \
      "The writer's target for the next series", NULL, "Writer", "application/json")               \
    X(WRITER_PUT, "PUT", "/api/v1/writer", 1,                                                      \
      "Set the writer's directory and file prefix for the next series, as control writer",        \
      "WriterTarget", "Writer", "application/json")                                                \
    X(OPENAPI, "GET", "/api/v1/openapi.json", 0,                                                   \
      "This document (OpenAPI 3.0)", NULL, "OpenAPI", "application/json")
/* clang-format on */

typedef enum {
#define FAID_REST_ENUM(id, m, p, tok, sum, req, resp, type) FAID_ROUTE_##id,
    FAID_REST_ROUTES(FAID_REST_ENUM)
#undef FAID_REST_ENUM
        FAID_NROUTES
} faid_route_id;

typedef struct faid_rest_route {
    const char *method, *path;
    int needs_token;
    const char *summary, *request_schema, *response_schema, *response_type;
} faid_rest_route;

extern const faid_rest_route faid_rest_routes[FAID_NROUTES];

/* The route for method and path (path_len bytes, no query string): its id; -1 when no route has
 * that path (404), -2 when the path exists with other methods only (405; *allow gets them, e.g.
 * "GET, PUT", when allow is not NULL). Bytes after a NUL or past path_len never match. */
int faid_rest_route_match(const char *method, const char *path, size_t path_len, char *allow,
                          size_t allow_cap);

/* Bearer tokens (http.token_file): one per line, `token` or `name:token`; blank lines and lines
 * starting with '#' skipped; leading and trailing blanks trimmed. A token is 16 to 256 bytes of
 * visible ASCII (no blank, no ':'), a name at most 64 such bytes; at most 1024 tokens. Any other
 * line is an error naming the file (what) and the line number, never echoing the token. */
#define FAID_TOKEN_MIN 16
#define FAID_TOKEN_MAX 256
typedef struct faid_rest_tokens faid_rest_tokens;
int faid_rest_tokens_parse(const char *text, size_t len, const char *what, faid_rest_tokens **out,
                           faid_diag *d);
/* Reads path (a regular file, mode 0600 or stricter: a token is a secret) and parses it. */
int faid_rest_tokens_load(const char *path, faid_rest_tokens **out, faid_diag *d);
size_t faid_rest_tokens_count(const faid_rest_tokens *t);
/* The Authorization header value ("Bearer <token>", scheme case-insensitive): the index of the
 * token it carries, -1 when none matches or the header is malformed. Compared in constant time
 * against every token (the time depends neither on where a guess differs nor on which token it
 * is). name (when not NULL, cap bytes) gets the token's name, "" for an unnamed one. */
int faid_rest_tokens_check(const faid_rest_tokens *t, const char *auth, char *name, size_t cap);
void faid_rest_tokens_destroy(faid_rest_tokens **t);

/* The OpenAPI 3.0 document of the route table (NUL-terminated JSON, malloc'd; NULL on ENOMEM). */
char *faid_rest_openapi_json(size_t *len);

/* An RFC 9457 problem document: {"type", "title", "status", "detail", "key"} (key omitted when
 * NULL or empty). malloc'd, NUL-terminated; NULL on ENOMEM. */
char *faid_rest_problem(unsigned status, const char *title, const char *detail, const char *key,
                        size_t *len);

#endif
