/*
 * Tenant routes: PUT /v1/tenants replaces the whole tree and the priority
 * classes (declarative, like `allot apply -f tenants.yaml`): listed
 * tenants are created or updated, unlisted ones deleted (refused with 409
 * while one still has live jobs; the tokens scoped to them revoked), a
 * tenant with live jobs never made a parent nor given another isolation
 * level (409), a stored parent the tree implies but does not list reset
 * to weight 1 and no quota, all in one write of the group committer
 * with its audit entry; GET /v1/tenants returns the same document, limited to the
 * caller's subtree for tenant-bound tokens.
 */
#include "http.h"
#include "loop.h"
#include "refs.h"
#include "tenants.h"

#include "allot/common.h"

#include <string.h>

static const char *const iso_names[] = {"shared", "exclusive-gpu", "exclusive-node"};

/* The first tenant of the new tree below path, or NULL: path is (or
 * stays) a parent. */
static const char *first_child(const struct sim_tenants_conf *c, const char *path)
{
    int i = sim_tenants_conf_below(c, path);

    return i >= 0 ? c->v[i].path : NULL;
}

/* Whether the tenant at path has live jobs: its own, or with subtree
 * those of everything below it too. */
static bool has_live_jobs(struct allot_store *st, const char *path, bool subtree, int *rc)
{
    struct allot_store_job_filter f = {
        .tenant = path, .tenant_subtree = subtree, .states = ALLOT_SJ_LIVE_MASK, .limit = 1};
    struct allot_store_job_page pg = {0};
    bool live;

    *rc = allot_store_job_list(st, &f, &pg);
    live = pg.n > 0;
    allot_store_job_page_free(&pg);
    return live;
}

/* Writes the tree; store lock held, inside a batch. Returns 0, an
 * ALLOT_E* code, or ALLOT_ESTATE with why in `busy`: a tenant with live
 * jobs would be removed, or would become a parent (jobs run in leaves
 * only: its jobs could never start or run again). */
/* Revokes the live tokens scoped to a tenant the new tree c no longer has
 * (a removed tenant, or an organisation only removed tenants named), so a
 * path used again later does not let them back in; *n counts them. */
static int revoke_unlisted(struct allot_store *st, const struct sim_tenants_conf *c, int64_t now,
                           int *n)
{
    struct allot_store_token *t = NULL;
    size_t cnt = 0;
    int rc = allot_store_token_list(st, &t, &cnt);

    for (size_t i = 0; i < cnt && !rc; i++)
        if (!t[i].revoked && t[i].tenant && *t[i].tenant && !tenants_listed(c, t[i].tenant)) {
            rc = allot_store_token_revoke(st, t[i].id, now);
            ++*n;
        }
    allot_store_tokens_free(t, cnt);
    return rc;
}

/* Whether the classes of c may replace the stored ones: none that a live
 * job names goes. As tree_check. */
static int classes_check(struct allot_store *st, const struct sim_tenants_conf *c, char *busy,
                         size_t busylen)
{
    struct allot_store_prio_class *p = NULL;
    size_t n = 0;
    int rc = allot_store_prio_list(st, &p, &n);

    for (size_t i = 0; i < n && !rc; i++) {
        bool kept = false;
        int64_t job = 0;
        for (int j = 0; j < c->n_prio; j++)
            kept |= !strcmp(c->prio[j].name, p[i].name);
        if (!kept && (rc = tenants_class_in_use(st, p[i].name, &job)) > 0) {
            allot_fmt(busy, busylen,
                      "priority class %s is named by live job %lld; it cannot be removed",
                      p[i].name, (long long)job);
            rc = ALLOT_ESTATE;
        }
    }
    allot_store_prios_free(p, n);
    return rc;
}

/* Whether tree c may replace the stored one (old, n_old): no tenant with
 * live jobs becomes a parent, goes, or changes its isolation level (its
 * running work holds nodes or GPUs as the old level says, and its waiting
 * jobs were queued with it: under the new one, other work would be placed
 * beside them, and a restart of allotd could adopt neither). Returns 0,
 * an ALLOT_E* code, or ALLOT_ESTATE with why in busy. */
static int tree_check(struct allot_store *st, const struct allot_store_tenant *old, size_t n_old,
                      const struct sim_tenants_conf *c, char *busy, size_t busylen)
{
    int rc = 0;

    for (size_t i = 0; i < n_old && !rc; i++) {
        int k = sim_tenants_conf_find(c, old[i].path);
        const char *now = k >= 0 ? iso_names[c->v[k].isolation] : NULL;
        if (now && old[i].isolation && strcmp(now, old[i].isolation) != 0 &&
            has_live_jobs(st, old[i].path, false, &rc) && !rc) {
            allot_fmt(busy, busylen,
                      "tenant %s still has live jobs; its isolation level (%s -> %s) changes "
                      "only when it has none (they run, or were queued, as %s)",
                      old[i].path, old[i].isolation, now, old[i].isolation);
            rc = ALLOT_ESTATE;
        }
    }

    for (size_t i = 0; i < n_old && !rc; i++) {
        const char *child = first_child(c, old[i].path);
        if (child && has_live_jobs(st, old[i].path, false, &rc) && !rc) {
            allot_fmt(busy, busylen,
                      "tenant %s still has live jobs; it cannot become the parent of %s",
                      old[i].path, child);
            rc = ALLOT_ESTATE;
        }
    }
    /* a tenant is removed with everything below it; children sort after
     * their parents: the deepest busy one is named */
    for (size_t i = n_old; i-- > 0 && !rc;)
        if (!tenants_listed(c, old[i].path) && has_live_jobs(st, old[i].path, true, &rc) && !rc) {
            allot_fmt(busy, busylen, "tenant %s still has live jobs; it cannot be removed",
                      old[i].path);
            rc = ALLOT_ESTATE;
        }
    return rc ? rc : classes_check(st, c, busy, busylen);
}

/* Whether tree c could replace the stored one now (a dry run: nothing
 * changes). As tree_check. */
static int tree_check_store(struct allot_store *st, const struct sim_tenants_conf *c, char *busy,
                            size_t busylen)
{
    struct allot_store_tenant *old = NULL;
    size_t n_old = 0;
    int rc = allot_store_tenant_list(st, &old, &n_old);

    if (rc == 0)
        rc = tree_check(st, old, n_old, c, busy, busylen);
    allot_store_tenants_free(old, n_old);
    return rc;
}

static int write_tree(struct allot_store *st, json_t *doc, const struct sim_tenants_conf *c,
                      char *busy, size_t busylen, int *revoked)
{
    struct allot_store_tenant *old = NULL;
    struct allot_store_prio_class *oldp = NULL;
    size_t n_old = 0, n_oldp = 0;
    json_t *ts = json_object_get(doc, "tenants");
    int rc;

    rc = allot_store_tenant_list(st, &old, &n_old);
    if (rc < 0)
        return rc;
    rc = tree_check(st, old, n_old, c, busy, busylen);
    /* children sort after their parents: delete from the end */
    bool removed = false;
    for (size_t i = n_old; i-- > 0 && !rc;) {
        if (tenants_listed(c, old[i].path)) {
            /* a parent the tree implies but does not list: weight 1 and no
             * quota of its own, not what an earlier tree gave it */
            struct allot_store_tenant t = {
                .path = old[i].path, .weight = 1, .isolation = "shared", .quotas = "{}"};
            if (sim_tenants_conf_find(c, old[i].path) < 0)
                rc = allot_store_tenant_put(st, &t);
            continue;
        }
        rc = allot_store_tenant_delete(st, old[i].path);
        removed = true;
    }
    if (!rc && removed)
        rc = revoke_unlisted(st, c, srv_now(), revoked);
    allot_store_tenants_free(old, n_old);
    /* each listed tenant's quotas as the document gives them */
    json_t *quotas = json_object(), *x;
    size_t k;

    if (!quotas)
        rc = rc ? rc : ALLOT_ENOMEM;
    json_array_foreach(ts, k, x)
    {
        const char *path = json_string_value(json_object_get(x, "path"));
        json_t *q = json_object_get(x, "quotas");

        if (path && q && json_object_set(quotas, path, q) < 0)
            rc = rc ? rc : ALLOT_ENOMEM;
    }
    for (size_t i = 0; i < c->n && !rc; i++) {
        json_t *q = json_object_get(quotas, c->v[i].path);
        char *qs = q ? json_dumps(q, JSON_COMPACT) : NULL;
        struct allot_store_tenant t = {.path = c->v[i].path,
                                       .weight = c->v[i].weight,
                                       .isolation = (char *)iso_names[c->v[i].isolation],
                                       .quotas = qs ? qs : "{}"};
        rc = (q && !qs) ? ALLOT_ENOMEM : allot_store_tenant_put(st, &t);
        free(qs);
    }
    json_decref(quotas);
    if (!rc)
        rc = allot_store_prio_list(st, &oldp, &n_oldp);
    for (size_t i = 0; i < n_oldp && !rc; i++) {
        bool keep = false;
        for (int j = 0; j < c->n_prio; j++)
            keep |= !strcmp(c->prio[j].name, oldp[i].name);
        if (!keep)
            rc = allot_store_prio_delete(st, oldp[i].name);
    }
    allot_store_prios_free(oldp, n_oldp);
    for (int j = 0; j < c->n_prio && !rc; j++) {
        struct allot_store_prio_class p = {.name = (char *)c->prio[j].name,
                                           .value = c->prio[j].value,
                                           .preemptible = c->prio[j].preemptible};
        rc = allot_store_prio_put(st, &p);
    }
    return rc;
}

/* The ETag of tree document doc ("\"16 hex digits\"", in etag[24]); ""
 * when doc is NULL. */
static void doc_etag(json_t *doc, char etag[24])
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    uint8_t h[ALLOT_STORE_HASH_LEN];

    etag[0] = '\0';
    if (text) {
        allot_store_sha256(text, strlen(text), h);
        allot_fmt(etag, 24, "\"%02x%02x%02x%02x%02x%02x%02x%02x\"", h[0], h[1], h[2], h[3], h[4],
                  h[5], h[6], h[7]);
    }
    free(text);
}

/* Whether If-Match value h names etag: one of its comma-separated tags,
 * weak ones (W/"...", as a proxy may make them) taken as strong. */
static bool etag_matches(const char *h, const char *etag)
{
    size_t el = strlen(etag);

    while (*h) {
        h += strspn(h, " \t,");
        if (!strncmp(h, "W/", 2))
            h += 2;
        size_t l = strcspn(h, ",");
        while (l > 0 && (h[l - 1] == ' ' || h[l - 1] == '\t'))
            l--;
        if (l == el && !strncmp(h, etag, el))
            return true;
        h += strcspn(h, ",");
    }
    return false;
}

/* The ETag of the whole tree as the store holds it. */
static void tree_etag(struct allot_store *st, char etag[24])
{
    json_t *doc = tenants_doc_from_store(st);

    doc_etag(doc, etag);
    json_decref(doc);
}

struct tree_write {
    struct req *r;
    const char *if_match; /* the ETag the writer read, or NULL */
    bool stale;           /* OUT: the tree is no longer that one */
    json_t *doc;
    const struct sim_tenants_conf *conf;
    char *busy;
    size_t busylen;
    int revoked; /* OUT: tokens of removed tenants revoked */
};

/* Group-commit write: the whole tree, the classes and the audit entry. */
static int tree_fn(struct allot_store *st, void *arg)
{
    struct tree_write *w = arg;
    char etag[24];
    int rc;

    if (w->if_match && strcmp(w->if_match, "*") != 0) {
        tree_etag(st, etag);
        if ((w->stale = !etag_matches(w->if_match, etag)))
            return ALLOT_ESTATE;
    }
    rc = write_tree(st, w->doc, w->conf, w->busy, w->busylen, &w->revoked);

    char result[64] = "ok";

    if (w->revoked) /* each its own audit entry would say less */
        allot_fmt(result, sizeof(result), "ok (%d tokens of removed tenants revoked)", w->revoked);
    return rc ? rc : api_audit(st, w->r, "tenants", result, srv_now());
}

/* Adds to reply rep a warning when the leaves' GPU nominals sum to more
 * GPUs than the registered nodes have: not every guarantee can be met at
 * once (Kueue lets nominal quotas exceed the cluster too; it is said, not
 * refused, as nodes may still join). */
static void nominal_warning(struct server *s, const struct sim_tenants_conf *c, json_t *rep)
{
    int64_t sum = 0, gpus = loop_gpu_total(s->loop) * ALLOT_MILLI;
    char w[300];

    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].leaf && c->v[i].has_quota[ALLOT_RES_GPU] &&
            c->v[i].quota[ALLOT_RES_GPU].nominal != ALLOT_UNLIMITED)
            sum += c->v[i].quota[ALLOT_RES_GPU].nominal;
    if (!rep || gpus <= 0 || sum <= gpus)
        return;
    allot_fmt(w, sizeof(w),
              "the tenants' GPU nominals sum to %.3g GPUs; the registered nodes have %lld: not "
              "every tenant's guarantee can be met at once",
              (double)sum / ALLOT_MILLI, (long long)(gpus / ALLOT_MILLI));
    json_object_set_new(rep, "warnings", json_pack("[s]", w));
}

/* The body of r as a tree document into *doc and *conf; false after
 * answering 400 or 422. */
static bool tree_body(struct req *r, json_t **doc, struct sim_tenants_conf *conf)
{
    char err[512];
    int rc;

    if (!(*doc = api_body_object(r)))
        return false;
    if (tenants_doc_check(*doc, err, sizeof(err))) {
        api_error(r, 400, "bad_request", "%s", err);
        return false;
    }
    rc = tenants_doc_parse(*doc, r->srv->cat, conf, err, sizeof(err));
    if (rc < 0) {
        api_error(r, rc == ALLOT_ENOMEM ? 500 : 422, "invalid", "%s", err);
        return false;
    }
    return true;
}

int api_tenants_check(struct req *r)
{
    struct sim_tenants_conf conf = {0};
    char busy[768] = "";
    json_t *doc = NULL;
    struct allot_store *st;
    int rc;

    /* checked as PUT would check it; nothing is written */
    if (tree_body(r, &doc, &conf) && (st = api_reader(r))) {
        rc = tree_check_store(st, &conf, busy, sizeof(busy));
        if (rc == ALLOT_ESTATE)
            api_error(r, 409, "conflict", "%s", busy);
        else if (rc < 0)
            api_error(r, 500, "store", "%s", allot_strerror(rc));
        else
            api_json(r, 200,
                     json_pack("{s:I,s:i}", "tenants", (json_int_t)conf.n, "priority_classes",
                               conf.n_prio));
    }
    sim_tenants_conf_free(&conf);
    json_decref(doc);
    return 0;
}

int api_tenants_put(struct req *r)
{
    struct sim_tenants_conf conf = {0};
    char busy[768] = "";
    json_t *doc = NULL;
    int rc;

    if (!tree_body(r, &doc, &conf))
        goto out;
    struct tree_write w = {.r = r,
                           .if_match = api_header(r, "If-Match"),
                           .doc = doc,
                           .conf = &conf,
                           .busy = busy,
                           .busylen = sizeof(busy)};
    rc = srv_write(r->srv, tree_fn, &w);
    if (rc)
        r->audited = false;
    if (rc == ALLOT_ESTATE && w.stale)
        api_error(r, 412, "precondition_failed",
                  "the tenant tree changed since it was read (If-Match %s): read it again",
                  w.if_match);
    else if (rc == ALLOT_ESTATE)
        api_error(r, 409, "conflict", "%s", busy);
    else if (rc < 0)
        api_error(r, 500, "store", "%s", allot_strerror(rc));
    else {
        refs_changed(r->srv);
        if (w.revoked)
            auth_forget_tokens(r->srv); /* they stop working at once */
        loop_post(r->srv->loop, LOOP_TENANTS, 0, NULL);
        json_t *rep =
            json_pack("{s:I,s:i}", "tenants", (json_int_t)conf.n, "priority_classes", conf.n_prio);
        nominal_warning(r->srv, &conf, rep);
        api_json(r, 200, rep);
    }
out:
    sim_tenants_conf_free(&conf);
    json_decref(doc);
    return 0;
}

int api_tenants_get(struct req *r)
{
    json_t *doc, *ts;
    size_t i;

    struct allot_store *st = api_reader(r);

    if (!st)
        return 0;
    doc = tenants_doc_from_store(st);
    if (!doc)
        return api_error(r, 500, "store", "cannot read the tenants");
    /* of the whole tree: a write with If-Match succeeds only on it */
    char etag[24];
    doc_etag(doc, etag);
    if (etag[0])
        api_set_header(r, "ETag", etag);
    ts = json_object_get(doc, "tenants");
    for (i = json_array_size(ts); i-- > 0;)
        if (!auth_sees_tenant(&r->who,
                              json_string_value(json_object_get(json_array_get(ts, i), "path"))))
            json_array_remove(ts, i);
    return api_json(r, 200, doc);
}
