/* faid_layout: the one table of what every file faid writes holds. Each file module (the series
 * file, the hits file) describes its groups, datasets and attributes as rows of this type, writes
 * its file by walking those rows (or at least names its paths from them), and the generated page
 * docs/output-files.md is printed from the same rows, so the files and their documentation cannot
 * drift apart: a test reads real files back and checks every row against them.
 *
 * Row fields, all static strings:
 *   path     HDF5 path from the file root, "/entry/data/I"; an attribute is "path@name"
 *   kind     "group" | "dataset" | "attribute" | "link"
 *   type     "NXentry" for a group, an element type for data ("float32", "uint64", "string"),
 *            the target path for a link
 *   shape    "scalar", "[frames, bins]", "[frames, max_peaks]", ...
 *   units    "" when none
 *   when     the condition under which the row is written ("always", "peaks on", "writer.cake")
 *   meaning  one line for the documentation */
#ifndef FAID_LAYOUT_H
#define FAID_LAYOUT_H

#include <stddef.h>

typedef struct faid_layout_row {
    const char *path;
    const char *kind;
    const char *type;
    const char *shape;
    const char *units;
    const char *when;
    const char *meaning;
} faid_layout_row;

/* One file kind: its name in the docs ("series file"), how its name is formed, and its rows. */
typedef struct faid_layout {
    const char *name;
    const char *file_name;
    const char *summary;
    const faid_layout_row *rows;
    size_t nrows;
} faid_layout;

#endif
