/*
 * What /proc says about a process, for the region's slots: read by the
 * shim (region.c) and by the agent's reader library (region_reader.c),
 * which is why it is a file of its own with no other dependency.
 */
#ifndef ALLOT_SHIM_PROCFS_H
#define ALLOT_SHIM_PROCFS_H

#include <stdint.h>

/* Field 22 of /proc/PID/stat: the start time in clock ticks since boot;
 * 0 if unknown. Tells a reused pid from the process that had it. */
uint64_t shim_proc_start(int pid);
/* The inode of pid's pid namespace (/proc/PID/ns/pid; pid 0: this
 * process's), 0 if unknown. */
uint64_t shim_proc_pidns(int pid);

#endif
