/*
 * Unit tests for src/sim/demo.c, `allot-sim demo`: its command line goes
 * through the same option table as fill and replay (--name=value, each
 * option once, strict numbers, errors naming the option and the value),
 * and a small run prints one row per policy.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"
#include "fill_cli.h"
#include "replay.h"

/* Runs cmd (a command's main) on args (NULL-terminated) with stdout and stderr
 * captured into out and err (size bytes each). Returns its status. */
static int run_cmd(int (*cmd)(int, char **), const char *const *args, char *out, char *err,
                   size_t size)
{
    char opath[] = "/tmp/allot-test-demo-XXXXXX", epath[] = "/tmp/allot-test-demo-XXXXXX";
    int ofd = mkstemp(opath), efd = mkstemp(epath), so, se, rc, argc = 0;
    char *argv[16];
    FILE *f;
    size_t n;

    assert_true(ofd >= 0 && efd >= 0);
    for (; args[argc]; argc++)
        argv[argc] = (char *)args[argc];
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    so = dup(STDOUT_FILENO);
    se = dup(STDERR_FILENO);
    assert_true(dup2(ofd, STDOUT_FILENO) >= 0 && dup2(efd, STDERR_FILENO) >= 0);
    rc = cmd(argc, argv);
    fflush(stdout);
    fflush(stderr);
    assert_true(dup2(so, STDOUT_FILENO) >= 0 && dup2(se, STDERR_FILENO) >= 0);
    close(so);
    close(se);
    close(ofd);
    close(efd);
    f = fopen(opath, "r");
    n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
    f = fopen(epath, "r");
    n = fread(err, 1, size - 1, f);
    err[n] = '\0';
    fclose(f);
    unlink(opath);
    unlink(epath);
    return rc;
}

static int run(const char *const *args, char *out, char *err, size_t size)
{
    return run_cmd(sim_demo_main, args, out, err, size);
}

static char out[65536], err[65536];

/* --name=value works as in fill and replay (it was "bad argument"). */
static void test_equals_form(void **state)
{
    static const char *const a[] = {"demo", "--tasks=50", "--nodes=5", "--seed=3", NULL};

    (void)state;
    assert_int_equal(run(a, out, err, sizeof(out)), 0);
    assert_non_null(strstr(out, "allot demo: 50 synthetic tasks on 5 synthetic nodes (seed 3)"));
    assert_non_null(strstr(out, "\nallot "));
    assert_string_equal(err, "");
}

/* Numbers are strict and errors name the option and the value. */
static void test_strict_numbers(void **state)
{
    static const char *const blank[] = {"demo", "--nodes", " 5", NULL};
    static const char *const plus[] = {"demo", "--tasks", "+50", NULL};
    static const char *const zero[] = {"demo", "--tasks=0", NULL};
    static const char *const big[] = {"demo", "--nodes", "1000001", NULL};
    static const char *const junk[] = {"demo", "--seed", "7x", NULL};

    (void)state;
    assert_int_equal(run(blank, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "allot-sim demo: --nodes \" 5\": want an integer 1..1000000"));
    assert_int_equal(run(plus, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "--tasks \"+50\": want an integer 1..1000000"));
    assert_int_equal(run(zero, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "--tasks \"0\""));
    assert_int_equal(run(big, out, err, sizeof(out)), 2);
    assert_int_equal(run(junk, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "--seed \"7x\": want an integer 0.."));
}

/* Unknown, repeated, valueless and conflicting options are named. */
static void test_bad_options(void **state)
{
    static const char *const unknown[] = {"demo", "--node", "5", NULL};
    static const char *const twice[] = {"demo", "--seed", "1", "--seed", "2", NULL};
    static const char *const novalue[] = {"demo", "--tasks", NULL};
    static const char *const both[] = {"demo", "--nodes", "5", "--cluster", "x.json", NULL};
    static const char *const stray[] = {"demo", "5", NULL};
    static const char *const help[] = {"demo", "--help", NULL};

    (void)state;
    assert_int_equal(run(unknown, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "unknown option \"--node\""));
    assert_int_equal(run(twice, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "option \"--seed\" given twice"));
    assert_int_equal(run(novalue, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "option \"--tasks\" needs a value"));
    assert_int_equal(run(both, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "--nodes and --cluster exclude each other"));
    assert_int_equal(run(stray, out, err, sizeof(out)), 2);
    assert_non_null(strstr(err, "unexpected argument \"5\""));
    assert_int_equal(run(help, out, err, sizeof(out)), 0);
    assert_non_null(strstr(out, "--cluster FILE"));
}

/* A cluster description replaces the synthetic nodes; a missing file is
 * an error naming it. */
static void test_cluster_file(void **state)
{
    static const char *const ok[] = {
        "demo", "--cluster=" ALLOT_SOURCE_DIR "/etc/cluster.example.json", "--tasks", "40", NULL};
    static const char *const missing[] = {"demo", "--cluster", "/nonexistent.json", NULL};

    (void)state;
    assert_int_equal(run(ok, out, err, sizeof(out)), 0);
    assert_non_null(strstr(out, "nodes from " ALLOT_SOURCE_DIR "/etc/cluster.example.json"));
    assert_int_equal(run(missing, out, err, sizeof(out)), 1);
    assert_non_null(strstr(err, "allot-sim demo: /nonexistent.json: No such file or directory"));
}

/* Every docs/X.md that a command's --help cites exists (they cited a
 * docs/BENCHMARKS.md that was never in the repository). */
static void test_help_cites_real_docs(void **state)
{
    static const char *const demo[] = {"demo", "--help", NULL};
    static const char *const fill[] = {"fill", "--help", NULL};
    static const char *const replay[] = {"replay", "--help", NULL};
    static const struct {
        int (*cmd)(int, char **);
        const char *const *args;
    } cmds[] = {{sim_demo_main, demo}, {sim_fill_main, fill}, {sim_replay_main, replay}};

    (void)state;
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        assert_int_equal(run_cmd(cmds[i].cmd, cmds[i].args, out, err, sizeof(out)), 0);
        for (const char *p = strstr(out, "docs/"); p; p = strstr(p + 1, "docs/")) {
            char path[512];
            size_t n =
                strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./");

            while (n > 0 && p[n - 1] == '.') /* a sentence's full stop */
                n--;
            snprintf(path, sizeof(path), "%s/%.*s", ALLOT_SOURCE_DIR, (int)n, p);
            if (access(path, R_OK) != 0)
                fail_msg("%s --help cites %.*s, which does not exist", cmds[i].args[0], (int)n, p);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equals_form),          cmocka_unit_test(test_strict_numbers),
        cmocka_unit_test(test_bad_options),          cmocka_unit_test(test_cluster_file),
        cmocka_unit_test(test_help_cites_real_docs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
