/*
 * Preemption and reclaim of the job queue (docs/tenancy.md, "Preemption
 * and reclaim"; the standing rule is in queue.c's opening comment): the
 * bounded victim search of one waiting job and the preemption of the set
 * it finds. A search (queue_try_preempt) runs in named steps: collect the
 * candidates the rule allows from the running-job index, group them by
 * node, try adding victims (tentatively released) until the job would be
 * admitted and placed, reprieve the victims it fits without, put
 * everything back, and preempt exactly the set left.
 * Putting a victim back can fail for lack of memory; the victim is then
 * stopped and requeued rather than left running on GPUs that look free.
 * Called from the cycle only; single-threaded.
 */
#include "queue_int.h"

#include <stdlib.h>
#include <string.h>

struct victim {
    int id;
    int64_t cost; /* GPU-seconds of work lost */
    int borrowed;
    int pinned; /* its class is not preemptible: reclaimed only when no other work will do */
    int prio;   /* its priority class's value: the lowest go first */
};

static int cmp_victim(const void *a, const void *b)
{
    const struct victim *x = a, *y = b;

    if (x->borrowed != y->borrowed)
        return y->borrowed - x->borrowed; /* borrowed first */
    if (x->pinned != y->pinned)
        return x->pinned - y->pinned; /* then what its class lets be preempted */
    if (x->prio != y->prio)           /* then the lowest priority (as Kueue): a higher one taken */
        return x->prio < y->prio ? -1 : 1; /* first would take the lower in its turn */
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    return x->id - y->id;
}

/* Seconds of work a preemption of v at now throws away: the work since its
 * last save (its reported one, v->saved_at, or the run's start, then every
 * checkpoint interval), counted at the end of the grace period; all of its
 * run for a job that cannot checkpoint. */
/* Seconds from checkpointable job v's last save to the end of a grace
 * period that begins at now. */
static int64_t since_save(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    return (now > v->saved_at ? now - v->saved_at : 0) + q->o.grace_s;
}

static int64_t lost_work(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    int64_t c = v->spec.checkpoint_interval_s;

    /* a job that runs once loses all its work: it ends instead of resuming */
    if (!v->spec.checkpointable || v->spec.once)
        return now - v->start;
    return c > 0 ? since_save(q, v, now) % c : since_save(q, v, now);
}

/* Running job v as a candidate victim at now. */
static struct victim victim_of(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    return (struct victim){.id = v->id,
                           .borrowed = v->borrowed,
                           .pinned = !queue_job_preemptible(q, v),
                           .prio = queue_job_prio(q, v),
                           .cost = (int64_t)queue_job_gpus(v) * lost_work(q, v, now)};
}

/* Whether v's tenant holds more than its nominal now, on a resource v
 * uses: it borrows now, so v lies beyond its guarantee in part at least
 * (as Kueue takes back a workload of a queue above its nominal, all of
 * it). Its borrowed flag says so only as of v's start (the tenant's other
 * work may have ended since, or its nominal grown), which is enough for
 * work its class lets be preempted, not for work it does not. */
static bool beyond_nominal(const struct allot_queue *q, const struct allot_job *v)
{
    const struct allot_tenant *x = allot_tenants_get(q->t, v->spec.tenant);
    struct allot_resvec use;

    queue_job_usage(q, v, &use);
    for (int k = 0; k < ALLOT_RES_MAX; k++)
        if (use.v[k] > 0 && x->quota[k].nominal != ALLOT_UNLIMITED &&
            x->usage[k] > x->quota[k].nominal)
            return true;
    return false;
}

/* True when quota (not room) is what keeps j out right now. */
static bool quota_blocked(struct allot_queue *q, const struct allot_job *j)
{
    return q->o.quotas &&
           !allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, NULL, NULL);
}

/* ---- fair-share reclaim (opts.fair_reclaim_s) ---- */

/* Tenant t's GPUs as fair-share reclaim counts them: in use, plus its
 * jobs waiting for victims to stop, less its jobs stopping. */
static int64_t fair_usage(const struct allot_queue *q, int t)
{
    int64_t u = allot_tenants_get(q->t, t)->usage[ALLOT_RES_GPU];

    return (size_t)t < q->tc_n ? u + q->tc[t].waiting - q->tc[t].stopping : u;
}

/* True when j's tenant, with j running, stays within its fair share. */
static bool fair_seeker(const struct allot_queue *q, const struct allot_job *j)
{
    int64_t f = queue_fair_share(q, j->spec.tenant);

    return f >= 0 && fair_usage(q, j->spec.tenant) + j->req.v[ALLOT_RES_GPU] <= f;
}

/* True when borrowed job v's tenant keeps at least its fair share without v. */
static bool fair_giver(const struct allot_queue *q, const struct allot_job *v)
{
    int64_t f = queue_fair_share(q, v->spec.tenant);

    return v->borrowed && f >= 0 && fair_usage(q, v->spec.tenant) - v->req.v[ALLOT_RES_GPU] >= f;
}

/* True when borrowed job v may be taken by fair-share reclaim now, by a
 * job of another tenant that stays within its fair share with it
 * (fair_seeker): v runs, is preemptible, is past its minimum runtime,
 * its tenant keeps at least its fair share without it (the search checks
 * all of a tenant's victims together: search_fair_ok), and it loses at
 * most opts.fair_reclaim_s of work (it checkpointed lately). */
static bool fair_victim(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    return q->o.fair_reclaim_s > 0 && v->state == ALLOT_JOB_RUNNING &&
           queue_job_preemptible(q, v) && now - v->start >= v->spec.min_runtime_s &&
           fair_giver(q, v) && lost_work(q, v, now) <= q->o.fair_reclaim_s;
}

/* The next time a checkpointable job v's lost work starts again from
 * nothing (its next checkpoint, grace period included), or INT64_MAX. */
static int64_t next_checkpoint(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    int64_t c = v->spec.checkpoint_interval_s;

    if (!v->spec.checkpointable || c <= 0)
        return INT64_MAX;
    return v->saved_at + (since_save(q, v, now) / c + 1) * c - q->o.grace_s;
}

/* Whether v started as the backfill of j's reservation (j may be a probe
 * with no id). */
static bool backfill_of(const struct allot_job *v, const struct allot_job *j)
{
    return v->backfill_for >= 0 && v->backfill_for == j->id;
}

/* May running job v be preempted for pending job j (the standing rule)? */
static bool may_preempt(const struct allot_queue *q, const struct allot_job *j, bool j_in_nominal,
                        const struct allot_job *v, int64_t now)
{
    if (v->state != ALLOT_JOB_RUNNING || now - v->start < v->spec.min_runtime_s)
        return false;
    /* never turn on a job that preempted j: no two jobs preempt each other */
    if (queue_is_preemptor(j, v->id))
        return false;
    /* reclaim: only borrowed work of another tenant, only for work inside
     * its own nominal, whatever v's class: the lender's guarantee comes
     * first (a class that is not preemptible would otherwise let a job
     * keep another tenant's quota for good); such work only while all of
     * it lies beyond its own tenant's nominal now */
    if (q->o.quotas && j_in_nominal && v->borrowed && v->spec.tenant != j->spec.tenant &&
        (queue_job_preemptible(q, v) || beyond_nominal(q, v)))
        return true;
    /* work that started past j's reservation as preemptible backfill, on
     * that promise: its class changed since does not take it back */
    if (backfill_of(v, j))
        return true;
    if (!queue_job_preemptible(q, v))
        return false;
    /* standing inside a tenant (everywhere without quotas): priority, then
     * the two-queue LAS level (a job that has had less than the threshold
     * of GPU-time outranks one that has had more) */
    if (v->spec.tenant == j->spec.tenant || !q->o.quotas) {
        int64_t v_att = v->attained_s + (now - v->start) * queue_job_gpus(v);
        if (queue_job_prio(q, v) != queue_job_prio(q, j))
            return queue_job_prio(q, v) < queue_job_prio(q, j) && v->spec.tenant == j->spec.tenant;
        return q->o.las_threshold_gpu_s > 0 && j->attained_s < q->o.las_threshold_gpu_s &&
               v_att >= q->o.las_threshold_gpu_s;
    }
    /* fair-share reclaim, of work that loses little (just checkpointed) */
    return fair_seeker(q, j) && fair_victim(q, v, now);
}

/* Which case of the standing rule lets j preempt v (enum allot_preempt_kind);
 * fair: j's search took other tenants' work by fair-share reclaim. */
static int preempt_kind(const struct allot_queue *q, const struct allot_job *j,
                        const struct allot_job *v, bool fair)
{
    if (backfill_of(v, j))
        return ALLOT_PREEMPT_BACKFILL;
    if (v->spec.tenant == j->spec.tenant || !q->o.quotas)
        return queue_job_prio(q, v) != queue_job_prio(q, j) ? ALLOT_PREEMPT_PRIORITY
                                                            : ALLOT_PREEMPT_LAS;
    return fair ? ALLOT_PREEMPT_FAIR : ALLOT_PREEMPT_RECLAIM;
}

/* What happened to a victim, followed by " job <preemptor>". */
const char *queue_preempt_text(int kind)
{
    switch (kind) {
    case ALLOT_PREEMPT_PRIORITY:
        return "preempted for higher-priority";
    case ALLOT_PREEMPT_LAS:
        return "preempted (over the LAS service threshold) for less-served";
    case ALLOT_PREEMPT_BACKFILL:
        return "backfill preempted for the reservation of";
    case ALLOT_PREEMPT_FAIR:
        return "borrowed capacity above its tenant's fair share reclaimed by";
    case ALLOT_PREEMPT_MOVE:
        return "moved at its checkpoint (defragmentation) to make room for";
    default:
        return "borrowed capacity reclaimed by";
    }
}

/* The search for victims of one pending job j. */
struct search {
    struct victim *vs; /* owned: candidates, cheapest first */
    int n;             /* candidates */
    bool *chosen;      /* owned: per candidate, taken off tentatively */
    int order[64];     /* the chosen candidates, in the order they were taken */
    int used;          /* entries of order[] */
    int any[64];       /* candidates taken as the cheapest anywhere (for quota, or
                          when no one node could be freed), not for a node */
    int n_any;
    bool fair;          /* other tenants' victims by fair-share reclaim */
    size_t tasks_off;   /* tasks of the chosen victims */
    struct slot *slots; /* owned: (node, candidate) pairs, by node then candidate */
    size_t n_slots;
    int *node_free; /* owned, per slot: whole GPUs free on its node (kept current) */
    int *e_slot;    /* owned, per candidate: its first slot, then slot_next; -1 */
    int *slot_next; /* owned, per slot */
};

/* Candidate e holds `gpus` GPUs of `node`. */
struct slot {
    int node, e, k; /* k: its first task on the node (evaluation order) */
    int gpus;
};

static void search_free(struct search *s)
{
    allot_free(s->vs);
    allot_free(s->chosen);
    allot_free(s->slots);
    allot_free(s->node_free);
    allot_free(s->e_slot);
    allot_free(s->slot_next);
}

/* When running job v reaches the LAS threshold (its tenant's threshold
 * not reached yet: v->attained_s below it, v on GPUs). */
static int64_t las_instant(const struct allot_queue *q, const struct allot_job *v)
{
    int64_t g = queue_job_gpus(v);

    return v->start + (q->o.las_threshold_gpu_s - v->attained_s + g - 1) / g;
}

int queue_recheck_instants(const struct allot_queue *q, const struct allot_job *v, int64_t at[2])
{
    int n = 0;

    if (v->spec.min_runtime_s > 0)
        at[n++] = v->start + v->spec.min_runtime_s;
    if (q->o.las_threshold_gpu_s > 0 && queue_job_gpus(v) > 0 &&
        v->attained_s < q->o.las_threshold_gpu_s)
        at[n++] = las_instant(q, v);
    return n;
}

/* A running job v that may not be preempted now may become a victim
 * later: when it reaches its minimum runtime or the LAS threshold. Returns
 * the earlier of that time and `until`: the first of
 * queue_recheck_instants after now, found without a division for a job
 * past the threshold. */
static int64_t recheck_at(const struct allot_queue *q, const struct allot_job *v, int64_t now,
                          int64_t until)
{
    int64_t ran = now - v->start;

    if (v->state != ALLOT_JOB_RUNNING)
        return until;
    if (ran < v->spec.min_runtime_s && v->start + v->spec.min_runtime_s < until)
        until = v->start + v->spec.min_runtime_s;
    if (q->o.las_threshold_gpu_s > 0 && queue_job_gpus(v) > 0 &&
        v->attained_s + ran * queue_job_gpus(v) < q->o.las_threshold_gpu_s) {
        int64_t at = las_instant(q, v);
        if (at > now && at < until)
            until = at;
    }
    return until;
}

/* Running job v may not be preempted for j now: notes in
 * j->preempt_recheck_at when it may become a victim. */
static void recheck_note(const struct allot_queue *q, struct allot_job *j,
                         const struct allot_job *v, int64_t now)
{
    j->preempt_recheck_at = recheck_at(q, v, now, j->preempt_recheck_at);
}

/* Adds running job v to j's candidates when j may preempt it now; notes
 * when it may become one otherwise. */
static void collect_one(const struct allot_queue *q, struct allot_job *j, bool in_nom,
                        const struct allot_job *v, int64_t now, struct search *s)
{
    if (!may_preempt(q, j, in_nom, v, now)) {
        recheck_note(q, j, v, now);
        return;
    }
    s->vs[s->n++] = victim_of(q, v, now);
}

/* The LAS pool for jobs of priority `prio` at now (rebuilt when stale).
 * Returns it or NULL on allocation failure. */
static struct las_pool *las_pool(struct allot_queue *q, int prio, int64_t now)
{
    struct las_pool *p = q->las;
    /* a job of no tenant below the threshold: only the LAS rule applies */
    struct allot_job probe = {.id = -1, .spec = {.prio_class = -1, .tenant = -1}};

    if (!p) {
        p = q->las = allot_calloc(1, sizeof(*p));
        if (!p)
            return NULL;
    }
    if (p->epoch && p->now == now && p->prio == prio)
        return p;
    if (allot_grow((void **)&p->vs, &p->cap, q->n_running + 1, sizeof(*p->vs)))
        return NULL;
    p->n = 0;
    probe.preempt_recheck_at = INT64_MAX;
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *v;
        if (q->running[i] < 0)
            continue;
        v = &q->jobs[q->running[i]];
        if (queue_job_prio(q, v) != prio || !may_preempt(q, &probe, false, v, now)) {
            recheck_note(q, &probe, v, now);
            continue;
        }
        p->vs[p->n++] = victim_of(q, v, now);
    }
    if (p->n > 1)
        qsort(p->vs, p->n, sizeof(*p->vs), cmp_victim);
    p->recheck_at = probe.preempt_recheck_at;
    p->epoch = 1;
    p->now = now;
    p->prio = prio;
    return p;
}

/* Job v starts at now: a current pool learns when it may become a
 * candidate; one that could be a candidate at once (no minimum runtime)
 * makes the pool rebuild. Jobs that leave are skipped when collecting. */
void queue_las_started(struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    struct las_pool *p = q->las;
    struct allot_job probe = {.id = -1, .spec = {.prio_class = -1, .tenant = -1}};

    if (!p || !p->epoch || p->now != now)
        return;
    if (v->spec.min_runtime_s <= 0) {
        p->epoch = 0;
        return;
    }
    probe.preempt_recheck_at = p->recheck_at;
    recheck_note(q, &probe, v, now);
    p->recheck_at = probe.preempt_recheck_at;
}

/* Adds the LAS pool's candidates of other tenants that did not preempt j,
 * and the pool's next recheck time. Returns 0 or ALLOT_ENOMEM. */
static int collect_las(struct allot_queue *q, struct allot_job *j, int64_t now, struct search *s)
{
    const struct las_pool *p = las_pool(q, queue_job_prio(q, j), now);

    if (!p)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < p->n; i++) {
        const struct allot_job *v = &q->jobs[p->vs[i].id];
        /* jobs that stopped or were preempted since the pool was built */
        bool skip = v->spec.tenant == j->spec.tenant || v->state != ALLOT_JOB_RUNNING ||
                    now - v->start < v->spec.min_runtime_s;
        for (int k = 0; k < j->n_preemptors && !skip; k++)
            skip = j->preemptors[k] == v->id;
        if (!skip)
            s->vs[s->n++] = p->vs[i];
    }
    if (p->recheck_at < j->preempt_recheck_at)
        j->preempt_recheck_at = p->recheck_at;
    return 0;
}

/*
 * Reclaim candidates across tenants (q->fast). A job inside its nominal
 * may preempt any borrowed job of another tenant that runs and is past its
 * minimum runtime, whatever its class: the same jobs for every such search at
 * one time, whatever its tenant, but for the tenant's own. So they are
 * gathered once (cheapest first) with the earliest time a borrowed job not
 * yet a candidate may become one, and reused until time moves on or the
 * borrowed jobs change in a way the pool cannot follow. Jobs that stopped
 * or left since are skipped when collecting. (That earliest time may be
 * set by a job of the searching tenant itself: its own-tenant walk notes
 * every one of its jobs that is not a candidate, at the same time, so the
 * search's recheck time is the same.)
 */
struct bor_pool {
    bool valid;
    int64_t now;       /* the time it was built at */
    uint64_t serial;   /* the fair-share pool: q->serial it was built at */
    struct victim *vs; /* owned: candidates, cheapest first */
    size_t n, cap;
    int64_t at; /* earliest recheck time of a borrowed job not a candidate */
    int at_job; /* the job that set it */
};

static void pool_note(struct bor_pool *p, const struct allot_job *v, int64_t at)
{
    if (at < p->at) {
        p->at = at;
        p->at_job = v->id;
    }
}

/* True when borrowed job v may be reclaimed at now by a job of another
 * tenant inside its nominal that it did not preempt (may_preempt). */
static bool bor_candidate(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    return v->state == ALLOT_JOB_RUNNING && v->borrowed && now - v->start >= v->spec.min_runtime_s;
}

/* When borrowed job v becomes a reclaim candidate: INT64_MIN when it is
 * one at now, else its recheck time. */
static int64_t bor_at(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    return bor_candidate(q, v, now) ? INT64_MIN : recheck_at(q, v, now, INT64_MAX);
}

/* When borrowed job v becomes a fair-share reclaim candidate (fair_victim):
 * INT64_MIN when it is one at now; INT64_MAX when not while its tenant's
 * standing holds (a new round or state rebuilds the pool); else its
 * minimum runtime or its next checkpoint. */
static int64_t fair_at(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    if (v->state != ALLOT_JOB_RUNNING || !queue_job_preemptible(q, v) || !fair_giver(q, v))
        return INT64_MAX;
    if (fair_victim(q, v, now))
        return INT64_MIN;
    return now - v->start < v->spec.min_runtime_s ? v->start + v->spec.min_runtime_s
                                                  : next_checkpoint(q, v, now);
}

/* The reclaim pool (fair false) or the fair-share one at now, rebuilt from
 * the running borrowed jobs when stale. The fair-share candidates are the
 * same for every search at one time and state, but for the searching
 * tenant's own (q->serial moves with every start, stop and preemption).
 * Returns it or NULL on allocation failure. */
static struct bor_pool *pool_at(struct allot_queue *q, bool fair, int64_t now)
{
    struct bor_pool **slot = fair ? &q->fairp : &q->bor, *p = *slot;
    uint64_t serial = fair ? q->serial : 0;

    if (!p) {
        p = *slot = allot_calloc(1, sizeof(*p));
        if (!p)
            return NULL;
    }
    if (p->valid && p->now == now && p->serial == serial)
        return p;
    if (allot_grow((void **)&p->vs, &p->cap, q->n_running + 1, sizeof(*p->vs)))
        return NULL;
    p->n = 0;
    p->at = INT64_MAX;
    p->at_job = -1;
    for (int id = q->bor_head; id >= 0; id = q->jobs[id].bor_next) {
        const struct allot_job *v = &q->jobs[id];
        int64_t at = fair ? fair_at(q, v, now) : bor_at(q, v, now);
        if (at == INT64_MIN)
            p->vs[p->n++] = victim_of(q, v, now);
        else
            pool_note(p, v, at);
    }
    if (p->n > 1)
        qsort(p->vs, p->n, sizeof(*p->vs), cmp_victim);
    p->valid = true;
    p->now = now;
    p->serial = serial;
    return p;
}

void queue_bor_started(struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    struct bor_pool *p = q->bor;

    if (!p || !p->valid || p->now != now)
        return;
    if (v->spec.min_runtime_s <= 0)
        p->valid = false; /* a candidate at once */
    else
        pool_note(p, v, recheck_at(q, v, now, INT64_MAX));
}

void queue_bor_left(struct allot_queue *q, const struct allot_job *v)
{
    struct bor_pool *p = q->bor;

    if (p && v->id == p->at_job)
        p->valid = false;
}

void queue_bor_reset(struct allot_queue *q)
{
    if (q->bor)
        q->bor->valid = false;
    if (q->fairp)
        q->fairp->valid = false;
    if (q->las)
        q->las->epoch = 0;
}

void queue_bor_free(struct bor_pool *p)
{
    if (p)
        allot_free(p->vs);
    allot_free(p);
}

/* True when v is one of the jobs that preempted j (never its victim). */
bool queue_is_preemptor(const struct allot_job *j, int v)
{
    for (int k = 0; k < j->n_preemptors; k++)
        if (j->preemptors[k] == v)
            return true;
    return false;
}

/* Adds the pool's candidates of other tenants than j's that did not
 * preempt j, and the earliest time another may become one (j's preemptors
 * among the candidates, and work whose class is not preemptible that is
 * not beyond its tenant's nominal now, are not victims but are noted, as
 * may_preempt refuses them). Returns 0 or ALLOT_ENOMEM. */
static int collect_bor(struct allot_queue *q, struct allot_job *j, int64_t now, struct search *s)
{
    const struct bor_pool *p = pool_at(q, false, now);

    if (!p)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < p->n; i++) {
        const struct allot_job *v = &q->jobs[p->vs[i].id];
        if (v->spec.tenant == j->spec.tenant || !bor_candidate(q, v, now))
            continue;
        if ((!queue_job_preemptible(q, v) && !beyond_nominal(q, v)) ||
            (j->n_preemptors > 0 && queue_is_preemptor(j, v->id)))
            recheck_note(q, j, v, now);
        else
            s->vs[s->n++] = p->vs[i];
    }
    if (p->at < j->preempt_recheck_at)
        j->preempt_recheck_at = p->at;
    return 0;
}

/* A search's standing rule, for queue_fast_recheck_min. */
struct holder_rule {
    const struct allot_queue *q;
    const struct allot_job *j;
    bool in_nom;
    int64_t now;
};

static bool holder_victim(void *ud, const struct allot_job *v)
{
    const struct holder_rule *h = ud;

    return may_preempt(h->q, h->j, h->in_nom, v, h->now);
}

/* With quotas, the candidates of a reservation holder j with backfill,
 * from the lists rather than from every running job (which is what
 * search_collect does otherwise, and the reference still does): may_preempt
 * takes other tenants' jobs only when borrowed (reclaim, fair-share
 * reclaim) or j's backfill, so j's own tenant's jobs, the borrowed jobs
 * when j may reclaim, and j's backfill are all it can take. Its recheck
 * time is, as when every running job is looked at, the least over all the
 * others (queue_fast_recheck_min). Returns the number of candidates or
 * ALLOT_ENOMEM; *known false (nothing collected) when that time is not
 * known. */
static int collect_holder(struct allot_queue *q, struct allot_job *j, bool in_nom, int64_t now,
                          struct search *s, bool *known)
{
    int te = j->spec.tenant, first = (size_t)te < q->ten_cap ? q->ten_head[te] : -1;
    bool bor = in_nom || fair_seeker(q, j);
    size_t cap = (size_t)j->backfilled + 1;
    struct holder_rule rule = {.q = q, .j = j, .in_nom = in_nom, .now = now};
    int64_t recheck;

    *known = true;
    cap += q->tc[te].running + (bor ? q->n_bor : 0);
    s->vs = allot_malloc(cap * sizeof(*s->vs));
    if (!s->vs)
        return ALLOT_ENOMEM;
    for (int v = first; v >= 0; v = q->jobs[v].ten_next)
        collect_one(q, j, in_nom, &q->jobs[v], now, s);
    for (int v = bor ? q->bor_head : -1; v >= 0; v = q->jobs[v].bor_next)
        if (q->jobs[v].spec.tenant != te)
            collect_one(q, j, in_nom, &q->jobs[v], now, s);
    for (int v = q->bf[j->id].head; v >= 0; v = q->bf[v].next) {
        const struct allot_job *b = &q->jobs[v];
        if (b->spec.tenant != te && !(bor && b->borrowed)) /* not looked at above */
            collect_one(q, j, in_nom, b, now, s);
    }
    recheck = queue_fast_recheck_min(q, now, holder_victim, &rule);
    if (recheck == INT64_MIN) {
        allot_free(s->vs);
        s->vs = NULL;
        s->n = 0;
        *known = false;
        return 0;
    }
    j->preempt_recheck_at = recheck;
    if (s->n > 1)
        qsort(s->vs, (size_t)s->n, sizeof(*s->vs), cmp_victim);
    return s->n;
}

/*
 * Step 1: the running jobs j may preempt, cheapest first. Only the pools
 * the standing rule allows are visited: j's own tenant (priority, LAS);
 * with quotas, the borrowed jobs of others when j fits in its nominal
 * (reclaim); without quotas, the LAS pool when j is in LAS's first queue.
 * in_nom: j fits inside its tenant's nominal (with quotas on).
 * Returns their number or ALLOT_ENOMEM.
 */
static int search_collect(struct allot_queue *q, struct allot_job *j, bool in_nom, int64_t now,
                          struct search *s)
{
    int te = j->spec.tenant, own, first = (size_t)te < q->ten_cap ? q->ten_head[te] : -1;
    bool pool = q->o.quotas && in_nom && q->fast;
    size_t cap = q->n_running + 1;

    /* after a fruitless fair-share search for G GPUs, the tenant's jobs of
     * G GPUs or more skip theirs for the rest of the cycle: they would
     * meet the same tenants above their share */
    s->fair = !in_nom && q->o.quotas && q->o.fair_reclaim_s > 0 && fair_seeker(q, j) &&
              (q->fair[te].failed == 0 || j->req.v[ALLOT_RES_GPU] < q->fair[te].failed);

    if (j->backfilled > 0 && q->fast && q->o.quotas) {
        bool known;
        int rc = collect_holder(q, j, in_nom, now, s, &known);
        if (known || rc < 0)
            return rc;
        j->preempt_recheck_at = INT64_MAX;
    }
    if (j->backfilled > 0) {
        /* a reservation's backfill may be any tenant's: every running job */
        s->vs = allot_malloc(cap * sizeof(*s->vs));
        if (!s->vs)
            return ALLOT_ENOMEM;
        for (size_t i = 0; i < q->n_running; i++)
            if (q->running[i] >= 0)
                collect_one(q, j, in_nom, &q->jobs[q->running[i]], now, s);
        if (s->n > 1)
            qsort(s->vs, (size_t)s->n, sizeof(*s->vs), cmp_victim);
        return s->n;
    }

    if (q->fast && q->o.quotas) {
        /* room for the tenant's own jobs and the pool's, not for every
         * running job (a block that large costs a mapping per search) */
        const struct bor_pool *p = pool ? pool_at(q, false, now) : NULL;
        if (pool && !p)
            return ALLOT_ENOMEM;
        cap = (pool ? p->n + 1 : in_nom || s->fair ? q->n_running + 1 : 1) + q->tc[te].running;
    }
    s->vs = allot_malloc(cap * sizeof(*s->vs));
    if (!s->vs)
        return ALLOT_ENOMEM;
    for (int v = first; v >= 0; v = q->jobs[v].ten_next)
        collect_one(q, j, in_nom, &q->jobs[v], now, s);
    own = s->n;
    if (pool) {
        /* the pool comes sorted: sort the tenant's own, then merge */
        struct victim *all = allot_malloc(cap * sizeof(*all));
        int a = 0, b = own, w = 0;
        if (!all || collect_bor(q, j, now, s) != 0) {
            allot_free(all);
            return ALLOT_ENOMEM;
        }
        if (own > 1)
            qsort(s->vs, (size_t)own, sizeof(*s->vs), cmp_victim);
        while (a < own || b < s->n)
            all[w++] = b >= s->n || (a < own && cmp_victim(&s->vs[a], &s->vs[b]) < 0) ? s->vs[a++]
                                                                                      : s->vs[b++];
        allot_free(s->vs);
        s->vs = all;
        return s->n;
    } else if (s->fair) {
        const struct bor_pool *p = pool_at(q, true, now);
        if (!p)
            return ALLOT_ENOMEM;
        for (size_t i = 0; i < p->n; i++) {
            const struct allot_job *v = &q->jobs[p->vs[i].id];
            if (v->spec.tenant == te)
                continue;
            if (j->n_preemptors > 0 && queue_is_preemptor(j, v->id))
                recheck_note(q, j, v, now);
            else
                s->vs[s->n++] = p->vs[i];
        }
        if (p->at < j->preempt_recheck_at)
            j->preempt_recheck_at = p->at;
    } else if (q->o.quotas && in_nom) {
        for (int v = q->bor_head; v >= 0; v = q->jobs[v].bor_next)
            if (q->jobs[v].spec.tenant != te)
                collect_one(q, j, in_nom, &q->jobs[v], now, s);
    } else if (!q->o.quotas && q->o.las_threshold_gpu_s > 0 &&
               j->attained_s < q->o.las_threshold_gpu_s && collect_las(q, j, now, s) != 0) {
        return ALLOT_ENOMEM;
    }
    if (s->n > 1)
        qsort(s->vs, (size_t)s->n, sizeof(*s->vs), cmp_victim);
    return s->n;
}

static int cmp_slot(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;

    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->e != y->e ? (x->e < y->e ? -1 : 1) : (x->k > y->k) - (x->k < y->k);
}

/* Sorts slots v[0..n), made in (candidate, task) order, by node, keeping
 * that order among a node's slots (the order cmp_slot gives): a radix sort
 * on the node, 8 bits a pass (nodes below nn). Returns 0 or ALLOT_ENOMEM. */
static int slots_by_node(struct slot *v, size_t n, int nn)
{
    struct slot *tmp = allot_malloc(n * sizeof(*tmp));

    if (!tmp)
        return ALLOT_ENOMEM;
    for (int shift = 0; shift < 31 && (nn - 1) >> shift > 0; shift += 8) {
        size_t at[257] = {0};
        for (size_t i = 0; i < n; i++)
            at[((unsigned)v[i].node >> shift & 255) + 1]++;
        for (int d = 0; d < 256; d++)
            at[d + 1] += at[d];
        for (size_t i = 0; i < n; i++)
            tmp[at[(unsigned)v[i].node >> shift & 255]++] = v[i];
        memcpy(v, tmp, n * sizeof(*v));
    }
    allot_free(tmp);
    return 0;
}

/* Step 2: the candidates grouped by node, so that freeing room on one node
 * is evaluated in one pass over its candidates. Returns 0 or ALLOT_ENOMEM. */
static int search_slots(struct allot_queue *q, struct search *s)
{
    size_t n = 0, w = 0;
    int nn = allot_cluster_node_count(q->c);

    for (int e = 0; e < s->n; e++)
        n += (size_t)q->jobs[s->vs[e].id].spec.n_tasks;
    s->slots = allot_malloc((n + 1) * sizeof(*s->slots));
    if (!s->slots)
        return ALLOT_ENOMEM;
    for (int e = 0; e < s->n; e++) {
        const struct allot_job *v = &q->jobs[s->vs[e].id];
        for (int k = 0; k < v->spec.n_tasks; k++)
            if (v->pl[k].node >= 0 && v->pl[k].node < nn)
                s->slots[w++] = (struct slot){.node = v->pl[k].node,
                                              .e = e,
                                              .k = k,
                                              .gpus = __builtin_popcount(v->pl[k].gpu_mask)};
    }
    if (q->fast && w > 64) {
        /* made in (candidate, task) order: a stable sort by node is enough */
        int rc = slots_by_node(s->slots, w, nn);
        if (rc)
            return rc;
    } else {
        qsort(s->slots, w, sizeof(*s->slots), cmp_slot);
    }
    /* one slot per (node, candidate): its GPUs summed, its first task kept */
    n = 0;
    for (size_t i = 0; i < w; i++) {
        if (n > 0 && s->slots[n - 1].node == s->slots[i].node && s->slots[n - 1].e == s->slots[i].e)
            s->slots[n - 1].gpus += s->slots[i].gpus;
        else
            s->slots[n++] = s->slots[i];
    }
    s->n_slots = n;
    /* whole free GPUs per node, kept current as candidates are taken off */
    s->node_free = allot_malloc((n + 1) * sizeof(*s->node_free));
    s->slot_next = allot_malloc((n + 1) * sizeof(*s->slot_next));
    s->e_slot = allot_malloc(((size_t)s->n + 1) * sizeof(*s->e_slot));
    if (!s->node_free || !s->slot_next || !s->e_slot)
        return ALLOT_ENOMEM;
    for (int e = 0; e < s->n; e++)
        s->e_slot[e] = -1;
    for (size_t i = n; i-- > 0;) {
        s->slot_next[i] = s->e_slot[s->slots[i].e];
        s->e_slot[s->slots[i].e] = (int)i;
        s->node_free[i] = i + 1 < n && s->slots[i + 1].node == s->slots[i].node
                              ? s->node_free[i + 1]
                              : allot_node_whole_free(allot_cluster_node(q->c, s->slots[i].node));
    }
    return 0;
}

/* Candidate e was taken off: the whole free GPUs of its nodes changed. */
static void slots_refresh(struct allot_queue *q, struct search *s, int e)
{
    for (int i = s->e_slot[e]; i >= 0; i = s->slot_next[i]) {
        int node = s->slots[i].node, f = allot_node_whole_free(allot_cluster_node(q->c, node));
        /* every slot of the node carries the count */
        for (int x = i; x >= 0 && s->slots[x].node == node; x--)
            s->node_free[x] = f;
        for (size_t x = (size_t)i + 1; x < s->n_slots && s->slots[x].node == node; x++)
            s->node_free[x] = f;
    }
}

/*
 * Room for one task of j on one node: of the nodes that hold candidates not
 * yet chosen, the one where freeing the fewest, cheapest of them (cheapest
 * first) gives the task enough whole GPUs, at most `max`. Nodes are ranked
 * by how many of those candidates are pinned (work whose class is not
 * preemptible is taken last, across nodes as within one), then by the work
 * lost; ties go to the node whose cheapest candidate comes first. One pass
 * over the slots.
 * Writes the candidates' indices into pick and returns how many (0: no node
 * can make room).
 */
static int node_pick(struct allot_queue *q, const struct allot_job *j, const struct search *s,
                     int *pick, int max)
{
    int need = j->spec.task.num_gpu, best_n = 0, best_pinned = INT32_MAX, cur[64];
    int best_top = INT32_MAX; /* the highest priority class it takes there */
    int64_t best_cost = INT64_MAX;
    int best_e = INT32_MAX, best_k = INT32_MAX;

    for (size_t i = 0; i < s->n_slots;) {
        size_t end = i, x;
        int node = s->slots[i].node, free, m = 0, pinned = 0, first_e, first_k, top = INT32_MIN;
        int64_t cost = 0;
        while (end < s->n_slots && s->slots[end].node == node)
            end++;
        if (!allot_node_may_host(allot_cluster_node(q->c, node), &j->spec.task)) {
            i = end; /* no room made there would serve j (its labels, GPU model) */
            continue;
        }
        /* a node is evaluated at its cheapest candidate not yet chosen */
        for (x = i; x < end && s->chosen[s->slots[x].e]; x++)
            ;
        if (x == end) {
            i = end;
            continue;
        }
        first_e = s->slots[x].e;
        first_k = s->slots[x].k;
        free = s->node_free[x];
        for (; x < end && free < need && m < max && m < 64; x++) {
            const struct slot *sl = &s->slots[x];
            if (s->chosen[sl->e] || !sl->gpus)
                continue;
            free += sl->gpus;
            cost += s->vs[sl->e].cost;
            pinned += s->vs[sl->e].pinned;
            top = s->vs[sl->e].prio > top ? s->vs[sl->e].prio : top;
            cur[m++] = sl->e;
        }
        /* the fewest pinned victims, then the lowest classes (a victim of
         * a higher class would preempt the lower in its turn), then the
         * least lost work */
        bool better = pinned < best_pinned ||
                      (pinned == best_pinned &&
                       (top < best_top ||
                        (top == best_top &&
                         (cost < best_cost ||
                          (cost == best_cost &&
                           (first_e < best_e || (first_e == best_e && first_k < best_k)))))));
        if (free >= need && better) {
            best_top = top;
            best_pinned = pinned;
            best_cost = cost;
            best_e = first_e;
            best_k = first_k;
            best_n = m;
            for (int e = 0; e < m; e++)
                pick[e] = cur[e];
        }
        i = end;
    }
    return best_n;
}

static void victim_evict(struct allot_queue *q, struct allot_job *v, int on, int off, int64_t now);

/* Puts tasks [0, off) of tentatively released victim v back, in order, and
 * its usage on the quotas. Returns 0, or ALLOT_ENOMEM when the cluster
 * refused one: v is then evicted (victim_evict). */
static int victim_back(struct allot_queue *q, struct allot_job *v, int off, int64_t now)
{
    struct allot_resvec use;

    for (int k = 0; k < off; k++) {
        if (allot_sched_restore(q->placer, &v->pl[k]) != 0) {
            /* out of memory in the cluster's index, or room held by an
             * orphan that could not be released: memory either way (a
             * node that takes no new work keeps what ran on it) */
            victim_evict(q, v, k, off, now);
            return ALLOT_ENOMEM;
        }
    }
    queue_job_usage(q, v, &use);
    allot_tenants_charge(q->t, v->spec.tenant, &use, +1);
    return 0;
}

/* Takes running job v's tasks off the cluster and its usage off the quotas,
 * tentatively. Returns 0, or an error with v back in place, or evicted when
 * putting it back failed too. */
static int victim_off(struct allot_queue *q, struct allot_job *v, int64_t now)
{
    struct allot_resvec use;

    queue_job_usage(q, v, &use);
    allot_tenants_charge(q->t, v->spec.tenant, &use, -1);
    for (int k = 0; k < v->spec.n_tasks; k++) {
        int rc = allot_sched_release(q->placer, &v->pl[k]);
        if (rc) {
            int rb = victim_back(q, v, k, now);
            return rb ? rb : rc;
        }
    }
    return 0;
}

/*
 * A tentatively released victim that could not be put back: the cluster
 * holds its tasks [0, on) and [off, n_tasks) only, so it cannot go on
 * running as if placed. Releases those, and stops and requeues it (room for
 * its tasks as orphans and for it in the pending list reserved by the
 * caller). Its usage is already off the quotas.
 */
static void victim_evict(struct allot_queue *q, struct allot_job *v, int on, int off, int64_t now)
{
    queue_pl_release_all(q, v->pl, on);
    queue_pl_release_all(q, v->pl + off, v->spec.n_tasks - off);
    queue_job_leave(q, v, now);
    queue_requeue(q, v, now);
    queue_set_why(v, ALLOT_WHY_EVICTED, 0, 0, -1, 0, 0);
    queue_emit(q, ALLOT_DEC_STOP, v, allot_queue_reason(q, v->id));
}

/* True (1) when j would be admitted and placed (then undone), 0 when not,
 * or ALLOT_ENOMEM. */
int queue_would_fit(struct allot_queue *q, struct allot_job *j)
{
    struct allot_resvec use;
    bool ok;
    int rc;

    if (q->o.quotas &&
        !allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, NULL, NULL))
        return 0;
    rc = queue_gang_place(q, j);
    if (rc)
        return rc == ALLOT_ENOMEM ? rc : 0;
    queue_job_usage(q, j, &use);
    ok = !q->o.quotas ||
         allot_tenants_admits(q->t, j->spec.tenant, &use, q->o.borrowing, NULL, NULL);
    queue_gang_unplace(q, j);
    return ok;
}

/* Takes candidate e off tentatively, after reserving what evicting every
 * victim taken off so far would need. Returns 0 or an error (e is then not
 * off: back in place, or evicted). */
static int search_take(struct allot_queue *q, struct search *s, int e, int64_t now)
{
    struct allot_job *v = &q->jobs[s->vs[e].id];
    int rc;

    s->chosen[e] = true;
    if (queue_orphans_reserve(q, (size_t)v->spec.n_tasks) ||
        queue_list_reserve(&q->pending, q->n_pending, &q->pending_cap, (size_t)s->used + 1))
        return ALLOT_ENOMEM;
    rc = victim_off(q, v, now);
    if (rc)
        return rc;
    s->order[s->used++] = e;
    s->tasks_off += (size_t)v->spec.n_tasks;
    slots_refresh(q, s, e);
    /* every later reservation keeps room to evict the victims now off */
    q->orphans_keep = s->tasks_off;
    return 0;
}

/* Whether one of v's tasks was placed exclusive (node or GPU). */
static bool placed_exclusive(const struct allot_job *v)
{
    for (int k = 0; k < v->spec.n_tasks; k++)
        if (v->pl[k].isolation != ALLOT_ISO_SHARED)
            return true;
    return false;
}

/* Puts every victim taken off back, in the order they were taken, those
 * placed exclusive first: an exclusive task needs its node (or GPU) empty
 * or held by its own tenant, so it must not come back after a shared task
 * of its tenant that joined it later (a tenant whose isolation changed
 * while both ran). Returns 0, or an error when one had to be evicted (the
 * others are back). */
static int search_restore(struct allot_queue *q, struct search *s, int64_t now)
{
    int rc = 0;

    /* a trial placement whose release failed would hold a victim's room */
    queue_orphans_retry(q);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->used; i++) {
            struct allot_job *v = &q->jobs[s->vs[s->order[i]].id];
            int r;
            /* one evicted in the first pass is requeued, its tasks gone */
            if (!v->pl || placed_exclusive(v) != (pass == 0))
                continue;
            r = victim_back(q, v, v->spec.n_tasks, now);
            if (r && !rc)
                rc = r;
        }
    return rc;
}

/*
 * Step 3b, after j fits: reprieves the victims that were taken as the
 * cheapest anywhere (for quota, or when no one node could be freed) and
 * that j fits without, the costliest first: each is put back and kept
 * back when j still fits, else taken off again. A victim taken for quota
 * is often needless once the victims of the node j lands on are off.
 * (Victims taken for a node were the cheapest way to free it.) Only when
 * every victim's tasks are shared: then putting them back in any order is
 * a state isolation allows (all of them ran together with what runs now),
 * which search_restore relies on; an exclusive victim may need the order
 * it was placed in. Returns 1 (j fits with s->order[0..used)), or an
 * error.
 */
/* Takes candidate e (job v) out of the chosen set. */
static void search_drop(struct search *s, int e, const struct allot_job *v)
{
    int w = 0;

    s->chosen[e] = false;
    s->tasks_off -= (size_t)v->spec.n_tasks;
    for (int k = 0; k < s->used; k++)
        if (s->order[k] != e)
            s->order[w++] = s->order[k];
    s->used = w;
}

static int search_prune(struct allot_queue *q, struct allot_job *j, struct search *s, int64_t now)
{
    int by_cost[64], n = 0;

    if (s->used < 2)
        return 1;
    for (int i = 0; i < s->used; i++)
        if (placed_exclusive(&q->jobs[s->vs[s->order[i]].id]))
            return 1;
    for (int i = 0; i < s->n_any; i++)
        if (s->chosen[s->any[i]])
            by_cost[n++] = s->any[i];
    for (int i = 1; i < n; i++) /* insertion sort, costliest first (n <= 64) */
        for (int k = i; k > 0 && cmp_victim(&s->vs[by_cost[k - 1]], &s->vs[by_cost[k]]) < 0; k--) {
            int x = by_cost[k];
            by_cost[k] = by_cost[k - 1];
            by_cost[k - 1] = x;
        }
    for (int i = 0; i < n && s->used > 1; i++) {
        int e = by_cost[i], fit;
        struct allot_job *v = &q->jobs[s->vs[e].id];
        if (q->o.quotas) { /* needed for quota: known without the cluster */
            struct allot_resvec use;
            bool admitted;
            queue_job_usage(q, v, &use);
            allot_tenants_charge(q->t, v->spec.tenant, &use, +1);
            admitted =
                allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, NULL, NULL);
            allot_tenants_charge(q->t, v->spec.tenant, &use, -1);
            if (!admitted)
                continue;
        }
        fit = victim_back(q, v, v->spec.n_tasks, now);
        if (fit == 0) {
            fit = queue_would_fit(q, j);
            if (fit == 0) { /* needed: off again */
                fit = victim_off(q, v, now);
                if (fit == 0)
                    continue;
            }
        }
        /* reprieved (back in place), or an error that left v back in place
         * or evicted: out of the set either way */
        search_drop(s, e, v);
        if (fit < 0) {
            q->orphans_keep = s->tasks_off;
            return fit;
        }
    }
    q->orphans_keep = s->tasks_off;
    return 1;
}

/* With the set taken off (as search_trial holds it): true when each victim
 * of another tenant whose class is not preemptible would still lie beyond
 * its tenant's nominal in part were it the last of the set taken (its
 * tenant, with the set off and it back, holds more than its nominal):
 * taken one after the other, each leaves a tenant that still borrowed. */
static bool search_pinned_ok(const struct allot_queue *q, const struct allot_job *j,
                             const struct search *s)
{
    for (int i = 0; i < s->used; i++) {
        const struct allot_job *v = &q->jobs[s->vs[s->order[i]].id];
        const struct allot_tenant *x = allot_tenants_get(q->t, v->spec.tenant);
        struct allot_resvec use;
        bool kept = false;

        if (v->spec.tenant == j->spec.tenant || queue_job_preemptible(q, v))
            continue;
        queue_job_usage(q, v, &use);
        for (int k = 0; k < ALLOT_RES_MAX && !kept; k++)
            kept = use.v[k] > 0 && x->quota[k].nominal != ALLOT_UNLIMITED &&
                   x->usage[k] + use.v[k] > x->quota[k].nominal;
        if (!kept)
            return false;
    }
    return true;
}

/* With every victim off (as now, in the trial): each other tenant that
 * gives some up by fair-share reclaim keeps at least its fair share. */
static bool search_fair_ok(const struct allot_queue *q, const struct allot_job *j,
                           const struct search *s)
{
    for (int i = 0; i < s->used; i++) {
        int t = q->jobs[s->vs[s->order[i]].id].spec.tenant;
        if (t != j->spec.tenant && fair_usage(q, t) < queue_fair_share(q, t))
            return false;
    }
    return true;
}

/* Whether stopping v may free room j can use: a job that names no labels
 * or models, or v runs a task on a node j may use. */
static bool frees_room_for(const struct allot_queue *q, const struct allot_job *j,
                           const struct allot_job *v)
{
    if (!allot_task_picks_nodes(&j->spec.task))
        return true;
    for (int k = 0; v->pl && k < v->spec.n_tasks; k++)
        if (allot_node_may_host(allot_cluster_node(q->c, v->pl[k].node), &j->spec.task))
            return true;
    return false;
}

/*
 * Step 3: add victims until j would be admitted and placed: against quota,
 * the cheapest borrowed work anywhere; against room, the cheapest set that
 * frees one node enough for one of j's tasks, node after node. Everything
 * taken off is put back before returning. Returns 1 when s->order[0..used)
 * makes room, 0 when no set of at most 64 does, or an error.
 */
static int search_trial(struct allot_queue *q, struct allot_job *j, struct search *s, int64_t now)
{
    int fit, rc = 0;

    for (;;) {
        int pick[64], np = 0;
        bool room;
        fit = queue_would_fit(q, j);
        if (fit != 0 || s->used >= 64)
            break;
        room = !quota_blocked(q, j); /* else quota: borrowed work anywhere frees it */
        if (room && j->spec.task.num_gpu > 0)
            np = node_pick(q, j, s, pick, 64 - s->used);
        for (int i = 0; i < s->n && np == 0; i++)
            if (!s->chosen[i] && (!room || frees_room_for(q, j, &q->jobs[s->vs[i].id]))) {
                pick[np++] = i;
                s->any[s->n_any++] = i; /* one per pass, while s->used < 64 */
            }
        if (np == 0)
            break;
        for (int p = 0; p < np && rc == 0; p++)
            rc = search_take(q, s, pick[p], now);
        if (rc)
            break;
    }
    if (fit == 1 && rc == 0)
        fit = search_prune(q, j, s, now);
    if (fit == 1 && s->fair && !search_fair_ok(q, j, s))
        fit = 0;
    if (fit == 1 && !search_pinned_ok(q, j, s))
        fit = 0;
    {
        int rb = search_restore(q, s, now);
        q->orphans_keep = 0;
        if (fit < 0)
            return fit;
        return rc ? rc : rb ? rb : fit;
    }
}

/* With quota in j's way: whether taking the usage of the first 64
 * candidates off the quotas would admit it. A trial takes candidates in
 * that order while quota blocks (and admission only grows as usage goes),
 * 64 at most: when those do not admit j, the trial cannot, so the search
 * ends before it touches the cluster. */
static bool admits_without_first(struct allot_queue *q, const struct allot_job *j,
                                 const struct search *s)
{
    int n = s->n < 64 ? s->n : 64;
    bool ok;

    for (int e = 0; e < n; e++)
        queue_job_charge(q, &q->jobs[s->vs[e].id], -1);
    ok = allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, NULL, NULL);
    for (int e = 0; e < n; e++)
        queue_job_charge(q, &q->jobs[s->vs[e].id], +1);
    return ok;
}

/* Records that j preempted v (the last four preemptors are remembered). */
static void note_preemptor(struct allot_job *v, const struct allot_job *j)
{
    v->preemptions++;
    if (v->n_preemptors < 4) {
        v->preemptors[v->n_preemptors++] = j->id;
    } else {
        memmove(v->preemptors, v->preemptors + 1, 3 * sizeof(int));
        v->preemptors[3] = j->id;
    }
}

/* Step 4: preempts the chosen victims (queue_victims_signal). */
static int victims_preempt(struct allot_queue *q, struct allot_job *j, const struct search *s,
                           int64_t now)
{
    int ids[64];

    for (int i = 0; i < s->used; i++)
        ids[i] = s->vs[s->order[i]].id;
    return queue_victims_signal(q, j, ids, s->used, s->tasks_off, s->fair ? 1 : 0, now);
}

int queue_victims_signal(struct allot_queue *q, struct allot_job *j, const int *ids, int n,
                         size_t tasks, int how, int64_t now)
{
    int stopping = 0, kind0 = 0;
    int64_t g = 0;
    bool grace = false;

    /* everything below must not fail halfway */
    if (queue_orphans_reserve(q, tasks) ||
        queue_list_reserve(&q->pending, q->n_pending, &q->pending_cap, (size_t)n))
        return ALLOT_ENOMEM;
    /* one victim with a grace period: all of them stop when it ends (or
     * once all are gone, allot_queue_stopped), so that the room they make
     * comes free at once, for j. Victims stopped at once would free theirs
     * while j still waits: other work (they themselves, requeued) would
     * take it, and j would have to preempt again when the grace ends. */
    for (int i = 0; i < n && q->o.grace_s > 0; i++)
        grace |= q->jobs[ids[i]].spec.checkpointable;
    q->serial++; /* victims stop being candidates */
    for (int i = 0; i < n; i++) {
        struct allot_job *v = &q->jobs[ids[i]];
        int kind = how == 2 ? ALLOT_PREEMPT_MOVE : preempt_kind(q, j, v, how == 1);
        char why[ALLOT_REASON_MAX];
        if (i == 0)
            kind0 = kind;
        note_preemptor(v, j);
        allot_fmt(why, sizeof(why), "%s job %s", queue_preempt_text(kind), j->name);
        g += v->req.v[ALLOT_RES_GPU];
        v->moving = how == 2;
        if (grace) {
            v->state = ALLOT_JOB_STOPPING;
            v->gone = false;
            v->stop_at = now + q->o.grace_s;
            v->preempted_for = j->id;
            q->tc[v->spec.tenant].stopping += v->req.v[ALLOT_RES_GPU];
            if (j->stopping_victims++ == 0 && j->state == ALLOT_JOB_PENDING)
                q->tc[j->spec.tenant].waiting += j->req.v[ALLOT_RES_GPU];
            if (v->stop_at < q->wakeup)
                q->wakeup = v->stop_at;
            queue_fast_timer(q, v);
            stopping++;
            queue_emit(q, ALLOT_DEC_PREEMPT, v, why);
        } else {
            queue_emit(q, ALLOT_DEC_PREEMPT, v, why);
            queue_job_unplace(q, v, now);
            queue_requeue(q, v, now);
            queue_set_why(v, ALLOT_WHY_PREEMPTED, 0, kind, j->id, 0, 0);
        }
    }
    if (stopping) {
        const struct allot_job *v0 = &q->jobs[ids[0]];
        queue_set_why(j, ALLOT_WHY_RECLAIM, v0->spec.tenant, kind0, -1, g, q->o.grace_s);
        j->reclaim_why = j->why;
    }
    return 0;
}

/*
 * Until when j's last fruitless victim search still holds (INT64_MIN: it
 * does not). Only a job leaving the cluster frees room or quota; a job
 * starting takes some and becomes a candidate only once past its minimum
 * runtime (and LAS threshold), so starts since the search matter from
 * the search time plus the least minimum runtime on; but a start of a
 * tenant that runs borrowed work its class does not let be preempted at
 * once (pinned_epoch): that work may lie beyond its nominal now, which
 * makes it a reclaim candidate (beyond_nominal). Running jobs that
 * were not candidates become ones at preempt_recheck_at. With the lending
 * hold, admission also changes as recent peaks decay, so a search holds
 * only for the time it ran at.
 */
int64_t queue_search_memo_until(const struct allot_queue *q, const struct allot_job *j)
{
    int64_t until = j->preempt_recheck_at;

    if (j->preempt_epoch != q->leave_epoch + 1 || j->preempt_pinned != q->pinned_epoch)
        return INT64_MIN;
    if (q->o.hold_half_life_s > 0 && q->o.quotas)
        return j->preempt_searched_at + 1 < until ? j->preempt_searched_at + 1 : until;
    if (j->preempt_starts != q->starts) {
        int64_t fresh = q->min_runtime_floor > INT64_MAX - j->preempt_searched_at
                            ? INT64_MAX
                            : j->preempt_searched_at + q->min_runtime_floor;
        if (fresh < until)
            until = fresh;
    }
    return until;
}

/* Finds the cheapest victim set for j and preempts it. Returns 1 when
 * victims were signalled or stopped (or already are), 0 when none would
 * help, or an error (nothing preempted; a victim that could not be put back
 * after the trial was stopped and requeued). */
int queue_try_preempt(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    struct search s; /* set only for a search run in full (it is large) */
    bool in_nom;
    int rc;
    int64_t known;
    uint64_t serial;

    if (j->stopping_victims > 0)
        return 1; /* already making room */
    if (now < queue_search_memo_until(q, j))
        return 0;
    /* The cycle's budget is spent: search at the next cycle. Reclaim for a
     * job inside its tenant's nominal quota is the guarantee (in-quota
     * wait): it has its own, larger budget, so that other searches cannot
     * use it up. */
    in_nom = queue_fast_in_nom(q, j);
    if ((in_nom ? q->reclaims_left : q->searches_left) <= 0)
        return 0;
    if (in_nom)
        q->reclaims_left--;
    else
        q->searches_left--;
    j->preempt_epoch = q->leave_epoch + 1;
    j->preempt_starts = q->starts;
    j->preempt_pinned = q->pinned_epoch;
    j->preempt_recheck_at = INT64_MAX;
    j->preempt_searched_at = now;
    queue_fast_searched(q, j);
    /* the same search as one that just came to nothing (queue_fast.c) */
    known = queue_fast_search_get(q, j, now);
    if (known != INT64_MIN) {
        j->preempt_recheck_at = known;
        return 0;
    }
    q->work_left--; /* a search run in full is work (opts.cycle_work) */
    serial = q->serial;
    memset(&s, 0, sizeof(s));
    rc = search_collect(q, j, in_nom, now, &s);
    if (rc > 0 && quota_blocked(q, j) && !admits_without_first(q, j, &s))
        rc = 0;
    if (rc > 0) {
        s.chosen = allot_calloc((size_t)s.n, sizeof(*s.chosen));
        rc = s.chosen ? search_slots(q, &s) : ALLOT_ENOMEM;
        if (rc == 0)
            rc = search_trial(q, j, &s, now);
        if (rc == 1)
            rc = victims_preempt(q, j, &s, now) < 0 ? ALLOT_ENOMEM : 1;
    }
    if (rc == 0 && s.fair)
        q->fair[j->spec.tenant].failed = j->req.v[ALLOT_RES_GPU];
    if (rc < 0)
        j->preempt_epoch = 0; /* search again next time */
    if (rc == 0)
        queue_fast_search_put(q, j, now, serial, j->preempt_recheck_at);
    search_free(&s);
    return rc;
}

void queue_las_free(struct las_pool *p)
{
    if (p)
        allot_free(p->vs);
    allot_free(p);
}

int64_t queue_lost_work(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    return lost_work(q, v, now);
}

bool queue_placed_exclusive(const struct allot_job *v)
{
    return placed_exclusive(v);
}

int queue_victim_off(struct allot_queue *q, struct allot_job *v, int64_t now)
{
    return victim_off(q, v, now);
}

int queue_victim_back(struct allot_queue *q, struct allot_job *v, int64_t now)
{
    return victim_back(q, v, v->spec.n_tasks, now);
}
