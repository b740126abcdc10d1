/*
 * Unit tests of the tenant tree (src/core/tenant.c): paths, quota
 * arithmetic over a tree (nominal, borrow and lend limits, cohorts),
 * in-nominal checks, charging, fair-share keys and history decay, and
 * building a tree with every allocation failing in turn.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/common.h"
#include "allot/tenant.h"

#include <string.h>

#include "catalog_fixture.h"

static struct allot_resvec gpus(int n)
{
    struct allot_resvec r;

    memset(&r, 0, sizeof(r));
    r.v[ALLOT_RES_GPU] = (int64_t)n * 1000;
    return r;
}

static void set_gpu(struct allot_tenants *t, int i, int nominal, int64_t borrow, int64_t lend)
{
    struct allot_quota q = {.nominal = (int64_t)nominal * 1000,
                            .borrow_limit = borrow == ALLOT_UNLIMITED ? borrow : borrow * 1000,
                            .lend_limit = lend == ALLOT_UNLIMITED ? lend : lend * 1000};
    assert_int_equal(allot_tenants_set_quota(t, i, ALLOT_RES_GPU, q), 0);
}

static void test_paths(void **state)
{
    struct allot_tenants *t = allot_tenants_new(cat);
    char err[128];
    int a = allot_tenants_add(t, "ml/vision", err, sizeof(err));

    assert_true(a > 0);
    assert_int_equal(allot_tenants_count(t), 3); /* root, ml, ml/vision */
    assert_int_equal(allot_tenants_find(t, "ml/vision"), a);
    assert_string_equal(allot_tenants_get(t, a)->name, "vision");
    assert_int_equal(allot_tenants_get(t, a)->depth, 2);
    assert_int_equal(allot_tenants_add(t, "ml/vision", err, sizeof(err)), ALLOT_EEXIST);
    assert_int_equal(allot_tenants_add(t, "ml//x", err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "empty path element"));
    assert_int_equal(allot_tenants_add(t, "ml/x y", err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "not allowed"));
    assert_int_equal(allot_tenants_add(t, "", err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(
        allot_tenants_set_quota(t, a, ALLOT_RES_GPU, (struct allot_quota){.nominal = -1}),
        ALLOT_EINVAL);
    /* thousands of tenants (an index finds each by its path) */
    for (int i = 0; i < 5000; i++) {
        char p[32];

        allot_fmt(p, sizeof(p), "org%d/team%d", i % 50, i);
        assert_true(allot_tenants_add(t, p, err, sizeof(err)) > 0);
    }
    assert_int_equal(allot_tenants_count(t), 3 + 50 + 5000);
    assert_int_equal(allot_tenants_get(t, allot_tenants_find(t, "org7/team4957"))->depth, 2);
    assert_int_equal(allot_tenants_find(t, "org7/team4958"), -1); /* under org8 */
    assert_int_equal(allot_tenants_find(t, "ml/vision"), a);
    assert_int_equal(allot_tenants_find(t, ""), 0);
    allot_tenants_free(t);
}

/* Two teams of 8 GPUs under one org of 16, a third org of 8: cluster 24. */
static void test_borrow_and_lend(void **state)
{
    struct allot_tenants *t = allot_tenants_new(cat);
    char err[128];
    int a = allot_tenants_add(t, "org/a", err, sizeof(err));
    int b = allot_tenants_add(t, "org/b", err, sizeof(err));
    int c = allot_tenants_add(t, "other/c", err, sizeof(err));
    struct allot_resvec r;
    int who, res;

    set_gpu(t, a, 8, 4, ALLOT_UNLIMITED); /* may borrow 4 */
    set_gpu(t, b, 8, ALLOT_UNLIMITED, 2); /* lends at most 2 of its 8 */
    set_gpu(t, c, 8, 0, ALLOT_UNLIMITED); /* never borrows */
    allot_tenants_fill_nominal(t);
    /* the org as a whole never borrows from outside */
    set_gpu(t, allot_tenants_find(t, "org"), 16, 0, ALLOT_UNLIMITED);
    assert_int_equal(allot_tenants_get(t, allot_tenants_find(t, "org"))->quota[0].nominal, 16000);
    assert_int_equal(allot_tenants_get(t, 0)->quota[0].nominal, 24000);

    /* a: 8 in nominal */
    r = gpus(8);
    assert_true(allot_tenants_in_nominal(t, a, &r));
    assert_true(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    allot_tenants_charge(t, a, &r, +1);
    /* a: 2 more is borrowing; b lends only 2 of its unused 8 (6 reserved) */
    r = gpus(2);
    assert_false(allot_tenants_in_nominal(t, a, &r));
    assert_true(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    /* 3 more would eat into b's unlendable 6: org level blocks */
    r = gpus(3);
    assert_false(allot_tenants_admits(t, a, &r, true, &who, &res));
    assert_int_equal(who, allot_tenants_find(t, "org"));
    assert_int_equal(res, ALLOT_RES_GPU);
    /* without borrowing, a is at nominal */
    r = gpus(1);
    assert_false(allot_tenants_admits(t, a, &r, false, &who, NULL));
    assert_int_equal(who, a);
    /* b uses 4: now only 4 of its nominal are unused and 2 lendable -> a may take 2 */
    r = gpus(4);
    allot_tenants_charge(t, b, &r, +1);
    r = gpus(2);
    assert_true(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    r = gpus(3);
    assert_false(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    /* c never borrows even with the cluster idle */
    r = gpus(9);
    assert_false(allot_tenants_admits(t, c, &r, true, &who, NULL));
    assert_int_equal(who, c);
    /* a's borrow limit of 4: with b idle and lending everything, and the org
     * free to borrow c's idle GPUs, a stops at 12 */
    r = gpus(4);
    allot_tenants_charge(t, b, &r, -1);
    set_gpu(t, b, 8, ALLOT_UNLIMITED, ALLOT_UNLIMITED);
    set_gpu(t, allot_tenants_find(t, "org"), 16, ALLOT_UNLIMITED, ALLOT_UNLIMITED);
    r = gpus(4);
    assert_true(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    r = gpus(5);
    assert_false(allot_tenants_admits(t, a, &r, true, &who, NULL));
    assert_int_equal(who, a);
    /* charging reaches every ancestor */
    assert_int_equal(allot_tenants_get(t, 0)->usage[ALLOT_RES_GPU], 8000);
    allot_tenants_free(t);
}

static void test_fair_share(void **state)
{
    struct allot_tenants *t = allot_tenants_new(cat);
    char err[128];
    int a = allot_tenants_add(t, "a", err, sizeof(err));
    int b = allot_tenants_add(t, "b", err, sizeof(err));
    struct allot_resvec cap = gpus(10), r = gpus(4);
    double before;

    allot_tenants_get(t, b)->weight = 2.0;
    allot_tenants_charge(t, a, &r, +1);
    allot_tenants_charge(t, b, &r, +1);
    /* same usage, b weighs twice: half the share */
    assert_true(allot_tenants_share(t, a, &cap) > 0.399 && allot_tenants_share(t, a, &cap) < 0.401);
    assert_true(allot_tenants_share(t, b, &cap) > 0.199 && allot_tenants_share(t, b, &cap) < 0.201);
    assert_true(allot_tenants_fair_key(t, b, &cap) < allot_tenants_fair_key(t, a, &cap));
    /* history grows with use and decays by half each half-life */
    allot_tenants_advance(t, 100, 100.0, &cap);
    before = allot_tenants_get(t, a)->history;
    assert_true(before > 0);
    r = gpus(4);
    allot_tenants_charge(t, a, &r, -1);
    allot_tenants_advance(t, 200, 100.0, &cap);
    assert_true(allot_tenants_get(t, a)->history > before * 0.499 &&
                allot_tenants_get(t, a)->history < before * 0.501);
    allot_tenants_free(t);
}

/* Lending hold: what a tenant used recently is not lent at once. */
static void test_lending_hold(void **state)
{
    struct allot_tenants *t = allot_tenants_new(cat);
    char err[128];
    int a = allot_tenants_add(t, "a", err, sizeof(err));
    int b = allot_tenants_add(t, "b", err, sizeof(err));
    struct allot_resvec cap = gpus(16), r = gpus(8);

    set_gpu(t, a, 8, ALLOT_UNLIMITED, ALLOT_UNLIMITED);
    set_gpu(t, b, 8, ALLOT_UNLIMITED, ALLOT_UNLIMITED);
    allot_tenants_fill_nominal(t);
    allot_tenants_set_hold(t, 3600);
    /* b used all 8, then finished; a holds its 8 and asks for 4 more */
    allot_tenants_charge(t, b, &r, +1);
    allot_tenants_charge(t, b, &r, -1);
    allot_tenants_charge(t, a, &r, +1);
    r = gpus(4);
    assert_false(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    /* what the refusal's reason reports: b keeps 8 from a at the root */
    assert_int_equal(allot_tenants_withheld(t, a, 0, ALLOT_RES_GPU), 8 * 1000);
    assert_int_equal(allot_tenants_withheld(t, a, a, ALLOT_RES_GPU), 0);
    assert_int_equal(allot_tenants_withheld(t, b, 0, ALLOT_RES_GPU), 0);
    assert_int_equal(allot_tenants_withheld(t, a, b, ALLOT_RES_GPU), 0); /* not on a's path */
    /* two half-lives later b's peak has decayed to 2: 6 GPUs are lendable */
    allot_tenants_advance(t, 7200, 86400, &cap);
    assert_int_equal(allot_tenants_withheld(t, a, 0, ALLOT_RES_GPU), 2 * 1000);
    assert_true(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    r = gpus(7);
    assert_false(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    /* b itself is never held back by its own hold */
    r = gpus(8);
    assert_true(allot_tenants_admits(t, b, &r, true, NULL, NULL));
    /* without the hold everything unused is lendable */
    allot_tenants_set_hold(t, 0);
    assert_true(allot_tenants_admits(t, a, &r, true, NULL, NULL));
    allot_tenants_free(t);
}

/* A tenant without a GPU quota makes the root's sum unlimited; what
 * another keeps unlent (lend_limit 0) is still held back, against the
 * cluster's capacity. */
static void test_lend_limit_with_unlimited_root(void **state)
{
    struct allot_tenants *t = allot_tenants_new(cat);
    char err[128];
    int serve = allot_tenants_add(t, "serve/x", err, sizeof(err));
    int batch = allot_tenants_add(t, "batch/y", err, sizeof(err));
    struct allot_resvec cap = gpus(8), four = gpus(4), one = gpus(1);
    int who = -1;

    (void)state;
    assert_true(allot_tenants_add(t, "cpuonly/z", err, sizeof(err)) > 0);
    set_gpu(t, serve, 4, ALLOT_UNLIMITED, 0);
    set_gpu(t, batch, 4, ALLOT_UNLIMITED, ALLOT_UNLIMITED);
    allot_tenants_fill_nominal(t);
    assert_int_equal(allot_tenants_get(t, 0)->quota[ALLOT_RES_GPU].nominal, ALLOT_UNLIMITED);
    allot_tenants_advance(t, 1, 0, &cap);
    allot_tenants_charge(t, batch, &four, +1);
    assert_false(allot_tenants_admits(t, batch, &one, true, &who, NULL));
    assert_int_equal(who, 0);
    assert_true(allot_tenants_admits(t, serve, &four, true, NULL, NULL));
    allot_tenants_free(t);
}

/* Every tenant reachable from the root through the child links, once. */
static void check_tree(const struct allot_tenants *t)
{
    int n = allot_tenants_count(t), seen = 1;

    for (int i = 0; i < n; i++) {
        const struct allot_tenant *x = allot_tenants_get(t, i);
        assert_int_equal(allot_tenants_find(t, x->path), i);
        for (int c = x->first_child; c >= 0; c = allot_tenants_get(t, c)->next_sibling) {
            assert_true(c < n);
            assert_int_equal(allot_tenants_get(t, c)->parent, i);
            seen++;
        }
    }
    assert_int_equal(seen, n);
}

/* Building a tree with the Nth allocation failing, for every N: a clean
 * ALLOT_ENOMEM (or NULL), the tree unchanged by the failed add, no leak. */
static void tenant_fault_loop(bool sticky)
{
    static const char *const paths[] = {"ml/vision/detector", "ml/nlp", "infra/batch/x", "ml"};
    unsigned long n;

    for (n = 1; n < 100000; n++) {
        struct allot_tenants *t;
        unsigned long used;
        bool ok;
        char err[128];

        allot_alloc_fail_at(n, sticky);
        t = allot_tenants_new(cat);
        ok = t != NULL;
        for (size_t i = 0; ok && i < sizeof(paths) / sizeof(paths[0]); i++) {
            int before = allot_tenants_count(t),
                rc = allot_tenants_add(t, paths[i], err, sizeof(err));
            if (rc == ALLOT_ENOMEM) {
                char pre[64];

                assert_int_equal(allot_tenants_count(t), before);
                assert_int_equal(allot_tenants_find(t, paths[i]), -1);
                /* no ancestor made on the way is left in the path index */
                for (size_t k = 1; paths[i][k - 1]; k++)
                    if (paths[i][k] == '/' || !paths[i][k]) {
                        allot_strlcpy(pre, paths[i], k + 1);
                        assert_true(allot_tenants_find(t, pre) < before);
                    }
                assert_non_null(strstr(err, "out of memory"));
                ok = false;
            } else if (rc < 0) {
                /* "ml" exists by the time it is added */
                assert_int_equal(rc, ALLOT_EEXIST);
            }
        }
        used = allot_alloc_count();
        allot_alloc_fail_at(0, false);
        if (t) {
            char e2[128];
            check_tree(t);
            /* the tree still works after the failure */
            assert_true(allot_tenants_add(t, "after/fail", e2, sizeof(e2)) > 0);
            check_tree(t);
        }
        allot_tenants_free(t);
        if (ok && used < n)
            break;
    }
    assert_true(n > 3);
}

static void test_alloc_failures(void **state)
{
    tenant_fault_loop(false);
    tenant_fault_loop(true);
}

/* 8,200 children of an unlisted parent, each with the largest memory
 * nominal a tenants file takes (2^50 MiB): their sum passes INT64_MAX, so
 * the parent has no limit (it overflowed; found by fuzz_tenants). Each
 * lends nothing, so what they withhold passes INT64_MAX too. */
static void test_huge_sums(void **state)
{
    struct allot_tenants *t = allot_tenants_new(cat);
    struct allot_quota q = {INT64_C(1) << 50, ALLOT_UNLIMITED, 0};
    struct allot_resvec r;
    char err[128], path[32];
    int a = -1, first = -1;

    for (int i = 0; i < 8200; i++) {
        allot_fmt(path, sizeof(path), "org/t%d", i);
        a = allot_tenants_add(t, path, err, sizeof(err));
        assert_true(a > 0);
        if (first < 0)
            first = a;
        assert_int_equal(allot_tenants_set_quota(t, a, ALLOT_RES_MEM, q), 0);
    }
    allot_tenants_fill_nominal(t);
    assert_true(allot_tenants_get(t, allot_tenants_find(t, "org"))->quota[ALLOT_RES_MEM].nominal ==
                ALLOT_UNLIMITED);
    memset(&r, 0, sizeof(r));
    r.v[ALLOT_RES_MEM] = 1;
    assert_true(allot_tenants_admits(t, first, &r, false, NULL, NULL));
    assert_true(allot_tenants_admits(t, first, &r, true, NULL, NULL));
    allot_tenants_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_borrow_and_lend),
        cmocka_unit_test(test_fair_share),
        cmocka_unit_test(test_lending_hold),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_huge_sums),
        cmocka_unit_test(test_lend_limit_with_unlimited_root),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
