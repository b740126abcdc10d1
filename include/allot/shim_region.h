/*
 * Reading a job's liballot-cuda.so region (docs/shim.md "The shared
 * region"): the agent links this small library (allot-shimreader) to meter
 * a job's GPU use and to tell the shim its processes' host pids. It never
 * maps the file and never takes the region's lock, so a job that corrupts,
 * truncates or locks its region can neither crash nor block the agent: the
 * file is read with pread into the caller's memory and validated there.
 *
 * Counters are read without the lock: each is a 64-bit word its process
 * updates alone, so a value is at most one update old; the per-job sums
 * may mix two moments by that much.
 */
#ifndef ALLOT_SHIM_REGION_H
#define ALLOT_SHIM_REGION_H

#include <stdbool.h>
#include <stdint.h>

#define ALLOT_SHIM_MAX_DEV  32
#define ALLOT_SHIM_MAX_PROC 128

/* The largest weight a GPU share entry may give (docs/shim.md). */
#define ALLOT_SHIM_SHARE_WEIGHT_MAX 1000000u

/* The 32 lower-case hex digits of NVML UUID `uuid` ("GPU-..." or
 * "MIG-...", dashes skipped, either case) into out: the name of the GPU's
 * share folder, gpu-HEX. False for anything else (NULL, a wrong length,
 * another character). src/shim/uuid.c. */
bool allot_shim_uuid_hex(const char *uuid, char out[33]);

/* One process of the job, as its slot says. */
struct allot_shim_proc {
    int slot;       /* its slot, for allot_shim_region_set_host_pid */
    int pid;        /* as the job's pid namespace numbers it */
    int host_pid;   /* as the agent wrote it, 0 not yet */
    uint64_t start; /* start time, clock ticks since boot (/proc/PID/stat field 22) */
    uint64_t pidns; /* inode of its pid namespace, 0 unknown */
    uint64_t launches, throttled_ns, busy_ns;
    uint64_t used[ALLOT_SHIM_MAX_DEV], peak[ALLOT_SHIM_MAX_DEV];
    uint64_t over[ALLOT_SHIM_MAX_DEV], nvml_used[ALLOT_SHIM_MAX_DEV];
};

/* A job's usage: per-job totals, then its live processes. */
struct allot_shim_usage {
    unsigned version;   /* the region's layout version */
    unsigned reclaimed; /* dead processes' slots taken back */
    /* per device: bytes held now, the most ever held at once, oversubscribed
     * bytes now */
    uint64_t used[ALLOT_SHIM_MAX_DEV], peak[ALLOT_SHIM_MAX_DEV], over[ALLOT_SHIM_MAX_DEV];
    /* the job's processes, dead ones included: launches, time throttled, GPU
     * time estimated (ns) */
    uint64_t launches, throttled_ns, busy_ns;
    int n_procs;
    struct allot_shim_proc procs[ALLOT_SHIM_MAX_PROC];
};

/*
 * Reads the region file at path into *out (caller-allocated; it is large:
 * about 140 KiB). A region not yet initialised (empty, or its first
 * process still setting it up) reads as no use. A slot whose process no
 * longer lives (exited, killed, a zombie not reaped yet, its pid reused),
 * which the shim has not reclaimed yet, is left out of the processes and
 * the bytes; its metering counters stay in the totals. Liveness is seen
 * through the slot's pid when the process shares the caller's pid
 * namespace, else through the host pid once written; a process of
 * another namespace with no host pid yet is taken for alive. Returns 0,
 * ALLOT_ENOENT when the file does not exist, ALLOT_EIO when it cannot be
 * read or is not a regular file (a symbolic link is not followed),
 * ALLOT_EINVAL when its size, magic, version or layout is wrong.
 */
int allot_shim_region_read(const char *path, struct allot_shim_usage *out);

/*
 * Tells the shim the host pid of the process in slot (from
 * allot_shim_region_read) whose start time is start: the shim uses it to
 * find itself in NVML's process lists. Written without the lock; a slot
 * reused meanwhile by another process has another start time, so the
 * shim ignores the stale pid. Returns 0, ALLOT_EINVAL for a bad slot,
 * ALLOT_ENOENT / ALLOT_EIO / ALLOT_EINVAL as allot_shim_region_read for
 * the file.
 */
int allot_shim_region_set_host_pid(const char *path, int slot, int host_pid, uint64_t start);

/*
 * Finds the host pid of process p among candidates (host pids, such as the
 * job's cgroup.procs): the one whose /proc/PID/stat start time is p's and
 * whose innermost pid (/proc/PID/status NSpid) is p->pid, in p's pid
 * namespace when known. Returns it, or 0 when none matches.
 */
int allot_shim_region_find_host_pid(const struct allot_shim_proc *p, const int *candidates, int n);

#endif
