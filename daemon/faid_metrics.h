/* faid_metrics: the daemon's Prometheus metrics (/metrics of http.endpoint) from one table.
 *
 * FAID_METRICS lists every metric family once: name, type, labels and help. The exposition
 * writer walks the table and asks the daemon's counters for the samples of each row, and the
 * Markdown reference in docs/operations.md is generated from the same rows (`faid
 * --dump-metrics`), so a metric cannot be served undocumented or documented unserved (the
 * integration test compares a live scrape with the table). Everything is read from relaxed
 * atomics, except the memory families: the allocator's statistics take each malloc arena's lock
 * in turn, briefly (faid_memstat.h). Names follow Prometheus'
 * conventions (base units, _total for counters, _seconds histograms), checked with
 * `promtool check metrics` in the tests. */
#ifndef FAID_METRICS_H
#define FAID_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct faid_server;

/* id, name, type, labels (comma separated, "" = none), help */
#define FAID_METRICS(X)                                                                            \
    X(BUILD_INFO, "faid_build_info", "gauge", "version,protocol",                                  \
      "Always 1; the labels name faid's version and wire protocol version.")                       \
    X(UP_SECONDS, "faid_uptime_seconds", "gauge", "", "Seconds since faid started.")               \
    X(SETUP_VERSION, "faid_setup_version", "gauge", "",                                            \
      "Version of the reduction setup in force (1 at start, +1 per successful reload).")           \
    X(RECEIVED, "faid_frames_received_total", "counter", "",                                       \
      "Frames received (image messages whose header could be read).")                              \
    X(RECEIVED_BYTES, "faid_received_bytes_total", "counter", "",                                  \
      "Bytes of image messages received.")                                                         \
    X(PROCESSED, "faid_frames_processed_total", "counter", "", "Frames integrated into a result.") \
    X(FAILED, "faid_frames_failed_total", "counter", "",                                           \
      "Frames answered with an error message instead of a result.")                                \
    X(DROPPED, "faid_frames_dropped_total", "counter", "reason",                                   \
      "Frames dropped by queue.policy or at shutdown, per reason.")                                \
    X(BAD_INPUT, "faid_bad_input_messages_total", "counter", "",                                   \
      "Input messages whose header could not be read (not frames of any series).")                 \
    X(ERRORS, "faid_errors_total", "counter", "stage,code",                                        \
      "Errors per pipeline stage and error code.")                                                 \
    X(PUBLISHED, "faid_messages_published_total", "counter", "",                                   \
      "Messages sent on the PUB output (results, start, end, error, stats).")                      \
    X(STALE, "faid_stale_messages_total", "counter", "",                                           \
      "Messages (images, ends) of a series already closed, dropped.")                              \
    X(IGNORED, "faid_ignored_messages_total", "counter", "",                                       \
      "Input messages of a type faid has no use for.")                                             \
    X(FORWARDED, "faid_forwarded_messages_total", "counter", "",                                   \
      "Input messages passed on to input.forward_endpoint.")                                       \
    X(FORWARD_DROPPED, "faid_forward_dropped_messages_total", "counter", "",                       \
      "Input messages not forwarded (the forward peer was behind).")                               \
    X(LOSSLESS, "faid_lossless_messages_sent_total", "counter", "",                                \
      "Messages first sent on the lossless output.")                                               \
    X(LL_RESENT, "faid_lossless_messages_resent_total", "counter", "",                             \
      "Lossless messages sent again to a new consumer session.")                                   \
    X(LL_ACKED, "faid_lossless_messages_acknowledged_total", "counter", "",                        \
      "Lossless messages the consumer acknowledged.")                                              \
    X(LL_REFUSED, "faid_lossless_refused_total", "counter", "",                                    \
      "Requests of lossless peers refused (another consumer holds the channel).")                  \
    X(LL_REFUSALS_UNANSWERED, "faid_lossless_refusals_unanswered_total", "counter", "",            \
      "Refused lossless requests not answered (peer answered within 1 s, or 64 others were).")     \
    X(LL_PINGS, "faid_lossless_pings_total", "counter", "",                                        \
      "Liveness probes sent to the lossless consumer (at most 4 a second).")                       \
    X(LL_NOT_RESENT, "faid_lossless_messages_not_resent_total", "counter", "",                     \
      "Lossless messages a repeated hello did not queue again on the connection holding them.")    \
    X(LL_INPUT_DEFERRED, "faid_lossless_input_deferred_total", "counter", "",                      \
      "Publisher passes that left lossless peer messages for the next (256 read per pass).")       \
    X(LL_OLD_CONNECTION, "faid_lossless_old_connection_messages_total", "counter", "",             \
      "Messages of the lossless consumer's earlier connection taken for it, not refused.")         \
    X(LL_GIVEN_UP, "faid_lossless_messages_given_up_total", "counter", "kind",                     \
      "Lossless messages given up unacknowledged (buffer full, shutdown), per message kind.")      \
    X(LL_HELD, "faid_lossless_held_messages", "gauge", "",                                         \
      "Lossless messages held until acknowledged.")                                                \
    X(LL_HELD_BYTES, "faid_lossless_held_bytes", "gauge", "",                                      \
      "Bytes of the lossless messages held.")                                                      \
    X(LL_ACTIVE, "faid_lossless_consumer_connected", "gauge", "",                                  \
      "1 while a lossless consumer session is active.")                                            \
    X(SERIES, "faid_series_total", "counter", "", "Series opened.")                                \
    X(SETUPS_REUSED, "faid_series_setups_reused_total", "counter", "",                             \
      "Series starts that kept the setup in force (same mask, geometry, configuration).")          \
    X(SETUPS_REBUILT, "faid_series_setups_rebuilt_total", "counter", "",                           \
      "Series starts whose setup was built off the ingest thread.")                                \
    X(GEOMETRY_REFUSED, "faid_start_geometry_refused_total", "counter", "",                        \
      "Series starts whose geometry (input.geometry_source start) was outside the option "         \
      "table's ranges: the configuration's geometry used.")                                        \
    X(MASKS_REFUSED, "faid_detector_masks_refused_total", "counter", "",                           \
      "Series starts whose detector pixel mask was refused (wrong shape or type, not "             \
      "decodable): no detector mask used.")                                                        \
    X(LOG_SUPPRESSED, "faid_log_lines_suppressed_total", "counter", "",                            \
      "Log lines held back by rate-limited sites (peer-driven lines, at most 5 per second each).") \
    X(SERIES_FRAMES, "faid_series_frames", "gauge", "",                                            \
      "Frames received in the open (or last) series.")                                             \
    X(QUEUE, "faid_queue_frames", "gauge", "", "Frames waiting for a device.")                     \
    X(QUEUE_CAP, "faid_queue_capacity_frames", "gauge", "", "Capacity of the frame queue.")        \
    X(IN_FLIGHT, "faid_frames_in_flight", "gauge", "device",                                       \
      "Frames submitted to a device and not yet collected.")                                       \
    X(DEV_PROCESSED, "faid_device_frames_processed_total", "counter", "device",                    \
      "Frames a device integrated.")                                                               \
    X(DEV_FAILED, "faid_device_frames_failed_total", "counter", "device",                          \
      "Frames that failed on a device.")                                                           \
    X(DEV_BUSY, "faid_device_busy_ratio", "gauge", "device",                                       \
      "Fraction of the last stats.interval a device had frames in flight.")                        \
    X(DEV_INFO, "faid_device_info", "gauge", "device,name", "Always 1; names each device.")        \
    X(INPUT_CONN, "faid_input_connections", "gauge", "", "Open connections on the input.")         \
    X(FPS, "faid_frames_per_second", "gauge", "",                                                  \
      "Results per second over the last stats.interval.")                                          \
    X(PEAK_FRAMES, "faid_peak_frames_total", "counter", "",                                        \
      "Frames searched for peaks (peaks.algorithm not none).")                                     \
    X(HITS, "faid_hits_total", "counter", "",                                                      \
      "Frames judged hits (peaks.min_peaks_for_hit, peaks.max_peaks_for_hit).")                    \
    X(PEAKS, "faid_peaks_total", "counter", "", "Peaks found, summed over frames.")                \
    X(HITS_REQUESTED, "faid_hits_requested_total", "counter", "",                                  \
      "`next` requests on hits.request_endpoint that took a waiting entry.")                       \
    X(HITS_DELIVERED, "faid_hits_delivered_total", "counter", "",                                  \
      "Hits given to a requester of hits.request_endpoint.")                                       \
    X(HITS_GONE, "faid_hits_requesters_gone_total", "counter", "",                                 \
      "Waiting requesters found gone (or not reading) when offered a hit or making room.")         \
    X(HITS_DISPLACED, "faid_hits_requests_displaced_total", "counter", "",                         \
      "Waiting requesters answered What? to make room for a newer one (64 were waiting).")         \
    X(HITS_REPEATED, "faid_hits_requests_repeated_total", "counter", "",                           \
      "`next` requests from a requester already waiting (ignored: one entry per identity).")       \
    X(HITS_RESETS, "faid_hits_resetplots_total", "counter", "",                                    \
      "`resetplots` requests served on hits.request_endpoint.")                                    \
    X(HITS_WAITING, "faid_hits_requesters_waiting", "gauge", "",                                   \
      "Requesters of `next` waiting for a hit now.")                                               \
    X(HIT_RATE, "faid_hit_rate", "gauge", "",                                                      \
      "Fraction of hits over the last peaks.hit_rate_window frames (0 without peaks).")            \
    X(LATENCY, "faid_latency_seconds", "histogram", "",                                            \
      "Time from a frame's reception to the publication of its result.")                           \
    X(STAGE, "faid_stage_seconds", "histogram", "stage",                                           \
      "Time of a processed frame in each stage (queue, host, transfer, decode, preprocess, "       \
      "integrate, compute = engine total).")                                                       \
    X(HTTP_CLIENTS, "faid_http_event_clients", "gauge", "",                                        \
      "Browsers connected to the dashboard's event stream.")                                       \
    X(HTTP_CONNECTIONS, "faid_http_connections", "gauge", "",                                      \
      "Connections open to the HTTP server (http.endpoint).")                                      \
    X(HTTP_SHED, "faid_http_connections_shed_total", "counter", "reason",                          \
      "HTTP connections closed by faid before their request was read, per reason: header_wait "    \
      "(the oldest still sending its header, shut when the server was full), per_peer (a peer "    \
      "beyond localhost over its share), over_limit (libmicrohttpd's own limit).")                 \
    X(HTTP_AUTH_REFUSED, "faid_http_auth_refused_total", "counter", "",                            \
      "REST requests refused for a missing or wrong bearer token (401).")                          \
    X(CURVE_CLIENTS, "faid_curve_clients_total", "counter", "result",                              \
      "CURVE handshakes the ZAP handler answered (security.curve), per result: admitted, "         \
      "refused (key not in security.authorized_keys); 0 without CURVE.")                           \
    X(MEMORY, "faid_memory_bytes", "gauge", "kind",                                                \
      "The daemon's memory, per kind: rss (resident), rss_anon (its anonymous part), heap (held "  \
      "by the allocator's arenas), mmap (large blocks mapped one by one), in_use (allocated, "     \
      "not freed), free (free inside the arenas); status memory, PROTOCOL.md 4.")                  \
    X(ARENAS, "faid_malloc_arenas", "gauge", "",                                                   \
      "malloc arenas (0 where the C library does not tell).")                                      \
    X(WRITER_FILES_OPEN, "faid_writer_files_open", "gauge", "",                                    \
      "Files of record being written (writer.directory).")                                         \
    X(WRITER_FILES, "faid_writer_files_written_total", "counter", "",                              \
      "Files of record written and closed without error.")                                         \
    X(WRITER_FRAMES, "faid_writer_frames_written_total", "counter", "",                            \
      "Frames (results) written into series files.")                                               \
    X(WRITER_BYTES, "faid_writer_bytes_written_total", "counter", "",                              \
      "Data bytes written into files of record.")                                                  \
    X(WRITER_HITS, "faid_writer_hit_frames_written_total", "counter", "",                          \
      "Hit frames written into hits files (writer.hits).")                                         \
    X(WRITER_SKIPPED, "faid_writer_frames_skipped_total", "counter", "",                           \
      "Results not written because their series' file had failed.")                                \
    X(WRITER_ERRORS, "faid_writer_errors_total", "counter", "kind",                                \
      "Write errors per kind: no_space, file_size, unwritable, removed, io, message.")             \
    X(WRITER_DROPPED, "faid_writer_dropped_total", "counter", "kind",                              \
      "Messages not queued for the writer (writer.queue_bytes full), per kind: start, result, "    \
      "end, hit.")                                                                                 \
    X(WRITER_FREE, "faid_writer_free_bytes", "gauge", "",                                          \
      "Free bytes of writer.directory's file system (0 when off).")

typedef enum {
#define FAID_METRIC_ENUM(id, name, type, labels, help) FAID_M_##id,
    FAID_METRICS(FAID_METRIC_ENUM)
#undef FAID_METRIC_ENUM
        FAID_NMETRICS
} faid_metric_id;

typedef struct faid_metric_def {
    const char *name, *type, *labels, *help;
} faid_metric_def;

/* What the HTTP server counts (faid_http.c). */
typedef struct faid_http_counts {
    int event_clients; /* event-stream connections */
    uint64_t connections, shed_header_wait, shed_per_peer, shed_over_limit, auth_refused;
} faid_http_counts;

/* The exposition text of every metric (malloc'd, NUL-terminated; NULL when out of memory).
 * hc: the HTTP server's counts (NULL: zeros). */
char *faid_metrics_text(struct faid_server *s, const faid_http_counts *hc, size_t *len);

/* The Markdown reference table of the metrics (malloc'd; NULL when out of memory). */
char *faid_metrics_markdown(void);

#endif
