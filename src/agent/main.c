/*
 * allot-agent: one per GPU node (docs/agent.md). It registers the node's
 * inventory with allotd, then loops: notice how its tasks are doing,
 * heartbeat (renewing the node's lease, reporting job states, and long
 * polling for the node's desired state), and reconcile towards that state:
 * start the tasks placed here, stop (SIGTERM, grace, SIGKILL) the ones
 * allotd no longer wants or preempts. Reconciling is idempotent: a task is
 * keyed by (job, task index) and is never started twice, also across agent
 * restarts (the executor's folders in STATE/tasks say what runs).
 *
 * A job's end is reported once every task of it on this node ended:
 * "succeeded" when all exited 0, else "failed" (exit code and a detail:
 * the signal, an OOM kill) or "lost" (the process vanished while the agent
 * was down). Tasks allot itself stopped are not reported: allotd decided
 * their fate (cancelled, preempted, requeued).
 *
 * Fencing: when allotd cannot be reached for most of a lease, allotd will
 * soon count the node lost and requeue its jobs elsewhere; the agent stops
 * its tasks first, so that no job runs twice.
 *
 * Usage samples are taken by the sampler thread (sample.c), not here: the
 * loop holds a->lock except while it waits on allotd or sleeps, and sends
 * what the sampler buffered with each heartbeat.
 */
#include "agent.h"
#include "net.h"

#include "allot/common.h"
#include "allot/config.h"
#include "log.h"
#include "nvml.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define F(f) offsetof(struct agent_config, f)

static const char *const modes[] = {"exclusive", "shared", "mig", NULL};
static const char *const sm_shares[] = {"hard", "soft", NULL};
static const char *const sharings[] = {"shim", "mps", NULL};
static const char *const formats[] = {"text", "json", NULL};
static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const on_off[] = {"off", "on", NULL};
static const char *const cpu_binds[] = {"none", "cores", NULL};

/* --listen: IPV4:PORT, as serve_start binds it. */
static int listen_ok(const void *field, char *err, size_t errlen)
{
    struct sockaddr_in sa;

    return serve_parse_listen(*(char *const *)field, &sa, err, errlen);
}

/* --labels: KEY=VALUE,... by the label rule; allot.io/ is the agent's. */
static int labels_ok(const void *field, char *err, size_t errlen)
{
    json_t *l = inventory_labels(*(char *const *)field, err, errlen);

    json_decref(l);
    return l ? 0 : ALLOT_EINVAL;
}

/* One agent per state folder: two would adopt, start and stop each
 * other's tasks. A POSIX record lock on STATE/agent.lock, held while the
 * process lives: not inherited by the supervisors it forks (which outlive
 * an agent killed with SIGKILL, whose successor must take the folder). */
static int state_lock(const char *dir, char *err, size_t errlen)
{
    char path[4200], pid[32];
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int fd;

    allot_fmt(path, sizeof(path), "%s/agent.lock", dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return allot_fmt(err, errlen, "%s: %s", path, strerror(errno)), -1;
    if (fcntl(fd, F_SETLK, &fl) < 0) {
        int e = errno;
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
            allot_fmt(err, errlen, "%s is in use by another allot-agent (pid %d)", dir,
                      (int)who.l_pid);
        else
            allot_fmt(err, errlen, "%s: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    allot_fmt(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || write(fd, pid, strlen(pid)) < 0)
        LOG_WARN("agent", "%s: %s", path, strerror(errno));
    return 0; /* fd stays open: the lock lives as long as the process */
}

static const struct allot_config_option options[] = {
    {.name = "config",
     .type = ALLOT_CFG_STRING,
     .offset = F(config),
     .help = "Config file read before the command line (command-line options win). "
             "Only meaningful on the command line."},
    {.name = "server",
     .type = ALLOT_CFG_STRING,
     .offset = F(server),
     .def = "http://127.0.0.1:7070",
     .help = "URL of allotd; several allotd sharing one store (docs/ha.md): their URLs "
             "separated by commas, tried in turn, a standby's leader first."},
    {.name = "token",
     .type = ALLOT_CFG_STRING,
     .offset = F(token),
     .help = "Join token: an allotd token of role agent (or ALLOT_TOKEN, or --token-file)."},
    {.name = "token-file",
     .type = ALLOT_CFG_STRING,
     .offset = F(token_file),
     .help = "File holding the join token (first line)."},
    {.name = "name",
     .type = ALLOT_CFG_STRING,
     .offset = F(name),
     .help = "Node name registered with allotd (default: the host name)."},
    {.name = "state-dir",
     .type = ALLOT_CFG_STRING,
     .offset = F(state_dir),
     .def = "/var/lib/allot-agent",
     .help = "Where the agent keeps its tasks' bookkeeping, their logs and emulated devices."},
    {.name = "emulate",
     .type = ALLOT_CFG_STRING,
     .offset = F(emulate),
     .help = "Emulated GPUs for nodes without any, e.g. 4xH100-80GB (catalog models)."},
    {.name = "nvml-lib",
     .type = ALLOT_CFG_STRING,
     .offset = F(nvml_lib),
     .def = "libnvidia-ml.so.1",
     .help = "NVML library to load for GPU discovery."},
    {.name = "gpu-mode",
     .type = ALLOT_CFG_ENUM,
     .offset = F(gpu_mode),
     .def = "exclusive",
     .choices = modes,
     .help = "How allotd may use the GPUs: whole (exclusive), shared in fractions, or MIG."},
    {.name = "labels",
     .type = ALLOT_CFG_STRING,
     .offset = F(labels),
     .validate = labels_ok,
     .help = "The node's labels, KEY=VALUE,... (a bare KEY: an empty value), which jobs select "
             "nodes by (allot submit --constraint). Keys are up to 63 printable ASCII characters "
             "without space or '='; allot.io/ keys are the agent's own. Changing them is "
             "changing the node's inventory (drain it first)."},
    {.name = "cpu-bind",
     .type = ALLOT_CFG_ENUM,
     .offset = F(cpu_bind),
     .def = "none",
     .choices = cpu_binds,
     .help = "cores: a task of whole CPUs gets that many cores of its own (a cpuset no other "
             "task shares), every other task the node's cores no task has alone; none: tasks "
             "share every CPU, held to their CPUs by CPU quota only."},
    {.name = "cgroup-root",
     .type = ALLOT_CFG_STRING,
     .offset = F(cgroup_root),
     .def = "allot",
     .help = "Folder of the tasks' cgroups in each cgroup hierarchy."},
    {.name = "run-as",
     .type = ALLOT_CFG_STRING,
     .offset = F(run_as),
     .def = "tenant",
     .help = "User (USER[:GROUP], each a name or a number) jobs run as unless the user map says "
             "otherwise; `tenant`: a uid (and gid) of its own for each tenant, from "
             "--tenant-uids, so that one tenant's jobs cannot signal, trace or read another's."},
    {.name = "tenant-uids",
     .type = ALLOT_CFG_STRING,
     .offset = F(tenant_uids),
     .def = "2000000000-2099999999",
     .help = "FIRST-LAST: the uids `--run-as tenant` gives tenants. A hash of the tenant's path "
             "picks one; STATE/tenant-uids keeps it (a tenant whose hash meets another's uid "
             "takes the next free one)."},
    {.name = "user-map",
     .type = ALLOT_CFG_STRING,
     .offset = F(user_map),
     .help = "File of `@[TENANT:]TOKEN-NAME USER[:GROUP] [allow-root]` (a submitting user: "
             "TENANT the token's tenant scope) and `TENANT "
             "USER[:GROUP] [allow-root]` lines (longest tenant prefix wins): who jobs run as. Jobs "
             "never run as root without allow-root."},
    {.name = "shim-lib",
     .type = ALLOT_CFG_STRING,
     .offset = F(shim_lib),
     .def = "/usr/local/lib/liballot-cuda.so",
     .help = "GPU sharing shim preloaded into jobs that get a fraction of a GPU."},
    {.name = "sm-share",
     .type = ALLOT_CFG_ENUM,
     .offset = F(sm_share),
     .def = "hard",
     .choices = sm_shares,
     .help = "How the shim holds a fraction's compute share: hard (never above it), or soft "
             "(idle GPU time above it may be used when no other job on the GPU wants it). "
             "Jobs on one GPU share its time by their tenants' weights either way."},
    {.name = "context-overhead",
     .type = ALLOT_CFG_STRING,
     .offset = F(ctx_overhead),
     .def = "300Mi",
     .help = "What each CUDA context counts against a fraction's GPU-memory cap until the shim "
             "has measured it from NVML (the shim's ALLOT_GPU_CONTEXT_OVERHEAD; a CUDA 12 "
             "context takes a few hundred MiB); 0: nothing until measured."},
    {.name = "image-dir",
     .type = ALLOT_CFG_STRING,
     .offset = F(image_dir),
     .help = "Folder of the images jobs may name: IMAGE-DIR/NAME is a root file system "
             "(docs/agent.md). Empty: jobs with an image are refused."},
    {.name = "crun",
     .type = ALLOT_CFG_STRING,
     .offset = F(crun),
     .def = "crun",
     .help = "The OCI runtime that runs jobs with an image."},
    {.name = "io-max",
     .type = ALLOT_CFG_STRING,
     .offset = F(io_max),
     .help = "Block I/O limits of every task: `DEVICE KEY=VALUE ...` entries separated by ';', "
             "DEVICE /dev/NAME or MAJ:MIN, KEY rbps or wbps (bytes a second, K/M/G/T) or riops "
             "or wiops (operations a second), e.g. \"/dev/nvme0n1 rbps=500M wbps=200M\". "
             "io.max on cgroup v2, blkio throttling on v1 (which misses buffered writes)."},
    {.name = "driver-libs",
     .type = ALLOT_CFG_STRING,
     .offset = F(driver_libs),
     .help = "Comma-separated driver libraries (host paths) a GPU job in an image gets in "
             "/usr/local/nvidia/lib64, besides those of NVIDIA's driver found in the usual "
             "library folders (libcuda.so.1, libnvidia-ml.so.1, ...)."},
    {.name = "sharing",
     .type = ALLOT_CFG_ENUM,
     .offset = F(sharing),
     .def = "shim",
     .choices = sharings,
     .help = "How a job's fraction of a shared GPU is enforced: the allot CUDA shim "
             "(--shim-lib), or NVIDIA MPS (one control daemon per GPU, active-thread "
             "percentage and pinned memory limit per job)."},
    {.name = "mps-control",
     .type = ALLOT_CFG_STRING,
     .offset = F(mps_control),
     .def = "nvidia-cuda-mps-control",
     .help = "The MPS control program (with --sharing mps)."},
    {.name = "scrub",
     .type = ALLOT_CFG_BOOL,
     .offset = F(scrub),
     .def = "true",
     .help = "Clear a GPU's memory (through the CUDA driver) before a job of another tenant "
             "gets it; a GPU that cannot be cleared is not handed over. Never on emulated GPUs."},
    {.name = "gpu-memory-watch",
     .type = ALLOT_CFG_BOOL,
     .offset = F(gpu_mem_watch),
     .def = "true",
     .help = "Hold each fraction to its GPU memory cap from outside the job too: stop a task "
             "whose processes hold more than the cap (and 1/8 of it, at least 512 MiB) by "
             "NVML's per-process figures. Needs NVML and root."},
    {.name = "cuda-lib",
     .type = ALLOT_CFG_STRING,
     .offset = F(cuda_lib),
     .def = "libcuda.so.1",
     .help = "CUDA driver library the scrubber loads."},
    {.name = "cpus",
     .type = ALLOT_CFG_INT,
     .offset = F(cpus_milli),
     .min = 0,
     .max = 65536000,
     .help = "CPUs offered, in thousandths (default: every online CPU)."},
    {.name = "memory",
     .type = ALLOT_CFG_SIZE,
     .offset = F(memory),
     .help = "Memory offered (default: all of it)."},
    {.name = "pids-max",
     .type = ALLOT_CFG_INT,
     .offset = F(pids_max),
     .def = "4096",
     .min = 0,
     .max = 4194304,
     .help = "Most processes one task may have (0: no limit)."},
    {.name = "log-max",
     .type = ALLOT_CFG_SIZE,
     .offset = F(log_max),
     .def = "1G",
     .help = "Most bytes one task's log (STATE/logs/JOB/task-INDEX.log) may hold; the task's "
             "output past it is read and discarded, and the log says so in its last line "
             "(0: no cap)."},
    {.name = "tmp-size",
     .type = ALLOT_CFG_SIZE,
     .offset = F(tmp_size),
     .def = "1G",
     .min = 1048576,
     .max = 1099511627776LL,
     .help = "Size of a job's private /tmp, and of its private /dev/shm, on a node (tmpfs "
             "its tasks there share; what is written there counts against the memory of the "
             "task that wrote it), and of each GPU's MPS shared memory."},
    {.name = "heartbeat",
     .type = ALLOT_CFG_DURATION,
     .offset = F(heartbeat),
     .def = "2s",
     .min = 50,
     .max = 60000,
     .help = "Time between heartbeats when allotd cannot be reached."},
    {.name = "sample-interval",
     .type = ALLOT_CFG_DURATION,
     .offset = F(sample_interval),
     .def = "15s",
     .min = 100,
     .max = 300000, /* a sample speaks for up to three: allotd's METER_SAMPLE_GAP */
     .help = "Time between usage samples of each task (CPU time, memory, its GPUs' "
             "utilisation, memory and energy), sent with the heartbeats; kept and resent "
             "while allotd cannot be reached (the last 2,880). At most 5m: a sample speaks "
             "for the time since the one before, up to three intervals."},
    {.name = "emulate-util",
     .type = ALLOT_CFG_INT,
     .offset = F(emulate_util),
     .def = "-1",
     .min = -1,
     .max = 100,
     .help = "With --emulate: the utilisation (percent) the emulated GPUs report in usage "
             "samples, for trying out idle detection. -1: none."},
    {.name = "poll-wait",
     .type = ALLOT_CFG_DURATION,
     .offset = F(poll_wait),
     .def = "1s",
     .min = 0,
     .max = 60000,
     .help = "How long one heartbeat waits for a new desired state (long poll); also the "
             "longest time before a task's end is reported."},
    {.name = "log-retention",
     .type = ALLOT_CFG_DURATION,
     .offset = F(log_retention),
     .def = "7d",
     .min = 0,
     .max = 3650LL * 86400000,
     .help = "How long the logs of a job that no longer has a task on this node are kept after "
             "their last write (STATE/logs/JOB; `allot logs` reads them until then; 0: for "
             "ever)."},
    {.name = "grace",
     .type = ALLOT_CFG_DURATION,
     .offset = F(grace),
     .def = "30s",
     .min = 0,
     .max = 3600000,
     .help = "Time between SIGTERM and SIGKILL when a task is stopped."},
    {.name = "fence",
     .type = ALLOT_CFG_BOOL,
     .offset = F(fence),
     .def = "true",
     .help = "Stop every task when allotd has been unreachable for most of the node's lease "
             "(allotd then requeues them elsewhere)."},
    {.name = "network",
     .type = ALLOT_CFG_ENUM,
     .offset = F(network),
     .def = "off",
     .choices = on_off,
     .help = "Tenant networks (docs/network.md): a task whose desired state carries a network "
             "runs in its own network namespace on its tenant's bridge and VXLAN overlay, "
             "behind the nftables table inet allot and the uplink's HTB classes. Needs root "
             "and --underlay-ip."},
    {.name = "underlay-ip",
     .type = ALLOT_CFG_STRING,
     .offset = F(underlay_ip),
     .help = "This node's IPv4 address on the data-centre network: the VXLAN overlay's local "
             "end, registered with allotd (its peers reach this node there)."},
    {.name = "uplink",
     .type = ALLOT_CFG_STRING,
     .offset = F(uplink),
     .help = "Interface towards the data-centre network, for NAT and the tenants' HTB classes "
             "(default: the one holding --underlay-ip)."},
    {.name = "dc-nets",
     .type = ALLOT_CFG_STRING,
     .offset = F(dc_nets),
     .help = "The data-centre network's IPv4 prefixes besides the uplink's own, comma-separated "
             "(e.g. 10.0.0.0/8): tenant egress nat never reaches them (other racks' nodes, "
             "allotd, storage), nor does it reach the uplink's prefixes."},
    {.name = "uplink-rate",
     .type = ALLOT_CFG_STRING,
     .offset = F(uplink_rate),
     .help = "Capacity of the uplink shared by the tenants' HTB classes, e.g. 25Gbit (default: "
             "the link's speed, else 10Gbit)."},
    {.name = "sysfs",
     .type = ALLOT_CFG_STRING,
     .offset = F(sysfs),
     .def = "/sys",
     .help = "Where sysfs is mounted: the RDMA devices and their SR-IOV virtual functions are "
             "read there (class/infiniband, class/net). For tests and containers with another "
             "view of it."},
    {.name = "listen",
     .type = ALLOT_CFG_STRING,
     .offset = F(listen),
     .validate = listen_ok,
     .def = "0.0.0.0:7071",
     .help = "Address of the agent's log endpoint (allotd reads task logs from it), IPV4:PORT; "
             "port 0 picks one."},
    {.name = "advertise",
     .type = ALLOT_CFG_STRING,
     .offset = F(advertise),
     .help = "URL allotd reaches the log endpoint at (default: http://NAME:PORT, or the "
             "listen address when it is not 0.0.0.0)."},
    {.name = "cacert",
     .type = ALLOT_CFG_STRING,
     .offset = F(cacert),
     .help = "CA certificate to check an HTTPS allotd with."},
    {.name = "log-file",
     .type = ALLOT_CFG_STRING,
     .offset = F(log_file),
     .help = "Log file (default: standard error); SIGHUP reopens it."},
    {.name = "log-format",
     .type = ALLOT_CFG_ENUM,
     .offset = F(log_format),
     .def = "text",
     .choices = formats,
     .help = "Log lines as text or JSON."},
    {.name = "log-level",
     .type = ALLOT_CFG_ENUM,
     .offset = F(log_level),
     .def = "info",
     .choices = levels,
     .help = "Least severe level logged."},
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static volatile sig_atomic_t stop_signal, hup_signal;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        hup_signal = 1;
    else
        stop_signal = 1;
}

static void sleep_ms(int64_t ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000};

    nanosleep(&d, NULL);
}

/* Sleeps ms with a->lock released (the loop holds it otherwise), so that
 * the sampler may sample meanwhile. */
static void idle_ms(struct agent *a, int64_t ms)
{
    pthread_mutex_unlock(&a->lock);
    sleep_ms(ms);
    pthread_mutex_lock(&a->lock);
}

static struct task *find_task(struct agent *a, int64_t job, int index)
{
    for (size_t i = 0; i < a->n_tasks; i++)
        if (a->tasks[i].job == job && a->tasks[i].index == index)
            return &a->tasks[i];
    return NULL;
}

/* Whether desired entry d is task t's run. An allotd that names no run
 * and a task started before runs were named match any (upgrades). */
static bool same_run(json_t *d, const struct task *t)
{
    json_t *run = json_object_get(d, "run");

    return !run || t->run == 0 || json_integer_value(run) == t->run;
}

/* The desired-state entry of (job, index), of any run, or NULL. */
static json_t *desired_entry(json_t *desired, int64_t job, int index)
{
    json_t *d;
    size_t i;

    json_array_foreach(desired, i, d)
    {
        if (json_integer_value(json_object_get(d, "job")) == job &&
            json_integer_value(json_object_get(d, "task")) == index)
            return d;
    }
    return NULL;
}

/* The desired-state entry of task t's run, or NULL: allotd no longer
 * wants it there, or wants a later run of the same task (its job was
 * stopped and placed here again). */
static json_t *desired_of(json_t *desired, const struct task *t)
{
    json_t *d = desired_entry(desired, t->job, t->index);

    return d && same_run(d, t) ? d : NULL;
}

/* Follows what changes for tasks that run here: their tenant network's
 * rates and egress, a preemption (stopping). */
static void reconcile_running(struct agent *a, json_t *desired, int64_t now)
{
    json_t *d;
    size_t i;

    json_array_foreach(desired, i, d)
    {
        struct task *t = find_task(a, json_integer_value(json_object_get(d, "job")),
                                   (int)json_integer_value(json_object_get(d, "task")));

        if (!t || desired_of(desired, t) != d)
            continue;         /* not here, or another run (reconcile_gone stops the old one) */
        if (t->net && a->net) /* its tenant's rates or egress may have changed */
            net_task_refresh(a->net, t->key, json_object_get(d, "network"));
        if (json_is_true(json_object_get(d, "stopping")) && !t->cancelled) {
            json_t *g = json_object_get(d, "grace_ms"); /* allotd's grace for the victim */
            t->cancelled = true;                        /* preempted: allotd requeues or ends it */
            task_stop(a, t, now, json_is_integer(g) ? json_integer_value(g) : -1);
        }
        if (json_object_get(d, "signals")) /* allot signal */
            task_signal(a, t, json_object_get(d, "signals"));
    }
}

/* Stops what allotd no longer wants, forgets what ended, was reported and
 * left the desired state. A task whose job allotd placed here again (a
 * later run) is stopped and forgotten like one no longer wanted: its end
 * is of no interest any more. */
static void reconcile_gone(struct agent *a, json_t *desired, int64_t now)
{
    for (size_t k = a->n_tasks; k-- > 0;) {
        struct task *t = &a->tasks[k];

        if (desired_of(desired, t))
            continue;
        bool rerun = desired_entry(desired, t->job, t->index) != NULL;
        if (t->state == TASK_STARTING || t->state == TASK_RUNNING) {
            t->cancelled = true;
            task_stop(a, t, now, -1);
        } else if ((t->state == TASK_EXITED || t->state == TASK_LOST) &&
                   (t->reported_end || t->cancelled || rerun)) {
            task_forget(a, t);
            a->tasks[k] = a->tasks[--a->n_tasks];
        }
    }
}

/* Starts what is placed here and not running. One that waits for what a
 * stopping task still holds (task_start 1) is tried again next time. */
static void reconcile_new(struct agent *a, json_t *desired)
{
    json_t *d;
    size_t i;

    json_array_foreach(desired, i, d)
    {
        /* run 0: allotd has not stored the start yet, or an earlier run of
         * the job may still be on a node; a task still here is this run or
         * an older one that is on its way out. "hold": the same, for a run
         * allotd may have shown before (kept if it runs, not started) */
        json_t *run = json_object_get(d, "run");

        if (json_is_true(json_object_get(d, "stopping")) || (run && json_integer_value(run) == 0) ||
            json_is_true(json_object_get(d, "hold")) ||
            find_task(a, json_integer_value(json_object_get(d, "job")),
                      (int)json_integer_value(json_object_get(d, "task"))))
            continue;
        if (allot_grow((void **)&a->tasks, &a->cap_tasks, a->n_tasks + 1, sizeof(*a->tasks)) < 0)
            return;
        if (task_start(a, d, &a->tasks[a->n_tasks]) == 0)
            a->n_tasks++;
        else /* not kept: what its binding took from the pool goes back */
            cpubind_refresh(a);
    }
}

/* Makes the node match the desired state: the tasks allotd stops are
 * stopped before new ones start, so that what a stopped task held (its
 * RDMA VFs) is known to be on its way back. */
static void reconcile(struct agent *a, json_t *desired)
{
    int64_t now = allot_mono_ms();

    reconcile_running(a, desired, now);
    reconcile_gone(a, desired, now);
    reconcile_new(a, desired);
}

/* Most jobs a heartbeat lists as stopping (allotd's AGENTPROTO_MAX_STOPPING). */
#define STOPPING_MAX 4096

static int read_token_file(struct agent_config *c, char *err, size_t errlen);
static bool token_from_file; /* the join token came from --token-file (--token wins) */

/* After allotd refused the join token: reads --token-file again (an admin
 * may have put a new one there). True when it holds another token. */
static bool join_token_again(struct agent *a)
{
    char err[512], *was = a->cfg.token ? allot_strdup(a->cfg.token) : NULL;
    bool other;

    if (!token_from_file || read_token_file(&a->cfg, err, sizeof(err)) < 0) {
        allot_free(was);
        return false;
    }
    other = !was || strcmp(was, a->cfg.token) != 0;
    if (other)
        LOG_INFO("agent", "a new join token read from %s", a->cfg.token_file);
    allot_free(was);
    return other;
}

/* Whether array a holds integer v. */
static bool json_in_ints(const json_t *a, int64_t v)
{
    size_t i;
    json_t *x;

    json_array_foreach(a, i, x) if (json_integer_value(x) == v) return true;
    return false;
}

/* This heartbeat's job reports: "running" once per job, and the end of a
 * job once every task of it here ended or one of them failed. */
static json_t *reports(struct agent *a)
{
    json_t *out = json_array();

    for (size_t i = 0; i < a->n_tasks; i++) {
        struct task *t = &a->tasks[i];
        bool first = true, all_ended = true, running = false, lost = false, cancelled = false,
             fenced = false;
        const struct task *bad = NULL;

        for (size_t k = 0; k < i && first; k++)
            first = a->tasks[k].job != t->job;
        if (!first)
            continue; /* one report per job */
        for (size_t k = i; k < a->n_tasks; k++) {
            const struct task *u = &a->tasks[k];
            if (u->job != t->job)
                continue;
            all_ended &= u->state == TASK_EXITED || u->state == TASK_LOST;
            running |= u->state == TASK_RUNNING && !u->reported_running;
            lost |= u->state == TASK_LOST;
            cancelled |= u->cancelled;
            fenced |= u->fenced;
            if (!bad && (u->state == TASK_LOST || (u->state == TASK_EXITED && u->exit_code)))
                bad = u;
        }
        if (cancelled)
            continue; /* allotd stopped it: nothing to tell */
        /* the job's end once every task of it here ended, or at once when
         * one failed: a gang with a dead task ends (allotd stops the rest),
         * as it does when the failed task is on another node */
        if ((all_ended || bad) && !t->reported_end) {
            json_t *r = json_pack("{s:I,s:I,s:s}", "id", (json_int_t)t->job, "run",
                                  (json_int_t)t->run, "state",
                                  lost || fenced ? "lost"
                                  : bad          ? "failed"
                                                 : "succeeded");
            if (fenced) {
                char why[200];
                allot_fmt(why, sizeof(why),
                          "stopped on node %s: allotd was out of reach for most of the lease",
                          a->cfg.name);
                json_object_set_new(r, "fenced", json_true());
                json_object_set_new(r, "detail", json_string(why));
            } else if (!lost) {
                json_object_set_new(r, "exit_code", json_integer(bad ? bad->exit_code : 0));
            }
            if (!fenced && bad && *bad->detail) {
                /* which of its tasks here, when there are several (allotd
                 * names the node when the job has several) */
                char why[200];
                size_t here = 0;
                for (size_t k = i; k < a->n_tasks; k++)
                    here += a->tasks[k].job == t->job;
                if (here > 1)
                    allot_fmt(why, sizeof(why), "task %d: %s", bad->index, bad->detail);
                else
                    allot_strlcpy(why, bad->detail, sizeof(why));
                json_object_set_new(r, "detail", json_string(why));
            }
            int64_t ran = -1; /* the longest task here */
            for (size_t k = i; k < a->n_tasks; k++)
                if (a->tasks[k].job == t->job && a->tasks[k].runtime_ms > ran)
                    ran = a->tasks[k].runtime_ms;
            if (ran >= 0)
                json_object_set_new(r, "runtime_ms", json_integer(ran));
            json_array_append_new(out, r);
        } else if (running && !all_ended) {
            json_array_append_new(out, json_pack("{s:I,s:I,s:s}", "id", (json_int_t)t->job, "run",
                                                 (json_int_t)t->run, "state", "running"));
        }
    }
    return out;
}

/* The reports went through: mark them so. */
static void reported(struct agent *a, json_t *sent)
{
    json_t *r;
    size_t i;

    json_array_foreach(sent, i, r)
    {
        int64_t job = json_integer_value(json_object_get(r, "id"));
        bool end = strcmp(json_string_value(json_object_get(r, "state")), "running") != 0;

        for (size_t k = 0; k < a->n_tasks; k++)
            if (a->tasks[k].job == job) {
                a->tasks[k].reported_running = true;
                a->tasks[k].reported_end |= end;
            }
    }
}

/* The node's own credential (docs/agent.md, "Joining"): secrets the agent
 * makes and keeps before allotd hears of them. cur (STATE/node-token) is
 * the one allotd bound, or may have; next (STATE/node-token.next) one it
 * asked allotd to bind in its place and has no answer for yet. A secret is
 * dropped only once another is bound, so no failure of allotd's (a 401
 * from a store it could not read) or of the way (a lost answer) leaves the
 * node without the secret it is bound to. */
struct node_cred {
    char cur[80], next[80]; /* "" when none */
    int speaking;           /* CRED_JOIN, CRED_CUR or CRED_NEXT: whom the client speaks as */
};

enum { CRED_JOIN, CRED_CUR, CRED_NEXT };

/* The SHA-256 of secret in hex (65 bytes). */
static void cred_hash(const char *secret, char *hex)
{
    unsigned char h[crypto_hash_sha256_BYTES];

    crypto_hash_sha256(h, (const unsigned char *)secret, strlen(secret));
    for (size_t i = 0; i < sizeof(h); i++)
        allot_fmt(hex + 2 * i, 65 - 2 * i, "%02x", h[i]);
}

/* Reads STATE/NAME into buf ("" when there is none). */
static void cred_read(const struct agent *a, const char *name, char *buf, size_t len)
{
    if (agent_read_small(a->cfg.state_dir, name, buf, len) < 0)
        *buf = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
}

/* Speaks as who (CRED_*). */
static void cred_speak(const struct agent *a, struct agent_client *c, struct node_cred *cr, int who)
{
    const char *tok = who == CRED_CUR ? cr->cur : who == CRED_NEXT ? cr->next : a->cfg.token;

    if (client_set_token(c, tok) == 0)
        cr->speaking = who;
}

/* A new next secret, kept in STATE/node-token.next (0600) before allotd
 * hears of it; "" when it cannot be kept (then none is asked for). */
static void cred_new_next(const struct agent *a, struct node_cred *cr)
{
    unsigned char raw[32];
    int rc;

    randombytes_buf(raw, sizeof(raw));
    allot_strlcpy(cr->next, "allot_", sizeof(cr->next));
    for (size_t i = 0; i < sizeof(raw); i++)
        allot_fmt(cr->next + 6 + 2 * i, sizeof(cr->next) - 6 - 2 * i, "%02x", raw[i]);
    sodium_memzero(raw, sizeof(raw));
    if ((rc = agent_write_atomic(a->cfg.state_dir, "node-token.next", cr->next)) < 0) {
        LOG_ERROR("agent", "cannot keep a node credential in %s (%s): no credential is asked for",
                  a->cfg.state_dir, strerror(-rc));
        cr->next[0] = '\0';
    }
}

/* next is bound: it becomes cur (STATE/node-token) and is spoken with. */
static void cred_promote(const struct agent *a, struct agent_client *c, struct node_cred *cr)
{
    char next[4200];
    int rc = agent_write_atomic(a->cfg.state_dir, "node-token", cr->next);

    allot_fmt(next, sizeof(next), "%s/node-token.next", a->cfg.state_dir);
    if (rc < 0) /* it stays in node-token.next, which a restart tries second */
        LOG_ERROR("agent", "%s/node-token: %s", a->cfg.state_dir, strerror(-rc));
    else
        unlink(next);
    allot_strlcpy(cr->cur, cr->next, sizeof(cr->cur));
    cr->next[0] = '\0';
    cred_speak(a, c, cr, CRED_CUR);
    LOG_INFO("agent", "this node speaks with its own credential from now on (token node/%s)",
             a->cfg.name);
}

/* The secrets kept in the state folder; speaks with the bound one if any. */
static void node_cred_load(const struct agent *a, struct agent_client *c, struct node_cred *cr)
{
    memset(cr, 0, sizeof(*cr));
    cred_read(a, "node-token", cr->cur, sizeof(cr->cur));
    cred_read(a, "node-token.next", cr->next, sizeof(cr->next));
    cred_speak(a, c, cr, *cr->cur ? CRED_CUR : CRED_JOIN);
    if (*cr->cur)
        LOG_INFO("agent", "speaking with the node credential of %s/node-token", a->cfg.state_dir);
}

/* Registers the node, speaking with its own credential (cur, then next:
 * an answer that never came may have bound it) or, when allotd knows
 * neither, with the join token, asking allotd to bind next
 * (?credential=its SHA-256). A 403 to the join token (the node is bound to
 * a credential: this one's, which allotd just could not read, or one an
 * admin must revoke after a reinstall) is retried, as is what never got
 * an answer. Returns the lease in ms, or -1 when allotd refused or the
 * agent is stopping. */
static int64_t register_node(struct agent *a, struct agent_client *c, struct node_cred *cr)
{
    json_t *inv = inventory_json(&a->cfg, &a->inv), *reply = NULL;
    char err[512], path[160], hash[65];
    int64_t lease = -1;
    int who = *cr->cur ? CRED_CUR : *cr->next ? CRED_NEXT : CRED_JOIN;

    while (!stop_signal) {
        if (who == CRED_JOIN && !*cr->next)
            cred_new_next(a, cr);
        cred_speak(a, c, cr, who);
        const char *asked = who == CRED_CUR ? cr->cur : cr->next;
        if (*asked)
            cred_hash(asked, hash);
        allot_fmt(path, sizeof(path), "/v1/nodes/register%s%s", *asked ? "?credential=" : "",
                  *asked ? hash : "");
        long st = client_post(c, path, inv, 10000, &reply, err, sizeof(err));

        if (st == 200 || st == 201) {
            time_t now = time(NULL);
            json_int_t exp = json_integer_value(json_object_get(reply, "lease_expiry"));
            bool bound = json_is_true(json_object_get(reply, "node_credential"));
            lease = json_integer_value(json_object_get(reply, "lease_ms")) > 0
                        ? json_integer_value(json_object_get(reply, "lease_ms"))
                    : exp > now ? (int64_t)(exp - now) * 1000
                                : 30000;
            if (who == CRED_NEXT || (who == CRED_JOIN && bound && *cr->next))
                cred_promote(a, c, cr);
            else if (who == CRED_JOIN && *cr->next)
                LOG_WARN("agent", "allotd bound no credential to this node (an admin token?): "
                                  "it speaks with the join token");
            LOG_INFO("agent", "registered as %s (%d GPUs%s)", a->cfg.name, a->inv.n_gpus,
                     a->inv.emulated ? ", emulated" : "");
            break;
        }
        json_decref(reply);
        reply = NULL;
        if ((st == 401 || st == 403) && who != CRED_JOIN) {
            /* not (or no longer) bound to it: the next one */
            LOG_WARN("agent", "allotd refused the node credential%s (%s)",
                     who == CRED_CUR ? "" : " asked for before", err);
            who = who == CRED_CUR && *cr->next ? CRED_NEXT : CRED_JOIN;
            continue;
        }
        if (st == 409 && who == CRED_JOIN && *cr->next) { /* that secret was bound before */
            cr->next[0] = '\0';
            continue;
        }
        if (st >= 400 && st < 500 && !(st == 403 && who == CRED_JOIN)) {
            LOG_ERROR("agent", "registration refused: %s", err);
            break;
        }
        LOG_WARN("agent", "cannot register yet: %s", err);
        /* from the top: cur, then next (perhaps bound meanwhile), then the join token */
        who = *cr->cur ? CRED_CUR : *cr->next ? CRED_NEXT : CRED_JOIN;
        sleep_ms(a->cfg.heartbeat);
    }
    json_decref(reply);
    json_decref(inv);
    return lease;
}

/* The heartbeat's usage: per running task and per GPU what they use now,
 * the buffered samples (*batch gets a new reference to those sent: the
 * ones to drop once allotd has them) and the tenant networks' counters. */
static json_t *usage_json(struct agent *a, json_t **batch)
{
    json_t *jobs = json_object();

    for (size_t i = 0; i < a->n_tasks && getuid() == 0; i++) {
        const struct task *t = &a->tasks[i];
        int64_t cpu = -1, mem = -1;
        char key[32];

        if (t->state != TASK_RUNNING)
            continue;
        cg_usage(a->cfg.cgroup_root, t->key, &cpu, &mem);
        allot_fmt(key, sizeof(key), "%s", t->key);
        json_object_set_new(
            jobs, key,
            json_pack("{s:I,s:I}", "cpu_ns", (json_int_t)cpu, "memory_bytes", (json_int_t)mem));
    }
    /* the GPUs as NVML measures them: utilisation, memory, energy */
    json_t *gpus = json_array();
    struct nvml_sample *smp = a->nv ? allot_malloc(sizeof(*smp)) : NULL;
    for (int g = 0; smp && g < a->inv.n_gpus; g++) {
        if (nvml_sample(a->nv, a->inv.gpus[g].nvml_index, smp) < 0)
            continue;
        json_array_append_new(gpus, json_pack("{s:i,s:i,s:i,s:I,s:I,s:i,s:i}", "index", g,
                                              "util_gpu", smp->util_gpu, "util_mem", smp->util_mem,
                                              "mem_used_mib", (json_int_t)smp->mem_used_mib,
                                              "energy_mj", (json_int_t)smp->energy_mj, "temp_c",
                                              smp->temp_c, "processes", smp->n_procs));
    }
    allot_free(smp);
    /* the buffered samples, oldest first, at most AGENTPROTO's limit per heartbeat */
    *batch = samples_batch(a, 1000);
    /* per tenant network here, its byte counters (net.c) */
    return json_pack("{s:o,s:o,s:O,s:o}", "tasks", jobs, "gpus", gpus, "samples", *batch, "net",
                     net_usage_json(a->net));
}

/* --server: one URL of allotd, or several (docs/ha.md); false, said, when
 * the list is not one. */
static bool server_list_ok(const char *list)
{
    char **urls = NULL;
    int n = 0, rc = allot_server_list(list, &urls, &n);

    allot_server_list_free(urls, n);
    if (rc == ALLOT_EINVAL)
        LOG_ERROR("agent", "--server \"%s\": give http:// or https:// URLs, separated by commas",
                  list ? list : "");
    return rc == 0;
}

static int run(struct agent *a)
{
    struct agent_client *c = server_list_ok(a->cfg.server)
                                 ? client_new(a->cfg.server, a->cfg.token, a->cfg.cacert)
                                 : NULL;
    struct node_cred cred = {0};
    char err[512], version[80] = "", logs_url[512], logs_key[80];
    struct serve *srv = serve_start(a->cfg.listen, a->logs_dir, logs_url, sizeof(logs_url),
                                    logs_key, sizeof(logs_key));
    int64_t lease, last_ok;
    int n;

    if (!c || !srv) {
        LOG_ERROR("agent", "cannot set up the HTTP client or listen on %s", a->cfg.listen);
        client_free(c);
        serve_stop(srv);
        return 1;
    }
    if (a->cfg.advertise && *a->cfg.advertise)
        allot_strlcpy(logs_url, a->cfg.advertise, sizeof(logs_url));
    else if (!strncmp(a->cfg.listen, "0.0.0.0:", 8)) {
        const char *port = strrchr(logs_url, ':');
        char tmp[512];
        allot_fmt(tmp, sizeof(tmp), "http://%s%s", a->cfg.name, port ? port : "");
        allot_strlcpy(logs_url, tmp, sizeof(logs_url));
    }
    LOG_INFO("agent", "task logs served at %s", logs_url);
    scrub_load(a);
    n = task_adopt_all(a, &a->tasks);
    /* after the adoption: the MIG instances the tasks hold stay */
    mig_reclaim_foreign(a);
    if (a->net) /* what the adopted tasks need stays, the rest of allot's goes */
        net_sync(a->net, true);
    a->n_tasks = a->cap_tasks = n > 0 ? (size_t)n : 0;
    cpubind_refresh(a); /* the pool as the adopted tasks leave it */
    if (getuid() == 0)  /* the /tmp and /dev/shm of jobs no task here needs any more */
        jobfs_sweep(a);
    logs_sweep(a, time(NULL));
    int64_t next_sweep = allot_mono_ms() + logs_sweep_every(a);
    node_cred_load(a, c, &cred);
    lease = register_node(a, c, &cred);
    if (lease < 0) {
        client_free(c);
        serve_stop(srv);
        return stop_signal ? 0 : 1;
    }
    last_ok = allot_mono_ms();
    task_fence_deadline(a, last_ok, lease);
    if (sampler_start(a) < 0) {
        client_free(c);
        serve_stop(srv);
        return 1;
    }
    /* from here on the loop holds a->lock but while it waits on allotd or
     * sleeps: the sampler takes its samples then (agent.h) */
    bool send_live = true, send_stopping = true;
    pthread_mutex_lock(&a->lock);
    while (!stop_signal) {
        int64_t now = allot_mono_ms();
        bool busy = false;
        json_t *rep, *body, *reply = NULL;
        json_int_t live = 0;             /* tasks whose processes may still be there */
        json_t *stopping = json_array(); /* jobs allotd ended here whose processes may be */
        long st;

        if (hup_signal) {
            hup_signal = 0;
            log_reopen();
            LOG_INFO("agent", "SIGHUP: log reopened");
        }
        if (now >= next_sweep) {
            logs_sweep(a, time(NULL));
            next_sweep = now + logs_sweep_every(a);
        }
        for (size_t i = 0; i < a->n_tasks; i++) {
            task_poll(a, &a->tasks[i], now);
            busy |= a->tasks[i].state == TASK_STARTING || a->tasks[i].state == TASK_STOPPING;
            live += task_alive(&a->tasks[i]);
            /* alive, and the run the desired state `version` shows (if
             * any) is not this one: allotd ended or moved it (a fenced task
             * or one over its GPU memory cap is stopping on its own) */
            if (task_alive(&a->tasks[i]) &&
                (a->tasks[i].cancelled || !desired_of(a->desired, &a->tasks[i])) &&
                json_array_size(stopping) < STOPPING_MAX &&
                !json_in_ints(stopping, a->tasks[i].job))
                json_array_append_new(stopping, json_integer(a->tasks[i].job));
        }
        rep = reports(a);
        mig_foreign_retry(a, now);
        /* a heartbeat never outlasts the time left before fencing: an allotd
         * that takes the connection and does not answer is noticed in time */
        int64_t left = FENCE_AT(a, last_ok, lease) - now, timeout = a->cfg.poll_wait + 15000;
        if (a->cfg.fence && left < timeout)
            timeout = left > 500 ? left : 500;
        int64_t wait = json_array_size(rep) || busy ? 0 : a->cfg.poll_wait;
        /* allotd holds the long poll within the first URL's share of the time */
        int64_t share = timeout / (client_servers(c) > 1 ? client_servers(c) : 1);
        if (wait > share - 400)
            wait = share > 400 ? share - 400 : 0;
        json_t *batch = NULL;
        body = json_pack("{s:O,s:s,s:I,s:o,s:{s:s,s:s},s:{s:o}}", "jobs", rep, "known", version,
                         "wait_ms", (json_int_t)wait, "usage", usage_json(a, &batch), "logs", "url",
                         logs_url, "key", logs_key, "health", "gpus", gpu_health_json(a));
        if (send_live) /* an allotd older than the field refuses it: then left out */
            json_object_set_new(body, "live", json_integer(live));
        /* allotd holds such a job's next run until they are gone (one run at a time) */
        if (send_stopping)
            json_object_set(body, "stopping", stopping);
        json_decref(stopping);
        char path[600];
        allot_fmt(path, sizeof(path), "/v1/nodes/%s/heartbeat", a->cfg.name);
        /* the body holds references only to what nobody changes any more
         * (the samples are never changed once taken; jansson counts
         * references atomically): it may be sent without the lock */
        pthread_mutex_unlock(&a->lock);
        /* allotd counts the lease from the heartbeat's arrival, before its
         * long poll: so does the fence (task_fence_grace's margin) */
        int64_t sent = allot_mono_ms();
        st = client_post(c, path, body, timeout, &reply, err, sizeof(err));
        pthread_mutex_lock(&a->lock);
        json_decref(body);
        if (st == 200) {
            const char *v = json_string_value(json_object_get(reply, "version"));
            json_int_t lms = json_integer_value(json_object_get(reply, "lease_ms"));
            last_ok = sent;
            /* allotd restarted with another --lease, or another allotd took
             * over: fence by the lease it counts now */
            if (lms > 0 && lms != lease) {
                LOG_INFO("agent", "allotd counts a lease of %lld ms now (was %lld)", (long long)lms,
                         (long long)lease);
                lease = lms;
            }
            task_fence_deadline(a, last_ok, lease);
            /* allotd answered a long poll at once with nothing new (every
             * worker it lends to long polls is taken): poll at the heartbeat
             * interval instead of again at once */
            if (wait > 0 && !json_array_size(rep) && v && !strcmp(v, version) &&
                allot_mono_ms() - now < wait / 2)
                idle_ms(a, a->cfg.heartbeat < wait ? a->cfg.heartbeat : wait);
            reported(a, rep);
            samples_acked(a, batch); /* allotd has them: stored once */
            allot_strlcpy(version, v ? v : "", sizeof(version));
            if (a->net)
                net_set_peers(a->net, json_object_get(reply, "network"));
            reconcile(a, json_object_get(reply, "jobs"));
            if (a->net)
                net_sync(a->net, false);
            json_decref(a->desired);
            a->desired = json_incref(json_object_get(reply, "jobs"));
        } else if (st == 404 || st == 401) {
            /* the join token refused (expired, revoked): a new one may be in
             * --token-file by now */
            if (st == 401 && cred.speaking == CRED_JOIN && !join_token_again(a))
                goto refused;
            LOG_WARN("agent", "%s: registering again",
                     st == 404                    ? "allotd does not know this node"
                     : cred.speaking == CRED_JOIN ? "allotd refused the join token"
                                                  : "allotd refused the node credential");
            pthread_mutex_unlock(&a->lock); /* it reads only the options and the inventory */
            int64_t l = register_node(a, c, &cred);
            pthread_mutex_lock(&a->lock);
            if (l >= 0)
                lease = l;
            else if (st == 404)
                st = -2;
            /* a refused credential and join token: heartbeats fail on, and
             * the tasks are fenced as when allotd is out of reach */
        } else {
        refused:
            LOG_WARN("agent", "heartbeat failed: %s", err);
            if (st == 400 && send_live && strstr(err, "\"live\"")) {
                send_live = false; /* an older allotd: heartbeats go without it */
                LOG_WARN("agent", "allotd does not take the heartbeat's \"live\" count (an "
                                  "older allotd): leaving it out; upgrade allotd before agents");
            }
            if (st == 400 && send_stopping && strstr(err, "unknown field \"stopping\"")) {
                send_stopping = false;
                LOG_WARN("agent", "allotd does not take the heartbeat's \"stopping\" jobs (an "
                                  "older allotd): leaving them out; upgrade allotd before agents");
            }
            if (json_is_integer(json_object_get(reply, "lease_expiry"))) {
                /* allotd could not store what the heartbeat said but renewed the
                 * lease: it is there and will not count this node lost */
                last_ok = sent;
                task_fence_deadline(a, last_ok, lease);
            }
            if (a->cfg.fence && allot_mono_ms() > FENCE_AT(a, last_ok, lease)) {
                size_t fenced = 0;
                for (size_t i = 0; i < a->n_tasks; i++) {
                    fenced += task_alive(&a->tasks[i]) && !a->tasks[i].fenced;
                    task_fence(a, &a->tasks[i], allot_mono_ms(), last_ok + lease);
                }
                if (fenced) /* once per task: the next failures find them fenced */
                    LOG_WARN("agent",
                             "allotd unreachable for most of the lease: stopping %zu tasks "
                             "(reported lost when it answers again; allotd queues them again)",
                             fenced);
            }
            idle_ms(a, a->cfg.heartbeat);
        }
        json_decref(batch);
        json_decref(rep);
        json_decref(reply);
        if (st == -2)
            break;
        if (busy)
            idle_ms(a, 20); /* starting or stopping: look again soon */
    }
    pthread_mutex_unlock(&a->lock);
    sampler_stop(a);
    client_free(c);
    serve_stop(srv);
    json_decref(a->desired);
    json_decref(a->samples);
    size_t alive = 0;
    for (size_t i = 0; i < a->n_tasks; i++)
        alive += task_alive(&a->tasks[i]);
    cg_remove_root(a->cfg.cgroup_root); /* goes only where no task's cgroup is left */
    LOG_INFO("agent",
             "stopped; %zu tasks keep running and are adopted at the next start (%zu ended, "
             "reported then)",
             alive, a->n_tasks - alive);
    allot_free(a->tasks);
    return 0;
}

/* Whether /proc is mounted with hidepid (invisible or noaccess): without
 * it every user sees every process's command line in /proc/PID/cmdline. */
static bool proc_hides_pids(void)
{
    FILE *f = fopen("/proc/mounts", "r");
    char line[1024], dev[256], dir[256], type[64], opts[512];
    bool hidden = false;

    while (f && fgets(line, sizeof(line), f)) {
        const char *h;

        if (sscanf(line, "%255s %255s %63s %511s", dev, dir, type, opts) != 4 ||
            strcmp(dir, "/proc") != 0 || strcmp(type, "proc") != 0)
            continue;
        h = strstr(opts, "hidepid=");
        hidden = h && strncmp(h + 8, "0", 1) != 0 && strncmp(h + 8, "off", 3) != 0;
    }
    if (f)
        fclose(f);
    return hidden;
}

/* Whether the kernel (5.8 or later) gives each /proc mount options of its
 * own: then every task of the process executor gets a /proc that hides
 * other users' processes (supervise.c), whatever the host's says. */
static bool proc_per_mount(void)
{
    struct utsname u;
    int major = 0, minor = 0;

    return uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
           (major > 5 || (major == 5 && minor >= 8));
}

static void usage(FILE *out)
{
    fprintf(out, "usage: allot-agent --server URL --token-file FILE [--emulate 4xH100-80GB] "
                 "[OPTIONS]\n"
                 "       allot-agent --print-inventory [--emulate SPEC | --nvml-lib LIB]\n"
                 "       allot-agent --scrub GPU-UUID [--cuda-lib LIB]\n"
                 "       allot-agent --print-config-example | --help\n\n"
                 "The node agent of allot (docs/agent.md): registers this node's GPUs with "
                 "allotd and\nruns the jobs placed here, isolated in cgroups. Options:\n\n");
    allot_config_help(options, N_OPTIONS, out);
}

static int read_token_file(struct agent_config *c, char *err, size_t errlen)
{
    FILE *f = fopen(c->token_file, "r");
    char line[512];

    if (!f || !fgets(line, sizeof(line), f)) {
        allot_fmt(err, errlen, "--token-file %s: %s", c->token_file, f ? "empty" : strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    return allot_config_set(options, N_OPTIONS, c, "token", line, err, errlen);
}

int main(int argc, char **argv)
{
    static struct agent a;
    struct agent_config *c = &a.cfg;
    char err[512], host[256];
    bool print_inventory = false;
    int i = 1, rc;

    if (argc >= 3 && !strcmp(argv[1], "--scrub")) /* the scrubber (scrub.c) */
        return scrub_main(argc >= 5 && !strcmp(argv[3], "--cuda-lib") ? argv[4] : NULL, argv[2]);
    if (allot_config_defaults(options, N_OPTIONS, c, err, sizeof(err)) < 0) {
        fprintf(stderr, "allot-agent: %s\n", err);
        return 2;
    }
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[k], "--print-config-example")) {
            allot_config_example(options, N_OPTIONS, "allot-agent", stdout);
            return 0;
        }
        if (!strcmp(argv[k], "--print-inventory")) {
            print_inventory = true;
            memmove(&argv[k], &argv[k + 1], (size_t)(argc - k) * sizeof(*argv));
            argc--;
            k--;
        }
    }
    if (allot_config_load_args(options, N_OPTIONS, c, argc, argv, &i, err, sizeof(err)) < 0) {
        fprintf(stderr, "allot-agent: %s\n", err);
        usage(stderr);
        return 2;
    }
    if (i < argc) {
        fprintf(stderr, "allot-agent: unexpected argument \"%s\"\n", argv[i]);
        usage(stderr);
        return 2;
    }
    /* the join token speaks for the node (heartbeats carry other tenants'
     * job specs): hide it from /proc/PID/cmdline now that it is copied */
    bool token_on_argv = allot_argv_hide(argc, argv, "--token") > 0;
    /* --token, then --token-file, then ALLOT_TOKEN: what is given for the
     * agent wins over what its environment happens to carry */
    if ((!c->token || !*c->token) && c->token_file && *c->token_file) {
        if (read_token_file(c, err, sizeof(err)) < 0) {
            fprintf(stderr, "allot-agent: %s\n", err);
            return 2;
        }
        token_from_file = true;
    }
    if ((!c->token || !*c->token) && getenv("ALLOT_TOKEN"))
        allot_config_set(options, N_OPTIONS, c, "token", getenv("ALLOT_TOKEN"), err, sizeof(err));
    if ((!c->token || !*c->token) && !print_inventory) {
        fprintf(stderr, "allot-agent: a join token is required (--token, --token-file or "
                        "ALLOT_TOKEN)\n");
        return 2;
    }
    /* allotd appends the log's path to it, and refuses what would change it */
    if (c->advertise && *c->advertise && !allot_url_base_ok(c->advertise)) {
        fprintf(stderr, "allot-agent: --advertise: want http(s)://HOST[:PORT][/PATH] without a "
                        "query, fragment or user part\n");
        return 2;
    }
    {
        uid_t first, last;
        if (tenant_uid_range(c->tenant_uids, &first, &last, err, sizeof(err)) < 0) {
            fprintf(stderr, "allot-agent: --tenant-uids: %s\n", err);
            return 2;
        }
    }
    if (!c->name || !*c->name) {
        if (gethostname(host, sizeof(host)) < 0)
            allot_strlcpy(host, "node", sizeof(host));
        host[sizeof(host) - 1] = '\0';
        allot_config_set(options, N_OPTIONS, c, "name", host, err, sizeof(err));
    }
    if (log_setup(c->log_file, !strcmp(c->log_format, "json"), c->log_level) < 0) {
        fprintf(stderr, "allot-agent: cannot open log file %s\n", c->log_file);
        return 1;
    }
    if (token_on_argv)
        LOG_WARN("agent", "the join token was given with --token: other users on this node could "
                          "read it in the process list until it was hidden just now; give it "
                          "with --token-file or ALLOT_TOKEN");
    if ((a.n_io = cg_io_parse(c->io_max, a.io, CG_MAX_IO, err, sizeof(err))) < 0 ||
        cg_io_check(a.io, a.n_io, c->sysfs, err, sizeof(err)) < 0) {
        fprintf(stderr, "allot-agent: %s\n", err);
        return 2;
    }
    allot_fmt(a.tasks_dir, sizeof(a.tasks_dir), "%s/tasks", c->state_dir);
    allot_fmt(a.logs_dir, sizeof(a.logs_dir), "%s/logs", c->state_dir);
    /* tasks/ may be passed through (not listed): a fraction's job reaches its
     * shim region in its own task folder, which only its group may enter;
     * logs/ is the agent's alone (it serves them): no job lists which jobs
     * ran here, nor their logs' sizes */
    if ((mkdir(c->state_dir, 0755) < 0 && errno != EEXIST) ||
        (mkdir(a.tasks_dir, 0711) < 0 && errno != EEXIST) || chmod(a.tasks_dir, 0711) < 0 ||
        (mkdir(a.logs_dir, 0700) < 0 && errno != EEXIST) || chmod(a.logs_dir, 0700) < 0) {
        fprintf(stderr, "allot-agent: %s: %s\n", c->state_dir, strerror(errno));
        return 1;
    }
    if (!print_inventory && state_lock(c->state_dir, err, sizeof(err)) < 0) {
        fprintf(stderr, "allot-agent: %s\n", err);
        return 1;
    }
    /* the shim's GPU share folder: the agent's alone (gpushare.c) */
    if (share_setup(c->state_dir, a.tasks_dir) < 0)
        LOG_WARN("agent", "no GPU share folder: jobs on one GPU are each limited alone");
    if (sodium_init() < 0) { /* the node credential's secret and hash */
        fprintf(stderr, "allot-agent: libsodium cannot start\n");
        return 1;
    }
    a.cat = allot_catalog_default(err, sizeof(err));
    if (!a.cat) {
        fprintf(stderr, "allot-agent: GPU catalog: %s\n", err);
        return 1;
    }
    if (c->emulate && *c->emulate) { /* a bad --emulate is a bad option (2), not a node's fault */
        static struct agent_inventory probe;
        if (inventory_parse_emulate(c->emulate, a.cat, &probe, err, sizeof(err)) < 0) {
            fprintf(stderr, "allot-agent: %s\n", err);
            return 2;
        }
    }
    if (inventory_build(c, a.cat, &a.inv, &a.nv, err, sizeof(err)) < 0) {
        fprintf(stderr, "allot-agent: %s\n", err);
        return 1;
    }
    if (print_inventory) {
        /* what would be registered, and the GPUs' health: nothing else */
        json_t *o = json_pack("{s:o,s:o}", "register", inventory_json(c, &a.inv), "health",
                              gpu_health_json(&a));
        json_dumpf(o, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(o);
        nvml_close(a.nv);
        allot_catalog_free((struct allot_catalog *)a.cat);
        allot_config_free(options, N_OPTIONS, c);
        return 0;
    }
    if (a.nv && !strcmp(c->gpu_mode, "mig"))
        nvml_mig_enable_all(a.nv, &a.inv);
    if (!strcmp(c->sharing, "mps") && !strcmp(c->gpu_mode, "shared"))
        mps_start_all(&a);
    a.cg_v2 = cg_detect(err, sizeof(err));
    if (a.cg_v2 < 0)
        LOG_WARN("agent", "%s: tasks cannot be isolated", err);
    if (!strcmp(c->cpu_bind, "cores") && cpubind_init(&a, err, sizeof(err)) < 0) {
        fprintf(stderr, "allot-agent: %s\n", err);
        return 1;
    }
    if (getuid() != 0)
        LOG_WARN("agent", "not running as root: no cgroups, and tasks run as uid %d",
                 (int)getuid());
    else if ((!strcmp(c->run_as, "tenant") || (c->user_map && *c->user_map)) && !proc_per_mount() &&
             !proc_hides_pids())
        LOG_WARN("agent", "/proc is mounted without hidepid and this kernel (before 5.8) cannot "
                          "give each task a /proc of its own: each tenant's jobs see the command "
                          "lines of every process on the node, other tenants' jobs included "
                          "(mount -o remount,hidepid=invisible /proc; docs/agent.md)");
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!strcmp(c->network, "on")) {
        struct net_config nc = {.node = c->name,
                                .underlay = c->underlay_ip,
                                .uplink = c->uplink,
                                .rate = c->uplink_rate,
                                .state_dir = c->state_dir,
                                .dc_nets = c->dc_nets};
        if (getuid() != 0 || !(a.net = net_new(&nc, err, sizeof(err)))) {
            fprintf(stderr, "allot-agent: --network on: %s\n", getuid() != 0 ? "needs root" : err);
            return 1;
        }
    }
    a.driver_mounts = oci_driver_mounts(&a); /* for GPU jobs in images */
    rc = run(&a);
    json_decref(a.driver_mounts);
    net_free(a.net);
    curl_global_cleanup();
    nvml_close(a.nv);
    allot_catalog_free((struct allot_catalog *)a.cat);
    log_close();
    allot_config_free(options, N_OPTIONS, c);
    return rc;
}
