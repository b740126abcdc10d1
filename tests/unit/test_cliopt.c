/*
 * Unit tests for src/sim/cliopt.c: the three accepted option forms, every
 * parse error and its message (both ways of naming the option), the --help
 * layout with defaults and continuation lines, and the strict number
 * parsers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allot/common.h"
#include "cliopt.h"

enum { T_FILE, T_COUNT, T_FLAG, N_T };

static const struct cliopt table[N_T] = {
    [T_FILE] = {"file", "FILE", NULL, "a file"},
    [T_COUNT] = {"count", "N", "3", "how many\nof them"},
    [T_FLAG] = {"flag", NULL, NULL, "a flag"},
};

/* Parses argv (NULL-terminated, argv[0] included) into val/given. */
static int parse(const char **argv, unsigned flags, const char **val, bool *given, char *err,
                 size_t errlen)
{
    int argc = 0;

    while (argv[argc])
        argc++;
    memset(val, 0, N_T * sizeof(*val));
    memset(given, 0, N_T * sizeof(*given));
    err[0] = '\0';
    return cliopt_parse(table, N_T, argc, (char **)argv, val, given, flags, err, errlen);
}

static void test_forms(void **state)
{
    const char *argv[] = {"cmd", "--file", "a.csv", "--count=7", "--flag", NULL};
    const char *val[N_T];
    bool given[N_T];
    char err[256];

    (void)state;
    assert_int_equal(parse(argv, 0, val, given, err, sizeof(err)), 0);
    assert_string_equal(val[T_FILE], "a.csv");
    assert_string_equal(val[T_COUNT], "7");
    assert_null(val[T_FLAG]);
    assert_true(given[T_FILE] && given[T_COUNT] && given[T_FLAG]);

    /* An empty file name, and an option where a value belongs, are errors;
     * a value that starts with "--" is given as --name=VALUE. */
    const char *argv2[] = {"cmd", "--file=", NULL};
    assert_int_equal(parse(argv2, 0, val, given, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "option \"--file\": empty file name");
    const char *argv2b[] = {"cmd", "--count", "--flag", NULL};
    assert_int_equal(parse(argv2b, 0, val, given, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "option \"--count\" needs a value (\"--flag\" is an option)");
    const char *argv2c[] = {"cmd", "--count=--flag", NULL};
    assert_int_equal(parse(argv2c, 0, val, given, err, sizeof(err)), 0);
    assert_string_equal(val[T_COUNT], "--flag");
    assert_false(given[T_FLAG]);

    /* No arguments at all. */
    const char *argv3[] = {"cmd", NULL};
    assert_int_equal(parse(argv3, 0, val, given, err, sizeof(err)), 0);
    assert_false(given[T_FILE] || given[T_COUNT] || given[T_FLAG]);
}

static void test_step(void **state)
{
    const char *argv[] = {"cmd", "--count", "4", "--flag", NULL};
    const char *val[N_T] = {0};
    bool given[N_T] = {0};
    char err[128];
    int i = 1;

    (void)state;
    assert_int_equal(cliopt_step(table, N_T, 4, (char **)argv, &i, val, given, 0, err, sizeof(err)),
                     T_COUNT);
    assert_int_equal(i, 2);
    i++;
    assert_int_equal(cliopt_step(table, N_T, 4, (char **)argv, &i, val, given, 0, err, sizeof(err)),
                     T_FLAG);
    assert_int_equal(i, 3);
    assert_string_equal(val[T_COUNT], "4");
}

static void check_error(const char **argv, unsigned flags, const char *want)
{
    const char *val[N_T];
    bool given[N_T];
    char err[256];

    assert_int_equal(parse(argv, flags, val, given, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, want);
}

static void test_errors(void **state)
{
    const char *stray[] = {"cmd", "file", NULL};
    const char *single[] = {"cmd", "-file", "x", NULL};
    const char *unknown[] = {"cmd", "--nope=1", NULL};
    const char *prefix[] = {"cmd", "--fil", "x", NULL};
    const char *twice[] = {"cmd", "--file", "a", "--file=b", NULL};
    const char *flagval[] = {"cmd", "--flag=yes", NULL};
    const char *missing[] = {"cmd", "--flag", "--count", NULL};

    (void)state;
    check_error(stray, 0, "unexpected argument \"file\"");
    check_error(single, 0, "unexpected argument \"-file\"");
    check_error(unknown, 0, "unknown option \"--nope=1\"");
    check_error(prefix, 0, "unknown option \"--fil\"");
    check_error(twice, 0, "option \"--file\" given twice");
    check_error(twice, CLIOPT_ECHO_ARG, "option \"--file=b\" given twice");
    check_error(flagval, 0, "option \"--flag\" takes no value");
    check_error(flagval, CLIOPT_ECHO_ARG, "option \"--flag=yes\" takes no value");
    check_error(missing, 0, "option \"--count\" needs a value");
    check_error(missing, CLIOPT_ECHO_ARG, "option \"--count\" needs a value");
}

static void test_usage(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    (void)state;
    assert_non_null(f);
    cliopt_usage(f, "usage: cmd 100 %\n", table, N_T, 12);
    assert_int_equal(fclose(f), 0);
    assert_string_equal(buf, "usage: cmd 100 %\n"
                             "  --file FILE  a file\n"
                             "  --count N    how many\n"
                             "               of them (default 3)\n"
                             "  --flag       a flag\n");
    free(buf);
}

static void test_parse_int(void **state)
{
    int64_t v = -1;

    (void)state;
    assert_true(cliopt_parse_int("0", 0, 10, &v));
    assert_int_equal(v, 0);
    assert_true(cliopt_parse_int("0010", 0, 10, &v));
    assert_int_equal(v, 10);
    assert_true(cliopt_parse_int("9223372036854775807", 0, INT64_MAX, &v));
    assert_true(v == INT64_MAX);
    v = 5;
    assert_false(cliopt_parse_int("11", 0, 10, &v));
    assert_false(cliopt_parse_int("0", 1, 10, &v));
    assert_false(cliopt_parse_int("", 0, 10, &v));
    assert_false(cliopt_parse_int("-1", -5, 10, &v));
    assert_false(cliopt_parse_int("+1", 0, 10, &v));
    assert_false(cliopt_parse_int(" 1", 0, 10, &v));
    assert_false(cliopt_parse_int("1 ", 0, 10, &v));
    assert_false(cliopt_parse_int("1x", 0, 10, &v));
    assert_false(cliopt_parse_int("9223372036854775808", 0, INT64_MAX, &v));
    assert_int_equal(v, 5);
}

static void test_parse_double(void **state)
{
    double v;

    (void)state;
    assert_true(cliopt_parse_double("1.5", &v));
    assert_true(v == 1.5);
    assert_true(cliopt_parse_double(".25", &v));
    assert_true(v == 0.25);
    assert_true(cliopt_parse_double("5.", &v));
    assert_true(v == 5.0);
    /* plain decimals only (docs/allot-sim.md): no exponents, no hex floats */
    assert_false(cliopt_parse_double("2e3", &v));
    assert_false(cliopt_parse_double("1e-1", &v));
    assert_false(cliopt_parse_double("0x2", &v));
    assert_false(cliopt_parse_double("0x1.8p0", &v));
    assert_false(cliopt_parse_double(".", &v));
    assert_false(cliopt_parse_double("1.2.3", &v));
    assert_false(cliopt_parse_double("", &v));
    assert_false(cliopt_parse_double("-1", &v));
    assert_false(cliopt_parse_double("+1", &v));
    assert_false(cliopt_parse_double(" 1", &v));
    assert_false(cliopt_parse_double("1.5x", &v));
    assert_false(cliopt_parse_double("inf", &v));
    assert_false(cliopt_parse_double("nan", &v));
    assert_false(cliopt_parse_double("1e999", &v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),     cmocka_unit_test(test_step),
        cmocka_unit_test(test_errors),    cmocka_unit_test(test_usage),
        cmocka_unit_test(test_parse_int), cmocka_unit_test(test_parse_double),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
