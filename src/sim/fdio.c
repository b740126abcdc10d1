/*
 * Implementation of fdio.h.
 */
#include "fdio.h"

#include "allot/common.h"

#include <errno.h>
#include <unistd.h>

int fdio_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return ALLOT_EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int fdio_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return ALLOT_EIO;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}
