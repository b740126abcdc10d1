/*
 * Private to the SQLite back-end: its handle, the fixed statements and the
 * helpers shared by store_sqlite.c (connection, schema, transactions) and
 * store_sqlite_tables.c (the table operations).
 *
 * Statement protocol: sq_stmt() hands out a cached prepared statement;
 * after stepping it the caller passes it to sq_done(), which resets it and
 * clears its bindings (so borrowed strings bound with SQLITE_STATIC are
 * never read after the call) and maps a failure to an ALLOT_E* code.
 */
#ifndef ALLOT_STORE_SQLITE_H
#define ALLOT_STORE_SQLITE_H

#include "store_impl.h"

#include <sqlite3.h>

enum sq_stmt_id {
    SQ_BEGIN = 0,
    SQ_COMMIT,
    SQ_ROLLBACK,
    SQ_SAVEPOINT,
    SQ_RELEASE,
    SQ_ROLLBACK_TO,
    SQ_META_GET,
    SQ_META_SET,
    SQ_JOB_BY_KEY,
    SQ_JOB_INSERT,
    SQ_JOB_ARRAY_SELF,
    SQ_DEP_INSERT,
    SQ_JOB_GET,
    SQ_DEPS_GET,
    SQ_JOB_UPDATE,
    SQ_JOB_STATE,
    SQ_JOB_HOLD,
    SQ_JOB_SET_SPEC,
    SQ_JOB_COUNT_LIVE,
    SQ_EVENT_ADD,
    SQ_EVENT_LIST,
    SQ_EVENT_LAST,
    SQ_EVENT_LAST_RUNNING,
    SQ_TENANT_PUT,
    SQ_TENANT_CHILD,
    SQ_TENANT_DELETE,
    SQ_TENANT_LIST,
    SQ_PRIO_PUT,
    SQ_PRIO_DELETE,
    SQ_PRIO_LIST,
    SQ_NODE_PUT,
    SQ_NODE_GET,
    SQ_NODE_HEARTBEAT,
    SQ_NODE_DELETE,
    SQ_NODE_LIST,
    SQ_TOKEN_ADD,
    SQ_TOKEN_GET,
    SQ_TOKEN_FIND,
    SQ_TOKEN_REVOKE,
    SQ_TOKEN_LIST,
    SQ_AUDIT_LAST,
    SQ_AUDIT_INSERT,
    SQ_AUDIT_LIST,
    SQ_RUN_LIST,
    SQ_RUN_LAST,
    SQ_SPAN_LIST,
    SQ_SAMPLE_ADD,
    SQ_SAMPLE_LIST,
    SQ_USAGE_DELETE,
    SQ_USAGE_INSERT,
    SQ_USAGE_LIST,
    SQ_NET_ADD,
    SQ_NET_LIST,
    SQ_NSTMT
};

struct sq_store {
    struct allot_store base;               /* first: the handle callers hold */
    sqlite3 *db;                           /* owned */
    sqlite3_stmt *stmt[SQ_NSTMT];          /* owned, prepared on first use */
    sqlite3_stmt *list[STORE_LIST_SHAPES]; /* owned, prepared on first use */
    char *path;                            /* owned: the database file */
    int lead_fd;                           /* PATH.lead, flocked while leading; -1 = not opened */
    bool leading;                          /* the flock is held */
};

/* SQL text of each fixed statement (store_sqlite_tables.c). */
extern const char *const sq_stmt_sql[SQ_NSTMT];

/* Maps SQLite result code rc to an ALLOT_E* code and records the text. */
int sq_err(struct sq_store *s, int rc);
/* The cached statement `which`; NULL with *rc set when it cannot be prepared. */
sqlite3_stmt *sq_stmt(struct sq_store *s, int which, int *rc);
/* Resets st after a step that returned r; 0 or the mapped error of r. */
int sq_done(struct sq_store *s, sqlite3_stmt *st, int r);
/* Prepares (cached), steps once and resets a statement without parameters. */
int sq_exec(struct sq_store *s, int which);
/* Binds a borrowed string (NULL binds SQL NULL). */
int sq_bind_text(sqlite3_stmt *st, int i, const char *v);
/* Copies column i into *out (NULL for SQL NULL); 0 or ALLOT_ENOMEM. */
int sq_col_text(sqlite3_stmt *st, int i, char **out);

/* table operations (store_sqlite_tables.c), as in struct allot_store_ops */
int sq_job_insert(struct allot_store *st, const struct allot_store_job *j, int64_t *id,
                  bool *existed);
int sq_job_get(struct allot_store *st, int64_t id, struct allot_store_job *out);
int sq_job_update(struct allot_store *st, const struct allot_store_job *j);
int sq_job_hold(struct allot_store *st, int64_t id, bool held);
int sq_job_set_spec(struct allot_store *st, int64_t id, const char *spec);
int sq_job_count_live(struct allot_store *st, const char *tenant, int64_t *n);
int sq_job_list(struct allot_store *st, const struct allot_store_job_filter *f,
                struct allot_store_job_page *page);
int sq_event_add(struct allot_store *st, const struct allot_store_event *ev, int64_t *seq);
int sq_event_last(struct allot_store *st, int64_t job_id, const char *kind,
                  struct allot_store_event *out);
int sq_event_list(struct allot_store *st, int64_t job_id, int64_t after, int limit,
                  struct allot_store_event **out, size_t *n);
int sq_event_last_running(struct allot_store *st, const char *kind, struct allot_store_event **out,
                          size_t *n);
int sq_tenant_put(struct allot_store *st, const struct allot_store_tenant *t);
int sq_tenant_delete(struct allot_store *st, const char *path);
int sq_tenant_list(struct allot_store *st, struct allot_store_tenant **out, size_t *n);
int sq_prio_put(struct allot_store *st, const struct allot_store_prio_class *c);
int sq_prio_delete(struct allot_store *st, const char *name);
int sq_prio_list(struct allot_store *st, struct allot_store_prio_class **out, size_t *n);
int sq_node_put(struct allot_store *st, const struct allot_store_node *n);
int sq_node_get(struct allot_store *st, const char *name, struct allot_store_node *out);
int sq_node_heartbeat(struct allot_store *st, const char *name, int64_t now, int64_t expiry);
int sq_node_delete(struct allot_store *st, const char *name);
int sq_node_list(struct allot_store *st, struct allot_store_node **out, size_t *n);
int sq_token_add(struct allot_store *st, const struct allot_store_token *t, int64_t *id);
int sq_token_get(struct allot_store *st, int64_t id, const uint8_t *hash,
                 struct allot_store_token *out);
int sq_token_revoke(struct allot_store *st, int64_t id, int64_t when);
int sq_token_list(struct allot_store *st, struct allot_store_token **out, size_t *n);
int sq_audit_last(struct allot_store *st, int64_t *seq, uint8_t hash[ALLOT_STORE_HASH_LEN]);
int sq_audit_insert(struct allot_store *st, const struct allot_store_audit *e);
int sq_audit_list(struct allot_store *st, int64_t after, int limit, struct allot_store_audit **out,
                  size_t *n);

/* Steps the bound statement st to the end, filling one zeroed element of
 * `size` bytes per row with fn, into a new array *out of *n elements. On
 * failure every element is cleared, the array freed, *out NULL and *n 0. */
typedef int (*sq_row_fn)(struct sq_store *s, sqlite3_stmt *st, void *elem);
typedef void (*sq_clear_fn)(void *elem);
int sq_rows(struct sq_store *s, sqlite3_stmt *st, size_t size, sq_row_fn fn, sq_clear_fn clear,
            void **out, size_t *n);
/* Like sq_rows for a statement of one row: fills *out (`size` bytes) with
 * it, ALLOT_ENOENT when there is none (rows past the first are cleared). */
int sq_row(struct sq_store *s, sqlite3_stmt *st, size_t size, sq_row_fn fn, sq_clear_fn clear,
           void *out);

/* metering (store_sqlite_meter.c) */
int sq_run_list(struct allot_store *st, int64_t from, int64_t to, struct allot_store_run **out,
                size_t *n);
int sq_run_last(struct allot_store *st, int64_t job_id, int64_t before,
                struct allot_store_run *out);
int sq_node_span_list(struct allot_store *st, int64_t from, int64_t to,
                      struct allot_store_node_span **out, size_t *n);
int sq_sample_add(struct allot_store *st, const struct allot_store_sample *s, bool *added);
int sq_sample_list(struct allot_store *st, int64_t from, int64_t to,
                   struct allot_store_sample **out, size_t *n);
int sq_usage_replace(struct allot_store *st, int64_t from, int64_t to,
                     const struct allot_store_usage *rows, size_t n);
int sq_usage_list(struct allot_store *st, int64_t from, int64_t to, struct allot_store_usage **out,
                  size_t *n);
int sq_net_add(struct allot_store *st, const struct allot_store_net *n);
int sq_net_list(struct allot_store *st, struct allot_store_net **out, size_t *n);

#endif
