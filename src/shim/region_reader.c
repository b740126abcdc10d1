/*
 * The reader library of liballot-cuda.so's region (allot-shimreader,
 * include/allot/shim_region.h), for the agent. It shares the layout
 * (region_layout.h) and the /proc readers (procfs.c) with the shim and
 * nothing else: no shim code, no mapping, no lock. The file is opened
 * without following links, checked to be a regular file of the layout's
 * size, read with pread (the header, then each slot) into the caller's
 * memory and validated there, so whatever a job does to its region (a
 * truncation, garbage, a held or broken mutex) costs the agent at most a
 * refused read. Slots of processes that no longer live (shim_proc_alive,
 * procfs.c: the shim's own rule; zombies included) are left out of the
 * processes and the bytes, as the shim would reclaim them; their metering
 * counters stay in the job's totals.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allot/common.h"
#include "allot/shim_region.h"
#include "procfs.h"
#include "region_layout.h"

_Static_assert(ALLOT_SHIM_MAX_DEV == SHIM_MAX_DEV, "device count");
_Static_assert(ALLOT_SHIM_MAX_PROC == SHIM_MAX_PROC, "process count");

/* Opens path for reading (or writing) as a regular file, no links. OUT
 * *fd. Returns 0 or an ALLOT_E* code. */
static int open_region(const char *path, int flags, int *fd)
{
    struct stat st;

    if (!path)
        return ALLOT_EINVAL;
    *fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (*fd < 0)
        return errno == ENOENT ? ALLOT_ENOENT : ALLOT_EIO;
    if (fstat(*fd, &st) || !S_ISREG(st.st_mode)) {
        close(*fd);
        return ALLOT_EIO;
    }
    if (st.st_size != 0 && (uint64_t)st.st_size != sizeof(struct shim_region_hdr)) {
        close(*fd);
        return ALLOT_EINVAL;
    }
    return st.st_size == 0 ? ALLOT_ESTATE : 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Reads len bytes at off. Returns whether all came. */
static bool read_at(int fd, void *buf, size_t len, size_t off)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}

/*
 * Whether slot s's process lives, as far as this process can tell (the
 * rule is shim_proc_alive's, the shim's own): by the slot's pid when the
 * process shares this process's pid namespace (own_ns), else by the host
 * pid the agent wrote, when valid. A process of another namespace whose
 * host pid is not known yet is taken for alive.
 */
static bool slot_alive(const struct shim_slot *s, uint64_t own_ns)
{
    if (s->pidns && s->pidns == own_ns)
        return shim_proc_alive(s->pid, s->start);
    if (s->host_pid > 0 && s->host_start && s->host_start == s->start)
        return shim_proc_alive(s->host_pid, s->start);
    return true;
}

/* Reads the header's field f into the variable v (of f's type). */
#define READ_FIELD(fd, f, v)                                                                       \
    (sizeof(v) == sizeof(((struct shim_region_hdr *)0)->f) &&                                      \
     read_at((fd), &(v), sizeof(v), offsetof(struct shim_region_hdr, f)))

int allot_shim_region_read(const char *path, struct allot_shim_usage *out)
{
    const size_t head = offsetof(struct shim_region_hdr, slots);
    uint32_t magic = 0, version = 0, max_dev = 0, max_proc = 0, reclaimed = 0;
    uint64_t size = 0, own_ns;
    int fd, rc;

    if (!out)
        return ALLOT_EINVAL;
    memset(out, 0, sizeof(*out));
    out->version = SHIM_REGION_VERSION;
    rc = open_region(path, O_RDONLY, &fd);
    if (rc == ALLOT_ESTATE) {
        close(fd);
        return 0; /* created, not initialised yet: no use */
    }
    if (rc)
        return rc;
    /* field by field and slot by slot with pread, into this process's
     * memory, never a mapping: a truncated file is a short read, not a
     * fault, and nothing large lands on the stack */
    if (!READ_FIELD(fd, magic, magic) || !READ_FIELD(fd, version, version) ||
        !READ_FIELD(fd, size, size) || !READ_FIELD(fd, max_dev, max_dev) ||
        !READ_FIELD(fd, max_proc, max_proc) || !READ_FIELD(fd, reclaimed, reclaimed) ||
        !READ_FIELD(fd, job_peak, out->peak) || !READ_FIELD(fd, done_launches, out->launches) ||
        !READ_FIELD(fd, done_throttled_ns, out->throttled_ns) ||
        !READ_FIELD(fd, done_busy_ns, out->busy_ns)) {
        rc = ALLOT_EIO;
        goto out_fd;
    }
    if (magic == 0) {
        memset(out, 0, sizeof(*out)); /* its first process is still setting it up */
        out->version = SHIM_REGION_VERSION;
        goto out_fd;
    }
    if (magic != SHIM_REGION_MAGIC || version != SHIM_REGION_VERSION ||
        size != sizeof(struct shim_region_hdr) || max_dev != SHIM_MAX_DEV ||
        max_proc != SHIM_MAX_PROC) {
        rc = ALLOT_EINVAL;
        goto out_fd;
    }
    out->version = version;
    out->reclaimed = reclaimed;
    own_ns = shim_proc_pidns(0);
    for (int i = 0; i < SHIM_MAX_PROC; i++) {
        struct shim_slot s;
        struct allot_shim_proc *p;

        if (!read_at(fd, &s, sizeof(s), head + (size_t)i * sizeof(s))) {
            rc = ALLOT_EIO;
            goto out_fd;
        }
        if (s.pid <= 0)
            continue;
        /* the job's metering keeps what a dead process did (the shim folds
         * it into done_* when it reclaims the slot); its memory is freed */
        out->launches = add_sat(out->launches, s.launches);
        out->throttled_ns = add_sat(out->throttled_ns, s.throttled_ns);
        out->busy_ns = add_sat(out->busy_ns, s.busy_ns);
        if (!slot_alive(&s, own_ns))
            continue;
        p = &out->procs[out->n_procs++];
        p->slot = i;
        p->pid = s.pid;
        p->host_pid = s.host_start && s.host_start == s.start ? s.host_pid : 0;
        p->start = s.start;
        p->pidns = s.pidns;
        p->launches = s.launches;
        p->throttled_ns = s.throttled_ns;
        p->busy_ns = s.busy_ns;
        memcpy(p->used, s.used, sizeof(p->used));
        memcpy(p->peak, s.peak, sizeof(p->peak));
        memcpy(p->over, s.over, sizeof(p->over));
        memcpy(p->nvml_used, s.nvml_used, sizeof(p->nvml_used));
        for (int d = 0; d < SHIM_MAX_DEV; d++) {
            out->used[d] = add_sat(out->used[d], s.used[d]);
            out->over[d] = add_sat(out->over[d], s.over[d]);
        }
    }
    /* a peak read a moment before the counters it bounds */
    for (int d = 0; d < SHIM_MAX_DEV; d++)
        if (out->peak[d] < out->used[d])
            out->peak[d] = out->used[d];
out_fd:
    close(fd);
    if (rc)
        memset(out, 0, sizeof(*out));
    return rc;
}

int allot_shim_region_set_host_pid(const char *path, int slot, int host_pid, uint64_t start)
{
    const size_t base = offsetof(struct shim_region_hdr, slots);
    const size_t pid_at = offsetof(struct shim_slot, host_pid);
    const size_t start_at = offsetof(struct shim_slot, host_start);
    int32_t pid = host_pid;
    int fd, rc;

    if (slot < 0 || slot >= SHIM_MAX_PROC || host_pid <= 0)
        return ALLOT_EINVAL;
    rc = open_region(path, O_RDWR, &fd);
    if (rc == ALLOT_ESTATE) {
        close(fd);
        return ALLOT_EINVAL;
    }
    if (rc)
        return rc;
    /* the pid first: the shim trusts it once host_start matches */
    if (pwrite(fd, &pid, sizeof(pid),
               (off_t)(base + (size_t)slot * sizeof(struct shim_slot) + pid_at)) !=
            (ssize_t)sizeof(pid) ||
        pwrite(fd, &start, sizeof(start),
               (off_t)(base + (size_t)slot * sizeof(struct shim_slot) + start_at)) !=
            (ssize_t)sizeof(start))
        rc = ALLOT_EIO;
    close(fd);
    return rc;
}

/* The innermost pid of host pid pid (the last NSpid field), 0 if unknown. */
static int inner_pid(int pid)
{
    char path[64], line[256];
    int inner = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    f = fopen(path, "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        const char *q = line + 6;
        char *end;

        if (strncmp(line, "NSpid:", 6) != 0)
            continue;
        /* the pids from the outermost namespace in: keep the last */
        for (long v = strtol(q, &end, 10); end != q; v = strtol(q, &end, 10)) {
            inner = (int)v;
            q = end;
        }
        break;
    }
    fclose(f);
    return inner;
}

int allot_shim_region_find_host_pid(const struct allot_shim_proc *p, const int *candidates, int n)
{
    if (!p || !candidates)
        return 0;
    for (int i = 0; i < n; i++) {
        int c = candidates[i];

        if (c <= 0 || shim_proc_start(c) != p->start || inner_pid(c) != p->pid)
            continue;
        if (p->pidns && shim_proc_pidns(c) && shim_proc_pidns(c) != p->pidns)
            continue;
        return c;
    }
    return 0;
}
