/*
 * The job-wide shared region (ALLOT_SHIM_REGION, docs/shim.md): a file the
 * agent creates empty, mapped by every process of the job. The first
 * process initialises it under flock() (the kernel drops that lock if the
 * process dies); after that the file only changes under the header's
 * robust process-shared mutex. A process that dies holding the mutex hands
 * the next locker EOWNERDEAD: that locker reclaims dead processes' slots and
 * marks the mutex consistent, so nobody deadlocks.
 *
 * The job's usage of a device is the sum of the live slots' counters; no
 * separate total is kept, so a process dying half-way through an update
 * leaves nothing to repair beyond its own slot.
 *
 * A process takes a slot on its first reservation; its pid and start time
 * tell a dead process's slot from a live one (and from a new process that
 * reuses the pid). exec() keeps both, so the slot of a process whose image
 * is replaced is kept, its bytes zeroed when the new image maps the region
 * (the old image's device memory died with it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "procfs.h"
#include "shim.h"

struct shim_region {
    struct shim_region_hdr *h; /* owned mapping of sizeof(*h) bytes */
    int slot;                  /* this process's slot, -1 none yet */
    pid_t pid;                 /* the pid slot belongs to */
};

/* Whether s's process lives (procfs.c has the rule: a zombie or a reused
 * pid does not). */
static bool slot_alive(const struct shim_slot *s)
{
    return shim_proc_alive(s->pid, s->start);
}

/* Clears the slot of a process that no longer exists. Called locked. */
static void clear_dead_locked(struct shim_region_hdr *h, struct shim_slot *s)
{
    /* the job's totals keep what the dead process did */
    h->done_launches += s->launches;
    h->done_throttled_ns += s->throttled_ns;
    h->done_busy_ns += s->busy_ns;
    memset(s, 0, sizeof(*s));
    h->reclaimed++;
}

static int reclaim_locked(struct shim_region_hdr *h)
{
    int n = 0;

    for (int i = 0; i < SHIM_MAX_PROC; i++) {
        struct shim_slot *s = &h->slots[i];

        if (s->pid && s->pid != getpid() && !slot_alive(s)) {
            clear_dead_locked(h, s);
            n++;
        }
    }
    return n;
}

/*
 * When this image of the process maps the region: a slot that already
 * bears its pid belongs to an earlier image of this process, which
 * exec()'d this one (same pid, same start time; a fork child has a pid of
 * its own), and whose device memory died with it: the slot keeps its
 * metering but holds no bytes any more. One with another start time is a
 * dead process's whose pid was reused. Called locked.
 */
static void forget_old_image_locked(struct shim_region_hdr *h, pid_t pid, uint64_t start)
{
    for (int i = 0; i < SHIM_MAX_PROC; i++) {
        struct shim_slot *s = &h->slots[i];

        if (s->pid != pid)
            continue;
        if (s->start && start && s->start != start) {
            clear_dead_locked(h, s);
            continue;
        }
        memset(s->used, 0, sizeof(s->used));
        memset(s->over, 0, sizeof(s->over));
    }
}

static bool region_lock(struct shim_region *r)
{
    int e = pthread_mutex_lock(&r->h->lock.m);

    if (e == EOWNERDEAD) {
        /* its owner died inside an update: only its own slot can be torn */
        reclaim_locked(r->h);
        pthread_mutex_consistent(&r->h->lock.m);
        return true;
    }
    return e == 0;
}

static void region_unlock(struct shim_region *r)
{
    pthread_mutex_unlock(&r->h->lock.m);
}

static bool init_header(void *map)
{
    struct shim_region_hdr *h = map;
    pthread_mutexattr_t a;
    bool ok;

    memset(h, 0, sizeof(*h));
    h->version = SHIM_REGION_VERSION;
    h->size = sizeof(*h);
    h->max_dev = SHIM_MAX_DEV;
    h->max_proc = SHIM_MAX_PROC;
    if (pthread_mutexattr_init(&a))
        return false;
    ok = !pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) &&
         !pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) &&
         !pthread_mutex_init(&h->lock.m, &a);
    pthread_mutexattr_destroy(&a);
    if (ok)
        __atomic_store_n(&h->magic, SHIM_REGION_MAGIC, __ATOMIC_RELEASE);
    return ok;
}

static bool header_valid(const void *map)
{
    const struct shim_region_hdr *h = map;

    return __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == SHIM_REGION_MAGIC &&
           h->version == SHIM_REGION_VERSION && h->size == sizeof(*h) &&
           h->max_dev == SHIM_MAX_DEV && h->max_proc == SHIM_MAX_PROC;
}

struct shim_region *shim_region_open(const char *path)
{
    struct shim_region *r;
    struct shim_mapped m;
    const char *why;

    /* the agent creates the file: the shim never does */
    why = shim_map_file(path, sizeof(struct shim_region_hdr), init_header, header_valid, &m);
    if (why) {
        shim_warn("region %s unusable, %s: counting per process", path, why);
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (!r) {
        munmap(m.map, sizeof(struct shim_region_hdr));
        shim_warn("region %s unusable, out of memory: counting per process", path);
        return NULL;
    }
    r->h = m.map;
    r->slot = -1;
    if (region_lock(r)) {
        forget_old_image_locked(r->h, getpid(), shim_proc_start(getpid()));
        region_unlock(r);
    }
    return r;
}

void shim_region_close(struct shim_region *r)
{
    if (!r)
        return;
    munmap(r->h, sizeof(*r->h));
    free(r);
}

/* This process's slot, taken on first use. Called locked. */
static struct shim_slot *own_slot(struct shim_region *r)
{
    int free_slot = -1;
    pid_t pid;

    /* no getpid() here (a system call on every reservation): a forked
     * child's r->slot is reset by the fork handler */
    if (r->slot >= 0 && r->h->slots[r->slot].pid == r->pid)
        return &r->h->slots[r->slot];
    pid = getpid();
    for (int pass = 0; pass < 2 && free_slot < 0; pass++) {
        if (pass == 1 && !reclaim_locked(r->h))
            break;
        for (int i = 0; i < SHIM_MAX_PROC; i++) {
            if (r->h->slots[i].pid == pid) {
                /* ours from before (a slot taken back by another
                 * process's mistake is simply taken again) */
                free_slot = i;
                break;
            }
            if (!r->h->slots[i].pid && free_slot < 0)
                free_slot = i;
        }
    }
    if (free_slot < 0)
        return NULL;
    if (r->h->slots[free_slot].pid != pid) {
        memset(&r->h->slots[free_slot], 0, sizeof(r->h->slots[0]));
        r->h->slots[free_slot].start = shim_proc_start(pid);
        r->h->slots[free_slot].pidns = shim_proc_pidns(0);
        r->h->slots[free_slot].pid = pid;
    }
    if ((uint32_t)free_slot >= r->h->slots_hi)
        r->h->slots_hi = (uint32_t)free_slot + 1;
    r->pid = pid;
    __atomic_store_n(&r->slot, free_slot, __ATOMIC_RELEASE);
    return &r->h->slots[free_slot];
}

/* How many slots the sums look at: a job of a few processes has a few. */
static int slots_hi(const struct shim_region_hdr *h)
{
    return h->slots_hi < SHIM_MAX_PROC ? (int)h->slots_hi : SHIM_MAX_PROC;
}

/* A slot's bytes on dev: those held against the cap, or (over) the
 * oversubscribed ones. */
static uint64_t *bytes_of(struct shim_slot *s, int dev, bool over)
{
    return over ? &s->over[dev] : &s->used[dev];
}

/* The job's bytes on dev (or its oversubscribed ones). Called locked. */
static uint64_t sum_locked(struct shim_region_hdr *h, int dev, bool over)
{
    uint64_t sum = 0;

    for (int i = 0; i < slots_hi(h); i++)
        if (h->slots[i].pid)
            sum += *bytes_of(&h->slots[i], dev, over);
    return sum;
}

/* shim_region_reserve and shim_region_reserve_over: bytes against the cap
 * (with the peaks), or oversubscribed ones. */
static CUresult reserve(struct shim_region *r, int dev, uint64_t bytes, bool limited,
                        uint64_t limit, bool over)
{
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    struct shim_slot *s;
    uint64_t sum;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return CUDA_ERROR_OUT_OF_MEMORY;
    s = own_slot(r);
    if (!s) {
        shim_warn("the region has no free process slot (%d in use)", SHIM_MAX_PROC);
        /* without a cap there is nothing to refuse: the bytes go uncounted */
        if (!limited)
            rc = CUDA_SUCCESS;
        goto out;
    }
    sum = sum_locked(r->h, dev, over);
    if (limited) {
        /* a refusal may only be owed to the dead: take their bytes back */
        if ((sum > limit || bytes > limit - sum) && reclaim_locked(r->h))
            sum = sum_locked(r->h, dev, over);
        if (sum > limit || bytes > limit - sum)
            goto out;
    }
    *bytes_of(s, dev, over) += bytes;
    if (!over && s->used[dev] > s->peak[dev])
        s->peak[dev] = s->used[dev];
    if (!over && sum + bytes > r->h->job_peak[dev])
        r->h->job_peak[dev] = sum + bytes;
    rc = CUDA_SUCCESS;
out:
    region_unlock(r);
    return rc;
}

static void release(struct shim_region *r, int dev, uint64_t bytes, bool over)
{
    struct shim_slot *s;
    uint64_t *held;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return;
    s = own_slot(r);
    if (s) {
        held = bytes_of(s, dev, over);
        *held -= bytes < *held ? bytes : *held;
    }
    region_unlock(r);
}

CUresult shim_region_reserve(struct shim_region *r, int dev, uint64_t bytes, bool limited,
                             uint64_t limit)
{
    return reserve(r, dev, bytes, limited, limit, false);
}

void shim_region_release(struct shim_region *r, int dev, uint64_t bytes)
{
    release(r, dev, bytes, false);
}

CUresult shim_region_reserve_over(struct shim_region *r, int dev, uint64_t bytes, uint64_t limit)
{
    return reserve(r, dev, bytes, true, limit, true);
}

void shim_region_release_over(struct shim_region *r, int dev, uint64_t bytes)
{
    release(r, dev, bytes, true);
}

uint64_t shim_region_used(struct shim_region *r, int dev)
{
    uint64_t used = 0;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return 0;
    /* what a program is told must not include the dead: reclaim first
     * (one kill() and one /proc read per occupied slot; not a hot path) */
    reclaim_locked(r->h);
    used = sum_locked(r->h, dev, false);
    region_unlock(r);
    return used;
}

uint64_t shim_region_self_used(struct shim_region *r, int dev)
{
    uint64_t used = 0;
    struct shim_slot *s;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return 0;
    s = r->slot >= 0 && r->pid == getpid() ? &r->h->slots[r->slot] : NULL;
    if (s && s->pid == r->pid)
        used = s->used[dev];
    region_unlock(r);
    return used;
}

/* This process's slot without the lock, once it has one: what only this
 * process writes (its metering counters) is updated with atomics. Takes
 * the slot (locked) the first time. NULL when none can be had. */
static struct shim_slot *own_slot_fast(struct shim_region *r)
{
    struct shim_slot *s;
    int slot = __atomic_load_n(&r->slot, __ATOMIC_ACQUIRE);

    /* no getpid() (a system call): a forked child's slot is reset by the
     * fork handler */
    if (slot >= 0)
        return &r->h->slots[slot];
    if (!region_lock(r))
        return NULL;
    s = own_slot(r);
    region_unlock(r);
    return s;
}

int shim_region_host_pid(struct shim_region *r)
{
    struct shim_slot *s = own_slot_fast(r);
    uint64_t start;
    int32_t pid;

    if (!s)
        return 0;
    /* the agent writes host_pid, then host_start */
    start = __atomic_load_n(&s->host_start, __ATOMIC_ACQUIRE);
    pid = __atomic_load_n(&s->host_pid, __ATOMIC_RELAXED);
    return start && start == s->start ? pid : 0;
}

void shim_region_note_nvml(struct shim_region *r, int dev, uint64_t bytes)
{
    struct shim_slot *s = own_slot_fast(r);

    if (s && dev >= 0 && dev < SHIM_MAX_DEV)
        __atomic_store_n(&s->nvml_used[dev], bytes, __ATOMIC_RELAXED);
}

void shim_region_count_launch(struct shim_region *r)
{
    struct shim_slot *s = own_slot_fast(r);

    if (s)
        __atomic_fetch_add(&s->launches, 1, __ATOMIC_RELAXED);
}

void shim_region_meter(struct shim_region *r, uint64_t throttled_ns, int64_t busy_ns)
{
    struct shim_slot *s = own_slot_fast(r);
    uint64_t old;

    if (!s)
        return;
    if (throttled_ns)
        __atomic_fetch_add(&s->throttled_ns, throttled_ns, __ATOMIC_RELAXED);
    if (busy_ns >= 0) {
        __atomic_fetch_add(&s->busy_ns, (uint64_t)busy_ns, __ATOMIC_RELAXED);
        return;
    }
    /* a correction downwards: never below 0 (only this process writes) */
    old = __atomic_load_n(&s->busy_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->busy_ns, old > (uint64_t)-busy_ns ? old - (uint64_t)-busy_ns : 0,
                     __ATOMIC_RELAXED);
}

int shim_region_reclaim(struct shim_region *r)
{
    int n;

    if (!region_lock(r))
        return 0;
    n = reclaim_locked(r->h);
    region_unlock(r);
    return n;
}

void shim_region_reset_child(struct shim_region *r)
{
    if (r)
        __atomic_store_n(&r->slot, -1, __ATOMIC_RELEASE);
}

uint64_t shim_sm_charge(int64_t *debt_ns, uint64_t *last_ns, int percent, int64_t burst_ns,
                        int64_t correction_ns, uint64_t charge_ns, uint64_t now_ns)
{
    int64_t floor = -burst_ns * percent / 100;

    if (percent <= 0)
        return 0;
    /* a clock behind ours (another process read it a moment earlier): no
     * allowance, not a negative one */
    if (now_ns > *last_ns) {
        *debt_ns -= (int64_t)((now_ns - *last_ns) * (uint64_t)percent / 100);
        *last_ns = now_ns;
    }
    if (*debt_ns < floor)
        *debt_ns = floor;
    *debt_ns += correction_ns;
    if (*debt_ns > 0)
        return (uint64_t)*debt_ns * 100 / (uint64_t)percent;
    *debt_ns += (int64_t)charge_ns;
    return 0;
}

uint64_t shim_region_sm_charge(struct shim_region *r, int dev, int percent, int64_t burst_ns,
                               int64_t correction_ns, uint64_t charge_ns, uint64_t now_ns)
{
    uint64_t wait;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return 0;
    wait = shim_sm_charge(&r->h->sm_debt_ns[dev], &r->h->sm_last_ns[dev], percent, burst_ns,
                          correction_ns, charge_ns, now_ns);
    region_unlock(r);
    return wait;
}
