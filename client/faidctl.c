/* faidctl: subcommand dispatch, version and top-level help, and the stop flag that the
 * long-running subcommands share. */
#include "faidctl.h"

#include "faid_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"devices", faidctl_devices, "list OpenCL devices and their indices"},
    {"decode", faidctl_decode, "decode one compressed chunk to .npy"},
    {"process", faidctl_process, "reduce frames from files with the daemon's code path"},
    {"geometry", faidctl_geometry, "per-pixel geometry arrays (2theta, q, chi, ...) to .npy"},
    {"inspect", faidctl_inspect, "decode one input message (any protocol) and show it"},
    {"replay", faidctl_replay, "send frames to a faid instance (stand-in detector)"},
    {"sub", faidctl_sub, "subscribe to results and summarise or save them"},
    {"aggregates", faidctl_aggregates, "sum the aggregates of several instances"},
    {"merge-files", faidctl_merge_files, "one master file over several instances' series files"},
    {"status", faidctl_control, "show the daemon's state and counters"},
    {"config", faidctl_control, "show the daemon's effective configuration"},
    {"reload", faidctl_control, "make the daemon re-read its configuration file"},
    {"reset", faidctl_control, "reset the daemon's aggregate counters"},
    {"stop", faidctl_control, "stop the daemon cleanly"},
    {"writer", faidctl_control,
     "show or set the writer's folder and file prefix of the next series"},
    {"keygen", faidctl_keygen, "write a CURVE key pair NAME.key / NAME.pub"},
};

volatile sig_atomic_t faidctl_stop;

static void on_stop_signal(int sig)
{
    (void)sig;
    faidctl_stop = 1;
}

void faidctl_catch_stop(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int faidctl_getopt(int argc, char **argv, const struct option *longopts, int *first)
{
    /* The short options are derived from the table: an entry whose val is a letter is also -val
     * (with its argument when the long one has one). */
    char shortopts[64] = ":";
    size_t n = 1;
    for (const struct option *o = longopts; o->name && n + 3 < sizeof(shortopts); o++) {
        if (o->flag || o->val <= 0 || o->val > 127 ||
            !((o->val | 32) >= 'a' && (o->val | 32) <= 'z'))
            continue;
        if (strchr(shortopts, o->val))
            continue;
        shortopts[n++] = (char)o->val;
        if (o->has_arg == required_argument)
            shortopts[n++] = ':';
        shortopts[n] = '\0';
    }
    if (*first) {
        optind = 0; /* GNU: full re-initialisation */
        *first = 0;
    }
    opterr = 0;
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    if (c == '?' || c == ':') {
        const char *what = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        char shortname[3] = {'-', (char)optopt, '\0'};
        /* A short option (alone or in a cluster like -qx) is named by its letter. */
        if (optopt > 0 && optopt < 128 && strncmp(what, "--", 2) != 0)
            what = shortname;
        const char *eq = strncmp(what, "--", 2) == 0 ? strchr(what, '=') : NULL;
        if (c == ':')
            fprintf(stderr, "faidctl %s: option '%s' needs a value\n", argv[0], what);
        else if (eq)
            fprintf(stderr, "faidctl %s: option '%.*s' takes no value (or is unknown)\n", argv[0],
                    (int)(eq - what), what);
        else
            fprintf(stderr, "faidctl %s: unknown option '%s'\n", argv[0], what);
        return '?';
    }
    return c;
}

const char *faidctl_optname(const struct option *longopts, int c)
{
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == c)
            return o->name;
    return "?";
}

int faidctl_keys_option(faidctl_keys *k, int c, const char *arg)
{
    if (c == FAIDCTL_O_SERVER_KEY)
        k->server_key = arg;
    else if (c == FAIDCTL_O_KEY)
        k->key = arg;
    else
        return 0;
    return 1;
}

static int from_option(faidctl_from *o, const char *cmd, int c, const char *arg)
{
    char *end = NULL;
    switch (c) {
    case FAIDCTL_O_FROM:
        if (o->n == FAID_MERGE_MAX_INSTANCES) {
            fprintf(stderr, "faidctl %s: at most %d --from endpoints\n", cmd,
                    FAID_MERGE_MAX_INSTANCES);
            return -1;
        }
        o->from[o->n++] = arg;
        return 1;
    case FAIDCTL_O_TIMEOUT:
        o->timeout = strtod(arg, &end);
        if (*end || !(o->timeout > 0) || (o->timeout_max > 0 && o->timeout > o->timeout_max)) {
            if (o->timeout_max > 0)
                fprintf(stderr, "faidctl %s: --timeout needs seconds in (0, %g], got '%s'\n", cmd,
                        o->timeout_max, arg);
            else
                fprintf(stderr, "faidctl %s: --timeout needs seconds > 0, got '%s'\n", cmd, arg);
            return -1;
        }
        return 1;
    case FAIDCTL_O_JSON:
        o->json = 1;
        return 1;
    default:
        return faidctl_keys_option(&o->keys, c, arg);
    }
}

int faidctl_from_getopt(faidctl_from *o, const char *cmd, int argc, char **argv,
                        const struct option *longopts, int *first)
{
    int c, taken;
    while ((c = faidctl_getopt(argc, argv, longopts, first)) != -1 &&
           (taken = from_option(o, cmd, c, optarg)) != 0)
        if (taken < 0)
            return FAIDCTL_O_BAD;
    return c;
}

int faidctl_keys_load(const faidctl_keys *k, const char *cmd, faid_curve_keys *out)
{
    const char *srv = k->server_key, *key = k->key;
    if (!srv && !key) {
        /* The environment serves a whole session of commands, as $FAID_CONTROL does. */
        const char *es = getenv("FAID_SERVER_KEY"), *ek = getenv("FAID_KEY");
        srv = es && *es ? es : NULL;
        key = ek && *ek ? ek : NULL;
    }
    faid_diag d;
    faid_diag_clear(&d);
    if (faid_curve_keys_load(out, srv, key, &d) != 0) {
        fprintf(stderr, "faidctl %s: %s\n", cmd, d.msg);
        return d.code == FAID_EINVAL ? 2 : 1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: faidctl COMMAND [options]   (faidctl COMMAND --help for details)\n"
               "Options read `--opt value` or `--opt=value`, in any order with the operands;\n"
               "`--` ends the options.\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s  %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("faidctl %s\n", FAID_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "faidctl: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
