/* faid_proto_table: the key table of faid_proto_keys.h as data: its rows, key lookup by name (the
 * decoders switch on the faid_key it returns) and the markdown tables of PROTOCOL.md. The checker
 * of a message against its rows reads msgpack and lives with the reader (faid_proto.c). */
#include "faid_proto_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const key_names[FAID_NKEYS] = {[FAID_KEY_UNKNOWN] = "",
#define NAME_ROW(id, name) [FAID_KEY_##id] = name,
                                                  FAID_PROTO_KEY_NAMES(NAME_ROW)
#undef NAME_ROW
};

static const unsigned char key_lens[FAID_NKEYS] = {
#define LEN_ROW(id, name) [FAID_KEY_##id] = sizeof(name) - 1,
    FAID_PROTO_KEY_NAMES(LEN_ROW)
#undef LEN_ROW
};

static const char *const msg_markers[FAID_NPMSGS] = {
#define MSG_ROW(id, marker, title) [FAID_PMSG_##id] = marker,
    FAID_PROTO_MESSAGES(MSG_ROW)
#undef MSG_ROW
};

#define REQ FAID_KP_REQ
#define OPT FAID_KP_OPT
static const faid_proto_row rows[] = {
#define ROW(msg, key, type, presence, meaning)                                                     \
    {FAID_PMSG_##msg, FAID_KEY_##key, type, presence, meaning},
    FAID_PROTO_MSG_KEYS(ROW)
#undef ROW
};
#undef REQ
#undef OPT

const faid_proto_row *faid_proto_rows(size_t *n)
{
    *n = sizeof(rows) / sizeof(rows[0]);
    return rows;
}

const char *faid_key_name(faid_key k)
{
    return k > FAID_KEY_UNKNOWN && k < FAID_NKEYS ? key_names[k] : "";
}

const char *faid_proto_msg_marker(faid_proto_msg m)
{
    return m >= 0 && m < FAID_NPMSGS ? msg_markers[m] : "";
}

faid_key faid_key_lookup(const void *s, size_t n)
{
    for (int k = 1; k < FAID_NKEYS; k++)
        if (key_lens[k] == n && memcmp(key_names[k], s, n) == 0)
            return (faid_key)k;
    return FAID_KEY_UNKNOWN;
}

/* Appends s to the growing buffer; a '|' in a cell is escaped. */
typedef struct md_buf {
    char *p;
    size_t len, cap;
    int oom;
} md_buf;

static void md_put(md_buf *b, const char *s, int cell)
{
    for (; *s; s++) {
        if (b->len + 3 > b->cap) {
            size_t nc = b->cap ? 2 * b->cap : 1024;
            char *np = realloc(b->p, nc);
            if (!np) {
                b->oom = 1;
                return;
            }
            b->p = np;
            b->cap = nc;
        }
        if (cell && *s == '|')
            b->p[b->len++] = '\\';
        b->p[b->len++] = *s;
    }
    b->p[b->len] = '\0';
}

char *faid_proto_msg_markdown(faid_proto_msg m)
{
    md_buf b = {0};
    md_put(&b, "| key | type | presence | meaning |\n|---|---|---|---|\n", 0);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i].msg != m)
            continue;
        md_put(&b, "| `", 0);
        md_put(&b, key_names[rows[i].key], 1);
        md_put(&b, "` | ", 0);
        md_put(&b, rows[i].type, 1);
        md_put(&b, rows[i].presence == FAID_KP_REQ ? " | required | " : " | optional | ", 0);
        md_put(&b, rows[i].meaning, 1);
        md_put(&b, " |\n", 0);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
