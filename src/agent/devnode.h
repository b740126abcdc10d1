/*
 * Files, folders and device nodes on the node (devnode.c): the few
 * file-system helpers the agent's parts share, the network's included.
 */
#ifndef ALLOT_AGENT_DEVNODE_H
#define ALLOT_AGENT_DEVNODE_H

#include <stddef.h>
#include <sys/types.h>

/* Writes text to DIR/NAME atomically and durably (temporary file, fsync,
 * rename, the folder synced; mode 0600). Returns 0 or -errno. */
int agent_write_atomic(const char *dir, const char *name, const char *text);
/* Reads DIR/NAME (at most len - 1 bytes, NUL-terminated) into buf.
 * Returns 0, or -1 when it cannot be read. */
int agent_read_small(const char *dir, const char *name, char *buf, size_t len);

/* Makes character device node `path` (major, minor, mode) unless it is
 * there as such. 0 or -errno. */
int agent_mkchr(const char *path, int major, int minor, mode_t mode);
/* mkdir -p with mode 0755. 0 or -errno. */
int agent_mkdir_p(const char *path);
/* The major number of character driver `driver` in the list at `devices`
 * (/proc/devices, or a made-up one), or -1. */
int agent_char_major(const char *devices, const char *driver);
/* Removes name in folder fd (AT_FDCWD: a path) and, for a folder, what it
 * holds, depth levels at most, never following a symbolic link. */
void agent_rm_tree(int fd, const char *name, int depth);

#endif
