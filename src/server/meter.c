/*
 * Metering: runs and samples into hourly usage rows (see meter.h and
 * docs/metering.md).
 *
 * Allocated use comes from the store's runs: a run opens when a job enters
 * starting/running and closes when it leaves, written by the store in the
 * same transaction as the job's state, so an allotd or agent restart can
 * neither lose nor double a second of it. Measured use comes from the
 * agents' samples, stored once per (job, task, sample time): a sample sent
 * twice (an agent resending what it buffered while allotd was away) is
 * stored once. Cumulative counters (CPU time, GPU energy) are differenced
 * between consecutive samples of a task within one run, so missing samples
 * lose no CPU time or energy, only resolution; never across two runs (a
 * job started again may be on another node, its counters others'), and a
 * counter that went back (reset) counts nothing for that interval. That
 * accumulation is meter_collect.c's; this file reads the store for it.
 *
 * The roll-up thread recomputes the hours from the first one not yet final
 * up to now every meter-interval, in one write, and makes an hour final
 * once it ended more than METER_LATE ago. A heartbeat that stores samples
 * of a final hour (an agent resending what it buffered through a long
 * outage) makes it not final again (meter_reopen), back to the start of
 * the current month at most; the roll-up never moves the mark past one so
 * lowered while it computed.
 */
#include "meter.h"

#include "allot/common.h"
#include "anomaly.h"
#include "log.h"
#include "loop.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define METER_LATE 3600 /* s: an hour is final this long after it ended */

/* ---- the roll-up pass ---- */

struct rollup_write {
    struct server *s;
    int64_t from, to, final;
    int64_t dirty; /* meter_dirty as the pass began */
    const struct allot_store_usage *rows;
    size_t n;
};

/* The first hour not yet final (meta meter_final); *known false when
 * none is recorded yet. 0 or ALLOT_E*. */
static int final_get(struct allot_store *st, int64_t *final, bool *known)
{
    char *v = NULL;
    int rc = allot_store_meta_get(st, "meter_final", &v);

    *known = rc == 0 && v;
    *final = *known ? strtoll(v, NULL, 10) : 0;
    allot_free(v);
    return rc == ALLOT_ENOENT ? 0 : rc;
}

static int rollup_fn(struct allot_store *st, void *arg)
{
    struct rollup_write *w = arg;
    char v[32];
    int64_t now_final;
    bool known;
    /* every row from `from` on: rows of hours after the pass's are a clock's
     * that was ahead (counting open runs up to it), whatever the mark */
    int rc = allot_store_usage_replace(st, w->from, INT64_MAX / 2, w->rows, w->n);

    if (!rc)
        rc = final_get(st, &now_final, &known);
    if (rc)
        return rc;
    /* late samples reopened an hour before this pass's start meanwhile:
     * the mark stays there, so that the next pass rolls it up */
    if (known && now_final < w->from)
        return 0;
    /* samples stored since the pass began (this pass may not have read
     * them) of an hour it would make final: the mark stops at that hour,
     * whose next pass reads them (those stored from now on find the new
     * mark in meter_reopen) */
    int64_t dirty = atomic_exchange(&w->s->meter_dirty, INT64_MAX), mark = w->final;
    if (w->dirty < dirty)
        dirty = w->dirty;
    if (dirty < mark)
        mark = dirty > w->from ? dirty : w->from;
    allot_fmt(v, sizeof(v), "%lld", (long long)mark);
    return allot_store_meta_set(st, "meter_final", v);
}

int meter_reopen(struct allot_store *st, int64_t at_ms, int64_t now)
{
    int64_t final, hour = meter_floor_hour(at_ms / 1000), month0, month_end;
    char v[32];
    bool known;
    int rc = final_get(st, &final, &known);

    if (rc || !known || hour >= final)
        return rc;
    meter_month_of(now, &month0, &month_end);
    if (hour < month0)
        hour = month0;
    if (hour >= final)
        return 0;
    allot_fmt(v, sizeof(v), "%lld", (long long)hour);
    return allot_store_meta_set(st, "meter_final", v);
}

void meter_note_samples(struct server *s, int64_t at_ms)
{
    int_fast64_t h = meter_floor_hour(at_ms / 1000), cur = atomic_load(&s->meter_dirty);

    while (h < cur && !atomic_compare_exchange_weak(&s->meter_dirty, &cur, h))
        ;
}

int meter_rollup(struct server *s, int64_t now)
{
    struct allot_store *st = srv_reader(s);
    struct allot_store_run *runs = NULL;
    struct allot_store_sample *smp = NULL;
    size_t n_runs = 0, n_smp = 0;
    struct meter_acc a;
    int64_t from, to = meter_floor_hour(now) + METER_HOUR;
    bool known;
    int rc;

    if (!st)
        return ALLOT_EIO;
    int64_t dirty = atomic_exchange(&s->meter_dirty, INT64_MAX); /* before the reads */
    if ((rc = final_get(st, &from, &known)))
        return rc;
    if (!known)
        from = -1;
    /* the mark after the current hour's start, which no pass sets (one
     * sets it an hour behind, or at the first pass at the current hour):
     * the clock went back, a pass having run while it was ahead and counted
     * open runs up to then. The hours from where the mark is due now on
     * are rolled up again */
    int64_t due = meter_floor_hour(now - METER_LATE), m0, m1;
    if (known && from > meter_floor_hour(now)) {
        meter_month_of(now, &m0, &m1);
        LOG_WARN("meter",
                 "usage was final up to %lld, after now (%lld): the clock went back; rolling "
                 "up again from %lld",
                 (long long)from, (long long)now, (long long)(due > m0 ? due : m0));
        from = due > m0 ? due : m0;
    }
    if ((rc = allot_store_run_list(st, from < 0 ? INT64_MIN / 2 : from, to, &runs, &n_runs)))
        return rc;
    if (from < 0) { /* first pass: from the first run's hour */
        from = meter_floor_hour(now);
        for (size_t i = 0; i < n_runs; i++)
            if (meter_floor_hour(runs[i].start) < from)
                from = meter_floor_hour(runs[i].start);
    }
    rc = allot_store_sample_list(st, (from - METER_SAMPLE_GAP / 1000) * 1000, to * 1000, &smp,
                                 &n_smp);
    if (rc) {
        allot_store_runs_free(runs, n_runs);
        return rc;
    }
    meter_acc_init(&a, false);
    rc = meter_collect(s->cat, runs, n_runs, smp, n_smp, from, to, now, &a);
    if (rc == 0) {
        int64_t final = meter_floor_hour(now - METER_LATE);
        struct rollup_write w = {.s = s,
                                 .from = from,
                                 .to = to,
                                 .final = final > from ? final : from,
                                 .dirty = dirty,
                                 .rows = a.rows,
                                 .n = a.n};
        rc = srv_write(s, rollup_fn, &w);
    }
    meter_acc_free(&a);
    allot_store_runs_free(runs, n_runs);
    allot_free(smp);
    if (rc == 0)
        atomic_store(&s->meter_at, now);
    return rc;
}

static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, running;
    json_t *snap;      /* guarded by mu: this month per tenant, for /metrics */
    json_t *idle;      /* guarded by mu: the jobs flagged idle now */
    json_t *windows;   /* priority class -> idle window (ms), from idle-class-windows */
    json_t *told;      /* job ids already notified or evicted while idle */
    json_t *anom;      /* guarded by mu: the anomalies seen at the last pass */
    json_t *anom_told; /* anomaly keys already logged and audited */
    json_t *held;      /* guarded by mu: tenants whose borrowing is held (budget spent) */
    json_t *net_last;  /* guarded by the server's agents_lock: node, VNI and direction ->
                          the agent's last count (net_counted) */
    json_t *net_sum;   /* ... tenant and direction -> bytes counted since allotd started */
} mt = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- this month per tenant: /metrics and budgets ---- */

struct budget_write {
    const char *levels; /* meta budget_levels */
    json_t *crossed;    /* [[tenant, action, result]] */
    int64_t now;
};

static int budget_fn(struct allot_store *st, void *arg)
{
    struct budget_write *w = arg;
    json_t *x;
    size_t i;
    int rc = allot_store_meta_set(st, "budget_levels", w->levels);

    json_array_foreach(w->crossed, i, x)
    {
        char target[300];
        allot_fmt(target, sizeof(target), "tenant/%s", json_string_value(json_array_get(x, 0)));
        struct allot_store_audit e = {.time = w->now,
                                      .token_id = 0,
                                      .action = (char *)json_string_value(json_array_get(x, 1)),
                                      .target = target,
                                      .result = (char *)json_string_value(json_array_get(x, 2))};
        if (!rc)
            rc = allot_store_audit_append(st, &e, NULL);
    }
    return rc;
}

/* A budget's warning level in percent (80 unless it says). */
static json_int_t budget_warn_pct(json_t *bud)
{
    return json_object_get(bud, "warn_pct") ? json_integer_value(json_object_get(bud, "warn_pct"))
                                            : 80;
}

/* Level of a tenant's spending: 0 under the warning, 1 warned, 2 spent. */
static int budget_level(json_int_t cost, json_t *bud)
{
    json_int_t cap = json_integer_value(json_object_get(bud, "monthly_minor"));
    json_int_t warn = budget_warn_pct(bud);

    if (cost >= cap)
        return 2;
    return (__int128)cost * 100 >= (__int128)cap * warn ? 1 : 0;
}

/* What tenant k's subtree costs: its own cost and every tenant's below it
 * (a budget on an organisation covers its teams). */
static json_int_t subtree_cost(json_t *costs, const char *k)
{
    size_t kl = strlen(k);
    json_int_t sum = 0;
    const char *c;
    json_t *v;

    json_object_foreach(costs, c, v) if (!strncmp(c, k, kl) && (c[kl] == '\0' || c[kl] == '/'))
        sum += json_integer_value(v);
    return sum;
}

/* Recomputes this month's per-tenant figures; records (audit entry, log
 * line) each budget whose warning or limit was crossed for the first time
 * this month. */
static int meter_snapshot(struct server *s, int64_t now)
{
    struct allot_store *st = srv_reader(s);
    struct allot_store_usage *u = NULL;
    size_t n = 0;
    int64_t from, to;
    char month[16], *lv_text = NULL;
    time_t tt = (time_t)now;
    struct tm tm;
    int rc;

    if (!st)
        return ALLOT_EIO;
    gmtime_r(&tt, &tm);
    strftime(month, sizeof(month), "%Y-%m", &tm);
    meter_month_of(now, &from, &to);
    if ((rc = allot_store_usage_list(st, from, to, &u, &n)))
        return rc;
    json_t *snap = json_object(), *pb = billing_pricebook(st, s->cat, &rc);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_object_get(snap, u[i].tenant);
        if (!t) {
            t = json_pack("{s:{}}", "gpu_seconds");
            json_object_set_new(snap, u[i].tenant, t);
        }
        if (*u[i].model) {
            json_t *g = json_object_get(t, "gpu_seconds");
            double v = json_real_value(json_object_get(g, u[i].model));
            json_object_set_new(g, u[i].model, json_real(v + (double)u[i].gpu_ppm_s / 1e6));
        }
    }
    json_t *costs = json_object(), *budgets = json_object_get(pb, "budgets"),
           *crossed = json_array();
    if (pb && rc == 0)
        rc = billing_costs(s->cat, pb, u, n, costs);
    allot_store_usages_free(u, n);
    /* budget levels already recorded this month */
    json_t *levels = NULL;
    if (allot_store_meta_get(st, "budget_levels", &lv_text) == 0 && lv_text)
        levels = json_loads(lv_text, 0, NULL);
    allot_free(lv_text);
    if (!levels || strcmp(json_string_value(json_object_get(levels, "month")) ?: "", month) != 0) {
        json_decref(levels);
        levels = json_pack("{s:s,s:{}}", "month", month, "levels");
    }
    bool changed = false;
    const char *k;
    json_t *bud, *held = json_object();
    json_object_foreach(budgets, k, bud)
    {
        json_int_t cost = subtree_cost(costs, k);

        if (budget_level(cost, bud) == 2 && json_is_true(json_object_get(bud, "hold_borrowed")))
            json_object_set_new(held, k, json_true());
        json_int_t cap = json_integer_value(json_object_get(bud, "monthly_minor"));
        int level = budget_level(cost, bud);
        json_t *t = json_object_get(snap, k);

        if (!t) {
            t = json_pack("{s:{}}", "gpu_seconds");
            json_object_set_new(snap, k, t);
        }
        json_object_set_new(t, "budget_minor", json_integer(cap));
        json_object_set_new(t, "budget_cost_minor", json_integer(cost));
        json_object_set_new(t, "budget_warn_pct", json_integer(budget_warn_pct(bud)));
        /* the level recorded for this budget: a budget or warning level
         * changed since starts again from none, so that crossing the new
         * one is told too (a bare number: recorded before budgets were) */
        json_t *lv = json_object_get(json_object_get(levels, "levels"), k);
        bool same = !json_is_object(lv) ||
                    (json_integer_value(json_object_get(lv, "budget")) == cap &&
                     json_integer_value(json_object_get(lv, "warn")) == budget_warn_pct(bud));
        json_int_t was = !same                ? 0
                         : json_is_object(lv) ? json_integer_value(json_object_get(lv, "level"))
                                              : json_integer_value(lv);
        if (level > was) {
            char res[160];
            allot_fmt(res, sizeof(res), "%lld of %lld minor units spent in %s", (long long)cost,
                      (long long)cap, month);
            json_array_append_new(
                crossed,
                json_pack("[s,s,s]", k, level == 2 ? "budget.exhausted" : "budget.warning", res));
            LOG_WARN("meter", "tenant %s: %s", k, res);
        }
        if (level > was || !same) {
            json_object_set_new(json_object_get(levels, "levels"), k,
                                json_pack("{s:i,s:I,s:I}", "level", level > was ? level : 0,
                                          "budget", (json_int_t)cap, "warn", budget_warn_pct(bud)));
            changed = true;
        }
    }
    json_object_foreach(costs, k, bud)
    {
        json_t *t = json_object_get(snap, k);
        if (!t) {
            t = json_pack("{s:{}}", "gpu_seconds");
            json_object_set_new(snap, k, t);
        }
        json_object_set_new(t, "cost_minor", json_integer(json_integer_value(bud)));
    }
    if (changed) {
        char *text = json_dumps(levels, JSON_COMPACT);
        struct budget_write w = {.levels = text, .crossed = crossed, .now = now};
        rc = text ? srv_write(s, budget_fn, &w) : ALLOT_ENOMEM;
        free(text);
    }
    json_decref(levels);
    json_decref(crossed);
    json_decref(costs);
    json_decref(pb);
    pthread_mutex_lock(&mt.mu);
    json_decref(mt.snap);
    mt.snap = snap;
    /* the first pass counts as a change only when something is held */
    bool held_changed = mt.held ? !json_equal(held, mt.held) : json_object_size(held) > 0;
    if (!mt.held || held_changed) {
        json_decref(mt.held);
        mt.held = json_incref(held);
    }
    pthread_mutex_unlock(&mt.mu);
    if (held_changed) {
        /* the loop applies the tenants again, without borrowing for these */
        json_object_foreach(held, k, bud)
            LOG_WARN("meter", "tenant %s: budget spent, borrowing held", k);
        loop_post(s->loop, LOOP_TENANTS, 0, NULL);
    }
    json_decref(held);
    return rc;
}

bool meter_borrow_held(const char *tenant)
{
    bool held;

    pthread_mutex_lock(&mt.mu);
    held = json_is_true(json_object_get(mt.held, tenant));
    pthread_mutex_unlock(&mt.mu);
    return held;
}

/* ---- idle allocations ---- */

struct idle_write {
    json_t *flagged; /* [{job, tenant, ...}] newly flagged: audited */
    int64_t now;
};

static int idle_fn(struct allot_store *st, void *arg)
{
    struct idle_write *w = arg;
    json_t *x;
    size_t i;
    int rc = 0;

    json_array_foreach(w->flagged, i, x)
    {
        char target[64], res[200];
        allot_fmt(target, sizeof(target), "job/%lld",
                  (long long)json_integer_value(json_object_get(x, "job")));
        allot_fmt(res, sizeof(res), "idle since %lld: mean utilisation %.1f%%, %.3f GPU-hours held",
                  (long long)json_integer_value(json_object_get(x, "idle_since")),
                  json_real_value(json_object_get(x, "util_avg")),
                  json_real_value(json_object_get(x, "wasted_gpu_hours")));
        struct allot_store_audit e = {
            .time = w->now, .token_id = 0, .action = "job.idle", .target = target, .result = res};
        if (!rc)
            rc = allot_store_audit_append(st, &e, NULL);
    }
    return rc;
}

/* The priority class named by a job's spec ("" for the default). */
static void job_class(struct allot_store *st, int64_t id, char *cls, size_t len)
{
    struct allot_store_job j = {0};

    cls[0] = '\0';
    if (allot_store_job_get(st, id, &j) == 0 && j.spec) {
        json_t *spec = json_loads(j.spec, 0, NULL);
        const char *p = json_string_value(json_object_get(spec, "priority"));
        allot_strlcpy(cls, p ? p : "", len);
        json_decref(spec);
    }
    allot_store_job_clear(&j);
}

/*
 * Finds the running jobs that hold GPUs (whole or MIG) and whose measured
 * utilisation stayed under idle-threshold for their class's idle window:
 * observed for the whole window (within a tenth of it), at least two
 * utilisation samples in it, none at or over the threshold. Such a job is
 * idle since its last busy sample (or since it was first measured); the
 * GPU-hours it held since are wasted.
 */
static int meter_idle(struct server *s, int64_t now)
{
    struct allot_store *st = srv_reader(s);
    struct allot_store_run *runs = NULL;
    struct allot_store_sample *smp = NULL;
    struct allot_store_prio_class *pc = NULL;
    size_t n_runs = 0, n_smp = 0, n_pc = 0;
    int64_t wmax = s->cfg.idle_window;
    const char *k;
    json_t *v, *idle = json_array(), *flagged = json_array();
    int rc;

    if (!st)
        return ALLOT_EIO;
    json_object_foreach(mt.windows, k, v) if (json_integer_value(v) > wmax) wmax =
        json_integer_value(v);
    if ((rc = allot_store_run_list(st, now, now + 1, &runs, &n_runs)) ||
        (rc = allot_store_sample_list(st, now * 1000 - 2 * wmax - 1, now * 1000 + 60000, &smp,
                                      &n_smp)) ||
        (rc = allot_store_prio_list(st, &pc, &n_pc)))
        goto out;
    for (size_t i = 0; i < n_runs; i++) {
        const struct allot_store_run *r = &runs[i];
        json_t *pl = json_loads(r->placement ? r->placement : "{}", 0, NULL), *t;
        int64_t ppm_sum = 0, window;
        size_t x;
        char cls[64];

        if (r->end) {
            json_decref(pl);
            continue;
        }
        json_array_foreach(json_object_get(pl, "tasks"), x, t)
        {
            char item[64], model[64];
            int64_t ppm;
            meter_task_share(s->cat, t, &ppm, item, sizeof(item), model, sizeof(model));
            if (strcmp(item, "fraction") != 0)
                ppm_sum += ppm;
        }
        json_decref(pl);
        if (ppm_sum <= 0)
            continue;
        job_class(st, r->job_id, cls, sizeof(cls));
        json_t *cw = json_object_get(mt.windows, cls);
        window = cw ? json_integer_value(cw) : s->cfg.idle_window;
        if (window <= 0 || (now - r->start) * 1000 < window)
            continue;
        int64_t lo = now * 1000 - window, first = 0, last_busy = 0, u_sum = 0, u_n = 0;
        bool busy = false;
        for (size_t q = 0; q < n_smp; q++) {
            const struct allot_store_sample *p = &smp[q];
            if (p->job_id != r->job_id || p->gpu_util < 0 || p->at < r->start * 1000)
                continue;
            /* a sample stands for the interval before it */
            int64_t from = p->at - (p->interval_ms > 0 ? p->interval_ms : 0);
            if (!first || from < first)
                first = from;
            if (p->gpu_util >= s->cfg.idle_threshold)
                last_busy = p->at > last_busy ? p->at : last_busy;
            if (p->at < lo)
                continue;
            busy |= p->gpu_util >= s->cfg.idle_threshold;
            u_sum += p->gpu_util;
            u_n++;
        }
        /* observed for the whole window (a tenth of it spared for the
         * samples' timing), at least twice in it, never busy in it: a job
         * is not idle for time nobody measured */
        if (busy || u_n < 2 || !first || first > lo + window / 10)
            continue;
        /* idle since its last busy sample, else since it was first measured */
        int64_t since = last_busy                 ? last_busy / 1000
                        : first / 1000 > r->start ? first / 1000
                                                  : r->start;
        double wasted = (double)ppm_sum / 1e6 * (double)(now - since) / 3600.0;
        bool preemptible = false;
        for (size_t q = 0; q < n_pc; q++)
            if (!strcmp(pc[q].name, cls))
                preemptible = pc[q].preemptible;
        json_t *o =
            json_pack("{s:I,s:s,s:s,s:s,s:f,s:f,s:I,s:f,s:b}", "job", (json_int_t)r->job_id,
                      "tenant", r->tenant, "user", r->user, "class", cls, "gpus",
                      (double)ppm_sum / 1e6, "util_avg", (double)u_sum / (double)u_n, "idle_since",
                      (json_int_t)since, "wasted_gpu_hours", wasted, "preemptible", preemptible);
        json_array_append(idle, o);
        char key[32];
        allot_fmt(key, sizeof(key), "%lld", (long long)r->job_id);
        if (!json_object_get(mt.told, key)) {
            json_object_set_new(mt.told, key, json_true());
            json_array_append(flagged, o);
            LOG_WARN("meter", "job %lld (%s) idle: mean utilisation %.1f%% since %lld",
                     (long long)r->job_id, r->tenant, (double)u_sum / (double)u_n,
                     (long long)since);
            if (!strcmp(s->cfg.idle_action, "preempt") && preemptible) {
                char why[160];
                allot_fmt(why, sizeof(why),
                          "evicted: idle (GPU utilisation under %lld%% for %lld s)",
                          (long long)s->cfg.idle_threshold, (long long)(window / 1000));
                loop_post(s->loop, LOOP_JOB_EVICT, r->job_id, why);
            }
        }
        json_decref(o);
    }
    /* jobs no longer idle may be told again later */
    json_t *keep = json_object();
    size_t q;
    json_array_foreach(idle, q, v)
    {
        char key[32];
        allot_fmt(key, sizeof(key), "%lld",
                  (long long)json_integer_value(json_object_get(v, "job")));
        json_object_set_new(keep, key, json_true());
    }
    json_decref(mt.told);
    mt.told = keep;
    if (json_array_size(flagged)) {
        struct idle_write w = {.flagged = flagged, .now = now};
        rc = srv_write(s, idle_fn, &w);
    }
    pthread_mutex_lock(&mt.mu);
    json_decref(mt.idle);
    mt.idle = idle;
    idle = NULL;
    pthread_mutex_unlock(&mt.mu);
out:
    json_decref(idle);
    json_decref(flagged);
    allot_store_runs_free(runs, n_runs);
    allot_free(smp);
    allot_store_prios_free(pc, n_pc);
    return rc;
}

/* ---- anomalies ---- */

/* Appends anomaly o (stolen) to list, and to fresh when its key is new. */
static void anomaly_add(json_t *list, json_t *fresh, json_t *seen, const char *key, json_t *o)
{
    json_array_append(list, o);
    json_object_set_new(seen, key, json_true());
    if (!json_object_get(mt.anom_told, key))
        json_array_append(fresh, o);
    json_decref(o);
}

/* Tenants whose GPU use in the last complete hour is far above their own
 * hourly history (robust z-score, anomaly.c). */
static int tenant_anomalies(struct server *s, struct allot_store *st, int64_t now, json_t *list,
                            json_t *fresh, json_t *seen)
{
    int64_t last = meter_floor_hour(now) - METER_HOUR, from = last - s->cfg.anomaly_history / 1000;
    size_t n_h = (size_t)((last - from) / METER_HOUR), n = 0;
    struct allot_store_usage *u = NULL;
    json_t *per = json_object(); /* tenant -> [first hour index, x, hist...] */
    const char *k;
    json_t *v;
    int rc;

    if (from >= last || (rc = allot_store_usage_list(st, from, last + METER_HOUR, &u, &n))) {
        json_decref(per);
        return from >= last ? 0 : rc;
    }
    double *hist = allot_calloc(n_h + 1, sizeof(*hist));
    for (size_t i = 0; hist && i < n; i++)
        if (!json_object_get(per, u[i].tenant))
            json_object_set_new(per, u[i].tenant, json_true());
    json_object_foreach(per, k, v)
    {
        int64_t first = -1;
        double x = 0, z = 0;

        if (!hist)
            break; /* out of memory: no verdict this pass */
        memset(hist, 0, (n_h + 1) * sizeof(*hist));
        for (size_t i = 0; i < n; i++) {
            if (strcmp(u[i].tenant, k) != 0)
                continue;
            size_t h = (size_t)((u[i].hour - from) / METER_HOUR);
            hist[h] += (double)u[i].gpu_ppm_s / 1e6;
            if (u[i].gpu_ppm_s > 0 && (first < 0 || (int64_t)h < first) && h < n_h)
                first = (int64_t)h;
        }
        x = hist[n_h];
        /* history from the tenant's first hour of use: a new tenant is not an anomaly */
        if (first < 0 || x <= 0 ||
            !anomaly_robust_z(hist + first, n_h - (size_t)first, x, 99.0, &z) ||
            z < (double)s->cfg.anomaly_z)
            continue;
        char key[300], detail[300];
        allot_fmt(key, sizeof(key), "tenant-usage|%s|%lld", k, (long long)last);
        allot_fmt(detail, sizeof(detail),
                  "%.1f GPU-hours in the hour from %lld, robust z-score %.1f over %zu hours",
                  x / 3600.0, (long long)last, z, n_h - (size_t)first);
        anomaly_add(list, fresh, seen, key,
                    json_pack("{s:s,s:s,s:n,s:s,s:f,s:I}", "kind", "tenant-usage", "tenant", k,
                              "job", "detail", detail, "score", z, "since", (json_int_t)last));
    }
    allot_free(hist);
    allot_store_usages_free(u, n);
    json_decref(per);
    return 0;
}

/* Running jobs whose GPU utilisation or memory in the last quarter of
 * anomaly-window differs abruptly from the rest of it. */
static int job_anomalies(struct server *s, struct allot_store *st, int64_t now, json_t *list,
                         json_t *fresh, json_t *seen)
{
    int64_t w = s->cfg.anomaly_window, cut = now * 1000 - w / 4, lo = now * 1000 - w;
    struct allot_store_run *runs = NULL;
    struct allot_store_sample *smp = NULL;
    size_t n_runs = 0, n_smp = 0;
    int rc;

    if (w <= 0)
        return 0;
    if ((rc = allot_store_run_list(st, now, now + 1, &runs, &n_runs)) ||
        (rc = allot_store_sample_list(st, lo, now * 1000 + 60000, &smp, &n_smp))) {
        allot_store_runs_free(runs, n_runs);
        return rc;
    }
    double *a = allot_calloc(n_smp + 1, sizeof(*a) * 4);
    for (size_t i = 0; a && i < n_runs; i++) {
        const struct allot_store_run *r = &runs[i];
        double *ub = a, *ua = a + n_smp + 1, *mb = ua + n_smp + 1, *ma = mb + n_smp + 1;
        size_t nub = 0, nua = 0, nmb = 0, nma = 0;
        double from = 0, to = 0;
        char key[100], detail[200];

        if (r->end || (now - r->start) * 1000 < w)
            continue;
        for (size_t q = 0; q < n_smp; q++) {
            const struct allot_store_sample *p = &smp[q];
            if (p->job_id != r->job_id)
                continue;
            if (p->gpu_util >= 0)
                *(p->at < cut ? &ub[nub++] : &ua[nua++]) = (double)p->gpu_util;
            if (p->gpu_mem_bytes >= 0)
                *(p->at < cut ? &mb[nmb++] : &ma[nma++]) = (double)p->gpu_mem_bytes / 1073741824.0;
        }
        if (anomaly_shift(ub, nub, ua, nua, 40.0, &from, &to)) {
            allot_fmt(key, sizeof(key), "job-util|%lld", (long long)r->job_id);
            allot_fmt(detail, sizeof(detail), "GPU utilisation went from %.0f%% to %.0f%%", from,
                      to);
            anomaly_add(list, fresh, seen, key,
                        json_pack("{s:s,s:s,s:I,s:s,s:f,s:I}", "kind", "job-pattern", "tenant",
                                  r->tenant, "job", (json_int_t)r->job_id, "detail", detail,
                                  "score", to - from, "since", (json_int_t)(cut / 1000)));
        }
        if (anomaly_shift(mb, nmb, ma, nma, 1.0, &from, &to) &&
            (to >= 2 * from || to <= from / 2)) {
            allot_fmt(key, sizeof(key), "job-mem|%lld", (long long)r->job_id);
            allot_fmt(detail, sizeof(detail), "GPU memory went from %.1f GiB to %.1f GiB", from,
                      to);
            anomaly_add(list, fresh, seen, key,
                        json_pack("{s:s,s:s,s:I,s:s,s:f,s:I}", "kind", "job-pattern", "tenant",
                                  r->tenant, "job", (json_int_t)r->job_id, "detail", detail,
                                  "score", to - from, "since", (json_int_t)(cut / 1000)));
        }
    }
    allot_free(a);
    allot_store_runs_free(runs, n_runs);
    allot_free(smp);
    return 0;
}

struct anom_write {
    json_t *fresh;
    int64_t now;
};

static int anom_fn(struct allot_store *st, void *arg)
{
    struct anom_write *w = arg;
    json_t *x;
    size_t i;
    int rc = 0;

    json_array_foreach(w->fresh, i, x)
    {
        char target[300], action[64];
        json_t *job = json_object_get(x, "job");
        if (json_is_integer(job))
            allot_fmt(target, sizeof(target), "job/%lld", (long long)json_integer_value(job));
        else
            allot_fmt(target, sizeof(target), "tenant/%s",
                      json_string_value(json_object_get(x, "tenant")));
        allot_fmt(action, sizeof(action), "anomaly.%s",
                  json_string_value(json_object_get(x, "kind")));
        struct allot_store_audit e = {.time = w->now,
                                      .token_id = 0,
                                      .action = action,
                                      .target = target,
                                      .result =
                                          (char *)json_string_value(json_object_get(x, "detail"))};
        if (!rc)
            rc = allot_store_audit_append(st, &e, NULL);
    }
    return rc;
}

static int meter_anomalies(struct server *s, int64_t now)
{
    struct allot_store *st = srv_reader(s);
    json_t *list = json_array(), *fresh = json_array(), *seen = json_object(), *x;
    size_t i;
    int rc;

    if (!st)
        return ALLOT_EIO;
    if (!mt.anom_told)
        mt.anom_told = json_object();
    rc = tenant_anomalies(s, st, now, list, fresh, seen);
    if (!rc)
        rc = job_anomalies(s, st, now, list, fresh, seen);
    json_array_foreach(fresh, i, x)
        LOG_WARN("meter", "anomaly: %s %s: %s", json_string_value(json_object_get(x, "kind")),
                 json_string_value(json_object_get(x, "tenant")),
                 json_string_value(json_object_get(x, "detail")));
    if (!rc && json_array_size(fresh)) {
        struct anom_write w = {.fresh = fresh, .now = now};
        rc = srv_write(s, anom_fn, &w);
    }
    if (!rc) {
        json_decref(mt.anom_told);
        mt.anom_told = json_incref(seen); /* gone and back: reported again */
        pthread_mutex_lock(&mt.mu);
        json_decref(mt.anom);
        mt.anom = json_incref(list);
        pthread_mutex_unlock(&mt.mu);
    }
    json_decref(list);
    json_decref(fresh);
    json_decref(seen);
    return rc;
}

json_t *meter_anomaly_list(void)
{
    json_t *out;

    pthread_mutex_lock(&mt.mu);
    out = mt.anom ? json_deep_copy(mt.anom) : json_array();
    pthread_mutex_unlock(&mt.mu);
    return out;
}

json_t *meter_idle_jobs(void)
{
    json_t *out;

    pthread_mutex_lock(&mt.mu);
    out = mt.idle ? json_deep_copy(mt.idle) : json_array();
    pthread_mutex_unlock(&mt.mu);
    return out;
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label(FILE *f, const char *v)
{
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

/* Adds x (a number; stolen) to values[key], integers staying integers. */
static void add_to(json_t *values, const char *key, json_t *x)
{
    json_t *cur = json_object_get(values, key);

    if (json_is_integer(cur) && json_is_integer(x))
        json_object_set_new(values, key,
                            json_integer(json_integer_value(cur) + json_integer_value(x)));
    else if (cur)
        json_object_set_new(values, key, json_real(json_number_value(cur) + json_number_value(x)));
    else
        json_object_set(values, key, x);
    json_decref(x);
}

/* Counts the agent's latest count `cur` of one node's VNI and direction
 * into the tenant's total: what it grew by since the last look, or all of
 * it when it went down (the agent restarted, or the tenant's links there
 * went away and came back). So the totals only grow, whatever the nodes'
 * links and the nodes themselves do (caller holds agents_lock). */
static void net_counted(const char *node, json_int_t vni, const char *dir, const char *tenant,
                        json_int_t cur)
{
    char key[400];
    json_int_t last, sum;

    if ((!mt.net_last && !(mt.net_last = json_object())) ||
        (!mt.net_sum && !(mt.net_sum = json_object())))
        return;
    allot_fmt(key, sizeof(key), "%s\x1f%lld\x1f%s", node, (long long)vni, dir);
    last = json_integer_value(json_object_get(mt.net_last, key));
    json_object_set_new(mt.net_last, key, json_integer(cur));
    allot_fmt(key, sizeof(key), "%s\x1f%s", tenant, dir);
    sum = json_integer_value(json_object_get(mt.net_sum, key)) + (cur >= last ? cur - last : cur);
    json_object_set_new(mt.net_sum, key, json_integer(sum));
}

/* One series by tenant: its HELP and TYPE lines and a line per tenant of
 * values (tenant -> number). Steals values. */
static void per_tenant(FILE *f, const char *name, const char *type, const char *help,
                       json_t *values)
{
    const char *k;
    json_t *v;

    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    json_object_foreach(values, k, v)
    {
        fprintf(f, "%s{tenant=\"", name);
        label(f, k);
        if (json_is_integer(v))
            fprintf(f, "\"} %lld\n", (long long)json_integer_value(v));
        else
            fprintf(f, "\"} %.6f\n", json_number_value(v));
    }
    json_decref(values);
}

/* One sample of a per-node gauge: METRIC{node="NODE"} VALUE. */
static void node_sample(FILE *f, const char *metric, const char *node, int64_t v)
{
    fprintf(f, "%s{node=\"", metric);
    label(f, node);
    fprintf(f, "\"} %lld\n", (long long)v);
}

/* GPU `index`'s entry in a heartbeat's health.gpus, found by its index
 * (not by its place in the list), or NULL. */
static json_t *gpu_health(json_t *gpus, json_int_t index)
{
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        json_t *g = json_array_get(gpus, i), *x = json_object_get(g, "index");
        if (json_is_integer(x) && json_integer_value(x) == index)
            return g;
    }
    return NULL;
}

void meter_metrics(struct server *s, FILE *f)
{
    json_t *cost = json_object(), *budget = json_object(), *ratio = json_object();
    json_t *warn = json_object();
    json_t *idle_n = json_object(), *idle_h = json_object();
    const char *k, *m;
    json_t *t, *v;
    size_t ix;

    pthread_mutex_lock(&mt.mu);
    fputs("# HELP allot_tenant_gpu_seconds_total GPU-equivalent seconds allocated this month, by "
          "tenant and GPU model (resets when a month begins).\n"
          "# TYPE allot_tenant_gpu_seconds_total counter\n",
          f);
    json_object_foreach(mt.snap, k, t)
    {
        json_object_foreach(json_object_get(t, "gpu_seconds"), m, v)
        {
            fputs("allot_tenant_gpu_seconds_total{tenant=\"", f);
            label(f, k);
            fputs("\",model=\"", f);
            label(f, m);
            fprintf(f, "\"} %.3f\n", json_real_value(v));
        }
        json_t *c = json_object_get(t, "cost_minor"), *b = json_object_get(t, "budget_minor");
        /* a budget's cost is its tenant's subtree's */
        json_t *bc = json_object_get(t, "budget_cost_minor");
        if (c)
            add_to(cost, k, json_copy(c));
        if (b) {
            add_to(budget, k, json_copy(b));
            add_to(warn, k,
                   json_real((double)json_integer_value(json_object_get(t, "budget_warn_pct")) /
                             100.0));
            add_to(ratio, k,
                   json_real(json_integer_value(b) > 0
                                 ? (double)json_integer_value(bc) / (double)json_integer_value(b)
                                 : 1.0));
        }
    }
    json_array_foreach(mt.idle, ix, t)
    {
        const char *tn = json_string_value(json_object_get(t, "tenant"));
        add_to(idle_n, tn, json_integer(1));
        add_to(idle_h, tn, json_real(json_real_value(json_object_get(t, "wasted_gpu_hours"))));
    }
    pthread_mutex_unlock(&mt.mu);
    /* a gauge: it restarts when a month begins, and moves down as well as
     * up when this month's prices change */
    per_tenant(f, "allot_tenant_month_cost_minor", "gauge",
               "What the tenant's usage this month costs so far, in minor units of the price "
               "book's currency.",
               cost);
    per_tenant(f, "allot_tenant_budget_minor", "gauge", "The tenant's monthly budget.", budget);
    per_tenant(f, "allot_tenant_budget_used_ratio", "gauge",
               "This month's cost over the monthly budget.", ratio);
    per_tenant(f, "allot_tenant_budget_warn_ratio", "gauge",
               "The part of the monthly budget at which the tenant is warned (its warn_pct).",
               warn);
    per_tenant(f, "allot_idle_jobs", "gauge",
               "Running jobs holding GPUs they have not used for their idle window, by tenant.",
               idle_n);
    per_tenant(f, "allot_idle_gpu_hours", "gauge",
               "GPU-hours the idle jobs have held since they went idle, by tenant.", idle_h);

    json_t *anom = meter_anomaly_list(), *ax, *acount = json_object();
    fputs("# HELP allot_anomalies Anomalies seen at the last metering pass, by kind and tenant.\n"
          "# TYPE allot_anomalies gauge\n",
          f);
    json_array_foreach(anom, ix, ax)
    {
        char key[400];
        allot_fmt(key, sizeof(key), "%s\x1f%s", json_string_value(json_object_get(ax, "kind")),
                  json_string_value(json_object_get(ax, "tenant")));
        add_to(acount, key, json_integer(1));
    }
    json_object_foreach(acount, k, ax)
    {
        const char *sep = strchr(k, '\x1f');
        fprintf(f, "allot_anomalies{kind=\"%.*s\",tenant=\"", (int)(sep - k), k);
        label(f, sep + 1);
        fprintf(f, "\"} %lld\n", (long long)json_integer_value(ax));
    }
    json_decref(acount);
    json_decref(anom);

    /* per tenant network: the traffic its agents count (overlay and egress) */
    struct allot_store_net *nets = NULL;
    size_t n_nets = 0;
    json_t *rx = json_object(), *tx = json_object();
    if (srv_reader(s))
        allot_store_net_list(srv_reader(s), &nets, &n_nets);
    pthread_mutex_lock(&s->agents_lock);
    json_object_foreach(s->agents, k, t)
    {
        size_t i;
        json_array_foreach(json_object_get(t, "net"), i, v)
        {
            json_int_t vni = json_integer_value(json_object_get(v, "vni"));
            for (size_t q = 0; q < n_nets; q++)
                if (nets[q].vni == vni) {
                    net_counted(k, vni, "rx", nets[q].tenant,
                                json_integer_value(json_object_get(v, "rx_bytes")));
                    net_counted(k, vni, "tx", nets[q].tenant,
                                json_integer_value(json_object_get(v, "tx_bytes")));
                }
        }
    }
    /* every tenant counted since allotd started, also those whose nodes or
     * links are gone: a counter does not go down */
    json_object_foreach(mt.net_sum, k, v)
    {
        const char *sep = strrchr(k, '\x1f');
        char tenant[300];

        if (!sep || (size_t)(sep - k) >= sizeof(tenant))
            continue;
        memcpy(tenant, k, (size_t)(sep - k));
        tenant[sep - k] = 0;
        add_to(strcmp(sep + 1, "rx") == 0 ? rx : tx, tenant, json_copy(v));
    }
    pthread_mutex_unlock(&s->agents_lock);
    allot_store_nets_free(nets, n_nets);
    per_tenant(f, "allot_tenant_network_receive_bytes_total", "counter",
               "Bytes the tenant's network received on its nodes (overlay and egress), as the "
               "agents count them.",
               rx);
    per_tenant(f, "allot_tenant_network_transmit_bytes_total", "counter",
               "Bytes the tenant's network sent from its nodes (overlay and egress), as the "
               "agents count them.",
               tx);

    /* per node: its state (1 for the one it is in) and whether a GPU fences it */
    struct allot_store_node *nodes = NULL;
    size_t n_nodes = 0;
    if (srv_reader(s) && allot_store_node_list(srv_reader(s), &nodes, &n_nodes) == 0) {
        fputs("# HELP allot_node_state A node's state (ready, cordoned, draining, drained, lost): "
              "1 for the state it is in.\n# TYPE allot_node_state gauge\n",
              f);
        for (size_t i = 0; i < n_nodes; i++) {
            fputs("allot_node_state{node=\"", f);
            label(f, nodes[i].name);
            fprintf(f, "\",state=\"%s\"} 1\n", srv_node_state(s, &nodes[i]));
        }
        fputs("# HELP allot_node_fenced 1 when an unhealthy GPU keeps new work off the node.\n"
              "# TYPE allot_node_fenced gauge\n",
              f);
        pthread_mutex_lock(&s->agents_lock);
        for (size_t i = 0; i < n_nodes; i++)
            node_sample(f, "allot_node_fenced", nodes[i].name,
                        json_is_string(
                            json_object_get(json_object_get(s->agents, nodes[i].name), "fenced")));
        pthread_mutex_unlock(&s->agents_lock);
        /* how long since each node was heard from, and what its lease has
         * left: a node going quiet shows before it is counted lost */
        int64_t now = srv_now();
        fputs("# HELP allot_node_heartbeat_age_seconds Seconds since the node's last heartbeat "
              "(-1: never).\n# TYPE allot_node_heartbeat_age_seconds gauge\n",
              f);
        for (size_t i = 0; i < n_nodes; i++)
            node_sample(f, "allot_node_heartbeat_age_seconds", nodes[i].name,
                        nodes[i].last_heartbeat > 0 ? now - nodes[i].last_heartbeat : -1);
        fputs("# HELP allot_node_lease_seconds Seconds left on the node's lease (0 once it ran "
              "out).\n# TYPE allot_node_lease_seconds gauge\n",
              f);
        for (size_t i = 0; i < n_nodes; i++)
            node_sample(f, "allot_node_lease_seconds", nodes[i].name,
                        nodes[i].lease_expiry > now ? nodes[i].lease_expiry - now : 0);
    }
    allot_store_nodes_free(nodes, n_nodes);

    /* per GPU: health, and the agents' latest readings under DCGM-exporter names */
    static const struct {
        const char *name, *help, *field;
    } dcgm[] = {
        {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util_gpu"},
        {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "mem_used_mib"},
        {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c"},
        {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
         "energy_mj"},
    };
    pthread_mutex_lock(&s->agents_lock);
    fputs("# HELP allot_gpu_health GPU health as the node's agent reports it: 0 healthy, 1 "
          "degraded, 2 unhealthy.\n# TYPE allot_gpu_health gauge\n",
          f);
    json_object_foreach(s->agents, k, t)
    {
        size_t i;
        json_array_foreach(json_object_get(json_object_get(t, "health"), "gpus"), i, v)
        {
            const char *h = json_string_value(json_object_get(v, "health"));
            fprintf(f, "allot_gpu_health{node=\"");
            label(f, k);
            fprintf(f, "\",gpu=\"%lld\",uuid=\"",
                    (long long)json_integer_value(json_object_get(v, "index")));
            label(f, json_string_value(json_object_get(v, "uuid")));
            fprintf(f, "\",model=\"");
            label(f, json_string_value(json_object_get(v, "model")));
            fprintf(f, "\"} %d\n",
                    !h || !strcmp(h, "healthy") ? 0
                    : !strcmp(h, "degraded")    ? 1
                                                : 2);
        }
    }
    for (size_t d = 0; d < sizeof(dcgm) / sizeof(dcgm[0]); d++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", dcgm[d].name, dcgm[d].help, dcgm[d].name,
                d == 3 ? "counter" : "gauge");
        json_object_foreach(s->agents, k, t)
        {
            json_t *health = json_object_get(json_object_get(t, "health"), "gpus");
            size_t i;
            json_array_foreach(json_object_get(t, "gpus"), i, v)
            {
                json_int_t gi = json_integer_value(json_object_get(v, "index"));
                json_t *hg = gpu_health(health, gi), *x = json_object_get(v, dcgm[d].field);
                if (!json_is_integer(x))
                    continue;
                fprintf(f, "%s{gpu=\"%lld\",UUID=\"", dcgm[d].name, (long long)gi);
                label(f, json_string_value(json_object_get(hg, "uuid")));
                fputs("\",Hostname=\"", f);
                label(f, k);
                fputs("\",modelName=\"", f);
                label(f, json_string_value(json_object_get(hg, "model")));
                fprintf(f, "\"} %lld\n", (long long)json_integer_value(x));
            }
        }
    }
    pthread_mutex_unlock(&s->agents_lock);
}

static void *meter_main(void *arg)
{
    struct server *s = arg;

    pthread_mutex_lock(&mt.mu);
    while (!mt.stop) {
        struct timespec until;
        /* the first pass as soon as the scheduler is ready (a standby that
         * took over has its usage as of its own first pass) */
        bool ready = atomic_load(&s->ready);
        int64_t wait = ready || s->cfg.meter_interval < 200 ? s->cfg.meter_interval : 200;

        pthread_mutex_unlock(&mt.mu);
        if (ready) {
            int64_t now = srv_now();
            int rc = meter_rollup(s, now);
            if (rc)
                LOG_WARN("meter", "roll-up failed: %s", allot_strerror(rc));
            else if ((rc = meter_snapshot(s, now)))
                LOG_WARN("meter", "this month's figures: %s", allot_strerror(rc));
            if ((rc = meter_idle(s, now)))
                LOG_WARN("meter", "idle detection: %s", allot_strerror(rc));
            if ((rc = meter_anomalies(s, now)))
                LOG_WARN("meter", "anomaly detection: %s", allot_strerror(rc));
        }
        pthread_mutex_lock(&mt.mu);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += wait / 1000;
        until.tv_nsec += (wait % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        if (!mt.stop)
            pthread_cond_timedwait(&mt.cv, &mt.mu, &until);
    }
    pthread_mutex_unlock(&mt.mu);
    return NULL;
}

/* "500ms", "30s", "5m", "4h", "1d" or plain milliseconds; -1 when bad. */
static int64_t duration_ms(const char *t, size_t n)
{
    static const struct {
        const char *u;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}, {"", 1}};
    int64_t v = 0;
    size_t i = 0;

    while (i < n && t[i] >= '0' && t[i] <= '9' && v < INT64_MAX / 100)
        v = v * 10 + (t[i++] - '0');
    if (i == 0)
        return -1;
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++)
        if (n - i == strlen(units[u].u) && !strncmp(t + i, units[u].u, n - i))
            return v <= INT64_MAX / units[u].ms ? v * units[u].ms : -1;
    return -1;
}

/* Parses idle-class-windows into mt.windows. */
static bool parse_windows(const char *spec, char *err, size_t errlen)
{
    json_decref(mt.windows);
    mt.windows = json_object();
    for (const char *p = spec ? spec : ""; *p;) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        int64_t ms = eq ? duration_ms(eq + 1, (size_t)(end - eq - 1)) : -1;

        if (!eq || eq == p || ms < 0 || eq - p > 63) {
            allot_fmt(err, errlen,
                      "idle-class-windows: want CLASS=DURATION[,CLASS=DURATION...] "
                      "(e.g. notebook=4h,inference=0), got \"%.*s\"",
                      (int)(end - p), p);
            return false;
        }
        char cls[64];
        allot_fmt(cls, sizeof(cls), "%.*s", (int)(eq - p), p);
        json_object_set_new(mt.windows, cls, json_integer(ms));
        p = comma ? comma + 1 : end;
    }
    return true;
}

bool meter_start(struct server *s, char *err, size_t errlen)
{
    if (!parse_windows(s->cfg.idle_class_windows, err, errlen))
        return false;
    if (!mt.told)
        mt.told = json_object();
    atomic_store(&s->meter_dirty, INT64_MAX);
    mt.stop = false;
    if (pthread_create(&mt.thread, NULL, meter_main, s) != 0) {
        allot_fmt(err, errlen, "cannot start the metering thread");
        return false;
    }
    mt.running = true;
    return true;
}

void meter_net_free(void)
{
    json_decref(mt.net_last);
    json_decref(mt.net_sum);
    mt.net_last = mt.net_sum = NULL;
}

void meter_stop(struct server *s)
{
    (void)s;
    if (!mt.running)
        return;
    pthread_mutex_lock(&mt.mu);
    mt.stop = true;
    pthread_cond_signal(&mt.cv);
    pthread_mutex_unlock(&mt.mu);
    pthread_join(mt.thread, NULL);
    mt.running = false;
    json_decref(mt.snap);
    json_decref(mt.idle);
    json_decref(mt.windows);
    json_decref(mt.told);
    json_decref(mt.anom);
    json_decref(mt.anom_told);
    json_decref(mt.held);
    mt.snap = mt.idle = mt.windows = mt.told = mt.anom = mt.anom_told = mt.held = NULL;
}

/* ---- queries ---- */

int meter_query(struct req *r, int64_t from, int64_t to, const char *tenant, bool per_job,
                struct meter_acc *out, struct meter_acc *jobs)
{
    struct allot_store *st = api_reader(r);
    struct allot_store_run *runs = NULL;
    size_t n_runs = 0;
    int rc;

    meter_acc_init(out, per_job);
    if (jobs)
        meter_acc_init(jobs, true);
    if (!st)
        return ALLOT_EIO;
    if ((rc = allot_store_run_list(st, from, to, &runs, &n_runs)))
        return rc;
    /* only what the caller may see, in the subtree asked for */
    size_t keep = 0;
    for (size_t i = 0; i < n_runs; i++) {
        if (auth_sees_tenant(&r->who, runs[i].tenant) && auth_in_scope(tenant, runs[i].tenant)) {
            struct allot_store_run tmp = runs[keep];
            runs[keep++] = runs[i];
            runs[i] = tmp;
        }
    }
    if (per_job) {
        struct allot_store_sample *smp = NULL;
        size_t n_smp = 0;

        /* a sample after `to` speaks for time before it too (meter_collect) */
        rc = allot_store_sample_list(st, (from - METER_SAMPLE_GAP / 1000) * 1000,
                                     to * 1000 + METER_SAMPLE_GAP, &smp, &n_smp);
        if (rc == 0)
            rc = meter_collect(r->srv->cat, runs, keep, smp, n_smp, from, to, srv_now(), out);
        allot_free(smp);
    } else {
        /* the roll-ups for the amounts; jobs are counted from the runs */
        struct allot_store_usage *u = NULL;
        size_t n_u = 0;

        rc = allot_store_usage_list(st, meter_floor_hour(from), to, &u, &n_u);
        for (size_t i = 0; rc == 0 && i < n_u; i++) {
            if (!auth_sees_tenant(&r->who, u[i].tenant) || !auth_in_scope(tenant, u[i].tenant))
                continue;
            struct allot_store_usage *o = meter_acc_row(out, u[i].hour, u[i].tenant, u[i].user,
                                                        u[i].model, u[i].item, u[i].borrowed, 0);
            if (!o) {
                rc = ALLOT_ENOMEM;
                break;
            }
            /* a row rolled up before the store kept gpu_bill_ppm_s (-1)
             * makes the merged row -1: billed by its mean, as it was */
            if (u[i].gpu_bill_ppm_s < 0 || o->gpu_bill_ppm_s < 0)
                o->gpu_bill_ppm_s = -1;
            else
                o->gpu_bill_ppm_s += u[i].gpu_bill_ppm_s;
            o->gpu_ppm_s += u[i].gpu_ppm_s;
            o->cpu_milli_s += u[i].cpu_milli_s;
            o->mem_mib_s += u[i].mem_mib_s;
            o->util_pct_ms += u[i].util_pct_ms;
            o->util_ms += u[i].util_ms;
            o->cpu_used_ms += u[i].cpu_used_ms;
            if (u[i].gpu_mem_peak > o->gpu_mem_peak)
                o->gpu_mem_peak = u[i].gpu_mem_peak;
            if (u[i].energy_mj >= 0)
                o->energy_mj = (o->energy_mj < 0 ? 0 : o->energy_mj) + u[i].energy_mj;
        }
        allot_store_usages_free(u, n_u);
        if (rc == 0 && jobs)
            rc = meter_collect_runs(r->srv->cat, runs, keep, from, to, srv_now(), jobs);
    }
    allot_store_runs_free(runs, n_runs);
    return rc;
}
