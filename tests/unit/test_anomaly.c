/*
 * The anomaly tests of allotd's metering (src/server/anomaly.c): the
 * robust z-score against values worked out by hand, its resistance to
 * earlier spikes, the flat-history cases, and abrupt shifts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../src/server/anomaly.c"

static void robust_z_known_values(void **state)
{
    /* 4..15: median (9 + 10) / 2 = 9.5; absolute deviations 0.5, 0.5, 1.5,
     * 1.5, ..., 5.5, 5.5: their median (2.5 + 3.5) / 2 = 3 */
    double h[] = {10, 9, 11, 8, 12, 7, 13, 6, 14, 5, 15, 4};
    double z = 0;

    (void)state;
    assert_true(anomaly_robust_z(h, 12, 40, 99, &z));
    assert_true(fabs(z - 0.6745 * (40 - 9.5) / 3.0) < 1e-9);
    assert_true(anomaly_robust_z(h, 12, 9.5, 99, &z));
    assert_true(fabs(z) < 1e-12);
    /* too little history: no verdict */
    assert_false(anomaly_robust_z(h, ANOMALY_MIN_HISTORY - 1, 40, 99, &z));
}

static void robust_z_ignores_old_spikes(void **state)
{
    double h[48];
    double z = 0;

    (void)state;
    for (int i = 0; i < 48; i++)
        h[i] = 100 + (i % 5); /* 100..104 */
    h[7] = 5000;              /* two earlier spikes */
    h[30] = 7000;
    assert_true(anomaly_robust_z(h, 48, 1000, 99, &z));
    assert_true(z > 100); /* a plain z-score would be about 1.3 here */
    assert_true(anomaly_robust_z(h, 48, 104, 99, &z));
    assert_true(z < 3.5);
}

static void robust_z_flat_history(void **state)
{
    double h[20] = {0};
    double z = -1;

    (void)state;
    assert_true(anomaly_robust_z(h, 20, 0, 42, &z));
    assert_true(z == 0.0);
    assert_true(anomaly_robust_z(h, 20, 3, 42, &z));
    assert_true(z == 42.0); /* above a flat line: the caller's score */
    h[3] = 8;               /* MAD 0, mean absolute deviation 0.4 */
    assert_true(anomaly_robust_z(h, 20, 2, 42, &z));
    assert_true(fabs(z - 2 / (1.2533 * 0.4)) < 1e-9);
}

static void shifts(void **state)
{
    double busy[] = {90, 92, 88, 91}, quiet[] = {5, 4, 6}, same[] = {89, 90, 91};
    double from = 0, to = 0;

    (void)state;
    assert_true(anomaly_shift(busy, 4, quiet, 3, 40, &from, &to));
    assert_true(fabs(from - 90.25) < 1e-9 && fabs(to - 5) < 1e-9);
    assert_false(anomaly_shift(busy, 4, same, 3, 40, &from, &to));
    assert_false(anomaly_shift(busy, 2, quiet, 3, 40, &from, &to)); /* too few */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(robust_z_known_values),
        cmocka_unit_test(robust_z_ignores_old_spikes),
        cmocka_unit_test(robust_z_flat_history),
        cmocka_unit_test(shifts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
