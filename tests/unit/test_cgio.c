/*
 * The agent's --io-max (src/agent/cgroup.c cg_io_parse): devices by
 * MAJ:MIN or block device path, the four keys with their units, several
 * entries, and every malformed spec refused with a message naming it.
 */
#include "agent.h"

#include "allot/common.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cmocka.h>

static void test_parse(void **state)
{
    struct cg_io io[CG_MAX_IO];
    char err[256] = "";

    (void)state;
    assert_int_equal(cg_io_parse(NULL, io, CG_MAX_IO, err, sizeof(err)), 0);
    assert_int_equal(cg_io_parse("", io, CG_MAX_IO, err, sizeof(err)), 0);
    assert_int_equal(
        cg_io_parse("254:0 rbps=1M wbps=512K riops=100 wiops=50", io, CG_MAX_IO, err, sizeof(err)),
        1);
    assert_int_equal(io[0].major, 254);
    assert_int_equal(io[0].minor, 0);
    assert_int_equal(io[0].rbps, 1 << 20);
    assert_int_equal(io[0].wbps, 512 << 10);
    assert_int_equal(io[0].riops, 100);
    assert_int_equal(io[0].wiops, 50);
    /* two entries, spaces around, one key each; what is not given is unlimited */
    assert_int_equal(cg_io_parse(" 8:0 wbps=2G ; 8:16  riops=7 ;", io, CG_MAX_IO, err, sizeof(err)),
                     2);
    assert_int_equal(io[0].wbps, INT64_C(2) << 30);
    assert_int_equal(io[0].rbps, 0);
    assert_int_equal(io[1].minor, 16);
    assert_int_equal(io[1].riops, 7);
    assert_int_equal(io[1].wiops, 0);
}

static void test_block_device_path(void **state)
{
    struct cg_io io[CG_MAX_IO];
    char err[256] = "", spec[128];
    const char *dev = NULL;
    struct stat st;

    (void)state;
    /* a block device of this machine, if it has one of those names */
    static const char *const cands[] = {"/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/xvda",
                                        "/dev/loop0"};
    for (size_t i = 0; !dev && i < sizeof(cands) / sizeof(cands[0]); i++)
        if (stat(cands[i], &st) == 0 && S_ISBLK(st.st_mode))
            dev = cands[i];
    if (!dev) {
        print_message("no block device by the usual names here: path form not run\n");
        skip();
    }
    allot_fmt(spec, sizeof(spec), "%s rbps=10M", dev);
    assert_int_equal(cg_io_parse(spec, io, CG_MAX_IO, err, sizeof(err)), 1);
    assert_int_equal(io[0].major, (int)major(st.st_rdev));
    assert_int_equal(io[0].minor, (int)minor(st.st_rdev));
    assert_int_equal(io[0].rbps, 10 << 20);
}

static void test_refused(void **state)
{
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"/dev/null rbps=1", "neither a block device"},
        {"/nonexistent rbps=1", "neither a block device"},
        {"8:0", "no limit given"},
        {"8:0 rbps", "\"rbps\""},
        {"8:0 rbps=", "\"rbps=\""},
        {"8:0 rbps=0", "\"rbps=0\""},
        {"8:0 rbps=-5", "\"rbps=-5\""},
        {"8:0 rbps=1X", "\"rbps=1X\""},
        {"8:0 riops=1K", "\"riops=1K\""},
        {"8:0 speed=1", "\"speed=1\""},
        {"8:0 rbps=99999999999999999999", "rbps="},
        {"8:0 rbps=9000000000T", "rbps="},
        {"8:x rbps=1", "neither a block device"},
        {"-1:0 rbps=1", "neither a block device"},
        {"+8:0 rbps=1", "neither a block device"},
        {"99999:0 rbps=1", "neither a block device"},
        {"8:0:1 rbps=1", "neither a block device"},
    };
    struct cg_io io[CG_MAX_IO];
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(cg_io_parse(bad[i].spec, io, CG_MAX_IO, err, sizeof(err)), -1);
        if (!strstr(err, bad[i].says))
            fail_msg("%s: \"%s\" does not say %s", bad[i].spec, err, bad[i].says);
        assert_non_null(strstr(err, "--io-max"));
    }
    /* more devices than it holds */
    assert_int_equal(cg_io_parse("8:0 rbps=1;8:1 rbps=1;8:2 rbps=1", io, 2, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "more than 2 devices"));
}

static void test_check(void **state)
{
    char root[64] = "/tmp/allot-cgio-XXXXXX", path[256], err[256] = "";
    struct cg_io io[2] = {{.major = 8, .minor = 0, .rbps = 1}, {.major = 8, .minor = 1, .rbps = 1}};

    (void)state;
    assert_non_null(mkdtemp(root));
    allot_fmt(path, sizeof(path), "%s/dev/block/8:0", root);
    assert_int_equal(agent_mkdir_p(path), 0);
    allot_fmt(path, sizeof(path), "%s/dev/block/8:1/partition", root);
    assert_int_equal(agent_mkdir_p(path), 0);
    assert_int_equal(cg_io_check(io, 1, root, err, sizeof(err)), 0);
    assert_int_equal(cg_io_check(io, 2, root, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--io-max 8:1: a partition"));
    io[1].minor = 9;
    assert_int_equal(cg_io_check(io, 2, root, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "--io-max 8:9: no such block device"));
    allot_fmt(path, sizeof(path), "rm -rf %s", root);
    assert_int_equal(system(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_block_device_path),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
