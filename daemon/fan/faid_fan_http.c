/* faid_fan_http: see faid_fan_http.h. */
#include "faid_fan_http.h"

#include "faid_config.h"
#include "faid_fan_web.h"
#include "faid_log.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONN 16

struct faid_fan_http {
    struct MHD_Daemon *mhd;
    pthread_mutex_t mu;
    char *text;
    size_t len;
    char *api; /* the JSON of GET /api/v1/fan */
    size_t api_len;
};

static const faid_web_file *web_file(const char *name)
{
    for (const faid_web_file *w = faid_web_files; w->name; w++)
        if (strcmp(w->name, name) == 0)
            return w;
    return NULL;
}

static const char *web_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot && strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (dot && strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    return "text/html; charset=utf-8";
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned code, const char *type,
                              const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    /* the headers of faid's own server: everything the dashboard uses comes from here */
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    /* how the dashboard's script, served by faid and faid-fan alike, tells it is on the fan-out
     * (it asks healthz, which both answer, and reads this header) */
    MHD_add_response_header(r, "X-Faid-Role", "fan-out");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    faid_fan_http *h = cls;
    if (!*state) { /* first call: headers only */
        *state = h;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    static const char text_type[] = "text/plain; version=0.0.4; charset=utf-8";
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9);
    if (strcmp(url, "/healthz") == 0)
        return answer(c, MHD_HTTP_OK, "text/plain", "ok\n", 3);
    const faid_web_file *w = web_file(strcmp(url, "/") == 0 ? "index.html"
                                      : url[0] == '/'       ? url + 1
                                                            : url);
    if (w)
        return answer(c, MHD_HTTP_OK, web_type(w->name), w->data, w->len);
    int metrics = strcmp(url, "/metrics") == 0;
    if (!metrics && strcmp(url, "/api/v1/fan") != 0)
        return answer(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n", 10);
    pthread_mutex_lock(&h->mu);
    enum MHD_Result ret = metrics
                              ? answer(c, MHD_HTTP_OK, text_type, h->text ? h->text : "", h->len)
                              : answer(c, MHD_HTTP_OK, "application/json", h->api ? h->api : "{}",
                                       h->api ? h->api_len : 2);
    pthread_mutex_unlock(&h->mu);
    return ret;
}

faid_fan_http *faid_fan_http_start(const char *endpoint, faid_diag *d)
{
    char host[256];
    int port = 0;
    if (faid_config_split_hostport(endpoint, host, sizeof host, &port, d)) {
        faid_diag_prefix(d, "fan.http_endpoint: ");
        return NULL;
    }
    faid_fan_http *h = calloc(1, sizeof(*h));
    if (!h) {
        faid_fail(d, FAID_ENOMEM, "out of memory for the HTTP server");
        return NULL;
    }
    pthread_mutex_init(&h->mu, NULL);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        faid_fail(d, FAID_ECONFIG, "fan.http_endpoint '%s': '%s' is not an IPv4 address", endpoint,
                  host);
        faid_fan_http_stop(&h);
        return NULL;
    }
    h->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD,
                              (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, &sa,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONN,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    if (!h->mhd) {
        faid_fail(d, FAID_EIO, "fan.http_endpoint '%s': cannot listen", endpoint);
        faid_fan_http_stop(&h);
        return NULL;
    }
    FAID_INFO("fan", "dashboard http://%s/, metrics /metrics", endpoint);
    return h;
}

void faid_fan_http_set(faid_fan_http *h, const char *text, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, text, len);
    copy[len] = 0;
    pthread_mutex_lock(&h->mu);
    free(h->text);
    h->text = copy;
    h->len = len;
    pthread_mutex_unlock(&h->mu);
}

void faid_fan_http_set_api(faid_fan_http *h, const char *json, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, json, len);
    copy[len] = 0;
    pthread_mutex_lock(&h->mu);
    free(h->api);
    h->api = copy;
    h->api_len = len;
    pthread_mutex_unlock(&h->mu);
}

void faid_fan_http_stop(faid_fan_http **ph)
{
    faid_fan_http *h = *ph;
    if (!h)
        return;
    if (h->mhd)
        MHD_stop_daemon(h->mhd);
    free(h->text);
    free(h->api);
    pthread_mutex_destroy(&h->mu);
    free(h);
    *ph = NULL;
}
