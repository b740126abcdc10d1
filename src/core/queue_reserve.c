/*
 * Reservations of the job queue (docs/tenancy.md, "Reservations and
 * backfill"): the EASY reservation a large gang that finds no room makes
 * for the rest of the cycle (when enough GPUs come free for it, by the
 * running jobs' estimated ends), which later jobs may start past it, and
 * the bookkeeping of the preemptible backfill that starts under it.
 * Called from the cycle (queue_consider) only; single-threaded.
 */
#include "queue_int.h"

struct endtime {
    int64_t at;    /* expected end, INT64_MAX unknown */
    int64_t milli; /* GPUs it frees */
    size_t ord;    /* its place in the running list (ties: the earlier first) */
};

static bool end_before(const struct endtime *a, const struct endtime *b)
{
    return a->at < b->at || (a->at == b->at && a->ord < b->ord);
}

/* Restores the min-heap order of e[0, n) below position i. */
static void end_down(struct endtime *e, size_t n, size_t i)
{
    struct endtime x = e[i];

    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= n)
            break;
        if (l + 1 < n && end_before(&e[l + 1], &e[l]))
            m = l + 1;
        if (!end_before(&e[m], &x))
            break;
        e[i] = e[m];
        i = m;
    }
    e[i] = x;
}

/* The GPU milli free now that j can use: all of it, but for a gang of
 * whole GPUs not what is idle on GPUs in MIG mode (they cannot hold it).
 * Those are found through the capacity buckets of nodes with MIG GPUs, one
 * node per class (its nodes are alike), so a cluster without MIG pays
 * nothing for them. */
static int64_t free_for(const struct allot_queue *q, const struct allot_job *j)
{
    int64_t f = q->capacity.v[ALLOT_RES_GPU] - allot_cluster_used_milli(q->c);
    int16_t used[ALLOT_BUCKETS];
    int nb;

    if (j->spec.task.mig_profile >= 0 || j->spec.task.gpu_milli != ALLOT_MILLI)
        return f;
    nb = allot_cluster_buckets_used(q->c, used);
    for (int b = 0; b < nb; b++) {
        const int32_t *ids;
        int cnt;
        if (!allot_bucket_mig(used[b]))
            continue;
        cnt = allot_cluster_bucket(q->c, used[b], &ids);
        for (int c = 0; c < cnt; c++) {
            const struct allot_class *k = allot_cluster_class(q->c, ids[c]);
            const struct allot_node *n = allot_cluster_node(q->c, allot_class_rep(k));
            for (int g = 0; g < n->n_gpus; g++)
                if (n->gpus[g].mode == ALLOT_GPU_MIG)
                    f -= (int64_t)n->gpus[g].free_milli * k->n_members;
        }
    }
    return f;
}

/* Whether node n counts for j (allot_task_picks_nodes): ready, and a node j may use. */
static bool node_counts(const struct allot_node *n, const struct allot_job *j)
{
    return n->state == ALLOT_NODE_READY && allot_node_may_host(n, &j->spec.task);
}

/* Whether GPU g of a node that counts does: for a gang of whole GPUs one
 * outside MIG mode. */
static bool gpu_counts(const struct allot_node *n, int g, bool whole)
{
    return !(whole && n->gpus[g].mode == ALLOT_GPU_MIG);
}

/* For j that picks nodes: the GPU milli of the ready nodes it may use, free
 * now (*free) and in all (*all). One pass over the nodes. */
static void host_gpus(const struct allot_queue *q, const struct allot_job *j, int64_t *free,
                      int64_t *all)
{
    bool whole = j->spec.task.mig_profile < 0 && j->spec.task.gpu_milli == ALLOT_MILLI;
    int nn = allot_cluster_node_count(q->c);

    *free = *all = 0;
    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        if (!node_counts(n, j))
            continue;
        for (int g = 0; g < n->n_gpus; g++)
            if (gpu_counts(n, g, whole)) {
                *free += n->gpus[g].free_milli;
                *all += ALLOT_MILLI;
            }
    }
}

bool queue_reserve_could_fit(const struct allot_queue *q, const struct allot_job *j)
{
    int64_t free, all;

    if (!allot_task_picks_nodes(&j->spec.task))
        return true;
    host_gpus(q, j, &free, &all);
    return all >= j->req.v[ALLOT_RES_GPU];
}

/* The GPU milli running job v holds that j could use (j picks nodes). */
static int64_t held_for(const struct allot_queue *q, const struct allot_job *v,
                        const struct allot_job *j, bool whole)
{
    int64_t m = 0;

    for (int k = 0; v->pl && k < v->spec.n_tasks; k++) {
        const struct allot_placement *p = &v->pl[k];
        const struct allot_node *n = allot_cluster_node(q->c, p->node);
        if (!node_counts(n, j)) /* also a node not ready: its GPUs come back with it */
            continue;
        for (int g = 0; g < n->n_gpus; g++)
            if ((p->gpu_mask >> g & 1) && gpu_counts(n, g, whole))
                m += p->gpu_milli;
    }
    return m;
}

/* EASY: when will enough GPUs be free for j, and how many spare then?
 * The running jobs are taken by expected end (ties in running order) only
 * until enough GPUs come free: a heap, not a sort of them all. A gang of
 * whole GPUs counts only what ends on GPUs outside MIG mode. */
int queue_reserve(struct allot_queue *q, struct allot_job *j, int64_t now, struct reservation *r)
{
    int64_t free_milli, all;
    int64_t need = j->req.v[ALLOT_RES_GPU];
    bool whole = j->spec.task.mig_profile < 0 && j->spec.task.gpu_milli == ALLOT_MILLI;
    bool picks = allot_task_picks_nodes(&j->spec.task); /* then only the nodes it may use */
    struct endtime *e;
    size_t n = 0;

    if (picks)
        host_gpus(q, j, &free_milli, &all);
    else
        free_milli = free_for(q, j);

    /* j did not fit now: with enough GPUs free in all, they are scattered,
     * and when they come together is not known */
    if (free_milli >= need) {
        *r = (struct reservation){.holder = j->id, .shadow = INT64_MAX};
        return 0;
    }
    e = allot_malloc((q->n_running + 1) * sizeof(*e));
    if (!e)
        return ALLOT_ENOMEM;
    *r = (struct reservation){.holder = j->id, .shadow = INT64_MAX};
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *v;
        int64_t est;
        if (q->running[i] < 0)
            continue;
        v = &q->jobs[q->running[i]];
        if (whole && v->spec.task.mig_profile >= 0)
            continue; /* frees MIG slices, not GPUs j can use */
        /* its expected end: its grace's, its estimate's, or its limit's
         * (which may count from its running report, queue_limit_at) */
        est = v->state == ALLOT_JOB_STOPPING ? v->stop_at - v->start : v->spec.est_runtime_s;
        e[n].at = est ? v->start + est : queue_limit_at(v);
        e[n].milli = picks ? held_for(q, v, j, whole) : v->req.v[ALLOT_RES_GPU];
        e[n].ord = n;
        n++;
    }
    for (size_t i = n / 2; i-- > 0;)
        end_down(e, n, i);
    while (n > 0 && free_milli < need) {
        free_milli += e[0].milli;
        if (free_milli >= need)
            r->shadow = e[0].at;
        e[0] = e[--n];
        end_down(e, n, 0);
    }
    r->extra = r->shadow != INT64_MAX ? free_milli - need : 0;
    allot_free(e);
    return 0;
}

/*
 * May j start now past the reservation holder? Yes when it does not delay
 * it (EASY: it ends before the shadow time, or fits in the GPUs spare
 * then); when it runs inside its tenant's nominal and the holder is of
 * another tenant (the guarantee comes before another tenant's
 * reservation); or when it is preemptible: it then starts as
 * the holder's backfill (*bf = the holder), a victim the holder may take
 * back, so that a reservation does not keep GPUs idle when runtimes are
 * unknown.
 */
bool queue_backfill_ok(struct allot_queue *q, const struct reservation *r,
                       const struct allot_job *j, int64_t now, int *bf)
{
    *bf = -1;
    if (r->holder < 0 || j->req.v[ALLOT_RES_GPU] == 0)
        return true;
    if (j->spec.est_runtime_s && r->shadow != INT64_MAX && now + j->spec.est_runtime_s <= r->shadow)
        return true;
    /* the spare GPUs are taken only when j starts (queue_backfill_started):
     * a job that passes here and then meets its quota or no room leaves
     * them to the next */
    if (j->req.v[ALLOT_RES_GPU] <= r->extra) {
        *bf = QUEUE_BF_SPARE;
        return true;
    }
    if (j->spec.tenant != q->jobs[r->holder].spec.tenant && queue_fast_in_nom(q, j))
        return true;
    if (q->o.preemption && queue_job_preemptible(q, j)) {
        *bf = r->holder;
        return true;
    }
    return false;
}

void queue_backfill_started(struct allot_queue *q, struct reservation *r, struct allot_job *j,
                            int bf)
{
    if (j->state != ALLOT_JOB_RUNNING)
        return;
    if (bf == QUEUE_BF_SPARE) {
        if (!ALLOT_NEVER(r->holder < 0 || j->req.v[ALLOT_RES_GPU] > r->extra))
            r->extra -= j->req.v[ALLOT_RES_GPU];
        return;
    }
    if (bf < 0)
        return;
    j->backfill_for = bf;
    q->bf[j->id].prev = -1;
    q->bf[j->id].next = q->bf[bf].head;
    if (q->bf[bf].head >= 0)
        q->bf[q->bf[bf].head].prev = j->id;
    q->bf[bf].head = j->id;
    /* the holder is considered in full from now on (queue_fast.c: special) */
    if (q->jobs[bf].backfilled++ == 0)
        queue_fast_dirty(q, q->jobs[bf].spec.tenant);
    q->jobs[bf].preempt_epoch = 0; /* a new victim: its last search no longer holds */
}

void queue_backfill_unmark(struct allot_queue *q, struct allot_job *j)
{
    struct allot_job *h = &q->jobs[j->backfill_for];
    struct bf_link *l = &q->bf[j->id];

    if (l->prev >= 0)
        q->bf[l->prev].next = l->next;
    else if (!ALLOT_NEVER(q->bf[h->id].head != j->id))
        q->bf[h->id].head = l->next;
    if (l->next >= 0)
        q->bf[l->next].prev = l->prev;
    if (!ALLOT_NEVER(h->backfilled <= 0))
        h->backfilled--;
    j->backfill_for = l->next = l->prev = -1;
}
