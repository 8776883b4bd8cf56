/* faidctl: the command-line tool. Each subcommand lives in its own client/faidctl_NAME.c and
 * exposes `int faidctl_NAME(int argc, char **argv)` (argv[0] is the subcommand name); it returns
 * the process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef FAIDCTL_H
#define FAIDCTL_H

#include "faid_client.h"

#include <getopt.h>
#include <signal.h>

int faidctl_devices(int argc, char **argv);
int faidctl_decode(int argc, char **argv);
int faidctl_process(int argc, char **argv);
int faidctl_geometry(int argc, char **argv);
int faidctl_inspect(int argc, char **argv);
int faidctl_replay(int argc, char **argv);
int faidctl_sub(int argc, char **argv);
int faidctl_aggregates(int argc, char **argv);
int faidctl_merge_files(int argc, char **argv);
int faidctl_control(int argc, char **argv); /* status | config | reload | reset | stop */
int faidctl_keygen(int argc, char **argv);

/* --server-key FAID.pub and --key CLIENT.key of the commands that talk to a faid running with
 * security.curve: FAIDCTL_KEY_OPTIONS goes into a command's option table; faidctl_keys_option()
 * takes the option (1 when c was one of them), faidctl_keys_load() reads the files (both or
 * neither; 0, else a message on stderr and the exit status). */
enum { FAIDCTL_O_SERVER_KEY = 1000, FAIDCTL_O_KEY };
#define FAIDCTL_KEY_OPTIONS                                                                        \
    {"server-key", required_argument, NULL, FAIDCTL_O_SERVER_KEY},                                 \
    {                                                                                              \
        "key", required_argument, NULL, FAIDCTL_O_KEY                                              \
    }
#define FAIDCTL_KEY_USAGE                                                                          \
    "  --server-key FILE   faid's public key (NAME.pub of its security.secret_key_file) and\n"     \
    "  --key FILE          this client's key pair (CLIENT.key of `faidctl keygen CLIENT`,\n"       \
    "                      CLIENT.pub in faid's security.authorized_keys): for a faid with\n"      \
    "                      security.curve on (default: $FAID_SERVER_KEY, $FAID_KEY)\n"
typedef struct faidctl_keys {
    const char *server_key, *key;
} faidctl_keys;
int faidctl_keys_option(faidctl_keys *k, int c, const char *arg);
struct faid_curve_keys;
int faidctl_keys_load(const faidctl_keys *k, const char *cmd, struct faid_curve_keys *out);

/* The options of the commands that listen to several instances at once (sub, aggregates):
 * --from ENDPOINT (repeatable, at most FAID_MERGE_MAX_INSTANCES), --timeout S, --json and the key
 * options above. FAIDCTL_FROM_OPTIONS goes into a command's option table; set timeout to the
 * command's default and timeout_max to its largest (0: no limit), then call
 * faidctl_from_getopt() where faidctl_getopt() would be: it takes these options itself and
 * returns the others (-1 at the end, as getopt does), FAIDCTL_O_BAD after printing "faidctl CMD:
 * ..." for a bad value of one of them (the caller returns 2). */
enum { FAIDCTL_O_FROM = 1010, FAIDCTL_O_TIMEOUT, FAIDCTL_O_JSON, FAIDCTL_O_BAD };
#define FAIDCTL_FROM_OPTIONS                                                                       \
    {"from", required_argument, NULL, FAIDCTL_O_FROM},                                             \
        {"timeout", required_argument, NULL, FAIDCTL_O_TIMEOUT},                                   \
        {"json", no_argument, NULL, FAIDCTL_O_JSON}, FAIDCTL_KEY_OPTIONS
typedef struct faidctl_from {
    const char *from[FAID_MERGE_MAX_INSTANCES];
    int n;
    double timeout, timeout_max;
    int json;
    faidctl_keys keys;
} faidctl_from;
int faidctl_from_getopt(faidctl_from *o, const char *cmd, int argc, char **argv,
                        const struct option *longopts, int *first);

/* getopt_long over a subcommand's arguments (argv[0] = the subcommand name), so every command
 * reads `--opt value` and `--opt=value` alike, stops at `--` and accepts options and operands in
 * any order (the operands end up in argv[optind..argc-1]). Call it with *first = 1 the first time
 * (it resets getopt's state and clears *first). On an unknown option or one without its value it
 * prints "faidctl CMD: ..." to stderr and returns '?': the caller prints its usage and returns 2.
 */
int faidctl_getopt(int argc, char **argv, const struct option *longopts, int *first);
/* The long name of the option whose val is c ("?" when none). */
const char *faidctl_optname(const struct option *longopts, int c);

/* Set by SIGINT or SIGTERM once faidctl_catch_stop() has run: long-running subcommands poll it
 * to end cleanly with their summary instead of dying mid-series. */
extern volatile sig_atomic_t faidctl_stop;
void faidctl_catch_stop(void);

#endif
