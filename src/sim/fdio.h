/*
 * Whole-buffer reads and writes on a file descriptor (the pipes between
 * allot-sim's worker processes and their parent), retrying on EINTR and
 * short transfers.
 */
#ifndef ALLOT_SIM_FDIO_H
#define ALLOT_SIM_FDIO_H

#include <stddef.h>

/* Writes all len bytes of buf to fd. Returns 0 or ALLOT_EIO. */
int fdio_write_all(int fd, const void *buf, size_t len);

/* Reads exactly len bytes from fd into buf. Returns 0, or ALLOT_EIO on an
 * error or an end of file before len bytes. */
int fdio_read_all(int fd, void *buf, size_t len);

#endif
