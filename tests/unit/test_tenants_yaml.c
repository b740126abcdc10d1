/*
 * Unit tests for src/sim/tenants_yaml.c, the tenants file reader: the
 * committed example (etc/tenants.example.yaml) read value by value, a table
 * of broken documents each checked for its FILE:LINE: message, and an
 * allocation-failure loop. Runs from the source root.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allot/common.h"
#include "tenants_yaml.h"

#define EXAMPLE ALLOT_SOURCE_DIR "/etc/tenants.example.yaml"

#include "catalog_fixture.h"

static void test_example(void **state)
{
    struct sim_tenants_conf c = {0};
    char err[512] = "";
    const struct sim_tenant_conf *t;
    int v100 = allot_catalog_find_model(cat, "V100-32GB"), i;

    (void)state;
    if (sim_tenants_read(EXAMPLE, cat, &c, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(c.n, 7);
    assert_int_equal(c.n_prio, 3);
    assert_string_equal(c.prio[0].name, "inference");
    assert_int_equal(c.prio[0].value, 1000);
    assert_false(c.prio[0].preemptible);
    assert_true(c.prio[2].preemptible);

    i = sim_tenants_conf_find(&c, "research");
    assert_true(i >= 0);
    t = &c.v[i];
    assert_false(t->leaf);
    assert_true(t->weight == 2.0);
    assert_int_equal(t->quota[ALLOT_RES_GPU].nominal, 256000);
    assert_int_equal(t->quota[ALLOT_RES_GPU].borrow_limit, 128000);
    assert_true(t->quota[ALLOT_RES_GPU].lend_limit == ALLOT_UNLIMITED);
    assert_false(t->has_mix);

    t = &c.v[sim_tenants_conf_find(&c, "research/vision")];
    assert_true(t->leaf);
    assert_int_equal(t->quota[ALLOT_RES_GPU].nominal, 128000);
    assert_int_equal(t->quota[ALLOT_RES_GPU].borrow_limit, 64000);
    assert_int_equal(t->quota[ALLOT_RES_CPU].nominal, 1024000);
    assert_int_equal(t->quota[ALLOT_RES_MEM].nominal, 8LL << 20);
    assert_false(t->has_quota[ALLOT_RES_GPU_MEM]);
    assert_true(t->has_mix);
    assert_true(t->mix[MTGEN_TRAINING] == 0.8);
    assert_int_equal(t->line, 36);

    t = &c.v[sim_tenants_conf_find(&c, "research/speech")];
    assert_true(v100 >= 0);
    assert_true(t->has_quota[ALLOT_RES_MODEL0 + v100]);
    assert_int_equal(t->quota[ALLOT_RES_MODEL0 + v100].nominal, 64000);
    assert_true(t->quota[ALLOT_RES_GPU].borrow_limit == ALLOT_UNLIMITED);
    assert_true(t->mix[MTGEN_INFERENCE] == 0.0);

    t = &c.v[sim_tenants_conf_find(&c, "product/search")];
    assert_int_equal(t->isolation, ALLOT_ISO_EXCLUSIVE_GPU);
    assert_int_equal(t->quota[ALLOT_RES_GPU].lend_limit, 0);
    assert_true(t->quota[ALLOT_RES_GPU_MEM].nominal == ALLOT_UNLIMITED);

    t = &c.v[sim_tenants_conf_find(&c, "interns")];
    assert_true(t->weight == 0.5);
    assert_int_equal(t->quota[ALLOT_RES_CPU].nominal, 64000);
    assert_int_equal(sim_tenants_conf_find(&c, "product"), -1);
    sim_tenants_conf_free(&c);
    assert_null(c.v);
    sim_tenants_conf_free(&c);
    sim_tenants_conf_free(NULL);
}

#define HEAD "version: 1\ntenants:\n"

/* A document and the start of the message it must give. */
static const struct bad_case {
    const char *doc;
    const char *msg;
} bad_cases[] = {
    {"", "t.yaml: empty file"},
    {"# only a comment\n", "t.yaml: empty file"},
    {"version: 2\ntenants: [{path: a}]\n", "t.yaml:1: version \"2\" is not supported"},
    {"tenants: [{path: a}]\n", "t.yaml:1: version is missing"},
    {"version: 1\n", "t.yaml:1: tenants is missing"},
    {"version: 1\ntenants: []\n", "t.yaml:2: tenants is empty"},
    {"version: 1\ntenants: {path: a}\n", "t.yaml:2: tenants must be a list"},
    {"- a\n- b\n", "t.yaml:1: the file must be a mapping, not a list"},
    {"version: 1\nfoo: 1\ntenants: [{path: a}]\n", "t.yaml:2: the file: unknown key \"foo\""},
    {"version: 1\nversion: 1\ntenants: [{path: a}]\n",
     "t.yaml:2: the file: key \"version\" given twice"},
    {HEAD "  - a\n", "t.yaml:3: a tenant must be a mapping, not a scalar"},
    {HEAD "  - weight: 2\n", "t.yaml:3: a tenant needs a path"},
    {HEAD "  - path: a//b\n", "t.yaml:3: path \"a//b\": want names"},
    {HEAD "  - path: /a\n", "t.yaml:3: path \"/a\": want names"},
    {HEAD "  - path: a b\n", "t.yaml:3: path \"a b\": want names"},
    {HEAD "  - path:\n", "t.yaml:3: path is empty"},
    {HEAD "  - {path: a}\n  - {path: b}\n  - {path: a}\n",
     "t.yaml:5: tenant \"a\" listed twice (first on line 3)"},
    {HEAD "  - {path: a, weight: 0}\n", "t.yaml:3: weight \"0\": want a number > 0"},
    {HEAD "  - {path: a, weight: -1}\n", "t.yaml:3: weight \"-1\": want a number > 0"},
    {HEAD "  - {path: a, isolation: private}\n", "t.yaml:3: isolation \"private\": want shared"},
    {HEAD "  - {path: a, colour: red}\n", "t.yaml:3: a tenant: unknown key \"colour\""},
    {HEAD "  - path: a\n    quotas: {gpu: -1}\n", "t.yaml:4: gpu \"-1\": want a number of GPUs"},
    {HEAD "  - path: a\n    quotas: {gpu: 1.2345}\n", "t.yaml:4: gpu \"1.2345\": want a number"},
    {HEAD "  - path: a\n    quotas: {gpu: 1e3}\n", "t.yaml:4: gpu \"1e3\": want a number"},
    {HEAD "  - path: a\n    quotas: {memory: 1.5Gi}\n", "t.yaml:4: memory \"1.5Gi\": want MiB"},
    {HEAD "  - path: a\n    quotas: {memory: 4GB}\n", "t.yaml:4: memory \"4GB\": want MiB"},
    {HEAD "  - path: a\n    quotas: {cpu: 10x}\n", "t.yaml:4: cpu \"10x\": want cores"},
    {HEAD "  - path: a\n    quotas: {cpu: 1.5m}\n", "t.yaml:4: cpu \"1.5m\": want cores"},
    {HEAD "  - path: a\n    quotas: {disk: 1}\n", "t.yaml:4: quotas: unknown key \"disk\""},
    {HEAD "  - path: a\n    quotas:\n      gpu: {borrow_limit: 3}\n",
     "t.yaml:3: gpu: nominal is missing (only a tenant with tenants below it may leave it out"},
    {HEAD "  - {path: a/b, quotas: {gpu: 1}}\n  - {path: a/b/c, quotas: {gpu: {lend_limit: 0}}}\n",
     "t.yaml:4: gpu: nominal is missing"},
    {HEAD "  - path: a\n    quotas:\n      gpu: {nominal: 3, lend: 1}\n",
     "t.yaml:5: gpu: unknown key \"lend\""},
    {HEAD "  - path: a\n    quotas:\n      gpu: {nominal: 3, borrow_limit: lots}\n",
     "t.yaml:5: borrow_limit \"lots\": want a number"},
    {HEAD "  - path: a\n    quotas: {gpu:Foo: 1}\n",
     "t.yaml:4: quotas: unknown GPU model \"Foo\" in \"gpu:Foo\""},
    {HEAD "  - path: a\n    quotas: {gpu:V100-32GB: 1, gpu:V100: 2}\n",
     "t.yaml:4: quotas: \"gpu:V100\" names the same model as an earlier key"},
    {HEAD "  - path: a\n    quotas: {gpu:V100: 1, gpu:V100: 2}\n",
     "t.yaml:4: quotas: key \"gpu:V100\" given twice"},
    {HEAD "  - path: a\n    quotas: {gpu: [1, 2]}\n",
     "t.yaml:4: gpu must be a mapping, not a list"},
    {HEAD "  - {path: org, quotas: {gpu: 8}}\n  - {path: org/a, quotas: {gpu: 6}}\n"
          "  - {path: org/b/c, quotas: {gpu: 3}}\n  - {path: other, quotas: {gpu: 100}}\n",
     "t.yaml:3: the gpu nominal quotas of the tenants below \"org\" add up to 9.000 GPUs, more "
     "than its own 8.000 GPUs"},
    {HEAD "  - path: a\n    synthetic: {training: 0.5}\n",
     "t.yaml:4: synthetic: the shares add up to 0.500, not 1"},
    {HEAD "  - path: a\n    synthetic: {training: 1.5}\n",
     "t.yaml:4: training \"1.5\": want a share 0..1"},
    {HEAD "  - path: a\n    synthetic: {serving: 1}\n",
     "t.yaml:4: synthetic: unknown key \"serving\""},
    {HEAD "  - &t {path: a}\n  - *t\n",
     "t.yaml:3: aliases (*name) are not supported (the anchor is on line 3)"},
    {"version: !!int 1\ntenants: [{path: a}]\n", "t.yaml:1: version: tags are not supported"},
    /* a quoted or !!str-tagged number is a string where a number is expected */
    {HEAD "  - {path: a, weight: \"2\"}\n",
     "t.yaml:3: weight \"2\" is quoted, so a string: write it without quotes"},
    {HEAD "  - {path: a, weight: '2'}\n", "t.yaml:3: weight \"2\" is quoted"},
    {HEAD "  - {path: a, weight: !!str 2}\n",
     "t.yaml:3: weight \"2\" has a tag or an anchor (such as !!str): write it plain"},
    {HEAD "  - path: a\n    weight: &w 2\n", "t.yaml:4: weight \"2\" has a tag or an anchor"},
    {HEAD "  - path: a\n    quotas: {gpu: \"8\"}\n", "t.yaml:4: gpu \"8\" is quoted"},
    {HEAD "  - path: a\n    quotas: {memory: !!str 8Gi}\n", "t.yaml:4: memory \"8Gi\" has a tag"},
    {HEAD "  - path: a\n    quotas:\n      gpu: {nominal: 3, borrow_limit: \"unlimited\"}\n",
     "t.yaml:5: borrow_limit \"unlimited\" is quoted"},
    {HEAD "  - path: a\n    synthetic: {training: \"1\"}\n", "t.yaml:4: training \"1\" is quoted"},
    {HEAD "  - {path: a}\npriority_classes: [{name: x, value: !!str 5}]\n",
     "t.yaml:4: value \"5\" has a tag"},
    {"version: \"1\"\ntenants: [{path: a}]\n", "t.yaml:1: version \"1\" is quoted"},
    {HEAD "  - {path: a}\n---\nversion: 1\n", "t.yaml:5: a second document"},
    {HEAD "  - {path: a\n", "t.yaml:4: "},
    {HEAD "\t- {path: a}\n", "t.yaml:3: "},
    {HEAD "  - {path: a}\npriority_classes: [{name: x}]\n",
     "t.yaml:4: a priority class needs a name and a value"},
    {HEAD "  - {path: a}\npriority_classes:\n  - {name: x, value: 1}\n  - {name: x, value: 2}\n",
     "t.yaml:6: priority class \"x\" defined twice (first on line 5)"},
    {HEAD "  - {path: a}\npriority_classes: [{name: x, value: 1, preemptible: yes}]\n",
     "t.yaml:4: preemptible \"yes\": want true or false"},
    {HEAD "  - {path: a}\npriority_classes: [{name: x, value: 1.5}]\n",
     "t.yaml:4: value \"1.5\": want an integer"},
    {HEAD "  - {path: a}\npriority_classes: [{name: \"a b\", value: 1}]\n",
     "t.yaml:4: name \"a b\": want 1..31 bytes"},
    {HEAD "  - {path: a}\npriority_classes: {name: x}\n",
     "t.yaml:4: priority_classes must be a list"},
};
#define N_BAD (sizeof(bad_cases) / sizeof(bad_cases[0]))

static void test_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_BAD; i++) {
        struct sim_tenants_conf c = {0};
        char err[512] = "";
        int rc = sim_tenants_parse(bad_cases[i].doc, strlen(bad_cases[i].doc), "t.yaml", cat, &c,
                                   err, sizeof(err));

        assert_null(c.v);
        if (rc != ALLOT_EINVAL || strncmp(err, bad_cases[i].msg, strlen(bad_cases[i].msg)) != 0)
            fail_msg("case %zu: rc %d, message \"%s\", want prefix \"%s\"", i, rc, err,
                     bad_cases[i].msg);
    }
}

static void test_edges(void **state)
{
    static const char nul[] = "version: 1\ntenants: [{path: a\0}]\n";
    static const char many[] = HEAD "  - {path: a/b/c, quotas: {gpu: 0.5, cpu: unlimited}}\n"
                                    "  - {path: a, quotas: {gpu: {nominal: 1, lend_limit: 0}}}\n";
    static const char summed[] = HEAD "  - {path: org, quotas: {gpu: {borrow_limit: 4}}}\n"
                                      "  - {path: org/a, quotas: {gpu: 3}}\n"
                                      "  - {path: org/b, quotas: {gpu: 5}}\n";
    struct sim_tenants_conf c = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(sim_tenants_parse(nul, sizeof(nul) - 1, "t.yaml", cat, &c, err, sizeof(err)),
                     ALLOT_EINVAL);
    assert_string_equal(err, "t.yaml: contains a NUL byte");
    assert_int_equal(sim_tenants_parse(many, sizeof(many) - 1, "t.yaml", cat, &c, err, sizeof(err)),
                     0);
    assert_int_equal(c.n, 2);
    assert_true(c.v[0].leaf);
    assert_false(c.v[1].leaf); /* an ancestor two levels up */
    assert_int_equal(c.v[0].quota[ALLOT_RES_GPU].nominal, 500);
    assert_true(c.v[0].quota[ALLOT_RES_CPU].nominal == ALLOT_UNLIMITED);
    sim_tenants_conf_free(&c);
    /* a parent may limit its borrowing without a nominal: its tenants'
     * nominals add up to it */
    assert_int_equal(
        sim_tenants_parse(summed, sizeof(summed) - 1, "t.yaml", cat, &c, err, sizeof(err)), 0);
    assert_true(c.v[0].nominal_summed[ALLOT_RES_GPU] && !c.v[0].leaf);
    assert_true(c.v[0].quota[ALLOT_RES_GPU].nominal == ALLOT_UNLIMITED);
    assert_int_equal(c.v[0].quota[ALLOT_RES_GPU].borrow_limit, 4000);
    assert_false(c.v[1].nominal_summed[ALLOT_RES_GPU]);
    sim_tenants_conf_free(&c);
    /* without a catalog, per-model quotas cannot be resolved */
    assert_int_equal(sim_tenants_read(EXAMPLE, NULL, &c, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "unknown GPU model \"V100-32GB\""));
    assert_int_equal(sim_tenants_read("/nonexistent/t.yaml", cat, &c, err, sizeof(err)), ALLOT_EIO);
}

/* Lookups in a read tree (sorted: binary search) and in one put together
 * by hand (no order: a scan) give the same answers. '-' and '.' sort
 * before '/', so "a-c" and "a.d" lie between "a" and "a/b". */
static void test_lookups(void **state)
{
    static const char doc[] = HEAD "  - {path: a/b/c}\n  - {path: ab}\n  - {path: a-c}\n"
                                   "  - {path: a}\n  - {path: a.d/e}\n  - {path: z/y}\n";
    static const char *const paths[] = {"a/b/c", "ab", "a-c", "a", "a.d/e", "z/y"};
    struct sim_tenants_conf c = {0};
    struct sim_tenant_conf v[6] = {{0}};
    char err[256] = "";

    (void)state;
    assert_int_equal(sim_tenants_parse(doc, sizeof(doc) - 1, "t.yaml", cat, &c, err, sizeof(err)),
                     0);
    assert_non_null(c.sorted);
    for (size_t i = 0; i < 6; i++)
        v[i].path = (char *)paths[i];
    struct sim_tenants_conf hand = {.n = 6, .v = v};
    const struct sim_tenants_conf *both[] = {&c, &hand};

    for (int k = 0; k < 2; k++) {
        const struct sim_tenants_conf *t = both[k];

        for (int i = 0; i < 6; i++)
            assert_int_equal(sim_tenants_conf_find(t, paths[i]), i);
        assert_int_equal(sim_tenants_conf_find(t, "a/b"), -1); /* only a parent */
        assert_int_equal(sim_tenants_conf_find(t, "b"), -1);
        assert_int_equal(sim_tenants_conf_find(t, ""), -1);
        assert_int_equal(sim_tenants_conf_below(t, "a"), 0);
        assert_int_equal(sim_tenants_conf_below(t, "a/b"), 0);
        assert_int_equal(sim_tenants_conf_below(t, "a.d"), 4);
        assert_int_equal(sim_tenants_conf_below(t, "z"), 5);
        assert_int_equal(sim_tenants_conf_below(t, "a/b/c"), -1); /* a leaf */
        assert_int_equal(sim_tenants_conf_below(t, "ab"), -1);
        assert_int_equal(sim_tenants_conf_below(t, "a-c"), -1);
        assert_int_equal(sim_tenants_conf_below(t, "a/"), -1);
        assert_int_equal(sim_tenants_conf_below(t, "zz"), -1);
        assert_int_equal(sim_tenants_conf_below(t, "0"), -1);
    }
    sim_tenants_conf_free(&c);
    assert_null(c.sorted);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    for (unsigned long n = 1;; n++) {
        struct sim_tenants_conf c = {0};
        char err[256] = "";
        int rc;

        allot_alloc_fail_at(n, false);
        rc = sim_tenants_read(EXAMPLE, cat, &c, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            assert_int_equal(c.n, 7);
            sim_tenants_conf_free(&c);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_null(c.v);
        assert_true(n < 1000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example),        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_edges),          cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
