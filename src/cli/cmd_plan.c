/*
 * `allot plan` (docs/cli/allot-plan.md, docs/planning.md): capacity
 * planning from the cluster's own history. It fetches the recorded jobs
 * (GET /v1/jobs, every state, every page), the nodes (GET /v1/nodes), the
 * tenants document (GET /v1/tenants), the scheduling options (GET
 * /v1/scheduler) and the price book when one is set, and replays the jobs
 * in-process through allot-sim's replay (src/sim, liballot-core's queue on
 * a virtual clock, the `allot` policy with allotd's options) on the
 * current cluster and on a changed one (--add, --remove, --quota), and
 * reports both side by side. --forecast fits Holt-Winters to the hourly
 * GPU demand of each tenant and model and finds the day the p95 queue
 * wait of the current cluster would pass --wait-target at that growth.
 *
 * What the replay approximates: fractional and MIG jobs hold a whole GPU
 * per task; a job's model preference and node selector are not kept (any
 * GPU serves); the
 * still-running jobs end now; pending jobs are not replayed (their run
 * time is unknown); costs are GPU-hours x the price book's GPU rate only.
 * Single-threaded; nothing kept between runs.
 */
#include "cli.h"

#include "allot/catalog.h"
#include "allot/common.h"
#include "allot/queue.h"
#include "forecast.h"
#include "philly.h"
#include "replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PLAN_MAX_CHANGES    64
#define PLAN_MAX_SERIES     256       /* tenant x model series in a forecast */
#define PLAN_FORECAST_HOURS (24 * 56) /* history a forecast looks at: 8 weeks */

static const struct cli_opt plan_opts[] = {
    {"add", 'a', "[N]xMODEL[:GPUS[:CORES[:MEM]]]", "add N nodes of MODEL (repeatable)"},
    {"remove", 'r', "NODE", "remove a registered node (repeatable)"},
    {"quota", 'q', "TENANT=gpu:N", "set a tenant's GPU nominal quota (repeatable)"},
    {"since", 0, "DURATION", "replay only jobs submitted in the last DURATION (default: all)"},
    {"forecast", 'f', NULL, "forecast demand per tenant and model; when is --wait-target missed"},
    {"wait-target", 'w', "DURATION", "p95 queue-wait target for --forecast (default 1h)"},
    {"horizon", 0, "DAYS", "how far --forecast looks ahead (default 28, at most 365)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage plan_usage = {
    "plan",
    "[--add [N]xMODEL[:GPUS[:CORES[:MEM]]]]... [--remove NODE]... [--quota TENANT=gpu:N]...\n"
    "       [--since DURATION] [--forecast [--wait-target DURATION] [--horizon DAYS]]\n"
    "       [-o table|json|yaml]",
    "What if: replays the cluster's recorded jobs through the scheduler's core,\n"
    "with the options allotd runs with (GET /v1/scheduler), on the current\n"
    "cluster and on the changed one and compares queueing,\n"
    "utilisation, per-tenant waits and cost (docs/planning.md)."};

/* One scenario's figures. */
struct scen {
    struct replay_setup s;
    struct replay_result r;
    bool ran;
};

/* What the command works on. Strings borrowed from argv or the replies. */
struct plan {
    struct cli *c;
    struct allot_catalog *cat;             /* owned */
    json_t *jobs, *nodes, *tenants, *book; /* owned replies (book may be NULL) */
    json_t *sched;                         /* owned reply of GET /v1/scheduler */
    struct allot_queue_opts qo;            /* the queue as that allotd runs it */
    char *tenants_yaml;                    /* owned: the document as YAML */
    size_t tenants_len;
    struct replay_trace tr; /* owned */
    struct replay_node_group cur[REPLAY_MAX_GROUPS], chg[REPLAY_MAX_GROUPS];
    int n_cur, n_chg;
    struct replay_quota_change quota[PLAN_MAX_CHANGES];
    int n_quota;
    char *quota_names[PLAN_MAX_CHANGES]; /* owned copies of the tenant names */
    bool changed;
    int64_t now, since;
    /* the history */
    size_t pending, running, no_gpus, never_ran, approx_gpus;
    double rec_wait_sum; /* recorded waits of the jobs that started */
    size_t rec_waited;
    double *rec_waits; /* owned: each of those waits, rec_cap entries */
    size_t rec_cap;
};

/* ---- helpers ---- */

static const char *secs(double v, char *buf, size_t n)
{
    if (!isfinite(v))
        return "-";
    allot_fmt(buf, n, "%.0f", v);
    return buf;
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Writes a scalar of the tenants document as YAML: plain when it is a
 * word of safe bytes (paths, amounts like 8Ti, unlimited), else quoted. */
static void yaml_scalar(FILE *f, json_t *v)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        bool plain = *s &&
                     strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789_./-:") == strlen(s) &&
                     s[0] != '-' && s[0] != ':' && !strchr(s, ':');

        if (plain) {
            fputs(s, f);
        } else {
            char *d = json_dumps(v, JSON_ENCODE_ANY);

            fputs(d ? d : "\"\"", f);
            free(d);
        }
    } else if (json_is_integer(v)) {
        fprintf(f, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        fprintf(f, "%.17g", json_real_value(v));
    } else if (json_is_true(v)) {
        fputs("true", f);
    } else if (json_is_false(v)) {
        fputs("false", f);
    } else {
        fputs("null", f);
    }
}

/* The JSON tenants document as YAML flow collections. allot-sim's parser
 * reads numbers plain and refuses quoted ones, while JSON writes amounts
 * like "8Ti" as strings: both come out plain here. */
static void yaml_value(FILE *f, json_t *v)
{
    const char *k;
    json_t *x;
    size_t i;
    bool first = true;

    if (json_is_object(v)) {
        fputc('{', f);
        json_object_foreach(v, k, x)
        {
            json_t *key = json_string(k);

            fputs(first ? "" : ", ", f);
            yaml_scalar(f, key);
            json_decref(key);
            fputs(": ", f);
            yaml_value(f, x);
            first = false;
        }
        fputc('}', f);
    } else if (json_is_array(v)) {
        fputc('[', f);
        json_array_foreach(v, i, x)
        {
            fputs(i ? ", " : "", f);
            yaml_value(f, x);
        }
        fputc(']', f);
    } else {
        yaml_scalar(f, v);
    }
}

static int tenants_to_yaml(struct plan *p)
{
    FILE *f = open_memstream(&p->tenants_yaml, &p->tenants_len);

    if (!f)
        return CLI_SERVER;
    yaml_value(f, p->tenants);
    fputc('\n', f);
    if (fclose(f) != 0)
        return CLI_SERVER;
    return CLI_OK;
}

/* ---- options ---- */

/* --quota TENANT=gpu:N (N GPUs with up to 3 decimals). */
static int parse_quota(struct plan *p, const char *v)
{
    const char *eq = strrchr(v, '=');
    double g;

    if (!eq || eq == v || strncmp(eq + 1, "gpu:", 4) != 0)
        return cli_usage_error("--quota %s: want TENANT=gpu:N", v);
    if (p->n_quota == PLAN_MAX_CHANGES)
        return cli_usage_error("--quota: at most %d", PLAN_MAX_CHANGES);
    if (args_num("quota", eq + 5, 0, 1e6, &g) != CLI_OK)
        return CLI_USAGE;
    if (fabs(g * ALLOT_MILLI - (double)llround(g * ALLOT_MILLI)) > 1e-6)
        return cli_usage_error("--quota %s: GPUs to at most 3 decimals (thousandths)", v);
    p->quota_names[p->n_quota] = allot_malloc((size_t)(eq - v) + 1);
    if (!p->quota_names[p->n_quota])
        return CLI_SERVER;
    memcpy(p->quota_names[p->n_quota], v, (size_t)(eq - v));
    p->quota_names[p->n_quota][eq - v] = 0;
    p->quota[p->n_quota].tenant = p->quota_names[p->n_quota];
    p->quota[p->n_quota].gpu_milli = llround(g * ALLOT_MILLI);
    p->n_quota++;
    return CLI_OK;
}

/* Whether `name` names the tenant whose path is path[0..len): the whole
 * path, or its last element (as the replay matches --quota). */
static bool names_tenant(const char *name, const char *path, size_t len)
{
    const char *last = path + len;

    while (last > path && last[-1] != '/')
        last--;
    return (strlen(name) == len && strncmp(name, path, len) == 0) ||
           (strlen(name) == (size_t)(path + len - last) && strncmp(name, last, strlen(name)) == 0);
}

/* Checks each --quota TENANT against the tenants document: it must name
 * exactly one tenant (listed, or a parent implied by a listed path), and
 * one the document lists: a parent only implied has no nominal of its own
 * (it is its leaves' sum) to set. A listed parent's nominal may be set:
 * its leaves' nominals must still fit in it (the replay's setup checks).
 * Returns CLI_OK or CLI_USAGE (printed). */
static int check_quota_tenants(const struct plan *p)
{
    json_t *list = json_object_get(p->tenants, "tenants"), *x, *y;
    const char *seen[PLAN_MAX_CHANGES]; /* each --quota's tenant, resolved */
    size_t seen_len[PLAN_MAX_CHANGES], i, k;

    for (int q = 0; q < p->n_quota; q++) {
        const char *name = p->quota[q].tenant, *hit = NULL;
        size_t hit_len = 0;
        bool listed = false;

        /* every path and every parent it implies, at each '/' and its end */
        json_array_foreach(list, i, x)
        {
            const char *path = json_string_value(json_object_get(x, "path"));

            for (size_t e = 1; path && e <= strlen(path); e++) {
                if ((path[e] != '/' && path[e] != 0) || !names_tenant(name, path, e))
                    continue;
                if (hit && (hit_len != e || strncmp(hit, path, e) != 0))
                    return cli_usage_error("--quota %s: \"%s\" names several tenants (%.*s, "
                                           "%.*s); give the whole path",
                                           name, name, (int)hit_len, hit, (int)e, path);
                hit = path;
                hit_len = e;
            }
        }
        if (!hit)
            return cli_usage_error("--quota %s: no tenant \"%s\" (see allot tenants)", name, name);
        json_array_foreach(list, k, y)
        {
            const char *path = json_string_value(json_object_get(y, "path"));

            listed |= path && strlen(path) == hit_len && strncmp(path, hit, hit_len) == 0;
        }
        if (!listed)
            return cli_usage_error("--quota %s: tenant %.*s is not listed in the tenants "
                                   "document, only implied by the tenants below it: its nominal "
                                   "is theirs added up; set theirs",
                                   name, (int)hit_len, hit);
        for (int e = 0; e < q; e++)
            if (seen_len[e] == hit_len && strncmp(seen[e], hit, hit_len) == 0)
                return cli_usage_error("--quota: tenant %.*s given twice (%s and %s)", (int)hit_len,
                                       hit, p->quota[e].tenant, name);
        seen[q] = hit;
        seen_len[q] = hit_len;
    }
    return CLI_OK;
}

/* ---- the cluster ---- */

/* The inventory's nodes with GPUs as groups of one shape each. */
static int nodes_to_groups(struct plan *p, const char *const *remove, size_t n_remove)
{
    json_t *list = json_object_get(p->nodes, "nodes"), *x;
    size_t i, found = 0;

    json_array_foreach(list, i, x)
    {
        json_t *inv = json_object_get(x, "inventory");
        json_t *gpus = json_object_get(inv, "gpus");
        const char *name = json_string_value(json_object_get(x, "name"));
        const char *model = json_string_value(json_object_get(json_array_get(gpus, 0), "model"));
        struct replay_node_group g = {0};
        bool removed = false;
        int idx, k;

        for (size_t r = 0; name && r < n_remove; r++)
            if (strcmp(remove[r], name) == 0) {
                removed = true;
                found++;
            }
        if (!model || json_array_size(gpus) == 0 || json_array_size(gpus) > ALLOT_MAX_GPUS)
            continue;
        idx = allot_catalog_find_model(p->cat, model);
        if (idx < 0) {
            cli_error("bad_reply", "node %s: GPU model %s is not in the catalog", name ? name : "?",
                      model);
            return CLI_SERVER;
        }
        allot_fmt(g.model, sizeof(g.model), "%s", p->cat->models[idx].name);
        g.model_idx = idx;
        g.gpus = (int)json_array_size(gpus);
        g.cpu_milli = llround(json_number_value(json_object_get(inv, "cpus")) * ALLOT_MILLI);
        g.mem_mib = json_integer_value(json_object_get(inv, "memory"));
        if (g.cpu_milli <= 0 || g.mem_mib <= 0)
            continue;
        g.count = 1;
        for (int pass = 0; pass < 2; pass++) {
            struct replay_node_group *v = pass ? p->chg : p->cur;
            int *n = pass ? &p->n_chg : &p->n_cur;

            if (pass && removed)
                continue;
            for (k = 0; k < *n; k++)
                if (v[k].model_idx == g.model_idx && v[k].gpus == g.gpus &&
                    v[k].cpu_milli == g.cpu_milli && v[k].mem_mib == g.mem_mib)
                    break;
            if (k < *n) {
                v[k].count++;
            } else if (*n < REPLAY_MAX_GROUPS) {
                v[(*n)++] = g;
            } else {
                cli_error("too_many_shapes", "more than %d node shapes", REPLAY_MAX_GROUPS);
                return CLI_SERVER;
            }
        }
    }
    if (found < n_remove) {
        for (size_t r = 0; r < n_remove; r++) {
            bool known = false;

            json_array_foreach(list, i, x)
            {
                const char *name = json_string_value(json_object_get(x, "name"));

                known |= name && strcmp(name, remove[r]) == 0;
            }
            if (!known)
                return cli_usage_error("--remove %s: no such node", remove[r]);
        }
    }
    if (p->n_cur == 0) {
        cli_error("no_gpus", "no registered node has GPUs: nothing to plan on");
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* ---- the history ---- */

static int64_t jint(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* Whether a job's spec asks for part of one GPU: a MIG instance, or a
 * fraction by compute (gpu_milli), by memory (gpu_memory) or both. The
 * replay and the forecast count it as one whole GPU per task. */
static bool spec_is_part(json_t *spec)
{
    return json_is_string(json_object_get(spec, "mig")) || jint(spec, "gpu_milli") > 0 ||
           jint(spec, "gpu_memory") > 0;
}

/* The recorded jobs as a replay trace. */
static int jobs_to_trace(struct plan *p)
{
    json_t *x;
    size_t i;

    allot_fmt(p->tr.source, sizeof(p->tr.source), "the recorded jobs");
    json_array_foreach(p->jobs, i, x)
    {
        json_t *spec = json_object_get(x, "spec");
        const char *tenant = json_string_value(json_object_get(x, "tenant"));
        const char *prio = json_string_value(json_object_get(spec, "priority"));
        const char *state = json_string_value(json_object_get(x, "state"));
        int64_t submit = jint(x, "submit_time"), start = jint(x, "start_time"),
                end = jint(x, "end_time"), tasks = jint(spec, "tasks"), gpus = jint(spec, "gpus");
        struct replay_trace_job j = {.prio = -1};

        if (!tenant || !state || submit <= 0)
            continue;
        if (submit < p->since)
            continue;
        tasks = tasks > 0 ? tasks : 1;
        if (gpus <= 0 && spec_is_part(spec)) {
            gpus = 1; /* a fraction or MIG instance holds a GPU in the replay */
            p->approx_gpus++;
        }
        if (gpus <= 0 || tasks > 100000 || gpus > ALLOT_MAX_GPUS) {
            p->no_gpus++;
            continue;
        }
        /* a pending job is not replayed, also one requeued after a run (its
         * start_time is the last run's): how long it will run is not known */
        if (strcmp(state, "pending") == 0) {
            p->pending++;
            continue;
        }
        if (start <= 0) {
            p->never_ran++;
            continue;
        }
        if (end <= 0 || end < start) {
            end = p->now; /* still running: up to now */
            p->running++;
        }
        if (p->rec_waited == p->rec_cap && allot_grow((void **)&p->rec_waits, &p->rec_cap,
                                                      p->rec_waited + 1, sizeof(*p->rec_waits)) < 0)
            return CLI_SERVER;
        p->rec_waits[p->rec_waited] = (double)(start - submit > 0 ? start - submit : 0);
        p->rec_wait_sum += p->rec_waits[p->rec_waited++];
        j.submit = submit;
        j.duration = end - start > 0 ? end - start : 1;
        j.gpus = tasks * gpus;
        j.task_gpus = (int)gpus; /* the gang as submitted */
        j.tenant = replay_trace_intern(&p->tr, false, tenant);
        if (j.tenant >= 0 && prio && (j.prio = replay_trace_intern(&p->tr, true, prio)) < 0)
            j.tenant = ALLOT_ENOMEM;
        if (j.tenant < 0 || replay_trace_add(&p->tr, &j) < 0)
            return CLI_SERVER;
    }
    if (p->tr.n == 0) {
        cli_error("no_history", "no recorded job with GPUs has run%s: nothing to replay",
                  p->since > 0 ? " in the --since window" : "");
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* ---- the replays ---- */

/* Replays the trace, arrivals sped up by `scale` (1: as recorded), on
 * groups g[0..n) with the quota changes when `quota`. */
static int scenario(struct plan *p, const struct replay_node_group *g, int n, bool quota,
                    double scale, struct scen *out)
{
    struct replay_trace t = p->tr;
    struct replay_trace_opts o = {
        .tenants_buf = p->tenants_yaml,
        .tenants_len = p->tenants_len,
        .tenants_name = "GET /v1/tenants",
        .groups = g,
        .n_groups = n,
        .quota = quota ? p->quota : NULL,
        .n_quota = quota ? p->n_quota : 0,
        .from = -1,
        .to = -1,
    };
    /* the queue as this allotd runs it (GET /v1/scheduler) */
    struct replay_opts ro = {.checkpoint_s = 1800, .seed = 1, .drain = true, .queue = &p->qo};
    char err[1024];
    int64_t first = INT64_MAX;
    int rc;

    memset(out, 0, sizeof(*out));
    if (scale != 1.0) {
        t.v = allot_calloc(p->tr.n, sizeof(*t.v));
        if (!t.v)
            return CLI_SERVER;
        for (size_t i = 0; i < p->tr.n; i++)
            first = p->tr.v[i].submit < first ? p->tr.v[i].submit : first;
        for (size_t i = 0; i < p->tr.n; i++) {
            t.v[i] = p->tr.v[i];
            t.v[i].submit = first + llround((double)(p->tr.v[i].submit - first) / scale);
        }
    }
    rc = replay_setup_trace(&out->s, &t, &o, err, sizeof(err));
    if (t.v != p->tr.v)
        allot_free(t.v);
    if (rc < 0)
        return cli_usage_error("%s", err); /* exit status 1: the tenants or the changes */
    if (replay_run(&out->s, REPLAY_ALLOT, &ro, &out->r, err, sizeof(err)) < 0) {
        cli_error("replay", "%s", err);
        replay_setup_free(&out->s);
        return CLI_SERVER;
    }
    out->ran = true;
    return CLI_OK;
}

static void scenario_free(struct scen *x)
{
    if (x->ran) {
        replay_result_free(&x->r);
        replay_setup_free(&x->s);
    }
    x->ran = false;
}

/* ---- cost ---- */

/* The GPU rate (minor units per GPU-hour) of `model` in the price book
 * version in effect today; -1 when there is none. */
static long long rate_of(const struct plan *p, const char *model)
{
    json_t *books = json_object_get(p->book, "books"), *b, *best = NULL;
    char today[16];
    size_t i;
    time_t now = (time_t)p->now;
    struct tm tm;

    if (!gmtime_r(&now, &tm))
        return -1;
    strftime(today, sizeof(today), "%Y-%m-%d", &tm);
    json_array_foreach(books, i, b)
    {
        const char *eff = json_string_value(json_object_get(b, "effective"));

        if (eff && strcmp(eff, today) <= 0)
            best = b;
    }
    if (!best)
        return -1;
    {
        json_t *r = json_object_get(json_object_get(best, "gpu_hour"), model);

        if (!json_is_integer(r)) {
            int idx = allot_catalog_find_model(p->cat, model);
            const char *k;
            json_t *v;

            /* the book may name the model by an alias */
            json_object_foreach(json_object_get(best, "gpu_hour"), k, v)
            {
                if (idx >= 0 && allot_catalog_find_model(p->cat, k) == idx && json_is_integer(v))
                    return json_integer_value(v);
            }
            return -1;
        }
        return json_integer_value(r);
    }
}

/* Capacity cost (every GPU from the first arrival until the replay's last
 * job ended: the time the cluster took for this work) and an estimate of
 * the GPU time billed (allocated GPU-hours x the capacity-weighted mean
 * rate), minor units; -1 without a price book or a rate for every model. */
static void cost(const struct plan *p, const struct scen *x, double *capacity, double *billed,
                 double *gpu_hours)
{
    const struct replay_setup *s = &x->s;
    double hours = (double)(x->r.end - s->from) / 3600.0, cap = 0;
    int64_t gpus = replay_setup_gpus(s);

    /* what the jobs held, the drain included: the same finished work costs
     * the same in every scenario but for what preemptions redo */
    *gpu_hours = x->r.all.gpu_hours;
    *capacity = *billed = -1;
    if (!p->book)
        return;
    for (int i = 0; i < s->n_groups; i++) {
        long long r = rate_of(p, s->groups[i].model);

        if (r < 0)
            return;
        cap += (double)r * s->groups[i].count * s->groups[i].gpus * hours;
    }
    *capacity = cap;
    *billed = gpus ? *gpu_hours * cap / ((double)gpus * hours) : 0;
}

/* ---- output ---- */

/* GPUs the tenant tree's top level guarantees: the sum of each top-level
 * tenant's nominal (a listed one's own, else its leaves'). Under quotas
 * the queue admits no more than this at once (docs/tenancy.md), whatever
 * the cluster's size; -1 when a top-level nominal is unlimited. */
static double quota_gpus(const struct replay_setup *s)
{
    const struct sim_tenants_conf *c = &s->conf;
    double total = 0;

    for (size_t i = 0; i < c->n; i++) {
        const char *p = c->v[i].path, *slash = strchr(p, '/');
        size_t top = slash ? (size_t)(slash - p) : strlen(p);
        bool listed = false, seen = false;

        /* count each top-level name once: at its first entry */
        for (size_t k = 0; k < i && !seen; k++)
            seen = strncmp(c->v[k].path, p, top) == 0 &&
                   (c->v[k].path[top] == '/' || c->v[k].path[top] == 0);
        if (seen)
            continue;
        for (size_t k = i; k < c->n; k++) {
            const struct sim_tenant_conf *x = &c->v[k];

            if (strncmp(x->path, p, top) != 0 || (x->path[top] != '/' && x->path[top] != 0))
                continue;
            if (x->path[top] == 0 && x->has_quota[ALLOT_RES_GPU]) {
                listed = true;
                if (x->quota[ALLOT_RES_GPU].nominal == ALLOT_UNLIMITED)
                    return -1;
                total += (double)x->quota[ALLOT_RES_GPU].nominal / ALLOT_MILLI;
            }
        }
        for (size_t k = i; !listed && k < c->n; k++) {
            const struct sim_tenant_conf *x = &c->v[k];

            if (!x->leaf || strncmp(x->path, p, top) != 0 ||
                (x->path[top] != '/' && x->path[top] != 0))
                continue;
            if (!x->has_quota[ALLOT_RES_GPU] || x->quota[ALLOT_RES_GPU].nominal == ALLOT_UNLIMITED)
                return -1;
            total += (double)x->quota[ALLOT_RES_GPU].nominal / ALLOT_MILLI;
        }
    }
    return total;
}

static json_t *scen_json(const struct plan *p, const struct scen *x)
{
    json_t *o = json_object(), *ts = json_object();
    char desc[1024];
    double capc, billed, gh;
    const struct replay_stats *a = &x->r.all;

    cost(p, x, &capc, &billed, &gh);
    json_object_set_new(o, "cluster",
                        json_string(replay_setup_describe(&x->s, desc, sizeof(desc))));
    json_object_set_new(o, "nodes", json_integer(x->s.n_nodes));
    json_object_set_new(o, "gpus", json_integer(replay_setup_gpus(&x->s)));
    json_object_set_new(o, "jobs", json_integer((json_int_t)a->jobs));
    json_object_set_new(o, "too_big", json_integer((json_int_t)x->s.too_big));
    json_object_set_new(o, "finished", json_integer((json_int_t)a->finished));
    json_object_set_new(o, "unfinished", json_integer((json_int_t)a->unfinished));
    json_object_set_new(o, "mean_wait_s", num_or_null(a->avg_queue));
    json_object_set_new(o, "p95_wait_s", num_or_null(a->p95_queue));
    json_object_set_new(o, "mean_jct_s", num_or_null(a->avg_jct));
    json_object_set_new(o, "utilization", num_or_null(a->utilization));
    json_object_set_new(o, "gpu_hours", json_real(gh));
    json_object_set_new(o, "capacity_cost_minor",
                        capc >= 0 ? json_integer(llround(capc)) : json_null());
    json_object_set_new(o, "gpu_time_cost_minor",
                        billed >= 0 ? json_integer(llround(billed)) : json_null());
    json_object_set_new(o, "preemptions", json_integer(a->preemptions));
    json_object_set_new(o, "quota_gpus",
                        quota_gpus(&x->s) >= 0 ? json_real(quota_gpus(&x->s)) : json_null());
    for (int t = 0; t < x->s.n_tenants; t++) {
        const struct replay_stats *st = &x->r.tenant[t];
        json_t *e = json_object();

        json_object_set_new(e, "nominal_gpus",
                            json_real((double)x->s.tenants[t].nominal_milli / ALLOT_MILLI));
        json_object_set_new(e, "jobs", json_integer((json_int_t)st->jobs));
        json_object_set_new(e, "unfinished", json_integer((json_int_t)st->unfinished));
        json_object_set_new(e, "mean_wait_s", num_or_null(st->avg_queue));
        json_object_set_new(e, "p95_wait_s", num_or_null(st->p95_queue));
        json_object_set_new(e, "utilization", num_or_null(st->utilization));
        json_object_set_new(ts, x->s.tenants[t].path, e);
    }
    json_object_set_new(o, "tenants", ts);
    return o;
}

static void money(char *buf, size_t n, json_t *v)
{
    long long m;

    if (!json_is_integer(v)) {
        allot_fmt(buf, n, "-");
        return;
    }
    m = json_integer_value(v);
    allot_fmt(buf, n, "%s%lld.%02lld", m < 0 ? "-" : "", llabs(m) / 100, llabs(m) % 100);
}

/* Per tenant: jobs, then mean and p95 wait in each scenario. */
static void print_tenants(json_t *cur, json_t *chg)
{
    static const char *const titles[] = {"TENANT",        "JOBS",        "NOMINAL",
                                         "MEAN-WAIT",     "P95-WAIT",    "NEW-NOMINAL",
                                         "NEW-MEAN-WAIT", "NEW-P95-WAIT"};
    struct table *t = table_new(chg ? 8 : 5, titles);
    json_t *ct = json_object_get(cur, "tenants"), *x;
    const char *k;

    printf("\n");
    json_object_foreach(ct, k, x)
    {
        json_t *y = json_object_get(json_object_get(chg, "tenants"), k);
        char b[7][32];
        const char *cells[8] = {
            k,
            out_cell(json_object_get(x, "jobs"), b[0], 32),
            out_cell(json_object_get(x, "nominal_gpus"), b[1], 32),
            secs(json_number_value(json_object_get(x, "mean_wait_s")) +
                     (json_is_number(json_object_get(x, "mean_wait_s")) ? 0 : NAN),
                 b[2], 32),
            secs(json_number_value(json_object_get(x, "p95_wait_s")) +
                     (json_is_number(json_object_get(x, "p95_wait_s")) ? 0 : NAN),
                 b[3], 32),
            y ? out_cell(json_object_get(y, "nominal_gpus"), b[4], 32) : "-",
            y ? secs(json_number_value(json_object_get(y, "mean_wait_s")) +
                         (json_is_number(json_object_get(y, "mean_wait_s")) ? 0 : NAN),
                     b[5], 32)
              : "-",
            y ? secs(json_number_value(json_object_get(y, "p95_wait_s")) +
                         (json_is_number(json_object_get(y, "p95_wait_s")) ? 0 : NAN),
                     b[6], 32)
              : "-",
        };
        table_row(t, cells);
    }
    table_print(t, stdout);
}

static void print_side_by_side(const struct plan *p, json_t *root)
{
    static const char *const keys[] = {"cluster",
                                       "gpus",
                                       "jobs",
                                       "unfinished",
                                       "mean_wait_s",
                                       "p95_wait_s",
                                       "mean_jct_s",
                                       "utilization",
                                       "gpu_hours",
                                       "capacity_cost_minor",
                                       "gpu_time_cost_minor",
                                       "preemptions"};
    static const char *const names[] = {"cluster",       "GPUs",          "jobs replayed",
                                        "unfinished",    "mean wait (s)", "p95 wait (s)",
                                        "mean JCT (s)",  "utilisation",   "GPU-hours",
                                        "capacity cost", "GPU-time cost", "preemptions"};
    json_t *cur = json_object_get(root, "current"), *chg = json_object_get(root, "changed");
    json_t *w = json_object_get(root, "history");
    const char *cur_name = "current", *chg_name = "changed";
    const char *titles[3] = {"", cur_name, chg_name};
    struct table *t = table_new(chg ? 3 : 2, titles);
    const char *cur_or = json_string_value(json_object_get(root, "currency"));

    printf("history: %lld jobs replayed, submitted %s .. %s; left out: %lld pending, %lld never "
           "started, %lld without GPUs, %lld of tenants not in the tree, %lld larger than the "
           "cluster; %lld still running (end now)\n",
           (long long)jint(w, "jobs"), json_string_value(json_object_get(w, "from")),
           json_string_value(json_object_get(w, "to")), (long long)jint(w, "pending"),
           (long long)jint(w, "never_started"), (long long)jint(w, "no_gpus"),
           (long long)jint(w, "other_tenants"), (long long)jint(w, "too_big"),
           (long long)jint(w, "running"));
    {
        char rb[2][32];
        json_t *m = json_object_get(w, "recorded_mean_wait_s"),
               *p95 = json_object_get(w, "recorded_p95_wait_s");

        printf("recorded on the cluster: mean wait %s s, p95 %s s of the jobs that started\n\n",
               secs(json_is_number(m) ? json_number_value(m) : NAN, rb[0], sizeof(rb[0])),
               secs(json_is_number(p95) ? json_number_value(p95) : NAN, rb[1], sizeof(rb[1])));
    }
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        char b[2][64];
        const char *cells[3] = {names[k], NULL, NULL};

        for (int col = 0; col < (chg ? 2 : 1); col++) {
            json_t *v = json_object_get(col ? chg : cur, keys[k]);

            if (strstr(keys[k], "cost")) {
                money(b[col], sizeof(b[col]), v);
                if (json_is_integer(v) && cur_or) {
                    size_t l = strlen(b[col]);

                    allot_fmt(b[col] + l, sizeof(b[col]) - l, " %s", cur_or);
                }
            } else if (json_is_real(v)) {
                allot_fmt(b[col], sizeof(b[col]),
                          strcmp(keys[k], "utilization") == 0 ? "%.3f"
                          : strcmp(keys[k], "gpu_hours") == 0 ? "%.1f"
                                                              : "%.0f",
                          json_real_value(v));
            } else {
                cells[col + 1] = out_cell(v, b[col], sizeof(b[col]));
                continue;
            }
            cells[col + 1] = b[col];
        }
        table_row(t, cells);
    }
    table_print(t, stdout);
    for (int col = 0; col < (chg ? 2 : 1); col++) {
        json_t *x = col ? chg : cur;
        json_t *q = json_object_get(x, "quota_gpus");

        if (json_is_number(q) && json_number_value(q) + 1e-9 < (double)jint(x, "gpus"))
            printf("note: in the %s cluster the tenants' GPU nominal quotas add up to %.3g of its "
                   "%lld GPUs: the queue admits no more at once (docs/tenancy.md); raise them "
                   "with --quota\n",
                   col ? "changed" : "current", json_number_value(q), (long long)jint(x, "gpus"));
    }
    if (chg && jint(chg, "too_big") > jint(cur, "too_big"))
        printf("note: %lld recorded jobs are larger than the changed cluster and are not replayed "
               "on it (jobs replayed counts the others)\n",
               (long long)(jint(chg, "too_big") - jint(cur, "too_big")));
    print_tenants(cur, chg);
    (void)p;
}

/* ---- the forecast ---- */

struct series {
    const char *tenant; /* borrowed from the jobs reply */
    const char *model;  /* borrowed: a catalog name or "any" */
    double *y;          /* owned: mean GPUs allocated per hour */
};

/* The catalog model of the node named `node`, or "any". */
static const char *model_of_node(const struct plan *p, const char *node)
{
    json_t *x;
    size_t i;

    json_array_foreach(json_object_get(p->nodes, "nodes"), i, x)
    {
        const char *n = json_string_value(json_object_get(x, "name"));
        json_t *g = json_array_get(json_object_get(json_object_get(x, "inventory"), "gpus"), 0);
        const char *m = json_string_value(json_object_get(g, "model"));
        int idx = m ? allot_catalog_find_model(p->cat, m) : -1;

        if (node && n && strcmp(n, node) == 0 && idx >= 0)
            return p->cat->models[idx].name;
    }
    return "any";
}

/* Hourly GPU demand per tenant and model from t0 for nb hours. */
static int build_series(const struct plan *p, int64_t t0, size_t nb, struct series *sv, int *ns)
{
    json_t *x;
    size_t i;

    json_array_foreach(p->jobs, i, x)
    {
        json_t *spec = json_object_get(x, "spec");
        const char *tenant = json_string_value(json_object_get(x, "tenant"));
        const char *state = json_string_value(json_object_get(x, "state"));
        json_t *task0 =
            json_array_get(json_object_get(json_object_get(x, "placement"), "tasks"), 0);
        const char *model = model_of_node(p, json_string_value(json_object_get(task0, "node")));
        int64_t start = jint(x, "start_time"), end = jint(x, "end_time");
        int64_t tasks = jint(spec, "tasks"), gpus = jint(spec, "gpus");
        int k;

        tasks = tasks > 0 ? tasks : 1;
        if (gpus <= 0 && spec_is_part(spec))
            gpus = 1; /* as in the replay */
        /* a pending job requeued after a run: when that run ended is not
         * known (as in jobs_to_trace) */
        if (!tenant || !state || !strcmp(state, "pending") || start <= 0 || gpus <= 0 ||
            gpus > ALLOT_MAX_GPUS || tasks > 100000 || jint(x, "submit_time") < p->since)
            continue;
        if (end <= 0 || end < start)
            end = p->now;
        for (k = 0; k < *ns; k++)
            if (strcmp(sv[k].tenant, tenant) == 0 && strcmp(sv[k].model, model) == 0)
                break;
        if (k == *ns) {
            if (*ns == PLAN_MAX_SERIES)
                continue; /* counted in the total through the other series? no: noted */
            sv[k].tenant = tenant;
            sv[k].model = model;
            if (!(sv[k].y = allot_calloc(nb, sizeof(double))))
                return CLI_SERVER;
            (*ns)++;
        }
        for (int64_t h = start > t0 ? (start - t0) / 3600 : 0; h < (int64_t)nb; h++) {
            int64_t lo = t0 + h * 3600, hi = lo + 3600;
            int64_t a = start > lo ? start : lo, b = end < hi ? end : hi;

            if (a >= hi || b <= lo)
                break;
            sv[k].y[h] += (double)(tasks * gpus) * (double)(b - a) / 3600.0;
        }
    }
    return CLI_OK;
}

static double mean_of(const double *y, size_t from, size_t to)
{
    double s = 0;

    for (size_t i = from; i < to; i++)
        s += y[i];
    return to > from ? s / (double)(to - from) : 0;
}

/* The current cluster's p95 wait with arrivals sped up by f. */
static int p95_at(struct plan *p, double f, double *p95)
{
    struct scen x;
    int rc = scenario(p, p->cur, p->n_cur, false, f, &x);

    if (rc != CLI_OK)
        return rc;
    *p95 = isfinite(x.r.all.p95_queue) ? x.r.all.p95_queue : 0;
    scenario_free(&x);
    return CLI_OK;
}

/* The replayed history's mean demand in the series' terms: the GPUs its
 * jobs held (GPU-seconds of their recorded runs) over its span, from the
 * first submission until now. What speeding the replay's arrivals up by f
 * multiplies, and what each forecast day's mean is set against. */
static double history_demand(const struct plan *p)
{
    int64_t first = INT64_MAX;
    double held = 0;

    for (size_t i = 0; i < p->tr.n; i++) {
        first = p->tr.v[i].submit < first ? p->tr.v[i].submit : first;
        held += (double)p->tr.v[i].gpus * (double)p->tr.v[i].duration;
    }
    return first < p->now ? held / (double)(p->now - first) : 0;
}

static int forecast(struct plan *p, const struct scen *cur, int64_t target, int64_t days,
                    json_t *root)
{
    struct series sv[PLAN_MAX_SERIES];
    int ns = 0, rc = CLI_OK;
    int64_t t_end = p->now / 3600 * 3600, t0 = INT64_MAX, first_start = INT64_MAX;
    size_t nb, H = (size_t)days * 24, season;
    double *total = allot_calloc(H, sizeof(double)), *one = allot_calloc(H, sizeof(double));
    double d_hist, p95_now = cur->r.all.p95_queue, fmax = 0;
    json_t *fc = json_object(), *arr = json_array(), *x;
    size_t i;
    char date[32];

    if (!total || !one || !fc || !arr) {
        rc = CLI_SERVER;
        goto out;
    }
    json_array_foreach(p->jobs, i, x)
    {
        int64_t st = jint(x, "start_time");

        if (st > 0 && st < first_start && jint(x, "submit_time") >= p->since)
            first_start = st;
    }
    t0 = first_start / 3600 * 3600;
    if (t0 < t_end - (int64_t)PLAN_FORECAST_HOURS * 3600)
        t0 = t_end - (int64_t)PLAN_FORECAST_HOURS * 3600;
    if (first_start == INT64_MAX || t_end - t0 < 2 * 3600) {
        json_object_set_new(fc, "error", json_string("less than two whole hours of history"));
        goto done;
    }
    nb = (size_t)((t_end - t0) / 3600);
    season = forecast_pick_season(nb, 24);
    if ((rc = build_series(p, t0, nb, sv, &ns)) != CLI_OK)
        goto out;
    for (int k = 0; k < ns; k++) {
        struct forecast_fit fit;
        json_t *e = json_object();

        if (forecast_holt_winters(sv[k].y, nb, season, H, one, &fit) < 0)
            continue;
        for (size_t h = 0; h < H; h++)
            total[h] += one[h];
        json_object_set_new(e, "tenant", json_string(sv[k].tenant));
        json_object_set_new(e, "model", json_string(sv[k].model));
        json_object_set_new(e, "last_day_gpus",
                            json_real(mean_of(sv[k].y, nb > 24 ? nb - 24 : 0, nb)));
        json_object_set_new(e, "next_day_gpus", json_real(mean_of(one, 0, H < 24 ? H : 24)));
        json_object_set_new(e, "horizon_end_gpus", json_real(mean_of(one, H - 24, H)));
        json_object_set_new(e, "trend_gpus_per_day", json_real(fit.trend * 24));
        json_array_append_new(arr, e);
    }
    d_hist = history_demand(p);
    json_object_set_new(fc, "history_hours", json_integer((json_int_t)nb));
    json_object_set_new(fc, "season_hours", json_integer((json_int_t)season));
    json_object_set_new(fc, "horizon_days", json_integer(days));
    json_object_set_new(fc, "replay_mean_demand_gpus", json_real(d_hist));
    json_object_set_new(fc, "wait_target_s", json_integer(target));
    json_object_set_new(fc, "p95_wait_now_s", num_or_null(p95_now));
    for (int64_t d = 0; d < days; d++) {
        double f = d_hist > 0 ? mean_of(total, (size_t)d * 24, (size_t)d * 24 + 24) / d_hist : 0;

        fmax = f > fmax ? f : fmax;
    }
    json_object_set_new(fc, "max_growth", json_real(fmax));
    if (isfinite(p95_now) && p95_now > (double)target) {
        json_object_set_new(fc, "missed", json_string("now"));
    } else {
        double lo = 1, hi = fmax, v;

        if (fmax <= 1 || (rc = p95_at(p, fmax, &v)) != CLI_OK || v <= (double)target) {
            json_object_set_new(fc, "missed", json_null());
            goto done;
        }
        /* the growth at which the p95 wait passes the target */
        for (int it = 0; it < 7; it++) {
            double mid = (lo + hi) / 2;

            if ((rc = p95_at(p, mid, &v)) != CLI_OK)
                goto out;
            if (v > (double)target)
                hi = mid;
            else
                lo = mid;
        }
        json_object_set_new(fc, "growth_at_target", json_real(hi));
        for (int64_t d = 0; d < days; d++) {
            double f = mean_of(total, (size_t)d * 24, (size_t)d * 24 + 24) / d_hist;

            if (f >= hi) {
                philly_format_time(t_end + d * 86400, date, sizeof(date));
                date[10] = 0;
                json_object_set_new(fc, "missed", json_string("on"));
                json_object_set_new(fc, "missed_on", json_string(date));
                break;
            }
        }
    }
done:
    json_object_set_new(fc, "series", arr);
    arr = NULL;
    json_object_set_new(root, "forecast", fc);
    fc = NULL;
out:
    for (int k = 0; k < ns; k++)
        allot_free(sv[k].y);
    allot_free(total);
    allot_free(one);
    json_decref(arr);
    json_decref(fc);
    return rc;
}

static void print_forecast(json_t *fc)
{
    static const char *const titles[] = {
        "TENANT", "MODEL", "LAST-DAY-GPUS", "NEXT-DAY-GPUS", "HORIZON-END-GPUS", "TREND-GPUS/DAY"};
    struct table *t;
    const char *missed = json_string_value(json_object_get(fc, "missed"));
    json_t *x;
    size_t i;

    printf("\nforecast: %s\n", json_is_string(json_object_get(fc, "error"))
                                   ? json_string_value(json_object_get(fc, "error"))
                                   : "Holt-Winters on the hourly GPU demand per tenant and model");
    if (json_is_string(json_object_get(fc, "error")))
        return;
    t = table_new(6, titles);
    printf("history %lld h, season %lld h, horizon %lld days\n",
           (long long)jint(fc, "history_hours"), (long long)jint(fc, "season_hours"),
           (long long)jint(fc, "horizon_days"));
    json_array_foreach(json_object_get(fc, "series"), i, x)
    {
        char b[4][32];
        const char *cells[6] = {json_string_value(json_object_get(x, "tenant")),
                                json_string_value(json_object_get(x, "model")),
                                b[0],
                                b[1],
                                b[2],
                                b[3]};

        allot_fmt(b[0], 32, "%.2f", json_real_value(json_object_get(x, "last_day_gpus")));
        allot_fmt(b[1], 32, "%.2f", json_real_value(json_object_get(x, "next_day_gpus")));
        allot_fmt(b[2], 32, "%.2f", json_real_value(json_object_get(x, "horizon_end_gpus")));
        allot_fmt(b[3], 32, "%+.3f", json_real_value(json_object_get(x, "trend_gpus_per_day")));
        table_row(t, cells);
    }
    table_print(t, stdout);
    if (missed && strcmp(missed, "now") == 0)
        printf("p95 wait target %lld s: missed now (the replay's p95 wait is %.0f s)\n",
               (long long)jint(fc, "wait_target_s"),
               json_number_value(json_object_get(fc, "p95_wait_now_s")));
    else if (missed)
        printf("p95 wait target %lld s: missed from %s, when demand reaches %.2fx the replayed "
               "history's\n",
               (long long)jint(fc, "wait_target_s"),
               json_string_value(json_object_get(fc, "missed_on")),
               json_real_value(json_object_get(fc, "growth_at_target")));
    else
        printf("p95 wait target %lld s: met for the next %lld days (demand up to %.2fx the "
               "replayed history's)\n",
               (long long)jint(fc, "wait_target_s"), (long long)jint(fc, "horizon_days"),
               json_real_value(json_object_get(fc, "max_growth")));
}

/* ---- the scheduler's options ---- */

/* The queue options allotd runs with (GET /v1/scheduler) as the replay's. */
static int sched_opts(struct plan *p)
{
    char err[160];

    allot_queue_opts_tuned(&p->qo);
    p->qo.seed = 1;
    if (allot_queue_opts_from_json(&p->qo, p->sched, err, sizeof(err)) != 0) {
        cli_error("server", "GET /v1/scheduler: %s", err);
        return CLI_SERVER;
    }
    return CLI_OK;
}

/* ---- the verb ---- */

static int fetch(struct plan *p, struct client *cl)
{
    struct client_error err;
    json_t *me = NULL;
    const char *scope;
    int rc;

    /* a token of one tenant sees its subtree's jobs only: a replay of them
     * on the whole cluster would answer a question nobody asked */
    if ((rc = client_call(cl, "GET", "/v1/whoami", NULL, NULL, CLIENT_RETRY_ALWAYS, &me, NULL)) !=
        CLI_OK)
        return rc;
    scope = json_string_value(json_object_get(me, "tenant"));
    if (scope && *scope) {
        cli_error("denied",
                  "allot plan replays the whole cluster's jobs, and this token sees those of "
                  "%.200s only: use a token of the whole cluster (an admin, or a viewer with no "
                  "tenant)",
                  scope);
        json_decref(me);
        return CLI_DENIED;
    }
    json_decref(me);
    if ((rc = client_list(cl, "/v1/jobs", "jobs", "cursor", "next_cursor", 0, 0, &p->jobs)) !=
            CLI_OK ||
        (rc = client_call(cl, "GET", "/v1/nodes", NULL, NULL, CLIENT_RETRY_ALWAYS, &p->nodes,
                          NULL)) != CLI_OK ||
        (rc = client_call(cl, "GET", "/v1/tenants", NULL, NULL, CLIENT_RETRY_ALWAYS, &p->tenants,
                          NULL)) != CLI_OK ||
        (rc = client_call(cl, "GET", "/v1/scheduler", NULL, NULL, CLIENT_RETRY_ALWAYS, &p->sched,
                          NULL)) != CLI_OK ||
        (rc = sched_opts(p)) != CLI_OK)
        return rc;
    /* no price book is an expected answer (404): the costs stay empty; any
     * other refusal is an error, as for the calls above */
    rc = client_try_call(cl, "GET", "/v1/pricebook", NULL, CLIENT_RETRY_ALWAYS, &p->book, &err);
    if (rc != CLI_OK) {
        json_decref(p->book);
        p->book = NULL;
        if (err.status != 404)
            return err.status ? client_error_print(&err) : rc;
    }
    return CLI_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The recorded p95 wait (nearest rank, as the replay's figures). */
static double recorded_p95(const struct plan *p)
{
    size_t k;

    if (!p->rec_waited)
        return NAN;
    qsort(p->rec_waits, p->rec_waited, sizeof(*p->rec_waits), cmp_double);
    k = (size_t)ceil(0.95 * (double)p->rec_waited);
    return p->rec_waits[k > 0 ? k - 1 : 0];
}

static json_t *history_json(const struct plan *p, const struct scen *cur)
{
    json_t *w = json_object();
    char a[32], b[32];

    json_object_set_new(w, "jobs", json_integer((json_int_t)cur->s.n_jobs));
    json_object_set_new(w, "from", json_string(philly_format_time(cur->s.from, a, sizeof(a))));
    json_object_set_new(w, "to", json_string(philly_format_time(cur->s.to, b, sizeof(b))));
    json_object_set_new(w, "pending", json_integer((json_int_t)p->pending));
    json_object_set_new(w, "never_started", json_integer((json_int_t)p->never_ran));
    json_object_set_new(w, "no_gpus",
                        json_integer((json_int_t)p->no_gpus + (json_int_t)cur->s.zero));
    json_object_set_new(w, "running", json_integer((json_int_t)p->running));
    json_object_set_new(w, "other_tenants", json_integer((json_int_t)cur->s.other_vc));
    json_object_set_new(w, "too_big", json_integer((json_int_t)cur->s.too_big));
    json_object_set_new(w, "fractional_as_whole_gpus", json_integer((json_int_t)p->approx_gpus));
    json_object_set_new(w, "recorded_mean_wait_s",
                        p->rec_waited ? json_real(p->rec_wait_sum / (double)p->rec_waited)
                                      : json_null());
    json_object_set_new(w, "recorded_p95_wait_s", num_or_null(recorded_p95(p)));
    return w;
}

static void plan_free(struct plan *p)
{
    json_decref(p->jobs);
    json_decref(p->nodes);
    json_decref(p->tenants);
    json_decref(p->book);
    json_decref(p->sched);
    free(p->tenants_yaml);
    replay_trace_free(&p->tr);
    allot_free(p->rec_waits);
    for (int i = 0; i < p->n_quota; i++)
        allot_free(p->quota_names[i]);
    allot_catalog_free(p->cat);
}

int cmd_plan(struct cli *c, int argc, char **argv)
{
    struct plan p;
    struct cli_args a;
    struct client *cl;
    struct scen cur = {0}, chg = {0};
    const char *const *adds, *const *removes, *const *quotas;
    size_t n_add, n_remove, n_quota;
    int64_t target = 3600, days = 28;
    json_t *root = NULL;
    char err[256];
    int rc = args_parse(c, plan_opts, &plan_usage, argc, argv, &a);

    if (rc != CLI_OK)
        return rc;
    memset(&p, 0, sizeof(p));
    p.c = c;
    p.now = (int64_t)time(NULL);
    if (a.n_pos) {
        rc = cli_usage_error("allot plan takes no arguments (got %s)", a.pos[0]);
        goto out;
    }
    if (c->fmt == CLI_FMT_CSV || c->fmt == CLI_FMT_HTML) {
        rc = cli_usage_error("allot plan prints -o table, json or yaml");
        goto out;
    }
    if (!(p.cat = allot_catalog_default(err, sizeof(err)))) {
        cli_error("catalog", "%s", err);
        rc = CLI_SERVER;
        goto out;
    }
    adds = args_all(&a, "add", &n_add);
    removes = args_all(&a, "remove", &n_remove);
    quotas = args_all(&a, "quota", &n_quota);
    if (n_add + n_remove > PLAN_MAX_CHANGES) {
        rc = cli_usage_error("at most %d --add and --remove", PLAN_MAX_CHANGES);
        goto out;
    }
    for (size_t i = 0; i < n_remove; i++)
        for (size_t k = 0; k < i; k++)
            if (strcmp(removes[i], removes[k]) == 0) {
                rc = cli_usage_error("--remove %s given twice", removes[i]);
                goto out;
            }
    for (size_t i = 0; i < n_quota; i++)
        if ((rc = parse_quota(&p, quotas[i])) != CLI_OK)
            goto out;
    for (size_t i = 0; i < n_add; i++) {
        struct replay_node_group g;

        if (replay_parse_group(adds[i], p.cat, &g, err, sizeof(err)) < 0) {
            rc = cli_usage_error("--add: %s", err);
            goto out;
        }
    }
    if (args_get(&a, "since")) {
        int64_t s;

        if ((rc = args_seconds("since", args_get(&a, "since"), &s)) != CLI_OK)
            goto out;
        p.since = p.now - s;
    }
    if (args_get(&a, "wait-target") &&
        (rc = args_seconds("wait-target", args_get(&a, "wait-target"), &target)) != CLI_OK)
        goto out;
    if (args_get(&a, "horizon") &&
        (rc = args_int("horizon", args_get(&a, "horizon"), 1, 365, &days)) != CLI_OK)
        goto out;
    if ((args_has(&a, "wait-target") || args_has(&a, "horizon")) && !args_has(&a, "forecast")) {
        rc = cli_usage_error("--wait-target and --horizon go with --forecast");
        goto out;
    }
    p.changed = n_add || n_remove || n_quota;
    if (!(cl = cli_client(c))) {
        rc = CLI_USAGE;
        goto out;
    }
    if ((rc = fetch(&p, cl)) != CLI_OK || (rc = check_quota_tenants(&p)) != CLI_OK ||
        (rc = nodes_to_groups(&p, removes, n_remove)) != CLI_OK)
        goto out;
    for (size_t i = 0; i < n_add; i++) {
        struct replay_node_group g;
        int k;

        replay_parse_group(adds[i], p.cat, &g, err, sizeof(err));
        for (k = 0; k < p.n_chg; k++)
            if (p.chg[k].model_idx == g.model_idx && p.chg[k].gpus == g.gpus &&
                p.chg[k].cpu_milli == g.cpu_milli && p.chg[k].mem_mib == g.mem_mib)
                break;
        if (k < p.n_chg)
            p.chg[k].count += g.count;
        else if (p.n_chg < REPLAY_MAX_GROUPS)
            p.chg[p.n_chg++] = g;
    }
    if ((rc = tenants_to_yaml(&p)) != CLI_OK || (rc = jobs_to_trace(&p)) != CLI_OK ||
        (rc = scenario(&p, p.cur, p.n_cur, false, 1.0, &cur)) != CLI_OK)
        goto out;
    if (p.changed) {
        int total = 0;

        for (int k = 0; k < p.n_chg; k++)
            total += p.chg[k].count;
        if (total == 0) {
            rc = cli_usage_error("the changed cluster has no node with GPUs left");
            goto out;
        }
        if ((rc = scenario(&p, p.chg, p.n_chg, true, 1.0, &chg)) != CLI_OK)
            goto out;
    }
    root = json_object();
    json_object_set_new(root, "history", history_json(&p, &cur));
    json_object_set_new(root, "policy", json_string("allot"));
    /* the options the replays ran with, as allotd shows them */
    json_object_set_new(root, "scheduler", allot_queue_opts_json(&p.qo));
    if (p.book && json_is_string(json_object_get(p.book, "currency")))
        json_object_set(root, "currency", json_object_get(p.book, "currency"));
    json_object_set_new(root, "current", scen_json(&p, &cur));
    if (p.changed) {
        json_t *ch = json_array();

        for (size_t i = 0; i < n_add; i++)
            json_array_append_new(ch, json_pack("{ss}", "add", adds[i]));
        for (size_t i = 0; i < n_remove; i++)
            json_array_append_new(ch, json_pack("{ss}", "remove", removes[i]));
        for (size_t i = 0; i < n_quota; i++)
            json_array_append_new(ch, json_pack("{ss}", "quota", quotas[i]));
        json_object_set_new(root, "changes", ch);
        json_object_set_new(root, "changed", scen_json(&p, &chg));
    }
    if (args_has(&a, "forecast") && (rc = forecast(&p, &cur, target, days, root)) != CLI_OK)
        goto out;
    if (out_structured(c, root))
        goto out;
    print_side_by_side(&p, root);
    if (json_object_get(root, "forecast"))
        print_forecast(json_object_get(root, "forecast"));
    printf("\nreplayed under the allot policy with the scheduling options of this allotd (allot "
           "scheduler; \"scheduler\" in -o json); fractional and MIG jobs hold whole GPUs, costs "
           "are GPU time at the price book's GPU rates (docs/planning.md)\n");
out:
    json_decref(root);
    scenario_free(&cur);
    scenario_free(&chg);
    plan_free(&p);
    args_free(&a);
    return rc;
}
