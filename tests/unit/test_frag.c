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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frag_mix),
        cmocka_unit_test(test_frag_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
