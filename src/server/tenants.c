/*
 * Tenant documents (see tenants.h). The store keeps each tenant's quotas
 * as the JSON text of its `quotas` object exactly as the API received it;
 * rebuilding the document from the store and parsing it again gives the
 * same tree, so the scheduling loop and the API never disagree.
 */
#include "tenants.h"

#include "allot/common.h"
#include "netconf.h"

#include <stdlib.h>
#include <string.h>

static const char *const top_fields[] = {"version", "priority_classes", "tenants", NULL};
static const char *const tenant_fields[] = {"path", "weight", "isolation", "quotas", NULL};
static const char *const class_fields[] = {"name", "value", "preemptible", NULL};

static const char *unknown(json_t *o, const char *const *allowed)
{
    const char *k;
    json_t *v;

    json_object_foreach(o, k, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, k);
        if (!ok)
            return k;
    }
    return NULL;
}

const char *tenants_doc_check(json_t *doc, char *err, size_t errlen)
{
    json_t *ts = json_object_get(doc, "tenants"), *pc = json_object_get(doc, "priority_classes");
    json_t *x, *v;
    const char *bad;
    size_t i;

    if ((bad = unknown(doc, top_fields)))
        return allot_fmt(err, errlen, "unknown field \"%s\"", bad), err;
    if ((v = json_object_get(doc, "version")) && !json_is_integer(v))
        return allot_fmt(err, errlen, "field \"version\" must be an integer"), err;
    if (!json_is_array(ts))
        return allot_fmt(err, errlen, "field \"tenants\" must be an array"), err;
    if (pc && !json_is_array(pc))
        return allot_fmt(err, errlen, "field \"priority_classes\" must be an array"), err;
    json_array_foreach(ts, i, x)
    {
        if (!json_is_object(x))
            return allot_fmt(err, errlen, "tenants[%zu] must be an object", i), err;
        if ((bad = unknown(x, tenant_fields)))
            return allot_fmt(err, errlen, "unknown field \"tenants[%zu].%s\"", i, bad), err;
        if (!json_is_string(json_object_get(x, "path")))
            return allot_fmt(err, errlen, "field \"tenants[%zu].path\" must be a string", i), err;
        if ((v = json_object_get(x, "weight")) && !json_is_number(v))
            return allot_fmt(err, errlen, "field \"tenants[%zu].weight\" must be a number", i), err;
        if ((v = json_object_get(x, "isolation")) && !json_is_string(v))
            return allot_fmt(err, errlen, "field \"tenants[%zu].isolation\" must be a string", i),
                   err;
        if ((v = json_object_get(x, "quotas")) && !json_is_object(v))
            return allot_fmt(err, errlen, "field \"tenants[%zu].quotas\" must be an object", i),
                   err;
        /* the network quota is allotd's (tc rates, egress), not the scheduler's */
        json_t *net = json_object_get(v, "network");
        char why[300];
        if (net && !netconf_check(net, why, sizeof(why)))
            return allot_fmt(err, errlen, "tenants[%zu].quotas.network: %s", i, why), err;
    }
    json_array_foreach(pc, i, x)
    {
        if (!json_is_object(x))
            return allot_fmt(err, errlen, "priority_classes[%zu] must be an object", i), err;
        if ((bad = unknown(x, class_fields)))
            return allot_fmt(err, errlen, "unknown field \"priority_classes[%zu].%s\"", i, bad),
                   err;
        if (!json_is_string(json_object_get(x, "name")) ||
            !json_is_integer(json_object_get(x, "value")))
            return allot_fmt(err, errlen,
                             "priority_classes[%zu]: \"name\" must be a string and \"value\" an "
                             "integer",
                             i),
                   err;
        if ((v = json_object_get(x, "preemptible")) && !json_is_boolean(v))
            return allot_fmt(err, errlen,
                             "field \"priority_classes[%zu].preemptible\" must be a boolean", i),
                   err;
    }
    return NULL;
}

/* Appends YAML flow text for v to the growing buffer (sticky error). */
struct ybuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void yput(struct ybuf *b, const char *s, size_t len)
{
    if (b->oom || allot_grow((void **)&b->p, &b->cap, b->n + len + 1, 1) < 0) {
        b->oom = true;
        return;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void yputs(struct ybuf *b, const char *s)
{
    yput(b, s, strlen(s));
}

/* A quota amount may carry a unit ("8Ti", "500m"): the tenants file
 * wants it as a plain scalar, so short unit-like strings go unquoted. */
static bool plain_amount(const char *s)
{
    size_t n = strlen(s);

    if (!n || n > 40)
        return false;
    for (; *s; s++)
        if (!(*s >= '0' && *s <= '9') && !(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
            *s != '.')
            return false;
    return true;
}

static void yemit(struct ybuf *b, json_t *v, bool amounts)
{
    const char *k;
    json_t *x;
    size_t i;

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        yputs(b, "{");
        i = 0;
        json_object_foreach(v, k, x)
        {
            json_t *ks = json_string(k);
            char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;

            if (!kt)
                b->oom = true;
            else {
                yputs(b, i++ ? ", " : "");
                yputs(b, kt);
                yputs(b, ": ");
            }
            free(kt);
            json_decref(ks);
            yemit(b, x, amounts || !strcmp(k, "quotas"));
        }
        yputs(b, "}");
        return;
    case JSON_ARRAY:
        yputs(b, "[");
        json_array_foreach(v, i, x)
        {
            yputs(b, i ? ", " : "");
            yemit(b, x, amounts);
        }
        yputs(b, "]");
        return;
    case JSON_STRING:
        if (amounts && plain_amount(json_string_value(v))) {
            yputs(b, json_string_value(v));
            return;
        }
        /* JSON text of the string is a YAML double-quoted scalar */
        __attribute__((fallthrough));
    default: {
        /* 15 digits: a weight of 1.2345 reads back as written (17 print 1.2344999999999999) */
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15));

        if (!t)
            b->oom = true;
        else
            yputs(b, t);
        free(t);
    }
    }
}

/* The parser's "tenants:LINE: " names a line of the text tenants_doc_parse
 * wrote: tenant i is line TENANT_LINE0 + i, and priority class j line
 * TENANT_LINE0 + n_tenants + 2 + j. Each line becomes "tenants[i] (PATH)"
 * or "priority_classes[j] (NAME)", which the document's author can find,
 * also where a message says "first on line N". */
#define TENANT_LINE0 3

static bool item_at(json_t *tenants, json_t *prios, unsigned long line, char *buf, size_t len)
{
    size_t nt = json_array_size(tenants), i;
    const char *name;

    if (line >= TENANT_LINE0 && line - TENANT_LINE0 < nt) {
        i = line - TENANT_LINE0;
        name = json_string_value(json_object_get(json_array_get(tenants, i), "path"));
        allot_fmt(buf, len, "tenants[%zu] (%s)", i, name ? name : "?");
        return true;
    }
    if (line >= TENANT_LINE0 + nt + 2 && line - TENANT_LINE0 - nt - 2 < json_array_size(prios)) {
        i = line - TENANT_LINE0 - nt - 2;
        name = json_string_value(json_object_get(json_array_get(prios, i), "name"));
        allot_fmt(buf, len, "priority_classes[%zu] (%s)", i, name ? name : "?");
        return true;
    }
    return false;
}

static void locate(json_t *tenants, json_t *prios, char *err, size_t errlen)
{
    unsigned long line;
    int used = 0;
    char rest[512], at[160], first[160];
    char *f;

    if (sscanf(err, "tenants:%lu: %n", &line, &used) != 1 || used == 0)
        return;
    allot_strlcpy(rest, err + used, sizeof(rest));
    if ((f = strstr(rest, "(first on line ")) && sscanf(f, "(first on line %lu)", &line) == 1 &&
        item_at(tenants, prios, line, at, sizeof(at))) {
        allot_fmt(first, sizeof(first), "(first as %s)%s", at, strchr(f, ')') + 1);
        allot_strlcpy(f, first, sizeof(rest) - (size_t)(f - rest));
    }
    sscanf(err, "tenants:%lu: ", &line);
    if (item_at(tenants, prios, line, at, sizeof(at)))
        allot_fmt(err, errlen, "%s: %s", at, rest);
    else
        allot_fmt(err, errlen, "%s", rest);
}

int tenants_doc_parse(json_t *doc, const struct allot_catalog *cat, struct sim_tenants_conf *out,
                      char *err, size_t errlen)
{
    struct ybuf b = {0};
    json_t *copy = json_deep_copy(doc), *x, *ts, *ps;
    size_t i;
    int rc;

    if (!copy) {
        allot_fmt(err, errlen, "out of memory");
        return ALLOT_ENOMEM;
    }
    /* quotas.network goes to the agents, not to the scheduler's tenant tree */
    ts = json_incref(json_object_get(copy, "tenants"));
    json_array_foreach(ts, i, x) json_object_del(json_object_get(x, "quotas"), "network");
    ps = json_incref(json_object_get(copy, "priority_classes"));
    /* one tenant a line (line TENANT_LINE0 + i), then one class a line, the
     * rest on the first (locate() maps the lines back) */
    if (json_is_array(ts))
        json_object_del(copy, "tenants");
    if (json_is_array(ts) && json_is_array(ps))
        json_object_del(copy, "priority_classes");
    yemit(&b, copy, false);
    if (json_is_array(ts)) {
        b.n -= b.n && b.p[b.n - 1] == '}'; /* reopen the mapping */
        yputs(&b, json_object_size(copy) ? ",\ntenants: [\n" : "\ntenants: [\n");
        json_array_foreach(ts, i, x)
        {
            yemit(&b, x, false);
            yputs(&b, i + 1 < json_array_size(ts) ? ",\n" : "\n");
        }
        if (json_is_array(ps)) {
            yputs(&b, "],\npriority_classes: [\n");
            json_array_foreach(ps, i, x)
            {
                yemit(&b, x, false);
                yputs(&b, i + 1 < json_array_size(ps) ? ",\n" : "\n");
            }
        }
        yputs(&b, "]}");
    }
    yputs(&b, "\n");
    if (b.oom) {
        json_decref(ts);
        json_decref(ps);
        json_decref(copy);
        allot_free(b.p);
        allot_fmt(err, errlen, "out of memory");
        return ALLOT_ENOMEM;
    }
    rc = sim_tenants_parse(b.p, b.n, "tenants", cat, out, err, errlen);
    if (rc && err && errlen)
        locate(ts, json_is_array(ts) ? ps : NULL, err, errlen);
    json_decref(ts);
    json_decref(ps);
    json_decref(copy);
    allot_free(b.p);
    return rc;
}

json_t *tenants_doc_from_store(struct allot_store *st)
{
    struct allot_store_tenant *t = NULL;
    struct allot_store_prio_class *p = NULL;
    size_t nt = 0, np = 0;
    json_t *doc = NULL, *ta, *pa;

    if (allot_store_tenant_list(st, &t, &nt) < 0)
        return NULL;
    if (allot_store_prio_list(st, &p, &np) < 0)
        goto out;
    doc = json_pack("{s:i,s:[],s:[]}", "version", 1, "priority_classes", "tenants");
    if (!doc)
        goto out;
    pa = json_object_get(doc, "priority_classes");
    ta = json_object_get(doc, "tenants");
    for (size_t i = 0; i < np; i++)
        json_array_append_new(pa, json_pack("{s:s,s:i,s:b}", "name", p[i].name, "value", p[i].value,
                                            "preemptible", p[i].preemptible));
    for (size_t i = 0; i < nt; i++) {
        json_t *q = json_loads(t[i].quotas ? t[i].quotas : "{}", 0, NULL);

        if (!q)
            q = json_object();
        json_array_append_new(ta, json_pack("{s:s,s:f,s:s,s:o}", "path", t[i].path, "weight",
                                            t[i].weight, "isolation", t[i].isolation, "quotas", q));
    }
out:
    allot_store_tenants_free(t, nt);
    allot_store_prios_free(p, np);
    return doc;
}

static int depth_of(const char *p)
{
    int d = 1;

    for (; *p; p++)
        d += *p == '/';
    return d;
}

bool tenants_listed(const struct sim_tenants_conf *conf, const char *path)
{
    return sim_tenants_conf_find(conf, path) >= 0 || sim_tenants_conf_below(conf, path) >= 0;
}

/* Whether stored spec text names class `name` (a cheap test first: most
 * specs do not mention it at all). */
static bool spec_names_class(const char *spec, const char *name)
{
    if (!spec || !strstr(spec, name))
        return false;
    json_t *b = json_loads(spec, 0, NULL);
    const char *p = json_string_value(json_object_get(b, "priority"));
    bool hit = p && !strcmp(p, name);

    json_decref(b);
    return hit;
}

int tenants_class_in_use(struct allot_store *st, const char *name, int64_t *job)
{
    struct allot_store_job_filter f = {.states = ALLOT_SJ_LIVE_MASK, .limit = ALLOT_STORE_PAGE_MAX};
    int rc = 0, found = 0;

    do {
        struct allot_store_job_page pg = {0};

        rc = allot_store_job_list(st, &f, &pg);
        for (size_t i = 0; !rc && !found && i < pg.n; i++)
            if (spec_names_class(pg.jobs[i].spec, name)) {
                *job = pg.jobs[i].id;
                found = 1;
            }
        f.cursor = pg.next_cursor;
        allot_store_job_page_free(&pg);
    } while (!rc && !found && f.cursor);
    return rc ? rc : found;
}

int tenants_apply_noting(struct allot_tenants *t, const struct sim_tenants_conf *conf,
                         const struct allot_catalog *cat, bool **changed, bool *any, char *err,
                         size_t errlen)
{
    int n = allot_tenants_count(t), rc;
    int64_t *nom = allot_malloc(((size_t)n + 1) * ALLOT_RES_MAX * sizeof(*nom));

    *changed = NULL;
    *any = false;
    for (int i = 0; nom && i < n; i++)
        for (int k = 0; k < ALLOT_RES_MAX; k++)
            nom[(size_t)i * ALLOT_RES_MAX + k] = allot_tenants_get(t, i)->quota[k].nominal;
    rc = tenants_apply(t, conf, cat, err, errlen);
    if (rc == 0 && nom && (*changed = allot_calloc((size_t)n + 1, sizeof(**changed))))
        for (int i = 0; i < n; i++)
            for (int k = 0; k < ALLOT_RES_MAX; k++)
                if (allot_tenants_get(t, i)->quota[k].nominal != nom[(size_t)i * ALLOT_RES_MAX + k])
                    *any = (*changed)[i] = true;
    allot_free(nom);
    return rc;
}

int tenants_apply(struct allot_tenants *t, const struct sim_tenants_conf *conf,
                  const struct allot_catalog *cat, char *err, size_t errlen)
{
    int max_depth = 0;

    /* a tenant the document no longer lists (pruned) keeps its index in the
     * core, but holds nothing: no nominal for its parent's sum to count, no
     * borrowing (it has no live job: pruning one with jobs is refused); the
     * root and a tenant listed only as the parent of others have no quota of
     * their own, so they start again from none and fill_nominal sums their
     * children's anew (an earlier sum would stay otherwise) */
    for (int i = 0; i < allot_tenants_count(t); i++) {
        const char *path = allot_tenants_get(t, i)->path;
        struct allot_quota q = {ALLOT_UNLIMITED, ALLOT_UNLIMITED, ALLOT_UNLIMITED};

        if (i > 0 && !tenants_listed(conf, path))
            q = (struct allot_quota){0, 0, ALLOT_UNLIMITED};
        else if (i > 0 && sim_tenants_conf_find(conf, path) >= 0)
            continue; /* set below */
        for (int res = 0; res < ALLOT_RES_MODEL0 + cat->n_models; res++)
            if (allot_tenants_set_quota(t, i, res, q) < 0) {
                allot_fmt(err, errlen, "tenant %s: quota rejected by the core", path);
                return ALLOT_EINVAL;
            }
    }

    for (size_t i = 0; i < conf->n; i++)
        if (depth_of(conf->v[i].path) > max_depth)
            max_depth = depth_of(conf->v[i].path);
    /* parents before children, so a listed parent is never auto-created */
    for (int d = 0; d <= max_depth; d++)
        for (size_t i = 0; i < conf->n; i++) {
            const struct sim_tenant_conf *c = &conf->v[i];
            struct allot_tenant *x;
            int idx;

            if (depth_of(c->path) != d)
                continue;
            idx = allot_tenants_find(t, c->path);
            if (idx < 0)
                idx = allot_tenants_add(t, c->path, err, errlen);
            if (idx < 0)
                return idx;
            x = allot_tenants_get(t, idx);
            x->weight = c->weight;
            x->isolation = c->isolation;
            for (int res = 0; res < ALLOT_RES_MODEL0 + cat->n_models; res++) {
                struct allot_quota q = {ALLOT_UNLIMITED, ALLOT_UNLIMITED, ALLOT_UNLIMITED};

                if (c->has_quota[res])
                    q = c->quota[res];
                if (allot_tenants_set_quota(t, idx, res, q) < 0) {
                    allot_fmt(err, errlen, "tenant %s: quota rejected by the core", c->path);
                    return ALLOT_EINVAL;
                }
            }
        }
    allot_tenants_fill_nominal(t);
    return 0;
}
