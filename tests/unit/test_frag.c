/*
 * Unit tests of the fragmentation measure (src/core/frag.c): typical-task
 * mixes (grouping, coverage cut, renormalising) and F_n worked by hand.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/common.h"
#include "allot/frag.h"

#include <math.h>

static void test_frag_mix(void **state)
{
    struct allot_task t[10];
    struct allot_frag_mix m;
    int32_t g[2] = {1000, 300};

    /* 6 x frac 500, 3 x whole 1, 1 x CPU-only: 95 % coverage keeps all three */
    for (int i = 0; i < 10; i++) {
        t[i] = (struct allot_task){.num_gpu = 1, .gpu_milli = 500, .mig_profile = -1};
        if (i >= 6)
            t[i].gpu_milli = 1000;
        if (i == 9)
            t[i] = (struct allot_task){.mig_profile = -1};
    }
    assert_int_equal(allot_frag_mix_build(t, 10, 0.95, &m), 0);
    assert_int_equal(m.n, 3);
    assert_int_equal(m.v[0].milli, 500);
    assert_true(m.v[0].p > 0.599 && m.v[0].p < 0.601);
    /* GPUs free 1000 and 300, CPU plenty:
     * frac 500 fits, 300 is stranded: 0.6 * 300; whole fits, 300 stranded: 0.3 * 300;
     * CPU-only: all 1300 count: 0.1 * 1300. Sum 180 + 90 + 130 = 400 */
    assert_true(allot_frag_state(&m, 0, 64000, g, 2) > 399.99 &&
                allot_frag_state(&m, 0, 64000, g, 2) < 400.01);
    allot_frag_mix_clear(&m);
    /* 60 % coverage keeps only the most popular shape */
    assert_int_equal(allot_frag_mix_build(t, 10, 0.6, &m), 0);
    assert_int_equal(m.n, 1);
    allot_frag_mix_clear(&m);
    assert_int_equal(allot_frag_mix_build(t, 10, 0, &m), ALLOT_EINVAL);
}

static void test_frag_cases(void **state)
{
    struct allot_task t = {.num_gpu = 2,
                           .gpu_milli = 1000,
                           .mig_profile = -1,
                           .cpu_milli = 4000,
                           .model_mask = 1ULL << 3};
    struct allot_frag_mix m;
    int32_t g[4] = {1000, 1000, 700, 0};

    assert_int_equal(allot_frag_mix_build(&t, 1, 1.0, &m), 0);
    /* fits (two free GPUs, CPU enough, model 3): stranded = the 700 */
    assert_true(allot_frag_state(&m, 3, 4000, g, 4) == 700.0);
    /* too little CPU: everything free counts (2700) */
    assert_true(allot_frag_state(&m, 3, 3999, g, 4) == 2700.0);
    /* model not allowed: everything counts */
    assert_true(allot_frag_state(&m, 2, 64000, g, 4) == 2700.0);
    /* one free GPU only: does not fit, everything counts */
    g[1] = 999;
    assert_true(allot_frag_state(&m, 3, 64000, g, 4) == 2699.0);
    /* nothing free: 0 */
    for (int i = 0; i < 4; i++)
        g[i] = 0;
    assert_true(allot_frag_state(&m, 3, 64000, g, 4) == 0.0);
    allot_frag_mix_clear(&m);
}

static struct allot_task shape(int milli, int64_t cpu)
{
    struct allot_task t = {.num_gpu = 1, .gpu_milli = milli, .mig_profile = -1, .cpu_milli = cpu};
    return t;
}

/* Decay: with a half-life of H arrivals, a shape seen H arrivals ago
 * weighs half as much as one seen now. */
static void test_counts_decay(void **state)
{
    struct allot_frag_counts fc;
    struct allot_task a = shape(500, 1000), b = shape(250, 1000);
    struct allot_frag_mix m;

    (void)state;
    allot_frag_counts_init(&fc, 1000, 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(allot_frag_counts_add(&fc, &a), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(allot_frag_counts_add(&fc, &b), 0);
    assert_int_equal(fc.n, 2);
    /* equal counts, but b is newer: b's weight is twice a's */
    assert_true(fabs(fc.v[1].weight / fc.v[0].weight - 2.0) < 1e-6);
    assert_int_equal(allot_frag_counts_mix(&fc, 1.0, &m), 0);
    assert_int_equal(m.n, 2);
    assert_int_equal(m.v[0].milli, 250);
    assert_true(fabs(m.v[0].p - 2.0 / 3.0) < 1e-6);
    allot_frag_mix_clear(&m);
    /* no decay: plain counts, the same mix as allot_frag_mix_build */
    allot_frag_counts_clear(&fc);
    allot_frag_counts_init(&fc, 0, 0);
    for (int i = 0; i < 30; i++)
        assert_int_equal(allot_frag_counts_add(&fc, i % 3 ? &a : &b), 0);
    assert_int_equal(allot_frag_counts_mix(&fc, 1.0, &m), 0);
    assert_int_equal(m.v[0].milli, 500);
    assert_true(fabs(m.v[0].p - 2.0 / 3.0) < 1e-9);
    allot_frag_mix_clear(&m);
    allot_frag_counts_clear(&fc);
}

/* Bounded: a stream of ever new shapes never holds more than max_shapes,
 * and the popular shapes survive the forgetting. */
static void test_counts_bounded(void **state)
{
    struct allot_frag_counts fc;
    struct allot_frag_mix m;

    (void)state;
    allot_frag_counts_init(&fc, 50000, 64);
    for (int i = 0; i < 200000; i++) {
        struct allot_task t = i % 4 ? shape(100 * (1 + i % 3), 2000) : shape(1 + i % 997, 3 + i);
        assert_int_equal(allot_frag_counts_add(&fc, &t), 0);
        assert_true(fc.n <= 64);
    }
    assert_true(fc.cap <= 64);
    assert_int_equal(allot_frag_counts_mix(&fc, 0.7, &m), 0);
    assert_int_equal(m.n, 3); /* the three popular shapes cover 75 % */
    allot_frag_mix_clear(&m);
    allot_frag_counts_clear(&fc);
}

/* Allocation failures: every failing allocation leaves a usable counter. */
static void test_counts_alloc_failures(void **state)
{
    (void)state;
    for (unsigned long n = 1; n < 40; n++) {
        struct allot_frag_counts fc;
        struct allot_frag_mix m;
        allot_frag_counts_init(&fc, 100, 16);
        allot_alloc_fail_at(n, false);
        for (int i = 0; i < 100; i++) {
            struct allot_task t = shape(1 + i * 7 % 999, i);
            (void)allot_frag_counts_add(&fc, &t);
            assert_true(fc.n <= 16);
        }
        allot_alloc_fail_at(0, false);
        for (int i = 0; i < 100; i++) {
            struct allot_task t = shape(1 + i, i);
            assert_int_equal(allot_frag_counts_add(&fc, &t), 0);
        }
        assert_int_equal(allot_frag_counts_mix(&fc, 1.0, &m), 0);
        assert_true(m.n > 0 && m.n <= 16);
        allot_frag_mix_clear(&m);
        allot_frag_counts_clear(&fc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frag_mix),
        cmocka_unit_test(test_frag_cases),
        cmocka_unit_test(test_counts_decay),
        cmocka_unit_test(test_counts_bounded),
        cmocka_unit_test(test_counts_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
