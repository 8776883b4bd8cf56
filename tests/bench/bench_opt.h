/* bench_opt.h: the command-line helpers that faid-bench's modes share: getopt_long with usage
 * errors that name the option (as faidctl's), and integers read with strtol. A usage error is
 * exit status 2 for the caller. */
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

#endif
