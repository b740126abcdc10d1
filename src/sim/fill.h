/*
 * The openb fill experiment of allot-sim (docs/benchmarks.md, "openb fill";
 * the FGD paper's main result): replay an Alibaba openb pod trace, inflated
 * or trimmed to `tune` x the cluster's GPU capacity, onto the openb GPU
 * cluster, one pod at a time with no departures, under each placement
 * policy and seed, and measure the share of GPU capacity left unallocated
 * and the fragmentation rate as the arrived GPU request grows.
 *
 * Layers, each callable on its own (the unit tests do), lowest first:
 *   fill_text.h      the decision-log buffer and its hash;
 *   fill_trace.h     openb rows -> catalog nodes and allot_task shapes,
 *                    plus the typical-task mix of the original trace;
 *   fill_workload.h  the arrival order of one seed (shuffle + tune);
 *   fill_run.h       one policy x seed job: places every pod, logs each
 *                    decision, buckets allocation % and fragmentation rate
 *                    by arrived %;
 *   fill.h (here)    every policy x seed job, in-process or on forked
 *                    worker processes, aggregated per policy;
 *   fill_published.h the FGD authors' published curves, for comparison;
 *   fill_seeds.h     seed lists ("42-51", "1,5,7-9");
 *   fill_perturb.h   perturbed workloads (--perturb: flip, scale, subset);
 *   fill_report.h    the table, JSON and plot of a finished experiment;
 *   fill_cli.h       the `allot-sim fill` command line.
 * The offline reference packer (offline.h) sits beside fill.h: it uses the
 * trace and workload layers and is called by the command line.
 *
 * Determinism: a job depends only on the trace, the policy, the seed and
 * tune; the decision log of an experiment is byte-identical for the same
 * inputs whatever the number of worker processes. Not thread-safe: one
 * experiment at a time per process (workers are processes, not threads).
 */
#ifndef ALLOT_SIM_FILL_H
#define ALLOT_SIM_FILL_H

#include "allot/sched.h"
#include "fill_run.h"
#include "fill_trace.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Experiment options. */
struct sim_fill_opts {
    const struct allot_sched_policy_ops *const *policies; /* borrowed, n_policies entries */
    int n_policies;
    const uint64_t *seeds; /* borrowed, n_seeds entries */
    int n_seeds;
    double tune;
    int workers;   /* worker processes; <= 1: in-process */
    bool check;    /* invariants after every placement */
    bool progress; /* progress line on stderr */
    FILE *log;     /* decision log sink, NULL: none */
};

/* Per-policy aggregate over seeds. */
struct sim_fill_summary {
    const struct allot_sched_policy_ops *policy; /* borrowed */
    double unalloc_mean[SIM_FILL_BUCKETS];       /* NaN where no seed has data */
    double unalloc_sd[SIM_FILL_BUCKETS];         /* sample sd (0 with one seed) */
    double frag_mean[SIM_FILL_BUCKETS];
    double seconds;  /* sum of the jobs' wall times */
    uint64_t failed; /* failed arrivals over seeds */
    uint64_t pods;   /* arrivals over seeds */
};

/*
 * Runs every policy x seed job (on opts->workers forked workers when > 1;
 * the results are identical to one process) and fills out[0..n_policies)
 * (OUT, caller-allocated). Writes the decision log, policy-major then seed,
 * to opts->log and its FNV-1a hash to *hash (OUT). Returns 0 or the first
 * failing job's error (message in `err`), ALLOT_EIO when a worker dies or a
 * write fails, ALLOT_ENOMEM.
 */
int sim_fill_experiment(const struct sim_fill_trace *t, const struct sim_fill_opts *opts,
                        struct sim_fill_summary *out, uint64_t *hash, char *err, size_t errlen);

#endif
