/*
 * bench/cluster: allotd filling a 1,024-node cluster. A fresh allotd is
 * started in a temporary folder on 127.0.0.1:0 (lease 10 minutes, so
 * the emulated agents need not heartbeat during the run); the tenants
 * a1..a4 (weights 40/30/20/10) and the tokens are created through the
 * API; 1,024 emulated nodes x 8 GPUs register through the agent API.
 * Then 64 keep-alive clients submit the mix of `jobmix.sh 5000` (1-8
 * GPUs, four accounts, three QoS levels as priority classes) while the
 * scheduling loop runs, and /metrics is polled every 20 ms. The fill
 * time runs from the first submission to the last change of the number
 * of started jobs, once it has not changed for --quiet seconds (and at
 * least two scheduling cycles); it includes the submissions (Slurm's
 * figure starts from a full queue), so the time from the last
 * submission's reply is printed too. Afterwards every node heartbeats
 * once: the desired states it gets back must hold as many GPUs as the
 * metrics say, and no pending job may fit any node's free GPUs (else the
 * fill was not over: printed, not asserted). With --stored N (off by
 * default: slow, see docs/benchmarks.md) more of the mix is then
 * submitted into the full cluster until N jobs are stored (<= 600 s).
 * Second, on a fresh allotd, the fill from a full queue: the 5,000 jobs
 * are submitted before any node exists, then the nodes register (the
 * fill time runs from the first registration). Third, the same with
 * --rss-jobs (100,000) jobs queued: allotd's RSS with that many stored.
 * Prints:
 *   nodes=1024 jobs=5000 fill_s=X placed_per_s=Y rss_mib=Z ...
 *   queued_first nodes=1024 jobs=5000 fill_s=X placed_per_s=Y rss_mib=Z ...
 *   queued_first nodes=1024 jobs=100000 ... rss_mib=M ...
 * Every loop is bounded in count and time. Figures only.
 */
#include "benchlib.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GPUS_PER_NODE 8

struct fill {
    const struct bench_job *mix;
    long n_mix;
    char member[4][128];
    const char *agent;
    long next, limit;
    const char *key_prefix;
    /* metrics polling */
    struct bench_conn *mc;
    double t0, last_poll, last_change, started, pending, gpus_alloc, cycles;
    /* heartbeat pass */
    int hb_next, hb_nodes;
    long hb_gpus, hb_tasks;
    int *node_used;
};

struct opts {
    int nodes, clients, queued_first, concurrent;
    long jobs, stored, rss_jobs;
    double quiet;
    const char *mix;
};

static const char *const gauges[] = {"allot_jobs{state=\"running\"}",
                                     "allot_jobs{state=\"pending\"}", "allot_gpus_allocated",
                                     "allot_sched_cycle_seconds_count"};

/* Reads the gauges; notes when the number of started jobs changed. */
static void poll_metrics(struct fill *f)
{
    double v[4];
    double now = bench_now();

    f->last_poll = now;
    if (bench_metrics(f->mc, gauges, v, 4) < 0)
        return;
    if (v[0] != f->started)
        f->last_change = now;
    f->started = v[0];
    f->pending = v[1];
    f->gpus_alloc = v[2];
    f->cycles = v[3];
}

static void tick(void *ud)
{
    struct fill *f = ud;

    if (bench_now() - f->last_poll >= 0.02)
        poll_metrics(f);
}

static size_t next_submit(void *ud, int k, char *buf, size_t cap)
{
    struct fill *f = ud;
    const struct bench_job *j;
    char body[512], key[96];

    (void)k;
    if (f->next >= f->limit)
        return 0;
    j = &f->mix[f->next % f->n_mix];
    snprintf(key, sizeof(key), "Idempotency-Key: %s-%ld\r\n", f->key_prefix, f->next);
    f->next++;
    if (!bench_job_body(body, sizeof(body), j))
        return 0;
    return bench_format_request(buf, cap, "POST", "/v1/jobs", f->member[j->account - 1], key, body);
}

static void bad_reply(void *ud, int k, int status, const char *body, size_t len)
{
    static int shown;

    (void)ud;
    (void)k;
    if ((status < 200 || status > 299) && shown++ < 5)
        fprintf(stderr, "bench-cluster: %d: %.*s\n", status, (int)(len > 300 ? 300 : len), body);
}

static size_t next_heartbeat(void *ud, int k, char *buf, size_t cap)
{
    struct fill *f = ud;
    char path[64];

    (void)k;
    if (f->hb_next >= f->hb_nodes)
        return 0;
    f->hb_next++;
    snprintf(path, sizeof(path), "/v1/nodes/n%04d/heartbeat", f->hb_next);
    return bench_format_request(buf, cap, "POST", path, f->agent, NULL, "{}");
}

/* Counts the GPUs of the tasks in a heartbeat's desired state. */
static void heartbeat_reply(void *ud, int k, int status, const char *body, size_t len)
{
    struct fill *f = ud;
    json_t *o, *t;
    const char *node;
    size_t i;

    (void)k;
    if (status != 200)
        return bad_reply(ud, k, status, body, len);
    o = json_loadb(body, len, 0, NULL);
    node = json_string_value(json_object_get(o, "node"));
    json_array_foreach(json_object_get(o, "jobs"), i, t)
    {
        long g = (long)json_array_size(json_object_get(t, "gpus"));

        f->hb_gpus += g;
        f->hb_tasks++;
        if (node && node[0] == 'n') {
            long n = strtol(node + 1, NULL, 10);
            if (n >= 1 && n <= f->hb_nodes)
                f->node_used[n - 1] += (int)g;
        }
    }
    json_decref(o);
}

/* Smallest GPU count among pending jobs (admin list, paged), or 0. */
static int min_pending_gpus(struct bench_conn *c, const char *admin, long *n_pending)
{
    long cursor = 0;
    int min = 0;

    *n_pending = 0;
    for (int page = 0; page < 1000; page++) {
        char path[128];
        const char *body;
        int st = 0;
        json_t *o, *j;
        size_t i;

        snprintf(path, sizeof(path), "/v1/jobs?state=pending&limit=1000%s%ld",
                 cursor ? "&cursor=" : "", cursor);
        if (!cursor)
            path[strlen(path) - 1] = '\0'; /* drop the "0" */
        if (bench_call(c, "GET", path, admin, NULL, NULL, &st, &body) < 0 || st != 200)
            return -1;
        o = json_loads(body, 0, NULL);
        json_array_foreach(json_object_get(o, "jobs"), i, j)
        {
            int g = (int)json_integer_value(json_object_get(json_object_get(j, "spec"), "gpus"));
            if (g > 0 && (!min || g < min))
                min = g;
            (*n_pending)++;
        }
        cursor = (long)json_integer_value(json_object_get(o, "next_cursor"));
        json_decref(o);
        if (!cursor)
            break;
    }
    return min;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench-cluster [--nodes 1024] [--jobs 5000] [--clients 64] "
                    "[--stored 0] [--quiet 3] [--queued-first 1] [--rss-jobs 100000]\n"
                    "       [--concurrent 1] [--mix jobs.tsv]\n"
                    "  allotd is $ALLOTD or the one next to this program\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -1;
        if (!strcmp(argv[i], "--nodes"))
            o->nodes = (int)strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--jobs"))
            o->jobs = strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--clients"))
            o->clients = (int)strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--stored"))
            o->stored = strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--quiet"))
            o->quiet = strtod(v, NULL);
        else if (!strcmp(argv[i], "--rss-jobs"))
            o->rss_jobs = strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--concurrent"))
            o->concurrent = (int)strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--queued-first"))
            o->queued_first = (int)strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--mix"))
            o->mix = v;
        else
            return -1;
    }
    return o->nodes < 1 || o->nodes > 9999 || o->jobs < 1 || o->clients < 1 || o->clients > 1024 ||
                   o->quiet <= 0
               ? -1
               : 0;
}

/* Waits (<= 30 s) until the loop has added every registered node. */
static int wait_nodes(struct bench_conn *c, int nodes)
{
    double end = bench_now() + 30, v = 0;

    while (bench_now() < end) {
        if (bench_metric(c, "allot_nodes", &v) == 0 && (int)v == nodes)
            return 0;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "bench-cluster: only %.0f of %d nodes in the scheduler\n", v, nodes);
    return -1;
}

/* Waits until the number of started jobs stops changing: --quiet
 * seconds and two cycles after the last change (bounded: 300 s from
 * t0). Returns the fill time, t0 to the last change. */
static double wait_quiet(struct fill *f, const struct opts *o)
{
    for (double cyc_at_change = f->cycles; bench_now() < f->t0 + 300;) {
        double before = f->last_change;
        struct timespec ts = {0, 20000000};

        poll_metrics(f);
        if (f->last_change != before)
            cyc_at_change = f->cycles;
        if (bench_now() - f->last_change >= o->quiet && f->cycles >= cyc_at_change + 2)
            break;
        nanosleep(&ts, NULL);
    }
    return f->last_change - f->t0;
}

/* The fill; prints its line. Returns 0 or -1. */
static int fill_run(struct bench_daemon *d, struct fill *f, const struct opts *o)
{
    struct bench_load L = {.port = d->port,
                           .clients = o->clients,
                           .max_s = 300,
                           .next = next_submit,
                           .reply = bad_reply,
                           .tick = tick,
                           .ud = f};
    double submitted_at, cycles0, fill_s;
    long n_pending = 0;
    int min_pend, max_free = 0, rc = -1;

    poll_metrics(f);
    cycles0 = f->cycles;
    f->limit = o->jobs;
    f->key_prefix = "fill";
    f->t0 = bench_now();
    f->last_change = f->t0;
    if (bench_load_run(&L) < 0)
        goto out;
    submitted_at = bench_now();
    fill_s = wait_quiet(f, o);
    /* every node heartbeats once: what the agents would be told */
    f->hb_nodes = o->nodes;
    struct bench_load H = {.port = d->port,
                           .clients = 16,
                           .max_s = 120,
                           .next = next_heartbeat,
                           .reply = heartbeat_reply,
                           .ud = f};
    if (bench_load_run(&H) < 0)
        goto out;
    for (int i = 0; i < o->nodes; i++)
        if (GPUS_PER_NODE - f->node_used[i] > max_free)
            max_free = GPUS_PER_NODE - f->node_used[i];
    min_pend = min_pending_gpus(f->mc, d->admin, &n_pending);
    printf("nodes=%d jobs=%ld fill_s=%.3f placed_per_s=%.0f rss_mib=%.1f "
           "submit_s=%.3f after_last_submit_s=%.3f started=%.0f pending=%.0f "
           "gpus_alloc=%.0f/%d hwm_mib=%.1f submit_p50_ms=%.2f submit_p99_ms=%.2f "
           "submit_errors=%zu cycles=%.0f\n",
           o->nodes, o->jobs, fill_s, fill_s > 0 ? f->started / fill_s : 0.0,
           (double)bench_proc_kib(d->pid, "VmRSS") / 1024.0, L.wall_s,
           fill_s > submitted_at - f->t0 ? fill_s - (submitted_at - f->t0) : 0.0, f->started,
           f->pending, f->gpus_alloc, o->nodes * GPUS_PER_NODE,
           (double)bench_proc_kib(d->pid, "VmHWM") / 1024.0,
           bench_percentile(L.lat_ms, L.n_lat, 50), bench_percentile(L.lat_ms, L.n_lat, 99),
           L.n_bad, f->cycles - cycles0);
    printf("check heartbeats=%d in %.3f s (%.0f/s): desired tasks=%ld gpus=%ld (metrics %.0f); "
           "pending listed=%ld, smallest pending=%d GPUs, most free on a node=%d: %s\n",
           f->hb_nodes, H.wall_s, H.wall_s > 0 ? f->hb_nodes / H.wall_s : 0.0, f->hb_tasks,
           f->hb_gpus, f->gpus_alloc, n_pending, min_pend, max_free,
           min_pend > 0 && min_pend <= max_free ? "a pending job still fits (fill not over)"
                                                : "no pending job fits anywhere");
    if (o->nodes == 1024 && o->jobs == 5000)
        printf("target fill_s < 1 and rss < 200 MiB: %s\n",
               fill_s < 1 && bench_proc_kib(d->pid, "VmRSS") < 200 * 1024 ? "met" : "MISSED");
    fflush(stdout);
    bench_load_free(&H);
    rc = 0;
out:
    bench_load_free(&L);
    return rc;
}

/* Submits more of the mix until `stored` jobs exist (<= 600 s). */
static void stored_run(struct bench_daemon *d, struct fill *f, const struct opts *o)
{
    struct bench_load L = {.port = d->port,
                           .clients = o->clients,
                           .max_s = 600,
                           .next = next_submit,
                           .reply = bad_reply,
                           .ud = f};

    if (o->stored <= f->next)
        return;
    f->limit = o->stored;
    f->key_prefix = "more";
    if (bench_load_run(&L) < 0)
        return;
    poll_metrics(f);
    printf("stored_jobs=%ld rss_mib=%.1f hwm_mib=%.1f live_pending=%.0f started=%.0f "
           "submits_per_s=%.0f p50_ms=%.2f p99_ms=%.2f errors=%zu%s\n",
           f->next - (long)L.n_bad, (double)bench_proc_kib(d->pid, "VmRSS") / 1024.0,
           (double)bench_proc_kib(d->pid, "VmHWM") / 1024.0, f->pending, f->started,
           L.wall_s > 0 ? (double)L.n_lat / L.wall_s : 0.0, bench_percentile(L.lat_ms, L.n_lat, 50),
           bench_percentile(L.lat_ms, L.n_lat, 99), L.n_bad,
           L.timed_out ? " (time bound reached before all were stored)" : "");
    fflush(stdout);
    bench_load_free(&L);
}

/* The fill from a full queue (as Slurm's figure, where the partition
 * goes up under 5,000 queued jobs): on a fresh allotd the mix is
 * submitted before any node exists, then the 1,024 nodes register; the
 * fill time runs from the first registration. Prints its line. */
static int queued_first_run(const char *allotd, const struct opts *o, long queued,
                            const struct bench_job *mix, long n_mix)
{
    static const char *const extra[] = {"--lease", "10m", NULL};
    struct bench_daemon d;
    struct bench_conn c = {.fd = -1};
    struct fill f = {.mix = mix, .n_mix = n_mix, .limit = queued, .key_prefix = "queued"};
    struct bench_load L = {
        .clients = o->clients, .max_s = 600, .next = next_submit, .reply = bad_reply, .ud = &f};
    char agent[128];
    double reg_s = 0, end, fill_s;
    long n;
    int rc = -1;

    if (bench_daemon_start(&d, allotd, extra) < 0)
        return -1;
    L.port = d.port;
    f.mc = &c;
    if (bench_conn_open(&c, d.port) < 0 ||
        bench_setup_tenants(&c, d.admin, agent, f.member, sizeof(agent)) < 0 ||
        bench_load_run(&L) < 0)
        goto out;
    end = bench_now() + 120;
    do
        poll_metrics(&f);
    while (f.pending < (double)(L.n_lat - L.n_bad) && bench_now() < end);
    f.t0 = f.last_change = bench_now();
    n = bench_register_nodes(d.port, agent, o->nodes, 16, tick, &f, &reg_s);
    if (n != o->nodes)
        goto out;
    fill_s = wait_quiet(&f, o);
    printf("queued_first nodes=%d jobs=%ld fill_s=%.3f placed_per_s=%.0f rss_mib=%.1f "
           "register_s=%.3f started=%.0f pending=%.0f gpus_alloc=%.0f/%d submit_s=%.3f "
           "(%.0f/s, before any node)%s\n",
           o->nodes, (long)(L.n_lat - L.n_bad), fill_s, fill_s > 0 ? f.started / fill_s : 0.0,
           (double)bench_proc_kib(d.pid, "VmRSS") / 1024.0, reg_s, f.started, f.pending,
           f.gpus_alloc, o->nodes * GPUS_PER_NODE, L.wall_s,
           L.wall_s > 0 ? (double)L.n_lat / L.wall_s : 0.0,
           L.timed_out ? " (time bound reached before all were submitted)" : "");
    fflush(stdout);
    rc = 0;
out:
    bench_load_free(&L);
    bench_conn_close(&c);
    bench_daemon_stop(&d);
    return rc;
}

/* The fill while submitting, then the stored jobs, on one allotd.
 * Returns 0 or -1. */
static int concurrent_run(const char *allotd, const struct opts *o, struct fill *f)
{
    static const char *const extra[] = {"--lease", "10m", NULL};
    struct bench_daemon d;
    struct bench_conn c = {.fd = -1};
    char agent[128];
    double reg_s = 0;
    long n;
    int rc = -1;

    if (bench_daemon_start(&d, allotd, extra) < 0)
        return -1;
    f->mc = &c;
    f->agent = agent;
    if (bench_conn_open(&c, d.port) < 0 ||
        bench_setup_tenants(&c, d.admin, agent, f->member, sizeof(agent)) < 0)
        goto out;
    n = bench_register_nodes(d.port, agent, o->nodes, 16, NULL, NULL, &reg_s);
    printf("registered nodes=%ld in %.3f s (%.0f/s) rss_mib=%.1f\n", n, reg_s,
           reg_s > 0 ? (double)n / reg_s : 0.0, (double)bench_proc_kib(d.pid, "VmRSS") / 1024.0);
    if (n != o->nodes || wait_nodes(&c, o->nodes) < 0 || fill_run(&d, f, o) < 0)
        goto out;
    stored_run(&d, f, o);
    rc = 0;
out:
    f->mc = NULL; /* both are this function's */
    f->agent = NULL;
    bench_conn_close(&c);
    bench_daemon_stop(&d);
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o = {.nodes = 1024,
                     .clients = 64,
                     .jobs = 5000,
                     .stored = 0,
                     .rss_jobs = 100000,
                     .quiet = 3,
                     .queued_first = 1,
                     .concurrent = 1};
    struct fill f = {0};
    struct bench_job *mix = NULL;
    char allotd[1024];
    int status = 0;

    if (parse(argc, argv, &o) < 0) {
        usage();
        return 2;
    }
    if (bench_allotd_path(allotd, sizeof(allotd)) < 0) {
        fprintf(stderr, "bench-cluster: allotd not found (set ALLOTD)\n");
        return 1;
    }
    f.n_mix = bench_jobmix(o.mix, o.jobs, 42, &mix);
    f.mix = mix;
    f.node_used = calloc((size_t)o.nodes, sizeof(int));
    if (f.n_mix <= 0 || !f.node_used) {
        fprintf(stderr, "bench-cluster: no job mix\n");
        free(mix);
        free(f.node_used);
        return 1;
    }
    o.jobs = f.n_mix < o.jobs ? f.n_mix : o.jobs;
    if (o.concurrent && concurrent_run(allotd, &o, &f) < 0)
        status = 1;
    if (o.queued_first && queued_first_run(allotd, &o, o.jobs, mix, f.n_mix) < 0)
        status = 1;
    if (o.rss_jobs > 0 && queued_first_run(allotd, &o, o.rss_jobs, mix, f.n_mix) < 0)
        status = 1;
    free(mix);
    free(f.node_used);
    return status;
}
