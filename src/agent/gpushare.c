/*
 * The GPU share folder, STATE/gpushare (docs/shim.md "Between jobs",
 * docs/agent.md): where the shims of the jobs on one GPU learn each
 * other's weights and demand. The agent owns it and everything in it; no
 * job can write it:
 *
 *   gpushare/                 0755, the agent's
 *     gpu-<UUID hex>/         0755, the agent's, one per GPU with a task
 *       KEY.job               0644, the agent's: "weight W\nceiling C\nuid U\n"
 *       KEY.seen              0444, empty, owned by the task's uid: the only
 *                             thing the job may change is its time, which
 *                             says when it last wanted GPU time
 *
 * KEY is the task's ("JOB-INDEX", ALLOT_GPU_SHARE_ID). An entry is written
 * before the task starts (the .seen first, the .job renamed into place) and
 * removed when it ends or is forgotten. An older agent's folder (sticky,
 * open to every user) or anything else that is not the agent's is moved
 * aside and removed at start, with the entries of tasks that no longer
 * have a folder.
 *
 * Called from the agent's loop thread (main.c at start, task.c).
 */
#include "agent.h"

#include "allot/common.h"
#include "allot/shim_region.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether st is a folder of the agent's that nobody else may write. */
static bool ours(const struct stat *st)
{
    return S_ISDIR(st->st_mode) && st->st_uid == geteuid() && (st->st_mode & 07777) == 0755;
}

/* Removes the files of folder gpu (fd of a gpu-* folder) whose task has
 * no folder in tasks_dir. */
static void drop_entries(int gpu, const char *tasks_dir)
{
    int fd = dup(gpu);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;

    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((e = readdir(d))) {
        char k[256], path[4400];
        const char *dot = strchr(e->d_name, '.');
        struct stat st;
        size_t n = dot ? (size_t)(dot - e->d_name) : strlen(e->d_name);

        if (e->d_name[0] == '.' || n >= sizeof(k))
            continue;
        memcpy(k, e->d_name, n);
        k[n] = '\0';
        allot_fmt(path, sizeof(path), "%s/%s", tasks_dir, k);
        if (stat(path, &st) < 0 && errno == ENOENT)
            unlinkat(gpu, e->d_name, 0);
    }
    closedir(d);
}

/* Calls drop_entries for every gpu-* folder of the share folder. */
static void drop_all(const char *state_dir, const char *tasks_dir)
{
    char path[4200];
    struct dirent *e;
    DIR *d;

    allot_fmt(path, sizeof(path), "%s/gpushare", state_dir);
    if (!(d = opendir(path)))
        return;
    while ((e = readdir(d))) {
        int fd;

        if (strncmp(e->d_name, "gpu-", 4) != 0)
            continue;
        fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            drop_entries(fd, tasks_dir);
            close(fd);
        }
    }
    closedir(d);
}

int share_setup(const char *state_dir, const char *tasks_dir)
{
    char path[4200], aside[4300];
    struct stat st;

    allot_fmt(path, sizeof(path), "%s/gpushare", state_dir);
    if (lstat(path, &st) == 0 && !ours(&st)) {
        /* an older agent's (sticky, open to all: any user could have
         * left anything there) or not ours: nothing in it is trusted */
        int fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        allot_fmt(aside, sizeof(aside), "gpushare.old-%d", (int)getpid());
        if (fd < 0 || renameat(fd, "gpushare", fd, aside) < 0) {
            LOG_WARN("agent", "%s: not the agent's and cannot be moved aside: %s", path,
                     strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        agent_rm_tree(fd, aside, 4);
        close(fd);
        LOG_INFO("agent", "%s: an older agent's or not the agent's: replaced", path);
    }
    if ((mkdir(path, 0755) < 0 && errno != EEXIST) || lstat(path, &st) < 0 ||
        ((st.st_mode & 07777) != 0755 && chmod(path, 0755) < 0) || lstat(path, &st) < 0 ||
        !ours(&st)) {
        LOG_WARN("agent", "%s: cannot make it the agent's folder: %s", path, strerror(errno));
        return -1;
    }
    drop_all(state_dir, tasks_dir);
    return 0;
}

/* Writes name in folder fd: the text, mode 0644, renamed into place. */
static int write_job(int fd, const char *name, const char *text)
{
    char tmp[300];
    size_t n = strlen(text);
    int f;

    allot_fmt(tmp, sizeof(tmp), "%s.tmp", name);
    unlinkat(fd, tmp, 0);
    f = openat(fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0)
        return -1;
    if (write(f, text, n) != (ssize_t)n || fchmod(f, 0644) < 0 || close(f) < 0) {
        close(f);
        unlinkat(fd, tmp, 0);
        return -1;
    }
    if (renameat(fd, tmp, fd, name) < 0) {
        unlinkat(fd, tmp, 0);
        return -1;
    }
    return 0;
}

int share_task_add(const struct agent *a, const char *key, json_t *d, uid_t uid, gid_t gid,
                   char *why, size_t len)
{
    json_int_t g0 = json_integer_value(json_array_get(json_object_get(d, "gpus"), 0));
    json_int_t milli = json_integer_value(json_object_get(d, "gpu_milli"));
    json_int_t w = json_integer_value(json_object_get(d, "share_weight"));
    char path[4400], hex[33], name[300], text[128];
    int fd, f;
    struct stat st;
    long long percent = (milli + 9) / 10;

    if (g0 < 0 || g0 >= a->inv.n_gpus || milli <= 0 || milli >= 1000) {
        allot_fmt(why, len, "no GPU fraction to share");
        return -1;
    }
    /* the UUID's 32 hex digits, as the shim names the GPU */
    if (!allot_shim_uuid_hex(a->inv.gpus[g0].uuid, hex)) {
        allot_fmt(why, len, "GPU %s: not a UUID the shim can name", a->inv.gpus[g0].uuid);
        return -1;
    }
    allot_fmt(path, sizeof(path), "%s/gpushare/gpu-%s", a->cfg.state_dir, hex);
    if ((mkdir(path, 0755) < 0 && errno != EEXIST) ||
        (fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        allot_fmt(why, len, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || ((st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0) ||
        fstat(fd, &st) < 0 || !ours(&st)) {
        allot_fmt(why, len, "%s: not the agent's folder", path);
        close(fd);
        return -1;
    }
    /* the job's activity file first: a shim that finds the .job finds it */
    allot_fmt(name, sizeof(name), "%s.seen", key);
    unlinkat(fd, name, 0);
    f = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (f < 0 || (getuid() == 0 && fchown(f, uid, gid) < 0) || fchmod(f, 0444) < 0) {
        allot_fmt(why, len, "%s/%s: %s", path, name, strerror(errno));
        if (f >= 0)
            close(f);
        close(fd);
        return -1;
    }
    close(f);
    /* the weight: the tenant's (x 100, from allotd), else the limit, as
     * the shim's default was; the ceiling: 100 in soft mode, else the limit */
    if (w <= 0)
        w = percent;
    if (w > ALLOT_SHIM_SHARE_WEIGHT_MAX)
        w = ALLOT_SHIM_SHARE_WEIGHT_MAX;
    allot_fmt(text, sizeof(text), "weight %lld\nceiling %lld\nuid %lu\n", (long long)w,
              !strcmp(a->cfg.sm_share, "soft") ? 100LL : percent,
              (unsigned long)(getuid() == 0 ? uid : geteuid()));
    allot_fmt(name, sizeof(name), "%s.job", key);
    if (write_job(fd, name, text) < 0) {
        allot_fmt(why, len, "%s/%s: %s", path, name, strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

void share_task_remove(const struct agent *a, const struct task *t)
{
    char path[4400], hex[33];

    /* only the folders of its GPUs (a fraction has one): share_setup
     * sweeps whatever an agent that died left elsewhere */
    for (int g = 0; g < a->inv.n_gpus; g++) {
        if (!(t->gpu_mask >> g & 1) || !allot_shim_uuid_hex(a->inv.gpus[g].uuid, hex))
            continue;
        allot_fmt(path, sizeof(path), "%s/gpushare/gpu-%s/%s.job", a->cfg.state_dir, hex, t->key);
        unlink(path);
        allot_fmt(path, sizeof(path), "%s/gpushare/gpu-%s/%s.seen", a->cfg.state_dir, hex, t->key);
        unlink(path);
    }
}
