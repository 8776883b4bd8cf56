/* faidctl inspect: decodes one input message (its parts given as files, in order) with the
 * daemon's input formats and prints what it decodes to as one JSON object: format, type, series,
 * frame, shape, dtype, encoding, channel, start metadata. --npy writes the frame's pixels
 * (decoded with the CPU reference codecs) and --mask-npy / --flatfield-npy / --countrate-npy the
 * start message's arrays, so that tests and users can compare them with what a detector sent.
 * Exit status 0 when the message decodes, 1 when it does not (the JSON then says why). */
#include "faidctl.h"

#include "faid_input.h"
#include "faid_npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: faidctl inspect [--protocol P] [--channel NAME] [--npy OUT.npy]\n"
            "                       [--mask-npy M.npy] [--flatfield-npy F.npy]\n"
            "                       [--countrate-npy C.npy] [--repeat N] PART1 [PART2 ...]\n"
            "\n"
            "Decodes one input message whose parts are the files PART1, PART2, ... and prints\n"
            "what it decodes to as JSON.\n"
            "  --protocol  auto (default), native, dectris-v1 or dectris-v2 (input.protocol)\n"
            "  --channel   channel of a DECTRIS v2 image to take (input.channel; default: first)\n"
            "  --npy       write the image's pixels, decoded, as [rows, cols]\n"
            "  --mask-npy, --flatfield-npy, --countrate-npy\n"
            "              write the start message's pixel mask / flatfield / count-rate table\n"
            "  --repeat    decode the message N more times and report the mean time per decode\n"
            "              (\"decode_us\"; a measurement, not a benchmark of the frame codecs)\n");
}

static int read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c > 0x7e)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int write_array(const faid_input_array *a, const char *path, faid_diag *d)
{
    size_t n = faid_input_array_bytes(a);
    void *buf = malloc(n ? n : 1);
    if (!buf)
        return faid_fail(d, FAID_ENOMEM, "no memory for %zu bytes", n);
    int rc = faid_input_array_decode(a, buf, n, d);
    size_t shape[2] = {(size_t)a->shape[0], (size_t)a->shape[1]};
    if (!rc)
        rc = faid_npy_write(path, a->dtype, a->ndim, shape, buf, d);
    free(buf);
    return rc;
}

static void print_meta(const faid_input_meta *m)
{
    printf(", \"meta\": {\"have\": %u", m->have);
    if (m->have & FAID_META_BEAM_CENTER)
        printf(", \"beam_center_x\": %.17g, \"beam_center_y\": %.17g", m->beam_center_x,
               m->beam_center_y);
    if (m->have & FAID_META_DISTANCE)
        printf(", \"detector_distance\": %.17g", m->detector_distance);
    if (m->have & FAID_META_TRANSLATION)
        printf(", \"detector_translation\": [%.17g, %.17g, %.17g]", m->detector_translation[0],
               m->detector_translation[1], m->detector_translation[2]);
    if (m->have & FAID_META_WAVELENGTH)
        printf(", \"incident_wavelength\": %.17g", m->incident_wavelength);
    if (m->have & FAID_META_ENERGY)
        printf(", \"incident_energy\": %.17g", m->incident_energy);
    if (m->have & FAID_META_PIXEL_SIZE)
        printf(", \"pixel_size_x\": %.17g, \"pixel_size_y\": %.17g", m->pixel_size_x,
               m->pixel_size_y);
    if (m->have & FAID_META_IMAGE_SIZE)
        printf(", \"image_size_x\": %lld, \"image_size_y\": %lld", (long long)m->image_size_x,
               (long long)m->image_size_y);
    if (m->have & FAID_META_DTYPE)
        printf(", \"image_dtype\": \"%s\"", faid_dtype_name(m->image_dtype));
    if (m->have & FAID_META_NIMAGES)
        printf(", \"nimages\": %lld", (long long)m->nimages);
    if (m->have & FAID_META_COUNT_TIME)
        printf(", \"count_time\": %.17g", m->count_time);
    if (m->have & FAID_META_FRAME_TIME)
        printf(", \"frame_time\": %.17g", m->frame_time);
    if (m->have & FAID_META_SATURATION)
        printf(", \"saturation_value\": %lld", (long long)m->saturation_value);
    if (m->have & FAID_META_ERROR_VALUE)
        printf(", \"error_value\": %lld", (long long)m->error_value);
    if (m->have & FAID_META_THRESHOLD)
        printf(", \"threshold_energy\": %.17g", m->threshold_energy);
    if (m->have & FAID_META_SENSOR) {
        printf(", \"sensor_thickness\": %.17g, \"sensor_material\": ", m->sensor_thickness);
        json_str(m->sensor_material);
    }
    if (m->have & FAID_META_MAGIC)
        printf(", \"magic_number\": %llu", (unsigned long long)m->magic_number);
    if (m->have & FAID_META_MASK_ENABLED)
        printf(", \"pixel_mask_enabled\": %s", m->pixel_mask_enabled ? "true" : "false");
    if (m->have & FAID_META_FLATFIELD_ENABLED)
        printf(", \"flatfield_enabled\": %s", m->flatfield_enabled ? "true" : "false");
    if (m->have & FAID_META_COUNTRATE_ENABLED)
        printf(", \"countrate_correction_enabled\": %s",
               m->countrate_correction_enabled ? "true" : "false");
    if (m->detector_description[0]) {
        printf(", \"detector_description\": ");
        json_str(m->detector_description);
    }
    if (m->detector_serial_number[0]) {
        printf(", \"detector_serial_number\": ");
        json_str(m->detector_serial_number);
    }
    if (m->header_detail[0]) {
        printf(", \"header_detail\": ");
        json_str(m->header_detail);
    }
    printf(", \"channels\": [");
    for (int c = 0; c < m->nchannels; c++) {
        printf(c ? ", " : "");
        json_str(m->channels[c]);
    }
    printf("]");
    const struct {
        const char *name;
        const faid_input_array *a;
    } arrays[] = {{"pixel_mask", &m->pixel_mask},
                  {"flatfield", &m->flatfield},
                  {"countrate_table", &m->countrate_table}};
    for (size_t k = 0; k < sizeof(arrays) / sizeof(arrays[0]); k++) {
        const faid_input_array *a = arrays[k].a;
        if (!a->present)
            continue;
        printf(", \"%s\": {\"shape\": [%llu, %llu], \"dtype\": \"%s\", \"encoding\": \"%s\"}",
               arrays[k].name, (unsigned long long)a->shape[0], (unsigned long long)a->shape[1],
               faid_dtype_name(a->dtype), faid_encoding_name(a->encoding));
    }
    printf("}");
}

int faidctl_inspect(int argc, char **argv)
{
    const char *proto_name = "auto", *channel = NULL, *npy = NULL;
    const char *mask_npy = NULL, *flat_npy = NULL, *rate_npy = NULL, *repeat_s = NULL;
    const char *files[FAID_INPUT_MAX_PARTS + 8];
    int nfiles = 0;
    enum { O_PROTOCOL = 256, O_CHANNEL, O_NPY, O_MASK, O_FLAT, O_RATE, O_REPEAT };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"protocol", required_argument, NULL, O_PROTOCOL},
        {"channel", required_argument, NULL, O_CHANNEL},
        {"npy", required_argument, NULL, O_NPY},
        {"mask-npy", required_argument, NULL, O_MASK},
        {"flatfield-npy", required_argument, NULL, O_FLAT},
        {"countrate-npy", required_argument, NULL, O_RATE},
        {"repeat", required_argument, NULL, O_REPEAT},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case O_PROTOCOL:
            proto_name = optarg;
            break;
        case O_CHANNEL:
            channel = optarg;
            break;
        case O_NPY:
            npy = optarg;
            break;
        case O_MASK:
            mask_npy = optarg;
            break;
        case O_FLAT:
            flat_npy = optarg;
            break;
        case O_RATE:
            rate_npy = optarg;
            break;
        case O_REPEAT:
            repeat_s = optarg;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (nfiles == (int)(sizeof(files) / sizeof(files[0]))) {
            fprintf(stderr, "faidctl inspect: too many parts\n");
            return 2;
        }
        files[nfiles++] = argv[i];
    }
    faid_input_protocol proto;
    if (faid_input_protocol_parse(proto_name, &proto) != 0 || proto == FAID_PROTOCOL_FAN) {
        fprintf(stderr, "faidctl inspect: unknown protocol %s\n", proto_name);
        return 2;
    }
    if (nfiles == 0) {
        usage(stderr);
        return 2;
    }
    long repeat = 0;
    if (repeat_s) {
        char *end;
        repeat = strtol(repeat_s, &end, 10);
        if (*end || repeat < 1 || repeat > 100000000) {
            fprintf(stderr, "faidctl inspect: --repeat takes 1..1e8\n");
            return 2;
        }
    }
    uint8_t *bufs[sizeof(files) / sizeof(files[0])] = {0};
    faid_input_part parts[sizeof(files) / sizeof(files[0])];
    int status = 1;
    for (int k = 0; k < nfiles; k++) {
        if (read_file(files[k], &bufs[k], &parts[k].len) != 0) {
            fprintf(stderr, "faidctl inspect: cannot read %s\n", files[k]);
            goto out;
        }
        parts[k].data = bufs[k];
    }
    faid_input_msg *m = calloc(1, sizeof(*m));
    if (!m)
        goto out;
    faid_input_opts o = {.channel = channel};
    faid_diag d;
    faid_diag_clear(&d);
    int rc = faid_input_decode(proto, parts, nfiles, &o, m, &d);
    double decode_us = 0;
    if (repeat) {
        faid_input_msg *m2 = calloc(1, sizeof(*m2));
        if (!m2) {
            free(m);
            goto out;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long k = 0; k < repeat; k++) {
            faid_diag d2;
            faid_input_decode(proto, parts, nfiles, &o, m2, &d2);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        decode_us =
            ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) /
            (double)repeat;
        free(m2);
    }
    printf("{\"ok\": %s, \"format\": ", rc ? "false" : "true");
    json_str(m->format ? faid_input_protocol_name(m->format->protocol) : "");
    printf(", \"type\": \"%s\", \"header_ok\": %s, \"nparts\": %d", faid_in_type_name(m->h.type),
           m->header_ok ? "true" : "false", nfiles);
    if (rc) {
        printf(", \"code\": \"%s\", \"message\": ", faid_errname(rc));
        json_str(d.msg);
    }
    if (repeat)
        printf(", \"decode_us\": %.3f, \"repeat\": %ld", decode_us, repeat);
    printf(", \"series_id\": %llu, \"series_unique_id\": ", (unsigned long long)m->h.series_id);
    json_str(m->h.series_unique_id);
    if (m->h.type == FAID_IN_OTHER) {
        printf(", \"other_type\": ");
        json_str(m->other_type);
    }
    if (m->h.has_frame_id)
        printf(", \"frame_id\": %llu", (unsigned long long)m->h.frame_id);
    if (!rc && m->h.type == FAID_IN_IMAGE) {
        printf(", \"shape\": [%d, %d], \"dtype\": \"%s\", \"encoding\": \"%s\", "
               "\"payload_part\": %d, \"payload_bytes\": %zu, \"channel\": ",
               m->h.rows, m->h.cols, faid_dtype_name(m->h.dtype), faid_encoding_name(m->h.encoding),
               m->payload_part, m->payload_len);
        json_str(m->channel);
        printf(", \"channel_index\": %d", m->channel_index);
        const char *tn[3] = {"start_time", "stop_time", "real_time"};
        const uint64_t *tv[3] = {m->h.start_time, m->h.stop_time, m->h.real_time};
        const int th[3] = {m->h.has_start_time, m->h.has_stop_time, m->h.has_real_time};
        for (int k = 0; k < 3; k++)
            if (th[k])
                printf(", \"%s\": [%llu, %llu]", tn[k], (unsigned long long)tv[k][0],
                       (unsigned long long)tv[k][1]);
    }
    if (m->h.type == FAID_IN_START)
        printf(", \"nimages\": %lld", (long long)m->h.nimages);
    if (m->appendix)
        printf(", \"appendix_bytes\": %zu", m->appendix_len);
    /* The user data as faid's output would carry it (msgpack), rendered as JSON. */
    static uint8_t ud[1 << 16];
    static char ud_json[1 << 16];
    faid_mpw w;
    faid_mpw_init(&w, ud, sizeof(ud));
    int written = 0;
    faid_diag ud_d;
    faid_diag_clear(&ud_d);
    if (faid_input_user_data(m, &w, &written, &ud_d) == 0 && written &&
        faid_mpw_finish(&w, &ud_d) == 0 &&
        faid_mp_to_json(ud, w.len, ud_json, sizeof(ud_json), 64, &ud_d) == 0)
        printf(", \"user_data\": %s", ud_json);
    else if (written || ud_d.code) {
        printf(", \"user_data_error\": ");
        json_str(ud_d.msg);
    }
    if (m->h.type == FAID_IN_START || m->meta.have || m->meta.nchannels)
        print_meta(&m->meta);
    printf("}\n");
    fflush(stdout);
    status = rc ? 1 : 0;
    if (!rc && npy && m->h.type == FAID_IN_IMAGE) {
        faid_input_array a = {.present = 1,
                              .dtype = m->h.dtype,
                              .ndim = 2,
                              .shape = {(uint64_t)m->h.rows, (uint64_t)m->h.cols},
                              .encoding = m->h.encoding,
                              .data = m->payload,
                              .len = m->payload_len};
        if (write_array(&a, npy, &d)) {
            fprintf(stderr, "faidctl inspect: frame does not decode: %s\n", d.msg);
            status = 1;
        }
    }
    const struct {
        const char *path;
        const faid_input_array *a;
    } outs[] = {{mask_npy, &m->meta.pixel_mask},
                {flat_npy, &m->meta.flatfield},
                {rate_npy, &m->meta.countrate_table}};
    for (size_t k = 0; !rc && k < sizeof(outs) / sizeof(outs[0]); k++) {
        if (!outs[k].path)
            continue;
        if (!outs[k].a->present) {
            fprintf(stderr, "faidctl inspect: the message has no array for %s\n", outs[k].path);
            status = 1;
        } else if (write_array(outs[k].a, outs[k].path, &d)) {
            fprintf(stderr, "faidctl inspect: %s: %s\n", outs[k].path, d.msg);
            status = 1;
        }
    }
    free(m);
out:
    for (int k = 0; k < nfiles; k++)
        free(bufs[k]);
    return status;
}
