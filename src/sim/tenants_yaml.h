/*
 * The tenants file of allot (YAML, read with libyaml): the tenant tree with
 * weights, isolation and per-resource quotas, the priority classes, and for
 * allot-sim the synthetic workload mix of each tenant. Format (the commented
 * example is etc/tenants.example.yaml; reference in docs/replay.md):
 *
 *   version: 1
 *   priority_classes:                     # optional, at most 16
 *     - {name: serving, value: 1000, preemptible: false}
 *   tenants:
 *     - path: research/vision             # "org/team/project"
 *       weight: 2                          # > 0, default 1
 *       isolation: shared                  # | exclusive-gpu | exclusive-node
 *       quotas:
 *         gpu: {nominal: 64, borrow_limit: 32, lend_limit: unlimited}
 *         cpu: 512                         # shorthand for {nominal: 512}
 *         memory: {nominal: 4Ti}
 *         gpu:V100-32GB: 32
 *       synthetic: {inference: 0.2, training: 0.7, notebooks: 0.1}
 *
 * Units: gpu and gpu:<model> in GPUs (up to 3 decimals); cpu in cores (up to
 * 3 decimals) or milli-cores with an `m` suffix; memory and gpu_memory in
 * MiB, or with a Mi/Gi/Ti suffix. `unlimited` is allowed for every amount.
 * A quota's borrow_limit and lend_limit default to unlimited.
 *
 * Strict: unknown or repeated keys, wrong types, anchors used as aliases,
 * tags, more than one document, repeated tenant paths or class names, a GPU
 * model the catalog does not know, and children whose nominal quotas add up
 * to more than a listed parent's are errors reported as `FILE:LINE: what is
 * wrong`. The parser only builds a description (struct sim_tenants_conf);
 * applying it to a tenant tree and a queue is the caller's job.
 * Used by allot-sim replay; no global state.
 */
#ifndef ALLOT_SIM_TENANTS_YAML_H
#define ALLOT_SIM_TENANTS_YAML_H

#include "allot/catalog.h"
#include "allot/queue.h"
#include "allot/tenant.h"
#include "mtgen.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_TENANTS_MAX_FILE (1u << 22) /* bytes (4 MiB) */
#define SIM_TENANTS_MAX      10000      /* tenants per file */
#define SIM_TENANT_PATH_MAX  255        /* bytes of a path */

/* One tenant as written in the file. */
struct sim_tenant_conf {
    char *path;                              /* owned, validated "a/b/c" */
    unsigned line;                           /* of its entry in the file */
    double weight;                           /* > 0 */
    int isolation;                           /* enum allot_isolation */
    bool has_quota[ALLOT_RES_MAX];           /* the file sets quota[res] */
    struct allot_quota quota[ALLOT_RES_MAX]; /* valid where has_quota */
    bool nominal_summed[ALLOT_RES_MAX];      /* quota[res] names no nominal (ALLOT_UNLIMITED
                                                here): the tenants below add up to it, only
                                                where there are some (checked) */
    bool has_mix;                            /* the file sets `synthetic` */
    double mix[MTGEN_KINDS];                 /* shares summing to 1 when has_mix */
    bool leaf;                               /* no other listed tenant is below it */
};

struct sim_prio_conf {
    char name[32];
    int value;
    bool preemptible; /* default true */
    unsigned line;
};

/* A parsed file. Zero-initialise; free with sim_tenants_conf_free(). */
struct sim_tenants_conf {
    size_t n;                  /* tenants, >= 1 after a successful read */
    struct sim_tenant_conf *v; /* owned, in file order */
    int *sorted;               /* owned: the indices of v sorted by path (after a read; NULL
                                  otherwise, and lookups scan) */
    int n_prio;                /* priority classes */
    struct sim_prio_conf prio[ALLOT_PRIO_CLASSES];
};

/*
 * Reads the tenants file at `path` into *out (OUT, overwritten). `cat` (IN,
 * borrowed, may be NULL: then gpu:<model> quotas are errors) resolves model
 * names. Returns 0; ALLOT_EIO (err: "PATH: <strerror>"); ALLOT_EINVAL
 * (err: "PATH:LINE: what is wrong"); ALLOT_ENOMEM. On failure *out is empty.
 */
int sim_tenants_read(const char *path, const struct allot_catalog *cat,
                     struct sim_tenants_conf *out, char *err, size_t errlen);

/* Same on the `len` bytes at `buf` (IN, borrowed); `name` is used in messages. */
int sim_tenants_parse(const char *buf, size_t len, const char *name,
                      const struct allot_catalog *cat, struct sim_tenants_conf *out, char *err,
                      size_t errlen);

/* Frees what `c` owns and leaves it empty; accepts NULL. */
void sim_tenants_conf_free(struct sim_tenants_conf *c);

/* Index of the tenant at `path` in c->v, or -1. O(log n) after a read. */
int sim_tenants_conf_find(const struct sim_tenants_conf *c, const char *path);

/* Index of a tenant below `path` (a descendant: path + "/..."), or -1:
 * whether path is, or would be, a parent in c. O(log n) after a read. */
int sim_tenants_conf_below(const struct sim_tenants_conf *c, const char *path);

/* Whether a listed tenant of c has an own nominal of some resource less
 * than the nominals of the tenants nearest below it add up to, as a
 * tenants file may not have it: 1 (*at: the first such tenant, *res and
 * *sum: the resource and that sum), 0, or ALLOT_ENOMEM. For a conf changed
 * after its read (allot plan's --quota). */
int sim_tenants_nominals_over(const struct sim_tenants_conf *c, int *at, int *res, int64_t *sum);

/* Whether s is a tenant path: steps of [A-Za-z0-9_.-] (not "." or "..")
 * joined by "/", at most SIM_TENANT_PATH_MAX bytes. */
bool sim_tenant_path_ok(const char *s);

#endif
