/* faid_progcache: the OpenCL programs of an engine's stages, built once per (kernel files, build
 * options) and kept until the engine changes what the options depend on (the batch), and their
 * kernels with named arguments.
 *
 * A stage asks for a program by its kernel files and -D options; the cache builds it on first use
 * (serialized over the process, one retry: see faid_progcache.c) and hands out kernels by name.
 * Each kernel knows its parameter names, parsed from its source signature, so stages bind
 * arguments by name (faid_karg_*) instead of counting positions; a launch refuses a kernel with an
 * argument never bound and names it. */
#ifndef FAID_PROGCACHE_H
#define FAID_PROGCACHE_H

#include "faid_cl.h"

#include <stdint.h>

#define FAID_KERNEL_MAX_ARGS 40

typedef struct faid_kernel {
    cl_kernel k;
    char name[64];
    size_t kwg; /* CL_KERNEL_WORK_GROUP_SIZE on the engine's device */
    int nargs;
    char arg[FAID_KERNEL_MAX_ARGS][32];      /* parameter names in order */
    uint32_t arg_hash[FAID_KERNEL_MAX_ARGS]; /* of the names: binding compares these first */
    uint64_t bound;                          /* bit i: argument i was set at least once */
} faid_kernel;

typedef struct faid_progcache faid_progcache;

faid_progcache *faid_progcache_new(faid_cl_ctx *ctx);
void faid_progcache_destroy(faid_progcache **pc);
/* Drops every program (e.g. when a build constant such as the batch changes). */
void faid_progcache_clear(faid_progcache *pc);
/* Changes whenever faid_progcache_clear dropped programs: a stage that keeps faid_kernel
 * pointers resolves them again when it differs from the one it saw. */
uint64_t faid_progcache_generation(const faid_progcache *pc);

/* The kernel `kernel` of the program made of the kernel files `files` (relative to kernels/) and
 * the build options `opts`; built and created on first use. The pointer stays valid until
 * faid_progcache_clear/destroy. */
int faid_progcache_kernel(faid_progcache *pc, const char *const *files, int nfiles,
                          const char *opts, const char *kernel, faid_kernel **out, faid_diag *d);

/* Sets argument `name` of k (FAID_EINVAL naming kernel and argument when it has no such
 * parameter). */
int faid_karg(faid_kernel *k, const char *name, size_t size, const void *value, faid_diag *d);
int faid_karg_mem(faid_kernel *k, const char *name, cl_mem m, faid_diag *d);
int faid_karg_int(faid_kernel *k, const char *name, cl_int v, faid_diag *d);
int faid_karg_uint(faid_kernel *k, const char *name, cl_uint v, faid_diag *d);
int faid_karg_float(faid_kernel *k, const char *name, cl_float v, faid_diag *d);
/* __local argument of `bytes` bytes. */
int faid_karg_local(faid_kernel *k, const char *name, size_t bytes, faid_diag *d);
/* Whether k takes an argument of this name (for kernels of a family with optional parameters). */
int faid_karg_has(const faid_kernel *k, const char *name);

/* 1D launch of k on q (every argument must have been bound). */
int faid_kernel_launch(cl_command_queue q, faid_kernel *k, size_t gws, size_t lws, cl_event *ev,
                       faid_diag *d);

/* The process-wide lock around OpenCL program builds (also taken by the device decoder's build,
 * which has its own programs). */
void faid_progcache_build_lock(void);
void faid_progcache_build_unlock(void);
/* Builds begun in this process so far (programs and device decoders: every taking of the lock
 * above) and, in *wait_ms (NULL: not wanted), the milliseconds threads spent waiting for the
 * lock. faid-bench reads both around its timed runs: a build there is a one-off cost timed as
 * throughput, and with several devices it is paid one device after another. */
uint64_t faid_progcache_builds(double *wait_ms);

/* Parses the parameter names of `__kernel void name(...)` in src into k->arg / k->nargs
 * (exposed for the unit test). */
int faid_kernel_parse_args(const char *src, size_t len, const char *name, faid_kernel *k);

#endif
