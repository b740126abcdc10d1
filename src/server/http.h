/*
 * The HTTP layer of allotd: libmicrohttpd with a thread pool, the route
 * table, request bodies capped at body-max (413), bearer-token checks by
 * role before a handler runs, JSON errors, and the API request metrics.
 */
#ifndef ALLOT_SERVER_HTTP_H
#define ALLOT_SERVER_HTTP_H

#include "server.h"

#include <netinet/in.h>

#include <stdio.h>

/* Role bits of a route (1u << enum allot_store_role). */
#define ROLE_BIT(r) (1u << (r))
#define ROLES_NONE  0u /* no token needed */

struct route {
    const char *method;
    const char *pattern; /* "/v1/jobs/{id}": each {x} matches one segment */
    int (*fn)(struct req *r);
    unsigned roles;     /* roles allowed; ROLES_NONE: public */
    const char *action; /* audit action of a mutating route, or NULL */
    bool standby;       /* a read of the store alone: a standby serves it too (docs/ha.md) */
};

/* The route table, for the docs test (--print-routes). */
extern const struct route http_routes[];
extern const size_t http_n_routes;

/* Parses `listen` ("IPV4-ADDRESS:PORT", port 0..65535) into *sa (may be
 * NULL). Returns 0, or ALLOT_EINVAL with err naming the value. */
int http_parse_listen(const char *listen, struct sockaddr_in *sa, char *err, size_t errlen);
/* Starts serving on `listen` ("HOST:PORT", port 0 = any) with a thread
 * per connection (workers 0) or a pool of `workers` threads, at most
 * `max_conn` connections at once. *port gets the bound port. Returns NULL
 * with err on failure. */
struct http *http_start(struct server *s, const char *listen, int workers, int max_conn, int *port,
                        char *err, size_t errlen);
/* Stops accepting, waits for requests in flight, frees. Accepts NULL. */
void http_stop(struct http *h);

/* Writes the API metrics in Prometheus text format. */
void http_metrics(struct http *h, FILE *out);

#endif
