/*
 * Unit tests of cluster descriptions (src/core/clusterdesc.c): a description
 * using every feature (defaults, groups, labels, GPU modes, racks, NVLink
 * islands, draining, CPU-only nodes, model aliases) builds exactly the nodes
 * it says, checked field by field; malformed descriptions are rejected with
 * a message naming the entry and the field; dump then parse reproduces a
 * cluster, and dump refuses what parse would reject; and an allocation
 * failure at any point of a parse or a dump returns an error without leaking
 * (run under ASan too, see `make test-asan`).
 *
 * Descriptions are written with single quotes for readability; dq() turns
 * them into JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/catalog.h"
#include "allot/cluster.h"
#include "allot/clusterdesc.h"
#include "allot/common.h"

#include <stdio.h>
#include <string.h>

#include "catalog_fixture.h"

/* Returns s with every ' replaced by " (a static buffer: one at a time). */
static const char *dq(const char *s)
{
    static char buf[8192];
    size_t n = strlen(s);

    assert_true(n < sizeof(buf));
    for (size_t i = 0; i <= n; i++)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    return buf;
}

static struct allot_cluster *parse(const char *json, char *err, size_t errlen)
{
    return allot_clusterdesc_parse(cat, json, strlen(json), err, errlen);
}

static int model(const char *name)
{
    int m = allot_catalog_find_model(cat, name);

    assert_true(m >= 0);
    return m;
}

static const char *label(const struct allot_node *n, const char *key)
{
    for (int i = 0; i < n->n_labels; i++)
        if (strcmp(n->labels[i].key, key) == 0)
            return n->labels[i].value;
    return NULL;
}

/* Checks the node's fixed fields and that every GPU has `mode` and island
 * k / island_size (0 when island_size is 0). */
static void check_node(const struct allot_node *n, const char *name, const char *model_name,
                       int gpus, int64_t cpu, int64_t mem, int mode, int island_size, int rack,
                       int state)
{
    assert_non_null(n);
    assert_string_equal(n->name, name);
    assert_int_equal(n->model, model_name ? model(model_name) : -1);
    assert_int_equal(n->n_gpus, gpus);
    assert_int_equal(n->cpu_milli, cpu);
    assert_int_equal(n->cpu_free, cpu);
    assert_int_equal(n->mem_mib, mem);
    assert_int_equal(n->mem_free, mem);
    assert_int_equal(n->rack, rack);
    assert_int_equal(n->state, state);
    for (int g = 0; g < gpus; g++) {
        assert_int_equal(n->gpus[g].mode, mode);
        assert_int_equal(n->gpus[g].island, island_size ? g / island_size : 0);
        assert_int_equal(n->gpus[g].free_milli, ALLOT_MILLI);
        assert_int_equal(n->gpus[g].n_tasks, 0);
    }
}

/* ---- a good description ------------------------------------------------- */

static const char good_desc[] =
    "{'version': 1,\n"
    " 'defaults': {'gpu_mode': 'exclusive', 'island_size': 2, 'cpu_milli': 64000,\n"
    "              'memory_mib': 262144},\n"
    " 'nodes': [\n"
    "  {'name': 'gpu-a-01', 'model': 'A100', 'gpus': 8, 'cpu_milli': 128000,\n"
    "   'memory_mib': 1048576, 'gpu_mode': 'mig', 'island_size': 4, 'rack': 3,\n"
    "   'labels': {'zone': 'a', 'tier': 'prod'}, 'state': 'ready'},\n"
    "  {'name': 'h-01', 'model': 'H100-80GB', 'gpus': 8, 'gpu_mode': 'shared',\n"
    "   'island_size': 0, 'rack': 7, 'state': 'draining'},\n"
    "  {'name_prefix': 't4-', 'count': 20, 'model': 'T4', 'gpus': 4,\n"
    "   'labels': {'pool': 'inference', 'owner': 'Zo\\u00eb'}},\n"
    "  {'name': 'cpu-01', 'gpus': 0, 'memory_mib': 0, 'gpu_mode': 'shared'},\n"
    "  {'name_prefix': 'big', 'count': 1001, 'model': 'V100', 'gpus': 2, 'island_size': 1,\n"
    "   'gpu_mode': 'shared', 'rack': 1000000, 'state': 'draining'},\n"
    "  {'name_prefix': 'one-', 'count': 1, 'model': 'A30', 'gpus': 1, 'gpu_mode': 'mig'}\n"
    " ]}\n";

static void test_good(void **state)
{
    char err[512] = "x";
    struct allot_cluster *c = parse(dq(good_desc), err, sizeof(err));
    const struct allot_node *n;

    if (!c)
        fail_msg("%s", err);
    assert_string_equal(err, "");
    assert_int_equal(allot_cluster_node_count(c), 1 + 1 + 20 + 1 + 1001 + 1);

    n = allot_cluster_node(c, 0);
    check_node(n, "gpu-a-01", "A100-80GB", 8, 128000, 1048576, ALLOT_GPU_MIG, 4, 3,
               ALLOT_NODE_READY);
    assert_int_equal(n->n_labels, 2);
    assert_string_equal(n->labels[0].key, "zone"); /* file order kept */
    assert_string_equal(n->labels[0].value, "a");
    assert_string_equal(n->labels[1].key, "tier");
    assert_string_equal(n->labels[1].value, "prod");
    assert_int_equal(n->gpus[7].island, 1);

    n = allot_cluster_node(c, 1);
    check_node(n, "h-01", "H100-80GB", 8, 64000, 262144, ALLOT_GPU_SHARED, 0, 7,
               ALLOT_NODE_DRAINING);
    assert_int_equal(n->n_labels, 0);
    assert_int_equal(allot_cluster_node_class(c, 1),
                     -1); /* drained: out of the schedulable index */

    for (int i = 0; i < 20; i++) {
        char name[16];

        snprintf(name, sizeof(name), "t4-%03d", i);
        n = allot_cluster_node(c, 2 + i);
        /* mode and island size 2 from "defaults" */
        check_node(n, name, "T4", 4, 64000, 262144, ALLOT_GPU_EXCLUSIVE, 2, 0, ALLOT_NODE_READY);
        assert_int_equal(n->gpus[3].island, 1);
        assert_int_equal(n->n_labels, 2);
        assert_string_equal(label(n, "pool"), "inference");
        assert_string_equal(label(n, "owner"), "Zo\xc3\xab");
        assert_int_equal(allot_cluster_find_node(c, name), 2 + i);
    }
    assert_int_equal(allot_cluster_find_node(c, "t4-020"), -1);
    assert_int_equal(allot_cluster_find_node(c, "t4-19"), -1);

    n = allot_cluster_node(c, 22);
    check_node(n, "cpu-01", NULL, 0, 64000, 0, 0, 0, 0, ALLOT_NODE_READY);

    /* count 1001: indices 0..1000 need 4 digits */
    n = allot_cluster_node(c, 23);
    check_node(n, "big0000", "V100-32GB", 2, 64000, 262144, ALLOT_GPU_SHARED, 1, 1000000,
               ALLOT_NODE_DRAINING);
    assert_int_equal(n->gpus[1].island, 1);
    n = allot_cluster_node(c, 23 + 1000);
    assert_string_equal(n->name, "big1000");
    assert_int_equal(n->state, ALLOT_NODE_DRAINING);
    assert_int_equal(allot_cluster_find_node(c, "big0999"), 23 + 999);

    n = allot_cluster_node(c, 1024);
    check_node(n, "one-000", "A30-24GB", 1, 64000, 262144, ALLOT_GPU_MIG, 2, 0, ALLOT_NODE_READY);

    assert_int_equal(allot_cluster_gpu_count(c), 8 + 8 + 20 * 4 + 0 + 1001 * 2 + 1);
    assert_int_equal(allot_cluster_check(c, err, sizeof(err)), 0);
    allot_cluster_free(c);
}

/* Group names: at least 3 digits, else the width of count-1. */
static void test_group_names(void **state)
{
    static const struct {
        int count;
        const char *first, *last;
    } cases[] = {
        {1, "g000", "g000"},      {10, "g000", "g009"},      {1000, "g000", "g999"},
        {1001, "g0000", "g1000"}, {10000, "g0000", "g9999"}, {10001, "g00000", "g10000"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char json[256], err[256];
        struct allot_cluster *c;

        snprintf(json, sizeof(json),
                 "{\"version\": 1, \"nodes\": [{\"name_prefix\": \"g\", \"count\": %d, "
                 "\"gpus\": 0, \"cpu_milli\": 1, \"memory_mib\": 1}]}",
                 cases[i].count);
        c = parse(json, err, sizeof(err));
        if (!c)
            fail_msg("%s", err);
        assert_int_equal(allot_cluster_node_count(c), cases[i].count);
        assert_string_equal(allot_cluster_node(c, 0)->name, cases[i].first);
        assert_string_equal(allot_cluster_node(c, cases[i].count - 1)->name, cases[i].last);
        allot_cluster_free(c);
    }
}

/* An empty "nodes" is a valid, empty cluster; numbers at the limits pass. */
static void test_edges(void **state)
{
    char err[256];
    struct allot_cluster *c = parse(dq("{'nodes': [], 'version': 1}"), err, sizeof(err));

    assert_non_null(c);
    assert_int_equal(allot_cluster_node_count(c), 0);
    allot_cluster_free(c);

    c = parse(dq("{'version': 1, 'nodes': [{'name': 'x', 'model': 'B200', 'gpus': 16,"
                 " 'cpu_milli': 1000000000, 'memory_mib': 1099511627776, 'island_size': 16}]}"),
              err, sizeof(err));
    if (!c)
        fail_msg("%s", err);
    check_node(allot_cluster_node(c, 0), "x", "B200-180GB", 16, 1000000000, 1099511627776LL,
               ALLOT_GPU_SHARED, 16, 0, ALLOT_NODE_READY);
    allot_cluster_free(c);
}

/* ---- malformed descriptions --------------------------------------------- */

/* A valid prefix for node cases: version, defaults with CPU and memory. */
#define HEAD "{'version': 1, 'defaults': {'cpu_milli': 1000, 'memory_mib': 1000}, 'nodes': ["
#define TAIL "]}"

static const struct bad_case {
    const char *json;
    const char *expect;  /* substring of the message */
    const char *expect2; /* a second one, or NULL */
} bad_cases[] = {
    /* top level */
    {"[1]", "the top level must be an object", NULL},
    {"{'version': 1}", "missing field \"nodes\"", NULL},
    {"{'nodes': []}", "missing field \"version\"", NULL},
    {"{'version': 2, 'nodes': []}", "field \"version\" is 2; only version 1", NULL},
    {"{'version': '1', 'nodes': []}", "field \"version\" must be an integer", NULL},
    {"{'version': 1, 'nodes': [], 'notes': 'x'}", "unknown field \"notes\"", NULL},
    {"{'version': 1, 'nodes': {}}", "field \"nodes\" must be an array", NULL},
    {"{'version': 1, 'nodes': [1]}", "nodes[0]: must be an object", NULL},
    /* defaults */
    {"{'version': 1, 'defaults': [], 'nodes': []}", "defaults: must be an object", NULL},
    {"{'version': 1, 'defaults': {'gpus': 8}, 'nodes': []}", "defaults: unknown field \"gpus\"",
     NULL},
    {"{'version': 1, 'defaults': {'gpu_mode': 'fast'}, 'nodes': []}",
     "defaults: field \"gpu_mode\" is \"fast\"; must be one of shared, exclusive, mig", NULL},
    {"{'version': 1, 'defaults': {'cpu_milli': -1}, 'nodes': []}",
     "defaults: field \"cpu_milli\" is -1", NULL},
    {"{'version': 1, 'defaults': {'island_size': 1.5}, 'nodes': []}",
     "defaults: field \"island_size\" must be an integer", NULL},
    /* identity */
    {HEAD "{'gpus': 0}" TAIL, "nodes[0]: missing field \"name\"", NULL},
    {HEAD "{'name': 'a', 'name_prefix': 'b', 'count': 2, 'gpus': 0}" TAIL,
     "nodes[0]: fields \"name\" and \"name_prefix\" both given", NULL},
    {HEAD "{'name': 'a', 'count': 2, 'gpus': 0}" TAIL,
     "nodes[0] \"a\": field \"count\" needs \"name_prefix\"", NULL},
    {HEAD "{'name_prefix': 'g-', 'gpus': 0}" TAIL,
     "nodes[0] (name_prefix \"g-\"): missing field \"count\"", NULL},
    {HEAD "{'name_prefix': 'g-', 'count': 0, 'gpus': 0}" TAIL, "field \"count\" is 0; must be in 1",
     NULL},
    {HEAD "{'name_prefix': 'g-', 'count': 100001, 'gpus': 0}" TAIL,
     "field \"count\" is 100001; must be in 1..100000", NULL},
    {HEAD "{'name_prefix': 'g-', 'count': '5', 'gpus': 0}" TAIL,
     "field \"count\" must be an integer", NULL},
    {HEAD "{'name': 5, 'gpus': 0}" TAIL, "nodes[0]: field \"name\" must be a string", NULL},
    {HEAD "{'name': '', 'gpus': 0}" TAIL, "nodes[0]: field \"name\" is empty", NULL},
    {HEAD "{'name': 'a b', 'gpus': 0}" TAIL, "field \"name\" contains a space", NULL},
    {HEAD "{'name_prefix': '', 'count': 2, 'gpus': 0}" TAIL, "field \"name_prefix\" is empty",
     NULL},
    {HEAD "{'name': 'a', 'gpus': 0}, {'name': 'a', 'gpus': 1, 'model': 'T4'}" TAIL,
     "nodes[1]: node \"a\": duplicate name", NULL},
    {HEAD "{'name': 't-005', 'gpus': 0}, {'name_prefix': 't-', 'count': 10, 'gpus': 0}" TAIL,
     "nodes[1]: node \"t-005\": duplicate name", NULL},
    /* fields of a node */
    {HEAD "{'name': 'a', 'gpus': 0, 'gpu': 1}" TAIL, "nodes[0] \"a\": unknown field \"gpu\"", NULL},
    {HEAD "{'name': 'a'}" TAIL, "nodes[0] \"a\": missing field \"gpus\"", NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': '8'}" TAIL,
     "nodes[0] \"a\": field \"gpus\" must be an integer", NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': 8.5}" TAIL, "field \"gpus\" must be an integer",
     NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': 8.0}" TAIL, "field \"gpus\" must be an integer",
     NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': true}" TAIL, "field \"gpus\" must be an integer",
     NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': -1}" TAIL, "field \"gpus\" is -1; must be in 0..16",
     NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': 17}" TAIL, "field \"gpus\" is 17; must be in 0..16",
     NULL},
    {HEAD "{'name': 'a', 'gpus': 2}" TAIL, "nodes[0] \"a\": missing field \"model\"", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'model': 'T4'}" TAIL, "field \"model\" given but \"gpus\" is 0",
     NULL},
    {HEAD "{'name': 'a', 'gpus': 2, 'model': 4}" TAIL, "field \"model\" must be a string", NULL},
    {HEAD "{'name': 'a', 'gpus': 2, 'model': 'A200'}" TAIL,
     "nodes[0] \"a\": field \"model\": unknown model \"A200\"", "A100-80GB"},
    {HEAD "{'name': 'a', 'gpus': 0, 'cpu_milli': 1000000001}" TAIL,
     "field \"cpu_milli\" is 1000000001; must be in 0..1000000000", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'cpu_milli': -5}" TAIL, "field \"cpu_milli\" is -5", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'memory_mib': 1099511627777}" TAIL,
     "field \"memory_mib\" is 1099511627777; must be in 0..1099511627776", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'memory_mib': '1G'}" TAIL,
     "field \"memory_mib\" must be an integer", NULL},
    {"{'version': 1, 'nodes': [{'name': 'a', 'gpus': 0, 'memory_mib': 1}]}",
     "nodes[0] \"a\": missing field \"cpu_milli\" (give it here or in \"defaults\")", NULL},
    {"{'version': 1, 'nodes': [{'name': 'a', 'gpus': 0, 'cpu_milli': 1}]}",
     "nodes[0] \"a\": missing field \"memory_mib\"", NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': 4, 'gpu_mode': 'fast'}" TAIL,
     "nodes[0] \"a\": field \"gpu_mode\" is \"fast\"; must be one of shared, exclusive, mig", NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': 4, 'gpu_mode': 1}" TAIL,
     "field \"gpu_mode\" must be a string", NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': 4, 'gpu_mode': 'mig'}" TAIL,
     "field \"gpu_mode\" is \"mig\" but model \"T4\" is not MIG-capable", NULL},
    {"{'version': 1, 'defaults': {'gpu_mode': 'mig', 'cpu_milli': 1, 'memory_mib': 1},"
     " 'nodes': [{'name': 'a', 'model': 'T4', 'gpus': 4}]}",
     "field \"gpu_mode\" (from \"defaults\") is \"mig\"", NULL},
    {HEAD "{'name': 'a', 'model': 'T4', 'gpus': 4, 'island_size': 17}" TAIL,
     "field \"island_size\" is 17; must be in 0..16", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'rack': -1}" TAIL, "field \"rack\" is -1", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'rack': '3'}" TAIL, "field \"rack\" must be an integer", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'state': 'down'}" TAIL,
     "field \"state\" is \"down\"; must be one of ready, draining", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'state': 'lost'}" TAIL, "field \"state\" is \"lost\"", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'state': null}" TAIL, "field \"state\" must be a string", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'labels': ['zone']}" TAIL,
     "field \"labels\" must be an object of strings", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'labels': 'zone=a'}" TAIL,
     "field \"labels\" must be an object of strings", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'labels': {'zone': 3}}" TAIL,
     "nodes[0] \"a\": field \"labels\": \"zone\" must be a string", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'labels': {'': 'x'}}" TAIL,
     "field \"labels\": key \"\" is empty", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'labels': {'my key': 'x'}}" TAIL,
     "field \"labels\": key \"my key\" contains a space", NULL},
    {HEAD "{'name': 'a', 'gpus': 0, 'labels': {'k': 'a\\nb'}}" TAIL,
     "field \"labels\": value of \"k\" contains a control character", NULL},
    /* the index and name of a later entry */
    {HEAD "{'name': 'a', 'gpus': 0}, {'name': 'b', 'gpus': 0}, {'name': 'c', 'gpus': 0, "
          "'rack': 1.5}" TAIL,
     "nodes[2] \"c\": field \"rack\" must be an integer", NULL},
    {HEAD "{'name': 'a', 'gpus': 0}, {'name_prefix': 'g-', 'count': 3, 'gpus': 'x'}" TAIL,
     "nodes[1] (name_prefix \"g-\"): field \"gpus\" must be an integer", NULL},
    /* JSON itself */
    {"", "JSON syntax error at line 1:", NULL},
    {"{'version': 1,\n 'nodes': [}", "JSON syntax error at line 2:", NULL},
    {"{'version': 1, 'nodes': []} x", "JSON syntax error at line 1:", NULL},
    {"{'version': 1, 'version': 1, 'nodes': []}", "JSON syntax error", "duplicate object key"},
    {HEAD "{'name': 'a', 'gpus': 0, 'labels': {'k': 'x', 'k': 'y'}}" TAIL, "duplicate object key",
     NULL},
    {HEAD "{'name': 'a', 'gpus': 99999999999999999999}" TAIL, "JSON syntax error",
     "too big integer"},
    {HEAD "{'name': 'a\\u0000b', 'gpus': 0}" TAIL, "JSON syntax error", NULL},
    {"{'version': 1, 'nodes': [", "JSON syntax error", NULL},
};

static void test_malformed(void **state)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *b = &bad_cases[i];
        char err[1024] = "";
        struct allot_cluster *c = parse(dq(b->json), err, sizeof(err));

        if (c) {
            allot_cluster_free(c);
            fail_msg("case %zu accepted: %s", i, b->json);
        }
        if (!strstr(err, b->expect) || (b->expect2 && !strstr(err, b->expect2)))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"%s%s", i, err, b->expect,
                     b->expect2 ? " / " : "", b->expect2 ? b->expect2 : "");
    }
}

/* Sizes beyond the limits, built programmatically. */
static void test_limits(void **state)
{
    static char json[16384];
    char err[1024], name[300];
    size_t used;
    struct allot_cluster *c;

    /* a name of 253 characters passes, 254 does not */
    for (int len = ALLOT_CLUSTERDESC_NAME_MAX; len <= ALLOT_CLUSTERDESC_NAME_MAX + 1; len++) {
        memset(name, 'n', (size_t)len);
        name[len] = '\0';
        snprintf(json, sizeof(json),
                 "{\"version\": 1, \"nodes\": [{\"name\": \"%s\", \"gpus\": 0, "
                 "\"cpu_milli\": 1, \"memory_mib\": 1}]}",
                 name);
        c = parse(json, err, sizeof(err));
        if (len == ALLOT_CLUSTERDESC_NAME_MAX) {
            assert_non_null(c);
            allot_cluster_free(c);
        } else {
            assert_null(c);
            assert_non_null(strstr(err, "field \"name\" is longer than 253 characters"));
        }
    }

    /* a prefix that leaves no room for the digits */
    memset(name, 'p', 251);
    name[251] = '\0';
    snprintf(json, sizeof(json),
             "{\"version\": 1, \"nodes\": [{\"name_prefix\": \"%s\", \"count\": 2, \"gpus\": 0, "
             "\"cpu_milli\": 1, \"memory_mib\": 1}]}",
             name);
    assert_null(parse(json, err, sizeof(err)));
    assert_non_null(strstr(err, "field \"name_prefix\" is longer than 250 characters"));

    /* 65 labels */
    used = (size_t)snprintf(json, sizeof(json),
                            "{\"version\": 1, \"nodes\": [{\"name\": \"a\", \"gpus\": 0, "
                            "\"cpu_milli\": 1, \"memory_mib\": 1, \"labels\": {");
    for (int i = 0; i <= ALLOT_CLUSTERDESC_MAX_LABELS; i++)
        used += (size_t)snprintf(json + used, sizeof(json) - used, "%s\"k%d\": \"v\"",
                                 i ? ", " : "", i);
    snprintf(json + used, sizeof(json) - used, "}}]}");
    assert_null(parse(json, err, sizeof(err)));
    assert_non_null(strstr(err, "nodes[0] \"a\": field \"labels\" has 65 entries; at most 64"));

    /* a label value of 256 bytes */
    memset(name, 'v', 256);
    name[256] = '\0';
    snprintf(json, sizeof(json),
             "{\"version\": 1, \"nodes\": [{\"name\": \"a\", \"gpus\": 0, \"cpu_milli\": 1, "
             "\"memory_mib\": 1, \"labels\": {\"k\": \"%s\"}}]}",
             name);
    assert_null(parse(json, err, sizeof(err)));
    assert_non_null(strstr(err, "value of \"k\" is longer than 255 bytes"));

    /* more than a million nodes in all: refused before any is built */
    used = (size_t)snprintf(json, sizeof(json), "{\"version\": 1, \"nodes\": [");
    for (int i = 0; i < 11; i++)
        used += (size_t)snprintf(json + used, sizeof(json) - used,
                                 "%s{\"name_prefix\": \"g%d-\", \"count\": 100000, \"gpus\": 0, "
                                 "\"cpu_milli\": 1, \"memory_mib\": 1}",
                                 i ? ", " : "", i);
    snprintf(json + used, sizeof(json) - used, "]}");
    allot_alloc_fail_at(0, false);
    assert_null(parse(json, err, sizeof(err)));
    assert_string_equal(err, "field \"nodes\" describes 1100000 nodes; at most 1000000");
    assert_true(allot_alloc_count() < 2000); /* the JSON tree only: no node was built */
}

/* The message buffer: truncated, always terminated; NULL/0 allowed; the
 * length is honoured (no NUL needed). */
static void test_err_and_len(void **state)
{
    char err[8];
    const char *ok;
    char buf[64];
    struct allot_cluster *c;

    assert_null(parse(dq("{'version': 3, 'nodes': []}"), err, sizeof(err)));
    assert_int_equal(strlen(err), sizeof(err) - 1);
    assert_null(parse(dq("{'version': 3, 'nodes': []}"), NULL, 0));
    assert_null(allot_clusterdesc_parse(cat, NULL, 0, err, sizeof(err)));
    assert_null(allot_clusterdesc_parse(NULL, "{}", 2, err, sizeof(err)));

    /* garbage after len bytes is not read */
    ok = dq("{'version': 1, 'nodes': []}");
    memset(buf, 'x', sizeof(buf));
    memcpy(buf, ok, strlen(ok));
    c = allot_clusterdesc_parse(cat, buf, strlen(ok), NULL, 0);
    assert_non_null(c);
    allot_cluster_free(c);
}

/* ---- dump --------------------------------------------------------------- */

static void assert_same_nodes(const struct allot_cluster *a, const struct allot_cluster *b)
{
    assert_int_equal(allot_cluster_node_count(a), allot_cluster_node_count(b));
    for (int i = 0; i < allot_cluster_node_count(a); i++) {
        const struct allot_node *x = allot_cluster_node(a, i), *y = allot_cluster_node(b, i);

        assert_string_equal(x->name, y->name);
        assert_int_equal(x->model, y->model);
        assert_int_equal(x->cpu_milli, y->cpu_milli);
        assert_int_equal(x->cpu_free, y->cpu_free);
        assert_int_equal(x->mem_mib, y->mem_mib);
        assert_int_equal(x->mem_free, y->mem_free);
        assert_int_equal(x->n_gpus, y->n_gpus);
        assert_int_equal(x->state, y->state);
        assert_int_equal(x->rack, y->rack);
        for (int g = 0; g < x->n_gpus; g++) {
            assert_int_equal(x->gpus[g].mode, y->gpus[g].mode);
            assert_int_equal(x->gpus[g].island, y->gpus[g].island);
            assert_int_equal(x->gpus[g].free_milli, y->gpus[g].free_milli);
            assert_int_equal(x->gpus[g].free_mem_mib, y->gpus[g].free_mem_mib);
        }
        assert_int_equal(x->n_labels, y->n_labels);
        for (int l = 0; l < x->n_labels; l++) {
            assert_string_equal(x->labels[l].key, y->labels[l].key);
            assert_string_equal(x->labels[l].value, y->labels[l].value);
        }
    }
}

static void test_roundtrip(void **state)
{
    char err[512], *text = NULL, *text2 = NULL;
    size_t len = 0, len2 = 0;
    struct allot_cluster *a = parse(dq(good_desc), err, sizeof(err)), *b;

    assert_non_null(a);
    assert_int_equal(allot_clusterdesc_dump(a, &text, &len), 0);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    /* one line per node, canonical model names, every field spelled out */
    assert_non_null(strstr(text, "{\"version\": 1,\n \"nodes\": [\n  {\"name\": \"gpu-a-01\", "
                                 "\"model\": \"A100-80GB\", \"gpus\": 8, \"cpu_milli\": 128000, "
                                 "\"memory_mib\": 1048576, \"gpu_mode\": \"mig\", "
                                 "\"island_size\": 4, \"rack\": 3, \"labels\": {\"zone\": \"a\", "
                                 "\"tier\": \"prod\"}, \"state\": \"ready\"},\n"));
    assert_non_null(strstr(text, "{\"name\": \"cpu-01\", \"gpus\": 0, \"cpu_milli\": 64000, "
                                 "\"memory_mib\": 0, \"rack\": 0, \"state\": \"ready\"}"));
    assert_non_null(strstr(text, "\"name\": \"big1000\""));
    b = allot_clusterdesc_parse(cat, text, len, err, sizeof(err));
    if (!b)
        fail_msg("%s", err);
    assert_same_nodes(a, b);
    assert_int_equal(allot_clusterdesc_dump(b, &text2, &len2), 0);
    assert_int_equal(len, len2);
    assert_string_equal(text, text2); /* a fixed point */
    allot_free(text);
    allot_free(text2);
    allot_cluster_free(b);
    allot_cluster_free(a);

    /* an empty cluster */
    a = allot_cluster_new(cat, 0);
    assert_non_null(a);
    assert_int_equal(allot_clusterdesc_dump(a, &text, &len), 0);
    assert_string_equal(text, "{\"version\": 1,\n \"nodes\": []}\n");
    b = allot_clusterdesc_parse(cat, text, len, err, sizeof(err));
    assert_non_null(b);
    assert_int_equal(allot_cluster_node_count(b), 0);
    allot_free(text);
    allot_cluster_free(b);
    allot_cluster_free(a);
}

/* A cluster built through the API: islands that do not divide the GPUs,
 * labels with quotes, a node with tasks on it (capacities are dumped). */
static void test_roundtrip_api(void **state)
{
    struct allot_label labels[] = {{"team", "ml \"core\""}, {"path", "a\\b"}};
    struct allot_node_spec spec = {.name = "n-1",
                                   .model = "H100",
                                   .cpu_milli = 96000,
                                   .mem_mib = 512000,
                                   .n_gpus = 8,
                                   .gpu_mode = ALLOT_GPU_SHARED,
                                   .island_size = 3,
                                   .rack = 12,
                                   .n_labels = 2,
                                   .labels = labels};
    struct allot_placement p = {.node = 0,
                                .gpu_mask = 1,
                                .gpu_milli = 500,
                                .gpu_mem_mib = 0,
                                .mig_profile = -1,
                                .cpu_milli = 1000,
                                .mem_mib = 1024,
                                .pod_class = 0};
    char err[256], *text;
    size_t len;
    struct allot_cluster *a = allot_cluster_new(cat, 0), *b;

    assert_non_null(a);
    assert_int_equal(allot_cluster_add_node(a, &spec, err, sizeof(err)), 0);
    spec.name = "n-2";
    spec.island_size = 8;
    spec.n_labels = 0;
    assert_int_equal(allot_cluster_add_node(a, &spec, err, sizeof(err)), 1);
    assert_int_equal(allot_cluster_apply(a, &p), 0);
    assert_int_equal(allot_clusterdesc_dump(a, &text, &len), 0);
    assert_non_null(strstr(text, "\"island_size\": 3"));
    assert_non_null(strstr(text, "\"cpu_milli\": 96000")); /* capacity, not what is free */
    b = allot_clusterdesc_parse(cat, text, len, err, sizeof(err));
    if (!b)
        fail_msg("%s\n%s", err, text);
    allot_free(text);
    assert_int_equal(allot_cluster_node(b, 0)->gpus[7].island, 2);
    assert_int_equal(allot_cluster_node(b, 1)->gpus[7].island, 0);
    assert_string_equal(allot_cluster_node(b, 0)->labels[0].value, "ml \"core\"");
    assert_string_equal(allot_cluster_node(b, 0)->labels[1].value, "a\\b");
    assert_int_equal(allot_cluster_release(a, &p), 0);
    assert_same_nodes(a, b);
    allot_cluster_free(b);
    allot_cluster_free(a);
}

/* What the parser would refuse, the writer refuses too. */
static void test_dump_refuses(void **state)
{
    static const struct {
        const char *name;
        const char *label_key, *label_value;
        int64_t cpu;
        int rack;
        int expect;
    } cases[] = {
        {"ok", NULL, NULL, 1, 0, 0},
        {"has space", NULL, NULL, 1, 0, ALLOT_EINVAL},
        {"ok", "k", "\xff", 1, 0, ALLOT_EINVAL},
        {"ok", "k", "tab\there", 1, 0, ALLOT_EINVAL},
        {"ok", "", "v", 1, 0, ALLOT_EINVAL},
        {"ok", NULL, NULL, ALLOT_CLUSTERDESC_MAX_CPU + 1, 0, ALLOT_ERANGE},
        {"ok", NULL, NULL, 1, ALLOT_CLUSTERDESC_MAX_RACK + 1, ALLOT_ERANGE},
    };
    char err[256], *text = (char *)"untouched";
    size_t len = 99;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct allot_label lb = {(char *)cases[i].label_key, (char *)cases[i].label_value};
        struct allot_node_spec spec = {.name = cases[i].name,
                                       .cpu_milli = cases[i].cpu,
                                       .mem_mib = 1,
                                       .rack = cases[i].rack,
                                       .n_labels = cases[i].label_key ? 1 : 0,
                                       .labels = &lb};
        struct allot_cluster *c = allot_cluster_new(cat, 0);

        assert_non_null(c);
        assert_int_equal(allot_cluster_add_node(c, &spec, err, sizeof(err)), 0);
        assert_int_equal(allot_clusterdesc_dump(c, &text, &len), cases[i].expect);
        if (cases[i].expect) {
            assert_null(text);
            assert_int_equal(len, 0);
        }
        allot_free(text);
        allot_cluster_free(c);
    }

    /* a lost node has no description; duplicate label keys neither */
    {
        struct allot_label two[] = {{"k", "a"}, {"k", "b"}};
        struct allot_node_spec spec = {.name = "x", .cpu_milli = 1, .mem_mib = 1};
        struct allot_cluster *c = allot_cluster_new(cat, 0);

        assert_non_null(c);
        assert_int_equal(allot_cluster_add_node(c, &spec, err, sizeof(err)), 0);
        assert_int_equal(allot_cluster_set_state(c, 0, ALLOT_NODE_LOST), 0);
        assert_int_equal(allot_clusterdesc_dump(c, &text, &len), ALLOT_EINVAL);
        assert_null(text);
        allot_cluster_free(c);

        spec.n_labels = 2;
        spec.labels = two;
        c = allot_cluster_new(cat, 0);
        assert_non_null(c);
        assert_int_equal(allot_cluster_add_node(c, &spec, err, sizeof(err)), 0);
        assert_int_equal(allot_clusterdesc_dump(c, &text, &len), ALLOT_EINVAL);
        allot_cluster_free(c);
    }
    assert_int_equal(allot_clusterdesc_dump(NULL, &text, &len), ALLOT_EINVAL);
    assert_int_equal(allot_clusterdesc_dump(NULL, NULL, &len), ALLOT_EINVAL);
}

/* ---- allocation failures ------------------------------------------------ */

/* A smaller description with every feature, so the loops stay short. Its
 * long strings make jansson grow its token buffer (16 -> 32 -> 64 bytes), but
 * no string is exactly 16, 32 or 64 bytes long with its quotes: a failed
 * growth at a closing quote makes jansson 2.14 read past its buffer (see
 * clusterdesc.c), which no caller can prevent. */
static const char fault_desc[] =
    "{'version': 1,\n"
    " 'defaults': {'gpu_mode': 'exclusive', 'island_size': 2, 'cpu_milli': 64000,\n"
    "              'memory_mib': 262144},\n"
    " 'nodes': [\n"
    "  {'name': 'gpu-a-01-with-a-name-long-enough-to-grow-the-token-buffer', 'model': 'A100',\n"
    "   'gpus': 8, 'cpu_milli': 128000, 'memory_mib': 1048576, 'gpu_mode': 'mig',\n"
    "   'island_size': 4, 'rack': 3, 'labels': {'zone': 'a', 'tier': 'prod'}},\n"
    "  {'name': 'h-01', 'model': 'H100-80GB', 'gpus': 8, 'gpu_mode': 'shared',\n"
    "   'state': 'draining'},\n"
    "  {'name_prefix': 't4-', 'count': 12, 'model': 'T4', 'gpus': 4,\n"
    "   'labels': {'pool': 'a-label-value-long-enough-to-grow-the-token-buffer-too'}},\n"
    "  {'name': 'cpu-01', 'gpus': 0}\n"
    " ]}\n";

static void parse_fault_loop(const char *json, const struct allot_cluster *want, bool sticky)
{
    unsigned long n;

    for (n = 1; n < 100000; n++) {
        char err[256] = "";
        struct allot_cluster *c;

        allot_alloc_fail_at(n, sticky);
        c = parse(json, err, sizeof(err));
        if (c) {
            unsigned long used = allot_alloc_count();

            allot_alloc_fail_at(0, false);
            assert_true(used < n); /* succeeded only once no failure was hit */
            assert_same_nodes(want, c);
            allot_cluster_free(c);
            break;
        }
        allot_alloc_fail_at(0, false);
        if (!strstr(err, "out of memory"))
            fail_msg("failure at allocation %lu: \"%s\"", n, err);
    }
    assert_true(n > 10); /* the parse allocates, so the loop ran */
}

static void dump_fault_loop(const struct allot_cluster *c, const char *want, bool sticky)
{
    unsigned long n;

    for (n = 1; n < 100000; n++) {
        char *text = (char *)"untouched";
        size_t len = 99;
        int rc;

        allot_alloc_fail_at(n, sticky);
        rc = allot_clusterdesc_dump(c, &text, &len);
        if (rc == 0) {
            unsigned long used = allot_alloc_count();

            allot_alloc_fail_at(0, false);
            assert_true(used < n);
            assert_string_equal(text, want);
            allot_free(text);
            break;
        }
        allot_alloc_fail_at(0, false);
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_null(text);
        assert_int_equal(len, 0);
    }
    assert_true(n > 10);
}

static void test_alloc_failures(void **state)
{
    char err[256], *text;
    size_t len;
    const char *json = dq(fault_desc);
    struct allot_cluster *want = parse(json, err, sizeof(err));

    if (!want)
        fail_msg("%s", err);
    parse_fault_loop(json, want, false);
    parse_fault_loop(json, want, true);
    assert_int_equal(allot_clusterdesc_dump(want, &text, &len), 0);
    dump_fault_loop(want, text, false);
    dump_fault_loop(want, text, true);
    allot_free(text);
    allot_cluster_free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),         cmocka_unit_test(test_group_names),
        cmocka_unit_test(test_edges),        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_limits),       cmocka_unit_test(test_err_and_len),
        cmocka_unit_test(test_roundtrip),    cmocka_unit_test(test_roundtrip_api),
        cmocka_unit_test(test_dump_refuses), cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
