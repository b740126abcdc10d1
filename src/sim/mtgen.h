/*
 * Synthetic multi-tenant GPU workload for allot-sim: a deterministic (seeded)
 * generator of job arrivals of three kinds per tenant, each sized against
 * the tenant's GPUs:
 *
 *   inference  model-serving replicas of 1 GPU (a few of 2), arriving as a
 *              Poisson stream whose rate follows a daily cycle (peak at
 *              14:00, trough at 02:00, 4:1), each running 30 min..8 h;
 *   training   bursts (hyper-parameter sweeps, a few arrivals a day per
 *              tenant, more on weekdays) of 2..12 identical jobs of 1, 2,
 *              4, 8, 16 or 32 GPUs with heavy-tailed run times (log-normal,
 *              median 2 h, 5 min..5 days);
 *   notebooks  interactive 1-GPU sessions opened on weekdays between 08:00
 *              and 19:00 (rate peaking around 11:00 and 15:00), 15 min..6 h.
 *
 * The arrival rate of each (tenant, kind) stream is chosen so that its
 * expected GPU-time over the horizon is load x share(kind) x tenant GPUs x
 * horizon; the mean GPU-time of one job is estimated from a fixed pilot
 * sample so that rate and job shape use the same distributions. Every
 * (tenant, kind) stream draws from its own PRNG seeded from (seed, tenant,
 * kind), so adding a tenant does not change the others' jobs.
 *
 * Pure: no I/O, no clock. Times are seconds from `start` (an absolute epoch
 * time chosen by the caller; day boundaries and weekdays are taken from it
 * in UTC, 1970-01-01 being a Thursday).
 */
#ifndef ALLOT_SIM_MTGEN_H
#define ALLOT_SIM_MTGEN_H

#include <stddef.h>
#include <stdint.h>

enum mtgen_kind { MTGEN_INFERENCE = 0, MTGEN_TRAINING, MTGEN_NOTEBOOK, MTGEN_KINDS };

/* "inference", "training", "notebooks", indexed by enum mtgen_kind. */
extern const char *const mtgen_kind_names[MTGEN_KINDS];

/* One tenant as the generator sees it. */
struct mtgen_tenant {
    int64_t gpus;            /* GPUs its load is sized against (its nominal), >= 0 */
    double mix[MTGEN_KINDS]; /* shares of its load by kind, >= 0, summing to 1 */
};

struct mtgen_opts {
    int64_t start; /* epoch seconds of the first instant (UTC) */
    int days;      /* horizon, 1..3660 days */
    double load;   /* offered GPU-time over tenant GPU-time, 0..10 */
    uint64_t seed;
};

/* One generated job. */
struct mtgen_job {
    int64_t submit;   /* epoch seconds, in [start, start + days x 86400) */
    int64_t duration; /* seconds of work, >= 60 */
    int tenant;       /* index into the tenants given */
    int kind;         /* enum mtgen_kind */
    int gpus;         /* GPUs of the whole job, 1..32 */
};

/*
 * Generates the jobs of `n_tenants` tenants (IN, borrowed) under `o` into a
 * new array *out (OUT, owned by the caller, free with allot_free()) of *n
 * jobs (OUT), sorted by submit time, then tenant, then kind, then draw
 * order. Returns 0, ALLOT_EINVAL (bad options or tenant: days, load, a
 * negative share or one not summing to 1) or ALLOT_ENOMEM; *out is NULL and
 * *n 0 on failure.
 */
int mtgen_generate(const struct mtgen_tenant *t, int n_tenants, const struct mtgen_opts *o,
                   struct mtgen_job **out, size_t *n);

#endif
