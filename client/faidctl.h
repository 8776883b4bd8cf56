/* faidctl: the command-line tool. Each subcommand lives in its own client/faidctl_NAME.c and
 * exposes `int faidctl_NAME(int argc, char **argv)` (argv[0] is the subcommand name); it returns
 * the process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef FAIDCTL_H
#define FAIDCTL_H

#include <signal.h>

int faidctl_devices(int argc, char **argv);
int faidctl_decode(int argc, char **argv);
int faidctl_process(int argc, char **argv);
int faidctl_geometry(int argc, char **argv);
int faidctl_inspect(int argc, char **argv);
int faidctl_replay(int argc, char **argv);
int faidctl_sub(int argc, char **argv);
int faidctl_control(int argc, char **argv); /* status | config | reload | reset | stop */

/* Set by SIGINT or SIGTERM once faidctl_catch_stop() has run: long-running subcommands poll it
 * to end cleanly with their summary instead of dying mid-series. */
extern volatile sig_atomic_t faidctl_stop;
void faidctl_catch_stop(void);

#endif
