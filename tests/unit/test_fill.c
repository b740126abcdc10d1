/*
 * Unit tests for src/sim/fill.c, the openb fill experiment: the tune
 * procedure on tiny in-memory traces worked by hand (clones, the per-GPU
 * quirk, removal), the fragmentation measure against hand-computed values,
 * bucketing of one run (rounding half to even, the neighbour rule, failed
 * pods), determinism (two runs and one forked run give the same decision
 * log), a regression test against the committed decision log of the tiny
 * trace under tests/data/fill/, the published-results reader, seed lists and
 * the command line. Runs from the source root; never reads the shared real
 * traces.
 *
 * The expected decision log is regenerated, after a deliberate change of a
 * policy, with:
 *   build/allot-sim fill --nodes tests/data/fill/nodes.csv \
 *       --pods tests/data/fill/pods.csv --seeds 42-43 \
 *       --decision-log tests/data/fill/expected.log
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allot/common.h"
#include "fill.h"
#include "fill_cli.h"
#include "fill_published.h"
#include "fill_seeds.h"
#include "fill_workload.h"

#define DATA ALLOT_SOURCE_DIR "/tests/data/fill/"

/* Builds a trace from CSV text. */
static void trace_from_text(struct sim_fill_trace *t, const char *nodes, const char *pods)
{
    struct openb_nodes nl = {0};
    struct openb_pods pl = {0};
    char err[256] = "";

    assert_int_equal(openb_parse_nodes(nodes, strlen(nodes), "nodes.csv", &nl, err, sizeof(err)),
                     0);
    assert_int_equal(openb_parse_pods(pods, strlen(pods), "pods.csv", &pl, err, sizeof(err)), 0);
    if (sim_fill_trace_from_lists(t, &nl, &pl, "nodes.csv", "dir/pods.csv", err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        fail();
    }
}

static const char *const node_4v100 = "sn,cpu_milli,memory_mib,gpu,model\n"
                                      "n1,64000,262144,4,V100M32\n";

/* Every original pod appears exactly once in a workload. */
static void check_originals(const struct sim_fill_workload *w, size_t n_tasks)
{
    size_t seen = 0;

    for (size_t i = 0; i < w->n; i++) {
        if (w->clone[i] >= 0)
            continue;
        assert_true(w->task[i] < n_tasks);
        for (size_t j = 0; j < i; j++)
            assert_false(w->clone[j] < 0 && w->task[j] == w->task[i]);
        seen++;
    }
    assert_int_equal(seen, n_tasks - w->n_removed);
}

/* Capacity 4 GPUs = 4000 milli, tune 1.3: target 5200. Two 1-GPU pods ask
 * 2000; every clone asks 1000: 3000, 4000, 5000 fit, 6000 does not. So 3
 * clones whatever the draws, total 5000. */
static void test_tune_up_by_hand(void **state)
{
    struct sim_fill_trace t;
    struct sim_fill_workload w;

    (void)state;
    trace_from_text(&t, node_4v100,
                    "name,cpu_milli,num_gpu,gpu_milli\np0,1000,1,1000\np1,2000,1,1000\n");
    assert_int_equal(t.gpus, 4);
    assert_int_equal(t.request_milli, 2000);
    for (uint64_t seed = 1; seed <= 20; seed++) {
        assert_int_equal(sim_fill_workload_make(&t, seed, 1.3, &w), 0);
        assert_int_equal(w.n, 5);
        assert_int_equal(w.n_clones, 3);
        assert_int_equal(w.n_removed, 0);
        assert_int_equal(w.request_milli, 5000);
        /* originals first (shuffled), clones after, numbered in order */
        assert_int_equal(w.clone[0], -1);
        assert_int_equal(w.clone[1], -1);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(w.clone[2 + i], i);
            assert_true(w.task[2 + i] < 2);
        }
        check_originals(&w, 2);
        sim_fill_workload_free(&w);
    }
    sim_fill_trace_free(&t);
}

/* The authors' quirk: the next clone is compared by its per-GPU milli. One
 * 2-GPU pod (2000) on 4000 milli, target 5200: 2000 + 1000 <= 5200 adds a
 * clone (4000), 4000 + 1000 <= 5200 adds another (6000, above the target),
 * 6000 + 1000 > 5200 stops. CPU-only clones (0 milli) never stop the loop
 * and add nothing, so the GPU clones and the total do not depend on them. */
static void test_tune_quirk_by_hand(void **state)
{
    struct sim_fill_trace t;
    struct sim_fill_workload w;

    (void)state;
    trace_from_text(&t, node_4v100,
                    "name,cpu_milli,num_gpu,gpu_milli\nbig,8000,2,1000\ncpu,1000,0,0\n");
    for (uint64_t seed = 1; seed <= 20; seed++) {
        size_t gpu_clones = 0;
        assert_int_equal(sim_fill_workload_make(&t, seed, 1.3, &w), 0);
        for (size_t i = 0; i < w.n; i++)
            gpu_clones += w.clone[i] >= 0 && w.task[i] == 0;
        assert_int_equal(gpu_clones, 2);
        assert_int_equal(w.request_milli, 6000);
        assert_int_equal(w.n, 2 + w.n_clones);
        check_originals(&w, 2);
        sim_fill_workload_free(&w);
    }
    sim_fill_trace_free(&t);
}

/* Eight 1-GPU pods ask 8000 > 5200: three are removed at random (7000,
 * 6000, 5000), five stay, no clone. tune 0 leaves the shuffled trace. */
static void test_tune_down_by_hand(void **state)
{
    struct sim_fill_trace t;
    struct sim_fill_workload w;
    char pods[512];
    size_t len = 0;

    (void)state;
    len += (size_t)allot_fmt(pods, sizeof(pods), "name,cpu_milli,num_gpu,gpu_milli\n");
    for (int i = 0; i < 8; i++)
        len += (size_t)allot_fmt(pods + len, sizeof(pods) - len, "p%d,1000,1,1000\n", i);
    trace_from_text(&t, node_4v100, pods);
    assert_int_equal(sim_fill_workload_make(&t, 42, 1.3, &w), 0);
    assert_int_equal(w.n, 5);
    assert_int_equal(w.n_removed, 3);
    assert_int_equal(w.n_clones, 0);
    assert_int_equal(w.request_milli, 5000);
    check_originals(&w, 8);
    sim_fill_workload_free(&w);

    assert_int_equal(sim_fill_workload_make(&t, 42, 0, &w), 0);
    assert_int_equal(w.n, 8);
    assert_int_equal(w.request_milli, 8000);
    check_originals(&w, 8);
    sim_fill_workload_free(&w);
    sim_fill_trace_free(&t);
}

/* The mix of a 4-pod trace (CPU-only pods count) and F of node states:
 * p(share 500, cpu 4000) = 0.5, p(whole, cpu 8000) = 0.25,
 * p(CPU-only 2000) = 0.25. */
static void test_frag_by_hand(void **state)
{
    struct sim_fill_trace t;
    int v100, t4;
    const int32_t a[] = {1000, 300}, b[] = {600, 400}, c[] = {1000, 1000}, d[] = {0, 0};

    (void)state;
    trace_from_text(&t, node_4v100,
                    "name,cpu_milli,num_gpu,gpu_milli\ns1,4000,1,500\ns2,4000,1,500\n"
                    "w1,8000,1,1000\nc1,2000,0,0\n");
    assert_int_equal(t.mix.n, 3);
    assert_int_equal(t.mix.v[0].milli, 500);
    assert_true(fabs(t.mix.v[0].p - 0.5) < 1e-12);
    assert_true(fabs(t.mix.v[1].p - 0.25) < 1e-12);
    assert_true(fabs(t.mix.v[2].p - 0.25) < 1e-12);
    v100 = allot_catalog_find_model(t.cat, "V100M32");
    assert_true(v100 >= 0);
    /* {1000, 300}, CPU 16000: share fits, 300 is too small: 300; whole
     * fits, 300 too small: 300; CPU-only: all 1300.
     * F = .5*300 + .25*300 + .25*1300 = 550 */
    assert_true(fabs(allot_frag_state(&t.mix, v100, 16000, a, 2) - 550.0) < 1e-9);
    /* {600, 400}, CPU 6000: share fits, 400 too small: 400; whole does not
     * fit: 1000; CPU-only: 1000. F = 200 + 250 + 250 = 700 */
    assert_true(fabs(allot_frag_state(&t.mix, v100, 6000, b, 2) - 700.0) < 1e-9);
    /* {1000, 1000}, CPU 2000: neither GPU task has its CPU: all 2000 three
     * times over. F = 2000 */
    assert_true(fabs(allot_frag_state(&t.mix, v100, 2000, c, 2) - 2000.0) < 1e-9);
    /* no GPU left: nothing to fragment */
    assert_true(allot_frag_state(&t.mix, v100, 16000, d, 2) == 0.0);
    sim_fill_trace_free(&t);

    /* a model constraint: share 500 on T4 only (p = 1) */
    trace_from_text(&t, node_4v100, "name,cpu_milli,num_gpu,gpu_milli,gpu_spec\ns,1000,1,500,T4\n");
    t4 = allot_catalog_find_model(t.cat, "T4");
    v100 = allot_catalog_find_model(t.cat, "V100M32");
    assert_int_equal(t.mix.n, 1);
    assert_true(t.mix.v[0].model_mask == 1ULL << t4);
    assert_true(fabs(allot_frag_state(&t.mix, t4, 16000, b, 2) - 400.0) < 1e-9);
    assert_true(fabs(allot_frag_state(&t.mix, v100, 16000, b, 2) - 1000.0) < 1e-9);
    sim_fill_trace_free(&t);
}

/* One run bucketed by hand: four GPUs, five 1-GPU pods, no tuning. */
static void test_run_buckets_by_hand(void **state)
{
    struct sim_fill_trace t;
    struct sim_fill_result r;
    struct sim_fill_text log = {0};
    char err[256] = "";

    (void)state;
    trace_from_text(&t, node_4v100,
                    "name,cpu_milli,num_gpu,gpu_milli\na,1000,1,1000\nb,1000,1,1000\n"
                    "c,1000,1,1000\nd,1000,1,1000\ne,1000,1,1000\n");
    assert_int_equal(sim_fill_run(&t, allot_sched_policy_find("firstfit"), 7, 0, true, &log, &r,
                                  err, sizeof(err)),
                     0);
    assert_int_equal(r.pods, 5);
    assert_int_equal(r.failed, 1);
    assert_int_equal(r.arrived_milli, 5000);
    assert_int_equal(r.used_milli, 4000);
    assert_true(r.alloc_pct[25] == 25.0 && r.alloc_pct[50] == 50.0 && r.alloc_pct[75] == 75.0);
    assert_true(r.alloc_pct[100] == 100.0 && r.alloc_pct[125] == 100.0);
    /* empty buckets take their neighbours' mean, or nothing */
    assert_true(r.alloc_pct[24] == 25.0 && r.alloc_pct[26] == 25.0);
    assert_true(isnan(r.alloc_pct[0]) && isnan(r.alloc_pct[27]) && isnan(r.alloc_pct[130]));
    /* whole free GPUs fit the only typical task: no fragmentation */
    assert_true(r.frag_pct[25] == 0.0 && r.frag_pct[100] == 0.0);
    /* the GPUs go 0, 1, 2, 3, then the fifth pod fails */
    {
        const char *p = log.buf;
        const char *want[] = {"\tn1\t0x1\n", "\tn1\t0x2\n", "\tn1\t0x4\n", "\tn1\t0x8\n",
                              "\t-\t-\n"};
        for (int i = 0; i < 5; i++) {
            const char *nl = strchr(p, '\n');
            size_t wl = strlen(want[i]);
            assert_non_null(nl);
            assert_true((size_t)(nl + 1 - p) > wl);
            assert_memory_equal(nl + 1 - wl, want[i], wl);
            assert_memory_equal(p, "firstfit\t7\t", 11);
            p = nl + 1;
        }
        assert_int_equal(*p, '\0');
    }
    sim_fill_text_free(&log);
    sim_fill_trace_free(&t);

    /* Fragmentation rate in a run: share 800 and share 300 (p = .5 each)
     * leave {200, 700, 1000, 1000} in either order; F = .5 * (200 + 700) +
     * .5 * 200 = 550 over 2900 idle. Arrived 1100 of 4000 = 27.5 % rounds
     * (half to even) to bucket 28. */
    trace_from_text(&t, node_4v100,
                    "name,cpu_milli,num_gpu,gpu_milli\na,1000,1,800\nb,1000,1,300\n");
    for (uint64_t seed = 1; seed <= 4; seed++) {
        assert_int_equal(sim_fill_run(&t, allot_sched_policy_find("firstfit"), seed, 0, true, NULL,
                                      &r, err, sizeof(err)),
                         0);
        assert_true(fabs(r.alloc_pct[28] - 27.5) < 1e-12);
        assert_true(fabs(r.frag_pct[28] - 550.0 / 2900.0 * 100.0) < 1e-6);
        assert_true(fabs(r.frag_end - 550.0) < 1e-6);
        /* empty 27 and 29 borrow from 28; 30 has no neighbour with data */
        assert_true(r.alloc_pct[27] == r.alloc_pct[28] && r.alloc_pct[29] == r.alloc_pct[28]);
        assert_true(isnan(r.alloc_pct[30]));
    }
    sim_fill_trace_free(&t);
}

static void load_tiny(struct sim_fill_trace *t)
{
    char err[512] = "";

    if (sim_fill_trace_load(t, DATA "nodes.csv", DATA "pods.csv", err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        fail();
    }
}

/* Runs every "all" policy on seeds 42-43 of the tiny trace with `jobs`
 * workers; returns the decision log (malloc'd) and its hash. */
static char *run_tiny(const struct sim_fill_trace *t, int jobs, uint64_t *hash, size_t *len,
                      struct sim_fill_summary *sum)
{
    static const char *const names[] = {"random",  "dotprod", "gpuclustering", "gpupacking",
                                        "bestfit", "fgd",     "allot"};
    const struct allot_sched_policy_ops *pol[7];
    const uint64_t seeds[] = {42, 43};
    struct sim_fill_opts o = {0};
    char *buf = NULL, err[512] = "";
    FILE *f;

    for (int i = 0; i < 7; i++)
        assert_non_null(pol[i] = allot_sched_policy_find(names[i]));
    f = open_memstream(&buf, len);
    assert_non_null(f);
    o.policies = pol;
    o.n_policies = 7;
    o.seeds = seeds;
    o.n_seeds = 2;
    o.tune = 1.3;
    o.workers = jobs;
    o.check = true;
    o.log = f;
    if (sim_fill_experiment(t, &o, sum, hash, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        fail();
    }
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_determinism(void **state)
{
    struct sim_fill_trace t;
    struct sim_fill_summary s1[7], s2[7], s3[7];
    uint64_t h1, h2, h3;
    size_t l1, l2, l3;
    char *a, *b, *c;

    (void)state;
    load_tiny(&t);
    a = run_tiny(&t, 1, &h1, &l1, s1);
    b = run_tiny(&t, 1, &h2, &l2, s2);
    c = run_tiny(&t, 3, &h3, &l3, s3);
    assert_true(h1 == h2 && h1 == h3);
    assert_true(l1 > 0 && l1 == l2 && l1 == l3);
    assert_memory_equal(a, b, l1);
    assert_memory_equal(a, c, l1);
    assert_true(h1 == allot_fnv1a(ALLOT_FNV1A_INIT, a, l1));
    for (int p = 0; p < 7; p++) {
        assert_memory_equal(s1[p].unalloc_mean, s3[p].unalloc_mean, sizeof(s1[p].unalloc_mean));
        assert_memory_equal(s1[p].frag_mean, s3[p].frag_mean, sizeof(s1[p].frag_mean));
        assert_int_equal(s1[p].failed, s3[p].failed);
    }
    free(a);
    free(b);
    free(c);
    sim_fill_trace_free(&t);
}

static void test_regression_decision_log(void **state)
{
    struct sim_fill_trace t;
    struct sim_fill_summary s[7];
    uint64_t h;
    size_t len, elen = 0;
    char *got, *want = NULL;
    FILE *f = fopen(DATA "expected.log", "rb");

    (void)state;
    assert_non_null(f);
    {
        size_t cap = 0;
        for (;;) {
            assert_int_equal(allot_grow((void **)&want, &cap, elen + 4096, 1), 0);
            size_t r = fread(want + elen, 1, cap - elen, f);
            elen += r;
            if (r == 0)
                break;
        }
    }
    fclose(f);
    load_tiny(&t);
    got = run_tiny(&t, 1, &h, &len, s);
    if (len != elen || memcmp(got, want, len) != 0) {
        /* point at the first differing line */
        size_t i = 0, line = 1;
        while (i < len && i < elen && got[i] == want[i])
            line += got[i++] == '\n';
        fprintf(stderr, "decision log differs from tests/data/fill/expected.log at line %zu\n",
                line);
        fail();
    }
    free(got);
    allot_free(want);
    sim_fill_trace_free(&t);
}

static void test_trace_errors(void **state)
{
    struct sim_fill_trace t;
    char err[512] = "";

    (void)state;
    assert_int_equal(
        sim_fill_trace_load(&t, DATA "nodes.csv", DATA "pods_bad_model.csv", err, sizeof(err)),
        ALLOT_EINVAL);
    assert_non_null(strstr(err, "pods_bad_model.csv:3: gpu_spec entry \"A100X\""));
    assert_int_equal(
        sim_fill_trace_load(&t, DATA "nodes_bad_model.csv", DATA "pods.csv", err, sizeof(err)),
        ALLOT_EINVAL);
    assert_non_null(strstr(err, "nodes_bad_model.csv:3: GPU model \"Z9\""));
    assert_int_equal(sim_fill_trace_load(&t, DATA "nope.csv", DATA "pods.csv", err, sizeof(err)),
                     ALLOT_EIO);
    /* CPU-only nodes are skipped; the workload is named after the pod file */
    load_tiny(&t);
    assert_int_equal(t.n_nodes, 5);
    assert_int_equal(t.gpus, 20);
    assert_int_equal(t.n_tasks, 40);
    assert_string_equal(t.workload, "pods");
    sim_fill_trace_free(&t);
    sim_fill_trace_free(NULL);
}

static void test_published(void **state)
{
    char path[] = "/tmp/allot-test-fill-XXXXXX";
    int fd = mkstemp(path);
    FILE *f;
    struct sim_fill_published p;
    char err[512] = "";
    int n = 0;

    (void)state;
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("workload,sc_policy,tune,seed,total_gpus,99,100,101\n"
          "w1,06-FGD,1.3,42,4,95.0,96.0,96.5\n"
          "w1,06-FGD,1.3,43,4,95.0,94.0,96.5\n"
          "w1,06-FGD,1.0,42,4,95.0,50.0,96.5\n"
          "w1,03-GpuClustering,1.3,42,4,95.0,,96.5\n"
          "w2,06-FGD,1.3,42,4,95.0,10.0,96.5\n",
          f);
    fclose(f);
    assert_int_equal(sim_fill_published_read(path, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 5);
    assert_string_equal(p.v[3].policy, "gpuclustering");
    /* mean of 100 - 96 and 100 - 94 */
    assert_true(fabs(sim_fill_published_unalloc(&p, "w1", "fgd", 1.3, 100, &n) - 5.0) < 1e-9);
    assert_int_equal(n, 2);
    assert_true(isnan(sim_fill_published_unalloc(&p, "w1", "gpuclustering", 1.3, 100, &n)));
    assert_int_equal(n, 0);
    assert_true(isnan(sim_fill_published_unalloc(&p, "w1", "bestfit", 1.3, 100, NULL)));
    sim_fill_published_free(&p);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("workload,sc_policy,tune,seed,100\nw1,06-FGD,1.3,42,9x\n", f);
    fclose(f);
    assert_int_equal(sim_fill_published_read(path, &p, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, ":2: column 5"));
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("policy,100\n", f);
    fclose(f);
    assert_int_equal(sim_fill_published_read(path, &p, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, ":1: unknown column \"policy\""));
    unlink(path);
    assert_int_equal(sim_fill_published_read(path, &p, err, sizeof(err)), ALLOT_EIO);
}

/* Writes `text` to a temporary file and reads it as published results;
 * returns the reader's code with its message in err. */
static int read_published_text(const char *text, char *err, size_t errlen)
{
    char path[] = "/tmp/allot-test-fill-XXXXXX";
    int fd = mkstemp(path), rc;
    struct sim_fill_published p;
    FILE *f;

    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    rc = sim_fill_published_read(path, &p, err, errlen);
    if (rc == 0)
        sim_fill_published_free(&p);
    unlink(path);
    return rc;
}

/* Percentages outside 0..100, a repeated header column, an out-of-range
 * seed and rows of the wrong width are errors that name the problem. */
static void test_published_strict(void **state)
{
    char err[512] = "";

    (void)state;
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,100\n"
                                         "w1,06-FGD,1.3,42,-5000\n",
                                         err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, ":2: column 5 (arrived 100 %) \"-5000\" is negative"));
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,100\n"
                                         "w1,06-FGD,1.3,42,100.5\n",
                                         err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "out of range 0..100"));
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,100,100\n"
                                         "w1,06-FGD,1.3,42,95.0,96.0\n",
                                         err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, ":1: duplicate column \"100\""));
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,seed,100\n"
                                         "w1,06-FGD,1.3,42,42,95.0\n",
                                         err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "duplicate column \"seed\""));
    /* the seed was a double cast to long: 1e30 was undefined behaviour */
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,100\n"
                                         "w1,06-FGD,1.3,1e30,95.0\n",
                                         err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, ":2: seed"));
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,100\n"
                                         "w1,06-FGD,1.3,99999999999999999999,95.0\n",
                                         err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, ":2: seed"));
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,100\n"
                                         "w1,06-FGD,1.3,42\n",
                                         err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, ":2: expected 5 fields, got 4"));
    assert_int_equal(read_published_text("workload,sc_policy,tune,seed,100\n"
                                         "w1,06-FGD,1.3,42,\n",
                                         err, sizeof(err)),
                     0);
}

static void test_seeds(void **state)
{
    uint64_t *v;
    int n;
    char err[128];

    (void)state;
    assert_int_equal(sim_fill_parse_seeds("42-51", &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 10);
    assert_true(v[0] == 42 && v[9] == 51);
    allot_free(v);
    assert_int_equal(sim_fill_parse_seeds("1,5,7-9", &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 5);
    assert_true(v[0] == 1 && v[1] == 5 && v[2] == 7 && v[4] == 9);
    allot_free(v);
    assert_int_equal(sim_fill_parse_seeds("", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(sim_fill_parse_seeds("9-1", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(sim_fill_parse_seeds("1,,2", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(sim_fill_parse_seeds("-3", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(sim_fill_parse_seeds("1-999999", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(sim_fill_parse_seeds("x", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    /* a seed given twice would count one run twice in the means */
    assert_int_equal(sim_fill_parse_seeds("42,42", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "seed 42 is given twice");
    assert_int_equal(sim_fill_parse_seeds("1-10,5", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "seed 5 is given twice");
    /* at most SIM_FILL_MAX_SEEDS seeds */
    assert_int_equal(sim_fill_parse_seeds("1-100000", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "more than 1000 seeds");
    assert_int_equal(sim_fill_parse_seeds("1-1000", &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, SIM_FILL_MAX_SEEDS);
    allot_free(v);
    assert_int_equal(sim_fill_parse_seeds("0-999,1000", &v, &n, err, sizeof(err)), ALLOT_EINVAL);
}

static int run_main(int argc, const char **argv)
{
    int rc;

    fflush(stdout);
    rc = sim_fill_main(argc, (char **)argv);
    fflush(stdout);
    return rc;
}

/* Runs sim_fill_main with stderr captured into err (errlen bytes). */
static int run_main_err(int argc, const char **argv, char *err, size_t errlen)
{
    char path[] = "/tmp/allot-test-fill-XXXXXX";
    int fd = mkstemp(path), saved, rc;
    FILE *f;
    size_t n;

    assert_true(fd >= 0);
    fflush(stderr);
    saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    rc = run_main(argc, argv);
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    close(fd);
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(err, 1, errlen - 1, f);
    err[n] = '\0';
    fclose(f);
    unlink(path);
    return rc;
}

/* Values that used to run and print nonsense are refused up front. */
static void test_command_line_values(void **state)
{
    const char *nodes = DATA "nodes.csv", *pods = DATA "pods.csv";
    char err[4096], dir[] = "/tmp/allot-test-fill-XXXXXX", dlog[256];

    (void)state;
    assert_non_null(mkdtemp(dir));
    allot_fmt(dlog, sizeof(dlog), "%s/d.log", dir);
    {
        /* a bad output path stops the command before the run (it failed
         * only after the run, with the decision log written) */
        const char *a[] = {
            "fill",           "--nodes", nodes, "--pods", pods, "--json", "/nonexistent/x.json",
            "--decision-log", dlog};
        assert_int_equal(run_main_err(9, a, err, sizeof(err)), 1);
        assert_non_null(strstr(err, "--json /nonexistent/x.json: No such file or directory"));
        assert_int_not_equal(access(dlog, F_OK), 0);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--plot", dir};
        assert_int_equal(run_main_err(7, a, err, sizeof(err)), 1);
        assert_non_null(strstr(err, "is a directory"));
    }
    {
        const char *a[] = {"fill", "--nodes",        nodes, "--pods", pods, "--json",
                           dlog,   "--decision-log", dlog};
        assert_int_equal(run_main_err(9, a, err, sizeof(err)), 1);
        assert_non_null(strstr(err, "--json and --decision-log name the same file"));
        assert_int_not_equal(access(dlog, F_OK), 0);
    }
    {
        char json[300];
        json_t *root;
        json_error_t jerr;

        allot_fmt(json, sizeof(json), "%s/p.json", dir);
        {
            const char *a[] = {"fill",
                               "--nodes",
                               nodes,
                               "--pods",
                               pods,
                               "--json",
                               json,
                               "--seeds",
                               "1",
                               "--policy",
                               "fgd",
                               "--perturb",
                               "flip,subset=0.5,seed=4"};
            assert_int_equal(run_main_err(13, a, err, sizeof(err)), 0);
        }
        root = json_load_file(json, 0, &jerr);
        assert_non_null(root);
        assert_string_equal(json_string_value(json_object_get(root, "workload")),
                            "pods+flip,subset=0.5,seed=4");
        assert_true(json_integer_value(json_object_get(root, "nodes")) < 5);
        json_decref(root);
        unlink(json);
    }
    assert_int_equal(rmdir(dir), 0);
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--perturb", "mirror"};
        assert_int_equal(run_main_err(7, a, err, sizeof(err)), 2);
        assert_non_null(strstr(err, "--perturb \"mirror\": \"mirror\": want flip"));
    }
    {
        /* below 1 the arrived request never reaches 100 %: frag@100 was nan */
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--tune", "0.5"};
        assert_int_equal(run_main_err(7, a, err, sizeof(err)), 2);
        assert_non_null(strstr(err, "--tune \"0.5\": want a number in [1, 100]"));
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--tune", " 1.3"};
        assert_int_equal(run_main_err(7, a, err, sizeof(err)), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--tune", "nan"};
        assert_int_equal(run_main_err(7, a, err, sizeof(err)), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--seeds", "42,42"};
        assert_int_equal(run_main_err(7, a, err, sizeof(err)), 2);
        assert_non_null(strstr(err, "seed 42 is given twice"));
    }
    {
        /* --jobs is fill's old name of --workers (replay's --jobs is the trace) */
        const char *a[] = {"fill", "--nodes", nodes, "--pods",   pods,     "--jobs",
                           "2",    "--seeds", "1",   "--policy", "bestfit"};
        assert_int_equal(run_main_err(11, a, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "--jobs is deprecated, use --workers"));
    }
    {
        const char *a[] = {"fill",   "--nodes", nodes,       "--pods", pods,
                           "--jobs", "2",       "--workers", "2"};
        assert_int_equal(run_main_err(9, a, err, sizeof(err)), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--jobs", "0"};
        assert_int_equal(run_main_err(7, a, err, sizeof(err)), 2);
        assert_non_null(strstr(err, "--jobs \"0\": want an integer 1..256"));
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods",   pods,     "--tune",
                           "1",    "--seeds", "1",   "--policy", "bestfit"};
        assert_int_equal(run_main_err(11, a, err, sizeof(err)), 0);
    }
}

static void test_command_line(void **state)
{
    char dir[] = "/tmp/allot-test-fill-XXXXXX", json[256], svg[256], dlog[256];
    json_t *root, *pol, *u;
    json_error_t jerr;
    const char *nodes = DATA "nodes.csv", *pods = DATA "pods.csv";
    const char *bad = DATA "pods_bad_model.csv";

    (void)state;
    {
        const char *a[] = {"fill", "--help"};
        assert_int_equal(run_main(2, a), 0);
    }
    {
        const char *a[] = {"fill", "--pods", pods};
        assert_int_equal(run_main(3, a), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--policy", "bestfit,nosuch"};
        assert_int_equal(run_main(7, a), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--tune=-1"};
        assert_int_equal(run_main(6, a), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--workers", "0"};
        assert_int_equal(run_main(7, a), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", pods, "--check=yes"};
        assert_int_equal(run_main(6, a), 2);
    }
    {
        const char *a[] = {"fill", "--nodes", nodes, "--pods", bad};
        assert_int_equal(run_main(5, a), 1);
    }
    assert_non_null(mkdtemp(dir));
    allot_fmt(json, sizeof(json), "%s/out.json", dir);
    allot_fmt(svg, sizeof(svg), "%s/out.svg", dir);
    allot_fmt(dlog, sizeof(dlog), "%s/decisions.log", dir);
    {
        const char *a[] = {"fill",        "--nodes",        nodes, "--pods",    pods, "--policy",
                           "bestfit,fgd", "--seeds",        "1-2", "--json",    json, "--plot",
                           svg,           "--decision-log", dlog,  "--workers", "2"};
        assert_int_equal(run_main(17, a), 0);
    }
    root = json_load_file(json, 0, &jerr);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "experiment")), "fill");
    assert_string_equal(json_string_value(json_object_get(root, "workload")), "pods");
    assert_int_equal(json_integer_value(json_object_get(root, "gpus")), 20);
    assert_int_equal(json_array_size(json_object_get(root, "seeds")), 2);
    pol = json_object_get(root, "policies");
    assert_int_equal(json_array_size(pol), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(pol, 1), "name")), "fgd");
    u = json_object_get(json_array_get(pol, 1), "unallocated_pct");
    assert_int_equal(json_object_size(u), SIM_FILL_BUCKETS);
    assert_non_null(json_object_get(u, "0"));
    assert_true(json_is_number(json_object_get(u, "100")));
    assert_non_null(json_object_get(json_array_get(pol, 0), "frag_rate_pct"));
    assert_true(json_is_number(json_object_get(json_array_get(pol, 0), "seconds")));
    json_decref(root);
    assert_int_equal(access(svg, R_OK), 0);
    assert_int_equal(access(dlog, R_OK), 0);
    unlink(json);
    unlink(svg);
    unlink(dlog);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tune_up_by_hand),
        cmocka_unit_test(test_tune_quirk_by_hand),
        cmocka_unit_test(test_tune_down_by_hand),
        cmocka_unit_test(test_frag_by_hand),
        cmocka_unit_test(test_run_buckets_by_hand),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_regression_decision_log),
        cmocka_unit_test(test_trace_errors),
        cmocka_unit_test(test_published),
        cmocka_unit_test(test_published_strict),
        cmocka_unit_test(test_seeds),
        cmocka_unit_test(test_command_line),
        cmocka_unit_test(test_command_line_values),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
