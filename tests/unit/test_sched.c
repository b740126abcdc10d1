/*
 * Unit tests of the scheduler (src/core/sched.c): the cached, bucketed
 * search picks exactly the node a brute-force scan over every node would
 * (for every deterministic policy, and for allot learning as tasks arrive,
 * on a synthetic mixed workload), the invariants hold after every
 * placement and release, runs are
 * deterministic, bad tasks change nothing, and an allocation failure at any
 * point of a placement leaves the cluster as it was.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/sched.h"
#include "workload.h"

#include <stdlib.h>
#include <string.h>

#include "catalog_fixture.h"

/* The node a scan over every node picks: best score, then lowest rank. */
static int brute_force(struct allot_sched *s, const struct allot_sched_policy_ops *ops,
                       const struct allot_task *t)
{
    struct allot_cluster *c = allot_sched_cluster(s);
    int best = -1, best_sc = -1;

    for (int i = 0; i < allot_cluster_node_count(c); i++) {
        const struct allot_node *n = allot_cluster_node(c, i);
        int sc;
        if (!allot_node_fits(c, n, t))
            continue;
        sc = ops->score(allot_sched_policy_state(s), s, n, t);
        if (sc < 0)
            continue;
        if (sc > best_sc || (sc == best_sc && n->rank < allot_cluster_node(c, best)->rank)) {
            best_sc = sc;
            best = i;
        }
    }
    return best;
}

static void test_matches_brute_force(void **state)
{
    enum { N_TASKS = 1500 };
    struct allot_task *tasks = calloc(N_TASKS, sizeof(*tasks));
    struct allot_frag_mix mix;
    const char *policies[] = {"firstfit",      "bestfit",    "spread", "dotprod",
                              "gpuclustering", "gpupacking", "fgd",    "allot"};

    assert_non_null(tasks);
    sim_synth_tasks(cat, tasks, N_TASKS, 5);
    assert_int_equal(allot_frag_mix_build(tasks, N_TASKS, 0.95, &mix), 0);
    for (size_t p = 0; p < sizeof(policies) / sizeof(policies[0]); p++) {
        const struct allot_sched_policy_ops *ops = allot_sched_policy_find(policies[p]);
        struct allot_cluster *c = sim_synth_cluster(cat, 60, false, 3);
        struct allot_sched_opts o = {.seed = 3, .mix = &mix};
        struct allot_sched *s = allot_sched_new(c, ops, &o);
        struct allot_placement *placed = calloc(N_TASKS, sizeof(*placed));
        char err[256];

        assert_non_null(s);
        for (int i = 0; i < N_TASKS; i++) {
            struct allot_placement pl;
            int want;
            /* as the daemon does: learning policies (allot) move their
             * scores as tasks arrive, and the cache must follow */
            allot_sched_observe(s, &tasks[i]);
            want = brute_force(s, ops, &tasks[i]);
            int rc = allot_sched_place(s, &tasks[i], &pl, err, sizeof(err));
            if (want < 0) {
                assert_int_equal(rc, ALLOT_ENOSPC);
                continue;
            }
            assert_int_equal(rc, 0);
            if (pl.node != want)
                fail_msg("%s task %d: picked node %d, a full scan picks %d", policies[p], i,
                         pl.node, want);
            placed[i] = pl;
            placed[i].node = pl.node + 1; /* mark as placed (node + 1) */
            if (allot_sched_check_invariants(s, err, sizeof(err)) != 0)
                fail_msg("%s task %d: %s", policies[p], i, err);
            /* release every third task again to exercise departures */
            if (i % 3 == 2 && placed[i - 1].node) {
                struct allot_placement r = placed[i - 1];
                r.node--;
                assert_int_equal(allot_sched_release(s, &r), 0);
                placed[i - 1].node = 0;
                if (allot_sched_check_invariants(s, err, sizeof(err)) != 0)
                    fail_msg("%s after release %d: %s", policies[p], i - 1, err);
            }
        }
        free(placed);
        allot_sched_free(s);
        allot_cluster_free(c);
    }
    allot_frag_mix_clear(&mix);
    free(tasks);
}

/* Places the synthetic workload and returns a hash of every decision. */
static uint64_t run_hash(const char *policy, uint64_t seed)
{
    enum { N_TASKS = 800 };
    struct allot_task tasks[N_TASKS];
    struct allot_cluster *c = sim_synth_cluster(cat, 40, false, seed);
    struct allot_sched_opts o = {.seed = seed};
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find(policy), &o);
    uint64_t h = 0;

    assert_non_null(s);
    sim_synth_tasks(cat, tasks, N_TASKS, seed);
    for (int i = 0; i < N_TASKS; i++) {
        struct allot_placement p;
        int rc = allot_sched_place(s, &tasks[i], &p, NULL, 0);
        h = allot_hash_mix(h, rc == 0 ? ((uint64_t)p.node << 32 | p.gpu_mask) : 0xdead);
    }
    allot_sched_free(s);
    allot_cluster_free(c);
    return h;
}

static void test_deterministic(void **state)
{
    for (int p = 0; allot_sched_policies[p]; p++) {
        uint64_t a = run_hash(allot_sched_policies[p]->name, 11);
        uint64_t b = run_hash(allot_sched_policies[p]->name, 11);
        if (a != b)
            fail_msg("%s: two runs differ", allot_sched_policies[p]->name);
    }
    /* the seed matters for random */
    assert_true(run_hash("random", 11) != run_hash("random", 12));
}

static void test_bad_task_changes_nothing(void **state)
{
    struct allot_cluster *c = sim_synth_cluster(cat, 10, false, 1);
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find("bestfit"), NULL);
    struct allot_placement p;
    char err[256];
    int64_t used = allot_cluster_used_milli(c);
    struct allot_task bad[] = {
        {.num_gpu = 1, .gpu_milli = 1200, .mig_profile = -1},
        {.num_gpu = 0, .gpu_milli = 0, .mig_profile = allot_catalog_find_profile(cat, "1g.10gb")},
        {.num_gpu = 2, .gpu_milli = 500, .mig_profile = -1},
        {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .model_mask = 1ULL << 63},
        {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = -5},
    };
    const char *field[] = {"gpu_milli", "num_gpu", "gpu_milli", "model", "cpu_milli"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(allot_sched_place(s, &bad[i], &p, err, sizeof(err)), ALLOT_EINVAL);
        if (!strstr(err, field[i]))
            fail_msg("task %zu: message \"%s\" does not name %s", i, err, field[i]);
    }
    assert_int_equal(allot_cluster_used_milli(c), used);
    assert_int_equal(allot_sched_check_invariants(s, err, sizeof(err)), 0);
    allot_sched_free(s);
    allot_cluster_free(c);
}

static void test_nospace(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_node_spec sp = {
        .name = "a", .model = "T4", .cpu_milli = 8000, .mem_mib = 8192, .n_gpus = 2};
    struct allot_sched *s;
    struct allot_placement p;
    struct allot_task t = {.num_gpu = 2, .gpu_milli = 1000, .mig_profile = -1};
    char err[128];

    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
    s = allot_sched_new(c, allot_sched_policy_find("fgd"), NULL);
    assert_int_equal(allot_sched_place(s, &t, &p, NULL, 0), 0);
    assert_int_equal(allot_sched_place(s, &t, &p, NULL, 0), ALLOT_ENOSPC);
    t.num_gpu = 0;
    t.gpu_milli = 0;
    t.mem_mib = 9000; /* memory filters */
    assert_int_equal(allot_sched_place(s, &t, &p, NULL, 0), ALLOT_ENOSPC);
    t.mem_mib = 0;
    t.model_mask = 1ULL << allot_catalog_find_model(cat, "A100"); /* model filters */
    t.num_gpu = 0;
    assert_int_equal(allot_sched_place(s, &t, &p, NULL, 0), 0); /* CPU-only ignores models */
    allot_sched_free(s);
    allot_cluster_free(c);
}

static void test_mig_tasks(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_node_spec sp = {.name = "m",
                                 .model = "A100-80GB",
                                 .cpu_milli = 64000,
                                 .mem_mib = 65536,
                                 .n_gpus = 2,
                                 .gpu_mode = ALLOT_GPU_MIG};
    struct allot_sched *s;
    struct allot_placement p;
    struct allot_task t = {.num_gpu = 1, .mig_profile = allot_catalog_find_profile(cat, "3g.40gb")};
    char err[128];
    int n = 0;

    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
    s = allot_sched_new(c, allot_sched_policy_find("allot"), NULL);
    /* two 3g.40gb per GPU fit (starts 0 and 4): four in all */
    while (allot_sched_place(s, &t, &p, NULL, 0) == 0) {
        assert_int_equal(allot_sched_check_invariants(s, err, sizeof(err)), 0);
        n++;
    }
    assert_int_equal(n, 4);
    /* the first two go on one GPU (packing) */
    assert_int_equal(allot_cluster_node(c, 0)->gpus[0].mig.n_instances, 2);
    /* a whole GPU does not fit on MIG GPUs */
    t.mig_profile = -1;
    t.gpu_milli = 1000;
    assert_int_equal(allot_sched_place(s, &t, &p, NULL, 0), ALLOT_ENOSPC);
    allot_sched_free(s);
    allot_cluster_free(c);
}

/* Snapshot of what placements change, to compare before/after a failure. */
static uint64_t cluster_digest(const struct allot_cluster *c)
{
    uint64_t h = 0;

    for (int i = 0; i < allot_cluster_node_count(c); i++) {
        const struct allot_node *n = allot_cluster_node(c, i);
        h = allot_hash_mix(h, (uint64_t)n->cpu_free);
        h = allot_hash_mix(h, (uint64_t)n->mem_free);
        for (int g = 0; g < n->n_gpus; g++)
            h = allot_hash_mix(h, (uint64_t)n->gpus[g].free_milli << 8 | n->gpus[g].mig.used_mask);
    }
    return h;
}

static void test_alloc_failure(void **state)
{
    enum { N_TASKS = 120 };
    struct allot_task tasks[N_TASKS];

    sim_synth_tasks(cat, tasks, N_TASKS, 9);
    for (int p = 0; allot_sched_policies[p]; p++) {
        struct allot_cluster *c = sim_synth_cluster(cat, 12, false, 4);
        struct allot_sched *s = allot_sched_new(c, allot_sched_policies[p], NULL);
        char err[256];

        assert_non_null(s);
        for (int i = 0; i < N_TASKS; i++) {
            struct allot_placement pl;
            int rc;
            /* fail the first, second, ... allocation of this placement until it goes through */
            for (unsigned long n = 1;; n++) {
                uint64_t before = cluster_digest(c);
                allot_alloc_fail_at(n, false);
                rc = allot_sched_place(s, &tasks[i], &pl, NULL, 0);
                allot_alloc_fail_at(0, false);
                if (rc != ALLOT_ENOMEM)
                    break;
                assert_int_equal(cluster_digest(c), before);
                if (allot_sched_check_invariants(s, err, sizeof(err)) != 0)
                    fail_msg("%s: after a failed allocation: %s", allot_sched_policies[p]->name,
                             err);
            }
            assert_true(rc == 0 || rc == ALLOT_ENOSPC);
        }
        assert_int_equal(allot_sched_check_invariants(s, err, sizeof(err)), 0);
        allot_sched_free(s);
        allot_cluster_free(c);
    }
}

static void test_policy_registry(void **state)
{
    const char *names[] = {"firstfit",      "bestfit",    "spread", "random", "dotprod",
                           "gpuclustering", "gpupacking", "fgd",    "allot"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct allot_sched_policy_ops *ops = allot_sched_policy_find(names[i]);
        assert_non_null(ops);
        assert_string_equal(ops->name, names[i]);
        assert_non_null(ops->summary);
    }
    assert_null(allot_sched_policy_find("nope"));
}

/* A fraction that asks for compute only takes the same share of its GPU's
 * memory: every policy gives it that memory in its placement (the agent's
 * cap), and a fraction that asked for more memory than is left beside it
 * goes to another GPU or nowhere, never onto memory the first may use. */
static void test_compute_only_fraction_memory(void **state)
{
    const char *names[] = {"firstfit",      "bestfit",    "spread", "random", "dotprod",
                           "gpuclustering", "gpupacking", "fgd",    "allot"};
    int64_t cap = cat->models[allot_catalog_find_model(cat, "T4")].memory_mib;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct allot_cluster *c = allot_cluster_new(cat, 0);
        struct allot_node_spec sp = {
            .name = "a", .model = "T4", .cpu_milli = 8000, .mem_mib = 8192, .n_gpus = 2};
        struct allot_task quarter = {.num_gpu = 1, .gpu_milli = 250, .mig_profile = -1};
        struct allot_task big = {
            .num_gpu = 1, .gpu_milli = 100, .gpu_mem_mib = cap * 8 / 10, .mig_profile = -1};
        struct allot_placement p1, p2, p3;
        struct allot_sched *s;
        char err[128];

        assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
        s = allot_sched_new(c, allot_sched_policy_find(names[i]), NULL);
        assert_non_null(s);
        assert_int_equal(allot_sched_place(s, &quarter, &p1, NULL, 0), 0);
        assert_int_equal(p1.gpu_mem_mib, cap / 4);
        assert_int_equal(allot_cluster_node(c, 0)->gpus[__builtin_ctz(p1.gpu_mask)].free_mem_mib,
                         cap - cap / 4);
        /* 80 % of the memory does not fit beside the quarter's 25 % */
        assert_int_equal(allot_sched_place(s, &big, &p2, NULL, 0), 0);
        if (p2.gpu_mask == p1.gpu_mask)
            fail_msg("%s put 80 %% of the memory beside a compute-only quarter", names[i]);
        /* the other GPU now has 900 milli but 20 % of its memory left: a
         * compute-only third (33 % of the memory) goes beside the quarter */
        quarter.gpu_milli = 333;
        assert_int_equal(allot_sched_place(s, &quarter, &p3, NULL, 0), 0);
        assert_int_equal(p3.gpu_mask, p1.gpu_mask);
        assert_int_equal(p3.gpu_mem_mib, cap * 333 / 1000);
        /* a compute-only fifth (20 %) still fits beside the 80 % */
        quarter.gpu_milli = 200;
        assert_true(allot_gpu_takes_fraction(
            &allot_cluster_node(c, 0)->gpus[__builtin_ctz(p2.gpu_mask)], &quarter));
        quarter.gpu_milli = 201;
        assert_false(allot_gpu_takes_fraction(
            &allot_cluster_node(c, 0)->gpus[__builtin_ctz(p2.gpu_mask)], &quarter));
        assert_int_equal(allot_sched_check_invariants(s, err, sizeof(err)), 0);
        allot_sched_free(s);
        allot_cluster_free(c);
    }
}

/* A cluster without nodes (a daemon before its first agent registers):
 * every policy answers ENOSPC, without touching a score array that does
 * not exist yet (UBSan checked memset on NULL here). */
static void test_empty_cluster(void **state)
{
    struct allot_task t = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000};

    (void)state;
    for (int i = 0; allot_sched_policies[i]; i++) {
        struct allot_cluster *c = allot_cluster_new(cat, 0);
        struct allot_sched *s = allot_sched_new(c, allot_sched_policies[i], NULL);
        struct allot_placement p;
        assert_non_null(s);
        allot_sched_observe(s, &t);
        assert_int_equal(allot_sched_place(s, &t, &p, NULL, 0), ALLOT_ENOSPC);
        assert_int_equal(allot_sched_pick(s, &t, &p), ALLOT_ENOSPC);
        allot_sched_free(s);
        allot_cluster_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_registry),
        cmocka_unit_test(test_matches_brute_force),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_bad_task_changes_nothing),
        cmocka_unit_test(test_nospace),
        cmocka_unit_test(test_mig_tasks),
        cmocka_unit_test(test_alloc_failure),
        cmocka_unit_test(test_empty_cluster),
        cmocka_unit_test(test_compute_only_fraction_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
