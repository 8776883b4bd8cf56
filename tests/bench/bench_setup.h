/* bench_setup.h: the configuration and frame dtype that faid-bench's frame modes (--decode,
 * --host-path) start from: the embedded default or --config FILE, and --dtype, refused with the
 * mode's name when it is not a frame type. */
#ifndef FAID_BENCH_SETUP_H
#define FAID_BENCH_SETUP_H

#include "faid_config.h"
#include "faid_dtype.h"

#include <stdio.h>

/* 0, or the mode's exit status: 1 for a configuration that does not load, 2 for a usage error
 * (a --dtype that is no frame type); the message on stderr starts with prog. */
static inline int bench_config_dtype(const char *prog, const char *config, const char *dtype,
                                     faid_config *cfg, faid_dtype *dt)
{
    faid_diag d;
    faid_diag_clear(&d);
    faid_config_default(cfg);
    if (config && faid_config_load(config, cfg, &d)) {
        fprintf(stderr, "%s: %s\n", prog, d.msg);
        return 1;
    }
    *dt = faid_dtype_parse(dtype);
    if (!faid_dtype_is_frame(*dt)) {
        fprintf(stderr, "%s: --dtype %s is not a frame type\n", prog, dtype);
        return 2;
    }
    return 0;
}

#endif
