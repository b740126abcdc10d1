/*
 * Unit tests of jobs that name their nodes (Slurm's --nodelist and
 * --exclude; struct allot_nodeset): one set object per distinct set,
 * every placement policy keeping a task to its set (whole GPUs, a
 * fraction, CPU alone), gangs across and within nodes, preemption and
 * pending reasons said of the nodes it may use.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/queue.h"
#include "allot/sched.h"

#include <stdio.h>
#include <string.h>

#include "catalog_fixture.h"
#include "queue_fixture.h"
#include "queue_world.h"

static const struct allot_nodeset *set_of(struct allot_cluster *c, bool exclude, const int32_t *v,
                                          int n)
{
    int rc;
    const struct allot_nodeset *s = allot_cluster_nodeset(c, exclude, v, n, &rc);

    assert_int_equal(rc, 0);
    return s;
}

/* Equal sets are one object, whatever the order or repeats; an empty
 * exclusion is no set; an index that is no node is refused. */
static void test_nodeset_interned(void **state)
{
    struct world w;
    int32_t a[] = {2, 0, 2}, b[] = {0, 2}, bad[] = {0, 9};
    const struct allot_nodeset *s, *x;
    int rc;

    (void)state;
    world_init(&w, 4, 8, base);
    s = set_of(w.c, false, a, 3);
    assert_non_null(s);
    assert_int_equal(s->n, 2);
    assert_ptr_equal(set_of(w.c, false, b, 2), s);
    x = set_of(w.c, true, b, 2);
    assert_ptr_not_equal(x, s);
    assert_true(allot_nodeset_has(s, 0) && allot_nodeset_has(s, 2));
    assert_false(allot_nodeset_has(s, 1) || allot_nodeset_has(s, 3));
    assert_false(allot_nodeset_has(x, 0) || allot_nodeset_has(x, 2));
    assert_true(allot_nodeset_has(x, 1) && allot_nodeset_has(x, 3));
    assert_null(set_of(w.c, true, NULL, 0));
    assert_true(allot_nodeset_has(NULL, 3));
    assert_non_null(set_of(w.c, false, NULL, 0)); /* no node at all */
    assert_null(allot_cluster_nodeset(w.c, false, bad, 2, &rc));
    assert_int_equal(rc, ALLOT_EINVAL);
    /* a task with the set is another shape than one without */
    struct allot_task t = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}, u = t;
    u.nodes = s;
    assert_false(allot_task_same(&t, &u));
    assert_true(allot_task_picks_nodes(&u));
    world_free(&w);
}

/* Many sets: each found again as the same object (the index grows), and
 * a failed allocation at any point makes no set and loses none made. */
static void test_nodeset_index_and_failures(void **state)
{
    struct world w;
    const struct allot_nodeset *made[300];
    int rc;

    (void)state;
    world_init(&w, 300, 8, base);
    for (int32_t i = 0; i < 300; i++) /* {i}, and all but {i, i+1} */
        made[i] =
            i % 2 ? set_of(w.c, false, &i, 1) : set_of(w.c, true, (int32_t[]){i, (i + 1) % 300}, 2);
    for (int32_t i = 299; i >= 0; i--)
        assert_ptr_equal(i % 2 ? set_of(w.c, false, &i, 1)
                               : set_of(w.c, true, (int32_t[]){(i + 1) % 300, i}, 2),
                         made[i]);
    for (unsigned long k = 1;; k++) {
        int32_t v[] = {7, 3, 11};
        const struct allot_nodeset *s;
        allot_alloc_fail_at(k, false);
        s = allot_cluster_nodeset(w.c, false, v, 3, &rc);
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            assert_int_equal(s->n, 3);
            assert_ptr_equal(set_of(w.c, false, v, 3), s);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_null(s);
        assert_true(k < 10);
    }
    for (int32_t i = 0; i < 300; i += 37) /* the others still there */
        assert_ptr_equal(i % 2 ? set_of(w.c, false, &i, 1)
                               : set_of(w.c, true, (int32_t[]){i, (i + 1) % 300}, 2),
                         made[i]);
    world_free(&w);
}

/* Every placement policy keeps a task to its set: whole GPUs, a fraction
 * and CPU alone, listed nodes and all but excluded ones, until the set is
 * full (then no fit, though other nodes are free). */
static void test_every_policy_keeps_to_the_set(void **state)
{
    const struct allot_task shapes[] = {
        {.num_gpu = 2, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 1000},
        {.num_gpu = 1, .gpu_milli = 300, .mig_profile = -1, .cpu_milli = 1000},
        {.num_gpu = 0, .mig_profile = -1, .cpu_milli = 16000},
    };

    (void)state;
    for (int p = 0; allot_sched_policies[p]; p++)
        for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
            for (int ex = 0; ex < 2; ex++) {
                struct allot_cluster *c = allot_cluster_new(cat, 0);
                struct allot_sched_opts o = {.seed = 7};
                struct allot_sched *s;
                struct allot_placement pl;
                int32_t listed[] = {1, 3}, others[] = {0, 2, 4};
                int placed = 0;
                char err[128], name[8];

                for (int i = 0; i < 5; i++) { /* h0..h4: 4 shared H100s, 64 cores */
                    struct allot_node_spec sp = {.name = name,
                                                 .model = "H100",
                                                 .cpu_milli = 64000,
                                                 .mem_mib = 262144,
                                                 .n_gpus = 4};
                    allot_fmt(name, sizeof(name), "h%d", i);
                    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), i);
                }
                s = allot_sched_new(c, allot_sched_policies[p], &o);
                assert_non_null(s);
                struct allot_task t = shapes[k];
                /* the set {1, 3}: listed, or every node but 0, 2 and 4 */
                t.nodes = ex ? set_of(c, true, others, 3) : set_of(c, false, listed, 2);
                while (allot_sched_place(s, &t, &pl, err, sizeof(err)) == 0) {
                    if (pl.node != 1 && pl.node != 3)
                        fail_msg("policy %s, shape %zu, %s: placed on node %d",
                                 allot_sched_policies[p]->name, k, ex ? "exclude" : "list",
                                 pl.node);
                    placed++;
                    assert_true(placed < 100);
                }
                /* full: 2 nodes' GPUs (3 fractions each), or 4 x 16 of their 64 cores */
                assert_int_equal(placed, k == 0 ? 4 : k == 1 ? 24 : 8);
                /* the same shape without the set still fits elsewhere */
                struct allot_task any = shapes[k];
                assert_int_equal(allot_sched_place(s, &any, &pl, err, sizeof(err)), 0);
                assert_true(pl.node == 0 || pl.node == 2 || pl.node == 4);
                assert_int_equal(allot_sched_check_invariants(s, err, sizeof(err)), 0);
                allot_sched_free(s);
                allot_cluster_free(c);
            }
}

/* A job on a listed node runs there; with its nodes full it waits, and
 * says so of its nodes, though other nodes are free; a listed node out of
 * service is named; a gang lands on its listed nodes only. */
static void test_queue_list_and_reasons(void **state)
{
    struct world w;
    int32_t two[] = {2}, ends[] = {0, 3};
    const struct allot_nodeset *on2, *notends;
    int a, b, g;

    (void)state;
    world_init(&w, 4, 16, base); /* h0..h3 */
    on2 = set_of(w.c, false, two, 1);
    notends = set_of(w.c, true, ends, 2);
    a = submit_in(&w, "a", w.a, 1, 4, 0, 0, on2);
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, a)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, a)->pl[0].node, 2);
    b = submit_in(&w, "b", w.a, 1, 1, 1, 0, on2);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, b)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, b),
                        "among the nodes of its node list: no node has 1 free GPU (most free on "
                        "one node: 0)");
    allot_cluster_set_state(w.c, 2, ALLOT_NODE_DRAINING);
    cycle(&w, 2);
    assert_string_equal(allot_queue_reason(w.q, b),
                        "no node of its node list is ready (1 lost, cordoned or draining)");
    /* a gang of two 4-GPU tasks on every node but h0 and h3 (h2 drains):
     * h1 alone is left, too little; once h2 is back and free, h1 and h2 */
    g = submit_in(&w, "g", w.b, 2, 4, 3, 0, notends);
    allot_queue_cancel(w.q, b, 3);
    cycle(&w, 3);
    assert_int_equal(allot_queue_job(w.q, g)->state, ALLOT_JOB_PENDING);
    /* of its two nodes h1 is free, h2 draining: said */
    assert_string_equal(allot_queue_reason(w.q, g),
                        "among the nodes it does not exclude: no room for 2 tasks of 4 GPUs each "
                        "(most free on one node: 4) (1 of them lost, cordoned or draining)");
    allot_cluster_set_state(w.c, 2, ALLOT_NODE_READY);
    allot_queue_finish(w.q, a, 4);
    cycle(&w, 4);
    assert_int_equal(allot_queue_job(w.q, g)->state, ALLOT_JOB_RUNNING);
    for (int k = 0; k < 2; k++) {
        int n = allot_queue_job(w.q, g)->pl[k].node;
        assert_true(n == 1 || n == 2);
    }
    world_free(&w);
}

/* A gang of small tasks that fits on one node goes to a node of its set
 * (not the class representative outside it); one asking more GPUs than
 * its nodes have says it can never start. */
static void test_queue_gang_within_a_node(void **state)
{
    struct world w;
    int32_t three[] = {3};
    const struct allot_nodeset *on3;
    int g, big;

    (void)state;
    world_init(&w, 4, 16, base); /* four alike nodes: one class */
    on3 = set_of(w.c, false, three, 1);
    g = submit_in(&w, "g", w.a, 2, 2, 0, 0, on3);
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, g)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, g)->pl[0].node, 3);
    assert_int_equal(allot_queue_job(w.q, g)->pl[1].node, 3);
    big = submit_in(&w, "big", w.a, 2, 4, 1, 0, on3);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, big),
                        "it can never start: the nodes of its node list have 4 GPUs in all; it "
                        "asks for 8");
    /* labels that no listed node carries: said so, not that no node is left */
    char err[256];
    struct allot_job_spec s = {.name = "lab",
                               .tenant = w.a,
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    s.task.nodes = on3;
    s.task.select[0] = allot_label_hash("zone", "b");
    int lab = allot_queue_submit(w.q, &s, 2, err, sizeof(err));
    assert_true(lab >= 0);
    cycle(&w, 2);
    assert_string_equal(allot_queue_reason(w.q, lab),
                        "no node of its node list has the labels of its node selector");
    world_free(&w);
}

/* Preemption frees room on a node the job may use, not the cheapest
 * anywhere: team-b borrowed all of h0 and h1; team-a's job in its
 * nominal, listed on h1, takes its victims there. */
static void test_preempt_on_the_listed_node(void **state)
{
    struct world w;
    int32_t one[] = {1};
    int v0, v1, j;

    (void)state;
    world_init(&w, 2, 4, base); /* 8 GPUs, nominal 4 each */
    v0 = submit(&w, "v0", w.b, 1, 4, 0, 0);
    cycle(&w, 0);
    v1 = submit(&w, "v1", w.b, 1, 4, 10, 0);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, v0)->pl[0].node, 0);
    assert_int_equal(allot_queue_job(w.q, v1)->pl[0].node, 1);
    j = submit_in(&w, "j", w.a, 1, 4, 20, 0, set_of(w.c, false, one, 1));
    cycle(&w, 20);
    assert_int_equal(w.preempts, 1);
    assert_int_equal(w.pairs[0][0], v1); /* the newer, borrowed, on h1 */
    cycle(&w, 60);                       /* the grace period ends */
    cycle(&w, 61);
    assert_int_equal(allot_queue_job(w.q, j)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, j)->pl[0].node, 1);
    assert_int_equal(allot_queue_job(w.q, v0)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodeset_interned),
        cmocka_unit_test(test_nodeset_index_and_failures),
        cmocka_unit_test(test_every_policy_keeps_to_the_set),
        cmocka_unit_test(test_queue_list_and_reasons),
        cmocka_unit_test(test_queue_gang_within_a_node),
        cmocka_unit_test(test_preempt_on_the_listed_node),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
