/* bench_opt.h: the command-line parser that faid-bench's modes share: getopt_long with usage
 * errors that name the option (as faidctl's), integers read with strtol, and one table of the
 * options several modes take (--frames, --config, --dtype, --device, --json), so a mode lists
 * only its own options. A usage error is exit status 2 for the caller. */
#ifndef FAID_BENCH_OPT_H
#define FAID_BENCH_OPT_H

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Restart the scan of argv (GNU: full re-initialisation); call before the first bench_getopt. */
static inline void bench_getopt_reset(void)
{
    optind = 0;
    opterr = 0;
}

/* getopt_long with -h as the only short option; a usage error is printed (prog names the mode)
 * and returns '?'. */
static inline int bench_getopt(const char *prog, int argc, char **argv,
                               const struct option *longopts)
{
    int c = getopt_long(argc, argv, ":h", longopts, NULL);
    if (c == '?' || c == ':') {
        const char *what = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        char shortname[3] = {'-', (char)optopt, '\0'};
        if (optopt > 0 && optopt < 128 && strncmp(what, "--", 2) != 0)
            what = shortname;
        const char *eq = strncmp(what, "--", 2) == 0 ? strchr(what, '=') : NULL;
        if (c == ':')
            fprintf(stderr, "%s: option '%s' needs a value\n", prog, what);
        else if (eq)
            fprintf(stderr, "%s: option '%.*s' takes no value (or is unknown)\n", prog,
                    (int)(eq - what), what);
        else
            fprintf(stderr, "%s: unknown option '%s'\n", prog, what);
        return '?';
    }
    return c;
}

/* After the options: a leftover argument is a usage error. */
static inline int bench_no_operands(const char *prog, int argc, char **argv)
{
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        return -1;
    }
    return 0;
}

/* The whole of v as a decimal int, or a message naming the option --name and -1. */
static inline int bench_int(const char *prog, const char *name, const char *v, int *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < INT_MIN || x > INT_MAX) {
        fprintf(stderr, "%s: option '--%s' needs an integer, not '%s'\n", prog, name, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* What an option takes and does with its value. */
typedef enum {
    BENCH_MODE, /* the mode's own switch (--zmq-ceiling, ...): taken, nothing to do */
    BENCH_STR,  /* *str = the value */
    BENCH_INT,  /* *num = the value as an integer (bench_int) */
    BENCH_OFF   /* no value: *num = 0 (--no-check) */
} bench_kind;

/* One option of a mode: its long name (without "--"), kind and destination. A value outside
 * [lo, hi] (BENCH_INT, where lo < hi) or not among choices ("tcp|ipc", BENCH_STR) is refused at
 * once with "bad value"; other checks are the mode's, after parsing. */
typedef struct bench_opt {
    const char *name;
    bench_kind kind;
    const char **str;
    int *num;
    int lo, hi;
    const char *choices;
} bench_opt;

/* The options several modes share, spelled once here: a mode takes each one whose destination
 * it sets (NULL: not an option of that mode). */
typedef struct bench_shared {
    int *frames;
    int frames_min; /* > 0: a smaller --frames is refused at once (zmq-ceiling) */
    const char **config, **dtype, **device, **json;
} bench_shared;

#define BENCH_MAX_OPTS 40

/* Whether v is one of the '|'-separated words of choices. */
static inline int bench_choice(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0)
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* Parses argv against the shared options sh takes, the mode's own (nown of them) and -h/--help.
 * 0: parsed; 1: use printed on stdout for --help (exit status 0); -1: a usage error, printed
 * (with use on stderr for an unknown option, a missing value or a leftover argument). */
static inline int bench_parse(const char *prog, int argc, char **argv, const bench_shared *sh,
                              const bench_opt *own, int nown, const char *use)
{
    const bench_opt shared[] = {
        {"frames", BENCH_INT, NULL, sh->frames, sh->frames_min, sh->frames_min > 0 ? INT_MAX : 0,
         NULL},
        {"config", BENCH_STR, sh->config, NULL, 0, 0, NULL},
        {"dtype", BENCH_STR, sh->dtype, NULL, 0, 0, NULL},
        {"device", BENCH_STR, sh->device, NULL, 0, 0, NULL},
        {"json", BENCH_STR, sh->json, NULL, 0, 0, NULL},
    };
    bench_opt all[BENCH_MAX_OPTS];
    struct option lo[BENCH_MAX_OPTS + 2];
    int n = 0;
    for (size_t k = 0; k < sizeof shared / sizeof shared[0]; k++)
        if (shared[k].str || shared[k].num)
            all[n++] = shared[k];
    if (nown > BENCH_MAX_OPTS - n) {
        fprintf(stderr, "%s: more than %d options\n", prog, BENCH_MAX_OPTS);
        return -1;
    }
    for (int k = 0; k < nown; k++)
        all[n++] = own[k];
    for (int k = 0; k < n; k++) {
        int has_arg =
            all[k].kind == BENCH_MODE || all[k].kind == BENCH_OFF ? no_argument : required_argument;
        lo[k] = (struct option){all[k].name, has_arg, NULL, 256 + k};
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    bench_getopt_reset();
    for (int c; (c = bench_getopt(prog, argc, argv, lo)) != -1;) {
        if (c == 'h') {
            fputs(use, stdout);
            return 1;
        }
        if (c < 256 || c >= 256 + n) {
            fputs(use, stderr);
            return -1;
        }
        const bench_opt *e = &all[c - 256];
        const char *v = optarg;
        int bad = 0;
        switch (e->kind) {
        case BENCH_MODE:
            break;
        case BENCH_OFF:
            *e->num = 0;
            break;
        case BENCH_STR:
            *e->str = v;
            bad = e->choices && !bench_choice(e->choices, v);
            break;
        case BENCH_INT:
            if (bench_int(prog, e->name, v, e->num))
                return -1;
            bad = e->lo < e->hi && (*e->num < e->lo || *e->num > e->hi);
            break;
        }
        if (bad) {
            fprintf(stderr, "%s: bad value '%s' for --%s\n", prog, v, e->name);
            return -1;
        }
    }
    if (bench_no_operands(prog, argc, argv)) {
        fputs(use, stderr);
        return -1;
    }
    return 0;
}

#endif
