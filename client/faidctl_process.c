/* faidctl process: placeholder until the module lands. */
#include "faidctl.h"

#include <stdio.h>

int faidctl_process(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "faidctl %s: not implemented yet\n", argv[0]);
    return 1;
}
