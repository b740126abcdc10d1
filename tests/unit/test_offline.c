/*
 * Unit tests for src/sim/offline.c, the offline reference packer of the
 * openb fill experiment: small packings worked by hand (largest first, the
 * CPU filter, CPU-only pods, GPU models, memory), the local search that
 * trades a smaller pod for a larger one, determinism, and the per-point
 * driver on the tiny trace under
 * tests/data/fill/. Runs from the source root; never reads the shared real
 * traces.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "allot/common.h"
#include "offline.h"

#define DATA ALLOT_SOURCE_DIR "/tests/data/fill/"

#include "catalog_fixture.h"

static struct allot_node_spec node(const char *name, const char *model, int64_t cpu, int gpus)
{
    return (struct allot_node_spec){.name = name,
                                    .model = model,
                                    .cpu_milli = cpu,
                                    .mem_mib = 1 << 20,
                                    .n_gpus = gpus,
                                    .gpu_mode = ALLOT_GPU_SHARED};
}

static struct allot_task task(int num_gpu, int milli, int64_t cpu)
{
    return (struct allot_task){
        .num_gpu = num_gpu, .gpu_milli = num_gpu ? milli : 0, .mig_profile = -1, .cpu_milli = cpu};
}

/* Three 500s and a whole GPU on two GPUs: the whole GPU and two 500s fit,
 * whatever the arrival order (here the 500s come first). */
static void test_largest_first(void **state)
{
    struct allot_node_spec n[] = {node("a", "V100M32", 64000, 2)};
    struct allot_task t[] = {task(1, 500, 0), task(1, 500, 0), task(1, 500, 0), task(1, 1000, 0)};
    struct sim_offline_result r;

    (void)state;
    assert_int_equal(sim_offline_pack(cat, n, 1, t, 4, 1, 3, &r), 0);
    assert_int_equal(r.request_milli, 2500);
    assert_int_equal(r.used_milli, 2000);
    assert_int_equal(r.failed_gpu, 1);
    assert_int_equal(r.failed_cpu, 0);
}

/* CPU is a filter: a node with CPU for one task only takes one. */
static void test_cpu_filter(void **state)
{
    struct allot_node_spec n[] = {node("a", "V100M32", 10000, 4)};
    struct allot_task t[] = {task(1, 1000, 6000), task(1, 1000, 6000)};
    struct sim_offline_result r;

    (void)state;
    assert_int_equal(sim_offline_pack(cat, n, 1, t, 2, 1, 3, &r), 0);
    assert_int_equal(r.used_milli, 1000);
    assert_int_equal(r.failed_gpu, 1);
}

/* A node's CPU holds the CPU-only pod or the GPU pod, not both. With one
 * node the packing keeps the GPU pod (GPU milli first) and leaves the
 * CPU-only pod out; with a second node (CPU only) both fit. */
static void test_cpu_only(void **state)
{
    struct allot_node_spec one[] = {node("a", "V100M32", 10000, 1)};
    struct allot_node_spec two[] = {node("a", "V100M32", 10000, 1), node("b", NULL, 10000, 0)};
    struct allot_task t[] = {task(0, 0, 8000), task(1, 1000, 6000)};
    struct sim_offline_result r;

    (void)state;
    assert_int_equal(sim_offline_pack(cat, one, 1, t, 2, 1, 3, &r), 0);
    assert_int_equal(r.used_milli, 1000);
    assert_int_equal(r.failed_cpu, 1);
    assert_int_equal(r.failed_gpu, 0);
    assert_int_equal(sim_offline_pack(cat, two, 2, t, 2, 1, 3, &r), 0);
    assert_int_equal(r.used_milli, 1000);
    assert_int_equal(r.failed_cpu, 0);
    assert_int_equal(r.failed_gpu, 0);
}

/* gpu_spec: a pod restricted to T4 only goes to the T4 node. */
static void test_model_mask(void **state)
{
    struct allot_node_spec n[] = {node("a", "V100M32", 64000, 1), node("b", "T4", 64000, 1)};
    struct allot_task t[] = {task(1, 1000, 0), task(1, 1000, 0), task(1, 1000, 0)};
    int t4 = allot_catalog_find_model(cat, "T4");
    struct sim_offline_result r;

    (void)state;
    assert_true(t4 >= 0);
    for (int i = 0; i < 3; i++)
        t[i].model_mask = 1ULL << t4;
    assert_int_equal(sim_offline_pack(cat, n, 2, t, 3, 1, 3, &r), 0);
    assert_int_equal(r.used_milli, 1000);
    assert_int_equal(r.failed_gpu, 2);
}

/* Memory is a filter too. */
static void test_memory_filter(void **state)
{
    struct allot_node_spec n[] = {node("a", "V100M32", 64000, 2)};
    struct allot_task t[] = {task(1, 1000, 0), task(1, 1000, 0)};
    struct sim_offline_result r;

    (void)state;
    n[0].mem_mib = 1000;
    t[0].mem_mib = 600;
    t[1].mem_mib = 600;
    assert_int_equal(sim_offline_pack(cat, n, 1, t, 2, 1, 3, &r), 0);
    assert_int_equal(r.used_milli, 1000);
}

/*
 * The local search. One 2-GPU node; 600, 700, 900 and 400 arrive in that
 * order. Largest first fills the GPUs with 900 and 700 (1600); the online
 * policies put 600 and 700 on a GPU each, fail 900 and add 400 to the 600
 * (1700). The search then takes the 700 off (nowhere else to go) for the
 * 900: 600 + 400 | 900 = 1900, the best there is.
 */
static void test_search_improves(void **state)
{
    struct allot_node_spec n[] = {node("a", "V100M32", 64000, 2)};
    struct allot_task t[] = {task(1, 600, 0), task(1, 700, 0), task(1, 900, 0), task(1, 400, 0)};
    struct sim_offline_result r0, r3;

    (void)state;
    assert_int_equal(sim_offline_pack(cat, n, 1, t, 4, 1, 0, &r0), 0);
    assert_int_equal(sim_offline_pack(cat, n, 1, t, 4, 1, 3, &r3), 0);
    assert_int_equal(r0.used_milli, 1700);
    assert_int_equal(r3.used_milli, 1900);
    assert_int_equal(r3.failed_gpu, 1);
}

/* Same inputs, same result; and no more GPU than asked for or than the
 * cluster has. */
static void test_deterministic(void **state)
{
    struct allot_node_spec n[] = {node("a", "V100M32", 32000, 4), node("b", "T4", 16000, 2),
                                  node("c", "G2", 64000, 8)};
    struct allot_task t[64];
    struct sim_offline_result r1, r2;
    static const int milli[] = {1000, 810, 470, 650, 320, 230, 160, 1000};

    (void)state;
    for (int i = 0; i < 64; i++)
        t[i] = task(i % 9 == 0 ? 0 : 1, milli[i % 8], 1000 + 500 * (i % 7));
    t[5] = task(4, 1000, 8000);
    assert_int_equal(sim_offline_pack(cat, n, 3, t, 64, 7, 3, &r1), 0);
    assert_int_equal(sim_offline_pack(cat, n, 3, t, 64, 7, 3, &r2), 0);
    assert_memory_equal(&r1, &r2, sizeof(r1));
    assert_true(r1.used_milli <= r1.request_milli);
    assert_true(r1.used_milli <= 14 * 1000);
}

/* The driver on the tiny trace: unallocated shares are in range (never
 * more placed than arrived) and repeat. */
static void test_fill_points(void **state)
{
    struct sim_fill_trace t;
    char err[256] = "";
    static const int points[] = {50, 80, 100, 130};
    struct sim_offline_result u1[4], u2[4];

    (void)state;
    if (sim_fill_trace_load(&t, DATA "nodes.csv", DATA "pods.csv", err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        fail();
    }
    assert_int_equal(sim_offline_fill(&t, 42, 1.3, points, 4, u1), 0);
    assert_int_equal(sim_offline_fill(&t, 42, 1.3, points, 4, u2), 0);
    assert_memory_equal(u1, u2, sizeof(u1));
    for (int i = 0; i < 4; i++) {
        /* nothing placed beyond the arrived request or the capacity */
        assert_true(u1[i].used_milli >= 0);
        assert_true(u1[i].used_milli <= u1[i].request_milli);
        assert_true(u1[i].request_milli * 100 <= (int64_t)points[i] * t.gpus * 1000);
        assert_true(u1[i].used_milli <= t.gpus * 1000);
    }
    sim_fill_trace_free(&t);
}

/* A node model the catalog does not know is an error. */
static void test_bad_model(void **state)
{
    struct allot_node_spec n[] = {node("a", "NoSuchGPU", 64000, 2)};
    struct allot_task t[] = {task(1, 1000, 0)};
    struct sim_offline_result r;

    (void)state;
    assert_int_equal(sim_offline_pack(cat, n, 1, t, 1, 1, 3, &r), ALLOT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_largest_first), cmocka_unit_test(test_cpu_filter),
        cmocka_unit_test(test_cpu_only),      cmocka_unit_test(test_model_mask),
        cmocka_unit_test(test_memory_filter), cmocka_unit_test(test_search_improves),
        cmocka_unit_test(test_deterministic), cmocka_unit_test(test_fill_points),
        cmocka_unit_test(test_bad_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
