/*
 * One fill job (fill_run.h).
 *
 * What a job measures, after every arrival (placed or failed): arrived GPU
 * milli, allocated GPU milli and the cluster's fragmentation F under the
 * original trace's typical-task mix. Arrivals are filed by arrived % of
 * capacity rounded to an integer (half to even, like the authors' pandas
 * round); a bucket's value is the mean over its arrivals and an empty
 * bucket takes the mean over its two neighbours (the authors' analysis
 * script does the same). F is kept per node in fixed point (1e-6 milli) and
 * updated only for the node a placement touched, so the fragmentation rate
 * costs one allot_frag_node() per placement and the sum stays exact and
 * deterministic.
 */
#include "fill_run.h"

#include "allot/common.h"
#include "fill_workload.h"

#include <math.h>
#include <string.h>
#include <time.h>

#define FRAG_FIXED 1e6 /* fragmentation kept in 1e-6 milli-GPU units */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* round(num / den) with ties to even, den > 0, num >= 0. */
static int64_t round_half_even(int64_t num, int64_t den)
{
    int64_t q = num / den, r = num % den;

    if (2 * r > den || (2 * r == den && (q & 1)))
        q++;
    return q;
}

static int64_t frag_fixed(double f)
{
    return llround(f * FRAG_FIXED);
}

/* One decision-log line; node NULL for a pod that found no node. */
static void log_line(struct sim_fill_text *log, const char *policy, uint64_t seed, size_t k,
                     const char *pod, int32_t clone, const char *node, uint32_t mask)
{
    char suffix[32] = "";

    if (!log)
        return;
    if (clone >= 0)
        allot_fmt(suffix, sizeof(suffix), "-tuned-%d", clone);
    if (node)
        sim_fill_text_add(log, "%s\t%llu\t%zu\t%s%s\t%s\t0x%x\n", policy, (unsigned long long)seed,
                          k, pod, suffix, node, mask);
    else
        sim_fill_text_add(log, "%s\t%llu\t%zu\t%s%s\t-\t-\n", policy, (unsigned long long)seed, k,
                          pod, suffix);
}

/* Per-bucket sums of one job: allocation %, fragmentation rate %, count. */
struct buckets {
    double asum[SIM_FILL_TRACKED], rsum[SIM_FILL_TRACKED];
    uint64_t cnt[SIM_FILL_TRACKED];
};

/* The --check tallies after a placement: the scheduler's invariants, the
 * job's GPU tally against the cluster's, and (when the bucket changed) the
 * fixed-point fragmentation sum against a full recount. Returns 0, or
 * ALLOT_EINTERNAL with the breach in msg. */
static int check_tallies(struct allot_sched *s, const struct allot_cluster *c,
                         const struct allot_frag_mix *mix, int64_t used, int64_t fsum,
                         bool new_bucket, char *msg, size_t msglen)
{
    int rc = allot_sched_check_invariants(s, msg, msglen);

    if (rc == 0 && used != allot_cluster_used_milli(c)) {
        allot_fmt(msg, msglen, "used GPU tally %lld, cluster says %lld", (long long)used,
                  (long long)allot_cluster_used_milli(c));
        rc = ALLOT_EINTERNAL;
    }
    if (rc == 0 && new_bucket &&
        fabs((double)fsum / FRAG_FIXED - allot_frag_cluster(mix, c)) > 1e-3) {
        allot_fmt(msg, msglen, "fragmentation tally %.6f, cluster says %.6f",
                  (double)fsum / FRAG_FIXED, allot_frag_cluster(mix, c));
        rc = ALLOT_EINTERNAL;
    }
    return rc ? ALLOT_EINTERNAL : 0;
}

/* Bucket means into out; an empty bucket takes the mean over its
 * neighbours, as the authors do. */
static void finish_buckets(const struct buckets *bk, struct sim_fill_result *out)
{
    for (int b = 0; b < SIM_FILL_BUCKETS; b++) {
        double a = bk->asum[b], r = bk->rsum[b];
        uint64_t k = bk->cnt[b];
        if (k == 0) {
            if (b > 0) {
                a += bk->asum[b - 1];
                r += bk->rsum[b - 1];
                k += bk->cnt[b - 1];
            }
            a += bk->asum[b + 1];
            r += bk->rsum[b + 1];
            k += bk->cnt[b + 1];
        }
        out->alloc_pct[b] = k ? a / (double)k : NAN;
        out->frag_pct[b] = k ? r / (double)k : NAN;
    }
}

int sim_fill_run(const struct sim_fill_trace *t, const struct allot_sched_policy_ops *policy,
                 uint64_t seed, double tune, bool check, struct sim_fill_text *log,
                 struct sim_fill_result *out, char *err, size_t errlen)
{
    double t0 = now_s();
    struct allot_cluster *c = NULL;
    struct allot_sched *s = NULL;
    struct sim_fill_workload w = {0};
    int64_t *fq = NULL, fsum = 0, used = 0, arrived = 0;
    int64_t cap = t->gpus * ALLOT_MILLI;
    struct buckets *bk = allot_calloc(1, sizeof(*bk));
    int64_t last_bucket = -1;
    int rc;

    memset(out, 0, sizeof(*out));
    c = allot_cluster_new(t->cat, 0);
    fq = allot_calloc(t->n_nodes, sizeof(*fq));
    if (!c || !fq || !bk)
        goto oom;
    for (size_t i = 0; i < t->n_nodes; i++) {
        rc = allot_cluster_add_node(c, &t->nodes[i], err, errlen);
        if (rc < 0)
            goto done;
    }
    allot_cluster_shuffle_ranks(c, seed);
    {
        struct allot_sched_opts so = {.seed = seed,
                                      .mix = strcmp(policy->name, "allot") != 0 ? &t->mix : NULL};
        s = allot_sched_new(c, policy, &so);
    }
    if (!s || sim_fill_workload_make(t, seed, tune, &w))
        goto oom;
    for (size_t i = 0; i < t->n_nodes; i++) {
        fq[i] = frag_fixed(allot_frag_node(&t->mix, allot_cluster_node(c, (int)i)));
        fsum += fq[i];
    }
    for (size_t k = 0; k < w.n; k++) {
        const struct allot_task *tk = &t->tasks[w.task[k]];
        const char *pod = t->opods.v[w.task[k]].name;
        struct allot_placement pl;
        char msg[256];
        int64_t b;
        allot_sched_observe(s, tk); /* each pod arrives once */
        rc = allot_sched_place(s, tk, &pl, msg, sizeof(msg));
        if (rc == 0) {
            const struct allot_node *n = allot_cluster_node(c, pl.node);
            used += (int64_t)__builtin_popcount(pl.gpu_mask) * pl.gpu_milli;
            fsum -= fq[pl.node];
            fq[pl.node] = frag_fixed(allot_frag_node(&t->mix, n));
            fsum += fq[pl.node];
            log_line(log, policy->name, seed, k, pod, w.clone[k], n->name, pl.gpu_mask);
        } else if (rc == ALLOT_ENOSPC) {
            out->failed++;
            log_line(log, policy->name, seed, k, pod, w.clone[k], NULL, 0);
        } else {
            allot_fmt(err, errlen, "%s seed %llu pod %s: %s", policy->name,
                      (unsigned long long)seed, pod, rc == ALLOT_EINVAL ? msg : allot_strerror(rc));
            goto done;
        }
        arrived += sim_fill_task_request(tk);
        b = round_half_even(arrived * 100, cap);
        if (check && (rc = check_tallies(s, c, &t->mix, used, fsum, b != last_bucket, msg,
                                         sizeof(msg))) < 0) {
            allot_fmt(err, errlen, "%s seed %llu after pod %zu (%s): invariant broken: %s",
                      policy->name, (unsigned long long)seed, k, pod, msg);
            goto done;
        }
        last_bucket = b;
        if (b < SIM_FILL_TRACKED) {
            int64_t idle = cap - used;
            bk->asum[b] += (double)used * 100.0 / (double)cap;
            bk->rsum[b] += idle > 0 ? (double)fsum / FRAG_FIXED * 100.0 / (double)idle : 0.0;
            bk->cnt[b]++;
        }
    }
    if (log && log->err) {
        rc = log->err;
        allot_fmt(err, errlen, "decision log: %s", allot_strerror(rc));
        goto done;
    }
    finish_buckets(bk, out);
    out->pods = w.n;
    out->arrived_milli = arrived;
    out->used_milli = used;
    out->frag_end = (double)fsum / FRAG_FIXED;
    rc = 0;
    goto done;
oom:
    rc = ALLOT_ENOMEM;
    allot_fmt(err, errlen, "out of memory");
done:
    out->seconds = now_s() - t0;
    sim_fill_workload_free(&w);
    allot_free(bk);
    allot_free(fq);
    allot_sched_free(s);
    allot_cluster_free(c);
    return rc;
}
