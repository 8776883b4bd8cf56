/* faid_cbor: a bounds-checked CBOR cursor over received bytes, on top of libcbor's streaming
 * decoder (which decodes one item head per call and allocates nothing). It adds what a network
 * reader needs and libcbor leaves to its caller: the rule that a container's item count can never
 * exceed the bytes left (so a hostile count costs nothing: no allocation is ever sized by it, and
 * a skip ends within the buffer), iterative skipping without recursion, and byte and text strings
 * handed out as views into the buffer (no copy). Indefinite-length arrays and maps (0x9f / 0xbf
 * ... break 0xff) are read: Jungfraujoch's encoder (tinycbor) writes its message maps and some
 * nested containers so, as the number of optional fields varies. Such a container's head has
 * indef = 1 and u = 0; its items are walked with faid_cbr_more, and since every item takes at
 * least one byte the walk ends within the buffer. Indefinite-length (chunked) byte and text
 * strings stay refused: they could not be viewed in place, and no known encoder of these streams
 * writes them. */
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
    FAID_CB_BREAK, /* 0xff, the end of an indefinite-length container */
} faid_cb_type;

/* Deepest nesting of indefinite-length containers faid_cbr_skip walks (definite ones need no
 * stack: their counts add up in one counter). */
#define FAID_CB_MAX_INDEF_DEPTH 64

typedef struct faid_cb_obj {
    faid_cb_type type;
    uint64_t u;
    double f;
    int b;
    const uint8_t *ptr; /* BYTES, TEXT: inside the reader's buffer */
    size_t len;
    int indef; /* ARRAY, MAP: indefinite length (u = 0; items end at a BREAK) */
} faid_cb_obj;

typedef struct faid_cbr {
    const uint8_t *p;
    const uint8_t *end;
} faid_cbr;

void faid_cbr_init(faid_cbr *r, const void *buf, size_t len);
/* Reads one item head: scalars and strings whole, containers and tags only their head. */
int faid_cbr_next(faid_cbr *r, faid_cb_obj *o, faid_diag *d);
/* Walks container c (whose head was just read by faid_cbr_next), k being the number of items
 * (arrays) or pairs (maps) already read: *more = 1 while another follows. For an indefinite
 * container it peeks at the next byte and consumes the break; input that ends first is
 * FAID_ETRUNC naming `what` (a missing break never hangs: the walk ends with the buffer). */
int faid_cbr_more(faid_cbr *r, const faid_cb_obj *c, uint64_t k, int *more, const char *what,
                  faid_diag *d);
/* 1 when o is an array that may hold exactly n items (definite with u == n, or indefinite). */
int faid_cb_array_of(const faid_cb_obj *o, uint64_t n);
/* After the n items of an array accepted by faid_cb_array_of: reads the break of an indefinite
 * one (FAID_EFORMAT naming `what` when more items follow); nothing for a definite one. */
int faid_cbr_end(faid_cbr *r, const faid_cb_obj *c, const char *what, faid_diag *d);
/* Skips one complete item (tags, containers and all their children). */
int faid_cbr_skip(faid_cbr *r, faid_diag *d);

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
 * refused. msgpack needs a container's count up front: an indefinite-length one is counted first
 * by a skipping scan over a copy of the cursor (bounded by the bytes of that container; nested
 * indefinite containers are rescanned once per level, at most FAID_MP_MAX_DEPTH times). w's
 * overflow is reported by faid_mpw_finish as usual. */
int faid_cbor_to_msgpack(faid_cbr *r, faid_mpw *w, faid_diag *d);

#endif
