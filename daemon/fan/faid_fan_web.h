/* faid_fan_web: the dashboard's files (daemon/web/) as faid-fan embeds them. The build writes
 * generated/faid_fan_web.c with cmake/embed_web_run.cmake from the same folder as the server's
 * (no copy of the files): the table faid_web_files[] of {name, bytes, length}, ending with a NULL
 * name. faid-fan may not include the server's faid_web.h (cmake/check_layers.cmake), hence this
 * header of its own with the layout the script writes. */
#ifndef FAID_FAN_WEB_H
#define FAID_FAN_WEB_H

#include <stddef.h>

typedef struct faid_web_file {
    const char *name; /* "index.html", "faid.js", ... */
    const char *data;
    size_t len;
} faid_web_file;

extern const faid_web_file faid_web_files[]; /* ends with a NULL name */

#endif
