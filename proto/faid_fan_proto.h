/* faid_fan_proto: the link between the fan-out (faid-fan, daemon/fan/) and its instances (faid with
 * input.protocol fan): one ZeroMQ DEALER per instance connected to the fan-out's ROUTER
 * (fan.instances_endpoint). Every message's first part is one msgpack map with "type":
 *
 *   instance -> fan-out
 *     hello   instance (str), config_hash (str, the one `status` reports), window (uint: frames
 *             it may hold), done (uint: frames it has accounted for since it started)
 *     credit  done, window, accounted (the frame ids accounted for since the last credit, as
 *             [series, first, last] ranges, at most FAID_FAN_ACCOUNTED_MAX), config_hash (the
 *             one in force: a reload that changes it is checked again): sent every 100 ms and
 *             whenever done grows; it is the heartbeat too
 *     bye     done, window, accounted: the instance leaves (stop): nothing more is sent to it
 *   fan-out -> instance
 *     welcome the hello is accepted (flagged: true when its config_hash differs and
 *             fan.config_mismatch is flag)
 *     refused error (str): the hello is refused (config_hash differs); the instance retries
 *     rejoin  the fan-out no longer counts the instance (heartbeat timeout): hello again
 *     beat    nothing: the fan-out is alive (every 100 ms to every live instance); an instance
 *             that hears nothing for fan.instance_timeout counts the fan-out gone
 *     route   followed by the parts of one detector message exactly as received: protocol
 *             (str: the detector format, an input.protocol value), kind ("start", "image",
 *             "end", "other"), series_id, frame_id (images), shard and shards (the instance's
 *             place in the series, proto/PROTOCOL.md section "Several instances")
 *
 * The fan-out credits an instance with done + window - sent frames; frames sent and not yet
 * named by an accounted range are the ones reported lost if the instance dies (exactly: the
 * ids, not a count, so several devices finishing out of order change nothing). The decoder reads
 * untrusted bytes (either side's peer): it allocates nothing, bounds every string and ignores keys
 * it does not know (a newer peer's). */
#ifndef FAID_FAN_PROTO_H
#define FAID_FAN_PROTO_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    FAID_FAN_NONE = 0,
    FAID_FAN_HELLO,
    FAID_FAN_CREDIT,
    FAID_FAN_BYE,
    FAID_FAN_WELCOME,
    FAID_FAN_REFUSED,
    FAID_FAN_REJOIN,
    FAID_FAN_ROUTE,
    FAID_FAN_BEAT,
} faid_fan_type;

typedef enum {
    FAID_FAN_KIND_OTHER = 0,
    FAID_FAN_KIND_START,
    FAID_FAN_KIND_IMAGE,
    FAID_FAN_KIND_END,
} faid_fan_kind;

#define FAID_FAN_NAME_MAX 128 /* instance names, bytes with the NUL */
/* The most [series, first, last] ranges one credit carries: 256 ranges are at most 7 KB of
 * msgpack, far under the fan-out's 64 KiB link limit; an instance with more to say sends
 * several credits. */
#define FAID_FAN_ACCOUNTED_MAX 256

typedef struct faid_fan_msg {
    faid_fan_type type;
    /* hello */
    char instance[FAID_FAN_NAME_MAX];
    char config_hash[17];
    /* hello, credit */
    uint64_t window, done;
    /* credit, bye: the frames accounted for since the previous credit, exactly, as inclusive
     * [series_id, first, last] ranges (has_accounted: the key was there, even empty) */
    int has_accounted;
    uint32_t naccounted;
    uint64_t accounted[FAID_FAN_ACCOUNTED_MAX][3];
    /* welcome */
    int flagged;
    /* refused */
    char error[256];
    /* route */
    char protocol[16];
    faid_fan_kind kind;
    uint64_t series_id;
    int has_frame_id;
    uint64_t frame_id;
    uint32_t shard, shards;
} faid_fan_msg;

const char *faid_fan_type_name(faid_fan_type t);
const char *faid_fan_kind_name(faid_fan_kind k);

/* Encodes m into buf (cap bytes); FAID_ESIZE when it does not fit. A route map is at most
 * FAID_FAN_ROUTE_MAX bytes. */
#define FAID_FAN_ROUTE_MAX 160
/* A link message of any type other than route fits in this many bytes. */
#define FAID_FAN_LINK_MAX (512 + FAID_FAN_ACCOUNTED_MAX * 28)
int faid_fan_encode(const faid_fan_msg *m, void *buf, size_t cap, size_t *len, faid_diag *d);

/* Decodes one link message (its first part). FAID_EFORMAT / FAID_ETRUNC / FAID_ESIZE with a
 * message naming the key at fault; a message of an unknown type is FAID_EPROTO. */
int faid_fan_decode(const void *buf, size_t len, faid_fan_msg *m, faid_diag *d);

#endif
