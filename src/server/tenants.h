/*
 * The tenant tree of allotd in its three forms: the JSON document of the
 * API (the fields of etc/tenants.example.yaml: version, priority_classes,
 * tenants with path, weight, isolation and quotas), the rows of the store,
 * and liballot-core's tree. The document is checked by the tenants-file
 * parser shared with allot-sim (JSON is YAML), so both read quotas alike.
 */
#ifndef ALLOT_SERVER_TENANTS_H
#define ALLOT_SERVER_TENANTS_H

#include "allot/store.h"
#include "allot/tenant.h"

#include "tenants_yaml.h"

#include <jansson.h>

/* Checks the document's structure: field names and JSON types. Returns
 * NULL when fine, else writes the problem into err and returns err. */
const char *tenants_doc_check(json_t *doc, char *err, size_t errlen);

/* Parses document `doc` (borrowed) into *out (sim_tenants_conf_free).
 * Returns 0 or ALLOT_EINVAL / ALLOT_ENOMEM with a message. */
int tenants_doc_parse(json_t *doc, const struct allot_catalog *cat, struct sim_tenants_conf *out,
                      char *err, size_t errlen);

/* The document stored in `st` (new reference, NULL on failure). Caller
 * holds the store lock. */
json_t *tenants_doc_from_store(struct allot_store *st);

/* Adds or updates the tenants of conf in tree t; classes are not touched.
 * A tenant of t that conf no longer lists (pruned) stays, with no nominal
 * and no borrowing. Returns 0 or an ALLOT_E* code with a message. */
/* tenants_apply, noting in *changed (calloc'd over the tenants there were
 * before, true where a nominal changed; NULL when out of memory: count
 * every tenant as changed) and *any (some nominal changed). */
int tenants_apply_noting(struct allot_tenants *t, const struct sim_tenants_conf *conf,
                         const struct allot_catalog *cat, bool **changed, bool *any, char *err,
                         size_t errlen);
int tenants_apply(struct allot_tenants *t, const struct sim_tenants_conf *conf,
                  const struct allot_catalog *cat, char *err, size_t errlen);
/* Whether conf lists tenant `path`, or a tenant below it. */
bool tenants_listed(const struct sim_tenants_conf *conf, const char *path);

/* Whether a live job (pending, starting or running) names priority class
 * `name`: 1 with the lowest such job's id in *job, 0, or a negative
 * ALLOT_E* code. A class in use cannot be removed: its jobs would lose
 * their priority at allotd's next start, which resolves classes by name.
 * Reads every live job; caller holds the store lock. */
int tenants_class_in_use(struct allot_store *st, const char *name, int64_t *job);

#endif
