/*
 * The SQLite back-end's table operations: jobs (with dependencies and keyset
 * listing), job events, tenants, priority classes, nodes, tokens and the
 * audit rows. Called through struct allot_store_ops by store.c, which has
 * already checked the arguments and opened the transaction or savepoint a
 * write runs in. Every value is bound as a parameter; the job listing's SQL
 * is assembled from constant fragments only.
 */
#include "store_sqlite.h"

#include "allot/common.h"

#include <string.h>

const char *const sq_stmt_sql[SQ_NSTMT] = {
    [SQ_BEGIN] = "BEGIN IMMEDIATE",
    [SQ_COMMIT] = "COMMIT",
    [SQ_ROLLBACK] = "ROLLBACK",
    [SQ_SAVEPOINT] = "SAVEPOINT w",
    [SQ_RELEASE] = "RELEASE w",
    [SQ_ROLLBACK_TO] = "ROLLBACK TO w",
    [SQ_META_GET] = "SELECT value FROM meta WHERE key = ?1",
    [SQ_META_SET] = "INSERT INTO meta(key, value) VALUES (?1, ?2)"
                    " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    [SQ_JOB_BY_KEY] = "SELECT id FROM jobs WHERE token_id = ?1 AND idem_key = ?2",
    [SQ_JOB_INSERT] = "INSERT INTO jobs(tenant, name, token_id, spec, state, placement,"
                      " pending_reason, submit_time, start_time, end_time, exit_code,"
                      " array_parent, array_index, idem_key, held)"
                      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    [SQ_JOB_ARRAY_SELF] = "UPDATE jobs SET array_parent = id WHERE id = ?1",
    [SQ_DEP_INSERT] = "INSERT OR IGNORE INTO job_deps(job_id, dep_id) VALUES (?1, ?2)",
    [SQ_JOB_GET] = "SELECT " STORE_JOB_COLS " FROM jobs WHERE id = ?1",
    [SQ_DEPS_GET] = "SELECT dep_id FROM job_deps WHERE job_id = ?1 ORDER BY dep_id",
    [SQ_JOB_UPDATE] =
        "UPDATE jobs SET state = ?2, placement = ?3, pending_reason = ?4,"
        " start_time = ?5, end_time = ?6, exit_code = ?7"
        " WHERE id = ?1 AND state IN " STORE_LIVE_STATES " AND NOT (held <> 0 AND ?2 = 'starting')",
    [SQ_JOB_STATE] = "SELECT state FROM jobs WHERE id = ?1",
    [SQ_JOB_HOLD] = "UPDATE jobs SET held = ?2 WHERE id = ?1 AND state = 'pending'",
    [SQ_JOB_SET_SPEC] = "UPDATE jobs SET spec = ?2 WHERE id = ?1 AND state IN " STORE_LIVE_STATES,
    [SQ_JOB_COUNT_LIVE] = "SELECT count(*) FROM jobs WHERE tenant = ?1"
                          " AND state IN ('pending', 'starting', 'running')",
    [SQ_EVENT_ADD] = "INSERT INTO job_events(job_id, time, kind, detail) VALUES (?1, ?2, ?3, ?4)",
    [SQ_EVENT_LIST] = "SELECT seq, job_id, time, kind, detail FROM job_events"
                      " WHERE job_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
    [SQ_EVENT_LAST] = "SELECT seq, job_id, time, kind, detail FROM job_events"
                      " WHERE job_id = ?1 AND kind = ?2 ORDER BY time DESC, seq DESC LIMIT 1",
    [SQ_EVENT_LAST_RUNNING] = STORE_EVENT_LAST_RUNNING("?1"),
    [SQ_TENANT_PUT] = "INSERT INTO tenants(path, weight, isolation, quotas) VALUES (?1, ?2, ?3, ?4)"
                      " ON CONFLICT(path) DO UPDATE SET weight = excluded.weight,"
                      " isolation = excluded.isolation, quotas = excluded.quotas",
    /* a child's path starts with "path/": it sorts in ["path/", "path0") */
    [SQ_TENANT_CHILD] =
        "SELECT 1 FROM tenants WHERE path >= ?1 || '/' AND path < ?1 || '0' LIMIT 1",
    [SQ_TENANT_DELETE] = "DELETE FROM tenants WHERE path = ?1",
    [SQ_TENANT_LIST] = "SELECT path, weight, isolation, quotas FROM tenants ORDER BY path",
    [SQ_PRIO_PUT] = "INSERT INTO prio_classes(name, value, preemptible) VALUES (?1, ?2, ?3)"
                    " ON CONFLICT(name) DO UPDATE SET value = excluded.value,"
                    " preemptible = excluded.preemptible",
    [SQ_PRIO_DELETE] = "DELETE FROM prio_classes WHERE name = ?1",
    [SQ_PRIO_LIST] = "SELECT name, value, preemptible FROM prio_classes"
                     " ORDER BY value DESC, name",
    [SQ_NODE_PUT] = "INSERT INTO nodes(name, inventory, state, last_heartbeat, lease_expiry,"
                    " token_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name) DO UPDATE SET"
                    " inventory = excluded.inventory, state = excluded.state,"
                    " last_heartbeat = excluded.last_heartbeat,"
                    " lease_expiry = excluded.lease_expiry,"
                    " token_id = CASE WHEN excluded.token_id != 0 THEN excluded.token_id"
                    " ELSE nodes.token_id END",
    [SQ_NODE_GET] = "SELECT name, inventory, state, last_heartbeat, lease_expiry, token_id"
                    " FROM nodes WHERE name = ?1",
    [SQ_NODE_HEARTBEAT] = "UPDATE nodes SET last_heartbeat = ?2, lease_expiry = ?3"
                          " WHERE name = ?1",
    [SQ_NODE_DELETE] = "DELETE FROM nodes WHERE name = ?1",
    [SQ_NODE_LIST] = "SELECT name, inventory, state, last_heartbeat, lease_expiry, token_id"
                     " FROM nodes ORDER BY name",
    [SQ_TOKEN_ADD] = "INSERT INTO tokens(name, role, tenant, hash, created, revoked, expires)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [SQ_TOKEN_GET] = "SELECT id, name, role, tenant, hash, created, revoked, expires FROM tokens"
                     " WHERE id = ?1",
    [SQ_TOKEN_FIND] = "SELECT id, name, role, tenant, hash, created, revoked, expires FROM tokens"
                      " WHERE hash = ?1",
    [SQ_TOKEN_REVOKE] = "UPDATE tokens SET revoked = ?2 WHERE id = ?1 AND revoked = 0",
    [SQ_TOKEN_LIST] = "SELECT id, name, role, tenant, hash, created, revoked, expires FROM tokens"
                      " ORDER BY id",
    [SQ_AUDIT_LAST] = "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
    [SQ_AUDIT_INSERT] = "INSERT INTO audit(seq, time, token_id, action, target, result,"
                        " prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [SQ_AUDIT_LIST] = "SELECT seq, time, token_id, action, target, result, prev_hash, hash"
                      " FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    [SQ_RUN_LIST] = "SELECT r.id, r.job_id, r.tenant, COALESCE(t.name, ''), r.placement,"
                    " r.start_time, COALESCE(r.end_time, 0) FROM runs r"
                    " LEFT JOIN tokens t ON t.id = r.token_id"
                    " WHERE r.start_time < ?2 AND (r.end_time IS NULL OR r.end_time > ?1)"
                    " ORDER BY r.id",
    [SQ_RUN_LAST] = "SELECT r.id, r.job_id, r.tenant, COALESCE(t.name, ''), r.placement,"
                    " r.start_time, COALESCE(r.end_time, 0) FROM runs r"
                    " LEFT JOIN tokens t ON t.id = r.token_id"
                    " WHERE r.job_id = ?1 AND r.start_time <= ?2 ORDER BY r.id DESC LIMIT 1",
    [SQ_SPAN_LIST] = "SELECT node, inventory, start_time, COALESCE(end_time, 0) FROM node_spans"
                     " WHERE start_time < ?2 AND (end_time IS NULL OR end_time > ?1) ORDER BY id",
    [SQ_SAMPLE_ADD] = "INSERT OR IGNORE INTO samples(job_id, task, at, cpu_ns, mem_bytes,"
                      " gpu_util, gpu_mem_bytes, energy_mj, interval_ms)"
                      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [SQ_SAMPLE_LIST] = "SELECT job_id, task, at, cpu_ns, mem_bytes, gpu_util, gpu_mem_bytes,"
                       " energy_mj, interval_ms FROM samples WHERE at >= ?1 AND at < ?2"
                       " ORDER BY job_id, task, at",
    [SQ_USAGE_DELETE] = "DELETE FROM usage_hourly WHERE hour >= ?1 AND hour < ?2",
    [SQ_USAGE_INSERT] = "INSERT INTO usage_hourly(hour, tenant, user, model, item, borrowed,"
                        " gpu_ppm_s, cpu_milli_s, mem_mib_s, util_pct_ms, util_ms,"
                        " gpu_mem_peak, energy_mj, cpu_used_ms, gpu_bill_ppm_s)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
                        " ?15)",
    [SQ_USAGE_LIST] = "SELECT hour, tenant, user, model, item, borrowed, gpu_ppm_s, cpu_milli_s,"
                      " mem_mib_s, util_pct_ms, util_ms, gpu_mem_peak, energy_mj, cpu_used_ms,"
                      " gpu_bill_ppm_s FROM usage_hourly WHERE hour >= ?1 AND hour < ?2"
                      " ORDER BY hour, tenant, user, model, item, borrowed",
    [SQ_NET_ADD] = "INSERT INTO tenant_nets(tenant, vni, subnet) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT(tenant) DO UPDATE SET vni = excluded.vni, subnet = excluded.subnet",
    [SQ_NET_LIST] = "SELECT tenant, vni, subnet FROM tenant_nets ORDER BY vni",
};

/* ---- reading rows into arrays ---------------------------------------------- */

typedef sq_row_fn row_fn;
typedef sq_clear_fn clear_fn;

/*
 * Steps the bound statement st to the end, filling one zeroed element of
 * `size` bytes per row with fn, into a new array *out of *n elements. On
 * failure every element is cleared, the array freed, *out NULL and *n 0.
 */
int sq_rows(struct sq_store *s, sqlite3_stmt *st, size_t size, row_fn fn, clear_fn clear,
            void **out, size_t *n)
{
    unsigned char *arr = NULL;
    size_t cap = 0, count = 0;
    int rc = 0, r;

    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = allot_grow((void **)&arr, &cap, count + 1, size)) != 0)
            break;
        memset(arr + count * size, 0, size);
        count++; /* counted first: a half-filled element is cleared below */
        if ((rc = fn(s, st, arr + (count - 1) * size)) != 0)
            break;
    }
    if (rc == 0)
        rc = sq_done(s, st, r);
    else
        sq_done(s, st, SQLITE_OK);
    if (rc != 0) {
        for (size_t i = 0; i < count; i++)
            clear(arr + i * size);
        allot_free(arr);
        arr = NULL;
        count = 0;
    }
    *out = arr;
    *n = count;
    return rc;
}

/* Like sq_rows for a statement of one row: fills *out (`size` bytes) with
 * it, ALLOT_ENOENT when there is none (rows past the first are cleared). */
int sq_row(struct sq_store *s, sqlite3_stmt *st, size_t size, row_fn fn, clear_fn clear, void *out)
{
    unsigned char *arr = NULL;
    size_t n = 0;
    int rc = sq_rows(s, st, size, fn, clear, (void **)&arr, &n);

    return rc != 0 ? rc : store_take_first(arr, n, size, clear, out);
}

/* Changes made by the last write; ALLOT_ENOENT when it touched no row. */
static int sq_changed(struct sq_store *s, int rc)
{
    if (rc == 0 && sqlite3_changes(s->db) == 0) {
        store_set_err(&s->base, "no such object");
        return ALLOT_ENOENT;
    }
    return rc;
}

/* Parses a state name column against `names`; ALLOT_EIO when unknown. */
static int sq_col_enum(struct sq_store *s, sqlite3_stmt *st, int i, const char *(*name)(int),
                       int *out)
{
    const char *t = (const char *)sqlite3_column_text(st, i);

    for (int k = 0; t && name(k); k++)
        if (strcmp(t, name(k)) == 0) {
            *out = k;
            return 0;
        }
    store_set_err(&s->base, "unknown value '%s' in column %d", t ? t : "", i);
    return ALLOT_EIO;
}

static int sq_col_hash(sqlite3_stmt *st, int i, uint8_t out[ALLOT_STORE_HASH_LEN])
{
    const void *b = sqlite3_column_blob(st, i);

    memset(out, 0, ALLOT_STORE_HASH_LEN);
    if (!b || sqlite3_column_bytes(st, i) != ALLOT_STORE_HASH_LEN)
        return ALLOT_EIO;
    memcpy(out, b, ALLOT_STORE_HASH_LEN);
    return 0;
}

/* ---- jobs ------------------------------------------------------------------------ */

static int job_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_job *j = elem;
    int rc;

    j->id = sqlite3_column_int64(st, 0);
    j->token_id = sqlite3_column_int64(st, 3);
    j->submit_time = sqlite3_column_int64(st, 8);
    j->start_time = sqlite3_column_int64(st, 9);
    j->end_time = sqlite3_column_int64(st, 10);
    j->has_exit_code = sqlite3_column_type(st, 11) != SQLITE_NULL;
    j->exit_code = sqlite3_column_int(st, 11);
    j->array_parent = sqlite3_column_int64(st, 12);
    j->array_index = sqlite3_column_int(st, 13);
    j->held = sqlite3_column_int(st, 15) != 0;
    if ((rc = sq_col_text(st, 1, &j->tenant)) || (rc = sq_col_text(st, 2, &j->name)) ||
        (rc = sq_col_text(st, 4, &j->spec)) || (rc = sq_col_text(st, 6, &j->placement)) ||
        (rc = sq_col_text(st, 7, &j->pending_reason)) || (rc = sq_col_text(st, 14, &j->idem_key)) ||
        (rc = sq_col_text(st, 16, &j->user)) ||
        (rc = sq_col_enum(s, st, 5, allot_store_job_state_name, &j->state)))
        return rc;
    return 0;
}

int sq_job_insert(struct allot_store *base, const struct allot_store_job *j, int64_t *id,
                  bool *existed)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0, r;

    *existed = false;
    if (j->idem_key) {
        if (!(st = sq_stmt(s, SQ_JOB_BY_KEY, &rc)))
            return rc;
        sqlite3_bind_int64(st, 1, j->token_id);
        sq_bind_text(st, 2, j->idem_key);
        r = sqlite3_step(st);
        if (r == SQLITE_ROW) {
            *id = sqlite3_column_int64(st, 0);
            *existed = true;
        }
        if ((rc = sq_done(s, st, r)) != 0 || *existed)
            return rc;
    }
    if (!(st = sq_stmt(s, SQ_JOB_INSERT, &rc)))
        return rc;
    sq_bind_text(st, 1, j->tenant);
    sq_bind_text(st, 2, j->name);
    sqlite3_bind_int64(st, 3, j->token_id);
    sq_bind_text(st, 4, j->spec);
    sq_bind_text(st, 5, allot_store_job_state_name(j->state));
    sq_bind_text(st, 6, j->placement);
    sq_bind_text(st, 7, j->pending_reason);
    sqlite3_bind_int64(st, 8, j->submit_time);
    sqlite3_bind_int64(st, 9, j->start_time);
    sqlite3_bind_int64(st, 10, j->end_time);
    if (j->has_exit_code)
        sqlite3_bind_int(st, 11, j->exit_code);
    sqlite3_bind_int64(st, 12, j->array_parent);
    sqlite3_bind_int(st, 13, j->array_index);
    sq_bind_text(st, 14, j->idem_key);
    sqlite3_bind_int(st, 15, j->held);
    if ((rc = sq_done(s, st, sqlite3_step(st))) != 0)
        return rc;
    *id = sqlite3_last_insert_rowid(s->db);
    if (j->array_parent == ALLOT_STORE_ARRAY_NEW) {
        if (!(st = sq_stmt(s, SQ_JOB_ARRAY_SELF, &rc)))
            return rc;
        sqlite3_bind_int64(st, 1, *id);
        if ((rc = sq_done(s, st, sqlite3_step(st))) != 0)
            return rc;
    }
    for (size_t i = 0; i < j->n_deps; i++) {
        if (j->deps[i] == *id) {
            store_set_err(base, "a job cannot depend on itself");
            return ALLOT_EINVAL;
        }
        if (!(st = sq_stmt(s, SQ_DEP_INSERT, &rc)))
            return rc;
        sqlite3_bind_int64(st, 1, *id);
        sqlite3_bind_int64(st, 2, j->deps[i]);
        if ((rc = sq_done(s, st, sqlite3_step(st))) != 0) {
            if (rc == ALLOT_ENOENT)
                store_set_err(base, "dependency %lld: no such job", (long long)j->deps[i]);
            return rc;
        }
    }
    return 0;
}

static int dep_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    *(int64_t *)elem = sqlite3_column_int64(st, 0);
    return 0;
}

int sq_job_get(struct allot_store *base, int64_t id, struct allot_store_job *out)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_JOB_GET, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, id);
    if ((rc = sq_row(s, st, sizeof *out, job_row, store_clear_job, out)) != 0) {
        if (rc == ALLOT_ENOENT)
            store_set_err(base, "job %lld: no such job", (long long)id);
        return rc;
    }
    if (!(st = sq_stmt(s, SQ_DEPS_GET, &rc)))
        return rc; /* the caller clears *out */
    sqlite3_bind_int64(st, 1, id);
    return sq_rows(s, st, sizeof(int64_t), dep_row, store_clear_none, (void **)&out->deps,
                   &out->n_deps);
}

int sq_job_update(struct allot_store *base, const struct allot_store_job *j)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0, r;

    if (!(st = sq_stmt(s, SQ_JOB_UPDATE, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, j->id);
    sq_bind_text(st, 2, allot_store_job_state_name(j->state));
    sq_bind_text(st, 3, j->placement);
    sq_bind_text(st, 4, j->pending_reason);
    sqlite3_bind_int64(st, 5, j->start_time);
    sqlite3_bind_int64(st, 6, j->end_time);
    if (j->has_exit_code)
        sqlite3_bind_int(st, 7, j->exit_code);
    if ((rc = sq_done(s, st, sqlite3_step(st))) != 0 || sqlite3_changes(s->db) == 1)
        return rc;
    /* nothing changed: tell a missing job from a finished one */
    if (!(st = sq_stmt(s, SQ_JOB_STATE, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, j->id);
    r = sqlite3_step(st);
    rc = r == SQLITE_ROW ? ALLOT_ESTATE : r == SQLITE_DONE ? ALLOT_ENOENT : 0;
    r = sq_done(s, st, r);
    if (r != 0)
        return r;
    store_set_err(base, "job %lld: %s", (long long)j->id,
                  rc == ALLOT_ESTATE ? "already ended, or held" : "no such job");
    return rc;
}

/* After an update of job id that changed no row: ALLOT_ESTATE (the job is
 * not in the states the update is for: `why`) or ALLOT_ENOENT, with the
 * message. */
static int sq_not_pending(struct allot_store *base, int64_t id, const char *why)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0, r;

    if (!(st = sq_stmt(s, SQ_JOB_STATE, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, id);
    r = sqlite3_step(st);
    rc = r == SQLITE_ROW ? ALLOT_ESTATE : r == SQLITE_DONE ? ALLOT_ENOENT : 0;
    r = sq_done(s, st, r);
    if (r != 0)
        return r;
    store_set_err(base, "job %lld: %s", (long long)id, rc == ALLOT_ESTATE ? why : "no such job");
    return rc;
}

/* Steps statement st, an update of job id bound already: 0 when it
 * changed the job, else sq_not_pending's answer. */
static int sq_pending_step(struct allot_store *base, sqlite3_stmt *st, int64_t id, const char *why)
{
    struct sq_store *s = (struct sq_store *)base;
    int rc = sq_done(s, st, sqlite3_step(st));

    if (rc != 0 || sqlite3_changes(s->db) == 1)
        return rc;
    return sq_not_pending(base, id, why);
}

int sq_job_hold(struct allot_store *base, int64_t id, bool held)
{
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt((struct sq_store *)base, SQ_JOB_HOLD, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, held);
    return sq_pending_step(base, st, id, "not pending");
}

int sq_job_set_spec(struct allot_store *base, int64_t id, const char *spec)
{
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt((struct sq_store *)base, SQ_JOB_SET_SPEC, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, id);
    sq_bind_text(st, 2, spec);
    return sq_pending_step(base, st, id, "ended");
}

int sq_job_count_live(struct allot_store *base, const char *tenant, int64_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0, r;

    if (!(st = sq_stmt(s, SQ_JOB_COUNT_LIVE, &rc)))
        return rc;
    sq_bind_text(st, 1, tenant);
    r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        r = SQLITE_OK;
    }
    return sq_done(s, st, r);
}

int sq_job_list(struct allot_store *base, const struct allot_store_job_filter *f,
                struct allot_store_job_page *page)
{
    struct sq_store *s = (struct sq_store *)base;
    int k = store_list_shape(f), sm = (k >> 4) % 3;
    sqlite3_stmt *st = s->list[k];
    int rc, r, p = 3;

    if (!st) {
        char sql[STORE_LIST_SQL_MAX];

        store_list_sql(k, '?',
                       "substr(CAST(name AS BLOB), 1, length(CAST(?10 AS BLOB)))"
                       " = CAST(?10 AS BLOB)",
                       sql, sizeof sql);
        r = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->list[k], NULL);
        if (r != SQLITE_OK) {
            s->list[k] = NULL;
            return sq_err(s, r);
        }
        st = s->list[k];
    }
    sqlite3_bind_int64(st, 1, f->cursor ? f->cursor : f->newest_first ? INT64_MAX : 0);
    if (f->tenant)
        sq_bind_text(st, 2, f->tenant);
    for (int i = 0; i < ALLOT_SJ_NSTATES && sm; i++)
        if (f->states & (1u << i))
            sq_bind_text(st, p++, allot_store_job_state_name(i));
    if (f->name_prefix)
        sqlite3_bind_blob(st, 10, f->name_prefix, (int)strlen(f->name_prefix), SQLITE_STATIC);
    if (f->array_parent)
        sqlite3_bind_int64(st, 12, f->array_parent);
    if (f->user)
        sq_bind_text(st, 13, f->user);
    /* one row more than asked tells whether another page follows */
    sqlite3_bind_int(st, 11, f->limit + 1);
    rc = sq_rows(s, st, sizeof *page->jobs, job_row, store_clear_job, (void **)&page->jobs,
                 &page->n);
    if (rc == 0 && page->n > (size_t)f->limit) {
        allot_store_job_clear(&page->jobs[f->limit]);
        page->n = (size_t)f->limit;
        page->next_cursor = page->jobs[page->n - 1].id;
    }
    return rc;
}

/* ---- events ------------------------------------------------------------------------ */

int sq_event_add(struct allot_store *base, const struct allot_store_event *ev, int64_t *seq)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_EVENT_ADD, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, ev->job_id);
    sqlite3_bind_int64(st, 2, ev->time);
    sq_bind_text(st, 3, ev->kind);
    sq_bind_text(st, 4, ev->detail);
    if ((rc = sq_done(s, st, sqlite3_step(st))) == 0)
        *seq = sqlite3_last_insert_rowid(s->db);
    return rc;
}

static int event_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_event *e = elem;
    int rc;

    e->seq = sqlite3_column_int64(st, 0);
    e->job_id = sqlite3_column_int64(st, 1);
    e->time = sqlite3_column_int64(st, 2);
    if ((rc = sq_col_text(st, 3, &e->kind)) || (rc = sq_col_text(st, 4, &e->detail)))
        return rc;
    return 0;
}

int sq_event_list(struct allot_store *base, int64_t job_id, int64_t after, int limit,
                  struct allot_store_event **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_EVENT_LIST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, after);
    sqlite3_bind_int(st, 3, limit);
    return sq_rows(s, st, sizeof **out, event_row, store_clear_event, (void **)out, n);
}

int sq_event_last(struct allot_store *base, int64_t job_id, const char *kind,
                  struct allot_store_event *out)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_EVENT_LAST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, job_id);
    sq_bind_text(st, 2, kind);
    return sq_row(s, st, sizeof *out, event_row, store_clear_event, out);
}

int sq_event_last_running(struct allot_store *base, const char *kind,
                          struct allot_store_event **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_EVENT_LAST_RUNNING, &rc)))
        return rc;
    sq_bind_text(st, 1, kind);
    return sq_rows(s, st, sizeof **out, event_row, store_clear_event, (void **)out, n);
}

/* ---- tenants and priority classes ------------------------------------------------------ */

int sq_tenant_put(struct allot_store *base, const struct allot_store_tenant *t)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_TENANT_PUT, &rc)))
        return rc;
    sq_bind_text(st, 1, t->path);
    sqlite3_bind_double(st, 2, t->weight);
    sq_bind_text(st, 3, t->isolation);
    sq_bind_text(st, 4, t->quotas);
    return sq_done(s, st, sqlite3_step(st));
}

int sq_tenant_delete(struct allot_store *base, const char *path)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0, r;

    if (!(st = sq_stmt(s, SQ_TENANT_CHILD, &rc)))
        return rc;
    sq_bind_text(st, 1, path);
    r = sqlite3_step(st);
    if ((rc = sq_done(s, st, r)) != 0)
        return rc;
    if (r == SQLITE_ROW) {
        store_set_err(base, "tenant '%s' has children", path);
        return ALLOT_ESTATE;
    }
    if (!(st = sq_stmt(s, SQ_TENANT_DELETE, &rc)))
        return rc;
    sq_bind_text(st, 1, path);
    return sq_changed(s, sq_done(s, st, sqlite3_step(st)));
}

static int tenant_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_tenant *t = elem;
    int rc;

    t->weight = sqlite3_column_double(st, 1);
    if ((rc = sq_col_text(st, 0, &t->path)) || (rc = sq_col_text(st, 2, &t->isolation)) ||
        (rc = sq_col_text(st, 3, &t->quotas)))
        return rc;
    return 0;
}

int sq_tenant_list(struct allot_store *base, struct allot_store_tenant **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_TENANT_LIST, &rc)))
        return rc;
    return sq_rows(s, st, sizeof **out, tenant_row, store_clear_tenant, (void **)out, n);
}

int sq_prio_put(struct allot_store *base, const struct allot_store_prio_class *c)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_PRIO_PUT, &rc)))
        return rc;
    sq_bind_text(st, 1, c->name);
    sqlite3_bind_int(st, 2, c->value);
    sqlite3_bind_int(st, 3, c->preemptible ? 1 : 0);
    return sq_done(s, st, sqlite3_step(st));
}

int sq_prio_delete(struct allot_store *base, const char *name)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_PRIO_DELETE, &rc)))
        return rc;
    sq_bind_text(st, 1, name);
    return sq_changed(s, sq_done(s, st, sqlite3_step(st)));
}

static int prio_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_prio_class *c = elem;

    c->value = sqlite3_column_int(st, 1);
    c->preemptible = sqlite3_column_int(st, 2) != 0;
    return sq_col_text(st, 0, &c->name);
}

int sq_prio_list(struct allot_store *base, struct allot_store_prio_class **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_PRIO_LIST, &rc)))
        return rc;
    return sq_rows(s, st, sizeof **out, prio_row, store_clear_prio, (void **)out, n);
}

/* ---- nodes ------------------------------------------------------------------------------ */

int sq_node_put(struct allot_store *base, const struct allot_store_node *nd)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_NODE_PUT, &rc)))
        return rc;
    sq_bind_text(st, 1, nd->name);
    sq_bind_text(st, 2, nd->inventory);
    sq_bind_text(st, 3, allot_store_node_state_name(nd->state));
    sqlite3_bind_int64(st, 4, nd->last_heartbeat);
    sqlite3_bind_int64(st, 5, nd->lease_expiry);
    sqlite3_bind_int64(st, 6, nd->token_id);
    return sq_done(s, st, sqlite3_step(st));
}

static int node_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_node *nd = elem;
    int rc;

    nd->last_heartbeat = sqlite3_column_int64(st, 3);
    nd->lease_expiry = sqlite3_column_int64(st, 4);
    nd->token_id = sqlite3_column_int64(st, 5);
    if ((rc = sq_col_text(st, 0, &nd->name)) || (rc = sq_col_text(st, 1, &nd->inventory)) ||
        (rc = sq_col_enum(s, st, 2, allot_store_node_state_name, &nd->state)))
        return rc;
    return 0;
}

int sq_node_get(struct allot_store *base, const char *name, struct allot_store_node *out)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_NODE_GET, &rc)))
        return rc;
    sq_bind_text(st, 1, name);
    return sq_row(s, st, sizeof *out, node_row, store_clear_node, out);
}

int sq_node_heartbeat(struct allot_store *base, const char *name, int64_t now, int64_t expiry)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_NODE_HEARTBEAT, &rc)))
        return rc;
    sq_bind_text(st, 1, name);
    sqlite3_bind_int64(st, 2, now);
    sqlite3_bind_int64(st, 3, expiry);
    return sq_changed(s, sq_done(s, st, sqlite3_step(st)));
}

int sq_node_delete(struct allot_store *base, const char *name)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_NODE_DELETE, &rc)))
        return rc;
    sq_bind_text(st, 1, name);
    return sq_changed(s, sq_done(s, st, sqlite3_step(st)));
}

int sq_node_list(struct allot_store *base, struct allot_store_node **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_NODE_LIST, &rc)))
        return rc;
    return sq_rows(s, st, sizeof **out, node_row, store_clear_node, (void **)out, n);
}

/* ---- tokens ----------------------------------------------------------------------------- */

int sq_token_add(struct allot_store *base, const struct allot_store_token *t, int64_t *id)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_TOKEN_ADD, &rc)))
        return rc;
    sq_bind_text(st, 1, t->name);
    sq_bind_text(st, 2, allot_store_role_name(t->role));
    sq_bind_text(st, 3, t->tenant);
    sqlite3_bind_blob(st, 4, t->hash, ALLOT_STORE_HASH_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, t->created);
    sqlite3_bind_int64(st, 6, t->revoked);
    sqlite3_bind_int64(st, 7, t->expires);
    if ((rc = sq_done(s, st, sqlite3_step(st))) == 0)
        *id = sqlite3_last_insert_rowid(s->db);
    return rc;
}

static int token_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_token *t = elem;
    int rc;

    t->id = sqlite3_column_int64(st, 0);
    t->created = sqlite3_column_int64(st, 5);
    t->revoked = sqlite3_column_int64(st, 6);
    t->expires = sqlite3_column_int64(st, 7);
    if ((rc = sq_col_text(st, 1, &t->name)) || (rc = sq_col_text(st, 3, &t->tenant)) ||
        (rc = sq_col_enum(s, st, 2, allot_store_role_name, &t->role)) ||
        (rc = sq_col_hash(st, 4, t->hash)))
        return rc;
    return 0;
}

int sq_token_get(struct allot_store *base, int64_t id, const uint8_t *hash,
                 struct allot_store_token *out)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, hash ? SQ_TOKEN_FIND : SQ_TOKEN_GET, &rc)))
        return rc;
    if (hash)
        sqlite3_bind_blob(st, 1, hash, ALLOT_STORE_HASH_LEN, SQLITE_STATIC);
    else
        sqlite3_bind_int64(st, 1, id);
    return sq_row(s, st, sizeof *out, token_row, store_clear_token, out);
}

int sq_token_revoke(struct allot_store *base, int64_t id, int64_t when)
{
    struct sq_store *s = (struct sq_store *)base;
    struct allot_store_token t;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_TOKEN_REVOKE, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, when);
    if ((rc = sq_done(s, st, sqlite3_step(st))) != 0 || sqlite3_changes(s->db) == 1)
        return rc;
    /* nothing changed: missing, or revoked before */
    memset(&t, 0, sizeof t);
    rc = sq_token_get(base, id, NULL, &t);
    allot_store_token_clear(&t);
    return rc == 0 ? ALLOT_ESTATE : rc;
}

int sq_token_list(struct allot_store *base, struct allot_store_token **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_TOKEN_LIST, &rc)))
        return rc;
    return sq_rows(s, st, sizeof **out, token_row, store_clear_token, (void **)out, n);
}

/* ---- audit rows ----------------------------------------------------------------------------- */

int sq_audit_last(struct allot_store *base, int64_t *seq, uint8_t hash[ALLOT_STORE_HASH_LEN])
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0, r;

    *seq = 0;
    memset(hash, 0, ALLOT_STORE_HASH_LEN);
    if (!(st = sq_stmt(s, SQ_AUDIT_LAST, &rc)))
        return rc;
    r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        *seq = sqlite3_column_int64(st, 0);
        if (sq_col_hash(st, 1, hash) != 0) {
            /* a mangled head: append after it anyway; verify reports it */
            memset(hash, 0, ALLOT_STORE_HASH_LEN);
        }
    }
    return sq_done(s, st, r);
}

int sq_audit_insert(struct allot_store *base, const struct allot_store_audit *e)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_AUDIT_INSERT, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, e->seq);
    sqlite3_bind_int64(st, 2, e->time);
    sqlite3_bind_int64(st, 3, e->token_id);
    sq_bind_text(st, 4, e->action);
    sq_bind_text(st, 5, e->target);
    sq_bind_text(st, 6, e->result);
    sqlite3_bind_blob(st, 7, e->prev_hash, ALLOT_STORE_HASH_LEN, SQLITE_STATIC);
    sqlite3_bind_blob(st, 8, e->hash, ALLOT_STORE_HASH_LEN, SQLITE_STATIC);
    return sq_done(s, st, sqlite3_step(st));
}

static int audit_row(struct sq_store *s, sqlite3_stmt *st, void *elem)
{
    struct allot_store_audit *a = elem;
    int rc;

    a->seq = sqlite3_column_int64(st, 0);
    a->time = sqlite3_column_int64(st, 1);
    a->token_id = sqlite3_column_int64(st, 2);
    if ((rc = sq_col_text(st, 3, &a->action)) || (rc = sq_col_text(st, 4, &a->target)) ||
        (rc = sq_col_text(st, 5, &a->result)))
        return rc;
    /* a NULL text column (someone edited the file) reads as "" so that
     * verify can report the entry instead of failing */
    if ((!a->action && !(a->action = store_dupn("", 0))) ||
        (!a->target && !(a->target = store_dupn("", 0))) ||
        (!a->result && !(a->result = store_dupn("", 0))))
        return ALLOT_ENOMEM;
    /* a mangled hash stays zeros: verify reports the entry */
    sq_col_hash(st, 6, a->prev_hash);
    sq_col_hash(st, 7, a->hash);
    return 0;
}

int sq_audit_list(struct allot_store *base, int64_t after, int limit,
                  struct allot_store_audit **out, size_t *n)
{
    struct sq_store *s = (struct sq_store *)base;
    sqlite3_stmt *st;
    int rc = 0;

    if (!(st = sq_stmt(s, SQ_AUDIT_LIST, &rc)))
        return rc;
    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_int(st, 2, limit);
    return sq_rows(s, st, sizeof **out, audit_row, store_clear_audit, (void **)out, n);
}
