/* faid_fan_http: faid-fan's HTTP server (fan.http_endpoint): GET /metrics answers the last
 * Prometheus text the fan-out's main thread handed over (faid_fan_http_set, twice a second), and
 * GET /api/v1/fan the last JSON of the instances and their summed aggregates
 * (faid_fan_http_set_api, as often), so the server's threads never read the router's state;
 * GET / (index.html), /faid.js, /faid.css the daemon's dashboard files (faid_fan_web.h), which
 * show that JSON when they find it; GET /healthz answers "ok". One thread per
 * connection, at most 16 connections, as faid's own server. */
#ifndef FAID_FAN_HTTP_H
#define FAID_FAN_HTTP_H

#include "faid_err.h"

#include <stddef.h>

typedef struct faid_fan_http faid_fan_http;

/* Listens on endpoint ("host:port"); NULL with d naming the endpoint on failure. */
faid_fan_http *faid_fan_http_start(const char *endpoint, faid_diag *d);
/* Replaces the metrics text (copied). */
void faid_fan_http_set(faid_fan_http *h, const char *text, size_t len);
/* Replaces the JSON of GET /api/v1/fan (copied). */
void faid_fan_http_set_api(faid_fan_http *h, const char *json, size_t len);
void faid_fan_http_stop(faid_fan_http **h);

#endif
