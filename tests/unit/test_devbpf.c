/*
 * The agent's BPF device program (src/agent/devbpf.c) on the real kernel:
 * a cgroup v2 folder gets a program allowing /dev/null (1:3) and any minor
 * of major 1 except nothing else; a child moved into the folder opens what
 * is allowed and gets EPERM for the rest. Needs root and a cgroup v2
 * hierarchy (pure v2 at /sys/fs/cgroup, or the hybrid one at
 * /sys/fs/cgroup/unified); without root it is skipped with the reason.
 */
#include "agent.h"

#include "allot/common.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* The v2 folder to work in, or NULL. */
static const char *v2_base(void)
{
    struct stat st;

    if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0)
        return "/sys/fs/cgroup";
    if (stat("/sys/fs/cgroup/unified/cgroup.controllers", &st) == 0)
        return "/sys/fs/cgroup/unified";
    return NULL;
}

/* In a child inside `dir`: the errno of opening each path (0: opened). */
static int try_open(const char *dir, const char *path)
{
    int pipefd[2], result = -1;
    pid_t pid;

    assert_int_equal(pipe(pipefd), 0);
    pid = fork();
    if (pid == 0) {
        char procs[512], num[32];
        int fd, e = 0;

        snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
        snprintf(num, sizeof(num), "%d", (int)getpid());
        fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, num, strlen(num)) < 0)
            _exit(99);
        close(fd);
        fd = open(path, O_RDONLY);
        if (fd < 0)
            e = errno;
        else
            close(fd);
        if (write(pipefd[1], &e, sizeof(e)) != sizeof(e))
            _exit(98);
        _exit(0);
    }
    close(pipefd[1]);
    assert_int_equal(read(pipefd[0], &result, sizeof(result)), (ssize_t)sizeof(result));
    close(pipefd[0]);
    waitpid(pid, NULL, 0);
    return result;
}

static void test_device_program(void **state)
{
    const char *base = v2_base();
    struct dev_rule rules[] = {{1, 3}, {5, -1}}; /* /dev/null, every tty major 5 device */
    char dir[256], err[512];

    (void)state;
    if (geteuid() != 0)
        skip(); /* loading BPF programs and moving into cgroups needs root */
    assert_non_null(base);
    snprintf(dir, sizeof(dir), "%s/allot-test-devbpf-%d", base, (int)getpid());
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(devbpf_attach(dir, rules, 2, err, sizeof(err)), 0);
    assert_int_equal(try_open(dir, "/dev/null"), 0);
    assert_int_equal(try_open(dir, "/dev/zero"), EPERM);    /* 1:5: not listed */
    assert_int_equal(try_open(dir, "/dev/urandom"), EPERM); /* 1:9 */
    /* a rule with any minor: major 5 (tty 5:0, ptmx 5:2); opening may fail
     * for other reasons (no controlling terminal), never with EPERM */
    assert_true(try_open(dir, "/dev/ptmx") != EPERM);
    /* a regular file is not a device: untouched */
    assert_int_equal(try_open(dir, "/etc/hostname"), 0);
    assert_int_equal(rmdir(dir), 0);
    /* too many rules, and a folder that is not a cgroup */
    struct dev_rule many[CG_MAX_DEV_RULES + 1] = {{0}};
    assert_int_equal(devbpf_attach(dir, many, CG_MAX_DEV_RULES + 1, err, sizeof(err)), -1);
    assert_int_equal(devbpf_attach("/nonexistent", rules, 2, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/nonexistent"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_device_program)};

    return cmocka_run_group_tests(tests, NULL, NULL);
}
