/*
 * Seed lists (fill_seeds.h): parsed item by item, ranges expanded.
 */
#include "fill_seeds.h"

#include "allot/common.h"

#include <stdbool.h>
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

int sim_fill_parse_seeds(const char *s, uint64_t **out, int *n)
{
    uint64_t *v = NULL;
    size_t cap = 0, k = 0;
    const char *p = s;

    *out = NULL;
    *n = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *dash = memchr(p, '-', len);
        uint64_t a, b;
        if (dash) {
            if (!parse_u64(p, (size_t)(dash - p), &a) ||
                !parse_u64(dash + 1, len - (size_t)(dash - p) - 1, &b) || b < a)
                goto bad;
        } else if (!parse_u64(p, len, &a)) {
            goto bad;
        } else {
            b = a;
        }
        if (b - a >= SIM_FILL_MAX_SEEDS || k + (b - a) + 1 > SIM_FILL_MAX_SEEDS)
            goto bad;
        for (uint64_t x = a;; x++) {
            if (allot_grow((void **)&v, &cap, k + 1, sizeof(*v))) {
                allot_free(v);
                return ALLOT_ENOMEM;
            }
            v[k++] = x;
            if (x == b)
                break;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = v;
    *n = (int)k;
    return 0;
bad:
    allot_free(v);
    return ALLOT_EINVAL;
}
