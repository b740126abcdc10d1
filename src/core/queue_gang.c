/*
 * Placing a gang (the job queue's, docs/tenancy.md "Topology"): every task
 * of a job or none, through the queue's scheduler; then, for a gang the
 * policy spread over several nodes, one node that holds it all (a gang of
 * whole GPUs) or one rack. Called from the cycle and from victim trials;
 * single-threaded.
 */
#include "queue_int.h"

/* Applies pl[0..n) in order, all or none: on failure the ones applied are
 * released again (room for n orphans reserved by the caller). Returns 0 or
 * the cluster's error. */
static int pl_apply_all(struct allot_queue *q, const struct allot_placement *pl, int n)
{
    for (int k = 0; k < n; k++) {
        int rc = allot_sched_apply(q->placer, &pl[k]);
        if (rc) {
            queue_pl_release_all(q, pl, k);
            return rc;
        }
    }
    return 0;
}

/* Places all of j's tasks on node `node`, or when node < 0 inside rack r
 * (first fit over the rack's nodes in rank order is enough: the rack is
 * small). Returns true and fills pl on success; on failure nothing stays
 * applied (room for n_tasks orphans reserved by the caller). */
static bool place_within(struct allot_queue *q, const struct allot_job *j, int r, int node,
                         struct allot_placement *pl)
{
    int placed = 0, nn = allot_cluster_node_count(q->c);

    for (int i = node < 0 ? 0 : node; i < (node < 0 ? nn : node + 1) && placed < j->spec.n_tasks;
         i++) {
        const struct allot_node *n = allot_cluster_node(q->c, i);
        if (node < 0 && n->rack != r)
            continue;
        while (placed < j->spec.n_tasks && allot_node_fits(q->c, n, &j->spec.task)) {
            if (allot_sched_choose_default(q->placer, i, &j->spec.task, &pl[placed]) != 0 ||
                allot_sched_apply(q->placer, &pl[placed]) != 0)
                break;
            placed++;
        }
    }
    if (placed == j->spec.n_tasks)
        return true;
    queue_pl_release_all(q, pl, placed);
    return false;
}

/* The nodes that could hold every task of j, a gang of whole GPUs, at
 * once (free whole GPUs, CPU, memory and VFs for all of them), fewest
 * free GPUs first (best fit), at most GANG_NODE_TRIES. Only the classes
 * of the capacity buckets that may hold the whole gang are looked at, one
 * node each (not every node: this runs in victim trials too); when j
 * names its nodes (a set no class knows of), the nodes of its list, or
 * each member of those classes but the ones it excludes. Returns their
 * number. */
#define GANG_NODE_TRIES 3

/* Node i for gang_nodes: kept in out (k of them, freeof their free whole
 * GPUs) when it holds the whole gang and beats the worst kept. */
static void gang_node_try(const struct allot_queue *q, const struct allot_job *j, int i,
                          int out[GANG_NODE_TRIES], int freeof[GANG_NODE_TRIES], int *k)
{
    const struct allot_task *t = &j->spec.task;
    const struct allot_node *nd = allot_cluster_node(q->c, i);
    int64_t n = j->spec.n_tasks;
    int w = 0, at, max = GANG_NODE_TRIES;

    if (nd->state != ALLOT_NODE_READY || !allot_node_admits(nd, t) ||
        nd->cpu_free < n * t->cpu_milli || nd->mem_free < n * t->mem_mib ||
        nd->rdma_free < n * t->rdma_vfs)
        return;
    for (int g = 0; g < nd->n_gpus; g++)
        w += allot_gpu_whole_free(&nd->gpus[g]);
    if (w < n * t->num_gpu || (*k == max && w >= freeof[max - 1]))
        return;
    /* insert, keeping the best `max` in order */
    at = *k < max ? (*k)++ : max - 1;
    while (at > 0 && freeof[at - 1] > w) {
        out[at] = out[at - 1];
        freeof[at] = freeof[at - 1];
        at--;
    }
    out[at] = i;
    freeof[at] = w;
}

static int gang_nodes(const struct allot_queue *q, const struct allot_job *j,
                      int out[GANG_NODE_TRIES])
{
    const struct allot_task *t = &j->spec.task;
    int64_t n = j->spec.n_tasks;
    int freeof[GANG_NODE_TRIES], k = 0, nb;
    int16_t used[ALLOT_BUCKETS];
    /* the whole gang as one task: the capacity buckets that may hold it */
    struct allot_task all = *t;

    if (n * t->num_gpu > ALLOT_MAX_GPUS)
        return 0;
    if (t->nodes && !t->nodes->exclude) { /* a node list: its nodes alone */
        for (int i = 0; i < t->nodes->n; i++)
            gang_node_try(q, j, t->nodes->idx[i], out, freeof, &k);
        return k;
    }
    all.num_gpu = (int)(n * t->num_gpu);
    all.cpu_milli = n * t->cpu_milli;
    nb = allot_cluster_buckets_used(q->c, used);
    for (int b = 0; b < nb; b++) {
        const int32_t *ids;
        int cnt;
        if (!allot_bucket_admits(used[b], &all))
            continue;
        cnt = allot_cluster_bucket(q->c, used[b], &ids);
        for (int c = 0; c < cnt; c++) {
            const struct allot_class *kl = allot_cluster_class(q->c, ids[c]);
            if (!t->nodes) { /* a class's nodes are alike: its representative stands for them */
                gang_node_try(q, j, allot_class_rep(kl), out, freeof, &k);
                continue;
            }
            for (int m = 0; m < kl->n_members; m++)
                gang_node_try(q, j, kl->heap[m], out, freeof, &k);
        }
    }
    return k;
}

/* The racks holding j's placed tasks (at most 8) and how many tasks each. */
static int gang_racks(const struct allot_queue *q, const struct allot_job *j, int racks[8],
                      int counts[8])
{
    int nr = 0;

    for (int k = 0; k < j->spec.n_tasks; k++) {
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
    return nr;
}

/* Takes j's placement off the cluster to try racks. Returns 0, or an error
 * with j's placement still applied whole, or ALLOT_ENOMEM with none of it
 * applied (j->pl freed) when a release failed and putting back failed too. */
static int gang_lift(struct allot_queue *q, struct allot_job *j)
{
    int n = j->spec.n_tasks;

    for (int k = n; k-- > 0;) {
        int rc = allot_sched_release(q->placer, &j->pl[k]);
        if (rc == 0)
            continue;
        /* tasks k+1.. are off, 0..k still on: put the others back */
        if (pl_apply_all(q, &j->pl[k + 1], n - k - 1) != 0) {
            queue_pl_release_all(q, j->pl, k + 1);
            allot_free(j->pl);
            j->pl = NULL;
            return ALLOT_ENOMEM;
        }
        return rc;
    }
    return 0;
}

/* Whether j's placed tasks sit on more than one node. */
static bool gang_split(const struct allot_job *j)
{
    for (int k = 1; k < j->spec.n_tasks; k++)
        if (j->pl[k].node != j->pl[0].node)
            return true;
    return false;
}

/*
 * Topology for gangs the policy spread over several nodes: a gang of
 * whole GPUs goes onto one node when one holds it all (the best fit of
 * the few that do), else, when the policy spread it over several racks,
 * inside one of those racks (the one holding most of it first); the
 * policy's placement is kept otherwise. Returns 0 with j placed (one way
 * or the other), or ALLOT_ENOMEM with nothing of j applied and j->pl
 * freed.
 */
static int gang_prefer_local(struct allot_queue *q, struct allot_job *j)
{
    const struct allot_task *t = &j->spec.task;
    int n = j->spec.n_tasks, racks[8], counts[8], nr = gang_racks(q, j, racks, counts), rc;
    int nodes[GANG_NODE_TRIES], nc = 0;
    bool whole = queue_task_whole(t);
    struct allot_placement *alt;

    if (!gang_split(j) || (nr <= 1 && !whole))
        return 0;
    alt = allot_calloc((size_t)n, sizeof(*alt));
    if (!alt || queue_orphans_reserve(q, 2 * (size_t)n)) {
        allot_free(alt);
        return 0; /* keep the policy's placement */
    }
    rc = gang_lift(q, j);
    if (rc) {
        allot_free(alt);
        return j->pl ? 0 : rc;
    }
    if (whole)
        nc = gang_nodes(q, j, nodes);
    for (int i = 0; i < nc; i++) {
        /* room for a failed try's orphans and for putting the policy's placement back */
        if (queue_orphans_reserve(q, 2 * (size_t)n))
            break;
        if (place_within(q, j, -1, nodes[i], alt)) {
            allot_free(j->pl);
            j->pl = alt;
            return 0;
        }
    }
    for (int pass = 0; nr > 1 && pass < nr; pass++) {
        int best = 0;
        for (int i = 1; i < nr; i++)
            if (counts[i] > counts[best])
                best = i;
        if (counts[best] < 0 || queue_orphans_reserve(q, 2 * (size_t)n))
            break;
        counts[best] = -1;
        if (place_within(q, j, racks[best], -1, alt)) {
            allot_free(j->pl);
            j->pl = alt;
            return 0;
        }
    }
    /* no single node or rack holds the gang: put the policy's placement back */
    allot_free(alt);
    rc = pl_apply_all(q, j->pl, n);
    if (rc) {
        allot_free(j->pl);
        j->pl = NULL;
        return ALLOT_ENOMEM;
    }
    return 0;
}

/* Places every task of j or none. Returns 0, ALLOT_ENOSPC or ALLOT_ENOMEM
 * (nothing of j applied). On success room for n_tasks orphans is still
 * reserved (every step that used some reserved its own first), so
 * gang_unplace cannot fail. */
int queue_gang_place(struct allot_queue *q, struct allot_job *j)
{
    struct allot_placement *pl;
    int k, rc = 0;

    if (queue_orphans_reserve(q, (size_t)j->spec.n_tasks))
        return ALLOT_ENOMEM;
    pl = allot_calloc((size_t)j->spec.n_tasks, sizeof(*pl));
    if (!pl)
        return ALLOT_ENOMEM;
    for (k = 0; k < j->spec.n_tasks; k++) {
        rc = allot_sched_place(q->placer, &j->spec.task, &pl[k], NULL, 0);
        if (rc)
            break;
    }
    if (rc) {
        queue_pl_release_all(q, pl, k);
        allot_free(pl);
        return rc;
    }
    j->pl = pl;
    if (j->spec.n_tasks > 1) {
        rc = gang_prefer_local(q, j);
        if (rc)
            return rc;
    }
    return 0;
}

/* Releases a gang placed by gang_place (not started). */
void queue_gang_unplace(struct allot_queue *q, struct allot_job *j)
{
    queue_pl_release_all(q, j->pl, j->spec.n_tasks);
    allot_free(j->pl);
    j->pl = NULL;
}
