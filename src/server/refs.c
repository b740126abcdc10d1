/*
 * The names a job submission refers to (its tenant, which must be a leaf,
 * and its priority class), checked against a cache instead of reading the
 * tenant and class tables for every submission: with 1,000 tenants that
 * read was the larger part of a submission. The cache is rebuilt from the
 * store on the first check after refs_changed(), which every write of the
 * tenant tree or of a class calls once it has committed.
 */
#include "refs.h"

#include "allot/common.h"

#include <stdlib.h>
#include <string.h>

struct refs {
    uint64_t gen;   /* refs_gen it was built at (0 = never) */
    char **tenants; /* sorted paths */
    bool *leaf;     /* per path: no tenant below it */
    size_t n;
    char **classes; /* sorted names */
    size_t n_classes;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void refs_clear(struct refs *r)
{
    for (size_t i = 0; r->tenants && i < r->n; i++)
        allot_free(r->tenants[i]);
    for (size_t i = 0; r->classes && i < r->n_classes; i++)
        allot_free(r->classes[i]);
    allot_free(r->tenants);
    allot_free(r->leaf);
    allot_free(r->classes);
    memset(r, 0, sizeof(*r));
}

void refs_free(struct server *s)
{
    if (s->refs) {
        refs_clear(s->refs);
        allot_free(s->refs);
        s->refs = NULL;
    }
}

void refs_changed(struct server *s)
{
    atomic_fetch_add(&s->refs_gen, 1);
}

/* Reads both tables into a fresh cache. */
static int refs_load(struct allot_store *st, struct refs *r, uint64_t gen)
{
    struct allot_store_tenant *t = NULL;
    struct allot_store_prio_class *p = NULL;
    size_t nt = 0, np = 0;
    int rc = allot_store_tenant_list(st, &t, &nt);

    if (rc == 0)
        rc = allot_store_prio_list(st, &p, &np);
    if (rc == 0) {
        r->tenants = allot_calloc(nt ? nt : 1, sizeof(*r->tenants));
        r->leaf = allot_calloc(nt ? nt : 1, sizeof(*r->leaf));
        r->classes = allot_calloc(np ? np : 1, sizeof(*r->classes));
        rc = r->tenants && r->leaf && r->classes ? 0 : ALLOT_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < nt; i++, r->n++)
        if (!(r->tenants[i] = allot_strdup(t[i].path)))
            rc = ALLOT_ENOMEM;
    for (size_t i = 0; rc == 0 && i < np; i++, r->n_classes++)
        if (!(r->classes[i] = allot_strdup(p[i].name)))
            rc = ALLOT_ENOMEM;
    allot_store_tenants_free(t, nt);
    allot_store_prios_free(p, np);
    if (rc) {
        refs_clear(r);
        return rc;
    }
    qsort(r->tenants, r->n, sizeof(*r->tenants), cmp_str);
    qsort(r->classes, r->n_classes, sizeof(*r->classes), cmp_str);
    /* a tenant has children when the first path not below "PATH/" starts
     * with it ("a-b" sorts between "a" and "a/b") */
    for (size_t i = 0; i < r->n; i++) {
        size_t len = strlen(r->tenants[i]), lo = i + 1, hi = r->n;

        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = strncmp(r->tenants[mid], r->tenants[i], len);
            if (c < 0 || (c == 0 && (unsigned char)r->tenants[mid][len] < '/'))
                lo = mid + 1;
            else
                hi = mid;
        }
        r->leaf[i] = !(lo < r->n && !strncmp(r->tenants[lo], r->tenants[i], len) &&
                       r->tenants[lo][len] == '/');
    }
    r->gen = gen;
    return 0;
}

static long find(char *const *v, size_t n, const char *key)
{
    char *const *hit = bsearch(&key, v, n, sizeof(*v), cmp_str);

    return hit ? hit - v : -1;
}

/* Locks the cache, current: returns 0 or a negative ALLOT_E* (locked
 * either way; the caller unlocks). */
static int refs_lock(struct server *s, struct allot_store *st)
{
    uint64_t gen = atomic_load(&s->refs_gen) + 1; /* 0 is "never built" */
    int rc = 0;

    pthread_mutex_lock(&s->refs_lock);
    if (!s->refs && !(s->refs = allot_calloc(1, sizeof(*s->refs))))
        rc = ALLOT_ENOMEM;
    if (rc == 0 && s->refs->gen != gen) {
        refs_clear(s->refs);
        rc = refs_load(st, s->refs, gen);
    }
    return rc;
}

int refs_tenant_known(struct server *s, struct allot_store *st, const char *tenant)
{
    int rc = refs_lock(s, st);

    if (rc == 0) {
        size_t len = strlen(tenant);

        rc = find(s->refs->tenants, s->refs->n, tenant) >= 0;
        /* an organisation only its teams' paths name (not stored on its own) */
        for (size_t i = 0; !rc && i < s->refs->n; i++)
            rc = !strncmp(s->refs->tenants[i], tenant, len) && s->refs->tenants[i][len] == '/';
    }
    pthread_mutex_unlock(&s->refs_lock);
    return rc;
}

int refs_check(struct server *s, struct allot_store *st, const char *tenant, const char *prio,
               char *err, size_t errlen)
{
    int rc = refs_lock(s, st);
    long i;

    if (rc == 0) {
        i = find(s->refs->tenants, s->refs->n, tenant);
        if (i < 0)
            rc = (allot_fmt(err, errlen, "field \"tenant\": unknown tenant \"%s\"", tenant), 422);
        else if (!s->refs->leaf[i])
            rc = (allot_fmt(err, errlen,
                            "field \"tenant\": \"%s\" has sub-tenants; jobs run in leaves", tenant),
                  422);
        else if (prio && find(s->refs->classes, s->refs->n_classes, prio) < 0)
            rc = (allot_fmt(err, errlen, "field \"priority\": unknown priority class \"%s\"", prio),
                  422);
    }
    pthread_mutex_unlock(&s->refs_lock);
    return rc;
}
