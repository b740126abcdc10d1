/*
 * GPU memory scrubbing: before a GPU passes from one tenant to another, the
 * agent clears the device memory the previous job could have written, so
 * that no tenant reads another's data from freshly allocated memory.
 *
 * The scrubber is the agent itself run as `allot-agent --scrub GPU-UUID`
 * (scrub_main): a process of its own, so that no CUDA context ever lives in
 * the agent and a driver failure cannot take it down. It loads the driver
 * API with dlopen (`--cuda-lib`, default libcuda.so.1), finds the device by
 * UUID, allocates every byte it can in shrinking chunks, sets them to zero,
 * synchronises and frees them. It prints "scrubbed N MiB of M" and exits 0,
 * or prints the reason and exits 1.
 *
 * CUDA's ABI: only what is used is declared here, as in cuda.h (CUresult is
 * an int, CUdevice an int, CUcontext and CUdeviceptr opaque / 64-bit).
 */
#include "agent.h"

#include "allot/common.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct {
    char bytes[16];
} CUuuid;
#define CUDA_SUCCESS             0
#define CUDA_ERROR_OUT_OF_MEMORY 2

struct cuda {
    CUresult (*init)(unsigned);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*uuid)(CUuuid *, CUdevice);
    CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice);
    CUresult (*ctx_destroy)(CUcontext);
    CUresult (*mem_info)(size_t *, size_t *);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*sync)(void);
};

/* The first of the names the library exports. */
static void *sym(void *h, const char *a, const char *b)
{
    void *p = dlsym(h, a);

    return p || !b ? p : dlsym(h, b);
}

static void uuid_text(const CUuuid *u, char *out, size_t len)
{
    const unsigned char *b = (const unsigned char *)u->bytes;

    allot_fmt(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
              b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
              b[13], b[14], b[15]);
}

#define MAX_CHUNKS 4096

int scrub_main(const char *lib, const char *uuid)
{
    void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    struct cuda c;
    CUdeviceptr *chunks = NULL;
    CUcontext ctx = NULL;
    CUdevice dev = -1;
    size_t n_chunks = 0, chunk = (size_t)256 << 20, cleared = 0, free_b = 0, total = 0;
    int n = 0, rc = 1;

    if (!h) {
        printf("scrub: cannot load %s: %s\n", lib && *lib ? lib : "libcuda.so.1", dlerror());
        return 1;
    }
    c.init = sym(h, "cuInit", NULL);
    c.count = sym(h, "cuDeviceGetCount", NULL);
    c.get = sym(h, "cuDeviceGet", NULL);
    c.uuid = sym(h, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
    c.ctx_create = sym(h, "cuCtxCreate_v2", "cuCtxCreate");
    c.ctx_destroy = sym(h, "cuCtxDestroy_v2", "cuCtxDestroy");
    c.mem_info = sym(h, "cuMemGetInfo_v2", "cuMemGetInfo");
    c.alloc = sym(h, "cuMemAlloc_v2", "cuMemAlloc");
    c.memset8 = sym(h, "cuMemsetD8_v2", "cuMemsetD8");
    c.free = sym(h, "cuMemFree_v2", "cuMemFree");
    c.sync = sym(h, "cuCtxSynchronize", NULL);
    if (!c.init || !c.count || !c.get || !c.uuid || !c.ctx_create || !c.ctx_destroy ||
        !c.mem_info || !c.alloc || !c.memset8 || !c.free || !c.sync) {
        printf("scrub: the CUDA driver lacks a function it needs\n");
        goto out;
    }
    if (c.init(0) != CUDA_SUCCESS || c.count(&n) != CUDA_SUCCESS) {
        printf("scrub: cuInit failed\n");
        goto out;
    }
    for (int i = 0; i < n && dev < 0; i++) {
        CUdevice d;
        CUuuid u;
        char text[64];

        if (c.get(&d, i) == CUDA_SUCCESS && c.uuid(&u, d) == CUDA_SUCCESS) {
            uuid_text(&u, text, sizeof(text));
            if (!strcmp(text, uuid))
                dev = d;
        }
    }
    if (dev < 0) {
        printf("scrub: no CUDA device %s\n", uuid);
        goto out;
    }
    chunks = calloc(MAX_CHUNKS, sizeof(*chunks));
    if (!chunks || c.ctx_create(&ctx, 0, dev) != CUDA_SUCCESS) {
        printf("scrub: cannot create a context on %s\n", uuid);
        goto out;
    }
    c.mem_info(&free_b, &total);
    /* every byte the driver hands out, largest pieces first */
    while (n_chunks < MAX_CHUNKS && chunk >= ((size_t)2 << 20)) {
        CUdeviceptr p;
        CUresult r = c.alloc(&p, chunk);

        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            chunk /= 2;
            continue;
        }
        if (r != CUDA_SUCCESS || c.memset8(p, 0, chunk) != CUDA_SUCCESS) {
            if (r == CUDA_SUCCESS)
                c.free(p);
            printf("scrub: the driver failed while clearing memory\n");
            goto out;
        }
        chunks[n_chunks++] = p;
        cleared += chunk;
    }
    if (c.sync() != CUDA_SUCCESS) {
        printf("scrub: the clearing did not complete\n");
        goto out;
    }
    printf("scrubbed %zu MiB of %zu\n", cleared >> 20, total >> 20);
    rc = 0;
out:
    for (size_t i = 0; i < n_chunks; i++)
        c.free(chunks[i]);
    if (ctx)
        c.ctx_destroy(ctx);
    free(chunks);
    dlclose(h);
    return rc;
}
