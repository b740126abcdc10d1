/*
 * The shim's allocation table: what each live allocation took, keyed by
 * (value, space) where space separates device pointers, VMM handles and
 * their mappings, arrays (their values may coincide). Open addressing,
 * linear probing, backward-shift deletion (no tombstones); grows at half
 * full. One mutex per table; callers never hold another lock while
 * calling in (shim.h).
 * When memory for the table runs out a put fails and the hook undoes the
 * allocation, so the books never miss one.
 */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static uint64_t key_hash(uint64_t key, int space)
{
    /* splitmix64 finaliser: device pointers share their low bits */
    uint64_t x = key ^ ((uint64_t)space << 62);

    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

void shim_table_init(struct shim_table *t, void *(*calloc_fn)(size_t, size_t))
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->calloc_fn = calloc_fn ? calloc_fn : calloc;
}

void shim_table_clear(struct shim_table *t)
{
    pthread_mutex_lock(&t->lock);
    free(t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
    pthread_mutex_unlock(&t->lock);
}

void shim_table_reset_child(struct shim_table *t)
{
    pthread_mutex_init(&t->lock, NULL);
    free(t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
}

/* Index of (key, space), or of the empty slot where it would go. */
static size_t find_slot(const struct shim_table *t, uint64_t key, int space)
{
    size_t i = (size_t)key_hash(key, space) & (t->cap - 1);

    while (t->slots[i].used && (t->slots[i].key != key || t->slots[i].space != space))
        i = (i + 1) & (t->cap - 1);
    return i;
}

static bool grow(struct shim_table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct shim_alloc *old = t->slots, *slots = t->calloc_fn(cap, sizeof(*slots));
    size_t old_cap = t->cap;

    if (!slots)
        return false;
    t->slots = slots;
    t->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].used)
            t->slots[find_slot(t, old[i].key, old[i].space)] = old[i];
    free(old);
    return true;
}

/* Inserts or (replace) overwrites. Called locked. */
static bool put_locked(struct shim_table *t, const struct shim_alloc *a, bool replace,
                       struct shim_alloc *old)
{
    size_t i;

    if (old)
        memset(old, 0, sizeof(*old));
    if ((t->n + 1) * 2 > t->cap && !grow(t))
        return false;
    i = find_slot(t, a->key, a->space);
    if (t->slots[i].used) {
        if (!replace)
            return false;
        if (old)
            *old = t->slots[i];
    } else {
        t->n++;
    }
    t->slots[i] = *a;
    t->slots[i].used = true;
    return true;
}

bool shim_table_put(struct shim_table *t, const struct shim_alloc *a)
{
    bool ok;

    pthread_mutex_lock(&t->lock);
    ok = put_locked(t, a, false, NULL);
    pthread_mutex_unlock(&t->lock);
    return ok;
}

bool shim_table_replace(struct shim_table *t, const struct shim_alloc *a, struct shim_alloc *old)
{
    bool ok;

    pthread_mutex_lock(&t->lock);
    ok = put_locked(t, a, true, old);
    pthread_mutex_unlock(&t->lock);
    return ok;
}

bool shim_table_get(struct shim_table *t, uint64_t key, int space, struct shim_alloc *a)
{
    bool found = false;

    pthread_mutex_lock(&t->lock);
    if (t->cap) {
        size_t i = find_slot(t, key, space);

        if (t->slots[i].used) {
            *a = t->slots[i];
            found = true;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

/* Removes slot i (used), shifting the rest of its probe run back. Called
 * locked. */
static void remove_at(struct shim_table *t, size_t i)
{
    size_t mask = t->cap - 1;

    t->n--;
    /* backward shift: move later members of the probe run into the hole
     * when their home slot does not lie cyclically in (hole, j] */
    for (size_t j = (i + 1) & mask; t->slots[j].used; j = (j + 1) & mask) {
        size_t home = (size_t)key_hash(t->slots[j].key, t->slots[j].space) & mask;

        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    memset(&t->slots[i], 0, sizeof(t->slots[i]));
}

bool shim_table_take(struct shim_table *t, uint64_t key, int space, struct shim_alloc *a)
{
    bool found = false;
    size_t i;

    pthread_mutex_lock(&t->lock);
    if (t->cap) {
        i = find_slot(t, key, space);
        if (t->slots[i].used) {
            if (a)
                *a = t->slots[i];
            remove_at(t, i);
            found = true;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

bool shim_table_vmm(struct shim_table *t, uint64_t handle, uint64_t serial, int drefs, int dmaps,
                    struct shim_alloc *a)
{
    bool done = false;

    pthread_mutex_lock(&t->lock);
    if (t->cap) {
        size_t i = find_slot(t, handle, SHIM_SPACE_HANDLE);
        struct shim_alloc *s = &t->slots[i];

        if (s->used && (!serial || s->serial == serial) && (int64_t)s->refs + drefs >= 0 &&
            (int64_t)s->maps + dmaps >= 0) {
            s->refs = (uint32_t)((int64_t)s->refs + drefs);
            s->maps = (uint32_t)((int64_t)s->maps + dmaps);
            if (a)
                *a = *s;
            /* nothing holds the memory: the driver frees it */
            if (!s->refs && !s->maps)
                remove_at(t, i);
            done = true;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return done;
}

bool shim_table_size(struct shim_table *t, uint64_t handle, uint64_t serial, int dev,
                     uint64_t bytes)
{
    bool done = false;

    pthread_mutex_lock(&t->lock);
    if (t->cap) {
        struct shim_alloc *s = &t->slots[find_slot(t, handle, SHIM_SPACE_HANDLE)];

        if (s->used && s->serial == serial && s->dev < 0) {
            s->dev = dev;
            s->bytes = bytes;
            done = true;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return done;
}

size_t shim_table_take_ctx(struct shim_table *t, uint64_t ctx, uint64_t freed[SHIM_MAX_DEV],
                           uint64_t freed_over[SHIM_MAX_DEV])
{
    size_t n = 0;

    pthread_mutex_lock(&t->lock);
    /* a removal may pull a later record into slot i: look at i again */
    for (size_t i = 0; i < t->cap;) {
        struct shim_alloc *s = &t->slots[i];

        if (!s->used || s->ctx != ctx || !ctx) {
            i++;
            continue;
        }
        if (s->dev >= 0 && s->dev < SHIM_MAX_DEV)
            (s->over ? freed_over : freed)[s->dev] += s->bytes;
        remove_at(t, i);
        n++;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}

size_t shim_table_resize_space(struct shim_table *t, int space, int dev, uint64_t bytes,
                               uint64_t *old_sum)
{
    size_t n = 0;

    *old_sum = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->cap; i++) {
        struct shim_alloc *s = &t->slots[i];

        if (!s->used || s->space != space || s->dev != dev)
            continue;
        *old_sum += s->bytes;
        if (bytes != UINT64_MAX)
            s->bytes = bytes;
        n++;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}
