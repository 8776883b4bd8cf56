/* faidctl decode: decodes one compressed chunk (bslz4, HDF5-LZ4, raw LZ4 or uncompressed) into a
 * .npy file, with the CPU reference decoder (--device ref) or the OpenCL decoder the daemon uses
 * (any other --device). Used to check chunks by hand and by the codec tests, which compare both
 * paths with hdf5plugin. Encodings the device decoder cannot take (none, lz4-raw, blocks larger
 * than its local memory) are decoded on the CPU with a note on stderr. */
#include "faidctl.h"

#include "faid_clcodec.h"
#include "faid_codec.h"
#include "faid_dtype.h"
#include "faid_err.h"
#include "faid_npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: faidctl decode INPUT -o OUT.npy --shape H,W --dtype T\n"
               "                      [--encoding bslz4|lz4|lz4-raw|none] [--device D] [-v]\n"
               "\n"
               "Decodes one compressed chunk (a whole frame) into a .npy array.\n"
               "  --shape     dimensions, slowest first (1 to 4 of them), e.g. 2167,2070\n"
               "  --dtype     uint8, uint16, uint32, int8, int16, int32 or float32\n"
               "  --encoding  bslz4 (bitshuffle-LZ4, HDF5 filter 32008, default), lz4 (HDF5-LZ4\n"
               "              framing, DECTRIS v2 \"lz4\"), lz4-raw (one LZ4 block, DECTRIS v1\n"
               "              \"lz4<\") or none\n"
               "  --device    auto (first GPU, else the CPU OpenCL device; default), cpu, gpu,\n"
               "              ref (plain C reference decoder) or an index from `faidctl devices`\n"
               "  -v          say which decoder ran\n");
}

static int parse_shape(const char *s, size_t *shape, int *ndim)
{
    *ndim = 0;
    const char *p = s;
    while (*p) {
        if (*ndim == FAID_NPY_MAXDIM)
            return -1;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p || v == 0 || v > ((uint64_t)1 << 40) || *p == '-' || *p == '+')
            return -1;
        shape[(*ndim)++] = (size_t)v;
        p = end;
        if (*p == ',' || *p == 'x')
            p++;
        else if (*p)
            return -1;
    }
    return *ndim ? 0 : -1;
}

static int read_file(const char *path, uint8_t **out, size_t *len, faid_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return faid_fail(d, FAID_EIO, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 20;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(f);
                return faid_fail(d, FAID_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return faid_fail(d, FAID_EIO, "%s: read error", path);
    }
    *out = buf;
    *len = n;
    return FAID_OK;
}

int faidctl_decode(int argc, char **argv)
{
    const char *input = NULL, *output = NULL, *shape_s = NULL, *dtype_s = NULL;
    const char *enc_s = "bslz4", *device = "auto";
    int verbose = 0;
    enum { O_SHAPE = 256, O_DTYPE, O_ENCODING, O_DEVICE };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"verbose", no_argument, NULL, 'v'},
        {"output", required_argument, NULL, 'o'},
        {"shape", required_argument, NULL, O_SHAPE},
        {"dtype", required_argument, NULL, O_DTYPE},
        {"encoding", required_argument, NULL, O_ENCODING},
        {"device", required_argument, NULL, O_DEVICE},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case 'v':
            verbose = 1;
            break;
        case 'o':
            output = optarg;
            break;
        case O_SHAPE:
            shape_s = optarg;
            break;
        case O_DTYPE:
            dtype_s = optarg;
            break;
        case O_ENCODING:
            enc_s = optarg;
            break;
        case O_DEVICE:
            device = optarg;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (input) {
            fprintf(stderr, "faidctl decode: more than one input (%s, %s)\n", input, argv[i]);
            return 2;
        }
        input = argv[i];
    }
    if (!input || !output || !shape_s || !dtype_s) {
        fprintf(stderr, "faidctl decode: INPUT, -o, --shape and --dtype are required\n");
        usage(stderr);
        return 2;
    }
    size_t shape[FAID_NPY_MAXDIM];
    int ndim;
    if (parse_shape(shape_s, shape, &ndim)) {
        fprintf(stderr,
                "faidctl decode: --shape %s: expected 1 to 4 positive integers like "
                "2167,2070\n",
                shape_s);
        return 2;
    }
    faid_dtype dt = faid_dtype_parse(dtype_s);
    if (!faid_dtype_is_frame(dt)) {
        fprintf(stderr,
                "faidctl decode: --dtype %s: expected uint8, uint16, uint32, int8, "
                "int16, int32 or float32\n",
                dtype_s);
        return 2;
    }
    faid_encoding enc;
    if (faid_encoding_parse(enc_s, &enc)) {
        fprintf(stderr, "faidctl decode: --encoding %s: expected bslz4, lz4, lz4-raw or none\n",
                enc_s);
        return 2;
    }
    size_t esize = faid_dtype_size(dt);
    size_t count = 1;
    for (int k = 0; k < ndim; k++) {
        if (count > SIZE_MAX / shape[k] / esize) {
            fprintf(stderr, "faidctl decode: --shape %s is too large\n", shape_s);
            return 2;
        }
        count *= shape[k];
    }
    size_t nbytes = count * esize;

    faid_diag d;
    faid_diag_clear(&d);
    uint8_t *src = NULL;
    size_t len = 0;
    int rc = read_file(input, &src, &len, &d);
    if (rc) {
        fprintf(stderr, "faidctl decode: %s\n", d.msg);
        return 1;
    }
    uint8_t *dst = malloc(nbytes ? nbytes : 1);
    if (!dst) {
        free(src);
        fprintf(stderr, "faidctl decode: out of memory for %zu bytes\n", nbytes);
        return 1;
    }
    const char *used = "ref";
    char used_buf[300];
    if (strcmp(device, "ref") != 0) {
        faid_cl_device_info info;
        faid_cl_ctx *ctx = NULL;
        faid_clcodec *cc = NULL;
        rc = faid_cl_select(device, &info, &d);
        if (!rc && !(ctx = faid_cl_ctx_new(&info, 0, &d)))
            rc = d.code ? d.code : FAID_ECL;
        if (!rc && !(cc = faid_clcodec_new(ctx, esize, nbytes, &d)))
            rc = d.code ? d.code : FAID_ECL;
        if (!rc) {
            rc = faid_clcodec_decode_host(cc, enc, src, len, dst, nbytes, &d);
            snprintf(used_buf, sizeof used_buf, "OpenCL device %d (%s)", info.index, info.name);
            used = used_buf;
            if (rc == FAID_EUNSUP) {
                fprintf(stderr, "faidctl decode: note: %s; decoding on the CPU\n", d.msg);
                used = "ref (fallback)";
                rc = faid_decode(enc, src, len, esize, dst, nbytes, &d);
            }
        }
        faid_clcodec_destroy(&cc);
        faid_cl_ctx_destroy(&ctx);
    } else {
        rc = faid_decode(enc, src, len, esize, dst, nbytes, &d);
    }
    free(src);
    if (rc) {
        fprintf(stderr, "faidctl decode: %s: %s\n", input, d.msg);
        free(dst);
        return 1;
    }
    rc = faid_npy_write(output, dt, ndim, shape, dst, &d);
    free(dst);
    if (rc) {
        fprintf(stderr, "faidctl decode: %s\n", d.msg);
        return 1;
    }
    if (verbose)
        fprintf(stderr, "faidctl decode: %s: %zu bytes -> %s (%s, %s) with %s\n", input, len,
                output, faid_encoding_name(enc), faid_dtype_name(dt), used);
    return 0;
}
