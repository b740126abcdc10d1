/*
 * The job queue's invariant checker (allot_queue_check_invariants, see
 * include/allot/queue.h): what the cluster holds per node and GPU equals
 * the running jobs' placements plus the orphans; every tenant's usage is
 * the sum of its running jobs'; the lists and indexes agree with the jobs'
 * states. Read-only; called by tests and the simulator after every event.
 */
#include "queue_int.h"

/* ---- invariants ------------------------------------------------------------------------ */

/* What the placements of running jobs and orphans hold on one node. */
struct held {
    int64_t cpu, mem, rdma;
    int32_t tasks;
    int32_t gpu_tasks[ALLOT_MAX_GPUS];
};

static void held_add(struct held *h, const struct allot_placement *p)
{
    struct held *x = &h[p->node];

    x->cpu += p->cpu_milli;
    x->mem += p->mem_mib;
    x->rdma += p->rdma_vfs;
    x->tasks++;
    for (int g = 0; g < ALLOT_MAX_GPUS; g++)
        x->gpu_tasks[g] += (int32_t)(p->gpu_mask >> g & 1);
}

/* Every task the cluster holds belongs to a running job or is an orphan,
 * and every running job's tasks are held: per node the task count, CPU and
 * memory, per GPU the task count; and each on a node its job may name. A
 * job running on GPUs that look free fails here. */
static int check_held(const struct allot_queue *q, char *err, size_t errlen)
{
    int nn = allot_cluster_node_count(q->c), rc = 0;
    struct held *h = allot_calloc((size_t)nn + 1, sizeof(*h));

    if (!h) {
        allot_fmt(err, errlen, "out of memory");
        return ALLOT_ENOMEM;
    }
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *j;
        if (q->running[i] < 0)
            continue; /* a hole */
        j = &q->jobs[q->running[i]];
        for (int k = 0; j->pl && k < j->spec.n_tasks; k++) {
            if (j->pl[k].node >= 0 && j->pl[k].node < nn)
                held_add(h, &j->pl[k]);
            if (!allot_nodeset_has(j->spec.task.nodes, j->pl[k].node) && rc == 0) {
                allot_fmt(err, errlen, "job %s: task %d on node %d, outside the nodes it names",
                          j->name, k, j->pl[k].node);
                rc = ALLOT_EINTERNAL;
            }
        }
    }
    for (size_t i = 0; i < q->n_orphans; i++)
        if (q->orphans[i].node >= 0 && q->orphans[i].node < nn)
            held_add(h, &q->orphans[i]);
    for (int i = 0; i < nn && rc == 0; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        bool ok = h[i].tasks == n->n_tasks && h[i].cpu == n->cpu_milli - n->cpu_free &&
                  h[i].mem == n->mem_mib - n->mem_free && h[i].rdma == n->rdma_vfs - n->rdma_free;
        for (int g = 0; g < n->n_gpus && ok; g++)
            ok = h[i].gpu_tasks[g] == n->gpus[g].n_tasks;
        if (!ok) {
            allot_fmt(err, errlen,
                      "node %s: holds %d tasks, running jobs and orphans %d (or CPU, memory, "
                      "RDMA VFs or a GPU's tasks differ)",
                      n->name, n->n_tasks, h[i].tasks);
            rc = ALLOT_EINTERNAL;
        }
    }
    allot_free(h);
    return rc;
}

/* Every job's count of running backfill matches the running jobs that
 * name it, and only running jobs name one. */
static int check_backfill(const struct allot_queue *q, char *err, size_t errlen)
{
    int *n = allot_calloc(q->n_jobs + 1, sizeof(*n));

    if (!n) {
        allot_fmt(err, errlen, "out of memory");
        return ALLOT_ENOMEM;
    }
    for (size_t i = 0; i < q->n_running; i++) {
        int b = q->running[i] < 0 ? -1 : q->jobs[q->running[i]].backfill_for;
        if (b >= 0 && (size_t)b < q->n_jobs)
            n[b]++;
    }
    for (size_t i = 0; i < q->n_jobs; i++) {
        const struct allot_job *j = &q->jobs[i];
        bool runs = j->state == ALLOT_JOB_RUNNING || j->state == ALLOT_JOB_STOPPING;
        int listed = 0, prev = -1;
        bool broken = false;
        /* its list links exactly its backfill (bounded: a cycle is broken) */
        for (int v = j->name ? q->bf[i].head : -1; v >= 0 && !broken && listed <= n[i];
             prev = v, v = q->bf[v].next) {
            broken = q->jobs[v].backfill_for != (int)i || q->bf[v].prev != prev;
            listed++;
        }
        if (j->name && (broken || listed != n[i])) {
            allot_fmt(err, errlen, "job %s: its list of backfill does not hold its %d backfill",
                      j->name, n[i]);
            allot_free(n);
            return ALLOT_EINTERNAL;
        }
        if (n[i] != j->backfilled || (j->backfill_for >= 0 && !runs)) {
            allot_fmt(err, errlen, "job %s: %d running jobs are its backfill, it counts %d%s",
                      j->name ? j->name : "(free slot)", n[i], j->backfilled,
                      j->backfill_for >= 0 && !runs ? ", and it names a holder while not running"
                                                    : "");
            allot_free(n);
            return ALLOT_EINTERNAL;
        }
    }
    allot_free(n);
    return 0;
}

/* The per-tenant counts (q->tc) follow the jobs: the GPUs of its jobs
 * pending, of those waiting for victims to stop, and of its jobs stopping;
 * its running jobs, and those of them borrowed in a class that is not
 * preemptible. */
static int check_counts(const struct allot_queue *q, char *err, size_t errlen)
{
    struct ten_count *sum = allot_calloc(q->tc_n + 1, sizeof(*sum));
    size_t bor = 0;
    int rc = 0;

    if (!sum)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < q->n_jobs && rc == 0; i++) {
        const struct allot_job *j = &q->jobs[i];
        int64_t g = j->req.v[ALLOT_RES_GPU];
        bool runs = j->state == ALLOT_JOB_RUNNING || j->state == ALLOT_JOB_STOPPING;
        if (!j->name || j->state == ALLOT_JOB_DONE)
            continue;
        if (j->spec.tenant < 0 || (size_t)j->spec.tenant >= q->tc_n) {
            allot_fmt(err, errlen, "job %s: tenant %d has no counts", j->name, j->spec.tenant);
            rc = ALLOT_EINTERNAL;
            break;
        }
        sum[j->spec.tenant].stopping += j->state == ALLOT_JOB_STOPPING ? g : 0;
        sum[j->spec.tenant].running += runs;
        bor += runs && j->borrowed;
        sum[j->spec.tenant].pinned_bor += runs && j->borrowed && !queue_job_preemptible(q, j);
        sum[j->spec.tenant].pending += j->state == ALLOT_JOB_PENDING ? g : 0;
        sum[j->spec.tenant].never += j->state == ALLOT_JOB_PENDING && j->never ? g : 0;
        sum[j->spec.tenant].waiting +=
            j->state == ALLOT_JOB_PENDING && j->stopping_victims > 0 ? g : 0;
        if (j->gone_victims < 0 || j->gone_victims > j->stopping_victims) {
            allot_fmt(err, errlen, "job %s: %d victims gone of %d stopping", j->name,
                      j->gone_victims, j->stopping_victims);
            rc = ALLOT_EINTERNAL;
            break;
        }
    }
    for (size_t t = 0; t < q->tc_n && rc == 0; t++) {
        const struct ten_count *c = &q->tc[t], *s = &sum[t];
        if (c->pending != s->pending || c->never != s->never || c->waiting != s->waiting ||
            c->stopping != s->stopping || c->running != s->running ||
            c->pinned_bor != s->pinned_bor) {
            allot_fmt(err, errlen,
                      "tenant %d: counts %lld pending (%lld never), %lld waiting, %lld stopping, "
                      "%zu running (%lld pinned borrowed); jobs %lld (%lld), %lld, %lld, %zu "
                      "(%lld)",
                      (int)t, (long long)c->pending, (long long)c->never, (long long)c->waiting,
                      (long long)c->stopping, c->running, (long long)c->pinned_bor,
                      (long long)s->pending, (long long)s->never, (long long)s->waiting,
                      (long long)s->stopping, s->running, (long long)s->pinned_bor);
            rc = ALLOT_EINTERNAL;
        }
    }
    if (rc == 0 && bor != q->n_bor) {
        allot_fmt(err, errlen, "%zu borrowed jobs run, the borrowed list counts %zu", bor,
                  q->n_bor);
        rc = ALLOT_EINTERNAL;
    }
    allot_free(sum);
    return rc;
}

int allot_queue_check_invariants(const struct allot_queue *q, char *err, size_t errlen)
{
    struct allot_resvec sum[1];
    int rc = allot_sched_check_invariants(q->placer, err, errlen);
    int nt = allot_tenants_count(q->t);

    if (rc == 0)
        rc = check_held(q, err, errlen);
    if (rc)
        return rc;
    for (int ti = 0; ti < nt; ti++) {
        const struct allot_tenant *x = allot_tenants_get(q->t, ti);
        memset(sum, 0, sizeof(sum));
        for (size_t i = 0; i < q->n_running; i++) {
            const struct allot_job *j;
            struct allot_resvec use;
            int a;
            if (q->running[i] < 0)
                continue;
            j = &q->jobs[q->running[i]];
            a = j->spec.tenant;
            while (a >= 0 && a != ti)
                a = allot_tenants_get(q->t, a)->parent;
            if (a != ti)
                continue;
            queue_job_usage(q, j, &use);
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
        const struct allot_job *j;
        if (q->running[i] < 0)
            continue;
        j = &q->jobs[q->running[i]];
        if ((j->state != ALLOT_JOB_RUNNING && j->state != ALLOT_JOB_STOPPING) || !j->pl ||
            q->run_at[j->id] != i) {
            allot_fmt(err, errlen, "job %s: listed as running but not placed", j->name);
            return ALLOT_EINTERNAL;
        }
    }
    /* the capacity as of the last cycle, unless sizes changed since (nodes
     * joined, or an empty one changed: it is counted again next cycle) */
    if (allot_cluster_resized(q->c) == q->capacity_resized) {
        struct allot_resvec cap = {0};
        queue_capacity_add(q->c, 0, q->capacity_nodes, &cap);
        if (memcmp(&cap, &q->capacity, sizeof(cap)) != 0) {
            allot_fmt(err, errlen, "capacity: the count differs from the first %d nodes' sum",
                      q->capacity_nodes);
            return ALLOT_EINTERNAL;
        }
    }
    rc = check_backfill(q, err, errlen);
    if (rc == 0)
        rc = check_counts(q, err, errlen);
    if (rc)
        return rc;
    for (size_t i = 0; i < q->n_pending; i++)
        if (q->jobs[q->pending[i]].state != ALLOT_JOB_PENDING || q->pend_at[q->pending[i]] != i) {
            allot_fmt(err, errlen, "job %s: listed as pending in another state",
                      q->jobs[q->pending[i]].name);
            return ALLOT_EINTERNAL;
        }
    return 0;
}
