/*
 * Unit tests of how the queue shares the GPUs between tenants and users
 * (src/core/queue*.c; docs/tenancy.md): the fair order of tenants and of
 * users inside a tenant, fair-share reclaim of just-checkpointed borrowed
 * work, the fair-share cap that keeps a tenant beyond its nominal
 * from filling the holes other tenants' gangs wait for, and how fractions
 * share one GPU's memory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/queue.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "catalog_fixture.h"
#include "queue_fixture.h"
#include "queue_world.h"

static void test_aging_and_fair_order(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int first, late;
    char name[16];

    o.quotas = false;
    o.preemption = false;
    world_init(&w, 1, 4, o);
    /* team-a holds the GPUs; both queue; the tenant with less use goes first */
    for (int i = 0; i < 4; i++) {
        allot_fmt(name, sizeof(name), "a%d", i);
        submit(&w, name, w.a, 1, 1, 0, 0);
    }
    cycle(&w, 0);
    first = submit(&w, "a-next", w.a, 1, 1, 10, 0);
    late = submit(&w, "b-next", w.b, 1, 1, 20, 0);
    cycle(&w, 20);
    assert_int_equal(allot_queue_finish(w.q, 0, 30), 0);
    cycle(&w, 30);
    /* b (no usage) goes before a although it came later */
    assert_int_equal(allot_queue_job(w.q, late)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, first)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

static void test_user_fair_share(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    char err[128], name[16];
    struct allot_job_spec s = {.prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    int heavy, light;

    o.preemption = false;
    world_init(&w, 1, 4, o);
    s.tenant = w.a;
    s.user = 1;
    for (int i = 0; i < 4; i++) {
        allot_fmt(name, sizeof(name), "u1-%d", i);
        s.name = name;
        assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0);
    }
    cycle(&w, 0);
    s.name = "u1-next";
    heavy = allot_queue_submit(w.q, &s, 10, err, sizeof(err));
    s.user = 2;
    s.name = "u2-first";
    light = allot_queue_submit(w.q, &s, 20, err, sizeof(err));
    assert_int_equal(allot_queue_finish(w.q, 0, 30), 0);
    cycle(&w, 30);
    /* user 2 holds nothing: its job goes first although it came later */
    assert_int_equal(allot_queue_job(w.q, light)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, heavy)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

/* 3 nodes of 4 GPUs under opts o; a and b have 4 each in nominal, c has 4
 * and asks for nothing, so while a and b both ask for more the fair shares
 * of a and b are 6 each. */
static void share_world(struct world *w, struct allot_queue_opts o)
{
    struct allot_quota qt = {
        .nominal = 4000, .borrow_limit = ALLOT_UNLIMITED, .lend_limit = ALLOT_UNLIMITED};
    char err[128];

    world_init(w, 3, 4, o);
    assert_true(allot_tenants_add(w->t, "ml/team-c", err, sizeof(err)) >= 0);
    assert_int_equal(
        allot_tenants_set_quota(w->t, allot_tenants_find(w->t, "ml/team-c"), ALLOT_RES_GPU, qt), 0);
    qt.nominal = 12000;
    assert_int_equal(
        allot_tenants_set_quota(w->t, allot_tenants_find(w->t, "ml"), ALLOT_RES_GPU, qt), 0);
    assert_int_equal(allot_tenants_set_quota(w->t, 0, ALLOT_RES_GPU, qt), 0);
}

/* Fair-share reclaim world (share_world: the fair shares of a and b are
 * 6). b runs 8 one-GPU jobs (4 borrowed), a runs 4, checkpoints every 600 s. */
static void fair_world(struct world *w, int64_t fair_s)
{
    struct allot_queue_opts o = base;
    char err[128], name[16];

    o.fair_reclaim_s = fair_s;
    share_world(w, o);
    for (int i = 0; i < 12; i++) {
        struct allot_job_spec s = {.name = name,
                                   .tenant = i < 8 ? w->b : w->a,
                                   .prio_class = -1,
                                   .n_tasks = 1,
                                   .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1},
                                   .checkpointable = true,
                                   .checkpoint_interval_s = 600};
        allot_fmt(name, sizeof(name), "%c%d", i < 8 ? 'b' : 'a', i);
        assert_true(allot_queue_submit(w->q, &s, 0, err, sizeof(err)) >= 0);
    }
    cycle(w, 0);
    assert_int_equal(w->starts, 12);
}

/* A tenant below its fair share takes just-checkpointed borrowed work of
 * one above it, never taking it below its own share and never going above
 * its own; work that would lose more waits for its next checkpoint. */
static void test_fair_reclaim(void **state)
{
    struct world w;
    int a5, a6, a7;

    fair_world(&w, 200);
    /* at 700 each b job has lost (700 + 30) mod 600 = 130 s since its checkpoint */
    a5 = submit(&w, "a5", w.a, 1, 1, 700, 0); /* a at 5 of its share of 6 */
    a6 = submit(&w, "a6", w.a, 1, 1, 700, 0); /* 6 of 6 */
    a7 = submit(&w, "a7", w.a, 1, 1, 700, 0); /* would be 7: above it */
    cycle(&w, 700);
    assert_int_equal(w.preempts, 2); /* b keeps 6, its share */
    assert_string_equal(w.last_why,
                        "borrowed capacity above its tenant's fair share reclaimed by job a6");
    assert_string_equal(allot_queue_reason(w.q, a5),
                        "waiting for reclaim of 1 GPU from ml/team-b (grace 30 s)");
    assert_int_equal(allot_queue_job(w.q, a7)->state, ALLOT_JOB_PENDING);
    cycle(&w, 730);
    assert_int_equal(allot_queue_job(w.q, a5)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a6)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a7)->state, ALLOT_JOB_PENDING);
    assert_int_equal(w.preempts, 2);
    world_free(&w);

    /* 130 s would be lost, more than 100: the queue comes back at the next
     * checkpoint (run time + grace = 1200, at 1170) */
    fair_world(&w, 100);
    a5 = submit(&w, "a5", w.a, 1, 1, 700, 0);
    cycle(&w, 700);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_next_wakeup(w.q), 1170);
    cycle(&w, 1170);
    assert_int_equal(w.preempts, 1);
    world_free(&w);

    /* ... unless b's jobs report a save: at the same time, the search
     * made with their old loss no longer holds */
    fair_world(&w, 100);
    a5 = submit(&w, "a5", w.a, 1, 1, 700, 0);
    cycle(&w, 700);
    assert_int_equal(w.preempts, 0);
    for (int id = 0; id < 8; id++)
        assert_int_equal(allot_queue_checkpointed(w.q, id, 690, 700), 0);
    cycle(&w, 700);
    assert_int_equal(w.preempts, 1);
    world_free(&w);

    /* off: a above its nominal waits */
    fair_world(&w, 0);
    a5 = submit(&w, "a5", w.a, 1, 1, 700, 0);
    cycle(&w, 700);
    cycle(&w, 1170);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, a5)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

/* The fair-share cap: a tenant beyond its nominal does not fill a hole
 * past cap x its fair share while another tenant's gang waits; with the
 * cap higher, or off, it does (share_world: the fair shares are 6). */
static void fair_cap_world(struct world *w, double cap, int *a9, int *bg)
{
    struct allot_queue_opts o = base;
    char name[16];

    o.fair_cap = cap;
    share_world(w, o);
    submit(w, "b0", w->b, 1, 4, 0, 0);
    for (int i = 0; i < 8; i++) {
        allot_fmt(name, sizeof(name), "a%d", i);
        submit(w, name, w->a, 1, 1, 0, 0);
    }
    cycle(w, 0);
    assert_int_equal(w->starts, 9);           /* a 8 (4 borrowed), b 4: full */
    *bg = submit(w, "bg", w->b, 1, 4, 10, 0); /* b beyond its nominal: a whole node */
    *a9 = submit(w, "a9", w->a, 1, 1, 10, 0);
    cycle(w, 10);
    assert_int_equal(w->starts, 9);
    assert_int_equal(allot_queue_finish(w->q, 1, 20), 0); /* a0 ends: a hole of one GPU */
}

static void test_fair_cap(void **state)
{
    struct world w;
    int a9, bg;

    (void)state;
    /* a at 7 would go to 8, past 1.2 x its share of 6: the hole stays free */
    fair_cap_world(&w, 1.2, &a9, &bg);
    cycle(&w, 20);
    assert_int_equal(w.starts, 9);
    assert_int_equal(allot_queue_job(w.q, a9)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, a9)->why.kind, ALLOT_WHY_FAIR_CAP);
    assert_string_equal(allot_queue_reason(w.q, a9),
                        "tenant ml/team-a holds 7 GPUs (nominal 4); while other tenants wait it "
                        "may borrow up to 1.2 times its fair share of 6 GPUs");
    /* b's gang ends its wait: a's demand alone, a9 may take the hole */
    assert_int_equal(allot_queue_cancel(w.q, bg, 30), 0);
    cycle(&w, 30);
    assert_int_equal(allot_queue_job(w.q, a9)->state, ALLOT_JOB_RUNNING);
    /* a factor below 1 would cap tenants below their fair share */
    for (int i = 0; i < 2; i++) {
        struct allot_queue_opts o = base;
        char err[128];
        o.fair_cap = i ? NAN : 0.5;
        assert_null(allot_queue_new(w.c, w.t, &o, err, sizeof(err)));
        assert_non_null(strstr(err, "fair_cap"));
    }
    world_free(&w);

    /* 8 is within 1.5 x 6: a9 fills the hole at once */
    fair_cap_world(&w, 1.5, &a9, &bg);
    cycle(&w, 20);
    assert_int_equal(allot_queue_job(w.q, a9)->state, ALLOT_JOB_RUNNING);
    world_free(&w);

    /* off */
    fair_cap_world(&w, 0, &a9, &bg);
    cycle(&w, 20);
    assert_int_equal(allot_queue_job(w.q, a9)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* The fair-share cap with no other tenant waiting binds only past the
 * room there is (a's share is then all it could use): the reason says
 * what holds the job back, room, not that other tenants wait. */
static void test_fair_cap_alone(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int big;

    (void)state;
    o.fair_cap = 1.5;
    share_world(&w, o); /* 3 nodes of 4 GPUs; team-a's nominal 4 */
    submit(&w, "a0", w.a, 1, 4, 0, 0);
    submit(&w, "a1", w.a, 1, 4, 0, 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 2);
    big = submit(&w, "big", w.a, 3, 4, 1, 0); /* 8 + 12 > 1.5 x its share of 12 */
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, big)->why.kind, ALLOT_WHY_FAIR_CAP);
    assert_string_equal(allot_queue_reason(w.q, big),
                        "no room for 3 tasks of 4 GPUs each (most free on one node: 4)");
    world_free(&w);
}

/* A tenant that may not borrow, at its nominal, held by the fair-share
 * cap too while another tenant waits: the reason is its quota (it may
 * never borrow), not what it might borrow under the cap. */
static void test_fair_cap_no_borrowing(void **state)
{
    struct allot_queue_opts o = base;
    struct allot_quota none = {.nominal = 4000, .borrow_limit = 0, .lend_limit = ALLOT_UNLIMITED};
    struct world w;
    int b5;

    (void)state;
    o.fair_cap = 1.0;
    share_world(&w, o);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, none), 0);
    for (int i = 0; i < 4; i++)
        submit(&w, "b", w.b, 1, 1, 0, 0);
    cycle(&w, 0);
    /* a and c wait for GPUs too: three shares of 4, b's 4 + 1 is past it */
    int c = allot_tenants_find(w.t, "ml/team-c");
    for (int i = 0; i < 3; i++) {
        submit(&w, "a", w.a, 1, 4, 1, 0);
        submit(&w, "c", c, 1, 4, 1, 0);
    }
    b5 = submit(&w, "b5", w.b, 1, 1, 1, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, b5)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, b5)->why.kind, ALLOT_WHY_FAIR_CAP);
    assert_string_equal(allot_queue_reason(w.q, b5),
                        "tenant ml/team-b at nominal (4/4 GPU), borrowing not allowed");
    world_free(&w);
}

/* The fair shares follow the tenant tree: ml (ml/team-a, ml/team-b; 8
 * nominal) and ops (ops/team-c; 4) share 12 GPUs 8 to 4, and inside ml
 * team-a asks for 1, so team-b's share is 7. Shared flat among the three
 * leaves (4 each), team-c's 5 would give team-b 6. With a fair-share cap
 * of 1 the share shows in team-b's pending reason. */
static void test_fair_shares_follow_tree(void **state)
{
    struct allot_queue_opts o = base;
    struct allot_quota qt = {
        .nominal = 8000, .borrow_limit = ALLOT_UNLIMITED, .lend_limit = ALLOT_UNLIMITED};
    struct world w;
    char err[128], name[16];
    int c, b8;

    (void)state;
    o.fair_cap = 1;
    world_init(&w, 3, 4, o);
    c = allot_tenants_add(w.t, "ops/team-c", err, sizeof(err));
    assert_true(c >= 0);
    assert_int_equal(allot_tenants_set_quota(w.t, allot_tenants_find(w.t, "ml"), ALLOT_RES_GPU, qt),
                     0);
    qt.nominal = 4000;
    assert_int_equal(
        allot_tenants_set_quota(w.t, allot_tenants_find(w.t, "ops"), ALLOT_RES_GPU, qt), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, c, ALLOT_RES_GPU, qt), 0);
    qt.nominal = 12000;
    assert_int_equal(allot_tenants_set_quota(w.t, 0, ALLOT_RES_GPU, qt), 0);
    submit(&w, "a0", w.a, 1, 1, 0, 0);
    for (int i = 0; i < 7; i++) {
        allot_fmt(name, sizeof(name), "b%d", i);
        submit(&w, name, w.b, 1, 1, 0, 0);
    }
    for (int i = 0; i < 4; i++) {
        allot_fmt(name, sizeof(name), "c%d", i);
        submit(&w, name, c, 1, 1, 0, 0);
    }
    cycle(&w, 0);
    assert_int_equal(w.starts, 12);
    b8 = submit(&w, "b8", w.b, 1, 1, 10, 0);
    submit(&w, "c5", c, 1, 1, 10, 0);
    submit(&w, "c6", c, 1, 1, 10, 0);
    cycle(&w, 10);
    assert_int_equal(allot_queue_finish(w.q, 8, 20), 0); /* c0: c at 3 of 5 asked for */
    cycle(&w, 20);
    assert_int_equal(w.starts, 13); /* c5, inside team-c's nominal */
    assert_int_equal(allot_queue_job(w.q, b8)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, b8),
                        "tenant ml/team-b holds 7 GPUs (nominal 4); while other tenants wait it "
                        "may borrow up to 1 times its fair share of 7 GPUs");
    world_free(&w);
}

/* A fraction that asks for compute only needs its share of the memory too,
 * and its pending reason says so. */
static void test_compute_only_fraction_reason(void **state)
{
    struct allot_job_spec s = {.name = "f",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1,
                                        .gpu_milli = 100,
                                        .gpu_mem_mib = 71680,
                                        .mig_profile = -1,
                                        .cpu_milli = 1000}};
    struct world w;
    char err[128];
    int id;

    world_init(&w, 1, 4, base); /* 4 x 80 GB */
    s.tenant = w.a;
    for (int i = 0; i < 4; i++) /* 70 GiB of each GPU */
        assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0);
    s.task.gpu_milli = 250;
    s.task.gpu_mem_mib = 0; /* 100 milli free on each GPU, 12.5 % of its memory */
    id = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    assert_true(id >= 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 4);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, id),
                        "no GPU has 250 milli-GPU and 25.0 % of its memory free");
    world_free(&w);
}

/* Jobs submitted in the same second (an array's members in allotd) start
 * in their arrival order (spec.seq), not in the order of the core ids
 * they got, which reuse the ids of jobs gone (here in reverse), under
 * every order. */
static void test_same_second_in_arrival_order(void **state)
{
    static const char *const orders[] = {"fair", "fifo", "las"};
    char err[128], name[16];
    int ids[6];

    (void)state;
    for (size_t k = 0; k < sizeof(orders) / sizeof(orders[0]); k++) {
        struct allot_queue_opts o = base;
        struct world w;
        struct allot_job_spec s = {.name = name,
                                   .prio_class = -1,
                                   .n_tasks = 1,
                                   .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};

        o.order = orders[k];
        o.preemption = false;
        world_init(&w, 1, 4, o);
        s.tenant = w.a;
        for (int i = 0; i < 6; i++) { /* ids 0..5, gone at once */
            allot_fmt(name, sizeof(name), "gone%d", i);
            assert_int_equal(submit(&w, name, w.a, 1, 1, 0, 0), i);
        }
        for (int i = 0; i < 6; i++) { /* cancelled and forgotten (as allotd does) */
            assert_int_equal(allot_queue_cancel(w.q, i, 1), 0);
            assert_int_equal(allot_queue_forget(w.q, i), 0);
        }
        for (int i = 0; i < 6; i++) { /* one second, one GPU-full job after another */
            allot_fmt(name, sizeof(name), "m%d", i);
            s.seq = 100 + i;
            ids[i] = allot_queue_submit(w.q, &s, 10, err, sizeof(err));
            assert_true(ids[i] >= 0);
        }
        assert_true(ids[0] > ids[5]); /* the ids came back in reverse */
        for (int i = 0; i < 6; i++) {
            cycle(&w, 10 + i);
            for (int m = 0; m < 6; m++)
                assert_int_equal(allot_queue_job(w.q, ids[m])->state, m < i    ? ALLOT_JOB_DONE
                                                                      : m == i ? ALLOT_JOB_RUNNING
                                                                               : ALLOT_JOB_PENDING);
            assert_int_equal(allot_queue_finish(w.q, ids[i], 10 + i), 0);
        }
        world_free(&w);
    }
}

/* A node out of service changes size (its server was rebuilt): the
 * capacity shares are measured against is counted again at the next
 * cycle (the invariant check compares it with the nodes' sum), and work
 * that needs the new size runs once the node is ready again. */
static void test_node_resized(void **state)
{
    struct world w;
    char err[256];
    struct allot_node_spec eight = {
        .model = "H100", .cpu_milli = 64000, .mem_mib = 262144, .n_gpus = 8, .island_size = 8};
    int big;

    (void)state;
    world_init(&w, 2, 4, base);
    big = submit(&w, "big", w.a, 1, 8, 0, 0);
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_capacity(w.q, ALLOT_RES_GPU), 8000);
    assert_int_equal(allot_cluster_set_state(w.c, 1, ALLOT_NODE_DRAINING), 0);
    cycle(&w, 1);
    assert_int_equal(allot_cluster_update_node(w.c, 1, &eight, err, sizeof(err)), 0);
    assert_int_equal(allot_queue_check_invariants(w.q, err, sizeof(err)), 0);
    cycle(&w, 2);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_capacity(w.q, ALLOT_RES_GPU), 12000);
    assert_int_equal(allot_queue_capacity(w.q, ALLOT_RES_CPU), 128000);
    assert_int_equal(allot_cluster_set_state(w.c, 1, ALLOT_NODE_READY), 0);
    cycle(&w, 3);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* Reclaim takes borrowed work back whatever its priority class: a member
 * of b cannot keep a's quota by naming a class that is not preemptible.
 * That class still keeps b's jobs inside b's nominal from b's own
 * higher-priority work. */
static void test_reclaim_whatever_class(void **state)
{
    struct world w;
    char err[128], name[16];
    struct allot_job_spec s = {.name = name,
                               .prio_class = 0,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    int hi;

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs; a and b 4 each */
    assert_int_equal(allot_queue_add_prio_class(w.q, "pinned", 10, false), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "urgent", 100, false), 1);
    s.tenant = w.b;
    for (int i = 0; i < 8; i++) {
        allot_fmt(name, sizeof(name), "b%d", i);
        assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0);
    }
    cycle(&w, 0);
    assert_int_equal(w.starts, 8); /* 4 of them borrowed */
    for (int i = 0; i < 4; i++) {
        allot_fmt(name, sizeof(name), "a%d", i);
        submit(&w, name, w.a, 1, 1, 100, 0);
    }
    cycle(&w, 100);
    assert_int_equal(w.preempts, 4);
    assert_int_equal(w.n_pairs, 4);
    for (int i = 0; i < 4; i++) { /* b's borrowed jobs, each for one of a's */
        const struct allot_job *v = allot_queue_job(w.q, w.pairs[i][0]);
        assert_int_equal(v->spec.tenant, w.b);
        assert_true(v->borrowed);
        assert_int_equal(allot_queue_job(w.q, w.pairs[i][1])->spec.tenant, w.a);
    }
    cycle(&w, 130);
    assert_int_equal(w.starts, 12);
    /* b's own urgent job does not take b's pinned jobs inside its nominal */
    allot_fmt(name, sizeof(name), "b-urgent");
    s.prio_class = 1;
    hi = allot_queue_submit(w.q, &s, 200, err, sizeof(err));
    assert_true(hi >= 0);
    cycle(&w, 200);
    assert_int_equal(w.preempts, 4);
    assert_int_equal(allot_queue_job(w.q, hi)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

/* Work whose class is not preemptible is reclaimed only while its tenant
 * borrows now (its borrowed flag dates from its start), and after the
 * borrowed work its class lets be preempted. */
static void test_reclaim_pinned_last(void **state)
{
    struct world w;
    char err[128];
    struct allot_job_spec s = {.name = "pinned",
                               .prio_class = 0,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    struct allot_quota three = {3000, ALLOT_UNLIMITED, ALLOT_UNLIMITED};
    int pinned, a1;

    (void)state;
    world_init(&w, 1, 2, base); /* 4 GPUs; a and b 2 each */
    assert_int_equal(allot_queue_add_prio_class(w.q, "serving", 10, false), 0);
    submit(&w, "b0", w.b, 1, 1, 0, 0);
    submit(&w, "b1", w.b, 1, 1, 0, 0);
    submit(&w, "a0", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    s.tenant = w.b;
    pinned = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    assert_true(pinned >= 0);
    cycle(&w, 1);
    assert_int_equal(w.starts, 4);
    assert_true(allot_queue_job(w.q, pinned)->borrowed);
    /* b's nominal grows to 3: pinned is inside it now, its flag says otherwise */
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, three), 0);
    a1 = submit(&w, "a1", w.a, 1, 1, 100, 0); /* inside a's nominal */
    cycle(&w, 100);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, a1)->state, ALLOT_JOB_PENDING);
    world_free(&w);

    /* b borrows with a preemptible job that has lost more and a pinned one:
     * a's job takes the preemptible one */
    world_init(&w, 1, 2, base);
    assert_int_equal(allot_queue_add_prio_class(w.q, "serving", 10, false), 0);
    submit(&w, "b0", w.b, 1, 1, 0, 0);
    submit(&w, "b1", w.b, 1, 1, 0, 0);
    cycle(&w, 0);
    submit(&w, "train", w.b, 1, 1, 1, 0); /* borrowed, started first: more lost */
    cycle(&w, 1);
    s.tenant = w.b;
    pinned = allot_queue_submit(w.q, &s, 500, err, sizeof(err));
    cycle(&w, 500);
    assert_int_equal(w.starts, 4);
    a1 = submit(&w, "a1", w.a, 1, 1, 700, 0);
    cycle(&w, 700);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.n_pairs, 1);
    assert_string_equal(allot_queue_job(w.q, w.pairs[0][0])->name, "train");
    assert_int_equal(w.pairs[0][1], a1);
    assert_int_equal(allot_queue_job(w.q, pinned)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* Room, not quota, in the way (two GPUs free, one on each node): of two
 * nodes that each free room for a's job, the one whose victim's class is
 * preemptible is taken, though the other's pinned victim has lost less. */
static void test_reclaim_pinned_last_nodes(void **state)
{
    struct world w;
    char err[128];
    struct allot_job_spec s = {.name = "pinned",
                               .prio_class = 0,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    struct allot_quota six = {6000, ALLOT_UNLIMITED, ALLOT_UNLIMITED},
                       two = {2000, ALLOT_UNLIMITED, ALLOT_UNLIMITED};
    int fill0, fill1, train, pinned, a1;

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs on h0 and h1 */
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, six), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, two), 0);
    assert_int_equal(allot_queue_add_prio_class(w.q, "serving", 10, false), 0);
    fill0 = submit(&w, "fill0", w.a, 1, 4, 0, 0); /* one node */
    submit(&w, "b0", w.b, 1, 2, 0, 0);            /* the other */
    cycle(&w, 0);
    train = submit(&w, "train", w.b, 1, 1, 1, 0); /* borrowed, beside b0 */
    fill1 = submit(&w, "fill1", w.a, 1, 1, 1, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_finish(w.q, fill0, 2), 0);
    s.tenant = w.b;
    pinned = allot_queue_submit(w.q, &s, 500, err, sizeof(err)); /* borrowed, fill0's node */
    assert_true(pinned >= 0);
    submit(&w, "fill2", w.a, 1, 2, 500, 0);
    cycle(&w, 500);
    assert_int_equal(allot_queue_finish(w.q, fill1, 600), 0);
    assert_int_equal(w.starts, 6);
    assert_true(allot_queue_job(w.q, train)->borrowed);
    assert_true(allot_queue_job(w.q, pinned)->borrowed);
    assert_int_not_equal(allot_queue_job(w.q, train)->pl[0].node,
                         allot_queue_job(w.q, pinned)->pl[0].node);
    a1 = submit(&w, "a1", w.a, 1, 2, 700, 0); /* admitted; no node has 2 free */
    cycle(&w, 700);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.n_pairs, 1);
    assert_int_equal(w.pairs[0][0], train);
    assert_int_equal(w.pairs[0][1], a1);
    assert_int_equal(allot_queue_job(w.q, pinned)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A pinned borrowed job that a start of its tenant puts beyond its
 * nominal again is reclaimed at the next cycle: the search that found
 * nothing while it lay inside the nominal is not remembered until the
 * minimum runtime has passed (600 s here). */
static void test_pinned_reclaimable_after_a_start(void **state)
{
    struct world w;
    char err[128], name[16];
    struct allot_job_spec s = {.name = name,
                               .n_tasks = 1,
                               .min_runtime_s = 600,
                               .checkpointable = true,
                               .task = {.gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000}};
    struct allot_quota five = {5000, ALLOT_UNLIMITED, ALLOT_UNLIMITED};
    int b1, pinned, j;

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs; a and b 4 each */
    assert_int_equal(allot_queue_add_prio_class(w.q, "serving", 10, false), 0);
#define SUB(n, ten, gpus, cls, t)                                                                  \
    (allot_fmt(name, sizeof(name), "%s", n), s.tenant = (ten), s.task.num_gpu = (gpus),            \
     s.prio_class = (cls), allot_queue_submit(w.q, &s, (t), err, sizeof(err)))
    assert_true(SUB("b0", w.b, 3, -1, 0) >= 0);
    b1 = SUB("b1", w.b, 1, -1, 0);
    assert_true(SUB("a0", w.a, 2, -1, 0) >= 0);
    cycle(&w, 0);
    pinned = SUB("pinned", w.b, 2, 0, 1); /* b at 6 of its 4: borrowed */
    cycle(&w, 1);
    assert_int_equal(w.starts, 4);
    assert_true(allot_queue_job(w.q, pinned)->borrowed);
    /* b1 ends and b's nominal grows to 5: b borrows nothing now, pinned
     * lies inside its nominal, and a's job waits */
    assert_int_equal(allot_queue_finish(w.q, b1, 700), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, five), 0);
    j = SUB("j", w.a, 2, -1, 700);
    cycle(&w, 700);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, j)->state, ALLOT_JOB_PENDING);
    /* b starts one more: pinned lies beyond b's nominal again */
    assert_true(SUB("b2", w.b, 1, -1, 800) >= 0);
    cycle(&w, 800);
    assert_int_equal(w.starts, 5);
    cycle(&w, 801);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][0], pinned);
    assert_int_equal(w.pairs[0][1], j);
#undef SUB
    world_free(&w);
}

/* A pinned job larger than its tenant's surplus (b, nominal 4, runs one
 * 8-GPU job) is reclaimed for another tenant's job inside its nominal:
 * b borrows now. (Reclaimed only while all of it lay beyond b's nominal,
 * it kept a's guaranteed GPUs for good.) */
static void test_pinned_larger_than_the_surplus(void **state)
{
    struct world w;
    char err[128];
    struct allot_job_spec s = {.name = "big",
                               .prio_class = 0,
                               .n_tasks = 2,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    int big, a1;

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs; a and b 4 each */
    assert_int_equal(allot_queue_add_prio_class(w.q, "serving", 10, false), 0);
    s.tenant = w.b;
    big = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    assert_true(big >= 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 1);
    assert_true(allot_queue_job(w.q, big)->borrowed);
    a1 = submit(&w, "a1", w.a, 1, 1, 100, 0); /* inside a's nominal */
    cycle(&w, 100);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][0], big);
    assert_int_equal(w.pairs[0][1], a1);
    world_free(&w);
}

/* Job `name` of tenant te: tasks x gpus whole GPUs in priority class cls. */
static int submit_class(struct world *w, const char *name, int te, int tasks, int gpus, int cls,
                        int64_t now)
{
    char err[128];
    struct allot_job_spec s = {.name = name,
                               .tenant = te,
                               .prio_class = cls,
                               .n_tasks = tasks,
                               .task = {.num_gpu = gpus, .gpu_milli = 1000, .mig_profile = -1}};
    int id = allot_queue_submit(w->q, &s, now, err, sizeof(err));

    if (id < 0)
        fail_msg("submit %s: %s", name, err);
    return id;
}

static void check(struct world *w, const char *when)
{
    char err[256];

    if (allot_queue_check_invariants(w->q, err, sizeof(err)) != 0)
        fail_msg("%s: %s", when, err);
}

/* A class edited in place between preemptible and not (a Slurm QOS changed
 * under running jobs), and a running job moved to another class: b's
 * borrowed job is counted as pinned borrowed work exactly while its class
 * is not preemptible. Before, the count kept what the job started with. */
static void test_class_change_recounts_pinned(void **state)
{
    struct world w;
    int serving, big;

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs; a and b 4 each */
    serving = allot_queue_add_prio_class(w.q, "serving", 10, false);
    assert_int_equal(serving, 0);
    big = submit_class(&w, "big", w.b, 2, 4, serving, 0);
    cycle(&w, 0);
    assert_true(allot_queue_job(w.q, big)->borrowed);
    assert_int_equal(allot_queue_set_prio_class(w.q, serving, "serving", 10, true), 0);
    check(&w, "serving made preemptible");
    assert_int_equal(allot_queue_set_prio_class(w.q, serving, "serving", 10, false), 0);
    check(&w, "serving made not preemptible again");
    assert_int_equal(allot_queue_set_job_class(w.q, big, -1), 0);
    check(&w, "big moved to the default class");
    assert_int_equal(allot_queue_set_job_class(w.q, big, serving), 0);
    check(&w, "big moved back");
    world_free(&w);
}

/* A user changes a job's class after the scheduler placed it (the daemon
 * learns of the change after the start): from the next cycle on it runs as
 * a job of the new class. a's urgent job (prod) leaves a's job x alone
 * while x is serving (not preemptible), and preempts it once x is batch. */
static void test_running_job_changes_class(void **state)
{
    struct world w;
    int serving, batch, prod, x, urgent;

    (void)state;
    world_init(&w, 2, 4, base);
    serving = allot_queue_add_prio_class(w.q, "serving", 10, false);
    batch = allot_queue_add_prio_class(w.q, "batch", 0, true);
    prod = allot_queue_add_prio_class(w.q, "prod", 20, true);
    x = submit_class(&w, "x", w.a, 1, 4, serving, 0);
    submit_class(&w, "b-work", w.b, 1, 4, -1, 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 2);
    urgent = submit_class(&w, "urgent", w.a, 1, 4, prod, 10);
    cycle(&w, 10);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_set_job_class(w.q, x, prod + 1), ALLOT_EINVAL);
    assert_int_equal(allot_queue_set_job_class(w.q, urgent + 1, batch), ALLOT_ENOENT);
    assert_int_equal(allot_queue_set_job_class(w.q, x, batch), 0);
    assert_int_equal(allot_queue_job(w.q, x)->spec.prio_class, batch);
    cycle(&w, 20);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][0], x);
    assert_int_equal(w.pairs[0][1], urgent);
    world_free(&w);
}

/* After a quota change (a's nominal 6 -> 2, b's 2 -> 6) the running jobs
 * are counted again (allot_queue_recount_borrowed): a's four newest are
 * borrowed now, and b's jobs inside its new nominal reclaim them. Before,
 * they stayed in-quota for their whole run and b waited. */
static void test_quota_change_recounts_borrowed(void **state)
{
    struct world w;
    struct allot_quota two = {2000, ALLOT_UNLIMITED, ALLOT_UNLIMITED},
                       six = {6000, ALLOT_UNLIMITED, ALLOT_UNLIMITED};
    char name[16], err[256];
    int aj[6], bj[6];

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs; a and b 4 each */
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, six), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, two), 0);
    for (int i = 0; i < 6; i++) {
        allot_fmt(name, sizeof(name), "a%d", i);
        aj[i] = submit(&w, name, w.a, 1, 1, i, 0);
        cycle(&w, i);
    }
    for (int i = 0; i < 6; i++)
        assert_false(allot_queue_job(w.q, aj[i])->borrowed);
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, two), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, six), 0);
    assert_int_equal(allot_queue_recount_borrowed(w.q, NULL), 4);
    if (allot_queue_check_invariants(w.q, err, sizeof(err)) != 0)
        fail_msg("after the recount: %s", err);
    for (int i = 0; i < 6; i++) /* the two that started first stay in-quota */
        assert_int_equal(allot_queue_job(w.q, aj[i])->borrowed, i >= 2);
    assert_int_equal(allot_queue_recount_borrowed(w.q, NULL), 0); /* nothing changed since */
    for (int i = 0; i < 6; i++) {
        allot_fmt(name, sizeof(name), "b%d", i);
        bj[i] = submit(&w, name, w.b, 1, 1, 700, 0);
    }
    cycle(&w, 700);
    assert_int_equal(w.preempts, 4);
    for (int i = 0; i < w.n_pairs; i++)
        assert_true(w.pairs[i][0] == aj[2] || w.pairs[i][0] == aj[3] || w.pairs[i][0] == aj[4] ||
                    w.pairs[i][0] == aj[5]);
    cycle(&w, 800); /* past the grace */
    for (int i = 0; i < 6; i++)
        assert_int_equal(allot_queue_job(w.q, bj[i])->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A job that waited outside its tenant's nominal (its search for victims
 * found none and was remembered) reclaims once a quota change puts it
 * inside, though no running job's flag changes. */
static void test_quota_change_searches_again(void **state)
{
    struct world w;
    struct allot_quota two = {2000, ALLOT_UNLIMITED, ALLOT_UNLIMITED},
                       four = {4000, ALLOT_UNLIMITED, ALLOT_UNLIMITED};
    char name[16];
    bool only_a[8] = {false};
    int j;

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs */
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, two), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, two), 0);
    for (int i = 0; i < 6; i++) { /* b at 6 of its 2 */
        allot_fmt(name, sizeof(name), "b%d", i);
        submit(&w, name, w.b, 1, 1, 0, 0);
    }
    submit(&w, "a0", w.a, 1, 1, 0, 0);
    submit(&w, "a1", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 8);
    j = submit(&w, "j", w.a, 1, 1, 700, 0); /* a at its 2: j borrows, nothing to take */
    cycle(&w, 700);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, four), 0);
    only_a[w.a] = true;
    assert_int_equal(allot_queue_recount_borrowed(w.q, only_a), 0); /* a's two stay in-quota */
    cycle(&w, 701);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][1], j);
    assert_int_equal(allot_queue_job(w.q, w.pairs[0][0])->spec.tenant, w.b);
    world_free(&w);
}

/* A job more than its tenant may ever hold is no demand for the fair
 * shares: with it waiting for good, another tenant's borrowing is not
 * capped on an idle cluster (the cap binds while others wait). */
static void test_never_job_is_no_demand(void **state)
{
    struct allot_queue_opts o = base;
    struct allot_quota a = {3000, 0, ALLOT_UNLIMITED}, b = {1000, 3000, ALLOT_UNLIMITED};
    struct world w;
    int never, d;

    (void)state;
    o.fair_cap = 1.5;
    world_init(&w, 1, 2, o); /* 4 GPUs */
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, a), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, w.b, ALLOT_RES_GPU, b), 0);
    never = submit(&w, "never", w.a, 4, 1, 0, 0); /* 4 GPUs: a may hold 3 */
    d = submit(&w, "d", w.b, 1, 2, 0, 0);
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, never)->state, ALLOT_JOB_PENDING);
    assert_non_null(strstr(allot_queue_reason(w.q, never), "can never start"));
    assert_int_equal(allot_queue_job(w.q, d)->state, ALLOT_JOB_RUNNING);
    /* a's quota grows: the job may start some day, and is demand again */
    a.borrow_limit = 1000;
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, a), 0);
    cycle(&w, 10);
    assert_false(allot_queue_job(w.q, never)->never);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aging_and_fair_order),
        cmocka_unit_test(test_user_fair_share),
        cmocka_unit_test(test_fair_reclaim),
        cmocka_unit_test(test_reclaim_whatever_class),
        cmocka_unit_test(test_reclaim_pinned_last),
        cmocka_unit_test(test_reclaim_pinned_last_nodes),
        cmocka_unit_test(test_pinned_reclaimable_after_a_start),
        cmocka_unit_test(test_pinned_larger_than_the_surplus),
        cmocka_unit_test(test_quota_change_recounts_borrowed),
        cmocka_unit_test(test_class_change_recounts_pinned),
        cmocka_unit_test(test_running_job_changes_class),
        cmocka_unit_test(test_quota_change_searches_again),
        cmocka_unit_test(test_never_job_is_no_demand),
        cmocka_unit_test(test_fair_cap),
        cmocka_unit_test(test_fair_cap_alone),
        cmocka_unit_test(test_fair_cap_no_borrowing),
        cmocka_unit_test(test_fair_shares_follow_tree),
        cmocka_unit_test(test_compute_only_fraction_reason),
        cmocka_unit_test(test_same_second_in_arrival_order),
        cmocka_unit_test(test_node_resized),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
