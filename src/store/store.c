/*
 * allot-store front end: picks the back-end by URL scheme, checks arguments,
 * nests write batches (transaction, then savepoints), makes every typed
 * write atomic on its own, and owns the back-end independent logic of the
 * audit log's hash chain. Callers: allotd and the tools around it; the
 * back-ends only talk to their database (struct allot_store_ops).
 *
 * Invariant: st->depth is the number of batches open on the handle; every
 * typed write opens one more (a savepoint inside a batch, a transaction
 * outside) and closes it before returning, so a failed write never leaves a
 * half-done change behind. Not thread-safe: one thread per handle.
 */
#include "store_impl.h"

#include "allot/common.h"

#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The registry: one entry per back-end, chosen by URL scheme. */
static const struct {
    const char *scheme;
    const struct allot_store_ops *ops;
} store_backends[] = {
    {"sqlite", &allot_store_sqlite_ops},
    {"postgres", &allot_store_pg_ops},
    {"postgresql", &allot_store_pg_ops}, /* libpq's own spelling */
};

static const char *const job_state_names[ALLOT_SJ_NSTATES] = {
    "pending", "starting", "running", "succeeded", "failed", "cancelled", "lost",
};
static const char *const node_state_names[ALLOT_SN_NSTATES] = {
    "ready",
    "draining",
    "lost",
    "cordoned",
};
static const char *const role_names[ALLOT_ROLE_NROLES] = {
    "admin", "tenant-admin", "member", "viewer", "agent",
};

void store_set_err(struct allot_store *st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
}

char *store_dupn(const char *s, size_t n)
{
    char *d = allot_malloc(n + 1);

    if (!d)
        return NULL;
    if (n)
        memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* ---- names ---------------------------------------------------------------- */

const char *allot_store_job_state_name(int state)
{
    return state >= 0 && state < ALLOT_SJ_NSTATES ? job_state_names[state] : NULL;
}

int allot_store_job_state_parse(const char *name)
{
    for (int i = 0; name && i < ALLOT_SJ_NSTATES; i++)
        if (strcmp(name, job_state_names[i]) == 0)
            return i;
    return ALLOT_EINVAL;
}

bool allot_store_job_state_terminal(int state)
{
    return state >= ALLOT_SJ_SUCCEEDED && state < ALLOT_SJ_NSTATES;
}

const char *allot_store_node_state_name(int state)
{
    return state >= 0 && state < ALLOT_SN_NSTATES ? node_state_names[state] : NULL;
}

const char *allot_store_role_name(int role)
{
    return role >= 0 && role < ALLOT_ROLE_NROLES ? role_names[role] : NULL;
}

void allot_store_sha256(const void *data, size_t len, uint8_t out[ALLOT_STORE_HASH_LEN])
{
    crypto_hash_sha256(out, data, len);
}

/* ---- open and close ------------------------------------------------------ */

int allot_store_schema_latest(void)
{
    return store_sqlite_latest();
}

int allot_store_open(const char *url, const struct allot_store_opts *opts, struct allot_store **out,
                     char *err, size_t errlen)
{
    static const struct allot_store_opts no_opts = {0};
    const char *colon;
    size_t n;

    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!url || !(colon = strchr(url, ':')) || colon == url) {
        allot_fmt(err, errlen, "store URL '%s' has no scheme (sqlite:PATH)", url ? url : "");
        return ALLOT_EINVAL;
    }
    if (sodium_init() < 0) {
        allot_fmt(err, errlen, "libsodium failed to initialise");
        return ALLOT_EINTERNAL;
    }
    n = (size_t)(colon - url);
    for (size_t i = 0; i < sizeof store_backends / sizeof store_backends[0]; i++) {
        const char *scheme = store_backends[i].scheme;

        if (strlen(scheme) == n && memcmp(scheme, url, n) == 0)
            return store_backends[i].ops->open(colon + 1, opts ? opts : &no_opts, out, err, errlen);
    }
    allot_fmt(err, errlen, "no store back-end for scheme '%.*s' in this build", (int)n, url);
    return ALLOT_EINVAL;
}

void allot_store_close(struct allot_store *st)
{
    if (!st)
        return;
    if (st->depth > 0)
        st->ops->rollback(st, 0);
    st->ops->close(st);
}

int allot_store_schema_version(const struct allot_store *st)
{
    return st->schema_version;
}

const char *allot_store_errmsg(const struct allot_store *st)
{
    return st->err;
}

int store_take_first(void *arr, size_t n, size_t size, void (*clear)(void *), void *out)
{
    unsigned char *a = arr;

    if (n > 0)
        memcpy(out, a, size);
    for (size_t i = 1; i < n; i++)
        clear(a + i * size);
    allot_free(arr);
    return n > 0 ? 0 : ALLOT_ENOENT;
}

/* ---- job listing shapes (both back-ends) -------------------------------------- */

int store_list_shape(const struct allot_store_job_filter *f)
{
    int nstates = __builtin_popcount(f->states);
    int sm = nstates == 0 ? 0 : nstates == 1 ? 1 : 2;
    int tm = !f->tenant ? 0 : f->tenant_subtree ? 2 : 1;
    int k = ((tm * 3 + sm) << 4) | (f->user ? 8 : 0) | (f->array_parent ? 4 : 0) |
            (f->name_prefix ? 2 : 0) | (f->newest_first ? 1 : 0);

    ALLOT_ALWAYS(k < STORE_LIST_SHAPES); /* 16 x 9 by construction */
    return k;
}

void store_list_sql(int k, char mark, const char *prefix_clause, char *buf, size_t len)
{
    static const char *const tenant[] = {
        "",
        " AND tenant = ?2",
        " AND (tenant = ?2 OR (tenant >= ?2 || '/' AND tenant < ?2 || '0'))",
    };
    static const char *const states[] = {
        "",
        " AND state = ?3",
        " AND state IN (?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    };
    int desc = k & 1, prefix = (k >> 1) & 1, array = (k >> 2) & 1, user = (k >> 3) & 1,
        sm = (k >> 4) % 3, tm = (k >> 4) / 3;

    /* "array_parent != 0" lets the partial index jobs_by_array serve it */
    allot_fmt(buf, len,
              "SELECT " STORE_JOB_COLS " FROM jobs WHERE id %s ?1%s%s%s%s%s%s ORDER BY id %s"
              " LIMIT ?11",
              desc ? "<" : ">", tenant[tm], states[sm],
              array ? " AND array_parent != 0 AND array_parent = ?12" : "",
              /* the tokens of that name first: jobs(token_id, ...) serves the rest */
              user ? " AND token_id IN (SELECT t.id FROM tokens t WHERE " STORE_USER_NAME " = ?13)"
                   : "",
              prefix ? " AND " : "", prefix ? prefix_clause : "", desc ? "DESC" : "ASC");
    for (char *c = buf; *c; c++) /* no fragment holds a '?' in a string */
        if (*c == '?')
            *c = mark;
}

/* ---- the schema version (both back-ends) -------------------------------------- */

int store_read_version(struct allot_store *st, int *version, char *err, size_t errlen)
{
    char *v = NULL, *end;
    long long n;
    int rc = st->ops->meta_get(st, "schema_version", &v);

    if (rc == 0 && !v)
        rc = ALLOT_ENOENT; /* cannot happen: the column is NOT NULL */
    if (rc != 0) {
        allot_fmt(err, errlen, "no schema version in the store: %s", st->err);
        return rc == ALLOT_ENOENT ? ALLOT_EINVAL : rc;
    }
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < 1 || n > 1000000) {
        allot_fmt(err, errlen, "bad schema version '%s' in the store", v);
        allot_free(v);
        return ALLOT_EINVAL;
    }
    allot_free(v);
    *version = (int)n;
    return 0;
}

int store_version_allowed(int version, int latest, const struct allot_store_opts *opts, char *err,
                          size_t errlen)
{
    if (version > latest) {
        allot_fmt(err, errlen,
                  "the store has schema version %d, newer than this allotd knows (%d): "
                  "run a newer allotd",
                  version, latest);
        return ALLOT_ESTATE;
    }
    if (version < latest && !(opts->flags & ALLOT_STORE_MIGRATE)) {
        allot_fmt(err, errlen,
                  "the store has schema version %d, this allotd needs %d: open with "
                  "migration enabled",
                  version, latest);
        return ALLOT_ESTATE;
    }
    return 0;
}

/* ---- batches ---------------------------------------------------------------- */

/* Inside a new outermost batch: 0 when st is not fenced or its epoch is
 * still the store's, else ALLOT_ESTATE (or the read's error). */
static int fence_check(struct allot_store *st)
{
    char *v = NULL, *end;
    long long epoch;
    int rc;

    if (st->fence == 0)
        return 0;
    rc = st->ops->meta_get(st, "leader_epoch", &v);
    if (rc != 0 && rc != ALLOT_ENOENT)
        return rc;
    epoch = v ? strtoll(v, &end, 10) : 0;
    allot_free(v);
    if (epoch == st->fence)
        return 0;
    store_set_err(st, "fenced: another allotd took the lead (epoch %lld, this one led in %lld)",
                  epoch, (long long)st->fence);
    return ALLOT_EFENCED;
}

int allot_store_begin(struct allot_store *st)
{
    int rc;

    if (st->depth == 0)
        st->poisoned = false;
    rc = st->ops->begin(st, st->depth);
    if (rc == 0 && st->depth == 0 && (rc = fence_check(st)) != 0) {
        char why[STORE_ERR_MAX];

        allot_strlcpy(why, st->err, sizeof why);
        st->ops->rollback(st, 0);
        store_set_err(st, "%s", why);
        return rc;
    }
    if (rc == 0)
        st->depth++;
    return rc;
}

/* ---- leadership ----------------------------------------------------------------- */

int allot_store_lead(struct allot_store *st, bool *leading)
{
    *leading = true;
    return st->ops->lead ? st->ops->lead(st, leading) : 0;
}

void allot_store_fence(struct allot_store *st, int64_t epoch)
{
    st->fence = epoch;
}

int allot_store_take_lead(struct allot_store *st, const char *url, int64_t *epoch)
{
    char *v = NULL, num[24];
    long long e = 0;
    int64_t was = st->fence;
    int rc;

    *epoch = 0;
    if (!url) {
        store_set_err(st, "take_lead: no URL");
        return ALLOT_EINVAL;
    }
    st->fence = 0; /* this batch is the one that moves the epoch */
    if ((rc = allot_store_begin(st)) != 0) {
        st->fence = was;
        return rc;
    }
    rc = st->ops->meta_get(st, "leader_epoch", &v);
    if (rc == ALLOT_ENOENT)
        rc = 0;
    if (rc == 0 && v) {
        char *end;

        e = strtoll(v, &end, 10);
        if (*end || e < 0) {
            store_set_err(st, "bad leader_epoch '%s' in the store", v);
            rc = ALLOT_EINVAL;
        }
    }
    allot_free(v);
    allot_fmt(num, sizeof num, "%lld", e + 1);
    if (rc == 0)
        rc = st->ops->meta_set(st, "leader_epoch", num);
    if (rc == 0)
        rc = st->ops->meta_set(st, "leader_url", url);
    if (rc != 0) {
        allot_store_rollback(st);
        st->fence = was;
        return rc;
    }
    if ((rc = allot_store_commit(st)) != 0) {
        st->fence = was;
        return rc;
    }
    st->fence = *epoch = e + 1;
    return 0;
}

int allot_store_commit(struct allot_store *st)
{
    int rc;

    if (st->depth == 0)
        return ALLOT_ESTATE;
    st->depth--;
    if (st->depth > 0) {
        rc = st->ops->commit(st, st->depth);
        if (rc != 0) {
            /* keep the outer transaction honest: it cannot commit now */
            st->ops->rollback(st, st->depth);
            st->poisoned = true;
        }
        return rc;
    }
    if (st->poisoned) {
        st->ops->rollback(st, 0);
        st->poisoned = false;
        store_set_err(st, "batch rolled back: an inner rollback had failed");
        return ALLOT_EIO;
    }
    rc = st->ops->commit(st, 0);
    if (rc != 0)
        st->ops->rollback(st, 0);
    return rc;
}

int allot_store_rollback(struct allot_store *st)
{
    if (st->depth == 0)
        return ALLOT_ESTATE;
    st->depth--;
    if (st->ops->rollback(st, st->depth) != 0 && st->depth > 0)
        st->poisoned = true;
    if (st->depth == 0)
        st->poisoned = false;
    return 0;
}

/* Opens the batch one typed write runs in. */
static int write_begin(struct allot_store *st)
{
    return allot_store_begin(st);
}

/* Closes it: keeps the write when rc is 0, undoes it otherwise. Returns the
 * write's error, or the commit's. */
static int write_end(struct allot_store *st, int rc)
{
    if (rc == 0)
        return allot_store_commit(st);
    allot_store_rollback(st);
    return rc;
}

/* ---- meta ------------------------------------------------------------------ */

int allot_store_meta_get(struct allot_store *st, const char *key, char **value)
{
    *value = NULL;
    if (!key)
        return ALLOT_EINVAL;
    return st->ops->meta_get(st, key, value);
}

int allot_store_meta_set(struct allot_store *st, const char *key, const char *value)
{
    int rc;

    if (!key || !value || strncmp(key, "schema", 6) == 0) {
        store_set_err(st, "meta key '%s' is not settable", key ? key : "(null)");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->meta_set(st, key, value));
}

/* ---- jobs --------------------------------------------------------------------- */

void allot_store_job_clear(struct allot_store_job *j)
{
    if (!j)
        return;
    allot_free(j->tenant);
    allot_free(j->name);
    allot_free(j->spec);
    allot_free(j->placement);
    allot_free(j->pending_reason);
    allot_free(j->idem_key);
    allot_free(j->deps);
    allot_free(j->user);
    memset(j, 0, sizeof *j);
}

static int job_check(struct allot_store *st, const struct allot_store_job *j, bool full)
{
    if (!allot_store_job_state_name(j->state)) {
        store_set_err(st, "job state %d out of range", j->state);
        return ALLOT_EINVAL;
    }
    if (!full)
        return 0;
    if (!j->tenant || !j->name || !j->spec) {
        store_set_err(st, "a job needs a tenant, a name and a spec");
        return ALLOT_EINVAL;
    }
    if ((j->n_deps && !j->deps) || j->array_parent < ALLOT_STORE_ARRAY_NEW || j->array_index < 0) {
        store_set_err(st, "bad dependencies or array position");
        return ALLOT_EINVAL;
    }
    return 0;
}

int allot_store_job_submit(struct allot_store *st, const struct allot_store_job *job, int64_t *id,
                           bool *existed)
{
    bool ex = false;
    int rc;

    *id = 0;
    if (existed)
        *existed = false;
    if ((rc = job_check(st, job, true)) != 0)
        return rc;
    if ((rc = write_begin(st)) != 0)
        return rc;
    rc = write_end(st, st->ops->job_insert(st, job, id, &ex));
    if (rc != 0)
        *id = 0;
    else if (existed)
        *existed = ex;
    return rc;
}

int allot_store_job_get(struct allot_store *st, int64_t id, struct allot_store_job *out)
{
    int rc;

    memset(out, 0, sizeof *out);
    rc = st->ops->job_get(st, id, out);
    if (rc != 0)
        allot_store_job_clear(out);
    return rc;
}

int allot_store_job_update(struct allot_store *st, const struct allot_store_job *job)
{
    int rc;

    if ((rc = job_check(st, job, false)) != 0)
        return rc;
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->job_update(st, job));
}

int allot_store_job_hold(struct allot_store *st, int64_t id, bool held)
{
    int rc;

    if (id <= 0)
        return store_set_err(st, "job id must be positive"), ALLOT_EINVAL;
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->job_hold(st, id, held));
}

int allot_store_job_set_spec(struct allot_store *st, int64_t id, const char *spec)
{
    int rc;

    if (id <= 0 || !spec || !*spec)
        return store_set_err(st, "job id must be positive, spec not empty"), ALLOT_EINVAL;
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->job_set_spec(st, id, spec));
}

int allot_store_job_count_live(struct allot_store *st, const char *tenant, int64_t *n)
{
    *n = 0;
    if (!tenant || !*tenant)
        return store_set_err(st, "tenant path must not be empty"), ALLOT_EINVAL;
    return st->ops->job_count_live(st, tenant, n);
}

int allot_store_job_member(struct allot_store *st, int64_t parent, int index,
                           struct allot_store_job *out)
{
    struct allot_store_job_filter f = {.array_parent = parent, .limit = 1000};
    struct allot_store_job_page pg = {0};
    int rc;

    memset(out, 0, sizeof *out);
    if (parent <= 0 || index < 0)
        return ALLOT_ENOENT;
    do { /* an array holds 10,000 members at most: ten pages */
        rc = allot_store_job_list(st, &f, &pg);
        for (size_t i = 0; rc == 0 && i < pg.n; i++)
            if (pg.jobs[i].array_index == index) {
                *out = pg.jobs[i];
                memset(&pg.jobs[i], 0, sizeof pg.jobs[i]); /* moved to *out */
                f.cursor = 0;
                allot_store_job_page_free(&pg);
                return 0;
            }
        f.cursor = pg.next_cursor;
        allot_store_job_page_free(&pg);
    } while (rc == 0 && f.cursor);
    return rc ? rc : ALLOT_ENOENT;
}

int allot_store_job_list(struct allot_store *st, const struct allot_store_job_filter *f,
                         struct allot_store_job_page *page)
{
    struct allot_store_job_filter g = *f;
    int rc;

    memset(page, 0, sizeof *page);
    if (g.limit == 0)
        g.limit = 100;
    if (g.name_prefix && !*g.name_prefix)
        g.name_prefix = NULL; /* every name starts with "" */
    if (g.tenant && !*g.tenant && g.tenant_subtree) {
        g.tenant = NULL; /* the root's subtree: every tenant */
        g.tenant_subtree = false;
    }
    if (g.limit < 0 || g.limit > ALLOT_STORE_PAGE_MAX || g.cursor < 0 ||
        g.states >= (1u << ALLOT_SJ_NSTATES) || (g.tenant_subtree && !g.tenant) ||
        g.array_parent < 0) {
        store_set_err(st, "bad job filter");
        return ALLOT_EINVAL;
    }
    rc = st->ops->job_list(st, &g, page);
    if (rc != 0)
        allot_store_job_page_free(page);
    return rc;
}

void allot_store_job_page_free(struct allot_store_job_page *page)
{
    if (!page)
        return;
    for (size_t i = 0; i < page->n; i++)
        allot_store_job_clear(&page->jobs[i]);
    allot_free(page->jobs);
    memset(page, 0, sizeof *page);
}

/* ---- events ----------------------------------------------------------------------- */

int allot_store_event_add(struct allot_store *st, const struct allot_store_event *ev, int64_t *seq)
{
    int64_t s = 0;
    int rc;

    if (seq)
        *seq = 0;
    if (!ev->kind) {
        store_set_err(st, "an event needs a kind");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    rc = write_end(st, st->ops->event_add(st, ev, &s));
    if (rc == 0 && seq)
        *seq = s;
    return rc;
}

static int limit_check(struct allot_store *st, int limit)
{
    if (limit < 1 || limit > ALLOT_STORE_PAGE_MAX) {
        store_set_err(st, "page size %d not in [1, %d]", limit, ALLOT_STORE_PAGE_MAX);
        return ALLOT_EINVAL;
    }
    return 0;
}

int allot_store_event_list(struct allot_store *st, int64_t job_id, int64_t after_seq, int limit,
                           struct allot_store_event **out, size_t *n)
{
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = limit_check(st, limit)) != 0)
        return rc;
    return st->ops->event_list(st, job_id, after_seq, limit, out, n);
}

int allot_store_event_last(struct allot_store *st, int64_t job_id, const char *kind,
                           struct allot_store_event *out)
{
    int rc;

    memset(out, 0, sizeof *out);
    if (job_id <= 0 || !kind)
        return ALLOT_EINVAL;
    rc = st->ops->event_last(st, job_id, kind, out);
    if (rc != 0)
        allot_store_event_clear(out);
    return rc;
}

int allot_store_event_last_running(struct allot_store *st, const char *kind,
                                   struct allot_store_event **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!kind)
        return ALLOT_EINVAL;
    return st->ops->event_last_running(st, kind, out, n);
}

void allot_store_event_clear(struct allot_store_event *ev)
{
    if (!ev)
        return;
    store_clear_event(ev);
    memset(ev, 0, sizeof *ev);
}

void store_clear_event(void *elem)
{
    struct allot_store_event *e = elem;

    allot_free(e->kind);
    allot_free(e->detail);
}

void allot_store_events_free(struct allot_store_event *ev, size_t n)
{
    for (size_t i = 0; ev && i < n; i++)
        store_clear_event(&ev[i]);
    allot_free(ev);
}

/* ---- tenants and classes ----------------------------------------------------------- */

int allot_store_tenant_put(struct allot_store *st, const struct allot_store_tenant *t)
{
    int rc;

    if (!t->path || !t->isolation || !t->quotas || !(t->weight > 0)) {
        store_set_err(st, "a tenant needs a path, weight > 0, an isolation and quotas");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->tenant_put(st, t));
}

int allot_store_tenant_delete(struct allot_store *st, const char *path)
{
    int rc;

    if (!path)
        return ALLOT_EINVAL;
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->tenant_delete(st, path));
}

int allot_store_tenant_list(struct allot_store *st, struct allot_store_tenant **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->tenant_list(st, out, n);
}

void store_clear_tenant(void *elem)
{
    struct allot_store_tenant *t = elem;

    allot_free(t->path);
    allot_free(t->isolation);
    allot_free(t->quotas);
}

void allot_store_tenants_free(struct allot_store_tenant *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        store_clear_tenant(&t[i]);
    allot_free(t);
}

int allot_store_prio_put(struct allot_store *st, const struct allot_store_prio_class *c)
{
    int rc;

    if (!c->name) {
        store_set_err(st, "a priority class needs a name");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->prio_put(st, c));
}

int allot_store_prio_delete(struct allot_store *st, const char *name)
{
    int rc;

    if (!name)
        return ALLOT_EINVAL;
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->prio_delete(st, name));
}

int allot_store_prio_list(struct allot_store *st, struct allot_store_prio_class **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->prio_list(st, out, n);
}

void store_clear_prio(void *elem)
{
    allot_free(((struct allot_store_prio_class *)elem)->name);
}

void allot_store_prios_free(struct allot_store_prio_class *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++)
        store_clear_prio(&c[i]);
    allot_free(c);
}

/* ---- nodes ------------------------------------------------------------------------- */

int allot_store_node_put(struct allot_store *st, const struct allot_store_node *nd)
{
    int rc;

    if (!nd->name || !nd->inventory || !allot_store_node_state_name(nd->state)) {
        store_set_err(st, "a node needs a name, an inventory and a valid state");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->node_put(st, nd));
}

int allot_store_node_get(struct allot_store *st, const char *name, struct allot_store_node *out)
{
    int rc;

    memset(out, 0, sizeof *out);
    if (!name)
        return ALLOT_EINVAL;
    rc = st->ops->node_get(st, name, out);
    if (rc != 0)
        allot_store_node_clear(out);
    return rc;
}

int allot_store_node_heartbeat(struct allot_store *st, const char *name, int64_t now,
                               int64_t expiry)
{
    int rc;

    if (!name)
        return ALLOT_EINVAL;
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->node_heartbeat(st, name, now, expiry));
}

int allot_store_node_delete(struct allot_store *st, const char *name)
{
    int rc;

    if (!name)
        return ALLOT_EINVAL;
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->node_delete(st, name));
}

int allot_store_node_list(struct allot_store *st, struct allot_store_node **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->node_list(st, out, n);
}

void allot_store_node_clear(struct allot_store_node *nd)
{
    if (!nd)
        return;
    allot_free(nd->name);
    allot_free(nd->inventory);
    memset(nd, 0, sizeof *nd);
}

void allot_store_nodes_free(struct allot_store_node *nd, size_t count)
{
    for (size_t i = 0; nd && i < count; i++)
        allot_store_node_clear(&nd[i]);
    allot_free(nd);
}

/* ---- tokens ----------------------------------------------------------------------- */

int allot_store_token_add(struct allot_store *st, const struct allot_store_token *t, int64_t *id)
{
    int rc;

    *id = 0;
    if (!t->name || !t->tenant || !allot_store_role_name(t->role)) {
        store_set_err(st, "a token needs a name, a tenant path and a valid role");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    rc = write_end(st, st->ops->token_add(st, t, id));
    if (rc != 0)
        *id = 0;
    return rc;
}

int allot_store_token_get(struct allot_store *st, int64_t id, struct allot_store_token *out)
{
    int rc;

    memset(out, 0, sizeof *out);
    rc = st->ops->token_get(st, id, NULL, out);
    if (rc != 0)
        allot_store_token_clear(out);
    return rc;
}

int allot_store_token_find(struct allot_store *st, const uint8_t hash[ALLOT_STORE_HASH_LEN],
                           struct allot_store_token *out)
{
    int rc;

    memset(out, 0, sizeof *out);
    rc = st->ops->token_get(st, 0, hash, out);
    if (rc != 0)
        allot_store_token_clear(out);
    return rc;
}

int allot_store_token_revoke(struct allot_store *st, int64_t id, int64_t when)
{
    int rc;

    if (when <= 0) {
        store_set_err(st, "a revocation needs a time > 0");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->token_revoke(st, id, when));
}

int allot_store_token_list(struct allot_store *st, struct allot_store_token **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->token_list(st, out, n);
}

void allot_store_token_clear(struct allot_store_token *t)
{
    if (!t)
        return;
    allot_free(t->name);
    allot_free(t->tenant);
    memset(t, 0, sizeof *t);
}

void allot_store_tokens_free(struct allot_store_token *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        allot_store_token_clear(&t[i]);
    allot_free(t);
}

/* ---- audit log: the hash chain -------------------------------------------------------- */

static void hash_u64(crypto_hash_sha256_state *h, uint64_t v)
{
    uint8_t b[8];

    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    crypto_hash_sha256_update(h, b, sizeof b);
}

static void hash_str(crypto_hash_sha256_state *h, const char *s)
{
    size_t n = strlen(s);

    /* length first, so that ("ab", "c") and ("a", "bc") differ */
    hash_u64(h, n);
    crypto_hash_sha256_update(h, (const unsigned char *)s, n);
}

/* The hash of entry e over its previous hash and content (docs/store.md):
 * SHA-256("allot-audit-v1" NUL, prev_hash, le64 seq, le64 time, le64
 * token_id, then action, target, result each as le64 length + bytes). */
static void audit_hash(const struct allot_store_audit *e, uint8_t out[ALLOT_STORE_HASH_LEN])
{
    static const char tag[] = "allot-audit-v1";
    crypto_hash_sha256_state h;

    crypto_hash_sha256_init(&h);
    crypto_hash_sha256_update(&h, (const unsigned char *)tag, sizeof tag);
    crypto_hash_sha256_update(&h, e->prev_hash, ALLOT_STORE_HASH_LEN);
    hash_u64(&h, (uint64_t)e->seq);
    hash_u64(&h, (uint64_t)e->time);
    hash_u64(&h, (uint64_t)e->token_id);
    hash_str(&h, e->action);
    hash_str(&h, e->target);
    hash_str(&h, e->result);
    crypto_hash_sha256_final(&h, out);
}

int allot_store_audit_append(struct allot_store *st, const struct allot_store_audit *e,
                             int64_t *seq)
{
    struct allot_store_audit a = *e;
    int rc;

    if (seq)
        *seq = 0;
    if (!e->action || !e->target || !e->result) {
        store_set_err(st, "an audit entry needs an action, a target and a result");
        return ALLOT_EINVAL;
    }
    /* read the head and append in one batch: the write lock taken by the
     * outermost begin keeps other writers from appending in between */
    if ((rc = write_begin(st)) != 0)
        return rc;
    rc = st->ops->audit_last(st, &a.seq, a.prev_hash);
    if (rc == 0) {
        a.seq++;
        audit_hash(&a, a.hash);
        rc = st->ops->audit_insert(st, &a);
    }
    rc = write_end(st, rc);
    if (rc == 0 && seq)
        *seq = a.seq;
    return rc;
}

int allot_store_audit_list(struct allot_store *st, int64_t after_seq, int limit,
                           struct allot_store_audit **out, size_t *n)
{
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = limit_check(st, limit)) != 0)
        return rc;
    return st->ops->audit_list(st, after_seq, limit, out, n);
}

void store_clear_audit(void *elem)
{
    struct allot_store_audit *a = elem;

    allot_free(a->action);
    allot_free(a->target);
    allot_free(a->result);
}

void allot_store_audits_free(struct allot_store_audit *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        store_clear_audit(&a[i]);
    allot_free(a);
}

int allot_store_audit_head(struct allot_store *st, int64_t *seq, uint8_t hash[ALLOT_STORE_HASH_LEN])
{
    return st->ops->audit_last(st, seq, hash);
}

/* Checks one entry against the chain so far; 0 or ALLOT_ESTATE with why. */
static int audit_check_one(const struct allot_store_audit *e, int64_t want_seq,
                           const uint8_t prev[ALLOT_STORE_HASH_LEN], char *why, size_t whylen)
{
    uint8_t h[ALLOT_STORE_HASH_LEN];

    if (e->seq != want_seq) {
        allot_fmt(why, whylen,
                  e->seq > want_seq ? "entries %lld..%lld are missing (deleted)"
                                    : "entry %lld is out of sequence (expected %lld)",
                  (long long)(e->seq > want_seq ? want_seq : e->seq),
                  (long long)(e->seq > want_seq ? e->seq - 1 : want_seq));
        return ALLOT_ESTATE;
    }
    if (memcmp(e->prev_hash, prev, ALLOT_STORE_HASH_LEN) != 0) {
        allot_fmt(why, whylen,
                  "entry %lld does not follow the previous entry's hash (inserted, "
                  "or an entry before it was replaced)",
                  (long long)e->seq);
        return ALLOT_ESTATE;
    }
    audit_hash(e, h);
    if (memcmp(h, e->hash, ALLOT_STORE_HASH_LEN) != 0) {
        allot_fmt(why, whylen, "entry %lld does not match its hash (edited)", (long long)e->seq);
        return ALLOT_ESTATE;
    }
    return 0;
}

int allot_store_audit_verify(struct allot_store *st, int64_t *bad_seq, char *why, size_t whylen)
{
    uint8_t prev[ALLOT_STORE_HASH_LEN] = {0};
    int64_t want = 1;
    int rc = 0;

    if (bad_seq)
        *bad_seq = 0;
    if (why && whylen)
        why[0] = '\0';
    for (;;) {
        struct allot_store_audit *page;
        size_t n;

        rc = st->ops->audit_list(st, want - 1, 512, &page, &n);
        if (rc != 0)
            return rc;
        for (size_t i = 0; i < n && rc == 0; i++) {
            rc = audit_check_one(&page[i], want, prev, why, whylen);
            if (rc != 0 && bad_seq)
                *bad_seq = page[i].seq < want ? page[i].seq : want;
            memcpy(prev, page[i].hash, ALLOT_STORE_HASH_LEN);
            want++;
        }
        allot_store_audits_free(page, n);
        if (rc != 0 || n < 512)
            return rc;
    }
}

/* ---- metering ---- */

int allot_store_run_list(struct allot_store *st, int64_t from, int64_t to,
                         struct allot_store_run **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->run_list(st, from, to, out, n);
}

void allot_store_run_clear(struct allot_store_run *r)
{
    allot_free(r->tenant);
    allot_free(r->user);
    allot_free(r->placement);
    memset(r, 0, sizeof *r);
}

void allot_store_runs_free(struct allot_store_run *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++)
        allot_store_run_clear(&r[i]);
    allot_free(r);
}

int allot_store_run_at(struct allot_store *st, int64_t job_id, int64_t t,
                       struct allot_store_run *out)
{
    int rc;

    memset(out, 0, sizeof *out);
    if (job_id <= 0)
        return ALLOT_EINVAL;
    rc = st->ops->run_last(st, job_id, t, out);
    if (rc != 0)
        allot_store_run_clear(out);
    return rc;
}

int allot_store_run_last(struct allot_store *st, int64_t job_id, struct allot_store_run *out)
{
    return allot_store_run_at(st, job_id, INT64_MAX, out);
}

int allot_store_node_span_list(struct allot_store *st, int64_t from, int64_t to,
                               struct allot_store_node_span **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->node_span_list(st, from, to, out, n);
}

void store_clear_span(void *elem)
{
    struct allot_store_node_span *p = elem;

    allot_free(p->node);
    allot_free(p->inventory);
}

void allot_store_node_spans_free(struct allot_store_node_span *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        store_clear_span(&s[i]);
    allot_free(s);
}

int allot_store_sample_add(struct allot_store *st, const struct allot_store_sample *s, bool *added)
{
    bool dummy;
    int rc;

    if (s->job_id <= 0 || s->task < 0 || s->at <= 0) {
        store_set_err(st, "a sample needs a job, a task and a time");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->sample_add(st, s, added ? added : &dummy));
}

int allot_store_sample_list(struct allot_store *st, int64_t from_ms, int64_t to_ms,
                            struct allot_store_sample **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->sample_list(st, from_ms, to_ms, out, n);
}

int allot_store_usage_replace(struct allot_store *st, int64_t from, int64_t to,
                              const struct allot_store_usage *rows, size_t n)
{
    int rc;

    for (size_t i = 0; i < n; i++) {
        if (!rows[i].tenant || !rows[i].user || !rows[i].model || !rows[i].item ||
            rows[i].hour % 3600 || rows[i].hour < from || rows[i].hour >= to) {
            store_set_err(st, "usage row %zu: missing field or hour outside the range", i);
            return ALLOT_EINVAL;
        }
        /* measured billing never bills more than was allocated */
        if (rows[i].gpu_bill_ppm_s < -1 || rows[i].gpu_bill_ppm_s > rows[i].gpu_ppm_s) {
            store_set_err(st, "usage row %zu: gpu_bill_ppm_s %lld outside -1..%lld", i,
                          (long long)rows[i].gpu_bill_ppm_s, (long long)rows[i].gpu_ppm_s);
            return ALLOT_EINVAL;
        }
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->usage_replace(st, from, to, rows, n));
}

int allot_store_usage_list(struct allot_store *st, int64_t from, int64_t to,
                           struct allot_store_usage **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->usage_list(st, from, to, out, n);
}

void store_clear_usage(void *elem)
{
    struct allot_store_usage *u = elem;

    allot_free(u->tenant);
    allot_free(u->user);
    allot_free(u->model);
    allot_free(u->item);
}

void allot_store_usages_free(struct allot_store_usage *u, size_t n)
{
    for (size_t i = 0; u && i < n; i++)
        store_clear_usage(&u[i]);
    allot_free(u);
}

/* ---- tenant networks ---- */

int allot_store_net_add(struct allot_store *st, const struct allot_store_net *n)
{
    int rc;

    if (!n->tenant || !n->subnet || n->vni <= 0) {
        store_set_err(st, "a tenant network needs a tenant, a vni and a subnet");
        return ALLOT_EINVAL;
    }
    if ((rc = write_begin(st)) != 0)
        return rc;
    return write_end(st, st->ops->net_add(st, n));
}

int allot_store_net_list(struct allot_store *st, struct allot_store_net **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return st->ops->net_list(st, out, n);
}

void store_clear_net(void *elem)
{
    struct allot_store_net *v = elem;

    allot_free(v->tenant);
    allot_free(v->subnet);
}

void allot_store_nets_free(struct allot_store_net *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        store_clear_net(&v[i]);
    allot_free(v);
}

void store_clear_job(void *elem)
{
    allot_store_job_clear(elem);
}

void store_clear_node(void *elem)
{
    allot_store_node_clear(elem);
}

void store_clear_token(void *elem)
{
    allot_store_token_clear(elem);
}

void store_clear_run(void *elem)
{
    allot_store_run_clear(elem);
}

void store_clear_none(void *elem)
{
    (void)elem;
}
