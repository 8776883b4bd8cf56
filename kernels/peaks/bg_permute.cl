/* peaks/bg_permute.cl: a copy of one raw frame in the background matrix' entry order (issue 17,
 * round 6; FAID_SIGCLIP_PERM, engine/faid_stage_sigclip.c). Concatenated after
 * process/preprocess.cl (raw_t from RAW_CODE).
 *
 * Why: the sigma clip (sigma_clip.cl) reads each bin's pixels through the CSR indices, and the
 * pixels of one radial bin of an EIGER 4M lie in runs of one to a few along the detector rows,
 * so every 4-byte load costs a 32-byte sector and waits for the index before it: one H100
 * spent 111 of the clip's 159 us of a frame on that gather and the first pass (round 5's probe,
 * docs/PERFORMANCE.md). With the copy, entry k of the matrix is element k of `rawp`, so the clip
 * reads its bins' pixels consecutively (built with SC_PERM, with the corrections `normp` and
 * `dark` copied once into the same order: faid_stage_entry_order); its values are the raw
 * values themselves, so the clip gives the same bits.
 *
 * Two ways to make the copy, both one work-item per element:
 *   faid_bg_scatter  reads the frame in pixel order (coalesced) and writes each pixel to its entry
 *                    (perm[i], -1 for a pixel in no bin): the scattered accesses are stores,
 *                    which no work-item waits for, and the 4-byte stores of a bin's runs merge
 *                    in the L2 cache before they reach memory
 *   faid_bg_gather   reads entry k's pixel through the CSR indices (the clip's gather alone,
 *                    with every work-item's load independent of the others)
 * A pixel lies in at most one bin of the background matrix (no pixel splitting), so perm is a
 * one-to-one map onto the entries; the host builds it from the matrix and refuses a matrix that
 * lists a pixel twice. */

/* Global size >= npix: rawp[perm[i]] = frame pixel i (the frame at element raw_off of raw). */
__kernel void faid_bg_scatter(__global const raw_t *raw, uint raw_off, __global const int *perm,
                              int npix, __global raw_t *rawp)
{
    const int i = get_global_id(0);
    if (i >= npix)
        return;
    const int q = perm[i];
    if (q >= 0)
        rawp[q] = raw[raw_off + (uint)i];
}

/* Global size >= nnz: rawp[k] = frame pixel indices[k]. */
__kernel void faid_bg_gather(__global const raw_t *raw, uint raw_off, __global const int *indices,
                             int nnz, __global raw_t *rawp)
{
    const int k = get_global_id(0);
    if (k >= nnz)
        return;
    rawp[k] = raw[raw_off + (uint)indices[k]];
}
