/*
 * Stress tests of allot-store (src/store) with the SQLite back-end (and with
 * --pg on the PostgreSQL back-end, with a connection lost between and
 * inside batches added): failure
 * of every allocation in turn (SQLite's included) while a whole API mutation
 * is written and while a new store is created; a writer killed with SIGKILL
 * at a random moment; two handles writing at once; group commit from 8
 * threads with an online backup taken meanwhile.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "store_fixture.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

/* ---- failure of every allocation in turn -------------------------------------------------- */

/* Everything one API mutation writes, as allotd would batch it. */
static int fault_ops(struct allot_store *st, int round, int64_t dep)
{
    struct allot_store_job j = mkjob("research/nlp", "fault", 1);
    struct allot_store_audit a = {.time = round, .token_id = 1};
    struct allot_store_event ev = {.time = round, .kind = (char *)"submitted"};
    struct allot_store_tenant t = {(char *)"research/nlp", 1, (char *)"shared", (char *)"{}"};
    char key[32];
    int64_t id;
    int rc;

    allot_fmt(key, sizeof key, "f-%d", round);
    j.idem_key = key;
    j.deps = &dep;
    j.n_deps = 1;
    a.action = (char *)"job.submit";
    a.target = key;
    a.result = (char *)"ok";
    if ((rc = allot_store_begin(st)) != 0)
        return rc;
    if ((rc = allot_store_job_submit(st, &j, &id, NULL)) != 0)
        goto undo;
    ev.job_id = id;
    if ((rc = allot_store_event_add(st, &ev, NULL)) != 0 ||
        (rc = allot_store_audit_append(st, &a, NULL)) != 0 ||
        (rc = allot_store_tenant_put(st, &t)) != 0 ||
        (rc = allot_store_node_heartbeat(st, "gpu-1", round, round + 30)) != 0)
        goto undo;
    return allot_store_commit(st);
undo:
    allot_store_rollback(st);
    return rc;
}

/* Reads under failure: each either works or fails cleanly. */
static void fault_reads(struct allot_store *st, int64_t dep)
{
    struct allot_store_job_filter fl = {.tenant = "research/nlp", .limit = 5};
    struct allot_store_job_page p;
    struct allot_store_job j;
    struct allot_store_tenant *ts;
    struct allot_store_audit *as;
    size_t n;

    if (allot_store_job_list(st, &fl, &p) == 0)
        allot_store_job_page_free(&p);
    else
        assert_int_equal(p.n, 0);
    if (allot_store_job_get(st, dep, &j) == 0)
        allot_store_job_clear(&j);
    else
        assert_null(j.tenant);
    if (allot_store_tenant_list(st, &ts, &n) == 0)
        allot_store_tenants_free(ts, n);
    if (allot_store_audit_list(st, 0, 10, &as, &n) == 0)
        allot_store_audits_free(as, n);
}

static void fault_loop(const struct fix *f, bool sticky)
{
    struct allot_store *st = open_ok(f);
    struct allot_store_job_filter all = {.name_prefix = "fault"};
    struct allot_store_node nd = {(char *)"gpu-1", (char *)"{}", ALLOT_SN_READY, 0, 0, 0};
    size_t done = count_jobs(st, all);
    int64_t dep = submit(st, "research/nlp", "base"), seq;
    uint8_t h[ALLOT_STORE_HASH_LEN];
    unsigned long n;
    int failures = 0;

    assert_int_equal(allot_store_node_put(st, &nd), 0);
    for (n = 1;; n++) {
        unsigned long used;
        int rc;

        allot_alloc_fail_at(n, sticky);
        rc = fault_ops(st, (int)n + (sticky ? 100000 : 0), dep);
        fault_reads(st, dep);
        used = allot_alloc_count();
        allot_alloc_fail_at(0, false);
        if (rc != 0) {
            assert_true(rc == ALLOT_ENOMEM || rc == ALLOT_EIO);
            failures++;
        } else {
            done++;
        }
        /* all or nothing: one job, one audit entry per committed round */
        assert_int_equal(count_jobs(st, all), done);
        assert_int_equal(allot_store_audit_head(st, &seq, h), 0);
        assert_int_equal((size_t)seq, done);
        assert_int_equal(allot_store_audit_verify(st, NULL, NULL, 0), 0);
        if (used < n)
            break; /* the whole round ran without reaching the failure */
    }
    /* on PostgreSQL the writes allocate nothing through allot_malloc
     * (libpq's memory is its own): only reads meet the failures there */
    assert_true(failures > 0 || f->pg);
    print_message("alloc failures (%s): %lu allocations per round, %d rounds failed\n",
                  sticky ? "sticky" : "one-shot", n - 1, failures);
    allot_store_close(st);
    /* the same after a restart */
    st = open_ok(f);
    assert_int_equal(count_jobs(st, all), done);
    assert_int_equal(allot_store_audit_verify(st, NULL, NULL, 0), 0);
    allot_store_close(st);
}

static void test_alloc_failures(void **state)
{
    sqlite3_int64 base = sqlite3_memory_used();

    fault_loop(*state, false);
    fault_loop(*state, true);
    /* nothing SQLite allocated is left once every handle is closed (the
     * sanitizer build checks the store's own allocations; libpq's own
     * memory is not allot_malloc's, so on PostgreSQL only the back-end's
     * allocations fail) */
    assert_int_equal(sqlite3_memory_used(), base);
}

static void test_open_alloc_failures(void **state)
{
    struct fix *f = *state;
    struct allot_store *st;
    sqlite3_int64 base = sqlite3_memory_used();
    char err[256];

    /* creating and migrating a new database, failing every allocation */
    for (unsigned long n = 1;; n++) {
        unsigned long used;
        int rc;

        st = NULL;
        allot_alloc_fail_at(n, true);
        rc = allot_store_open(f->url, &create_opts, &st, err, sizeof err);
        used = allot_alloc_count();
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            assert_non_null(st);
            assert_int_equal(allot_store_schema_version(st), allot_store_schema_latest());
            allot_store_close(st);
            if (used < n)
                break;
            continue;
        }
        assert_null(st);
        assert_true(rc == ALLOT_ENOMEM || rc == ALLOT_EIO);
        assert_true(err[0] != '\0');
    }
    st = open_ok(f);
    assert_int_equal(allot_store_schema_version(st), allot_store_schema_latest());
    allot_store_close(st);
    assert_int_equal(sqlite3_memory_used(), base);
}

/* ---- a writer killed at a random moment -------------------------------------------------- */

/* The child: writes jobs named "c-V" (V unique) forever, alone or three to
 * a batch, and reports V on fd once the write's commit returned 0. */
static void crash_child(const char *url, int fd, int64_t base)
{
    struct allot_store *st = NULL;
    char err[256], name[32] = "";
    int64_t v = base, id, got[3];

    if (allot_store_open(url, &create_opts, &st, err, sizeof err) != 0)
        _exit(2);
    for (int i = 0;; i++) {
        int k = i % 4 == 0 ? 3 : 1;
        bool ok = true;

        if (k > 1 && allot_store_begin(st) != 0)
            _exit(3);
        for (int m = 0; m < k; m++) {
            struct allot_store_job j = mkjob("crash", name, 1);
            struct allot_store_audit a = {.time = v, .token_id = 1};

            allot_fmt(name, sizeof name, "c-%lld", (long long)v);
            j.idem_key = name;
            a.action = (char *)"job.submit";
            a.target = name;
            a.result = (char *)"ok";
            ok = ok && allot_store_job_submit(st, &j, &id, NULL) == 0 &&
                 allot_store_audit_append(st, &a, NULL) == 0;
            got[m] = v++;
        }
        if (!ok || (k > 1 && allot_store_commit(st) != 0))
            _exit(4);
        for (int m = 0; m < k; m++)
            if (write(fd, &got[m], sizeof got[m]) != (ssize_t)sizeof got[m])
                _exit(5);
    }
}

static void test_crash(void **state)
{
    struct fix *f = *state;
    struct allot_rng rng;
    int64_t *acked = NULL;
    size_t nacked = 0, cap = 0;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);

    print_message("crash test seed %llu\n", (unsigned long long)seed);
    allot_rng_seed(&rng, seed);
    for (int round = 0; round < 3; round++) {
        int fds[2], status;
        int64_t v;
        pid_t pid;

        assert_int_equal(pipe(fds), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(f->url, fds[1], (int64_t)round * 1000000);
        }
        close(fds[1]);
        /* wait for the first acknowledged write, then kill at random */
        assert_int_equal(read(fds[0], &v, sizeof v), (ssize_t)sizeof v);
        assert_int_equal(allot_grow((void **)&acked, &cap, nacked + 1, sizeof *acked), 0);
        acked[nacked++] = v;
        sleep_us((long)(1000 + allot_rng_below(&rng, 150000)));
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        for (;;) {
            ssize_t r = read(fds[0], &v, sizeof v);

            if (r == 0)
                break;
            assert_int_equal(r, (ssize_t)sizeof v);
            assert_int_equal(allot_grow((void **)&acked, &cap, nacked + 1, sizeof *acked), 0);
            acked[nacked++] = v;
        }
        close(fds[0]);

        /* every acknowledged write is there exactly once */
        {
            struct allot_store *st = open_ok(f);
            struct allot_store_job_filter fl = {.tenant = "crash", .limit = 1000};
            struct allot_store_job_page p;
            size_t total = 0, found = 0, k = 0;

            do {
                assert_int_equal(allot_store_job_list(st, &fl, &p), 0);
                for (size_t i = 0; i < p.n; i++) {
                    long long x = strtoll(p.jobs[i].name + 2, NULL, 10);

                    /* ids grow with V: acked (sorted) is matched in one pass */
                    while (k < nacked && acked[k] < x)
                        k++;
                    if (k < nacked && acked[k] == x)
                        found++;
                    total++;
                }
                fl.cursor = p.next_cursor;
                allot_store_job_page_free(&p);
            } while (fl.cursor);
            assert_int_equal(found, nacked);
            /* at most the batch in flight of each round got in
             * without its report */
            assert_true(total - found <= 3 * ((size_t)round + 1));
            assert_int_equal(allot_store_audit_verify(st, NULL, NULL, 0), 0);
            print_message("crash round %d: %zu writes acknowledged, %zu stored\n", round, nacked,
                          total);
            allot_store_close(st);
        }
    }
    free(acked);
}

/* ---- group commit ------------------------------------------------------------------------- */

#define GC_THREADS 8
#define GC_WRITES  500

struct gc_write {
    int thread, i;
    bool fail;
};

static int gc_write_fn(struct allot_store *st, void *arg)
{
    struct gc_write *w = arg;
    char name[32] = "";
    struct allot_store_job j = mkjob("gc", name, w->thread + 1);
    struct allot_store_audit a = {.time = w->i, .token_id = w->thread + 1};
    int64_t id;
    int rc;

    allot_fmt(name, sizeof name, "g%d-%d", w->thread, w->i);
    j.idem_key = name;
    a.action = (char *)"job.submit";
    a.target = name;
    a.result = (char *)"ok";
    if ((rc = allot_store_job_submit(st, &j, &id, NULL)) != 0 ||
        (rc = allot_store_audit_append(st, &a, NULL)) != 0)
        return rc;
    /* a write that fails after writing: its writes must be undone */
    return w->fail ? ALLOT_EINVAL : 0;
}

struct gc_thread {
    struct allot_store_gc *gc;
    int thread;
    int errors;
};

static void *gc_thread_main(void *arg)
{
    struct gc_thread *t = arg;

    for (int i = 0; i < GC_WRITES; i++) {
        struct gc_write w = {t->thread, i, i % 100 == 99};
        int rc = allot_store_gc_submit(t->gc, gc_write_fn, &w);

        if (rc != (w.fail ? ALLOT_EINVAL : 0))
            t->errors++;
    }
    return NULL;
}

/* Two handles writing at once without a group committer: the second waits
 * for the write lock (busy timeout) instead of failing. */
struct writer {
    const struct fix *f;
    int id, errors;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct allot_store *st = NULL;
    char err[256], name[32];

    if (allot_store_open(w->f->url, NULL, &st, err, sizeof err) != 0) {
        w->errors++;
        return NULL;
    }
    for (int i = 0; i < 100; i++) {
        struct allot_store_job j = mkjob("two", name, w->id);
        struct allot_store_audit a = {.time = i, .token_id = w->id};
        int64_t id;

        allot_fmt(name, sizeof name, "w%d-%d", w->id, i);
        a.action = (char *)"job.submit";
        a.target = a.result = name;
        if (i % 2) {
            w->errors += allot_store_job_submit(st, &j, &id, NULL) != 0;
            w->errors += allot_store_audit_append(st, &a, NULL) != 0;
        } else if (allot_store_begin(st) == 0) {
            w->errors += allot_store_job_submit(st, &j, &id, NULL) != 0;
            w->errors += allot_store_audit_append(st, &a, NULL) != 0;
            w->errors += allot_store_commit(st) != 0;
        } else {
            w->errors++;
        }
    }
    allot_store_close(st);
    return NULL;
}

static void test_two_writers(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct writer w[2] = {{f, 1, 0}, {f, 2, 0}};
    struct allot_store_job_filter fl = {.tenant = "two"};
    pthread_t t[2];
    int64_t seq;
    uint8_t h[ALLOT_STORE_HASH_LEN];

    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].errors, 0);
    }
    assert_int_equal(count_jobs(st, fl), 200);
    assert_int_equal(allot_store_audit_head(st, &seq, h), 0);
    assert_int_equal(seq, 200);
    assert_int_equal(allot_store_audit_verify(st, NULL, NULL, 0), 0);
    allot_store_close(st);
}

static void test_group_commit(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f), *rd = open_ok(f);
    struct allot_store_gc *gc = allot_store_gc_new(st, 64, 200);
    struct gc_thread th[GC_THREADS];
    pthread_t tid[GC_THREADS];
    struct allot_store_job_filter fl = {.tenant = "gc"};
    size_t want = GC_THREADS * (GC_WRITES - GC_WRITES / 100);
    uint64_t commits;
    int64_t seq;
    uint8_t h[ALLOT_STORE_HASH_LEN];

    assert_non_null(gc);
    assert_null(allot_store_gc_new(st, -1, 0));
    for (int i = 0; i < GC_THREADS; i++) {
        th[i] = (struct gc_thread){gc, i, 0};
        assert_int_equal(pthread_create(&tid[i], NULL, gc_thread_main, &th[i]), 0);
    }
    /* a reader on its own handle is never blocked by the writers (WAL) */
    for (int k = 0; k < 5; k++) {
        size_t seen = count_jobs(rd, fl);

        assert_true(seen <= want);
        sleep_us(10000);
    }
    /* an online backup while the writers run: a consistent copy (SQLite's;
     * a PostgreSQL server's backups are pg_dump's and the server's own) */
    if (!f->pg) {
        char bpath[160], burl[176];
        sqlite3 *src, *dst;
        sqlite3_backup *b;
        struct allot_store *bk;
        int r;

        allot_fmt(bpath, sizeof bpath, "%s/backup.db", f->dir);
        allot_fmt(burl, sizeof burl, "sqlite:%s", bpath);
        assert_int_equal(sqlite3_open(f->path, &src), SQLITE_OK);
        assert_int_equal(sqlite3_open(bpath, &dst), SQLITE_OK);
        sqlite3_busy_timeout(src, 5000);
        b = sqlite3_backup_init(dst, "main", src, "main");
        assert_non_null(b);
        /* as `sqlite3 DB ".backup FILE"` does: 100 pages a step */
        while ((r = sqlite3_backup_step(b, 100)) == SQLITE_OK || r == SQLITE_BUSY ||
               r == SQLITE_LOCKED)
            ;
        assert_int_equal(r, SQLITE_DONE);
        assert_int_equal(sqlite3_backup_finish(b), SQLITE_OK);
        sqlite3_close(dst);
        sqlite3_close(src);
        {
            char err[256];
            struct allot_store_opts plain = {0};
            int64_t bseq;

            assert_int_equal(allot_store_open(burl, &plain, &bk, err, sizeof err), 0);
            assert_int_equal(allot_store_audit_verify(bk, NULL, NULL, 0), 0);
            assert_int_equal(allot_store_audit_head(bk, &bseq, h), 0);
            /* every job in the copy has its audit entry: one transaction */
            assert_int_equal(count_jobs(bk, fl), (size_t)bseq);
            print_message("online backup: %lld writes in the copy\n", (long long)bseq);
            allot_store_close(bk);
        }
    }
    for (int i = 0; i < GC_THREADS; i++) {
        assert_int_equal(pthread_join(tid[i], NULL), 0);
        assert_int_equal(th[i].errors, 0);
    }
    commits = allot_store_gc_commits(gc);
    allot_store_gc_free(gc);
    allot_store_gc_free(NULL);
    print_message("group commit: %d writes in %llu transactions\n", GC_THREADS * GC_WRITES,
                  (unsigned long long)commits);
    assert_true(commits < (uint64_t)(GC_THREADS * GC_WRITES) / 2);
    assert_int_equal(count_jobs(rd, fl), want);
    assert_int_equal(allot_store_audit_head(rd, &seq, h), 0);
    assert_int_equal(seq, (int64_t)want);
    assert_int_equal(allot_store_audit_verify(rd, NULL, NULL, 0), 0);
    /* every job once, none of the failed ones */
    for (int t = 0; t < GC_THREADS; t++) {
        char name[32];
        struct allot_store_job_page p;

        for (int i = 95; i < 105; i++) {
            fl.name_prefix = name;
            allot_fmt(name, sizeof name, "g%d-%d", t, i);
            fl.limit = 10;
            assert_int_equal(allot_store_job_list(rd, &fl, &p), 0);
            /* "gT-99" is a prefix of no other name in 0..499 but "gT-99x" */
            if (i == 99)
                assert_int_equal(p.n, 0);
            else
                assert_true(p.n >= 1);
            allot_store_job_page_free(&p);
        }
    }
    allot_store_close(rd);
    allot_store_close(st);
}

/* ---- PostgreSQL: a connection lost between and inside batches ------------------------------- */

/* Ends every other session on the test's database, as a server restart or
 * a fail-over would. */
static void drop_sessions(const struct fix *f)
{
    char sql[200];

    allot_fmt(sql, sizeof sql,
              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'"
              " AND pid != pg_backend_pid()",
              f->db);
    assert_true(raw_int(f, sql) >= 0);
}

static void test_pg_reconnect(void **state)
{
    struct fix *f = *state;
    struct allot_store *st = open_ok(f);
    struct allot_store_job_filter all = {0};
    int64_t seq;
    uint8_t h[ALLOT_STORE_HASH_LEN];

    submit(st, "t", "before");
    /* lost between two calls: the next one connects again */
    drop_sessions(f);
    assert_int_equal(count_jobs(st, all), 1);
    drop_sessions(f);
    submit(st, "t", "after");
    /* lost inside a batch: the batch fails whole, nothing of it is kept */
    assert_int_equal(allot_store_begin(st), 0);
    submit(st, "t", "lost");
    drop_sessions(f);
    {
        struct allot_store_job j = mkjob("t", "lost-2", 1);
        int64_t id;

        assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), ALLOT_EIO);
    }
    assert_int_equal(allot_store_commit(st), ALLOT_EIO);
    /* and the handle works again */
    submit(st, "t", "again");
    assert_int_equal(count_jobs(st, all), 3);
    {
        struct allot_store_job_filter lost = {.name_prefix = "lost"};

        assert_int_equal(count_jobs(st, lost), 0);
    }
    assert_int_equal(allot_store_audit_head(st, &seq, h), 0);
    allot_store_close(st);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_alloc_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
    };
    /* --pg: on the PostgreSQL back-end (ALLOT_TEST_PG, set by
     * scripts/pg_sandbox.py) */
    const struct CMUnitTest pg_tests[] = {
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pg_reconnect, setup, teardown),
    };

    return FIX_RUN(argc, argv, tests, pg_tests);
}
