/*
 * The layout of a job's shared region file (ALLOT_SHIM_REGION,
 * docs/shim.md "The shared region"): written by liballot-cuda.so
 * (region.c), read by the agent through the reader library
 * (region_reader.c, include/allot/shim_region.h). Native byte order,
 * x86-64 / aarch64 alignment; the version changes with any change here.
 *
 * Who writes what: a process's slot is written by that process only
 * (counters under the mutex or, for its own metering counters, with
 * atomic adds), except host_pid and host_start, which only the agent
 * writes; a dead process's slot is cleared, under the mutex, by whoever
 * finds it dead, its metering counters folded into the header's done_*
 * first so the job's totals keep them.
 */
#ifndef ALLOT_SHIM_REGION_LAYOUT_H
#define ALLOT_SHIM_REGION_LAYOUT_H

#include <pthread.h>
#include <stdint.h>

#define SHIM_MAX_DEV  32  /* device ordinals the cap and region cover */
#define SHIM_MAX_PROC 128 /* processes of one job sharing a region */

#define SHIM_REGION_MAGIC   0x414c4f54u /* "ALOT" */
#define SHIM_REGION_VERSION 3u

struct shim_slot {
    int32_t pid;    /* 0: free; as the job's pid namespace numbers it */
    uint32_t flags; /* reserved, 0 */
    uint64_t start; /* the process's start time (/proc/PID/stat field 22), 0 unknown */
    uint64_t pidns; /* inode of its pid namespace (/proc/self/ns/pid), 0 unknown */
    /* written by the agent only: the process's pid on the host, valid
     * while host_start equals start (a reused slot's is not) */
    int32_t host_pid;
    uint32_t pad;
    uint64_t host_start;
    /* metering, this process: launches through the hooks, time its
     * launches waited for the compute share, and the GPU time they were
     * estimated to take (measured, with a limit only) */
    uint64_t launches, throttled_ns, busy_ns;
    uint64_t used[SHIM_MAX_DEV];      /* bytes held against the cap */
    uint64_t peak[SHIM_MAX_DEV];      /* the most used ever held */
    uint64_t over[SHIM_MAX_DEV];      /* oversubscribed: managed, host-preferred */
    uint64_t nvml_used[SHIM_MAX_DEV]; /* NVML's usedGpuMemory at the last check */
};

struct shim_region_hdr {
    uint32_t magic;   /* SHIM_REGION_MAGIC, written last when initialised */
    uint32_t version; /* SHIM_REGION_VERSION */
    uint64_t size;    /* sizeof(struct shim_region_hdr) */
    uint32_t max_dev, max_proc;
    uint32_t reclaimed; /* dead processes' slots taken back so far */
    uint32_t slots_hi;  /* one past the highest slot ever taken: sums stop there */
    union {
        pthread_mutex_t m; /* process-shared, robust */
        char bytes[64];
    } lock;
    /* the job's compute share per device (limiter.c): GPU time charged
     * minus allowed, and when the allowance was last accrued
     * (CLOCK_MONOTONIC, ns) */
    int64_t sm_debt_ns[SHIM_MAX_DEV];
    uint64_t sm_last_ns[SHIM_MAX_DEV];
    /* the job's peak of its live processes' used bytes, per device */
    uint64_t job_peak[SHIM_MAX_DEV];
    /* reclaimed (dead) processes' metering counters */
    uint64_t done_launches, done_throttled_ns, done_busy_ns;
    struct shim_slot slots[SHIM_MAX_PROC];
};

#endif
