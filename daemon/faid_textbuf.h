/* faid_textbuf: a growable text buffer for the HTTP answers (metrics exposition, dashboard JSON).
 * Out of memory sets oom and later writes do nothing, so writers check once at the end. */
#ifndef FAID_TEXTBUF_H
#define FAID_TEXTBUF_H

#include <stddef.h>

typedef struct faid_textbuf {
    char *p;
    size_t n, cap;
    int oom;
} faid_textbuf;

void faid_tb_printf(faid_textbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void faid_tb_puts(faid_textbuf *b, const char *s);
/* A JSON string literal (quotes included), escaping what JSON requires. */
void faid_tb_json_str(faid_textbuf *b, const char *s);
/* A JSON number, or null when v is not finite (JSON has no NaN). */
void faid_tb_json_num(faid_textbuf *b, double v);
/* Gives the text to the caller (NULL after oom) and empties b. */
char *faid_tb_take(faid_textbuf *b, size_t *len);

#endif
