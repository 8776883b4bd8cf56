/* faid_clrec.c: a launch recorder for faid's OpenCL kernels, preloaded into any faid program
 * (LD_PRELOAD=build/lib/libfaid_clrec.so faid-bench ...), so that one launch of a kernel can be
 * replayed alone, on the same device or another runtime, by tests/bench/cl_replay.py.
 *
 * Why (issue 17, round 7): NVIDIA's Nsight Compute profiles CUDA launches only; run on
 * faid-bench it reports "No kernels were profiled" (one H100, 2026-11-27). NVIDIA's OpenCL
 * compiles a kernel to PTX, which the CUDA driver loads as well, so a recorded launch (its
 * program's binary, its arguments and the contents of its buffers) can be launched again through
 * CUDA under the profiler, and its stall reasons read, without changing faid.
 *
 * Environment (nothing is recorded unless FAID_CLREC_DIR and FAID_CLREC_KERNELS are set):
 *   FAID_CLREC_DIR      the folder the records go to: DIR/KERNEL/ per recorded kernel (created)
 *   FAID_CLREC_KERNELS  kernel names, comma-separated (exact names)
 *   FAID_CLREC_SKIP     launches of each named kernel to let pass before the one recorded
 *                       (default 0); one launch per kernel is recorded
 *
 * A record, DIR/KERNEL/:
 *   meta.json   kernel, work_dim, global, local (null: the runtime's choice), offset (null),
 *               build options, device, and per argument {"kind": "mem", "size": bytes} |
 *               {"kind": "scalar", "size": n, "hex": bytes} | {"kind": "local", "size": bytes}
 *   program.bin the program's binary for the launch's device (PTX text on NVIDIA's OpenCL)
 *   argNN.in    a buffer argument's contents before the launch, argNN.out after it
 * The recorded launch waits for its event list and its queue before it reads its buffers, and
 * for its own completion before it reads them again: it is timed by nothing here.
 *
 * A buffer argument is recognised as a handle this process created (clCreateBuffer,
 * clCreateSubBuffer); anything else of pointer size is a scalar. Errors (a folder that cannot be
 * written, a read that fails) are printed on stderr with the kernel and argument named, and the
 * launch itself always goes on. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_ARGS    64
#define MAX_VAL     64
#define MAX_KERNELS 256
#define MAX_MEMS    65536

typedef struct {
    int set;
    size_t size;
    int is_null; /* a local-memory argument: size bytes, no value */
    unsigned char val[MAX_VAL];
} rec_arg;

typedef struct {
    cl_kernel k;
    int nargs;
    rec_arg a[MAX_ARGS];
} rec_kernel;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static rec_kernel kernels[MAX_KERNELS];
static cl_mem mems[MAX_MEMS];
static int nmems;
static int launches[MAX_KERNELS]; /* per position in FAID_CLREC_KERNELS */
static int write_errors;          /* files of the record being written that failed */
static int done[MAX_KERNELS];

#define REAL(name) ((name##_fn)real_sym(#name))
typedef cl_mem (*clCreateBuffer_fn)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
typedef cl_mem (*clCreateSubBuffer_fn)(cl_mem, cl_mem_flags, cl_buffer_create_type, const void *,
                                       cl_int *);
typedef cl_int (*clSetKernelArg_fn)(cl_kernel, cl_uint, size_t, const void *);
typedef cl_int (*clEnqueueNDRangeKernel_fn)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                            const size_t *, const size_t *, cl_uint,
                                            const cl_event *, cl_event *);

static void *real_sym(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "faid_clrec: %s not found after the preload (%s)\n", name, dlerror());
        abort();
    }
    return p;
}

static void note_mem(cl_mem m)
{
    if (!m)
        return;
    pthread_mutex_lock(&mu);
    if (nmems < MAX_MEMS)
        mems[nmems++] = m;
    pthread_mutex_unlock(&mu);
}

static int is_mem(cl_mem m)
{
    int found = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nmems && !found; i++)
        found = mems[i] == m;
    pthread_mutex_unlock(&mu);
    return found;
}

cl_mem clCreateBuffer(cl_context c, cl_mem_flags f, size_t size, void *host, cl_int *err)
{
    cl_mem m = REAL(clCreateBuffer)(c, f, size, host, err);
    note_mem(m);
    return m;
}

cl_mem clCreateSubBuffer(cl_mem b, cl_mem_flags f, cl_buffer_create_type t, const void *info,
                         cl_int *err)
{
    cl_mem m = REAL(clCreateSubBuffer)(b, f, t, info, err);
    note_mem(m);
    return m;
}

static rec_kernel *kernel_slot(cl_kernel k)
{
    rec_kernel *free_slot = NULL;
    for (int i = 0; i < MAX_KERNELS; i++) {
        if (kernels[i].k == k)
            return &kernels[i];
        if (!kernels[i].k && !free_slot)
            free_slot = &kernels[i];
    }
    if (free_slot) {
        memset(free_slot, 0, sizeof *free_slot);
        free_slot->k = k;
    }
    return free_slot;
}

cl_int clSetKernelArg(cl_kernel k, cl_uint idx, size_t size, const void *value)
{
    cl_int rc = REAL(clSetKernelArg)(k, idx, size, value);
    if (rc != CL_SUCCESS || idx >= MAX_ARGS)
        return rc;
    pthread_mutex_lock(&mu);
    rec_kernel *rk = kernel_slot(k);
    if (rk) {
        rec_arg *a = &rk->a[idx];
        a->set = 1;
        a->size = size;
        a->is_null = value == NULL;
        if (value)
            memcpy(a->val, value, size < MAX_VAL ? size : MAX_VAL);
        if ((int)idx + 1 > rk->nargs)
            rk->nargs = (int)idx + 1;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* The position of name in FAID_CLREC_KERNELS, -1 when it is not there. */
static int wanted(const char *name)
{
    const char *list = getenv("FAID_CLREC_KERNELS");
    if (!list || !getenv("FAID_CLREC_DIR"))
        return -1;
    size_t n = strlen(name);
    int pos = 0;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return pos < MAX_KERNELS ? pos : -1;
        pos++;
        if (!e)
            break;
        p = e + 1;
    }
    return -1;
}

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
        fprintf(stderr, "faid_clrec: cannot write %s: %s\n", path, strerror(errno));
        write_errors++;
        return -1;
    }
    return 0;
}

/* Reads every buffer argument of rk into DIR/argNN.suffix. */
static void dump_mems(cl_command_queue q, const rec_kernel *rk, const char *dir, const char *kname,
                      const char *suffix)
{
    for (int i = 0; i < rk->nargs; i++) {
        const rec_arg *a = &rk->a[i];
        cl_mem m = NULL;
        if (!a->set || a->is_null || a->size != sizeof(cl_mem))
            continue;
        memcpy(&m, a->val, sizeof m);
        if (!is_mem(m))
            continue;
        size_t size = 0;
        if (clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL) != CL_SUCCESS)
            continue;
        void *buf = malloc(size ? size : 1);
        cl_int rc = buf ? clEnqueueReadBuffer(q, m, CL_TRUE, 0, size, buf, 0, NULL, NULL)
                        : CL_OUT_OF_HOST_MEMORY;
        char name[64];
        snprintf(name, sizeof name, "arg%02d.%s", i, suffix);
        if (rc != CL_SUCCESS)
            fprintf(stderr, "faid_clrec: %s argument %d: reading %zu bytes failed (%d)\n", kname, i,
                    size, (int)rc);
        else
            write_file(dir, name, buf, size);
        free(buf);
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_sizes(FILE *f, const size_t *v, cl_uint n)
{
    if (!v) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (cl_uint i = 0; i < n; i++)
        fprintf(f, "%s%zu", i ? ", " : "", v[i]);
    fputc(']', f);
}

static void write_meta(const char *dir, const char *kname, const rec_kernel *rk, cl_kernel k,
                       cl_command_queue q, cl_uint dim, const size_t *off, const size_t *gws,
                       const size_t *lws)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "faid_clrec: cannot write %s: %s\n", path, strerror(errno));
        write_errors++;
        return;
    }
    cl_device_id dev = NULL;
    cl_program prog = NULL;
    char devname[256] = "", opts[4096] = "";
    clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof devname - 1, devname, NULL);
    clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof prog, &prog, NULL);
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_OPTIONS, sizeof opts - 1, opts, NULL);
    fputs("{\n  \"kernel\": ", f);
    json_str(f, kname);
    fputs(",\n  \"device\": ", f);
    json_str(f, devname);
    fputs(",\n  \"build_options\": ", f);
    json_str(f, opts);
    fprintf(f, ",\n  \"work_dim\": %u,\n  \"global\": ", dim);
    json_sizes(f, gws, dim);
    fputs(",\n  \"local\": ", f);
    json_sizes(f, lws, dim);
    fputs(",\n  \"offset\": ", f);
    json_sizes(f, off, dim);
    fputs(",\n  \"args\": [", f);
    for (int i = 0; i < rk->nargs; i++) {
        const rec_arg *a = &rk->a[i];
        cl_mem m = NULL;
        if (a->size == sizeof m && !a->is_null)
            memcpy(&m, a->val, sizeof m);
        fprintf(f, "%s\n    ", i ? "," : "");
        if (!a->set)
            fputs("{\"kind\": \"unset\"}", f);
        else if (a->is_null)
            fprintf(f, "{\"kind\": \"local\", \"size\": %zu}", a->size);
        else if (m && is_mem(m)) {
            size_t size = 0;
            clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL);
            fprintf(f, "{\"kind\": \"mem\", \"size\": %zu}", size);
        } else {
            fprintf(f, "{\"kind\": \"scalar\", \"size\": %zu, \"hex\": \"", a->size);
            for (size_t b = 0; b < a->size && b < MAX_VAL; b++)
                fprintf(f, "%02x", a->val[b]);
            fputs("\"}", f);
        }
    }
    fputs("\n  ]\n}\n", f);
    fclose(f);

    /* the program's binary for this device */
    cl_uint ndev = 0;
    clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev, NULL);
    cl_device_id *devs = calloc(ndev ? ndev : 1, sizeof *devs);
    size_t *sizes = calloc(ndev ? ndev : 1, sizeof *sizes);
    unsigned char **bins = calloc(ndev ? ndev : 1, sizeof *bins);
    if (devs && sizes && bins &&
        clGetProgramInfo(prog, CL_PROGRAM_DEVICES, ndev * sizeof *devs, devs, NULL) == CL_SUCCESS &&
        clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, ndev * sizeof *sizes, sizes, NULL) ==
            CL_SUCCESS) {
        for (cl_uint i = 0; i < ndev; i++)
            bins[i] = malloc(sizes[i] ? sizes[i] : 1);
        if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, ndev * sizeof *bins, bins, NULL) ==
            CL_SUCCESS)
            for (cl_uint i = 0; i < ndev; i++)
                if (devs[i] == dev)
                    write_file(dir, "program.bin", bins[i], sizes[i]);
        for (cl_uint i = 0; i < ndev; i++)
            free(bins[i]);
    } else {
        fprintf(stderr, "faid_clrec: %s: the program's binary could not be read\n", kname);
    }
    free(devs);
    free(sizes);
    free(bins);
}

cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                              const size_t *gws, const size_t *lws, cl_uint nev,
                              const cl_event *evs, cl_event *ev)
{
    clEnqueueNDRangeKernel_fn real = REAL(clEnqueueNDRangeKernel);
    char kname[256] = "";
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof kname - 1, kname, NULL);
    const int pos = wanted(kname);
    if (pos < 0)
        return real(q, k, dim, off, gws, lws, nev, evs, ev);
    pthread_mutex_lock(&mu);
    const char *sv = getenv("FAID_CLREC_SKIP");
    const int skip = sv ? atoi(sv) : 0;
    const int record = !done[pos] && launches[pos]++ == skip;
    if (record)
        done[pos] = 1;
    pthread_mutex_unlock(&mu);
    if (!record)
        return real(q, k, dim, off, gws, lws, nev, evs, ev);

    /* everything the launch reads is written before it reads it */
    if (nev)
        clWaitForEvents(nev, evs);
    clFinish(q);
    char dir[3800];
    snprintf(dir, sizeof dir, "%s/%s", getenv("FAID_CLREC_DIR"), kname);
    /* the folder and its parents, as mkdir -p */
    for (char *sl = strchr(dir + 1, '/');; sl = strchr(sl + 1, '/')) {
        if (sl)
            *sl = 0;
        if (mkdir(dir, 0755) && errno != EEXIST)
            fprintf(stderr, "faid_clrec: cannot create %s: %s\n", dir, strerror(errno));
        if (!sl)
            break;
        *sl = '/';
    }
    static rec_kernel snap; /* one recorded launch at a time (the recorder's own lock below) */
    static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&rec_mu);
    pthread_mutex_lock(&mu);
    rec_kernel *rk = kernel_slot(k);
    if (rk)
        snap = *rk;
    pthread_mutex_unlock(&mu);
    if (!rk) {
        pthread_mutex_unlock(&rec_mu);
        fprintf(stderr, "faid_clrec: %s: more than %d kernels, its arguments were not kept\n",
                kname, MAX_KERNELS);
        return real(q, k, dim, off, gws, lws, nev, evs, ev);
    }
    write_meta(dir, kname, &snap, k, q, dim, off, gws, lws);
    dump_mems(q, &snap, dir, kname, "in");
    cl_int rc = real(q, k, dim, off, gws, lws, nev, evs, ev);
    clFinish(q);
    dump_mems(q, &snap, dir, kname, "out");
    if (write_errors)
        fprintf(stderr,
                "faid_clrec: recording %s (launch %d) in %s failed: %d file(s) not written\n",
                kname, skip, dir, write_errors);
    else
        fprintf(stderr, "faid_clrec: recorded %s (launch %d) in %s\n", kname, skip, dir);
    write_errors = 0;
    pthread_mutex_unlock(&rec_mu);
    return rc;
}
