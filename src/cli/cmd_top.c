/*
 * `allot top`: a live view of the cluster built from GET /v1/nodes, the
 * job listings of the live states and GET /v1/tenants: GPUs in use per
 * tenant beside its nominal GPU quota, and the queue
 * of pending jobs with their reasons. GPUs in use are counted from each
 * placed task's placement: whole GPUs by count, fractions by their
 * GPU-equivalents as metering counts them (docs/metering.md: the larger of
 * gpu_milli and the share of the GPU's memory, so a fraction that asks for
 * GPU memory only counts too), MIG instances separately (their share of a
 * GPU depends on the model).
 *
 * On a terminal it redraws every --interval until interrupted or until
 * --count snapshots; otherwise (a pipe, -o json|yaml) it prints one
 * snapshot unless --count says more.
 */
#include "cli.h"

#include "allot/catalog.h"
#include "allot/cluster.h"
#include "allot/common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>

static const struct cli_opt top_opts[] = {
    {"interval", 'i', "SECONDS", "time between two snapshots (default 2)"},
    {"count", 'n', "N", "stop after N snapshots (default: 1 unless on a terminal)"},
    {"tenant", 't', "TENANT", "only this tenant and the tenants below it"},
    {"queue", 'q', "N", "show at most N pending jobs (default 20)"},
    {NULL, 0, NULL, NULL}};

static const struct cli_usage top_usage = {
    "top", "[--interval S] [--count N] [--tenant T] [--queue N]",
    "A live view of the cluster: nodes and GPUs, GPUs in use and jobs per\n"
    "tenant, and the queue of pending jobs with their pending reasons.\n"
    "With -o json|yaml: one document per snapshot."};

/* The per-tenant row of `path` in rows, created when missing. */
static json_t *tenant_row(json_t *rows, const char *path)
{
    size_t i;
    json_t *x;

    json_array_foreach(rows, i, x)
    {
        if (!strcmp(json_string_value(json_object_get(x, "tenant")), path))
            return x;
    }
    x = json_pack("{s:s,s:i,s:i,s:i,s:f,s:i}", "tenant", path, "running", 0, "starting", 0,
                  "pending", 0, "gpus", 0.0, "mig", 0);
    json_array_append_new(rows, x);
    return x;
}

static void add_int(json_t *o, const char *k, json_int_t d)
{
    json_object_set_new(o, k, json_integer(json_integer_value(json_object_get(o, k)) + d));
}

/* The GPU-equivalents of a fraction on one GPU, as metering counts them
 * (docs/metering.md, meter_task_share): the larger of its compute share
 * (gpu_milli) and its memory share (gpu_memory over its model's memory in
 * `cat`), at most 1. A memory-only fraction (gpu_milli 0) holds no compute
 * share in the core but its memory; that share is what it counts. A model
 * `cat` does not know (or no catalog) leaves the compute share. */
static double fraction_share(const struct allot_catalog *cat, json_t *t)
{
    json_int_t milli = json_integer_value(json_object_get(t, "gpu_milli"));
    json_int_t mem = json_integer_value(json_object_get(t, "gpu_memory"));
    const char *model = json_string_value(json_object_get(t, "model"));
    int idx = cat && model ? allot_catalog_find_model(cat, model) : -1;
    int64_t cap = idx >= 0 ? cat->models[idx].memory_mib : 0;
    double by_sm = milli > 0 ? (double)milli / ALLOT_MILLI : 0.0;
    double by_mem = cap > 0 && mem > 0 ? (double)mem / (double)cap : 0.0;
    double share = by_sm > by_mem ? by_sm : by_mem;

    return share < 1.0 ? share : 1.0;
}

/* GPUs a placed job holds: whole and fractional (fraction_share); MIG
 * instances apart. A task is a fraction when it holds less than a whole
 * GPU's compute or asks for GPU memory without compute (the placement's
 * gpu_milli is then 0), as metering tells them apart. */
static void job_gpus(const struct allot_catalog *cat, json_t *job, double *gpus, int *mig)
{
    size_t i;
    json_t *t;

    json_array_foreach(json_object_get(json_object_get(job, "placement"), "tasks"), i, t)
    {
        size_t n = json_array_size(json_object_get(t, "gpus"));
        json_int_t milli = json_integer_value(json_object_get(t, "gpu_milli"));
        json_int_t mem = json_integer_value(json_object_get(t, "gpu_memory"));

        if (json_object_get(t, "mig_profile"))
            *mig += 1;
        else if (milli >= ALLOT_MILLI || (milli <= 0 && mem <= 0))
            *gpus += (double)n;
        else
            *gpus += fraction_share(cat, t) * (double)n;
    }
}

/* Sets each row's "gpu_quota": the tenant's nominal GPU quota (a number,
 * "unlimited", or null when it has none of its own). */
static int by_tenant(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "tenant")),
                  json_string_value(json_object_get(*(json_t *const *)b, "tenant")));
}

/* Rows sorted by tenant path (they come in the order the jobs were read). */
static void sort_rows(json_t *rows)
{
    size_t n = json_array_size(rows);
    json_t **v = n ? allot_calloc(n, sizeof(json_t *)) : NULL;

    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(rows, i));
    qsort(v, n, sizeof(json_t *), by_tenant);
    json_array_clear(rows);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(rows, v[i]);
    allot_free(v);
}

static int add_quotas(struct client *cl, json_t *rows)
{
    json_t *doc = NULL, *row, *t;
    size_t i, k;
    int rc = client_call(cl, "GET", "/v1/tenants", NULL, NULL, CLIENT_RETRY_ALWAYS, &doc, NULL);

    if (rc != CLI_OK)
        return rc;
    json_array_foreach(rows, i, row)
    {
        json_t *q = NULL;
        const char *path = json_string_value(json_object_get(row, "tenant"));

        json_array_foreach(json_object_get(doc, "tenants"), k, t)
        {
            const char *p = json_string_value(json_object_get(t, "path"));
            if (p && path && !strcmp(p, path))
                q = json_object_get(json_object_get(t, "quotas"), "gpu");
        }
        if (json_is_object(q))
            q = json_object_get(q, "nominal");
        json_object_set(row, "gpu_quota", q ? q : json_null());
    }
    json_decref(doc);
    return CLI_OK;
}

static int snapshot(struct cli *c, const struct allot_catalog *cat, const char *tenant,
                    size_t queue_max, json_t **out)
{
    static const char *const states[] = {"running", "starting", "pending"};
    struct client *cl = c->http;
    json_t *nodes = NULL, *snap, *rows, *queue, *x;
    long long n_ready = 0, gpus_total = 0, n_jobs[3] = {0};
    double used = 0;
    int mig = 0, rc;
    size_t i;
    char path[512];

    *out = NULL;
    rc = client_call(cl, "GET", "/v1/nodes", NULL, NULL, CLIENT_RETRY_ALWAYS, &nodes, NULL);
    if (rc != CLI_OK)
        return rc;
    json_array_foreach(json_object_get(nodes, "nodes"), i, x)
    {
        const char *st = json_string_value(json_object_get(x, "state"));

        n_ready += st && !strcmp(st, "ready");
        gpus_total +=
            (long long)json_array_size(json_object_get(json_object_get(x, "inventory"), "gpus"));
    }
    rows = json_array();
    queue = json_array();
    for (int s = 0; s < 3 && rc == CLI_OK; s++) {
        json_t *jobs = NULL;
        char *esc = tenant ? client_escape(cl, tenant) : NULL;

        allot_fmt(path, sizeof(path), "/v1/jobs?state=%s%s%s", states[s],
                  tenant ? "&subtree=1&tenant=" : "", esc ? esc : "");
        allot_free(esc);
        rc = client_list(cl, path, "jobs", "cursor", "next_cursor", 0, 0, &jobs);
        json_array_foreach(jobs, i, x)
        {
            const char *tn = json_string_value(json_object_get(x, "tenant"));
            json_t *row = tenant_row(rows, tn ? tn : "");
            double g = 0;
            int m = 0;

            n_jobs[s]++;
            add_int(row, states[s], 1);
            if (s < 2) {
                job_gpus(cat, x, &g, &m);
                json_object_set_new(row, "gpus",
                                    json_real(json_real_value(json_object_get(row, "gpus")) + g));
                add_int(row, "mig", m);
                used += g;
                mig += m;
            } else if (json_array_size(queue) < queue_max) {
                json_array_append(queue, x);
            }
        }
        json_decref(jobs);
    }
    if (rc == CLI_OK)
        rc = add_quotas(cl, rows);
    sort_rows(rows);
    if (rc != CLI_OK) {
        json_decref(rows);
        json_decref(queue);
        json_decref(nodes);
        return rc;
    }
    /* the jobs (and so what is allocated) are those of the tenant asked
     * for, or those a tenant-bound token sees: say whose */
    json_t *me = NULL;
    const char *scope = tenant;
    if (!scope && client_call(cl, "GET", "/v1/whoami", NULL, NULL, CLIENT_RETRY_ALWAYS, &me,
                              NULL) == CLI_OK) {
        const char *mine = json_string_value(json_object_get(me, "tenant"));
        if (mine && *mine)
            scope = mine;
    }
    snap = json_pack("{s:I,s:{s:I,s:I},s:{s:I,s:f,s:i},s:{s:I,s:I,s:I},s:o,s:o}", "time",
                     (json_int_t)time(NULL), "nodes", "total",
                     (json_int_t)json_array_size(json_object_get(nodes, "nodes")), "ready",
                     (json_int_t)n_ready, "gpus", "total", (json_int_t)gpus_total, "allocated",
                     round(used * 1000.0) / 1000.0, "mig_instances", mig, "jobs", "running",
                     (json_int_t)n_jobs[0], "starting", (json_int_t)n_jobs[1], "pending",
                     (json_int_t)n_jobs[2], "tenants", rows, "queue", queue);
    if (snap)
        json_object_set_new(snap, "scope", scope ? json_string(scope) : json_null());
    json_decref(me);
    json_decref(nodes);
    *out = snap;
    return snap ? CLI_OK : CLI_SERVER;
}

/* Prints one line of at most `width` display columns (0: any). */
static void put_line(size_t width, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_line(size_t width, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (width)
        out_cut(line, width);
    puts(line);
}

/* The terminal's width in columns (its window, else $COLUMNS, else 80). */
static size_t term_width(void)
{
    struct winsize ws;
    const char *e = getenv("COLUMNS");
    long v;

    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    v = e ? strtol(e, NULL, 10) : 0;
    return v > 0 && v < 10000 ? (size_t)v : 80;
}

/* Prints snapshot s; on a terminal (width > 0) every line fits its width:
 * a live view that wraps scrolls its header away at each redraw. */
static void print_snapshot(struct cli *c, json_t *s, size_t width)
{
    static const char *const ttitles[] = {"TENANT",  "GPUS",     "QUOTA",  "MIG",
                                          "RUNNING", "STARTING", "PENDING"};
    static const char *const qtitles[] = {"ID", "TENANT", "NAME", "PRIORITY", "WAITING", "REASON"};
    json_t *n = json_object_get(s, "nodes"), *g = json_object_get(s, "gpus");
    json_t *j = json_object_get(s, "jobs"), *x;
    char tm[32];
    size_t i;
    time_t now = (time_t)json_integer_value(json_object_get(s, "time"));

    put_line(width, "allot top  %s  %s", out_time(json_object_get(s, "time"), tm, sizeof(tm)),
             c->conf.server);
    const char *scope = json_string_value(json_object_get(s, "scope"));
    /* the cluster's nodes and GPUs; what is allocated and the jobs are the
     * scope's when there is one (a tenant's jobs, not the cluster's) */
    put_line(width,
             "nodes %lld (%lld ready)  GPUs %lld%s%s%s %.3g allocated, %lld MIG instances  "
             "jobs %lld running, %lld starting, %lld pending",
             (long long)json_integer_value(json_object_get(n, "total")),
             (long long)json_integer_value(json_object_get(n, "ready")),
             (long long)json_integer_value(json_object_get(g, "total")), scope ? "  tenant " : "",
             scope ? scope : "", scope ? ":" : ",",
             json_real_value(json_object_get(g, "allocated")),
             (long long)json_integer_value(json_object_get(g, "mig_instances")),
             (long long)json_integer_value(json_object_get(j, "running")),
             (long long)json_integer_value(json_object_get(j, "starting")),
             (long long)json_integer_value(json_object_get(j, "pending")));
    putchar('\n');
    struct table *t = table_new(sizeof(ttitles) / sizeof(ttitles[0]), ttitles);
    json_array_foreach(json_object_get(s, "tenants"), i, x)
    {
        char b[6][32];
        allot_fmt(b[0], sizeof(b[0]), "%.3g", json_real_value(json_object_get(x, "gpus")));
        const char *cells[7] = {json_string_value(json_object_get(x, "tenant")),
                                b[0],
                                out_cell(json_object_get(x, "gpu_quota"), b[5], sizeof(b[5])),
                                out_cell(json_object_get(x, "mig"), b[1], sizeof(b[1])),
                                out_cell(json_object_get(x, "running"), b[2], sizeof(b[2])),
                                out_cell(json_object_get(x, "starting"), b[3], sizeof(b[3])),
                                out_cell(json_object_get(x, "pending"), b[4], sizeof(b[4]))};
        table_row(t, cells);
    }
    table_fit(t, width);
    table_print(t, stdout);
    printf("\nQUEUE (pending, oldest first)\n");
    t = table_new(sizeof(qtitles) / sizeof(qtitles[0]), qtitles);
    json_array_foreach(json_object_get(s, "queue"), i, x)
    {
        char id[32], w[32];
        long long since = (long long)(now - json_integer_value(json_object_get(x, "submit_time")));

        allot_fmt(w, sizeof(w), "%lldm%02llds", since / 60, since % 60);
        const char *cells[6] = {
            out_cell(json_object_get(x, "id"), id, sizeof(id)),
            json_string_value(json_object_get(x, "tenant")),
            json_string_value(json_object_get(x, "name")),
            json_string_value(json_object_get(json_object_get(x, "spec"), "priority")),
            w,
            json_string_value(json_object_get(x, "pending_reason"))};
        table_row(t, cells);
    }
    table_fit(t, width);
    table_print(t, stdout);
}

int cmd_top(struct cli *c, int argc, char **argv)
{
    struct cli_args a;
    struct allot_catalog *cat = NULL;
    const char *s;
    char err[256];
    int64_t interval = 2, count = 0, qmax = 20;
    int rc = args_parse(c, top_opts, &top_usage, argc, argv, &a);
    bool tty = isatty(STDOUT_FILENO) && c->fmt == CLI_FMT_TABLE;

    if (rc != CLI_OK)
        return rc;
    if (a.n_pos) {
        rc = cli_usage_error("unexpected argument \"%s\"", a.pos[0]);
        goto out;
    }
    if (((s = args_get(&a, "interval")) && (rc = args_int("interval", s, 1, 3600, &interval))) ||
        ((s = args_get(&a, "count")) && (rc = args_int("count", s, 1, INT64_MAX, &count))) ||
        ((s = args_get(&a, "queue")) && (rc = args_int("queue", s, 0, 100000, &qmax))))
        goto out;
    if (!count && !tty)
        count = 1;
    if (!cli_client(c)) {
        rc = CLI_USAGE;
        goto out;
    }
    /* a tenant that is not in the tree is a mistyped name, as for ls */
    if ((s = args_get(&a, "tenant")) && (rc = tenants_known(c, s)) != CLI_OK) {
        if (rc == CLI_NOTFOUND)
            cli_error("not_found", "no tenant %s (see allot tenants)", s);
        goto out;
    }
    /* the GPU models' memory, for the share of memory-only fractions; the
     * embedded catalog fails only without memory, and then fractions count
     * by their compute share alone */
    cat = allot_catalog_default(err, sizeof(err));
    for (int64_t k = 0; !count || k < count; k++) {
        json_t *snap = NULL;

        if (k) {
            struct timespec ts = {.tv_sec = (time_t)interval};
            nanosleep(&ts, NULL);
        }
        if ((rc = snapshot(c, cat, args_get(&a, "tenant"), (size_t)qmax, &snap)) != CLI_OK)
            break;
        if (tty)
            fputs("\033[H\033[2J", stdout);
        if (!out_structured(c, snap))
            print_snapshot(c, snap, tty ? term_width() : 0);
        fflush(stdout);
        json_decref(snap);
    }
out:
    allot_catalog_free(cat);
    args_free(&a);
    return rc;
}
