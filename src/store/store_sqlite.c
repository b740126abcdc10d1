/*
 * The SQLite back-end of allot-store (URL "sqlite:PATH"): opening, the
 * numbered migrations, transactions and savepoints, the prepared-statement
 * cache and the helpers the table code (store_sqlite_tables.c) shares.
 *
 * Settings on every connection: journal_mode=WAL (readers never block the
 * writer), synchronous=FULL (a commit that returned is on disk, also after
 * power loss), foreign_keys=ON, a busy timeout. A batch starts with BEGIN
 * IMMEDIATE so that the write lock is taken up front: a read-then-write
 * inside a batch (audit chain head, idempotency key) cannot be overtaken by
 * another writer, and SQLITE_BUSY appears at begin, not at commit.
 *
 * SQLite's own memory goes through allot_malloc (sqlite3_config, once per
 * process, before SQLite initialises), so allot_alloc_fail_at() also fails
 * SQLite's allocations in tests. User data only ever reaches SQL through
 * bound parameters; the only SQL text built at run time is the job listing,
 * assembled from constant fragments (store_sqlite_tables.c).
 */
#include "store_sqlite.h"

#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* 'allt': marks the file as an allot store (PRAGMA application_id) */
#define STORE_APP_ID 0x616c6c74

/*
 * Numbered migrations. Version N is reached by running script N in its own
 * transaction, which also records meta.schema_version = N. Scripts are
 * append-only history: never edit a released one, add the next number.
 */
struct migration {
    int version;
    const char *sql;
};

static const struct migration migrations[] = {
    {1, "PRAGMA application_id = 1634495604;\n" /* STORE_APP_ID */
        "CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;\n"
        "CREATE TABLE tenants(path TEXT PRIMARY KEY NOT NULL,"
        " weight REAL NOT NULL CHECK (weight > 0),"
        " isolation TEXT NOT NULL CHECK (isolation IN ('shared','exclusive-gpu',"
        "'exclusive-node')), quotas TEXT NOT NULL) WITHOUT ROWID;\n"
        "CREATE TABLE prio_classes(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL,"
        " preemptible INTEGER NOT NULL CHECK (preemptible IN (0, 1))) WITHOUT ROWID;\n"
        "CREATE TABLE nodes(name TEXT PRIMARY KEY NOT NULL, inventory TEXT NOT NULL,"
        " state TEXT NOT NULL CHECK (state IN ('ready','draining','lost','cordoned')),"
        " last_heartbeat INTEGER NOT NULL, lease_expiry INTEGER NOT NULL) WITHOUT ROWID;\n"
        "CREATE TABLE tokens(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
        " role TEXT NOT NULL CHECK (role IN ('admin','tenant-admin','member','viewer','agent')),"
        " tenant TEXT NOT NULL, hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),"
        " created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);\n"
        "CREATE TABLE jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL,"
        " name TEXT NOT NULL, token_id INTEGER NOT NULL, spec TEXT NOT NULL,"
        " state TEXT NOT NULL CHECK (state IN ('pending','starting','running','succeeded',"
        "'failed','cancelled','lost')),"
        " placement TEXT, pending_reason TEXT, submit_time INTEGER NOT NULL,"
        " start_time INTEGER NOT NULL DEFAULT 0, end_time INTEGER NOT NULL DEFAULT 0,"
        " exit_code INTEGER, array_parent INTEGER NOT NULL DEFAULT 0,"
        " array_index INTEGER NOT NULL DEFAULT 0, idem_key TEXT,"
        " UNIQUE (token_id, idem_key));\n"
        "CREATE TABLE job_deps(job_id INTEGER NOT NULL REFERENCES jobs(id),"
        " dep_id INTEGER NOT NULL REFERENCES jobs(id), PRIMARY KEY (job_id, dep_id))"
        " WITHOUT ROWID;\n"
        "CREATE TABLE job_events(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        " job_id INTEGER NOT NULL REFERENCES jobs(id), time INTEGER NOT NULL,"
        " kind TEXT NOT NULL, detail TEXT);\n"
        "CREATE TABLE audit(seq INTEGER PRIMARY KEY, time INTEGER NOT NULL,"
        " token_id INTEGER NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,"
        " result TEXT NOT NULL, prev_hash BLOB NOT NULL, hash BLOB NOT NULL);\n"
        /* append-only: the store itself never updates or deletes these */
        "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
        " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;\n"
        "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
        " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;\n"
        "CREATE TRIGGER job_events_no_update BEFORE UPDATE ON job_events"
        " BEGIN SELECT RAISE(ABORT, 'job events are append-only'); END;\n"
        "CREATE TRIGGER job_events_no_delete BEFORE DELETE ON job_events"
        " BEGIN SELECT RAISE(ABORT, 'job events are append-only'); END;\n"},
    /* keyset pagination: each listing shape walks one of these in id order */
    {2, "CREATE INDEX jobs_by_state ON jobs(state, id);\n"
        "CREATE INDEX jobs_by_tenant ON jobs(tenant, id);\n"
        "CREATE INDEX jobs_by_tenant_state ON jobs(tenant, state, id);\n"
        "CREATE INDEX job_events_by_job ON job_events(job_id, seq);\n"},
    /* the members of a job array, for listing and cancelling them together */
    {3, "CREATE INDEX jobs_by_array ON jobs(array_parent, id) WHERE array_parent != 0;\n"},
    /* metering: runs and node spans kept by triggers, samples, hourly roll-ups */
    {4, "CREATE TABLE runs(id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " job_id INTEGER NOT NULL REFERENCES jobs(id), tenant TEXT NOT NULL,"
        " token_id INTEGER NOT NULL, placement TEXT NOT NULL, start_time INTEGER NOT NULL,"
        " end_time INTEGER);\n"
        "CREATE INDEX runs_open ON runs(job_id) WHERE end_time IS NULL;\n"
        "CREATE INDEX runs_by_start ON runs(start_time);\n"
        "CREATE INDEX runs_by_end ON runs(end_time);\n"
        "CREATE TRIGGER runs_begin AFTER UPDATE OF state ON jobs"
        " WHEN NEW.state IN ('starting','running') AND OLD.state NOT IN ('starting','running')"
        " BEGIN INSERT INTO runs(job_id, tenant, token_id, placement, start_time)"
        " VALUES (NEW.id, NEW.tenant, NEW.token_id, COALESCE(NEW.placement, '{}'),"
        " CASE WHEN NEW.start_time > 0 THEN NEW.start_time"
        " ELSE CAST(strftime('%s','now') AS INTEGER) END); END;\n"
        "CREATE TRIGGER runs_end AFTER UPDATE OF state ON jobs"
        " WHEN OLD.state IN ('starting','running') AND NEW.state NOT IN ('starting','running')"
        " BEGIN UPDATE runs SET end_time = MAX(start_time,"
        " CASE WHEN NEW.end_time >= OLD.start_time AND NEW.end_time > 0 THEN NEW.end_time"
        " ELSE CAST(strftime('%s','now') AS INTEGER) END)"
        " WHERE job_id = NEW.id AND end_time IS NULL; END;\n"
        "CREATE TABLE node_spans(id INTEGER PRIMARY KEY AUTOINCREMENT, node TEXT NOT NULL,"
        " inventory TEXT NOT NULL, start_time INTEGER NOT NULL, end_time INTEGER);\n"
        "CREATE INDEX node_spans_open ON node_spans(node) WHERE end_time IS NULL;\n"
        "CREATE TRIGGER node_spans_new AFTER INSERT ON nodes WHEN NEW.state != 'lost'"
        " BEGIN INSERT INTO node_spans(node, inventory, start_time)"
        " VALUES (NEW.name, NEW.inventory, CAST(strftime('%s','now') AS INTEGER)); END;\n"
        "CREATE TRIGGER node_spans_lost AFTER UPDATE OF state, inventory ON nodes"
        " WHEN OLD.state != 'lost' AND (NEW.state = 'lost' OR NEW.inventory != OLD.inventory)"
        " BEGIN UPDATE node_spans SET end_time = CAST(strftime('%s','now') AS INTEGER)"
        " WHERE node = NEW.name AND end_time IS NULL; END;\n"
        "CREATE TRIGGER node_spans_back AFTER UPDATE OF state, inventory ON nodes"
        " WHEN NEW.state != 'lost' AND (OLD.state = 'lost' OR NEW.inventory != OLD.inventory)"
        " BEGIN INSERT INTO node_spans(node, inventory, start_time)"
        " VALUES (NEW.name, NEW.inventory, CAST(strftime('%s','now') AS INTEGER)); END;\n"
        "CREATE TRIGGER node_spans_gone AFTER DELETE ON nodes"
        " BEGIN UPDATE node_spans SET end_time = CAST(strftime('%s','now') AS INTEGER)"
        " WHERE node = OLD.name AND end_time IS NULL; END;\n"
        /* spans of the nodes registered before this version */
        "INSERT INTO node_spans(node, inventory, start_time) SELECT name, inventory,"
        " last_heartbeat FROM nodes WHERE state != 'lost';\n"
        "INSERT INTO runs(job_id, tenant, token_id, placement, start_time)"
        " SELECT id, tenant, token_id, COALESCE(placement, '{}'), start_time FROM jobs"
        " WHERE state IN ('starting','running');\n"
        "CREATE TABLE samples(job_id INTEGER NOT NULL, task INTEGER NOT NULL,"
        " at INTEGER NOT NULL, cpu_ns INTEGER NOT NULL, mem_bytes INTEGER NOT NULL,"
        " gpu_util INTEGER NOT NULL, gpu_mem_bytes INTEGER NOT NULL,"
        " energy_mj INTEGER NOT NULL, PRIMARY KEY (job_id, task, at)) WITHOUT ROWID;\n"
        "CREATE INDEX samples_by_time ON samples(at);\n"
        "CREATE TABLE usage_hourly(hour INTEGER NOT NULL, tenant TEXT NOT NULL,"
        " user TEXT NOT NULL, model TEXT NOT NULL, item TEXT NOT NULL,"
        " borrowed INTEGER NOT NULL CHECK (borrowed IN (0, 1)),"
        " gpu_ppm_s INTEGER NOT NULL, cpu_milli_s INTEGER NOT NULL,"
        " mem_mib_s INTEGER NOT NULL, util_pct_ms INTEGER NOT NULL, util_ms INTEGER NOT NULL,"
        " gpu_mem_peak INTEGER NOT NULL, energy_mj INTEGER NOT NULL,"
        " cpu_used_ms INTEGER NOT NULL,"
        " PRIMARY KEY (hour, tenant, user, model, item, borrowed)) WITHOUT ROWID;\n"},
    /* tenant networks: one subnet and VXLAN id per tenant, kept across restarts */
    {5, "CREATE TABLE tenant_nets(tenant TEXT PRIMARY KEY NOT NULL,"
        " vni INTEGER NOT NULL UNIQUE, subnet TEXT NOT NULL UNIQUE) WITHOUT ROWID;\n"},
    /* a sample covers at most a few of its agent's sample intervals back */
    {6, "ALTER TABLE samples ADD COLUMN interval_ms INTEGER NOT NULL DEFAULT 0;\n"},
    /* a job stopped and started again between two writes (running, then
     * starting with a later start time): its run ends, a new one begins */
    {7, "CREATE TRIGGER runs_again AFTER UPDATE OF start_time ON jobs"
        " WHEN OLD.state IN ('starting','running') AND NEW.state IN ('starting','running')"
        " AND NEW.start_time > OLD.start_time"
        " BEGIN UPDATE runs SET end_time = MAX(start_time, NEW.start_time)"
        " WHERE job_id = NEW.id AND end_time IS NULL;"
        " INSERT INTO runs(job_id, tenant, token_id, placement, start_time)"
        " VALUES (NEW.id, NEW.tenant, NEW.token_id, COALESCE(NEW.placement, '{}'),"
        " NEW.start_time); END;\n"},
    /* a node is bound to the agent token that registered it */
    {8, "ALTER TABLE nodes ADD COLUMN token_id INTEGER NOT NULL DEFAULT 0;\n"},
    /* a job's last run (the node of a requeued job's log): O(log runs) */
    {9, "CREATE INDEX runs_by_job ON runs(job_id, id);\n"},
    /* measured billing per job task (docs/billing.md); -1: a row rolled up
     * before, billed by its mean utilisation as it was */
    {10, "ALTER TABLE usage_hourly ADD COLUMN gpu_bill_ppm_s INTEGER NOT NULL DEFAULT -1;\n"},
    /* a node whose inventory changed lost its open span: SQLite ran
     * node_spans_back (open the new span) before node_spans_lost (close the
     * open ones), which then closed both. One trigger closes, then opens.
     * Repair: a span the bug closed at once runs to the next one's start,
     * and a node that is not lost gets its open span back. */
    {11, "DROP TRIGGER IF EXISTS node_spans_lost;\n"
         "DROP TRIGGER IF EXISTS node_spans_back;\n"
         "DROP TRIGGER IF EXISTS node_spans_change;\n"
         "CREATE TRIGGER node_spans_change AFTER UPDATE OF state, inventory ON nodes"
         " WHEN NEW.state != OLD.state OR NEW.inventory != OLD.inventory"
         " BEGIN UPDATE node_spans SET end_time = CAST(strftime('%s','now') AS INTEGER)"
         " WHERE node = NEW.name AND end_time IS NULL AND OLD.state != 'lost'"
         " AND (NEW.state = 'lost' OR NEW.inventory != OLD.inventory);"
         " INSERT INTO node_spans(node, inventory, start_time)"
         " SELECT NEW.name, NEW.inventory, CAST(strftime('%s','now') AS INTEGER)"
         " WHERE NEW.state != 'lost' AND (OLD.state = 'lost' OR NEW.inventory != OLD.inventory);"
         " END;\n"
         "UPDATE node_spans SET end_time = (SELECT min(n.start_time) FROM node_spans n"
         " WHERE n.node = node_spans.node AND n.id > node_spans.id)"
         " WHERE end_time = start_time AND EXISTS (SELECT 1 FROM node_spans p"
         " WHERE p.node = node_spans.node AND p.id < node_spans.id AND p.end_time = "
         "node_spans.start_time)"
         " AND EXISTS (SELECT 1 FROM node_spans n WHERE n.node = node_spans.node"
         " AND n.id > node_spans.id);\n"
         "UPDATE node_spans SET end_time = NULL WHERE id IN (SELECT max(s.id) FROM node_spans s"
         " JOIN nodes d ON d.name = s.node WHERE d.state != 'lost' GROUP BY s.node"
         " HAVING count(s.end_time) = count(*))"
         " AND end_time = start_time AND inventory = (SELECT inventory FROM nodes"
         " WHERE name = node_spans.node);\n"},
    /* a job held by a user (allot hold) does not start until released */
    {12, "ALTER TABLE jobs ADD COLUMN held INTEGER NOT NULL DEFAULT 0;\n"},
    /* a token may be made for a time (allot tokens create --duration) */
    {13, "ALTER TABLE tokens ADD COLUMN expires INTEGER NOT NULL DEFAULT 0;\n"},
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

int store_sqlite_latest(void)
{
    return migrations[N_MIGRATIONS - 1].version;
}

/* ---- SQLite's memory through allot_malloc --------------------------------- */

/* Each block carries its size in front (sqlite3_mem_methods needs xSize);
 * 16 bytes keep the payload 16-aligned. */
#define MEM_HDR 16

static void *sq_malloc(int n)
{
    unsigned char *p;

    if (n <= 0)
        return NULL;
    p = allot_malloc((size_t)n + MEM_HDR);
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof n);
    return p + MEM_HDR;
}

static void sq_free(void *p)
{
    if (p)
        allot_free((unsigned char *)p - MEM_HDR);
}

static void *sq_realloc(void *p, int n)
{
    unsigned char *q;

    if (!p)
        return sq_malloc(n);
    if (n <= 0)
        return NULL;
    q = allot_realloc((unsigned char *)p - MEM_HDR, (size_t)n + MEM_HDR);
    if (!q)
        return NULL;
    memcpy(q, &n, sizeof n);
    return q + MEM_HDR;
}

static int sq_size(void *p)
{
    int n = 0;

    if (p)
        memcpy(&n, (unsigned char *)p - MEM_HDR, sizeof n);
    return n;
}

static int sq_roundup(int n)
{
    return (n + 7) & ~7;
}

static int sq_init(void *ud)
{
    return SQLITE_OK;
}

static void sq_shutdown(void *ud) {}

static const sqlite3_mem_methods sq_mem = {
    .xMalloc = sq_malloc,
    .xFree = sq_free,
    .xRealloc = sq_realloc,
    .xSize = sq_size,
    .xRoundup = sq_roundup,
    .xInit = sq_init,
    .xShutdown = sq_shutdown,
};

static pthread_once_t sq_once = PTHREAD_ONCE_INIT;

static void sq_setup(void)
{
    /* SQLITE_MISUSE: SQLite was initialised by someone else first; it then
     * keeps its own allocator, which is only a loss for fault tests */
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &sq_mem) != SQLITE_OK)
        ALLOT_LOG(ALLOT_LOG_WARN, "store", "SQLite keeps its own allocator");
}

/* ---- errors ------------------------------------------------------------------ */

int sq_err(struct sq_store *s, int rc)
{
    const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);

    store_set_err(&s->base, "sqlite: %s", msg);
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return 0;
    case SQLITE_NOMEM:
        return ALLOT_ENOMEM;
    case SQLITE_CONSTRAINT:
        switch (rc) {
        case SQLITE_CONSTRAINT_UNIQUE:
        case SQLITE_CONSTRAINT_PRIMARYKEY:
            return ALLOT_EEXIST;
        case SQLITE_CONSTRAINT_FOREIGNKEY:
            return ALLOT_ENOENT;
        case SQLITE_CONSTRAINT_TRIGGER:
            return ALLOT_ESTATE;
        default:
            return ALLOT_EINVAL;
        }
    case SQLITE_CANTOPEN:
        return ALLOT_ENOENT;
    case SQLITE_NOTADB:
        return ALLOT_EINVAL;
    default:
        return ALLOT_EIO;
    }
}

/* ---- statements ---------------------------------------------------------------- */

sqlite3_stmt *sq_stmt(struct sq_store *s, int which, int *rc)
{
    int r;

    if (!s->stmt[which]) {
        r = sqlite3_prepare_v3(s->db, sq_stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT,
                               &s->stmt[which], NULL);
        if (r != SQLITE_OK) {
            *rc = sq_err(s, r);
            s->stmt[which] = NULL;
            return NULL;
        }
    }
    return s->stmt[which];
}

int sq_done(struct sq_store *s, sqlite3_stmt *st, int r)
{
    int rc = 0;

    if (r != SQLITE_DONE && r != SQLITE_ROW && r != SQLITE_OK)
        rc = sq_err(s, sqlite3_extended_errcode(s->db));
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int sq_exec(struct sq_store *s, int which)
{
    int rc = 0;
    sqlite3_stmt *st = sq_stmt(s, which, &rc);

    if (!st)
        return rc;
    return sq_done(s, st, sqlite3_step(st));
}

int sq_bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (!v)
        return sqlite3_bind_null(st, i);
    return sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
}

int sq_col_text(sqlite3_stmt *st, int i, char **out)
{
    const unsigned char *t;

    *out = NULL;
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return 0;
    t = sqlite3_column_text(st, i);
    if (!t && sqlite3_column_bytes(st, i) == 0)
        t = (const unsigned char *)""; /* an empty blob (a hand-edited row) */
    else if (!t)
        return ALLOT_ENOMEM; /* a non-NULL value SQLite failed to convert */
    *out = store_dupn((const char *)t, (size_t)sqlite3_column_bytes(st, i));
    return *out ? 0 : ALLOT_ENOMEM;
}

/* ---- transactions ---------------------------------------------------------------- */

static int sq_begin(struct allot_store *base, int depth)
{
    struct sq_store *s = (struct sq_store *)base;

    if (depth > 0)
        return sq_exec(s, SQ_SAVEPOINT);
    /* a transaction left behind by a failed rollback goes first */
    if (!sqlite3_get_autocommit(s->db))
        sq_exec(s, SQ_ROLLBACK);
    return sq_exec(s, SQ_BEGIN);
}

static int sq_commit(struct allot_store *base, int depth)
{
    struct sq_store *s = (struct sq_store *)base;

    return sq_exec(s, depth > 0 ? SQ_RELEASE : SQ_COMMIT);
}

static int sq_rollback(struct allot_store *base, int depth)
{
    struct sq_store *s = (struct sq_store *)base;
    int rc;

    if (depth == 0) {
        /* SQLite may already have rolled back on its own (after an I/O or
         * memory error); ROLLBACK then has nothing to do */
        if (sqlite3_get_autocommit(s->db))
            return 0;
        return sq_exec(s, SQ_ROLLBACK);
    }
    rc = sq_exec(s, SQ_ROLLBACK_TO);
    if (rc == 0)
        rc = sq_exec(s, SQ_RELEASE);
    return rc;
}

/* ---- meta ------------------------------------------------------------------------ */

static int sq_meta_get(struct allot_store *base, const char *key, char **value)
{
    struct sq_store *s = (struct sq_store *)base;
    int rc = 0, r;
    sqlite3_stmt *st = sq_stmt(s, SQ_META_GET, &rc);

    if (!st)
        return rc;
    sq_bind_text(st, 1, key);
    r = sqlite3_step(st);
    if (r == SQLITE_ROW)
        rc = sq_col_text(st, 0, value);
    else if (r == SQLITE_DONE)
        rc = ALLOT_ENOENT;
    r = sq_done(s, st, r);
    if (rc == 0 && r != 0) {
        allot_free(*value);
        *value = NULL;
        rc = r;
    }
    return rc;
}

static int sq_meta_set(struct allot_store *base, const char *key, const char *value)
{
    struct sq_store *s = (struct sq_store *)base;
    int rc = 0;
    sqlite3_stmt *st = sq_stmt(s, SQ_META_SET, &rc);

    if (!st)
        return rc;
    sq_bind_text(st, 1, key);
    sq_bind_text(st, 2, value);
    return sq_done(s, st, sqlite3_step(st));
}

/* ---- leadership ----------------------------------------------------------------------- */

/* allotd on one machine sharing one file: the lead is an exclusive flock
 * on PATH.lead, held while this handle is open. */
static int sq_lead(struct allot_store *base, bool *leading)
{
    struct sq_store *s = (struct sq_store *)base;
    char lock[4200];

    if (s->leading) {
        *leading = true;
        return 0;
    }
    *leading = false;
    if (s->lead_fd < 0) {
        allot_fmt(lock, sizeof lock, "%s.lead", s->path);
        s->lead_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (s->lead_fd < 0) {
            store_set_err(base, "sqlite: %s: %s", lock, strerror(errno));
            return ALLOT_EIO;
        }
    }
    if (flock(s->lead_fd, LOCK_EX | LOCK_NB) == 0) {
        s->leading = *leading = true;
        return 0;
    }
    if (errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    store_set_err(base, "sqlite: flock %s.lead: %s", s->path, strerror(errno));
    return ALLOT_EIO;
}

/* ---- open: settings, schema check, migrations -------------------------------------- */

/* Runs a constant SQL script (no user data in it). */
static int sq_script(struct sq_store *s, const char *sql)
{
    int r = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

    return r == SQLITE_OK ? 0 : sq_err(s, sqlite3_extended_errcode(s->db));
}

/* One integer from a constant query (a pragma); rc on failure. */
static int sq_int(struct sq_store *s, const char *sql, int64_t *v)
{
    sqlite3_stmt *st;
    int r = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);

    *v = 0;
    if (r != SQLITE_OK)
        return sq_err(s, r);
    r = sqlite3_step(st);
    *v = r == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    r = r == SQLITE_ROW || r == SQLITE_DONE ? 0 : sq_err(s, sqlite3_extended_errcode(s->db));
    sqlite3_finalize(st);
    return r;
}

/* The database's schema version: 0 for an empty file, ALLOT_EINVAL for a
 * file that is not an allot store. */
static int sq_read_version(struct sq_store *s, int *version, char *err, size_t errlen)
{
    int64_t app, tables, has_meta;
    int rc;

    if ((rc = sq_int(s, "PRAGMA application_id", &app)) != 0 ||
        (rc = sq_int(s, "SELECT count(*) FROM sqlite_schema", &tables)) != 0 ||
        (rc = sq_int(s, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'",
                     &has_meta)) != 0) {
        allot_fmt(err, errlen, "%s", s->base.err);
        return rc;
    }
    if (app == 0 && tables == 0) {
        *version = 0;
        return 0;
    }
    if (app != STORE_APP_ID || !has_meta) {
        allot_fmt(err, errlen, "the database is not an allot store");
        return ALLOT_EINVAL;
    }
    return store_read_version(&s->base, version, err, errlen);
}

static int sq_migrate(struct sq_store *s, const struct migration *m, char *err, size_t errlen)
{
    char num[24];
    int rc;

    if ((rc = sq_exec(s, SQ_BEGIN)) != 0)
        goto fail;
    if ((rc = sq_script(s, m->sql)) != 0)
        goto rollback;
    allot_fmt(num, sizeof num, "%d", m->version);
    if ((rc = sq_meta_set(&s->base, "schema_version", num)) != 0)
        goto rollback;
    if ((rc = sq_exec(s, SQ_COMMIT)) != 0)
        goto rollback;
    ALLOT_LOG(ALLOT_LOG_INFO, "store", "schema migrated to version %d", m->version);
    return 0;
rollback:
    if (!sqlite3_get_autocommit(s->db))
        sq_exec(s, SQ_ROLLBACK);
fail:
    allot_fmt(err, errlen, "migration %d failed: %s", m->version, s->base.err);
    return rc;
}

static int sq_check_schema(struct sq_store *s, const struct allot_store_opts *opts, char *err,
                           size_t errlen)
{
    int latest = store_sqlite_latest();
    int version = 0;
    int rc;

    if ((rc = sq_read_version(s, &version, err, errlen)) != 0 ||
        (rc = store_version_allowed(version, latest, opts, err, errlen)) != 0)
        return rc;
    for (int i = 0; i < N_MIGRATIONS; i++) {
        if (migrations[i].version <= version)
            continue;
        if ((rc = sq_migrate(s, &migrations[i], err, errlen)) != 0)
            return rc;
        version = migrations[i].version;
    }
    s->base.schema_version = version;
    return 0;
}

static void sq_close(struct allot_store *base)
{
    struct sq_store *s = (struct sq_store *)base;

    if (!s)
        return;
    for (int i = 0; i < SQ_NSTMT; i++)
        sqlite3_finalize(s->stmt[i]);
    for (int i = 0; i < STORE_LIST_SHAPES; i++)
        sqlite3_finalize(s->list[i]);
    sqlite3_close(s->db); /* every statement is finalised: closes at once */
    if (s->lead_fd >= 0)
        close(s->lead_fd); /* gives the lead up */
    allot_free(s->path);
    allot_free(s);
}

static int sq_open(const char *path, const struct allot_store_opts *opts, struct allot_store **out,
                   char *err, size_t errlen)
{
    struct sq_store *s;
    struct stat sb;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
    int rc, r;

    pthread_once(&sq_once, sq_setup);
    /* idempotent; may fail (out of memory) and be retried by the next open */
    r = sqlite3_initialize();
    if (r != SQLITE_OK) {
        allot_fmt(err, errlen, "SQLite failed to initialise: %s", sqlite3_errstr(r));
        return r == SQLITE_NOMEM ? ALLOT_ENOMEM : ALLOT_EIO;
    }
    if (!*path) {
        allot_fmt(err, errlen, "sqlite: no database path");
        return ALLOT_EINVAL;
    }
    if (opts->flags & ALLOT_STORE_CREATE)
        flags |= SQLITE_OPEN_CREATE;
    else if (stat(path, &sb) != 0) {
        allot_fmt(err, errlen, "sqlite: %s: %s", path, strerror(errno));
        return ALLOT_ENOENT;
    }
    s = allot_calloc(1, sizeof *s);
    if (!s) {
        allot_fmt(err, errlen, "out of memory");
        return ALLOT_ENOMEM;
    }
    s->base.ops = &allot_store_sqlite_ops;
    s->lead_fd = -1;
    if (!(s->path = store_dupn(path, strlen(path)))) {
        allot_fmt(err, errlen, "out of memory");
        rc = ALLOT_ENOMEM;
        goto fail;
    }
    /* a new file only its owner reads (it holds the key job credentials
     * are made with, and the jobs' environments); SQLite gives its -wal
     * and -shm files the same mode */
    if (opts->flags & ALLOT_STORE_CREATE && strcmp(path, ":memory:") != 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
    r = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (r != SQLITE_OK) {
        rc = sq_err(s, r);
        allot_fmt(err, errlen, "sqlite: cannot open %s: %s", path, s->base.err);
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, opts->busy_timeout_ms > 0 ? opts->busy_timeout_ms : 5000);
    /* journal_mode answers with a row: sq_int reads and checks it */
    {
        int64_t dummy;

        if ((rc = sq_int(s, "PRAGMA journal_mode=WAL", &dummy)) != 0 ||
            (rc = sq_script(s, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")) != 0) {
            allot_fmt(err, errlen, "sqlite: %s: %s", path, s->base.err);
            goto fail;
        }
    }
    if ((rc = sq_check_schema(s, opts, err, errlen)) != 0)
        goto fail;
    /* the statements that end a batch are prepared now, so that undoing a
     * write never needs memory to prepare them */
    for (int i = SQ_BEGIN; i <= SQ_ROLLBACK_TO; i++)
        if (!sq_stmt(s, i, &rc)) {
            allot_fmt(err, errlen, "sqlite: %s: %s", path, s->base.err);
            goto fail;
        }
    s->base.err[0] = '\0';
    *out = &s->base;
    return 0;
fail:
    sq_close(&s->base);
    return rc;
}

const struct allot_store_ops allot_store_sqlite_ops = {
    .scheme = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .meta_get = sq_meta_get,
    .meta_set = sq_meta_set,
    .lead = sq_lead,
    .job_insert = sq_job_insert,
    .job_get = sq_job_get,
    .job_update = sq_job_update,
    .job_hold = sq_job_hold,
    .job_set_spec = sq_job_set_spec,
    .job_count_live = sq_job_count_live,
    .job_list = sq_job_list,
    .event_add = sq_event_add,
    .event_list = sq_event_list,
    .event_last = sq_event_last,
    .event_last_running = sq_event_last_running,
    .tenant_put = sq_tenant_put,
    .tenant_delete = sq_tenant_delete,
    .tenant_list = sq_tenant_list,
    .prio_put = sq_prio_put,
    .prio_delete = sq_prio_delete,
    .prio_list = sq_prio_list,
    .node_put = sq_node_put,
    .node_get = sq_node_get,
    .node_heartbeat = sq_node_heartbeat,
    .node_delete = sq_node_delete,
    .node_list = sq_node_list,
    .token_add = sq_token_add,
    .token_get = sq_token_get,
    .token_revoke = sq_token_revoke,
    .token_list = sq_token_list,
    .audit_last = sq_audit_last,
    .audit_insert = sq_audit_insert,
    .audit_list = sq_audit_list,
    .run_list = sq_run_list,
    .run_last = sq_run_last,
    .node_span_list = sq_node_span_list,
    .sample_add = sq_sample_add,
    .sample_list = sq_sample_list,
    .usage_replace = sq_usage_replace,
    .usage_list = sq_usage_list,
    .net_add = sq_net_add,
    .net_list = sq_net_list,
};
