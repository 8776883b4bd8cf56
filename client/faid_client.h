/* faid_client: the small C client library of faid, used by faidctl and by anyone who wants to talk
 * to a running daemon from C. It wraps the ZeroMQ sockets and the wire protocol of proto/ so a
 * caller never handles msgpack or socket options:
 *   - faid_sub     receives output messages (start, result, end, stats, error) from the PUB socket
 *                  or from the lossless channel (DEALER: hello, credit, acknowledgements and
 *                  duplicate removal handled inside) and decodes them into faid_out_msg views;
 *                  it remembers the last `start` so a result can be written with its radial axis;
 *   - faid_ctl     sends control requests (status, config, reload, reset, stop, ping) over REQ
 *                  with a receive timeout, so a dead daemon gives a message instead of a hang;
 *   - faid_sender  sends native input messages (series start, images, end) over PUSH, for
 *                  `faidctl replay` and tests, with zero-copy payloads;
 *   - faid_dat_*   writes a profile as the text .dat file that `faidctl sub --out` and
 *                  `faidctl process` produce.
 *
 * Ownership is visible in the signatures: faid_X_new() returns NULL on failure (with the reason in
 * the faid_diag), faid_X_destroy(&p) releases and sets p to NULL (a NULL p is fine). Every other
 * function returns 0 or a negative faid error code (faid_err.h) with a message in the diag.
 * Objects are not thread-safe: use each from one thread. */
#ifndef FAID_CLIENT_H
#define FAID_CLIENT_H

#include "faid_err.h"
#include "faid_proto.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------------------------------------
 * CURVE authentication (faid's security.curve; docs/security.md). A client of a faid that runs
 * with CURVE needs faid's public key (its NAME.pub from `faidctl keygen`) and a key pair of its
 * own (CLIENT.key) whose public half (CLIENT.pub) is in faid's security.authorized_keys folder.
 * Every object below takes the keys at creation (NULL or a zeroed struct = plain ZeroMQ), and
 * watches its connection's handshake: a refused key or a mechanism mismatch (a plain client and
 * a CURVE faid, or the reverse) ends the wait at once with FAID_EAUTH and a message that says
 * which, instead of waiting for a timeout. A wrong server key shows as a handshake that fails
 * without detail (also FAID_EAUTH). */
typedef struct faid_curve_keys {
    char server_public[41]; /* faid's public key, z85 ("" = plain ZeroMQ) */
    char public_key[41];    /* this client's key pair, z85 */
    char secret_key[41];
} faid_curve_keys;

/* Reads faid's public key from server_pub_file (NAME.pub, or a bare z85 line) and the client's
 * pair from key_file (CLIENT.key, mode 0600); both or neither must be given (NULL both: *k is
 * zeroed, plain ZeroMQ). FAID_EUNSUP when this libzmq has no CURVE. */
int faid_curve_keys_load(faid_curve_keys *k, const char *server_pub_file, const char *key_file,
                         faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Subscriber. */
typedef enum {
    FAID_SUB_PUB = 0,  /* SUB socket connected to the daemon's monitoring PUB output (lossy) */
    FAID_SUB_LOSSLESS, /* DEALER socket connected to the daemon's lossless ROUTER output */
} faid_sub_kind;

/* Options of faid_sub_new_opts; zero-initialised means the defaults. */
typedef struct faid_sub_opts {
    int rcvhwm;       /* receive high-water mark, 0 = the ZeroMQ default (PUB) / unbounded */
    const char *name; /* lossless: consumer name (ZeroMQ routing id, 1-255 bytes, not starting
                       * with a zero byte). A consumer that reconnects under its name takes its
                       * old place at once; NULL = a fresh anonymous id per connection */
    uint32_t credit;  /* lossless: messages faid may send ahead of the acknowledgements, 0 = 256 */
    const faid_curve_keys *curve; /* CURVE keys, NULL = plain */
    /* largest message accepted (ZMQ_MAXMSGSIZE: libzmq drops the connection of a peer that
     * sends a larger one and, 4.3.5 at least, does not connect again), 0 = no limit */
    int64_t max_message_bytes;
} faid_sub_opts;

/* Lossless channel bookkeeping of a faid_sub (all zero for a PUB subscriber). */
typedef struct faid_sub_ll_stats {
    uint64_t delivered;  /* messages handed to the caller */
    uint64_t duplicates; /* re-sent messages already delivered, dropped by msg_number */
    uint64_t refused;    /* refusals received (another consumer held the channel) */
    uint64_t sessions;   /* welcomes received */
    char instance[FAID_LL_INSTANCE_MAX]; /* faid run of the current session, "" before one */
} faid_sub_ll_stats;

/* What the last `start` message said about the series; results are interpreted with it. */
typedef struct faid_series_info {
    int valid; /* 0 until a start message arrived */
    uint64_t series_id;
    char series_unique_id[FAID_SERIES_UID_MAX];
    char unit[32]; /* radial unit, e.g. "q_nm^-1" */
    char software_version[64];
    char config_hash[40];
    uint64_t setup_version;
    size_t nbins;             /* length of radial */
    double *radial;           /* bin centres in unit (owned by the faid_sub) */
    char peaks_algorithm[32]; /* "" without peaks */
    char peaks_params[2048];  /* .peaks header lines of the parameters in force */
} faid_series_info;

/* One received message. The views (body, m's arrays and strings) point into a buffer the faid_sub
 * owns; they stay valid until the next faid_sub_recv() on the same faid_sub or its destruction. */
typedef struct faid_sub_msg {
    char topic[16];      /* topic frame, "" when the channel sends none */
    const uint8_t *body; /* the msgpack map */
    size_t len;
    faid_out_msg m;       /* decoded view of body */
    int64_t recv_wall_ns; /* wall clock at receipt (faid_wall_ns) */
} faid_sub_msg;

typedef struct faid_sub faid_sub;

/* Connects to endpoint ("tcp://host:port", "ipc://...") and, for FAID_SUB_PUB, subscribes to every
 * topic. rcvhwm 0 = the ZeroMQ default. */
faid_sub *faid_sub_new(const char *endpoint, faid_sub_kind kind, int rcvhwm, faid_diag *d);
faid_sub *faid_sub_new_opts(const char *endpoint, faid_sub_kind kind, const faid_sub_opts *o,
                            faid_diag *d);
/* For a lossless subscriber: acknowledges everything delivered and says bye (waiting at most
 * 500 ms for them to leave), so faid keeps nothing for it and another consumer may take over. */
void faid_sub_destroy(faid_sub **s);
/* Waits at most timeout_ms (-1 = forever) for one message. FAID_ETIMEOUT when none came;
 * FAID_EFORMAT / FAID_ETRUNC / FAID_EPROTO when a message arrived but could not be decoded (it is
 * consumed, msg->body/len still show its raw bytes); FAID_EZMQ on a socket failure. A start message
 * also updates faid_sub_series().
 * Lossless: calling it again acknowledges the message it returned before (at least once: a
 * message not yet acknowledged when the consumer vanishes is sent again to the next session);
 * re-sent messages already delivered in this faid run are dropped by msg_number (exactly once
 * to the caller while this faid_sub lives). FAID_EBUSY with faid's message when another consumer
 * holds the channel: the subscriber keeps asking every second, so calling on is waiting for
 * its turn. */
int faid_sub_recv(faid_sub *s, int timeout_ms, faid_sub_msg *msg, faid_diag *d);
void faid_sub_lossless_stats(const faid_sub *s, faid_sub_ll_stats *out);
/* Series information from the last start message (valid == 0 before one arrived). */
const faid_series_info *faid_sub_series(const faid_sub *s);
/* Series information of the start that announced series_id with setup_version, among the last
 * FAID_SUB_SERIES_KEPT starts; NULL when none did. Results of one series can arrive after the
 * next series' start (frames still in flight on the devices): each result is interpreted with
 * its own series' setup, not the newest. */
#define FAID_SUB_SERIES_KEPT 8
const faid_series_info *faid_sub_series_of(const faid_sub *s, uint64_t series_id,
                                           uint64_t setup_version);

/* The subscriber's ZeroMQ socket, for zmq_poll over several subscribers (faid_merge): with
 * FAID_SUB_PUB, readable means faid_sub_recv(s, 0, ...) has a message. Owned by s. */
void *faid_sub_zsocket(const faid_sub *s);
/* The endpoint s was made for. */
const char *faid_sub_endpoint(const faid_sub *s);

/* The same decoding without a socket, for messages obtained elsewhere: decodes body into msg
 * (views into body) and, for a start message, updates si. faid_series_info_clear() releases what
 * si owns and zeroes it. */
int faid_out_decode(const uint8_t *body, size_t len, faid_sub_msg *msg, faid_series_info *si,
                    faid_diag *d);
void faid_series_info_clear(faid_series_info *si);

/* Converts an array view (any numeric dtype, unaligned little-endian data) to float64. n must equal
 * a->nelem; FAID_ESIZE otherwise, FAID_EDTYPE for a type without a numeric value. */
int faid_array_view_to_f64(const faid_array_view *a, double *out, size_t n, faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Merging subscriber (several instances, proto/PROTOCOL.md "Several instances"). One PUB
 * subscriber per instance (and optionally the fan-out's PUB), delivered as one stream:
 *   - each series' start once: the first one seen; another instance's start of the same series
 *     is checked against it (config_hash) and, when it differs, answered with a MISMATCH naming
 *     the instance, whose results of that series are then kept out (counted as `refused`);
 *   - results of a series in frame order within a reorder window: a result waits until the
 *     frames before it arrived, or the window is full (`window` frames or `window_bytes` held
 *     over every series), or it waited `max_wait_ms`, or the series ended; a frame older than
 *     what was already delivered is delivered at once with `late` set and counted, never
 *     dropped; a frame id seen before in the series is dropped and counted as a duplicate;
 *   - one END per series once every instance that started it ended it, fell silent for
 *     `dead_after_ms` (no message at all: faid publishes stats every stats.interval), or was
 *     named in a fan-out's `lost` report of the series (by its `instance` stamp or its endpoint
 *     as given here), and every part of the series is
 *     accounted for (its `shards` stamp; unstamped instances: one part per endpoint; a part
 *     whose instance never started the series counts once an instance that did not start it
 *     is silent): summed totals, and the frames never seen, by id: with the fan-out given, the
 *     ids its `routed` report (sent as it passes the series' end on) and its `lost` reports
 *     name, exactly (the end waits up to max_wait_ms for the report once the instances are
 *     done; fan_report says whether it came); else the range [0, nimages) of the start, else
 *     the ids between the least and the greatest seen. A frame a `lost` report named whose
 *     result came anyway is delivered, not missing (lost_delivered counts them);
 *   - errors, stats and aggregates of each instance, and the fan-out's `lost` reports, passed
 *     on as they come.
 * Memory is bounded whatever the peers send: messages of at most max_message_bytes (a larger
 * one drops that peer's connection, which libzmq 4.3.5 does not make again: the peer falls
 * silent), at most rcvhwm of them queued per instance, at most `window` results and `window_bytes`
 * held, FAID_MERGE_SERIES series at once (a further series closes the oldest, which then ends with
 * what it has), a frame-id bitmap per series of at most FAID_MERGE_TRACKED_IDS ids (ids beyond
 * it are delivered and counted `untracked`, without duplicate detection), FAID_MERGE_RANGES
 * ranges in an end's list of missing frames (the count stays exact). */
#define FAID_MERGE_MAX_INSTANCES  64
#define FAID_MERGE_SERIES         8
#define FAID_MERGE_TRACKED_IDS    (1ull << 24)
#define FAID_MERGE_RANGES         256
#define FAID_MERGE_DEFAULT_WINDOW 256

typedef struct faid_merge_opts {
    int window;          /* results held for reordering, 0 = FAID_MERGE_DEFAULT_WINDOW */
    size_t window_bytes; /* bytes of results held, 0 = 256 MiB */
    int max_wait_ms;     /* longest a result waits for older frames, 0 = 2000, -1 = no limit */
    int dead_after_ms;   /* an instance silent this long ends its part of its series, 0 = 10000 */
    const char *fan;     /* the fan-out's PUB endpoint (its `lost` reports), NULL = none */
    int rcvhwm;          /* each subscriber's receive high-water mark, 0 = ZeroMQ's default */
    int64_t max_message_bytes;    /* largest message taken from a peer, 0 = 64 MiB */
    const faid_curve_keys *curve; /* CURVE keys for every connection, NULL = plain */
} faid_merge_opts;

typedef enum {
    FAID_MERGE_START = 1, /* a series' start (the first instance's message) */
    FAID_MERGE_RESULT,    /* a result, in frame order (late: older than the window) */
    FAID_MERGE_END,       /* the merged end (end below; no message body) */
    FAID_MERGE_OTHER,     /* an instance's error, stats or aggregates, as it came */
    FAID_MERGE_LOST,      /* the fan-out's `lost` report (lost below; msg.body its bytes) */
    FAID_MERGE_MISMATCH,  /* an instance's start differs from the series' (text says how) */
} faid_merge_kind;

/* The merged end of a series. */
typedef struct faid_merge_end {
    uint64_t series_id;
    char series_unique_id[FAID_SERIES_UID_MAX];
    int instances;           /* instances that started (or sent results of) the series */
    int ended, silent, lost; /* ... of which: sent their end, fell silent, reported lost */
    uint64_t frames_received, frames_processed, frames_failed, frames_dropped, stale_messages;
    int incomplete;     /* an instance's end said incomplete, or one never ended */
    uint64_t delivered; /* results delivered */
    uint64_t late, duplicates, refused, untracked;
    uint64_t expected; /* frames the series should have (see above), 0: unknown */
    uint64_t missing;  /* frames never seen */
    int fan_report;    /* expected and missing come from the fan-out's routed and lost reports */
    uint64_t lost_delivered; /* frames a lost report named whose result was delivered */
    uint64_t ranges[FAID_MERGE_RANGES][2]; /* the missing frames, [first, last] each */
    int nranges;
    int ranges_truncated; /* more ranges than kept */
} faid_merge_end;

/* A fan-out's `lost` report: frames of a series handed to an instance that did not process
 * them. frames: ids and [first, last] ranges, as [first, last] pairs (at most
 * FAID_MERGE_RANGES kept; nframes counts them all). */
typedef struct faid_merge_lost {
    uint64_t series_id;
    char instance[128];
    uint64_t ranges[FAID_MERGE_RANGES][2];
    int nranges, truncated;
    uint64_t nframes;
} faid_merge_lost;

typedef struct faid_merge_msg {
    faid_merge_kind kind;
    int source; /* index of the endpoint it came from (the order given), -1: merged, fan-out */
    char instance[128];   /* the instance's `instance` stamp, "" when not known */
    faid_sub_msg msg;     /* START, RESULT, OTHER, LOST: the message (views valid until the next
                           * faid_merge_next or destruction) */
    int late;             /* RESULT: delivered after newer frames */
    faid_merge_end end;   /* END */
    faid_merge_lost lost; /* LOST */
    char text[512];       /* MISMATCH: what differs */
} faid_merge_msg;

typedef struct faid_merge faid_merge;

/* Connects to n instance PUB endpoints (1..FAID_MERGE_MAX_INSTANCES) and o->fan. */
faid_merge *faid_merge_new(const char *const *endpoints, int n, const faid_merge_opts *o,
                           faid_diag *d);
void faid_merge_destroy(faid_merge **m);
/* The next message of the merged stream, waiting at most timeout_ms (-1: forever):
 * FAID_ETIMEOUT when none is due; FAID_EFORMAT / FAID_EPROTO when an instance's message could
 * not be decoded (consumed and counted; the stream goes on); FAID_EZMQ / FAID_EAUTH on a socket
 * failure. */
int faid_merge_next(faid_merge *m, int timeout_ms, faid_merge_msg *out, faid_diag *d);
/* The series information of the start of series_id delivered last (for .dat files), or NULL. */
const faid_series_info *faid_merge_series_of(const faid_merge *m, uint64_t series_id);
/* Parses a fan-out's `lost` message body (map: series (uint), instance (str), frames (array of
 * uint or [first, last])). FAID_EFORMAT / FAID_ETRUNC naming the key at fault. */
int faid_merge_parse_lost(const uint8_t *body, size_t len, faid_merge_lost *out, faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Aggregates summed over instances (proto/PROTOCOL.md 3.4a and 3.8): each instance's `aggregates`
 * message (frames, hits and peaks with a peak search, the num_peaks histogram, the virtual
 * powder pattern) added into one sum: counts and histogram bins add, the powder patterns add
 * pixel by pixel (decoded from bitshuffle-LZ4), the windowed hit rate is the instances' hit
 * rates weighted by the frames each window holds. Instances must agree on the histogram's bin
 * width and length and on the powder's shape (FAID_ESHAPE otherwise, naming what differs). */
#define FAID_AGGR_MAX_PIXELS                                                                       \
    (1ull << 28) /* powder pixels accepted (a 65536^2 claim is refused)                            \
                  */
#define FAID_AGGR_MAX_BINS 4096

typedef struct faid_aggr_sum {
    int instances; /* messages added */
    uint64_t frames, hits, peaks;
    uint64_t window_frames; /* frames the instances' hit-rate windows hold */
    double hit_rate;        /* over those windows, weighted by their frames */
    uint64_t bin_width, nbins;
    uint64_t *histogram; /* nbins (owned) */
    uint64_t rows, cols;
    uint64_t *powder;   /* rows * cols (owned), NULL until a message brought one */
    double window_hits; /* internal: sum of hit_rate x window frames */
} faid_aggr_sum;

/* Adds one aggregates message body. On an error nothing is added. */
int faid_aggr_add(faid_aggr_sum *s, const uint8_t *body, size_t len, faid_diag *d);
/* Releases what s owns and zeroes it. */
void faid_aggr_clear(faid_aggr_sum *s);

/* ---------------------------------------------------------------------------------------------
 * Control. */
typedef struct faid_ctl faid_ctl;

/* A reply: the msgpack map as received (owned by the faid_ctl, valid until its next call). */
typedef struct faid_ctl_reply {
    const uint8_t *body;
    size_t len;
    int ok;          /* the reply's "ok" */
    char error[512]; /* the reply's "error" when !ok, else "" */
} faid_ctl_reply;

/* Prepares a REQ socket to endpoint; timeout_ms bounds every call (> 0). Connecting does not wait
 * for the daemon: a missing daemon shows as FAID_ETIMEOUT at the first call. */
faid_ctl *faid_ctl_new(const char *endpoint, int timeout_ms, faid_diag *d);
/* The same with CURVE keys (NULL = plain). A timeout then says that faid did not answer and
 * that authentication may be why; a refused handshake gives FAID_EAUTH at once. */
faid_ctl *faid_ctl_new_curve(const char *endpoint, int timeout_ms, const faid_curve_keys *curve,
                             faid_diag *d);
void faid_ctl_destroy(faid_ctl **c);
/* Sends q and waits for the reply. FAID_ETIMEOUT with "no answer from faid at ENDPOINT within S s
 * (..., authentication?)" when none came (the socket is then renewed, so the next call works);
 * FAID_EAUTH at once when the handshake was refused (see CURVE above); FAID_EPROTO when the reply
 * is not a control reply. A reply with ok == false still returns 0: check r->ok. */
int faid_ctl_call(faid_ctl *c, const faid_ctl_request *q, faid_ctl_reply *r, faid_diag *d);
const char *faid_ctl_endpoint(const faid_ctl *c);
/* Writes a reply map for people: nested "key: value" lines without the bookkeeping keys (ok, cmd),
 * multi-line text as an indented block, the "config" YAML as it is, long arrays elided; "ok" when
 * nothing else is left. FAID_EFORMAT / FAID_ETRUNC on a malformed reply. */
int faid_ctl_reply_print(FILE *f, const uint8_t *body, size_t len, faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Sender of the native input protocol. */
typedef struct faid_sender faid_sender;

/* A PUSH socket that connects to endpoint (or binds it when bind != 0). timeout_ms bounds each send
 * (the receiver absent or not keeping up) and the final flush in destroy; -1 waits forever.
 * sndhwm 0 = the ZeroMQ default. */
faid_sender *faid_sender_new(const char *endpoint, int bind, int sndhwm, int timeout_ms,
                             faid_diag *d);
/* The same with CURVE keys (NULL = plain; only when connecting: a bound sender is what faid's
 * connect-mode input reaches, which stays plain). A send that cannot leave because the handshake
 * was refused fails with FAID_EAUTH at once. */
faid_sender *faid_sender_new_curve(const char *endpoint, int bind, int sndhwm, int timeout_ms,
                                   const faid_curve_keys *curve, faid_diag *d);
/* Waits up to the timeout for queued messages to leave, then closes. Zero-copy payloads may be
 * freed once this returned. */
void faid_sender_destroy(faid_sender **s);
/* Sends a single-part start or end message (h->type FAID_IN_START or FAID_IN_END). */
int faid_sender_series(faid_sender *s, const faid_in_header *h, faid_diag *d);
/* Sends one image [header, payload]. With zero_copy the payload is handed to ZeroMQ without a
 * copy and must stay unchanged and alive until faid_sender_destroy() returned; otherwise it is
 * copied. FAID_ETIMEOUT when the send could not complete within the timeout. */
int faid_sender_image(faid_sender *s, const faid_in_header *h, const void *payload, size_t len,
                      int zero_copy, faid_diag *d);
/* Sends one message of n parts as they are (other protocols' messages: DECTRIS stream v1/v2).
 * Part zero_copy_part (-1: none) is handed over without a copy, with the same lifetime rule as
 * a zero-copy image payload; the others are copied. */
int faid_sender_parts(faid_sender *s, const void *const *parts, const size_t *lens, int n,
                      int zero_copy_part, faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Profile text files (.dat): `#` header lines, then one line per bin with the columns
 * `radial I sigma std count`:
 *   # faid integrated profile
 *   # unit: q_nm^-1
 *   # software_version: 0.1.0
 *   # config_hash: 0123456789abcdef
 *   # series_id: 1
 *   # frame_id: 7
 *   # setup_version: 1
 *   # columns: q_nm^-1 I sigma std count
 * The radial column has 15 significant digits (float64 bin centres), the others 9, enough to read
 * float32 values back exactly. */
typedef struct faid_dat_meta {
    const char *unit; /* radial unit name */
    const char *software_version;
    const char *config_hash;
    const char *series; /* series name or input file stem, may be NULL */
    int has_series_id;
    uint64_t series_id;
    int has_frame_id;
    uint64_t frame_id;
    int has_setup_version;
    uint64_t setup_version;
    const char *extra; /* more "key: value" header lines, '\n'-separated, or NULL */
} faid_dat_meta;

/* Writes n bins; sigma, std and count may be NULL (written as nan / 0). */
int faid_dat_write(const char *path, const faid_dat_meta *meta, const double *radial,
                   const double *I, const double *sigma, const double *std, const double *count,
                   size_t n, faid_diag *d);
/* The file name both faidctl commands use: DIR/STEM_FFFFF.dat (frame id zero-padded to 5 digits,
 * more digits when larger). Characters of stem outside [A-Za-z0-9._-] become '_'. FAID_ESIZE when
 * it does not fit in cap. */
int faid_dat_path(char *out, size_t cap, const char *dir, const char *stem, uint64_t frame_id,
                  faid_diag *d);
/* The stem of a series for faid_dat_path: its unique id when it has one, else "series<ID>". */
void faid_dat_series_stem(char *out, size_t cap, uint64_t series_id, const char *unique_id);
/* Writes the result m with the series information si (its radial axis when the series start
 * was seen and matches in length, else the bin index with unit "bin"); si may be NULL. */
int faid_result_write_dat(const faid_series_info *si, const faid_out_msg *m, const char *path,
                          faid_diag *d);
/* Writes the 2D cake of result m (I_2d, sigma_2d, count_2d, each (npt_azim, npt)) as float32
 * .npy files DIR/STEM_FFFFF_2d_{I,sigma,count}.npy, named as `faidctl process` names its own
 * (stem cleaned as faid_dat_path does). *nfiles (may be NULL) receives how many were written: 0
 * when the result carries no cake. */
int faid_result_write_2d_npy(const faid_out_msg *m, const char *dir, const char *stem, int *nfiles,
                             faid_diag *d);
/* ---------------------------------------------------------------------------------------------
 * Peak list text files (.peaks), written next to the .dat of the same frame by `faidctl process`
 * and `faidctl sub --out` (identical for the same frame, configuration and device):
 *   # faid peak list
 *   # algorithm: peakfinder8
 *   # cutoff_clip: 0          (every peaks.* parameter in force, as the start message echoes it:
 *   # ...                      numbers printed %.9g, names verbatim, null)
 *   # num_peaks: 12           (every peak found; the lines below may be fewer when the list was
 *   # is_hit: 1                cut at max_num_peaks)
 *   # columns: x y intensity sigma snr npix
 *   512.25 100.5 1234.5 30.1 41.0 9
 * x is the fast-axis (column) and y the slow-axis (row) centroid in pixel-index coordinates: the
 * centre of pixel (row r, column c) is (x = c, y = r), as OM's peakfinder8 reports them. */
typedef struct faid_peaks_meta {
    const char *algorithm;
    const char *params; /* "key: value" lines, '\n'-separated, or NULL */
    uint64_t num_peaks;
    int is_hit;
} faid_peaks_meta;

/* Writes n peaks; columns may be NULL (written as nan / 0). */
int faid_peaks_write(const char *path, const faid_peaks_meta *meta, size_t n, const double *x,
                     const double *y, const double *intensity, const double *sigma,
                     const double *snr, const double *npix, faid_diag *d);
/* DIR/STEM_FFFFF.peaks, named as faid_dat_path names the .dat of the frame. */
int faid_peaks_path(char *out, size_t cap, const char *dir, const char *stem, uint64_t frame_id,
                    faid_diag *d);
/* Appends "key: value\n" to buf (capacity cap, NUL-terminated) in the canonical form of a
 * .peaks header: value a number (num, is_num) printed %.9g, else str verbatim, NULL as null. */
void faid_peaks_param_line(char *buf, size_t cap, const char *key, int is_num, double num,
                           const char *str);

/* Writes the peaks of result m (it must carry num_peaks) as DIR/STEM_FFFFF.peaks with the
 * parameters of the series si (its start message); FAID_EINVAL when m carries no peaks. */
int faid_result_write_peaks(const faid_series_info *si, const faid_out_msg *m, const char *dir,
                            const char *stem, faid_diag *d);

/* The same with the series information of s. */
int faid_sub_write_dat(const faid_sub *s, const faid_sub_msg *msg, const char *path, faid_diag *d);

#endif
