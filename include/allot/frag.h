/*
 * GPU fragmentation measure (Weng et al., ATC'23, section 3), as defined in
 * docs/benchmarks.md: for a node and a typical task mix, the expected amount
 * of free GPU capacity that the next task cannot use.
 *
 * A mix is a list of typical task shapes with popularities summing to 1.
 * allot_frag_node() is pure; frag_mix_* build mixes from observed tasks (offline
 * from a trace, or online with exponential decay).
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
