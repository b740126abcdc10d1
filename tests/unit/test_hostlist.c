/*
 * Unit tests of Slurm-style host lists (src/common/hostlist.c): names,
 * ranges with and without padding, groups and their product, duplicates,
 * every refusal with its message, the size limit, and a fault loop over
 * every allocation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/common.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Expands s and checks the names, joined by spaces, against want. */
static void expands_to(const char *s, const char *want)
{
    char **names = (char **)1, err[160] = "x", got[4096] = "";
    size_t len = 0;
    int n = -1;

    assert_int_equal(allot_hostlist_expand(s, &names, &n, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    for (int i = 0; i < n; i++)
        len += (size_t)allot_fmt(got + len, sizeof(got) - len, "%s%s", i ? " " : "", names[i]);
    assert_string_equal(got, want);
    allot_hostlist_free(names, n);
}

/* Expands s, expecting ALLOT_EINVAL, nothing returned, and err holding
 * both `what` and `quote`. */
static void refused(const char *s, const char *what, const char *quote)
{
    char **names = (char **)1, err[160] = "";
    int n = -1;

    assert_int_equal(allot_hostlist_expand(s, &names, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_null(names);
    assert_int_equal(n, 0);
    if (!strstr(err, what) || !strstr(err, quote))
        fail_msg("\"%s\": message \"%s\" lacks \"%s\" or \"%s\"", s, err, what, quote);
    assert_null(strchr(err, '\n'));
}

static void test_plain(void **state)
{
    (void)state;
    expands_to("gpu1", "gpu1");
    expands_to("gpu1,cpu-a,n.b_c", "gpu1 cpu-a n.b_c");
    expands_to("1", "1");
    expands_to("-", "-");
}

static void test_ranges(void **state)
{
    (void)state;
    expands_to("n[1-3]", "n1 n2 n3");
    expands_to("gpu[01-04,07]", "gpu01 gpu02 gpu03 gpu04 gpu07");
    expands_to("gpu[08-10]", "gpu08 gpu09 gpu10");
    expands_to("n[8-11]", "n8 n9 n10 n11");
    expands_to("n[007]", "n007");
    expands_to("n[0-2]", "n0 n1 n2");
    expands_to("n[00-1]", "n00 n01");
    expands_to("n[1-010]x", "n1x n2x n3x n4x n5x n6x n7x n8x n9x n10x"); /* HI pads nothing */
    expands_to("n[3,1,2]", "n3 n1 n2");
    expands_to("n[5-5]", "n5");
    expands_to("[1-2]", "1 2");
    expands_to("n[999999998-999999999]", "n999999998 n999999999");
}

static void test_product(void **state)
{
    (void)state;
    expands_to("rack[1-2]-n[1-2]", "rack1-n1 rack1-n2 rack2-n1 rack2-n2");
    expands_to("a[1,3]b[01-02]c", "a1b01c a1b02c a3b01c a3b02c");
    expands_to("gpu[01-02,07],cpu-a,rack[1-2]-n[1-2]",
               "gpu01 gpu02 gpu07 cpu-a rack1-n1 rack1-n2 rack2-n1 rack2-n2");
    expands_to("[1][2][3]", "123");
}

static void test_duplicates(void **state)
{
    (void)state;
    expands_to("a,b,a", "a b");
    expands_to("n[1-3],n2,n[2-4]", "n1 n2 n3 n4");
    expands_to("n[1,1,1]", "n1");
    expands_to("n[01],n1", "n01 n1"); /* different names */
    expands_to("n[1-2][1-2],n11", "n11 n12 n21 n22");
}

static void test_errors(void **state)
{
    char name63[80], name64[80], **names;
    int n;

    (void)state;
    refused("", "empty host list", "");
    refused(NULL, "empty host list", "");
    assert_int_equal(allot_hostlist_expand("n[", &names, &n, NULL, 0), ALLOT_EINVAL); /* no err */
    assert_null(names);
    refused("a,,b", "empty item", "byte 2");
    refused("a,", "empty item", "byte 2");
    refused(",a", "empty item", "byte 0");
    refused(",", "empty item", "");
    refused("n[1-2", "unbalanced", "\"n[1-2\"");
    refused("n[1,2,b", "unbalanced", "\"n[1,2,b\"");
    refused("n1-2]", "unbalanced", "\"n1-2]\"");
    refused("a,n]1,b", "unbalanced", "\"n]1\"");
    refused("n[1[2]]", "nested", "\"n[1[2]]\"");
    refused("gpu[]", "empty group", "\"gpu[]\"");
    refused("n[5-3]", "HI < LO", "\"5-3\"");
    refused("n[10-9]", "HI < LO", "\"10-9\"");
    refused("n[a]", "non-digit 'a'", "\"n[a]\"");
    refused("n[1-x]", "non-digit 'x'", "\"n[1-x]\"");
    refused("n[1.5]", "non-digit '.'", "");
    refused("n[1,]", "missing number", "\"n[1,]\"");
    refused("n[,1]", "missing number", "");
    refused("n[1-]", "missing number", "");
    refused("n[-1]", "missing number", "");
    refused("n[1-2-3]", "malformed range", "\"1-2-\"");
    refused("n[1234567890]", "over 9 digits", "\"n[1234567890]\"");
    refused("n[1-1234567890]", "over 9 digits", "");
    refused("n[0000000001]", "over 9 digits", ""); /* digits, not value */
    refused("gpu/1", "bad character '/'", "\"gpu/1\"");
    refused("a,gpu:1", "bad character ':'", "\"gpu:1\"");
    refused("n\x01", "bad character '?'", "\"n?\""); /* control byte quoted as '?' */
    refused("a b", "white space", "");
    refused("a, b", "white space", "");
    refused("a\t", "white space", "");
    refused("n[1, 2]", "white space", "");
    refused("n[1-2]\n", "white space", "");
    memset(name63, 'a', 63);
    name63[63] = '\0';
    expands_to(name63, name63);
    memset(name64, 'a', 64);
    name64[64] = '\0';
    refused(name64, "over 63 bytes", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"");
}

/* Names of up to 63 bytes pass, 64 fail, also when a padded group makes
 * them so. */
static void test_name_length(void **state)
{
    char s[100], **v;
    int n;

    (void)state;
    memset(s, 'a', 60);
    memcpy(s + 60, "[998-999]", 10); /* 63 bytes */
    assert_int_equal(allot_hostlist_expand(s, &v, &n, NULL, 0), 0);
    assert_int_equal(n, 2);
    assert_int_equal(strlen(v[1]), 63);
    allot_hostlist_free(v, n);
    memcpy(s + 60, "[999-1000]", 11); /* the last would be 64 */
    refused(s, "over 63 bytes", "");
    memcpy(s + 60, "[0001]", 7); /* padded to 4: 64 */
    refused(s, "over 63 bytes", "");
    memcpy(s + 60, "[001]", 6); /* padded to 3: 63 */
    assert_int_equal(allot_hostlist_expand(s, &v, &n, NULL, 0), 0);
    allot_hostlist_free(v, n);
}

/* ALLOT_HOSTLIST_MAX names pass; one more, counted before duplicates go,
 * is refused; a huge range is refused at once, without allocating. */
static void test_limit(void **state)
{
    char s[64], **v;
    int n;
    clock_t t0;

    (void)state;
    allot_fmt(s, sizeof(s), "n[1-%d]", ALLOT_HOSTLIST_MAX);
    assert_int_equal(allot_hostlist_expand(s, &v, &n, NULL, 0), 0);
    assert_int_equal(n, ALLOT_HOSTLIST_MAX);
    assert_string_equal(v[ALLOT_HOSTLIST_MAX - 1], "n4096");
    allot_hostlist_free(v, n);
    allot_fmt(s, sizeof(s), "n[1-%d]", ALLOT_HOSTLIST_MAX + 1);
    refused(s, "more than 4096 names", s);
    allot_fmt(s, sizeof(s), "n[1-%d],a", ALLOT_HOSTLIST_MAX);
    refused(s, "more than 4096 names", "\"a\"");
    allot_fmt(s, sizeof(s), "n[1-%d],n1", ALLOT_HOSTLIST_MAX);
    refused(s, "more than 4096 names", "\"n1\"");
    refused("a[1-64]b[1-64]c[1-2]", "more than 4096 names", ""); /* 8192 */
    assert_int_equal(allot_hostlist_expand("a[1-64]b[1-64]", &v, &n, NULL, 0), 0);
    assert_int_equal(n, 4096);
    allot_hostlist_free(v, n);
    t0 = clock();
    allot_alloc_fail_at(1, true); /* any allocation would fail the test */
    refused("n[0-999999999]", "more than 4096 names", "");
    refused("n[0-999999999][0-999999999][0-999999999][0-999999999]", "more than", "");
    refused("n[0-999999999,0-999999999,0-999999999,0-999999999,0-999999999]", "more than", "");
    assert_int_equal(allot_alloc_count(), 0);
    allot_alloc_fail_at(0, false);
    assert_true(clock() - t0 < CLOCKS_PER_SEC / 10);
}

/* Fails the k-th allocation for k = 1, 2, ... until the expansion works,
 * once only and from k on: each failure is ALLOT_ENOMEM with nothing
 * returned (LeakSanitizer finds what is left). The allocations are the
 * array, the index and one per distinct name. */
static void test_alloc_fail(void **state)
{
    static const struct {
        const char *list;
        unsigned long allocs;
    } cases[] = {{"a", 3}, {"gpu[01-04,07],cpu-a,rack[1-2]-n[1-2],gpu02", 12}, {"n[1-200]", 202}};
    char **v, err[160];
    int n, rc;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int sticky = 0; sticky < 2; sticky++) {
            unsigned long k;

            for (k = 1;; k++) {
                allot_alloc_fail_at(k, sticky);
                rc = allot_hostlist_expand(cases[i].list, &v, &n, err, sizeof(err));
                if (rc == 0)
                    break;
                assert_int_equal(rc, ALLOT_ENOMEM);
                assert_null(v);
                assert_int_equal(n, 0);
                assert_true(err[0] != '\0');
            }
            allot_alloc_fail_at(0, false);
            assert_int_equal(k - 1, cases[i].allocs);
            allot_hostlist_free(v, n);
        }
    }
    allot_hostlist_free(NULL, 0);
}

/* compress(names) reads as Slurm's short form, and expands back to the
 * same names; a short buffer is cut and told the length needed. */
static void test_compress(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"gpu[01-04,07],cpu1", "gpu[01-04,07],cpu1"},
        {"n9,n10,n11,n13", "n[9-11,13]"},
        {"s[0001-0100]", "s[0001-0100]"},
        {"a,b,c", "a,b,c"},
        {"x08,x09,x10,x1", "x[08-10],x1"},
        {"r1-n1,r1-n2,r2-n1", "r1-n[1-2],r2-n1"},
        {"n5", "n5"},
        {"n3,n1,n2", "n[3,1-2]"},
    };
    char buf[256], small[8], err[128];

    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char **names, **back;
        int n, m;
        assert_int_equal(allot_hostlist_expand(cases[c].in, &names, &n, err, sizeof(err)), 0);
        size_t need = allot_hostlist_compress((const char *const *)names, n, buf, sizeof(buf));
        assert_string_equal(buf, cases[c].out);
        assert_int_equal(need, strlen(cases[c].out));
        assert_int_equal(allot_hostlist_expand(buf, &back, &m, err, sizeof(err)), 0);
        assert_int_equal(m, n);
        for (int i = 0; i < n; i++)
            assert_string_equal(back[i], names[i]);
        assert_int_equal(
            allot_hostlist_compress((const char *const *)names, n, small, sizeof(small)), need);
        assert_int_equal(strlen(small), need < sizeof(small) ? need : sizeof(small) - 1);
        allot_hostlist_free(names, n);
        allot_hostlist_free(back, m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),    cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_product),  cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_errors),   cmocka_unit_test(test_name_length),
        cmocka_unit_test(test_limit),    cmocka_unit_test(test_alloc_fail),
        cmocka_unit_test(test_compress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
