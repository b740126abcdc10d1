/*
 * The arrival order of one seed in the openb fill experiment (the FGD
 * paper's procedure, docs/benchmarks.md "openb fill"): the trace's pods
 * shuffled, then inflated with clones or trimmed to `tune` x the
 * cluster's GPU capacity. Deterministic: the same trace, seed and tune give
 * the same order.
 *
 * Callers: fill_run.c (the online runs) and offline.c (the hindsight
 * packer, which packs prefixes of the same order). Pure computation.
 */
#ifndef ALLOT_SIM_FILL_WORKLOAD_H
#define ALLOT_SIM_FILL_WORKLOAD_H

#include "fill_trace.h"

#include <stddef.h>
#include <stdint.h>

/* The arrival order of one seed. */
struct sim_fill_workload {
    size_t n;              /* pods in arrival order */
    uint32_t *task;        /* owned, n entries: index into the trace's tasks */
    int32_t *clone;        /* owned, n entries: clone number, -1 for an original pod */
    int64_t request_milli; /* GPU milli the workload asks for */
    size_t n_clones;       /* clones appended */
    size_t n_removed;      /* original pods removed */
};

/*
 * Builds the arrival order of `seed` (the FGD paper's Procedure 1-2):
 * the trace's pods shuffled, then clones drawn uniformly with replacement
 * from the trace appended until the next clone's per-GPU milli (the
 * authors' quirk: not its total) would take the request above tune x
 * capacity; or, when the trace already asks for more, pods removed at
 * random until it does not. tune <= 0, or a trace that asks for no GPU,
 * leaves the shuffled trace as it is. The PRNG stream is derived from the
 * seed (distinct from the node-rank and policy streams). Returns 0 or
 * ALLOT_ENOMEM; *out (OUT) is owned by the caller (sim_fill_workload_free).
 */
int sim_fill_workload_make(const struct sim_fill_trace *t, uint64_t seed, double tune,
                           struct sim_fill_workload *out);

/* Frees the workload's arrays and leaves it empty; accepts NULL. */
void sim_fill_workload_free(struct sim_fill_workload *w);

/* GPU milli task `t` asks for in all (GPUs x milli per GPU). */
int64_t sim_fill_task_request(const struct allot_task *t);

#endif
