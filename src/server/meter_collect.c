/*
 * Metering's accumulation (meter.h): a pass's runs and samples into usage
 * rows per hour, tenant, user, GPU model, item and reserved/borrowed (and
 * job, for per-job reports). Pure: no store, no clock, no locks; the
 * roll-up thread (meter.c) and the usage queries call it with what they
 * read. The rules are docs/metering.md's:
 *
 * - allocated use: each run's placement, task by task, times the seconds
 *   the run overlaps each hour (collect_runs);
 * - measured use: consecutive samples of one task within one run of its
 *   job, a sample speaking for the time since the previous one, up to
 *   three of its agent's sample intervals; cumulative counters (CPU time,
 *   GPU energy) differenced, a counter that went back counting nothing
 *   (collect_samples);
 * - what `bill: measured` bills: per row, job and task (struct meter_bill)
 *   the GPU time allocated and the utilisation measured, relative to what
 *   the task holds; each task's measured time scaled by its own mean and
 *   the time without a figure whole, summed into the row (bill_rows).
 */
#include "meter.h"

#include "allot/common.h"

#include <stdlib.h>
#include <string.h>

#define PPM 1000000

/* One job task's part of one row: the GPU time it held there and the
 * utilisation measured of it, relative to what it holds. */
struct meter_bill {
    size_t row;           /* index into the acc's rows */
    int64_t alloc_ppm_s;  /* GPU-equivalent seconds x 1e6 allocated */
    int64_t alloc_ms;     /* milliseconds it held them */
    int64_t util_ms;      /* milliseconds with a utilisation figure */
    int64_t share_pct_ms; /* utilisation of its share (percent, at most 100) x ms */
};

void meter_acc_init(struct meter_acc *a, bool per_job)
{
    memset(a, 0, sizeof(*a));
    a->per_job = per_job;
    a->index = json_object();
    a->seen = json_object();
    a->bill_index = json_object();
}

void meter_acc_free(struct meter_acc *a)
{
    allot_store_usages_free(a->rows, a->n);
    allot_free(a->job);
    allot_free(a->jobs);
    json_decref(a->index);
    json_decref(a->seen);
    json_decref(a->bill_index);
    allot_free(a->bills);
    memset(a, 0, sizeof(*a));
}

/* The part of row u held by task `task` of job `job`, created empty when
 * new; NULL when out of memory. */
static struct meter_bill *acc_bill(struct meter_acc *a, const struct allot_store_usage *u,
                                   int64_t job, int task)
{
    size_t row = (size_t)(u - a->rows);
    char key[96];
    json_t *ix;

    if (!a->bill_index)
        return NULL;
    allot_fmt(key, sizeof(key), "%zu|%lld|%d", row, (long long)job, task);
    if ((ix = json_object_get(a->bill_index, key)))
        return &a->bills[json_integer_value(ix)];
    if (allot_grow((void **)&a->bills, &a->cap_bills, a->n_bills + 1, sizeof(*a->bills)) < 0 ||
        json_object_set_new(a->bill_index, key, json_integer((json_int_t)a->n_bills)) < 0)
        return NULL;
    a->bills[a->n_bills] = (struct meter_bill){.row = row};
    return &a->bills[a->n_bills++];
}

/*
 * A sample's utilisation (percent) x dt of what its task holds. The agent
 * measures a fraction of a shared GPU through its shim: the share of wall
 * time its kernels kept the GPU busy, a share of the whole GPU (a job
 * using all of a 250-milli fraction reads 25 %); so a fraction's is taken
 * over its compute share (gpu_milli per GPU; a fraction without one, over
 * its GPU-equivalents), at most all of it (a soft share may use more).
 * Whole GPUs (NVML's figure of GPUs the task has to itself) and MIG
 * instances count as measured.
 */
static int64_t util_of_share(json_t *task, const char *item, int64_t ppm, int64_t util, int64_t dt)
{
    int64_t n_gpus = (int64_t)json_array_size(json_object_get(task, "gpus"));
    int64_t milli = json_integer_value(json_object_get(task, "gpu_milli"));
    int64_t share; /* per mille of one GPU */

    if (strcmp(item, "fraction") != 0)
        return util * dt;
    share = milli > 0 && milli < 1000 ? milli * (n_gpus > 0 ? n_gpus : 1) : ppm / 1000;
    if (share <= 0)
        return util * dt;
    /* util / (share / 1000), capped at 100 %: exact to the millisecond */
    return util * 1000 * dt / share < 100 * dt ? util * 1000 * dt / share : 100 * dt;
}

/* Sets every row's gpu_bill_ppm_s from its job tasks' parts: of each
 * part's allocated time, the measured share x its mean utilisation of its
 * share and the rest (no utilisation figure: no samples, a gap, or -1)
 * whole, rounded half up. */
static void bill_rows(struct meter_acc *a)
{
    for (size_t i = 0; i < a->n; i++)
        a->rows[i].gpu_bill_ppm_s = 0;
    for (size_t i = 0; i < a->n_bills; i++) {
        const struct meter_bill *b = &a->bills[i];
        int64_t billed = b->alloc_ppm_s;

        if (b->util_ms > 0 && b->alloc_ms > 0) {
            /* measured: at most the time held (samples at the hour's and
             * the run's edges are spread by their own clocks) */
            int64_t meas = b->util_ms < b->alloc_ms ? b->util_ms : b->alloc_ms;
            /* alloc x (meas x mean + (held - meas) x 100 %) / (held x 100 %),
             * mean = share_pct_ms / util_ms */
            __int128 num = (__int128)b->share_pct_ms * meas +
                           (__int128)100 * (b->alloc_ms - meas) * b->util_ms;
            __int128 den = (__int128)100 * b->alloc_ms * b->util_ms;
            billed = (int64_t)(((__int128)b->alloc_ppm_s * num * 2 + den) / (den * 2));
        }
        if (!ALLOT_ALWAYS(billed >= 0 && billed <= b->alloc_ppm_s))
            billed = b->alloc_ppm_s;
        a->rows[b->row].gpu_bill_ppm_s += billed;
    }
}

struct allot_store_usage *meter_acc_row(struct meter_acc *a, int64_t hour, const char *tenant,
                                        const char *user, const char *model, const char *item,
                                        bool borrowed, int64_t job)
{
    char key[1024];
    json_t *ix;

    if (!a->index || !a->seen)
        return NULL;
    allot_fmt(key, sizeof(key), "%lld|%s|%s|%s|%s|%d|%lld", (long long)hour, tenant, user, model,
              item, borrowed ? 1 : 0, (long long)(a->per_job ? job : 0));
    if ((ix = json_object_get(a->index, key)))
        return &a->rows[json_integer_value(ix)];
    if (allot_grow((void **)&a->rows, &a->cap, a->n + 1, sizeof(*a->rows)) < 0)
        return NULL;
    /* the per-row arrays follow rows' capacity */
    int64_t *j1 = allot_realloc(a->job, a->cap * sizeof(*a->job));
    if (!j1)
        return NULL;
    a->job = j1;
    int64_t *j2 = allot_realloc(a->jobs, a->cap * sizeof(*a->jobs));
    if (!j2)
        return NULL;
    a->jobs = j2;
    struct allot_store_usage *u = &a->rows[a->n];
    memset(u, 0, sizeof(*u));
    u->hour = hour;
    u->borrowed = borrowed;
    u->gpu_mem_peak = -1;
    u->energy_mj = -1;
    u->tenant = allot_strdup(tenant);
    u->user = allot_strdup(user);
    u->model = allot_strdup(model);
    u->item = allot_strdup(item);
    if (!u->tenant || !u->user || !u->model || !u->item ||
        json_object_set_new(a->index, key, json_integer((json_int_t)a->n)) < 0) {
        allot_free(u->tenant);
        allot_free(u->user);
        allot_free(u->model);
        allot_free(u->item);
        return NULL;
    }
    a->job[a->n] = a->per_job ? job : 0;
    a->jobs[a->n] = 0;
    a->n++;
    return u;
}

/* Counts job once for the row u. */
static void acc_count_job(struct meter_acc *a, struct allot_store_usage *u, int64_t job)
{
    char key[64];
    size_t i = (size_t)(u - a->rows);

    allot_fmt(key, sizeof(key), "%zu|%lld", i, (long long)job);
    if (json_object_get(a->seen, key))
        return;
    json_object_set_new(a->seen, key, json_true());
    a->jobs[i]++;
}

void meter_task_share(const struct allot_catalog *cat, json_t *task, int64_t *ppm, char *item,
                      size_t itemlen, char *model, size_t modellen)
{
    const char *m = json_string_value(json_object_get(task, "model"));
    const char *prof = json_string_value(json_object_get(task, "mig_profile"));
    size_t n_gpus = json_array_size(json_object_get(task, "gpus"));
    json_int_t milli = json_integer_value(json_object_get(task, "gpu_milli"));
    json_int_t gmem = json_integer_value(json_object_get(task, "gpu_memory"));
    int mi = m ? allot_catalog_find_model(cat, m) : -1;
    const struct allot_gpu_model *gm = mi >= 0 ? &cat->models[mi] : NULL;

    allot_strlcpy(model, gm ? gm->name : m ? m : "", modellen);
    *ppm = 0;
    if (n_gpus == 0) {
        allot_strlcpy(item, "cpu", itemlen);
        allot_strlcpy(model, "", modellen);
    } else if (prof) {
        allot_fmt(item, itemlen, "mig:%s", prof);
        for (int p = 0; gm && p < gm->n_profiles; p++)
            if (!strcmp(gm->profiles[p].name, prof) && gm->compute_slices > 0)
                *ppm = (int64_t)gm->profiles[p].compute_slices * PPM / gm->compute_slices;
    } else if (milli >= 1000 || (milli <= 0 && gmem <= 0)) {
        allot_strlcpy(item, "gpu", itemlen);
        *ppm = (int64_t)n_gpus * PPM;
    } else {
        int64_t by_sm = milli > 0 ? (int64_t)milli * (PPM / 1000) : 0;
        int64_t by_mem = gm && gm->memory_mib > 0 && gmem > 0 ? gmem * PPM / gm->memory_mib : 0;

        allot_strlcpy(item, "fraction", itemlen);
        *ppm = (by_sm > by_mem ? by_sm : by_mem) * (int64_t)n_gpus;
        if (*ppm > (int64_t)n_gpus * PPM)
            *ppm = (int64_t)n_gpus * PPM;
    }
}

/* One run in an index of the pass's runs sorted by job, then start
 * (runs_index); a job's runs are a slice of it (job_runs). */
struct run_key {
    int64_t job, start;
    const struct allot_store_run *r;
};

struct job_runs {
    const struct run_key *v;
    size_t n;
};

static int cmp_run_key(const void *a, const void *b)
{
    const struct run_key *x = a, *y = b;

    if (x->job != y->job)
        return x->job < y->job ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

/* runs[0..n) by job, then start: a new array, or NULL when out of memory. */
static struct run_key *runs_index(const struct allot_store_run *runs, size_t n)
{
    struct run_key *idx = allot_malloc((n ? n : 1) * sizeof(*idx));

    for (size_t i = 0; idx && i < n; i++)
        idx[i] = (struct run_key){runs[i].job_id, runs[i].start, &runs[i]};
    if (idx && n > 1)
        qsort(idx, n, sizeof(*idx), cmp_run_key);
    return idx;
}

/* The runs of job `job` in idx (runs_index's order): a binary search. */
static struct job_runs job_runs(const struct run_key *idx, size_t n, int64_t job)
{
    size_t lo = 0, hi = n, end;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idx[mid].job < job)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (end = lo; end < n && idx[end].job == job; end++)
        ;
    return (struct job_runs){idx + lo, end - lo};
}

/* The run of j's that covers time t (seconds), or NULL. */
static const struct allot_store_run *run_at(struct job_runs j, int64_t t, int64_t now)
{
    for (size_t i = 0; i < j.n; i++) {
        const struct allot_store_run *r = j.v[i].r;
        if (r->start <= t && t <= (r->end ? r->end : now))
            return r;
    }
    return NULL;
}

/* Whether t (seconds) is the second in which one of j's runs ended and
 * another began. Runs are whole seconds, so a sample taken in that second
 * may be either run's. */
static bool run_handover(struct job_runs j, int64_t t)
{
    int ended = 0, began = 0, both = 0;

    for (size_t i = 0; i < j.n; i++) {
        const struct allot_store_run *r = j.v[i].r;
        ended += r->end == t;
        began += r->start == t;
        both += r->end == t && r->start == t;
    }
    return ended > 0 && began > 0 && ended + began - both >= 2;
}

int meter_collect_runs(const struct allot_catalog *cat, const struct allot_store_run *runs,
                       size_t n_runs, int64_t from, int64_t to, int64_t now, struct meter_acc *a)
{
    for (size_t i = 0; i < n_runs; i++) {
        const struct allot_store_run *r = &runs[i];
        int64_t s = r->start > from ? r->start : from;
        int64_t e = r->end ? r->end : now;
        json_t *pl = json_loads(r->placement ? r->placement : "{}", 0, NULL);
        json_t *tasks = json_object_get(pl, "tasks"), *t;
        bool borrowed = json_is_true(json_object_get(pl, "borrowed"));
        size_t k;

        if (e > to)
            e = to;
        for (int64_t h = meter_floor_hour(s); h < e; h += METER_HOUR) {
            int64_t lo = s > h ? s : h, hi = e < h + METER_HOUR ? e : h + METER_HOUR;

            if (hi <= lo)
                continue;
            json_array_foreach(tasks, k, t)
            {
                char item[64], model[64];
                int64_t ppm;
                struct allot_store_usage *u;

                meter_task_share(cat, t, &ppm, item, sizeof(item), model, sizeof(model));
                u = meter_acc_row(a, h, r->tenant, r->user, model, item, borrowed, r->job_id);
                if (!u) {
                    json_decref(pl);
                    return ALLOT_ENOMEM;
                }
                u->gpu_ppm_s += ppm * (hi - lo);
                u->cpu_milli_s += json_integer_value(json_object_get(t, "cpu_milli")) * (hi - lo);
                u->mem_mib_s += json_integer_value(json_object_get(t, "memory")) * (hi - lo);
                acc_count_job(a, u, r->job_id);
                struct meter_bill *b = ppm > 0 ? acc_bill(a, u, r->job_id, (int)k) : NULL;
                if (ppm > 0 && !b) {
                    json_decref(pl);
                    return ALLOT_ENOMEM;
                }
                if (b) {
                    b->alloc_ppm_s += ppm * (hi - lo);
                    b->alloc_ms += (hi - lo) * 1000;
                }
            }
        }
        json_decref(pl);
    }
    return 0;
}

/* The part of the interval [lo0, hi0) (milliseconds) that lies in hour h
 * (seconds): its start into *lo; its length returned (0 or less: none). */
static int64_t hour_part(int64_t lo0, int64_t hi0, int64_t h, int64_t *lo)
{
    int64_t hi = hi0 < (h + METER_HOUR) * 1000 ? hi0 : (h + METER_HOUR) * 1000;

    *lo = lo0 > h * 1000 ? lo0 : h * 1000;
    return hi - *lo;
}

/* The share of a counter's growth `total` over an interval of dt ms that
 * falls on its piece of `part` ms starting `done` ms in: the pieces of one
 * interval add up to `total` exactly. */
static int64_t growth_part(int64_t total, int64_t done, int64_t part, int64_t dt)
{
    /* in 128 bits: a counter's growth times a span in ms passes 2^63 for
     * large counters (an absurd one is still counted, not undefined) */
    __int128 a = (__int128)total * (done + part) / dt, b = (__int128)total * done / dt;
    __int128 d = a - b;

    return d > INT64_MAX ? INT64_MAX : d < INT64_MIN ? INT64_MIN : (int64_t)d;
}

/* The CPU a run's task used before its first sample: the task's cgroup
 * counts from 0 at its start, so x's counter (the first sample of run r)
 * is that time's use; spread over the hours of (start, x] that meet
 * [from, to). Energy is the GPU's own counter (not 0 at the start) and has
 * no such head. */
static int head_cpu(const struct allot_catalog *cat, const struct allot_store_run *r,
                    const struct allot_store_sample *x, int64_t from, int64_t to,
                    struct meter_acc *a)
{
    int64_t lo0 = r->start * 1000, dt = x->at - lo0, cpu = x->cpu_ns / 1000000, ppm;
    json_t *pl = json_loads(r->placement ? r->placement : "{}", 0, NULL);
    json_t *task = json_array_get(json_object_get(pl, "tasks"), (size_t)x->task);
    char item[64], model[64];
    int rc = 0;

    if (!task || dt <= 0 || cpu <= 0) {
        json_decref(pl);
        return 0;
    }
    meter_task_share(cat, task, &ppm, item, sizeof(item), model, sizeof(model));
    for (int64_t h = meter_floor_hour(r->start); h * 1000 < x->at; h += METER_HOUR) {
        int64_t lo, part = hour_part(lo0, x->at, h, &lo);
        struct allot_store_usage *u;

        if (part <= 0 || h < from || h >= to)
            continue;
        u = meter_acc_row(a, h, r->tenant, r->user, model, item,
                          json_is_true(json_object_get(pl, "borrowed")), r->job_id);
        if (!u) {
            rc = ALLOT_ENOMEM;
            break;
        }
        u->cpu_used_ms += growth_part(cpu, lo - lo0, part, dt);
    }
    json_decref(pl);
    return rc;
}

static int collect_samples(const struct allot_catalog *cat, const struct allot_store_run *runs,
                           size_t n_runs, const struct allot_store_sample *smp, size_t n_smp,
                           int64_t from, int64_t to, int64_t now, struct meter_acc *a)
{
    /* a sample's runs by binary search, not a scan of every run */
    struct run_key *idx = runs_index(runs, n_runs);
    int rc = 0;

    if (!idx)
        return ALLOT_ENOMEM;
    /* each run's first sample: the CPU its task used before it */
    for (size_t i = 0; i < n_smp && rc == 0; i++) {
        const struct allot_store_sample *x = &smp[i], *p = i ? &smp[i - 1] : NULL;
        int64_t gap = METER_SAMPLE_SPAN(x);
        struct job_runs jr = job_runs(idx, n_runs, x->job_id);
        const struct allot_store_run *r = x->cpu_ns > 0 ? run_at(jr, x->at / 1000, now) : NULL;

        /* the first of its run: within a gap of the run's start (so an
         * earlier one of the run would be in the list too), and none of the
         * run before it */
        if (!r || x->at <= r->start * 1000 || x->at - r->start * 1000 > gap ||
            run_handover(jr, x->at / 1000) ||
            (p && p->job_id == x->job_id && p->task == x->task && p->at > r->start * 1000))
            continue;
        rc = head_cpu(cat, r, x, from, to, a);
    }
    for (size_t i = 1; i < n_smp && rc == 0; i++) {
        const struct allot_store_sample *p = &smp[i - 1], *x = &smp[i];
        int64_t t = x->at / 1000, dt = x->at - p->at;
        const struct allot_store_run *r;
        struct job_runs jr;

        /* a sample speaks for the time since the previous one, up to three of
         * its agent's sample intervals (a longer gap was not measured); the
         * interval (p, x] is spread over the hours it covers, and counted
         * where it meets [from, to) */
        int64_t gap = METER_SAMPLE_SPAN(x);
        if (p->job_id != x->job_id || p->task != x->task || dt <= 0 || dt > gap ||
            x->at <= from * 1000 || p->at >= to * 1000)
            continue;
        jr = job_runs(idx, n_runs, x->job_id); /* p's too: the same job */
        if (!(r = run_at(jr, t, now)))
            continue; /* a sample outside every run: nothing was allocated */
        /* cumulative counters are the node's and its GPUs': a job that ran
         * again (maybe elsewhere) starts them afresh, and the time between
         * its runs was not its own; so both samples must be of one run */
        if (run_at(jr, p->at / 1000, now) != r || run_handover(jr, t) ||
            run_handover(jr, p->at / 1000))
            continue;
        json_t *pl = json_loads(r->placement ? r->placement : "{}", 0, NULL);
        json_t *task = json_array_get(json_object_get(pl, "tasks"), (size_t)x->task);
        char item[64], model[64];
        int64_t ppm, cpu = 0, energy = -1;

        if (!task) {
            json_decref(pl);
            continue;
        }
        meter_task_share(cat, task, &ppm, item, sizeof(item), model, sizeof(model));
        if (x->cpu_ns >= 0 && p->cpu_ns >= 0 && x->cpu_ns > p->cpu_ns)
            cpu = (x->cpu_ns - p->cpu_ns) / 1000000;
        if (x->energy_mj >= 0 && p->energy_mj >= 0 && x->energy_mj >= p->energy_mj)
            energy = x->energy_mj - p->energy_mj;
        for (int64_t h = meter_floor_hour(p->at / 1000); h * 1000 < x->at; h += METER_HOUR) {
            int64_t lo, part = hour_part(p->at, x->at, h, &lo), done = lo - p->at;
            struct allot_store_usage *u;

            if (part <= 0 || h < from || h >= to)
                continue;
            u = meter_acc_row(a, h, r->tenant, r->user, model, item,
                              json_is_true(json_object_get(pl, "borrowed")), r->job_id);
            struct meter_bill *b =
                u && ppm > 0 && x->gpu_util >= 0 ? acc_bill(a, u, r->job_id, x->task) : NULL;
            if (!u || (ppm > 0 && x->gpu_util >= 0 && !b)) {
                rc = ALLOT_ENOMEM;
                break;
            }
            if (x->gpu_util >= 0) {
                u->util_pct_ms += x->gpu_util * part;
                u->util_ms += part;
            }
            if (b) {
                b->util_ms += part;
                b->share_pct_ms += util_of_share(task, item, ppm, x->gpu_util, part);
            }
            /* the counters' growth in proportion, whole over the pieces */
            u->cpu_used_ms += growth_part(cpu, done, part, dt);
            if (energy >= 0)
                u->energy_mj =
                    (u->energy_mj < 0 ? 0 : u->energy_mj) + growth_part(energy, done, part, dt);
            if (lo + part == x->at && x->gpu_mem_bytes > u->gpu_mem_peak)
                u->gpu_mem_peak = x->gpu_mem_bytes; /* the reading's own hour */
        }
        json_decref(pl);
        if (rc)
            break;
    }
    allot_free(idx);
    return rc;
}

int meter_collect(const struct allot_catalog *cat, const struct allot_store_run *runs,
                  size_t n_runs, const struct allot_store_sample *smp, size_t n_smp, int64_t from,
                  int64_t to, int64_t now, struct meter_acc *a)
{
    int rc = meter_collect_runs(cat, runs, n_runs, from, to, now, a);

    if (rc == 0)
        rc = collect_samples(cat, runs, n_runs, smp, n_smp, from, to, now, a);
    if (rc == 0)
        bill_rows(a);
    return rc;
}
