/*
 * Log retention: a task's log, STATE/logs/JOB/task-INDEX.log, outlives the
 * task so that `allot logs` can read it after the job ended (and after
 * the agent forgot the task). Without an end, a node running many short
 * jobs fills its state file system with them: every --log-retention / 10
 * (at least a second, at most an hour) the agent removes the log folder
 * of each job that has no task here any more and whose logs were last
 * written more than --log-retention ago (0: logs are kept for ever); the
 * agent touches a task's log when it forgets the task (task_forget), so
 * the time counts from the task's end at the latest.
 *
 * Only what the agent writes goes: files named task-INDEX.log, then the
 * folder. A folder holding anything else is left whole; a job that runs
 * here again later starts a new folder. Called
 * on the main loop's thread, which holds a->lock and is the one that
 * starts tasks, so no task of the job begins during a sweep; the log
 * endpoint (serve.c) then answers 404 for the job, as for one that never
 * ran here.
 */
#include "agent.h"
#include "log.h"

#include "allot/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether name is a file the agent writes in a log folder: a task log
 * ("task-INDEX.log") or the folder's owner (".owner", logs_claim, and the
 * temporary file it is written through). */
static bool task_log_name(const char *name)
{
    int index, n = 0;

    if (!strcmp(name, ".owner") || !strcmp(name, "..owner.tmp"))
        return true;
    return sscanf(name, "task-%d.log%n", &index, &n) == 1 && index >= 0 && name[n] == '\0';
}

/* The newest mtime of the task logs in folder fd (unix seconds), or -1
 * when it holds anything but task logs (or cannot be read). */
static int64_t folder_newest(int fd)
{
    int dup_fd = dup(fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    struct dirent *e;
    int64_t newest = 0;
    struct stat st;

    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    rewinddir(d); /* the copy shares fd's offset */
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!task_log_name(e->d_name) || fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode)) {
            newest = -1;
            break;
        }
        if (st.st_mtime > newest)
            newest = st.st_mtime;
    }
    closedir(d);
    return newest;
}

/* Removes the task logs of folder fd (they are all it holds). */
static int folder_empty(int fd)
{
    int dup_fd = dup(fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    struct dirent *e;
    int rc = 0;

    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    rewinddir(d);
    while ((e = readdir(d)))
        if (task_log_name(e->d_name) && unlinkat(fd, e->d_name, 0) < 0 && errno != ENOENT)
            rc = -1;
    closedir(d);
    return rc;
}

int logs_sweep(const struct agent *a, int64_t now_s)
{
    int64_t keep_s = a->cfg.log_retention / 1000;
    DIR *d;
    struct dirent *e;
    int gone = 0;

    if (a->cfg.log_retention <= 0 || !(d = opendir(a->logs_dir)))
        return 0;
    while ((e = readdir(d))) {
        int64_t job, newest;
        int fd;

        if (!allot_parse_num(e->d_name, 1, INT64_MAX, &job) || agent_has_job(a, job))
            continue;
        fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        newest = folder_newest(fd);
        if (newest >= 0 && now_s - newest > keep_s) {
            if (folder_empty(fd) == 0 && unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) == 0)
                gone++;
            else
                LOG_WARN("logs", "cannot remove %s/%s: %s", a->logs_dir, e->d_name,
                         strerror(errno));
        }
        close(fd);
    }
    closedir(d);
    if (gone)
        LOG_INFO("logs", "removed the logs of %d ended jobs (--log-retention)", gone);
    return gone;
}

int64_t logs_sweep_every(const struct agent *a)
{
    int64_t every = a->cfg.log_retention / 10;

    return every < 1000 ? 1000 : every > 3600000 ? 3600000 : every;
}

int logs_claim(const struct agent *a, int64_t job, const char *owner)
{
    char dir[4200], had[300] = "";
    int fd, rc = 0;

    allot_fmt(dir, sizeof(dir), "%s/%lld", a->logs_dir, (long long)job);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -1;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (agent_read_small(dir, ".owner", had, sizeof(had)) == 0 && !strcmp(had, owner)) {
        close(fd);
        return 0; /* this tenant's, from an earlier run of the job */
    }
    /* another tenant's job that had this id (a store restored from a
     * backup gives ids again), or logs of unknown owner (an older agent's):
     * not this job's to read or add to */
    if (folder_newest(fd) != 0) {
        LOG_WARN("logs", "job %lld: %s held logs of another owner (%s); removed", (long long)job,
                 dir, had[0] ? had : "unknown");
        rc = folder_empty(fd);
    }
    close(fd);
    if (rc == 0)
        rc = agent_write_atomic(dir, ".owner", owner) < 0 ? -1 : 0;
    return rc;
}
