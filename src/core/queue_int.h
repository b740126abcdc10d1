/*
 * Internal header of the job queue (src/core/queue*.c), not installed:
 * the queue's state and the steps its files share. queue.c owns the
 * lifecycle, jobs starting and leaving, reasons and the cycle's steps;
 * queue_gang.c placing a gang (one node or one rack when it can);
 * queue_serve.c the ordering policies and the order in which a
 * cycle considers pending jobs; queue_preempt.c preemption and reclaim
 * (the victim search); queue_reserve.c the EASY reservations and their
 * backfill; queue_check.c the invariants. See queue.c for the
 * state's invariants.
 */
#ifndef ALLOT_QUEUE_INT_H
#define ALLOT_QUEUE_INT_H

#include "allot/queue.h"

#include <string.h>

/* The EASY reservation of one cycle (at most one holder). */
/* A tenant's standing in fair-share reclaim this round (milli-GPU). */
struct fair_ten {
    int64_t share;  /* its fair share of the GPUs, -1 none */
    int64_t failed; /* GPUs of its last fruitless fair-share search this cycle, 0 none */
};

/* A tenant's GPUs (milli) by its jobs' states, kept current as jobs change
 * state (the fair shares read them every cycle, without a scan). */
struct ten_count {
    int64_t pending;    /* its pending jobs */
    int64_t never;      /* those of them more than its tenants may ever hold (job.never) */
    int64_t waiting;    /* those of them waiting for victims to stop */
    int64_t stopping;   /* its jobs stopping (grace period) */
    size_t running;     /* its running and stopping jobs (the ten_head list): a count */
    int64_t pinned_bor; /* its running borrowed jobs whose class is not preemptible */
};

struct reservation {
    int holder;     /* job id, -1 when none */
    int64_t shadow; /* expected start of the holder */
    int64_t extra;  /* GPU milli free beyond the holder's need at shadow */
};

/* Where a cycle cut short at its work budget stopped (allot_queue_cycle):
 * the next cycle resumes there when nothing changed in between, so that
 * the round decides exactly as one uncut cycle would. */
enum { CYCLE_STOPS, CYCLE_FIRST, CYCLE_SERVE };
struct cycle_pause {
    bool valid;       /* resumable (no error, nothing changed since) */
    int step;         /* CYCLE_*: the step the cycle stopped in */
    size_t first_pos; /* CYCLE_FIRST: the next of `first` to consider */
    int64_t now;      /* the cycle's time */
    uint64_t cluster; /* allot_cluster_changes then */
    uint64_t tenants; /* allot_tenants_changes then */
    struct reservation r;
};

struct queue_serving;

struct allot_queue {
    struct allot_cluster *c;    /* borrowed */
    struct allot_tenants *t;    /* borrowed */
    struct allot_sched *placer; /* owned */
    const struct allot_queue_policy_ops *order;
    struct allot_queue_opts o;
    struct allot_prio_class prio[ALLOT_PRIO_CLASSES];
    int n_prio;
    struct allot_job *jobs; /* owned, by id; a forgotten job's slot has name NULL */
    size_t n_jobs, jobs_cap;
    int *free_ids; /* owned: slots of forgotten jobs, reused by submissions */
    size_t n_free, free_cap;
    int *pending; /* owned: ids, in no particular order */
    size_t n_pending, pending_cap;
    size_t *pend_at; /* owned, per job id: its index in pending (while pending) */
    size_t pend_at_cap;
    struct bf_link *bf; /* owned, per job id: the lists of reservations' backfill */
    size_t bf_cap;
    int *running; /* owned: ids (running or stopping) in start order; a job that left
                     is a hole (-1) until queue_running_compact */
    size_t n_running, running_cap; /* slots used, holes included */
    size_t n_holes;
    size_t *run_at; /* owned, per job id: its slot in running (while running) */
    size_t run_at_cap;
    struct allot_resvec capacity;
    int capacity_nodes;        /* nodes counted in capacity (the cluster's first ones) */
    uint64_t capacity_resized; /* allot_cluster_resized when counted */
    struct user_use *users;    /* owned: GPU use per (tenant, user), sorted by key, kept
                                  current as jobs start and leave (orders with user_share) */
    size_t n_users, users_cap;
    uint64_t run_epoch;        /* bumped whenever a job starts or leaves the cluster */
    uint64_t leave_epoch;      /* bumped whenever a job leaves the cluster */
    uint64_t pinned_epoch;     /* bumped when a tenant with running pinned borrowed work
                                  starts a job: that work may lie beyond its nominal now
                                  (reclaimable: queue_search_memo_until) */
    uint64_t starts;           /* jobs started so far */
    int64_t min_runtime_floor; /* the least minimum runtime of any job started */
    int *first;                /* owned: jobs whose victims just stopped (this cycle) */
    size_t n_first, first_cap;
    struct allot_placement *orphans; /* owned: held by the cluster for no job (see top) */
    size_t n_orphans, orphans_cap;
    size_t orphans_keep; /* orphan room every reservation leaves free on top (a trial's
                            victims, should one have to be evicted) */
    int *ten_head;       /* owned, per tenant id: first running job (ten_next links), -1 */
    size_t ten_cap;
    int bor_head;         /* first running borrowed job (bor_next links), -1 */
    size_t n_bor;         /* jobs in that list */
    struct ten_count *tc; /* owned, per tenant id < tc_n (every job's tenant) */
    size_t tc_n;
    uint64_t never_quotas;         /* allot_tenants_quota_gen and capacity the pending */
    struct allot_resvec never_cap; /* jobs' job.never were found with (never_refresh) */
    struct fair_ten *fair;         /* owned, per tenant id < fair_n: fair shares this round
                                      (opts.fair_reclaim_s, fair_cap; queue_fair_shares) */
    size_t fair_room, fair_n;      /* room; tenants this round (0: no fair shares) */
    int searches_left;             /* victim searches this cycle may still run */
    int reclaims_left;             /* ... for jobs inside their nominal (8 x searches_left) */
    int work_left;                 /* starts and victim searches this cycle may still make
                                      (opts.cycle_work); at 0 the cycle stops and `more` is set */
    bool more;                     /* the last cycle stopped at its work budget: the next one
                                      continues its round (same search budgets) */
    struct cycle_pause pause;
    struct queue_serving *serving; /* owned: queue_serve's order while a cut cycle may
                                      resume (queue_serve.c), NULL */
    struct las_pool *las;          /* owned: LAS candidates across tenants, per cycle (see below) */
    int64_t wakeup;
    int gone_held; /* stopping victims gone early, held for the others of their preemption
                      (allot_queue_stopped); while > 0 the next cycle looks whether they still
                      are (queue_gone_check, the one place that lets them go) */
    allot_decision_fn fn;
    void *ud;
    /* What lets a cycle skip work it already knows the answer to
     * (queue_fast.c). Off in reference mode (opts.exhaustive) and with a
     * random placement policy, whose failed attempts may draw numbers. */
    bool fast;
    uint64_t serial;        /* bumped whenever what a pending job would be told may change:
                               a job starts or leaves, victims are signalled, an orphan
                               appears or goes, a cycle begins */
    uint64_t free_epoch;    /* bumped whenever free capacity may have grown: a job
                               leaves, an orphan is released, a cycle begins */
    int n_excl;             /* running and stopping jobs whose tasks are not shared */
    struct queue_fast *fq;  /* owned: per-tenant orders and verdicts (queue_fast.c) */
    struct fast_cls *visit; /* the verdict class of the job queue_fast_serve is
                               considering, NULL (victim searches share results) */
    struct bor_pool *bor;   /* owned: reclaim candidates across tenants (queue_preempt.c) */
    struct bor_pool *fairp; /* owned: fair-share reclaim candidates (queue_preempt.c) */
    int64_t defrag_next;    /* the earliest time of the next defragmentation pass */
};

/* GPU milli a user of a tenant holds (fair share of users inside a tenant). */
struct user_use {
    int64_t key; /* tenant << 32 | user */
    int64_t milli;
};

/*
 * Two-queue LAS without quotas lets a job in the first queue preempt any
 * running job of the same priority that has had the threshold's worth of
 * service. Those candidates are the same for every such job of one
 * priority at one time, so they are gathered once (cheapest first) and
 * reused until a job starts or stops or time moves on.
 */
struct las_pool {
    uint64_t epoch;    /* 1 while valid for `now`; 0: rebuild (see las_pool_started) */
    int64_t now;       /* time it was built at */
    int prio;          /* the priority it was built for */
    struct victim *vs; /* owned: eligible running jobs, cheapest first */
    size_t n, cap;
    int64_t recheck_at; /* when a running job not eligible now may become so */
};

/* A job's place in the list of its holder's backfill (next, prev), and,
 * for a holder, the list's first job (head); -1 when none. */
struct bf_link {
    int head, next, prev;
};

/* ---- small helpers ---- */

/* A pending job's policy keys, with its arrival order and id for ties. */
struct queue_sortkey {
    double key[ALLOT_QUEUE_KEY_LEN];
    int64_t seq; /* spec.seq */
    int id;
    int tenant; /* spec.tenant (a serving's turns) */
};

/* The order of two pending jobs by policy keys, ties to the lower arrival
 * order (spec.seq), then to the lower id: the one tie-break of every
 * ordering (qsort comparator of struct queue_sortkey). */
static inline int queue_sortkey_cmp(const void *pa, const void *pb)
{
    const struct queue_sortkey *a = pa, *b = pb;

    for (int k = 0; k < ALLOT_QUEUE_KEY_LEN; k++)
        if (a->key[k] != b->key[k])
            return a->key[k] < b->key[k] ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Key of a job's user in q->users. */
static inline int64_t queue_user_key(const struct allot_job *j)
{
    return (int64_t)j->spec.tenant << 32 | (uint32_t)j->spec.user;
}

static inline int queue_job_prio(const struct allot_queue *q, const struct allot_job *j)
{
    return j->spec.prio_class >= 0 ? q->prio[j->spec.prio_class].value : 0;
}

static inline bool queue_job_preemptible(const struct allot_queue *q, const struct allot_job *j)
{
    if (j->spec.qos == ALLOT_QOS_BEST_EFFORT)
        return true;
    return j->spec.prio_class < 0 || q->prio[j->spec.prio_class].preemptible;
}

/* Whether task t asks for whole GPUs (not a fraction, GPU memory or MIG). */
static inline bool queue_task_whole(const struct allot_task *t)
{
    return t->num_gpu > 0 && t->gpu_milli == ALLOT_MILLI && t->gpu_mem_mib == 0 &&
           t->mig_profile < 0;
}

static inline int queue_job_gpus(const struct allot_job *j)
{
    return (int)(j->req.v[ALLOT_RES_GPU] / ALLOT_MILLI);
}

/* Whether the ready nodes pending job j may use (its labels, GPU models)
 * hold its GPUs in all; always for a job that names neither
 * (queue_reserve.c): a reservation for what they cannot hold would hold
 * the cluster for nothing. */
bool queue_reserve_could_fit(const struct allot_queue *q, const struct allot_job *j);

/* Whether pending job j, turned away for `kind` (ALLOT_WHY_CAPACITY, or
 * ALLOT_WHY_QUOTA at tenant `who`), makes the cycle's reservation r: a
 * large gang, aged or with reserve_gangs, when none holds yet, for lack
 * of room, or, inside its tenant's nominal, for lack of the cluster's own
 * quota (index 0: the cluster is full and waiting is all the guarantee
 * needs; a tenant's or an organisation's limit is not lifted by waiting
 * on the running jobs' ends, so it reserves nothing). */
static inline bool queue_gang_reserves(const struct allot_queue *q, const struct allot_job *j,
                                       int kind, int who, const struct reservation *r, int64_t now)
{
    bool aged = now - j->submit >= q->o.aging_s && q->o.aging_s > 0;
    bool large = queue_job_gpus(j) >= (q->o.large_gang_gpus ? q->o.large_gang_gpus : 8);

    if (!q->o.backfill || r->holder >= 0 || !large || !(aged || q->o.reserve_gangs))
        return false;
    /* last: a scan of the nodes for a job that names labels or models */
    return (kind == ALLOT_WHY_CAPACITY ||
            (kind == ALLOT_WHY_QUOTA && who == 0 &&
             allot_tenants_in_nominal(q->t, j->spec.tenant, &j->req))) &&
           queue_reserve_could_fit(q, j);
}

/* Passes one decision to the cycle's callback. */
static inline void queue_emit(struct allot_queue *q, int kind, const struct allot_job *j,
                              const char *why)
{
    if (q->fn)
        q->fn(kind, j, why, q->ud);
}

/* Makes room for n more entries in list v so that adding them cannot fail. */
static inline int queue_list_reserve(int **v, size_t n_used, size_t *cap, size_t n)
{
    return allot_grow((void **)v, cap, n_used + n, sizeof(**v)) ? ALLOT_ENOMEM : 0;
}

/* ---- queue.c: shared steps (contracts at their definitions) ---- */

/* Whether stopping victim v, its processes gone (allot_queue_stopped),
 * keeps its room for the job it was stopped for: that job still waits and
 * another victim of its preemption still runs. */
bool queue_gone_held(const struct allot_queue *q, const struct allot_job *v, int64_t now);
/* While victims are held so (q->gone_held), ends the grace of those no
 * longer held: the others of their preemption are gone or left, or the
 * job they made room for started elsewhere or left. */
void queue_gone_check(struct allot_queue *q, int64_t now);

/* Closes the holes of the running list when they are many (never while a
 * loop walks it). */
void queue_running_compact(struct allot_queue *q);

int queue_orphans_reserve(struct allot_queue *q, size_t n);
void queue_orphans_retry(struct allot_queue *q);
void queue_pl_release_all(struct allot_queue *q, const struct allot_placement *pl, int n);
/* Adds the resources of cluster c's nodes [from, to) to *cap. */
void queue_capacity_add(const struct allot_cluster *c, int from, int to, struct allot_resvec *cap);
void queue_job_usage(const struct allot_queue *q, const struct allot_job *j,
                     struct allot_resvec *r);
/* Charges running job j's usage to its tenant (sign +1) or takes it off
 * (-1): for a trial that puts it back the other way. */
void queue_job_charge(struct allot_queue *q, const struct allot_job *j, int sign);
void queue_job_leave(struct allot_queue *q, struct allot_job *j, int64_t now);
void queue_job_unplace(struct allot_queue *q, struct allot_job *j, int64_t now);
void queue_requeue(struct allot_queue *q, struct allot_job *j, int64_t now);
/* Placing a gang (queue_gang.c). */
int queue_gang_place(struct allot_queue *q, struct allot_job *j);
void queue_gang_unplace(struct allot_queue *q, struct allot_job *j);
void queue_set_why(struct allot_job *j, int kind, int who, int res, int other, int64_t a,
                   int64_t b);
/* Considering pending job j in a cycle under reservation r (queue.c):
 * queue_held is its first step, queue_consider_past the rest (bf from
 * queue_held; `known`: the refusal queue_fast.c knows j would meet, or
 * NULL), queue_consider both. They return 0 or ALLOT_ENOMEM. */
bool queue_held(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r,
                int *bf);
int queue_consider(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r,
                   const struct allot_why *known);
int queue_consider_past(struct allot_queue *q, struct allot_job *j, int64_t now,
                        struct reservation *r, int bf, const struct allot_why *known);
/* Reservations (queue_reserve.c): r becomes j's EASY reservation (j a
 * large gang that found no room); whether j may start past r's holder now
 * (*bf: the holder when j would start as its preemptible backfill,
 * QUEUE_BF_SPARE when in the GPUs spare at the holder's expected start,
 * else -1); and j started with that bf (queue_backfill_started: marked as
 * the holder's backfill, or the spare GPUs taken), the only step that
 * changes r or the marks. queue_reserve returns 0 or ALLOT_ENOMEM. */
#define QUEUE_BF_SPARE (-2)
int queue_reserve(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r);
bool queue_backfill_ok(struct allot_queue *q, const struct reservation *r,
                       const struct allot_job *j, int64_t now, int *bf);
void queue_backfill_started(struct allot_queue *q, struct reservation *r, struct allot_job *j,
                            int bf);
/* Running job j (backfill_for >= 0) stops being its holder's backfill. */
void queue_backfill_unmark(struct allot_queue *q, struct allot_job *j);
/* Whether the cycle's work budget is spent (then sets q->more): every
 * step asks before each piece of work it would do, so that a cycle stops
 * right after the decision that spent it (inline: the serving loops ask
 * once per job they look at). */
static inline bool queue_cut(struct allot_queue *q)
{
    if (q->work_left > 0)
        return false;
    q->more = true;
    return true;
}

/* ---- queue_serve.c ---- */

/* Step 3 of a cycle: orders the pending jobs by the ordering policy and
 * considers each in turn (queue_consider), under reservation r; with
 * resume, goes on in the order a cycle cut short kept. Returns 0 or
 * ALLOT_ENOMEM (the cycle stops; decisions made stand). */
int queue_serve(struct allot_queue *q, int64_t now, struct reservation *r, bool resume);
/* Frees a serving kept for a resume (accepts NULL). */
void queue_serving_free(struct queue_serving *v);

/* ---- queue_fast.c ---- */

/* Step 3 of a cycle with the fair order when q->fast: the same decisions
 * and reasons as queue_serve, without considering in full the jobs whose
 * outcome is already known. With resume, goes on where the serving cut
 * short at the work budget stopped (nothing changed since). Returns 0 or
 * ALLOT_ENOMEM. */
int queue_fast_serve(struct allot_queue *q, int64_t now, struct reservation *r, bool resume);
/* Job j became pending (submitted, requeued). Never fails: without memory
 * the next cycle rebuilds its lists from q->pending. */
void queue_fast_pending(struct allot_queue *q, const struct allot_job *j);
/* Job j stopped being pending (started, cancelled). */
void queue_fast_gone(struct allot_queue *q, const struct allot_job *j);
/* The usage of tenant `tenant` changed (a job of it started or left). */
void queue_fast_usage(struct allot_queue *q, int tenant);
/* Tenant `tenant`'s pending jobs are listed again before its next turn
 * (one of them became special: a holder got its first backfill). */
void queue_fast_dirty(struct allot_queue *q, int tenant);
/* Something every pending job's order depends on changed (a priority class). */
void queue_fast_all_dirty(struct allot_queue *q);
/* True when placing j's gang is known to fail now (no capacity freed since
 * an attempt failed). */
bool queue_fast_place_fails(struct allot_queue *q, const struct allot_job *j);
/* Placing j's gang just failed for lack of room (not in a trial). */
void queue_fast_place_failed(struct allot_queue *q, const struct allot_job *j);
/* Running job v started a run: the instants it may become a victim at are
 * kept (never fails: without memory they are rebuilt when next asked). */
void queue_fast_recheck_add(struct allot_queue *q, const struct allot_job *v);
/* The least recheck time (queue_preempt.c's recheck_at) at now over the
 * running jobs for which `victim` is false: INT64_MAX when none may
 * become a victim later, INT64_MIN when not known (no fast path, or out
 * of memory). */
int64_t queue_fast_recheck_min(struct allot_queue *q, int64_t now,
                               bool (*victim)(void *ud, const struct allot_job *v), void *ud);
/* Whether job j fits inside its tenant's nominal now (shared by the jobs of
 * the class being considered, q->visit, within one state). */
bool queue_fast_in_nom(struct allot_queue *q, const struct allot_job *j);
/* The recheck time of a fruitless victim search that job j (considered
 * through queue_fast_serve) would repeat exactly, or INT64_MIN when none is
 * known; queue_fast_search_put records one. */
int64_t queue_fast_search_get(struct allot_queue *q, const struct allot_job *j, int64_t now);
void queue_fast_search_put(struct allot_queue *q, const struct allot_job *j, int64_t now,
                           uint64_t serial, int64_t recheck);
/* Job j's grace period or runtime limit may have begun (it started with a
 * limit, started at another time, or was signalled). Never fails. */
void queue_fast_timer(struct allot_queue *q, const struct allot_job *j);

/* When running job j reaches its runtime limit: the first whole second at
 * which more than limit_s seconds have passed since run_from (times are
 * whole seconds, so the limit never ends early), or, while nobody said it
 * runs, since its start plus ALLOT_LIMIT_START_ALLOWANCE_S; INT64_MAX when
 * it has none. The one rule the timers, the stop and the reservations use. */
static inline int64_t queue_limit_at(const struct allot_job *j)
{
    int64_t from = j->run_from != INT64_MAX ? j->run_from
                   : j->start <= INT64_MAX - ALLOT_LIMIT_START_ALLOWANCE_S
                       ? j->start + ALLOT_LIMIT_START_ALLOWANCE_S
                       : INT64_MAX;

    if (!j->spec.limit_s || from > INT64_MAX - j->spec.limit_s - 1)
        return INT64_MAX;
    return from + j->spec.limit_s + 1;
}
/* The running jobs whose grace period or limit ends by now, in the
 * running list's order (*out valid until the next call). Returns 0, or
 * ALLOT_ENOMEM when the caller must scan. A job the caller does not stop
 * goes back through queue_fast_timer. */
int queue_fast_due(struct allot_queue *q, int64_t now, const int **out, size_t *n_out);
/* Job j just set its search memo (preempt_epoch). Never fails. */
void queue_fast_searched(struct allot_queue *q, const struct allot_job *j);
/* The earliest time after now a waiting job's search or a running job's
 * grace period or limit wants a cycle (INT64_MAX: none), or INT64_MIN
 * when the caller must scan. */
int64_t queue_fast_wakeup(struct allot_queue *q, int64_t now);
/* Creates q->fq (q->fast set, q->order chosen). Returns 0 or ALLOT_ENOMEM. */
int queue_fast_new(struct allot_queue *q);
/* Frees what queue_fast_new made (accepts NULL). */
void queue_fast_free(struct queue_fast *f);
/* True when the cycle serves through queue_fast_serve (fast, fair order). */
bool queue_fast_ordered(const struct allot_queue *q);

/* ---- queue_preempt.c ---- */

/* Finds the cheapest victim set for pending job j and preempts it. Returns
 * 1 when victims were signalled or stopped (or already are), 0 when none
 * would help, or an error (nothing preempted; a victim that could not be
 * put back after the trial was stopped and requeued). */
int queue_try_preempt(struct allot_queue *q, struct allot_job *j, int64_t now);

/* 1 when j would be admitted and placed now (tried, then undone), 0 when
 * not, or ALLOT_ENOMEM. */
int queue_would_fit(struct allot_queue *q, struct allot_job *j);

/* Job v started at now (keeps the LAS candidate pool right). */
void queue_las_started(struct allot_queue *q, const struct allot_job *v, int64_t now);
/* Recomputes q->fair for the round (opts.fair_reclaim_s, opts.fair_cap;
 * queue_preempt.c). */
void queue_fair_shares(struct allot_queue *q);
/* Tenant t's fair share this round (milli-GPU), -1 when none. */
int64_t queue_fair_share(const struct allot_queue *q, int t);
/* The fair-share cap (opts.fair_cap), the one test every path uses: true
 * when starting j would take its tenant beyond its nominal GPUs and past
 * fair_cap times its fair share this round. A fair share is below what a
 * tenant asks for only when the cluster cannot give every tenant all it
 * asks for, so the cap binds only while other tenants' work waits. */
bool queue_fair_capped(const struct allot_queue *q, const struct allot_job *j);
/* The instants running job v may become a victim at in this run, whatever
 * now is: its minimum runtime's end, its reaching the LAS threshold (at
 * most 2, in at[]; returns how many). */
int queue_recheck_instants(const struct allot_queue *q, const struct allot_job *v, int64_t at[2]);
/* Running or stopping job j leaves: its tenant's counts (q->tc) of
 * stopping and waiting GPUs follow (queue_preempt.c). */
void queue_fair_left(struct allot_queue *q, const struct allot_job *j);

/* Until when j's last fruitless victim search holds (INT64_MIN: it does not). */
int64_t queue_search_memo_until(const struct allot_queue *q, const struct allot_job *j);

/* Preempts victims ids[0..n) (running, their tasks `tasks` in all) for
 * pending job j: checkpointable ones get the grace period and j waits for
 * them, the others stop and are requeued now. how: 0 by the standing rule,
 * 1 the same with fair-share reclaim, 2 moved by defragmentation
 * (ALLOT_PREEMPT_MOVE). Returns 0, or ALLOT_ENOMEM with nothing preempted. */
int queue_victims_signal(struct allot_queue *q, struct allot_job *j, const int *ids, int n,
                         size_t tasks, int how, int64_t now);
/* Whether job v is among the last preemptors of job j (v preempted j, so
 * j never preempts or moves v's way: no two jobs preempt each other). */
bool queue_is_preemptor(const struct allot_job *j, int v);
/* Seconds of work a preemption of running job v at now throws away: all
 * of its run, or for a checkpointable job what it did since its last save
 * (v->saved_at, then every checkpoint interval) and through the grace
 * period. */
int64_t queue_lost_work(const struct allot_queue *q, const struct allot_job *v, int64_t now);
/* Whether one of v's tasks was placed exclusive (node or GPU). */
bool queue_placed_exclusive(const struct allot_job *v);
/* Takes running job v off the cluster and the quotas tentatively (room
 * for its tasks as orphans reserved by the caller), and puts it back.
 * Return 0 or an error (queue_preempt.c: victim_off, victim_back). */
int queue_victim_off(struct allot_queue *q, struct allot_job *v, int64_t now);
int queue_victim_back(struct allot_queue *q, struct allot_job *v, int64_t now);

/* ---- queue_defrag.c ---- */

/* Defragmentation (opts.defrag_s): at most once per interval, after the
 * cycle served its jobs, moves checkpointed jobs so that pending jobs
 * that lack only a whole node's room (or a GPU set's) find it. Returns 0
 * or ALLOT_ENOMEM (nothing moved for the job at hand). */
int queue_defrag(struct allot_queue *q, int64_t now);

/* What happened to a victim under enum allot_preempt_kind `kind`, to be
 * followed by " job <preemptor>" (static text). */
const char *queue_preempt_text(int kind);

/* Frees the LAS candidate pool (accepts NULL). */
void queue_las_free(struct las_pool *p);

/* The reclaim pool (borrowed running jobs as candidates of every tenant's
 * searches at one time) follows the borrowed jobs: job v started borrowed
 * at now, or v (borrowed) left the cluster, or something else it depends
 * on changed (queue_bor_reset, which drops the fair-share and LAS pools
 * too). */
void queue_bor_started(struct allot_queue *q, const struct allot_job *v, int64_t now);
void queue_bor_left(struct allot_queue *q, const struct allot_job *v);
void queue_bor_reset(struct allot_queue *q);
/* Frees the reclaim pool (accepts NULL). */
void queue_bor_free(struct bor_pool *p);

#endif
