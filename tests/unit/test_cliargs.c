/*
 * Unit tests for the allot CLI's value parsers in src/cli/args.c:
 * durations with Slurm's colon forms, and --begin times (now+DURATION,
 * dates and times of day, local or UTC, the next day when the time of
 * day has passed, clock changes) with every malformed form refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <time.h>

#include "cli.h"

/* 2026-12-06T06:30:00Z, a Sunday */
#define NOW INT64_C(1796538600)

static int64_t secs(const char *s)
{
    int64_t v = -1;

    return args_seconds("time-limit", s, &v) == CLI_OK ? v : -1;
}

static int64_t begin(const char *s, int64_t now)
{
    int64_t v = -1;

    return args_begin("begin", s, now, &v) == CLI_OK ? v : -1;
}

static void test_durations(void **state)
{
    (void)state;
    assert_int_equal(secs("90"), 90);
    assert_int_equal(secs("1.5m"), 90);
    assert_int_equal(secs("2h"), 7200);
    assert_int_equal(secs("1d"), 86400);
    /* Slurm's forms: MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS */
    assert_int_equal(secs("1:30"), 90);
    assert_int_equal(secs("2:00:00"), 7200);
    assert_int_equal(secs("100:00:00"), 360000);
    assert_int_equal(secs("1-0"), 86400);
    assert_int_equal(secs("2-12"), 2 * 86400 + 12 * 3600);
    assert_int_equal(secs("1-02:30"), 86400 + 2 * 3600 + 1800);
    assert_int_equal(secs("1-02:30:15"), 86400 + 2 * 3600 + 1800 + 15);
    const char *bad[] = {"",      "-1",   "1:60",    "1:2:3:4", "1-24",    "1-",
                         "-1:00", "1::2", "1:00:60", "a:00",    ":30",     "1-2-3",
                         "1:-30", "5x",   "1e9d",    "1- 2",    "1-02:60", "999999999-00"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(secs(bad[i]), -1);
}

static void test_begin_utc(void **state)
{
    (void)state;
    setenv("TZ", "UTC0", 1);
    tzset();
    assert_int_equal(begin("now", NOW), NOW);
    assert_int_equal(begin("now+90", NOW), NOW + 90);
    assert_int_equal(begin("now+2h", NOW), NOW + 7200);
    assert_int_equal(begin("now+1:00:00", NOW), NOW + 3600);
    assert_int_equal(begin("2026-12-06", NOW), NOW - 6 * 3600 - 1800);
    assert_int_equal(begin("2026-12-06T10:00", NOW), NOW + 3 * 3600 + 1800);
    assert_int_equal(begin("2026-12-06T10:00:30Z", NOW), NOW + 3 * 3600 + 1800 + 30);
    assert_int_equal(begin("2028-02-29Z", NOW), INT64_C(1835395200));
    assert_int_equal(begin("2000-03-01T00:00:00Z", NOW), INT64_C(951868800));
    /* a time of day: today while it is to come, else tomorrow */
    assert_int_equal(begin("06:30:01", NOW), NOW + 1);
    assert_int_equal(begin("07:00", NOW), NOW + 1800);
    assert_int_equal(begin("06:30", NOW), NOW + 86400);
    assert_int_equal(begin("00:00Z", NOW), NOW + 17 * 3600 + 1800);
    /* the last day of a year rolls into the next */
    assert_int_equal(begin("00:00", INT64_C(1798761600) - 60), INT64_C(1798761600));
    assert_int_equal(begin("23:00", INT64_C(1798761600) - 60), INT64_C(1798761600) + 23 * 3600);
    const char *bad[] = {"",
                         "now+",
                         "now+x",
                         "now-1h",
                         "nowish",
                         "2026-02-29",
                         "2026-13-01",
                         "2026-04-31",
                         "2026-00-10",
                         "1969-12-31",
                         "2026-12-06T24:00",
                         "2026-12-06T10",
                         "2026-12-06T10:00:60",
                         "2026-12-06 10:00",
                         "2026-12-06T10:00Z1",
                         "26-12-06",
                         "25:00",
                         "10:60",
                         "1:00",
                         "10:00:0",
                         "10:00ZZ",
                         "tomorrow",
                         "1796538600"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("%s\n", bad[i]);
        assert_int_equal(begin(bad[i], NOW), -1);
    }
}

static void test_begin_local(void **state)
{
    (void)state;
    /* Central European time with its summer time, no tz database needed */
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
    tzset();
    /* 07:30 local (UTC+1) is now; 10:00 local is 09:00 UTC */
    assert_int_equal(begin("2026-12-06T10:00", NOW), NOW + 2 * 3600 + 1800);
    assert_int_equal(begin("2026-12-06T10:00Z", NOW), NOW + 3 * 3600 + 1800);
    assert_int_equal(begin("08:00", NOW), NOW + 1800);
    assert_int_equal(begin("07:00", NOW), NOW + 86400 - 1800);
    /* summer time: 2026-07-01 12:00 local is 10:00 UTC */
    assert_int_equal(begin("2026-07-01T12:00", NOW), INT64_C(1782900000));
    /* the day before summer time starts (2026-03-29, a 23-hour day, whose
     * clock skips 02:00-03:00): today's 04:00; 02:30 has passed today, and
     * tomorrow's does not exist: mktime moves it past the skipped hour
     * (03:30 CEST, 01:30 UTC on 03-29, or within the hour after) */
    int64_t sat = INT64_C(1774663200); /* 2026-03-28T02:00:00Z, 03:00 CET */
    assert_int_equal(begin("04:00", sat), sat + 3600);
    int64_t v = begin("02:30", sat);
    assert_true(v >= INT64_C(1774747800) && v <= INT64_C(1774751400));
    /* the day after it: 23:00 on 03-28 asks for 03-29's 01:00 CET */
    assert_int_equal(begin("01:00", sat + 20 * 3600), INT64_C(1774742400));
    setenv("TZ", "UTC0", 1);
    tzset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_begin_utc),
        cmocka_unit_test(test_begin_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
