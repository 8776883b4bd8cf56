/* The REST API's wire side (faid_rest_api): the token file parser keeps names and tokens and
 * refuses short, long, spaced and doubled-colon lines naming the line (never the token), the
 * bearer check accepts exactly the tokens of the file (scheme case-insensitive, blanks around),
 * the route matcher tells 404 from 405 with the methods allowed, and the OpenAPI document and
 * problem documents are JSON that holds what the table says. */
#include "faid_rest_api.h"
#include "faid_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    faid_rest_tokens *t = NULL;
    faid_diag d;
    const char *file =
        "# operators\n\n  bluesky:0123456789abcdef0123  \r\nplain-token-abcdefghij\n";
    CHECK(faid_rest_tokens_parse(file, strlen(file), "f", &t, &d) == 0 &&
          faid_rest_tokens_count(t) == 2);
    char name[80];
    CHECK(faid_rest_tokens_check(t, "Bearer 0123456789abcdef0123", name, sizeof name) == 0 &&
          strcmp(name, "bluesky") == 0);
    CHECK(faid_rest_tokens_check(t, "bearer\t plain-token-abcdefghij ", name, sizeof name) == 1 &&
          name[0] == '\0');
    CHECK(faid_rest_tokens_check(t, "Bearer 0123456789abcdef012", NULL, 0) == -1);
    CHECK(faid_rest_tokens_check(t, "Bearer 0123456789abcdef01234", NULL, 0) == -1);
    CHECK(faid_rest_tokens_check(t, "Basic 0123456789abcdef0123", NULL, 0) == -1);
    CHECK(faid_rest_tokens_check(t, "Bearer", NULL, 0) == -1);
    CHECK(faid_rest_tokens_check(t, "Bearer bluesky:0123456789abcdef0123", NULL, 0) == -1);
    CHECK(faid_rest_tokens_check(t, NULL, NULL, 0) == -1);
    CHECK(faid_rest_tokens_check(NULL, "Bearer 0123456789abcdef0123", NULL, 0) == -1);
    faid_rest_tokens_destroy(&t);
    CHECK(t == NULL);
    const char *bad[] = {"ok:0123456789abcdef0123\nshorty\n", "a:b:0123456789abcdef0123\n",
                         "has space 0123456789abcdef\n", "# nothing\n\n"};
    const char *why[] = {"f: line 2: a token of 6 bytes", "f: line 1: more than one ':'",
                         "f: line 1: a byte that is not visible", "f: no token"};
    for (int i = 0; i < 4; i++) {
        faid_diag_clear(&d);
        CHECK(faid_rest_tokens_parse(bad[i], strlen(bad[i]), "f", &t, &d) != 0 && t == NULL &&
              strstr(d.msg, why[i]) && !strstr(d.msg, "shorty"));
    }
    char allow[64];
    CHECK(faid_rest_route_match("GET", "/api/v1/status", 14, allow, sizeof allow) ==
          FAID_ROUTE_STATUS);
    CHECK(faid_rest_route_match("HEAD", "/api/v1/status", 14, allow, sizeof allow) ==
          FAID_ROUTE_STATUS);
    CHECK(faid_rest_route_match("PUT", "/api/v1/writer", 14, allow, sizeof allow) ==
          FAID_ROUTE_WRITER_PUT);
    CHECK(faid_rest_route_match("DELETE", "/api/v1/writer", 14, allow, sizeof allow) == -2 &&
          strcmp(allow, "GET, PUT") == 0);
    CHECK(faid_rest_route_match("GET", "/api/v1/status/", 15, allow, sizeof allow) == -1);
    CHECK(faid_rest_route_match("GET", "/api/v1/stat", 12, allow, sizeof allow) == -1);

    size_t n = 0;
    char *text = faid_rest_openapi_json(&n);
    json_error_t je;
    json_t *doc = text ? json_loadb(text, n, 0, &je) : NULL;
    CHECK(doc && strcmp(json_string_value(json_object_get(doc, "openapi")), "3.0.3") == 0);
    json_t *paths = json_object_get(doc, "paths");
    for (int i = 0; i < FAID_NROUTES; i++) {
        const faid_rest_route *r = &faid_rest_routes[i];
        char m[8] = "";
        for (size_t k = 0; r->method[k] && k < 7; k++)
            m[k] = (char)(r->method[k] - 'A' + 'a');
        json_t *op = json_object_get(json_object_get(paths, r->path), m);
        CHECK(op && strcmp(json_string_value(json_object_get(op, "summary")), r->summary) == 0);
    }
    json_decref(doc);
    free(text);
    text = faid_rest_problem(422, "Unprocessable Content", "bad \xff byte", "integration.npt", &n);
    doc = text ? json_loadb(text, n, 0, &je) : NULL;
    CHECK(doc && json_integer_value(json_object_get(doc, "status")) == 422 &&
          strcmp(json_string_value(json_object_get(doc, "key")), "integration.npt") == 0 &&
          strcmp(json_string_value(json_object_get(doc, "detail")), "bad ? byte") == 0);
    json_decref(doc);
    free(text);
    return faid_test_finish();
}
