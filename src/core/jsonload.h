/*
 * Core-private: jansson with allot's allocator. Every JSON document the core
 * reads (the GPU catalog, cluster descriptions) goes through
 * allot_json_loadb(), so allocation-failure tests reach jansson's
 * allocations and a parse during which any allocation failed is rejected:
 * jansson's lexer carries on without a byte it failed to store, so such a
 * "successful" parse may hold a truncated token.
 */
#ifndef ALLOT_CORE_JSONLOAD_H
#define ALLOT_CORE_JSONLOAD_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* Routes jansson's allocations through allot_malloc/allot_free (once per
 * process; safe for other jansson users: both are malloc/free underneath). */
void allot_json_use_allot_alloc(void);

/* Parses `len` bytes of JSON (duplicate keys rejected). Returns the root
 * (the caller json_decref()s it) or NULL: then *oom is true for an
 * allocation failure, false for a syntax error described by *jerr. */
json_t *allot_json_loadb(const char *buf, size_t len, json_error_t *jerr, bool *oom);

/* Writes "<where>: <message>" (just the message when where is "") into
 * err (errlen bytes; NULL/0: nothing) and returns ALLOT_EINVAL: the error
 * report of every strict JSON reader of the core. */
int allot_json_verrf(char *err, size_t errlen, const char *where, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* The first key of object `obj` not in the NULL-terminated list
 * `allowed`, or NULL when every key is known (borrowed from obj). */
const char *allot_json_unknown_key(json_t *obj, const char *const *allowed);

/* Clears / reads the "an allocation of jansson failed on this thread" flag,
 * for callers that build JSON themselves (json_dumpb and friends). */
void allot_json_alloc_reset(void);
bool allot_json_alloc_failed(void);

#endif
