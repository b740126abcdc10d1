/*
 * Node sets (cluster.h, struct allot_nodeset): the nodes a task names by
 * index (Slurm's --nodelist and --exclude). A set is sorted and without
 * repeats, so that membership is a binary search and equal sets have
 * equal contents; each distinct set is made once per cluster and kept
 * until the cluster is freed (a daemon holds one per distinct list its
 * jobs gave since it started; a few bytes per node named).
 */
#include "allot/common.h"

#include "nodeset_int.h"

#include <stdlib.h>
#include <string.h>

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

    return (x > y) - (x < y);
}

bool allot_nodeset_has(const struct allot_nodeset *s, int i)
{
    int lo = 0, hi;

    if (!s)
        return true;
    hi = s->n;
    while (lo < hi) { /* the first listed index >= i */
        int mid = lo + (hi - lo) / 2;
        if (s->idx[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < s->n && s->idx[lo] == i) != s->exclude;
}

static bool same(const struct allot_nodeset *a, const struct allot_nodeset *b)
{
    return a->hash == b->hash && a->exclude == b->exclude && a->n == b->n &&
           (a->n == 0 || memcmp(a->idx, b->idx, (size_t)a->n * sizeof(int32_t)) == 0);
}

/* The slot of a set equal to s in the index, or the empty slot where it
 * would go. */
static size_t slot_of(const struct nodesets *ns, const struct allot_nodeset *s)
{
    size_t j = (size_t)s->hash & (ns->tab_cap - 1);

    while (ns->tab[j] >= 0 && !same(ns->v[ns->tab[j]], s))
        j = (j + 1) & (ns->tab_cap - 1);
    return j;
}

/* Makes room for one more set in v and the index. 0 or ALLOT_ENOMEM
 * (nothing changed). */
static int reserve(struct nodesets *ns)
{
    size_t cap = ns->tab_cap;
    int32_t *old = ns->tab;

    if (allot_grow((void **)&ns->v, &ns->cap, ns->n + 1, sizeof(struct allot_nodeset *)))
        return ALLOT_ENOMEM;
    if ((ns->n + 1) * 2 <= ns->tab_cap)
        return 0;
    cap = cap ? cap * 2 : 16;
    if (!(ns->tab = allot_malloc(cap * sizeof(*ns->tab)))) {
        ns->tab = old;
        return ALLOT_ENOMEM;
    }
    ns->tab_cap = cap;
    for (size_t j = 0; j < cap; j++)
        ns->tab[j] = -1;
    for (size_t i = 0; i < ns->n; i++)
        ns->tab[slot_of(ns, ns->v[i])] = (int32_t)i;
    allot_free(old);
    return 0;
}

const struct allot_nodeset *nodesets_intern(struct nodesets *ns, int n_nodes, bool exclude,
                                            const int32_t *idx, int n, int *rc)
{
    struct allot_nodeset *s;
    int32_t *v;
    int k = 0;
    size_t j;

    *rc = 0;
    for (int i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= n_nodes)
            *rc = ALLOT_EINVAL;
    if (n < 0 || *rc) {
        *rc = ALLOT_EINVAL;
        return NULL;
    }
    if (exclude && n == 0)
        return NULL; /* all nodes: no restriction */
    /* the set and its indices in one block, freed together */
    if (reserve(ns) || !(s = allot_malloc(sizeof(*s) + (size_t)n * sizeof(int32_t)))) {
        *rc = ALLOT_ENOMEM;
        return NULL;
    }
    v = (int32_t *)(s + 1);
    if (n)
        memcpy(v, idx, (size_t)n * sizeof(int32_t));
    qsort(v, (size_t)n, sizeof(int32_t), cmp_i32);
    for (int i = 0; i < n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    *s = (struct allot_nodeset){.exclude = exclude, .n = k, .idx = v};
    s->hash = allot_hash_mix(ALLOT_FNV1A_INIT, exclude);
    for (int i = 0; i < k; i++)
        s->hash = allot_hash_mix(s->hash, (uint64_t)v[i]);
    j = slot_of(ns, s);
    if (ns->tab[j] >= 0) { /* made before: that one */
        allot_free(s);
        return ns->v[ns->tab[j]];
    }
    ns->tab[j] = (int32_t)ns->n;
    ns->v[ns->n++] = s;
    return s;
}

void nodesets_free(struct nodesets *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        allot_free(ns->v[i]);
    allot_free(ns->v);
    allot_free(ns->tab);
    memset(ns, 0, sizeof(*ns));
}
