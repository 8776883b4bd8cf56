/* faid_config: the option table and everything it drives (see faid_config.h).
 *
 * One static table lists every option with its storage, range, default, flags and help. The
 * embedded default is the table's defaults applied through the same setters as a YAML file, so a
 * default can never escape validation. YAML is read with libyaml's document API, which keeps the
 * line of every node for messages. After the options are applied, faid_config_resolve() derives
 * the effective detector and geometry (presets, .poni file, explicit keys). The dump, the
 * annotated example, the Markdown reference, `config get` and the hash are all generated from
 * the table, so documentation and behaviour cannot drift apart. */
#include "faid_config.h"

#include "faid_file.h"
#include "faid_log.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "faid_input.h"
#include "faid_proto.h"
#include "faid_proto_table.h"

#ifndef FAID_VERSION
#define FAID_VERSION "unknown"
#endif

/* ---- the table ------------------------------------------------------------------------------ */

/* Choices of the enum options: those of a module's enum are the module's tables
 * (faid_unit_names, faid_split_names, faid_error_model_names, faid_peak_algorithm_names,
 * faid_clip_model_names, faid_log_level_names, and input.protocol's faid_input_protocol_names);
 * these are the configuration's own. */
static const char *const mode_names[] = {"connect", "bind", NULL};
static const char *const pinned_copy_names[] = {"auto", "always", "idle", NULL};
static const char *const contexts_names[] = {"shared", "per_connection", NULL};
static const char *const cake_names[] = {"lean", "full", NULL};
static const char *const geo_source_names[] = {"configuration", "start", NULL};
static const char *const fan_policy_names[] = {"blocks", "credit", NULL};
static const char *const fan_tee_names[] = {"push", "pub", NULL};
static const char *const fan_mismatch_names[] = {"refuse", "flag", NULL};
const char *const faid_queue_policy_names[] = {"block", "drop_oldest", "drop_newest", NULL};
const char *const faid_ll_overflow_names[] = {"block", "drop_oldest", NULL};
const char *const faid_collect_launch_names[] = {"eager", "fill", NULL};
static const char *const hits_mode_names[] = {"frame", "patches", NULL};

#define OFF(f) offsetof(faid_config, f)
#define HUGE_V DBL_MAX
#define R      FAID_OPT_RELOAD
#define N      FAID_OPT_NULLABLE
#define H      FAID_OPT_REDUCTION
#define X      FAID_OPT_MIN_EXCL
#define D      FAID_OPT_DERIVED

/* name, type, unit, min, max, default, flags, choices, off, off2, eff, eff2, has_off, cap, help */
#define OPT(name, type, unit, lo, hi, def, flags, choices, f, f2, e, e2, has, cap, help)           \
    {                                                                                              \
        name, type, unit, lo, hi, def, flags, choices, OFF(f), OFF(f2), OFF(e), OFF(e2), has, cap, \
            help                                                                                   \
    }
#define SIMPLE(name, type, unit, lo, hi, def, flags, choices, f, cap, help)                        \
    OPT(name, type, unit, lo, hi, def, flags, choices, f, f, f, f, -1, cap, help)

static const faid_option options[] = {
    OPT("detector.preset", FAID_OT_STRING, "", 0, 0, "eiger_4m", R | H | D | N, NULL, key_preset,
        key_preset, preset, preset, -1, 64,
        "Detector model, by pyFAI name or alias (eiger_4m, Eiger4M, pilatus1m, ...): shape, pixel "
        "size and module gaps, which are masked. null = no preset (then detector.shape and "
        "detector.pixel_size, or a .poni file naming the detector, must say what it is). When "
        "the configuration names no detector at all (no preset, no shape, no detector in the "
        ".poni file) the EIGER 4M preset applies."),
    OPT("detector.shape", FAID_OT_SHAPE, "pixels", 1, 65536, NULL, R | H | D, NULL, key_shape[0],
        key_shape[1], rows, cols, -1, 0,
        "Frame shape [rows, columns] (rows = slow axis = dim1). Overrides the preset and the "
        ".poni file. Default: from the preset or the .poni file."),
    /* The lower bounds of pixel size, distance and wavelength are physical, not 0: a start
     * message's wavelength of 1e-310 m passed (0, 1e-6] and made every radial bin NaN (issue
     * 20, defect 7); the same ranges check the configuration and the start messages. */
    OPT("detector.pixel_size", FAID_OT_PAIR, "m", 1e-7, 0.01, NULL, R | H | D | X, NULL,
        key_pixel[0], key_pixel[1], pixel1, pixel2, -1, 0,
        "Pixel size [pixel1, pixel2] (rows, columns) in metres. Overrides the preset and the "
        ".poni file. Default: from the preset or the .poni file."),
    SIMPLE("detector.mask", FAID_OT_PATH, "", 0, 0, "null", R | H | N, NULL, mask_path,
           FAID_PATH_MAX,
           "Mask .npy file (rows x columns, any numeric or bool dtype, non-zero = masked), "
           "combined with the preset's module gaps. Relative to the configuration file's "
           "folder."),
    OPT("detector.orientation", FAID_OT_INT, "", 1, 4, "3", R | H | D, NULL, key_geom.orientation,
        key_geom.orientation, geometry.orientation, geometry.orientation, -1, 0,
        "pyFAI detector orientation (1..4, 3 = no flip). Default: from the .poni file, else 3."),
    SIMPLE("geometry.poni_file", FAID_OT_PATH, "", 0, 0, "null", R | H | N, NULL, poni_file,
           FAID_PATH_MAX,
           "pyFAI .poni calibration (version 1 or 2). Gives the geometry and, when no preset is "
           "set, the detector. Explicit geometry keys below override its values. Relative to "
           "the configuration file's folder."),
    OPT("geometry.dist", FAID_OT_DOUBLE, "m", 1e-4, 1000, "0.1", R | H | D | X, NULL, key_geom.dist,
        key_geom.dist, geometry.dist, geometry.dist, -1, 0,
        "Sample to detector distance along the detector normal (pyFAI dist)."),
    OPT("geometry.poni1", FAID_OT_DOUBLE, "m", -10, 10, NULL, R | H | D, NULL, key_geom.poni1,
        key_geom.poni1, geometry.poni1, geometry.poni1, -1, 0,
        "Point of normal incidence along the rows (slow axis), from the outer corner of pixel "
        "(0, 0). Default: from the .poni file, else the detector centre."),
    OPT("geometry.poni2", FAID_OT_DOUBLE, "m", -10, 10, NULL, R | H | D, NULL, key_geom.poni2,
        key_geom.poni2, geometry.poni2, geometry.poni2, -1, 0,
        "Point of normal incidence along the columns (fast axis). Default: from the .poni "
        "file, else the detector centre."),
    OPT("geometry.rot1", FAID_OT_DOUBLE, "rad", -7, 7, "0.0", R | H | D, NULL, key_geom.rot1,
        key_geom.rot1, geometry.rot1, geometry.rot1, -1, 0, "pyFAI rotation 1."),
    OPT("geometry.rot2", FAID_OT_DOUBLE, "rad", -7, 7, "0.0", R | H | D, NULL, key_geom.rot2,
        key_geom.rot2, geometry.rot2, geometry.rot2, -1, 0, "pyFAI rotation 2."),
    OPT("geometry.rot3", FAID_OT_DOUBLE, "rad", -7, 7, "0.0", R | H | D, NULL, key_geom.rot3,
        key_geom.rot3, geometry.rot3, geometry.rot3, -1, 0, "pyFAI rotation 3."),
    OPT("geometry.wavelength", FAID_OT_DOUBLE, "m", 1e-12, 1e-6, "1.0e-10", R | H | D | X, NULL,
        key_geom.wavelength, key_geom.wavelength, geometry.wavelength, geometry.wavelength, -1, 0,
        "X-ray wavelength (1.0e-10 m = 1 A, 12.4 keV)."),
    SIMPLE("integration.npt", FAID_OT_INT, "bins", 1, 100000, "1000", R | H, NULL, npt, 0,
           "Number of radial bins (1D profile, and radial bins of the 2D cake)."),
    SIMPLE("integration.unit", FAID_OT_ENUM, "", 0, 0, "q_nm^-1", R | H, faid_unit_names, unit, 0,
           "Radial unit of the bins, the ranges and the output."),
    SIMPLE("integration.split", FAID_OT_ENUM, "", 0, 0, "full", R | H, faid_split_names, split, 0,
           "Pixel splitting as pyFAI: no (pixel centre), bbox (bounding box), full (exact pixel "
           "area)."),
    SIMPLE("integration.error_model", FAID_OT_ENUM, "", 0, 0, "poisson", R | H,
           faid_error_model_names, error_model, 0,
           "Variance model: poisson (variance = max(raw, 1)), azimuthal (spread within each "
           "bin) or none."),
    SIMPLE("integration.solid_angle", FAID_OT_BOOL, "", 0, 0, "true", R | H, NULL, solid_angle, 0,
           "Divide by the relative solid angle of each pixel (cos^3 of the incidence angle)."),
    OPT("integration.polarization_factor", FAID_OT_DOUBLE, "", -1, 1, "null", R | H | N, NULL,
        polarization_factor, polarization_factor, polarization_factor, polarization_factor,
        (int)OFF(has_polarization), 0,
        "Polarization correction factor (0.99 typical at a synchrotron, 0 unpolarised). null = "
        "no correction."),
    OPT("integration.radial_range", FAID_OT_PAIR, "unit", -1e9, 1e9, "null",
        R | H | N | FAID_OPT_ORDERED, NULL, radial_range[0], radial_range[1], radial_range[0],
        radial_range[1], (int)OFF(has_radial_range), 0,
        "[min, max] of the radial bins in integration.unit. null = the extent of the unmasked "
        "pixels."),
    OPT("integration.azimuth_range", FAID_OT_PAIR, "deg", -360, 360, "null",
        R | H | N | FAID_OPT_ORDERED, NULL, azimuth_range[0], azimuth_range[1], azimuth_range[0],
        azimuth_range[1], (int)OFF(has_azimuth_range), 0,
        "[min, max] of chi in degrees (pyFAI's chi, in [-180, 180)). Pixels outside are left "
        "out of the 1D profile; the cake spans it. null = all."),
    SIMPLE("integration.npt_azim", FAID_OT_INT, "bins", 0, 36000, "0", R | H | N, NULL, npt_azim, 0,
           "Azimuthal bins of the 2D cake (npt_azim x npt radial bins), computed besides the 1D "
           "profile. 0 or null = no cake."),
    SIMPLE("integration.dark", FAID_OT_PATH, "", 0, 0, "null", R | H | N, NULL, dark_path,
           FAID_PATH_MAX,
           "Dark current .npy (rows x columns, any numeric dtype), subtracted from every frame."),
    SIMPLE("integration.flat", FAID_OT_PATH, "", 0, 0, "null", R | H | N, NULL, flat_path,
           FAID_PATH_MAX,
           "Flat field .npy (rows x columns, any numeric dtype); frames are divided by it."),
    OPT("integration.dummy", FAID_OT_DOUBLE, "counts", -HUGE_V, HUGE_V, "null", R | H | N, NULL,
        dummy, dummy, dummy, dummy, (int)OFF(has_dummy), 0,
        "Pixel value that marks invalid pixels (with delta_dummy). null = none."),
    SIMPLE("integration.delta_dummy", FAID_OT_DOUBLE, "counts", 0, HUGE_V, "0.0", R | H, NULL,
           delta_dummy, 0,
           "Tolerance around integration.dummy: |value - dummy| <= delta_dummy is invalid (0 = "
           "exact match)."),
    SIMPLE("integration.normalization_factor", FAID_OT_DOUBLE, "", 0, HUGE_V, "1.0", R | H | X,
           NULL, normalization_factor, 0,
           "Every pixel's normalisation is multiplied by this (monitor, exposure time)."),
    SIMPLE("integration.empty", FAID_OT_DOUBLE, "", -HUGE_V, HUGE_V, "0.0",
           R | H | FAID_OPT_NONFINITE, NULL, empty, 0,
           "Value reported for I, sigma and std in bins without any pixel (.nan allowed)."),
    SIMPLE("peaks.algorithm", FAID_OT_ENUM, "", 0, 0, "none", R | H, faid_peak_algorithm_names,
           peaks.algorithm, 0,
           "Peak finder run on every frame: none, pyfai (pixels above the sigma-clipped "
           "background, pyFAI's picker) or peakfinder8 (Cheetah / OM / CrystFEL). Not none: "
           "every result carries the background profile, the peaks, num_peaks and is_hit "
           "(docs/peaks.md)."),
    SIMPLE("peaks.cutoff_clip", FAID_OT_DOUBLE, "sigma", 0, 1000, "0.0", R | H, NULL,
           peaks.cutoff_clip, 0,
           "Sigma clipping of the background: pixels beyond cutoff_clip x std of their radial "
           "bin are dropped; 0 = Chauvenet's criterion (pyFAI's sigma_clip_ng)."),
    SIMPLE("peaks.cycles", FAID_OT_INT, "", 0, FAID_PEAKS_MAX_CYCLES, "5", R | H, NULL,
           peaks.cycles, 0, "Sigma-clipping iterations of the background."),
    SIMPLE("peaks.error_model", FAID_OT_ENUM, "", 0, 0, "azimuthal", R | H, faid_clip_model_names,
           peaks.error_model, 0,
           "Variance model of the background: poisson, azimuthal or hybrid. Poisson sigma is "
           "far too small for picking on real frames (pyFAI's own finder then reports "
           "thousands of noise peaks)."),
    SIMPLE("peaks.noise", FAID_OT_DOUBLE, "counts", 0, 1e9, "1.0", R | H, NULL, peaks.noise, 0,
           "Detector noise floor added in quadrature to the background std (pyfai picker)."),
    SIMPLE("peaks.cutoff_peak", FAID_OT_DOUBLE, "sigma", 0, 1000, "3.0", R | H | X, NULL,
           peaks.cutoff_peak, 0,
           "pyfai picker: a pixel is a candidate above background + max(cutoff_peak x sigma, "
           "noise)."),
    SIMPLE("peaks.patch_size", FAID_OT_INT, "pixels", 3, 5, "3", R | H, NULL, peaks.patch_size, 0,
           "pyfai picker: side of the patch a candidate must be the maximum of (3 or 5)."),
    SIMPLE("peaks.connected", FAID_OT_INT, "pixels", 1, 25, "2", R | H, NULL, peaks.connected, 0,
           "pyfai picker: candidates needed in the patch (at most patch_size^2)."),
    SIMPLE("peaks.adc_threshold", FAID_OT_DOUBLE, "counts", -1e12, 1e12, "100.0", R | H, NULL,
           peaks.adc_threshold, 0, "peakfinder8: floor of the per-radius threshold."),
    SIMPLE("peaks.minimum_snr", FAID_OT_DOUBLE, "", 0, 1e6, "5.0", R | H, NULL, peaks.minimum_snr,
           0, "peakfinder8: radial sigma multiplier of the threshold and the final SNR cut."),
    SIMPLE("peaks.min_pixel_count", FAID_OT_INT, "pixels", 1, FAID_PEAKS_MAX_PIXEL_COUNT, "2",
           R | H, NULL, peaks.min_pixel_count, 0, "peakfinder8: fewest pixels of a peak."),
    SIMPLE("peaks.max_pixel_count", FAID_OT_INT, "pixels", 1, FAID_PEAKS_MAX_PIXEL_COUNT, "200",
           R | H, NULL, peaks.max_pixel_count, 0, "peakfinder8: most pixels of a peak."),
    SIMPLE("peaks.local_bg_radius", FAID_OT_INT, "pixels", 1, FAID_PEAKS_MAX_BG_RADIUS, "3", R | H,
           NULL, peaks.local_bg_radius, 0,
           "peakfinder8: radius of the local background ring around a peak."),
    SIMPLE("peaks.min_res", FAID_OT_DOUBLE, "pixels", 0, 1e6, "0.0", R | H, NULL, peaks.min_res, 0,
           "peakfinder8: smallest distance from the beam centre searched (inclusive)."),
    SIMPLE("peaks.max_res", FAID_OT_DOUBLE, "pixels", 0, 1e6, "1200.0", R | H, NULL, peaks.max_res,
           0, "peakfinder8: largest distance from the beam centre searched (inclusive)."),
    SIMPLE("peaks.max_num_peaks", FAID_OT_INT, "peaks", 1, 1000000, "2048", R | H, NULL,
           peaks.max_num_peaks, 0,
           "Most peaks kept per frame (both algorithms); num_peaks still counts every peak "
           "found."),
    SIMPLE("peaks.min_peaks_for_hit", FAID_OT_INT, "peaks", 0, 1000000, "10", R | H, NULL,
           peaks.min_peaks_for_hit, 0, "A frame with at least this many peaks is a hit."),
    OPT("peaks.max_peaks_for_hit", FAID_OT_INT, "peaks", 0, 1000000, "null", R | H | N, NULL,
        peaks.max_peaks_for_hit, peaks.max_peaks_for_hit, peaks.max_peaks_for_hit,
        peaks.max_peaks_for_hit, (int)OFF(peaks.has_max_peaks_for_hit), 0,
        "A frame with more peaks than this is not a hit (ice, saturation). null = no limit."),
    SIMPLE("peaks.hit_rate_window", FAID_OT_INT, "frames", 1, 1000000, "200", R | H, NULL,
           peaks.hit_rate_window, 0, "Frames of the rolling hit rate."),
    SIMPLE("peaks.aggregates_interval", FAID_OT_DOUBLE, "s", 0, 86400, "1.0", R, NULL,
           peaks_aggregates_interval, 0,
           "Period of the aggregates message (hit-rate history, peak-count histogram, "
           "virtual powder pattern) while peaks.algorithm is not none; 0 = off."),
    SIMPLE("input.endpoint", FAID_OT_ENDPOINTS, "", 0, 0, "tcp://*:5555", 0, NULL, input_endpoint,
           1040,
           "ZeroMQ endpoint the detector stream arrives on, or a list of up to 16 (one PULL "
           "socket and one ingest thread each, so several connections are received, validated "
           "and parsed in parallel; each endpoint is a source of the series tracker, see "
           "docs/ARCHITECTURE.md). One bound endpoint also takes several connections, "
           "fair-queued into its one ingest thread."),
    SIMPLE("input.mode", FAID_OT_ENUM, "", 0, 0, "bind", 0, mode_names, input_bind, 0,
           "bind the input socket (detector connects) or connect to the detector."),
    SIMPLE("input.pinned_bytes", FAID_OT_INT64, "bytes", 0, 68719476736.0, "268435456", 0, NULL,
           input_pinned_bytes, 0,
           "Page-locked host memory the ingest threads copy each received bslz4 / lz4 / raw "
           "frame into, allocated once at start: the device reads the frame from there, so the "
           "worker thread does no copy (the copy runs on the ingest threads, one per input "
           "endpoint, fused with the block-table parse). A frame that does not fit (arena "
           "full) is not waited for: the worker copies it as without the arena (counted in "
           "status input.pinned_fallback). Size it for queue.depth + pipeline.inflight frames "
           "per device. 0 = off."),
    SIMPLE("input.pinned_copy", FAID_OT_ENUM, "", 0, 0, "auto", 0, pinned_copy_names,
           input_pinned_copy, 0,
           "When ingest copies a frame into the pinned input arena: auto = only while frames "
           "wait in the frame queue (the workers are the bottleneck, so ingest takes the copy "
           "off them; with the queue empty the worker copies, as before the arena, and the one "
           "ingest thread of a single connection keeps its time for receiving: the two threads "
           "share the copies), always = every frame, idle = as auto but only while no further "
           "message waits on this input socket (the ingest thread has time to spare: with "
           "peak finding the frame queue is rarely empty, so auto made the one ingest thread "
           "of a single connection copy every frame)."),
    SIMPLE("input.pinned_receive", FAID_OT_BOOL, "", 0, 0, "true", 0, NULL, input_pinned_receive, 0,
           "Receive frames straight into the pinned input arena (input.pinned_bytes): the "
           "buffers libzmq's input I/O threads allocate for messages of 64 KiB or more are "
           "blocks of the arena while one fits, so neither ingest nor the worker copies the "
           "frame before the device reads it (status input.pinned_received counts those "
           "frames, input.pinned_receive_fallback the messages that found the arena full; "
           "these get the copies of input.pinned_copy). Needs the arena; a build with "
           "AddressSanitizer or ThreadSanitizer has no such allocator (status "
           "input.pinned_receive says unavailable). On one H100 with peak finding 1,794 / "
           "1,645 results/s against 1,552 / 1,463 without (one connection, two runs), latency "
           "p99 at 1 kHz about 1.0 against 1.7 ms; false = the copies of input.pinned_copy."),
    SIMPLE("input.contexts", FAID_OT_ENUM, "", 0, 0, "per_connection", 0, contexts_names,
           input_contexts, 0,
           "ZeroMQ contexts of the input sockets: per_connection = each entry of "
           "input.endpoint gets a context and I/O thread of its own, so the connections' reads "
           "share no libzmq thread or lock with each other or with the result sends; shared = "
           "every socket in the daemon's one context (its input.io_threads). With "
           "security.curve on the inputs stay in the shared context, where the key check "
           "(ZAP) runs."),
    SIMPLE("input.protocol", FAID_OT_STRING, "", 0, 0, "auto", 0, faid_input_protocol_names,
           input_protocol, 32,
           "Input message format; auto detects it per message. fan: faid is an instance behind "
           "faid-fan (docs/fan-out.md): input.endpoint is the fan-out's fan.instances_endpoint, "
           "input.mode connect, and the format of each message is the one the fan-out reads."),
    SIMPLE("input.max_frame_bytes", FAID_OT_INT64, "bytes", 1024, 68719476736.0, "268435456", 0,
           NULL, max_frame_bytes, 0,
           "Largest accepted frame payload. Enforced at the socket: a message part larger "
           "than this plus 1 MiB (headers) closes the sender's connection before it is read "
           "(counted in status input.closed and logged); a payload between the two is "
           "rejected and counted as a failed frame."),
    SIMPLE("input.channel", FAID_OT_STRING, "", 0, 0, "null", N, NULL, input_channel, 64,
           "DECTRIS stream v2 / Jungfraujoch channel reduced (threshold_1, threshold_2, "
           "difference, ...). null = the first channel each message lists."),
    SIMPLE("input.forward_endpoint", FAID_OT_STRING, "", 0, 0, "null", N, NULL, forward_endpoint,
           256,
           "Optional PUSH endpoint (bound) that re-sends every raw input message as received, "
           "so that a file writer shares the detector stream. Never blocks faid: messages its "
           "consumer cannot take are dropped and counted (forward_dropped). null = off."),
    SIMPLE("input.geometry_source", FAID_OT_ENUM, "", 0, 0, "configuration", 0, geo_source_names,
           input_geometry_source, 0,
           "Geometry of a series: configuration (the configuration's, whatever the detector's "
           "start message says; it is echoed) or start (beam centre, distance, wavelength and "
           "pixel size of the start message, no rotations; the configuration's when the start "
           "lacks one of them or one is outside the range of the key it becomes: "
           "detector.pixel_size, geometry.poni1/poni2, geometry.dist, geometry.wavelength; "
           "counted in start_geometry_refused)."),
    SIMPLE("input.series_timeout", FAID_OT_DOUBLE, "s", 0, 86400, "60.0", 0, NULL, series_timeout,
           0,
           "A series whose end message never comes is closed (end reason timeout) after this "
           "long without any message of it; the next series' start or frame closes it sooner. "
           "0 = never."),
    SIMPLE("input.io_threads", FAID_OT_INT, "threads", 1, 16, "2", 0, NULL, io_threads, 0,
           "ZeroMQ I/O threads of the daemon (input reads and result sends; two keep the input "
           "connection's reads off the thread that sends results). With several input "
           "endpoints at least their number plus one are used."),
    SIMPLE("input.stop_timeout", FAID_OT_DOUBLE, "s", 0, 86400, "5.0", 0, NULL, stop_timeout, 0,
           "On SIGTERM / stop, longest time spent processing the messages the input socket "
           "already holds; what is still readable after it is read, counted as dropped "
           "(input.shutdown) and not processed."),
    SIMPLE("output.endpoint", FAID_OT_STRING, "", 0, 0, "tcp://*:5556", 0, NULL, output_endpoint,
           256, "ZeroMQ PUB endpoint results are published on."),
    SIMPLE("output.lossless_endpoint", FAID_OT_STRING, "", 0, 0, "null", N, NULL, lossless_endpoint,
           256,
           "Optional ROUTER endpoint of the lossless channel: one consumer at a time connects a "
           "DEALER, grants credit and acknowledges what it has; unacknowledged messages are kept "
           "and re-sent (proto/PROTOCOL.md 3.6). null = off."),
    SIMPLE("output.lossless_buffer", FAID_OT_INT64, "bytes", 65536, 68719476736.0, "67108864", 0,
           NULL, lossless_buffer, 0,
           "Memory for messages the lossless consumer has not acknowledged yet (allocated at "
           "start); while it has room, a missing or slow consumer never slows the pipeline."),
    SIMPLE("output.lossless_overflow", FAID_OT_ENUM, "", 0, 0, "block", 0, faid_ll_overflow_names,
           lossless_overflow, 0,
           "When the lossless buffer is full: block the pipeline until the consumer acknowledges "
           "(backpressure reaches the input and the PUB stream), or drop_oldest (the oldest "
           "unacknowledged message is given up and counted in lossless.given_up)."),
    SIMPLE("output.lossless_consumer_timeout", FAID_OT_DOUBLE, "s", 0.1, 86400, "10.0", 0, NULL,
           lossless_consumer_timeout, 0,
           "A lossless consumer silent this long (no ack, no heartbeat) counts as gone: another "
           "consumer's hello is then accepted instead of refused."),
    SIMPLE("output.sndhwm", FAID_OT_INT, "messages", 0, 1048576, "0", 0, NULL, sndhwm, 0,
           "Messages the PUB socket queues for a subscriber that is behind; beyond it that "
           "subscriber alone loses messages. 0 = max(2 x queue.depth, 16)."),
    SIMPLE("output.cake", FAID_OT_ENUM, "", 0, 0, "lean", 0, cake_names, output_cake, 0,
           "What a result of a 2D cake (integration.npt_azim > 0) carries: lean = I_2d only "
           "(the device reads back only the cake's intensities: 1.44 MB instead of 5.76 MB "
           "per frame at 360 x 1000), full = I_2d, sigma_2d and count_2d. With writer.cake on "
           "results carry the full set, which the series file's NXazint2d entry needs."),
    /* Optional outputs are off by default: sum_normalization alone is 4 x npt + 49 bytes a
     * result (4049 of the 12 KB of a 1000-bin result, a third more per message). */
    SIMPLE("output.extra", FAID_OT_KEYS, "", 0, 0, "[]", R | H | FAID_OPT_QUIET, NULL, output_extra,
           256,
           "Optional outputs the results carry besides the always-published ones: a list of "
           "result keys that a stage declares optional (sum_normalization: per bin, the sum of "
           "its pixels' normalization, to merge frames as pyFAI does). A key that is no optional "
           "output is a configuration error naming it. The series files of record write them "
           "too (/entry/outputs). [] = none; left out of the effective configuration's dump "
           "(start `config`, --dump-config) and of config_hash while []."),
    SIMPLE("output.lossless_shutdown_timeout", FAID_OT_DOUBLE, "s", 0, 86400, "5.0", 0, NULL,
           lossless_shutdown_timeout, 0,
           "Longest total wait for the lossless consumer's acknowledgements during shutdown; "
           "messages still unacknowledged then are given up and counted in lossless.given_up."),
    SIMPLE("hits.endpoint", FAID_OT_STRING, "", 0, 0, "null", N, NULL, hits_endpoint, 256,
           "Optional ZeroMQ PUB endpoint receiving the hit frames (peaks.algorithm not none) "
           "for indexing or a hits-only file writer (proto/PROTOCOL.md, hits). null = off."),
    SIMPLE("hits.request_endpoint", FAID_OT_STRING, "", 0, 0, "null", N, NULL,
           hits_request_endpoint, 256,
           "Optional ZeroMQ ROUTER endpoint answering `next` with the next hit (OM's request "
           "socket: CrystFEL --zmq-request=next), `resetplots` with Ok (clears the aggregates). "
           "null = off."),
    SIMPLE("hits.mode", FAID_OT_ENUM, "", 0, 0, "frame", 0, hits_mode_names, hits_mode, 0,
           "What a hit message carries: frame (the whole decoded frame) or patches (the "
           "peaks' patches and the background profile)."),
    SIMPLE("hits.patch_radius", FAID_OT_INT, "pixels", 1, 64, "4", 0, NULL, hits_patch_radius, 0,
           "hits.mode patches: half-width of each peak's square patch."),
    SIMPLE("writer.directory", FAID_OT_PATH, "", 0, 0, "null", R | N, NULL, writer_directory,
           FAID_PATH_MAX,
           "Folder of the files of record: one NeXus/HDF5 file per series, named after the "
           "series (docs/output-files.md), never overwriting a file. It must exist. Relative to "
           "the configuration file's folder. null = no files."),
    SIMPLE("writer.root", FAID_OT_PATH, "", 0, 0, "null", N, NULL, writer_root, FAID_PATH_MAX,
           "When set, a directory chosen over control (`writer`, PUT /api/v1/writer) must lie "
           "inside this folder (compared after resolving links and `..`). null = any existing "
           "directory."),
    SIMPLE("writer.profiles", FAID_OT_BOOL, "", 0, 0, "true", R, NULL, writer_profiles, 0,
           "Write the profiles (I, I_errors, std, count per frame) as an NXazint1d entry."),
    SIMPLE("writer.peaks", FAID_OT_BOOL, "", 0, 0, "true", R, NULL, writer_peaks, 0,
           "With peak finding on: write is_hit, num_peaks, the background and the peaks in the "
           "CXI layout (nPeaks, peakXPosRaw, ...)."),
    SIMPLE("writer.cake", FAID_OT_BOOL, "", 0, 0, "false", R, NULL, writer_cake, 0,
           "With integration.npt_azim > 0: write the cake as an NXazint2d entry."),
    SIMPLE("writer.hits", FAID_OT_BOOL, "", 0, 0, "false", R, NULL, writer_hits, 0,
           "With peak finding on: write the hit frames as they arrived into an NXmx file "
           "<series>_hits.h5 beside the series file."),
    SIMPLE("writer.flush_interval", FAID_OT_DOUBLE, "s", 0.05, 3600, "1.0", R, NULL,
           writer_flush_interval, 0,
           "How often the frames written so far reach the disk (H5Fflush): a reader following "
           "the file (SWMR) sees them, and a killed daemon leaves the file readable up to the "
           "last flush. Files are also flushed at the series end."),
    SIMPLE("writer.series_timeout", FAID_OT_DOUBLE, "s", 0.1, 86400, "60.0", R, NULL,
           writer_series_timeout, 0,
           "A file that got no message of its series for this long is closed (end_reason "
           "timeout)."),
    SIMPLE("writer.queue_bytes", FAID_OT_INT64, "bytes", 1048576, 68719476736.0, "268435456", 0,
           NULL, writer_queue_bytes, 0,
           "Messages waiting for the writer thread, at most (fixed at start). What does not "
           "fit is never waited for: it is counted (status: writer, dropped) and the file says "
           "how many frames it misses."),
    SIMPLE("writer.block_frames", FAID_OT_INT, "frames", 1, 4096, "64", R, NULL,
           writer_block_frames, 0,
           "Frames buffered per dataset write (and per chunk of a profile dataset)."),
    SIMPLE("control.endpoint", FAID_OT_STRING, "", 0, 0, "tcp://127.0.0.1:5557", 0, NULL,
           control_endpoint, 256,
           "ZeroMQ REP endpoint of the control socket (status, config get, reload, stop)."),
    SIMPLE("instance.name", FAID_OT_STRING, "", 0, 0, "null", N, NULL, instance_name, 128,
           "This instance's name, stamped as `instance` into every start, result and end, so "
           "that a consumer of several instances tells their parts of a series apart "
           "(proto/PROTOCOL.md, Several instances). null = <host name>:<port of "
           "control.endpoint>, unique among the instances of one host."),
    SIMPLE("instance.shard", FAID_OT_INT, "", 0, 65535, "0", 0, NULL, instance_shard, 0,
           "This instance's index among instance.shards (0-based), stamped as `shard`; a "
           "fan-out that names the shard for a series overrides it for that series."),
    SIMPLE("instance.shards", FAID_OT_INT, "", 1, 65536, "1", 0, NULL, instance_shards, 0,
           "How many instances share each series, stamped as `shards`; more than instance.shard."),
    SIMPLE("devices", FAID_OT_DEVICES, "", 0, 0, "auto", 0, NULL, devices, 128,
           "Compute devices: auto (every GPU, else the CPU OpenCL device), gpu, cpu, ref (plain "
           "C reference), an index or a list of indices from `faidctl devices`."),
    SIMPLE("queue.depth", FAID_OT_INT, "frames", 1, 65536, "64", 0, NULL, queue_depth, 0,
           "Frames waiting between ingest and the devices."),
    SIMPLE("queue.policy", FAID_OT_ENUM, "", 0, 0, "block", 0, faid_queue_policy_names,
           queue_policy, 0,
           "When the queue is full: block the input, drop_oldest or drop_newest (every drop is "
           "counted)."),
    SIMPLE("pipeline.inflight", FAID_OT_INT, "frames", 1, 64, "4", 0, NULL, inflight, 0,
           "Frames in flight per device (overlap of transfers and compute), in inflight / "
           "batch slots (at least 1, at most 32) of pipeline.batch frames."),
    SIMPLE("pipeline.batch", FAID_OT_INT, "frames", 1, 8, "1", 0, NULL, batch, 0,
           "Frames integrated in one pass over the CSR matrix (shares the matrix traffic on a "
           "GPU; a partial batch is integrated as soon as no further frame waits to join it)."),
    SIMPLE("pipeline.collect_poll_us", FAID_OT_INT, "us", 0, 10000, "0", 0, NULL, collect_poll_us,
           0,
           "While frames are in flight and none waits in the frame queue: 0 = the worker waits "
           "for the oldest frame's result (a frame that arrives meanwhile waits for it too); "
           "N = it checks the oldest frame and the queue every N us, so a frame that arrives "
           "is submitted at once and its transfer and decode overlap the device work of the "
           "frames before it (lower latency at a fixed rate, a worker thread that wakes every "
           "N us while the device works)."),
    SIMPLE("pipeline.copy_threads", FAID_OT_INT, "threads", 1, 16, "1", 0, NULL, copy_threads, 0,
           "Threads per device that copy a frame into pinned staging when it is not in the "
           "pinned input arena (input.pinned_bytes 0, the arena full, or input.pinned_copy "
           "leaving the copy to the worker): 1 = the worker alone; N = the worker and N - 1 "
           "threads, a share of the frame each (the one worker per device copying every such "
           "frame limits several input connections)."),
    SIMPLE("pipeline.collect_thread", FAID_OT_BOOL, "", 0, 0, "false", 0, NULL, collect_thread, 0,
           "A collect thread per device beside its worker: the worker copies and submits "
           "frames and waits only when pipeline.inflight frames are in flight; the collect "
           "thread waits for the oldest frame, encodes its result and hands it on, in order. "
           "false = the worker does both, one after the other (pipeline.collect_poll_us applies "
           "then only)."),
    SIMPLE("pipeline.collect_launch", FAID_OT_ENUM, "", 0, 0, "eager", 0, faid_collect_launch_names,
           collect_launch, 0,
           "With pipeline.collect_thread and pipeline.batch > 1, when a partly filled batch "
           "starts: eager = as soon as the worker has no further frame at hand (the serial "
           "worker's rule: its frames start at once, a batch rarely fills when frames arrive "
           "one at a time); fill = when the collect thread reaches it, every older frame "
           "collected (frames arriving meanwhile join it, so batches fill while the device is "
           "busy; the device waits for the launch after the older frames)."),
    SIMPLE("stats.interval", FAID_OT_DOUBLE, "s", 0, 86400, "1.0", R, NULL, stats_interval, 0,
           "Period of the published stats message; 0 = off."),
    SIMPLE("log.level", FAID_OT_STRING, "", 0, 0, "info", R, faid_log_level_names, log_level, 16,
           "Least severe log level written to stderr."),
    SIMPLE("http.endpoint", FAID_OT_STRING, "", 0, 0, "null", N, NULL, http_endpoint, 256,
           "host:port of faid's HTTP server (`127.0.0.1:8080`, `[::1]:8080`): the live "
           "dashboard at /, Prometheus metrics at /metrics, the health check at /healthz "
           "(docs/operations.md) and the REST control API under /api/v1 (docs/control.md). An "
           "address beyond localhost needs http.token_file. null = off."),
    SIMPLE("http.token_file", FAID_OT_PATH, "", 0, 0, "null", N, NULL, http_token_file,
           FAID_PATH_MAX,
           "Bearer tokens of the REST routes that change state (PUT, POST under /api/v1): one "
           "token per line, or `name:token` (the name is logged), `#` comments; at least 16 "
           "characters each. Mode 0600 or stricter (like the CURVE key files). null = those "
           "routes are refused (403), and http.endpoint must be a loopback address."),
    SIMPLE("http.tls_cert", FAID_OT_PATH, "", 0, 0, "null", N, NULL, http_tls_cert, FAID_PATH_MAX,
           "PEM certificate (with its chain) of the HTTP server: with http.tls_key it serves "
           "HTTPS only (GnuTLS). null = plain HTTP."),
    SIMPLE("http.tls_key", FAID_OT_PATH, "", 0, 0, "null", N, NULL, http_tls_key, FAID_PATH_MAX,
           "PEM private key of http.tls_cert (mode 0600 or stricter)."),
    SIMPLE("http.average", FAID_OT_INT, "profiles", 1, 1000, "10", R, NULL, http_average, 0,
           "The dashboard's average profile: the mean of the last this many profiles it took "
           "(it takes at most 10 per second)."),
    SIMPLE("fan.instances_endpoint", FAID_OT_STRING, "", 0, 0, "tcp://*:5570", 0, NULL,
           fan_instances_endpoint, 256,
           "faid-fan only: ROUTER endpoint (bound) the instances connect to (faid with "
           "input.protocol fan and this as input.endpoint)."),
    SIMPLE("fan.output_endpoint", FAID_OT_STRING, "", 0, 0, "tcp://*:5571", 0, NULL,
           fan_output_endpoint, 256,
           "faid-fan only: PUB endpoint of the fan-out's own messages: lost (frames handed to "
           "an instance that died, by series and frame id) and instances (who joined, left, "
           "was refused)."),
    SIMPLE("fan.control_endpoint", FAID_OT_STRING, "", 0, 0, "tcp://127.0.0.1:5572", 0, NULL,
           fan_control_endpoint, 256,
           "faid-fan only: REP endpoint of its control socket (`faidctl status --control`)."),
    SIMPLE("fan.http_endpoint", FAID_OT_STRING, "", 0, 0, "null", N, NULL, fan_http_endpoint, 256,
           "faid-fan only: host:port of its HTTP server (the dashboard of the whole run at /, "
           "/api/v1/fan, /metrics, /healthz). null = off."),
    SIMPLE("fan.aggregates_from", FAID_OT_ENDPOINTS, "", 0, 0, "null", N, NULL, fan_aggregates_from,
           1040,
           "faid-fan only: the instances' output endpoints (their output.endpoint as reached "
           "from the fan-out host, a list); the fan-out subscribes to their aggregates messages "
           "and its HTTP server's dashboard and /api/v1/fan show them summed. null = "
           "off."),
    SIMPLE("fan.tee_endpoint", FAID_OT_STRING, "", 0, 0, "null", N, NULL, fan_tee_endpoint, 256,
           "faid-fan only: endpoint (bound) that receives a copy of every detector message, "
           "for the facility's own file writer. Never blocks: what its consumer cannot take is "
           "dropped and counted (tee_dropped). null = off."),
    SIMPLE("fan.tee_socket", FAID_OT_ENUM, "", 0, 0, "push", 0, fan_tee_names, fan_tee_pub, 0,
           "faid-fan only: socket type of fan.tee_endpoint: push (one consumer takes "
           "everything) or pub."),
    SIMPLE("fan.policy", FAID_OT_ENUM, "", 0, 0, "blocks", 0, fan_policy_names, fan_policy, 0,
           "faid-fan only: how images are shared: blocks (fan.block consecutive frame ids to one "
           "instance, the next block to the next instance in turn) or credit (each image to "
           "the instance with the most free credit)."),
    SIMPLE("fan.block", FAID_OT_INT, "frames", 1, 1000000, "16", 0, NULL, fan_block, 0,
           "faid-fan only: frames per block with fan.policy blocks."),
    SIMPLE("fan.buffer_bytes", FAID_OT_INT64, "bytes", 1048576, 68719476736.0, "268435456", 0, NULL,
           fan_buffer_bytes, 0,
           "faid-fan only: detector messages held while no instance can take them, at most. "
           "Beyond it images are dropped and counted (dropped, and a lost message with "
           "instance \"\"): the detector is never blocked."),
    SIMPLE("fan.io_threads", FAID_OT_INT, "threads", 1, 64, "4", 0, NULL, fan_io_threads, 0,
           "faid-fan only: ZeroMQ I/O threads of the context of the instances' ROUTER (and its "
           "PUB, control and tee sockets). Every byte of every image is written to an instance "
           "by one of them; each connection is served by one thread, so more threads spread "
           "the instances' connections (one thread wrote everything before: a single core "
           "at the one-connection rate). Idle threads cost nothing. The inputs have a context "
           "and thread each, whatever this says."),
    SIMPLE("fan.instance_timeout", FAID_OT_DOUBLE, "s", 0.2, 3600, "3.0", 0, NULL,
           fan_instance_timeout, 0,
           "faid-fan: an instance silent this long (no credit, which it sends every "
           "0.1 s) counts as dead: it gets nothing more and the frames it had not accounted for "
           "are reported lost. An instance (input.protocol fan): the fan-out silent this long "
           "(no beat, which it sends every 0.1 s) counts as gone: the open series ends (reason "
           "timeout) and status fan_link (in input) says silent."),
    SIMPLE("fan.end_timeout", FAID_OT_DOUBLE, "s", 0.1, 86400, "30.0", 0, NULL, fan_end_timeout, 0,
           "faid-fan only: several senders feeding one series (several input endpoints, or "
           "several senders on one bound endpoint) each send its start and end; the series' "
           "end goes to the instances once every input has sent as many ends as starts, or "
           "this long after the first end, naming the input whose end is missing."),
    SIMPLE("fan.config_mismatch", FAID_OT_ENUM, "", 0, 0, "refuse", 0, fan_mismatch_names,
           fan_config_flag, 0,
           "faid-fan only: an instance whose config_hash differs from the instances' already "
           "there: refuse it, or flag it (status) and use it."),
    SIMPLE("security.curve", FAID_OT_BOOL, "", 0, 0, "false", 0, NULL, security_curve, 0,
           "true: every socket faid serves (input when bound, output, lossless output, input "
           "forward, hits, hits request, control) is a ZeroMQ CURVE server: traffic is "
           "encrypted and only clients whose public key is in security.authorized_keys get in "
           "(docs/security.md). An input that connects to a detector stays plain. Needs "
           "security.secret_key_file and security.authorized_keys."),
    SIMPLE("security.secret_key_file", FAID_OT_PATH, "", 0, 0, "null", N, NULL, secret_key_file,
           FAID_PATH_MAX,
           "faid's key pair, NAME.key as written by `faidctl keygen NAME` (mode 0600; faid "
           "derives its public key from the secret one; clients pass NAME.pub as "
           "--server-key). Relative to the configuration file's folder."),
    SIMPLE("security.authorized_keys", FAID_OT_PATH, "", 0, 0, "null", R | N, NULL, authorized_keys,
           FAID_PATH_MAX,
           "Folder of the clients' public keys (*.pub of `faidctl keygen`): a CURVE client "
           "whose key is not there is refused. Re-read on reload (SIGHUP or `faidctl reload`). "
           "Relative to the configuration file's folder."),
};

#undef R
#undef N
#undef H
#undef X
#undef D

#define NOPT (sizeof options / sizeof options[0])
_Static_assert(sizeof options / sizeof options[0] <= FAID_CONFIG_MAX_OPTIONS,
               "raise FAID_CONFIG_MAX_OPTIONS");

const faid_option *faid_config_options(size_t *n)
{
    if (n)
        *n = NOPT;
    return options;
}

const faid_option *faid_config_find(const char *key)
{
    for (size_t i = 0; i < NOPT; i++)
        if (strcmp(options[i].name, key) == 0)
            return &options[i];
    return NULL;
}

int faid_config_value(const faid_config *cfg, const faid_option *o, int *is_num, double *num,
                      const char **str)
{
    const char *base = (const char *)cfg;
    *is_num = 0;
    *num = 0;
    *str = NULL;
    if ((o->flags & FAID_OPT_NULLABLE) && o->has_off >= 0 && !*(const int *)(base + o->has_off))
        return 1;
    switch (o->type) {
    case FAID_OT_INT:
    case FAID_OT_BOOL:
        *is_num = 1;
        *num = *(const int *)(base + o->eff);
        return 0;
    case FAID_OT_INT64:
        *is_num = 1;
        *num = (double)*(const int64_t *)(base + o->eff);
        return 0;
    case FAID_OT_DOUBLE:
        *is_num = 1;
        *num = *(const double *)(base + o->eff);
        return 0;
    case FAID_OT_ENUM:
        *str = o->choices[*(const int *)(base + o->eff)];
        return 0;
    case FAID_OT_STRING:
        *str = base + o->eff;
        return (o->flags & FAID_OPT_NULLABLE) && !**str ? 1 : 0;
    default:
        return -1;
    }
}

int faid_peak_param_echoed(const char *name)
{
    return strncmp(name, "peaks.", 6) == 0 && strcmp(name, "peaks.algorithm") != 0 &&
           strcmp(name, "peaks.aggregates_interval") != 0;
}

static int opt_index(const char *key)
{
    const faid_option *o = faid_config_find(key);
    return o ? (int)(o - options) : -1;
}

int faid_config_endpoint_count(const char *list)
{
    if (!list || !*list)
        return 0;
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    return n;
}

const char *faid_config_endpoint_at(const char *list, int i, char *out, size_t cap)
{
    if (!list || i < 0 || i >= faid_config_endpoint_count(list) || cap == 0)
        return NULL;
    const char *p = list;
    for (int k = 0; k < i; k++)
        p = strchr(p, ',') + 1;
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l >= cap)
        return NULL;
    memcpy(out, p, l);
    out[l] = '\0';
    return out;
}

int faid_config_split_hostport(const char *ep, char *host, size_t host_cap, int *port, faid_diag *d)
{
    const char *colon;
    const char *h = ep;
    size_t hn;
    if (ep[0] == '[') {
        const char *close = strchr(ep, ']');
        if (!close || close[1] != ':')
            return faid_fail(d, FAID_ECONFIG, "'%s' is not host:port ([v6addr]:port for IPv6)", ep);
        h = ep + 1;
        hn = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(ep, ':');
        if (!colon || strchr(ep, ':') != colon)
            return faid_fail(d, FAID_ECONFIG,
                             "'%s' is not host:port (e.g. 127.0.0.1:8080, [::1]:8080)", ep);
        hn = (size_t)(colon - ep);
    }
    if (hn == 0 || hn >= host_cap)
        return faid_fail(d, FAID_ECONFIG, "'%s': missing or too long host", ep);
    char *end = NULL;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || !colon[1] || *end || p < 1 || p > 65535)
        return faid_fail(d, FAID_ECONFIG, "'%s': port must be 1..65535", ep);
    memcpy(host, h, hn);
    host[hn] = '\0';
    *port = (int)p;
    return 0;
}

/* ---- growable text buffer ------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_vprintf(sbuf *b, const char *fmt, va_list ap)
{
    if (b->oom)
        return;
    for (;;) {
        size_t room = b->cap - b->n;
        va_list aq;
        va_copy(aq, ap);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? room : 0, fmt, aq);
        va_end(aq);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)k + 1;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = ncap;
        b->p[b->n] = '\0';
    }
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

/* ---- value formatting ----------------------------------------------------------------------- */

/* Shortest decimal text that reads back to exactly v. */
static void fmt_double(char *out, size_t cap, double v)
{
    if (isnan(v)) {
        snprintf(out, cap, ".nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v > 0 ? ".inf" : "-.inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    /* YAML 1.1 readers (PyYAML) take "1" for an integer and "1e-10" for a string: keep floats
     * visibly floats with a '.' in the mantissa. */
    if (!strchr(out, '.') && strlen(out) + 3 < cap) {
        char *e = strpbrk(out, "eE");
        size_t at = e ? (size_t)(e - out) : strlen(out);
        memmove(out + at + 2, out + at, strlen(out + at) + 1);
        memcpy(out + at, ".0", 2);
    }
}

/* True when s reads back as the same string without quotes (no YAML indicator, not a word or
 * number that YAML would type). */
static int plain_safe(const char *s)
{
    static const char *const words[] = {"null", "Null",  "NULL",  "~",     "true", "True",
                                        "TRUE", "false", "False", "FALSE", "yes",  "Yes",
                                        "YES",  "no",    "No",    "NO",    "on",   "On",
                                        "ON",   "off",   "Off",   "OFF",   NULL};
    if (!*s || !(isalpha((unsigned char)*s) || *s == '/' || *s == '_'))
        return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-/^+", *p))
            return 0;
    for (int i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0)
            return 0;
    return 1;
}

static void sb_quoted(sbuf *b, const char *s)
{
    if (plain_safe(s)) {
        sb_printf(b, "%s", s);
        return;
    }
    sb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            sb_printf(b, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            sb_printf(b, "\\x%02x", *p);
        else
            sb_printf(b, "%c", *p);
    }
    sb_printf(b, "\"");
}

#define AT(cfg, off, T)  ((T *)((char *)(cfg) + (off)))
#define CAT(cfg, off, T) ((const T *)((const char *)(cfg) + (off)))

static int has_value(const faid_option *o, const faid_config *cfg)
{
    if (o->has_off >= 0)
        return *CAT(cfg, (size_t)o->has_off, int) != 0;
    if (o->type == FAID_OT_STRING || o->type == FAID_OT_PATH || o->type == FAID_OT_ENDPOINTS)
        return CAT(cfg, o->eff, char)[0] != '\0';
    return 1;
}

/* The effective value as YAML flow text. */
static void fmt_value(const faid_option *o, const faid_config *cfg, sbuf *b)
{
    char t1[64], t2[64];
    if ((o->flags & FAID_OPT_NULLABLE) && !has_value(o, cfg)) {
        sb_printf(b, "null");
        return;
    }
    switch (o->type) {
    case FAID_OT_INT:
        sb_printf(b, "%d", *CAT(cfg, o->eff, int));
        break;
    case FAID_OT_INT64:
        sb_printf(b, "%lld", (long long)*CAT(cfg, o->eff, int64_t));
        break;
    case FAID_OT_DOUBLE:
        fmt_double(t1, sizeof t1, *CAT(cfg, o->eff, double));
        sb_printf(b, "%s", t1);
        break;
    case FAID_OT_BOOL:
        sb_printf(b, "%s", *CAT(cfg, o->eff, int) ? "true" : "false");
        break;
    case FAID_OT_ENUM: {
        int v = *CAT(cfg, o->eff, int);
        int n = 0;
        while (o->choices[n])
            n++;
        sb_printf(b, "%s", v >= 0 && v < n ? o->choices[v] : "?");
        break;
    }
    case FAID_OT_STRING:
        if (o->choices)
            sb_printf(b, "%s", CAT(cfg, o->eff, char));
        else
            sb_quoted(b, CAT(cfg, o->eff, char));
        break;
    case FAID_OT_PATH:
        sb_quoted(b, CAT(cfg, o->eff, char));
        break;
    case FAID_OT_PAIR:
        fmt_double(t1, sizeof t1, *CAT(cfg, o->eff, double));
        fmt_double(t2, sizeof t2, *CAT(cfg, o->eff2, double));
        sb_printf(b, "[%s, %s]", t1, t2);
        break;
    case FAID_OT_SHAPE:
        sb_printf(b, "[%d, %d]", *CAT(cfg, o->eff, int), *CAT(cfg, o->eff2, int));
        break;
    case FAID_OT_DEVICES: {
        const char *v = CAT(cfg, o->eff, char);
        if (strchr(v, ','))
            sb_printf(b, "[%s]", v);
        else
            sb_printf(b, "%s", v);
        break;
    }
    case FAID_OT_ENDPOINTS: {
        const char *v = CAT(cfg, o->eff, char);
        int n = faid_config_endpoint_count(v);
        char ep[1040];
        if (n > 1)
            sb_printf(b, "[");
        for (int i = 0; i < n; i++) {
            if (i)
                sb_printf(b, ", ");
            sb_quoted(b, faid_config_endpoint_at(v, i, ep, sizeof ep) ? ep : "");
        }
        if (n > 1)
            sb_printf(b, "]");
        break;
    }
    case FAID_OT_KEYS: {
        const char *v = CAT(cfg, o->eff, char);
        int n = faid_config_endpoint_count(v);
        char k[256];
        sb_printf(b, "[");
        for (int i = 0; i < n; i++)
            sb_printf(b, "%s%s", i ? ", " : "",
                      faid_config_endpoint_at(v, i, k, sizeof k) ? k : "");
        sb_printf(b, "]");
        break;
    }
    }
}

/* Whether o is at its default: its value formats as its default's text (QUIET options). */
static int at_default(const faid_option *o, const faid_config *cfg)
{
    sbuf b = {0};
    fmt_value(o, cfg, &b);
    int same = !b.oom && b.p && o->def && strcmp(b.p, o->def) == 0;
    free(b.p);
    return same;
}

/* ---- applying YAML nodes -------------------------------------------------------------------- */

/* Whether name is a key with an array row in the result message (output.extra's check here; the
 * engine checks that a stage declares it optional). */
static int result_array_key(const char *name)
{
    faid_key k = faid_key_lookup(name, strlen(name));
    size_t n;
    const faid_proto_row *rows = faid_proto_rows(&n);
    for (size_t i = 0; k != FAID_KEY_UNKNOWN && i < n; i++)
        if (rows[i].msg == FAID_PMSG_RESULT && rows[i].key == k)
            return strncmp(rows[i].type, "array", 5) == 0;
    return 0;
}

typedef struct ctx {
    const char *what; /* file name for messages */
    const char *base; /* folder relative paths are resolved against, NULL = leave them */
    yaml_document_t *doc;
    int is_file; /* a configuration file: an empty document is an error */
} ctx;

static int node_line(const yaml_node_t *n)
{
    return (int)n->start_mark.line + 1;
}

static const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static int is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *v = scalar(n);
    return !*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
           strcmp(v, "NULL") == 0;
}

/* Message helper that always records: "<file>:<line>: <key>: <msg>". */
static int failk(faid_diag *d, const ctx *c, const yaml_node_t *n, const char *key, int code,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int failk(faid_diag *d, const ctx *c, const yaml_node_t *n, const char *key, int code,
                 const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        return faid_fail(d, code, "%s:%d: %s: %s", c->what, node_line(n), key, msg);
    return faid_fail(d, code, "%s: %s: %s", c->what, key, msg);
}

static int parse_double(const ctx *c, const yaml_node_t *n, const faid_option *o, double *out,
                        faid_diag *d)
{
    if (n->type != YAML_SCALAR_NODE)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected a number");
    const char *v = scalar(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected a number, got the string \"%s\"", v);
    double x;
    if (strcmp(v, ".nan") == 0 || strcmp(v, ".NaN") == 0 || strcmp(v, ".NAN") == 0) {
        x = NAN;
    } else if (strcmp(v, ".inf") == 0 || strcmp(v, "+.inf") == 0 || strcmp(v, ".Inf") == 0) {
        x = INFINITY;
    } else if (strcmp(v, "-.inf") == 0 || strcmp(v, "-.Inf") == 0) {
        x = -INFINITY;
    } else {
        char *end;
        errno = 0;
        x = strtod(v, &end);
        /* strtod also reads hex floats, "inf" and "nan": YAML's spellings are the ones above. */
        if (end == v || *end || strpbrk(v, "xXiInN"))
            return failk(d, c, n, o->name, FAID_ECONFIG, "expected a number, got '%s'", v);
        if (errno == ERANGE && isinf(x))
            return failk(d, c, n, o->name, FAID_ERANGE, "%s is out of range", v);
    }
    if (!isfinite(x) && !(o->flags & FAID_OPT_NONFINITE))
        return failk(d, c, n, o->name, FAID_ERANGE, "must be a finite number, got '%s'", v);
    if (isfinite(x)) {
        int low = (o->flags & FAID_OPT_MIN_EXCL) ? x <= o->min : x < o->min;
        if (low || x > o->max) {
            char lo[64], hi[64];
            fmt_double(lo, sizeof lo, o->min);
            fmt_double(hi, sizeof hi, o->max);
            return failk(d, c, n, o->name, FAID_ERANGE, "%s is out of range %s%s, %s]%s%s", v,
                         (o->flags & FAID_OPT_MIN_EXCL) ? "(" : "[", lo, hi, *o->unit ? " " : "",
                         o->unit);
        }
    }
    *out = x;
    return 0;
}

static int parse_int(const ctx *c, const yaml_node_t *n, const faid_option *o, long long *out,
                     faid_diag *d)
{
    if (n->type != YAML_SCALAR_NODE)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected an integer");
    const char *v = scalar(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected an integer, got the string \"%s\"",
                     v);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected an integer, got '%s'", v);
    if (errno == ERANGE || (double)x < o->min || (double)x > o->max)
        return failk(d, c, n, o->name, FAID_ERANGE, "%s is out of range [%.0f, %.0f]%s%s", v,
                     o->min, o->max, *o->unit ? " " : "", o->unit);
    *out = x;
    return 0;
}

static int parse_bool(const ctx *c, const yaml_node_t *n, const faid_option *o, int *out,
                      faid_diag *d)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON",  NULL};
    static const char *const no[] = {"false", "False", "FALSE", "no",  "No",
                                     "NO",    "off",   "Off",   "OFF", NULL};
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        for (int i = 0; yes[i]; i++)
            if (strcmp(scalar(n), yes[i]) == 0) {
                *out = 1;
                return 0;
            }
        for (int i = 0; no[i]; i++)
            if (strcmp(scalar(n), no[i]) == 0) {
                *out = 0;
                return 0;
            }
    }
    return failk(d, c, n, o->name, FAID_ECONFIG, "expected true or false%s%s%s",
                 n->type == YAML_SCALAR_NODE ? ", got '" : "",
                 n->type == YAML_SCALAR_NODE ? scalar(n) : "",
                 n->type == YAML_SCALAR_NODE ? "'" : "");
}

static void choices_text(const char *const *ch, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; ch[i] && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? ", " : "", ch[i]);
}

static int plain_text(const ctx *c, const yaml_node_t *n, const faid_option *o, const char **out,
                      faid_diag *d)
{
    if (n->type != YAML_SCALAR_NODE)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected a single value, got a %s",
                     n->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
    *out = scalar(n);
    if (strlen(*out) != n->data.scalar.length)
        return failk(d, c, n, o->name, FAID_ECONFIG, "contains a NUL character");
    return 0;
}

static int parse_choice(const ctx *c, const yaml_node_t *n, const faid_option *o, int *out,
                        faid_diag *d)
{
    const char *v = NULL;
    int rc = plain_text(c, n, o, &v, d);
    if (rc)
        return rc;
    for (int i = 0; o->choices[i]; i++)
        if (strcmp(v, o->choices[i]) == 0) {
            *out = i;
            return 0;
        }
    char list[256];
    choices_text(o->choices, list, sizeof list);
    return failk(d, c, n, o->name, FAID_ECONFIG, "'%s' is not one of: %s", v, list);
}

static int seq_items(const ctx *c, const yaml_node_t *n, const faid_option *o, int want,
                     yaml_node_t **items, faid_diag *d)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected a list of %d values [a, b]", want);
    int k = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (k != want)
        return failk(d, c, n, o->name, FAID_ECONFIG, "expected %d values, got %d", want, k);
    for (int i = 0; i < k; i++) {
        items[i] = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        if (!items[i])
            return failk(d, c, n, o->name, FAID_ECONFIG, "malformed list");
    }
    return 0;
}

static int set_path(const ctx *c, const yaml_node_t *n, const faid_option *o, const char *v,
                    char *dst, size_t cap, faid_diag *d)
{
    size_t need;
    if (c->base && *c->base && v[0] != '/')
        need = (size_t)snprintf(dst, cap, "%s/%s", c->base, v);
    else
        need = (size_t)snprintf(dst, cap, "%s", v);
    if (need >= cap) {
        dst[0] = '\0';
        return failk(d, c, n, o->name, FAID_ECONFIG, "path too long (%zu bytes, at most %zu)", need,
                     cap - 1);
    }
    return 0;
}

static int valid_devices_word(const char *v)
{
    if (strcmp(v, "auto") == 0 || strcmp(v, "cpu") == 0 || strcmp(v, "gpu") == 0 ||
        strcmp(v, "ref") == 0)
        return 1;
    if (!*v || strlen(v) > 4)
        return 0;
    for (const char *p = v; *p; p++)
        if (!isdigit((unsigned char)*p))
            return 0;
    return 1;
}

/* An item of an endpoint list (input.endpoint, fan.aggregates_from, ...): a ZeroMQ endpoint,
 * without the comma that joins the list. */
static int endpoint_item(const ctx *c, const yaml_node_t *it, const faid_option *o, const char *v,
                         faid_diag *d)
{
    if (!strstr(v, "://"))
        return failk(d, c, it, o->name, FAID_ECONFIG,
                     "'%s' is not a ZeroMQ endpoint (e.g. tcp://*:5555)", v);
    if (strchr(v, ','))
        return failk(d, c, it, o->name, FAID_ECONFIG, "'%s': an endpoint must not contain a comma",
                     v);
    return 0;
}

/* An item of a result key list (output.keys, ...): an array key of the result message. */
static int result_key_item(const ctx *c, const yaml_node_t *it, const faid_option *o, const char *v,
                           faid_diag *d)
{
    if (!result_array_key(v))
        return failk(d, c, it, o->name, FAID_ECONFIG,
                     "'%s' is not an array key of the result message (PROTOCOL.md 3.2)", v);
    return 0;
}

/* The k items of the list n (or n itself, one scalar, where the option takes one for a list of
 * one) joined by commas into dst (o->cap bytes; what faid_config_endpoint_at() reads back): each
 * a plain scalar that item() accepts, none listed twice, the whole within o->cap. dst is written
 * only when every item is good. */
static int join_list(const ctx *c, const yaml_node_t *n, const faid_option *o, int k,
                     int (*item)(const ctx *, const yaml_node_t *, const faid_option *,
                                 const char *, faid_diag *),
                     char *dst, faid_diag *d)
{
    char buf[1040] = "";
    size_t len = 0;
    int rc;
    for (int i = 0; i < k; i++) {
        const yaml_node_t *it = n;
        if (n->type == YAML_SEQUENCE_NODE)
            it = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        const char *v = NULL;
        if (!it)
            return failk(d, c, n, o->name, FAID_ECONFIG, "malformed list");
        if ((rc = plain_text(c, it, o, &v, d)) || (rc = item(c, it, o, v, d)))
            return rc;
        for (int j = 0; j < i; j++) {
            char prev[1040];
            if (faid_config_endpoint_at(buf, j, prev, sizeof prev) && strcmp(prev, v) == 0)
                return failk(d, c, it, o->name, FAID_ECONFIG, "'%s' is listed twice", v);
        }
        size_t l = strlen(v);
        if (len + l + 1 >= sizeof buf || len + l + 1 >= o->cap)
            return failk(d, c, n, o->name, FAID_ECONFIG, "too long (at most %zu characters)",
                         o->cap - 1);
        if (i)
            buf[len++] = ',';
        memcpy(buf + len, v, l + 1);
        len += l;
    }
    memcpy(dst, buf, len + 1);
    return 0;
}

static int apply_node(const ctx *c, const faid_option *o, const yaml_node_t *n, faid_config *cfg,
                      faid_diag *d)
{
    int rc = 0;
    if (is_null(n)) {
        if (!(o->flags & FAID_OPT_NULLABLE))
            return failk(d, c, n, o->name, FAID_ECONFIG,
                         "a value is required (null is not "
                         "allowed here)");
        if (o->has_off >= 0)
            *AT(cfg, (size_t)o->has_off, int) = 0;
        else if (o->type == FAID_OT_STRING || o->type == FAID_OT_PATH ||
                 o->type == FAID_OT_ENDPOINTS)
            AT(cfg, o->off, char)[0] = '\0';
        else if (o->type == FAID_OT_INT)
            *AT(cfg, o->off, int) = 0;
        return 0;
    }
    switch (o->type) {
    case FAID_OT_INT:
    case FAID_OT_INT64: {
        long long x;
        if ((rc = parse_int(c, n, o, &x, d)))
            return rc;
        if (o->type == FAID_OT_INT)
            *AT(cfg, o->off, int) = (int)x;
        else
            *AT(cfg, o->off, int64_t) = x;
        break;
    }
    case FAID_OT_DOUBLE: {
        double x;
        if ((rc = parse_double(c, n, o, &x, d)))
            return rc;
        *AT(cfg, o->off, double) = x;
        break;
    }
    case FAID_OT_BOOL:
        return parse_bool(c, n, o, AT(cfg, o->off, int), d);
    case FAID_OT_ENUM: {
        int x;
        if ((rc = parse_choice(c, n, o, &x, d)))
            return rc;
        *AT(cfg, o->off, int) = x;
        break;
    }
    case FAID_OT_STRING: {
        const char *v = NULL;
        if ((rc = plain_text(c, n, o, &v, d)))
            return rc;
        if (o->choices) {
            int x;
            if ((rc = parse_choice(c, n, o, &x, d)))
                return rc;
        } else if (o->off == OFF(key_preset)) {
            if (!faid_detector_find(v)) {
                char list[600];
                size_t k = 0;
                list[0] = '\0';
                for (const faid_detector_preset *p = faid_detector_presets; p->name && k < 500; p++)
                    k += (size_t)snprintf(list + k, sizeof list - k, "%s%s",
                                          p == faid_detector_presets ? "" : ", ",
                                          p->alias ? p->alias : p->name);
                return failk(d, c, n, o->name, FAID_ECONFIG, "unknown detector '%s' (known: %s)", v,
                             list);
            }
        } else if (o->off == OFF(http_endpoint) || o->off == OFF(fan_http_endpoint)) {
            char host[256];
            int port;
            faid_diag hd;
            faid_diag_clear(&hd);
            if (faid_config_split_hostport(v, host, sizeof host, &port, &hd))
                return failk(d, c, n, o->name, FAID_ECONFIG, "%s", hd.msg);
        } else if (o->name[0] && strstr(o->name, "endpoint") && !strstr(v, "://")) {
            return failk(d, c, n, o->name, FAID_ECONFIG,
                         "'%s' is not a ZeroMQ endpoint (e.g. tcp://*:5555)", v);
        }
        if (!*v)
            return failk(d, c, n, o->name, FAID_ECONFIG, "must not be empty");
        if (strlen(v) >= o->cap)
            return failk(d, c, n, o->name, FAID_ECONFIG, "too long (at most %zu characters)",
                         o->cap - 1);
        memcpy(AT(cfg, o->off, char), v, strlen(v) + 1);
        break;
    }
    case FAID_OT_PATH: {
        const char *v = NULL;
        if ((rc = plain_text(c, n, o, &v, d)))
            return rc;
        if (!*v)
            return failk(d, c, n, o->name, FAID_ECONFIG, "empty path (use null for none)");
        return set_path(c, n, o, v, AT(cfg, o->off, char), o->cap, d);
    }
    case FAID_OT_PAIR: {
        yaml_node_t *it[2];
        double a, b;
        if ((rc = seq_items(c, n, o, 2, it, d)) || (rc = parse_double(c, it[0], o, &a, d)) ||
            (rc = parse_double(c, it[1], o, &b, d)))
            return rc;
        if ((o->flags & FAID_OPT_ORDERED) && !(a < b))
            return failk(d, c, n, o->name, FAID_ERANGE,
                         "the first value must be smaller than "
                         "the second");
        *AT(cfg, o->off, double) = a;
        *AT(cfg, o->off2, double) = b;
        break;
    }
    case FAID_OT_SHAPE: {
        yaml_node_t *it[2];
        long long a, b;
        if ((rc = seq_items(c, n, o, 2, it, d)) || (rc = parse_int(c, it[0], o, &a, d)) ||
            (rc = parse_int(c, it[1], o, &b, d)))
            return rc;
        if (a * b > (1ll << 30))
            return failk(d, c, n, o->name, FAID_ERANGE, "%lld x %lld pixels is too large", a, b);
        *AT(cfg, o->off, int) = (int)a;
        *AT(cfg, o->off2, int) = (int)b;
        break;
    }
    case FAID_OT_DEVICES: {
        char buf[128];
        char *dst = AT(cfg, o->off, char);
        if (n->type == YAML_SCALAR_NODE) {
            const char *v = scalar(n);
            if (!valid_devices_word(v))
                return failk(d, c, n, o->name, FAID_ECONFIG,
                             "'%s': expected auto, gpu, cpu, ref, a device index or a list of "
                             "indices",
                             v);
            snprintf(dst, o->cap, "%s", v);
            break;
        }
        if (n->type != YAML_SEQUENCE_NODE)
            return failk(d, c, n, o->name, FAID_ECONFIG, "expected a word or a list of indices");
        int k = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
        if (k < 1 || k > 16)
            return failk(d, c, n, o->name, FAID_ECONFIG, "expected 1 to 16 device indices");
        size_t len = 0;
        for (int i = 0; i < k; i++) {
            yaml_node_t *it = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
            const faid_option idx = {.name = o->name, .min = 0, .max = 255, .unit = ""};
            long long x;
            if (!it)
                return failk(d, c, n, o->name, FAID_ECONFIG, "malformed list");
            if ((rc = parse_int(c, it, &idx, &x, d)))
                return rc;
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", i ? "," : "", x);
        }
        snprintf(dst, o->cap, "%s", buf);
        break;
    }
    case FAID_OT_ENDPOINTS: {
        char *dst = AT(cfg, o->off, char);
        int k = 1;
        if (n->type == YAML_SEQUENCE_NODE) {
            k = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
            if (k < 1 || k > FAID_MAX_ENDPOINTS)
                return failk(d, c, n, o->name, FAID_ECONFIG, "expected 1 to %d endpoints",
                             FAID_MAX_ENDPOINTS);
        } else if (n->type != YAML_SCALAR_NODE) {
            return failk(d, c, n, o->name, FAID_ECONFIG, "expected an endpoint or a list of them");
        }
        if ((rc = join_list(c, n, o, k, endpoint_item, dst, d)))
            return rc;
        break;
    }
    case FAID_OT_KEYS: {
        if (n->type != YAML_SEQUENCE_NODE)
            return failk(d, c, n, o->name, FAID_ECONFIG,
                         "expected a list of result keys, e.g. [sum_normalization]");
        int k = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
        if (k > 16)
            return failk(d, c, n, o->name, FAID_ECONFIG, "expected at most 16 keys");
        if ((rc = join_list(c, n, o, k, result_key_item, AT(cfg, o->off, char), d)))
            return rc;
        break;
    }
    }
    if (o->has_off >= 0)
        *AT(cfg, (size_t)o->has_off, int) = 1;
    return 0;
}

/* Edit distance for "did you mean" hints (short strings only). */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40)
        return 99;
    int row[41];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int prev = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cur = row[j];
            int sub = prev + (a[i - 1] != b[j - 1]);
            int del = row[j] + 1, ins = row[j - 1] + 1;
            row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return row[lb];
}

/* The option name closest to NAME (fewer than 3 edits), for a "did you mean"; NULL when none. */
static const char *nearest_option(const char *name)
{
    const char *best = NULL;
    int bd = 3;
    for (size_t i = 0; i < NOPT; i++) {
        int e = edit_distance(name, options[i].name);
        if (e < bd) {
            bd = e;
            best = options[i].name;
        }
    }
    return best;
}

static int unknown_key(const ctx *c, const yaml_node_t *kn, const char *full, faid_diag *d)
{
    const char *best = nearest_option(full);
    if (best)
        return faid_fail(d, FAID_ECONFIG, "%s:%d: unknown key '%s' (did you mean '%s'?)", c->what,
                         node_line(kn), full, best);
    return faid_fail(d, FAID_ECONFIG, "%s:%d: unknown key '%s' (see docs/configuration.md)",
                     c->what, node_line(kn), full);
}

static int is_section(const char *name)
{
    size_t l = strlen(name);
    for (size_t i = 0; i < NOPT; i++)
        if (strncmp(options[i].name, name, l) == 0 && options[i].name[l] == '.')
            return 1;
    return 0;
}

static int apply_key(const ctx *c, const char *full, const yaml_node_t *kn, const yaml_node_t *vn,
                     faid_config *cfg, int *seen, faid_diag *d)
{
    int idx = opt_index(full);
    if (idx < 0)
        return unknown_key(c, kn, full, d);
    if (seen[idx])
        return faid_fail(d, FAID_ECONFIG, "%s:%d: duplicate key '%s' (first at line %d)", c->what,
                         node_line(kn), full, seen[idx]);
    seen[idx] = node_line(kn);
    int rc = apply_node(c, &options[idx], vn, cfg, d);
    if (rc)
        return rc;
    cfg->given_line[idx] = node_line(kn);
    return 0;
}

static int key_text(const ctx *c, const yaml_node_t *kn, const char **out, faid_diag *d)
{
    if (!kn || kn->type != YAML_SCALAR_NODE)
        return faid_fail(d, FAID_ECONFIG, "%s:%d: keys must be plain words", c->what,
                         kn ? node_line(kn) : 0);
    *out = scalar(kn);
    if (strlen(*out) != kn->data.scalar.length || strlen(*out) > 64)
        return faid_fail(d, FAID_ECONFIG, "%s:%d: malformed key", c->what, node_line(kn));
    return 0;
}

static int apply_document(const ctx *c, faid_config *cfg, faid_diag *d)
{
    yaml_node_t *root = yaml_document_get_root_node(c->doc);
    /* An empty or comment-only file is far more likely a truncated or wrong file than a wish
     * for the built-in EIGER 4M setup with its input on every interface: refuse it. Text given
     * as a string (faidctl --preset, tests) may be empty; `{}` is the explicit "defaults". */
    if ((!root || is_null(root)) && c->is_file)
        return faid_fail(d, FAID_ECONFIG,
                         "%s: empty configuration file (no keys, only comments or nothing); "
                         "write `{}` to mean the built-in defaults",
                         c->what);
    if (!root || is_null(root))
        return 0; /* empty text: the defaults */
    if (root->type != YAML_MAPPING_NODE)
        return faid_fail(d, FAID_ECONFIG,
                         "%s:%d: expected a mapping of sections (detector:, geometry:, ...)",
                         c->what, node_line(root));
    int seen[FAID_CONFIG_MAX_OPTIONS] = {0};
    int seen_section[FAID_CONFIG_MAX_OPTIONS] = {0};
    int nset = 0; /* options the document sets */
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *kn = yaml_document_get_node(c->doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(c->doc, pr->value);
        const char *k = NULL;
        int rc = key_text(c, kn, &k, d);
        if (rc)
            return rc;
        if (!vn)
            return faid_fail(d, FAID_ECONFIG, "%s:%d: %s: missing value", c->what, node_line(kn),
                             k);
        if (!is_section(k)) {
            if ((rc = apply_key(c, k, kn, vn, cfg, seen, d)))
                return rc;
            nset++;
            continue;
        }
        /* Sections are recorded by the index of their first option to catch duplicates. */
        size_t sl = strlen(k);
        int sidx = 0;
        while (!(strncmp(options[sidx].name, k, sl) == 0 && options[sidx].name[sl] == '.'))
            sidx++;
        if (seen_section[sidx])
            return faid_fail(d, FAID_ECONFIG, "%s:%d: duplicate section '%s' (first at line %d)",
                             c->what, node_line(kn), k, seen_section[sidx]);
        seen_section[sidx] = node_line(kn);
        if (is_null(vn))
            continue;
        if (vn->type != YAML_MAPPING_NODE)
            return faid_fail(d, FAID_ECONFIG, "%s:%d: %s: expected a mapping of keys", c->what,
                             node_line(vn), k);
        for (yaml_node_pair_t *q = vn->data.mapping.pairs.start; q < vn->data.mapping.pairs.top;
             q++) {
            yaml_node_t *kk = yaml_document_get_node(c->doc, q->key);
            yaml_node_t *vv = yaml_document_get_node(c->doc, q->value);
            const char *sub = NULL;
            if ((rc = key_text(c, kk, &sub, d)))
                return rc;
            if (!vv)
                return faid_fail(d, FAID_ECONFIG, "%s:%d: %s.%s: missing value", c->what,
                                 node_line(kk), k, sub);
            char full[160];
            snprintf(full, sizeof full, "%s.%s", k, sub);
            if ((rc = apply_key(c, full, kk, vv, cfg, seen, d)))
                return rc;
            nset++;
        }
    }
    /* Sections whose keys are all commented out set nothing either: the same built-in default
     * as an empty file, so the same error (only a bare `{}` asks for the defaults). */
    if (c->is_file && nset == 0 && root->data.mapping.pairs.top > root->data.mapping.pairs.start)
        return faid_fail(d, FAID_ECONFIG,
                         "%s: the configuration file sets no option (its sections are empty); "
                         "write `{}` to mean the built-in defaults",
                         c->what);
    return 0;
}

/* Parses one YAML document from memory; on success *doc must be deleted by the caller. */
static int load_doc(const char *yaml, size_t len, const char *what, yaml_document_t *doc,
                    faid_diag *d)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return faid_fail(d, FAID_ENOMEM, "%s: cannot initialise the YAML parser", what);
    yaml_parser_set_input_string(&p, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&p, doc)) {
        int rc = faid_fail(d, FAID_ECONFIG, "%s:%d:%d: YAML syntax error: %s%s%s", what,
                           (int)p.problem_mark.line + 1, (int)p.problem_mark.column + 1,
                           p.problem ? p.problem : "unknown problem", p.context ? " " : "",
                           p.context ? p.context : "");
        yaml_parser_delete(&p);
        return rc;
    }
    /* A second document would be silently ignored: refuse it. */
    yaml_document_t extra;
    int ok = yaml_parser_load(&p, &extra);
    int more = ok && yaml_document_get_root_node(&extra) != NULL;
    int line = more ? (int)yaml_document_get_root_node(&extra)->start_mark.line + 1
                    : (int)p.problem_mark.line + 1;
    if (ok)
        yaml_document_delete(&extra);
    yaml_parser_delete(&p);
    if (!ok || more) {
        yaml_document_delete(doc);
        return faid_fail(d, FAID_ECONFIG, "%s:%d: %s", what, line,
                         more ? "only one YAML document is allowed"
                              : "YAML syntax error after the document");
    }
    return 0;
}

static int apply_text(const char *yaml, size_t len, const char *what, const char *base, int is_file,
                      faid_config *cfg, faid_diag *d)
{
    yaml_document_t doc;
    int rc = load_doc(yaml, len, what, &doc, d);
    if (rc)
        return rc;
    ctx c = {what, base, &doc, is_file};
    rc = apply_document(&c, cfg, d);
    yaml_document_delete(&doc);
    return rc;
}

/* Applies one option from YAML text without marking it given (defaults). */
static int apply_value_text(const faid_option *o, const char *text, const char *what,
                            faid_config *cfg, faid_diag *d)
{
    yaml_document_t doc;
    int rc = load_doc(text, strlen(text), what, &doc, d);
    if (rc)
        return rc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    ctx c = {what, NULL, &doc, 0};
    if (!root)
        rc = faid_fail(d, FAID_ECONFIG, "%s: %s: empty value", what, o->name);
    else
        rc = apply_node(&c, o, root, cfg, d);
    yaml_document_delete(&doc);
    return rc;
}

/* ---- resolution of detector and geometry ---------------------------------------------------- */

static int given(const faid_config *cfg, const char *key)
{
    int i = opt_index(key);
    return i >= 0 && cfg->given_line[i] > 0;
}

static int fail_at(const faid_config *cfg, const char *what, faid_diag *d, const char *key,
                   int code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int fail_at(const faid_config *cfg, const char *what, faid_diag *d, const char *key,
                   int code, const char *fmt, ...)
{
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!what)
        what = cfg->source[0] ? cfg->source : "configuration";
    int i = key ? opt_index(key) : -1;
    if (i >= 0 && cfg->given_line[i] > 0)
        return faid_fail(d, code, "%s:%d: %s: %s", what, cfg->given_line[i], key, msg);
    if (key)
        return faid_fail(d, code, "%s: %s: %s", what, key, msg);
    return faid_fail(d, code, "%s: %s", what, msg);
}

/* key's table range against value v (resolved from a .poni file or a preset when the key was not
 * given); the message names key, or culprit, the key that brought the value, when given. */
static int geom_in_range(const faid_config *cfg, const char *what, faid_diag *d, const char *key,
                         double v, const char *culprit)
{
    const faid_option *o = faid_config_find(key);
    if (!o || faid_config_in_range(o, v))
        return 0;
    char range[64];
    faid_config_range_text(o, range, sizeof range);
    return fail_at(cfg, what, d, culprit ? culprit : key, FAID_ERANGE, "%s %g %s is outside %s",
                   key, v, o->unit, range);
}

static int resolve(faid_config *cfg, const char *what, faid_diag *d)
{
    faid_geometry pg;
    char pdet[64] = "";
    int have_poni = cfg->poni_file[0] != '\0';
    memset(&pg, 0, sizeof pg);
    if (have_poni) {
        faid_diag pd = {0};
        if (faid_poni_read(cfg->poni_file, &pg, pdet, sizeof pdet, &pd) != 0)
            return fail_at(cfg, what, d, "geometry.poni_file", pd.code ? pd.code : FAID_EIO, "%s",
                           pd.msg);
    }
    /* pyFAI writes "Detector" for a detector without a model name. */
    const faid_detector_preset *poni_preset =
        pdet[0] && strcmp(pdet, "Detector") != 0 ? faid_detector_find(pdet) : NULL;
    int poni_has_det = have_poni && (poni_preset || pg.rows > 0 || pg.pixel1 > 0);

    const faid_detector_preset *p = NULL;
    if (given(cfg, "detector.preset")) {
        if (cfg->key_preset[0] && !(p = faid_detector_find(cfg->key_preset)))
            return fail_at(cfg, what, d, "detector.preset", FAID_ECONFIG, "unknown detector '%s'",
                           cfg->key_preset);
    } else if (poni_has_det) {
        p = poni_preset;
    } else if (!given(cfg, "detector.shape") && cfg->key_preset[0]) {
        if (!(p = faid_detector_find(cfg->key_preset)))
            return fail_at(cfg, what, d, "detector.preset", FAID_ECONFIG, "unknown detector '%s'",
                           cfg->key_preset);
    }
    cfg->rows = cfg->cols = 0;
    cfg->pixel1 = cfg->pixel2 = 0;
    cfg->preset[0] = '\0';
    if (p) {
        snprintf(cfg->preset, sizeof cfg->preset, "%s", p->alias ? p->alias : p->name);
        cfg->rows = p->rows;
        cfg->cols = p->cols;
        cfg->pixel1 = p->pixel1;
        cfg->pixel2 = p->pixel2;
    }
    if (poni_has_det && !given(cfg, "detector.preset")) {
        if (pg.rows > 0 && pg.cols > 0) {
            cfg->rows = pg.rows;
            cfg->cols = pg.cols;
        }
        if (pg.pixel1 > 0 && pg.pixel2 > 0) {
            cfg->pixel1 = pg.pixel1;
            cfg->pixel2 = pg.pixel2;
        }
    }
    if (given(cfg, "detector.shape")) {
        cfg->rows = cfg->key_shape[0];
        cfg->cols = cfg->key_shape[1];
    }
    if (given(cfg, "detector.pixel_size")) {
        cfg->pixel1 = cfg->key_pixel[0];
        cfg->pixel2 = cfg->key_pixel[1];
    }
    const char *culprit = have_poni                           ? "geometry.poni_file"
                          : given(cfg, "detector.preset")     ? "detector.preset"
                          : given(cfg, "detector.shape")      ? "detector.shape"
                          : given(cfg, "detector.pixel_size") ? "detector.pixel_size"
                                                              : NULL;
    if (cfg->rows <= 0 || cfg->cols <= 0)
        return fail_at(cfg, what, d, culprit, FAID_ECONFIG,
                       "the detector shape is unknown: set detector.preset or detector.shape%s",
                       have_poni ? " (the .poni file gives none)" : "");
    if (!(cfg->pixel1 > 0) || !(cfg->pixel2 > 0))
        return fail_at(cfg, what, d, culprit, FAID_ECONFIG,
                       "the pixel size is unknown: set detector.preset or detector.pixel_size%s",
                       have_poni ? " (the .poni file gives none)" : "");

    /* Geometry: the explicit key wins, then the .poni file, then the key's default. */
    faid_geometry g = cfg->key_geom;
    const faid_geometry *k = &cfg->key_geom;
    if (!given(cfg, "geometry.poni1"))
        g.poni1 = have_poni ? pg.poni1 : 0.5 * cfg->rows * cfg->pixel1;
    if (!given(cfg, "geometry.poni2"))
        g.poni2 = have_poni ? pg.poni2 : 0.5 * cfg->cols * cfg->pixel2;
    if (have_poni) {
        if (!given(cfg, "geometry.dist"))
            g.dist = pg.dist;
        if (!given(cfg, "geometry.rot1"))
            g.rot1 = pg.rot1;
        if (!given(cfg, "geometry.rot2"))
            g.rot2 = pg.rot2;
        if (!given(cfg, "geometry.rot3"))
            g.rot3 = pg.rot3;
        if (!given(cfg, "geometry.wavelength") && pg.wavelength > 0)
            g.wavelength = pg.wavelength;
        if (!given(cfg, "detector.orientation") && pg.orientation >= 1 && pg.orientation <= 4)
            g.orientation = pg.orientation;
    }
    (void)k;
    if (!(g.dist > 0) || !isfinite(g.dist))
        return fail_at(cfg, what, d, "geometry.dist", FAID_ERANGE, "distance must be positive");
    if (!(g.wavelength > 0))
        return fail_at(cfg, what, d, "geometry.wavelength", FAID_ERANGE,
                       "wavelength must be positive");
    /* Values of a .poni file or a preset meet the table's ranges too (an explicit key was
     * checked when parsed). */
    int rc;
    if ((rc = geom_in_range(cfg, what, d, "detector.pixel_size", cfg->pixel1, culprit)) ||
        (rc = geom_in_range(cfg, what, d, "detector.pixel_size", cfg->pixel2, culprit)) ||
        (rc = geom_in_range(cfg, what, d, "geometry.dist", g.dist, NULL)) ||
        (rc = geom_in_range(cfg, what, d, "geometry.wavelength", g.wavelength, NULL)) ||
        (rc = geom_in_range(cfg, what, d, "geometry.poni1", g.poni1, NULL)) ||
        (rc = geom_in_range(cfg, what, d, "geometry.poni2", g.poni2, NULL)))
        return rc;
    g.rows = cfg->rows;
    g.cols = cfg->cols;
    g.pixel1 = cfg->pixel1;
    g.pixel2 = cfg->pixel2;
    if (g.orientation < 1 || g.orientation > 4)
        g.orientation = 3;
    cfg->geometry = g;
    if (cfg->instance_shard >= cfg->instance_shards)
        return fail_at(cfg, what, d, "instance.shard", FAID_ECONFIG,
                       "shard %d is not below instance.shards %d", cfg->instance_shard,
                       cfg->instance_shards);
    /* the peak parameters' cross-checks (ranges alone are the table's): the message starts with
     * the key, which fail_at locates in the file */
    faid_diag pd = {0};
    if (faid_peak_params_check(&cfg->peaks, &pd)) {
        char key[64] = "";
        const char *colon = strchr(pd.msg, ':');
        if (colon && (size_t)(colon - pd.msg) < sizeof key)
            memcpy(key, pd.msg, (size_t)(colon - pd.msg));
        char *slash = strchr(key, '/'); /* "peaks.min_res/max_res" */
        if (slash)
            *slash = 0;
        const int known = key[0] && opt_index(key) >= 0;
        return fail_at(cfg, what, d, known ? key : NULL, FAID_ECONFIG, "%s",
                       known && colon[1] ? colon + 2 : pd.msg);
    }
    return 0;
}

int faid_config_resolve(faid_config *cfg, faid_diag *d)
{
    return resolve(cfg, NULL, d);
}

/* ---- public entry points -------------------------------------------------------------------- */

void faid_config_default(faid_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NOPT; i++) {
        if (!options[i].def)
            continue;
        faid_diag d = {0};
        /* The table's defaults are validated by the unit tests; a failure here is a bug in the
         * table, never an input error. */
        if (apply_value_text(&options[i], options[i].def, "default", cfg, &d) != 0)
            fprintf(stderr, "faid_config: bad default for %s: %s\n", options[i].name, d.msg);
    }
    if (faid_config_resolve(cfg, NULL) != 0)
        fprintf(stderr, "faid_config: the embedded default does not resolve\n");
}

int faid_config_load_string(const char *yaml, size_t len, const char *what, faid_config *cfg,
                            faid_diag *d)
{
    int rc = apply_text(yaml, len, what, NULL, 0, cfg, d);
    if (rc)
        return rc;
    return resolve(cfg, what, d);
}

int faid_config_load(const char *path, faid_config *cfg, faid_diag *d)
{
    /* Regular files only, opened without blocking (faid_file.h): a FIFO given to `reload`
     * froze the control thread and SIGTERM until something wrote to it. */
    uint8_t *bytes = NULL;
    size_t n = 0;
    int rc = faid_file_read_max(path, (size_t)1 << 24, &bytes, &n, d);
    if (rc)
        return rc;
    char *buf = (char *)bytes;
    /* Relative paths inside are relative to the file's folder, made absolute so that they stay
     * valid whatever the daemon's working directory becomes. */
    char dir[FAID_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    char absdir[PATH_MAX];
    const char *base = realpath(dir, absdir) ? absdir : dir;
    if (strlen(path) >= sizeof cfg->source) {
        free(buf);
        return faid_fail(d, FAID_EINVAL, "%s: path too long", path);
    }
    char saved_source[FAID_PATH_MAX];
    memcpy(saved_source, cfg->source, sizeof saved_source);
    snprintf(cfg->source, sizeof cfg->source, "%s", path);
    rc = apply_text(buf, n, path, base, 1, cfg, d);
    free(buf);
    if (!rc)
        rc = faid_config_resolve(cfg, d);
    if (rc)
        memcpy(cfg->source, saved_source, sizeof saved_source);
    return rc;
}

int faid_config_set(faid_config *cfg, const char *key, const char *value, faid_diag *d)
{
    int idx = opt_index(key);
    if (idx < 0) {
        const char *best = nearest_option(key);
        if (best)
            return faid_fail(d, FAID_ECONFIG, "unknown key '%s' (did you mean '%s'?)", key, best);
        return faid_fail(d, FAID_ECONFIG, "unknown key '%s'", key);
    }
    int rc = apply_value_text(&options[idx], value, "--set", cfg, d);
    if (rc)
        return rc;
    /* Marked as given (on "line 1" of the command line) so that it wins over presets. */
    cfg->given_line[idx] = cfg->given_line[idx] > 0 ? cfg->given_line[idx] : 1;
    return resolve(cfg, "--set", d);
}

int faid_config_get(const faid_config *cfg, const char *key, char *buf, size_t cap, faid_diag *d)
{
    const faid_option *o = faid_config_find(key);
    if (!o) {
        const char *best = nearest_option(key);
        if (best)
            return faid_fail(d, FAID_ECONFIG, "unknown key '%s' (did you mean '%s'?)", key, best);
        return faid_fail(d, FAID_ECONFIG, "unknown key '%s'", key);
    }
    sbuf b = {0};
    fmt_value(o, cfg, &b);
    if (b.oom) {
        free(b.p);
        return faid_fail(d, FAID_ENOMEM, "out of memory");
    }
    int rc = 0;
    if (!cap || b.n >= cap)
        rc = faid_fail(d, FAID_ESIZE, "%s: value does not fit in %zu bytes", key, cap);
    else
        memcpy(buf, b.p, b.n + 1);
    free(b.p);
    return rc;
}

int faid_config_equal(const faid_config *a, const faid_config *b)
{
    for (size_t i = 0; i < NOPT; i++) {
        sbuf x = {0}, y = {0};
        fmt_value(&options[i], a, &x);
        fmt_value(&options[i], b, &y);
        int same = !x.oom && !y.oom && x.n == y.n && memcmp(x.p, y.p, x.n) == 0;
        free(x.p);
        free(y.p);
        if (!same)
            return 0;
    }
    const faid_geometry *g = &a->geometry, *h = &b->geometry;
    return g->dist == h->dist && g->poni1 == h->poni1 && g->poni2 == h->poni2 &&
           g->rot1 == h->rot1 && g->rot2 == h->rot2 && g->rot3 == h->rot3 &&
           g->wavelength == h->wavelength && g->pixel1 == h->pixel1 && g->pixel2 == h->pixel2 &&
           g->rows == h->rows && g->cols == h->cols && g->orientation == h->orientation;
}

/* ---- dump, example, Markdown ---------------------------------------------------------------- */

static const char *type_name(const faid_option *o)
{
    switch (o->type) {
    case FAID_OT_INT:
    case FAID_OT_INT64:
        return "integer";
    case FAID_OT_DOUBLE:
        return "number";
    case FAID_OT_BOOL:
        return "bool";
    case FAID_OT_STRING:
        return o->choices ? "choice" : "string";
    case FAID_OT_PATH:
        return "path";
    case FAID_OT_ENUM:
        return "choice";
    case FAID_OT_PAIR:
        return "[number, number]";
    case FAID_OT_SHAPE:
        return "[integer, integer]";
    case FAID_OT_DEVICES:
        return "devices";
    case FAID_OT_ENDPOINTS:
        return "endpoint or list";
    case FAID_OT_KEYS:
        return "list of keys";
    }
    return "?";
}

int faid_config_in_range(const faid_option *o, double x)
{
    if (!isfinite(x))
        return 0;
    int low = (o->flags & FAID_OPT_MIN_EXCL) ? x <= o->min : x < o->min;
    return !low && x <= o->max;
}

void faid_config_range_text(const faid_option *o, char *out, size_t cap)
{
    out[0] = '\0';
    if (o->choices) {
        choices_text(o->choices, out, cap);
        return;
    }
    if (o->off == OFF(key_preset)) {
        size_t k = 0;
        for (const faid_detector_preset *p = faid_detector_presets; p->name && k < cap; p++)
            k += (size_t)snprintf(out + k, cap - k, "%s%s", p == faid_detector_presets ? "" : ", ",
                                  p->alias ? p->alias : p->name);
        return;
    }
    if (o->type != FAID_OT_INT && o->type != FAID_OT_INT64 && o->type != FAID_OT_DOUBLE &&
        o->type != FAID_OT_PAIR && o->type != FAID_OT_SHAPE)
        return;
    char lo[64], hi[64];
    int ints = o->type == FAID_OT_INT || o->type == FAID_OT_INT64 || o->type == FAID_OT_SHAPE;
    if (ints) {
        snprintf(lo, sizeof lo, "%.0f", o->min);
        snprintf(hi, sizeof hi, "%.0f", o->max);
    } else {
        snprintf(lo, sizeof lo, "%g", o->min);
        snprintf(hi, sizeof hi, "%g", o->max);
    }
    if (o->min <= -HUGE_V && o->max >= HUGE_V)
        snprintf(out, cap, "any");
    else if (o->max >= HUGE_V)
        snprintf(out, cap, "%s %s", (o->flags & FAID_OPT_MIN_EXCL) ? ">" : ">=", lo);
    else
        snprintf(out, cap, "%s%s, %s]", (o->flags & FAID_OPT_MIN_EXCL) ? "(" : "[", lo, hi);
}

static void wrap_comment(sbuf *b, const char *indent, const char *text)
{
    const int width = 96;
    const char *p = text;
    while (*p) {
        int room = width - (int)strlen(indent) - 2;
        int len = (int)strlen(p);
        int cut = len;
        if (len > room) {
            cut = room;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = room;
        }
        sb_printf(b, "%s# %.*s\n", indent, cut, p);
        p += cut;
        while (*p == ' ')
            p++;
    }
}

static void dump(const faid_config *cfg, faid_dump_style style, sbuf *b)
{
    if (style == FAID_DUMP_MARKDOWN) {
        sb_printf(b, "| key | type | unit | default | range / choices | reload | description "
                     "|\n|---|---|---|---|---|---|---|\n");
        for (size_t i = 0; i < NOPT; i++) {
            const faid_option *o = &options[i];
            char range[256];
            faid_config_range_text(o, range, sizeof range);
            sb_printf(b, "| `%s` | %s | %s | %s%s%s | %s | %s | ", o->name, type_name(o), o->unit,
                      o->def ? "`" : "", o->def ? o->def : "computed", o->def ? "`" : "", range,
                      (o->flags & FAID_OPT_RELOAD) ? "yes" : "no");
            for (const char *p = o->help; *p; p++)
                sb_printf(b, *p == '|' ? "\\|" : "%c", *p);
            sb_printf(b, " |\n");
        }
        return;
    }
    if (style == FAID_DUMP_ANNOTATED) {
        sb_printf(
            b,
            "# faid configuration (faid %s). Every option with its default; generated "
            "from the option\n# table (faidctl process --dump-config=annotated). Units are SI "
            "unless stated; relative\n# paths are relative to this file's folder. "
            "Reference: docs/configuration.md.\n",
            FAID_VERSION);
    } else {
        sb_printf(b, "# faid %s effective configuration (source: %s)\n", FAID_VERSION,
                  cfg->source[0] ? cfg->source : "embedded default");
    }
    char section[64] = "";
    for (size_t i = 0; i < NOPT; i++) {
        const faid_option *o = &options[i];
        if (style == FAID_DUMP_PLAIN && (o->flags & FAID_OPT_QUIET) && at_default(o, cfg))
            continue;
        const char *dot = strchr(o->name, '.');
        const char *key = o->name;
        const char *indent = "";
        if (dot) {
            size_t sl = (size_t)(dot - o->name);
            if (strlen(section) != sl || strncmp(section, o->name, sl) != 0) {
                snprintf(section, sizeof section, "%.*s", (int)sl, o->name);
                sb_printf(b, "%s%s:\n", style == FAID_DUMP_ANNOTATED ? "\n" : "", section);
            }
            key = dot + 1;
            indent = "  ";
        } else {
            section[0] = '\0';
            if (style == FAID_DUMP_ANNOTATED)
                sb_printf(b, "\n");
        }
        if (style == FAID_DUMP_ANNOTATED) {
            wrap_comment(b, indent, o->help);
            char range[256], meta[512];
            faid_config_range_text(o, range, sizeof range);
            snprintf(meta, sizeof meta, "%s%s%s%s%s; default: %s; %s", type_name(o),
                     *o->unit ? ", " : "", o->unit, *range ? "; " : "", range,
                     o->def ? o->def : "computed",
                     (o->flags & FAID_OPT_RELOAD) ? "reloadable" : "needs a restart");
            wrap_comment(b, indent, meta);
        }
        /* Left as a comment, a derived option keeps coming from the preset / .poni file when
         * the user edits the file (a preset or poni_file added later still applies). */
        int derived = style == FAID_DUMP_ANNOTATED && (o->flags & FAID_OPT_DERIVED) &&
                      cfg->given_line[i] == 0;
        sb_printf(b, "%s%s%s: ", indent, derived ? "# " : "", key);
        fmt_value(o, cfg, b);
        sb_printf(b, "\n");
    }
}

char *faid_config_dump_alloc(const faid_config *cfg, faid_dump_style style)
{
    sbuf b = {0};
    dump(cfg, style, &b);
    if (b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int faid_config_dump(const faid_config *cfg, char *buf, size_t cap)
{
    char *s = faid_config_dump_alloc(cfg, FAID_DUMP_PLAIN);
    if (!s)
        return FAID_ENOMEM;
    size_t n = strlen(s);
    int rc = 0;
    if (n >= cap)
        rc = FAID_ESIZE;
    else
        memcpy(buf, s, n + 1);
    free(s);
    return rc;
}

char *faid_config_example(void)
{
    faid_config *cfg = malloc(sizeof *cfg);
    if (!cfg)
        return NULL;
    faid_config_default(cfg);
    char *s = faid_config_dump_alloc(cfg, FAID_DUMP_ANNOTATED);
    free(cfg);
    return s;
}

/* ---- hash ----------------------------------------------------------------------------------- */

uint64_t faid_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t faid_config_hash64(const faid_config *cfg, int with_paths)
{
    uint64_t h = FAID_FNV_OFFSET;
    for (size_t i = 0; i < NOPT; i++) {
        const faid_option *o = &options[i];
        if (!(o->flags & FAID_OPT_REDUCTION) || (!with_paths && o->type == FAID_OT_PATH) ||
            ((o->flags & FAID_OPT_QUIET) && at_default(o, cfg)))
            continue;
        sbuf b = {0};
        sb_printf(&b, "%s=", o->name);
        fmt_value(o, cfg, &b);
        sb_printf(&b, "\n");
        if (b.p)
            h = faid_fnv1a(h, b.p, b.n);
        free(b.p);
    }
    return h;
}

void faid_config_hash(const faid_config *cfg, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)faid_config_hash64(cfg, 1));
}

void faid_config_put_peak_params(struct faid_mpw *w, void *config)
{
    const faid_config *c = config;
    faid_mpw_key(w, FAID_K_ALGORITHM);
    faid_mpw_str(w, faid_peak_algorithm_name(c->peaks.algorithm));
    for (size_t i = 0; i < NOPT; i++) {
        if (!faid_peak_param_echoed(options[i].name))
            continue;
        int is_num;
        double num;
        const char *str;
        int null = faid_config_value(c, &options[i], &is_num, &num, &str);
        faid_mpw_key(w, options[i].name + 6);
        if (null)
            faid_mpw_nil(w);
        else if (is_num && options[i].type == FAID_OT_DOUBLE)
            faid_mpw_f64(w, num);
        else if (is_num)
            faid_mpw_int(w, (int64_t)num);
        else
            faid_mpw_str(w, str ? str : "");
    }
}
