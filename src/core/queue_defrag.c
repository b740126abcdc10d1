/*
 * Defragmentation (opts.defrag_s; docs/tenancy.md "Defragmentation"). In a
 * busy cluster the GPUs that free up come as holes of one to four GPUs on
 * different nodes: small jobs fill them while a job of eight GPUs, or a
 * gang of such tasks, waits for a whole node although the cluster holds
 * its GPUs free in pieces. At most once per interval, after a cycle served
 * its jobs, this pass takes the pending jobs that quota admits but no node
 * has room for (ALLOT_WHY_CAPACITY), oldest first, and for each looks for
 * the nodes where moving a few running jobs elsewhere makes the room:
 *
 *   - a job that may move is checkpointable and preemptible, one task of
 *     whole GPUs (fewer than the waiting job's tasks take), shared (not
 *     exclusive), past its minimum runtime, and loses at most
 *     defrag_loss_s of work (it checkpointed lately);
 *   - per node, its cheapest movable jobs until the node has the room, the
 *     cheapest nodes first (when the trial below fails, the next cheapest:
 *     DEFRAG_TRIES trials at most);
 *   - the move is made only when a trial shows the waiting job placed and
 *     admitted and every moved job placed elsewhere and admitted at its new
 *     place, at the same time, with the room the cluster has now; the nodes
 *     one move counts on are off limits to the later moves of the pass.
 *
 * The moved jobs are preempted (ALLOT_PREEMPT_MOVE): they get the grace
 * period to checkpoint, the waiting job takes the room once they stopped,
 * and they are considered right after it (stop_one and first_before_moved
 * in queue.c; without a grace period, here at once), so they
 * start again at once in the holes the trial found. A job that preempted
 * another is never moved for it (the preemptor rule applies as for every
 * preemption), and a moved job runs its minimum runtime before it may move
 * again. Single-threaded; part of the cycle.
 */
#include "queue_int.h"

#include "allot/common.h"

#include <stdlib.h>
#include <string.h>

#define DEFRAG_JOBS  4  /* waiting jobs one pass makes room for, at most */
#define DEFRAG_MOVES 16 /* jobs moved for one waiting job, at most */
#define DEFRAG_TRIES 4  /* trials for one waiting job, at most */

/* A running job that may move: where it is and what moving it costs. */
struct mover {
    int id, node, gpus;
    int free;     /* whole GPUs free on its node (the pass's moves keep it) */
    int64_t cost; /* GPU-seconds of work it loses */
};

/* The room one node can make for one task: of movers[first..first+n),
 * the `moves` that may go for the job (mover_for) go. */
struct room {
    int node, first, n, moves;
    int64_t cost;
};

static int cmp_mover(const void *a, const void *b)
{
    const struct mover *x = a, *y = b;

    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    return x->id - y->id;
}

static int cmp_room(const void *a, const void *b)
{
    const struct room *x = a, *y = b;

    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    if (x->moves != y->moves)
        return x->moves - y->moves;
    return x->node - y->node;
}

/* Whole GPUs a task shape takes: num_gpu for whole GPUs, else 0. */
static int whole_gpus(const struct allot_task *t)
{
    return queue_task_whole(t) ? t->num_gpu : 0;
}

static bool movable(const struct allot_queue *q, const struct allot_job *v, int64_t now)
{
    return v->state == ALLOT_JOB_RUNNING && v->spec.checkpointable && !v->spec.once &&
           queue_job_preemptible(q, v) && v->spec.n_tasks == 1 && whole_gpus(&v->spec.task) > 0 &&
           now - v->start >= v->spec.min_runtime_s && !queue_placed_exclusive(v) &&
           queue_lost_work(q, v, now) <= q->o.defrag_loss_s;
}

/* Whether pending job j is one the pass makes room for. */
static bool wants_room(const struct allot_queue *q, const struct allot_job *j)
{
    return j->state == ALLOT_JOB_PENDING && j->why.kind == ALLOT_WHY_CAPACITY &&
           j->stopping_victims == 0 && whole_gpus(&j->spec.task) > 1;
}

/* Nodes an earlier move of the same pass counts on (the waiting job's and
 * where its moved jobs go): a later move touches none of them, so that two
 * plans of one pass never count on the same room. */
struct busy {
    int n;
    bool full; /* a node could not be noted: the pass moves nothing more */
    int node[DEFRAG_JOBS * (DEFRAG_MOVES + 16)];
};

static bool is_busy(const struct busy *b, int node)
{
    for (int i = 0; i < b->n; i++)
        if (b->node[i] == node)
            return true;
    return false;
}

/* Whether placements pl[0..n) stay off busy nodes; notes their nodes in
 * *mine (room permitting: a full list makes the plan fail). */
static bool off_busy(const struct busy *b, const struct allot_placement *pl, int n,
                     struct busy *mine)
{
    for (int k = 0; k < n; k++) {
        if (is_busy(b, pl[k].node))
            return false;
        if (mine->n >= (int)(sizeof(mine->node) / sizeof(mine->node[0])))
            return false;
        mine->node[mine->n++] = pl[k].node;
    }
    return true;
}

/*
 * The trial: with ids[0..n) off, j placed and admitted (and charged), and
 * each of them placed again elsewhere and admitted at its new place (their
 * usage follows the GPU model), none of it on a node in *b. Everything is
 * put back before it returns. 1 when it all fits (the nodes it used in
 * *mine), 0 when not, or an error (a job that could not be put back is
 * evicted: queue_victim_back).
 */
static int trial(struct allot_queue *q, struct allot_job *j, const int *ids, int n,
                 const struct busy *b, struct busy *mine, int64_t now)
{
    struct allot_placement *newpl[DEFRAG_MOVES];
    struct allot_resvec use, vuse[DEFRAG_MOVES];
    size_t tasks = 0;
    int off = 0, placed = 0, fit = 0, rc = 0;

    mine->n = 0;
    for (; off < n; off++) {
        struct allot_job *v = &q->jobs[ids[off]];
        if (queue_orphans_reserve(q, tasks + 1) ||
            queue_list_reserve(&q->pending, q->n_pending, &q->pending_cap, (size_t)off + 1)) {
            rc = ALLOT_ENOMEM;
            break;
        }
        rc = queue_victim_off(q, v, now);
        if (rc)
            break;
        tasks++;
        q->orphans_keep = tasks;
    }
    if (rc == 0 && (!q->o.quotas || allot_tenants_admits(q->t, j->spec.tenant, &j->req,
                                                         q->o.borrowing, NULL, NULL))) {
        rc = queue_gang_place(q, j);
        if (rc == 0) {
            int ok;
            queue_job_usage(q, j, &use);
            ok = (!q->o.quotas ||
                  allot_tenants_admits(q->t, j->spec.tenant, &use, q->o.borrowing, NULL, NULL)) &&
                 off_busy(b, j->pl, j->spec.n_tasks, mine);
            if (ok)
                allot_tenants_charge(q->t, j->spec.tenant, &use, +1);
            fit = ok;
            /* the biggest first: ids are in that order */
            while (ok && placed < n) {
                struct allot_job *v = &q->jobs[ids[placed]];
                struct allot_placement *was = v->pl;
                v->pl = NULL;
                rc = queue_gang_place(q, v);
                if (rc) {
                    v->pl = was;
                    break;
                }
                newpl[placed] = v->pl;
                queue_job_usage(q, v, &vuse[placed]);
                ok = (!q->o.quotas || allot_tenants_admits(q->t, v->spec.tenant, &vuse[placed],
                                                           q->o.borrowing, NULL, NULL)) &&
                     off_busy(b, v->pl, 1, mine);
                allot_tenants_charge(q->t, v->spec.tenant, &vuse[placed], +1);
                v->pl = was;
                placed++;
            }
            while (placed-- > 0) {
                const struct allot_job *v = &q->jobs[ids[placed]];
                allot_tenants_charge(q->t, v->spec.tenant, &vuse[placed], -1);
                queue_pl_release_all(q, newpl[placed], 1);
                allot_free(newpl[placed]);
            }
            if (fit)
                allot_tenants_charge(q->t, j->spec.tenant, &use, -1);
            fit = fit && ok && rc == 0;
            queue_gang_unplace(q, j);
        }
        if (rc == ALLOT_ENOSPC)
            rc = 0;
    }
    queue_orphans_retry(q);
    while (off-- > 0) {
        int rb = queue_victim_back(q, &q->jobs[ids[off]], now);
        if (rb && !rc)
            rc = rb;
    }
    q->orphans_keep = 0;
    return rc ? rc : fit;
}

/* Sorts job ids, the most GPUs first (ties by id): the trial places the
 * biggest moved jobs first. n <= DEFRAG_MOVES. */
static void by_gpus_desc(const struct allot_queue *q, int *ids, int n)
{
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0; k--) {
            const struct allot_job *x = &q->jobs[ids[k - 1]], *y = &q->jobs[ids[k]];
            int t;
            if (x->spec.task.num_gpu > y->spec.task.num_gpu ||
                (x->spec.task.num_gpu == y->spec.task.num_gpu && x->id < y->id))
                break;
            t = ids[k];
            ids[k] = ids[k - 1];
            ids[k - 1] = t;
        }
}

/* Whether mover x may go for j (whose tasks take `need` whole GPUs): it
 * still runs (no earlier job of the pass moved it). */
static bool mover_for(const struct allot_queue *q, const struct allot_job *j, const struct mover *x,
                      int need)
{
    return x->gpus < need && !queue_is_preemptor(j, x->id) &&
           q->jobs[x->id].state == ALLOT_JOB_RUNNING;
}

/* Tries to make room for j with movers m[0..nm) (sorted by node, then
 * cost). Returns 1 when jobs were moved (their ids in ids[0..*n)), 0 when
 * no move helps, or an error. */
static int make_room(struct allot_queue *q, struct allot_job *j, const struct mover *m, int nm,
                     struct busy *b, int ids[DEFRAG_MOVES], int *n_out, int64_t now)
{
    int need = whole_gpus(&j->spec.task), nn = allot_cluster_node_count(q->c);
    int fits = 0, nr = 0, want, n = 0, rc;
    struct busy mine;
    struct room *rooms;

    /* a gang: its tasks that fit nowhere yet (one task fits nowhere, or
     * it would not wait for room; this scan of every node is for gangs) */
    for (int i = 0; j->spec.n_tasks > 1 && i < nn && fits < j->spec.n_tasks; i++) {
        const struct allot_node *node = allot_cluster_node(q->c, i);
        fits += node->state == ALLOT_NODE_READY && allot_node_may_host(node, &j->spec.task) &&
                allot_node_whole_free(node) >= need;
    }
    want = j->spec.n_tasks - fits;
    if (want <= 0)
        return 0; /* whole GPUs are not what it lacks */
    rooms = allot_malloc(((size_t)nm + 1) * sizeof(*rooms));
    if (!rooms)
        return ALLOT_ENOMEM;
    for (int i = 0; i < nm;) {
        int end = i, node = m[i].node, free;
        struct room r = {.node = node, .first = i};
        const struct allot_node *nd = allot_cluster_node(q->c, node);
        while (end < nm && m[end].node == node)
            end++;
        free = m[i].free;
        if (nd->state == ALLOT_NODE_READY && free < need && !is_busy(b, node) &&
            allot_node_may_host(nd, &j->spec.task)) { /* a room j may use (labels, model) */
            /* the node's cheapest movers that are smaller than j's tasks */
            for (int x = i; x < end && free < need && r.moves < DEFRAG_MOVES; x++)
                if (mover_for(q, j, &m[x], need)) {
                    free += m[x].gpus;
                    r.cost += m[x].cost;
                    r.n = x - i + 1;
                    r.moves++;
                }
            if (free >= need)
                rooms[nr++] = r;
        }
        i = end;
    }
    qsort(rooms, (size_t)nr, sizeof(*rooms), cmp_room);
    /* the `want` cheapest rooms, then (when their movers find no place
     * elsewhere) the next ones, sliding by one, DEFRAG_TRIES at most */
    rc = 0;
    for (int k0 = 0; k0 + want <= nr && k0 < DEFRAG_TRIES && rc == 0; k0++) {
        n = 0;
        for (int k = k0; k < k0 + want; k++)
            for (int x = rooms[k].first; x < rooms[k].first + rooms[k].n; x++)
                if (mover_for(q, j, &m[x], need) && n < DEFRAG_MOVES)
                    ids[n++] = m[x].id;
        /* a room holds at least one mover that may go (it was built so) */
        if (ALLOT_NEVER(n == 0))
            break;
        by_gpus_desc(q, ids, n);
        rc = trial(q, j, ids, n, b, &mine, now);
    }
    allot_free(rooms);
    if (rc != 1)
        return rc;
    /* movers are jobs of one task: as many tasks as jobs */
    rc = queue_victims_signal(q, j, ids, n, (size_t)n, 2, now);
    if (rc)
        return rc;
    *n_out = n;
    /* later moves of the pass keep off the room this one counts on */
    for (int i = 0; i < mine.n; i++)
        if (b->n < (int)(sizeof(b->node) / sizeof(b->node[0])))
            b->node[b->n++] = mine.node[i];
        else
            b->full = true;
    return 1;
}

/* Whether pending job a came before b (first submission, then arrival
 * order, then id). */
static bool older(const struct allot_job *a, const struct allot_job *b)
{
    if (a->first_submit != b->first_submit)
        return a->first_submit < b->first_submit;
    return a->spec.seq != b->spec.seq ? a->spec.seq < b->spec.seq : a->id < b->id;
}

int queue_defrag(struct allot_queue *q, int64_t now)
{
    struct busy b = {0};
    struct mover *m;
    int cand[DEFRAG_JOBS], nc = 0, nm = 0, rc = 0;

    if (q->o.defrag_s <= 0 || now < q->defrag_next)
        return 0;
    q->defrag_next = now + q->o.defrag_s;
    /* the oldest waiting jobs that lack room, oldest first */
    for (size_t i = 0; i < q->n_pending; i++) {
        const struct allot_job *j = &q->jobs[q->pending[i]];
        int pos = nc, end;
        if (!wants_room(q, j))
            continue;
        while (pos > 0 && older(j, &q->jobs[cand[pos - 1]]))
            pos--;
        if (pos >= DEFRAG_JOBS)
            continue;
        end = nc < DEFRAG_JOBS ? nc : DEFRAG_JOBS - 1;
        memmove(&cand[pos + 1], &cand[pos], (size_t)(end - pos) * sizeof(*cand));
        cand[pos] = j->id;
        if (nc < DEFRAG_JOBS)
            nc++;
    }
    if (nc == 0)
        return 0;
    /* the movers, once per pass (sorted by node, then cost); those an
     * earlier job of the pass moved are no longer running (mover_for) */
    m = allot_malloc((q->n_running + 1) * sizeof(*m));
    if (!m)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < q->n_running; i++) {
        const struct allot_job *v;
        if (q->running[i] < 0)
            continue;
        v = &q->jobs[q->running[i]];
        if (movable(q, v, now))
            m[nm++] =
                (struct mover){.id = v->id,
                               .node = v->pl[0].node,
                               .gpus = v->spec.task.num_gpu,
                               .cost = (int64_t)v->spec.task.num_gpu * queue_lost_work(q, v, now)};
    }
    qsort(m, (size_t)nm, sizeof(*m), cmp_mover);
    /* free GPUs per node, once: moved jobs keep theirs through their grace
     * period (without one, the trial still decides on the cluster as it is) */
    for (int i = 0; i < nm; i++)
        m[i].free = i > 0 && m[i - 1].node == m[i].node
                        ? m[i - 1].free
                        : allot_node_whole_free(allot_cluster_node(q->c, m[i].node));
    for (int c = 0; c < nc && rc >= 0; c++) {
        struct allot_job *j = &q->jobs[cand[c]];
        int ids[DEFRAG_MOVES], n = 0;
        if (!wants_room(q, j))
            continue;
        if (b.full)
            break;
        rc = make_room(q, j, m, nm, &b, ids, &n, now);
        /* without a grace period they stopped already: j takes the room,
         * then they go where the trial found room */
        if (rc == 1 && j->stopping_victims == 0) {
            /* as the jobs whose victims just stopped: before any
             * reservation of this round */
            struct reservation r = {.holder = -1};
            rc = queue_consider(q, j, now, &r, NULL);
            for (int i = 0; i < n && rc == 0; i++)
                if (q->jobs[ids[i]].state == ALLOT_JOB_PENDING)
                    rc = queue_consider(q, &q->jobs[ids[i]], now, &r, NULL);
        }
    }
    allot_free(m);
    return rc < 0 ? rc : 0;
}
