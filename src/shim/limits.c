/*
 * Context limits that reserve device memory (docs/shim.md "Context
 * limits"): cuCtxSetLimit of
 *
 *   CU_LIMIT_MALLOC_HEAP_SIZE  the device malloc() heap: its size in bytes;
 *   CU_LIMIT_PRINTF_FIFO_SIZE  the device printf() FIFO: its size in bytes;
 *   CU_LIMIT_STACK_SIZE        bytes per GPU thread, which the driver
 *                              reserves for every thread the device can
 *                              hold at once: estimated as the value x
 *                              multiprocessors x threads per multiprocessor.
 *
 * A context starts with the driver's defaults, paid for by its overhead
 * (overhead.c); what a limit reserves beyond its default is counted
 * against the cap on the context's device, like an allocation: an
 * increase the cap has no room for is refused with
 * CUDA_ERROR_OUT_OF_MEMORY (what the driver answers when it cannot
 * reserve) before the driver sees it, a decrease gives bytes back (never
 * below the default), and the bytes die with the context. The default (the
 * base) is the value the driver reports (cuCtxGetLimit) the first time the
 * shim sees the limit set in that context; the value counted is the one
 * the driver reports after the set (it may round the request up).
 *
 * Each (context, limit) that was set has a record in the allocation table
 * (SHIM_SPACE_LIMIT, keyed by context x 4 + limit, its context as owner,
 * the base in span), so a destroyed or reset context gives its limits'
 * bytes back with its other records. Other limits reserve no memory the
 * shim can estimate and pass through (docs/shim.md lists what is left).
 *
 * State: one mutex, held across a set (reading the base, reserving,
 * calling the driver, recording) so two threads setting limits at once
 * cannot count from the same base twice; it comes before every other lock
 * of the shim (shim.h).
 */
#include <pthread.h>
#include <stdint.h>

#include "shim.h"

static pthread_mutex_t limits_lock = PTHREAD_MUTEX_INITIALIZER;

void shim_limits_reset_child(void)
{
    /* another thread of the parent may have held it at the fork */
    pthread_mutex_init(&limits_lock, NULL);
}

static bool counted_limit(CUlimit limit)
{
    return limit == CU_LIMIT_STACK_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE ||
           limit == CU_LIMIT_MALLOC_HEAP_SIZE;
}

/* The driver's current value of limit in the calling thread's context.
 * OUT *value. Returns false when the driver cannot tell. */
static bool current_value(CUlimit limit, uint64_t *value)
{
    typedef CUresult (*get_fn)(size_t *, CUlimit);
    get_fn get = (get_fn)shim_real(SHIM_FN_cuCtxGetLimit);
    size_t v = 0;

    if (!get || get(&v, limit) != CUDA_SUCCESS)
        return false;
    *value = v;
    return true;
}

/* How many threads dev holds at once (what a stack size is reserved for).
 * Returns 0 when the driver cannot tell. */
static uint64_t resident_threads(int dev)
{
    typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
    attr_fn attr = (attr_fn)shim_real(SHIM_FN_cuDeviceGetAttribute);
    int sms = 0, per_sm = 0;

    if (!attr || attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
        attr(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) != CUDA_SUCCESS ||
        sms <= 0 || per_sm <= 0)
        return 0;
    return (uint64_t)sms * (uint64_t)per_sm;
}

/* The bytes value of limit reserves beyond base, with threads resident
 * threads for the stack (saturating). */
static uint64_t beyond_base(CUlimit limit, uint64_t value, uint64_t base, uint64_t threads)
{
    uint64_t extra = value > base ? value - base : 0, r;

    if (limit != CU_LIMIT_STACK_SIZE)
        return extra;
    return __builtin_mul_overflow(extra, threads, &r) ? UINT64_MAX : r;
}

/* Moves the books of dev from held to bytes: bytes the driver holds
 * already, so an increase is forced past the cap. */
static void rebook(int dev, uint64_t held, uint64_t bytes)
{
    if (bytes > held)
        shim_reserve_force(dev, bytes - held);
    else if (held > bytes)
        shim_release(dev, held - bytes);
}

/*
 * The set itself, called locked: reserves what the new value takes beyond
 * the bytes counted so far, calls the driver, settles the books at the
 * value it then reports, records the (context, limit). Returns the
 * driver's answer, or CUDA_ERROR_OUT_OF_MEMORY when the cap refuses (the
 * driver untouched).
 */
static CUresult set_counted(CUresult (*real)(CUlimit, size_t), CUlimit limit, size_t value, int dev,
                            uint64_t ctx)
{
    struct shim_alloc a = {
        .key = ctx * 4 + (uint64_t)limit, .ctx = ctx, .dev = dev, .space = SHIM_SPACE_LIMIT};
    uint64_t base = 0, counted = 0, before = 0, want, held, actual, cap, threads = 0, got;
    struct shim_alloc old;
    CUresult rc;

    if (shim_table_get(&shim_allocs, a.key, SHIM_SPACE_LIMIT, &old)) {
        base = old.span;
        counted = old.bytes;
    } else if (!current_value(limit, &base)) {
        base = 0; /* the default unknown: the whole value counts */
    }
    if (limit == CU_LIMIT_STACK_SIZE && !(threads = resident_threads(dev))) {
        /* no estimate: a capped device refuses a larger stack, an
         * uncapped one passes it uncounted */
        if (shim_limit(dev, &cap) && value > base)
            return CUDA_ERROR_OUT_OF_MEMORY;
        return real(limit, value);
    }
    if (!current_value(limit, &before))
        before = base;
    want = beyond_base(limit, value, base, threads);
    if (want > counted && shim_reserve(dev, want - counted) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    held = want > counted ? want : counted;
    rc = real(limit, value);
    if (rc != CUDA_SUCCESS) {
        rebook(dev, held, counted);
        return rc;
    }
    /* the driver may round the value: what it reports is what it holds */
    actual = current_value(limit, &got) ? beyond_base(limit, got, base, threads) : want;
    rebook(dev, held, actual);
    a.bytes = actual;
    a.span = base;
    if (!shim_table_replace(&shim_allocs, &a, &old)) {
        /* the table cannot hold it: undone, so the books miss nothing */
        real(limit, (size_t)before);
        rebook(dev, actual, counted);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    __typeof__(&cuCtxSetLimit) real = REAL(cuCtxSetLimit);
    uint64_t ctx;
    CUresult rc;
    int dev;

    if (!real)
        return shim_missing();
    if (!counted_limit(limit))
        return real(limit, value);
    /* no current context: the driver's own error */
    ctx = shim_current_ctx();
    if (!ctx || shim_current_device(&dev) != CUDA_SUCCESS || dev < 0 || dev >= SHIM_MAX_DEV)
        return real(limit, value);
    pthread_mutex_lock(&limits_lock);
    rc = set_counted(real, limit, value, dev, ctx);
    pthread_mutex_unlock(&limits_lock);
    return rc;
}
