/*
 * Cluster model: nodes, GPUs, task validation, applying and releasing
 * placements, and the index of identical node states (see cluster.h).
 *
 * State classes live in an array; a hash table maps a state signature to
 * its class. Empty classes are recycled through a free list. Each class
 * keeps its members in a min-heap by rank so the representative (lowest
 * rank) is found in O(1) and a node moves between classes in O(log n).
 */
#include "allot/cluster.h"

#include "allot/common.h"

#include "nodeset_int.h"

#include <stdlib.h>
#include <string.h>

struct allot_cluster {
    const struct allot_catalog *cat; /* borrowed */
    unsigned class_flags;
    uint64_t label_sets; /* label_set ids given so far */
    int n_nodes;
    size_t nodes_cap;
    struct allot_node *nodes; /* owned */
    /* where each node sits in the state-class index, parallel to nodes
     * (kept out of struct allot_node: callers never see index bookkeeping) */
    struct node_slot {
        int32_t cls;      /* state class id, -1 when not schedulable */
        int32_t heap_pos; /* position in the class's member heap */
    } * slot;             /* owned, nodes_cap entries */
    size_t slot_cap;
    /* name -> node index (open addressing, size power of two) */
    struct allot_index names; /* node name -> index */
    /* classes */
    struct allot_class *classes; /* owned */
    struct allot_class_hot *hot; /* owned, parallel to classes */
    size_t hot_cap;
    uint32_t births;     /* class creation serial */
    uint64_t grow_epoch; /* bumped whenever free capacity may grow */
    uint64_t changes;    /* bumped whenever a node or its state changes */
    uint64_t resized;    /* bumped whenever a node is added or changes size */
    int64_t used_milli;  /* GPU milli in use over all nodes (node_commit keeps it) */
    size_t n_classes;
    size_t classes_cap;
    int32_t *free_classes; /* recycled class ids */
    size_t n_free, free_cap;
    struct {
        int32_t *ids; /* owned: live class ids, a max-heap by cap_key */
        size_t n, cap;
    } buckets[ALLOT_BUCKETS];
    uint64_t bucket_bits[ALLOT_BUCKET_WORDS]; /* bit b: bucket b holds a class */
    int32_t *live;                            /* ids of non-empty classes */
    size_t n_live, live_cap;
    int32_t *sig_tab; /* signature -> class id, -1 empty, -2 deleted */
    size_t sig_cap;
    size_t sig_used;      /* slots not empty (live + deleted) */
    struct nodesets sets; /* the node sets made (allot_cluster_nodeset) */
};

/* ---- helpers ------------------------------------------------------------ */

static uint64_t gpu_key(const struct allot_gpu *g)
{
    uint64_t k = (uint64_t)g->mode << 62;

    k |= (uint64_t)(g->free_milli & 0x7ff) << 51;
    k |= (uint64_t)g->mig.used_mask << 43;
    k |= (uint64_t)(g->mig.compute_used & 0xf) << 39;
    /* the NVLink island, so nodes that differ in where their free GPUs sit
     * are not mixed up (multi-GPU tasks prefer one island) */
    k |= (uint64_t)(g->island & 0xf) << 35;
    k |= (uint64_t)g->free_mem_mib & ((1ULL << 35) - 1);
    return k;
}

static uint64_t gpu_mig_key(const struct allot_gpu *g)
{
    uint64_t h = 0;

    /* instance profiles as a multiset (order-free sum of mixes) */
    for (int i = 0; i < g->mig.n_instances; i++)
        h += allot_hash_mix(0x51ed, ((uint64_t)g->mig.inst[i].profile << 8) | g->mig.inst[i].start);
    return h;
}

/* Sorts the few words of one node (at most ALLOT_MAX_GPUS) in place: an
 * insertion sort, which at that size costs a fraction of qsort's calls. */
static void sort_u64(uint64_t *v, int n)
{
    for (int i = 1; i < n; i++) {
        uint64_t x = v[i];
        int j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Canonical state key of a node: fills key[] and returns its length. */
#define KEY_MAX (10 + 3 * ALLOT_MAX_GPUS)
static int node_key(const struct allot_cluster *c, const struct allot_node *n, uint64_t *key)
{
    int k = 0;
    uint64_t gk[ALLOT_MAX_GPUS * 2] = {0};

    /* a labelled node: bit 63 of the first word, then its label set, so
     * the keys of unlabelled nodes stay as they were and no two label sets
     * share a key */
    key[k++] =
        (uint64_t)(n->model + 1) | ((uint64_t)n->n_gpus << 32) | (n->label_set ? 1ULL << 63 : 0);
    if (n->label_set)
        key[k++] = n->label_set;
    key[k++] = (uint64_t)n->cpu_free;
    key[k++] = (uint64_t)n->mem_free;
    if (n->rdma_vfs > 0) /* only nodes with VFs: the keys of all others stay as they were */
        key[k++] = (uint64_t)n->rdma_free | 1ULL << 63;
    /* isolation: who holds the node exclusively, and whether it is empty */
    key[k++] = (uint64_t)(uint32_t)n->excl_tenant << 1 | (n->n_tasks > 0);
    if (c->class_flags & ALLOT_CLASS_POD_CLASSES) {
        uint64_t mask = 0;
        for (int i = 0; i < ALLOT_POD_CLASSES; i++)
            if (n->pod_classes[i])
                mask |= 1ULL << i;
        key[k++] = mask;
    }
    for (int i = 0; i < n->n_gpus; i++) {
        gk[i] = gpu_key(&n->gpus[i]);
    }
    sort_u64(gk, n->n_gpus);
    for (int i = 0; i < n->n_gpus; i++)
        key[k++] = gk[i];
    /* MIG instance multisets, sorted, so equal classes have equal layouts */
    {
        uint64_t mk[ALLOT_MAX_GPUS] = {0};
        int m = 0;
        for (int i = 0; i < n->n_gpus; i++)
            if (n->gpus[i].mode == ALLOT_GPU_MIG)
                mk[m++] = gpu_mig_key(&n->gpus[i]) ^ gpu_key(&n->gpus[i]);
        sort_u64(mk, m);
        for (int i = 0; i < m; i++)
            key[k++] = mk[i];
        /* GPUs held by an exclusive-gpu tenant, as (state, tenant) words */
        m = 0;
        for (int i = 0; i < n->n_gpus; i++)
            if (n->gpus[i].excl_tenant)
                mk[m++] = allot_hash_mix(gpu_key(&n->gpus[i]), (uint64_t)n->gpus[i].excl_tenant);
        sort_u64(mk, m);
        for (int i = 0; i < m; i++)
            key[k++] = mk[i];
    }
    return k;
}

static uint64_t key_hash(const uint64_t *key, int n)
{
    uint64_t h = 0x2545f4914f6cdd1dULL;

    for (int i = 0; i < n; i++)
        h = allot_hash_mix(h, key[i]);
    return h;
}

/* ---- class heap ------------------------------------------------------------ */

static void heap_swap(struct allot_cluster *c, struct allot_class *k, int32_t i, int32_t j)
{
    int32_t a = k->heap[i], b = k->heap[j];

    k->heap[i] = b;
    k->heap[j] = a;
    c->slot[b].heap_pos = i;
    c->slot[a].heap_pos = j;
}

static void heap_up(struct allot_cluster *c, struct allot_class *k, int32_t i)
{
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (c->nodes[k->heap[p]].rank <= c->nodes[k->heap[i]].rank)
            break;
        heap_swap(c, k, i, p);
        i = p;
    }
}

static void heap_down(struct allot_cluster *c, struct allot_class *k, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < k->n_members && c->nodes[k->heap[l]].rank < c->nodes[k->heap[m]].rank)
            m = l;
        if (r < k->n_members && c->nodes[k->heap[r]].rank < c->nodes[k->heap[m]].rank)
            m = r;
        if (m == i)
            return;
        heap_swap(c, k, i, m);
        i = m;
    }
}

/* ---- labels ---------------------------------------------------------------- */

/* True when s is well-formed UTF-8 (no overlong forms, surrogates or code
 * points above U+10FFFF). Text parsed by jansson always is; callers with
 * labels from elsewhere (a cluster description built in code, the
 * command line) are not. */
static bool utf8_valid(const unsigned char *s)
{
    while (*s) {
        unsigned char c = *s;
        uint32_t cp;
        int n;

        if (c < 0x80) {
            s++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            n = 1, cp = c & 0x1fu;
        else if (c >= 0xe0 && c <= 0xef)
            n = 2, cp = c & 0x0fu;
        else if (c >= 0xf0 && c <= 0xf4)
            n = 3, cp = c & 0x07u;
        else
            return false;
        for (int k = 1; k <= n; k++) {
            if ((s[k] & 0xc0) != 0x80)
                return false; /* also stops at the terminating NUL */
            cp = (cp << 6) | (s[k] & 0x3fu);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        s += n + 1;
    }
    return true;
}

const char *allot_label_key_problem(const char *key)
{
    size_t n = strlen(key);

    if (n == 0)
        return "is empty";
    if (n > ALLOT_LABEL_KEY_MAX)
        return "is too long";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '=')
            return "contains a space, '=', a control character or a non-ASCII character";
    }
    return NULL;
}

const char *allot_label_value_problem(const char *value)
{
    size_t n = strlen(value);

    if (n > ALLOT_LABEL_VALUE_MAX)
        return "is too long";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)value[i];
        /* C0, DEL, and C1 (U+0080..U+009F: 0xC2 0x80..0x9F in UTF-8) */
        if (ch < 0x20 || ch == 0x7f ||
            (ch == 0xc2 && i + 1 < n && (unsigned char)value[i + 1] >= 0x80 &&
             (unsigned char)value[i + 1] <= 0x9f))
            return "contains a control character";
    }
    if (!utf8_valid((const unsigned char *)value))
        return "is not valid UTF-8";
    return NULL;
}

uint64_t allot_label_hash(const char *key, const char *value)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over KEY NUL VALUE */

    for (const unsigned char *p = (const unsigned char *)key;; p++) {
        h = (h ^ *p) * 0x100000001b3ULL;
        if (!*p)
            break;
    }
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return allot_hash_mix(h, 0x6c6162656cULL) | 1; /* never 0: 0 marks an unused word */
}

int allot_labels_parse(char *s, struct allot_label *out, int max, char *err, size_t errlen)
{
    int n = 0;

    for (char *item = s, *next; item; item = next) {
        const char *problem;
        char *eq;

        next = strchr(item, ',');
        if (next)
            *next++ = '\0';
        eq = strchr(item, '=');
        if (eq)
            *eq = '\0';
        if ((problem = allot_label_key_problem(item))) {
            allot_fmt(err, errlen, "label key \"%.80s\" %s", item, problem);
            return -1;
        }
        if ((problem = allot_label_value_problem(eq ? eq + 1 : ""))) {
            allot_fmt(err, errlen, "value of label \"%s\" %s", item, problem);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (!strcmp(out[i].key, item)) {
                allot_fmt(err, errlen, "label \"%s\" given twice", item);
                return -1;
            }
        if (n == max) {
            allot_fmt(err, errlen, "more than %d labels", max);
            return -1;
        }
        out[n++] = (struct allot_label){.key = item, .value = eq ? eq + 1 : item + strlen(item)};
    }
    return n;
}

/* ---- signature table -------------------------------------------------------- */

static int sig_rehash(struct allot_cluster *c, size_t ncap)
{
    int32_t *t = allot_malloc(ncap * sizeof(*t));

    if (!t)
        return ALLOT_ENOMEM;
    for (size_t i = 0; i < ncap; i++)
        t[i] = -1;
    for (size_t i = 0; i < c->n_live; i++) {
        int32_t id = c->live[i];
        size_t h = (size_t)c->classes[id].sig & (ncap - 1);
        while (t[h] != -1)
            h = (h + 1) & (ncap - 1);
        t[h] = id;
    }
    allot_free(c->sig_tab);
    c->sig_tab = t;
    c->sig_cap = ncap;
    c->sig_used = c->n_live;
    return 0;
}

/* Finds the live class whose state equals node n's; -1 when none. *slot
 * receives the table slot to insert at when none. */
static int32_t sig_find(const struct allot_cluster *c, uint64_t sig, const uint64_t *key, int klen,
                        size_t *slot)
{
    size_t h = (size_t)sig & (c->sig_cap - 1);
    size_t ins = SIZE_MAX;
    uint64_t rk[KEY_MAX];

    for (;;) {
        int32_t id = c->sig_tab[h];
        if (id == -1)
            break;
        if (id == -2) {
            if (ins == SIZE_MAX)
                ins = h;
        } else if (c->classes[id].sig == sig) {
            const struct allot_class *k = &c->classes[id];
            int rl = node_key(c, &c->nodes[k->heap[0]], rk);
            if (rl == klen && memcmp(rk, key, sizeof(uint64_t) * (size_t)klen) == 0)
                return id;
        }
        h = (h + 1) & (c->sig_cap - 1);
    }
    *slot = ins != SIZE_MAX ? ins : h;
    return -1;
}

static void sig_remove(struct allot_cluster *c, int32_t id)
{
    size_t h = (size_t)c->classes[id].sig & (c->sig_cap - 1);

    while (c->sig_tab[h] != id)
        h = (h + 1) & (c->sig_cap - 1);
    c->sig_tab[h] = -2;
}

/* ---- capacity buckets ------------------------------------------------------------ */

/* Free-CPU level of a bucket and the most CPU a node of that level has. */
static const int64_t cpu_level_max[ALLOT_BUCKET_CPU] = {3999, 15999, 63999, INT64_MAX};

static int cpu_level(int64_t cpu_free)
{
    int l = 0;

    while (l < ALLOT_BUCKET_CPU - 1 && cpu_free > cpu_level_max[l])
        l++;
    return l;
}

static int node_bucket(const struct allot_node *n)
{
    int mig = 0, whole = 0, part = 0;

    for (int i = 0; i < n->n_gpus; i++) {
        const struct allot_gpu *g = &n->gpus[i];
        if (g->mode == ALLOT_GPU_MIG)
            mig = 1;
        else if (g->free_milli == ALLOT_MILLI)
            whole++;
        else if (g->mode == ALLOT_GPU_SHARED && g->free_milli > part)
            part = g->free_milli;
    }
    return ((cpu_level(n->cpu_free) * 2 + mig) * (ALLOT_MAX_GPUS + 1) + whole) *
               ALLOT_BUCKET_PARTS +
           part / 100;
}

bool allot_bucket_mig(int b)
{
    return b / (ALLOT_BUCKET_PARTS * (ALLOT_MAX_GPUS + 1)) % 2;
}

bool allot_bucket_admits(int b, const struct allot_task *t)
{
    int part = b % ALLOT_BUCKET_PARTS;
    int whole = b / ALLOT_BUCKET_PARTS % (ALLOT_MAX_GPUS + 1);
    int mig = allot_bucket_mig(b);
    int cpu = b / (ALLOT_BUCKET_PARTS * (ALLOT_MAX_GPUS + 1) * 2);

    if (t->cpu_milli > cpu_level_max[cpu])
        return false;
    if (t->num_gpu == 0)
        return true;
    if (t->mig_profile >= 0)
        return mig;
    if (t->gpu_milli == ALLOT_MILLI && t->gpu_mem_mib == 0)
        return whole >= t->num_gpu;
    /* a fraction: a fully free GPU, or a partly used one that may be big enough */
    return whole >= 1 || (part + 1) * 100 > t->gpu_milli;
}

/* Free capacity of a state: CPU milli + 16 x free GPU milli (the weights of
 * the reference 128-core / 8-GPU node). */
static int64_t node_cap_key(const struct allot_node *n)
{
    int64_t g = 0;

    for (int i = 0; i < n->n_gpus; i++)
        g += n->gpus[i].free_milli;
    return n->cpu_free + 16 * g;
}

static void bheap_set(struct allot_cluster *c, int b, size_t pos, int32_t id)
{
    c->buckets[b].ids[pos] = id;
    c->classes[id].bucket_pos = (int32_t)pos;
}

static void bheap_up(struct allot_cluster *c, int b, size_t pos)
{
    int32_t id = c->buckets[b].ids[pos];

    while (pos > 0) {
        size_t parent = (pos - 1) / 2;
        int32_t pid = c->buckets[b].ids[parent];
        if (c->classes[pid].cap_key >= c->classes[id].cap_key)
            break;
        bheap_set(c, b, pos, pid);
        pos = parent;
    }
    bheap_set(c, b, pos, id);
}

static void bheap_down(struct allot_cluster *c, int b, size_t pos)
{
    size_t n = c->buckets[b].n;
    int32_t id = c->buckets[b].ids[pos];

    for (;;) {
        size_t l = 2 * pos + 1, r = l + 1, m = pos;
        int64_t best = c->classes[id].cap_key;
        if (l < n && c->classes[c->buckets[b].ids[l]].cap_key > best) {
            m = l;
            best = c->classes[c->buckets[b].ids[l]].cap_key;
        }
        if (r < n && c->classes[c->buckets[b].ids[r]].cap_key > best)
            m = r;
        if (m == pos)
            break;
        bheap_set(c, b, pos, c->buckets[b].ids[m]);
        pos = m;
    }
    bheap_set(c, b, pos, id);
}

int allot_cluster_buckets_used(const struct allot_cluster *c, int16_t *out)
{
    int n = 0;

    for (int w = 0; w < ALLOT_BUCKET_WORDS; w++)
        for (uint64_t bits = c->bucket_bits[w]; bits; bits &= bits - 1)
            out[n++] = (int16_t)(w * 64 + __builtin_ctzll(bits));
    return n;
}

int allot_cluster_bucket(const struct allot_cluster *c, int b, const int32_t **ids)
{
    *ids = c->buckets[b].ids;
    return (int)c->buckets[b].n;
}

/* ---- index maintenance -------------------------------------------------------- */

static void class_reset(struct allot_class *k)
{
    allot_free(k->heap);
    memset(k, 0, sizeof(*k));
    k->live_pos = -1;
}

/* Removes node i from its class (if any). Never fails. */
static void index_remove(struct allot_cluster *c, int i)
{
    struct allot_class *k;
    int32_t pos, id = c->slot[i].cls;

    c->changes++;
    if (id < 0)
        return;
    k = &c->classes[id];
    pos = c->slot[i].heap_pos;
    k->n_members--;
    if (pos != k->n_members) {
        heap_swap(c, k, pos, k->n_members);
        heap_down(c, k, pos);
        heap_up(c, k, pos);
    }
    c->slot[i].cls = -1;
    c->slot[i].heap_pos = -1;
    if (k->n_members > 0)
        c->hot[id].rep_rank = c->nodes[k->heap[0]].rank;
    if (k->n_members == 0) {
        int32_t lp = k->live_pos;
        int b = k->bucket;
        size_t bp = (size_t)k->bucket_pos;
        int32_t last = c->buckets[b].ids[--c->buckets[b].n];
        if (c->buckets[b].n == 0)
            c->bucket_bits[b / 64] &= ~(1ULL << (b % 64));
        if (bp < c->buckets[b].n) {
            bheap_set(c, b, bp, last);
            bheap_down(c, b, bp);
            bheap_up(c, b, (size_t)c->classes[last].bucket_pos);
        }
        sig_remove(c, id);
        c->live[lp] = c->live[c->n_live - 1];
        c->classes[c->live[lp]].live_pos = lp;
        c->n_live--;
        class_reset(k);
        c->free_classes[c->n_free++] = id;
    }
}

/* Reserves everything index_insert may need so that it cannot fail. */
static int index_reserve(struct allot_cluster *c)
{
    size_t need = c->n_classes + 1;

    if (allot_grow((void **)&c->classes, &c->classes_cap, need, sizeof(*c->classes)) ||
        allot_grow((void **)&c->hot, &c->hot_cap, need, sizeof(*c->hot)) ||
        allot_grow((void **)&c->live, &c->live_cap, need, sizeof(*c->live)) ||
        allot_grow((void **)&c->free_classes, &c->free_cap, need, sizeof(*c->free_classes)))
        return ALLOT_ENOMEM;
    if ((c->sig_used + 1) * 2 > c->sig_cap) {
        size_t ncap = c->sig_cap ? c->sig_cap : 64;
        while ((c->n_live + 1) * 4 > ncap)
            ncap *= 2;
        if (sig_rehash(c, ncap))
            return ALLOT_ENOMEM;
    }
    return 0;
}

/*
 * Moves node i into the class of state `after` (which may be the node
 * itself) and copies `after` into the node. Everything that may fail is
 * done before the node leaves its old class, so on error nothing changed.
 * A node that is not ready is only copied.
 */
/* GPU milli in use on node n. */
static int64_t node_used_milli(const struct allot_node *n)
{
    int64_t used = 0;

    for (int g = 0; g < n->n_gpus; g++)
        used += ALLOT_MILLI - n->gpus[g].free_milli;
    return used;
}

/* Node i becomes `after`: the one place a placed node's state is written. */
static void node_commit(struct allot_cluster *c, int i, const struct allot_node *after)
{
    c->used_milli += node_used_milli(after) - node_used_milli(&c->nodes[i]);
    c->nodes[i] = *after;
}

static int index_place(struct allot_cluster *c, int i, const struct allot_node *after)
{
    struct allot_node tmp = *after;
    uint64_t key[KEY_MAX];
    int klen;
    uint64_t sig;
    size_t slot = 0;
    int32_t id, *fresh = NULL;
    struct allot_class *k;

    c->changes++;
    if (tmp.state != ALLOT_NODE_READY) {
        index_remove(c, i);
        node_commit(c, i, &tmp);
        return 0;
    }
    if (index_reserve(c))
        return ALLOT_ENOMEM;
    klen = node_key(c, &tmp, key);
    sig = key_hash(key, klen);
    id = sig_find(c, sig, key, klen, &slot);
    if (id >= 0 && id == c->slot[i].cls) {
        /* same state class (e.g. a task asking for nothing) */
        node_commit(c, i, &tmp);
        return 0;
    }
    if (id >= 0) {
        k = &c->classes[id];
        if (k->n_members == k->cap) {
            size_t cap = (size_t)k->cap;
            if (allot_grow((void **)&k->heap, &cap, cap + 1, sizeof(*k->heap)))
                return ALLOT_ENOMEM;
            k->cap = (int32_t)cap;
        }
    } else {
        int b = node_bucket(&tmp);
        if (allot_grow((void **)&c->buckets[b].ids, &c->buckets[b].cap, c->buckets[b].n + 1,
                       sizeof(*c->buckets[b].ids)))
            return ALLOT_ENOMEM;
        fresh = allot_malloc(4 * sizeof(*fresh));
        if (!fresh)
            return ALLOT_ENOMEM;
    }
    /* from here on nothing fails */
    index_remove(c, i);
    if (id < 0) {
        /* removal may have turned our slot into a tombstone; both are free */
        if (c->n_free)
            id = c->free_classes[--c->n_free];
        else {
            id = (int32_t)c->n_classes++;
            memset(&c->classes[id], 0, sizeof(c->classes[id]));
        }
        k = &c->classes[id];
        k->heap = fresh;
        k->cap = 4;
        k->n_members = 0;
        k->sig = sig;
        c->hot[id].birth = ++c->births ? c->births : ++c->births;
        if (c->sig_tab[slot] == -1)
            c->sig_used++;
        c->sig_tab[slot] = id;
        k->live_pos = (int32_t)c->n_live;
        c->live[c->n_live++] = id;
        k->bucket = node_bucket(&tmp);
        k->cap_key = node_cap_key(&tmp);
        c->buckets[k->bucket].ids[c->buckets[k->bucket].n++] = id;
        c->bucket_bits[k->bucket / 64] |= 1ULL << (k->bucket % 64);
        bheap_up(c, k->bucket, c->buckets[k->bucket].n - 1);
    }
    k = &c->classes[id];
    c->slot[i].cls = id;
    c->slot[i].heap_pos = k->n_members;
    node_commit(c, i, &tmp);
    k->heap[k->n_members++] = i;
    heap_up(c, k, c->slot[i].heap_pos);
    c->hot[id].rep_rank = c->nodes[k->heap[0]].rank;
    return 0;
}

/* ---- lifecycle ------------------------------------------------------------ */

struct allot_cluster *allot_cluster_new(const struct allot_catalog *cat, unsigned class_flags)
{
    struct allot_cluster *c = allot_calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->cat = cat;
    c->class_flags = class_flags;
    return c;
}

static void labels_clear(struct allot_node *n)
{
    for (int i = 0; n->labels && i < n->n_labels; i++) {
        allot_free(n->labels[i].key);
        allot_free(n->labels[i].value);
    }
    allot_free(n->labels);
    allot_free(n->label_hash);
}

static void node_clear(struct allot_node *n)
{
    allot_free(n->name);
    labels_clear(n);
}

void allot_cluster_free(struct allot_cluster *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_nodes; i++)
        node_clear(&c->nodes[i]);
    for (size_t i = 0; i < c->n_classes; i++) {
        allot_free(c->classes[i].heap);
    }
    allot_free(c->hot);
    for (int b = 0; b < ALLOT_BUCKETS; b++)
        allot_free(c->buckets[b].ids);
    allot_free(c->nodes);
    allot_free(c->slot);
    allot_index_free(&c->names);
    allot_free(c->classes);
    allot_free(c->free_classes);
    allot_free(c->live);
    allot_free(c->sig_tab);
    nodesets_free(&c->sets);
    allot_free(c);
}

static const char *node_name(const void *c, int i)
{
    return ((const struct allot_cluster *)c)->nodes[i].name;
}

int allot_cluster_find_node(const struct allot_cluster *c, const char *name)
{
    return allot_index_find(&c->names, name, node_name, c);
}

static void gpu_init(const struct allot_gpu_model *m, struct allot_gpu *g, int mode, int island)
{
    memset(g, 0, sizeof(*g));
    g->mode = (uint8_t)mode;
    g->island = (uint8_t)island;
    g->free_milli = ALLOT_MILLI;
    g->free_mem_mib = m ? m->memory_mib : 0;
    g->mem_mib = g->free_mem_mib;
}

/* Checks what spec describes besides its name; *model gets the catalog
 * model (-1 for no GPUs). Returns 0 or an error with err. */
static int spec_check(const struct allot_cluster *c, const struct allot_node_spec *spec, int *model,
                      char *err, size_t errlen)
{
    const struct allot_gpu_model *m = NULL;

    *model = -1;
    if (spec->n_gpus < 0 || spec->n_gpus > ALLOT_MAX_GPUS) {
        allot_fmt(err, errlen, "node \"%s\": gpus %d out of range 0..%d", spec->name, spec->n_gpus,
                  ALLOT_MAX_GPUS);
        return ALLOT_ERANGE;
    }
    if (spec->cpu_milli < 0 || spec->mem_mib < 0) {
        allot_fmt(err, errlen, "node \"%s\": %s is negative", spec->name,
                  spec->cpu_milli < 0 ? "cpu_milli" : "memory_mib");
        return ALLOT_ERANGE;
    }
    if (spec->rdma_vfs < 0 || spec->rdma_vfs > ALLOT_MAX_RDMA_VFS) {
        allot_fmt(err, errlen, "node \"%s\": rdma_vfs %d out of range 0..%d", spec->name,
                  spec->rdma_vfs, ALLOT_MAX_RDMA_VFS);
        return ALLOT_ERANGE;
    }
    if (spec->n_gpus > 0) {
        *model = spec->model ? allot_catalog_find_model(c->cat, spec->model) : -1;
        if (*model < 0) {
            allot_fmt(err, errlen, "node \"%s\": unknown GPU model \"%s\"", spec->name,
                      spec->model ? spec->model : "");
            return ALLOT_EINVAL;
        }
        m = &c->cat->models[*model];
        if (spec->gpu_mode == ALLOT_GPU_MIG && !m->mig) {
            allot_fmt(err, errlen, "node \"%s\": gpu mode mig but model %s is not MIG-capable",
                      spec->name, m->name);
            return ALLOT_EINVAL;
        }
    }
    if (spec->gpu_mode < ALLOT_GPU_SHARED || spec->gpu_mode > ALLOT_GPU_MIG) {
        allot_fmt(err, errlen, "node \"%s\": gpu mode %d unknown", spec->name, spec->gpu_mode);
        return ALLOT_EINVAL;
    }
    if (spec->n_labels < 0 || (spec->n_labels > 0 && !spec->labels)) {
        allot_fmt(err, errlen, "node \"%s\": labels malformed", spec->name);
        return ALLOT_EINVAL;
    }
    return 0;
}

/* A node's labels copied from spec's (n->labels and n->n_labels). Returns
 * 0, or ALLOT_ENOMEM with what was copied so far in n. */
static int labels_copy(struct allot_node *n, const struct allot_node_spec *spec)
{
    if (spec->n_labels <= 0)
        return 0;
    n->labels = allot_calloc((size_t)spec->n_labels, sizeof(*n->labels));
    n->label_hash = allot_calloc((size_t)spec->n_labels, sizeof(*n->label_hash));
    if (!n->labels || !n->label_hash)
        return ALLOT_ENOMEM;
    for (int i = 0; i < spec->n_labels; i++) {
        n->labels[i].key = allot_strdup(spec->labels[i].key ? spec->labels[i].key : "");
        n->labels[i].value = allot_strdup(spec->labels[i].value ? spec->labels[i].value : "");
        n->n_labels = i + 1;
        if (!n->labels[i].key || !n->labels[i].value)
            return ALLOT_ENOMEM;
        n->label_hash[i] = allot_label_hash(n->labels[i].key, n->labels[i].value);
    }
    return 0;
}

/* Whether every label of a is one of b's (key and value, by their text). */
static bool labels_within(const struct allot_node *a, const struct allot_node *b)
{
    for (int i = 0; i < a->n_labels; i++) {
        int k = 0;
        while (k < b->n_labels && (b->label_hash[k] != a->label_hash[i] ||
                                   strcmp(b->labels[k].key, a->labels[i].key) != 0 ||
                                   strcmp(b->labels[k].value, a->labels[i].value) != 0))
            k++;
        if (k == b->n_labels)
            return false;
    }
    return true;
}

/* Gives node `self` (n, not yet in c->nodes or in it) the label_set of a
 * node with the same labels, or a new one: equal ids, equal label sets,
 * exactly (not by hash; 64-bit ids never run out). */
static void label_set_assign(struct allot_cluster *c, int self, struct allot_node *n)
{
    n->label_set = n->label_sum = 0;
    if (n->n_labels == 0)
        return;
    for (int i = 0; i < n->n_labels; i++)
        n->label_sum += n->label_hash[i];
    /* the sums first: one integer per node, the labels' text only for a
     * node that may have the same (20,000 nodes of distinct labels: a
     * fraction of a second in all) */
    for (int i = 0; i < c->n_nodes; i++) {
        const struct allot_node *o = &c->nodes[i];
        if (i != self && o->label_sum == n->label_sum && o->label_set &&
            o->n_labels == n->n_labels && labels_within(n, o) && labels_within(o, n)) {
            n->label_set = o->label_set;
            return;
        }
    }
    n->label_set = ++c->label_sets;
}

/* Sets n's size (model, CPU, memory, VFs, GPUs, rack) from spec, all of it
 * free: n holds no task. */
static void node_size(struct allot_node *n, const struct allot_node_spec *spec, int model,
                      const struct allot_gpu_model *m)
{
    n->model = model;
    n->cpu_milli = n->cpu_free = spec->cpu_milli;
    n->mem_mib = n->mem_free = spec->mem_mib;
    n->rdma_vfs = n->rdma_free = spec->rdma_vfs;
    n->n_gpus = spec->n_gpus;
    n->rack = spec->rack;
    memset(n->pod_classes, 0, sizeof(n->pod_classes));
    n->excl_tenant = 0;
    for (int i = 0; i < ALLOT_MAX_GPUS; i++)
        if (i < n->n_gpus)
            gpu_init(m, &n->gpus[i], spec->gpu_mode,
                     spec->island_size > 0 ? i / spec->island_size : 0);
        else
            memset(&n->gpus[i], 0, sizeof(n->gpus[i]));
}

int allot_cluster_add_node(struct allot_cluster *c, const struct allot_node_spec *spec, char *err,
                           size_t errlen)
{
    struct allot_node *n;
    const struct allot_gpu_model *m = NULL;
    int model = -1, idx, rc;

    if (!spec->name || !*spec->name) {
        allot_fmt(err, errlen, "node: name is empty");
        return ALLOT_EINVAL;
    }
    if (allot_cluster_find_node(c, spec->name) >= 0) {
        allot_fmt(err, errlen, "node \"%s\": duplicate name", spec->name);
        return ALLOT_EEXIST;
    }
    rc = spec_check(c, spec, &model, err, errlen);
    if (rc)
        return rc;
    m = model >= 0 ? &c->cat->models[model] : NULL;
    if (allot_grow((void **)&c->nodes, &c->nodes_cap, (size_t)c->n_nodes + 1, sizeof(*c->nodes)) ||
        allot_grow((void **)&c->slot, &c->slot_cap, (size_t)c->n_nodes + 1, sizeof(*c->slot)) ||
        allot_index_reserve(&c->names, (size_t)c->n_nodes + 1, node_name, c))
        goto oom;
    idx = c->n_nodes;
    n = &c->nodes[idx];
    memset(n, 0, sizeof(*n));
    c->slot[idx].cls = -1;
    c->slot[idx].heap_pos = -1;
    n->name = allot_strdup(spec->name);
    if (!n->name)
        goto oom;
    if (labels_copy(n, spec))
        goto oom_node;
    label_set_assign(c, idx, n);
    node_size(n, spec, model, m);
    n->rank = (uint32_t)idx;
    n->index = idx;
    n->state = ALLOT_NODE_READY;
    c->n_nodes++;
    c->grow_epoch++;
    c->resized++;
    rc = index_place(c, idx, n);
    if (rc) {
        c->n_nodes--;
        goto oom_node;
    }
    rc = allot_index_add(&c->names, idx, node_name, c); /* room reserved: cannot fail */
    ALLOT_ALWAYS(rc == 0);
    return idx;
oom_node:
    node_clear(n);
oom:
    allot_fmt(err, errlen, "node \"%s\": out of memory", spec->name);
    return ALLOT_ENOMEM;
}

int allot_cluster_update_node(struct allot_cluster *c, int node, const struct allot_node_spec *spec,
                              char *err, size_t errlen)
{
    struct allot_node *n, fresh = {0};
    struct allot_node_spec sp;
    int model, rc;

    if (node < 0 || node >= c->n_nodes) {
        allot_fmt(err, errlen, "node %d: no such node", node);
        return ALLOT_EINVAL;
    }
    n = &c->nodes[node];
    if (spec->name && strcmp(spec->name, n->name) != 0) {
        allot_fmt(err, errlen, "node \"%s\": the new size names \"%s\"", n->name, spec->name);
        return ALLOT_EINVAL;
    }
    /* out of the index (not ready) and empty: nothing placed refers to
     * its GPUs, and no class holds it */
    if (n->state == ALLOT_NODE_READY || n->n_tasks > 0) {
        allot_fmt(err, errlen, "node \"%s\": %s", n->name,
                  n->n_tasks > 0 ? "tasks are placed on it" : "it is ready");
        return ALLOT_ESTATE;
    }
    if (ALLOT_NEVER(c->slot[node].cls >= 0)) {
        allot_fmt(err, errlen, "node \"%s\": indexed although not ready", n->name);
        return ALLOT_EINTERNAL;
    }
    sp = *spec;
    sp.name = n->name;
    spec = &sp;
    rc = spec_check(c, spec, &model, err, errlen);
    if (rc)
        return rc;
    if (labels_copy(&fresh, spec)) {
        fresh.name = NULL;
        node_clear(&fresh);
        allot_fmt(err, errlen, "node \"%s\": out of memory", n->name);
        return ALLOT_ENOMEM;
    }
    labels_clear(n);
    n->labels = fresh.labels;
    n->label_hash = fresh.label_hash;
    n->n_labels = fresh.n_labels;
    label_set_assign(c, node, n);
    node_size(n, spec, model, model >= 0 ? &c->cat->models[model] : NULL);
    c->changes++;
    c->grow_epoch++;
    c->resized++;
    return 0;
}

uint64_t allot_cluster_resized(const struct allot_cluster *c)
{
    return c->resized;
}

const struct allot_nodeset *allot_cluster_nodeset(struct allot_cluster *c, bool exclude,
                                                  const int32_t *idx, int n, int *rc)
{
    return nodesets_intern(&c->sets, c->n_nodes, exclude, idx, n, rc);
}

void allot_cluster_shuffle_ranks(struct allot_cluster *c, uint64_t seed)
{
    struct allot_rng r;
    int n = c->n_nodes;

    allot_rng_seed(&r, seed);
    c->changes++;
    /* Fisher-Yates over ranks held in place in the nodes, then rebuild heaps */
    for (int i = 0; i < n; i++)
        c->nodes[i].rank = (uint32_t)i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)allot_rng_below(&r, (uint64_t)i + 1);
        uint32_t t = c->nodes[i].rank;
        c->nodes[i].rank = c->nodes[j].rank;
        c->nodes[j].rank = t;
    }
    for (size_t i = 0; i < c->n_live; i++) {
        struct allot_class *k = &c->classes[c->live[i]];
        for (int32_t p = k->n_members / 2; p >= 0; p--)
            heap_down(c, k, p);
        c->hot[c->live[i]].rep_rank = c->nodes[k->heap[0]].rank;
    }
}

int allot_cluster_set_state(struct allot_cluster *c, int node, int state)
{
    struct allot_node *n;

    if (node < 0 || node >= c->n_nodes || state < ALLOT_NODE_READY || state > ALLOT_NODE_LOST)
        return ALLOT_EINVAL;
    n = &c->nodes[node];
    if (n->state == state)
        return 0;
    if (state == ALLOT_NODE_READY) {
        struct allot_node after = *n;
        after.state = state;
        c->grow_epoch++;
        return index_place(c, node, &after);
    }
    index_remove(c, node);
    n->state = state;
    return 0;
}

int allot_cluster_node_count(const struct allot_cluster *c)
{
    return c->n_nodes;
}

const struct allot_node *allot_cluster_node(const struct allot_cluster *c, int i)
{
    return i >= 0 && i < c->n_nodes ? &c->nodes[i] : NULL;
}

const struct allot_catalog *allot_cluster_catalog(const struct allot_cluster *c)
{
    return c->cat;
}

int64_t allot_cluster_gpu_count(const struct allot_cluster *c)
{
    int64_t n = 0;

    for (int i = 0; i < c->n_nodes; i++)
        n += c->nodes[i].n_gpus;
    return n;
}

int64_t allot_cluster_used_milli(const struct allot_cluster *c)
{
    return c->used_milli;
}

int allot_cluster_classes(const struct allot_cluster *c, const int32_t **ids)
{
    *ids = c->live;
    return (int)c->n_live;
}

const struct allot_class_hot *allot_cluster_class_hot(const struct allot_cluster *c)
{
    return c->hot;
}

int allot_cluster_class_ids(const struct allot_cluster *c)
{
    return (int)c->n_classes;
}

int32_t allot_cluster_node_class(const struct allot_cluster *c, int node)
{
    return node >= 0 && node < c->n_nodes ? c->slot[node].cls : -1;
}

struct allot_class *allot_cluster_class(const struct allot_cluster *c, int32_t id)
{
    return &c->classes[id];
}

/* ---- applying and releasing placements ------------------------------------- */

/* Recomputes a MIG GPU's free milli and memory from its layout. */
static void mig_gpu_refresh(const struct allot_gpu_model *m, struct allot_gpu *g)
{
    int free_mem_slices = m->memory_slices - __builtin_popcount(g->mig.used_mask);

    g->free_milli = (m->compute_slices - g->mig.compute_used) * ALLOT_MILLI / m->compute_slices;
    g->free_mem_mib = m->memory_mib * free_mem_slices / m->memory_slices;
    g->n_tasks = g->mig.n_instances;
}

/* Applies (sign +1) or releases (sign -1) placement p on a copy of its
 * node; returns 0 or an error leaving `after` partially changed. */
static int placement_change(const struct allot_cluster *c, const struct allot_placement *p,
                            int sign, struct allot_node *after)
{
    const struct allot_gpu_model *m = after->model >= 0 ? &c->cat->models[after->model] : NULL;

    if (p->gpu_mask >> after->n_gpus)
        return ALLOT_EINVAL;
    if (sign > 0) {
        if (after->cpu_free < p->cpu_milli || after->mem_free < p->mem_mib ||
            after->rdma_free < p->rdma_vfs)
            return ALLOT_ENOSPC;
    } else if (after->cpu_free + p->cpu_milli > after->cpu_milli ||
               after->mem_free + p->mem_mib > after->mem_mib ||
               after->rdma_free + p->rdma_vfs > after->rdma_vfs) {
        return ALLOT_EINVAL;
    }
    if (sign > 0 &&
        !allot_isolation_allows(after->n_tasks, after->excl_tenant, p->tenant, p->isolation == 2))
        return ALLOT_EINVAL; /* exclusive-node isolation */
    if (sign < 0 && after->n_tasks == 0)
        return ALLOT_EINVAL;
    after->n_tasks += sign;
    if (sign > 0 && p->isolation == 2)
        after->excl_tenant = p->tenant;
    if (after->n_tasks == 0)
        after->excl_tenant = 0;
    after->cpu_free -= sign * p->cpu_milli;
    after->mem_free -= sign * p->mem_mib;
    after->rdma_free -= sign * p->rdma_vfs;
    for (int i = 0; i < after->n_gpus; i++) {
        struct allot_gpu *g = &after->gpus[i];
        if (!(p->gpu_mask >> i & 1))
            continue;
        if (p->mig_profile >= 0) {
            int rc;
            if (g->mode != ALLOT_GPU_MIG || !m)
                return ALLOT_EINVAL;
            rc = sign > 0 ? allot_mig_alloc(m, &g->mig, p->mig_profile, p->mig_start)
                          : allot_mig_free(&g->mig, p->mig_start);
            if (rc)
                return rc == ALLOT_ENOENT ? ALLOT_EINVAL : rc;
            mig_gpu_refresh(m, g);
            continue;
        }
        if (g->mode == ALLOT_GPU_MIG)
            return ALLOT_EINVAL;
        if (sign > 0) {
            if (g->free_milli < p->gpu_milli || g->free_mem_mib < p->gpu_mem_mib)
                return ALLOT_ENOSPC;
            if (g->mode == ALLOT_GPU_EXCLUSIVE && p->gpu_milli != ALLOT_MILLI)
                return ALLOT_EINVAL;
            /* exclusive-gpu isolation: fractions share only within the tenant */
            if (!allot_isolation_allows(g->n_tasks, g->excl_tenant, p->tenant,
                                        p->isolation == 1 && p->gpu_milli < ALLOT_MILLI))
                return ALLOT_EINVAL;
            if (p->isolation == 1 && p->gpu_milli < ALLOT_MILLI)
                g->excl_tenant = p->tenant;
            g->n_tasks++;
        } else {
            if (g->n_tasks == 0 || g->free_milli + p->gpu_milli > ALLOT_MILLI ||
                (m && g->free_mem_mib + p->gpu_mem_mib > m->memory_mib))
                return ALLOT_EINVAL;
            g->n_tasks--;
            if (g->n_tasks == 0)
                g->excl_tenant = 0;
        }
        g->free_milli -= sign * p->gpu_milli;
        g->free_mem_mib -= sign * p->gpu_mem_mib;
    }
    if (p->pod_class >= 0 && p->pod_class < ALLOT_POD_CLASSES) {
        if (sign < 0 && after->pod_classes[p->pod_class] == 0)
            return ALLOT_EINVAL;
        after->pod_classes[p->pod_class] = (uint16_t)(after->pod_classes[p->pod_class] + sign);
    }
    return 0;
}

/* any_state: a placement put back where it ran (allot_cluster_restore),
 * which a node that takes no new work keeps */
static int cluster_change(struct allot_cluster *c, const struct allot_placement *p, int sign,
                          bool any_state)
{
    struct allot_node after;
    int rc;

    if (p->node < 0 || p->node >= c->n_nodes)
        return ALLOT_EINVAL;
    if (sign > 0 && !any_state && c->nodes[p->node].state != ALLOT_NODE_READY)
        return ALLOT_ESTATE;
    after = c->nodes[p->node];
    rc = placement_change(c, p, sign, &after);
    if (rc)
        return rc;
    return index_place(c, p->node, &after);
}

int allot_cluster_apply(struct allot_cluster *c, const struct allot_placement *p)
{
    return cluster_change(c, p, +1, false);
}

int allot_cluster_restore(struct allot_cluster *c, const struct allot_placement *p)
{
    return cluster_change(c, p, +1, true);
}

int allot_cluster_release(struct allot_cluster *c, const struct allot_placement *p)
{
    int rc = cluster_change(c, p, -1, false);

    if (rc == 0)
        c->grow_epoch++;
    return rc;
}

uint64_t allot_cluster_grow_epoch(const struct allot_cluster *c)
{
    return c->grow_epoch;
}

uint64_t allot_cluster_changes(const struct allot_cluster *c)
{
    return c->changes;
}

/* ---- invariants ------------------------------------------------------------ */

static int check_node(const struct allot_cluster *c, int i, char *err, size_t errlen)
{
    const struct allot_node *n = &c->nodes[i];
    const struct allot_gpu_model *m = n->model >= 0 ? &c->cat->models[n->model] : NULL;

    if (n->index != i) {
        allot_fmt(err, errlen, "node %s: index %d at place %d", n->name, n->index, i);
        return ALLOT_EINTERNAL;
    }
    if (n->n_tasks < 0 || (n->n_tasks == 0 && n->excl_tenant != 0)) {
        allot_fmt(err, errlen, "node %s: task count or exclusive owner broken", n->name);
        return ALLOT_EINTERNAL;
    }
    if (n->cpu_free < 0 || n->cpu_free > n->cpu_milli || n->mem_free < 0 ||
        n->mem_free > n->mem_mib || n->rdma_free < 0 || n->rdma_free > n->rdma_vfs) {
        allot_fmt(err, errlen, "node %s: cpu/memory/RDMA VFs free outside [0, capacity]", n->name);
        return ALLOT_EINTERNAL;
    }
    for (int g = 0; g < n->n_gpus; g++) {
        const struct allot_gpu *u = &n->gpus[g];
        if (u->free_milli < 0 || u->free_milli > ALLOT_MILLI || u->free_mem_mib < 0 ||
            (m && u->free_mem_mib > m->memory_mib)) {
            allot_fmt(err, errlen, "node %s gpu %d: free capacity outside [0, capacity]", n->name,
                      g);
            return ALLOT_EINTERNAL;
        }
        if (u->n_tasks == 0 && u->excl_tenant != 0) {
            allot_fmt(err, errlen, "node %s gpu %d: held exclusively by no task", n->name, g);
            return ALLOT_EINTERNAL;
        }
        if (u->n_tasks == 0 && u->mode != ALLOT_GPU_MIG && u->free_milli != ALLOT_MILLI) {
            allot_fmt(err, errlen, "node %s gpu %d: %d milli used by no task", n->name, g,
                      ALLOT_MILLI - u->free_milli);
            return ALLOT_EINTERNAL;
        }
        if (u->mode == ALLOT_GPU_MIG && m) {
            uint8_t mask = 0;
            int compute = 0;
            for (int k = 0; k < u->mig.n_instances; k++) {
                const struct allot_mig_instance *in = &u->mig.inst[k];
                uint8_t bits = (uint8_t)(((1u << in->size) - 1) << in->start);
                if (mask & bits) {
                    allot_fmt(err, errlen, "node %s gpu %d: MIG slice allocated twice", n->name, g);
                    return ALLOT_EINTERNAL;
                }
                mask |= bits;
                compute += m->profiles[in->profile].compute_slices;
            }
            if (mask != u->mig.used_mask || compute != u->mig.compute_used ||
                compute > m->compute_slices) {
                allot_fmt(err, errlen, "node %s gpu %d: MIG accounting differs from instances",
                          n->name, g);
                return ALLOT_EINTERNAL;
            }
        } else if (u->mig.n_instances) {
            allot_fmt(err, errlen, "node %s gpu %d: MIG instances on a non-MIG GPU", n->name, g);
            return ALLOT_EINTERNAL;
        }
    }
    return 0;
}

int allot_cluster_check(const struct allot_cluster *c, char *err, size_t errlen)
{
    size_t members = 0;
    uint64_t key[KEY_MAX], rk[KEY_MAX];
    int64_t used = 0;

    for (int i = 0; i < c->n_nodes; i++) {
        const struct allot_node *n = &c->nodes[i];
        int rc = check_node(c, i, err, errlen);
        if (rc)
            return rc;
        used += node_used_milli(n);
        if ((n->state == ALLOT_NODE_READY) != (c->slot[i].cls >= 0)) {
            allot_fmt(err, errlen, "node %s: %s", n->name,
                      c->slot[i].cls >= 0 ? "not ready but indexed" : "ready but not indexed");
            return ALLOT_EINTERNAL;
        }
        if (allot_cluster_find_node(c, n->name) != i) {
            allot_fmt(err, errlen, "node %s: name index broken", n->name);
            return ALLOT_EINTERNAL;
        }
    }
    if (used != c->used_milli) {
        allot_fmt(err, errlen, "GPU milli in use: counted %lld, nodes hold %lld",
                  (long long)c->used_milli, (long long)used);
        return ALLOT_EINTERNAL;
    }
    for (size_t l = 0; l < c->n_live; l++) {
        const struct allot_class *k = &c->classes[c->live[l]];
        int rl;
        if (k->n_members <= 0 || k->live_pos != (int32_t)l) {
            allot_fmt(err, errlen, "class %d: empty or live list broken", c->live[l]);
            return ALLOT_EINTERNAL;
        }
        rl = node_key(c, &c->nodes[k->heap[0]], rk);
        if (k->bucket != node_bucket(&c->nodes[k->heap[0]]) ||
            k->cap_key != node_cap_key(&c->nodes[k->heap[0]]) ||
            c->buckets[k->bucket].ids[k->bucket_pos] != c->live[l] ||
            (k->bucket_pos > 0 &&
             c->classes[c->buckets[k->bucket].ids[(k->bucket_pos - 1) / 2]].cap_key < k->cap_key)) {
            allot_fmt(err, errlen, "class %d: filed in the wrong capacity bucket", c->live[l]);
            return ALLOT_EINTERNAL;
        }
        if (c->hot[c->live[l]].rep_rank != c->nodes[k->heap[0]].rank) {
            allot_fmt(err, errlen, "class %d: cached representative rank stale", c->live[l]);
            return ALLOT_EINTERNAL;
        }
        for (int32_t j = 0; j < k->n_members; j++) {
            const struct allot_node *n = &c->nodes[k->heap[j]];
            int kl = node_key(c, n, key);
            if (c->slot[k->heap[j]].cls != c->live[l] || c->slot[k->heap[j]].heap_pos != j ||
                kl != rl || memcmp(key, rk, sizeof(uint64_t) * (size_t)kl) != 0) {
                allot_fmt(err, errlen, "node %s: in the wrong state class", n->name);
                return ALLOT_EINTERNAL;
            }
            if (j > 0 && c->nodes[k->heap[(j - 1) / 2]].rank > n->rank) {
                allot_fmt(err, errlen, "class %d: member heap out of order", c->live[l]);
                return ALLOT_EINTERNAL;
            }
        }
        members += (size_t)k->n_members;
    }
    for (int b = 0; b < ALLOT_BUCKETS; b++)
        if ((c->buckets[b].n > 0) != ((c->bucket_bits[b / 64] >> (b % 64)) & 1)) {
            allot_fmt(err, errlen, "bucket %d: occupancy bit wrong", b);
            return ALLOT_EINTERNAL;
        }
    {
        size_t ready = 0;
        for (int i = 0; i < c->n_nodes; i++)
            ready += c->nodes[i].state == ALLOT_NODE_READY;
        if (ready != members) {
            allot_fmt(err, errlen, "state index holds %zu nodes, %zu are ready", members, ready);
            return ALLOT_EINTERNAL;
        }
    }
    return 0;
}

int allot_cluster_set_class_flags(struct allot_cluster *c, unsigned class_flags)
{
    if (c->class_flags == class_flags)
        return 0;
    /* rebuild the index: take every node out, then put it back */
    for (int i = 0; i < c->n_nodes; i++)
        index_remove(c, i);
    c->class_flags = class_flags;
    for (int i = 0; i < c->n_nodes; i++) {
        int rc = index_place(c, i, &c->nodes[i]);
        if (rc)
            return rc;
    }
    return 0;
}
