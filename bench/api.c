/*
 * bench/api: how fast allotd takes durable job submissions. For each
 * client count (1, 8, 64 by default) a fresh allotd is started in a
 * temporary folder on 127.0.0.1:0; the tenants a1..a4 (fair-share
 * weights 40/30/20/10), an agent token and one member token per tenant
 * are created through the API and 64 nodes x 8 GPUs register (Slurm's
 * 64-node set-up in ../shared/bench/slurm). Then N keep-alive clients
 * submit the job mix of jobmix.sh (each job with its tenant's member
 * token and an Idempotency-Key, as the CLI sends); every reply means the
 * job was committed to the store. The scheduling loop keeps running
 * meanwhile (allotd has no "partition down"). After a warm-up of 200
 * submissions, each round is bounded by --jobs submissions and
 * --seconds. Prints one line per client count:
 *   submits_per_s=X p50_ms=Y p99_ms=Z clients=N nodes=.. jobs=.. errors=..
 *   rss_mib=.. cycles=.. cycle_mean_ms=.. commits=.. (store transactions)
 * and then, with 300 keep-alive connections open that each listed 1,000
 * jobs: open_conns=300 rss_mib=.. read_handles_lent=.. read_handles_idle=..
 * and whether the target (>= 5,000/s at 64 clients, p99 <= 50 ms) is met.
 * With --pg (make bench-api-pg: a throwaway server from scripts/pg_sandbox.py)
 * every round runs on SQLite and then on PostgreSQL, lines prefixed store=.
 * Figures only; no test asserts on them.
 */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct api {
    const struct bench_job *mix;
    long n_mix;
    char member[4][128];
    long next, limit;
    int clients;
};

static size_t next_submit(void *ud, int k, char *buf, size_t cap)
{
    struct api *a = ud;
    const struct bench_job *j;
    char body[512], key[96];

    (void)k;
    if (a->next >= a->limit)
        return 0;
    j = &a->mix[a->next % a->n_mix];
    snprintf(key, sizeof(key), "Idempotency-Key: api-c%d-%ld\r\n", a->clients, a->next);
    a->next++;
    if (!bench_job_body(body, sizeof(body), j))
        return 0;
    return bench_format_request(buf, cap, "POST", "/v1/jobs", a->member[j->account - 1], key, body);
}

static void bad_reply(void *ud, int k, int status, const char *body, size_t len)
{
    static int shown;

    (void)ud;
    (void)k;
    if ((status < 200 || status > 299) && shown++ < 5)
        fprintf(stderr, "bench-api: submit answered %d: %.*s\n", status,
                (int)(len > 300 ? 300 : len), body);
}

/* After a round: N keep-alive connections that each list 1,000 jobs and
 * stay open (clients, dashboards, agents between heartbeats). Prints
 * allotd's RSS and its store read handles then: a handle is lent to a
 * request, not held by an open connection. */
#define OPEN_CONNS 300
static void open_connections(const struct bench_daemon *d, struct bench_conn *m)
{
    static const char *const mn[] = {"allot_store_read_handles{state=\"lent\"}",
                                     "allot_store_read_handles{state=\"idle\"}"};
    struct bench_conn *c = calloc(OPEN_CONNS, sizeof(*c));
    double h[2] = {0, 0};
    int n = 0, st;
    const char *body;

    for (; c && n < OPEN_CONNS; n++) {
        c[n].fd = -1;
        if (bench_conn_open(&c[n], d->port) < 0 ||
            bench_call(&c[n], "GET", "/v1/jobs?limit=1000", d->admin, NULL, NULL, &st, &body) < 0 ||
            st != 200)
            break;
    }
    bench_metrics(m, mn, h, 2);
    printf("open_conns=%d rss_mib=%.1f read_handles_lent=%.0f read_handles_idle=%.0f\n", n,
           (double)bench_proc_kib(d->pid, "VmRSS") / 1024.0, h[0], h[1]);
    for (int i = 0; c && i <= n && i < OPEN_CONNS; i++)
        bench_conn_close(&c[i]);
    free(c);
}

/* One round with `clients` connections on a fresh allotd. Returns the
 * submission rate, or -1. */
static double round_run(const char *allotd, int clients, long jobs, double secs, int nodes,
                        const struct bench_job *mix, long n_mix, double *p99_out)
{
    struct bench_daemon d;
    struct bench_conn c = {.fd = -1};
    struct api a = {.mix = mix, .n_mix = n_mix, .clients = clients};
    struct bench_load L = {.clients = clients, .next = next_submit, .reply = bad_reply, .ud = &a};
    char agent[128];
    double reg_s = 0, rate = -1, m[3] = {0, 0, 0};
    static const char *const mn[] = {"allot_sched_cycle_seconds_count",
                                     "allot_sched_cycle_seconds_sum", "allot_store_commits_total"};
    double c0[3] = {0, 0, 0};

    if (bench_daemon_start(&d, allotd, NULL) < 0)
        return -1;
    L.port = d.port;
    if (bench_conn_open(&c, d.port) < 0 ||
        bench_setup_tenants(&c, d.admin, agent, a.member, sizeof(agent)) < 0)
        goto out;
    if (nodes > 0 && bench_register_nodes(d.port, agent, nodes, 8, NULL, NULL, &reg_s) != nodes) {
        fprintf(stderr, "bench-api: node registration failed\n");
        goto out;
    }
    /* warm-up: connections, the store's pages, the loop's first cycles */
    a.limit = 200;
    L.max_s = 30;
    if (bench_load_run(&L) < 0)
        goto out;
    bench_load_free(&L);
    bench_metrics(&c, mn, c0, 3);
    a.limit = a.next + jobs;
    L.max_s = secs;
    if (bench_load_run(&L) < 0)
        goto out;
    bench_metrics(&c, mn, m, 3);
    rate = (double)L.n_lat / L.wall_s;
    double cycles = m[0] - c0[0];
    double p50 = bench_percentile(L.lat_ms, L.n_lat, 50);
    double p99 = bench_percentile(L.lat_ms, L.n_lat, 99);
    printf("submits_per_s=%.0f p50_ms=%.2f p99_ms=%.2f clients=%d nodes=%d jobs=%zu errors=%zu "
           "wall_s=%.2f%s rss_mib=%.1f cycles=%.0f cycle_mean_ms=%.2f commits=%.0f\n",
           rate, p50, p99, clients, nodes, L.n_lat, L.n_bad, L.wall_s,
           L.timed_out ? " (time bound reached)" : "",
           (double)bench_proc_kib(d.pid, "VmRSS") / 1024.0, cycles,
           cycles > 0 ? (m[1] - c0[1]) / cycles * 1e3 : 0.0, m[2] - c0[2]);
    open_connections(&d, &c);
    fflush(stdout);
    *p99_out = p99;
out:
    bench_load_free(&L);
    bench_conn_close(&c);
    bench_daemon_stop(&d);
    return rate;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench-api [--clients 1,8,64] [--jobs 5000] [--seconds 30] "
                    "[--nodes 64] [--mix jobs.tsv] [--pg postgres://USER@HOST:PORT|env]\n"
                    "  allotd is $ALLOTD or the one next to this program; --pg runs each\n"
                    "  round on SQLite and then on a fresh database of that PostgreSQL\n"
                    "  server (env: $ALLOT_TEST_PG, as scripts/pg_sandbox.py sets it)\n");
}

int main(int argc, char **argv)
{
    const char *clients_arg = "1,8,64", *mix_path = NULL, *pg = NULL;
    long jobs = 5000;
    double secs = 30;
    int nodes = 64, status = 0;
    char allotd[1024];
    struct bench_job *mix = NULL;
    long n_mix;

    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--clients") && v)
            clients_arg = v;
        else if (!strcmp(argv[i], "--jobs") && v)
            jobs = strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--seconds") && v)
            secs = strtod(v, NULL);
        else if (!strcmp(argv[i], "--nodes") && v)
            nodes = (int)strtol(v, NULL, 10);
        else if (!strcmp(argv[i], "--mix") && v)
            mix_path = v;
        else if (!strcmp(argv[i], "--pg") && v)
            pg = strcmp(v, "env") == 0 ? getenv("ALLOT_TEST_PG") : v;
        else {
            usage();
            return 2;
        }
    }
    if (jobs < 1 || secs <= 0 || nodes < 0 || nodes > 9999 ||
        (pg && (!*pg || bench_use_postgres(pg) < 0))) {
        usage();
        return 2;
    }
    if (bench_allotd_path(allotd, sizeof(allotd)) < 0) {
        fprintf(stderr, "bench-api: allotd not found (set ALLOTD)\n");
        return 1;
    }
    n_mix = bench_jobmix(mix_path, 5000, 42, &mix);
    if (n_mix <= 0) {
        fprintf(stderr, "bench-api: no job mix\n");
        return 1;
    }
    for (const char *p = clients_arg; *p;) {
        char *end;
        long n = strtol(p, &end, 10);
        double p99 = 0, rate;

        if (end == p || n < 1 || n > 1024) {
            usage();
            free(mix);
            return 2;
        }
        /* with --pg, the same round on each store, side by side */
        for (int k = 0; k < (pg ? 2 : 1); k++) {
            const char *store = k == 0 ? "sqlite" : "postgres";

            if (pg) {
                bench_use_postgres(k == 0 ? NULL : pg);
                printf("store=%s ", store);
            }
            rate = round_run(allotd, (int)n, jobs, secs, nodes, mix, n_mix, &p99);
            if (rate < 0)
                status = 1;
            else if (n == 64)
                printf("target clients=64 store=%s: >= 5000/s and p99 <= 50 ms: %s (%.0f/s, "
                       "p99 %.2f ms)\n",
                       store, rate >= 5000 && p99 <= 50 ? "met" : "MISSED", rate, p99);
        }
        p = *end == ',' ? end + 1 : end;
    }
    free(mix);
    return status;
}
