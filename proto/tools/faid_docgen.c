/* faid_docgen: the shared skeleton of faid-protodoc and faid-outdoc (faid_docgen.h). */
#include "faid_docgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(b, 2 * cap + 1);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b)
        b[n] = '\0';
    return b;
}

/* Replaces (or compares) block i in *doc: 0 equal, 1 differed (replaced), -1 markers missing or
 * out of memory. */
static int do_block(const faid_docgen *g, char **doc, int i)
{
    char begin[160], end[160];
    snprintf(begin, sizeof begin, "<!-- %s:%s:begin", g->kind, g->name(i));
    snprintf(end, sizeof end, "<!-- %s:%s:end -->", g->kind, g->name(i));
    char *b = strstr(*doc, begin);
    char *e = b ? strstr(b, end) : NULL;
    char *nl = b ? strchr(b, '\n') : NULL;
    if (!b || !e || !nl || nl > e)
        return -1;
    char *t = g->table(i);
    if (!t)
        return -1;
    const char *body = nl + 1;
    size_t old = (size_t)(e - body), tl = strlen(t);
    int same = old == tl && memcmp(body, t, tl) == 0;
    if (!same) {
        size_t head = (size_t)(body - *doc), tail = strlen(e);
        char *nd = malloc(head + tl + tail + 1);
        if (nd) {
            memcpy(nd, *doc, head);
            memcpy(nd + head, t, tl);
            memcpy(nd + head + tl, e, tail + 1);
            free(*doc);
            *doc = nd;
        }
    }
    free(t);
    return same ? 0 : 1;
}

int faid_docgen_main(const faid_docgen *g, int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--print") == 0) {
        for (int i = 0; i < g->n; i++)
            if (strcmp(g->name(i), argv[2]) == 0) {
                char *t = g->table(i);
                fputs(t ? t : "", stdout);
                free(t);
                return t ? 0 : 1;
            }
        fprintf(stderr, "%s: no table \"%s\"\n", g->tool, argv[2]);
        return 2;
    }
    int write = argc == 3 && strcmp(argv[1], "--write") == 0;
    if (argc != 3 || (!write && strcmp(argv[1], "--check") != 0)) {
        fprintf(stderr, "usage: %s --write|--check %s | --print NAME\n", g->tool, g->file);
        return 2;
    }
    char *doc = read_all(argv[2]);
    if (!doc) {
        fprintf(stderr, "%s: cannot read %s\n", g->tool, argv[2]);
        return 2;
    }
    int missing = 0, changed = 0;
    for (int i = 0; i < g->n; i++) {
        int rc = do_block(g, &doc, i);
        if (rc < 0) {
            fprintf(stderr, "%s: %s: no <!-- %s:%s:begin/end --> block\n", g->tool, argv[2],
                    g->kind, g->name(i));
            missing = 1;
        } else if (rc > 0) {
            changed = 1;
            if (!write)
                fprintf(stderr,
                        "%s: %s: the %s:%s table differs from %s: regenerate with `cmake --build "
                        "build --target %s`\n",
                        g->tool, argv[2], g->kind, g->name(i), g->source, g->target);
        }
    }
    int rc = missing || (!write && changed) ? 1 : 0;
    if (write && changed && !missing) {
        FILE *f = fopen(argv[2], "wb");
        if (!f || fputs(doc, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "%s: cannot write %s\n", g->tool, argv[2]);
            rc = 2;
        }
    }
    free(doc);
    return rc;
}
