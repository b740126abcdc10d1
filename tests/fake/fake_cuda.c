/*
 * A fake libcuda.so.1 for the agent's memory scrubbing tests: the CUDA
 * driver entry points the scrubber uses, with CUDA's ABI, over devices
 * described by environment variables:
 *   FAKE_CUDA_UUIDS    comma-separated device UUIDs ("GPU-xxxxxxxx-xxxx-...")
 *   FAKE_CUDA_MEM_MIB  memory of each device (default 1024)
 *   FAKE_CUDA_LOG      file to append "memset UUID BYTES" and "done UUID
 *                      CLEARED_MIB" lines to, so a test sees what was cleared
 *   FAKE_CUDA_FAIL     "memset": cuMemsetD8 fails (CUDA_ERROR_UNKNOWN)
 * One context at a time; allocations count against its device's memory and
 * fail with CUDA_ERROR_OUT_OF_MEMORY beyond it. Not thread-safe.
 */
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

#define CUDA_SUCCESS                0
#define CUDA_ERROR_INVALID_VALUE    1
#define CUDA_ERROR_OUT_OF_MEMORY    2
#define CUDA_ERROR_NOT_INITIALIZED  3
#define CUDA_ERROR_INVALID_CONTEXT  201
#define CUDA_ERROR_INVALID_DEVICE   101
#define CUDA_ERROR_UNKNOWN          999

#define MAX_DEV 16

static char uuids[MAX_DEV][64];
static int n_dev = -1;
static size_t mem_bytes;
static int cur = -1;                 /* device of the context, -1: none */
static size_t used, cleared;
static unsigned long long next_ptr = 0x100000;

static void load(void)
{
    const char *u = getenv("FAKE_CUDA_UUIDS"), *m = getenv("FAKE_CUDA_MEM_MIB");

    if (n_dev >= 0)
        return;
    n_dev = 0;
    mem_bytes = (size_t)(m ? strtoull(m, NULL, 10) : 1024) << 20;
    while (u && *u && n_dev < MAX_DEV) {
        size_t len = strcspn(u, ",");
        snprintf(uuids[n_dev++], sizeof(uuids[0]), "%.*s", (int)len, u);
        u += len;
        if (*u == ',')
            u++;
    }
}

/* Appends "WHAT UUID N" to FAKE_CUDA_LOG. */
static void note(const char *what, const char *uuid, unsigned long long n)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;

    if (f) {
        fprintf(f, "%s %s %llu\n", what, uuid, n);
        fclose(f);
    }
}

CUresult cuInit(unsigned flags);
CUresult cuInit(unsigned flags)
{
    (void)flags;
    load();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGetCount(int *n)
{
    if (n_dev < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    *n = n_dev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

/* "GPU-01234567-89ab-cdef-0123-456789abcdef" -> 16 bytes */
static CUresult parse_uuid(const char *s, CUuuid *u)
{
    int k = 0;

    if (strncmp(s, "GPU-", 4))
        return CUDA_ERROR_INVALID_VALUE;
    for (s += 4; *s && k < 16; s++) {
        unsigned v;
        if (*s == '-')
            continue;
        if (sscanf(s, "%2x", &v) != 1)
            return CUDA_ERROR_INVALID_VALUE;
        u->bytes[k++] = (char)v;
        s++;
    }
    return k == 16 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d);
CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d)
{
    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    return parse_uuid(uuids[d], u);
}

CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d);
CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d)
{
    return cuDeviceGetUuid_v2(u, d);
}

CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d);
CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d)
{
    (void)flags;
    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    cur = d;
    used = cleared = 0;
    *c = (CUcontext)(unsigned long)(d + 1);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext c);
CUresult cuCtxDestroy_v2(CUcontext c)
{
    if (cur < 0 || (unsigned long)c != (unsigned long)(cur + 1))
        return CUDA_ERROR_INVALID_CONTEXT;
    note("done", uuids[cur], (unsigned long long)(cleared >> 20));
    cur = -1;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total);
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *free_b = mem_bytes - used;
    *total = mem_bytes;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!size)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > mem_bytes - used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    used += size;
    *p = next_ptr;
    next_ptr += size;
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n);
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
    const char *fail = getenv("FAKE_CUDA_FAIL");

    (void)p;
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fail && !strcmp(fail, "memset"))
        return CUDA_ERROR_UNKNOWN;
    if (v == 0)
        cleared += n;
    note("memset", uuids[cur], (unsigned long long)n);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemFree_v2(CUdeviceptr p)
{
    (void)p;
    return cur < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize(void)
{
    return cur < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
