/* faid_sfile: the reduced-data file of one series (issue 15, `writer.profiles`, `writer.peaks`,
 * `writer.cake`): a NeXus / HDF5 file holding every published profile of the series as an
 * NXazint1d entry laid out as pyFAI's `save_NXazint1d` lays it out, the per-frame additions of
 * faid (frame_id, the input timestamp, std, count), with peak finding the peaks in the
 * Cheetah / CrystFEL CXI arrays, and with `writer.cake` the 2D cake as an NXazint2d entry.
 *
 * It is a consumer of the series stream: it is fed the bodies of the `start`, `result` and `end`
 * messages exactly as faid publishes them (proto/PROTOCOL.md) and decodes them with proto's
 * client-side decoder. The daemon's writer thread feeds it what the publisher sends; `faidctl
 * process` feeds it the messages it encodes with the same encoders: one code path, so a series
 * reduced live and re-reduced offline give equal datasets.
 *
 * Speed: frames are buffered in memory and written a block at a time (`block_frames` frames per
 * H5Dwrite of each dataset, datasets chunked by blocks and extended by blocks), not one H5Dwrite
 * per frame per dataset (docs/PERFORMANCE.md has the figures). faid_sfile_flush writes the frames
 * buffered so far and flushes the file: with `swmr`, a reader that opened it with swmr=True sees
 * them, and a process killed after a flush leaves the file readable up to that flush.
 *
 * Layout: faid_sfile_layout lists every group, dataset and attribute; docs/output-files.md is
 * generated from it (faid-outdoc) and tests read real files back against it.
 *
 * Not thread-safe: one thread owns a faid_sfile (Debian's libhdf5 is not built thread-safe: the
 * daemon does all its HDF5 work on the writer thread). */
#ifndef FAID_SFILE_H
#define FAID_SFILE_H

#include "faid_err.h"
#include "faid_layout.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faid_sfile faid_sfile;

typedef struct faid_sfile_params {
    const char *path;  /* created exclusively (faid_h5_create): never overwrites */
    int profiles;      /* write I, I_errors, std, count (writer.profiles) */
    int peaks;         /* write the peak arrays when the start announces peak finding */
    int cake;          /* write the NXazint2d entry when the start announces a cake */
    int swmr;          /* switch to SWMR write mode once the layout exists */
    int block_frames;  /* frames buffered per block write (0: 64) */
    const char *title; /* the entry's title (e.g. the series name); NULL: from the start */
} faid_sfile_params;

/* Creates p->path exclusively with the whole layout for the series the start message body
 * (`start`, `len` bytes, as published) describes, and no frames. FAID_EFORMAT naming the key
 * when the start lacks what the layout needs, FAID_EIO naming the file when HDF5 fails (a file
 * that exists is never touched; one created partly is removed). On failure *out is NULL. */
int faid_sfile_open(faid_sfile **out, const faid_sfile_params *p, const void *start, size_t len,
                    faid_diag *d);

/* One result message body of the series. Results of another setup version or series are
 * refused (FAID_EINVAL); a malformed one gives FAID_EFORMAT naming the frame. Buffered: written
 * when a block is full, at a flush and at close. FAID_EIO naming the file when a write fails. */
int faid_sfile_append(faid_sfile *f, const void *result, size_t len, faid_diag *d);

/* Writes what is buffered and flushes the file (H5Fflush). */
int faid_sfile_flush(faid_sfile *f, faid_diag *d);

/* Marks the series as missing `n` frames (results the writer could not take: the file's
 * `frames_missing` says so at close). */
void faid_sfile_missing(faid_sfile *f, uint64_t n);

/* Writes what is buffered, the end (end message body, or NULL when the series ended without one:
 * then `reason` says why, e.g. "timeout", "superseded", "shutdown"), and closes the file.
 * Closes even on error; *f is NULLed. */
int faid_sfile_close(faid_sfile **f, const void *end, size_t len, const char *reason, faid_diag *d);

uint64_t faid_sfile_frames(const faid_sfile *f); /* frames taken (written or buffered) */
uint64_t faid_sfile_bytes(const faid_sfile *f);  /* data bytes written so far */
const char *faid_sfile_path(const faid_sfile *f);

extern const faid_layout faid_sfile_layout;

/* The file name of a series in a directory (docs/output-files.md, "File names"): the series'
 * unique id, else "series_<series_id>", with every byte outside [A-Za-z0-9._-] replaced by '_',
 * a leading '.' replaced by '_', cut to 100 bytes; when anything was replaced or cut, "-" and 8
 * hex digits of a hash of the original bytes are appended, so two different ids never share a
 * name. The name never contains '/', so the file is always inside `dir`. `attempt` > 0 appends
 * "-<attempt+1>" (a name already taken is never overwritten: the next attempt is tried).
 * `suffix` ("" or "_hits") comes before ".h5". FAID_ESIZE when it does not fit in cap. */
int faid_writer_file_name(char *out, size_t cap, const char *dir, const char *uid, size_t uid_len,
                          uint64_t series_id, const char *suffix, int attempt, faid_diag *d);

#endif
