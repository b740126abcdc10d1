/*
 * The PostgreSQL back-end of allot-store (URL "postgres://USER@HOST:PORT/DB"
 * or "postgresql://...", any libpq connection URI): the store of several
 * allotd replicas sharing one database (docs/store.md, "PostgreSQL").
 *
 * Same contract as the SQLite back-end, mapped onto a server:
 * - A batch is a transaction that takes one transaction-level advisory lock
 *   (the write lock) at once, as SQLite's BEGIN IMMEDIATE does: a
 *   read-then-write inside a batch (the audit chain's head, an idempotency
 *   key) cannot be overtaken by another writer, on this handle or in
 *   another replica. The busy timeout is the session's lock_timeout.
 * - Inner batches and every typed write are savepoints, so a failed write
 *   undoes only itself (PostgreSQL aborts the whole transaction otherwise).
 * - Durability is the server's: synchronous_commit is set to on, so a
 *   returned COMMIT has been flushed by the server.
 * - Strings are stored byte for byte: the database must use the SQL_ASCII
 *   encoding (no conversion, no validation), checked on open, and text
 *   columns compare as bytes (COLLATE "C").
 * - Every value reaches SQL as a parameter (PQexecParams); the one SQL text
 *   built at run time, the job listing, is assembled from constant
 *   fragments.
 * - A connection lost between batches is re-established at the next call;
 *   one lost inside a batch fails the batch (ALLOT_EIO).
 *
 * libpq's own memory is its own (malloc), so allot_alloc_fail_at() fails
 * only this file's allocations.
 */
#include "store_pg.h"

#include "allot/common.h"

#include <stdlib.h>
#include <string.h>

/* advisory lock keys ("allt" and a number): the write lock taken by every
 * batch, and the lock that serialises schema checks and migrations of
 * replicas starting together */
#define PG_LOCK_WRITE   0x616c6c7401LL
#define PG_LOCK_MIGRATE 0x616c6c7402LL
#define PG_LOCK_LEAD    0x616c6c7403LL

/* ---- parameters -------------------------------------------------------------- */

void pgp_int(struct pgp *p, int64_t v)
{
    if (ALLOT_NEVER(p->n >= PG_MAX_PARAMS))
        return;
    allot_fmt(p->num[p->n], sizeof p->num[p->n], "%lld", (long long)v);
    p->v[p->n] = p->num[p->n];
    p->len[p->n] = 0;
    p->fmt[p->n++] = 0;
}

void pgp_real(struct pgp *p, double v)
{
    if (ALLOT_NEVER(p->n >= PG_MAX_PARAMS))
        return;
    allot_fmt(p->num[p->n], sizeof p->num[p->n], "%.17g", v);
    p->v[p->n] = p->num[p->n];
    p->len[p->n] = 0;
    p->fmt[p->n++] = 0;
}

/* A borrowed string; NULL binds SQL NULL. */
void pgp_text(struct pgp *p, const char *s)
{
    if (ALLOT_NEVER(p->n >= PG_MAX_PARAMS))
        return;
    p->v[p->n] = s;
    p->len[p->n] = 0;
    p->fmt[p->n++] = 0;
}

/* Borrowed bytes, sent in binary (a bytea). */
void pgp_bytes(struct pgp *p, const void *b, int len)
{
    if (ALLOT_NEVER(p->n >= PG_MAX_PARAMS))
        return;
    p->v[p->n] = b;
    p->len[p->n] = len;
    p->fmt[p->n++] = 1;
}

/* ---- errors and statements --------------------------------------------------- */

/* Maps a failed result (NULL: out of memory or no connection) to an
 * ALLOT_E* code and records the server's text. */
static int pg_fail(struct pg_store *s, const PGresult *res)
{
    const char *state, *msg;

    if (!res) {
        if (s->broken) {
            store_set_err(&s->base, "postgres: the connection was left in an unknown state: %s",
                          PQerrorMessage(s->conn));
            return ALLOT_EIO;
        }
        if (PQstatus(s->conn) == CONNECTION_BAD) {
            store_set_err(&s->base, "postgres: %s", PQerrorMessage(s->conn));
            return ALLOT_EIO;
        }
        store_set_err(&s->base, "postgres: out of memory");
        return ALLOT_ENOMEM;
    }
    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    store_set_err(&s->base, "postgres: %s", msg ? msg : PQresultErrorMessage(res));
    if (!state)
        return ALLOT_EIO;            /* the connection broke */
    if (strcmp(state, "23505") == 0) /* unique_violation */
        return ALLOT_EEXIST;
    if (strcmp(state, "23503") == 0) /* foreign_key_violation */
        return ALLOT_ENOENT;
    if (strcmp(state, "P0001") == 0) /* raise_exception: the append-only triggers */
        return ALLOT_ESTATE;
    if (strncmp(state, "23", 2) == 0 || strncmp(state, "22", 2) == 0)
        return ALLOT_EINVAL;         /* other constraints, data exceptions */
    if (strcmp(state, "53200") == 0) /* out_of_memory (the server's) */
        return ALLOT_ENOMEM;
    return ALLOT_EIO;
}

static int pg_session(struct pg_store *s);

/* Outside a transaction of ours, a connection that broke since the last
 * call (a server restart, a fail-over behind a proxy) is opened again with
 * the session's settings. Never inside one: a COMMIT on a new connection
 * would "succeed" with nothing to commit. True when conn is usable. */
static bool pg_revive(struct pg_store *s)
{
    if (PQstatus(s->conn) == CONNECTION_OK && s->session_ok && !s->broken)
        return true;
    if (s->in_tx)
        return false;
    if (PQstatus(s->conn) != CONNECTION_OK || s->broken) {
        s->session_ok = false;
        s->broken = false;
        PQreset(s->conn);
        s->n_prepared = 0; /* a new session has none */
        if (PQstatus(s->conn) != CONNECTION_OK)
            return false;
        ALLOT_LOG(ALLOT_LOG_INFO, "store", "postgres: connected again");
    }
    if (pg_session(s) != 0)
        return false;
    s->session_ok = true;
    return true;
}

/* The index of sql among the session's prepared statements; n_prepared
 * when it is not prepared yet, PG_MAX_PREPARED when it will not be. */
static int pg_prepared(const struct pg_store *s, const char *sql)
{
    int i;

    for (i = 0; i < s->n_prepared && s->prepared[i] != sql; i++)
        ;
    return i;
}

/*
 * Sends the pending transaction-control statements and then sql (NULL:
 * none) in one pipeline and one round trip. Returns sql's result, or the
 * first failed result (a pending statement's: what comes after it is not
 * run), or NULL when the connection broke; with sql NULL an empty
 * PGRES_COMMAND_OK result when everything ran.
 */
static PGresult *pg_pipeline(struct pg_store *s, const char *sql, const struct pgp *p,
                             const unsigned *types)
{
    int idx = p ? pg_prepared(s, sql) : PG_MAX_PREPARED, pending = s->n_pending;
    int sent = 0, prep_at = -1, bad_at = -1;
    bool ok, synced = false, readable;
    PGresult *bad = NULL, *main = NULL, *r;
    char name[16];

    s->n_pending = 0;
    if (PQenterPipelineMode(s->conn) != 1) {
        s->broken = s->tx_failed = true;
        return NULL;
    }
    allot_fmt(name, sizeof name, "a%d", idx);
    ok = true;
    for (int i = 0; ok && i < pending; i++)
        if ((ok = PQsendQueryParams(s->conn, s->pending[i], 0, NULL, NULL, NULL, NULL, 0) == 1))
            sent++;
    if (ok && sql) {
        if (!p || idx == PG_MAX_PREPARED) {
            ok = PQsendQueryParams(s->conn, sql, p ? p->n : 0, types, p ? p->v : NULL,
                                   p ? p->len : NULL, p ? p->fmt : NULL, 0) == 1;
        } else {
            if (idx == s->n_prepared) {
                ok = PQsendPrepare(s->conn, name, sql, p->n, types) == 1;
                if (ok)
                    prep_at = sent++;
            }
            ok = ok && PQsendQueryPrepared(s->conn, name, p->n, p->v, p->len, p->fmt, 0) == 1;
        }
        if (ok)
            sent++;
    }
    /* what was sent is answered, also when sending the rest failed */
    synced = PQpipelineSync(s->conn) == 1;
    ok = ok && synced;
    readable = synced;
    /* each statement's result, then a NULL; then the sync's */
    for (int k = 0; readable && k < sent; k++) {
        if (!(r = PQgetResult(s->conn))) {
            readable = false;
            break;
        }
        if (k == prep_at && PQresultStatus(r) == PGRES_COMMAND_OK)
            s->prepared[s->n_prepared++] = sql; /* a Parse outlives a rollback */
        if (ok && sql && k == sent - 1 && !bad)
            main = r;
        else if (ok && PQresultStatus(r) != PGRES_COMMAND_OK && !bad) {
            bad = r;
            bad_at = k;
        } else
            PQclear(r);
        while ((r = PQgetResult(s->conn)))
            PQclear(r);
    }
    if (readable) {
        r = PQgetResult(s->conn);
        readable = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
        PQclear(r);
    }
    if (!readable || PQexitPipelineMode(s->conn) != 1) {
        /* the connection's state is unknown: it is reset before its next use
         * (outside a transaction), and this transaction cannot commit */
        s->broken = s->tx_failed = true;
        PQclear(bad);
        PQclear(main);
        return NULL;
    }
    if (!ok) {
        s->tx_failed = true; /* some of the queue never ran */
        PQclear(bad);
        PQclear(main);
        return NULL;
    }
    if (bad) {
        /* a failed BEGIN, SAVEPOINT, RELEASE or ROLLBACK TO: it belongs to
         * no write store.c could undo alone, so the transaction fails */
        if (bad_at < pending)
            s->tx_failed = true;
        PQclear(main);
        return bad;
    }
    return sql ? main : PQmakeEmptyPGresult(s->conn, PGRES_COMMAND_OK);
}

/* Runs sql: a statement with parameters is prepared once per session
 * (named by its place in s->prepared) and executed from then on, which
 * spares the server parsing and planning it again; one without runs as it
 * is. Pending transaction-control statements go first, in the same round
 * trip. */
static PGresult *pg_exec(struct pg_store *s, const char *sql, const struct pgp *p,
                         const unsigned *types)
{
    char name[16];
    int i;

    if (s->n_pending)
        return pg_pipeline(s, sql, p, types);
    if (!p)
        return PQexecParams(s->conn, sql, 0, NULL, NULL, NULL, NULL, 0);
    i = pg_prepared(s, sql);
    if (i == s->n_prepared) {
        PGresult *res;

        if (i == PG_MAX_PREPARED)
            return PQexecParams(s->conn, sql, p->n, types, p->v, p->len, p->fmt, 0);
        allot_fmt(name, sizeof name, "a%d", i);
        res = PQprepare(s->conn, name, sql, p->n, types);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
            return res;
        PQclear(res);
        s->prepared[s->n_prepared++] = sql;
    }
    allot_fmt(name, sizeof name, "a%d", i);
    return PQexecPrepared(s->conn, name, p->n, p->v, p->len, p->fmt, 0);
}

/* Queues a transaction-control statement (a constant) for the next round
 * trip; a full queue is sent at once. */
static int pg_defer(struct pg_store *s, const char *sql)
{
    if (s->n_pending == PG_MAX_PENDING) {
        PGresult *res = pg_pipeline(s, NULL, NULL, NULL);
        int rc = res && PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : pg_fail(s, res);

        PQclear(res);
        if (rc)
            return rc;
    }
    s->pending[s->n_pending++] = sql;
    return 0;
}

/*
 * Runs sql with the parameters p (NULL: none; types inferred, or `types`
 * when given) and returns its text result, or NULL with *rc set. A
 * statement outside a transaction of ours that fails because the
 * connection broke is run once more on a new connection.
 */
static PGresult *pg_run_typed(struct pg_store *s, const char *sql, const struct pgp *p,
                              const unsigned *types, int *rc)
{
    PGresult *res;
    ExecStatusType st;

    if (s->in_tx && s->tx_failed) {
        store_set_err(&s->base, "postgres: a statement of this transaction had failed");
        *rc = ALLOT_EIO;
        return NULL;
    }
    if (!pg_revive(s)) {
        store_set_err(&s->base, "postgres: connection lost: %s", PQerrorMessage(s->conn));
        *rc = ALLOT_EIO;
        return NULL;
    }
    res = pg_exec(s, sql, p, types);
    st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && !s->in_tx &&
        PQstatus(s->conn) == CONNECTION_BAD) {
        PQclear(res);
        res = pg_revive(s) ? pg_exec(s, sql, p, types) : NULL;
        st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    }
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        *rc = 0;
        return res;
    }
    *rc = pg_fail(s, res);
    PQclear(res);
    return NULL;
}

PGresult *pg_run(struct pg_store *s, const char *sql, const struct pgp *p, int *rc)
{
    return pg_run_typed(s, sql, p, NULL, rc);
}

/* Runs a statement whose result is not needed; 0 or the mapped error. */
int pg_do(struct pg_store *s, const char *sql, const struct pgp *p)
{
    int rc;
    PGresult *res = pg_run(s, sql, p, &rc);

    PQclear(res);
    return rc;
}

/* Runs a write; *changed gets the number of rows it touched. */
int pg_write(struct pg_store *s, const char *sql, const struct pgp *p, long *changed)
{
    int rc;
    PGresult *res = pg_run(s, sql, p, &rc);

    *changed = res ? strtol(PQcmdTuples(res), NULL, 10) : 0;
    PQclear(res);
    return rc;
}

/* Like pg_write, but a write that touched no row is ALLOT_ENOENT. */
int pg_write_one(struct pg_store *s, const char *sql, const struct pgp *p)
{
    long changed = 0;
    int rc = pg_write(s, sql, p, &changed);

    if (rc == 0 && changed == 0) {
        store_set_err(&s->base, "no such object");
        return ALLOT_ENOENT;
    }
    return rc;
}

/* ---- columns ------------------------------------------------------------------- */

int64_t pg_col_i64(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? 0 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* Copies a text column (NULL for SQL NULL); 0 or ALLOT_ENOMEM. */
int pg_col_text(const PGresult *res, int row, int col, char **out)
{
    *out = NULL;
    if (PQgetisnull(res, row, col))
        return 0;
    *out = store_dupn(PQgetvalue(res, row, col), (size_t)PQgetlength(res, row, col));
    return *out ? 0 : ALLOT_ENOMEM;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A bytea column of exactly ALLOT_STORE_HASH_LEN bytes (text form "\x.."),
 * zeros and ALLOT_EIO otherwise. */
int pg_col_hash(const PGresult *res, int row, int col, uint8_t out[ALLOT_STORE_HASH_LEN])
{
    const char *t = PQgetvalue(res, row, col);

    memset(out, 0, ALLOT_STORE_HASH_LEN);
    if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != 2 + 2 * ALLOT_STORE_HASH_LEN ||
        t[0] != '\\' || t[1] != 'x')
        return ALLOT_EIO;
    for (int i = 0; i < ALLOT_STORE_HASH_LEN; i++) {
        int hi = hexval(t[2 + 2 * i]), lo = hexval(t[3 + 2 * i]);

        if (hi < 0 || lo < 0) {
            memset(out, 0, ALLOT_STORE_HASH_LEN);
            return ALLOT_EIO;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* Parses an enumeration column against `name`; ALLOT_EIO when unknown. */
int pg_col_enum(struct pg_store *s, const PGresult *res, int row, int col, const char *(*name)(int),
                int *out)
{
    const char *t = PQgetvalue(res, row, col);

    for (int k = 0; name(k); k++)
        if (strcmp(t, name(k)) == 0) {
            *out = k;
            return 0;
        }
    store_set_err(&s->base, "unknown value '%s' in column %d", t, col);
    return ALLOT_EIO;
}

/* ---- reading rows into arrays --------------------------------------------------- */

/*
 * Runs sql and fills a new array *out of *n elements of `size` bytes, one
 * per row, with fn. On failure every element is cleared, the array freed,
 * *out NULL and *n 0.
 */
static int pg_rows_typed(struct pg_store *s, const char *sql, const struct pgp *p,
                         const unsigned *types, size_t size, pg_row_fn fn, pg_clear_fn clear,
                         void **out, size_t *n)
{
    unsigned char *arr = NULL;
    size_t count = 0;
    int rc, rows;
    PGresult *res = pg_run_typed(s, sql, p, types, &rc);

    *out = NULL;
    *n = 0;
    if (!res)
        return rc;
    rows = PQntuples(res);
    if (rows > 0) {
        arr = allot_calloc((size_t)rows, size);
        if (!arr)
            rc = ALLOT_ENOMEM;
    }
    for (int r = 0; rc == 0 && r < rows; r++) {
        count++; /* counted first: a half-filled element is cleared below */
        rc = fn(s, res, r, arr + (size_t)r * size);
    }
    PQclear(res);
    if (rc != 0) {
        for (size_t i = 0; i < count; i++)
            clear(arr + i * size);
        allot_free(arr);
        return rc;
    }
    *out = arr;
    *n = count;
    return 0;
}

int pg_rows(struct pg_store *s, const char *sql, const struct pgp *p, size_t size, pg_row_fn fn,
            pg_clear_fn clear, void **out, size_t *n)
{
    return pg_rows_typed(s, sql, p, NULL, size, fn, clear, out, n);
}

/* Like pg_rows for a query of at most one row: fills *out with it,
 * ALLOT_ENOENT when there is none. */
int pg_row(struct pg_store *s, const char *sql, const struct pgp *p, size_t size, pg_row_fn fn,
           pg_clear_fn clear, void *out)
{
    unsigned char *arr = NULL;
    size_t n = 0;
    int rc = pg_rows(s, sql, p, size, fn, clear, (void **)&arr, &n);

    return rc != 0 ? rc : store_take_first(arr, n, size, clear, out);
}

/* One bigint from a query (0 when it has no row). */
int pg_int(struct pg_store *s, const char *sql, const struct pgp *p, int64_t *v)
{
    int rc;
    PGresult *res = pg_run(s, sql, p, &rc);

    *v = res && PQntuples(res) > 0 ? pg_col_i64(res, 0, 0) : 0;
    PQclear(res);
    return rc;
}

/* ---- transactions ------------------------------------------------------------------ */

static int pg_begin(struct allot_store *base, int depth)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};
    int rc = 0;

    if (depth > 0)
        return pg_defer(s, "SAVEPOINT w");
    s->n_pending = 0;
    s->tx_failed = false;
    /* a transaction left behind by a failed rollback goes first */
    s->in_tx = false;
    if (!s->broken && PQtransactionStatus(s->conn) != PQTRANS_IDLE &&
        PQtransactionStatus(s->conn) != PQTRANS_UNKNOWN)
        pg_do(s, "ROLLBACK", NULL);
    pgp_int(&p, PG_LOCK_WRITE);
    /* BEGIN and the write lock in one round trip; tried once more on a new
     * connection when the old one turns out broken (nothing ran yet) */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!pg_revive(s)) {
            store_set_err(&s->base, "postgres: connection lost: %s", PQerrorMessage(s->conn));
            return ALLOT_EIO;
        }
        s->n_pending = 0;
        s->pending[s->n_pending++] = "BEGIN";
        s->in_tx = true; /* no statement of it is rerun on its own */
        if ((rc = pg_do(s, "SELECT pg_advisory_xact_lock($1::bigint)", &p)) == 0)
            return 0;
        s->in_tx = false;
        s->n_pending = 0;
        s->tx_failed = false;
        if (PQstatus(s->conn) != CONNECTION_BAD && !s->broken)
            break;
    }
    {
        char why[STORE_ERR_MAX];

        allot_strlcpy(why, s->base.err, sizeof why);
        if (!s->broken && PQtransactionStatus(s->conn) != PQTRANS_IDLE &&
            PQtransactionStatus(s->conn) != PQTRANS_UNKNOWN)
            pg_do(s, "ROLLBACK", NULL);
        store_set_err(&s->base, "%s (waiting for the write lock)", why);
    }
    return rc;
}

static int pg_commit(struct allot_store *base, int depth)
{
    struct pg_store *s = (struct pg_store *)base;
    PGresult *res;
    int rc;

    if (depth > 0) {
        /* a savepoint nothing ran in since: neither is sent */
        if (s->n_pending && !strcmp(s->pending[s->n_pending - 1], "SAVEPOINT w")) {
            s->n_pending--;
            return 0;
        }
        return pg_defer(s, "RELEASE SAVEPOINT w");
    }
    if (!s->in_tx || s->tx_failed || PQtransactionStatus(s->conn) == PQTRANS_IDLE) {
        store_set_err(&s->base, "postgres: %s",
                      s->tx_failed ? "a statement of this transaction had failed"
                                   : "no transaction to commit");
        return ALLOT_EIO;
    }
    /* the pending statements and COMMIT in one round trip; COMMIT of a
     * transaction that had failed "succeeds" as ROLLBACK: its tag says */
    res = pg_run(s, "COMMIT", NULL, &rc);
    s->in_tx = false;
    s->n_pending = 0;
    if (res && strcmp(PQcmdStatus(res), "COMMIT") != 0) {
        store_set_err(&s->base, "postgres: the transaction had failed: rolled back");
        rc = ALLOT_EIO;
    }
    PQclear(res);
    if (rc == 0 && PQtransactionStatus(s->conn) != PQTRANS_IDLE) {
        store_set_err(&s->base, "postgres: COMMIT left the transaction open");
        return ALLOT_EIO;
    }
    return rc;
}

static int pg_rollback(struct allot_store *base, int depth)
{
    struct pg_store *s = (struct pg_store *)base;
    int rc;

    if (depth == 0) {
        s->in_tx = false;
        s->tx_failed = false;
        s->n_pending = 0; /* undone with the rest */
        if (s->broken) {
            pg_revive(s); /* a new session: the server ends the old transaction */
            return 0;
        }
        if (PQtransactionStatus(s->conn) == PQTRANS_IDLE ||
            PQtransactionStatus(s->conn) == PQTRANS_UNKNOWN)
            return 0;
        return pg_do(s, "ROLLBACK", NULL);
    }
    if (s->n_pending && !strcmp(s->pending[s->n_pending - 1], "SAVEPOINT w")) {
        s->n_pending--;
        return 0;
    }
    rc = pg_defer(s, "ROLLBACK TO SAVEPOINT w");
    if (rc == 0)
        rc = pg_defer(s, "RELEASE SAVEPOINT w");
    return rc;
}

/* ---- meta ----------------------------------------------------------------------------- */

static int meta_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    (void)s;
    return pg_col_text(res, row, 0, elem);
}

static void meta_clear(void *elem)
{
    allot_free(*(char **)elem);
}

static int pg_meta_get(struct allot_store *base, const char *key, char **value)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_text(&p, key);
    return pg_row(s, "SELECT value FROM meta WHERE key = $1", &p, sizeof *value, meta_row,
                  meta_clear, value);
}

static int pg_meta_set(struct allot_store *base, const char *key, const char *value)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_text(&p, key);
    pgp_text(&p, value);
    return pg_do(s,
                 "INSERT INTO meta(key, value) VALUES ($1, $2)"
                 " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                 &p);
}

/* ---- leadership --------------------------------------------------------------------------- */

/* The lead is a session advisory lock: the server drops it when the session
 * ends (the process died, the network broke), and another replica's next
 * try takes it. A handle tells it still holds the lock by its session's
 * server process id: a connection opened again is a new session without it. */
static int pg_lead(struct allot_store *base, bool *leading)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};
    PGresult *res;
    int rc;

    *leading = false;
    if (s->lead_lost)
        return 0;
    if (s->lead_pid) {
        if (PQstatus(s->conn) != CONNECTION_OK) {
            s->lead_lost = true;
            return 0;
        }
        res = PQexec(s->conn, "SELECT pg_backend_pid()");
        if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
            pg_col_i64(res, 0, 0) != s->lead_pid) {
            PQclear(res);
            s->lead_lost = true;
            return 0;
        }
        PQclear(res);
        *leading = true;
        return 0;
    }
    pgp_int(&p, PG_LOCK_LEAD);
    if (!(res = pg_run(s, "SELECT pg_try_advisory_lock($1::bigint), pg_backend_pid()", &p, &rc)))
        return rc;
    if (PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
        s->lead_pid = (int)pg_col_i64(res, 0, 1);
        *leading = true;
    }
    PQclear(res);
    return 0;
}

/* ---- jobs ------------------------------------------------------------------------------ */

static int job_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_job *j = elem;
    int rc;

    j->id = pg_col_i64(res, row, 0);
    j->token_id = pg_col_i64(res, row, 3);
    j->submit_time = pg_col_i64(res, row, 8);
    j->start_time = pg_col_i64(res, row, 9);
    j->end_time = pg_col_i64(res, row, 10);
    j->has_exit_code = !PQgetisnull(res, row, 11);
    j->exit_code = (int)pg_col_i64(res, row, 11);
    j->array_parent = pg_col_i64(res, row, 12);
    j->array_index = (int)pg_col_i64(res, row, 13);
    j->held = pg_col_i64(res, row, 15) != 0;
    if ((rc = pg_col_text(res, row, 1, &j->tenant)) || (rc = pg_col_text(res, row, 2, &j->name)) ||
        (rc = pg_col_text(res, row, 4, &j->spec)) ||
        (rc = pg_col_text(res, row, 6, &j->placement)) ||
        (rc = pg_col_text(res, row, 7, &j->pending_reason)) ||
        (rc = pg_col_text(res, row, 14, &j->idem_key)) ||
        (rc = pg_col_text(res, row, 16, &j->user)) ||
        (rc = pg_col_enum(s, res, row, 5, allot_store_job_state_name, &j->state)))
        return rc;
    return 0;
}

static int pg_job_insert(struct allot_store *base, const struct allot_store_job *j, int64_t *id,
                         bool *existed)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};
    PGresult *res;
    int rc;

    *existed = false;
    if (j->idem_key) {
        pgp_int(&p, j->token_id);
        pgp_text(&p, j->idem_key);
        if (!(res =
                  pg_run(s, "SELECT id FROM jobs WHERE token_id = $1 AND idem_key = $2", &p, &rc)))
            return rc;
        if (PQntuples(res) > 0) {
            *id = pg_col_i64(res, 0, 0);
            *existed = true;
        }
        PQclear(res);
        if (*existed)
            return 0;
    }
    memset(&p, 0, sizeof p);
    pgp_text(&p, j->tenant);
    pgp_text(&p, j->name);
    pgp_int(&p, j->token_id);
    pgp_text(&p, j->spec);
    pgp_text(&p, allot_store_job_state_name(j->state));
    pgp_text(&p, j->placement);
    pgp_text(&p, j->pending_reason);
    pgp_int(&p, j->submit_time);
    pgp_int(&p, j->start_time);
    pgp_int(&p, j->end_time);
    if (j->has_exit_code)
        pgp_int(&p, j->exit_code);
    else
        pgp_text(&p, NULL);
    pgp_int(&p, j->array_parent);
    pgp_int(&p, j->array_index);
    pgp_text(&p, j->idem_key);
    pgp_int(&p, j->held);
    if (!(res = pg_run(s,
                       "INSERT INTO jobs(tenant, name, token_id, spec, state, placement,"
                       " pending_reason, submit_time, start_time, end_time, exit_code,"
                       " array_parent, array_index, idem_key, held)"
                       " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
                       " $15)"
                       " RETURNING id",
                       &p, &rc)))
        return rc;
    *id = pg_col_i64(res, 0, 0);
    PQclear(res);
    if (j->array_parent == ALLOT_STORE_ARRAY_NEW) {
        memset(&p, 0, sizeof p);
        pgp_int(&p, *id);
        if ((rc = pg_do(s, "UPDATE jobs SET array_parent = id WHERE id = $1", &p)) != 0)
            return rc;
    }
    for (size_t i = 0; i < j->n_deps; i++) {
        if (j->deps[i] == *id) {
            store_set_err(base, "a job cannot depend on itself");
            return ALLOT_EINVAL;
        }
        memset(&p, 0, sizeof p);
        pgp_int(&p, *id);
        pgp_int(&p, j->deps[i]);
        if ((rc = pg_do(s,
                        "INSERT INTO job_deps(job_id, dep_id) VALUES ($1, $2)"
                        " ON CONFLICT DO NOTHING",
                        &p)) != 0) {
            if (rc == ALLOT_ENOENT)
                store_set_err(base, "dependency %lld: no such job", (long long)j->deps[i]);
            return rc;
        }
    }
    return 0;
}

static int dep_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    (void)s;
    *(int64_t *)elem = pg_col_i64(res, row, 0);
    return 0;
}

static int pg_job_get(struct allot_store *base, int64_t id, struct allot_store_job *out)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};
    int rc;

    pgp_int(&p, id);
    if ((rc = pg_row(s, "SELECT " STORE_JOB_COLS " FROM jobs WHERE id = $1", &p, sizeof *out,
                     job_row, store_clear_job, out)) != 0) {
        if (rc == ALLOT_ENOENT)
            store_set_err(base, "job %lld: no such job", (long long)id);
        return rc;
    }
    /* the caller clears *out on failure */
    return pg_rows(s, "SELECT dep_id FROM job_deps WHERE job_id = $1 ORDER BY dep_id", &p,
                   sizeof(int64_t), dep_row, store_clear_none, (void **)&out->deps, &out->n_deps);
}

static int pg_job_update(struct allot_store *base, const struct allot_store_job *j)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};
    long changed = 0;
    int64_t found = 0;
    int rc;

    pgp_int(&p, j->id);
    pgp_text(&p, allot_store_job_state_name(j->state));
    pgp_text(&p, j->placement);
    pgp_text(&p, j->pending_reason);
    pgp_int(&p, j->start_time);
    pgp_int(&p, j->end_time);
    if (j->has_exit_code)
        pgp_int(&p, j->exit_code);
    else
        pgp_text(&p, NULL);
    if ((rc = pg_write(s,
                       "UPDATE jobs SET state = $2, placement = $3, pending_reason = $4,"
                       " start_time = $5, end_time = $6, exit_code = $7"
                       " WHERE id = $1 AND state IN " STORE_LIVE_STATES
                       " AND NOT (held <> 0 AND $2 = 'starting')",
                       &p, &changed)) != 0 ||
        changed == 1)
        return rc;
    /* nothing changed: tell a missing job from a finished one */
    memset(&p, 0, sizeof p);
    pgp_int(&p, j->id);
    if ((rc = pg_int(s, "SELECT count(*) FROM jobs WHERE id = $1", &p, &found)) != 0)
        return rc;
    store_set_err(base, "job %lld: %s", (long long)j->id,
                  found ? "already ended, or held" : "no such job");
    return found ? ALLOT_ESTATE : ALLOT_ENOENT;
}

/* An update of job id in some states (pending for a hold, live for a
 * spec): the statement with its two parameters, then, when it changed no
 * row, ALLOT_ESTATE (the job is not in those states: `why`) or ALLOT_ENOENT
 * with the message. */
static int pg_pending_update(struct allot_store *base, int64_t id, const char *sql, struct pgp *p,
                             const char *why)
{
    struct pg_store *s = (struct pg_store *)base;
    long changed = 0;
    int64_t found = 0;
    int rc;

    if ((rc = pg_write(s, sql, p, &changed)) != 0 || changed == 1)
        return rc;
    memset(p, 0, sizeof *p);
    pgp_int(p, id);
    if ((rc = pg_int(s, "SELECT count(*) FROM jobs WHERE id = $1", p, &found)) != 0)
        return rc;
    store_set_err(base, "job %lld: %s", (long long)id, found ? why : "no such job");
    return found ? ALLOT_ESTATE : ALLOT_ENOENT;
}

static int pg_job_hold(struct allot_store *base, int64_t id, bool held)
{
    struct pgp p = {0};

    pgp_int(&p, id);
    pgp_int(&p, held);
    return pg_pending_update(base, id,
                             "UPDATE jobs SET held = $2 WHERE id = $1 AND state = 'pending'", &p,
                             "not pending");
}

static int pg_job_set_spec(struct allot_store *base, int64_t id, const char *spec)
{
    struct pgp p = {0};

    pgp_int(&p, id);
    pgp_text(&p, spec);
    return pg_pending_update(
        base, id, "UPDATE jobs SET spec = $2 WHERE id = $1 AND state IN " STORE_LIVE_STATES, &p,
        "ended");
}

static int pg_job_count_live(struct allot_store *base, const char *tenant, int64_t *n)
{
    struct pgp p = {0};

    pgp_text(&p, tenant);
    return pg_int((struct pg_store *)base,
                  "SELECT count(*) FROM jobs WHERE tenant = $1"
                  " AND state IN ('pending', 'starting', 'running')",
                  &p, n);
}

static int pg_job_list(struct allot_store *base, const struct allot_store_job_filter *f,
                       struct allot_store_job_page *page)
{
    static const unsigned types[13] = {
        PG_INT8OID, PG_TEXTOID, PG_TEXTOID, PG_TEXTOID, PG_TEXTOID, PG_TEXTOID, PG_TEXTOID,
        PG_TEXTOID, PG_TEXTOID, PG_TEXTOID, PG_INT8OID, PG_INT8OID, PG_TEXTOID,
    };
    struct pg_store *s = (struct pg_store *)base;
    int k = store_list_shape(f), sm = (k >> 4) % 3;
    struct pgp p = {0};
    int rc, given = 0;

    /* made once per handle: its address names the prepared statement */
    if (!s->list_sql[k]) {
        if (!(s->list_sql[k] = allot_malloc(STORE_LIST_SQL_MAX))) {
            store_set_err(base, "out of memory");
            return ALLOT_ENOMEM;
        }
        /* the parameters are always the same thirteen: their types are
         * given, so the ones a shape does not use are allowed */
        store_list_sql(k, '$', "starts_with(name, ?10)", s->list_sql[k], STORE_LIST_SQL_MAX);
    }
    pgp_int(&p, f->cursor ? f->cursor : f->newest_first ? INT64_MAX : 0);
    pgp_text(&p, f->tenant);
    for (int i = 0; i < ALLOT_SJ_NSTATES; i++)
        if (sm && (f->states & (1u << i))) {
            pgp_text(&p, allot_store_job_state_name(i));
            given++;
        }
    while (given++ < 7)
        pgp_text(&p, NULL);
    pgp_text(&p, f->name_prefix);
    /* one row more than asked tells whether another page follows */
    pgp_int(&p, (int64_t)f->limit + 1);
    pgp_int(&p, f->array_parent);
    pgp_text(&p, f->user);
    rc = pg_rows_typed(s, s->list_sql[k], &p, types, sizeof *page->jobs, job_row, store_clear_job,
                       (void **)&page->jobs, &page->n);
    if (rc == 0 && page->n > (size_t)f->limit) {
        allot_store_job_clear(&page->jobs[f->limit]);
        page->n = (size_t)f->limit;
        page->next_cursor = page->jobs[page->n - 1].id;
    }
    return rc;
}

/* ---- events ------------------------------------------------------------------------------ */

static int pg_event_add(struct allot_store *base, const struct allot_store_event *ev, int64_t *seq)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_int(&p, ev->job_id);
    pgp_int(&p, ev->time);
    pgp_text(&p, ev->kind);
    pgp_text(&p, ev->detail);
    return pg_int(s,
                  "INSERT INTO job_events(job_id, time, kind, detail) VALUES ($1, $2, $3, $4)"
                  " RETURNING seq",
                  &p, seq);
}

static int event_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_event *e = elem;
    int rc;

    (void)s;
    e->seq = pg_col_i64(res, row, 0);
    e->job_id = pg_col_i64(res, row, 1);
    e->time = pg_col_i64(res, row, 2);
    if ((rc = pg_col_text(res, row, 3, &e->kind)) || (rc = pg_col_text(res, row, 4, &e->detail)))
        return rc;
    return 0;
}

static int pg_event_list(struct allot_store *base, int64_t job_id, int64_t after, int limit,
                         struct allot_store_event **out, size_t *n)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_int(&p, job_id);
    pgp_int(&p, after);
    pgp_int(&p, limit);
    return pg_rows(s,
                   "SELECT seq, job_id, time, kind, detail FROM job_events"
                   " WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                   &p, sizeof **out, event_row, store_clear_event, (void **)out, n);
}

static int pg_event_last(struct allot_store *base, int64_t job_id, const char *kind,
                         struct allot_store_event *out)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_int(&p, job_id);
    pgp_text(&p, kind);
    return pg_row(s,
                  "SELECT seq, job_id, time, kind, detail FROM job_events"
                  " WHERE job_id = $1 AND kind = $2 ORDER BY time DESC, seq DESC LIMIT 1",
                  &p, sizeof *out, event_row, store_clear_event, out);
}

static int pg_event_last_running(struct allot_store *base, const char *kind,
                                 struct allot_store_event **out, size_t *n)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_text(&p, kind);
    return pg_rows(s, STORE_EVENT_LAST_RUNNING("$1"), &p, sizeof **out, event_row,
                   store_clear_event, (void **)out, n);
}

/* ---- tenants and priority classes -------------------------------------------------------- */

static int pg_tenant_put(struct allot_store *base, const struct allot_store_tenant *t)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_text(&p, t->path);
    pgp_real(&p, t->weight);
    pgp_text(&p, t->isolation);
    pgp_text(&p, t->quotas);
    return pg_do(s,
                 "INSERT INTO tenants(path, weight, isolation, quotas) VALUES ($1, $2, $3, $4)"
                 " ON CONFLICT(path) DO UPDATE SET weight = excluded.weight,"
                 " isolation = excluded.isolation, quotas = excluded.quotas",
                 &p);
}

static int pg_tenant_delete(struct allot_store *base, const char *path)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};
    int64_t children = 0;
    int rc;

    pgp_text(&p, path);
    /* a child's path starts with "path/": it sorts in ["path/", "path0") */
    if ((rc = pg_int(s,
                     "SELECT count(*) FROM (SELECT 1 FROM tenants WHERE path >= $1::text || '/'"
                     " AND path < $1::text || '0' LIMIT 1) c",
                     &p, &children)) != 0)
        return rc;
    if (children) {
        store_set_err(base, "tenant '%s' has children", path);
        return ALLOT_ESTATE;
    }
    return pg_write_one(s, "DELETE FROM tenants WHERE path = $1", &p);
}

static int tenant_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_tenant *t = elem;
    int rc;

    (void)s;
    t->weight = strtod(PQgetvalue(res, row, 1), NULL);
    if ((rc = pg_col_text(res, row, 0, &t->path)) ||
        (rc = pg_col_text(res, row, 2, &t->isolation)) ||
        (rc = pg_col_text(res, row, 3, &t->quotas)))
        return rc;
    return 0;
}

static int pg_tenant_list(struct allot_store *base, struct allot_store_tenant **out, size_t *n)
{
    return pg_rows((struct pg_store *)base,
                   "SELECT path, weight, isolation, quotas FROM tenants ORDER BY path", NULL,
                   sizeof **out, tenant_row, store_clear_tenant, (void **)out, n);
}

static int pg_prio_put(struct allot_store *base, const struct allot_store_prio_class *c)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_text(&p, c->name);
    pgp_int(&p, c->value);
    pgp_int(&p, c->preemptible ? 1 : 0);
    return pg_do(s,
                 "INSERT INTO prio_classes(name, value, preemptible) VALUES ($1, $2, $3)"
                 " ON CONFLICT(name) DO UPDATE SET value = excluded.value,"
                 " preemptible = excluded.preemptible",
                 &p);
}

static int pg_prio_delete(struct allot_store *base, const char *name)
{
    struct pgp p = {0};

    pgp_text(&p, name);
    return pg_write_one((struct pg_store *)base, "DELETE FROM prio_classes WHERE name = $1", &p);
}

static int prio_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_prio_class *c = elem;

    (void)s;
    c->value = (int)pg_col_i64(res, row, 1);
    c->preemptible = pg_col_i64(res, row, 2) != 0;
    return pg_col_text(res, row, 0, &c->name);
}

static int pg_prio_list(struct allot_store *base, struct allot_store_prio_class **out, size_t *n)
{
    return pg_rows((struct pg_store *)base,
                   "SELECT name, value, preemptible FROM prio_classes ORDER BY value DESC, name",
                   NULL, sizeof **out, prio_row, store_clear_prio, (void **)out, n);
}

/* ---- nodes ---------------------------------------------------------------------------------- */

#define NODE_COLS "name, inventory, state, last_heartbeat, lease_expiry, token_id"

static int pg_node_put(struct allot_store *base, const struct allot_store_node *nd)
{
    struct pg_store *s = (struct pg_store *)base;
    struct pgp p = {0};

    pgp_text(&p, nd->name);
    pgp_text(&p, nd->inventory);
    pgp_text(&p, allot_store_node_state_name(nd->state));
    pgp_int(&p, nd->last_heartbeat);
    pgp_int(&p, nd->lease_expiry);
    pgp_int(&p, nd->token_id);
    return pg_do(s,
                 "INSERT INTO nodes(" NODE_COLS ") VALUES ($1, $2, $3, $4, $5, $6)"
                 " ON CONFLICT(name) DO UPDATE SET inventory = excluded.inventory,"
                 " state = excluded.state, last_heartbeat = excluded.last_heartbeat,"
                 " lease_expiry = excluded.lease_expiry,"
                 " token_id = CASE WHEN excluded.token_id != 0 THEN excluded.token_id"
                 " ELSE nodes.token_id END",
                 &p);
}

static int node_row(struct pg_store *s, const PGresult *res, int row, void *elem)
{
    struct allot_store_node *nd = elem;
    int rc;

    nd->last_heartbeat = pg_col_i64(res, row, 3);
    nd->lease_expiry = pg_col_i64(res, row, 4);
    nd->token_id = pg_col_i64(res, row, 5);
    if ((rc = pg_col_text(res, row, 0, &nd->name)) ||
        (rc = pg_col_text(res, row, 1, &nd->inventory)) ||
        (rc = pg_col_enum(s, res, row, 2, allot_store_node_state_name, &nd->state)))
        return rc;
    return 0;
}

static int pg_node_get(struct allot_store *base, const char *name, struct allot_store_node *out)
{
    struct pgp p = {0};

    pgp_text(&p, name);
    return pg_row((struct pg_store *)base, "SELECT " NODE_COLS " FROM nodes WHERE name = $1", &p,
                  sizeof *out, node_row, store_clear_node, out);
}

static int pg_node_heartbeat(struct allot_store *base, const char *name, int64_t now,
                             int64_t expiry)
{
    struct pgp p = {0};

    pgp_text(&p, name);
    pgp_int(&p, now);
    pgp_int(&p, expiry);
    return pg_write_one((struct pg_store *)base,
                        "UPDATE nodes SET last_heartbeat = $2, lease_expiry = $3 WHERE name = $1",
                        &p);
}

static int pg_node_delete(struct allot_store *base, const char *name)
{
    struct pgp p = {0};

    pgp_text(&p, name);
    return pg_write_one((struct pg_store *)base, "DELETE FROM nodes WHERE name = $1", &p);
}

static int pg_node_list(struct allot_store *base, struct allot_store_node **out, size_t *n)
{
    return pg_rows((struct pg_store *)base, "SELECT " NODE_COLS " FROM nodes ORDER BY name", NULL,
                   sizeof **out, node_row, store_clear_node, (void **)out, n);
}

/* ---- open: connection, settings, schema check, migrations ------------------------------------ */

int store_pg_latest(void)
{
    return pg_migrations[pg_n_migrations - 1].version;
}

/* The database's schema version: 0 for a schema without tables,
 * ALLOT_EINVAL for one that holds something else than an allot store. */
static int pg_read_version(struct pg_store *s, int *version, char *err, size_t errlen)
{
    int64_t tables = 0, has_meta = 0;
    char *v = NULL;
    int rc;

    if ((rc = pg_int(s,
                     "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname ="
                     " current_schema()",
                     NULL, &tables)) != 0 ||
        (rc = pg_int(s,
                     "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname ="
                     " current_schema() AND tablename = 'meta'",
                     NULL, &has_meta)) != 0) {
        allot_fmt(err, errlen, "%s", s->base.err);
        return rc;
    }
    if (tables == 0) {
        *version = 0;
        return 0;
    }
    if (!has_meta || pg_meta_get(&s->base, "schema_owner", &v) != 0 || !v ||
        strcmp(v, "allot") != 0) {
        allot_free(v);
        allot_fmt(err, errlen, "the database schema is not an allot store");
        return ALLOT_EINVAL;
    }
    allot_free(v);
    return store_read_version(&s->base, version, err, errlen);
}

static int pg_migrate(struct pg_store *s, const struct pg_migration *m, bool first, char *err,
                      size_t errlen)
{
    char num[24];
    int rc;
    PGresult *res;

    if ((rc = pg_do(s, "BEGIN", NULL)) != 0)
        goto fail;
    s->in_tx = true; /* nothing of it is run again on a new connection */
    /* a script of several statements: the simple query protocol */
    res = PQexec(s->conn, m->sql);
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
        rc = pg_fail(s, res);
        PQclear(res);
        goto rollback;
    }
    PQclear(res);
    if (first && (rc = pg_meta_set(&s->base, "schema_owner", "allot")) != 0)
        goto rollback;
    allot_fmt(num, sizeof num, "%d", m->version);
    if ((rc = pg_meta_set(&s->base, "schema_version", num)) != 0)
        goto rollback;
    if ((rc = pg_commit(&s->base, 0)) != 0)
        goto rollback;
    ALLOT_LOG(ALLOT_LOG_INFO, "store", "schema migrated to version %d", m->version);
    return 0;
rollback:
    pg_rollback(&s->base, 0);
fail:
    allot_fmt(err, errlen, "migration %d failed: %s", m->version, s->base.err);
    return rc;
}

static int pg_check_schema(struct pg_store *s, const struct allot_store_opts *opts, char *err,
                           size_t errlen)
{
    int latest = store_pg_latest();
    int version = 0;
    int rc;

    if ((rc = pg_read_version(s, &version, err, errlen)) != 0)
        return rc;
    if (version == 0 && !(opts->flags & ALLOT_STORE_CREATE)) {
        allot_fmt(err, errlen, "the database holds no allot store");
        return ALLOT_ENOENT;
    }
    if ((rc = store_version_allowed(version, latest, opts, err, errlen)) != 0)
        return rc;
    for (int i = 0; i < pg_n_migrations; i++) {
        if (pg_migrations[i].version <= version)
            continue;
        if ((rc = pg_migrate(s, &pg_migrations[i], version == 0, err, errlen)) != 0)
            return rc;
        version = pg_migrations[i].version;
    }
    s->base.schema_version = version;
    return 0;
}

/* One text answer of a constant query (SHOW ...) into buf. */
static int pg_show(struct pg_store *s, const char *sql, char *buf, size_t len)
{
    int rc;
    PGresult *res = pg_run(s, sql, NULL, &rc);

    buf[0] = '\0';
    if (res && PQntuples(res) > 0)
        allot_strlcpy(buf, PQgetvalue(res, 0, 0), len);
    PQclear(res);
    return rc;
}

/* The session's settings, on every new connection. */
static int pg_session(struct pg_store *s)
{
    char sql[64];
    PGresult *res;
    int rc = 0;

    allot_fmt(sql, sizeof sql, "SET lock_timeout = %d", s->lock_timeout_ms);
    if (PQsetClientEncoding(s->conn, "SQL_ASCII") != 0) {
        store_set_err(&s->base, "postgres: %s", PQerrorMessage(s->conn));
        return ALLOT_EIO;
    }
    /* PQexec directly: pg_run would try to revive a connection that fails */
    res = PQexec(s->conn, "SET synchronous_commit = on; SET bytea_output = hex");
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
        rc = pg_fail(s, res);
    PQclear(res);
    if (rc == 0) {
        res = PQexec(s->conn, sql);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
            rc = pg_fail(s, res);
        PQclear(res);
    }
    /* best effort: a server before PostgreSQL 14 has no idle_session_timeout */
    for (int k = 0; rc == 0 && k < 2; k++) {
        int ms = k ? s->idle_in_tx_ms : s->idle_session_ms;
        if (ms <= 0)
            continue;
        allot_fmt(sql, sizeof sql, "SET %s = %d",
                  k ? "idle_in_transaction_session_timeout" : "idle_session_timeout", ms);
        PQclear(PQexec(s->conn, sql));
    }
    return rc;
}

static void pg_close(struct allot_store *base)
{
    struct pg_store *s = (struct pg_store *)base;

    if (!s)
        return;
    PQfinish(s->conn);
    for (int i = 0; i < STORE_LIST_SHAPES; i++)
        allot_free(s->list_sql[i]);
    allot_free(s);
}

static void pg_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* NOTICEs (an index that exists, ...) are not errors */
}

/* Opens "postgres:REST" (or "postgresql:REST": the same URL to libpq). */
static int pg_open(const char *rest, const struct allot_store_opts *opts, struct allot_store **out,
                   char *err, size_t errlen)
{
    /* a server or network that goes silent ends the session within about
     * a minute instead of the kernel's quarter of an hour (the lead's
     * check, a commit); the URL may set its own */
    const char *keys[] = {"connect_timeout",
                          "application_name",
                          "keepalives",
                          "keepalives_idle",
                          "keepalives_interval",
                          "keepalives_count",
                          "tcp_user_timeout",
                          "dbname",
                          NULL};
    const char *vals[] = {"10", "allot", "1", "30", "10", "3", "60000", NULL, NULL};
    struct pg_store *s;
    char url[1024], buf[64];
    struct pgp p = {0};
    int64_t locked = 0;
    int rc;

    if (strncmp(rest, "//", 2) != 0 ||
        allot_fmt(url, sizeof url, "postgresql:%s", rest) >= (int)sizeof url) {
        allot_fmt(err, errlen,
                  "postgres: the URL must read postgres://[USER@]HOST[:PORT]/DATABASE");
        return ALLOT_EINVAL;
    }
    vals[7] = url;
    s = allot_calloc(1, sizeof *s);
    if (!s) {
        allot_fmt(err, errlen, "out of memory");
        return ALLOT_ENOMEM;
    }
    s->base.ops = &allot_store_pg_ops;
    s->conn = PQconnectdbParams(keys, vals, 1);
    if (!s->conn) {
        allot_free(s);
        allot_fmt(err, errlen, "postgres: out of memory");
        return ALLOT_ENOMEM;
    }
    if (PQstatus(s->conn) != CONNECTION_OK) {
        char *nl;

        allot_fmt(err, errlen, "postgres: cannot connect: %s", PQerrorMessage(s->conn));
        if ((nl = strchr(err, '\n')))
            *nl = '\0';
        rc = ALLOT_EIO;
        goto fail;
    }
    PQsetNoticeProcessor(s->conn, pg_notice, NULL);
    s->lock_timeout_ms = opts->busy_timeout_ms > 0 ? opts->busy_timeout_ms : 5000;
    s->idle_session_ms = opts->idle_session_ms;
    s->idle_in_tx_ms = opts->idle_in_tx_ms;
    if ((rc = pg_session(s)) != 0)
        goto fail_msg;
    s->session_ok = true;
    /* bytes in, bytes out: the database must not convert or check them */
    if ((rc = pg_show(s, "SHOW server_encoding", buf, sizeof buf)) != 0)
        goto fail_msg;
    if (strcmp(buf, "SQL_ASCII") != 0) {
        allot_fmt(err, errlen,
                  "postgres: the database's encoding is %s; allot stores strings byte for byte "
                  "and needs SQL_ASCII (createdb -E SQL_ASCII -T template0 NAME)",
                  buf);
        rc = ALLOT_EINVAL;
        goto fail;
    }
    /* replicas starting together check and migrate the schema one at a time */
    pgp_int(&p, PG_LOCK_MIGRATE);
    if ((rc = pg_int(s, "SELECT count(*) FROM (SELECT pg_advisory_lock($1::bigint)) l", &p,
                     &locked)) != 0)
        goto fail_msg;
    rc = pg_check_schema(s, opts, err, errlen);
    pg_do(s, "SELECT pg_advisory_unlock($1::bigint)", &p);
    if (rc != 0)
        goto fail;
    s->base.err[0] = '\0';
    *out = &s->base;
    return 0;
fail_msg:
    allot_fmt(err, errlen, "%s", s->base.err);
fail:
    pg_close(&s->base);
    return rc;
}

#define PG_OPS                                                                                     \
    .close = pg_close, .begin = pg_begin, .commit = pg_commit, .rollback = pg_rollback,            \
    .meta_get = pg_meta_get, .meta_set = pg_meta_set, .lead = pg_lead,                             \
    .job_insert = pg_job_insert, .job_get = pg_job_get, .job_update = pg_job_update,               \
    .job_hold = pg_job_hold, .job_set_spec = pg_job_set_spec, .job_list = pg_job_list,             \
    .job_count_live = pg_job_count_live, .event_add = pg_event_add, .event_list = pg_event_list,   \
    .event_last = pg_event_last, .event_last_running = pg_event_last_running,                      \
    .tenant_put = pg_tenant_put, .tenant_delete = pg_tenant_delete, .tenant_list = pg_tenant_list, \
    .prio_put = pg_prio_put, .prio_delete = pg_prio_delete, .prio_list = pg_prio_list,             \
    .node_put = pg_node_put, .node_get = pg_node_get, .node_heartbeat = pg_node_heartbeat,         \
    .node_delete = pg_node_delete, .node_list = pg_node_list, .token_add = pg_token_add,           \
    .token_get = pg_token_get, .token_revoke = pg_token_revoke, .token_list = pg_token_list,       \
    .audit_last = pg_audit_last, .audit_insert = pg_audit_insert, .audit_list = pg_audit_list,     \
    .run_list = pg_run_list, .run_last = pg_run_last, .node_span_list = pg_node_span_list,         \
    .sample_add = pg_sample_add, .sample_list = pg_sample_list, .usage_replace = pg_usage_replace, \
    .usage_list = pg_usage_list, .net_add = pg_net_add, .net_list = pg_net_list

const struct allot_store_ops allot_store_pg_ops = {.scheme = "postgres", .open = pg_open, PG_OPS};
