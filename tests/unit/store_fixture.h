/*
 * Fixture shared by the store's unit tests (test_store.c, test_store_stress.c):
 * a folder of its own under /tmp per test (mkdtemp; removed with its files
 * by the teardown), opening the store there, direct SQL on the file, and
 * small job helpers. Include after cmocka.h.
 *
 * With fix_pg_server set (a test program's --pg: the URL of a PostgreSQL
 * server, from scripts/pg_sandbox.py) the same tests run on the PostgreSQL
 * back-end instead: each test gets a database of its own (created by the
 * setup, dropped by the teardown), and raw_sql/raw_int talk to it. raw_sql
 * answers in SQLite's codes either way: SQLITE_OK, SQLITE_CONSTRAINT for a
 * statement a constraint or trigger refused, SQLITE_ERROR otherwise.
 */
#ifndef ALLOT_TESTS_STORE_FIXTURE_H
#define ALLOT_TESTS_STORE_FIXTURE_H

#include "allot/common.h"
#include "allot/store.h"

#include <dirent.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fix {
    char dir[64];
    char url[256];  /* "sqlite:DIR/allot.db", or the PostgreSQL database's URL */
    char path[128]; /* DIR/allot.db */
    bool pg;        /* on the PostgreSQL back-end */
    char db[64];    /* its database */
};

/* The PostgreSQL server the tests run on ("postgres://USER@HOST:PORT"), or
 * NULL for SQLite. */
static const char *fix_pg_server;

/* Runs constant SQL on the server's maintenance database; 0 when it ran. */
static inline int pg_admin(const char *sql)
{
    char url[256];
    PGconn *c;
    PGresult *r;
    int rc;

    allot_fmt(url, sizeof url, "%s/postgres", fix_pg_server ? fix_pg_server : "");
    c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "pg_admin: %s", PQerrorMessage(c));
        PQfinish(c);
        return -1;
    }
    r = PQexec(c, sql);
    rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
    if (rc != 0)
        fprintf(stderr, "pg_admin: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return rc;
}

static inline int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);

    if (!f)
        return -1;
    allot_strlcpy(f->dir, "/tmp/allot-store-XXXXXX", sizeof f->dir);
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    allot_fmt(f->path, sizeof f->path, "%s/allot.db", f->dir);
    allot_fmt(f->url, sizeof f->url, "sqlite:%s", f->path);
    if (fix_pg_server) {
        static unsigned counter;
        char sql[160];

        f->pg = true;
        allot_fmt(f->db, sizeof f->db, "allot_t%ld_%u", (long)getpid(), ++counter);
        allot_fmt(sql, sizeof sql,
                  "CREATE DATABASE %s TEMPLATE template0 ENCODING 'SQL_ASCII'"
                  " LC_COLLATE 'C' LC_CTYPE 'C'",
                  f->db);
        if (pg_admin(sql) != 0) {
            rmdir(f->dir);
            free(f);
            return -1;
        }
        allot_fmt(f->url, sizeof f->url, "%s/%s", fix_pg_server, f->db);
    }
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    struct fix *f = *state;
    DIR *d = opendir(f->dir);
    struct dirent *e;
    char p[512];

    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        allot_fmt(p, sizeof p, "%s/%s", f->dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(f->dir);
    if (f->pg) {
        char sql[128];

        allot_fmt(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", f->db);
        pg_admin(sql);
    }
    free(f);
    return 0;
}

/* A store test program's main: with --pg the PostgreSQL list on the server
 * ALLOT_TEST_PG names (scripts/pg_sandbox.py sets it), else the SQLite one. */
#define FIX_RUN(argc, argv, tests, pg_tests)                                                       \
    ((argc) > 1 && strcmp((argv)[1], "--pg") == 0                                                  \
         ? (fix_pg_server = getenv("ALLOT_TEST_PG")) && *fix_pg_server                             \
               ? cmocka_run_group_tests_name("postgres", pg_tests, NULL, NULL)                     \
               : (fprintf(stderr, "--pg needs ALLOT_TEST_PG (run under scripts/pg_sandbox.py)\n"), \
                  2)                                                                               \
         : cmocka_run_group_tests(tests, NULL, NULL))

static const struct allot_store_opts create_opts = {.flags =
                                                        ALLOT_STORE_CREATE | ALLOT_STORE_MIGRATE};

static inline struct allot_store *open_ok(const struct fix *f)
{
    struct allot_store *st = NULL;
    char err[256];
    int rc = allot_store_open(f->url, &create_opts, &st, err, sizeof err);

    if (rc != 0)
        fail_msg("open %s: %s", f->url, err);
    return st;
}

/* Runs constant SQL on the database file directly, as an operator (or an
 * attacker) with the file would. */
static inline int raw_sql(const struct fix *f, const char *sql)
{
    sqlite3 *db;
    int r;

    if (f->pg) {
        PGconn *c = PQconnectdb(f->url);
        PGresult *res = PQexec(c, sql);
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

        r = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK
                ? SQLITE_OK
            : state && (strncmp(state, "23", 2) == 0 || strcmp(state, "P0001") == 0)
                ? SQLITE_CONSTRAINT
                : SQLITE_ERROR;
        PQclear(res);
        PQfinish(c);
        return r;
    }
    r = sqlite3_open(f->path, &db);

    if (r == SQLITE_OK)
        r = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return r;
}

static inline int64_t raw_int(const struct fix *f, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    int64_t v = -1;

    if (f->pg) {
        PGconn *c = PQconnectdb(f->url);
        PGresult *res = PQexec(c, sql);

        assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
        if (PQntuples(res) > 0)
            v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        PQfinish(c);
        return v;
    }
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* True when the n bytes at buf contain the string s. */
static inline bool contains(const char *buf, size_t n, const char *s)
{
    size_t k = strlen(s);

    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(buf + i, s, k) == 0)
            return true;
    return false;
}

static inline void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

    nanosleep(&ts, NULL);
}

static inline struct allot_store_job mkjob(const char *tenant, const char *name, int64_t token)
{
    struct allot_store_job j = {0};

    j.tenant = (char *)tenant;
    j.name = (char *)name;
    j.token_id = token;
    j.spec = (char *)"{\"tasks\":1,\"gpu\":1}";
    j.state = ALLOT_SJ_PENDING;
    j.submit_time = 1000;
    return j;
}

static inline int64_t submit(struct allot_store *st, const char *tenant, const char *name)
{
    struct allot_store_job j = mkjob(tenant, name, 1);
    int64_t id = 0;

    assert_int_equal(allot_store_job_submit(st, &j, &id, NULL), 0);
    assert_true(id > 0);
    return id;
}

/* Number of jobs matching f, walking every page. */
static inline size_t count_jobs(struct allot_store *st, struct allot_store_job_filter f)
{
    struct allot_store_job_page p;
    size_t n = 0;

    f.cursor = 0;
    if (!f.limit)
        f.limit = 1000;
    do {
        assert_int_equal(allot_store_job_list(st, &f, &p), 0);
        n += p.n;
        f.cursor = p.next_cursor;
        allot_store_job_page_free(&p);
    } while (f.cursor);
    return n;
}

#endif
