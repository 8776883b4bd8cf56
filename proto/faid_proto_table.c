/* faid_proto_table: the key table of faid_proto_keys.h as data: its rows, key lookup by name (the
 * decoders switch on the faid_key it returns), the markdown tables of PROTOCOL.md and a checker
 * that a message carries exactly what its table rows say. */
#include "faid_proto.h"

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

static int row_of(faid_proto_msg m, faid_key k)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i].msg == m && rows[i].key == k)
            return (int)i;
    return -1;
}

int faid_proto_check_keys(faid_proto_msg m, faid_proto_msg also, const void *buf, size_t len,
                          faid_diag *d)
{
    faid_mpr r;
    faid_mp_obj o;
    faid_mpr_init(&r, buf, len);
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EFORMAT, "%s: not a map", faid_proto_msg_marker(m));
    unsigned char seen[FAID_NKEYS] = {0};
    for (uint32_t i = 0; i < o.len; i++) {
        faid_mp_obj k;
        if ((rc = faid_mpr_next(&r, &k, d)))
            return rc;
        if (k.type != FAID_MP_STR && k.type != FAID_MP_BIN)
            return faid_fail(d, FAID_EFORMAT, "%s: key %u is not a string",
                             faid_proto_msg_marker(m), i);
        faid_key key = faid_key_lookup(k.ptr, k.len);
        if (key == FAID_KEY_UNKNOWN ||
            (row_of(m, key) < 0 && (also == FAID_NPMSGS || row_of(also, key) < 0)))
            return faid_fail(d, FAID_EFORMAT, "%s: key \"%.*s\" is not in the key table",
                             faid_proto_msg_marker(m), (int)k.len, (const char *)k.ptr);
        if (seen[key])
            return faid_fail(d, FAID_EFORMAT, "%s: key \"%s\" twice", faid_proto_msg_marker(m),
                             key_names[key]);
        seen[key] = 1;
        if ((rc = faid_mpr_skip(&r, d)))
            return rc;
    }
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if ((rows[i].msg == m || rows[i].msg == also) && rows[i].presence == FAID_KP_REQ &&
            !seen[rows[i].key])
            return faid_fail(d, FAID_EFORMAT, "%s: required key \"%s\" missing",
                             faid_proto_msg_marker(rows[i].msg), key_names[rows[i].key]);
    return 0;
}
