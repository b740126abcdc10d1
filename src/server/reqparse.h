/*
 * The parts of an API request allotd parses itself, as pure functions: a
 * route pattern matched against the path (with its {x} path parameters),
 * the bearer token of an Authorization header, and the numeric path and
 * query parameters. No I/O, no allocation, no global state, so the HTTP
 * layer (http.c, auth.c), the handlers and the fuzz target
 * (tests/fuzz/fuzz_http.c) share one copy. libmicrohttpd itself splits
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

/* Parses decimal `s` (IN, may be NULL) of at most 18 characters into *out
 * when it lies in lo..hi. Returns false, *out untouched, otherwise. */
bool req_parse_num(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* Parses a positive id: like req_parse_num(s, 1, INT64_MAX) but `s` must
 * start with a digit. Returns false, *out untouched, otherwise. */
bool req_parse_id(const char *s, int64_t *out);

#endif
