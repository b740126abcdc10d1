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
 * Jobs: a job of g GPUs is a gang of ceil(g / 8) tasks of min(g, 8) GPUs
 * each (the queue places gangs of identical tasks, so 12 GPUs become two
 * tasks of 8); each GPU comes with 4 cores and 32 GiB. Nodes are 8 x
 * V100-32GB, 64 cores, 512 GiB.
 *
 * Determinism: a run depends only on the setup, the policy and the options;
 * its decision log is byte-identical for the same inputs. Not thread-safe:
 * one run at a time per setup is fine, setups share nothing.
 */
#ifndef ALLOT_SIM_REPLAY_H
#define ALLOT_SIM_REPLAY_H

#include "allot/catalog.h"
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
#define REPLAY_MAX_NODES   1000000
#define REPLAY_MAX_DAYS    3660 /* longest window: hourly bins and samples stay small */

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
    struct allot_catalog *cat; /* owned */
    int model;                 /* catalog index of REPLAY_NODE_MODEL */
    int n_nodes;               /* cluster size, after scaling */
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
    size_t rounded_up;    /* jobs whose GPUs were rounded up to whole 8-GPU tasks */
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

/* Frees what the setup owns; accepts NULL and a zeroed setup. */
void replay_setup_free(struct replay_setup *s);

/* Options of a run. */
struct replay_opts {
    int64_t checkpoint_s;  /* checkpoint every this much runtime; 0 = never */
    const char *placement; /* placement policy (sched.h); NULL = "bestfit" */
    uint64_t seed;         /* node tie-break order */
    bool check;            /* allot_queue_check_invariants after every event time */
    bool drain;            /* run past `to` until every job is done (or stuck) */
    FILE *log;             /* decision log, or NULL */
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
