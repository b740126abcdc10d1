/*
 * Synthetic cluster and workload generator (see workload.h).
 */
#include "workload.h"

#include "allot/common.h"

#include <string.h>

struct node_type {
    const char *model;
    int gpus;
    int mode;
    int island;
    int64_t cpu_milli;
    int64_t mem_mib;
    int weight;
};

static const struct node_type node_types[] = {
    {"A100-80GB", 8, ALLOT_GPU_SHARED, 4, 128000, 1048576, 20},
    {"H100-80GB", 8, ALLOT_GPU_SHARED, 8, 192000, 2097152, 15},
    {"A100-80GB", 8, ALLOT_GPU_MIG, 8, 128000, 1048576, 5},
    {"H100-80GB", 8, ALLOT_GPU_MIG, 8, 192000, 2097152, 5},
    {"V100M32", 8, ALLOT_GPU_SHARED, 4, 96000, 393216, 15},
    {"T4", 4, ALLOT_GPU_SHARED, 0, 64000, 262144, 20},
    {"A10", 2, ALLOT_GPU_SHARED, 0, 64000, 262144, 10},
    {"P100", 2, ALLOT_GPU_SHARED, 0, 64000, 262144, 10},
};
#define N_TYPES (int)(sizeof(node_types) / sizeof(node_types[0]))

struct allot_cluster *sim_synth_cluster(const struct allot_catalog *cat, int n_nodes,
                                        bool eight_gpus, uint64_t seed)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_rng r;
    int total = 0;

    if (!c)
        return NULL;
    allot_rng_seed(&r, seed);
    for (int i = 0; i < N_TYPES; i++)
        if (!eight_gpus || node_types[i].gpus == 8)
            total += node_types[i].weight;
    for (int i = 0; i < n_nodes; i++) {
        int pick = (int)allot_rng_below(&r, (uint64_t)total), t = 0;
        char name[32], err[128];
        struct allot_node_spec spec = {0};
        for (;; t++) {
            if (eight_gpus && node_types[t].gpus != 8)
                continue;
            if (pick < node_types[t].weight)
                break;
            pick -= node_types[t].weight;
        }
        allot_fmt(name, sizeof(name), "node-%05d", i);
        spec.name = name;
        spec.model = node_types[t].model;
        spec.n_gpus = node_types[t].gpus;
        spec.gpu_mode = node_types[t].mode;
        spec.island_size = node_types[t].island;
        spec.cpu_milli = node_types[t].cpu_milli;
        spec.mem_mib = node_types[t].mem_mib;
        spec.rack = i / 32;
        if (allot_cluster_add_node(c, &spec, err, sizeof(err)) < 0) {
            allot_cluster_free(c);
            return NULL;
        }
    }
    allot_cluster_shuffle_ranks(c, seed);
    return c;
}

static const int64_t cpu_cores[] = {1, 2, 4, 6, 8, 12, 16, 24};
#define N_CPU (sizeof(cpu_cores) / sizeof(cpu_cores[0]))
static const int frac_milli[] = {810, 470, 320, 650, 230, 460, 590, 160, 500, 250};
static const char *const mig_profiles[] = {"1g.10gb", "2g.20gb", "3g.40gb",
                                           "4g.40gb", "1g.20gb", "7g.80gb"};

void sim_synth_tasks(const struct allot_catalog *cat, struct allot_task *out, size_t n,
                     uint64_t seed)
{
    struct allot_rng r;

    allot_rng_seed(&r, seed ^ 0x7a5c);
    for (size_t i = 0; i < n; i++) {
        struct allot_task *t = &out[i];
        unsigned kind = (unsigned)allot_rng_below(&r, 1000);
        memset(t, 0, sizeof(*t));
        t->mig_profile = -1;
        t->gpu_mem_mib = 0;
        t->model_mask = 0;
        /* openb-like: a few hundred distinct shapes, memory tied to CPU */
        t->cpu_milli = cpu_cores[allot_rng_below(&r, N_CPU)] * 1000;
        t->mem_mib = t->cpu_milli / 1000 * 1024 * (int64_t)(2 << allot_rng_below(&r, 2));
        if (kind < 130) { /* CPU-only */
            t->num_gpu = 0;
            t->gpu_milli = 0;
        } else if (kind < 480) { /* fraction */
            t->num_gpu = 1;
            t->gpu_milli = frac_milli[allot_rng_below(&r, 10)];
            if (allot_rng_below(&r, 4) == 0)
                t->gpu_mem_mib = 1024 * (int64_t)(4 << allot_rng_below(&r, 3));
        } else if (kind < 930) { /* one GPU */
            t->num_gpu = 1;
            t->gpu_milli = ALLOT_MILLI;
        } else if (kind < 950) { /* multi-GPU */
            static const int k[] = {2, 4, 8};
            t->num_gpu = k[allot_rng_below(&r, 3)];
            t->gpu_milli = ALLOT_MILLI;
            t->cpu_milli *= t->num_gpu;
            t->mem_mib *= t->num_gpu;
        } else { /* MIG */
            t->num_gpu = 1;
            t->gpu_milli = 0;
            t->mig_profile = allot_catalog_find_profile(cat, mig_profiles[allot_rng_below(&r, 6)]);
            if (t->mig_profile < 0) { /* catalog without it: whole GPU instead */
                t->gpu_milli = ALLOT_MILLI;
            }
        }
    }
}
