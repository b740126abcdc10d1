/*
 * Virtual memory management hooks of liballot-cuda.so (docs/shim.md):
 * physical allocations by handle (cuMemCreate), mapped by the program into
 * address ranges it reserved. The driver frees such memory once no
 * reference to the handle and no mapping of it is left (cuMemRelease:
 * "the memory is freed when all mappings are unmapped"), so the bytes are
 * counted from cuMemCreate until then, not until cuMemRelease: create, map
 * and release at once is a common idiom, and the memory lives on.
 *
 * State, in the allocation table (table.c): a handle's record
 * (SHIM_SPACE_HANDLE) counts the program's references to it (cuMemCreate's
 * own, one per cuMemRetainAllocationHandle, one per import of a handle the
 * shim counts) and its mappings; each mapping has a record too
 * (SHIM_SPACE_MAP, keyed by its address, no bytes) naming its handle, so
 * cuMemUnmap knows which handles lose one. The handle's bytes are given
 * back when both counts reach 0 (shim_table_vmm removes the record under
 * the table's lock, so exactly one caller gives them back).
 *
 * The driver is called first and the books follow its success, except in
 * cuMemMap, which counts the mapping before (a release racing with it must
 * not give the bytes back in between) and takes it back when refused. A
 * handle value the driver freed and gave out again meanwhile names another
 * allocation: every handle record has a serial number, each later update
 * names the serial it means and leaves another alone (the stale record is
 * given back when the new one is recorded, as for every kind in hooks.c).
 *
 * An imported handle of memory this process did not count (another
 * process's) gets a record of no bytes, which its first mapping sizes (the
 * mapping's size on the current device, refused past the cap): the memory
 * stays on the job's books while this process holds it, also after the
 * exporter released it (counted twice while both hold it, never less).
 * Mappings of handles without a record (the table could not grow) are
 * recorded without a serial, only so an unmap of a range of several
 * mappings can walk it. Thread-safe: every change is one call into the table, which has
 * its own lock; the books (account.c) are updated after it is released.
 */
#include <stdint.h>

#include "shim.h"

/* Serial numbers of handle records, from 1 (0 names none). */
static uint64_t next_serial(void)
{
    static uint64_t n;

    return __atomic_add_fetch(&n, 1, __ATOMIC_RELAXED);
}

/* Takes drefs references and dmaps mappings (0 or -1 each) off handle's
 * record when it is still allocation serial, and gives its bytes back
 * when nothing holds the memory any more. */
static void drop(uint64_t handle, uint64_t serial, int drefs, int dmaps)
{
    struct shim_alloc a;

    if (serial && shim_table_vmm(&shim_allocs, handle, serial, drefs, dmaps, &a) && !a.refs &&
        !a.maps)
        shim_release(a.dev, a.bytes);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    __typeof__(&cuMemCreate) real = REAL(cuMemCreate);
    /* ctx 0: physical memory outlives contexts */
    struct shim_alloc a = {.bytes = size, .space = SHIM_SPACE_HANDLE, .refs = 1};
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!handle || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    /* host and host-NUMA locations are not GPU memory */
    if (!size || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return real(handle, size, prop, flags);
    a.dev = prop->location.id;
    if ((rc = shim_reserve(a.dev, size)) != CUDA_SUCCESS)
        return rc;
    rc = real(handle, size, prop, flags);
    if (rc != CUDA_SUCCESS) {
        shim_release(a.dev, size);
        return rc;
    }
    a.key = *handle;
    a.serial = next_serial();
    if (!shim_record(&a)) {
        /* the table cannot grow: undone, so the books never miss memory */
        __typeof__(&cuMemRelease) release = REAL(cuMemRelease);

        if (release)
            release(*handle);
        shim_release(a.dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    __typeof__(&cuMemRelease) real = REAL(cuMemRelease);
    struct shim_alloc a;
    bool known;
    CUresult rc;

    if (!real)
        return shim_missing();
    /* the allocation the handle names now is the one released */
    known = shim_table_get(&shim_allocs, handle, SHIM_SPACE_HANDLE, &a);
    rc = real(handle);
    if (rc == CUDA_SUCCESS && known)
        drop(handle, a.serial, -1, 0);
    return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    __typeof__(&cuMemMap) real = REAL(cuMemMap);
    struct shim_alloc h = {0}, old;
    struct shim_alloc m = {.key = ptr, .space = SHIM_SPACE_MAP, .handle = handle, .span = size};
    bool counted;
    CUresult rc;

    if (!real)
        return shim_missing();
    /* one more mapping before the driver makes it (see the top) */
    counted = shim_table_vmm(&shim_allocs, handle, 0, 0, 1, &h);
    /* an imported handle's first mapping: its memory is counted from now
     * on (on this device, the mapping's size), refused past the cap */
    if (counted && h.imported && h.dev < 0) {
        int dev = -1;
        if ((rc = shim_current_device(&dev)) != CUDA_SUCCESS ||
            (rc = shim_reserve(dev, size)) != CUDA_SUCCESS) {
            drop(handle, h.serial, 0, -1);
            return rc;
        }
        if (!shim_table_size(&shim_allocs, handle, h.serial, dev, size)) {
            shim_release(dev, size); /* released meanwhile by another thread */
        } else {
            h.dev = dev;
            h.bytes = size;
        }
    }
    rc = real(ptr, size, offset, handle, flags);
    if (rc != CUDA_SUCCESS) {
        if (counted)
            drop(handle, h.serial, 0, -1);
        return rc;
    }
    m.serial = counted ? h.serial : 0;
    m.dev = counted ? h.dev : -1;
    if (!shim_table_replace(&shim_allocs, &m, &old)) {
        __typeof__(&cuMemUnmap) unmap = REAL(cuMemUnmap);

        /* an uncounted handle's mapping is only a landmark for cuMemUnmap */
        if (!counted)
            return CUDA_SUCCESS;
        /* the table cannot grow: undone, so the books never miss memory */
        if (unmap)
            unmap(ptr, size);
        drop(handle, h.serial, 0, -1);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* a mapping there whose end the shim did not see has ended */
    if (old.used)
        drop(old.handle, old.serial, 0, -1);
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    __typeof__(&cuMemUnmap) real = REAL(cuMemUnmap);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(ptr, size);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* the range was whole mappings one after another (the driver checks):
     * each one's handle loses a mapping */
    for (uint64_t at = ptr; at - ptr < size;) {
        struct shim_alloc m;

        if (!shim_table_take(&shim_allocs, at, SHIM_SPACE_MAP, &m))
            break;
        drop(m.handle, m.serial, 0, -1);
        if (!m.span || m.span > size - (at - ptr))
            break;
        at += m.span;
    }
    return rc;
}

/* The handle of the memory mapped at addr: one more reference to it. */
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    __typeof__(&cuMemRetainAllocationHandle) real = REAL(cuMemRetainAllocationHandle);
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    rc = real(handle, addr);
    /* a counted handle's memory is mapped there, so its record is live */
    if (rc == CUDA_SUCCESS)
        shim_table_vmm(&shim_allocs, *handle, 0, 1, 0, NULL);
    return rc;
}

/*
 * A handle to memory another process (or this one) exported. Memory this
 * process counts (the driver gave back a handle it knows) gains a
 * reference; any other is not this process's to count, and its handle's
 * release gives nothing back.
 */
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
                                        CUmemAllocationHandleType type)
{
    __typeof__(&cuMemImportFromShareableHandle) real = REAL(cuMemImportFromShareableHandle);
    CUresult rc;

    if (!real)
        return shim_missing();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    rc = real(handle, os_handle, type);
    if (rc != CUDA_SUCCESS || shim_table_vmm(&shim_allocs, *handle, 0, 1, 0, NULL))
        return rc;
    /* another process's memory: a record of no bytes yet, which its first
     * mapping sizes (cuMemMap), so that the memory stays on the job's books
     * while this process holds it, also after the exporter released it */
    struct shim_alloc a = {.key = *handle,
                           .space = SHIM_SPACE_HANDLE,
                           .refs = 1,
                           .serial = next_serial(),
                           .dev = -1,
                           .imported = true};
    shim_record(&a); /* the table cannot grow: uncounted, as before */
    return rc;
}
