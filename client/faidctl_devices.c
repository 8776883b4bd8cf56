/* faidctl devices: lists the OpenCL devices in the order the `devices` option and --device
 * indices refer to (platforms in ICD order, devices in platform order), plus the "ref"
 * pseudo-device (the plain C reference). `--json` prints the same as one JSON object. */
#include "faidctl.h"

#include "faid_cl.h"

#include <stdio.h>
#include <string.h>

static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static const char *type_of(const faid_cl_device_info *v)
{
    return v->is_gpu ? "gpu" : v->is_cpu ? "cpu" : "other";
}

int faidctl_devices(int argc, char **argv)
{
    int json = 0;
    enum { O_JSON = 256 };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"json", no_argument, NULL, O_JSON},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    while ((c = faidctl_getopt(argc, argv, longopts, &first)) != -1) {
        if (c == O_JSON) {
            json = 1;
        } else if (c == 'h') {
            printf("usage: faidctl devices [--json]\n\nLists the OpenCL devices with the index "
                   "that `--device N` and the `devices` option use,\nand the \"ref\" "
                   "pseudo-device (plain C reference). \"auto\" picks the first GPU, else the\n"
                   "first CPU device.\n");
            return 0;
        } else {
            fprintf(stderr, "usage: faidctl devices [--json]\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "faidctl devices: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    static faid_cl_device_info dev[FAID_CL_MAX_DEVICES];
    int n = 0;
    faid_diag d = {0};
    int rc = faid_cl_list(dev, FAID_CL_MAX_DEVICES, &n, &d);
    if (rc) {
        /* No ICD or no platform still leaves the reference device: report and go on. */
        fprintf(stderr, "faidctl devices: %s\n", d.msg);
        n = 0;
    }
    int autoidx = -1;
    for (int i = 0; i < n && autoidx < 0; i++)
        if (dev[i].is_gpu)
            autoidx = i;
    for (int i = 0; i < n && autoidx < 0; i++)
        if (dev[i].is_cpu)
            autoidx = i;
    if (autoidx < 0 && n > 0)
        autoidx = 0;
    if (json) {
        printf("{\"devices\": [");
        for (int i = 0; i < n; i++) {
            const faid_cl_device_info *v = &dev[i];
            printf("%s\n  {\"index\": %d, \"platform\": ", i ? "," : "", v->index);
            json_str(v->platform_name);
            printf(", \"name\": ");
            json_str(v->name);
            printf(", \"type\": \"%s\", \"version\": ", type_of(v));
            json_str(v->version);
            printf(", \"driver\": ");
            json_str(v->driver);
            printf(", \"global_mem_bytes\": %llu, \"local_mem_bytes\": %llu, "
                   "\"compute_units\": %u, \"max_work_group\": %zu, \"fp64\": %s, "
                   "\"auto\": %s}",
                   (unsigned long long)v->global_mem, (unsigned long long)v->local_mem,
                   (unsigned)v->compute_units, v->max_wg, v->has_fp64 ? "true" : "false",
                   i == autoidx ? "true" : "false");
        }
        printf("%s\n  {\"index\": \"ref\", \"platform\": \"faid\", \"name\": \"reference C\", "
               "\"type\": \"ref\", \"auto\": %s}\n]}\n",
               n ? "," : "", autoidx < 0 ? "true" : "false");
        return 0;
    }
    printf("%-5s %-5s %-28s %-40s %10s %4s %5s\n", "index", "type", "platform", "name", "memory",
           "CUs", "fp64");
    for (int i = 0; i < n; i++) {
        const faid_cl_device_info *v = &dev[i];
        printf("%-5d %-5s %-28.28s %-40.40s %7.1f GiB %4u %5s%s\n", v->index, type_of(v),
               v->platform_name, v->name, (double)v->global_mem / (1024.0 * 1024.0 * 1024.0),
               (unsigned)v->compute_units, v->has_fp64 ? "yes" : "no",
               i == autoidx ? "  (auto)" : "");
    }
    printf("%-5s %-5s %-28s %-40s %10s %4s %5s%s\n", "ref", "ref", "faid",
           "reference C (plain C, "
           "float64 sums)",
           "-", "1", "yes", autoidx < 0 ? "  (auto)" : "");
    return 0;
}
