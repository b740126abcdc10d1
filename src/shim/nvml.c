/*
 * NVML in liballot-cuda.so (docs/shim.md). Programs and frameworks size
 * their pools from NVML as well as from CUDA, so NVML's memory info is
 * capped like cuMemGetInfo's, and the books are checked against NVML's
 * per-process usage now and then.
 *
 * The real NVML is opened on first need, not at start-up (most programs
 * never touch it): dlopen(ALLOT_NVML_LIB or "libnvidia-ml.so.1"), found
 * the way the dynamic loader finds it. The hooks nvmlDeviceGetMemoryInfo
 * and nvmlDeviceGetMemoryInfo_v2 are exported (direct binding) and handed
 * out by the dlsym override (lookup.c).
 *
 * NVML numbers every GPU of the machine; the caps are per CUDA ordinal
 * (the devices this process sees, in CUDA's order). An NVML device is
 * mapped to its ordinal by UUID: NVML's UUID string against
 * cuDeviceGetUuid's 16 bytes, the 32 hex digits compared (so "GPU-" and
 * "MIG-" forms both match). A device CUDA does not see is not the job's:
 * its info is passed on unchanged.
 *
 * The drift check runs on the allocation path at most once per
 * ALLOT_SHIM_NVML_CHECK seconds (default 10, 0 off; the first one period
 * after start), in the allocating
 * thread, with no lock held: NVML's usedGpuMemory of this process (its
 * host pid as the agent wrote it into the region, else getpid()) against
 * the bytes the books hold for this process; a difference above
 * ALLOT_SHIM_NVML_DRIFT (default 32Mi) is logged (shim_warn), and the
 * process's contexts on the device are recounted at what NVML shows
 * beyond the allocations (shim_ctx_measured, overhead.c).
 *
 * State: the NVML functions (resolved once, pthread_once), a cache of
 * NVML handle -> ordinal under a mutex, and the next check's time
 * (atomic).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define NVML_NAMES(X)                                                                              \
    X(nvmlInit_v2)                                                                                 \
    X(nvmlInit)                                                                                    \
    X(nvmlDeviceGetUUID)                                                                           \
    X(nvmlDeviceGetHandleByUUID)                                                                   \
    X(nvmlDeviceGetMemoryInfo)                                                                     \
    X(nvmlDeviceGetMemoryInfo_v2)                                                                  \
    X(nvmlDeviceGetComputeRunningProcesses_v3)                                                     \
    X(nvmlDeviceGetComputeRunningProcesses_v2)                                                     \
    X(nvmlDeviceGetComputeRunningProcesses)

#define NV_ENUM(name) NV_##name,
enum nv_fn { NVML_NAMES(NV_ENUM) NV_N };
#undef NV_ENUM
#define NV_NAME(name) #name,
static const char *const nv_names[NV_N] = {NVML_NAMES(NV_NAME)};
#undef NV_NAME

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*by_uuid_fn)(const char *, nvmlDevice_t *);
typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, void *);

/* Handles cached; a machine has at most a few dozen GPUs and MIG devices. */
#define NV_CACHE 64

static struct {
    pthread_once_t once;
    void *lib;            /* dlopen handle, NULL when NVML is missing */
    void *fn[NV_N];       /* the real functions, NULL where missing */
    pthread_mutex_t lock; /* the cache and the check's initialisation */
    struct {
        nvmlDevice_t h;
        int ordinal;
    } cache[NV_CACHE];
    int n_cache;
    bool inited; /* nvmlInit succeeded for the check */
    uint64_t period_ns, tolerance, next_ns;
    bool warned_pid;
} nv = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The CUDA devices' UUIDs in ordinal order, learnt once. */
static struct {
    pthread_mutex_t lock;
    bool known;
    int n;
    char hex[SHIM_MAX_DEV][33];
} cu_ids = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void nv_load(void)
{
    const char *path = getenv("ALLOT_NVML_LIB");

    if (!path || !*path)
        path = "libnvidia-ml.so.1";
    nv.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        shim_warn("cannot load NVML %s: NVML memory info is not capped", path);
        return;
    }
    for (int i = 0; i < NV_N; i++) {
        void *p = shim_dlsym(nv.lib, nv_names[i]);

        /* ALLOT_NVML_LIB naming the shim itself: no hook calls itself */
        if (p && p == shim_nvml_hook_for_name(nv_names[i]))
            p = NULL;
        nv.fn[i] = p;
    }
}

static void *nv_real(enum nv_fn f)
{
    pthread_once(&nv.once, nv_load);
    return nv.fn[f];
}

void shim_nvml_init(void)
{
    const char *p = getenv("ALLOT_SHIM_NVML_CHECK"), *d = getenv("ALLOT_SHIM_NVML_DRIFT");
    uint64_t v;

    nv.period_ns = 10ull * 1000000000ull;
    if (p && *p) {
        if (shim_parse_size(p, &v) && v <= 86400)
            nv.period_ns = v * 1000000000ull;
        else
            shim_warn("ALLOT_SHIM_NVML_CHECK=%s is not seconds (0 to 86400): every 10 s", p);
    }
    nv.tolerance = 32ull << 20;
    if (d && *d && !shim_parse_size(d, &nv.tolerance)) {
        shim_warn("ALLOT_SHIM_NVML_DRIFT=%s is not a size: 32Mi", d);
        nv.tolerance = 32ull << 20;
    }
    /* the first check one period after start: a short-lived process
     * never loads NVML (nvmlInit can take a good part of a second) */
    nv.next_ns = shim_now_ns() + nv.period_ns;
}

/* ---- UUIDs: NVML's strings, CUDA's bytes --------------------------------- */

/* Learns the CUDA devices' UUIDs. Called with cu_ids.lock held. */
static void learn_cuda_ids(void)
{
    typedef CUresult (*init_cu_fn)(unsigned int);
    typedef CUresult (*count_fn)(int *);
    typedef CUresult (*get_fn)(CUdevice *, int);
    typedef CUresult (*cu_uuid_fn)(CUuuid *, CUdevice);
    init_cu_fn init = (init_cu_fn)shim_real(SHIM_FN_cuInit);
    count_fn count = (count_fn)shim_real(SHIM_FN_cuDeviceGetCount);
    get_fn get = (get_fn)shim_real(SHIM_FN_cuDeviceGet);
    cu_uuid_fn uuid = (cu_uuid_fn)shim_real(SHIM_FN_cuDeviceGetUuid_v2);
    int n = 0;

    if (!uuid)
        uuid = (cu_uuid_fn)shim_real(SHIM_FN_cuDeviceGetUuid);
    if (!count || !get || !uuid)
        return;
    /* a program that uses NVML only has not initialised CUDA */
    if (count(&n) == CUDA_ERROR_NOT_INITIALIZED && init && init(0) == CUDA_SUCCESS)
        count(&n);
    if (n <= 0)
        return;
    cu_ids.n = n < SHIM_MAX_DEV ? n : SHIM_MAX_DEV;
    for (int i = 0; i < cu_ids.n; i++) {
        CUdevice d;
        CUuuid u;

        cu_ids.hex[i][0] = '\0';
        if (get(&d, i) != CUDA_SUCCESS || uuid(&u, d) != CUDA_SUCCESS)
            continue;
        for (int k = 0; k < 16; k++)
            snprintf(cu_ids.hex[i] + 2 * k, 3, "%02x", (unsigned char)u.bytes[k]);
    }
    cu_ids.known = true;
}

int shim_cuda_ordinal_of(const char *hex)
{
    int found = -1;

    pthread_mutex_lock(&cu_ids.lock);
    if (!cu_ids.known)
        learn_cuda_ids();
    for (int i = 0; i < cu_ids.n && found < 0; i++)
        if (!strcmp(cu_ids.hex[i], hex))
            found = i;
    pthread_mutex_unlock(&cu_ids.lock);
    return found;
}

bool shim_cuda_uuid_hex(int dev, char out[33])
{
    bool ok = false;

    pthread_mutex_lock(&cu_ids.lock);
    if (!cu_ids.known)
        learn_cuda_ids();
    if (dev >= 0 && dev < cu_ids.n && cu_ids.hex[dev][0]) {
        memcpy(out, cu_ids.hex[dev], 33);
        ok = true;
    }
    pthread_mutex_unlock(&cu_ids.lock);
    return ok;
}

/* The CUDA ordinal of NVML device h, or -1 (not visible to CUDA). */
static int ordinal_of(nvmlDevice_t h)
{
    uuid_fn get_uuid = (uuid_fn)nv_real(NV_nvmlDeviceGetUUID);
    char uuid[96], hex[33];
    int ordinal = -1;

    pthread_mutex_lock(&nv.lock);
    for (int i = 0; i < nv.n_cache; i++) {
        if (nv.cache[i].h == h) {
            ordinal = nv.cache[i].ordinal;
            pthread_mutex_unlock(&nv.lock);
            return ordinal;
        }
    }
    pthread_mutex_unlock(&nv.lock);
    if (!get_uuid || get_uuid(h, uuid, sizeof(uuid)) != NVML_SUCCESS ||
        !allot_shim_uuid_hex(uuid, hex))
        return -1;
    ordinal = shim_cuda_ordinal_of(hex);
    pthread_mutex_lock(&nv.lock);
    /* an answer only once CUDA's devices are known (the driver may have
     * been missing a moment ago) */
    if (cu_ids.known && nv.n_cache < NV_CACHE) {
        nv.cache[nv.n_cache].h = h;
        nv.cache[nv.n_cache++].ordinal = ordinal;
    }
    pthread_mutex_unlock(&nv.lock);
    return ordinal;
}

/* ---- the memory info hooks --------------------------------------------- */

/*
 * Applies the cap of h's CUDA ordinal, as cuMemGetInfo does: total = the
 * cap (or the device, if smaller), used = the job's bytes, free = what the
 * cap leaves, never negative and never more than NVML says is free.
 * reserved (v2; NULL for v1) becomes 0 when capped: the cap is all there is.
 */
static void cap_nvml(nvmlDevice_t h, unsigned long long *total, unsigned long long *free_b,
                     unsigned long long *used, unsigned long long *reserved)
{
    uint64_t limit, mine;
    int dev = ordinal_of(h);

    if (dev < 0 || !shim_limit(dev, &limit))
        return;
    /* <=: NVML may reach its own v1 function through this hook when it
     * answers the v2 one, so the total may be capped already */
    if (limit <= *total) {
        *total = limit;
        if (reserved)
            *reserved = 0;
    }
    shim_pool_refresh(dev);
    mine = shim_used(dev);
    *used = mine;
    if (mine >= *total)
        *free_b = 0;
    else if (*total - mine < *free_b)
        *free_b = *total - mine;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    mem_fn real = (mem_fn)nv_real(NV_nvmlDeviceGetMemoryInfo);
    nvmlReturn_t rc;

    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    rc = real(device, memory);
    if (rc == NVML_SUCCESS && memory)
        cap_nvml(device, &memory->total, &memory->free, &memory->used, NULL);
    return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    mem2_fn real = (mem2_fn)nv_real(NV_nvmlDeviceGetMemoryInfo_v2);
    nvmlReturn_t rc;

    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    rc = real(device, memory);
    if (rc == NVML_SUCCESS && memory)
        cap_nvml(device, &memory->total, &memory->free, &memory->used, &memory->reserved);
    return rc;
}

/* Whether a and b are the same string, without strcmp: ASan intercepts
 * strcmp, and this runs inside its own start-up lookups. */
__attribute__((no_sanitize("address"))) static bool same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Reached from the dlsym override, maybe before ASan is ready: no
 * intercepted function on this path. */
__attribute__((no_sanitize("address"))) void *shim_nvml_hook_for_name(const char *name)
{
    if (name[0] != 'n' || name[1] != 'v' || name[2] != 'm' || name[3] != 'l')
        return NULL;
    if (same(name, "nvmlDeviceGetMemoryInfo"))
        return (void *)nvmlDeviceGetMemoryInfo;
    if (same(name, "nvmlDeviceGetMemoryInfo_v2"))
        return (void *)nvmlDeviceGetMemoryInfo_v2;
    return NULL;
}

/* ---- the books against NVML's per-process usage ---------------------------- */

/* NVML's handle of CUDA ordinal dev, or NULL. */
static nvmlDevice_t handle_of(int dev)
{
    by_uuid_fn by_uuid = (by_uuid_fn)nv_real(NV_nvmlDeviceGetHandleByUUID);
    static const char *const prefixes[] = {"GPU-", "MIG-"};
    char hex[33], uuid[64];
    nvmlDevice_t h = NULL;

    if (!by_uuid || !shim_cuda_uuid_hex(dev, hex))
        return NULL;
    for (size_t i = 0; i < 2; i++) {
        snprintf(uuid, sizeof(uuid), "%s%.8s-%.4s-%.4s-%.4s-%.12s", prefixes[i], hex, hex + 8,
                 hex + 12, hex + 16, hex + 20);
        if (by_uuid(uuid, &h) == NVML_SUCCESS)
            return h;
    }
    return NULL;
}

/*
 * NVML's bytes for pid on h. OUT *bytes. Returns false when NVML does not
 * list pid or does not know its usage.
 */
static bool nvml_usage(nvmlDevice_t h, unsigned int pid, uint64_t *bytes)
{
    static const enum nv_fn order[] = {NV_nvmlDeviceGetComputeRunningProcesses_v3,
                                       NV_nvmlDeviceGetComputeRunningProcesses_v2,
                                       NV_nvmlDeviceGetComputeRunningProcesses};
    procs_fn f = NULL;
    size_t stride = sizeof(nvmlProcessInfo_t);
    unsigned int n = 64;
    bool found = false;
    char *buf = NULL;
    nvmlReturn_t rc;

    for (size_t i = 0; i < 3 && !f; i++) {
        f = (procs_fn)nv_real(order[i]);
        if (f && order[i] == NV_nvmlDeviceGetComputeRunningProcesses)
            stride = sizeof(nvmlProcessInfo_v1_t);
    }
    if (!f)
        return false;
    /* processes may start between two calls: ask twice at most */
    for (int tries = 0; tries < 2; tries++) {
        unsigned int cap = n;

        free(buf);
        buf = calloc(cap, stride);
        if (!buf)
            return false;
        rc = f(h, &n, buf);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
        n += 16;
    }
    for (unsigned int i = 0; rc == NVML_SUCCESS && i < n && !found; i++) {
        nvmlProcessInfo_v1_t e; /* pid and usedGpuMemory lead both layouts */

        memcpy(&e, buf + i * stride, sizeof(e));
        if (e.pid == pid && e.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
            *bytes = e.usedGpuMemory;
            found = true;
        }
    }
    free(buf);
    return found;
}

static void check_drift(int dev)
{
    init_fn init = (init_fn)nv_real(NV_nvmlInit_v2);
    unsigned int pid = (unsigned int)shim_host_pid();
    uint64_t nvml_bytes = 0, books;
    nvmlDevice_t h;

    if (!init)
        init = (init_fn)nv_real(NV_nvmlInit);
    pthread_mutex_lock(&nv.lock);
    if (!nv.inited && init)
        nv.inited = init() == NVML_SUCCESS;
    pthread_mutex_unlock(&nv.lock);
    if (!nv.inited || !(h = handle_of(dev)))
        return;
    if (!nvml_usage(h, pid, &nvml_bytes)) {
        if (!nv.warned_pid)
            shim_warn("device %d: NVML does not list pid %u (another pid namespace, and the "
                      "agent has not written the host pid?): books not checked",
                      dev, pid);
        nv.warned_pid = true;
        return;
    }
    books = shim_used_self(dev);
    shim_note_nvml(dev, nvml_bytes);
    if ((nvml_bytes > books ? nvml_bytes - books : books - nvml_bytes) > nv.tolerance)
        shim_warn("device %d: drift: the books hold %llu bytes for pid %u, NVML %llu (%+lld)", dev,
                  (unsigned long long)books, pid, (unsigned long long)nvml_bytes,
                  (long long)(nvml_bytes - books));
    /* what NVML sees beyond the allocations is the contexts' overhead */
    shim_ctx_measured(dev, nvml_bytes, books);
}

void shim_nvml_reset_child(void)
{
    /* another thread of the parent may have held them at the fork */
    pthread_mutex_init(&nv.lock, NULL);
    pthread_mutex_init(&cu_ids.lock, NULL);
}

void shim_nvml_tick(int dev)
{
    uint64_t next = __atomic_load_n(&nv.next_ns, __ATOMIC_RELAXED), now;

    if (!nv.period_ns)
        return;
    now = shim_now_ns();
    if (now < next)
        return;
    /* one thread checks; the others go on */
    if (!__atomic_compare_exchange_n(&nv.next_ns, &next, now + nv.period_ns, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    check_drift(dev);
}
