/*
 * Fuzz target: the request parts allotd parses itself (reqparse.h) and
 * the job-state filter of GET /v1/jobs. The input is up to four lines:
 *
 *   PATH            matched against every route pattern of http.c
 *   AUTHORIZATION   the header's value, for req_bearer
 *   NUMBER          a query or path parameter: allot_parse_num with the
 *                   ranges the handlers use, and allot_store_job_state_parse
 *   PATTERN         optional: one more route pattern to match PATH against
 *
 * Invariants: a matched path is the pattern with each {x} replaced by its
 * parameter, and a parameter is a non-empty segment without '/'; a bearer
 * token is the header's tail after "Bearer ", at most 256 bytes; a parsed
 * number is digits only, lies in its range and prints back as the digits
 * given (bar leading zeros); a parsed state names itself.
 */
#include "fuzz.h"

#include "reqparse.h"

#include "allot/common.h"
#include "allot/store.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* The patterns of http_routes (http.c); a new route's shape belongs here. */
static const char *const patterns[] = {
    "/healthz",
    "/readyz",
    "/metrics",
    "/v1/tokens",
    "/v1/tokens/{id}",
    "/v1/audit",
    "/v1/audit/verify",
    "/v1/tenants",
    "/v1/priority-classes",
    "/v1/priority-classes/{name}",
    "/v1/jobs",
    "/v1/jobs/{id}",
    "/v1/jobs/{id}/cancel",
    "/v1/jobs/{id}/events",
    "/v1/jobs/{id}/logs",
    "/v1/nodes",
    "/v1/nodes/register",
    "/v1/nodes/{name}/cordon",
    "/v1/nodes/{name}/drain",
    "/v1/nodes/{name}/uncordon",
    "/v1/nodes/{name}/heartbeat",
};

#define LINE_MAX_ 4096

/* Copies the next line of data into buf (NUL-terminated, cut at LINE_MAX_
 * or at a NUL byte, as libmicrohttpd hands C strings). */
static void next_line(const uint8_t **data, size_t *size, char *buf)
{
    const uint8_t *nl = memchr(*data, '\n', *size);
    size_t len = nl ? (size_t)(nl - *data) : *size;
    size_t keep = len < LINE_MAX_ - 1 ? len : LINE_MAX_ - 1;

    memcpy(buf, *data, keep);
    buf[keep] = '\0';
    *data += nl ? len + 1 : len;
    *size -= nl ? len + 1 : len;
}

/* Rebuilds the path from pattern and params; true when it equals path. */
static bool rebuild_equals(const char *pat, char params[REQ_MAX_PARAMS][REQ_PARAM_MAX],
                           const char *path)
{
    char out[LINE_MAX_ + REQ_MAX_PARAMS * REQ_PARAM_MAX];
    size_t o = 0;
    int np = 0;

    while (*pat) {
        if (*pat == '{') {
            const char *close = strchr(pat, '}');
            size_t len;

            FUZZ_CHECK(close && np < REQ_MAX_PARAMS);
            len = strlen(params[np]);
            FUZZ_CHECK(len > 0 && len < REQ_PARAM_MAX && !strchr(params[np], '/'));
            FUZZ_CHECK(o + len < sizeof(out));
            memcpy(out + o, params[np++], len);
            o += len;
            pat = close + 1;
            continue;
        }
        FUZZ_CHECK(o + 1 < sizeof(out));
        out[o++] = *pat++;
    }
    out[o] = '\0';
    return !strcmp(out, path);
}

static void match(const char *pat, const char *path)
{
    char params[REQ_MAX_PARAMS][REQ_PARAM_MAX];

    memset(params, 0, sizeof(params));
    if (req_route_match(pat, path, params))
        FUZZ_CHECK(rebuild_equals(pat, params, path));
}

/* The decimal digits of s without leading zeros. */
static void digits(const char *s, char *out, size_t n)
{
    size_t o = 0;

    while (*s == '0' && s[1])
        s++;
    for (; *s && o + 1 < n; s++)
        out[o++] = *s;
    out[o] = '\0';
}

static void number(const char *s, int64_t lo, int64_t hi)
{
    int64_t v = INT64_MIN;
    char a[64], b[64];

    if (!allot_parse_num(s, lo, hi, &v)) {
        FUZZ_CHECK(v == INT64_MIN);
        return;
    }
    FUZZ_CHECK(v >= lo && v <= hi);
    for (const char *p = s; *p; p++) /* no sign, no white space */
        FUZZ_CHECK(isdigit((unsigned char)*p));
    snprintf(a, sizeof(a), "%lld", (long long)v); /* v >= 0: no range here is negative */
    digits(s, b, sizeof(b));
    FUZZ_CHECK(!strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[LINE_MAX_], auth[LINE_MAX_], num[LINE_MAX_], pat[LINE_MAX_];
    const char *tok;
    int st;

    next_line(&data, &size, path);
    next_line(&data, &size, auth);
    next_line(&data, &size, num);
    next_line(&data, &size, pat);

    for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++)
        match(patterns[i], path);
    if (*pat)
        match(pat, path);

    tok = req_bearer(auth);
    if (tok) {
        FUZZ_CHECK(tok == auth + 7 && !strncasecmp(auth, "Bearer ", 7));
        FUZZ_CHECK(strlen(tok) <= REQ_BEARER_MAX);
    } else {
        FUZZ_CHECK(strncasecmp(auth, "Bearer ", 7) != 0 || strlen(auth + 7) > REQ_BEARER_MAX);
    }
    FUZZ_CHECK(req_bearer(NULL) == NULL);

    /* the ranges of GET /v1/jobs (cursor, limit), a job id, events' after,
     * the agent's log endpoint (offset, limit) */
    number(num, 0, INT64_MAX);
    number(num, 1, 1000);
    number(num, 1, INT64_MAX);
    number(num, 1, 1 << 20);
    st = allot_store_job_state_parse(num);
    if (st >= 0)
        FUZZ_CHECK(!strcmp(allot_store_job_state_name(st), num));
    return 0;
}
