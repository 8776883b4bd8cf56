/* faid_docgen: the skeleton of faid's doc generators (faid-protodoc: the key tables of
 * proto/PROTOCOL.md; faid-outdoc: the layout tables of docs/output-files.md), which write tables
 * of the code into a Markdown document between marker lines:
 *   <!-- KIND:NAME:begin (any text: says where the table comes from) -->
 *   ...the generated table...
 *   <!-- KIND:NAME:end -->
 * A tool describes its blocks (faid_docgen) and hands main's arguments to faid_docgen_main:
 *   TOOL --write FILE   regenerates every block in place (the file is written only when every
 *                       block's markers are there and some block changed)
 *   TOOL --check FILE   exits 1 naming each block that differs from the code or is missing (the
 *                       ctests docs.protocol_keys and docs.output_files)
 *   TOOL --print NAME   prints one table
 * Exit status: 0 done (or equal), 1 a block differs or is missing, 2 usage or file errors. */
#ifndef FAID_DOCGEN_H
#define FAID_DOCGEN_H

typedef struct faid_docgen {
    const char *tool;   /* "faid-protodoc": messages start with it */
    const char *kind;   /* the markers' KIND: "keys", "layout" */
    const char *file;   /* the document, for the usage line: "proto/PROTOCOL.md" */
    const char *source; /* where the tables come from, for the drift message */
    const char *target; /* the CMake target that regenerates the document */
    int n;              /* blocks 0 .. n-1 */
    const char *(*name)(int i);
    char *(*table)(int i); /* the Markdown of block i (malloc'd; NULL when out of memory) */
} faid_docgen;

int faid_docgen_main(const faid_docgen *g, int argc, char **argv);

#endif
