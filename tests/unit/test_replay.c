/*
 * Unit tests for src/sim/replay.c and replay_cli.c, the multi-tenant replay:
 * setups (drops, gang shapes, the window, --load scaling, tenants files,
 * the synthetic workload), figures worked out by hand on a three-job trace
 * (JCT, queueing, utilisation, in-quota wait, Jain, preemption and lost
 * work with and without checkpoints), the regression trace whose decision
 * log under every policy must match tests/data/philly/replay_expected.log
 * byte for byte with the queue's invariants checked after every event, and
 * the command line.
 *
 * When the core's decisions change on purpose, regenerate the expected log:
 *   build/allot-sim replay --jobs tests/data/philly/replay_jobs.csv \
 *     --vcs tests/data/philly/replay_vcs.csv --from 2017-10-01 --to 2017-10-02 \
 *     --check --decision-log tests/data/philly/replay_expected.log
 * and review the difference. Never reads the shared real traces.
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
#include <unistd.h>

#include <jansson.h>

#include "allot/common.h"
#include "replay.h"

#define DATA ALLOT_SOURCE_DIR "/tests/data/philly/"
#define T0   1506816000 /* 2017-10-01 00:00:00 */

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-6 * (fabs(b) > 1 ? fabs(b) : 1);
}

#define assert_near(a, b)                                                                          \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!near(a_, b_))                                                                         \
            fail_msg("%s = %.9g, want %.9g", #a, a_, b_);                                          \
    } while (0)

static void test_setup_philly(void **state)
{
    struct replay_setup s;
    char err[512] = "";

    (void)state;
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL, T0, T0 + 86400,
                            0, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(s.read_jobs, 33);
    assert_int_equal(s.n_jobs, 29);
    assert_int_equal(s.other_vc, 1);
    assert_int_equal(s.zero, 2);
    assert_int_equal(s.outside, 1);
    assert_int_equal(s.rounded_up, 1); /* 12 GPUs -> 2 x 8 */
    assert_int_equal(s.n_nodes, 4);
    assert_int_equal(s.n_tenants, 3);
    assert_string_equal(s.tenants[0].path, "alpha");
    assert_int_equal(s.tenants[0].nominal_milli, 16000);
    assert_int_equal(s.tenants[2].nominal_milli, 8000);
    assert_int_equal(s.jobs[0].submit, T0);
    assert_int_equal(s.jobs[8].n_tasks, 2); /* 16 GPUs */
    assert_int_equal(s.jobs[8].gpus, 8);
    assert_int_equal(s.jobs[11].n_tasks, 2); /* 12 GPUs, rounded up */
    assert_int_equal(s.jobs[11].line, 16);
    assert_int_equal(s.jobs[4].n_tasks, 1);
    assert_int_equal(s.jobs[4].gpus, 1);
    for (size_t i = 0; i < s.n_jobs; i++)
        if (s.jobs[i].line == 27) {
            assert_int_equal(s.jobs[i].n_tasks, 3); /* 24 GPUs */
            assert_int_equal(s.jobs[i].gpus, 8);
        }
    replay_setup_free(&s);
    replay_setup_free(&s);
    replay_setup_free(NULL);
}

static void test_setup_window_and_load(void **state)
{
    struct replay_setup s;
    char err[512] = "";
    double offered;

    (void)state;
    /* default window: first arrival to one second past the last */
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL, -1, -1, 0, err,
                            sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(s.from, T0);
    assert_int_equal(s.to, T0 + 86400 + 1);
    assert_int_equal(s.n_jobs, 30);
    assert_int_equal(s.outside, 0);
    {
        /* the default window spans the kept jobs: a job of another VC, or
         * of 0 GPUs, beyond them is counted by its kind, not as outside */
        char path[] = "/tmp/allot-test-replay-XXXXXX";
        int fd = mkstemp(path);
        struct replay_setup t;
        const char *text = "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           "2017-10-01 00:00:00,3600.0,8,28800.0,alpha\n"
                           "2017-10-01 00:10:00,600.0,1,600.0,zzz\n"
                           "2017-10-01 00:20:00,600.0,0,0.0,alpha\n";

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        if (replay_setup_philly(&t, path, DATA "replay_vcs.csv", NULL, -1, -1, 0, err,
                                sizeof(err)) != 0)
            fail_msg("%s", err);
        assert_int_equal(t.n_jobs, 1);
        assert_int_equal(t.other_vc, 1);
        assert_int_equal(t.zero, 1);
        assert_int_equal(t.outside, 0);
        replay_setup_free(&t);
        unlink(path);
    }
    offered = s.offered_gpu_s;
    assert_near(s.load, offered / (32.0 * 86401));
    replay_setup_free(&s);
    /* --load 1.5: 32 GPUs x load / 1.5, nodes rounded per VC, at least 1 */
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL, -1, -1, 1.5,
                            err, sizeof(err)) != 0)
        fail_msg("%s", err);
    {
        double f = offered / (1.5 * 86401) / 32.0;
        int a = (int)llround(2 * f), b = (int)llround(f);

        a = a < 1 ? 1 : a;
        b = b < 1 ? 1 : b;
        assert_int_equal(s.tenants[0].nodes, a);
        assert_int_equal(s.tenants[1].nodes, b);
        assert_int_equal(s.n_nodes, a + 2 * b);
        assert_int_equal(s.tenants[0].nominal_milli, a * 8000);
        assert_near(s.load, offered / (8.0 * s.n_nodes * 86401));
    }
    replay_setup_free(&s);
    /* an empty window */
    assert_int_equal(replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL,
                                         T0 + 200000, -1, 0, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "in the window"));
    assert_null(s.jobs);
    /* a broken trace reports its line */
    assert_int_equal(replay_setup_philly(&s, DATA "bad/jobs_bad_date.csv", DATA "replay_vcs.csv",
                                         NULL, -1, -1, 0, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "jobs_bad_date.csv:2: timestamp"));
}

/* The window is bounded: a --to far past the trace is clamped to the last
 * arrival plus the jobs' total run time, and a window of more than
 * REPLAY_MAX_DAYS is an error. (--to 9999-12-31 on a three-day trace
 * allocated 4.2 GB of hourly bins.) */
static void test_setup_window_bound(void **state)
{
    struct replay_setup s;
    char err[512] = "";
    int64_t far, work = 0, last = 0;

    (void)state;
    assert_int_equal(philly_parse_time("9999-12-31", &far), 0);
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL, T0, far, 0,
                            err, sizeof(err)) != 0)
        fail_msg("%s", err);
    for (size_t i = 0; i < s.n_jobs; i++) {
        work += s.jobs[i].duration;
        last = s.jobs[i].submit > last ? s.jobs[i].submit : last;
    }
    assert_int_equal(s.to_asked, far);
    assert_int_equal(s.to, last + work + 1);
    assert_int_equal(s.n_jobs, 30);
    replay_setup_free(&s);
    /* a window that ends before that bound is kept as asked */
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL, T0,
                            T0 + 2 * 86400, 0, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(s.to, T0 + 2 * 86400);
    assert_int_equal(s.to_asked, -1);
    replay_setup_free(&s);
    /* from 1970 to the trace: 17,000 days */
    assert_int_equal(replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL, 0,
                                         -1, 0, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_non_null(strstr(err, "days; at most 3660 are supported"));
    assert_null(s.jobs);
}

static void test_setup_tenants_file(void **state)
{
    struct replay_setup s;
    char err[512] = "";

    (void)state;
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", NULL, DATA "replay_tenants.yaml", T0,
                            T0 + 86400, 0, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(s.n_tenants, 3); /* the leaves */
    assert_string_equal(s.tenants[0].path, "lab/alpha");
    assert_string_equal(s.tenants[2].path, "gamma");
    assert_int_equal(s.n_nodes, 4);
    assert_int_equal(s.n_jobs, 29);
    assert_int_equal(s.other_vc, 1);
    replay_setup_free(&s);
    /* --load scales the node count and every finite quota alike */
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", NULL, DATA "replay_tenants.yaml", T0,
                            T0 + 86400, 0.1, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_true(s.n_nodes > 4);
    assert_near(s.quota_scale, s.n_nodes / 4.0);
    assert_int_equal(s.tenants[0].nominal_milli, llround(16000 * s.quota_scale));
    replay_setup_free(&s);
}

/* Runs `policy` on the three-job trace (10,000 s window) into *r, allot
 * without its lending hold when no_hold, with queue options qo when not
 * NULL. */
static void run_tiny_opts(int policy, int64_t ckpt, bool no_hold, const struct allot_queue_opts *qo,
                          struct replay_result *r, struct replay_setup *s)
{
    struct replay_opts o = {.checkpoint_s = ckpt,
                            .seed = 1,
                            .fair_cap = REPLAY_FAIR_CAP,
                            .check = true,
                            .no_lending_hold = no_hold,
                            .queue = qo};
    char err[512] = "";

    if (replay_setup_philly(s, DATA "replay_tiny_jobs.csv", DATA "replay_tiny_vcs.csv", NULL, T0,
                            T0 + 10000, 0, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    if (replay_run(s, policy, &o, r, err, sizeof(err)) != 0)
        fail_msg("%s", err);
}

static void run_tiny(int policy, int64_t ckpt, struct replay_result *r, struct replay_setup *s)
{
    run_tiny_opts(policy, ckpt, false, NULL, r, s);
}

/*
 * By hand: VCs a and b of 8 GPUs each; b submits two 8-GPU jobs of 4000 s
 * at 0, a one of 1000 s at 1000 (inside a's nominal).
 */
static void test_tiny_static(void **state)
{
    struct replay_setup s;
    struct replay_result r;

    (void)state;
    run_tiny(REPLAY_STATIC, 1800, &r, &s);
    /* b's second job waits for its first (no borrowing); a runs at once */
    assert_int_equal(r.all.finished, 3);
    assert_near(r.all.avg_jct, (4000 + 8000 + 1000) / 3.0);
    assert_near(r.all.p50_jct, 4000);
    assert_near(r.all.p99_jct, 8000);
    assert_near(r.all.avg_queue, 4000 / 3.0);
    assert_near(r.all.utilization, (8.0 * 4000 * 2 + 8.0 * 1000) / (16.0 * 10000));
    assert_int_equal(r.all.in_quota_jobs, 2);
    assert_near(r.all.in_quota_wait_p99, 0);
    assert_near(r.all.jain, 1.0);
    assert_int_equal(r.all.preemptions, 0);
    assert_near(r.tenant[1].utilization, 8.0 * 8000 / (8.0 * 10000));
    assert_near(r.tenant[0].avg_jct, 1000);
    assert_int_equal(r.n_bins, 3);
    assert_near(r.util[0], 16.0 * 1000 / (16.0 * 3600) + 8.0 * 2600 / (16.0 * 3600));
    /* b2's 8 GPUs wait 0..4000 while b holds its nominal (all beyond it);
     * a's node is idle 0..1000 and 2000..4000, 3000 of those 4000 s */
    assert_near(r.tenant[1].wait_gpu_hours, 8.0 * 4000 / 3600);
    assert_near(r.tenant[1].wait_over_share, 1.0);
    assert_near(r.tenant[1].wait_idle_share, 0.75);
    assert_near(r.tenant[1].wait_lent_share, 0.0);
    assert_near(r.tenant[0].wait_gpu_hours, 0);
    assert_true(isnan(r.tenant[0].wait_over_share));
    assert_near(r.all.wait_gpu_hours, 8.0 * 4000 / 3600);
    assert_near(r.all.wait_idle_share, 0.75);
    replay_result_free(&r);
    replay_setup_free(&s);
}

static void test_tiny_fifo(void **state)
{
    struct replay_setup s;
    struct replay_result r;

    (void)state;
    run_tiny(REPLAY_FIFO, 1800, &r, &s);
    /* no quotas: b takes both nodes, a waits 3000 s though inside its nominal */
    assert_near(r.all.avg_jct, 4000);
    assert_near(r.all.avg_queue, 1000);
    assert_near(r.all.in_quota_wait_p99, 3000);
    assert_near(r.tenant[0].in_quota_wait_p99, 3000);
    /* contention at 1200..3600 (5 samples): a has 0 of 8, b 16 of 8: 2/(2 x 4) */
    assert_int_equal(r.contention_samples, 5);
    assert_near(r.all.jain, 0.5);
    assert_near(r.tenant[1].share_ratio, 2.0);
    assert_near(r.tenant[0].share_ratio, 0.0);
    /* a's 8 GPUs wait 1000..4000 inside its unused nominal, while b holds
     * 8 GPUs beyond its own: all of that wait was lent capacity */
    assert_near(r.tenant[0].wait_gpu_hours, 8.0 * 3000 / 3600);
    assert_near(r.tenant[0].wait_over_share, 0.0);
    assert_near(r.tenant[0].wait_idle_share, 0.0);
    assert_near(r.tenant[0].wait_lent_share, 1.0);
    assert_near(r.tenant[1].wait_gpu_hours, 0);
    assert_near(r.all.wait_lent_share, 1.0);
    replay_result_free(&r);
    replay_setup_free(&s);
}

static void test_tiny_allot(void **state)
{
    struct replay_setup s;
    struct replay_result r;
    struct allot_queue_opts qo;

    (void)state;
    /* a reclaims b's borrowed node at 1000 (past the 600 s minimum): b2
     * stops after the 30 s grace, losing all 1030 s (no checkpoint yet), and
     * a starts at 1030. When a is done at 2030 its node stays held for it
     * (the lending hold: a just used 8 GPUs). At 3600 b1 has had 8 GPU-hours
     * of service, the LAS threshold inside a tenant, and b2 (2.3 GPU-hours)
     * preempts it: b1 stops at 3630 keeping its 3600 s checkpoint (30 s
     * lost), b2 runs 3630..7630, b1 its last 400 s 7630..8030 */
    run_tiny(REPLAY_ALLOT, 1800, &r, &s);
    assert_int_equal(r.all.finished, 3);
    assert_int_equal(r.all.preemptions, 2);
    assert_near(r.all.lost_gpu_hours, 8.0 * (1030 + 30) / 3600);
    assert_near(r.all.avg_jct, (8030 + 7630 + 1030) / 3.0);
    assert_near(r.all.avg_queue, (4000 + 2600 + 30) / 3.0);
    assert_near(r.all.in_quota_wait_p99, 30);
    assert_int_equal(r.tenant[1].preemptions, 2);
    replay_result_free(&r);
    replay_setup_free(&s);
    /* with a checkpoint every 600 s b2 keeps 600 s and redoes 430 (3400 s
     * left: 3630..7030); b1 then runs 7030..7430 */
    run_tiny(REPLAY_ALLOT, 600, &r, &s);
    assert_near(r.all.lost_gpu_hours, 8.0 * (430 + 30) / 3600);
    assert_near(r.all.avg_jct, (7430 + 7030 + 1030) / 3.0);
    replay_result_free(&r);
    replay_setup_free(&s);
    /* without the lending hold (allotd's default) b2 borrows a's node as
     * soon as a is done: 2030..6030, while b1 runs to its end at 4000 */
    run_tiny_opts(REPLAY_ALLOT, 1800, true, NULL, &r, &s);
    assert_int_equal(r.all.preemptions, 1);
    assert_near(r.all.lost_gpu_hours, 8.0 * 1030 / 3600);
    assert_near(r.all.avg_jct, (4000 + 6030 + 1030) / 3.0);
    replay_result_free(&r);
    replay_setup_free(&s);
    /* the same from explicit queue options (allot plan's, from allotd):
     * replay_opts.queue, not the tuned table with its hold */
    allot_queue_opts_tuned(&qo);
    qo.placement = "bestfit";
    qo.fair_cap = REPLAY_FAIR_CAP;
    qo.hold_half_life_s = 0;
    run_tiny_opts(REPLAY_ALLOT, 1800, false, &qo, &r, &s);
    assert_int_equal(r.all.preemptions, 1);
    assert_near(r.all.avg_jct, (4000 + 6030 + 1030) / 3.0);
    replay_result_free(&r);
    replay_setup_free(&s);
}

/* Every policy's decision log equals the committed one, byte for byte. */
static void test_decision_log(void **state)
{
    struct replay_setup s;
    struct replay_opts o = {
        .checkpoint_s = 1800, .seed = 1, .fair_cap = REPLAY_FAIR_CAP, .check = true};
    char err[512] = "", *got = NULL, *want;
    size_t got_len = 0, want_len;
    FILE *f;

    (void)state;
    if (replay_setup_philly(&s, DATA "replay_jobs.csv", DATA "replay_vcs.csv", NULL, T0, T0 + 86400,
                            0, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    o.log = open_memstream(&got, &got_len);
    assert_non_null(o.log);
    for (int p = 0; p < REPLAY_POLICIES; p++) {
        struct replay_result r;

        if (replay_run(&s, p, &o, &r, err, sizeof(err)) != 0)
            fail_msg("%s", err);
        assert_int_equal(r.killed, 0);
        replay_result_free(&r);
    }
    fclose(o.log);
    f = fopen(DATA "replay_expected.log", "rb");
    assert_non_null(f);
    want = calloc(1, 1 << 20);
    assert_non_null(want);
    want_len = fread(want, 1, (1 << 20) - 1, f);
    fclose(f);
    if (got_len != want_len || memcmp(got, want, got_len) != 0) {
        size_t i = 0, line = 1;

        while (i < got_len && i < want_len && got[i] == want[i])
            line += got[i++] == '\n';
        while (i > 0 && got[i - 1] != '\n')
            i--;
        fail_msg("decision log differs from replay_expected.log at line %zu:\n got: %.*s\nwant: "
                 "%.*s",
                 line, (int)strcspn(got + i, "\n"), got + i,
                 (int)(i < want_len ? strcspn(want + i, "\n") : 0), want + i);
    }
    free(got);
    free(want);
    replay_setup_free(&s);
}

/* The synthetic workload on the example tenants file runs cleanly. */
static void test_synthetic(void **state)
{
    struct replay_setup s;
    struct replay_opts o = {
        .checkpoint_s = 1800, .seed = 3, .fair_cap = REPLAY_FAIR_CAP, .check = true};
    struct replay_result a, b;
    char err[512] = "";
    size_t with_class = 0;

    (void)state;
    if (replay_setup_synthetic(&s, NULL, ALLOT_SOURCE_DIR "/etc/tenants.example.yaml", 1, -1, 0.9,
                               3, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(s.n_tenants, 6);
    assert_int_equal(s.n_nodes, 49); /* 392 GPUs of leaf nominal */
    assert_true(s.n_jobs > 100);
    for (size_t i = 0; i < s.n_jobs; i++)
        with_class += s.jobs[i].prio_class >= 0;
    assert_int_equal(with_class, s.n_jobs); /* the example names all three kinds */
    if (replay_run(&s, REPLAY_ALLOT, &o, &a, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    if (replay_run(&s, REPLAY_ALLOT, &o, &b, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(a.all.finished, b.all.finished);
    assert_near(a.all.avg_jct, b.all.avg_jct);
    assert_true(a.all.utilization > 0.3 && a.all.utilization <= 1.0);
    replay_result_free(&a);
    replay_result_free(&b);
    if (replay_run(&s, REPLAY_STATIC, &o, &a, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(a.all.preemptions, 0);
    replay_result_free(&a);
    replay_setup_free(&s);
    /* VC tenants work too */
    if (replay_setup_synthetic(&s, DATA "replay_vcs.csv", NULL, 2, T0, 0.5, 1, err, sizeof(err)) !=
        0)
        fail_msg("%s", err);
    assert_int_equal(s.from, T0);
    assert_int_equal(s.to, T0 + 2 * 86400);
    replay_setup_free(&s);
}

static int cli(const char *const *args)
{
    char *argv[32];
    int argc = 0;

    for (; args[argc]; argc++)
        argv[argc] = (char *)args[argc];
    argv[argc] = NULL;
    return sim_replay_main(argc, argv);
}

static void test_cli(void **state)
{
    static const char *const help[] = {"replay", "--help", NULL};
    static const char *const none[] = {"replay", NULL};
    static const char *const both[] = {"replay", "--jobs", "x", "--synthetic",
                                       "2",      "--vcs",  "y", NULL};
    static const char *const bad_policy[] = {"replay", "--jobs",   "x",         "--vcs",
                                             "y",      "--policy", "fifo,srtf", NULL};
    static const char *const twice[] = {"replay", "--jobs",   "x",         "--vcs",
                                        "y",      "--policy", "fifo,fifo", NULL};
    static const char *const bad_load[] = {"replay", "--jobs", "x", "--vcs",
                                           "y",      "--load", "0", NULL};
    static const char *const bad_from[] = {"replay", "--jobs", "x",          "--vcs",
                                           "y",      "--from", "2017-13-01", NULL};
    static const char *const order[] = {"replay", "--jobs",     "x",    "--vcs",      "y",
                                        "--from", "2017-10-02", "--to", "2017-10-01", NULL};
    static const char *const bad_cap[] = {"replay", "--jobs",     "x",   "--vcs",
                                          "y",      "--fair-cap", "0.5", NULL};
    static const char *const nan_cap[] = {"replay", "--jobs",     "x",   "--vcs",
                                          "y",      "--fair-cap", "nan", NULL};
    static const char *const unknown[] = {"replay", "--jobz", "x", NULL};
    static const char *const missing[] = {"replay", "--jobs", "x", "--vcs", NULL};
    static const char *const no_file[] = {
        "replay", "--jobs", "/nonexistent.csv", "--vcs", DATA "replay_vcs.csv", NULL};
    static const char *const ok[] = {"replay",
                                     "--jobs",
                                     DATA "replay_tiny_jobs.csv",
                                     "--vcs",
                                     DATA "replay_tiny_vcs.csv",
                                     "--policy",
                                     "allot",
                                     "--to",
                                     "2017-10-02",
                                     NULL};

    (void)state;
    assert_int_equal(cli(help), 0);
    assert_int_equal(cli(none), 2);
    assert_int_equal(cli(both), 2);
    assert_int_equal(cli(bad_policy), 2);
    assert_int_equal(cli(twice), 2);
    assert_int_equal(cli(bad_load), 2);
    assert_int_equal(cli(bad_from), 2);
    assert_int_equal(cli(order), 2);
    assert_int_equal(cli(bad_cap), 2);
    assert_int_equal(cli(nan_cap), 2);
    assert_int_equal(cli(unknown), 2);
    assert_int_equal(cli(missing), 2);
    assert_int_equal(cli(no_file), 1);
    assert_int_equal(cli(ok), 0);
}

/* A --to far past the trace runs on to the end of every job, with the
 * plots and the JSON of a bounded window. */
static void test_cli_far_to(void **state)
{
    char dir[] = "/tmp/allot-test-replay-XXXXXX", json[256], svg[256], usvg[256];
    const char *tiny_jobs = DATA "replay_tiny_jobs.csv", *tiny_vcs = DATA "replay_tiny_vcs.csv";

    (void)state;
    assert_non_null(mkdtemp(dir));
    allot_fmt(json, sizeof(json), "%s/r.json", dir);
    allot_fmt(svg, sizeof(svg), "%s/r.svg", dir);
    allot_fmt(usvg, sizeof(usvg), "%s/r-util.svg", dir);
    {
        const char *const a[] = {"replay", "--jobs", tiny_jobs, "--vcs", tiny_vcs,     "--json",
                                 json,     "--plot", svg,       "--to",  "9999-12-31", NULL};
        assert_int_equal(cli(a), 0);
        assert_int_equal(access(json, R_OK), 0);
        assert_int_equal(access(svg, R_OK), 0);
        assert_int_equal(access(usvg, R_OK), 0);
    }
    {
        /* the wait figures in the JSON: under fifo, a's job waits inside
         * a's nominal on GPUs b borrowed (test_tiny_fifo) */
        json_t *root = json_load_file(json, 0, NULL), *p;
        size_t i;
        bool seen = false;

        assert_non_null(root);
        json_array_foreach(json_object_get(root, "policies"), i, p)
        {
            json_t *ta = json_object_get(json_object_get(p, "tenants"), "a");

            if (strcmp(json_string_value(json_object_get(p, "name")), "fifo") != 0)
                continue;
            seen = true;
            assert_near(json_number_value(json_object_get(ta, "wait_gpu_hours")),
                        8.0 * 3000 / 3600);
            assert_near(json_number_value(json_object_get(ta, "wait_over_nominal_share")), 0.0);
            assert_near(json_number_value(json_object_get(ta, "wait_lent_share")), 1.0);
            assert_true(json_is_number(json_object_get(p, "wait_idle_share")));
        }
        assert_true(seen);
        json_decref(root);
    }
    unlink(json);
    unlink(svg);
    unlink(usvg);
    assert_int_equal(rmdir(dir), 0);
}

/* Output paths are checked before the run: a bad --json path stops the
 * command before anything is written (it used to fail after the run), and
 * --plot refuses a path that is not a regular file's (--plot /dev/null
 * wrote /dev/null-util.svg). */
static void test_cli_outputs(void **state)
{
    char dir[] = "/tmp/allot-test-replay-XXXXXX", dlog[256];
    const char *tiny_jobs = DATA "replay_tiny_jobs.csv", *tiny_vcs = DATA "replay_tiny_vcs.csv";

    (void)state;
    assert_non_null(mkdtemp(dir));
    allot_fmt(dlog, sizeof(dlog), "%s/d.log", dir);
    {
        const char *const a[] = {"replay",
                                 "--jobs",
                                 tiny_jobs,
                                 "--vcs",
                                 tiny_vcs,
                                 "--json",
                                 "/nonexistent/r.json",
                                 "--decision-log",
                                 dlog,
                                 NULL};
        assert_int_equal(cli(a), 1);
        assert_int_not_equal(access(dlog, F_OK), 0); /* nothing ran */
    }
    {
        const char *const a[] = {"replay", "--jobs",    tiny_jobs,        "--vcs", tiny_vcs,
                                 "--plot", "/dev/null", "--decision-log", dlog,    NULL};
        assert_int_equal(cli(a), 1);
        assert_int_not_equal(access(dlog, F_OK), 0);
    }
    {
        const char *const a[] = {"replay", "--jobs", tiny_jobs, "--vcs",
                                 tiny_vcs, "--plot", dir,       NULL};
        assert_int_equal(cli(a), 1);
    }
    {
        /* two outputs on one file: the second would overwrite the first */
        char svg[300], util[300];

        allot_fmt(svg, sizeof(svg), "%s/p.svg", dir);
        allot_fmt(util, sizeof(util), "%s/./p-util.svg", dir);
        const char *const a[] = {"replay", "--jobs", tiny_jobs, "--vcs", tiny_vcs,
                                 "--plot", svg,      "--json",  util,    NULL};
        assert_int_equal(cli(a), 1);
        const char *const b[] = {"replay", "--jobs", tiny_jobs,        "--vcs", tiny_vcs,
                                 "--json", dlog,     "--decision-log", dlog,    NULL};
        assert_int_equal(cli(b), 1);
        assert_int_not_equal(access(dlog, F_OK), 0);
        /* --nodes with no group, or an empty one, is refused (it was
         * ignored, and the default node shape used) */
        const char *const d[] = {"replay", "--sacct",
                                 ALLOT_SOURCE_DIR "/tests/data/slurm/sacct_small.txt",
                                 "--nodes=", NULL};
        assert_int_equal(cli(d), 2);
        const char *const e[] = {
            "replay",  "--sacct",        ALLOT_SOURCE_DIR "/tests/data/slurm/sacct_small.txt",
            "--nodes", "8xV100-32GB:8,", NULL};
        assert_int_equal(cli(e), 2);
        /* /dev/null may take both */
        const char *const c[] = {"replay", "--jobs",    tiny_jobs,        "--vcs",     tiny_vcs,
                                 "--json", "/dev/null", "--decision-log", "/dev/null", NULL};
        assert_int_equal(cli(c), 0);
    }
    assert_int_equal(rmdir(dir), 0);
}

/* What replay_print_tables prints for results r[0..n) (caller frees). */
static char *tables_text(struct replay_result *r, int n)
{
    struct replay_setup s = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    replay_print_tables(f, &s, r, n);
    assert_int_equal(fclose(f), 0);
    return buf;
}

/* The table says when the policies' averages cover different jobs: las
 * left 3 jobs unfinished and fifo 1, so a like-for-like comparison needs
 * --drain; with the same count (as after --drain) it says nothing. */
static void test_unfinished_note(void **state)
{
    struct replay_result r[2] = {{.policy = REPLAY_FIFO}, {.policy = REPLAY_LAS}};
    char *buf;

    (void)state;
    r[0].all.unfinished = 1;
    r[1].all.unfinished = 3;
    buf = tables_text(r, 2);
    assert_non_null(strstr(buf, "different numbers of jobs unfinished (fifo 1, las 3)"));
    assert_non_null(strstr(buf, "--drain"));
    free(buf);
    r[1].all.unfinished = 1;
    buf = tables_text(r, 2);
    assert_null(strstr(buf, "unfinished ("));
    assert_non_null(strstr(buf, "avg_jct"));
    free(buf);
}

/* The per-tenant table gives a nominal of 8.5 GPUs as 8.5 (it printed 8). */
static void test_tenant_nominal_decimals(void **state)
{
    struct replay_stats ts[2] = {0};
    struct replay_tenant tn[2] = {{.path = "half", .nominal_milli = 8500},
                                  {.path = "whole", .nominal_milli = 16000}};
    struct replay_setup s = {.tenants = tn, .n_tenants = 2};
    struct replay_result r = {.policy = REPLAY_ALLOT, .tenant = ts};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    (void)state;
    assert_non_null(f);
    replay_print_tables(f, &s, &r, 1);
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(buf, "\nhalf                8.5 "));
    assert_non_null(strstr(buf, "\nwhole                16 "));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_philly),       cmocka_unit_test(test_setup_window_and_load),
        cmocka_unit_test(test_setup_window_bound), cmocka_unit_test(test_setup_tenants_file),
        cmocka_unit_test(test_tiny_static),        cmocka_unit_test(test_tiny_fifo),
        cmocka_unit_test(test_tiny_allot),         cmocka_unit_test(test_decision_log),
        cmocka_unit_test(test_synthetic),          cmocka_unit_test(test_cli),
        cmocka_unit_test(test_cli_far_to),         cmocka_unit_test(test_cli_outputs),
        cmocka_unit_test(test_unfinished_note),    cmocka_unit_test(test_tenant_nominal_decimals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
