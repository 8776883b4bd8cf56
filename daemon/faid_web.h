/* faid_web: the dashboard's static files (daemon/web/), embedded at build time into the
 * generated faid_web.c by cmake/embed_web_run.cmake. */
#ifndef FAID_WEB_H
#define FAID_WEB_H

#include <stddef.h>

typedef struct faid_web_file {
    const char *name; /* "index.html", "faid.js", ... */
    const char *data;
    size_t len;
} faid_web_file;

extern const faid_web_file faid_web_files[]; /* ends with a NULL name */

#endif
