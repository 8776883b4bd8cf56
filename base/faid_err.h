/* faid_err: the one table of error codes. Every faid function that can fail returns 0 or one of
 * these negative codes; FAID_ERRORS is an X-macro so that the enum, the symbolic names and the
 * human texts cannot drift apart. A faid_diag carries the human message of the failure that names
 * the file, key, line or frame at fault; it may be NULL when the caller only needs the code. */
#ifndef FAID_ERR_H
#define FAID_ERR_H

#include <stddef.h>

#define FAID_ERRORS(X)                                                                             \
    X(FAID_OK, 0, "success")                                                                       \
    X(FAID_ENOMEM, -1, "out of memory")                                                            \
    X(FAID_EINVAL, -2, "invalid argument")                                                         \
    X(FAID_EIO, -3, "input/output error")                                                          \
    X(FAID_EFORMAT, -4, "malformed input")                                                         \
    X(FAID_ETRUNC, -5, "truncated input")                                                          \
    X(FAID_ECORRUPT, -6, "corrupt compressed data")                                                \
    X(FAID_ESIZE, -7, "size mismatch")                                                             \
    X(FAID_EDTYPE, -8, "unsupported data type")                                                    \
    X(FAID_ESHAPE, -9, "shape mismatch")                                                           \
    X(FAID_ECONFIG, -10, "invalid configuration")                                                  \
    X(FAID_ECL, -11, "OpenCL error")                                                               \
    X(FAID_ENODEV, -12, "no such device")                                                          \
    X(FAID_EUNSUP, -13, "unsupported feature")                                                     \
    X(FAID_ERANGE, -14, "value out of range")                                                      \
    X(FAID_EZMQ, -15, "ZeroMQ error")                                                              \
    X(FAID_EPROTO, -16, "protocol error")                                                          \
    X(FAID_EBUSY, -17, "resource busy")                                                            \
    X(FAID_ETIMEOUT, -18, "timed out")                                                             \
    X(FAID_ESTOPPED, -19, "stopped")                                                               \
    X(FAID_EAUTH, -20, "authentication failed")

enum faid_error {
#define FAID_ERR_ENUM(name, value, text) name = value,
    FAID_ERRORS(FAID_ERR_ENUM)
#undef FAID_ERR_ENUM
};

/* Symbolic name ("FAID_ECORRUPT") and text ("corrupt compressed data") of a code. */
const char *faid_errname(int code);
const char *faid_strerror(int code);

typedef struct faid_diag {
    int code;
    char msg[1024];
} faid_diag;

/* Records code and a printf-style message in d (if not NULL) and returns code, so a failure
 * reads `return faid_fail(d, FAID_EFORMAT, "%s: bad magic", path);`. */
int faid_fail(faid_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes the message already in d with more context ("frame 12: " + old message). */
void faid_diag_prefix(faid_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void faid_diag_clear(faid_diag *d);

#endif
