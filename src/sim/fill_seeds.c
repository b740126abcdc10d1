/*
 * Seed lists (fill_seeds.h): parsed item by item, ranges expanded, then
 * checked for repeats on a sorted copy.
 */
#include "fill_seeds.h"

#include "allot/common.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool parse_u64(const char *s, size_t len, uint64_t *v)
{
    uint64_t x = 0;

    if (len == 0 || len > 19)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Reports the first seed that v[0..n) holds twice; returns ALLOT_EINVAL,
 * 0 when there is none, or ALLOT_ENOMEM. */
static int find_repeat(const uint64_t *v, size_t n, char *err, size_t errlen)
{
    uint64_t *s = allot_malloc((n ? n : 1) * sizeof(*s));
    int rc = 0;

    if (!s)
        return ALLOT_ENOMEM;
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_u64);
    for (size_t i = 1; i < n && rc == 0; i++)
        if (s[i] == s[i - 1]) {
            allot_fmt(err, errlen, "seed %llu is given twice", (unsigned long long)s[i]);
            rc = ALLOT_EINVAL;
        }
    allot_free(s);
    return rc;
}

int sim_fill_parse_seeds(const char *s, uint64_t **out, int *n, char *err, size_t errlen)
{
    uint64_t *v = NULL;
    size_t cap = 0, k = 0;
    const char *p = s;
    int rc = ALLOT_EINVAL;

    *out = NULL;
    *n = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *dash = memchr(p, '-', len);
        uint64_t a, b;
        if (dash) {
            if (!parse_u64(p, (size_t)(dash - p), &a) ||
                !parse_u64(dash + 1, len - (size_t)(dash - p) - 1, &b) || b < a) {
                allot_fmt(err, errlen, "\"%.*s\" is not an ascending range A-B",
                          (int)(len < 48 ? len : 48), p);
                goto fail;
            }
        } else if (!parse_u64(p, len, &a)) {
            allot_fmt(err, errlen, "\"%.*s\" is not a seed (a decimal integer)",
                      (int)(len < 48 ? len : 48), p);
            goto fail;
        } else {
            b = a;
        }
        if (b - a >= SIM_FILL_MAX_SEEDS || k + (b - a) + 1 > SIM_FILL_MAX_SEEDS) {
            allot_fmt(err, errlen, "more than %d seeds", SIM_FILL_MAX_SEEDS);
            goto fail;
        }
        for (uint64_t x = a;; x++) {
            if (allot_grow((void **)&v, &cap, k + 1, sizeof(*v)))
                goto oom;
            v[k++] = x;
            if (x == b)
                break;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    rc = find_repeat(v, k, err, errlen);
    if (rc == ALLOT_ENOMEM)
        goto oom;
    if (rc)
        goto fail;
    *out = v;
    *n = (int)k;
    return 0;
oom:
    rc = ALLOT_ENOMEM;
    allot_fmt(err, errlen, "out of memory");
fail:
    allot_free(v);
    return rc;
}
