/*
 * liballot-cuda.so internals (docs/shim.md): the pieces behind the hooks.
 *
 *   env.c     ALLOT_* environment: sizes with suffixes, per-device caps
 *   table.c   the allocation table: device pointer / VMM handle / array ->
 *             (device, bytes), so a free gives back what its allocation took
 *   region.c  the job-wide shared region (ALLOT_SHIM_REGION): per-process
 *             slots of per-device bytes under a robust process-shared mutex
 *   account.c reserve/release against the cap, through the region when there
 *             is one, per process otherwise
 *   limiter.c the compute share (ALLOT_GPU_SM_LIMIT): a duty-cycle limiter
 *             with measured launch times, its budget in the region when
 *             there is one
 *   lookup.c  start-up (the real driver, pthread_once), what the dlsym
 *             override answers, cuGetProcAddress(_v2) and the table of
 *             hooked names
 *   dlsym.c   the dlsym override itself (alone: see there why)
 *   hooks.c   the exported cu* hooks for memory and contexts
 *   vmm.c     virtual memory management: a handle's memory counted while
 *             the handle is referenced or mapped
 *   launch.c  the exported launch hooks
 *   share.c   weighted fair sharing of one GPU between jobs (the agent's
 *             entries in a folder per GPU)
 *   nvml.c    NVML: capped memory info, the books checked against NVML;
 *             NVML devices mapped to CUDA ordinals by UUID
 *   overhead.c contexts' overhead (estimated, then measured), primary-
 *             context references, graphs' memory allocation nodes
 *   pool.c    memory pools with a raised release threshold: their spare
 *             reserve counted
 *   limits.c  context limits that reserve device memory (malloc heap,
 *             printf FIFO, stack) counted against the cap
 *   mapfile.c opening a file several processes map (the region): sized
 *             and initialised under flock
 *   procfs.c  a process's start time, pid namespace and liveness (also in
 *             the reader)
 *   region_layout.h, region_reader.c  the region's layout and the agent's
 *             reader library (allot-shimreader, not part of the shim)
 *
 * The shim speaks CUDA's language: actions return a CUresult (CUDA_SUCCESS
 * or a CUDA_ERROR_* code the host program understands), predicates return
 * bool. Nothing here aborts or exits (STYLE.md 11).
 *
 * Lock order: the table's mutex and the region's mutex are never held
 * together; a hook reserves in the region, calls the driver, then records
 * in the table (and the reverse on a free). The limiter's mutex comes
 * before the region's (the job's compute budget lives there) and before
 * nvml.c's lock on the CUDA devices' UUIDs (a share folder is named by the
 * UUID). nvml.c never holds its two locks together. pool.c's lock comes
 * before the region's (it adjusts the books holding it) and is never held
 * while calling the driver. limits.c's lock comes before the table's and
 * the region's (it is held across a cuCtxSetLimit and its books). The
 * share folders have no lock.
 */
#ifndef ALLOT_SHIM_H
#define ALLOT_SHIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "allot/shim_region.h"
#include "cuda_abi.h"
#include "region_layout.h"

/* ---- env.c ---------------------------------------------------------------- */

struct shim_config {
    uint64_t limit[SHIM_MAX_DEV]; /* bytes; meaningful where limited[d] */
    bool limited[SHIM_MAX_DEV];
    bool any_limit;
    bool bad_env;            /* a value was rejected (the cap failed closed) */
    uint64_t over_limit;     /* ALLOT_GPU_MEMORY_OVERSUBSCRIBE, bytes per device; 0 off */
    bool bad_over;           /* that value was rejected (no oversubscription) */
    uint64_t ctx_overhead;   /* ALLOT_GPU_CONTEXT_OVERHEAD: bytes counted per context */
    bool bad_ctx;            /* that value was rejected (0 counted) */
    const char *region_path; /* borrowed from the environment, or NULL */
    const char *cuda_lib;    /* borrowed from the environment, or NULL */
};

/*
 * Parses a size: decimal digits, then nothing or one of K M G T (powers of
 * 1000) or Ki Mi Gi Ti (powers of 1024); no sign, no spaces, no overflow.
 * OUT *bytes. Returns true on success, false (with *bytes untouched) on
 * anything else.
 */
bool shim_parse_size(const char *s, uint64_t *bytes);

/* Parses a percent, 1 to 100, digits only. OUT *percent. Returns success. */
bool shim_parse_percent(const char *s, int *percent);

/*
 * Fills *c from getenv(): ALLOT_GPU_MEMORY_LIMIT for every device,
 * ALLOT_GPU_MEMORY_LIMIT_<i> overriding device i, ALLOT_SHIM_REGION and
 * ALLOT_CUDA_LIB. A value that does not parse caps its devices at 0 bytes
 * (fail closed) and sets c->bad_env; the caller warns.
 */
void shim_config_load(struct shim_config *c);

/* Writes the line "allot-cuda: MESSAGE" where ALLOT_SHIM_LOG says:
 * "stderr", or appended to the file it names (stderr if it cannot be
 * opened); nothing when it is unset, empty or "off". */
void shim_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- mapfile.c: files mapped by several processes ----------------------- */

struct shim_mapped {
    void *map; /* the mapping, owned by the caller (munmap) */
};

/*
 * Opens path (it must exist: the agent creates it), takes its flock, sizes it
 * to size when empty or refuses another size, maps it MAP_SHARED, calls
 * init(map) when its first 32-bit word (the magic) is 0, then valid(map);
 * all under the flock. OUT *m. Returns NULL on success, else why not (a
 * static text), with nothing mapped.
 */
const char *shim_map_file(const char *path, size_t size, bool (*init)(void *),
                          bool (*valid)(const void *), struct shim_mapped *m);

/* ---- table.c -------------------------------------------------------------- */

enum shim_space {
    SHIM_SPACE_PTR = 0,
    SHIM_SPACE_HANDLE = 1,
    SHIM_SPACE_ARRAY = 2,
    SHIM_SPACE_MIPMAP = 3,
    SHIM_SPACE_CTX = 4,   /* a context's overhead, keyed by the context */
    SHIM_SPACE_GRAPH = 5, /* a graph's memory allocation node, keyed by the node */
    SHIM_SPACE_MAP = 6,   /* a mapping of a VMM handle, keyed by its address (0 bytes) */
    SHIM_SPACE_LIMIT = 7, /* a context limit's reservation, keyed by context x 4 + limit */
};

struct shim_alloc {
    uint64_t key; /* device pointer, VMM handle or CUarray */
    uint64_t bytes;
    uint64_t ctx; /* what it dies with: its CUcontext (its CUgraph for a
                   * graph node), 0 none (VMM handles) */
    /* a VMM handle: the program's references to it and its mappings (the
     * driver frees its memory when both are 0), and a serial number that
     * tells this allocation from a later one the driver gives the same
     * handle value; a mapping: the handle it maps, that handle's serial
     * (0: a handle the shim does not count) and the mapping's size */
    uint32_t refs, maps;
    uint64_t serial;
    uint64_t handle, span;
    int32_t dev;
    uint8_t space; /* enum shim_space */
    bool over;     /* oversubscribed: counted apart from the cap */
    bool imported; /* a VMM handle of another process's memory: sized at its first mapping */
    bool used;     /* slot occupied (inside the table only) */
};

/* Open addressing with linear probing and backward-shift deletion. */
struct shim_table {
    pthread_mutex_t lock;
    struct shim_alloc *slots; /* owned; cap entries, NULL until first put */
    size_t cap, n;
    void *(*calloc_fn)(size_t, size_t); /* replaceable so tests can fail it */
};

/* Initialises an empty table; calloc_fn NULL means calloc. */
void shim_table_init(struct shim_table *t, void *(*calloc_fn)(size_t, size_t));
/* Frees the slots; the table is empty and usable again. */
void shim_table_clear(struct shim_table *t);
/* After fork() in the child: a fresh mutex and no entries (the child owns
 * no device memory). */
void shim_table_reset_child(struct shim_table *t);
/* Records a (copied). Returns false when memory for the table ran out or
 * (key, space) is already recorded; the table is unchanged then. */
bool shim_table_put(struct shim_table *t, const struct shim_alloc *a);
/*
 * Records a like shim_table_put, but a record already there for (key,
 * space) is replaced: the driver handed the value out again, so the old
 * allocation was freed behind the shim's back (a destroyed context, say).
 * OUT *old the replaced record, old->used false when there was none.
 * Returns false only when memory for the table ran out.
 */
bool shim_table_replace(struct shim_table *t, const struct shim_alloc *a, struct shim_alloc *old);
/*
 * Removes every record of context ctx, adding their bytes to freed[dev],
 * or freed_over[dev] for oversubscribed ones (devices below SHIM_MAX_DEV).
 * Returns how many were removed.
 */
size_t shim_table_take_ctx(struct shim_table *t, uint64_t ctx, uint64_t freed[SHIM_MAX_DEV],
                           uint64_t freed_over[SHIM_MAX_DEV]);
/* Looks (key, space) up without removing it. OUT *a. Returns found. */
bool shim_table_get(struct shim_table *t, uint64_t key, int space, struct shim_alloc *a);
/* Removes (key, space). OUT *a (may be NULL). Returns whether it was there. */
bool shim_table_take(struct shim_table *t, uint64_t key, int space, struct shim_alloc *a);
/*
 * Adds drefs and dmaps to the references and mappings of VMM handle's
 * record, when there is one, it is allocation serial (0: whichever), and
 * neither count would go below 0. A record left with neither is removed.
 * OUT *a (may be NULL) the record after the change. Returns whether it was
 * changed.
 */
/* Sizes imported VMM handle's record (allocation serial) at its first
 * mapping: device dev, bytes. False when it is gone, or sized already. */
bool shim_table_size(struct shim_table *t, uint64_t handle, uint64_t serial, int dev,
                     uint64_t bytes);
bool shim_table_vmm(struct shim_table *t, uint64_t handle, uint64_t serial, int drefs, int dmaps,
                    struct shim_alloc *a);
/*
 * Sets the bytes of every record of space on dev to bytes (UINT64_MAX:
 * leaves them, only counts). OUT *old_sum their bytes before. Returns how
 * many there are.
 */
size_t shim_table_resize_space(struct shim_table *t, int space, int dev, uint64_t bytes,
                               uint64_t *old_sum);

/* The process's allocations (lookup.c owns it; hooks.c fills it). */
extern struct shim_table shim_allocs;

/* ---- region.c ------------------------------------------------------------- */

struct shim_region; /* opaque: the mapping plus this process's slot */

/*
 * Maps the region file at path, initialising it when empty (under flock, so
 * two first processes do not both initialise). Called once per image of a
 * process: a slot the process already has (its image before an exec(),
 * whose device memory died with it) keeps its metering counters, its bytes
 * are zeroed. Returns NULL, after a warning, when the file cannot be
 * opened or mapped or is corrupt (magic, version or size wrong): the
 * caller then counts per process.
 */
struct shim_region *shim_region_open(const char *path);
/* Unmaps and frees r; accepts NULL. Does not clear this process's slot. */
void shim_region_close(struct shim_region *r);
/*
 * Adds bytes to this process's slot on dev when the job's total stays
 * within limit (no check when !limited); dead processes' slots are
 * reclaimed before refusing. Returns CUDA_SUCCESS or
 * CUDA_ERROR_OUT_OF_MEMORY (also when no slot or lock can be had).
 */
CUresult shim_region_reserve(struct shim_region *r, int dev, uint64_t bytes, bool limited,
                             uint64_t limit);
/* Takes bytes (at most what the slot holds) off this process's slot. */
void shim_region_release(struct shim_region *r, int dev, uint64_t bytes);
/* As shim_region_reserve / _release for oversubscribed bytes (the slots'
 * over[]), against limit. */
CUresult shim_region_reserve_over(struct shim_region *r, int dev, uint64_t bytes, uint64_t limit);
void shim_region_release_over(struct shim_region *r, int dev, uint64_t bytes);
/* Metering, this process's slot (atomics, no lock once it has a slot):
 * one launch; time throttled and GPU time estimated (busy_ns may be a
 * negative correction). */
void shim_region_count_launch(struct shim_region *r);
void shim_region_meter(struct shim_region *r, uint64_t throttled_ns, int64_t busy_ns);
/* The job's bytes in use on dev, after reclaiming dead processes' slots. */
uint64_t shim_region_used(struct shim_region *r, int dev);
/* This process's bytes on dev (0 before its first reservation). */
uint64_t shim_region_self_used(struct shim_region *r, int dev);
/* The host pid the agent wrote into this process's slot, 0 if none. */
int shim_region_host_pid(struct shim_region *r);
/* Records NVML's usedGpuMemory of this process on dev in its slot. */
void shim_region_note_nvml(struct shim_region *r, int dev, uint64_t bytes);
/* Clears slots of processes that no longer exist. Returns how many. */
int shim_region_reclaim(struct shim_region *r);
/* After fork() in the child: forget the parent's slot. */
void shim_region_reset_child(struct shim_region *r);

/*
 * The compute budget: how a charge against a share is settled, on the
 * region's books (shim_region_sm_charge) or a process's own (limiter.c).
 * Accrues percent of the time since *last_ns as allowance (keeping at most
 * burst_ns of it unused), adds correction_ns, and charges charge_ns when
 * nothing is owed. Returns 0 when charged, or how long (ns) to wait before
 * asking again.
 */
uint64_t shim_sm_charge(int64_t *debt_ns, uint64_t *last_ns, int percent, int64_t burst_ns,
                        int64_t correction_ns, uint64_t charge_ns, uint64_t now_ns);
/* shim_sm_charge on the job's budget for dev, under the region's lock.
 * Returns as shim_sm_charge; 0 (go ahead) when the lock cannot be had. */
uint64_t shim_region_sm_charge(struct shim_region *r, int dev, int percent, int64_t burst_ns,
                               int64_t correction_ns, uint64_t charge_ns, uint64_t now_ns);

/* ---- account.c ------------------------------------------------------------ */

/* Sets up accounting from the loaded config; region may be NULL. */
void shim_account_init(const struct shim_config *c, struct shim_region *region);
/* Reserves bytes on dev against its cap. Returns CUDA_SUCCESS or
 * CUDA_ERROR_OUT_OF_MEMORY (nothing reserved then). */
CUresult shim_reserve(int dev, uint64_t bytes);
/* Gives back bytes reserved on dev. */
void shim_release(int dev, uint64_t bytes);
/* Adds bytes the driver already holds (a pool's reserve, a measured
 * context overhead) to dev's books, past the cap if need be: they are
 * not a request that could be refused. */
void shim_reserve_force(int dev, uint64_t bytes);
/* Oversubscription (ALLOT_GPU_MEMORY_OVERSUBSCRIBE): the bytes per device
 * a job may hold beyond its cap as host-preferred managed memory, 0 off. */
uint64_t shim_over_limit(void);
/* Reserves / gives back oversubscribed bytes on dev, counted apart from
 * the cap. Returns CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult shim_reserve_over(int dev, uint64_t bytes);
void shim_release_over(int dev, uint64_t bytes);
/* The shared region, or NULL (borrowed; lives as long as the process). */
struct shim_region *shim_account_region(void);
/* Bytes in use on dev: the job's with a region, this process's otherwise. */
uint64_t shim_used(int dev);
/* Whether dev has a cap. OUT *limit the cap in bytes. */
bool shim_limit(int dev, uint64_t *limit);
/* After fork() in the child. */
void shim_account_reset_child(void);
/* Bytes this process (not the job) holds on dev. */
uint64_t shim_used_self(int dev);
/* This process's pid as NVML lists it: the host pid the agent wrote into
 * the region's slot, else getpid(). */
int shim_host_pid(void);
/* Metering into the region, when there is one: time throttled, GPU time
 * estimated (or a correction of it). */
void shim_meter(uint64_t throttled_ns, int64_t busy_ns);
/* Counts one launch in the region, when there is one. Inline: the launch
 * path without a limit costs this and a branch. */
static inline void shim_count_launch(void)
{
    struct shim_region *r = shim_account_region();

    if (r)
        shim_region_count_launch(r);
}
/* Records NVML's last answer for this process on dev (the region's
 * metering fields). */
void shim_note_nvml(int dev, uint64_t bytes);

/* ---- pool.c: memory pools' reserved memory ---------------------------------- */

/* Whether a pool with a raised release threshold is counted on dev (any
 * device when dev < 0). Cheap: one load. */
bool shim_pools_counted(int dev);
/* The pool stream-ordered allocations on dev come from (cuDeviceGetMemPool),
 * as a key; 0 when unknown. */
uint64_t shim_pool_current(int dev);
/* What shim_pool_device answers for a pool of pinned host memory. */
#define SHIM_POOL_HOST (-2)
/* The device of pool (a key): its ordinal, SHIM_POOL_HOST for a pool of
 * pinned host memory, -1 when unknown (the caller takes the current
 * device). */
int shim_pool_device(uint64_t pool);
/* Before an allocation of bytes from pool: the spare bytes the pool keeps
 * (counted already) are taken off the books up to bytes, since the driver
 * hands them out first. Returns whether pool is counted (the caller then
 * calls shim_pool_refresh_one after the driver answered). */
bool shim_pool_draw(uint64_t pool, uint64_t bytes);
/* Recounts pool's spare bytes (reserved minus used, from the driver). */
void shim_pool_refresh_one(uint64_t pool);
/* Recounts every counted pool of dev (every device when dev < 0).
 * Returns whether bytes were given back. */
bool shim_pool_refresh(int dev);
/* After fork() in the child: no pools. */
void shim_pool_reset_child(void);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev);

/* ---- share.c: weighted fair sharing of a GPU between jobs ----------------- */

#define SHIM_SHARE_JOBS 64
/* A job that wanted GPU time this recently is active (a co-tenant). */
#define SHIM_SHARE_ACTIVE_NS 200000000ull
/* A job's file is touched, and the others' looked at, at most this often
 * (the active window is ten times longer). */
#define SHIM_SHARE_TOUCH_NS 20000000ull
/* The longest entry name (ALLOT_GPU_SHARE_ID); the highest weight is
 * ALLOT_SHIM_SHARE_WEIGHT_MAX (allot/shim_region.h). */
#define SHIM_SHARE_ID_MAX 63

struct shim_share; /* opaque: one GPU's folder and this job's entry in it */

/* Opens this job's entry id in dir/gpu-<hex> (the folder the agent keeps
 * for the GPU whose UUID's 32 hex digits are hex). Returns NULL after a
 * warning when the folder is not the agent's or holds no valid entry id:
 * the caller keeps to its limit. */
struct shim_share *shim_share_open(const char *dir, const char *hex, const char *id);
/* Frees s; accepts NULL. */
void shim_share_close(struct shim_share *s);
/* Marks the job as wanting GPU time (its .seen file's time, set to the
 * kernel's now), at most every few tens of ms; now: shim_share_now(). */
void shim_share_touch(struct shim_share *s, uint64_t now);
/* The job's rate, percent 1..100: weighted max-min fair among the active
 * entries, with the weights and ceilings the agent wrote, none above its
 * ceiling. 0 when the job has no usable entry (any more): the caller keeps
 * to its limit. now: shim_share_now(). */
int shim_share_rate(struct shim_share *s, uint64_t now);
/* CLOCK_REALTIME in ns: the clock of the files' times. */
uint64_t shim_share_now(void);
/* Water-filling: n jobs' weights and ceilings (percent) to their parts of
 * 100 % in out[]. Pure; n <= SHIM_SHARE_JOBS. */
void shim_share_fill(int n, const uint32_t *weight, const uint32_t *ceiling, double *out);

/* ---- limiter.c: the compute share ----------------------------------------- */

enum shim_launch_kind { SHIM_LAUNCH_KERNEL = 0, SHIM_LAUNCH_GRAPH = 1 };

/* CLOCK_MONOTONIC in ns (the clock every process of the machine shares). */
uint64_t shim_now_ns(void);
/* Reads ALLOT_GPU_SM_LIMIT (a bad value: a warning, no limit). */
void shim_limiter_init(void);
/* Whether launches are limited. */
bool shim_limiter_on(void);
/*
 * Before a launch of kind in context ctx on device dev: sleeps while the
 * job (with a region; the process otherwise) has used more than its share,
 * then charges the launch's estimated GPU time.
 * Returns the charge in ns.
 */
uint64_t shim_limiter_before(int kind, int dev, uint64_t ctx);
/*
 * Brackets the next launch with timing events on stream s (the _ptsz
 * record when ptsz) when no measurement is under way. Returns true when it
 * did: the caller launches, then must call shim_limiter_probe_end.
 */
bool shim_limiter_probe_start(int kind, uint64_t ctx, CUstream s, bool ptsz);
/* Closes the bracket; launched false when the launch failed. */
void shim_limiter_probe_end(CUstream s, bool ptsz, bool launched);
/* After fork() in the child. */
void shim_limiter_reset_child(void);

/* ---- nvml.c: NVML's memory info and the drift check ----------------------- */

/* Reads ALLOT_SHIM_NVML_CHECK and ALLOT_SHIM_NVML_DRIFT. NVML itself is
 * loaded on first need. */
void shim_nvml_init(void);
/* On the allocation path: checks dev's books against NVML's per-process
 * usage when the period has passed (one thread at a time). */
void shim_nvml_tick(int dev);
/* After fork() in the child: fresh locks. */
void shim_nvml_reset_child(void);
/* The NVML hook exported for name, or NULL. */
void *shim_nvml_hook_for_name(const char *name);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

/* ---- lookup.c ------------------------------------------------------------- */

/* Every driver function the shim hooks, then those it only calls. */
#define SHIM_HOOKED(X)                                                                             \
    X(cuMemAlloc)                                                                                  \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemAllocPitch)                                                                             \
    X(cuMemAllocPitch_v2)                                                                          \
    X(cuMemAllocManaged)                                                                           \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemAllocAsync_ptsz)                                                                        \
    X(cuMemAllocFromPoolAsync)                                                                     \
    X(cuMemAllocFromPoolAsync_ptsz)                                                                \
    X(cuMemFree)                                                                                   \
    X(cuMemFree_v2)                                                                                \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemFreeAsync_ptsz)                                                                         \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemRetainAllocationHandle)                                                                 \
    X(cuMemImportFromShareableHandle)                                                              \
    X(cuArrayCreate)                                                                               \
    X(cuArrayCreate_v2)                                                                            \
    X(cuArray3DCreate)                                                                             \
    X(cuArray3DCreate_v2)                                                                          \
    X(cuArrayDestroy)                                                                              \
    X(cuMipmappedArrayCreate)                                                                      \
    X(cuMipmappedArrayDestroy)                                                                     \
    X(cuCtxDestroy)                                                                                \
    X(cuCtxDestroy_v2)                                                                             \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxReset)                                                                     \
    X(cuDevicePrimaryCtxReset_v2)                                                                  \
    X(cuMemGetInfo)                                                                                \
    X(cuMemGetInfo_v2)                                                                             \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDeviceTotalMem_v2)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuLaunchKernel_ptsz)                                                                         \
    X(cuLaunchKernelEx)                                                                            \
    X(cuLaunchKernelEx_ptsz)                                                                       \
    X(cuLaunchCooperativeKernel)                                                                   \
    X(cuLaunchCooperativeKernel_ptsz)                                                              \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphLaunch_ptsz)                                                                          \
    X(cuLaunch)                                                                                    \
    X(cuLaunchGrid)                                                                                \
    X(cuLaunchGridAsync)                                                                           \
    X(cuGetProcAddress)                                                                            \
    X(cuGetProcAddress_v2)                                                                         \
    X(cuCtxCreate)                                                                                 \
    X(cuCtxCreate_v2)                                                                              \
    X(cuCtxCreate_v3)                                                                              \
    X(cuCtxCreate_v4)                                                                              \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuDevicePrimaryCtxRelease_v2)                                                                \
    X(cuGraphAddMemAllocNode)                                                                      \
    X(cuGraphAddNode)                                                                              \
    X(cuGraphAddNode_v2)                                                                           \
    X(cuGraphDestroyNode)                                                                          \
    X(cuGraphDestroy)                                                                              \
    X(cuMemPoolCreate)                                                                             \
    X(cuMemPoolDestroy)                                                                            \
    X(cuMemPoolSetAttribute)                                                                       \
    X(cuMemPoolTrimTo)                                                                             \
    X(cuDeviceGetDefaultMemPool)                                                                   \
    X(cuDeviceGetMemPool)                                                                          \
    X(cuCtxSetLimit)
#define SHIM_CALLED(X)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxGetCurrent)                                                                             \
    X(cuEventCreate)                                                                               \
    X(cuEventRecord)                                                                               \
    X(cuEventRecord_ptsz)                                                                          \
    X(cuEventQuery)                                                                                \
    X(cuEventElapsedTime)                                                                          \
    X(cuEventElapsedTime_v2)                                                                       \
    X(cuEventDestroy_v2)                                                                           \
    X(cuInit)                                                                                      \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetUuid)                                                                             \
    X(cuDeviceGetUuid_v2)                                                                          \
    X(cuMemAdvise)                                                                                 \
    X(cuMemAdvise_v2)                                                                              \
    X(cuMemPoolGetAttribute)                                                                       \
    X(cuCtxGetLimit)                                                                               \
    X(cuDeviceGetAttribute)

#define SHIM_ENUM(name) SHIM_FN_##name,
enum shim_fn { SHIM_HOOKED(SHIM_ENUM) SHIM_N_HOOKED, SHIM_CALLED(SHIM_ENUM) SHIM_N_FN };
#undef SHIM_ENUM

/*
 * The driver's own function for f, loading the driver on first use.
 * Returns NULL when the driver or the symbol is missing.
 */
void *shim_real(enum shim_fn f);
/* The driver's function `name` with its own type (NULL when missing);
 * name is pasted into an identifier, so it cannot be parenthesised. */
#define REAL(name)                                                                                 \
    ((__typeof__(&name))shim_real(SHIM_FN_##name)) // NOLINT(bugprone-macro-parentheses)
/* Whether the driver was loaded (CUDA_ERROR_NOT_INITIALIZED otherwise). */
bool shim_driver_loaded(void);
/* The hook exported for a driver symbol name, or NULL when not hooked. */
void *shim_hook_for_name(const char *name);
/* The real dlsym (not the override): handle and name as dlsym's. */
void *shim_dlsym(void *handle, const char *name);
/* What the dlsym override (dlsym.c) answers for symbol, which the real
 * dlsym found at p (not NULL): the hook when the name is hooked, else p. */
void *shim_dlsym_answer(const char *symbol, void *p);
/* The CUDA ordinal (as this process numbers its visible devices) whose
 * UUID has the 32 hex digits hex, or -1. Initialises the driver (cuInit)
 * when it was not yet; the devices are learnt once. */
int shim_cuda_ordinal_of(const char *hex);
/* The 32 hex digits of CUDA ordinal dev's UUID into out[33]. Returns
 * false when unknown. */
bool shim_cuda_uuid_hex(int dev, char out[33]);
/*
 * For a pointer p the driver handed out for symbol (cuGetProcAddress
 * semantics: base name, CUDA version, flags): our hook when p is, or
 * stands for, a function we hook; p otherwise.
 */
void *shim_swap_proc(const char *symbol, void *p, int cuda_version, cuuint64_t flags);

/* ---- hooks.c: the exported hooks, declared for lookup.c -------------------- */

/* CUDA_ERROR_NOT_INITIALIZED without a driver, else CUDA_ERROR_NOT_FOUND:
 * what a hook whose driver function is missing answers. */
CUresult shim_missing(void);
/* The calling thread's current device (cuCtxGetDevice). OUT *dev. */
CUresult shim_current_device(int *dev);
/* The calling thread's current context as a table key, 0 if none. */
uint64_t shim_current_ctx(void);
/* Drops every record that dies with owner (a context or a graph), giving
 * their bytes back. */
void shim_drop_owner(uint64_t owner);
/* Records a with its bytes already reserved; false (nothing recorded)
 * when the table cannot grow. A record the value replaces is given back. */
bool shim_record(const struct shim_alloc *a);
/* Takes (key, space) out of the table and gives its bytes back. Returns
 * whether it was there. */
bool shim_forget(uint64_t key, int space);
/* Primary contexts: the one of dev (0 unknown), learnt at retain. */
uint64_t shim_primary_ctx(int dev);

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
                         unsigned int height, unsigned int elem);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream s);
CUresult cuMemFree(CUdeviceptr_v1 dptr);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuArrayCreate(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR_v1 *desc);
CUresult cuArrayCreate_v2(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR *desc);
CUresult cuArray3DCreate(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc);
CUresult cuArray3DCreate_v2(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR *desc);
CUresult cuArrayDestroy(CUarray arr);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *arr, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                unsigned int levels);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray arr);
CUresult cuCtxDestroy(CUcontext c);
CUresult cuCtxDestroy_v2(CUcontext c);
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total);
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total);
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream s, void **params, void **extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                             CUstream s, void **params, void **extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shmem, CUstream s, void **params);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream s,
                                        void **params);
CUresult cuGraphLaunch(CUgraphExec g, CUstream s);
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s);
CUresult cuLaunch(CUfunction f);
CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height);
CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream s);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status);
/* vmm.c: virtual memory management */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
                                        CUmemAllocationHandleType type);
/* overhead.c: contexts' overhead and graphs' memory nodes */
CUresult cuCtxCreate(CUcontext *c, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *c, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *c, CUexecAffinityParam *params, int n, unsigned int flags,
                        CUdevice dev);
CUresult cuCtxCreate_v4(CUcontext *c, CUctxCreateParams *params, unsigned int flags, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                CUDA_MEM_ALLOC_NODE_PARAMS *params);
CUresult cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                        CUgraphNodeParams *params);
CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                           const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *params);
CUresult cuGraphDestroyNode(CUgraphNode node);
CUresult cuGraphDestroy(CUgraph g);
/* limits.c: the device memory a context's limits reserve */
CUresult cuCtxSetLimit(CUlimit limit, size_t value);
/* After fork() in the child: a fresh lock. */
void shim_limits_reset_child(void);
/* Counts a newly retained primary context's overhead (retain calls it).
 * Returns CUDA_ERROR_OUT_OF_MEMORY when the cap refuses it. */
CUresult shim_primary_retained(CUcontext c, CUdevice dev);
/* The configured estimate per context (ALLOT_GPU_CONTEXT_OVERHEAD), 0 none. */
uint64_t shim_ctx_overhead(void);
/* What a new context on dev counts: the measured figure once the NVML
 * check has measured dev, the configured estimate until then. */
uint64_t shim_ctx_figure(int dev);
/*
 * The NVML check's measurement on dev: NVML says this process uses
 * nvml_bytes there while its books hold books (contexts included). The
 * process's contexts on dev are recounted at max(0, nvml_bytes - the
 * books' other bytes) / their number, which new contexts on dev count
 * from then on. Nothing happens when no context of dev is counted.
 */
void shim_ctx_measured(int dev, uint64_t nvml_bytes, uint64_t books);

#endif
