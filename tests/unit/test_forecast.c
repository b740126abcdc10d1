/*
 * Unit tests for src/sim/forecast.c (Holt-Winters for allot plan
 * --forecast): the season chosen for a series' length, a constant series,
 * a linear trend, a daily cycle on a trend recovered within a few percent
 * a week ahead, forecasts that never go below 0, and refused inputs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "allot/common.h"
#include "forecast.h"

#define PI 3.14159265358979323846

static void test_pick_season(void **state)
{
    (void)state;
    assert_int_equal(forecast_pick_season(24 * 14, 24), 168);
    assert_int_equal(forecast_pick_season(24 * 14 - 1, 24), 24);
    assert_int_equal(forecast_pick_season(48, 24), 24);
    assert_int_equal(forecast_pick_season(47, 24), 0);
    assert_int_equal(forecast_pick_season(14, 1), 7);
    assert_int_equal(forecast_pick_season(13, 1), 0);
}

static void test_constant_and_trend(void **state)
{
    double y[100], out[10];
    struct forecast_fit f;

    (void)state;
    for (int i = 0; i < 100; i++)
        y[i] = 5;
    assert_int_equal(forecast_holt_winters(y, 100, 0, 10, out, &f), 0);
    for (int h = 0; h < 10; h++)
        assert_true(fabs(out[h] - 5) < 1e-9);
    for (int i = 0; i < 100; i++)
        y[i] = 2 + 0.5 * i;
    assert_int_equal(forecast_holt_winters(y, 100, 0, 10, out, &f), 0);
    assert_true(fabs(f.trend - 0.5) < 1e-6);
    assert_true(fabs(out[9] - (2 + 0.5 * 109)) < 1e-6);
    /* a falling series stops at 0 */
    for (int i = 0; i < 100; i++)
        y[i] = 100 - i;
    assert_int_equal(forecast_holt_winters(y, 100, 0, 10, out, &f), 0);
    assert_true(out[9] == 0);
}

static void test_daily_cycle(void **state)
{
    enum { N = 24 * 21, H = 24 * 7 };
    double y[N], out[H];
    struct forecast_fit f;

    (void)state;
    for (int i = 0; i < N; i++)
        y[i] = 10 + 0.01 * i + 4 * sin(2 * PI * (i % 24) / 24.0);
    assert_int_equal(forecast_holt_winters(y, N, 24, H, out, &f), 0);
    assert_int_equal(f.season, 24);
    for (int h = 0; h < H; h++) {
        int i = N + h;
        double want = 10 + 0.01 * i + 4 * sin(2 * PI * (i % 24) / 24.0);

        assert_true(fabs(out[h] - want) < 0.05 * want);
    }
    assert_true(f.trend > 0.005 && f.trend < 0.015);
}

static void test_refused(void **state)
{
    double y[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, NAN}, out[1];

    (void)state;
    assert_int_equal(forecast_holt_winters(y, 1, 0, 1, out, NULL), ALLOT_EINVAL);
    assert_int_equal(forecast_holt_winters(y, 9, 5, 1, out, NULL), ALLOT_EINVAL);
    assert_int_equal(forecast_holt_winters(y, 9, 1, 1, out, NULL), ALLOT_EINVAL);
    assert_int_equal(forecast_holt_winters(y, 10, 0, 1, out, NULL), ALLOT_EINVAL);
    assert_int_equal(forecast_holt_winters(y, 8, 4, 1, out, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick_season),
        cmocka_unit_test(test_constant_and_trend),
        cmocka_unit_test(test_daily_cycle),
        cmocka_unit_test(test_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
