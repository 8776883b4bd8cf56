/* faidctl status | config | reload | reset | stop: one request to the daemon's control socket and
 * its reply, human-readable by default (nested "key: value" lines, the configuration as YAML) or
 * as JSON with --json. A daemon that does not answer within the timeout gives a clear message and
 * exit status 1 instead of a hang. */
#include "faidctl.h"

#include "faid_client.h"
#include "faid_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CONTROL "tcp://127.0.0.1:5557"

static void usage(FILE *f, const char *cmd)
{
    fprintf(f,
            "usage: faidctl %s [--control ENDPOINT] [--timeout S] [--json]%s\n"
            "  --control ENDPOINT  the daemon's control socket (default $FAID_CONTROL or %s)\n"
            "  --timeout S         seconds to wait for the answer (default 5)\n"
            "  --json              print the reply as JSON\n",
            cmd, strcmp(cmd, "reload") == 0 ? " [CONFIG]" : "", DEFAULT_CONTROL);
    if (strcmp(cmd, "reload") == 0)
        fprintf(f, "  CONFIG              read this configuration file instead of the current one\n");
}

static void indent(int n)
{
    for (int i = 0; i < n; i++)
        fputs("  ", stdout);
}

/* Prints a scalar (or a short array of scalars) on the current line; containers of other shapes
 * are left to print_value. Returns 1 when it printed, 0 when o is a container to expand. */
static int print_scalar(const faid_mp_obj *o)
{
    switch (o->type) {
    case FAID_MP_NIL: printf("null"); return 1;
    case FAID_MP_BOOL: printf("%s", o->b ? "true" : "false"); return 1;
    case FAID_MP_UINT: printf("%llu", (unsigned long long)o->u); return 1;
    case FAID_MP_INT: printf("%lld", (long long)o->i); return 1;
    case FAID_MP_FLOAT: printf("%.10g", o->f); return 1;
    case FAID_MP_STR: printf("%.*s", (int)o->len, (const char *)o->ptr); return 1;
    case FAID_MP_BIN: printf("<%u bytes>", o->len); return 1;
    case FAID_MP_EXT: printf("<ext %d, %u bytes>", o->ext_type, o->len); return 1;
    default: return 0;
    }
}

static int print_value(faid_mpr *r, const faid_mp_obj *o, int depth, faid_diag *d);

/* Prints the items of the container whose head is o, one per line at depth. */
static int print_children(faid_mpr *r, const faid_mp_obj *o, int depth, faid_diag *d)
{
    int rc;
    for (uint32_t k = 0; k < o->len; k++) {
        faid_mp_obj key, v;
        indent(depth);
        if (o->type == FAID_MP_MAP) {
            if ((rc = faid_mpr_next(r, &key, d)))
                return rc;
            if (!print_scalar(&key)) {
                printf("?");
                faid_mpr_skip(r, d);
            }
            printf(":");
        } else {
            printf("-");
        }
        if ((rc = faid_mpr_next(r, &v, d)))
            return rc;
        if ((rc = print_value(r, &v, depth + 1, d)))
            return rc;
    }
    return 0;
}

/* Prints the value whose head is o after a "key:" already on the line. */
static int print_value(faid_mpr *r, const faid_mp_obj *o, int depth, faid_diag *d)
{
    if (depth > FAID_MP_MAX_DEPTH)
        return faid_fail(d, FAID_EFORMAT, "reply nested too deeply");
    if (o->type == FAID_MP_STR && memchr(o->ptr, '\n', o->len)) {
        /* Multi-line text (a YAML document): as a block under the key. */
        printf(" |\n");
        const char *p = (const char *)o->ptr, *end = p + o->len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
            indent(depth);
            printf("%.*s\n", (int)n, p);
            p += n + (nl ? 1 : 0);
        }
        return 0;
    }
    if (o->type != FAID_MP_ARRAY && o->type != FAID_MP_MAP) {
        putchar(' ');
        print_scalar(o);
        putchar('\n');
        return 0;
    }
    if (o->len == 0) {
        printf(" %s\n", o->type == FAID_MP_MAP ? "{}" : "[]");
        return 0;
    }
    /* Arrays of scalars fit on one line: peek at the items first. */
    if (o->type == FAID_MP_ARRAY) {
        faid_mpr peek = *r;
        int flat = 1;
        for (uint32_t k = 0; k < o->len && flat; k++) {
            faid_mp_obj it;
            if (faid_mpr_next(&peek, &it, NULL) || it.type == FAID_MP_ARRAY ||
                it.type == FAID_MP_MAP)
                flat = 0;
        }
        if (flat) {
            printf(" [");
            for (uint32_t k = 0; k < o->len; k++) {
                faid_mp_obj it;
                int rc = faid_mpr_next(r, &it, d);
                if (rc)
                    return rc;
                if (k < 16) {
                    printf(k ? ", " : "");
                    print_scalar(&it);
                } else if (k == 16) {
                    printf(", ... (%u items)", o->len);
                }
            }
            printf("]\n");
            return 0;
        }
    }
    putchar('\n');
    return print_children(r, o, depth, d);
}

/* The human form of a reply: every key but the bookkeeping ones ("ok", "cmd"), nested. */
static int print_human(const faid_ctl_reply *rep, faid_diag *d)
{
    faid_mpr r;
    faid_mp_obj o;
    faid_mpr_init(&r, rep->body, rep->len);
    int rc = faid_mpr_next(&r, &o, d);
    if (rc)
        return rc;
    if (o.type != FAID_MP_MAP)
        return faid_fail(d, FAID_EPROTO, "reply is not a map");
    int printed = 0;
    for (uint32_t k = 0; k < o.len; k++) {
        faid_mp_obj key, v;
        if ((rc = faid_mpr_next(&r, &key, d)))
            return rc;
        if (faid_mp_str_eq(&key, FAID_K_OK) || faid_mp_str_eq(&key, FAID_K_CMD) ||
            faid_mp_str_eq(&key, FAID_K_TYPE)) {
            if ((rc = faid_mpr_skip(&r, d)))
                return rc;
            continue;
        }
        if ((rc = faid_mpr_next(&r, &v, d)))
            return rc;
        /* The configuration is YAML already: print it as it is. */
        if (faid_mp_str_eq(&key, FAID_K_CONFIG) && v.type == FAID_MP_STR) {
            printf("%.*s", (int)v.len, (const char *)v.ptr);
            if (v.len && v.ptr[v.len - 1] != '\n')
                putchar('\n');
            printed = 1;
            continue;
        }
        if (!print_scalar(&key))
            printf("?");
        printf(":");
        if ((rc = print_value(&r, &v, 1, d)))
            return rc;
        printed = 1;
    }
    if (!printed)
        printf("ok\n");
    return 0;
}

int faidctl_control(int argc, char **argv)
{
    const char *cmd = argv[0];
    const char *endpoint = getenv("FAID_CONTROL");
    if (!endpoint || !*endpoint)
        endpoint = DEFAULT_CONTROL;
    double timeout = 5.0;
    int json = 0;
    faid_ctl_request q;
    memset(&q, 0, sizeof(q));
    q.cmd = faid_ctl_cmd_parse(cmd, strlen(cmd));
    if (q.cmd == FAID_CTL_INVALID) {
        fprintf(stderr, "faidctl: unknown control command '%s'\n", cmd);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout, cmd);
            return 0;
        } else if (strcmp(a, "--control") == 0 && i + 1 < argc) {
            endpoint = argv[++i];
        } else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
            char *end;
            timeout = strtod(argv[++i], &end);
            if (*end || !(timeout > 0 && timeout < 86400)) {
                fprintf(stderr, "faidctl %s: --timeout needs seconds > 0, got '%s'\n", cmd,
                        argv[i]);
                return 2;
            }
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (q.cmd == FAID_CTL_RELOAD && a[0] != '-' && !q.path[0]) {
            if (strlen(a) >= sizeof(q.path)) {
                fprintf(stderr, "faidctl reload: path too long: %s\n", a);
                return 2;
            }
            snprintf(q.path, sizeof(q.path), "%s", a);
        } else {
            fprintf(stderr, "faidctl %s: unknown or incomplete option '%s'\n", cmd, a);
            usage(stderr, cmd);
            return 2;
        }
    }

    faid_diag d;
    faid_diag_clear(&d);
    faid_ctl *c = faid_ctl_new(endpoint, (int)(timeout * 1000 + 0.5), &d);
    if (!c) {
        fprintf(stderr, "faidctl %s: %s\n", cmd, d.msg);
        return 1;
    }
    faid_ctl_reply rep;
    int rc = faid_ctl_call(c, &q, &rep, &d);
    int status = 0;
    if (rc) {
        fprintf(stderr, "faidctl %s: %s\n", cmd, d.msg);
        status = 1;
    } else if (json) {
        size_t cap = 64 * 1024 + 8 * rep.len;
        char *out = malloc(cap);
        if (!out || faid_mp_to_json(rep.body, rep.len, out, cap, 64, &d) != 0) {
            fprintf(stderr, "faidctl %s: cannot render the reply as JSON: %s\n", cmd,
                    out ? d.msg : "out of memory");
            status = 1;
        } else {
            printf("%s\n", out);
        }
        free(out);
        if (!rep.ok)
            status = 1;
    } else if (!rep.ok) {
        fprintf(stderr, "faidctl %s: faid at %s refused: %s\n", cmd, endpoint, rep.error);
        status = 1;
    } else if (print_human(&rep, &d) != 0) {
        fprintf(stderr, "faidctl %s: malformed reply from %s: %s\n", cmd, endpoint, d.msg);
        status = 1;
    }
    faid_ctl_destroy(&c);
    return status;
}
