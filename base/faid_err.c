/* faid_err: names and texts of the error codes, and the diagnostic message helpers. */
#include "faid_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *faid_errname(int code)
{
    switch (code) {
#define FAID_ERR_NAME(name, value, text)                                                           \
    case value:                                                                                    \
        return #name;
        FAID_ERRORS(FAID_ERR_NAME)
#undef FAID_ERR_NAME
    }
    return "FAID_EUNKNOWN";
}

const char *faid_strerror(int code)
{
    switch (code) {
#define FAID_ERR_TEXT(name, value, text)                                                           \
    case value:                                                                                    \
        return text;
        FAID_ERRORS(FAID_ERR_TEXT)
#undef FAID_ERR_TEXT
    }
    return "unknown error";
}

int faid_fail(faid_diag *d, int code, const char *fmt, ...)
{
    if (d) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
        d->code = code;
    }
    return code;
}

void faid_diag_prefix(faid_diag *d, const char *fmt, ...)
{
    if (!d)
        return;
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    char old[sizeof d->msg];
    memcpy(old, d->msg, sizeof old);
    size_t n = strlen(head);
    if (n >= sizeof d->msg)
        n = sizeof d->msg - 1;
    memcpy(d->msg, head, n);
    size_t m = strlen(old);
    if (m > sizeof d->msg - 1 - n)
        m = sizeof d->msg - 1 - n;
    memcpy(d->msg + n, old, m);
    d->msg[n + m] = '\0';
}

void faid_diag_clear(faid_diag *d)
{
    if (d) {
        d->code = 0;
        d->msg[0] = '\0';
    }
}
