/*
 * Cluster model of liballot-core: nodes, their GPUs, task shapes and
 * placements, and the index that groups nodes in identical states.
 *
 * A node has one GPU model (real servers are homogeneous; a node with mixed
 * cards is registered as several nodes), CPU in milli-cores, memory in MiB,
 * up to ALLOT_MAX_GPUS GPUs each in one of three modes, NVLink islands, a rack
 * and labels. A task asks for k whole GPUs, one MIG profile, or a fraction of
 * one GPU (gpu_milli and/or GPU memory), plus CPU and memory, optionally
 * restricted to a set of GPU models. Nodes may also have RDMA virtual
 * functions (SR-IOV VFs of their HCAs), a countable resource tasks ask for
 * by number; which VFs a task gets is the node's choice.
 *
 * Invariants (checked by allot_cluster_check): for every GPU, free <=
 * capacity and used + free = capacity; MIG instances never overlap; node CPU
 * and memory free within [0, capacity]; every ready node is in exactly one
 * state class and every class's members share the class signature.
 *
 * The state index: nodes whose schedulable state is identical (model,
 * labels, free CPU and memory, the sorted multiset of per-GPU free
 * capacity, and the classes of tasks they host) form one class. Policies score classes, not
 * nodes; the member with the lowest rank (the seeded tie-break order)
 * represents the class. Placing on a node moves it to another class in
 * O(log n). Single-threaded; no I/O.
 */
#ifndef ALLOT_CLUSTER_H
#define ALLOT_CLUSTER_H

#include "allot/catalog.h"
#include "allot/mig.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALLOT_MAX_GPUS          16   /* per node */
#define ALLOT_MILLI             1000 /* one whole GPU in milli-GPU */
#define ALLOT_POD_CLASSES       17   /* class 0: fractional, k: k whole GPUs (k <= 16) */
#define ALLOT_MAX_RDMA_VFS      4096 /* per node */
#define ALLOT_MAX_TASK_RDMA_VFS 32   /* per task */

enum allot_gpu_mode {
    ALLOT_GPU_SHARED = 0, /* whole GPUs and fractions */
    ALLOT_GPU_EXCLUSIVE,  /* whole GPUs only */
    ALLOT_GPU_MIG         /* MIG instances only */
};

enum allot_node_state { ALLOT_NODE_READY = 0, ALLOT_NODE_DRAINING, ALLOT_NODE_LOST };

struct allot_gpu {
    uint8_t mode;               /* enum allot_gpu_mode */
    uint8_t island;             /* NVLink island id inside the node */
    uint16_t n_tasks;           /* tasks holding part of this GPU */
    int32_t excl_tenant;        /* exclusive-gpu tenant whose fractions hold it; 0 = none */
    int32_t free_milli;         /* 0..1000; for MIG: free compute share in milli */
    int64_t free_mem_mib;       /* free GPU memory */
    int64_t mem_mib;            /* GPU memory capacity (the model's) */
    struct allot_mig_state mig; /* MIG layout (mode MIG only) */
};

struct allot_label {
    char *key;   /* owned */
    char *value; /* owned */
};

/* Node labels (Kubernetes node labels, Slurm node features) and the node
 * selectors of tasks. A key is 1..ALLOT_LABEL_KEY_MAX printable ASCII
 * characters without space or '='; a value at most ALLOT_LABEL_VALUE_MAX
 * bytes of UTF-8 without control characters. A task selects nodes by up
 * to ALLOT_MAX_SELECT labels, all of which a node must carry. */
#define ALLOT_LABEL_KEY_MAX   63
#define ALLOT_LABEL_VALUE_MAX 255
#define ALLOT_MAX_SELECT      4

/* What is wrong with a label key or value ("is empty", "is too long",
 * "contains ..."), or NULL when it is fine: the one rule for labels from
 * cluster descriptions, agents and node selectors. */
const char *allot_label_key_problem(const char *key);
const char *allot_label_value_problem(const char *value);

/* The label KEY=VALUE as a task's select word: a 64-bit hash, never 0.
 * Labels are matched by hash (two labels meeting in 64 bits would be
 * taken for each other). */
uint64_t allot_label_hash(const char *key, const char *value);

/* Splits "KEY=VALUE,KEY,..." (a bare KEY: an empty value; the form of an
 * agent's --labels and of `allot submit --constraint`) in place into at
 * most max labels pointing into s. Returns their count, or -1 with a
 * message in err (a bad key or value, a key given twice, too many). */
int allot_labels_parse(char *s, struct allot_label *out, int max, char *err, size_t errlen);

struct allot_node {
    char *name;        /* owned */
    int model;         /* catalog model index; -1 for a CPU-only node */
    int64_t cpu_milli; /* capacity */
    int64_t cpu_free;
    int64_t mem_mib; /* capacity */
    int64_t mem_free;
    int32_t rdma_vfs; /* RDMA virtual functions: capacity */
    int32_t rdma_free;
    int n_gpus;
    struct allot_gpu gpus[ALLOT_MAX_GPUS];
    int state; /* enum allot_node_state */
    int rack;  /* rack / switch id for multi-node placement */
    int n_labels;
    struct allot_label *labels;              /* owned, n_labels entries */
    uint64_t *label_hash;                    /* owned: allot_label_hash of each label */
    uint64_t label_set;                      /* equal for nodes with equal labels; 0: none */
    uint64_t label_sum;                      /* sum of label_hash: equal for equal labels */
    uint16_t pod_classes[ALLOT_POD_CLASSES]; /* GPU tasks hosted, per class */
    int32_t n_tasks;                         /* tasks placed on the node */
    int32_t excl_tenant;                     /* exclusive-node tenant holding the node; 0 = none */
    uint32_t rank;                           /* tie-break order: lower wins */
    int32_t index;                           /* its place: allot_cluster_node(c, index) is it */
};

/* The nodes a task may use, named one by one (Slurm's --nodelist and
 * --exclude): the nodes listed, or every node but those. Made by
 * allot_cluster_nodeset, which keeps one object per distinct set for the
 * cluster's life, so task shapes compare sets by pointer and a task may
 * be copied freely. Immutable. */
struct allot_nodeset {
    bool exclude;       /* true: every node but those listed */
    int n;              /* nodes listed */
    const int32_t *idx; /* their indices, ascending, distinct (the set's own) */
    uint64_t hash;      /* of exclude and idx */
};

/* True when set s (NULL: every node) lets a task use node index i. */
bool allot_nodeset_has(const struct allot_nodeset *s, int i);

/* What a caller describes to add a node. */
struct allot_node_spec {
    const char *name;
    const char *model; /* catalog name or alias; NULL/"" when n_gpus == 0 */
    int64_t cpu_milli;
    int64_t mem_mib;
    int rdma_vfs; /* RDMA virtual functions (0..ALLOT_MAX_RDMA_VFS) */
    int n_gpus;
    int gpu_mode;    /* enum allot_gpu_mode for every GPU */
    int island_size; /* GPUs per NVLink island; 0 = all GPUs one island */
    int rack;
    int n_labels;
    const struct allot_label *labels; /* borrowed, copied */
};

/* A task shape. Exactly one of: num_gpu whole GPUs (gpu_milli 1000); one
 * fraction (num_gpu 1, gpu_milli 0..999 and/or gpu_mem_mib); one MIG profile
 * (num_gpu 1, gpu_milli 0, mig_profile >= 0); or no GPU (num_gpu 0). A
 * fraction that gives gpu_milli but no gpu_mem_mib takes the same share of
 * its GPU's memory (allot_fraction_mem). */
struct allot_task {
    int num_gpu;
    int gpu_milli;       /* per GPU */
    int64_t gpu_mem_mib; /* per GPU, fractions only; 0 = no memory ask */
    int mig_profile;     /* global profile id (allot_catalog_find_profile) or -1 */
    int64_t cpu_milli;
    int64_t mem_mib;
    int rdma_vfs;                      /* RDMA virtual functions (0..ALLOT_MAX_TASK_RDMA_VFS) */
    uint64_t model_mask;               /* bit i: catalog model i allowed; 0 = any */
    int tenant;                        /* owning tenant id (>= 1), 0 = none */
    int isolation;                     /* the tenant's enum allot_isolation (tenant.h): 0 shared,
                                          1 exclusive-gpu, 2 exclusive-node */
    uint64_t select[ALLOT_MAX_SELECT]; /* node selector: allot_label_hash of labels a node
                                          must all carry; unused words 0 (first) */
    const struct allot_nodeset *nodes; /* the nodes it may use (allot_cluster_nodeset);
                                          NULL: any */
};

/* Where a task was placed. */
struct allot_placement {
    int node;            /* node index */
    uint32_t gpu_mask;   /* GPUs used on the node */
    int gpu_milli;       /* per GPU taken (1000 for whole GPUs; MIG: compute share) */
    int64_t gpu_mem_mib; /* per GPU taken */
    int mig_profile;     /* local profile index, -1 when not MIG */
    int mig_start;       /* MIG placement start slice */
    int64_t cpu_milli;
    int64_t mem_mib;
    int rdma_vfs;  /* RDMA virtual functions taken */
    int pod_class; /* -1 for CPU-only tasks */
    int tenant;    /* the task's tenant and isolation (see allot_task) */
    int isolation;
};

struct allot_cluster;

/* Creates an empty cluster over catalog `cat` (borrowed; must outlive it).
 * `class_flags` selects what the state classes tell apart (ALLOT_CLASS_*).
 * Returns NULL on allocation failure. */
#define ALLOT_CLASS_POD_CLASSES 1u /* tell apart nodes by the task classes they host */
struct allot_cluster *allot_cluster_new(const struct allot_catalog *cat, unsigned class_flags);

/* Changes what the state classes tell apart, rebuilding the index.
 * Returns 0 or ALLOT_ENOMEM (the index is then incomplete: free the cluster). */
int allot_cluster_set_class_flags(struct allot_cluster *c, unsigned class_flags);

/* Frees the cluster and its nodes; accepts NULL. */
void allot_cluster_free(struct allot_cluster *c);

/* Adds a node; returns its index (>= 0) or a negative ALLOT_E* code with a
 * message naming the field in `err` (duplicate name, unknown model,
 * negative capacity, too many GPUs). Nothing changes on error. */
int allot_cluster_add_node(struct allot_cluster *c, const struct allot_node_spec *spec, char *err,
                           size_t errlen);

/* Gives node (an index) the size spec describes (its name NULL or the
 * node's): model, CPU, memory, VFs, GPUs with their mode and islands,
 * rack, labels; its name, rank and state stay. Only a node that is not
 * ready and holds no task can change (ALLOT_ESTATE otherwise, err says
 * which): a node whose server changed, cordoned and emptied first. Spec
 * errors as allot_cluster_add_node's; the node is unchanged on any
 * error. Bumps allot_cluster_resized. */
int allot_cluster_update_node(struct allot_cluster *c, int node, const struct allot_node_spec *spec,
                              char *err, size_t errlen);
/* Bumped whenever a node is added or changes size: capacity counted
 * before it is stale. */
uint64_t allot_cluster_resized(const struct allot_cluster *c);

/* The cluster's one set of nodes `idx` (n node indices, any order,
 * repeats allowed), or all nodes but those when `exclude`: equal sets
 * give the same pointer, valid until the cluster is freed. An empty
 * exclusion is no restriction: NULL. An empty list is a set no node is
 * in. Sets *rc to 0, ALLOT_EINVAL (an index that is no node) or
 * ALLOT_ENOMEM, returning NULL on error. */
const struct allot_nodeset *allot_cluster_nodeset(struct allot_cluster *c, bool exclude,
                                                  const int32_t *idx, int n, int *rc);

/* Sets the tie-break rank of every node from a seeded permutation. */
void allot_cluster_shuffle_ranks(struct allot_cluster *c, uint64_t seed);

/* Changes a node's state; only ready nodes are schedulable. Returns 0 or
 * ALLOT_EINVAL. Tasks already placed stay. */
int allot_cluster_set_state(struct allot_cluster *c, int node, int state);

int allot_cluster_node_count(const struct allot_cluster *c);
const struct allot_node *allot_cluster_node(const struct allot_cluster *c, int i);
const struct allot_catalog *allot_cluster_catalog(const struct allot_cluster *c);
/* Returns the node index of `name` or -1. */
int allot_cluster_find_node(const struct allot_cluster *c, const char *name);

/* Totals over all nodes. */
int64_t allot_cluster_gpu_count(const struct allot_cluster *c);
int64_t allot_cluster_used_milli(const struct allot_cluster *c);

/* Checks a task shape against the catalog: returns 0, or ALLOT_EINVAL with
 * a message naming the field (gpu_milli out of range, MIG with 0 GPUs, MIG
 * profile that no allowed model has, unknown model bits, negative CPU). */
int allot_task_validate(const struct allot_catalog *cat, const struct allot_task *t, char *err,
                        size_t errlen);

/* A hash of every field of a task shape, from `seed`, and shape equality:
 * the one definition of "the same shape" the scheduler's and the queue's
 * shape tables use. */
uint64_t allot_task_hash(const struct allot_task *t, uint64_t seed);
bool allot_task_same(const struct allot_task *a, const struct allot_task *b);

/* Pod class of a task for GPU clustering: 0 fractional, k for k whole GPUs,
 * -1 for CPU-only. */
int allot_task_pod_class(const struct allot_task *t);

/* Per-GPU milli a task takes (1000 for whole GPUs; MIG: its compute share). */
int allot_task_gpu_milli(const struct allot_cluster *c, const struct allot_task *t, int model);

/*
 * Isolation, the one rule every feasibility test and every placement goes
 * through: may a task of `tenant` join something (a node, a GPU) that
 * `holders` tasks hold, `excl_holder` being the tenant that holds it
 * exclusively (0: none)? `asks_exclusive` is true when the task itself
 * wants it alone (exclusive-node for nodes, an exclusive-gpu fraction for
 * GPUs). Empty: yes. Held exclusively: only by its owner. Held by sharers:
 * only by another sharer.
 */
bool allot_isolation_allows(int holders, int32_t excl_holder, int tenant, bool asks_exclusive);

/* True when GPU g is free for whole-GPU use: not in MIG mode and held by
 * no task (a memory-only fraction holds a GPU although its milli is free). */
bool allot_gpu_whole_free(const struct allot_gpu *g);
/* Whether t is one fraction of a GPU: one GPU, no MIG profile, less than
 * all of it or a memory ask. */
bool allot_task_is_fraction(const struct allot_task *t);
/* Whether a GPU in mode (enum allot_gpu_mode) can serve t at all: a MIG
 * slice needs MIG mode, a fraction shared mode, a whole GPU either other
 * mode. The one answer to "the right mode", free room aside. */
bool allot_gpu_mode_serves(int mode, const struct allot_task *t);

/* The GPUs of node n that are free for whole-GPU use (allot_gpu_whole_free). */
int allot_node_whole_free(const struct allot_node *n);

/* True when task t may run only on some nodes: it selects labels, GPU
 * models or nodes by name. Work for the others counts the whole cluster. */
bool allot_task_picks_nodes(const struct allot_task *t);

/* True when node n carries every label task t selects (t->select). */
bool allot_node_selected(const struct allot_node *n, const struct allot_task *t);

/* True when what the node is, whatever runs on it, may host the task: its
 * labels (allot_node_selected), GPU model and GPU count, and the task's
 * set of nodes (t->nodes); a node without CPU (of no size: removed) hosts
 * nothing. What preemption,
 * defragmentation and reservations ask before counting a node's room. */
bool allot_node_may_host(const struct allot_node *n, const struct allot_task *t);

/* True when the node may host the task (allot_node_may_host) and its free
 * CPU, memory, RDMA VFs and isolation admit it (GPU fit aside). */
bool allot_node_admits(const struct allot_node *n, const struct allot_task *t);

/* True when node-level tenant isolation lets task t onto node n (the
 * node's part of allot_node_admits). */
bool allot_node_isolation_allows(const struct allot_node *n, const struct allot_task *t);

/* True when the task fits on the node (state, labels, model, CPU, memory, GPUs). */
bool allot_node_fits(const struct allot_cluster *c, const struct allot_node *n,
                     const struct allot_task *t);

/* Counts GPUs of node n on which a fraction of task t fits. */
int allot_node_fitting_gpus(const struct allot_node *n, const struct allot_task *t);

/* True when a fraction of task t may go on GPU g: shared mode, enough free
 * milli and memory (allot_fraction_mem), and isolation (an exclusive-gpu
 * tenant's fractions share a GPU only among themselves). */
bool allot_gpu_takes_fraction(const struct allot_gpu *g, const struct allot_task *t);

/* The GPU memory (MiB) a fraction of task t takes on GPU g: its ask, or,
 * when it asked for compute only, that share of the GPU's memory (rounded
 * down), so that it is capped and packed like a job that asked. */
int64_t allot_fraction_mem(const struct allot_gpu *g, const struct allot_task *t);

/* Applies a placement (the caller made sure it fits). Returns 0, or
 * ALLOT_ENOSPC / ALLOT_EINVAL when it does not, leaving everything unchanged. */
int allot_cluster_apply(struct allot_cluster *c, const struct allot_placement *p);

/* Puts back a placement of work that runs on its node and was released a
 * moment ago (a preemption trial undone): as allot_cluster_apply, but on a
 * node in any state, as a cordoned, draining or fenced node keeps the work
 * it runs (only new work is kept off it). */
int allot_cluster_restore(struct allot_cluster *c, const struct allot_placement *p);

/* Undoes an applied placement. Returns 0 or ALLOT_EINVAL when the placement
 * does not match what the node holds. */
int allot_cluster_release(struct allot_cluster *c, const struct allot_placement *p);

/* A counter bumped whenever free capacity may have grown (node added or
 * made ready, placement released). Placements only shrink capacity, so a
 * task that fit nowhere still fits nowhere while the counter is unchanged. */
uint64_t allot_cluster_grow_epoch(const struct allot_cluster *c);

/* A counter bumped by every change to the nodes (added, state, placement
 * applied or released, ranks): equal values mean an unchanged cluster. */
uint64_t allot_cluster_changes(const struct allot_cluster *c);

/* Checks every invariant listed above. Returns 0 or ALLOT_EINTERNAL with a
 * description of the first breach in `err`. */
int allot_cluster_check(const struct allot_cluster *c, char *err, size_t errlen);

/* ---- the state-class index (used by the scheduler) ---- */

/* One class of identical node states. */
struct allot_class {
    uint64_t sig; /* signature hash */
    int32_t n_members;
    int32_t *heap; /* owned: member node indices, min-heap by rank */
    int32_t cap;
    int32_t live_pos;   /* position in the live list, -1 when empty */
    int32_t bucket;     /* capacity bucket (allot_cluster_bucket) */
    int32_t bucket_pos; /* position in the bucket's heap */
    int64_t cap_key;    /* free capacity: CPU milli + 16 x free GPU milli */
    double frag;        /* scheduler's cached fragmentation of one member */
    uint32_t frag_gen;
};

/* What the scheduler's scan reads per class, kept in one dense array
 * indexed by class id so that a pass over thousands of classes stays in
 * cache. */
struct allot_class_hot {
    uint32_t birth;    /* serial given when the class (id) was last created, >= 1 */
    uint32_t rep_rank; /* rank of the representative member */
};

/* Dense per-class-id array (borrowed; valid until the next cluster change). */
const struct allot_class_hot *allot_cluster_class_hot(const struct allot_cluster *c);

/* Number of class ids in use (live or recycled); ids are below it. */
int allot_cluster_class_ids(const struct allot_cluster *c);

/* Capacity buckets: live classes are also filed by what their GPUs can
 * still take (MIG GPUs present, fully free GPUs, largest free part of a
 * partly used GPU in 100-milli steps, free CPU in four levels), so a task
 * only visits classes that
 * may fit it. */
#define ALLOT_BUCKET_PARTS 11
#define ALLOT_BUCKET_CPU   4 /* free CPU levels: < 4, < 16, < 64, >= 64 cores */
#define ALLOT_BUCKETS      (ALLOT_BUCKET_CPU * 2 * (ALLOT_MAX_GPUS + 1) * ALLOT_BUCKET_PARTS)

/* Live classes of bucket b: returns their count, ids through *ids
 * (borrowed), laid out as a binary max-heap by cap_key (children of
 * position i at 2i+1 and 2i+2). */
int allot_cluster_bucket(const struct allot_cluster *c, int b, const int32_t **ids);

#define ALLOT_BUCKET_WORDS ((ALLOT_BUCKETS + 63) / 64)

/* Writes the ids of the buckets that hold at least one class, in
 * increasing order, into out[0..ALLOT_BUCKETS) and returns how many. */
int allot_cluster_buckets_used(const struct allot_cluster *c, int16_t *out);

/* True when a node in bucket b may fit task t (a necessary condition). */
bool allot_bucket_admits(int b, const struct allot_task *t);
/* True when the nodes in bucket b have GPUs in MIG mode. */
bool allot_bucket_mig(int b);

/* The state class of node `node`, or -1 when it is not schedulable. */
int32_t allot_cluster_node_class(const struct allot_cluster *c, int node);

/* Live (non-empty) classes: returns their ids through *ids (borrowed). */
int allot_cluster_classes(const struct allot_cluster *c, const int32_t **ids);
struct allot_class *allot_cluster_class(const struct allot_cluster *c, int32_t id);
/* The member node with the lowest rank. */
static inline int32_t allot_class_rep(const struct allot_class *k)
{
    return k->heap[0];
}

#endif
