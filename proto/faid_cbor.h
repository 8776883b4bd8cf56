/* faid_cbor: a bounds-checked CBOR cursor over received bytes, on top of libcbor's streaming
 * decoder (which decodes one item head per call and allocates nothing). It adds what a network
 * reader needs and libcbor leaves to its caller: the rule that a container's item count can never
 * exceed the bytes left (so a hostile count costs nothing: no allocation is ever sized by it, and
 * a skip ends within the buffer), iterative skipping without recursion, and byte and text strings
 * handed out as views into the buffer (no copy). Indefinite-length items are refused: DECTRIS
 * and Jungfraujoch encoders write definite lengths, and chunked strings could not be viewed in
 * place. */
#ifndef FAID_CBOR_H
#define FAID_CBOR_H

#include "faid_err.h"
#include "faid_proto.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    FAID_CB_UINT = 0,
    FAID_CB_NEGINT, /* value = -1 - u */
    FAID_CB_BYTES,
    FAID_CB_TEXT,
    FAID_CB_ARRAY, /* u = number of items (follow) */
    FAID_CB_MAP,   /* u = number of pairs (follow) */
    FAID_CB_TAG,   /* u = tag number (the tagged item follows) */
    FAID_CB_FLOAT,
    FAID_CB_BOOL,
    FAID_CB_NULL,
    FAID_CB_UNDEF,
} faid_cb_type;

typedef struct faid_cb_obj {
    faid_cb_type type;
    uint64_t u;
    double f;
    int b;
    const uint8_t *ptr; /* BYTES, TEXT: inside the reader's buffer */
    size_t len;
} faid_cb_obj;

typedef struct faid_cbr {
    const uint8_t *p;
    const uint8_t *end;
} faid_cbr;

void faid_cbr_init(faid_cbr *r, const void *buf, size_t len);
/* Reads one item head: scalars and strings whole, containers and tags only their head. */
int faid_cbr_next(faid_cbr *r, faid_cb_obj *o, faid_diag *d);
/* Skips one complete item (tags, containers and all their children). */
int faid_cbr_skip(faid_cbr *r, faid_diag *d);
/* Skips tags until a non-tag head; *tag receives the innermost tag number read (or -1). */
int faid_cbr_next_untag(faid_cbr *r, faid_cb_obj *o, int64_t *tag, faid_diag *d);

int faid_cb_text_eq(const faid_cb_obj *o, const char *s);
/* Conversions; FAID_EFORMAT (with a message naming `what`) when o is not such a number. */
int faid_cb_to_u64(const faid_cb_obj *o, uint64_t *v, const char *what, faid_diag *d);
int faid_cb_to_i64(const faid_cb_obj *o, int64_t *v, const char *what, faid_diag *d);
int faid_cb_to_f64(const faid_cb_obj *o, double *v, const char *what, faid_diag *d);
/* Copies TEXT into out (NUL-terminated); FAID_ESIZE when longer than cap - 1, FAID_EFORMAT when
 * not text or when it holds a NUL. */
int faid_cb_to_cstr(const faid_cb_obj *o, char *out, size_t cap, const char *what, faid_diag *d);

/* Converts the one CBOR item at r into one msgpack value written to w (for passing a DECTRIS
 * v2 "user_data" through to faid's msgpack output): integers, floats, text (str), bytes (bin),
 * arrays, maps, true/false, null (undefined too) map one to one; tags are dropped and their item
 * kept; negative integers below INT64_MIN become floats. Nesting deeper than FAID_MP_MAX_DEPTH is
 * refused. w's overflow is reported by faid_mpw_finish as usual. */
int faid_cbor_to_msgpack(faid_cbr *r, faid_mpw *w, faid_diag *d);

#endif
