/*
 * allot-store: the persistence layer of allotd behind one narrow interface.
 *
 * What it holds: jobs and their append-only events, the tenant tree with
 * quotas (JSON text), priority classes, nodes, API tokens (the SHA-256 of
 * the secret, never the secret), a hash-chained append-only audit log and a
 * key-value `meta` table (schema version, cluster settings). JSON columns
 * are plain strings: the store neither parses nor validates them. Every
 * string is stored byte for byte (quotes, SQL-looking text, invalid UTF-8);
 * user data only ever reaches the database through bound parameters.
 *
 * Back-ends are ops structs chosen by the URL scheme (`sqlite:PATH` today;
 * `postgres://...` later) from one registry table in store.c. Callers only
 * use the allot_store_* functions below, so a new back-end changes no
 * caller. Back-end independent logic (transaction nesting, input checks,
 * the audit hash chain, group commit) lives in store.c and store_gc.c.
 *
 * Durability: a write returns 0 only when it is durable (outside a batch),
 * or, inside a batch, when the outermost allot_store_commit() returns 0.
 * allotd acknowledges a mutating request only after that. Each typed write
 * is atomic on its own: inside a batch it runs in a savepoint, so a failed
 * write leaves the batch as it was before it.
 *
 * Memory: output structs are filled with strings allocated through
 * allot_malloc; release them with the matching *_clear / *_free function.
 * Input structs are borrowed for the duration of the call. Times are
 * seconds since the Unix epoch, passed in by the caller (the store reads no
 * clock), 0 meaning "not yet".
 *
 * Threading: one struct allot_store is used by one thread at a time (the
 * caller serialises). Several handles on the same database may live in
 * several threads or processes: readers never block the writer (WAL) and
 * writers wait up to the busy timeout for each other. To let many threads
 * submit writes that share one transaction, use the group committer
 * (allot_store_gc_*) below, which then owns its handle.
 *
 * Errors: 0 or a negative ALLOT_E* code. ALLOT_EIO covers any database
 * failure; allot_store_errmsg() has the back-end's text.
 */
#ifndef ALLOT_STORE_H
#define ALLOT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct allot_store;

/* ---- opening -------------------------------------------------------------- */

/* allot_store_opts.flags */
#define ALLOT_STORE_CREATE  0x1u /* create the database when missing */
#define ALLOT_STORE_MIGRATE 0x2u /* apply pending numbered migrations */

struct allot_store_opts {
    unsigned flags;      /* ALLOT_STORE_* */
    int busy_timeout_ms; /* wait this long for a lock held by another writer;
                            0 = 5000 */
    /* PostgreSQL (0 = none): the server ends a session of this handle idle
     * this long outside a transaction (idle_session_timeout), and one idle
     * this long inside one (idle_in_transaction_session_timeout), with its
     * locks: a process that froze holding the lead or the write lock */
    int idle_session_ms, idle_in_tx_ms;
};

/* Opens the store named by `url` ("sqlite:/var/lib/allot/allot.db").
 * opts may be NULL (no flags). Checks the schema version: a database newer
 * than this binary is refused (ALLOT_ESTATE), an older one is migrated
 * when ALLOT_STORE_MIGRATE is set and refused (ALLOT_ESTATE) otherwise; a
 * new database is created and migrated with both flags set. A file that is
 * not an allot store is refused (ALLOT_EINVAL). On success *out is a handle
 * to close with allot_store_close(); on failure *out is NULL and err holds
 * a message. Returns 0, ALLOT_EINVAL (bad URL, unknown scheme), ALLOT_ENOENT
 * (missing and no CREATE), ALLOT_ESTATE, ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_open(const char *url, const struct allot_store_opts *opts, struct allot_store **out,
                     char *err, size_t errlen);

/* Closes the handle, rolling back a batch left open. Accepts NULL. */
void allot_store_close(struct allot_store *st);

/* The schema version of the open database and the newest this binary knows. */
int allot_store_schema_version(const struct allot_store *st);
int allot_store_schema_latest(void);

/* The back-end's text for the last failure on this handle ("" if none).
 * Valid until the next call on the handle. */
const char *allot_store_errmsg(const struct allot_store *st);

/* ---- write batches --------------------------------------------------------- */

/* Begins a write batch. Batches nest: the outermost begin starts a
 * transaction (taking the write lock at once), inner ones a savepoint.
 * Returns 0, ALLOT_EIO (lock not obtained within the busy timeout, ...) or
 * ALLOT_ENOMEM. */
int allot_store_begin(struct allot_store *st);

/* Ends the innermost batch keeping its writes. At the outermost level this
 * commits; only a 0 here makes the batch's writes durable, and on failure
 * the whole transaction is rolled back. Returns 0, ALLOT_ESTATE (no batch
 * open), ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_commit(struct allot_store *st);

/* Ends the innermost batch undoing its writes. Returns 0 or ALLOT_ESTATE
 * (no batch open); a back-end failure while undoing an inner batch poisons
 * the transaction: the outermost commit then rolls back and fails. */
int allot_store_rollback(struct allot_store *st);

/* ---- leadership and fencing (docs/ha.md) ------------------------------------ */

/*
 * Several allotd may share one store; one of them leads (schedules and
 * writes), the others stand by. allot_store_lead() tries to become, or
 * checks that this handle still is, the leader:
 * - PostgreSQL: a session advisory lock on this handle's connection, held
 *   until the handle is closed or its connection is lost; a handle that
 *   lost it never leads again (*leading stays false).
 * - SQLite: an exclusive flock on PATH.lead, held while the handle is open
 *   (allotd on one machine sharing one file).
 * Returns 0 (with *leading set) or an error when the database cannot be
 * asked. Use one handle for this alone.
 */
int allot_store_lead(struct allot_store *st, bool *leading);

/*
 * Fencing: every outermost batch on st first checks that meta
 * "leader_epoch" still reads `epoch`, and fails with ALLOT_EFENCED,
 * writing nothing, once another allotd raised it by taking the lead
 * (allot_store_take_lead). 0 turns the check off (the default).
 */
void allot_store_fence(struct allot_store *st, int64_t epoch);

/* Takes the lead in the store: raises meta "leader_epoch" by one, records
 * `url` (where clients reach the new leader) in meta "leader_url", and
 * fences st with the new epoch, in one batch. Returns 0 with *epoch set, or
 * an error (nothing changed, st's fence included). */
int allot_store_take_lead(struct allot_store *st, const char *url, int64_t *epoch);

/* ---- meta ----------------------------------------------------------------- */

/* Reads meta[key] into *value (allocated; allot_free it). Returns 0,
 * ALLOT_ENOENT, ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_meta_get(struct allot_store *st, const char *key, char **value);

/* Sets meta[key] = value. Keys starting with "schema" are the store's own
 * (ALLOT_EINVAL). Returns 0 or an error. */
int allot_store_meta_set(struct allot_store *st, const char *key, const char *value);

/* ---- jobs -------------------------------------------------------------------- */

enum allot_store_job_state {
    ALLOT_SJ_PENDING = 0,
    ALLOT_SJ_STARTING,
    ALLOT_SJ_RUNNING,
    ALLOT_SJ_SUCCEEDED, /* terminal from here on */
    ALLOT_SJ_FAILED,
    ALLOT_SJ_CANCELLED,
    ALLOT_SJ_LOST,
    ALLOT_SJ_NSTATES
};

/* Text of a state ("pending", ...), NULL when out of range. */
const char *allot_store_job_state_name(int state);
/* State of a name, or ALLOT_EINVAL. */
int allot_store_job_state_parse(const char *name);
/* True for succeeded, failed, cancelled and lost. */
bool allot_store_job_state_terminal(int state);

/* A job as stored. In a submit the pointers are borrowed; filled by the
 * store they are owned by the struct (allot_store_job_clear). */
struct allot_store_job {
    int64_t id;           /* assigned by the store (> 0) */
    char *tenant;         /* tenant path, required */
    char *name;           /* required, may be "" */
    int64_t token_id;     /* the owner's token */
    char *spec;           /* JSON text, required */
    int state;            /* enum allot_store_job_state */
    char *placement;      /* JSON text or NULL */
    char *pending_reason; /* or NULL */
    int64_t submit_time, start_time, end_time;
    bool has_exit_code;
    int exit_code;
    int64_t array_parent; /* 0 = not part of an array; else the id of the array's
                             first job (ALLOT_STORE_ARRAY_NEW in a submit: this
                             job starts a new array, stored as its own id) */
    int array_index;      /* index in its array (0 when none) */
    char *idem_key;       /* idempotency key, unique per token; NULL = none */
    bool held;            /* held by a user (allot hold): it does not start until
                             released; set at submission or by allot_store_job_hold */
    int64_t *deps;        /* ids of the jobs this one waits for */
    size_t n_deps;
    char *user; /* read only: who submitted it, its token's name ("SCOPE:NAME"
                   for a token scoped to a tenant, as allotd names users);
                   NULL when that token is not stored. Ignored on submit */
};

#define ALLOT_STORE_ARRAY_NEW (-1)

/* Frees the fields of a job the store filled and zeroes it. Accepts NULL. */
void allot_store_job_clear(struct allot_store_job *j);

/* Stores a new job (its id field is ignored) with its dependencies. When
 * job->idem_key is set and this token already submitted that key, nothing
 * is written and the existing job's id is returned with *existed = true.
 * Dependencies must name existing jobs (ALLOT_ENOENT). `existed` may be
 * NULL. Returns 0, ALLOT_EINVAL, ALLOT_ENOENT, ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_job_submit(struct allot_store *st, const struct allot_store_job *job, int64_t *id,
                           bool *existed);

/* Reads job `id` with its dependencies into *out, which is overwritten
 * (clear a job filled before first). Returns 0, ALLOT_ENOENT, ALLOT_EIO or
 * ALLOT_ENOMEM (*out then holds nothing). */
int allot_store_job_get(struct allot_store *st, int64_t id, struct allot_store_job *out);

/* Writes the mutable fields of job->id: state, placement, pending reason,
 * start and end times, exit code. A job in a terminal state never changes
 * again (ALLOT_ESTATE). Returns 0, ALLOT_ENOENT, ALLOT_ESTATE, ALLOT_EINVAL,
 * ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_job_update(struct allot_store *st, const struct allot_store_job *job);

/* Holds (held true) or releases pending job `id`. A held job's update to
 * "starting" is refused (ALLOT_ESTATE), so a hold that lands while the
 * scheduler places the job wins: the job stays pending. Returns 0,
 * ALLOT_ENOENT, ALLOT_ESTATE (the job is not pending), ALLOT_EIO or
 * ALLOT_ENOMEM. */
int allot_store_job_hold(struct allot_store *st, int64_t id, bool held);

/* Replaces live (pending, starting or running) job id's spec text with
 * `spec` (a change its owner may make: its priority class while it waits,
 * its time limit). Returns 0, ALLOT_EINVAL, ALLOT_ENOENT, ALLOT_ESTATE (the
 * job ended), ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_job_set_spec(struct allot_store *st, int64_t id, const char *spec);

/* How many jobs of tenant `tenant` (that path exactly) are pending,
 * starting or running, into *n: what a per-tenant limit on live jobs
 * counts (a range of an index: its cost grows with the count; not
 * measured in bench/). Returns 0, ALLOT_EINVAL, ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_job_count_live(struct allot_store *st, const char *tenant, int64_t *n);

/* Filters of a job listing; zero-initialised means "all jobs, oldest first".
 * Cost of a page: O(page) for no filter, one state, one exact tenant, or
 * both; a mask of several states or a whole subtree costs O(matching jobs)
 * (fine for the live states); an array costs O(its members); a name prefix
 * is checked on the rows read. */
struct allot_store_job_filter {
    const char *tenant;      /* NULL = any */
    bool tenant_subtree;     /* also the tenants below `tenant` */
    unsigned states;         /* mask of 1u << state; 0 = any (ALLOT_SJ_LIVE_MASK) */
    const char *name_prefix; /* byte prefix of the name; NULL = any */
    int64_t array_parent;    /* only the members of this array; 0 = any */
    const char *user;        /* only the jobs submitted by this user (as job.user); NULL = any */
    bool newest_first;       /* descending ids */
    int64_t cursor;          /* 0 to start; else the next_cursor of the last page */
    int limit;               /* page size, 1..ALLOT_STORE_PAGE_MAX (0 = 100) */
};
#define ALLOT_SJ_LIVE_MASK                                                                         \
    ((1u << ALLOT_SJ_PENDING) | (1u << ALLOT_SJ_STARTING) | (1u << ALLOT_SJ_RUNNING))
#define ALLOT_STORE_PAGE_MAX 10000

/* A page of jobs; owned by the caller, released with allot_store_job_page_free. */
struct allot_store_job_page {
    struct allot_store_job *jobs;
    size_t n;
    int64_t next_cursor; /* pass back in filter.cursor; 0 = no more pages */
};

/* One page of the jobs matching f, by id (keyset pagination: pages stay
 * right while jobs are added). Cost grows with the page, not with the
 * number of jobs stored. Dependencies are not loaded (use job_get).
 * Returns 0, ALLOT_EINVAL, ALLOT_EIO or ALLOT_ENOMEM (*page then empty). */
int allot_store_job_list(struct allot_store *st, const struct allot_store_job_filter *f,
                         struct allot_store_job_page *page);
void allot_store_job_page_free(struct allot_store_job_page *page);
/* The member of array `parent` (its first member's id) with index `index`
 * into *out (as allot_store_job_get, without dependencies). Returns 0,
 * ALLOT_ENOENT (no such array or index), ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_job_member(struct allot_store *st, int64_t parent, int index,
                           struct allot_store_job *out);

/* ---- job events (append-only) ---------------------------------------------- */

struct allot_store_event {
    int64_t seq;    /* assigned by the store, increasing */
    int64_t job_id; /* existing job */
    int64_t time;
    char *kind;   /* "submitted", "started", ... */
    char *detail; /* free text or JSON; may be NULL */
};

/* Appends an event; *seq (may be NULL) gets its number. Returns 0,
 * ALLOT_ENOENT (no such job), ALLOT_EINVAL, ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_event_add(struct allot_store *st, const struct allot_store_event *ev, int64_t *seq);

/* Up to `limit` (1..ALLOT_STORE_PAGE_MAX) events of job_id with seq >
 * after_seq, in order, into *out (allot_store_events_free). */
int allot_store_event_list(struct allot_store *st, int64_t job_id, int64_t after_seq, int limit,
                           struct allot_store_event **out, size_t *n);
void allot_store_events_free(struct allot_store_event *ev, size_t n);

/* The latest event of `kind` of job_id (the highest time; of those, the
 * last written) into *out, which is overwritten (free it with
 * allot_store_event_clear). Returns 0,
 * ALLOT_ENOENT (none), ALLOT_EINVAL, ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_event_last(struct allot_store *st, int64_t job_id, const char *kind,
                           struct allot_store_event *out);
/* allot_store_event_last for every job that is starting or running, of its
 * current run only (time >= its start): in one query, one event per job
 * that has one, by job id, into *out (allot_store_events_free). Returns
 * 0, ALLOT_EINVAL, ALLOT_EIO or ALLOT_ENOMEM. */
int allot_store_event_last_running(struct allot_store *st, const char *kind,
                                   struct allot_store_event **out, size_t *n);
/* Frees the strings of an event filled by allot_store_event_last and
 * zeroes it. Accepts NULL. */
void allot_store_event_clear(struct allot_store_event *ev);

/* ---- tenants and priority classes -------------------------------------------- */

struct allot_store_tenant {
    char *path;      /* "org/team/project" */
    double weight;   /* > 0 */
    char *isolation; /* "shared", "exclusive-gpu" or "exclusive-node" */
    char *quotas;    /* JSON object, shape of the tenants file's `quotas` */
};

/* Creates or replaces the tenant at t->path. Returns 0 or an error. */
int allot_store_tenant_put(struct allot_store *st, const struct allot_store_tenant *t);
/* Deletes a tenant; ALLOT_ESTATE while it has children, ALLOT_ENOENT. */
int allot_store_tenant_delete(struct allot_store *st, const char *path);
/* All tenants, parents before children (sorted by path). */
int allot_store_tenant_list(struct allot_store *st, struct allot_store_tenant **out, size_t *n);
void allot_store_tenants_free(struct allot_store_tenant *t, size_t n);

struct allot_store_prio_class {
    char *name;
    int value;
    bool preemptible;
};

int allot_store_prio_put(struct allot_store *st, const struct allot_store_prio_class *c);
int allot_store_prio_delete(struct allot_store *st, const char *name);
/* All classes, highest value first. */
int allot_store_prio_list(struct allot_store *st, struct allot_store_prio_class **out, size_t *n);
void allot_store_prios_free(struct allot_store_prio_class *c, size_t n);

/* ---- nodes -------------------------------------------------------------------- */

enum allot_store_node_state {
    ALLOT_SN_READY = 0,
    ALLOT_SN_DRAINING,
    ALLOT_SN_LOST,
    ALLOT_SN_CORDONED,
    ALLOT_SN_NSTATES
};
const char *allot_store_node_state_name(int state);

struct allot_store_node {
    char *name;
    char *inventory; /* JSON text (GPUs, CPU, memory, labels) */
    int state;       /* enum allot_store_node_state */
    int64_t last_heartbeat;
    int64_t lease_expiry;
    int64_t token_id; /* the agent token the node is bound to (0: none yet) */
};

/* Creates or replaces a node (a token_id of 0 keeps the stored one). */
int allot_store_node_put(struct allot_store *st, const struct allot_store_node *n);
int allot_store_node_get(struct allot_store *st, const char *name, struct allot_store_node *out);
/* Records a heartbeat: last_heartbeat = now, lease_expiry = expiry. ALLOT_ENOENT. */
int allot_store_node_heartbeat(struct allot_store *st, const char *name, int64_t now,
                               int64_t expiry);
int allot_store_node_delete(struct allot_store *st, const char *name);
/* All nodes by name. */
int allot_store_node_list(struct allot_store *st, struct allot_store_node **out, size_t *n);
void allot_store_node_clear(struct allot_store_node *n);
void allot_store_nodes_free(struct allot_store_node *n, size_t count);

/* ---- tokens -------------------------------------------------------------------- */

enum allot_store_role {
    ALLOT_ROLE_ADMIN = 0,
    ALLOT_ROLE_TENANT_ADMIN,
    ALLOT_ROLE_MEMBER,
    ALLOT_ROLE_VIEWER,
    ALLOT_ROLE_AGENT,
    ALLOT_ROLE_NROLES
};
/* "admin", "tenant-admin", "member", "viewer", "agent"; NULL out of range. */
const char *allot_store_role_name(int role);

#define ALLOT_STORE_HASH_LEN 32

/* SHA-256 of `len` bytes (libsodium). Use it on a token's secret: only the
 * hash is ever given to the store. */
void allot_store_sha256(const void *data, size_t len, uint8_t out[ALLOT_STORE_HASH_LEN]);

struct allot_store_token {
    int64_t id; /* assigned by the store */
    char *name;
    int role;                           /* enum allot_store_role */
    char *tenant;                       /* tenant path the role applies to ("" = cluster-wide) */
    uint8_t hash[ALLOT_STORE_HASH_LEN]; /* SHA-256 of the secret */
    int64_t created;
    int64_t revoked; /* 0 = valid */
    int64_t expires; /* unix seconds it stops being valid at; 0 = never */
};

/* Stores a token; *id gets its id. Hashes are unique (ALLOT_EEXIST). */
int allot_store_token_add(struct allot_store *st, const struct allot_store_token *t, int64_t *id);
int allot_store_token_get(struct allot_store *st, int64_t id, struct allot_store_token *out);
/* The token whose secret hashes to `hash`, revoked or not. ALLOT_ENOENT. */
int allot_store_token_find(struct allot_store *st, const uint8_t hash[ALLOT_STORE_HASH_LEN],
                           struct allot_store_token *out);
/* Marks a token revoked at `when`; ALLOT_ESTATE when already revoked. */
int allot_store_token_revoke(struct allot_store *st, int64_t id, int64_t when);
/* All tokens by id. */
int allot_store_token_list(struct allot_store *st, struct allot_store_token **out, size_t *n);
void allot_store_token_clear(struct allot_store_token *t);
void allot_store_tokens_free(struct allot_store_token *t, size_t n);

/* ---- audit log (append-only, hash-chained) ------------------------------------ */

/* One entry. Its hash is SHA-256 over a fixed binary encoding of (previous
 * entry's hash, seq, time, token_id, action, target, result); the first
 * entry's previous hash is 32 zero bytes (docs/store.md). */
struct allot_store_audit {
    int64_t seq; /* assigned by the store: 1, 2, 3, ... without gaps */
    int64_t time;
    int64_t token_id; /* 0 = the daemon itself */
    char *action;     /* "job.submit", "tenant.put", ... */
    char *target;     /* "job/42", "tenant/research/nlp", ... */
    char *result;     /* "ok" or an error text */
    uint8_t prev_hash[ALLOT_STORE_HASH_LEN];
    uint8_t hash[ALLOT_STORE_HASH_LEN];
};

/* Appends an entry (seq and hashes are computed, the caller's ignored);
 * *seq (may be NULL) gets its number. Append it in the batch of the
 * mutation it records, so that both commit or neither. */
int allot_store_audit_append(struct allot_store *st, const struct allot_store_audit *e,
                             int64_t *seq);
/* Up to `limit` entries with seq > after_seq, in order. */
int allot_store_audit_list(struct allot_store *st, int64_t after_seq, int limit,
                           struct allot_store_audit **out, size_t *n);
void allot_store_audits_free(struct allot_store_audit *a, size_t n);

/* Walks the whole log in pages (constant memory) and checks that seqs run
 * 1..N without gaps, that each entry's prev_hash is the previous entry's
 * hash and that each hash matches its content. Returns 0 when intact,
 * ALLOT_ESTATE at the first broken entry (*bad_seq, may be NULL, gets its
 * seq and `why` says what is wrong), or ALLOT_EIO / ALLOT_ENOMEM. An entry
 * edited, inserted or deleted anywhere but at the very end is found; cutting
 * entries off the end is found by comparing with a head recorded elsewhere
 * (allot_store_audit_head). */
int allot_store_audit_verify(struct allot_store *st, int64_t *bad_seq, char *why, size_t whylen);

/* The last entry's seq (0 when empty) and hash (zeros when empty). */
int allot_store_audit_head(struct allot_store *st, int64_t *seq,
                           uint8_t hash[ALLOT_STORE_HASH_LEN]);

/* ---- group commit --------------------------------------------------------------- */

/*
 * Group commit: many threads hand writes to one committer thread that runs
 * them in one transaction and wakes every submitter once that transaction
 * has committed, so N concurrent submissions cost one fsync.
 *
 * Threading contract: allot_store_gc_new() takes over the handle: from then
 * until allot_store_gc_free() only the committer thread uses it (callers
 * read through a handle of their own). allot_store_gc_submit() may be called
 * from any number of threads at once; each call blocks until its write is
 * durable or has failed. A write function runs on the committer thread
 * inside its own savepoint: it may call any allot_store_* write on the
 * handle it is given (and nest batches, closing each), must never block on
 * other submitters, and its failure undoes only its own writes. A batch
 * closes when it holds max_batch writes or max_wait_us after the committer
 * picked up its first write (so a lone write waits at most that long); the
 * next batch gathers while the previous one commits.
 */
struct allot_store_gc;

/* A write run by the committer: returns 0 or an ALLOT_E* code. `arg` is the
 * submitter's, borrowed. */
typedef int (*allot_store_write_fn)(struct allot_store *st, void *arg);

/* Starts a committer over `st` (borrowed; must outlive the committer).
 * max_batch >= 1 (0 = 64), max_wait_us >= 0 (the wait for more writes
 * before closing a batch that is not full). Returns NULL on failure. */
struct allot_store_gc *allot_store_gc_new(struct allot_store *st, int max_batch, int max_wait_us);

/* Runs fn(st, arg) in the next group transaction and waits until it is
 * committed. Returns fn's error (its writes undone), the commit's error
 * (the whole group lost), ALLOT_ESTATE after allot_store_gc_free began,
 * or 0: the write is durable. */
int allot_store_gc_submit(struct allot_store_gc *gc, allot_store_write_fn fn, void *arg);

/* Number of transactions committed so far (for tests and metrics). */
uint64_t allot_store_gc_commits(struct allot_store_gc *gc);

/* The back-end's words for the last batch the store itself failed (an I/O
 * error, a full disk: ALLOT_EIO or ALLOT_ENOMEM) into buf (len bytes); ""
 * once a later write worked. */
void allot_store_gc_last_error(struct allot_store_gc *gc, char *buf, size_t len);

/* Commits what is queued, stops the committer and frees it. Accepts NULL.
 * No submit may be in progress or start afterwards. */
void allot_store_gc_free(struct allot_store_gc *gc);

/* ---- metering ----------------------------------------------------------------------- */
/*
 * The store keeps the raw facts metering needs, written by the store itself
 * so that no caller can forget them:
 *   runs:       one row per time a job held resources: opened when a job
 *               enters starting/running (at its start_time, with its
 *               placement), closed when it leaves them (at its end_time, or
 *               the store's clock when that is not set);
 *   node spans: one row per time a node was registered and not lost (its
 *               inventory), the cluster's capacity over time.
 * Agents' usage samples are added idempotently (one per job, task and
 * sample time), and the metering pass keeps hourly roll-ups.
 */
struct allot_store_run {
    int64_t id;
    int64_t job_id;
    char *tenant;
    char *user;      /* the owner token's name ("" if it is gone) */
    char *placement; /* JSON text, as stored when the run began */
    int64_t start;   /* unix seconds */
    int64_t end;     /* unix seconds; 0 while the run goes on */
};
/* The runs overlapping [from, to), in id order. */
int allot_store_run_list(struct allot_store *st, int64_t from, int64_t to,
                         struct allot_store_run **out, size_t *n);
void allot_store_runs_free(struct allot_store_run *r, size_t n);
/* The latest run of job `job_id` (the one begun last, open or closed) into
 * *out (OUT: its strings are owned by it, released with
 * allot_store_run_clear). Returns 0, ALLOT_ENOENT when the job never ran
 * (or does not exist), or an error; *out is cleared unless 0. */
int allot_store_run_last(struct allot_store *st, int64_t job_id, struct allot_store_run *out);
/* ... the latest run of the job begun at or before time t (unix seconds):
 * the run a sample taken at t belongs to, if any is open then. */
int allot_store_run_at(struct allot_store *st, int64_t job_id, int64_t t,
                       struct allot_store_run *out);
/* Frees the strings of one run and zeroes it. Accepts a zeroed run. */
void allot_store_run_clear(struct allot_store_run *r);

struct allot_store_node_span {
    char *node;
    char *inventory;    /* JSON text */
    int64_t start, end; /* unix seconds; end 0 = still registered */
};
/* The node spans overlapping [from, to). */
int allot_store_node_span_list(struct allot_store *st, int64_t from, int64_t to,
                               struct allot_store_node_span **out, size_t *n);
void allot_store_node_spans_free(struct allot_store_node_span *s, size_t n);

/* One usage sample of a task, as its agent measured it (-1: not measured). */
struct allot_store_sample {
    int64_t job_id;
    int task;
    int64_t at;            /* agent's clock, unix milliseconds */
    int64_t cpu_ns;        /* CPU time used so far by the task (cumulative) */
    int64_t mem_bytes;     /* memory in use */
    int64_t gpu_util;      /* utilisation of its GPUs, percent */
    int64_t gpu_mem_bytes; /* GPU memory in use */
    int64_t energy_mj;     /* its GPUs' energy counter (cumulative), millijoules */
    int64_t interval_ms;   /* the agent's sample interval (0: not said) */
};
/* Adds a sample; one already stored (same job, task and time) is left as it
 * is and *added is false. `added` may be NULL. */
int allot_store_sample_add(struct allot_store *st, const struct allot_store_sample *s, bool *added);
/* The samples with at in [from_ms, to_ms), by job, task and time. */
int allot_store_sample_list(struct allot_store *st, int64_t from_ms, int64_t to_ms,
                            struct allot_store_sample **out, size_t *n);

/* An hourly roll-up row: what one tenant's user held and used of one kind
 * of resource in one hour. */
struct allot_store_usage {
    int64_t hour; /* unix seconds, a multiple of 3600 */
    char *tenant, *user;
    char *model;          /* GPU model, "" for CPU-only work */
    char *item;           /* "gpu" (whole GPUs), "mig:PROFILE", "fraction", "cpu" */
    bool borrowed;        /* held above the tenant's nominal quota */
    int64_t gpu_ppm_s;    /* GPU-seconds x 1e6 (a 1g MIG slice of 7 is 142857 per s) */
    int64_t cpu_milli_s;  /* allocated milli-cores x seconds */
    int64_t mem_mib_s;    /* allocated MiB x seconds */
    int64_t util_pct_ms;  /* measured utilisation x milliseconds sampled */
    int64_t util_ms;      /* milliseconds covered by utilisation samples */
    int64_t gpu_mem_peak; /* bytes, -1 unmeasured */
    int64_t energy_mj;    /* measured, -1 unmeasured */
    int64_t cpu_used_ms;  /* measured CPU time */
    /* gpu_ppm_s as `bill: measured` bills it (docs/billing.md): each job
     * task's GPU time scaled by its own utilisation of the hour relative to
     * its share, allocated where it had none; -1 in rows rolled up before
     * the store kept it (schema version 10), which are billed by the row's
     * mean utilisation */
    int64_t gpu_bill_ppm_s;
};
/* Replaces every roll-up row with hour in [from, to) by rows[0..n).
 * ALLOT_EINVAL (nothing written) for a row with a missing name, an hour
 * outside the range or not whole, or a gpu_bill_ppm_s outside -1 ..
 * gpu_ppm_s. */
int allot_store_usage_replace(struct allot_store *st, int64_t from, int64_t to,
                              const struct allot_store_usage *rows, size_t n);
/* The roll-up rows with hour in [from, to), by hour. */
int allot_store_usage_list(struct allot_store *st, int64_t from, int64_t to,
                           struct allot_store_usage **out, size_t *n);
void allot_store_usages_free(struct allot_store_usage *u, size_t n);

/* ---- tenant networks ------------------------------------------------------------- */

/* A tenant's network: its subnet and VXLAN id, allotted once and kept. */
struct allot_store_net {
    char *tenant;
    int64_t vni;
    char *subnet; /* "198.18.16.0/24" */
};
/* Records a tenant's network, replacing the one it had (cut anew for
 * another net-prefix); ALLOT_EEXIST when the vni or subnet is another
 * tenant's. */
int allot_store_net_add(struct allot_store *st, const struct allot_store_net *n);
/* Every tenant network, by vni. */
int allot_store_net_list(struct allot_store *st, struct allot_store_net **out, size_t *n);
void allot_store_nets_free(struct allot_store_net *v, size_t n);

/* ---- back-ends -------------------------------------------------------------------- */

/*
 * A back-end. store.c picks one by URL scheme from its registry table and
 * does the argument checks, transaction nesting and audit hashing itself, so
 * each op only talks to its database. All ops return 0 or ALLOT_E* codes
 * and leave their text in the handle (store_set_err, src/store/store_impl.h).
 * Writes run inside a transaction store.c has opened.
 */
struct allot_store_ops {
    const char *scheme; /* "sqlite" for "sqlite:PATH" */
    /* Opens `rest` (the URL after "scheme:"); creates, checks and migrates
     * the schema per opts; fills *out (embedding struct allot_store). */
    int (*open)(const char *rest, const struct allot_store_opts *opts, struct allot_store **out,
                char *err, size_t errlen);
    void (*close)(struct allot_store *st);
    /* transactions: depth 0 = the outermost */
    int (*begin)(struct allot_store *st, int depth);
    int (*commit)(struct allot_store *st, int depth);
    int (*rollback)(struct allot_store *st, int depth);

    int (*meta_get)(struct allot_store *st, const char *key, char **value);
    int (*meta_set)(struct allot_store *st, const char *key, const char *value);
    /* allot_store_lead(); NULL: always the leader */
    int (*lead)(struct allot_store *st, bool *leading);

    int (*job_insert)(struct allot_store *st, const struct allot_store_job *j, int64_t *id,
                      bool *existed);
    int (*job_get)(struct allot_store *st, int64_t id, struct allot_store_job *out);
    int (*job_update)(struct allot_store *st, const struct allot_store_job *j);
    int (*job_hold)(struct allot_store *st, int64_t id, bool held);
    int (*job_set_spec)(struct allot_store *st, int64_t id, const char *spec);
    int (*job_count_live)(struct allot_store *st, const char *tenant, int64_t *n);
    int (*job_list)(struct allot_store *st, const struct allot_store_job_filter *f,
                    struct allot_store_job_page *page);
    int (*event_add)(struct allot_store *st, const struct allot_store_event *ev, int64_t *seq);
    int (*event_last)(struct allot_store *st, int64_t job_id, const char *kind,
                      struct allot_store_event *out);
    int (*event_last_running)(struct allot_store *st, const char *kind,
                              struct allot_store_event **out, size_t *n);
    int (*event_list)(struct allot_store *st, int64_t job_id, int64_t after, int limit,
                      struct allot_store_event **out, size_t *n);

    int (*tenant_put)(struct allot_store *st, const struct allot_store_tenant *t);
    int (*tenant_delete)(struct allot_store *st, const char *path);
    int (*tenant_list)(struct allot_store *st, struct allot_store_tenant **out, size_t *n);
    int (*prio_put)(struct allot_store *st, const struct allot_store_prio_class *c);
    int (*prio_delete)(struct allot_store *st, const char *name);
    int (*prio_list)(struct allot_store *st, struct allot_store_prio_class **out, size_t *n);

    int (*node_put)(struct allot_store *st, const struct allot_store_node *n);
    int (*node_get)(struct allot_store *st, const char *name, struct allot_store_node *out);
    int (*node_heartbeat)(struct allot_store *st, const char *name, int64_t now, int64_t expiry);
    int (*node_delete)(struct allot_store *st, const char *name);
    int (*node_list)(struct allot_store *st, struct allot_store_node **out, size_t *n);

    int (*token_add)(struct allot_store *st, const struct allot_store_token *t, int64_t *id);
    /* by id when hash is NULL, else by hash */
    int (*token_get)(struct allot_store *st, int64_t id, const uint8_t *hash,
                     struct allot_store_token *out);
    int (*token_revoke)(struct allot_store *st, int64_t id, int64_t when);
    int (*token_list)(struct allot_store *st, struct allot_store_token **out, size_t *n);

    /* the last entry (seq 0 and zero hash when empty) */
    int (*audit_last)(struct allot_store *st, int64_t *seq, uint8_t hash[ALLOT_STORE_HASH_LEN]);
    /* stores an entry exactly as given (seq and hashes computed by store.c) */
    int (*audit_insert)(struct allot_store *st, const struct allot_store_audit *e);
    int (*audit_list)(struct allot_store *st, int64_t after, int limit,
                      struct allot_store_audit **out, size_t *n);

    int (*run_list)(struct allot_store *st, int64_t from, int64_t to, struct allot_store_run **out,
                    size_t *n);
    /* the latest run begun at or before `before`; ALLOT_ENOENT when none */
    int (*run_last)(struct allot_store *st, int64_t job_id, int64_t before,
                    struct allot_store_run *out);
    int (*node_span_list)(struct allot_store *st, int64_t from, int64_t to,
                          struct allot_store_node_span **out, size_t *n);
    int (*sample_add)(struct allot_store *st, const struct allot_store_sample *s, bool *added);
    int (*sample_list)(struct allot_store *st, int64_t from, int64_t to,
                       struct allot_store_sample **out, size_t *n);
    int (*usage_replace)(struct allot_store *st, int64_t from, int64_t to,
                         const struct allot_store_usage *rows, size_t n);
    int (*usage_list)(struct allot_store *st, int64_t from, int64_t to,
                      struct allot_store_usage **out, size_t *n);
    int (*net_add)(struct allot_store *st, const struct allot_store_net *n);
    int (*net_list)(struct allot_store *st, struct allot_store_net **out, size_t *n);
};

#endif
