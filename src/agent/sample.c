/*
 * Usage samples of the agent's tasks, for allotd's metering (docs/agent.md,
 * --sample-interval): per running task its CPU time and memory (cgroup), its
 * GPUs' utilisation, memory and energy (NVML, or the emulated utilisation),
 * or for a fraction what its shim region counted. Samples are buffered in
 * a->samples (at most SAMPLES_MAX per task, oldest dropped) until allotd
 * acknowledges them with a heartbeat's answer (main.c).
 *
 * Threading: samples are taken on a thread of their own, the sampler, so
 * that a heartbeat allotd holds for a while (a long poll, allotd restarting
 * or stopped) neither delays nor merges them. It sleeps on a->sampler_wake
 * until the next sample is due, then takes a->lock, which the loop holds
 * except while it waits on allotd or sleeps (agent.h), looks at the running
 * tasks and samples them. Everything here runs under a->lock.
 */
#include "agent.h"

#include "allot/common.h"
#include "allot/shim_region.h"
#include "log.h"
#include "nvml.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Samples kept per task while allotd is away (12 hours at the default 15 s
 * interval), for at most SAMPLES_TASKS_MAX tasks' worth in all. */
#define SAMPLES_MAX       2880
#define SAMPLES_TASKS_MAX 64

static int64_t wall_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* True when another live task holds one of t's GPUs (a shared GPU: what
 * NVML measures of it is not this task's alone). */
static bool gpus_shared(const struct agent *a, const struct task *t)
{
    for (size_t i = 0; i < a->n_tasks; i++)
        if (&a->tasks[i] != t && a->tasks[i].state == TASK_RUNNING &&
            (a->tasks[i].gpu_mask & t->gpu_mask))
            return true;
    return false;
}

/*
 * A fraction's GPU use as its shim region counts it (docs/shim.md): the
 * share of wall time its kernels kept the whole GPU busy since the last
 * sample (percent; -1 at the first sample and while no process of the job
 * uses the GPU through the shim) and the device memory it holds now.
 * Also tells the shim its processes' host pids (from the task's cgroup),
 * which it needs to find itself in NVML's process lists. False when the
 * task has no readable region (not a fraction, or the shim not loaded).
 */
static bool shim_sample(struct agent *a, struct task *t, int64_t now, struct allot_shim_usage *u,
                        int64_t *util, int64_t *mem)
{
    char path[4500];
    int pids[256];
    int n_pids = -1;

    allot_fmt(path, sizeof(path), "%s/%s/" TASK_REGION, a->tasks_dir, t->key);
    if (allot_shim_region_read(path, u) != 0)
        return false;
    *mem = 0;
    for (int d = 0; d < ALLOT_SHIM_MAX_DEV; d++)
        *mem += (int64_t)u->used[d];
    *util = -1;
    /* the shim measures the job only while it is on the GPU through it: a
     * live process holds a slot (it has used CUDA) or kernels were launched
     * since the last sample (by a process gone since). A region none of
     * the job's processes uses (a program that never touches CUDA) has no
     * figure, which is not 0 %: allotd then bills the allocation. Kernels
     * launched but no busy time: the shim estimates it only under a
     * compute share (a memory-only fraction): not measured either */
    bool on_gpu = u->n_procs > 0 || u->launches > t->shim_launches;
    if (on_gpu && t->shim_at_ms && now > t->shim_at_ms && u->busy_ns >= t->shim_busy_ns &&
        !(u->launches > 0 && u->busy_ns == 0)) {
        int64_t pct = (int64_t)((u->busy_ns - t->shim_busy_ns) / 10000) / (now - t->shim_at_ms);
        *util = pct > 100 ? 100 : pct;
    }
    t->shim_busy_ns = u->busy_ns;
    t->shim_launches = u->launches;
    t->shim_at_ms = now;
    for (int i = 0; i < u->n_procs; i++) {
        if (u->procs[i].host_pid)
            continue;
        if (n_pids < 0)
            n_pids = cg_pids(a->cfg.cgroup_root, t->key, pids, 256);
        int hp = allot_shim_region_find_host_pid(&u->procs[i], pids, n_pids);
        if (hp > 0)
            allot_shim_region_set_host_pid(path, u->procs[i].slot, hp, u->procs[i].start);
    }
    return true;
}

/* Room a fraction's processes may hold on its GPU beyond its cap before
 * the agent stops it: the shim's context estimate may be short of a real
 * context, and NVML counts what the driver keeps per process beyond the
 * allocations the shim sees (local memory of kernels, its own buffers). */
static int64_t mem_slack(int64_t cap)
{
    return cap / 8 > (512 << 20) ? cap / 8 : (512 << 20);
}

/*
 * Holds each fraction on GPU g (inventory index) to its GPU memory cap
 * from outside the job, by NVML's figures of the processes in its cgroup:
 * the shim's cap lives in the job's own processes, which a job may get
 * around (unset LD_PRELOAD, a static binary). One that holds more than its
 * cap and mem_slack is stopped, as the kernel's OOM killer stops a task
 * over its memory, and its end says why. a->lock held.
 */
struct held_sum {
    const struct nvml_sample *smp;
    int64_t bytes; /* what the task's processes hold on the GPU */
};

static void add_held(int pid, void *arg)
{
    struct held_sum *h = arg;

    for (int p = 0; p < h->smp->n_procs_kept; p++)
        if ((int)h->smp->procs[p].pid == pid && h->smp->procs[p].used_bytes > 0)
            h->bytes += h->smp->procs[p].used_bytes;
}

static void gpu_mem_watch(struct agent *a, int g, const struct nvml_sample *smp, int64_t now)
{
    if (!a->cfg.gpu_mem_watch || !(smp->supported & ALLOT_NVML_F_PROCS) || getuid() != 0)
        return;
    for (size_t i = 0; i < a->n_tasks; i++) {
        struct task *t = &a->tasks[i];
        struct held_sum h = {.smp = smp};

        /* running, or in its grace period after a stop (not one it stops already) */
        if (t->mem_cap <= 0 || t->mem_cap_gpu != g || *t->over ||
            (t->state != TASK_RUNNING && t->state != TASK_STOPPING))
            continue;
        cg_each_pid(a->cfg.cgroup_root, t->key, add_held, &h); /* every process, however many */
        int64_t held = h.bytes;
        if (held <= t->mem_cap + mem_slack(t->mem_cap))
            continue;
        allot_fmt(t->over, sizeof(t->over),
                  "stopped: over its GPU memory cap (%lld MiB held on GPU %d, cap %lld MiB, as "
                  "NVML measures it)",
                  (long long)(held >> 20), g, (long long)(t->mem_cap >> 20));
        LOG_WARN("task", "job %lld task %d %s", (long long)t->job, t->index, t->over);
        char dir[4400]; /* kept across the agent's restart, as its end's reason */
        allot_fmt(dir, sizeof(dir), "%s/%s", a->tasks_dir, t->key);
        agent_write_atomic(dir, "over", t->over);
        if (t->state == TASK_STOPPING)
            t->kill_at_ms = now; /* its grace ends now: SIGKILL at the next look */
        else
            task_stop(a, t, now, 0);
    }
}

/* One sample per running task (agent.h, sampler_start); a->lock held. */
static void samples_take(struct agent *a, int64_t now)
{
    struct nvml_sample *smp = NULL;
    bool have[AGENT_MAX_GPUS] = {false};
    int util[AGENT_MAX_GPUS];
    int64_t mem[AGENT_MAX_GPUS], energy[AGENT_MAX_GPUS], at = wall_ms();

    a->sampled_ms = now; /* sampler_main calls it when due */
    if (!a->samples && !(a->samples = json_array()))
        return;
    if (a->nv && (smp = allot_malloc(sizeof(*smp)))) {
        for (int g = 0; g < a->inv.n_gpus && g < AGENT_MAX_GPUS; g++) {
            if (nvml_sample(a->nv, a->inv.gpus[g].nvml_index, smp) < 0)
                continue;
            have[g] = true;
            gpu_mem_watch(a, g, smp, now);
            util[g] = smp->supported & ALLOT_NVML_F_UTIL ? smp->util_gpu : -1;
            mem[g] = smp->supported & ALLOT_NVML_F_MEMORY ? smp->mem_used_mib * 1048576 : -1;
            energy[g] = smp->supported & ALLOT_NVML_F_ENERGY ? (int64_t)smp->energy_mj : -1;
        }
        allot_free(smp);
    } else if (!a->nv && a->cfg.emulate_util >= 0) {
        for (int g = 0; g < a->inv.n_gpus && g < AGENT_MAX_GPUS; g++) {
            have[g] = true;
            util[g] = (int)a->cfg.emulate_util;
            mem[g] = -1;
            energy[g] = -1;
        }
    }
    struct allot_shim_usage *su = allot_malloc(sizeof(*su));
    for (size_t i = 0; i < a->n_tasks && getuid() == 0; i++) {
        struct task *t = &a->tasks[i];
        int64_t cpu = -1, m = -1, u_sum = 0, u_n = 0, gm = 0, en = 0, s_util = -1, s_mem = -1;
        bool gpu_ok = t->gpu_mask != 0 && !gpus_shared(a, t), mem_ok = gpu_ok, en_ok = gpu_ok;

        char ended[4400];
        /* only tasks still running are sampled: one whose supervisor wrote
         * its exit while the loop waited on allotd is skipped (the loop,
         * not the sampler, moves it on) */
        allot_fmt(ended, sizeof(ended), "%s/%s/exit", a->tasks_dir, t->key);
        if (t->state != TASK_RUNNING || access(ended, F_OK) == 0)
            continue;
        cg_usage(a->cfg.cgroup_root, t->key, &cpu, &m);
        if (su && shim_sample(a, t, now, su, &s_util, &s_mem)) {
            /* a fraction: what its shim measured, not the shared GPU's NVML figures */
            json_array_append_new(
                a->samples,
                json_pack("{s:I,s:I,s:i,s:I,s:I,s:I,s:I,s:I,s:I}", "interval_ms",
                          (json_int_t)a->cfg.sample_interval, "job", (json_int_t)t->job, "task",
                          t->index, "at", (json_int_t)at, "cpu_ns", (json_int_t)cpu, "mem_bytes",
                          (json_int_t)m, "gpu_util", (json_int_t)s_util, "gpu_mem_bytes",
                          (json_int_t)s_mem, "energy_mj", (json_int_t)-1));
            continue;
        }
        for (int g = 0; g < AGENT_MAX_GPUS && gpu_ok; g++) {
            if (!(t->gpu_mask & (1u << g)))
                continue;
            if (!have[g] || util[g] < 0)
                gpu_ok = false;
            else
                u_sum += util[g], u_n++;
            if (!have[g] || mem[g] < 0)
                mem_ok = false;
            else
                gm += mem[g];
            if (!have[g] || energy[g] < 0)
                en_ok = false;
            else
                en += energy[g];
        }
        json_array_append_new(a->samples,
                              json_pack("{s:I,s:I,s:i,s:I,s:I,s:I,s:I,s:I,s:I}", "interval_ms",
                                        (json_int_t)a->cfg.sample_interval, "job",
                                        (json_int_t)t->job, "task", t->index, "at", (json_int_t)at,
                                        "cpu_ns", (json_int_t)cpu, "mem_bytes", (json_int_t)m,
                                        "gpu_util", (json_int_t)(gpu_ok && u_n ? u_sum / u_n : -1),
                                        "gpu_mem_bytes", (json_int_t)(mem_ok ? gm : -1),
                                        "energy_mj", (json_int_t)(en_ok ? en : -1)));
    }
    allot_free(su);
    /* each running task keeps its 12 hours: eight tasks fill the buffer
     * eight times as fast as one */
    size_t keep = SAMPLES_MAX * (a->n_tasks < 1                   ? 1
                                 : a->n_tasks > SAMPLES_TASKS_MAX ? SAMPLES_TASKS_MAX
                                                                  : a->n_tasks);
    while (json_array_size(a->samples) > keep)
        json_array_remove(a->samples, 0);
}

json_t *samples_batch(struct agent *a, size_t max)
{
    json_t *batch = json_array();
    size_t n = json_array_size(a->samples);

    for (size_t i = 0; batch && i < n && i < max; i++)
        json_array_append(batch, json_array_get(a->samples, i));
    return batch;
}

void samples_acked(struct agent *a, json_t *batch)
{
    /* the batch was a prefix of the buffer; since then the sampler only
     * dropped from the front and appended at the back, so what is left of
     * it is still a prefix, in the same order */
    for (size_t i = 0; i < json_array_size(batch) && json_array_size(a->samples); i++)
        if (json_array_get(a->samples, 0) == json_array_get(batch, i))
            json_array_remove(a->samples, 0);
}

/* The sampler: due every sample-interval after the last samples. */
static void *sampler_main(void *arg)
{
    struct agent *a = arg;

    pthread_mutex_lock(&a->lock);
    while (!a->sampler_quit) {
        int64_t now = allot_mono_ms(), due = a->sampled_ms + a->cfg.sample_interval;

        if (a->sampled_ms && now < due) {
            struct timespec at = {.tv_sec = due / 1000, .tv_nsec = (due % 1000) * 1000000};
            /* a->lock is free while it waits; a signal or a spurious wake
             * just looks at the clock again */
            pthread_cond_timedwait(&a->sampler_wake, &a->lock, &at);
            continue;
        }
        samples_take(a, now);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

int sampler_start(struct agent *a)
{
    pthread_condattr_t ca;
    sigset_t all, old;
    int rc;

    if (pthread_mutex_init(&a->lock, NULL) != 0)
        return -1;
    /* the deadlines are allot_mono_ms's monotonic clock */
    if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&a->sampler_wake, &ca) != 0) {
        LOG_ERROR("agent", "cannot set up the sampler's clock");
        pthread_mutex_destroy(&a->lock);
        return -1;
    }
    pthread_condattr_destroy(&ca);
    a->sampler_quit = false;
    /* SIGTERM, SIGINT and SIGHUP are the loop's: the sampler blocks them */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&a->sampler, NULL, sampler_main, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        LOG_ERROR("agent", "cannot start the sampler thread: %s", strerror(rc));
        pthread_cond_destroy(&a->sampler_wake);
        pthread_mutex_destroy(&a->lock);
        return -1;
    }
    a->sampler_on = true;
    return 0;
}

void sampler_stop(struct agent *a)
{
    if (!a->sampler_on)
        return;
    pthread_mutex_lock(&a->lock);
    a->sampler_quit = true;
    pthread_cond_signal(&a->sampler_wake);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->sampler, NULL);
    a->sampler_on = false;
    pthread_cond_destroy(&a->sampler_wake);
    pthread_mutex_destroy(&a->lock);
}
