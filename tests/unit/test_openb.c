/*
 * Unit tests for src/sim/openb.c, the openb trace reader: the good sample
 * files of every shape under tests/data/openb/, the broken-file corpus under
 * tests/data/openb/bad/ (each file checked for its FILE:LINE: message, and
 * every file in the folder must be listed here), in-memory edge cases,
 * random mutations of the good files, and an allocation-failure loop.
 * Runs from the source root; never reads the shared real traces.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allot/common.h"
#include "openb.h"

#define DATA ALLOT_SOURCE_DIR "/tests/data/openb/"

static void check_good_pods(const struct openb_pods *p)
{
    assert_int_equal(p->n, 10);
    assert_string_equal(p->v[0].name, "pod-00");
    assert_int_equal(p->v[0].cpu_milli, 12000);
    assert_int_equal(p->v[1].num_gpu, 1);
    assert_int_equal(p->v[1].gpu_milli, 460);
    assert_int_equal(p->v[2].num_gpu, 0);
    assert_int_equal(p->v[2].gpu_milli, 0);
    assert_int_equal(p->v[3].num_gpu, 8);
    assert_int_equal(p->v[3].gpu_milli, 1000);
    assert_string_equal(p->v[9].name, "pod-09");
    assert_int_equal(p->v[9].gpu_milli, 1);
}

static void test_nodes_good(void **state)
{
    struct openb_nodes l = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_read_nodes(DATA "nodes.csv", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 5);
    assert_string_equal(l.v[0].name, "node-a");
    assert_int_equal(l.v[0].cpu_milli, 96000);
    assert_int_equal(l.v[0].memory_mib, 786432);
    assert_int_equal(l.v[0].gpu, 8);
    assert_string_equal(l.v[0].model, "V100M32");
    assert_int_equal(l.v[3].memory_mib, 1048576);
    assert_int_equal(l.v[4].gpu, 0);
    assert_string_equal(l.v[4].model, "");
    openb_nodes_free(&l);
    assert_null(l.v);
    assert_int_equal(l.n, 0);
    openb_nodes_free(&l); /* freeing an empty list is fine */
    openb_nodes_free(NULL);
}

static void test_nodes_crlf_unterminated(void **state)
{
    struct openb_nodes l = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_read_nodes(DATA "nodes_crlf.csv", &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.v[0].model, "V100M32");
    assert_string_equal(l.v[1].model, "");
    assert_string_equal(l.v[2].name, "node-c");
    assert_string_equal(l.v[2].model, "P100");
    openb_nodes_free(&l);
}

static void test_pods_full(void **state)
{
    struct openb_pods p = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_read_pods(DATA "pods_full.csv", &p, err, sizeof(err)), 0);
    check_good_pods(&p);
    assert_true(p.has_memory && p.has_spec && p.has_times);
    assert_int_equal(p.v[0].memory_mib, 16384);
    assert_string_equal(p.v[0].gpu_spec, "");
    assert_string_equal(p.v[3].gpu_spec, "V100M16|V100M32");
    assert_string_equal(p.v[4].qos, "Burstable");
    assert_string_equal(p.v[4].phase, "Failed");
    assert_int_equal(p.v[1].creation_time, 427061);
    assert_int_equal(p.v[1].deletion_time, 12902960);
    assert_int_equal(p.v[1].scheduled_time, 427061);
    assert_int_equal(p.v[6].scheduled_time, -1); /* Pending: empty */
    openb_pods_free(&p);
}

static void test_pods_nomem(void **state)
{
    struct openb_pods p = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_read_pods(DATA "pods_nomem.csv", &p, err, sizeof(err)), 0);
    check_good_pods(&p);
    assert_false(p.has_memory);
    assert_true(p.has_spec && p.has_times);
    for (size_t i = 0; i < p.n; i++)
        assert_int_equal(p.v[i].memory_mib, -1);
    assert_string_equal(p.v[7].gpu_spec, "A10|G2");
    openb_pods_free(&p);
}

static void test_pods_multigpu(void **state)
{
    struct openb_pods p = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_read_pods(DATA "pods_multigpu.csv", &p, err, sizeof(err)), 0);
    check_good_pods(&p);
    assert_true(p.has_memory);
    assert_false(p.has_spec || p.has_times);
    for (size_t i = 0; i < p.n; i++) {
        assert_string_equal(p.v[i].gpu_spec, "");
        assert_string_equal(p.v[i].qos, "");
        assert_string_equal(p.v[i].phase, "");
        assert_int_equal(p.v[i].creation_time, -1);
        assert_int_equal(p.v[i].deletion_time, -1);
        assert_int_equal(p.v[i].scheduled_time, -1);
    }
    assert_int_equal(p.v[7].memory_mib, 120000);
    openb_pods_free(&p);
}

static void test_columns_by_name(void **state)
{
    static const char csv[] = "gpu_milli,name,num_gpu,cpu_milli\n"
                              "500,p0,1,4000\n"
                              "0,p1,0,8000";
    struct openb_pods p = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_parse_pods(csv, strlen(csv), "mem", &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 2);
    assert_string_equal(p.v[0].name, "p0");
    assert_int_equal(p.v[0].gpu_milli, 500);
    assert_int_equal(p.v[0].cpu_milli, 4000);
    assert_int_equal(p.v[1].cpu_milli, 8000);
    assert_int_equal(p.v[1].memory_mib, -1);
    openb_pods_free(&p);
}

/* Names may hold any valid UTF-8 but no space. */
static void test_utf8_names(void **state)
{
    static const char csv[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                              "pod-\xc3\xa9t\xc3\xa9,1000,1024,1,1000\n"
                              "pod-\xe2\x82\xac-\xf0\x9f\x9a\x80,1000,1024,0,0\n";
    struct openb_pods p = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_parse_pods(csv, sizeof(csv) - 1, "mem", &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 2);
    assert_string_equal(p.v[0].name, "pod-\xc3\xa9t\xc3\xa9");
    openb_pods_free(&p);
}

/* ---- the broken-file corpus ---- */

struct bad_case {
    bool nodes;         /* read as a node list (else a pod list) */
    const char *file;   /* under tests/data/openb/bad/ */
    const char *expect; /* substring of the message */
};

static const struct bad_case bad_cases[] = {
    {true, "nodes_no_header.csv", "nodes_no_header.csv:1: missing header line"},
    {true, "nodes_unknown_column.csv", "nodes_unknown_column.csv:1: unknown column \"gpus\""},
    {false, "pods_missing_column.csv", "pods_missing_column.csv:1: missing column \"gpu_milli\""},
    {false, "pods_duplicate_column.csv",
     "pods_duplicate_column.csv:1: duplicate column \"cpu_milli\""},
    {false, "pods_header_only.csv", "pods_header_only.csv:1: header but no data rows"},
    {true, "nodes_empty.csv", "nodes_empty.csv: empty file"},
    {false, "pods_short_row.csv", "pods_short_row.csv:3: expected 11 fields, got 9"},
    {true, "nodes_not_integer.csv", "nodes_not_integer.csv:5: cpu_milli \"abc\" is not an integer"},
    {false, "pods_gpu_milli_range.csv",
     "pods_gpu_milli_range.csv:4: gpu_milli \"1200\" out of range 0..1000"},
    {false, "pods_negative_cpu.csv", "pods_negative_cpu.csv:2: cpu_milli \"-500\" is negative"},
    {false, "pods_num_gpu_range.csv",
     "pods_num_gpu_range.csv:2: num_gpu \"65\" out of range 0..64"},
    {false, "pods_multigpu_share.csv", "pods_multigpu_share.csv:3: gpu_milli 500 with num_gpu 2"},
    {false, "pods_milli_no_gpu.csv", "pods_milli_no_gpu.csv:2: gpu_milli 300 with num_gpu 0"},
    {false, "pods_empty_name.csv", "pods_empty_name.csv:3: name is empty"},
    {true, "nodes_duplicate.csv",
     "nodes_duplicate.csv:5: duplicate node name \"n2\" (first on line 3)"},
    {false, "pods_overflow.csv",
     "pods_overflow.csv:2: memory_mib \"99999999999999999999999\" out of range"},
    {false, "pods_quoted.csv", "pods_quoted.csv:2: '\"' at column 1: quoted fields"},
    {true, "nodes_model_missing.csv",
     "nodes_model_missing.csv:2: model is empty for a node with 8"},
    {false, "pods_blank_line.csv", "pods_blank_line.csv:3: empty line"},
    {false, "pods_bad_spec.csv", "pods_bad_spec.csv:2: gpu_spec \"T4||P100\" has an empty model"},
    {false, "pods_deletion_before_creation.csv",
     "pods_deletion_before_creation.csv:2: deletion_time 400 before creation_time 500"},
    {true, "nodes_tab.csv", "nodes_tab.csv:3: control character 0x09 at column 3"},
    {false, "pods_duplicate_name.csv",
     "pods_duplicate_name.csv:4: duplicate pod name \"pod-00\" (first on line 2)"},
    {false, "pods_nomem_extra_field.csv",
     "pods_nomem_extra_field.csv:2: expected 10 fields, got 11"},
    {false, "pods_float.csv", "pods_float.csv:2: gpu_milli \"1000.0\" is not an integer"},
    {true, "nodes_given_pods.csv", "nodes_given_pods.csv:1: unknown column \"name\""},
    {false, "pods_nul.csv", "pods_nul.csv:3: NUL byte at column 10"},
    {true, "nodes_model_without_gpu.csv",
     "nodes_model_without_gpu.csv:2: model \"T4\" given for a node with no GPUs"},
    {false, "pods_leading_space.csv",
     "pods_leading_space.csv:2: cpu_milli \" 1000\" is not an integer"},
    {false, "pods_share_zero.csv", "pods_share_zero.csv:2: gpu_milli 0 with num_gpu 1"},
    {true, "nodes_lone_cr.csv", "nodes_lone_cr.csv:3: carriage return inside the line"},
    {true, "nodes_name_space.csv",
     "nodes_name_space.csv:3: sn (the node name) \"gpu node 2\" contains a space"},
    {false, "pods_name_space.csv", "pods_name_space.csv:3: name \"pod 01\" contains a space"},
    {false, "pods_name_utf8.csv",
     "pods_name_utf8.csv:2: name \"pod-\\xff0\" is not valid UTF-8 (byte 5)"},
    {false, "pods_name_overlong.csv",
     "pods_name_overlong.csv:3: name \"pod-\\xc3\\xa9\\xc0\\xaf\" is not valid UTF-8 (byte 7)"},
};

static const struct bad_case *find_case(const char *file)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
        if (strcmp(bad_cases[i].file, file) == 0)
            return &bad_cases[i];
    return NULL;
}

static int read_any(bool nodes, const char *path, char *err, size_t errlen)
{
    int rc;

    if (nodes) {
        struct openb_nodes l = {0};

        rc = openb_read_nodes(path, &l, err, errlen);
        openb_nodes_free(&l);
    } else {
        struct openb_pods p = {0};

        rc = openb_read_pods(path, &p, err, errlen);
        openb_pods_free(&p);
    }
    return rc;
}

static void test_bad_corpus(void **state)
{
    char path[512], err[512];

    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        int rc;

        allot_fmt(path, sizeof(path), "%sbad/%s", DATA, c->file);
        err[0] = '\0';
        rc = read_any(c->nodes, path, err, sizeof(err));
        if (rc != ALLOT_EINVAL || !strstr(err, c->expect))
            fail_msg("%s: rc %d, message \"%s\", expected \"%s\"", c->file, rc, err, c->expect);
    }
}

/* Every file in bad/ must have an entry, so the corpus cannot rot. */
static void test_bad_corpus_complete(void **state)
{
    DIR *d = opendir(DATA "bad");
    struct dirent *e;
    size_t seen = 0;

    (void)state;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (!find_case(e->d_name))
            fail_msg("bad/%s has no entry in bad_cases[]", e->d_name);
        seen++;
    }
    closedir(d);
    assert_int_equal(seen, sizeof(bad_cases) / sizeof(bad_cases[0]));
    assert_true(seen >= 15);
}

/* ---- in-memory edge cases ---- */

static int parse_pods_str(const char *csv, size_t len, char *err, size_t errlen)
{
    struct openb_pods p = {0};
    int rc = openb_parse_pods(csv, len, "mem.csv", &p, err, errlen);

    if (rc == 0)
        assert_true(p.n > 0);
    openb_pods_free(&p);
    return rc;
}

static void test_missing_file(void **state)
{
    struct openb_pods p = {0};
    char err[256] = "";

    (void)state;
    assert_int_equal(openb_read_pods(DATA "no-such-file.csv", &p, err, sizeof(err)), ALLOT_EIO);
    assert_non_null(strstr(err, "no-such-file.csv: No such file or directory"));
    assert_null(p.v);
    assert_int_equal(openb_read_pods(DATA "bad", &p, err, sizeof(err)), ALLOT_EIO);
    assert_non_null(strstr(err, "bad: "));
}

static void test_long_line(void **state)
{
    static const char head[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
    size_t hl = sizeof(head) - 1, len;
    char *buf = malloc(hl + OPENB_MAX_LINE + 64);
    char err[256] = "";

    (void)state;
    assert_non_null(buf);
    memcpy(buf, head, hl);
    /* A name just at the limit parses; one byte more is rejected. */
    len = hl;
    memset(buf + len, 'x', OPENB_MAX_LINE - 8);
    len += OPENB_MAX_LINE - 8;
    memcpy(buf + len, ",1,1,0,0\n", 9);
    len += 9;
    assert_int_equal(parse_pods_str(buf, len, err, sizeof(err)), 0);
    buf[hl] = 'y';
    memmove(buf + hl + 1, buf + hl, len - hl);
    len++;
    assert_int_equal(parse_pods_str(buf, len, err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "mem.csv:2: line longer than 65536 bytes"));
    free(buf);
}

static void test_edge_cases(void **state)
{
    static const struct {
        const char *csv;
        const char *expect; /* NULL: must parse */
    } cases[] = {
        {"name,cpu_milli,num_gpu,gpu_milli\r\np,1,0,0\r\n", NULL},
        {"name,cpu_milli,num_gpu,gpu_milli\np,1,0,0", NULL},
        {"name,cpu_milli,num_gpu,gpu_milli\np,1,8,1000\nq,0,64,1000\n", NULL},
        {"name,cpu_milli,num_gpu,gpu_milli\np,9223372036854775808,0,0\n",
         "mem.csv:2: cpu_milli \"9223372036854775808\" out of range"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,-9223372036854775809,0,0\n", "is negative"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,1000000001,0,0\n", "out of range 0..1000000000"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,+1,0,0\n", "\"+1\" is not an integer"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,,0,0\n", "mem.csv:2: cpu_milli is empty"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,-,0,0\n", "\"-\" is not an integer"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,1,0,0\n\n", "mem.csv:3: empty line"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,1,0,0,\n", "expected 4 fields, got 5"},
        {"name,cpu_milli,num_gpu,gpu_milli\np,1,0,0,,,,,,,,,,,,,,,,,,,,,,\n",
         "expected 4 fields, got 26"},
        {"name,cpu_milli,num_gpu,gpu_milli,a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q\np,1,0,0\n",
         "mem.csv:1: unknown column \"a\""},
        {"\n", "mem.csv:1: empty line"},
        {"", "mem.csv: empty file"},
        {"name,cpu_milli,num_gpu,gpu_milli\np\x7f,1,0,0\n", "control character 0x7f"},
        {"name,cpu_milli,num_gpu,gpu_milli,gpu_spec\np,1,1,1000,|T4\n",
         "gpu_spec \"|T4\" has an empty model name"},
        {"name,cpu_milli,num_gpu,gpu_milli,creation_time,scheduled_time\np,1,0,0,10,9\n",
         "scheduled_time 9 before creation_time 10"},
        {"name,cpu_milli,num_gpu,gpu_milli,creation_time\np,1,0,0,1099511627777\n",
         "creation_time \"1099511627777\" out of range"},
        {"sn,cpu_milli,memory_mib,gpu,model\nn,1,1,0,\n", "mem.csv:1: unknown column \"sn\""},
    };
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc;

        err[0] = '\0';
        rc = parse_pods_str(cases[i].csv, strlen(cases[i].csv), err, sizeof(err));
        if (cases[i].expect == NULL) {
            if (rc != 0)
                fail_msg("case %zu: rc %d (%s)", i, rc, err);
        } else if (rc != ALLOT_EINVAL || !strstr(err, cases[i].expect)) {
            fail_msg("case %zu: rc %d, message \"%s\", expected \"%s\"", i, rc, err,
                     cases[i].expect);
        }
    }
}

static void test_error_buffer(void **state)
{
    static const char csv[] = "name,cpu_milli,num_gpu,gpu_milli\np,abc,0,0\n";
    char small[12];
    const char *hostile = "name,cpu_milli,num_gpu,gpu_milli\np,"
                          "abc\xff\x80xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx,0,0\n";
    char err[256];

    (void)state;
    /* No buffer at all, and a tiny one: still the right code, truncated text. */
    assert_int_equal(parse_pods_str(csv, sizeof(csv) - 1, NULL, 0), ALLOT_EINVAL);
    assert_int_equal(parse_pods_str(csv, sizeof(csv) - 1, small, sizeof(small)), ALLOT_EINVAL);
    assert_string_equal(small, "mem.csv:2: ");
    /* Values are quoted with escapes and cut. */
    assert_int_equal(parse_pods_str(hostile, strlen(hostile), err, sizeof(err)), ALLOT_EINVAL);
    assert_non_null(strstr(err, "\"abc\\xff\\x80xxx"));
    assert_non_null(strstr(err, "...\" is not an integer"));
}

static void test_spec_allows(void **state)
{
    (void)state;
    assert_true(openb_spec_allows("", "T4"));
    assert_true(openb_spec_allows("T4", "T4"));
    assert_false(openb_spec_allows("T4", "T"));
    assert_false(openb_spec_allows("T", "T4"));
    assert_true(openb_spec_allows("P100|V100M16|V100M32", "V100M16"));
    assert_true(openb_spec_allows("P100|V100M16|V100M32", "V100M32"));
    assert_true(openb_spec_allows("P100|V100M16|V100M32", "P100"));
    assert_false(openb_spec_allows("P100|V100M16|V100M32", "V100"));
}

/* Random byte edits of the good files must parse or fail cleanly (ASan
 * watches the rest). */
static void test_mutations(void **state)
{
    static const char *files[] = {"nodes.csv", "pods_full.csv", "pods_nomem.csv",
                                  "pods_multigpu.csv"};
    static const char alphabet[] = ",\n\r\"|-0123456789x\0\t";
    struct allot_rng rng;

    (void)state;
    allot_rng_seed(&rng, 7);
    for (size_t fi = 0; fi < sizeof(files) / sizeof(files[0]); fi++) {
        char path[512], orig[4096], buf[4096], err[256];
        FILE *f;
        size_t len;

        allot_fmt(path, sizeof(path), "%s%s", DATA, files[fi]);
        f = fopen(path, "rb");
        assert_non_null(f);
        len = fread(orig, 1, sizeof(orig), f);
        fclose(f);
        for (int iter = 0; iter < 3000; iter++) {
            size_t n = len;
            int edits = 1 + (int)allot_rng_below(&rng, 4);

            memcpy(buf, orig, len);
            for (int e = 0; e < edits && n > 0; e++) {
                size_t at = (size_t)allot_rng_below(&rng, n);

                switch (allot_rng_below(&rng, 3)) {
                case 0: /* replace */
                    buf[at] = alphabet[allot_rng_below(&rng, sizeof(alphabet) - 1)];
                    break;
                case 1: /* delete */
                    memmove(buf + at, buf + at + 1, n - at - 1);
                    n--;
                    break;
                default: /* truncate */
                    n = at + 1;
                    break;
                }
            }
            if (fi == 0) {
                struct openb_nodes l = {0};
                int rc = openb_parse_nodes(buf, n, "m.csv", &l, err, sizeof(err));

                assert_true(rc == 0 || rc == ALLOT_EINVAL);
                if (rc == 0)
                    for (size_t i = 0; i < l.n; i++)
                        assert_true(l.v[i].gpu >= 0 && l.v[i].gpu <= OPENB_MAX_GPUS);
                openb_nodes_free(&l);
            } else {
                struct openb_pods p = {0};
                int rc = openb_parse_pods(buf, n, "m.csv", &p, err, sizeof(err));

                assert_true(rc == 0 || rc == ALLOT_EINVAL);
                if (rc == 0)
                    for (size_t i = 0; i < p.n; i++)
                        assert_true(p.v[i].gpu_milli >= 0 &&
                                    p.v[i].gpu_milli <= OPENB_MILLI_PER_GPU);
                openb_pods_free(&p);
            }
        }
    }
}

/* ---- allocation failures ---- */

static void test_alloc_failures(void **state)
{
    static const char *pod_files[] = {"pods_full.csv", "pods_nomem.csv", "pods_multigpu.csv"};
    char path[512], err[256];
    unsigned long n;
    int rc;

    (void)state;
    for (n = 1;; n++) {
        struct openb_nodes l = {0};

        allot_alloc_fail_at(n, false);
        rc = openb_read_nodes(DATA "nodes.csv", &l, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            assert_int_equal(l.n, 5);
            openb_nodes_free(&l);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
        assert_non_null(strstr(err, "out of memory"));
        assert_null(l.v);
    }
    assert_true(n > 1);
    for (size_t fi = 0; fi < sizeof(pod_files) / sizeof(pod_files[0]); fi++) {
        allot_fmt(path, sizeof(path), "%s%s", DATA, pod_files[fi]);
        for (n = 1;; n++) {
            struct openb_pods p = {0};

            allot_alloc_fail_at(n, false);
            rc = openb_read_pods(path, &p, err, sizeof(err));
            allot_alloc_fail_at(0, false);
            if (rc == 0) {
                check_good_pods(&p);
                openb_pods_free(&p);
                break;
            }
            assert_int_equal(rc, ALLOT_ENOMEM);
            assert_null(p.v);
        }
        assert_true(n > 1);
    }
    /* The buffer variant too. */
    for (n = 1;; n++) {
        static const char csv[] = "name,cpu_milli,num_gpu,gpu_milli\np,1,0,0\nq,2,1,10\n";
        struct openb_pods p = {0};

        allot_alloc_fail_at(n, false);
        rc = openb_parse_pods(csv, sizeof(csv) - 1, "mem.csv", &p, err, sizeof(err));
        allot_alloc_fail_at(0, false);
        if (rc == 0) {
            assert_int_equal(p.n, 2);
            openb_pods_free(&p);
            break;
        }
        assert_int_equal(rc, ALLOT_ENOMEM);
    }
    assert_true(n > 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_names),
        cmocka_unit_test(test_nodes_good),
        cmocka_unit_test(test_nodes_crlf_unterminated),
        cmocka_unit_test(test_pods_full),
        cmocka_unit_test(test_pods_nomem),
        cmocka_unit_test(test_pods_multigpu),
        cmocka_unit_test(test_columns_by_name),
        cmocka_unit_test(test_bad_corpus),
        cmocka_unit_test(test_bad_corpus_complete),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_error_buffer),
        cmocka_unit_test(test_spec_allows),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_alloc_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
