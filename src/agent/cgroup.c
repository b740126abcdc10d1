/*
 * Per-task cgroups on cgroup v1 (one folder per controller: cpu, cpuacct,
 * memory, pids, devices) and v2 (one unified folder: cpu, memory, pids).
 * Limits: CPU quota from the task's CPUs (period 100 ms), memory (and
 * memory+swap on v1, swap 0 on v2), process count. Devices (v1): every
 * device denied but the usual ones of a container (null, zero, full,
 * random, urandom, tty, ptmx, pts), nvidiactl, nvidia-uvm, the task's own
 * GPUs and the uverbs nodes of its RDMA VFs, so opening another GPU (or
 * VF) fails with EPERM; on v2 the same rules are a BPF device program
 * attached to the task's cgroup (devbpf.c). On v1 a task also gets a
 * freezer folder when the host mounts that controller, so that cg_kill can
 * stop everything in it at once (a process forking in a loop cannot slip
 * between a read of cgroup.procs and the SIGKILLs). Block I/O limits
 * (--io-max) are io.max on v2 and the blkio controller's throttling on v1
 * (a blkio folder then, only for a task with limits). CPU binding
 * (--cpu-bind cores, cpubind.c) is a cpuset folder on v1, cpuset.cpus on
 * v2 (cg_cpuset).
 *
 * cg_kill is the one rule that ends every process of a task: the agent
 * (a stopped or ended task, cg_destroy) and the task's supervisor (before
 * it writes how the task ended, also when the agent is gone) use it.
 */
#include "agent.h"
#include "devnode.h"

#include "allot/common.h"
#include "allot/config.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define CG_BASE "/sys/fs/cgroup"

static const char *const v1_ctrls[] = {"cpu", "cpuacct", "memory", "pids", "devices"};
#define N_V1 (sizeof(v1_ctrls) / sizeof(v1_ctrls[0]))

/* besides v1_ctrls, where the host mounts it: only for cg_kill */
#define V1_FREEZER "freezer"
/* besides v1_ctrls, for a task with I/O limits (--io-max) */
#define V1_BLKIO "blkio"
/* besides v1_ctrls, for a task bound to CPUs (--cpu-bind cores) */
#define V1_CPUSET "cpuset"

static int v2 = -1; /* cg_detect's answer */

/* The v1 folders a task may have besides v1_ctrls: made only when needed,
 * joined, killed and removed where they exist. */
static const char *const v1_extra[] = {V1_FREEZER, V1_BLKIO, V1_CPUSET};
#define N_V1_EXTRA (sizeof(v1_extra) / sizeof(v1_extra[0]))

/* The controller of the i-th folder a task may have (v1_ctrls, then
 * v1_extra), or NULL (v2: one folder) past them. */
static const char *ctrl_at(size_t i)
{
    if (v2 == 1)
        return NULL;
    return i < N_V1 ? v1_ctrls[i] : v1_extra[i - N_V1];
}
#define N_FOLDERS (v2 == 1 ? 1 : N_V1 + N_V1_EXTRA)

/* Whether the host mounts the v1 freezer controller. */
static bool v1_freezer(void)
{
    struct stat st;

    return stat(CG_BASE "/" V1_FREEZER "/cgroup.procs", &st) == 0;
}

static int write_file(const char *dir, const char *file, const char *text)
{
    char path[4400];
    int fd, rc = 0;

    allot_fmt(path, sizeof(path), "%s/%s", dir, file);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (write(fd, text, strlen(text)) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

static int64_t read_key(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long long v = -1;
    size_t kl = key ? strlen(key) : 0;

    while (f && fgets(line, sizeof(line), f)) {
        if (!key) {
            v = strtoll(line, NULL, 10);
            break;
        }
        if (!strncmp(line, key, kl) && line[kl] == ' ') {
            v = strtoll(line + kl + 1, NULL, 10);
            break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

int cg_detect(char *err, size_t errlen)
{
    struct stat st;

    if (stat(CG_BASE "/cgroup.controllers", &st) == 0)
        return v2 = 1;
    if (stat(CG_BASE "/memory/memory.limit_in_bytes", &st) == 0)
        return v2 = 0;
    allot_fmt(err, errlen, "no usable cgroup hierarchy under %s", CG_BASE);
    return v2 = -1;
}

static void dir_of(char *buf, size_t len, const char *ctrl, const char *root, const char *name)
{
    if (v2 == 1)
        allot_fmt(buf, len, CG_BASE "/%s%s%s", root, name ? "/" : "", name ? name : "");
    else
        allot_fmt(buf, len, CG_BASE "/%s/%s%s%s", ctrl ? ctrl : "", root, name ? "/" : "",
                  name ? name : "");
}

int cg_device_rules(const struct cg_limits *lim, struct dev_rule *out)
{
    static const struct dev_rule usual[] = {{1, 3}, {1, 5}, {1, 7}, {1, 8},
                                            {1, 9}, {5, 0}, {5, 2}, {136, -1}};
    int n = 0, uvm = agent_char_major("/proc/devices", "nvidia-uvm");

    for (size_t i = 0; i < sizeof(usual) / sizeof(usual[0]); i++)
        out[n++] = usual[i];
    out[n++] = (struct dev_rule){NVIDIA_MAJOR, NVIDIACTL_MINOR};
    if (uvm > 0)
        out[n++] = (struct dev_rule){uvm, -1};
    for (int i = 0; i < lim->n_gpu_minors && n < CG_MAX_DEV_RULES; i++)
        out[n++] = (struct dev_rule){NVIDIA_MAJOR, lim->gpu_minors[i]};
    for (int i = 0; i < lim->n_devs && n < CG_MAX_DEV_RULES; i++)
        out[n++] = lim->devs[i];
    return n;
}

static int v1_devices(const char *dir, const struct cg_limits *lim)
{
    struct dev_rule r[CG_MAX_DEV_RULES];
    int n = cg_device_rules(lim, r), rc = write_file(dir, "devices.deny", "a");
    char rule[64];

    for (int i = 0; !rc && i < n; i++) {
        if (r[i].minor < 0)
            allot_fmt(rule, sizeof(rule), "c %d:* rwm", r[i].major);
        else
            allot_fmt(rule, sizeof(rule), "c %d:%d rwm", r[i].major, r[i].minor);
        rc = write_file(dir, "devices.allow", rule);
    }
    return rc;
}

/* A number above 0 into *out: with K, M, G or T (of 1024) when sized, as
 * the agent's size options take it. */
static bool io_number(const char *s, size_t n, bool sized, int64_t *out)
{
    char buf[32];

    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return sized ? allot_parse_size(buf, 1, INT64_MAX, out) == 0
                 : allot_parse_num(buf, 1, INT64_MAX, out);
}

int cg_io_parse(const char *spec, struct cg_io *out, int max, char *err, size_t errlen)
{
    int n = 0;

    for (const char *p = spec ? spec : ""; *p;) {
        size_t len = strcspn(p, ";"), dl;
        const char *end = p + len, *q = p;
        struct cg_io io = {0};
        char dev[256];
        struct stat st;
        unsigned ma, mi;
        int used;

        while (q < end && *q == ' ')
            q++;
        dl = strcspn(q, " ;");
        if (q + dl > end)
            dl = (size_t)(end - q);
        if (dl == 0) {
            p = *end ? end + 1 : end;
            continue;
        }
        if (n == max) {
            allot_fmt(err, errlen, "--io-max: more than %d devices", max);
            return -1;
        }
        allot_fmt(dev, sizeof(dev), "%.*s", (int)dl, q);
        size_t d1 = strspn(dev, "0123456789"),
               d2 = d1 < dl ? strspn(dev + d1 + 1, "0123456789") : 0;
        if (d1 > 0 && d1 <= 4 && dev[d1] == ':' && d2 > 0 && d2 <= 7 && dev[d1 + 1 + d2] == '\0' &&
            sscanf(dev, "%u:%u%n", &ma, &mi, &used) == 2 && ma < 4096 && mi < (1u << 20)) {
            io.major = (int)ma;
            io.minor = (int)mi;
        } else if (stat(dev, &st) == 0 && S_ISBLK(st.st_mode)) {
            io.major = (int)major(st.st_rdev);
            io.minor = (int)minor(st.st_rdev);
        } else {
            allot_fmt(err, errlen, "--io-max: \"%s\" is neither a block device nor MAJ:MIN", dev);
            return -1;
        }
        for (q += dl; q < end;) {
            size_t kl;
            const char *eq;
            int64_t *v, num;

            while (q < end && *q == ' ')
                q++;
            if (q == end)
                break;
            kl = strcspn(q, " ;");
            if (q + kl > end)
                kl = (size_t)(end - q);
            eq = memchr(q, '=', kl);
            size_t name = eq ? (size_t)(eq - q) : kl;
            v = name == 4 && !strncmp(q, "rbps", 4)    ? &io.rbps
                : name == 4 && !strncmp(q, "wbps", 4)  ? &io.wbps
                : name == 5 && !strncmp(q, "riops", 5) ? &io.riops
                : name == 5 && !strncmp(q, "wiops", 5) ? &io.wiops
                                                       : NULL;
            if (!v || !eq ||
                !io_number(eq + 1, kl - name - 1, v == &io.rbps || v == &io.wbps, &num)) {
                allot_fmt(err, errlen,
                          "--io-max %s: \"%.*s\": want rbps=, wbps= (bytes, K/M/G/T), riops= or "
                          "wiops= with a number above 0",
                          dev, (int)kl, q);
                return -1;
            }
            *v = num;
            q += kl;
        }
        if (!io.rbps && !io.wbps && !io.riops && !io.wiops) {
            allot_fmt(err, errlen, "--io-max %s: no limit given", dev);
            return -1;
        }
        out[n++] = io;
        p = *end ? end + 1 : end;
    }
    return n;
}

int cg_io_check(const struct cg_io *io, int n, const char *sysfs, char *err, size_t errlen)
{
    char path[4300];
    struct stat st;

    for (int i = 0; i < n; i++) {
        allot_fmt(path, sizeof(path), "%s/dev/block/%d:%d", sysfs, io[i].major, io[i].minor);
        if (stat(path, &st) < 0) {
            allot_fmt(err, errlen, "--io-max %d:%d: no such block device on this node", io[i].major,
                      io[i].minor);
            return -1;
        }
        allot_fmt(path, sizeof(path), "%s/dev/block/%d:%d/partition", sysfs, io[i].major,
                  io[i].minor);
        if (stat(path, &st) == 0) {
            allot_fmt(err, errlen,
                      "--io-max %d:%d: a partition; the kernel limits whole disks only: give "
                      "its disk",
                      io[i].major, io[i].minor);
            return -1;
        }
    }
    return 0;
}

/* Writes the task's I/O limits into dir (io.max on v2, the blkio
 * throttling files on v1). 0 or -errno. */
static int write_io(const char *dir, const struct cg_limits *lim)
{
    static const char *const v1_files[] = {
        "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
        "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"};
    char line[160];
    int rc = 0;

    for (int i = 0; i < lim->n_io && !rc; i++) {
        const struct cg_io *io = &lim->io[i];
        const int64_t v[4] = {io->rbps, io->wbps, io->riops, io->wiops};

        if (v2 == 1) {
            static const char *const keys[] = {"rbps", "wbps", "riops", "wiops"};
            size_t l = (size_t)allot_fmt(line, sizeof(line), "%d:%d", io->major, io->minor);
            for (int k = 0; k < 4; k++)
                if (v[k] > 0)
                    l += (size_t)allot_fmt(line + l, sizeof(line) - l, " %s=%lld", keys[k],
                                           (long long)v[k]);
            rc = write_file(dir, "io.max", line);
            continue;
        }
        for (int k = 0; k < 4 && !rc; k++) {
            if (v[k] <= 0)
                continue;
            allot_fmt(line, sizeof(line), "%d:%d %lld", io->major, io->minor, (long long)v[k]);
            rc = write_file(dir, v1_files[k], line);
        }
    }
    return rc;
}

/* A task's CPU weight against the other tasks of its node when they all
 * want more than the node has: its CPUs, as cgroup v1 counts shares (1,024
 * a CPU, 2 at least: a task that asked for none yields to every other),
 * so that a task gets the CPUs it reserved under contention and not only
 * its cap (cpu.max). */
static int64_t cpu_shares(int64_t cpu_milli)
{
    int64_t s = cpu_milli * 1024 / 1000;

    return s < 2 ? 2 : s > 262144 ? 262144 : s;
}

/* The CFS quota and period (microseconds) of cpu_milli CPUs: 100 ms
 * periods, or 1 s ones for less than 10 milli-CPUs, whose quota in 100 ms
 * would be under the kernel's least (1 ms: the cgroup refuses it). */
static void cpu_quota(int64_t cpu_milli, int64_t *quota_us, int64_t *period_us)
{
    *period_us = cpu_milli < 10 ? 1000000 : 100000;
    *quota_us = cpu_milli * (*period_us / 1000);
}

/* cgroup v2's cpu.weight (1..10000) of those shares, as the kernel maps them */
static int64_t cpu_weight(int64_t shares)
{
    return 1 + (shares - 2) * 9999 / 262142;
}

int cg_create(const char *root, const char *name, const struct cg_limits *lim, char *err,
              size_t errlen)
{
    char dir[4400], num[64];
    int rc = 0;

    if (v2 < 0) {
        allot_fmt(err, errlen, "no cgroups");
        return -1;
    }
    if (v2 == 1) {
        char top[4400];

        dir_of(top, sizeof(top), NULL, root, NULL);
        agent_mkdir_p(top);
        write_file(CG_BASE, "cgroup.subtree_control", "+cpu +memory +pids");
        write_file(top, "cgroup.subtree_control", "+cpu +memory +pids");
        dir_of(dir, sizeof(dir), NULL, root, name);
        if ((rc = agent_mkdir_p(dir)) < 0)
            goto fail;
        if (lim->cpu_milli > 0) {
            int64_t q, p;
            cpu_quota(lim->cpu_milli, &q, &p);
            allot_fmt(num, sizeof(num), "%lld %lld", (long long)q, (long long)p);
            rc = write_file(dir, "cpu.max", num);
        }
        /* a task of 0 CPUs asks for no cpu controller: where it is off, it starts
         * all the same (with the default weight) */
        allot_fmt(num, sizeof(num), "%lld", (long long)cpu_weight(cpu_shares(lim->cpu_milli)));
        int wrc = rc ? 0 : write_file(dir, "cpu.weight", num);
        if (wrc < 0 && lim->cpu_milli > 0)
            rc = wrc;
        if (!rc && lim->mem_bytes > 0) {
            allot_fmt(num, sizeof(num), "%lld", (long long)lim->mem_bytes);
            rc = write_file(dir, "memory.max", num);
            write_file(dir, "memory.swap.max", "0");
        }
        if (!rc && lim->pids_max > 0) {
            allot_fmt(num, sizeof(num), "%lld", (long long)lim->pids_max);
            rc = write_file(dir, "pids.max", num);
        }
        if (!rc && lim->n_io > 0) {
            /* on its own: a host without the io controller refuses only this */
            write_file(CG_BASE, "cgroup.subtree_control", "+io");
            write_file(top, "cgroup.subtree_control", "+io");
            rc = write_io(dir, lim);
        }
        if (!rc) {
            struct dev_rule r[CG_MAX_DEV_RULES];
            char why[256];
            int n = cg_device_rules(lim, r);

            if (devbpf_attach(dir, r, n, why, sizeof(why)) < 0) {
                allot_fmt(err, errlen, "cgroup %s/%s: device rules: %s", root, name, why);
                cg_destroy(root, name);
                return -1;
            }
        }
        if (rc)
            goto fail;
        return 0;
    }
    if (v1_freezer()) { /* where it is mounted: cg_kill freezes before it kills */
        dir_of(dir, sizeof(dir), V1_FREEZER, root, name);
        if ((rc = agent_mkdir_p(dir)) < 0)
            goto fail;
    }
    if (lim->n_io > 0) { /* never unlimited when asked: no blkio, no task */
        dir_of(dir, sizeof(dir), V1_BLKIO, root, name);
        if ((rc = agent_mkdir_p(dir)) < 0 || (rc = write_io(dir, lim)) < 0)
            goto fail;
    }
    for (size_t c = 0; c < N_V1 && !rc; c++) {
        dir_of(dir, sizeof(dir), v1_ctrls[c], root, name);
        if ((rc = agent_mkdir_p(dir)) < 0)
            goto fail;
        if (!strcmp(v1_ctrls[c], "cpu")) {
            int64_t q, p;
            cpu_quota(lim->cpu_milli > 0 ? lim->cpu_milli : 1000, &q, &p);
            allot_fmt(num, sizeof(num), "%lld", (long long)p);
            rc = write_file(dir, "cpu.cfs_period_us", num);
            allot_fmt(num, sizeof(num), "%lld", lim->cpu_milli > 0 ? (long long)q : -1LL);
            if (!rc)
                rc = write_file(dir, "cpu.cfs_quota_us", num);
            allot_fmt(num, sizeof(num), "%lld", (long long)cpu_shares(lim->cpu_milli));
            if (!rc)
                rc = write_file(dir, "cpu.shares", num);
        } else if (!strcmp(v1_ctrls[c], "memory") && lim->mem_bytes > 0) {
            allot_fmt(num, sizeof(num), "%lld", (long long)lim->mem_bytes);
            rc = write_file(dir, "memory.limit_in_bytes", num);
            write_file(dir, "memory.memsw.limit_in_bytes", num); /* no swap beyond it */
        } else if (!strcmp(v1_ctrls[c], "pids") && lim->pids_max > 0) {
            allot_fmt(num, sizeof(num), "%lld", (long long)lim->pids_max);
            rc = write_file(dir, "pids.max", num);
        } else if (!strcmp(v1_ctrls[c], "devices")) {
            rc = v1_devices(dir, lim);
        }
    }
    if (rc)
        goto fail;
    return 0;
fail:
    allot_fmt(err, errlen, "cgroup %s/%s: %s (in %s)", root, name, strerror(-rc), dir);
    cg_destroy(root, name);
    return -1;
}

int cg_enter(const char *root, const char *name, pid_t pid)
{
    char dir[4400], num[32];
    int rc = 0;

    allot_fmt(num, sizeof(num), "%d", (int)pid);
    if (v2 == 1) {
        dir_of(dir, sizeof(dir), NULL, root, name);
        return write_file(dir, "cgroup.procs", num);
    }
    for (size_t c = 0; c < N_V1 && !rc; c++) {
        dir_of(dir, sizeof(dir), v1_ctrls[c], root, name);
        rc = write_file(dir, "cgroup.procs", num);
    }
    dir_of(dir, sizeof(dir), V1_FREEZER, root, name);
    if (!rc && write_file(dir, "cgroup.procs", num) < 0 && errno != ENOENT && v1_freezer())
        rc = -errno; /* cg_create made it: a task outside it could not be frozen */
    dir_of(dir, sizeof(dir), V1_BLKIO, root, name);
    if (!rc && access(dir, F_OK) == 0) /* cg_create made it: the task's I/O limits */
        rc = write_file(dir, "cgroup.procs", num);
    dir_of(dir, sizeof(dir), V1_CPUSET, root, name);
    if (!rc && access(dir, F_OK) == 0) /* cg_cpuset made it: the task's CPUs */
        rc = write_file(dir, "cgroup.procs", num);
    return rc;
}

/* Copies FILE of folder `from` to folder `to` when `to`'s is empty (a v1
 * cpuset folder starts with no CPUs and no memory nodes). */
/* Reads DIR/FILE (at most len - 1 bytes, the trailing newline cut) into
 * buf (agent_read_small); 0 or -errno. */
static int read_text(const char *dir, const char *file, char *buf, size_t len)
{
    size_t n;

    if (agent_read_small(dir, file, buf, len) < 0)
        return -errno;
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return 0;
}

static int inherit(const char *from, const char *to, const char *file)
{
    char buf[4096];
    int rc;

    if (read_text(to, file, buf, sizeof(buf)) == 0 && *buf)
        return 0; /* set already */
    if ((rc = read_text(from, file, buf, sizeof(buf))) < 0)
        return rc;
    return write_file(to, file, buf);
}

int cg_cpuset_init(const char *root, char *cpus, size_t len, char *err, size_t errlen)
{
    char top[4400], ctl[4096] = "", mems[4096];
    int rc;

    if (v2 == 1) {
        /* the controller must be there and enabled down to the agent's folder */
        dir_of(top, sizeof(top), NULL, root, NULL);
        read_text(CG_BASE, "cgroup.controllers", ctl, sizeof(ctl));
        if (!strstr(ctl, "cpuset")) {
            allot_fmt(err, errlen,
                      "--cpu-bind cores: no cpuset controller in %s/cgroup.controllers", CG_BASE);
            return -1;
        }
        if ((rc = agent_mkdir_p(top)) < 0 ||
            (rc = write_file(CG_BASE, "cgroup.subtree_control", "+cpuset")) < 0 ||
            (rc = write_file(top, "cgroup.subtree_control", "+cpuset")) < 0 ||
            (rc = read_text(CG_BASE, "cpuset.cpus.effective", cpus, len)) < 0) {
            allot_fmt(err, errlen, "--cpu-bind cores: cpuset controller in %s: %s", top,
                      strerror(-rc));
            return -1;
        }
        return 0;
    }
    /* v1: the agent's folder gets the root's CPUs and memory nodes every
     * start (widening is always allowed; a folder left narrower by an older
     * run or a CPU taken offline would refuse its tasks' sets) */
    dir_of(top, sizeof(top), V1_CPUSET, root, NULL);
    if ((rc = read_text(CG_BASE "/" V1_CPUSET, "cpuset.cpus", cpus, len)) < 0 ||
        (rc = read_text(CG_BASE "/" V1_CPUSET, "cpuset.mems", mems, sizeof(mems))) < 0) {
        allot_fmt(err, errlen, "--cpu-bind cores: no cpuset controller at %s/%s: %s", CG_BASE,
                  V1_CPUSET, strerror(-rc));
        return -1;
    }
    if ((rc = agent_mkdir_p(top)) < 0 || (rc = write_file(top, "cpuset.mems", mems)) < 0 ||
        (rc = write_file(top, "cpuset.cpus", cpus)) < 0) {
        allot_fmt(err, errlen, "--cpu-bind cores: %s: %s", top, strerror(-rc));
        return -1;
    }
    return 0;
}

int cg_cpuset(const char *root, const char *name, const char *cpus, bool create, char *err,
              size_t errlen)
{
    char top[4400], dir[4400];
    int rc;

    dir_of(top, sizeof(top), v2 == 1 ? NULL : V1_CPUSET, root, NULL);
    dir_of(dir, sizeof(dir), v2 == 1 ? NULL : V1_CPUSET, root, name);
    if (!create && access(dir, F_OK) < 0)
        return 0; /* gone: the task's cgroup was removed */
    if (v2 != 1 && ((rc = agent_mkdir_p(dir)) < 0 || (rc = inherit(top, dir, "cpuset.mems")) < 0))
        goto fail;
    if ((rc = write_file(dir, "cpuset.cpus", cpus)) == 0)
        return 0;
fail:
    allot_fmt(err, errlen, "cgroup %s/%s: cpuset %s: %s", root, name, cpus, strerror(-rc));
    return -1;
}

int64_t cg_oom_kills(const char *root, const char *name)
{
    char dir[4400], path[4500];
    int64_t n;

    dir_of(dir, sizeof(dir), "memory", root, name);
    allot_fmt(path, sizeof(path), "%s/%s", dir, v2 == 1 ? "memory.events" : "memory.oom_control");
    n = read_key(path, "oom_kill");
    return n > 0 ? n : 0;
}

void cg_usage(const char *root, const char *name, int64_t *cpu_ns, int64_t *mem_bytes)
{
    char dir[4400], path[4500];

    if (v2 == 1) {
        dir_of(dir, sizeof(dir), NULL, root, name);
        allot_fmt(path, sizeof(path), "%s/cpu.stat", dir);
        *cpu_ns = read_key(path, "usage_usec");
        if (*cpu_ns > 0)
            *cpu_ns *= 1000;
        allot_fmt(path, sizeof(path), "%s/memory.current", dir);
        *mem_bytes = read_key(path, NULL);
        return;
    }
    dir_of(dir, sizeof(dir), "cpuacct", root, name);
    allot_fmt(path, sizeof(path), "%s/cpuacct.usage", dir);
    *cpu_ns = read_key(path, NULL);
    dir_of(dir, sizeof(dir), "memory", root, name);
    allot_fmt(path, sizeof(path), "%s/memory.usage_in_bytes", dir);
    *mem_bytes = read_key(path, NULL);
}

int cg_pids(const char *root, const char *name, int *out, int max)
{
    char dir[4400], path[4500];
    FILE *f;
    int pid, n = 0;

    dir_of(dir, sizeof(dir), v2 == 1 ? NULL : "memory", root, name);
    allot_fmt(path, sizeof(path), "%s/cgroup.procs", dir);
    if (!(f = fopen(path, "r")))
        return 0;
    while (n < max && fscanf(f, "%d", &pid) == 1)
        out[n++] = pid;
    fclose(f);
    return n;
}

void cg_each_pid(const char *root, const char *name, void (*fn)(int pid, void *arg), void *arg)
{
    char dir[4400], path[4500];
    FILE *f;
    int pid;

    dir_of(dir, sizeof(dir), v2 == 1 ? NULL : "memory", root, name);
    allot_fmt(path, sizeof(path), "%s/cgroup.procs", dir);
    if (!(f = fopen(path, "r")))
        return;
    while (fscanf(f, "%d", &pid) == 1)
        fn(pid, arg);
    fclose(f);
}

/* SIGKILLs every process listed in DIR/cgroup.procs; the count. */
static int kill_procs(const char *dir)
{
    char path[4500];
    FILE *f;
    int pid, n = 0;

    allot_fmt(path, sizeof(path), "%s/cgroup.procs", dir);
    if (!(f = fopen(path, "r")))
        return 0;
    while (fscanf(f, "%d", &pid) == 1) {
        kill(pid, SIGKILL);
        n++;
    }
    fclose(f);
    return n;
}

static void pause_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000 * 1000};

    nanosleep(&d, NULL);
}

/* Whether the v1 freezer folder dir reads `state` (FROZEN, THAWED). */
static bool freezer_is(const char *dir, const char *state)
{
    char path[4500], buf[32] = "";
    FILE *f;

    allot_fmt(path, sizeof(path), "%s/freezer.state", dir);
    if (!(f = fopen(path, "r")))
        return false;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return !strncmp(buf, state, strlen(state));
}

/* Kills everything in the cgroup folder dir and waits (bounded, about 2 s)
 * until it is empty. cgroup v2: cgroup.kill (Linux 5.14) when the kernel
 * has it; a v1 freezer folder: frozen, killed, thawed (a frozen process
 * cannot fork, so one pass finds them all); else cgroup.procs read and
 * each pid SIGKILLed until none is left. Returns 0 when it is empty. */
static int kill_dir(const char *dir, bool freezer)
{
    bool fast = false;

    if (v2 == 1)
        fast = write_file(dir, "cgroup.kill", "1") == 0;
    if (freezer && write_file(dir, "freezer.state", "FROZEN") == 0) {
        for (int tries = 0; tries < 100 && !freezer_is(dir, "FROZEN"); tries++)
            pause_ms(2);
        kill_procs(dir);
        write_file(dir, "freezer.state", "THAWED");
        fast = true;
    }
    for (int tries = 0; tries < 400; tries++) {
        /* no pause while SIGKILLs find someone: a process forking in a
         * loop must not get time to make another */
        if (kill_procs(dir) == 0)
            return 0;
        if (fast || tries % 8 == 7)
            pause_ms(5);
    }
    return -1;
}

int cg_kill(const char *root, const char *name)
{
    char dir[4400];
    int rc = 0;

    if (v2 == 1) {
        dir_of(dir, sizeof(dir), NULL, root, name);
        return kill_dir(dir, false);
    }
    if (v2 != 0)
        return 0;
    dir_of(dir, sizeof(dir), V1_FREEZER, root, name);
    if (access(dir, F_OK) == 0 && kill_dir(dir, true) < 0)
        rc = -1;
    /* every process of the task is in each controller's folder; a task
     * from an agent without the freezer folder is found here */
    for (size_t c = 0; c < N_V1; c++) {
        dir_of(dir, sizeof(dir), v1_ctrls[c], root, name);
        if (kill_dir(dir, false) < 0)
            rc = -1;
    }
    return rc;
}

void cg_remove_root(const char *root)
{
    char dir[4400];

    /* only an empty folder goes: a task's cgroup below keeps it */
    for (size_t c = 0; c < N_FOLDERS; c++) {
        dir_of(dir, sizeof(dir), ctrl_at(c), root, NULL);
        if (rmdir(dir) < 0 && errno != ENOENT && errno != EBUSY && errno != ENOTEMPTY)
            LOG_DEBUG("cgroup", "%s: %s", dir, strerror(errno));
    }
}

void cg_destroy(const char *root, const char *name)
{
    char dir[4400];

    if (cg_kill(root, name) < 0)
        LOG_WARN("cgroup", "%s/%s: processes left after SIGKILL", root, name);
    for (size_t c = 0; c < N_FOLDERS; c++) {
        dir_of(dir, sizeof(dir), ctrl_at(c), root, name);
        /* bounded: the killed processes leave within a few milliseconds */
        for (int tries = 0; tries < 50; tries++) {
            if (rmdir(dir) == 0 || errno == ENOENT)
                break;
            kill_procs(dir);
            pause_ms(10);
        }
    }
}
