/* faidctl: the command-line tool. Each subcommand lives in its own client/faidctl_NAME.c and
 * exposes `int faidctl_NAME(int argc, char **argv)` (argv[0] is the subcommand name); it returns
 * the process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef FAIDCTL_H
#define FAIDCTL_H

int faidctl_devices(int argc, char **argv);
int faidctl_decode(int argc, char **argv);
int faidctl_process(int argc, char **argv);
int faidctl_geometry(int argc, char **argv);
int faidctl_replay(int argc, char **argv);
int faidctl_sub(int argc, char **argv);
int faidctl_control(int argc, char **argv); /* status | config | reload | reset | stop */

#endif
