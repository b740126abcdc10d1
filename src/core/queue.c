/*
 * The multi-tenant job queue (see queue.h for the cycle and guarantees,
 * docs/tenancy.md for the rules). Jobs live in one array indexed by id;
 * pending and running jobs are kept in two id lists, running jobs also in
 * an index by tenant and of borrowed work (the victim search's pools). The
 * state is declared in queue_int.h; the order in which a cycle considers
 * pending jobs (and the ordering policies) is queue_serve.c, the victim
 * search queue_preempt.c.
 *
 * Standing (who may preempt whom): a job may preempt another only when the
 * victim is past its minimum runtime, and either preemptible and of lower
 * priority in the same tenant, or borrowed (running above its tenant's
 * nominal; whatever its class) while the preemptor fits inside its own
 * tenant's nominal. Both
 * relations are strict (priority strictly lower; in-nominal work is never a
 * victim of reclaim). Quotas shift as jobs come and go, so a reclaimed job
 * could later find its reclaimer borrowed; the last four preemptors of
 * every job are remembered and never become its victims, so no two jobs
 * preempt each other in a loop.
 *
 * The cluster: the queue writes it only through its scheduler
 * (allot_sched_place / allot_sched_apply / allot_sched_release). Every
 * task the cluster holds belongs to a running (or stopping) job, or is an
 * orphan: a placement whose release the cluster refused for lack of memory,
 * kept in q->orphans and released again at the next event. Everything that
 * must not fail halfway (unplacing a job, requeueing it, undoing a trial)
 * reserves its memory first; the one step that can still fail is putting a
 * tentatively released victim back, and then the victim is stopped and
 * requeued (ALLOT_WHY_EVICTED) rather than left running on GPUs that look
 * free. allot_queue_check_invariants checks that the cluster's per-node and
 * per-GPU task counts, CPU and memory equal those of the running jobs and
 * orphans.
 */
#include "queue_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- small helpers -------------------------------------------------------- */

static void list_del(int *v, size_t *n, int id)
{
    for (size_t i = 0; i < *n; i++)
        if (v[i] == id) {
            memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
            (*n)--;
            return;
        }
}

/* Appends job id to the running list (room reserved by the caller). */
static void running_add(struct allot_queue *q, int id)
{
    q->run_at[id] = q->n_running;
    q->running[q->n_running++] = id;
}

/* Takes job id off the running list in O(1), leaving a hole: the list
 * keeps start order (stop_due and queue_reserve read it in that order). */
static void running_del(struct allot_queue *q, int id)
{
    size_t i = q->run_at[id];

    if (ALLOT_NEVER(i >= q->n_running || q->running[i] != id))
        return;
    q->running[i] = -1;
    q->n_holes++;
}

void queue_running_compact(struct allot_queue *q)
{
    size_t w = 0;

    if (q->n_holes * 2 <= q->n_running)
        return;
    for (size_t i = 0; i < q->n_running; i++)
        if (q->running[i] >= 0) {
            q->running[w] = q->running[i];
            q->run_at[q->running[w]] = w;
            w++;
        }
    q->n_running = w;
    q->n_holes = 0;
}

/* Whether pending job j asks for more than its tenants may ever hold (a
 * quota, not a shape): it then waits for good ("can never start") and is
 * no demand for the fair shares, which would otherwise hold other
 * tenants' borrowing back on an idle cluster. */
static bool never_starts(const struct allot_queue *q, const struct allot_job *j)
{
    return q->o.quotas &&
           !allot_tenants_ever_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, NULL, NULL);
}

/* Job j joins (sign 1) or leaves (-1) the pending jobs of its tenant's counts. */
static void pending_count(struct allot_queue *q, struct allot_job *j, int sign)
{
    struct ten_count *c = &q->tc[j->spec.tenant];
    int64_t g = sign * j->req.v[ALLOT_RES_GPU];

    if (sign > 0)
        j->never = never_starts(q, j);
    c->pending += g;
    if (j->never)
        c->never += g;
    if (j->stopping_victims > 0)
        c->waiting += g;
}

/* The pending jobs' job.never again, when the quotas or the cluster's
 * capacity changed since they were found (rare: not every round). */
static void never_refresh(struct allot_queue *q)
{
    uint64_t gen = allot_tenants_quota_gen(q->t);
    /* every resource: a root without a quota is bounded by the cluster's */
    if (gen == q->never_quotas && !memcmp(&q->capacity, &q->never_cap, sizeof(q->capacity)))
        return;
    q->never_quotas = gen;
    q->never_cap = q->capacity;
    for (size_t t = 0; t < q->tc_n; t++)
        q->tc[t].never = 0;
    for (size_t i = 0; i < q->n_pending; i++) {
        struct allot_job *j = &q->jobs[q->pending[i]];
        j->never = never_starts(q, j);
        if (j->never)
            q->tc[j->spec.tenant].never += j->req.v[ALLOT_RES_GPU];
    }
}

/* Appends job id to the pending list (room reserved by the caller). */
static void pending_add(struct allot_queue *q, int id)
{
    q->pend_at[id] = q->n_pending;
    q->pending[q->n_pending++] = id;
    pending_count(q, &q->jobs[id], 1);
}

/* Takes job id off the pending list in O(1): the order of that list means
 * nothing (every reader sorts by key or takes a minimum). */
static void pending_del(struct allot_queue *q, int id)
{
    size_t i = q->pend_at[id];

    pending_count(q, &q->jobs[id], -1);
    if (ALLOT_NEVER(i >= q->n_pending || q->pending[i] != id)) {
        list_del(q->pending, &q->n_pending, id);
        return;
    }
    q->pending[i] = q->pending[--q->n_pending];
    q->pend_at[q->pending[i]] = i;
}

/* ---- writing the cluster (through the scheduler) --------------------------------- */

/* Makes room for n more orphans, so that pl_release cannot lose one, on
 * top of the q->orphans_keep that a victim trial holds for itself. */
int queue_orphans_reserve(struct allot_queue *q, size_t n)
{
    return allot_grow((void **)&q->orphans, &q->orphans_cap, q->n_orphans + n + q->orphans_keep,
                      sizeof(*q->orphans))
               ? ALLOT_ENOMEM
               : 0;
}

/* Releases placement p from the cluster. Never fails: when the cluster
 * refuses for lack of memory (its index may need a new class), p is kept as
 * an orphan, in room the caller reserved (orphans_reserve), and released
 * again later (orphans_retry); its GPUs look used meanwhile, never free. */
static void pl_release(struct allot_queue *q, const struct allot_placement *p)
{
    int rc = allot_sched_release(q->placer, p);

    if (rc == 0 || ALLOT_NEVER(rc != ALLOT_ENOMEM) || ALLOT_NEVER(q->n_orphans >= q->orphans_cap))
        return;
    q->orphans[q->n_orphans++] = *p;
    q->serial++;
}

/* Releases pl[0..n) in reverse order (see pl_release; room for n orphans
 * reserved by the caller). */
void queue_pl_release_all(struct allot_queue *q, const struct allot_placement *pl, int n)
{
    while (n-- > 0)
        pl_release(q, &pl[n]);
}

/* Tries again to release the orphans; keeps those the cluster still refuses. */
void queue_orphans_retry(struct allot_queue *q)
{
    size_t w = 0;

    for (size_t i = 0; i < q->n_orphans; i++)
        if (allot_sched_release(q->placer, &q->orphans[i]) != 0)
            q->orphans[w++] = q->orphans[i];
    if (w < q->n_orphans) {
        q->serial++;
        q->free_epoch++;
    }
    q->n_orphans = w;
}

/* ---- lifecycle ---------------------------------------------------------------- */

void queue_capacity_add(const struct allot_cluster *c, int from, int to, struct allot_resvec *cap)
{
    for (int i = from; i < to; i++) {
        const struct allot_node *n = allot_cluster_node(c, i);
        cap->v[ALLOT_RES_GPU] += (int64_t)n->n_gpus * ALLOT_MILLI;
        cap->v[ALLOT_RES_CPU] += n->cpu_milli;
        cap->v[ALLOT_RES_MEM] += n->mem_mib;
        if (n->model >= 0) {
            cap->v[ALLOT_RES_MODEL0 + n->model] += (int64_t)n->n_gpus * ALLOT_MILLI;
            cap->v[ALLOT_RES_GPU_MEM] +=
                n->n_gpus * allot_cluster_catalog(c)->models[n->model].memory_mib;
        }
    }
}

/* The cluster's resources: nodes join a daemon's cluster after its queue
 * exists, and none leaves (a state is not a size), but an empty node out
 * of service can change size (allot_cluster_update_node), so the count is
 * made again whenever the cluster says sizes changed. */
static void capacity_count(struct allot_queue *q)
{
    int n = allot_cluster_node_count(q->c);

    memset(&q->capacity, 0, sizeof(q->capacity));
    queue_capacity_add(q->c, 0, n, &q->capacity);
    q->capacity_nodes = n;
    q->capacity_resized = allot_cluster_resized(q->c);
}

struct allot_queue *allot_queue_new(struct allot_cluster *c, struct allot_tenants *t,
                                    const struct allot_queue_opts *opts, char *err, size_t errlen)
{
    struct allot_queue *q;
    const struct allot_sched_policy_ops *pl =
        allot_sched_policy_find(opts->placement ? opts->placement : "allot");
    const struct allot_queue_policy_ops *ord =
        allot_queue_policy_find(opts->order ? opts->order : "fair");
    struct allot_sched_opts so = {.seed = opts->seed};

    if (!pl || !ord) {
        allot_fmt(err, errlen, "unknown %s policy \"%s\"", pl ? "ordering" : "placement",
                  pl ? opts->order : opts->placement);
        return NULL;
    }
    if (!(opts->fair_cap == 0 || (opts->fair_cap >= 1 && opts->fair_cap <= 1e6))) {
        allot_fmt(err, errlen, "fair_cap %g: 0 (off) or a factor from 1 to 1e6", opts->fair_cap);
        return NULL;
    }
    q = allot_calloc(1, sizeof(*q));
    if (!q)
        goto oom;
    q->c = c;
    q->t = t;
    q->o = *opts;
    q->order = ord;
    allot_tenants_set_hold(t, opts->hold_half_life_s);
    q->placer = allot_sched_new(c, pl, &so);
    if (!q->placer)
        goto oom;
    capacity_count(q);
    q->wakeup = INT64_MAX;
    q->bor_head = -1;
    q->min_runtime_floor = INT64_MAX;
    /* a random placement may draw numbers even when a gang fails to place */
    q->fast = !opts->exhaustive && !(pl->flags & ALLOT_SCHED_POLICY_RANDOM);
    if (q->fast && queue_fast_new(q))
        goto oom;
    return q;
oom:
    allot_fmt(err, errlen, "out of memory");
    allot_queue_free(q);
    return NULL;
}

void allot_queue_free(struct allot_queue *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n_jobs; i++) {
        allot_free(q->jobs[i].name);
        allot_free(q->jobs[i].pl);
    }
    allot_free(q->jobs);
    allot_free(q->free_ids);
    allot_free(q->pending);
    allot_free(q->pend_at);
    allot_free(q->run_at);
    allot_free(q->bf);
    allot_free(q->running);
    allot_free(q->users);
    allot_free(q->first);
    allot_free(q->orphans);
    allot_free(q->ten_head);
    allot_free(q->tc);
    queue_las_free(q->las);
    queue_bor_free(q->bor);
    queue_bor_free(q->fairp);
    allot_free(q->fair);
    queue_fast_free(q->fq);
    queue_serving_free(q->serving);
    allot_sched_free(q->placer);
    allot_free(q);
}

int allot_queue_add_prio_class(struct allot_queue *q, const char *name, int value, bool preemptible)
{
    q->pause.valid = false; /* a cycle cut short starts over */
    if (q->n_prio >= ALLOT_PRIO_CLASSES || !name || !*name ||
        strlen(name) >= sizeof(q->prio[0].name))
        return ALLOT_EINVAL;
    for (int i = 0; i < q->n_prio; i++)
        if (strcmp(q->prio[i].name, name) == 0)
            return ALLOT_EEXIST;
    allot_strlcpy(q->prio[q->n_prio].name, name, sizeof(q->prio[0].name));
    q->prio[q->n_prio].value = value;
    q->prio[q->n_prio].preemptible = preemptible;
    return q->n_prio++;
}

/* Counts running job j in its tenant's pinned borrowed work by what its
 * class says now. */
static void pinned_refresh(struct allot_queue *q, struct allot_job *j);

/* Who may preempt whom, or in what order the pending jobs go, changed (a
 * class, a job's class, the quotas): the memos of fruitless victim
 * searches and placements and of the usage order they were made in, and
 * the tenants' pending orders, no longer hold; a cycle cut short starts
 * over. */
static void look_again(struct allot_queue *q)
{
    q->pause.valid = false;
    q->run_epoch++;
    q->leave_epoch++;
    q->free_epoch++;
    q->pinned_epoch++;
    q->serial++;
    queue_fast_all_dirty(q);
    queue_bor_reset(q);
}

int allot_queue_set_prio_class(struct allot_queue *q, int idx, const char *name, int value,
                               bool preemptible)
{
    q->pause.valid = false; /* a cycle cut short starts over */
    if (idx < 0 || idx >= q->n_prio || !name || !*name || strlen(name) >= sizeof(q->prio[0].name))
        return ALLOT_EINVAL;
    for (int i = 0; i < q->n_prio; i++)
        if (i != idx && strcmp(q->prio[i].name, name) == 0)
            return ALLOT_EEXIST;
    allot_strlcpy(q->prio[idx].name, name, sizeof(q->prio[0].name));
    q->prio[idx].value = value;
    q->prio[idx].preemptible = preemptible;
    /* the running jobs of the class may have become (not) preemptible */
    for (size_t i = 0; i < q->n_running; i++)
        if (q->running[i] >= 0 && q->jobs[q->running[i]].spec.prio_class == idx)
            pinned_refresh(q, &q->jobs[q->running[i]]);
    look_again(q);
    return 0;
}

int allot_queue_set_job_class(struct allot_queue *q, int id, int cls)
{
    struct allot_job *j;

    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    if (cls < -1 || cls >= q->n_prio)
        return ALLOT_EINVAL;
    j = &q->jobs[id];
    if (j->spec.prio_class == cls)
        return 0;
    j->spec.prio_class = cls;
    if (j->state == ALLOT_JOB_RUNNING || j->state == ALLOT_JOB_STOPPING)
        pinned_refresh(q, j);
    look_again(q); /* more than this job needs, but it is rare */
    return 0;
}

int allot_queue_set_limit(struct allot_queue *q, int id, int64_t limit_s)
{
    struct allot_job *j;

    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    if (limit_s < 0)
        return ALLOT_EINVAL;
    j = &q->jobs[id];
    if (j->state == ALLOT_JOB_DONE)
        return ALLOT_ESTATE;
    if (j->spec.limit_s == limit_s)
        return 0;
    j->spec.limit_s = limit_s;
    queue_fast_timer(q, j); /* the old timer no longer stands (tm_valid) */
    if (j->state == ALLOT_JOB_RUNNING && queue_limit_at(j) < q->wakeup)
        q->wakeup = queue_limit_at(j);
    look_again(q); /* what was found from its expected end (reservations) */
    return 0;
}

int allot_queue_job_count(const struct allot_queue *q)
{
    return (int)q->n_jobs;
}

const struct allot_job *allot_queue_job(const struct allot_queue *q, int id)
{
    return id >= 0 && (size_t)id < q->n_jobs && q->jobs[id].name ? &q->jobs[id] : NULL;
}

/* Removes id from a job's list of preemptors (the slot is about to be reused). */
static void drop_preemptor(struct allot_job *j, int id)
{
    for (int i = 0; i < j->n_preemptors;) {
        if (j->preemptors[i] == id)
            j->preemptors[i] = j->preemptors[--j->n_preemptors];
        else
            i++;
    }
}

int allot_queue_forget(struct allot_queue *q, int id)
{
    struct allot_job *j;

    q->pause.valid = false; /* a cycle cut short starts over */
    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    j = &q->jobs[id];
    if (j->state != ALLOT_JOB_DONE)
        return ALLOT_ESTATE;
    if (allot_grow((void **)&q->free_ids, &q->free_cap, q->n_free + 1, sizeof(*q->free_ids)))
        return ALLOT_ENOMEM;
    /* no live job may keep pointing at the slot: it will be someone else */
    for (size_t i = 0; i < q->n_pending; i++)
        drop_preemptor(&q->jobs[q->pending[i]], id);
    for (size_t i = 0; i < q->n_running; i++) {
        struct allot_job *r;
        if (q->running[i] < 0)
            continue;
        r = &q->jobs[q->running[i]];
        drop_preemptor(r, id);
        if (r->preempted_for == id)
            r->preempted_for = -1;
        if (r->backfill_for == id) {
            r->backfill_for = -1;
            q->bf[r->id].next = q->bf[r->id].prev = -1;
        }
    }
    allot_free(j->name);
    allot_free(j->pl);
    memset(j, 0, sizeof(*j));
    j->id = id;
    j->state = ALLOT_JOB_DONE;
    j->preempted_for = -1;
    j->backfill_for = -1;
    q->bf[id] = (struct bf_link){-1, -1, -1};
    q->free_ids[q->n_free++] = id;
    return 0;
}

struct allot_tenants *allot_queue_tenants(const struct allot_queue *q)
{
    return q->t;
}

struct allot_cluster *allot_queue_cluster(const struct allot_queue *q)
{
    return q->c;
}

int64_t allot_queue_next_wakeup(const struct allot_queue *q)
{
    return q->wakeup;
}

bool allot_queue_more(const struct allot_queue *q)
{
    return q->more;
}

/* ---- submission ------------------------------------------------------------------ */

/* The base resource vector of a gang (per-model GPUs are added once placed). */
static void job_request(const struct allot_queue *q, const struct allot_job_spec *s,
                        struct allot_resvec *r)
{
    const struct allot_catalog *cat = allot_cluster_catalog(q->c);
    int64_t n = s->n_tasks;
    int64_t milli = s->task.gpu_milli;

    memset(r, 0, sizeof(*r));
    if (s->task.mig_profile >= 0) {
        /* the smallest compute share any model gives this profile */
        milli = ALLOT_MILLI;
        for (int m = 0; m < cat->n_models; m++) {
            int lp = cat->models[m].profile_by_global[s->task.mig_profile];
            if (lp >= 0) {
                int64_t v = (int64_t)cat->models[m].profiles[lp].compute_slices * ALLOT_MILLI /
                            cat->models[m].compute_slices;
                if (v < milli)
                    milli = v;
            }
        }
    }
    r->v[ALLOT_RES_GPU] = n * s->task.num_gpu * milli;
    r->v[ALLOT_RES_CPU] = n * s->task.cpu_milli;
    r->v[ALLOT_RES_MEM] = n * s->task.mem_mib;
    r->v[ALLOT_RES_GPU_MEM] = n * s->task.num_gpu * s->task.gpu_mem_mib;
}

int allot_queue_submit(struct allot_queue *q, const struct allot_job_spec *spec, int64_t now,
                       char *err, size_t errlen)
{
    struct allot_job *j;
    const struct allot_tenant *ten = allot_tenants_get(q->t, spec->tenant);
    size_t slot;
    int rc;

    q->pause.valid = false; /* a cycle cut short starts over */
    if (!spec->name || !*spec->name) {
        allot_fmt(err, errlen, "job: name is empty");
        return ALLOT_EINVAL;
    }
    if (!ten || ten->first_child >= 0 || spec->tenant == 0) {
        allot_fmt(err, errlen, "job %s: tenant must be a leaf of the tenant tree", spec->name);
        return ALLOT_EINVAL;
    }
    if (spec->n_tasks < 1 || spec->n_tasks > 4096) {
        allot_fmt(err, errlen, "job %s: n_tasks %d out of range 1..4096", spec->name,
                  spec->n_tasks);
        return ALLOT_EINVAL;
    }
    if (spec->prio_class < -1 || spec->prio_class >= q->n_prio) {
        allot_fmt(err, errlen, "job %s: priority class %d unknown", spec->name, spec->prio_class);
        return ALLOT_EINVAL;
    }
    if (spec->qos < ALLOT_QOS_GUARANTEED || spec->qos > ALLOT_QOS_BEST_EFFORT ||
        spec->est_runtime_s < 0 || spec->limit_s < 0 || spec->min_runtime_s < 0) {
        allot_fmt(err, errlen, "job %s: %s", spec->name,
                  spec->qos < 0 || spec->qos > 2 ? "qos unknown" : "negative time");
        return ALLOT_EINVAL;
    }
    rc = allot_task_validate(allot_cluster_catalog(q->c), &spec->task, err, errlen);
    if (rc)
        return rc;
    if (allot_grow((void **)&q->jobs, &q->jobs_cap, q->n_jobs + 1, sizeof(*q->jobs)) ||
        allot_grow((void **)&q->pend_at, &q->pend_at_cap, q->n_jobs + 1, sizeof(*q->pend_at)) ||
        allot_grow((void **)&q->run_at, &q->run_at_cap, q->n_jobs + 1, sizeof(*q->run_at)) ||
        allot_grow((void **)&q->bf, &q->bf_cap, q->n_jobs + 1, sizeof(*q->bf)) ||
        allot_grow((void **)&q->pending, &q->pending_cap, q->n_pending + 1, sizeof(*q->pending)))
        goto oom;
    if ((size_t)spec->tenant >= q->tc_n) {
        size_t old = q->tc_n;
        if (allot_grow((void **)&q->tc, &q->tc_n, (size_t)spec->tenant + 1, sizeof(*q->tc)))
            goto oom;
        memset(q->tc + old, 0, (q->tc_n - old) * sizeof(*q->tc));
    }
    /* a forgotten job's slot first, so the table does not grow with ended jobs */
    slot = q->n_free ? (size_t)q->free_ids[q->n_free - 1] : q->n_jobs;
    j = &q->jobs[slot];
    memset(j, 0, sizeof(*j));
    j->name = allot_strdup(spec->name);
    if (!j->name)
        goto oom;
    j->spec = *spec;
    j->spec.name = j->name;
    /* every task carries its tenant and the tenant's isolation level */
    j->spec.task.tenant = spec->tenant;
    j->spec.task.isolation = ten->isolation;
    if (!j->spec.min_runtime_s)
        j->spec.min_runtime_s = q->o.min_runtime_s;
    j->id = (int)slot;
    j->preempted_for = -1;
    j->backfill_for = -1;
    q->bf[slot] = (struct bf_link){-1, -1, -1};
    j->state = ALLOT_JOB_PENDING;
    j->submit = j->first_submit = now;
    job_request(q, spec, &j->req);
    j->why.kind = ALLOT_WHY_NEW;
    pending_add(q, j->id);
    queue_fast_pending(q, j);
    /* the placement policy learns from submissions, once per task of a
     * gang; never from the placement attempts of later cycles */
    for (int k = 0; k < spec->n_tasks; k++)
        allot_sched_observe(q->placer, &j->spec.task);
    if (slot == q->n_jobs)
        q->n_jobs++;
    else
        q->n_free--;
    return j->id;
oom:
    allot_fmt(err, errlen, "job %s: out of memory", spec->name);
    return ALLOT_ENOMEM;
}

/* ---- running and stopping --------------------------------------------------------- */

/* Per-model GPU usage of a placed job. */
void queue_job_usage(const struct allot_queue *q, const struct allot_job *j, struct allot_resvec *r)
{
    *r = j->req;
    for (int k = 0; k < j->spec.n_tasks; k++) {
        const struct allot_node *n = allot_cluster_node(q->c, j->pl[k].node);
        if (n->model >= 0)
            r->v[ALLOT_RES_MODEL0 + n->model] +=
                (int64_t)__builtin_popcount(j->pl[k].gpu_mask) * j->pl[k].gpu_milli;
    }
}

void queue_job_charge(struct allot_queue *q, const struct allot_job *j, int sign)
{
    struct allot_resvec use;

    queue_job_usage(q, j, &use);
    allot_tenants_charge(q->t, j->spec.tenant, &use, sign);
}

/* ---- GPUs per user (fair order) -------------------------------------------------------- */

/* Makes room for one more user, so that users_add cannot fail. */
static int users_reserve(struct allot_queue *q)
{
    return allot_grow((void **)&q->users, &q->users_cap, q->n_users + 1, sizeof(*q->users))
               ? ALLOT_ENOMEM
               : 0;
}

/* Adds (sign +1) or removes (-1) running job j's GPUs to its user's use. */
static void users_add(struct allot_queue *q, const struct allot_job *j, int sign)
{
    size_t lo = 0, hi = q->n_users;
    int64_t key = queue_user_key(j);

    if (!q->order->user_share)
        return;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (q->users[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == q->n_users || q->users[lo].key != key) {
        if (ALLOT_NEVER(sign < 0 || q->n_users >= q->users_cap))
            return;
        memmove(q->users + lo + 1, q->users + lo, (q->n_users - lo) * sizeof(*q->users));
        q->users[lo] = (struct user_use){.key = key, .milli = 0};
        q->n_users++;
    }
    q->users[lo].milli += sign * j->req.v[ALLOT_RES_GPU];
}

/* ---- the index of running jobs (victim candidates) ------------------------------------ */

/* Makes room in the per-tenant index for tenant id `tenant`. */
static int index_reserve(struct allot_queue *q, int tenant)
{
    size_t old = q->ten_cap;

    if (allot_grow((void **)&q->ten_head, &q->ten_cap, (size_t)tenant + 1, sizeof(*q->ten_head)))
        return ALLOT_ENOMEM;
    for (size_t i = old; i < q->ten_cap; i++)
        q->ten_head[i] = -1;
    return 0;
}

/* Borrowed job j onto / off the borrowed list. */
static void bor_link(struct allot_queue *q, struct allot_job *j)
{
    q->n_bor++;
    j->bor_prev = -1;
    j->bor_next = q->bor_head;
    if (q->bor_head >= 0)
        q->jobs[q->bor_head].bor_prev = j->id;
    q->bor_head = j->id;
}

static void bor_unlink(struct allot_queue *q, struct allot_job *j)
{
    q->n_bor--;
    if (j->bor_prev >= 0)
        q->jobs[j->bor_prev].bor_next = j->bor_next;
    else
        q->bor_head = j->bor_next;
    if (j->bor_next >= 0)
        q->jobs[j->bor_next].bor_prev = j->bor_prev;
    j->bor_prev = j->bor_next = -1;
}

/* Counts running job j in its tenant's pinned borrowed work (on) or no
 * longer; j->pinned_bor says whether it is. */
static void pinned_count(struct allot_queue *q, struct allot_job *j, bool on)
{
    if (j->pinned_bor == on || !ALLOT_ALWAYS((size_t)j->spec.tenant < q->tc_n))
        return;
    q->tc[j->spec.tenant].pinned_bor += on ? 1 : -1;
    j->pinned_bor = on;
}

static void pinned_refresh(struct allot_queue *q, struct allot_job *j)
{
    pinned_count(q, j, j->borrowed && !queue_job_preemptible(q, j));
}

/* Links a job that starts into its tenant's list and, when borrowed, the
 * borrowed list (room reserved with index_reserve). */
static void index_add(struct allot_queue *q, struct allot_job *j)
{
    int *head = &q->ten_head[j->spec.tenant];

    j->ten_prev = -1;
    j->ten_next = *head;
    if (*head >= 0)
        q->jobs[*head].ten_prev = j->id;
    *head = j->id;
    q->tc[j->spec.tenant].running++;
    j->bor_prev = j->bor_next = -1;
    if (j->borrowed)
        bor_link(q, j);
}

static void index_del(struct allot_queue *q, struct allot_job *j)
{
    if (j->ten_prev >= 0)
        q->jobs[j->ten_prev].ten_next = j->ten_next;
    else
        q->ten_head[j->spec.tenant] = j->ten_next;
    if (j->ten_next >= 0)
        q->jobs[j->ten_next].ten_prev = j->ten_prev;
    q->tc[j->spec.tenant].running--;
    if (j->borrowed)
        bor_unlink(q, j);
}

/* Running job j's borrowed flag becomes bor: the borrowed list and the
 * pinned borrowed count follow. */
static void set_borrowed(struct allot_queue *q, struct allot_job *j, bool bor)
{
    if (j->borrowed == bor)
        return;
    if (bor) {
        bor_link(q, j);
    } else {
        bor_unlink(q, j);
        queue_bor_left(q, j);
    }
    j->borrowed = bor;
    pinned_refresh(q, j);
}

struct started {
    bool stopping; /* in its grace period: after the running ones */
    int64_t start;
    int64_t seq; /* its submission among jobs of the same start (spec.seq) */
    int id;
};

static int cmp_started(const void *a, const void *b)
{
    const struct started *x = a, *y = b;

    if (x->stopping != y->stopping)
        return x->stopping - y->stopping;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->seq != y->seq) /* the queue's slot is no order: a slot is used again */
        return x->seq < y->seq ? -1 : 1;
    return x->id - y->id;
}

int allot_queue_recount_borrowed(struct allot_queue *q, const bool *only)
{
    struct allot_resvec use;
    size_t n = 0;
    int changed = 0;
    struct started *ids = allot_malloc((q->n_running + 1) * sizeof(*ids));

    if (!ids)
        return ALLOT_ENOMEM;
    /* the jobs of the tenants asked for, running ones in the order they
     * started, then the stopping ones: on their way out, they keep their
     * flags and never push a running job beyond the nominal */
    for (size_t i = 0; i < q->n_running; i++) {
        if (q->running[i] < 0)
            continue;
        const struct allot_job *j = &q->jobs[q->running[i]];
        if (!only || only[j->spec.tenant])
            ids[n++] = (struct started){.stopping = j->state == ALLOT_JOB_STOPPING,
                                        .start = j->start,
                                        .seq = j->spec.seq,
                                        .id = j->id};
    }
    if (n)
        qsort(ids, n, sizeof(*ids), cmp_started);
    /* those jobs off their tenants' usage, then back on in that order, each
     * running one borrowed when it does not fit its tenant's nominal */
    for (size_t i = 0; i < n; i++)
        queue_job_charge(q, &q->jobs[ids[i].id], -1);
    for (size_t i = 0; i < n; i++) {
        struct allot_job *j = &q->jobs[ids[i].id];
        queue_job_usage(q, j, &use);
        bool bor = !allot_tenants_in_nominal(q->t, j->spec.tenant, &use);
        allot_tenants_charge(q->t, j->spec.tenant, &use, +1);
        if (!ids[i].stopping) {
            changed += bor != j->borrowed;
            set_borrowed(q, j, bor);
        }
    }
    allot_free(ids);
    /* the quotas changed: a job inside its tenant's nominal now may reclaim,
     * and other work may be a candidate: every search looks again */
    look_again(q);
    return changed;
}

bool queue_gone_held(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    const struct allot_job *p =
        v->state == ALLOT_JOB_STOPPING && v->gone && v->stop_at > now && v->preempted_for >= 0
            ? &q->jobs[v->preempted_for]
            : NULL;

    return p && p->state == ALLOT_JOB_PENDING && p->stopping_victims > p->gone_victims;
}

void queue_gone_check(struct allot_queue *q, int64_t now)
{
    int held = 0;

    if (!q->gone_held)
        return;
    for (size_t i = 0; i < q->n_running; i++) {
        struct allot_job *v = q->running[i] >= 0 ? &q->jobs[q->running[i]] : NULL;
        if (!v || v->state != ALLOT_JOB_STOPPING || !v->gone || v->stop_at <= now)
            continue;
        if (queue_gone_held(q, v, now)) {
            held++;
            continue;
        }
        /* the others of its preemption are gone too (or left), or the job
         * it made room for no longer waits: its grace ends now */
        v->stop_at = now;
        queue_fast_timer(q, v);
        if (now < q->wakeup)
            q->wakeup = now;
    }
    q->gone_held = held;
}

/* A running or stopping job leaves the cluster: the bookkeeping once its
 * placements are released and its usage uncharged. Never fails. */
void queue_job_leave(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    j->attained_s += (now - j->start) * queue_job_gpus(j);
    queue_fair_left(q, j);
    if (j->state == ALLOT_JOB_STOPPING && j->preempted_for >= 0) {
        q->jobs[j->preempted_for].stopping_victims--;
        q->jobs[j->preempted_for].gone_victims -= j->gone;
        j->preempted_for = -1;
    }
    j->gone = false;
    if (j->backfill_for >= 0)
        queue_backfill_unmark(q, j);
    q->run_epoch++;
    q->leave_epoch++;
    q->serial++;
    q->free_epoch++;
    q->n_excl -= j->spec.task.isolation != ALLOT_ISO_SHARED;
    if (j->borrowed)
        queue_bor_left(q, j);
    pinned_count(q, j, false);
    queue_fast_usage(q, j->spec.tenant);
    allot_free(j->pl);
    j->pl = NULL;
    running_del(q, j->id);
    index_del(q, j);
    users_add(q, j, -1);
}

/* Releases a running job's placements and quota. The caller reserved room
 * for its tasks as orphans (orphans_reserve), so it cannot fail. */
void queue_job_unplace(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    struct allot_resvec use;

    queue_job_usage(q, j, &use);
    allot_tenants_charge(q->t, j->spec.tenant, &use, -1);
    queue_pl_release_all(q, j->pl, j->spec.n_tasks);
    queue_job_leave(q, j, now);
}

/* Puts preempted job j back into the pending list; the caller reserved
 * room in it. A job that runs at most once (spec.once) ends instead. */
void queue_requeue(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    if (j->spec.once) {
        j->state = ALLOT_JOB_DONE;
        j->moving = false;
        return;
    }
    if (!ALLOT_NEVER(q->n_pending >= q->pending_cap))
        pending_add(q, j->id);
    j->state = ALLOT_JOB_PENDING;
    j->submit = now;
    queue_fast_pending(q, j);
}

/* Ends a running or stopping job at now (cancelled or finished). Returns 0
 * or ALLOT_ENOMEM with nothing changed. */
static int job_end(struct allot_queue *q, struct allot_job *j, int64_t now, int why)
{
    if (j->state != ALLOT_JOB_PENDING) {
        if (queue_orphans_reserve(q, (size_t)j->spec.n_tasks))
            return ALLOT_ENOMEM;
        queue_orphans_retry(q);
        queue_job_unplace(q, j, now);
    } else {
        pending_del(q, j->id);
        queue_fast_gone(q, j);
    }
    j->state = ALLOT_JOB_DONE;
    j->moving = false;
    j->why.kind = why;
    return 0;
}

int allot_queue_cancel(struct allot_queue *q, int id, int64_t now)
{
    q->pause.valid = false; /* a cycle cut short starts over */
    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    if (q->jobs[id].state == ALLOT_JOB_DONE)
        return ALLOT_ESTATE;
    return job_end(q, &q->jobs[id], now, ALLOT_WHY_CANCELLED);
}

int allot_queue_finish(struct allot_queue *q, int id, int64_t now)
{
    q->pause.valid = false; /* a cycle cut short starts over */
    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    if (q->jobs[id].state != ALLOT_JOB_RUNNING && q->jobs[id].state != ALLOT_JOB_STOPPING)
        return ALLOT_ESTATE;
    return job_end(q, &q->jobs[id], now, ALLOT_WHY_FINISHED);
}

int allot_queue_checkpointed(struct allot_queue *q, int id, int64_t at, int64_t now)
{
    struct allot_job *j;

    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    j = &q->jobs[id];
    if (j->state != ALLOT_JOB_RUNNING && j->state != ALLOT_JOB_STOPPING)
        return ALLOT_ESTATE;
    if (!j->spec.checkpointable || at < j->start || at > now)
        return ALLOT_EINVAL;
    if (at <= j->saved_at)
        return 0;
    j->saved_at = at;
    /* its lost work fell: fruitless victim searches and the candidate
     * pools built on the old figure no longer hold */
    q->pause.valid = false;
    q->leave_epoch++;
    queue_bor_reset(q);
    return 0;
}

/* Commits a placed job: charges quota, marks it running, emits START. The
 * caller reserved room in the running list (job_start_reserve). */
static void job_start(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    struct allot_resvec use;

    if (!ALLOT_NEVER(q->n_running >= q->running_cap))
        running_add(q, j->id);
    pending_del(q, j->id);
    queue_job_usage(q, j, &use);
    j->borrowed = !allot_tenants_in_nominal(q->t, j->spec.tenant, &use);
    index_add(q, j);
    users_add(q, j, +1);
    allot_tenants_charge(q->t, j->spec.tenant, &use, +1);
    j->state = ALLOT_JOB_RUNNING;
    j->moving = false;
    pinned_refresh(q, j);
    /* its tenant's usage grew: its pinned borrowed work may now lie beyond
     * its nominal, reclaimable (searches that found none look again) */
    if ((size_t)j->spec.tenant < q->tc_n)
        q->pinned_epoch += q->tc[j->spec.tenant].pinned_bor > 0;
    q->run_epoch++;
    q->serial++;
    q->n_excl += j->spec.task.isolation != ALLOT_ISO_SHARED;
    queue_fast_gone(q, j);
    queue_fast_usage(q, j->spec.tenant);
    q->starts++;
    q->work_left--;
    if (j->spec.min_runtime_s < q->min_runtime_floor)
        q->min_runtime_floor = j->spec.min_runtime_s;
    j->start = now;
    j->saved_at = now;
    j->run_from = q->o.limit_from_running ? INT64_MAX : now;
    j->runs++;
    /* its reservation is over: its backfill is no longer its victim */
    while (q->bf[j->id].head >= 0)
        queue_backfill_unmark(q, &q->jobs[q->bf[j->id].head]);
    queue_fast_timer(q, j);
    queue_fast_recheck_add(q, j);
    queue_las_started(q, j, now);
    if (j->borrowed)
        queue_bor_started(q, j, now);
    j->why.kind = ALLOT_WHY_RUNNING;
    queue_emit(q, ALLOT_DEC_START, j, j->borrowed ? "started on borrowed capacity" : "started");
}

int allot_queue_adopt(struct allot_queue *q, const struct allot_job_spec *spec,
                      const struct allot_placement *pl, int64_t start, int64_t now, char *err,
                      size_t errlen)
{
    struct allot_placement *mine = NULL;
    struct allot_job *j;
    allot_decision_fn fn = q->fn;
    int id, k, rc;

    q->pause.valid = false; /* a cycle cut short starts over */
    if (!pl || start > now) {
        allot_fmt(err, errlen, "job %s: no placement, or a start in the future", spec->name);
        return ALLOT_EINVAL;
    }
    id = allot_queue_submit(q, spec, now, err, errlen);
    if (id < 0)
        return id;
    j = &q->jobs[id];
    rc = ALLOT_ENOMEM;
    if (allot_grow((void **)&q->free_ids, &q->free_cap, q->n_free + 1, sizeof(*q->free_ids)) ||
        queue_list_reserve(&q->running, q->n_running, &q->running_cap, 1) ||
        index_reserve(q, j->spec.tenant) || users_reserve(q) ||
        queue_orphans_reserve(q, (size_t)j->spec.n_tasks) ||
        !(mine = allot_calloc((size_t)j->spec.n_tasks, sizeof(*mine)))) {
        allot_fmt(err, errlen, "job %s: out of memory", spec->name);
        goto undo;
    }
    for (k = 0; k < j->spec.n_tasks; k++) {
        /* what the task asks comes from the job, where from the caller */
        allot_sched_placement_init(q->placer, pl[k].node, &j->spec.task, &mine[k]);
        mine[k].gpu_mask = pl[k].gpu_mask;
        mine[k].gpu_milli = pl[k].gpu_milli;
        mine[k].gpu_mem_mib = pl[k].gpu_mem_mib;
        mine[k].mig_profile = pl[k].mig_profile;
        mine[k].mig_start = pl[k].mig_start;
        rc = pl[k].node >= 0 && pl[k].node < allot_cluster_node_count(q->c)
                 ? allot_sched_apply(q->placer, &mine[k])
                 : ALLOT_EINVAL;
        if (rc) {
            allot_fmt(err, errlen, "job %s: task %d does not fit where it runs (%s)", spec->name, k,
                      allot_strerror(rc));
            queue_pl_release_all(q, mine, k);
            rc = rc == ALLOT_ENOMEM ? rc : ALLOT_EINVAL;
            goto undo;
        }
    }
    j->pl = mine;
    /* started as by a cycle, but at its real start and with no decision */
    q->fn = NULL;
    job_start(q, j, now);
    q->fn = fn;
    j->start = start;
    j->saved_at = start;
    j->run_from = start;    /* runs already (allot_queue_running may say since when) */
    queue_fast_timer(q, j); /* its limit counts from its real start */
    queue_fast_recheck_add(q, j);
    if (j->borrowed)
        queue_bor_reset(q); /* may be a reclaim candidate at once */
    return id;
undo:
    allot_free(mine);
    pending_del(q, id);
    queue_fast_gone(q, j);
    j->state = ALLOT_JOB_DONE;
    (void)allot_queue_forget(q, id); /* cannot fail: free-list room reserved above */
    return rc;
}

/* ---- the cycle ---------------------------------------------------------------------------- */

/* Puts pf into the jobs considered first, before the jobs already there
 * that were moved for it (room for one more reserved by the caller). */
static void first_before_moved(struct allot_queue *q, int pf)
{
    size_t at = q->n_first;

    for (size_t k = 0; k < q->n_first && at == q->n_first; k++) {
        const struct allot_job *x = &q->jobs[q->first[k]];
        if (x->moving && x->n_preemptors > 0 && x->preemptors[x->n_preemptors - 1] == pf)
            at = k;
    }
    memmove(&q->first[at + 1], &q->first[at], (q->n_first - at) * sizeof(*q->first));
    q->first[at] = pf;
    q->n_first++;
}

/* Ends running job j's grace period or runtime limit when due at now.
 * Returns 0 when it did, 1 when j is not due, or ALLOT_ENOMEM (j left as
 * it was). */
static int stop_one(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    bool grace_over = j->state == ALLOT_JOB_STOPPING && j->stop_at <= now;
    bool limit = j->state == ALLOT_JOB_RUNNING && now >= queue_limit_at(j);

    if (!grace_over && !limit)
        return 1;
    if (queue_orphans_reserve(q, (size_t)j->spec.n_tasks) ||
        queue_list_reserve(&q->pending, q->n_pending, &q->pending_cap, 1) ||
        queue_list_reserve(&q->first, q->n_first, &q->first_cap, 2))
        return ALLOT_ENOMEM;
    if (grace_over) {
        int pf = j->preempted_for;
        bool gone = j->gone; /* its node said its processes were gone */
        queue_job_unplace(q, j, now);
        /* the room was made for pf: it gets the first try at it, before
         * the jobs moved for it (their grace ended in the same cycle), which
         * go right after it, to the room the move found */
        if (pf >= 0 && q->jobs[pf].stopping_victims == 0 && q->jobs[pf].state == ALLOT_JOB_PENDING)
            first_before_moved(q, pf);
        if (j->moving)
            q->first[q->n_first++] = j->id;
        queue_requeue(q, j, now);
        queue_set_why(j, ALLOT_WHY_GRACE_OVER, 0, 0, -1, 0, 0);
        char why[96];
        allot_fmt(why, sizeof(why), "%s: stopped and %s",
                  gone ? "its processes gone" : "grace period over",
                  j->spec.once ? "ended (it runs once)" : "requeued");
        queue_emit(q, ALLOT_DEC_STOP, j, why);
    } else {
        queue_job_unplace(q, j, now);
        j->state = ALLOT_JOB_DONE;
        queue_set_why(j, ALLOT_WHY_LIMIT, 0, 0, -1, j->spec.limit_s, 0);
        queue_emit(q, ALLOT_DEC_STOP, j, allot_queue_reason(q, j->id));
    }
    return 0;
}

/* Ends grace periods and runtime limits due at now, in the running list's
 * order. Returns 0 or ALLOT_ENOMEM (the job at hand left as it was). */
static int stop_due(struct allot_queue *q, int64_t now)
{
    const int *due;
    size_t n;

    /* every stop is work (opts.cycle_work): past the budget the rest
     * stay due for the cycle that continues the round */
    if (queue_fast_due(q, now, &due, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            bool cut = queue_cut(q);
            int rc = cut ? 0 : stop_one(q, &q->jobs[due[i]], now);
            if (cut || rc < 0) {
                while (i < n) /* still due: the next cycle tries again */
                    queue_fast_timer(q, &q->jobs[due[i++]]);
                return rc;
            }
            q->work_left -= rc == 0;
        }
        return 0;
    }
    for (size_t i = 0; i < q->n_running && !queue_cut(q); i++) {
        int rc = q->running[i] < 0 ? 1 : stop_one(q, &q->jobs[q->running[i]], now);
        if (rc < 0)
            return rc;
        q->work_left -= rc == 0;
    }
    return 0;
}

/* True when reservation r keeps pending job j from starting now: j's
 * reason then names the holder. Else *bf is the holder when j would start
 * as its preemptible backfill, or -1 (queue_backfill_ok). */
bool queue_held(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r,
                int *bf)
{
    const struct allot_job *h;

    *bf = -1;
    if (r->holder < 0 || r->holder == j->id || queue_backfill_ok(q, r, j, now, bf))
        return false;
    h = &q->jobs[r->holder];
    queue_set_why(j, ALLOT_WHY_HELD, 0, 0, h->id, r->shadow == INT64_MAX ? -1 : r->shadow - now,
                  now - h->submit);
    return true;
}

/* Whether quota would admit j, or refuse it only at the cluster's own
 * quota while inside its tenant's nominal (queue_gang_reserves' case),
 * were it not for j's own backfill (trial: charged off and back on). */
static bool admits_past_backfill(struct allot_queue *q, const struct allot_job *j)
{
    int who = -1, res = 0;
    bool ok;

    for (int v = q->bf[j->id].head; v >= 0; v = q->bf[v].next)
        queue_job_charge(q, &q->jobs[v], -1);
    ok = allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, &who, &res) ||
         (who == 0 && allot_tenants_in_nominal(q->t, j->spec.tenant, &j->req));
    for (int v = q->bf[j->id].head; v >= 0; v = q->bf[v].next)
        queue_job_charge(q, &q->jobs[v], +1);
    return ok;
}

/* Considers pending job j: admits, places or preempts, or explains. */
int queue_consider(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r,
                   const struct allot_why *known)
{
    int bf;

    if (queue_held(q, j, now, r, &bf))
        return 0;
    return queue_consider_past(q, j, now, r, bf, known);
}

/* Considers pending job j that reservation r does not hold back (bf: as in
 * queue_held). `known`, when not NULL, is the quota, capacity or fair-share
 * cap refusal that admitting and placing j would meet now (queue_fast.c
 * knows it): those steps are skipped. Returns 0 or ALLOT_ENOMEM. */
int queue_consider_past(struct allot_queue *q, struct allot_job *j, int64_t now,
                        struct reservation *r, int bf, const struct allot_why *known)
{
    int who = 0, res = 0, rc, refused = ALLOT_WHY_CAPACITY;

    /* past the fair-share cap: no start and no victim search (the job is
     * beyond its nominal and above its fair share, so only its own
     * tenant's work could be its victims, and that would not lower its
     * tenant's use) */
    if (known ? known->kind == ALLOT_WHY_FAIR_CAP : queue_fair_capped(q, j)) {
        queue_set_why(j, ALLOT_WHY_FAIR_CAP, j->spec.tenant, 0, -1, 0, 0);
        return 0;
    }
    /* room to start it, so that job_start cannot fail */
    if (queue_list_reserve(&q->running, q->n_running, &q->running_cap, 1) ||
        index_reserve(q, j->spec.tenant) || users_reserve(q))
        return ALLOT_ENOMEM;
    if (known ? known->kind == ALLOT_WHY_QUOTA
              : q->o.quotas && !allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing,
                                                     &who, &res)) {
        if (known) {
            who = known->who;
            res = known->res;
        }
        queue_set_why(j, ALLOT_WHY_QUOTA, who, res, -1, 0, 0);
        if (q->o.preemption) {
            rc = queue_try_preempt(q, j, now);
            if (rc == 1 && j->state == ALLOT_JOB_PENDING)
                rc = queue_would_fit(q, j);
            if (rc < 0)
                return rc;
            if (rc == 1 && j->state == ALLOT_JOB_PENDING)
                goto place;
        }
        refused = ALLOT_WHY_QUOTA;
        goto reserve;
    }
    if (known)
        goto no_room;
place:
    /* a shape that found no room finds none until room is freed */
    rc = queue_fast_place_fails(q, j) ? ALLOT_ENOSPC : queue_gang_place(q, j);
    if (rc == ALLOT_ENOMEM)
        return rc;
    if (rc == ALLOT_ENOSPC)
        queue_fast_place_failed(q, j);
    if (rc == 0) {
        struct allot_resvec use;
        queue_job_usage(q, j, &use);
        if (q->o.quotas &&
            !allot_tenants_admits(q->t, j->spec.tenant, &use, q->o.borrowing, &who, &res)) {
            queue_gang_unplace(q, j);
            queue_set_why(j, ALLOT_WHY_QUOTA, who, res, -1, 0, 0);
            return 0;
        }
        job_start(q, j, now);
        queue_backfill_started(q, r, j, bf);
        return 0;
    }
no_room:
    queue_set_why(j, ALLOT_WHY_CAPACITY, 0, 0, -1, 0, 0);
    if (q->o.preemption) {
        rc = queue_try_preempt(q, j, now);
        if (rc == 1)
            rc = queue_gang_place(q, j) == 0 ? 2 : 0;
        if (rc < 0)
            return rc;
        if (rc == 2) {
            job_start(q, j, now);
            queue_backfill_started(q, r, j, bf);
            return 0;
        }
    }
reserve:
    /* turned away by quota that j's own backfill holds: the reservation
     * made that backfill start, and j takes it back when its room comes,
     * so the refusal is one for lack of room (else the reservation's own
     * backfill ends it, and work j cannot take starts in its place) */
    if (refused == ALLOT_WHY_QUOTA && j->backfilled > 0 && admits_past_backfill(q, j))
        refused = ALLOT_WHY_CAPACITY;
    if (queue_gang_reserves(q, j, refused, who, r, now))
        return queue_reserve(q, j, now, r);
    return 0;
}

/* Step 1 of a cycle: time, and what changed since the last one (tenants,
 * nodes). A cycle that continues a round cut short at its work budget
 * keeps the round's victim-search budgets. */
static void cycle_start(struct allot_queue *q, int64_t now)
{
    if (!q->more) {
        q->searches_left = q->o.preempt_searches > 0 ? q->o.preempt_searches : 256;
        q->reclaims_left = 8 * q->searches_left;
    }
    if (allot_cluster_resized(q->c) != q->capacity_resized)
        capacity_count(q);
    allot_tenants_advance(q->t, now, q->o.half_life_s, &q->capacity);
    never_refresh(q);
    queue_fair_shares(q);
    queue_gone_check(q, now); /* before the stops: a victim released here stops now */
    queue_running_compact(q);
    q->serial++;
    q->free_epoch++;
    queue_orphans_retry(q);
    q->n_first = 0;
    q->pause = (struct cycle_pause){.step = CYCLE_STOPS, .r = {.holder = -1}};
}

/* Whether a cycle at now may resume the one cut short where it stopped:
 * nothing changed in between (the queue's own calls clear pause.valid). */
static bool cycle_resumable(const struct allot_queue *q, int64_t now)
{
    const struct cycle_pause *p = &q->pause;

    return q->more && p->valid && p->now == now && p->cluster == allot_cluster_changes(q->c) &&
           p->tenants == allot_tenants_changes(q->t);
}

/* Steps 2 and 3, each from where a pause left it: grace periods and
 * limits, the jobs whose victims just stopped (they go before everyone
 * else), then the pending jobs in order. */
static int cycle_steps(struct allot_queue *q, int64_t now, bool resume)
{
    struct cycle_pause *p = &q->pause;
    int rc = 0;

    if (p->step == CYCLE_STOPS) {
        rc = stop_due(q, now);
        if (rc || q->more)
            return rc;
        p->step = CYCLE_FIRST;
        p->first_pos = 0;
    }
    if (p->step == CYCLE_FIRST) {
        for (; p->first_pos < q->n_first && rc == 0; p->first_pos++) {
            struct allot_job *j = &q->jobs[q->first[p->first_pos]];
            if (queue_cut(q))
                return 0;
            if (j->state == ALLOT_JOB_PENDING)
                rc = queue_consider(q, j, now, &p->r, NULL);
        }
        if (rc)
            return rc;
        p->step = CYCLE_SERVE;
        resume = false; /* the serving begins */
    }
    return queue_fast_ordered(q) ? queue_fast_serve(q, now, &p->r, resume)
                                 : queue_serve(q, now, &p->r, resume);
}

/* Step 4: the earliest time the queue wants a cycle for its own sake. */
static void cycle_wakeup(struct allot_queue *q, int64_t now)
{
    int64_t fast;

    if (q->more) { /* the round goes on at once */
        q->wakeup = now;
        return;
    }
    /* defragmentation looks again at its interval while jobs wait */
    if (q->o.defrag_s > 0 && q->n_pending > 0 && q->defrag_next < q->wakeup)
        q->wakeup = q->defrag_next > now ? q->defrag_next : now + q->o.defrag_s;
    fast = queue_fast_wakeup(q, now);
    if (fast != INT64_MIN) { /* the same, from the timers and searched jobs */
        if (fast < q->wakeup)
            q->wakeup = fast;
        return;
    }
    /* a waiting job whose victims are too young wants a cycle when they come of age */
    for (size_t i = 0; i < q->n_pending; i++) {
        const struct allot_job *j = &q->jobs[q->pending[i]];
        /* (with the lending hold a search is redone at every later cycle
         * anyway: no need to ask for one a second later) */
        int64_t at = q->o.hold_half_life_s > 0 && q->o.quotas ? j->preempt_recheck_at
                                                              : queue_search_memo_until(q, j);
        if (j->preempt_epoch == q->leave_epoch + 1 && at > now && at < q->wakeup)
            q->wakeup = at;
    }
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *j;
        int64_t at;
        if (q->running[i] < 0)
            continue;
        j = &q->jobs[q->running[i]];
        at = j->state == ALLOT_JOB_STOPPING ? j->stop_at : queue_limit_at(j);
        if (at < q->wakeup)
            q->wakeup = at;
    }
}

int allot_queue_cycle(struct allot_queue *q, int64_t now, allot_decision_fn fn, void *ud)
{
    bool resume = cycle_resumable(q, now);
    int rc;

    q->fn = fn;
    q->ud = ud;
    q->wakeup = INT64_MAX;
    if (!resume)
        cycle_start(q, now);
    q->work_left = q->o.cycle_work > 0 ? q->o.cycle_work : ALLOT_QUEUE_CYCLE_WORK;
    q->more = false;
    rc = cycle_steps(q, now, resume);
    if (rc == 0 && !q->more)
        rc = queue_defrag(q, now);
    q->pause.valid = rc == 0 && q->more;
    q->pause.now = now;
    q->pause.cluster = allot_cluster_changes(q->c);
    q->pause.tenants = allot_tenants_changes(q->t);
    cycle_wakeup(q, now);
    q->fn = NULL;
    return rc;
}
