/* faid_log: one log line format for the whole program, on stderr:
 *   2026-11-21T23:10:05.123Z faid[1234] WARN  ingest: frame 17: corrupt bslz4 block 3
 * Levels error/warn/info/debug; faid_log_ratelimited() lets a per-frame error through at most a
 * few times a second per call site and counts what it suppressed. Thread-safe. */
#ifndef FAID_LOG_H
#define FAID_LOG_H

#include <stdint.h>

typedef enum { FAID_LOG_ERROR = 0, FAID_LOG_WARN, FAID_LOG_INFO, FAID_LOG_DEBUG } faid_log_level;

void faid_log_set_level(faid_log_level level);
/* "error", "warn", "info", "debug": indexed by faid_log_level, NULL-terminated (the option
 * table's choices of log.level). */
extern const char *const faid_log_level_names[];
/* Parses one of faid_log_level_names; returns 0 or FAID_EINVAL. */
int faid_log_parse_level(const char *name, faid_log_level *out);
void faid_log_set_name(const char *program);

void faid_log(faid_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* State of one rate-limited call site: keep it static (zero) at the site. Every line a peer can
 * make faid write goes through one: at most FAID_LOG_RATE lines per second per site; what is
 * held back is counted and reported as one line, `(N more like "FORMAT" suppressed)`, with the
 * site's next line or by faid_log_flush_suppressed(), whichever comes first. */
typedef struct faid_ratelimit {
    int64_t window_start_ns;
    int emitted;
    int64_t suppressed;
    /* set by the first suppression: the site's level, component and format for the report,
     * and its link in the list faid_log_flush_suppressed() walks */
    faid_log_level level;
    const char *component, *fmt;
    struct faid_ratelimit *next;
    int listed;
} faid_ratelimit;

#define FAID_LOG_RATE 5 /* lines per second per rate-limited call site */

void faid_log_ratelimited(faid_ratelimit *rl, faid_log_level level, const char *component,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Reports the suppressed count of every site whose one-second window has ended (all of them
 * when all != 0: at the stop), so a flood that ends is still accounted for in the log. The main
 * thread calls it on every turn of its loop; cheap when nothing is pending. */
void faid_log_flush_suppressed(int all);

/* Lines held back by every rate-limited site since the start (status `log_suppressed`). */
uint64_t faid_log_suppressed_total(void);

/* Monotonic and wall clocks in nanoseconds. */
int64_t faid_now_ns(void);
int64_t faid_wall_ns(void);

#define FAID_ERROR(comp, ...) faid_log(FAID_LOG_ERROR, comp, __VA_ARGS__)
#define FAID_WARN(comp, ...)  faid_log(FAID_LOG_WARN, comp, __VA_ARGS__)
#define FAID_INFO(comp, ...)  faid_log(FAID_LOG_INFO, comp, __VA_ARGS__)
#define FAID_DEBUG(comp, ...) faid_log(FAID_LOG_DEBUG, comp, __VA_ARGS__)

#endif
