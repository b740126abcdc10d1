/*
 * The multi-tenant replay experiment of allot-sim (results in
 * docs/benchmarks.md, "Philly multi-tenant replay"; manual in
 * docs/replay.md): a job trace (the Philly digest, or
 * the synthetic generator of mtgen.h) replayed on a virtual clock through
 * liballot-core's queue (queue.h) under several queueing policies, each on a
 * fresh cluster, tenant tree and queue, with the same jobs.
 *
 * Layers, each callable on its own (the unit tests do):
 *   replay_setup_*    tenants (Philly VCs or a tenants file), the cluster
 *                     size, and the jobs in the window, scaled by --load;
 *   replay_run()      one policy: the event loop (arrivals, departures,
 *                     preemptions with lost work since the last checkpoint,
 *                     a queue cycle at every event time and at the queue's
 *                     own wake-up) and its metrics;
 *   replay_write_*    the JSON report and the SVG plots;
 *   sim_replay_main() the `allot-sim replay` command line (replay_cli.c).
 *
 * Nodes: by default every node is 8 x V100-32GB, 64 cores, 512 GiB (the
 * REPLAY_NODE_* shape); a setup may give another shape for the nodes it
 * sizes from the tenants (s->shape), or explicit node groups (s->groups:
 * model x count, each with its GPUs, cores and memory per node; Slurm's
 * node list, allot plan's inventory).
 *
 * Jobs: a job of g GPUs is a gang of ceil(g / G) tasks of min(g, G) GPUs
 * each, G the most GPUs of a node (8 by default; the queue places gangs of
 * identical tasks, so 12 GPUs become two tasks of 8); each GPU comes with
 * 4 cores and 32 GiB, or less where the smallest node shape has less per
 * GPU (s->cpu_per_gpu, s->mem_per_gpu).
 *
 * Determinism: a run depends only on the setup, the policy and the options;
 * its decision log is byte-identical for the same inputs. Not thread-safe:
 * one run at a time per setup is fine, setups share nothing.
 */
#ifndef ALLOT_SIM_REPLAY_H
#define ALLOT_SIM_REPLAY_H

#include "allot/catalog.h"
#include "allot/cluster.h"
#include "allot/queue.h"
#include "philly.h"
#include "tenants_yaml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define REPLAY_NODE_GPUS   8
#define REPLAY_NODE_CPU    64000  /* milli-cores */
#define REPLAY_NODE_MEM    524288 /* MiB */
#define REPLAY_CPU_PER_GPU 4000   /* milli-cores */
#define REPLAY_MEM_PER_GPU 32768  /* MiB */
#define REPLAY_NODE_MODEL  "V100-32GB"
#define REPLAY_SAMPLE_S    600  /* contention samples (Jain, queue length) */
#define REPLAY_BIN_S       3600 /* plot resolution */
#define REPLAY_HOLD_WAITS  64   /* --drain: looks one hold half-life later on an idle cluster */
#define REPLAY_MAX_NODES   1000000
#define REPLAY_MAX_DAYS    3660 /* longest window: hourly bins and samples stay small */

#define REPLAY_MAX_GROUPS   64      /* node groups of one setup */
#define REPLAY_MAX_JOB_GPUS 1000000 /* a trace job asking for more is left out (too_big) */

/* Nodes of one shape. */
struct replay_node_group {
    char model[ALLOT_MODEL_NAME_MAX]; /* catalog name (canonical) */
    int model_idx;                    /* catalog index */
    int gpus;                         /* per node, 1..ALLOT_MAX_GPUS */
    int64_t cpu_milli;                /* per node */
    int64_t mem_mib;                  /* per node */
    int count;                        /* nodes */
};

/* The policies of the experiment (see replay_policy_names and docs). */
enum replay_policy {
    REPLAY_STATIC = 0, /* quotas, no borrowing, no preemption, FIFO: Philly's practice */
    REPLAY_FIFO,       /* one shared FIFO, no quotas */
    REPLAY_LAS,        /* least attained service first, no quotas */
    REPLAY_SJF_ORACLE, /* shortest job first knowing every true duration, no quotas */
    REPLAY_ALLOT,      /* quotas, borrowing, reclaim, backfill, fair share */
    REPLAY_POLICIES
};

/* "static", "fifo", "las", "sjf-oracle", "allot". */
extern const char *const replay_policy_names[REPLAY_POLICIES];

/* Index of a policy name or -1. */
int replay_policy_find(const char *name);

/* One job to replay. */
struct replay_job {
    int64_t submit;   /* epoch seconds */
    int64_t duration; /* seconds of work, >= 1 */
    int tenant;       /* index into the setup's tenants */
    int n_tasks;      /* gang size */
    int gpus;         /* GPUs per task, 1..8 */
    int prio_class;   /* index into the setup's priority classes, -1 = default */
    uint32_t line;    /* line in the trace, 0 for synthetic jobs */
};

/* One tenant (a leaf: jobs run in it). */
struct replay_tenant {
    char *path;            /* owned */
    int64_t nominal_milli; /* GPU nominal quota, after scaling */
    int nodes;             /* nodes it brings to the cluster (VC setups), after scaling */
    int conf;              /* index into the setup's conf.v, -1 for VC setups */
};

/* Everything the runs share. Zero-initialise; free with replay_setup_free(). */
struct replay_setup {
    struct allot_catalog *cat;      /* owned */
    int model;                      /* catalog index of the one GPU model; -1 when several */
    int n_nodes;                    /* cluster size, after scaling */
    struct replay_node_group shape; /* nodes sized from the tenants: their shape
                                       (REPLAY_NODE_* unless given); count unused */
    int n_groups;                   /* 0: n_nodes nodes of `shape`; else these groups */
    struct replay_node_group groups[REPLAY_MAX_GROUPS]; /* counts add up to n_nodes */
    int node_gpus;       /* most GPUs of a node: the gang task size */
    int64_t cpu_per_gpu; /* milli-cores a job's GPU comes with */
    int64_t mem_per_gpu; /* MiB a job's GPU comes with */
    int n_tenants;
    struct replay_tenant *tenants; /* owned, n_tenants */
    bool has_conf;
    struct sim_tenants_conf conf; /* owned when has_conf: quotas, classes */
    double quota_scale;           /* conf setups: factor applied to finite quotas */
    size_t n_jobs;
    struct replay_job *jobs; /* owned, sorted by submit (stable) */
    int64_t from, to;        /* the window [from, to), epoch seconds */
    int64_t to_asked;        /* the `to` asked for when it lay past the trace's end
                                and `to` was clamped to that end; else -1 */
    /* what the setup read and left out */
    size_t read_jobs;     /* rows read */
    size_t other_vc;      /* jobs of VCs that are not tenants */
    size_t zero;          /* jobs with 0 GPUs or 0 duration */
    size_t outside;       /* jobs outside the window */
    size_t rounded_up;    /* jobs whose GPUs were rounded up to whole node_gpus tasks */
    size_t too_big;       /* trace setups: jobs asking for more GPUs than the cluster has */
    double offered_gpu_s; /* GPU-seconds asked for by the jobs in the window */
    double load;          /* offered_gpu_s over (GPUs x window) */
    char source[256];     /* what the jobs are, for reports */
};

/*
 * Builds a setup from the Philly job digest at `jobs_path` and either the
 * VC list at `vcs_path` or the tenants file at `tenants_path` (exactly one
 * non-NULL). The window is [from, to) (-1: from the first arrival / to one
 * second past the last). A `to` past the trace's end (the last arrival
 * plus the sum of the run times of the jobs in the window: all are done by
 * then even one after the other) is clamped to that end and kept in
 * s->to_asked; a window longer than REPLAY_MAX_DAYS is an error.
 * `load` > 0 rescales the cluster (VC node counts,
 * or a tenants file's node count and finite quotas) so that the offered
 * GPU-time in the window is `load` x capacity; 0 keeps the sizes. Returns
 * 0, ALLOT_EIO / ALLOT_EINVAL / ALLOT_ENOMEM with a message in err.
 */
int replay_setup_philly(struct replay_setup *s, const char *jobs_path, const char *vcs_path,
                        const char *tenants_path, int64_t from, int64_t to, double load, char *err,
                        size_t errlen);

/*
 * Builds a setup from the synthetic generator (mtgen.h): `days` days from
 * `start` (epoch seconds, -1: 2024-01-01, a Monday) for the tenants of the
 * VC list or tenants file (exactly one non-NULL), offering `load` (> 0) x
 * the tenants' GPUs, drawn with `seed`. Returns as replay_setup_philly().
 */
int replay_setup_synthetic(struct replay_setup *s, const char *vcs_path, const char *tenants_path,
                           int days, int64_t start, double load, uint64_t seed, char *err,
                           size_t errlen);

/* The same two on nodes of `shape` (IN, borrowed; NULL: the default
 * 8 x V100-32GB, 64 cores, 512 GiB) instead of the default shape: VC
 * nominals are nodes x its GPUs, a tenants file's nominals are packed into
 * nodes of it, and jobs are cut into tasks of at most its GPUs. */
int replay_setup_philly_shape(struct replay_setup *s, const struct replay_node_group *shape,
                              const char *jobs_path, const char *vcs_path, const char *tenants_path,
                              int64_t from, int64_t to, double load, char *err, size_t errlen);
int replay_setup_synthetic_shape(struct replay_setup *s, const struct replay_node_group *shape,
                                 const char *vcs_path, const char *tenants_path, int days,
                                 int64_t start, double load, uint64_t seed, char *err,
                                 size_t errlen);

/* One job of a trace read by a front end (Slurm's accounting in slurm.c,
 * allot plan's recorded history). */
struct replay_trace_job {
    int64_t submit;   /* epoch seconds */
    int64_t duration; /* seconds; 0 is counted and left out */
    int tenant;       /* index into the trace's tenants */
    int64_t gpus;     /* the whole job's GPUs; 0 is counted and left out */
    int task_gpus;    /* GPUs per task when known (a gang of gpus / task_gpus tasks);
                         0, or one that does not divide gpus or fit a node: cut into
                         tasks of the largest node's GPUs */
    int prio;         /* index into the trace's priority class names, -1 = none */
    uint32_t line;    /* where it came from (file line), 0 = none */
};

/* A trace. Zero-initialise; free with replay_trace_free(). */
struct replay_trace {
    size_t n, cap;
    struct replay_trace_job *v; /* owned */
    int n_tenants;
    char **tenants; /* owned: names as the source spells them */
    int n_prio;
    char **prio; /* owned: priority class names */
    char source[256];
};

/* Index of tenant (or priority class when `prio`) `name` in the trace,
 * added when new. Returns the index or ALLOT_ENOMEM. */
int replay_trace_intern(struct replay_trace *t, bool prio, const char *name);

/* Appends a job (copied). Returns 0 or ALLOT_ENOMEM. */
int replay_trace_add(struct replay_trace *t, const struct replay_trace_job *j);

/* Frees what the trace owns; accepts NULL. */
void replay_trace_free(struct replay_trace *t);

/* A tenant's GPU nominal quota set by the caller (allot plan --quota). */
struct replay_quota_change {
    const char *tenant; /* borrowed: a leaf path, or its last element */
    int64_t gpu_milli;  /* new nominal */
};

/* How replay_setup_trace() builds its tenants and cluster. */
struct replay_trace_opts {
    const char *tenants_path; /* tenants file, or NULL */
    const char *tenants_buf;  /* or a tenants document in memory (borrowed), or NULL */
    size_t tenants_len;
    const char *tenants_name; /* its name in messages */
    bool equal_shares;        /* no tenants given: equal nominals instead of usage shares */
    const struct replay_node_group *groups; /* explicit nodes (borrowed), or NULL */
    int n_groups;
    const struct replay_node_group *shape;   /* shape of nodes sized from the tenants, or NULL */
    const struct replay_quota_change *quota; /* borrowed, n_quota */
    int n_quota;
    int64_t from, to; /* the window; -1 as in replay_setup_philly() */
    double load;      /* > 0: rescale as replay_setup_philly() (no explicit groups) */
};

/*
 * Builds a setup from a trace (IN, borrowed). Tenants: the tenants file or
 * document of `o`, jobs going to the leaf named like their tenant (or the
 * only leaf with that last element); with neither, one leaf per trace
 * tenant whose GPU nominal is its share of the cluster: in proportion to
 * the GPU-time its jobs in the window ask for (or equal with
 * o->equal_shares); without explicit nodes the cluster is then sized to
 * the mean demand (load 1) before any --load. Priority classes are matched
 * by name. The cluster: o->groups when given (a tenant without a finite
 * GPU nominal then counts 0 in the figures), else nodes of o->shape (or the
 * default) sized from the nominal quotas. Returns as replay_setup_philly().
 */
int replay_setup_trace(struct replay_setup *s, const struct replay_trace *tr,
                       const struct replay_trace_opts *o, char *err, size_t errlen);

/*
 * Parses a node group "[COUNTx]MODEL[:GPUS[:CORES[:MEM]]]" (MODEL a
 * catalog name or alias; GPUS per node, default 8; CORES per node, default
 * 8 per GPU; MEM per node in GiB or with a Mi/Gi/Ti suffix, default 64 GiB
 * per GPU; COUNT default 1) into *g with the catalog `cat`. Returns 0 or
 * ALLOT_EINVAL with a message in err.
 */
int replay_parse_group(const char *spec, const struct allot_catalog *cat,
                       struct replay_node_group *g, char *err, size_t errlen);

/* The setup's GPUs (all nodes). */
int64_t replay_setup_gpus(const struct replay_setup *s);

/* Describes the setup's nodes ("4 nodes x 8 V100-32GB" or
 * "2 x 8 H100-80GB + 4 x 4 A100-80GB") into buf; returns buf. */
const char *replay_setup_describe(const struct replay_setup *s, char *buf, size_t n);

/* Frees what the setup owns; accepts NULL and a zeroed setup. */
void replay_setup_free(struct replay_setup *s);

/* allot's fair-share cap in the replay (allot-sim replay --fair-cap's
 * default): allotd's, from the tuned table of include/allot/queue.h */
#define REPLAY_FAIR_CAP (ALLOT_TUNED_FAIR_CAP_PCT / 100.0)

/* Options of a run. */
struct replay_opts {
    int64_t checkpoint_s;  /* checkpoint every this much runtime; 0 = never */
    const char *placement; /* placement policy (sched.h); NULL = "bestfit" */
    uint64_t seed;         /* node tie-break order */
    bool check;            /* allot_queue_check_invariants after every event time */
    bool drain;            /* run past `to` until every job is done (or stuck) */
    double fair_cap;       /* REPLAY_ALLOT: opts.fair_cap (0: off; the command line's
                              default is REPLAY_FAIR_CAP) */
    bool no_lending_hold;  /* REPLAY_ALLOT without the lending hold: allotd's default */
    int64_t defrag_s;      /* REPLAY_ALLOT: opts.defrag_s (0: off) */
    int64_t defrag_loss_s; /* ... and opts.defrag_loss_s */
    /* REPLAY_ALLOT: these queue options (order, placement and seed too) in
     * place of the tuned table and the fields above: allot plan's, as
     * allotd runs (GET /v1/scheduler). NULL: the tuned table */
    const struct allot_queue_opts *queue;
    FILE *log; /* decision log, or NULL */
    /* called now and then with the share of the window replayed (0..1) */
    void (*progress)(void *ud, double done);
    void *progress_ud;
};

/* Figures of a group of jobs (all, or one tenant's). Times in seconds;
 * NaN where a figure has no jobs to stand on. */
struct replay_stats {
    size_t jobs;                                       /* replayed (arrived in the window) */
    size_t finished;                                   /* by the end of the run */
    size_t unfinished;                                 /* still pending or running at the end */
    double avg_jct, p50_jct, p95_jct, p99_jct;         /* finished jobs */
    double avg_queue, p50_queue, p95_queue, p99_queue; /* finished jobs */
    double utilization;       /* all: allocated GPU-time / capacity over the window;
                                 tenant: over its nominal GPU-time (> 1 when borrowing) */
    size_t in_quota_jobs;     /* jobs that fit their tenant's unused nominal at submit */
    double in_quota_wait_p99; /* their wait to first start (unstarted: to the end) */
    double jain;              /* all only: Jain of allocation / water-filled entitlement */
    double jain_nominal;      /* all only: Jain of allocation / min(nominal, demand) */
    double share_ratio;       /* tenant only: mean allocation / entitlement in contention */
    int64_t preemptions;
    double lost_gpu_hours;
    double gpu_hours; /* all only: allocated GPU-hours over the whole run (the drain included) */
    /* Why jobs waited, over the whole run: GPU-hours of waiting (a job's
     * GPUs x its time pending), and the shares of them that the tenant's
     * unused nominal GPUs could not hold (they wait to borrow, not for
     * the tenant's guarantee), that idle GPUs could have taken, and that
     * GPUs other tenants held beyond their nominal could have (each
     * moment counts at most the waiting GPUs; nodes and gang shapes are
     * not looked at, so the last two are upper bounds). all: the
     * tenants' sums. */
    double wait_gpu_hours;
    double wait_over_share, wait_idle_share, wait_lent_share;
};

/* What one run produced. Free with replay_result_free(). */
struct replay_result {
    int policy; /* enum replay_policy */
    struct replay_stats all;
    struct replay_stats *tenant; /* owned, setup's n_tenants entries */
    size_t n_bins;               /* hourly bins over the window */
    double *queue_len;           /* owned: mean pending jobs per bin */
    double *util;                /* owned: allocated GPU share per bin */
    size_t contention_samples;   /* samples with pending jobs */
    size_t cycles;               /* queue cycles run */
    size_t killed;               /* jobs the queue ended without finishing (should be 0) */
    int64_t end;                 /* the window's end, or with the drain when its last job
                                    ended, if later */
    double wall_s;               /* seconds the run took */
};

/*
 * Replays the setup's jobs under `policy` with options `o` into *out (OUT,
 * overwritten). Returns 0; ALLOT_EINTERNAL when the core misbehaves (an
 * invariant breach with --check, a decision out of turn, a job it cannot
 * take) with a message in err naming the time and job; ALLOT_ENOMEM;
 * ALLOT_EIO when the decision log cannot be written.
 */
int replay_run(const struct replay_setup *s, int policy, const struct replay_opts *o,
               struct replay_result *out, char *err, size_t errlen);

/* Frees what the result owns; accepts NULL. */
void replay_result_free(struct replay_result *r);

/* Writes the JSON report of `n` results (docs/replay.md) to `path`.
 * Returns 0 or ALLOT_EIO / ALLOT_ENOMEM with a message in err. */
int replay_write_json(const char *path, const struct replay_setup *s, const struct replay_result *r,
                      int n, char *err, size_t errlen);

/* Writes the queue-length plot to `path` and the utilisation plot to the
 * same name with "-util" before ".svg" (or appended). Returns 0 or an
 * error with a message in err. */
int replay_write_plots(const char *path, const struct replay_setup *s,
                       const struct replay_result *r, int n, char *err, size_t errlen);

/* Prints the per-policy table and, when static and/or allot ran, the
 * per-tenant table, to f. */
void replay_print_tables(FILE *f, const struct replay_setup *s, const struct replay_result *r,
                         int n);

/* The `allot-sim replay` command; returns the exit status (0, 1, 2). */
int sim_replay_main(int argc, char **argv);

#endif
