/*
 * The `allot-sim replay` command (replay.h): the option table that drives
 * parsing and --help, the tables on standard output, the JSON report and
 * the two SVG plots. Exit status: 0, 1 (a file could not be read or
 * written, or the core misbehaved), 2 (bad command line).
 */
#include "replay.h"

#include "allot/common.h"
#include "allot/sched.h"
#include "cliopt.h"
#include "outpath.h"
#include "slurm.h"
#include "svgplot.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt {
    OPT_JOBS,
    OPT_VCS,
    OPT_TENANTS,
    OPT_SYNTHETIC,
    OPT_FROM,
    OPT_TO,
    OPT_LOAD,
    OPT_POLICY,
    OPT_CKPT,
    OPT_PLACEMENT,
    OPT_SEED,
    OPT_FAIR_CAP,
    OPT_DEFRAG,
    OPT_DEFRAG_LOSS,
    OPT_JSON,
    OPT_PLOT,
    OPT_DLOG,
    OPT_DRAIN,
    OPT_NO_HOLD,
    OPT_CHECK,
    OPT_SACCT,
    OPT_SLURM_NODES,
    OPT_GPU_MODEL,
    OPT_TZ,
    OPT_SHARES,
    OPT_NODES,
    OPT_NODE_SHAPE,
    OPT_HELP,
    N_OPTS
};

/* --fair-cap's default below is the tuned cap (include/allot/queue.h) */
_Static_assert(ALLOT_TUNED_FAIR_CAP_PCT == 150, "--fair-cap's default is not the tuned cap");
_Static_assert(ALLOT_TUNED_DEFRAG_S == 300 && ALLOT_TUNED_DEFRAG_LOSS_S == 300,
               "--defrag's and --defrag-loss's defaults are not the tuned ones");

/* Every option, described once: drives parsing and --help (STYLE 15). */
static const struct cliopt options[N_OPTS] = {
    [OPT_JOBS] = {"jobs", "FILE", NULL, "Philly job digest (timestamp,duration,num_gpus,...)"},
    [OPT_VCS] = {"vcs", "FILE", NULL, "tenants: the VC list (vc,node num), one tenant per VC"},
    [OPT_TENANTS] = {"tenants", "FILE", NULL, "tenants: a tenants file (YAML, docs/replay.md)"},
    [OPT_SYNTHETIC] = {"synthetic", "DAYS", NULL,
                       "replay DAYS of the synthetic multi-tenant workload\n"
                       "instead of --jobs"},
    [OPT_FROM] = {"from", "T", NULL,
                  "window start, 2017-10-01 or \"2017-10-01 08:00:00\" (UTC;\n"
                  "default the first arrival); with --synthetic: its start\n"
                  "(default 2024-01-01)"},
    [OPT_TO] = {"to", "T", "last arrival + 1 s", "window end (exclusive)"},
    [OPT_LOAD] = {"load", "X", NULL,
                  "scale the cluster so the offered GPU-time is X x capacity\n"
                  "(--synthetic: the generated load, default 0.8)"},
    [OPT_POLICY] = {"policy", "P[,P...]|all", "all", "static, fifo, las, sjf-oracle, allot"},
    [OPT_CKPT] = {"checkpoint-interval", "S", "1800",
                  "seconds between checkpoints; a preempted job redoes the\n"
                  "work since its last one (0: no checkpoints)"},
    [OPT_PLACEMENT] = {"placement", "P", "bestfit", "placement policy for every run"},
    [OPT_SEED] = {"seed", "S", "1", "node tie-break order and synthetic workload"},
    [OPT_FAIR_CAP] = {"fair-cap", "X", "1.5",
                      "allot: while other tenants wait, a tenant beyond its\n"
                      "nominal borrows up to X times its fair share (0: off)"},
    [OPT_DEFRAG] = {"defrag", "S", "300",
                    "allot: every S seconds, move checkpointed jobs so that\n"
                    "jobs waiting for whole GPUs find them (0: off)"},
    [OPT_DEFRAG_LOSS] = {"defrag-loss", "S", "300",
                         "with --defrag: a moved job loses at most S seconds of work"},
    [OPT_JSON] = {"json", "OUT", NULL, "write the figures as JSON"},
    [OPT_PLOT] = {"plot", "OUT.svg", NULL,
                  "plot pending jobs over time to OUT.svg and GPU\n"
                  "utilisation to OUT-util.svg"},
    [OPT_DLOG] = {"decision-log", "OUT", NULL, "write every submit, start, preemption and end"},
    [OPT_DRAIN] = {"drain", NULL, NULL, "after --to, run on until every job has finished"},
    [OPT_NO_HOLD] = {"no-lending-hold", NULL, NULL,
                     "allot: lend what tenants used lately at once (allotd's\n"
                     "default; docs/tenancy.md)"},
    [OPT_CHECK] = {"check", NULL, NULL, "check the queue's invariants after every event (slow)"},
    [OPT_SACCT] = {"sacct", "FILE", NULL,
                   "Slurm accounting export (sacct -P -o JobID,Account,\n"
                   "Submit,Start,End,State,AllocTRES,...) instead of --jobs;\n"
                   "tenants = accounts unless --tenants (docs/planning.md)"},
    [OPT_SLURM_NODES] = {"slurm-nodes", "FILE", NULL,
                         "with --sacct: the nodes, from scontrol show nodes -o"},
    [OPT_GPU_MODEL] = {"gpu-model", "MODEL", NULL,
                       "with --slurm-nodes: catalog model of untyped GPUs (gpu:4)\n"
                       "and of GPU types the catalog does not know"},
    [OPT_TZ] = {"tz", "UTC|+HH:MM", "UTC", "with --sacct: the time zone sacct printed times in"},
    [OPT_SHARES] = {"shares", "usage|equal", "usage",
                    "with --sacct and no --tenants: each account's GPU nominal\n"
                    "in proportion to its GPU-time, or equal"},
    [OPT_NODES] = {"nodes", "G[,G...]", NULL,
                   "with --sacct: the nodes as groups [COUNTx]MODEL[:GPUS[:CORES\n"
                   "[:MEM]]], e.g. 4xA100-80GB,2xH100-80GB:8:112:2Ti"},
    [OPT_NODE_SHAPE] = {"node-shape", "MODEL[:GPUS[:CORES[:MEM]]]", "V100-32GB:8:64:512",
                        "the nodes of a cluster sized from the tenants"},
    [OPT_HELP] = {"help", NULL, NULL, "show this help"},
};

static void usage(FILE *f)
{
    cliopt_usage(f,
                 "usage: allot-sim replay (--jobs FILE | --synthetic DAYS) (--vcs FILE | --tenants "
                 "FILE) [options]\n"
                 "       allot-sim replay --sacct FILE [--slurm-nodes FILE | --nodes G,...] "
                 "[--tenants FILE] [options]\n"
                 "Replays a multi-tenant GPU job trace on a virtual clock through the allot queue\n"
                 "under each policy, each on a fresh cluster, and prints job completion and\n"
                 "queueing times, utilisation, in-quota waits, fairness and preemptions\n"
                 "(docs/replay.md; results in docs/benchmarks.md, \"Philly multi-tenant\n"
                 "replay\").\n\n"
                 "options:\n",
                 options, N_OPTS, 30);
}

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "allot-sim replay: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'allot-sim replay --help'.\n");
    return 2;
}

/* Parses "all" or a comma list of policy names into pol[] (no repeats). */
static int parse_policies(const char *s, int *pol, char *bad, size_t badlen)
{
    int n = 0;

    if (!strcmp(s, "all")) {
        for (int i = 0; i < REPLAY_POLICIES; i++)
            pol[n++] = i;
        return n;
    }
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[32];
        int k;

        allot_fmt(name, sizeof(name), "%.*s", (int)(len < 31 ? len : 31), p);
        k = len < sizeof(name) ? replay_policy_find(name) : -1;
        for (int i = 0; k >= 0 && i < n; i++)
            if (pol[i] == k)
                k = -1;
        if (k < 0 || n == REPLAY_POLICIES) {
            allot_strlcpy(bad, name, badlen);
            return -1;
        }
        pol[n++] = k;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

/* ---- tables ---- */

static void cell(FILE *f, int width, double v, int decimals)
{
    if (isfinite(v))
        fprintf(f, " %*.*f", width, decimals, v);
    else
        fprintf(f, " %*s", width, "-");
}

/* Averages over finished jobs leave out the jobs a policy never got to
 * finish, which are mostly long ones: a policy that starves long jobs
 * looks better than one that finishes them. Says so when the policies
 * left different numbers of jobs unfinished. */
static void unfinished_note(FILE *f, const struct replay_result *r, int n)
{
    int i = 1;

    while (i < n && r[i].all.unfinished == r[0].all.unfinished)
        i++;
    if (i == n)
        return;
    fprintf(f, "note: the policies left different numbers of jobs unfinished (");
    for (i = 0; i < n; i++)
        fprintf(f, "%s%s %zu", i ? ", " : "", replay_policy_names[r[i].policy],
                r[i].all.unfinished);
    fprintf(f, "), so their JCT and queueing\nfigures average over different jobs; "
               "--drain runs every job that can start to its end for a like-for-like\n"
               "comparison (what it leaves unfinished can never start under that policy)\n");
}

void replay_print_tables(FILE *f, const struct replay_setup *s, const struct replay_result *r,
                         int n)
{
    const struct replay_result *st = NULL, *al = NULL;

    fprintf(f, "\n%-10s %6s %6s %6s %9s %9s %9s %9s %9s %9s %9s %9s %5s %9s %5s %5s %7s %8s %6s\n",
            "policy", "jobs", "done", "unfin", "avg_jct", "p50_jct", "p95_jct", "p99_jct", "avg_q",
            "p50_q", "p95_q", "p99_q", "util", "inq_p99", "jain", "jainN", "preempt", "lost_gh",
            "wall_s");
    for (int i = 0; i < n; i++) {
        const struct replay_stats *a = &r[i].all;

        fprintf(f, "%-10s %6zu %6zu %6zu", replay_policy_names[r[i].policy], a->jobs, a->finished,
                a->unfinished);
        cell(f, 9, a->avg_jct, 0);
        cell(f, 9, a->p50_jct, 0);
        cell(f, 9, a->p95_jct, 0);
        cell(f, 9, a->p99_jct, 0);
        cell(f, 9, a->avg_queue, 0);
        cell(f, 9, a->p50_queue, 0);
        cell(f, 9, a->p95_queue, 0);
        cell(f, 9, a->p99_queue, 0);
        cell(f, 5, a->utilization, 3);
        cell(f, 9, a->in_quota_wait_p99, 0);
        cell(f, 5, a->jain, 3);
        cell(f, 5, a->jain_nominal, 3);
        fprintf(f, " %7lld", (long long)a->preemptions);
        cell(f, 8, a->lost_gpu_hours, 1);
        cell(f, 6, r[i].wall_s, 1);
        fputc('\n', f);
        if (r[i].policy == REPLAY_STATIC)
            st = &r[i];
        if (r[i].policy == REPLAY_ALLOT)
            al = &r[i];
    }
    fprintf(f,
            "times in seconds; avg/p50/p95/p99 over finished jobs; util: allocated GPU-time / "
            "capacity;\ninq_p99: p99 wait to first start of jobs that fit their tenant's unused "
            "nominal at submit;\njain: fairness of allocation / water-filled entitlement, jainN: "
            "/ min(nominal, demand),\nmeans over 10-minute samples with pending jobs; lost_gh: "
            "GPU-hours of work lost to preemption\n");
    unfinished_note(f, r, n);
    if (!st && !al)
        return;
    fprintf(f,
            "\nper tenant (%s%s%s): util over the tenant's nominal GPUs; share: allocation / "
            "entitlement in contention%s\n",
            st ? "static" : "", st && al ? " vs " : "", al ? "allot" : "",
            al ? ";\nwait_gh: GPU-hours its jobs waited; of them, the share its unused nominal "
                 "could not hold (over),\nthat idle GPUs (idle) or other tenants' GPUs beyond "
                 "their nominal (lent) could have taken"
               : "");
    fprintf(f, "%-16s %6s %6s", "tenant", "gpus", "jobs");
    for (int k = 0; k < 2; k++) {
        const char *p = k == 0 ? "s:" : "a:";

        if ((k == 0 && !st) || (k == 1 && !al))
            continue;
        char h[6][16];

        allot_fmt(h[0], sizeof(h[0]), "%sunfin", p);
        allot_fmt(h[1], sizeof(h[1]), "%savg_jct", p);
        allot_fmt(h[2], sizeof(h[2]), "%sp99_q", p);
        allot_fmt(h[3], sizeof(h[3]), "%sinq_p99", p);
        allot_fmt(h[4], sizeof(h[4]), "%sutil", p);
        allot_fmt(h[5], sizeof(h[5]), "%sshare", p);
        fprintf(f, " %8s %10s %10s %10s %7s %7s", h[0], h[1], h[2], h[3], h[4], h[5]);
    }
    if (al)
        fprintf(f, " %9s %9s %6s %6s %6s", "a:preempt", "a:wait_gh", "a:over", "a:idle", "a:lent");
    fputc('\n', f);
    for (int t = 0; t < s->n_tenants; t++) {
        const struct replay_stats *x = st ? &st->tenant[t] : &al->tenant[t];

        /* a nominal of 8.5 GPUs reads 8.5, not 8: as many decimals as it has */
        int64_t nm = s->tenants[t].nominal_milli;
        int dec = nm % 1000 == 0 ? 0 : nm % 100 == 0 ? 1 : nm % 10 == 0 ? 2 : 3;
        fprintf(f, "%-16.16s %6.*f %6zu", s->tenants[t].path, dec, (double)nm / ALLOT_MILLI,
                x->jobs);
        for (int k = 0; k < 2; k++) {
            const struct replay_result *rr = k == 0 ? st : al;

            if (!rr)
                continue;
            x = &rr->tenant[t];
            fprintf(f, " %8zu", x->unfinished);
            cell(f, 10, x->avg_jct, 0);
            cell(f, 10, x->p99_queue, 0);
            cell(f, 10, x->in_quota_wait_p99, 0);
            cell(f, 7, x->utilization, 2);
            cell(f, 7, x->share_ratio, 2);
        }
        if (al) {
            x = &al->tenant[t];
            fprintf(f, " %9lld", (long long)x->preemptions);
            cell(f, 9, x->wait_gpu_hours, 0);
            cell(f, 6, x->wait_over_share, 2);
            cell(f, 6, x->wait_idle_share, 2);
            cell(f, 6, x->wait_lent_share, 2);
        }
        fputc('\n', f);
    }
}

/* ---- JSON ---- */

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The figures of one group into object o; returns nonzero on failure. */
static int stats_json(json_t *o, const struct replay_stats *a, bool all)
{
    int bad = 0;

    bad |= json_object_set_new(o, "jobs", json_integer((json_int_t)a->jobs));
    bad |= json_object_set_new(o, "finished", json_integer((json_int_t)a->finished));
    bad |= json_object_set_new(o, "unfinished", json_integer((json_int_t)a->unfinished));
    bad |= json_object_set_new(o, "avg_jct_s", num(a->avg_jct));
    bad |= json_object_set_new(o, "p50_jct_s", num(a->p50_jct));
    bad |= json_object_set_new(o, "p95_jct_s", num(a->p95_jct));
    bad |= json_object_set_new(o, "p99_jct_s", num(a->p99_jct));
    bad |= json_object_set_new(o, "avg_queue_s", num(a->avg_queue));
    bad |= json_object_set_new(o, "p50_queue_s", num(a->p50_queue));
    bad |= json_object_set_new(o, "p95_queue_s", num(a->p95_queue));
    bad |= json_object_set_new(o, "p99_queue_s", num(a->p99_queue));
    bad |= json_object_set_new(o, "utilization", num(a->utilization));
    bad |= json_object_set_new(o, "in_quota_jobs", json_integer((json_int_t)a->in_quota_jobs));
    bad |= json_object_set_new(o, "in_quota_wait_p99_s", num(a->in_quota_wait_p99));
    if (all) {
        bad |= json_object_set_new(o, "jain", num(a->jain));
        bad |= json_object_set_new(o, "jain_nominal", num(a->jain_nominal));
    } else {
        bad |= json_object_set_new(o, "share_ratio", num(a->share_ratio));
    }
    bad |= json_object_set_new(o, "preemptions", json_integer((json_int_t)a->preemptions));
    bad |= json_object_set_new(o, "lost_gpu_hours", num(a->lost_gpu_hours));
    bad |= json_object_set_new(o, "wait_gpu_hours", num(a->wait_gpu_hours));
    bad |= json_object_set_new(o, "wait_over_nominal_share", num(a->wait_over_share));
    bad |= json_object_set_new(o, "wait_idle_share", num(a->wait_idle_share));
    bad |= json_object_set_new(o, "wait_lent_share", num(a->wait_lent_share));
    return bad;
}

int replay_write_json(const char *path, const struct replay_setup *s, const struct replay_result *r,
                      int n, char *err, size_t errlen)
{
    json_t *root = json_object(), *pols = json_array();
    char from[32], to[32];
    int bad = !root || !pols;

    for (int i = 0; i < n && !bad; i++) {
        json_t *o = json_object(), *ts = json_object();

        bad |= !o || !ts || json_array_append_new(pols, o);
        if (bad) {
            json_decref(ts);
            break;
        }
        bad |= json_object_set_new(o, "name", json_string(replay_policy_names[r[i].policy]));
        bad |= stats_json(o, &r[i].all, true);
        bad |= json_object_set_new(o, "wall_s", json_real(r[i].wall_s));
        bad |= json_object_set_new(o, "cycles", json_integer((json_int_t)r[i].cycles));
        for (int t = 0; t < s->n_tenants && !bad; t++) {
            json_t *x = json_object();

            bad |= !x || json_object_set_new(ts, s->tenants[t].path, x);
            bad |= x && json_object_set_new(
                            x, "nominal_gpus",
                            json_real((double)s->tenants[t].nominal_milli / ALLOT_MILLI));
            bad |= x && stats_json(x, &r[i].tenant[t], false);
        }
        bad |= json_object_set_new(o, "tenants", ts);
    }
    if (!bad) {
        bad |= json_object_set_new(root, "experiment", json_string("replay"));
        bad |= json_object_set_new(root, "source", json_string(s->source));
        bad |= json_object_set_new(root, "from",
                                   json_string(philly_format_time(s->from, from, sizeof(from))));
        bad |=
            json_object_set_new(root, "to", json_string(philly_format_time(s->to, to, sizeof(to))));
        bad |= json_object_set_new(root, "nodes", json_integer(s->n_nodes));
        bad |= json_object_set_new(root, "gpus", json_integer((json_int_t)replay_setup_gpus(s)));
        bad |= json_object_set_new(root, "jobs", json_integer((json_int_t)s->n_jobs));
        bad |= json_object_set_new(root, "dropped_other_vc", json_integer((json_int_t)s->other_vc));
        bad |= json_object_set_new(root, "dropped_zero", json_integer((json_int_t)s->zero));
        bad |= json_object_set_new(root, "offered_load", json_real(s->load));
        bad |= json_object_set_new(root, "policies", pols);
        pols = NULL;
    }
    json_decref(pols);
    if (!bad && json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) != 0) {
        allot_fmt(err, errlen, "%s: cannot write", path);
        json_decref(root);
        return ALLOT_EIO;
    }
    json_decref(root);
    if (bad) {
        allot_fmt(err, errlen, "%s: out of memory", path);
        return ALLOT_ENOMEM;
    }
    return 0;
}

/* ---- plots ---- */

static int plot_one(const char *path, const char *title, const char *ylabel, bool util,
                    const struct replay_result *r, int n, char *err, size_t errlen)
{
    struct svgplot *p = svgplot_new(title, "days since the window start", ylabel);
    size_t nb = n > 0 ? r[0].n_bins : 0;
    double *x = allot_malloc((nb + 1) * sizeof(*x)), *y = allot_malloc((nb + 1) * sizeof(*y));
    int rc = 0;

    if (!x || !y) {
        rc = ALLOT_ENOMEM;
        goto out;
    }
    for (size_t b = 0; b < nb; b++)
        x[b] = ((double)b + 0.5) * REPLAY_BIN_S / 86400.0;
    for (int i = 0; i < n && rc == 0; i++) {
        for (size_t b = 0; b < nb; b++)
            y[b] = util ? 100.0 * r[i].util[b] : r[i].queue_len[b];
        rc = svgplot_add_series(p, replay_policy_names[r[i].policy], x, y, nb, 0);
    }
    if (rc == 0 && nb > 0)
        rc = svgplot_set_xrange(p, 0, (double)nb * REPLAY_BIN_S / 86400.0);
    if (util && rc == 0)
        rc = svgplot_set_yrange(p, 0, 100);
    svgplot_set_size(p, 1200, 500);
out:
    if (rc == 0)
        rc = svgplot_write(p, path, err, errlen);
    else
        allot_fmt(err, errlen, "%s: %s", path, allot_strerror(rc));
    svgplot_free(p);
    allot_free(x);
    allot_free(y);
    return rc;
}

int replay_write_plots(const char *path, const struct replay_setup *s,
                       const struct replay_result *r, int n, char *err, size_t errlen)
{
    char upath[4096], title[512];
    const char *src = strrchr(s->source, '/') ? strrchr(s->source, '/') + 1 : s->source;
    int rc;

    if ((rc = sim_outpath_sibling("--plot", path, "-util", upath, sizeof(upath), err, errlen)) < 0)
        return rc;
    allot_fmt(title, sizeof(title), "Pending jobs (hourly mean): %s, %lld GPUs, load %.2f", src,
              (long long)replay_setup_gpus(s), s->load);
    rc = plot_one(path, title, "pending jobs", false, r, n, err, errlen);
    if (rc)
        return rc;
    allot_fmt(title, sizeof(title), "GPU utilisation (hourly): %s, %lld GPUs, load %.2f", src,
              (long long)replay_setup_gpus(s), s->load);
    return plot_one(upath, title, "allocated GPUs (% of capacity)", true, r, n, err, errlen);
}

/* ---- the command ---- */

struct bar {
    const char *policy;
    int shown; /* percent last drawn */
};

static void progress(void *ud, double done)
{
    struct bar *b = ud;
    int pct = (int)(done * 100.0);

    if (pct == b->shown)
        return;
    b->shown = pct;
    fprintf(stderr, "\rreplay: %-10s [", b->policy);
    for (int i = 0; i < 40; i++)
        fputc(i < pct * 40 / 100 ? '#' : '.', stderr);
    fprintf(stderr, "] %3d%%", pct);
    fflush(stderr);
}

static void print_header(const struct replay_setup *s, bool synthetic, double load_arg,
                         const struct slurm_sacct_counts *sc)
{
    char from[32], to[32], desc[1024];

    printf("replay: %s: %zu jobs in [%s, %s) (%.1f days), %d tenants\n", s->source, s->n_jobs,
           philly_format_time(s->from, from, sizeof(from)),
           philly_format_time(s->to, to, sizeof(to)), (double)(s->to - s->from) / 86400.0,
           s->n_tenants);
    if (sc)
        printf("sacct: %zu lines, %zu jobs that ran; skipped %zu steps, %zu never started, %zu "
               "still running\n",
               sc->lines, sc->jobs, sc->steps, sc->never_started, sc->running);
    if (!synthetic)
        printf("left out: %zu of other %s, %zu with 0 GPUs or 0 duration (in the window), %zu "
               "outside the window; %zu rounded up to whole %d-GPU tasks\n",
               s->other_vc, sc ? "accounts" : "VCs", s->zero, s->outside, s->rounded_up,
               s->node_gpus);
    if (s->too_big)
        printf("left out: %zu jobs asking for more GPUs than the cluster has\n", s->too_big);
    printf("cluster: %s = %lld GPUs%s; offered GPU-time / capacity = %.3f\n",
           replay_setup_describe(s, desc, sizeof(desc)), (long long)replay_setup_gpus(s),
           !synthetic && load_arg > 0 ? " (scaled by --load)" : "", s->load);
    fflush(stdout);
}

/* What the command line asks for, once checked. */
struct replay_args {
    const char *val[N_OPTS]; /* borrowed from argv */
    bool given[N_OPTS];
    int pol[REPLAY_POLICIES];
    int np;
    int64_t from, to, days, tz;
    double load;
    struct replay_opts o;
    bool has_shape;
    struct replay_node_group shape;   /* --node-shape */
    struct replay_node_group *groups; /* owned: --nodes or --slurm-nodes */
    int n_groups;
    size_t cpu_only; /* --slurm-nodes: nodes without GPUs */
    struct slurm_sacct_counts sc;
};

/* Parses and checks argv into *a. Returns -1 when all is well, else the
 * exit status (0 after --help, 2 bad arguments). */
static int parse_args(int argc, char **argv, struct replay_args *a)
{
    char err[1024], bad[64];
    int64_t v;

    a->from = a->to = -1;
    a->o = (struct replay_opts){.checkpoint_s = 1800, .seed = 1, .fair_cap = REPLAY_FAIR_CAP};
    if (cliopt_parse(options, N_OPTS, argc, argv, a->val, a->given, 0, err, sizeof(err)))
        return usage_error("%s", err);
    if (a->given[OPT_HELP]) {
        usage(stdout);
        return 0;
    }
    if (a->given[OPT_JOBS] + a->given[OPT_SYNTHETIC] + a->given[OPT_SACCT] != 1)
        return usage_error("give exactly one of --jobs FILE, --synthetic DAYS and --sacct FILE");
    if (a->given[OPT_SACCT]) {
        if (a->given[OPT_VCS])
            return usage_error("--vcs does not go with --sacct (the tenants are the accounts, "
                               "or --tenants FILE)");
        if (a->given[OPT_SLURM_NODES] && a->given[OPT_NODES])
            return usage_error("give at most one of --slurm-nodes FILE and --nodes G,...");
        if (a->given[OPT_SHARES] && a->given[OPT_TENANTS])
            return usage_error("--shares sets the nominals of accounts without --tenants");
        if (a->val[OPT_SHARES] && strcmp(a->val[OPT_SHARES], "usage") != 0 &&
            strcmp(a->val[OPT_SHARES], "equal") != 0)
            return usage_error("--shares \"%s\": want usage or equal", a->val[OPT_SHARES]);
        if (a->val[OPT_TZ] && slurm_parse_tz(a->val[OPT_TZ], &a->tz) < 0)
            return usage_error("--tz \"%s\": want UTC or +HH:MM / -HH:MM (at most 14:00)",
                               a->val[OPT_TZ]);
        if ((a->given[OPT_SLURM_NODES] || a->given[OPT_NODES]) &&
            (a->given[OPT_NODE_SHAPE] || a->given[OPT_LOAD]))
            return usage_error("--node-shape and --load size a cluster from the tenants; the "
                               "nodes are given");
    } else {
        if (a->given[OPT_VCS] == a->given[OPT_TENANTS])
            return usage_error("give exactly one of --vcs FILE and --tenants FILE");
        for (int k = OPT_SLURM_NODES; k <= OPT_NODES; k++)
            if (a->given[k])
                return usage_error("--%s goes with --sacct", options[k].name);
    }
    if (a->given[OPT_GPU_MODEL] && !a->given[OPT_SLURM_NODES])
        return usage_error("--gpu-model goes with --slurm-nodes");
    if (a->val[OPT_SYNTHETIC] &&
        !cliopt_parse_int(a->val[OPT_SYNTHETIC], 1, REPLAY_MAX_DAYS, &a->days))
        return usage_error("--synthetic \"%s\": want a number of days 1..%d", a->val[OPT_SYNTHETIC],
                           REPLAY_MAX_DAYS);
    if (a->val[OPT_FROM] && philly_parse_time(a->val[OPT_FROM], &a->from) < 0)
        return usage_error("--from \"%s\": want YYYY-MM-DD or \"YYYY-MM-DD HH:MM:SS\" (UTC)",
                           a->val[OPT_FROM]);
    if (a->val[OPT_TO] && philly_parse_time(a->val[OPT_TO], &a->to) < 0)
        return usage_error("--to \"%s\": want YYYY-MM-DD or \"YYYY-MM-DD HH:MM:SS\" (UTC)",
                           a->val[OPT_TO]);
    if (a->val[OPT_TO] && a->given[OPT_SYNTHETIC])
        return usage_error("--to does not go with --synthetic (DAYS sets the end)");
    if (a->from >= 0 && a->to >= 0 && a->from >= a->to)
        return usage_error("--from must come before --to");
    if (a->val[OPT_LOAD] &&
        (!cliopt_parse_double(a->val[OPT_LOAD], &a->load) || a->load <= 0 || a->load > 10))
        return usage_error("--load \"%s\": want a number in (0, 10]", a->val[OPT_LOAD]);
    a->np =
        parse_policies(a->val[OPT_POLICY] ? a->val[OPT_POLICY] : "all", a->pol, bad, sizeof(bad));
    if (a->np < 0)
        return usage_error("--policy: unknown or repeated policy \"%s\" (want static, fifo, las, "
                           "sjf-oracle, allot or all)",
                           bad);
    if (a->val[OPT_CKPT]) {
        if (!cliopt_parse_int(a->val[OPT_CKPT], 0, 1000000000, &v))
            return usage_error("--checkpoint-interval \"%s\": want seconds 0..1000000000",
                               a->val[OPT_CKPT]);
        a->o.checkpoint_s = v;
    }
    if (a->val[OPT_PLACEMENT] && !allot_sched_policy_find(a->val[OPT_PLACEMENT]))
        return usage_error("--placement \"%s\": unknown placement policy", a->val[OPT_PLACEMENT]);
    a->o.placement = a->val[OPT_PLACEMENT];
    if (a->val[OPT_SEED]) {
        if (!cliopt_parse_int(a->val[OPT_SEED], 0, INT64_MAX, &v))
            return usage_error("--seed \"%s\": want an integer 0..%lld", a->val[OPT_SEED],
                               (long long)INT64_MAX);
        a->o.seed = (uint64_t)v;
    }
    if (a->val[OPT_FAIR_CAP] &&
        (!cliopt_parse_double(a->val[OPT_FAIR_CAP], &a->o.fair_cap) ||
         !(a->o.fair_cap == 0 || (a->o.fair_cap >= 1 && a->o.fair_cap <= 1000))))
        return usage_error("--fair-cap \"%s\": want 0 (off) or a factor from 1 to 1000",
                           a->val[OPT_FAIR_CAP]);
    a->o.defrag_s = ALLOT_TUNED_DEFRAG_S;
    a->o.defrag_loss_s = ALLOT_TUNED_DEFRAG_LOSS_S;
    if (a->val[OPT_DEFRAG] && !cliopt_parse_int(a->val[OPT_DEFRAG], 0, 86400 * 365, &a->o.defrag_s))
        return usage_error("--defrag \"%s\": want seconds 0..31536000", a->val[OPT_DEFRAG]);
    if (a->val[OPT_DEFRAG_LOSS] &&
        !cliopt_parse_int(a->val[OPT_DEFRAG_LOSS], 0, 86400 * 365, &a->o.defrag_loss_s))
        return usage_error("--defrag-loss \"%s\": want seconds 0..31536000",
                           a->val[OPT_DEFRAG_LOSS]);
    a->o.check = a->given[OPT_CHECK];
    a->o.drain = a->given[OPT_DRAIN];
    a->o.no_lending_hold = a->given[OPT_NO_HOLD];
    return -1;
}

/* Checks every output path before the run (outpath.h): the JSON file, both
 * plot files and the decision log. Returns 0 or 1 after reporting. */
static int check_outputs(const struct replay_args *a)
{
    char err[1024], upath[4096];

    if ((a->val[OPT_PLOT] && (sim_outpath_sibling("--plot", a->val[OPT_PLOT], "-util", upath,
                                                  sizeof(upath), err, sizeof(err)) ||
                              sim_outpath_check("--plot", a->val[OPT_PLOT], err, sizeof(err)) ||
                              sim_outpath_check("--plot", upath, err, sizeof(err)))) ||
        (a->val[OPT_JSON] && sim_outpath_check("--json", a->val[OPT_JSON], err, sizeof(err))) ||
        (a->val[OPT_DLOG] &&
         sim_outpath_check("--decision-log", a->val[OPT_DLOG], err, sizeof(err)))) {
        fprintf(stderr, "allot-sim replay: %s\n", err);
        return 1;
    }
    const char *const onames[] = {"--plot", "--plot (its -util.svg)", "--json", "--decision-log"};
    const char *const opaths[] = {a->val[OPT_PLOT], a->val[OPT_PLOT] ? upath : NULL,
                                  a->val[OPT_JSON], a->val[OPT_DLOG]};
    if (sim_outpath_distinct(onames, opaths, 4, err, sizeof(err))) {
        fprintf(stderr, "allot-sim replay: %s\n", err);
        return 1;
    }
    return 0;
}

/* Builds the setup from the trace or the generator; a --to past the
 * trace's end turns on --drain (replay_setup_philly() clamps the window).
 * Returns 0 or 1 after reporting. */
/* --node-shape, --nodes and --slurm-nodes into a->shape / a->groups.
 * Returns 0, 1 (a file) or 2 (a bad option value) after reporting. */
static int load_nodes(struct replay_args *a, char *err, size_t errlen)
{
    struct allot_catalog *cat = allot_catalog_default(err, errlen);
    int status = 0;

    if (!cat) {
        fprintf(stderr, "allot-sim replay: GPU catalog: %s\n", err);
        return 1;
    }
    if (a->val[OPT_NODE_SHAPE]) {
        /* a COUNTx prefix is ignored: the tenants size the cluster */
        if (replay_parse_group(a->val[OPT_NODE_SHAPE], cat, &a->shape, err, errlen) < 0) {
            status = usage_error("--node-shape: %s", err);
            goto out;
        }
        a->has_shape = true;
    }
    if (a->val[OPT_NODES]) {
        const char *p = a->val[OPT_NODES];

        /* at least one group, and no empty one ("", "G,", "G,,G") */
        for (bool more = true; more;) {
            char spec[128];
            size_t n = strcspn(p, ",");

            if (a->n_groups == REPLAY_MAX_GROUPS || n == 0 || n >= sizeof(spec)) {
                status = usage_error("--nodes \"%s\": want up to %d groups G[,G...]",
                                     a->val[OPT_NODES], REPLAY_MAX_GROUPS);
                goto out;
            }
            memcpy(spec, p, n);
            spec[n] = 0;
            if (!a->groups && !(a->groups = allot_calloc(REPLAY_MAX_GROUPS, sizeof(*a->groups)))) {
                fprintf(stderr, "allot-sim replay: out of memory\n");
                status = 1;
                goto out;
            }
            if (replay_parse_group(spec, cat, &a->groups[a->n_groups], err, errlen) < 0) {
                status = usage_error("--nodes: %s", err);
                goto out;
            }
            a->n_groups++;
            p += n;
            more = *p == ',';
            p += more;
        }
    }
    if (a->val[OPT_SLURM_NODES] &&
        slurm_read_nodes(a->val[OPT_SLURM_NODES], cat, a->val[OPT_GPU_MODEL], &a->groups,
                         &a->n_groups, &a->cpu_only, err, errlen) < 0) {
        fprintf(stderr, "allot-sim replay: %s\n", err);
        status = 1;
    }
out:
    allot_catalog_free(cat);
    return status;
}

/* The --sacct setup. Returns 0 or ALLOT_E* with a message in err. */
static int setup_sacct(struct replay_args *a, struct replay_setup *setup, char *err, size_t errlen)
{
    struct replay_trace tr = {0};
    struct replay_trace_opts o = {
        .tenants_path = a->val[OPT_TENANTS],
        .equal_shares = a->val[OPT_SHARES] && strcmp(a->val[OPT_SHARES], "equal") == 0,
        .groups = a->groups,
        .n_groups = a->n_groups,
        .shape = a->has_shape ? &a->shape : NULL,
        .from = a->from,
        .to = a->to,
        .load = a->load,
    };
    int rc = slurm_read_sacct(a->val[OPT_SACCT], a->tz, &tr, &a->sc, err, errlen);

    if (rc == 0)
        rc = replay_setup_trace(setup, &tr, &o, err, errlen);
    replay_trace_free(&tr);
    return rc;
}

static int load_setup(struct replay_args *a, struct replay_setup *setup)
{
    char err[1024] = "", t1[32], t2[32];
    int rc;

    if ((rc = load_nodes(a, err, sizeof(err))) != 0)
        return rc;
    if (a->given[OPT_SACCT])
        rc = setup_sacct(a, setup, err, sizeof(err));
    else if (a->given[OPT_SYNTHETIC])
        rc = replay_setup_synthetic_shape(setup, a->has_shape ? &a->shape : NULL, a->val[OPT_VCS],
                                          a->val[OPT_TENANTS], (int)a->days, a->from,
                                          a->load > 0 ? a->load : 0.8, a->o.seed, err, sizeof(err));
    else
        rc = replay_setup_philly_shape(setup, a->has_shape ? &a->shape : NULL, a->val[OPT_JOBS],
                                       a->val[OPT_VCS], a->val[OPT_TENANTS], a->from, a->to,
                                       a->load, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "allot-sim replay: %s\n", err);
        return 1;
    }
    if (a->cpu_only)
        fprintf(stderr, "allot-sim replay: %s: %zu nodes without GPUs left out\n",
                a->val[OPT_SLURM_NODES], a->cpu_only);
    if (setup->to_asked >= 0) {
        /* Nothing arrives after the trace's end; run on until every job is
         * done, which is what a window reaching that far would show. */
        fprintf(
            stderr,
            "allot-sim replay: --to %s lies past the end of the trace; the window ends at %s "
            "(the last arrival plus the jobs' total run time) and the run goes on until every job "
            "has finished, as with --drain\n",
            philly_format_time(setup->to_asked, t1, sizeof(t1)),
            philly_format_time(setup->to, t2, sizeof(t2)));
        a->o.drain = true;
    }
    return 0;
}

/* Runs every policy asked for into res[0..*nres). Returns 0 or 1 after
 * reporting. */
static int run_policies(const struct replay_args *a, const struct replay_setup *setup,
                        struct replay_result *res, int *nres)
{
    struct replay_opts o = a->o;
    char err[1024];

    for (int i = 0; i < a->np; i++) {
        struct bar b = {.policy = replay_policy_names[a->pol[i]], .shown = -1};
        int rc;

        if (isatty(STDERR_FILENO)) {
            o.progress = progress;
            o.progress_ud = &b;
        }
        rc = replay_run(setup, a->pol[i], &o, &res[*nres], err, sizeof(err));
        if (o.progress)
            fprintf(stderr, "\r%70s\r", "");
        if (rc) {
            fprintf(stderr, "allot-sim replay: %s\n", err);
            return 1;
        }
        if (res[*nres].killed)
            fprintf(stderr,
                    "allot-sim replay: %s: the queue ended %zu jobs without finishing "
                    "them (counted as unfinished)\n",
                    replay_policy_names[a->pol[i]], res[*nres].killed);
        (*nres)++;
    }
    return 0;
}

/* Writes the tables, the JSON report and the plots. Returns the status. */
static int write_outputs(const struct replay_args *a, const struct replay_setup *setup,
                         const struct replay_result *res, int nres)
{
    char err[1024];
    int status = 0;

    replay_print_tables(stdout, setup, res, nres);
    fflush(stdout);
    if (a->val[OPT_JSON] &&
        replay_write_json(a->val[OPT_JSON], setup, res, nres, err, sizeof(err))) {
        fprintf(stderr, "allot-sim replay: %s\n", err);
        status = 1;
    }
    if (a->val[OPT_PLOT] &&
        replay_write_plots(a->val[OPT_PLOT], setup, res, nres, err, sizeof(err))) {
        fprintf(stderr, "allot-sim replay: %s\n", err);
        status = 1;
    }
    return status;
}

int sim_replay_main(int argc, char **argv)
{
    struct replay_args a;
    struct replay_setup setup;
    struct replay_result res[REPLAY_POLICIES];
    int nres = 0, status;
    FILE *dlog = NULL;

    memset(&a, 0, sizeof(a));
    memset(&setup, 0, sizeof(setup));
    memset(res, 0, sizeof(res));
    status = parse_args(argc, argv, &a);
    if (status >= 0)
        return status;
    if (check_outputs(&a))
        return 1;
    status = load_setup(&a, &setup);
    if (status)
        goto out;
    status = 1;
    if (a.val[OPT_DLOG]) {
        dlog = fopen(a.val[OPT_DLOG], "w");
        if (!dlog) {
            fprintf(stderr, "allot-sim replay: %s: %s\n", a.val[OPT_DLOG], strerror(errno));
            goto out;
        }
        a.o.log = dlog;
    }
    print_header(&setup, a.given[OPT_SYNTHETIC], a.load, a.given[OPT_SACCT] ? &a.sc : NULL);
    if (run_policies(&a, &setup, res, &nres))
        goto out;
    if (dlog) {
        int e = fclose(dlog);

        dlog = NULL;
        if (e) {
            fprintf(stderr, "allot-sim replay: %s: write failed\n", a.val[OPT_DLOG]);
            goto out;
        }
    }
    status = write_outputs(&a, &setup, res, nres);
out:
    if (dlog)
        fclose(dlog);
    for (int i = 0; i < nres; i++)
        replay_result_free(&res[i]);
    replay_setup_free(&setup);
    allot_free(a.groups);
    return status;
}
