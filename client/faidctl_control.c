/* faidctl status | config [get KEY] | reload | reset | stop | writer: one request to the daemon's
 * control socket and its reply, human-readable by default (nested "key: value" lines, the
 * configuration as YAML, one option's value alone) or as JSON with --json. A daemon that does not
 * answer within the timeout gives a clear message and exit status 1 instead of a hang. */
#include "faidctl.h"

#include "faid_client.h"
#include "faid_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#define DEFAULT_CONTROL "tcp://127.0.0.1:5557"

static void usage(FILE *f, const char *cmd)
{
    int reload = strcmp(cmd, "reload") == 0, config = strcmp(cmd, "config") == 0;
    int writer = strcmp(cmd, "writer") == 0;
    fprintf(f,
            "usage: faidctl %s [--control ENDPOINT] [--timeout S] [--json]\n"
            "                  [--server-key FAID.pub --key CLIENT.key]%s\n"
            "  --control ENDPOINT  the daemon's control socket (default $FAID_CONTROL or %s)\n"
            "  --timeout S         seconds to wait for the answer (default 5)\n"
            "  --json              print the reply as JSON\n" FAIDCTL_KEY_USAGE,
            cmd,
            reload   ? " [CONFIG]"
            : config ? " [get KEY]"
            : writer ? " [--directory DIR] [--prefix P]"
                     : "",
            DEFAULT_CONTROL);
    if (reload)
        fprintf(f, "  CONFIG              read this configuration file once instead of the file\n"
                   "                      faid was started with (which SIGHUP keeps re-reading)\n");
    if (config)
        fprintf(f, "  get KEY             print only the effective value of option KEY (e.g.\n"
                   "                      integration.npt), as YAML flow text\n");
    if (writer)
        fprintf(f,
                "  --directory DIR     the next series' folder (\"\": back to writer.directory)\n"
                "  --prefix P          put P before the next series' file names\n"
                "  (neither: print the target in force)\n");
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
    enum { O_CONTROL = 256, O_TIMEOUT, O_JSON, O_DIRECTORY, O_PREFIX };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"control", required_argument, NULL, O_CONTROL},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"json", no_argument, NULL, O_JSON},
        {"directory", required_argument, NULL, O_DIRECTORY},
        {"prefix", required_argument, NULL, O_PREFIX},
        FAIDCTL_KEY_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    faidctl_keys keys = {0};
    int opt, first = 1;
    while ((opt = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        char *end;
        if (faidctl_keys_option(&keys, opt, optarg))
            continue;
        switch (opt) {
        case 'h':
            usage(stdout, cmd);
            return 0;
        case O_CONTROL:
            endpoint = optarg;
            break;
        case O_TIMEOUT:
            timeout = strtod(optarg, &end);
            if (*end || !(timeout > 0 && timeout < 86400)) {
                fprintf(stderr, "faidctl %s: --timeout needs seconds > 0, got '%s'\n", cmd, optarg);
                return 2;
            }
            break;
        case O_JSON:
            json = 1;
            break;
        case O_DIRECTORY:
        case O_PREFIX: {
            int is_dir = opt == O_DIRECTORY;
            char *dst = is_dir ? q.directory : q.prefix;
            size_t cap = is_dir ? sizeof q.directory : sizeof q.prefix;
            if (q.cmd != FAID_CTL_WRITER) {
                fprintf(stderr, "faidctl %s: --%s is for faidctl writer\n", cmd,
                        is_dir ? "directory" : "prefix");
                return 2;
            }
            char abs[PATH_MAX];
            const char *v =
                is_dir && optarg[0] && optarg[0] != '/' && realpath(optarg, abs) ? abs : optarg;
            int n = snprintf(dst, cap, "%s", v);
            if (n < 0 || (size_t)n >= cap) {
                fprintf(stderr, "faidctl writer: --%s too long\n", is_dir ? "directory" : "prefix");
                return 2;
            }
            *(is_dir ? &q.has_directory : &q.has_prefix) = 1;
            break;
        }
        default:
            usage(stderr, cmd);
            return 2;
        }
    }
    int i = optind;
    if (q.cmd == FAID_CTL_CONFIG && i < argc && strcmp(argv[i], "get") == 0) {
        if (i + 1 >= argc) {
            fprintf(stderr, "faidctl config get: needs an option name, e.g. integration.npt\n");
            return 2;
        }
        const char *k = argv[i + 1];
        int n = snprintf(q.key, sizeof(q.key), "%s", k);
        if (n < 0 || (size_t)n >= sizeof(q.key)) {
            fprintf(stderr, "faidctl config get: option name too long: %s\n", k);
            return 2;
        }
        i += 2;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (q.cmd != FAID_CTL_RELOAD || q.path[0]) {
            fprintf(stderr, "faidctl %s: unexpected argument '%s'\n", cmd, a);
            usage(stderr, cmd);
            return 2;
        }
        /* The daemon resolves paths against its own working directory: send the absolute path
         * (as is when it does not resolve, for the daemon's message). */
        char abs[PATH_MAX];
        const char *send = a[0] != '/' && realpath(a, abs) ? abs : a;
        int n = snprintf(q.path, sizeof(q.path), "%s", send);
        if (n < 0 || (size_t)n >= sizeof(q.path)) {
            fprintf(stderr, "faidctl reload: path too long: %s\n", a);
            return 2;
        }
    }

    faid_diag d;
    faid_diag_clear(&d);
    faid_curve_keys ck;
    int krc = faidctl_keys_load(&keys, cmd, &ck);
    if (krc)
        return krc;
    faid_ctl *c = faid_ctl_new_curve(endpoint, (int)(timeout * 1000 + 0.5), &ck, &d);
    memset(&ck, 0, sizeof(ck));
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
    } else if (q.key[0]) {
        faid_mp_obj v;
        if (faid_proto_map_find(rep.body, rep.len, FAID_K_VALUE, &v, NULL, &d) != 0 ||
            v.type != FAID_MP_STR) {
            fprintf(stderr, "faidctl config get: malformed reply from %s: no value\n", endpoint);
            status = 1;
        } else {
            printf("%.*s\n", (int)v.len, (const char *)v.ptr);
        }
    } else if (faid_ctl_reply_print(stdout, rep.body, rep.len, &d) != 0) {
        fprintf(stderr, "faidctl %s: malformed reply from %s: %s\n", cmd, endpoint, d.msg);
        status = 1;
    }
    faid_ctl_destroy(&c);
    return status;
}
