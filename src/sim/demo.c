/*
 * allot-sim demo: the synthetic cluster and workload of workload.h placed
 * with every registered policy; prints GPU allocation, fragmentation,
 * placement outcomes by kind and decisions per second. With --cluster the
 * cluster comes from a description file (clusterdesc.h) instead.
 *
 * sim_demo_main() parses the arguments (the option table of cliopt.h, like
 * fill and replay), reads the cluster description when
 * there is one, draws the tasks, then prints one row per policy
 * (demo_policy_row()). Exit status: 0, 1 (a file or the core failed), 2
 * (bad command line).
 */
#include "demo.h"

#include "allot/clusterdesc.h"
#include "allot/common.h"
#include "allot/sched.h"
#include "cliopt.h"
#include "workload.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OPT_NODES, OPT_CLUSTER, OPT_TASKS, OPT_SEED, OPT_HELP, N_OPTS };

#define MAX_COUNT 1000000 /* nodes and tasks */

/* Every option, described once: drives parsing and --help (STYLE 15). */
static const struct cliopt demo_options[N_OPTS] = {
    [OPT_NODES] = {"nodes", "N", "500", "synthetic GPU servers, 1..1000000"},
    [OPT_CLUSTER] = {"cluster", "FILE", NULL,
                     "take the nodes from a cluster description (JSON, see\n"
                     "docs/cluster-description.md) instead; excludes --nodes"},
    [OPT_TASKS] = {"tasks", "T", "6000", "synthetic tasks, 1..1000000"},
    [OPT_SEED] = {"seed", "S", "42", "workload and tie-break seed, 0..2^63-1"},
    [OPT_HELP] = {"help", NULL, NULL, "show this help"},
};

static void demo_usage(FILE *f)
{
    cliopt_usage(f,
                 "usage: allot-sim demo [--nodes N | --cluster FILE] [--tasks T] [--seed S]\n"
                 "\n"
                 "Places T synthetic tasks (CPU-only, fractional, whole, multi-GPU and MIG)\n"
                 "on N synthetic GPU servers with every placement policy, and prints a table:\n"
                 "GPU allocation %, fragmentation rate %, tasks placed by kind, and decisions/s.\n"
                 "\noptions:\n",
                 demo_options, N_OPTS, 16);
}

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "allot-sim demo: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    demo_usage(stderr);
    return 2;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads all of `path` into *buf (allot_malloc'd, caller frees); 0 or -1
 * with errno set. */
static int read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 0, n;

    *buf = NULL;
    *len = 0;
    if (!f)
        return -1;
    do {
        if (allot_grow((void **)buf, &cap, *len + 65536, 1) != 0) {
            fclose(f);
            allot_free(*buf);
            errno = ENOMEM;
            return -1;
        }
        n = fread(*buf + *len, 1, cap - *len, f);
        *len += n;
    } while (n > 0);
    if (ferror(f)) {
        fclose(f);
        allot_free(*buf);
        errno = EIO;
        return -1;
    }
    fclose(f);
    return 0;
}

/* A fresh cluster for one policy: parsed from the description when there is
 * one (each policy mutates its own), else synthetic. */
static struct allot_cluster *demo_cluster(const struct allot_catalog *cat, const char *desc,
                                          size_t desc_len, long nodes, long seed, char *err,
                                          size_t errlen)
{
    struct allot_cluster *c;

    if (!desc) {
        allot_strlcpy(err, "out of memory", errlen);
        return sim_synth_cluster(cat, (int)nodes, false, (uint64_t)seed);
    }
    c = allot_clusterdesc_parse(cat, desc, desc_len, err, errlen);
    if (c)
        allot_cluster_shuffle_ranks(c, (uint64_t)seed);
    return c;
}

/* What the command line asks for. */
struct demo_args {
    long nodes, ntasks, seed;
    const char *cluster_file; /* borrowed from argv, NULL: synthetic */
    bool nodes_given;
    bool progress; /* a progress bar on stderr (a terminal) */
};

/* Parses argv into *a with the option table (cliopt.h): "--name VALUE"
 * or "--name=VALUE", each option once, strict numbers. Returns -1 when all
 * is well, else the exit status (0 after --help, 2 bad arguments). */
static int parse_args(int argc, char **argv, struct demo_args *a)
{
    static const struct {
        int opt;
        int64_t lo, hi;
    } nums[] = {{OPT_NODES, 1, MAX_COUNT}, {OPT_TASKS, 1, MAX_COUNT}, {OPT_SEED, 0, INT64_MAX}};
    long *dst[] = {&a->nodes, &a->ntasks, &a->seed};
    const char *val[N_OPTS] = {0};
    bool given[N_OPTS] = {0};
    char err[256];

    *a = (struct demo_args){.nodes = 500, .ntasks = 6000, .seed = 42};
    if (cliopt_parse(demo_options, N_OPTS, argc, argv, val, given, 0, err, sizeof(err)))
        return usage_error("%s", err);
    if (given[OPT_HELP]) {
        demo_usage(stdout);
        return 0;
    }
    for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
        int64_t v;

        if (!val[nums[k].opt])
            continue;
        if (!cliopt_parse_int(val[nums[k].opt], nums[k].lo, nums[k].hi, &v))
            return usage_error("--%s \"%s\": want an integer %lld..%lld",
                               demo_options[nums[k].opt].name, val[nums[k].opt],
                               (long long)nums[k].lo, (long long)nums[k].hi);
        *dst[k] = (long)v;
    }
    a->cluster_file = val[OPT_CLUSTER];
    a->nodes_given = given[OPT_NODES];
    if (a->cluster_file && a->nodes_given)
        return usage_error("--nodes and --cluster exclude each other");
    return -1;
}

/* Reads and checks the cluster description of a->cluster_file into *desc
 * (owned by the caller) and sets a->nodes to its node count. Returns 0 or
 * 1 after reporting. */
static int load_cluster_file(const struct allot_catalog *cat, struct demo_args *a, char **desc,
                             size_t *desc_len)
{
    struct allot_cluster *c;
    char err[512];

    if (read_file(a->cluster_file, desc, desc_len) != 0) {
        fprintf(stderr, "allot-sim demo: %s: %s\n", a->cluster_file, strerror(errno));
        return 1;
    }
    c = demo_cluster(cat, *desc, *desc_len, a->nodes, a->seed, err, sizeof(err));
    if (!c) {
        fprintf(stderr, "allot-sim demo: %s: %s\n", a->cluster_file, err);
        return 1;
    }
    a->nodes = allot_cluster_node_count(c);
    allot_cluster_free(c);
    return 0;
}

/* Places every task with policy `ops` on a fresh cluster and prints its
 * row. Returns 0 or 1 after reporting. */
static int demo_policy_row(const struct allot_catalog *cat, const struct demo_args *a,
                           const char *desc, size_t desc_len, const struct allot_task *tasks,
                           const struct allot_frag_mix *mix,
                           const struct allot_sched_policy_ops *ops)
{
    char err[512];
    struct allot_cluster *c =
        demo_cluster(cat, desc, desc_len, a->nodes, a->seed, err, sizeof(err));
    struct allot_sched_opts o = {.seed = (uint64_t)a->seed, .mix = mix};
    struct allot_sched *s = c ? allot_sched_new(c, ops, &o) : NULL;
    long placed = 0, by_kind[4] = {0};
    double t0, dt, free_milli = 0;
    int64_t gpus;

    if (!s) {
        fprintf(stderr, "allot-sim demo: %s\n", c ? "out of memory" : err);
        allot_cluster_free(c);
        return 1;
    }
    t0 = now_s();
    for (long i = 0, step = a->ntasks / 50 > 0 ? a->ntasks / 50 : 1; i < a->ntasks; i++) {
        struct allot_placement pl;
        const struct allot_task *t = &tasks[i];
        if (a->progress && i % step == 0) /* a long run shows where it is */
            fprintf(stderr, "\rdemo: %-14s [%-50.*s] %ld/%ld tasks", ops->name,
                    (int)(i * 50 / a->ntasks), "##################################################",
                    i, a->ntasks);
        allot_sched_observe(s, t);
        if (allot_sched_place(s, t, &pl, NULL, 0) != 0)
            continue;
        placed++;
        if (t->mig_profile >= 0)
            by_kind[3]++;
        else if (t->num_gpu > 1)
            by_kind[2]++;
        else if (t->num_gpu == 1 && (t->gpu_milli < 1000 || t->gpu_mem_mib))
            by_kind[0]++;
        else if (t->num_gpu == 1)
            by_kind[1]++;
    }
    dt = now_s() - t0;
    if (a->progress)
        fprintf(stderr, "\r%*s\r", 100, ""); /* the bar goes; the row takes its place */
    if (allot_sched_check_invariants(s, err, sizeof(err)) != 0) {
        fprintf(stderr, "allot-sim demo: %s: invariant broken: %s\n", ops->name, err);
        allot_sched_free(s);
        allot_cluster_free(c);
        return 1;
    }
    gpus = allot_cluster_gpu_count(c);
    free_milli = (double)(gpus * 1000 - allot_cluster_used_milli(c));
    printf("%-14s %7lld %7.2f%% %7.2f%% %8ld %8ld %8ld %6ld %6ld %12.0f\n", ops->name,
           (long long)gpus,
           gpus ? 100.0 * (double)allot_cluster_used_milli(c) / (double)(gpus * 1000) : 0.0,
           free_milli > 0 ? 100.0 * allot_frag_cluster(mix, c) / free_milli : 0.0, placed,
           by_kind[0], by_kind[1], by_kind[2], by_kind[3], (double)a->ntasks / dt);
    fflush(stdout); /* a row as soon as it is done, into a pipe too */
    allot_sched_free(s);
    allot_cluster_free(c);
    return 0;
}

int sim_demo_main(int argc, char **argv)
{
    struct demo_args a;
    char *desc = NULL, err[512];
    size_t desc_len = 0;
    struct allot_catalog *cat;
    struct allot_task *tasks = NULL;
    struct allot_frag_mix mix;
    bool have_mix = false;
    int status = parse_args(argc, argv, &a);

    if (status >= 0)
        return status;
    a.progress = isatty(STDERR_FILENO);
    cat = allot_catalog_default(err, sizeof(err));
    if (!cat) {
        fprintf(stderr, "allot-sim demo: catalog: %s\n", err);
        return 1;
    }
    status = 1;
    if (a.cluster_file && load_cluster_file(cat, &a, &desc, &desc_len))
        goto out;
    tasks = calloc((size_t)a.ntasks, sizeof(*tasks));
    if (tasks)
        sim_synth_tasks(cat, tasks, (size_t)a.ntasks, (uint64_t)a.seed);
    if (!tasks || allot_frag_mix_build(tasks, (size_t)a.ntasks, 0.95, &mix) != 0) {
        fprintf(stderr, "allot-sim demo: out of memory\n");
        goto out;
    }
    have_mix = true;
    if (a.cluster_file)
        printf("allot demo: %ld synthetic tasks on %ld nodes from %s (seed %ld)\n", a.ntasks,
               a.nodes, a.cluster_file, a.seed);
    else
        printf("allot demo: %ld synthetic tasks on %ld synthetic nodes (seed %ld)\n", a.ntasks,
               a.nodes, a.seed);
    printf("tasks: CPU-only, fractional (gpu_milli/GPU memory), whole, 2-8 GPU, MIG profiles\n\n");
    printf("%-14s %7s %8s %8s %8s %8s %8s %6s %6s %12s\n", "policy", "gpus", "alloc%", "frag%",
           "placed", "frac", "whole", "multi", "mig", "decisions/s");
    for (int p = 0; allot_sched_policies[p]; p++)
        if (demo_policy_row(cat, &a, desc, desc_len, tasks, &mix, allot_sched_policies[p]))
            goto out;
    printf("\nalloc%%: GPU capacity allocated after all tasks arrived (higher is better);\n"
           "frag%%: share of idle GPU capacity the typical task cannot use (lower is better).\n");
    status = 0;
out:
    if (have_mix)
        allot_frag_mix_clear(&mix);
    free(tasks);
    allot_free(desc);
    allot_catalog_free(cat);
    return status;
}
