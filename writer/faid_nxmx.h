/* faid_nxmx: the hits-only file of a series (issue 15, `writer.hits`): the hit frames exactly as
 * they arrived, in the NXmx layout that DECTRIS' and Jungfraujoch's writers use and the `nxmx`
 * package, DIALS and CrystFEL read, with the original frame ids and the peaks of those frames in
 * the Cheetah/CrystFEL CXI layout, so that indexing (`indexamajig --peaks=cxi`) needs no other
 * input than this file and the geometry file faid writes next to it.
 *
 * The frames are never decoded nor re-compressed: each chunk is written as it came off the wire
 * with a direct chunk write (one chunk = one frame, filter mask 0), and the dataset's creation
 * property list names the filter that decodes it (optional, so no filter has to be registered
 * in the writing process):
 *   FAID_ENC_BSLZ4    bitshuffle 32008, cd_values {0, 4, elem size, 0 (default block), 2 (LZ4)}
 *   FAID_ENC_LZ4      HDF5-LZ4 32004, cd_values {0} (its default block: the chunk's header says)
 *   FAID_ENC_LZ4_RAW  one raw LZ4 block has no filter that reads it: faid prepends the 16 bytes
 *                     of the HDF5-LZ4 framing (decoded size u64 BE, block size u32 BE = decoded
 *                     size, block length u32 BE) and writes it under 32004: a header copy, the
 *                     compressed bytes untouched
 *   FAID_ENC_NONE     no filter, the raw pixels (chunk_len must be rows * cols * elem size)
 * h5py + hdf5plugin then decode every frame bit for bit to the detector's pixels.
 *
 * Layout (faid_nxmx_file_layout lists every row; docs/output-files.md is generated from it):
 *   /entry                        NXentry, definition "NXmx"
 *   /entry/data                   NXdata, signal "data"
 *   /entry/data/data              [frames, rows, cols] dtype of the detector, chunk one frame
 *   /entry/data/frame_id          [frames] uint64: the original frame ids
 *   /entry/result_1               NXcollection: the CXI peak arrays (CrystFEL peak_list)
 *      nPeaks [frames] int32, peakXPosRaw / peakYPosRaw / peakTotalIntensity / peakSNR /
 *      peakMaximumValue [frames, max_peaks] float32, peakNPixels [frames, max_peaks] float32;
 *      positions in faid's pixel-index convention (centre of pixel (row r, col c) at x = c,
 *      y = r, docs/peaks.md), unused entries 0
 *   /entry/instrument/detector    NXdetector: distance, beam_center_x/y (pixels), x/y_pixel_size,
 *                                 pixel_mask, depends_on + transformations, module
 * (NXdetector_module) /entry/instrument/beam        NXbeam incident_wavelength (angstrom);
 * /entry/sample/beam links it Appends grow every per-frame dataset by one (unlimited first
 * dimension): the frame's chunk is written at once, its frame id and peaks are buffered and
 * reach the file 1024 rows (ids, nPeaks) or one peak chunk at a time, and all of them at each
 * flush. With params.swmr the file switches to SWMR write mode once the layout exists;
 * faid_nxmx_flush makes the frames written so far visible to a reader that opened the file with
 * swmr=True.
 *
 * Not thread-safe: one thread owns a faid_nxmx (libhdf5 1.10 of Debian is built without its
 * thread-safe option: callers serialise all HDF5 use of a process). */
#ifndef FAID_NXMX_H
#define FAID_NXMX_H

#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_err.h"
#include "faid_geometry.h"
#include "faid_layout.h"
#include "faid_peaks.h"

#include <stddef.h>
#include <stdint.h>

typedef struct faid_nxmx faid_nxmx;

typedef struct faid_nxmx_params {
    const char *path;          /* created exclusively (faid_h5_create): never overwrites */
    const faid_geometry *geom; /* rows, cols, pixel1/2, dist, poni1/2, rot*, wavelength (SI) */
    const char *detector_name; /* may be NULL */
    faid_dtype dtype;          /* pixel type of the frames as they arrive */
    faid_encoding encoding;    /* how the chunks arrive: NONE, BSLZ4, LZ4, LZ4_RAW */
    const uint8_t *mask; /* rows*cols, nonzero = masked (written as NXmx pixel_mask); may be NULL */
    int32_t max_peaks;   /* width of the CXI peak arrays (>= 1) */
    const char *series;  /* series_unique_id (else the series id as text); may be NULL */
    int swmr;            /* switch to SWMR write mode once the layout exists */
} faid_nxmx_params;

/* Creates p->path exclusively with the whole layout and no frames. FAID_EINVAL naming the field
 * for an invalid parameter (no path/geometry, rows or cols < 1, a dtype that is not a frame type,
 * max_peaks < 1), FAID_EIO naming the file when HDF5 fails (a file that exists is never touched).
 * On failure *out is NULL and a file created partly is removed. */
int faid_nxmx_open(faid_nxmx **out, const faid_nxmx_params *p, faid_diag *d);

/* One hit frame exactly as it arrived (compressed chunk bytes, or raw pixels for NONE), its
 * original frame id and its peaks (NULL = none found). Written with a direct chunk write.
 * The chunk is checked only as far as needed to write a readable file: its framing header must
 * announce rows * cols * elem size decoded bytes (BSLZ4, LZ4), NONE must have exactly that
 * length, LZ4_RAW must be non-empty; else FAID_ESIZE / FAID_EFORMAT naming the file and frame,
 * and nothing is written. Peaks beyond max_peaks are cut (nPeaks counts those stored).
 * A failed write (disk full, file size limit, I/O error: FAID_EIO naming the file and frame)
 * freezes the file: it keeps what its last successful flush wrote (readable, with swmr=True or
 * after h5clear -s), every later append and flush fails at once with FAID_EIO, and close
 * releases it without writing to it again. */
int faid_nxmx_append(faid_nxmx *h, uint64_t frame_id, const void *chunk, size_t chunk_len,
                     const faid_peak_list *peaks, faid_diag *d);

/* Writes the buffered frame ids and peaks, then H5Fflush: readers see every frame appended so
 * far, with its id and peaks (SWMR readers after their refresh). A failure freezes the file as
 * a failed append does. */
int faid_nxmx_flush(faid_nxmx *h, faid_diag *d);

/* Frames appended so far. */
uint64_t faid_nxmx_frames(const faid_nxmx *h);

/* Bytes of chunk data written so far (as stored, framing included). */
uint64_t faid_nxmx_bytes(const faid_nxmx *h);

/* Flushes and closes the file; closes even on error (the first error is returned, FAID_EIO for
 * a frozen file) and NULLs *h. NULL or *h NULL is a no-op returning 0. Call faid_h5_quiet (or
 * faid_nxmx_open, which does) before any other libhdf5 use in the process: see faid_h5.h. */
int faid_nxmx_close(faid_nxmx **h, faid_diag *d);

/* Every group, dataset and attribute the hits file holds (docs/output-files.md). */
extern const faid_layout faid_nxmx_file_layout;

/* The CrystFEL geometry (CrystFEL 0.10+ syntax) that makes indexamajig read the frames of a hits
 * file written with these parameters, and its peaks with --peaks=cxi: data /entry/data/data,
 * dim0 = %, peak_list /entry/result_1, peak_list_type cxi, clen, res = 1 / pixel size,
 * wavelength, one panel with corner_x/y from the beam centre, the pixel_mask when p->mask.
 * p->path is not used. Writes at most cap bytes (NUL-terminated) into buf; returns the length
 * the full text needs (as snprintf does) or a negative code with d filled. */
int faid_nxmx_crystfel_geom(char *buf, size_t cap, const faid_nxmx_params *p, faid_diag *d);

/* Writes that geometry to `path` (created exclusively: never overwrites). 0, FAID_EIO naming
 * the file, or the codes of faid_nxmx_crystfel_geom. */
int faid_nxmx_write_crystfel_geom(const char *path, const faid_nxmx_params *p, faid_diag *d);

/* The geometry file's name for a hits file's name: "x.h5" -> "x.geom" (else path + ".geom").
 * Returns snprintf's length; the name is cut at cap - 1 bytes. */
int faid_nxmx_geom_path(char *buf, size_t cap, const char *hits_path);

#endif
