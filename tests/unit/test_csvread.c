/*
 * Unit tests for src/sim/csvread.c, the line, header and number plumbing
 * shared by the openb and Philly trace readers: field splitting and the
 * FILE:LINE: messages for bad lines, trailing blank lines, header matching,
 * both integer styles, decimals, quoting, file loading with its size limit,
 * csv_open() and an allocation-failure loop. The readers' own corpora live in
 * test_openb.c and test_philly.c.
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
#include "csvread.h"

#define DATA ALLOT_SOURCE_DIR "/tests/data/philly/"

static const struct csv_col cols[] = {{"a", true}, {"b", true}, {"c", false}};
static const struct csv_layout layout = {cols, 3, "a,b,c", "expected"};
static const struct csv_format fmt = {1 << 20, 16, 4, false};

/* A reader over a private copy of `s` (freed by the caller). */
static char *start(struct csv_reader *r, const char *s, bool trailing_ok, char *err, size_t errlen)
{
    size_t len = strlen(s);
    char *text = malloc(len + 1);
    struct csv_format f = fmt;

    assert_non_null(text);
    memcpy(text, s, len + 1);
    f.trailing_blank_ok = trailing_ok;
    csv_init(r, text, len, "t.csv", &f, err, errlen);
    return text;
}

static void test_lines(void **state)
{
    struct csv_reader r;
    char err[128] = "";
    char *t = start(&r, "x,y\r\n1,2,3,4,5,6\nlast", false, err, sizeof(err));

    (void)state;
    assert_int_equal(csv_next(&r), 1);
    assert_int_equal(r.nf, 2);
    assert_string_equal(r.f[0], "x");
    assert_string_equal(r.f[1], "y"); /* the CR is dropped */
    assert_int_equal(csv_next(&r), 1);
    assert_int_equal(r.nf, 6); /* counted past max_cols, stored up to it */
    assert_string_equal(r.f[3], "4");
    assert_int_equal(csv_check_width(&r, 4), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:2: expected 4 fields, got 6");
    assert_int_equal(csv_next(&r), 1);
    assert_string_equal(r.f[0], "last");
    assert_int_equal(csv_next(&r), 0);
    free(t);
}

static void test_bad_lines(void **state)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"ok\n\nx", "t.csv:2: empty line"},
        {"ok\n0123456789abcdefg", "t.csv:2: line longer than 16 bytes"},
        {"a\rb", "t.csv:1: carriage return inside the line at column 2"},
        {"ab\x01", "t.csv:1: control character 0x01 at column 3"},
        {"a,\"b\"", "t.csv:1: '\"' at column 3: quoted fields are not supported"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct csv_reader r;
        char err[128] = "";
        char *t = start(&r, cases[i].text, false, err, sizeof(err));
        int rc;

        while ((rc = csv_next(&r)) > 0)
            ;
        assert_int_equal(rc, ALLOT_EINVAL);
        assert_string_equal(err, cases[i].msg);
        free(t);
    }
}

static void test_nul_byte(void **state)
{
    struct csv_reader r;
    char err[128] = "";
    char text[] = "ab\0c";

    (void)state;
    csv_init(&r, text, 4, "t.csv", &fmt, err, sizeof(err));
    assert_int_equal(csv_next(&r), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:1: NUL byte at column 3");
}

static void test_trailing_blank(void **state)
{
    struct csv_reader r;
    char err[128] = "";
    char *t = start(&r, "a\n\r\n\n", true, err, sizeof(err));

    (void)state;
    assert_int_equal(csv_next(&r), 1);
    assert_int_equal(csv_next(&r), 0);
    free(t);
    t = start(&r, "a\n\r\n\n", false, err, sizeof(err));
    assert_int_equal(csv_next(&r), 1);
    assert_int_equal(csv_next(&r), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:2: empty line");
    free(t);
    t = start(&r, "\n\na", true, err, sizeof(err)); /* only after line 1 */
    assert_int_equal(csv_next(&r), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:1: empty line");
    free(t);
}

static void test_header(void **state)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"", "t.csv: empty file, expected the header \"a,b,c\""},
        {"1,2\n", "t.csv:1: missing header line, expected \"a,b,c\""},
        {"a,zz\n1,2", "t.csv:1: unknown column \"zz\" (expected \"a,b,c\")"},
        {"a,a\n1,2", "t.csv:1: duplicate column \"a\""},
        {"c,a\n1,2", "t.csv:1: missing column \"b\""},
        {"a,b\n", "t.csv:1: header but no data rows"},
    };
    struct csv_reader r;
    char err[128] = "";
    int idx[3];
    char *t;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        t = start(&r, cases[i].text, false, err, sizeof(err));
        assert_int_equal(csv_header(&r, &layout, idx), ALLOT_EINVAL);
        assert_string_equal(err, cases[i].msg);
        free(t);
    }
    t = start(&r, "b,a\n1,2\n", false, err, sizeof(err));
    assert_int_equal(csv_header(&r, &layout, idx), 0);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 0);
    assert_int_equal(idx[2], -1);
    assert_int_equal(csv_rows_left(&r), 2);
    assert_int_equal(csv_next(&r), 1);
    assert_string_equal(r.f[idx[0]], "2");
    free(t);
}

/* Runs csv_int on `s`; returns its code, with the message in err. */
static int int_of(const char *s, int64_t max, unsigned flags, int64_t *v, char *err, size_t errlen)
{
    struct csv_reader r;
    char none[1] = "";

    csv_init(&r, none, 0, "t.csv", &fmt, err, errlen);
    r.line = 3;
    return csv_int(&r, "n", s, max, flags, v);
}

static void test_int(void **state)
{
    char err[128] = "";
    int64_t v = 7;

    (void)state;
    assert_int_equal(int_of("0042", 100, 0, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 42);
    assert_int_equal(int_of("100", 100, CSV_SIGN_FIRST, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 100);
    assert_int_equal(int_of("", 100, CSV_EMPTY_OK, &v, err, sizeof(err)), 0);
    assert_int_equal(v, -1);
    assert_int_equal(int_of("", 100, 0, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n is empty");
    assert_int_equal(int_of("+1", 100, 0, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"+1\" is not an integer");
    assert_int_equal(int_of("101", 100, 0, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"101\" out of range 0..100");
    assert_int_equal(int_of("99999999999999999999999", INT64_MAX, 0, &v, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"99999999999999999999999\" out of range "
                             "0..9223372036854775807");
    /* the two styles differ on "-0" and on which of overflow and junk wins */
    v = 7;
    assert_int_equal(int_of("-0", 100, 0, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 0);
    assert_int_equal(int_of("-0", 100, CSV_SIGN_FIRST, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"-0\" is negative");
    assert_int_equal(int_of("-5x", 100, 0, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"-5x\" is not an integer");
    assert_int_equal(int_of("-5x", 100, CSV_SIGN_FIRST, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"-5x\" is negative");
    assert_int_equal(int_of("999x", 100, 0, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"999x\" is not an integer");
    assert_int_equal(int_of("999x", 100, CSV_SIGN_FIRST, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"999x\" out of range 0..100");
    assert_int_equal(int_of("-99999999999999999999", 100, 0, &v, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:3: n \"-99999999999999999999\" is negative");
    /* a short buffer is cut, never overrun */
    assert_int_equal(int_of("", 100, 0, &v, err, 5), ALLOT_EINVAL);
    assert_string_equal(err, "t.cs");
}

static void test_decimal(void **state)
{
    struct csv_reader r;
    char err[128] = "";
    double d = 0;
    char none[1] = "";

    (void)state;
    csv_init(&r, none, 0, "t.csv", &fmt, err, sizeof(err));
    r.line = 2;
    assert_int_equal(csv_decimal(&r, "d", "12.5", 100, &d), 0);
    assert_true(d == 12.5);
    assert_int_equal(csv_decimal(&r, "d", "12.", 100, &d), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:2: d \"12.\" is not a decimal number");
    assert_int_equal(csv_decimal(&r, "d", "-1.5", 100, &d), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:2: d \"-1.5\" is negative");
    assert_int_equal(csv_decimal(&r, "d", "100.5", 100, &d), ALLOT_EINVAL);
    assert_string_equal(err, "t.csv:2: d \"100.5\" out of range 0..100");
}

static void test_quote(void **state)
{
    char qb[80], small[7];
    const char *q;

    (void)state;
    assert_string_equal(csv_quote(qb, sizeof(qb), "a\"b\\\xff"), "\"a\\x22b\\x5c\\xff\"");
    q = csv_quote(qb, sizeof(qb), "0123456789012345678901234567890123456789012");
    assert_string_equal(q, "\"0123456789012345678901234567890123456789...\"");
    assert_string_equal(csv_quote(small, sizeof(small), "x"), "");
}

static void test_files(void **state)
{
    char err[256] = "";
    char *text = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(csv_read_file(DATA "no-such.csv", 100, &text, &len, err, sizeof(err)),
                     ALLOT_EIO);
    assert_string_equal(err, DATA "no-such.csv: No such file or directory");
    assert_null(text);
    assert_int_equal(csv_read_file(DATA "vcs.csv", 10, &text, &len, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_string_equal(err, DATA "vcs.csv: larger than 10 bytes");
    assert_int_equal(csv_read_file(DATA "vcs.csv", 1 << 20, &text, &len, err, sizeof(err)), 0);
    assert_true(len > 10);
    assert_int_equal(text[len], '\0');
    assert_int_equal(strncmp(text, "vc,node num", 11), 0);
    allot_free(text);
    text = NULL;
    assert_int_equal(csv_copy_text("abcdef", 6, "buf", 5, &text, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "buf: larger than 5 bytes");
    assert_int_equal(csv_copy_text("abc", 3, "buf", 5, &text, err, sizeof(err)), 0);
    assert_string_equal(text, "abc");
    allot_free(text);
}

static void test_open(void **state)
{
    static const struct csv_col vc_cols[] = {{"vc", true}, {"node num", true}};
    static const struct csv_layout vc_layout = {vc_cols, 2, "vc,node num", "expected"};
    struct csv_reader r;
    char err[256] = "";
    int idx[3];

    (void)state;
    assert_int_equal(
        csv_open(&r, &fmt, &vc_layout, idx, DATA "vcs.csv", NULL, 0, NULL, err, sizeof(err)), 0);
    assert_string_equal(r.file, DATA "vcs.csv");
    assert_int_equal(idx[0], 0);
    assert_int_equal(csv_next(&r), 1);
    assert_int_equal(r.line, 2);
    allot_free(r.text);
    assert_int_equal(csv_open(&r, &fmt, &layout, idx, NULL, "a,b\n", 4, "mem", err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_string_equal(err, "mem:1: header but no data rows");
    assert_null(r.text);
    assert_int_equal(
        csv_open(&r, &fmt, &layout, idx, NULL, "a,b\n1,2\n3,4", 12, "mem", err, sizeof(err)), 0);
    assert_int_equal(idx[2], -1);
    assert_int_equal(csv_rows_left(&r), 2);
    allot_free(r.text);
}

/* Failing the Nth allocation for every N gives ENOMEM, a message and no leak. */
static void test_alloc_failures(void **state)
{
    (void)state;
    for (unsigned long n = 1;; n++) {
        char err[256] = "";
        char *text = NULL;
        size_t len = 0;
        int rc;

        allot_alloc_fail_at(n, false);
        rc = csv_read_file(DATA "jobs.csv", 1 << 20, &text, &len, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            allot_free(text);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_string_equal(err, DATA "jobs.csv: out of memory");
        assert_null(text);
        assert_true(n < 100);
    }
    for (unsigned long n = 1;; n++) {
        struct csv_reader r;
        char err[64] = "";
        int idx[3];
        char *rows = NULL;
        int rc;

        allot_alloc_fail_at(n, false);
        rc = csv_open(&r, &fmt, &layout, idx, NULL, "a,b\n1,2\n", 8, "buf", err, sizeof(err));
        if (rc == 0) {
            rows = csv_alloc_rows(&r, sizeof(int64_t), NULL);
            allot_free(r.text); /* the caller's once csv_open() succeeds */
            rc = rows ? 0 : ALLOT_ENOMEM;
        }
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            allot_free(rows);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_string_equal(err, "buf: out of memory");
        assert_true(n < 100);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),          cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_nul_byte),       cmocka_unit_test(test_trailing_blank),
        cmocka_unit_test(test_header),         cmocka_unit_test(test_int),
        cmocka_unit_test(test_decimal),        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_files),          cmocka_unit_test(test_open),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
