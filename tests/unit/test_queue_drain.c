/*
 * Unit tests of victims on nodes that take no new work (cordoned,
 * draining, fenced): a preemption trial releases them tentatively and puts
 * them back where they run (allot_sched_restore), whatever the node's
 * state; neither the trial nor its undo evicts them or loses track of
 * them.
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

/* A tenant's low job runs on a node that is then drained; its high job
 * preempts it (room on the other node once quota is freed). The trial's
 * undo puts the low job back on the draining node: no eviction, no crash
 * (an exclusive victim's undo ran a second pass over evicted ones). For
 * each isolation level, and with nothing found as well (the other node
 * full). */
static void test_victim_on_draining_node(void **state)
{
    struct allot_job_spec s = {.name = "low",
                               .prio_class = 0,
                               .n_tasks = 1,
                               .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1}};
    struct allot_quota four = {4000, 0, ALLOT_UNLIMITED};
    char err[128];

    (void)state;
    (void)submit; /* the world's helper, not needed here */
    for (int iso = 0; iso < 3; iso++) {
        struct world w;
        int low, high;

        world_init(&w, 2, 4, base); /* 2 nodes of 4 H100s */
        allot_tenants_get(w.t, w.a)->isolation = iso;
        assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, four), 0);
        assert_int_equal(allot_queue_add_prio_class(w.q, "low", 10, true), 0);
        assert_int_equal(allot_queue_add_prio_class(w.q, "high", 100, false), 1);
        s.tenant = w.a;
        s.name = "low";
        s.prio_class = 0;
        low = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
        assert_true(low >= 0);
        cycle(&w, 0);
        assert_int_equal(allot_queue_job(w.q, low)->state, ALLOT_JOB_RUNNING);
        int on = allot_queue_job(w.q, low)->pl[0].node;
        assert_int_equal(allot_cluster_set_state(w.c, on, ALLOT_NODE_DRAINING), 0);
        evictions = 0;
        s.name = "high";
        s.prio_class = 1;
        high = allot_queue_submit(w.q, &s, 100, err, sizeof(err));
        assert_true(high >= 0);
        cycle(&w, 100);
        assert_int_equal(evictions, 0);
        assert_int_equal(w.preempts, 1);
        assert_int_equal(w.pairs[0][0], low);
        cycle(&w, 130); /* the grace ends */
        assert_int_equal(allot_queue_job(w.q, high)->state, ALLOT_JOB_RUNNING);
        assert_true(allot_queue_job(w.q, high)->pl[0].node != on);
        world_free(&w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_victim_on_draining_node),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
