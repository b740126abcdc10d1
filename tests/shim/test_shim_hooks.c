/*
 * liballot-cuda.so against the fake driver (tests/fake/fake_cuda.c): this
 * program links the fake libcuda.so.1 and runs with the shim in
 * LD_PRELOAD (CMakeLists.txt registers one ctest entry per group, each in
 * its own process with its own environment):
 *
 *   cap          ALLOT_GPU_MEMORY_LIMIT=1Mi, ALLOT_GPU_MEMORY_LIMIT_1=2Mi:
 *                every allocation family, memory info, lookups, NULLs,
 *                unknown frees, memory pools' reserve, context limits
 *   private      as cap, FAKE_CUDA_PROC=private: cuGetProcAddress hands out
 *                a pointer no symbol names
 *   nolimit      no cap: everything passes through
 *   badenv       a cap that does not parse: fails closed
 *   nodriver     ALLOT_CUDA_LIB names no library: clean errors
 *   region       a shared region: processes share one cap, a killed
 *                process's bytes and a lock held by a dead process are
 *                taken back (a zombie's too), an exec()'d image starts
 *                with nothing, racing processes never exceed the cap
 *   corrupt      a region file with a wrong size or header: per-process
 *                accounting, no crash
 *   oversub      ALLOT_GPU_MEMORY_OVERSUBSCRIBE=2Mi with a region: beyond
 *                the cap cuMemAlloc spills to host-preferred managed memory
 *   overhead     ALLOT_GPU_CONTEXT_OVERHEAD=256Ki: contexts and graphs'
 *                memory nodes count against the cap
 *   nvml         the fake NVML (its GPUs in another order than CUDA's):
 *                memory info capped per CUDA ordinal, drift logged,
 *                contexts' overhead measured
 *   share-*      the compute share (hooks_share.inc); share-guard: other
 *                uids cannot throttle a job through the share folder
 *
 * The fake has 2 devices of 64 MiB (FAKE_CUDA_MEM_MIB); the cap is far
 * below, so every refusal seen here is the shim's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda_abi.h"
#include "allot/shim_region.h"
#include "shim.h" /* the region layout only; nothing of the shim is linked */
#include "share_fixture.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define CAP MIB

/* the driver's entry points, as a program declares them */
CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d);
CUresult cuCtxDestroy_v2(CUcontext c);
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr p, size_t size);
CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h, int type,
                                      unsigned long long flags);
/* the fake's own books */
size_t fake_cuda_used(void);
CUresult fake_cuda_alloc_raw(CUdeviceptr *p, size_t size);
CUresult fake_cuda_create_raw(CUmemGenericAllocationHandle *h, size_t size);

static CUcontext ctx;

static void open_device(int ordinal)
{
    CUdevice d;

    if (ctx)
        assert_int_equal(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
    ctx = NULL;
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGet(&d, ordinal), CUDA_SUCCESS);
    assert_int_equal(cuCtxCreate_v2(&ctx, 0, d), CUDA_SUCCESS);
}

static int setup_dev0(void **state)
{
    (void)state;
    open_device(0);
    return 0;
}

static uint64_t shim_free(void)
{
    size_t f = 0, t = 0;

    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    return f;
}

/* ---- every allocation family through one interface ---------------------- */

struct family {
    const char *name;
    CUresult (*alloc)(uint64_t *key, size_t bytes);
    CUresult (*free)(uint64_t key);
};

static CUresult a_v2(uint64_t *k, size_t n)
{
    return cuMemAlloc_v2((CUdeviceptr *)k, n);
}
static CUresult f_v2(uint64_t k)
{
    return cuMemFree_v2(k);
}
static CUresult a_v1(uint64_t *k, size_t n)
{
    CUdeviceptr_v1 p = 0;
    CUresult r = cuMemAlloc(&p, (unsigned)n);

    *k = p;
    return r;
}
static CUresult f_v1(uint64_t k)
{
    return cuMemFree((CUdeviceptr_v1)k);
}
static CUresult a_managed(uint64_t *k, size_t n)
{
    return cuMemAllocManaged((CUdeviceptr *)k, n, 1);
}
static CUresult a_async(uint64_t *k, size_t n)
{
    return cuMemAllocAsync((CUdeviceptr *)k, n, NULL);
}
static CUresult f_async(uint64_t k)
{
    return cuMemFreeAsync(k, NULL);
}
static CUresult a_async_ptsz(uint64_t *k, size_t n)
{
    return cuMemAllocAsync_ptsz((CUdeviceptr *)k, n, NULL);
}
static CUresult f_async_ptsz(uint64_t k)
{
    return cuMemFreeAsync_ptsz(k, NULL);
}
static CUresult a_pool(uint64_t *k, size_t n)
{
    return cuMemAllocFromPoolAsync((CUdeviceptr *)k, n, NULL, NULL);
}
static CUresult a_pool_ptsz(uint64_t *k, size_t n)
{
    return cuMemAllocFromPoolAsync_ptsz((CUdeviceptr *)k, n, NULL, NULL);
}
static CUresult a_vmm(uint64_t *k, size_t n)
{
    CUmemAllocationProp p = {.type = 1, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};

    return cuMemCreate((CUmemGenericAllocationHandle *)k, n, &p, 0);
}
static CUresult f_vmm(uint64_t k)
{
    return cuMemRelease(k);
}
static CUresult a_array(uint64_t *k, size_t n)
{
    /* FLOAT (4 bytes) x 1 channel x (n / 4) x 1 */
    CUDA_ARRAY_DESCRIPTOR d = {.Width = n / 4, .Height = 0, .Format = 0x20, .NumChannels = 1};
    CUarray a = NULL;
    CUresult r = cuArrayCreate_v2(&a, &d);

    *k = (uint64_t)(uintptr_t)a;
    return r;
}
static CUresult a_array3d(uint64_t *k, size_t n)
{
    /* UINT8 x 4 channels x 16 x 16 x (n / 1024) */
    CUDA_ARRAY3D_DESCRIPTOR d = {
        .Width = 16, .Height = 16, .Depth = n / 1024, .Format = 0x01, .NumChannels = 4};
    CUarray a = NULL;
    CUresult r = cuArray3DCreate_v2(&a, &d);

    *k = (uint64_t)(uintptr_t)a;
    return r;
}
static CUresult a_pitch_v1(uint64_t *k, size_t n)
{
    /* rows of 1024 bytes, the fake's pitch */
    CUdeviceptr_v1 p = 0;
    unsigned int pitch = 0;
    CUresult r = cuMemAllocPitch(&p, &pitch, 1024, (unsigned)(n / 1024), 4);

    *k = p;
    return r;
}
static CUresult a_array_v1(uint64_t *k, size_t n)
{
    /* SIGNED_INT16 (2 bytes) x 2 channels x (n / 4) */
    CUDA_ARRAY_DESCRIPTOR_v1 d = {.Width = (unsigned)(n / 4), .Format = 0x09, .NumChannels = 2};
    CUarray a = NULL;
    CUresult r = cuArrayCreate(&a, &d);

    *k = (uint64_t)(uintptr_t)a;
    return r;
}
static CUresult a_array3d_v1(uint64_t *k, size_t n)
{
    CUDA_ARRAY3D_DESCRIPTOR_v1 d = {
        .Width = 16, .Height = 16, .Depth = (unsigned)(n / 1024), .Format = 0x01, .NumChannels = 4};
    CUarray a = NULL;
    CUresult r = cuArray3DCreate(&a, &d);

    *k = (uint64_t)(uintptr_t)a;
    return r;
}
static CUresult a_mipmap(uint64_t *k, size_t n)
{
    /* one level: FLOAT x 1 channel x 256 x (n / 1024) */
    CUDA_ARRAY3D_DESCRIPTOR d = {
        .Width = 256, .Height = n / 1024, .Depth = 0, .Format = 0x20, .NumChannels = 1};
    CUmipmappedArray m = NULL;
    CUresult r = cuMipmappedArrayCreate(&m, &d, 1);

    *k = (uint64_t)(uintptr_t)m;
    return r;
}
static CUresult f_mipmap(uint64_t k)
{
    return cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)k);
}
static CUresult f_array(uint64_t k)
{
    return cuArrayDestroy((CUarray)(uintptr_t)k);
}

static const struct family families[] = {
    {"cuMemAlloc_v2", a_v2, f_v2},
    {"cuMemAlloc (v1)", a_v1, f_v1},
    {"cuMemAllocManaged", a_managed, f_v2},
    {"cuMemAllocAsync", a_async, f_async},
    {"cuMemAllocAsync_ptsz", a_async_ptsz, f_async_ptsz},
    {"cuMemAllocFromPoolAsync", a_pool, f_async},
    {"cuMemAllocFromPoolAsync_ptsz", a_pool_ptsz, f_v2},
    {"cuMemCreate", a_vmm, f_vmm},
    {"cuArrayCreate_v2", a_array, f_array},
    {"cuArray3DCreate_v2", a_array3d, f_array},
    {"cuMemAllocPitch (v1)", a_pitch_v1, f_v2},
    {"cuArrayCreate (v1)", a_array_v1, f_array},
    {"cuArray3DCreate (v1)", a_array3d_v1, f_array},
    {"cuMipmappedArrayCreate", a_mipmap, f_mipmap},
};

/* The cap holds exactly for each family: two halves fit, one more byte's
 * worth does not and leaves the driver untouched; frees give it all back. */
static void test_cap_each_family(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        const struct family *f = &families[i];
        uint64_t a = 0, b = 0, c = 0;
        size_t before;

        print_message("  family %s\n", f->name);
        assert_int_equal(f->alloc(&a, CAP / 2), CUDA_SUCCESS);
        assert_int_equal(f->alloc(&b, CAP / 2), CUDA_SUCCESS);
        assert_int_equal(shim_free(), 0);
        before = fake_cuda_used();
        assert_int_equal(f->alloc(&c, 4 * KIB), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(fake_cuda_used(), before); /* nothing allocated */
        assert_int_equal(f->free(a), CUDA_SUCCESS);
        assert_int_equal(shim_free(), CAP / 2);
        assert_int_equal(f->alloc(&c, 4 * KIB), CUDA_SUCCESS);
        assert_int_equal(f->free(c), CUDA_SUCCESS);
        assert_int_equal(f->free(b), CUDA_SUCCESS);
        assert_int_equal(shim_free(), CAP);
        assert_int_equal(fake_cuda_used(), 0);
    }
}

/* One request above the cap fails even when the device has room. */
static void test_cap_single_request(void **state)
{
    CUdeviceptr p;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(&p, CAP + 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemAlloc_v2(&p, SIZE_MAX), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(fake_cuda_used(), 0);
    assert_int_equal(cuMemAlloc_v2(&p, CAP), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
}

/* Pitched allocations count the driver's pitch times the height (the fake
 * aligns rows to 1024 bytes, more than the shim's first guess). */
static void test_cap_pitch(void **state)
{
    CUdeviceptr a, b, c;
    size_t pitch = 0;

    (void)state;
    assert_int_equal(cuMemAllocPitch_v2(&a, &pitch, 100, 512, 4), CUDA_SUCCESS);
    assert_int_equal(pitch, 1024);
    assert_int_equal(shim_free(), CAP - 512 * KIB);
    assert_int_equal(cuMemAllocPitch_v2(&b, &pitch, 100, 512, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocPitch_v2(&c, &pitch, 100, 1, 4), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(fake_cuda_used(), CAP);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
    /* 100 bytes wide but 1025 rows of 1024: over the cap */
    assert_int_equal(cuMemAllocPitch_v2(&c, &pitch, 100, 1025, 4), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(fake_cuda_used(), 0);
    assert_int_equal(shim_free(), CAP);
}

struct racer {
    CUcontext ctx;
    int got;
    CUdeviceptr ptrs[64];
};

static void *race_alloc(void *arg)
{
    struct racer *r = arg;
    CUdeviceptr p;

    /* the fake has one context for all threads; the shim asks per thread */
    while (r->got < 64 && cuMemAlloc_v2(&p, 16 * KIB) == CUDA_SUCCESS)
        r->ptrs[r->got++] = p;
    return NULL;
}

/* Threads racing to allocate 16 KiB pieces get exactly the cap's worth
 * between them, and every piece comes back. */
static void test_cap_threads(void **state)
{
    enum { N = 8 };
    struct racer r[N];
    pthread_t th[N];
    int total = 0;

    (void)state;
    memset(r, 0, sizeof(r));
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_alloc, &r[i]), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        total += r[i].got;
    }
    assert_int_equal(total, (int)(CAP / (16 * KIB)));
    assert_int_equal(fake_cuda_used(), CAP);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < r[i].got; k++)
            assert_int_equal(cuMemFree_v2(r[i].ptrs[k]), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(fake_cuda_used(), 0);
}

/* A mipmap counts every level: 512 x 512 bytes, then 256 x 256. */
static void test_mipmap_levels(void **state)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 512, .Height = 512, .Format = 0x01, .NumChannels = 1};
    CUmipmappedArray m;

    (void)state;
    assert_int_equal(cuMipmappedArrayCreate(&m, &d, 2), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 512 * 512 - 256 * 256);
    assert_int_equal(fake_cuda_used(), 512 * 512 + 256 * 256);
    assert_int_equal(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    d.Width = d.Height = 1024; /* 1 MiB + 256 KiB: over */
    assert_int_equal(cuMipmappedArrayCreate(&m, &d, 2), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMipmappedArrayCreate(NULL, &d, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMipmappedArrayCreate(&m, NULL, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fake_cuda_used(), 0);
}

/* Host-located VMM allocations are not GPU memory: not counted. */
static void test_vmm_host_uncounted(void **state)
{
    CUmemAllocationProp p = {.type = 1, .location = {2 /* HOST */, 0}};
    CUmemGenericAllocationHandle h;

    (void)state;
    assert_int_equal(cuMemCreate(&h, 4 * MIB, &p, 0), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
}

/*
 * VMM memory lives while its handle is referenced or mapped (the driver
 * frees it once neither is left): reserve, create, map and release at once
 * (a common idiom) keeps it counted until its last mapping goes, so the
 * idiom cannot take a job past its cap. A handle retained from an address
 * is one more reference (NCCL frees that way); an imported one is too when
 * the shim counted its memory, and gives nothing back when it did not.
 */
static void test_vmm_mapped_counted(void **state)
{
    CUmemAllocationProp p = {.type = 1, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemGenericAllocationHandle h, h2, r, raw;
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) =
        NULL;
    CUdeviceptr va;
    int fd = -1;

    (void)state;
    assert_int_equal(cuMemAddressReserve(&va, 2 * MIB, 0, 0, 0), CUDA_SUCCESS);
    /* as the CUDA runtime finds it */
    assert_int_equal(cuGetProcAddress("cuMemMap", (void **)&map, 12000, 0), CUDA_SUCCESS);
    assert_non_null(map);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(cuMemCreate(&h, 768 * KIB, &p, 0), CUDA_SUCCESS);
        assert_int_equal(map(va, 768 * KIB, 0, h, 0), CUDA_SUCCESS);
        assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
        /* the mapping keeps it: still counted, no room for another */
        assert_int_equal(fake_cuda_used(), 768 * KIB);
        assert_int_equal(shim_free(), CAP - 768 * KIB);
        assert_int_equal(cuMemCreate(&h2, 768 * KIB, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(fake_cuda_used(), 768 * KIB);
        if (round == 1) {
            /* NCCL's free: the handle from the address, released, unmapped */
            assert_int_equal(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)va), CUDA_SUCCESS);
            assert_int_equal(r, h);
            assert_int_equal(cuMemRelease(r), CUDA_SUCCESS);
            assert_int_equal(shim_free(), CAP - 768 * KIB);
        }
        assert_int_equal(cuMemUnmap(va, 768 * KIB), CUDA_SUCCESS);
        assert_int_equal(fake_cuda_used(), 0);
        assert_int_equal(shim_free(), CAP);
    }
    /* two mappings of one handle, and one unmap of two handles' ranges */
    assert_int_equal(cuMemCreate(&h, 256 * KIB, &p, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&h2, 256 * KIB, &p, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, 256 * KIB, 0, h, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + 256 * KIB, 256 * KIB, 0, h2, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + MIB, 256 * KIB, 0, h, 0), CUDA_SUCCESS);
    /* the driver's refusals change nothing: mapped already, not mapped */
    assert_int_equal(cuMemMap(va, 256 * KIB, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemUnmap(va + 1536 * KIB, 256 * KIB), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(h2), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(shim_free(), CAP - 512 * KIB);
    assert_int_equal(cuMemUnmap(va, 512 * KIB), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 256 * KIB); /* h is still mapped */
    assert_int_equal(cuMemUnmap(va + MIB, 256 * KIB), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(fake_cuda_used(), 0);
    /* imported in the same process: the same memory, one more reference */
    assert_int_equal(cuMemCreate(&h, 512 * KIB, &p, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemExportToShareableHandle(&fd, h, 1, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemImportFromShareableHandle(&h2, (void *)(uintptr_t)fd, 1), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 512 * KIB);
    assert_int_equal(cuMemRelease(h2), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    /* another process's memory (one the shim never counted here), imported:
     * counted from its first mapping while this process holds it, also once
     * its exporter released it; past the cap its mapping is refused */
    assert_int_equal(fake_cuda_create_raw(&raw, 256 * KIB), CUDA_SUCCESS);
    assert_int_equal(cuMemCreate(&h, 256 * KIB, &p, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemExportToShareableHandle(&fd, raw, 1, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemImportFromShareableHandle(&r, (void *)(uintptr_t)fd, 1), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 256 * KIB);
    assert_int_equal(cuMemMap(va, 256 * KIB, 0, r, 0), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 512 * KIB);
    assert_int_equal(cuMemRelease(r), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(raw), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 512 * KIB); /* still mapped */
    assert_int_equal(cuMemUnmap(va, 256 * KIB), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 256 * KIB);
    assert_int_equal(fake_cuda_create_raw(&raw, MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemExportToShareableHandle(&fd, raw, 1, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemImportFromShareableHandle(&r, (void *)(uintptr_t)fd, 1), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, MIB, 0, r, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemRelease(r), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(raw), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 256 * KIB);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(fake_cuda_used(), 0);
    assert_int_equal(cuMemAddressFree(va, 2 * MIB), CUDA_SUCCESS);
}

static void test_meminfo_reports_cap(void **state)
{
    size_t f, t, total;
    CUdeviceptr p;

    (void)state;
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    assert_int_equal(t, CAP);
    assert_int_equal(f, CAP);
    assert_int_equal(cuMemAlloc_v2(&p, 300 * KIB), CUDA_SUCCESS);
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    assert_int_equal(t, CAP);
    assert_int_equal(f, CAP - 300 * KIB);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    assert_int_equal(total, CAP);
    {
        /* the 32-bit forms */
        unsigned int f32, t32;

        assert_int_equal(cuMemGetInfo(&f32, &t32), CUDA_SUCCESS);
        assert_int_equal(t32, CAP);
        assert_int_equal(f32, CAP);
        assert_int_equal(cuDeviceTotalMem(&t32, 0), CUDA_SUCCESS);
        assert_int_equal(t32, CAP);
        assert_int_equal(cuMemGetInfo(NULL, &t32), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceTotalMem(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    }
    /* ALLOT_GPU_MEMORY_LIMIT_1 overrides device 1 */
    assert_int_equal(cuDeviceTotalMem_v2(&total, 1), CUDA_SUCCESS);
    assert_int_equal(total, 2 * MIB);
}

static void test_per_device_cap(void **state)
{
    CUdeviceptr a, b;

    (void)state;
    open_device(1);
    assert_int_equal(shim_free(), 2 * MIB);
    assert_int_equal(cuMemAlloc_v2(&a, 2 * MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    open_device(0);
    assert_int_equal(shim_free(), CAP);
}

/* Destroying a context (or resetting a device's primary one) frees its
 * memory in the driver: the shim's books follow. */
static void test_context_destroy_frees(void **state)
{
    CUdeviceptr p;
    CUcontext pc;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(&p, 600 * KIB), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 600 * KIB);
    open_device(0); /* destroys the context, creates another */
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(cuMemAlloc_v2(&p, 600 * KIB), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
    ctx = NULL;
    assert_int_equal(cuDevicePrimaryCtxRetain(&pc, 0), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(cuMemAlloc_v2(&p, CAP), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&pc, 0), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
}

static void test_null_arguments(void **state)
{
    CUmemAllocationProp p = {.type = 1, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 4, .Format = 0x20, .NumChannels = 1};
    size_t s;
    void *fn;
    CUarray a;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAllocPitch_v2(NULL, &s, 4, 4, 4), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAllocManaged(NULL, 16, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAllocAsync(NULL, 16, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAllocFromPoolAsync(NULL, 16, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemCreate(NULL, 16, &p, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemCreate((CUmemGenericAllocationHandle *)&s, 16, NULL, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuArrayCreate_v2(NULL, &d), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuArrayCreate_v2(&a, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuArray3DCreate_v2(&a, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemGetInfo_v2(NULL, &s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemGetInfo_v2(&s, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceTotalMem_v2(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress(NULL, &fn, 12000, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress("cuMemAlloc", NULL, 12000, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress_v2(NULL, &fn, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fake_cuda_used(), 0);
}

/* Frees of pointers the shim never saw reach the driver. */
static void test_unknown_free_forwarded(void **state)
{
    CUdeviceptr raw;

    (void)state;
    assert_int_equal(fake_cuda_alloc_raw(&raw, 64 * KIB), CUDA_SUCCESS);
    assert_int_equal(fake_cuda_used(), 64 * KIB);
    assert_int_equal(cuMemFree_v2(raw), CUDA_SUCCESS);
    assert_int_equal(fake_cuda_used(), 0);
    /* a pointer nobody allocated: the driver's own answer */
    assert_int_equal(cuMemFree_v2(0xdead0000ull), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFreeAsync(0xdead0000ull, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemRelease(12345), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuArrayDestroy((CUarray)(uintptr_t)0xbad0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(shim_free(), CAP);
}

/* A pointer obtained by lookup is hooked when allocating beyond the cap
 * fails and allocating within it shows in the shim's memory info. */
static void check_hooked_alloc(CUresult (*alloc)(CUdeviceptr *, size_t))
{
    CUdeviceptr p;

    assert_non_null(alloc);
    assert_int_equal(alloc(&p, CAP + 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(alloc(&p, 256 * KIB), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP - 256 * KIB);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
}

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);

static void test_lookup_dlsym(void **state)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    (void)state;
    assert_non_null(h);
    check_hooked_alloc((alloc_fn)dlsym(h, "cuMemAlloc_v2"));
    check_hooked_alloc((alloc_fn)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    check_hooked_alloc((alloc_fn)dlsym(RTLD_NEXT, "cuMemAlloc_v2"));
    /* names the driver lacks stay missing; other names pass through */
    assert_null(dlsym(h, "cuNoSuchFunction"));
    assert_non_null(dlsym(h, "cuMemsetD8_v2"));
    dlclose(h);
}

static void test_lookup_get_proc_address(void **state)
{
    CUdriverProcAddressQueryResult st = -1;
    void *fn = NULL, *gpa = NULL;
    CUdeviceptr p;

    (void)state;
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0), CUDA_SUCCESS);
    check_hooked_alloc((alloc_fn)fn);
    fn = NULL;
    assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, &st), CUDA_SUCCESS);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    check_hooked_alloc((alloc_fn)fn);
    /* the per-thread default stream flavour */
    fn = NULL;
    assert_int_equal(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 12000,
                                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuMemAllocAsync_ptsz);
    assert_int_equal(((async_fn)fn)(&p, CAP + 1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    /* launches too, in their per-thread flavour */
    assert_int_equal(cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000,
                                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuLaunchKernel_ptsz);
    assert_int_equal(cuGetProcAddress("cuGraphLaunch", &fn, 12000, 0), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuGraphLaunch);
    /* the legacy launches, which have no versions or flavours */
    assert_int_equal(cuGetProcAddress("cuLaunchGrid", &fn, 13000, 0), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuLaunchGrid);
    assert_ptr_equal(dlsym(RTLD_DEFAULT, "cuLaunch"), (void *)cuLaunch);
    assert_int_equal(cuGetProcAddress_v2("cuLaunchGridAsync", &fn, 13000,
                                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuLaunchGridAsync);
    /* the lookup function itself, at the version that means _v2 */
    assert_int_equal(cuGetProcAddress_v2("cuGetProcAddress", &gpa, 12000, 0, &st), CUDA_SUCCESS);
    assert_ptr_equal(gpa, (void *)cuGetProcAddress_v2);
    assert_int_equal(cuGetProcAddress("cuGetProcAddress", &gpa, 11080, 0), CUDA_SUCCESS);
    assert_ptr_equal(gpa, (void *)cuGetProcAddress);
    /* the old-version name of a hooked function: the driver's v1 */
    assert_int_equal(cuGetProcAddress("cuMemFree", &fn, 3000, 0), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuMemFree);
    /* cuGetProcAddress found through dlsym is hooked too */
    gpa = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    assert_ptr_equal(gpa, (void *)cuGetProcAddress_v2);
    /* not found: the driver's answer */
    assert_int_equal(cuGetProcAddress_v2("cuNoSuch", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

/* FAKE_CUDA_PROC=private: the driver answers with a pointer that no symbol
 * names; the shim goes by the name and still hands out its hook. */
static void test_lookup_private_pointer(void **state)
{
    void *fn = NULL;

    (void)state;
    assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, NULL), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuMemAlloc_v2);
    check_hooked_alloc((alloc_fn)fn);
}

static void test_nolimit_passes_through(void **state)
{
    size_t f, t;
    CUdeviceptr p;

    (void)state;
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    assert_int_equal(t, 64 * MIB);
    assert_int_equal(cuMemAlloc_v2(&p, 32 * MIB), CUDA_SUCCESS);
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    assert_int_equal(f, 32 * MIB);
    /* the driver's own refusal */
    assert_int_equal(cuMemAlloc_v2(&p, 64 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_badenv_fails_closed(void **state)
{
    CUdeviceptr p;
    size_t f, t;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(&p, 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    assert_int_equal(t, 0);
    assert_int_equal(f, 0);
}

static void test_nodriver_errors(void **state)
{
    CUdeviceptr p;
    size_t f, t;
    void *fn;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuMemFree_v2(0x1000), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0), CUDA_ERROR_NOT_INITIALIZED);
}

/* ---- the shared region ----------------------------------------------------- */

static const char *region_path(void)
{
    const char *p = getenv("ALLOT_SHIM_REGION");

    assert_non_null(p);
    return p;
}

/* Forks a child that allocates bytes through the shim, reports on the
 * pipe and waits to be killed; with lock, it then also takes the region's
 * mutex itself, so it dies holding it. Returns its pid. */
static pid_t spawn_holder(size_t bytes, bool lock)
{
    int fds[2];
    pid_t pid;
    char c = 0;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CUdeviceptr p;

        close(fds[0]);
        c = cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS ? 'y' : 'n';
        if (lock) {
            int fd = open(region_path(), O_RDWR);
            struct shim_region_hdr *h =
                mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

            if (h == MAP_FAILED || pthread_mutex_lock(&h->lock.m))
                c = 'n';
        }
        if (write(fds[1], &c, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    assert_int_equal(c, 'y');
    return pid;
}

static void kill_wait(pid_t pid)
{
    int st;

    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
}

static void test_region_shared_cap(void **state)
{
    pid_t a = spawn_holder(600 * KIB, false);
    CUdeviceptr p, q;
    siginfo_t si;

    (void)state;
    /* the other process's 600 KiB count here */
    assert_int_equal(shim_free(), CAP - 600 * KIB);
    assert_int_equal(cuMemAlloc_v2(&p, 600 * KIB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemAlloc_v2(&p, 400 * KIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    /* killed, a zombie until reaped: its bytes come back at the next
     * refusal, reaped or not */
    assert_int_equal(kill(a, SIGKILL), 0);
    assert_int_equal(waitid(P_PID, (id_t)a, &si, WEXITED | WNOWAIT), 0);
    assert_int_equal(cuMemAlloc_v2(&p, 600 * KIB), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&q, 600 * KIB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    assert_int_equal(waitpid(a, NULL, 0), a);
}

static void test_region_lock_holder_killed(void **state)
{
    pid_t a = spawn_holder(700 * KIB, true);
    CUdeviceptr p;

    (void)state;
    kill_wait(a);
    /* must neither hang (ctest's timeout) nor keep the dead one's bytes */
    assert_int_equal(cuMemAlloc_v2(&p, 700 * KIB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
}

/* exec() replaces a process's image, and its CUDA memory dies with the old
 * one: the new image (same pid, same start time, so the same slot) starts
 * with nothing counted, in its books and in what the agent reads. */
static void test_region_exec(void **state)
{
    pid_t pid;
    int st;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CUdeviceptr p;

        if (cuMemAlloc_v2(&p, 700 * KIB) != CUDA_SUCCESS)
            _exit(2);
        execl("/proc/self/exe", "test_shim_hooks", "region-exec", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The new image of test_region_exec. Returns its exit status: 0 when the
 * old image's 700 KiB are gone. */
static int region_exec_child(void)
{
    struct allot_shim_usage *u = calloc(1, sizeof(*u));
    const struct allot_shim_proc *me = NULL;
    CUdeviceptr p;
    int rc = 0;

    if (!u)
        return 1;
    open_device(0);
    if (shim_free() != CAP)
        rc = 3;
    else if (allot_shim_region_read(region_path(), u) != 0)
        rc = 4;
    for (int i = 0; rc == 0 && i < u->n_procs; i++)
        if (u->procs[i].pid == getpid())
            me = &u->procs[i];
    if (rc == 0 && (u->used[0] != 0 || (me && me->used[0] != 0)))
        rc = 5;
    if (rc == 0 && cuMemAlloc_v2(&p, 700 * KIB) != CUDA_SUCCESS)
        rc = 6;
    free(u);
    return rc;
}

/* What the agent reads back (allot-shimreader): this process's launches
 * and bytes, the job's peak. */
static void test_region_metering(void **state)
{
    struct allot_shim_usage *u = calloc(1, sizeof(*u));
    const struct allot_shim_proc *me = NULL;
    CUdeviceptr p;

    (void)state;
    assert_non_null(u);
    for (int i = 0; i < 5; i++)
        assert_int_equal(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuLaunch(NULL), CUDA_SUCCESS);
    assert_int_equal(cuLaunchGrid(NULL, 2, 2), CUDA_SUCCESS);
    assert_int_equal(cuLaunchGridAsync(NULL, 2, 2, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 300 * KIB), CUDA_SUCCESS);
    assert_int_equal(allot_shim_region_read(region_path(), u), 0);
    for (int i = 0; i < u->n_procs; i++)
        if (u->procs[i].pid == getpid())
            me = &u->procs[i];
    assert_non_null(me);
    assert_int_equal(me->launches, 9); /* the legacy launches counted too */
    assert_int_equal(me->used[0], 300 * KIB);
    assert_true(u->peak[0] >= 700 * KIB); /* the killed holder's 700 KiB earlier */
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    free(u);
}

/* Racing processes allocate 100 KiB pieces until refused: together they
 * never get more than the cap (10 pieces of a 1 MiB cap). */
static void test_region_race(void **state)
{
    enum { N = 4 };
    int res[2], go[2];
    pid_t kids[N];
    int total = 0;

    (void)state;
    assert_int_equal(pipe(res), 0);
    assert_int_equal(pipe(go), 0);
    for (int i = 0; i < N; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            CUdeviceptr p;
            unsigned char n = 0;
            char c;

            close(res[0]);
            close(go[1]);
            /* start together: wait until the parent closes the pipe */
            if (read(go[0], &c, 1) < 0)
                _exit(1);
            while (cuMemAlloc_v2(&p, 100 * KIB) == CUDA_SUCCESS)
                n++;
            if (write(res[1], &n, 1) != 1)
                _exit(1);
            /* hold the pieces until the parent has counted */
            for (;;)
                pause();
        }
    }
    close(res[1]);
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < N; i++) {
        unsigned char n;

        assert_int_equal(read(res[0], &n, 1), 1);
        total += n;
    }
    close(res[0]);
    assert_int_equal(total, (int)(CAP / (100 * KIB)));
    for (int i = 0; i < N; i++)
        kill_wait(kids[i]);
    assert_int_equal(shim_free(), CAP); /* all reclaimed */
}

/* what the driver reserves outside the allocation calls (context limits),
 * pools of other devices */
#include "hooks_reserved.inc"

/* the compute share: every launch family, jobs and weights */
#include "hooks_share.inc"

static void test_corrupt_region_falls_back(void **state)
{
    CUdeviceptr p;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(&p, CAP), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc_v2(&p, 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(shim_free(), 0);
}

/* ---- oversubscription ------------------------------------------------------ */

void fake_cuda_last_advice(CUdeviceptr *p, size_t *n, int *advice, int *loc_type);

static uint64_t region_over(void)
{
    struct allot_shim_usage *u = calloc(1, sizeof(*u));
    uint64_t over;

    assert_non_null(u);
    assert_int_equal(allot_shim_region_read(region_path(), u), 0);
    over = u->over[0];
    free(u);
    return over;
}

/* Beyond the 1 MiB cap, cuMemAlloc_v2 gets managed memory advised to stay
 * on the host, up to 2 MiB more, counted apart and reported in the region;
 * the cap and what the program is told do not move. */
static void test_oversubscribe(void **state)
{
    CUdeviceptr dev, a, b, c, adv_p;
    size_t adv_n, before;
    int advice, loc;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(&dev, CAP), CUDA_SUCCESS);
    assert_int_equal(region_over(), 0);
    assert_int_equal(cuMemAlloc_v2(&a, MIB), CUDA_SUCCESS);
    fake_cuda_last_advice(&adv_p, &adv_n, &advice, &loc);
    assert_int_equal(adv_p, a);
    assert_int_equal(adv_n, MIB);
    assert_int_equal(advice, CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
    assert_int_equal(loc, CU_MEM_LOCATION_TYPE_HOST);
    assert_int_equal(shim_free(), 0);
    assert_int_equal(region_over(), MIB);
    assert_int_equal(cuMemAlloc_v2(&b, MIB), CUDA_SUCCESS);
    assert_int_equal(region_over(), 2 * MIB);
    /* the allowance is spent: refused, the driver untouched */
    before = fake_cuda_used();
    assert_int_equal(cuMemAlloc_v2(&c, 4 * KIB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(fake_cuda_used(), before);
    /* only cuMemAlloc spills; the other families stay refused */
    assert_int_equal(cuMemAllocAsync(&c, 4 * KIB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    /* a free gives the allowance back, not the cap */
    assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
    assert_int_equal(region_over(), MIB);
    assert_int_equal(shim_free(), 0);
    assert_int_equal(cuMemAlloc_v2(&a, 512 * KIB), CUDA_SUCCESS);
    assert_int_equal(region_over(), MIB + 512 * KIB);
    assert_int_equal(cuMemFree_v2(dev), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
    /* destroying the context gives everything back */
    open_device(0);
    assert_int_equal(region_over(), 0);
    assert_int_equal(shim_free(), CAP);
}

/* Pitched allocations spill too: with rows aligned to 512 bytes, whether
 * the shim's first estimate is already over the cap or only the driver's
 * pitch (the fake's 1024) is. */
static void test_oversubscribe_pitched(void **state)
{
    CUdeviceptr fill, p, q, adv_p;
    size_t pitch = 0, adv_n;
    int advice, loc;

    (void)state;
    assert_int_equal(cuMemAlloc_v2(&fill, CAP - 300 * KIB), CUDA_SUCCESS);
    /* 100 x 512: the estimate (256 KiB) fits, the driver's 512 KiB not */
    assert_int_equal(cuMemAllocPitch_v2(&p, &pitch, 100, 512, 4), CUDA_SUCCESS);
    assert_int_equal(pitch, 512);
    fake_cuda_last_advice(&adv_p, &adv_n, &advice, &loc);
    assert_int_equal(adv_p, p);
    assert_int_equal(adv_n, 256 * KIB);
    assert_int_equal(advice, CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
    assert_int_equal(loc, CU_MEM_LOCATION_TYPE_HOST);
    assert_int_equal(region_over(), 256 * KIB);
    assert_int_equal(shim_free(), 300 * KIB); /* the cap is untouched */
    /* 1000 x 512: over the cap from the start; rows of 1024 */
    assert_int_equal(cuMemAllocPitch_v2(&q, &pitch, 1000, 512, 8), CUDA_SUCCESS);
    assert_int_equal(pitch, 1024);
    assert_int_equal(region_over(), 768 * KIB);
    /* past the allowance: refused; a bad element size as the driver would */
    assert_int_equal(cuMemAllocPitch_v2(&p, &pitch, 4096, 512, 4), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemAllocPitch_v2(&p, &pitch, 100, 4096, 3), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(q), CUDA_SUCCESS);
    assert_int_equal(region_over(), 0);
    assert_int_equal(cuMemFree_v2(fill), CUDA_SUCCESS);
    assert_int_equal(shim_free(), CAP);
}

/* what the shim counts beyond the allocation calls: pools' reserve,
 * contexts' overhead, graphs' memory nodes, and the NVML view */
#include "hooks_counting.inc"

/* ---- groups ------------------------------------------------------------------ */

/* Writes the region file ALLOT_SHIM_REGION as the group needs it. */
static void prepare_region(const char *how)
{
    const char *path = getenv("ALLOT_SHIM_REGION");
    FILE *f;

    if (!path)
        return;
    f = fopen(path, "w");
    if (!f)
        return;
    if (!strcmp(how, "garbage")) {
        fputs("not a region", f);
    } else if (!strcmp(how, "badmagic")) {
        for (size_t i = 0; i < sizeof(struct shim_region_hdr); i++)
            fputc(0x5a, f);
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest cap[] = {
        cmocka_unit_test_setup(test_cap_each_family, setup_dev0),
        cmocka_unit_test_setup(test_cap_single_request, setup_dev0),
        cmocka_unit_test_setup(test_cap_pitch, setup_dev0),
        cmocka_unit_test_setup(test_cap_threads, setup_dev0),
        cmocka_unit_test_setup(test_mipmap_levels, setup_dev0),
        cmocka_unit_test_setup(test_vmm_host_uncounted, setup_dev0),
        cmocka_unit_test_setup(test_vmm_mapped_counted, setup_dev0),
        cmocka_unit_test_setup(test_meminfo_reports_cap, setup_dev0),
        cmocka_unit_test_setup(test_per_device_cap, setup_dev0),
        cmocka_unit_test_setup(test_context_destroy_frees, setup_dev0),
        cmocka_unit_test_setup(test_null_arguments, setup_dev0),
        cmocka_unit_test_setup(test_unknown_free_forwarded, setup_dev0),
        cmocka_unit_test_setup(test_lookup_dlsym, setup_dev0),
        cmocka_unit_test_setup(test_lookup_get_proc_address, setup_dev0),
        cmocka_unit_test_setup(test_pool_reserve_counted, setup_dev0),
        cmocka_unit_test_setup(test_limits_heap_fifo, setup_dev0),
        cmocka_unit_test_setup(test_limits_stack, setup_dev0),
        cmocka_unit_test_setup(test_limits_die_with_context, setup_dev0),
        cmocka_unit_test_setup(test_pool_of_other_device, setup_dev0),
    };
    const struct CMUnitTest private[] = {
        cmocka_unit_test_setup(test_lookup_private_pointer, setup_dev0),
    };
    const struct CMUnitTest nolimit[] = {
        cmocka_unit_test_setup(test_nolimit_passes_through, setup_dev0),
    };
    const struct CMUnitTest badenv[] = {
        cmocka_unit_test_setup(test_badenv_fails_closed, setup_dev0),
    };
    const struct CMUnitTest nodriver[] = {
        cmocka_unit_test(test_nodriver_errors),
    };
    const struct CMUnitTest region[] = {
        cmocka_unit_test_setup(test_region_shared_cap, setup_dev0),
        cmocka_unit_test_setup(test_region_lock_holder_killed, setup_dev0),
        cmocka_unit_test_setup(test_region_exec, setup_dev0),
        cmocka_unit_test_setup(test_region_race, setup_dev0),
        cmocka_unit_test_setup(test_region_metering, setup_dev0),
        cmocka_unit_test_setup(test_cap_threads, setup_dev0),
    };
    const struct CMUnitTest corrupt[] = {
        cmocka_unit_test_setup(test_corrupt_region_falls_back, setup_dev0),
    };
    const struct CMUnitTest oversub[] = {
        cmocka_unit_test_setup(test_oversubscribe, setup_dev0),
        cmocka_unit_test_setup(test_oversubscribe_pitched, setup_dev0),
    };
    const struct CMUnitTest overhead[] = {
        cmocka_unit_test_setup(test_context_overhead, setup_dev0),
        cmocka_unit_test_setup(test_graph_memory_nodes, setup_dev0),
    };
    const struct CMUnitTest nvml[] = {
        cmocka_unit_test_setup(test_nvml_drift_logged, setup_dev0),
        cmocka_unit_test_setup(test_nvml_measured_overhead, setup_dev0),
        cmocka_unit_test_setup(test_nvml_memory_capped, setup_dev0),
    };
    const struct CMUnitTest share[] = {
        cmocka_unit_test_setup(test_share_converges, setup_dev0),
    };
    const struct CMUnitTest share_region[] = {
        cmocka_unit_test_setup(test_share_job_wide, setup_dev0),
    };
    const struct CMUnitTest share_soft[] = {
        cmocka_unit_test_setup(test_share_soft_alone, setup_dev0),
    };
    const struct CMUnitTest share_weights[] = {
        cmocka_unit_test(test_share_weights),
        cmocka_unit_test(test_share_hard_and_soft),
    };
    const struct CMUnitTest share_guard[] = {
        cmocka_unit_test(test_share_guard),
    };
    const struct CMUnitTest share_off[] = {
        cmocka_unit_test_setup(test_share_off, setup_dev0),
    };
    const char *g = argc > 1 ? argv[1] : "";

    if (!strcmp(g, "cap"))
        return cmocka_run_group_tests_name("shim_cap", cap, NULL, NULL);
    if (!strcmp(g, "private"))
        return cmocka_run_group_tests_name("shim_private", private, NULL, NULL);
    if (!strcmp(g, "nolimit"))
        return cmocka_run_group_tests_name("shim_nolimit", nolimit, NULL, NULL);
    if (!strcmp(g, "badenv"))
        return cmocka_run_group_tests_name("shim_badenv", badenv, NULL, NULL);
    if (!strcmp(g, "nodriver"))
        return cmocka_run_group_tests_name("shim_nodriver", nodriver, NULL, NULL);
    if (!strcmp(g, "oversub")) {
        prepare_region("empty");
        return cmocka_run_group_tests_name("shim_oversub", oversub, NULL, NULL);
    }
    if (!strcmp(g, "overhead"))
        return cmocka_run_group_tests_name("shim_overhead", overhead, NULL, NULL);
    if (!strcmp(g, "nvml")) {
        const char *log = getenv("ALLOT_SHIM_LOG");

        if (log)
            unlink(log);
        write_nvml_config();
        return cmocka_run_group_tests_name("shim_nvml", nvml, NULL, NULL);
    }
    if (!strcmp(g, "share"))
        return cmocka_run_group_tests_name("shim_share", share, NULL, NULL);
    if (!strcmp(g, "share-region")) {
        prepare_region("empty");
        return cmocka_run_group_tests_name("shim_share_region", share_region, NULL, NULL);
    }
    if (!strcmp(g, "share-soft")) {
        /* as the agent would: this job's entry, weight 25, soft ceiling 80 */
        share_fixture_folder(getenv("ALLOT_GPU_SHARE_DIR"), SHARE_HEX0);
        share_fixture_entry(getenv("ALLOT_GPU_SHARE_DIR"), SHARE_HEX0, "soft", 25, 80, geteuid(),
                            getegid());
        return cmocka_run_group_tests_name("shim_share_soft", share_soft, NULL, NULL);
    }
    if (!strcmp(g, "share-guard"))
        return cmocka_run_group_tests_name("shim_share_guard", share_guard, NULL, NULL);
    if (!strcmp(g, "share-weights")) {
        share_fixture_folder(getenv("ALLOT_GPU_SHARE_DIR"), SHARE_HEX0);
        return cmocka_run_group_tests_name("shim_share_weights", share_weights, NULL, NULL);
    }
    if (!strcmp(g, "share-child") && argc == 5)
        return share_child((int)strtol(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
                           (int)strtol(argv[4], NULL, 10));
    if (!strcmp(g, "share-off"))
        return cmocka_run_group_tests_name("shim_share_off", share_off, NULL, NULL);
    if (!strcmp(g, "region-exec"))
        return region_exec_child();
    if (!strcmp(g, "region")) {
        prepare_region("empty");
        return cmocka_run_group_tests_name("shim_region", region, NULL, NULL);
    }
    if (!strcmp(g, "corrupt-size") || !strcmp(g, "corrupt-magic")) {
        prepare_region(strcmp(g, "corrupt-size") ? "badmagic" : "garbage");
        return cmocka_run_group_tests_name("shim_corrupt", corrupt, NULL, NULL);
    }
    fprintf(stderr, "usage: %s cap|private|nolimit|badenv|nodriver|region|corrupt-*\n", argv[0]);
    return 2;
}
