/* faid_keyfile: the CURVE key files of faid and its clients (ZeroMQ CURVE, RFC 26/CurveZMQ).
 * `faidctl keygen NAME` writes NAME.key (public and secret key, mode 0600) and NAME.pub (public
 * key only) in the layout of ZeroMQ's certificate files, so pyzmq's zmq.auth.load_certificate
 * and CZMQ read them too:
 *
 *   #   faid CURVE certificate ...
 *   metadata
 *   curve
 *       public-key = "<40 z85 characters>"
 *       secret-key = "<40 z85 characters>"      (NAME.key only)
 *
 * Readers accept that layout, or a file whose first non-comment line is the bare 40-character
 * z85 key (a public key pasted from elsewhere). Plain C, no ZeroMQ: the key text is checked
 * (length and z85 alphabet) here and decoded by libzmq where it is used. */
#ifndef FAID_KEYFILE_H
#define FAID_KEYFILE_H

#include "faid_err.h"

#include <stddef.h>

#define FAID_Z85_KEY_LEN 40 /* a 32-byte CURVE key in z85 */

typedef struct faid_keytext {
    char public_key[FAID_Z85_KEY_LEN + 1]; /* "" when the file has none */
    char secret_key[FAID_Z85_KEY_LEN + 1]; /* "" when the file has none */
} faid_keytext;

/* Reads a key file (at most 64 KiB). want_secret: the file must hold a secret key (NAME.key),
 * else a public one (NAME.pub, or NAME.key whose public key is then used). A secret key file
 * readable by others than its owner is refused (FAID_ECONFIG), as ssh refuses its keys. */
int faid_keyfile_read(const char *path, int want_secret, faid_keytext *out, faid_diag *d);

/* The parser behind it, on text of len bytes (name for messages): no file, no mode check. */
int faid_keyfile_parse(const char *text, size_t len, const char *name, int want_secret,
                       faid_keytext *out, faid_diag *d);

/* 1 when s is exactly 40 characters of the z85 alphabet. */
int faid_z85_key_valid(const char *s);

/* The public keys of the *.pub files of dir (sorted by file name, other files ignored), in
 * arrays allocated here as they are needed: *keys, and *names when names is not NULL (each
 * file's name without the folder, truncated to 63 bytes); free() both; *n receives how many
 * (both NULL and *n 0 on failure). More than max *.pub files fail with FAID_ESIZE naming the
 * folder, the limit and that more were found (the folder is read no further). A *.pub file that
 * is not a valid key fails the whole read with its name (a typo must not silently lock a client
 * out or in). */
int faid_keyfile_read_dir(const char *dir, size_t max, char (**keys)[FAID_Z85_KEY_LEN + 1],
                          char (**names)[64], size_t *n, faid_diag *d);

/* Writes STEM.key (public and secret key, created with mode 0600) and STEM.pub (public key,
 * 0644); neither may exist yet (FAID_EIO naming the file that does, nothing written). */
int faid_keyfile_write_pair(const char *stem, const char *public_key, const char *secret_key,
                            faid_diag *d);

#endif
