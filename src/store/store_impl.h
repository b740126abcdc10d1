/*
 * What store.c and the back-ends share, not seen by callers: the common
 * head of every handle and the back-end registry entries.
 *
 * A back-end allocates its own handle struct whose first member is a
 * struct allot_store, so store.c can hold the pointer and the back-end can
 * cast it back. store.c owns `depth` and `poisoned`; the back-end fills
 * `ops`, `schema_version` and writes failure texts with store_set_err().
 */
#ifndef ALLOT_STORE_IMPL_H
#define ALLOT_STORE_IMPL_H

#include "allot/store.h"

#define STORE_ERR_MAX 256

struct allot_store {
    const struct allot_store_ops *ops; /* static, never freed */
    int depth;                         /* open batches; 0 = none */
    bool poisoned;      /* an inner rollback failed: the outermost commit rolls back */
    int schema_version; /* of the open database */
    int64_t fence;      /* allot_store_fence(): the leader epoch batches need; 0 = none */
    char err[STORE_ERR_MAX];
};

/* Records the text of the last failure on st (printf style). */
void store_set_err(struct allot_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The jobs table's columns in the order the back-ends read them, and the
 * states a job may still change from. */
#define STORE_JOB_COLS                                                                             \
    "id, tenant, name, token_id, spec, state, placement, pending_reason, submit_time,"             \
    " start_time, end_time, exit_code, array_parent, array_index, idem_key, held, " STORE_JOB_USER
/* A job's user: its token's name, qualified by the token's tenant scope
 * (allotd's user names: auth_user_name); NULL when the token is gone */
#define STORE_USER_NAME   "CASE WHEN t.tenant = '' THEN t.name ELSE t.tenant || ':' || t.name END"
#define STORE_JOB_USER    "(SELECT " STORE_USER_NAME " FROM tokens t WHERE t.id = jobs.token_id)"
#define STORE_LIVE_STATES "('pending','starting','running')"

/* allot_store_event_last_running's query, the kind bound as KIND: driven
 * by the running jobs (the jobs' state index), each job's latest event of
 * the kind in its run through job_events' job_id index. */
#define STORE_EVENT_LAST_RUNNING(KIND)                                                             \
    "SELECT e.seq, e.job_id, e.time, e.kind, e.detail FROM jobs j JOIN job_events e"               \
    " ON e.seq = (SELECT x.seq FROM job_events x WHERE x.job_id = j.id AND x.kind = " KIND         \
    " AND x.time >= j.start_time ORDER BY x.time DESC, x.seq DESC LIMIT 1)"                        \
    " WHERE j.state IN ('starting','running') ORDER BY j.id"

/* Job listing shapes: tenant (none, exact, subtree) x states (any, one,
 * several) x user (no, yes) x name prefix (no, yes) x array (no, yes) x
 * order (ascending, descending). */
#define STORE_LIST_SHAPES 144
/* The shape of filter f, 0..STORE_LIST_SHAPES-1. */
int store_list_shape(const struct allot_store_job_filter *f);
/* The SQL of listing shape k, built from constant fragments only. Its
 * parameters: 1 cursor, 2 tenant, 3-9 states, 10 name prefix, 11 limit,
 * 12 array, 13 user; written `mark`N ('?' for SQLite, '$' for PostgreSQL).
 * prefix_clause is the back-end's test of name against parameter 10,
 * written with '?'. */
void store_list_sql(int k, char mark, const char *prefix_clause, char *buf, size_t len);
#define STORE_LIST_SQL_MAX 1024

/* The first of the n elements (`size` bytes each) of the allocated array
 * arr into *out; the others are cleared, and arr freed. ALLOT_ENOENT when
 * n is 0 (a one-row read that found none). */
int store_take_first(void *arr, size_t n, size_t size, void (*clear)(void *), void *out);

/* Reads and checks meta.schema_version of an allot store (1..1000000);
 * ALLOT_EINVAL, with err set, when it is missing or malformed. */
int store_read_version(struct allot_store *st, int *version, char *err, size_t errlen);
/* The schema-version rule of every back-end: a store newer than this binary
 * (latest) is refused, an older one only with ALLOT_STORE_MIGRATE. 0 or
 * ALLOT_ESTATE with err set. */
int store_version_allowed(int version, int latest, const struct allot_store_opts *opts, char *err,
                          size_t errlen);

/* Duplicates n bytes plus a terminating NUL through allot_malloc; NULL on
 * failure. */
char *store_dupn(const char *s, size_t n);

/* Clear one element of the lists the back-ends fill (row by row; the
 * element is a struct allot_store_X); the public *_free use them too. */
void store_clear_job(void *elem);
void store_clear_event(void *elem);
void store_clear_tenant(void *elem);
void store_clear_prio(void *elem);
void store_clear_node(void *elem);
void store_clear_token(void *elem);
void store_clear_audit(void *elem);
void store_clear_run(void *elem);
void store_clear_span(void *elem);
void store_clear_usage(void *elem);
void store_clear_net(void *elem);
void store_clear_none(void *elem); /* elements that own nothing */

/* The back-ends (one registry table in store.c). */
extern const struct allot_store_ops allot_store_sqlite_ops;
/* PostgreSQL, as "postgres://..." and "postgresql://..." (store_pg.c) */
extern const struct allot_store_ops allot_store_pg_ops;

/* Newest schema version of the SQLite back-end (its migrations). */
int store_sqlite_latest(void);
/* Newest schema version of the PostgreSQL back-end; always the SQLite
 * back-end's too (a test checks). */
int store_pg_latest(void);

#endif
