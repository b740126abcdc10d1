/*
 * The fast queue against references, on random workloads (arrivals, ends,
 * cancellations, priority and quota changes, preemption, reservations,
 * aging, limits, exclusive tenants), a cycle after each step:
 *  - the fast path (src/core/queue_fast.c) decides and explains exactly as
 *    reference mode (opts.exhaustive), which considers every job in full;
 *  - cycles cut short at small work budgets (opts.cycle_work) and continued
 *    at the same time decide exactly as one uncut cycle.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/queue.h"

#include <stdio.h>
#include <string.h>

#include "catalog_fixture.h"
#include "queue_fixture.h"

/* Decisions of one cycle as text, for comparing two queues. */
struct dlog {
    char text[16384];
    size_t len;
    uint64_t hash; /* FNV-1a of everything, text cut short or not */
};

/* Preemptions of a reservation's backfill seen (both queues). */
static int twin_backfill_preempts;
/* ... and of fair-share reclaim. */
static int twin_fair_preempts;
static int twin_fair_capped; /* job reasons compared that were the fair-share cap */

static void on_dlog(int kind, const struct allot_job *j, const char *why, void *ud)
{
    struct dlog *d = ud;
    char line[320];
    int n = snprintf(line, sizeof(line), "%d %s %s\n", kind, j->name, why);

    for (int i = 0; i < n; i++)
        d->hash = (d->hash ^ (unsigned char)line[i]) * 1099511628211ULL;
    twin_backfill_preempts += strstr(why, "backfill preempted") != NULL;
    twin_fair_preempts += strstr(why, "above its tenant's fair share") != NULL;
    if (d->len + (size_t)n < sizeof(d->text)) {
        memcpy(d->text + d->len, line, (size_t)n + 1);
        d->len += (size_t)n;
    }
}

/* Two identical clusters and tenant trees, one queue in reference mode
 * (or, with twin_cut > 0, one queue cycling with that work budget). */
static int twin_cut;

struct twin {
    struct allot_cluster *c[2];
    struct allot_tenants *t[2];
    struct allot_queue *q[2];
    int leaf[6];
};

static void twin_init(struct twin *w, struct allot_queue_opts o, bool exclusive)
{
    static const char *const paths[6] = {"o1/a", "o1/b", "o1/c", "o2/d", "o2/e", "solo"};
    static const int nominal[6] = {8, 8, 4, 8, 4, 8};
    char err[256], name[16];

    memset(w, 0, sizeof(*w));
    for (int m = 0; m < 2; m++) {
        w->c[m] = allot_cluster_new(cat, 0);
        for (int i = 0; i < 10; i++) {
            struct allot_node_spec sp = {.name = name,
                                         .model = "H100",
                                         .cpu_milli = 16000,
                                         .mem_mib = 262144,
                                         .n_gpus = 4,
                                         .island_size = 4,
                                         .rack = i / 2};
            allot_fmt(name, sizeof(name), "n%d", i);
            assert_true(allot_cluster_add_node(w->c[m], &sp, err, sizeof(err)) >= 0);
        }
        w->t[m] = allot_tenants_new(cat);
        for (int i = 0; i < 6; i++) {
            struct allot_quota q = {.nominal = nominal[i] * 1000,
                                    .borrow_limit = i == 2 ? 4000 : ALLOT_UNLIMITED,
                                    .lend_limit = i == 3 ? 4000 : ALLOT_UNLIMITED};
            w->leaf[i] = allot_tenants_add(w->t[m], paths[i], err, sizeof(err));
            assert_true(w->leaf[i] > 0);
            assert_int_equal(allot_tenants_set_quota(w->t[m], w->leaf[i], ALLOT_RES_GPU, q), 0);
        }
        if (exclusive) {
            allot_tenants_get(w->t[m], w->leaf[5])->isolation = ALLOT_ISO_EXCLUSIVE_NODE;
            allot_tenants_get(w->t[m], w->leaf[4])->isolation = ALLOT_ISO_EXCLUSIVE_GPU;
        }
        allot_tenants_fill_nominal(w->t[m]);
        /* queue 1 decides as the reference; with twin_cut, queue 0 has that
         * work budget and queue 1 none, both fast; else both have none
         * (reference mode counts more work, so it cuts elsewhere) */
        o.exhaustive = m == 1 && twin_cut == 0;
        o.cycle_work = m == 0 && twin_cut > 0 ? twin_cut : 1 << 30;
        w->q[m] = allot_queue_new(w->c[m], w->t[m], &o, err, sizeof(err));
        assert_non_null(w->q[m]);
        assert_int_equal(allot_queue_add_prio_class(w->q[m], "batch", 10, true), 0);
        assert_int_equal(allot_queue_add_prio_class(w->q[m], "prod", 100, false), 1);
    }
}

static void twin_free(struct twin *w)
{
    for (int m = 0; m < 2; m++) {
        allot_queue_free(w->q[m]);
        allot_tenants_free(w->t[m]);
        allot_cluster_free(w->c[m]);
    }
}

/* Everything a cycle may have changed in a job, the same in both queues. */
static void twin_compare(struct twin *w, int64_t now)
{
    int n = allot_queue_job_count(w->q[0]);

    assert_int_equal(allot_queue_job_count(w->q[1]), n);
    assert_int_equal(allot_queue_next_wakeup(w->q[0]), allot_queue_next_wakeup(w->q[1]));
    for (int id = 0; id < n; id++) {
        const struct allot_job *x = allot_queue_job(w->q[0], id), *y = allot_queue_job(w->q[1], id);
        char rx[ALLOT_REASON_MAX];
        if (!x || !y) {
            assert_true(!x && !y);
            continue;
        }
        if (x->state != y->state || memcmp(&x->why, &y->why, sizeof(x->why)) != 0 ||
            x->preempt_epoch != y->preempt_epoch ||
            x->preempt_recheck_at != y->preempt_recheck_at ||
            x->preempt_searched_at != y->preempt_searched_at || x->runs != y->runs ||
            x->start != y->start || x->preemptions != y->preemptions)
            fail_msg("at %lld job %s: state %d/%d, reason %d/%d (%s / %s), search %llu/%llu "
                     "recheck %lld/%lld",
                     (long long)now, x->name, x->state, y->state, x->why.kind, y->why.kind,
                     allot_queue_reason(w->q[0], id), allot_queue_reason(w->q[1], id),
                     (unsigned long long)x->preempt_epoch, (unsigned long long)y->preempt_epoch,
                     (long long)x->preempt_recheck_at, (long long)y->preempt_recheck_at);
        allot_strlcpy(rx, allot_queue_reason(w->q[0], id), sizeof(rx));
        assert_string_equal(rx, allot_queue_reason(w->q[1], id));
        twin_fair_capped += x->why.kind == ALLOT_WHY_FAIR_CAP;
    }
}

/* Random arrivals, ends and cancellations on both queues, a cycle after
 * each step: the fast queue decides and explains exactly as the reference. */
static void twin_run(struct allot_queue_opts o, bool exclusive, uint64_t seed, int steps)
{
    static const int gpus[] = {1, 1, 2, 4};
    struct twin w;
    struct allot_rng r;
    int64_t now = 0;
    int jobs = 0, cuts = 0;
    char err[256], name[16];

    twin_init(&w, o, exclusive);
    allot_rng_seed(&r, seed);
    /* jobs that name their nodes (a third of them): two lists and two
     * exclusions, the same in both clusters */
    const struct allot_nodeset *sets[2][5] = {{NULL}, {NULL}};
    static const int32_t l1[] = {1, 2}, l2[] = {5, 6, 7, 8}, x1[] = {0, 3}, x2[] = {9};
    for (int m = 0; m < 2; m++) {
        int rc[4];
        sets[m][1] = allot_cluster_nodeset(w.c[m], false, l1, 2, &rc[0]);
        sets[m][2] = allot_cluster_nodeset(w.c[m], false, l2, 4, &rc[1]);
        sets[m][3] = allot_cluster_nodeset(w.c[m], true, x1, 2, &rc[2]);
        sets[m][4] = allot_cluster_nodeset(w.c[m], true, x2, 1, &rc[3]);
        for (int k = 0; k < 4; k++)
            assert_int_equal(rc[k], 0);
    }
    for (int step = 0; step < steps; step++) {
        struct dlog d[2] = {{.hash = 14695981039346656037ULL}, {.hash = 14695981039346656037ULL}};
        int arrivals = (int)allot_rng_below(&r, 4), n = allot_queue_job_count(w.q[0]);
        if (exclusive && step == steps / 2) /* exclusive work keeps running after this */
            for (int m = 0; m < 2; m++)
                allot_tenants_get(w.t[m], w.leaf[5])->isolation = ALLOT_ISO_SHARED;
        if (allot_rng_below(&r, 8) != 0)
            now += 1 + (int64_t)allot_rng_below(&r, 120);
        for (int id = 0; id < n; id++) {
            const struct allot_job *j = allot_queue_job(w.q[0], id);
            int what = (int)allot_rng_below(&r, 40);
            if (j && (j->state == ALLOT_JOB_RUNNING || j->state == ALLOT_JOB_STOPPING) && what < 2)
                for (int m = 0; m < 2; m++)
                    assert_int_equal(allot_queue_finish(w.q[m], id, now), 0);
            else if (j && j->state == ALLOT_JOB_PENDING && what == 0 && allot_rng_below(&r, 4) == 0)
                for (int m = 0; m < 2; m++)
                    assert_int_equal(allot_queue_cancel(w.q[m], id, now), 0);
        }
        for (int a = 0; a < arrivals; a++) {
            struct allot_job_spec s = {
                .name = name,
                .tenant = w.leaf[allot_rng_below(&r, 6)],
                .user = (int)allot_rng_below(&r, 3),
                .prio_class = allot_rng_below(&r, 6) == 0 ? 1 : (int)allot_rng_below(&r, 2) - 1,
                .qos = (int)allot_rng_below(&r, 3),
                .n_tasks = allot_rng_below(&r, 6) == 0 ? 2 + (int)allot_rng_below(&r, 2) : 1,
                .est_runtime_s =
                    allot_rng_below(&r, 3) ? 100 + (int64_t)allot_rng_below(&r, 3000) : 0,
                .limit_s =
                    allot_rng_below(&r, 10) == 0 ? 500 + (int64_t)allot_rng_below(&r, 2000) : 0,
                .min_runtime_s =
                    allot_rng_below(&r, 4) == 0 ? (int64_t)allot_rng_below(&r, 300) : 0,
                .checkpointable = allot_rng_below(&r, 2) == 0,
                .checkpoint_interval_s = allot_rng_below(&r, 2) ? 300 : 0};
            s.task = (struct allot_task){.num_gpu = gpus[allot_rng_below(&r, 4)],
                                         .gpu_milli = 1000,
                                         .mig_profile = -1,
                                         .cpu_milli = 1000 * (1 + (int64_t)allot_rng_below(&r, 2)),
                                         .mem_mib = 1024};
            allot_fmt(name, sizeof(name), "j%d", jobs++);
            int set = allot_rng_below(&r, 3) == 0 ? 1 + (int)allot_rng_below(&r, 4) : 0;
            for (int m = 0; m < 2; m++) {
                s.task.nodes = sets[m][set];
                assert_true(allot_queue_submit(w.q[m], &s, now, err, sizeof(err)) >= 0);
            }
        }
        if (allot_rng_below(&r, 50) == 0) /* a priority class changes */
            for (int m = 0; m < 2; m++)
                assert_int_equal(allot_queue_set_prio_class(w.q[m], 0, "batch", 5 + (int)(now % 10),
                                                            now % 3 != 0),
                                 0);
        if (allot_rng_below(&r, 50) == 0) { /* a quota changes */
            struct allot_quota qt = {.nominal = 1000 * (2 + (int64_t)allot_rng_below(&r, 10)),
                                     .borrow_limit = ALLOT_UNLIMITED,
                                     .lend_limit = ALLOT_UNLIMITED};
            int leaf = w.leaf[allot_rng_below(&r, 6)];
            for (int m = 0; m < 2; m++)
                assert_int_equal(allot_tenants_set_quota(w.t[m], leaf, ALLOT_RES_GPU, qt), 0);
        }
        for (int m = 0; m < 2; m++) {
            int cycles = 0;
            do { /* a cut cycle goes on at the same time, as allot-sim runs it */
                assert_int_equal(allot_queue_cycle(w.q[m], now, on_dlog, &d[m]), 0);
                if (allot_queue_check_invariants(w.q[m], err, sizeof(err)) != 0)
                    fail_msg("seed %llu step %d queue %d: %s", (unsigned long long)seed, step, m,
                             err);
                assert_true(++cycles <= 10000);
            } while (allot_queue_more(w.q[m]));
            cuts += cycles - 1;
        }
        if (d[0].hash != d[1].hash)
            fail_msg("seed %llu step %d at %lld: decisions differ\nfast:\n%s\nreference:\n%s",
                     (unsigned long long)seed, step, (long long)now, d[0].text, d[1].text);
        twin_compare(&w, now);
    }
    twin_free(&w);
    if (twin_cut > 0 && cuts == 0)
        fail_msg("seed %llu: no cycle reached its work budget of %d", (unsigned long long)seed,
                 twin_cut);
}

static void test_fast_matches_reference(void **state)
{
    struct allot_queue_opts o = base;

    o.min_runtime_s = 60;
    o.aging_s = 1800;
    o.preempt_searches = 3;
    for (uint64_t seed = 1; seed <= 3; seed++)
        twin_run(o, false, seed, 400);
    o.hold_half_life_s = 7200;
    o.las_threshold_gpu_s = 3000;
    twin_run(o, false, 4, 400);
    twin_run(o, true, 5, 400); /* a tenant that takes whole nodes */
    o.placement = "allot";
    twin_run(o, false, 6, 300);
    o.placement = "bestfit";
    o.reserve_gangs = true; /* reservations without aging, backfill taken back */
    twin_run(o, false, 11, 300);
    o.placement = base.placement;
    twin_run(o, false, 110, 300); /* a holder turned away by its own backfill's quota */
    o.placement = "bestfit";
    o.reserve_gangs = false;
    o.fair_reclaim_s = 200; /* fair-share reclaim */
    twin_run(o, false, 12, 300);
    twin_run(o, false, 16, 300); /* seed 12's now go to reclaim (whatever the class) */
    twin_run(o, true, 13, 300);
    o.fair_cap = 1.2; /* the fair-share cap, with fair-share reclaim and without */
    twin_run(o, false, 14, 300);
    o.fair_reclaim_s = 0;
    twin_run(o, false, 15, 300);
    o.fair_cap = 0;
    o.preemption = false;
    twin_run(o, false, 7, 300);
    twin_run(o, true, 10, 300);
    o.preemption = true;
    o.quotas = false;
    o.borrowing = false;
    twin_run(o, false, 8, 300);
    o = base;
    o.preempt_searches = 0; /* the default budget */
    /* the reservations' preemptible backfill was taken back, both ways alike */
    if (twin_backfill_preempts == 0)
        fail_msg("no reservation took its backfill back: the rule went untested");
    if (twin_fair_capped == 0)
        fail_msg("no job waited for the fair-share cap: the rule went untested");
    if (twin_fair_preempts == 0)
        fail_msg("no fair-share reclaim happened: the rule went untested");
    o.backfill = false;
    twin_run(o, false, 9, 300);
}

/* A cycle cut short at its work budget and continued at the same time
 * decides exactly as one uncut cycle: the same decisions in the same
 * order, reasons and wake-ups, with budgets of 1 to 5 and with preemption,
 * reservations, aging, runtime limits and exclusive tenants in play, for
 * every ordering policy and both serving paths. */
static void test_cut_cycles_match_uncut(void **state)
{
    struct allot_queue_opts o = base;

    (void)state;
    o.min_runtime_s = 60;
    o.aging_s = 1800;
    o.preempt_searches = 3;
    o.hold_half_life_s = 7200;
    o.las_threshold_gpu_s = 3000;
    for (twin_cut = 1; twin_cut <= 5; twin_cut += 2) {
        twin_run(o, false, 20 + (uint64_t)twin_cut, 300);
        twin_run(o, true, 30 + (uint64_t)twin_cut, 300);
    }
    o.placement = "allot";
    twin_cut = 2;
    twin_run(o, false, 40, 300);
    /* the other orders, and fair order without the fast path (a random
     * placement may draw numbers on failed attempts): queue_serve.c */
    o.placement = "bestfit";
    o.order = "las";
    twin_run(o, false, 41, 300);
    o.order = "fifo";
    twin_run(o, true, 42, 300);
    o.order = "fair";
    o.placement = "random";
    twin_run(o, false, 43, 300);
    twin_cut = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_cut_cycles_match_uncut),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
