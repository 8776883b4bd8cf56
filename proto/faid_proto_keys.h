/* faid_proto_keys: every key of every message faid sends or receives, defined once.
 *
 * Two X-macro tables:
 *   FAID_PROTO_KEY_NAMES(X)  X(ID, "name"): each key name on the wire, once. It gives the key
 *                            constants FAID_K_<ID> (a char array, usable where a string literal
 *                            is) and the enum faid_key (FAID_KEY_<ID>) the decoders switch on.
 *   FAID_PROTO_MSG_KEYS(X)   X(MSG, ID, "type", PRESENCE, "meaning"): each key of each message
 *                            (nested maps are messages of their own, e.g. START_GEOMETRY), in
 *                            the order faid writes them. PRESENCE is REQ (always there) or OPT
 *                            (the meaning says when).
 * FAID_PROTO_MESSAGES(X) X(MSG, "marker", "title") names the messages; "marker" is the name of
 * the generated table's <!-- keys:MARKER:begin/end --> block in proto/PROTOCOL.md.
 *
 * Derived from them: the key constants and enum below, faid_proto_key_lookup() and the
 * per-message checker (faid_proto.h), the key tables in proto/PROTOCOL.md (faid-protodoc writes
 * them between the markers; the ctest docs.protocol_keys fails when the file and the tables
 * differ), and the encoders and decoders that name keys through FAID_K_* / FAID_KEY_*.
 * To add a key: a row in FAID_PROTO_KEY_NAMES when the name is new, a row in
 * FAID_PROTO_MSG_KEYS for each message that carries it, then `cmake --build build --target
 * protocol-doc` (or `build/bin/faid-protodoc --write proto/PROTOCOL.md`). */
#ifndef FAID_PROTO_KEYS_H
#define FAID_PROTO_KEYS_H

/* clang-format off */
#define FAID_PROTO_KEY_NAMES(X)                                                                    \
    X(TYPE, "type")                                                                                \
    X(PROTOCOL_VERSION, "protocol_version")                                                        \
    X(SERIES_ID, "series_id")                                                                      \
    X(SERIES_UNIQUE_ID, "series_unique_id")                                                        \
    X(FRAME_ID, "frame_id")                                                                        \
    X(SHAPE, "shape")                                                                              \
    X(DTYPE, "dtype")                                                                              \
    X(DATA, "data")                                                                                \
    X(ENCODING, "encoding")                                                                        \
    X(TIMESTAMP, "timestamp")                                                                      \
    X(START_TIME, "start_time")                                                                    \
    X(STOP_TIME, "stop_time")                                                                      \
    X(REAL_TIME, "real_time")                                                                      \
    X(USER_DATA, "user_data")                                                                      \
    X(NIMAGES, "nimages")                                                                          \
    X(MAGIC_NUMBER, "magic_number")                                                                \
    X(SOFTWARE_VERSION, "software_version")                                                        \
    X(REASON, "reason")                                                                            \
    X(SETUP_VERSION, "setup_version")                                                              \
    X(CONFIG_HASH, "config_hash")                                                                  \
    X(CONFIG_FILE, "config_file")                                                                  \
    X(CONFIG_START, "config_start_file")                                                           \
    X(MSG_NUMBER, "msg_number")                                                                    \
    X(DEVICE, "device")                                                                            \
    X(DEVICES, "devices")                                                                          \
    X(I, "I")                                                                                      \
    X(SIGMA, "sigma")                                                                              \
    X(STD, "std")                                                                                  \
    X(COUNT, "count")                                                                              \
    X(RADIAL, "radial")                                                                            \
    X(AZIMUTHAL, "azimuthal")                                                                      \
    X(UNIT, "unit")                                                                                \
    X(NPT, "npt")                                                                                  \
    X(NPT_AZIM, "npt_azim")                                                                        \
    X(I2D, "I_2d")                                                                                 \
    X(SIGMA2D, "sigma_2d")                                                                         \
    X(COUNT2D, "count_2d")                                                                         \
    X(SUM_NORMALIZATION, "sum_normalization")                                                      \
    X(RECEIVED_NS, "received_ns")                                                                  \
    X(DONE_NS, "done_ns")                                                                          \
    X(LATENCY_US, "latency_us")                                                                    \
    X(QUEUE_US, "queue_us")                                                                        \
    X(DECODE_US, "decode_us")                                                                      \
    X(PREPROCESS_US, "preprocess_us")                                                              \
    X(INTEGRATE_US, "integrate_us")                                                                \
    X(TRANSFER_US, "transfer_us")                                                                  \
    X(COMPUTE_US, "compute_us")                                                                    \
    X(H2D_US, "h2d_us")                                                                            \
    X(D2H_US, "d2h_us")                                                                            \
    X(CLIP_US, "clip_us")                                                                          \
    X(FIND_US, "find_us")                                                                          \
    X(SUBMIT_US, "submit_us")                                                                      \
    X(WAIT_US, "wait_us")                                                                          \
    X(ENCODE_US, "encode_us")                                                                      \
    X(EARLY_LAUNCHES, "early_launches")                                                            \
    X(PAYLOAD_BYTES, "payload_bytes")                                                              \
    X(NUM_PEAKS, "num_peaks")                                                                      \
    X(IS_HIT, "is_hit")                                                                            \
    X(PEAK_X, "peak_x")                                                                            \
    X(PEAK_Y, "peak_y")                                                                            \
    X(PEAK_INTENSITY, "peak_intensity")                                                            \
    X(PEAK_SIGMA, "peak_sigma")                                                                    \
    X(PEAK_SNR, "peak_snr")                                                                        \
    X(PEAK_NPIX, "peak_npix")                                                                      \
    X(PEAK_MAX_PIXEL, "peak_max_pixel")                                                            \
    X(BG_I, "bg_I")                                                                                \
    X(BG_SIGMA, "bg_sigma")                                                                        \
    X(BG_STD, "bg_std")                                                                            \
    X(BG_COUNT, "bg_count")                                                                        \
    X(PEAKS, "peaks")                                                                              \
    X(PEAK_COORDINATES, "peak_coordinates")                                                        \
    X(OPTIONAL_OUTPUTS, "optional_outputs")                                                                \
    X(CODE, "code")                                                                                \
    X(ERRNO, "errno")                                                                              \
    X(MESSAGE, "message")                                                                          \
    X(STAGE, "stage")                                                                              \
    X(COUNTERS, "counters")                                                                        \
    X(DROPS, "drops")                                                                              \
    X(ERRORS, "errors")                                                                            \
    X(GEOMETRY, "geometry")                                                                        \
    X(PARAMETERS, "parameters")                                                                    \
    X(CONFIG, "config")                                                                            \
    X(SOURCE, "source")                                                                            \
    X(INPUT, "input")                                                                              \
    X(STATE, "state")                                                                              \
    X(OK, "ok")                                                                                    \
    X(CMD, "cmd")                                                                                  \
    X(ERROR, "error")                                                                              \
    X(PATH, "path")                                                                                \
    X(KEY, "key")                                                                                  \
    X(PREFIX, "prefix")                                                                            \
    X(VALUE, "value")                                                                              \
    X(CREDIT, "credit")                                                                            \
    X(SEQ, "seq")                                                                                  \
    X(INSTANCE, "instance")                                                                        \
    X(SHARD, "shard")                                                                              \
    X(SHARDS, "shards")                                                                            \
    X(WINDOW, "window")                                                                            \
    X(DONE, "done")                                                                                \
    X(ACCOUNTED, "accounted")                                                                      \
    X(ROUTED, "routed")                                                                            \
    X(ENDS_AWAITED, "ends_awaited")                                                                \
    X(FLAGGED, "flagged")                                                                          \
    X(SERIES, "series")                                                                            \
    X(INSTANCES, "instances")                                                                      \
    X(LOST, "lost")                                                                                \
    X(CONSUMER, "consumer")                                                                        \
    X(HELD, "held")                                                                                \
    /* start: geometry */                                                                          \
    X(DIST, "dist")                                                                                \
    X(PONI1, "poni1")                                                                              \
    X(PONI2, "poni2")                                                                              \
    X(ROT1, "rot1")                                                                                \
    X(ROT2, "rot2")                                                                                \
    X(ROT3, "rot3")                                                                                \
    X(WAVELENGTH, "wavelength")                                                                    \
    X(PIXEL1, "pixel1")                                                                            \
    X(PIXEL2, "pixel2")                                                                            \
    X(ROWS, "rows")                                                                                \
    X(COLS, "cols")                                                                                \
    X(DETECTOR, "detector")                                                                        \
    /* start: parameters */                                                                        \
    X(SPLIT, "split")                                                                              \
    X(ERROR_MODEL, "error_model")                                                                  \
    X(SOLID_ANGLE, "solid_angle")                                                                  \
    X(POLARIZATION_FACTOR, "polarization_factor")                                                  \
    X(RADIAL_RANGE, "radial_range")                                                                \
    X(AZIMUTH_RANGE, "azimuth_range")                                                              \
    X(DUMMY, "dummy")                                                                              \
    X(DELTA_DUMMY, "delta_dummy")                                                                  \
    X(NORMALIZATION_FACTOR, "normalization_factor")                                                \
    X(EMPTY, "empty")                                                                              \
    X(MASK_FILE, "mask_file")                                                                      \
    X(DARK_FILE, "dark_file")                                                                      \
    X(FLAT_FILE, "flat_file")                                                                      \
    X(MASKED_PIXELS, "masked_pixels")                                                              \
    X(ALGORITHM, "algorithm")                                                                      \
    /* start: input */                                                                             \
    X(PROTOCOL, "protocol")                                                                        \
    X(START_MESSAGE, "start_message")                                                              \
    X(GEOMETRY_SOURCE, "geometry_source")                                                          \
    X(APPLIED, "applied")                                                                          \
    X(DETECTOR_MASKED_PIXELS, "detector_masked_pixels")                                            \
    X(SETUP, "setup")                                                                              \
    X(SETUP_BUILD_MS, "setup_build_ms")                                                            \
    X(SHAPE_MATCHES, "shape_matches")                                                              \
    X(REPORTED, "reported")                                                                        \
    X(PIXEL_MASK, "pixel_mask")                                                                    \
    X(FLATFIELD, "flatfield")                                                                      \
    X(BEAM_CENTER_X, "beam_center_x")                                                              \
    X(BEAM_CENTER_Y, "beam_center_y")                                                              \
    X(DETECTOR_DISTANCE, "detector_distance")                                                      \
    X(INCIDENT_WAVELENGTH, "incident_wavelength")                                                  \
    X(INCIDENT_ENERGY, "incident_energy")                                                          \
    X(PIXEL_SIZE_X, "pixel_size_x")                                                                \
    X(PIXEL_SIZE_Y, "pixel_size_y")                                                                \
    X(IMAGE_SIZE_X, "image_size_x")                                                                \
    X(IMAGE_SIZE_Y, "image_size_y")                                                                \
    X(IMAGE_DTYPE, "image_dtype")                                                                  \
    X(COUNT_TIME, "count_time")                                                                    \
    X(FRAME_TIME, "frame_time")                                                                    \
    X(SATURATION_VALUE, "saturation_value")                                                        \
    X(CHANNELS, "channels")                                                                        \
    X(COUNTRATE_TABLE, "countrate_table")                                                          \
    /* end */                                                                                      \
    X(FRAMES_RECEIVED, "frames_received")                                                          \
    X(FRAMES_PROCESSED, "frames_processed")                                                        \
    X(FRAMES_FAILED, "frames_failed")                                                              \
    X(FRAMES_DROPPED, "frames_dropped")                                                            \
    X(STALE_MESSAGES, "stale_messages")                                                            \
    X(INCOMPLETE, "incomplete")                                                                    \
    /* aggregates */                                                                               \
    X(FRAMES, "frames")                                                                            \
    X(HITS, "hits")                                                                                \
    X(HIT_RATE, "hit_rate")                                                                        \
    X(HIT_RATE_WINDOW, "hit_rate_window")                                                          \
    X(HIT_RATE_WINDOW_FRAMES, "hit_rate_window_frames")                                            \
    X(HIT_RATE_HISTORY, "hit_rate_history")                                                        \
    X(HIT_RATE_TIMESTAMP_HISTORY, "hit_rate_timestamp_history")                                    \
    X(NUM_PEAKS_HISTOGRAM, "num_peaks_histogram")                                                  \
    X(NUM_PEAKS_BIN_WIDTH, "num_peaks_bin_width")                                                  \
    X(VIRTUAL_POWDER_PLOT, "virtual_powder_plot")                                                  \
    /* hits channel */                                                                             \
    X(EVENT_ID, "event_id")                                                                        \
    X(BEAM_ENERGY, "beam_energy")                                                                  \
    X(PEAK_LIST, "peak_list")                                                                      \
    X(DETECTOR_DATA, "detector_data")                                                              \
    X(PEAK_PATCHES, "peak_patches")                                                                \
    X(PEAK_PATCH_ORIGIN, "peak_patch_origin")                                                      \
    X(FS, "fs")                                                                                    \
    X(SS, "ss")                                                                                    \
    X(INTENSITY, "intensity")                                                                      \
    X(NUM_PIXELS, "num_pixels")                                                                    \
    X(MAX_PIXEL_INTENSITY, "max_pixel_intensity")                                                  \
    X(SNR, "snr")                                                                                  \
    X(ND, "nd")                                                                                    \
    X(KIND, "kind")                                                                                \
    /* status */                                                                                   \
    X(UPTIME_S, "uptime_s")                                                                        \
    X(QUEUE, "queue")                                                                              \
    X(FPS, "fps")                                                                                  \
    X(HITS_WAITING, "hits_waiting")                                                                \
    X(LOSSLESS, "lossless")                                                                        \
    X(MAX_MESSAGE_BYTES, "max_message_bytes")                                                      \
    X(ENDPOINTS, "endpoints")                                                                      \
    X(PINNED_BYTES, "pinned_bytes")                                                                \
    X(PINNED_FRAMES, "pinned_frames")                                                              \
    X(ZMQ_CONTEXTS, "zmq_contexts")                                                                \
    X(PINNED_FALLBACK, "pinned_fallback")                                                          \
    X(PINNED_RECEIVE, "pinned_receive")                                                            \
    X(PINNED_RECEIVED, "pinned_received")                                                          \
    X(PINNED_RECEIVE_FALLBACK, "pinned_receive_fallback")                                          \
    X(CONNECTIONS, "connections")                                                                  \
    X(ACCEPTED, "accepted")                                                                        \
    X(CLOSED, "closed")                                                                            \
    X(ACCEPT_FAILED, "accept_failed")                                                              \
    X(CONNECTION_CAP, "connection_cap")                                                            \
    X(OVER_CAP, "over_cap")                                                                        \
    X(FAN_LINK, "fan_link")                                                                        \
    X(DEPTH, "depth")                                                                              \
    X(CAPACITY, "capacity")                                                                        \
    X(POLICY, "policy")                                                                            \
    X(RESULTS_DEPTH, "results_depth")                                                              \
    X(FREE_SLOTS, "free_slots")                                                                    \
    X(P50, "p50")                                                                                  \
    X(P99, "p99")                                                                                  \
    X(MAX, "max")                                                                                  \
    X(SAMPLES, "samples")                                                                          \
    X(OVERFLOW, "overflow")                                                                        \
    X(HELD_BYTES, "held_bytes")                                                                    \
    X(CAPACITY_BYTES, "capacity_bytes")                                                            \
    X(SENT, "sent")                                                                                \
    X(RESENT, "resent")                                                                            \
    X(ACKED, "acked")                                                                              \
    X(SESSIONS, "sessions")                                                                        \
    X(REFUSED, "refused")                                                                          \
    X(REFUSALS_UNANSWERED, "refusals_unanswered")                                                  \
    X(PINGS, "pings")                                                                              \
    X(NOT_RESENT, "not_resent")                                                                    \
    X(INPUT_DEFERRED, "input_deferred")                                                            \
    X(OLD_CONNECTION, "old_connection")                                                            \
    X(GIVEN_UP, "given_up")                                                                        \
    X(INDEX, "index")                                                                              \
    X(SPEC, "spec")                                                                                \
    X(NAME, "name")                                                                                \
    X(PROCESSED, "processed")                                                                      \
    X(FAILED, "failed")                                                                            \
    X(BUSY, "busy")                                                                                \
    X(HOST_US, "host_us")                                                                          \
    X(TABLE_US, "table_us")                                                                        \
    /* status: memory */                                                                           \
    X(MEMORY, "memory")                                                                            \
    X(RSS_BYTES, "rss_bytes")                                                                      \
    X(RSS_ANON_BYTES, "rss_anon_bytes")                                                            \
    X(HEAP_BYTES, "heap_bytes")                                                                    \
    X(MMAP_BYTES, "mmap_bytes")                                                                    \
    X(IN_USE_BYTES, "in_use_bytes")                                                                \
    X(FREE_BYTES, "free_bytes")                                                                    \
    X(ARENAS, "arenas")                                                                            \
    /* status: writer */                                                                           \
    X(WRITER, "writer")                                                                            \
    X(DIRECTORY, "directory")                                                                      \
    X(FILE, "file")                                                                                \
    X(FILES_OPEN, "files_open")                                                                    \
    X(FILES_WRITTEN, "files_written")                                                              \
    X(FRAMES_WRITTEN, "frames_written")                                                            \
    X(BYTES_WRITTEN, "bytes_written")                                                              \
    X(FRAMES_SKIPPED, "frames_skipped")                                                            \
    X(HIT_FRAMES_WRITTEN, "hit_frames_written")                                                    \
    X(QUEUED_BYTES, "queued_bytes")                                                                \
    X(DROPPED, "dropped")

/* The messages (and nested maps) the key table describes. */
#define FAID_PROTO_MESSAGES(X)                                                                     \
    X(IN, "input", "native input header (start, image, end)")                                     \
    X(ARRAY, "array", "array map")                                                                 \
    X(START, "start", "start")                                                                     \
    X(START_GEOMETRY, "start.geometry", "start: geometry")                                         \
    X(START_PARAMETERS, "start.parameters", "start: parameters")                                   \
    X(START_INPUT, "start.input", "start: input")                                                  \
    X(START_INPUT_APPLIED, "start.input.applied", "start: input.applied")                          \
    X(START_INPUT_REPORTED, "start.input.reported", "start: input.reported")                       \
    X(RESULT, "result", "result")                                                                  \
    X(END, "end", "end")                                                                           \
    X(AGGREGATES, "aggregates", "aggregates")                                                      \
    X(AGGREGATES_POWDER, "aggregates.virtual_powder_plot", "aggregates: virtual_powder_plot")      \
    X(ERROR, "error", "error")                                                                     \
    X(LL_REQUEST, "lossless.request", "lossless channel: consumer messages")                       \
    X(LL_REPLY, "lossless.reply", "lossless channel: faid's answers")                              \
    X(HIT, "hit", "hits channel")                                                                  \
    X(HIT_PEAK_LIST, "hit.peak_list", "hits channel: peak_list")                                   \
    X(NUMPY, "msgpack-numpy", "msgpack-numpy array (binary keys)")                                 \
    X(CTL_REQUEST, "control.request", "control request")                                           \
    X(CTL_REPLY, "control.reply", "control reply")                                                 \
    X(STATUS, "status", "status reply and stats body")                                             \
    X(STATUS_INPUT, "status.input", "status: input")                                               \
    X(STATUS_QUEUE, "status.queue", "status: queue")                                               \
    X(STATUS_LATENCY, "status.latency_us", "status: latency_us")                                   \
    X(STATUS_LOSSLESS, "status.lossless", "status: lossless")                                      \
    X(STATUS_DEVICE, "status.devices", "status: each entry of devices")                            \
    X(STATUS_MEMORY, "status.memory", "status: memory")                                            \
    X(STATUS_WRITER, "status.writer", "status: writer")                                            \
    X(FAN_LINK, "fanout-link", "fan-out link: instance and fan-out messages")                         \
    X(FAN_LOST, "fanout-lost", "fan-out: lost")                                                       \
    X(FAN_ROUTED, "fanout-routed", "fan-out: routed")                                                 \
    X(FAN_STATUS, "fanout-status", "fan-out: status reply")                                           \
    X(FAN_STATUS_INSTANCE, "fanout-status.instances", "fan-out status: each entry of instances")

#define FAID_PROTO_MSG_KEYS(X)                                                                     \
    /* native input header */                                                                      \
    X(IN, TYPE, "str", REQ, "`\"start\"`, `\"image\"`, `\"end\"`")                                 \
    X(IN, PROTOCOL_VERSION, "uint", REQ, "`1`; other values are rejected")                         \
    X(IN, SERIES_ID, "uint", REQ, "series (acquisition) number")                                   \
    X(IN, SERIES_UNIQUE_ID, "str (< 64 bytes)", OPT, "unique series name (DECTRIS v2)")            \
    X(IN, FRAME_ID, "uint", REQ, "image: frame number within the series (DECTRIS/Jungfraujoch `image_id`)") \
    X(IN, SHAPE, "[uint, uint]", REQ, "image: `[rows, cols]` = (slow, fast)")                      \
    X(IN, DTYPE, "str", REQ, "image: `\"uint8\"`, `\"uint16\"`, `\"uint32\"`, `\"int8\"`, `\"int16\"`, `\"int32\"`, `\"float32\"` (numpy spellings like `\"<u2\"` accepted; big-endian rejected)") \
    X(IN, ENCODING, "str", REQ, "image: `\"bslz4\"` (bitshuffle-LZ4 with the 12-byte HDF5/DECTRIS header), `\"lz4\"` (HDF5-LZ4 framing), `\"lz4-raw\"` (one raw LZ4 block), `\"none\"`") \
    X(IN, TIMESTAMP, "float", OPT, "seconds since the epoch (sender's clock)")                     \
    X(IN, START_TIME, "[uint, uint]", OPT, "image: DECTRIS rational `[numerator, denominator]`, passed through") \
    X(IN, STOP_TIME, "[uint, uint]", OPT, "image: as `start_time`")                                \
    X(IN, REAL_TIME, "[uint, uint]", OPT, "image: as `start_time`")                                \
    X(IN, NIMAGES, "uint", OPT, "start: expected number of frames")                                \
    X(IN, USER_DATA, "any", OPT, "passed through verbatim into the matching start / result; at most 64 KiB, containers nested at most 32 levels, every str valid UTF-8, map keys str (or bin), no ext types, so that every subscriber's decoder reads it (otherwise the frame is refused: larger, `FAID_ESIZE`, a failed frame; malformed, `FAID_EFORMAT` naming the byte, as bad input)") \
    /* array map */                                                                                \
    X(ARRAY, DTYPE, "str", REQ, "numpy descriptor, little-endian: `\"<f4\"`, `\"<f8\"`, `\"<i4\"`, `\"<u8\"`, ...") \
    X(ARRAY, SHAPE, "[uint, ...]", REQ, "dimensions, C order")                                     \
    X(ARRAY, DATA, "bin", REQ, "the elements, little-endian, C order (exactly prod(shape) * itemsize bytes)") \
    /* start */                                                                                    \
    X(START, TYPE, "str", REQ, "`\"start\"`")                                                      \
    X(START, MAGIC_NUMBER, "uint", REQ, "`0x46414944`")                                            \
    X(START, PROTOCOL_VERSION, "uint", REQ, "`1`")                                                 \
    X(START, SOFTWARE_VERSION, "str", REQ, "faid version")                                         \
    X(START, REASON, "str", REQ, "`\"series\"`, `\"implicit\"`, `\"setup\"`")                      \
    X(START, SERIES_ID, "uint", REQ, "the series")                                                 \
    X(START, SERIES_UNIQUE_ID, "str", REQ, "the series' unique name (`\"\"` when none)")           \
    X(START, INSTANCE, "str", REQ, "the faid instance that sent it (`instance.name`; `\"\"` from `faidctl process`)") \
    X(START, SHARD, "uint", REQ, "this instance's part of the series, 0-based (`instance.shard`, or what a fan-out named for the series)") \
    X(START, SHARDS, "uint", REQ, "how many instances share the series (`instance.shards`, or the fan-out's count)") \
    X(START, NIMAGES, "int", REQ, "from the input start, -1 when unknown")                         \
    X(START, SETUP_VERSION, "uint", REQ, "version of the reduction setup (1 at start, +1 per reload)") \
    X(START, CONFIG_HASH, "str", REQ, "16 hex digits of the reduction parameters")                 \
    X(START, GEOMETRY, "map", REQ, "the geometry in force (`start.geometry` below)")                \
    X(START, PARAMETERS, "map", REQ, "the integration parameters (`start.parameters` below)")       \
    X(START, UNIT, "str", REQ, "radial unit, e.g. `\"q_nm^-1\"`, `\"2th_deg\"`, `\"r_mm\"`")       \
    X(START, RADIAL, "array `<f8` [npt]", REQ, "bin centres in `unit`")                            \
    X(START, AZIMUTHAL, "array `<f8` [npt_azim]", OPT, "azimuthal bin centres (degrees), with a 2D cake only") \
    X(START, PEAKS, "map", OPT, "peaks.algorithm not none: `algorithm` (str) and every other `peaks.*` parameter in force (`cutoff_clip`, `cycles`, `error_model`, `noise`, `cutoff_peak`, `patch_size`, `connected`, `adc_threshold`, `minimum_snr`, `min_pixel_count`, `max_pixel_count`, `local_bg_radius`, `min_res`, `max_res`, `max_num_peaks`, `min_peaks_for_hit`, `max_peaks_for_hit` (nil: none), `hit_rate_window`); int, float or str as in the configuration") \
    X(START, PEAK_COORDINATES, "str", OPT, "with `peaks`: `\"pixel-index\"`: the centre of pixel (row r, column c) is (x = c, y = r), as OM / Cheetah report peaks (CrystFEL adds 0.5 unless `--no-half-pixel-shift`)") \
    X(START, OPTIONAL_OUTPUTS, "[str]", OPT, "the optional outputs the results carry (`output.extra`: their result keys); absent when none is on") \
    X(START, DEVICES, "[str]", REQ, "compute devices, index = `device` of results")                \
    X(START, CONFIG, "str", REQ, "effective configuration (YAML, as `faid --dump-config`)")        \
    X(START, INPUT, "map", REQ, "what opened the series and what faid used of it (`start.input` below; section 2.1)") \
    X(START, USER_DATA, "any", OPT, "from the input start, when given")                            \
    X(START, MSG_NUMBER, "uint", REQ, "sequence number")                                           \
    X(START_GEOMETRY, DIST, "float", REQ, "sample-detector distance (m)")                          \
    X(START_GEOMETRY, PONI1, "float", REQ, "point of normal incidence, slow axis (m)")             \
    X(START_GEOMETRY, PONI2, "float", REQ, "point of normal incidence, fast axis (m)")             \
    X(START_GEOMETRY, ROT1, "float", REQ, "rotation (rad)")                                        \
    X(START_GEOMETRY, ROT2, "float", REQ, "rotation (rad)")                                        \
    X(START_GEOMETRY, ROT3, "float", REQ, "rotation (rad)")                                        \
    X(START_GEOMETRY, WAVELENGTH, "float", REQ, "wavelength (m)")                                  \
    X(START_GEOMETRY, PIXEL1, "float", REQ, "pixel size, slow axis (m)")                           \
    X(START_GEOMETRY, PIXEL2, "float", REQ, "pixel size, fast axis (m)")                           \
    X(START_GEOMETRY, ROWS, "int", REQ, "detector rows")                                           \
    X(START_GEOMETRY, COLS, "int", REQ, "detector columns")                                        \
    X(START_GEOMETRY, DETECTOR, "str", REQ, "detector preset (`\"\"` when none)")                  \
    X(START_PARAMETERS, NPT, "int", REQ, "radial bins")                                            \
    X(START_PARAMETERS, NPT_AZIM, "int", REQ, "azimuthal bins (0: no cake)")                       \
    X(START_PARAMETERS, UNIT, "str", REQ, "radial unit")                                           \
    X(START_PARAMETERS, SPLIT, "str", REQ, "pixel splitting")                                      \
    X(START_PARAMETERS, ERROR_MODEL, "str", REQ, "error model")                                    \
    X(START_PARAMETERS, SOLID_ANGLE, "bool", REQ, "solid-angle correction")                        \
    X(START_PARAMETERS, POLARIZATION_FACTOR, "float or nil", REQ, "polarization factor, nil: none") \
    X(START_PARAMETERS, RADIAL_RANGE, "[lo, hi] or nil", REQ, "radial range in `unit`")            \
    X(START_PARAMETERS, AZIMUTH_RANGE, "[lo, hi] or nil", REQ, "azimuthal range (degrees)")        \
    X(START_PARAMETERS, DUMMY, "float or nil", REQ, "dummy value")                                 \
    X(START_PARAMETERS, DELTA_DUMMY, "float or nil", REQ, "dummy tolerance")                       \
    X(START_PARAMETERS, NORMALIZATION_FACTOR, "float", REQ, "normalization factor")                \
    X(START_PARAMETERS, EMPTY, "float", REQ, "value of empty bins")                                \
    X(START_PARAMETERS, MASK_FILE, "str", REQ, "mask file (`\"\"`: none)")                         \
    X(START_PARAMETERS, DARK_FILE, "str", REQ, "dark file (`\"\"`: none)")                         \
    X(START_PARAMETERS, FLAT_FILE, "str", REQ, "flat file (`\"\"`: none)")                         \
    X(START_PARAMETERS, MASKED_PIXELS, "uint", REQ, "pixels the mask masks")                       \
    X(START_INPUT, PROTOCOL, "str", REQ, "format of the start message, `\"\"` for an implicit start") \
    X(START_INPUT, START_MESSAGE, "bool", REQ, "whether a start message was seen")                 \
    X(START_INPUT, GEOMETRY_SOURCE, "str", REQ, "`\"configuration\"` or `\"start\"` (`input.geometry_source`)") \
    X(START_INPUT, APPLIED, "map", REQ, "`pixel_mask`, `flatfield` (bools): what faid applied of the detector's") \
    X(START_INPUT, DETECTOR_MASKED_PIXELS, "uint", REQ, "pixels the detector's mask masks")        \
    X(START_INPUT, SETUP, "str", REQ, "`\"reused\"`: the setup in force kept, nothing built; `\"rebuilt\"`: a new one built for this series' start message or its absence; `\"failed\"`: that build failed, the setup in force used, the log says why; `\"reload\"` in a start announcing a reload's setup") \
    X(START_INPUT, SETUP_BUILD_MS, "float", REQ, "how long that build took, off the ingest thread; 0 when reused") \
    X(START_INPUT, SHAPE_MATCHES, "bool", REQ, "the reported image size is the configured one (true when none was reported)") \
    X(START_INPUT, REPORTED, "map", REQ, "what the start message said (`start.input.reported` below; `{}` without one)") \
    X(START_INPUT_APPLIED, PIXEL_MASK, "bool", REQ, "the detector's pixel mask is OR-ed into the configured one") \
    X(START_INPUT_APPLIED, FLATFIELD, "bool", REQ, "always false: the detector's flatfield is its own correction, never applied twice") \
    X(START_INPUT_REPORTED, BEAM_CENTER_X, "float", OPT, "when given")                             \
    X(START_INPUT_REPORTED, BEAM_CENTER_Y, "float", OPT, "when given")                             \
    X(START_INPUT_REPORTED, DETECTOR_DISTANCE, "float", OPT, "when given")                         \
    X(START_INPUT_REPORTED, INCIDENT_WAVELENGTH, "float", OPT, "when given")                       \
    X(START_INPUT_REPORTED, INCIDENT_ENERGY, "float", OPT, "when given")                           \
    X(START_INPUT_REPORTED, PIXEL_SIZE_X, "float", OPT, "when given")                              \
    X(START_INPUT_REPORTED, PIXEL_SIZE_Y, "float", OPT, "when given")                              \
    X(START_INPUT_REPORTED, IMAGE_SIZE_X, "int", OPT, "when given")                                \
    X(START_INPUT_REPORTED, IMAGE_SIZE_Y, "int", OPT, "when given")                                \
    X(START_INPUT_REPORTED, IMAGE_DTYPE, "str", OPT, "when given")                                 \
    X(START_INPUT_REPORTED, NIMAGES, "int", OPT, "when given")                                     \
    X(START_INPUT_REPORTED, COUNT_TIME, "float", OPT, "when given")                                \
    X(START_INPUT_REPORTED, FRAME_TIME, "float", OPT, "when given")                                \
    X(START_INPUT_REPORTED, SATURATION_VALUE, "int", OPT, "when given")                            \
    X(START_INPUT_REPORTED, CHANNELS, "[str]", OPT, "with a start message: the channels it named") \
    X(START_INPUT_REPORTED, PIXEL_MASK, "bool", OPT, "with a start message: whether it held a pixel mask") \
    X(START_INPUT_REPORTED, FLATFIELD, "bool", OPT, "with a start message: whether it held a flatfield") \
    X(START_INPUT_REPORTED, COUNTRATE_TABLE, "bool", OPT, "with a start message: whether it held a count-rate table") \
    /* result */                                                                                   \
    X(RESULT, TYPE, "str", REQ, "`\"result\"`")                                                    \
    X(RESULT, SERIES_ID, "uint", REQ, "the frame's series")                                        \
    X(RESULT, SERIES_UNIQUE_ID, "str", REQ, "the series' unique name (`\"\"` when none)")          \
    X(RESULT, INSTANCE, "str", REQ, "the faid instance that sent it (`instance.name`; `\"\"` from `faidctl process`)") \
    X(RESULT, SHARD, "uint", REQ, "this instance's part of the series, 0-based (`instance.shard`, or what a fan-out named for the series)") \
    X(RESULT, SHARDS, "uint", REQ, "how many instances share the series (`instance.shards`, or the fan-out's count)") \
    X(RESULT, FRAME_ID, "uint", REQ, "the frame")                                                  \
    X(RESULT, SETUP_VERSION, "uint", REQ, "reduction setup used for this frame")                   \
    X(RESULT, DEVICE, "int", REQ, "index into the start's `devices`")                              \
    X(RESULT, I, "array `<f4` [npt]", REQ, "integrated intensity (Jungfraujoch `az_int_profile`)") \
    X(RESULT, SIGMA, "array `<f4` [npt]", REQ, "standard error of the mean per bin (per `error_model`)") \
    X(RESULT, STD, "array `<f4` [npt]", REQ, "standard deviation per bin (Jungfraujoch `az_int_profile_std`)") \
    X(RESULT, COUNT, "array `<f4` [npt]", REQ, "number of (fractional) pixels per bin")            \
    X(RESULT, SUM_NORMALIZATION, "array `<f4` [npt]", OPT, "with `output.extra: [sum_normalization]` (an optional output, off by default); per bin, the sum of its pixels' normalization (fraction x solid angle x polarization x flat x `normalization_factor`; pyFAI `sum_normalization`): frames merge as sum(`I` x it) / sum(it)") \
    X(RESULT, I2D, "array `<f4` [npt_azim, npt]", OPT, "cake, only with `npt_azim` > 0; row = azimuthal bin (`azimuthal`), column = radial bin (`radial`), as pyFAI's integrate2d and `faidctl process` lay it out") \
    X(RESULT, SIGMA2D, "array `<f4` [npt_azim, npt]", OPT, "as `I_2d`: standard error; only with `output.cake` full or `writer.cake` on (the default lean cake carries `I_2d` alone)")             \
    X(RESULT, COUNT2D, "array `<f4` [npt_azim, npt]", OPT, "as `I_2d`: pixels per bin; only with `output.cake` full or `writer.cake` on")             \
    X(RESULT, NUM_PEAKS, "uint", OPT, "peaks.algorithm not none: every peak found (may exceed the arrays' length when the list was cut at `max_num_peaks`)") \
    X(RESULT, IS_HIT, "bool", OPT, "with peaks: `min_peaks_for_hit <= num_peaks` (and `<= max_peaks_for_hit` when set)") \
    X(RESULT, PEAK_X, "array `<f4` [n]", OPT, "with peaks: fast-axis (column) centroids, pixel-index coordinates (start `peak_coordinates`)") \
    X(RESULT, PEAK_Y, "array `<f4` [n]", OPT, "with peaks: slow-axis (row) centroids")             \
    X(RESULT, PEAK_INTENSITY, "array `<f4` [n]", OPT, "with peaks: background-subtracted integrated intensity") \
    X(RESULT, PEAK_SIGMA, "array `<f4` [n]", OPT, "with peaks: its sigma")                         \
    X(RESULT, PEAK_SNR, "array `<f4` [n]", OPT, "with peaks: intensity / sigma")                   \
    X(RESULT, PEAK_NPIX, "array `<i4` [n]", OPT, "with peaks: pixels of the peak")                 \
    X(RESULT, PEAK_MAX_PIXEL, "array `<f4` [n]", OPT, "with peaks: brightest pixel above the background") \
    X(RESULT, BG_I, "array `<f4` [npt]", OPT, "with peaks: sigma-clipped background on the `radial` bins, mean (docs/peaks.md)") \
    X(RESULT, BG_SIGMA, "array `<f4` [npt]", OPT, "with peaks: its standard error")                \
    X(RESULT, BG_STD, "array `<f4` [npt]", OPT, "with peaks: per-pixel std of the kept pixels")    \
    X(RESULT, BG_COUNT, "array `<f4` [npt]", OPT, "with peaks: pixels kept")                       \
    X(RESULT, RECEIVED_NS, "uint", REQ, "wall clock when the frame was received (ns since the epoch)") \
    X(RESULT, DONE_NS, "uint", REQ, "wall clock when its result was ready")                        \
    X(RESULT, LATENCY_US, "float", REQ, "received -> result ready")                                \
    X(RESULT, QUEUE_US, "float", REQ, "time spent waiting in the frame queue")                     \
    X(RESULT, DECODE_US, "float", REQ, "engine stage timing: decode")                              \
    X(RESULT, PREPROCESS_US, "float", REQ, "engine stage timing: preprocess")                      \
    X(RESULT, INTEGRATE_US, "float", REQ, "engine stage timing: integrate")                        \
    X(RESULT, TRANSFER_US, "float", REQ, "engine stage timing: transfers")                         \
    X(RESULT, HOST_US, "float", OPT, "engine stage timing (faid's engine writes it, as the next four): the worker's host work before the device (copy into pinned staging, block table when ingest had none)") \
    X(RESULT, H2D_US, "float", OPT, "engine stage timing: host -> device copy (part of `transfer_us`)") \
    X(RESULT, D2H_US, "float", OPT, "engine stage timing: device -> host copy, this frame's share of its slot's (part of `transfer_us`)") \
    X(RESULT, CLIP_US, "float", OPT, "with peaks: engine stage timing: the background's sigma clip") \
    X(RESULT, FIND_US, "float", OPT, "with peaks: engine stage timing: the peak finder's launches together") \
    X(RESULT, COMPUTE_US, "float", REQ, "engine total")                                            \
    X(RESULT, PAYLOAD_BYTES, "uint", REQ, "size of the encoded frame")                             \
    X(RESULT, TIMESTAMP, "float", OPT, "passed through from the input header when present")        \
    X(RESULT, START_TIME, "[uint, uint]", OPT, "passed through from the input header when present") \
    X(RESULT, STOP_TIME, "[uint, uint]", OPT, "passed through from the input header when present") \
    X(RESULT, REAL_TIME, "[uint, uint]", OPT, "passed through from the input header when present") \
    X(RESULT, USER_DATA, "any", OPT, "passed through from the input header when present")         \
    X(RESULT, MSG_NUMBER, "uint", REQ, "sequence number")                                          \
    /* end */                                                                                      \
    X(END, TYPE, "str", REQ, "`\"end\"`")                                                          \
    X(END, SERIES_ID, "uint", REQ, "the series")                                                   \
    X(END, SERIES_UNIQUE_ID, "str", REQ, "the series' unique name (`\"\"` when none)")             \
    X(END, INSTANCE, "str", REQ, "the faid instance that sent it (`instance.name`; `\"\"` from `faidctl process`)") \
    X(END, SHARD, "uint", REQ, "this instance's part of the series, 0-based (`instance.shard`, or what a fan-out named for the series)") \
    X(END, SHARDS, "uint", REQ, "how many instances share the series (`instance.shards`, or the fan-out's count)") \
    X(END, REASON, "str", REQ, "`\"end\"`, `\"superseded\"`, `\"timeout\"` (`input.series_timeout`), `\"shutdown\"`") \
    X(END, FRAMES_RECEIVED, "uint", REQ, "image messages of this series that reached faid")        \
    X(END, FRAMES_PROCESSED, "uint", REQ, "results published")                                     \
    X(END, FRAMES_FAILED, "uint", REQ, "frames answered with an error")                            \
    X(END, FRAMES_DROPPED, "uint", REQ, "frames dropped by the backpressure policy")               \
    X(END, STALE_MESSAGES, "uint", REQ, "messages of older series dropped while this one was open (section 2)") \
    X(END, INCOMPLETE, "bool", REQ, "true when faid gave up waiting for outstanding frames")       \
    X(END, COUNTERS, "map str -> uint", REQ, "daemon-wide totals as in `stats`")                   \
    X(END, DROPS, "map str -> uint", REQ, "daemon-wide totals as in `stats`")                      \
    X(END, ERRORS, "map str -> uint", REQ, "daemon-wide totals as in `stats`")                     \
    X(END, SETUP_VERSION, "uint", REQ, "current setup")                                            \
    X(END, MSG_NUMBER, "uint", REQ, "sequence number")                                             \
    /* aggregates */                                                                               \
    X(AGGREGATES, TYPE, "str", REQ, "`\"aggregates\"`")                                            \
    X(AGGREGATES, FRAMES, "uint", REQ, "frames with a peak search")                                \
    X(AGGREGATES, HITS, "uint", REQ, "hits among them")                                            \
    X(AGGREGATES, PEAKS, "uint", REQ, "peaks found")                                               \
    X(AGGREGATES, HIT_RATE, "float", REQ, "hit fraction over the last `hit_rate_window` frames")   \
    X(AGGREGATES, HIT_RATE_WINDOW, "uint", REQ, "the window")                                      \
    X(AGGREGATES, HIT_RATE_WINDOW_FRAMES, "uint", REQ, "frames the window holds now")              \
    X(AGGREGATES, HIT_RATE_HISTORY, "array `<f8` [<= 256]", REQ, "`hit_rate` at each publication, oldest first (OM's name)") \
    X(AGGREGATES, HIT_RATE_TIMESTAMP_HISTORY, "array `<f8` [<= 256]", REQ, "the wall time (s since the epoch) of each `hit_rate_history` entry") \
    X(AGGREGATES, NUM_PEAKS_HISTOGRAM, "array `<u8` [64]", REQ, "frames by `num_peaks`: bin k holds `k * w <= num_peaks < (k + 1) * w`, the last bin everything above") \
    X(AGGREGATES, NUM_PEAKS_BIN_WIDTH, "uint", REQ, "w")                                           \
    X(AGGREGATES, VIRTUAL_POWDER_PLOT, "map", REQ, "the number of peaks whose centroid rounds to each pixel, compressed (`aggregates.virtual_powder_plot` below)") \
    X(AGGREGATES_POWDER, DTYPE, "str", REQ, "`\"<u4\"`")                                           \
    X(AGGREGATES_POWDER, SHAPE, "[uint, uint]", REQ, "[rows, cols]")                               \
    X(AGGREGATES_POWDER, ENCODING, "str", REQ, "`\"bslz4\"`: bitshuffle-LZ4 (HDF5 filter 32008 chunk; decode with hdf5plugin, bitshuffle or `faidctl decode`)") \
    X(AGGREGATES_POWDER, DATA, "bin", REQ, "the compressed counts")                                \
    /* error */                                                                                    \
    X(ERROR, TYPE, "str", REQ, "`\"error\"`")                                                      \
    X(ERROR, SERIES_ID, "uint", REQ, "series (0 when unknown)")                                    \
    X(ERROR, FRAME_ID, "uint", OPT, "present when the header named one")                           \
    X(ERROR, CODE, "str", REQ, "symbolic faid error, e.g. `\"FAID_ECORRUPT\"`")                    \
    X(ERROR, ERRNO, "int", REQ, "numeric faid error code")                                         \
    X(ERROR, STAGE, "str", REQ, "`\"ingest\"` (envelope/header/validation) or `\"worker\"` (decode/compute)") \
    X(ERROR, MESSAGE, "str", REQ, "human explanation naming the key or block at fault")            \
    X(ERROR, MSG_NUMBER, "uint", REQ, "sequence number")                                           \
    /* lossless channel */                                                                         \
    X(LL_REQUEST, TYPE, "str", REQ, "`\"hello\"`, `\"ack\"`, `\"bye\"`")                           \
    X(LL_REQUEST, CREDIT, "uint", OPT, "hello, ack: messages faid may send beyond the acknowledged") \
    X(LL_REQUEST, SEQ, "uint", OPT, "ack (hello optionally): `msg_number` of the last message in hand") \
    X(LL_REQUEST, INSTANCE, "str", OPT, "with `seq`: the faid instance `seq` refers to")           \
    X(LL_REPLY, TYPE, "str", REQ, "`\"welcome\"`, `\"refused\"`, `\"ping\"`")                      \
    X(LL_REPLY, INSTANCE, "str", OPT, "welcome, refused: 16 hex digits, new at every faid start")  \
    X(LL_REPLY, CREDIT, "uint", OPT, "welcome: the credit granted")                                \
    X(LL_REPLY, HELD, "uint", OPT, "welcome: messages about to be sent")                           \
    X(LL_REPLY, CONSUMER, "str", OPT, "refused: the name holding the channel")                     \
    X(LL_REPLY, MESSAGE, "str", OPT, "refused: why")                                               \
    /* hits channel */                                                                             \
    X(HIT, TYPE, "str", REQ, "`\"hit\"`")                                                          \
    X(HIT, SERIES_ID, "uint", REQ, "the frame's series")                                           \
    X(HIT, FRAME_ID, "uint", REQ, "the frame")                                                     \
    X(HIT, EVENT_ID, "str", REQ, "`\"<series_unique_id or series>//<frame_id>\"`")                 \
    X(HIT, TIMESTAMP, "float", REQ, "input timestamp, else the receive wall time (s)")             \
    X(HIT, BEAM_ENERGY, "float", REQ, "eV (from `geometry.wavelength`)")                           \
    X(HIT, DETECTOR_DISTANCE, "float", REQ, "mm (from `geometry.dist`)")                           \
    X(HIT, NUM_PEAKS, "uint", REQ, "as in the result")                                             \
    X(HIT, SETUP_VERSION, "uint", REQ, "reduction setup used for this frame")                      \
    X(HIT, PEAK_LIST, "map", REQ, "OM's peak list (`hit.peak_list` below)")                        \
    X(HIT, DETECTOR_DATA, "msgpack-numpy array", OPT, "`hits.mode: frame`: the decoded frame as `<f4` [rows, cols], masked pixels NaN") \
    X(HIT, PEAK_PATCHES, "msgpack-numpy array", OPT, "`hits.mode: patches`: `<f4` [n, 2r+1, 2r+1] (r = `hits.patch_radius`) around each peak's rounded centroid, NaN outside the frame") \
    X(HIT, PEAK_PATCH_ORIGIN, "[[row, col], ...]", OPT, "patches: the first pixel of each patch")  \
    X(HIT, BG_I, "msgpack-numpy array", OPT, "patches: the background profile `<f4` [npt] (on the start's `radial`)") \
    X(HIT_PEAK_LIST, FS, "[float]", REQ, "pixel-index fast-axis centroids (= `peak_x`)")           \
    X(HIT_PEAK_LIST, SS, "[float]", REQ, "pixel-index slow-axis centroids (= `peak_y`)")           \
    X(HIT_PEAK_LIST, INTENSITY, "[float]", REQ, "= `peak_intensity`")                              \
    X(HIT_PEAK_LIST, NUM_PIXELS, "[float]", REQ, "= `peak_npix`, as floats (CrystFEL misreads integers)") \
    X(HIT_PEAK_LIST, MAX_PIXEL_INTENSITY, "[float]", REQ, "= `peak_max_pixel`")                    \
    X(HIT_PEAK_LIST, SNR, "[float]", REQ, "= `peak_snr`")                                          \
    X(HIT_PEAK_LIST, NUM_PEAKS, "uint", REQ, "entries in the lists")                               \
    X(NUMPY, ND, "bool", REQ, "true (a bin key, as are all keys of this map)")                     \
    X(NUMPY, TYPE, "str", REQ, "numpy descriptor, e.g. `\"<f4\"`")                                 \
    X(NUMPY, KIND, "bin", REQ, "empty")                                                            \
    X(NUMPY, SHAPE, "[uint, ...]", REQ, "dimensions")                                              \
    X(NUMPY, DATA, "bin", REQ, "the elements, C order")                                            \
    /* control */                                                                                  \
    X(CTL_REQUEST, CMD, "str", REQ, "`ping`, `status`, `config`, `reload`, `reset`, `stop`, `writer`") \
    X(CTL_REQUEST, PATH, "str", OPT, "reload: read this file once instead of the start file")     \
    X(CTL_REQUEST, KEY, "str", OPT, "config: one option (`integration.npt`): reply its value only") \
    X(CTL_REQUEST, DIRECTORY, "str", OPT, "writer: the next series' directory (inside `writer.root` when set; `\"\"`: back to `writer.directory`)") \
    X(CTL_REQUEST, PREFIX, "str", OPT, "writer: the next series' file-name prefix (letters, digits, `_`, `-`, `.`; no `/`, no `..`)") \
    X(CTL_REPLY, OK, "bool", REQ, "whether the command succeeded")                                 \
    X(CTL_REPLY, CMD, "str", OPT, "the command answered (absent only from the `reply too large` error)") \
    X(CTL_REPLY, ERROR, "str", OPT, "when `ok` is false: why")                                     \
    X(CTL_REPLY, CODE, "str", OPT, "when `ok` is false: the symbolic faid error")                  \
    X(CTL_REPLY, PROTOCOL_VERSION, "uint", OPT, "ping, status")                                    \
    X(CTL_REPLY, SOFTWARE_VERSION, "str", OPT, "ping, status")                                     \
    X(CTL_REPLY, CONFIG, "str", OPT, "config: YAML of the effective configuration")                \
    X(CTL_REPLY, SOURCE, "str", OPT, "config: its file, as `config_file` in `status`, or `\"\"`")  \
    X(CTL_REPLY, KEY, "str", OPT, "config with `key`: the option (then no `config`, `source`)")    \
    X(CTL_REPLY, VALUE, "str", OPT, "config with `key`: its effective value, YAML flow text")      \
    X(CTL_REPLY, SETUP_VERSION, "uint", OPT, "reload: the new setup; status")                      \
    X(CTL_REPLY, DIRECTORY, "str", OPT, "writer: the directory of the next series (`\"\"`: the writer is off)") \
    X(CTL_REPLY, PREFIX, "str", OPT, "writer: the file-name prefix of the next series")             \
    /* status reply and stats body */                                                              \
    X(STATUS, TYPE, "str", OPT, "stats only: `\"stats\"`")                                         \
    X(STATUS, STATE, "str", REQ, "`\"idle\"` (no open series), `\"running\"`, `\"stopping\"`")     \
    X(STATUS, SERIES_ID, "uint", REQ, "current or last series")                                    \
    X(STATUS, SERIES_UNIQUE_ID, "str", REQ, "its unique name")                                     \
    X(STATUS, INSTANCE, "str", REQ, "this instance's name (`instance.name`)") \
    X(STATUS, SHARD, "uint", REQ, "the current or last series' shard") \
    X(STATUS, SHARDS, "uint", REQ, "its shard count") \
    X(STATUS, UPTIME_S, "float", REQ, "seconds since faid started")                                \
    X(STATUS, SOFTWARE_VERSION, "str", REQ, "faid version")                                        \
    X(STATUS, PROTOCOL_VERSION, "uint", REQ, "`1`")                                                \
    X(STATUS, SETUP_VERSION, "uint", REQ, "current reduction setup")                               \
    X(STATUS, CONFIG_HASH, "str", REQ, "its hash")                                                 \
    X(STATUS, CONFIG_FILE, "str", REQ, "configuration file of the setup in force (`\"\"` = embedded default)") \
    X(STATUS, CONFIG_START, "str", REQ, "the file given with `-c`, which SIGHUP and `reload` without `path` re-read (`\"\"` = embedded default); differs from `config_file` after a `reload` with `path`") \
    X(STATUS, COUNTERS, "map str -> uint", REQ, "frames: `received` (image messages), `received_bytes`, `processed`, `failed`, `dropped` (`received = processed + failed + dropped` once idle); messages: `published` (PUB sends), `lossless_sent` (first sends on the lossless channel), `bad_input` (messages without a usable header), `series`, `stale` (messages of older series dropped, section 2), `ignored` (message types faid has no use for, e.g. Jungfraujoch `calibration`), `forwarded`, `forward_dropped` (`input.forward_endpoint`), `hits_sent`, `hits_dropped` (`hits.endpoint`), `hits_requested` (`next` requests on `hits.request_endpoint` that took a waiting entry), `hits_delivered` (hits given to a requester), `hits_requesters_gone` (waiting requesters that had left, or stopped reading, when offered a hit or making room: freed, the hit offered to the next), `hits_requests_displaced` (waiting requesters answered `What?` to make room for a newer one), `hits_requests_repeated` (`next` from an identity already waiting: ignored); `hits_requested = hits_delivered + hits_requesters_gone + hits_requests_displaced + hits_waiting`; `hits_resets` (`resetplots` served), `setups_reused`, `setups_rebuilt` (series starts whose setup was reused or built, section 2.1), `start_geometry_refused` (starts whose geometry was outside the option table's ranges, `input.geometry_source: start`: the configuration's used, section 2.1), `detector_masks_refused` (starts whose detector pixel mask was refused: wrong shape or type, or not decodable; no detector mask used), `log_suppressed` (log lines a rate-limited site held back, docs/operations.md)") \
    X(STATUS, DROPS, "map str -> uint", REQ, "frames dropped, per `stage.reason`: `queue.oldest`, `queue.newest`, `series.stale`, `input.shutdown` (read after `input.stop_timeout` during a stop, not processed)") \
    X(STATUS, ERRORS, "map str -> uint", REQ, "per `stage.CODE` (stages `ingest`, `worker`, `output`: a failed PUB send), e.g. `ingest.FAID_EFORMAT`, `worker.FAID_ECORRUPT`") \
    X(STATUS, INPUT, "map", REQ, "the input sockets and their connections as ZeroMQ reports them, summed over every endpoint, and the pinned input arena (`status.input` below)") \
    X(STATUS, QUEUE, "map", REQ, "the frame queue (`status.queue` below)")                         \
    X(STATUS, FPS, "float", REQ, "results per second over the last stats interval")               \
    X(STATUS, HITS_WAITING, "uint", REQ, "requesters of `next` waiting for a hit on `hits.request_endpoint` now (at most 64, one per identity; 0 without the socket)") \
    X(STATUS, LATENCY_US, "map", REQ, "received -> result ready, since start or `reset` (`status.latency_us` below)") \
    X(STATUS, LOSSLESS, "map", REQ, "the lossless channel, section 3.6 (`status.lossless` below)") \
    X(STATUS, DEVICES, "[map]", REQ, "per worker (`status.devices` below)")                        \
    X(STATUS, MEMORY, "map", REQ, "the daemon's memory: resident size and what the allocator holds (`status.memory` below)")\
    X(STATUS_INPUT, MAX_MESSAGE_BYTES, "uint", REQ, "the input sockets' `ZMQ_MAXMSGSIZE`")         \
    X(STATUS_INPUT, ENDPOINTS, "uint", REQ, "entries of `input.endpoint`: input sockets and ingest threads") \
    X(STATUS_INPUT, PINNED_BYTES, "uint", REQ, "the pinned input arena (`input.pinned_bytes`), 0 when off") \
    X(STATUS_INPUT, PINNED_FRAMES, "uint", REQ, "frames ingest copied into the arena (the device reads them in place)") \
    X(STATUS_INPUT, ZMQ_CONTEXTS, "uint", REQ, "ZeroMQ contexts the input sockets use: one per endpoint with `input.contexts` per_connection, 1 when they share the daemon's") \
    X(STATUS_INPUT, PINNED_FALLBACK, "uint", REQ, "frames that did not fit in the arena: the worker copied them") \
    X(STATUS_INPUT, PINNED_RECEIVE, "str", REQ, "`input.pinned_receive`: `\"on\"` (large messages of the input I/O threads are received into the arena), `\"off\"`, or `\"unavailable\"` (asked for, but the arena is off or this build has no such allocator)") \
    X(STATUS_INPUT, PINNED_RECEIVED, "uint", REQ, "frames whose bytes were received straight into the arena: nobody copied them") \
    X(STATUS_INPUT, PINNED_RECEIVE_FALLBACK, "uint", REQ, "large messages of the input I/O threads that found the arena full (received into ordinary memory)") \
    X(STATUS_INPUT, CONNECTIONS, "uint", REQ, "connections open now")                              \
    X(STATUS_INPUT, ACCEPTED, "uint", REQ, "accepted (or connected, in connect mode)")            \
    X(STATUS_INPUT, CLOSED, "uint", REQ, "closed by the peer, or by ZeroMQ for an oversized part or a protocol error") \
    X(STATUS_INPUT, ACCEPT_FAILED, "uint", REQ, "accepts that failed (e.g. the descriptor limit)") \
    X(STATUS_INPUT, CONNECTION_CAP, "uint", REQ, "most input connections kept open: the descriptor limit less a reserve for control and files") \
    X(STATUS_INPUT, OVER_CAP, "uint", REQ, "connections closed as soon as accepted because `connection_cap` were open") \
    X(STATUS_INPUT, FAN_LINK, "str", REQ, "`input.protocol: fan`: the link to the fan-out: `\"joining\"` (hello sent), `\"live\"` (welcomed, its beats come), `\"refused\"` (config_hash differs from the other instances', also after a reload), `\"silent\"` (no beat for `fan.instance_timeout`: the fan-out is taken for gone, the open series ended); `\"off\"` otherwise") \
    X(STATUS_QUEUE, DEPTH, "uint", REQ, "frames waiting")                                          \
    X(STATUS_QUEUE, CAPACITY, "uint", REQ, "frame queue capacity")                                 \
    X(STATUS_QUEUE, POLICY, "str", REQ, "backpressure policy")                                     \
    X(STATUS_QUEUE, RESULTS_DEPTH, "uint", REQ, "results waiting for the publisher")               \
    X(STATUS_QUEUE, FREE_SLOTS, "uint", REQ, "frame slots free")                                   \
    X(STATUS_LATENCY, P50, "float", REQ, "median (us)")                                            \
    X(STATUS_LATENCY, P99, "float", REQ, "99th percentile (us)")                                   \
    X(STATUS_LATENCY, MAX, "float", REQ, "maximum (us)")                                           \
    X(STATUS_LATENCY, SAMPLES, "uint", REQ, "results observed")                                    \
    X(STATUS_LOSSLESS, STATE, "str", REQ, "`\"off\"`, `\"waiting\"` for a consumer, `\"active\"`") \
    X(STATUS_LOSSLESS, CONSUMER, "str", OPT, "with a channel: the consumer's name or hex id")       \
    X(STATUS_LOSSLESS, INSTANCE, "str", OPT, "with a channel: this faid run")                      \
    X(STATUS_LOSSLESS, OVERFLOW, "str", OPT, "with a channel: the overflow policy")                \
    X(STATUS_LOSSLESS, HELD, "uint", OPT, "with a channel: unacknowledged messages kept")          \
    X(STATUS_LOSSLESS, HELD_BYTES, "uint", OPT, "with a channel: their bytes")                     \
    X(STATUS_LOSSLESS, CAPACITY_BYTES, "uint", OPT, "with a channel: the buffer's size")           \
    X(STATUS_LOSSLESS, SENT, "uint", OPT, "with a channel: first sends")                           \
    X(STATUS_LOSSLESS, RESENT, "uint", OPT, "with a channel: re-sends")                            \
    X(STATUS_LOSSLESS, ACKED, "uint", OPT, "with a channel: messages acknowledged")                \
    X(STATUS_LOSSLESS, SESSIONS, "uint", OPT, "with a channel: consumer sessions")                 \
    X(STATUS_LOSSLESS, REFUSED, "uint", OPT, "with a channel: consumers refused")                  \
    X(STATUS_LOSSLESS, REFUSALS_UNANSWERED, "uint", OPT, "with a channel: refused requests not answered (the peer was answered within the last second, or 64 others were)") \
    X(STATUS_LOSSLESS, PINGS, "uint", OPT, "with a channel: liveness probes sent to the active consumer (at most 4 a second)") \
    X(STATUS_LOSSLESS, NOT_RESENT, "uint", OPT, "with a channel: messages a repeated hello did not queue again on the connection that still holds them") \
    X(STATUS_LOSSLESS, INPUT_DEFERRED, "uint", OPT, "with a channel: passes of the publisher that left peer messages for the next (256 read per pass)") \
    X(STATUS_LOSSLESS, OLD_CONNECTION, "uint", OPT, "with a channel: messages of the consumer's earlier connection taken for it (acks applied), not refused") \
    X(STATUS_LOSSLESS, GIVEN_UP, "map", OPT, "with a channel: `start`, `result`, `end`, `error` -> messages given up") \
    X(STATUS_DEVICE, INDEX, "uint", REQ, "worker index (`device` of results)")                     \
    X(STATUS_DEVICE, SPEC, "str", REQ, "the configured device")                                    \
    X(STATUS_DEVICE, NAME, "str", REQ, "the device's name")                                        \
    X(STATUS_DEVICE, PROCESSED, "uint", REQ, "frames it reduced")                                  \
    X(STATUS_DEVICE, FAILED, "uint", REQ, "frames that failed on it")                              \
    X(STATUS_DEVICE, BUSY, "float", REQ, "fraction of time computing over the last interval")      \
    X(STATUS_DEVICE, HOST_US, "float", REQ, "mean host time of the worker's submit per frame (copy into pinned staging, block table when ingest had none; the engine's `host` time, `faid_stage_seconds{stage=\"host\"}`), since start or `reset`") \
    X(STATUS_DEVICE, TABLE_US, "float", REQ, "mean time ingest spent parsing the frame's block table, since start or `reset` (ingest's time, before the frame reaches a worker: no engine time)")\
    X(STATUS_DEVICE, SUBMIT_US, "float", REQ, "mean time per frame the worker spent handing frames to the engine (`host_us` and the enqueueing; the reference device reduces the frame here), since start or `reset`") \
    X(STATUS_DEVICE, WAIT_US, "float", REQ, "mean time per frame the worker spent in the engine's collect (waiting for the device, reading the results out), since start or `reset`: with `submit_us` and `encode_us`, where the worker's time goes; with `pipeline.collect_thread` the collect thread's time there (the worker's own is `submit_us`; its waits for room are not counted)") \
    X(STATUS_DEVICE, ENCODE_US, "float", REQ, "mean time per frame the worker (with `pipeline.collect_thread`: its collect thread) spent after collect: the result message, aggregates, statistics, since start or `reset`") \
    X(STATUS_DEVICE, EARLY_LAUNCHES, "uint", REQ, "`pipeline.batch` > 1: partly filled slots the worker launched when no frame was waiting, before it waited for an older frame (their frames start at once instead of after every frame before them), since start") \
    X(STATUS_MEMORY, RSS_BYTES, "uint", REQ, "resident memory (`VmRSS`)")                          \
    X(STATUS_MEMORY, RSS_ANON_BYTES, "uint", REQ, "its anonymous part (`RssAnon`: heaps, thread arenas, mappings, stacks; the rest is pages of files, mostly the libraries)")\
    X(STATUS_MEMORY, HEAP_BYTES, "uint", REQ, "bytes the C library's allocator holds in its arenas (the main heap and the arenas it makes for threads; glibc `mallinfo2().arena`); this and the four below are 0 where the C library does not tell (not glibc, or a build with AddressSanitizer, whose malloc it is)")\
    X(STATUS_MEMORY, MMAP_BYTES, "uint", REQ, "large blocks the allocator mapped one by one (`hblkhd`), all in use")\
    X(STATUS_MEMORY, IN_USE_BYTES, "uint", REQ, "allocated and not freed: in the arenas (`uordblks`) plus `mmap_bytes`; a leak raises it. `heap_bytes = in_use_bytes - mmap_bytes + free_bytes`")\
    X(STATUS_MEMORY, FREE_BYTES, "uint", REQ, "free inside the arenas, kept by the allocator (`fordblks`): fragmentation, or arenas grown to a working size")\
    X(STATUS_MEMORY, ARENAS, "uint", REQ, "malloc arenas (the main one and those made for threads; from `malloc_info`)") \
    X(STATUS, WRITER, "map", REQ, "the files of record (`writer.directory`, docs/output-files.md; `status.writer` below)") \
    X(STATUS_WRITER, STATE, "str", REQ, "`\"off\"` (the last series start had no `writer.directory`), `\"idle\"` (no file open), `\"writing\"`") \
    X(STATUS_WRITER, DIRECTORY, "str", REQ, "the directory of the last series start (`\"\"` when off)") \
    X(STATUS_WRITER, FILE, "str", REQ, "the series file being written (`\"\"` when none)") \
    X(STATUS_WRITER, FILES_OPEN, "uint", REQ, "files being written") \
    X(STATUS_WRITER, FILES_WRITTEN, "uint", REQ, "files written and closed without error") \
    X(STATUS_WRITER, FRAMES_WRITTEN, "uint", REQ, "results written into series files") \
    X(STATUS_WRITER, BYTES_WRITTEN, "uint", REQ, "data bytes written") \
    X(STATUS_WRITER, HIT_FRAMES_WRITTEN, "uint", REQ, "hit frames written into hits files (`writer.hits`)") \
    X(STATUS_WRITER, FRAMES_SKIPPED, "uint", REQ, "results not written because their series' file had failed") \
    X(STATUS_WRITER, FREE_BYTES, "uint", REQ, "free bytes of the directory's file system (sampled each second; 0 when off)") \
    X(STATUS_WRITER, QUEUED_BYTES, "uint", REQ, "message bytes waiting for the writer thread (at most `writer.queue_bytes`)") \
    X(STATUS_WRITER, ERRORS, "map str -> uint", REQ, "write errors per kind: `no_space` (ENOSPC), `file_size` (RLIMIT_FSIZE), `unwritable` (directory missing, read-only), `removed` (file or directory removed while written), `io`, `message` (a message unlike its start)") \
    X(STATUS_WRITER, DROPPED, "map str -> uint", REQ, "messages not queued for the writer because `writer.queue_bytes` was full, per kind: `start`, `result`, `end`, `hit`") \
    /* the fan-out link (proto/faid_fan_proto.h) */ \
    X(FAN_LINK, TYPE, "str", REQ, "instance to fan-out: `\"hello\"`, `\"credit\"`, `\"bye\"`; fan-out to instance: `\"welcome\"`, `\"refused\"`, `\"rejoin\"`, `\"route\"`, `\"beat\"` (every 100 ms: the fan-out is alive)") \
    X(FAN_LINK, INSTANCE, "str (< 128 bytes)", OPT, "hello: the instance's name (`instance.name`, as its start, results and end carry it)") \
    X(FAN_LINK, CONFIG_HASH, "str", OPT, "hello, credit: the instance's `config_hash` (as its `status`); in a credit the one in force, so that a reload that changes it is checked against the other instances again") \
    X(FAN_LINK, WINDOW, "uint", OPT, "hello, credit, bye: frames the instance may hold beyond those it accounted for") \
    X(FAN_LINK, DONE, "uint", OPT, "hello, credit, bye: frames the instance accounted for (results, errors, drops) since it started; the fan-out credits `done + window - sent`") \
    X(FAN_LINK, ACCOUNTED, "[[uint, uint, uint]]", OPT, "credit, bye: the frames accounted for (results, errors, drops published) since the previous credit, exactly, as inclusive `[series_id, first, last]` ranges, at most 256 per message; the fan-out's outstanding frames of the instance are those sent and never named here") \
    X(FAN_LINK, FLAGGED, "bool", OPT, "welcome: the instance's `config_hash` differs from the others' (`fan.config_mismatch: flag`)") \
    X(FAN_LINK, ERROR, "str", OPT, "refused: why") \
    X(FAN_LINK, PROTOCOL, "str", OPT, "route: the detector format of the message that follows (`native`, `dectris-v1`, `dectris-v2`)") \
    X(FAN_LINK, KIND, "str", OPT, "route: `\"start\"`, `\"image\"`, `\"end\"`, `\"other\"`") \
    X(FAN_LINK, SERIES_ID, "uint", OPT, "route: the series") \
    X(FAN_LINK, FRAME_ID, "uint", OPT, "route of an image: its frame id") \
    X(FAN_LINK, SHARD, "uint", OPT, "route: the instance's index among the instances of the series (join order)") \
    X(FAN_LINK, SHARDS, "uint", OPT, "route: how many instances the series has (a later joiner sees a larger count)") \
    /* the fan-out's PUB: frames lost with an instance */ \
    X(FAN_LOST, TYPE, "str", REQ, "`\"lost\"`") \
    X(FAN_LOST, SERIES, "uint", REQ, "the series") \
    X(FAN_LOST, INSTANCE, "str", REQ, "the instance they were handed to; `\"\"`: dropped by the fan-out itself (`fan.buffer_bytes` full)") \
    X(FAN_LOST, REASON, "str", REQ, "`\"gone (connection closed)\"`, `\"timed out\"`, `\"left\"`, `\"replaced by a new connection\"`, `\"refused after a reload (config_hash differs)\"`, `\"buffer full\"`") \
    X(FAN_LOST, FRAMES, "[[uint, uint]]", REQ, "the frame ids as inclusive `[first, last]` ranges") \
    /* the fan-out's PUB: the frames it handed out in a series */ \
    X(FAN_ROUTED, TYPE, "str", REQ, "`\"routed\"`") \
    X(FAN_ROUTED, SERIES, "uint", REQ, "the series") \
    X(FAN_ROUTED, FRAMES, "[[uint, uint]]", REQ, "every image id of the series the fan-out handed to an instance, sorted, as inclusive `[first, last]` ranges (images its buffer dropped are in `lost` reports with instance `\"\"`)") \
    X(FAN_ROUTED, INCOMPLETE, "bool", REQ, "true when the ids took more than 65,536 ranges: `frames` is then not the whole set (a consumer falls back to the series' frame count)") \
    /* faid-fan's status reply (after ok, cmd) */ \
    X(FAN_STATUS, SOFTWARE_VERSION, "str", REQ, "faid version") \
    X(FAN_STATUS, UPTIME_S, "float", REQ, "seconds since faid-fan started") \
    X(FAN_STATUS, STATE, "str", REQ, "`\"running\"` (a series is open) or `\"idle\"`") \
    X(FAN_STATUS, SERIES_ID, "uint", REQ, "the open or last series") \
    X(FAN_STATUS, POLICY, "str", REQ, "`fan.policy`: `\"blocks\"` or `\"credit\"`") \
    X(FAN_STATUS, ENDS_AWAITED, "uint", REQ, "ends of the open series still to come: starts minus ends over the inputs (several senders: the end goes to the instances at 0, or `fan.end_timeout` after the first end)") \
    X(FAN_STATUS, COUNTERS, "map str -> uint", REQ, "`received`, `received_bytes` (detector messages), `bad_input` (unreadable: tee only), `routed` (images handed to an instance), `broadcast` (starts, ends, other messages sent to every instance), `dropped` (images the full buffer dropped), `lost` (frames reported lost), `tee_sent`, `tee_dropped`, `joined`, `left`, `died`, `refused` (instances), `queued_bytes` (the buffer now)") \
    X(FAN_STATUS, INSTANCES, "[map]", REQ, "every instance seen (`fanout-status.instances` below)") \
    X(FAN_STATUS_INSTANCE, INSTANCE, "str", REQ, "its name") \
    X(FAN_STATUS_INSTANCE, STATE, "str", REQ, "`\"live\"` (receives frames), `\"dead\"` (connection closed or silent for `fan.instance_timeout`), `\"left\"` (said bye), `\"refused\"` (its `config_hash` differs, at its hello or after a reload)") \
    X(FAN_STATUS_INSTANCE, CONFIG_HASH, "str", REQ, "its `config_hash`") \
    X(FAN_STATUS_INSTANCE, FLAGGED, "bool", REQ, "its hash differs and `fan.config_mismatch` is `flag`") \
    X(FAN_STATUS_INSTANCE, CREDIT, "uint", REQ, "frames it may be sent now") \
    X(FAN_STATUS_INSTANCE, WINDOW, "uint", REQ, "its window") \
    X(FAN_STATUS_INSTANCE, SENT, "uint", REQ, "frames handed to it") \
    X(FAN_STATUS_INSTANCE, LOST, "uint", REQ, "frames reported lost with it") \
    X(FAN_STATUS_INSTANCE, SHARD, "uint", REQ, "its shard in the last series") \
    X(FAN_STATUS_INSTANCE, SHARDS, "uint", REQ, "the shard count it was told")
/* clang-format on */

/* The key constants: FAID_K_SERIES_ID is "series_id" (a char array, not a literal). */
#define FAID_PROTO_KEY_CONST(id, name) static const char FAID_K_##id[] = name;
FAID_PROTO_KEY_NAMES(FAID_PROTO_KEY_CONST)
#undef FAID_PROTO_KEY_CONST

typedef enum faid_key {
    FAID_KEY_UNKNOWN = 0,
#define FAID_PROTO_KEY_ENUM(id, name) FAID_KEY_##id,
    FAID_PROTO_KEY_NAMES(FAID_PROTO_KEY_ENUM)
#undef FAID_PROTO_KEY_ENUM
        FAID_NKEYS
} faid_key;

typedef enum faid_proto_msg {
#define FAID_PROTO_MSG_ENUM(id, marker, title) FAID_PMSG_##id,
    FAID_PROTO_MESSAGES(FAID_PROTO_MSG_ENUM)
#undef FAID_PROTO_MSG_ENUM
        FAID_NPMSGS
} faid_proto_msg;

typedef enum { FAID_KP_REQ = 1, FAID_KP_OPT = 2 } faid_key_presence;

typedef struct faid_proto_row {
    faid_proto_msg msg;
    faid_key key;
    const char *type;
    faid_key_presence presence;
    const char *meaning;
} faid_proto_row;

#endif
