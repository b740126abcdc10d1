/*
 * GET /v1/usage: allocated and measured use, grouped by tenant, user, job,
 * GPU model, item, day or hour, over whole hours (docs/metering.md). A user
 * is the submitting token's name within the jobs' tenant ("TENANT:NAME"):
 * token names are chosen per tenant, so alike names in two tenants are two
 * users.
 */
#include "meter.h"
#include "refs.h"
#include "server.h"

#include "allot/common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Rows in key order (then tenant): numbers (job ids) by value, the rest
 * (tenants, users, models, items, days, hours) as text, which is time
 * order for days and hours. */
static int cmp_row(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *kx = json_string_value(json_object_get(x, "key"));
    const char *ky = json_string_value(json_object_get(y, "key"));
    size_t lx = strlen(kx), ly = strlen(ky);
    bool nx = lx && strspn(kx, "0123456789") == lx, ny = ly && strspn(ky, "0123456789") == ly;
    int c = nx && ny && lx != ly ? (lx < ly ? -1 : 1) : strcmp(kx, ky);

    if (c)
        return c;
    const char *tx = json_string_value(json_object_get(x, "tenant"));
    const char *ty = json_string_value(json_object_get(y, "tenant"));
    return strcmp(tx ? tx : "", ty ? ty : "");
}

static void sort_rows(json_t *arr)
{
    size_t n = json_array_size(arr);
    json_t **v = n ? allot_calloc(n, sizeof(json_t *)) : NULL;

    if (!v)
        return; /* unsorted rather than none */
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort(v, n, sizeof(json_t *), cmp_row);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    allot_free(v);
}

static const char *const group_names[] = {"tenant", "user", "job",  "model",
                                          "item",   "day",  "hour", NULL};

/* The group key of row i of a (by = one of group_names). */
static void group_key(const struct meter_acc *a, size_t i, const char *by, bool split_tenant,
                      char *key, size_t len)
{
    const struct allot_store_usage *u = &a->rows[i];
    char k[512];

    if (!strcmp(by, "tenant"))
        allot_fmt(k, sizeof(k), "%s", u->tenant);
    else if (!strcmp(by, "user")) /* names are picked per tenant: alike ones are two users */
        allot_fmt(k, sizeof(k), "%s:%s", u->tenant, u->user);
    else if (!strcmp(by, "job"))
        allot_fmt(k, sizeof(k), "%lld", (long long)a->job[i]);
    else if (!strcmp(by, "model"))
        allot_fmt(k, sizeof(k), "%s", *u->model ? u->model : "(cpu)");
    else if (!strcmp(by, "item"))
        allot_fmt(k, sizeof(k), "%s", u->item);
    else {
        time_t t = (time_t)u->hour;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(k, sizeof(k), !strcmp(by, "day") ? "%Y-%m-%d" : "%Y-%m-%dT%H", &tm);
    }
    if (split_tenant && strcmp(by, "tenant") != 0)
        allot_fmt(key, len, "%s\x1f%s", k, u->tenant);
    else
        allot_fmt(key, len, "%s", k);
}

struct group {
    int64_t gpu_ppm_s, cpu_milli_s, mem_mib_s, util_pct_ms, util_ms, mem_peak, energy_mj,
        cpu_used_ms, jobs;
};

static void group_add(struct group *g, const struct allot_store_usage *u)
{
    g->gpu_ppm_s += u->gpu_ppm_s;
    g->cpu_milli_s += u->cpu_milli_s;
    g->mem_mib_s += u->mem_mib_s;
    g->util_pct_ms += u->util_pct_ms;
    g->util_ms += u->util_ms;
    g->cpu_used_ms += u->cpu_used_ms;
    if (u->gpu_mem_peak > g->mem_peak)
        g->mem_peak = u->gpu_mem_peak;
    if (u->energy_mj >= 0)
        g->energy_mj = (g->energy_mj < 0 ? 0 : g->energy_mj) + u->energy_mj;
}

static json_t *group_json(const struct group *g)
{
    double gpu_s = (double)g->gpu_ppm_s / 1e6;
    json_t *o = json_pack("{s:f,s:f,s:f,s:f,s:f,s:I}", "gpu_seconds", gpu_s, "gpu_hours",
                          gpu_s / 3600.0, "cpu_core_seconds", (double)g->cpu_milli_s / 1000.0,
                          "memory_gib_seconds", (double)g->mem_mib_s / 1024.0, "cpu_used_seconds",
                          (double)g->cpu_used_ms / 1000.0, "jobs", (json_int_t)g->jobs);

    /* how much of the time the GPU utilisation was measured (agents' samples) */
    json_object_set_new(o, "measured_seconds", json_real((double)g->util_ms / 1000.0));

    json_object_set_new(
        o, "sm_util_avg",
        g->util_ms > 0 ? json_real(round((double)g->util_pct_ms / (double)g->util_ms * 10.0) / 10.0)
                       : json_null());
    json_object_set_new(o, "gpu_memory_peak_bytes",
                        g->mem_peak >= 0 ? json_integer(g->mem_peak) : json_null());
    json_object_set_new(o, "energy_joules",
                        g->energy_mj >= 0 ? json_real((double)g->energy_mj / 1000.0) : json_null());
    return o;
}

/* The slot of key in groups (an object key -> index), grown as needed. */
static struct group *slot(json_t *index, struct group **arr, size_t *n, size_t *cap,
                          const char *key)
{
    json_t *ix = json_object_get(index, key);

    if (ix)
        return &(*arr)[json_integer_value(ix)];
    if (allot_grow((void **)arr, cap, *n + 1, sizeof(**arr)) < 0 ||
        json_object_set_new(index, key, json_integer((json_int_t)*n)) < 0)
        return NULL;
    memset(&(*arr)[*n], 0, sizeof(**arr));
    (*arr)[*n].mem_peak = -1;
    (*arr)[*n].energy_mj = -1;
    return &(*arr)[(*n)++];
}

bool meter_no_tenant(struct req *r, const char *tenant, bool empty)
{
    struct allot_store *st;

    if (!*tenant || !empty || !(st = srv_reader(r->srv)) ||
        refs_tenant_known(r->srv, st, tenant) != 0)
        return false;
    api_error(r, 404, "not_found", "no such tenant: %s (not in the tenant tree, no usage then)",
              tenant);
    return true;
}

int api_usage(struct req *r)
{
    const char *by = api_query(r, "by") ? api_query(r, "by") : "tenant";
    const char *tenant = api_query(r, "tenant") ? api_query(r, "tenant") : "";
    const char *split = api_query(r, "split");
    int64_t now = srv_now(), from, to;
    bool known = false, split_tenant;
    struct meter_acc rows, jobs;
    int rc;

    for (const char *const *g = group_names; *g; g++)
        known |= !strcmp(*g, by);
    if (!known)
        return api_error(r, 400, "bad_request",
                         "by: one of tenant, user, job, model, item, day, hour (got \"%s\")", by);
    if (split && strcmp(split, "tenant") != 0)
        return api_error(r, 400, "bad_request", "split: only \"tenant\" (got \"%s\")", split);
    /* by=user rows always carry their tenant, as with split=tenant */
    split_tenant = split != NULL || !strcmp(by, "user");
    if (api_query(r, "from")) {
        if (!meter_parse_time(api_query(r, "from"), &from))
            return api_error(r, 400, "bad_request",
                             "from: unix seconds, YYYY-MM-DD or YYYY-MM (got \"%s\")",
                             api_query(r, "from"));
    } else {
        int64_t end;
        meter_month_of(now, &from, &end); /* this month */
    }
    if (api_query(r, "to")) {
        if (!meter_parse_time(api_query(r, "to"), &to))
            return api_error(r, 400, "bad_request",
                             "to: unix seconds, YYYY-MM-DD or YYYY-MM (got \"%s\")",
                             api_query(r, "to"));
    } else
        to = now + 1;
    from -= ((from % 3600) + 3600) % 3600;
    to += (3600 - ((to % 3600) + 3600) % 3600) % 3600;
    if (to <= from && !api_query(r, "to"))
        return api_error(r, 400, "bad_request",
                         "from is in the future: no usage is metered there yet (from %s, now %lld)",
                         api_query(r, "from"), (long long)now);
    if (to <= from)
        return api_error(r, 400, "bad_request", "to must be after from (from %s, to %s)",
                         api_query(r, "from") ? api_query(r, "from") : "this month",
                         api_query(r, "to"));
    if (to - from > 400LL * 86400)
        return api_error(r, 400, "bad_request", "at most 400 days at once");
    /* per job, every sample of the window is read (not the hourly roll-ups) */
    if (!strcmp(by, "job") && to - from > 32LL * 86400)
        return api_error(r, 400, "bad_request",
                         "by=job: at most 32 days at once (it reads every sample of the window); "
                         "ask month by month");
    if (*tenant && !auth_sees_tenant(&r->who, tenant) && !auth_in_scope(tenant, r->who.tenant))
        return api_error(r, 404, "not_found", "no such tenant: %s", tenant);

    bool per_job = !strcmp(by, "job");
    rc = meter_query(r, from, to, tenant, per_job, &rows, per_job ? NULL : &jobs);
    if (rc) {
        meter_acc_free(&rows);
        if (!per_job)
            meter_acc_free(&jobs);
        return api_error(r, 500, "internal", "usage: %s", allot_strerror(rc));
    }

    if (meter_no_tenant(r, tenant, rows.n == 0 && (per_job || jobs.n == 0))) {
        meter_acc_free(&rows);
        if (!per_job)
            meter_acc_free(&jobs);
        return 0;
    }
    json_t *index = json_object(), *seen = json_object();
    struct group *groups = NULL, total;
    size_t n = 0, cap = 0;
    char key[600];
    bool fail = !index || !seen;

    memset(&total, 0, sizeof(total));
    total.mem_peak = -1;
    total.energy_mj = -1;
    for (size_t i = 0; !fail && i < rows.n; i++) {
        struct group *g;

        group_key(&rows, i, by, split_tenant, key, sizeof(key));
        if (!(g = slot(index, &groups, &n, &cap, key))) {
            fail = true;
            break;
        }
        group_add(g, &rows.rows[i]);
        group_add(&total, &rows.rows[i]);
        if (per_job)
            g->jobs = 1;
    }
    /* jobs: distinct per group, from the allocation rows per job */
    struct meter_acc *ja = per_job ? &rows : &jobs;
    for (size_t i = 0; !fail && i < ja->n; i++) {
        char sk[700];
        struct group *g;

        group_key(ja, i, by, split_tenant, key, sizeof(key));
        if (!(g = slot(index, &groups, &n, &cap, key))) {
            fail = true;
            break;
        }
        allot_fmt(sk, sizeof(sk), "%s\x1e%lld", key, (long long)ja->job[i]);
        if (!per_job && !json_object_get(seen, sk)) {
            json_object_set_new(seen, sk, json_true());
            g->jobs++;
        }
        allot_fmt(sk, sizeof(sk), "\x1d%lld", (long long)ja->job[i]);
        if (!json_object_get(seen, sk)) {
            json_object_set_new(seen, sk, json_true());
            total.jobs++;
        }
    }
    json_t *out = NULL;
    if (!fail) {
        json_t *arr = json_array();
        const char *k;
        json_t *v;

        json_object_foreach(index, k, v)
        {
            json_t *o = group_json(&groups[json_integer_value(v)]);
            const char *sep = strchr(k, '\x1f');

            if (sep) {
                json_object_set_new(o, "key", json_stringn(k, (size_t)(sep - k)));
                json_object_set_new(o, "tenant", json_string(sep + 1));
            } else
                json_object_set_new(o, "key", json_string(k));
            json_array_append_new(arr, o);
        }
        sort_rows(arr);
        out = json_pack("{s:I,s:I,s:s,s:o,s:o,s:I}", "from", (json_int_t)from, "to", (json_int_t)to,
                        "by", by, "rows", arr, "totals", group_json(&total), "as_of",
                        (json_int_t)atomic_load(&r->srv->meter_at));
    }
    allot_free(groups);
    json_decref(index);
    json_decref(seen);
    meter_acc_free(&rows);
    if (!per_job)
        meter_acc_free(&jobs);
    if (!out)
        return api_error(r, 500, "internal", "out of memory");
    return api_json(r, 200, out);
}

/* The entries of `all` (stolen) whose tenant the caller sees, within the
 * ?tenant= subtree. */
static json_t *visible(struct req *r, json_t *all)
{
    const char *tenant = api_query(r, "tenant") ? api_query(r, "tenant") : "";
    json_t *out = json_array(), *x;
    size_t i;

    json_array_foreach(all, i, x)
    {
        const char *t = json_string_value(json_object_get(x, "tenant"));
        if (t && auth_sees_tenant(&r->who, t) && auth_in_scope(tenant, t))
            json_array_append(out, x);
    }
    json_decref(all);
    return out;
}

int api_idle(struct req *r)
{
    return api_json(r, 200,
                    json_pack("{s:o,s:I,s:I,s:I}", "jobs", visible(r, meter_idle_jobs()),
                              "threshold", (json_int_t)r->srv->cfg.idle_threshold, "window_s",
                              (json_int_t)(r->srv->cfg.idle_window / 1000), "as_of",
                              (json_int_t)atomic_load(&r->srv->meter_at)));
}

int api_anomalies(struct req *r)
{
    return api_json(r, 200,
                    json_pack("{s:o,s:I}", "anomalies", visible(r, meter_anomaly_list()), "as_of",
                              (json_int_t)atomic_load(&r->srv->meter_at)));
}
