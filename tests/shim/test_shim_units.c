/*
 * liballot-cuda.so's parts without the preload: size parsing and the
 * environment (env.c), the allocation table (table.c, with a calloc that
 * fails on demand) and the shared region (region.c: reservations against
 * a cap, dead processes' slots reclaimed, corrupt files refused). Links
 * allot-shim-objs, from which only these objects are pulled in.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "allot/common.h"
#include "allot/shim_region.h"
#include "procfs.h"
#include "shim.h"
#include "share_fixture.h"

static void test_parse_size(void **state)
{
    static const struct {
        const char *s;
        uint64_t v;
    } good[] = {
        {"0", 0},
        {"1", 1},
        {"4096", 4096},
        {"1K", 1000},
        {"1Ki", 1024},
        {"3M", 3000000},
        {"3Mi", 3ull << 20},
        {"4G", 4000000000ull},
        {"4Gi", 4ull << 30},
        {"2Ti", 2ull << 40},
        {"18446744073709551615", UINT64_MAX},
    };
    static const char *const bad[] = {
        "",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1k",
        "1KB",
        "1Kib",
        "Gi",
        "1.5G",
        "0x10",
        "18446744073709551616",
        "17179869184Gi",
        "1Pi",
        "1e9",
    };
    uint64_t v;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 7;
        assert_true(shim_parse_size(good[i].s, &v));
        assert_int_equal(v, good[i].v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        assert_false(shim_parse_size(bad[i], &v));
        assert_int_equal(v, 7);
    }
    assert_false(shim_parse_size(NULL, &v));
}

static void test_parse_percent(void **state)
{
    static const char *const bad[] = {"", "0", "101", "-5", "+5", "5%", " 5", "5 ", "1e2", "x"};
    int p = 7;

    (void)state;
    assert_true(shim_parse_percent("1", &p) && p == 1);
    assert_true(shim_parse_percent("50", &p) && p == 50);
    assert_true(shim_parse_percent("100", &p) && p == 100);
    assert_true(shim_parse_percent("050", &p) && p == 50);
    p = 7;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(shim_parse_percent(bad[i], &p));
    assert_false(shim_parse_percent(NULL, &p));
    assert_false(shim_parse_percent("99999999999999999999", &p));
    assert_int_equal(p, 7);
}

static void test_config(void **state)
{
    struct shim_config c;

    (void)state;
    unsetenv("ALLOT_GPU_MEMORY_LIMIT");
    shim_config_load(&c);
    assert_false(c.any_limit);
    setenv("ALLOT_GPU_MEMORY_LIMIT", "2Gi", 1);
    setenv("ALLOT_GPU_MEMORY_LIMIT_3", "1Gi", 1);
    shim_config_load(&c);
    assert_true(c.any_limit && !c.bad_env);
    assert_true(c.limited[0] && c.limited[31]);
    assert_int_equal(c.limit[0], 2ull << 30);
    assert_int_equal(c.limit[3], 1ull << 30);
    /* a value that does not parse: that cap is 0 (fail closed) */
    setenv("ALLOT_GPU_MEMORY_LIMIT_3", "lots", 1);
    shim_config_load(&c);
    assert_true(c.bad_env && c.limited[3]);
    assert_int_equal(c.limit[3], 0);
    assert_int_equal(c.limit[2], 2ull << 30);
    unsetenv("ALLOT_GPU_MEMORY_LIMIT_3");
    setenv("ALLOT_GPU_MEMORY_LIMIT_1", "512Mi", 1);
    unsetenv("ALLOT_GPU_MEMORY_LIMIT");
    shim_config_load(&c);
    assert_true(c.any_limit && c.limited[1] && !c.limited[0]);
    unsetenv("ALLOT_GPU_MEMORY_LIMIT_1");
}

static int fail_after = -1; /* calloc calls left before failing; -1 never */

static void *failing_calloc(size_t n, size_t size)
{
    if (fail_after == 0)
        return NULL;
    if (fail_after > 0)
        fail_after--;
    return calloc(n, size);
}

/* Puts and takes against a reference array, many rounds of growth and
 * backward-shift deletion. */
static void test_table_model(void **state)
{
    enum { N = 5000 };
    static bool in[N];
    struct shim_table t;
    struct shim_alloc a;
    unsigned seed = 1;

    (void)state;
    shim_table_init(&t, NULL);
    assert_false(shim_table_get(&t, 1, 0, &a));
    assert_false(shim_table_take(&t, 1, 0, NULL));
    for (int round = 0; round < 100000; round++) {
        unsigned k;

        seed = seed * 1103515245u + 12345u;
        k = (seed >> 8) % N;
        /* keys collide in their low bits, as device pointers do */
        a = (struct shim_alloc){.key = 0x7f0000000000ull + ((uint64_t)k << 21),
                                .bytes = k + 1,
                                .dev = (int)(k % 3),
                                .space = (uint8_t)(k % 3)};
        if (in[k]) {
            struct shim_alloc out;

            assert_true(shim_table_take(&t, a.key, a.space, &out));
            assert_int_equal(out.bytes, k + 1);
            in[k] = false;
        } else {
            assert_true(shim_table_put(&t, &a));
            assert_false(shim_table_put(&t, &a)); /* no duplicates */
            in[k] = true;
        }
    }
    for (unsigned k = 0; k < N; k++) {
        uint64_t key = 0x7f0000000000ull + ((uint64_t)k << 21);

        assert_int_equal(shim_table_get(&t, key, (int)(k % 3), &a), in[k]);
        /* the same value in another space is another entry */
        assert_false(shim_table_get(&t, key, (int)((k + 1) % 3), &a));
    }
    shim_table_clear(&t);
    assert_false(shim_table_get(&t, 0x7f0000000000ull, 0, &a));
}

/* replace: a value the driver hands out again displaces the stale record;
 * take_ctx: a context's records go at once, their bytes summed per device. */
static void test_table_replace_and_ctx(void **state)
{
    uint64_t freed[SHIM_MAX_DEV] = {0}, freed_over[SHIM_MAX_DEV] = {0};
    struct shim_table t;
    struct shim_alloc a = {.key = 0x1000, .bytes = 10, .ctx = 7, .dev = 1}, old;

    (void)state;
    shim_table_init(&t, NULL);
    assert_true(shim_table_replace(&t, &a, &old));
    assert_false(old.used);
    a.bytes = 20;
    assert_true(shim_table_replace(&t, &a, &old));
    assert_true(old.used);
    assert_int_equal(old.bytes, 10);
    for (uint64_t k = 1; k <= 1000; k++) {
        struct shim_alloc b = {.key = k << 12,
                               .bytes = 1,
                               .ctx = k % 2 ? 7 : 9,
                               .dev = (int)(k % 4),
                               .over = k == 999};

        if (b.key != 0x1000)
            assert_true(shim_table_put(&t, &b));
    }
    /* 500 odd keys of context 7 (0x1000 among them, 20 bytes, device 1) */
    assert_int_equal(shim_table_take_ctx(&t, 7, freed, freed_over), 500);
    assert_int_equal(freed[1], 250 - 1 + 20);
    assert_int_equal(freed[3], 250 - 1); /* 999: oversubscribed, apart */
    assert_int_equal(freed_over[3], 1);
    assert_int_equal(freed[0] + freed[2], 0);
    for (uint64_t k = 1; k <= 1000; k++)
        assert_int_equal(shim_table_get(&t, k << 12, 0, &a), k % 2 == 0);
    assert_int_equal(shim_table_take_ctx(&t, 0, freed, freed_over), 0); /* 0: no context */
    shim_table_clear(&t);
}

/* Recounting one space on one device (contexts' measured overhead): only
 * those records change; UINT64_MAX only counts. */
static void test_table_resize_space(void **state)
{
    struct shim_table t;
    struct shim_alloc a;
    uint64_t old = 0;

    (void)state;
    shim_table_init(&t, NULL);
    for (uint64_t k = 1; k <= 40; k++) {
        struct shim_alloc b = {.key = k,
                               .bytes = k,
                               .ctx = k,
                               .dev = (int)(k % 2),
                               .space = k <= 20 ? SHIM_SPACE_CTX : SHIM_SPACE_PTR};

        assert_true(shim_table_put(&t, &b));
    }
    /* contexts on device 0: keys 2, 4, ... 20 */
    assert_int_equal(shim_table_resize_space(&t, SHIM_SPACE_CTX, 0, UINT64_MAX, &old), 10);
    assert_int_equal(old, 110);
    assert_int_equal(shim_table_resize_space(&t, SHIM_SPACE_CTX, 0, 7, &old), 10);
    assert_int_equal(old, 110);
    assert_int_equal(shim_table_resize_space(&t, SHIM_SPACE_CTX, 0, UINT64_MAX, &old), 10);
    assert_int_equal(old, 70);
    assert_true(shim_table_get(&t, 4, SHIM_SPACE_CTX, &a));
    assert_int_equal(a.bytes, 7);
    assert_true(shim_table_get(&t, 3, SHIM_SPACE_CTX, &a)); /* device 1: untouched */
    assert_int_equal(a.bytes, 3);
    assert_true(shim_table_get(&t, 22, SHIM_SPACE_PTR, &a)); /* another space */
    assert_int_equal(a.bytes, 22);
    assert_int_equal(shim_table_resize_space(&t, SHIM_SPACE_CTX, 5, 1, &old), 0);
    assert_int_equal(old, 0);
    shim_table_clear(&t);
}

/* A VMM handle's references and mappings: never below 0, changed only for
 * the allocation its serial names, removed when both reach 0. */
static void test_table_vmm(void **state)
{
    struct shim_table t;
    struct shim_alloc a = {
        .key = 0x40, .bytes = 100, .space = SHIM_SPACE_HANDLE, .refs = 1, .serial = 5};

    (void)state;
    shim_table_init(&t, NULL);
    assert_false(shim_table_vmm(&t, 0x40, 0, 0, 1, &a)); /* empty */
    assert_true(shim_table_put(&t, &a));
    a = (struct shim_alloc){.key = 0x40, .space = SHIM_SPACE_PTR};
    assert_true(shim_table_put(&t, &a));                 /* the same value, another space */
    assert_false(shim_table_vmm(&t, 0x40, 6, 0, 1, &a)); /* another allocation */
    assert_true(shim_table_vmm(&t, 0x40, 5, 0, 1, &a));  /* mapped */
    assert_int_equal(a.refs, 1);
    assert_int_equal(a.maps, 1);
    assert_true(shim_table_vmm(&t, 0x40, 0, -1, 0, &a)); /* released, still mapped */
    assert_int_equal(a.refs, 0);
    assert_true(shim_table_get(&t, 0x40, SHIM_SPACE_HANDLE, &a));
    assert_false(shim_table_vmm(&t, 0x40, 0, -1, 0, NULL)); /* no reference left to drop */
    assert_true(shim_table_vmm(&t, 0x40, 5, 1, 0, NULL));   /* retained from its address */
    assert_true(shim_table_vmm(&t, 0x40, 5, -1, 0, NULL));
    assert_true(shim_table_vmm(&t, 0x40, 5, 0, -1, &a)); /* unmapped: gone */
    assert_int_equal(a.refs + a.maps, 0);
    assert_int_equal(a.bytes, 100);
    assert_false(shim_table_get(&t, 0x40, SHIM_SPACE_HANDLE, &a));
    assert_true(shim_table_get(&t, 0x40, SHIM_SPACE_PTR, &a));
    shim_table_clear(&t);
}

/* A table that cannot grow refuses the put and stays consistent. */
static void test_table_alloc_failure(void **state)
{
    struct shim_table t;
    struct shim_alloc a = {.key = 1, .bytes = 1};

    (void)state;
    fail_after = 0;
    shim_table_init(&t, failing_calloc);
    assert_false(shim_table_put(&t, &a));
    assert_false(shim_table_get(&t, 1, 0, &a));
    fail_after = 1; /* the first table, not its growth */
    for (uint64_t k = 1; k <= 32; k++) {
        a.key = k;
        assert_true(shim_table_put(&t, &a));
    }
    a.key = 33;
    assert_false(shim_table_put(&t, &a));
    for (uint64_t k = 1; k <= 32; k++)
        assert_true(shim_table_get(&t, k, 0, &a));
    fail_after = -1;
    a.key = 33;
    assert_true(shim_table_put(&t, &a));
    shim_table_clear(&t);
}

static char *temp_file(const char *content, size_t n)
{
    char *path = strdup("/tmp/allot-shim-region-XXXXXX");
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    if (n)
        assert_int_equal(write(fd, content, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_region_reserve_release(void **state)
{
    char *path = temp_file(NULL, 0);
    struct shim_region *r = shim_region_open(path), *r2;

    (void)state;
    assert_non_null(r);
    /* a second mapping, as another process would have (opened first: an
     * open in this process is a new image of it, below) */
    r2 = shim_region_open(path);
    assert_non_null(r2);
    assert_int_equal(shim_region_reserve(r, 0, 600, true, 1000), CUDA_SUCCESS);
    assert_int_equal(shim_region_reserve(r, 0, 401, true, 1000), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(shim_region_reserve(r, 0, 400, true, 1000), CUDA_SUCCESS);
    assert_int_equal(shim_region_reserve(r, 1, 5000, false, 0), CUDA_SUCCESS);
    assert_int_equal(shim_region_used(r, 0), 1000);
    assert_int_equal(shim_region_used(r, 1), 5000);
    assert_int_equal(shim_region_reserve(r, SHIM_MAX_DEV, 1, false, 0), CUDA_ERROR_OUT_OF_MEMORY);
    /* the second mapping sees the same */
    assert_int_equal(shim_region_used(r2, 0), 1000);
    shim_region_release(r, 0, 600);
    shim_region_release(r, 0, 9999); /* never below zero */
    assert_int_equal(shim_region_used(r2, 0), 0);
    shim_region_close(r2);
    shim_region_close(r);
    shim_region_close(NULL);
    unlink(path);
    free(path);
}

/* A new image of this process (after exec(): same pid, same start time)
 * finds its slot with the old image's bytes, whose memory died with it:
 * they are zeroed, the metering is kept. */
static void test_region_new_image(void **state)
{
    char *path = temp_file(NULL, 0);
    struct allot_shim_usage *u = calloc(1, sizeof(*u));
    struct shim_region *old = shim_region_open(path), *r;

    (void)state;
    assert_non_null(u);
    assert_non_null(old);
    assert_int_equal(shim_region_reserve(old, 0, 600, true, 1000), CUDA_SUCCESS);
    assert_int_equal(shim_region_reserve_over(old, 1, 300, 1000), CUDA_SUCCESS);
    shim_region_count_launch(old);
    shim_region_close(old);
    r = shim_region_open(path);
    assert_non_null(r);
    assert_int_equal(shim_region_used(r, 0), 0);
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->n_procs, 1);
    assert_int_equal(u->procs[0].pid, getpid());
    assert_int_equal(u->used[0], 0);
    assert_int_equal(u->over[1], 0);
    assert_int_equal(u->procs[0].launches, 1);
    assert_int_equal(u->procs[0].peak[0], 600);
    assert_int_equal(u->reclaimed, 0);
    assert_int_equal(shim_region_reserve(r, 0, 1000, true, 1000), CUDA_SUCCESS);
    assert_int_equal(shim_region_self_used(r, 0), 1000);
    shim_region_close(r);
    unlink(path);
    free(path);
    free(u);
}

/* A slot whose process has exited is reclaimed. */
static void test_region_reclaim_dead(void **state)
{
    char *path = temp_file(NULL, 0);
    struct shim_region *r = shim_region_open(path);
    int st;
    pid_t pid;

    (void)state;
    assert_non_null(r);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct shim_region *c = shim_region_open(path);

        _exit(c && shim_region_reserve(c, 0, 900, true, 1000) == CUDA_SUCCESS ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* refused only until the dead one's bytes are taken back */
    assert_int_equal(shim_region_reserve(r, 0, 500, true, 1000), CUDA_SUCCESS);
    assert_int_equal(shim_region_used(r, 0), 500);
    assert_int_equal(shim_region_reclaim(r), 0);
    shim_region_close(r);
    unlink(path);
    free(path);
}

/* The reader library: per-job totals and per-process slots, a dead
 * process's counters kept, host pids written by the agent and read back
 * by the shim, files refused cleanly. */
static void test_region_reader(void **state)
{
    char *path = temp_file(NULL, 0), link_path[64];
    struct allot_shim_usage *u = calloc(1, sizeof(*u));
    struct shim_region *r;
    const struct allot_shim_proc *me;
    int st, self = (int)getpid();
    pid_t pid;

    (void)state;
    assert_non_null(u);
    /* created by the agent, not yet initialised: no use */
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->n_procs, 0);
    r = shim_region_open(path);
    assert_non_null(r);
    assert_int_equal(shim_region_reserve(r, 0, 600, true, 1000), CUDA_SUCCESS);
    shim_region_release(r, 0, 500);
    assert_int_equal(shim_region_reserve(r, 0, 300, true, 1000), CUDA_SUCCESS);
    assert_int_equal(shim_region_reserve_over(r, 0, 4000, 5000), CUDA_SUCCESS);
    assert_int_equal(shim_region_reserve_over(r, 0, 1001, 5000), CUDA_ERROR_OUT_OF_MEMORY);
    for (int i = 0; i < 7; i++)
        shim_region_count_launch(r);
    shim_region_meter(r, 1000, 5000);
    shim_region_meter(r, 0, -2000);
    shim_region_note_nvml(r, 0, 12345);
    /* a process that launched, was throttled and died */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct shim_region *c = shim_region_open(path);

        if (!c || shim_region_reserve(c, 0, 200, true, 1000) != CUDA_SUCCESS)
            _exit(1);
        shim_region_count_launch(c);
        shim_region_meter(c, 50, 70);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->version, 3);
    /* the dead one, not reclaimed yet, holds nothing; its metering counts */
    assert_int_equal(u->n_procs, 1);
    assert_int_equal(u->used[0], 400);
    assert_int_equal(u->peak[0], 600);
    assert_int_equal(u->launches, 8);
    assert_int_equal(u->busy_ns, 3070);
    assert_int_equal(shim_region_reclaim(r), 1);
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->n_procs, 1);
    assert_int_equal(u->reclaimed, 1);
    assert_int_equal(u->used[0], 400);
    assert_int_equal(u->peak[0], 600); /* the job's, dead processes' bytes included */
    assert_int_equal(u->over[0], 4000);
    assert_int_equal(u->launches, 8);
    assert_int_equal(u->throttled_ns, 1050);
    assert_int_equal(u->busy_ns, 3070);
    me = &u->procs[0];
    assert_int_equal(me->pid, self);
    assert_int_equal(me->used[0], 400);
    assert_int_equal(me->peak[0], 600);
    assert_int_equal(me->over[0], 4000);
    assert_int_equal(me->nvml_used[0], 12345);
    assert_int_equal(me->launches, 7);
    assert_int_equal(me->busy_ns, 3000);
    assert_true(me->start > 0);
    assert_int_equal(me->host_pid, 0);
    /* the agent finds and writes the host pid; the shim reads it back */
    assert_int_equal(allot_shim_region_find_host_pid(me, &self, 1), self);
    assert_int_equal(allot_shim_region_find_host_pid(me, &(int){1}, 1), 0);
    assert_int_equal(shim_region_host_pid(r), 0);
    assert_int_equal(allot_shim_region_set_host_pid(path, me->slot, 4242, me->start + 1), 0);
    assert_int_equal(shim_region_host_pid(r), 0); /* another process's start time */
    assert_int_equal(allot_shim_region_set_host_pid(path, me->slot, 4242, me->start), 0);
    assert_int_equal(shim_region_host_pid(r), 4242);
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->procs[0].host_pid, 4242);
    assert_int_equal(allot_shim_region_set_host_pid(path, SHIM_MAX_PROC, 1, 1), ALLOT_EINVAL);
    /* refused: a link, a missing file, a wrong size, a wrong magic */
    snprintf(link_path, sizeof(link_path), "%s.link", path);
    assert_int_equal(symlink(path, link_path), 0);
    assert_int_equal(allot_shim_region_read(link_path, u), ALLOT_EIO);
    unlink(link_path);
    assert_int_equal(allot_shim_region_read("/nonexistent/region", u), ALLOT_ENOENT);
    shim_region_close(r);
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(allot_shim_region_read(path, u), ALLOT_EINVAL);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(truncate(path, (off_t)sizeof(struct shim_region_hdr)), 0);
    {
        int fd = open(path, O_WRONLY);
        uint32_t bad = 0x12345678;

        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, &bad, sizeof(bad), 0), (ssize_t)sizeof(bad));
        close(fd);
    }
    assert_int_equal(allot_shim_region_read(path, u), ALLOT_EINVAL);
    assert_int_equal(allot_shim_region_read(path, NULL), ALLOT_EINVAL);
    unlink(path);
    free(path);
    free(u);
}

/* The state letter of /proc/PID/stat once it is want (2 s at most); the
 * last one seen otherwise. */
static char proc_state_wait(pid_t pid, char want)
{
    char path[64], buf[512], state = '?';

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 200 && state != want; i++) {
        FILE *f = fopen(path, "re");
        const char *p;
        size_t n;

        if (f) {
            n = fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            buf[n] = '\0';
            p = strrchr(buf, ')');
            if (p && p[1] == ' ')
                state = p[2];
        }
        if (state != want)
            nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    return state;
}

static void *idle_thread(void *arg)
{
    for (;;)
        pause();
    return arg;
}

/* Forks a process that takes bytes of device 0 in the region at path and
 * then pauses, or with main_exits leaves main through pthread_exit() while
 * another thread lives on. Returns its pid once it holds the bytes. */
static pid_t spawn_region_holder(const char *path, uint64_t bytes, bool main_exits)
{
    int fds[2];
    char c = 0;
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct shim_region *r = shim_region_open(path);
        pthread_t t;

        close(fds[0]);
        c = r && shim_region_reserve(r, 0, bytes, true, 1000) == CUDA_SUCCESS ? 'y' : 'n';
        if (main_exits && pthread_create(&t, NULL, idle_thread, NULL))
            c = 'n';
        if (write(fds[1], &c, 1) != 1)
            _exit(1);
        if (main_exits)
            pthread_exit(NULL);
        for (;;)
            pause();
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    assert_int_equal(c, 'y');
    return pid;
}

/* A process killed and not yet reaped (a zombie) holds no memory: the
 * shim reclaims its slot and the reader leaves it out. A process whose
 * main thread has left (pthread_exit) while another runs shows a zombie's
 * state too, but lives: its bytes stay counted. */
static void test_region_zombie(void **state)
{
    char *path = temp_file(NULL, 0);
    struct allot_shim_usage *u = calloc(1, sizeof(*u));
    struct shim_region *r = shim_region_open(path);
    pid_t pid;
    int st;

    (void)state;
    assert_non_null(u);
    assert_non_null(r);
    pid = spawn_region_holder(path, 900, false);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(proc_state_wait(pid, 'Z'), 'Z');
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->n_procs, 0);
    assert_int_equal(u->used[0], 0);
    assert_int_equal(shim_region_reserve(r, 0, 500, true, 1000), CUDA_SUCCESS);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    shim_region_release(r, 0, 500);
    pid = spawn_region_holder(path, 900, true);
    assert_int_equal(proc_state_wait(pid, 'Z'), 'Z'); /* its main thread's state */
    assert_int_equal(shim_region_reserve(r, 0, 500, true, 1000), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->used[0], 900);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(shim_region_reserve(r, 0, 500, true, 1000), CUDA_SUCCESS);
    shim_region_close(r);
    unlink(path);
    free(path);
    free(u);
}

/* The reader and a process of another pid namespace (a container's): its
 * pid means nothing here, so it is taken for alive until the agent has
 * written its host pid, then judged by that. */
static void test_region_reader_other_ns(void **state)
{
    char *path = temp_file(NULL, 0);
    struct allot_shim_usage *u = calloc(1, sizeof(*u));
    struct shim_region *r = shim_region_open(path);
    struct shim_region_hdr *h;
    uint64_t start = shim_proc_start(getpid());
    int fd;

    (void)state;
    assert_non_null(u);
    assert_non_null(r);
    fd = open(path, O_RDWR);
    h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(h != MAP_FAILED);
    h->slots[0].pid = 7; /* in its namespace */
    h->slots[0].pidns = shim_proc_pidns(0) + 1;
    h->slots[0].start = start;
    h->slots[0].used[0] = 100;
    h->slots_hi = 1;
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->n_procs, 1);
    assert_int_equal(u->used[0], 100);
    /* its host pid: this process, whose start time it has */
    assert_int_equal(allot_shim_region_set_host_pid(path, 0, (int)getpid(), start), 0);
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->used[0], 100);
    /* a start time no live process with that pid has: gone */
    h->slots[0].start = start + 1;
    assert_int_equal(allot_shim_region_set_host_pid(path, 0, (int)getpid(), start + 1), 0);
    assert_int_equal(allot_shim_region_read(path, u), 0);
    assert_int_equal(u->n_procs, 0);
    assert_int_equal(u->used[0], 0);
    munmap(h, sizeof(*h));
    close(fd);
    shim_region_close(r);
    unlink(path);
    free(path);
    free(u);
}

/* Every slot held by a live process: refused under a cap, uncounted
 * without one. */
static void test_region_full(void **state)
{
    char *path = temp_file(NULL, 0);
    struct shim_region *r = shim_region_open(path);
    struct shim_region_hdr *h;
    int fd;

    (void)state;
    assert_non_null(r);
    fd = open(path, O_RDWR);
    h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(h != MAP_FAILED);
    for (int i = 0; i < SHIM_MAX_PROC; i++)
        h->slots[i].pid = 1; /* init: alive, whoever we are */
    assert_int_equal(shim_region_reserve(r, 0, 1, true, 10), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(shim_region_reserve(r, 0, 1, false, 0), CUDA_SUCCESS);
    assert_int_equal(shim_region_used(r, 0), 0);
    munmap(h, sizeof(*h));
    close(fd);
    shim_region_close(r);
    unlink(path);
    free(path);
}

/* The compute budget's arithmetic, at 50 % with a 20 ms burst. */
static void test_sm_charge(void **state)
{
    int64_t debt = 0;
    uint64_t last = 1000000000ull, t = last;

    (void)state;
    /* at most 10 ms of unused allowance, however long the idle spell */
    assert_int_equal(shim_sm_charge(&debt, &last, 50, 20000000, 0, 4000000, t + 3000000000ull), 0);
    assert_int_equal(debt, -10000000 + 4000000);
    t += 3000000000ull;
    assert_int_equal(shim_sm_charge(&debt, &last, 50, 20000000, 0, 8000000, t), 0);
    assert_int_equal(debt, 2000000);
    /* owing 2 ms at 50 %: wait 4 ms */
    assert_int_equal(shim_sm_charge(&debt, &last, 50, 20000000, 0, 1000000, t), 4000000);
    /* 4 ms later: settled, charged */
    t += 4000000;
    assert_int_equal(shim_sm_charge(&debt, &last, 50, 20000000, 0, 1000000, t), 0);
    assert_int_equal(debt, 1000000);
    /* a measurement says the last launch took 3 ms less than charged */
    assert_int_equal(shim_sm_charge(&debt, &last, 50, 20000000, -3000000, 1000000, t), 0);
    assert_int_equal(debt, -1000000);
    /* a clock reading behind the books accrues nothing */
    assert_int_equal(shim_sm_charge(&debt, &last, 50, 20000000, 0, 0, t - 5000000), 0);
    assert_int_equal(last, t);
    /* no share: never wait */
    debt = 1000000000;
    assert_int_equal(shim_sm_charge(&debt, &last, 0, 20000000, 0, 1, t), 0);
}

static void test_region_corrupt(void **state)
{
    char junk[sizeof(struct shim_region_hdr)];
    char *small = temp_file("short", 5), *bad;
    struct shim_region *r;

    (void)state;
    assert_null(shim_region_open(small));
    memset(junk, 0x5a, sizeof(junk));
    bad = temp_file(junk, sizeof(junk));
    assert_null(shim_region_open(bad));
    assert_null(shim_region_open("/nonexistent/allot-region"));
    /* a valid region whose version is from elsewhere */
    unlink(bad);
    free(bad);
    bad = temp_file(NULL, 0);
    r = shim_region_open(bad);
    assert_non_null(r);
    shim_region_close(r);
    {
        int fd = open(bad, O_RDWR);
        struct shim_region_hdr *h =
            mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

        assert_true(h != MAP_FAILED);
        h->version = 99;
        munmap(h, sizeof(*h));
        close(fd);
    }
    assert_null(shim_region_open(bad));
    /* all zeros (its first process died initialising it): initialised */
    {
        int fd = open(bad, O_RDWR);
        char zero[sizeof(struct shim_region_hdr)];

        memset(zero, 0, sizeof(zero));
        assert_int_equal(pwrite(fd, zero, sizeof(zero), 0), (ssize_t)sizeof(zero));
        close(fd);
    }
    r = shim_region_open(bad);
    assert_non_null(r);
    assert_int_equal(shim_region_reserve(r, 0, 5, true, 10), CUDA_SUCCESS);
    shim_region_close(r);
    unlink(small);
    unlink(bad);
    free(small);
    free(bad);
}

/* ALLOT_SHIM_LOG: off, a file (appended, one line each), stderr. */
static void test_warn_destinations(void **state)
{
    char *path = temp_file(NULL, 0), text[256] = "";
    FILE *f;
    size_t n;

    (void)state;
    setenv("ALLOT_SHIM_LOG", path, 1);
    shim_warn("first %d", 1);
    shim_warn("%s", "second");
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_string_equal(text, "allot-cuda: first 1\nallot-cuda: second\n");
    /* a long message is cut to the 512-byte line, its newline kept */
    {
        char big[2000], line[1024];

        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(truncate(path, 0), 0);
        shim_warn("%s", big);
        f = fopen(path, "r");
        assert_non_null(f);
        n = fread(line, 1, sizeof(line), f);
        fclose(f);
        assert_int_equal(n, 511);
        assert_int_equal(line[510], '\n');
    }
    /* unset: silent; "stderr": stderr */
    {
        int saved = dup(2), fd = open(path, O_WRONLY | O_TRUNC);

        assert_true(saved >= 0 && fd >= 0);
        assert_int_equal(dup2(fd, 2), 2);
        unsetenv("ALLOT_SHIM_LOG");
        shim_warn("not shown");
        setenv("ALLOT_SHIM_LOG", "", 1);
        shim_warn("not shown either");
        setenv("ALLOT_SHIM_LOG", "stderr", 1);
        shim_warn("shown");
        fflush(stderr);
        assert_int_equal(dup2(saved, 2), 2);
        close(saved);
        close(fd);
        f = fopen(path, "r");
        assert_non_null(f);
        n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        assert_string_equal(text, "allot-cuda: shown\n");
    }
    setenv("ALLOT_SHIM_LOG", "off", 1);
    unlink(path);
    free(path);
}

/* UUID strings to hex digits, as NVML devices are matched to CUDA's */
static void test_uuid_hex(void **state)
{
    char hex[33];

    (void)state;
    assert_true(allot_shim_uuid_hex("GPU-0123abcd-EF01-2345-6789-abcdef012345", hex));
    assert_string_equal(hex, "0123abcdef0123456789abcdef012345");
    assert_true(allot_shim_uuid_hex("MIG-0123abcd-ef01-2345-6789-abcdef012345", hex));
    assert_string_equal(hex, "0123abcdef0123456789abcdef012345");
    assert_false(allot_shim_uuid_hex("GPU-0123", hex));
    assert_false(allot_shim_uuid_hex("GPU-0123abcd-ef01-2345-6789-abcdef0123456", hex));
    assert_false(allot_shim_uuid_hex("GPU-0123abcd-ef01-2345-6789-abcdef01234x", hex));
    assert_false(allot_shim_uuid_hex(NULL, hex));
}

/* Water-filling: weights split the GPU, ceilings cap, leftovers go on */
static void test_share_fill(void **state)
{
    const uint32_t w31[] = {3, 1}, c100[] = {100, 100, 100};
    const uint32_t w11[] = {1, 1}, c30[] = {30, 100};
    const uint32_t w1[] = {1}, c80[] = {80};
    const uint32_t w3[] = {1, 1, 2}, c3[] = {10, 50, 50};
    const uint32_t c5050[] = {50, 50};
    double out[3];

    (void)state;
    shim_share_fill(2, w31, c100, out);
    assert_true(out[0] > 74.9 && out[0] < 75.1 && out[1] > 24.9 && out[1] < 25.1);
    shim_share_fill(2, w11, c30, out);
    assert_true(out[0] > 29.9 && out[0] < 30.1 && out[1] > 69.9 && out[1] < 70.1);
    shim_share_fill(1, w1, c80, out);
    assert_true(out[0] > 79.9 && out[0] < 80.1);
    /* fair parts 25 / 25 / 50 cap the first and the last; 40 is left */
    shim_share_fill(3, w3, c3, out);
    assert_true(out[0] > 9.9 && out[0] < 10.1);
    assert_true(out[1] > 39.9 && out[1] < 40.1);
    assert_true(out[2] > 49.9 && out[2] < 50.1);
    /* hard limits that fit: each its limit whatever the weights */
    shim_share_fill(2, w31, c5050, out);
    assert_true(out[0] > 49.9 && out[0] < 50.1 && out[1] > 49.9 && out[1] < 50.1);
}

/* The share folder as the agent keeps it: two jobs' rates by the agent's
 * weights, an idle job left out, entries the agent did not write (or whose
 * activity file others may write) ignored, a job's own writes into its
 * activity file meaning nothing, and no entry, a folder others may write
 * or a bad name giving no sharing (the limit stays hard). */
static void test_share_folder(void **state)
{
    char dir[] = "/tmp/allot-share-XXXXXX", path[4400];
    const char *hex = "0123456789abcdef0123456789abcdef";
    struct shim_share *a, *b;
    uint64_t now;
    int fd;

    (void)state;
    assert_non_null(mkdtemp(dir));
    share_fixture_folder(dir, hex);
    share_fixture_entry(dir, hex, "1-0", 3, 80, geteuid(), getegid());
    share_fixture_entry(dir, hex, "2-0", 1, 100, geteuid(), getegid());
    /* not the agent's: a .job others may write; an activity file others
     * may write (both entries would take the GPU if they counted) */
    share_fixture_entry(dir, hex, "3-0", 1000000, 100, geteuid(), getegid());
    snprintf(path, sizeof(path), "%s/gpu-%s/3-0.job", dir, hex);
    assert_int_equal(chmod(path, 0666), 0);
    share_fixture_entry(dir, hex, "4-0", 1000000, 100, geteuid(), getegid());
    snprintf(path, sizeof(path), "%s/gpu-%s/4-0.seen", dir, hex);
    assert_int_equal(chmod(path, 0666), 0);
    if (geteuid() == 0) { /* a .job another user wrote */
        share_fixture_entry(dir, hex, "5-0", 1000000, 100, 4242, 4242);
        snprintf(path, sizeof(path), "%s/gpu-%s/5-0.job", dir, hex);
        assert_int_equal(chown(path, 4242, 4242), 0);
    }
    a = shim_share_open(dir, hex, "1-0");
    b = shim_share_open(dir, hex, "2-0");
    assert_non_null(a);
    assert_non_null(b);
    now = shim_share_now();
    shim_share_touch(a, now);
    shim_share_touch(b, now);
    assert_int_equal(shim_share_rate(a, now), 75);
    assert_int_equal(shim_share_rate(b, now), 25);
    /* b writes a huge weight into its own activity file: only its time counts */
    snprintf(path, sizeof(path), "%s/gpu-%s/2-0.seen", dir, hex);
    assert_int_equal(chmod(path, 0644), 0);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "weight 1000000\nceiling 100\n", 27), 27);
    close(fd);
    /* (each later look at least SHIM_SHARE_TOUCH_NS after the one before) */
    assert_int_equal(shim_share_rate(a, shim_share_now() + SHIM_SHARE_TOUCH_NS), 75);
    /* b idle: a alone, at the ceiling the agent gave it */
    share_fixture_age(dir, hex, "2-0", 1.0);
    assert_int_equal(shim_share_rate(a, shim_share_now() + 2 * SHIM_SHARE_TOUCH_NS), 80);
    /* b's entry gone (its task ended): b keeps to its limit */
    snprintf(path, sizeof(path), "%s/gpu-%s/2-0.job", dir, hex);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(shim_share_rate(b, shim_share_now() + 2000000000ull), 0);
    /* a GPU folder others may write is not the agent's: nobody shares */
    snprintf(path, sizeof(path), "%s/gpu-%s", dir, hex);
    assert_int_equal(chmod(path, 0777), 0);
    assert_int_equal(shim_share_rate(a, shim_share_now() + 3 * SHIM_SHARE_TOUCH_NS), 0);
    assert_int_equal(chmod(path, 0755), 0);
    /* no entry, a bad name, a share folder others may write: no sharing */
    assert_null(shim_share_open(dir, hex, "9-0"));
    assert_null(shim_share_open(dir, hex, "../1-0"));
    assert_null(shim_share_open(dir, hex, ".x"));
    assert_null(shim_share_open(dir, hex, NULL));
    assert_int_equal(chmod(dir, 01777), 0);
    assert_null(shim_share_open(dir, hex, "1-0"));
    shim_share_close(a);
    shim_share_close(b);
    shim_share_close(NULL);
    assert_int_equal(chmod(dir, 0700), 0);
    share_fixture_folder(dir, hex);
    rmdir(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_percent),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_table_model),
        cmocka_unit_test(test_table_replace_and_ctx),
        cmocka_unit_test(test_table_resize_space),
        cmocka_unit_test(test_table_vmm),
        cmocka_unit_test(test_table_alloc_failure),
        cmocka_unit_test(test_region_reserve_release),
        cmocka_unit_test(test_region_reclaim_dead),
        cmocka_unit_test(test_region_new_image),
        cmocka_unit_test(test_region_full),
        cmocka_unit_test(test_region_zombie),
        cmocka_unit_test(test_region_reader_other_ns),
        cmocka_unit_test(test_sm_charge),
        cmocka_unit_test(test_warn_destinations),
        cmocka_unit_test(test_region_corrupt),
        cmocka_unit_test(test_uuid_hex),
        cmocka_unit_test(test_share_fill),
        cmocka_unit_test(test_share_folder),
        cmocka_unit_test(test_region_reader),
    };

    setenv("ALLOT_SHIM_LOG", "off", 1); /* the corrupt files' warnings */
    return cmocka_run_group_tests_name("shim_units", tests, NULL, NULL);
}
