/* faid_restab_cl: the OpenCL buffers behind the resource table's names (faid_restab.h), for the
 * OpenCL device alone: stages never see them. */
#ifndef FAID_RESTAB_CL_H
#define FAID_RESTAB_CL_H

#include "faid_cl.h"

typedef struct faid_restab faid_restab; /* faid_restab.h */

/* The buffer `name` (slot ignored for static entries); NULL when unknown. "out" is the output
 * buffer of the slot. */
cl_mem faid_restab_mem(const faid_restab *rt, const char *name, int slot);
/* The entry index of `name` for faid_restab_mem_at (FAID_RESTAB_OUT for "out"); -1 when
 * unknown. Valid until the table is destroyed (entries are never removed). */
#define FAID_RESTAB_OUT 1000
int faid_restab_index(const faid_restab *rt, const char *name);
/* faid_restab_mem by index: no name lookup (the device's per-frame path). */
cl_mem faid_restab_mem_at(const faid_restab *rt, int index, int slot);

#endif
