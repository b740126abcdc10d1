/*
 * MIG capability devices on the agent (src/agent/migcaps.c) over a made-up
 * procfs and sysfs: a task's GPU-instance and compute-instance minors are
 * found in the driver's mig-minors table (and only theirs), the nvidia-caps
 * major in the device list; a driver in procfs mode, one without
 * nvidia-caps, and a table without the instance are refused with a reason;
 * an emulated node's made-up table gives every instance of every GPU its
 * own minors; the device node is made with the capability's numbers and a
 * read-only mode (root only: mknod).
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
#include <unistd.h>

#include <cmocka.h>

static char root[64], proc[128], sys_[128];

static void put(const char *dir, const char *rel, const char *text)
{
    char path[512];
    FILE *f;

    allot_fmt(path, sizeof(path), "%s/%s", dir, rel);
    *strrchr(path, '/') = '\0';
    assert_int_equal(agent_mkdir_p(path), 0);
    allot_fmt(path, sizeof(path), "%s/%s", dir, rel);
    assert_non_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    allot_strlcpy(root, "/tmp/allot-migcaps-XXXXXX", sizeof(root));
    assert_non_null(mkdtemp(root));
    allot_fmt(proc, sizeof(proc), "%s/proc", root);
    allot_fmt(sys_, sizeof(sys_), "%s/sys", root);
    put(proc, "devices",
        "Character devices:\n  1 mem\n195 nvidia\n237 nvidia-caps\n\nBlock devices:\n"
        "238 nvidia-caps-imex\n");
    put(proc, "driver/nvidia-caps/mig-minors",
        "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"
        "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi1/ci1/access 14\n"
        "gpu2/gi1/access 147\ngpu2/gi1/ci0/access 148\nbroken line\n");
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    allot_fmt(cmd, sizeof(cmd), "rm -rf %s", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_minor_lookup(void **state)
{
    char table[256];

    (void)state;
    allot_fmt(table, sizeof(table), "%s/driver/nvidia-caps/mig-minors", proc);
    assert_int_equal(migcaps_minor(table, 0, 1, -1), 12);
    assert_int_equal(migcaps_minor(table, 0, 1, 1), 14);
    assert_int_equal(migcaps_minor(table, 2, 1, 0), 148);
    /* no line for it: another GPU's gi1 is not this GPU's */
    assert_int_equal(migcaps_minor(table, 1, 1, -1), ALLOT_ENOENT);
    assert_int_equal(migcaps_minor(table, 0, 2, -1), ALLOT_ENOENT);
    assert_int_equal(migcaps_minor("/nonexistent/mig-minors", 0, 1, -1), ALLOT_EIO);
}

static void test_devs_of_an_instance(void **state)
{
    struct task_dev d[2];
    char why[256] = "";

    (void)state;
    assert_int_equal(migcaps_devs(proc, sys_, 0, 1, 0, d, why, sizeof(why)), 2);
    assert_int_equal(d[0].major, 237); /* a character driver: not the block one */
    assert_int_equal(d[0].minor, 12);
    assert_int_equal(d[1].minor, 13);
    assert_int_equal(d[1].mode, 0444);
    assert_string_equal(d[1].path, "/dev/nvidia-caps/nvidia-cap13");
    /* a GPU instance without a compute instance: its own capability only */
    assert_int_equal(migcaps_devs(proc, sys_, 2, 1, -1, d, why, sizeof(why)), 1);
    assert_int_equal(d[0].minor, 147);
    /* the driver in devfs mode says so: the same */
    put(sys_, "module/nvidia/parameters/nv_cap_enable_devfs", "1\n");
    assert_int_equal(migcaps_devs(proc, sys_, 0, 1, 1, d, why, sizeof(why)), 2);
    assert_int_equal(d[1].minor, 14);
}

static void test_refusals(void **state)
{
    struct task_dev d[2];
    char why[256] = "", empty[128];

    (void)state;
    /* no such instance in the table */
    assert_int_equal(migcaps_devs(proc, sys_, 0, 5, 0, d, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "lists no capability of GPU 0 instance 5"));
    assert_int_equal(migcaps_devs(proc, sys_, 0, 1, 7, d, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "GPU 0 instance 1 compute instance 7"));
    /* a driver without nvidia-caps */
    allot_fmt(empty, sizeof(empty), "%s/empty", root);
    put(empty, "devices", "Character devices:\n195 nvidia\n");
    assert_int_equal(migcaps_devs(empty, sys_, 0, 1, 0, d, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "no nvidia-caps device"));
    /* ... with nvidia-caps but no table */
    put(empty, "devices", "Character devices:\n237 nvidia-caps\n");
    assert_int_equal(migcaps_devs(empty, sys_, 0, 1, 0, d, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "cannot be read"));
    /* procfs mode: device rules cannot hold the instances apart */
    put(sys_, "module/nvidia/parameters/nv_cap_enable_devfs", "0\n");
    assert_int_equal(migcaps_devs(proc, sys_, 0, 1, 0, d, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "nv_cap_enable_devfs=0"));
    put(sys_, "module/nvidia/parameters/nv_cap_enable_devfs", "1\n");
}

static void test_emulated_table(void **state)
{
    static const int gpus[] = {0, 3};
    struct task_dev d[2];
    char emu[128], why[256] = "";
    int seen[4] = {0};

    (void)state;
    allot_fmt(emu, sizeof(emu), "%s/emu/proc", root);
    assert_int_equal(migcaps_emulate(emu, gpus, 2), 0);
    /* every instance of both GPUs has minors of its own, none shared */
    for (int g = 0; g < 2; g++)
        for (int gi = 1; gi <= 2; gi++) {
            assert_int_equal(migcaps_devs(emu, sys_, gpus[g], gi, 0, d, why, sizeof(why)), 2);
            assert_int_equal(d[0].major, MIGCAPS_EMU_MAJOR);
            assert_int_not_equal(d[0].minor, d[1].minor);
            seen[g * 2 + gi - 1] = d[0].minor;
        }
    for (int i = 0; i < 4; i++)
        for (int k = i + 1; k < 4; k++)
            assert_int_not_equal(seen[i], seen[k]);
    /* a GPU the node does not have has none */
    assert_int_equal(migcaps_devs(emu, sys_, 1, 1, 0, d, why, sizeof(why)), -1);
    /* written again (an agent restarted): the same */
    assert_int_equal(migcaps_emulate(emu, gpus, 2), 0);
    assert_int_equal(migcaps_devs(emu, sys_, 3, 2, 0, d, why, sizeof(why)), 2);
    assert_int_equal(d[0].minor, seen[3]);
}

static void test_mknod(void **state)
{
    struct task_dev d = {.major = MIGCAPS_EMU_MAJOR, .minor = 77, .mode = 0444};
    char dev[128], path[256];
    struct stat st;

    (void)state;
    if (geteuid() != 0) {
        print_message("mknod needs root: not run\n");
        skip();
    }
    allot_fmt(dev, sizeof(dev), "%s/dev", root);
    assert_int_equal(agent_mkdir_p(dev), 0);
    allot_fmt(path, sizeof(path), "%s/nvidia-caps/nvidia-cap77", dev);
    put(dev, "nvidia-caps/nvidia-cap77", "a file in its place\n");
    assert_int_equal(migcaps_mknod(dev, &d), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal((int)major(st.st_rdev), MIGCAPS_EMU_MAJOR);
    assert_int_equal((int)minor(st.st_rdev), 77);
    assert_int_equal(st.st_mode & 0777, 0444);
    assert_int_equal(migcaps_mknod(dev, &d), 0); /* there already: kept */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minor_lookup), cmocka_unit_test(test_devs_of_an_instance),
        cmocka_unit_test(test_refusals),     cmocka_unit_test(test_emulated_table),
        cmocka_unit_test(test_mknod),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
