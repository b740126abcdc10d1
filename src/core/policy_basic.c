/*
 * Placement policies that score a node from its free capacity alone:
 * firstfit, bestfit, spread, random, dotprod, gpuclustering, gpupacking.
 *
 * The five openb policies follow docs/benchmarks.md exactly (integer
 * scores, constants 128000 milli-CPU and 8000 milli-GPU); ties are broken by
 * node rank in the scheduler. Every score is offset so that a feasible node
 * never scores below 0 (-1 means "refuse").
 */
#include "allot/sched.h"

#include <math.h>

#define CPU_SCALE 128000  /* milli-CPU of the reference node */
#define GPU_SCALE 8000    /* milli-GPU of the reference node */
#define OFFSET    1000000 /* keeps unbounded scores non-negative */

/* Sum of free milli over the node's non-MIG GPUs. */
static int64_t node_free_gpu(const struct allot_node *n)
{
    int64_t f = 0;

    for (int i = 0; i < n->n_gpus; i++)
        f += n->gpus[i].free_milli;
    return f;
}

/* Total GPU milli task t asks for on node n. */
static int64_t task_gpu(const struct allot_sched *s, const struct allot_node *n,
                        const struct allot_task *t)
{
    return (int64_t)t->num_gpu * allot_task_gpu_milli(allot_sched_cluster(s), t, n->model);
}

/* ---- firstfit: the first node in rank order ---- */

static int firstfit_score(void *st, const struct allot_sched *s, const struct allot_node *n,
                          const struct allot_task *t)
{
    return 0;
}

const struct allot_sched_policy_ops allot_sched_policy_firstfit = {
    .name = "firstfit",
    .summary = "first feasible node in the seeded node order",
    .score = firstfit_score,
};

/* ---- bestfit (openb BestFit) ---- */

/*
 * raw = floor(100 * (1 - [0.5 (C - c)/128000 + 0.5 (G - g)/8000]))
 *     = 100 - ceil(((C - c) + 16 (G - g)) / 2560), computed exactly.
 * The min-max normalisation of the definition maps exactly the nodes with the
 * highest raw score to 100 (integer division), so the winner set is that of
 * the raw score and normalising is not needed.
 */
static int bestfit_score(void *st, const struct allot_sched *s, const struct allot_node *n,
                         const struct allot_task *t)
{
    int64_t x = (n->cpu_free - t->cpu_milli) + 16 * (node_free_gpu(n) - task_gpu(s, n, t));
    int64_t q = x >= 0 ? (x + 2559) / 2560 : -((-x) / 2560);

    return (int)(OFFSET + 100 - q);
}

const struct allot_sched_policy_ops allot_sched_policy_bestfit = {
    .name = "bestfit",
    .summary = "least CPU and GPU left over (openb BestFit)",
    .score = bestfit_score,
};

/* ---- spread (worst fit) ---- */

/*
 * Worst fit: most fully free GPUs first (keeps load spread across GPUs),
 * then most CPU and GPU left over, X = (C - c) + 16 (G - g).
 * score = whole * SPREAD_W + min(X, SPREAD_W - 1).
 */
#define SPREAD_W 1000000

static int spread_score(void *st, const struct allot_sched *s, const struct allot_node *n,
                        const struct allot_task *t)
{
    int64_t x = (n->cpu_free - t->cpu_milli) + 16 * (node_free_gpu(n) - task_gpu(s, n, t));
    int whole = 0;

    for (int i = 0; i < n->n_gpus; i++)
        whole += allot_gpu_whole_free(&n->gpus[i]);
    if (x >= SPREAD_W)
        x = SPREAD_W - 1;
    return whole * SPREAD_W + (int)(x < 0 ? 0 : x);
}

/* Exact for non-MIG tasks: X = cap_key - (c + 16 g); MIG tasks count g = 0. */
static int spread_bound(void *st, int bucket, int64_t cap_key, const struct allot_task *t)
{
    int whole = bucket / ALLOT_BUCKET_PARTS % (ALLOT_MAX_GPUS + 1);
    int64_t g = t->mig_profile >= 0 ? 0 : (int64_t)t->num_gpu * t->gpu_milli;
    int64_t x = cap_key - t->cpu_milli - 16 * g;

    if (x >= SPREAD_W)
        x = SPREAD_W - 1;
    return whole * SPREAD_W + (int)(x < 0 ? 0 : x);
}

const struct allot_sched_policy_ops allot_sched_policy_spread = {
    .name = "spread",
    .summary = "most free GPUs, then most CPU and GPU left over (worst fit)",
    .score = spread_score,
    .bound = spread_bound,
};

/* ---- random ---- */

/* Random GPU among the fitting ones for fractions; defaults otherwise. */
static int random_choose(void *st, const struct allot_sched *s, int node,
                         const struct allot_task *t, struct allot_placement *out)
{
    const struct allot_node *n = allot_cluster_node(allot_sched_cluster(s), node);
    int fit[ALLOT_MAX_GPUS], k = 0;

    if (!allot_sched_task_is_fraction(t))
        return allot_sched_choose_default(s, node, t, out);
    for (int i = 0; i < n->n_gpus; i++)
        if (allot_gpu_takes_fraction(&n->gpus[i], t))
            fit[k++] = i;
    if (!k)
        return ALLOT_ENOSPC;
    return allot_sched_place_fraction(
        s, node, t, fit[allot_rng_below(allot_sched_rng((struct allot_sched *)s), (uint64_t)k)],
        out);
}

const struct allot_sched_policy_ops allot_sched_policy_random = {
    .name = "random",
    .summary = "uniformly random feasible node (openb Random)",
    .flags = ALLOT_SCHED_POLICY_RANDOM,
    .choose = random_choose,
};

/* ---- dotprod ---- */

static int dotprod_score(void *st, const struct allot_sched *s, const struct allot_node *n,
                         const struct allot_task *t)
{
    double dot = (double)n->cpu_free / CPU_SCALE * ((double)t->cpu_milli / CPU_SCALE) +
                 (double)node_free_gpu(n) / GPU_SCALE * ((double)task_gpu(s, n, t) / GPU_SCALE);

    return (int)(OFFSET + floor(100.0 * (1.0 - dot / 2.0)));
}

const struct allot_sched_policy_ops allot_sched_policy_dotprod = {
    .name = "dotprod",
    .summary = "smallest dot product of free and requested resources (openb DotProd)",
    .score = dotprod_score,
};

/* ---- gpuclustering ---- */

static int gpuclustering_score(void *st, const struct allot_sched *s, const struct allot_node *n,
                               const struct allot_task *t)
{
    int cls = allot_task_pod_class(t), bonus, same = 0, other = 0;
    double f;

    if (cls < 0)
        return 0;
    for (int i = 0; i < ALLOT_POD_CLASSES; i++) {
        if (!n->pod_classes[i])
            continue;
        if (i == cls)
            same = 1;
        else
            other = 1;
    }
    bonus = same ? (other ? 50 : 75) : (other ? 0 : 25);
    /* the used share of the reference node's 8 GPUs, or of the node's own
     * GPUs when it has more: in [0, 1], so that no feasible node scores
     * below 0 (a score below 0 refuses the node) */
    int64_t scale = n->n_gpus * 1000 > GPU_SCALE ? (int64_t)n->n_gpus * 1000 : GPU_SCALE;
    f = (double)(scale - node_free_gpu(n)) / (double)scale;
    ALLOT_ALWAYS(f >= 0.0 && f <= 1.0);
    return (int)floor(25.0 * f + bonus);
}

const struct allot_sched_policy_ops allot_sched_policy_gpuclustering = {
    .name = "gpuclustering",
    .summary = "keep tasks of one class together (openb GpuClustering)",
    .flags = ALLOT_SCHED_POLICY_POD_CLASSES,
    .score = gpuclustering_score,
};

/* ---- gpupacking ---- */

static int gpupacking_score(void *st, const struct allot_sched *s, const struct allot_node *n,
                            const struct allot_task *t)
{
    bool used = false;
    int best_partial = -1;

    if (t->num_gpu == 0)
        return 0;
    for (int i = 0; i < n->n_gpus; i++) {
        const struct allot_gpu *g = &n->gpus[i];
        if (g->free_milli < ALLOT_MILLI)
            used = true;
        /* a fraction served from a partly used GPU (best fit among them) */
        if (t->num_gpu == 1 && t->gpu_milli < ALLOT_MILLI && g->free_milli < ALLOT_MILLI &&
            allot_gpu_takes_fraction(g, t) && (best_partial < 0 || g->free_milli < best_partial))
            best_partial = g->free_milli;
    }
    if (best_partial >= 0) {
        /* free % of the chosen GPU, divided by 10 */
        int sc = (int)floor(100.0 - best_partial / 100.0);
        return sc < 50 ? 50 : sc;
    }
    if (used) {
        int sc = 50 - t->num_gpu;
        return sc < 33 ? 33 : sc;
    }
    return 33 - n->n_gpus;
}

const struct allot_sched_policy_ops allot_sched_policy_gpupacking = {
    .name = "gpupacking",
    .summary = "partly used GPUs first, then used nodes, then small empty nodes (openb GpuPacking)",
    .score = gpupacking_score,
};
