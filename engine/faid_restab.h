/* faid_restab: the table of an engine's buffers, by name, sized from the setup. Stages declare
 * what they need when a setup is installed; the table allocates it, hands it out by name and
 * frees it, so no stage keeps buffer bookkeeping of its own and nothing is allocated per frame.
 *
 * Three kinds of entries:
 *   static   one buffer per setup, filled at declaration (per-pixel corrections, CSR matrices) or
 *            left as scratch (the reference device's decoded and preprocessed frame);
 *   slot     one buffer per frame slot holding `nlanes` lanes of lane_bytes each (rounded up to
 *            the entry's alignment), on the device or in pinned host memory mapped once (staging);
 *   output   a segment of floats per lane in the slot's output buffer "out": segments read back
 *            lie in each lane's block (lane stride out_stride floats), so one D2H brings every
 *            read-back output of a lane (or of every lane of a slot); the others lie after the
 *            lanes and never leave the device.
 * With a NULL OpenCL context (reference device) every entry is plain host memory. Stages use
 * this header (names, sizes, host pointers); the device buffers behind the names are the OpenCL
 * device's business (faid_restab_cl.h). */
#ifndef FAID_RESTAB_H
#define FAID_RESTAB_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

#define FAID_RES_DEVICE 0 /* slot entry on the device */
#define FAID_RES_PINNED 1 /* slot entry in pinned host memory, mapped for writing */

typedef struct faid_restab faid_restab;
struct faid_cl_ctx;

/* ctx NULL: every entry in host memory (reference device). */
faid_restab *faid_restab_new(struct faid_cl_ctx *ctx);
void faid_restab_destroy(faid_restab **rt);

/* A static buffer of `bytes` filled from init (NULL: left uninitialised), read-only on the
 * device. */
int faid_restab_static(faid_restab *rt, const char *name, size_t bytes, const void *init,
                       faid_diag *d);
/* `name` names the same buffer as the static entry `existing` (e.g. a one-element placeholder
 * for an absent array). */
int faid_restab_alias(faid_restab *rt, const char *name, const char *existing, faid_diag *d);
/* A slot entry: lane_bytes per lane, lanes `align` bytes apart (power of two). */
int faid_restab_declare(faid_restab *rt, const char *name, size_t lane_bytes, size_t align,
                        int flags, faid_diag *d);
/* An output segment of `floats` floats per lane. */
int faid_restab_output(faid_restab *rt, const char *name, size_t floats, int readback,
                       faid_diag *d);
/* A read-back output segment of which only the first `read` floats per lane come back (a cake
 * whose results carry its intensities alone). It is laid out last in the lane block, so the D2H
 * reads a prefix of every lane (faid_restab_out_read); at most one per table. */
int faid_restab_output_part(faid_restab *rt, const char *name, size_t floats, size_t read,
                            faid_diag *d);

/* Allocates every slot entry and the output buffer for nslots slots of nlanes lanes (the output
 * buffer zeroed on the device and in its pinned mirror). */
int faid_restab_slots(faid_restab *rt, int nslots, int nlanes, faid_diag *d);
/* Frees the slot entries (the caller has finished every slot queue). */
void faid_restab_slots_free(faid_restab *rt);

/* Host pointer: pinned slot entries, "out" (its pinned mirror), every entry on the reference
 * device. */
void *faid_restab_host(const faid_restab *rt, const char *name, int slot);
/* Bytes from one lane of a slot entry to the next. */
size_t faid_restab_lane_bytes(const faid_restab *rt, const char *name);
/* Offset (floats, lane 0) and lane stride (floats) of an output segment in "out"; -1 when
 * unknown. */
int faid_restab_out(const faid_restab *rt, const char *name, int *off, int *stride);
/* Floats per lane block of "out" (the read-back segments, rounded up). */
size_t faid_restab_out_stride(const faid_restab *rt);
/* Floats of each lane block the D2H must bring back: out_stride, or less where a segment is
 * read only in part (faid_restab_output_part). */
size_t faid_restab_out_read(const faid_restab *rt);
/* Bytes of device memory the table holds (static buffers, each once, per-slot device buffers and
 * the output buffers; pinned host staging is not counted). */
size_t faid_restab_device_bytes(const faid_restab *rt);
/* Changes whenever the slot entries are made or freed: offsets of the non-read-back output
 * segments and the per-slot buffers a device resolved before are stale then. */
uint64_t faid_restab_generation(const faid_restab *rt);

#endif
