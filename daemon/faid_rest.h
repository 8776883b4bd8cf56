/* faid_rest: the REST control API's handlers (docs/control.md), one per row of the route table
 * (proto/faid_rest_api.h). Each control route sends the control socket's own request
 * (faid_control_handle, under s->ctl_mu so that it takes turns with the ZeroMQ control socket)
 * and answers its reply as JSON with the same keys; an error reply becomes an RFC 9457 problem
 * document naming the faulty key. The HTTP side (faid_http.c) reads the request, its body (at
 * most FAID_REST_MAX_BODY bytes) and the peer, and sends what faid_rest_handle answers. */
#ifndef FAID_REST_H
#define FAID_REST_H

#include "faid_rest_api.h"

#include <stddef.h>

#define FAID_REST_MAX_BODY (1u << 20) /* a configuration is a few kB; 1 MiB is ample */

struct faid_server;

typedef struct faid_rest_call {
    int route;         /* faid_route_id, from faid_rest_route_match */
    const char *auth;  /* the Authorization header, or NULL */
    const char *ctype; /* the Content-Type header, or NULL */
    const char *body;  /* the request body (not NUL-terminated), body_len bytes */
    size_t body_len;
    int body_too_big;               /* the body passed FAID_REST_MAX_BODY (then body is NULL) */
    int loopback;                   /* the peer is this host */
    const faid_rest_tokens *tokens; /* NULL: no http.token_file */
} faid_rest_call;

typedef struct faid_rest_answer {
    unsigned status;
    const char *type; /* content type */
    char *body;       /* malloc'd */
    size_t len;
    int challenge; /* 401: send WWW-Authenticate: Bearer */
    int stop;      /* the daemon was asked to stop: the caller tells the main loop */
} faid_rest_answer;

/* s may be NULL (still starting: 503). Never fails: an out-of-memory answer has body NULL. */
void faid_rest_handle(struct faid_server *s, const faid_rest_call *c, faid_rest_answer *a);
/* A problem answer (for the HTTP side's own refusals: 404, 405, 413). */
void faid_rest_problem_answer(faid_rest_answer *a, unsigned status, const char *detail,
                              const char *key);

#endif
