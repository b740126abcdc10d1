/*
 * Unit tests of the common layer (src/common/common.c): error texts, the
 * PRNG, the failable allocation wrapper (one-shot and sticky), allot_grow,
 * bounded string helpers, the strict number parser and the log callback.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/common.h"

#include <string.h>

static void test_common(void **state)
{
    struct allot_rng a, b;
    void *p;
    int *arr = NULL;
    size_t cap = 0;
    char buf[4];

    assert_string_equal(allot_strerror(ALLOT_ENOSPC), "no capacity for the request");
    assert_string_equal(allot_strerror(-999), "unknown error");
    allot_rng_seed(&a, 5);
    allot_rng_seed(&b, 5);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(allot_rng_next(&a), allot_rng_next(&b));
        assert_true(allot_rng_below(&a, 7) < 7);
        (void)allot_rng_below(&b, 7);
    }
    allot_alloc_fail_at(2, false);
    p = allot_malloc(8);
    assert_non_null(p);
    assert_null(allot_malloc(8)); /* the 2nd fails */
    allot_free(p);
    p = allot_malloc(8); /* one-shot: the 3rd works */
    assert_non_null(p);
    allot_free(p);
    allot_alloc_fail_at(1, true);
    assert_int_equal(allot_grow((void **)&arr, &cap, 10, sizeof(int)), ALLOT_ENOMEM);
    assert_null(arr);
    allot_alloc_fail_at(0, false);
    assert_int_equal(allot_grow((void **)&arr, &cap, 10, sizeof(int)), 0);
    assert_true(cap >= 10);
    allot_free(arr);
    assert_int_equal(allot_strlcpy(buf, "abcdef", sizeof(buf)), 6);
    assert_string_equal(buf, "abc");
    assert_int_equal(allot_fmt(buf, sizeof(buf), "%d", 12345), 5);
    assert_string_equal(buf, "123");
}

static char last_msg[128];
static int calls;

static void sink(enum allot_log_level level, const char *subsys, const char *msg, void *ud)
{
    calls++;
    allot_fmt(last_msg, sizeof(last_msg), "%s:%s", subsys, msg);
}

static void test_log(void **state)
{
    allot_log_set(sink, NULL, ALLOT_LOG_INFO);
    ALLOT_LOG(ALLOT_LOG_DEBUG, "core", "hidden %d", 1);
    assert_int_equal(calls, 0);
    ALLOT_LOG(ALLOT_LOG_WARN, "core", "shown %d", 2);
    assert_int_equal(calls, 1);
    assert_string_equal(last_msg, "core:shown 2");
    allot_log_set(NULL, NULL, ALLOT_LOG_DEBUG);
    assert_false(allot_log_enabled(ALLOT_LOG_ERROR));
}

/* Edge cases that were undefined behaviour: a modulus of zero, and a
 * capacity that would wrap around when doubled or multiplied. */
static void test_edges(void **state)
{
    struct allot_rng r;
    char *arr = NULL;
    size_t cap = 0;
    int *ints = NULL;
    size_t icap = 0;

    (void)state;
    allot_rng_seed(&r, 1);
    assert_int_equal(allot_rng_below(&r, 0), 0);
    assert_int_equal(allot_rng_below(&r, 1), 0);
    /* elements whose total size overflows size_t: refused, nothing changes */
    assert_int_equal(allot_grow((void **)&ints, &icap, SIZE_MAX / 2, sizeof(int)), ALLOT_ENOMEM);
    assert_null(ints);
    assert_int_equal(icap, 0);
    /* a capacity past half the range must not double into a wrap: with
     * cap already huge (fake, never dereferenced) the capacity becomes
     * exactly `need` and one allocation is attempted (made to fail here),
     * instead of looping or shrinking */
    cap = SIZE_MAX / 2 + 2;
    allot_alloc_fail_at(1, false); /* the allocator is never really asked */
    assert_int_equal(allot_grow((void **)&arr, &cap, SIZE_MAX - 1, 1), ALLOT_ENOMEM);
    assert_int_equal(allot_alloc_count(), 1); /* one attempt: no wrap, no loop */
    allot_alloc_fail_at(0, false);
    assert_int_equal(cap, SIZE_MAX / 2 + 2);
    assert_null(arr);
    assert_int_equal(allot_grow((void **)&arr, &cap, 3, 1), 0); /* already big enough */
}

/* allot_parse_num: digits only, no overflow, in range; *out untouched on a refusal. */
static void test_parse_num(void **state)
{
    static const char *const bad[] = {"",
                                      "abc",
                                      "12x",
                                      "x12",
                                      " 1",
                                      "1 ",
                                      "+1",
                                      "-1",
                                      "0x10",
                                      "1e3",
                                      "1.5",
                                      "9223372036854775808",
                                      "99999999999999999999",
                                      "18446744073709551617"};
    int64_t v = 0;

    (void)state;
    assert_true(allot_parse_num("0", 0, 10, &v));
    assert_int_equal(v, 0);
    assert_true(allot_parse_num("42", 0, 100, &v));
    assert_int_equal(v, 42);
    assert_true(allot_parse_num("007", 0, 100, &v)); /* leading zeros are digits */
    assert_int_equal(v, 7);
    assert_true(allot_parse_num("9223372036854775807", 0, INT64_MAX, &v));
    assert_true(v == INT64_MAX);
    assert_true(allot_parse_num("00000000000000000000001", 1, 1, &v)); /* long, small */
    assert_int_equal(v, 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = -7;
        assert_false(allot_parse_num(bad[i], INT64_MIN, INT64_MAX, &v));
        assert_int_equal(v, -7);
    }
    v = -7;
    assert_false(allot_parse_num(NULL, 0, 10, &v));
    assert_false(allot_parse_num("0", 1, 10, &v));  /* below lo */
    assert_false(allot_parse_num("11", 1, 10, &v)); /* above hi */
    assert_int_equal(v, -7);
}

/* allot_argv_hide overwrites an option's value in place, and only its. */
static void test_argv_hide(void **state)
{
    char a0[] = "agent", a1[] = "--token", a2[] = "allot_secret", a3[] = "--token=other",
         a4[] = "--token-file", a5[] = "/f", a6[] = "--", a7[] = "--token", a8[] = "kept";
    char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8};

    assert_int_equal(allot_argv_hide(9, argv, "--token"), 2);
    assert_string_equal(a2, "************");
    assert_string_equal(a3, "--token=*****");
    assert_string_equal(a5, "/f");                            /* another option */
    assert_string_equal(a8, "kept");                          /* after -- */
    assert_int_equal(allot_argv_hide(2, argv, "--token"), 0); /* no value */
}

/* FNV-1a's known values: veth names, tenant uids and emulated UUIDs come
 * from it and must not change across upgrades. */
static void test_fnv1a(void **state)
{
    assert_true(allot_fnv1a(ALLOT_FNV1A_INIT, "", 0) == ALLOT_FNV1A_INIT);
    assert_true(allot_fnv1a(ALLOT_FNV1A_INIT, "a", 1) == 0xaf63dc4c8601ec8cULL);
    assert_true(allot_fnv1a(ALLOT_FNV1A_INIT, "research/nlp", 12) == 0xa5065eeb2e8562f1ULL);
    /* a running hash goes on where it left off */
    assert_true(allot_fnv1a(allot_fnv1a(ALLOT_FNV1A_INIT, "research/", 9), "nlp", 3) ==
                0xa5065eeb2e8562f1ULL);
}

/* ALLOT_ALWAYS / ALLOT_NEVER evaluate to their condition and count breaches. */
static void test_invariants(void **state)
{
    unsigned long before = allot_invariant_breaches();

    (void)state;
    allot_invariants_fatal(false);
    assert_true(ALLOT_ALWAYS(1 + 1 == 2));
    assert_false(ALLOT_NEVER(1 + 1 == 3));
    assert_int_equal(allot_invariant_breaches(), before);
    assert_false(ALLOT_ALWAYS(1 + 1 == 3));
    assert_true(ALLOT_NEVER(1 + 1 == 2));
    assert_int_equal(allot_invariant_breaches(), before + 2);
    allot_invariants_fatal(true);
}

/* Several allotd (docs/ha.md): the clients' server list and the leader a
 * standby names. */
static void test_servers(void **state)
{
    char **u = NULL, out[64];
    int n = 0;

    (void)state;
    assert_int_equal(allot_server_list("127.0.0.1:7070,https://b.example:7070//", &u, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(u[0], "http://127.0.0.1:7070");
    assert_string_equal(u[1], "https://b.example:7070");
    allot_server_list_free(u, n);
    assert_int_equal(allot_server_list("http://a", &u, &n), 0);
    assert_int_equal(n, 1);
    allot_server_list_free(u, n);
    {
        static const char *const bad[] = {"", "a,,b", ",a", "ftp://a", "http://a,gopher://b"};

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            u = (char **)&n; /* not NULL: a refusal must set it */
            assert_int_equal(allot_server_list(bad[i], &u, &n), ALLOT_EINVAL);
            assert_null(u);
            assert_int_equal(n, 0);
        }
    }
    allot_server_list_free(NULL, 0);

    assert_true(allot_leader_url("http://a", "http://b:7070/", out, sizeof out));
    assert_string_equal(out, "http://b:7070");
    assert_true(allot_leader_url("http://a", "https://b", out, sizeof out));
    assert_true(allot_leader_url("https://a", "https://b", out, sizeof out));
    /* never from https to http: the token would travel in the clear */
    assert_false(allot_leader_url("https://a", "http://b", out, sizeof out));
    assert_false(allot_leader_url("http://a", "ftp://b", out, sizeof out));
    assert_false(allot_leader_url("http://a", "http://b c", out, sizeof out));
    assert_false(allot_leader_url("http://a", NULL, out, sizeof out));
    assert_false(allot_leader_url("http://a",
                                  "http://a-name-far-too-long-for-the-buffer-it-is-"
                                  "given-here.example:7070",
                                  out, sizeof out));
}

static const char *test_name(const void *ctx, int i)
{
    return ((char(*)[16])ctx)[i];
}

/* The name index: every name found at its position, others not, through
 * growth, a rebuild after the array lost names, and failed allocations
 * that leave it as it was. */
static void test_index(void **state)
{
    static char names[10000][16];
    struct allot_index x = {0};

    (void)state;
    assert_int_equal(allot_index_find(&x, "n0", test_name, names), -1); /* empty */
    for (int i = 0; i < 10000; i++) {
        allot_fmt(names[i], sizeof(names[i]), "n%d", i);
        assert_int_equal(allot_index_add(&x, i, test_name, names), 0);
    }
    assert_int_equal((int)x.n, 10000);
    assert_true(x.cap >= 20000 && (x.cap & (x.cap - 1)) == 0);
    for (int i = 0; i < 10000; i += 7)
        assert_int_equal(allot_index_find(&x, names[i], test_name, names), i);
    assert_int_equal(allot_index_find(&x, "n10000", test_name, names), -1);
    assert_int_equal(allot_index_find(&x, "", test_name, names), -1);
    /* the array keeps its first 100 */
    assert_int_equal(allot_index_rebuild(&x, 100, test_name, names), 0);
    assert_int_equal((int)x.n, 100);
    assert_int_equal(allot_index_find(&x, "n99", test_name, names), 99);
    assert_int_equal(allot_index_find(&x, "n100", test_name, names), -1);
    /* a reserve makes room (half the slots at most are used): the adds
     * after it allocate nothing until that room is gone */
    assert_int_equal(allot_index_reserve(&x, 400, test_name, names), 0);
    int room = (int)x.cap / 2;
    assert_true(room >= 400);
    allot_alloc_fail_at(1, true);
    for (int i = 100; i < room; i++)
        assert_int_equal(allot_index_add(&x, i, test_name, names), 0);
    assert_int_equal(allot_index_add(&x, room, test_name, names), ALLOT_ENOMEM);
    allot_alloc_fail_at(0, false);
    assert_int_equal((int)x.n, room);
    assert_int_equal(allot_index_find(&x, names[room - 1], test_name, names), room - 1);
    assert_int_equal(allot_index_find(&x, names[room], test_name, names), -1);
    allot_alloc_fail_at(1, true);
    assert_int_equal(allot_index_rebuild(&x, 10, test_name, names), ALLOT_ENOMEM);
    allot_alloc_fail_at(0, false);
    assert_int_equal(allot_index_find(&x, "n399", test_name, names), 399); /* unchanged */
    assert_int_equal((int)x.n, room);
    /* positions taken out, one in three: the others are still found
     * (their probes ran past the emptied slots), and a prefix is found
     * by its length */
    for (int i = 0; i < room; i += 3)
        allot_index_remove(&x, i, test_name, names);
    allot_index_remove(&x, 0, test_name, names); /* not held: nothing */
    for (int i = 0; i < room; i++)
        assert_int_equal(allot_index_find(&x, names[i], test_name, names), i % 3 ? i : -1);
    assert_int_equal((int)x.n, room - (room + 2) / 3);
    assert_int_equal(allot_index_find_n(&x, "n10xyz", 3, test_name, names), 10);
    assert_int_equal(allot_index_find_n(&x, "n10", 2, test_name, names), 1);
    assert_int_equal(allot_index_find_n(&x, "n10", 1, test_name, names), -1);
    allot_index_free(&x);
    assert_int_equal(allot_index_find(&x, "n1", test_name, names), -1);
    allot_index_remove(&x, 1, test_name, names); /* empty: nothing */
    allot_index_free(&x);
}

/* An agent's log URL: a base another path may be appended to, nothing
 * that would turn the appended path into something else. */
static void test_url_base(void **state)
{
    static const char *const good[] = {"http://n1:7071", "https://n1.example:7071/base",
                                       "http://[::1]:7071", "http://10.0.0.1"};
    static const char *const bad[] = {"",
                                      "ftp://n1",
                                      "http://",
                                      "http:///x",
                                      "http://n1/x?",
                                      "http://n1/x#y",
                                      "http://u@n1",
                                      "http://n1\\x",
                                      "http://n1 x",
                                      "http://n1\tx",
                                      "http://n1\x7f",
                                      "n1:7071"};
    char longer[300];

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_true(allot_url_base_ok(good[i]));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(allot_url_base_ok(bad[i]));
    memcpy(longer, "http://", 7);
    memset(longer + 7, 'a', sizeof(longer) - 8);
    longer[sizeof(longer) - 1] = '\0';
    assert_false(allot_url_base_ok(longer)); /* over 256 bytes */
    longer[256] = '\0';
    assert_true(allot_url_base_ok(longer));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common),    cmocka_unit_test(test_edges),
        cmocka_unit_test(test_parse_num), cmocka_unit_test(test_invariants),
        cmocka_unit_test(test_argv_hide), cmocka_unit_test(test_log),
        cmocka_unit_test(test_fnv1a),     cmocka_unit_test(test_servers),
        cmocka_unit_test(test_index),     cmocka_unit_test(test_url_base),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
