/* faid_proto_table: the key table of faid_proto_keys.h as data, for the decoders and the doc
 * generator: its rows, a key's wire name, a message's marker, the key named by some bytes, and the
 * markdown key table of a message (PROTOCOL.md's, written by faid-protodoc).
 *
 * It stands on the table alone: the decoders of faid_proto.c switch on the faid_key that
 * faid_key_lookup returns, and the checker of a whole message against its rows
 * (faid_proto_check_keys) walks msgpack with faid_proto.c's reader, so it lives there. */
#ifndef FAID_PROTO_TABLE_H
#define FAID_PROTO_TABLE_H

#include "faid_proto_keys.h"

#include <stddef.h>

/* The table's rows (in order), a key's wire name ("" for FAID_KEY_UNKNOWN), a message's marker,
 * and the key named by n bytes at s (FAID_KEY_UNKNOWN when none). */
const faid_proto_row *faid_proto_rows(size_t *n);
const char *faid_key_name(faid_key k);
const char *faid_proto_msg_marker(faid_proto_msg m);
faid_key faid_key_lookup(const void *s, size_t n);
/* The generated markdown table of message m ("| key | type | presence | meaning |" and a row
 * per key); NULL when out of memory. free() it. */
char *faid_proto_msg_markdown(faid_proto_msg m);

#endif
