/*
 * The shim's allocation table: what each live allocation took, keyed by
 * (value, space) where space separates device pointers, VMM handles and
 * arrays (their values may coincide). Open addressing, linear probing,
 * backward-shift deletion (no tombstones); grows at half full. One mutex
 * per table; callers never hold another lock while calling in (shim.h).
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

bool shim_table_put(struct shim_table *t, const struct shim_alloc *a)
{
    bool ok = false;
    size_t i;

    pthread_mutex_lock(&t->lock);
    if ((t->n + 1) * 2 > t->cap && !grow(t))
        goto out;
    i = find_slot(t, a->key, a->space);
    if (t->slots[i].used)
        goto out;
    t->slots[i] = *a;
    t->slots[i].used = true;
    t->n++;
    ok = true;
out:
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

bool shim_table_take(struct shim_table *t, uint64_t key, int space, struct shim_alloc *a)
{
    bool found = false;
    size_t i, j, mask;

    pthread_mutex_lock(&t->lock);
    if (!t->cap)
        goto out;
    mask = t->cap - 1;
    i = find_slot(t, key, space);
    if (!t->slots[i].used)
        goto out;
    if (a)
        *a = t->slots[i];
    found = true;
    t->n--;
    /* backward shift: move later members of the probe run into the hole
     * when their home slot does not lie cyclically in (hole, j] */
    for (j = (i + 1) & mask; t->slots[j].used; j = (j + 1) & mask) {
        size_t home = (size_t)key_hash(t->slots[j].key, t->slots[j].space) & mask;

        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    memset(&t->slots[i], 0, sizeof(t->slots[i]));
out:
    pthread_mutex_unlock(&t->lock);
    return found;
}
