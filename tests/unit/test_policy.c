/*
 * Unit tests of the placement policies (src/core/policy_*.c): each score
 * worked by hand on hand-built node states, following the definitions in
 * docs/benchmarks.md, plus each policy's choice between two nodes, the
 * seeded rank tie-break, and allot's own terms (CPU that strands GPUs, the
 * sum-of-squares snapshot).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/sched.h"

#include <malloc.h>
#include <math.h>
#include <string.h>

#define OFFSET 1000000 /* the offset bestfit and dotprod add (policy_basic.c) */

#include "catalog_fixture.h"

/* A cluster of `n` nodes with `gpus` T4s, 64 cores, 256 GiB each. */
static struct allot_cluster *mk(int n, int gpus)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    char err[128], name[16];

    assert_non_null(c);
    for (int i = 0; i < n; i++) {
        struct allot_node_spec sp = {
            .name = name, .model = "T4", .cpu_milli = 64000, .mem_mib = 262144, .n_gpus = gpus};
        allot_fmt(name, sizeof(name), "n%d", i);
        assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), i);
    }
    return c;
}

static struct allot_task frac(int milli, int64_t cpu)
{
    struct allot_task t = {.num_gpu = 1, .gpu_milli = milli, .mig_profile = -1, .cpu_milli = cpu};
    return t;
}

static struct allot_task whole(int k, int64_t cpu)
{
    struct allot_task t = {.num_gpu = k, .gpu_milli = 1000, .mig_profile = -1, .cpu_milli = cpu};
    return t;
}

/* Places t on a given node (with the default GPU choice). */
static void put(struct allot_sched *s, int node, struct allot_task t)
{
    struct allot_placement p;

    assert_int_equal(allot_sched_choose_default(s, node, &t, &p), 0);
    assert_int_equal(allot_cluster_apply(allot_sched_cluster(s), &p), 0);
}

static int score_of(const char *policy, struct allot_sched *s, int node, struct allot_task t)
{
    const struct allot_sched_policy_ops *ops = allot_sched_policy_find(policy);

    assert_non_null(ops);
    return ops->score(allot_sched_policy_state(s), s,
                      allot_cluster_node(allot_sched_cluster(s), node), &t);
}

static void test_bestfit_score(void **state)
{
    struct allot_cluster *c = mk(1, 4);
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find("bestfit"), NULL);

    /* leave free C = 64000 - 8000 = 56000, G = 4000 - 2000 = 2000 */
    put(s, 0, whole(2, 8000));
    /* task c = 8000, g = 500: X = (56000-8000) + 16 (2000-500) = 72000;
     * raw = floor(100 (1 - 0.5*48000/128000 - 0.5*1500/8000))
     *     = floor(100 - 18.75 - 9.375) = floor(71.875) = 71 */
    assert_int_equal(score_of("bestfit", s, 0, frac(500, 8000)), OFFSET + 71);
    /* c = 48000, g = 1000: X = 8000 + 16 * 1000 = 24000, 100 - 9.375 -> 90 */
    assert_int_equal(score_of("bestfit", s, 0, whole(1, 48000)), OFFSET + 90);
    allot_sched_free(s);
    allot_cluster_free(c);
}

static void test_dotprod_score(void **state)
{
    struct allot_cluster *c = mk(1, 4);
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find("dotprod"), NULL);

    /* free C = 64000, G = 4000; task c = 16000, g = 1000:
     * dot = (64000/128000)(16000/128000) + (4000/8000)(1000/8000) = 0.0625 + 0.0625
     * score = floor(100 (1 - 0.125/2)) = floor(93.75) = 93 */
    assert_int_equal(score_of("dotprod", s, 0, whole(1, 16000)), OFFSET + 93);
    allot_sched_free(s);
    allot_cluster_free(c);
}

static void test_gpuclustering_score(void **state)
{
    struct allot_cluster *c = mk(3, 8);
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find("gpuclustering"), NULL);

    /* node 0 empty: f = 0, no GPU tasks: 25 */
    assert_int_equal(score_of("gpuclustering", s, 0, frac(300, 1000)), 25);
    /* node 1 hosts one fraction of 500: f = 500/8000; same class only: floor(1.5625 + 75) */
    put(s, 1, frac(500, 1000));
    assert_int_equal(score_of("gpuclustering", s, 1, frac(300, 1000)), 76);
    /* a 1-GPU task on node 1: only other classes -> 0 + floor(25*0.0625) = 1 */
    assert_int_equal(score_of("gpuclustering", s, 1, whole(1, 1000)), 1);
    /* node 2 hosts a fraction and a whole GPU: f = 1500/8000, both classes -> 50 */
    put(s, 2, frac(500, 1000));
    put(s, 2, whole(1, 1000));
    assert_int_equal(score_of("gpuclustering", s, 2, frac(100, 1000)), 54);
    /* CPU-only tasks score 0 */
    assert_int_equal(score_of("gpuclustering", s, 2, whole(0, 1000)), 0);
    allot_sched_free(s);
    allot_cluster_free(c);
}

/* Nodes of more GPUs than openb's 8 (up to ALLOT_MAX_GPUS): every policy
 * places each task while a node has room for it, and scores no feasible
 * node below 0 (gpuclustering's used share was over 8000 milli, so a node
 * with more than 8 GPUs free scored below 0 and was refused). */
static void test_big_nodes(void **state)
{
    const char *names[] = {"firstfit",      "bestfit",    "spread", "random", "dotprod",
                           "gpuclustering", "gpupacking", "fgd",    "allot"};
    const struct allot_task seq[] = {
        whole(1, 1000),
        frac(470, 1000),
        whole(2, 1000),
        frac(300, 1000),
        {.num_gpu = 0, .gpu_milli = 0, .mig_profile = -1, .cpu_milli = 1000},
        frac(700, 1000)};
    char err[256];

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct allot_cluster *c = mk(1, ALLOT_MAX_GPUS);
        struct allot_frag_mix mix;
        struct allot_sched_opts o = {.seed = 3, .mix = &mix};
        const struct allot_sched_policy_ops *ops = allot_sched_policy_find(names[i]);
        struct allot_sched *s;

        assert_int_equal(allot_frag_mix_build(seq, 6, 0.95, &mix), 0);
        s = allot_sched_new(c, ops, &o);
        assert_non_null(s);
        for (int k = 0; k < 12; k++) { /* 9.41 GPUs of the node's 16 */
            struct allot_task t = seq[k % 6];
            struct allot_placement p;

            if (ops->score && allot_node_fits(c, allot_cluster_node(c, 0), &t) &&
                score_of(names[i], s, 0, t) < 0)
                fail_msg("%s scores a feasible node of %d GPUs below 0 (task %d)", names[i],
                         ALLOT_MAX_GPUS, k);
            if (allot_sched_place(s, &t, &p, NULL, 0) != 0)
                fail_msg("%s refused task %d on a node of %d GPUs with room", names[i], k,
                         ALLOT_MAX_GPUS);
            if (allot_sched_check_invariants(s, err, sizeof(err)) != 0)
                fail_msg("%s: %s", names[i], err);
        }
        allot_sched_free(s);
        allot_frag_mix_clear(&mix);
        allot_cluster_free(c);
    }
}

static void test_gpupacking_score(void **state)
{
    struct allot_cluster *c = mk(2, 8);
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find("gpupacking"), NULL);

    /* empty 8-GPU node: 33 - 8 */
    assert_int_equal(score_of("gpupacking", s, 0, frac(200, 1000)), 25);
    put(s, 1, frac(700, 1000)); /* one GPU with 300 free */
    /* served from the partly used GPU: 100 - 30 %/10 = 97 */
    assert_int_equal(score_of("gpupacking", s, 1, frac(200, 1000)), 97);
    /* needs fully free GPUs on a used node: 50 - 2 */
    assert_int_equal(score_of("gpupacking", s, 1, whole(2, 1000)), 48);
    /* a fraction too big for the partly used GPU takes a free one: 50 - 1 */
    assert_int_equal(score_of("gpupacking", s, 1, frac(400, 1000)), 49);
    allot_sched_free(s);
    allot_cluster_free(c);
}

static void test_fgd_score_and_choice(void **state)
{
    struct allot_cluster *c = mk(1, 2);
    /* one typical task: a 500-milli fraction */
    struct allot_task typical = frac(500, 0);
    struct allot_frag_mix mix;
    struct allot_sched_opts o = {.seed = 1, .mix = &mix};
    struct allot_sched *s;
    struct allot_placement p;

    assert_int_equal(allot_frag_mix_build(&typical, 1, 0.95, &mix), 0);
    s = allot_sched_new(c, allot_sched_policy_find("fgd"), &o);
    assert_non_null(s);
    put(s, 0, frac(400, 0)); /* GPUs free: 600, 1000 */
    /* F before: typical fits, no GPU below 500 -> 0.
     * 500 on GPU0 (600 -> 100): F = 100, dF = -100 -> floor(100 sigmoid(-0.1)) = 47
     * 500 on GPU1 (1000 -> 500): F = 0, dF = 0 -> 50. Best: 50 on GPU1. */
    assert_int_equal(score_of("fgd", s, 0, frac(500, 0)), 50);
    assert_int_equal(
        allot_sched_pick(s, &(struct allot_task){.num_gpu = 1, .gpu_milli = 500, .mig_profile = -1},
                         &p),
        0);
    assert_int_equal(p.gpu_mask, 2u);
    /* 600 on GPU0 (600 -> 0): F = 0, dF = 0 -> 50; on GPU1 (1000 -> 400): F = 400,
     * dF = -400 -> floor(100 sigmoid(-0.4)) = 40. Picks GPU0. */
    assert_int_equal(
        allot_sched_pick(s, &(struct allot_task){.num_gpu = 1, .gpu_milli = 600, .mig_profile = -1},
                         &p),
        0);
    assert_int_equal(p.gpu_mask, 1u);
    /* a task asking for nothing scores 100; a CPU-only task is scored by dF:
     * 1000 milli-CPU strands nothing here (dF = 0): 50 */
    assert_int_equal(score_of("fgd", s, 0, whole(0, 0)), 100);
    assert_int_equal(score_of("fgd", s, 0, whole(0, 1000)), 50);
    allot_sched_free(s);
    allot_frag_mix_clear(&mix);
    allot_cluster_free(c);
}

/* Which node each policy picks between a partly used and an empty node. */
static void test_policy_choices(void **state)
{
    static const struct {
        const char *policy;
        int node;
    } want[] = {{"firstfit", 0},
                {"bestfit", 1},
                {"spread", 0},
                {"gpupacking", 1},
                /* dotprod: both nodes floor to 98 (98.67 and 98.80), the tie
                 * goes to the lower rank: integer scores matter */
                {"dotprod", 0},
                /* fgd/allot: 300 on a free GPU of either node leaves F = 0
                 * (dF = 0, score 50); on node 1's half-used GPU it would strand
                 * 200. Tie: lower rank */
                {"fgd", 0},
                {"gpuclustering", 1},
                {"allot", 0}};

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct allot_cluster *c = mk(2, 4);
        struct allot_task t = frac(300, 2000);
        struct allot_frag_mix mix;
        struct allot_sched_opts o = {.seed = 7, .mix = &mix};
        struct allot_sched *s;
        struct allot_placement p;

        assert_int_equal(allot_frag_mix_build(&t, 1, 0.95, &mix), 0);
        s = allot_sched_new(c, allot_sched_policy_find(want[i].policy), &o);
        assert_non_null(s);
        put(s, 1, frac(500, 2000));
        assert_int_equal(allot_sched_place(s, &t, &p, NULL, 0), 0);
        if (p.node != want[i].node)
            fail_msg("%s picked node %d, expected %d", want[i].policy, p.node, want[i].node);
        allot_sched_free(s);
        allot_frag_mix_clear(&mix);
        allot_cluster_free(c);
    }
}

static void test_rank_tiebreak(void **state)
{
    struct allot_cluster *c = mk(16, 2);
    struct allot_sched *s;
    struct allot_placement p;
    uint32_t low = UINT32_MAX;
    int want = -1;

    allot_cluster_shuffle_ranks(c, 12345);
    for (int i = 0; i < 16; i++)
        if (allot_cluster_node(c, i)->rank < low) {
            low = allot_cluster_node(c, i)->rank;
            want = i;
        }
    s = allot_sched_new(c, allot_sched_policy_find("bestfit"), NULL);
    /* all nodes identical: the lowest rank wins */
    assert_int_equal(
        allot_sched_pick(
            s, &(struct allot_task){.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}, &p),
        0);
    assert_int_equal(p.node, want);
    allot_sched_free(s);
    allot_cluster_free(c);
}

static void test_random_policy(void **state)
{
    struct allot_cluster *c = mk(8, 1);
    struct allot_sched_opts o = {.seed = 99};
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find("random"), &o);
    int hits[8] = {0};
    struct allot_placement p;

    /* only feasible nodes, and more than one of them over repeated picks */
    put(s, 3, whole(1, 0));
    for (int i = 0; i < 200; i++) {
        assert_int_equal(
            allot_sched_pick(
                s, &(struct allot_task){.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1}, &p),
            0);
        hits[p.node]++;
    }
    assert_int_equal(hits[3], 0);
    for (int i = 0; i < 8; i++)
        if (i != 3)
            assert_true(hits[i] > 0);
    allot_sched_free(s);
    allot_cluster_free(c);
}

/* Nodes with 8 T4s each and the given CPUs (milli). */
static struct allot_cluster *mk_cpu(int n, const int64_t *cpu)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    char err[128], name[16];

    assert_non_null(c);
    for (int i = 0; i < n; i++) {
        struct allot_node_spec sp = {
            .name = name, .model = "T4", .cpu_milli = cpu[i], .mem_mib = 262144, .n_gpus = 8};
        allot_fmt(name, sizeof(name), "n%d", i);
        assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), i);
    }
    return c;
}

/* Feeds `n` arrivals of t to the policy's learning without placing them. */
static void observe(struct allot_sched *s, const char *policy, struct allot_task t, int n)
{
    const struct allot_sched_policy_ops *ops = allot_sched_policy_find(policy);

    for (int i = 0; i < n; i++)
        ops->observe(allot_sched_policy_state(s), s, &t);
}

/*
 * allot charges for the GPUs a placement strands by using up CPU. It has
 * learned whole-GPU tasks with 12 cores each (rho = 12 milli-CPU per milli-GPU).
 * A 20-core CPU-only task on node 0 (8 GPUs, 96 cores) leaves 76 cores, CPU
 * for 6.33 of its 8 GPUs: the fill waste goes from 0 to 1667 milli, weighted
 * 0.5: d = -833, score floor(1000 sigmoid(-833 / 8000)) * 4 = 473 * 4. On node 1 (400 cores)
 * nothing is stranded: 500 * 4. fgd, with the same mix, sees no typical task
 * stop fitting on either node (dF = 0, 50 each) and takes the lower rank.
 */
static void test_allot_keeps_cpu_for_gpus(void **state)
{
    static const int64_t cpu[] = {96000, 400000};
    struct allot_task typical = whole(1, 12000), cpu_only = whole(0, 20000);
    struct allot_frag_mix mix;
    struct allot_sched_opts o = {.seed = 3, .mix = &mix};
    struct allot_placement p;
    struct allot_cluster *c = mk_cpu(2, cpu);
    struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find("allot"), NULL);

    assert_non_null(s);
    observe(s, "allot", typical, 600);
    assert_int_equal(score_of("allot", s, 0, cpu_only), 473 * 4);
    assert_int_equal(score_of("allot", s, 1, cpu_only), 500 * 4);
    assert_int_equal(allot_sched_pick(s, &cpu_only, &p), 0);
    assert_int_equal(p.node, 1);
    allot_sched_free(s);

    assert_int_equal(allot_frag_mix_build(&typical, 1, 0.95, &mix), 0);
    s = allot_sched_new(c, allot_sched_policy_find("fgd"), &o);
    assert_non_null(s);
    assert_int_equal(score_of("fgd", s, 0, cpu_only), 50);
    assert_int_equal(score_of("fgd", s, 1, cpu_only), 50);
    assert_int_equal(allot_sched_pick(s, &cpu_only, &p), 0);
    assert_int_equal(p.node,
                     allot_cluster_node(c, 0)->rank < allot_cluster_node(c, 1)->rank ? 0 : 1);
    allot_sched_free(s);
    allot_frag_mix_clear(&mix);
    allot_cluster_free(c);
}

/*
 * allot's sum-of-squares term. 64 one-GPU nodes: 40 hold an 810 (190 free),
 * 10 hold a 340 (660 free), 14 are empty. The arrivals seen so far are
 * 12 810s, 1 160 (so that 190 gaps count: enough fractions fit in them)
 * and 3 340s; at the 16th arrival (the snapshot interval, max(16, GPUs /
 * 24)) allot takes its first snapshot of the gaps: N(190) = 40,
 * N(660) = 10. A 470 on a 660 GPU would
 * make one more 190 gap (dSS = -2*10+1 + 2*40+1 = 62, d drops by
 * 600000 * 62 / 64 GPUs milli); on an empty GPU it makes a 530 gap
 * (dSS = 1). So allot opens an
 * empty GPU, where fgd (and allot before the snapshot) fills the 660 GPU.
 */
static void test_allot_sum_of_squares(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_task big = frac(810, 0), mid = frac(340, 0), small = frac(160, 0);
    struct allot_task t = frac(470, 0);
    struct allot_task sample[1024];
    struct allot_frag_mix mix;
    struct allot_sched_opts o = {.seed = 5, .mix = &mix};
    struct allot_placement p;
    struct allot_sched *s;
    char err[128], name[16];

    assert_non_null(c);
    for (int i = 0; i < 64; i++) {
        struct allot_node_spec sp = {
            .name = name, .model = "T4", .cpu_milli = 64000, .mem_mib = 262144, .n_gpus = 1};
        allot_fmt(name, sizeof(name), "n%d", i);
        assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), i);
    }
    s = allot_sched_new(c, allot_sched_policy_find("allot"), NULL);
    assert_non_null(s);
    for (int i = 0; i < 50; i++)
        put(s, i, i < 40 ? big : mid);
    observe(s, "allot", big, 12);
    observe(s, "allot", small, 1);
    observe(s, "allot", mid, 2);
    assert_int_equal(allot_sched_pick(s, &t, &p), 0);
    assert_int_equal(allot_cluster_node(c, p.node)->gpus[0].free_milli, 660);
    observe(s, "allot", mid, 1);
    assert_int_equal(allot_sched_pick(s, &t, &p), 0);
    assert_int_equal(allot_cluster_node(c, p.node)->gpus[0].free_milli, 1000);
    allot_sched_free(s);

    for (int i = 0; i < 1024; i++)
        sample[i] = i < 800 ? big : i < 900 ? small : mid;
    assert_int_equal(allot_frag_mix_build(sample, 1024, 0.95, &mix), 0);
    s = allot_sched_new(c, allot_sched_policy_find("fgd"), &o);
    assert_non_null(s);
    assert_int_equal(allot_sched_pick(s, &t, &p), 0);
    assert_int_equal(allot_cluster_node(c, p.node)->gpus[0].free_milli, 660);
    allot_sched_free(s);
    allot_frag_mix_clear(&mix);
    allot_cluster_free(c);
}

/*
 * allot charges a GPU placement for the open gaps whose CPU it takes. Two
 * 5-GPU nodes, each with four 190-milli gaps (an 810 on each of GPUs 0-3)
 * and one free GPU; fractions of the mix (810s and 160s) ask for one core.
 * Node 0 has 5 cores free, node 1 has 40. A whole GPU with 2 cores leaves
 * node 0 CPU for 3 of its 4 gaps: one 190 gap is starved (d drops by 190
 * milli). fgd's F and the fill waste see no difference (every typical task
 * still finds its core on both), so without the charge the tie goes to
 * node 0; with it the task goes to node 1.
 */
static void test_allot_starved_gaps(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_task t = whole(1, 2000);
    struct allot_placement p;
    struct allot_sched *s;
    char err[128];

    assert_non_null(c);
    for (int i = 0; i < 2; i++) {
        struct allot_node_spec sp = {.name = i ? "b" : "a",
                                     .model = "T4",
                                     .cpu_milli = i ? 40000 : 5000,
                                     .mem_mib = 262144,
                                     .n_gpus = 5};
        assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), i);
    }
    s = allot_sched_new(c, allot_sched_policy_find("allot"), NULL);
    assert_non_null(s);
    for (int i = 0; i < 8; i++)
        put(s, i / 4, frac(810, 0));
    assert_int_equal(allot_cluster_node(c, 0)->gpus[3].free_milli, 190);
    observe(s, "allot", frac(810, 1000), 12);
    observe(s, "allot", frac(160, 1000), 4);
    assert_true(score_of("allot", s, 1, t) > score_of("allot", s, 0, t));
    assert_int_equal(allot_sched_pick(s, &t, &p), 0);
    assert_int_equal(p.node, 1);
    allot_sched_free(s);
    allot_cluster_free(c);
}

/* allot keeps NVLink islands whole: single GPUs from a partly used island,
 * multi-GPU tasks inside one island. */
static void test_allot_topology(void **state)
{
    struct allot_cluster *c = allot_cluster_new(cat, 0);
    struct allot_node_spec sp = {.name = "n",
                                 .model = "H100",
                                 .cpu_milli = 64000,
                                 .mem_mib = 262144,
                                 .n_gpus = 8,
                                 .island_size = 4};
    char err[128];
    struct allot_sched *s;
    struct allot_placement p;
    const struct allot_node *n;

    assert_int_equal(allot_cluster_add_node(c, &sp, err, sizeof(err)), 0);
    s = allot_sched_new(c, allot_sched_policy_find("allot"), NULL);
    assert_non_null(s);
    n = allot_cluster_node(c, 0);
    put(s, 0, whole(1, 0)); /* lands on GPU 0, island 0 */
    assert_int_equal(
        allot_sched_place(s,
                          &(struct allot_task){.num_gpu = 1, .gpu_milli = 1000, .mig_profile = -1},
                          &p, NULL, 0),
        0);
    assert_int_equal(n->gpus[__builtin_ctz(p.gpu_mask)].island, 0);
    assert_int_equal(
        allot_sched_place(s,
                          &(struct allot_task){.num_gpu = 4, .gpu_milli = 1000, .mig_profile = -1},
                          &p, NULL, 0),
        0);
    assert_int_equal(p.gpu_mask, 0xf0u); /* all of island 1 */
    allot_sched_free(s);
    allot_cluster_free(c);
}

/*
 * Learning is bounded: 10 million arrivals (a steady mix of 20 shapes and
 * 3 % ever new shapes) through allot_sched_observe of both learning
 * policies; the heap in use after 10 million arrivals is within 1 MiB of
 * what it was after 200,000 (it grew with every arrival before), and
 * placement attempts teach nothing.
 */
static void test_learning_bounded(void **state)
{
    const char *const policies[] = {"allot", "fgd"};

    (void)state;
    for (int pi = 0; pi < 2; pi++) {
        struct allot_cluster *c = mk(8, 8);
        struct allot_sched *s = allot_sched_new(c, allot_sched_policy_find(policies[pi]), NULL);
        struct allot_task t = frac(450, 7777); /* a shape never observed */
        struct allot_placement p;
        size_t base = 0;
        assert_non_null(s);
        for (long i = 0; i < 10000000; i++) {
            struct allot_task a = frac(50 * (1 + (int)(i % 19)), 2000 * (1 + i % 4));
            if (i % 33 == 0)
                a = frac(1 + (int)(i % 997), 1000 + i % 100003);
            allot_sched_observe(s, &a);
            if (i == 200000)
                base = mallinfo2().uordblks;
        }
        assert_true(mallinfo2().uordblks <= base + (1u << 20));
        /* a pick or a placement is not an arrival */
        {
            const struct allot_frag_mix *before = allot_sched_mix(s);
            int n = before->n;
            for (int i = 0; i < 5000; i++) {
                if (allot_sched_place(s, &t, &p, NULL, 0) == 0)
                    assert_int_equal(allot_sched_release(s, &p), 0);
            }
            assert_int_equal(allot_sched_mix(s)->n, n);
            for (int j = 0; j < n; j++)
                assert_true(allot_sched_mix(s)->v[j].milli != 450 ||
                            allot_sched_mix(s)->v[j].cpu_milli != 7777);
        }
        allot_sched_free(s);
        allot_cluster_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bestfit_score),
        cmocka_unit_test(test_dotprod_score),
        cmocka_unit_test(test_gpuclustering_score),
        cmocka_unit_test(test_gpupacking_score),
        cmocka_unit_test(test_big_nodes),
        cmocka_unit_test(test_fgd_score_and_choice),
        cmocka_unit_test(test_policy_choices),
        cmocka_unit_test(test_rank_tiebreak),
        cmocka_unit_test(test_allot_topology),
        cmocka_unit_test(test_random_policy),
        cmocka_unit_test(test_allot_keeps_cpu_for_gpus),
        cmocka_unit_test(test_allot_sum_of_squares),
        cmocka_unit_test(test_allot_starved_gaps),
        cmocka_unit_test(test_learning_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
