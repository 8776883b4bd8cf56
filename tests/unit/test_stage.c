/* Unit tests of the engine's stage plumbing: kernel signatures parsed for named arguments
 * (faid_kernel_parse_args on the real kernels and on odd spellings), named binding and the launch
 * check on an OpenCL device (PoCL; skipped without one), the stages' per-setup kernel cache
 * (faid_stage_kslot), and the resource table's layout of output segments, slot entries and
 * aliases (host mode, as on the reference device). */
#include "faid_test.h"

#include "faid_cl.h"
#include "faid_progcache.h"
#include "faid_restab.h"
#include "faid_stage.h"

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

    /* the per-setup stage kernel cache: kept while the program cache's generation holds, emptied
     * when it changes (the stored pointer would dangle after faid_progcache_clear) */
    faid_stage_env env = {.ctx = ctx, .progs = pc};
    faid_stage_res *res = calloc(1, sizeof *res);
    CHECK(res != NULL);
    if (res) {
        faid_kernel **slot = faid_stage_kslot(&env, res, 1, 7);
        CHECK(slot != NULL && *slot == NULL);
        if (slot)
            *slot = k;
        CHECK(faid_stage_kslot(&env, res, 1, 7) == slot && *slot == k);
        CHECK(*faid_stage_kslot(&env, res, 2, 7) == NULL); /* per stage */
        CHECK(faid_stage_kslot(&env, res, 1, FAID_STAGE_KC) == NULL);
        CHECK(faid_stage_kslot(&env, res, FAID_STAGE_MAX, 0) == NULL);
        CHECK(faid_stage_kslot(&env, res, 1, -1) == NULL);
        faid_progcache_clear(pc);
        slot = faid_stage_kslot(&env, res, 1, 7);
        CHECK(slot != NULL && *slot == NULL);
        free(res);
    }
    faid_progcache_destroy(&pc);
    CHECK(pc == NULL);
    faid_cl_ctx_destroy(&ctx);
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
    CHECK(faid_restab_slots(rt, 2, 3, &d) == 0);
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

int main(void)
{
    RUN(test_parse());
    RUN(test_bind());
    RUN(test_restab());
    RUN(test_restab_part());
    CHECK(faid_stage_id(&faid_stage_decode) == 0 && faid_stage_id(&faid_stage_integrate) == 1);
    return faid_test_finish();
}
