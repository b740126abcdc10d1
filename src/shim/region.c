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
 * reuses the pid).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

struct shim_region {
    struct shim_region_hdr *h; /* owned mapping of sizeof(*h) bytes */
    int slot;                  /* this process's slot, -1 none yet */
    pid_t pid;                 /* the pid slot belongs to */
    uint64_t key;              /* the file's device and inode, mixed */
};

/* Field 22 of /proc/PID/stat (start time in clock ticks), 0 if unknown. */
static uint64_t proc_start(pid_t pid)
{
    char path[64], buf[512];
    unsigned long long start = 0;
    const char *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name may hold spaces and parentheses: skip past the last ')' */
    p = strrchr(buf, ')');
    if (!p)
        return 0;
    /* the k-th space after ')' starts field k + 2; the start time is field 22 */
    for (int k = 0; k < 20 && p; k++)
        p = strchr(p + 1, ' ');
    if (p && sscanf(p + 1, "%llu", &start) != 1)
        start = 0;
    return start;
}

/* The inode of this process's pid namespace, 0 if unknown: with the pid,
 * what the agent needs to find the process's host pid. */
static uint64_t own_pidns(void)
{
    char link[64];
    unsigned long long ino = 0;
    ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);

    if (n <= 0)
        return 0;
    link[n] = '\0';
    if (sscanf(link, "pid:[%llu]", &ino) != 1)
        return 0;
    return ino;
}

static bool slot_alive(const struct shim_slot *s)
{
    uint64_t start;

    if (s->pid <= 0)
        return false;
    if (kill(s->pid, 0) != 0 && errno == ESRCH)
        return false;
    start = proc_start(s->pid);
    /* same pid, different start time: the pid was reused */
    return !(s->start && start && start != s->start);
}

static int reclaim_locked(struct shim_region_hdr *h)
{
    int n = 0;

    for (int i = 0; i < SHIM_MAX_PROC; i++) {
        struct shim_slot *s = &h->slots[i];

        if (s->pid && s->pid != getpid() && !slot_alive(s)) {
            /* the job's totals keep what the dead process did */
            h->done_launches += s->launches;
            h->done_throttled_ns += s->throttled_ns;
            h->done_busy_ns += s->busy_ns;
            memset(s, 0, sizeof(*s));
            n++;
        }
    }
    h->reclaimed += (uint32_t)n;
    return n;
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

static bool init_header(struct shim_region_hdr *h)
{
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

static bool header_valid(const struct shim_region_hdr *h)
{
    return __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == SHIM_REGION_MAGIC &&
           h->version == SHIM_REGION_VERSION && h->size == sizeof(*h) &&
           h->max_dev == SHIM_MAX_DEV && h->max_proc == SHIM_MAX_PROC;
}

struct shim_region *shim_region_open(const char *path)
{
    struct shim_region *r = NULL;
    struct shim_region_hdr *h = MAP_FAILED;
    const char *why = NULL;
    struct stat st;
    int fd;

    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        shim_warn("cannot open the region %s (%s): counting per process", path, strerror(errno));
        return NULL;
    }
    if (flock(fd, LOCK_EX) || fstat(fd, &st)) {
        why = "cannot lock it";
        goto out_fd;
    }
    if (st.st_size == 0 && ftruncate(fd, (off_t)sizeof(*h))) {
        why = "cannot size it";
        goto out_fd;
    }
    if (st.st_size != 0 && (uint64_t)st.st_size != sizeof(*h)) {
        why = "its size is wrong";
        goto out_fd;
    }
    h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) {
        why = "cannot map it";
        goto out_fd;
    }
    /* magic 0: new, or its first process died initialising it (we hold
     * the flock, so nobody else is) */
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == 0 && !init_header(h)) {
        why = "cannot initialise its lock";
        goto out_map;
    }
    if (!header_valid(h)) {
        why = "its header is corrupt (magic, version or layout)";
        goto out_map;
    }
    r = calloc(1, sizeof(*r));
    if (!r) {
        why = "out of memory";
        goto out_map;
    }
    r->h = h;
    r->slot = -1;
    r->key = ((uint64_t)st.st_dev << 40) ^ (uint64_t)st.st_ino ^ 0x9e3779b97f4a7c15ull;
    goto out_fd;
out_map:
    munmap(h, sizeof(*h));
out_fd:
    /* explicitly: the mapping holds the open file, so close() alone would
     * keep the flock until munmap */
    flock(fd, LOCK_UN);
    close(fd);
    if (why)
        shim_warn("region %s unusable, %s: counting per process", path, why);
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
        r->h->slots[free_slot].start = proc_start(pid);
        r->h->slots[free_slot].pidns = own_pidns();
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

static uint64_t used_locked(const struct shim_region_hdr *h, int dev)
{
    uint64_t sum = 0;

    for (int i = 0; i < slots_hi(h); i++)
        if (h->slots[i].pid)
            sum += h->slots[i].used[dev];
    return sum;
}

static uint64_t over_locked(const struct shim_region_hdr *h, int dev)
{
    uint64_t sum = 0;

    for (int i = 0; i < slots_hi(h); i++)
        if (h->slots[i].pid)
            sum += h->slots[i].over[dev];
    return sum;
}

CUresult shim_region_reserve(struct shim_region *r, int dev, uint64_t bytes, bool limited,
                             uint64_t limit)
{
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    struct shim_slot *s;
    uint64_t used;

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
    used = used_locked(r->h, dev);
    if (limited) {
        /* a refusal may only be owed to the dead: take their bytes back */
        if ((used > limit || bytes > limit - used) && reclaim_locked(r->h))
            used = used_locked(r->h, dev);
        if (used > limit || bytes > limit - used)
            goto out;
    }
    s->used[dev] += bytes;
    if (s->used[dev] > s->peak[dev])
        s->peak[dev] = s->used[dev];
    if (used + bytes > r->h->job_peak[dev])
        r->h->job_peak[dev] = used + bytes;
    rc = CUDA_SUCCESS;
out:
    region_unlock(r);
    return rc;
}

void shim_region_release(struct shim_region *r, int dev, uint64_t bytes)
{
    struct shim_slot *s;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return;
    s = own_slot(r);
    if (s)
        s->used[dev] -= bytes < s->used[dev] ? bytes : s->used[dev];
    region_unlock(r);
}

CUresult shim_region_reserve_over(struct shim_region *r, int dev, uint64_t bytes, uint64_t limit)
{
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    struct shim_slot *s;
    uint64_t over;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return CUDA_ERROR_OUT_OF_MEMORY;
    s = own_slot(r);
    if (!s)
        goto out;
    over = over_locked(r->h, dev);
    if ((over > limit || bytes > limit - over) && reclaim_locked(r->h))
        over = over_locked(r->h, dev);
    if (over > limit || bytes > limit - over)
        goto out;
    s->over[dev] += bytes;
    rc = CUDA_SUCCESS;
out:
    region_unlock(r);
    return rc;
}

void shim_region_release_over(struct shim_region *r, int dev, uint64_t bytes)
{
    struct shim_slot *s;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return;
    s = own_slot(r);
    if (s)
        s->over[dev] -= bytes < s->over[dev] ? bytes : s->over[dev];
    region_unlock(r);
}

uint64_t shim_region_used(struct shim_region *r, int dev)
{
    uint64_t used = 0;

    if (dev < 0 || dev >= SHIM_MAX_DEV || !region_lock(r))
        return 0;
    /* what a program is told must not include the dead: reclaim first
     * (one kill() and one /proc read per occupied slot; not a hot path) */
    reclaim_locked(r->h);
    used = used_locked(r->h, dev);
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

uint64_t shim_region_key(const struct shim_region *r)
{
    return r->key;
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
