/*
 * A cache of the names job submissions refer to: tenants (leaves only)
 * and priority classes (see refs.c).
 */
#ifndef ALLOT_SERVER_REFS_H
#define ALLOT_SERVER_REFS_H

#include "server.h"

/* Checks that `tenant` is a leaf tenant and `prio` (may be NULL) a
 * priority class, reading them from `st` when they changed since the last
 * check. Returns 0, 422 with a message in err, or a negative ALLOT_E*. */
int refs_check(struct server *s, struct allot_store *st, const char *tenant, const char *prio,
               char *err, size_t errlen);
/* 1 when `tenant` is in the tenant tree now (a leaf or not), 0 when not,
 * or a negative ALLOT_E*. */
int refs_tenant_known(struct server *s, struct allot_store *st, const char *tenant);
/* Marks the cache stale: call after a committed change of tenants or
 * classes. */
void refs_changed(struct server *s);
/* Frees the cache (at shutdown). */
void refs_free(struct server *s);

#endif
