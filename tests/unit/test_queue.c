/*
 * Unit tests of the multi-tenant queue (src/core/queue.c): gangs placed
 * all-or-nothing, quota and capacity pending reasons (their text), reclaim
 * of borrowed work with a grace period, minimum runtime, priority
 * preemption inside a tenant only, no preemption loops (reservations and
 * backfill: test_queue_reserve.c), aging, runtime limits, the reason
 * each preemption gives (priority, LAS, reclaim), the per-cycle budget of
 * victim searches, every allocation of submit, finish, cancel and cycles
 * with preemption failing in turn, and the invariants after every cycle.
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

static void test_gang_all_or_nothing(void **state)
{
    struct world w;
    int id;

    world_init(&w, 2, 4, base);
    id = submit(&w, "big", w.a, 3, 4, 0, 0); /* 3 x 4 GPUs, quota for 8 in all */
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_cluster_used_milli(w.c), 0);
    /* more than the cluster's quota of 8 in all: it can never start */
    assert_string_equal(allot_queue_reason(w.q, id),
                        "can never start: it asks for 12 GPU, more than the cluster's 8 (quota)");
    world_free(&w);
    /* with room in quota but not in the cluster: a capacity reason, and a
     * partial fit holds nothing */
    world_init(&w, 2, 16, base);
    id = submit(&w, "big", w.a, 3, 4, 0, 0);
    cycle(&w, 0);
    assert_int_equal(allot_cluster_used_milli(w.c), 0);
    assert_string_equal(allot_queue_reason(w.q, id),
                        "no room for 3 tasks of 4 GPUs each (most free on one node: 4)");
    id = submit(&w, "two", w.a, 2, 4, 0, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_cluster_used_milli(w.c), 8000);
    world_free(&w);
}

static void test_quota_reason(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int id;

    o.borrowing = false;
    world_init(&w, 4, 4, o);
    submit(&w, "a1", w.a, 1, 4, 0, 0);
    id = submit(&w, "a2", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    assert_string_equal(allot_queue_reason(w.q, id),
                        "tenant ml/team-a at nominal (4/4 GPU), borrowing is off");
    world_free(&w);
}

/* Team-b fills the 8 GPUs of a 2x4 world with 1-GPU jobs b0..b7 (their
 * ids in ids[] unless NULL), and a cycle at 0 starts them: 4 inside its
 * nominal, 4 borrowed. */
static void fill_with_b(struct world *w, int *ids)
{
    char name[16];

    for (int i = 0; i < 8; i++) {
        int id;
        allot_fmt(name, sizeof(name), "b%d", i);
        id = submit(w, name, w->b, 1, 1, 0, 0);
        if (ids)
            ids[i] = id;
    }
    cycle(w, 0);
}

/* team-b borrows team-a's idle GPUs; team-a comes back and reclaims them. */
static void test_reclaim_with_grace(void **state)
{
    struct world w;
    int bj[8], aj[2];

    world_init(&w, 2, 4, base); /* 8 GPUs, 4 each */
    fill_with_b(&w, bj);
    assert_int_equal(w.starts, 8);
    for (int i = 4; i < 8; i++)
        assert_true(allot_queue_job(w.q, bj[i])->borrowed);
    aj[0] = submit(&w, "a0", w.a, 1, 1, 100, 0);
    aj[1] = submit(&w, "a1", w.a, 1, 1, 100, 0);
    cycle(&w, 100);
    /* victims get the grace signal; a waits with a specific reason */
    assert_int_equal(w.preempts, 2);
    assert_string_equal(w.last_why, "borrowed capacity reclaimed by job a1");
    assert_string_equal(allot_queue_reason(w.q, aj[0]),
                        "waiting for reclaim of 1 GPU from ml/team-b (grace 30 s)");
    assert_int_equal(allot_queue_next_wakeup(w.q), 130);
    /* a cycle in the grace period finds no room for a yet: it still says why */
    cycle(&w, 110);
    assert_int_equal(allot_queue_job(w.q, aj[0])->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, aj[0]),
                        "waiting for reclaim of 1 GPU from ml/team-b (grace 30 s)");
    /* in-nominal work of team-b was not touched */
    for (int i = 0; i < 4; i++)
        assert_int_equal(allot_queue_job(w.q, bj[i])->state, ALLOT_JOB_RUNNING);
    cycle(&w, 130);
    assert_int_equal(allot_queue_job(w.q, aj[0])->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, aj[1])->state, ALLOT_JOB_RUNNING);
    assert_int_equal(w.stops, 2);
    /* no loop: the requeued b jobs may not reclaim from a (a is in nominal) */
    cycle(&w, 200);
    assert_int_equal(w.preempts, 2);
    world_free(&w);
}

/* Victims whose processes are gone before their grace period ends
 * (allot_queue_stopped) give their room at once: the next cycle starts
 * the jobs they were stopped for, not the cycle at the grace's end. */
static void test_stopped_before_the_grace_ends(void **state)
{
    struct world w;
    int bj[8], aj[2], victim[2];

    world_init(&w, 2, 4, base); /* 8 GPUs, 4 each */
    fill_with_b(&w, bj);
    aj[0] = submit(&w, "a0", w.a, 1, 1, 100, 0);
    aj[1] = submit(&w, "a1", w.a, 1, 1, 100, 0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 2);
    for (int i = 0, n = 0; i < 8; i++)
        if (allot_queue_job(w.q, bj[i])->state == ALLOT_JOB_STOPPING)
            victim[n++] = bj[i];
    /* one victim is gone at 103: its room goes to one of a's jobs */
    assert_int_equal(allot_queue_stopped(w.q, victim[0], 103), 0);
    assert_int_equal(allot_queue_next_wakeup(w.q), 103);
    cycle(&w, 103);
    assert_int_equal(w.stops, 1);
    assert_int_equal(allot_queue_job(w.q, victim[0])->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, victim[1])->state, ALLOT_JOB_STOPPING);
    assert_int_equal((allot_queue_job(w.q, aj[0])->state == ALLOT_JOB_RUNNING) +
                         (allot_queue_job(w.q, aj[1])->state == ALLOT_JOB_RUNNING),
                     1);
    /* the other keeps its grace; a job not stopping is refused */
    assert_int_equal(allot_queue_stopped(w.q, bj[0], 104), ALLOT_ESTATE);
    assert_int_equal(allot_queue_stopped(w.q, 9999, 104), ALLOT_ENOENT);
    cycle(&w, 130);
    assert_int_equal(w.stops, 2);
    assert_int_equal(allot_queue_job(w.q, aj[0])->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, aj[1])->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* The per-tenant counts the fair shares read (pending, waiting for
 * victims, stopping) follow every change at once, not only at the next
 * cycle: a waiting job cancelled between cycles leaves them exact. */
static void test_counts_follow_cancel(void **state)
{
    struct world w;
    int a[2];
    struct allot_queue_opts o = base;
    char err[256];

    (void)state;
    o.fair_reclaim_s = 300;  /* the fair shares are on */
    world_init(&w, 2, 4, o); /* 8 GPUs, 4 each */
    fill_with_b(&w, NULL);
    a[0] = submit(&w, "a0", w.a, 1, 1, 100, 0);
    a[1] = submit(&w, "a1", w.a, 1, 1, 100, 0);
    cycle(&w, 100);
    assert_int_equal(allot_queue_job(w.q, a[1])->stopping_victims, 1);
    assert_int_equal(allot_queue_cancel(w.q, a[1], 110), 0);
    if (allot_queue_check_invariants(w.q, err, sizeof(err)) != 0)
        fail_msg("after a cancel: %s", err);
    cycle(&w, 130); /* the grace ends: a0 starts, a1's victim is stopped */
    assert_int_equal(allot_queue_job(w.q, a[0])->state, ALLOT_JOB_RUNNING);
    if (allot_queue_check_invariants(w.q, err, sizeof(err)) != 0)
        fail_msg("after the grace: %s", err);
    world_free(&w);
}

static void test_min_runtime(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int id;

    o.min_runtime_s = 600;
    world_init(&w, 2, 4, o);
    fill_with_b(&w, NULL);
    id = submit(&w, "a0", w.a, 1, 1, 100, 0);
    cycle(&w, 100); /* borrowed jobs only 100 s old */
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_PENDING);
    /* the queue asks to be woken when they come of age */
    assert_int_equal(allot_queue_next_wakeup(w.q), 600);
    cycle(&w, 600); /* now they are past it */
    assert_int_equal(w.preempts, 1);
    world_free(&w);
}

static void test_priority_preemption(void **state)
{
    struct world w;
    struct allot_job_spec s = {.name = "urgent",
                               .prio_class = 1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    char err[128];
    int id;

    world_init(&w, 1, 4, base); /* 4 GPUs, 4 each: no room to borrow */
    assert_int_equal(allot_queue_add_prio_class(w.q, "training", 10, true), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "inference", 100, false), 1);
    submit(&w, "train", w.a, 1, 4, 0, 0);
    cycle(&w, 0);
    /* team-b's urgent job may not preempt team-a's in-nominal work */
    s.tenant = w.b;
    id = allot_queue_submit(w.q, &s, 10, err, sizeof(err));
    cycle(&w, 10);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_PENDING);
    allot_queue_cancel(w.q, id, 11);
    /* inside team-a it may */
    s.tenant = w.a;
    s.name = "urgent-a";
    id = allot_queue_submit(w.q, &s, 12, err, sizeof(err));
    cycle(&w, 12);
    assert_int_equal(w.preempts, 1);
    cycle(&w, 42);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    /* the preempted training job, requeued, cannot preempt the inference job */
    cycle(&w, 5000);
    assert_int_equal(w.preempts, 1);
    world_free(&w);
}

/* Nodes zone=a and zone=b, a training job on each (the one on zone=a the
 * cheaper victim: it started later): an inference job selecting zone=b
 * preempts only the job on zone=b, the one node it can use. */
static void test_preemption_on_selected_nodes(void **state)
{
    struct world w;
    struct allot_job_spec s = {.prio_class = 0,
                               .n_tasks = 1,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    char err[128];
    int onb, ona, urgent;

    (void)state;
    world_init(&w, 0, 8, base);
    assert_int_equal(world_add_zone_node(&w, "na", "a"), 0);
    assert_int_equal(world_add_zone_node(&w, "nb", "b"), 1);
    assert_int_equal(allot_queue_add_prio_class(w.q, "training", 10, true), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "inference", 100, false), 1);
    s.tenant = w.a;
    s.name = "train-b";
    s.task.select[0] = allot_label_hash("zone", "b");
    onb = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    cycle(&w, 0);
    s.name = "train-a";
    s.task.select[0] = allot_label_hash("zone", "a");
    ona = allot_queue_submit(w.q, &s, 100, err, sizeof(err));
    cycle(&w, 100);
    assert_int_equal(allot_queue_job(w.q, ona)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, onb)->state, ALLOT_JOB_RUNNING);
    s.name = "urgent";
    s.prio_class = 1;
    s.task.select[0] = allot_label_hash("zone", "b");
    urgent = allot_queue_submit(w.q, &s, 200, err, sizeof(err));
    assert_true(urgent >= 0);
    cycle(&w, 200);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][0], onb);
    assert_int_equal(allot_queue_job(w.q, ona)->state, ALLOT_JOB_RUNNING);
    cycle(&w, 300);
    assert_int_equal(allot_queue_job(w.q, urgent)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, urgent)->pl[0].node, 1);
    world_free(&w);
}

/* Short of CPU, not GPUs, on the one node it may use (zone=b): a job
 * preempts there only. The cheaper victim on zone=a, which holds its node
 * alone (so no victim would be given back after the search), is left. */
static void test_preemption_for_cpu_on_selected_nodes(void **state)
{
    struct world w;
    struct allot_job_spec s = {
        .prio_class = 0, .n_tasks = 1, .task = {.mig_profile = -1, .cpu_milli = 64000}};
    char err[128];
    int ca, cb, urgent;

    (void)state;
    world_init(&w, 0, 8, base);
    assert_int_equal(world_add_zone_node(&w, "na", "a"), 0);
    assert_int_equal(world_add_zone_node(&w, "nb", "b"), 1);
    assert_int_equal(allot_queue_add_prio_class(w.q, "training", 10, true), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "inference", 100, false), 1);
    s.tenant = w.a;
    s.name = "cb";
    s.task.select[0] = allot_label_hash("zone", "b");
    cb = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    cycle(&w, 0);
    allot_tenants_get(w.t, w.b)->isolation = ALLOT_ISO_EXCLUSIVE_NODE;
    s.tenant = w.b;
    s.name = "ca";
    s.task.cpu_milli = 1000;
    s.task.select[0] = allot_label_hash("zone", "a");
    ca = allot_queue_submit(w.q, &s, 100, err, sizeof(err));
    cycle(&w, 100);
    assert_int_equal(allot_queue_job(w.q, cb)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, ca)->state, ALLOT_JOB_RUNNING);
    s.tenant = w.a;
    s.name = "urgent";
    s.prio_class = 1;
    s.task =
        (struct allot_task){.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000};
    s.task.select[0] = allot_label_hash("zone", "b");
    urgent = allot_queue_submit(w.q, &s, 200, err, sizeof(err));
    assert_true(urgent >= 0);
    cycle(&w, 200);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][0], cb);
    assert_int_equal(allot_queue_job(w.q, ca)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A class changed in place applies to the jobs already queued or running. */
static void test_prio_class_changed(void **state)
{
    struct world w;
    struct allot_job_spec s = {.name = "hi",
                               .prio_class = 1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    char err[128];
    int id;

    world_init(&w, 1, 4, base);
    assert_int_equal(allot_queue_add_prio_class(w.q, "base", 10, false), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "hi", 50, false), 1);
    assert_int_equal(allot_queue_set_prio_class(w.q, 2, "x", 1, true), ALLOT_EINVAL);
    assert_int_equal(allot_queue_set_prio_class(w.q, 0, "hi", 1, true), ALLOT_EEXIST);
    assert_int_equal(allot_queue_set_prio_class(w.q, 0, "", 1, true), ALLOT_EINVAL);
    s.tenant = w.a;
    s.name = "base";
    s.prio_class = 0;
    assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0);
    cycle(&w, 0);
    s.name = "hi";
    s.prio_class = 1;
    id = allot_queue_submit(w.q, &s, 10, err, sizeof(err));
    cycle(&w, 10);
    assert_int_equal(w.preempts, 0); /* "base" is not preemptible */
    assert_int_equal(allot_queue_set_prio_class(w.q, 0, "base", 10, true), 0);
    cycle(&w, 20);
    assert_int_equal(w.preempts, 1);
    cycle(&w, 60);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* Many tenants' jobs arriving and finishing: a victim never preempts its preemptor. */
static void test_no_preemption_loops(void **state)
{
    struct world w;
    struct allot_rng r;
    char name[16];
    int ids[200], n = 0;

    world_init(&w, 2, 4, base);
    allot_rng_seed(&r, 3);
    for (int64_t now = 0; now < 20000; now += 50) {
        if (n < 200 && allot_rng_below(&r, 2) == 0) {
            allot_fmt(name, sizeof(name), "j%d", n);
            ids[n] = submit(&w, name, allot_rng_below(&r, 2) ? w.a : w.b, 1,
                            1 + (int)allot_rng_below(&r, 2), now, 0);
            n++;
        }
        for (int i = 0; i < n; i++)
            if (allot_queue_job(w.q, ids[i])->state == ALLOT_JOB_RUNNING &&
                now - allot_queue_job(w.q, ids[i])->start > 400 && allot_rng_below(&r, 4) == 0)
                assert_int_equal(allot_queue_finish(w.q, ids[i], now), 0);
        cycle(&w, now);
    }
    for (int i = 0; i < w.n_pairs; i++)
        for (int k = 0; k < w.n_pairs; k++)
            if (w.pairs[i][0] == w.pairs[k][1] && w.pairs[i][1] == w.pairs[k][0])
                fail_msg("jobs %d and %d preempted each other", w.pairs[i][0], w.pairs[i][1]);
    world_free(&w);
}

/* A limit changed while the job runs (scontrol update TimeLimit): raised,
 * the old limit's timer no longer ends it; lowered past its run time, it
 * ends at the next cycle; changed while it waits, it counts from its start. */
static void test_runtime_limit_changed(void **state)
{
    struct world w;
    char err[256];
    struct allot_job_spec s = {.name = "lim",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .limit_s = 60,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    int id, waits;

    world_init(&w, 1, 4, base);
    s.tenant = w.a;
    id = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    s.task.num_gpu = 4; /* waits for the first one's GPU */
    waits = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, waits)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_set_limit(w.q, id, 120), 0);
    assert_int_equal(allot_queue_set_limit(w.q, waits, 30), 0);
    cycle(&w, 61);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_next_wakeup(w.q), 121);
    /* lowered below what it has run: it ends at once */
    assert_int_equal(allot_queue_set_limit(w.q, id, 50), 0);
    assert_true(allot_queue_next_wakeup(w.q) <= 61);
    cycle(&w, 62);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_DONE);
    assert_string_equal(allot_queue_reason(w.q, id), "stopped at its runtime limit (50 s)");
    /* the waiting job started in its place with the limit it was given */
    assert_int_equal(allot_queue_job(w.q, waits)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_next_wakeup(w.q), 62 + 31);
    /* none: it runs on */
    assert_int_equal(allot_queue_set_limit(w.q, waits, 0), 0);
    cycle(&w, 1000);
    assert_int_equal(allot_queue_job(w.q, waits)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_set_limit(w.q, id, 10), ALLOT_ESTATE);
    assert_int_equal(allot_queue_set_limit(w.q, waits, -1), ALLOT_EINVAL);
    assert_int_equal(allot_queue_set_limit(w.q, 999, 10), ALLOT_ENOENT);
    world_free(&w);
}

static void test_runtime_limit_and_validation(void **state)
{
    struct world w;
    char err[256];
    struct allot_job_spec s = {.name = "lim",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .limit_s = 60,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    int id;

    world_init(&w, 1, 4, base);
    s.tenant = w.a;
    id = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    cycle(&w, 0);
    /* times are whole seconds: a run started at 0.9 s has run 60 s only
     * once it is 61 by the clock, so the limit ends there, never early */
    assert_int_equal(allot_queue_next_wakeup(w.q), 61);
    cycle(&w, 60);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    cycle(&w, 61);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_DONE);
    assert_string_equal(allot_queue_reason(w.q, id), "stopped at its runtime limit (60 s)");
    assert_int_equal(allot_cluster_used_milli(w.c), 0);
    world_free(&w);

    /* counted from when the caller says it runs (allotd: its agent's
     * report), not from its placement: a start that waits spends none */
    struct allot_queue_opts o = base;
    o.limit_from_running = true;
    world_init(&w, 1, 4, o);
    s.tenant = w.a;
    id = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    cycle(&w, 0);
    cycle(&w, 100);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_running(w.q, id, 90), 0);
    assert_int_equal(allot_queue_next_wakeup(w.q), 151);
    assert_int_equal(allot_queue_running(w.q, id, 10), 0); /* never earlier */
    cycle(&w, 150);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    cycle(&w, 151);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_DONE);
    assert_int_equal(allot_queue_running(w.q, id, 200), ALLOT_ESTATE);
    assert_int_equal(allot_queue_running(w.q, 999, 200), ALLOT_ENOENT);
    world_free(&w);
    /* one never said to run (a start that hangs) counts from its placement
     * plus ALLOT_LIMIT_START_ALLOWANCE_S: it does not hold its GPUs for good */
    world_init(&w, 1, 4, o);
    s.tenant = w.a;
    id = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    cycle(&w, 0);
    assert_int_equal(allot_queue_next_wakeup(w.q), ALLOT_LIMIT_START_ALLOWANCE_S + 61);
    cycle(&w, ALLOT_LIMIT_START_ALLOWANCE_S + 60);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    cycle(&w, ALLOT_LIMIT_START_ALLOWANCE_S + 61);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_DONE);
    /* bad submissions name the field */
    s.n_tasks = 0;
    assert_int_equal(allot_queue_submit(w.q, &s, 0, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "n_tasks"));
    s.n_tasks = 1;
    s.tenant = allot_tenants_find(w.t, "ml");
    assert_int_equal(allot_queue_submit(w.q, &s, 0, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "leaf"));
    s.tenant = w.a;
    s.task.gpu_milli = 2000;
    assert_int_equal(allot_queue_submit(w.q, &s, 0, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "gpu_milli"));
    world_free(&w);
}

/* A two-node gang lands inside one rack when one rack can hold it. */
static void test_gang_prefers_one_rack(void **state)
{
    struct world w;
    char err[256], name[16];
    int id;

    world_init(&w, 0, 16, base);
    for (int i = 0; i < 4; i++) {
        struct allot_node_spec sp = {.name = name,
                                     .model = "H100",
                                     .cpu_milli = 64000,
                                     .mem_mib = 262144,
                                     .n_gpus = 4,
                                     .rack = i / 2};
        allot_fmt(name, sizeof(name), "r%d-%d", i / 2, i % 2);
        assert_int_equal(allot_cluster_add_node(w.c, &sp, err, sizeof(err)), i);
    }
    /* rebuild the queue so it sees the nodes' capacity */
    allot_queue_free(w.q);
    w.q = allot_queue_new(w.c, w.t, &base, err, sizeof(err));
    assert_non_null(w.q);
    for (uint64_t seed = 1; seed <= 8; seed++) {
        allot_cluster_shuffle_ranks(w.c, seed);
        allot_fmt(name, sizeof(name), "gang%d", (int)seed);
        id = submit(&w, name, w.a, 2, 4, (int64_t)seed * 10, 0);
        cycle(&w, (int64_t)seed * 10);
        assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
        assert_int_equal(allot_cluster_node(w.c, allot_queue_job(w.q, id)->pl[0].node)->rack,
                         allot_cluster_node(w.c, allot_queue_job(w.q, id)->pl[1].node)->rack);
        assert_int_equal(allot_queue_finish(w.q, id, (int64_t)seed * 10 + 5), 0);
    }
    world_free(&w);
}

/* A gang of whole GPUs that one node can hold goes onto that node, not
 * into holes on several (the policy alone fills the holes); when no node
 * holds it, it still runs across nodes. */
static void test_gang_prefers_one_node(void **state)
{
    struct world w;
    int x, y, g1, z, g2;

    (void)state;
    world_init(&w, 3, 12, base); /* 3 nodes of 4 H100s */
    x = submit(&w, "x", w.a, 1, 3, 0, 0);
    y = submit(&w, "y", w.a, 1, 3, 0, 0);
    cycle(&w, 0);
    assert_int_not_equal(allot_queue_job(w.q, x)->pl[0].node, allot_queue_job(w.q, y)->pl[0].node);
    g1 = submit(&w, "g1", w.b, 2, 1, 1, 0); /* a hole of one on two nodes; h2 whole */
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, g1)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, g1)->pl[0].node, allot_queue_job(w.q, g1)->pl[1].node);
    assert_int_equal(allot_queue_finish(w.q, g1, 2), 0);
    z = submit(&w, "z", w.a, 1, 3, 2, 0);
    cycle(&w, 2);
    assert_int_equal(allot_queue_job(w.q, z)->state, ALLOT_JOB_RUNNING);
    g2 = submit(&w, "g2", w.b, 3, 1, 3, 0); /* one free GPU on each node */
    cycle(&w, 3);
    assert_int_equal(allot_queue_job(w.q, g2)->state, ALLOT_JOB_RUNNING);
    assert_true(allot_queue_job(w.q, g2)->pl[0].node != allot_queue_job(w.q, g2)->pl[1].node ||
                allot_queue_job(w.q, g2)->pl[1].node != allot_queue_job(w.q, g2)->pl[2].node);
    assert_int_equal(allot_cluster_used_milli(w.c), 12000);
    world_free(&w);
}

/* Two-queue LAS: a job with little service preempts one with much. */
static void test_las_preemption(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int longj, fresh;

    o.order = "las";
    o.quotas = false;
    o.las_threshold_gpu_s = 3600;
    world_init(&w, 1, 4, o); /* 4 GPUs */
    longj = submit(&w, "long", w.a, 1, 4, 0, 0);
    cycle(&w, 0);
    fresh = submit(&w, "fresh", w.b, 1, 4, 100, 0);
    cycle(&w, 100); /* long has had 400 GPU-s: below the threshold */
    assert_int_equal(w.preempts, 0);
    cycle(&w, 1000); /* 4000 GPU-s: above it */
    assert_int_equal(w.preempts, 1);
    /* the reason names the LAS rule, not a reclaim or a priority */
    assert_string_equal(w.last_why,
                        "preempted (over the LAS service threshold) for less-served job fresh");
    assert_string_equal(allot_queue_reason(w.q, fresh),
                        "waiting for preemption of 4 GPUs from ml/team-a (grace 30 s)");
    cycle(&w, 1030);
    assert_int_equal(allot_queue_job(w.q, fresh)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, longj)->state, ALLOT_JOB_PENDING);
    /* the long job, requeued in the lower queue, never preempts back */
    cycle(&w, 5000);
    assert_int_equal(w.preempts, 1);
    world_free(&w);
}

/* Aging: a job that has waited aging_s goes before newer jobs of tenants
 * with a lower fair-share key. */
static void test_aging(void **state)
{
    for (int aging = 0; aging <= 1; aging++) {
        struct allot_queue_opts o = base;
        struct world w;
        char name[16];
        int old;

        o.quotas = false;
        o.preemption = false;
        o.aging_s = aging ? 300 : 0;
        world_init(&w, 1, 4, o);
        for (int i = 0; i < 4; i++) {
            allot_fmt(name, sizeof(name), "a%d", i);
            submit(&w, name, w.a, 1, 1, 0, 0);
        }
        cycle(&w, 0);
        old = submit(&w, "a-old", w.a, 1, 1, 1, 0);
        /* every 200 s one GPU frees (first a's, then b's previous job) and
         * a new job of b arrives: b holds nothing when the GPU is handed out */
        for (int k = 0, prev = -1; k < 3; k++) {
            int64_t t = 200 * (k + 1);
            allot_fmt(name, sizeof(name), "b%d", k);
            if (prev >= 0 && allot_queue_job(w.q, prev)->state == ALLOT_JOB_RUNNING)
                assert_int_equal(allot_queue_finish(w.q, prev, t), 0);
            prev = submit(&w, name, w.b, 1, 1, t, 0);
            if (k == 0)
                assert_int_equal(allot_queue_finish(w.q, 0, t), 0); /* the first free GPU */
            cycle(&w, t);
        }
        /* without aging b always wins; with it a-old goes once it is 300 s old */
        assert_int_equal(allot_queue_job(w.q, old)->state,
                         aging ? ALLOT_JOB_RUNNING : ALLOT_JOB_PENDING);
        world_free(&w);
    }
}

/* Reclaim takes the cheapest borrowed work: the youngest job loses least. */
static void test_reclaim_order(void **state)
{
    struct world w;
    char name[16];
    int b_old[4], b_young, a;

    world_init(&w, 2, 4, base); /* 8 GPUs, 4 each */
    for (int i = 0; i < 4; i++) {
        allot_fmt(name, sizeof(name), "b-in%d", i);
        submit(&w, name, w.b, 1, 1, 0, 0); /* b's nominal */
    }
    for (int i = 0; i < 3; i++) {
        allot_fmt(name, sizeof(name), "b-old%d", i);
        b_old[i] = submit(&w, name, w.b, 1, 1, 0, 0);
    }
    cycle(&w, 0);
    b_young = submit(&w, "b-young", w.b, 1, 1, 900, 0);
    cycle(&w, 900);
    a = submit(&w, "a0", w.a, 1, 1, 1000, 0);
    cycle(&w, 1000);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(allot_queue_job(w.q, b_young)->state, ALLOT_JOB_STOPPING);
    for (int i = 0; i < 3; i++)
        assert_int_equal(allot_queue_job(w.q, b_old[i])->state, ALLOT_JOB_RUNNING);
    cycle(&w, 1030);
    assert_int_equal(allot_queue_job(w.q, a)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A search keeps no victim the room does not need: reclaim for a 4-GPU
 * job first takes the cheapest borrowed work anywhere until quota admits
 * it (two 1-GPU jobs, then a 4-GPU one), and only the 4-GPU job's node has
 * room for it, so the two small ones are reprieved and keep running. */
static void test_reclaim_spares_needless(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int b5, small[2], a;

    (void)state;
    o.placement = "firstfit";
    world_init(&w, 3, 6, o);                      /* 12 GPUs, 6 each */
    submit(&w, "b1", w.b, 1, 4, 0, 0);            /* node 0, inside b's nominal */
    submit(&w, "b2", w.b, 1, 2, 0, 0);            /* node 1, inside */
    small[0] = submit(&w, "b3", w.b, 1, 1, 0, 0); /* node 1, borrowed */
    small[1] = submit(&w, "b4", w.b, 1, 1, 0, 0); /* node 1, borrowed */
    b5 = submit(&w, "b5", w.b, 1, 4, 0, 0);       /* node 2, borrowed */
    cycle(&w, 0);
    for (int i = 0; i < 2; i++)
        assert_true(allot_queue_job(w.q, small[i])->borrowed);
    assert_true(allot_queue_job(w.q, b5)->borrowed);
    a = submit(&w, "a1", w.a, 1, 4, 100, 0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(allot_queue_job(w.q, b5)->state, ALLOT_JOB_STOPPING);
    for (int i = 0; i < 2; i++)
        assert_int_equal(allot_queue_job(w.q, small[i])->state, ALLOT_JOB_RUNNING);
    cycle(&w, 130);
    assert_int_equal(allot_queue_job(w.q, a)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A fruitless search puts its victims back so that isolation allows it:
 * an exclusive-node job of team-b runs beside a shared job of team-b that
 * joined its node after team-b stopped asking exclusivity; a search takes
 * the shared (cheaper) one first, then the exclusive one, finds no room,
 * and must put the exclusive one back first (else isolation refuses it
 * and it would be evicted). */
static void test_restore_exclusive_first(void **state)
{
    struct world w;
    char err[128];
    struct allot_job_spec s = {.tenant = 0,
                               .prio_class = 0,
                               .n_tasks = 1,
                               .checkpointable = true,
                               .task = {.num_gpu = 2, .gpu_milli = 1000, .mig_profile = -1}};
    int x, y, z;

    (void)state;
    world_init(&w, 2, 4, base);
    assert_int_equal(allot_queue_add_prio_class(w.q, "low", 10, true), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "high", 100, false), 1);
    s.tenant = w.b;
    allot_tenants_get(w.t, w.b)->isolation = ALLOT_ISO_EXCLUSIVE_NODE;
    s.name = "x-exclusive";
    x = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    cycle(&w, 0);
    allot_tenants_get(w.t, w.b)->isolation = ALLOT_ISO_SHARED;
    s.name = "y-shared";
    s.task.num_gpu = 1;
    y = allot_queue_submit(w.q, &s, 10, err, sizeof(err));
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, y)->pl[0].node, allot_queue_job(w.q, x)->pl[0].node);
    s.name = "z-high"; /* fits no node: its search is fruitless */
    s.prio_class = 1;
    s.task.num_gpu = 8;
    z = allot_queue_submit(w.q, &s, 100, err, sizeof(err));
    assert_true(z >= 0);
    evictions = 0;
    cycle(&w, 100);
    assert_int_equal(evictions, 0);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, x)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, y)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* QoS orders jobs of one priority: guaranteed, burstable, best-effort. */
static void test_qos(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    char err[128];
    struct allot_job_spec s = {.prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    int be, bu, gu;

    o.preemption = false;
    world_init(&w, 2, 8, o); /* 8 GPUs */
    s.tenant = w.a;
    s.n_tasks = 2; /* a gang holding both nodes */
    s.name = "first";
    assert_int_equal(allot_queue_submit(w.q, &s, 0, err, sizeof(err)), 0);
    cycle(&w, 0);
    s.n_tasks = 1;
    s.qos = ALLOT_QOS_BEST_EFFORT;
    s.name = "be";
    be = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    s.qos = ALLOT_QOS_BURSTABLE;
    s.name = "bu";
    bu = allot_queue_submit(w.q, &s, 2, err, sizeof(err));
    s.qos = ALLOT_QOS_GUARANTEED;
    s.name = "gu";
    gu = allot_queue_submit(w.q, &s, 3, err, sizeof(err));
    assert_int_equal(allot_queue_finish(w.q, 0, 10), 0);
    cycle(&w, 10); /* room for two of the three 4-GPU jobs */
    assert_int_equal(allot_queue_job(w.q, gu)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, bu)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, be)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

/* At most preempt_searches victim searches per cycle for jobs above their
 * tenant's nominal (or without quotas): the others wait for the next
 * cycle, best placed first. Reclaim for a job inside its nominal is the
 * guarantee and is exempt from the budget. */
static int submit_full(struct world *w, const char *name, int tenant, int prio, int tasks, int gpus,
                       int64_t now, bool checkpointable);

static void test_search_budget(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    char name[16];
    int a[2];

    o.preempt_searches = 1;
    o.grace_s = 0;
    world_init(&w, 2, 4, o); /* 8 GPUs, 4 each */
    fill_with_b(&w, NULL);
    a[0] = submit(&w, "a0", w.a, 1, 2, 100, 0);
    a[1] = submit(&w, "a1", w.a, 1, 2, 101, 0);
    cycle(&w, 200); /* both inside a's nominal: both reclaim in one cycle */
    assert_int_equal(w.preempts, 4);
    assert_int_equal(allot_queue_job(w.q, a[0])->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a[1])->state, ALLOT_JOB_RUNNING);
    world_free(&w);

    /* without quotas nothing is a guarantee: priority preemption for two
     * urgent jobs takes two cycles with a budget of one */
    o.quotas = false;
    o.borrowing = false;
    world_init(&w, 2, 4, o);
    assert_int_equal(allot_queue_add_prio_class(w.q, "training", 10, true), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "urgent", 100, false), 1);
    for (int i = 0; i < 8; i++) {
        allot_fmt(name, sizeof(name), "lo%d", i);
        assert_true(submit_full(&w, name, w.a, 0, 1, 1, 0, false) >= 0);
    }
    cycle(&w, 0);
    a[0] = submit_full(&w, "hi0", w.a, 1, 1, 2, 100, false);
    a[1] = submit_full(&w, "hi1", w.a, 1, 1, 2, 101, false);
    cycle(&w, 200);
    assert_int_equal(w.preempts, 2);
    assert_int_equal(allot_queue_job(w.q, a[0])->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a[1])->state, ALLOT_JOB_PENDING);
    cycle(&w, 201); /* the next cycle serves hi1 */
    assert_int_equal(w.preempts, 4);
    assert_int_equal(allot_queue_job(w.q, a[1])->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* ---- allocation failures ---------------------------------------------------------------- */

/* `nodes` x 4 H100 in racks of two; team-a and team-b with nominal `nom`. */
static void world_racks(struct world *w, int nodes, int nom, struct allot_queue_opts o)
{
    char err[256], name[16];

    world_init(w, 0, nom, o);
    for (int i = 0; i < nodes; i++) {
        struct allot_node_spec sp = {.name = name,
                                     .model = "H100",
                                     .cpu_milli = 64000,
                                     .mem_mib = 262144,
                                     .n_gpus = 4,
                                     .rack = i / 2};
        allot_fmt(name, sizeof(name), "r%d-%d", i / 2, i % 2);
        assert_int_equal(allot_cluster_add_node(w->c, &sp, err, sizeof(err)), i);
    }
    allot_queue_free(w->q);
    w->q = allot_queue_new(w->c, w->t, &o, err, sizeof(err));
    assert_non_null(w->q);
}

static int submit_full(struct world *w, const char *name, int tenant, int prio, int tasks, int gpus,
                       int64_t now, bool checkpointable)
{
    char err[256];
    struct allot_job_spec s = {
        .name = name,
        .tenant = tenant,
        .prio_class = prio,
        .n_tasks = tasks,
        .task = {.num_gpu = gpus, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000},
        .checkpointable = checkpointable};

    return allot_queue_submit(w->q, &s, now, err, sizeof(err));
}

/* team-b fills the cluster (8 GPUs in nominal, 8 borrowed) with gangs. */
static void setup_borrowed(struct world *w, bool checkpointable)
{
    world_racks(w, 4, 8, base);
    assert_true(submit_full(w, "b0", w->b, -1, 2, 4, 0, checkpointable) >= 0);
    assert_true(submit_full(w, "b1", w->b, -1, 1, 4, 0, checkpointable) >= 0);
    assert_true(submit_full(w, "b2", w->b, -1, 2, 2, 0, checkpointable) >= 0);
    cycle(w, 0);
    assert_int_equal(allot_cluster_used_milli(w->c), 16000);
}

static void setup_reclaim_now(struct world *w)
{
    setup_borrowed(w, false);
    assert_true(submit_full(w, "a0", w->a, -1, 2, 4, 100, false) >= 0);
}

static void setup_reclaim_grace(struct world *w)
{
    setup_borrowed(w, true);
    assert_true(submit_full(w, "a0", w->a, -1, 2, 4, 100, false) >= 0);
}

/* Inside team-a: low-priority gangs fill the cluster; a high-priority
 * gang arrives and needs whole nodes freed. */
static void setup_priority(struct world *w)
{
    world_racks(w, 4, 16, base);
    assert_int_equal(allot_queue_add_prio_class(w->q, "training", 10, true), 0);
    assert_int_equal(allot_queue_add_prio_class(w->q, "urgent", 100, false), 1);
    assert_true(submit_full(w, "lo0", w->a, 0, 2, 2, 0, false) >= 0);
    assert_true(submit_full(w, "lo1", w->a, 0, 2, 2, 0, false) >= 0);
    assert_true(submit_full(w, "lo2", w->a, 0, 1, 4, 0, false) >= 0);
    assert_true(submit_full(w, "lo3", w->a, 0, 1, 4, 0, false) >= 0);
    cycle(w, 0);
    assert_int_equal(allot_cluster_used_milli(w->c), 16000);
    assert_true(submit_full(w, "hi", w->a, 1, 2, 4, 100, false) >= 0);
}

/* Two-queue LAS without quotas across tenants, with gangs as victims. */
static void setup_las(struct world *w)
{
    struct allot_queue_opts o = base;

    o.order = "las";
    o.quotas = false;
    o.las_threshold_gpu_s = 3600;
    world_racks(w, 4, 8, o);
    assert_true(submit_full(w, "old0", w->b, -1, 2, 4, 0, false) >= 0);
    assert_true(submit_full(w, "old1", w->b, -1, 2, 4, 0, true) >= 0);
    cycle(w, 0);
    assert_true(submit_full(w, "new", w->a, -1, 3, 4, 1000, false) >= 0);
}

static int op_cycle_100(struct world *w)
{
    return allot_queue_cycle(w->q, 100, on_decision, w);
}

static int op_cycle_1000(struct world *w)
{
    return allot_queue_cycle(w->q, 1000, on_decision, w);
}

/* The grace period of the victims ends: stopped, requeued, a0 starts. */
static void setup_grace_over(struct world *w)
{
    setup_reclaim_grace(w);
    cycle(w, 100);
    assert_true(w->preempts > 0);
}

static int op_cycle_130(struct world *w)
{
    return allot_queue_cycle(w->q, 130, on_decision, w);
}

static int op_submit(struct world *w)
{
    int rc = submit_full(w, "late", w->a, -1, 2, 2, 100, false);

    return rc < 0 ? rc : 0;
}

static int op_finish(struct world *w)
{
    return allot_queue_finish(w->q, 0, 100);
}

static int op_cancel(struct world *w)
{
    return allot_queue_cancel(w->q, 2, 100);
}

/*
 * For N = 1, 2, ... until the operation succeeds without meeting the
 * failure: set up (no failure), make the Nth allocation of the operation
 * fail (and every later one when sticky), then require a clean error, the
 * queue's and the cluster's invariants (no job running on GPUs that look
 * free), and a queue that carries on: a later cycle without failures keeps
 * them too. Leaks show in the sanitizer build.
 */
static void fault_loop(const char *what, void (*prepare)(struct world *), int (*op)(struct world *),
                       bool sticky)
{
    unsigned long n;
    int failed = 0;

    for (n = 1; n < 100000; n++) {
        struct world w;
        char err[256];
        unsigned long used;
        int rc, jobs;

        prepare(&w);
        jobs = allot_queue_job_count(w.q);
        allot_alloc_fail_at(n, sticky);
        rc = op(&w);
        used = allot_alloc_count();
        allot_alloc_fail_at(0, false);
        if (rc != 0 && rc != ALLOT_ENOMEM)
            fail_msg("%s, allocation %lu failing: %s", what, n, allot_strerror(rc));
        if (rc == ALLOT_ENOMEM && op == op_submit)
            assert_int_equal(allot_queue_job_count(w.q), jobs);
        if (allot_queue_check_invariants(w.q, err, sizeof(err)) != 0)
            fail_msg("%s, allocation %lu failing: %s", what, n, err);
        if (allot_queue_cycle(w.q, 5000, on_decision, &w) != 0)
            fail_msg("%s, allocation %lu failing: the next cycle failed", what, n);
        if (allot_queue_check_invariants(w.q, err, sizeof(err)) != 0)
            fail_msg("%s, allocation %lu failing, next cycle: %s", what, n, err);
        world_free(&w);
        failed += rc != 0;
        if (rc == 0 && used < n)
            break;
    }
    /* an operation may also absorb a failure (a release the cluster
     * refuses leaves an orphan placement, released later) */
    if (n < 2)
        fail_msg("%s: the operation never allocated", what);
    print_message("%s (%s): %lu allocations, %d failed cleanly, %d victims evicted\n", what,
                  sticky ? "sticky" : "once", n - 1, failed, evictions);
    evictions = 0;
}

static void test_alloc_failures(void **state)
{
    static const struct {
        const char *what;
        void (*setup)(struct world *);
        int (*op)(struct world *);
    } cases[] = {
        {"submit", setup_reclaim_now, op_submit},
        {"finish", setup_reclaim_now, op_finish},
        {"cancel", setup_reclaim_now, op_cancel},
        {"cycle with reclaim", setup_reclaim_now, op_cycle_100},
        {"cycle with reclaim and grace", setup_reclaim_grace, op_cycle_100},
        {"cycle ending a grace period", setup_grace_over, op_cycle_130},
        {"cycle with priority preemption", setup_priority, op_cycle_100},
        {"cycle with LAS preemption", setup_las, op_cycle_1000},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (int sticky = 0; sticky <= 1; sticky++)
            fault_loop(cases[i].what, cases[i].setup, cases[i].op, sticky);
}

/* The scenarios above do preempt when nothing fails. */
static void test_fault_scenarios_preempt(void **state)
{
    void (*setups[])(struct world *) = {setup_reclaim_now, setup_reclaim_grace, setup_priority};
    struct world w;

    for (size_t i = 0; i < sizeof(setups) / sizeof(setups[0]); i++) {
        setups[i](&w);
        cycle(&w, 100);
        assert_true(w.preempts > 0);
        world_free(&w);
    }
    setup_las(&w);
    cycle(&w, 1000);
    assert_true(w.preempts > 0);
    assert_non_null(strstr(w.last_why, "LAS"));
    world_free(&w);
}

/* A long-running caller forgets ended jobs: slots and ids are reused, so
 * the queue's job table follows the live jobs, not every job ever seen. */
static void test_forget(void **state)
{
    struct world w;
    int id, live;

    (void)state;
    world_init(&w, 2, 8, base);
    id = submit(&w, "first", w.a, 1, 1, 0, 0);
    assert_int_equal(allot_queue_forget(w.q, id), ALLOT_ESTATE); /* pending */
    cycle(&w, 1);
    assert_int_equal(allot_queue_forget(w.q, id), ALLOT_ESTATE); /* running */
    assert_int_equal(allot_queue_finish(w.q, id, 2), 0);
    assert_int_equal(allot_queue_forget(w.q, id), 0);
    assert_null(allot_queue_job(w.q, id));
    assert_int_equal(allot_queue_forget(w.q, id), ALLOT_ENOENT);
    assert_int_equal(allot_queue_cancel(w.q, id, 3), ALLOT_ENOENT);
    assert_int_equal(allot_queue_finish(w.q, id, 3), ALLOT_ENOENT);
    assert_string_equal(allot_queue_reason(w.q, id), "");
    /* the slot goes to the next submission */
    assert_int_equal(submit(&w, "second", w.b, 1, 1, 3, 0), id);
    assert_string_equal(allot_queue_job(w.q, id)->name, "second");
    cycle(&w, 4);
    assert_int_equal(allot_queue_finish(w.q, id, 5), 0);
    assert_int_equal(allot_queue_forget(w.q, id), 0);
    /* 5,000 jobs through, three live at a time: the table stays small */
    live = 0;
    for (int k = 0; k < 5000; k++) {
        int ids[3];
        char name[32];
        for (int x = 0; x < 3; x++) {
            allot_fmt(name, sizeof(name), "job-%d-%d", k, x);
            ids[x] = submit(&w, name, x % 2 ? w.a : w.b, 1, 2, 10 + 2 * k, 0);
        }
        cycle(&w, 10 + 2 * k);
        for (int x = 0; x < 3; x++) {
            const struct allot_job *j = allot_queue_job(w.q, ids[x]);
            assert_non_null(j);
            if (j->state == ALLOT_JOB_RUNNING)
                assert_int_equal(allot_queue_finish(w.q, ids[x], 11 + 2 * k), 0);
            else
                assert_int_equal(allot_queue_cancel(w.q, ids[x], 11 + 2 * k), 0);
            assert_int_equal(allot_queue_forget(w.q, ids[x]), 0);
        }
        live += allot_queue_job_count(w.q) <= 4;
    }
    assert_int_equal(live, 5000);
    assert_true(allot_queue_job_count(w.q) <= 4);
    world_free(&w);
}

/* Forgetting under allocation failure: a clean error and nothing changes. */
static void test_forget_alloc_failure(void **state)
{
    for (unsigned long n = 1; n < 8; n++) {
        struct world w;
        int id;
        (void)state;
        world_init(&w, 1, 4, base);
        id = submit(&w, "a", w.a, 1, 1, 0, 0);
        cycle(&w, 1);
        assert_int_equal(allot_queue_finish(w.q, id, 2), 0);
        allot_alloc_fail_at(n, true);
        if (allot_queue_forget(w.q, id) == ALLOT_ENOMEM)
            assert_non_null(allot_queue_job(w.q, id));
        allot_alloc_fail_at(0, false);
        world_free(&w);
    }
}

/* A restarted caller adopts a running job where it runs: same GPUs, quota
 * charged, no START decision; a placement that no longer fits is refused
 * and changes nothing. */
static void test_adopt(void **state)
{
    struct world w, v;
    int id, id2, starts;
    struct allot_placement pl[2];
    char err[256];
    struct allot_job_spec s = {
        .name = "kept",
        .prio_class = -1,
        .n_tasks = 2,
        .task = {.num_gpu = 2, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000}};

    (void)state;
    /* run a gang in one world, adopt it in a fresh one */
    world_init(&w, 2, 8, base);
    id = submit(&w, "kept", w.a, 2, 2, 0, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    memcpy(pl, allot_queue_job(w.q, id)->pl, sizeof(pl));
    world_init(&v, 2, 8, base);
    s.tenant = v.a;
    starts = v.starts;
    id2 = allot_queue_adopt(v.q, &s, pl, 1, 100, err, sizeof(err));
    assert_true(id2 >= 0);
    assert_int_equal(v.starts, starts); /* no decision */
    assert_int_equal(allot_queue_job(v.q, id2)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(v.q, id2)->start, 1);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(allot_queue_job(v.q, id2)->pl[k].node, pl[k].node);
        assert_int_equal(allot_queue_job(v.q, id2)->pl[k].gpu_mask, pl[k].gpu_mask);
    }
    assert_int_equal(allot_tenants_get(v.t, v.a)->usage[ALLOT_RES_GPU], 4000);
    cycle(&v, 101);
    /* the same GPUs again: refused, nothing changes */
    s.name = "twice";
    assert_int_equal(allot_queue_adopt(v.q, &s, pl, 1, 100, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "does not fit where it runs"));
    assert_int_equal(allot_tenants_get(v.t, v.a)->usage[ALLOT_RES_GPU], 4000);
    cycle(&v, 102);
    assert_int_equal(allot_queue_finish(v.q, id2, 200), 0);
    cycle(&v, 201);
    assert_int_equal(allot_tenants_get(v.t, v.a)->usage[ALLOT_RES_GPU], 0);
    world_free(&v);
    world_free(&w);
}

/* ---- what a cycle skips: shapes that found no room, tenants at their quota ---------------- */

/* A gang shape that found no room is not tried again until room is freed,
 * and then it is: the job starts and its twin keeps a capacity reason. */
static void test_failed_shape_retried(void **state)
{
    struct world w;
    int a0, b0, b1, b2;

    world_init(&w, 2, 8, base); /* 8 GPUs; a and b 8 each in nominal */
    a0 = submit(&w, "a0", w.a, 1, 4, 0, 0);
    submit(&w, "a1", w.a, 1, 4, 0, 0);
    cycle(&w, 0);
    b0 = submit(&w, "b0", w.b, 1, 4, 1, 0);
    b1 = submit(&w, "b1", w.b, 1, 4, 1, 0);
    b2 = submit(&w, "b2", w.b, 1, 2, 1, 0);
    cycle(&w, 1);
    cycle(&w, 2);
    cycle(&w, 2); /* the same time again */
    for (int id = b0; id <= b2; id++) {
        assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_PENDING);
        assert_int_equal(allot_queue_job(w.q, id)->why.kind, ALLOT_WHY_CAPACITY);
    }
    assert_int_equal(allot_queue_finish(w.q, a0, 10), 0);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, b0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, b1)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, b1),
                        "no node has 4 free GPUs in one NVLink island (most free on one node: 0)");
    assert_int_equal(allot_queue_job(w.q, b2)->why.kind, ALLOT_WHY_CAPACITY);
    world_free(&w);
}

/* A tenant turned away by its quota starts work once its quota is raised,
 * and again once its own usage drops. */
static void test_quota_block_lifted(void **state)
{
    struct allot_queue_opts o = base;
    struct allot_quota six = {
        .nominal = 6000, .borrow_limit = ALLOT_UNLIMITED, .lend_limit = ALLOT_UNLIMITED};
    struct world w;
    int a0, a[3];

    o.borrowing = false;
    world_init(&w, 2, 4, o); /* 8 GPUs; a and b 4 each */
    a0 = submit(&w, "a0", w.a, 1, 4, 0, 0);
    a[0] = submit(&w, "a1", w.a, 1, 1, 0, 0);
    a[1] = submit(&w, "a2", w.a, 1, 1, 0, 0);
    a[2] = submit(&w, "a3", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    cycle(&w, 1);
    for (int i = 0; i < 3; i++)
        assert_string_equal(allot_queue_reason(w.q, a[i]),
                            "tenant ml/team-a at nominal (4/4 GPU), borrowing is off");
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, six), 0);
    cycle(&w, 2);
    assert_int_equal(allot_queue_job(w.q, a[0])->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a[1])->state, ALLOT_JOB_RUNNING);
    assert_string_equal(allot_queue_reason(w.q, a[2]),
                        "tenant ml/team-a at nominal (6/6 GPU), borrowing is off");
    cycle(&w, 3);
    assert_int_equal(allot_queue_job(w.q, a[2])->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_finish(w.q, a0, 4), 0);
    cycle(&w, 4);
    assert_int_equal(allot_queue_job(w.q, a[2])->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A shape that found no room for one tenant may still fit for another
 * when isolation tells them apart: here a tenant that became shared still
 * holds a node exclusively, where its own shared jobs fit. */
static void test_failed_shape_per_tenant(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    char err[128];
    int solo, other, a1, s1;

    o.quotas = false;
    o.preemption = false;
    world_init(&w, 2, 4, o);
    allot_queue_free(w.q);
    solo = allot_tenants_add(w.t, "solo", err, sizeof(err));
    other = allot_tenants_add(w.t, "other", err, sizeof(err));
    assert_true(solo > 0 && other > 0);
    allot_tenants_get(w.t, solo)->isolation = ALLOT_ISO_EXCLUSIVE_NODE;
    w.q = allot_queue_new(w.c, w.t, &o, err, sizeof(err));
    submit(&w, "s0", solo, 1, 1, 0, 0);  /* takes a node for itself */
    submit(&w, "x0", other, 1, 4, 0, 0); /* fills the other */
    cycle(&w, 0);
    assert_int_equal(allot_cluster_used_milli(w.c), 5000);
    allot_tenants_get(w.t, solo)->isolation = ALLOT_ISO_SHARED;
    a1 = submit(&w, "a1", w.a, 1, 1, 1, 0); /* goes first (no use) and finds no room */
    s1 = submit(&w, "s1", solo, 1, 1, 1, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, a1)->why.kind, ALLOT_WHY_CAPACITY);
    assert_int_equal(allot_queue_job(w.q, s1)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* ---- the queue against its reference mode -------------------------------------------------- */

/* At its work budget a cycle stops: it starts no more jobs than the
 * budget, says there is more and wants a cycle at once, and the cycles
 * after it go on until every job that fits has started, also when a
 * submission in between makes the next one start afresh. */
static void test_cycle_work_budget(void **state)
{
    struct world w;
    struct allot_queue_opts o = base;
    int ids[6], running = 0, cycles = 0;

    (void)state;
    o.cycle_work = 3;
    world_init(&w, 2, 4, o);
    for (int i = 0; i < 5; i++) {
        char name[8];
        allot_fmt(name, sizeof(name), "w%d", i);
        ids[i] = submit(&w, name, w.a, 1, 1, i, 0);
    }
    cycle(&w, 10);
    for (int i = 0; i < 5; i++)
        running += allot_queue_job(w.q, ids[i])->state == ALLOT_JOB_RUNNING;
    assert_true(running >= 1 && running <= 3);
    assert_true(allot_queue_more(w.q));
    assert_int_equal(allot_queue_next_wakeup(w.q), 10);
    ids[5] = submit(&w, "w5", w.b, 1, 1, 10, 0); /* a change: the next cycle starts afresh */
    do {
        cycle(&w, 10);
        assert_true(++cycles <= 20);
    } while (allot_queue_more(w.q));
    assert_true(cycles >= 2);
    running = 0;
    for (int i = 0; i < 6; i++)
        running += allot_queue_job(w.q, ids[i])->state == ALLOT_JOB_RUNNING;
    assert_int_equal(running, 6);
    assert_true(allot_queue_next_wakeup(w.q) > 10);
    world_free(&w);
}

/* Jobs asking RDMA VFs go only where enough are free, wait with a reason
 * naming them, and start when VFs come back. */
static void test_rdma_vfs(void **state)
{
    struct world w;
    char err[256];
    struct allot_node_spec sp = {.name = "r0",
                                 .model = "H100",
                                 .cpu_milli = 64000,
                                 .mem_mib = 262144,
                                 .n_gpus = 4,
                                 .island_size = 4,
                                 .rdma_vfs = 2};
    struct allot_job_spec s = {
        .prio_class = -1,
        .n_tasks = 1,
        .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000}};
    int r0, a, b, plain;

    (void)state;
    world_init(&w, 1, 8, base); /* h0: no VFs */
    r0 = allot_cluster_add_node(w.c, &sp, err, sizeof(err));
    assert_true(r0 >= 0);
    s.tenant = w.a;
    s.name = "two-vfs";
    s.task.rdma_vfs = 2;
    a = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    s.name = "one-vf";
    s.task.rdma_vfs = 1;
    b = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    s.name = "plain";
    s.task.rdma_vfs = 0;
    plain = allot_queue_submit(w.q, &s, 2, err, sizeof(err));
    assert_true(a >= 0 && b >= 0 && plain >= 0);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, a)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a)->pl[0].node, r0);
    assert_int_equal(allot_queue_job(w.q, a)->pl[0].rdma_vfs, 2);
    assert_int_equal(allot_cluster_node(w.c, r0)->rdma_free, 0);
    /* GPUs are free on both nodes, VFs on neither */
    assert_int_equal(allot_queue_job(w.q, b)->state, ALLOT_JOB_PENDING);
    if (!strstr(allot_queue_reason(w.q, b), "RDMA VFs"))
        fail_msg("reason \"%s\" does not name RDMA VFs", allot_queue_reason(w.q, b));
    assert_int_equal(allot_queue_job(w.q, plain)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_finish(w.q, a, 20), 0);
    assert_int_equal(allot_cluster_node(w.c, r0)->rdma_free, 2);
    cycle(&w, 30);
    assert_int_equal(allot_queue_job(w.q, b)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, b)->pl[0].node, r0);
    assert_int_equal(allot_cluster_node(w.c, r0)->rdma_free, 1);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_all_or_nothing),
        cmocka_unit_test(test_quota_reason),
        cmocka_unit_test(test_reclaim_with_grace),
        cmocka_unit_test(test_stopped_before_the_grace_ends),
        cmocka_unit_test(test_counts_follow_cancel),
        cmocka_unit_test(test_min_runtime),
        cmocka_unit_test(test_priority_preemption),
        cmocka_unit_test(test_preemption_on_selected_nodes),
        cmocka_unit_test(test_preemption_for_cpu_on_selected_nodes),
        cmocka_unit_test(test_prio_class_changed),
        cmocka_unit_test(test_rdma_vfs),
        cmocka_unit_test(test_no_preemption_loops),
        cmocka_unit_test(test_runtime_limit_and_validation),
        cmocka_unit_test(test_runtime_limit_changed),
        cmocka_unit_test(test_gang_prefers_one_rack),
        cmocka_unit_test(test_gang_prefers_one_node),
        cmocka_unit_test(test_las_preemption),
        cmocka_unit_test(test_aging),
        cmocka_unit_test(test_reclaim_order),
        cmocka_unit_test(test_reclaim_spares_needless),
        cmocka_unit_test(test_restore_exclusive_first),
        cmocka_unit_test(test_qos),
        cmocka_unit_test(test_search_budget),
        cmocka_unit_test(test_fault_scenarios_preempt),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_forget),
        cmocka_unit_test(test_adopt),
        cmocka_unit_test(test_forget_alloc_failure),
        cmocka_unit_test(test_failed_shape_retried),
        cmocka_unit_test(test_quota_block_lifted),
        cmocka_unit_test(test_failed_shape_per_tenant),
        cmocka_unit_test(test_cycle_work_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
