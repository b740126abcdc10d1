/*
 * Files shared between processes by mapping (docs/shim.md): the job's
 * region, written by the job's processes only (the GPUs' share folders are
 * never mapped: other users' jobs keep files there). The file is sized and
 * initialised under flock() (which the
 * kernel drops if the holder dies), so two first processes never both
 * initialise it; a file of the wrong size is never mapped (a mapping past
 * its end would fault); the lock is released explicitly, since the
 * mapping keeps the file open and close() alone would not drop it.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

const char *shim_map_file(const char *path, size_t size, bool (*init)(void *),
                          bool (*valid)(const void *), struct shim_mapped *m)
{
    const char *why = NULL;
    void *map = MAP_FAILED;
    struct stat st;
    int fd;

    m->map = NULL;
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? "it does not exist" : "it cannot be opened";
    if (flock(fd, LOCK_EX) || fstat(fd, &st)) {
        why = "cannot lock it";
        goto out_fd;
    }
    if (st.st_size == 0) {
        if (ftruncate(fd, (off_t)size)) {
            why = "cannot size it";
            goto out_fd;
        }
    } else if ((uint64_t)st.st_size != size) {
        why = "its size is wrong";
        goto out_fd;
    }
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        why = "cannot map it";
        goto out_fd;
    }
    /* magic 0: new, or its first process died initialising it (we hold
     * the flock, so nobody else is at it) */
    if (__atomic_load_n((uint32_t *)map, __ATOMIC_ACQUIRE) == 0 && !init(map)) {
        why = "cannot initialise it";
        goto out_map;
    }
    if (!valid(map)) {
        why = "its header is corrupt (magic, version or layout)";
        goto out_map;
    }
    m->map = map;
    goto out_fd;
out_map:
    munmap(map, size);
out_fd:
    flock(fd, LOCK_UN);
    close(fd);
    return why;
}
