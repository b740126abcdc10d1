/*
 * A fake libcuda.so.1 for the agent's memory scrubbing tests: the CUDA
 * driver entry points the scrubber uses, with CUDA's ABI, over devices
 * described by environment variables:
 *   FAKE_CUDA_UUIDS    comma-separated device UUIDs ("GPU-xxxxxxxx-xxxx-...")
 *   FAKE_CUDA_MEM_MIB  memory of each device (default 1024)
 *   FAKE_CUDA_LOG      file to append "memset UUID BYTES" and "done UUID
 *                      CLEARED_MIB" lines to, so a test sees what was cleared
 *   FAKE_CUDA_FAIL     "memset": cuMemsetD8 fails (CUDA_ERROR_UNKNOWN)
 *   FAKE_CUDA_PITCH    row alignment of cuMemAllocPitch (default 1024)
 *   FAKE_CUDA_KERNEL_US how long each kernel or graph launch keeps the GPU
 *                      busy (default 100; read at the first launch or
 *                      event); launches run one after another
 *                      on one timeline, events complete when it reaches them
 *   FAKE_CUDA_TIMELINE a file: the GPU's timeline is shared by every process
 *                      that names it (one GPU time-shared by several jobs);
 *                      otherwise each process has its own
 *   FAKE_CUDA_PROC     "private": cuGetProcAddress answers cuMemAlloc with a
 *                      function no symbol names (as drivers may), to test
 *                      the shim's lookup by name
 * One context at a time; allocations count against its device's memory and
 * fail with CUDA_ERROR_OUT_OF_MEMORY beyond it. Only allocations and frees
 * are thread-safe (one mutex); contexts are not.
 *
 * For liballot-cuda.so's tests (tests/shim) it also has every allocation
 * family the shim counts (cuMemAlloc v1/v2, pitch, managed, async, pool,
 * VMM cuMemCreate, arrays) with their frees, each allocation remembered so
 * a free gives its bytes back and a free of an unknown pointer fails with
 * CUDA_ERROR_INVALID_VALUE; cuGetProcAddress(_v2) answering from its own
 * table; and fake_cuda_* helpers a test calls to see the driver's books.
 * VMM handles are freed once no reference and no mapping is left, as
 * NVIDIA's driver frees them (fake_cuda_vmm.inc).
 *
 * Memory pools: a default pool per device and created ones
 * (cuMemPoolCreate), each with its reserved and used bytes and its release
 * threshold (CU_MEMPOOL_ATTR_*, read and set with cuMemPoolGet/SetAttribute).
 * A stream-ordered allocation comes out of the pool's reserved but unused
 * bytes first and takes device memory only for the rest; a free gives its
 * bytes back to the pool, which keeps them reserved: a pool whose threshold
 * is 0 releases them at once (the real driver: at the next
 * synchronisation), a raised threshold keeps them until cuCtxSynchronize or
 * cuStreamSynchronize (down to the threshold) or cuMemPoolTrimTo. A NULL
 * pool is the device's current pool (cuDeviceGetMemPool).
 * Build it with -Bsymbolic, as NVIDIA's driver is: its calls to itself must
 * not reach the shim.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct {
    char bytes[16];
} CUuuid;

#define CUDA_SUCCESS               0
#define CUDA_ERROR_INVALID_VALUE   1
#define CUDA_ERROR_OUT_OF_MEMORY   2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_INVALID_DEVICE  101
#define CUDA_ERROR_NOT_FOUND       500
#define CUDA_ERROR_UNKNOWN         999

#define MAX_DEV 16

static char uuids[MAX_DEV][64];
static int n_dev = -1;
static size_t mem_bytes;
static int cur = -1; /* device of the context, -1: none */
static int ctx_gen;  /* contexts created so far (a new one has fresh limits) */
static size_t used, cleared;
static unsigned long long next_ptr = 0x100000;

/* the live allocations, so frees give their bytes back */
#define MAX_ALLOCS 8192
static struct {
    unsigned long long key;
    size_t size;
    char kind; /* 'p' pointer, 'h' VMM handle, 'a' array */
    int pool;  /* the pool it came out of, -1 none */
    int refs;  /* 'h': references to the handle (create, retain, import) */
    int maps;  /* 'h': mappings of it (cuMemMap) */
} allocs[MAX_ALLOCS];
static int n_allocs;
static unsigned long long next_handle = 1;

/* VMM mappings (cuMemMap): an address range backed by a handle's memory */
#define MAX_MAPS 1024
static struct {
    unsigned long long va, size, handle;
} maps[MAX_MAPS];
static int n_maps;
static unsigned long long next_va = 0x7f0000000000ull;

/* Takes size bytes of the context's device; *key gets a fresh pointer,
 * handle or array of kind. */
static CUresult fake_alloc_locked(unsigned long long *key, size_t size, char kind)
{
    if (!key)
        return CUDA_ERROR_INVALID_VALUE;
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!size)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > mem_bytes - used || n_allocs == MAX_ALLOCS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    used += size;
    if (kind == 'p') {
        *key = next_ptr;
        next_ptr += (size + 255) & ~(size_t)255;
    } else {
        *key = next_handle++ * 16;
    }
    allocs[n_allocs].key = *key;
    allocs[n_allocs].size = size;
    allocs[n_allocs].pool = -1;
    allocs[n_allocs].refs = kind == 'h';
    allocs[n_allocs].maps = 0;
    allocs[n_allocs++].kind = kind;
    return CUDA_SUCCESS;
}

/* Memory pools: [0, MAX_DEV) the devices' default pools, then created ones. */
#define MAX_POOLS (MAX_DEV + 16)
static struct fake_pool {
    int live, dev;
    size_t reserved, used, threshold;
} pools[MAX_POOLS];
static int cur_pool[MAX_DEV]; /* cuDeviceSetMemPool's choice + 1, 0 the default */

/* Gives back what pool i keeps reserved beyond its use and keep bytes. */
static void pool_release(int i, size_t keep)
{
    struct fake_pool *p = &pools[i];
    size_t floor = p->used > keep ? p->used : keep;

    if (p->reserved > floor) {
        used -= p->reserved - floor;
        p->reserved = floor;
    }
}

/* Gives back the allocation key of kind; CUDA_ERROR_INVALID_VALUE if unknown. */
static CUresult fake_free_locked(unsigned long long key, char kind)
{
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < n_allocs; i++) {
        if (allocs[i].key == key && allocs[i].kind == kind) {
            int pool = allocs[i].pool;

            if (pool < 0) {
                used -= allocs[i].size;
            } else {
                /* back to its pool, which keeps it reserved */
                pools[pool].used -= allocs[i].size;
                if (!pools[pool].threshold)
                    pool_release(pool, 0);
            }
            allocs[i] = allocs[--n_allocs];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
#include "fake_cuda_procs.inc"

static CUresult fake_alloc(unsigned long long *key, size_t size, char kind)
{
    CUresult r;

    pthread_mutex_lock(&alloc_lock);
    r = fake_alloc_locked(key, size, kind);
    if (r == CUDA_SUCCESS)
        procs_publish(cur, used);
    pthread_mutex_unlock(&alloc_lock);
    return r;
}

static CUresult fake_free(unsigned long long key, char kind)
{
    CUresult r;

    pthread_mutex_lock(&alloc_lock);
    r = fake_free_locked(key, kind);
    if (r == CUDA_SUCCESS)
        procs_publish(cur, used);
    pthread_mutex_unlock(&alloc_lock);
    return r;
}

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

    if (strncmp(s, "GPU-", 4) != 0)
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
    ctx_gen++;
    used = cleared = 0;
    n_allocs = n_maps = 0;
    for (int i = 0; i < MAX_POOLS; i++)
        pools[i].reserved = pools[i].used = 0;
    *c = (CUcontext)((unsigned long)d + 1);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext c);
CUresult cuCtxDestroy_v2(CUcontext c)
{
    if (cur < 0 || (unsigned long)c != (unsigned long)cur + 1)
        return CUDA_ERROR_INVALID_CONTEXT;
    note("done", uuids[cur], (unsigned long long)(cleared >> 20));
    cur = -1;
    used = 0; /* a context's memory dies with it, pools' reserves too */
    n_allocs = n_maps = 0;
    for (int i = 0; i < MAX_POOLS; i++)
        pools[i].reserved = pools[i].used = 0;
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
    return fake_alloc(p, size, 'p');
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

/* Pools above their release threshold give back what they do not use. */
static CUresult synchronize(void)
{
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&alloc_lock);
    for (int i = 0; i < MAX_POOLS; i++)
        if (pools[i].reserved > pools[i].threshold)
            pool_release(i, pools[i].threshold);
    pthread_mutex_unlock(&alloc_lock);
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize(void)
{
    return synchronize();
}

CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemFree_v2(CUdeviceptr p)
{
    return fake_free(p, 'p');
}

/* ---- what liballot-cuda.so's tests use beyond the scrubber ---------------- */

/* The driver's own books, for tests: bytes in use on the context's device. */
size_t fake_cuda_used(void);
size_t fake_cuda_used(void)
{
    return used;
}

/* An allocation no hooked function made (the shim cannot know it). */
CUresult fake_cuda_alloc_raw(CUdeviceptr *p, size_t size);
CUresult fake_cuda_alloc_raw(CUdeviceptr *p, size_t size)
{
    return fake_alloc(p, size, 'p');
}

CUresult cuCtxGetDevice(CUdevice *d);
CUresult cuCtxGetDevice(CUdevice *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *d = cur;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *c);
CUresult cuCtxGetCurrent(CUcontext *c)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    *c = cur < 0 ? NULL : (CUcontext)((unsigned long)cur + 1);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext c);
CUresult cuCtxDestroy(CUcontext c)
{
    return cuCtxDestroy_v2(c);
}

/* References to the primary context: the last release frees it, as a
 * reset does. */
static int primary_refs;

/* The primary context: the one context of the fake, kept when current. */
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    primary_refs++;
    if (cur == d) {
        *c = (CUcontext)((unsigned long)d + 1);
        return CUDA_SUCCESS;
    }
    return cuCtxCreate_v2(c, 0, d);
}

/* Frees everything the primary context of d held. */
CUresult cuDevicePrimaryCtxReset_v2(CUdevice d);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice d)
{
    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (cur == d) {
        cur = -1;
        used = 0;
        n_allocs = n_maps = 0;
        for (int i = 0; i < MAX_POOLS; i++)
            pools[i].reserved = pools[i].used = 0;
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (primary_refs > 0 && --primary_refs == 0)
        return cuDevicePrimaryCtxReset_v2(d);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d);
CUresult cuDevicePrimaryCtxRelease(CUdevice d)
{
    return cuDevicePrimaryCtxRelease_v2(d);
}

CUresult cuCtxCreate(CUcontext *c, unsigned flags, CUdevice d);
CUresult cuCtxCreate(CUcontext *c, unsigned flags, CUdevice d)
{
    return cuCtxCreate_v2(c, flags, d);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = mem_bytes;
    return CUDA_SUCCESS;
}

/* the 32-bit API of CUDA < 3.2 */
CUresult cuMemAlloc(unsigned int *p, unsigned int size);
CUresult cuMemAlloc(unsigned int *p, unsigned int size)
{
    unsigned long long k;
    CUresult r;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    r = fake_alloc(&k, size, 'p');
    if (r == CUDA_SUCCESS)
        *p = (unsigned int)k;
    return r;
}

CUresult cuMemFree(unsigned int p);
CUresult cuMemFree(unsigned int p)
{
    return fake_free(p, 'p');
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height,
                            unsigned elem);
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height,
                            unsigned elem)
{
    const char *a = getenv("FAKE_CUDA_PITCH");
    size_t align = a ? strtoull(a, NULL, 10) : 1024;
    size_t row;

    (void)elem;
    if (!p || !pitch || !width || !height || !align)
        return CUDA_ERROR_INVALID_VALUE;
    row = (width + align - 1) / align * align;
    if (height > (size_t)-1 / row)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pitch = row;
    return fake_alloc(p, row * height, 'p');
}

CUresult cuMemAllocPitch(unsigned *p, unsigned *pitch, unsigned width, unsigned height,
                         unsigned elem);
CUresult cuMemAllocPitch(unsigned *p, unsigned *pitch, unsigned width, unsigned height,
                         unsigned elem)
{
    CUdeviceptr p64;
    size_t pitch64;
    CUresult r;

    if (!p || !pitch)
        return CUDA_ERROR_INVALID_VALUE;
    r = cuMemAllocPitch_v2(&p64, &pitch64, width, height, elem);
    if (r == CUDA_SUCCESS) {
        *p = (unsigned)p64;
        *pitch = (unsigned)pitch64;
    }
    return r;
}

CUresult cuDeviceTotalMem(unsigned *bytes, CUdevice d);
CUresult cuDeviceTotalMem(unsigned *bytes, CUdevice d)
{
    size_t b;
    CUresult r;

    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    r = cuDeviceTotalMem_v2(&b, d);
    if (r == CUDA_SUCCESS)
        *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned)b;
    return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *p, size_t size, unsigned flags);
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t size, unsigned flags)
{
    (void)flags;
    return fake_alloc(p, size, 'p');
}

typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

/* Pool of handle h (NULL: the current device's current pool), -1 if none. */
static int pool_index(CUmemoryPool h)
{
    long i;

    if (!h) {
        if (cur < 0)
            return -1;
        i = cur_pool[cur] > 0 ? cur_pool[cur] - 1 : cur;
        pools[i].live = 1;
        pools[i].dev = cur;
        return (int)i;
    }
    i = (struct fake_pool *)(void *)h - pools;
    return i >= 0 && i < MAX_POOLS && pools[i].live ? (int)i : -1;
}

/* A stream-ordered allocation out of pool (see the top). */
static CUresult pool_alloc(CUdeviceptr *ptr, size_t size, CUmemoryPool h)
{
    CUresult r = CUDA_SUCCESS;
    struct fake_pool *p;
    size_t grow;
    int i;

    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&alloc_lock);
    i = pool_index(h);
    if (i < 0) {
        r = cur < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    p = &pools[i];
    /* the pool's spare bytes first: only the rest is new device memory */
    grow = size > p->reserved - p->used ? size - (p->reserved - p->used) : 0;
    if (grow > mem_bytes - used || n_allocs == MAX_ALLOCS) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    used += grow;
    p->reserved += grow;
    p->used += size;
    *ptr = next_ptr;
    next_ptr += (size + 255) & ~(size_t)255;
    allocs[n_allocs].key = *ptr;
    allocs[n_allocs].size = size;
    allocs[n_allocs].pool = i;
    allocs[n_allocs++].kind = 'p';
out:
    pthread_mutex_unlock(&alloc_lock);
    return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *p, size_t size, CUstream s);
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t size, CUstream s)
{
    (void)s;
    return pool_alloc(p, size, NULL);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t size, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t size, CUstream s)
{
    (void)s;
    return pool_alloc(p, size, NULL);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s)
{
    (void)s;
    return pool_alloc(p, size, pool);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s)
{
    (void)s;
    return pool_alloc(p, size, pool);
}

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    (void)s;
    return fake_free(p, 'p');
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
    (void)s;
    return fake_free(p, 'p');
}

CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamSynchronize(CUstream s)
{
    (void)s;
    return synchronize();
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    pools[d].live = 1;
    pools[d].dev = d;
    *pool = (CUmemoryPool)(void *)&pools[d];
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice d);
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice d)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (cur_pool[d] > 0) {
        *pool = (CUmemoryPool)(void *)&pools[cur_pool[d] - 1];
        return CUDA_SUCCESS;
    }
    return cuDeviceGetDefaultMemPool(pool, d);
}

CUresult cuDeviceSetMemPool(CUdevice d, CUmemoryPool pool);
CUresult cuDeviceSetMemPool(CUdevice d, CUmemoryPool pool)
{
    int i = pool_index(pool);

    if (d < 0 || d >= n_dev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!pool || i < 0 || pools[i].dev != d)
        return CUDA_ERROR_INVALID_VALUE;
    cur_pool[d] = i == d ? 0 : i + 1;
    return CUDA_SUCCESS;
}

/* CUmemPoolProps: the location (type, id) follows two ints; a DEVICE (1)
 * or HOST (2, dev -1) location */
CUresult cuMemPoolCreate(CUmemoryPool *pool, const int *props);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const int *props)
{
    if (!pool || !props || (props[2] == 1 && (props[3] < 0 || props[3] >= n_dev)) ||
        (props[2] != 1 && props[2] != 2))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = MAX_DEV; i < MAX_POOLS; i++) {
        if (!pools[i].live) {
            pools[i] = (struct fake_pool){.live = 1, .dev = props[2] == 1 ? props[3] : -1};
            *pool = (CUmemoryPool)(void *)&pools[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    int i = pool_index(pool);

    if (!pool || i < MAX_DEV)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&alloc_lock);
    used -= pools[i].reserved;
    pools[i] = (struct fake_pool){0};
    for (int d = 0; d < MAX_DEV; d++)
        if (cur_pool[d] == i + 1)
            cur_pool[d] = 0;
    pthread_mutex_unlock(&alloc_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    int i = pool_index(pool);

    if (!pool || i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&alloc_lock);
    pool_release(i, keep);
    pthread_mutex_unlock(&alloc_lock);
    return CUDA_SUCCESS;
}

/* CU_MEMPOOL_ATTR_*: RELEASE_THRESHOLD 4, RESERVED_MEM_CURRENT 5,
 * USED_MEM_CURRENT 7 (cuuint64_t); the others are not modelled */
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value)
{
    int i = pool_index(pool);

    if (!pool || i < 0 || !value)
        return CUDA_ERROR_INVALID_VALUE;
    if (attr != 4)
        return CUDA_ERROR_INVALID_VALUE;
    pools[i].threshold = (size_t) * (unsigned long long *)value;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value)
{
    int i = pool_index(pool);
    unsigned long long v;

    if (!pool || i < 0 || !value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&alloc_lock);
    v = attr == 4 ? pools[i].threshold : attr == 5 ? pools[i].reserved : pools[i].used;
    pthread_mutex_unlock(&alloc_lock);
    if (attr != 4 && attr != 5 && attr != 7)
        return CUDA_ERROR_INVALID_VALUE;
    *(unsigned long long *)value = v;
    return CUDA_SUCCESS;
}

/* cuMemAdvise(_v2): the last advice, for tests (fake_cuda_last_advice) */
static struct {
    CUdeviceptr p;
    size_t n;
    int advice, loc_type, loc_id;
} last_advice;

CUresult cuMemAdvise(CUdeviceptr p, size_t n, int advice, CUdevice d);
CUresult cuMemAdvise(CUdeviceptr p, size_t n, int advice, CUdevice d)
{
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    last_advice.p = p;
    last_advice.n = n;
    last_advice.advice = advice;
    last_advice.loc_type = d == -1 ? 2 : 1; /* CU_DEVICE_CPU: the host */
    last_advice.loc_id = d == -1 ? 0 : d;
    return CUDA_SUCCESS;
}

typedef struct {
    int type, id;
} fake_location;

CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, int advice, fake_location loc);
CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, int advice, fake_location loc)
{
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    last_advice.p = p;
    last_advice.n = n;
    last_advice.advice = advice;
    last_advice.loc_type = loc.type;
    last_advice.loc_id = loc.id;
    return CUDA_SUCCESS;
}

/* For tests: the last advice given (pointer, bytes, advice, location). */
void fake_cuda_last_advice(CUdeviceptr *p, size_t *n, int *advice, int *loc_type);
void fake_cuda_last_advice(CUdeviceptr *p, size_t *n, int *advice, int *loc_type)
{
    *p = last_advice.p;
    *n = last_advice.n;
    *advice = last_advice.advice;
    *loc_type = last_advice.loc_type;
}

typedef struct {
    int type;
    int requestedHandleTypes;
    struct {
        int type; /* 1: device */
        int id;
    } location;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;

/* VMM: handles, their mappings and references (its own file: the
 * file-size rule); part of this translation unit, it keeps its books in
 * allocs[] and maps[] above */
#include "fake_cuda_vmm.inc"

typedef struct CUarray_st *CUarray;
typedef struct {
    size_t Width, Height;
    int Format;
    unsigned NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
    size_t Width, Height, Depth;
    int Format;
    unsigned NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

static size_t format_bytes(int f)
{
    return f == 0x01 || f == 0x08 ? 1 : f == 0x02 || f == 0x09 || f == 0x10 ? 2 : 4;
}

static CUresult array_new(CUarray *a, size_t w, size_t h, size_t d, int f, unsigned ch)
{
    unsigned long long k;
    CUresult r;

    if (!a || !w)
        return CUDA_ERROR_INVALID_VALUE;
    r = fake_alloc(&k, w * (h ? h : 1) * (d ? d : 1) * (ch ? ch : 1) * format_bytes(f), 'a');
    if (r == CUDA_SUCCESS)
        *a = (CUarray)(unsigned long)k;
    return r;
}

typedef struct {
    unsigned Width, Height;
    int Format;
    unsigned NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;
typedef struct {
    unsigned Width, Height, Depth;
    int Format;
    unsigned NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

CUresult cuArrayCreate(CUarray *a, const CUDA_ARRAY_DESCRIPTOR_v1 *d);
CUresult cuArrayCreate(CUarray *a, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(a, d->Width, d->Height, 1, d->Format, d->NumChannels);
}

CUresult cuArray3DCreate(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d);
CUresult cuArray3DCreate(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(a, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d);
CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(a, d->Width, d->Height, 1, d->Format, d->NumChannels);
}

CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d);
CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(a, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

CUresult cuArrayDestroy(CUarray a);
CUresult cuArrayDestroy(CUarray a)
{
    return fake_free((unsigned long long)(unsigned long)a, 'a');
}

typedef struct CUmipmappedArray_st *CUmipmappedArray;

/* every level, each dimension halved per level (at least 1) */
CUresult cuMipmappedArrayCreate(CUmipmappedArray *m, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                unsigned levels);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *m, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                unsigned levels)
{
    unsigned long long k;
    size_t bytes = 0;
    CUresult r;

    if (!m || !d || !d->Width || !levels)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned l = 0; l < levels && l < 64; l++) {
        size_t w = d->Width >> l, h = d->Height >> l, z = d->Depth >> l;

        bytes += (w ? w : 1) * (h ? h : 1) * (z ? z : 1) * (d->NumChannels ? d->NumChannels : 1) *
                 format_bytes(d->Format);
    }
    r = fake_alloc(&k, bytes, 'm');
    if (r == CUDA_SUCCESS)
        *m = (CUmipmappedArray)(unsigned long)k;
    return r;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray m);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
    return fake_free((unsigned long long)(unsigned long)m, 'm');
}

CUresult cuMemGetInfo(unsigned *free_b, unsigned *total);
CUresult cuMemGetInfo(unsigned *free_b, unsigned *total)
{
    size_t f, t;
    CUresult r = cuMemGetInfo_v2(&f, &t);

    if (r == CUDA_SUCCESS) {
        *free_b = f > 0xffffffffu ? 0xffffffffu : (unsigned)f;
        *total = t > 0xffffffffu ? 0xffffffffu : (unsigned)t;
    }
    return r;
}

/* ---- kernels and events on one timeline ------------------------------------ */

typedef struct CUfunc_st *CUfunction;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUevent_st *CUevent;
#define CUDA_ERROR_NOT_READY 600

static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;
/* busy_until: when this process's last kernel ends */
static unsigned long long busy_until, busy_total, first_launch; /* ns, CLOCK_MONOTONIC */
/* when the GPU's last queued kernel ends: FAKE_CUDA_TIMELINE's word, shared
 * between processes (updated with compare-and-swap), or this process's */
static unsigned long long local_until, *gpu_until = &local_until;
static pthread_once_t timeline_once = PTHREAD_ONCE_INIT;
static unsigned long long kernel_ns = 100000; /* FAKE_CUDA_KERNEL_US, read once */

static void timeline_map(void)
{
    const char *path = getenv("FAKE_CUDA_TIMELINE"), *k = getenv("FAKE_CUDA_KERNEL_US");
    int fd = path && *path ? open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644) : -1;
    void *m;

    /* once, not per launch: bench/shim measures the launch path */
    if (k)
        kernel_ns = strtoull(k, NULL, 10) * 1000ull;
    if (fd < 0)
        return;
    if (ftruncate(fd, 4096) == 0) {
        m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED)
            gpu_until = m;
    }
    close(fd);
}

static unsigned long long mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static CUresult run_kernel(void)
{
    unsigned long long dur, now = mono_ns();
    unsigned long long old, start;

    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_once(&timeline_once, timeline_map);
    dur = kernel_ns;
    pthread_mutex_lock(&gpu_lock);
    if (!first_launch)
        first_launch = now;
    /* queued behind every kernel on the GPU, this process's or not */
    old = __atomic_load_n(gpu_until, __ATOMIC_ACQUIRE);
    do
        start = old > now ? old : now;
    while (!__atomic_compare_exchange_n(gpu_until, &old, start + dur, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE));
    busy_until = start + dur;
    busy_total += dur;
    pthread_mutex_unlock(&gpu_lock);
    return CUDA_SUCCESS;
}

/* For tests: the GPU time kernels took, and the span from the first launch
 * to when the last one ends. */
void fake_cuda_gpu_time(unsigned long long *busy_ns, unsigned long long *span_ns);
void fake_cuda_gpu_time(unsigned long long *busy_ns, unsigned long long *span_ns)
{
    pthread_mutex_lock(&gpu_lock);
    *busy_ns = busy_total;
    *span_ns = first_launch ? busy_until - first_launch : 0;
    pthread_mutex_unlock(&gpu_lock);
}

/* For tests: starts the counts of fake_cuda_gpu_time afresh. */
void fake_cuda_gpu_reset(void);
void fake_cuda_gpu_reset(void)
{
    pthread_mutex_lock(&gpu_lock);
    busy_total = first_launch = 0;
    pthread_mutex_unlock(&gpu_lock);
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                        void **extra);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                        void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)s;
    (void)params, (void)extra;
    return run_kernel();
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                             void **extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                             void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

CUresult cuLaunchKernelEx(const void *config, CUfunction f, void **params, void **extra);
CUresult cuLaunchKernelEx(const void *config, CUfunction f, void **params, void **extra)
{
    (void)f, (void)params, (void)extra;
    return config ? run_kernel() : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuLaunchKernelEx_ptsz(const void *config, CUfunction f, void **params, void **extra);
CUresult cuLaunchKernelEx_ptsz(const void *config, CUfunction f, void **params, void **extra)
{
    return cuLaunchKernelEx(config, f, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shmem, CUstream s,
                                   void **params);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shmem, CUstream s,
                                   void **params)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        CUstream s, void **params);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        CUstream s, void **params)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s);
CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    (void)g, (void)s;
    return run_kernel();
}

CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s);
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    return cuGraphLaunch(g, s);
}

/* ---- graphs: memory allocation nodes only ------------------------------------ */

typedef struct fake_graph *CUgraph;
typedef struct fake_node *CUgraphNode;
struct fake_node {
    CUgraph g;
    unsigned long long dptr;
    struct fake_node *next; /* the graph's next node */
};
struct fake_graph {
    struct fake_node *nodes; /* owned */
};
static int graph_nodes_added; /* for tests: memory nodes the driver made */

CUresult cuGraphCreate(CUgraph *g, unsigned flags);
CUresult cuGraphCreate(CUgraph *g, unsigned flags)
{
    (void)flags;
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    *g = calloc(1, sizeof(**g));
    return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult add_node(CUgraphNode *n, CUgraph g, unsigned long long *dptr)
{
    if (!n || !g)
        return CUDA_ERROR_INVALID_VALUE;
    *n = calloc(1, sizeof(**n));
    if (!*n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*n)->g = g;
    (*n)->next = g->nodes;
    g->nodes = *n;
    if (dptr) {
        pthread_mutex_lock(&alloc_lock);
        (*n)->dptr = *dptr = next_ptr;
        next_ptr += 1 << 20;
        graph_nodes_added++;
        pthread_mutex_unlock(&alloc_lock);
    }
    return CUDA_SUCCESS;
}

/* CUDA_MEM_ALLOC_NODE_PARAMS: pool properties (88 bytes), access
 * descriptors, their count, the size, the address out */
typedef struct {
    unsigned char pool_props[88];
    const void *access;
    size_t n_access, bytesize;
    CUdeviceptr dptr;
} fake_mem_alloc_params;

CUresult cuGraphAddMemAllocNode(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                                fake_mem_alloc_params *p);
CUresult cuGraphAddMemAllocNode(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                                fake_mem_alloc_params *p)
{
    (void)deps, (void)nd;
    if (!p || !p->bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    return add_node(n, g, &p->dptr);
}

/* CUgraphNodeParams: the type, 12 reserved bytes, a 232-byte union */
typedef struct {
    int type, reserved0[3];
    union {
        long long reserved1[29];
        fake_mem_alloc_params alloc;
    };
    long long reserved2;
} fake_node_params;

CUresult cuGraphAddNode(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                        fake_node_params *p);
CUresult cuGraphAddNode(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                        fake_node_params *p)
{
    (void)deps, (void)nd;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return add_node(n, g, p->type == 10 ? &p->alloc.dptr : NULL);
}

CUresult cuGraphAddNode_v2(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, const void *edges,
                           size_t nd, fake_node_params *p);
CUresult cuGraphAddNode_v2(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, const void *edges,
                           size_t nd, fake_node_params *p)
{
    (void)edges;
    return cuGraphAddNode(n, g, deps, nd, p);
}

CUresult cuGraphDestroyNode(CUgraphNode n);
CUresult cuGraphDestroyNode(CUgraphNode n)
{
    struct fake_node **p;

    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    for (p = &n->g->nodes; *p && *p != n; p = &(*p)->next)
        ;
    if (!*p)
        return CUDA_ERROR_INVALID_VALUE;
    *p = n->next;
    free(n);
    return CUDA_SUCCESS;
}

/* Frees the graph and its nodes. */
CUresult cuGraphDestroy(CUgraph g);
CUresult cuGraphDestroy(CUgraph g)
{
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    while (g->nodes) {
        struct fake_node *n = g->nodes;

        g->nodes = n->next;
        free(n);
    }
    free(g);
    return CUDA_SUCCESS;
}

/* For tests: memory allocation nodes the driver made. */
int fake_cuda_graph_nodes(void);
int fake_cuda_graph_nodes(void)
{
    return graph_nodes_added;
}

struct CUevent_st {
    unsigned long long t; /* when the timeline reaches it */
    int recorded;
};

CUresult cuEventCreate(CUevent *e, unsigned flags);
CUresult cuEventCreate(CUevent *e, unsigned flags)
{
    (void)flags;
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    if (cur < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *e = calloc(1, sizeof(**e));
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventRecord(CUevent e, CUstream s);
CUresult cuEventRecord(CUevent e, CUstream s)
{
    unsigned long long now = mono_ns();

    unsigned long long until;

    (void)s;
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&timeline_once, timeline_map);
    pthread_mutex_lock(&gpu_lock);
    until = __atomic_load_n(gpu_until, __ATOMIC_ACQUIRE);
    e->t = until > now ? until : now;
    e->recorded = 1;
    pthread_mutex_unlock(&gpu_lock);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord_ptsz(CUevent e, CUstream s);
CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
    return cuEventRecord(e, s);
}

CUresult cuEventQuery(CUevent e);
CUresult cuEventQuery(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    return !e->recorded || mono_ns() >= e->t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b);
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
    if (!ms || !a || !b || !a->recorded || !b->recorded)
        return CUDA_ERROR_INVALID_VALUE;
    if (cuEventQuery(a) != CUDA_SUCCESS || cuEventQuery(b) != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)((double)(long long)(b->t - a->t) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent e);
CUresult cuEventDestroy_v2(CUevent e)
{
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    free(e);
    return CUDA_SUCCESS;
}

/* legacy launches, context limits, device attributes (procs_more[]) */
#include "fake_cuda_more.inc"

/* cuMemAlloc as FAKE_CUDA_PROC=private hands it out: no symbol names it */
static CUresult private_alloc(CUdeviceptr *p, size_t size)
{
    return fake_alloc(p, size, 'p');
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status);

/* (clang-format would split this macro oddly) */
// clang-format off
#define FN(name) {#name, (void *)(name)}
// clang-format on
static const struct {
    const char *name;
    void *fn;
} procs[] = {
    FN(cuInit),
    FN(cuDeviceGetCount),
    FN(cuDeviceGet),
    FN(cuDeviceGetUuid),
    FN(cuDeviceGetUuid_v2),
    FN(cuCtxCreate),
    FN(cuCtxCreate_v2),
    FN(cuDevicePrimaryCtxRelease),
    FN(cuDevicePrimaryCtxRelease_v2),
    FN(cuGraphCreate),
    FN(cuGraphAddMemAllocNode),
    FN(cuGraphAddNode),
    FN(cuGraphAddNode_v2),
    FN(cuGraphDestroyNode),
    FN(cuGraphDestroy),
    FN(cuCtxDestroy_v2),
    FN(cuCtxGetDevice),
    FN(cuCtxGetCurrent),
    FN(cuCtxDestroy),
    FN(cuDevicePrimaryCtxRetain),
    FN(cuDevicePrimaryCtxReset_v2),
    FN(cuCtxSynchronize),
    FN(cuDeviceTotalMem_v2),
    FN(cuMemGetInfo),
    FN(cuMemGetInfo_v2),
    FN(cuMemAlloc),
    FN(cuMemAlloc_v2),
    FN(cuMemAllocPitch_v2),
    FN(cuMemAllocManaged),
    FN(cuMemAllocAsync),
    FN(cuMemAllocAsync_ptsz),
    FN(cuMemAllocFromPoolAsync),
    FN(cuMemAllocFromPoolAsync_ptsz),
    FN(cuMemFree),
    FN(cuMemFree_v2),
    FN(cuMemFreeAsync),
    FN(cuMemFreeAsync_ptsz),
    FN(cuMemCreate),
    FN(cuMemAdvise),
    FN(cuMemAdvise_v2),
    FN(cuMemRelease),
    FN(cuMemAddressReserve),
    FN(cuMemAddressFree),
    FN(cuMemMap),
    FN(cuMemUnmap),
    FN(cuMemRetainAllocationHandle),
    FN(cuMemExportToShareableHandle),
    FN(cuMemImportFromShareableHandle),
    FN(cuMemsetD8_v2),
    FN(cuArrayCreate),
    FN(cuArrayCreate_v2),
    FN(cuArray3DCreate),
    FN(cuArray3DCreate_v2),
    FN(cuArrayDestroy),
    FN(cuMipmappedArrayCreate),
    FN(cuMipmappedArrayDestroy),
    FN(cuMemAllocPitch),
    FN(cuDeviceTotalMem),
    FN(cuLaunchKernel),
    FN(cuLaunchKernel_ptsz),
    FN(cuLaunchKernelEx),
    FN(cuLaunchKernelEx_ptsz),
    FN(cuLaunchCooperativeKernel),
    FN(cuLaunchCooperativeKernel_ptsz),
    FN(cuGraphLaunch),
    FN(cuGraphLaunch_ptsz),
    FN(cuEventCreate),
    FN(cuEventRecord),
    FN(cuEventRecord_ptsz),
    FN(cuEventQuery),
    FN(cuEventElapsedTime_v2),
    FN(cuEventDestroy_v2),
    FN(cuGetProcAddress),
    FN(cuGetProcAddress_v2),
};
#undef FN

static void *proc_named(const char *name)
{
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++)
        if (!strcmp(procs[i].name, name))
            return procs[i].fn;
    for (size_t i = 0; i < sizeof(procs_more) / sizeof(procs_more[0]); i++)
        if (!strcmp(procs_more[i].name, name))
            return procs_more[i].fn;
    return NULL;
}

/* As the driver does: the per-thread flavour when asked for, else the
 * newest _v2 the version reaches (CUDA 3.2, 12.0 for cuGetProcAddress),
 * else the plain name. */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status)
{
    const char *mode = getenv("FAKE_CUDA_PROC");
    char name[128];
    void *f = NULL;

    if (!symbol || !pfn || strlen(symbol) > 100)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & 2) {
        snprintf(name, sizeof(name), "%s_ptsz", symbol);
        f = proc_named(name);
    }
    if (!f) {
        snprintf(name, sizeof(name), "%s_v2", symbol);
        if (version >= (strcmp(symbol, "cuGetProcAddress") ? 3020 : 12000))
            f = proc_named(name);
    }
    if (!f)
        f = proc_named(symbol);
    if (f == (void *)cuMemAlloc_v2 && mode && !strcmp(mode, "private"))
        f = (void *)private_alloc;
    *pfn = f;
    if (status)
        *status = f ? 0 : 1;
    return f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
