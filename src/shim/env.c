/*
 * The shim's environment (docs/shim.md): sizes with suffixes and the
 * per-device memory caps. Read once, at start-up, by lookup.c; pure
 * functions otherwise, so tests call them directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

static const struct {
    const char *suffix;
    uint64_t mult;
} size_units[] = {
    {"", 1},
    {"K", 1000ull},
    {"M", 1000ull * 1000},
    {"G", 1000ull * 1000 * 1000},
    {"T", 1000ull * 1000 * 1000 * 1000},
    {"Ki", 1ull << 10},
    {"Mi", 1ull << 20},
    {"Gi", 1ull << 30},
    {"Ti", 1ull << 40},
};

bool shim_parse_size(const char *s, uint64_t *bytes)
{
    uint64_t v = 0;
    const char *p = s;

    if (!s || !bytes || *s < '0' || *s > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
        if (strcmp(p, size_units[i].suffix) != 0)
            continue;
        if (v && size_units[i].mult > UINT64_MAX / v)
            return false;
        *bytes = v * size_units[i].mult;
        return true;
    }
    return false;
}

bool shim_parse_percent(const char *s, int *percent)
{
    char *end;
    long v;

    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > 100)
        return false;
    *percent = (int)v;
    return true;
}

void shim_config_load(struct shim_config *c)
{
    const char *all = getenv("ALLOT_GPU_MEMORY_LIMIT"), *one;
    uint64_t v;

    memset(c, 0, sizeof(*c));
    if (all && *all) {
        /* a cap that does not parse must not silently become no cap */
        bool ok = shim_parse_size(all, &v);

        if (!ok) {
            c->bad_env = true;
            v = 0;
        }
        for (int d = 0; d < SHIM_MAX_DEV; d++) {
            c->limit[d] = v;
            c->limited[d] = true;
        }
        c->any_limit = true;
    }
    for (int d = 0; d < SHIM_MAX_DEV; d++) {
        char name[40];

        snprintf(name, sizeof(name), "ALLOT_GPU_MEMORY_LIMIT_%d", d);
        one = getenv(name);
        if (!one || !*one)
            continue;
        if (!shim_parse_size(one, &v)) {
            c->bad_env = true;
            v = 0;
        }
        c->limit[d] = v;
        c->limited[d] = true;
        c->any_limit = true;
    }
    one = getenv("ALLOT_GPU_MEMORY_OVERSUBSCRIBE");
    if (one && *one && !shim_parse_size(one, &c->over_limit)) {
        /* failing closed here is not spilling */
        c->bad_over = true;
        c->over_limit = 0;
    }
    one = getenv("ALLOT_GPU_CONTEXT_OVERHEAD");
    if (one && *one && !shim_parse_size(one, &c->ctx_overhead)) {
        c->bad_ctx = true; /* an estimate: warned about, not failed closed */
        c->ctx_overhead = 0;
    }
    c->region_path = getenv("ALLOT_SHIM_REGION");
    if (c->region_path && !*c->region_path)
        c->region_path = NULL;
    c->cuda_lib = getenv("ALLOT_CUDA_LIB");
    if (c->cuda_lib && !*c->cuda_lib)
        c->cuda_lib = NULL;
}

void shim_warn(const char *fmt, ...)
{
    const char *log = getenv("ALLOT_SHIM_LOG");
    static const char prefix[] = "allot-cuda: ";
    size_t len = sizeof(prefix) - 1;
    char buf[512];
    va_list ap;
    int n;

    /* silent unless asked (issue 10): unset, empty or "off" */
    if (!log || !*log || !strcmp(log, "off"))
        return;
    memcpy(buf, prefix, sizeof(prefix));
    va_start(ap, fmt);
    n = vsnprintf(buf + len, sizeof(buf) - len - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* a truncated message keeps room for its newline */
    len += (size_t)n < sizeof(buf) - len - 2 ? (size_t)n : sizeof(buf) - len - 2;
    buf[len++] = '\n';
    if (strcmp(log, "stderr") != 0) {
        /* a file: appended to, one write per line (O_APPEND), so lines of
         * several processes do not interleave */
        int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

        if (fd >= 0) {
            ssize_t w = write(fd, buf, len);

            (void)w; /* nowhere to report a failed warning */
            close(fd);
            return;
        }
    }
    /* one write, so lines of several processes do not interleave */
    fwrite(buf, 1, len, stderr);
}
