/*
 * Unit tests of the cluster model (src/core/cluster.c, task.c) and the
 * common layer: node validation with messages naming the field, identical
 * nodes grouped into one state class with the lowest rank representing it,
 * apply/release round trips, bad placements refused without change, node
 * states and capacity buckets, a node's size changed only while it is out
 * of service and empty.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/cluster.h"
#include "allot/common.h"

#include <string.h>

/* enum allot_isolation lives in tenant.h; the cluster layer sees ints */
#define ALLOT_ISO_EXCLUSIVE_GPU_TEST  1
#define ALLOT_ISO_EXCLUSIVE_NODE_TEST 2

#include "catalog_fixture.h"

static void test_add_node_validation(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    char err[256];
    struct allot_node_spec ok = {
        .name = "a", .model = "V100M32", .cpu_milli = 1000, .mem_mib = 1024, .n_gpus = 8};
    struct {
        struct allot_node_spec spec;
        int rc;
        const char *needle;
    } bad[] = {
        {{.name = "a", .model = "T4", .n_gpus = 1}, ALLOT_EEXIST, "duplicate"},
        {{.name = "", .model = "T4", .n_gpus = 1}, ALLOT_EINVAL, "name"},
        {{.name = "b", .model = "X9000", .n_gpus = 1}, ALLOT_EINVAL, "model"},
        {{.name = "b", .model = "T4", .n_gpus = 99}, ALLOT_ERANGE, "gpus"},
        {{.name = "b", .model = "T4", .n_gpus = 1, .cpu_milli = -1}, ALLOT_ERANGE, "cpu_milli"},
        {{.name = "b", .model = "T4", .n_gpus = 1, .gpu_mode = ALLOT_GPU_MIG}, ALLOT_EINVAL, "MIG"},
    };

    assert_int_equal(allot_cluster_add_node(c, &ok, err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(allot_cluster_add_node(c, &bad[i].spec, err, sizeof(err)), bad[i].rc);
        if (!strstr(err, bad[i].needle))
            fail_msg("case %zu: \"%s\" does not mention %s", i, err, bad[i].needle);
    }
    assert_int_equal(allot_cluster_node_count(c), 1);
    assert_int_equal(allot_cluster_find_node(c, "a"), 0);
    assert_int_equal(allot_cluster_find_node(c, "b"), -1);
    assert_int_equal(allot_cluster_gpu_count(c), 8);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    allot_cluster_free(c);
}

static void test_state_classes(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    char err[256], name[16];
    const int32_t *ids;
    struct allot_placement p = {.node = 2,
                                .gpu_mask = 1,
                                .gpu_milli = 500,
                                .mig_profile = -1,
                                .cpu_milli = 1000,
                                .pod_class = 0};

    for (int i = 0; i < 5; i++) {
        struct allot_node_spec sp = {
            .name = name, .model = "T4", .cpu_milli = 8000, .mem_mib = 8192, .n_gpus = 2};
        allot_fmt(name, sizeof(name), "n%d", i);
        assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), i);
    }
    /* five identical nodes: one class, represented by the lowest rank */
    assert_int_equal(allot_cluster_classes(c, &ids), 1);
    allot_cluster_shuffle_ranks(c, 77);
    {
        const struct allot_class *k = allot_cluster_class(c, ids[0]);
        uint32_t low = UINT32_MAX;
        for (int i = 0; i < 5; i++)
            if (allot_cluster_node(c, i)->rank < low)
                low = allot_cluster_node(c, i)->rank;
        assert_int_equal(allot_cluster_node(c, allot_class_rep(k))->rank, low);
        assert_int_equal(k->n_members, 5);
    }
    /* a placement splits one node off; its release merges it back */
    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_int_equal(allot_cluster_classes(c, &ids), 2);
    assert_int_equal(allot_cluster_node(c, 2)->gpus[0].free_milli, 500);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    /* the same placement on GPU 1 of node 3 lands in the same class (GPU order ignored) */
    p.node = 3;
    p.gpu_mask = 2;
    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_int_equal(allot_cluster_classes(c, &ids), 2);
    assert_int_equal(allot_cluster_release(c, &p), 0);
    p.node = 2;
    p.gpu_mask = 1;
    assert_int_equal(allot_cluster_release(c, &p), 0);
    assert_int_equal(allot_cluster_classes(c, &ids), 1);
    /* releasing twice is refused and changes nothing */
    assert_int_equal(allot_cluster_release(c, &p), ALLOT_EINVAL);
    assert_int_equal(allot_cluster_used_milli(c), 0);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    /* draining takes a node out of the index; ready puts it back */
    assert_int_equal(allot_cluster_set_state(c, 1, ALLOT_NODE_DRAINING), 0);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    assert_int_equal(
        allot_cluster_apply(
            c, &(struct allot_placement){.node = 1, .mig_profile = -1, .pod_class = -1}),
        ALLOT_ESTATE);
    assert_int_equal(allot_cluster_set_state(c, 1, ALLOT_NODE_READY), 0);
    assert_int_equal(allot_cluster_classes(c, &ids), 1);
    assert_int_equal(allot_cluster_class(c, ids[0])->n_members, 5);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    /* the GPUs in use are counted as placements come and go, on a node
     * drained while it holds one too */
    p.node = 4;
    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_int_equal(allot_cluster_used_milli(c), 500);
    assert_int_equal(allot_cluster_set_state(c, 4, ALLOT_NODE_DRAINING), 0);
    assert_int_equal(allot_cluster_used_milli(c), 500);
    assert_int_equal(allot_cluster_release(c, &p), 0);
    assert_int_equal(allot_cluster_used_milli(c), 0);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    allot_cluster_free(c);
}

static void test_apply_refuses_overcommit(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_node_spec sp = {.name = "x",
                                 .model = "A10",
                                 .cpu_milli = 4000,
                                 .mem_mib = 4096,
                                 .n_gpus = 2,
                                 .gpu_mode = ALLOT_GPU_EXCLUSIVE};
    char err[256];
    struct allot_placement frac = {
        .node = 0, .gpu_mask = 1, .gpu_milli = 300, .mig_profile = -1, .pod_class = 0};
    struct allot_placement w = {.node = 0,
                                .gpu_mask = 3,
                                .gpu_milli = 1000,
                                .mig_profile = -1,
                                .cpu_milli = 5000,
                                .pod_class = 2};

    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
    /* exclusive GPUs take no fractions */
    assert_int_equal(allot_cluster_apply(c, &frac), ALLOT_EINVAL);
    /* more CPU than the node has */
    assert_int_equal(allot_cluster_apply(c, &w), ALLOT_ENOSPC);
    w.cpu_milli = 4000;
    assert_int_equal(allot_cluster_apply(c, &w), 0);
    /* the GPUs are taken now */
    w.cpu_milli = 0;
    assert_int_equal(allot_cluster_apply(c, &w), ALLOT_ENOSPC);
    /* GPU outside the node */
    w.gpu_mask = 4;
    assert_int_equal(allot_cluster_apply(c, &w), ALLOT_EINVAL);
    assert_int_equal(allot_cluster_used_milli(c), 2000);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    allot_cluster_free(c);
}

static void test_buckets(void **state)
{
    struct allot_task whole2 = {.num_gpu = 2, .gpu_milli = 1000, .mig_profile = -1};
    struct allot_task frac = {.num_gpu = 1, .gpu_milli = 520, .mig_profile = -1};
    struct allot_task cpu = {.mig_profile = -1};
    struct allot_task mig = {.num_gpu = 1, .mig_profile = 0};
    /* bucket = (mig * 17 + whole) * 11 + part / 100 */
    int b_one_free = (0 * 17 + 1) * 11 + 0, b_part_400 = 4, b_part_500 = 5, b_mig = 17 * 11;

    assert_false(allot_bucket_admits(b_one_free, &whole2));
    assert_true(allot_bucket_admits(b_one_free, &frac));
    assert_false(allot_bucket_admits(b_part_400, &frac)); /* largest part < 500 < 520 */
    assert_true(allot_bucket_admits(b_part_500, &frac));
    assert_true(allot_bucket_admits(b_part_400, &cpu));
    assert_true(allot_bucket_admits(b_mig, &mig));
    assert_false(allot_bucket_admits(b_one_free, &mig));
}

static void test_task_validation(void **state)
{
    char err[256];
    struct allot_task t = {.num_gpu = 1, .gpu_milli = 0, .gpu_mem_mib = 4096, .mig_profile = -1};

    assert_int_equal(allot_task_validate(cat, &t, err, sizeof(err)), 0); /* memory-only share */
    t.gpu_mem_mib = 0;
    assert_int_equal(allot_task_validate(cat, &t, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "neither"));
    t = (struct allot_task){.num_gpu = 1,
                            .mig_profile = allot_catalog_find_profile(cat, "7g.80gb"),
                            .model_mask = 1ULL << allot_catalog_find_model(cat, "T4")};
    assert_int_equal(allot_task_validate(cat, &t, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "no allowed GPU model"));
    t.model_mask = 0;
    assert_int_equal(allot_task_validate(cat, &t, err, sizeof(err)), 0);
    assert_int_equal(allot_task_pod_class(&t), 0);
    t = (struct allot_task){.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1};
    assert_int_equal(allot_task_pod_class(&t), 4);
}

/* Isolation levels: exclusive-gpu fractions share a GPU only inside the
 * tenant; exclusive-node tenants share a node with nobody. */
static void test_isolation(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_node_spec sp = {
        .name = "n", .model = "A10", .cpu_milli = 16000, .mem_mib = 65536, .n_gpus = 1};
    char err[256];
    struct allot_task excl = {.num_gpu = 1,
                              .gpu_milli = 300,
                              .mig_profile = -1,
                              .tenant = 5,
                              .isolation = ALLOT_ISO_EXCLUSIVE_GPU_TEST};
    struct allot_task same = excl,
                      other = {.num_gpu = 1, .gpu_milli = 300, .mig_profile = -1, .tenant = 6};
    struct allot_placement p = {.node = 0,
                                .gpu_mask = 1,
                                .gpu_milli = 300,
                                .mig_profile = -1,
                                .pod_class = 0,
                                .tenant = 5,
                                .isolation = ALLOT_ISO_EXCLUSIVE_GPU_TEST};
    const struct allot_node *n;

    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
    sp.name = "m";
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 1);
    n = allot_cluster_node(c, 0);
    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_true(allot_gpu_takes_fraction(&n->gpus[0], &same));
    assert_false(allot_gpu_takes_fraction(&n->gpus[0], &other));
    /* the core refuses a placement that would break it, too */
    p.tenant = 6;
    p.isolation = 0;
    assert_int_equal(allot_cluster_apply(c, &p), ALLOT_EINVAL);
    /* once the tenant's fractions leave, anyone may use the GPU */
    p.tenant = 5;
    p.isolation = ALLOT_ISO_EXCLUSIVE_GPU_TEST;
    assert_int_equal(allot_cluster_release(c, &p), 0);
    assert_true(allot_gpu_takes_fraction(&n->gpus[0], &other));
    /* a shared fraction there keeps an exclusive-gpu tenant away */
    p.tenant = 6;
    p.isolation = 0;
    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_false(allot_gpu_takes_fraction(&n->gpus[0], &excl));
    /* exclusive-node: node 1 taken by tenant 7 admits only tenant 7 */
    {
        struct allot_placement q = {.node = 1,
                                    .mig_profile = -1,
                                    .pod_class = -1,
                                    .cpu_milli = 1000,
                                    .tenant = 7,
                                    .isolation = ALLOT_ISO_EXCLUSIVE_NODE_TEST};
        struct allot_task cpu7 = {.mig_profile = -1,
                                  .cpu_milli = 1000,
                                  .tenant = 7,
                                  .isolation = ALLOT_ISO_EXCLUSIVE_NODE_TEST};
        struct allot_task cpu8 = {.mig_profile = -1, .cpu_milli = 1000, .tenant = 8};
        assert_int_equal(allot_cluster_apply(c, &q), 0);
        assert_true(allot_node_fits(c, allot_cluster_node(c, 1), &cpu7));
        assert_false(allot_node_fits(c, allot_cluster_node(c, 1), &cpu8));
        /* and an exclusive-node tenant does not join node 0, used by others */
        assert_false(allot_node_fits(c, allot_cluster_node(c, 0), &cpu7));
        assert_int_equal(allot_cluster_release(c, &q), 0);
        assert_true(allot_node_fits(c, allot_cluster_node(c, 1), &cpu8));
    }
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    allot_cluster_free(c);
}

/* RDMA virtual functions: a countable node resource placed like CPU. */
static void test_rdma_vfs(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    char err[256];
    struct allot_node_spec sp = {
        .name = "r0", .model = "H100", .cpu_milli = 8000, .mem_mib = 8192, .n_gpus = 2};
    struct allot_task t = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .rdma_vfs = 3};
    struct allot_placement p = {.node = 1,
                                .gpu_mask = 1,
                                .gpu_milli = 1000,
                                .mig_profile = -1,
                                .pod_class = 1,
                                .rdma_vfs = 3};

    (void)state;
    sp.rdma_vfs = -1;
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), ALLOT_ERANGE);
    assert_non_null(strstr(err, "rdma_vfs"));
    sp.rdma_vfs = ALLOT_MAX_RDMA_VFS + 1;
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), ALLOT_ERANGE);
    /* r0 has none, r1 and r2 four each */
    sp.rdma_vfs = 0;
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
    sp.rdma_vfs = 4;
    sp.name = "r1";
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 1);
    sp.name = "r2";
    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 2);
    /* r1 and r2 are alike; r0 differs by its VFs */
    assert_int_equal(allot_cluster_node_class(c, 1), allot_cluster_node_class(c, 2));
    assert_int_not_equal(allot_cluster_node_class(c, 0), allot_cluster_node_class(c, 1));
    assert_false(allot_node_fits(c, allot_cluster_node(c, 0), &t));
    assert_true(allot_node_fits(c, allot_cluster_node(c, 1), &t));

    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_int_equal(allot_cluster_node(c, 1)->rdma_free, 1);
    /* one VF left: three more do not fit although GPU, CPU and memory do */
    assert_false(allot_node_fits(c, allot_cluster_node(c, 1), &t));
    p.gpu_mask = 2;
    assert_int_equal(allot_cluster_apply(c, &p), ALLOT_ENOSPC);
    assert_int_equal(allot_cluster_node(c, 1)->rdma_free, 1);
    /* r1 now differs from r2 */
    assert_int_not_equal(allot_cluster_node_class(c, 1), allot_cluster_node_class(c, 2));
    /* releasing more VFs than were taken is refused without change */
    p.gpu_mask = 1;
    p.rdma_vfs = 4;
    assert_int_equal(allot_cluster_release(c, &p), ALLOT_EINVAL);
    p.rdma_vfs = 3;
    assert_int_equal(allot_cluster_release(c, &p), 0);
    assert_int_equal(allot_cluster_node(c, 1)->rdma_free, 4);
    assert_int_equal(allot_cluster_node_class(c, 1), allot_cluster_node_class(c, 2));
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);

    /* a task's ask is validated; shapes that differ only in VFs differ */
    t.rdma_vfs = -1;
    assert_int_equal(allot_task_validate(cat, &t, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "rdma_vfs"));
    t.rdma_vfs = 2;
    {
        struct allot_task u = t;
        u.rdma_vfs = 0;
        assert_false(allot_task_same(&t, &u));
        assert_int_not_equal(allot_task_hash(&t, 1), allot_task_hash(&u, 1));
        u.rdma_vfs = 2;
        assert_true(allot_task_same(&t, &u));
    }
    allot_cluster_free(c);
}

/* A node changes size only while it is not ready and holds no task; the
 * new size is whole (GPUs, mode, model, labels), a bad one or a failed
 * allocation leaves the old one, and the node takes work again once
 * ready. */
static void test_update_node(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    char err[256];
    struct allot_label lab[] = {{"zone", "b"}, {"rack", "r9"}};
    struct allot_node_spec four = {.name = "a",
                                   .model = "A100-80GB",
                                   .cpu_milli = 32000,
                                   .mem_mib = 65536,
                                   .n_gpus = 4,
                                   .gpu_mode = ALLOT_GPU_EXCLUSIVE};
    struct allot_node_spec eight = {.model = "H100",
                                    .cpu_milli = 64000,
                                    .mem_mib = 131072,
                                    .n_gpus = 8,
                                    .gpu_mode = ALLOT_GPU_SHARED,
                                    .island_size = 4,
                                    .rack = 3,
                                    .n_labels = 2,
                                    .labels = lab};
    struct allot_node_spec bad = eight;
    struct allot_placement p = {.node = 0,
                                .gpu_mask = 1,
                                .gpu_milli = ALLOT_MILLI,
                                .mig_profile = -1,
                                .cpu_milli = 1000,
                                .pod_class = 1};
    const struct allot_node *n;
    uint64_t resized;
    unsigned long k;

    (void)state;
    assert_int_equal(allot_cluster_add_node(c, &four, err, sizeof(err)), 0);
    resized = allot_cluster_resized(c);
    /* ready: refused, whether or not it runs anything */
    assert_int_equal(allot_cluster_update_node(c, 0, &eight, err, sizeof(err)), ALLOT_ESTATE);
    assert_non_null(strstr(err, "ready"));
    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_int_equal(allot_cluster_set_state(c, 0, ALLOT_NODE_DRAINING), 0);
    assert_int_equal(allot_cluster_update_node(c, 0, &eight, err, sizeof(err)), ALLOT_ESTATE);
    assert_non_null(strstr(err, "tasks are placed on it"));
    assert_int_equal(allot_cluster_release(c, &p), 0);
    /* another name, an unknown model: refused, nothing changes */
    bad.name = "b";
    assert_int_equal(allot_cluster_update_node(c, 0, &bad, err, sizeof(err)), ALLOT_EINVAL);
    bad.name = NULL;
    bad.model = "X9000";
    assert_int_equal(allot_cluster_update_node(c, 0, &bad, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "X9000"));
    /* every allocation failing in turn: the old size stays */
    for (k = 1; k < 100; k++) {
        int rc;
        allot_alloc_fail_at(k, false);
        rc = allot_cluster_update_node(c, 0, &eight, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        if (rc == 0)
            break;
        assert_int_equal(rc, ALLOT_ENOMEM);
        n = allot_cluster_node(c, 0);
        assert_int_equal(n->n_gpus, 4);
        assert_int_equal(n->n_labels, 0);
        assert_int_equal(allot_cluster_resized(c), resized);
    }
    assert_true(k > 1 && k < 100); /* the labels allocate, and it succeeded */
    n = allot_cluster_node(c, 0);
    assert_string_equal(n->name, "a");
    assert_int_equal(n->model, allot_catalog_find_model(cat, "H100"));
    assert_int_equal(n->n_gpus, 8);
    assert_int_equal(n->cpu_free, 64000);
    assert_int_equal(n->mem_free, 131072);
    assert_int_equal(n->rack, 3);
    assert_int_equal(n->gpus[7].mode, ALLOT_GPU_SHARED);
    assert_int_equal(n->gpus[7].island, 1);
    assert_int_equal(n->gpus[7].free_milli, ALLOT_MILLI);
    assert_int_equal(n->n_labels, 2);
    assert_string_equal(n->labels[1].value, "r9");
    assert_int_equal(n->state, ALLOT_NODE_DRAINING);
    assert_true(allot_cluster_resized(c) > resized);
    assert_int_equal(allot_cluster_gpu_count(c), 8);
    /* smaller again: GPUs past the new count are cleared */
    four.name = NULL;
    assert_int_equal(allot_cluster_update_node(c, 0, &four, err, sizeof(err)), 0);
    assert_int_equal(n->n_gpus, 4);
    assert_int_equal(n->n_labels, 0);
    assert_int_equal(n->gpus[5].free_milli, 0);
    assert_int_equal(allot_cluster_update_node(c, 0, &eight, err, sizeof(err)), 0);
    /* ready again: the new GPUs take work */
    assert_int_equal(allot_cluster_set_state(c, 0, ALLOT_NODE_READY), 0);
    p.gpu_mask = 0xff;
    p.pod_class = 8;
    assert_int_equal(allot_cluster_apply(c, &p), 0);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    allot_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_node_validation),
        cmocka_unit_test(test_state_classes),
        cmocka_unit_test(test_apply_refuses_overcommit),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_task_validation),
        cmocka_unit_test(test_isolation),
        cmocka_unit_test(test_rdma_vfs),
        cmocka_unit_test(test_update_node),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
