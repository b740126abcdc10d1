/*
 * Private to the PostgreSQL back-end: its handle, the parameter and row
 * helpers store_pg.c (connection, transactions, the main tables) shares
 * with store_pg_auth.c (tokens, audit rows) and store_pg_meter.c (the
 * metering tables), and the numbered migrations (store_pg_schema.c).
 */
#ifndef ALLOT_STORE_PG_H
#define ALLOT_STORE_PG_H

#include "store_impl.h"

#include <libpq-fe.h>

#define PG_MAX_PARAMS   16
#define PG_MAX_PREPARED 96 /* statements a session prepares (store_pg.c has fewer) */
#define PG_MAX_PENDING  64 /* transaction-control statements waiting for a round trip */

/* type oids of the parameters a listing binds (pg_type.h is server-side) */
#define PG_INT8OID 20
#define PG_TEXTOID 25

struct pg_store {
    struct allot_store base; /* first: the handle callers hold */
    PGconn *conn;            /* owned */
    bool in_tx;              /* a transaction of ours is open on conn */
    bool session_ok;         /* the session's settings are made on conn */
    bool broken;             /* conn's state is unknown (a pipeline cut short): reset it */
    bool tx_failed;          /* a deferred statement of the open transaction failed */
    int lead_pid;            /* the server process of the session holding the lead; 0 = none */
    bool lead_lost;          /* that session ended: this handle never leads again */
    int lock_timeout_ms;     /* the busy timeout */
    int idle_session_ms;     /* allot_store_opts' (0: none) */
    int idle_in_tx_ms;
    /* statements prepared on this session, by the address of their SQL text
     * (constant strings, and list_sql); forgotten when the session is new */
    const char *prepared[PG_MAX_PREPARED];
    int n_prepared;
    char *list_sql[STORE_LIST_SHAPES]; /* owned: each job listing shape's SQL, made once */
    /* BEGIN, SAVEPOINT, RELEASE and ROLLBACK TO (constants) not sent yet:
     * they travel in one pipeline with the next statement, so a write's
     * savepoints cost no round trip of their own */
    const char *pending[PG_MAX_PENDING];
    int n_pending;
};

/* The parameters of one statement, in text (bytea in binary); the strings
 * are borrowed for the call. */
struct pgp {
    int n;
    const char *v[PG_MAX_PARAMS];
    int len[PG_MAX_PARAMS];
    int fmt[PG_MAX_PARAMS];
    char num[PG_MAX_PARAMS][32];
};

void pgp_int(struct pgp *p, int64_t v);
void pgp_real(struct pgp *p, double v);
/* A borrowed string; NULL binds SQL NULL. */
void pgp_text(struct pgp *p, const char *s);
/* Borrowed bytes, sent in binary (a bytea). */
void pgp_bytes(struct pgp *p, const void *b, int len);

/* Runs a statement whose result is not needed; 0 or an ALLOT_E* code. */
int pg_do(struct pg_store *s, const char *sql, const struct pgp *p);
/* Runs a write; *changed gets the number of rows it touched. */
int pg_write(struct pg_store *s, const char *sql, const struct pgp *p, long *changed);

typedef int (*pg_row_fn)(struct pg_store *s, const PGresult *res, int row, void *elem);
typedef void (*pg_clear_fn)(void *elem);
/* Runs sql and fills a new array *out of *n elements of `size` bytes, one
 * per row, with fn; on failure nothing is left allocated. */
int pg_rows(struct pg_store *s, const char *sql, const struct pgp *p, size_t size, pg_row_fn fn,
            pg_clear_fn clear, void **out, size_t *n);
/* Like pg_rows for at most one row, into *out; ALLOT_ENOENT when none. */
int pg_row(struct pg_store *s, const char *sql, const struct pgp *p, size_t size, pg_row_fn fn,
           pg_clear_fn clear, void *out);
/* Runs sql and returns its result, or NULL with *rc set. */
PGresult *pg_run(struct pg_store *s, const char *sql, const struct pgp *p, int *rc);
/* Like pg_write, but a write that touched no row is ALLOT_ENOENT. */
int pg_write_one(struct pg_store *s, const char *sql, const struct pgp *p);
/* One bigint from a query (0 when it has no row). */
int pg_int(struct pg_store *s, const char *sql, const struct pgp *p, int64_t *v);
/* Column values of a text result (0 / NULL for SQL NULL). */
int64_t pg_col_i64(const PGresult *res, int row, int col);
int pg_col_text(const PGresult *res, int row, int col, char **out);
/* A bytea column of exactly ALLOT_STORE_HASH_LEN bytes; zeros and
 * ALLOT_EIO otherwise. */
int pg_col_hash(const PGresult *res, int row, int col, uint8_t out[ALLOT_STORE_HASH_LEN]);
/* An enumeration column against name(); ALLOT_EIO when unknown. */
int pg_col_enum(struct pg_store *s, const PGresult *res, int row, int col, const char *(*name)(int),
                int *out);

/* tokens and audit rows (store_pg_auth.c), as in struct allot_store_ops */
int pg_token_add(struct allot_store *st, const struct allot_store_token *t, int64_t *id);
int pg_token_get(struct allot_store *st, int64_t id, const uint8_t *hash,
                 struct allot_store_token *out);
int pg_token_revoke(struct allot_store *st, int64_t id, int64_t when);
int pg_token_list(struct allot_store *st, struct allot_store_token **out, size_t *n);
int pg_audit_last(struct allot_store *st, int64_t *seq, uint8_t hash[ALLOT_STORE_HASH_LEN]);
int pg_audit_insert(struct allot_store *st, const struct allot_store_audit *e);
int pg_audit_list(struct allot_store *st, int64_t after, int limit, struct allot_store_audit **out,
                  size_t *n);

/* the metering tables (store_pg_meter.c), as in struct allot_store_ops */
int pg_run_list(struct allot_store *st, int64_t from, int64_t to, struct allot_store_run **out,
                size_t *n);
int pg_run_last(struct allot_store *st, int64_t job_id, int64_t before,
                struct allot_store_run *out);
int pg_node_span_list(struct allot_store *st, int64_t from, int64_t to,
                      struct allot_store_node_span **out, size_t *n);
int pg_sample_add(struct allot_store *st, const struct allot_store_sample *x, bool *added);
int pg_sample_list(struct allot_store *st, int64_t from, int64_t to,
                   struct allot_store_sample **out, size_t *n);
int pg_usage_replace(struct allot_store *st, int64_t from, int64_t to,
                     const struct allot_store_usage *rows, size_t n);
int pg_usage_list(struct allot_store *st, int64_t from, int64_t to, struct allot_store_usage **out,
                  size_t *n);
int pg_net_add(struct allot_store *st, const struct allot_store_net *nt);
int pg_net_list(struct allot_store *st, struct allot_store_net **out, size_t *n);

struct pg_migration {
    int version;
    const char *sql; /* constant: no user data */
};

extern const struct pg_migration pg_migrations[];
extern const int pg_n_migrations;

#endif
