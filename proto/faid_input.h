/* faid_input: the input formats faid reads, behind one interface, so that ingest does not know
 * which detector is talking. A format is an ops table (faid_input_format): its name, a detector
 * that claims a message from its first part, the most parts one of its messages has, and a
 * decoder that turns the parts of one ZeroMQ message into faid's frame header plus a view of the
 * encoded payload (never a copy), or a series event (start with its metadata, end), or a message
 * the format defines but faid has no use for (Jungfraujoch "calibration", "metadata").
 *
 * Formats (input.protocol):
 *   native      faid's own msgpack [header, payload] messages (proto/PROTOCOL.md section 2)
 *   dectris-v1  DECTRIS stream v1: multipart JSON + binary blobs (dheader-1.0, dimage-1.0, ...)
 *   dectris-v2  DECTRIS stream v2 CBOR (self-described tag 55799), Jungfraujoch's extensions
 *   auto        per message: CBOR self-describe tag d9 d9 f7 = v2, a JSON first part with
 *               "htype" = v1, otherwise native
 *
 * Every pointer a decoder hands out (payload, arrays, strings that are not copied) points into
 * the parts given to it: keep those alive while the decoded message is used. Decoders never
 * allocate on behalf of the caller and never read a part beyond the format's max_parts. A failure
 * returns a faid error code with a message that names the part and key at fault.
 *
 * How a receiver uses it, per message:
 *   1. receive the first part; f = faid_input_detect(protocol, first) (NULL with auto: unreadable
 *      input, counted as such; drain the remaining parts);
 *   2. keep the next parts up to f->max_parts, count and drain the rest (nparts = all of them);
 *   3. rc = faid_input_decode(protocol, parts, nparts, &opts, &msg, &d);
 *      rc == 0: msg.h.type START (msg.meta; arrays through faid_input_array_decode), IMAGE
 *      (msg.h + the encoded frame msg.payload / payload_len inside part msg.payload_part: keep
 *      that part as the frame), END, or OTHER (a known message type faid does not use);
 *      rc != 0 and msg.header_ok with an IMAGE: a failed frame of series msg.h.series_id;
 *      otherwise unreadable input;
 *   4. user data for the output: faid_input_user_data(&msg, writer, ...). */
#ifndef FAID_INPUT_H
#define FAID_INPUT_H

#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_err.h"
#include "faid_proto.h"

#include <stddef.h>
#include <stdint.h>

/* The most parts any format's message has (DECTRIS v1 dheader-1.0 with header_detail "all" and a
 * header appendix: 9). A message with more parts than its format's max_parts is an error. */
#define FAID_INPUT_MAX_PARTS 9

/* Channels of a DECTRIS v2 / Jungfraujoch start or image ("threshold_1", "threshold_2",
 * "difference", ...). More are an error naming the key. */
#define FAID_INPUT_MAX_CHANNELS 8
#define FAID_INPUT_NAME_MAX     64

typedef enum {
    FAID_PROTOCOL_AUTO = 0,
    FAID_PROTOCOL_NATIVE,
    FAID_PROTOCOL_DECTRIS_V1,
    FAID_PROTOCOL_DECTRIS_V2,
    /* Not a format: the daemon is an instance behind faid-fan (docs/fan-out.md), and each
     * message's route names its format. No decoder: faid_input_format_of gives NULL. */
    FAID_PROTOCOL_FAN,
} faid_input_protocol;

/* The input.protocol values, indexed by faid_input_protocol and NULL-terminated: "auto", "native",
 * "dectris-v1", "dectris-v2", "fan" (the option table's choices, a format's name in status and
 * logs). */
extern const char *const faid_input_protocol_names[];
/* The protocol named name; -1 when unknown. The name of p, "invalid" when out of range. */
int faid_input_protocol_parse(const char *name, faid_input_protocol *out);
const char *faid_input_protocol_name(faid_input_protocol p);

/* One received part (a ZeroMQ message frame). */
typedef struct faid_input_part {
    const void *data;
    size_t len;
} faid_input_part;

/* A view of an auxiliary array of a start message (pixel mask, flatfield, count-rate table), as
 * sent: possibly compressed. Row-major [rows, cols]; DECTRIS v1 [width, height] shapes are
 * already swapped to [height, width] here. faid_input_array_decode() gives the plain values. */
typedef struct faid_input_array {
    int present;
    faid_dtype dtype;
    int ndim;               /* 1 (count-rate table) or 2 */
    uint64_t shape[2];      /* [rows, cols]; ndim 1: [n, 1] */
    faid_encoding encoding; /* NONE, BSLZ4 (elem_size = dtype size) or LZ4 (HDF5-LZ4 framing) or
                             * LZ4_RAW (v1 "lz4<") */
    const uint8_t *data;    /* inside part `part` */
    size_t len;
    int part;
} faid_input_array;

/* Decodes a into dst, which must hold exactly shape[0] * shape[1] * dtype size bytes
 * (little-endian values, host order on the little-endian hosts faid runs on). */
int faid_input_array_decode(const faid_input_array *a, void *dst, size_t dst_len, faid_diag *d);
/* Bytes a decodes to (0 when not present). */
size_t faid_input_array_bytes(const faid_input_array *a);

/* Which optional metadata fields a start message gave (bits of faid_input_meta.have). */
enum {
    FAID_META_BEAM_CENTER = 1u << 0,        /* beam_center_x, beam_center_y (pixels) */
    FAID_META_DISTANCE = 1u << 1,           /* detector_distance (m) */
    FAID_META_TRANSLATION = 1u << 2,        /* detector_translation[3] (m) */
    FAID_META_WAVELENGTH = 1u << 3,         /* incident_wavelength (angstrom) */
    FAID_META_ENERGY = 1u << 4,             /* incident_energy (eV) */
    FAID_META_PIXEL_SIZE = 1u << 5,         /* pixel_size_x, pixel_size_y (m) */
    FAID_META_IMAGE_SIZE = 1u << 6,         /* image_size_x (cols), image_size_y (rows) */
    FAID_META_DTYPE = 1u << 7,              /* image_dtype */
    FAID_META_NIMAGES = 1u << 8,            /* nimages */
    FAID_META_COUNT_TIME = 1u << 9,         /* count_time (s) */
    FAID_META_FRAME_TIME = 1u << 10,        /* frame_time (s) */
    FAID_META_SATURATION = 1u << 11,        /* saturation_value */
    FAID_META_ERROR_VALUE = 1u << 12,       /* error_value (Jungfraujoch) */
    FAID_META_THRESHOLD = 1u << 13,         /* threshold_energy of the selected channel (eV) */
    FAID_META_SENSOR = 1u << 14,            /* sensor_material, sensor_thickness (m) */
    FAID_META_MAGIC = 1u << 15,             /* magic_number (Jungfraujoch) */
    FAID_META_MASK_ENABLED = 1u << 16,      /* pixel_mask_enabled */
    FAID_META_FLATFIELD_ENABLED = 1u << 17, /* flatfield_enabled */
    FAID_META_COUNTRATE_ENABLED = 1u << 18, /* countrate_correction_enabled */
};

/* Metadata of a series start (DECTRIS v2 "start", DECTRIS v1 "dheader-1.0" with its detail
 * parts). Values are in the sender's units as named; absent fields have their bit clear in
 * `have` and are 0. */
typedef struct faid_input_meta {
    uint32_t have;
    double beam_center_x, beam_center_y; /* pixels */
    double detector_distance;            /* m */
    double detector_translation[3];      /* m */
    double incident_wavelength;          /* angstrom */
    double incident_energy;              /* eV */
    double pixel_size_x, pixel_size_y;   /* m */
    int64_t image_size_x, image_size_y;  /* cols, rows */
    faid_dtype image_dtype;
    int64_t nimages;
    double count_time, frame_time; /* s */
    int64_t saturation_value, error_value;
    double threshold_energy; /* eV, of the selected channel */
    char sensor_material[FAID_INPUT_NAME_MAX];
    double sensor_thickness; /* m */
    uint64_t magic_number;
    int pixel_mask_enabled, flatfield_enabled, countrate_correction_enabled;
    char detector_description[FAID_INPUT_NAME_MAX];
    char detector_serial_number[FAID_INPUT_NAME_MAX];
    char header_detail[16]; /* v1: "none" | "basic" | "all" */
    /* Channels in the sender's order and the one selected (faid_input_opts.channel). */
    int nchannels;
    char channels[FAID_INPUT_MAX_CHANNELS][FAID_INPUT_NAME_MAX];
    /* Arrays of the selected channel (v2: maps channel -> array; v1: the detail parts). */
    faid_input_array pixel_mask;      /* 32-bit; non-zero = bad pixel (DECTRIS bit meanings) */
    faid_input_array flatfield;       /* float32 */
    faid_input_array countrate_table; /* float32, 1D (v2: countrate_correction_lookup_table) */
} faid_input_meta;

/* Caller's choices for decoding. */
typedef struct faid_input_opts {
    /* The channel whose data an image message hands out (input.channel); NULL or "" = the first
     * channel the message lists. A named channel that an image lacks is an error naming it. */
    const char *channel;
} faid_input_opts;

/* One decoded message. */
typedef struct faid_input_msg {
    const struct faid_input_format *format; /* the format that decoded (or refused) it */
    /* type (FAID_IN_START / IMAGE / END / OTHER), series_id, series_unique_id; for images
     * frame_id, rows, cols, dtype, encoding and the start/stop/real_time rationals. user_data
     * is set by the native format only (a msgpack value); other formats leave it NULL and hand
     * their raw user data in `appendix`. */
    faid_in_header h;
    /* Set as soon as type, series and (images) frame id are known: when decoding fails later
     * (a part, the payload or an array is at fault) the message is still a frame of its series
     * and must be accounted as a failed frame, not as unreadable input. */
    int header_ok;
    int nparts; /* parts the message had */
    /* image: the encoded frame, inside part payload_part (no copy) */
    int payload_part;
    const uint8_t *payload;
    size_t payload_len;
    int channel_index; /* image: index of the selected channel among the message's channels */
    char channel[FAID_INPUT_NAME_MAX];
    /* start */
    faid_input_meta meta;
    /* raw user data as the format carries it: v1 appendix part (text), v2 "user_data" (one CBOR
     * item); NULL when absent */
    const uint8_t *appendix;
    size_t appendix_len;
    /* FAID_IN_OTHER: the message type the sender named ("calibration", "metadata", ...) */
    char other_type[FAID_INPUT_NAME_MAX];
} faid_input_msg;

typedef struct faid_input_format {
    faid_input_protocol protocol; /* its name: faid_input_protocol_name(protocol) */
    /* Most parts one message of this format has; ingest keeps at most this many. */
    int max_parts;
    /* True when the first part of a message belongs to this format (first bytes only). */
    int (*detect)(const void *first, size_t len);
    /* Decodes the parts of one message (parts[k] is read only for k < min(nparts, max_parts)).
     * 0, or a faid error code with d naming the part and key; m->header_ok tells whether the
     * failure still belongs to a frame of a known series. */
    int (*decode)(const faid_input_part *parts, int nparts, const faid_input_opts *o,
                  faid_input_msg *m, faid_diag *d);
} faid_input_format;

extern const faid_input_format faid_input_native;
extern const faid_input_format faid_input_dectris_v1;
extern const faid_input_format faid_input_dectris_v2;

/* Writes the message's user data as one msgpack value into w, for faid's output (start and
 * result "user_data"): native: the value as sent; DECTRIS v2: the "user_data" CBOR item converted
 * (faid_cbor_to_msgpack); DECTRIS v1: the appendix part as a str when it is valid UTF-8, else as
 * bin. Writes nothing and sets *written = 0 when the message has none. */
int faid_input_user_data(const faid_input_msg *m, faid_mpw *w, int *written, faid_diag *d);

/* The format of protocol p (NULL for AUTO). */
const faid_input_format *faid_input_format_of(faid_input_protocol p);
/* The format that reads a message whose first part is `first`: for AUTO the one whose detect
 * claims it (v2, then v1, then native; NULL when none does), otherwise the format of p whatever
 * the bytes (its decoder then refuses what is not its own). */
const faid_input_format *faid_input_detect(faid_input_protocol p, const void *first, size_t len);
/* 0 when this build can read protocol p (every known protocol: libcbor and jansson are required
 * at build time); FAID_EUNSUP with a message otherwise, so that an input.protocol that cannot be
 * honoured stops the daemon at start. */
int faid_input_available(faid_input_protocol p, faid_diag *d);
/* Detects and decodes one message (what ingest calls per message). m->format is the format
 * used (NULL when none claimed the message). */
int faid_input_decode(faid_input_protocol p, const faid_input_part *parts, int nparts,
                      const faid_input_opts *o, faid_input_msg *m, faid_diag *d);

#endif
