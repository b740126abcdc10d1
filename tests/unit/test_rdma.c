/*
 * SR-IOV RDMA virtual functions on the agent (src/agent/rdma.c) over a
 * made-up sysfs tree: the inventory (a PCI device seen as an RDMA device
 * and as a netdev counted once), the VFs listed in the order they are
 * handed out with their PCI addresses, netdevs, RDMA devices and uverbs
 * nodes, the pick of free ones, the record a task keeps them in, the
 * environment values, a task's assignment against the VFs other live
 * tasks hold (refused when too many are asked or too few are free; held
 * back while a stopping task still has what it needs), its release and its
 * adoption after a restart, and all of it under failing
 * allocations. Moving netdevs between namespaces is
 * tests/integration/test_network.py's.
 */
#include "agent.h"
#include "rdma.h"

#include "../../src/core/jsonload.h"
#include "allot/common.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char root[64];

/* Makes the folders of ROOT/rel's parent. */
static void parents(const char *rel)
{
    char dir[512];

    allot_fmt(dir, sizeof(dir), "%s/%s", root, rel);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
}

/* ROOT/rel: a file with text, or a folder when text is NULL. */
static void put(const char *rel, const char *text)
{
    char path[512];
    FILE *f;

    parents(rel);
    allot_fmt(path, sizeof(path), "%s/%s", root, rel);
    if (!text) {
        mkdir(path, 0755);
        return;
    }
    assert_non_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
}

/* ROOT/rel: a symbolic link to target (ROOT/ prepended when it starts with
 * '/'). */
static void link_to(const char *rel, const char *target)
{
    char path[512], to[512];

    parents(rel);
    allot_fmt(path, sizeof(path), "%s/%s", root, rel);
    if (target[0] == '/')
        allot_fmt(to, sizeof(to), "%s%s", root, target);
    else
        allot_strlcpy(to, target, sizeof(to));
    assert_int_equal(symlink(to, path), 0);
}

#define HCA "/devices/pci0000:3a/0000:3b:00.0"
#define NIC "/devices/pci0000:5e/0000:5e:00.0"

/* A node: an HCA (mlx5_0, also the netdev ens1f0np0) with 2 VFs, the first
 * with its netdev, RDMA device mlx5_2 and uverbs2, the second with a
 * netdev only; a NIC (ens3f0) with 3 VFs of which sysfs shows 0 and 2;
 * the VF's own RDMA device; a plain NIC and lo. */
static int tree_setup(void **state)
{
    (void)state;
    allot_strlcpy(root, "/tmp/test_rdma_sysfs.XXXXXX", sizeof(root));
    assert_non_null(mkdtemp(root));
    put(HCA "/sriov_numvfs", "2\n");
    put("devices/pci0000:3a/0000:3b:00.2/net/hca0v0", NULL);
    put("devices/pci0000:3a/0000:3b:00.2/infiniband/mlx5_2", NULL);
    put("devices/pci0000:3a/0000:3b:00.2/infiniband_verbs/uverbs2/dev", "231:194\n");
    put("devices/pci0000:3a/0000:3b:00.3/net/hca0v1", NULL);
    link_to(HCA "/virtfn0", "../0000:3b:00.2");
    link_to(HCA "/virtfn1", "../0000:3b:00.3");
    link_to("class/infiniband/mlx5_0/device", HCA);
    link_to("class/net/ens1f0np0/device", HCA);
    link_to("class/infiniband/mlx5_2/device", "/devices/pci0000:3a/0000:3b:00.2");
    put(NIC "/sriov_numvfs", "3\n");
    put("devices/pci0000:5e/0000:5e:00.4/net/nicv0", NULL);
    put("devices/pci0000:5e/0000:5e:00.6/net/nicv2", NULL);
    link_to(NIC "/virtfn0", "../0000:5e:00.4");
    link_to(NIC "/virtfn2", "../0000:5e:00.6");
    link_to("class/net/ens3f0/device", NIC);
    put("devices/pci0000:5e/0000:5e:00.1/sriov_numvfs", "0\n");
    link_to("class/net/ens3f1/device", "/devices/pci0000:5e/0000:5e:00.1");
    put("class/net/lo", NULL);
    return 0;
}

static int tree_teardown(void **state)
{
    char cmd[128];

    (void)state;
    allot_fmt(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_inventory(void **state)
{
    json_t *r, *x;
    size_t i;
    char *text;

    (void)state;
    /* this machine: an array (empty without RDMA hardware) of names and VF counts */
    r = rdma_inventory_json("/sys");
    assert_true(json_is_array(r));
    json_array_foreach(r, i, x)
    {
        assert_true(json_is_string(json_object_get(x, "name")));
        assert_true(json_integer_value(json_object_get(x, "vfs")) >= 0);
    }
    json_decref(r);
    /* the made-up node: ens1f0np0 is mlx5_0's PCI device, counted once */
    r = rdma_inventory_json(root);
    text = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text, "[{\"name\":\"mlx5_0\",\"vfs\":2},{\"name\":\"mlx5_2\",\"vfs\":0},"
                              "{\"name\":\"ens3f0\",\"vfs\":3}]");
    free(text);
    json_decref(r);
    /* nothing there */
    r = rdma_inventory_json("/nonexistent");
    assert_int_equal(json_array_size(r), 0);
    json_decref(r);
}

static void test_vf_list(void **state)
{
    struct rdma_vf *v;
    int n;

    (void)state;
    n = rdma_vf_list(root, &v);
    assert_int_equal(n, 4);
    assert_string_equal(v[0].pci, "0000:3b:00.2");
    assert_string_equal(v[0].pf, "mlx5_0");
    assert_int_equal(v[0].index, 0);
    assert_int_equal(v[0].n_netdevs, 1);
    assert_string_equal(v[0].netdevs[0], "hca0v0");
    assert_int_equal(v[0].n_devices, 1);
    assert_string_equal(v[0].devices[0], "mlx5_2");
    assert_int_equal(v[0].n_uverbs, 1);
    assert_string_equal(v[0].uverbs[0].name, "uverbs2");
    assert_int_equal(v[0].uverbs[0].major, 231);
    assert_int_equal(v[0].uverbs[0].minor, 194);
    assert_string_equal(v[1].pci, "0000:3b:00.3");
    assert_string_equal(v[1].netdevs[0], "hca0v1");
    assert_int_equal(v[1].n_devices + v[1].n_uverbs, 0);
    assert_string_equal(v[2].pci, "0000:5e:00.4");
    assert_string_equal(v[2].pf, "ens3f0");
    /* the NIC's virtfn1 is missing: virtfn2 follows */
    assert_string_equal(v[3].pci, "0000:5e:00.6");
    assert_int_equal(v[3].index, 2);
    assert_string_equal(v[3].netdevs[0], "nicv2");
    allot_free(v);
    assert_int_equal(rdma_vf_list("/nonexistent", &v), 0);
    assert_null(v);
}

/* rdma_held_fn over a NULL-terminated list of PCI addresses. */
static bool in_list(const char *pci, void *ud)
{
    for (const char *const *p = ud; *p; p++)
        if (!strcmp(*p, pci))
            return true;
    return false;
}

static void test_pick(void **state)
{
    struct rdma_vf *v;
    const char *none[] = {NULL}, *two[] = {"0000:3b:00.2", "0000:5e:00.4", NULL};
    int n, idx[4];

    (void)state;
    n = rdma_vf_list(root, &v);
    assert_int_equal(rdma_pick(v, n, in_list, none, 2, idx), 2);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 1);
    /* the first free ones, in order */
    assert_int_equal(rdma_pick(v, n, in_list, two, 2, idx), 2);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 3);
    /* fewer free than asked: as many as there are */
    assert_int_equal(rdma_pick(v, n, in_list, two, 3, idx), 2);
    assert_int_equal(rdma_pick(v, n, in_list, none, 0, idx), 0);
    allot_free(v);
}

static void test_record_and_env(void **state)
{
    char dir[] = "/tmp/test_rdma_task.XXXXXX", path[128];
    struct rdma_vf *v, *back;
    struct rdma_env e;
    FILE *f;
    int n;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(rdma_record_load(dir, &back), 0); /* no record: no VFs */
    assert_null(back);
    n = rdma_vf_list(root, &v);
    assert_int_equal(rdma_record_save(dir, v, n), 0);
    assert_int_equal(rdma_record_load(dir, &back), n);
    assert_memory_equal(v, back, (size_t)n * sizeof(*v));
    rdma_env_of(back, 2, &e);
    assert_string_equal(e.vfs, "0000:3b:00.2,0000:3b:00.3");
    assert_string_equal(e.netdevs, "hca0v0,hca0v1");
    assert_string_equal(e.devices, "mlx5_2");
    rdma_env_of(back, 0, &e);
    assert_string_equal(e.vfs, "");
    allot_free(back);
    /* the environment from the record */
    assert_int_equal(rdma_task_env(dir, &e), n);
    assert_string_equal(e.netdevs, "hca0v0,hca0v1,nicv0,nicv2");
    allot_free(v);
    /* a record that does not parse, or names what no command line may carry */
    allot_fmt(path, sizeof(path), "%s/rdma.json", dir);
    assert_non_null(f = fopen(path, "w"));
    fputs("{\"vfs\": [{\"pci\": \"a b\"}]}", f);
    fclose(f);
    assert_int_equal(rdma_record_load(dir, &back), ALLOT_EINVAL);
    assert_non_null(f = fopen(path, "w"));
    fputs("{\"vfs\": [{\"pci\": \"0000:01:00.1\", \"netdevs\": [\"-x\", \"ok0\", 3]}]}", f);
    fclose(f);
    assert_int_equal(rdma_record_load(dir, &back), 1);
    assert_int_equal(back[0].n_netdevs, 1);
    assert_string_equal(back[0].netdevs[0], "ok0");
    allot_free(back);
    assert_non_null(f = fopen(path, "w"));
    fputs("not json", f);
    fclose(f);
    assert_int_equal(rdma_record_load(dir, &back), ALLOT_EINVAL);
    unlink(path);
    rmdir(dir);
}

/* An agent on the made-up node with nt tasks, whose folders are under tmp. */
static struct agent *agent_with(struct task *tasks, size_t nt, char *tmp)
{
    static struct agent a;

    memset(&a, 0, sizeof(a));
    a.cfg.sysfs = root;
    a.tasks = tasks;
    a.n_tasks = a.cap_tasks = nt;
    assert_non_null(mkdtemp(tmp));
    return &a;
}

/* Task KEY's folder under tmp. */
static void task_at(const char *tmp, struct task *t, const char *key, char *dir, size_t len)
{
    memset(t, 0, sizeof(*t));
    allot_strlcpy(t->key, key, sizeof(t->key));
    t->state = TASK_STARTING;
    allot_fmt(dir, len, "%s/%s", tmp, key);
    mkdir(dir, 0700);
}

static json_t *asking(const char *n)
{
    char text[128];

    allot_fmt(text, sizeof(text), "{\"job\": 1, \"task\": 0, \"rdma_vfs\": %s}", n);
    return json_loads(text, JSON_DECODE_ANY, NULL);
}

static void assign(struct agent *a, struct task *t, const char *dir, const char *n, int rc,
                   const char *why_has)
{
    json_t *d = asking(n);
    char why[256] = "";

    assert_int_equal(rdma_task_assign(a, t, d, dir, why, sizeof(why)), rc);
    if (why_has)
        assert_non_null(strstr(why, why_has));
    json_decref(d);
}

static void test_task_assign(void **state)
{
    char tmp[] = "/tmp/test_rdma_tasks.XXXXXX", d0[128], d1[128], d2[128], cmd[128];
    struct task tasks[3];
    struct agent *a = agent_with(tasks, 2, tmp);
    struct task *t0 = &tasks[0], *t1 = &tasks[1], *t2 = &tasks[2];

    (void)state;
    task_at(tmp, t0, "1-0", d0, sizeof(d0));
    task_at(tmp, t1, "2-0", d1, sizeof(d1));
    task_at(tmp, t2, "3-0", d2, sizeof(d2));
    /* none asked: nothing held, no record */
    assign(a, t0, d0, "0", 0, NULL);
    assert_int_equal(t0->n_vfs, 0);
    /* the first task gets the first VF with its uverbs node */
    assign(a, t0, d0, "1", 0, NULL);
    assert_int_equal(t0->n_vfs, 1);
    assert_string_equal(t0->vfs[0], "0000:3b:00.2");
    assert_int_equal(t0->n_devs, 1);
    assert_string_equal(t0->devs[0].path, "/dev/infiniband/uverbs2");
    assert_int_equal(t0->devs[0].major, 231);
    t0->state = TASK_RUNNING;
    /* the second, two more: never the first's */
    assign(a, t1, d1, "2", 0, NULL);
    assert_int_equal(t1->n_vfs, 2);
    assert_string_equal(t1->vfs[0], "0000:3b:00.3");
    assert_string_equal(t1->vfs[1], "0000:5e:00.4");
    /* the third (not yet in the agent's list) asks for more than are free */
    assign(a, t2, d2, "2", -1, "not enough RDMA VFs: 2 asked, 1 of the node's 4 free");
    assert_int_equal(t2->n_vfs, 0);
    assign(a, t2, d2, "33", -1, "want 0 to 32 RDMA VFs per task");
    assign(a, t2, d2, "-1", -1, "want 0 to 32");
    assign(a, t2, d2, "\"1\"", -1, "want 0 to 32");
    /* a task that ended holds nothing: its VFs are free again */
    t1->state = TASK_EXITED;
    assign(a, t2, d2, "3", 0, NULL);
    assert_string_equal(t2->vfs[0], "0000:3b:00.3");
    assert_string_equal(t2->vfs[2], "0000:5e:00.6");
    /* released (no namespace: nothing to move), the first's goes too */
    rdma_task_release(t0, d0);
    assert_int_equal(t0->n_vfs + t0->n_devs, 0);
    /* after a restart the records say who holds what */
    rdma_task_adopt(t0, d0);
    assert_int_equal(t0->n_vfs, 1);
    assert_string_equal(t0->vfs[0], "0000:3b:00.2");
    assert_int_equal(t0->n_devs, 1);
    rdma_task_adopt(t1, d1);
    assert_int_equal(t1->n_vfs, 2);
    allot_fmt(cmd, sizeof(cmd), "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

/* A task waits for VFs a stopping task still holds, never for ones a
 * running task holds, nor for more than the node has. */
static void test_task_waits(void **state)
{
    char tmp[] = "/tmp/test_rdma_wait.XXXXXX", d0[128], d1[128], d2[128], cmd[128];
    struct task tasks[3];
    struct agent *a = agent_with(tasks, 2, tmp);
    json_t *two = asking("2"), *five = asking("5"), *none = asking("0");

    (void)state;
    task_at(tmp, &tasks[0], "1-0", d0, sizeof(d0));
    task_at(tmp, &tasks[1], "2-0", d1, sizeof(d1));
    task_at(tmp, &tasks[2], "3-0", d2, sizeof(d2));
    assert_false(rdma_task_must_wait(a, &tasks[2], two)); /* all free */
    assign(a, &tasks[0], d0, "1", 0, NULL);
    assign(a, &tasks[1], d1, "3", 0, NULL);
    tasks[0].state = tasks[1].state = TASK_RUNNING;
    assert_false(rdma_task_must_wait(a, &tasks[2], two)); /* it fails: nothing comes back */
    tasks[1].state = TASK_STOPPING;
    assert_true(rdma_task_must_wait(a, &tasks[2], two));
    assert_false(rdma_task_must_wait(a, &tasks[2], five));
    assert_false(rdma_task_must_wait(a, &tasks[2], none));
    tasks[1].state = TASK_EXITED; /* ended: free now */
    assert_false(rdma_task_must_wait(a, &tasks[2], two));
    assign(a, &tasks[2], d2, "2", 0, NULL);
    json_decref(two);
    json_decref(five);
    json_decref(none);
    allot_fmt(cmd, sizeof(cmd), "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

static void test_out_of_memory(void **state)
{
    char tmp[] = "/tmp/test_rdma_oom.XXXXXX", d0[128], d1[128], cmd[128];
    struct task tasks[2];
    struct agent *a = agent_with(tasks, 1, tmp);
    struct rdma_vf *want_v;
    int want_n = rdma_vf_list(root, &want_v);
    json_t *want_inv = rdma_inventory_json(root), *d = asking("2");
    bool done = false;

    (void)state;
    task_at(tmp, &tasks[0], "1-0", d0, sizeof(d0));
    task_at(tmp, &tasks[1], "2-0", d1, sizeof(d1));
    assign(a, &tasks[0], d0, "1", 0, NULL);
    for (unsigned long k = 1; !done && k < 500; k++) {
        struct rdma_vf *v = NULL, *back = NULL;
        json_t *inv;
        char why[256];
        int n, nb, rc;

        allot_alloc_fail_at(k, false);
        n = rdma_vf_list(root, &v);
        inv = rdma_inventory_json(root);
        rc = rdma_task_assign(a, &tasks[1], d, d1, why, sizeof(why));
        nb = rdma_record_load(d0, &back);
        done = allot_alloc_count() < k;
        allot_alloc_fail_at(0, false);
        /* each is whole or a clean error */
        assert_true(n == want_n || (n == ALLOT_ENOMEM && !v));
        if (n == want_n)
            assert_memory_equal(v, want_v, (size_t)n * sizeof(*v));
        assert_true(!inv || json_equal(inv, want_inv));
        assert_true(rc == 0 || (rc == -1 && tasks[1].n_vfs == 0));
        if (rc == 0)
            assert_string_equal(tasks[1].vfs[1], "0000:5e:00.4");
        assert_true(nb == 1 || (nb < 0 && !back));
        if (nb == 1)
            assert_string_equal(back[0].pci, "0000:3b:00.2");
        allot_free(v);
        allot_free(back);
        json_decref(inv);
    }
    assert_true(done);
    json_decref(d);
    allot_free(want_v);
    json_decref(want_inv);
    allot_fmt(cmd, sizeof(cmd), "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    allot_json_use_allot_alloc(); /* jansson's allocations fail with the others */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inventory),     cmocka_unit_test(test_vf_list),
        cmocka_unit_test(test_pick),          cmocka_unit_test(test_record_and_env),
        cmocka_unit_test(test_task_assign),   cmocka_unit_test(test_task_waits),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, tree_setup, tree_teardown);
}
