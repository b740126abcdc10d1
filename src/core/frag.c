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

#include <math.h>
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

static uint64_t shape_hash(const struct allot_task *t)
{
    int milli = t->num_gpu ? t->gpu_milli : 0;

    return allot_hash_mix(allot_hash_mix(allot_hash_mix((uint64_t)t->cpu_milli, (uint64_t)milli),
                                         (uint64_t)t->num_gpu),
                          t->model_mask);
}

static uint64_t entry_hash(const struct allot_frag_task *e)
{
    struct allot_task t = {.cpu_milli = e->cpu_milli,
                           .gpu_milli = e->milli,
                           .num_gpu = e->num_gpu,
                           .model_mask = e->model_mask};

    return shape_hash(&t);
}

void allot_frag_counts_init(struct allot_frag_counts *fc, double half_life, size_t max_shapes)
{
    memset(fc, 0, sizeof(*fc));
    fc->max_shapes = max_shapes ? max_shapes : SIZE_MAX;
    fc->inc = 1;
    fc->growth = half_life > 0 ? exp2(1.0 / half_life) : 1;
}

void allot_frag_counts_clear(struct allot_frag_counts *fc)
{
    allot_free(fc->v);
    allot_free(fc->tab);
    memset(fc, 0, sizeof(*fc));
}

/* Rebuilds the hash index over v[0..n) into a table of `cap` slots. */
static int counts_reindex(struct allot_frag_counts *fc, size_t cap)
{
    int32_t *tab = allot_malloc(cap * sizeof(*tab));

    if (!tab)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        tab[i] = -1;
    for (size_t i = 0; i < fc->n; i++) {
        size_t s = (size_t)entry_hash(&fc->v[i]) & (cap - 1);
        while (tab[s] >= 0)
            s = (s + 1) & (cap - 1);
        tab[s] = (int32_t)i;
    }
    allot_free(fc->tab);
    fc->tab = tab;
    fc->tab_cap = cap;
    return 0;
}

/* A full counter forgets its lighter half (heaviest kept, amortised
 * O(log n) per new shape). Returns 0 or ALLOT_ENOMEM. */
static int counts_halve(struct allot_frag_counts *fc)
{
    size_t keep = fc->max_shapes / 2 ? fc->max_shapes / 2 : 1;

    qsort(fc->v, fc->n, sizeof(*fc->v), cmp_mix);
    if (keep > fc->n)
        keep = fc->n;
    fc->n = keep;
    fc->total = 0;
    for (size_t i = 0; i < fc->n; i++)
        fc->total += fc->v[i].weight;
    if (counts_reindex(fc, fc->tab_cap)) {
        /* no stale index: the next add rebuilds it */
        allot_free(fc->tab);
        fc->tab = NULL;
        fc->tab_cap = 0;
        return ALLOT_ENOMEM;
    }
    return 0;
}

int allot_frag_counts_add(struct allot_frag_counts *fc, const struct allot_task *t)
{
    size_t s;

    if (fc->n >= fc->max_shapes && counts_halve(fc))
        return ALLOT_ENOMEM;
    if (fc->tab_cap < 2 * fc->n + 2) {
        size_t cap = fc->tab_cap ? fc->tab_cap : 64;
        while (cap < 2 * fc->n + 2)
            cap *= 2;
        if (counts_reindex(fc, cap))
            return ALLOT_ENOMEM;
    }
    s = (size_t)shape_hash(t) & (fc->tab_cap - 1);
    while (fc->tab[s] >= 0 && !same_shape(&fc->v[fc->tab[s]], t))
        s = (s + 1) & (fc->tab_cap - 1);
    if (fc->tab[s] < 0) {
        if (allot_grow((void **)&fc->v, &fc->cap, fc->n + 1, sizeof(*fc->v)))
            return ALLOT_ENOMEM;
        memset(&fc->v[fc->n], 0, sizeof(fc->v[fc->n]));
        fc->v[fc->n].cpu_milli = t->cpu_milli;
        fc->v[fc->n].milli = t->num_gpu ? t->gpu_milli : 0;
        fc->v[fc->n].num_gpu = t->num_gpu;
        fc->v[fc->n].model_mask = t->model_mask;
        fc->tab[s] = (int32_t)fc->n++;
    }
    s = (size_t)fc->tab[s];
    fc->v[s].weight += fc->inc;
    fc->total += fc->inc;
    fc->arrivals++;
    /* decay by growing what an arrival weighs; rescale long before overflow */
    fc->inc *= fc->growth;
    if (fc->inc > 1e100) {
        for (size_t i = 0; i < fc->n; i++)
            fc->v[i].weight /= fc->inc;
        fc->total /= fc->inc;
        fc->inc = 1;
    }
    return 0;
}

int allot_frag_counts_mix(const struct allot_frag_counts *fc, double coverage,
                          struct allot_frag_mix *out)
{
    struct allot_frag_task *v;
    double covered = 0, sum = 0;
    int keep = 0;

    memset(out, 0, sizeof(*out));
    if (coverage <= 0 || coverage > 1)
        return ALLOT_EINVAL;
    if (fc->n == 0)
        return 0;
    v = allot_malloc(fc->n * sizeof(*v));
    if (!v)
        return ALLOT_ENOMEM;
    memcpy(v, fc->v, fc->n * sizeof(*v));
    qsort(v, fc->n, sizeof(*v), cmp_mix);
    while ((size_t)keep < fc->n && covered < coverage * fc->total) {
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

int allot_frag_mix_build(const struct allot_task *tasks, size_t n, double coverage,
                         struct allot_frag_mix *out)
{
    struct allot_frag_counts fc;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (coverage <= 0 || coverage > 1)
        return ALLOT_EINVAL;
    allot_frag_counts_init(&fc, 0, 0);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = allot_frag_counts_add(&fc, &tasks[i]);
    if (rc == 0)
        rc = allot_frag_counts_mix(&fc, coverage, out);
    allot_frag_counts_clear(&fc);
    return rc;
}

void allot_frag_mix_clear(struct allot_frag_mix *m)
{
    allot_free(m->v);
    m->v = NULL;
    m->n = 0;
}
