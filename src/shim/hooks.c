/*
 * The exported cu* hooks of liballot-cuda.so (docs/shim.md). Each hook
 * checks its arguments, reserves the bytes against the cap (account.c),
 * calls the driver's own function and then records the allocation in the
 * table (table.c), or gives the reservation back when the driver refused.
 * Frees take the record out first and put it back if the driver refuses,
 * so a pointer the driver hands out again right away is never seen twice;
 * a pointer the shim does not know is still passed to the driver.
 *
 * Errors are CUresult codes: CUDA_ERROR_INVALID_VALUE for a NULL output
 * pointer, CUDA_ERROR_OUT_OF_MEMORY over the cap, CUDA_ERROR_NOT_INITIALIZED
 * when the driver could not be loaded, CUDA_ERROR_NOT_FOUND when it lacks
 * the function. Sizes of zero are the driver's business: passed through
 * uncounted.
 */
#include <stdint.h>

#include "shim.h"

/* Pitch the estimate assumes before the driver says (it aligns rows to at
 * most this on every GPU so far); a larger real pitch is reserved after. */
#define PITCH_GUESS 512u

CUresult shim_missing(void)
{
    return shim_driver_loaded() ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_NOT_INITIALIZED;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;

    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

CUresult shim_current_device(int *dev)
{
    typedef CUresult (*get_fn)(CUdevice *);
    get_fn get = (get_fn)shim_real(SHIM_FN_cuCtxGetDevice);

    if (!get)
        return shim_missing();
    return get(dev);
}

/* The calling thread's current context as a table key, 0 if none. */
uint64_t shim_current_ctx(void)
{
    typedef CUresult (*get_fn)(CUcontext *);
    get_fn get = (get_fn)shim_real(SHIM_FN_cuCtxGetCurrent);
    CUcontext c = NULL;

    if (!get || get(&c) != CUDA_SUCCESS)
        return 0;
    return (uint64_t)(uintptr_t)c;
}

/* Reserves bytes on the calling thread's current device. OUT *dev, *ctx
 * (the context the allocation will die with). */
static CUresult begin(int *dev, uint64_t *ctx, uint64_t bytes)
{
    CUresult rc = shim_current_device(dev);

    *ctx = shim_current_ctx();
    return rc != CUDA_SUCCESS ? rc : shim_reserve(*dev, bytes);
}

static void undo_ptr(uint64_t key)
{
    __typeof__(&cuMemFree_v2) f = REAL(cuMemFree_v2);

    if (f)
        f((CUdeviceptr)key);
}

static void undo_array(uint64_t key)
{
    __typeof__(&cuArrayDestroy) f = REAL(cuArrayDestroy);

    if (f)
        f((CUarray)(uintptr_t)key);
}

/* Gives a record's bytes back to the books they were taken from. */
static void give_back(const struct shim_alloc *a)
{
    if (a->over)
        shim_release_over(a->dev, a->bytes);
    else
        shim_release(a->dev, a->bytes);
}

/*
 * After the driver answered rc to an allocation that reserved bytes on
 * dev: records (key, space) on success, gives the bytes back otherwise.
 * When the table cannot take the record the allocation is undone, so the
 * books never miss memory, and the caller sees CUDA_ERROR_OUT_OF_MEMORY.
 */
static CUresult settle(CUresult rc, int dev, uint64_t ctx, uint64_t bytes, int space, uint64_t key,
                       void (*undo)(uint64_t))
{
    struct shim_alloc a = {
        .key = key, .bytes = bytes, .ctx = ctx, .dev = dev, .space = (uint8_t)space};
    struct shim_alloc old;

    if (rc != CUDA_SUCCESS) {
        shim_release(dev, bytes);
        return rc;
    }
    if (!shim_table_replace(&shim_allocs, &a, &old)) {
        undo(key);
        shim_release(dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* the driver reused the value: what it named was freed without the
     * shim seeing it (a destroyed context, a reset device) */
    if (old.used)
        give_back(&old);
    return CUDA_SUCCESS;
}

/*
 * Frees (key, space) through call's answer: the record comes out first and
 * goes back if the driver refuses. Returns the driver's answer.
 */
static CUresult forget(CUresult (*call)(uint64_t, void *), void *arg, uint64_t key, int space)
{
    struct shim_alloc a;
    bool known = shim_table_take(&shim_allocs, key, space, &a);
    CUresult rc = call(key, arg);

    if (known) {
        if (rc == CUDA_SUCCESS)
            give_back(&a);
        else
            shim_table_put(&shim_allocs, &a);
    }
    /* a pointer freed into a pool that keeps it: the pool's spare grew */
    if (rc == CUDA_SUCCESS && space == SHIM_SPACE_PTR && shim_pools_counted(-1))
        shim_pool_refresh(known ? a.dev : -1);
    return rc;
}

/* ---- cuMemAlloc and its relatives: one device pointer per call ----------- */

/*
 * Oversubscription (ALLOT_GPU_MEMORY_OVERSUBSCRIBE): an allocation the cap
 * refused becomes managed memory whose preferred location is the host, so
 * it lives in host memory and is reached over the bus (it spills instead
 * of failing), counted against the oversubscription allowance apart from
 * the cap. If the advice cannot be given the memory could migrate onto
 * the GPU past the cap: it is freed and the allocation refused.
 */
static CUresult alloc_over(CUdeviceptr *dptr, size_t bytesize, int dev, uint64_t ctx)
{
    typedef CUresult (*advise_fn)(CUdeviceptr, size_t, int, CUdevice);
    typedef CUresult (*advise2_fn)(CUdeviceptr, size_t, int, CUmemLocation);
    __typeof__(&cuMemAllocManaged) managed = REAL(cuMemAllocManaged);
    advise2_fn advise2 = (advise2_fn)shim_real(SHIM_FN_cuMemAdvise_v2);
    advise_fn advise = (advise_fn)shim_real(SHIM_FN_cuMemAdvise);
    struct shim_alloc a = {.bytes = bytesize, .ctx = ctx, .dev = dev, .over = true}, old;
    CUdeviceptr p = 0;
    CUresult rc;

    if (!managed || (!advise2 && !advise) || shim_reserve_over(dev, bytesize) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = managed(&p, bytesize, CU_MEM_ATTACH_GLOBAL);
    if (rc != CUDA_SUCCESS) {
        shim_release_over(dev, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = advise2 ? advise2(p, bytesize, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                           (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0})
                 : advise(p, bytesize, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_DEVICE_CPU);
    a.key = p;
    if (rc != CUDA_SUCCESS || !shim_table_replace(&shim_allocs, &a, &old)) {
        undo_ptr(p);
        shim_release_over(dev, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (old.used)
        give_back(&old);
    *dptr = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    __typeof__(&cuMemAlloc_v2) real = REAL(cuMemAlloc_v2);
    uint64_t ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!bytesize)
        return real(dptr, bytesize);
    if ((rc = begin(&dev, &ctx, bytesize)) != CUDA_SUCCESS) {
        /* beyond the cap: spill to the host when the job may */
        if (rc == CUDA_ERROR_OUT_OF_MEMORY && shim_over_limit())
            return alloc_over(dptr, bytesize, dev, ctx);
        return rc;
    }
    rc = real(dptr, bytesize);
    return settle(rc, dev, ctx, bytesize, SHIM_SPACE_PTR, rc ? 0 : *dptr, undo_ptr);
}

static void undo_ptr_v1(uint64_t key)
{
    __typeof__(&cuMemFree) f = REAL(cuMemFree);

    if (f)
        f((CUdeviceptr_v1)key);
}

/* The 32-bit API of CUDA < 3.2, still exported by drivers. */
CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    __typeof__(&cuMemAlloc) real = REAL(cuMemAlloc);
    uint64_t ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!bytesize)
        return real(dptr, bytesize);
    if ((rc = begin(&dev, &ctx, bytesize)) != CUDA_SUCCESS)
        return rc;
    rc = real(dptr, bytesize);
    return settle(rc, dev, ctx, bytesize, SHIM_SPACE_PTR, rc ? 0 : *dptr, undo_ptr_v1);
}

/* A pitched allocation reserves width rounded to PITCH_GUESS x height
 * before the driver answers; this settles it at pitch x height. */
static CUresult settle_pitch(CUresult rc, int dev, uint64_t ctx, uint64_t guess, uint64_t pitch,
                             uint64_t height, uint64_t key, void (*undo)(uint64_t))
{
    uint64_t actual;

    if (rc != CUDA_SUCCESS)
        return settle(rc, dev, ctx, guess, SHIM_SPACE_PTR, 0, undo);
    /* what the rows really take: the driver's pitch times the height */
    actual = mul_sat(pitch, height);
    if (actual > guess && shim_reserve(dev, actual - guess) != CUDA_SUCCESS) {
        undo(key);
        shim_release(dev, guess);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (actual < guess)
        shim_release(dev, guess - actual);
    return settle(rc, dev, ctx, actual, SHIM_SPACE_PTR, key, undo);
}

static uint64_t pitch_guess(uint64_t width, uint64_t height)
{
    return mul_sat((width + PITCH_GUESS - 1) / PITCH_GUESS * PITCH_GUESS, height);
}

/*
 * Oversubscription of a pitched allocation the cap refused: managed memory
 * as for cuMemAlloc_v2 (alloc_over), its rows PITCH_GUESS-aligned (the
 * most the driver aligns them to on current GPUs, and a multiple of every
 * element size), the pitch told to the program. elem is checked as the
 * driver would (4, 8 or 16), since the driver is not asked.
 */
static CUresult alloc_pitch_over(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                 unsigned int elem, int dev, uint64_t ctx)
{
    uint64_t row = (width + PITCH_GUESS - 1) / PITCH_GUESS * PITCH_GUESS;
    uint64_t bytes = mul_sat(row, height);
    CUresult rc;

    if (elem != 4 && elem != 8 && elem != 16)
        return CUDA_ERROR_INVALID_VALUE;
    if (row < width || bytes == UINT64_MAX || bytes > SIZE_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = alloc_over(dptr, (size_t)bytes, dev, ctx);
    if (rc == CUDA_SUCCESS)
        *pitch = (size_t)row;
    return rc;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem)
{
    __typeof__(&cuMemAllocPitch_v2) real = REAL(cuMemAllocPitch_v2);
    uint64_t guess, ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!dptr || !pitch)
        return CUDA_ERROR_INVALID_VALUE;
    if (!width || !height)
        return real(dptr, pitch, width, height, elem);
    guess = pitch_guess(width, height);
    if ((rc = begin(&dev, &ctx, guess)) != CUDA_SUCCESS) {
        /* beyond the cap: spill to the host when the job may */
        if (rc == CUDA_ERROR_OUT_OF_MEMORY && shim_over_limit())
            return alloc_pitch_over(dptr, pitch, width, height, elem, dev, ctx);
        return rc;
    }
    rc = real(dptr, pitch, width, height, elem);
    if (rc != CUDA_SUCCESS)
        return settle_pitch(rc, dev, ctx, guess, 0, height, 0, undo_ptr);
    rc = settle_pitch(rc, dev, ctx, guess, *pitch, height, *dptr, undo_ptr);
    /* the driver's pitch took it past the cap (the allocation is undone) */
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && shim_over_limit())
        return alloc_pitch_over(dptr, pitch, width, height, elem, dev, ctx);
    return rc;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
                         unsigned int height, unsigned int elem)
{
    __typeof__(&cuMemAllocPitch) real = REAL(cuMemAllocPitch);
    uint64_t guess, ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!dptr || !pitch)
        return CUDA_ERROR_INVALID_VALUE;
    if (!width || !height)
        return real(dptr, pitch, width, height, elem);
    guess = pitch_guess(width, height);
    if ((rc = begin(&dev, &ctx, guess)) != CUDA_SUCCESS)
        return rc;
    rc = real(dptr, pitch, width, height, elem);
    return settle_pitch(rc, dev, ctx, guess, rc ? 0 : *pitch, height, rc ? 0 : *dptr, undo_ptr_v1);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    __typeof__(&cuMemAllocManaged) real = REAL(cuMemAllocManaged);
    uint64_t ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!bytesize)
        return real(dptr, bytesize, flags);
    /* counted in full on the current device: it may all migrate there */
    if ((rc = begin(&dev, &ctx, bytesize)) != CUDA_SUCCESS)
        return rc;
    rc = real(dptr, bytesize, flags);
    return settle(rc, dev, ctx, bytesize, SHIM_SPACE_PTR, rc ? 0 : *dptr, undo_ptr);
}

/*
 * Stream-ordered allocations are counted when they are requested and
 * given back when their free is requested: on the pool's device for
 * cuMemAllocFromPoolAsync (a pool of another device than the current
 * one allocates there; a pool of pinned host memory is not GPU memory and
 * is not counted; a pool the shim never saw counts on the current
 * device), on the calling thread's current device for cuMemAllocAsync;
 * the _ptsz twins differ only in the real function called. When a pool of the device keeps its
 * freed memory (a raised release threshold, pool.c), the allocation first draws on what that pool
 * keeps spare, and the pool is recounted after the driver answered. pool is the pool asked for
 * (NULL: the device's current one).
 */
static CUresult alloc_stream(void *fn, bool from_pool, CUdeviceptr *dptr, size_t bytesize,
                             CUmemoryPool pool, CUstream s)
{
    typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);
    typedef CUresult (*pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    uint64_t ctx, key = 0;
    bool counted = false;
    CUresult rc;
    int dev;

    if (!fn)
        return shim_missing();
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!bytesize)
        return from_pool ? ((pool_fn)fn)(dptr, bytesize, pool, s)
                         : ((async_fn)fn)(dptr, bytesize, s);
    rc = shim_current_device(&dev);
    ctx = shim_current_ctx();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (from_pool && pool) {
        int pool_dev = shim_pool_device((uint64_t)(uintptr_t)pool);

        if (pool_dev == SHIM_POOL_HOST)
            return ((pool_fn)fn)(dptr, bytesize, pool, s);
        if (pool_dev >= 0)
            dev = pool_dev;
    }
    if (shim_pools_counted(-1)) {
        key = pool ? (uint64_t)(uintptr_t)pool : shim_pool_current(dev);
        counted = shim_pool_draw(key, bytesize);
    }
    rc = shim_reserve(dev, bytesize);
    if (rc == CUDA_SUCCESS) {
        rc = from_pool ? ((pool_fn)fn)(dptr, bytesize, pool, s) : ((async_fn)fn)(dptr, bytesize, s);
        rc = settle(rc, dev, ctx, bytesize, SHIM_SPACE_PTR, rc ? 0 : *dptr, undo_ptr);
    }
    /* what the pool keeps spare now (the draw undone if it refused) */
    if (counted)
        shim_pool_refresh_one(key);
    return rc;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    return alloc_stream(shim_real(SHIM_FN_cuMemAllocAsync), false, dptr, bytesize, NULL, s);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    return alloc_stream(shim_real(SHIM_FN_cuMemAllocAsync_ptsz), false, dptr, bytesize, NULL, s);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s)
{
    return alloc_stream(shim_real(SHIM_FN_cuMemAllocFromPoolAsync), true, dptr, bytesize, pool, s);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream s)
{
    return alloc_stream(shim_real(SHIM_FN_cuMemAllocFromPoolAsync_ptsz), true, dptr, bytesize, pool,
                        s);
}

/* ---- frees ------------------------------------------------------------------ */

static CUresult call_free_v2(uint64_t key, void *fn)
{
    return ((__typeof__(&cuMemFree_v2))fn)((CUdeviceptr)key);
}

static CUresult call_free_v1(uint64_t key, void *fn)
{
    return ((__typeof__(&cuMemFree))fn)((CUdeviceptr_v1)key);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    void *real = shim_real(SHIM_FN_cuMemFree_v2);

    return real ? forget(call_free_v2, real, dptr, SHIM_SPACE_PTR) : shim_missing();
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    void *real = shim_real(SHIM_FN_cuMemFree);

    return real ? forget(call_free_v1, real, dptr, SHIM_SPACE_PTR) : shim_missing();
}

struct free_async_arg {
    CUresult (*fn)(CUdeviceptr, CUstream);
    CUstream s;
};

static CUresult call_free_async(uint64_t key, void *arg)
{
    struct free_async_arg *a = arg;

    return a->fn((CUdeviceptr)key, a->s);
}

static CUresult free_async(enum shim_fn f, CUdeviceptr dptr, CUstream s)
{
    struct free_async_arg a = {(CUresult(*)(CUdeviceptr, CUstream))shim_real(f), s};

    return a.fn ? forget(call_free_async, &a, dptr, SHIM_SPACE_PTR) : shim_missing();
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    return free_async(SHIM_FN_cuMemFreeAsync, dptr, s);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    return free_async(SHIM_FN_cuMemFreeAsync_ptsz, dptr, s);
}

/* ---- arrays: sized from their descriptors ---------------------------------- */

/* Bytes of one channel of format (CUarray_format); rounded up for packed
 * and block-compressed formats, 4 for formats this table does not know. */
static uint64_t channel_bytes(int format)
{
    switch (format) {
    case 0x01: /* UNSIGNED_INT8 */
    case 0x08: /* SIGNED_INT8 */
    case 0xc0: /* UNORM_INT8X1 ... */
    case 0xc1:
    case 0xc2:
    case 0xc6: /* SNORM_INT8X1 ... */
    case 0xc7:
    case 0xc8:
        return 1;
    case 0x02: /* UNSIGNED_INT16 */
    case 0x09: /* SIGNED_INT16 */
    case 0x10: /* HALF */
    case 0xc3: /* UNORM_INT16X1 ... */
    case 0xc4:
    case 0xc5:
    case 0xc9: /* SNORM_INT16X1 ... */
    case 0xca:
    case 0xcb:
        return 2;
    default:
        return 4;
    }
}

static uint64_t array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels)
{
    uint64_t n = mul_sat(w, h ? h : 1);

    n = mul_sat(n, d ? d : 1);
    n = mul_sat(n, channels ? channels : 1);
    return mul_sat(n, channel_bytes(format));
}

CUresult cuArrayCreate_v2(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    __typeof__(&cuArrayCreate_v2) real = REAL(cuArrayCreate_v2);
    uint64_t bytes;
    uint64_t ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!arr || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    bytes = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
    if ((rc = begin(&dev, &ctx, bytes)) != CUDA_SUCCESS)
        return rc;
    rc = real(arr, desc);
    return settle(rc, dev, ctx, bytes, SHIM_SPACE_ARRAY, rc ? 0 : (uint64_t)(uintptr_t)*arr,
                  undo_array);
}

CUresult cuArray3DCreate_v2(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    __typeof__(&cuArray3DCreate_v2) real = REAL(cuArray3DCreate_v2);
    uint64_t bytes;
    uint64_t ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!arr || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    bytes = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
    if ((rc = begin(&dev, &ctx, bytes)) != CUDA_SUCCESS)
        return rc;
    rc = real(arr, desc);
    return settle(rc, dev, ctx, bytes, SHIM_SPACE_ARRAY, rc ? 0 : (uint64_t)(uintptr_t)*arr,
                  undo_array);
}

CUresult cuArrayCreate(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)
{
    __typeof__(&cuArrayCreate) real = REAL(cuArrayCreate);
    uint64_t bytes, ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!arr || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    bytes = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
    if ((rc = begin(&dev, &ctx, bytes)) != CUDA_SUCCESS)
        return rc;
    rc = real(arr, desc);
    return settle(rc, dev, ctx, bytes, SHIM_SPACE_ARRAY, rc ? 0 : (uint64_t)(uintptr_t)*arr,
                  undo_array);
}

CUresult cuArray3DCreate(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)
{
    __typeof__(&cuArray3DCreate) real = REAL(cuArray3DCreate);
    uint64_t bytes, ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!arr || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    bytes = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
    if ((rc = begin(&dev, &ctx, bytes)) != CUDA_SUCCESS)
        return rc;
    rc = real(arr, desc);
    return settle(rc, dev, ctx, bytes, SHIM_SPACE_ARRAY, rc ? 0 : (uint64_t)(uintptr_t)*arr,
                  undo_array);
}

static void undo_mipmap(uint64_t key)
{
    __typeof__(&cuMipmappedArrayDestroy) f = REAL(cuMipmappedArrayDestroy);

    if (f)
        f((CUmipmappedArray)(uintptr_t)key);
}

/* Every level of the mipmap, each dimension halved per level (at least 1). */
static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels)
{
    uint64_t sum = 0;

    for (unsigned int l = 0; l < levels && l < 64; l++) {
        size_t w = d->Width >> l, h = d->Height >> l, z = d->Depth >> l;
        uint64_t b = array_bytes(w ? w : 1, d->Height ? (h ? h : 1) : 0, d->Depth ? (z ? z : 1) : 0,
                                 d->Format, d->NumChannels);

        sum = sum > UINT64_MAX - b ? UINT64_MAX : sum + b;
    }
    return sum;
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *arr, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                unsigned int levels)
{
    __typeof__(&cuMipmappedArrayCreate) real = REAL(cuMipmappedArrayCreate);
    uint64_t bytes, ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!arr || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    bytes = mipmap_bytes(desc, levels ? levels : 1);
    if ((rc = begin(&dev, &ctx, bytes)) != CUDA_SUCCESS)
        return rc;
    rc = real(arr, desc, levels);
    return settle(rc, dev, ctx, bytes, SHIM_SPACE_MIPMAP, rc ? 0 : (uint64_t)(uintptr_t)*arr,
                  undo_mipmap);
}

static CUresult call_mipmap_destroy(uint64_t key, void *fn)
{
    return ((__typeof__(&cuMipmappedArrayDestroy))fn)((CUmipmappedArray)(uintptr_t)key);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray arr)
{
    void *real = shim_real(SHIM_FN_cuMipmappedArrayDestroy);

    return real ? forget(call_mipmap_destroy, real, (uint64_t)(uintptr_t)arr, SHIM_SPACE_MIPMAP)
                : shim_missing();
}

static CUresult call_destroy(uint64_t key, void *fn)
{
    return ((__typeof__(&cuArrayDestroy))fn)((CUarray)(uintptr_t)key);
}

CUresult cuArrayDestroy(CUarray arr)
{
    void *real = shim_real(SHIM_FN_cuArrayDestroy);

    return real ? forget(call_destroy, real, (uint64_t)(uintptr_t)arr, SHIM_SPACE_ARRAY)
                : shim_missing();
}

/* ---- contexts: destroying one frees its memory --------------------------- */

/* Primary contexts by device, learnt from cuDevicePrimaryCtxRetain, so a
 * reset of the device can drop their allocations. */
static uint64_t primary_ctx[SHIM_MAX_DEV];

uint64_t shim_primary_ctx(int dev)
{
    return dev >= 0 && dev < SHIM_MAX_DEV ? __atomic_load_n(&primary_ctx[dev], __ATOMIC_ACQUIRE)
                                          : 0;
}

bool shim_record(const struct shim_alloc *a)
{
    struct shim_alloc old;

    if (!shim_table_replace(&shim_allocs, a, &old))
        return false;
    if (old.used)
        give_back(&old);
    return true;
}

bool shim_forget(uint64_t key, int space)
{
    struct shim_alloc a;

    if (!shim_table_take(&shim_allocs, key, space, &a))
        return false;
    give_back(&a);
    return true;
}

void shim_drop_owner(uint64_t ctx)
{
    uint64_t freed[SHIM_MAX_DEV] = {0}, freed_over[SHIM_MAX_DEV] = {0};

    if (!ctx || !shim_table_take_ctx(&shim_allocs, ctx, freed, freed_over))
        return;
    for (int d = 0; d < SHIM_MAX_DEV; d++) {
        if (freed[d])
            shim_release(d, freed[d]);
        if (freed_over[d])
            shim_release_over(d, freed_over[d]);
    }
}

static CUresult ctx_destroy(enum shim_fn f, CUcontext c)
{
    CUresult (*real)(CUcontext) = (CUresult(*)(CUcontext))shim_real(f);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(c);
    if (rc == CUDA_SUCCESS)
        shim_drop_owner((uint64_t)(uintptr_t)c);
    return rc;
}

CUresult cuCtxDestroy_v2(CUcontext c)
{
    return ctx_destroy(SHIM_FN_cuCtxDestroy_v2, c);
}

CUresult cuCtxDestroy(CUcontext c)
{
    return ctx_destroy(SHIM_FN_cuCtxDestroy, c);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice dev)
{
    __typeof__(&cuDevicePrimaryCtxRetain) real = REAL(cuDevicePrimaryCtxRetain);
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    rc = real(c, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dev >= 0 && dev < SHIM_MAX_DEV)
        __atomic_store_n(&primary_ctx[dev], (uint64_t)(uintptr_t)*c, __ATOMIC_RELEASE);
    /* its overhead, the first time (it may be refused by the cap) */
    return shim_primary_retained(*c, dev);
}

static CUresult primary_reset(enum shim_fn f, CUdevice dev)
{
    CUresult (*real)(CUdevice) = (CUresult(*)(CUdevice))shim_real(f);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(dev);
    /* its allocations and its overhead go; its references stay (the
     * driver keeps them), and the next retain counts the overhead again */
    if (rc == CUDA_SUCCESS && dev >= 0 && dev < SHIM_MAX_DEV)
        shim_drop_owner(__atomic_load_n(&primary_ctx[dev], __ATOMIC_ACQUIRE));
    return rc;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return primary_reset(SHIM_FN_cuDevicePrimaryCtxReset_v2, dev);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return primary_reset(SHIM_FN_cuDevicePrimaryCtxReset, dev);
}

/* ---- what the program is told about memory ------------------------------- */

/* Applies the current device's cap to the driver's free and total:
 * total = the cap (or the device, if smaller); free = what the cap leaves,
 * never more than the driver says is free. */
static void cap_info(uint64_t *f, uint64_t *t)
{
    uint64_t limit, used;
    int dev;

    if (shim_current_device(&dev) != CUDA_SUCCESS || !shim_limit(dev, &limit))
        return;
    if (limit < *t)
        *t = limit;
    shim_pool_refresh(dev);
    used = shim_used(dev);
    if (used >= *t)
        *f = 0;
    else if (*t - used < *f)
        *f = *t - used;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    __typeof__(&cuMemGetInfo_v2) real = REAL(cuMemGetInfo_v2);
    size_t f, t;
    uint64_t f64, t64;
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = real(&f, &t)) != CUDA_SUCCESS)
        return rc;
    f64 = f;
    t64 = t;
    cap_info(&f64, &t64);
    *free_bytes = (size_t)f64;
    *total = (size_t)t64;
    return CUDA_SUCCESS;
}

/* The 32-bit form: the driver's values are already clamped to 4 GiB - 1,
 * and capping only lowers them. */
CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    __typeof__(&cuMemGetInfo) real = REAL(cuMemGetInfo);
    unsigned int f, t;
    uint64_t f64, t64;
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = real(&f, &t)) != CUDA_SUCCESS)
        return rc;
    f64 = f;
    t64 = t;
    cap_info(&f64, &t64);
    *free_bytes = (unsigned int)f64;
    *total = (unsigned int)t64;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    __typeof__(&cuDeviceTotalMem_v2) real = REAL(cuDeviceTotalMem_v2);
    uint64_t limit;
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = real(bytes, dev)) != CUDA_SUCCESS)
        return rc;
    if (shim_limit(dev, &limit) && limit < *bytes)
        *bytes = (size_t)limit;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    __typeof__(&cuDeviceTotalMem) real = REAL(cuDeviceTotalMem);
    uint64_t limit;
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = real(bytes, dev)) != CUDA_SUCCESS)
        return rc;
    if (shim_limit(dev, &limit) && limit < *bytes)
        *bytes = (unsigned int)limit;
    return CUDA_SUCCESS;
}

/* ---- run-time lookup through the driver ----------------------------------- */

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags)
{
    __typeof__(&cuGetProcAddress) real = REAL(cuGetProcAddress);
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    rc = real(symbol, pfn, cuda_version, flags);
    if (rc == CUDA_SUCCESS)
        *pfn = shim_swap_proc(symbol, *pfn, cuda_version, flags);
    return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    __typeof__(&cuGetProcAddress_v2) real = REAL(cuGetProcAddress_v2);
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    rc = real(symbol, pfn, cuda_version, flags, status);
    if (rc == CUDA_SUCCESS)
        *pfn = shim_swap_proc(symbol, *pfn, cuda_version, flags);
    return rc;
}
