/*
 * Unit tests of reservations and backfill (src/core/queue_reserve.c,
 * docs/tenancy.md "Reservations and backfill"): the EASY reservation of a
 * large gang that finds no room, backfill that ends before its shadow start
 * or fits in the GPUs spare then, preemptible backfill the gang takes back,
 * reservations at the cluster's own quota and past MIG GPUs, and the
 * invariants after every cycle.
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
#include "queue_world.h"

/* A reservation for the aged 8-GPU gang: backfill that ends before its
 * shadow start runs (EASY); other work waits unless it is preemptible, in
 * which case it starts as the gang's backfill and is the gang's victim when
 * the gang's room comes (so that unknown runtimes do not idle the GPUs). */
static void backfill_under_reservation(bool moved)
{
    struct world w;
    int run1, run2, big, shortj, longj, bf;
    struct allot_job_spec s = {.name = "pinned",
                               .prio_class = 0,
                               .n_tasks = 1,
                               .task = {.num_gpu = 2, .gpu_milli = 1000, .mig_profile = -1},
                               .est_runtime_s = 100000};
    char err[128];

    world_init(&w, 2, 8, base); /* 8 GPUs, a has all 8 in nominal */
    assert_int_equal(allot_queue_add_prio_class(w.q, "pinned", 0, false), 0);
    run1 = submit(&w, "run1", w.a, 1, 4, 0, 1000); /* ends at 1000 */
    run2 = submit(&w, "run2", w.a, 1, 2, 0, 5000); /* ends at 5000 */
    cycle(&w, 0);
    big = submit(&w, "big", w.a, 2, 4, 10, 100);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    /* aged: it reserves; shadow = 5000 (both running jobs must end) */
    cycle(&w, 3700);
    s.tenant = w.a;
    longj = allot_queue_submit(w.q, &s, 3700, err, sizeof(err)); /* not preemptible */
    shortj = submit(&w, "short", w.a, 1, 2, 3700, 600);          /* ends 4300 < 5000: backfills */
    cycle(&w, 3701);
    assert_int_equal(allot_queue_job(w.q, shortj)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, shortj)->backfill_for, -1);
    assert_int_equal(allot_queue_job(w.q, longj)->state, ALLOT_JOB_PENDING);
    assert_non_null(strstr(allot_queue_reason(w.q, longj), "held back: GPUs reserved for job big"));
    /* preemptible work with no end in sight starts as the gang's backfill */
    assert_int_equal(allot_queue_finish(w.q, run1, 3750), 0);
    bf = submit(&w, "bf", w.a, 1, 2, 3800, 100000);
    cycle(&w, 3800);
    assert_int_equal(allot_queue_job(w.q, bf)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, bf)->backfill_for, big);
    assert_int_equal(allot_queue_job(w.q, big)->backfilled, 1);
    /* its user moves it to a class that is not preemptible: it started as
     * backfill on the promise that it would give the GPUs back, and does */
    if (moved)
        assert_int_equal(allot_queue_set_job_class(w.q, bf, 0), 0);
    /* the others end: the gang takes its backfill's GPUs back */
    assert_int_equal(allot_queue_finish(w.q, shortj, 4300), 0);
    assert_int_equal(allot_queue_finish(w.q, run2, 5000), 0);
    cycle(&w, 5000);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(allot_queue_job(w.q, bf)->state, ALLOT_JOB_STOPPING);
    assert_string_equal(w.last_why, "backfill preempted for the reservation of job big");
    assert_string_equal(allot_queue_reason(w.q, big),
                        "waiting for preemption of 2 GPUs from ml/team-a (grace 30 s)");
    cycle(&w, 5030);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, bf)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, bf)->backfill_for, -1);
    assert_int_equal(allot_queue_job(w.q, big)->backfilled, 0);
    world_free(&w);
}

/* ... and the same backfill moved by its user to a class that is not
 * preemptible while it runs (allot_queue_set_job_class). */
static void test_backfill_respects_reservation(void **state)
{
    (void)state;
    backfill_under_reservation(false);
    backfill_under_reservation(true);
}

/* reserve_gangs: a large gang that finds no room reserves at once, with
 * no aging. Another tenant's job inside its nominal starts past the
 * reservation as ordinary work; its borrowed job starts as the gang's
 * backfill; without the option neither is marked. */
static void test_reserve_gangs(void **state)
{
    for (int on = 0; on < 2; on++) {
        struct allot_queue_opts o = base;
        struct allot_quota qa = {
            .nominal = 10000, .borrow_limit = ALLOT_UNLIMITED, .lend_limit = ALLOT_UNLIMITED};
        struct allot_job_spec s = {
            .name = "b1",
            .prio_class = -1,
            .n_tasks = 1,
            .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 64000}};
        struct world w;
        char err[128];
        int gang, b2, b3;

        o.aging_s = 0;
        o.reserve_gangs = on;
        world_init(&w, 3, 4, o); /* 12 GPUs; b has 4 in nominal, a 10 */
        assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, qa), 0);
        qa.nominal = 12000; /* the cluster */
        assert_int_equal(allot_tenants_set_quota(w.t, 0, ALLOT_RES_GPU, qa), 0);
        s.tenant = w.b;
        assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0); /* h0's CPUs */
        submit(&w, "a1", w.a, 1, 1, 0, 0); /* on h1 (h0 has no CPU left): h2 is whole */
        cycle(&w, 0);
        gang = submit(&w, "gang", w.a, 2, 4, 10, 0); /* needs two nodes whole */
        b2 = submit(&w, "b2", w.b, 1, 2, 10, 0);     /* b at 3 of 4: in nominal */
        b3 = submit(&w, "b3", w.b, 1, 2, 10, 0);     /* b above its nominal */
        cycle(&w, 10);
        assert_int_equal(allot_queue_job(w.q, gang)->state, ALLOT_JOB_PENDING);
        assert_int_equal(allot_queue_job(w.q, b2)->state, ALLOT_JOB_RUNNING);
        assert_int_equal(allot_queue_job(w.q, b2)->backfill_for, -1);
        assert_int_equal(allot_queue_job(w.q, b3)->state, ALLOT_JOB_RUNNING);
        assert_true(allot_queue_job(w.q, b3)->borrowed);
        assert_int_equal(allot_queue_job(w.q, b3)->backfill_for, on ? gang : -1);
        assert_int_equal(allot_queue_job(w.q, gang)->backfilled, on);
        world_free(&w);
    }
}

/* Submits at `now` a job of `tenant` in priority class 0 (the test's
 * class "pinned", not preemptible) with one task of 4 whole GPUs of the
 * models in mask (0: any), runtime unknown. */
static int submit_pinned(struct world *w, int tenant, uint64_t mask, int64_t now)
{
    struct allot_job_spec s = {
        .name = "pinned",
        .tenant = tenant,
        .prio_class = 0,
        .n_tasks = 1,
        .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1, .model_mask = mask}};
    char err[256];
    int id = allot_queue_submit(w->q, &s, now, err, sizeof(err));

    if (id < 0)
        fail_msg("submit pinned: %s", err);
    return id;
}

/* A large gang inside its tenant's nominal, turned away by the cluster's
 * own quota (the cluster is full), reserves as one turned away for lack
 * of room does: a later job that is not preemptible waits behind it
 * instead of taking the room it waits for. Another tenant's work inside
 * its nominal still starts (the guarantee first). */
static void test_reserve_at_cluster_quota(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int b2, bp, big, pinned;
    struct allot_quota qa = {
        .nominal = 8000, .borrow_limit = ALLOT_UNLIMITED, .lend_limit = ALLOT_UNLIMITED};

    o.aging_s = 0;
    o.reserve_gangs = true;
    world_init(&w, 3, 6, o); /* 12 GPUs; a 8 in nominal, b 6 */
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, qa), 0);
    qa.nominal = 12000; /* the cluster */
    assert_int_equal(allot_tenants_set_quota(w.t, 0, ALLOT_RES_GPU, qa), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "pinned", 0, false), 0);
    submit(&w, "b1", w.b, 1, 4, 0, 100000);
    b2 = submit(&w, "b2", w.b, 1, 1, 0, 1000);
    cycle(&w, 0);
    big = submit(&w, "big", w.a, 2, 4, 10, 100); /* in a's nominal; 5 + 8 > 12 */
    bp = submit(&w, "bp", w.b, 1, 1, 10, 0);     /* b inside its nominal */
    /* the shadow: b1's end (11 GPUs free, 3 spare); the pinned job's 4
     * would delay the gang */
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    assert_non_null(strstr(allot_queue_reason(w.q, big), "cluster quota exhausted"));
    assert_int_equal(allot_queue_job(w.q, bp)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, bp)->backfill_for, -1);
    pinned = submit_pinned(&w, w.a, 0, 20);
    cycle(&w, 20);
    assert_int_equal(allot_queue_job(w.q, pinned)->state, ALLOT_JOB_PENDING);
    assert_non_null(
        strstr(allot_queue_reason(w.q, pinned), "held back: GPUs reserved for job big"));
    /* b's short job and its in-nominal job end: the gang starts */
    assert_int_equal(allot_queue_finish(w.q, b2, 1000), 0);
    assert_int_equal(allot_queue_finish(w.q, bp, 1000), 0);
    cycle(&w, 1000);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, pinned)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

/* A reservation counts only GPUs the gang can use: idle GPUs in MIG mode
 * do not make the gang's start time unknown, and a job that would delay
 * it past its shadow start waits behind it. */
static void test_reserve_ignores_mig_gpus(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int big, pinned;

    (void)state;
    o.aging_s = 0;
    o.reserve_gangs = true;
    world_init(&w, 3, 20, o); /* 3 nodes of 4 H100s */
    world_add_mig_node(&w, "m0");
    world_add_mig_node(&w, "m1");
    assert_int_equal(allot_queue_add_prio_class(w.q, "pinned", 0, false), 0);
    submit(&w, "x", w.b, 1, 4, 0, 1000);
    submit(&w, "y", w.b, 1, 2, 0, 100000);
    cycle(&w, 0);
    big = submit(&w, "big", w.a, 2, 4, 10, 100); /* 6 whole GPUs free, 8 idle in MIG mode */
    pinned = submit_pinned(&w, w.a, 1ULL << allot_catalog_find_model(cat, "H100"), 10);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, pinned)->state, ALLOT_JOB_PENDING);
    /* x's end at 1000 frees 4 (10 free, 2 spare): the pinned job's 4
     * would delay the gang */
    assert_string_equal(allot_queue_reason(w.q, pinned),
                        "held back: GPUs reserved for job big (expected start in 990 s)");
    world_free(&w);
}

/* Job `name` of tenant te, class cls: tasks x gpus whole GPUs on nodes
 * labelled zone=`zone`, expected to run est seconds. */
static int submit_zone(struct world *w, const char *name, int te, int cls, int tasks, int gpus,
                       const char *zone, int64_t now, int64_t est)
{
    struct allot_job_spec s = {.name = name,
                               .tenant = te,
                               .prio_class = cls,
                               .n_tasks = tasks,
                               .task = {.num_gpu = gpus, .gpu_milli = 1000, .mig_profile = -1},
                               .est_runtime_s = est};
    char err[128];
    int id;

    s.task.select[0] = allot_label_hash("zone", zone);
    if ((id = allot_queue_submit(w->q, &s, now, err, sizeof(err))) < 0)
        fail_msg("submit %s: %s", name, err);
    return id;
}

/* A large gang's reservation counts only the nodes it may use: none that
 * carry its labels, or too few GPUs there, reserve nothing (the cluster is
 * not held for it); else its expected start is when GPUs come free there,
 * not elsewhere. */
static void test_reserve_on_selected_nodes(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int big, p, none;

    (void)state;
    o.aging_s = 0;
    o.reserve_gangs = true;
    world_init(&w, 0, 40, o);
    world_add_zone_node(&w, "a0", "a");
    world_add_zone_node(&w, "b0", "b");
    world_add_zone_node(&w, "b1", "b");
    assert_int_equal(allot_queue_add_prio_class(w.q, "pinned", 0, false), 0);
    submit_zone(&w, "x", w.b, -1, 1, 4, "b", 0, 1000); /* on b0 or b1, ends at 1000 */
    submit_zone(&w, "y", w.b, -1, 1, 4, "a", 0, 100);  /* on a0, ends at 100 */
    cycle(&w, 0);
    /* no node carries zone=c: no reservation, the pinned job starts */
    none = submit_zone(&w, "nowhere", w.a, -1, 2, 4, "c", 10, 100);
    p = submit_zone(&w, "p", w.a, 0, 1, 2, "b", 10, 100000);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, none)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, none),
                        "no node has the labels of its node selector");
    assert_int_equal(allot_queue_job(w.q, p)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_finish(w.q, p, 20), 0);
    allot_queue_cancel(w.q, none, 20);
    /* zone=a holds 4 GPUs, the gang needs 8: nothing reserved either */
    none = submit_zone(&w, "too-big", w.a, -1, 2, 4, "a", 30, 100);
    p = submit_zone(&w, "p2", w.a, 0, 1, 2, "b", 30, 100000);
    cycle(&w, 30);
    assert_int_equal(allot_queue_job(w.q, p)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_finish(w.q, p, 40), 0);
    allot_queue_cancel(w.q, none, 40);
    /* zone=b: 4 free, 8 once x ends at 1000 (y's end at 100 frees a0, which
     * it cannot use) */
    big = submit_zone(&w, "big", w.a, -1, 2, 4, "b", 50, 100);
    p = submit_zone(&w, "p3", w.a, 0, 1, 2, "b", 50, 100000);
    cycle(&w, 50);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, p)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, p),
                        "held back: GPUs reserved for job big (expected start in 950 s)");
    world_free(&w);
}

/* Job `name` of tenant te in the class "pinned" (not preemptible): tasks x
 * gpus whole GPUs. */
static int submit_in_pinned(struct world *w, const char *name, int te, int tasks, int gpus,
                            int64_t now)
{
    struct allot_job_spec s = {.name = name,
                               .tenant = te,
                               .prio_class = 0,
                               .n_tasks = tasks,
                               .task = {.num_gpu = gpus, .gpu_milli = 1000, .mig_profile = -1}};
    char err[128];
    int id = allot_queue_submit(w->q, &s, now, err, sizeof(err));

    if (id < 0)
        fail_msg("submit %s: %s", name, err);
    return id;
}

/* The gang's own backfill holds its tenant's quota: a (nominal 8, no
 * borrowing) runs its preemptible S (4) as the gang's backfill, so the
 * 8-GPU gang is turned away by a's quota once room comes. It keeps its
 * reservation, takes S back, and starts; a's pinned P (not preemptible),
 * held back all along, must not start in the room meanwhile. Before, the
 * quota refusal ended the reservation, P started on the freed node, and
 * the gang waited behind it for good. */
static void test_gang_keeps_reservation_past_own_backfill(void **state)
{
    struct allot_queue_opts o = base;
    struct allot_quota qa = {8000, 0, ALLOT_UNLIMITED},
                       qb = {12000, ALLOT_UNLIMITED, ALLOT_UNLIMITED};
    struct world w;
    int b1, gang, s, p;

    (void)state;
    o.aging_s = 0;
    o.reserve_gangs = true;
    world_init(&w, 4, 8, o); /* 16 GPUs */
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, qa), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, qb), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "pinned", 0, false), 0);
    b1 = submit(&w, "b1", w.b, 1, 4, 0, 1000); /* inside b's nominal: not reclaimable */
    submit(&w, "b2", w.b, 1, 4, 0, 100000);
    submit(&w, "b3", w.b, 1, 4, 0, 100000);
    cycle(&w, 0);
    gang = submit(&w, "gang", w.a, 2, 4, 10, 100);
    cycle(&w, 10);
    s = submit(&w, "s", w.a, 1, 4, 20, 0);
    p = submit_in_pinned(&w, "p", w.a, 1, 4, 21);
    cycle(&w, 30);
    assert_int_equal(allot_queue_job(w.q, s)->backfill_for, gang);
    assert_non_null(strstr(allot_queue_reason(w.q, p), "held back: GPUs reserved for job gang"));
    assert_int_equal(allot_queue_finish(w.q, b1, 1000), 0);
    cycle(&w, 1000); /* the gang takes s back; p stays held */
    assert_int_equal(allot_queue_job(w.q, s)->state, ALLOT_JOB_STOPPING);
    assert_int_equal(allot_queue_job(w.q, p)->state, ALLOT_JOB_PENDING);
    assert_non_null(strstr(allot_queue_reason(w.q, p), "held back: GPUs reserved for job gang"));
    cycle(&w, 1030); /* s's grace is over */
    assert_int_equal(allot_queue_job(w.q, gang)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, p)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

/* The GPUs spare at the holder's expected start go to jobs that start in
 * them, not to those that pass the test and are then turned away. The
 * 4-GPU gang's shadow is 1000 with 2 GPUs spare; b's j1 (2) fits them but
 * b is at its limit; a's j2 (2, not preemptible) then fits them too and
 * starts. Before, j1 took the spare GPUs without starting and j2 was held
 * back. */
static void test_spare_gpus_taken_only_by_a_start(void **state)
{
    struct allot_queue_opts o = base;
    struct allot_quota qb = {14000, 0, ALLOT_UNLIMITED};
    struct world w;
    int gang, j1, j2;

    (void)state;
    o.order = "fifo";
    o.aging_s = 0;
    o.reserve_gangs = true;
    o.large_gang_gpus = 4;
    world_init(&w, 4, 8, o);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, qb), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "pinned", 0, false), 0);
    submit(&w, "x", w.b, 1, 4, 0, 1000); /* frees 4 at 1000 */
    submit(&w, "y", w.b, 1, 4, 0, 100000);
    submit(&w, "z", w.b, 1, 4, 0, 100000);
    submit(&w, "v", w.b, 1, 2, 0, 100000); /* 2 GPUs stay free */
    cycle(&w, 0);
    gang = submit(&w, "gang", w.a, 2, 2, 10, 100);
    j1 = submit_in_pinned(&w, "j1", w.b, 1, 2, 11);
    j2 = submit_in_pinned(&w, "j2", w.a, 1, 2, 12);
    cycle(&w, 20);
    assert_int_equal(allot_queue_job(w.q, gang)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, j1)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, j2)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A job preempting a mix of victims, one stopped at once and one with a
 * grace period: all of them stop when the grace ends, or once the
 * processes of all are gone (allot_queue_stopped), so that the room comes
 * free for it whole. Before, the victim without a grace period was
 * stopped and requeued at once and took its GPUs back, the other was
 * placed again when its grace ended, and the job preempted them again,
 * for ever. A victim gone early is let go once the other leaves another
 * way (cancelled) or the job it made room for no longer waits. */
static void test_victims_stay_off_the_room_they_free(void **state)
{
    char err[128];

    /* gone: 0 none reports, 1 both do, 2 the first does and the second is
     * cancelled, 3 the first does and the preemptor is cancelled, 4 the
     * preemptor is cancelled and then the first is gone: the second keeps
     * its grace */
    for (int gone = 0; gone < 5; gone++) {
        struct world w;
        struct allot_queue_opts o = base;
        int v[2], hi;

        o.grace_s = 5;
        o.min_runtime_s = 15;
        world_init(&w, 1, 4, o); /* one node of 4 GPUs */
        assert_int_equal(allot_queue_add_prio_class(w.q, "training", 100, true), 0);
        assert_int_equal(allot_queue_add_prio_class(w.q, "inference", 1000, false), 1);
        for (int i = 0; i < 2; i++) {
            struct allot_job_spec s = {
                .name = i ? "ckpt" : "plain",
                .tenant = w.a,
                .prio_class = 0,
                .n_tasks = 1,
                .task = {.num_gpu = 2, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 500},
                .checkpointable = i == 1};
            v[i] = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
            assert_true(v[i] >= 0);
        }
        cycle(&w, 0);
        assert_int_equal(w.starts, 2);
        struct allot_job_spec s = {
            .name = "urgent",
            .tenant = w.a,
            .prio_class = 1,
            .n_tasks = 1,
            .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 500}};
        hi = allot_queue_submit(w.q, &s, 17, err, sizeof(err));
        assert_true(hi >= 0);
        cycle(&w, 17);
        assert_int_equal(w.preempts, 2);
        for (int i = 0; i < 2; i++) /* both hold their GPUs until the grace ends */
            assert_int_equal(allot_queue_job(w.q, v[i])->state, ALLOT_JOB_STOPPING);
        assert_string_equal(allot_queue_reason(w.q, v[0]), /* in UTC, as allotd's times */
                            "stopping: preempted for job urgent; its grace period ends at "
                            "1970-01-01T00:00:22Z");
        if (gone == 4) {
            assert_int_equal(allot_queue_cancel(w.q, hi, 18), 0);
            cycle(&w, 18);
            assert_int_equal(allot_queue_stopped(w.q, v[0], 19), 0);
            cycle(&w, 19);
            assert_int_not_equal(allot_queue_job(w.q, v[0])->state, ALLOT_JOB_STOPPING);
            assert_int_equal(allot_queue_job(w.q, v[1])->state, ALLOT_JOB_STOPPING);
            cycle(&w, 21);
            assert_int_equal(allot_queue_job(w.q, v[1])->state, ALLOT_JOB_STOPPING);
            cycle(&w, 22); /* its grace's end */
            assert_int_not_equal(allot_queue_job(w.q, v[1])->state, ALLOT_JOB_STOPPING);
            world_free(&w);
            continue;
        }
        if (gone) {
            /* the first is gone at once: held until the other is gone too */
            assert_int_equal(allot_queue_stopped(w.q, v[0], 18), 0);
            cycle(&w, 18);
            assert_int_equal(allot_queue_job(w.q, v[0])->state, ALLOT_JOB_STOPPING);
            assert_int_equal(allot_queue_job(w.q, hi)->state, ALLOT_JOB_PENDING);
            if (gone == 1)
                assert_int_equal(allot_queue_stopped(w.q, v[1], 19), 0);
            else
                assert_int_equal(allot_queue_cancel(w.q, gone == 2 ? v[1] : hi, 19), 0);
        }
        for (int64_t t = 18 + !!gone; t <= 60; t++) {
            cycle(&w, t);
            if (gone == 3 && t == 19) /* let go at once (and placed again), not at 22 */
                assert_int_not_equal(allot_queue_job(w.q, v[0])->state, ALLOT_JOB_STOPPING);
        }
        if (gone == 3) {
            world_free(&w);
            continue;
        }
        assert_int_equal(allot_queue_job(w.q, hi)->state, ALLOT_JOB_RUNNING);
        assert_int_equal(allot_queue_job(w.q, hi)->start, gone ? 19 : 17 + 5);
        assert_int_equal(w.preempts, 2); /* each victim once */
        for (int i = 0; i < 2 - (gone == 2); i++)
            assert_int_equal(allot_queue_job(w.q, v[i])->state, ALLOT_JOB_PENDING);
        world_free(&w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backfill_respects_reservation),
        cmocka_unit_test(test_reserve_gangs),
        cmocka_unit_test(test_reserve_on_selected_nodes),
        cmocka_unit_test(test_reserve_at_cluster_quota),
        cmocka_unit_test(test_reserve_ignores_mig_gpus),
        cmocka_unit_test(test_gang_keeps_reservation_past_own_backfill),
        cmocka_unit_test(test_spare_gpus_taken_only_by_a_start),
        cmocka_unit_test(test_victims_stay_off_the_room_they_free),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
