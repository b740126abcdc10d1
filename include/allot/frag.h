/*
 * GPU fragmentation measure (Weng et al., ATC'23, section 3), as defined in
 * docs/benchmarks.md: for a node and a typical task mix, the expected amount
 * of free GPU capacity that the next task cannot use.
 *
 * A mix is a list of typical task shapes with popularities summing to 1.
 * allot_frag_node() is pure; allot_frag_mix_build() builds a mix from a list
 * of tasks (offline, from a trace) and allot_frag_counts_* from decayed,
 * bounded per-shape counts (online, in the policies that learn).
 */
#ifndef ALLOT_FRAG_H
#define ALLOT_FRAG_H

#include "allot/cluster.h"

#include <stddef.h>
#include <stdint.h>

struct allot_frag_task {
    int64_t cpu_milli;
    int milli;           /* per-GPU milli; 0 when no GPU */
    int num_gpu;         /* 0 for CPU-only */
    uint64_t model_mask; /* 0 = any */
    double p;            /* popularity */
    double weight;       /* raw count (or decayed count) before renormalising */
};

struct allot_frag_mix {
    int n;
    struct allot_frag_task *v; /* owned, n entries */
};

/* Builds the typical-task mix of `n` tasks: group by (cpu, per-GPU milli,
 * num_gpu, model mask), sort by count (ties by key), keep the most popular
 * until they cover >= `coverage` (0..1] of tasks, renormalise. Returns 0 or
 * ALLOT_ENOMEM/ALLOT_EINVAL; *out is owned by the caller (allot_frag_mix_clear). */
int allot_frag_mix_build(const struct allot_task *tasks, size_t n, double coverage,
                         struct allot_frag_mix *out);

/*
 * Decayed per-shape arrival counts: what an online mix is learnt from, in
 * bounded memory. Each arrival adds to its shape's weight; with a half-life
 * of H arrivals an arrival weighs half as much as one H arrivals later (0:
 * no decay). At most max_shapes distinct shapes are kept (0: no limit):
 * a new shape arriving at a full counter makes it forget its lighter half. Caller-allocated; not
 * thread-safe.
 */
struct allot_frag_counts {
    struct allot_frag_task *v; /* owned: distinct shapes, weight = decayed count */
    size_t n, cap;
    int32_t *tab; /* owned: shape hash -> index in v, open addressing */
    size_t tab_cap;
    size_t max_shapes;
    double inc;    /* what the next arrival adds */
    double growth; /* inc grows by this per arrival: 2^(1/half-life) */
    double total;  /* sum of the weights */
    uint64_t arrivals;
};

/* Sets up an empty counter (allocates nothing). */
void allot_frag_counts_init(struct allot_frag_counts *fc, double half_life, size_t max_shapes);

/* Counts one arrival of t's shape. Returns 0 or ALLOT_ENOMEM (the arrival
 * is then not counted; the counter stays usable). */
int allot_frag_counts_add(struct allot_frag_counts *fc, const struct allot_task *t);

/* Builds the mix of the counted shapes: the heaviest until they cover >=
 * `coverage` of the total weight, renormalised. Returns 0, ALLOT_EINVAL or
 * ALLOT_ENOMEM; *out is owned by the caller (allot_frag_mix_clear). */
int allot_frag_counts_mix(const struct allot_frag_counts *fc, double coverage,
                          struct allot_frag_mix *out);

/* Frees what the counter holds and empties it. */
void allot_frag_counts_clear(struct allot_frag_counts *fc);

/* Frees the entries of a mix; accepts an empty one. */
void allot_frag_mix_clear(struct allot_frag_mix *m);

/* Fragmentation F_n of node `n` under mix `m`, in milli-GPU. */
double allot_frag_node(const struct allot_frag_mix *m, const struct allot_node *n);

/* Same for a hypothetical node state given as per-GPU free milli and free
 * CPU (model `model`, `n_gpus` entries in free_milli). */
double allot_frag_state(const struct allot_frag_mix *m, int model, int64_t cpu_free,
                        const int32_t *free_milli, int n_gpus);

/* Fragmentation of the whole cluster (sum over ready nodes), in milli-GPU. */
double allot_frag_cluster(const struct allot_frag_mix *m, const struct allot_cluster *c);

#endif
