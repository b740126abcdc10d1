/*
 * Unit tests for src/sim/mtgen.c, the synthetic multi-tenant workload:
 * determinism by seed, independence of tenants' streams, ordering and
 * ranges of the jobs, the offered load against the target, the daily cycle
 * of inference, office hours of notebooks, and bad options.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "allot/common.h"
#include "mtgen.h"
#include "philly.h"

#define DAY 86400

static int64_t start(void)
{
    return philly_days_from_civil(2024, 1, 1) * DAY; /* a Monday */
}

static bool same(const struct mtgen_job *a, const struct mtgen_job *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].submit != b[i].submit || a[i].duration != b[i].duration ||
            a[i].tenant != b[i].tenant || a[i].kind != b[i].kind || a[i].gpus != b[i].gpus)
            return false;
    return true;
}

static void test_deterministic(void **state)
{
    struct mtgen_tenant t[2] = {{64, {0.3, 0.5, 0.2}}, {16, {0, 1, 0}}};
    struct mtgen_opts o = {.start = start(), .days = 7, .load = 0.8, .seed = 7};
    struct mtgen_job *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;

    (void)state;
    assert_int_equal(mtgen_generate(t, 2, &o, &a, &na), 0);
    assert_int_equal(mtgen_generate(t, 2, &o, &b, &nb), 0);
    assert_true(na > 100);
    assert_int_equal(na, nb);
    assert_true(same(a, b, na));
    allot_free(b);
    o.seed = 8;
    assert_int_equal(mtgen_generate(t, 2, &o, &b, &nb), 0);
    assert_true(na != nb || !same(a, b, na));
    allot_free(a);
    allot_free(b);
}

/* Tenant 0's jobs do not change when a tenant is added after it. */
static void test_streams_independent(void **state)
{
    struct mtgen_tenant t[2] = {{32, {0.3, 0.5, 0.2}}, {48, {0.2, 0.2, 0.6}}};
    struct mtgen_opts o = {.start = start(), .days = 5, .load = 0.7, .seed = 3};
    struct mtgen_job *a = NULL, *b = NULL;
    size_t na = 0, nb = 0, k = 0;

    (void)state;
    assert_int_equal(mtgen_generate(t, 1, &o, &a, &na), 0);
    assert_int_equal(mtgen_generate(t, 2, &o, &b, &nb), 0);
    for (size_t i = 0; i < nb; i++) {
        if (b[i].tenant != 0)
            continue;
        assert_true(k < na);
        assert_true(same(&a[k], &b[i], 1));
        k++;
    }
    assert_int_equal(k, na);
    allot_free(a);
    allot_free(b);
}

static void test_ranges_and_load(void **state)
{
    struct mtgen_tenant t[3] = {{96, {1, 0, 0}}, {64, {0, 1, 0}}, {40, {0, 0, 1}}};
    struct mtgen_opts o = {.start = start(), .days = 28, .load = 0.8, .seed = 42};
    struct mtgen_job *v = NULL;
    double gpu_s[3] = {0};
    size_t n = 0;

    (void)state;
    assert_int_equal(mtgen_generate(t, 3, &o, &v, &n), 0);
    for (size_t i = 0; i < n; i++) {
        const struct mtgen_job *j = &v[i];

        assert_true(j->submit >= o.start && j->submit < o.start + 28 * DAY);
        assert_true(i == 0 || v[i - 1].submit <= j->submit);
        assert_true(j->duration >= 60 && j->duration <= 5 * DAY);
        assert_true(j->gpus >= 1 && j->gpus <= 32);
        assert_int_equal(j->kind, j->tenant); /* one kind per tenant here */
        gpu_s[j->tenant] += (double)j->gpus * (double)j->duration;
    }
    /* expected: load x GPUs x horizon; inference and notebooks are many small
     * jobs (tight), training is bursty and heavy-tailed (looser) */
    for (int i = 0; i < 3; i++) {
        double want = 0.8 * (double)t[i].gpus * 28.0 * DAY, got = gpu_s[i] / want;

        if (fabs(got - 1.0) > (i == 1 ? 0.3 : 0.1))
            fail_msg("tenant %d: offered %.3f of the target", i, got);
    }
    allot_free(v);
}

static void test_daily_cycle_and_office_hours(void **state)
{
    struct mtgen_tenant t[2] = {{128, {1, 0, 0}}, {128, {0, 0, 1}}};
    struct mtgen_opts o = {.start = start(), .days = 14, .load = 0.8, .seed = 5};
    struct mtgen_job *v = NULL;
    size_t n = 0, peak = 0, trough = 0;

    (void)state;
    assert_int_equal(mtgen_generate(t, 2, &o, &v, &n), 0);
    for (size_t i = 0; i < n; i++) {
        int64_t day = (v[i].submit - o.start) / DAY, sec = (v[i].submit - o.start) % DAY;

        if (v[i].kind == MTGEN_INFERENCE) {
            peak += sec >= 12 * 3600 && sec < 16 * 3600;
            trough += sec < 4 * 3600;
        } else {
            /* 2024-01-01 is a Monday: days 5, 6, 12, 13 are weekends */
            assert_true(day % 7 < 5);
            assert_true(sec >= 8 * 3600 && sec < 19 * 3600);
            assert_int_equal(v[i].gpus, 1);
        }
    }
    assert_true(peak > 2 * trough);
    allot_free(v);
}

static void test_small_tenant_caps_gangs(void **state)
{
    struct mtgen_tenant t[1] = {{4, {0, 1, 0}}};
    struct mtgen_opts o = {.start = start(), .days = 30, .load = 1.0, .seed = 9};
    struct mtgen_job *v = NULL;
    size_t n = 0;

    (void)state;
    assert_int_equal(mtgen_generate(t, 1, &o, &v, &n), 0);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++)
        assert_true(v[i].gpus <= 4);
    allot_free(v);
}

static void test_bad_options(void **state)
{
    struct mtgen_tenant t[1] = {{8, {0.5, 0.5, 0}}};
    struct mtgen_opts o = {.start = start(), .days = 1, .load = 0.5, .seed = 1};
    struct mtgen_job *v = (struct mtgen_job *)&o;
    size_t n = 5;

    (void)state;
    o.days = 0;
    assert_int_equal(mtgen_generate(t, 1, &o, &v, &n), ALLOT_EINVAL);
    assert_null(v);
    assert_int_equal(n, 0);
    o.days = 1;
    o.load = -1;
    assert_int_equal(mtgen_generate(t, 1, &o, &v, &n), ALLOT_EINVAL);
    o.load = NAN;
    assert_int_equal(mtgen_generate(t, 1, &o, &v, &n), ALLOT_EINVAL);
    o.load = 0.5;
    t[0].mix[2] = 0.1; /* shares add up to 1.1 */
    assert_int_equal(mtgen_generate(t, 1, &o, &v, &n), ALLOT_EINVAL);
    t[0].mix[2] = 0;
    t[0].gpus = 0; /* no GPUs: no jobs, not an error */
    assert_int_equal(mtgen_generate(t, 1, &o, &v, &n), 0);
    assert_int_equal(n, 0);
    assert_null(v);
}

static void test_alloc_failures(void **state)
{
    struct mtgen_tenant t[1] = {{8, {0.3, 0.5, 0.2}}};
    struct mtgen_opts o = {.start = start(), .days = 3, .load = 0.5, .seed = 1};

    (void)state;
    for (unsigned long k = 1;; k++) {
        struct mtgen_job *v = NULL;
        size_t n = 0;
        int rc;

        allot_alloc_fail_at(k, false);
        rc = mtgen_generate(t, 1, &o, &v, &n);
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            allot_free(v);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_null(v);
        assert_true(k < 1000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_streams_independent),
        cmocka_unit_test(test_ranges_and_load),
        cmocka_unit_test(test_daily_cycle_and_office_hours),
        cmocka_unit_test(test_small_tenant_caps_gangs),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
