/*
 * Unit tests of allot-store's job arrays and holds, with the SQLite
 * back-end and with --pg on the PostgreSQL one (tests/CMakeLists:
 * test_store_jobs_pg, under scripts/pg_sandbox.py).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "store_fixture.h"

static void test_arrays(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job j = mkjob("t", "arr", 1), got;
    struct allot_store_job_filter flt = {.limit = 2};
    struct allot_store_job_page pg = {0};
    int64_t first, id, other;
    bool existed;
    size_t seen = 0;

    other = submit(st, "t", "lone");
    j.array_parent = ALLOT_STORE_ARRAY_NEW;
    assert_int_equal(allot_store_job_submit(st, &j, &first, &existed), 0);
    assert_int_equal(allot_store_job_get(st, first, &got), 0);
    assert_int_equal(got.array_parent, first);
    allot_store_job_clear(&got);
    for (int i = 1; i < 5; i++) {
        j.array_parent = first;
        j.array_index = i * 10;
        assert_int_equal(allot_store_job_submit(st, &j, &id, &existed), 0);
    }
    submit(st, "t", "after");
    j.array_parent = -2;
    assert_int_equal(allot_store_job_submit(st, &j, &id, &existed), ALLOT_EINVAL);

    /* one member by its index (a dependency on ARRAYID_INDEX) */
    assert_int_equal(allot_store_job_member(st, first, 30, &got), 0);
    assert_int_equal(got.array_parent, first);
    assert_int_equal(got.array_index, 30);
    assert_true(got.id > first);
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_member(st, first, 0, &got), 0);
    assert_int_equal(got.id, first);
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_member(st, first, 31, &got), ALLOT_ENOENT);
    assert_int_equal(allot_store_job_member(st, other, 0, &got), ALLOT_ENOENT);
    assert_int_equal(allot_store_job_member(st, first, -1, &got), ALLOT_ENOENT);

    flt.array_parent = first;
    do {
        assert_int_equal(allot_store_job_list(st, &flt, &pg), 0);
        for (size_t i = 0; i < pg.n; i++) {
            assert_int_equal(pg.jobs[i].array_parent, first);
            assert_int_equal(pg.jobs[i].array_index, (int)(seen + i) * 10);
            assert_true(pg.jobs[i].id != other);
        }
        seen += pg.n;
        flt.cursor = pg.next_cursor;
        allot_store_job_page_free(&pg);
    } while (flt.cursor);
    assert_int_equal(seen, 5);
    /* with a state filter and newest first */
    flt = (struct allot_store_job_filter){
        .array_parent = first, .states = 1u << ALLOT_SJ_PENDING, .newest_first = true};
    assert_int_equal(allot_store_job_list(st, &flt, &pg), 0);
    assert_int_equal(pg.n, 5);
    assert_int_equal(pg.jobs[0].array_index, 40);
    allot_store_job_page_free(&pg);
    flt.array_parent = other; /* not an array: no members */
    assert_int_equal(allot_store_job_list(st, &flt, &pg), 0);
    assert_int_equal(pg.n, 0);
    allot_store_job_page_free(&pg);
    flt.array_parent = -1;
    assert_int_equal(allot_store_job_list(st, &flt, &pg), ALLOT_EINVAL);
    allot_store_close(st);
}

/* A hold: only of a pending job; a held job's start is refused, so a hold
 * that lands while the scheduler places the job wins; a release lets it
 * start; the flag is stored at submission too and survives a reopen. */
static void test_hold(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job j = mkjob("t", "held", 1), got;
    int64_t id, plain;
    bool existed;

    plain = submit(st, "t", "plain");
    assert_int_equal(allot_store_job_get(st, plain, &got), 0);
    assert_false(got.held);
    allot_store_job_clear(&got);
    j.held = true; /* submitted held (allot submit --hold) */
    assert_int_equal(allot_store_job_submit(st, &j, &id, &existed), 0);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_true(got.held);
    /* its start is refused, and nothing of it changes */
    got.state = ALLOT_SJ_STARTING;
    got.start_time = 100;
    assert_int_equal(allot_store_job_update(st, &got), ALLOT_ESTATE);
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_int_equal(got.state, ALLOT_SJ_PENDING);
    assert_int_equal(got.start_time, 0);
    /* other updates of a held pending job go through (its pending reason) */
    allot_free(got.pending_reason);
    got.pending_reason = allot_strdup("held");
    assert_int_equal(allot_store_job_update(st, &got), 0);
    allot_store_job_clear(&got);
    /* released: it starts */
    assert_int_equal(allot_store_job_hold(st, id, false), 0);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_false(got.held);
    assert_string_equal(got.pending_reason, "held");
    got.state = ALLOT_SJ_STARTING;
    got.start_time = 100;
    assert_int_equal(allot_store_job_update(st, &got), 0);
    allot_store_job_clear(&got);
    /* only a pending job is held or released */
    assert_int_equal(allot_store_job_hold(st, id, true), ALLOT_ESTATE);
    assert_non_null(strstr(allot_store_errmsg(st), "not pending"));
    assert_int_equal(allot_store_job_hold(st, id + 100, true), ALLOT_ENOENT);
    assert_int_equal(allot_store_job_hold(st, 0, true), ALLOT_EINVAL);
    /* a hold between the scheduler's read and its write of the start wins */
    assert_int_equal(allot_store_job_get(st, plain, &got), 0);
    assert_int_equal(allot_store_job_hold(st, plain, true), 0);
    got.state = ALLOT_SJ_STARTING;
    got.start_time = 100;
    assert_int_equal(allot_store_job_update(st, &got), ALLOT_ESTATE);
    allot_store_job_clear(&got);
    allot_store_close(st);
    /* kept across a reopen */
    st = open_ok(f);
    assert_int_equal(allot_store_job_get(st, plain, &got), 0);
    assert_true(got.held);
    assert_int_equal(got.state, ALLOT_SJ_PENDING);
    allot_store_job_clear(&got);
    allot_store_close(st);
}

/* A pending job's spec is replaced (its priority class); an ended or
 * placed one's is not. */
static void test_set_spec(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job got;
    int64_t id = submit(st, "t", "reclass");
    const char *spec = "{\"tenant\":\"t\",\"priority\":\"inference\"}";

    assert_int_equal(allot_store_job_set_spec(st, id, spec), 0);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_string_equal(got.spec, spec);
    got.state = ALLOT_SJ_STARTING; /* running: it may change (a time limit) */
    got.start_time = 100;
    assert_int_equal(allot_store_job_update(st, &got), 0);
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_set_spec(st, id, spec), 0);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    got.state = ALLOT_SJ_SUCCEEDED; /* ended: no more */
    got.end_time = 200;
    got.has_exit_code = true;
    assert_int_equal(allot_store_job_update(st, &got), 0);
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_set_spec(st, id, "{}"), ALLOT_ESTATE);
    assert_non_null(strstr(allot_store_errmsg(st), "ended"));
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_string_equal(got.spec, spec);
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_set_spec(st, id + 100, "{}"), ALLOT_ENOENT);
    assert_int_equal(allot_store_job_set_spec(st, 0, "{}"), ALLOT_EINVAL);
    assert_int_equal(allot_store_job_set_spec(st, id, ""), ALLOT_EINVAL);
    allot_store_close(st);
}

/* The live jobs of one tenant (pending, starting, running), that path
 * exactly: what --max-jobs-per-tenant counts. */
static void test_count_live(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job got;
    int64_t n = -1, a = submit(st, "org/a", "one"), b;

    submit(st, "org/a", "two");
    b = submit(st, "org/a", "three");
    submit(st, "org/ab", "other");
    submit(st, "org", "parent");
    assert_int_equal(allot_store_job_count_live(st, "org/a", &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(allot_store_job_get(st, a, &got), 0);
    got.state = ALLOT_SJ_RUNNING;
    got.start_time = 100;
    assert_int_equal(allot_store_job_update(st, &got), 0); /* running still counts */
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_get(st, b, &got), 0);
    got.state = ALLOT_SJ_CANCELLED;
    got.end_time = 100;
    assert_int_equal(allot_store_job_update(st, &got), 0); /* ended: no more */
    allot_store_job_clear(&got);
    assert_int_equal(allot_store_job_count_live(st, "org/a", &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(allot_store_job_count_live(st, "none", &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(allot_store_job_count_live(st, "", &n), ALLOT_EINVAL);
    allot_store_close(st);
}

/* Who submitted a job: its token's name, qualified by the token's tenant
 * scope; listed by it alone or with the other filters, page by page; a
 * job whose token is not stored has no user. */
static void test_user(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_token t = {
        .name = "alice", .role = ALLOT_ROLE_ADMIN, .tenant = "", .created = 1};
    struct allot_store_job j, got;
    struct allot_store_job_filter flt = {.user = "org/a:alice", .limit = 1};
    struct allot_store_job_page pg = {0};
    int64_t admin, scoped, id, mine[3];
    size_t seen = 0;

    memset(t.hash, 1, sizeof t.hash);
    assert_int_equal(allot_store_token_add(st, &t, &admin), 0);
    t.tenant = "org/a"; /* a member of org/a also named alice */
    t.role = ALLOT_ROLE_MEMBER;
    memset(t.hash, 2, sizeof t.hash);
    assert_int_equal(allot_store_token_add(st, &t, &scoped), 0);
    j = mkjob("org/a", "by-admin", admin);
    assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), 0);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_string_equal(got.user, "alice");
    allot_store_job_clear(&got);
    for (int i = 0; i < 3; i++) {
        j = mkjob(i == 2 ? "org/b" : "org/a", "mine", scoped);
        assert_int_equal(allot_store_job_submit(st, &j, &mine[i], NULL), 0);
    }
    j = mkjob("org/a", "no-token", 999);
    assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), 0);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_null(got.user);
    allot_store_job_clear(&got);

    do { /* one at a time: the cursor carries the filter on */
        assert_int_equal(allot_store_job_list(st, &flt, &pg), 0);
        for (size_t i = 0; i < pg.n; i++) {
            assert_int_equal(pg.jobs[i].id, mine[seen + i]);
            assert_string_equal(pg.jobs[i].user, "org/a:alice");
        }
        seen += pg.n;
        flt.cursor = pg.next_cursor;
        allot_store_job_page_free(&pg);
    } while (flt.cursor);
    assert_int_equal(seen, 3);
    flt = (struct allot_store_job_filter){.user = "org/a:alice",
                                          .tenant = "org/b",
                                          .states = 1u << ALLOT_SJ_PENDING,
                                          .newest_first = true};
    assert_int_equal(allot_store_job_list(st, &flt, &pg), 0);
    assert_int_equal(pg.n, 1);
    assert_int_equal(pg.jobs[0].id, mine[2]);
    allot_store_job_page_free(&pg);
    flt = (struct allot_store_job_filter){.user = "alice"};
    assert_int_equal(count_jobs(st, flt), 1);
    flt.user = "bob";
    assert_int_equal(count_jobs(st, flt), 0);
    flt.user = NULL;
    assert_int_equal(count_jobs(st, flt), 5);
    allot_store_close(st);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_arrays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user, setup, teardown),
    };
    const struct CMUnitTest pg_tests[] = {
        cmocka_unit_test_setup_teardown(test_arrays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user, setup, teardown),
    };

    return FIX_RUN(argc, argv, tests, pg_tests);
}
