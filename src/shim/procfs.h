/*
 * What /proc says about a process, for the region's slots: read by the
 * shim (region.c) and by the agent's reader library (region_reader.c),
 * which is why it is a file of its own with no other dependency.
 */
#ifndef ALLOT_SHIM_PROCFS_H
#define ALLOT_SHIM_PROCFS_H

#include <stdbool.h>
#include <stdint.h>

/* Field 22 of /proc/PID/stat: the start time in clock ticks since boot;
 * 0 if unknown. Tells a reused pid from the process that had it. */
uint64_t shim_proc_start(int pid);
/*
 * Whether pid (as this process's pid namespace numbers it) is a live
 * process started at start (0: any). False when no such process exists,
 * when it is a zombie (killed or exited, not reaped yet: its memory is
 * freed) or dead, or when its start time differs (the pid was reused). A
 * zombie main thread with other threads still running is a live process.
 * One that exists but /proc will not describe (another user's, under
 * hidepid) is taken for alive. The one liveness rule of the region, for
 * the shim and the reader alike.
 */
bool shim_proc_alive(int pid, uint64_t start);
/* The inode of pid's pid namespace (/proc/PID/ns/pid; pid 0: this
 * process's), 0 if unknown. */
uint64_t shim_proc_pidns(int pid);

#endif
