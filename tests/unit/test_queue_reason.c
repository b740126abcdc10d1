/*
 * Unit tests of the queue's pending reasons for GPUs no ready node has
 * (src/core/queue.c text_capacity): nodes lost, cordoned or draining, and
 * GPUs in a mode the task cannot use (a MIG slice outside MIG mode, a
 * whole GPU in MIG mode, a fraction outside shared mode), and a tenant or
 * cohort that borrowed up to its borrowing limit (the limit named, not
 * the nominal it is above).
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

/* A job no ready node has the GPUs for says so (not that CPU or memory is
 * short), and counts the nodes with them that are out of service. */
static void test_reason_no_ready_node(void **state)
{
    struct world w;
    int big, one;

    (void)state;
    world_init(&w, 2, 8, base); /* 2 nodes of 4 H100s */
    big = submit(&w, "big", w.a, 1, 8, 0, 0);
    cycle(&w, 0);
    assert_string_equal(allot_queue_reason(w.q, big), "no ready node has 8 GPUs");
    allot_cluster_set_state(w.c, 0, ALLOT_NODE_LOST);
    allot_cluster_set_state(w.c, 1, ALLOT_NODE_DRAINING);
    one = submit(&w, "one", w.b, 1, 1, 1, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, one)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, one),
                        "no ready node has 1 GPU (2 nodes with them lost, cordoned or draining)");
    /* a job of CPU alone too, not that no node has its CPU free */
    char err[128];
    struct allot_job_spec s = {.name = "cpu",
                               .tenant = w.b,
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.mig_profile = -1, .cpu_milli = 1000}};
    int cpu = allot_queue_submit(w.q, &s, 2, err, sizeof(err));
    assert_true(cpu >= 0);
    cycle(&w, 2);
    assert_int_equal(allot_queue_job(w.q, cpu)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, cpu),
                        "no ready node (2 lost, cordoned or draining)");
    world_free(&w);
}

/* A job inside its tenant's nominal that waits for borrowed work to pass
 * its minimum runtime says that it will be reclaimed for it, not only
 * which quota is full (which reads as a refusal). */
static void test_reason_reclaim_to_come(void **state)
{
    struct allot_queue_opts o = base;
    struct world w;
    int b;

    (void)state;
    o.min_runtime_s = 600;
    world_init(&w, 1, 2, o); /* 4 GPUs; team-a and team-b 2 each */
    for (int i = 0; i < 4; i++)
        submit(&w, "a", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 4);
    b = submit(&w, "b", w.b, 1, 1, 10, 0);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, b)->state, ALLOT_JOB_PENDING);
    const char *why = allot_queue_reason(w.q, b);
    assert_non_null(strstr(why, "within its tenant's nominal: borrowed work is reclaimed for it "
                                "once that work has run 600 s"));
    cycle(&w, 601); /* then it is */
    for (int64_t t = 602; t < 700; t++)
        cycle(&w, t);
    assert_int_equal(allot_queue_job(w.q, b)->state, ALLOT_JOB_RUNNING);
    world_free(&w);

    /* nominals of 4 each under a cluster quota of 4: a holds its own,
     * nothing is borrowed, and nothing is promised */
    world_init(&w, 1, 4, o);
    struct allot_quota four = {
        .nominal = 4000, .borrow_limit = ALLOT_UNLIMITED, .lend_limit = ALLOT_UNLIMITED};
    assert_int_equal(allot_tenants_set_quota(w.t, 0, ALLOT_RES_GPU, four), 0);
    for (int i = 0; i < 4; i++)
        submit(&w, "a", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    b = submit(&w, "b", w.b, 1, 1, 10, 0);
    cycle(&w, 10);
    assert_int_equal(allot_queue_job(w.q, b)->state, ALLOT_JOB_PENDING);
    assert_non_null(strstr(allot_queue_reason(w.q, b), "cluster quota exhausted"));
    assert_null(strstr(allot_queue_reason(w.q, b), "reclaimed"));
    world_free(&w);
}

/* A job selecting labels no ready node carries says so, naming nodes out
 * of service that carry them; once one is back the job runs there. */
static void test_reason_node_selector(void **state)
{
    struct allot_job_spec s = {.name = "sel",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    struct world w;
    char err[256];
    int id, zb;

    (void)state;
    world_init(&w, 2, 8, base); /* 2 nodes of 4 H100s, no labels */
    s.tenant = w.a;
    s.task.select[0] = allot_label_hash("zone", "b");
    id = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    assert_true(id >= 0);
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, id), "no node has the labels of its node selector");
    zb = world_add_zone_node(&w, "zb", "b");
    allot_cluster_set_state(w.c, zb, ALLOT_NODE_DRAINING);
    cycle(&w, 1);
    assert_string_equal(allot_queue_reason(w.q, id),
                        "no ready node has the labels of its node selector (1 node out of "
                        "service has them)");
    allot_cluster_set_state(w.c, zb, ALLOT_NODE_READY);
    cycle(&w, 2);
    assert_int_equal(allot_queue_job(w.q, id)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, id)->pl[0].node, zb);
    /* no room on its nodes: said of them, not of the cluster (the H100
     * nodes have 8 GPUs free) */
    s.name = "sel4";
    s.task.num_gpu = 4;
    id = allot_queue_submit(w.q, &s, 3, err, sizeof(err));
    cycle(&w, 3);
    assert_string_equal(allot_queue_reason(w.q, id),
                        "among the nodes with its labels: no node has 4 free GPUs in one NVLink "
                        "island (most free on one node: 3)");
    world_free(&w);
}

/* On the nodes a job may use, every GPU and every CPU taken (GPUs free
 * elsewhere): a GPU job waits for GPUs and says so, not that CPU is short
 * (only half of it); a CPU job there waits for CPU. */
static void test_reason_gpus_before_cpu(void **state)
{
    struct allot_job_spec s = {
        .name = "all",
        .prio_class = -1,
        .n_tasks = 1,
        .task = {.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = 64000}};
    struct world w;
    char err[256];
    int one, cpu;

    (void)state;
    world_init(&w, 1, 8, base); /* h0: 4 H100s, no labels */
    assert_int_equal(world_add_zone_node(&w, "zb", "b"), 1);
    s.tenant = w.a;
    s.task.select[0] = allot_label_hash("zone", "b");
    assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0);
    cycle(&w, 0);
    s.name = "one";
    s.task.num_gpu = 1;
    s.task.cpu_milli = 1000;
    one = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    cycle(&w, 1);
    assert_string_equal(allot_queue_reason(w.q, one),
                        "among the nodes with its labels: no node has 1 free GPU (most free on "
                        "one node: 0)");
    s.name = "cpu";
    s.task.num_gpu = 0;
    s.task.gpu_milli = 0;
    cpu = allot_queue_submit(w.q, &s, 2, err, sizeof(err));
    cycle(&w, 2);
    assert_string_equal(allot_queue_reason(w.q, cpu),
                        "among the nodes with its labels: no node has 1.0 CPU free");
    /* more GPUs than its nodes hold in all: never; a shape its nodes lack:
     * said of its nodes */
    s.name = "gang";
    s.n_tasks = 3;
    s.task.num_gpu = 2;
    s.task.gpu_milli = 1000;
    one = allot_queue_submit(w.q, &s, 3, err, sizeof(err));
    s.name = "a100";
    s.n_tasks = 1;
    s.task.num_gpu = 1;
    s.task.model_mask = 1ULL << allot_catalog_find_model(cat, "A100-80GB");
    cpu = allot_queue_submit(w.q, &s, 3, err, sizeof(err));
    cycle(&w, 3);
    assert_string_equal(allot_queue_reason(w.q, one),
                        "it can never start: the nodes with its labels have 4 GPUs in all; it "
                        "asks for 6");
    assert_string_equal(allot_queue_reason(w.q, cpu),
                        "among the nodes with its labels: no ready node has 1 A100-80GB GPU");
    world_free(&w);
}

/* Held back by quota too, a job whose labels no node carries says the
 * labels (no freed quota would start it), not the GPUs. */
static void test_reason_node_selector_over_quota(void **state)
{
    struct allot_quota qa = {.nominal = 1000, .borrow_limit = 0, .lend_limit = ALLOT_UNLIMITED};
    struct allot_job_spec s = {.name = "sel",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    struct world w;
    char err[256];
    int id;

    (void)state;
    world_init(&w, 2, 8, base);
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, qa), 0);
    allot_tenants_fill_nominal(w.t);
    submit(&w, "one", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    s.tenant = w.a;
    s.task.select[0] = allot_label_hash("zone", "zzz");
    id = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    assert_true(id >= 0);
    cycle(&w, 1);
    assert_string_equal(allot_queue_reason(w.q, id), "no node has the labels of its node selector");
    world_free(&w);
}

/* A whole GPU of a model whose GPUs are all in MIG mode, and a MIG slice
 * where no GPU is in MIG mode: the reason says the mode is what is
 * missing, not free room. */
static void test_reason_mig_mode(void **state)
{
    struct allot_job_spec s = {.name = "whole",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}};
    struct world w;
    char err[256];
    int whole, slice;

    (void)state;
    world_init(&w, 2, 8, base); /* 2 nodes of 4 H100s, not in MIG mode */
    world_add_mig_node(&w, "m0");
    s.tenant = w.a;
    s.task.model_mask = 1ULL << allot_catalog_find_model(cat, "A100-80GB");
    whole = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    s.name = "slice";
    s.task.gpu_milli = 0;
    s.task.mig_profile = allot_catalog_find_profile(cat, "1g.10gb");
    s.task.model_mask = 1ULL << allot_catalog_find_model(cat, "H100");
    slice = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    assert_true(whole >= 0 && slice >= 0);
    cycle(&w, 0);
    assert_string_equal(allot_queue_reason(w.q, whole),
                        "no ready node has 1 A100-80GB GPU outside MIG mode "
                        "(1 ready node has theirs in MIG mode)");
    assert_int_equal(allot_queue_job(w.q, slice)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, slice),
                        "no ready node has 1 H100-80GB GPU in MIG mode "
                        "(2 ready nodes have theirs outside MIG mode)");
    /* a profile no node's model has (an A100-40GB slice): said so, not "no free slot" */
    s.name = "small";
    s.task.model_mask = 0;
    s.task.mig_profile = allot_catalog_find_profile(cat, "1g.5gb");
    assert_true(s.task.mig_profile >= 0);
    slice = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    assert_true(slice >= 0);
    cycle(&w, 1);
    assert_string_equal(allot_queue_reason(w.q, slice),
                        "no node has a GPU model that offers MIG profile 1g.5gb");
    world_free(&w);
}

/* A MIG slice held back by the cluster's capacity (every CPU in use) on a
 * cluster with no GPU in MIG mode says the mode is missing: no freed CPU
 * would start it. A whole GPU held back the same way says the capacity,
 * named so (no quota is set on the root). */
static void test_reason_shape_before_quota(void **state)
{
    struct allot_job_spec s = {.name = "cpus",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.mig_profile = -1, .cpu_milli = 64000}};
    struct world w;
    char err[256];
    int slice, whole;

    (void)state;
    world_init(&w, 2, 8, base); /* 2 nodes of 4 H100s (64 CPUs each), not in MIG mode */
    for (int i = 0; i < 2; i++) {
        s.tenant = i ? w.b : w.a;
        assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0);
    }
    cycle(&w, 0);
    s.name = "slice";
    s.tenant = w.a;
    s.task.cpu_milli = 1000;
    s.task.num_gpu = 1;
    s.task.mig_profile = allot_catalog_find_profile(cat, "1g.10gb");
    slice = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    assert_true(slice >= 0);
    whole = submit(&w, "whole", w.a, 1, 1, 1, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, slice)->state, ALLOT_JOB_PENDING);
    assert_int_equal(allot_queue_job(w.q, slice)->why.kind, ALLOT_WHY_QUOTA);
    assert_string_equal(allot_queue_reason(w.q, slice),
                        "no ready node has 1 GPU in MIG mode (2 ready nodes have theirs outside "
                        "MIG mode)");
    assert_int_equal(allot_queue_job(w.q, whole)->state, ALLOT_JOB_PENDING);
    assert_non_null(strstr(allot_queue_reason(w.q, whole), "cluster capacity exhausted (128.0/"));
    world_free(&w);
}

/* A fraction of a model whose GPUs are all in exclusive mode (whole GPUs
 * only, the agent's default) or MIG mode: the reason names shared mode,
 * not free room; a whole GPU of that model runs. */
static void test_reason_shared_mode(void **state)
{
    struct allot_job_spec s = {.name = "frac",
                               .prio_class = -1,
                               .n_tasks = 1,
                               .task = {.num_gpu = 1, .gpu_milli = 500, .mig_profile = -1}};
    struct world w;
    char err[256];
    int frac, mem, whole;

    (void)state;
    world_init(&w, 1, 4, base); /* 1 node of 4 H100s, shared */
    world_add_moded_node(&w, "x0", ALLOT_GPU_EXCLUSIVE);
    world_add_mig_node(&w, "m0");
    s.tenant = w.a;
    s.task.model_mask = 1ULL << allot_catalog_find_model(cat, "A100-80GB");
    frac = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    s.name = "mem";
    s.task.gpu_milli = ALLOT_MILLI;
    s.task.gpu_mem_mib = 4096;
    mem = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    s.name = "whole";
    s.task.gpu_mem_mib = 0;
    whole = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    assert_true(frac >= 0 && mem >= 0 && whole >= 0);
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, frac)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, frac),
                        "no ready node has 1 A100-80GB GPU in shared mode "
                        "(2 ready nodes have theirs in exclusive or MIG mode)");
    assert_int_equal(allot_queue_job(w.q, mem)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, mem), allot_queue_reason(w.q, frac));
    assert_int_equal(allot_queue_job(w.q, whole)->state, ALLOT_JOB_RUNNING);
    world_free(&w);
}

/* Team a borrows up to its limit: the reason names nominal + limit; then
 * its cohort ml caps it lower, and the reason names the cohort's. */
static void test_reason_borrowing_limit(void **state)
{
    struct allot_quota two = {.nominal = 2000, .borrow_limit = 2000, .lend_limit = ALLOT_UNLIMITED};
    struct allot_quota ml = {.nominal = 4000, .borrow_limit = 1000, .lend_limit = ALLOT_UNLIMITED};
    struct allot_quota all = {16000, ALLOT_UNLIMITED, ALLOT_UNLIMITED}; /* the cluster's */
    struct world w;
    int ids[6];

    (void)state;
    world_init(&w, 4, 2, base); /* 16 GPUs; team-a and team-b 2 each */
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, two), 0);
    for (int i = 0; i < 5; i++)
        ids[i] = submit(&w, "a", w.a, 1, 1, 0, 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 4);
    assert_string_equal(allot_queue_reason(w.q, ids[4]),
                        "tenant ml/team-a: borrowing limit reached (4/4 GPU in use: nominal 2 + "
                        "borrow_limit 2)");
    /* the cohort: 4 + 1 for ml, whose teams now borrow without a limit */
    two.borrow_limit = ALLOT_UNLIMITED;
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, two), 0);
    assert_int_equal(allot_tenants_set_quota(w.t, allot_tenants_find(w.t, "ml"), ALLOT_RES_GPU, ml),
                     0);
    assert_int_equal(allot_tenants_set_quota(w.t, 0, ALLOT_RES_GPU, all), 0);
    ids[5] = submit(&w, "a", w.a, 1, 1, 1, 0);
    cycle(&w, 1);
    assert_int_equal(w.starts, 5);
    assert_string_equal(allot_queue_reason(w.q, ids[5]),
                        "cohort ml: borrowing limit reached (5/5 GPU in use: nominal 4 + "
                        "borrow_limit 1)");
    world_free(&w);
}

/* A gang more than its cohort may ever hold (nominal + borrow limit)
 * says it can never start, not what holds it back now; so does one more
 * than the cluster has, and one bound by a nominal with borrowing off. */
static void test_reason_never(void **state)
{
    struct allot_quota ml = {.nominal = 4000, .borrow_limit = 2000, .lend_limit = ALLOT_UNLIMITED};
    struct allot_quota all = {16000, ALLOT_UNLIMITED, ALLOT_UNLIMITED};
    struct allot_queue_opts o = base;
    struct world w;
    int big, fits, huge;

    (void)state;
    world_init(&w, 4, 2, base); /* 16 GPUs; team-a and team-b 2 each, borrowing freely */
    assert_int_equal(allot_tenants_set_quota(w.t, allot_tenants_find(w.t, "ml"), ALLOT_RES_GPU, ml),
                     0);
    assert_int_equal(allot_tenants_set_quota(w.t, 0, ALLOT_RES_GPU, all), 0);
    big = submit(&w, "big", w.a, 2, 4, 0, 0);   /* 8 GPUs: ml may hold 6 */
    fits = submit(&w, "fits", w.a, 1, 4, 0, 0); /* 4 GPUs: runs */
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, fits)->state, ALLOT_JOB_RUNNING);
    assert_int_equal(allot_queue_job(w.q, big)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, big),
                        "can never start: it asks for 8 GPU, more than cohort ml may ever hold "
                        "(6: nominal 4 + borrow_limit 2)");
    /* more than the cluster's quota, ml borrowing freely */
    ml.borrow_limit = ALLOT_UNLIMITED;
    assert_int_equal(allot_tenants_set_quota(w.t, allot_tenants_find(w.t, "ml"), ALLOT_RES_GPU, ml),
                     0);
    huge = submit(&w, "huge", w.b, 4, 5, 0, 0);
    cycle(&w, 1);
    assert_string_equal(allot_queue_reason(w.q, huge),
                        "can never start: it asks for 20 GPU, more than the cluster's 16 (quota)");
    world_free(&w);
    /* a team that may not borrow (borrow_limit 0) */
    world_init(&w, 4, 2, base);
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU,
                                             (struct allot_quota){2000, 0, ALLOT_UNLIMITED}),
                     0);
    big = submit(&w, "big", w.a, 1, 3, 0, 0);
    cycle(&w, 0);
    assert_string_equal(allot_queue_reason(w.q, big),
                        "can never start: it asks for 3 GPU, more than tenant ml/team-a may ever "
                        "hold (its nominal 2; borrowing not allowed)");
    world_free(&w);
    /* borrowing off: the team's own nominal bounds it */
    o.borrowing = false;
    world_init(&w, 4, 2, o);
    big = submit(&w, "big", w.a, 1, 3, 0, 0);
    cycle(&w, 0);
    assert_string_equal(allot_queue_reason(w.q, big),
                        "can never start: it asks for 3 GPU, more than tenant ml/team-a may ever "
                        "hold (its nominal 2; borrowing is off)");
    world_free(&w);
}

/* Room left under the borrowing limit, but less than the job asks: the
 * reason says what it asks. */
static void test_reason_borrowing_limit_ask(void **state)
{
    struct allot_quota two = {.nominal = 2000, .borrow_limit = 2000, .lend_limit = ALLOT_UNLIMITED};
    struct world w;
    int big;

    (void)state;
    world_init(&w, 4, 2, base);
    assert_int_equal(allot_tenants_set_quota(w.t, w.a, ALLOT_RES_GPU, two), 0);
    for (int i = 0; i < 3; i++)
        submit(&w, "a", w.a, 1, 1, 0, 0);
    big = submit(&w, "big", w.a, 1, 2, 0, 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 3);
    assert_string_equal(allot_queue_reason(w.q, big),
                        "tenant ml/team-a: borrowing limit reached (3/4 GPU in use, the job asks "
                        "for 2: nominal 2 + borrow_limit 2)");
    world_free(&w);
}

/* A fraction no GPU takes because exclusive-gpu tenant b holds each one
 * says that isolation is why, not only that no GPU has room; a gang of
 * fractions of which one task fits but not all at once says so. */
static void test_reason_isolation_and_gangs(void **state)
{
    struct allot_job_spec s = {
        .name = "f",
        .prio_class = -1,
        .n_tasks = 1,
        .task = {.num_gpu = 1, .gpu_milli = 700, .mig_profile = -1, .cpu_milli = 1000}};
    struct world w;
    char err[256];
    int frac, gang;

    (void)state;
    world_init(&w, 1, 4, base); /* 1 node of 4 H100s, shared */
    allot_tenants_get(w.t, w.b)->isolation = ALLOT_ISO_EXCLUSIVE_GPU;
    s.tenant = w.b;
    for (int i = 0; i < 4; i++) /* one on each GPU: 700 + 700 do not fit one */
        assert_true(allot_queue_submit(w.q, &s, 0, err, sizeof(err)) >= 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 4);
    s.tenant = w.a;
    s.task.gpu_milli = 300;
    frac = allot_queue_submit(w.q, &s, 1, err, sizeof(err));
    assert_true(frac >= 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, frac)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, frac),
                        "tenant isolation keeps it off 1 ready node with room; elsewhere no GPU "
                        "has 300 milli-GPU and 30.0 % of its memory free");
    world_free(&w);

    world_init(&w, 1, 4, base);
    s.tenant = w.a;
    s.task.gpu_milli = 500;
    s.n_tasks = 9; /* 8 fit: two on each GPU */
    gang = allot_queue_submit(w.q, &s, 0, err, sizeof(err));
    assert_true(gang >= 0);
    cycle(&w, 0);
    assert_int_equal(allot_queue_job(w.q, gang)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, gang),
                        "no room for 9 tasks of 500 milli-GPU and 50.0 % of one GPU's memory "
                        "each at once");
    world_free(&w);

    /* exclusive-node b while a runs on both nodes: every node is kept from
     * it, and nothing is said of CPU "elsewhere" (there is no elsewhere) */
    world_init(&w, 2, 8, base); /* nominals of 8: a's work is not reclaimed */
    allot_tenants_get(w.t, w.b)->isolation = ALLOT_ISO_EXCLUSIVE_NODE;
    submit(&w, "a0", w.a, 1, 3, 0, 0); /* one on each node */
    submit(&w, "a1", w.a, 1, 3, 0, 0);
    cycle(&w, 0);
    assert_int_equal(w.starts, 2);
    int bx = submit(&w, "bx", w.b, 1, 1, 1, 0);
    cycle(&w, 1);
    assert_int_equal(allot_queue_job(w.q, bx)->state, ALLOT_JOB_PENDING);
    assert_string_equal(allot_queue_reason(w.q, bx),
                        "tenant isolation keeps it off every ready node (2 with room for it)");
    world_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reason_reclaim_to_come),
        cmocka_unit_test(test_reason_no_ready_node),
        cmocka_unit_test(test_reason_mig_mode),
        cmocka_unit_test(test_reason_node_selector),
        cmocka_unit_test(test_reason_node_selector_over_quota),
        cmocka_unit_test(test_reason_gpus_before_cpu),
        cmocka_unit_test(test_reason_shape_before_quota),
        cmocka_unit_test(test_reason_shared_mode),
        cmocka_unit_test(test_reason_borrowing_limit),
        cmocka_unit_test(test_reason_never),
        cmocka_unit_test(test_reason_borrowing_limit_ask),
        cmocka_unit_test(test_reason_isolation_and_gangs),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
