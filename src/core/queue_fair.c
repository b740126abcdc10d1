/*
 * The fair shares of the job queue (docs/tenancy.md, "Fair-share reclaim"
 * and "Fair-share cap"): each leaf tenant's share of the cluster's GPUs
 * for a round, water-filled down the tenant tree by nominal quota among
 * the tenants with demand, and the cap that keeps a tenant beyond its
 * nominal from taking more than fair_cap times it while others wait. The
 * reclaim that uses them is in queue_preempt.c. Called from the cycle
 * only; single-threaded.
 */
#include "queue_int.h"

#include <stdlib.h>
#include <string.h>

/* Orders (demand / weight, tenant) pairs: the lowest ratio first, ties by
 * tenant index. */
static int cmp_ratio(const void *a, const void *b)
{
    const double *x = a, *y = b;

    if (x[0] != y[0])
        return (x[0] > y[0]) - (x[0] < y[0]);
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/*
 * Water-fills `pool` GPUs (milli) among the children of tenant p that ask
 * for some (dem > 0, w > 0), in proportion to their weights w, none above
 * what it asks for, so that what one cannot use goes to its siblings:
 * lowest demand per weight first, each taking the smaller of its demand
 * and its part of what is left. A leaf's part is its fair share; an
 * interior tenant's goes to part[] to be filled among its children in
 * turn. ord: room for a (ratio, tenant) pair per child.
 */
static void fair_fill(struct allot_queue *q, int p, double pool, const int64_t *dem,
                      const double *w, double *part, double *ord)
{
    int n = 0;
    double wsum = 0;

    for (int c = allot_tenants_get(q->t, p)->first_child; c >= 0;
         c = allot_tenants_get(q->t, c)->next_sibling) {
        if (dem[c] > 0 && w[c] > 0) {
            ord[2 * n] = (double)dem[c] / w[c];
            ord[2 * n + 1] = c;
            wsum += w[c];
            n++;
        }
    }
    qsort(ord, (size_t)n, 2 * sizeof(*ord), cmp_ratio);
    for (int k = 0; k < n; k++) {
        int c = (int)ord[2 * k + 1];
        double f = pool > 0 ? pool * w[c] / wsum : 0;
        bool all = (double)dem[c] <= f; /* it gets all it asks for */
        if (all) {
            pool -= (double)dem[c];
            wsum -= w[c];
        }
        if (allot_tenants_get(q->t, c)->first_child < 0)
            q->fair[c].share = all ? dem[c] : (int64_t)f;
        else
            part[c] = all ? (double)dem[c] : f;
    }
}

/*
 * Each leaf tenant's fair share of the cluster's GPUs for this round: the
 * GPUs water-filled down the tenant tree (fair_fill), at each level among
 * the tenants with demand (GPUs running and waiting) in proportion to
 * their nominal GPU quotas (an interior tenant without one weighs as its
 * children with demand together), none above its demand, so that what
 * one cannot use goes to its siblings. Leaves without a finite nominal
 * keep what they use out of the pool and get none (-1: no fair-share
 * reclaim or cap for or against them). Demand changes only as jobs arrive
 * and end, so one computation holds for the round. Out of memory: no
 * shares this round.
 */
void queue_fair_shares(struct allot_queue *q)
{
    int nt = allot_tenants_count(q->t);
    int64_t *dem;
    double *w, *part, *ord, pool = (double)q->capacity.v[ALLOT_RES_GPU];

    q->fair_n = 0;
    if ((q->o.fair_reclaim_s <= 0 && q->o.fair_cap <= 0) || !q->o.quotas ||
        allot_grow((void **)&q->fair, &q->fair_room, (size_t)nt, sizeof(*q->fair)))
        return;
    memset(q->fair, 0, (size_t)nt * sizeof(*q->fair));
    dem = allot_calloc((size_t)nt + 1, sizeof(*dem));
    w = allot_calloc(((size_t)nt + 1) * 4, sizeof(*w));
    if (!dem || !w) {
        allot_free(dem);
        allot_free(w);
        return;
    }
    part = w + nt + 1;
    ord = part + nt + 1;
    for (size_t i = 0; i < q->tc_n && i < (size_t)nt; i++)
        dem[i] = q->tc[i].pending - q->tc[i].never; /* what may ever start */
    /* demand and weight up the tree: a tenant's index is above its parent's */
    for (int i = nt - 1; i >= 0; i--) {
        const struct allot_tenant *x = allot_tenants_get(q->t, i);
        int64_t nom = x->quota[ALLOT_RES_GPU].nominal;
        bool finite = nom != ALLOT_UNLIMITED && nom > 0;
        if (ALLOT_NEVER(x->parent >= i))
            goto out; /* no shares this round */
        q->fair[i].share = -1;
        part[i] = -1;
        if (x->first_child < 0) {
            dem[i] += x->usage[ALLOT_RES_GPU];
            if (!finite) {
                pool -= (double)x->usage[ALLOT_RES_GPU];
                dem[i] = 0;
            }
        }
        if (finite)
            w[i] = (double)nom; /* an interior one: instead of its children's sum */
        if (x->parent >= 0 && dem[i] > 0 && w[i] > 0) {
            dem[x->parent] += dem[i];
            w[x->parent] += w[i];
        }
    }
    /* shares down the tree: a tenant's part is known before its children's */
    part[0] = pool > 0 ? pool : 0;
    for (int i = 0; i < nt; i++)
        if (part[i] >= 0 && allot_tenants_get(q->t, i)->first_child >= 0)
            fair_fill(q, i, part[i], dem, w, part, ord);
    q->fair_n = (size_t)nt;
out:
    allot_free(dem);
    allot_free(w);
}

void queue_fair_left(struct allot_queue *q, const struct allot_job *j)
{
    if (j->state != ALLOT_JOB_STOPPING)
        return;
    q->tc[j->spec.tenant].stopping -= j->req.v[ALLOT_RES_GPU];
    if (j->preempted_for >= 0) {
        const struct allot_job *p = &q->jobs[j->preempted_for];
        if (p->stopping_victims == 1 && p->state == ALLOT_JOB_PENDING)
            q->tc[p->spec.tenant].waiting -= p->req.v[ALLOT_RES_GPU];
    }
}

int64_t queue_fair_share(const struct allot_queue *q, int t)
{
    return t >= 0 && (size_t)t < q->fair_n ? q->fair[t].share : -1;
}

bool queue_fair_capped(const struct allot_queue *q, const struct allot_job *j)
{
    int t = j->spec.tenant;
    int64_t f = queue_fair_share(q, t), g = j->req.v[ALLOT_RES_GPU], u;
    const struct allot_tenant *x;

    if (q->o.fair_cap <= 0 || !q->o.quotas || g <= 0 || f < 0)
        return false;
    x = allot_tenants_get(q->t, t);
    u = x->usage[ALLOT_RES_GPU] + g;
    return u > x->quota[ALLOT_RES_GPU].nominal && (double)u > q->o.fair_cap * (double)f;
}
