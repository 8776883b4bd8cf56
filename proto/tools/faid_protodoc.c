/* faid-protodoc: writes (or checks) the key tables of proto/PROTOCOL.md from the key table of
 * proto/faid_proto_keys.h. Each message's table sits between the lines
 *   <!-- keys:MARKER:begin (generated from proto/faid_proto_keys.h: edit the table there) -->
 *   <!-- keys:MARKER:end -->
 * `--write FILE` regenerates every block in place; `--check FILE` exits 1 naming each block that
 * differs or is missing (the ctest docs.protocol_keys). `--print MARKER` prints one table. */
#include "faid_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        b[n] = '\0';
    *len = n;
    return b;
}

/* Replaces (or compares) the block of message m in *doc; returns 0 when it was equal, 1 when it
 * differed (and was replaced), -1 when the markers are missing. */
static int do_block(char **doc, faid_proto_msg m)
{
    const char *marker = faid_proto_msg_marker(m);
    char begin[160], end[160];
    snprintf(begin, sizeof begin, "<!-- keys:%s:begin", marker);
    snprintf(end, sizeof end, "<!-- keys:%s:end -->", marker);
    char *b = strstr(*doc, begin);
    char *e = b ? strstr(b, end) : NULL;
    char *nl = b ? strchr(b, '\n') : NULL;
    if (!b || !e || !nl || nl > e)
        return -1;
    char *table = faid_proto_msg_markdown(m);
    if (!table)
        return -1;
    const char *body = nl + 1;
    size_t old = (size_t)(e - body), tl = strlen(table);
    int same = old == tl && memcmp(body, table, tl) == 0;
    if (!same) {
        size_t head = (size_t)(body - *doc), tail = strlen(e);
        char *nd = malloc(head + tl + tail + 1);
        if (nd) {
            memcpy(nd, *doc, head);
            memcpy(nd + head, table, tl);
            memcpy(nd + head + tl, e, tail + 1);
            free(*doc);
            *doc = nd;
        }
    }
    free(table);
    return same ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--print") == 0) {
        for (int m = 0; m < FAID_NPMSGS; m++)
            if (strcmp(faid_proto_msg_marker((faid_proto_msg)m), argv[2]) == 0) {
                char *t = faid_proto_msg_markdown((faid_proto_msg)m);
                fputs(t ? t : "", stdout);
                free(t);
                return t ? 0 : 1;
            }
        fprintf(stderr, "faid-protodoc: no message \"%s\"\n", argv[2]);
        return 2;
    }
    int write = argc == 3 && strcmp(argv[1], "--write") == 0;
    if (argc != 3 || (!write && strcmp(argv[1], "--check") != 0)) {
        fprintf(stderr, "usage: faid-protodoc --write|--check PROTOCOL.md | --print MARKER\n");
        return 2;
    }
    size_t len;
    char *doc = read_all(argv[2], &len);
    if (!doc) {
        fprintf(stderr, "faid-protodoc: cannot read %s\n", argv[2]);
        return 2;
    }
    int bad = 0, changed = 0;
    for (int m = 0; m < FAID_NPMSGS; m++) {
        int rc = do_block(&doc, (faid_proto_msg)m);
        if (rc < 0) {
            fprintf(stderr, "faid-protodoc: %s: no <!-- keys:%s:begin/end --> block\n", argv[2],
                    faid_proto_msg_marker((faid_proto_msg)m));
            bad = 1;
        } else if (rc > 0) {
            changed = 1;
            if (!write)
                fprintf(stderr,
                        "faid-protodoc: %s: the keys:%s table differs from "
                        "proto/faid_proto_keys.h: regenerate with `cmake --build build --target "
                        "protocol-doc`\n",
                        argv[2], faid_proto_msg_marker((faid_proto_msg)m));
        }
    }
    if (write && changed) {
        FILE *f = fopen(argv[2], "wb");
        if (!f || fputs(doc, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "faid-protodoc: cannot write %s\n", argv[2]);
            free(doc);
            return 2;
        }
    }
    free(doc);
    return bad || (!write && changed) ? 1 : 0;
}
