/*
 * Unit tests for src/sim/fill_perturb.c, the perturbed workloads of
 * allot-sim fill --perturb: the spec parser, each step by hand on a small
 * trace (flip, scale with its clamps, a seeded node subset), what is
 * recomputed afterwards, and a fill run on a perturbed trace.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "allot/common.h"
#include "fill.h"
#include "fill_perturb.h"

static void trace_from_text(struct sim_fill_trace *t, const char *nodes, const char *pods)
{
    struct openb_nodes nl = {0};
    struct openb_pods pl = {0};
    char err[256] = "";

    assert_int_equal(openb_parse_nodes(nodes, strlen(nodes), "nodes.csv", &nl, err, sizeof(err)),
                     0);
    assert_int_equal(openb_parse_pods(pods, strlen(pods), "pods.csv", &pl, err, sizeof(err)), 0);
    if (sim_fill_trace_from_lists(t, &nl, &pl, "nodes.csv", "dir/w.csv", err, sizeof(err)))
        fail_msg("%s", err);
}

/* Five GPU nodes and a CPU-only one; pods: CPU-only, whole, 2-GPU and
 * fractions 250, 300, 500, 900. */
static const char nodes[] = "sn,cpu_milli,memory_mib,gpu,model\n"
                            "a,32000,131072,4,V100M32\n"
                            "b,32000,131072,4,V100M32\n"
                            "c,16000,65536,2,T4\n"
                            "d,24000,98304,2,T4\n"
                            "e,64000,262144,8,V100M32\n"
                            "f,8000,32768,0,\n";
static const char pods[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                           "p0,1000,1024,0,0\n"
                           "p1,1000,1024,1,1000\n"
                           "p2,1000,1024,2,1000\n"
                           "p3,1000,1024,1,250\n"
                           "p4,1000,1024,1,300\n"
                           "p5,1000,1024,1,500\n"
                           "p6,1000,1024,1,900\n";

static void perturb(struct sim_fill_trace *t, const char *spec)
{
    struct sim_fill_perturb p;
    char err[256] = "";

    if (sim_fill_perturb_parse(spec, &p, err, sizeof(err)) ||
        sim_fill_perturb_apply(t, &p, err, sizeof(err)))
        fail_msg("%s: %s", spec, err);
}

static void test_parse(void **state)
{
    static const struct {
        const char *spec, *msg; /* msg NULL: valid */
    } cases[] = {
        {"flip", NULL},
        {"scale=0.8", NULL},
        {"subset=0.33", NULL},
        {"subset=0.33,seed=7", NULL},
        {"seed=7,flip,subset=1", NULL},
        {"", "want flip"},
        {"flip=1", "\"flip=1\": want flip, scale=F"},
        {"scale", "\"scale\": want"},
        {"scale=0", "scale=0: want a factor in (0, 10]"},
        {"scale=-1", "scale=-1: want a factor"},
        {"scale=11", "scale=11: want a factor"},
        {"scale= 1", "scale= 1: want a factor"},
        {"subset=0", "subset=0: want a share of the nodes in (0, 1]"},
        {"subset=1.5", "subset=1.5: want a share"},
        {"seed=3", "seed=N only goes with subset=P"},
        {"subset=0.5,seed=x", "seed=x: want an integer 0..9223372036854775807"},
        {"flip,flip", "\"flip\" given twice"},
        {"scale=1,scale=2", "\"scale\" given twice"},
        {"flip,", "\"\": want flip"},
        {"mirror", "\"mirror\": want flip"},
    };
    struct sim_fill_perturb p;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        int rc = sim_fill_perturb_parse(cases[i].spec, &p, err, sizeof(err));

        if (!cases[i].msg && rc != 0)
            fail_msg("\"%s\": %s", cases[i].spec, err);
        if (cases[i].msg && (rc != ALLOT_EINVAL || !strstr(err, cases[i].msg)))
            fail_msg("\"%s\": rc %d, \"%s\", want \"%s\"", cases[i].spec, rc, err, cases[i].msg);
    }
    assert_int_equal(sim_fill_perturb_parse("subset=0.25,seed=9", &p, NULL, 0), 0);
    assert_true(p.subset == 0.25 && p.seed == 9 && !p.flip && p.scale == 0);
    assert_int_equal(sim_fill_perturb_parse("subset=0.25", &p, NULL, 0), 0);
    assert_true(p.seed == 1);
}

/* flip: fractions s -> 1000 - s; whole, multi-GPU and CPU-only pods kept. */
static void test_flip(void **state)
{
    struct sim_fill_trace t;

    (void)state;
    trace_from_text(&t, nodes, pods);
    assert_int_equal(t.request_milli, 1000 + 2000 + 250 + 300 + 500 + 900);
    perturb(&t, "flip");
    assert_int_equal(t.tasks[0].gpu_milli, 0);
    assert_int_equal(t.tasks[1].gpu_milli, 1000);
    assert_int_equal(t.tasks[2].gpu_milli, 1000);
    assert_int_equal(t.tasks[3].gpu_milli, 750);
    assert_int_equal(t.tasks[4].gpu_milli, 700);
    assert_int_equal(t.tasks[5].gpu_milli, 500);
    assert_int_equal(t.tasks[6].gpu_milli, 100);
    assert_int_equal(t.request_milli, 1000 + 2000 + 750 + 700 + 500 + 100);
    assert_string_equal(t.workload, "w+flip");
    assert_int_equal(t.n_nodes, 5);
    assert_int_equal(t.gpus, 20);
    assert_true(t.mix.n > 0);
    sim_fill_trace_free(&t);
}

/* scale=F: round(s x F), at least 1, at most a whole GPU; applied after
 * flip when both are given. */
static void test_scale(void **state)
{
    struct sim_fill_trace t;

    (void)state;
    trace_from_text(&t, nodes, pods);
    perturb(&t, "scale=0.5");
    assert_int_equal(t.tasks[3].gpu_milli, 125);
    assert_int_equal(t.tasks[4].gpu_milli, 150);
    assert_int_equal(t.tasks[6].gpu_milli, 450);
    assert_int_equal(t.tasks[1].gpu_milli, 1000);
    sim_fill_trace_free(&t);
    trace_from_text(&t, nodes, pods);
    perturb(&t, "scale=2");
    assert_int_equal(t.tasks[3].gpu_milli, 500);
    assert_int_equal(t.tasks[5].gpu_milli, 1000); /* a whole GPU now */
    assert_int_equal(t.tasks[6].gpu_milli, 1000);
    sim_fill_trace_free(&t);
    trace_from_text(&t, nodes, pods);
    perturb(&t, "scale=0.001");
    assert_int_equal(t.tasks[3].gpu_milli, 1); /* never 0 */
    sim_fill_trace_free(&t);
    trace_from_text(&t, nodes, pods);
    perturb(&t, "scale=0.5,flip");
    assert_int_equal(t.tasks[3].gpu_milli, 375); /* (1000 - 250) x 0.5 */
    assert_string_equal(t.workload, "w+scale=0.5,flip");
    sim_fill_trace_free(&t);
}

/* subset=P keeps round(P x GPU nodes) nodes in file order, the same ones
 * for the same seed; the GPU count follows. */
static void test_subset(void **state)
{
    struct sim_fill_trace t, u;
    int differs = 0;

    (void)state;
    trace_from_text(&t, nodes, pods);
    perturb(&t, "subset=0.4");
    assert_int_equal(t.n_nodes, 2);
    assert_int_equal(t.gpus, t.nodes[0].n_gpus + t.nodes[1].n_gpus);
    assert_true(strcmp(t.nodes[0].name, t.nodes[1].name) < 0); /* file order */
    trace_from_text(&u, nodes, pods);
    perturb(&u, "subset=0.4,seed=1");
    assert_string_equal(t.nodes[0].name, u.nodes[0].name);
    assert_string_equal(t.nodes[1].name, u.nodes[1].name);
    sim_fill_trace_free(&u);
    for (int s = 2; s < 12; s++) {
        char spec[64];

        trace_from_text(&u, nodes, pods);
        snprintf(spec, sizeof(spec), "subset=0.4,seed=%d", s);
        perturb(&u, spec);
        assert_int_equal(u.n_nodes, 2);
        differs +=
            strcmp(t.nodes[0].name, u.nodes[0].name) || strcmp(t.nodes[1].name, u.nodes[1].name);
        sim_fill_trace_free(&u);
    }
    assert_true(differs > 0);
    sim_fill_trace_free(&t);
    /* at least one node; all with 1 */
    trace_from_text(&t, nodes, pods);
    perturb(&t, "subset=0.01");
    assert_int_equal(t.n_nodes, 1);
    sim_fill_trace_free(&t);
    trace_from_text(&t, nodes, pods);
    perturb(&t, "subset=1");
    assert_int_equal(t.n_nodes, 5);
    assert_int_equal(t.gpus, 20);
    sim_fill_trace_free(&t);
}

/* A fill job on a perturbed trace keeps every invariant and repeats. */
static void test_run(void **state)
{
    struct sim_fill_trace t;
    struct sim_fill_result a, b;
    char err[256] = "";

    (void)state;
    trace_from_text(&t, nodes, pods);
    perturb(&t, "flip,scale=0.8,subset=0.6,seed=3");
    assert_int_equal(t.n_nodes, 3);
    if (sim_fill_run(&t, allot_sched_policy_find("allot"), 42, 1.3, true, NULL, &a, err,
                     sizeof(err)) ||
        sim_fill_run(&t, allot_sched_policy_find("allot"), 42, 1.3, true, NULL, &b, err,
                     sizeof(err)))
        fail_msg("%s", err);
    assert_true(a.pods > 0);
    assert_int_equal(a.used_milli, b.used_milli);
    assert_int_equal(a.failed, b.failed);
    assert_true(a.used_milli <= t.gpus * 1000);
    sim_fill_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),  cmocka_unit_test(test_flip), cmocka_unit_test(test_scale),
        cmocka_unit_test(test_subset), cmocka_unit_test(test_run),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
