/*
 * Reserve/release against the memory cap. With a shared region the books
 * are the job's (region.c); without one, this process's own counters,
 * updated with compare-and-swap so two threads cannot both take the last
 * bytes. A device beyond SHIM_MAX_DEV with a cap set is refused (the cap
 * cannot be kept there); without a cap it is not counted.
 */
#include <string.h>
#include <unistd.h>

#include "shim.h"

static struct {
    struct shim_config cfg;
    struct shim_region *region; /* owned; NULL: per-process books */
    uint64_t used[SHIM_MAX_DEV];
    uint64_t over[SHIM_MAX_DEV]; /* oversubscribed, without a region */
} books;

void shim_account_init(const struct shim_config *c, struct shim_region *region)
{
    books.cfg = *c;
    books.region = region;
    memset(books.used, 0, sizeof(books.used));
    memset(books.over, 0, sizeof(books.over));
}

struct shim_region *shim_account_region(void)
{
    return books.region;
}

bool shim_limit(int dev, uint64_t *limit)
{
    if (dev < 0)
        return false;
    if (dev >= SHIM_MAX_DEV) {
        /* beyond the table: the general cap, if any */
        *limit = 0;
        return books.cfg.any_limit;
    }
    *limit = books.cfg.limit[dev];
    return books.cfg.limited[dev];
}

/* Adds bytes to *v unless that takes it past limit (when limited), with
 * compare-and-swap, so two threads cannot both take the last bytes. */
static CUresult add_within(uint64_t *v, uint64_t bytes, bool limited, uint64_t limit)
{
    for (;;) {
        uint64_t old = __atomic_load_n(v, __ATOMIC_RELAXED);

        if (limited && (old > limit || bytes > limit - old))
            return CUDA_ERROR_OUT_OF_MEMORY;
        if (__atomic_compare_exchange_n(v, &old, old + bytes, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return CUDA_SUCCESS;
    }
}

/* Takes bytes off *v, never below 0. */
static void sub_floor(uint64_t *v, uint64_t bytes)
{
    for (;;) {
        uint64_t old = __atomic_load_n(v, __ATOMIC_RELAXED);
        uint64_t next = bytes < old ? old - bytes : 0;

        if (__atomic_compare_exchange_n(v, &old, next, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return;
    }
}

static CUresult reserve_once(int dev, uint64_t bytes, bool limited, uint64_t limit)
{
    if (books.region)
        return shim_region_reserve(books.region, dev, bytes, limited, limit);
    return add_within(&books.used[dev], bytes, limited, limit);
}

CUresult shim_reserve(int dev, uint64_t bytes)
{
    uint64_t limit = 0;
    bool limited = shim_limit(dev, &limit);
    CUresult rc;

    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return limited ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    shim_nvml_tick(dev);
    rc = reserve_once(dev, bytes, limited, limit);
    /* a refusal may be owed to a pool's spare reserve counted before the
     * driver gave it back (at a synchronisation the shim does not see):
     * recount the pools, and try again if that gave bytes back */
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && shim_pools_counted(dev) && shim_pool_refresh(dev))
        rc = reserve_once(dev, bytes, limited, limit);
    return rc;
}

void shim_reserve_force(int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= SHIM_MAX_DEV || !bytes)
        return;
    reserve_once(dev, bytes, false, 0);
}

uint64_t shim_ctx_overhead(void)
{
    return books.cfg.ctx_overhead;
}

uint64_t shim_over_limit(void)
{
    return books.cfg.over_limit;
}

CUresult shim_reserve_over(int dev, uint64_t bytes)
{
    uint64_t limit = books.cfg.over_limit;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !limit)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (books.region)
        return shim_region_reserve_over(books.region, dev, bytes, limit);
    return add_within(&books.over[dev], bytes, true, limit);
}

void shim_release_over(int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return;
    if (books.region) {
        shim_region_release_over(books.region, dev, bytes);
        return;
    }
    sub_floor(&books.over[dev], bytes);
}

uint64_t shim_used_self(int dev)
{
    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return 0;
    if (books.region)
        return shim_region_self_used(books.region, dev);
    return __atomic_load_n(&books.used[dev], __ATOMIC_RELAXED);
}

int shim_host_pid(void)
{
    int pid = books.region ? shim_region_host_pid(books.region) : 0;

    return pid > 0 ? pid : (int)getpid();
}

void shim_meter(uint64_t throttled_ns, int64_t busy_ns)
{
    if (books.region)
        shim_region_meter(books.region, throttled_ns, busy_ns);
}

void shim_note_nvml(int dev, uint64_t bytes)
{
    if (books.region && dev >= 0 && dev < SHIM_MAX_DEV)
        shim_region_note_nvml(books.region, dev, bytes);
}

void shim_release(int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return;
    if (books.region) {
        shim_region_release(books.region, dev, bytes);
        return;
    }
    sub_floor(&books.used[dev], bytes);
}

uint64_t shim_used(int dev)
{
    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return 0;
    if (books.region)
        return shim_region_used(books.region, dev);
    return __atomic_load_n(&books.used[dev], __ATOMIC_RELAXED);
}

void shim_account_reset_child(void)
{
    memset(books.used, 0, sizeof(books.used));
    shim_region_reset_child(books.region);
}
