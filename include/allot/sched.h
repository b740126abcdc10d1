/*
 * Placement scheduler of liballot-core: picks a node and the GPUs (or MIG
 * placement) on it for one task under a replaceable placement policy, and
 * commits it to the cluster.
 *
 * Policies are ops structs registered in one table (allot_sched_policies[]). A
 * policy scores a node state for a task (integer, higher wins, -1 refuses);
 * the scheduler asks it once per state class and task shape and caches the
 * answer until the class changes or the policy bumps the generation, so a
 * decision costs one pass over the live classes with cache hits, not a
 * rescan of every node. Ties go to the lowest node rank (a seeded
 * permutation). Policies flagged ALLOT_SCHED_POLICY_RANDOM instead pick a
 * uniformly random feasible node from the scheduler's seeded PRNG.
 *
 * Deterministic: same cluster, seed and task sequence give the same
 * decisions. Single-threaded; no I/O, no clock.
 */
#ifndef ALLOT_SCHED_H
#define ALLOT_SCHED_H

#include "allot/cluster.h"
#include "allot/common.h"
#include "allot/frag.h"

struct allot_sched;

#define ALLOT_SCHED_POLICY_RANDOM      1u /* uniform random feasible node */
#define ALLOT_SCHED_POLICY_POD_CLASSES 2u /* scores depend on hosted task classes */
#define ALLOT_SCHED_POLICY_FRAG        4u /* uses the fragmentation mix */

struct allot_sched_policy_ops {
    const char *name;
    const char *summary; /* one line for --help */
    unsigned flags;      /* ALLOT_SCHED_POLICY_* */
    /* Optional: allocate private state (*state, owned by the scheduler). */
    int (*init)(struct allot_sched *s, void **state);
    /* Optional: free private state (accepts NULL). */
    void (*fini)(void *state);
    /* Scores node n (feasible for t) for task t: 0..INT32_MAX, or -1 to
     * refuse. Must depend only on the node's class state and the policy's
     * state, so that it can be cached per class. */
    int (*score)(void *state, const struct allot_sched *s, const struct allot_node *n,
                 const struct allot_task *t);
    /* Optional: an upper bound of score() for t over the classes of
     * capacity bucket b whose cap_key is at most `cap_key` (see
     * allot_cluster_bucket); non-decreasing in cap_key. With it the
     * scheduler walks the bucket heaps best bound first and stops as soon
     * as no unvisited class can win. */
    int (*bound)(void *state, int bucket, int64_t cap_key, const struct allot_task *t);
    /* Optional: chooses the GPUs on node n for t (n fits t). Without it the
     * scheduler uses allot_sched_choose_default(). Returns 0 or ALLOT_ENOSPC. */
    int (*choose)(void *state, const struct allot_sched *s, int node, const struct allot_task *t,
                  struct allot_placement *out);
    /* Optional: sees every arriving task once (allot_sched_observe), for
     * learning; never called from placement. */
    void (*observe)(void *state, struct allot_sched *s, const struct allot_task *t);
};

/* The registered policies, NULL-terminated. */
extern const struct allot_sched_policy_ops *const allot_sched_policies[];

/* Finds a registered policy by name; NULL when unknown. */
const struct allot_sched_policy_ops *allot_sched_policy_find(const char *name);

/* Scheduler options. */
struct allot_sched_opts {
    uint64_t seed;                    /* PRNG seed (random policy, rank order is the cluster's) */
    const struct allot_frag_mix *mix; /* typical tasks for FGD (borrowed; NULL: learn online) */
};

/* Creates a scheduler that places on cluster `c` (borrowed; the scheduler
 * must be the only writer of the cluster while it lives) with `policy`.
 * Returns NULL on allocation failure or when the policy's init fails. */
struct allot_sched *allot_sched_new(struct allot_cluster *c,
                                    const struct allot_sched_policy_ops *policy,
                                    const struct allot_sched_opts *opts);

/* Frees the scheduler (not the cluster); accepts NULL. */
void allot_sched_free(struct allot_sched *s);

/* Places task t: picks a node and GPUs, applies it to the cluster and
 * writes it to *out. Does not observe t (see allot_sched_observe). Returns 0, ALLOT_ENOSPC when no
 * node fits, ALLOT_EINVAL for an invalid task (message in err when err != NULL), or ALLOT_ENOMEM.
 */
int allot_sched_place(struct allot_sched *s, const struct allot_task *t,
                      struct allot_placement *out, char *err, size_t errlen);

/* Tells the policy that a task of t's shape arrived (a job submitted, a pod
 * of a trace), so that policies that learn the typical-task mix learn it
 * from arrivals: call it once per submitted task, never per placement
 * attempt, probe or retry. Learning is best effort: an allocation failure
 * keeps the previous mix. */
void allot_sched_observe(struct allot_sched *s, const struct allot_task *t);

/* Finds where t would go without committing. Same returns as allot_sched_place. */
int allot_sched_pick(struct allot_sched *s, const struct allot_task *t,
                     struct allot_placement *out);

/* Releases a placement made earlier (task finished). Returns 0 or ALLOT_EINVAL. */
int allot_sched_release(struct allot_sched *s, const struct allot_placement *p);

/* Runs allot_cluster_check plus the scheduler's own cache checks. */
int allot_sched_check_invariants(const struct allot_sched *s, char *err, size_t errlen);

/* Invalidates every cached score (a policy whose parameters changed calls it). */
void allot_sched_invalidate(struct allot_sched *s);
/* Invalidates the cached scores of fraction shapes only
 * (allot_sched_task_is_fraction), for a change that moves no other score. */
void allot_sched_invalidate_fractions(struct allot_sched *s);

/* Accessors for policies. */
struct allot_cluster *allot_sched_cluster(const struct allot_sched *s);
const struct allot_frag_mix *allot_sched_mix(const struct allot_sched *s);
/* Replaces the fragmentation mix (borrowed) and invalidates caches. */
void allot_sched_set_mix(struct allot_sched *s, const struct allot_frag_mix *mix);
struct allot_rng *allot_sched_rng(struct allot_sched *s);
/* The policy's private state (what its init returned; NULL without init). */
void *allot_sched_policy_state(const struct allot_sched *s);
/* Cached fragmentation of node n under the current mix. */
double allot_sched_node_frag(const struct allot_sched *s, int node);

/* Default GPU choice: whole GPUs take the lowest-index fully free GPUs
 * (inside one NVLink island when possible); a fraction takes the fitting
 * GPU with the least free milli; MIG takes the GPU and placement keeping
 * the most options open. Returns 0 or ALLOT_ENOSPC. */
int allot_sched_choose_default(const struct allot_sched *s, int node, const struct allot_task *t,
                               struct allot_placement *out);

/* True when t asks for a fraction of one GPU (milli-GPU and/or memory). */
bool allot_sched_task_is_fraction(const struct allot_task *t);

/* Fills *out with t's fraction on GPU `gpu` of node. Returns 0, or
 * ALLOT_ENOSPC when gpu < 0 (no GPU takes it). */
int allot_sched_place_fraction(const struct allot_sched *s, int node, const struct allot_task *t,
                               int gpu, struct allot_placement *out);

/* Fills the non-GPU part of a placement for t on node. */
void allot_sched_placement_init(const struct allot_sched *s, int node, const struct allot_task *t,
                                struct allot_placement *out);

/* ---- entry points for the queue ---- */

/* Applies placement p, chosen earlier by allot_sched_pick or
 * allot_sched_choose_default (or released earlier with allot_sched_release
 * and now put back), to the cluster, keeping the scheduler's caches right.
 * With allot_sched_place and allot_sched_release it is how the job queue
 * writes the cluster: the scheduler is its only writer. Returns 0, or
 * ALLOT_ENOSPC / ALLOT_EINVAL / ALLOT_ESTATE when p no longer fits, or
 * ALLOT_ENOMEM (the cluster's state index could not grow); on error
 * nothing changed. */
int allot_sched_apply(struct allot_sched *s, const struct allot_placement *p);

/* As allot_sched_apply for a placement put back where its work runs (a
 * victim's tentative release undone): on a node in any state
 * (allot_cluster_restore). */
int allot_sched_restore(struct allot_sched *s, const struct allot_placement *p);

#endif
