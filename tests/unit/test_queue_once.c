/*
 * Unit tests of jobs that run at most once (allot_job_spec.once, allotd's
 * "requeue": false): preempted, they end instead of queueing again, and a
 * victim search counts all their work as lost.
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

/* A job that runs at most once (allotd's "requeue": false) ends when it
 * is preempted, after its grace when it has one, instead of queueing
 * again; the invariants hold and its GPUs go to the preemptor. */
static void test_preempted_once_job_ends(void **state)
{
    struct world w;
    struct allot_job_spec s = {.name = "urgent",
                               .prio_class = 1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    char err[128];

    for (int ckpt = 0; ckpt < 2; ckpt++) {
        struct allot_queue_opts o = base;
        o.grace_s = ckpt ? 30 : 0;
        world_init(&w, 1, 4, o);
        assert_int_equal(allot_queue_add_prio_class(w.q, "training", 10, true), 0);
        assert_int_equal(allot_queue_add_prio_class(w.q, "inference", 100, false), 1);
        struct allot_job_spec t = s;
        t.name = "train";
        t.prio_class = 0;
        t.tenant = w.a;
        t.once = true;
        t.checkpointable = ckpt;
        int v = allot_queue_submit(w.q, &t, 0, err, sizeof(err));
        assert_true(v >= 0);
        cycle(&w, 0);
        assert_int_equal(allot_queue_job(w.q, v)->state, ALLOT_JOB_RUNNING);
        s.tenant = w.a;
        int id = allot_queue_submit(w.q, &s, 10, err, sizeof(err));
        cycle(&w, 10);
        assert_int_equal(w.preempts, 1);
        cycle(&w, 45); /* past the grace */
        assert_int_equal(allot_queue_job(w.q, v)->state, ALLOT_JOB_DONE);
        assert_non_null(strstr(allot_queue_reason(w.q, v), "ended (it runs once)"));
        assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
        cycle(&w, 5000);
        assert_int_equal(allot_queue_job(w.q, v)->state, ALLOT_JOB_DONE);
        world_free(&w);
    }
}

/* A victim's cost is the work it loses: all of it for a job that runs
 * once, however recently it saved (it ends instead of resuming). */
static void test_once_victim_loses_all(void **state)
{
    struct world w;
    char err[128];
    int ids[4];

    world_init(&w, 1, 2, base); /* 4 GPUs; team-a and team-b 2 each */
    for (int i = 0; i < 4; i++) {
        struct allot_job_spec s = {.name = i == 0   ? "a0"
                                           : i == 1 ? "a1"
                                           : i == 2 ? "once"
                                                    : "again",
                                   .tenant = w.a,
                                   .prio_class = -1,
                                   .n_tasks = 1,
                                   .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1},
                                   .checkpointable = true,
                                   .once = i == 2};
        ids[i] = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
        assert_true(ids[i] >= 0);
        cycle(&w, 0); /* one by one: the last two borrow */
    }
    assert_true(allot_queue_job(w.q, ids[2])->borrowed && allot_queue_job(w.q, ids[3])->borrowed);
    /* the once job saved just now, the other half-way: by saves alone the
     * once job would be the cheaper victim */
    assert_int_equal(allot_queue_checkpointed(w.q, ids[2], 99, 100), 0);
    assert_int_equal(allot_queue_checkpointed(w.q, ids[3], 50, 100), 0);
    submit(&w, "b", w.b, 1, 1, 100, 0);
    cycle(&w, 100);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][0], ids[3]);
    assert_int_equal(allot_queue_job(w.q, ids[2])->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preempted_once_job_ends),
        cmocka_unit_test(test_once_victim_loses_all),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
