/*
 * Request parts parsed by allotd itself (see reqparse.h). Pure: callers
 * own every buffer; nothing here allocates or keeps state.
 */
#include "reqparse.h"

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
