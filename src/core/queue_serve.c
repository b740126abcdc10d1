/*
 * The order of a scheduling cycle (step 3 of allot_queue_cycle): the
 * ordering policies (ops structs in allot_queue_policies[], each a key per
 * pending job, lower first) and the order in which the cycle considers the
 * pending jobs: one global order by key, or tenants taking turns by fair
 * share, each offering its best job by key. Keys are computed once per
 * cycle, after its first step; a job that becomes pending during the cycle
 * (a preempted victim) waits for the next one, also when the cycle is cut
 * short at its work budget and resumed (the order is kept in q->serving).
 * Called from the cycle only; single-threaded.
 */
#include "queue_int.h"

#include <stdlib.h>
#include <string.h>

/* Step 2: the pending jobs with their policy keys, best first (*out owned
 * by the caller). Returns their number or ALLOT_ENOMEM. */
static long cycle_order(struct allot_queue *q, int64_t now, struct queue_sortkey **out)
{
    size_t n = q->n_pending;
    struct queue_sortkey *ks = allot_malloc((n + 1) * sizeof(*ks));

    if (!ks)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct allot_job *j = &q->jobs[q->pending[i]];
        q->order->key(q, j, now, ks[i].key);
        ks[i].seq = j->spec.seq;
        ks[i].id = j->id;
        ks[i].tenant = j->spec.tenant;
    }
    qsort(ks, n, sizeof(*ks), queue_sortkey_cmp);
    *out = ks;
    return (long)n;
}

/*
 * Tenants' turns: the tenant with a job left whose key is lowest goes next
 * (ties to the lowest tenant id); the key is -1 when its best job has
 * aged, else its fair-share key. Fair-share keys change only when usage
 * does, i.e. when a job starts or stops (q->run_epoch), so they are
 * computed once per such change and the tenants kept in a heap.
 */
struct turns {
    size_t *head; /* per tenant: position of its best job left in ks, SIZE_MAX: none */
    size_t *next; /* per position: the next position of the same tenant, SIZE_MAX */
    double *fair; /* per tenant: fair-share key at `epoch` */
    int *heap;    /* tenants with a job left, by turn_key */
    int n_heap, nt;
    uint64_t epoch; /* run epoch + 1 the keys belong to; 0: none */
};

/* What a serving is at: its order, and where it stands in it, kept in q
 * while a cycle cut short at its work budget may resume. */
struct queue_serving {
    struct queue_sortkey *ks; /* the cycle's pending jobs, best first */
    size_t n;
    size_t pos;  /* one global order: the next position */
    size_t left; /* tenants' turns: positions not yet taken */
    struct turns u;
};

static double turn_key(const struct queue_serving *v, int ti)
{
    const struct turns *u = &v->u;

    return v->ks[u->head[ti]].key[0] < 0.5 ? -1.0 : u->fair[ti];
}

static bool turn_before(const struct queue_serving *v, int a, int b)
{
    double ka = turn_key(v, a), kb = turn_key(v, b);

    return ka < kb || (ka == kb && a < b);
}

static void turns_down(struct queue_serving *v, int i)
{
    struct turns *u = &v->u;

    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < u->n_heap && turn_before(v, u->heap[l], u->heap[m]))
            m = l;
        if (l + 1 < u->n_heap && turn_before(v, u->heap[l + 1], u->heap[m]))
            m = l + 1;
        if (m == i)
            return;
        int x = u->heap[i];
        u->heap[i] = u->heap[m];
        u->heap[m] = x;
        i = m;
    }
}

static void turns_push(struct queue_serving *v, int ti)
{
    struct turns *u = &v->u;
    int i = u->n_heap++;

    u->heap[i] = ti;
    while (i > 0 && turn_before(v, u->heap[i], u->heap[(i - 1) / 2])) {
        int p = (i - 1) / 2, x = u->heap[i];
        u->heap[i] = u->heap[p];
        u->heap[p] = x;
        i = p;
    }
}

/* Recomputes every fair-share key and the heap after usage changed. */
static void turns_rebuild(struct allot_queue *q, struct queue_serving *v)
{
    struct turns *u = &v->u;

    u->n_heap = 0;
    for (int ti = 0; ti < u->nt; ti++)
        if (u->head[ti] != SIZE_MAX) {
            u->fair[ti] = allot_tenants_fair_key(q->t, ti, &q->capacity);
            u->heap[u->n_heap++] = ti;
        }
    for (int i = u->n_heap / 2; i-- > 0;)
        turns_down(v, i);
    u->epoch = q->run_epoch + 1;
}

/* Step 3a: one global order: considers the jobs in key order. */
static int serve_global(struct allot_queue *q, struct queue_serving *v, int64_t now,
                        struct reservation *r)
{
    int rc = 0;

    for (; v->pos < v->n && rc == 0 && !queue_cut(q); v->pos++)
        if (q->jobs[v->ks[v->pos].id].state == ALLOT_JOB_PENDING)
            rc = queue_consider(q, &q->jobs[v->ks[v->pos].id], now, r, NULL);
    return rc;
}

/* Step 3b: tenants take turns, each offering its best job. */
static int serve_by_tenant(struct allot_queue *q, struct queue_serving *v, int64_t now,
                           struct reservation *r)
{
    struct turns *u = &v->u;
    int rc = 0;

    while (v->left > 0 && rc == 0 && !queue_cut(q)) {
        int best;
        size_t pos;
        if (u->epoch != q->run_epoch + 1)
            turns_rebuild(q, v);
        if (u->n_heap == 0)
            break;
        best = u->heap[0];
        u->heap[0] = u->heap[--u->n_heap];
        turns_down(v, 0);
        pos = u->head[best];
        if (q->jobs[v->ks[pos].id].state == ALLOT_JOB_PENDING)
            rc = queue_consider(q, &q->jobs[v->ks[pos].id], now, r, NULL);
        v->left--;
        u->head[best] = u->next[pos];
        if (u->head[best] != SIZE_MAX && u->epoch == q->run_epoch + 1)
            turns_push(v, best);
        /* otherwise the rebuild at the top picks it up */
    }
    return rc;
}

void queue_serving_free(struct queue_serving *v)
{
    if (!v)
        return;
    allot_free(v->ks);
    allot_free(v->u.head);
    allot_free(v->u.next);
    allot_free(v->u.fair);
    allot_free(v->u.heap);
    allot_free(v);
}

/* A serving at its start: the order, and the tenants' lists for turns.
 * NULL when out of memory. */
static struct queue_serving *serving_new(struct allot_queue *q, int64_t now)
{
    struct queue_serving *v = allot_calloc(1, sizeof(*v));
    struct turns *u;
    long n;

    if (!v)
        return NULL;
    n = cycle_order(q, now, &v->ks);
    if (n < 0) {
        allot_free(v);
        return NULL;
    }
    v->n = v->left = (size_t)n;
    if (!q->order->per_tenant)
        return v;
    u = &v->u;
    u->nt = allot_tenants_count(q->t);
    u->head = allot_malloc(((size_t)u->nt + 1) * sizeof(*u->head));
    u->next = allot_malloc((v->n + 1) * sizeof(*u->next));
    u->fair = allot_malloc(((size_t)u->nt + 1) * sizeof(*u->fair));
    u->heap = allot_malloc(((size_t)u->nt + 1) * sizeof(*u->heap));
    if (!u->head || !u->next || !u->fair || !u->heap) {
        queue_serving_free(v);
        return NULL;
    }
    for (int i = 0; i < u->nt; i++)
        u->head[i] = SIZE_MAX;
    for (size_t i = v->n; i-- > 0;) {
        u->next[i] = u->head[v->ks[i].tenant];
        u->head[v->ks[i].tenant] = i; /* first (best) position per tenant */
    }
    return v;
}

int queue_serve(struct allot_queue *q, int64_t now, struct reservation *r, bool resume)
{
    int rc;

    if (!resume || !q->serving) {
        queue_serving_free(q->serving);
        q->serving = serving_new(q, now);
        if (!q->serving)
            return ALLOT_ENOMEM;
    }
    rc = q->order->per_tenant ? serve_by_tenant(q, q->serving, now, r)
                              : serve_global(q, q->serving, now, r);
    if (rc || !q->more) { /* the serving is over (or cannot resume) */
        queue_serving_free(q->serving);
        q->serving = NULL;
    }
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

static int64_t user_milli(const struct allot_queue *q, const struct allot_job *j)
{
    struct user_use k = {.key = queue_user_key(j)};
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
    k[1] = -(double)queue_job_prio(q, j) * 4 + j->spec.qos;
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
    .user_share = true,
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
