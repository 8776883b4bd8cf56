/* Unit tests of the engine's stage plumbing: kernel signatures parsed for named arguments
 * (faid_kernel_parse_args on the real kernels and on odd spellings), named binding and the launch
 * check on an OpenCL device (PoCL; skipped without one), the launch plans' builders and their
 * overflow check, and the resource table's layout of output segments, slot entries and
 * aliases (host mode, as on the reference device). */
#include "faid_test.h"

#include "faid_cl.h"
#include "faid_config.h"
#include "faid_engine.h"
#include "faid_progcache.h"
#include "faid_restab.h"
#include "faid_setup.h"
#include "faid_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_parse(void)
{
    faid_kernel k;
    const char *src = "float helper(int a, int b);\n"
                      "// faid_x(int not_this)\n"
                      "__kernel void faid_x(__global const float *in /* data */, int n,\n"
                      "                     __local float2 *scratch, uint raw_off)\n{ }\n"
                      "__kernel void faid_y(void) {}\n";
    CHECK(faid_kernel_parse_args(src, strlen(src), "faid_x", &k) == 0);
    CHECK(k.nargs == 4);
    CHECK(strcmp(k.arg[0], "in") == 0 && strcmp(k.arg[1], "n") == 0);
    CHECK(strcmp(k.arg[2], "scratch") == 0 && strcmp(k.arg[3], "raw_off") == 0);
    CHECK(faid_kernel_parse_args(src, strlen(src), "faid_z", &k) != 0);
    CHECK(faid_kernel_parse_args(src, strlen(src), "helper", &k) != 0); /* not a kernel */

    faid_diag d = {0};
    size_t len = 0;
    char *txt = faid_cl_source("process/integrate.cl", &len, &d);
    CHECK(txt != NULL);
    if (!txt)
        return;
    CHECK(faid_kernel_parse_args(txt, len, "faid_rows_raw", &k) == 0);
    CHECK(k.nargs == 21);
    CHECK(strcmp(k.arg[0], "raw") == 0 && strcmp(k.arg[1], "raw_off") == 0);
    CHECK(strcmp(k.arg[k.nargs - 1], "sum_stride") == 0);
    CHECK(faid_kernel_parse_args(txt, len, "faid_integrate_raw", &k) == 0);
    CHECK(strcmp(k.arg[k.nargs - 2], "scratch") == 0);
    free(txt);
}

static void test_bind(void)
{
    faid_diag d = {0};
    faid_cl_device_info info;
    if (faid_cl_select("cpu", &info, &d)) {
        fprintf(stderr, "SKIP OpenCL part: %s\n", d.msg);
        return;
    }
    faid_cl_ctx *ctx = faid_cl_ctx_new(&info, 1, &d);
    CHECK(ctx != NULL);
    faid_progcache *pc = faid_progcache_new(ctx);
    static const char *const files[] = {"process/preprocess.cl", "process/integrate.cl"};
    faid_kernel *k = NULL, *k2 = NULL;
    CHECK(faid_progcache_kernel(pc, files, 2, "-D RAW_CODE=4 -D EM=1 -D NBATCH=1",
                                "faid_preprocess", &k, &d) == 0);
    CHECK(k && k->nargs == 10);
    CHECK(faid_progcache_kernel(pc, files, 2, "-D RAW_CODE=4 -D EM=1 -D NBATCH=1",
                                "faid_preprocess", &k2, &d) == 0);
    CHECK(k2 == k); /* cached */
    CHECK(faid_karg_int(k, "no_such_arg", 1, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "no_such_arg") != NULL);
    CHECK(faid_karg_int(k, "npix", 16, &d) == 0);
    CHECK(faid_karg_has(k, "raw_off") && !faid_karg_has(k, "nbins"));
    faid_diag_clear(&d);
    CHECK(faid_kernel_launch(ctx->queue, k, 16, 16, NULL, &d) == FAID_EINVAL);
    CHECK(strstr(d.msg, "without argument raw") != NULL);
    CHECK(faid_progcache_kernel(pc, files, 2, "-D RAW_CODE=4 -D EM=1 -D NBATCH=1", "faid_nope", &k2,
                                &d) != 0);

    faid_progcache_destroy(&pc);
    CHECK(pc == NULL);
    faid_cl_ctx_destroy(&ctx);
}

static void test_plan(void)
{
    faid_diag d = {0};
    faid_plan *p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    if (!p)
        return;
    static const char *const files[] = {"process/preprocess.cl"};
    faid_launch *l = faid_plan_add(p, files, 1, "-D X=1", "faid_k");
    CHECK(l != NULL && p->n == 1 && strcmp(l->opts, "-D X=1") == 0 && l->nfiles == 1);
    faid_pa_buf(l, "in", "raw");
    faid_pa_int(l, "off", 5, 7);
    faid_pa_uint(l, "uoff", 3, 2);
    faid_pa_float(l, "f", 0.5f);
    faid_pa_local(l, "scratch", 40);
    faid_pa_nframes(l, "n");
    CHECK(l->narg == 6 && l->arg[0].kind == FAID_PA_BUF && strcmp(l->arg[0].buf, "raw") == 0);
    CHECK(l->arg[1].v.i == 5 && l->arg[1].step == 7 && l->arg[2].v.u == 3);
    CHECK(l->arg[3].v.f == 0.5f && l->arg[4].local == 40 && l->arg[5].kind == FAID_PA_NFRAMES);
    CHECK(faid_plan_check(p, "test", &d) == 0);
    for (int i = 0; i < FAID_PLAN_ARGS; i++)
        faid_pa_int(l, "many", i, 0);
    CHECK(faid_plan_check(p, "test", &d) == FAID_EINVAL && strstr(d.msg, "faid_k") != NULL);
    l->narg = 0;
    CHECK(faid_plan_add(p, files, 5, "", "too_many_files") == NULL);
    CHECK(faid_plan_check(p, "test", &d) == FAID_EINVAL && strstr(d.msg, "launches") != NULL);
    p->n = 0;
    for (int i = 0; i < FAID_LAUNCH_MAX; i++)
        CHECK(faid_plan_add(p, files, 1, "", "k") != NULL);
    CHECK(faid_plan_add(p, files, 1, "", "k") == NULL);
    CHECK(faid_plan_check(p, "test", &d) == FAID_EINVAL);
    free(p);

    faid_dcmds c = {0};
    for (int i = 0; i < FAID_DCMD_MAX; i++)
        CHECK(faid_dcmd_add(&c, FAID_DCMD_WRITE, i) != NULL);
    CHECK(faid_dcmd_add(&c, FAID_DCMD_WRITE, 0) == NULL && c.n > FAID_DCMD_MAX); /* refused */
}

static void test_restab(void)
{
    faid_diag d = {0};
    faid_restab *rt = faid_restab_new(NULL);
    CHECK(rt != NULL);
    const float one = 1.0f;
    CHECK(faid_restab_static(rt, "one", sizeof one, &one, &d) == 0);
    CHECK(faid_restab_alias(rt, "dark", "one", &d) == 0);
    CHECK(*(float *)faid_restab_host(rt, "dark", 0) == 1.0f);
    CHECK(faid_restab_alias(rt, "x", "missing", &d) == FAID_EINVAL);
    CHECK(faid_restab_declare(rt, "raw", 1000, 4096, FAID_RES_DEVICE, &d) == 0);
    CHECK(faid_restab_declare(rt, "raw", 10, 64, FAID_RES_DEVICE, &d) == FAID_EINVAL);
    CHECK(faid_restab_declare(rt, "odd", 10, 3, FAID_RES_DEVICE, &d) == FAID_EINVAL);
    CHECK(faid_restab_output(rt, "flag", 1, 1, &d) == 0);
    CHECK(faid_restab_output(rt, "far", 40, 0, &d) == 0);
    CHECK(faid_restab_output(rt, "prof", 20, 1, &d) == 0);
    const uint64_t gen = faid_restab_generation(rt);
    CHECK(faid_restab_slots(rt, 2, 3, &d) == 0);
    CHECK(faid_restab_generation(rt) != gen); /* a device's resolved plans are stale now */
    CHECK(faid_restab_lane_bytes(rt, "raw") == 4096);
    CHECK(faid_restab_host(rt, "raw", 1) != NULL && faid_restab_host(rt, "raw", 2) == NULL);
    int off, stride;
    CHECK(faid_restab_out(rt, "flag", &off, &stride) == 0 && off == 0 && stride == 32);
    CHECK(faid_restab_out(rt, "prof", &off, &stride) == 0 && off == 1 && stride == 32);
    CHECK(faid_restab_out(rt, "far", &off, &stride) == 0 && off == 3 * 32 && stride == 40);
    CHECK(faid_restab_out(rt, "nope", &off, &stride) == -1);
    CHECK(faid_restab_out_stride(rt) == 32);
    float *out = faid_restab_host(rt, "out", 1);
    CHECK(out != NULL && out[3 * 32 + 3 * 40 - 1] == 0.0f); /* zeroed, whole extent */
    /* no declarations once the slots exist */
    CHECK(faid_restab_output(rt, "late", 1, 1, &d) == FAID_EINVAL);
    faid_restab_destroy(&rt);
    CHECK(rt == NULL);
}

/* A segment read back in part (the daemon's lean cake) lies last in the lane block, whatever the
 * declaration order, and only the prefix up to its read part comes back; one per table. */
static void test_restab_part(void)
{
    faid_diag d;
    faid_restab *rt = faid_restab_new(NULL);
    CHECK(faid_restab_output(rt, "a", 4, 1, &d) == 0);
    CHECK(faid_restab_output_part(rt, "cake", 40, 10, &d) == 0);
    CHECK(faid_restab_output_part(rt, "cake2", 40, 10, &d) == FAID_EINVAL);
    CHECK(faid_restab_output(rt, "b", 3, 1, &d) == 0);
    CHECK(faid_restab_output(rt, "far", 5, 0, &d) == 0);
    CHECK(faid_restab_slots(rt, 1, 2, &d) == 0);
    int off = 0, stride = 0;
    CHECK(faid_restab_out(rt, "a", &off, &stride) == 0 && off == 0 && stride == 48);
    CHECK(faid_restab_out(rt, "b", &off, &stride) == 0 && off == 4);
    CHECK(faid_restab_out(rt, "cake", &off, &stride) == 0 && off == 7 && stride == 48);
    CHECK(faid_restab_out_stride(rt) == 48);
    CHECK(faid_restab_out_read(rt) == 17);
    faid_restab_destroy(&rt);
    /* read in full (read >= floats): an ordinary read-back segment, the whole block comes back */
    rt = faid_restab_new(NULL);
    CHECK(faid_restab_output_part(rt, "cake", 40, 40, &d) == 0);
    CHECK(faid_restab_output(rt, "b", 3, 1, &d) == 0);
    CHECK(faid_restab_slots(rt, 1, 1, &d) == 0);
    CHECK(faid_restab_out(rt, "cake", &off, &stride) == 0 && off == 0);
    CHECK(faid_restab_out_read(rt) == faid_restab_out_stride(rt));
    faid_restab_destroy(&rt);
}

/* The table takes as many buffers as the stages declare (it held 32, and peakfinder8 with a cake
 * declares 33 on OpenCL), refuses a name too long by name, and indices stay usable as it grows. */
static void test_restab_grows(void)
{
    faid_diag d = {0};
    faid_restab *rt = faid_restab_new(NULL);
    char name[40];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "b%d", i);
        CHECK_MSG(faid_restab_static(rt, name, sizeof(float), &(float){(float)i}, &d) == 0, "%s",
                  d.msg);
    }
    const float *b0 = faid_restab_host(rt, "b0", 0), *b99 = faid_restab_host(rt, "b99", 0);
    CHECK(b0 && *b0 == 0.0f);
    CHECK(b99 && *b99 == 99.0f);
    CHECK(faid_restab_static(rt, "a_name_of_thirty_two_characters_", 4, NULL, &d) == FAID_ERANGE);
    CHECK_MSG(strstr(d.msg, "a_name_of_thirty_two_characters_ too long"), "%s", d.msg);
    faid_restab_destroy(&rt);
}

/* peakfinder8 with a 2D cake sets up on the OpenCL device (PoCL; skipped without one) and on the
 * reference device: it failed with "buffer table full or name pk.flag too long". */
static void test_pf8_cake_setup(void)
{
    static const char yaml[] =
        "detector: {preset: null, shape: [60, 70], pixel_size: [1.0e-4, 1.0e-4]}\n"
        "geometry: {dist: 0.05}\n"
        "integration: {npt: 30, npt_azim: 12}\n"
        "peaks: {algorithm: peakfinder8, max_num_peaks: 8}\n";
    faid_config c;
    faid_diag d = {0};
    faid_config_default(&c);
    CHECK_MSG(faid_config_load_string(yaml, sizeof yaml - 1, "test", &c, &d) == 0, "%s", d.msg);
    faid_setup *s = faid_setup_new(&c, 1, &d);
    CHECK_MSG(s != NULL, "%s", d.msg);
    if (!s)
        return;
    faid_engine *ref = faid_engine_new(s, "ref", &d);
    CHECK_MSG(ref != NULL, "ref: %s", d.msg);
    faid_engine_destroy(&ref);
    faid_cl_device_info info;
    if (faid_cl_select("cpu", &info, &d)) {
        fprintf(stderr, "SKIP OpenCL part: %s\n", d.msg);
    } else {
        faid_engine *cl = faid_engine_new(s, "cpu", &d);
        CHECK_MSG(cl != NULL, "cpu: %s", d.msg);
        faid_engine_destroy(&cl);
    }
    faid_setup_destroy(&s);
}

int main(void)
{
    RUN(test_parse());
    RUN(test_bind());
    RUN(test_plan());
    RUN(test_restab());
    RUN(test_restab_part());
    RUN(test_restab_grows());
    RUN(test_pf8_cake_setup());
    CHECK(faid_stage_id(&faid_stage_decode) == 0 && faid_stage_id(&faid_stage_integrate) == 1);
    return faid_test_finish();
}
