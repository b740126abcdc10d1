/*
 * Fragmentation-aware policies: fgd (Fragmentation Gradient Descent, Weng
 * et al., ATC'23) and allot, our default.
 *
 * Both score a node by how much a placement lowers the node's
 * fragmentation F_n under a typical-task mix: dF = F_before - F_after,
 * score = floor(100 * sigmoid(dF / scale)). fgd uses the mix it is handed
 * (the trace's, as in the paper) with scale 1000; with no mix it learns one.
 * allot never gets the mix in advance: it learns it online from arrivals
 * (rebuilt at 1, 2, 4, ... 4096 arrivals, then every 4096, and installed
 * only when it moved by more than 0.02 in L1) and uses scale 2000,
 * which recovers what learning online costs (docs/benchmarks.md).
 */
#include "allot/sched.h"

#include <math.h>
#include <string.h>

struct frag_policy {
    double scale;            /* sigmoid scale in milli-GPU */
    bool topology;           /* add the NVLink topology bonus (allot) */
    bool learn;              /* learn the mix from arrivals */
    struct allot_task *seen; /* owned: arrived task shapes */
    size_t n_seen, cap_seen;
    size_t next_rebuild;
    struct frag_mix mix; /* owned when learning */
};

static int frag_init_common(struct sched *s, void **state, double scale, bool force_learn)
{
    struct frag_policy *p = allot_calloc(1, sizeof(*p));

    if (!p)
        return ALLOT_ENOMEM;
    p->scale = scale;
    p->learn = force_learn || !sched_mix(s);
    p->next_rebuild = 1;
    if (p->learn)
        sched_set_mix(s, &p->mix);
    *state = p;
    return 0;
}

static int fgd_init(struct sched *s, void **state)
{
    return frag_init_common(s, state, 1000.0, false);
}

static int allot_init(struct sched *s, void **state)
{
    int rc = frag_init_common(s, state, 2000.0, true);

    if (rc == 0)
        ((struct frag_policy *)*state)->topology = true;
    return rc;
}

static void frag_fini(void *state)
{
    struct frag_policy *p = state;

    if (!p)
        return;
    frag_mix_clear(&p->mix);
    allot_free(p->seen);
    allot_free(p);
}

/* L1 distance between two mixes (shapes missing from one count fully). */
static double mix_distance(const struct frag_mix *a, const struct frag_mix *b)
{
    double d = 0;

    for (int i = 0; i < a->n; i++) {
        double q = 0;
        for (int j = 0; j < b->n; j++)
            if (a->v[i].cpu_milli == b->v[j].cpu_milli && a->v[i].milli == b->v[j].milli &&
                a->v[i].num_gpu == b->v[j].num_gpu && a->v[i].model_mask == b->v[j].model_mask)
                q = b->v[j].p;
        d += fabs(a->v[i].p - q);
    }
    for (int j = 0; j < b->n; j++) {
        bool found = false;
        for (int i = 0; i < a->n && !found; i++)
            found = a->v[i].cpu_milli == b->v[j].cpu_milli && a->v[i].milli == b->v[j].milli &&
                    a->v[i].num_gpu == b->v[j].num_gpu && a->v[i].model_mask == b->v[j].model_mask;
        if (!found)
            d += b->v[j].p;
    }
    return d;
}

static void frag_observe(void *state, struct sched *s, const struct allot_task *t)
{
    struct frag_policy *p = state;
    struct frag_mix fresh;

    if (!p->learn)
        return;
    if (allot_grow((void **)&p->seen, &p->cap_seen, p->n_seen + 1, sizeof(*p->seen)))
        return; /* keep the old mix: learning is best effort */
    p->seen[p->n_seen++] = *t;
    if (p->n_seen < p->next_rebuild)
        return;
    p->next_rebuild = p->n_seen < 4096 ? p->n_seen * 2 : p->n_seen + 4096;
    if (frag_mix_build(p->seen, p->n_seen, 0.95, &fresh) != 0)
        return;
    if (mix_distance(&p->mix, &fresh) < 0.02) {
        /* the mix has not moved: keep every cached score */
        frag_mix_clear(&fresh);
        return;
    }
    frag_mix_clear(&p->mix);
    p->mix = fresh;
    sched_set_mix(s, &p->mix);
}

/* Best dF over the GPU choices for t on n; writes the chosen fraction GPU
 * (or -1) to *gpu. */
static double best_delta(const struct sched *s, const struct allot_node *n,
                         const struct allot_task *t, int *gpu)
{
    const struct frag_mix *m = sched_mix(s);
    int32_t g[ALLOT_MAX_GPUS];
    double before, best = -HUGE_VAL;
    int64_t cpu_after = n->cpu_free - t->cpu_milli;

    *gpu = -1;
    for (int i = 0; i < n->n_gpus; i++)
        g[i] = n->gpus[i].mode == ALLOT_GPU_MIG ? 0 : n->gpus[i].free_milli;
    before = sched_node_frag(s, (int)(n - allot_cluster_node(sched_cluster(s), 0)));
    if (t->num_gpu == 0 || t->mig_profile >= 0)
        return before - frag_state(m, n->model, cpu_after, g, n->n_gpus);
    if (t->gpu_milli == ALLOT_MILLI && t->gpu_mem_mib == 0) {
        int k = t->num_gpu;
        for (int i = 0; i < n->n_gpus && k > 0; i++)
            if (n->gpus[i].mode != ALLOT_GPU_MIG && g[i] == ALLOT_MILLI) {
                g[i] = 0;
                k--;
            }
        return before - frag_state(m, n->model, cpu_after, g, n->n_gpus);
    }
    for (int i = 0; i < n->n_gpus; i++) {
        const struct allot_gpu *u = &n->gpus[i];
        double d;
        bool dup = false;
        if (!allot_gpu_takes_fraction(u, t))
            continue;
        /* GPUs with equal free capacity give equal results: try one */
        for (int j = 0; j < i && !dup; j++)
            dup = g[j] == g[i] && allot_gpu_takes_fraction(&n->gpus[j], t);
        if (dup)
            continue;
        g[i] -= t->gpu_milli;
        d = before - frag_state(m, n->model, cpu_after, g, n->n_gpus);
        g[i] += t->gpu_milli;
        if (d > best) {
            best = d;
            *gpu = i;
        }
    }
    return best;
}

/*
 * Topology, the lowest-order part of allot's score (0..3): +2 when a
 * multi-GPU task fits inside one NVLink island of the node; +1 when a
 * whole-GPU task can be served without breaking a fully free island (a
 * partly used island has room), so big tasks keep their islands.
 */
static int topology_bonus(const struct allot_node *n, const struct allot_task *t)
{
    int free_in[ALLOT_MAX_GPUS] = {0}, size[ALLOT_MAX_GPUS] = {0}, bonus = 0;

    if (t->num_gpu == 0 || t->mig_profile >= 0 || t->gpu_milli < ALLOT_MILLI)
        return 0;
    for (int i = 0; i < n->n_gpus; i++) {
        int is = n->gpus[i].island % ALLOT_MAX_GPUS;
        size[is]++;
        free_in[is] += n->gpus[i].mode != ALLOT_GPU_MIG && n->gpus[i].free_milli == ALLOT_MILLI;
    }
    for (int is = 0; is < ALLOT_MAX_GPUS; is++) {
        if (t->num_gpu > 1 && free_in[is] >= t->num_gpu)
            bonus |= 2;
        if (free_in[is] >= t->num_gpu && free_in[is] < size[is])
            bonus |= 1;
    }
    return bonus;
}

static int frag_score(void *state, const struct sched *s, const struct allot_node *n,
                      const struct allot_task *t)
{
    struct frag_policy *p = state;
    int gpu;
    double d;

    /* a task that asks for nothing changes nothing: every node is as good.
     * A CPU-only task is scored by dF: its CPU can strand a node's GPUs. */
    if (t->num_gpu == 0 && t->cpu_milli == 0)
        return p->topology ? 100 * 4 : 100;
    d = best_delta(s, n, t, &gpu);
    if (!p->topology)
        return (int)floor(100.0 / (1.0 + exp(-d / p->scale)));
    return (int)floor(100.0 / (1.0 + exp(-d / p->scale))) * 4 + topology_bonus(n, t);
}

static int frag_choose(void *state, const struct sched *s, int node, const struct allot_task *t,
                       struct allot_placement *out)
{
    const struct allot_node *n = allot_cluster_node(sched_cluster(s), node);
    int gpu;

    if (t->num_gpu != 1 || t->mig_profile >= 0 || (t->gpu_milli == ALLOT_MILLI && !t->gpu_mem_mib))
        return sched_choose_default(s, node, t, out);
    (void)best_delta(s, n, t, &gpu);
    if (gpu < 0)
        return ALLOT_ENOSPC;
    sched_placement_init(s, node, t, out);
    out->gpu_mask = 1u << gpu;
    out->gpu_milli = t->gpu_milli;
    out->gpu_mem_mib = t->gpu_mem_mib;
    return 0;
}

const struct sched_policy_ops sched_policy_fgd = {
    .name = "fgd",
    .summary = "fragmentation gradient descent with the given task mix (openb FGD)",
    .flags = SCHED_POLICY_FRAG,
    .init = fgd_init,
    .fini = frag_fini,
    .score = frag_score,
    .choose = frag_choose,
    .observe = frag_observe,
};

const struct sched_policy_ops sched_policy_allot = {
    .name = "allot",
    .summary = "allot's default: fragmentation-aware, learns the task mix online",
    .flags = SCHED_POLICY_FRAG,
    .init = allot_init,
    .fini = frag_fini,
    .score = frag_score,
    .choose = frag_choose,
    .observe = frag_observe,
};
