/*
 * bench/placement: decisions per second and latency of every placement
 * policy on a synthetic 10,000-node cluster (8 GPUs each, mixed models)
 * under 200,000 tasks of an openb-like mix. Prints one line per policy:
 *   policy=<name> nodes=N gpus=G decisions=D decisions_per_s=X p50_us=Y p99_us=Z
 * Targets (one core): every policy >= 10,000 decisions/s with p99 <= 1,000 us;
 * firstfit/bestfit/spread >= 100,000 decisions/s.
 */
#include "allot/sched.h"
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;

    return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench-placement [--nodes N] [--tasks T] [--policy P[,P...]] [--seed S]\n"
               "Places T synthetic tasks on N 8-GPU nodes with each policy and prints\n"
               "decisions per second and p50/p99 latency, one line per policy.\n");
}

int main(int argc, char **argv)
{
    int nodes = 10000;
    long ntasks = 200000;
    unsigned long long seed = 42;
    const char *only = NULL;
    char err[256];
    struct allot_catalog *cat;
    struct allot_task *tasks;
    float *lat;
    struct allot_frag_mix mix;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--nodes") && i + 1 < argc) {
            nodes = (int)strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--tasks") && i + 1 < argc) {
            ntasks = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--policy") && i + 1 < argc) {
            only = argv[++i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (nodes <= 0 || ntasks <= 0) {
        fprintf(stderr, "bench-placement: --nodes and --tasks must be positive\n");
        return 2;
    }
    cat = allot_catalog_default(err, sizeof(err));
    if (!cat) {
        fprintf(stderr, "bench-placement: catalog: %s\n", err);
        return 1;
    }
    tasks = calloc((size_t)ntasks, sizeof(*tasks));
    lat = calloc((size_t)ntasks, sizeof(*lat));
    if (!tasks || !lat)
        return 1;
    sim_synth_tasks(cat, tasks, (size_t)ntasks, seed);
    if (allot_frag_mix_build(tasks, (size_t)ntasks, 0.95, &mix) != 0)
        return 1;
    for (int p = 0; allot_sched_policies[p]; p++) {
        const struct allot_sched_policy_ops *ops = allot_sched_policies[p];
        struct allot_cluster *c;
        struct allot_sched *s;
        struct allot_sched_opts o = {.seed = seed, .mix = &mix};
        double t0, total = 0;
        long placed = 0;

        if (only && !strstr(only, ops->name))
            continue;
        c = sim_synth_cluster(cat, nodes, true, seed);
        s = c ? allot_sched_new(c, ops, &o) : NULL;
        if (!s) {
            fprintf(stderr, "bench-placement: out of memory\n");
            return 1;
        }
        for (long i = 0; i < ntasks; i++) {
            struct allot_placement pl;
            double d;
            int rc;
            t0 = now_us();
            allot_sched_observe(s, &tasks[i]);
            rc = allot_sched_place(s, &tasks[i], &pl, NULL, 0);
            d = now_us() - t0;
            lat[i] = (float)d;
            total += d;
            placed += rc == 0;
        }
        qsort(lat, (size_t)ntasks, sizeof(*lat), cmp_float);
        printf("policy=%s nodes=%d gpus=%lld decisions=%ld decisions_per_s=%.0f p50_us=%.1f "
               "p99_us=%.1f\n",
               ops->name, nodes, (long long)allot_cluster_gpu_count(c), ntasks,
               (double)ntasks / (total / 1e6), (double)lat[ntasks / 2],
               (double)lat[(size_t)((double)ntasks * 0.99)]);
        {
            const int32_t *ids;
            fprintf(stderr, "  (%s: %ld placed, %ld did not fit, %d state classes at the end)\n",
                    ops->name, placed, ntasks - placed, allot_cluster_classes(c, &ids));
        }
        fflush(stdout);
        allot_sched_free(s);
        allot_cluster_free(c);
    }
    allot_frag_mix_clear(&mix);
    free(tasks);
    free(lat);
    allot_catalog_free(cat);
    return 0;
}
