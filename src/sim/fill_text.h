/*
 * A growable text buffer with a sticky error (STYLE 13) and the 64-bit
 * FNV-1a hash, for the openb fill experiment's decision log: each job
 * writes its log lines into a buffer, the experiment hashes and writes the
 * buffers in job order, and worker processes send theirs through a pipe.
 *
 * A buffer is a plain value (zero-initialised = empty); one owner, no
 * locking. Callers: fill_run.c, fill.c.
 */
#ifndef ALLOT_SIM_FILL_TEXT_H
#define ALLOT_SIM_FILL_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* A growable text buffer with a sticky error (STYLE 13). */
struct sim_fill_text {
    char *buf; /* owned, NUL-terminated when len > 0 */
    size_t len;
    size_t cap;
    int err; /* 0 or ALLOT_ENOMEM, sticky */
};

/* Appends formatted text; on failure sets the sticky error. */
void sim_fill_text_add(struct sim_fill_text *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Frees the buffer and leaves it empty; accepts NULL. */
void sim_fill_text_free(struct sim_fill_text *x);

#endif
