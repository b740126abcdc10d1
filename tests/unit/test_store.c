/*
 * Unit tests of allot-store (src/store) with the SQLite back-end, and with
 * --pg the same on the PostgreSQL back-end (tests/CMakeLists: test_store_pg,
 * under scripts/pg_sandbox.py): opening,
 * migrations and the schema-version check; every typed read and write;
 * idempotency keys; write batches and their nesting; keyset paging over
 * 10,000 jobs with filters; bad input stored verbatim; the audit hash chain
 * against edited, inserted and deleted rows. The stress tests (failing
 * allocations, SIGKILL, threads) are in test_store_stress.c; arrays and
 * holds in test_store_jobs.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "store_fixture.h"

#include <sys/stat.h>

/* ---- opening and migrations ------------------------------------------------ */

static void test_open_and_migrations(void **state)
{
    struct fix *f = *state;
    struct allot_store_opts plain = {0}, migrate = {.flags = ALLOT_STORE_MIGRATE};
    struct allot_store *st = NULL;
    char err[256], sql[128], bad[160];
    int latest = allot_store_schema_latest();

    assert_true(latest >= 2);
    assert_int_equal(allot_store_open("nourl", NULL, &st, err, sizeof err), ALLOT_EINVAL);
    assert_int_equal(allot_store_open("mysql://db/allot", NULL, &st, err, sizeof err),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "mysql"));
    assert_int_equal(allot_store_open("sqlite:", NULL, &st, err, sizeof err), ALLOT_EINVAL);
    /* missing without CREATE */
    assert_int_equal(allot_store_open(f->url, &plain, &st, err, sizeof err), ALLOT_ENOENT);
    assert_null(st);

    /* from an empty database to the latest version */
    st = open_ok(f);
    assert_int_equal(allot_store_schema_version(st), latest);
    allot_store_close(st);
    {
        struct stat sb; /* only its owner reads it: it holds the job key */
        assert_int_equal(stat(f->path, &sb), 0);
        assert_int_equal(sb.st_mode & 0077, 0);
    }
    assert_int_equal(raw_int(f, "PRAGMA journal_mode"), 0); /* text "wal": checked below */
    {
        sqlite3 *db;
        sqlite3_stmt *q;

        assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), 0);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
        sqlite3_finalize(q);
        sqlite3_close(db);
    }
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sqlite_schema WHERE name = "
                                "'jobs_by_tenant_state'"),
                     1);
    /* reopening without flags works on a current schema */
    assert_int_equal(allot_store_open(f->url, &plain, &st, err, sizeof err), 0);
    allot_store_close(st);

    /* an older schema: refused without MIGRATE, migrated with it */
    assert_int_equal(raw_sql(f, "DROP INDEX jobs_by_state; DROP INDEX jobs_by_tenant;"
                                "DROP INDEX jobs_by_tenant_state; DROP INDEX job_events_by_job;"
                                "DROP INDEX jobs_by_array;"
                                /* version 4: metering; 5: tenant networks; 6: sample intervals */
                                "DROP TRIGGER runs_begin; DROP TRIGGER runs_end;"
                                "DROP TRIGGER runs_again;"                /* version 7: runs anew */
                                "ALTER TABLE nodes DROP COLUMN token_id;" /* version 8 */
                                "ALTER TABLE jobs DROP COLUMN held;"      /* version 12 */
                                "ALTER TABLE tokens DROP COLUMN expires;" /* version 13 */
                                "DROP TRIGGER node_spans_new; DROP TRIGGER node_spans_change;"
                                "DROP TRIGGER node_spans_gone;"
                                "DROP TABLE runs; DROP TABLE node_spans; DROP TABLE samples;"
                                "DROP TABLE usage_hourly; DROP TABLE tenant_nets;"
                                "UPDATE meta SET value = '1' WHERE key = 'schema_version'"),
                     SQLITE_OK);
    assert_int_equal(allot_store_open(f->url, &plain, &st, err, sizeof err), ALLOT_ESTATE);
    assert_non_null(strstr(err, "version 1"));
    assert_int_equal(allot_store_open(f->url, &migrate, &st, err, sizeof err), 0);
    assert_int_equal(allot_store_schema_version(st), latest);
    allot_store_close(st);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM sqlite_schema WHERE name IN "
                                "('jobs_by_tenant_state', 'jobs_by_array', 'runs', 'runs_begin',"
                                " 'node_spans', 'samples', 'usage_hourly', 'tenant_nets',"
                                " 'runs_again', 'runs_by_job', 'node_spans_change')"),
                     11);
    assert_int_equal(
        raw_int(f, "SELECT count(*) FROM pragma_table_info('jobs') WHERE name = 'held'"), 1);
    assert_int_equal(
        raw_int(f, "SELECT count(*) FROM pragma_table_info('tokens') WHERE name = 'expires'"), 1);

    /* a newer schema is refused, even with MIGRATE, and left alone */
    allot_fmt(sql, sizeof sql, "UPDATE meta SET value = '%d' WHERE key = 'schema_version'",
              latest + 1);
    assert_int_equal(raw_sql(f, sql), SQLITE_OK);
    assert_int_equal(allot_store_open(f->url, &create_opts, &st, err, sizeof err), ALLOT_ESTATE);
    assert_null(st);
    assert_non_null(strstr(err, "newer"));
    assert_int_equal(raw_int(f, "SELECT value FROM meta WHERE key = 'schema_version'"), latest + 1);

    /* a SQLite file that is not an allot store */
    allot_fmt(bad, sizeof bad, "%s/other.db", f->dir);
    {
        sqlite3 *db;

        assert_int_equal(sqlite3_open(bad, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "CREATE TABLE x(a)", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
    }
    allot_fmt(sql, sizeof sql, "sqlite:%s", bad);
    assert_int_equal(allot_store_open(sql, &create_opts, &st, err, sizeof err), ALLOT_EINVAL);
    assert_non_null(strstr(err, "not an allot store"));
    /* and a file that is not SQLite at all */
    {
        FILE *fp = fopen(bad, "w");

        assert_non_null(fp);
        fputs("this is not a database, just text long enough to fill a header.......", fp);
        fputs("......................................................................", fp);
        fclose(fp);
    }
    assert_true(allot_store_open(sql, &create_opts, &st, err, sizeof err) < 0);
    assert_null(st);
}

/* ---- meta and batches ------------------------------------------------------------- */

static void test_meta_and_batches(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job_filter all = {0};
    char *v = NULL;
    int64_t a, b;

    assert_int_equal(allot_store_meta_get(st, "cluster.name", &v), ALLOT_ENOENT);
    assert_null(v);
    assert_int_equal(allot_store_meta_set(st, "cluster.name", "lab"), 0);
    assert_int_equal(allot_store_meta_set(st, "cluster.name", "lab-2"), 0);
    assert_int_equal(allot_store_meta_get(st, "cluster.name", &v), 0);
    assert_string_equal(v, "lab-2");
    allot_free(v);
    assert_int_equal(allot_store_meta_set(st, "schema_version", "99"), ALLOT_EINVAL);
    assert_int_equal(allot_store_meta_get(st, "schema_version", &v), 0);
    allot_free(v);

    assert_int_equal(allot_store_commit(st), ALLOT_ESTATE);
    assert_int_equal(allot_store_rollback(st), ALLOT_ESTATE);
    /* a rolled back batch leaves nothing */
    assert_int_equal(allot_store_begin(st), 0);
    submit(st, "t", "gone-1");
    submit(st, "t", "gone-2");
    assert_int_equal(allot_store_rollback(st), 0);
    assert_int_equal(count_jobs(st, all), 0);
    /* nested: the inner rollback undoes only its own writes */
    assert_int_equal(allot_store_begin(st), 0);
    a = submit(st, "t", "kept-1");
    assert_int_equal(allot_store_begin(st), 0);
    submit(st, "t", "undone");
    assert_int_equal(allot_store_rollback(st), 0);
    b = submit(st, "t", "kept-2");
    assert_int_equal(allot_store_commit(st), 0);
    assert_int_equal(count_jobs(st, all), 2);
    assert_true(b > a);
    /* a failing write inside a batch leaves the batch as it was */
    assert_int_equal(allot_store_begin(st), 0);
    {
        struct allot_store_job j = mkjob("t", "bad-dep", 1);
        int64_t missing = 999999, id;

        j.deps = &missing;
        j.n_deps = 1;
        assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), ALLOT_ENOENT);
        assert_int_equal(id, 0);
    }
    submit(st, "t", "kept-3");
    assert_int_equal(allot_store_commit(st), 0);
    assert_int_equal(count_jobs(st, all), 3);
    allot_store_close(st);

    /* a batch left open at close is rolled back */
    st = open_ok(f);
    assert_int_equal(allot_store_begin(st), 0);
    submit(st, "t", "never");
    allot_store_close(st);
    st = open_ok(f);
    assert_int_equal(count_jobs(st, all), 3);
    allot_store_close(st);
}

/* ---- jobs and events ------------------------------------------------------------------ */

static void test_jobs(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job j, got, upd;
    struct allot_store_event ev = {0}, *evs;
    int64_t d1, d2, id, id2, deps[3], seq;
    bool existed;
    size_t n;

    d1 = submit(st, "research/nlp", "prep");
    d2 = submit(st, "research/nlp", "tokenise");
    j = mkjob("research/nlp", "train", 7);
    deps[0] = d1;
    deps[1] = d2;
    deps[2] = d1; /* twice: stored once */
    j.deps = deps;
    j.n_deps = 3;
    j.array_parent = d1;
    j.array_index = 3;
    j.idem_key = (char *)"req-1";
    j.pending_reason = (char *)"new";
    assert_int_equal(allot_store_job_submit(st, &j, &id, &existed), 0);
    assert_false(existed);

    memset(&got, 0xff, sizeof got);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_int_equal(got.id, id);
    assert_string_equal(got.tenant, "research/nlp");
    assert_string_equal(got.name, "train");
    assert_string_equal(got.spec, j.spec);
    assert_int_equal(got.token_id, 7);
    assert_int_equal(got.state, ALLOT_SJ_PENDING);
    assert_null(got.placement);
    assert_string_equal(got.pending_reason, "new");
    assert_int_equal(got.submit_time, 1000);
    assert_int_equal(got.start_time, 0);
    assert_false(got.has_exit_code);
    assert_int_equal(got.array_parent, d1);
    assert_int_equal(got.array_index, 3);
    assert_string_equal(got.idem_key, "req-1");
    assert_int_equal(got.n_deps, 2);
    assert_int_equal(got.deps[0], d1);
    assert_int_equal(got.deps[1], d2);
    allot_store_job_clear(&got);
    allot_store_job_clear(&got); /* twice is harmless */
    allot_store_job_clear(NULL);

    /* idempotency: same key and token -> the same job, nothing written */
    j.name = (char *)"train-again";
    assert_int_equal(allot_store_job_submit(st, &j, &id2, &existed), 0);
    assert_true(existed);
    assert_int_equal(id2, id);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_string_equal(got.name, "train");
    allot_store_job_clear(&got);
    /* same key, another token -> a new job */
    j.token_id = 8;
    assert_int_equal(allot_store_job_submit(st, &j, &id2, &existed), 0);
    assert_false(existed);
    assert_true(id2 != id);
    /* inside one batch the second submission sees the first */
    assert_int_equal(allot_store_begin(st), 0);
    j.idem_key = (char *)"req-2";
    assert_int_equal(allot_store_job_submit(st, &j, &id, &existed), 0);
    assert_false(existed);
    assert_int_equal(allot_store_job_submit(st, &j, &id2, &existed), 0);
    assert_true(existed);
    assert_int_equal(id2, id);
    assert_int_equal(allot_store_commit(st), 0);

    /* bad submissions */
    j = mkjob("t", "x", 1);
    j.spec = NULL;
    assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), ALLOT_EINVAL);
    j = mkjob("t", "x", 1);
    j.state = 42;
    assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), ALLOT_EINVAL);
    j = mkjob("t", "x", 1);
    j.n_deps = 1;
    assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), ALLOT_EINVAL);
    assert_int_equal(allot_store_job_get(st, 424242, &got), ALLOT_ENOENT);

    /* state transitions */
    id = submit(st, "t", "run-me");
    assert_int_equal(allot_store_job_get(st, id, &upd), 0);
    upd.state = ALLOT_SJ_RUNNING;
    upd.placement = allot_strdup("{\"node\":\"gpu-1\",\"gpus\":[0,1]}");
    allot_free(upd.pending_reason);
    upd.pending_reason = NULL;
    upd.start_time = 1100;
    assert_int_equal(allot_store_job_update(st, &upd), 0);
    upd.state = ALLOT_SJ_FAILED;
    upd.end_time = 1200;
    upd.has_exit_code = true;
    upd.exit_code = -9;
    assert_int_equal(allot_store_job_update(st, &upd), 0);
    assert_int_equal(allot_store_job_get(st, id, &got), 0);
    assert_int_equal(got.state, ALLOT_SJ_FAILED);
    assert_string_equal(got.placement, upd.placement);
    assert_null(got.pending_reason);
    assert_int_equal(got.start_time, 1100);
    assert_int_equal(got.end_time, 1200);
    assert_true(got.has_exit_code);
    assert_int_equal(got.exit_code, -9);
    allot_store_job_clear(&got);
    /* a terminal job never changes again */
    upd.state = ALLOT_SJ_RUNNING;
    assert_int_equal(allot_store_job_update(st, &upd), ALLOT_ESTATE);
    upd.id = 999999;
    assert_int_equal(allot_store_job_update(st, &upd), ALLOT_ENOENT);
    upd.state = -1;
    assert_int_equal(allot_store_job_update(st, &upd), ALLOT_EINVAL);
    allot_store_job_clear(&upd);

    /* state names */
    for (int s = 0; s < ALLOT_SJ_NSTATES; s++)
        assert_int_equal(allot_store_job_state_parse(allot_store_job_state_name(s)), s);
    assert_int_equal(allot_store_job_state_parse("done"), ALLOT_EINVAL);
    assert_null(allot_store_job_state_name(ALLOT_SJ_NSTATES));
    assert_true(allot_store_job_state_terminal(ALLOT_SJ_LOST));
    assert_false(allot_store_job_state_terminal(ALLOT_SJ_STARTING));

    /* events: append-only, paged */
    ev.job_id = id;
    ev.kind = (char *)"started";
    for (int i = 0; i < 25; i++) {
        ev.time = 2000 + i;
        ev.detail = i % 2 ? (char *)"{\"node\":\"gpu-1\"}" : NULL;
        assert_int_equal(allot_store_event_add(st, &ev, &seq), 0);
        assert_true(seq > 0);
    }
    ev.job_id = 999999;
    assert_int_equal(allot_store_event_add(st, &ev, &seq), ALLOT_ENOENT);
    ev.job_id = id;
    ev.kind = NULL;
    assert_int_equal(allot_store_event_add(st, &ev, NULL), ALLOT_EINVAL);
    seq = 0;
    for (int total = 0, page = 0;; page++) {
        assert_int_equal(allot_store_event_list(st, id, seq, 10, &evs, &n), 0);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(evs[i].job_id, id);
            assert_int_equal(evs[i].time, 2000 + total);
            assert_string_equal(evs[i].kind, "started");
            assert_true(evs[i].seq > seq);
            if (total % 2)
                assert_string_equal(evs[i].detail, "{\"node\":\"gpu-1\"}");
            else
                assert_null(evs[i].detail);
            seq = evs[i].seq;
            total++;
        }
        allot_store_events_free(evs, n);
        if (n < 10) {
            assert_int_equal(total, 25);
            assert_int_equal(page, 2);
            break;
        }
    }
    assert_int_equal(allot_store_event_list(st, id, 0, 0, &evs, &n), ALLOT_EINVAL);
    /* the latest event of a kind: the highest time, then the last written */
    {
        struct allot_store_event last;

        ev.kind = (char *)"checkpoint";
        ev.detail = (char *)"a";
        ev.time = 3000;
        assert_int_equal(allot_store_event_add(st, &ev, NULL), 0);
        ev.detail = (char *)"b"; /* written later, of an earlier time */
        ev.time = 2990;
        assert_int_equal(allot_store_event_add(st, &ev, NULL), 0);
        ev.detail = (char *)"c"; /* of the same time as "a", written later */
        ev.time = 3000;
        assert_int_equal(allot_store_event_add(st, &ev, &seq), 0);
        ev.kind = (char *)"started";
        ev.time = 4000;
        assert_int_equal(allot_store_event_add(st, &ev, NULL), 0);
        assert_int_equal(allot_store_event_last(st, id, "checkpoint", &last), 0);
        assert_int_equal(last.seq, seq);
        assert_int_equal(last.time, 3000);
        assert_string_equal(last.detail, "c");
        allot_store_event_clear(&last);
        assert_null(last.kind);
        assert_int_equal(allot_store_event_last(st, id, "preempted", &last), ALLOT_ENOENT);
        assert_int_equal(allot_store_event_last(st, 999999, "checkpoint", &last), ALLOT_ENOENT);
        assert_int_equal(allot_store_event_last(st, id, NULL, &last), ALLOT_EINVAL);
        allot_store_event_clear(NULL);
    }
    /* ... of every running job in one query: its current run only; none
     * for a job not running (id has ended, one waits) or without one */
    {
        int64_t run[3], pend = submit(st, "t", "waits");
        const int64_t starts[3] = {2995, 2995, 500};

        for (int k = 0; k < 3; k++) {
            run[k] = submit(st, "t", "runs");
            assert_int_equal(allot_store_job_get(st, run[k], &upd), 0);
            upd.state = k ? ALLOT_SJ_STARTING : ALLOT_SJ_RUNNING;
            upd.start_time = starts[k];
            assert_int_equal(allot_store_job_update(st, &upd), 0);
            allot_store_job_clear(&upd);
        }
        /* saves: (job, time, detail) */
        const int64_t job[] = {run[0], run[0], run[0], run[0], pend, run[1], run[2], run[2]};
        const int64_t at[] = {2990, 3000, 3000, 2998, 3000, 2000, 600, 700};
        const char *const what[] = {"before", "a", "c", "earlier", "p", "b", "k2", "k2 later"};
        for (size_t k = 0; k < sizeof(job) / sizeof(job[0]); k++) {
            struct allot_store_event e = {0, job[k], at[k], "checkpoint", (char *)what[k]};
            assert_int_equal(allot_store_event_add(st, &e, NULL), 0);
        }
        assert_int_equal(allot_store_event_last_running(st, "checkpoint", &evs, &n), 0);
        assert_true(n == 2 && evs[0].job_id == run[0] && evs[0].time == 3000);
        assert_true(!strcmp(evs[0].detail, "c") && evs[1].job_id == run[2]);
        assert_string_equal(evs[1].detail, "k2 later");
        allot_store_events_free(evs, n);
        assert_int_equal(allot_store_event_last_running(st, "preempted", &evs, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(allot_store_event_last_running(st, NULL, &evs, &n), ALLOT_EINVAL);
    }
    assert_int_equal(raw_sql(f, "DELETE FROM job_events"), SQLITE_CONSTRAINT);
    allot_store_close(st);
}

/* ---- tenants, classes, nodes, tokens ----------------------------------------------------- */

/* Metering facts kept by the store itself: a run per time a job held
 * resources (opened and closed by the job's state changes), samples
 * stored once, roll-ups replaced per hour range, tenant networks unique. */
static void test_metering(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job j = {0};
    struct allot_store_run *runs, last;
    struct allot_store_sample smp = {.job_id = 0,
                                     .task = 0,
                                     .at = 5000,
                                     .cpu_ns = 7,
                                     .mem_bytes = 1,
                                     .gpu_util = 40,
                                     .gpu_mem_bytes = -1,
                                     .energy_mj = -1,
                                     .interval_ms = 1000};
    struct allot_store_sample *sl;
    struct allot_store_usage u[2] = {{.hour = 3600,
                                      .tenant = (char *)"t",
                                      .user = (char *)"u",
                                      .model = (char *)"L4",
                                      .item = (char *)"gpu",
                                      .gpu_ppm_s = 1000000,
                                      .gpu_mem_peak = -1,
                                      .energy_mj = -1},
                                     {.hour = 7200,
                                      .tenant = (char *)"t",
                                      .user = (char *)"u",
                                      .model = (char *)"",
                                      .item = (char *)"cpu",
                                      .cpu_milli_s = 5,
                                      .gpu_mem_peak = -1,
                                      .energy_mj = -1}};
    struct allot_store_usage *ul;
    struct allot_store_net net = {(char *)"t", 4096, (char *)"10.96.0.0/24"}, *nets;
    bool added = true;
    size_t n;
    int64_t id = submit(st, "t", "metered");

    assert_int_equal(allot_store_job_get(st, id, &j), 0);
    /* pending: no run */
    assert_int_equal(allot_store_run_list(st, 0, 100000, &runs, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(allot_store_run_last(st, id, &last), ALLOT_ENOENT);
    assert_null(last.placement);
    assert_int_equal(allot_store_run_last(st, 0, &last), ALLOT_EINVAL);
    assert_int_equal(allot_store_run_last(st, id + 1000, &last), ALLOT_ENOENT);
    /* starting at 100, running: one open run */
    j.state = ALLOT_SJ_STARTING;
    j.start_time = 100;
    allot_free(j.placement);
    j.placement = allot_strdup("{\"tasks\":[]}");
    assert_int_equal(allot_store_job_update(st, &j), 0);
    j.state = ALLOT_SJ_RUNNING;
    assert_int_equal(allot_store_job_update(st, &j), 0);
    assert_int_equal(allot_store_run_list(st, 0, 100000, &runs, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(runs[0].start, 100);
    assert_int_equal(runs[0].end, 0);
    assert_string_equal(runs[0].placement, "{\"tasks\":[]}");
    allot_store_runs_free(runs, n);
    /* preempted back to pending at 150, started again at 200, done at 260 */
    j.state = ALLOT_SJ_PENDING;
    j.end_time = 150;
    assert_int_equal(allot_store_job_update(st, &j), 0);
    j.state = ALLOT_SJ_STARTING;
    j.start_time = 200;
    assert_int_equal(allot_store_job_update(st, &j), 0);
    j.state = ALLOT_SJ_SUCCEEDED;
    j.end_time = 260;
    assert_int_equal(allot_store_job_update(st, &j), 0);
    assert_int_equal(allot_store_run_list(st, 0, 100000, &runs, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(runs[0].start, 100);
    assert_int_equal(runs[0].end, 150);
    assert_int_equal(runs[1].start, 200);
    assert_int_equal(runs[1].end, 260);
    allot_store_runs_free(runs, n);
    /* the last run: the second, with the placement it began with */
    assert_int_equal(allot_store_run_last(st, id, &last), 0);
    assert_int_equal(last.job_id, id);
    assert_int_equal(last.start, 200);
    assert_int_equal(last.end, 260);
    assert_string_equal(last.placement, "{\"tasks\":[]}");
    assert_string_equal(last.tenant, "t");
    allot_store_run_clear(&last);
    assert_null(last.placement);
    /* the run a time falls in: the first until the second began */
    assert_int_equal(allot_store_run_at(st, id, 120, &last), 0);
    assert_int_equal(last.start, 100);
    assert_int_equal(last.end, 150);
    allot_store_run_clear(&last);
    assert_int_equal(allot_store_run_at(st, id, 199, &last), 0);
    assert_int_equal(last.start, 100);
    allot_store_run_clear(&last);
    assert_int_equal(allot_store_run_at(st, id, 200, &last), 0);
    assert_int_equal(last.start, 200);
    allot_store_run_clear(&last);
    assert_int_equal(allot_store_run_at(st, id, 99, &last), ALLOT_ENOENT);
    /* stopped and placed again between two writes: running, then starting
     * with a later start (and another placement): the run ends, one begins */
    {
        struct allot_store_job k = {0};
        int64_t id2 = submit(st, "t", "again");

        assert_int_equal(allot_store_job_get(st, id2, &k), 0);
        k.state = ALLOT_SJ_RUNNING;
        k.start_time = 300;
        allot_free(k.placement);
        k.placement = allot_strdup("{\"tasks\":[1]}");
        assert_int_equal(allot_store_job_update(st, &k), 0);
        k.state = ALLOT_SJ_STARTING;
        k.start_time = 340;
        allot_free(k.placement);
        k.placement = allot_strdup("{\"tasks\":[2]}");
        assert_int_equal(allot_store_job_update(st, &k), 0);
        k.state = ALLOT_SJ_RUNNING; /* the same run: nothing new */
        assert_int_equal(allot_store_job_update(st, &k), 0);
        assert_int_equal(allot_store_run_list(st, 300, 100000, &runs, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(runs[0].start, 300);
        assert_int_equal(runs[0].end, 340);
        assert_string_equal(runs[0].placement, "{\"tasks\":[1]}");
        assert_int_equal(runs[1].start, 340);
        assert_int_equal(runs[1].end, 0);
        assert_string_equal(runs[1].placement, "{\"tasks\":[2]}");
        allot_store_runs_free(runs, n);
        /* the open run is the last one; the other job's is its own */
        assert_int_equal(allot_store_run_last(st, id2, &last), 0);
        assert_int_equal(last.start, 340);
        assert_int_equal(last.end, 0);
        assert_string_equal(last.placement, "{\"tasks\":[2]}");
        allot_store_run_clear(&last);
        assert_int_equal(allot_store_run_last(st, id, &last), 0);
        assert_int_equal(last.start, 200);
        allot_store_run_clear(&last);
        allot_store_job_clear(&k);
    }
    /* windows: a run overlapping it is listed, others not */
    assert_int_equal(allot_store_run_list(st, 150, 200, &runs, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(allot_store_run_list(st, 255, 300, &runs, &n), 0);
    assert_int_equal(n, 1);
    allot_store_runs_free(runs, n);
    allot_store_job_clear(&j);

    /* samples: stored once */
    smp.job_id = id;
    assert_int_equal(allot_store_sample_add(st, &smp, &added), 0);
    assert_true(added);
    assert_int_equal(allot_store_sample_add(st, &smp, &added), 0);
    assert_false(added);
    smp.at = 0;
    assert_int_equal(allot_store_sample_add(st, &smp, NULL), ALLOT_EINVAL);
    assert_int_equal(allot_store_sample_list(st, 0, 10000, &sl, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(sl[0].gpu_util, 40);
    assert_int_equal(sl[0].interval_ms, 1000);
    allot_free(sl);

    /* roll-ups: a range is replaced whole */
    assert_int_equal(allot_store_usage_replace(st, 3600, 10800, u, 2), 0);
    assert_int_equal(allot_store_usage_replace(st, 7200, 10800, u + 1, 1), 0);
    assert_int_equal(allot_store_usage_list(st, 0, 10800, &ul, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ul[0].gpu_ppm_s, 1000000);
    assert_string_equal(ul[1].item, "cpu");
    allot_store_usages_free(ul, n);
    assert_int_equal(allot_store_usage_replace(st, 7200, 10800, NULL, 0), 0);
    assert_int_equal(allot_store_usage_list(st, 0, 10800, &ul, &n), 0);
    assert_int_equal(n, 1);
    allot_store_usages_free(ul, n);
    assert_int_equal(allot_store_usage_replace(st, 0, 3600, u, 1), ALLOT_EINVAL); /* outside */

    /* tenant networks: a tenant, a vni and a subnet once each */
    assert_int_equal(allot_store_net_add(st, &net), 0);
    net.tenant = (char *)"other";
    assert_int_equal(allot_store_net_add(st, &net), ALLOT_EEXIST);
    net.vni = 4097;
    assert_int_equal(allot_store_net_add(st, &net), ALLOT_EEXIST); /* same subnet */
    net.subnet = (char *)"10.96.1.0/24";
    assert_int_equal(allot_store_net_add(st, &net), 0);
    assert_int_equal(allot_store_net_list(st, &nets, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(nets[1].subnet, "10.96.1.0/24");
    allot_store_nets_free(nets, n);
    /* a tenant's network cut anew (another net-prefix) replaces its old one */
    net.vni = 4098;
    net.subnet = (char *)"10.96.2.0/25";
    assert_int_equal(allot_store_net_add(st, &net), 0);
    assert_int_equal(allot_store_net_list(st, &nets, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(nets[1].tenant, "other");
    assert_int_equal(nets[1].vni, 4098);
    assert_string_equal(nets[1].subnet, "10.96.2.0/25");
    allot_store_nets_free(nets, n);
    /* what each node offered when: a changed inventory closes one span and
     * opens the next; a lost node's span closes, and opens again when back */
    {
        struct allot_store_node nd = {
            (char *)"span-node", (char *)"{\"gpus\":1}", ALLOT_SN_READY, 1, 2, 0};
        struct allot_store_node_span *sp;
        size_t k = 0;

        assert_int_equal(allot_store_node_put(st, &nd), 0);
        nd.inventory = (char *)"{\"gpus\":2}";
        assert_int_equal(allot_store_node_put(st, &nd), 0);
        nd.state = ALLOT_SN_LOST;
        assert_int_equal(allot_store_node_put(st, &nd), 0);
        nd.state = ALLOT_SN_READY;
        assert_int_equal(allot_store_node_put(st, &nd), 0);
        assert_int_equal(allot_store_node_heartbeat(st, "span-node", 5, 6), 0);
        assert_int_equal(allot_store_node_span_list(st, 0, INT64_MAX / 2, &sp, &n), 0);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(sp[i].node, "span-node") != 0)
                continue;
            /* gpus 1 (closed), gpus 2 (closed when lost), gpus 2 again (open) */
            assert_string_equal(sp[i].inventory, k == 0 ? "{\"gpus\":1}" : "{\"gpus\":2}");
            if (k < 2)
                assert_true(sp[i].end >= sp[i].start && sp[i].end > 0);
            else
                assert_int_equal(sp[i].end, 0);
            k++;
        }
        assert_int_equal(k, 3);
        allot_store_node_spans_free(sp, n);
    }
    allot_store_close(st);
}

/* The roll-ups' measured-billing figure (schema version 10): rows rolled up
 * before keep every figure and read -1 (billed by their mean, as they were);
 * new rows keep theirs; a row billing more than it allocated is refused. */
static void test_usage_bill_column(void **state)
{
    struct fix *f = *state;
    struct allot_store_opts migrate = {.flags = ALLOT_STORE_MIGRATE};
    struct allot_store *st = open_ok(f);
    struct allot_store_usage *ul, u = {.hour = 7200,
                                       .tenant = (char *)"t",
                                       .user = (char *)"u",
                                       .model = (char *)"H100-80GB",
                                       .item = (char *)"fraction",
                                       .gpu_ppm_s = 900000000,
                                       .gpu_mem_peak = -1,
                                       .energy_mj = -1,
                                       .gpu_bill_ppm_s = 450000000};
    char err[256];
    size_t n;

    allot_store_close(st);
    /* a version 9 store with one roll-up row */
    assert_int_equal(raw_sql(f, "ALTER TABLE usage_hourly DROP COLUMN gpu_bill_ppm_s;"
                                "ALTER TABLE jobs DROP COLUMN held;"
                                "ALTER TABLE tokens DROP COLUMN expires;"
                                "UPDATE meta SET value = '9' WHERE key = 'schema_version';"
                                "INSERT INTO usage_hourly VALUES (3600, 't', 'u', 'H100-80GB',"
                                " 'fraction', 0, 900000000, 250, 1024, 2500, 100, 5, 7, 3)"),
                     SQLITE_OK);
    assert_int_equal(allot_store_open(f->url, &migrate, &st, err, sizeof err), 0);
    assert_int_equal(allot_store_schema_version(st), allot_store_schema_latest());
    assert_int_equal(allot_store_usage_list(st, 0, 10800, &ul, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ul[0].gpu_ppm_s, 900000000);
    assert_int_equal(ul[0].cpu_milli_s, 250);
    assert_int_equal(ul[0].mem_mib_s, 1024);
    assert_int_equal(ul[0].util_pct_ms, 2500);
    assert_int_equal(ul[0].util_ms, 100);
    assert_int_equal(ul[0].gpu_mem_peak, 5);
    assert_int_equal(ul[0].energy_mj, 7);
    assert_int_equal(ul[0].cpu_used_ms, 3);
    assert_int_equal(ul[0].gpu_bill_ppm_s, -1);
    allot_store_usages_free(ul, n);

    /* a new row keeps its figure; one billing more than allocated is refused */
    assert_int_equal(allot_store_usage_replace(st, 7200, 10800, &u, 1), 0);
    u.gpu_bill_ppm_s = u.gpu_ppm_s + 1;
    assert_int_equal(allot_store_usage_replace(st, 7200, 10800, &u, 1), ALLOT_EINVAL);
    assert_non_null(strstr(allot_store_errmsg(st), "gpu_bill_ppm_s"));
    u.gpu_bill_ppm_s = -2;
    assert_int_equal(allot_store_usage_replace(st, 7200, 10800, &u, 1), ALLOT_EINVAL);
    assert_int_equal(allot_store_usage_list(st, 0, 10800, &ul, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ul[0].gpu_bill_ppm_s, -1);
    assert_int_equal(ul[1].gpu_bill_ppm_s, 450000000);
    allot_store_usages_free(ul, n);
    allot_store_close(st);
}

static void test_tables(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_tenant t = {(char *)"research", 2.0, (char *)"shared",
                                   (char *)"{\"gpu\":{\"nominal\":256,\"borrow_limit\":128}}"};
    struct allot_store_tenant *ts;
    struct allot_store_prio_class c = {(char *)"training", 100, true}, *cs;
    struct allot_store_node nd = {
        (char *)"gpu-1", (char *)"{\"gpus\":8}", ALLOT_SN_READY, 10, 40, 7};
    struct allot_store_node gn, *ns;
    struct allot_store_token tok = {0}, gt, *tks;
    const char *secret = "allot_s3cret_token_value_never_stored";
    int64_t tid, tid2;
    size_t n;

    /* tenants: a tree, parents listed before children */
    assert_int_equal(allot_store_tenant_put(st, &t), 0);
    t.path = (char *)"research/nlp";
    t.weight = 1;
    t.quotas = (char *)"{\"gpu\":64}";
    assert_int_equal(allot_store_tenant_put(st, &t), 0);
    t.path = (char *)"research-2";
    assert_int_equal(allot_store_tenant_put(st, &t), 0);
    t.path = (char *)"product/search";
    t.isolation = (char *)"exclusive-gpu";
    assert_int_equal(allot_store_tenant_put(st, &t), 0);
    t.weight = 3; /* replace */
    assert_int_equal(allot_store_tenant_put(st, &t), 0);
    t.isolation = (char *)"private";
    assert_int_equal(allot_store_tenant_put(st, &t), ALLOT_EINVAL);
    t.isolation = (char *)"shared";
    t.weight = 0;
    assert_int_equal(allot_store_tenant_put(st, &t), ALLOT_EINVAL);
    assert_int_equal(allot_store_tenant_list(st, &ts, &n), 0);
    assert_int_equal(n, 4);
    assert_string_equal(ts[0].path, "product/search");
    assert_true(ts[0].weight == 3.0);
    assert_string_equal(ts[0].isolation, "exclusive-gpu");
    assert_string_equal(ts[1].path, "research");
    assert_string_equal(ts[1].quotas, "{\"gpu\":{\"nominal\":256,\"borrow_limit\":128}}");
    assert_string_equal(ts[2].path, "research-2");
    assert_string_equal(ts[3].path, "research/nlp");
    allot_store_tenants_free(ts, n);
    assert_int_equal(allot_store_tenant_delete(st, "research"), ALLOT_ESTATE);
    assert_int_equal(allot_store_tenant_delete(st, "research/nlp"), 0);
    assert_int_equal(allot_store_tenant_delete(st, "research"), 0);
    assert_int_equal(allot_store_tenant_delete(st, "research"), ALLOT_ENOENT);
    assert_int_equal(allot_store_tenant_list(st, &ts, &n), 0);
    assert_int_equal(n, 2);
    allot_store_tenants_free(ts, n);

    /* priority classes, highest first */
    assert_int_equal(allot_store_prio_put(st, &c), 0);
    c.name = (char *)"inference";
    c.value = 1000;
    c.preemptible = false;
    assert_int_equal(allot_store_prio_put(st, &c), 0);
    c.value = 900;
    assert_int_equal(allot_store_prio_put(st, &c), 0);
    assert_int_equal(allot_store_prio_list(st, &cs, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(cs[0].name, "inference");
    assert_int_equal(cs[0].value, 900);
    assert_false(cs[0].preemptible);
    assert_string_equal(cs[1].name, "training");
    assert_true(cs[1].preemptible);
    allot_store_prios_free(cs, n);
    assert_int_equal(allot_store_prio_delete(st, "training"), 0);
    assert_int_equal(allot_store_prio_delete(st, "training"), ALLOT_ENOENT);

    /* nodes */
    assert_int_equal(allot_store_node_put(st, &nd), 0);
    nd.name = (char *)"gpu-0";
    nd.state = ALLOT_SN_CORDONED;
    assert_int_equal(allot_store_node_put(st, &nd), 0);
    nd.state = ALLOT_SN_NSTATES;
    assert_int_equal(allot_store_node_put(st, &nd), ALLOT_EINVAL);
    assert_int_equal(allot_store_node_heartbeat(st, "gpu-1", 50, 80), 0);
    assert_int_equal(allot_store_node_heartbeat(st, "gpu-9", 50, 80), ALLOT_ENOENT);
    assert_int_equal(allot_store_node_get(st, "gpu-1", &gn), 0);
    assert_string_equal(gn.inventory, "{\"gpus\":8}");
    assert_int_equal(gn.state, ALLOT_SN_READY);
    assert_int_equal(gn.last_heartbeat, 50);
    assert_int_equal(gn.lease_expiry, 80);
    assert_int_equal(gn.token_id, 7); /* the agent token it is bound to */
    allot_store_node_clear(&gn);
    /* a put without a token keeps the binding; one with a token moves it */
    nd.name = (char *)"gpu-1";
    nd.state = ALLOT_SN_READY;
    nd.token_id = 0;
    assert_int_equal(allot_store_node_put(st, &nd), 0);
    assert_int_equal(allot_store_node_get(st, "gpu-1", &gn), 0);
    assert_int_equal(gn.token_id, 7);
    allot_store_node_clear(&gn);
    nd.token_id = 9;
    assert_int_equal(allot_store_node_put(st, &nd), 0);
    assert_int_equal(allot_store_node_get(st, "gpu-1", &gn), 0);
    assert_int_equal(gn.token_id, 9);
    allot_store_node_clear(&gn);
    assert_int_equal(allot_store_node_get(st, "gpu-9", &gn), ALLOT_ENOENT);
    assert_int_equal(allot_store_node_list(st, &ns, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ns[0].name, "gpu-0");
    assert_int_equal(ns[0].state, ALLOT_SN_CORDONED);
    assert_string_equal(allot_store_node_state_name(ns[0].state), "cordoned");
    allot_store_nodes_free(ns, n);
    assert_int_equal(allot_store_node_delete(st, "gpu-0"), 0);
    assert_int_equal(allot_store_node_delete(st, "gpu-0"), ALLOT_ENOENT);

    /* tokens: only the hash of the secret is ever stored */
    tok.name = (char *)"ci";
    tok.role = ALLOT_ROLE_MEMBER;
    tok.tenant = (char *)"research/nlp";
    tok.created = 100;
    tok.expires = 5000;
    allot_store_sha256(secret, strlen(secret), tok.hash);
    assert_int_equal(allot_store_token_add(st, &tok, &tid), 0);
    assert_int_equal(allot_store_token_add(st, &tok, &tid2), ALLOT_EEXIST); /* same hash */
    tok.role = ALLOT_ROLE_NROLES;
    assert_int_equal(allot_store_token_add(st, &tok, &tid2), ALLOT_EINVAL);
    tok.role = ALLOT_ROLE_AGENT;
    tok.name = (char *)"node gpu-1";
    tok.tenant = (char *)"";
    tok.expires = 0;
    allot_store_sha256("other", 5, tok.hash);
    assert_int_equal(allot_store_token_add(st, &tok, &tid2), 0);
    allot_store_sha256(secret, strlen(secret), tok.hash);
    assert_int_equal(allot_store_token_find(st, tok.hash, &gt), 0);
    assert_int_equal(gt.id, tid);
    assert_string_equal(gt.name, "ci");
    assert_int_equal(gt.role, ALLOT_ROLE_MEMBER);
    assert_string_equal(allot_store_role_name(gt.role), "member");
    assert_string_equal(gt.tenant, "research/nlp");
    assert_memory_equal(gt.hash, tok.hash, ALLOT_STORE_HASH_LEN);
    assert_int_equal(gt.created, 100);
    assert_int_equal(gt.revoked, 0);
    assert_int_equal(gt.expires, 5000);
    allot_store_token_clear(&gt);
    assert_int_equal(allot_store_token_get(st, tid2, &gt), 0);
    assert_int_equal(gt.expires, 0);
    allot_store_token_clear(&gt);
    assert_int_equal(allot_store_token_revoke(st, tid, 200), 0);
    assert_int_equal(allot_store_token_revoke(st, tid, 300), ALLOT_ESTATE);
    assert_int_equal(allot_store_token_revoke(st, 999, 300), ALLOT_ENOENT);
    assert_int_equal(allot_store_token_revoke(st, tid, 0), ALLOT_EINVAL);
    assert_int_equal(allot_store_token_get(st, tid, &gt), 0);
    assert_int_equal(gt.revoked, 200);
    allot_store_token_clear(&gt);
    assert_int_equal(allot_store_token_get(st, 999, &gt), ALLOT_ENOENT);
    allot_store_sha256("nobody", 6, tok.hash);
    assert_int_equal(allot_store_token_find(st, tok.hash, &gt), ALLOT_ENOENT);
    assert_int_equal(allot_store_token_list(st, &tks, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(tks[1].id, tid2);
    assert_int_equal(tks[1].role, ALLOT_ROLE_AGENT);
    allot_store_tokens_free(tks, n);
    allot_store_close(st);
    /* the secret's text is nowhere in the files */
    {
        char p[256], buf[65536];
        const char *sfx[] = {"", "-wal"};

        for (int i = 0; i < 2; i++) {
            FILE *fp;
            size_t got;

            allot_fmt(p, sizeof p, "%s%s", f->path, sfx[i]);
            if (!(fp = fopen(p, "rb")))
                continue;
            while ((got = fread(buf, 1, sizeof buf, fp)) > 0)
                assert_false(contains(buf, got, secret));
            fclose(fp);
        }
    }
}

/* ---- bad input is stored verbatim -------------------------------------------------------- */

static void test_bad_input_verbatim(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    static const char *const nasty[] = {
        "it's \"quoted\"",
        "'); DROP TABLE jobs; --",
        "x' OR '1'='1",
        "\xff\xfe\xc3\x28 invalid \xe2\x82 utf-8 \xf0\x28\x8c\x28",
        "%s%n%d \\ \\0 ; -- /* */",
        "",
    };
    struct allot_store_job_filter fl = {0};
    struct allot_store_job_page p;
    struct allot_store_job got;
    struct allot_store_audit a = {0}, *as;
    size_t n;

    for (size_t i = 0; i < sizeof nasty / sizeof nasty[0]; i++) {
        struct allot_store_job j = mkjob(nasty[i], nasty[i], 1);
        struct allot_store_tenant t = {(char *)nasty[i], 1, (char *)"shared", (char *)nasty[i]};
        struct allot_store_node nd = {(char *)nasty[i], (char *)nasty[i], ALLOT_SN_READY, 0, 0, 0};
        struct allot_store_node gn;
        int64_t id;

        j.spec = (char *)nasty[i];
        j.placement = (char *)nasty[i];
        j.pending_reason = (char *)nasty[i];
        j.idem_key = (char *)nasty[i];
        assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), 0);
        assert_int_equal(allot_store_job_get(st, id, &got), 0);
        assert_string_equal(got.tenant, nasty[i]);
        assert_string_equal(got.name, nasty[i]);
        assert_string_equal(got.spec, nasty[i]);
        assert_string_equal(got.placement, nasty[i]);
        assert_string_equal(got.pending_reason, nasty[i]);
        assert_string_equal(got.idem_key, nasty[i]);
        allot_store_job_clear(&got);
        /* exact tenant and byte-prefix filters find it */
        fl.tenant = nasty[i];
        fl.name_prefix = nasty[i];
        assert_int_equal(allot_store_job_list(st, &fl, &p), 0);
        if (p.n != 1)
            fail_msg("nasty %zu: %zu rows", i, p.n);
        assert_int_equal(p.jobs[0].id, id);
        allot_store_job_page_free(&p);
        assert_int_equal(allot_store_tenant_put(st, &t), 0);
        assert_int_equal(allot_store_node_put(st, &nd), 0);
        assert_int_equal(allot_store_node_get(st, nasty[i], &gn), 0);
        assert_string_equal(gn.inventory, nasty[i]);
        allot_store_node_clear(&gn);
        a.action = a.target = a.result = (char *)nasty[i];
        assert_int_equal(allot_store_audit_append(st, &a, NULL), 0);
    }
    /* a prefix that is a strict byte prefix of an invalid UTF-8 name */
    fl.tenant = NULL;
    fl.name_prefix = "\xff\xfe";
    assert_int_equal(allot_store_job_list(st, &fl, &p), 0);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.jobs[0].name, nasty[3]);
    allot_store_job_page_free(&p);
    assert_int_equal(allot_store_audit_list(st, 0, 100, &as, &n), 0);
    assert_int_equal(n, sizeof nasty / sizeof nasty[0]);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(as[i].target, nasty[i]);
    allot_store_audits_free(as, n);
    assert_int_equal(allot_store_audit_verify(st, NULL, NULL, 0), 0);
    allot_store_close(st);
    /* the tables are all still there */
    assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs"), 6);
}

/* ---- paging ---------------------------------------------------------------------------------- */

#define NPAGED 10000
static const char *const paged_tenants[] = {"a", "a/x", "a/y", "b", "ab"};

struct paged {
    int64_t id;
    int tenant, state;
    char name[16];
};

static bool paged_match(const struct paged *p, const struct allot_store_job_filter *fl)
{
    const char *t = paged_tenants[p->tenant];

    if (fl->tenant && !(fl->tenant_subtree && !*fl->tenant) && strcmp(t, fl->tenant) != 0 &&
        !(fl->tenant_subtree && strncmp(t, fl->tenant, strlen(fl->tenant)) == 0 &&
          t[strlen(fl->tenant)] == '/'))
        return false;
    if (fl->states && !(fl->states & (1u << p->state)))
        return false;
    return !fl->name_prefix || strncmp(p->name, fl->name_prefix, strlen(fl->name_prefix)) == 0;
}

static void check_listing(struct allot_store *st, const struct paged *all,
                          struct allot_store_job_filter fl)
{
    struct allot_store_job_page p;
    size_t want = 0, pages = 0;
    int dir = fl.newest_first ? -1 : 1;
    int i = fl.newest_first ? NPAGED - 1 : 0;

    fl.cursor = 0;
    for (;;) {
        assert_int_equal(allot_store_job_list(st, &fl, &p), 0);
        assert_true(p.n <= (size_t)fl.limit);
        for (size_t k = 0; k < p.n; k++) {
            while (i >= 0 && i < NPAGED && !paged_match(&all[i], &fl))
                i += dir;
            assert_true(i >= 0 && i < NPAGED);
            assert_int_equal(p.jobs[k].id, all[i].id);
            assert_string_equal(p.jobs[k].name, all[i].name);
            i += dir;
            want++;
        }
        fl.cursor = p.next_cursor;
        allot_store_job_page_free(&p);
        pages++;
        if (!fl.cursor)
            break;
    }
    /* nothing after the last page */
    while (i >= 0 && i < NPAGED) {
        assert_false(paged_match(&all[i], &fl));
        i += dir;
    }
    assert_true(pages <= want / (size_t)fl.limit + 1);
}

/* Job arrays: the first member is its own parent; the array filter lists
 * exactly its members, in pages, combined with the other filters. */
static void test_paging(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct paged *all = calloc(NPAGED, sizeof *all);
    struct allot_store_job_filter fl = {0};
    struct allot_store_job_page p;
    struct allot_rng rng;

    assert_non_null(all);
    allot_rng_seed(&rng, 7);
    assert_int_equal(allot_store_begin(st), 0);
    for (int i = 0; i < NPAGED; i++) {
        struct allot_store_job j;

        all[i].tenant = (int)allot_rng_below(&rng, 5);
        all[i].state = (int)allot_rng_below(&rng, ALLOT_SJ_NSTATES);
        allot_fmt(all[i].name, sizeof all[i].name, "%s-%05d",
                  allot_rng_below(&rng, 4) ? "train" : "infer", i);
        j = mkjob(paged_tenants[all[i].tenant], all[i].name, 1);
        j.state = all[i].state;
        assert_int_equal(allot_store_job_submit(st, &j, &all[i].id, NULL), 0);
    }
    assert_int_equal(allot_store_commit(st), 0);

    for (int order = 0; order < 2; order++) {
        fl = (struct allot_store_job_filter){.limit = 333, .newest_first = order};
        check_listing(st, all, fl);
        fl.tenant = "a";
        check_listing(st, all, fl);
        fl.tenant_subtree = true; /* a, a/x, a/y but not ab */
        check_listing(st, all, fl);
        fl.states = 1u << ALLOT_SJ_RUNNING;
        check_listing(st, all, fl);
        fl.states = ALLOT_SJ_LIVE_MASK;
        check_listing(st, all, fl);
        fl.tenant_subtree = false;
        check_listing(st, all, fl);
        fl.name_prefix = "infer-0";
        check_listing(st, all, fl);
        fl.tenant = NULL;
        check_listing(st, all, fl);
        fl.states = 1u << ALLOT_SJ_SUCCEEDED;
        fl.limit = 7;
        check_listing(st, all, fl);
        fl.name_prefix = "zzz";
        check_listing(st, all, fl);
        fl = (struct allot_store_job_filter){.limit = 10000, .newest_first = order};
        check_listing(st, all, fl);
        fl.tenant = ""; /* the root's subtree: everything */
        fl.tenant_subtree = true;
        fl.limit = 4000;
        check_listing(st, all, fl);
    }
    /* live jobs only: what allotd loads at start */
    fl = (struct allot_store_job_filter){.states = ALLOT_SJ_LIVE_MASK, .limit = 500};
    {
        size_t live = 0;

        for (int i = 0; i < NPAGED; i++)
            live += !allot_store_job_state_terminal(all[i].state);
        assert_int_equal(count_jobs(st, fl), live);
    }
    /* a page stays right while jobs are added behind it */
    fl = (struct allot_store_job_filter){.limit = 10};
    assert_int_equal(allot_store_job_list(st, &fl, &p), 0);
    fl.cursor = p.next_cursor;
    allot_store_job_page_free(&p);
    submit(st, "a", "late");
    assert_int_equal(allot_store_job_list(st, &fl, &p), 0);
    assert_int_equal(p.jobs[0].id, all[10].id);
    allot_store_job_page_free(&p);
    /* bad filters */
    fl = (struct allot_store_job_filter){.limit = ALLOT_STORE_PAGE_MAX + 1};
    assert_int_equal(allot_store_job_list(st, &fl, &p), ALLOT_EINVAL);
    fl = (struct allot_store_job_filter){.tenant_subtree = true};
    assert_int_equal(allot_store_job_list(st, &fl, &p), ALLOT_EINVAL);
    fl = (struct allot_store_job_filter){.states = 1u << ALLOT_SJ_NSTATES};
    assert_int_equal(allot_store_job_list(st, &fl, &p), ALLOT_EINVAL);
    free(all);
    allot_store_close(st);
}

/* ---- audit hash chain -------------------------------------------------------------------- */

static void append_audits(struct allot_store *st, int n)
{
    for (int i = 0; i < n; i++) {
        char target[32];
        struct allot_store_audit a = {.time = 5000 + i, .token_id = 1 + i % 3};
        int64_t seq;

        allot_fmt(target, sizeof target, "job/%d", i);
        a.action = (char *)(i % 2 ? "job.cancel" : "job.submit");
        a.target = target;
        a.result = (char *)"ok";
        assert_int_equal(allot_store_audit_append(st, &a, &seq), 0);
    }
}

static int64_t verify_bad(const struct fix *f, char *why, size_t len)
{
    struct allot_store *st = open_ok(f);
    int64_t bad = -1;
    int rc = allot_store_audit_verify(st, &bad, why, len);

    allot_store_close(st);
    if (rc == 0)
        return 0;
    assert_int_equal(rc, ALLOT_ESTATE);
    return bad;
}

static void test_audit_chain(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_audit *as;
    uint8_t head[ALLOT_STORE_HASH_LEN], zero[ALLOT_STORE_HASH_LEN] = {0};
    int64_t seq, bad;
    char why[256];
    size_t n;

    assert_int_equal(allot_store_audit_head(st, &seq, head), 0);
    assert_int_equal(seq, 0);
    assert_memory_equal(head, zero, sizeof zero);
    assert_int_equal(allot_store_audit_verify(st, &bad, why, sizeof why), 0);
    append_audits(st, 1200); /* more than one verify page */
    assert_int_equal(allot_store_audit_verify(st, &bad, why, sizeof why), 0);
    assert_int_equal(allot_store_audit_head(st, &seq, head), 0);
    assert_int_equal(seq, 1200);
    assert_int_equal(allot_store_audit_list(st, 0, 3, &as, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(as[0].seq, 1);
    assert_memory_equal(as[0].prev_hash, zero, sizeof zero);
    assert_memory_equal(as[1].prev_hash, as[0].hash, ALLOT_STORE_HASH_LEN);
    assert_string_equal(as[1].action, "job.cancel");
    assert_string_equal(as[2].target, "job/2");
    assert_int_equal(as[2].token_id, 3);
    allot_store_audits_free(as, n);
    {
        struct allot_store_audit a = {0};

        assert_int_equal(allot_store_audit_append(st, &a, NULL), ALLOT_EINVAL);
    }
    allot_store_close(st);

    /* the schema refuses edits through SQL */
    assert_int_equal(raw_sql(f, "UPDATE audit SET result = 'x' WHERE seq = 3"), SQLITE_CONSTRAINT);
    assert_int_equal(raw_sql(f, "DELETE FROM audit WHERE seq = 3"), SQLITE_CONSTRAINT);
    /* someone with the file drops the guards ... */
    assert_int_equal(raw_sql(f, f->pg
                                    ? "DROP TRIGGER audit_no_update ON audit;"
                                      " DROP TRIGGER audit_no_delete ON audit"
                                    : "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete"),
                     SQLITE_OK);

    /* ... and edits an entry */
    assert_int_equal(raw_sql(f, "UPDATE audit SET result = 'denied' WHERE seq = 700"), SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 700);
    assert_non_null(strstr(why, "edited"));
    assert_int_equal(raw_sql(f, "UPDATE audit SET result = 'ok' WHERE seq = 700"), SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 0);
    assert_int_equal(raw_sql(f, "UPDATE audit SET time = time + 1 WHERE seq = 1"), SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 1);
    assert_int_equal(raw_sql(f, "UPDATE audit SET time = time - 1 WHERE seq = 1"), SQLITE_OK);
    /* an edit that also recomputes nothing but copies a hash still fails */
    assert_int_equal(raw_sql(f, "UPDATE audit SET hash = (SELECT hash FROM audit WHERE seq = 5)"
                                " WHERE seq = 4"),
                     SQLITE_OK);
    bad = verify_bad(f, why, sizeof why);
    assert_int_equal(bad, 4);
    assert_int_equal(raw_sql(f, "UPDATE audit SET hash = (SELECT prev_hash FROM audit WHERE seq"
                                " = 5) WHERE seq = 4"),
                     SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 0);

    /* deletes an entry (kept aside to put it back) */
    assert_int_equal(raw_sql(f, "CREATE TABLE keep AS SELECT * FROM audit WHERE seq = 300;"
                                "DELETE FROM audit WHERE seq = 300"),
                     SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 300);
    assert_non_null(strstr(why, "missing"));
    assert_int_equal(raw_sql(f, "INSERT INTO audit SELECT * FROM keep; DROP TABLE keep"),
                     SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 0);
    /* deleting the first entry is found as well */
    assert_int_equal(raw_sql(f, "CREATE TABLE keep AS SELECT * FROM audit WHERE seq = 1;"
                                "DELETE FROM audit WHERE seq = 1"),
                     SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 1);
    assert_int_equal(raw_sql(f, "INSERT INTO audit SELECT * FROM keep; DROP TABLE keep"),
                     SQLITE_OK);

    /* inserts an entry: renumber the tail and slip one in at 500, copying
     * the real 500's prev_hash so the link into it looks right */
    assert_int_equal(raw_sql(f, "UPDATE audit SET seq = -seq WHERE seq >= 500;"
                                "UPDATE audit SET seq = 1 - seq WHERE seq < 0;"
                                "INSERT INTO audit SELECT 500, time, token_id, 'token.create',"
                                " 'token/99', 'ok', prev_hash, hash FROM audit WHERE seq = 501"),
                     SQLITE_OK);
    bad = verify_bad(f, why, sizeof why);
    assert_true(bad == 500 || bad == 501);
    /* and an insertion that passes as the entry after 499 (its own hash
     * recomputed would need the secret-free encoding: the next one breaks) */
    assert_int_equal(raw_sql(f, "DELETE FROM audit WHERE seq = 500;"
                                "UPDATE audit SET seq = -seq WHERE seq > 500;"
                                "UPDATE audit SET seq = -seq - 1 WHERE seq < 0"),
                     SQLITE_OK);
    assert_int_equal(verify_bad(f, why, sizeof why), 0);

    /* appending goes on after the chain's head */
    st = open_ok(f);
    append_audits(st, 3);
    assert_int_equal(allot_store_audit_verify(st, &bad, why, sizeof why), 0);
    assert_int_equal(allot_store_audit_head(st, &seq, head), 0);
    assert_int_equal(seq, 1203);
    allot_store_close(st);
}

/* Version 11 repairs the spans SQLite's version-4 triggers closed when a
 * node's inventory changed (they opened the new span, then closed both). */
static void test_node_span_repair(void **state)
{
    struct fix *f = *state;
    struct allot_store_opts migrate = {.flags = ALLOT_STORE_MIGRATE};
    struct allot_store *st = open_ok(f);
    char err[256];

    allot_store_close(st);
    assert_int_equal(
        raw_sql(f, "DROP TRIGGER node_spans_change; DROP TRIGGER node_spans_new;"
                   "INSERT INTO nodes(name, inventory, state, last_heartbeat, lease_expiry)"
                   " VALUES ('n', 'c', 'ready', 1, 2), ('m', 'x', 'lost', 1, 2);"
                   /* n: a, then b and c left closed by the bug; m: lost, a real short span */
                   "INSERT INTO node_spans(node, inventory, start_time, end_time) VALUES"
                   " ('n', 'a', 100, 200), ('n', 'b', 200, 200), ('n', 'c', 300, 300),"
                   " ('m', 'x', 100, 100);"
                   "CREATE TRIGGER node_spans_new AFTER INSERT ON nodes WHEN NEW.state != 'lost'"
                   " BEGIN INSERT INTO node_spans(node, inventory, start_time)"
                   " VALUES (NEW.name, NEW.inventory, CAST(strftime('%s','now') AS INTEGER)); END;"
                   "CREATE TRIGGER node_spans_lost AFTER UPDATE OF state, inventory ON nodes"
                   " BEGIN SELECT 1; END;"
                   "CREATE TRIGGER node_spans_back AFTER UPDATE OF state, inventory ON nodes"
                   " BEGIN SELECT 1; END;"
                   "ALTER TABLE jobs DROP COLUMN held;"
                   "ALTER TABLE tokens DROP COLUMN expires;"
                   "UPDATE meta SET value = '10' WHERE key = 'schema_version'"),
        SQLITE_OK);
    assert_int_equal(allot_store_open(f->url, &migrate, &st, err, sizeof err), 0);
    allot_store_close(st);
    assert_int_equal(raw_int(f, "SELECT end_time FROM node_spans WHERE inventory = 'a'"), 200);
    assert_int_equal(raw_int(f, "SELECT end_time FROM node_spans WHERE inventory = 'b'"), 300);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM node_spans WHERE inventory = 'c'"
                                " AND end_time IS NULL"),
                     1);
    assert_int_equal(raw_int(f, "SELECT end_time FROM node_spans WHERE node = 'm'"), 100);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM node_spans WHERE end_time IS NULL"), 1);
}

/* ---- leadership and fencing (both back-ends) --------------------------------------------- */

static void test_lead_and_fence(void **state)
{
    struct fix *f = *state;
    struct allot_store *a = open_ok(f), *b = open_ok(f), *lk1 = open_ok(f), *lk2 = open_ok(f);
    struct allot_store_job_filter all = {0};
    struct allot_store_job j = mkjob("t", "fenced", 1);
    int64_t e1 = 0, e2 = 0, id;
    bool lead = false;
    char *url = NULL;

    /* one leader at a time; the leader keeps it */
    assert_int_equal(allot_store_lead(lk1, &lead), 0);
    assert_true(lead);
    assert_int_equal(allot_store_lead(lk2, &lead), 0);
    assert_false(lead);
    assert_int_equal(allot_store_lead(lk1, &lead), 0);
    assert_true(lead);
    assert_int_equal(allot_store_take_lead(a, "http://a:7070", &e1), 0);
    assert_int_equal(e1, 1);
    submit(a, "t", "by-a");

    /* the leader goes away: the standby takes the lead (the server lets go
     * of a closed session's lock as its process ends: a moment later) */
    allot_store_close(lk1);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(allot_store_lead(lk2, &lead), 0);
        if (lead)
            break;
        sleep_us(20000);
    }
    assert_true(lead);
    assert_int_equal(allot_store_take_lead(b, "http://b:7070", &e2), 0);
    assert_int_equal(e2, 2);
    assert_int_equal(allot_store_meta_get(b, "leader_url", &url), 0);
    assert_string_equal(url, "http://b:7070");
    allot_free(url);

    /* the old leader's writes are refused whole, its reads go on */
    assert_int_equal(allot_store_job_submit(a, &j, &id, NULL), ALLOT_EFENCED);
    assert_non_null(strstr(allot_store_errmsg(a), "fenced"));
    assert_int_equal(allot_store_begin(a), ALLOT_EFENCED);
    assert_int_equal(count_jobs(a, all), 1);
    submit(b, "t", "by-b");
    assert_int_equal(count_jobs(a, all), 2);
    /* unfenced, a handle writes again (allotd never does this) */
    allot_store_fence(a, 0);
    submit(a, "t", "unfenced");
    assert_int_equal(count_jobs(b, all), 3);

    if (f->pg) {
        struct allot_store *lk3 = open_ok(f);

        /* the leader's session ends (its process died, the network broke):
         * that handle never leads again, another one can */
        assert_int_equal(allot_store_lead(lk3, &lead), 0);
        assert_false(lead);
        assert_true(raw_int(f, "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l"
                               " WHERE l.locktype = 'advisory' AND l.granted"
                               " AND l.pid != pg_backend_pid()") >= 1);
        for (int i = 0; i < 100; i++) {
            assert_int_equal(allot_store_lead(lk3, &lead), 0);
            if (lead)
                break;
            sleep_us(20000);
        }
        assert_true(lead);
        assert_int_equal(allot_store_lead(lk2, &lead), 0);
        assert_false(lead);
        assert_int_equal(allot_store_lead(lk2, &lead), 0);
        assert_false(lead);
        allot_store_close(lk3);
    }
    allot_store_close(lk2);
    allot_store_close(a);
    allot_store_close(b);
}

/* ---- the PostgreSQL back-end's own opening rules ------------------------------------- */

static void test_open_pg(void **state)
{
    struct fix *f = *state;
    struct allot_store_opts plain = {0}, quick = {.busy_timeout_ms = 300};
    struct allot_store *st = NULL, *other = NULL;
    char err[256], sql[256], url[320];
    int64_t id = 0;

    /* bad URLs and a server that is not there */
    assert_int_equal(allot_store_open("postgres:allot", NULL, &st, err, sizeof err), ALLOT_EINVAL);
    assert_non_null(strstr(err, "postgres://"));
    assert_int_equal(allot_store_open("postgres://allot@127.0.0.1:1/x", NULL, &st, err, sizeof err),
                     ALLOT_EIO);
    assert_non_null(strstr(err, "cannot connect"));
    assert_null(st);
    /* an empty database without CREATE */
    assert_int_equal(allot_store_open(f->url, &plain, &st, err, sizeof err), ALLOT_ENOENT);
    assert_non_null(strstr(err, "holds no allot store"));
    assert_null(st);

    /* created at the latest version, the same as the SQLite back-end's */
    st = open_ok(f);
    assert_int_equal(allot_store_schema_version(st), allot_store_schema_latest());
    id = submit(st, "team", "first");
    allot_store_close(st);
    assert_int_equal(raw_int(f, "SELECT count(*) FROM pg_trigger WHERE tgname IN"
                                " ('audit_no_update', 'runs_track', 'node_spans_track')"),
                     3);
    /* "postgresql://" names the same back-end; reopening needs no flags */
    allot_fmt(url, sizeof url, "postgresql%s", strchr(f->url, ':'));
    assert_int_equal(allot_store_open(url, &plain, &st, err, sizeof err), 0);
    {
        struct allot_store_job j;

        assert_int_equal(allot_store_job_get(st, id, &j), 0);
        assert_string_equal(j.name, "first");
        allot_store_job_clear(&j);
    }

    /* a batch holds the write lock: another handle (another replica) waits
     * for it up to its busy timeout, then gets in once it is committed */
    assert_int_equal(allot_store_open(f->url, &quick, &other, err, sizeof err), 0);
    assert_int_equal(allot_store_begin(st), 0);
    submit(st, "team", "second");
    assert_int_equal(allot_store_begin(other), ALLOT_EIO);
    assert_non_null(strstr(allot_store_errmsg(other), "write lock"));
    assert_int_equal(count_jobs(other, (struct allot_store_job_filter){0}), 1);
    assert_int_equal(allot_store_commit(st), 0);
    assert_int_equal(count_jobs(other, (struct allot_store_job_filter){0}), 2);
    assert_int_equal(allot_store_begin(other), 0);
    submit(other, "team", "third");
    assert_int_equal(allot_store_commit(other), 0);
    assert_int_equal(count_jobs(st, (struct allot_store_job_filter){0}), 3);
    allot_store_close(other);
    allot_store_close(st);

    /* a newer schema is refused, even with MIGRATE, and left alone */
    allot_fmt(sql, sizeof sql, "UPDATE meta SET value = '%d' WHERE key = 'schema_version'",
              allot_store_schema_latest() + 1);
    assert_int_equal(raw_sql(f, sql), SQLITE_OK);
    assert_int_equal(allot_store_open(f->url, &create_opts, &st, err, sizeof err), ALLOT_ESTATE);
    assert_non_null(strstr(err, "newer"));
    assert_null(st);
    assert_int_equal(raw_int(f, "SELECT value::int FROM meta WHERE key = 'schema_version'"),
                     allot_store_schema_latest() + 1);

    /* a database that holds something else */
    assert_int_equal(raw_sql(f, "DROP TABLE meta"), SQLITE_OK);
    assert_int_equal(allot_store_open(f->url, &create_opts, &st, err, sizeof err), ALLOT_EINVAL);
    assert_non_null(strstr(err, "not an allot store"));

    /* a database that would convert or refuse bytes */
    allot_fmt(sql, sizeof sql,
              "CREATE DATABASE %s_u TEMPLATE template0 ENCODING 'UTF8'"
              " LC_COLLATE 'C' LC_CTYPE 'C'",
              f->db);
    assert_int_equal(pg_admin(sql), 0);
    allot_fmt(url, sizeof url, "%s_u", f->url);
    assert_int_equal(allot_store_open(url, &create_opts, &st, err, sizeof err), ALLOT_EINVAL);
    assert_non_null(strstr(err, "SQL_ASCII"));
    allot_fmt(sql, sizeof sql, "DROP DATABASE %s_u", f->db);
    assert_int_equal(pg_admin(sql), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_and_migrations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_and_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_bill_column, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_span_repair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input_verbatim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_audit_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lead_and_fence, setup, teardown),
    };
    /* --pg: the same behaviour on the PostgreSQL back-end (ALLOT_TEST_PG,
     * set by scripts/pg_sandbox.py); SQLite's own file and migration
     * history tests give way to PostgreSQL's opening rules */
    const struct CMUnitTest pg_tests[] = {
        cmocka_unit_test_setup_teardown(test_open_pg, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_and_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input_verbatim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_audit_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lead_and_fence, setup, teardown),
    };

    return FIX_RUN(argc, argv, tests, pg_tests);
}
