/*
 * allot-agent internals (docs/agent.md): the node inventory (emulated or
 * discovered), per-task cgroups, the task executor with its on-disk
 * bookkeeping, and the client of allotd's agent endpoints.
 *
 * Threading: the loop (main.c) owns the agent's state: its tasks, the
 * desired state, NVML, the sample buffer. One more thread, the sampler
 * (sample.c), takes the usage samples every sample-interval, so that a
 * heartbeat allotd holds (a long poll, a restart) never delays them. They
 * share struct agent under one lock, a->lock: the loop holds it except
 * while it waits on allotd or sleeps, the sampler only while it samples.
 * It is the only lock of the agent's own; the log's lock (log.c) is taken
 * under it, never the other way round. libmicrohttpd's thread (serve.c)
 * and libcurl touch none of it. Each task runs under a small supervisor
 * process the agent forks: the supervisor starts the task's process in
 * its own process group, waits for it and writes how it ended to the
 * task's folder, so the agent itself may be restarted (or killed) at any
 * time and finds every task again from disk.
 */
#ifndef ALLOT_AGENT_H
#define ALLOT_AGENT_H

#include "allot/catalog.h"
#include "allot/cluster.h"
#include "devnode.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AGENT_MAX_GPUS  16
#define NVIDIA_MAJOR    195 /* character major of /dev/nvidiaN and nvidiactl */
#define NVIDIACTL_MINOR 255

#define AGENT_MAX_TASK_VFS  ALLOT_MAX_TASK_RDMA_VFS /* RDMA VFs one task may hold (rdma.h) */
#define AGENT_MAX_TASK_DEVS 32 /* device nodes of a task besides its GPUs (VFs' uverbs) */

/* ---- options (main.c) ---- */

struct agent_config {
    char *config; /* the config file read before the command line */
    char *server; /* allotd URL */
    char *token;  /* agent-role token (or token_file) */
    char *token_file;
    char *name;         /* node name; default: the host name */
    char *state_dir;    /* bookkeeping, logs, emulated devices */
    char *emulate;      /* "2xH100-80GB,1xA100-40GB", or empty: discover */
    char *nvml_lib;     /* NVML library to load (default libnvidia-ml.so.1) */
    char *gpu_mode;     /* exclusive, shared or mig */
    char *cpu_bind;     /* none, or cores: cpusets (cpubind.c) */
    char *labels;       /* the node's labels: KEY=VALUE,... (allot_labels_parse) */
    char *cgroup_root;  /* folder of the tasks' cgroups under each hierarchy */
    char *run_as;       /* default user of jobs; "tenant": one uid per tenant */
    char *tenant_uids;  /* FIRST-LAST: the uids run_as "tenant" gives */
    char *user_map;     /* file: TENANT USER|UID[:GID] [allow-root] */
    char *shim_lib;     /* liballot-cuda.so preloaded into fractional jobs */
    char *sm_share;     /* the shim's compute share: hard or soft (idle time may be used) */
    char *ctx_overhead; /* what each CUDA context counts against a fraction's memory cap */
    char *image_dir;    /* root file systems of the images jobs may name */
    char *cuda_lib;     /* the CUDA driver the scrubber loads */
    char *sharing;      /* how fractions of a GPU are enforced: shim or mps */
    char *mps_control;  /* nvidia-cuda-mps-control */
    bool scrub;         /* clear a GPU's memory before it passes to another tenant */
    bool gpu_mem_watch; /* hold fractions to their GPU memory caps by NVML (sample.c) */
    char *crun;         /* the OCI runtime */
    char *driver_libs; /* more driver libraries the oci executor gives GPU jobs (comma-separated) */
    char *log_file;
    char *log_format;
    char *log_level;
    char *cacert;
    char *listen;       /* the log endpoint's address */
    char *advertise;    /* its URL as allotd should use it; default from listen */
    int64_t cpus_milli; /* 0: all online CPUs */
    int64_t memory;     /* bytes; 0: MemTotal */
    int64_t pids_max;
    int64_t log_max;         /* bytes a task's log may grow to (0: no cap) */
    int64_t log_retention;   /* ms an ended job's logs stay after their last write (0: ever) */
    int64_t tmp_size;        /* bytes of each task's private /tmp and /dev/shm */
    int64_t heartbeat;       /* ms between heartbeats when nothing happens */
    int64_t poll_wait;       /* ms a heartbeat waits for a new desired state */
    int64_t grace;           /* ms between SIGTERM and SIGKILL */
    bool fence;              /* stop every task when allotd is unreachable for a lease */
    int64_t sample_interval; /* ms between usage samples */
    int64_t emulate_util;    /* emulated GPUs: the utilisation they report (-1: none) */
    char *network;           /* on: tenant networks (docs/network.md); off */
    char *underlay_ip;       /* this node's address on the data-centre network */
    char *uplink;            /* interface towards it (default: the one with underlay_ip) */
    char *uplink_rate;       /* its capacity for the tenants' HTB classes ("10Gbit") */
    char *dc_nets;           /* more data-centre prefixes egress nat leaves out */
    char *io_max;            /* every task's block I/O limits (cg_io_parse) */
    char *sysfs;             /* where sysfs is mounted (RDMA inventory and VFs; tests) */
};

/* ---- inventory (inventory.c) ---- */

struct agent_gpu {
    int index;      /* as allotd numbers them: 0.. */
    int nvml_index; /* NVML's index (-1: emulated) */
    int minor;      /* /dev/nvidiaMINOR */
    char model[32]; /* catalog name */
    char uuid[96];
    int64_t mem_mib;
};

struct agent_inventory {
    int n_gpus;
    struct agent_gpu gpus[AGENT_MAX_GPUS];
    int64_t cpu_milli;
    int64_t mem_mib;
    bool emulated;
    int island_size;     /* GPUs per NVLink island; 0: one island (or unknown) */
    char dev_dir[4096];  /* where the GPUs' device nodes are */
    char proc_dir[4096]; /* where the driver's procfs files are read: /proc, or
                            STATE/proc made up for emulated GPUs (migcaps.c) */
};

struct nvml;

/* Builds the inventory: emulated GPUs from cfg->emulate (catalog models,
 * device nodes made in STATE/dev), else the GPUs NVML finds (none when
 * NVML is missing); *nv gets the open NVML (NULL when emulated or
 * missing), kept for MIG and samples. Returns 0 or -1 with a message. */
int inventory_build(const struct agent_config *cfg, const struct allot_catalog *cat,
                    struct agent_inventory *inv, struct nvml **nv, char *err, size_t errlen);
/* Parses an --emulate spec into inv->gpus (no device nodes). */
int inventory_parse_emulate(const char *spec, const struct allot_catalog *cat,
                            struct agent_inventory *inv, char *err, size_t errlen);
/* The GPUs NVML finds (discover.c): fills inv->gpus; none when the NVML
 * library is missing (logged). Returns 0 or -1 with a message. */
int nvml_inventory(const char *lib, const struct allot_catalog *cat, struct agent_inventory *inv,
                   struct nvml **nv, char *err, size_t errlen);
/* Turns MIG mode on for every GPU of inv (gpu-mode mig, NVML): logs what
 * stays pending until a GPU reset. */
void nvml_mig_enable_all(struct nvml *nv, const struct agent_inventory *inv);

/* Gives this agent the MIG layout of its GPUs in MIG mode (gpu-mode mig,
 * NVML), as the scheduler assumes: every GPU instance that no task folder
 * under a->tasks_dir records (made by hand, or by a task whose record is
 * gone) is destroyed. One that cannot be (a process uses it), or any while
 * the records cannot be read (nothing is destroyed on a guess), is named
 * in a->mig_foreign and its GPU reported unhealthy until a later look
 * (mig_foreign_retry) finds the GPU allot's again. Run after the tasks are
 * adopted. */
struct agent;
void mig_reclaim_foreign(struct agent *a);

/* A task's MIG instance (instance gi on NVML GPU nvml_idx) that could not
 * be destroyed (err) when its record went: its GPU is marked as for a
 * foreign instance, so that a later look destroys it. */
void mig_orphan(struct agent *a, int nvml_idx, int gi, const char *err);

/* While a GPU is unhealthy for a MIG instance not allot's (a->mig_foreign):
 * looks again (mig_reclaim_foreign) every five heartbeat intervals from the
 * last look (now: allot_mono_ms), so the GPU comes back once the instance's
 * process ended. */
void mig_foreign_retry(struct agent *a, int64_t now);
/* The POST /v1/nodes/register body (new reference). */
json_t *inventory_json(const struct agent_config *cfg, const struct agent_inventory *inv);
/* The labels of --labels (s; NULL: none) as a JSON object, or NULL with a
 * message in err: a bad label, an allot.io/ key, more than allotd takes. */
json_t *inventory_labels(const char *s, char *err, size_t errlen);

/* ---- cgroups (cgroup.c) ---- */

/* One device rule: character devices of `major`, minor `minor` (-1: any). */
struct dev_rule {
    int major, minor;
};

#define CG_MAX_IO 8 /* block devices --io-max may name */

/* An I/O limit on one block device (--io-max); 0: that one is not limited. */
struct cg_io {
    int major, minor;
    int64_t rbps, wbps;   /* bytes a second read, written */
    int64_t riops, wiops; /* operations a second */
};

struct cg_limits {
    int64_t cpu_milli; /* 0: no quota */
    int64_t mem_bytes; /* 0: no limit */
    int64_t pids_max;  /* 0: no limit */
    /* devices: the task's GPUs (minors) besides the usual ones */
    int n_gpu_minors;
    int gpu_minors[AGENT_MAX_GPUS];
    /* ... and its other device nodes (the uverbs of its RDMA VFs) */
    int n_devs;
    struct dev_rule devs[AGENT_MAX_TASK_DEVS];
    /* its block I/O limits (v2 io.max, v1 blkio throttling) */
    int n_io;
    struct cg_io io[CG_MAX_IO];
};

/* Parses --io-max: entries "DEVICE KEY=VALUE ..." separated by ';', DEVICE
 * a block device (/dev/NAME) or MAJ:MIN, KEY rbps or wbps (bytes a second,
 * with K, M, G or T of 1024) or riops or wiops (operations a second). The
 * limits into out[0..return); -1 with a message naming what is wrong. */
int cg_io_parse(const char *spec, struct cg_io *out, int max, char *err, size_t errlen);
/* Whether each of io[0..n) is a whole disk of this node (SYSFS/dev/block):
 * the kernel refuses partitions and unknown devices for every task. 0, or
 * -1 with a message naming it. */
int cg_io_check(const struct cg_io *io, int n, const char *sysfs, char *err, size_t errlen);

#define CG_MAX_DEV_RULES (16 + AGENT_MAX_GPUS + AGENT_MAX_TASK_DEVS)

/* The devices a task may use, the one list every mechanism applies (v1
 * devices controller, v2 BPF program, the OCI runtime): null, zero, full,
 * random, urandom, tty, ptmx, pts, nvidiactl, nvidia-uvm, the task's own
 * GPUs and its other devices (lim->devs). Everything else is denied.
 * Returns the number of rules. */
int cg_device_rules(const struct cg_limits *lim, struct dev_rule *out);

/* Loads a BPF device program allowing exactly rules[0..n) (character
 * devices, any access) and attaches it to the cgroup v2 folder `dir`.
 * Returns 0 or -1 with a message (devbpf.c). */
int devbpf_attach(const char *dir, const struct dev_rule *rules, int n, char *err, size_t errlen);

/* Detects the cgroup layout (v2 unified, or v1 controllers). Returns 1 for
 * v2, 0 for v1, -1 when none is usable (message in err). */
int cg_detect(char *err, size_t errlen);
/* Creates the cgroup ROOT/NAME with limits (v1: cpu, memory, pids,
 * devices; v2: cpu, memory, pids; a device program is not loaded on v2 yet).
 * Returns 0 or -1 with a message. */
int cg_create(const char *root, const char *name, const struct cg_limits *lim, char *err,
              size_t errlen);
/* --cpu-bind cores, at start: checks the cpuset controller (v2: offered
 * and enabled down to ROOT; v1: mounted), gives ROOT's v1 folder the root
 * cpuset's CPUs and memory nodes, and writes the CPUs tasks may use
 * ("0-3,8") into cpus. 0, or -1 with a message. */
int cg_cpuset_init(const char *root, char *cpus, size_t len, char *err, size_t errlen);
/* Gives ROOT/NAME (made by cg_create) the cpuset `cpus` ("0-3,8"): v1 a
 * folder in the cpuset hierarchy (made when `create`), v2 cpuset.cpus.
 * Without `create`, a task whose cgroup is gone is left alone (0). 0, or
 * -1 with a message. */
int cg_cpuset(const char *root, const char *name, const char *cpus, bool create, char *err,
              size_t errlen);
/* Moves process pid into ROOT/NAME (every hierarchy). 0 or -errno. */
int cg_enter(const char *root, const char *name, pid_t pid);
/* OOM kills seen in ROOT/NAME (0 when unknown). */
int64_t cg_oom_kills(const char *root, const char *name);
/* CPU time (ns) and memory in use (bytes) of ROOT/NAME; -1 when unknown. */
void cg_usage(const char *root, const char *name, int64_t *cpu_ns, int64_t *mem_bytes);
/* The pids in the task's cgroup, at most max into out; the count. */
int cg_pids(const char *root, const char *name, int *out, int max);
/* Calls fn(pid, arg) for every process in task `name`'s cgroup, however
 * many (a job cannot hide one past a count). */
void cg_each_pid(const char *root, const char *name, void (*fn)(int pid, void *arg), void *arg);
/* Kills every process in ROOT/NAME and waits (bounded, about 2 s per
 * hierarchy) until none is left: cgroup.kill on v2, the v1 freezer when
 * the task has a folder there, else cgroup.procs read and SIGKILLed until
 * empty. Returns 0 when none is left, -1 when some still were. */
int cg_kill(const char *root, const char *name);
/* cg_kill, then removes ROOT/NAME in every hierarchy. */
void cg_destroy(const char *root, const char *name);
/* Removes the agent's own cgroup folder (root) in each hierarchy where it is
 * empty: an agent that stops with no task leaves nothing behind. */
void cg_remove_root(const char *root);

/* ---- tasks (task.c) ---- */

/* A character device a task gets besides its GPUs. */
struct task_dev {
    int major, minor;
    int mode;      /* its file mode in a container */
    char path[48]; /* as the task sees it: /dev/infiniband/uverbsN, /dev/nvidia-caps/nvidia-capN */
};

/* ---- MIG capability devices (migcaps.c) ---- */

/* The major an emulated node gives nvidia-caps (no driver registers it). */
#define MIGCAPS_EMU_MAJOR 4000

/* The minor, in the driver's mig-minors table at `table` (lines
 * "gpuG/giI/access MINOR" and "gpuG/giI/ciC/access MINOR"; G is the GPU's
 * /dev/nvidiaG minor), of GPU instance gi (ci < 0) or of its compute
 * instance ci. Returns the minor, ALLOT_ENOENT when the table has no such
 * line, or ALLOT_EIO when it cannot be read. */
int migcaps_minor(const char *table, int gpu, int gi, int ci);

/* The capability devices a task on MIG instance (gi, ci) of the GPU of
 * minor gpu needs, and only those: out[0] its GPU instance's access,
 * out[1] its compute instance's (ci < 0: none; returns how many). proc and
 * sysfs are where procfs and sysfs are read (PROC/devices,
 * PROC/driver/nvidia-caps/mig-minors,
 * SYSFS/module/nvidia/parameters/nv_cap_enable_devfs). Refused (-1 with
 * why) when the driver checks MIG access through /proc
 * (nv_cap_enable_devfs=0: any task given the GPU could open every
 * instance on it), has no nvidia-caps device, or lists no such instance. */
int migcaps_devs(const char *proc, const char *sysfs, int gpu, int gi, int ci,
                 struct task_dev out[2], char *why, size_t wlen);

/* Makes d's node as DEV_DIR/nvidia-caps/nvidia-capN when it is missing or
 * wrong, readable by all as the driver makes it: the task's device rules
 * decide who may open it. 0 or -errno. */
int migcaps_mknod(const char *dev_dir, const struct task_dev *d);

/* An emulated node's made-up procfs (ROOT/devices with nvidia-caps at
 * MIGCAPS_EMU_MAJOR, ROOT/driver/nvidia-caps/mig-minors laid out as the
 * driver's) for the GPUs of minors gpus[0..n). 0 or -errno. */
int migcaps_emulate(const char *root, const int *gpus, int n);

enum task_state {
    TASK_STARTING = 0, /* supervisor forked, not yet seen running */
    TASK_RUNNING,
    TASK_STOPPING, /* SIGTERM sent, SIGKILL at kill_at */
    TASK_EXITED,   /* ended; exit_code / signal / detail tell how */
    TASK_LOST,     /* its process vanished without a word (agent restart) */
};

/* ---- CPU binding (cpubind.c, --cpu-bind cores) ---- */

#define CPUBIND_MAX   1024 /* CPUs numbered below it */
#define CPUBIND_WORDS (CPUBIND_MAX / 64)

enum cpu_bind {
    CPU_BIND_NONE = 0, /* no cpuset: --cpu-bind none, or no cgroups */
    CPU_BIND_SHARED,   /* the shared pool: the node's CPUs no task has alone */
    CPU_BIND_CORES,    /* whole cores of its own (t->cpus) */
};

struct task {
    int64_t job;
    int index;
    char key[48]; /* "JOB-INDEX": folder and cgroup name */
    int state;    /* enum task_state */
    pid_t sup;    /* supervisor (our child while we live), 0 when adopted */
    pid_t pid;    /* the task's process (and process group) */
    int64_t started_ms, kill_at_ms;
    int exit_code; /* when EXITED: the exit status, or 128 + signal */
    char detail[160];
    bool reported_running, reported_end;
    bool cancelled;         /* stopped because allotd no longer wants it */
    bool fenced;            /* stopped by the agent itself: allotd was out of reach for most of
                               the lease (the marker file `fenced` keeps it across restarts) */
    int64_t run;            /* which run of its job (allotd's "run": the run's start time) */
    int64_t sig_seq;        /* the last signal request sent to it (task_signal), 0: none */
    unsigned gpu_mask;      /* its GPUs (inventory indices) */
    int64_t runtime_ms;     /* how long its process ran (-1: unknown) */
    uint64_t shim_busy_ns;  /* a fraction: GPU time its shim region counted at the last sample */
    uint64_t shim_launches; /* ... and kernel launches */
    int64_t shim_at_ms;     /* ... and when (monotonic; 0: none yet) */
    bool net;               /* runs in its network namespace allot-KEY (net.h) */
    int mps_gpu;            /* an MPS client of this GPU's daemon (--sharing mps); -1: none */
    int mem_cap_gpu;        /* a fraction: its GPU (inventory index), -1: none */
    int64_t mem_cap;        /* ... its GPU memory cap, bytes, held from outside (sample.c) */
    char over[160];         /* why the agent stopped it (over its GPU memory cap), or "" */
    int n_vfs;              /* RDMA VFs it holds while it starts, runs or stops (rdma.h) */
    char vfs[AGENT_MAX_TASK_VFS][32]; /* ... their PCI addresses */
    int n_devs;
    struct task_dev devs[AGENT_MAX_TASK_DEVS]; /* their uverbs device nodes */
    int cpu_bind;                              /* enum cpu_bind (--cpu-bind cores; cpubind.c) */
    uint64_t cpus[CPUBIND_WORDS];              /* CPU_BIND_CORES: the cores it has alone */
};

struct agent;

/* Who a task runs as (task.c resolves it from the user map / run-as). */
struct run_user {
    uid_t uid;
    gid_t gid;
    char name[64], home[256];
};

/* Start time of process pid in clock ticks since boot (field 22 of
 * /proc/PID/stat), or -1 when it does not exist: with the pid it names a
 * process, so a recycled pid is not mistaken for the task. */
long long task_proc_start(pid_t pid);

/* ---- the task's supervisor and process (supervise.c) ---- */

/* In the supervisor, just forked by the agent: starts argv (envp) as the
 * task t (folder dir) as user u in workdir (NULL: u's home), its output
 * appended to log_fd up to --log-max, waits for it (fencing it when the
 * agent's fence deadline passed), kills what is left in its cgroup and
 * writes the exit file. Never returns. */
void task_supervisor(const struct agent *a, const struct task *t, const char *dir, char **argv,
                     char **envp, const struct run_user *u, const char *workdir, int log_fd)
    __attribute__((noreturn));

/* Starts the task described by desired-state entry d (borrowed). On a
 * failure that is the job's (no command, user refused) the task exists in
 * state EXITED with a detail. Returns 0 then, 1 when it must wait for a GPU
 * or RDMA VFs that stopping tasks still hold (nothing done; t is not a
 * task yet: try again later), -1 when the agent itself failed. */
/* Parses --tenant-uids ("FIRST-LAST", 1 <= FIRST <= LAST < 2^32 - 1).
 * Returns 0, or -1 with the reason in why. */
int tenant_uid_range(const char *s, uid_t *first, uid_t *last, char *why, size_t len);

int task_start(struct agent *a, json_t *d, struct task *t);
/* SIGTERM to the task's process group; SIGKILL after grace_ms (< 0: the
 * agent's --grace). */
void task_stop(struct agent *a, struct task *t, int64_t now_ms, int64_t grace_ms);
/* Sends the task's process group the signals of its desired state's
 * "signals" ([{"seq", "sig"}], allot signal) it has not sent yet, in
 * order, once its process is known; the last one sent is kept in its
 * folder (`signalled`), so that a restarted agent sends none twice. */
void task_signal(struct agent *a, struct task *t, const json_t *signals);
/* Stops a task on the agent's own account (allotd out of reach for most of
 * the lease, which ends at end_ms), and records so: the task is reported
 * lost and fenced, so that allotd queues its job again, and it is never
 * started again. Its grace is task_fence_grace's. */
void task_fence(struct agent *a, struct task *t, int64_t now_ms, int64_t end_ms);
/* The grace of a task fenced at now_ms when the node's lease ends at
 * end_ms: the agent's --grace, cut so that the task's processes are gone
 * FENCE_MARGIN_MS before allotd counts the node lost and queues its jobs
 * again (else a job could run twice); 0 when that time has passed. */
int64_t task_fence_grace(const struct agent *a, int64_t now_ms, int64_t end_ms);
#define FENCE_MARGIN_MS 2000
/* The monotonic time (allot_mono_ms) from which the agent fences its tasks:
 * four fifths of the lease after its last answered heartbeat was sent
 * (last_ok); 0 with --no-fence. */
#define FENCE_AT(a, last_ok, lease) ((a)->cfg.fence ? (last_ok) + (lease)*4 / 5 : 0)
/* Writes STATE/fence-at: FENCE_AT, then the lease's end (last_ok + lease),
 * when allotd counts the node lost unless it hears from it; 0 for never.
 * Each task's supervisor fences its task a second after the first passed:
 * so a task never outlives its node's lease while its agent is down. */
void task_fence_deadline(const struct agent *a, int64_t last_ok, int64_t lease);
/* Whether the task's processes may still be there (starting, running or
 * stopping). */
bool task_alive(const struct task *t);
/* Notices how the task is doing (exit file, vanished process, kill due). */
void task_poll(struct agent *a, struct task *t, int64_t now_ms);
/* Removes the task's folder and cgroup (after its end was reported). */
void task_forget(struct agent *a, struct task *t);
/* Reads STATE/gpu-tenants (`GPU TENANT [mixed]` lines) into a->last_tenant
 * and a->gpu_mixed (nothing when missing). */
void scrub_load(struct agent *a);
/* Finds the tasks left on disk by an earlier agent: *out (allot_free),
 * each RUNNING, EXITED or LOST. Returns the count or -1. */
int task_adopt_all(struct agent *a, struct task **out);

/* ---- the GPU share folder (gpushare.c) ---- */

/* Makes STATE/gpushare the agent's folder (0755, nobody else may write
 * it): an older agent's (sticky, open to all) or anything else there is
 * moved aside and removed; entries of tasks without a folder in tasks_dir
 * are removed. Returns 0, or -1 after a warning (jobs on one GPU are then
 * each limited alone). */
int share_setup(const char *state_dir, const char *tasks_dir);
/* Writes the entry of task key (desired-state entry d, borrowed; its job
 * runs as uid:gid) in its GPU's share folder: the agent's KEY.job (weight,
 * ceiling, uid) and the job's KEY.seen. Returns 0 or -1 with why. */
int share_task_add(const struct agent *a, const char *key, json_t *d, uid_t uid, gid_t gid,
                   char *why, size_t len);
/* Removes task t's entries from the folders of its GPUs (no error: what
 * is not there is gone). */
void share_task_remove(const struct agent *a, const struct task *t);

/* The GPU (inventory index) of a task on a fraction of one GPU (less than
 * all of its compute or memory, not a MIG slice), which the shim or MPS
 * enforce; -1 for any other task. d: its desired entry; *part_mem (may be
 * NULL): whether it has less than all of the GPU's memory. */
int task_fraction_gpu(const struct agent *a, json_t *d, bool *part_mem);

/* Starts one MPS control daemon per GPU (--sharing mps): folders
 * STATE/mps/GPU/{pipe,log}, the GPU by UUID. As root the daemon (and the
 * servers it starts) runs in a mount namespace of its own whose /dev/shm
 * is STATE/mps-shm/GPU (a tmpfs of --tmp-size made there once, in a folder
 * only the agent may enter), which the GPU's MPS tasks get as their
 * /dev/shm too (mps_shm_dir). Logs failures. */
void mps_start_all(const struct agent *a);
/* STATE/mps-shm/GPU into buf. */
void mps_shm_dir(const struct agent *a, int gpu, char *buf, size_t len);

/* A fraction's shim region, below its task folder: in a tmpfs of its own
 * (TASK_REGION_FS bytes, mode 0700, the job's uid), so that a job that
 * grows its region fills that and nothing else of the node, and no other
 * job (another tenant's user of the same group) may open it. */
#define TASK_REGION_DIR "shim"
#define TASK_REGION     TASK_REGION_DIR "/region"
#define TASK_REGION_FS  (512 << 10)

/* STATE/jobfs/JOB/WHICH ("tmp" or "shm"; NULL: the job's folder) into buf:
 * the tmpfs a job's tasks of the process executor on this node share as
 * /tmp and /dev/shm (made before its first task starts, removed after its
 * last is forgotten). */
void jobfs_dir(const struct agent *a, int64_t job, const char *which, char *buf, size_t len);
/* Removes the folders of jobs without a task here (after adoption). */
void jobfs_sweep(const struct agent *a);
/* Whether a task of job `job` is in the agent's list (running, stopping,
 * or ended and not yet forgotten). */
bool agent_has_job(const struct agent *a, int64_t job);

/* ---- log retention (logs_gc.c) ---- */

/* Removes STATE/logs/JOB of every job without a task here whose logs were
 * last written more than --log-retention before now_s (unix seconds).
 * Returns how many folders went. */
int logs_sweep(const struct agent *a, int64_t now_s);
/* Makes job's log folder (STATE/logs/JOB) the one of `owner` (its tenant
 * and user): a folder another owner's job left there (the same id given
 * again, after allotd's store was restored from a backup) loses its logs
 * first. Returns 0 or -1 (errno). */
int logs_claim(const struct agent *a, int64_t job, const char *owner);
/* Milliseconds between two sweeps: a tenth of the retention, between a
 * second and an hour. */
int64_t logs_sweep_every(const struct agent *a);

/* ---- memory scrubbing (scrub.c) ---- */

/* `allot-agent --scrub UUID`: clears the free memory of that GPU through
 * the CUDA driver `lib`. Prints what it did; returns the exit status. */
int scrub_main(const char *lib, const char *uuid);

/* ---- the oci executor (oci.c) ---- */

/* The bind mounts (new reference) of the driver's libraries the node has
 * (NVIDIA's, from the usual library folders, and those of --driver-libs)
 * into /usr/local/nvidia/lib64 of a GPU job's container: looked up once,
 * at the agent's start (a driver changes only with a restart). */
json_t *oci_driver_mounts(const struct agent *a);

/* Writes the OCI bundle of task t (desired entry d) into DIR/bundle: the
 * image's root file system, user uid:gid, environment envp, working
 * directory, the task's GPU devices and cgroup. bundle gets its path.
 * Returns 0 or -1 with the reason (the job's: no such image...). */
int oci_bundle(const struct agent *a, json_t *d, const struct task *t, const char *dir, uid_t uid,
               gid_t gid, char **envp, const char *workdir, char *bundle, size_t blen, char *why,
               size_t wlen);

/* ---- the log endpoint (serve.c) ---- */

struct serve;
struct sockaddr_in;
/* listen ("IPV4:PORT", port 0..65535) into *sa. 0, or ALLOT_EINVAL with
 * err naming the problem (the --listen option's check too). */
int serve_parse_listen(const char *listen, struct sockaddr_in *sa, char *err, size_t errlen);
/* Starts it on listen ("ADDR:PORT"; port 0: any); url gets what allotd
 * should call, key the bearer it must present. NULL on failure. */
struct serve *serve_start(const char *listen, const char *logs_dir, char *url, size_t urllen,
                          char *key, size_t keylen);
void serve_stop(struct serve *s);

/* ---- the agent (main.c) ---- */

struct agent {
    struct agent_config cfg;
    struct agent_inventory inv;
    struct nvml *nv; /* open NVML, or NULL (emulated, or no NVML) */
    const struct allot_catalog *cat;
    int cg_v2; /* 1: unified, 0: v1, -1: no cgroups (refuses to start tasks) */
    char tasks_dir[4096], logs_dir[4096];
    struct task *tasks;
    size_t n_tasks, cap_tasks;
    json_t *desired;       /* owned: the last desired state allotd sent */
    json_t *driver_mounts; /* owned: oci_driver_mounts, found at start */
    /* per GPU, the Xid errors NVML reported since the agent started */
    char xids[AGENT_MAX_GPUS][96];
    bool xid_fatal[AGENT_MAX_GPUS];
    /* per GPU in MIG mode, why a MIG instance no task of this agent holds
     * is left on it ("" when none is): the GPU is reported unhealthy */
    char mig_foreign[AGENT_MAX_GPUS][200];
    int64_t mig_retry_at; /* allot_mono_ms when mig_foreign_retry tries again */
    /* per GPU, the tenant whose job last had it (STATE/gpu-tenants) */
    char last_tenant[AGENT_MAX_GPUS][256];
    /* a GPU more than one tenant used since it was last cleared (a shared
     * GPU): cleared before its next task of any tenant, when it is free */
    bool gpu_mixed[AGENT_MAX_GPUS];
    json_t *samples;    /* owned: usage samples not yet acknowledged by allotd */
    int64_t sampled_ms; /* monotonic time of the last samples taken */
    /* the sampler thread (sample.c) and the lock it shares with the loop:
     * every field of struct agent the loop changes after start is read or
     * written under `lock` once the sampler runs */
    pthread_mutex_t lock;
    pthread_cond_t sampler_wake; /* signalled to stop the sampler (with lock) */
    pthread_t sampler;
    bool sampler_on;   /* started, not yet joined (loop thread only) */
    bool sampler_quit; /* asks it to end (under lock) */
    struct net *net;   /* owned: tenant networks (--network on), or NULL */
    int n_io;          /* --io-max, parsed: every task's block I/O limits */
    struct cg_io io[CG_MAX_IO];
    uint64_t cpu_allowed[CPUBIND_WORDS]; /* --cpu-bind cores: the CPUs tasks may use */
    uint64_t cpu_pool[CPUBIND_WORDS];    /* ... the shared pool as last given */
};

/* The node's GPU health for the heartbeat (discover.c): per GPU its
 * verdict, the reasons and its MIG instances; from NVML, or for emulated
 * GPUs healthy with the instances of the MIG tasks placed here. */
json_t *gpu_health_json(struct agent *a);

/* ---- usage samples (sample.c) ---- */

/* Initialises a->lock and starts the sampler thread, which every
 * sample-interval takes a->lock and appends one sample per running task
 * (one whose exit is not written yet) to a->samples: CPU time and memory
 * from its cgroup; for GPUs it has to itself, their utilisation (mean),
 * memory and energy (sums) from NVML or the emulated utilisation; for a
 * fraction what its shim region counted. At most 2,880 are kept (oldest
 * dropped). Call from the loop's thread without a->lock.
 * Returns 0, or -1 (logged) when the thread cannot be made. */
int sampler_start(struct agent *a);
/* Stops the sampler and waits for it (bounded: it ends at its next look
 * at the clock); then destroys a->lock. Call without a->lock; a sampler
 * never started is a no-op. */
void sampler_stop(struct agent *a);
/* The oldest buffered samples, at most max, for a heartbeat: a new array
 * (the caller owns it) holding references to them. Call with a->lock. */
json_t *samples_batch(struct agent *a, size_t max);
/* allotd stored `batch` (borrowed, from samples_batch): drops those of
 * its samples still buffered (the sampler may have dropped the oldest
 * meanwhile, and appended new ones: those stay). Call with a->lock. */
void samples_acked(struct agent *a, json_t *batch);

/* ---- client (client.c) ---- */

struct agent_client;

struct agent_client *client_new(const char *server, const char *token, const char *cacert);
void client_free(struct agent_client *c);
/* Speaks with token as bearer from the next request on. 0 or ALLOT_ENOMEM
 * (the old token stays). */
int client_set_token(struct agent_client *c, const char *token);
/* POST path with body (borrowed); *reply gets the parsed JSON (may be
 * NULL). Returns the HTTP status, or -1 when no answer came (message in
 * err). timeout_ms bounds the whole request: with several allotd URLs,
 * every one tried in it (each but the last at most its even share, so a
 * silent one leaves the others time). */
long client_post(struct agent_client *c, const char *path, json_t *body, int64_t timeout_ms,
                 json_t **reply, char *err, size_t errlen);
/* How many allotd URLs the client was given (--server). */
int client_servers(const struct agent_client *c);

/* ---- a task's MIG instance (task_mig.c) ---- */

/* The MIG instance of a task placed on a slice (desired entry d, task
 * folder dir): with NVML it is created now, at the placement the scheduler
 * chose, and recorded in dir's `mig` file (a task whose record cannot be
 * written fails, its instance destroyed: unrecorded, the agent's next
 * start would destroy it under the task); an emulated GPU's instance only
 * gets a UUID made from the GPU, profile and start, and instance ids
 * (start + 1, 0) for its capability devices. uuid gets "" for a task
 * without MIG; *gi and *ci its GPU and compute instance ids. Returns 0 or
 * -1 with why. */
int task_mig_prepare(struct agent *a, json_t *d, const char *dir, char *uuid, size_t len, int *gi,
                     int *ci, char *why, size_t wlen);
/* Gives task t the capability devices of its MIG instance (gi, ci) on
 * GPU g, and only those (migcaps.c): appended to t->devs, made under the
 * node's device folder, their paths added to devs (ALLOT_GPU_DEVICES).
 * 0 or -1 with why. */
int task_mig_caps_give(struct agent *a, struct task *t, int g, int gi, int ci, char *devs,
                       size_t dlen, char *why, size_t wlen);
/* Destroys the MIG instance the task of folder dir made, if any. */
void task_mig_release(struct agent *a, const char *dir);

/* ---- CPU binding (cpubind.c) ---- */

/* --cpu-bind cores: reads the CPUs the node's tasks may use (the root
 * cpuset's, else the online CPUs) into a->cpu_allowed. 0, or -1 with a
 * message. */
int cpubind_init(struct agent *a, char *err, size_t errlen);
/* Binds new task t (its cgroup made) asking cpu_milli: a task of whole
 * CPUs gets that many cores of its own, if as many are free and one is
 * left to the shared pool; any other task, or one that finds too few,
 * the shared pool (the shared tasks' cpusets shrink first). Records the
 * binding in the task folder dir ("cpus"). 0, or -1 with a message. */
int cpubind_task(struct agent *a, struct task *t, int64_t cpu_milli, const char *dir, char *why,
                 size_t wlen);
/* Reads back the binding of an adopted task from its folder. */
void cpubind_adopt(struct task *t, const char *dir);
/* Gives every live task of the shared pool the pool as it is now (after a
 * task with cores of its own ended). */
void cpubind_refresh(struct agent *a);
/* "0-3,8" of a CPU set, into buf. */
void cpubind_list(const uint64_t *set, char *buf, size_t len);
/* The cores task t has of its own ("2-3") into buf, for its environment
 * (ALLOT_CPU_CORES); false (buf "") when it runs in the shared pool. */
bool cpubind_own(const struct task *t, char *buf, size_t len);
/* Parses "0-3,8" into set (CPUBIND_WORDS words); 0, or -1 when malformed. */
int cpubind_parse(const char *s, uint64_t *set);

#endif
