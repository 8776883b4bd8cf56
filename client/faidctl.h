/* faidctl: the command-line tool. Each subcommand lives in its own client/faidctl_NAME.c and
 * exposes `int faidctl_NAME(int argc, char **argv)` (argv[0] is the subcommand name); it returns
 * the process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef FAIDCTL_H
#define FAIDCTL_H

#include <getopt.h>
#include <signal.h>

int faidctl_devices(int argc, char **argv);
int faidctl_decode(int argc, char **argv);
int faidctl_process(int argc, char **argv);
int faidctl_geometry(int argc, char **argv);
int faidctl_inspect(int argc, char **argv);
int faidctl_replay(int argc, char **argv);
int faidctl_sub(int argc, char **argv);
int faidctl_control(int argc, char **argv); /* status | config | reload | reset | stop */

/* getopt_long over a subcommand's arguments (argv[0] = the subcommand name), so every command
 * reads `--opt value` and `--opt=value` alike, stops at `--` and accepts options and operands in
 * any order (the operands end up in argv[optind..argc-1]). Call it with *first = 1 the first time
 * (it resets getopt's state and clears *first). On an unknown option or one without its value it
 * prints "faidctl CMD: ..." to stderr and returns '?': the caller prints its usage and returns 2. */
int faidctl_getopt(int argc, char **argv, const struct option *longopts, int *first);
/* The long name of the option whose val is c ("?" when none). */
const char *faidctl_optname(const struct option *longopts, int c);

/* Set by SIGINT or SIGTERM once faidctl_catch_stop() has run: long-running subcommands poll it
 * to end cleanly with their summary instead of dying mid-series. */
extern volatile sig_atomic_t faidctl_stop;
void faidctl_catch_stop(void);

#endif
