/* faid_zap: faid's ZeroMQ authentication (ZAP, RFC 27) handler for CURVE. When security.curve is
 * on, every socket faid serves is a CURVE server (faid_server.c sets the keys) and libzmq asks
 * the handler bound at inproc://zeromq.zap.01 of faid's context about each client that completed
 * the CURVE handshake; it answers 200 when the client's public key is one of the *.pub files of
 * security.authorized_keys, else 400. Its own thread serves the requests; the key set is replaced
 * as a whole on reload (under a mutex; a client that connects meanwhile sees the old set or the
 * new one). Connections already authorized stay open after a reload removed their key: ZAP only
 * runs at the handshake. */
#ifndef FAID_ZAP_H
#define FAID_ZAP_H

#include "faid_err.h"

#include <stddef.h>
#include <stdint.h>

/* The most *.pub files security.authorized_keys may hold. Keys are read into memory sized by
 * the count (about 250 bytes each while loading, 96 kept), so the bound only keeps a folder of
 * millions of files from costing start-up time and memory: 4,096 was a limit a facility could
 * hit (issue 20, defect 9: 10,001 keys made faid exit at start). 10,001 keys load in well under a
 * second (docs/security.md). */
#define FAID_ZAP_MAX_KEYS 1000000

typedef struct faid_zap faid_zap;
typedef struct faid_zap_keys faid_zap_keys;

/* Reads the *.pub keys of dir into a new set (NULL on failure, with the file at fault). */
faid_zap_keys *faid_zap_keys_load(const char *dir, faid_diag *d);
void faid_zap_keys_destroy(faid_zap_keys **k);
size_t faid_zap_keys_count(const faid_zap_keys *k);

/* Binds the handler in zctx and starts its thread; takes ownership of keys (even on failure).
 * Must run before the first CURVE socket is bound. */
faid_zap *faid_zap_new(void *zctx, faid_zap_keys *keys, faid_diag *d);
/* Replaces the key set (takes ownership of keys). */
void faid_zap_set_keys(faid_zap *z, faid_zap_keys *keys);
/* Clients let in and refused so far. */
void faid_zap_counts(faid_zap *z, uint64_t *allowed, uint64_t *refused);
/* Stops the thread and closes the handler's socket (before the context terminates). */
void faid_zap_destroy(faid_zap **z);

#endif
