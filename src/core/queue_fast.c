/*
 * The cycle's step 3 without repeating work whose answer is known
 * (q->fast; queue_serve.c is the reference). In a busy cluster most pending
 * jobs cannot start: their tenant's quota or the lack of room turns them
 * away, and it does so the same way for every job of the same shape. Here
 * the fair order (tenants' turns) makes the same decisions and leaves the
 * same pending reasons as queue_serve.c, but:
 *
 *  - every tenant keeps its pending jobs in key order across cycles
 *    (struct fast_ten); the order is rebuilt only when it may have changed:
 *    a job joined or left the tenant's pending jobs, the GPU use of one of
 *    its users changed (key_fair reads it), one of its jobs aged, or a
 *    priority class changed;
 *  - a tenant's jobs fall into verdict classes (same task, tenant included,
 *    and gang size, hence the same request). Within one queue state
 *    (q->serial) a class gets one admission answer; within one free epoch
 *    (no capacity freed, q->free_epoch) a gang that failed to place fails
 *    again, since a placement only takes room. So a class's verdict -- turned
 *    away by quota (tenant and resource) or by capacity -- is worked out
 *    once per state, from the tenant's admission answer (one test for the
 *    largest request of all its classes first) and a table of the shapes
 *    that failed to place, shared by all tenants when isolation cannot tell
 *    them apart (shared tasks, no exclusive job running, no orphans);
 *  - a job of a class with a verdict is skipped when considering it could do
 *    nothing else: it is not special (no victims stopping for it, not an
 *    aged large gang), it would not make a reservation (a large gang
 *    turned away by the cluster's quota; never for lack of room, which is
 *    asserted), and no
 *    victim search would run (preemption off, or the cycle's budget for its
 *    kind of search is spent). Its reason becomes the verdict, written only when it differs.
 *    While a reservation holds, every job first meets its test
 *    (queue_held; whether the job's tenant is inside its nominal is shared
 *    by its class); a job held back gets only that reason. Every other job
 *    is considered in full (queue_consider_past, with its class's verdict
 *    when known);
 *  - tenants take turns from an indexed heap; a start or leave refreshes
 *    only the fair-share keys of the tenants under the same top-level
 *    organisation (fair keys sum shares down the path, the root excluded),
 *    and a tenant keeps the turn while its key is unchanged, as in
 *    queue_serve.c where it would be popped and pushed straight back.
 *
 * Victim searches of jobs considered from here share results
 * (q->visit): a fruitless search of one class, priority and LAS level at
 * one state and time is not repeated; the job gets the same recheck time,
 * and the search still counts against the cycle's budget.
 *
 * The cycle's first and last steps need not scan every job either
 * (any order, q->fast): grace periods and runtime limits wait in a timer
 * heap (stale entries dropped when they come up), so stop_due finds the
 * jobs due without a scan and hands them over in the running list's order;
 * the jobs whose fruitless search may ask for a wakeup are exactly those
 * that searched since the last job left (their search memo is current),
 * kept in a list per leave epoch.
 *
 * Every pending job is listed with its tenant when it becomes pending; a
 * list that cannot grow marks the lists lost, and the next cycle lists
 * every tenant's jobs again from q->pending; lost timers or searched jobs
 * make the cycle scan instead until they are whole again. Called from the
 * cycle and the queue's hooks only; single-threaded.
 */
#include "queue_int.h"

#include <stdlib.h>
#include <string.h>

/* A fruitless victim search of one priority and LAS level. */
struct fast_search {
    int prio;
    bool las1; /* the job had less service than the LAS threshold */
    uint64_t serial;
    int64_t now, recheck;
};

#define FAST_SEARCHES 4

/* Entries looked at one by one that count as one unit of a cycle's work. */
#define FAST_VISITS 512

/* How many entries ahead ten_run asks for the job records it will look
 * at (docs/benchmarks.md, "Cycle at daemon scale"). */
#define FAST_AHEAD 4

/* The pending jobs of one tenant with the same task and gang size. */
struct fast_cls {
    int rep; /* a job of the class: its request */
    struct allot_task task;
    int n_tasks;
    uint64_t hash;       /* of its task and gang size */
    uint64_t fhash[2];   /* its key among failed shapes: with, without the tenant */
    uint64_t serial;     /* q->serial the admission answer is for; 0: none */
    bool adm;            /* admitted by quota */
    int who, res;        /* else what refused it */
    uint64_t nom_serial; /* q->serial in_nom is for */
    bool in_nom;         /* inside its tenant's nominal (which search budget) */
    uint64_t fail_free;  /* q->free_epoch + 1 when placing it is known to fail */
    uint32_t vtag;       /* its latest verdict, packed (0: none) */
    uint32_t tagv;       /* the reason n_mis counts against */
    size_t n, n_mis;     /* its entries; those whose tag is not tagv */
    struct fast_search s[FAST_SEARCHES];
    int n_s;
};

/* One pending job of a tenant, in key order. */
struct fast_ent {
    int id;
    int cls;      /* index in the tenant's classes */
    uint32_t tag; /* its reason when a quota or capacity one (why_tag), else 0 */
    bool aged;    /* first key below 0.5 (the turn key of its tenant is then -1) */
    bool special; /* considered in full: victims stopping for it, or may reserve */
};

struct fast_ten {
    int *mem; /* owned: ids that became pending; stale and repeated ones go at a build */
    size_t n_mem, mem_cap;
    struct fast_ent *e; /* owned: its pending jobs in key order, from the last build */
    size_t n_e, e_cap;
    struct fast_cls *cls; /* owned */
    size_t n_cls, cls_cap;
    struct allot_resvec rmax; /* the largest request of any class, per resource */
    uint64_t rmax_serial;     /* q->serial rmax_adm is for */
    bool rmax_adm;            /* rmax admitted: so is every class */
    size_t pos;               /* next entry to consider in this cycle */
    size_t n_aged;            /* entries [0, n_aged) are aged (they come first) */
    size_t special_end;       /* no entry at or after it is special */
    bool recount;             /* a class's reasons drifted from tagv: recount at the end */
    int64_t age_at;           /* when a job not aged at the build ages */
    double fair;              /* fair-share key */
    int hpos;                 /* index in the turns heap, -1 */
    bool dirty;               /* the order may have changed: rebuild at the next cycle */
    bool key_aged;            /* the head's aged flag its heap key was made with */
    uint64_t mark;            /* refresh pass that visited it */
};

/* An instant a running job may become a victim at (queue_recheck_instants),
 * valid while the job is in that run and the instant is still its own. */
struct fast_rc {
    int64_t at;
    int64_t runs;
    int id;
};

/* A shape (task and gang size) that failed to place in one free epoch. */
struct fast_fail {
    uint64_t epoch1; /* q->free_epoch + 1; any other value: an empty slot */
    uint64_t hash;
    struct allot_task task;
    int n_tasks;
};

/* A grace period or runtime limit ending at `at` (valid while the job is
 * still in that run and state). */
struct fast_timer {
    int64_t at;
    int64_t runs; /* the job's run it belongs to */
    int id;
    bool grace; /* else the runtime limit */
};

struct queue_fast {
    bool ordered;         /* the order is fair: per-tenant lists are kept */
    bool lost;            /* a list could not grow: relist from q->pending */
    bool serving;         /* inside queue_fast_serve: usage changes are noted */
    bool initing;         /* serve_init has not finished (a cut stopped it) */
    size_t init_pos;      /* the next tenant serve_init looks at */
    uint64_t serve_epoch; /* the run epoch the turns were last refreshed at */
    uint64_t visits;      /* entries looked at one by one, ever (work: see ten_run) */
    struct fast_ten *t;   /* owned, per tenant id */
    size_t nt;
    int *heap; /* owned: tenants with jobs left this cycle */
    size_t n_heap, heap_cap;
    int *touched; /* owned: tenants whose usage changed since the last refresh */
    size_t n_touched, touched_cap;
    bool touched_all;
    uint64_t mark;
    struct fast_fail *fail; /* owned: open addressing, slots of other epochs empty */
    size_t fail_cap, n_fail;
    uint64_t fail_epoch1;
    struct queue_sortkey *sk; /* owned: scratch of a build */
    size_t sk_cap;
    int *tab; /* owned: scratch of a build, class lookup */
    size_t tab_cap;
    struct fast_timer *tm; /* owned: min-heap by time */
    size_t n_tm, tm_cap;
    bool tm_lost; /* a timer could not be kept: rebuild from the running jobs */
    int *due;     /* owned: jobs due in one cycle, in running order */
    size_t due_cap;
    int *sr; /* owned: jobs that searched at leave epoch sr_epoch */
    size_t n_sr, sr_cap;
    uint64_t sr_epoch;
    uint64_t *sr_mark; /* owned, per job id: sr_epoch when listed in sr */
    size_t sr_mark_cap;
    bool sr_lost;       /* one could not be listed: scan until the epoch moves on */
    struct fast_rc *rc; /* owned: min-heap by at, of instants still ahead (see recheck) */
    size_t n_rc, rc_cap;
    struct fast_rc *rc_out; /* owned: scratch, entries taken off while looking */
    size_t rc_out_cap;
    bool rc_lost;   /* an instant could not be kept: rebuild from the running jobs */
    int64_t rc_now; /* the latest time asked at (entries at or before it are gone) */
};

/* ---- small pieces ---- */

/* A quota or capacity reason packed in 32 bits (0: any other reason, or
 * one that does not fit). */
static uint32_t why_pack(int kind, int who, int res)
{
    if ((kind != ALLOT_WHY_QUOTA && kind != ALLOT_WHY_CAPACITY && kind != ALLOT_WHY_FAIR_CAP) ||
        who < 0 || who >= 1 << 20 || res < 0 || res >= 128)
        return 0;
    return (uint32_t)kind | (uint32_t)res << 4 | (uint32_t)who << 11;
}

static uint32_t why_tag(const struct allot_why *w)
{
    if (w->other != -1 || w->a || w->b)
        return 0;
    return why_pack(w->kind, w->who, w->res);
}

static uint64_t task_hash(const struct allot_task *t, int n_tasks)
{
    return allot_hash_mix(allot_task_hash(t, 0xfa57), (uint64_t)n_tasks);
}

/* Considered in full whatever its class's verdict (see consider()). */
static bool is_special(const struct allot_queue *q, const struct allot_job *j, int64_t now)
{
    bool aged = now - j->submit >= q->o.aging_s && q->o.aging_s > 0;
    bool large = queue_job_gpus(j) >= (q->o.large_gang_gpus ? q->o.large_gang_gpus : 8);

    /* a holder with backfill of its own may make the reservation whatever
     * its verdict (queue_consider_past: its own backfill's quota is not a
     * refusal) */
    return j->stopping_victims > 0 || j->backfilled > 0 || (q->o.backfill && large && aged);
}

/* Makes room for tenant ids below n. Returns 0 or ALLOT_ENOMEM. */
static int fast_tenants(struct queue_fast *f, size_t n)
{
    size_t cap = f->nt;

    if (n <= f->nt)
        return 0;
    if (allot_grow((void **)&f->t, &cap, n, sizeof(*f->t)))
        return ALLOT_ENOMEM;
    memset(f->t + f->nt, 0, (cap - f->nt) * sizeof(*f->t));
    for (size_t i = f->nt; i < cap; i++) {
        f->t[i].hpos = -1;
        f->t[i].age_at = INT64_MAX;
    }
    f->nt = cap;
    return 0;
}

/* ---- hooks ---- */

void queue_fast_pending(struct allot_queue *q, const struct allot_job *j)
{
    struct queue_fast *f = q->fq;
    struct fast_ten *T;

    if (!q->fast || !f->ordered || f->lost)
        return;
    if (fast_tenants(f, (size_t)j->spec.tenant + 1)) {
        f->lost = true;
        return;
    }
    T = &f->t[j->spec.tenant];
    if (allot_grow((void **)&T->mem, &T->mem_cap, T->n_mem + 1, sizeof(*T->mem))) {
        f->lost = true;
        return;
    }
    T->mem[T->n_mem++] = j->id;
    T->dirty = true;
}

void queue_fast_gone(struct allot_queue *q, const struct allot_job *j)
{
    if (!q->fast)
        return;
    if ((size_t)j->spec.tenant < q->fq->nt)
        q->fq->t[j->spec.tenant].dirty = true;
    if ((size_t)j->id < q->fq->sr_mark_cap)
        q->fq->sr_mark[j->id] = 0; /* its slot may be someone else's next */
}

void queue_fast_usage(struct allot_queue *q, int tenant)
{
    struct queue_fast *f = q->fq;

    if (!q->fast)
        return;
    if ((size_t)tenant < f->nt)
        f->t[tenant].dirty = true; /* its users' GPU use is in its keys */
    if (!f->serving || f->touched_all)
        return;
    if (allot_grow((void **)&f->touched, &f->touched_cap, f->n_touched + 1, sizeof(*f->touched)))
        f->touched_all = true;
    else
        f->touched[f->n_touched++] = tenant;
}

void queue_fast_dirty(struct allot_queue *q, int tenant)
{
    if (q->fast && (size_t)tenant < q->fq->nt)
        q->fq->t[tenant].dirty = true;
}

void queue_fast_all_dirty(struct allot_queue *q)
{
    if (!q->fast)
        return;
    for (size_t i = 0; i < q->fq->nt; i++)
        q->fq->t[i].dirty = true;
}

/* ---- shapes that failed to place ---- */

/* The task j's gang is remembered under: without the tenant when nothing
 * placed could tell tenants apart (shared task, no exclusive job running,
 * no orphan, whose isolation is unknown). */
static void fail_task(const struct allot_queue *q, const struct allot_job *j, struct allot_task *k)
{
    *k = j->spec.task;
    if (k->isolation == ALLOT_ISO_SHARED && q->n_excl == 0 && q->n_orphans == 0)
        k->tenant = 0;
}

/* The slot of (k, n) in the current epoch's table: its own, or the empty one
 * where it would go. NULL when the table has no slots. */
static struct fast_fail *fail_slot(struct queue_fast *f, const struct allot_task *k, int n,
                                   uint64_t h)
{
    size_t mask = f->fail_cap - 1, i;

    if (!f->fail_cap)
        return NULL;
    for (i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct fast_fail *s = &f->fail[i];
        if (s->epoch1 != f->fail_epoch1 ||
            (s->hash == h && s->n_tasks == n && allot_task_same(&s->task, k)))
            return s;
    }
}

/* Starts the table afresh when the free epoch moved on. */
static void fail_epoch(const struct allot_queue *q, struct queue_fast *f)
{
    if (f->fail_epoch1 != q->free_epoch + 1) {
        f->fail_epoch1 = q->free_epoch + 1;
        f->n_fail = 0;
    }
}

/* True when a gang of n tasks t, whose failed-shape key hashes to h[0]
 * with its tenant and h[1] without, is known to fail now. */
static bool fail_known(struct allot_queue *q, const struct allot_task *t, int n,
                       const uint64_t h[2])
{
    struct allot_task k = *t;
    struct fast_fail *s;

    fail_epoch(q, q->fq);
    if (!q->fq->n_fail)
        return false;
    if (k.isolation == ALLOT_ISO_SHARED && q->n_excl == 0 && q->n_orphans == 0)
        k.tenant = 0; /* as fail_task */
    s = fail_slot(q->fq, &k, n, h[k.tenant == 0]);
    return s && s->epoch1 == q->fq->fail_epoch1;
}

/* The failed-shape hashes of a gang of n tasks t: with its tenant, and
 * without. */
static void fail_hashes(const struct allot_task *t, int n, uint64_t h[2])
{
    struct allot_task k = *t;

    h[0] = task_hash(&k, n);
    k.tenant = 0;
    h[1] = task_hash(&k, n);
}

bool queue_fast_place_fails(struct allot_queue *q, const struct allot_job *j)
{
    uint64_t h[2];

    if (!q->fast || !q->fq->n_fail)
        return false;
    fail_hashes(&j->spec.task, j->spec.n_tasks, h);
    return fail_known(q, &j->spec.task, j->spec.n_tasks, h);
}

bool queue_fast_in_nom(struct allot_queue *q, const struct allot_job *j)
{
    struct fast_cls *c = q->visit;
    bool in_nom;

    if (c && c->nom_serial == q->serial)
        return c->in_nom;
    in_nom = q->o.quotas && allot_tenants_in_nominal(q->t, j->spec.tenant, &j->req);
    if (c) { /* j is of class c: the same request and tenant */
        c->in_nom = in_nom;
        c->nom_serial = q->serial;
    }
    return in_nom;
}

void queue_fast_place_failed(struct allot_queue *q, const struct allot_job *j)
{
    struct queue_fast *f = q->fq;
    struct allot_task k;
    struct fast_fail *s;
    uint64_t h;

    if (!q->fast)
        return;
    fail_epoch(q, f);
    if ((f->n_fail + 1) * 2 > f->fail_cap) {
        size_t ncap = f->fail_cap ? f->fail_cap * 2 : 64;
        struct fast_fail *old = f->fail, *nf = allot_calloc(ncap, sizeof(*nf));
        size_t ocap = f->fail_cap;
        if (!nf)
            return; /* not remembered: the next job tries to place it */
        f->fail = nf;
        f->fail_cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].epoch1 == f->fail_epoch1)
                *fail_slot(f, &old[i].task, old[i].n_tasks, old[i].hash) = old[i];
        allot_free(old);
    }
    fail_task(q, j, &k);
    h = task_hash(&k, j->spec.n_tasks);
    s = fail_slot(f, &k, j->spec.n_tasks, h);
    if (s->epoch1 != f->fail_epoch1) {
        *s = (struct fast_fail){
            .epoch1 = f->fail_epoch1, .hash = h, .task = k, .n_tasks = j->spec.n_tasks};
        f->n_fail++;
    }
}

/* ---- shared victim searches ---- */

static bool las1(const struct allot_queue *q, const struct allot_job *j)
{
    return q->o.las_threshold_gpu_s > 0 && j->attained_s < q->o.las_threshold_gpu_s;
}

int64_t queue_fast_search_get(struct allot_queue *q, const struct allot_job *j, int64_t now)
{
    const struct fast_cls *c = q->visit;

    if (!c || j->n_preemptors > 0 || j->backfilled > 0)
        return INT64_MIN;
    for (int i = 0; i < c->n_s; i++) {
        const struct fast_search *s = &c->s[i];
        if (s->serial == q->serial && s->now == now && s->prio == queue_job_prio(q, j) &&
            s->las1 == las1(q, j))
            return s->recheck;
    }
    return INT64_MIN;
}

void queue_fast_search_put(struct allot_queue *q, const struct allot_job *j, int64_t now,
                           uint64_t serial, int64_t recheck)
{
    struct fast_cls *c = q->visit;
    struct fast_search *s = NULL;

    if (!c || j->n_preemptors > 0 || j->backfilled > 0 || serial != q->serial)
        return;
    /* a slot of an older state or time, else the oldest */
    for (int i = 0; i < c->n_s && !s; i++)
        if (c->s[i].serial != serial || c->s[i].now != now)
            s = &c->s[i];
    if (!s && c->n_s < FAST_SEARCHES)
        s = &c->s[c->n_s++];
    if (!s) {
        memmove(c->s, c->s + 1, (FAST_SEARCHES - 1) * sizeof(*c->s));
        s = &c->s[FAST_SEARCHES - 1];
    }
    *s = (struct fast_search){.prio = queue_job_prio(q, j),
                              .las1 = las1(q, j),
                              .serial = serial,
                              .now = now,
                              .recheck = recheck};
}

/* ---- a tenant's order ---- */

/* The class of job j in T, added when new (room reserved by the caller;
 * tab: an open-addressing table of mask + 1 slots). */
static int cls_of(const struct allot_queue *q, struct fast_ten *T, int *tab, size_t mask,
                  const struct allot_job *j)
{
    uint64_t h = task_hash(&j->spec.task, j->spec.n_tasks);
    size_t i;

    for (i = (size_t)h & mask; tab[i] >= 0; i = (i + 1) & mask) {
        const struct fast_cls *c = &T->cls[tab[i]];
        if (c->hash == h && c->n_tasks == j->spec.n_tasks &&
            allot_task_same(&c->task, &j->spec.task))
            return tab[i];
    }
    tab[i] = (int)T->n_cls;
    T->cls[T->n_cls] = (struct fast_cls){.rep = j->id,
                                         .task = j->spec.task,
                                         .n_tasks = j->spec.n_tasks,
                                         .hash = h,
                                         .tagv = why_tag(&j->why)};
    fail_hashes(&j->spec.task, j->spec.n_tasks, T->cls[T->n_cls].fhash);
    return (int)T->n_cls++;
}

/* Sets entry e's reason tag, keeping its class's count of tags that are
 * not tagv. */
static void ent_tag(struct fast_ten *T, struct fast_ent *e, uint32_t tag)
{
    struct fast_cls *c = &T->cls[e->cls];

    c->n_mis += (size_t)(tag != c->tagv) - (size_t)(e->tag != c->tagv);
    e->tag = tag;
}

/* Counts again, per class, the entries whose tag is not the class's
 * latest verdict (or, without one, its first entry's tag). */
static void ten_recount(struct fast_ten *T)
{
    for (size_t c = 0; c < T->n_cls; c++) {
        T->cls[c].tagv = T->cls[c].vtag;
        T->cls[c].n_mis = T->cls[c].vtag ? 0 : SIZE_MAX; /* SIZE_MAX: take the first's */
    }
    for (size_t i = 0; i < T->n_e; i++) {
        struct fast_cls *c = &T->cls[T->e[i].cls];
        if (c->n_mis == SIZE_MAX) {
            c->tagv = T->e[i].tag;
            c->n_mis = 0;
        }
        c->n_mis += T->e[i].tag != c->tagv;
    }
    T->recount = false;
}

/* Orders tenant ti's pending jobs by key at now, as queue_serve.c would,
 * and sorts them into classes. Returns 0 or ALLOT_ENOMEM (T stays dirty). */
static int ten_build(struct allot_queue *q, struct queue_fast *f, int ti, int64_t now)
{
    struct fast_ten *T = &f->t[ti];
    size_t n = 0, m = 0, tabn = 16;

    for (size_t i = 0; i < T->n_mem; i++) {
        const struct allot_job *j = allot_queue_job(q, T->mem[i]);
        if (j && j->state == ALLOT_JOB_PENDING && j->spec.tenant == ti)
            T->mem[n++] = j->id;
    }
    T->n_mem = n;
    while (tabn < 2 * n + 2)
        tabn *= 2;
    if (allot_grow((void **)&f->sk, &f->sk_cap, n + 1, sizeof(*f->sk)) ||
        allot_grow((void **)&T->e, &T->e_cap, n + 1, sizeof(*T->e)) ||
        allot_grow((void **)&T->cls, &T->cls_cap, n + 1, sizeof(*T->cls)) ||
        allot_grow((void **)&f->tab, &f->tab_cap, tabn, sizeof(*f->tab)))
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        q->order->key(q, &q->jobs[T->mem[i]], now, f->sk[i].key);
        f->sk[i].seq = q->jobs[T->mem[i]].spec.seq;
        f->sk[i].id = T->mem[i];
    }
    qsort(f->sk, n, sizeof(*f->sk), queue_sortkey_cmp);
    for (size_t i = 0; i < tabn; i++)
        f->tab[i] = -1;
    T->n_cls = 0;
    T->n_aged = T->special_end = 0;
    T->age_at = INT64_MAX;
    memset(&T->rmax, 0, sizeof(T->rmax));
    for (size_t i = 0; i < n; i++) {
        const struct allot_job *j = &q->jobs[f->sk[i].id];
        struct fast_ent *e = &T->e[m];
        if (m > 0 && T->e[m - 1].id == j->id)
            continue; /* listed twice (requeued twice between builds) */
        e->id = j->id;
        e->cls = cls_of(q, T, f->tab, tabn - 1, j);
        e->tag = why_tag(&j->why);
        e->aged = f->sk[i].key[0] < 0.5;
        e->special = is_special(q, j, now);
        T->cls[e->cls].n++;
        T->cls[e->cls].n_mis += e->tag != T->cls[e->cls].tagv;
        if (e->aged)
            T->n_aged = m + 1;
        if (e->special)
            T->special_end = m + 1;
        if (q->o.aging_s > 0 && now - j->submit < q->o.aging_s) {
            int64_t at =
                j->submit > INT64_MAX - q->o.aging_s ? INT64_MAX : j->submit + q->o.aging_s;
            if (at < T->age_at)
                T->age_at = at;
        }
        T->mem[m++] = j->id;
    }
    T->n_e = T->n_mem = m;
    for (size_t c = 0; c < T->n_cls; c++)
        for (int k = 0; k < ALLOT_RES_MAX; k++)
            if (q->jobs[T->cls[c].rep].req.v[k] > T->rmax.v[k])
                T->rmax.v[k] = q->jobs[T->cls[c].rep].req.v[k];
    T->rmax_serial = 0;
    T->recount = false;
    T->dirty = false;
    return 0;
}

/* Lists every pending job with its tenant again (after a list could not
 * grow). Returns 0 or ALLOT_ENOMEM (still lost). */
static int relist(struct allot_queue *q, struct queue_fast *f)
{
    for (size_t i = 0; i < f->nt; i++) {
        f->t[i].n_mem = 0;
        f->t[i].dirty = true;
    }
    for (size_t i = 0; i < q->n_pending; i++) {
        const struct allot_job *j = &q->jobs[q->pending[i]];
        struct fast_ten *T;
        if (fast_tenants(f, (size_t)j->spec.tenant + 1))
            return ALLOT_ENOMEM;
        T = &f->t[j->spec.tenant];
        if (allot_grow((void **)&T->mem, &T->mem_cap, T->n_mem + 1, sizeof(*T->mem)))
            return ALLOT_ENOMEM;
        T->mem[T->n_mem++] = j->id;
        T->dirty = true;
    }
    f->lost = false;
    return 0;
}

/* ---- verdicts ---- */

/* What considering a job of class c of tenant ti now would tell it without
 * a victim search, packed (why_pack), or 0 when that is not known to be a
 * refusal (it might start). */
static uint32_t cls_verdict(struct allot_queue *q, struct fast_ten *T, int ti, struct fast_cls *c)
{
    if (c->serial == q->serial && (!c->adm || c->fail_free == q->free_epoch + 1))
        return c->vtag; /* known this state */
    if (c->serial != q->serial) {
        int who = 0, res = 0;
        c->adm = true;
        c->serial = q->serial;
        /* queue_consider's order: the fair-share cap comes before quota */
        if (queue_fair_capped(q, &q->jobs[c->rep])) {
            c->adm = false;
            return c->vtag = why_pack(ALLOT_WHY_FAIR_CAP, ti, 0);
        }
        if (q->o.quotas) {
            /* admission is monotone in the request: one test often answers all */
            if (T->rmax_serial != q->serial) {
                T->rmax_adm = allot_tenants_admits(q->t, ti, &T->rmax, q->o.borrowing, NULL, NULL);
                T->rmax_serial = q->serial;
            }
            c->adm = T->rmax_adm || allot_tenants_admits(q->t, ti, &q->jobs[c->rep].req,
                                                         q->o.borrowing, &who, &res);
        }
        c->who = who;
        c->res = res;
        if (!c->adm)
            return c->vtag = why_pack(ALLOT_WHY_QUOTA, who, res);
    }
    if (c->fail_free != q->free_epoch + 1) {
        if (!fail_known(q, &c->task, c->n_tasks, c->fhash))
            return 0;
        c->fail_free = q->free_epoch + 1;
    }
    return c->vtag = why_pack(ALLOT_WHY_CAPACITY, 0, 0);
}

/* True when a job of class c with verdict v would run no victim search
 * now (try_preempt's budget test, in its order; none past the fair-share
 * cap). */
static bool cls_quiet(struct allot_queue *q, int ti, struct fast_cls *c, uint32_t v)
{
    if ((v & 15) == ALLOT_WHY_FAIR_CAP || !q->o.preemption ||
        (q->reclaims_left <= 0 && q->searches_left <= 0))
        return true;
    if (q->reclaims_left > 0 && q->searches_left > 0)
        return false;
    if (c->nom_serial != q->serial) {
        c->in_nom = q->o.quotas && allot_tenants_in_nominal(q->t, ti, &q->jobs[c->rep].req);
        c->nom_serial = q->serial;
    }
    return (c->in_nom ? q->reclaims_left : q->searches_left) <= 0;
}

/* True when entry e, which reservation r does not hold back, can be
 * skipped: considering it would only set its reason to its class's
 * verdict (set here). */
static bool ent_skip(struct allot_queue *q, struct fast_ten *T, int ti, struct fast_ent *e,
                     const struct reservation *r, int64_t now)
{
    struct fast_cls *c;
    uint32_t v;

    if (e->special || (q->o.preemption && q->reclaims_left > 0 && q->searches_left > 0))
        return false;
    c = &T->cls[e->cls];
    v = cls_verdict(q, T, ti, c);
    if (!v || !cls_quiet(q, ti, c, v))
        return false;
    if (queue_gang_reserves(q, &q->jobs[e->id], (int)(v & 15), (int)(v >> 11), r, now)) {
        /* it would make the reservation (aged gangs are special, never
         * skipped); never for lack of room: a capacity verdict is
         * known only when a gang of the same shape failed to place in
         * this cycle (each cycle begins a free epoch), and that gang, as
         * large, made the reservation right after */
        (void)ALLOT_NEVER((v & 15) == ALLOT_WHY_CAPACITY);
        return false;
    }
    if (e->tag != v) {
        queue_set_why(&q->jobs[e->id], (int)(v & 15), (int)(v >> 11), (int)(v >> 4 & 127), -1, 0,
                      0);
        ent_tag(T, e, v);
    }
    return true;
}

/* The refusal considering entry e would meet before any victim search, in
 * *w, or NULL when not known (or e is special). */
static const struct allot_why *ent_known(struct allot_queue *q, struct fast_ten *T, int ti,
                                         const struct fast_ent *e, struct allot_why *w)
{
    uint32_t v;

    if (e->special)
        return NULL;
    v = cls_verdict(q, T, ti, &T->cls[e->cls]);
    if (!v)
        return NULL;
    *w = (struct allot_why){
        .kind = (int)(v & 15), .who = (int)(v >> 11), .res = (int)(v >> 4 & 127)};
    return w;
}

/* The end of the run of entries from T->pos that may all be skipped
 * without looking at them (T->pos when none): no reservation, no special
 * entry left, every class refused with no search to run, and every
 * entry's reason already its class's verdict. Stops at the end of the
 * aged entries (the tenant's turn key changes there). */
static size_t ten_skip_end(struct allot_queue *q, struct fast_ten *T, int ti,
                           const struct reservation *r, int64_t now)
{
    size_t end = T->pos < T->n_aged ? T->n_aged : T->n_e;

    if (r->holder >= 0 || T->pos < T->special_end ||
        (q->o.preemption && q->reclaims_left > 0 && q->searches_left > 0))
        return T->pos;
    for (size_t i = 0; i < T->n_cls; i++) {
        struct fast_cls *c = &T->cls[i];
        uint32_t v = cls_verdict(q, T, ti, c);
        if (!v || !cls_quiet(q, ti, c, v) ||
            queue_gang_reserves(q, &q->jobs[c->rep], (int)(v & 15), (int)(v >> 11), r, now))
            return T->pos;
        if (c->n_mis > 0 || c->tagv != v) {
            T->recount = true; /* entries get v one by one; count them again after */
            return T->pos;
        }
    }
    return end;
}

/* ---- tenants' turns ---- */

static double ten_key(const struct fast_ten *T)
{
    return T->key_aged ? -1.0 : T->fair;
}

static bool ten_before(const struct queue_fast *f, int a, int b)
{
    double ka = ten_key(&f->t[a]), kb = ten_key(&f->t[b]);

    return ka < kb || (ka == kb && a < b);
}

static void heap_set(struct queue_fast *f, size_t i, int ti)
{
    f->heap[i] = ti;
    f->t[ti].hpos = (int)i;
}

static void heap_up(struct queue_fast *f, size_t i)
{
    int x = f->heap[i];

    while (i > 0 && ten_before(f, x, f->heap[(i - 1) / 2])) {
        heap_set(f, i, f->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(f, i, x);
}

static void heap_down(struct queue_fast *f, size_t i)
{
    int x = f->heap[i];

    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= f->n_heap)
            break;
        if (l + 1 < f->n_heap && ten_before(f, f->heap[l + 1], f->heap[l]))
            m = l + 1;
        if (!ten_before(f, f->heap[m], x))
            break;
        heap_set(f, i, f->heap[m]);
        i = m;
    }
    heap_set(f, i, x);
}

/* Tenant ti's key changed: restores the heap order. */
static void heap_fix(struct queue_fast *f, int ti)
{
    heap_up(f, (size_t)f->t[ti].hpos);
    heap_down(f, (size_t)f->t[ti].hpos);
}

static void heap_remove(struct queue_fast *f, int ti)
{
    size_t i = (size_t)f->t[ti].hpos;

    f->t[ti].hpos = -1;
    if (i + 1 < f->n_heap) {
        heap_set(f, i, f->heap[--f->n_heap]);
        heap_fix(f, f->heap[i]);
    } else {
        f->n_heap--;
    }
}

/* Recomputes the fair key of every tenant in the heap under the top-level
 * organisation of each tenant whose usage changed. */
static void turns_refresh(struct allot_queue *q, struct queue_fast *f)
{
    f->mark++;
    for (size_t i = 0; i < (f->touched_all ? f->nt : f->n_touched); i++) {
        int top = f->touched_all ? (int)i : f->touched[i], x;
        while (top > 0 && allot_tenants_get(q->t, top)->parent > 0)
            top = allot_tenants_get(q->t, top)->parent;
        if (top <= 0 || (size_t)top >= f->nt || f->t[top].mark == f->mark)
            continue;
        f->t[top].mark = f->mark;
        /* the subtree of top, depth first */
        for (x = top;;) {
            const struct allot_tenant *a = allot_tenants_get(q->t, x);
            if ((size_t)x < f->nt && f->t[x].hpos >= 0) {
                f->t[x].fair = allot_tenants_fair_key(q->t, x, &q->capacity);
                heap_fix(f, x);
            }
            if (a->first_child >= 0) {
                x = a->first_child;
                continue;
            }
            while (x != top && allot_tenants_get(q->t, x)->next_sibling < 0)
                x = allot_tenants_get(q->t, x)->parent;
            if (x == top)
                break;
            x = allot_tenants_get(q->t, x)->next_sibling;
        }
    }
    f->n_touched = 0;
    f->touched_all = false;
}

/* Tenant ti's turn: considers or skips its jobs in order until it has none
 * left, a job started or left the cluster (the turns may change), or its
 * head stopped being aged (its key changes). Returns 0 or ALLOT_ENOMEM. */
static int ten_run(struct allot_queue *q, struct queue_fast *f, int ti, int64_t now,
                   struct reservation *r)
{
    struct fast_ten *T = &f->t[ti];
    bool look = true; /* whether the rest may be skippable as a whole */
    struct allot_why known;

    while (T->pos < T->n_e) {
        struct fast_ent *e = &T->e[T->pos];
        struct allot_job *j;
        uint64_t epoch = q->run_epoch;
        int rc, bf;
        if (e->aged != T->key_aged || queue_cut(q))
            return 0;
        if (look) {
            size_t end = ten_skip_end(q, T, ti, r, now);
            look = false;
            if (end > T->pos) {
                T->pos = end;
                continue;
            }
        }
        T->pos++;
        if (T->pos + FAST_AHEAD < T->n_e) {
            /* the records of jobs a few entries on, which a look reads
             * (state, spec, GPUs) and may write (reason): under a
             * reservation nearly all of a look was waiting for memory */
            const struct allot_job *a = &q->jobs[T->e[T->pos + FAST_AHEAD].id];
            __builtin_prefetch(a);
            __builtin_prefetch(&a->spec.est_runtime_s);
            __builtin_prefetch(&a->state);
            __builtin_prefetch(&a->req);
            __builtin_prefetch(&a->why, 1);
        }
        /* looking at entries is work too (opts.cycle_work), one unit per
         * FAST_VISITS: a reservation makes every entry meet its test, and
         * a cycle must stay short through 100,000 of them */
        if (++f->visits % FAST_VISITS == 0)
            q->work_left--;
        j = &q->jobs[e->id];
        if (j->state != ALLOT_JOB_PENDING)
            continue;
        q->visit = e->special ? NULL : &T->cls[e->cls];
        if (queue_held(q, j, now, r, &bf)) { /* changes nothing but j's reason */
            q->visit = NULL;
            ent_tag(T, e, 0);
            continue;
        }
        if (ent_skip(q, T, ti, e, r, now)) {
            q->visit = NULL;
            continue;
        }
        rc = queue_consider_past(q, j, now, r, bf, ent_known(q, T, ti, e, &known));
        q->visit = NULL;
        if (rc)
            return rc;
        if (j->state == ALLOT_JOB_PENDING) {
            ent_tag(T, e, why_tag(&j->why));
            e->special = is_special(q, j, now);
        }
        if (q->run_epoch != epoch)
            return 0;
        look = true;
    }
    if (T->recount)
        ten_recount(T);
    return 0;
}

/* The turns of a serving: every tenant with pending jobs, its order rebuilt
 * when stale. A rebuild is work (opts.cycle_work, one unit per 512 jobs
 * begun): a cut may stop here, and a resume goes on from f->init_pos, so
 * that no cycle sorts every tenant's jobs at once after a wave of starts
 * or stops touched them all. Returns 0 or ALLOT_ENOMEM. */
static int serve_init(struct allot_queue *q, struct queue_fast *f, int64_t now)
{
    for (; f->init_pos < f->nt; f->init_pos++) {
        struct fast_ten *T = &f->t[f->init_pos];
        int ti = (int)f->init_pos;
        if (queue_cut(q))
            return 0;
        T->pos = 0;
        T->hpos = -1;
        if (T->dirty || (T->n_e > 0 && now >= T->age_at)) {
            int rc = ten_build(q, f, ti, now);
            if (rc)
                return rc;
            q->work_left -= 1 + (int)(T->n_e / 512);
        }
        if (T->n_e > 0) {
            T->fair = allot_tenants_fair_key(q->t, ti, &q->capacity);
            T->key_aged = T->e[0].aged;
            heap_set(f, f->n_heap++, ti);
        }
    }
    for (size_t i = f->n_heap / 2; i-- > 0;)
        heap_down(f, i);
    f->n_touched = 0;
    f->touched_all = false;
    f->serve_epoch = q->run_epoch;
    f->initing = false;
    return 0;
}

int queue_fast_serve(struct allot_queue *q, int64_t now, struct reservation *r, bool resume)
{
    struct queue_fast *f = q->fq;
    uint64_t epoch;
    int rc;

    if (!resume) {
        if (fast_tenants(f, (size_t)allot_tenants_count(q->t)) || (f->lost && relist(q, f)) ||
            allot_grow((void **)&f->heap, &f->heap_cap, f->nt + 1, sizeof(*f->heap)))
            return ALLOT_ENOMEM;
        f->n_heap = 0;
        f->init_pos = 0;
        f->initing = true;
    }
    if (f->initing && ((rc = serve_init(q, f, now)) != 0 || f->initing))
        return rc;
    /* the turns, positions and epoch as serve_init or the cut left them */
    f->serving = true;
    epoch = f->serve_epoch;
    rc = 0;
    while (f->n_heap > 0 && rc == 0 && !queue_cut(q)) {
        int ti;
        struct fast_ten *T;
        if (epoch != q->run_epoch) {
            turns_refresh(q, f);
            epoch = q->run_epoch;
        }
        ti = f->heap[0];
        T = &f->t[ti];
        rc = ten_run(q, f, ti, now, r);
        if (T->pos >= T->n_e) {
            if (T->recount)
                ten_recount(T);
            heap_remove(f, ti);
        } else if (T->e[T->pos].aged != T->key_aged) {
            T->key_aged = T->e[T->pos].aged;
            heap_fix(f, ti);
        }
    }
    f->serve_epoch = epoch;
    f->serving = false;
    return rc;
}

/* ---- timers and searched jobs (the cycle's first and last steps) ---- */

/* When j's grace period or runtime limit ends, INT64_MAX when never. */
static int64_t timer_at(const struct allot_job *j, bool *grace)
{
    *grace = j->state == ALLOT_JOB_STOPPING;
    if (*grace)
        return j->stop_at;
    return j->state == ALLOT_JOB_RUNNING ? queue_limit_at(j) : INT64_MAX;
}

static bool tm_before(const struct fast_timer *a, const struct fast_timer *b)
{
    return a->at < b->at;
}

static void tm_up(struct queue_fast *f, size_t i)
{
    struct fast_timer x = f->tm[i];

    while (i > 0 && tm_before(&x, &f->tm[(i - 1) / 2])) {
        f->tm[i] = f->tm[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    f->tm[i] = x;
}

static void tm_pop(struct queue_fast *f)
{
    struct fast_timer x = f->tm[--f->n_tm];
    size_t i = 0;

    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= f->n_tm)
            break;
        if (l + 1 < f->n_tm && tm_before(&f->tm[l + 1], &f->tm[l]))
            m = l + 1;
        if (!tm_before(&f->tm[m], &x))
            break;
        f->tm[i] = f->tm[m];
        i = m;
    }
    if (f->n_tm > 0)
        f->tm[i] = x;
}

/* Whether timer t still stands for its job. */
static bool tm_valid(const struct allot_queue *q, const struct fast_timer *t)
{
    const struct allot_job *j = allot_queue_job(q, t->id);
    bool grace;

    return j && j->runs == t->runs && timer_at(j, &grace) == t->at && grace == t->grace;
}

void queue_fast_timer(struct allot_queue *q, const struct allot_job *j)
{
    struct queue_fast *f = q->fq;
    bool grace;
    int64_t at = timer_at(j, &grace);

    if (!q->fast || at == INT64_MAX || f->tm_lost)
        return;
    if (allot_grow((void **)&f->tm, &f->tm_cap, f->n_tm + 1, sizeof(*f->tm))) {
        f->tm_lost = true;
        return;
    }
    f->tm[f->n_tm] = (struct fast_timer){.at = at, .runs = j->runs, .id = j->id, .grace = grace};
    tm_up(f, f->n_tm++);
}

/* The runtime limit's clock, from the caller (opts.limit_from_running). */
int allot_queue_running(struct allot_queue *q, int id, int64_t at)
{
    struct allot_job *j;

    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    j = &q->jobs[id];
    if (j->state != ALLOT_JOB_RUNNING)
        return ALLOT_ESTATE;
    if (at < j->start)
        at = j->start;
    if (j->run_from != INT64_MAX && at <= j->run_from)
        return 0;
    j->run_from = at;
    queue_fast_timer(q, j);
    if (queue_limit_at(j) < q->wakeup)
        q->wakeup = queue_limit_at(j);
    return 0;
}

int allot_queue_stopped(struct allot_queue *q, int id, int64_t now)
{
    struct allot_job *j;

    if (id < 0 || (size_t)id >= q->n_jobs || !q->jobs[id].name)
        return ALLOT_ENOENT;
    j = &q->jobs[id];
    if (j->state != ALLOT_JOB_STOPPING)
        return ALLOT_ESTATE;
    if (j->stop_at <= now)
        return 0;
    int pf = j->preempted_for;
    if (!j->gone && pf >= 0)
        q->jobs[pf].gone_victims++;
    j->gone = true;
    /* the victims of one preemption leave together: room freed by one
     * while another still runs would go to other work, and the job they
     * make room for would find it taken when the last is gone */
    if (queue_gone_held(q, j, now)) {
        q->gone_held++;
        return 0;
    }
    /* the last of its preemption to go: the others held for it (gone too)
     * are let go by the next cycle's queue_gone_check, before its stops */
    if (pf >= 0 && q->jobs[pf].gone_victims > 1)
        q->gone_held++;
    j->stop_at = now;
    q->pause.valid = false; /* a cycle cut short starts over: its stops come first */
    queue_fast_timer(q, j);
    if (now < q->wakeup)
        q->wakeup = now;
    return 0;
}

/* Makes the timers whole again from the running jobs. Returns 0 or
 * ALLOT_ENOMEM (still lost). */
static int tm_rebuild(struct allot_queue *q, struct queue_fast *f)
{
    f->n_tm = 0;
    f->tm_lost = false;
    for (size_t i = 0; i < q->n_running && !f->tm_lost; i++)
        if (q->running[i] >= 0)
            queue_fast_timer(q, &q->jobs[q->running[i]]);
    return f->tm_lost ? ALLOT_ENOMEM : 0;
}

/* A job due, and its slot in the running list. */
struct due_at {
    size_t slot;
    int id;
};

static int cmp_due(const void *a, const void *b)
{
    const struct due_at *x = a, *y = b;

    return (x->slot > y->slot) - (x->slot < y->slot);
}

int queue_fast_due(struct allot_queue *q, int64_t now, const int **out, size_t *n_out)
{
    struct queue_fast *f = q->fq;
    size_t n = 0;

    if (!q->fast || (f->tm_lost && tm_rebuild(q, f)))
        return ALLOT_ENOMEM;
    while (f->n_tm > 0 && f->tm[0].at <= now) {
        struct fast_timer t = f->tm[0];
        tm_pop(f);
        if (!tm_valid(q, &t))
            continue;
        if (allot_grow((void **)&f->due, &f->due_cap, n + 1, sizeof(*f->due))) {
            f->tm_lost = true; /* the ones popped are rebuilt from the running jobs */
            return ALLOT_ENOMEM;
        }
        f->due[n++] = t.id;
    }
    if (n > 1) {
        /* in the running list's order, once each (as a scan would) */
        /* in the running list's order (slots keep start order), once each */
        size_t m = 0;
        struct due_at *d = allot_malloc(n * sizeof(*d));
        if (!d) {
            f->tm_lost = true;
            return ALLOT_ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
            d[i] = (struct due_at){.slot = q->run_at[f->due[i]], .id = f->due[i]};
        qsort(d, n, sizeof(*d), cmp_due);
        for (size_t i = 0; i < n; i++)
            if (i == 0 || d[i].id != d[i - 1].id)
                f->due[m++] = d[i].id;
        allot_free(d);
        n = m;
    }
    *out = f->due;
    *n_out = n;
    return 0;
}

/* Makes room for marks of job ids below n (new ones 0). */
static int grow_marks(struct queue_fast *f, size_t n)
{
    size_t old = f->sr_mark_cap;

    if (allot_grow((void **)&f->sr_mark, &f->sr_mark_cap, n, sizeof(*f->sr_mark)))
        return ALLOT_ENOMEM;
    memset(f->sr_mark + old, 0, (f->sr_mark_cap - old) * sizeof(*f->sr_mark));
    return 0;
}

void queue_fast_searched(struct allot_queue *q, const struct allot_job *j)
{
    struct queue_fast *f = q->fq;

    if (!q->fast)
        return;
    if (f->sr_epoch != q->leave_epoch + 1) {
        f->sr_epoch = q->leave_epoch + 1;
        f->n_sr = 0;
        f->sr_lost = false;
    }
    if (f->sr_lost || ((size_t)j->id < f->sr_mark_cap && f->sr_mark[j->id] == f->sr_epoch))
        return; /* listed already */
    if (grow_marks(f, (size_t)j->id + 1) ||
        allot_grow((void **)&f->sr, &f->sr_cap, f->n_sr + 1, sizeof(*f->sr))) {
        f->sr_lost = true;
        return;
    }
    f->sr_mark[j->id] = f->sr_epoch;
    f->sr[f->n_sr++] = j->id;
}

int64_t queue_fast_wakeup(struct allot_queue *q, int64_t now)
{
    struct queue_fast *f = q->fq;
    int64_t wake = INT64_MAX;

    if (!q->fast || f->tm_lost || (f->sr_epoch == q->leave_epoch + 1 && f->sr_lost))
        return INT64_MIN;
    if (f->sr_epoch == q->leave_epoch + 1 && f->n_sr > 0) {
        size_t m = 0;
        for (size_t i = 0; i < f->n_sr; i++) {
            const struct allot_job *j = allot_queue_job(q, f->sr[i]);
            int64_t at;
            if (!j || j->state != ALLOT_JOB_PENDING || j->preempt_epoch != q->leave_epoch + 1) {
                f->sr_mark[f->sr[i]] = 0; /* may be listed again */
                continue;                 /* not waiting on its search any more */
            }
            f->sr[m++] = f->sr[i];
            /* as cycle_wakeup's scan */
            at = q->o.hold_half_life_s > 0 && q->o.quotas ? j->preempt_recheck_at
                                                          : queue_search_memo_until(q, j);
            if (at > now && at < wake)
                wake = at;
        }
        f->n_sr = m;
    }
    while (f->n_tm > 0 && !tm_valid(q, &f->tm[0]))
        tm_pop(f);
    if (f->n_tm > 0 && f->tm[0].at < wake)
        wake = f->tm[0].at;
    return wake;
}

/* ---- lifecycle ---- */

/* Creates the structures for q (q->fast set, q->order chosen). Returns 0 or
 * ALLOT_ENOMEM. */
int queue_fast_new(struct allot_queue *q)
{
    q->fq = allot_calloc(1, sizeof(*q->fq));
    if (!q->fq)
        return ALLOT_ENOMEM;
    q->fq->ordered = strcmp(q->order->name, "fair") == 0;
    return 0;
}

void queue_fast_free(struct queue_fast *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nt; i++) {
        allot_free(f->t[i].mem);
        allot_free(f->t[i].e);
        allot_free(f->t[i].cls);
    }
    allot_free(f->t);
    allot_free(f->heap);
    allot_free(f->touched);
    allot_free(f->fail);
    allot_free(f->sk);
    allot_free(f->tab);
    allot_free(f->tm);
    allot_free(f->due);
    allot_free(f->sr);
    allot_free(f->sr_mark);
    allot_free(f->rc);
    allot_free(f->rc_out);
    allot_free(f);
}

bool queue_fast_ordered(const struct allot_queue *q)
{
    return q->fast && q->fq->ordered;
}

/* ---- when running jobs may become victims ---- */

static void rc_up(struct fast_rc *h, size_t i)
{
    struct fast_rc x = h[i];

    while (i > 0 && x.at < h[(i - 1) / 2].at) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static void rc_down(struct fast_rc *h, size_t n, size_t i)
{
    struct fast_rc x = h[i];

    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= n)
            break;
        if (l + 1 < n && h[l + 1].at < h[l].at)
            m = l + 1;
        if (h[m].at >= x.at)
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = x;
}

static struct fast_rc rc_pop(struct queue_fast *f)
{
    struct fast_rc top = f->rc[0];

    f->rc[0] = f->rc[--f->n_rc];
    if (f->n_rc > 0)
        rc_down(f->rc, f->n_rc, 0);
    return top;
}

/* Drops every instant at or before now at once (a heap rebuilt in O(n)):
 * when many jobs started together, their minimum runtimes end together. */
static void rc_drop_past(struct queue_fast *f, int64_t now)
{
    size_t w = 0;

    for (size_t i = 0; i < f->n_rc; i++)
        if (f->rc[i].at > now)
            f->rc[w++] = f->rc[i];
    f->n_rc = w;
    for (size_t i = w / 2; i-- > 0;)
        rc_down(f->rc, w, i);
}

/* Keeps running job v's instants after `after`. Returns 0 or ALLOT_ENOMEM. */
static int rc_add(struct allot_queue *q, const struct allot_job *v, int64_t after)
{
    struct queue_fast *f = q->fq;
    int64_t at[2];
    int n = queue_recheck_instants(q, v, at);

    for (int k = 0; k < n; k++) {
        if (at[k] <= after)
            continue;
        if (allot_grow((void **)&f->rc, &f->rc_cap, f->n_rc + 1, sizeof(*f->rc)))
            return ALLOT_ENOMEM;
        f->rc[f->n_rc] = (struct fast_rc){.at = at[k], .runs = v->runs, .id = v->id};
        rc_up(f->rc, f->n_rc++);
    }
    return 0;
}

void queue_fast_recheck_add(struct allot_queue *q, const struct allot_job *v)
{
    if (q->fast && !q->fq->rc_lost && rc_add(q, v, q->fq->rc_now) != 0)
        q->fq->rc_lost = true;
}

/* True when entry e is still an instant of its job's run, ahead of now. */
static bool rc_valid(const struct allot_queue *q, const struct fast_rc *e, int64_t now)
{
    const struct allot_job *v = &q->jobs[e->id];
    int64_t at[2];
    int n;

    if (e->at <= now || v->state != ALLOT_JOB_RUNNING || v->runs != e->runs)
        return false;
    n = queue_recheck_instants(q, v, at);
    return (n > 0 && at[0] == e->at) || (n > 1 && at[1] == e->at);
}

int64_t queue_fast_recheck_min(struct allot_queue *q, int64_t now,
                               bool (*victim)(void *ud, const struct allot_job *v), void *ud)
{
    struct queue_fast *f = q->fq;
    int64_t best = INT64_MAX;
    size_t n_out = 0, n_past = 0;

    if (!q->fast)
        return INT64_MIN;
    if (f->rc_lost || now < f->rc_now) { /* from the running jobs again */
        f->n_rc = 0;
        f->rc_lost = false;
        for (size_t i = 0; i < q->n_running && !f->rc_lost; i++)
            if (q->running[i] >= 0 && rc_add(q, &q->jobs[q->running[i]], now) != 0)
                f->rc_lost = true;
        if (f->rc_lost)
            return INT64_MIN;
    }
    f->rc_now = now;
    while (f->n_rc > 0) {
        struct fast_rc top;
        if (f->rc[0].at <= now && ++n_past > 64) {
            rc_drop_past(f, now);
            continue;
        }
        if (!rc_valid(q, &f->rc[0], now)) {
            (void)rc_pop(f); /* past, or not this run's: never again */
            continue;
        }
        if (!victim(ud, &q->jobs[f->rc[0].id])) {
            best = f->rc[0].at;
            break;
        }
        /* a victim now: not a later one; set aside, then back */
        if (allot_grow((void **)&f->rc_out, &f->rc_out_cap, n_out + 1, sizeof(*f->rc_out))) {
            best = INT64_MIN;
            break;
        }
        top = rc_pop(f);
        f->rc_out[n_out++] = top;
    }
    for (size_t i = 0; i < n_out; i++) { /* cannot fail: the heap held them */
        f->rc[f->n_rc] = f->rc_out[i];
        rc_up(f->rc, f->n_rc++);
    }
    return best;
}
