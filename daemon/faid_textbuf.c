/* faid_textbuf: growable text buffer (see faid_textbuf.h). */
#include "faid_textbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(faid_textbuf *b, size_t need)
{
    if (b->oom)
        return -1;
    if (b->n + need + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + need + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void faid_tb_printf(faid_textbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    va_list aq;
    va_copy(aq, ap);
    int k = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    if (k < 0 || grow(b, (size_t)k)) {
        b->oom = 1;
        va_end(ap);
        return;
    }
    if ((size_t)k < sizeof small)
        memcpy(b->p + b->n, small, (size_t)k + 1);
    else
        vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    b->n += (size_t)k;
    va_end(ap);
}

void faid_tb_puts(faid_textbuf *b, const char *s)
{
    size_t k = strlen(s);
    if (grow(b, k))
        return;
    memcpy(b->p + b->n, s, k + 1);
    b->n += k;
}

void faid_tb_json_str(faid_textbuf *b, const char *s)
{
    faid_tb_puts(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            faid_tb_printf(b, "\\%c", *c);
        else if (*c < 0x20)
            faid_tb_printf(b, "\\u%04x", *c);
        else
            faid_tb_printf(b, "%c", *c);
    }
    faid_tb_puts(b, "\"");
}

void faid_tb_json_num(faid_textbuf *b, double v)
{
    if (isfinite(v))
        faid_tb_printf(b, "%.6g", v);
    else
        faid_tb_puts(b, "null");
}

char *faid_tb_take(faid_textbuf *b, size_t *len)
{
    char *p = b->oom ? NULL : b->p;
    if (b->oom)
        free(b->p);
    else if (!p)
        p = calloc(1, 1);
    if (len)
        *len = p ? b->n : 0;
    memset(b, 0, sizeof(*b));
    return p;
}
