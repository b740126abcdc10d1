/*
 * The multi-tenant job queue of liballot-core: jobs (gangs of identical
 * tasks) of tenants, with priority classes, QoS, quotas, fair share,
 * preemption and reclaim, gang reservations, EASY backfill, topology and
 * isolation, and a pending reason for every waiting job.
 *
 * Events in (submit, cancel, finish, time advanced: `now` is always passed
 * in), decisions out (start with placements, preempt, stop at limit) through
 * a callback. One scheduling cycle (allot_queue_cycle):
 *   1. stop running jobs past their runtime limit; end grace periods;
 *   2. order pending jobs: policy key (priority, fair share, age...);
 *   3. for each job: admit against quota; place all its tasks or none;
 *      otherwise try preemption (higher priority inside the tenant) or
 *      reclaim (a tenant below nominal takes back borrowed capacity);
 *   4. the first job of a tenant that cannot be placed gets a reservation:
 *      later jobs only backfill if their estimated end precedes it;
 *   5. every job left waiting gets a specific pending reason.
 * Ordering policies are ops structs (allot_queue_policies[]).
 *
 * Out of memory: every call returns ALLOT_ENOMEM with the queue, the
 * tenants and the cluster consistent; no job ever runs on GPUs the cluster
 * shows as free (tested by failing every allocation in turn).
 *
 * Guarantees (tested): a job is never preempted before its minimum
 * runtime, never for a job of equal or lower standing, never by a job it
 * preempted itself (so no two jobs preempt each other in a loop, even as
 * quotas shift), in-nominal work of another tenant is never preempted, and
 * a gang is placed whole or not at all.
 * Deterministic; single-threaded; no I/O.
 */
#ifndef ALLOT_QUEUE_H
#define ALLOT_QUEUE_H

#include "allot/cluster.h"
#include "allot/sched.h"
#include "allot/tenant.h"

#define ALLOT_PRIO_CLASSES 16
#define ALLOT_REASON_MAX   192

enum allot_qos { ALLOT_QOS_GUARANTEED = 0, ALLOT_QOS_BURSTABLE, ALLOT_QOS_BEST_EFFORT };

enum allot_job_state {
    ALLOT_JOB_PENDING = 0,
    ALLOT_JOB_RUNNING,
    ALLOT_JOB_STOPPING, /* grace period after a preemption signal */
    ALLOT_JOB_DONE,     /* finished, cancelled or stopped at its limit */
};

struct allot_prio_class {
    char name[32];
    int value; /* higher runs first and may preempt lower */
    bool preemptible;
};

struct allot_job_spec {
    const char *name;              /* copied */
    int tenant;                    /* leaf tenant index */
    int user;                      /* user id inside the tenant (fair share of users) */
    int prio_class;                /* index into the priority classes; -1 = default */
    int qos;                       /* enum allot_qos */
    int n_tasks;                   /* gang size >= 1 */
    int64_t est_runtime_s;         /* estimate for backfill; 0 = unknown */
    int64_t limit_s;               /* stopped at this runtime; 0 = none */
    int64_t min_runtime_s;         /* not preempted before; default from options */
    bool checkpointable;           /* gets a grace period and is requeued when preempted */
    bool once;                     /* runs at most once (allotd's "requeue": false): a
                                      preemption ends it (ALLOT_JOB_DONE) instead of queueing it
                                      again, and defragmentation never moves it */
    int64_t checkpoint_interval_s; /* saves its work this often (0: unknown); a
                                      preemption loses the work since the last save */
    int64_t seq;                   /* arrival order between jobs the order keys tie (submitted in
                                      the same second): lower first, then the core id (allotd: the
                                      stored job id; 0 for all: by core id alone, which a freed
                                      id's reuse does not keep in arrival order) */
    struct allot_task task;        /* every task of the gang is the same (last: the fields above,
                                      read for every job a cycle passes, share cache lines) */
};

/* Why a job waits (or ended), recorded cheaply every cycle and turned
 * into text only when asked (allot_queue_reason). */
enum allot_why_kind {
    ALLOT_WHY_NEW = 0,   /* not yet considered */
    ALLOT_WHY_RUNNING,   /* not waiting */
    ALLOT_WHY_QUOTA,     /* who, res: the tenant and resource that block */
    ALLOT_WHY_CAPACITY,  /* no room in the cluster */
    ALLOT_WHY_RECLAIM,   /* who: victims' tenant, res: enum allot_preempt_kind,
                            a: GPU milli, b: grace s */
    ALLOT_WHY_HELD,      /* other: reservation holder, a: s until its start or -1, b: its wait */
    ALLOT_WHY_PREEMPTED, /* other: the preemptor, res: enum allot_preempt_kind; requeued */
    ALLOT_WHY_GRACE_OVER,
    ALLOT_WHY_CANCELLED,
    ALLOT_WHY_FINISHED,
    ALLOT_WHY_LIMIT,    /* a: the runtime limit */
    ALLOT_WHY_EVICTED,  /* requeued: out of memory while putting it back after a
                           preemption trial (its GPUs could not stay held) */
    ALLOT_WHY_FAIR_CAP, /* who: its tenant, beyond its nominal and past opts.fair_cap
                           times its fair share of the GPUs */
};

/* Which rule let a job preempt another (docs/tenancy.md). */
enum allot_preempt_kind {
    ALLOT_PREEMPT_PRIORITY = 0, /* higher priority in the same tenant */
    ALLOT_PREEMPT_LAS,          /* two-queue LAS: the victim has had more GPU service */
    ALLOT_PREEMPT_RECLAIM,      /* the victim ran on borrowed capacity */
    ALLOT_PREEMPT_BACKFILL,     /* the victim started past the preemptor's reservation */
    ALLOT_PREEMPT_FAIR,         /* fair-share reclaim (opts.fair_reclaim_s) */
    ALLOT_PREEMPT_MOVE,         /* moved elsewhere at its checkpoint (opts.defrag_s) */
};

struct allot_why {
    int kind;
    int who, res, other;
    int64_t a, b;
};

struct allot_job {
    char *name; /* owned */
    struct allot_job_spec spec;
    int id;
    int state;
    int64_t submit; /* time of (re)queueing */
    int64_t first_submit;
    int64_t start;      /* of the current run */
    int64_t saved_at;   /* running: where the work a preemption loses begins: its
                           start, or the last save it reported in this run
                           (allot_queue_checkpointed) */
    int64_t stop_at;    /* STOPPING: when the grace period ends */
    int64_t run_from;   /* running: when its runtime limit began to count (its start,
                           or with opts.limit_from_running when the caller said it
                           runs, allot_queue_running; INT64_MAX: not yet) */
    int64_t attained_s; /* GPU-seconds of service received (all runs) */
    int64_t runs;       /* times started */
    int64_t preemptions;
    bool borrowed;     /* running above its tenant's nominal */
    bool never;        /* PENDING: more than its tenants may ever hold (not in the fair
                          shares' demand) */
    int preempted_for; /* STOPPING: the job it makes room for, else -1 */
    int backfill_for;  /* running: started past this pending job's reservation
                          (preemptible backfill, its victim), else -1 */
    int backfilled;    /* running jobs whose backfill_for is this job */
    int preemptors[4]; /* the last jobs that preempted this one (never its victims) */
    int n_preemptors;
    int stopping_victims;          /* jobs in their grace period to make room for this one */
    int gone_victims;              /* ... of them, those whose processes are gone */
    bool moving;                   /* STOPPING: moved by defragmentation (opts.defrag_s);
                                      considered right after its preemptor once stopped */
    bool gone;                     /* STOPPING: its processes are gone (allot_queue_stopped)
                                      while others of its preemption still run */
    uint64_t preempt_epoch;        /* leave epoch + 1 of the last fruitless victim search */
    uint64_t preempt_starts;       /* ... the queue's start count then */
    uint64_t preempt_pinned;       /* ... and its pinned epoch then */
    bool pinned_bor;               /* running, borrowed, its class not preemptible: counted in
                                      its tenant's ten_count.pinned_bor */
    int64_t preempt_recheck_at;    /* ... and when a running job next becomes eligible */
    int64_t preempt_searched_at;   /* ... and when it ran */
    int ten_next, ten_prev;        /* the queue's index of running jobs by tenant */
    int bor_next, bor_prev;        /* ... and of running borrowed jobs */
    struct allot_resvec req;       /* what the whole gang uses */
    struct allot_placement *pl;    /* owned, n_tasks entries while running */
    struct allot_why why;          /* the current reason, structured */
    struct allot_why reclaim_why;  /* the reason of its last victim search that took victims
                                      with a grace period: shown while they stop */
    char reason[ALLOT_REASON_MAX]; /* its text, filled by allot_queue_reason() */
};

/* Decisions out of a cycle. */
enum allot_decision_kind {
    ALLOT_DEC_START,   /* job starts with job->pl */
    ALLOT_DEC_PREEMPT, /* job is signalled; stops after grace (or now) */
    ALLOT_DEC_STOP,    /* job stopped (limit reached, grace over) */
};

typedef void (*allot_decision_fn)(int kind, const struct allot_job *job, const char *why, void *ud);

struct allot_queue;

/* Options of a queue. */
/* With opts.limit_from_running: how long a job's start may take before
 * its runtime limit counts anyway (seconds). */
#define ALLOT_LIMIT_START_ALLOWANCE_S 600

struct allot_queue_opts {
    const char *order;           /* ordering policy name (allot_queue_policy_find) */
    const char *placement;       /* placement policy name (allot_sched_policy_find) */
    bool quotas;                 /* enforce tenant quotas */
    bool borrowing;              /* tenants may borrow above nominal */
    bool preemption;             /* priority preemption and reclaim */
    bool backfill;               /* EASY backfill behind reservations */
    int64_t grace_s;             /* checkpointable jobs: signal, then stop */
    int64_t min_runtime_s;       /* default minimum runtime before preemption */
    int64_t aging_s;             /* a job waiting this long jumps ahead of fair share
                                    and, if a large gang, gets a reservation */
    int large_gang_gpus;         /* gangs of at least this many GPUs may reserve */
    int64_t fair_reclaim_s;      /* > 0 (with quotas): fair-share reclaim. A job whose tenant,
                                    with it, stays within its fair share of the GPUs (the
                                    cluster water-filled down the tenant tree in proportion to
                                    nominal quotas among the tenants with demand) may
                                    preempt another tenant's borrowed job that loses at
                                    most this many seconds of work, if that tenant keeps at
                                    least its own fair share */
    double fair_cap;             /* >= 1 (with quotas): fair-share cap. A job that would take
                                    its tenant beyond its nominal GPUs and past this many
                                    times its fair share (as for fair_reclaim_s) waits while
                                    other tenants' work waits; 0 = off */
    bool reserve_gangs;          /* with backfill: a large gang that finds no room reserves
                                    at once, not only once aged (with fair order, the gang
                                    of the tenant whose turn it is) */
    double half_life_s;          /* fair-share history half-life */
    double hold_half_life_s;     /* lending hold (allot_tenants_set_hold); 0 = off */
    int64_t las_threshold_gpu_s; /* > 0: preemptive two-queue LAS (Tiresias): a job that
                                    has received less GPU-time than this may preempt
                                    jobs that have received more */
    int preempt_searches;        /* victim searches per cycle (0: 256); jobs past it search
                                    at the next cycle, so a cycle stays bounded. Reclaim for
                                    jobs inside their nominal has 8 times this budget of its
                                    own (the in-quota guarantee) */
    int cycle_work;              /* starts plus victim searches one cycle makes at most (0:
                                    ALLOT_QUEUE_CYCLE_WORK; stops, order rebuilds and every
                                    512 waiting jobs looked at one by one count too); a
                                    cycle that reaches it stops,
                                    and allot_queue_more says so: the next cycle continues
                                    the round with what is left of its search budgets. Keeps
                                    every cycle short when many decisions come due at once */
    int64_t defrag_s;            /* > 0: defragmentation at most this often. A pending job
                                    that quota admits but no node has room for may have
                                    running checkpointable jobs of one task of whole GPUs
                                    (smaller than its tasks, past their minimum runtime,
                                    losing at most defrag_loss_s of work) moved elsewhere,
                                    when every one of them fits elsewhere at once; 0 = off */
    int64_t defrag_loss_s;       /* most seconds of work a moved job may lose (it
                                    checkpointed lately); 0 = nothing: only jobs at a
                                    checkpoint */
    uint64_t seed;
    /* Reference mode, for tests: every cycle orders all pending jobs and
     * considers each in full, with none of the work the queue otherwise
     * skips when it already knows a job cannot start (queue_fast.c). The
     * decisions and pending reasons are the same either way. */
    bool exhaustive;
    /* A runtime limit counts from when the caller says the job's processes
     * run (allot_queue_running), not from its placement: a job whose
     * start waits for its node (a victim's grace, an image to fetch) does
     * not spend its limit waiting. One never said to run counts from its
     * placement plus ALLOT_LIMIT_START_ALLOWANCE_S, so that a start that
     * hangs does not hold its GPUs for good. allotd sets it; off, from
     * placement. */
    bool limit_from_running;
};

/*
 * The queue configuration allot is measured with, in one table: allotd's
 * defaults (its options of the same meaning) and allot-sim replay's
 * `allot` policy both come from here, so that the figures of
 * docs/benchmarks.md ("Philly multi-tenant replay") are what the daemon
 * does unless an operator changes it; the one exception is the lending
 * hold (below), measured both ways there. "tuned": chosen on Philly
 * 2017-10-01..12-01 at load 0.8 (in sample); "0.95": chosen on that window
 * and 2017-09-01..11-01 at loads 0.8 and 0.95 (so in sample there too); the
 * held-out window 2017-11-01..2018-01-01 was used for none. The others are design
 * choices that were not swept.
 *
 * | constant        | value  | tuned | meaning                                          |
 * |-----------------|--------|-------|--------------------------------------------------|
 * | GRACE_S         | 30     | no    | SIGTERM to SIGKILL for a preempted job           |
 * | MIN_RUNTIME_S   | 600    | tuned | a job runs this long before it may be preempted  |
 * | HALF_LIFE_S     | 86400  | no    | half-life of a tenant's fair-share history       |
 * | HOLD_S          | 7200   | tuned | lending hold: half-life of a tenant's recent     |
 * |                 |        |       | peak that is not lent out. allotd's default is   |
 * |                 |        |       | 0 (off): the hold is not work-conserving         |
 * | LAS_GPU_S       | 28800  | tuned | two-queue LAS inside a tenant: less GPU service  |
 * |                 |        |       | than this goes first and may preempt             |
 * | LARGE_GANG_GPUS | 16     | tuned | gangs of at least this many GPUs may reserve     |
 * | RESERVE_GANGS   | true   | tuned | large gangs reserve at once, not only once aged  |
 * | FAIR_RECLAIM_S  | 300    | tuned | fair-share reclaim of work that checkpointed in  |
 * |                 |        |       | the last this many seconds                       |
 * | FAIR_CAP_PCT    | 150    | 0.95  | fair-share cap, percent of the fair share        |
 * | DEFRAG_S        | 300    | 0.95  | defragmentation pass at most this often          |
 * | DEFRAG_LOSS_S   | 300    | 0.95  | a moved job loses at most this much work         |
 */
#define ALLOT_TUNED_GRACE_S         30
#define ALLOT_TUNED_MIN_RUNTIME_S   600
#define ALLOT_TUNED_HALF_LIFE_S     86400
#define ALLOT_TUNED_HOLD_S          7200
#define ALLOT_TUNED_LAS_GPU_S       28800
#define ALLOT_TUNED_LARGE_GANG_GPUS 16
#define ALLOT_TUNED_RESERVE_GANGS   true
#define ALLOT_TUNED_FAIR_RECLAIM_S  300
#define ALLOT_TUNED_FAIR_CAP_PCT    150
#define ALLOT_TUNED_DEFRAG_S        300
#define ALLOT_TUNED_DEFRAG_LOSS_S   300

/* Fills o with the table above: fair order, allot placement, quotas with
 * borrowing, preemption, backfill with reservations for large gangs at
 * once, defragmentation, and the tuned values; the rest zero. */
void allot_queue_opts_tuned(struct allot_queue_opts *o);

/* The scheduling options of o that allotd shows (GET /v1/scheduler) as a
 * JSON object: "order", "placement", "reserve_gangs" and, as whole numbers,
 * "preempt_grace_s", "preempt_min_runtime_s", "fair_reclaim_s",
 * "fair_cap_percent", "large_gang_gpus", "aging_s", "las_threshold_gpu_s",
 * "lending_hold_s", "defrag_s", "defrag_loss_s". NULL when out of memory. */
struct json_t *allot_queue_opts_json(const struct allot_queue_opts *o);

/* Reads such an object into o (its other fields kept; strings borrowed
 * from j). "defrag_s" and "defrag_loss_s" may be missing (a server from
 * before defragmentation: 0, off). Returns 0, or ALLOT_EINVAL naming the
 * first field missing or of the wrong type (o unchanged). */
int allot_queue_opts_from_json(struct allot_queue_opts *o, const struct json_t *j, char *err,
                               size_t errlen);

/* Ordering policies: a key per pending job (lower goes first). */
#define ALLOT_QUEUE_KEY_LEN 4
struct allot_queue_policy_ops {
    const char *name;
    const char *summary;
    /* Tenants take turns by fair share (lowest key first), each offering
     * its best job by key; otherwise one global order by key. */
    bool per_tenant;
    /* The key reads the GPUs each user of a tenant holds (rebuilt every cycle). */
    bool user_share;
    /* Fills key[0..ALLOT_QUEUE_KEY_LEN) (compared in order) for job j at now. */
    void (*key)(const struct allot_queue *q, const struct allot_job *j, int64_t now,
                double key[ALLOT_QUEUE_KEY_LEN]);
};

extern const struct allot_queue_policy_ops *const allot_queue_policies[];
const struct allot_queue_policy_ops *allot_queue_policy_find(const char *name);

/* Creates a queue over cluster c and tenants t (both borrowed; the queue is
 * their only writer, and writes the cluster only through its own placement
 * scheduler). c holds no tasks yet. Returns NULL on allocation failure or
 * unknown policy names (message in err). */
struct allot_queue *allot_queue_new(struct allot_cluster *c, struct allot_tenants *t,
                                    const struct allot_queue_opts *opts, char *err, size_t errlen);
void allot_queue_free(struct allot_queue *q);

/* Registers a priority class; returns its index or an error. */
int allot_queue_add_prio_class(struct allot_queue *q, const char *name, int value,
                               bool preemptible);

/* Overwrites priority class `idx` (from allot_queue_add_prio_class) with a
 * new name, value and preemptibility; the queued and running jobs of that
 * class see the new ones from the next cycle on. Returns 0, ALLOT_EINVAL
 * (bad index or name) or ALLOT_EEXIST (another class has that name). */
int allot_queue_set_prio_class(struct allot_queue *q, int idx, const char *name, int value,
                               bool preemptible);

/* Puts job id (pending, running or stopping) in priority class cls (-1:
 * the default), as the user changed it: from the next cycle on it waits,
 * runs and may be preempted as a job of that class (a running borrowed job
 * that becomes preemptible is reclaimed as such; backfill stays backfill).
 * Returns 0, ALLOT_ENOENT or ALLOT_EINVAL (unknown class). */
int allot_queue_set_job_class(struct allot_queue *q, int id, int cls);

/* Gives job id (pending, running or stopping) the runtime limit limit_s
 * (0: none), as a user or an admin changed it (scontrol update TimeLimit):
 * a running job whose new limit has passed ends at the next cycle, as at
 * any limit. Returns 0, ALLOT_ENOENT, ALLOT_EINVAL (limit_s < 0) or
 * ALLOT_ESTATE (it ended). */
int allot_queue_set_limit(struct allot_queue *q, int id, int64_t limit_s);

/* Submits a job at time now; returns its id (>= 0) or ALLOT_EINVAL with a
 * message naming the field (unknown tenant, gang of 0, bad task shape). */
int allot_queue_submit(struct allot_queue *q, const struct allot_job_spec *spec, int64_t now,
                       char *err, size_t errlen);

/* Cancels a pending or running job. Returns 0, ALLOT_ENOENT, ALLOT_ESTATE
 * or ALLOT_ENOMEM (nothing changed). */
int allot_queue_cancel(struct allot_queue *q, int id, int64_t now);

/* A running job finished on its own at `now`. Returns 0, ALLOT_ENOENT,
 * ALLOT_ESTATE or ALLOT_ENOMEM (nothing changed). When the cluster cannot
 * release a task for lack of memory the job still ends; the task's GPUs
 * stay looking used until a later event releases them. */
int allot_queue_finish(struct allot_queue *q, int id, int64_t now);

/* Runs one scheduling cycle at time now; decisions go to fn. It makes at
 * most opts.cycle_work starts and victim searches (see allot_queue_more).
 * Returns 0 or
 * ALLOT_ENOMEM: the cycle stopped early, the decisions already emitted
 * stand and the queue is consistent (a victim that could not be put back
 * after a preemption trial was stopped and requeued, ALLOT_WHY_EVICTED);
 * the next cycle carries on. */
int allot_queue_cycle(struct allot_queue *q, int64_t now, allot_decision_fn fn, void *ud);

/* Running (or stopping) checkpointable job id saved its work at `at`
 * (its start <= at <= now): a preemption from then on loses only the work
 * since `at`, and with spec.checkpoint_interval_s its saves are counted on
 * from `at` (victim costs, fair-share reclaim, defragmentation). A report
 * older than the last one changes nothing. Returns 0, ALLOT_ENOENT,
 * ALLOT_ESTATE (not running) or ALLOT_EINVAL (not checkpointable, or `at`
 * outside its run). */
int allot_queue_checkpointed(struct allot_queue *q, int id, int64_t at, int64_t now);

/* Earliest future time the queue wants a cycle for its own sake (a grace
 * period or limit ending, a reservation); INT64_MAX when none. */
int64_t allot_queue_next_wakeup(const struct allot_queue *q);

/* Default of opts.cycle_work: about 3 ms of decisions on the 10,000-node
 * bench-cycle (docs/benchmarks.md). */
#define ALLOT_QUEUE_CYCLE_WORK 16

/* Whether the last cycle stopped at its work budget (opts.cycle_work) with
 * jobs it did not consider: call allot_queue_cycle again soon (the
 * simulator at the same time, the daemon after serving its requests).
 * The next cycle continues the round: it does not reset the victim-search
 * budgets. allot_queue_next_wakeup is then the time of that cycle. */
bool allot_queue_more(const struct allot_queue *q);

/* The pending reason (or end) of job id as text, e.g. "tenant ml/vision at
 * nominal (8/8 GPU), borrowing limit reached". The string lives in the job
 * and is valid until the next call for it; "" for an unknown id. */
const char *allot_queue_reason(struct allot_queue *q, int id);

/* Takes a job that already runs (a daemon restarting, an agent reporting
 * work it kept running): submits it and starts it at once at placements
 * pl[0..n_tasks) (node, gpu_mask, gpu_milli, gpu_mem_mib, mig_profile,
 * mig_start are read; the rest comes from the spec), started at `start`
 * (<= now). Its quota is charged even above nominal (it runs already); no
 * decision is emitted. Returns the job id, or ALLOT_EINVAL (message in
 * err) when a task no longer fits where it runs, or ALLOT_ENOMEM; nothing
 * changes on error. */
int allot_queue_adopt(struct allot_queue *q, const struct allot_job_spec *spec,
                      const struct allot_placement *pl, int64_t start, int64_t now, char *err,
                      size_t errlen);

/* Says that running job id's processes run since `at` (unix seconds, not
 * before its start): its runtime limit counts from then (see
 * opts.limit_from_running). A later call moves it only later. Returns 0,
 * ALLOT_ENOENT, or ALLOT_ESTATE when the job is not running. */
int allot_queue_running(struct allot_queue *q, int id, int64_t at);

/* Counts again which running jobs of the tenants t with only[t] (every
 * tenant when only is NULL) are borrowed, after their quotas changed: in
 * the order they started, each is borrowed when its tenant (with the jobs
 * counted before it) holds its nominal already; jobs in their grace period
 * keep theirs. A job's flag is otherwise set when it starts and kept for
 * its run. Every victim search looks again afterwards (the nominals moved).
 * Returns how many flags changed, or ALLOT_ENOMEM (nothing changed). */
int allot_queue_recount_borrowed(struct allot_queue *q, const bool *only);

/* Says that preempted job id's processes are gone before its grace period
 * ended (they exited on the stop signal): the grace period ends at now,
 * and the next cycle gives its room to the job it was stopped for; while
 * other victims of the same preemption still run, it ends when the last
 * of them is gone (or at the grace period's end), for all of them at once,
 * so that their room goes to that job whole. Returns 0, ALLOT_ENOENT, or
 * ALLOT_ESTATE when the job is not in its grace period. */
int allot_queue_stopped(struct allot_queue *q, int id, int64_t now);

/* Forgets ended job id (state ALLOT_JOB_DONE) so that its slot and id are
 * reused by a later submission: a long-running caller (allotd) that has
 * stored the job's end calls it, and the queue's memory then follows the
 * live jobs, not every job ever submitted. Returns 0, ALLOT_ENOENT,
 * ALLOT_ESTATE (not ended) or ALLOT_ENOMEM (nothing changed). */
int allot_queue_forget(struct allot_queue *q, int id);

/* Number of job slots (ids are below it; forgotten slots included). */
int allot_queue_job_count(const struct allot_queue *q);
/* Job id, or NULL for an unknown or forgotten id. */
const struct allot_job *allot_queue_job(const struct allot_queue *q, int id);
struct allot_tenants *allot_queue_tenants(const struct allot_queue *q);
struct allot_cluster *allot_queue_cluster(const struct allot_queue *q);

/* The cluster's capacity in resource res (enum allot_res: GPU in
 * milli-GPU, CPU in milli-CPU, memory in MiB, ...) as the last cycle
 * counted it: what fair shares are measured against. */
int64_t allot_queue_capacity(const struct allot_queue *q, int res);

/* Checks cluster and queue invariants: every running job placed and
 * charged, what the cluster holds on every node and GPU equal to the
 * running jobs' placements (plus placements whose release is still
 * pending after an allocation failure), usage equal to the sum of running
 * jobs, no tenant over its borrow limit. Returns 0, ALLOT_EINTERNAL with
 * a message, or ALLOT_ENOMEM. */
int allot_queue_check_invariants(const struct allot_queue *q, char *err, size_t errlen);

#endif
