/*
 * One job of the openb fill experiment: one placement policy and one seed.
 * A fresh cluster of the trace's nodes, the workload of the seed
 * (fill_workload.h) placed pod by pod for good, the decision logged, and
 * allocation and fragmentation filed by arrived % of capacity.
 *
 * A job depends only on the trace, the policy, the seed and tune; it reads
 * the trace and writes only its own result and log buffer, so jobs run in
 * worker processes give what they give in-process. Caller: fill.c.
 */
#ifndef ALLOT_SIM_FILL_RUN_H
#define ALLOT_SIM_FILL_RUN_H

#include "allot/sched.h"
#include "fill_text.h"
#include "fill_trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_FILL_BUCKETS 131 /* arrived % buckets 0..130 */
#define SIM_FILL_TRACKED 132 /* 0..131: 131 only feeds bucket 130's neighbour rule */

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

#endif
