/*
 * Unit tests of defragmentation (opts.defrag_s, src/core/queue_defrag.c):
 * a job that waits for a whole node while its GPUs are free in pieces gets
 * it by moving a checkpointed job elsewhere; nothing moves when a moved job
 * would find no room, when it would lose more than defrag_loss_s of work,
 * when it cannot checkpoint, or when the pass is off; a moved job is never
 * moved for the job it made room for (a move is a preemption); rooms are
 * only on nodes the waiting job may use (its labels); the
 * waiting job takes its room before the moved jobs are placed again; two
 * plans of one pass never count on the same room; without a grace period
 * the move completes within the cycle; and every allocation of a cycle that
 * moves failing in turn leaves the queue consistent.
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

/* Runs team-b job `name` of `gpus` GPUs on GPUs `mask` of node `node`
 * since time 0 (checkpointable, saving every 600 s unless ckpt is false). */
static int run_at(struct world *w, const char *name, int node, uint32_t mask, bool ckpt)
{
    char err[256];
    struct allot_placement pl = {
        .node = node, .gpu_mask = mask, .gpu_milli = ALLOT_MILLI, .mig_profile = -1};
    struct allot_job_spec s = {.name = name,
                               .tenant = w->b,
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = __builtin_popcount(mask),
                                        .gpu_milli = ALLOT_MILLI,
                                        .mig_profile = -1,
                                        .cpu_milli = 1000},
                               .checkpointable = ckpt,
                               .checkpoint_interval_s = ckpt ? 600 : 0};
    int id = allot_queue_adopt(w->q, &s, &pl, 0, 0, err, sizeof(err));

    if (id < 0)
        fail_msg("adopt %s: %s", name, err);
    return id;
}

static struct allot_queue_opts defrag_opts(void)
{
    struct allot_queue_opts o = base;

    o.defrag_s = 60;
    o.defrag_loss_s = 300;
    return o;
}

/* Two 4-GPU nodes, each with a 2-GPU job of team-b: 4 GPUs free, none
 * whole node. team-a (inside its nominal) asks for 4 GPUs at 100. */
static void setup_split(struct world *w, struct allot_queue_opts o, bool ckpt, int *b0, int *a0)
{
    world_init(w, 2, 8, o);
    *b0 = run_at(w, "b0", 0, 0x3, ckpt);
    run_at(w, "b1", 1, 0x3, ckpt);
    *a0 = submit(w, "a0", w->a, 1, 4, 100, 0);
}

static void test_moves_to_make_room(void **state)
{
    struct world w;
    int b0, a0;
    const struct allot_job *j;

    (void)state;
    setup_split(&w, defrag_opts(), true, &b0, &a0);
    cycle(&w, 100);
    /* b0 (on node 0, the first of two rooms that cost the same) moves */
    assert_int_equal(w.preempts, 1);
    assert_string_equal(w.last_why,
                        "moved at its checkpoint (defragmentation) to make room for job a0");
    assert_int_equal(allot_queue_job(w.q, b0)->state, ALLOT_JOB_STOPPING);
    assert_string_equal(allot_queue_reason(w.q, a0),
                        "waiting for 2 GPUs that jobs of ml/team-b free by moving (grace 30 s)");
    /* the grace period ends: a0 takes node 0, b0 starts again on node 1 */
    cycle(&w, 130);
    j = allot_queue_job(w.q, a0);
    assert_int_equal(j->state, ALLOT_JOB_RUNNING);
    assert_int_equal(j->pl[0].node, 0);
    assert_int_equal(j->pl[0].gpu_mask, 0xf);
    j = allot_queue_job(w.q, b0);
    assert_int_equal(j->state, ALLOT_JOB_RUNNING);
    assert_int_equal(j->pl[0].node, 1);
    assert_int_equal(j->start, 130);
    assert_false(j->moving);
    assert_int_equal(w.stops, 1);
    assert_int_equal(allot_cluster_used_milli(w.c), 8000);
    /* nothing waits: no more moves */
    cycle(&w, 1000);
    assert_int_equal(w.preempts, 1);
    world_free(&w);
}

/* A gang of two 4-GPU tasks selecting zone=b, two zone=b nodes with a
 * 2-GPU job each and a free node without labels: the free node is no room
 * for the gang, so both zone=b nodes are made room on (their jobs move to
 * the free node), not one. */
static void test_room_on_selected_nodes(void **state)
{
    static const char *const zones[] = {"b", "b", NULL};
    struct world w;
    struct allot_job_spec s = {.name = "a0",
                               .prio_class = -1,
                               .n_tasks = 2,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    char err[256], name[8];
    int a0;

    (void)state;
    world_init(&w, 0, 8, defrag_opts());
    for (int i = 0; i < 3; i++) {
        allot_fmt(name, sizeof(name), "n%d", i);
        assert_int_equal(world_add_zone_node(&w, name, zones[i]), i);
    }
    run_at(&w, "b0", 0, 0x3, true);
    run_at(&w, "b1", 1, 0x3, true);
    s.tenant = w.a;
    s.task.select[0] = allot_label_hash("zone", "b");
    a0 = allot_queue_submit(w.q, &s, 100, err, sizeof(err));
    assert_true(a0 >= 0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 2);
    cycle(&w, 130);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a0)->pl[0].node + allot_queue_job(w.q, a0)->pl[1].node,
                     1);
    world_free(&w);
}

/* The moved job must fit elsewhere at once, or nothing moves. */
static void test_no_room_elsewhere(void **state)
{
    struct world w;
    int b0, a0;

    (void)state;
    setup_split(&w, defrag_opts(), true, &b0, &a0);
    run_at(&w, "b2", 1, 0xc, true); /* node 1 is full now */
    cycle(&w, 100);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, b0)->state, ALLOT_JOB_RUNNING);
    assert_string_equal(allot_queue_reason(w.q, a0),
                        "no node has 4 free GPUs in one NVLink island (most free on one node: 2)");
    world_free(&w);
}

/* A job moves only near its checkpoint: at 500 it would lose 530 s of
 * work (grace included) against 300; past its next save (600) it moves. */
static void test_loss_bound(void **state)
{
    struct world w;
    int b0, a0;

    (void)state;
    setup_split(&w, defrag_opts(), true, &b0, &a0);
    cycle(&w, 500);
    assert_int_equal(w.preempts, 0);
    cycle(&w, 540); /* before the next pass (560): none */
    assert_int_equal(w.preempts, 0);
    assert_true(allot_queue_next_wakeup(w.q) <= 600);
    cycle(&w, 620);
    assert_int_equal(w.preempts, 1);
    cycle(&w, 650);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* A save the job reports (allot_queue_checkpointed) counts from when it
 * was made: b0, saved at 550, loses 40 s at the pass of 560 and moves,
 * where by its interval alone it would wait for 600; b1, which reported
 * nothing, stays. Reports that are out of its run, older than the last one,
 * of a job that cannot checkpoint or that does not run are refused or
 * change nothing. */
static void test_reported_save(void **state)
{
    struct world w;
    int b0, a0;

    (void)state;
    setup_split(&w, defrag_opts(), true, &b0, &a0);
    cycle(&w, 500);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_checkpointed(w.q, b0, 501, 500), ALLOT_EINVAL);
    assert_int_equal(allot_queue_checkpointed(w.q, b0, -1, 500), ALLOT_EINVAL);
    assert_int_equal(allot_queue_checkpointed(w.q, a0, 400, 500), ALLOT_ESTATE);
    assert_int_equal(allot_queue_checkpointed(w.q, 99, 400, 500), ALLOT_ENOENT);
    assert_int_equal(allot_queue_checkpointed(w.q, b0, 550, 555), 0);
    assert_int_equal(allot_queue_checkpointed(w.q, b0, 540, 555), 0);
    assert_int_equal(allot_queue_job(w.q, b0)->saved_at, 550);
    cycle(&w, 560);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(allot_queue_job(w.q, b0)->state, ALLOT_JOB_STOPPING);
    assert_int_equal(allot_queue_job(w.q, b0 + 1)->state, ALLOT_JOB_RUNNING);
    cycle(&w, 600);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    /* its next run's saves count from its new start */
    assert_int_equal(allot_queue_job(w.q, b0)->saved_at, allot_queue_job(w.q, b0)->start);
    world_free(&w);
    setup_split(&w, defrag_opts(), false, &b0, &a0);
    assert_int_equal(allot_queue_checkpointed(w.q, b0, 0, 10), ALLOT_EINVAL);
    world_free(&w);
}

/* When the cheapest room's movers find no place elsewhere, the next room
 * is tried. Three nodes: b0 (3 GPUs, saved lately: the cheapest room) on
 * h0, b1 (2 GPUs) on h1, c0 (2 GPUs, cannot checkpoint) on h2; a0 asks for
 * 4 GPUs. b0 fits nowhere else (2 GPUs free at most), b1 fits on h2. */
static void test_next_room(void **state)
{
    struct world w;
    int b0, b1, a0;

    (void)state;
    world_init(&w, 3, 12, defrag_opts());
    b0 = run_at(&w, "b0", 0, 0x7, true);
    b1 = run_at(&w, "b1", 1, 0x3, true);
    run_at(&w, "c0", 2, 0x3, false);
    a0 = submit(&w, "a0", w.a, 1, 4, 100, 0);
    assert_int_equal(allot_queue_checkpointed(w.q, b0, 95, 100), 0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(allot_queue_job(w.q, b0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, b1)->state, ALLOT_JOB_STOPPING);
    cycle(&w, 130);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a0)->pl[0].node, 1);
    assert_int_equal(allot_queue_job(w.q, b1)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, b1)->pl[0].node, 2);
    world_free(&w);
}

/* Off, or jobs that cannot checkpoint: nothing moves. */
static void test_off_and_not_checkpointable(void **state)
{
    struct world w;
    int b0, a0;

    (void)state;
    setup_split(&w, base, true, &b0, &a0);
    cycle(&w, 100);
    cycle(&w, 1000);
    assert_int_equal(w.preempts, 0);
    world_free(&w);
    setup_split(&w, defrag_opts(), false, &b0, &a0);
    cycle(&w, 100);
    cycle(&w, 1000);
    assert_int_equal(w.preempts, 0);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_PENDING);
    world_free(&w);
}

/* A move is a preemption: the moved job remembers the job it made room
 * for, so it never preempts that job in turn (the standing rule), and the
 * job it made room for is never moved for it. */
static void test_move_is_a_preemption(void **state)
{
    struct world w;
    int b0, b1, a0;

    (void)state;
    world_init(&w, 2, 8, defrag_opts());
    b0 = run_at(&w, "b0", 0, 0x3, true);
    b1 = run_at(&w, "b1", 1, 0x3, true);
    a0 = submit(&w, "a0", w.a, 1, 4, 100, 0);
    cycle(&w, 100);
    assert_int_equal(w.n_pairs, 1);
    assert_int_equal(w.pairs[0][0], b0);
    assert_int_equal(w.pairs[0][1], a0);
    assert_int_equal(allot_queue_job(w.q, b0)->n_preemptors, 1);
    assert_int_equal(allot_queue_job(w.q, b0)->preemptors[0], a0);
    assert_int_equal(allot_queue_job(w.q, b0)->preemptions, 1);
    assert_int_equal(allot_queue_job(w.q, b1)->n_preemptors, 0);
    cycle(&w, 130);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* Two jobs moved for one: when their grace period ends, the waiting job
 * takes its room before either of them is placed again (with spread
 * placement the first moved job would otherwise land on the emptied node). */
static void test_waiting_job_goes_first(void **state)
{
    struct world w;
    struct allot_queue_opts o = defrag_opts();
    int b0, b1, a0;

    (void)state;
    o.placement = "spread";
    world_init(&w, 2, 8, o);
    b0 = run_at(&w, "b0", 0, 0x1, true);
    b1 = run_at(&w, "b1", 0, 0x2, true);
    run_at(&w, "b2", 1, 0x3, false); /* cannot checkpoint: stays */
    a0 = submit(&w, "a0", w.a, 1, 4, 100, 0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 2);
    cycle(&w, 130);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a0)->pl[0].node, 0);
    assert_int_equal(allot_queue_job(w.q, b0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, b0)->pl[0].node, 1);
    assert_int_equal(allot_queue_job(w.q, b1)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, b1)->pl[0].node, 1);
    world_free(&w);
}

/* Two waiting jobs in one pass never count on the same room: the second
 * would need the holes the first one's moved job goes to, so only the
 * first moves, and no moved job is left without a place. */
static void test_one_room_per_plan(void **state)
{
    struct world w;
    int a0, a1;

    (void)state;
    world_init(&w, 3, 12, defrag_opts());
    run_at(&w, "b0", 0, 0x3, true);
    run_at(&w, "b1", 1, 0x3, true);
    run_at(&w, "b2", 2, 0x3, false);
    a0 = submit(&w, "a0", w.a, 1, 4, 100, 0);
    a1 = submit(&w, "a1", w.a, 1, 4, 100, 0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][1], a0);
    cycle(&w, 130);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a1)->state, ALLOT_JOB_PENDING);
    for (int id = 0; id < allot_queue_job_count(w.q); id++) {
        const struct allot_job *j = allot_queue_job(w.q, id);
        if (j && j->name[0] == 'b')
            assert_int_equal(j->state, ALLOT_JOB_RUNNING);
    }
    world_free(&w);
}

/* Without a grace period the move happens within the cycle: the waiting
 * job and the moved one both run when it returns. */
static void test_no_grace(void **state)
{
    struct world w;
    struct allot_queue_opts o = defrag_opts();
    int b0, a0;

    (void)state;
    o.grace_s = 0;
    setup_split(&w, o, true, &b0, &a0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(allot_queue_job(w.q, a0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a0)->pl[0].node, 0);
    assert_int_equal(allot_queue_job(w.q, b0)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, b0)->pl[0].node, 1);
    cycle(&w, 1000);
    assert_int_equal(w.preempts, 1);
    world_free(&w);
}

/* A cycle that moves, with every allocation failing in turn (once, then
 * from then on): a clean error or success, the invariants (no job on GPUs
 * that look free), and a next cycle that works. */
static void test_alloc_failures(void **state)
{
    (void)state;
    for (int sticky = 0; sticky <= 1; sticky++) {
        unsigned long n;
        for (n = 1; n < 100000; n++) {
            struct world w;
            char err[256];
            unsigned long used;
            int b0, a0, rc;
            setup_split(&w, defrag_opts(), true, &b0, &a0);
            allot_alloc_fail_at(n, sticky);
            rc = allot_queue_cycle(w.q, 100, on_decision, &w);
            used = allot_alloc_count();
            allot_alloc_fail_at(0, false);
            if (rc != 0 && rc != ALLOT_ENOMEM)
                fail_msg("allocation %lu failing: %s", n, allot_strerror(rc));
            if (allot_queue_check_invariants(w.q, err, sizeof(err)) != 0)
                fail_msg("allocation %lu failing: %s", n, err);
            if (allot_queue_cycle(w.q, 200, on_decision, &w) != 0 ||
                allot_queue_check_invariants(w.q, err, sizeof(err)) != 0)
                fail_msg("allocation %lu failing, next cycle: %s", n, err);
            world_free(&w);
            if (rc == 0 && used < n)
                break;
        }
        assert_true(n > 1);
        print_message("defragmenting cycle (%s): %lu allocations\n", sticky ? "sticky" : "once",
                      n - 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moves_to_make_room),
        cmocka_unit_test(test_room_on_selected_nodes),
        cmocka_unit_test(test_no_room_elsewhere),
        cmocka_unit_test(test_loss_bound),
        cmocka_unit_test(test_reported_save),
        cmocka_unit_test(test_next_room),
        cmocka_unit_test(test_off_and_not_checkpointable),
        cmocka_unit_test(test_move_is_a_preemption),
        cmocka_unit_test(test_waiting_job_goes_first),
        cmocka_unit_test(test_one_room_per_plan),
        cmocka_unit_test(test_no_grace),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
