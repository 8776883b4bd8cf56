/* faid-outdoc: writes (or checks) the layout tables of docs/output-files.md from the layout
 * tables of the file modules (writer/faid_layout.h: faid_sfile_layout, faid_nxmx_file_layout),
 * as faid-protodoc does for the protocol keys. Each file's table sits between the lines
 *   <!-- layout:NAME:begin (generated from the layout tables of writer/: faid-outdoc) -->
 *   <!-- layout:NAME:end -->
 * `--write FILE` regenerates every block in place; `--check FILE` exits 1 naming each block that
 * differs or is missing (the ctest docs.output_files); `--print NAME` prints one table
 * (faid_docgen.h). */
#include "faid_docgen.h"
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

static const char *name(int i)
{
    return files[i].marker;
}

static char *layout_table(int i)
{
    return table(files[i].layout);
}

int main(int argc, char **argv)
{
    const faid_docgen g = {.tool = "faid-outdoc",
                           .kind = "layout",
                           .file = "docs/output-files.md",
                           .source = "the layout tables of writer/",
                           .target = "output-doc",
                           .n = (int)NFILES,
                           .name = name,
                           .table = layout_table};
    return faid_docgen_main(&g, argc, argv);
}
