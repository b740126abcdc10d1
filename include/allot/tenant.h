/*
 * Tenants of liballot-core: a tree of organisations, teams and projects
 * ("org/team/project"), each with a weight, an isolation level and, per
 * resource, a quota: nominal (guaranteed), borrow_limit (how far beyond
 * nominal it may use idle capacity of others) and lend_limit (how much of its
 * unused nominal others may use). A subtree is a cohort: capacity flows
 * between siblings first, then up the tree.
 *
 * Admission rule (documented in docs/tenancy.md). A request r of leaf T is
 * admissible when, for every tenant A on the path from T to the root whose
 * limit is finite,
 *   U_A + r + W_A <= N_A + B_A
 * where U is usage, N nominal, B borrow limit (0 at the root, and
 * everywhere when borrowing is off) and W_A what the subtrees hanging off
 * the path at or below A withhold: keep(c) = max(max(0, N_c - L_c - U_c),
 * sum of keep over c's children), the unused nominal they do not lend.
 * Work of T within its nominal (U_T + r <= N_T) is protected; work above it
 * is borrowed and may be reclaimed.
 *
 * Usage history for fair share decays with a half-life; a tenant's fair
 * share is its dominant-resource share of the cluster over its weight.
 * Pure, single-threaded, no clock: time is always passed in.
 */
#ifndef ALLOT_TENANT_H
#define ALLOT_TENANT_H

#include "allot/catalog.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Resources a quota can name. Per-model GPU quotas follow the fixed ones:
 * ALLOT_RES_MODEL0 + catalog model index. GPU amounts are in milli-GPU. */
enum allot_res {
    ALLOT_RES_GPU = 0, /* GPUs of any model, milli */
    ALLOT_RES_CPU,     /* milli-cores */
    ALLOT_RES_MEM,     /* MiB */
    ALLOT_RES_GPU_MEM, /* GPU memory MiB */
    ALLOT_RES_MODEL0   /* first per-model GPU resource */
};
#define ALLOT_RES_MAX   (ALLOT_RES_MODEL0 + ALLOT_MAX_MODELS)
#define ALLOT_UNLIMITED INT64_MAX

enum allot_isolation {
    ALLOT_ISO_SHARED = 0,    /* may share a physical GPU with other tenants */
    ALLOT_ISO_EXCLUSIVE_GPU, /* never time-shares a GPU with another tenant (MIG allowed) */
    ALLOT_ISO_EXCLUSIVE_NODE /* never shares a node with another tenant */
};

struct allot_quota {
    int64_t nominal;      /* guaranteed; ALLOT_UNLIMITED = no limit */
    int64_t borrow_limit; /* beyond nominal; ALLOT_UNLIMITED = no limit */
    int64_t lend_limit;   /* of unused nominal; ALLOT_UNLIMITED = all */
};

struct allot_tenant {
    char *name;      /* owned: last path element */
    char *path;      /* owned: full path "org/team/project" */
    int parent;      /* index, -1 for the root */
    int depth;       /* root 0 */
    int first_child; /* index or -1 */
    int next_sibling;
    double weight; /* > 0 */
    int isolation; /* enum allot_isolation */
    struct allot_quota quota[ALLOT_RES_MAX];
    int64_t usage[ALLOT_RES_MAX]; /* current usage of the subtree */
    double history;               /* decayed dominant-share usage (share-seconds) */
    double peak[ALLOT_RES_MAX];   /* recent peak usage, decaying (lending hold) */
    int64_t history_at;           /* time the history was last decayed to */
};

struct allot_tenants;

/* Creates a tree holding only the root ("", unlimited quotas, weight 1).
 * `cat` (borrowed) names per-model resources. NULL on allocation failure. */
struct allot_tenants *allot_tenants_new(const struct allot_catalog *cat);

/* Frees the tree; accepts NULL. */
void allot_tenants_free(struct allot_tenants *t);

/* Adds the tenant at `path` ("org/team/project"), creating missing
 * ancestors with default settings (unlimited quotas, weight 1). Returns its
 * index, or ALLOT_EINVAL (empty element, bad characters; message in err),
 * ALLOT_EEXIST or ALLOT_ENOMEM. On error the tree is unchanged (ancestors
 * created on the way are removed again). */
int allot_tenants_add(struct allot_tenants *t, const char *path, char *err, size_t errlen);

/* Index of `path` or -1; "" is the root (index 0). */
int allot_tenants_find(const struct allot_tenants *t, const char *path);

int allot_tenants_count(const struct allot_tenants *t);
struct allot_tenant *allot_tenants_get(const struct allot_tenants *t, int i);

/* Sets a quota (validated: nominal, limits >= 0). Returns 0 or ALLOT_EINVAL. */
int allot_tenants_set_quota(struct allot_tenants *t, int i, int res, struct allot_quota q);

/* Sets nominal of every interior tenant that has none (unlimited) on
 * `res` to the sum of its children's (leaves keep theirs). Call after
 * setting leaf quotas. */
void allot_tenants_fill_nominal(struct allot_tenants *t);

/* A resource vector: what one job (all its tasks) uses. */
struct allot_resvec {
    int64_t v[ALLOT_RES_MAX];
};

/* True when leaf `i` may take `r` now (the admission rule above); with
 * `borrow` false every borrow limit counts as 0. When false and the
 * pointers are not NULL, writes the first tenant on the path that blocks
 * (*why_tenant) and the resource (*why_res). */
bool allot_tenants_admits(const struct allot_tenants *t, int i, const struct allot_resvec *r,
                          bool borrow, int *why_tenant, int *why_res);

/* True when leaf `i` could take `r` at some time: with nothing in use and
 * nothing kept unlent, within every tenant's nominal on its path (plus its
 * borrow limit with `borrow`; a root without a quota: the capacity last
 * given to allot_tenants_advance). When false, *why_tenant and *why_res
 * (when not NULL) name the tenant and resource that bound it: a job that
 * asks for more can never start. */
bool allot_tenants_ever_admits(const struct allot_tenants *t, int i, const struct allot_resvec *r,
                               bool borrow, int *why_tenant, int *why_res);

/* W_A of the admission rule for leaf i at its ancestor a (or i itself)
 * and resource k: what the subtrees off i's path at or below a keep
 * unlent (lend limits and the lending hold). 0 when a is not on the path. */
int64_t allot_tenants_withheld(const struct allot_tenants *t, int i, int a, int k);

/* True when `r` fits inside leaf i's nominal on every resource. */
bool allot_tenants_in_nominal(const struct allot_tenants *t, int i, const struct allot_resvec *r);

/* Adds (sign +1) or removes (sign -1) usage r of leaf i and its ancestors. */
void allot_tenants_charge(struct allot_tenants *t, int i, const struct allot_resvec *r, int sign);

/* A counter bumped by every change made through these functions (tree,
 * quotas, hold, charges, time): equal values mean unchanged tenants, as
 * far as the functions tell (fields written directly are not seen). */
uint64_t allot_tenants_changes(const struct allot_tenants *t);

/* A number that changes whenever the tree or a quota does (tenants added,
 * allot_tenants_set_quota, allot_tenants_fill_nominal): what
 * allot_tenants_ever_admits answers changes only with it (and with the
 * cluster's capacity). */
uint64_t allot_tenants_quota_gen(const struct allot_tenants *t);

/* Lending hold: with half_life_s > 0 a tenant does not lend the part of
 * its nominal it used recently: its unused nominal up to its recent peak
 * usage (a maximum that decays with this half-life) stays reserved for it.
 * Capacity a team was just using is likely wanted back soon; holding it
 * avoids lending it out only to reclaim it. 0 turns the hold off. */
void allot_tenants_set_hold(struct allot_tenants *t, double half_life_s);

/* Decays every tenant's history to `now` with half-life `half_life_s` and
 * adds usage over the elapsed time (dominant share against `capacity`). */
void allot_tenants_advance(struct allot_tenants *t, int64_t now, double half_life_s,
                           const struct allot_resvec *capacity);

/* Dominant share of leaf i's current usage against capacity, over weight. */
double allot_tenants_share(const struct allot_tenants *t, int i,
                           const struct allot_resvec *capacity);

/* Fair-share key of leaf i (lower goes first): (decayed history + current
 * dominant share) over weight, summed down the path so that sibling
 * subtrees are balanced first. */
double allot_tenants_fair_key(const struct allot_tenants *t, int i,
                              const struct allot_resvec *capacity);

/* Human-readable name of a resource ("GPU", "CPU", "A100-80GB GPU", ...). */
const char *allot_res_name(const struct allot_tenants *t, int res, char *buf, size_t len);

#endif
