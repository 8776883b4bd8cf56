/* faid_writer: the daemon's files of record (issue 15). A thread of its own, fed by the publisher
 * through a bounded queue with the series stream it publishes (the start, result and end message
 * bodies, exactly as sent, and with `writer.hits` the hit frames' chunks as they arrived), writes
 * each series with the library faidwriter (writer/faid_sfile.h: the same code `faidctl process`
 * uses) into `writer.directory`.
 *
 * Policy: the publisher never waits for the writer. A message that does not fit in the queue
 * (`writer.queue_bytes`) is not queued: it is counted per kind (status writer.dropped, /metrics
 * faid_writer_dropped_total) and the series' file records how many results it misses
 * (`/entry/faid/frames_missing`). A write that fails (full disk, file size limit, directory
 * removed or unwritable) is logged naming the file, counted per kind (status writer.errors), the
 * file is closed as far as it can be, the rest of that series is skipped, and the next series
 * starts a new file: PUB and the lossless channel never notice.
 *
 * Settings are those of the setup announced by each start (reloadable: a change applies from the
 * next series). All HDF5 work of the daemon happens on this thread (libhdf5 is not thread-safe). */
#ifndef FAID_WRITER_H
#define FAID_WRITER_H

#include "faid_codec.h"
#include "faid_dtype.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct faid_server;
struct faid_gen;

/* Kinds of write errors (status writer.errors, /metrics faid_writer_errors_total{kind}). */
#define FAID_WRITER_ERRORS(X)                                                                      \
    X(NO_SPACE, "no_space", "the file system is full (ENOSPC, EDQUOT)")                            \
    X(FILE_SIZE, "file_size", "the file size limit (RLIMIT_FSIZE: EFBIG)")                         \
    X(UNWRITABLE, "unwritable", "the directory is missing, read-only or not writable")             \
    X(REMOVED, "removed", "the file or its directory was removed while written")                   \
    X(IO, "io", "any other input/output error")                                                    \
    X(MESSAGE, "message", "a message the writer could not use (not the layout its start announced)")

typedef enum {
#define FAID_WERR_ENUM(e, name, help) FAID_WERR_##e,
    FAID_WRITER_ERRORS(FAID_WERR_ENUM)
#undef FAID_WERR_ENUM
        FAID_NWERRS
} faid_writer_error;

/* What the queue carries (status writer.dropped per kind). */
typedef enum { FAID_WQ_START = 0, FAID_WQ_RESULT, FAID_WQ_END, FAID_WQ_HIT, FAID_NWQ } faid_wq_kind;

const char *faid_writer_error_name(faid_writer_error e);
const char *faid_wq_kind_name(faid_wq_kind k);

typedef struct faid_writer_stats {
    atomic_uint_fast64_t files_open, files_written, frames_written, bytes_written;
    atomic_uint_fast64_t frames_skipped; /* results of a series whose file failed */
    atomic_uint_fast64_t hit_frames_written;
    atomic_uint_fast64_t free_bytes; /* of writer.directory, sampled each second */
    atomic_uint_fast64_t queued_bytes;
    atomic_uint_fast64_t errors[FAID_NWERRS];
    atomic_uint_fast64_t dropped[FAID_NWQ];
    atomic_int on; /* the last start's writer.directory was set */
} faid_writer_stats;

typedef struct faid_writer faid_writer;

/* The queue holds at most queue_bytes of messages. NULL when memory is short. */
faid_writer *faid_writer_new(int64_t queue_bytes);
int faid_writer_start(faid_writer *w);
/* Closes the queue, lets the thread write what is queued, close its files, and joins it. */
void faid_writer_stop(faid_writer *w);
void faid_writer_destroy(faid_writer **w);

/* Publisher side: never waits. A start takes a reference of the generation it announces (its
 * settings, geometry and mask); results, hits and ends belong to the last start. within: the
 * start announces a reload's new setup within a series (`reason` `setup`): the series keeps the
 * writer.* settings of its own start. */
void faid_writer_start_series(faid_writer *w, struct faid_gen *g, int within, const void *body,
                              size_t len);
void faid_writer_result(faid_writer *w, const void *body, size_t len);
void faid_writer_end(faid_writer *w, const void *body, size_t len);
void faid_writer_hit(faid_writer *w, uint64_t frame_id, faid_dtype dtype, faid_encoding enc,
                     const void *chunk, size_t len);
/* Whether the last start turned the writer on (results are worth queueing). */
int faid_writer_on(faid_writer *w);
/* Whether the last start asked for hits files. */
int faid_writer_hits_on(faid_writer *w);

/* The writer's target for the next series (control `writer`, REST /api/v1/writer): dir replaces
 * writer.directory ("" returns to it; an absolute path to an existing directory, resolved, and
 * inside root when root is set, so neither '..' nor a link leads out); prefix goes before each
 * file name (at most FAID_WRITER_PREFIX_MAX - 1 bytes of letters, digits, '_', '-', '.', no
 * '..', not starting with '-' or '.': a name from the wire never leaves its directory). NULL
 * keeps the current value. FAID_EINVAL / FAID_ERANGE (outside root) name the key; nothing changes
 * then. */
#define FAID_WRITER_PREFIX_MAX 64
int faid_writer_set_target(faid_writer *w, const char *dir, const char *prefix, const char *root,
                           faid_diag *d);
int faid_writer_prefix_check(const char *prefix, faid_diag *d);
/* The next series' directory (the target's, else cfg_dir) and prefix. */
void faid_writer_target(faid_writer *w, const char *cfg_dir, char *dir, size_t dcap, char *prefix,
                        size_t pcap);

faid_writer_stats *faid_writer_stats_of(faid_writer *w);
/* The file being written (empty when none), for status. */
void faid_writer_current(faid_writer *w, char *file, size_t cap, char *dir, size_t dcap);

#endif
