/*
 * The task's supervisor and the task's process, both forked from the agent
 * (task.c task_launch forks the supervisor, which forks the task).
 *
 * The supervisor (task_supervisor) runs in a session of its own, outside
 * the task's cgroup, for as long as the task: it starts the task's
 * process, copies the task's output from a pipe into the task's log up to
 * --log-max, fences the task when the agent's fence deadline passed (the
 * agent killed outright cannot), and once the task's process ended kills
 * everything left in the task's cgroup (cg_kill: a process the job put in
 * a session of its own included) before it writes the exit file. So the
 * exit file always means "nothing of the task runs any more" (as root,
 * with cgroups), also while the agent is down.
 *
 * The task's process (run_child), before exec, in this order: its own
 * process group, its cgroup, its network namespace, standard streams,
 * umask 077, a private /tmp, /dev/shm and /proc (the process executor, as
 * root),
 * then it drops to the job's user, and only then changes to the working
 * directory: every path of the job is resolved with the job's rights.
 */
#include "agent.h"
#include "net.h"

#include "allot/common.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the private /tmp, /dev/shm and /proc ---- */

/* The folder right below /tmp or /dev/shm that path lies in (into top),
 * or false when it lies in neither (or names "." or ".." there). */
static bool top_in_tmp(const char *path, char *top, size_t len)
{
    static const char *const bases[] = {"/tmp/", "/dev/shm/"};

    for (size_t i = 0; path && i < sizeof(bases) / sizeof(bases[0]); i++) {
        size_t bl = strlen(bases[i]), cl;

        if (strncmp(path, bases[i], bl) != 0)
            continue;
        cl = strcspn(path + bl, "/");
        if (cl == 0 || (cl == 1 && path[bl] == '.') ||
            (cl == 2 && path[bl] == '.' && path[bl + 1] == '.') || bl + cl >= len)
            return false;
        memcpy(top, path, bl + cl);
        top[bl + cl] = '\0';
        return true;
    }
    return false;
}

/* Gives the calling process (root, the task's process before it drops
 * privileges) a mount namespace of its own with a /proc that hides other
 * users' processes, and as /tmp and /dev/shm the job's tmpfs on this node
 * (jobfs_dir: shared by the job's tasks here, --tmp-size each, their pages
 * charged to the memory cgroup of the task that wrote them; an MPS
 * client's /dev/shm is its MPS server's). What the task needs from the
 * host's /tmp stays: the agent's state folder (emulated devices, the shim
 * region, the GPU share folder) and the working directory, each by the
 * folder right below /tmp that holds it, bound at the same path with its
 * own owner and mode (a symbolic link there is not followed). Returns 0
 * or -1 with why. */
static int private_tmp(const struct agent *a, const struct task *t, const char *workdir, char *why,
                       size_t wlen)
{
    char state[4096], keep[2][4096], src[64], dir[2][4400];
    static const char *const at[] = {"/tmp", "/dev/shm"};
    int fds[2] = {-1, -1}, own[2] = {-1, -1}, n = 0, rc = -1;
    struct stat st;

    if (realpath(a->cfg.state_dir, state) && top_in_tmp(state, keep[n], sizeof(keep[n])))
        n++;
    if (workdir && top_in_tmp(workdir, keep[n], sizeof(keep[n])) &&
        (!n || strcmp(keep[0], keep[n]) != 0))
        n++;
    jobfs_dir(a, t->job, "tmp", dir[0], sizeof(dir[0]));
    if (t->mps_gpu >= 0) /* an MPS client meets its server in /dev/shm (docs/agent.md) */
        mps_shm_dir(a, t->mps_gpu, dir[1], sizeof(dir[1]));
    else
        jobfs_dir(a, t->job, "shm", dir[1], sizeof(dir[1]));
    if (unshare(CLONE_NEWNS) < 0) {
        allot_fmt(why, wlen, "unshare(CLONE_NEWNS): %s", strerror(errno));
        goto out;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        allot_fmt(why, wlen, "making the mounts private: %s", strerror(errno));
        goto out;
    }
    /* opened in the new namespace (a bind's source must be in it), before
     * /tmp is covered */
    for (int i = 0; i < 2; i++)
        if ((own[i] = open(dir[i], O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC)) < 0) {
            allot_fmt(why, wlen, "%s: %s", dir[i], strerror(errno));
            goto out;
        }
    for (int i = 0; i < n; i++) {
        fds[i] = open(keep[i], O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
        if (fds[i] >= 0 && (fstat(fds[i], &st) < 0 || !S_ISDIR(st.st_mode))) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (i == 1 && stat(at[i], &st) < 0)
            break; /* no /dev/shm on this host */
        allot_fmt(src, sizeof(src), "/proc/self/fd/%d", own[i]);
        if (mount(src, at[i], NULL, MS_BIND, NULL) < 0) {
            allot_fmt(why, wlen, "%s on %s: %s", dir[i], at[i], strerror(errno));
            goto out;
        }
    }
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue; /* gone, or not a folder: the job's chdir says so */
        /* the target by a descriptor, never through a link: the job's /tmp
         * is the job's to write, and another of its tasks may have put a
         * link there (mount(2) would follow it, binding over any folder) */
        char dst[64];
        int tfd = -1;
        allot_fmt(src, sizeof(src), "/proc/self/fd/%d", fds[i]);
        if ((mkdir(keep[i], 0700) < 0 && errno != EEXIST) ||
            (tfd = open(keep[i], O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC)) < 0) {
            allot_fmt(why, wlen, "%s in the private /tmp: %s", keep[i],
                      errno == ENOTDIR || errno == ELOOP ? "not a folder" : strerror(errno));
            goto out;
        }
        allot_fmt(dst, sizeof(dst), "/proc/self/fd/%d", tfd);
        int bound = mount(src, dst, NULL, MS_BIND | MS_REC, NULL), err = errno;
        close(tfd);
        if (bound < 0) {
            allot_fmt(why, wlen, "%s into the private /tmp: %s", keep[i], strerror(err));
            goto out;
        }
    }
    /* a /proc of its own that shows only its user's processes: other
     * tenants' command lines stay hidden. Linux 5.8 and later give each
     * /proc mount its own options; an older kernel refuses "invisible"
     * (EINVAL), and the task keeps the host's /proc, as the agent warned */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible") < 0 &&
        errno != EINVAL) {
        allot_fmt(why, wlen, "a /proc of its own: %s", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (int i = 0; i < 2; i++)
        if (own[i] >= 0)
            close(own[i]);
    return rc;
}

/* ---- the task's process ---- */

/* In the task's process, after fork: never returns. Its standard output
 * and error go to out_fd (the supervisor's pipe). */
static void run_child(const struct agent *a, const struct task *t, char **argv, char **envp,
                      const struct run_user *u, const char *workdir, int out_fd)
{
    /* a container: crun (root) sets the user, directory and environment */
    bool crun = argv[0] == a->cfg.crun;
    int null_fd = open("/dev/null", O_RDONLY);
    char why[512];

    setpgid(0, 0);
    if (getuid() == 0 && cg_enter(a->cfg.cgroup_root, t->key, getpid()) < 0) {
        dprintf(out_fd, "allot-agent: cannot enter the task's cgroup\n");
        _exit(126);
    }
    if (t->net) { /* its tenant network (net.h); crun inherits it */
        char ns[96], path[160];
        net_ns_name(t->key, ns, sizeof(ns));
        allot_fmt(path, sizeof(path), "/run/netns/%s", ns);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
            dprintf(out_fd, "allot-agent: cannot join the network namespace %s\n", ns);
            _exit(126);
        }
        close(fd);
    }
    if (null_fd >= 0)
        dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    close_range(3, ~0U, 0);
    /* what the job writes is its own unless it says otherwise */
    umask(crun ? 022 : 077); /* crun gives the container 077 itself (config.json); what
                                it makes in the image (mount points) must stay passable */
    /* the process executor: /tmp, /dev/shm and /proc of its own (a
     * container has its own already); never unisolated when they cannot
     * be made */
    if (getuid() == 0 && !crun && private_tmp(a, t, workdir, why, sizeof(why)) < 0) {
        dprintf(2, "allot-agent: cannot give the task a private /tmp, /dev/shm and /proc: %s\n",
                why);
        _exit(126);
    }
    if (getuid() == 0 && !crun &&
        (setgroups(0, NULL) < 0 || setgid(u->gid) < 0 || setuid(u->uid) < 0)) {
        dprintf(2, "allot-agent: cannot become uid %d: %s\n", (int)u->uid, strerror(errno));
        _exit(126);
    }
    /* with the job's rights: a folder its user cannot reach stays out of
     * reach, and the error says no more than the job could learn itself */
    if (crun)
        workdir = "/";
    if (workdir && chdir(workdir) < 0) {
        dprintf(2, "allot-agent: workdir %s: %s\n", workdir, strerror(errno));
        _exit(126);
    }
    if (!workdir && chdir(u->home) < 0 && chdir("/") < 0)
        _exit(126);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (crun && a->cg_v2 == 0) {
        /* a hybrid host (v1 controllers, a v2 mount beside them), which crun
         * refuses: in a mount namespace of its own crun sees v1 only */
        if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
            umount2("/sys/fs/cgroup/unified", MNT_DETACH);
    }
    /* a command without a slash is looked up in the PATH it runs with (the
     * job's), not the agent's: execvpe searches the caller's environment */
    if (crun) {
        static char *crun_env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                   "/usr/bin:/sbin:/bin",
                                   NULL};
        environ = crun_env;
    } else {
        environ = envp;
    }
    execvp(argv[0], argv);
    dprintf(2, "allot-agent: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* ---- the task's log ---- */

/* The task's output on its way to its log: the read end of its pipe and
 * the log, with how much the log holds. */
struct log_pump {
    int in;       /* pipe (non-blocking), -1 once at its end */
    int out;      /* the log, O_APPEND */
    int64_t size; /* bytes in the log */
    int64_t max;  /* --log-max; 0: no cap */
    bool full;    /* at the cap: the rest is read and dropped */
};

static const char log_full_fmt[] =
    "\nallot-agent: this log reached its cap of %lld bytes (--log-max): the rest of "
    "the task's output is discarded\n";

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a full disk: the output is lost, the task goes on */
        p += w;
        n -= (size_t)w;
    }
}

/* Moves what the pipe holds into the log, up to the cap (whose notice,
 * written once, counts within it). Returns false at the pipe's end. */
static bool log_pump_once(struct log_pump *lp)
{
    char buf[65536], note[256];
    ssize_t n;
    int64_t room;
    int nl;

    if (lp->in < 0)
        return false;
    n = read(lp->in, buf, sizeof(buf));
    if (n < 0)
        return errno == EAGAIN || errno == EINTR;
    if (n == 0)
        return false;
    if (lp->max <= 0) {
        write_all(lp->out, buf, (size_t)n);
        return true;
    }
    if (lp->full)
        return true;
    nl = allot_fmt(note, sizeof(note), log_full_fmt, (long long)lp->max);
    room = lp->max - lp->size - nl;
    if (room < 0)
        room = 0;
    if (n <= room) {
        write_all(lp->out, buf, (size_t)n);
        lp->size += n;
        return true;
    }
    write_all(lp->out, buf, (size_t)room);
    lp->size += room;
    if (lp->size + nl <= lp->max) { /* not when an earlier run wrote it */
        write_all(lp->out, note, (size_t)nl);
        lp->size += nl;
    }
    lp->full = true;
    return true;
}

/* After the task ended: what is left in the pipe, without waiting for a
 * writer that is still there (no cgroups to end it with: it then gets
 * EPIPE). */
static void log_pump_drain(struct log_pump *lp)
{
    for (int i = 0; i < 4096 && log_pump_once(lp); i++) {
        struct pollfd p = {.fd = lp->in, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP)))
            break;
    }
    if (lp->in >= 0)
        close(lp->in);
    lp->in = -1;
}

/* ---- the supervisor ---- */

/* The agent's fence deadline (monotonic ms), from STATE/fence-at, and
 * into *end_ms the lease's end (a file of an agent before it wrote one:
 * the deadline, then the grace); 0 when there is none (fencing off, or not
 * yet registered). */
static int64_t fence_deadline(const struct agent *a, int64_t *end_ms)
{
    char buf[64], *p;
    int64_t at = 0;

    *end_ms = 0;
    if (agent_read_small(a->tasks_dir, "../fence-at", buf, sizeof(buf)) == 0) {
        at = strtoll(buf, &p, 10);
        *end_ms = strtoll(p, NULL, 10);
    }
    if (at > 0 && *end_ms <= at)
        *end_ms = at + 1000 + FENCE_MARGIN_MS + a->cfg.grace;
    return at;
}

int64_t task_fence_grace(const struct agent *a, int64_t now_ms, int64_t end_ms)
{
    int64_t left = end_ms - FENCE_MARGIN_MS - now_ms;

    return left < 0 ? 0 : left < a->cfg.grace ? left : a->cfg.grace;
}

void task_fence_deadline(const struct agent *a, int64_t last_ok, int64_t lease)
{
    int64_t at_ms = FENCE_AT(a, last_ok, lease), end_ms = last_ok + lease;
    static int64_t written = -1; /* only the loop's thread calls it */
    char text[64], tmp[4200], path[4200];
    int fd;
    bool ok;

    /* after every heartbeat: written only when it moved by half a second
     * (a supervisor waits a second past it) or to 0, and not synced (it
     * means nothing after a reboot), so the loop never waits on the disk */
    if (at_ms == written || (at_ms && written > 0 && at_ms - written < 500))
        return;
    allot_fmt(text, sizeof(text), "%lld %lld\n", (long long)at_ms, (long long)(at_ms ? end_ms : 0));
    allot_fmt(tmp, sizeof(tmp), "%s/.fence-at.tmp", a->cfg.state_dir);
    allot_fmt(path, sizeof(path), "%s/fence-at", a->cfg.state_dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    if (fd >= 0)
        close(fd);
    if (ok && rename(tmp, path) == 0)
        written = at_ms;
    else
        LOG_WARN("agent", "%s: cannot write the fence deadline: %s", path, strerror(errno));
}

static void on_chld(int sig)
{
    (void)sig; /* only wakes ppoll */
}

/* The supervisor's wait for the task's process, copying its output into
 * its log meanwhile: it also fences the task when the agent's fence
 * deadline passed by a second (the agent, while it lives, fences at its
 * first failed heartbeat past the deadline, which may come later; one
 * killed outright cannot), with task_fence_grace before SIGKILL. Its
 * `fenced` marker tells the agent, live or restarted, that the task was
 * fenced, not failed. */
static void supervise(const struct agent *a, const char *dir, pid_t pid, int *status,
                      struct log_pump *lp)
{
    struct timespec tick = {0, 200 * 1000000L};
    struct sigaction sa = {.sa_handler = on_chld};
    int64_t kill_at = 0, end = 0;
    sigset_t chld, waiting;

    /* SIGCHLD is blocked but while ppoll waits: the child's end wakes the
     * wait at once; the fence is looked at every tick */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &waiting);
    sigdelset(&waiting, SIGCHLD);
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        int64_t now = allot_mono_ms(), deadline;
        struct pollfd p = {.fd = lp->in, .events = POLLIN};

        if (r == pid || (r < 0 && errno != EINTR))
            return;
        if (!kill_at && (deadline = fence_deadline(a, &end)) > 0 && now > deadline + 1000) {
            agent_write_atomic(dir, "fenced", "agent out of reach\n");
            kill(-pid, SIGCONT); /* a stopped task handles it too */
            kill(-pid, SIGTERM);
            kill_at = now + task_fence_grace(a, now, end);
        } else if (kill_at && now >= kill_at) {
            kill(-pid, SIGKILL);
            kill_at = now + 1000;
        }
        if (ppoll(&p, lp->in >= 0 ? 1 : 0, &tick, &waiting) > 0 &&
            (p.revents & (POLLIN | POLLHUP | POLLERR)) && !log_pump_once(lp)) {
            close(lp->in); /* every writer closed it */
            lp->in = -1;
        }
    }
}

void task_supervisor(const struct agent *a, const struct task *t, const char *dir, char **argv,
                     char **envp, const struct run_user *u, const char *workdir, int log_fd)
{
    struct log_pump lp = {.in = -1, .out = log_fd, .max = a->cfg.log_max};
    char text[128];
    struct stat st;
    int status, pfd[2];
    pid_t pid;

    setsid();
    /* none of the agent's descriptors (its listening socket above all: a
     * restarted agent binds the same port) but the log */
    if (log_fd > 3)
        close_range(3, (unsigned)log_fd - 1, 0);
    close_range((unsigned)log_fd + 1, ~0U, 0);
    signal(SIGTERM, SIG_IGN); /* the agent signals the task's group, not us */
    signal(SIGHUP, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        dprintf(log_fd, "allot-agent: no pipe for the task's output: %s\n", strerror(errno));
        agent_write_atomic(dir, "exit", "exit 127 0\n");
        _exit(1);
    }
    lp.size = fstat(log_fd, &st) == 0 ? (int64_t)st.st_size : 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    if (pid == 0)
        run_child(a, t, argv, envp, u, workdir, pfd[1]);
    close(pfd[1]);
    lp.in = pfd[0];
    fcntl(lp.in, F_SETFL, O_NONBLOCK);
    if (pid < 0) {
        agent_write_atomic(dir, "exit", "exit 127 fork failed");
        _exit(1);
    }
    setpgid(pid, pid); /* also here: no window where the group does not exist */
    allot_fmt(text, sizeof(text), "%d %d %lld\n", (int)getpid(), (int)pid, task_proc_start(pid));
    agent_write_atomic(dir, "pid", text);
    supervise(a, dir, pid, &status, &lp);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* nothing of the task outlives it: also a process in a session of its
     * own, which the process group's signals miss (the agent may be gone) */
    if (getuid() == 0 && a->cg_v2 >= 0 && cg_kill(a->cfg.cgroup_root, t->key) < 0)
        dprintf(log_fd, "allot-agent: processes of the task are left after SIGKILL\n");
    log_pump_drain(&lp);
    close(log_fd);
    /* how it ended, and how long it ran (ms) */
    long long ran = (long long)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (WIFSIGNALED(status))
        allot_fmt(text, sizeof(text), "signal %d %lld\n", WTERMSIG(status), ran);
    else
        allot_fmt(text, sizeof(text), "exit %d %lld\n", WEXITSTATUS(status), ran);
    agent_write_atomic(dir, "exit", text);
    _exit(0);
}
