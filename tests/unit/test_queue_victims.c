/*
 * Unit tests of the order in which the queue takes victims
 * (src/core/queue_preempt.c): among jobs a preemption may take, the
 * lowest priority class goes first, whatever their lost work, so that a
 * job of a higher class is not preempted only to preempt the lower one
 * itself when it is requeued; and which running jobs become borrowed
 * when a nominal shrinks.
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

static int submit_class(struct world *w, const char *name, int cls, int gpus, int64_t now)
{
    char err[128];
    struct allot_job_spec s = {
        .name = name,
        .tenant = w->a,
        .prio_class = cls,
        .n_tasks = 1,
        .task = {.num_gpu = gpus, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000}};
    int id = allot_queue_submit(w->q, &s, now, err, sizeof(err));

    if (id < 0)
        fail_msg("submit %s: %s", name, err);
    return id;
}

/* A low job and a younger normal one of team-a, each of `gpus` GPUs, fill
 * `nodes` nodes of 4 GPUs (team-a's nominal: all of them); a critical job
 * of `gpus` GPUs comes: the low one goes (on its node), not the normal
 * one, which loses less work but would preempt the low one in its turn. */
static void lowest_class_first(int nodes, int gpus)
{
    struct allot_queue_opts o = base;
    struct world w;
    int low, normal, crit;

    o.grace_s = 0;
    world_init(&w, nodes, 4 * nodes, o);
    int lo = allot_queue_add_prio_class(w.q, "low", 100, true);
    int no = allot_queue_add_prio_class(w.q, "normal", 500, true);
    int cr = allot_queue_add_prio_class(w.q, "critical", 1000, false);
    low = submit_class(&w, "low", lo, gpus, 0);
    cycle(&w, 0);
    normal = submit_class(&w, "normal", no, gpus, 100);
    cycle(&w, 100);
    assert_int_equal(w.starts, 2);
    crit = submit_class(&w, "crit", cr, gpus, 200);
    for (int64_t t = 200; t < 210; t++)
        cycle(&w, t);
    assert_int_equal(allot_queue_job(w.q, crit)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, normal)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, low)->state, ALLOT_JOB_PENDING);
    assert_int_equal(w.preempts, 1);
    world_free(&w);
}

/* On one node: the victims' order (cmp_victim). */
static void test_lowest_class_first(void **state)
{
    (void)state;
    lowest_class_first(1, 2);
}

/* Across two nodes, one job on each: the node's choice (node_pick). */
static void test_lowest_class_first_across_nodes(void **state)
{
    (void)state;
    lowest_class_first(2, 4);
}

/* After a tenant's nominal shrinks, its newest running jobs become the
 * borrowed ones: newest by start, then by submission (spec.seq), not by
 * the queue's slot, which a later job may take from an earlier one. */
static void test_newest_become_borrowed(void **state)
{
    struct allot_queue_opts o = base;
    struct allot_quota two = {
        .nominal = 2000, .borrow_limit = ALLOT_UNLIMITED, .lend_limit = ALLOT_UNLIMITED};
    struct world w;
    char err[128];
    int f[2], v[2];

    (void)state;
    world_init(&w, 1, 4, o);
    for (int i = 0; i < 2; i++)
        f[i] = submit_class(&w, "f", -1, 1, 0);
    cycle(&w, 0);
    for (int i = 0; i < 2; i++) { /* their slots free: the last freed is taken first */
        assert_int_equal(allot_queue_cancel(w.q, f[i], 1), 0);
        assert_int_equal(allot_queue_forget(w.q, f[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        struct allot_job_spec s = {
            .name = i ? "v3" : "v2",
            .tenant = w.a,
            .prio_class = -1,
            .seq = 2 + i,
            .n_tasks = 1,
            .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000}};
        v[i] = allot_queue_submit(w.q, &s, 2, err, sizeof(err));
        assert_true(v[i] >= 0);
    }
    assert_true(v[1] < v[0]); /* the later submission has the lower slot */
    cycle(&w, 2);
    assert_int_equal(allot_queue_job(w.q, v[0])->start, allot_queue_job(w.q, v[1])->start);
    two.nominal = 1000;
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, two), 0);
    assert_true(allot_queue_recount_borrowed(w.q, NULL) >= 0);
    assert_false(allot_queue_job(w.q, v[0])->borrowed);
    assert_true(allot_queue_job(w.q, v[1])->borrowed);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowest_class_first),
        cmocka_unit_test(test_lowest_class_first_across_nodes),
        cmocka_unit_test(test_newest_become_borrowed),
    };

    (void)submit; /* queue_world.h's, for jobs of no class */
    return cmocka_run_group_tests(tests, setup, teardown);
}
