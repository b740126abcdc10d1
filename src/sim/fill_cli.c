/*
 * allot-sim fill's command line (fill_cli.h). sim_fill_main() runs four
 * steps, each its own function: parse and check the arguments (no file is
 * touched before they are all valid), check the output paths and load the
 * inputs, run the experiment, report. Exit status: 0, 1 (an input, the run
 * or an output failed), 2 (bad command line).
 */
#include "fill_cli.h"

#include "allot/common.h"
#include "cliopt.h"
#include "fill.h"
#include "fill_perturb.h"
#include "fill_published.h"
#include "fill_report.h"
#include "fill_seeds.h"
#include "offline.h"
#include "outpath.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS  256
#define MAX_POLICIES 64
#define MIN_TUNE     1.0 /* below 1 the arrived request never reaches the table's 100 % */
#define MAX_TUNE     100.0

/* The published policies plus ours: what "--policy all" runs. */
static const char *const all_policies[] = {"random",  "dotprod", "gpuclustering", "gpupacking",
                                           "bestfit", "fgd",     "allot"};
#define N_ALL (sizeof(all_policies) / sizeof(all_policies[0]))

enum {
    OPT_NODES,
    OPT_PODS,
    OPT_POLICY,
    OPT_SEEDS,
    OPT_TUNE,
    OPT_PERTURB,
    OPT_JSON,
    OPT_PLOT,
    OPT_EXPECTED,
    OPT_DLOG,
    OPT_WORKERS,
    OPT_JOBS,
    OPT_CHECK,
    OPT_OFFLINE,
    OPT_HELP,
    N_OPTS
};

/* Every option, described once: drives parsing and --help (STYLE 15). */
static const struct cliopt fill_options[N_OPTS] = {
    [OPT_NODES] = {"nodes", "FILE", NULL, "openb node list (required)"},
    [OPT_PODS] = {"pods", "FILE", NULL, "openb pod list (required)"},
    [OPT_POLICY] = {"policy", "P[,P...]|all", "all",
                    "placement policies; all: the six published ones and allot"},
    [OPT_SEEDS] = {"seeds", "LIST", "42-51",
                   "seeds, e.g. 42-51 or 1,5,7-9 (at most 1000, no repeats)"},
    [OPT_TUNE] = {"tune", "X", "1.3",
                  "inflate or trim the trace to X times the GPU capacity\n(1 <= X <= 100)"},
    [OPT_PERTURB] = {"perturb", "SPEC", NULL,
                     "change the workload: flip, scale=F, subset=P[,seed=N]\n"
                     "(comma-separated; docs/allot-sim.md, \"Perturbed workloads\")"},
    [OPT_JSON] = {"json", "OUT", NULL, "write the curves as JSON"},
    [OPT_PLOT] = {"plot", "OUT.svg", NULL, "plot unallocated GPU % vs arrived %"},
    [OPT_EXPECTED] = {"expected", "DIR", NULL,
                      "compare with DIR/analysis_allo_discrete.csv (published)"},
    [OPT_DLOG] = {"decision-log", "OUT", NULL, "write one line per placement decision"},
    [OPT_WORKERS] = {"workers", "N", "1", "worker processes, 1..256 (results do not depend on N)"},
    [OPT_JOBS] = {"jobs", "N", NULL, "deprecated alias of --workers"},
    [OPT_CHECK] = {"check", NULL, NULL, "check scheduler invariants after every placement"},
    [OPT_OFFLINE] = {"offline", NULL, NULL, "add an offline reference packing (offline.h)"},
    [OPT_HELP] = {"help", NULL, NULL, "show this help"},
};

/* What the command line asks for, once checked. */
struct fill_args {
    const char *val[N_OPTS]; /* borrowed from argv */
    bool given[N_OPTS];
    const struct allot_sched_policy_ops *pol[MAX_POLICIES]; /* borrowed from the core */
    int np;
    uint64_t *seeds; /* owned (allot_free) */
    int ns;
    double tune;
    int64_t workers;
    struct sim_fill_perturb perturb; /* all zero: none */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill_usage(FILE *f)
{
    cliopt_usage(f,
                 "usage: allot-sim fill --nodes FILE --pods FILE [options]\n"
                 "Replays an openb pod trace onto the openb GPU cluster, filled to --tune x\n"
                 "its GPU capacity, under each policy and seed (docs/benchmarks.md, \"openb\n"
                 "fill: reproducing the FGD paper\"), and prints the unallocated GPU share at\n"
                 "arrived 80..130 % of capacity.\n"
                 "--policy all: random,dotprod,gpuclustering,gpupacking,bestfit,fgd,allot;\n"
                 "firstfit and spread may be named explicitly.\n\n"
                 "options:\n",
                 fill_options, N_OPTS, 28);
}

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "allot-sim fill: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fill_usage(stderr);
    return 2;
}

/* Splits a comma list of policy names into ops (out has room for max). */
static int parse_policies(const char *s, const struct allot_sched_policy_ops **out, int max,
                          char *bad, size_t badlen)
{
    int n = 0;

    if (!strcmp(s, "all")) {
        for (size_t i = 0; i < N_ALL; i++) {
            out[n] = allot_sched_policy_find(all_policies[i]);
            if (!out[n]) {
                allot_strlcpy(bad, all_policies[i], badlen);
                return -1;
            }
            n++;
        }
        return n;
    }
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[64];
        allot_fmt(name, sizeof(name), "%.*s", (int)(len < 63 ? len : 63), p);
        if (n == max || len == 0 || len >= sizeof(name) ||
            !(out[n] = allot_sched_policy_find(name))) {
            allot_strlcpy(bad, name, badlen);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (out[i] == out[n]) {
                allot_strlcpy(bad, name, badlen);
                return -1;
            }
        n++;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

/* Parses and checks argv into *a. Returns -1 when all is well, else the
 * exit status (0 after --help, 1 out of memory, 2 bad arguments). */
static int parse_args(int argc, char **argv, struct fill_args *a)
{
    const char *workers;
    char err[512], bad[64];
    int rc;

    a->tune = 1.3;
    a->workers = 1;
    /* Errors name the option as typed, e.g. "--tune=2" (CLIOPT_ECHO_ARG). */
    if (cliopt_parse(fill_options, N_OPTS, argc, argv, a->val, a->given, CLIOPT_ECHO_ARG, err,
                     sizeof(err)))
        return usage_error("%s", err);
    if (a->given[OPT_HELP]) {
        fill_usage(stdout);
        return 0;
    }
    if (!a->val[OPT_NODES] || !a->val[OPT_PODS])
        return usage_error("%s", "--nodes and --pods are required");
    a->np = parse_policies(a->val[OPT_POLICY] ? a->val[OPT_POLICY] : "all", a->pol, MAX_POLICIES,
                           bad, sizeof(bad));
    if (a->np < 0)
        return usage_error("unknown or repeated policy \"%s\"", bad);
    if (a->val[OPT_TUNE] && (!cliopt_parse_double(a->val[OPT_TUNE], &a->tune) ||
                             a->tune < MIN_TUNE || a->tune > MAX_TUNE))
        return usage_error("--tune \"%s\": want a number in [1, 100] (the table reads the "
                           "curves at arrived 80..130 %% of capacity)",
                           a->val[OPT_TUNE]);
    if (a->given[OPT_JOBS] && a->given[OPT_WORKERS])
        return usage_error("--jobs is the old name of --workers; give only --workers");
    if (a->given[OPT_JOBS])
        fprintf(stderr, "allot-sim fill: --jobs is deprecated, use --workers (in allot-sim "
                        "replay --jobs names the job trace)\n");
    if (a->val[OPT_PERTURB] &&
        sim_fill_perturb_parse(a->val[OPT_PERTURB], &a->perturb, err, sizeof(err)))
        return usage_error("--perturb \"%s\": %s", a->val[OPT_PERTURB], err);
    workers = a->val[OPT_WORKERS] ? a->val[OPT_WORKERS] : a->val[OPT_JOBS];
    if (workers && !cliopt_parse_int(workers, 1, MAX_WORKERS, &a->workers))
        return usage_error("--%s \"%s\": want an integer 1..%d",
                           a->given[OPT_JOBS] ? "jobs" : "workers", workers, MAX_WORKERS);
    rc = sim_fill_parse_seeds(a->val[OPT_SEEDS] ? a->val[OPT_SEEDS] : "42-51", &a->seeds, &a->ns,
                              err, sizeof(err));
    if (rc == ALLOT_ENOMEM) {
        fprintf(stderr, "allot-sim fill: out of memory\n");
        return 1;
    }
    if (rc)
        return usage_error("--seeds \"%s\": %s (want e.g. 42-51 or 1,5,7-9)", a->val[OPT_SEEDS],
                           err);
    return -1;
}

/* Checks every output path, then loads the trace and the published results
 * and opens the decision log. Returns 0 or 1 after reporting on stderr. */
static int open_inputs(const struct fill_args *a, struct sim_fill_trace *trace,
                       struct sim_fill_published *pub, FILE **dlog)
{
    static const int outs[] = {OPT_JSON, OPT_PLOT, OPT_DLOG};
    char err[512];

    for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
        int k = outs[i];
        char opt[32];

        allot_fmt(opt, sizeof(opt), "--%s", fill_options[k].name);
        if (a->val[k] && sim_outpath_check(opt, a->val[k], err, sizeof(err))) {
            fprintf(stderr, "allot-sim fill: %s\n", err);
            return 1;
        }
    }
    const char *const onames[] = {"--json", "--plot", "--decision-log"};
    const char *const opaths[] = {a->val[OPT_JSON], a->val[OPT_PLOT], a->val[OPT_DLOG]};
    if (sim_outpath_distinct(onames, opaths, 3, err, sizeof(err))) {
        fprintf(stderr, "allot-sim fill: %s\n", err);
        return 1;
    }
    if (sim_fill_trace_load(trace, a->val[OPT_NODES], a->val[OPT_PODS], err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (a->val[OPT_PERTURB] && sim_fill_perturb_apply(trace, &a->perturb, err, sizeof(err))) {
        fprintf(stderr, "allot-sim fill: %s\n", err);
        return 1;
    }
    if (a->val[OPT_EXPECTED]) {
        char path[4096];
        allot_fmt(path, sizeof(path), "%s/analysis_allo_discrete.csv", a->val[OPT_EXPECTED]);
        if (sim_fill_published_read(path, pub, err, sizeof(err))) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    if (a->val[OPT_DLOG]) {
        *dlog = fopen(a->val[OPT_DLOG], "w");
        if (!*dlog) {
            fprintf(stderr, "allot-sim fill: %s: %s\n", a->val[OPT_DLOG], strerror(errno));
            return 1;
        }
    }
    return 0;
}

/* Runs the offline reference for every seed and prints its rows. Returns
 * 0 or 1 after reporting on stderr. */
static int run_offline(const struct fill_args *a, const struct sim_fill_trace *trace)
{
    struct sim_offline_result *v;
    double t0 = now_s();
    int rc;

    v = allot_calloc((size_t)a->ns * SIM_FILL_N_POINTS, sizeof(*v));
    if (!v) {
        fprintf(stderr, "allot-sim fill: out of memory\n");
        return 1;
    }
    rc = sim_offline_fill_seeds(trace, a->seeds, a->ns, a->tune, (int)a->workers,
                                sim_fill_table_points, SIM_FILL_N_POINTS, v);
    if (rc)
        fprintf(stderr, "allot-sim fill: offline: %s\n", allot_strerror(rc));
    else
        sim_fill_print_offline(trace, v, a->ns, now_s() - t0);
    allot_free(v);
    return rc ? 1 : 0;
}

/* Runs the experiment and writes every report. Returns the exit status. */
static int run_and_report(const struct fill_args *a, const struct sim_fill_trace *trace,
                          const struct sim_fill_published *pubp, FILE *dlog)
{
    struct sim_fill_summary *sum = allot_calloc((size_t)a->np, sizeof(*sum));
    struct sim_fill_opts o = {.policies = a->pol,
                              .n_policies = a->np,
                              .seeds = a->seeds,
                              .n_seeds = a->ns,
                              .tune = a->tune,
                              .workers = (int)a->workers,
                              .check = a->given[OPT_CHECK],
                              .progress = isatty(STDERR_FILENO),
                              .log = dlog};
    uint64_t hash = 0;
    char err[512];
    int status = 1;
    double t0;

    if (!sum) {
        fprintf(stderr, "allot-sim fill: out of memory\n");
        return 1;
    }
    printf("openb fill: %s on %s: %zu GPU nodes, %lld GPUs, %zu pods, tune %.2f, %d seed%s, "
           "%d worker%s\n",
           trace->workload, a->val[OPT_NODES], trace->n_nodes, (long long)trace->gpus,
           trace->n_tasks, a->tune, a->ns, a->ns == 1 ? "" : "s", (int)a->workers,
           a->workers == 1 ? "" : "s");
    printf("unallocated GPU %% of capacity (mean±sd over seeds) at arrived GPU request %%; "
           "frag@100: fragmentation rate %%\n");
    fflush(stdout);
    t0 = now_s();
    if (sim_fill_experiment(trace, &o, sum, &hash, err, sizeof(err))) {
        fprintf(stderr, "allot-sim fill: %s\n", err);
        goto out;
    }
    if (dlog && fflush(dlog)) {
        fprintf(stderr, "allot-sim fill: %s: write failed\n", a->val[OPT_DLOG]);
        goto out;
    }
    sim_fill_print_table(trace, sum, a->np, pubp, a->tune);
    if (a->given[OPT_OFFLINE] && run_offline(a, trace))
        goto out;
    printf("decision-log hash: fnv1a64 %016llx\n", (unsigned long long)hash);
    printf("wall seconds: %.2f\n", now_s() - t0);
    fflush(stdout);
    status = 0;
    if (a->val[OPT_JSON] && sim_fill_write_json(a->val[OPT_JSON], trace, sum, a->np, a->seeds,
                                                a->ns, a->tune, hash, pubp))
        status = 1;
    if (a->val[OPT_PLOT] &&
        sim_fill_write_plot(a->val[OPT_PLOT], trace, sum, a->np, a->ns, a->tune))
        status = 1;
out:
    allot_free(sum);
    return status;
}

int sim_fill_main(int argc, char **argv)
{
    struct fill_args a;
    struct sim_fill_trace trace;
    struct sim_fill_published pub = {0};
    FILE *dlog = NULL;
    int status;

    memset(&a, 0, sizeof(a));
    memset(&trace, 0, sizeof(trace));
    status = parse_args(argc, argv, &a);
    if (status >= 0)
        goto out;
    status = open_inputs(&a, &trace, &pub, &dlog);
    if (status == 0)
        status = run_and_report(&a, &trace, a.val[OPT_EXPECTED] ? &pub : NULL, dlog);
    if (dlog && fclose(dlog) && status == 0) {
        fprintf(stderr, "allot-sim fill: %s: write failed\n", a.val[OPT_DLOG]);
        status = 1;
    }
out:
    allot_free(a.seeds);
    sim_fill_published_free(&pub);
    sim_fill_trace_free(&trace);
    return status;
}
