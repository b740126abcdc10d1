/*
 * The parts of an API request allotd parses itself: a route pattern matched against the path (with
 * its {x} path parameters), and the bearer token of an Authorization header, as pure functions. No
 * I/O, no allocation, no global state, so the HTTP layer (http.c, auth.c),
 * the handlers and the fuzz target (tests/fuzz/fuzz_http.c) share one
 * copy. Numeric path and query parameters are allot_parse_num's
 * (allot/common.h), the one rule allotd and the agent share. libmicrohttpd itself splits
 * the request line, the headers and the query string.
 */
#ifndef ALLOT_SERVER_REQPARSE_H
#define ALLOT_SERVER_REQPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REQ_MAX_PARAMS 2   /* {x} segments in one pattern */
#define REQ_PARAM_MAX  128 /* bytes of a path parameter, NUL included */
#define REQ_BEARER_MAX 256 /* bytes of a bearer token */

/* Matches `path` (IN) against route pattern `pat` (IN, "/v1/jobs/{id}":
 * each {x} matches one non-empty segment shorter than REQ_PARAM_MAX bytes).
 * On a match returns true and writes the segments, NUL-terminated, in
 * order into params (OUT); on no match returns false and params may hold
 * partial segments. */
bool req_route_match(const char *pat, const char *path, char params[REQ_MAX_PARAMS][REQ_PARAM_MAX]);

/* The token of Authorization header value `h` (IN, may be NULL): a pointer
 * into h after "Bearer ", or NULL when h is missing, of another scheme, or
 * the token is longer than REQ_BEARER_MAX bytes. */
const char *req_bearer(const char *h);

#endif
