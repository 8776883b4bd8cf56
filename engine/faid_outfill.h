/* faid_outfill: the parts of the output messages that come from the reduction itself, filled in
 * one place for the daemon (publisher: start, worker: result) and `faidctl process` (which
 * writes the same series files from the same messages), so that a new field of a setup or an
 * output array reaches both paths at once. The caller fills what only it knows (series,
 * frame ids, timings, devices, the input's report) before or after these calls. */
#ifndef FAID_OUTFILL_H
#define FAID_OUTFILL_H

#include "faid_engine.h"
#include "faid_proto_out.h"
#include "faid_setup.h"

/* The start's setup fields: config hash, geometry, shape, detector, bins, units, split, error
 * model, corrections, ranges, dummy, normalization, mask/dark/flat files and masked pixel count,
 * the radial (and azimuthal) bin centres and the peak parameters when peaks are on. The
 * setup's version is not set: the daemon announces its generation's. o->* pointers borrow
 * from su, which must outlive the encoding. */
void faid_out_start_setup(faid_out_start *o, const faid_setup *su);

/* The result's outputs of one frame: the views of the outputs its stages declare (r->out,
 * faid_outputs.h; the profile, the cake when there is one, the peaks and background when the
 * finder ran). Pointers borrow from r. */
void faid_out_result_outputs(faid_out_result *o, const faid_result *r);

/* The engine's times of result r that have a result key (faid_times_at), into t (at most max
 * rows); o->times / o->ntimes point at them. The daemon's workers call it; `faidctl process`
 * publishes no times (zeros). */
void faid_out_result_times(faid_out_result *o, faid_out_time *t, size_t max, const faid_result *r);

#endif
