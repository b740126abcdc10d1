/*
 * Fragmentation measure (see frag.h and docs/benchmarks.md). Pure.
 *
 * For node n with free CPU C, per-GPU free milli g_1..g_k and model t, and a
 * typical task m: F_n(m) = sum g_i when m needs no GPU, t is not allowed, or
 * m does not fit; otherwise the sum of the g_i that are too small for m.
 * F_n = sum_m p_m F_n(m).
 */
#include "allot/frag.h"

#include "allot/common.h"

#include <stdlib.h>
#include <string.h>

double allot_frag_state(const struct allot_frag_mix *m, int model, int64_t cpu_free,
                        const int32_t *free_milli, int n_gpus)
{
    int64_t total = 0;
    double f = 0;

    for (int i = 0; i < n_gpus; i++)
        total += free_milli[i];
    if (total == 0)
        return 0;
    for (int j = 0; j < m->n; j++) {
        const struct allot_frag_task *t = &m->v[j];
        int64_t small = 0;
        int fit = 0;
        if (t->num_gpu == 0 || cpu_free < t->cpu_milli ||
            (t->model_mask && (model < 0 || !(t->model_mask >> model & 1)))) {
            f += t->p * (double)total;
            continue;
        }
        for (int i = 0; i < n_gpus; i++) {
            if (free_milli[i] >= t->milli)
                fit++;
            else
                small += free_milli[i];
        }
        f += t->p * (double)(fit >= t->num_gpu ? small : total);
    }
    return f;
}

double allot_frag_node(const struct allot_frag_mix *m, const struct allot_node *n)
{
    int32_t g[ALLOT_MAX_GPUS];

    for (int i = 0; i < n->n_gpus; i++)
        g[i] = n->gpus[i].mode == ALLOT_GPU_MIG ? 0 : n->gpus[i].free_milli;
    return allot_frag_state(m, n->model, n->cpu_free, g, n->n_gpus);
}

double allot_frag_cluster(const struct allot_frag_mix *m, const struct allot_cluster *c)
{
    double f = 0;
    int nn = allot_cluster_node_count(c);

    for (int i = 0; i < nn; i++) {
        const struct allot_node *n = allot_cluster_node(c, i);
        if (n->state == ALLOT_NODE_READY)
            f += allot_frag_node(m, n);
    }
    return f;
}

static int cmp_mix(const void *a, const void *b)
{
    const struct allot_frag_task *x = a, *y = b;

    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    if (x->num_gpu != y->num_gpu)
        return x->num_gpu < y->num_gpu ? -1 : 1;
    if (x->milli != y->milli)
        return x->milli < y->milli ? -1 : 1;
    if (x->cpu_milli != y->cpu_milli)
        return x->cpu_milli < y->cpu_milli ? -1 : 1;
    if (x->model_mask != y->model_mask)
        return x->model_mask < y->model_mask ? -1 : 1;
    return 0;
}

static bool same_shape(const struct allot_frag_task *a, const struct allot_task *t)
{
    int milli = t->num_gpu ? t->gpu_milli : 0;

    return a->cpu_milli == t->cpu_milli && a->num_gpu == t->num_gpu && a->milli == milli &&
           a->model_mask == t->model_mask;
}

int allot_frag_mix_build(const struct allot_task *tasks, size_t n, double coverage,
                         struct allot_frag_mix *out)
{
    struct allot_frag_task *v = NULL;
    size_t nv = 0, cap = 0;
    /* open-addressing table from shape hash to index in v */
    size_t tcap = 64;
    int32_t *tab;
    double covered = 0, sum = 0;
    int keep = 0;

    memset(out, 0, sizeof(*out));
    if (coverage <= 0 || coverage > 1)
        return ALLOT_EINVAL;
    while (tcap < 2 * n + 2)
        tcap *= 2;
    tab = allot_malloc(tcap * sizeof(*tab));
    if (!tab)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < tcap; i++)
        tab[i] = -1;
    for (size_t i = 0; i < n; i++) {
        const struct allot_task *t = &tasks[i];
        int milli = t->num_gpu ? t->gpu_milli : 0;
        uint64_t h = allot_hash_mix(
            allot_hash_mix(allot_hash_mix((uint64_t)t->cpu_milli, milli), (uint64_t)t->num_gpu),
            t->model_mask);
        size_t s = (size_t)h & (tcap - 1);
        while (tab[s] >= 0 && !same_shape(&v[tab[s]], t))
            s = (s + 1) & (tcap - 1);
        if (tab[s] < 0) {
            if (allot_grow((void **)&v, &cap, nv + 1, sizeof(*v))) {
                allot_free(tab);
                allot_free(v);
                return ALLOT_ENOMEM;
            }
            memset(&v[nv], 0, sizeof(v[nv]));
            v[nv].cpu_milli = t->cpu_milli;
            v[nv].milli = milli;
            v[nv].num_gpu = t->num_gpu;
            v[nv].model_mask = t->model_mask;
            tab[s] = (int32_t)nv++;
        }
        v[tab[s]].weight += 1;
    }
    allot_free(tab);
    if (nv == 0) {
        allot_free(v);
        return 0;
    }
    qsort(v, nv, sizeof(*v), cmp_mix);
    while ((size_t)keep < nv && covered < coverage * (double)n) {
        covered += v[keep].weight;
        keep++;
    }
    for (int i = 0; i < keep; i++)
        sum += v[i].weight;
    for (int i = 0; i < keep; i++)
        v[i].p = v[i].weight / sum;
    out->n = keep;
    out->v = v;
    return 0;
}

void allot_frag_mix_clear(struct allot_frag_mix *m)
{
    allot_free(m->v);
    m->v = NULL;
    m->n = 0;
}
