/*
 * The placement scheduler (see sched.h): shape interning, the per-class
 * score cache, the pick loop, the default GPU choice and the policy table.
 *
 * Cache validity: a state class never changes state (a node whose state
 * changes moves to another class), so a class's cached score for a task
 * shape stays right until the policy's parameters change, which bumps
 * s->gen. The cache is one dense array per task shape indexed by class id;
 * an entry holds the class's birth serial, so a recycled class id never
 * reads its predecessor's score. A shape's array is wiped lazily the first
 * time it is used after a generation change. A second generation,
 * s->gen_frac, covers only fraction shapes (allot_sched_task_is_fraction):
 * a policy whose change only moves fraction scores bumps it alone.
 */
#include "allot/sched.h"

#include <string.h>

struct allot_sched {
    struct allot_cluster *c;                  /* borrowed */
    const struct allot_sched_policy_ops *ops; /* static */
    void *pstate;                             /* owned by the policy */
    struct allot_rng rng;
    const struct allot_frag_mix *mix; /* borrowed */
    uint32_t gen;                     /* score cache generation, >= 1 */
    uint32_t gen_frac;                /* ... for fraction shapes only */
    struct allot_task *shapes;        /* owned: interned task shapes */
    size_t n_shapes, shapes_cap;
    int32_t *shape_tab; /* owned: hash -> shape id, -1 empty */
    size_t shape_tab_cap;
    struct shape_cache *cache; /* owned: per shape id */
    size_t cache_cap;
    struct frontier *pq; /* owned: bounded search stack */
    size_t pq_cap;
    int32_t *feasible; /* owned: scratch list of feasible class ids (random) */
    size_t feasible_cap;
};

/* An unvisited class in the bounded search: bucket b, heap position pos. */
struct frontier {
    int bound;
    int32_t bucket;
    int32_t pos;
};

/* Cached score of every class for one task shape. */
struct score_entry {
    uint32_t birth; /* class birth serial the score belongs to; 0 = empty */
    int32_t score;  /* -1: infeasible */
};
struct shape_cache {
    uint32_t gen;          /* generation the entries belong to */
    uint32_t gen_frac;     /* fraction generation they belong to */
    uint64_t nofit_epoch;  /* grow epoch + 1 when the shape last fit nowhere; 0: never */
    size_t cap;            /* entries allocated */
    struct score_entry *v; /* owned, indexed by class id */
};

/* ---- shapes ------------------------------------------------------------ */

static uint64_t shape_hash(const struct allot_task *t)
{
    return allot_task_hash(t, 0x5eed);
}

/* Returns the id of t's shape, interning it; negative on ENOMEM. */
static int shape_id(struct allot_sched *s, const struct allot_task *t)
{
    size_t h;

    if ((s->n_shapes + 1) * 2 > s->shape_tab_cap) {
        size_t ncap = s->shape_tab_cap ? s->shape_tab_cap * 2 : 256;
        int32_t *tab = allot_malloc(ncap * sizeof(*tab));
        if (!tab)
            return ALLOT_ENOMEM;
        for (size_t i = 0; i < ncap; i++)
            tab[i] = -1;
        for (size_t i = 0; i < s->n_shapes; i++) {
            size_t j = (size_t)shape_hash(&s->shapes[i]) & (ncap - 1);
            while (tab[j] >= 0)
                j = (j + 1) & (ncap - 1);
            tab[j] = (int32_t)i;
        }
        allot_free(s->shape_tab);
        s->shape_tab = tab;
        s->shape_tab_cap = ncap;
    }
    h = (size_t)shape_hash(t) & (s->shape_tab_cap - 1);
    while (s->shape_tab[h] >= 0) {
        if (allot_task_same(&s->shapes[s->shape_tab[h]], t))
            return s->shape_tab[h];
        h = (h + 1) & (s->shape_tab_cap - 1);
    }
    if (allot_grow((void **)&s->shapes, &s->shapes_cap, s->n_shapes + 1, sizeof(*s->shapes)))
        return ALLOT_ENOMEM;
    s->shapes[s->n_shapes] = *t;
    s->shape_tab[h] = (int32_t)s->n_shapes;
    return (int)s->n_shapes++;
}

/* ---- lifecycle ------------------------------------------------------------ */

struct allot_sched *allot_sched_new(struct allot_cluster *c,
                                    const struct allot_sched_policy_ops *policy,
                                    const struct allot_sched_opts *opts)
{
    struct allot_sched *s = allot_calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->c = c;
    s->ops = policy;
    s->gen = 1;
    allot_rng_seed(&s->rng, opts ? opts->seed : 0);
    s->mix = opts ? opts->mix : NULL;
    if (allot_cluster_set_class_flags(
            c, (policy->flags & ALLOT_SCHED_POLICY_POD_CLASSES) ? ALLOT_CLASS_POD_CLASSES : 0)) {
        allot_free(s);
        return NULL;
    }
    if (policy->init && policy->init(s, &s->pstate) != 0) {
        allot_free(s);
        return NULL;
    }
    return s;
}

void allot_sched_free(struct allot_sched *s)
{
    if (!s)
        return;
    if (s->ops->fini)
        s->ops->fini(s->pstate);
    for (size_t i = 0; i < s->cache_cap; i++)
        allot_free(s->cache[i].v);
    allot_free(s->cache);
    allot_free(s->pq);
    allot_free(s->feasible);
    allot_free(s->shapes);
    allot_free(s->shape_tab);
    allot_free(s);
}

void allot_sched_invalidate(struct allot_sched *s)
{
    s->gen++;
    if (s->gen == 0)
        s->gen = 1;
}

void allot_sched_invalidate_fractions(struct allot_sched *s)
{
    s->gen_frac++;
}

struct allot_cluster *allot_sched_cluster(const struct allot_sched *s)
{
    return s->c;
}

const struct allot_frag_mix *allot_sched_mix(const struct allot_sched *s)
{
    return s->mix;
}

void allot_sched_set_mix(struct allot_sched *s, const struct allot_frag_mix *mix)
{
    s->mix = mix;
    allot_sched_invalidate(s);
}

void *allot_sched_policy_state(const struct allot_sched *s)
{
    return s->pstate;
}

struct allot_rng *allot_sched_rng(struct allot_sched *s)
{
    return &s->rng;
}

double allot_sched_node_frag(const struct allot_sched *s, int node)
{
    const struct allot_node *n = allot_cluster_node(s->c, node);
    struct allot_class *k;

    if (!s->mix)
        return 0;
    if (allot_cluster_node_class(s->c, node) < 0)
        return allot_frag_node(s->mix, n);
    k = allot_cluster_class(s->c, allot_cluster_node_class(s->c, node));
    if (k->frag_gen != s->gen) {
        k->frag = allot_frag_node(s->mix, n);
        k->frag_gen = s->gen;
    }
    return k->frag;
}

/* ---- default GPU choice ------------------------------------------------------ */

void allot_sched_placement_init(const struct allot_sched *s, int node, const struct allot_task *t,
                                struct allot_placement *out)
{
    memset(out, 0, sizeof(*out));
    out->node = node;
    out->mig_profile = -1;
    out->mig_start = -1;
    out->cpu_milli = t->cpu_milli;
    out->mem_mib = t->mem_mib;
    out->rdma_vfs = t->rdma_vfs;
    out->pod_class = allot_task_pod_class(t);
    out->tenant = t->tenant;
    out->isolation = t->isolation;
    (void)s;
}

bool allot_sched_task_is_fraction(const struct allot_task *t)
{
    return allot_task_is_fraction(t);
}

int allot_sched_place_fraction(const struct allot_sched *s, int node, const struct allot_task *t,
                               int gpu, struct allot_placement *out)
{
    if (gpu < 0)
        return ALLOT_ENOSPC;
    allot_sched_placement_init(s, node, t, out);
    out->gpu_mask = 1u << gpu;
    out->gpu_milli = t->gpu_milli;
    out->gpu_mem_mib = allot_fraction_mem(&allot_cluster_node(s->c, node)->gpus[gpu], t);
    return 0;
}

/* Whole GPUs: inside the NVLink island with the fewest free GPUs that still
 * holds them all (keeps big islands whole), lowest index first; otherwise
 * the lowest-index free GPUs. */
static int choose_whole(const struct allot_node *n, int k, uint32_t *mask)
{
    int free_in[ALLOT_MAX_GPUS] = {0};
    int best = -1;
    uint32_t m = 0;

    for (int i = 0; i < n->n_gpus; i++)
        if (allot_gpu_whole_free(&n->gpus[i]))
            free_in[n->gpus[i].island % ALLOT_MAX_GPUS]++;
    for (int is = 0; is < ALLOT_MAX_GPUS; is++)
        if (free_in[is] >= k && (best < 0 || free_in[is] < free_in[best]))
            best = is;
    for (int pass = 0; pass < 2 && k > 0; pass++) {
        for (int i = 0; i < n->n_gpus && k > 0; i++) {
            const struct allot_gpu *g = &n->gpus[i];
            if (!allot_gpu_whole_free(g) || (m >> i & 1))
                continue;
            if (pass == 0 && best >= 0 && g->island != best)
                continue;
            m |= 1u << i;
            k--;
        }
    }
    *mask = m;
    return k == 0 ? 0 : ALLOT_ENOSPC;
}

int allot_sched_choose_default(const struct allot_sched *s, int node, const struct allot_task *t,
                               struct allot_placement *out)
{
    const struct allot_node *n = allot_cluster_node(s->c, node);
    const struct allot_catalog *cat = allot_cluster_catalog(s->c);

    allot_sched_placement_init(s, node, t, out);
    if (t->num_gpu == 0)
        return 0;
    if (t->mig_profile >= 0) {
        const struct allot_gpu_model *m = &cat->models[n->model];
        int lp = m->profile_by_global[t->mig_profile];
        int best = -1, best_used = 0, best_opt = -1;
        struct allot_mig_placement bp = {0};
        for (int i = 0; i < n->n_gpus && lp >= 0; i++) {
            const struct allot_gpu *g = &n->gpus[i];
            struct allot_mig_placement p;
            struct allot_mig_state after;
            int used, opt;
            if (g->mode != ALLOT_GPU_MIG || allot_mig_best_placement(m, &g->mig, lp, &p) != 0)
                continue;
            after = g->mig;
            if (allot_mig_alloc(m, &after, lp, p.start) != 0)
                continue;
            used = g->mig.n_instances > 0;
            opt = allot_mig_options(m, &after);
            /* pack: prefer GPUs already carved, then the most options left */
            if (best < 0 || used > best_used || (used == best_used && opt > best_opt)) {
                best = i;
                best_used = used;
                best_opt = opt;
                bp = p;
            }
        }
        if (best < 0)
            return ALLOT_ENOSPC;
        out->gpu_mask = 1u << best;
        out->mig_profile = lp;
        out->mig_start = bp.start;
        out->gpu_milli = m->profiles[lp].compute_slices * ALLOT_MILLI / m->compute_slices;
        out->gpu_mem_mib =
            n->gpus[best].free_mem_mib -
            m->memory_mib *
                (m->memory_slices - __builtin_popcount(n->gpus[best].mig.used_mask) - bp.size) /
                m->memory_slices;
        return 0;
    }
    if (t->gpu_milli == ALLOT_MILLI && t->gpu_mem_mib == 0) {
        int rc = choose_whole(n, t->num_gpu, &out->gpu_mask);
        out->gpu_milli = ALLOT_MILLI;
        out->gpu_mem_mib = rc == 0 && n->model >= 0 ? cat->models[n->model].memory_mib : 0;
        return rc;
    }
    {
        int best = -1;
        for (int i = 0; i < n->n_gpus; i++) {
            const struct allot_gpu *g = &n->gpus[i];
            if (!allot_gpu_takes_fraction(g, t))
                continue;
            if (best < 0 || g->free_milli < n->gpus[best].free_milli)
                best = i;
        }
        return allot_sched_place_fraction(s, node, t, best, out);
    }
}

/* ---- picking ------------------------------------------------------------------ */

/* Makes the cache of `shape` current and large enough for every class id. */
static struct shape_cache *shape_cache(struct allot_sched *s, int shape)
{
    size_t need = (size_t)allot_cluster_class_ids(s->c);
    struct shape_cache *sc;

    if ((size_t)shape >= s->cache_cap) {
        size_t old = s->cache_cap;
        if (allot_grow((void **)&s->cache, &s->cache_cap, (size_t)shape + 1, sizeof(*s->cache)))
            return NULL;
        memset(s->cache + old, 0, (s->cache_cap - old) * sizeof(*s->cache));
    }
    sc = &s->cache[shape];
    if (sc->cap < need) {
        size_t old = sc->cap;
        if (allot_grow((void **)&sc->v, &sc->cap, need, sizeof(*sc->v)))
            return NULL;
        memset(sc->v + old, 0, (sc->cap - old) * sizeof(*sc->v));
    }
    if (sc->gen != s->gen ||
        (sc->gen_frac != s->gen_frac && allot_sched_task_is_fraction(&s->shapes[shape]))) {
        if (sc->cap) /* no class yet: nothing to clear (and no array) */
            memset(sc->v, 0, sc->cap * sizeof(*sc->v));
        sc->gen = s->gen;
        sc->gen_frac = s->gen_frac;
        sc->nofit_epoch = 0;
    }
    return sc;
}

/* Scores class id for t (feasibility first) and stores it in e. */
static int class_score(struct allot_sched *s, int32_t id, uint32_t birth,
                       const struct allot_task *t, struct score_entry *e)
{
    const struct allot_class *k = allot_cluster_class(s->c, id);
    const struct allot_node *rep = allot_cluster_node(s->c, allot_class_rep(k));
    int sc;

    if (!allot_node_fits(s->c, rep, t))
        sc = -1;
    else if (s->ops->flags & ALLOT_SCHED_POLICY_RANDOM)
        sc = 0;
    else
        sc = s->ops->score(s->pstate, s, rep, t);
    e->birth = birth;
    e->score = sc;
    return sc;
}

/* The cached score of class id, computed when missing. */
static inline int cached_score(struct allot_sched *s, struct shape_cache *sc,
                               const struct allot_class_hot *hot, int32_t id,
                               const struct allot_task *t)
{
    struct score_entry *e = &sc->v[id];

    if (e->birth == hot[id].birth)
        return e->score;
    return class_score(s, id, hot[id].birth, t, e);
}

/*
 * Bounded search for a policy with a bound: buckets in order of the bound of
 * their heap root (the class with the most free capacity), each walked
 * depth-first from the root; a subtree whose root cannot beat the best
 * score so far is skipped (cap_key only falls down a heap, and the bound
 * with it), and so is every bucket after the first that cannot win.
 */
/* The non-empty buckets that may fit t, in increasing order. */
static int candidate_buckets(const struct allot_sched *s, const struct allot_task *t, int16_t *out)
{
    int n = allot_cluster_buckets_used(s->c, out), k = 0;

    for (int i = 0; i < n; i++)
        if (allot_bucket_admits(out[i], t))
            out[k++] = out[i];
    return k;
}

static int bounded_search(struct allot_sched *s, struct shape_cache *sc, const struct allot_task *t,
                          int *node)
{
    const struct allot_class_hot *hot = allot_cluster_class_hot(s->c);
    int best_sc = -1, best_id = -1, nb = 0;
    uint32_t best_rank = 0;
    struct frontier roots[ALLOT_BUCKETS];
    int16_t cand[ALLOT_BUCKETS];
    int ncand = candidate_buckets(s, t, cand);

    for (int ci = 0; ci < ncand; ci++) {
        const int32_t *ids;
        int j, b = cand[ci];
        (void)allot_cluster_bucket(s->c, b, &ids);
        j = nb++;
        roots[j].bound = s->ops->bound(s->pstate, b, allot_cluster_class(s->c, ids[0])->cap_key, t);
        roots[j].bucket = b;
        roots[j].pos = 0;
        while (j > 0 && roots[j - 1].bound < roots[j].bound) {
            struct frontier tmp = roots[j - 1];
            roots[j - 1] = roots[j];
            roots[j] = tmp;
            j--;
        }
    }
    for (int r = 0; r < nb; r++) {
        const int32_t *ids;
        int cnt = allot_cluster_bucket(s->c, roots[r].bucket, &ids);
        size_t n = 0;
        if (best_id >= 0 && roots[r].bound < best_sc)
            break;
        if (allot_grow((void **)&s->pq, &s->pq_cap, 1, sizeof(*s->pq)))
            return ALLOT_ENOMEM;
        s->pq[n++] = roots[r];
        while (n > 0) {
            struct frontier f = s->pq[--n];
            int32_t id = ids[f.pos];
            int v;
            if (best_id >= 0 && f.bound < best_sc)
                continue;
            v = cached_score(s, sc, hot, id, t);
            if (v > best_sc || (v == best_sc && v >= 0 && hot[id].rep_rank < best_rank)) {
                best_sc = v;
                best_rank = hot[id].rep_rank;
                best_id = id;
            }
            for (int32_t ch = 2 * f.pos + 1; ch <= 2 * f.pos + 2 && ch < cnt; ch++) {
                int bd = s->ops->bound(s->pstate, f.bucket,
                                       allot_cluster_class(s->c, ids[ch])->cap_key, t);
                if (best_id >= 0 && bd < best_sc)
                    continue;
                if (allot_grow((void **)&s->pq, &s->pq_cap, n + 1, sizeof(*s->pq)))
                    return ALLOT_ENOMEM;
                s->pq[n++] = (struct frontier){.bound = bd, .bucket = f.bucket, .pos = ch};
            }
        }
    }
    *node = best_id >= 0 ? allot_class_rep(allot_cluster_class(s->c, best_id)) : -1;
    return 0;
}

/* The score cache of t's shape, current, into *sc: 0, ALLOT_ENOSPC when t
 * fit nowhere before and no capacity was freed since (it still fits
 * nowhere), or ALLOT_ENOMEM. */
static int shape_begin(struct allot_sched *s, const struct allot_task *t, struct shape_cache **sc)
{
    int shape = shape_id(s, t);

    if (shape < 0)
        return shape;
    if (!(*sc = shape_cache(s, shape)))
        return ALLOT_ENOMEM;
    return (*sc)->nofit_epoch == allot_cluster_grow_epoch(s->c) + 1 ? ALLOT_ENOSPC : 0;
}

/* The GPUs of node (chosen because t fits there) for t, into out. */
static int choose_on(struct allot_sched *s, int node, const struct allot_task *t,
                     struct allot_placement *out)
{
    int rc = s->ops->choose ? s->ops->choose(s->pstate, s, node, t, out)
                            : allot_sched_choose_default(s, node, t, out);

    /* the node was chosen because it fits: its GPUs must take the task */
    if (ALLOT_NEVER(rc == ALLOT_ENOSPC))
        return ALLOT_EINTERNAL;
    return rc;
}

/*
 * allot_sched_pick for a task that names its nodes (t->nodes). A set of
 * nodes is no property of a state class, so the classes are scored for
 * t's shape without the set (the cache the set's shape shares with every
 * such task) and read for the nodes the set lets it use, one by one: the
 * best score, then the lowest rank; the random policy draws one of the
 * feasible nodes. A node of a class fits as its representative does.
 */
static int pick_in_set(struct allot_sched *s, const struct allot_task *t,
                       struct allot_placement *out)
{
    const struct allot_nodeset *set = t->nodes;
    const struct allot_class_hot *hot = allot_cluster_class_hot(s->c);
    struct allot_task base = *t;
    struct shape_cache *sc;
    bool random = s->ops->flags & ALLOT_SCHED_POLICY_RANDOM;
    int rc, node = -1, best_sc = -1, nn = allot_cluster_node_count(s->c);
    uint32_t best_rank = 0;
    uint64_t seen = 0;

    base.nodes = NULL;
    if ((rc = shape_begin(s, &base, &sc)) != 0)
        return rc; /* ALLOT_ENOSPC: it fits no node at all */
    for (int k = 0; k < (set->exclude ? nn : set->n); k++) {
        int i = set->exclude ? k : set->idx[k], v;
        int32_t id = allot_cluster_node_class(s->c, i); /* -1: not schedulable */
        uint32_t rank;
        if (id < 0 || (set->exclude && !allot_nodeset_has(set, i))) /* a listed i is in it */
            continue;
        if ((v = cached_score(s, sc, hot, id, &base)) < 0)
            continue;
        rank = allot_cluster_node(s->c, i)->rank;
        if (random) {
            if (allot_rng_below(&s->rng, ++seen) == 0)
                node = i;
        } else if (v > best_sc || (v == best_sc && rank < best_rank)) {
            best_sc = v;
            best_rank = rank;
            node = i;
        }
    }
    if (node < 0)
        return ALLOT_ENOSPC;
    return choose_on(s, node, t, out);
}

int allot_sched_pick(struct allot_sched *s, const struct allot_task *t, struct allot_placement *out)
{
    const int32_t *ids;
    int nlive;
    int node = -1, rc;
    struct shape_cache *sc;
    const struct allot_class_hot *hot = allot_cluster_class_hot(s->c);

    if (t->nodes)
        return pick_in_set(s, t, out);
    if ((rc = shape_begin(s, t, &sc)) != 0)
        return rc;
    if (s->ops->flags & ALLOT_SCHED_POLICY_RANDOM) {
        uint64_t total = 0, r;
        int16_t cand[ALLOT_BUCKETS];
        int ncand = candidate_buckets(s, t, cand);
        size_t nf = 0;
        /* one pass: the feasible classes, in bucket order, then a draw */
        for (int ci = 0; ci < ncand; ci++) {
            nlive = allot_cluster_bucket(s->c, cand[ci], &ids);
            if (allot_grow((void **)&s->feasible, &s->feasible_cap, nf + (size_t)nlive,
                           sizeof(*s->feasible)))
                return ALLOT_ENOMEM;
            for (int i = 0; i < nlive; i++)
                if (cached_score(s, sc, hot, ids[i], t) >= 0) {
                    s->feasible[nf++] = ids[i];
                    total += (uint64_t)allot_cluster_class(s->c, ids[i])->n_members;
                }
        }
        if (total == 0) {
            sc->nofit_epoch = allot_cluster_grow_epoch(s->c) + 1;
            return ALLOT_ENOSPC;
        }
        r = allot_rng_below(&s->rng, total);
        for (size_t i = 0; i < nf; i++) {
            const struct allot_class *k = allot_cluster_class(s->c, s->feasible[i]);
            if (r < (uint64_t)k->n_members) {
                node = k->heap[r];
                break;
            }
            r -= (uint64_t)k->n_members;
        }
    } else if (s->ops->bound) {
        rc = bounded_search(s, sc, t, &node);
        if (rc)
            return rc;
    } else {
        int best_sc = -1, best_id = -1;
        uint32_t best_rank = 0;
        int16_t cand[ALLOT_BUCKETS];
        int ncand = candidate_buckets(s, t, cand);
        for (int ci = 0; ci < ncand; ci++) {
            nlive = allot_cluster_bucket(s->c, cand[ci], &ids);
            for (int i = 0; i < nlive; i++) {
                int32_t id = ids[i];
                int v = cached_score(s, sc, hot, id, t);
                if (v > best_sc || (v == best_sc && v >= 0 && hot[id].rep_rank < best_rank)) {
                    best_sc = v;
                    best_rank = hot[id].rep_rank;
                    best_id = id;
                }
            }
        }
        if (best_id >= 0)
            node = allot_class_rep(allot_cluster_class(s->c, best_id));
    }
    if (node < 0) {
        sc->nofit_epoch = allot_cluster_grow_epoch(s->c) + 1;
        return ALLOT_ENOSPC;
    }
    return choose_on(s, node, t, out);
}

int allot_sched_place(struct allot_sched *s, const struct allot_task *t,
                      struct allot_placement *out, char *err, size_t errlen)
{
    char buf[256];
    int rc = allot_task_validate(allot_cluster_catalog(s->c), t, err ? err : buf,
                                 err ? errlen : sizeof(buf));

    if (rc)
        return rc;
    rc = allot_sched_pick(s, t, out);
    if (rc)
        return rc;
    rc = allot_cluster_apply(s->c, out);
    /* one feasibility rule: what the pick found, the cluster accepts (only
     * index growth may fail) */
    if (ALLOT_NEVER(rc != 0 && rc != ALLOT_ENOMEM))
        return ALLOT_EINTERNAL;
    return rc;
}

void allot_sched_observe(struct allot_sched *s, const struct allot_task *t)
{
    char err[128];
    struct allot_task shape = *t;

    shape.nodes = NULL; /* the mix is of shapes, wherever they may go */
    /* a shape the catalog rejects is never placed: nothing to learn */
    if (s->ops->observe &&
        allot_task_validate(allot_cluster_catalog(s->c), &shape, err, sizeof(err)) == 0)
        s->ops->observe(s->pstate, s, &shape);
}

int allot_sched_release(struct allot_sched *s, const struct allot_placement *p)
{
    return allot_cluster_release(s->c, p);
}

int allot_sched_check_invariants(const struct allot_sched *s, char *err, size_t errlen)
{
    const int32_t *ids;
    const struct allot_class_hot *hot;
    int rc = allot_cluster_check(s->c, err, errlen);
    int nlive;

    if (rc)
        return rc;
    /* every fresh cached feasibility answer must still be right */
    nlive = allot_cluster_classes(s->c, &ids);
    hot = allot_cluster_class_hot(s->c);
    for (size_t j = 0; j < s->cache_cap && j < s->n_shapes; j++) {
        const struct shape_cache *sc = &s->cache[j];
        if (sc->gen != s->gen)
            continue;
        for (int i = 0; i < nlive; i++) {
            const struct allot_class *k = allot_cluster_class(s->c, ids[i]);
            const struct allot_node *rep = allot_cluster_node(s->c, allot_class_rep(k));
            if ((size_t)ids[i] >= sc->cap || sc->v[ids[i]].birth != hot[ids[i]].birth)
                continue;
            if ((sc->v[ids[i]].score >= 0) != allot_node_fits(s->c, rep, &s->shapes[j])) {
                allot_fmt(err, errlen, "class of node %s: cached feasibility is stale", rep->name);
                return ALLOT_EINTERNAL;
            }
        }
    }
    return 0;
}

/* ---- registry ------------------------------------------------------------------ */

extern const struct allot_sched_policy_ops allot_sched_policy_firstfit, allot_sched_policy_bestfit,
    allot_sched_policy_spread, allot_sched_policy_random, allot_sched_policy_dotprod,
    allot_sched_policy_gpuclustering, allot_sched_policy_gpupacking, allot_sched_policy_fgd,
    allot_sched_policy_allot;

const struct allot_sched_policy_ops *const allot_sched_policies[] = {
    &allot_sched_policy_random,        &allot_sched_policy_dotprod,
    &allot_sched_policy_gpuclustering, &allot_sched_policy_gpupacking,
    &allot_sched_policy_bestfit,       &allot_sched_policy_fgd,
    &allot_sched_policy_firstfit,      &allot_sched_policy_spread,
    &allot_sched_policy_allot,         NULL,
};

const struct allot_sched_policy_ops *allot_sched_policy_find(const char *name)
{
    for (int i = 0; allot_sched_policies[i]; i++)
        if (strcmp(allot_sched_policies[i]->name, name) == 0)
            return allot_sched_policies[i];
    return NULL;
}

/* ---- entry points for the queue ---- */

int allot_sched_apply(struct allot_sched *s, const struct allot_placement *p)
{
    /* the score cache is per state class and a class never changes state,
     * so moving a node between classes needs no cache upkeep here; the
     * no-fit memo only trusts capacity that did not grow, and applying
     * only shrinks it */
    return allot_cluster_apply(s->c, p);
}

int allot_sched_restore(struct allot_sched *s, const struct allot_placement *p)
{
    return allot_cluster_restore(s->c, p); /* as allot_sched_apply */
}
