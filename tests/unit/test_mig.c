/*
 * Unit tests of the MIG geometry (src/core/mig.c) over the default catalog
 * and small synthetic models: allocation and release, the five placement
 * rules (listed placement, no overlap, max_instances, max_gpu_instances,
 * compute slices), layout feasibility, the placement choice, and the number
 * of maximal layouts per model, cross-checked by a brute force over all
 * subsets written independently of the search in mig.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "allot/catalog.h"
#include "allot/common.h"
#include "allot/mig.h"

#include <string.h>

static struct allot_catalog *cat;

static int setup(void **state)
{
    char err[256];

    cat = allot_catalog_default(err, sizeof(err));
    if (!cat) {
        print_error("default catalog: %s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    allot_catalog_free(cat);
    cat = NULL;
    return 0;
}

static const struct allot_gpu_model *model(const char *name)
{
    int i = allot_catalog_find_model(cat, name);

    if (i < 0)
        fail_msg("model %s missing", name);
    return &cat->models[i];
}

/* Local index of profile `name` in m. */
static int prof(const struct allot_gpu_model *m, const char *name)
{
    int g = allot_catalog_find_profile(cat, name);

    if (g < 0 || m->profile_by_global[g] < 0)
        fail_msg("%s: profile %s missing", m->name, name);
    return m->profile_by_global[g];
}

static struct allot_mig_state empty_state(void)
{
    struct allot_mig_state s;

    memset(&s, 0, sizeof(s));
    return s;
}

/* ---- allocation and release ---------------------------------------------- */

static void test_alloc_free(void **state)
{
    const struct allot_gpu_model *m = model("A100-80GB");
    int p1 = prof(m, "1g.10gb"), p3 = prof(m, "3g.40gb");
    struct allot_mig_state s = empty_state(), before;

    assert_int_equal(allot_mig_alloc(m, &s, p3, 0), 0);
    assert_int_equal(s.used_mask, 0x0f);
    assert_int_equal(s.compute_used, 3);
    assert_int_equal(s.n_instances, 1);
    before = s;
    assert_int_equal(allot_mig_alloc(m, &s, p3, 0), ALLOT_ENOSPC); /* occupied */
    assert_int_equal(allot_mig_alloc(m, &s, p1, 2), ALLOT_ENOSPC); /* overlaps 3g@0 */
    assert_memory_equal(&s, &before, sizeof(s));
    assert_int_equal(allot_mig_alloc(m, &s, p3, 4), 0);
    assert_int_equal(s.used_mask, 0xff);
    assert_int_equal(s.compute_used, 6);
    for (int st = 0; st < 8; st++)
        assert_false(allot_mig_can_place(m, &s, p1, st));

    assert_int_equal(allot_mig_free(&s, 2), ALLOT_ENOENT); /* not an instance's start */
    assert_int_equal(allot_mig_free(&s, 0), 0);
    assert_int_equal(allot_mig_free(&s, 0), ALLOT_ENOENT);
    assert_int_equal(s.used_mask, 0xf0);
    assert_int_equal(s.compute_used, 3);
    assert_int_equal(s.n_instances, 1);
    assert_int_equal(s.inst[0].start, 4);
    assert_int_equal(allot_mig_free(&s, 4), 0);
    before = empty_state();
    assert_memory_equal(&s, &before, sizeof(s));
    assert_int_equal(allot_mig_free(NULL, 0), ALLOT_ENOENT);
}

static void test_invalid_requests(void **state)
{
    const struct allot_gpu_model *m = model("A100-80GB");
    const struct allot_gpu_model *t4 = model("T4");
    struct allot_mig_state s = empty_state(), before = empty_state();

    assert_int_equal(allot_mig_alloc(m, &s, prof(m, "4g.40gb"), 4), ALLOT_EINVAL); /* only at 0 */
    assert_int_equal(allot_mig_alloc(m, &s, prof(m, "1g.10gb"), 7), ALLOT_EINVAL); /* 1g: 0..6 */
    assert_int_equal(allot_mig_alloc(m, &s, prof(m, "2g.20gb"), 1), ALLOT_EINVAL);
    assert_int_equal(allot_mig_alloc(m, &s, prof(m, "1g.10gb"), -1), ALLOT_EINVAL);
    assert_int_equal(allot_mig_alloc(m, &s, -1, 0), ALLOT_EINVAL);
    assert_int_equal(allot_mig_alloc(m, &s, m->n_profiles, 0), ALLOT_EINVAL);
    assert_int_equal(allot_mig_alloc(t4, &s, 0, 0), ALLOT_EINVAL); /* not MIG-capable */
    assert_memory_equal(&s, &before, sizeof(s));
    assert_false(allot_mig_can_place(m, &s, prof(m, "4g.40gb"), 4));
    assert_false(allot_mig_can_place(t4, &s, 0, 0));
    assert_int_equal(allot_mig_options(t4, &s), 0);
    assert_int_equal(allot_mig_list_placements(t4, &s, 0, NULL, 0), 0);
    assert_int_equal(allot_mig_count_maximal_layouts(t4), 0);
}

static void test_instances_sorted(void **state)
{
    const struct allot_gpu_model *m = model("H100-80GB");
    int p1 = prof(m, "1g.10gb");
    struct allot_mig_state s = empty_state();

    assert_int_equal(allot_mig_alloc(m, &s, p1, 6), 0);
    assert_int_equal(allot_mig_alloc(m, &s, p1, 0), 0);
    assert_int_equal(allot_mig_alloc(m, &s, p1, 3), 0);
    assert_int_equal(s.inst[0].start, 0);
    assert_int_equal(s.inst[1].start, 3);
    assert_int_equal(s.inst[2].start, 6);
    assert_int_equal(s.inst[1].compute, 1);
    assert_int_equal(allot_mig_free(&s, 3), 0);
    assert_int_equal(s.inst[0].start, 0);
    assert_int_equal(s.inst[1].start, 6);
    assert_int_equal(s.used_mask, 0x41);
}

/* A synthetic model where max_instances, max_gpu_instances and compute
 * slices bind before memory does. */
static const char rules_json[] =
    "{\"version\":1,\"models\":[{\"name\":\"RULES\",\"memory_mib\":8000,\"sm_count\":8,"
    "\"mig\":{\"compute_slices\":7,\"memory_slices\":8,\"max_gpu_instances\":3,\"profiles\":["
    "{\"name\":\"a1\",\"id\":1,\"compute_slices\":1,\"memory_slices\":1,\"max_instances\":2,"
    "\"memory_mib\":900,\"placements\":[[0,1],[1,1],[2,1],[3,1],[4,1],[5,1],[6,1],[7,1]]},"
    "{\"name\":\"b1\",\"id\":2,\"compute_slices\":1,\"memory_slices\":1,\"max_instances\":3,"
    "\"memory_mib\":900,\"placements\":[[0,1],[1,1],[2,1],[3,1],[4,1],[5,1],[6,1],[7,1]]},"
    "{\"name\":\"c4\",\"id\":3,\"compute_slices\":4,\"memory_slices\":2,\"max_instances\":2,"
    "\"memory_mib\":1900,\"placements\":[[0,2],[2,2],[4,2],[6,2]]}]}}]}";

static void test_count_rules(void **state)
{
    char err[256];
    struct allot_catalog *rules =
        allot_catalog_parse(rules_json, strlen(rules_json), err, sizeof(err));
    const struct allot_gpu_model *m;
    struct allot_mig_state s = empty_state(), before;
    struct allot_mig_placement pl[8];

    if (!rules)
        fail_msg("%s", err);
    m = &rules->models[0];
    /* max_instances of a1 is 2 although 8 placements are free. */
    assert_int_equal(allot_mig_alloc(m, &s, 0, 0), 0);
    assert_int_equal(allot_mig_alloc(m, &s, 0, 1), 0);
    before = s;
    assert_int_equal(allot_mig_alloc(m, &s, 0, 2), ALLOT_ENOSPC);
    assert_memory_equal(&s, &before, sizeof(s));
    assert_false(allot_mig_can_place(m, &s, 0, 5));
    assert_int_equal(allot_mig_list_placements(m, &s, 0, pl, 8), 0);
    /* max_gpu_instances is 3. */
    assert_int_equal(allot_mig_alloc(m, &s, 1, 2), 0);
    assert_int_equal(allot_mig_alloc(m, &s, 1, 3), ALLOT_ENOSPC);
    assert_int_equal(allot_mig_options(m, &s), 0);
    assert_int_equal(allot_mig_best_placement(m, &s, 1, &pl[0]), ALLOT_ENOSPC);

    /* Compute: two c4 need 8 of the 7 compute slices. */
    s = empty_state();
    assert_int_equal(allot_mig_alloc(m, &s, 2, 0), 0);
    before = s;
    assert_int_equal(allot_mig_alloc(m, &s, 2, 2), ALLOT_ENOSPC);
    assert_memory_equal(&s, &before, sizeof(s));
    assert_int_equal(allot_mig_list_placements(m, &s, 2, pl, 8), 0);
    assert_int_equal(allot_mig_alloc(m, &s, 1, 2), 0);
    assert_int_equal(allot_mig_alloc(m, &s, 1, 3), 0);
    assert_int_equal(allot_mig_alloc(m, &s, 1, 4), ALLOT_ENOSPC); /* 4 instances */
    assert_int_equal(allot_mig_free(&s, 0), 0);
    assert_int_equal(s.compute_used, 2);
    assert_int_equal(allot_mig_alloc(m, &s, 2, 4), 0);
    {
        int two_c4[] = {2, 2};
        int three_b1_c4[] = {1, 1, 1, 2};

        assert_false(allot_mig_layout_feasible(m, two_c4, 2));
        assert_false(allot_mig_layout_feasible(m, three_b1_c4, 4));
    }
    allot_catalog_free(rules);
}

static void test_list_placements(void **state)
{
    const struct allot_gpu_model *m = model("A100-80GB");
    int p1 = prof(m, "1g.10gb");
    struct allot_mig_state s = empty_state();
    struct allot_mig_placement pl[8];

    assert_int_equal(allot_mig_list_placements(m, &s, p1, pl, 8), 7);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(pl[i].start, i);
        assert_int_equal(pl[i].size, 1);
    }
    memset(pl, 0xee, sizeof(pl));
    assert_int_equal(allot_mig_list_placements(m, &s, p1, pl, 3), 7);
    assert_int_equal(pl[2].start, 2);
    assert_int_equal(pl[3].start, 0xee); /* nothing past max written */
    assert_int_equal(allot_mig_list_placements(m, &s, p1, NULL, 0), 7);
    assert_int_equal(allot_mig_alloc(m, &s, prof(m, "4g.40gb"), 0), 0);
    assert_int_equal(allot_mig_list_placements(m, &s, p1, pl, 8), 3);
    assert_int_equal(pl[0].start, 4);
    assert_int_equal(pl[1].start, 5);
    assert_int_equal(pl[2].start, 6);
    assert_int_equal(allot_mig_list_placements(m, &s, prof(m, "3g.40gb"), pl, 8), 1);
    assert_int_equal(pl[0].start, 4);
    assert_int_equal(allot_mig_list_placements(m, &s, prof(m, "1g.20gb"), pl, 8), 2);
}

/* ---- feasibility --------------------------------------------------------- */

static bool feasible(const struct allot_gpu_model *m, const char *const *names, int n)
{
    int p[16];

    for (int i = 0; i < n; i++)
        p[i] = prof(m, names[i]);
    return allot_mig_layout_feasible(m, p, n);
}

#define FEASIBLE(m, ...)                                                                           \
    feasible(m, (const char *const[]){__VA_ARGS__},                                                \
             (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

static void test_layout_feasible(void **state)
{
    const struct allot_gpu_model *a = model("A100-80GB");
    const struct allot_gpu_model *a30 = model("A30");
    const struct allot_gpu_model *b = model("B200");

    assert_true(FEASIBLE(a, "4g.40gb", "3g.40gb"));
    assert_false(FEASIBLE(a, "4g.40gb", "4g.40gb"));
    assert_true(FEASIBLE(a, "3g.40gb", "3g.40gb"));
    /* 3g+3g take all 8 memory slices, so nothing else fits. */
    assert_false(FEASIBLE(a, "3g.40gb", "3g.40gb", "1g.10gb"));
    assert_true(
        FEASIBLE(a, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"));
    assert_false(FEASIBLE(a, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb",
                          "1g.10gb", "1g.10gb"));
    assert_true(FEASIBLE(a, "7g.80gb"));
    assert_false(FEASIBLE(a, "7g.80gb", "1g.10gb"));
    assert_true(FEASIBLE(a, "2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"));
    assert_false(FEASIBLE(a, "2g.20gb", "2g.20gb", "2g.20gb", "2g.20gb"));
    assert_true(FEASIBLE(a, "1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb"));
    assert_false(FEASIBLE(a, "1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb", "1g.10gb"));
    assert_true(FEASIBLE(a, "4g.40gb", "2g.20gb", "1g.10gb"));
    assert_true(FEASIBLE(a, "4g.40gb", "1g.20gb", "1g.20gb"));
    /* 3g@4 with the 2g and both 1g in slices 0..3: 7 compute slices. */
    assert_true(FEASIBLE(a, "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"));
    /* 4g@0 leaves 2g only the start 4 (and 8 compute slices would be needed). */
    assert_false(FEASIBLE(a, "4g.40gb", "2g.20gb", "2g.20gb"));
    /* 4g@0 + 3g@4 fill the memory: nothing else fits. */
    assert_true(FEASIBLE(b, "3g.90gb", "4g.90gb"));
    assert_false(FEASIBLE(b, "4g.90gb", "3g.90gb", "1g.23gb"));

    assert_true(FEASIBLE(a30, "2g.12gb", "1g.6gb", "1g.6gb"));
    assert_true(FEASIBLE(a30, "2g.12gb", "2g.12gb"));
    assert_true(FEASIBLE(a30, "1g.6gb", "1g.6gb", "1g.6gb", "1g.6gb"));
    assert_false(FEASIBLE(a30, "4g.24gb", "1g.6gb"));
    assert_false(FEASIBLE(a30, "2g.12gb", "2g.12gb", "1g.6gb"));

    assert_true(allot_mig_layout_feasible(a, NULL, 0));
    {
        int bad[] = {0, 99};

        assert_false(allot_mig_layout_feasible(a, bad, 2));
        assert_false(allot_mig_layout_feasible(model("T4"), bad, 1));
    }
}

/* ---- placement choice ---------------------------------------------------- */

static void test_options(void **state)
{
    struct allot_mig_state s = empty_state();
    const struct allot_gpu_model *a = model("A100-80GB");

    /* Empty 7/8-slice GPU: 1g 7x1 + 1g.20gb 4x2 + 2g 3x2 + 3g 2x4 + 4g 1x4 + 7g 1x8. */
    assert_int_equal(allot_mig_options(a, &s), 7 + 8 + 6 + 8 + 4 + 8);
    /* Empty A30: 1g 4x1 + 2g 2x2 + 4g 1x4. */
    assert_int_equal(allot_mig_options(model("A30-24GB"), &s), 12);
    assert_int_equal(allot_mig_alloc(a, &s, prof(a, "7g.80gb"), 0), 0);
    assert_int_equal(allot_mig_options(a, &s), 0);
}

static void test_best_placement(void **state)
{
    const struct allot_gpu_model *a = model("A100-80GB");
    int p1 = prof(a, "1g.10gb"), p1d = prof(a, "1g.20gb"), p2 = prof(a, "2g.20gb");
    int p3 = prof(a, "3g.40gb"), p4 = prof(a, "4g.40gb"), p7 = prof(a, "7g.80gb");
    struct allot_mig_state s = empty_state();
    struct allot_mig_placement pl;

    /* A 1g on an empty GPU must leave the only 4g placement (slices 0..3)
     * open; slice 6 blocks least (1g@6, 1g.20gb@6, 3g@4, 7g). */
    assert_int_equal(allot_mig_best_placement(a, &s, p1, &pl), 0);
    assert_int_equal(pl.start, 6);
    assert_int_equal(pl.size, 1);
    assert_int_equal(allot_mig_alloc(a, &s, p1, pl.start), 0);
    assert_true(allot_mig_can_place(a, &s, p4, 0));

    /* Two more 1g in a row keep slices 0..3 free for the 4g. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(allot_mig_best_placement(a, &s, p1, &pl), 0);
        assert_true(pl.start >= 4);
        assert_int_equal(allot_mig_alloc(a, &s, p1, pl.start), 0);
    }
    assert_true(allot_mig_can_place(a, &s, p4, 0));
    assert_int_equal(s.used_mask, 0x70);

    /* With slices 4..7 taken, every 1g spot blocks the 4g: still placed. */
    s = empty_state();
    assert_int_equal(allot_mig_alloc(a, &s, p3, 4), 0);
    assert_int_equal(allot_mig_best_placement(a, &s, p1, &pl), 0);
    assert_true(pl.start < 4);
    assert_true(allot_mig_can_place(a, &s, p1, pl.start));

    /* 2g and 1g.20gb go high too; the 4g keeps its slot. */
    s = empty_state();
    assert_int_equal(allot_mig_best_placement(a, &s, p2, &pl), 0);
    assert_int_equal(pl.start, 4);
    assert_int_equal(pl.size, 2);
    assert_int_equal(allot_mig_best_placement(a, &s, p1d, &pl), 0);
    assert_int_equal(pl.start, 6);
    assert_int_equal(allot_mig_best_placement(a, &s, p7, &pl), 0);
    assert_int_equal(pl.start, 0);
    assert_int_equal(pl.size, 8);

    /* A30: all four 1g spots are equal; the tie goes to the highest. */
    {
        const struct allot_gpu_model *a30 = model("A30-24GB");
        struct allot_mig_state e = empty_state();

        assert_int_equal(allot_mig_best_placement(a30, &e, prof(a30, "1g.6gb"), &pl), 0);
        assert_int_equal(pl.start, 3);
    }

    /* Full GPU and bad arguments. */
    s = empty_state();
    assert_int_equal(allot_mig_alloc(a, &s, p7, 0), 0);
    assert_int_equal(allot_mig_best_placement(a, &s, p1, &pl), ALLOT_ENOSPC);
    assert_int_equal(allot_mig_best_placement(a, &s, -1, &pl), ALLOT_EINVAL);
    assert_int_equal(allot_mig_best_placement(model("T4"), &s, 0, &pl), ALLOT_EINVAL);
}

/* ---- maximal layouts ----------------------------------------------------- */

/* Independent brute force: every subset of (profile, placement) pairs is
 * checked against the five rules directly; maximal = valid and no single
 * pair can be added. */
static long brute_force_maximal(const struct allot_gpu_model *m)
{
    int cp[64], cc[64];
    unsigned cmask[64];
    int n = 0;
    unsigned long total;
    unsigned char *valid;
    long count = 0;

    for (int p = 0; p < m->n_profiles; p++) {
        for (int i = 0; i < m->profiles[p].n_placements; i++) {
            const struct allot_mig_placement *pl = &m->profiles[p].placements[i];

            cp[n] = p;
            cc[n] = m->profiles[p].compute_slices;
            cmask[n] = ((1u << pl->size) - 1u) << pl->start;
            n++;
        }
    }
    assert_true(n <= 20);
    total = 1ul << n;
    valid = allot_calloc(total, 1);
    assert_non_null(valid);
    for (unsigned long set = 0; set < total; set++) {
        unsigned used = 0;
        int compute = 0, inst = 0, per[ALLOT_MIG_MAX_PROFILES] = {0};
        bool ok = true;

        for (int i = 0; i < n && ok; i++) {
            if (!(set & (1ul << i)))
                continue;
            ok = !(used & cmask[i]);
            used |= cmask[i];
            compute += cc[i];
            inst++;
            per[cp[i]]++;
        }
        ok = ok && compute <= m->compute_slices && inst <= m->max_gpu_instances;
        for (int p = 0; p < m->n_profiles && ok; p++)
            ok = per[p] <= m->profiles[p].max_instances;
        valid[set] = ok;
    }
    for (unsigned long set = 0; set < total; set++) {
        bool maximal = valid[set];

        for (int i = 0; i < n && maximal; i++) {
            if (!(set & (1ul << i)) && valid[set | (1ul << i)])
                maximal = false;
        }
        count += maximal;
    }
    allot_free(valid);
    return count;
}

static void test_count_maximal_layouts(void **state)
{
    /*
     * Expected counts. A30 (4 memory slices, 4 compute slices, 1g at 0..3,
     * 2g at 0 or 2, 4g at 0), by hand: either the 4g alone (1 layout), or
     * each half [0,1] and [2,3] holds a 2g or two 1g (a half with one 1g or
     * none is not maximal: another 1g fits, and compute never runs out since
     * a full GPU uses exactly 4). 2 x 2 = 4, so 5 in all.
     * The 7/8-slice models share one geometry, so they share one count; 78
     * comes from the search and agrees with the brute force below.
     */
    static const struct {
        const char *model;
        long count;
    } expected[] = {
        {"A30-24GB", 5},     {"A100-40GB", 78},  {"A100-80GB", 78},
        {"H100-80GB", 78},   {"H100-94GB", 78},  {"GH200-96GB", 78},
        {"GH200-144GB", 78}, {"H200-141GB", 78}, {"B200-180GB", 78},
    };
    int n_mig = 0;

    for (size_t k = 0; k < sizeof(expected) / sizeof(expected[0]); k++) {
        const struct allot_gpu_model *m = model(expected[k].model);
        long got = allot_mig_count_maximal_layouts(m);

        if (got != expected[k].count)
            fail_msg("%s: %ld maximal layouts, expected %ld", m->name, got, expected[k].count);
    }
    for (int i = 0; i < cat->n_models; i++) {
        const struct allot_gpu_model *m = &cat->models[i];
        long got = allot_mig_count_maximal_layouts(m);

        if (!m->mig) {
            assert_int_equal(got, 0);
            continue;
        }
        n_mig++;
        if (got != brute_force_maximal(m))
            fail_msg("%s: search says %ld, brute force %ld", m->name, got, brute_force_maximal(m));
    }
    assert_int_equal(n_mig, (int)(sizeof(expected) / sizeof(expected[0])));
}

/* The synthetic model's count, where count limits matter, also agrees. */
static void test_count_maximal_rules_model(void **state)
{
    char err[256];
    struct allot_catalog *rules =
        allot_catalog_parse(rules_json, strlen(rules_json), err, sizeof(err));

    if (!rules)
        fail_msg("%s", err);
    assert_int_equal(allot_mig_count_maximal_layouts(&rules->models[0]),
                     brute_force_maximal(&rules->models[0]));
    assert_true(allot_mig_count_maximal_layouts(&rules->models[0]) > 0);
    allot_catalog_free(rules);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_free),
        cmocka_unit_test(test_invalid_requests),
        cmocka_unit_test(test_instances_sorted),
        cmocka_unit_test(test_count_rules),
        cmocka_unit_test(test_list_placements),
        cmocka_unit_test(test_layout_feasible),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_best_placement),
        cmocka_unit_test(test_count_maximal_layouts),
        cmocka_unit_test(test_count_maximal_rules_model),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
