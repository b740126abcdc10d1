/*
 * Unit tests for src/sim/philly.c, the Philly trace reader: the good sample
 * files under tests/data/philly/, the broken-file corpus under
 * tests/data/philly/bad/ (each checked for its FILE:LINE: message; every
 * file in the folder must be listed here), the civil-date conversion against
 * known epoch values and a day-by-day round trip, in-memory edge cases and
 * an allocation-failure loop. Runs from the source root; never reads the
 * shared real traces.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allot/common.h"
#include "philly.h"

#define DATA ALLOT_SOURCE_DIR "/tests/data/philly/"

static void test_jobs_good(void **state)
{
    struct philly_jobs l = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(philly_read_jobs(DATA "jobs.csv", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 6);
    assert_int_equal(l.n_vcs, 4);
    assert_string_equal(l.vcs[0], "11cb48");
    assert_string_equal(l.vcs[1], "6214e9");
    assert_string_equal(l.vcs[2], "6c71a0");
    assert_string_equal(l.vcs[3], "b436b2");
    assert_int_equal(l.v[0].submit, 1507532515);
    assert_int_equal(l.v[0].duration, 66);
    assert_int_equal(l.v[0].num_gpus, 1);
    assert_int_equal(l.v[0].vc, 0);
    assert_int_equal(l.v[0].line, 2);
    assert_int_equal(l.v[1].vc, 1);
    assert_int_equal(l.v[2].num_gpus, 8);
    assert_int_equal(l.v[2].duration, 860662);
    assert_int_equal(l.v[3].duration, 0); /* kept: dropping is the caller's choice */
    assert_int_equal(l.v[3].vc, 1);
    assert_int_equal(l.v[4].num_gpus, 0);
    assert_int_equal(l.v[4].vc, 0);
    assert_int_equal(l.v[5].submit, 951782400 + 86399);
    assert_int_equal(l.v[5].duration, 11); /* 10.5 rounds away from zero */
    assert_int_equal(l.v[5].num_gpus, 16);
    assert_int_equal(l.v[5].line, 7);
    philly_jobs_free(&l);
    assert_null(l.v);
    philly_jobs_free(&l);
    philly_jobs_free(NULL);
}

static void test_jobs_crlf_reordered(void **state)
{
    struct philly_jobs l = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(philly_read_jobs(DATA "jobs_crlf_reordered.csv", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].num_gpus, 2);
    assert_int_equal(l.v[0].duration, 100);
    assert_int_equal(l.v[0].submit, 1506816010);
    assert_string_equal(l.vcs[l.v[1].vc], "vc-a_1.x");
    philly_jobs_free(&l);
}

static void test_vcs_good(void **state)
{
    struct philly_vcs l = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(philly_read_vcs(DATA "vcs.csv", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.v[0].name, "6214e9");
    assert_int_equal(l.v[0].nodes, 64);
    assert_int_equal(l.v[2].nodes, 1);
    philly_vcs_free(&l);
    philly_vcs_free(NULL);
}

/* Each broken file and the message it must give (after "PATH:"). */
static const struct bad_case {
    const char *file;
    const char *msg;
} bad_cases[] = {
    {"jobs_empty.csv", " empty file, expected the header"},
    {"jobs_header_only.csv", "1: header but no data rows"},
    {"jobs_no_header.csv", "1: missing header line"},
    {"jobs_unknown_column.csv", "1: unknown column \"user\""},
    {"jobs_missing_column.csv", "1: missing column \"cluster\""},
    {"jobs_duplicate_column.csv", "1: duplicate column \"cluster\""},
    {"jobs_short_row.csv", "2: expected 5 fields, got 4"},
    {"jobs_blank_line.csv", "3: empty line"},
    {"jobs_bad_date.csv", "2: timestamp \"2017-02-29 07:01:55\" is not a valid"},
    {"jobs_date_only.csv", "2: timestamp \"2017-10-09\" lacks the time of day"},
    {"jobs_bad_hour.csv", "2: timestamp \"2017-10-09 24:00:00\" is not a valid"},
    {"jobs_iso_t.csv", "2: timestamp \"2017-10-09T07:01:55\" is not a valid"},
    {"jobs_before_1970.csv", "2: timestamp \"1969-12-31 23:59:59\" is not a valid"},
    {"jobs_negative_duration.csv", "2: duration \"-66.0\" is negative"},
    {"jobs_exponent.csv", "2: duration \"6.6e1\" is not a decimal number"},
    {"jobs_trailing_point.csv", "2: duration \"66.\" is not a decimal number"},
    {"jobs_float_gpus.csv", "2: num_gpus \"1.0\" is not an integer"},
    {"jobs_gpus_range.csv", "2: num_gpus \"99999\" out of range 0..4096"},
    {"jobs_gpu_time_mismatch.csv", "2: gpu_time \"66.0\" is not duration x num_gpus (132.0)"},
    {"jobs_empty_cluster.csv", "2: cluster is empty"},
    {"jobs_cluster_slash.csv", "2: cluster \"a/b\": only letters"},
    {"jobs_quoted.csv", "2: '\"' at column 33: quoted fields are not supported"},
    {"jobs_tab.csv", "2: control character 0x09 at column 34"},
    {"jobs_lone_cr.csv", "2: carriage return inside the line at column 34"},
    {"jobs_leading_space.csv", "2: duration \" 66.0\" is not a decimal number"},
    {"jobs_overflow.csv", "2: duration \"99999999999999999999\" is not a decimal number"},
    {"jobs_nul.csv", "2: NUL byte at column 34"},
    {"vcs_header_only.csv", "1: header but no data rows"},
    {"vcs_unknown_column.csv", "1: unknown column \"nodes\""},
    {"vcs_duplicate.csv", "4: duplicate vc \"a\""},
    {"vcs_zero_nodes.csv", "2: node num is 0"},
    {"vcs_not_integer.csv", "2: node num \"x\" is not an integer"},
    {"vcs_extra_field.csv", "2: expected 2 fields, got 3"},
};
#define N_BAD (sizeof(bad_cases) / sizeof(bad_cases[0]))

static void test_bad_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_BAD; i++) {
        char path[512], err[512] = "", want[768];
        int rc;

        snprintf(path, sizeof(path), DATA "bad/%s", bad_cases[i].file);
        if (strncmp(bad_cases[i].file, "vcs_", 4) == 0) {
            struct philly_vcs l = {0};
            rc = philly_read_vcs(path, &l, err, sizeof(err));
            assert_null(l.v);
        } else {
            struct philly_jobs l = {0};
            rc = philly_read_jobs(path, &l, err, sizeof(err));
            assert_null(l.v);
        }
        snprintf(want, sizeof(want), "%s:%s", path, bad_cases[i].msg);
        if (rc != ALLOT_EINVAL || strncmp(err, want, strlen(want)) != 0)
            fail_msg("%s: rc %d, message \"%s\", want prefix \"%s\"", bad_cases[i].file, rc, err,
                     want);
    }
}

/* Every file of the bad corpus is listed above (none silently skipped). */
static void test_bad_corpus_complete(void **state)
{
    DIR *d = opendir(DATA "bad");
    struct dirent *e;
    size_t seen = 0;

    (void)state;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t i;

        if (e->d_name[0] == '.')
            continue;
        for (i = 0; i < N_BAD; i++)
            if (strcmp(bad_cases[i].file, e->d_name) == 0)
                break;
        if (i == N_BAD)
            fail_msg("bad/%s is not listed in bad_cases", e->d_name);
        seen++;
    }
    closedir(d);
    assert_int_equal(seen, N_BAD);
}

static void test_missing_file(void **state)
{
    struct philly_jobs l = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(philly_read_jobs(DATA "no-such-file.csv", &l, err, sizeof(err)), ALLOT_EIO);
    assert_non_null(strstr(err, "no-such-file.csv: "));
}

static void test_time_parse(void **state)
{
    int64_t t = 0;
    char buf[32];

    (void)state;
    assert_int_equal(philly_parse_time("1970-01-01", &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(philly_parse_time("2017-10-01", &t), 0);
    assert_int_equal(t, 1506816000);
    assert_int_equal(philly_parse_time("2017-12-01 00:00:00", &t), 0);
    assert_int_equal(t, 1512086400);
    assert_int_equal(philly_parse_time("2000-02-29", &t), 0);
    assert_int_equal(t, 951782400);
    assert_int_equal(philly_parse_time("2100-02-29", &t), ALLOT_EINVAL); /* not a leap year */
    assert_int_equal(philly_parse_time("2017-13-01", &t), ALLOT_EINVAL);
    assert_int_equal(philly_parse_time("2017-04-31", &t), ALLOT_EINVAL);
    assert_int_equal(philly_parse_time("2017-10-01 12:60:00", &t), ALLOT_EINVAL);
    assert_int_equal(philly_parse_time("2017-10-01 12:00:60", &t), ALLOT_EINVAL);
    assert_int_equal(philly_parse_time("2017-10-1", &t), ALLOT_EINVAL);
    assert_int_equal(philly_parse_time("2017-10-01 ", &t), ALLOT_EINVAL);
    assert_int_equal(philly_parse_time("", &t), ALLOT_EINVAL);
    assert_string_equal(philly_format_time(1507532515, buf, sizeof(buf)), "2017-10-09 07:01:55");
    assert_string_equal(philly_format_time(0, buf, sizeof(buf)), "1970-01-01 00:00:00");
}

/* Every day from 1970 to 2400 formats and parses back to itself. */
static void test_time_round_trip(void **state)
{
    int64_t last = philly_days_from_civil(2400, 12, 31);
    char buf[32];

    (void)state;
    assert_int_equal(philly_days_from_civil(1970, 1, 1), 0);
    for (int64_t d = 0; d <= last; d++) {
        int64_t t = d * 86400 + 3723, back = -1;

        philly_format_time(t, buf, sizeof(buf));
        if (philly_parse_time(buf, &back) != 0 || back != t)
            fail_msg("day %lld: \"%s\" parses to %lld", (long long)d, buf, (long long)back);
    }
}

static void test_buffer_edges(void **state)
{
    static const char unterminated[] = "timestamp,duration,num_gpus,gpu_time,cluster\n"
                                       "2017-10-01 00:00:00,1,1,1,a";
    static const char trailing_blank[] = "vc,node num\na,1\n\n\r\n";
    static const char blank_then_row[] = "vc,node num\n\na,1\n";
    struct philly_jobs j = {0};
    struct philly_vcs v = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(
        philly_parse_jobs(unterminated, sizeof(unterminated) - 1, "mem", &j, err, sizeof(err)), 0);
    assert_int_equal(j.n, 1);
    assert_int_equal(j.v[0].duration, 1);
    philly_jobs_free(&j);
    assert_int_equal(
        philly_parse_vcs(trailing_blank, sizeof(trailing_blank) - 1, "mem", &v, err, sizeof(err)),
        0);
    assert_int_equal(v.n, 1);
    philly_vcs_free(&v);
    assert_int_equal(
        philly_parse_vcs(blank_then_row, sizeof(blank_then_row) - 1, "mem", &v, err, sizeof(err)),
        ALLOT_EINVAL);
    assert_string_equal(err, "mem:2: empty line");
    /* messages are truncated, never overflow */
    assert_int_equal(philly_parse_vcs("x", 1, "a-long-file-name", &v, err, 8), ALLOT_EINVAL);
    assert_int_equal(strlen(err), 7);
}

/* Failing the Nth allocation for every N gives ENOMEM and leaks nothing. */
static void test_alloc_failures(void **state)
{
    (void)state;
    for (unsigned long n = 1;; n++) {
        struct philly_jobs j = {0};
        char err[256] = "";
        int rc;

        allot_alloc_fail_at(n, false);
        rc = philly_read_jobs(DATA "jobs.csv", &j, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            assert_int_equal(j.n, 6);
            philly_jobs_free(&j);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_null(j.v);
        assert_true(n < 100);
    }
    for (unsigned long n = 1;; n++) {
        struct philly_vcs v = {0};
        char err[256] = "";
        int rc;

        allot_alloc_fail_at(n, false);
        rc = philly_read_vcs(DATA "vcs.csv", &v, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            philly_vcs_free(&v);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_true(n < 100);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_good),
        cmocka_unit_test(test_jobs_crlf_reordered),
        cmocka_unit_test(test_vcs_good),
        cmocka_unit_test(test_bad_corpus),
        cmocka_unit_test(test_bad_corpus_complete),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_time_parse),
        cmocka_unit_test(test_time_round_trip),
        cmocka_unit_test(test_buffer_edges),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
