/*
 * Synthetic clusters and workloads for the demo, tests and benchmarks: a
 * deterministic generator (seeded) of mixed GPU servers and of an
 * openb-like task mix (CPU-only, fractional, whole, multi-GPU and MIG).
 * Owned by allot-sim; the core never sees where tasks come from.
 */
#ifndef ALLOT_SIM_WORKLOAD_H
#define ALLOT_SIM_WORKLOAD_H

#include "allot/cluster.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Creates a cluster of `n_nodes` mixed GPU servers (A100/H100 in MIG and
 * shared mode, V100, T4, A10, P100; only the 8-GPU kinds when `eight_gpus`),
 * ranks shuffled with `seed`. Returns
 * NULL on allocation failure. Free with allot_cluster_free. */
struct allot_cluster *sim_synth_cluster(const struct allot_catalog *cat, int n_nodes,
                                        bool eight_gpus, uint64_t seed);

/* Fills out[0..n) with a synthetic task mix drawn with `seed`: about 13 %
 * CPU-only, 35 % fractions, 45 % one GPU, 2 % multi-GPU, 5 % MIG. */
void sim_synth_tasks(const struct allot_catalog *cat, struct allot_task *out, size_t n,
                     uint64_t seed);

#endif
