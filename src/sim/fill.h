/*
 * The openb fill experiment of allot-sim (docs/BENCHMARKS.md section 1, the
 * FGD paper's main result): replay an Alibaba openb pod trace, inflated or
 * trimmed to `tune` x the cluster's GPU capacity, onto the openb GPU
 * cluster, one pod at a time with no departures, under each placement
 * policy and seed, and measure the share of GPU capacity left unallocated
 * and the fragmentation rate as the arrived GPU request grows.
 *
 * Layers, each callable on its own (the unit tests do):
 *   sim_fill_trace_*     openb rows -> catalog nodes and allot_task shapes,
 *                        plus the typical-task mix of the original trace;
 *   sim_fill_workload_*  the arrival order of one seed (shuffle + tune);
 *   sim_fill_run()       one policy x seed job: places every pod, logs each
 *                        decision, buckets allocation % and fragmentation
 *                        rate by arrived %;
 *   sim_fill_experiment() every policy x seed job, in-process or on forked
 *                        worker processes, aggregated per policy;
 *   sim_fill_main()      the `allot-sim fill` command line.
 *
 * Determinism: a job depends only on the trace, the policy, the seed and
 * tune; the decision log of an experiment is byte-identical for the same
 * inputs whatever the number of worker processes. Not thread-safe: one
 * experiment at a time per process (workers are processes, not threads).
 */
#ifndef ALLOT_SIM_FILL_H
#define ALLOT_SIM_FILL_H

#include "allot/frag.h"
#include "allot/sched.h"
#include "openb.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_FILL_BUCKETS  131  /* arrived % buckets 0..130 */
#define SIM_FILL_TRACKED  132  /* 0..131: 131 only feeds bucket 130's neighbour rule */
#define SIM_FILL_COVERAGE 0.95 /* typical tasks cover >= 95 % of the trace's pods */

/* A trace converted for the core. Strings point into the owned openb lists. */
struct sim_fill_trace {
    struct allot_catalog *cat;     /* owned */
    struct openb_nodes onodes;     /* owned: the node list as read */
    struct openb_pods opods;       /* owned: the pod list as read */
    size_t n_nodes;                /* GPU nodes kept (CPU-only nodes skipped) */
    struct allot_node_spec *nodes; /* owned, n_nodes entries; names borrowed from onodes */
    size_t n_tasks;                /* == opods.n */
    struct allot_task *tasks;      /* owned, n_tasks entries, in file order */
    int64_t gpus;                  /* GPUs over the kept nodes */
    int64_t request_milli;         /* GPU milli the whole trace asks for */
    struct allot_frag_mix mix;     /* owned: typical tasks of the original trace */
    char workload[128];            /* pod file name without folder and ".csv" */
};

/*
 * Converts parsed openb lists into `*out` (OUT, overwritten), taking over
 * both lists (they are left empty). `nodes_file`/`pods_file` (IN) name the
 * files in messages. Nodes with no GPU are skipped; a node model or a
 * gpu_spec entry that the GPU catalog does not know, more GPUs on a node or
 * pod than the core supports, or no GPU node at all is an error. Returns 0,
 * ALLOT_EINVAL with "FILE:LINE: what" in `err`, or ALLOT_ENOMEM. On failure
 * everything taken over is freed and *out is empty.
 */
int sim_fill_trace_from_lists(struct sim_fill_trace *out, struct openb_nodes *nodes,
                              struct openb_pods *pods, const char *nodes_file,
                              const char *pods_file, char *err, size_t errlen);

/* Reads both files with the strict openb reader, then converts (above).
 * Returns 0, ALLOT_EIO, ALLOT_EINVAL (message "FILE:LINE: ...") or ALLOT_ENOMEM. */
int sim_fill_trace_load(struct sim_fill_trace *out, const char *nodes_path, const char *pods_path,
                        char *err, size_t errlen);

/* Frees what the trace owns and leaves it empty; accepts NULL. */
void sim_fill_trace_free(struct sim_fill_trace *t);

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
 * Builds the arrival order of `seed` (docs/BENCHMARKS.md, Procedure 1-2):
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

/* A growable text buffer with a sticky error (STYLE 13). */
struct sim_fill_text {
    char *buf; /* owned, NUL-terminated when len > 0 */
    size_t len;
    size_t cap;
    int err; /* 0 or ALLOT_ENOMEM, sticky */
};

/* Appends formatted text; on failure sets the sticky error. */
void sim_fill_text_add(struct sim_fill_text *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Frees the buffer and leaves it empty; accepts NULL. */
void sim_fill_text_free(struct sim_fill_text *x);

/* 64-bit FNV-1a of `len` bytes, continuing from `h` (start with SIM_FILL_FNV_INIT). */
#define SIM_FILL_FNV_INIT 0xcbf29ce484222325ULL
uint64_t sim_fill_fnv1a(uint64_t h, const void *data, size_t len);

/* What one policy x seed job measured. Plain data: copied through pipes. */
struct sim_fill_result {
    double alloc_pct[SIM_FILL_BUCKETS]; /* GPU allocation %, mean over the bucket; NaN if none */
    double frag_pct[SIM_FILL_BUCKETS];  /* fragmentation rate %, mean over the bucket; NaN */
    uint64_t pods;                      /* arrivals */
    uint64_t failed;                    /* arrivals that found no node */
    int64_t arrived_milli;              /* GPU milli of all arrivals */
    int64_t used_milli;                 /* GPU milli allocated at the end */
    double frag_end;                    /* fragmentation amount (milli) at the end */
    double seconds;                     /* wall time of the job */
};

/*
 * Runs one job: a fresh cluster of the trace's nodes with ranks shuffled by
 * `seed`, a scheduler of `policy` (the trace's mix handed in unless the
 * policy is "allot", which learns it online), the workload of `seed` and
 * `tune` placed pod by pod. Appends one decision-log line per pod to `log`
 * (IN/OUT, may be NULL):
 *   POLICY \t SEED \t INDEX \t POD \t NODE \t MASK
 * (NODE and MASK "-" for a pod that found no node; MASK in hex; clones are
 * named POD-tuned-N). With `check`, runs allot_sched_check_invariants and checks
 * the used and fragmentation tallies after every placement. Fills *out
 * (OUT). Returns 0, ALLOT_EINTERNAL (broken invariant), ALLOT_EINVAL
 * (a task the scheduler rejects) or ALLOT_ENOMEM, with a message in `err`.
 */
int sim_fill_run(const struct sim_fill_trace *t, const struct allot_sched_policy_ops *policy,
                 uint64_t seed, double tune, bool check, struct sim_fill_text *log,
                 struct sim_fill_result *out, char *err, size_t errlen);

/* Experiment options. */
struct sim_fill_opts {
    const struct allot_sched_policy_ops *const *policies; /* borrowed, n_policies entries */
    int n_policies;
    const uint64_t *seeds; /* borrowed, n_seeds entries */
    int n_seeds;
    double tune;
    int jobs;      /* worker processes; <= 1: in-process */
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
 * Runs every policy x seed job (on opts->jobs forked workers when > 1; the
 * results are identical to one process) and fills out[0..n_policies)
 * (OUT, caller-allocated). Writes the decision log, policy-major then seed,
 * to opts->log and its FNV-1a hash to *hash (OUT). Returns 0 or the first
 * failing job's error (message in `err`), ALLOT_EIO when a worker dies or a
 * write fails, ALLOT_ENOMEM.
 */
int sim_fill_experiment(const struct sim_fill_trace *t, const struct sim_fill_opts *opts,
                        struct sim_fill_summary *out, uint64_t *hash, char *err, size_t errlen);

/* Published results (the FGD authors' analysis_allo_discrete.csv). */
struct sim_fill_published {
    size_t n;
    struct sim_fill_pub_row {
        char workload[64];
        char policy[32]; /* our name: "fgd", "bestfit", ... */
        double tune;
        long seed;
        double alloc[SIM_FILL_BUCKETS]; /* NaN where the file has no value */
    } * v;                              /* owned */
};

/* Reads `path` (IN). Returns 0, ALLOT_EIO or ALLOT_EINVAL ("FILE:LINE: what"),
 * ALLOT_ENOMEM; *out (OUT) is freed with sim_fill_published_free. */
int sim_fill_published_read(const char *path, struct sim_fill_published *out, char *err,
                            size_t errlen);

/* Mean unallocated % at `bucket` over the seeds of (workload, policy, tune);
 * NaN when the file has none. *n_seeds (OUT, may be NULL) gets their count. */
double sim_fill_published_unalloc(const struct sim_fill_published *p, const char *workload,
                                  const char *policy, double tune, int bucket, int *n_seeds);

/* Frees the rows and leaves it empty; accepts NULL. */
void sim_fill_published_free(struct sim_fill_published *p);

/* Parses a seed list "42-51", "1,5,7-9" into a new array (*out, owned by the
 * caller, free with allot_free) of *n (OUT) seeds. Returns 0, ALLOT_EINVAL
 * (malformed, descending range, more than 100000 seeds) or ALLOT_ENOMEM. */
int sim_fill_parse_seeds(const char *s, uint64_t **out, int *n);

/* `allot-sim fill ARGS`: argv[0] is "fill". Returns the exit status: 0,
 * 1 (bad trace, failed run or write), 2 (bad arguments; usage on stderr). */
int sim_fill_main(int argc, char **argv);

#endif
