/*
 * The multi-tenant job queue (see queue.h for the cycle and guarantees,
 * docs/tenancy.md for the rules). Jobs live in one array indexed by id;
 * pending and running jobs are kept in two id lists.
 *
 * Standing (who may preempt whom): a job may preempt another only when the
 * victim is preemptible, past its minimum runtime, and either of lower
 * priority in the same tenant, or borrowed (running above its tenant's
 * nominal) while the preemptor fits inside its own tenant's nominal. Both
 * relations are strict (priority strictly lower; in-nominal work is never a
 * victim of reclaim). Quotas shift as jobs come and go, so a reclaimed job
 * could later find its reclaimer borrowed; the last four preemptors of
 * every job are remembered and never become its victims, so no two jobs
 * preempt each other in a loop.
 */
#include "allot/queue.h"

#include <stdlib.h>
#include <string.h>

struct allot_queue {
    struct allot_cluster *c;    /* borrowed */
    struct allot_tenants *t;    /* borrowed */
    struct allot_sched *placer; /* owned */
    const struct allot_queue_policy_ops *order;
    struct allot_queue_opts o;
    struct allot_prio_class prio[ALLOT_PRIO_CLASSES];
    int n_prio;
    struct allot_job *jobs; /* owned, by id */
    size_t n_jobs, jobs_cap;
    int *pending; /* owned: ids */
    size_t n_pending, pending_cap;
    int *running; /* owned: ids (running or stopping) */
    size_t n_running, running_cap;
    struct allot_resvec capacity;
    struct user_use *users; /* owned: GPU use per (tenant, user), sorted, per cycle */
    size_t n_users, users_cap;
    uint64_t run_epoch; /* bumped whenever a job starts or leaves the cluster */
    int *first;         /* owned: jobs whose victims just stopped (this cycle) */
    size_t n_first, first_cap;
    int64_t wakeup;
    allot_decision_fn fn;
    void *ud;
};

/* GPU milli a user of a tenant holds (fair share of users inside a tenant). */
struct user_use {
    int64_t key; /* tenant << 32 | user */
    int64_t milli;
};

/* ---- small helpers -------------------------------------------------------- */

static int list_add(int **v, size_t *n, size_t *cap, int id)
{
    if (allot_grow((void **)v, cap, *n + 1, sizeof(**v)))
        return ALLOT_ENOMEM;
    (*v)[(*n)++] = id;
    return 0;
}

static void list_del(int *v, size_t *n, int id)
{
    for (size_t i = 0; i < *n; i++)
        if (v[i] == id) {
            memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
            (*n)--;
            return;
        }
}

static int job_prio(const struct allot_queue *q, const struct allot_job *j)
{
    return j->spec.prio_class >= 0 ? q->prio[j->spec.prio_class].value : 0;
}

static bool job_preemptible(const struct allot_queue *q, const struct allot_job *j)
{
    if (j->spec.qos == ALLOT_QOS_BEST_EFFORT)
        return true;
    return j->spec.prio_class < 0 || q->prio[j->spec.prio_class].preemptible;
}

static int job_gpus(const struct allot_job *j)
{
    return (int)(j->req.v[ALLOT_RES_GPU] / ALLOT_MILLI);
}

static void emit(struct allot_queue *q, int kind, const struct allot_job *j, const char *why)
{
    if (q->fn)
        q->fn(kind, j, why, q->ud);
}

/* ---- lifecycle ---------------------------------------------------------------- */

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
    for (int i = 0; i < allot_cluster_node_count(c); i++) {
        const struct allot_node *n = allot_cluster_node(c, i);
        q->capacity.v[ALLOT_RES_GPU] += (int64_t)n->n_gpus * ALLOT_MILLI;
        q->capacity.v[ALLOT_RES_CPU] += n->cpu_milli;
        q->capacity.v[ALLOT_RES_MEM] += n->mem_mib;
        if (n->model >= 0) {
            q->capacity.v[ALLOT_RES_MODEL0 + n->model] += (int64_t)n->n_gpus * ALLOT_MILLI;
            q->capacity.v[ALLOT_RES_GPU_MEM] +=
                n->n_gpus * allot_cluster_catalog(c)->models[n->model].memory_mib;
        }
    }
    q->wakeup = INT64_MAX;
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
    allot_free(q->pending);
    allot_free(q->running);
    allot_free(q->users);
    allot_free(q->first);
    allot_sched_free(q->placer);
    allot_free(q);
}

int allot_queue_add_prio_class(struct allot_queue *q, const char *name, int value, bool preemptible)
{
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

int allot_queue_job_count(const struct allot_queue *q)
{
    return (int)q->n_jobs;
}

const struct allot_job *allot_queue_job(const struct allot_queue *q, int id)
{
    return id >= 0 && (size_t)id < q->n_jobs ? &q->jobs[id] : NULL;
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
    int rc;

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
        allot_grow((void **)&q->pending, &q->pending_cap, q->n_pending + 1, sizeof(*q->pending)))
        goto oom;
    j = &q->jobs[q->n_jobs];
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
    j->id = (int)q->n_jobs;
    j->preempted_for = -1;
    j->state = ALLOT_JOB_PENDING;
    j->submit = j->first_submit = now;
    job_request(q, spec, &j->req);
    j->why.kind = ALLOT_WHY_NEW;
    q->pending[q->n_pending++] = j->id;
    return (int)q->n_jobs++;
oom:
    allot_fmt(err, errlen, "job %s: out of memory", spec->name);
    return ALLOT_ENOMEM;
}

/* ---- running and stopping --------------------------------------------------------- */

/* Per-model GPU usage of a placed job. */
static void job_model_usage(const struct allot_queue *q, const struct allot_job *j,
                            struct allot_resvec *r)
{
    *r = j->req;
    for (int k = 0; k < j->spec.n_tasks; k++) {
        const struct allot_node *n = allot_cluster_node(q->c, j->pl[k].node);
        if (n->model >= 0)
            r->v[ALLOT_RES_MODEL0 + n->model] +=
                (int64_t)__builtin_popcount(j->pl[k].gpu_mask) * j->pl[k].gpu_milli;
    }
}

/* Releases a running job's placements and quota. */
static void job_unplace(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    struct allot_resvec use;

    job_model_usage(q, j, &use);
    allot_tenants_charge(q->t, j->spec.tenant, &use, -1);
    for (int k = 0; k < j->spec.n_tasks; k++)
        (void)allot_sched_release(q->placer, &j->pl[k]);
    j->attained_s += (now - j->start) * job_gpus(j);
    if (j->state == ALLOT_JOB_STOPPING && j->preempted_for >= 0) {
        q->jobs[j->preempted_for].stopping_victims--;
        j->preempted_for = -1;
    }
    q->run_epoch++;
    allot_free(j->pl);
    j->pl = NULL;
    list_del(q->running, &q->n_running, j->id);
}

static int requeue(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    if (list_add(&q->pending, &q->n_pending, &q->pending_cap, j->id))
        return ALLOT_ENOMEM;
    j->state = ALLOT_JOB_PENDING;
    j->submit = now;
    return 0;
}

int allot_queue_cancel(struct allot_queue *q, int id, int64_t now)
{
    struct allot_job *j;

    if (id < 0 || (size_t)id >= q->n_jobs)
        return ALLOT_ENOENT;
    j = &q->jobs[id];
    if (j->state == ALLOT_JOB_DONE)
        return ALLOT_ESTATE;
    if (j->state == ALLOT_JOB_PENDING)
        list_del(q->pending, &q->n_pending, id);
    else
        job_unplace(q, j, now);
    j->state = ALLOT_JOB_DONE;
    j->why.kind = ALLOT_WHY_CANCELLED;
    return 0;
}

int allot_queue_finish(struct allot_queue *q, int id, int64_t now)
{
    struct allot_job *j;

    if (id < 0 || (size_t)id >= q->n_jobs)
        return ALLOT_ENOENT;
    j = &q->jobs[id];
    if (j->state != ALLOT_JOB_RUNNING && j->state != ALLOT_JOB_STOPPING)
        return ALLOT_ESTATE;
    job_unplace(q, j, now);
    j->state = ALLOT_JOB_DONE;
    j->why.kind = ALLOT_WHY_FINISHED;
    return 0;
}

/* ---- placing a gang ------------------------------------------------------------------- */

/* Places all of j's tasks inside rack r (first fit over the rack's nodes in
 * rank order is enough: the rack is small). Returns true and fills pl on
 * success; on failure nothing stays applied. */
static bool place_in_rack(struct allot_queue *q, const struct allot_job *j, int r,
                          struct allot_placement *pl)
{
    int placed = 0, nn = allot_cluster_node_count(q->c);

    for (int i = 0; i < nn && placed < j->spec.n_tasks; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        if (n->rack != r)
            continue;
        while (placed < j->spec.n_tasks && allot_node_fits(q->c, n, &j->spec.task)) {
            if (allot_sched_choose_default(q->placer, i, &j->spec.task, &pl[placed]) != 0 ||
                allot_cluster_apply(q->c, &pl[placed]) != 0)
                break;
            placed++;
        }
    }
    if (placed == j->spec.n_tasks)
        return true;
    while (placed-- > 0)
        (void)allot_cluster_release(q->c, &pl[placed]);
    return false;
}

/*
 * Topology for multi-node gangs: when the policy spread the tasks over
 * several racks, try to fit them all inside one of those racks (the one
 * holding most of them first); keep the policy's placement otherwise.
 */
static void gang_prefer_rack(struct allot_queue *q, struct allot_job *j)
{
    int n = j->spec.n_tasks, racks[8], counts[8], nr = 0;
    struct allot_placement *alt;

    for (int k = 0; k < n; k++) {
        int r = allot_cluster_node(q->c, j->pl[k].node)->rack, i;
        for (i = 0; i < nr && racks[i] != r; i++)
            ;
        if (i == nr) {
            if (nr == 8)
                continue;
            racks[nr] = r;
            counts[nr++] = 0;
        }
        counts[i]++;
    }
    if (nr <= 1)
        return;
    alt = allot_calloc((size_t)n, sizeof(*alt));
    if (!alt)
        return; /* keep the policy's placement */
    for (int k = n; k-- > 0;)
        (void)allot_cluster_release(q->c, &j->pl[k]);
    for (int pass = 0; pass < nr; pass++) {
        int best = 0;
        for (int i = 1; i < nr; i++)
            if (counts[i] > counts[best])
                best = i;
        if (counts[best] < 0)
            break;
        counts[best] = -1;
        if (place_in_rack(q, j, racks[best], alt)) {
            allot_free(j->pl);
            j->pl = alt;
            return;
        }
    }
    /* no single rack holds the gang: put the policy's placement back */
    for (int k = 0; k < n; k++)
        (void)allot_cluster_apply(q->c, &j->pl[k]);
    allot_free(alt);
}

/* Places every task of j or none. Returns 0, ALLOT_ENOSPC or ALLOT_ENOMEM. */
static int gang_place(struct allot_queue *q, struct allot_job *j)
{
    struct allot_placement *pl = allot_calloc((size_t)j->spec.n_tasks, sizeof(*pl));
    int k, rc = 0;

    if (!pl)
        return ALLOT_ENOMEM;
    for (k = 0; k < j->spec.n_tasks; k++) {
        rc = allot_sched_place(q->placer, &j->spec.task, &pl[k], NULL, 0);
        if (rc)
            break;
    }
    if (rc) {
        while (k-- > 0)
            (void)allot_sched_release(q->placer, &pl[k]);
        allot_free(pl);
        return rc;
    }
    j->pl = pl;
    if (j->spec.n_tasks > 1)
        gang_prefer_rack(q, j);
    return 0;
}

static void gang_unplace(struct allot_queue *q, struct allot_job *j)
{
    for (int k = j->spec.n_tasks; k-- > 0;)
        (void)allot_sched_release(q->placer, &j->pl[k]);
    allot_free(j->pl);
    j->pl = NULL;
}

/* Commits a placed job: charges quota, marks it running, emits START. */
static int job_start(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    struct allot_resvec use;

    if (list_add(&q->running, &q->n_running, &q->running_cap, j->id))
        return ALLOT_ENOMEM;
    list_del(q->pending, &q->n_pending, j->id);
    job_model_usage(q, j, &use);
    j->borrowed = !allot_tenants_in_nominal(q->t, j->spec.tenant, &use);
    allot_tenants_charge(q->t, j->spec.tenant, &use, +1);
    j->state = ALLOT_JOB_RUNNING;
    q->run_epoch++;
    j->start = now;
    j->runs++;
    j->why.kind = ALLOT_WHY_RUNNING;
    emit(q, ALLOT_DEC_START, j, j->borrowed ? "started on borrowed capacity" : "started");
    return 0;
}

/* ---- pending reasons -------------------------------------------------------------------- */

static void gpus_text(char *buf, size_t len, int64_t milli)
{
    if (milli % ALLOT_MILLI == 0)
        allot_fmt(buf, len, "%lld", (long long)(milli / ALLOT_MILLI));
    else
        allot_fmt(buf, len, "%.2f", (double)milli / ALLOT_MILLI);
}

static void amount_text(char *buf, size_t len, int res, int64_t v)
{
    if (res == ALLOT_RES_GPU || res >= ALLOT_RES_MODEL0)
        gpus_text(buf, len, v);
    else if (res == ALLOT_RES_CPU)
        allot_fmt(buf, len, "%.1f", (double)v / 1000.0);
    else
        allot_fmt(buf, len, "%lld MiB", (long long)v);
}

static void set_why(struct allot_job *j, int kind, int who, int res, int other, int64_t a,
                    int64_t b)
{
    j->why =
        (struct allot_why){.kind = kind, .who = who, .res = res, .other = other, .a = a, .b = b};
}

static void text_quota(struct allot_queue *q, struct allot_job *j, int who, int res)
{
    const struct allot_tenant *x = allot_tenants_get(q->t, who);
    char rn[64], used[32], nom[32];
    const char *unit = res == ALLOT_RES_CPU ? " CPU" : "";

    allot_res_name(q->t, res, rn, sizeof(rn));
    amount_text(used, sizeof(used), res, x->usage[res]);
    amount_text(nom, sizeof(nom), res, x->quota[res].nominal);
    if (who == j->spec.tenant) {
        const char *tail = !q->o.borrowing                   ? "borrowing is off"
                           : x->quota[res].borrow_limit == 0 ? "borrowing not allowed"
                                                             : "borrowing limit reached";
        allot_fmt(j->reason, sizeof(j->reason), "tenant %s at nominal (%s/%s %s%s), %s", x->path,
                  used, nom, res == ALLOT_RES_CPU ? "" : rn, unit, tail);
    } else if (who == 0) {
        allot_fmt(j->reason, sizeof(j->reason), "cluster quota exhausted (%s/%s %s in use)", used,
                  nom, rn);
    } else {
        allot_fmt(j->reason, sizeof(j->reason),
                  "cohort %s has no unused %s (%s/%s in use or reserved)", x->path, rn, used, nom);
    }
}

/* Explains why a gang found no room. */
static void text_capacity(struct allot_queue *q, struct allot_job *j)
{
    const struct allot_task *t = &j->spec.task;
    const struct allot_catalog *cat = allot_cluster_catalog(q->c);
    int best_whole = 0, admit = 0, nn = allot_cluster_node_count(q->c);
    char model[48] = "";

    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        int w = 0;
        if (n->state != ALLOT_NODE_READY || !allot_node_admits(n, t))
            continue;
        admit++;
        for (int g = 0; g < n->n_gpus; g++)
            w += n->gpus[g].mode != ALLOT_GPU_MIG && n->gpus[g].free_milli == ALLOT_MILLI;
        if (w > best_whole)
            best_whole = w;
    }
    if (t->model_mask && __builtin_popcountll(t->model_mask) == 1)
        allot_fmt(model, sizeof(model), " %s", cat->models[__builtin_ctzll(t->model_mask)].name);
    if (t->num_gpu == 0 || admit == 0)
        allot_fmt(j->reason, sizeof(j->reason), "no node has %.1f CPU and %lld MiB memory free%s%s",
                  (double)t->cpu_milli / 1000, (long long)t->mem_mib,
                  model[0] ? " with GPU model" : "", model);
    else if (t->mig_profile >= 0)
        allot_fmt(j->reason, sizeof(j->reason), "no MIG GPU has a free %s slot",
                  cat->profile_names[t->mig_profile]);
    else if (t->gpu_milli < ALLOT_MILLI || t->gpu_mem_mib)
        allot_fmt(j->reason, sizeof(j->reason), "no%s GPU has %d milli-GPU and %lld MiB free",
                  model, t->gpu_milli, (long long)t->gpu_mem_mib);
    else if (j->spec.n_tasks > 1)
        allot_fmt(j->reason, sizeof(j->reason),
                  "no room for %d tasks of %d%s GPUs each (most free on one node: %d)",
                  j->spec.n_tasks, t->num_gpu, model, best_whole);
    else
        allot_fmt(j->reason, sizeof(j->reason),
                  "no node has %d free%s GPUs%s (most free on one node: %d)", t->num_gpu, model,
                  t->num_gpu > 1 ? " in one NVLink island" : "", best_whole);
}

const char *allot_queue_reason(struct allot_queue *q, int id)
{
    struct allot_job *j;
    const struct allot_why *w;
    char *r;
    size_t n;

    if (id < 0 || (size_t)id >= q->n_jobs)
        return "";
    j = &q->jobs[id];
    w = &j->why;
    r = j->reason;
    n = sizeof(j->reason);
    switch (w->kind) {
    case ALLOT_WHY_NEW:
        allot_fmt(r, n, "not yet considered by the scheduler");
        break;
    case ALLOT_WHY_RUNNING:
        allot_fmt(r, n, "%s", j->state == ALLOT_JOB_STOPPING ? "stopping (grace period)" : "");
        break;
    case ALLOT_WHY_QUOTA:
        text_quota(q, j, w->who, w->res);
        break;
    case ALLOT_WHY_CAPACITY:
        text_capacity(q, j);
        break;
    case ALLOT_WHY_RECLAIM:
        allot_fmt(r, n, "waiting for %s of %lld GPUs from %s (grace %lld s)",
                  w->who == j->spec.tenant ? "preemption" : "reclaim",
                  (long long)(w->a / ALLOT_MILLI), allot_tenants_get(q->t, w->who)->path,
                  (long long)w->b);
        break;
    case ALLOT_WHY_HELD:
        if (w->a < 0)
            allot_fmt(r, n, "held back: GPUs reserved for job %s (large gang waiting since %lld s)",
                      q->jobs[w->other].name, (long long)w->b);
        else
            allot_fmt(r, n, "held back: GPUs reserved for job %s (expected start in %lld s)",
                      q->jobs[w->other].name, (long long)w->a);
        break;
    case ALLOT_WHY_PREEMPTED:
        allot_fmt(r, n, "requeued: %s job %s",
                  q->jobs[w->other].spec.tenant == j->spec.tenant
                      ? "preempted for higher-priority"
                      : "borrowed capacity reclaimed by",
                  q->jobs[w->other].name);
        break;
    case ALLOT_WHY_GRACE_OVER:
        allot_fmt(r, n, "requeued after preemption");
        break;
    case ALLOT_WHY_CANCELLED:
        allot_fmt(r, n, "cancelled");
        break;
    case ALLOT_WHY_FINISHED:
        allot_fmt(r, n, "finished");
        break;
    case ALLOT_WHY_LIMIT:
        allot_fmt(r, n, "stopped at its runtime limit (%lld s)", (long long)w->a);
        break;
    default:
        allot_fmt(r, n, "unknown");
    }
    return r;
}

/* ---- preemption and reclaim ------------------------------------------------------------- */

struct victim {
    int id;
    int64_t cost; /* GPU-seconds of work lost */
    int borrowed;
};

static int cmp_victim(const void *a, const void *b)
{
    const struct victim *x = a, *y = b;

    if (x->borrowed != y->borrowed)
        return y->borrowed - x->borrowed; /* borrowed first */
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    return x->id - y->id;
}

/* Seconds of work a preemption of v (running for `ran` s) throws away: the
 * work since its last checkpoint, counted at the end of the grace period;
 * all of it for a job that cannot checkpoint. */
static int64_t lost_work(const struct allot_queue *q, const struct allot_job *v, int64_t ran)
{
    int64_t c = v->spec.checkpoint_interval_s;

    if (!v->spec.checkpointable)
        return ran;
    ran += q->o.grace_s;
    return c > 0 ? ran % c : ran;
}

/* True when quota (not room) is what keeps j out right now. */
static bool quota_blocked(struct allot_queue *q, const struct allot_job *j)
{
    return q->o.quotas &&
           !allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, NULL, NULL);
}

/*
 * Room for one task of j on one node: of the nodes that hold candidate
 * victims (vs, sorted cheapest first; `chosen` marks those already taken),
 * the node where freeing the fewest, cheapest victims gives the task enough
 * whole GPUs. Writes their indices into pick and returns how many (0: no
 * node can make room).
 */
static int node_pick(struct allot_queue *q, const struct allot_job *j, const struct victim *vs,
                     int n, const bool *chosen, int *pick, int max)
{
    int need = j->spec.task.num_gpu, best_n = 0, cur[64];
    int64_t best_cost = INT64_MAX;
    int nn = allot_cluster_node_count(q->c);

    for (int i = 0; i < n; i++) {
        const struct allot_job *v = &q->jobs[vs[i].id];
        for (int k = 0; k < v->spec.n_tasks; k++) {
            int nd = v->pl[k].node, free = 0, m = 0;
            int64_t cost = 0;
            const struct allot_node *node;
            bool seen = false;
            if (chosen[i] || nd < 0 || nd >= nn)
                continue;
            /* evaluate each node once: at its cheapest victim */
            for (int e = 0; e < i && !seen; e++) {
                const struct allot_job *u = &q->jobs[vs[e].id];
                for (int kk = 0; kk < u->spec.n_tasks && !seen; kk++)
                    seen = !chosen[e] && u->pl[kk].node == nd;
            }
            if (seen)
                continue;
            node = allot_cluster_node(q->c, nd);
            for (int g = 0; g < node->n_gpus; g++)
                free +=
                    node->gpus[g].mode != ALLOT_GPU_MIG && node->gpus[g].free_milli == ALLOT_MILLI;
            for (int e = i; e < n && free < need && m < max && m < 64; e++) {
                const struct allot_job *u = &q->jobs[vs[e].id];
                int here = 0;
                if (chosen[e])
                    continue;
                for (int kk = 0; kk < u->spec.n_tasks; kk++)
                    if (u->pl[kk].node == nd)
                        here += __builtin_popcount(u->pl[kk].gpu_mask);
                if (!here)
                    continue;
                free += here;
                cost += vs[e].cost;
                cur[m++] = e;
            }
            if (free >= need && cost < best_cost) {
                best_cost = cost;
                best_n = m;
                for (int e = 0; e < m; e++)
                    pick[e] = cur[e];
            }
        }
    }
    return best_n;
}

/* May running job v be preempted for pending job j (the standing rule)? */
static bool may_preempt(const struct allot_queue *q, const struct allot_job *j, bool j_in_nominal,
                        const struct allot_job *v, int64_t now)
{
    if (v->state != ALLOT_JOB_RUNNING || !job_preemptible(q, v) ||
        now - v->start < v->spec.min_runtime_s)
        return false;
    /* never turn on a job that preempted j: no two jobs preempt each other */
    for (int i = 0; i < j->n_preemptors; i++)
        if (j->preemptors[i] == v->id)
            return false;
    /* standing inside a tenant (everywhere without quotas): priority, then
     * the two-queue LAS level (a job that has had less than the threshold
     * of GPU-time outranks one that has had more) */
    if (v->spec.tenant == j->spec.tenant || !q->o.quotas) {
        int64_t v_att = v->attained_s + (now - v->start) * job_gpus(v);
        if (job_prio(q, v) != job_prio(q, j))
            return job_prio(q, v) < job_prio(q, j) && v->spec.tenant == j->spec.tenant;
        return q->o.las_threshold_gpu_s > 0 && j->attained_s < q->o.las_threshold_gpu_s &&
               v_att >= q->o.las_threshold_gpu_s;
    }
    /* reclaim: only borrowed work, only for work inside its own nominal */
    return q->o.quotas && j_in_nominal && v->borrowed;
}

/* Takes victims' usage off the cluster and quotas (tentatively) or puts it back. */
static void victims_toggle(struct allot_queue *q, const struct victim *vs, int n, int sign)
{
    for (int i = 0; i < n; i++) {
        struct allot_job *v = &q->jobs[vs[i].id];
        struct allot_resvec use;
        job_model_usage(q, v, &use);
        allot_tenants_charge(q->t, v->spec.tenant, &use, sign);
        for (int k = 0; k < v->spec.n_tasks; k++) {
            if (sign < 0)
                (void)allot_sched_release(q->placer, &v->pl[k]);
            else
                (void)allot_cluster_apply(q->c, &v->pl[k]);
        }
    }
}

/* True when j would be admitted and placed (then undone). */
static bool would_fit(struct allot_queue *q, struct allot_job *j)
{
    struct allot_resvec use;
    bool ok;

    if (q->o.quotas &&
        !allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, NULL, NULL))
        return false;
    if (gang_place(q, j) != 0)
        return false;
    job_model_usage(q, j, &use);
    ok = !q->o.quotas ||
         allot_tenants_admits(q->t, j->spec.tenant, &use, q->o.borrowing, NULL, NULL);
    gang_unplace(q, j);
    return ok;
}

/* Finds the cheapest victim set for j and preempts it. Returns 1 when
 * victims were signalled or stopped, 0 when none would help, or an error. */
static int try_preempt(struct allot_queue *q, struct allot_job *j, int64_t now)
{
    struct victim *vs;
    bool *chosen, fit = false;
    int *order;
    int n = 0, used = 0, rc = 0, stopping = 0;
    bool in_nom = allot_tenants_in_nominal(q->t, j->spec.tenant, &j->req);

    if (j->stopping_victims > 0)
        return 1; /* already making room */
    /* nothing changed since the last fruitless search: still nothing */
    if (j->preempt_epoch == q->run_epoch + 1 && now < j->preempt_recheck_at)
        return 0;
    j->preempt_epoch = q->run_epoch + 1;
    j->preempt_recheck_at = INT64_MAX;
    /* room for the candidates, then for the chosen ones copied after them */
    vs = allot_malloc((q->n_running + 65) * sizeof(*vs));
    if (!vs)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *v = &q->jobs[q->running[i]];
        int64_t ran = now - v->start;
        if (!may_preempt(q, j, in_nom, v, now)) {
            /* too young now, perhaps eligible later */
            if (v->state == ALLOT_JOB_RUNNING && ran < v->spec.min_runtime_s &&
                v->start + v->spec.min_runtime_s < j->preempt_recheck_at)
                j->preempt_recheck_at = v->start + v->spec.min_runtime_s;
            /* ... or once it has had the LAS threshold's worth of service */
            if (v->state == ALLOT_JOB_RUNNING && q->o.las_threshold_gpu_s > 0 && job_gpus(v) > 0 &&
                v->attained_s + ran * job_gpus(v) < q->o.las_threshold_gpu_s) {
                int64_t at =
                    v->start +
                    (q->o.las_threshold_gpu_s - v->attained_s + job_gpus(v) - 1) / job_gpus(v);
                if (at > now && at < j->preempt_recheck_at)
                    j->preempt_recheck_at = at;
            }
            continue;
        }
        vs[n].id = v->id;
        vs[n].borrowed = v->borrowed;
        vs[n].cost = (int64_t)job_gpus(v) * lost_work(q, v, ran);
        n++;
    }
    if (n == 0) {
        allot_free(vs);
        return 0;
    }
    qsort(vs, (size_t)n, sizeof(*vs), cmp_victim);
    chosen = allot_calloc((size_t)n, sizeof(*chosen));
    order = allot_calloc(64, sizeof(*order));
    if (!chosen || !order) {
        allot_free(chosen);
        allot_free(order);
        allot_free(vs);
        return ALLOT_ENOMEM;
    }
    /*
     * Add victims until j would be admitted and placed: against quota, the
     * cheapest borrowed work anywhere; against room, the cheapest set that
     * frees one node enough for one of j's tasks, node after node.
     */
    while (!(fit = would_fit(q, j)) && used < 64) {
        int pick[64], np = 0;
        if (!quota_blocked(q, j) && j->spec.task.num_gpu > 0)
            np = node_pick(q, j, vs, n, chosen, pick, 64 - used);
        if (np == 0)
            for (int i = 0; i < n && np == 0; i++)
                if (!chosen[i])
                    pick[np++] = i;
        if (np == 0)
            break;
        for (int p = 0; p < np; p++) {
            chosen[pick[p]] = true;
            order[used++] = pick[p];
            victims_toggle(q, &vs[pick[p]], 1, -1);
        }
    }
    for (int i = 0; i < used; i++)
        victims_toggle(q, &vs[order[i]], 1, +1);
    if (!fit) {
        allot_free(chosen);
        allot_free(order);
        allot_free(vs);
        return 0;
    }
    /* the victims, in the order they were chosen */
    for (int i = 0; i < used; i++)
        vs[n + i] = vs[order[i]];
    memmove(vs, vs + n, (size_t)used * sizeof(*vs));
    allot_free(chosen);
    allot_free(order);
    for (int i = 0; i < used; i++) {
        struct allot_job *v = &q->jobs[vs[i].id];
        char why[ALLOT_REASON_MAX];
        v->preemptions++;
        if (v->n_preemptors < 4)
            v->preemptors[v->n_preemptors++] = j->id;
        else {
            memmove(v->preemptors, v->preemptors + 1, 3 * sizeof(int));
            v->preemptors[3] = j->id;
        }
        allot_fmt(why, sizeof(why), "%s job %s",
                  v->spec.tenant == j->spec.tenant ? "preempted for higher-priority"
                                                   : "borrowed capacity reclaimed by",
                  j->name);
        if (v->spec.checkpointable && q->o.grace_s > 0) {
            v->state = ALLOT_JOB_STOPPING;
            v->stop_at = now + q->o.grace_s;
            v->preempted_for = j->id;
            j->stopping_victims++;
            if (v->stop_at < q->wakeup)
                q->wakeup = v->stop_at;
            stopping++;
            emit(q, ALLOT_DEC_PREEMPT, v, why);
        } else {
            emit(q, ALLOT_DEC_PREEMPT, v, why);
            job_unplace(q, v, now);
            rc = requeue(q, v, now);
            if (rc)
                break;
            set_why(v, ALLOT_WHY_PREEMPTED, 0, 0, j->id, 0, 0);
        }
    }
    if (stopping) {
        int64_t g = 0;
        for (int i = 0; i < used; i++)
            g += q->jobs[vs[i].id].req.v[ALLOT_RES_GPU];
        set_why(j, ALLOT_WHY_RECLAIM, q->jobs[vs[0].id].spec.tenant, 0, -1, g, q->o.grace_s);
    }
    allot_free(vs);
    return rc ? rc : 1;
}

/* ---- the cycle ---------------------------------------------------------------------------- */

static int users_rebuild(struct allot_queue *q);

struct reservation {
    int holder;     /* job id, -1 when none */
    int64_t shadow; /* expected start of the holder */
    int64_t extra;  /* GPU milli free beyond the holder's need at shadow */
};

struct endtime {
    int64_t at;
    int64_t milli;
};

static int cmp_end(const void *a, const void *b)
{
    const struct endtime *x = a, *y = b;

    return x->at < y->at ? -1 : x->at > y->at;
}

/* EASY: when will enough GPUs be free for j, and how many spare then? */
static int reserve(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r)
{
    struct endtime *e = allot_malloc((q->n_running + 1) * sizeof(*e));
    int64_t free_milli = q->capacity.v[ALLOT_RES_GPU] - allot_cluster_used_milli(q->c);
    int64_t need = j->req.v[ALLOT_RES_GPU];
    size_t n = 0;

    if (!e)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *v = &q->jobs[q->running[i]];
        int64_t est = v->state == ALLOT_JOB_STOPPING ? v->stop_at - v->start
                      : v->spec.est_runtime_s        ? v->spec.est_runtime_s
                                                     : v->spec.limit_s;
        e[n].at = est ? v->start + est : INT64_MAX;
        e[n].milli = v->req.v[ALLOT_RES_GPU];
        n++;
    }
    qsort(e, n, sizeof(*e), cmp_end);
    r->holder = j->id;
    r->shadow = free_milli >= need ? now : INT64_MAX;
    for (size_t i = 0; i < n && free_milli < need; i++) {
        free_milli += e[i].milli;
        if (free_milli >= need)
            r->shadow = e[i].at;
    }
    r->extra = free_milli >= need ? free_milli - need : 0;
    allot_free(e);
    return 0;
}

/* May j start now without delaying the reservation holder? */
static bool backfill_ok(const struct allot_queue *q, struct reservation *r,
                        const struct allot_job *j, int64_t now)
{
    if (r->holder < 0 || j->req.v[ALLOT_RES_GPU] == 0)
        return true;
    if (j->spec.est_runtime_s && r->shadow != INT64_MAX && now + j->spec.est_runtime_s <= r->shadow)
        return true;
    if (j->req.v[ALLOT_RES_GPU] <= r->extra) {
        r->extra -= j->req.v[ALLOT_RES_GPU];
        return true;
    }
    (void)q;
    return false;
}

/* Ends grace periods and runtime limits due at now. */
static int stop_due(struct allot_queue *q, int64_t now)
{
    for (size_t i = 0; i < q->n_running;) {
        struct allot_job *j = &q->jobs[q->running[i]];
        if (j->state == ALLOT_JOB_STOPPING && j->stop_at <= now) {
            int rc, pf = j->preempted_for;
            job_unplace(q, j, now);
            /* the room was made for pf: it gets the first try at it */
            if (pf >= 0 && q->jobs[pf].stopping_victims == 0 &&
                q->jobs[pf].state == ALLOT_JOB_PENDING &&
                list_add(&q->first, &q->n_first, &q->first_cap, pf))
                return ALLOT_ENOMEM;
            rc = requeue(q, j, now);
            if (rc)
                return rc;
            set_why(j, ALLOT_WHY_GRACE_OVER, 0, 0, -1, 0, 0);
            emit(q, ALLOT_DEC_STOP, j, "grace period over: stopped and requeued");
            continue;
        }
        if (j->state == ALLOT_JOB_RUNNING && j->spec.limit_s && now - j->start >= j->spec.limit_s) {
            job_unplace(q, j, now);
            j->state = ALLOT_JOB_DONE;
            set_why(j, ALLOT_WHY_LIMIT, 0, 0, -1, j->spec.limit_s, 0);
            emit(q, ALLOT_DEC_STOP, j, allot_queue_reason(q, j->id));
            continue;
        }
        i++;
    }
    return 0;
}

static int key_cmp(const double *a, const double *b, int ida, int idb)
{
    for (int k = 0; k < ALLOT_QUEUE_KEY_LEN; k++)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return ida < idb ? -1 : ida > idb;
}

struct keyed {
    double key[ALLOT_QUEUE_KEY_LEN];
    int id;
    int tenant;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;

    return key_cmp(x->key, y->key, x->id, y->id);
}

/* Considers pending job j: admits, places or preempts, or explains. */
static int consider(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r)
{
    int who = 0, res = 0, rc;
    bool aged = now - j->submit >= q->o.aging_s && q->o.aging_s > 0;
    bool large = job_gpus(j) >= (q->o.large_gang_gpus ? q->o.large_gang_gpus : 8);

    if (r->holder >= 0 && r->holder != j->id && !backfill_ok(q, r, j, now)) {
        const struct allot_job *h = &q->jobs[r->holder];
        set_why(j, ALLOT_WHY_HELD, 0, 0, h->id, r->shadow == INT64_MAX ? -1 : r->shadow - now,
                now - h->submit);
        return 0;
    }
    if (q->o.quotas &&
        !allot_tenants_admits(q->t, j->spec.tenant, &j->req, q->o.borrowing, &who, &res)) {
        set_why(j, ALLOT_WHY_QUOTA, who, res, -1, 0, 0);
        if (q->o.preemption) {
            rc = try_preempt(q, j, now);
            if (rc < 0)
                return rc;
            if (rc == 1 && j->state == ALLOT_JOB_PENDING && would_fit(q, j))
                goto place;
        }
        return 0;
    }
place:
    rc = gang_place(q, j);
    if (rc == ALLOT_ENOMEM)
        return rc;
    if (rc == 0) {
        struct allot_resvec use;
        job_model_usage(q, j, &use);
        if (q->o.quotas &&
            !allot_tenants_admits(q->t, j->spec.tenant, &use, q->o.borrowing, &who, &res)) {
            gang_unplace(q, j);
            set_why(j, ALLOT_WHY_QUOTA, who, res, -1, 0, 0);
            return 0;
        }
        return job_start(q, j, now);
    }
    set_why(j, ALLOT_WHY_CAPACITY, 0, 0, -1, 0, 0);
    if (q->o.preemption) {
        rc = try_preempt(q, j, now);
        if (rc < 0)
            return rc;
        if (rc == 1 && gang_place(q, j) == 0)
            return job_start(q, j, now);
    }
    if (q->o.backfill && r->holder < 0 && large && aged)
        return reserve(q, j, now, r);
    return 0;
}

int allot_queue_cycle(struct allot_queue *q, int64_t now, allot_decision_fn fn, void *ud)
{
    struct keyed *ks = NULL;
    size_t n;
    int rc;
    struct reservation r = {.holder = -1};

    q->fn = fn;
    q->ud = ud;
    q->wakeup = INT64_MAX;
    allot_tenants_advance(q->t, now, q->o.half_life_s, &q->capacity);
    q->n_first = 0;
    rc = stop_due(q, now);
    if (rc == 0)
        rc = users_rebuild(q);
    /* jobs whose victims just stopped go before everyone else */
    for (size_t i = 0; i < q->n_first && rc == 0; i++)
        if (q->jobs[q->first[i]].state == ALLOT_JOB_PENDING)
            rc = consider(q, &q->jobs[q->first[i]], now, &r);
    if (rc)
        goto out;
    n = q->n_pending;
    ks = allot_malloc((n + 1) * sizeof(*ks));
    if (!ks) {
        rc = ALLOT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const struct allot_job *j = &q->jobs[q->pending[i]];
        q->order->key(q, j, now, ks[i].key);
        ks[i].id = j->id;
        ks[i].tenant = j->spec.tenant;
    }
    qsort(ks, n, sizeof(*ks), cmp_keyed);
    if (!q->order->per_tenant) {
        for (size_t i = 0; i < n && rc == 0; i++)
            if (q->jobs[ks[i].id].state == ALLOT_JOB_PENDING)
                rc = consider(q, &q->jobs[ks[i].id], now, &r);
    } else {
        /* tenants take turns: the one with the lowest fair-share key (with
         * its current usage) offers its best job; aged jobs go first */
        size_t left = n;
        int nt = allot_tenants_count(q->t);
        size_t *head = allot_calloc((size_t)nt, sizeof(*head));
        if (!head) {
            rc = ALLOT_ENOMEM;
            goto out;
        }
        for (int i = 0; i < nt; i++)
            head[i] = SIZE_MAX;
        for (size_t i = n; i-- > 0;)
            head[ks[i].tenant] = i; /* first (best) position per tenant */
        while (left > 0 && rc == 0) {
            int best = -1;
            double bk = 0;
            for (int ti = 0; ti < nt; ti++) {
                double k;
                if (head[ti] == SIZE_MAX)
                    continue;
                k = ks[head[ti]].key[0] < 0.5 ? -1.0
                                              : allot_tenants_fair_key(q->t, ti, &q->capacity);
                if (best < 0 || k < bk) {
                    best = ti;
                    bk = k;
                }
            }
            if (best < 0)
                break;
            {
                size_t pos = head[best];
                if (q->jobs[ks[pos].id].state == ALLOT_JOB_PENDING)
                    rc = consider(q, &q->jobs[ks[pos].id], now, &r);
                left--;
                head[best] = SIZE_MAX;
                for (size_t i = pos + 1; i < n; i++)
                    if (ks[i].tenant == best) {
                        head[best] = i;
                        break;
                    }
            }
        }
        allot_free(head);
    }
out:
    /* a waiting job whose victims are too young wants a cycle when they come of age */
    for (size_t i = 0; i < q->n_pending; i++) {
        const struct allot_job *j = &q->jobs[q->pending[i]];
        if (j->preempt_epoch == q->run_epoch + 1 && j->preempt_recheck_at > now &&
            j->preempt_recheck_at < q->wakeup)
            q->wakeup = j->preempt_recheck_at;
    }
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *j = &q->jobs[q->running[i]];
        int64_t at = j->state == ALLOT_JOB_STOPPING ? j->stop_at
                     : j->spec.limit_s              ? j->start + j->spec.limit_s
                                                    : INT64_MAX;
        if (at < q->wakeup)
            q->wakeup = at;
    }
    allot_free(ks);
    q->fn = NULL;
    return rc;
}

/* ---- ordering policies ------------------------------------------------------------------ */

static void key_fifo(const struct allot_queue *q, const struct allot_job *j, int64_t now, double *k)
{
    k[0] = (double)j->first_submit;
    k[1] = k[2] = k[3] = 0;
}

static void key_las(const struct allot_queue *q, const struct allot_job *j, int64_t now, double *k)
{
    /* with a threshold: two queues (below / above it), FIFO inside each */
    if (q->o.las_threshold_gpu_s > 0)
        k[0] = j->attained_s >= q->o.las_threshold_gpu_s;
    else
        k[0] = (double)j->attained_s;
    k[1] = (double)j->first_submit;
    k[2] = k[3] = 0;
}

static void key_sjf(const struct allot_queue *q, const struct allot_job *j, int64_t now, double *k)
{
    k[0] = j->spec.est_runtime_s ? (double)j->spec.est_runtime_s : 1e18;
    k[1] = (double)j->first_submit;
    k[2] = k[3] = 0;
}

static int cmp_user(const void *a, const void *b)
{
    const struct user_use *x = a, *y = b;

    return x->key < y->key ? -1 : x->key > y->key;
}

/* Rebuilds the per-user GPU use table from the running jobs. */
static int users_rebuild(struct allot_queue *q)
{
    q->n_users = 0;
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *j = &q->jobs[q->running[i]];
        if (allot_grow((void **)&q->users, &q->users_cap, q->n_users + 1, sizeof(*q->users)))
            return ALLOT_ENOMEM;
        q->users[q->n_users].key = (int64_t)j->spec.tenant << 32 | (uint32_t)j->spec.user;
        q->users[q->n_users].milli = j->req.v[ALLOT_RES_GPU];
        q->n_users++;
    }
    if (q->n_users > 1)
        qsort(q->users, q->n_users, sizeof(*q->users), cmp_user);
    /* fold equal keys into the first of each run */
    {
        size_t w = 0;
        for (size_t i = 0; i < q->n_users; i++) {
            if (w > 0 && q->users[w - 1].key == q->users[i].key)
                q->users[w - 1].milli += q->users[i].milli;
            else
                q->users[w++] = q->users[i];
        }
        q->n_users = w;
    }
    return 0;
}

static int64_t user_milli(const struct allot_queue *q, const struct allot_job *j)
{
    struct user_use k = {.key = (int64_t)j->spec.tenant << 32 | (uint32_t)j->spec.user};
    const struct user_use *u =
        q->n_users ? bsearch(&k, q->users, q->n_users, sizeof(k), cmp_user) : NULL;

    return u ? u->milli : 0;
}

/* Inside a tenant: aged jobs first, then priority and QoS, then the LAS
 * level, then the user holding the fewest GPUs, then age. */
static void key_fair(const struct allot_queue *q, const struct allot_job *j, int64_t now, double *k)
{
    k[0] = q->o.aging_s > 0 && now - j->submit >= q->o.aging_s ? 0.0 : 1.0;
    /* priority, then QoS inside a priority: guaranteed, burstable, best-effort */
    k[1] = -(double)job_prio(q, j) * 4 + j->spec.qos;
    /* the LAS level (with a threshold), then the user holding fewest GPUs */
    k[2] =
        (q->o.las_threshold_gpu_s > 0 && j->attained_s >= q->o.las_threshold_gpu_s ? 1e15 : 0.0) +
        (double)user_milli(q, j);
    k[3] = (double)j->first_submit;
}

static const struct allot_queue_policy_ops order_fifo = {
    .name = "fifo", .summary = "first come, first served", .key = key_fifo};
static const struct allot_queue_policy_ops order_las = {
    .name = "las", .summary = "least attained GPU service first (Tiresias-style)", .key = key_las};
static const struct allot_queue_policy_ops order_sjf = {
    .name = "sjf", .summary = "shortest estimated runtime first", .key = key_sjf};
static const struct allot_queue_policy_ops order_fair = {
    .name = "fair",
    .summary = "tenants by dominant share over weight with decaying history; then priority, age",
    .per_tenant = true,
    .key = key_fair};

const struct allot_queue_policy_ops *const allot_queue_policies[] = {&order_fair, &order_fifo,
                                                                     &order_las, &order_sjf, NULL};

const struct allot_queue_policy_ops *allot_queue_policy_find(const char *name)
{
    for (int i = 0; allot_queue_policies[i]; i++)
        if (strcmp(allot_queue_policies[i]->name, name) == 0)
            return allot_queue_policies[i];
    return NULL;
}

/* ---- invariants ----------------------------------------------------------------------------- */

int allot_queue_check_invariants(const struct allot_queue *q, char *err, size_t errlen)
{
    struct allot_resvec sum[1];
    int rc = allot_sched_check_invariants(q->placer, err, errlen);
    int nt = allot_tenants_count(q->t);

    if (rc)
        return rc;
    for (int ti = 0; ti < nt; ti++) {
        const struct allot_tenant *x = allot_tenants_get(q->t, ti);
        memset(sum, 0, sizeof(sum));
        for (size_t i = 0; i < q->n_running; i++) {
            const struct allot_job *j = &q->jobs[q->running[i]];
            struct allot_resvec use;
            int a = j->spec.tenant;
            while (a >= 0 && a != ti)
                a = allot_tenants_get(q->t, a)->parent;
            if (a != ti)
                continue;
            job_model_usage(q, j, &use);
            for (int k = 0; k < ALLOT_RES_MAX; k++)
                sum->v[k] += use.v[k];
        }
        for (int k = 0; k < ALLOT_RES_MAX; k++) {
            const struct allot_quota *qt = &x->quota[k];
            if (sum->v[k] != x->usage[k]) {
                allot_fmt(err, errlen, "tenant %s: usage %lld differs from running jobs' %lld",
                          x->path, (long long)x->usage[k], (long long)sum->v[k]);
                return ALLOT_EINTERNAL;
            }
            if (q->o.quotas && qt->nominal != ALLOT_UNLIMITED &&
                (x->parent < 0 || !q->o.borrowing || qt->borrow_limit != ALLOT_UNLIMITED) &&
                x->usage[k] >
                    qt->nominal + (q->o.borrowing && x->parent >= 0 ? qt->borrow_limit : 0)) {
                allot_fmt(err, errlen, "tenant %s: over its hard limit", x->path);
                return ALLOT_EINTERNAL;
            }
        }
    }
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *j = &q->jobs[q->running[i]];
        if ((j->state != ALLOT_JOB_RUNNING && j->state != ALLOT_JOB_STOPPING) || !j->pl) {
            allot_fmt(err, errlen, "job %s: listed as running but not placed", j->name);
            return ALLOT_EINTERNAL;
        }
    }
    for (size_t i = 0; i < q->n_pending; i++)
        if (q->jobs[q->pending[i]].state != ALLOT_JOB_PENDING) {
            allot_fmt(err, errlen, "job %s: listed as pending in another state",
                      q->jobs[q->pending[i]].name);
            return ALLOT_EINTERNAL;
        }
    return 0;
}
