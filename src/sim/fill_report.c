/*
 * allot-sim fill's table, JSON and plot (fill_report.h). Cells are 13
 * columns wide ("±" takes two bytes for one column); the byte layout is
 * what docs/benchmarks.md quotes and bench/fill.sh reads.
 */
#include "fill_report.h"

#include "allot/common.h"
#include "svgplot.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>

const int sim_fill_table_points[SIM_FILL_N_POINTS] = {80, 90, 95, 100, 110, 120, 130};
#define N_POINTS SIM_FILL_N_POINTS

void sim_fill_print_table(const struct sim_fill_trace *t, const struct sim_fill_summary *sum,
                          int np, const struct sim_fill_published *pub, double tune)
{
    char cell[64];

    printf("%-14s", "policy");
    for (size_t i = 0; i < N_POINTS; i++)
        printf("%11d %%", sim_fill_table_points[i]);
    printf("%11s%9s%s\n", "frag@100", "seconds", pub ? "  pub@100    diff" : "");
    for (int p = 0; p < np; p++) {
        const struct sim_fill_summary *s = &sum[p];
        double x = sim_fill_published_unalloc(pub, t->workload, s->policy->name, tune, 100, NULL);
        printf("%-14s", s->policy->name);
        for (size_t i = 0; i < N_POINTS; i++) {
            int b = sim_fill_table_points[i];
            allot_fmt(cell, sizeof(cell), "%.2f±%.2f", s->unalloc_mean[b], s->unalloc_sd[b]);
            printf("%*s", isfinite(s->unalloc_mean[b]) ? 14 : 13,
                   isfinite(s->unalloc_mean[b]) ? cell : "-");
        }
        if (isfinite(s->frag_mean[100]))
            printf("%11.2f", s->frag_mean[100]);
        else
            printf("%11s", "-"); /* no arrival near 100 % */
        printf("%9.2f", s->seconds);
        if (pub && isfinite(x) && isfinite(s->unalloc_mean[100]))
            printf("%9.2f%+8.2f", x, s->unalloc_mean[100] - x);
        else if (pub)
            printf("%9s%8s", "-", "-");
        printf("\n");
    }
}

/* A JSON object with one value per bucket ("0".."130"); NaN is null. */
static json_t *json_buckets(const double *v)
{
    json_t *o = json_object();
    char key[8];
    int bad = !o;

    for (int b = 0; !bad && b < SIM_FILL_BUCKETS; b++) {
        allot_fmt(key, sizeof(key), "%d", b);
        bad = json_object_set_new(o, key, isfinite(v[b]) ? json_real(v[b]) : json_null());
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int sim_fill_write_json(const char *path, const struct sim_fill_trace *t,
                        const struct sim_fill_summary *sum, int np, const uint64_t *seeds, int ns,
                        double tune, uint64_t hash, const struct sim_fill_published *pub)
{
    json_t *jseeds = json_array(), *jpol = json_array(), *root;
    char hex[32];
    int bad = !jseeds || !jpol;

    for (int i = 0; !bad && i < ns; i++)
        bad = json_array_append_new(jseeds, json_integer((json_int_t)seeds[i]));
    for (int p = 0; !bad && p < np; p++) {
        double x = sim_fill_published_unalloc(pub, t->workload, sum[p].policy->name, tune, 100,
                                              NULL); /* NaN without pub */
        /* "o" steals its reference, also on failure (jansson >= 2.11) */
        bad = json_array_append_new(
            jpol,
            json_pack("{s:s, s:o, s:o, s:o, s:f, s:I, s:o}", "name", sum[p].policy->name,
                      "unallocated_pct", json_buckets(sum[p].unalloc_mean), "unallocated_sd",
                      json_buckets(sum[p].unalloc_sd), "frag_rate_pct",
                      json_buckets(sum[p].frag_mean), "seconds", sum[p].seconds, "failed_pods",
                      (json_int_t)sum[p].failed, "published_unallocated_pct_100",
                      isfinite(x) ? json_real(x) : json_null()));
    }
    allot_fmt(hex, sizeof(hex), "%016llx", (unsigned long long)hash);
    root = json_pack("{s:s, s:s, s:I, s:I, s:I, s:f, s:o, s:s, s:o}", "experiment", "fill",
                     "workload", t->workload, "gpus", (json_int_t)t->gpus, "nodes",
                     (json_int_t)t->n_nodes, "pods", (json_int_t)t->n_tasks, "tune", tune, "seeds",
                     jseeds, "decision_log_fnv1a64", hex, "policies", jpol);
    if (!root || bad) {
        fprintf(stderr, "allot-sim fill: %s: out of memory building JSON\n", path);
        bad = 1;
    } else if (json_dump_file(root, path,
                              JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6))) {
        fprintf(stderr, "allot-sim fill: %s: cannot write\n", path);
        bad = 1;
    }
    json_decref(root);
    return bad;
}

/* Plots unallocated % against arrived % for every policy, from arrived
 * PLOT_X0 % on (below it every policy sits on the diagonal 100 - x). */
#define PLOT_X0 60

int sim_fill_write_plot(const char *path, const struct sim_fill_trace *t,
                        const struct sim_fill_summary *sum, int np, int ns, double tune)
{
    char title[256], err[512];
    double x[SIM_FILL_BUCKETS], ymax = 10;
    struct svgplot *p;
    int rc;

    allot_fmt(title, sizeof(title), "openb fill: %s, %lld GPUs, tune %.2f, mean of %d seed%s",
              t->workload, (long long)t->gpus, tune, ns, ns == 1 ? "" : "s");
    p = svgplot_new(title, "arrived GPU request (% of GPU capacity)",
                    "unallocated GPU (% of GPU capacity)");
    for (int b = 0; b < SIM_FILL_BUCKETS; b++)
        x[b] = b;
    for (int i = 0; i < np; i++) {
        svgplot_add_series(p, sum[i].policy->name, x + PLOT_X0, sum[i].unalloc_mean + PLOT_X0,
                           SIM_FILL_BUCKETS - PLOT_X0, 0);
        for (int b = PLOT_X0; b < SIM_FILL_BUCKETS; b++)
            if (isfinite(sum[i].unalloc_mean[b]) && sum[i].unalloc_mean[b] > ymax)
                ymax = sum[i].unalloc_mean[b];
    }
    svgplot_add_vline(p, 100, "arrived = 100 %");
    svgplot_set_xrange(p, PLOT_X0, 130);
    svgplot_set_yrange(p, 0, fmin(100, ceil(ymax / 5) * 5));
    svgplot_set_size(p, 960, 600);
    rc = svgplot_write(p, path, err, sizeof(err));
    svgplot_free(p);
    if (rc)
        fprintf(stderr, "allot-sim fill: %s\n", err);
    return rc ? 1 : 0;
}

/* Mean and sample sd over seeds of x(point i) for the results in v:
 * what 0: unallocated GPU %, 1: GPU pods left out, 2: CPU-only pods left out. */
static void offline_stats(const struct sim_offline_result *v, int n_seeds, int i, double cap,
                          int what, double *mean, double *sd)
{
    double m = 0, ss = 0;

    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < n_seeds; s++) {
            const struct sim_offline_result *r = &v[(size_t)s * N_POINTS + (size_t)i];
            double x = what == 0   ? 100.0 - (double)r->used_milli * 100.0 / cap
                       : what == 1 ? (double)r->failed_gpu
                                   : (double)r->failed_cpu;
            if (pass == 0)
                m += x / n_seeds;
            else
                ss += (x - m) * (x - m);
        }
    *mean = m;
    *sd = n_seeds > 1 ? sqrt(ss / (n_seeds - 1)) : 0.0;
}

void sim_fill_print_offline(const struct sim_fill_trace *t, const struct sim_offline_result *v,
                            int n_seeds, double seconds)
{
    double cap = (double)t->gpus * ALLOT_MILLI, m, sd;

    printf("%-14s", "offline");
    for (int i = 0; i < N_POINTS; i++) {
        char cell[64];
        offline_stats(v, n_seeds, i, cap, 0, &m, &sd);
        allot_fmt(cell, sizeof(cell), "%.2f±%.2f", m, sd);
        printf("%14s", cell);
    }
    printf("%11s%9.2f\n", "-", seconds);
    printf("%-14s", "  pods left");
    for (int i = 0; i < N_POINTS; i++) {
        char cell[64];
        double c;
        offline_stats(v, n_seeds, i, cap, 1, &m, &sd);
        offline_stats(v, n_seeds, i, cap, 2, &c, &sd);
        allot_fmt(cell, sizeof(cell), "%.0f+%.0f", m, c);
        printf("%13s", cell);
    }
    printf("   (offline: GPU + CPU-only pods left out, mean per seed)\n");
    fflush(stdout);
}
