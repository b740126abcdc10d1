/*
 * GPU share folders prepared the way the agent prepares them
 * (src/agent/share.c, docs/shim.md "Between jobs"), for the shim's tests
 * that run without an agent: DIR (0755) / gpu-HEX (0755) / ID.job (the
 * weight, ceiling and uid; 0644, this user's) and ID.seen (empty, 0444,
 * owned by the job's uid). Header-only: each test program includes it
 * once (static inline: a program may use some of them); cmocka's asserts
 * report a failure.
 */
#ifndef ALLOT_TESTS_SHIM_SHARE_FIXTURE_H
#define ALLOT_TESTS_SHIM_SHARE_FIXTURE_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder of GPU hex in the share folder dir, emptied of entries. */
static inline void share_fixture_folder(const char *dir, const char *hex)
{
    char path[4096], file[4400];
    struct dirent *e;
    DIR *d;

    mkdir(dir, 0755);
    assert_int_equal(chmod(dir, 0755), 0);
    snprintf(path, sizeof(path), "%s/gpu-%s", dir, hex);
    mkdir(path, 0755);
    assert_int_equal(chmod(path, 0755), 0);
    d = opendir(path);
    assert_non_null(d);
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
            unlink(file);
        }
    closedir(d);
}

/* Entry id of a job running as uid:gid with weight and ceiling (percent),
 * written as the agent writes it. */
static inline void share_fixture_entry(const char *dir, const char *hex, const char *id,
                                       unsigned weight, unsigned ceiling, uid_t uid, gid_t gid)
{
    char path[4400], text[128];
    int fd, n;

    snprintf(path, sizeof(path), "%s/gpu-%s/%s.seen", dir, hex, id);
    unlink(path);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    assert_true(fd >= 0);
    if (uid != geteuid())
        assert_int_equal(fchown(fd, uid, gid), 0);
    assert_int_equal(fchmod(fd, 0444), 0);
    close(fd);
    n = snprintf(text, sizeof(text), "weight %u\nceiling %u\nuid %u\n", weight, ceiling,
                 (unsigned)uid);
    snprintf(path, sizeof(path), "%s/gpu-%s/%s.job", dir, hex, id);
    unlink(path);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, (size_t)n), n);
    assert_int_equal(fchmod(fd, 0644), 0);
    close(fd);
}

/* Sets entry id's .seen time to ago_s seconds before now (an idle job). */
static inline void share_fixture_age(const char *dir, const char *hex, const char *id, double ago_s)
{
    struct timespec ts[2];
    char path[4400];

    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= (time_t)ago_s;
    ts[0].tv_nsec -= (long)((ago_s - (double)(time_t)ago_s) * 1e9);
    if (ts[0].tv_nsec < 0) {
        ts[0].tv_nsec += 1000000000L;
        ts[0].tv_sec--;
    }
    ts[1] = ts[0];
    snprintf(path, sizeof(path), "%s/gpu-%s/%s.seen", dir, hex, id);
    assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

#endif
