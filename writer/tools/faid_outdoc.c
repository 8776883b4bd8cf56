/* faid-outdoc: writes (or checks) the layout tables of docs/output-files.md from the layout
 * tables of the file modules (writer/faid_layout.h: faid_sfile_layout, faid_nxmx_file_layout),
 * as faid-protodoc does for the protocol keys. Each file's table sits between the lines
 *   <!-- layout:NAME:begin (generated from the layout tables of writer/: faid-outdoc) -->
 *   <!-- layout:NAME:end -->
 * `--write FILE` regenerates every block in place; `--check FILE` exits 1 naming each block that
 * differs or is missing (the ctest docs.output_files); `--print NAME` prints one table. */
#include "faid_layout.h"
#include "faid_nxmx.h"
#include "faid_sfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct doc_file {
    const char *marker;
    const faid_layout *layout;
} doc_file;

static const doc_file files[] = {
    {"series", &faid_sfile_layout},
    {"hits", &faid_nxmx_file_layout},
};
#define NFILES (sizeof files / sizeof files[0])

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static int put(buf *b, const char *s, int cell)
{
    for (; *s; s++) {
        if (b->len + 3 > b->cap) {
            size_t nc = b->cap ? 2 * b->cap : 4096;
            char *np = realloc(b->p, nc);
            if (!np)
                return -1;
            b->p = np;
            b->cap = nc;
        }
        if (cell && *s == '|')
            b->p[b->len++] = '\\';
        b->p[b->len++] = *s;
    }
    b->p[b->len] = 0;
    return 0;
}

/* The Markdown table of one layout (a path in backquotes, an empty cell as "").*/
static char *table(const faid_layout *l)
{
    buf b = {0};
    int bad = put(&b, "| path | kind | type | shape | units | written | meaning |\n", 0) ||
              put(&b, "|---|---|---|---|---|---|---|\n", 0);
    for (size_t i = 0; i < l->nrows && !bad; i++) {
        const faid_layout_row *r = &l->rows[i];
        const char *cells[] = {r->kind, r->type, r->shape, r->units, r->when, r->meaning};
        bad |= put(&b, "| `", 0) || put(&b, r->path, 1) || put(&b, "` |", 0);
        for (size_t k = 0; k < sizeof cells / sizeof cells[0] && !bad; k++)
            bad |= put(&b, " ", 0) || put(&b, cells[k] ? cells[k] : "", 1) || put(&b, " |", 0);
        bad |= put(&b, "\n", 0);
    }
    if (bad) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
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
        b[n] = 0;
    *len = n;
    return b;
}

/* Replaces (or compares) one block in *doc: 0 equal, 1 replaced, -1 markers missing. */
static int do_block(char **doc, const doc_file *df)
{
    char begin[96], end[96];
    snprintf(begin, sizeof begin, "<!-- layout:%s:begin", df->marker);
    snprintf(end, sizeof end, "<!-- layout:%s:end -->", df->marker);
    char *b = strstr(*doc, begin);
    char *e = b ? strstr(b, end) : NULL;
    char *nl = b ? strchr(b, '\n') : NULL;
    if (!b || !e || !nl || nl > e)
        return -1;
    char *t = table(df->layout);
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

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--print") == 0) {
        for (size_t i = 0; i < NFILES; i++)
            if (strcmp(files[i].marker, argv[2]) == 0) {
                char *t = table(files[i].layout);
                if (!t)
                    return 1;
                fputs(t, stdout);
                free(t);
                return 0;
            }
        fprintf(stderr, "faid-outdoc: no file %s\n", argv[2]);
        return 2;
    }
    if (argc != 3 || (strcmp(argv[1], "--write") != 0 && strcmp(argv[1], "--check") != 0)) {
        fprintf(stderr, "usage: faid-outdoc --write|--check docs/output-files.md | --print NAME\n");
        return 2;
    }
    int write = strcmp(argv[1], "--write") == 0;
    size_t len;
    char *doc = read_all(argv[2], &len);
    if (!doc) {
        fprintf(stderr, "faid-outdoc: %s: cannot read\n", argv[2]);
        return 2;
    }
    int bad = 0;
    for (size_t i = 0; i < NFILES; i++) {
        int r = do_block(&doc, &files[i]);
        if (r < 0) {
            fprintf(stderr, "faid-outdoc: %s: markers of layout:%s missing\n", argv[2],
                    files[i].marker);
            bad = 1;
        } else if (r > 0 && !write) {
            fprintf(stderr,
                    "faid-outdoc: %s: the %s table differs from the layout table (regenerate: "
                    "cmake --build build --target output-doc)\n",
                    argv[2], files[i].layout->name);
            bad = 1;
        }
    }
    if (write && !bad) {
        FILE *f = fopen(argv[2], "wb");
        if (!f || fputs(doc, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "faid-outdoc: %s: cannot write\n", argv[2]);
            bad = 1;
        }
    }
    free(doc);
    return bad;
}
