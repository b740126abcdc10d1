/*
 * Offline reference packer for the openb fill experiment (allot-sim fill
 * --offline; docs/benchmarks.md, "openb fill: beating FGD").
 *
 * An online policy places each pod as it arrives, for good. The offline
 * packer sees every pod that has arrived by a given point at once: it
 * starts from a CPU-aware largest-first greedy packing and from the fgd
 * (given the exact mix of those pods) and allot packings in arrival order,
 * improves each with a local search that trades a placed pod for a larger
 * one that did not fit (moving the smaller one elsewhere when it can), and
 * keeps the best. It is a reference for how far the online policies are
 * from what a planner with hindsight reaches, not a bound (the true optimum
 * may be better still) and not a placement policy: the core never uses it.
 * Like any hindsight packer it chooses which pods to leave out, which an
 * online policy cannot.
 *
 * Same filters as the online experiment: GPU model (gpu_spec), CPU, memory
 * and GPU fit (whole GPUs need fully free ones; a fraction needs one GPU
 * with that much free). The packing that places the most GPU milli wins
 * (ties: the fewest CPU-only pods left out); the local search never takes
 * a placed CPU-only pod out without placing it elsewhere, but a greedy
 * start may leave CPU-only pods out where CPU runs short (the cpu250 and
 * cpu300 traces ask for more CPU than the cluster has), so allot-sim prints
 * how many pods of each kind the packing left out.
 *
 * Deterministic: same inputs, same packing. Pure computation, no I/O;
 * sim_offline_fill_seeds() forks worker processes. Not thread-safe (the
 * sort passes its context through a file-level pointer). Uses the fill
 * trace and workload layers (fill_trace.h, fill_workload.h); called by
 * allot-sim fill's command line (fill_cli.c), which prints the results
 * (fill_report.h).
 */
#ifndef ALLOT_SIM_OFFLINE_H
#define ALLOT_SIM_OFFLINE_H

#include "allot/cluster.h"
#include "fill_trace.h"

#include <stddef.h>
#include <stdint.h>

/* What one offline packing achieved. */
struct sim_offline_result {
    int64_t request_milli; /* GPU milli asked for by the packed pods */
    int64_t used_milli;    /* GPU milli placed */
    size_t failed_gpu;     /* GPU pods left out */
    size_t failed_cpu;     /* CPU-only pods left out */
};

/*
 * Packs tasks[0..n_tasks) (IN, borrowed) onto fresh nodes built from
 * nodes[0..n_nodes) (IN, borrowed; models resolved in `cat`), maximising
 * the GPU milli placed. With `search_rounds` > 0 the local search runs up
 * to that many improving passes. Fills *out (OUT). Returns 0, ALLOT_EINVAL
 * (a node model that `cat` does not know) or ALLOT_ENOMEM.
 */
int sim_offline_pack(const struct allot_catalog *cat, const struct allot_node_spec *nodes,
                     size_t n_nodes, const struct allot_task *tasks, size_t n_tasks, uint64_t seed,
                     int search_rounds, struct sim_offline_result *out);

/*
 * For the workload of `seed` and `tune` (sim_fill_workload_make), packs
 * offline the pods that have arrived when the arrived GPU request reaches
 * points[i] % of capacity (the longest prefix at or below it), for each
 * i < n_points, and writes what it achieved to out[i] (OUT; unallocated
 * % of capacity = 100 - used_milli / (t->gpus x 10)). Returns 0 or
 * ALLOT_ENOMEM / ALLOT_EINVAL.
 */
int sim_offline_fill(const struct sim_fill_trace *t, uint64_t seed, double tune, const int *points,
                     int n_points, struct sim_offline_result *out);

#define SIM_OFFLINE_MAX_POINTS 16 /* points per sim_offline_fill_seeds() call */

/*
 * Runs sim_offline_fill for seeds[0..n_seeds) (IN), on up to `workers`
 * forked worker processes, at points[0..n_points) (n_points at most
 * SIM_OFFLINE_MAX_POINTS), and writes the packing of seed s at point i to
 * out[s * n_points + i] (OUT, caller-allocated, n_seeds x n_points
 * entries). The results do not depend on `workers`. Returns 0, ALLOT_EINVAL
 * (bad counts), ALLOT_ENOMEM, or ALLOT_EIO when a worker fails.
 */
int sim_offline_fill_seeds(const struct sim_fill_trace *t, const uint64_t *seeds, int n_seeds,
                           double tune, int workers, const int *points, int n_points,
                           struct sim_offline_result *out);

#endif
