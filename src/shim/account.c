/*
 * Reserve/release against the memory cap. With a shared region the books
 * are the job's (region.c); without one, this process's own counters,
 * updated with compare-and-swap so two threads cannot both take the last
 * bytes. A device beyond SHIM_MAX_DEV with a cap set is refused (the cap
 * cannot be kept there); without a cap it is not counted.
 */
#include <string.h>

#include "shim.h"

static struct {
    struct shim_config cfg;
    struct shim_region *region; /* owned; NULL: per-process books */
    uint64_t used[SHIM_MAX_DEV];
} acct;

void shim_account_init(const struct shim_config *c, struct shim_region *region)
{
    acct.cfg = *c;
    acct.region = region;
    memset(acct.used, 0, sizeof(acct.used));
}

struct shim_region *shim_account_region(void)
{
    return acct.region;
}

bool shim_limit(int dev, uint64_t *limit)
{
    if (dev < 0)
        return false;
    if (dev >= SHIM_MAX_DEV) {
        /* beyond the table: the general cap, if any */
        *limit = 0;
        return acct.cfg.any_limit;
    }
    *limit = acct.cfg.limit[dev];
    return acct.cfg.limited[dev];
}

CUresult shim_reserve(int dev, uint64_t bytes)
{
    uint64_t limit = 0;
    bool limited = shim_limit(dev, &limit);

    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return limited ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    if (acct.region)
        return shim_region_reserve(acct.region, dev, bytes, limited, limit);
    for (;;) {
        uint64_t old = __atomic_load_n(&acct.used[dev], __ATOMIC_RELAXED);

        if (limited && (old > limit || bytes > limit - old))
            return CUDA_ERROR_OUT_OF_MEMORY;
        if (__atomic_compare_exchange_n(&acct.used[dev], &old, old + bytes, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return CUDA_SUCCESS;
    }
}

void shim_release(int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return;
    if (acct.region) {
        shim_region_release(acct.region, dev, bytes);
        return;
    }
    for (;;) {
        uint64_t old = __atomic_load_n(&acct.used[dev], __ATOMIC_RELAXED);
        uint64_t next = bytes < old ? old - bytes : 0;

        if (__atomic_compare_exchange_n(&acct.used[dev], &old, next, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return;
    }
}

uint64_t shim_used(int dev)
{
    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return 0;
    if (acct.region)
        return shim_region_used(acct.region, dev);
    return __atomic_load_n(&acct.used[dev], __ATOMIC_RELAXED);
}

void shim_account_reset_child(void)
{
    memset(acct.used, 0, sizeof(acct.used));
    shim_region_reset_child(acct.region);
}
