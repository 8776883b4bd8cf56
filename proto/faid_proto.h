/* faid_proto: the wire protocol of faid in C, shared by the daemon and the clients, so that every
 * key, topic and array layout has exactly one definition. proto/PROTOCOL.md is the normative
 * description; this header is its C form.
 *
 * It has three layers:
 *   1. a msgpack writer (msgpack-c's packer into a caller buffer, never allocates, map sizes
 *      counted by the writer) and a reader (a cursor over received bytes, never allocates,
 *      depth-limited), so the hot path allocates nothing and no byte sequence can make a decoder
 *      read out of bounds;
 *   2. the native input protocol: the header map of a [header, payload] multipart image message
 *      and the single-part series start/end messages (encode for senders, decode for the daemon);
 *   3. the output messages (start, result, end, stats, error; first key always "type") and the
 *      control requests and replies, with the key names as macros and a generic decoder for
 *      subscribers.
 *
 * Strings handed out by decoders point into the caller's buffer (no copy): keep the buffer alive
 * while the decoded view is used. */
#ifndef FAID_PROTO_H
#define FAID_PROTO_H

#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_err.h"
#include "faid_proto_keys.h"
#include "faid_proto_table.h"

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* Version of the wire protocol, echoed as "protocol_version" in every native input header (the
 * daemon rejects other major versions) and in every output "start" and control reply. */
#define FAID_PROTO_VERSION 1
/* "magic_number" in start messages, as Jungfraujoch does to detect sender/receiver skew. */
#define FAID_PROTO_MAGIC 0x46414944u /* "FAID" */

/* ---------------------------------------------------------------------------------------------
 * Topics of the PUB socket (first frame of every output message). None is a prefix of another,
 * so a subscription to one topic never matches a different one. */
#define FAID_TOPIC_START  "start"
#define FAID_TOPIC_RESULT "result"
#define FAID_TOPIC_END    "end"
#define FAID_TOPIC_STATS  "stats"
#define FAID_TOPIC_ERROR  "error"
/* Only on the lossless channel (ROUTER/DEALER, PROTOCOL.md 3.6): faid's answers to a hello. */
#define FAID_TOPIC_WELCOME    "welcome"
#define FAID_TOPIC_REFUSED    "refused"
#define FAID_TOPIC_AGGREGATES "aggregates" /* peaks on: hit rate, peak counts, powder pattern */

/* ---------------------------------------------------------------------------------------------
 * Keys: FAID_K_<ID> ("series_id", ...) and FAID_KEY_<ID>, from the one table of every key of
 * every message (faid_proto_keys.h), which also generates the key tables of PROTOCOL.md. */

/* The table's rows, key names and lookup, message markers and markdown: faid_proto_table.h. */
/* Checks that the map at the start of buf has only keys the table lists for message m (or for
 * `also`, a second message whose keys the same map carries: a status reply is a control reply
 * and the status body; FAID_NPMSGS for none) and every key REQ for m. FAID_EFORMAT naming the
 * key otherwise. For tests: a message and its table cannot drift apart unnoticed. */
int faid_proto_check_keys(faid_proto_msg m, faid_proto_msg also, const void *buf, size_t len,
                          faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * msgpack writer: msgpack-c's packer (msgpack_packer) with a write callback into a caller buffer
 * (never allocates). On overflow it stops writing, sets `overflow` and every later call is a
 * no-op, so a message is built without checking each call and validated once with
 * faid_mpw_finish().
 *
 * Map sizes are counted by the writer: faid_mpw_map_begin() ... faid_mpw_map_end() writes the
 * number of key/value pairs written in between (as a map 16 head, 3 bytes, patched at the end),
 * so no encoder counts its keys by hand. The writer tracks every container (begin/end and the
 * fixed-size faid_mpw_map(n) / faid_mpw_array(n) alike) and faid_mpw_finish() refuses a message
 * whose containers do not close (a key without value, an end without begin, fewer items than a
 * fixed head promised).
 *
 * Why msgpack-c's packer and not bytes by hand: it is the design card's library, and it costs
 * little: `faid-bench --proto-encode` (tests/bench/proto_encode.c, thread CPU time, 2 shared
 * cores) wrote a 1000-bin 1D result (16.5 KB) in 1.17 us against 1.00 us by hand, +0.15 us per
 * result (+0.45 us with 100 peaks), and the begin/end counting added nothing measurable
 * (tests/bench/README.md). */
#define FAID_MPW_COUNTED  1
#define FAID_MPW_MAX_OPEN 48 /* nested containers a writer tracks (> FAID_MP_MAX_DEPTH) */

typedef struct faid_mpw_frame {
    uint32_t want;  /* items the container holds; UINT32_MAX: begun, counted until its end */
    uint32_t items; /* items written so far */
    size_t head;    /* offset of its head (begun maps: patched at the end) */
} faid_mpw_frame;

typedef struct faid_mpw {
    uint8_t *buf;
    size_t cap;
    size_t len;
    int overflow;
    int bad; /* containers unbalanced: a programming error, reported by faid_mpw_finish */
    int depth;
    faid_mpw_frame open[FAID_MPW_MAX_OPEN];
    msgpack_packer pk;
} faid_mpw;

void faid_mpw_init(faid_mpw *w, void *buf, size_t cap);
/* 0, FAID_ESIZE when the buffer was too small (len then tells nothing useful), or FAID_EINVAL
 * when the containers written do not close. */
int faid_mpw_finish(const faid_mpw *w, faid_diag *d);

void faid_mpw_nil(faid_mpw *w);
void faid_mpw_bool(faid_mpw *w, int v);
void faid_mpw_uint(faid_mpw *w, uint64_t v);
void faid_mpw_int(faid_mpw *w, int64_t v);
void faid_mpw_f64(faid_mpw *w, double v);
void faid_mpw_str(faid_mpw *w, const char *s);
/* Strings: bytes that are not valid UTF-8 are written as U+FFFD, so every str faid sends decodes
 * with strict decoders. */
void faid_mpw_strn(faid_mpw *w, const char *s, size_t n);
/* A str faid knows to be ASCII (a FAID_K_* key, a fixed name): written without the UTF-8 scan. */
void faid_mpw_key(faid_mpw *w, const char *k);
void faid_mpw_bin(faid_mpw *w, const void *p, size_t n);
/* A bin head of n bytes; the n bytes follow through faid_mpw_bytes(). */
void faid_mpw_bin_head(faid_mpw *w, size_t n);
void faid_mpw_array(faid_mpw *w, uint32_t n);
/* A map of n pairs: for maps whose size comes from data (a CBOR map converted, n counters of a
 * table); an encoder's own maps use begin/end. */
void faid_mpw_map(faid_mpw *w, uint32_t n);
void faid_mpw_map_begin(faid_mpw *w);
void faid_mpw_map_end(faid_mpw *w);
/* Appends bytes that already are one complete msgpack value (pass-through of user_data). */
void faid_mpw_raw(faid_mpw *w, const void *p, size_t n);
/* Appends bytes that are part of a value begun before (the body after faid_mpw_bin_head). */
void faid_mpw_bytes(faid_mpw *w, const void *p, size_t n);
/* An array map {dtype, shape, data}; dtype is a numpy descriptor such as "<f4". */
void faid_mpw_ndarray(faid_mpw *w, const char *dtype, const uint64_t *shape, int ndim,
                      const void *data, size_t nbytes);
/* A float32 array map of the transpose of data[rows][cols]: shape [cols, rows]. */
void faid_mpw_ndarray_f32_transposed(faid_mpw *w, const float *data, uint64_t rows, uint64_t cols);

/* ---------------------------------------------------------------------------------------------
 * msgpack reader: a bounded cursor, for everything that arrives from the network (input headers,
 * control and lossless requests, and the first walk of every message a client receives).
 *
 * Why not msgpack-c's unpacker for untrusted bytes: it reserves memory for a container's claimed
 * size before reading any of it. Five bytes, df 00 aa aa aa (a map claiming 11 million pairs),
 * made it malloc 512 MiB; df ff ff ff ff asked for 256 GiB. The cursor allocates nothing and
 * checks each claim against the bytes left (faid_mpr_skip). Clients decode faid's messages with
 * msgpack-c (faid_proto_decode_output), each value only after the cursor walked it. */
typedef enum {
    FAID_MP_NIL = 0,
    FAID_MP_BOOL,
    FAID_MP_UINT,
    FAID_MP_INT, /* negative integers only */
    FAID_MP_FLOAT,
    FAID_MP_STR,
    FAID_MP_BIN,
    FAID_MP_ARRAY,
    FAID_MP_MAP,
    FAID_MP_EXT,
} faid_mp_type;

typedef struct faid_mp_obj {
    faid_mp_type type;
    int b;
    uint64_t u;
    int64_t i;
    double f;
    const uint8_t *ptr; /* STR, BIN, EXT: the bytes (inside the reader's buffer) */
    uint32_t len;       /* STR, BIN, EXT: byte length; ARRAY: items; MAP: pairs */
    int8_t ext_type;
} faid_mp_obj;

/* Nesting deeper than this is rejected (protects the recursive skip, and strict decoders:
 * user_data nested 3000 deep made Python's msgpack raise StackError). */
#define FAID_MP_MAX_DEPTH 32

typedef struct faid_mpr {
    const uint8_t *p;
    const uint8_t *end;
} faid_mpr;

void faid_mpr_init(faid_mpr *r, const void *buf, size_t len);
/* Reads the next item's head: scalars whole, STR/BIN/EXT with their bytes, ARRAY/MAP only their
 * count (the items follow). FAID_ETRUNC / FAID_EFORMAT on bad bytes. */
int faid_mpr_next(faid_mpr *r, faid_mp_obj *o, faid_diag *d);
/* Skips one complete item (with all its children). */
int faid_mpr_skip(faid_mpr *r, faid_diag *d);
/* Reads one complete value at r and checks what every strict decoder (Python msgpack with its
 * defaults) needs: each str valid UTF-8, map keys str or bin, no ext types, containers nested at
 * most max_depth deep (<= FAID_MP_MAX_DEPTH). Errors name `what` and the byte offset. */
int faid_mp_check_value(faid_mpr *r, int max_depth, const char *what, faid_diag *d);
/* True when the n bytes at s are strict UTF-8 (no overlongs, surrogates or code points above
 * U+10FFFF), as Python decodes it. */
int faid_utf8_valid(const void *s, size_t n);
/* True when o is a STR equal to s. */
int faid_mp_str_eq(const faid_mp_obj *o, const char *s);
/* Numeric conversions; FAID_EFORMAT when o is not a number representable in the target. */
int faid_mp_to_u64(const faid_mp_obj *o, uint64_t *out);
int faid_mp_to_i64(const faid_mp_obj *o, int64_t *out);
int faid_mp_to_f64(const faid_mp_obj *o, double *out);
/* Copies a STR into out (NUL-terminated); FAID_ESIZE if it does not fit, FAID_EFORMAT if not STR.
 */
int faid_mp_to_cstr(const faid_mp_obj *o, char *out, size_t cap);

/* Looks key up in the top-level map of buf; on success *val holds the value's head and, for
 * containers, *at is positioned on its first child (at may be NULL). FAID_ERANGE if absent. */
int faid_proto_map_find(const void *buf, size_t len, const char *key, faid_mp_obj *val,
                        faid_mpr *at, faid_diag *d);

/* A decoded array map (view into the message). */
#define FAID_PROTO_MAX_DIMS 4
typedef struct faid_array_view {
    faid_dtype dtype;
    char descr[8]; /* as sent, e.g. "<f4" */
    int ndim;
    uint64_t shape[FAID_PROTO_MAX_DIMS];
    uint64_t nelem;
    const uint8_t *data; /* little-endian, unaligned: memcpy before use */
    size_t nbytes;
} faid_array_view;

/* Reads an array map at the reader (which must be positioned on the map head). Checks that data
 * holds exactly nelem * itemsize bytes of a little-endian (or single-byte) dtype. */
int faid_proto_read_array(faid_mpr *r, faid_array_view *a, faid_diag *d);

/* Renders one msgpack value as JSON text (bin as {"bin": N bytes}, arrays longer than max_items
 * elided with "..."); for faidctl sub/status. out is always NUL-terminated; FAID_ESIZE when cut. */
int faid_mp_to_json(const void *buf, size_t len, char *out, size_t cap, int max_items,
                    faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Native input protocol. An image is a 2-part ZeroMQ message [header map, payload]; start and end
 * are 1-part messages holding only the header map. */
typedef enum {
    FAID_IN_INVALID = 0,
    FAID_IN_START,
    FAID_IN_IMAGE,
    FAID_IN_END,
    FAID_IN_OTHER, /* a message type faid has no use for (faid_input.h: Jungfraujoch extras) */
} faid_in_type;

#define FAID_SERIES_UID_MAX 64

typedef struct faid_in_header {
    faid_in_type type;
    uint32_t protocol_version;
    uint64_t series_id;
    char series_unique_id[FAID_SERIES_UID_MAX]; /* "" when absent */
    /* image only */
    int has_frame_id; /* set even when decoding fails later, for the error reply */
    uint64_t frame_id;
    int rows, cols;
    faid_dtype dtype;
    faid_encoding encoding;
    /* optional */
    int has_timestamp;
    double timestamp; /* s since the epoch */
    int has_start_time, has_stop_time, has_real_time;
    uint64_t start_time[2], stop_time[2], real_time[2]; /* numerator, denominator */
    int64_t nimages;                                    /* start: -1 when absent */
    const uint8_t *user_data; /* raw msgpack value inside the header buffer, or NULL */
    size_t user_data_len;
} faid_in_header;

/* Returns the message type name ("start", "image", "end"). */
const char *faid_in_type_name(faid_in_type t);
/* True when the first bytes look like a msgpack map (native protocol candidate). */
int faid_proto_is_native(const void *buf, size_t len);
/* Decodes and validates a header. Unknown keys are ignored (forward compatibility). Failures name
 * the key; h->has_frame_id/frame_id are set as soon as the frame id was read. */
int faid_proto_decode_input(const void *buf, size_t len, faid_in_header *h, faid_diag *d);
/* Encodes a header (for senders: faidctl replay, tests). */
int faid_proto_encode_input(const faid_in_header *h, void *buf, size_t cap, size_t *out_len,
                            faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Output messages. The daemon's encoders live beside the daemon (they need its state); the shapes
 * of the messages are specified in PROTOCOL.md. Subscribers decode them with this generic view. */
typedef enum {
    FAID_OUT_INVALID = 0,
    FAID_OUT_START,
    FAID_OUT_RESULT,
    FAID_OUT_END,
    FAID_OUT_STATS,
    FAID_OUT_ERROR,
    FAID_OUT_AGGREGATES,
} faid_out_type;

const char *faid_out_type_name(faid_out_type t); /* == topic */
faid_out_type faid_out_type_parse(const char *name, size_t len);

#define FAID_OUT_EXTRA 16

typedef struct faid_out_msg {
    faid_out_type type;
    uint64_t series_id;
    int has_frame_id;
    uint64_t frame_id;
    uint64_t setup_version;
    uint64_t msg_number;
    /* result */
    faid_array_view I, sigma, std, count;
    faid_array_view I_2d, sigma_2d, count_2d; /* cake (npt_azim, npt); nelem 0 without one */
    double latency_us;
    int device;
    /* result with peaks (has_peaks: num_peaks was present) */
    int has_peaks;
    uint64_t num_peaks;
    int is_hit;
    faid_array_view peak_x, peak_y, peak_intensity, peak_sigma, peak_snr, peak_npix, peak_max_pixel;
    faid_array_view bg_I, bg_sigma, bg_std, bg_count;
    /* result: the other arrays, by key as sent (outputs this decoder has no field for, e.g. of a
     * newer daemon: any array map under a key not above), in message order; at most
     * FAID_OUT_EXTRA, later ones are skipped */
    struct {
        char key[48]; /* cut at 47 bytes */
        faid_array_view a;
    } extra[FAID_OUT_EXTRA];
    int nextra;
    /* start */
    faid_array_view radial;
    char unit[32];
    /* start with peaks: algorithm and the parameters as .peaks header lines ("key: value\n",
     * numbers %.9g, names verbatim, null), "" without peaks */
    char peaks_algorithm[32];
    char peaks_params[2048];
    /* error */
    char code[32];
    char message[512];
    char stage[32];
} faid_out_msg;

/* Decodes the fields above from an output message body (the part after the topic). Missing
 * optional fields stay zero; arrays absent have nelem 0. The top-level map is walked by the
 * cursor reader; each value the view holds is decoded by msgpack-c (switching on the key table's
 * faid_key), once the cursor checked that its claims fit in the bytes. */
int faid_proto_decode_output(const void *buf, size_t len, faid_out_msg *m, faid_diag *d);
/* The array of result m under key (a field above or one of m->extra), NULL when absent. */
const faid_array_view *faid_out_msg_array(const faid_out_msg *m, const char *key);

/* Encoders shared by the daemon and tests. Each writes one complete map. */
typedef struct faid_out_error {
    uint64_t series_id;
    int has_frame_id;
    uint64_t frame_id;
    int code; /* faid error code */
    const char *stage;
    const char *message;
    uint64_t msg_number;
} faid_out_error;
void faid_proto_write_error(faid_mpw *w, const faid_out_error *e);

/* ---------------------------------------------------------------------------------------------
 * Control socket (REQ/REP). A request is a msgpack map {"cmd": NAME, ...arguments}; a bare text
 * frame "status" is accepted too (for shells: zmq tools, netcat-style). Every reply is a msgpack
 * map whose first keys are "ok" (bool) and "cmd"; on failure "error" holds the reason. */
typedef enum {
    FAID_CTL_INVALID = 0,
    FAID_CTL_STATUS,
    FAID_CTL_CONFIG,
    FAID_CTL_RELOAD,
    FAID_CTL_RESET,
    FAID_CTL_STOP,
    FAID_CTL_PING,
    FAID_CTL_WRITER, /* the writer's target (directory, file prefix) for the next series */
} faid_ctl_cmd;

const char *faid_ctl_cmd_name(faid_ctl_cmd c);
faid_ctl_cmd faid_ctl_cmd_parse(const char *name, size_t len);

typedef struct faid_ctl_request {
    faid_ctl_cmd cmd;
    char path[1024]; /* reload: optional configuration file to read instead of the current one */
    char key[128];   /* config: optional option name ("integration.npt"): reply its value only */
    /* writer: the next series' directory and file-name prefix; has_*: the key was sent (absent
     * keys keep the current value, "" returns to writer.directory / no prefix). */
    int has_directory, has_prefix;
    char directory[1024];
    char prefix[64];
} faid_ctl_request;

int faid_proto_encode_request(const faid_ctl_request *q, void *buf, size_t cap, size_t *out_len,
                              faid_diag *d);
int faid_proto_decode_request(const void *buf, size_t len, faid_ctl_request *q, faid_diag *d);

/* ---------------------------------------------------------------------------------------------
 * Lossless channel (PROTOCOL.md 3.6): what a consumer's DEALER sends to faid's ROUTER, one
 * msgpack map per message. A hello starts a session (faid re-sends everything unacknowledged),
 * an ack confirms every message up to msg_number seq and renews the credit (and is the
 * consumer's heartbeat), a bye ends the session. */
typedef enum {
    FAID_LL_INVALID = 0,
    FAID_LL_HELLO,
    FAID_LL_ACK,
    FAID_LL_BYE,
} faid_ll_type;

#define FAID_LL_INSTANCE_MAX 32

typedef struct faid_ll_request {
    faid_ll_type type;
    uint64_t credit; /* unacknowledged messages faid may have outstanding; 0 = unchanged */
    int has_seq;
    uint64_t seq;                        /* last msg_number in hand (cumulative) */
    char instance[FAID_LL_INSTANCE_MAX]; /* faid instance seq refers to; "" = none */
} faid_ll_request;

const char *faid_ll_type_name(faid_ll_type t);
int faid_proto_encode_ll_request(const faid_ll_request *q, void *buf, size_t cap, size_t *out_len,
                                 faid_diag *d);
int faid_proto_decode_ll_request(const void *buf, size_t len, faid_ll_request *q, faid_diag *d);

#endif
