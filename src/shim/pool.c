/*
 * Memory pools' reserved memory (docs/shim.md "Memory pools"). A
 * stream-ordered allocation counts from its request to its free request
 * (hooks.c); what its pool keeps reserved beyond its live allocations is
 * counted here, for the pools that keep it: those whose
 * CU_MEMPOOL_ATTR_RELEASE_THRESHOLD was raised above 0 (with 0 the driver
 * gives freed pool memory back at the next synchronisation; a pool set back
 * to 0 stays counted, its recounts following what it still holds).
 *
 * Each such pool counts its spare reserve, max(0, reserved - used) as the
 * driver reports them (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT and
 * CU_MEMPOOL_ATTR_USED_MEM_CURRENT), on its device, in the same books as
 * the allocations, so the cap covers live + spare. The figure is recounted
 * after every allocation from the pool, every free, cuMemPoolTrimTo, when
 * the program asks for memory info, and before an allocation is refused
 * (the driver may have given bytes back at a synchronisation, which the
 * shim does not hook). Spare bytes are already held by the driver: they
 * are added to the books even past the cap (shim_reserve_force), and an
 * allocation from the pool first draws on them, since the driver hands
 * them out before reserving more. The books never go negative: what is
 * taken off is at most what was counted.
 *
 * A pool's device is learnt where the program gets the pool
 * (cuMemPoolCreate, cuDeviceGetDefaultMemPool, cuDeviceGetMemPool), else
 * it is the calling thread's current device when the threshold is set.
 * Allocations from a pool are counted on its device (shim_pool_device,
 * for hooks.c), and not at all from a pool of pinned host memory (not
 * GPU memory; its reserve is never counted either).
 *
 * State: up to SHIM_MAX_POOLS pools under one mutex (taken before the
 * region's; never held while calling the driver), and the number of
 * counted pools per device, read without the lock so that programs that
 * never raise a threshold pay one load per stream-ordered allocation.
 */
#include <pthread.h>
#include <string.h>

#include "shim.h"

#define SHIM_MAX_POOLS 64

struct pool_entry {
    uint64_t pool;          /* the CUmemoryPool, 0: free entry */
    int dev;                /* its device, -1 unknown (or a host pool) */
    bool host;              /* pinned host memory: not GPU memory */
    bool counted;           /* release threshold above 0: its spare reserve counts */
    uint64_t counted_bytes; /* what the books hold for its spare reserve */
};

static struct {
    pthread_mutex_t lock;
    struct pool_entry e[SHIM_MAX_POOLS];
    int per_dev[SHIM_MAX_DEV]; /* counted pools per device (atomic reads) */
    int any;                   /* counted pools in all (atomic reads) */
    bool warned_full;
} pools = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool shim_pools_counted(int dev)
{
    if (dev < 0)
        return __atomic_load_n(&pools.any, __ATOMIC_ACQUIRE) > 0;
    return dev < SHIM_MAX_DEV && __atomic_load_n(&pools.per_dev[dev], __ATOMIC_ACQUIRE) > 0;
}

/* pool's entry, or NULL. Called locked. */
static struct pool_entry *find(uint64_t pool)
{
    for (int i = 0; pool && i < SHIM_MAX_POOLS; i++)
        if (pools.e[i].pool == pool)
            return &pools.e[i];
    return NULL;
}

/* pool's entry, added when missing (NULL when the table is full). Called
 * locked. */
static struct pool_entry *find_or_add(uint64_t pool, int dev)
{
    struct pool_entry *e = find(pool);

    for (int i = 0; !e && pool && i < SHIM_MAX_POOLS; i++) {
        if (!pools.e[i].pool) {
            e = &pools.e[i];
            *e = (struct pool_entry){.pool = pool, .dev = dev};
        }
    }
    return e;
}

/* Records that pool lives on dev. */
static void learn(CUmemoryPool pool, int dev)
{
    struct pool_entry *e;

    if (!pool || dev < 0 || dev >= SHIM_MAX_DEV)
        return;
    pthread_mutex_lock(&pools.lock);
    e = find_or_add((uint64_t)(uintptr_t)pool, dev);
    /* a counted pool keeps the device its bytes are booked on */
    if (e && !e->counted) {
        e->dev = dev;
        e->host = false;
    }
    pthread_mutex_unlock(&pools.lock);
}

/* Records that pool holds pinned host memory. */
static void learn_host(CUmemoryPool pool)
{
    struct pool_entry *e;

    if (!pool)
        return;
    pthread_mutex_lock(&pools.lock);
    e = find_or_add((uint64_t)(uintptr_t)pool, -1);
    if (e && !e->counted)
        e->host = true;
    pthread_mutex_unlock(&pools.lock);
}

int shim_pool_device(uint64_t pool)
{
    struct pool_entry *e;
    int dev;

    pthread_mutex_lock(&pools.lock);
    e = find(pool);
    dev = !e ? -1 : e->host ? SHIM_POOL_HOST : e->dev;
    pthread_mutex_unlock(&pools.lock);
    return dev;
}

/* Sets e's counted figure to spare, adjusting the books. Called locked. */
static bool settle_entry(struct pool_entry *e, uint64_t spare)
{
    bool gave_back = spare < e->counted_bytes;

    if (spare > e->counted_bytes)
        shim_reserve_force(e->dev, spare - e->counted_bytes);
    else if (gave_back)
        shim_release(e->dev, e->counted_bytes - spare);
    e->counted_bytes = spare;
    return gave_back;
}

/* Stops counting e (its bytes given back). Called locked. */
static void uncount(struct pool_entry *e)
{
    if (!e->counted)
        return;
    settle_entry(e, 0);
    e->counted = false;
    __atomic_fetch_sub(&pools.per_dev[e->dev], 1, __ATOMIC_ACQ_REL);
    __atomic_fetch_sub(&pools.any, 1, __ATOMIC_ACQ_REL);
}

/* The driver's reserved minus used bytes of pool. OUT *spare. Returns
 * false when the driver cannot tell. */
static bool spare_of(uint64_t pool, uint64_t *spare)
{
    typedef CUresult (*get_fn)(CUmemoryPool, CUmemPool_attribute, void *);
    get_fn get = (get_fn)shim_real(SHIM_FN_cuMemPoolGetAttribute);
    cuuint64_t reserved = 0, used = 0;
    CUmemoryPool p = (CUmemoryPool)(uintptr_t)pool;

    if (!get || get(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
        get(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS)
        return false;
    *spare = reserved > used ? reserved - used : 0;
    return true;
}

/* Recounts pool; returns whether bytes were given back. */
static bool refresh_one(uint64_t pool)
{
    struct pool_entry *e;
    uint64_t spare;
    bool gave_back = false;

    /* the driver is asked without the lock */
    if (!spare_of(pool, &spare))
        return false;
    pthread_mutex_lock(&pools.lock);
    e = find(pool);
    if (e && e->counted)
        gave_back = settle_entry(e, spare);
    pthread_mutex_unlock(&pools.lock);
    return gave_back;
}

void shim_pool_refresh_one(uint64_t pool)
{
    refresh_one(pool);
}

bool shim_pool_refresh(int dev)
{
    uint64_t list[SHIM_MAX_POOLS];
    bool gave_back = false;
    int n = 0;

    if (!shim_pools_counted(dev))
        return false;
    pthread_mutex_lock(&pools.lock);
    for (int i = 0; i < SHIM_MAX_POOLS; i++)
        if (pools.e[i].counted && (dev < 0 || pools.e[i].dev == dev))
            list[n++] = pools.e[i].pool;
    pthread_mutex_unlock(&pools.lock);
    for (int i = 0; i < n; i++)
        gave_back |= refresh_one(list[i]);
    return gave_back;
}

uint64_t shim_pool_current(int dev)
{
    __typeof__(&cuDeviceGetMemPool) get = REAL(cuDeviceGetMemPool);
    CUmemoryPool p = NULL;

    if (!get || get(&p, dev) != CUDA_SUCCESS)
        return 0;
    return (uint64_t)(uintptr_t)p;
}

bool shim_pool_draw(uint64_t pool, uint64_t bytes)
{
    struct pool_entry *e;
    bool counted = false;

    pthread_mutex_lock(&pools.lock);
    e = find(pool);
    if (e && e->counted) {
        uint64_t take = bytes < e->counted_bytes ? bytes : e->counted_bytes;

        /* the driver hands the spare bytes out first: they move from the
         * pool's figure to the allocation's */
        shim_release(e->dev, take);
        e->counted_bytes -= take;
        counted = true;
    }
    pthread_mutex_unlock(&pools.lock);
    return counted;
}

void shim_pool_reset_child(void)
{
    /* another thread of the parent may have held it at the fork */
    pthread_mutex_init(&pools.lock, NULL);
    memset(pools.e, 0, sizeof(pools.e));
    memset(pools.per_dev, 0, sizeof(pools.per_dev));
    pools.any = 0;
}

/* After the threshold of pool was set to threshold: counts the pool when it
 * is above 0, stops when it is 0. */
static void threshold_set(CUmemoryPool pool, uint64_t threshold)
{
    uint64_t key = (uint64_t)(uintptr_t)pool;
    struct pool_entry *e;
    bool count = false;
    int dev = -1;

    pthread_mutex_lock(&pools.lock);
    e = find(key);
    dev = e ? e->dev : -1;
    if (e && e->host) {
        /* pinned host memory: its reserve is not GPU memory */
        pthread_mutex_unlock(&pools.lock);
        return;
    }
    pthread_mutex_unlock(&pools.lock);
    /* a pool the shim has not seen: the current device's, most likely */
    if (dev < 0 && shim_current_device(&dev) != CUDA_SUCCESS)
        dev = -1;
    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return;
    pthread_mutex_lock(&pools.lock);
    e = find_or_add(key, dev);
    if (!e) {
        if (threshold && !pools.warned_full)
            shim_warn("more than %d memory pools: a pool's reserve is not counted", SHIM_MAX_POOLS);
        pools.warned_full = pools.warned_full || threshold;
    } else if (!threshold) {
        /* the driver gives the spare bytes back at the next synchronisation,
         * not now: a counted pool stays counted, and its recounts follow
         * what it still holds (0 once given back) */
        count = e->counted;
    } else if (!e->counted) {
        e->counted = true;
        __atomic_fetch_add(&pools.per_dev[e->dev], 1, __ATOMIC_ACQ_REL);
        __atomic_fetch_add(&pools.any, 1, __ATOMIC_ACQ_REL);
        count = true;
    }
    pthread_mutex_unlock(&pools.lock);
    if (count)
        refresh_one(key);
}

/* ---- the pool hooks ------------------------------------------------------------ */

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    __typeof__(&cuMemPoolCreate) real = REAL(cuMemPoolCreate);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(pool, props);
    if (rc != CUDA_SUCCESS || !pool || !props)
        return rc;
    /* a managed pool may migrate to any GPU: its device stays unknown
     * (its allocations count on the current device) unless it names one */
    if (props->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        learn(*pool, props->location.id);
    else if (props->allocType == CU_MEM_ALLOCATION_TYPE_PINNED &&
             (props->location.type == CU_MEM_LOCATION_TYPE_HOST ||
              props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
              props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT))
        learn_host(*pool);
    return rc;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    __typeof__(&cuMemPoolDestroy) real = REAL(cuMemPoolDestroy);
    struct pool_entry *e;
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* its reserve goes back to the device with it */
    pthread_mutex_lock(&pools.lock);
    e = find((uint64_t)(uintptr_t)pool);
    if (e) {
        uncount(e);
        e->pool = 0;
    }
    pthread_mutex_unlock(&pools.lock);
    return rc;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    __typeof__(&cuMemPoolSetAttribute) real = REAL(cuMemPoolSetAttribute);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(pool, attr, value);
    if (rc == CUDA_SUCCESS && attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD && value && pool)
        threshold_set(pool, *(const cuuint64_t *)value);
    return rc;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    __typeof__(&cuMemPoolTrimTo) real = REAL(cuMemPoolTrimTo);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(pool, keep);
    if (rc == CUDA_SUCCESS)
        refresh_one((uint64_t)(uintptr_t)pool);
    return rc;
}

/* A device's pool from the driver's `real` lookup, its device learnt. */
static CUresult device_pool(CUresult (*real)(CUmemoryPool *, CUdevice), CUmemoryPool *pool,
                            CUdevice dev)
{
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(pool, dev);
    if (rc == CUDA_SUCCESS && pool)
        learn(*pool, dev);
    return rc;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(REAL(cuDeviceGetDefaultMemPool), pool, dev);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(REAL(cuDeviceGetMemPool), pool, dev);
}
