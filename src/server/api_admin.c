/*
 * Administrative routes of allotd: health and readiness, /metrics, API
 * tokens (create, list, revoke) and the audit log (list, verify), plus the
 * audit helper every mutating handler calls inside its write function.
 * Runs on HTTP worker threads; reads on the thread's handle, writes
 * through the group committer.
 */
#include "http.h"
#include "loop.h"
#include "meter.h"
#include "refs.h"
#include "reqparse.h"
#include "tenants_yaml.h"

#include "allot/common.h"
#include "allot/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int api_audit(struct allot_store *st, struct req *r, const char *target, const char *result,
              int64_t now)
{
    struct allot_store_audit e = {.time = now,
                                  .token_id = r->who.token_id,
                                  .action = (char *)(r->action ? r->action : "unknown"),
                                  .target = (char *)target,
                                  .result = (char *)result};

    r->audited = true;
    return allot_store_audit_append(st, &e, NULL);
}

struct allot_store *api_reader(struct req *r)
{
    struct allot_store *st = srv_reader(r->srv);

    if (!st) {
        /* every read handle lent (--store-readers), or the store unreachable */
        api_set_header(r, "Retry-After", "1");
        api_error(r, 503, "store", "cannot read the store now; retry shortly");
    }
    return st;
}

int api_healthz(struct req *r)
{
    return api_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

int api_standby(struct req *r)
{
    char leader[512];

    pthread_mutex_lock(&r->srv->leader_lock);
    allot_strlcpy(leader, r->srv->leader_url, sizeof(leader));
    pthread_mutex_unlock(&r->srv->leader_lock);
    api_set_header(r, "Retry-After", "1");
    if (*leader)
        api_set_header(r, "X-Allot-Leader", leader);
    return api_json(r, 503,
                    json_pack("{s:{s:s,s:s},s:s}", "error", "code", "standby", "message",
                              *leader ? "this allotd stands by: another one leads; send "
                                        "requests to the leader"
                                      : "this allotd stands by: another one leads",
                              "leader", leader));
}

int api_readyz(struct req *r)
{
    int failing = atomic_load(&r->srv->store_failing);

    if (atomic_load(&r->srv->standby))
        return api_standby(r);
    if (!atomic_load(&r->srv->ready))
        return api_error(r, 503, "starting", "rebuilding the scheduler from the store");
    /* its lead checks stopped answering (the store's server or the way
     * to it hangs): another allotd may lead by now */
    int64_t quiet = allot_mono_ms() - atomic_load(&r->srv->lead_ok_ms),
            most = r->srv->cfg.lead_check * 5 > 5000 ? r->srv->cfg.lead_check * 5 : 5000;
    if (atomic_load(&r->srv->lead_ok_ms) && quiet > most)
        return api_error(r, 503, "store",
                         "the lead was last confirmed %lld s ago: the store does not answer; "
                         "another allotd may lead",
                         (long long)(quiet / 1000));
    if (failing) {
        char why[256];
        allot_store_gc_last_error(r->srv->gc, why, sizeof(why));
        return api_error(r, 503, "store",
                         "the last store write failed (%s%s%s): nothing new can be recorded; "
                         "running work goes on",
                         allot_strerror(failing), why[0] ? ": " : "", why);
    }
    return api_json(r, 200, json_pack("{s:s}", "status", "ready"));
}

/* Drops the samples of tenants the caller may not see (auth_sees_tenant, the
 * rule every tenant-scoped route follows): a line whose tenant="..." label
 * names one. Comments and samples without a tenant label stay. */
static void metrics_scope(const struct principal *who, char *buf)
{
    char *out = buf, *line = buf;

    while (*line) {
        char *end = strchr(line, '\n'), *t;
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        bool keep = true;

        if (*line != '#' && (t = strstr(line, "tenant=\"")) && t < line + len) {
            char name[512];
            char *q = strchr(t + 8, '"');
            size_t n = q ? (size_t)(q - (t + 8)) : 0;

            if (!q || n >= sizeof(name))
                keep = false;
            else {
                memcpy(name, t + 8, n);
                name[n] = '\0';
                keep = auth_sees_tenant(who, name);
            }
        }
        if (keep) {
            memmove(out, line, len);
            out += len;
        }
        line += len;
    }
    *out = '\0';
}

int api_metrics(struct req *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    /* a public route (http.c) that --metrics-auth closes: any valid token
     * may read it, so a scraper needs no more than a viewer's; a token bound
     * to a tenant reads only its tenants' figures */
    if (r->srv->cfg.metrics_auth && !auth_resolve(r))
        return auth_refuse(r, "a valid bearer token is required (allotd runs with --metrics-auth)");
    if (r->srv->cfg.metrics_auth && r->who.role == ROLE_JOB) /* a token, but not of a user */
        return api_error(r, 403, "forbidden", "role job may not GET /metrics");
    if (!(f = open_memstream(&buf, &len)))
        return api_error(r, 500, "internal", "out of memory");
    http_metrics(r->srv->http, f);
    if (atomic_load(&r->srv->ready)) /* the loop exists once ready */
        loop_metrics(r->srv->loop, f);
    meter_metrics(r->srv, f);
    /* the group committer exists once ready (a standby has none) */
    fprintf(f,
            "# HELP allot_store_commits_total Store transactions committed by the group "
            "committer.\n# TYPE allot_store_commits_total counter\nallot_store_commits_total "
            "%llu\n",
            atomic_load(&r->srv->ready) ? (unsigned long long)allot_store_gc_commits(r->srv->gc)
                                        : 0ULL);
    pthread_mutex_lock(&r->srv->readers_lock);
    size_t open = r->srv->n_readers, idle = r->srv->n_idle;
    pthread_mutex_unlock(&r->srv->readers_lock);
    fprintf(f,
            "# HELP allot_store_read_handles Store read handles open (lent to threads, or "
            "idle).\n# TYPE allot_store_read_handles gauge\n"
            "allot_store_read_handles{state=\"lent\"} %zu\n"
            "allot_store_read_handles{state=\"idle\"} %zu\n",
            open - idle, idle);
    /* several allotd on one store (docs/ha.md): exactly one should lead */
    bool leads = atomic_load(&r->srv->ready) && !atomic_load(&r->srv->standby);
    fprintf(f,
            "# HELP allot_leader 1 when this allotd leads (schedules and writes), 0 while it "
            "stands by or starts.\n# TYPE allot_leader gauge\nallot_leader %d\n"
            "# HELP allot_leader_epoch The leader epoch this allotd took (0 while it does not "
            "lead).\n# TYPE allot_leader_epoch gauge\nallot_leader_epoch %lld\n",
            leads ? 1 : 0, leads ? (long long)atomic_load(&r->srv->epoch) : 0LL);
    fclose(f);
    if (buf && r->srv->cfg.metrics_auth)
        metrics_scope(&r->who, buf);
    api_text(r, 200, "text/plain; version=0.0.4", buf ? buf : "");
    free(buf);
    return 0;
}

/* Who the caller is: its token's id, name, role and tenant scope. */
int api_whoami(struct req *r)
{
    struct allot_store *st = api_reader(r);
    struct allot_store_token t = {0};

    if (!st)
        return 0;
    if (allot_store_token_get(st, r->who.token_id, &t) < 0)
        return api_error(r, 500, "store", "cannot read the token");
    char user[API_WHO_MAX];
    auth_user_name(t.tenant, t.name, user, sizeof(user)); /* as its jobs name it */
    json_t *o = json_pack("{s:I,s:s,s:s,s:s,s:s}", "token_id", (json_int_t)t.id, "name",
                          t.name ? t.name : "", "role", allot_store_role_name(r->who.role),
                          "tenant", r->who.tenant ? r->who.tenant : "", "user", user);
    allot_store_token_clear(&t);
    return api_json(r, 200, o);
}

/* The scheduling options the loop runs with (docs/allotd.md): what allot
 * plan replays, so that its what-ifs follow this allotd, not the defaults. */
int api_scheduler(struct req *r)
{
    struct allot_queue_opts qo;
    json_t *o;

    loop_queue_opts(&r->srv->cfg, &qo);
    o = allot_queue_opts_json(&qo);
    return o ? api_json(r, 200, o) : api_error(r, 500, "memory", "out of memory");
}

/* ---- tokens ---- */

#define TOKEN_DURATION_MAX (3650 * 86400) /* a token made for a time: at most ten years */

static json_t *token_json(const struct allot_store_token *t)
{
    return json_pack("{s:I,s:s,s:s,s:s,s:I,s:I,s:I}", "id", (json_int_t)t->id, "name",
                     t->name ? t->name : "", "role", allot_store_role_name(t->role), "tenant",
                     t->tenant ? t->tenant : "", "created", (json_int_t)t->created, "revoked",
                     (json_int_t)t->revoked, "expires", (json_int_t)t->expires);
}

static int role_parse(const char *s)
{
    for (int i = 0; i < ALLOT_ROLE_NROLES; i++)
        if (!strcmp(allot_store_role_name(i), s))
            return i;
    return -1;
}

/* May the caller manage token t (list, revoke)? */
static bool may_manage(const struct principal *p, int role, const char *tenant)
{
    if (p->role == ALLOT_ROLE_ADMIN)
        return true;
    return p->role == ALLOT_ROLE_TENANT_ADMIN && role != ALLOT_ROLE_ADMIN &&
           role != ALLOT_ROLE_AGENT && *p->tenant && auth_in_scope(p->tenant, tenant);
}

struct token_write {
    struct req *r;
    struct allot_store_token *t;
    int64_t id, now;
    bool last; /* OUT (revoke): refused, the last admin token */
    bool full; /* OUT (create): refused, TENANT_TOKENS_MAX live in the scope */
};

/* Most tokens a tenant-admin's subtree may hold, not revoked and not
 * expired: a tenant-admin makes tokens for its people, not a store's
 * worth (a cluster admin has no bound). */
#define TENANT_TOKENS_MAX 1000

/* Whether the tokens of scope `tenant` (its subtree) not revoked nor
 * expired at now number TENANT_TOKENS_MAX or more. *rc gets a store error. */
static bool scope_full(struct allot_store *st, const char *tenant, int64_t now, int *rc)
{
    struct allot_store_token *t = NULL;
    size_t n = 0, live = 0;

    *rc = allot_store_token_list(st, &t, &n);
    for (size_t i = 0; !*rc && i < n; i++)
        live += !t[i].revoked && (!t[i].expires || t[i].expires > now) && t[i].tenant &&
                *t[i].tenant && auth_in_scope(tenant, t[i].tenant);
    allot_store_tokens_free(t, n);
    return live >= TENANT_TOKENS_MAX;
}

/* Group-commit write: the token and its audit entry; a tenant-admin's
 * refused (w->full, ALLOT_ESTATE) past TENANT_TOKENS_MAX, counted in the
 * write so that concurrent creations cannot pass it together. */
static int token_add_fn(struct allot_store *st, void *arg)
{
    struct token_write *w = arg;
    char target[64];
    int rc = 0;

    if (w->r->who.role == ALLOT_ROLE_TENANT_ADMIN &&
        (w->full = scope_full(st, w->r->who.tenant, w->now, &rc)))
        return ALLOT_ESTATE;
    if (!rc)
        rc = allot_store_token_add(st, w->t, &w->id);

    allot_fmt(target, sizeof(target), "token/%lld", (long long)w->id);
    return rc ? rc : api_audit(st, w->r, target, "ok", w->now);
}

/* True when token `id` is a cluster-wide admin token not revoked and no
 * other such token that does not expire is left: without one nobody could
 * make tokens again (allotd init refuses a store that holds tokens), and
 * one made for a time runs out. *rc gets a store error. */
static bool last_admin(struct allot_store *st, int64_t id, int *rc)
{
    struct allot_store_token *t = NULL;
    size_t n = 0, others = 0;
    bool it = false;

    *rc = allot_store_token_list(st, &t, &n);
    for (size_t i = 0; !*rc && i < n; i++) {
        if (t[i].role != ALLOT_ROLE_ADMIN || t[i].revoked || (t[i].tenant && *t[i].tenant))
            continue;
        if (t[i].id == id)
            it = true;
        else
            others += t[i].expires == 0;
    }
    allot_store_tokens_free(t, n);
    return it && !others;
}

/* The revocation and its audit entry; refused (w->last, ALLOT_ESTATE) for
 * the last admin token, checked in the write so that two revocations
 * cannot both pass it. */
static int token_revoke_fn(struct allot_store *st, void *arg)
{
    struct token_write *w = arg;
    char target[64];
    int rc = 0;

    if ((w->last = last_admin(st, w->id, &rc)))
        return ALLOT_ESTATE;
    if (!rc)
        rc = allot_store_token_revoke(st, w->id, w->now);

    allot_fmt(target, sizeof(target), "token/%lld", (long long)w->id);
    return rc ? rc : api_audit(st, w->r, target, "ok", w->now);
}

int api_tokens_create(struct req *r)
{
    static const char *const fields[] = {"name", "role", "tenant", "duration_s", NULL};
    json_t *b = api_body_object(r);
    json_t *jn, *jr, *jt, *jd;
    struct allot_store_token t = {0};
    char secret[80];
    int64_t id = 0, now = srv_now();
    int role, rc;

    if (!b)
        return 0;
    if (!api_known_fields(r, b, fields, NULL))
        goto out;
    jn = json_object_get(b, "name");
    jr = json_object_get(b, "role");
    jt = json_object_get(b, "tenant");
    if ((jn && !json_is_string(jn)) || !json_is_string(jr) || (jt && !json_is_string(jt))) {
        api_error(r, 400, "bad_request",
                  !json_is_string(jr) ? "field \"role\": a string is required"
                                      : "fields \"name\" and \"tenant\" must be strings");
        goto out;
    }
    jd = json_object_get(b, "duration_s");
    if (jd && (!json_is_integer(jd) || json_integer_value(jd) < 1 ||
               json_integer_value(jd) > TOKEN_DURATION_MAX)) {
        api_error(r, json_is_integer(jd) ? 422 : 400,
                  json_is_integer(jd) ? "invalid" : "bad_request",
                  "field \"duration_s\": seconds the token is valid for, 1..%d (10 years); "
                  "leave it out for a token that does not expire",
                  TOKEN_DURATION_MAX);
        goto out;
    }
    role = role_parse(json_string_value(jr));
    if (role < 0) {
        api_error(r, 422, "invalid", "field \"role\": unknown role \"%s\"", json_string_value(jr));
        goto out;
    }
    t.role = role;
    t.name = (char *)(jn ? json_string_value(jn) : "");
    t.tenant = (char *)(jt ? json_string_value(jt) : "");
    /* a name is a label people read in lists and the audit: short, no
     * control characters */
    size_t nl = strlen(t.name);
    bool ctl = false;
    for (size_t i = 0; i < nl; i++)
        ctl |= (unsigned char)t.name[i] < 0x20 || t.name[i] == 0x7f;
    /* no ':': the jobs of a token bound to a tenant name their user
     * TENANT:NAME, which no other token's name may read as */
    if (nl > 128 || ctl || strchr(t.name, ':')) {
        api_error(r, 422, "invalid", "field \"name\": %s",
                  ctl        ? "control characters are not allowed"
                  : nl > 128 ? "at most 128 bytes"
                             : "':' is not allowed (a job's user is TENANT:NAME for a "
                               "token bound to a tenant)");
        goto out;
    }
    if (*t.tenant && !sim_tenant_path_ok(t.tenant)) {
        api_error(r, 422, "invalid",
                  "field \"tenant\": \"%.100s\" is not a tenant path (steps of letters, "
                  "digits, '_', '.' and '-' joined by '/')",
                  t.tenant);
        goto out;
    }
    if ((role == ALLOT_ROLE_TENANT_ADMIN || role == ALLOT_ROLE_MEMBER) && !*t.tenant) {
        api_error(r, 422, "invalid", "field \"tenant\": role %s needs a tenant",
                  allot_store_role_name(role));
        goto out;
    }
    if ((role == ALLOT_ROLE_ADMIN || role == ALLOT_ROLE_AGENT) && *t.tenant) {
        api_error(r, 422, "invalid",
                  "field \"tenant\": role %s acts cluster-wide and takes no tenant (a "
                  "tenant's admin is role tenant-admin)",
                  allot_store_role_name(role));
        goto out;
    }
    /* scope first: a tenant outside it is refused alike, there or not */
    if (!may_manage(&r->who, role, t.tenant)) {
        api_error(r, 403, "forbidden", "a %s may not create %s tokens for %s%s%s",
                  allot_store_role_name(r->who.role), allot_store_role_name(role),
                  *t.tenant ? "tenant \"" : "the whole cluster", t.tenant, *t.tenant ? "\"" : "");
        goto out;
    }
    if (*t.tenant) {
        struct allot_store *st = api_reader(r);
        int known = st ? refs_tenant_known(r->srv, st, t.tenant) : 0;

        if (!st)
            goto out;
        if (known < 0) {
            api_error(r, 500, "store", "%s", allot_strerror(known));
            goto out;
        }
        if (!known) {
            api_error(r, 422, "invalid",
                      "field \"tenant\": no tenant \"%.100s\" (allot tenants lists them)",
                      t.tenant);
            goto out;
        }
    }
    auth_new_secret(secret, sizeof(secret), t.hash);
    t.created = now;
    t.expires = jd ? now + json_integer_value(jd) : 0;
    /* a token made for a time makes none that outlives it */
    if (r->who.expires && (!t.expires || t.expires > r->who.expires))
        t.expires = r->who.expires;
    struct token_write w = {.r = r, .t = &t, .now = now};
    rc = srv_write(r->srv, token_add_fn, &w);
    id = w.id;
    if (rc < 0 && w.full) {
        r->audited = false;
        api_error(r, 403, "too_many_tokens",
                  "tenant %s holds %d tokens that are neither revoked nor expired, the most a "
                  "tenant-admin may make: revoke some (allot tokens ls, allot tokens revoke), or "
                  "ask a cluster admin",
                  r->who.tenant, TENANT_TOKENS_MAX);
        goto out;
    }
    if (rc < 0) {
        r->audited = false;
        api_error(r, 500, "store", "cannot store the token: %s", allot_strerror(rc));
        goto out;
    }
    t.id = id;
    json_t *o = token_json(&t);
    json_object_set_new(o, "token", json_string(secret));
    api_json(r, 201, o);
out:
    json_decref(b);
    return 0;
}

int api_tokens_list(struct req *r)
{
    struct allot_store_token *t = NULL;
    size_t n = 0;
    json_t *a;
    int rc;

    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    rc = allot_store_token_list(st, &t, &n);
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    a = json_array();
    for (size_t i = 0; i < n; i++)
        if (may_manage(&r->who, t[i].role, t[i].tenant ? t[i].tenant : ""))
            json_array_append_new(a, token_json(&t[i]));
    allot_store_tokens_free(t, n);
    return api_json(r, 200, json_pack("{s:o}", "tokens", a));
}

int api_tokens_revoke(struct req *r)
{
    struct allot_store_token t = {0};
    char target[64];
    int64_t id, now = srv_now();
    struct token_write w = {.r = r, .now = now};
    int rc;

    if (!allot_parse_num(r->params[0], 1, INT64_MAX, &id))
        return api_error(r, 404, "not_found", "no token %s", r->params[0]);
    allot_fmt(target, sizeof(target), "token/%lld", (long long)id);
    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    rc = allot_store_token_get(st, id, &t);
    if (rc == 0 && !may_manage(&r->who, t.role, t.tenant ? t.tenant : ""))
        rc = ALLOT_ENOENT; /* do not reveal tokens outside the caller's scope */
    if (rc == 0 && t.revoked)
        rc = ALLOT_ESTATE;
    if (rc == 0) {
        w.id = id;
        rc = srv_write(r->srv, token_revoke_fn, &w);
        if (rc)
            r->audited = false;
    }
    if (rc == ALLOT_ENOENT)
        api_error(r, 404, "not_found", "no token %lld", (long long)id);
    else if (rc == ALLOT_ESTATE && !w.last)
        api_error(r, 409, "conflict", "token %lld is already revoked", (long long)id);
    else if (rc == ALLOT_ESTATE)
        api_error(r, 409, "conflict",
                  "token %lld is the last cluster-wide admin token that does not expire: create "
                  "another admin token (without --duration) before revoking it",
                  (long long)id);
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        auth_forget_tokens(r->srv); /* the revoked token stops working at once */
        t.revoked = now;
        api_json(r, 200, token_json(&t));
    }
    allot_store_token_clear(&t);
    return 0;
}

/* ---- audit ---- */

static void hex(const uint8_t *h, char *out)
{
    static const char d[] = "0123456789abcdef";

    for (int i = 0; i < ALLOT_STORE_HASH_LEN; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[2 * ALLOT_STORE_HASH_LEN] = '\0';
}

int api_audit_list(struct req *r)
{
    const char *qa = api_query(r, "after"), *ql = api_query(r, "limit");
    int64_t after = 0, limit = 100;
    struct allot_store_audit *e = NULL;
    size_t n = 0;
    json_t *a;
    int rc;

    if ((qa && !allot_parse_num(qa, 0, INT64_MAX, &after)) ||
        (ql && !allot_parse_num(ql, 1, 1000, &limit)))
        return api_error(r, 400, "bad_query", "after must be >= 0, limit 1..1000");
    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    rc = allot_store_audit_list(st, after, (int)limit, &e, &n);
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    a = json_array();
    for (size_t i = 0; i < n; i++) {
        char h[2 * ALLOT_STORE_HASH_LEN + 1];

        hex(e[i].hash, h);
        json_array_append_new(
            a, json_pack("{s:I,s:I,s:I,s:s,s:s,s:s,s:s}", "seq", (json_int_t)e[i].seq, "time",
                         (json_int_t)e[i].time, "token_id", (json_int_t)e[i].token_id, "action",
                         e[i].action, "target", e[i].target, "result", e[i].result, "hash", h));
    }
    int64_t next = n == (size_t)limit ? e[n - 1].seq : 0;
    allot_store_audits_free(e, n);
    return api_json(r, 200, json_pack("{s:o,s:I}", "entries", a, "next_after", (json_int_t)next));
}

int api_audit_verify(struct req *r)
{
    int64_t bad = 0, head = 0;
    uint8_t hh[ALLOT_STORE_HASH_LEN] = {0};
    char why[256] = "", h[2 * ALLOT_STORE_HASH_LEN + 1];
    int rc;

    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    rc = allot_store_audit_verify(st, &bad, why, sizeof(why));
    if (rc == 0)
        rc = allot_store_audit_head(st, &head, hh);
    if (rc == ALLOT_ESTATE)
        return api_json(
            r, 200, json_pack("{s:b,s:I,s:s}", "ok", 0, "bad_seq", (json_int_t)bad, "why", why));
    if (rc < 0)
        return api_error(r, 500, "store", "%s", allot_strerror(rc));
    hex(hh, h);
    return api_json(r, 200,
                    json_pack("{s:b,s:I,s:s}", "ok", 1, "entries", (json_int_t)head, "head", h));
}
