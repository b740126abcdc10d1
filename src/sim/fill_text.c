/*
 * The fill experiment's text buffer and hash (fill_text.h). No state
 * beyond the caller's buffer.
 */
#include "fill_text.h"

#include "allot/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void sim_fill_text_add(struct sim_fill_text *x, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (x->err)
        return;
    for (;;) {
        size_t room = x->cap - x->len;
        va_start(ap, fmt);
        n = vsnprintf(x->buf ? x->buf + x->len : NULL, x->buf ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            x->err = ALLOT_EINVAL;
            return;
        }
        if (x->buf && (size_t)n < room) {
            x->len += (size_t)n;
            return;
        }
        if (allot_grow((void **)&x->buf, &x->cap, x->len + (size_t)n + 1 + 4096, 1)) {
            x->err = ALLOT_ENOMEM;
            return;
        }
    }
}

void sim_fill_text_free(struct sim_fill_text *x)
{
    if (!x)
        return;
    allot_free(x->buf);
    memset(x, 0, sizeof(*x));
}
