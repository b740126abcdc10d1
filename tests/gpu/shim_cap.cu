/*
 * tests/gpu/shim_cap.cu: liballot-cuda.so's memory cap against NVIDIA's
 * driver (tests/gpu/run.sh builds it with nvcc and runs it with the shim
 * preloaded and ALLOT_GPU_MEMORY_LIMIT set to the cap given in MiB).
 *
 * For each allocation family it allocates pieces of 8 MiB until refused,
 * checks the refusal is CUDA_ERROR_OUT_OF_MEMORY and that the pieces add
 * up to the cap (at most one piece short: the cap need not be a multiple,
 * and what the job holds already counts), then frees them all. It also
 * checks cuMemGetInfo, cuDeviceTotalMem and NVML's memory info report
 * the cap, and that a memory pool whose release threshold is raised keeps
 * its freed memory counted until trimmed. One line per check: "ok   ..." or "FAIL ...". Exit status 1
 * when a check failed.
 *
 *   shim_cap CAP_MIB
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB   (1024ull * 1024)
#define PIECE (8 * MIB)
#define MAXP  4096

static int failed;
static unsigned long long cap;
static CUdevice dev;

static void check(bool ok, const char *what, const char *fmt, ...)
{
    va_list ap;

    printf("%s shim cap: %s: ", ok ? "ok  " : "FAIL", what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!ok)
        failed = 1;
}

/* One family: alloc makes a piece of PIECE bytes (its handle in *h),
 * release frees it. */
struct family {
    const char *name;
    CUresult (*alloc)(unsigned long long *h);
    CUresult (*release)(unsigned long long h);
};

static CUresult a_linear(unsigned long long *h)
{
    return cuMemAlloc((CUdeviceptr *)h, PIECE);
}
static CUresult f_linear(unsigned long long h)
{
    return cuMemFree((CUdeviceptr)h);
}
static CUresult a_pitch(unsigned long long *h)
{
    size_t pitch;

    return cuMemAllocPitch((CUdeviceptr *)h, &pitch, 4096, PIECE / 4096, 4);
}
static CUresult a_managed(unsigned long long *h)
{
    return cuMemAllocManaged((CUdeviceptr *)h, PIECE, CU_MEM_ATTACH_GLOBAL);
}
static CUresult a_async(unsigned long long *h)
{
    return cuMemAllocAsync((CUdeviceptr *)h, PIECE, 0);
}
static CUresult f_async(unsigned long long h)
{
    CUresult rc = cuMemFreeAsync((CUdeviceptr)h, 0);

    return rc ? rc : cuStreamSynchronize(0);
}
static CUmemoryPool pool;
static CUresult a_pool(unsigned long long *h)
{
    return cuMemAllocFromPoolAsync((CUdeviceptr *)h, PIECE, pool, 0);
}
static CUresult a_vmm(unsigned long long *h)
{
    CUmemAllocationProp p;

    memset(&p, 0, sizeof(p));
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return cuMemCreate((CUmemGenericAllocationHandle *)h, PIECE, &p, 0);
}
static CUresult f_vmm(unsigned long long h)
{
    return cuMemRelease((CUmemGenericAllocationHandle)h);
}
static CUresult a_array(unsigned long long *h)
{
    /* 2048 x 1024 texels of 4 x 1 byte: 8 MiB */
    CUDA_ARRAY_DESCRIPTOR d;

    memset(&d, 0, sizeof(d));
    d.Width = 2048;
    d.Height = 1024;
    d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d.NumChannels = 4;
    return cuArrayCreate((CUarray *)h, &d);
}
static CUresult a_array3d(unsigned long long *h)
{
    CUDA_ARRAY3D_DESCRIPTOR d;

    memset(&d, 0, sizeof(d));
    d.Width = 512;
    d.Height = 512;
    d.Depth = 8;
    d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d.NumChannels = 4;
    return cuArray3DCreate((CUarray *)h, &d);
}
static CUresult f_array(unsigned long long h)
{
    return cuArrayDestroy((CUarray)h);
}
static CUresult a_mipmap(unsigned long long *h)
{
    CUDA_ARRAY3D_DESCRIPTOR d;

    memset(&d, 0, sizeof(d));
    d.Width = 2048;
    d.Height = 1024;
    d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d.NumChannels = 4;
    return cuMipmappedArrayCreate((CUmipmappedArray *)h, &d, 1);
}
static CUresult f_mipmap(unsigned long long h)
{
    return cuMipmappedArrayDestroy((CUmipmappedArray)h);
}

static const struct family families[] = {
    {"cuMemAlloc", a_linear, f_linear},
    {"cuMemAllocPitch", a_pitch, f_linear},
    {"cuMemAllocManaged", a_managed, f_linear},
    {"cuMemAllocAsync", a_async, f_async},
    {"cuMemAllocFromPoolAsync", a_pool, f_async},
    {"cuMemCreate", a_vmm, f_vmm},
    {"cuArrayCreate", a_array, f_array},
    {"cuArray3DCreate", a_array3d, f_array},
    {"cuMipmappedArrayCreate", a_mipmap, f_mipmap},
};

static unsigned long long held[MAXP];

static void one_family(const struct family *f)
{
    unsigned long long got = 0;
    CUresult rc = CUDA_SUCCESS;
    size_t freeb, total;
    int n = 0;

    while (n < MAXP && (rc = f->alloc(&held[n])) == CUDA_SUCCESS) {
        n++;
        got += PIECE;
    }
    check(rc == CUDA_ERROR_OUT_OF_MEMORY && got <= cap && got + PIECE > cap, f->name,
          "%llu MiB of a %llu MiB cap, then error %d", got / MIB, cap / MIB, (int)rc);
    for (int i = 0; i < n; i++)
        f->release(held[i]);
    cuCtxSynchronize();
    cuMemGetInfo(&freeb, &total);
    if (freeb != total)
        check(false, f->name, "after the frees %zu MiB free of %zu MiB", freeb / MIB,
              total / MIB);
}

/* A pool that keeps its freed memory (release threshold raised): after
 * filling the cap from it and freeing everything, the pool's reserve still
 * counts, so one more piece of another family is refused; trimmed, it is
 * not. */
static void pool_reserve(void)
{
    cuuint64_t keep = ~0ull, reserved = 0;
    unsigned long long got = 0;
    CUdeviceptr p;
    CUresult rc;
    int n = 0;

    if (cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep)) {
        check(false, "pool reserve", "cuMemPoolSetAttribute failed");
        return;
    }
    while (n < MAXP && a_pool(&held[n]) == CUDA_SUCCESS) {
        n++;
        got += PIECE;
    }
    for (int i = 0; i < n; i++)
        f_async(held[i]);
    cuCtxSynchronize();
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    rc = cuMemAlloc(&p, PIECE);
    check(rc == CUDA_ERROR_OUT_OF_MEMORY && reserved + PIECE > cap, "pool reserve",
          "%llu MiB allocated and freed, %llu MiB kept reserved, then error %d", got / MIB,
          (unsigned long long)reserved / MIB, (int)rc);
    if (rc == CUDA_SUCCESS)
        cuMemFree(p);
    cuMemPoolTrimTo(pool, 0);
    rc = cuMemAlloc(&p, PIECE);
    check(rc == CUDA_SUCCESS, "pool trimmed", "error %d", (int)rc);
    if (rc == CUDA_SUCCESS)
        cuMemFree(p);
    keep = 0;
    cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
}

/* NVML through dlopen and dlsym, as pynvml does: the shim's hook answers. */
static void nvml_info(void)
{
    typedef int (*init_fn)(void);
    typedef int (*handle_fn)(const char *, void **);
    typedef int (*mem_fn)(void *, unsigned long long *);
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    char uuid[64];
    CUuuid u;
    unsigned long long m[3]; /* total, free, used */
    void *h;

    if (!lib) {
        check(false, "NVML", "cannot load libnvidia-ml.so.1");
        return;
    }
    cuDeviceGetUuid(&u, dev);
    snprintf(uuid, sizeof(uuid),
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u.bytes[0] & 255, u.bytes[1] & 255, u.bytes[2] & 255, u.bytes[3] & 255,
             u.bytes[4] & 255, u.bytes[5] & 255, u.bytes[6] & 255, u.bytes[7] & 255,
             u.bytes[8] & 255, u.bytes[9] & 255, u.bytes[10] & 255, u.bytes[11] & 255,
             u.bytes[12] & 255, u.bytes[13] & 255, u.bytes[14] & 255, u.bytes[15] & 255);
    if (((init_fn)dlsym(lib, "nvmlInit_v2"))() ||
        ((handle_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID"))(uuid, &h) ||
        ((mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo"))(h, m)) {
        check(false, "NVML", "the calls failed");
        return;
    }
    check(m[0] == cap && m[2] + m[1] <= cap, "nvmlDeviceGetMemoryInfo",
          "total %llu MiB, used %llu MiB, free %llu MiB", m[0] / MIB, m[2] / MIB, m[1] / MIB);
}

int main(int argc, char **argv)
{
    CUmemPoolProps pp;
    size_t freeb, total, dtotal;
    CUcontext ctx;

    if (argc != 2 || !getenv("LD_PRELOAD") || !getenv("ALLOT_GPU_MEMORY_LIMIT")) {
        fprintf(stderr, "usage: LD_PRELOAD=liballot-cuda.so ALLOT_GPU_MEMORY_LIMIT=NMi "
                        "shim_cap N\n");
        return 2;
    }
    cap = strtoull(argv[1], NULL, 10) * MIB;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx)) {
        printf("FAIL shim cap: no CUDA device\n");
        return 1;
    }
    cuMemGetInfo(&freeb, &total);
    cuDeviceTotalMem(&dtotal, dev);
    check(total == cap && freeb == cap && dtotal == cap, "memory info",
          "cuMemGetInfo %zu of %zu MiB free, cuDeviceTotalMem %zu MiB", freeb / MIB, total / MIB,
          dtotal / MIB);
    memset(&pp, 0, sizeof(pp));
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = dev;
    if (cuMemPoolCreate(&pool, &pp))
        check(false, "pool", "cuMemPoolCreate failed");
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        one_family(&families[i]);
    pool_reserve();
    nvml_info();
    return failed;
}
