/*
 * CPU binding (--cpu-bind cores): a task that asks for whole CPUs gets
 * that many cores of its own, in a cpuset no other task of the node
 * shares; every other task runs in the shared pool, the node's CPUs no
 * task has alone. The pool shrinks before a task with cores of its own
 * starts (the shared tasks' cpusets are rewritten first) and grows back
 * when it has ended (its cgroup removed). The pool always keeps one CPU:
 * a task that would take the last one, or finds too few free, runs in the
 * pool instead, and the agent says so in its log; so does one while a task
 * an agent without --cpu-bind started (adopted since) runs on every CPU.
 *
 * The binding of each task is kept in its folder ("cpus": "cores 2-3" or
 * "shared"), so a restarted agent knows which cores are taken. The CPUs
 * tasks may use are the root cpuset's (v1) or the online CPUs, read once
 * at start. allotd's CPU accounting (a node's --cpus) is what keeps the
 * tasks of whole CPUs from asking for more cores than the node has.
 */
#include "agent.h"
#include "devnode.h"

#include "allot/common.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool set_has(const uint64_t *set, int cpu)
{
    return set[cpu / 64] >> (cpu % 64) & 1;
}

static void set_add(uint64_t *set, int cpu)
{
    set[cpu / 64] |= 1ULL << (cpu % 64);
}

static int set_count(const uint64_t *set)
{
    int n = 0;

    for (int w = 0; w < CPUBIND_WORDS; w++)
        n += __builtin_popcountll(set[w]);
    return n;
}

int cpubind_parse(const char *s, uint64_t *set)
{
    memset(set, 0, CPUBIND_WORDS * sizeof(*set));
    while (*s && *s != '\n') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;

        if (end == s || lo < 0 || lo >= CPUBIND_MAX)
            return -1;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo || hi >= CPUBIND_MAX)
                return -1;
            s = end;
        }
        for (long c = lo; c <= hi; c++)
            set_add(set, (int)c);
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            return -1;
    }
    return 0;
}

void cpubind_list(const uint64_t *set, char *buf, size_t len)
{
    size_t at = 0;

    buf[0] = '\0';
    for (int c = 0; c < CPUBIND_MAX && at < len; c++) {
        int e = c;
        if (!set_has(set, c))
            continue;
        while (e + 1 < CPUBIND_MAX && set_has(set, e + 1))
            e++;
        at += (size_t)(e > c ? allot_fmt(buf + at, len - at, "%s%d-%d", at ? "," : "", c, e)
                             : allot_fmt(buf + at, len - at, "%s%d", at ? "," : "", c));
        c = e;
    }
}

int cpubind_init(struct agent *a, char *err, size_t errlen)
{
    char buf[4096];

    if (getuid() != 0 || a->cg_v2 < 0) {
        allot_fmt(err, errlen, "--cpu-bind cores needs root and cgroups (%s)",
                  getuid() != 0 ? "not root" : "no cgroup hierarchy");
        return -1;
    }
    if (cg_cpuset_init(a->cfg.cgroup_root, buf, sizeof(buf), err, errlen) < 0)
        return -1;
    if (cpubind_parse(buf, a->cpu_allowed) < 0 || set_count(a->cpu_allowed) == 0) {
        allot_fmt(err, errlen,
                  "--cpu-bind cores: the cpuset's CPUs \"%.40s\" are not a list of CPUs "
                  "below %d",
                  buf, CPUBIND_MAX);
        return -1;
    }
    memcpy(a->cpu_pool, a->cpu_allowed, sizeof(a->cpu_pool));
    cpubind_list(a->cpu_allowed, buf, sizeof(buf));
    LOG_INFO("cpubind", "tasks of whole CPUs get cores of their own among CPUs %s", buf);
    return 0;
}

/* Whether task t holds cores of its own now: bound so, and not ended (an
 * ended task's cgroup is gone). */
static bool holds_cores(const struct task *t)
{
    return t->cpu_bind == CPU_BIND_CORES && t->state != TASK_EXITED && t->state != TASK_LOST;
}

/* The shared pool: the allowed CPUs no live task but `self` holds. */
static void pool_of(const struct agent *a, const struct task *self, uint64_t *pool)
{
    memcpy(pool, a->cpu_allowed, CPUBIND_WORDS * sizeof(*pool));
    for (size_t i = 0; i < a->n_tasks; i++) {
        const struct task *t = &a->tasks[i];
        if (t == self || !holds_cores(t))
            continue;
        for (int w = 0; w < CPUBIND_WORDS; w++)
            pool[w] &= ~t->cpus[w];
    }
}

/* Writes the pool to every live task of it but `self`, when it changed. */
static void pool_give(struct agent *a, const struct task *self, const uint64_t *pool)
{
    char list[4096], why[256];

    if (!memcmp(pool, a->cpu_pool, sizeof(a->cpu_pool)))
        return;
    memcpy(a->cpu_pool, pool, sizeof(a->cpu_pool));
    cpubind_list(pool, list, sizeof(list));
    for (size_t i = 0; i < a->n_tasks; i++) {
        struct task *t = &a->tasks[i];
        if (t == self || t->cpu_bind != CPU_BIND_SHARED || t->state == TASK_EXITED ||
            t->state == TASK_LOST)
            continue;
        if (cg_cpuset(a->cfg.cgroup_root, t->key, list, false, why, sizeof(why)) < 0)
            LOG_WARN("cpubind", "task %s: %s", t->key, why);
    }
}

void cpubind_refresh(struct agent *a)
{
    uint64_t pool[CPUBIND_WORDS];

    if (strcmp(a->cfg.cpu_bind, "cores") != 0)
        return;
    pool_of(a, NULL, pool);
    pool_give(a, NULL, pool);
}

/* A live task other than self that runs unbound on every CPU: one an
 * agent without --cpu-bind started, adopted since. */
static const struct task *unbound(const struct agent *a, const struct task *self)
{
    for (size_t i = 0; i < a->n_tasks; i++) {
        const struct task *t = &a->tasks[i];
        if (t != self && t->cpu_bind == CPU_BIND_NONE && t->state != TASK_EXITED &&
            t->state != TASK_LOST)
            return t;
    }
    return NULL;
}

int cpubind_task(struct agent *a, struct task *t, int64_t cpu_milli, const char *dir, char *why,
                 size_t wlen)
{
    uint64_t pool[CPUBIND_WORDS];
    char list[4096], rec[4200];
    int want = cpu_milli > 0 && cpu_milli % 1000 == 0 ? (int)(cpu_milli / 1000) : 0;
    const struct task *free_running;

    t->cpu_bind = CPU_BIND_NONE;
    memset(t->cpus, 0, sizeof(t->cpus));
    if (strcmp(a->cfg.cpu_bind, "cores") != 0)
        return 0;
    pool_of(a, t, pool);
    free_running = want > 0 ? unbound(a, t) : NULL;
    if (free_running) /* its cores would not be its own */
        LOG_WARN("cpubind",
                 "task %s: task %s, started without --cpu-bind, runs on every CPU: it runs in "
                 "the shared pool",
                 t->key, free_running->key);
    else if (want > 0 && want < set_count(pool)) { /* one CPU stays in the pool */
        for (int c = 0, got = 0; c < CPUBIND_MAX && got < want; c++)
            if (set_has(pool, c)) {
                set_add(t->cpus, c);
                pool[c / 64] &= ~(1ULL << (c % 64));
                got++;
            }
        t->cpu_bind = CPU_BIND_CORES;
        pool_give(a, t, pool); /* the shared tasks leave its cores first */
        cpubind_list(t->cpus, list, sizeof(list));
        allot_fmt(rec, sizeof(rec), "cores %s\n", list);
    }
    if (t->cpu_bind != CPU_BIND_CORES) {
        if (want > 0 && !free_running)
            LOG_WARN("cpubind",
                     "task %s: %d cores asked, %d free beside the shared pool's last: it runs in "
                     "the shared pool",
                     t->key, want, set_count(pool) - 1);
        t->cpu_bind = CPU_BIND_SHARED;
        cpubind_list(pool, list, sizeof(list));
        allot_fmt(rec, sizeof(rec), "shared\n");
    }
    if (agent_write_atomic(dir, "cpus", rec) < 0) {
        allot_fmt(why, wlen, "%s: cannot record the task's CPUs", dir);
        return -1;
    }
    if (cg_cpuset(a->cfg.cgroup_root, t->key, list, true, why, wlen) < 0)
        return -1;
    LOG_INFO("cpubind", "task %s: CPUs %s%s", t->key, list,
             t->cpu_bind == CPU_BIND_CORES ? " (its own)" : " (shared)");
    return 0;
}

bool cpubind_own(const struct task *t, char *buf, size_t len)
{
    *buf = '\0';
    if (t->cpu_bind != CPU_BIND_CORES)
        return false;
    cpubind_list(t->cpus, buf, len);
    return true;
}

void cpubind_adopt(struct task *t, const char *dir)
{
    char buf[4200];

    t->cpu_bind = CPU_BIND_NONE;
    if (agent_read_small(dir, "cpus", buf, sizeof(buf)) < 0)
        return;
    if (!strncmp(buf, "cores ", 6) && cpubind_parse(buf + 6, t->cpus) == 0)
        t->cpu_bind = CPU_BIND_CORES;
    else if (!strncmp(buf, "shared", 6))
        t->cpu_bind = CPU_BIND_SHARED;
}
