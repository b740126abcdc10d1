/*
 * Isolation matrix: every placement policy x every isolation level x every
 * task kind (whole GPU, multi-GPU, MIG, milli fraction, memory-only
 * fraction, CPU-only), on random clusters already holding other tenants'
 * work. Each decision is checked against a full-scan oracle written here
 * from the rules in docs/tenancy.md, independently of src/core/task.c:
 *   - exclusive-node: a node holds one tenant's tasks when any of them, or
 *     the newcomer, is exclusive-node;
 *   - exclusive-gpu: a time-shared GPU holds one tenant's fractions when
 *     any of them, or the newcomer, is exclusive-gpu (MIG and whole GPUs
 *     are not time-shared);
 *   - capacity: CPU, memory, RDMA VFs (counted from the tasks placed),
 *     free GPUs, free milli and GPU memory, MIG
 *     geometry, node state and GPU model;
 *   - node selectors: a node carries every label the task selects (read
 *     here as text, not through allot_label_hash).
 * A policy must place when the oracle finds a place and must answer
 * ALLOT_ENOSPC when it finds none; what it places must pass the oracle.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/sched.h"
#include "allot/tenant.h"

#include <string.h>

#include "catalog_fixture.h"

#define MAX_REC 64

/* What the oracle remembers of every task placed before the probe. */
struct rec {
    int node;
    uint32_t gpus; /* GPUs held */
    int tenant, iso;
    bool frac; /* a time-shared fraction */
    int vfs;   /* RDMA VFs held */
};

struct world {
    struct allot_cluster *c;
    struct rec rec[MAX_REC];
    int n_rec;
    int iso_of[8]; /* isolation level of tenants 1..7 */
    int vf_cap[8]; /* RDMA VFs of each node, as the oracle knows them */
    int sel;       /* the probe's selector (selectors[]); 0 while filling */
};

enum kind { K_WHOLE, K_MULTI, K_MIG, K_FRAC, K_MEMFRAC, K_CPU, K_KINDS };
static const char *const kind_names[] = {"whole",    "multi-gpu",       "mig",
                                         "fraction", "memory-fraction", "cpu-only"};

static struct allot_task task_of(int kind, int tenant, int iso, int milli)
{
    struct allot_task t = {.mig_profile = -1, .cpu_milli = 2000, .mem_mib = 4096};

    t.tenant = tenant;
    t.isolation = iso;
    switch (kind) {
    case K_WHOLE:
        t.num_gpu = 1;
        t.gpu_milli = ALLOT_MILLI;
        break;
    case K_MULTI:
        t.num_gpu = 2;
        t.gpu_milli = ALLOT_MILLI;
        break;
    case K_MIG:
        t.num_gpu = 1;
        t.mig_profile = allot_catalog_find_profile(cat, "1g.10gb");
        break;
    case K_FRAC:
        t.num_gpu = 1;
        t.gpu_milli = milli;
        break;
    case K_MEMFRAC:
        t.num_gpu = 1;
        t.gpu_mem_mib = 20000;
        break;
    default:
        break;
    }
    return t;
}

/* Labels of the nodes of world_new, in order, and the node selectors the
 * probes use, as "KEY=VALUE,..." lists. */
static const char *const node_labels[] = {"zone=a", "zone=b,fast=yes", "",
                                          "zone=b", "zone=a",          "zone=b"};
static const char *const selectors[] = {"", "zone=a", "zone=b", "fast=yes,zone=b", "zone=c"};
#define N_SELECTORS 5

/* Whether the comma-separated list holds the item [item, item + len). */
static bool list_has(const char *list, const char *item, size_t len)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, item, len) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* Splits "k=v,..." into labels (strings in buf); returns their count. */
static int labels_of(const char *list, char buf[256], struct allot_label out[ALLOT_MAX_SELECT])
{
    int n = 0;

    allot_strlcpy(buf, list, 256);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && n < ALLOT_MAX_SELECT;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = '\0';
        out[n++] = (struct allot_label){.key = tok, .value = eq + 1};
    }
    return n;
}

/* Task t selects the nodes that carry every label of selectors[sel]. */
static void task_select(struct allot_task *t, int sel)
{
    char buf[256];
    struct allot_label l[ALLOT_MAX_SELECT];
    int n = labels_of(selectors[sel], buf, l);

    memset(t->select, 0, sizeof(t->select));
    for (int i = 0; i < n; i++)
        t->select[i] = allot_label_hash(l[i].key, l[i].value);
}

/* ---- the oracle --------------------------------------------------------- */

/* Whether node ni carries every label of selector sel (by their text). */
static bool oracle_selected(int ni, int sel)
{
    const char *s = selectors[sel];

    while (*s) {
        size_t n = strcspn(s, ",");
        if (!list_has(node_labels[ni], s, n))
            return false;
        s += n + (s[n] == ',');
    }
    return true;
}

static bool oracle_node(const struct world *w, int ni, const struct allot_task *t)
{
    const struct allot_node *n = allot_cluster_node(w->c, ni);

    int vfs = 0;

    if (n->state != ALLOT_NODE_READY || n->cpu_free < t->cpu_milli || n->mem_free < t->mem_mib ||
        !oracle_selected(ni, w->sel))
        return false;
    for (int r = 0; r < w->n_rec; r++)
        vfs += w->rec[r].node == ni ? w->rec[r].vfs : 0;
    if (vfs + t->rdma_vfs > w->vf_cap[ni])
        return false;
    for (int r = 0; r < w->n_rec; r++) {
        const struct rec *h = &w->rec[r];
        if (h->node != ni || h->tenant == t->tenant)
            continue;
        if (h->iso == ALLOT_ISO_EXCLUSIVE_NODE || t->isolation == ALLOT_ISO_EXCLUSIVE_NODE)
            return false;
    }
    if (t->num_gpu == 0)
        return true;
    return n->model >= 0 && (!t->model_mask || (t->model_mask >> n->model & 1));
}

static bool gpu_held(const struct world *w, int ni, int g)
{
    for (int r = 0; r < w->n_rec; r++)
        if (w->rec[r].node == ni && (w->rec[r].gpus >> g & 1))
            return true;
    return false;
}

static bool oracle_whole_gpu(const struct world *w, int ni, int g)
{
    return allot_cluster_node(w->c, ni)->gpus[g].mode != ALLOT_GPU_MIG && !gpu_held(w, ni, g);
}

/* GPU memory a fraction takes on node ni: its ask, else its compute share of
 * the model's memory */
static int64_t oracle_frac_mem(const struct world *w, int ni, const struct allot_task *t)
{
    const struct allot_node *n = allot_cluster_node(w->c, ni);

    if (t->gpu_mem_mib)
        return t->gpu_mem_mib;
    return cat->models[n->model].memory_mib * t->gpu_milli / ALLOT_MILLI;
}

static bool oracle_frac_gpu(const struct world *w, int ni, int g, const struct allot_task *t)
{
    const struct allot_gpu *u = &allot_cluster_node(w->c, ni)->gpus[g];

    if (u->mode != ALLOT_GPU_SHARED || u->free_milli < t->gpu_milli ||
        u->free_mem_mib < oracle_frac_mem(w, ni, t))
        return false;
    for (int r = 0; r < w->n_rec; r++) {
        const struct rec *h = &w->rec[r];
        if (h->node != ni || !(h->gpus >> g & 1) || h->tenant == t->tenant)
            continue;
        if (h->iso == ALLOT_ISO_EXCLUSIVE_GPU || t->isolation == ALLOT_ISO_EXCLUSIVE_GPU)
            return false;
    }
    return true;
}

static bool oracle_mig_gpu(const struct world *w, int ni, int g, const struct allot_task *t)
{
    const struct allot_node *n = allot_cluster_node(w->c, ni);
    const struct allot_gpu_model *m = &cat->models[n->model];
    int lp = m->profile_by_global[t->mig_profile];

    return n->gpus[g].mode == ALLOT_GPU_MIG && lp >= 0 &&
           allot_mig_list_placements(m, &n->gpus[g].mig, lp, NULL, 0) > 0;
}

static bool is_frac(const struct allot_task *t)
{
    return t->num_gpu == 1 && t->mig_profile < 0 && t->gpu_milli < ALLOT_MILLI;
}

/* True when task t fits somewhere on node ni by the oracle's rules. */
static bool oracle_fits(const struct world *w, int ni, const struct allot_task *t)
{
    const struct allot_node *n = allot_cluster_node(w->c, ni);
    int k = 0;

    if (!oracle_node(w, ni, t))
        return false;
    if (t->num_gpu == 0)
        return true;
    for (int g = 0; g < n->n_gpus; g++) {
        if (t->mig_profile >= 0)
            k += oracle_mig_gpu(w, ni, g, t);
        else if (is_frac(t))
            k += oracle_frac_gpu(w, ni, g, t);
        else
            k += oracle_whole_gpu(w, ni, g);
    }
    return k >= (is_frac(t) || t->mig_profile >= 0 ? 1 : t->num_gpu);
}

/* Checks placement p of t (made on the state the oracle describes). */
static void oracle_check(const struct world *w, const struct allot_task *t,
                         const struct allot_placement *p, const char *what)
{
    const struct allot_node *n = allot_cluster_node(w->c, p->node);
    int want = t->num_gpu == 0 ? 0 : (is_frac(t) || t->mig_profile >= 0 ? 1 : t->num_gpu);

    if (!oracle_node(w, p->node, t))
        fail_msg("%s: node %s breaks node rules", what, n->name);
    if (p->rdma_vfs != t->rdma_vfs)
        fail_msg("%s: %d RDMA VFs placed, %d asked", what, p->rdma_vfs, t->rdma_vfs);
    if (__builtin_popcount(p->gpu_mask) != want)
        fail_msg("%s: %d GPUs placed, %d asked", what, __builtin_popcount(p->gpu_mask), want);
    for (int g = 0; g < n->n_gpus; g++) {
        bool ok;
        if (!(p->gpu_mask >> g & 1))
            continue;
        if (t->mig_profile >= 0)
            ok = oracle_mig_gpu(w, p->node, g, t);
        else if (is_frac(t))
            ok = oracle_frac_gpu(w, p->node, g, t);
        else
            ok = oracle_whole_gpu(w, p->node, g);
        if (!ok)
            fail_msg("%s: GPU %d of node %s breaks GPU rules", what, g, n->name);
    }
}

/* ---- random worlds ------------------------------------------------------ */

static int add_vfs(struct allot_cluster *c, const char *name, const char *model, int gpus, int mode,
                   int64_t cpu, int vfs)
{
    struct allot_label lab[ALLOT_MAX_SELECT];
    char buf[256];
    struct allot_node_spec sp = {.name = name,
                                 .model = model,
                                 .cpu_milli = cpu,
                                 .mem_mib = 65536,
                                 .rdma_vfs = vfs,
                                 .n_gpus = gpus,
                                 .gpu_mode = mode,
                                 .labels = lab};
    char err[128];
    int ni;

    sp.n_labels = labels_of(node_labels[allot_cluster_node_count(c)], buf, lab);
    ni = allot_cluster_add_node(c, &sp, err, sizeof(err));

    assert_true(ni >= 0);
    return ni;
}

static void add(struct allot_cluster *c, const char *name, const char *model, int gpus, int mode,
                int64_t cpu)
{
    add_vfs(c, name, model, gpus, mode, cpu, 0);
}

static void world_new(struct world *w, struct allot_rng *r)
{
    memset(w, 0, sizeof(*w));
    w->c = allot_cluster_new(cat, ALLOT_CLASS_POD_CLASSES);
    assert_non_null(w->c);
    add(w->c, "s0", "A100-80GB", 4, ALLOT_GPU_SHARED, 32000);
    w->vf_cap[1] = 2;
    assert_int_equal(add_vfs(w->c, "s1", "A100-80GB", 4, ALLOT_GPU_SHARED, 32000, 2), 1);
    add(w->c, "s2", "T4", 2, ALLOT_GPU_SHARED, 8000);
    w->vf_cap[3] = 3;
    assert_int_equal(add_vfs(w->c, "x0", "A100-80GB", 4, ALLOT_GPU_EXCLUSIVE, 32000, 3), 3);
    add(w->c, "m0", "A100-80GB", 2, ALLOT_GPU_MIG, 32000);
    add(w->c, "cpu", NULL, 0, ALLOT_GPU_SHARED, 16000);
    for (int i = 1; i < 8; i++)
        w->iso_of[i] = (int)allot_rng_below(r, 3);
}

/* Places a random task of a random tenant where the oracle allows, with
 * the cluster's own apply (which must agree with the oracle). */
static void world_fill_one(struct world *w, struct allot_rng *r)
{
    int tenant = 1 + (int)allot_rng_below(r, 7);
    int kind = (int)allot_rng_below(r, K_KINDS);
    struct allot_task t =
        task_of(kind, tenant, w->iso_of[tenant], 100 * (1 + (int)allot_rng_below(r, 9)));
    int nn = allot_cluster_node_count(w->c), start = (int)allot_rng_below(r, (uint64_t)nn);

    t.rdma_vfs = allot_rng_below(r, 3) == 0 ? 1 : 0;
    if (w->n_rec == MAX_REC)
        return;
    for (int d = 0; d < nn; d++) {
        int ni = (start + d) % nn;
        const struct allot_node *n = allot_cluster_node(w->c, ni);
        struct allot_placement p = {.node = ni,
                                    .mig_profile = -1,
                                    .mig_start = -1,
                                    .cpu_milli = t.cpu_milli,
                                    .mem_mib = t.mem_mib,
                                    .rdma_vfs = t.rdma_vfs,
                                    .pod_class = allot_task_pod_class(&t),
                                    .tenant = tenant,
                                    .isolation = t.isolation};
        int need = kind == K_MULTI ? 2 : 1;
        if (!oracle_fits(w, ni, &t))
            continue;
        /* whole GPUs and fractions by the oracle; MIG by the default chooser
         * below (it computes the instance's memory) */
        for (int g = 0; g < n->n_gpus && t.num_gpu && t.mig_profile < 0 &&
                        __builtin_popcount(p.gpu_mask) < need;
             g++) {
            if (is_frac(&t) && oracle_frac_gpu(w, ni, g, &t)) {
                p.gpu_mask = 1u << g;
                p.gpu_milli = t.gpu_milli;
                p.gpu_mem_mib = oracle_frac_mem(w, ni, &t);
            } else if (!is_frac(&t) && oracle_whole_gpu(w, ni, g)) {
                p.gpu_mask |= 1u << g;
                p.gpu_milli = ALLOT_MILLI;
                p.gpu_mem_mib = n->gpus[g].free_mem_mib;
            }
        }
        if (t.mig_profile >= 0) {
            struct allot_sched *s =
                allot_sched_new(w->c, allot_sched_policy_find("firstfit"), NULL);
            assert_non_null(s);
            assert_int_equal(allot_sched_choose_default(s, ni, &t, &p), 0);
            allot_sched_free(s);
        }
        if (allot_cluster_apply(w->c, &p) != 0)
            fail_msg("apply refused a placement the oracle allows (%s on %s)", kind_names[kind],
                     n->name);
        w->rec[w->n_rec++] = (struct rec){.node = ni,
                                          .gpus = p.gpu_mask,
                                          .tenant = tenant,
                                          .iso = t.isolation,
                                          .frac = is_frac(&t),
                                          .vfs = t.rdma_vfs};
        return;
    }
}

/* Probes every policy with task t; returns how many placed. */
static int probe(struct world *w, const struct allot_task *t, const char *what)
{
    int nn = allot_cluster_node_count(w->c), placed = 0;
    bool any = false;
    char err[256];

    for (int ni = 0; ni < nn; ni++)
        any |= oracle_fits(w, ni, t);
    for (int i = 0; allot_sched_policies[i]; i++) {
        struct allot_sched_opts o = {.seed = 7};
        struct allot_sched *s = allot_sched_new(w->c, allot_sched_policies[i], &o);
        struct allot_placement p;
        int rc;
        char label[160];
        assert_non_null(s);
        err[0] = '\0';
        rc = allot_sched_place(s, t, &p, err, sizeof(err));
        allot_fmt(label, sizeof(label), "%s, %s", allot_sched_policies[i]->name, what);
        if (any && rc != 0)
            fail_msg("%s: rc %d (%s) although the oracle finds a place", label, rc, err);
        if (!any && rc != ALLOT_ENOSPC)
            fail_msg("%s: rc %d although the oracle finds no place", label, rc);
        if (rc == 0) {
            /* the oracle judges the state before the placement: undo first */
            assert_int_equal(allot_sched_release(s, &p), 0);
            oracle_check(w, t, &p, label);
            placed++;
        }
        assert_int_equal(allot_sched_check_invariants(s, err, sizeof(err)), 0);
        allot_sched_free(s);
    }
    return placed;
}

static void test_matrix(void **state)
{
    struct allot_rng r;
    long placed = 0, probes = 0;

    (void)state;
    allot_rng_seed(&r, 2026);
    for (int scenario = 0; scenario < 150; scenario++) {
        struct world w;
        int fill = (int)allot_rng_below(&r, 24);
        world_new(&w, &r);
        for (int i = 0; i < fill; i++)
            world_fill_one(&w, &r);
        for (int kind = 0; kind < K_KINDS; kind++) {
            for (int iso = 0; iso < 3; iso++) {
                /* a newcomer, and a tenant that already holds work */
                int tenants[2] = {20 + iso, w.n_rec ? w.rec[0].tenant : 20 + iso};
                for (int k = 0; k < 2; k++) {
                    int tn = tenants[k], lvl = k ? w.iso_of[tn < 8 ? tn : 0] : iso;
                    struct allot_task t = task_of(kind, tn, lvl, 100 * (1 + scenario % 9));
                    char what[160];
                    /* every third probe asks 1..3 RDMA VFs (s1 has 2, x0 3) */
                    t.rdma_vfs = (scenario + kind + iso + k) % 3 == 0 ? 1 + scenario % 3 : 0;
                    /* and every other one a node selector */
                    w.sel = (scenario + kind + k) % 2 ? (scenario / 2 + iso) % N_SELECTORS : 0;
                    task_select(&t, w.sel);
                    allot_fmt(what, sizeof(what),
                              "scenario %d, %s, isolation %d, tenant %d, %d VFs, selector \"%s\"",
                              scenario, kind_names[kind], lvl, tn, t.rdma_vfs, selectors[w.sel]);
                    placed += probe(&w, &t, what);
                    probes++;
                    w.sel = 0;
                }
            }
        }
        allot_cluster_free(w.c);
    }
    /* the matrix must exercise both outcomes, not only refusals */
    assert_true(placed > probes);
    assert_true(placed < probes * 9);
}

/* The case that was reported: an exclusive-gpu tenant holds 700 milli of
 * GPU0; another tenant asks 300. GPU1 is free: every policy must use it. */
static void test_exclusive_gpu_fraction(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_task held = {.num_gpu = 1,
                              .gpu_milli = 700,
                              .mig_profile = -1,
                              .tenant = 1,
                              .isolation = ALLOT_ISO_EXCLUSIVE_GPU};
    struct allot_task ask = {.num_gpu = 1, .gpu_milli = 300, .mig_profile = -1, .tenant = 2};
    char err[256];

    (void)state;
    assert_non_null(c);
    add(c, "n0", "A100-80GB", 2, ALLOT_GPU_SHARED, 32000);
    for (int i = 0; allot_sched_policies[i]; i++) {
        struct allot_sched *s = allot_sched_new(c, allot_sched_policies[i], NULL);
        struct allot_placement p0, p1;
        assert_non_null(s);
        assert_int_equal(allot_sched_place(s, &held, &p0, err, sizeof(err)), 0);
        err[0] = '\0';
        if (allot_sched_place(s, &ask, &p1, err, sizeof(err)) != 0)
            fail_msg("%s: %s", allot_sched_policies[i]->name, err);
        assert_int_not_equal(p1.gpu_mask, p0.gpu_mask);
        assert_int_equal(allot_sched_release(s, &p1), 0);
        assert_int_equal(allot_sched_release(s, &p0), 0);
        allot_sched_free(s);
    }
    allot_cluster_free(c);
}

/* Two nodes alike but for their labels are two state classes: a task
 * selecting the second node's label goes there under every policy, even
 * where the first would represent a merged class, and a node's new labels
 * (allot_cluster_update_node) count at once. */
static void test_selector_classes(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, ALLOT_CLASS_POD_CLASSES);
    struct allot_label za = {"zone", "a"}, zb[] = {{"gpu", "fast"}, {"zone", "b"}};
    struct allot_node_spec sp = {.name = "a",
                                 .model = "A100-80GB",
                                 .cpu_milli = 32000,
                                 .mem_mib = 65536,
                                 .n_gpus = 4,
                                 .gpu_mode = ALLOT_GPU_SHARED,
                                 .n_labels = 1,
                                 .labels = &za};
    struct allot_task t = {.num_gpu = 1, .gpu_milli = 500, .mig_profile = -1, .cpu_milli = 1000};
    struct allot_task u = t;
    char err[256];

    (void)state;
    assert_non_null(c);
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
    sp.name = "b";
    sp.labels = zb;
    sp.n_labels = 2;
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 1);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    /* the label pair in the other order is the same label set */
    t.select[0] = allot_label_hash("zone", "b");
    t.select[1] = allot_label_hash("gpu", "fast");
    assert_false(allot_task_same(&t, &u));
    assert_int_not_equal(allot_task_hash(&t, 1), allot_task_hash(&u, 1));
    assert_int_not_equal(allot_label_hash("zone", "b"), allot_label_hash("zoneb", ""));
    assert_int_not_equal(allot_label_hash("a", ""), 0);
    for (int i = 0; allot_sched_policies[i]; i++) {
        struct allot_sched *s = allot_sched_new(c, allot_sched_policies[i], NULL);
        struct allot_placement p;
        assert_non_null(s);
        err[0] = '\0';
        if (allot_sched_place(s, &t, &p, err, sizeof(err)) != 0)
            fail_msg("%s: %s", allot_sched_policies[i]->name, err);
        assert_int_equal(p.node, 1);
        assert_int_equal(allot_sched_release(s, &p), 0);
        allot_sched_free(s);
    }
    /* b relabelled zone=c (drained first): nothing carries zone=b now */
    za.value = "c";
    sp.labels = &za;
    sp.n_labels = 1;
    assert_int_equal(allot_cluster_set_state(c, 1, ALLOT_NODE_DRAINING), 0);
    assert_int_equal(allot_cluster_update_node(c, 1, &sp, err, sizeof(err)), 0);
    assert_int_equal(allot_cluster_set_state(c, 1, ALLOT_NODE_READY), 0);
    for (int i = 0; allot_sched_policies[i]; i++) {
        struct allot_sched *s = allot_sched_new(c, allot_sched_policies[i], NULL);
        struct allot_placement p;
        assert_non_null(s);
        assert_int_equal(allot_sched_place(s, &t, &p, err, sizeof(err)), ALLOT_ENOSPC);
        allot_sched_free(s);
    }
    /* label sets are told apart exactly: c's labels are b's old ones in
     * another order (b's set id is not reused for them), d's are a's */
    struct allot_label zb2[] = {{"zone", "b"}, {"gpu", "fast"}};
    struct allot_label za2 = {"zone", "a"};
    sp.name = "c";
    sp.labels = zb2;
    sp.n_labels = 2;
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 2);
    sp.name = "d";
    sp.labels = &za2;
    sp.n_labels = 1;
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 3);
    assert_int_not_equal(allot_cluster_node(c, 2)->label_set, allot_cluster_node(c, 1)->label_set);
    assert_int_not_equal(allot_cluster_node(c, 2)->label_set, allot_cluster_node(c, 0)->label_set);
    assert_int_equal(allot_cluster_node(c, 3)->label_set, allot_cluster_node(c, 0)->label_set);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    for (int i = 0; allot_sched_policies[i]; i++) {
        struct allot_sched *s = allot_sched_new(c, allot_sched_policies[i], NULL);
        struct allot_placement p;
        assert_non_null(s);
        assert_int_equal(allot_sched_place(s, &t, &p, err, sizeof(err)), 0);
        assert_int_equal(p.node, 2);
        assert_int_equal(allot_sched_release(s, &p), 0);
        allot_sched_free(s);
    }
    allot_cluster_free(c);
}

/* The label rule every caller uses (cluster descriptions, agents, node
 * selectors). */
static void test_label_rule(void **state)
{
    char big[300];

    (void)state;
    assert_null(allot_label_key_problem("topology.allot.io/zone"));
    assert_null(allot_label_value_problem(""));
    assert_null(allot_label_value_problem("h\xc3\xa9 b=c"));
    assert_string_equal(allot_label_key_problem(""), "is empty");
    assert_non_null(allot_label_key_problem("a=b"));
    assert_non_null(allot_label_key_problem("a b"));
    assert_non_null(allot_label_key_problem("h\xc3\xa9"));
    memset(big, 'k', sizeof(big));
    big[ALLOT_LABEL_KEY_MAX] = '\0';
    assert_null(allot_label_key_problem(big));
    big[ALLOT_LABEL_KEY_MAX] = 'k';
    big[ALLOT_LABEL_KEY_MAX + 1] = '\0';
    assert_string_equal(allot_label_key_problem(big), "is too long");
    big[ALLOT_LABEL_KEY_MAX + 1] = 'k';
    big[ALLOT_LABEL_VALUE_MAX] = '\0';
    assert_null(allot_label_value_problem(big));
    big[ALLOT_LABEL_VALUE_MAX] = 'k';
    big[ALLOT_LABEL_VALUE_MAX + 1] = '\0';
    assert_string_equal(allot_label_value_problem(big), "is too long");
    assert_string_equal(allot_label_value_problem("a\tb"), "contains a control character");
    assert_string_equal(allot_label_value_problem("a\xc2\x85"), "contains a control character");
    assert_null(allot_label_value_problem("\xc2\xa0\xc3\xa9"));
    assert_string_equal(allot_label_value_problem("\xc3("), "is not valid UTF-8");
}

/* "KEY=VALUE,KEY,...": the form of an agent's --labels and of --constraint. */
static void test_labels_parse(void **state)
{
    struct allot_label l[2];
    char ok[] = "zone=b=c,nvlink", twice[] = "a=1,a=2", empty[] = "", blank[] = "a=1,,b",
         many[] = "a,b,c", space[] = "a b=c";
    char err[128];

    (void)state;
    assert_int_equal(allot_labels_parse(ok, l, 2, err, sizeof(err)), 2);
    assert_string_equal(l[0].key, "zone");
    assert_string_equal(l[0].value, "b=c");
    assert_string_equal(l[1].key, "nvlink");
    assert_string_equal(l[1].value, "");
    assert_int_equal(allot_labels_parse(twice, l, 2, err, sizeof(err)), -1);
    assert_string_equal(err, "label \"a\" given twice");
    assert_int_equal(allot_labels_parse(empty, l, 2, err, sizeof(err)), -1);
    assert_string_equal(err, "label key \"\" is empty");
    assert_int_equal(allot_labels_parse(blank, l, 2, err, sizeof(err)), -1);
    assert_int_equal(allot_labels_parse(many, l, 2, err, sizeof(err)), -1);
    assert_string_equal(err, "more than 2 labels");
    assert_int_equal(allot_labels_parse(space, l, 2, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "contains a space"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusive_gpu_fraction), cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_selector_classes),       cmocka_unit_test(test_label_rule),
        cmocka_unit_test(test_labels_parse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
