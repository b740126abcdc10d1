/*
 * Implementation of replay.h: running one policy over a setup (the setups
 * are built in replay_setup.c, reported in replay_cli.c).
 *
 * The run's state machine, per job: FUTURE (not yet arrived) -> PENDING
 * (submitted; also after a preemption) -> RUNNING -> [STOPPING (signalled,
 * inside the grace period) -> PENDING] ... -> DONE (finished). The queue is
 * the authority; this file mirrors it from the decisions it reports and,
 * with --check, verifies the mirror against it after every event time.
 *
 * Work accounting: a job has `duration` seconds of work. A run that starts
 * with `progress` seconds already saved ends at start + duration - progress.
 * When a run is stopped after r seconds, it keeps floor(r / C) x C of them
 * (C = checkpoint interval; none when C = 0) and the rest is lost work.
 *
 * Event order at one time t: departures (allot_queue_finish), then arrivals
 * (allot_queue_submit), then one allot_queue_cycle(t). Times with no arrival or
 * departure are visited when the queue asks (allot_queue_next_wakeup). Between
 * event times the state is constant, so the integrals (GPU-time) and the
 * 10-minute samples (queue length, Jain's index) are taken there.
 * Single-threaded; the decision log is the only output.
 */
#include "replay.h"

#include "allot/common.h"
#include "allot/queue.h"
#include "allot/sched.h"
#include "allot/tenant.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const replay_policy_names[REPLAY_POLICIES] = {
    [REPLAY_STATIC] = "static",         [REPLAY_FIFO] = "fifo",   [REPLAY_LAS] = "las",
    [REPLAY_SJF_ORACLE] = "sjf-oracle", [REPLAY_ALLOT] = "allot",
};

int replay_policy_find(const char *name)
{
    for (int i = 0; i < REPLAY_POLICIES; i++)
        if (strcmp(name, replay_policy_names[i]) == 0)
            return i;
    return -1;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- one run ------------------------------------------------------------------ */

enum js { JS_FUTURE = 0, JS_PENDING, JS_RUNNING, JS_STOPPING, JS_DONE, JS_KILLED };

/* What the run knows of one job. */
struct jstate {
    int qid;           /* queue id, -1 before submission */
    int state;         /* enum js */
    uint32_t gen;      /* bumped at each start; tells stale departures apart */
    bool in_quota;     /* fit its tenant's unused nominal at submit */
    int64_t progress;  /* seconds of work saved */
    int64_t run_start; /* of the current run */
    int64_t pending_since;
    int64_t queued;      /* seconds pending so far */
    int64_t first_start; /* -1 until started */
    int64_t end;         /* finish time, -1 until done */
    int64_t preemptions;
    int64_t lost_gpu_s;
};

struct departure {
    int64_t t;
    int job;
    uint32_t gen;
};

struct decision {
    int kind;
    int qid;
    int state_at; /* the job's state when the decision was reported */
    char why[ALLOT_REASON_MAX];
};

struct run {
    const struct replay_setup *s;
    const struct replay_opts *o;
    int policy;
    struct allot_cluster *c;
    struct allot_tenants *t;      /* the queue's */
    struct allot_tenants *shadow; /* each tenant's demand: running and waiting jobs */
    struct allot_queue *q;
    int *leaf;         /* replay tenant -> tenant tree index */
    struct jstate *js; /* per setup job */
    int *job_of_qid;   /* queue id -> setup job */
    size_t qid_cap;
    struct departure *heap;
    size_t n_heap, heap_cap;
    struct decision *dec;
    size_t n_dec, dec_cap;
    bool dec_oom;
    int64_t now;
    int64_t gpus;            /* cluster GPUs */
    int64_t used;            /* GPUs held by running and stopping jobs */
    int64_t *t_used;         /* per tenant */
    int64_t *t_pending_gpus; /* per tenant */
    size_t n_pending;        /* jobs pending */
    int64_t hold_s;          /* the queue's lending-hold half-life, 0: none */
    double gpu_s;            /* allocated GPU-seconds inside the window */
    double gpu_s_run;        /* ... over the whole run (the drain included) */
    double *t_gpu_s;         /* per tenant */
    int64_t next_sample;
    double jain_sum, jain_nom_sum;
    size_t n_jain, n_jain_nom;
    double *t_ratio_sum; /* per tenant */
    size_t *t_ratio_n;
    struct waits *t_wait; /* per tenant, over the whole run */
    int *ord;             /* per tenant: scratch for water_fill */
    double *q_sum;        /* per bin: sum of sampled queue lengths */
    size_t *q_n;
    double last_progress;
    char *err;
    size_t errlen;
};

/* What a tenant's waiting GPUs met, in GPU-seconds (replay_stats). */
struct waits {
    double all;  /* waiting GPUs x time */
    double over; /* ... beyond what the tenant's unused nominal holds */
    double idle; /* ... that idle GPUs could have taken */
    double lent; /* ... that other tenants' GPUs beyond their nominal could have */
};

static int fail_at(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail_at(struct run *r, const char *fmt, ...)
{
    va_list ap;
    int n = allot_fmt(r->err, r->errlen, "%s at t=%lld s: ", replay_policy_names[r->policy],
                      (long long)(r->now - r->s->from));

    if (n >= 0 && (size_t)n < r->errlen) {
        va_start(ap, fmt);
        vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return ALLOT_EINTERNAL;
}

static void logf_(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One decision-log line: "<policy> <t> <text>". */
static void logf_(struct run *r, const char *fmt, ...)
{
    va_list ap;

    if (!r->o->log)
        return;
    fprintf(r->o->log, "%s %lld ", replay_policy_names[r->policy],
            (long long)(r->now - r->s->from));
    va_start(ap, fmt);
    vfprintf(r->o->log, fmt, ap);
    va_end(ap);
    fputc('\n', r->o->log);
}

/* ---- departures: a binary min-heap by (time, job) ---- */

static bool dep_less(const struct departure *a, const struct departure *b)
{
    return a->t != b->t ? a->t < b->t : a->job < b->job;
}

static int heap_push(struct run *r, struct departure d)
{
    size_t i;

    if (allot_grow((void **)&r->heap, &r->heap_cap, r->n_heap + 1, sizeof(*r->heap)) < 0)
        return ALLOT_ENOMEM;
    i = r->n_heap++;
    while (i > 0 && dep_less(&d, &r->heap[(i - 1) / 2])) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i] = d;
    return 0;
}

static void heap_pop(struct run *r)
{
    struct departure last = r->heap[--r->n_heap];
    size_t i = 0;

    for (;;) {
        size_t k = 2 * i + 1;

        if (k >= r->n_heap)
            break;
        if (k + 1 < r->n_heap && dep_less(&r->heap[k + 1], &r->heap[k]))
            k++;
        if (!dep_less(&r->heap[k], &last))
            break;
        r->heap[i] = r->heap[k];
        i = k;
    }
    if (r->n_heap)
        r->heap[i] = last;
}

/* Drops departures of runs that were stopped; true when one is left. */
static bool heap_clean(struct run *r)
{
    while (r->n_heap) {
        const struct departure *d = &r->heap[0];
        const struct jstate *j = &r->js[d->job];

        if (d->gen == j->gen && (j->state == JS_RUNNING || j->state == JS_STOPPING))
            return true;
        heap_pop(r);
    }
    return false;
}

/* ---- tenants and the cluster ---- */

static int64_t scaled(int64_t v, double f)
{
    return v == ALLOT_UNLIMITED || f == 1.0 ? v : llround((double)v * f);
}

static int depth_of(const char *path)
{
    int d = 0;

    for (; *path; path++)
        d += *path == '/';
    return d;
}

/* Builds a tenant tree with the setup's quotas; leaf[] maps replay tenants. */
static struct allot_tenants *build_tenants(const struct replay_setup *s, int *leaf, char *err,
                                           size_t errlen)
{
    struct allot_tenants *t = allot_tenants_new(s->cat);

    if (!t)
        goto oom;
    if (s->has_conf) {
        int max_depth = 0;

        for (size_t i = 0; i < s->conf.n; i++)
            max_depth =
                depth_of(s->conf.v[i].path) > max_depth ? depth_of(s->conf.v[i].path) : max_depth;
        /* parents before children, so a listed parent is never auto-created */
        for (int d = 0; d <= max_depth; d++)
            for (size_t i = 0; i < s->conf.n; i++) {
                const struct sim_tenant_conf *c = &s->conf.v[i];
                struct allot_tenant *x;
                int idx;

                if (depth_of(c->path) != d)
                    continue;
                idx = allot_tenants_add(t, c->path, err, errlen);
                if (idx == ALLOT_ENOMEM)
                    goto oom;
                if (idx < 0)
                    goto fail;
                x = allot_tenants_get(t, idx);
                x->weight = c->weight;
                x->isolation = c->isolation;
                for (int res = 0; res < ALLOT_RES_MAX; res++) {
                    struct allot_quota q = c->quota[res];

                    if (!c->has_quota[res])
                        continue;
                    q.nominal = scaled(q.nominal, s->quota_scale);
                    q.borrow_limit = scaled(q.borrow_limit, s->quota_scale);
                    q.lend_limit = scaled(q.lend_limit, s->quota_scale);
                    if (allot_tenants_set_quota(t, idx, res, q) < 0) {
                        allot_fmt(err, errlen, "tenant %s: quota rejected by the core", c->path);
                        goto fail;
                    }
                }
            }
    } else {
        for (int i = 0; i < s->n_tenants; i++) {
            struct allot_quota q = {.nominal = s->tenants[i].nominal_milli,
                                    .borrow_limit = ALLOT_UNLIMITED,
                                    .lend_limit = ALLOT_UNLIMITED};
            int idx = allot_tenants_add(t, s->tenants[i].path, err, errlen);

            if (idx == ALLOT_ENOMEM)
                goto oom;
            if (idx < 0 || allot_tenants_set_quota(t, idx, ALLOT_RES_GPU, q) < 0)
                goto fail;
        }
    }
    allot_tenants_fill_nominal(t);
    for (int i = 0; i < s->n_tenants; i++) {
        leaf[i] = allot_tenants_find(t, s->tenants[i].path);
        if (leaf[i] <= 0) {
            allot_fmt(err, errlen, "tenant %s missing from the tree", s->tenants[i].path);
            goto fail;
        }
    }
    return t;
oom:
    allot_fmt(err, errlen, "out of memory");
fail:
    allot_tenants_free(t);
    return NULL;
}

static struct allot_cluster *build_cluster(const struct replay_setup *s, unsigned flags,
                                           uint64_t seed, char *err, size_t errlen)
{
    struct allot_cluster *c = allot_cluster_new(s->cat, flags);

    if (!c) {
        allot_fmt(err, errlen, "out of memory");
        return NULL;
    }
    /* nodes numbered across the groups (or n_nodes of the one shape) */
    for (int i = 0, g = 0, in_g = 0; i < s->n_nodes; i++, in_g++) {
        const struct replay_node_group *shape = s->n_groups ? &s->groups[g] : &s->shape;
        char name[32];
        struct allot_node_spec ns = {.name = name,
                                     .model = shape->model,
                                     .cpu_milli = shape->cpu_milli,
                                     .mem_mib = shape->mem_mib,
                                     .n_gpus = shape->gpus,
                                     .gpu_mode = ALLOT_GPU_SHARED,
                                     .rack = i / 32};

        if (s->n_groups && in_g == s->groups[g].count - 1) {
            g++;
            in_g = -1;
        }
        allot_fmt(name, sizeof(name), "n%05d", i);
        if (allot_cluster_add_node(c, &ns, err, errlen) < 0) {
            allot_cluster_free(c);
            return NULL;
        }
    }
    allot_cluster_shuffle_ranks(c, seed);
    return c;
}

/* What the whole gang of job j uses. */
static void job_resvec(const struct replay_setup *s, const struct replay_job *j,
                       struct allot_resvec *v)
{
    int64_t g = (int64_t)j->n_tasks * j->gpus;

    memset(v, 0, sizeof(*v));
    v->v[ALLOT_RES_GPU] = g * ALLOT_MILLI;
    v->v[ALLOT_RES_CPU] = g * s->cpu_per_gpu;
    v->v[ALLOT_RES_MEM] = g * s->mem_per_gpu;
    /* with several models a job may land on any: no model is charged */
    if (s->model >= 0)
        v->v[ALLOT_RES_MODEL0 + s->model] = g * ALLOT_MILLI;
}

static int64_t job_gpus(const struct replay_job *j)
{
    return (int64_t)j->n_tasks * j->gpus;
}

/* ---- time passing: integrals and samples ---- */

/* Entitlements by water-filling: capacity `cap` shared in proportion to
 * nominal among tenants with demand, none above its demand. */
static void water_fill(int n, const double *nom, const double *demand, double cap, double *e,
                       int *ord)
{
    double left = cap, wsum = 0;
    int k = 0;

    for (int i = 0; i < n; i++) {
        e[i] = 0;
        if (demand[i] > 0 && nom[i] > 0) {
            ord[k++] = i;
            wsum += nom[i];
        }
    }
    /* by demand over weight, ascending (insertion sort: n is small) */
    for (int a = 1; a < k; a++) {
        int x = ord[a], b = a;

        while (b > 0 && demand[ord[b - 1]] / nom[ord[b - 1]] > demand[x] / nom[x]) {
            ord[b] = ord[b - 1];
            b--;
        }
        ord[b] = x;
    }
    for (int a = 0; a < k; a++) {
        int i = ord[a];
        double share = left * nom[i] / wsum;

        e[i] = demand[i] < share ? demand[i] : share;
        left -= e[i];
        wsum -= nom[i];
    }
}

static double jain(const double *x, int n)
{
    double s = 0, s2 = 0;

    for (int i = 0; i < n; i++) {
        s += x[i];
        s2 += x[i] * x[i];
    }
    return s2 > 0 ? s * s / ((double)n * s2) : 1.0;
}

/* One 10-minute sample at time `at` of the current state. */
static void sample(struct run *r, int64_t at, double *buf)
{
    int n = r->s->n_tenants, k = 0, kn = 0;
    double *nom = buf, *dem = buf + n, *e = buf + 2 * n, *x = buf + 3 * n, *xn = buf + 4 * n;
    int *ord = r->ord;
    size_t bin = (size_t)((at - r->s->from) / REPLAY_BIN_S);

    r->q_sum[bin] += (double)r->n_pending;
    r->q_n[bin]++;
    if (r->n_pending == 0)
        return;
    for (int i = 0; i < n; i++) {
        nom[i] = (double)r->s->tenants[i].nominal_milli / ALLOT_MILLI;
        dem[i] = (double)(r->t_used[i] + r->t_pending_gpus[i]);
    }
    water_fill(n, nom, dem, (double)r->gpus, e, ord);
    for (int i = 0; i < n; i++) {
        double en = dem[i] < nom[i] ? dem[i] : nom[i];

        if (dem[i] <= 0)
            continue;
        if (e[i] > 0) {
            x[k++] = (double)r->t_used[i] / e[i];
            r->t_ratio_sum[i] += (double)r->t_used[i] / e[i];
            r->t_ratio_n[i]++;
        }
        if (en > 0)
            xn[kn++] = (double)r->t_used[i] / en;
    }
    if (k > 0) {
        r->jain_sum += jain(x, k);
        r->n_jain++;
    }
    if (kn > 0) {
        r->jain_nom_sum += jain(xn, kn);
        r->n_jain_nom++;
    }
}

static double clamp0(double x, double hi)
{
    return x < 0 ? 0 : x < hi ? x : hi;
}

static double beyond_nominal(const struct run *r, int i)
{
    return (double)r->t_used[i] - (double)r->s->tenants[i].nominal_milli / ALLOT_MILLI;
}

/* Integrates over [now, now + dt) what each tenant's waiting GPUs met:
 * how many of them its unused nominal cannot hold, the idle GPUs and the
 * GPUs other tenants hold beyond theirs (each capped at the waiting GPUs). */
static void wait_figures(struct run *r, double dt)
{
    const struct replay_setup *s = r->s;
    double lent_all = 0, idle = (double)(r->gpus - r->used);

    for (int i = 0; i < s->n_tenants; i++)
        lent_all += clamp0(beyond_nominal(r, i), INFINITY);
    for (int i = 0; i < s->n_tenants; i++) {
        double p = (double)r->t_pending_gpus[i], beyond = beyond_nominal(r, i);
        struct waits *w = &r->t_wait[i];

        if (p <= 0)
            continue;
        w->all += p * dt;
        w->over += clamp0(beyond + p, p) * dt; /* what its unused nominal cannot hold */
        w->idle += clamp0(idle, p) * dt;
        w->lent += clamp0(lent_all - clamp0(beyond, INFINITY), p) * dt;
    }
}

/* Moves the clock to t: integrates GPU use over [now, t) inside the
 * window and takes the samples that fall in it. */
static void advance(struct run *r, int64_t t, double *buf)
{
    const struct replay_setup *s = r->s;
    int64_t a = r->now > s->from ? r->now : s->from, b = t < s->to ? t : s->to;

    if (t > r->now && r->n_pending > 0)
        wait_figures(r, (double)(t - r->now));
    if (t > r->now)
        r->gpu_s_run += (double)r->used * (double)(t - r->now);
    while (r->next_sample < b) {
        sample(r, r->next_sample, buf);
        r->next_sample += REPLAY_SAMPLE_S;
    }
    if (b > a) {
        double dt = (double)(b - a);

        r->gpu_s += (double)r->used * dt;
        for (int i = 0; i < s->n_tenants; i++)
            r->t_gpu_s[i] += (double)r->t_used[i] * dt;
    }
    r->now = t;
    if (r->o->progress && s->to > s->from) {
        double done = (double)(b - s->from) / (double)(s->to - s->from);

        if (done >= r->last_progress + 0.01 || (done >= 1.0 && r->last_progress < 1.0)) {
            r->last_progress = done;
            r->o->progress(r->o->progress_ud, done);
        }
    }
}

/* Per-bin utilisation integral over [a, b) at `used` GPUs. */
static void bin_util(struct run *r, double *util, int64_t a, int64_t b)
{
    const struct replay_setup *s = r->s;

    a = a > s->from ? a : s->from;
    b = b < s->to ? b : s->to;
    while (a < b) {
        size_t bin = (size_t)((a - s->from) / REPLAY_BIN_S);
        int64_t edge = s->from + (int64_t)(bin + 1) * REPLAY_BIN_S;
        int64_t e = edge < b ? edge : b;

        util[bin] += (double)r->used * (double)(e - a);
        a = e;
    }
}

/* ---- decisions ---- */

static void on_decision(int kind, const struct allot_job *job, const char *why, void *ud)
{
    struct run *r = ud;
    struct decision *d;

    if (allot_grow((void **)&r->dec, &r->dec_cap, r->n_dec + 1, sizeof(*r->dec)) < 0) {
        r->dec_oom = true;
        return;
    }
    d = &r->dec[r->n_dec++];
    d->kind = kind;
    d->qid = job->id;
    d->state_at = job->state;
    allot_strlcpy(d->why, why ? why : "", sizeof(d->why));
}

static void set_used(struct run *r, int i, int sign)
{
    const struct replay_job *j = &r->s->jobs[i];

    r->used += sign * job_gpus(j);
    r->t_used[j->tenant] += sign * job_gpus(j);
}

/* Adds (+1) or removes (-1) job i from its tenant's demand in the shadow. */
static void set_demand(struct run *r, int i, int sign)
{
    struct allot_resvec v;

    job_resvec(r->s, &r->s->jobs[i], &v);
    allot_tenants_charge(r->shadow, r->leaf[r->s->jobs[i].tenant], &v, sign);
}

static void set_pending(struct run *r, int i, int sign)
{
    const struct replay_job *j = &r->s->jobs[i];

    r->n_pending += (size_t)(ptrdiff_t)sign;
    r->t_pending_gpus[j->tenant] += sign * job_gpus(j);
}

static int job_of(struct run *r, int qid)
{
    if (qid < 0 || (size_t)qid >= r->qid_cap || r->job_of_qid[qid] < 0)
        return -1;
    return r->job_of_qid[qid];
}

static int do_start(struct run *r, int i)
{
    const struct replay_job *j = &r->s->jobs[i];
    struct jstate *x = &r->js[i];
    const struct allot_job *qj = allot_queue_job(r->q, x->qid);
    char nodes[256];
    size_t o = 0;

    if (x->state != JS_PENDING)
        return fail_at(r, "job %d started while not pending", i);
    set_pending(r, i, -1);
    x->state = JS_RUNNING;
    x->queued += r->now - x->pending_since;
    set_used(r, i, +1);
    if (x->first_start < 0)
        x->first_start = r->now;
    x->run_start = r->now;
    x->gen++;
    if (r->o->log) {
        nodes[0] = '\0';
        for (int k = 0; qj && qj->pl && k < j->n_tasks && o < sizeof(nodes); k++)
            o += (size_t)allot_fmt(nodes + o, sizeof(nodes) - o, "%s%s", k ? "," : "",
                                   allot_cluster_node(r->c, qj->pl[k].node)->name);
        logf_(r, "START job=%d tenant=%s nodes=%s%s", i, r->s->tenants[j->tenant].path, nodes,
              qj && qj->borrowed ? " borrowed" : "");
    }
    return heap_push(r, (struct departure){r->now + j->duration - x->progress, i, x->gen});
}

/* The job's run ends without finishing: saves what the checkpoints kept. */
static int do_stop(struct run *r, int i, const char *why)
{
    const struct replay_job *j = &r->s->jobs[i];
    struct jstate *x = &r->js[i];
    const struct allot_job *qj = allot_queue_job(r->q, x->qid);
    int64_t ran = r->now - x->run_start, kept = 0;

    if (x->state != JS_RUNNING && x->state != JS_STOPPING)
        return fail_at(r, "job %d stopped while not running", i);
    if (r->o->checkpoint_s > 0)
        kept = ran / r->o->checkpoint_s * r->o->checkpoint_s;
    x->progress += kept;
    x->lost_gpu_s += (ran - kept) * job_gpus(j);
    set_used(r, i, -1);
    logf_(r, "STOP job=%d tenant=%s ran=%lld lost=%lld why=%s", i, r->s->tenants[j->tenant].path,
          (long long)ran, (long long)(ran - kept), why);
    if (qj && qj->state == ALLOT_JOB_DONE) {
        x->state = JS_KILLED;
        set_demand(r, i, -1);
        return 0;
    }
    x->state = JS_PENDING;
    x->pending_since = r->now;
    set_pending(r, i, +1);
    return 0;
}

static int process_decisions(struct run *r, size_t *killed)
{
    int rc = 0;

    if (r->dec_oom)
        return ALLOT_ENOMEM;
    for (size_t k = 0; k < r->n_dec && rc == 0; k++) {
        const struct decision *d = &r->dec[k];
        int i = job_of(r, d->qid);

        if (i < 0)
            return fail_at(r, "decision for unknown queue job %d", d->qid);
        switch (d->kind) {
        case ALLOT_DEC_START:
            rc = do_start(r, i);
            break;
        case ALLOT_DEC_PREEMPT:
            if (r->js[i].state != JS_RUNNING)
                return fail_at(r, "job %d preempted while not running", i);
            r->js[i].preemptions++;
            logf_(r, "PREEMPT job=%d tenant=%s why=%s", i, r->s->tenants[r->s->jobs[i].tenant].path,
                  d->why);
            if (d->state_at == ALLOT_JOB_STOPPING)
                r->js[i].state = JS_STOPPING;
            else
                rc = do_stop(r, i, "preempted without grace");
            break;
        case ALLOT_DEC_STOP:
            rc = do_stop(r, i, d->why);
            break;
        default:
            return fail_at(r, "unknown decision kind %d for job %d", d->kind, i);
        }
        if (rc == 0 && r->js[i].state == JS_KILLED)
            (*killed)++;
    }
    r->n_dec = 0;
    return rc;
}

/* --check: the queue's invariants, and the run's mirror against the queue. */
static int check(struct run *r, const char *after)
{
    char e[512];
    int64_t held = 0;

    if (allot_queue_check_invariants(r->q, e, sizeof(e)) != 0)
        return fail_at(r, "after %s: queue invariant broken: %s", after, e);
    for (size_t i = 0; i < r->s->n_jobs; i++) {
        const struct jstate *x = &r->js[i];
        const struct allot_job *qj;
        int want;

        if (x->state == JS_FUTURE)
            continue;
        qj = allot_queue_job(r->q, x->qid);
        want = x->state == JS_PENDING    ? ALLOT_JOB_PENDING
               : x->state == JS_RUNNING  ? ALLOT_JOB_RUNNING
               : x->state == JS_STOPPING ? ALLOT_JOB_STOPPING
                                         : ALLOT_JOB_DONE;
        if (!qj || qj->state != want)
            return fail_at(r, "after %s: job %zu is %d in the queue, %d in the replay", after, i,
                           qj ? qj->state : -1, want);
        if (x->state == JS_RUNNING || x->state == JS_STOPPING)
            held += job_gpus(&r->s->jobs[i]);
    }
    if (held != r->used || held * ALLOT_MILLI != allot_cluster_used_milli(r->c))
        return fail_at(
            r, "after %s: %lld GPUs held by jobs, replay counts %lld, cluster %lld milli", after,
            (long long)held, (long long)r->used, (long long)allot_cluster_used_milli(r->c));
    return 0;
}

static int submit(struct run *r, int i)
{
    const struct replay_job *j = &r->s->jobs[i];
    struct jstate *x = &r->js[i];
    struct allot_resvec v;
    struct allot_job_spec spec = {0};
    char name[32], e[256];
    int qid;

    allot_fmt(name, sizeof(name), "j%d", i);
    spec.name = name;
    spec.tenant = r->leaf[j->tenant];
    spec.prio_class = j->prio_class;
    spec.qos = ALLOT_QOS_GUARANTEED;
    spec.n_tasks = j->n_tasks;
    spec.task.num_gpu = j->gpus;
    spec.task.gpu_milli = ALLOT_MILLI;
    spec.task.mig_profile = -1;
    spec.task.cpu_milli = (int64_t)j->gpus * r->s->cpu_per_gpu;
    spec.task.mem_mib = (int64_t)j->gpus * r->s->mem_per_gpu;
    spec.est_runtime_s = r->policy == REPLAY_SJF_ORACLE ? j->duration : 0;
    spec.checkpointable = true;
    spec.checkpoint_interval_s = r->o->checkpoint_s;
    job_resvec(r->s, j, &v);
    /* in-quota: the job fits the tenant's nominal on top of its whole
     * demand (running and waiting jobs), which the shadow holds */
    x->in_quota = allot_tenants_in_nominal(r->shadow, r->leaf[j->tenant], &v);
    set_demand(r, i, +1);
    qid = allot_queue_submit(r->q, &spec, r->now, e, sizeof(e));
    if (qid == ALLOT_ENOMEM)
        return ALLOT_ENOMEM;
    if (qid < 0)
        return fail_at(r, "the queue refused job %d (trace line %u): %s", i, j->line, e);
    if ((size_t)qid >= r->qid_cap) {
        size_t old = r->qid_cap;

        if (allot_grow((void **)&r->job_of_qid, &r->qid_cap, (size_t)qid + 1,
                       sizeof(*r->job_of_qid)) < 0)
            return ALLOT_ENOMEM;
        for (size_t k = old; k < r->qid_cap; k++)
            r->job_of_qid[k] = -1;
    }
    r->job_of_qid[qid] = i;
    x->qid = qid;
    x->state = JS_PENDING;
    x->pending_since = r->now;
    set_pending(r, i, +1);
    logf_(r, "SUBMIT job=%d tenant=%s gang=%dx%d work=%lld in_quota=%s", i,
          r->s->tenants[j->tenant].path, j->n_tasks, j->gpus, (long long)j->duration,
          x->in_quota ? "yes" : "no");
    return 0;
}

static int finish(struct run *r, int i)
{
    const struct replay_job *j = &r->s->jobs[i];
    struct jstate *x = &r->js[i];
    int rc = allot_queue_finish(r->q, x->qid, r->now);

    if (rc < 0)
        return fail_at(r, "allot_queue_finish(job %d) failed: %s", i, allot_strerror(rc));
    set_used(r, i, -1);
    set_demand(r, i, -1);
    x->state = JS_DONE;
    x->end = r->now;
    logf_(r, "FINISH job=%d tenant=%s jct=%lld queued=%lld", i, r->s->tenants[j->tenant].path,
          (long long)(x->end - j->submit), (long long)x->queued);
    return 0;
}

/* ---- figures ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const double *v, size_t n, double p)
{
    size_t k;

    if (n == 0)
        return NAN;
    k = (size_t)ceil(p * (double)n);
    return v[k > 0 ? k - 1 : 0];
}

static double mean(const double *v, size_t n)
{
    double s = 0;

    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : NAN;
}

/* Fills the job figures of *st from the jobs of `tenant` (-1: all). */
static void job_figures(const struct run *r, int tenant, int64_t end, double *a, double *b,
                        double *c, struct replay_stats *st)
{
    size_t nf = 0, nq = 0;

    for (size_t i = 0; i < r->s->n_jobs; i++) {
        const struct replay_job *j = &r->s->jobs[i];
        const struct jstate *x = &r->js[i];

        if (tenant >= 0 && j->tenant != tenant)
            continue;
        st->jobs++;
        st->preemptions += x->preemptions;
        st->lost_gpu_hours += (double)x->lost_gpu_s / 3600.0;
        if (x->state == JS_DONE) {
            a[nf] = (double)(x->end - j->submit);
            b[nf] = (double)x->queued;
            nf++;
        }
        if (x->in_quota)
            c[nq++] = (double)((x->first_start >= 0 ? x->first_start : end) - j->submit);
    }
    st->finished = nf;
    st->unfinished = st->jobs - nf;
    st->in_quota_jobs = nq;
    qsort(a, nf, sizeof(*a), cmp_double);
    qsort(b, nf, sizeof(*b), cmp_double);
    qsort(c, nq, sizeof(*c), cmp_double);
    st->avg_jct = mean(a, nf);
    st->p50_jct = pct(a, nf, 0.50);
    st->p95_jct = pct(a, nf, 0.95);
    st->p99_jct = pct(a, nf, 0.99);
    st->avg_queue = mean(b, nf);
    st->p50_queue = pct(b, nf, 0.50);
    st->p95_queue = pct(b, nf, 0.95);
    st->p99_queue = pct(b, nf, 0.99);
    st->in_quota_wait_p99 = pct(c, nq, 0.99);
}

static void wait_shares(struct replay_stats *st, const struct waits *w)
{
    st->wait_gpu_hours = w->all / 3600.0;
    st->wait_over_share = w->all > 0 ? w->over / w->all : NAN;
    st->wait_idle_share = w->all > 0 ? w->idle / w->all : NAN;
    st->wait_lent_share = w->all > 0 ? w->lent / w->all : NAN;
}

static int figures(struct run *r, int64_t end, const double *util, struct replay_result *out)
{
    const struct replay_setup *s = r->s;
    struct waits sum = {0};
    double *a = allot_malloc((s->n_jobs + 1) * 3 * sizeof(double)), w = (double)(s->to - s->from);

    if (!a)
        return ALLOT_ENOMEM;
    memset(&out->all, 0, sizeof(out->all));
    job_figures(r, -1, end, a, a + s->n_jobs + 1, a + 2 * (s->n_jobs + 1), &out->all);
    out->all.utilization = r->gpu_s / ((double)r->gpus * w);
    out->all.gpu_hours = r->gpu_s_run / 3600.0;
    out->all.jain = r->n_jain ? r->jain_sum / (double)r->n_jain : NAN;
    out->all.jain_nominal = r->n_jain_nom ? r->jain_nom_sum / (double)r->n_jain_nom : NAN;
    out->all.share_ratio = NAN;
    out->contention_samples = r->n_jain;
    for (int t = 0; t < s->n_tenants; t++) {
        struct replay_stats *st = &out->tenant[t];
        double nom = (double)s->tenants[t].nominal_milli / ALLOT_MILLI;

        memset(st, 0, sizeof(*st));
        job_figures(r, t, end, a, a + s->n_jobs + 1, a + 2 * (s->n_jobs + 1), st);
        st->utilization = nom > 0 ? r->t_gpu_s[t] / (nom * w) : NAN;
        st->jain = st->jain_nominal = NAN;
        st->share_ratio = r->t_ratio_n[t] ? r->t_ratio_sum[t] / (double)r->t_ratio_n[t] : NAN;
        wait_shares(st, &r->t_wait[t]);
        sum.all += r->t_wait[t].all;
        sum.over += r->t_wait[t].over;
        sum.idle += r->t_wait[t].idle;
        sum.lent += r->t_wait[t].lent;
    }
    wait_shares(&out->all, &sum);
    for (size_t b = 0; b < out->n_bins; b++) {
        int64_t lo = s->from + (int64_t)b * REPLAY_BIN_S;
        int64_t hi = lo + REPLAY_BIN_S < s->to ? lo + REPLAY_BIN_S : s->to;

        out->util[b] = util[b] / ((double)r->gpus * (double)(hi - lo));
        out->queue_len[b] = r->q_n[b] ? r->q_sum[b] / (double)r->q_n[b] : NAN;
    }
    allot_free(a);
    return 0;
}

/* ---- the loop ---- */

static void queue_options(int policy, const struct replay_opts *o, struct allot_queue_opts *qo)
{
    memset(qo, 0, sizeof(*qo));
    qo->placement = o->placement ? o->placement : "bestfit";
    qo->seed = o->seed;
    qo->half_life_s = 86400;
    switch (policy) {
    case REPLAY_STATIC:
        qo->order = "fifo";
        qo->quotas = true;
        break;
    case REPLAY_FIFO:
        qo->order = "fifo";
        break;
    case REPLAY_LAS:
        /* Tiresias-style: two queues split at one GPU-hour of service;
         * jobs in the first preempt jobs in the second at once */
        qo->order = "las";
        qo->preemption = true;
        qo->las_threshold_gpu_s = 3600;
        qo->min_runtime_s = 60;
        break;
    case REPLAY_SJF_ORACLE:
        qo->order = "sjf";
        break;
    default:
        if (o->queue) {
            *qo = *o->queue;
            break;
        }
        /* allotd's default queue options: the tuned table
         * (include/allot/queue.h), with the lending hold unless asked
         * otherwise; the placement is the run's */
        allot_queue_opts_tuned(qo);
        qo->placement = o->placement ? o->placement : "bestfit";
        qo->seed = o->seed;
        qo->fair_cap = o->fair_cap;
        qo->defrag_s = o->defrag_s;
        qo->defrag_loss_s = o->defrag_loss_s;
        if (o->no_lending_hold)
            qo->hold_half_life_s = 0;
        break;
    }
}

static void run_free(struct run *r)
{
    allot_queue_free(r->q);
    allot_cluster_free(r->c);
    allot_tenants_free(r->t);
    allot_tenants_free(r->shadow);
    allot_free(r->leaf);
    allot_free(r->js);
    allot_free(r->job_of_qid);
    allot_free(r->heap);
    allot_free(r->dec);
    allot_free(r->t_used);
    allot_free(r->t_pending_gpus);
    allot_free(r->t_gpu_s);
    allot_free(r->t_ratio_sum);
    allot_free(r->t_ratio_n);
    allot_free(r->t_wait);
    allot_free(r->q_sum);
    allot_free(r->q_n);
    allot_free(r->ord);
}

void replay_result_free(struct replay_result *r)
{
    if (!r)
        return;
    allot_free(r->tenant);
    allot_free(r->queue_len);
    allot_free(r->util);
    memset(r, 0, sizeof(*r));
}

/* The event loop proper; fills *out's counters. */
static int loop(struct run *r, double *util, double *buf, struct replay_result *out, int64_t *end)
{
    const struct replay_setup *s = r->s;
    int64_t wake = INT64_MAX;
    size_t next = 0;
    int rc = 0, idle_waits = 0;

    r->now = s->from;
    for (;;) {
        int64_t t = next < s->n_jobs ? s->jobs[next].submit : INT64_MAX;

        if (heap_clean(r) && r->heap[0].t < t)
            t = r->heap[0].t;
        if (wake < t)
            t = wake;
        /* Draining with jobs left pending on an idle cluster: under a lending
         * hold (docs/tenancy.md) what tenants used lately is withheld and
         * decays with time, though the queue asks for no wake-up; look again
         * one half-life later, at most REPLAY_HOLD_WAITS times in a row. */
        if (r->used > 0 || r->n_pending == 0)
            idle_waits = 0;
        if (t == INT64_MAX && r->o->drain && r->n_pending > 0 && r->used == 0 && r->hold_s > 0 &&
            idle_waits < REPLAY_HOLD_WAITS) {
            t = r->now + r->hold_s;
            idle_waits++;
        }
        if (t == INT64_MAX || (!r->o->drain && t >= s->to))
            break;
        bin_util(r, util, r->now, t);
        advance(r, t, buf);
        while (heap_clean(r) && r->heap[0].t == t) {
            int i = r->heap[0].job;

            heap_pop(r);
            if ((rc = finish(r, i)) < 0)
                return rc;
        }
        if (r->o->check && (rc = check(r, "departures")) < 0)
            return rc;
        for (; next < s->n_jobs && s->jobs[next].submit == t; next++)
            if ((rc = submit(r, (int)next)) < 0)
                return rc;
        if (r->o->check && (rc = check(r, "arrivals")) < 0)
            return rc;
        /* a cycle cut short at its work budget goes on at the same time */
        do {
            rc = allot_queue_cycle(r->q, t, on_decision, r);
            out->cycles++;
            if (rc < 0)
                return rc == ALLOT_ENOMEM ? rc
                                          : fail_at(r, "allot_queue_cycle: %s", allot_strerror(rc));
            if ((rc = process_decisions(r, &out->killed)) < 0)
                return rc;
            if (r->o->check && (rc = check(r, "the cycle")) < 0)
                return rc;
        } while (allot_queue_more(r->q));
        /* the queue's own wake-up; never the same instant again */
        wake = allot_queue_next_wakeup(r->q);
        if (wake <= t)
            wake = t + 1;
    }
    *end = r->o->drain && r->now > s->to ? r->now : s->to;
    bin_util(r, util, r->now, s->to);
    advance(r, r->now > s->to ? r->now : s->to, buf);
    return 0;
}

int replay_run(const struct replay_setup *s, int policy, const struct replay_opts *o,
               struct replay_result *out, char *err, size_t errlen)
{
    struct run r = {.s = s, .o = o, .policy = policy, .err = err, .errlen = errlen};
    const struct allot_sched_policy_ops *pl =
        allot_sched_policy_find(o->placement ? o->placement : "bestfit");
    struct allot_queue_opts qo;
    double *util = NULL, *buf = NULL, t0 = now_s();
    size_t nt = (size_t)s->n_tenants;
    int64_t end = s->to;
    int rc = ALLOT_ENOMEM;

    memset(out, 0, sizeof(*out));
    out->policy = policy;
    if (policy < 0 || policy >= REPLAY_POLICIES || !pl) {
        allot_fmt(err, errlen, "unknown %s", pl ? "policy" : "placement policy");
        return ALLOT_EINVAL;
    }
    out->n_bins = (size_t)((s->to - s->from + REPLAY_BIN_S - 1) / REPLAY_BIN_S);
    r.leaf = allot_calloc(nt + 1, sizeof(*r.leaf));
    r.js = allot_calloc(s->n_jobs + 1, sizeof(*r.js));
    r.t_used = allot_calloc(nt + 1, sizeof(*r.t_used));
    r.t_pending_gpus = allot_calloc(nt + 1, sizeof(*r.t_pending_gpus));
    r.t_gpu_s = allot_calloc(nt + 1, sizeof(*r.t_gpu_s));
    r.t_ratio_sum = allot_calloc(nt + 1, sizeof(*r.t_ratio_sum));
    r.t_ratio_n = allot_calloc(nt + 1, sizeof(*r.t_ratio_n));
    r.t_wait = allot_calloc(nt + 1, sizeof(*r.t_wait));
    r.q_sum = allot_calloc(out->n_bins + 1, sizeof(*r.q_sum));
    r.q_n = allot_calloc(out->n_bins + 1, sizeof(*r.q_n));
    util = allot_calloc(out->n_bins + 1, sizeof(*util));
    buf = allot_calloc(5 * nt + 1, sizeof(*buf));
    r.ord = allot_calloc(nt + 1, sizeof(*r.ord));
    out->tenant = allot_calloc(nt + 1, sizeof(*out->tenant));
    out->queue_len = allot_calloc(out->n_bins + 1, sizeof(*out->queue_len));
    out->util = allot_calloc(out->n_bins + 1, sizeof(*out->util));
    if (!r.leaf || !r.js || !r.t_used || !r.t_pending_gpus || !r.t_gpu_s || !r.t_ratio_sum ||
        !r.t_ratio_n || !r.t_wait || !r.q_sum || !r.q_n || !r.ord || !util || !buf ||
        !out->tenant || !out->queue_len || !out->util)
        goto fail;
    for (size_t i = 0; i < s->n_jobs; i++) {
        r.js[i].qid = -1;
        r.js[i].first_start = -1;
        r.js[i].end = -1;
    }
    r.t = build_tenants(s, r.leaf, err, errlen);
    r.shadow = r.t ? build_tenants(s, r.leaf, err, errlen) : NULL;
    r.c = build_cluster(s, pl->flags & ALLOT_SCHED_POLICY_POD_CLASSES ? ALLOT_CLASS_POD_CLASSES : 0,
                        o->seed, err, errlen);
    if (!r.t || !r.shadow || !r.c) {
        rc = ALLOT_EINVAL;
        goto fail_msg;
    }
    r.gpus = allot_cluster_gpu_count(r.c);
    queue_options(policy, o, &qo);
    r.hold_s = (int64_t)qo.hold_half_life_s;
    r.q = allot_queue_new(r.c, r.t, &qo, err, errlen);
    if (!r.q) {
        rc = ALLOT_EINVAL;
        goto fail_msg;
    }
    for (int p = 0; s->has_conf && p < s->conf.n_prio; p++) {
        const struct sim_prio_conf *pc = &s->conf.prio[p];

        if ((rc = allot_queue_add_prio_class(r.q, pc->name, pc->value, pc->preemptible)) != p) {
            allot_fmt(err, errlen, "priority class %s: %s", pc->name,
                      allot_strerror(rc < 0 ? rc : ALLOT_EINTERNAL));
            rc = rc < 0 ? rc : ALLOT_EINTERNAL;
            goto fail_msg;
        }
    }
    r.next_sample = s->from;
    if ((rc = loop(&r, util, buf, out, &end)) < 0) {
        if (rc == ALLOT_ENOMEM)
            goto fail;
        goto fail_msg;
    }
    if (o->log && ferror(o->log)) {
        allot_fmt(err, errlen, "decision log: write failed");
        rc = ALLOT_EIO;
        goto fail_msg;
    }
    if (figures(&r, end, util, out) < 0)
        goto fail;
    out->end = end;
    out->wall_s = now_s() - t0;
    allot_free(util);
    allot_free(buf);
    run_free(&r);
    return 0;
fail:
    allot_fmt(err, errlen, "out of memory");
    rc = ALLOT_ENOMEM;
fail_msg:
    allot_free(util);
    allot_free(buf);
    run_free(&r);
    replay_result_free(out);
    out->policy = policy;
    return rc;
}
