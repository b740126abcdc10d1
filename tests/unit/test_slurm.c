/*
 * Unit tests for src/sim/slurm.c (Slurm's sacct export and scontrol node
 * list) and the trace setups of replay_setup.c they feed: the handcrafted
 * files under tests/data/slurm/ (our own made-up cluster), broken inputs
 * in memory, each checked for its NAME:LINE: message, node groups and
 * their catalog models, the generated per-account tenants, quota changes,
 * a replay of the export on its nodes, and an allocation-failure loop.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allot/common.h"
#include "replay.h"
#include "slurm.h"

#define DATA ALLOT_SOURCE_DIR "/tests/data/slurm/"

static struct allot_catalog *cat;

static int setup_cat(void **state)
{
    char err[256];

    (void)state;
    cat = allot_catalog_default(err, sizeof(err));
    return cat ? 0 : -1;
}

static int free_cat(void **state)
{
    (void)state;
    allot_catalog_free(cat);
    return 0;
}

static int tenant_of(const struct replay_trace *tr, const char *name)
{
    for (int i = 0; i < tr->n_tenants; i++)
        if (strcmp(tr->tenants[i], name) == 0)
            return i;
    return -1;
}

static void test_sacct_good(void **state)
{
    struct replay_trace tr = {0};
    struct slurm_sacct_counts c;
    char err[256] = "";

    (void)state;
    assert_int_equal(slurm_read_sacct(DATA "sacct_small.txt", 0, &tr, &c, err, sizeof(err)), 0);
    assert_int_equal(c.lines, 17);
    assert_int_equal(c.steps, 2);
    assert_int_equal(c.never_started, 2); /* 1006 cancelled before start, 1010 pending */
    assert_int_equal(c.running, 1);
    assert_int_equal(c.jobs, 12);
    assert_int_equal(tr.n, 12);
    assert_int_equal(tr.n_tenants, 3);
    assert_string_equal(tr.tenants[0], "vision");
    /* 1001: 2 GPUs, 2 h, submitted 2026-03-02T08:00:00 UTC */
    assert_int_equal(tr.v[0].gpus, 2);
    assert_int_equal(tr.v[0].duration, 7200);
    assert_int_equal(tr.v[0].submit, philly_days_from_civil(2026, 3, 2) * 86400 + 8 * 3600);
    assert_int_equal(tr.v[0].line, 2);
    assert_string_equal(tr.prio[tr.v[0].prio], "normal");
    /* 1002: only gres/gpu:a100=4 */
    assert_int_equal(tr.v[1].gpus, 4);
    /* the array tasks are jobs of nlp */
    assert_int_equal(tr.v[2].tenant, tenant_of(&tr, "nlp"));
    assert_int_equal(tr.v[4].duration, 7200); /* TIMEOUT */
    assert_int_equal(tr.v[5].gpus, 16);
    assert_string_equal(tr.prio[tr.v[5].prio], "high");
    assert_int_equal(tr.v[6].duration, 1800); /* CANCELLED by 1000, after a start */
    assert_int_equal(tr.v[9].gpus, 0);        /* the CPU job: kept, left out by the setup */
    replay_trace_free(&tr);
    replay_trace_free(&tr);
    replay_trace_free(NULL);

    /* the same export printed at +01:00 is an hour earlier in UTC */
    assert_int_equal(slurm_read_sacct(DATA "sacct_small.txt", 3600, &tr, NULL, err, sizeof(err)),
                     0);
    assert_int_equal(tr.v[0].submit, philly_days_from_civil(2026, 3, 2) * 86400 + 7 * 3600);
    replay_trace_free(&tr);
}

static const struct bad_sacct {
    const char *text;
    const char *msg;
} bad_sacct[] = {
    {"", "x:1: empty file"},
    {"JobID|Account|Submit|Start|End\n", "x:1: no State column"},
    {"JobID|Account|Submit|Start|End|State\n", "x:1: no AllocTRES or ReqTRES column"},
    {"JobID|Account|Submit|Start|End|State|State|ReqTRES\n", "x:1: column State appears twice"},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n1|a|2026-01-01T00:00:00\n",
     "x:2: 3 fields, the header has 7"},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\nabc|a|||||\n", "x:2: JobID \"abc\""},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n1.|a|||||\n", "x:2: JobID \"1.\""},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n1|a||||DONE|\n", "x:2: State \"DONE\""},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n1|a|yesterday|||COMPLETED|\n",
     "x:2: Submit \"yesterday\" is not a time"},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n1|a|2026-01-01 00:00:00|||COMPLETED|\n",
     "x:2: Submit \"2026-01-01 00:00:00\" is not a time"},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n1|a|2026-02-30T00:00:00|||COMPLETED|\n",
     "x:2: Submit \"2026-02-30T00:00:00\""},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n"
     "1|a|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T01:00:00|COMPLETED|gres/gpu=-1\n",
     "x:2: GPU count in \"gres/gpu=-1\""},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n"
     "1|a|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T01:00:00|COMPLETED|"
     "gres/gpu=18446744073709551617\n",
     "x:2: GPU count in \"gres/gpu=18446744073709551617\" is not a whole number up to 100000"},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n"
     "1|a|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T01:00:00|COMPLETED|cpu\n",
     "x:2: TRES item \"cpu\" is not NAME=VALUE"},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n"
     "1|a|2026-01-01T00:00:00|2026-01-01T02:00:00|2026-01-01T01:00:00|COMPLETED|gres/gpu=1\n",
     "x:2: End \"2026-01-01T01:00:00\" lies before Start \"2026-01-01T02:00:00\""},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n"
     "1|a|2026-01-02T00:00:00|2026-01-01T00:00:00|2026-01-02T01:00:00|COMPLETED|gres/gpu=1\n",
     "x:2: Start \"2026-01-01T00:00:00\" lies before Submit \"2026-01-02T00:00:00\""},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n\n1|a||||PENDING|\n",
     "x:2: a blank line inside the export"},
    {"JobID|Account|Submit|Start|End|State|ReqTRES\n1|a|\x01|||PENDING|\n", "x:2: a control byte"},
};

static void test_sacct_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_sacct) / sizeof(bad_sacct[0]); i++) {
        struct replay_trace tr = {0};
        char err[512] = "";
        int rc = slurm_parse_sacct(bad_sacct[i].text, strlen(bad_sacct[i].text), "x", 0, &tr, NULL,
                                   err, sizeof(err));

        if (rc != ALLOT_EINVAL || strncmp(err, bad_sacct[i].msg, strlen(bad_sacct[i].msg)) != 0)
            fail_msg("case %zu: rc %d, \"%s\", want \"%s\"", i, rc, err, bad_sacct[i].msg);
        replay_trace_free(&tr);
    }
    {
        /* a NUL byte inside a line */
        static const char t[] =
            "JobID|Account|Submit|Start|End|State|ReqTRES\n1|a\0b||||PENDING|\n";
        struct replay_trace tr = {0};
        char err[512] = "";

        assert_int_equal(slurm_parse_sacct(t, sizeof(t) - 1, "x", 0, &tr, NULL, err, sizeof(err)),
                         ALLOT_EINVAL);
        assert_string_equal(err, "x:2: a NUL byte inside the line");
        replay_trace_free(&tr);
    }
    assert_int_equal(slurm_read_sacct(DATA "no-such-file", 0, NULL, NULL, (char[64]){0}, 64),
                     ALLOT_EIO);
}

static void test_tz(void **state)
{
    int64_t o = 1;

    (void)state;
    assert_int_equal(slurm_parse_tz("UTC", &o), 0);
    assert_int_equal(o, 0);
    assert_int_equal(slurm_parse_tz("+05:30", &o), 0);
    assert_int_equal(o, 19800);
    assert_int_equal(slurm_parse_tz("-08:00", &o), 0);
    assert_int_equal(o, -28800);
    assert_int_equal(slurm_parse_tz("+15:00", &o), ALLOT_EINVAL);
    assert_int_equal(slurm_parse_tz("0530", &o), ALLOT_EINVAL);
    assert_int_equal(slurm_parse_tz("+05:60", &o), ALLOT_EINVAL);
}

static void test_nodes_good(void **state)
{
    struct replay_node_group *g = NULL;
    int n = 0;
    size_t cpu_only = 0;
    char err[256] = "";

    (void)state;
    assert_int_equal(
        slurm_read_nodes(DATA "scontrol_nodes.txt", cat, NULL, &g, &n, &cpu_only, err, sizeof(err)),
        0);
    assert_int_equal(n, 2);
    assert_int_equal(cpu_only, 1);
    assert_string_equal(g[0].model, "A100-80GB"); /* "a100" is the alias A100 */
    assert_int_equal(g[0].count, 2);
    assert_int_equal(g[0].gpus, 8);
    assert_int_equal(g[0].cpu_milli, 64000);
    assert_int_equal(g[0].mem_mib, 515000);
    assert_string_equal(g[1].model, "V100-32GB"); /* tesla_v100 */
    assert_int_equal(g[1].gpus, 4);
    assert_int_equal(g[1].count, 1);
    allot_free(g);
}

static const struct bad_nodes {
    const char *text;
    const char *model;
    const char *msg;
} bad_nodes[] = {
    {"CPUTot=8 RealMemory=10 Gres=gpu:4\n", "A100", "x:1: no NodeName="},
    {"NodeName=n CPUTot=8 RealMemory=10\n", "A100", "x:1: no Gres= field"},
    {"NodeName=n CPUTot=8 RealMemory=10 Gres=gpu:4\n", NULL,
     "x:1: untyped GPUs: name their model with --gpu-model"},
    {"NodeName=n CPUTot=8 RealMemory=10 Gres=gpu:tpu9:4\n", NULL,
     "x:1: GPU type \"tpu9\" is not in the catalog"},
    {"NodeName=n CPUTot=8 RealMemory=10 Gres=gpu:a100:17\n", NULL,
     "x:1: 17 GPUs on one node; at most 16"},
    {"NodeName=n CPUTot=8 RealMemory=10 Gres=gpu:a100:x\n", NULL, "x:1: Gres GPU count \"x\""},
    {"NodeName=n CPUTot=0 RealMemory=10 Gres=gpu:a100:1\n", NULL, "x:1: CPUTot \"0\""},
    {"NodeName=n CPUTot=8 RealMemory=99999999999999999 Gres=gpu:a100:1\n", NULL,
     "x:1: RealMemory \"99999999999999999\""},
    {"NodeName=n CPUTot=8 RealMemory=10 Gres=(null)\n", NULL, "x: no node with GPUs"},
    {"NodeName=n CPUTot=32 Gres=gpu:a100:4\n", NULL, "x:1: no RealMemory= field"},
    {"NodeName=n RealMemory=10 Gres=gpu:a100:4\n", NULL, "x:1: no CPUTot= field"},
    {"NodeName=n CPUTot=8 RealMemory=10 Gres=gpu:a100:4,gpu:h100:2\n", NULL,
     "x:1: Gres names two GPU types (\"a100\" and \"h100\")"},
};

static void test_nodes_bad(void **state)
{
    struct replay_node_group *g = NULL;
    int n = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(bad_nodes) / sizeof(bad_nodes[0]); i++) {
        char err[512] = "";
        int rc = slurm_parse_nodes(bad_nodes[i].text, strlen(bad_nodes[i].text), "x", cat,
                                   bad_nodes[i].model, &g, &n, NULL, err, sizeof(err));

        if (rc != ALLOT_EINVAL || strncmp(err, bad_nodes[i].msg, strlen(bad_nodes[i].msg)) != 0)
            fail_msg("case %zu: rc %d, \"%s\", want \"%s\"", i, rc, err, bad_nodes[i].msg);
        assert_null(g);
    }
    {
        /* --gpu-model names untyped GPUs and unknown types */
        static const char t[] = "NodeName=n1 CPUTot=8 RealMemory=10 Gres=gpu:4\n"
                                "NodeName=n2 CPUTot=8 RealMemory=10 Gres=gpu:tpu9:4(S:0-1,3)\n";
        char err[512] = "";

        assert_int_equal(
            slurm_parse_nodes(t, strlen(t), "x", cat, "H100", &g, &n, NULL, err, sizeof(err)), 0);
        assert_int_equal(n, 1);
        assert_int_equal(g[0].count, 2);
        assert_string_equal(g[0].model, "H100-80GB");
        allot_free(g);
        assert_int_equal(
            slurm_parse_nodes(t, strlen(t), "x", cat, "nope", &g, &n, NULL, err, sizeof(err)),
            ALLOT_EINVAL);
        assert_string_equal(err, "--gpu-model nope: not a model of the GPU catalog");
    }
}

static void test_parse_group(void **state)
{
    struct replay_node_group g;
    char err[256];

    (void)state;
    assert_int_equal(replay_parse_group("16xH100-80GB", cat, &g, err, sizeof(err)), 0);
    assert_int_equal(g.count, 16);
    assert_int_equal(g.gpus, 8);
    assert_int_equal(g.cpu_milli, 64000);
    assert_int_equal(g.mem_mib, 8 * 65536);
    assert_int_equal(replay_parse_group("A100:4:32:256", cat, &g, err, sizeof(err)), 0);
    assert_int_equal(g.count, 1);
    assert_string_equal(g.model, "A100-80GB");
    assert_int_equal(g.gpus, 4);
    assert_int_equal(g.cpu_milli, 32000);
    assert_int_equal(g.mem_mib, 256 * 1024);
    assert_int_equal(replay_parse_group("2xV100:8:64:2Ti", cat, &g, err, sizeof(err)), 0);
    assert_int_equal(g.mem_mib, 2 * 1024 * 1024);
    assert_int_equal(replay_parse_group("0xH100", cat, &g, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(replay_parse_group("H100:17", cat, &g, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(replay_parse_group("H100:8:x", cat, &g, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(replay_parse_group("4xTPU", cat, &g, err, sizeof(err)), ALLOT_EINVAL);
    assert_string_equal(err, "node group \"4xTPU\": no GPU model \"TPU\" in the catalog");
    assert_int_equal(replay_parse_group("", cat, &g, err, sizeof(err)), ALLOT_EINVAL);
    assert_int_equal(replay_parse_group("99999999999xH100", cat, &g, err, sizeof(err)),
                     ALLOT_EINVAL);
}

/* The export on its own nodes: accounts as tenants with usage shares, a
 * replay that finishes every job with --drain. */
static void test_replay_sacct(void **state)
{
    struct replay_trace tr = {0};
    struct replay_node_group *g = NULL;
    struct replay_setup s;
    struct replay_result r;
    struct replay_opts ro = {.checkpoint_s = 1800, .seed = 1, .drain = true, .check = true};
    int n = 0;
    char err[512] = "", desc[256];
    double sum = 0;

    (void)state;
    assert_int_equal(slurm_read_sacct(DATA "sacct_small.txt", 0, &tr, NULL, err, sizeof(err)), 0);
    assert_int_equal(
        slurm_read_nodes(DATA "scontrol_nodes.txt", cat, NULL, &g, &n, NULL, err, sizeof(err)), 0);
    {
        struct replay_trace_opts o = {.groups = g, .n_groups = n, .from = -1, .to = -1};

        assert_int_equal(replay_setup_trace(&s, &tr, &o, err, sizeof(err)), 0);
    }
    assert_int_equal(s.n_nodes, 3);
    assert_int_equal(replay_setup_gpus(&s), 20);
    assert_int_equal(s.model, -1); /* two models */
    assert_int_equal(s.node_gpus, 8);
    assert_string_equal(replay_setup_describe(&s, desc, sizeof(desc)),
                        "2 x 8 A100-80GB + 1 x 4 V100-32GB");
    assert_int_equal(s.n_tenants, 3);
    assert_int_equal(s.n_jobs, 11); /* the CPU job is left out */
    assert_int_equal(s.zero, 1);
    assert_int_equal(s.rounded_up, 0);
    for (int t = 0; t < s.n_tenants; t++)
        sum += (double)s.tenants[t].nominal_milli / ALLOT_MILLI;
    assert_true(sum <= 20.0 && sum > 19.99);
    /* vision asked 2x2h + 4x1.5h + 8x25m + 8x2h of GPU-time */
    assert_string_equal(s.tenants[0].path, "vision");
    assert_int_equal(replay_run(&s, REPLAY_FIFO, &ro, &r, err, sizeof(err)), 0);
    assert_int_equal(r.all.finished, 11);
    assert_int_equal(r.all.unfinished, 0);
    assert_true(r.all.utilization > 0 && r.all.utilization <= 1);
    replay_result_free(&r);
    /* allot on the same nodes, invariants checked after every event: the
     * 16-GPU job of nlp (nominal 11) waits for the others' lending hold to
     * decay, then runs */
    assert_int_equal(replay_run(&s, REPLAY_ALLOT, &ro, &r, err, sizeof(err)), 0);
    assert_int_equal(r.all.finished, 11);
    assert_true(r.all.p99_queue > 7200);
    replay_result_free(&r);
    replay_setup_free(&s);

    /* equal shares and a quota change */
    {
        struct replay_quota_change qc = {.tenant = "nlp", .gpu_milli = 2000};
        struct replay_trace_opts o = {.groups = g,
                                      .n_groups = n,
                                      .from = -1,
                                      .to = -1,
                                      .equal_shares = true,
                                      .quota = &qc,
                                      .n_quota = 1};

        assert_int_equal(replay_setup_trace(&s, &tr, &o, err, sizeof(err)), 0);
        assert_int_equal(s.tenants[0].nominal_milli, 6666);
        assert_string_equal(s.tenants[1].path, "nlp");
        assert_int_equal(s.tenants[1].nominal_milli, 2000);
        replay_setup_free(&s);
        qc.tenant = "nobody";
        assert_int_equal(replay_setup_trace(&s, &tr, &o, err, sizeof(err)), ALLOT_EINVAL);
        assert_string_equal(err, "--quota: no tenant \"nobody\"");
    }
    /* without nodes: nodes of the default shape sized to the mean demand */
    {
        struct replay_trace_opts o = {.from = -1, .to = -1};

        assert_int_equal(replay_setup_trace(&s, &tr, &o, err, sizeof(err)), 0);
        assert_int_equal(s.n_groups, 0);
        assert_string_equal(s.shape.model, "V100-32GB");
        assert_true(s.load > 0.8 && s.load <= 1.0);
        replay_setup_free(&s);
    }
    allot_free(g);
    replay_trace_free(&tr);
}

/* A trace job's gang as submitted (allot plan): tasks of task_gpus when
 * they divide the job and fit a node, else cut by the node size. */
static void test_trace_gangs(void **state)
{
    static const int task_gpus[] = {2, 3, 8, 16, 0};
    static const int want_tasks[] = {4, 1, 1, 1, 1}, want_gpus[] = {2, 8, 8, 8, 8};
    struct replay_trace tr = {0};
    struct replay_node_group g;
    struct replay_setup s;
    char err[256];

    (void)state;
    assert_int_equal(replay_parse_group("2xA100", cat, &g, err, sizeof(err)), 0);
    assert_int_equal(replay_trace_intern(&tr, false, "t"), 0);
    for (int i = 0; i < 5; i++) {
        struct replay_trace_job j = {
            .submit = 1000 + i, .duration = 60, .gpus = 8, .task_gpus = task_gpus[i], .prio = -1};

        assert_int_equal(replay_trace_add(&tr, &j), 0);
    }
    {
        struct replay_trace_opts o = {.groups = &g, .n_groups = 1, .from = -1, .to = -1};

        assert_int_equal(replay_setup_trace(&s, &tr, &o, err, sizeof(err)), 0);
    }
    for (int i = 0; i < 5; i++) {
        assert_int_equal(s.jobs[i].n_tasks, want_tasks[i]);
        assert_int_equal(s.jobs[i].gpus, want_gpus[i]);
    }
    replay_setup_free(&s);
    replay_trace_free(&tr);
}

/* Failing the Nth allocation for every N gives ENOMEM and leaks nothing. */
static void test_alloc_failures(void **state)
{
    (void)state;
    for (unsigned long k = 1;; k++) {
        struct replay_trace tr = {0};
        char err[256] = "";
        int rc;

        allot_alloc_fail_at(k, false);
        rc = slurm_read_sacct(DATA "sacct_small.txt", 0, &tr, NULL, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        replay_trace_free(&tr);
        if (rc == 0)
            break;
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_true(k < 200);
    }
    for (unsigned long k = 1;; k++) {
        struct replay_node_group *g = NULL;
        int n = 0;
        char err[256] = "";
        int rc;

        allot_alloc_fail_at(k, false);
        rc = slurm_read_nodes(DATA "scontrol_nodes.txt", cat, NULL, &g, &n, NULL, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        allot_free(g);
        if (rc == 0)
            break;
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_true(k < 100);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sacct_good),
        cmocka_unit_test(test_sacct_bad),
        cmocka_unit_test(test_tz),
        cmocka_unit_test(test_nodes_good),
        cmocka_unit_test(test_nodes_bad),
        cmocka_unit_test(test_parse_group),
        cmocka_unit_test(test_replay_sacct),
        cmocka_unit_test(test_trace_gangs),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, setup_cat, free_cat);
}
