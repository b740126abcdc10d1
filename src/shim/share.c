/*
 * Weighted fair sharing of one GPU between jobs (docs/shim.md, "The
 * compute share"). Every job limited on a GPU registers in that GPU's
 * share file, ALLOT_GPU_SHARE_DIR/gpu-<UUID hex>.share: its weight, its
 * ceiling (the limit, or in soft mode the soft ceiling) and when it last
 * wanted GPU time. A job's rate is its part of the GPU's time under
 * weighted max-min fairness (water-filling) among the jobs that wanted
 * time in the last SHIM_SHARE_ACTIVE_NS: each active job gets the GPU in
 * proportion to its weight, none more than its ceiling, and what a capped
 * job leaves goes to the others by weight. A job alone gets its ceiling.
 *
 * The file is lock-free: a job owns an entry by its key (written with
 * compare-and-swap: 0 -> key, or a stale key -> key), and only that job
 * stores its fields, each an aligned 32- or 64-bit atomic. Readers may see
 * one job's fields from two moments; the rate is recomputed every few
 * milliseconds, so that is harmless. A process that dies leaves an entry
 * that stops being active within SHIM_SHARE_ACTIVE_NS and is taken over
 * when stale: there is no lock a dead process could hold.
 *
 * The file is created by the first job on the GPU (O_CREAT, mode 0666, so
 * jobs of other users can join; the agent may create the folder and the
 * files itself) and initialised under flock, like the region
 * (mapfile.c). It is
 * bookkeeping among cooperating jobs, not a security boundary.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

/* A job that took over a dead or finished job's entry: one not seen for
 * this long. */
#define SHIM_SHARE_STALE_NS 10000000000ull

struct shim_share {
    struct shim_share_hdr *h; /* owned mapping */
    int me;                   /* this job's entry, -1 none */
    uint64_t key;
};

static bool share_init(void *map)
{
    struct shim_share_hdr *h = map;

    memset(h, 0, sizeof(*h));
    h->version = SHIM_SHARE_VERSION;
    h->size = sizeof(*h);
    h->max_jobs = SHIM_SHARE_JOBS;
    __atomic_store_n(&h->magic, SHIM_SHARE_MAGIC, __ATOMIC_RELEASE);
    return true;
}

static bool share_valid(const void *map)
{
    const struct shim_share_hdr *h = map;

    return __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == SHIM_SHARE_MAGIC &&
           h->version == SHIM_SHARE_VERSION && h->size == sizeof(*h) &&
           h->max_jobs == SHIM_SHARE_JOBS;
}

struct shim_share *shim_share_open(const char *path, uint64_t key)
{
    struct shim_share *s;
    struct shim_mapped m;
    const char *why;

    why = shim_map_file(path, sizeof(struct shim_share_hdr), true, share_init, share_valid, &m);
    if (why) {
        shim_warn("GPU share file %s unusable, %s: the limit is hard", path, why);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        munmap(m.map, sizeof(struct shim_share_hdr));
        shim_warn("GPU share file %s unusable, out of memory: the limit is hard", path);
        return NULL;
    }
    s->h = m.map;
    s->me = -1;
    s->key = key ? key : 1;
    return s;
}

void shim_share_close(struct shim_share *s)
{
    if (!s)
        return;
    munmap(s->h, sizeof(*s->h));
    free(s);
}

/* This job's entry, claimed on first use. -1 when every entry is live. */
static int own_entry(struct shim_share *s, uint64_t now)
{
    struct shim_share_job *j = s->h->jobs;

    if (s->me >= 0 && __atomic_load_n(&j[s->me].key, __ATOMIC_ACQUIRE) == s->key)
        return s->me;
    s->me = -1;
    for (int i = 0; i < SHIM_SHARE_JOBS; i++)
        if (__atomic_load_n(&j[i].key, __ATOMIC_ACQUIRE) == s->key)
            return s->me = i;
    for (int i = 0; i < SHIM_SHARE_JOBS; i++) {
        uint64_t k = __atomic_load_n(&j[i].key, __ATOMIC_ACQUIRE);
        uint64_t seen = __atomic_load_n(&j[i].seen_ns, __ATOMIC_ACQUIRE);

        /* live unless clearly stale (a time ahead of ours is another
         * process's fresher clock read) */
        if (k && !(now > seen && now - seen >= SHIM_SHARE_STALE_NS))
            continue;
        /* the seen time first, so nobody takes the entry over from us
         * between the claim and the first touch */
        if (__atomic_compare_exchange_n(&j[i].key, &k, s->key, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&j[i].seen_ns, now, __ATOMIC_RELEASE);
            return s->me = i;
        }
    }
    return -1;
}

void shim_share_touch(struct shim_share *s, uint32_t weight, uint32_t ceiling, uint64_t now)
{
    int i = own_entry(s, now);
    struct shim_share_job *j;

    if (i < 0)
        return;
    j = &s->h->jobs[i];
    __atomic_store_n(&j->weight, weight, __ATOMIC_RELAXED);
    __atomic_store_n(&j->ceiling, ceiling, __ATOMIC_RELAXED);
    __atomic_store_n(&j->pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&j->seen_ns, now, __ATOMIC_RELEASE);
}

void shim_share_fill(int n, const uint32_t *weight, const uint32_t *ceiling, double *out)
{
    bool fixed[SHIM_SHARE_JOBS] = {false};
    double left = 100.0;

    for (int i = 0; i < n; i++)
        out[i] = 0;
    /* each round caps at least one job, or settles them all */
    for (int round = 0; round < n; round++) {
        double wsum = 0;
        bool capped = false;

        for (int i = 0; i < n; i++)
            if (!fixed[i])
                wsum += weight[i] ? weight[i] : 1;
        if (wsum <= 0 || left <= 0)
            break;
        for (int i = 0; i < n; i++) {
            double fair = left * (weight[i] ? weight[i] : 1) / wsum;

            if (!fixed[i] && ceiling[i] <= fair) {
                out[i] = ceiling[i];
                fixed[i] = true;
                capped = true;
            }
        }
        if (capped) {
            left = 100.0;
            for (int i = 0; i < n; i++)
                if (fixed[i])
                    left -= out[i];
            continue;
        }
        for (int i = 0; i < n; i++)
            if (!fixed[i])
                out[i] = left * (weight[i] ? weight[i] : 1) / wsum;
        break;
    }
}

int shim_share_rate(struct shim_share *s, uint32_t weight, uint32_t ceiling, uint64_t now)
{
    uint32_t w[SHIM_SHARE_JOBS], c[SHIM_SHARE_JOBS];
    double out[SHIM_SHARE_JOBS];
    int n = 0, me = -1, i = own_entry(s, now);

    for (int k = 0; k < SHIM_SHARE_JOBS; k++) {
        const struct shim_share_job *j = &s->h->jobs[k];
        uint64_t seen = __atomic_load_n(&j->seen_ns, __ATOMIC_ACQUIRE);

        if (k == i) {
            /* this job asks, so it wants time now */
            me = n;
            w[n] = weight;
            c[n++] = ceiling;
            continue;
        }
        uint64_t key = __atomic_load_n(&j->key, __ATOMIC_ACQUIRE);

        /* a second entry of this job (two of its processes claimed at
         * once) is not a co-tenant */
        if (!key || key == s->key || seen > now || now - seen > SHIM_SHARE_ACTIVE_NS)
            continue;
        w[n] = __atomic_load_n(&j->weight, __ATOMIC_RELAXED);
        c[n] = __atomic_load_n(&j->ceiling, __ATOMIC_RELAXED);
        if (c[n] > 100)
            c[n] = 100;
        n++;
    }
    /* no entry to be had (64 live jobs on one GPU): the others cannot see
     * this job, so it must not take idle time they may want */
    if (me < 0)
        return 0;
    shim_share_fill(n, w, c, out);
    return out[me] < 1 ? 1 : (int)(out[me] + 0.5);
}
