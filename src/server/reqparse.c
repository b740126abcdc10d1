/*
 * Request parts parsed by allotd itself (see reqparse.h). Pure: callers
 * own every buffer; nothing here allocates or keeps state.
 */
#include "reqparse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool req_route_match(const char *pat, const char *path, char params[REQ_MAX_PARAMS][REQ_PARAM_MAX])
{
    int np = 0;

    while (*pat && *path) {
        if (*pat == '{') {
            const char *end = strchr(path, '/');
            size_t len = end ? (size_t)(end - path) : strlen(path);

            if (!len || len >= REQ_PARAM_MAX || np >= REQ_MAX_PARAMS)
                return false;
            memcpy(params[np], path, len);
            params[np][len] = '\0';
            np++;
            path += len;
            pat = strchr(pat, '}');
            if (!pat)
                return false;
            pat++;
            continue;
        }
        if (*pat != *path)
            return false;
        pat++;
        path++;
    }
    return !*pat && !*path;
}

const char *req_bearer(const char *h)
{
    /* the scheme is case-insensitive (RFC 9110, section 11.1) */
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    if (strlen(h) > REQ_BEARER_MAX)
        return NULL;
    return h;
}

bool req_parse_num(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v;

    /* 18 digits never overflow a long long, so errno needs no check */
    if (!s || !*s || strlen(s) > 18)
        return false;
    v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

bool req_parse_id(const char *s, int64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    return req_parse_num(s, 1, INT64_MAX, out);
}
