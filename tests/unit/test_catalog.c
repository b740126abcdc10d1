/*
 * Unit tests of the GPU catalog (src/core/catalog.c): the embedded default
 * catalog loads and resolves every name the traces use; each MIG model's
 * profiles and placements match NVIDIA's documented geometry (a table written
 * here, independently of data/gpus.json); malformed catalogs are rejected
 * with messages that name the entry and field; and an allocation failure at
 * any point of a parse returns NULL without leaking (run under ASan too).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/catalog.h"
#include "allot/common.h"

#include <stdio.h>
#include <string.h>

/* ---- NVIDIA's documented MIG geometry --------------------------------------
 * From the MIG user guide ("Supported MIG Profiles", and the lgipp example
 * of "Getting Started"): per profile its compute slices, memory slices
 * (= placement size), max instances on an empty GPU, and valid starts. */

struct nv_profile {
    const char *name;
    int compute, size, max;
    int starts[8];
    int n_starts;
};

struct nv_model {
    const char *model;
    int compute, memory, max_gi;
    struct nv_profile profiles[6];
    int n_profiles;
};

/* The 7-compute / 8-memory-slice geometry shared by A100, H100, H200, GH200
 * and B200; only the memory figures in the names differ. */
#define NV_GEOM_7_8(g1, g1d, g2, g3, g4, g7)                                                       \
    7, 8, 7,                                                                                       \
        {                                                                                          \
            {"1g." g1 "gb", 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, 7},                                    \
            {"1g." g1d "gb", 1, 2, 4, {0, 2, 4, 6}, 4},                                            \
            {"2g." g2 "gb", 2, 2, 3, {0, 2, 4}, 3},                                                \
            {"3g." g3 "gb", 3, 4, 2, {0, 4}, 2},                                                   \
            {"4g." g4 "gb", 4, 4, 1, {0}, 1},                                                      \
            {"7g." g7 "gb", 7, 8, 1, {0}, 1},                                                      \
        },                                                                                         \
        6

static const struct nv_model nv_models[] = {
    {"A30-24GB",
     4,
     4,
     4,
     {
         {"1g.6gb", 1, 1, 4, {0, 1, 2, 3}, 4},
         {"2g.12gb", 2, 2, 2, {0, 2}, 2},
         {"4g.24gb", 4, 4, 1, {0}, 1},
     },
     3},
    {"A100-40GB", NV_GEOM_7_8("5", "10", "10", "20", "20", "40")},
    {"A100-80GB", NV_GEOM_7_8("10", "20", "20", "40", "40", "80")},
    {"H100-80GB", NV_GEOM_7_8("10", "20", "20", "40", "40", "80")},
    {"H100-94GB", NV_GEOM_7_8("12", "24", "24", "47", "47", "94")},
    {"H200-141GB", NV_GEOM_7_8("18", "35", "35", "71", "71", "141")},
    {"B200-180GB", NV_GEOM_7_8("23", "45", "45", "90", "90", "180")},
};

/* ---- helpers ------------------------------------------------------------- */

static struct allot_catalog *load_default(void)
{
    char err[256];
    struct allot_catalog *cat = allot_catalog_default(err, sizeof(err));

    if (!cat)
        fail_msg("default catalog: %s", err);
    return cat;
}

/* Parses `json`, expects failure and every non-NULL needle in the message. */
static void expect_reject(const char *json, const char *n1, const char *n2, const char *n3)
{
    char err[512] = "";
    struct allot_catalog *cat = allot_catalog_parse(json, strlen(json), err, sizeof(err));

    if (cat) {
        allot_catalog_free(cat);
        fail_msg("accepted: %s", json);
    }
    if ((n1 && !strstr(err, n1)) || (n2 && !strstr(err, n2)) || (n3 && !strstr(err, n3)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\" / \"%s\"", err, n1 ? n1 : "", n2 ? n2 : "",
                 n3 ? n3 : "");
}

static struct allot_catalog *expect_accept(const char *json)
{
    char err[512] = "";
    struct allot_catalog *cat = allot_catalog_parse(json, strlen(json), err, sizeof(err));

    if (!cat)
        fail_msg("rejected (%s): %s", err, json);
    return cat;
}

/* A small valid MIG model to mutate: one profile per line so tests can swap
 * a single field. */
#define MIG_HEAD                                                                                   \
    "{\"version\":1,\"models\":[{\"name\":\"X100\",\"memory_mib\":40960,\"sm_count\":100,"         \
    "\"mig\":{\"compute_slices\":7,\"memory_slices\":8,\"max_gpu_instances\":7,\"profiles\":["
#define MIG_TAIL "]}}]}"
#define PROF_1G                                                                                    \
    "{\"name\":\"1g.5gb\",\"id\":19,\"compute_slices\":1,\"memory_slices\":1,"                     \
    "\"max_instances\":7,\"memory_mib\":4864,"                                                     \
    "\"placements\":[[0,1],[1,1],[2,1],[3,1],[4,1],[5,1],[6,1]]}"

/* ---- the default catalog ------------------------------------------------- */

static void test_default_loads(void **state)
{
    struct allot_catalog *cat = load_default();

    assert_true(cat->n_models >= 17);
    assert_true(cat->n_models <= ALLOT_MAX_MODELS);
    for (int i = 0; i < cat->n_models; i++) {
        const struct allot_gpu_model *m = &cat->models[i];

        assert_true(m->memory_mib > 0);
        assert_true(m->sm_count > 0);
        assert_int_equal(allot_catalog_find_model(cat, m->name), i);
        for (int a = 0; a < m->n_aliases; a++)
            assert_int_equal(allot_catalog_find_model(cat, m->aliases[a]), i);
    }
    allot_catalog_free(cat);
}

static void expect_model(const struct allot_catalog *cat, const char *name, const char *canonical)
{
    int i = allot_catalog_find_model(cat, name);

    if (i < 0)
        fail_msg("\"%s\" does not resolve", name);
    if (strcmp(cat->models[i].name, canonical) != 0)
        fail_msg("\"%s\" resolves to %s, expected %s", name, cat->models[i].name, canonical);
}

static void test_find_model(void **state)
{
    struct allot_catalog *cat = load_default();
    /* Every model name of the Alibaba openb trace. */
    static const char *const openb[] = {"P100", "T4", "V100M16", "V100M32",
                                        "A10",  "G1", "G2",      "G3"};

    for (size_t i = 0; i < sizeof(openb) / sizeof(openb[0]); i++)
        assert_true(allot_catalog_find_model(cat, openb[i]) >= 0);
    expect_model(cat, "V100M16", "V100-16GB");
    expect_model(cat, "V100M32", "V100-32GB");
    expect_model(cat, "A100", "A100-80GB");
    expect_model(cat, "a100", "A100-80GB");
    expect_model(cat, "A100-SXM4-40GB", "A100-40GB");
    expect_model(cat, "H100", "H100-80GB");
    expect_model(cat, "H200", "H200-141GB");
    expect_model(cat, "B200", "B200-180GB");
    expect_model(cat, "a30", "A30-24GB");
    expect_model(cat, "l40s", "L40S");
    assert_int_equal(allot_catalog_find_model(cat, "RTX-9090"), -1);
    assert_int_equal(allot_catalog_find_model(cat, ""), -1);
    assert_int_equal(allot_catalog_find_model(cat, NULL), -1);
    assert_int_equal(allot_catalog_find_model(NULL, "A100"), -1);

    /* Undisclosed openb models and the non-MIG ones carry no MIG profiles. */
    assert_false(cat->models[allot_catalog_find_model(cat, "G2")].mig);
    assert_int_equal(cat->models[allot_catalog_find_model(cat, "T4")].n_profiles, 0);
    assert_int_equal(cat->models[allot_catalog_find_model(cat, "V100M16")].memory_mib, 16384);
    assert_int_equal(cat->models[allot_catalog_find_model(cat, "V100M32")].memory_mib, 32768);
    allot_catalog_free(cat);
}

static void test_find_profile(void **state)
{
    struct allot_catalog *cat = load_default();
    int g = allot_catalog_find_profile(cat, "1g.10gb");
    const struct allot_gpu_model *a80 = &cat->models[allot_catalog_find_model(cat, "A100-80GB")];
    const struct allot_gpu_model *a40 = &cat->models[allot_catalog_find_model(cat, "A100-40GB")];
    const struct allot_gpu_model *h80 = &cat->models[allot_catalog_find_model(cat, "H100-80GB")];
    const struct allot_gpu_model *t4 = &cat->models[allot_catalog_find_model(cat, "T4")];

    assert_true(g >= 0);
    assert_int_equal(allot_catalog_find_profile(cat, "1G.10GB"), g);
    assert_string_equal(cat->profile_names[g], "1g.10gb");
    /* Same name, same global id, each model's own local profile. */
    assert_string_equal(a80->profiles[a80->profile_by_global[g]].name, "1g.10gb");
    assert_int_equal(a80->profiles[a80->profile_by_global[g]].memory_slices, 1);
    assert_string_equal(h80->profiles[h80->profile_by_global[g]].name, "1g.10gb");
    /* On the 40 GB A100, 1g.10gb is the double-memory 1g profile. */
    assert_int_equal(a40->profiles[a40->profile_by_global[g]].memory_slices, 2);
    assert_int_equal(t4->profile_by_global[g], -1);
    assert_int_equal(allot_catalog_find_profile(cat, "9g.1tb"), -1);
    assert_int_equal(allot_catalog_find_profile(cat, NULL), -1);

    /* profile_by_global and global_id are inverse, -1 elsewhere. */
    for (int i = 0; i < cat->n_models; i++) {
        const struct allot_gpu_model *m = &cat->models[i];
        int mapped = 0;

        for (int p = 0; p < m->n_profiles; p++) {
            assert_in_range(m->profiles[p].global_id, 0, cat->n_profile_names - 1);
            assert_int_equal(m->profile_by_global[m->profiles[p].global_id], p);
        }
        for (int k = 0; k < ALLOT_MAX_GLOBAL_PROFILES; k++) {
            if (m->profile_by_global[k] >= 0)
                mapped++;
            else
                assert_int_equal(m->profile_by_global[k], -1);
        }
        assert_int_equal(mapped, m->n_profiles);
    }
    allot_catalog_free(cat);
}

/* Every MIG model's geometry equals NVIDIA's table, profile by profile. */
static void test_nvidia_placements(void **state)
{
    struct allot_catalog *cat = load_default();
    int n_mig = 0;

    for (size_t k = 0; k < sizeof(nv_models) / sizeof(nv_models[0]); k++) {
        const struct nv_model *nv = &nv_models[k];
        int i = allot_catalog_find_model(cat, nv->model);
        const struct allot_gpu_model *m;

        if (i < 0)
            fail_msg("model %s missing", nv->model);
        m = &cat->models[i];
        assert_string_equal(m->name, nv->model);
        assert_true(m->mig);
        assert_int_equal(m->compute_slices, nv->compute);
        assert_int_equal(m->memory_slices, nv->memory);
        assert_int_equal(m->max_gpu_instances, nv->max_gi);
        if (m->n_profiles != nv->n_profiles)
            fail_msg("%s: %d profiles, NVIDIA lists %d", nv->model, m->n_profiles, nv->n_profiles);
        for (int p = 0; p < nv->n_profiles; p++) {
            const struct nv_profile *np = &nv->profiles[p];
            int g = allot_catalog_find_profile(cat, np->name);
            const struct allot_mig_profile *cp;

            if (g < 0 || m->profile_by_global[g] < 0)
                fail_msg("%s: profile %s missing", nv->model, np->name);
            cp = &m->profiles[m->profile_by_global[g]];
            assert_int_equal(cp->compute_slices, np->compute);
            assert_int_equal(cp->memory_slices, np->size);
            assert_int_equal(cp->max_instances, np->max);
            if (cp->n_placements != np->n_starts)
                fail_msg("%s %s: %d placements, NVIDIA lists %d", nv->model, np->name,
                         cp->n_placements, np->n_starts);
            for (int s = 0; s < np->n_starts; s++) {
                bool found = false;

                for (int q = 0; q < cp->n_placements; q++) {
                    if (cp->placements[q].start == np->starts[s]) {
                        assert_int_equal(cp->placements[q].size, np->size);
                        found = true;
                    }
                }
                if (!found)
                    fail_msg("%s %s: no placement at %d", nv->model, np->name, np->starts[s]);
            }
        }
    }
    for (int i = 0; i < cat->n_models; i++)
        n_mig += cat->models[i].mig;
    /* The table covers every MIG model but the GH200 variants (same geometry). */
    assert_int_equal(n_mig, (int)(sizeof(nv_models) / sizeof(nv_models[0])) + 2);
    allot_catalog_free(cat);
}

/* ---- malformed catalogs -------------------------------------------------- */

static void test_reject_syntax_and_shape(void **state)
{
    expect_reject("{\"version\":1,\"models\":[", "catalog JSON", "line 1", NULL);
    expect_reject("", "catalog JSON", NULL, NULL);
    expect_reject("[1,2]", "must be a JSON object", NULL, NULL);
    expect_reject("{\"models\":[]}", "missing required field \"version\"", NULL, NULL);
    expect_reject("{\"version\":2,\"models\":[]}", "\"version\"", "2", NULL);
    expect_reject("{\"version\":1}", "missing required field \"models\"", NULL, NULL);
    expect_reject("{\"version\":1,\"models\":{}}", "\"models\" must be an array", NULL, NULL);
    expect_reject("{\"version\":1,\"models\":[],\"extra\":0}", "unknown field \"extra\"", NULL,
                  NULL);
    expect_reject("{\"version\":1,\"models\":[],\"version\":1}", "duplicate", NULL, NULL);
    expect_reject("{\"version\":1,\"models\":[7]}", "model 0", "must be an object", NULL);
    expect_reject("{\"version\":\"1\",\"models\":[]}", "\"version\"", "must be an integer", NULL);
}

static void test_reject_model_fields(void **state)
{
    /* Missing name: the entry is named by its index. */
    expect_reject("{\"version\":1,\"models\":[{\"memory_mib\":1,\"sm_count\":1}]}", "model 0",
                  "missing required field \"name\"", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"sm_count\":40}]}", "model \"T4\"",
                  "missing required field \"memory_mib\"", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":16384}]}",
                  "model \"T4\"", "missing required field \"sm_count\"", NULL);
    /* Wrong types. */
    expect_reject("{\"version\":1,\"models\":[{\"name\":5,\"memory_mib\":1,\"sm_count\":1}]}",
                  "model 0", "\"name\" must be a string", NULL);
    expect_reject(
        "{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":\"16GB\",\"sm_count\":40}]}",
        "model \"T4\"", "\"memory_mib\" must be an integer", NULL);
    expect_reject(
        "{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":16384.5,\"sm_count\":40}]}",
        "model \"T4\"", "\"memory_mib\" must be an integer", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"aliases\":\"Tesla\","
                  "\"memory_mib\":1,\"sm_count\":1}]}",
                  "model \"T4\"", "\"aliases\" must be an array", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"aliases\":[1],"
                  "\"memory_mib\":1,\"sm_count\":1}]}",
                  "model \"T4\"", "alias 0 must be a string", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":1,\"sm_count\":1,"
                  "\"notes\":7}]}",
                  "model \"T4\"", "\"notes\" must be a string", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":1,\"sm_count\":1,"
                  "\"mig\":[]}]}",
                  "model \"T4\"", "\"mig\" must be an object", NULL);
    /* Non-positive values. */
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":0,\"sm_count\":40}]}",
                  "model \"T4\"", "\"memory_mib\" is 0", NULL);
    expect_reject(
        "{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":-16,\"sm_count\":40}]}",
        "model \"T4\"", "\"memory_mib\" is -16", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":1,\"sm_count\":0}]}",
                  "model \"T4\"", "\"sm_count\" is 0", NULL);
    /* Unknown field (a typo must not pass silently). */
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mb\":1,\"memory_mib\":1,"
                  "\"sm_count\":1}]}",
                  "model \"T4\"", "unknown field \"memory_mb\"", NULL);
    /* Bad names. */
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"\",\"memory_mib\":1,\"sm_count\":1}]}",
                  "model 0", "name is empty", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"Tesla T4\",\"memory_mib\":1,"
                  "\"sm_count\":1}]}",
                  "model 0", "space", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456\","
                  "\"memory_mib\":1,\"sm_count\":1}]}",
                  "model 0", "longer than 31", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"aliases\":[\"a\",\"b\",\"c\","
                  "\"d\",\"e\",\"f\",\"g\"],\"memory_mib\":1,\"sm_count\":1}]}",
                  "model \"T4\"", "\"aliases\" has 7 entries", NULL);
}

static void test_reject_duplicates(void **state)
{
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"T4\",\"memory_mib\":1,\"sm_count\":1},"
                  "{\"name\":\"t4\",\"memory_mib\":1,\"sm_count\":1}]}",
                  "model \"t4\"", "duplicate model name", "\"T4\"");
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"A\",\"aliases\":[\"X\"],\"memory_mib\":1,"
                  "\"sm_count\":1},{\"name\":\"B\",\"aliases\":[\"x\"],\"memory_mib\":1,"
                  "\"sm_count\":1}]}",
                  "model \"B\"", "duplicate alias \"x\"", "model \"A\"");
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"A\",\"aliases\":[\"B\"],\"memory_mib\":1,"
                  "\"sm_count\":1},{\"name\":\"B\",\"memory_mib\":1,\"sm_count\":1}]}",
                  "model \"B\"", "duplicate model name", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"A\",\"aliases\":[\"Q\",\"q\"],"
                  "\"memory_mib\":1,\"sm_count\":1}]}",
                  "model \"A\"", "alias \"q\" is listed twice", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"A\",\"aliases\":[\"a\"],"
                  "\"memory_mib\":1,\"sm_count\":1}]}",
                  "model \"A\"", "repeats the model's name", NULL);
    expect_reject(MIG_HEAD PROF_1G "," PROF_1G MIG_TAIL, "model \"X100\"", "profile \"1g.5gb\"",
                  "duplicate profile name");
    expect_reject(MIG_HEAD PROF_1G ",{\"name\":\"7g.40gb\",\"id\":19,\"compute_slices\":7,"
                                   "\"memory_slices\":8,\"max_instances\":1,\"memory_mib\":40000,"
                                   "\"placements\":[[0,8]]}" MIG_TAIL,
                  "profile \"7g.40gb\"", "duplicate profile id 19", NULL);
}

static void test_reject_mig(void **state)
{
    struct allot_catalog *cat = expect_accept(MIG_HEAD PROF_1G MIG_TAIL);

    assert_int_equal(cat->n_models, 1);
    assert_true(cat->models[0].mig);
    assert_int_equal(cat->models[0].profiles[0].n_placements, 7);
    allot_catalog_free(cat);

    /* The example from the documentation: a placement past the last slice. */
    expect_reject(MIG_HEAD "{\"name\":\"3g.40gb\",\"id\":9,\"compute_slices\":3,"
                           "\"memory_slices\":4,\"max_instances\":2,\"memory_mib\":40000,"
                           "\"placements\":[[0,4],[4,4],[6,4]]}" MIG_TAIL,
                  "model \"X100\": profile \"3g.40gb\": placement 2 [6,4] exceeds memory_slices 8",
                  NULL, NULL);
    expect_reject(MIG_HEAD "{\"name\":\"3g.40gb\",\"id\":9,\"compute_slices\":3,"
                           "\"memory_slices\":4,\"max_instances\":2,\"memory_mib\":40000,"
                           "\"placements\":[[0,4],[4,2]]}" MIG_TAIL,
                  "profile \"3g.40gb\"", "placement 1 [4,2] has size 2", "memory_slices is 4");
    expect_reject(MIG_HEAD
                  "{\"name\":\"2g\",\"id\":9,\"compute_slices\":2,\"memory_slices\":2,"
                  "\"max_instances\":1,\"memory_mib\":10,\"placements\":[[0,2],[0,2]]}" MIG_TAIL,
                  "profile \"2g\"", "placement 1 [0,2] is listed twice", NULL);
    expect_reject(MIG_HEAD
                  "{\"name\":\"2g\",\"id\":9,\"compute_slices\":2,\"memory_slices\":2,"
                  "\"max_instances\":1,\"memory_mib\":10,\"placements\":[[-2,2]]}" MIG_TAIL,
                  "profile \"2g\"", "negative start", NULL);
    /* a start near INT64_MAX: start + size would overflow (UBSan) */
    expect_reject(MIG_HEAD "{\"name\":\"2g\",\"id\":9,\"compute_slices\":2,\"memory_slices\":2,"
                           "\"max_instances\":1,\"memory_mib\":10,"
                           "\"placements\":[[9223372036854775807,2]]}" MIG_TAIL,
                  "profile \"2g\"", "exceeds memory_slices", NULL);
    expect_reject(MIG_HEAD
                  "{\"name\":\"2g\",\"id\":9,\"compute_slices\":2,\"memory_slices\":2,"
                  "\"max_instances\":1,\"memory_mib\":10,\"placements\":[[0,2,1]]}" MIG_TAIL,
                  "profile \"2g\"", "placement 0 must be an array [start, size]", NULL);
    expect_reject(MIG_HEAD "{\"name\":\"2g\",\"id\":9,\"compute_slices\":2,\"memory_slices\":2,"
                           "\"max_instances\":1,\"memory_mib\":10,\"placements\":[]}" MIG_TAIL,
                  "profile \"2g\"", "\"placements\" is empty", NULL);
    expect_reject(MIG_HEAD "{\"name\":\"2g\",\"id\":9,\"compute_slices\":2,\"memory_slices\":2,"
                           "\"max_instances\":1,\"memory_mib\":10}" MIG_TAIL,
                  "profile \"2g\"", "missing required field \"placements\"", NULL);
    expect_reject(MIG_HEAD "{\"name\":\"8g\",\"id\":9,\"compute_slices\":8,\"memory_slices\":8,"
                           "\"max_instances\":1,\"memory_mib\":10,\"placements\":[[0,8]]}" MIG_TAIL,
                  "profile \"8g\"", "\"compute_slices\" is 8",
                  "exceeds the model's compute_slices 7");
    expect_reject(MIG_HEAD
                  "{\"name\":\"1g\",\"id\":9,\"compute_slices\":1,\"memory_slices\":1,"
                  "\"max_instances\":3,\"memory_mib\":10,\"placements\":[[0,1],[1,1]]}" MIG_TAIL,
                  "profile \"1g\"", "\"max_instances\" is 3", "exceeds the 2 placements");
    expect_reject(MIG_HEAD
                  "{\"name\":\"1g\",\"id\":9,\"compute_slices\":1,\"memory_slices\":1,"
                  "\"max_instances\":1,\"memory_mib\":99999999,\"placements\":[[0,1]]}" MIG_TAIL,
                  "profile \"1g\"", "\"memory_mib\" is 99999999", NULL);
    expect_reject(MIG_HEAD "{\"name\":\"1g\",\"id\":9,\"compute_slices\":1,\"memory_slices\":1,"
                           "\"max_instances\":1,\"memory_mib\":10,\"placements\":[[0,1]],"
                           "\"media\":true}" MIG_TAIL,
                  "model \"X100\": profile \"1g\"", "unknown field \"media\"", NULL);
    expect_reject(MIG_HEAD "{\"name\":\"1g\",\"compute_slices\":1,\"memory_slices\":1,"
                           "\"max_instances\":1,\"memory_mib\":10,\"placements\":[[0,1]]}" MIG_TAIL,
                  "profile \"1g\"", "missing required field \"id\"", NULL);
    expect_reject(MIG_HEAD "{\"id\":1}" MIG_TAIL, "model \"X100\": profile 0",
                  "missing required field \"name\"", NULL);
    expect_reject(MIG_HEAD "{\"name\":\"1g\",\"id\":9,\"compute_slices\":\"1\","
                           "\"memory_slices\":1,\"max_instances\":1,\"memory_mib\":10,"
                           "\"placements\":[[0,1]]}" MIG_TAIL,
                  "profile \"1g\"", "\"compute_slices\" must be an integer", NULL);
    expect_reject(MIG_HEAD MIG_TAIL, "model \"X100\"", "\"profiles\" is empty", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"X\",\"memory_mib\":1,\"sm_count\":1,"
                  "\"mig\":{\"compute_slices\":7,\"memory_slices\":9,\"max_gpu_instances\":7,"
                  "\"profiles\":[]}}]}",
                  "model \"X\"", "\"memory_slices\" is 9", "1..8");
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"X\",\"memory_mib\":1,\"sm_count\":1,"
                  "\"mig\":{\"compute_slices\":7,\"memory_slices\":8,\"profiles\":[]}}]}",
                  "model \"X\"", "missing required field \"max_gpu_instances\"", NULL);
    expect_reject("{\"version\":1,\"models\":[{\"name\":\"X\",\"memory_mib\":1,\"sm_count\":1,"
                  "\"mig\":{\"compute_slices\":7,\"memory_slices\":8,\"max_gpu_instances\":7,"
                  "\"profiles\":[],\"slices\":8}}]}",
                  "model \"X\"", "unknown field \"slices\"", NULL);
}

/* More models than a uint64_t model mask can address. */
static void test_reject_too_many(void **state)
{
    char *json = allot_malloc(16384);
    size_t off = 0;

    assert_non_null(json);
    off += (size_t)allot_fmt(json + off, 16384 - off, "{\"version\":1,\"models\":[");
    for (int i = 0; i <= ALLOT_MAX_MODELS; i++)
        off += (size_t)allot_fmt(json + off, 16384 - off,
                                 "%s{\"name\":\"M%d\",\"memory_mib\":1,\"sm_count\":1}",
                                 i ? "," : "", i);
    allot_fmt(json + off, 16384 - off, "]}");
    expect_reject(json, "\"models\" has 65 entries", "at most 64", NULL);
    allot_free(json);
}

/* More distinct profile names than global ids. */
static void test_reject_too_many_profiles(void **state)
{
    size_t cap = 200000, off = 0;
    char *json = allot_malloc(cap);

    assert_non_null(json);
    off += (size_t)allot_fmt(json + off, cap - off, "{\"version\":1,\"models\":[");
    for (int m = 0; m < 9; m++) {
        off += (size_t)allot_fmt(json + off, cap - off,
                                 "%s{\"name\":\"M%d\",\"memory_mib\":100,\"sm_count\":1,\"mig\":{"
                                 "\"compute_slices\":1,\"memory_slices\":1,"
                                 "\"max_gpu_instances\":1,\"profiles\":[",
                                 m ? "," : "", m);
        for (int p = 0; p < ALLOT_MIG_MAX_PROFILES; p++)
            off += (size_t)allot_fmt(json + off, cap - off,
                                     "%s{\"name\":\"p%d.%d\",\"id\":%d,\"compute_slices\":1,"
                                     "\"memory_slices\":1,\"max_instances\":1,\"memory_mib\":1,"
                                     "\"placements\":[[0,1]]}",
                                     p ? "," : "", m, p, p);
        off += (size_t)allot_fmt(json + off, cap - off, "]}}");
    }
    allot_fmt(json + off, cap - off, "]}");
    assert_true(off < cap);
    expect_reject(json, "model \"M8\"", "more than 128 distinct profile names", NULL);
    allot_free(json);
}

/* The text need not be NUL-terminated; a short len ends it early. */
static void test_parse_len(void **state)
{
    static const char text[] = "{\"version\":1,\"models\":[]}GARBAGE";
    char err[128];
    struct allot_catalog *cat = allot_catalog_parse(text, strlen(text) - 7, err, sizeof(err));

    assert_non_null(cat);
    assert_int_equal(cat->n_models, 0);
    allot_catalog_free(cat);
    assert_null(allot_catalog_parse(text, strlen(text), err, sizeof(err)));
    assert_null(allot_catalog_parse(NULL, 0, err, sizeof(err)));
    /* A NULL error buffer is allowed. */
    assert_null(allot_catalog_parse(text, strlen(text), NULL, 0));
    allot_catalog_free(NULL);
}

/* ---- allocation failures ------------------------------------------------- */

/* The embedded catalog text (generated from data/gpus.json into the library). */
extern const char allot_catalog_json[];
extern const unsigned long allot_catalog_json_len;

/* Fails the Nth allocation for N = 1, 2, ... until a parse succeeds: every
 * failing parse returns NULL with "out of memory" and leaks nothing (ASan's
 * leak check covers the last point). */
static void fault_loop(const char *json, size_t len, bool sticky)
{
    char err[256];
    unsigned long n;

    for (n = 1; n < 1000000; n++) {
        struct allot_catalog *cat;

        err[0] = '\0';
        allot_alloc_fail_at(n, sticky);
        cat = allot_catalog_parse(json, len, err, sizeof(err));
        if (cat) {
            unsigned long used = allot_alloc_count();

            allot_alloc_fail_at(0, false);
            assert_true(used < n); /* succeeded only once no failure was hit */
            allot_catalog_free(cat);
            break;
        }
        if (strcmp(err, "out of memory") != 0) {
            allot_alloc_fail_at(0, false);
            fail_msg("failure at allocation %lu: \"%s\"", n, err);
        }
    }
    allot_alloc_fail_at(0, false);
    assert_true(n > 2); /* the parse allocates, so the loop ran */
}

static void test_alloc_failures(void **state)
{
    fault_loop(allot_catalog_json, allot_catalog_json_len, false);
    fault_loop(allot_catalog_json, allot_catalog_json_len, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_loads),
        cmocka_unit_test(test_find_model),
        cmocka_unit_test(test_find_profile),
        cmocka_unit_test(test_nvidia_placements),
        cmocka_unit_test(test_reject_syntax_and_shape),
        cmocka_unit_test(test_reject_model_fields),
        cmocka_unit_test(test_reject_duplicates),
        cmocka_unit_test(test_reject_mig),
        cmocka_unit_test(test_reject_too_many),
        cmocka_unit_test(test_reject_too_many_profiles),
        cmocka_unit_test(test_parse_len),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
