/*
 * Tenant tree, quota arithmetic and fair share (see tenant.h and
 * docs/tenancy.md). Tenants live in one array; children are linked through
 * first_child/next_sibling (in the order they came); an index finds a
 * tenant by its path in O(1), for trees of thousands of tenants.
 *
 * What a subtree withholds (keep(), the admission rule's W) is cached per
 * tenant and resource: charging a job changes it only on the job's path,
 * so a charge invalidates those entries; anything else that may change it
 * (time and the lending hold, quotas, the tree) bumps a generation that
 * invalidates every entry. An admission test is then O(depth).
 */
#include "allot/tenant.h"

#include "allot/common.h"

#include <math.h>
#include <string.h>

struct allot_tenants {
    const struct allot_catalog *cat; /* borrowed */
    struct allot_tenant *v;          /* owned */
    int n;
    size_t cap;
    double hold_half_life_s; /* lending hold, 0 = off */
    struct keep_memo *memo;  /* owned: per tenant x ALLOT_RES_MAX, cached keep() */
    size_t memo_cap;
    uint64_t gen;                 /* memo entries of another generation are stale; >= 1 */
    uint64_t charges;             /* allot_tenants_charge calls (allot_tenants_changes) */
    uint64_t quotas;              /* changes of the tree or a quota (allot_tenants_quota_gen) */
    struct allot_resvec capacity; /* the cluster's, as allot_tenants_advance last heard */
    struct allot_index paths;     /* path -> index */
};

/* keep() of one tenant and resource, and the sum over its children. */
struct keep_memo {
    int64_t keep, kids;
    uint64_t gen;
};

static void quota_default(struct allot_tenant *t)
{
    for (int k = 0; k < ALLOT_RES_MAX; k++) {
        t->quota[k].nominal = ALLOT_UNLIMITED;
        t->quota[k].borrow_limit = ALLOT_UNLIMITED;
        t->quota[k].lend_limit = ALLOT_UNLIMITED;
    }
}

static const char *tenant_path(const void *t, int i)
{
    return ((const struct allot_tenants *)t)->v[i].path;
}

/* Appends a tenant named `name` (n bytes) under `parent`; returns its index. */
static int tenant_append(struct allot_tenants *t, const char *name, size_t n, int parent)
{
    struct allot_tenant *x;
    size_t plen = parent >= 0 ? strlen(t->v[parent].path) : 0;
    char *nm, *path;

    size_t mold = t->memo_cap;

    if (allot_grow((void **)&t->v, &t->cap, (size_t)t->n + 1, sizeof(*t->v)) ||
        allot_grow((void **)&t->memo, &t->memo_cap, ((size_t)t->n + 1) * ALLOT_RES_MAX,
                   sizeof(*t->memo)) ||
        allot_index_reserve(&t->paths, (size_t)t->n + 1, tenant_path, t))
        return ALLOT_ENOMEM;
    memset(t->memo + mold, 0, (t->memo_cap - mold) * sizeof(*t->memo));
    nm = allot_malloc(n + 1);
    path = allot_malloc(plen + n + 2);
    if (!nm || !path) {
        allot_free(nm);
        allot_free(path);
        return ALLOT_ENOMEM;
    }
    memcpy(nm, name, n);
    nm[n] = '\0';
    if (plen) {
        memcpy(path, t->v[parent].path, plen);
        path[plen] = '/';
        memcpy(path + plen + 1, name, n);
        path[plen + 1 + n] = '\0';
    } else {
        memcpy(path, name, n);
        path[n] = '\0';
    }
    x = &t->v[t->n];
    memset(x, 0, sizeof(*x));
    x->name = nm;
    x->path = path;
    x->parent = parent;
    x->depth = parent >= 0 ? t->v[parent].depth + 1 : 0;
    x->first_child = -1;
    x->next_sibling = -1;
    x->weight = 1.0;
    quota_default(x);
    if (parent >= 0) {
        /* keep children in insertion order */
        int *link = &t->v[parent].first_child;
        while (*link >= 0)
            link = &t->v[*link].next_sibling;
        *link = t->n;
    }
    ALLOT_ALWAYS(allot_index_add(&t->paths, t->n, tenant_path, t) == 0); /* room reserved */
    return t->n++;
}

struct allot_tenants *allot_tenants_new(const struct allot_catalog *cat)
{
    struct allot_tenants *t = allot_calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    t->cat = cat;
    t->gen = 1;
    if (tenant_append(t, "", 0, -1) < 0) {
        allot_tenants_free(t); /* the array may have grown */
        return NULL;
    }
    return t;
}

void allot_tenants_free(struct allot_tenants *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++) {
        allot_free(t->v[i].name);
        allot_free(t->v[i].path);
    }
    allot_free(t->v);
    allot_free(t->memo);
    allot_index_free(&t->paths);
    allot_free(t);
}

int allot_tenants_find(const struct allot_tenants *t, const char *path)
{
    return allot_index_find(&t->paths, path, tenant_path, t);
}

/* Removes the tenants appended after the first n (newest first), so that
 * a failed allot_tenants_add leaves the tree as it was. */
static void tenants_truncate(struct allot_tenants *t, int n)
{
    while (t->n > n) {
        struct allot_tenant *x = &t->v[t->n - 1];
        int *link = &t->v[x->parent].first_child;
        /* the newest tenant is the last child of its parent */
        while (*link >= 0 && *link != t->n - 1)
            link = &t->v[*link].next_sibling;
        if (!ALLOT_NEVER(*link < 0))
            *link = -1;
        allot_index_remove(&t->paths, t->n - 1, tenant_path, t);
        allot_free(x->name);
        allot_free(x->path);
        t->n--;
    }
}

int allot_tenants_add(struct allot_tenants *t, const char *path, char *err, size_t errlen)
{
    const char *p = path;
    int cur = 0, n0 = t->n;
    bool created = false;

    if (!*path) {
        allot_fmt(err, errlen, "tenant path is empty");
        return ALLOT_EINVAL;
    }
    for (const char *q = path; *q; q++) {
        unsigned char ch = (unsigned char)*q;
        if (!(ch == '/' || ch == '-' || ch == '_' || ch == '.' || (ch >= '0' && ch <= '9') ||
              (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) {
            allot_fmt(err, errlen, "tenant \"%s\": character '%c' not allowed", path, *q);
            return ALLOT_EINVAL;
        }
    }
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        int c;
        if (n == 0) {
            tenants_truncate(t, n0);
            allot_fmt(err, errlen, "tenant \"%s\": empty path element", path);
            return ALLOT_EINVAL;
        }
        /* the child of cur named p[0..n): the path up to it */
        c = allot_index_find_n(&t->paths, path, (size_t)(p + n - path), tenant_path, t);
        if (c < 0) {
            c = tenant_append(t, p, n, cur);
            if (c < 0) {
                /* ancestors created on the way go too: nothing changed */
                tenants_truncate(t, n0);
                allot_fmt(err, errlen, "tenant \"%s\": out of memory", path);
                return c;
            }
            created = true;
        }
        cur = c;
        p += n;
        if (*p == '/') {
            p++;
            if (!*p) {
                tenants_truncate(t, n0);
                allot_fmt(err, errlen, "tenant \"%s\": empty path element", path);
                return ALLOT_EINVAL;
            }
        }
    }
    if (!created) {
        allot_fmt(err, errlen, "tenant \"%s\" already exists", path);
        return ALLOT_EEXIST;
    }
    t->gen++;
    t->quotas++;
    return cur;
}

int allot_tenants_count(const struct allot_tenants *t)
{
    return t->n;
}

struct allot_tenant *allot_tenants_get(const struct allot_tenants *t, int i)
{
    return i >= 0 && i < t->n ? &t->v[i] : NULL;
}

int allot_tenants_set_quota(struct allot_tenants *t, int i, int res, struct allot_quota q)
{
    if (i < 0 || i >= t->n || res < 0 || res >= ALLOT_RES_MAX || q.nominal < 0 ||
        q.borrow_limit < 0 || q.lend_limit < 0)
        return ALLOT_EINVAL;
    if (res >= ALLOT_RES_MODEL0 && res - ALLOT_RES_MODEL0 >= t->cat->n_models)
        return ALLOT_EINVAL;
    t->v[i].quota[res] = q;
    t->gen++;
    t->quotas++;
    return 0;
}

/* Sum of children's nominal on res, or UNLIMITED if any is unlimited, if
 * the sum reaches UNLIMITED, or if there are no children. */
static int64_t fill_one(struct allot_tenants *t, int i, int res)
{
    struct allot_tenant *x = &t->v[i];
    int64_t sum = 0;
    bool unlimited = x->first_child < 0;

    for (int c = x->first_child; c >= 0; c = t->v[c].next_sibling) {
        int64_t v = fill_one(t, c, res);
        if (v >= ALLOT_UNLIMITED - sum) /* nominals are >= 0 (set_quota) */
            unlimited = true;
        else if (!unlimited)
            sum += v;
    }
    if (x->first_child >= 0 && x->quota[res].nominal == ALLOT_UNLIMITED && !unlimited)
        x->quota[res].nominal = sum;
    return x->quota[res].nominal;
}

void allot_tenants_fill_nominal(struct allot_tenants *t)
{
    for (int k = 0; k < ALLOT_RES_MAX; k++)
        fill_one(t, 0, k);
    t->gen++;
    t->quotas++;
}

uint64_t allot_tenants_quota_gen(const struct allot_tenants *t)
{
    return t->quotas;
}

/* Unused nominal of c that it does not lend: max(0, N - L - U), and with
 * the lending hold also its unused nominal up to its recent peak. */
static int64_t reserved(const struct allot_tenants *t, const struct allot_tenant *c, int k)
{
    const struct allot_quota *q = &c->quota[k];
    int64_t r = 0;

    if (q->nominal == ALLOT_UNLIMITED)
        return 0;
    if (q->lend_limit < q->nominal)
        r = q->nominal - q->lend_limit - c->usage[k];
    if (t->hold_half_life_s > 0) {
        double peak = c->peak[k] < (double)q->nominal ? c->peak[k] : (double)q->nominal;
        int64_t h = (int64_t)peak - c->usage[k];
        if (h > r)
            r = h;
    }
    return r > 0 ? r : 0;
}

void allot_tenants_set_hold(struct allot_tenants *t, double half_life_s)
{
    t->hold_half_life_s = half_life_s > 0 ? half_life_s : 0;
    t->gen++;
}

/* a + b for amounts a, b >= 0, capped at INT64_MAX: sums over thousands
 * of tenants with huge quotas must not overflow (found by fuzz_tenants). */
static int64_t sat_add(int64_t a, int64_t b)
{
    return b > INT64_MAX - a ? INT64_MAX : a + b;
}

/* What subtree i withholds from tenants outside it: its own reservation or
 * its children's together, whichever is larger. */
static int64_t keep(const struct allot_tenants *t, int i, int k)
{
    struct keep_memo *m = &t->memo[(size_t)i * ALLOT_RES_MAX + (size_t)k];
    int64_t sum = 0, own;

    if (m->gen == t->gen)
        return m->keep;
    own = reserved(t, &t->v[i], k);
    for (int c = t->v[i].first_child; c >= 0; c = t->v[c].next_sibling)
        sum = sat_add(sum, keep(t, c, k));
    m->kids = sum;
    m->keep = own > sum ? own : sum;
    m->gen = t->gen;
    return m->keep;
}

/* What the children of i other than `except` withhold together. */
static int64_t keep_others(const struct allot_tenants *t, int i, int except, int k)
{
    (void)keep(t, i, k); /* makes the children's sum current */
    return t->memo[(size_t)i * ALLOT_RES_MAX + (size_t)k].kids -
           (except >= 0 ? keep(t, except, k) : 0);
}

bool allot_tenants_admits(const struct allot_tenants *t, int i, const struct allot_resvec *r,
                          bool borrow, int *why_tenant, int *why_res)
{
    for (int k = 0; k < ALLOT_RES_MAX; k++) {
        int64_t withheld = 0;
        int below = -1;
        if (r->v[k] <= 0)
            continue;
        for (int a = i; a >= 0; below = a, a = t->v[a].parent) {
            const struct allot_tenant *x = &t->v[a];
            const struct allot_quota *q = &x->quota[k];
            int64_t limit;
            withheld = sat_add(withheld, keep_others(t, a, below, k));
            limit = q->nominal;
            /* a root without a quota (a tenant without one of its own made
             * the sum unlimited) is still bounded by the cluster: what
             * others keep unlent counts against that, or no lend limit
             * nor lending hold would hold anywhere */
            if (limit == ALLOT_UNLIMITED && a == 0 && t->capacity.v[k] > 0)
                limit = t->capacity.v[k];
            if (limit == ALLOT_UNLIMITED)
                continue;
            if (borrow && x->parent >= 0) {
                if (q->borrow_limit == ALLOT_UNLIMITED)
                    continue; /* may borrow without bound: the levels above decide */
                limit = sat_add(limit, q->borrow_limit);
            }
            if (sat_add(sat_add(x->usage[k], r->v[k]), withheld) > limit) {
                if (why_tenant)
                    *why_tenant = a;
                if (why_res)
                    *why_res = k;
                return false;
            }
        }
    }
    return true;
}

bool allot_tenants_ever_admits(const struct allot_tenants *t, int i, const struct allot_resvec *r,
                               bool borrow, int *why_tenant, int *why_res)
{
    for (int k = 0; k < ALLOT_RES_MAX; k++) {
        if (r->v[k] <= 0)
            continue;
        for (int a = i; a >= 0; a = t->v[a].parent) {
            const struct allot_quota *q = &t->v[a].quota[k];
            int64_t limit = q->nominal;
            if (limit == ALLOT_UNLIMITED && a == 0 && t->capacity.v[k] > 0)
                limit = t->capacity.v[k];
            if (limit == ALLOT_UNLIMITED)
                continue;
            if (borrow && t->v[a].parent >= 0) {
                if (q->borrow_limit == ALLOT_UNLIMITED)
                    continue;
                limit = sat_add(limit, q->borrow_limit);
            }
            if (r->v[k] > limit) {
                if (why_tenant)
                    *why_tenant = a;
                if (why_res)
                    *why_res = k;
                return false;
            }
        }
    }
    return true;
}

int64_t allot_tenants_withheld(const struct allot_tenants *t, int i, int a, int k)
{
    int64_t withheld = 0;
    int below = -1;

    /* the sum allot_tenants_admits builds on its way up */
    for (int x = i; x >= 0; below = x, x = t->v[x].parent) {
        withheld = sat_add(withheld, keep_others(t, x, below, k));
        if (x == a)
            return withheld;
    }
    return 0;
}

bool allot_tenants_in_nominal(const struct allot_tenants *t, int i, const struct allot_resvec *r)
{
    const struct allot_tenant *x = &t->v[i];

    for (int k = 0; k < ALLOT_RES_MAX; k++)
        if (r->v[k] > 0 && x->quota[k].nominal != ALLOT_UNLIMITED &&
            x->usage[k] + r->v[k] > x->quota[k].nominal)
            return false;
    return true;
}

void allot_tenants_charge(struct allot_tenants *t, int i, const struct allot_resvec *r, int sign)
{
    int ks[ALLOT_RES_MAX], n = 0;

    /* a resource r does not use keeps its usage, peak and memo (a job uses
     * a few of the ALLOT_RES_MAX, one GPU model of 64): found once, not
     * once per level */
    for (int k = 0; k < ALLOT_RES_MAX; k++)
        if (r->v[k] != 0)
            ks[n++] = k;
    t->charges++;
    for (int a = i; a >= 0; a = t->v[a].parent)
        for (int m = 0; m < n; m++) {
            int k = ks[m]; /* cppcheck-suppress uninitvar ; ks[0..n) is set above */
            /* what a's subtree withholds may change; subtrees off the path keep theirs */
            t->memo[(size_t)a * ALLOT_RES_MAX + (size_t)k].gen = 0;
            t->v[a].usage[k] += sign * r->v[k];
            if (t->v[a].peak[k] < (double)t->v[a].usage[k])
                t->v[a].peak[k] = (double)t->v[a].usage[k];
        }
}

uint64_t allot_tenants_changes(const struct allot_tenants *t)
{
    return t->gen + t->charges; /* both only grow */
}

static double dominant(const struct allot_tenant *x, const struct allot_resvec *cap)
{
    double d = 0;

    for (int k = 0; k < ALLOT_RES_MAX; k++)
        if (cap->v[k] > 0) {
            double s = (double)x->usage[k] / (double)cap->v[k];
            if (s > d)
                d = s;
        }
    return d;
}

void allot_tenants_advance(struct allot_tenants *t, int64_t now, double half_life_s,
                           const struct allot_resvec *capacity)
{
    /* recent peaks decay, and callers may have edited tenants in between */
    t->gen++;
    if (capacity)
        t->capacity = *capacity;
    for (int i = 0; i < t->n; i++) {
        struct allot_tenant *x = &t->v[i];
        double dt = (double)(now - x->history_at);
        if (dt <= 0)
            continue;
        if (half_life_s > 0)
            x->history *= exp2(-dt / half_life_s);
        x->history += dominant(x, capacity) * dt;
        x->history_at = now;
        if (t->hold_half_life_s > 0) {
            double f = exp2(-dt / t->hold_half_life_s);
            for (int k = 0; k < ALLOT_RES_MAX; k++) {
                x->peak[k] *= f;
                if (x->peak[k] < (double)x->usage[k])
                    x->peak[k] = (double)x->usage[k];
            }
        }
    }
}

double allot_tenants_share(const struct allot_tenants *t, int i,
                           const struct allot_resvec *capacity)
{
    return dominant(&t->v[i], capacity) / t->v[i].weight;
}

double allot_tenants_fair_key(const struct allot_tenants *t, int i,
                              const struct allot_resvec *capacity)
{
    double key = 0;

    /* history in share-seconds, normalised by a day so both terms are shares */
    for (int a = i; a > 0; a = t->v[a].parent) {
        const struct allot_tenant *x = &t->v[a];
        key += (x->history / 86400.0 + dominant(x, capacity)) / x->weight;
    }
    return key;
}

const char *allot_res_name(const struct allot_tenants *t, int res, char *buf, size_t len)
{
    static const char *const fixed[] = {"GPU", "CPU", "memory", "GPU memory"};

    if (res >= 0 && res < ALLOT_RES_MODEL0)
        allot_fmt(buf, len, "%s", fixed[res]);
    else if (res >= ALLOT_RES_MODEL0 && res - ALLOT_RES_MODEL0 < t->cat->n_models)
        allot_fmt(buf, len, "%s", t->cat->models[res - ALLOT_RES_MODEL0].name);
    else
        allot_fmt(buf, len, "resource %d", res);
    return buf;
}
