/*
 * The process executor. A task is a folder STATE/tasks/JOB-INDEX holding
 * task.json (its desired-state entry), pid ("SUPERVISOR PID STARTTICKS",
 * written by the supervisor) and, once the process ended, exit ("exit N"
 * or "signal N"). The agent forks a supervisor per task; the supervisor
 * starts the task's process (its own process group, the task's cgroup,
 * the mapped user, stdout and stderr to STATE/logs/JOB/task-INDEX.log),
 * waits for it and writes the exit file. So an agent restarted while tasks
 * run reads their folders back (task_adopt_all): a live process is adopted
 * where it runs, an ended one is reported with its status, and one that
 * vanished without an exit file is reported lost. A task's RDMA VFs
 * (rdma.h) are recorded in its folder too (rdma.json) before it starts,
 * and freed when its process ends, it fails to start or it is forgotten.
 */
#include "agent.h"
#include "net.h"
#include "rdma.h"

#include "allot/common.h"
#include "log.h"
#include "nvml.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void task_dir(const struct agent *a, const struct task *t, char *buf, size_t len)
{
    allot_fmt(buf, len, "%s/%s", a->tasks_dir, t->key);
}

/* Start time of process pid in clock ticks since boot (field 22 of
 * /proc/PID/stat), or -1 when it does not exist: with the pid it names a
 * process, so a recycled pid is not mistaken for the task. */
long long task_proc_start(pid_t pid)
{
    char path[64], buf[1024], *p;
    long long start = -1;
    FILE *f;

    allot_fmt(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return -1;
    if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')'))) {
        /* after the command: state is field 3; start time field 22 */
        int field = 2;
        for (p++; *p && field < 22; p++)
            if (*p == ' ')
                field++;
        start = strtoll(p, NULL, 10);
    }
    fclose(f);
    return start;
}

/* The GPUs (inventory indices) desired-state entry d places its task on. */
static unsigned gpu_mask_of(const struct agent *a, json_t *d)
{
    unsigned mask = 0;
    json_t *x;
    size_t i;

    json_array_foreach(json_object_get(d, "gpus"), i, x)
    {
        json_int_t idx = json_integer_value(x);
        if (idx >= 0 && idx < a->inv.n_gpus)
            mask |= 1u << idx;
    }
    return mask;
}

/* ---- who the task runs as ---- */

/* Parses a whole decimal id; false when s is not one. */
static bool parse_id(const char *s, unsigned long *id)
{
    char *end;

    if (!*s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    *id = strtoul(s, &end, 10);
    return *end == '\0' && errno == 0 && *id <= UINT32_MAX - 1;
}

/* who is USER or USER:GROUP, each a name or a number. A user name must
 * exist on this node; a number need not (its group is then the same
 * number). Returns 0, or -1 when a name is unknown or a part is empty. */
static int lookup_user(const char *who, struct run_user *u)
{
    char user[128], *group;
    struct passwd *pw;
    unsigned long id = 0;
    bool numeric;

    allot_strlcpy(user, who, sizeof(user));
    group = strchr(user, ':');
    if (group)
        *group++ = '\0';
    if (!*user || (group && !*group))
        return -1;
    numeric = parse_id(user, &id);
    pw = numeric ? getpwuid((uid_t)id) : getpwnam(user);
    if (!pw && !numeric)
        return -1;
    u->uid = pw ? pw->pw_uid : (uid_t)id;
    u->gid = pw ? pw->pw_gid : (gid_t)id;
    if (group) {
        struct group *gr;

        if (parse_id(group, &id)) {
            u->gid = (gid_t)id;
        } else if ((gr = getgrnam(group)) != NULL) {
            u->gid = gr->gr_gid;
        } else {
            return -1;
        }
    }
    allot_strlcpy(u->name, pw ? pw->pw_name : user, sizeof(u->name));
    allot_strlcpy(u->home, pw && pw->pw_dir ? pw->pw_dir : "/", sizeof(u->home));
    return 0;
}

int tenant_uid_range(const char *s, uid_t *first, uid_t *last, char *why, size_t len)
{
    char a[16], b[16];
    unsigned long lo, hi;
    const char *dash = s ? strchr(s, '-') : NULL;

    if (!dash || (size_t)(dash - s) >= sizeof(a) || strlen(dash + 1) >= sizeof(b)) {
        allot_fmt(why, len, "\"%s\": expected FIRST-LAST", s ? s : "");
        return -1;
    }
    memcpy(a, s, (size_t)(dash - s));
    a[dash - s] = '\0';
    allot_strlcpy(b, dash + 1, sizeof(b));
    if (!parse_id(a, &lo) || !parse_id(b, &hi) || lo < 1 || hi < lo) {
        allot_fmt(why, len, "\"%s\": expected FIRST-LAST, whole numbers, 1 <= FIRST <= LAST < %lu",
                  s, (unsigned long)UINT32_MAX - 1);
        return -1;
    }
    *first = (uid_t)lo;
    *last = (uid_t)hi;
    return 0;
}

/* The uid of tenant `tenant` under --run-as tenant: the one recorded in
 * STATE/tenant-uids, else the one a hash of the path picks in the range
 * (the next free one when another tenant holds it), then recorded. The
 * file is held under flock; it only grows. Returns 0 or -1 with why. */
static int tenant_uid(const struct agent *a, const char *tenant, uid_t *out, char *why, size_t len)
{
    char path[4200], line[512], name[300];
    unsigned long id, span;
    uid_t first, last, pick;
    uid_t *held = NULL;
    size_t n = 0, cap = 0;
    bool found = false;
    FILE *f;
    int fd, rc = -1;

    if (!*tenant) {
        allot_fmt(why, len, "the job names no tenant to give a uid (--run-as tenant)");
        return -1;
    }
    if (tenant_uid_range(a->cfg.tenant_uids, &first, &last, why, len) < 0)
        return -1;
    allot_fmt(path, sizeof(path), "%s/tenant-uids", a->cfg.state_dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) < 0 || !(f = fdopen(fd, "r+"))) {
        allot_fmt(why, len, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    while (!found && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%lu %299s", &id, name) != 2)
            continue;
        if (!strcmp(name, tenant)) {
            *out = (uid_t)id;
            found = true;
        } else if (allot_grow((void **)&held, &cap, n + 1, sizeof(*held)) == 0) {
            held[n++] = (uid_t)id;
        }
    }
    if (found) {
        rc = 0;
        goto out;
    }
    span = (unsigned long)(last - first) + 1;
    pick = first + (uid_t)(allot_fnv1a(ALLOT_FNV1A_INIT, tenant, strlen(tenant)) % span);
    for (unsigned long tries = 0; tries < span; tries++) {
        bool taken = false;
        for (size_t i = 0; i < n && !taken; i++)
            taken = held[i] == pick;
        if (!taken) {
            if (fseek(f, 0, SEEK_END) != 0 ||
                fprintf(f, "%lu %s\n", (unsigned long)pick, tenant) < 0 || fflush(f) != 0) {
                allot_fmt(why, len, "%s: %s", path, strerror(errno));
                goto out;
            }
            *out = pick;
            rc = 0;
            goto out;
        }
        pick = pick == last ? first : pick + 1;
    }
    allot_fmt(why, len, "--tenant-uids %s: every uid is taken", a->cfg.tenant_uids);
out:
    allot_free(held);
    fclose(f); /* closes fd and drops the lock */
    return rc;
}

/* The user a job runs as: the user map's line for its submitting user
 * ("@ID USER [allow-root]", ID the submitting user allotd sends: TENANT:NAME
 * for a token scoped to a tenant, else the token's NAME), else
 * for its tenant ("TENANT USER[:GID] [allow-root]", the longest tenant
 * prefix wins), else run-as. Root only where the line that applies says
 * allow-root. Returns 0 or -1 with the reason in why. */
static int resolve_user(const struct agent *a, const char *tenant, const char *submitter,
                        struct run_user *u, char *why, size_t len)
{
    char line[512], best[128] = "", who[128];
    size_t best_len = 0;
    bool allow_root = false, by_user = false;
    FILE *f = a->cfg.user_map && *a->cfg.user_map ? fopen(a->cfg.user_map, "r") : NULL;

    allot_strlcpy(who, a->cfg.run_as, sizeof(who));
    while (f && fgets(line, sizeof(line), f)) {
        char t[256], usr[128], flag[32] = "";
        int n = sscanf(line, "%255s %127s %31s", t, usr, flag);
        size_t tl = strlen(t);

        if (n < 2 || t[0] == '#')
            continue;
        if (t[0] == '@') {
            if (*submitter && !strcmp(t + 1, submitter) && !by_user) {
                by_user = true;
                best_len = SIZE_MAX;
                allot_strlcpy(best, usr, sizeof(best));
                allow_root = n == 3 && !strcmp(flag, "allow-root");
            }
            continue;
        }
        if (!by_user && (!strcmp(t, tenant) || (!strncmp(tenant, t, tl) && tenant[tl] == '/')) &&
            tl > best_len) {
            best_len = tl;
            allot_strlcpy(best, usr, sizeof(best));
            allow_root = n == 3 && !strcmp(flag, "allow-root");
        }
    }
    if (f)
        fclose(f);
    if (best_len)
        allot_strlcpy(who, best, sizeof(who));
    if (!strcmp(who, "tenant")) {
        /* a uid and group of its own per tenant, known to no passwd */
        uid_t id;
        if (tenant_uid(a, tenant, &id, why, len) < 0)
            return -1;
        allot_fmt(who, sizeof(who), "%lu", (unsigned long)id);
    }
    if (lookup_user(who, u) < 0) {
        allot_fmt(why, len, "no user or group \"%s\" on this node (run-as / user-map)", who);
        return -1;
    }
    if (getuid() != 0) {
        /* an unprivileged agent can only run tasks as itself */
        struct run_user self;
        char me[32];
        allot_fmt(me, sizeof(me), "%d", (int)getuid());
        lookup_user(me, &self);
        *u = self;
    }
    if (u->uid == 0 && !allow_root) {
        allot_fmt(why, len, "refusing to run tenant %s's job as root (user-map has no allow-root)",
                  tenant);
        return -1;
    }
    return 0;
}

/* ---- environment ---- */

struct env {
    char **v;
    size_t n, cap;
};

static void env_set(struct env *e, const char *k, const char *val)
{
    size_t kl = strlen(k), len = kl + strlen(val) + 2;
    char *s = allot_malloc(len);

    if (!s)
        return;
    allot_fmt(s, len, "%s=%s", k, val);
    for (size_t i = 0; i < e->n; i++)
        if (!strncmp(e->v[i], k, kl) && e->v[i][kl] == '=') {
            allot_free(e->v[i]);
            e->v[i] = s;
            return;
        }
    if (allot_grow((void **)&e->v, &e->cap, e->n + 2, sizeof(*e->v)) < 0) {
        allot_free(s);
        return;
    }
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
}

/* The value of K in e, or "". */
static const char *env_get(const struct env *e, const char *k)
{
    size_t kl = strlen(k);

    for (size_t i = 0; i < e->n; i++)
        if (!strncmp(e->v[i], k, kl) && e->v[i][kl] == '=')
            return e->v[i] + kl + 1;
    return "";
}

static void env_free(struct env *e)
{
    for (size_t i = 0; i < e->n; i++)
        allot_free(e->v[i]);
    allot_free(e->v);
}

/* A fraction's GPU and memory cap, which the sampler holds it to (sample.c),
 * from its desired state d (also as kept in task.json, when adopted). */
static void mem_cap_of(const struct agent *a, json_t *d, struct task *t)
{
    t->mem_cap_gpu = task_fraction_gpu(a, d, NULL);
    t->mem_cap =
        t->mem_cap_gpu < 0 ? 0 : json_integer_value(json_object_get(d, "gpu_memory")) << 20;
}

int task_fraction_gpu(const struct agent *a, json_t *d, bool *part_mem)
{
    json_t *g = json_object_get(d, "gpus");
    json_int_t milli = json_integer_value(json_object_get(d, "gpu_milli"));
    json_int_t gmem = json_integer_value(json_object_get(d, "gpu_memory"));
    json_int_t g0 = json_integer_value(json_array_get(g, 0));

    if (json_array_size(g) != 1 || json_object_get(d, "mig_profile") || g0 < 0 ||
        g0 >= a->inv.n_gpus)
        return -1;
    int64_t total = a->inv.gpus[g0].mem_mib;
    bool part = gmem > 0 && (total <= 0 || gmem < total);
    if (part_mem)
        *part_mem = part;
    return (milli > 0 && milli < 1000) || part ? (int)g0 : -1;
}

/* The task's environment: the job's own variables first, then allot's,
 * which win (a job cannot widen its GPUs through CUDA_VISIBLE_DEVICES). */
static void build_env(const struct agent *a, json_t *d, const struct run_user *u, const char *dir,
                      const char *mig_uuid, struct env *e)
{
    json_t *spec = json_object_get(d, "spec"), *g = json_object_get(d, "gpus"), *x;
    char buf[2048], num[64];
    const char *k;
    size_t i;

    /* a job's own variables, but never those the GPU share is enforced by,
     * nor a name that is none ("LD_PRELOAD=/x": its entry would read as
     * LD_PRELOAD, which the container binds from the host); allotd
     * refuses both, a job stored before it did may still have them */
    json_object_foreach(json_object_get(spec, "env"), k,
                        x) if (allot_env_name_ok(k) && !allot_env_reserved(k))
        env_set(e, k, json_string_value(x));
    env_set(e, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env_set(e, "HOME", u->home);
    env_set(e, "USER", u->name);
    env_set(e, "LOGNAME", u->name);
    allot_fmt(num, sizeof(num), "%lld", (long long)json_integer_value(json_object_get(d, "job")));
    env_set(e, "ALLOT_JOB_ID", num);
    allot_fmt(num, sizeof(num), "%lld", (long long)json_integer_value(json_object_get(d, "task")));
    env_set(e, "ALLOT_TASK_INDEX", num);
    allot_fmt(num, sizeof(num), "%lld",
              json_integer_value(json_object_get(spec, "tasks"))
                  ? (long long)json_integer_value(json_object_get(spec, "tasks"))
                  : 1LL);
    env_set(e, "ALLOT_NUM_TASKS", num);
    env_set(e, "ALLOT_NODE", a->cfg.name);
    if (json_string_length(json_object_get(spec, "name")))
        env_set(e, "ALLOT_JOB_NAME", json_string_value(json_object_get(spec, "name")));
    /* its CPUs (its cgroup's), whole, to size its thread pools by: nproc
     * shows the node's */
    if (json_integer_value(json_object_get(d, "cpu_milli")) > 0) {
        allot_fmt(num, sizeof(num), "%lld",
                  (long long)(json_integer_value(json_object_get(d, "cpu_milli")) + 999) / 1000);
        env_set(e, "ALLOT_CPUS_PER_TASK", num);
    }
    /* a job of several tasks: where each runs, so they find each other */
    if ((x = json_object_get(json_object_get(d, "task_hosts"), "nodes")) && json_is_string(x))
        env_set(e, "ALLOT_TASK_NODES", json_string_value(x));
    if ((x = json_object_get(json_object_get(d, "task_hosts"), "addresses")) && json_is_string(x))
        env_set(e, "ALLOT_TASK_ADDRESSES", json_string_value(x));
    /* where the job reaches allotd (allot checkpoint), unless it says */
    if (!*env_get(e, "ALLOT_SERVER") && a->cfg.server)
        env_set(e, "ALLOT_SERVER", a->cfg.server);
    /* a checkpointable job's own credential: reports its saves (allot
     * checkpoint), good for this run only */
    if (json_string_value(json_object_get(d, "job_token")))
        env_set(e, "ALLOT_JOB_TOKEN", json_string_value(json_object_get(d, "job_token")));
    if (json_string_value(json_object_get(spec, "tenant")))
        env_set(e, "ALLOT_TENANT", json_string_value(json_object_get(spec, "tenant")));
    if ((x = json_object_get(d, "array_job_id"))) {
        allot_fmt(num, sizeof(num), "%lld", (long long)json_integer_value(x));
        env_set(e, "ALLOT_ARRAY_JOB_ID", num);
        allot_fmt(num, sizeof(num), "%lld",
                  (long long)json_integer_value(json_object_get(d, "array_index")));
        env_set(e, "ALLOT_ARRAY_TASK_ID", num);
    }
    /* the GPUs, by UUID as CUDA and the NVIDIA container runtime read them */
    buf[0] = '\0';
    char devs[2048] = "";
    json_array_foreach(g, i, x)
    {
        json_int_t idx = json_integer_value(x);
        if (idx < 0 || idx >= a->inv.n_gpus)
            continue;
        size_t bl = strlen(buf), dl = strlen(devs);
        allot_fmt(buf + bl, sizeof(buf) - bl, "%s%s", bl ? "," : "", a->inv.gpus[idx].uuid);
        allot_fmt(devs + dl, sizeof(devs) - dl, "%s%s/nvidia%d", dl ? "," : "", a->inv.dev_dir,
                  a->inv.gpus[idx].minor);
    }
    if (*mig_uuid) /* a MIG slice: the instance, not the whole GPU */
        allot_strlcpy(buf, mig_uuid, sizeof(buf));
    env_set(e, "CUDA_VISIBLE_DEVICES", *buf ? buf : "");
    env_set(e, "NVIDIA_VISIBLE_DEVICES", *buf ? buf : "void");
    env_set(e, "ALLOT_GPU_DEVICES", devs);
    /* a fraction of a GPU (less than all of its compute or memory): MPS or
     * the shim (liballot-cuda.so) enforces it */
    json_int_t milli = json_integer_value(json_object_get(d, "gpu_milli"));
    json_int_t gmem = json_integer_value(json_object_get(d, "gpu_memory"));
    bool part_mem;
    int g0 = task_fraction_gpu(a, d, &part_mem);
    if (g0 < 0)
        return;
    if (!strcmp(a->cfg.sharing, "mps")) {
        allot_fmt(buf, sizeof(buf), "%s/../mps/%lld/pipe", a->tasks_dir, (long long)g0);
        env_set(e, "CUDA_MPS_PIPE_DIRECTORY", buf);
        allot_fmt(buf, sizeof(buf), "%s/../mps/%lld/log", a->tasks_dir, (long long)g0);
        env_set(e, "CUDA_MPS_LOG_DIRECTORY", buf);
        if (milli > 0 && milli < 1000) {
            allot_fmt(num, sizeof(num), "%lld", (long long)(milli + 9) / 10);
            env_set(e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", num);
        }
        if (part_mem) { /* the client sees its one GPU as device 0 */
            allot_fmt(num, sizeof(num), "0=%lldM", (long long)gmem);
            env_set(e, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", num);
        }
        return;
    }
    if (part_mem) {
        allot_fmt(num, sizeof(num), "%lldMi", (long long)gmem);
        env_set(e, "ALLOT_GPU_MEMORY_LIMIT", num);
    }
    if (milli > 0 && milli < 1000) {
        allot_fmt(num, sizeof(num), "%lld", (long long)(milli + 9) / 10);
        env_set(e, "ALLOT_GPU_SM_LIMIT", num);
    }
    allot_fmt(buf, sizeof(buf), "%s/" TASK_REGION, dir);
    env_set(e, "ALLOT_SHIM_REGION", buf);
    if (milli > 0 && milli < 1000) {
        /* the jobs on one GPU share its time by their tenants' weights,
         * through the agent's share folder: the task's entry there
         * (gpushare.c, written before it starts) is the only one it may
         * speak through */
        allot_fmt(buf, sizeof(buf), "%s/gpushare", a->cfg.state_dir);
        env_set(e, "ALLOT_GPU_SHARE_DIR", buf);
        allot_fmt(num, sizeof(num), "%lld-%lld",
                  (long long)json_integer_value(json_object_get(d, "job")),
                  (long long)json_integer_value(json_object_get(d, "task")));
        env_set(e, "ALLOT_GPU_SHARE_ID", num);
    }
    if (a->cfg.ctx_overhead && strcmp(a->cfg.ctx_overhead, "0") != 0)
        env_set(e, "ALLOT_GPU_CONTEXT_OVERHEAD", a->cfg.ctx_overhead);
    if (a->cfg.shim_lib && *a->cfg.shim_lib && access(a->cfg.shim_lib, R_OK) == 0)
        env_set(e, "LD_PRELOAD", a->cfg.shim_lib);
}

/* Makes folder path a tmpfs of --tmp-size (mode 1777) unless it is a mount
 * point already (a restarted agent finds its own). 0 or -1 with why. */
static int tmpfs_once(const struct agent *a, const char *path, char *why, size_t wlen)
{
    char parent[4500], opts[64];
    struct stat st, pst;

    allot_fmt(parent, sizeof(parent), "%s/..", path);
    if (stat(path, &st) < 0 || stat(parent, &pst) < 0) {
        allot_fmt(why, wlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (st.st_dev != pst.st_dev)
        return 0;
    allot_fmt(opts, sizeof(opts), "mode=1777,size=%lld", (long long)a->cfg.tmp_size);
    if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
        allot_fmt(why, wlen, "tmpfs on %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- a fraction's shim region ---- */

/* Makes task folder dir's shim region (agent.h, TASK_REGION): its own
 * tmpfs when the agent is root, the file the job's user's alone (0600).
 * The job's processes reach it through the task folder, which its group
 * may pass through (0710). 0, or -1 with why. */
static int region_up(const char *dir, const struct run_user *u, char *why, size_t wlen)
{
    char rdir[4500], region[4500], opts[96];
    struct stat st, pst;
    int fd;

    allot_fmt(rdir, sizeof(rdir), "%s/" TASK_REGION_DIR, dir);
    allot_fmt(region, sizeof(region), "%s/" TASK_REGION, dir);
    if ((mkdir(rdir, 0700) < 0 && errno != EEXIST) || lstat(rdir, &st) < 0 || stat(dir, &pst) < 0) {
        allot_fmt(why, wlen, "%s: %s", rdir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        allot_fmt(why, wlen, "%s: not a folder", rdir);
        return -1;
    }
    if (getuid() == 0 && st.st_dev == pst.st_dev) {
        allot_fmt(opts, sizeof(opts), "mode=0700,uid=%d,gid=%d,size=%d", (int)u->uid, (int)u->gid,
                  TASK_REGION_FS);
        if (mount("tmpfs", rdir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
            allot_fmt(why, wlen, "tmpfs for the shim region on %s: %s", rdir, strerror(errno));
            return -1;
        }
    }
    fd = open(region, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || (getuid() == 0 && fchown(fd, u->uid, u->gid) < 0) || fchmod(fd, 0600) < 0) {
        allot_fmt(why, wlen, "%s: %s", region, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    if (getuid() == 0 && (chown(dir, 0, u->gid) < 0 || chmod(dir, 0710) < 0)) {
        allot_fmt(why, wlen, "%s: cannot let gid %d pass to the shim region: %s", dir, (int)u->gid,
                  strerror(errno));
        return -1;
    }
    return 0;
}

/* Unmounts task folder dir's shim region tmpfs, if any, and removes the
 * region and its folder (the task folder's removal goes one level deep). */
static void region_down(const char *dir)
{
    char rdir[4500], region[4500];

    allot_fmt(rdir, sizeof(rdir), "%s/" TASK_REGION_DIR, dir);
    allot_fmt(region, sizeof(region), "%s/" TASK_REGION, dir);
    if (getuid() == 0 && umount2(rdir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        LOG_WARN("task", "umount %s: %s", rdir, strerror(errno));
    unlink(region);
    rmdir(rdir);
}

/* ---- a job's /tmp and /dev/shm on this node ---- */

void jobfs_dir(const struct agent *a, int64_t job, const char *which, char *buf, size_t len)
{
    allot_fmt(buf, len, "%s/../jobfs/%lld%s%s", a->tasks_dir, (long long)job, which ? "/" : "",
              which ? which : "");
}

/* Makes STATE/jobfs/JOB/{tmp,shm}, each a tmpfs (tmpfs_once), for the
 * job's tasks on this node to share. 0 or -1 with why. */
static int jobfs_up(const struct agent *a, int64_t job, char *why, size_t wlen)
{
    static const char *const which[] = {"tmp", "shm"};
    char path[4500];

    /* the agent's alone: a task is given its job's folders as root, before
     * it drops privileges; no job may look into another's from the host */
    allot_fmt(path, sizeof(path), "%s/../jobfs", a->tasks_dir);
    if ((mkdir(path, 0700) < 0 && errno != EEXIST) || chmod(path, 0700) < 0) {
        allot_fmt(why, wlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < 2; i++) {
        jobfs_dir(a, job, which[i], path, sizeof(path));
        if (agent_mkdir_p(path) < 0) {
            allot_fmt(why, wlen, "%s: %s", path, strerror(errno));
            return -1;
        }
        if (tmpfs_once(a, path, why, wlen) < 0)
            return -1;
    }
    return 0;
}

/* Unmounts and removes the job's folders (what is not there is gone). */
static void jobfs_down(const struct agent *a, int64_t job)
{
    static const char *const which[] = {"tmp", "shm"};
    char path[4500];

    for (size_t i = 0; i < 2; i++) {
        jobfs_dir(a, job, which[i], path, sizeof(path));
        if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
            LOG_WARN("task", "%s: %s", path, strerror(errno));
        rmdir(path);
    }
    jobfs_dir(a, job, NULL, path, sizeof(path));
    rmdir(path);
}

/* Whether a task of job other than t is in the agent's list. */
static bool job_has_other_task(const struct agent *a, int64_t job, const struct task *t)
{
    for (size_t i = 0; i < a->n_tasks; i++)
        if (&a->tasks[i] != t && a->tasks[i].job == job)
            return true;
    return false;
}

bool agent_has_job(const struct agent *a, int64_t job)
{
    return job_has_other_task(a, job, NULL);
}

void jobfs_sweep(const struct agent *a)
{
    char base[4400];
    struct dirent *e;
    DIR *d;

    allot_fmt(base, sizeof(base), "%s/../jobfs", a->tasks_dir);
    if (!(d = opendir(base)))
        return;
    while ((e = readdir(d))) {
        int64_t job;

        if (allot_parse_num(e->d_name, 1, INT64_MAX, &job) && !job_has_other_task(a, job, NULL))
            jobfs_down(a, job);
    }
    closedir(d);
}

/* ---- MPS ---- */

void mps_shm_dir(const struct agent *a, int gpu, char *buf, size_t len)
{
    allot_fmt(buf, len, "%s/../mps-shm/%d", a->tasks_dir, gpu);
}

void mps_start_all(const struct agent *a)
{
    for (int g = 0; g < a->inv.n_gpus; g++) {
        char base[4300], pipe_dir[4400], log_dir[4400], shm[4400], why[4600];
        int status = 0;
        bool own_shm;
        pid_t pid;

        allot_fmt(base, sizeof(base), "%s/../mps", a->tasks_dir);
        mkdir(base, 0755);
        allot_fmt(base, sizeof(base), "%s/../mps/%d", a->tasks_dir, g);
        allot_fmt(pipe_dir, sizeof(pipe_dir), "%s/pipe", base);
        allot_fmt(log_dir, sizeof(log_dir), "%s/log", base);
        mps_shm_dir(a, g, shm, sizeof(shm));
        mkdir(base, 0755);
        mkdir(pipe_dir, 0755);
        mkdir(log_dir, 0755);
        /* the agent's alone (0700 above it): the daemon and the GPU's MPS
         * tasks get it bound as root, no other job reaches it */
        allot_fmt(base, sizeof(base), "%s/../mps-shm", a->tasks_dir);
        if ((mkdir(base, 0700) < 0 && errno != EEXIST) || chmod(base, 0700) < 0)
            LOG_WARN("task", "%s: %s", base, strerror(errno));
        mkdir(shm, 01777);
        /* the server's shared memory is where its clients find it: their
         * /dev/shm is private (supervise.c), so the daemon gets the same
         * folder as its /dev/shm */
        own_shm = getuid() == 0;
        if (own_shm && tmpfs_once(a, shm, why, sizeof(why)) < 0) {
            LOG_WARN("task", "GPU %d: MPS control daemon not started: %s", g, why);
            continue;
        }
        pid = fork();
        if (pid == 0) {
            int null_fd = open("/dev/null", O_RDWR);
            dup2(null_fd, 0);
            dup2(null_fd, 1);
            if (own_shm && (unshare(CLONE_NEWNS) < 0 ||
                            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                            mount(shm, "/dev/shm", NULL, MS_BIND, NULL) < 0)) {
                dprintf(2, "allot-agent: MPS daemon's /dev/shm: %s\n", strerror(errno));
                _exit(126);
            }
            setenv("CUDA_VISIBLE_DEVICES", a->inv.gpus[g].uuid, 1);
            setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1);
            setenv("CUDA_MPS_LOG_DIRECTORY", log_dir, 1);
            execlp(a->cfg.mps_control, a->cfg.mps_control, "-d", (char *)NULL);
            _exit(127);
        }
        /* -d daemonises: the command itself returns at once */
        while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            LOG_WARN("task", "GPU %d: MPS control daemon not started (%s)", g, a->cfg.mps_control);
        else
            LOG_INFO("task", "GPU %d: MPS control daemon, pipes in %s", g, pipe_dir);
    }
}

/* ---- memory scrubbing ---- */

static void scrub_save(const struct agent *a)
{
    char text[AGENT_MAX_GPUS * 270] = "", dir[4200];
    size_t len = 0;

    for (int g = 0; g < a->inv.n_gpus; g++)
        if (*a->last_tenant[g])
            len += (size_t)allot_fmt(text + len, sizeof(text) - len, "%d %s%s\n", g,
                                     a->last_tenant[g], a->gpu_mixed[g] ? " mixed" : "");
    allot_fmt(dir, sizeof(dir), "%s/..", a->tasks_dir);
    if (agent_write_atomic(dir, "gpu-tenants", text) < 0)
        LOG_WARN("task", "cannot record the GPUs' last tenants");
}

void scrub_load(struct agent *a)
{
    char path[4300], line[300], name[260], mark[16];
    FILE *f;
    int g, n;

    allot_fmt(path, sizeof(path), "%s/../gpu-tenants", a->tasks_dir);
    if (!(f = fopen(path, "r")))
        return;
    while (fgets(line, sizeof(line), f))
        if ((n = sscanf(line, "%d %259s %15s", &g, name, mark)) >= 2 && g >= 0 &&
            g < AGENT_MAX_GPUS) {
            allot_strlcpy(a->last_tenant[g], name, sizeof(a->last_tenant[g]));
            a->gpu_mixed[g] = n == 3 && !strcmp(mark, "mixed");
        }
    fclose(f);
}

/* Runs the scrubber (this program, --scrub) on GPU g. 0, or -1 with why. */
static int run_scrubber(const struct agent *a, int g, char *out, size_t len)
{
    int fds[2], status = 0;
    ssize_t n, got = 0;
    pid_t pid;

    *out = '\0';
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execl("/proc/self/exe", "allot-agent", "--scrub", a->inv.gpus[g].uuid, "--cuda-lib",
              a->cfg.cuda_lib, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    while (pid > 0 && (size_t)got < len - 1 &&
           (n = read(fds[0], out + got, len - 1 - (size_t)got)) > 0)
        got += n;
    out[got > 0 ? got : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    close(fds[0]);
    if (pid < 0)
        return -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Before a task of `tenant` gets GPUs another tenant's job used last, their
 * memory is cleared (scrub.c); a GPU that cannot be cleared is not handed
 * over (the task fails with the reason). Not for emulated GPUs, MIG slices,
 * or a GPU another task still runs on (it cannot be cleared under it): a
 * task of another tenant joining one marks it mixed instead (kept in
 * STATE/gpu-tenants), and a mixed GPU is cleared when it is next free,
 * whichever tenant gets it, so that no tenant finds memory another left
 * on a GPU they shared. */
static int scrub_gpus(struct agent *a, const struct task *t, json_t *d, const char *tenant,
                      char *why, size_t wlen)
{
    bool changed = false;

    if (json_object_get(d, "mig_profile"))
        return 0;
    for (int g = 0; g < a->inv.n_gpus; g++) {
        char out[256];
        bool busy = false;

        if (!(t->gpu_mask & (1u << g)) || (!a->gpu_mixed[g] && !strcmp(a->last_tenant[g], tenant)))
            continue;
        for (size_t k = 0; k < a->n_tasks && !busy; k++)
            busy = &a->tasks[k] != t && (a->tasks[k].gpu_mask & (1u << g)) &&
                   a->tasks[k].state != TASK_EXITED && a->tasks[k].state != TASK_LOST;
        if (busy) {
            if (!a->gpu_mixed[g] && strcmp(a->last_tenant[g], tenant) != 0) {
                LOG_INFO("task", "GPU %d: shared by %s and %s, cleared when it is next free", g,
                         *a->last_tenant[g] ? a->last_tenant[g] : "unknown", tenant);
                if (!*a->last_tenant[g])
                    allot_strlcpy(a->last_tenant[g], tenant, sizeof(a->last_tenant[g]));
                a->gpu_mixed[g] = true;
                changed = true;
            }
            continue;
        }
        if (a->cfg.scrub && !a->inv.emulated) {
            if (run_scrubber(a, g, out, sizeof(out)) < 0) {
                allot_fmt(why, wlen, "GPU %d memory could not be cleared for another tenant: %s", g,
                          *out ? out : "the scrubber failed");
                return -1;
            }
            LOG_INFO("task", "GPU %d: %s (%s%s -> %s)", g, out,
                     *a->last_tenant[g] ? a->last_tenant[g] : "unknown",
                     a->gpu_mixed[g] ? " and others" : "", tenant);
        }
        allot_strlcpy(a->last_tenant[g], tenant, sizeof(a->last_tenant[g]));
        a->gpu_mixed[g] = false;
        changed = true;
    }
    if (changed)
        scrub_save(a);
    return 0;
}

/* ---- start ---- */

static void task_fail(struct task *t, const char *why)
{
    t->state = TASK_EXITED;
    t->exit_code = 1;
    allot_strlcpy(t->detail, why, sizeof(t->detail));
}

/* Moves the netdevs of the task's RDMA VFs into its network namespace
 * (when it has one) and puts the VFs into its environment. 0, or -1 with
 * why. */
static int rdma_give(const struct task *t, const char *dir, struct env *env, char *why, size_t wlen)
{
    struct rdma_env re;
    char ns[96];

    if (!t->n_vfs)
        return 0;
    net_ns_name(t->key, ns, sizeof(ns));
    if (t->net && rdma_task_enter(dir, ns, why, wlen) < 0)
        return -1;
    if (rdma_task_env(dir, &re) > 0) {
        env_set(env, "ALLOT_RDMA_VFS", re.vfs);
        if (*re.netdevs)
            env_set(env, "ALLOT_RDMA_NETDEVS", re.netdevs);
        if (*re.devices)
            env_set(env, "ALLOT_RDMA_DEVICES", re.devices);
    }
    return 0;
}

/* task_start's work; task_start frees what a task that did not start
 * holds. */
static int task_launch(struct agent *a, json_t *d, struct task *t)
{
    json_t *spec = json_object_get(d, "spec"), *cmd = json_object_get(spec, "command"), *x;
    const char *tenant = json_string_value(json_object_get(spec, "tenant"));
    const char *workdir = json_string_value(json_object_get(spec, "workdir"));
    char dir[4400], logd[4400], logf[4500], why[256], mig_uuid[96], *text;
    char bundle[4500], crun_root[4200], cid[64], mig_devs[1024] = "";
    struct cg_limits lim = {.pids_max = a->cfg.pids_max};
    int mig_gi = -1, mig_ci = -1;
    struct env env = {0};
    struct run_user u;
    char **argv = NULL;
    size_t i;
    int log_fd = -1;
    pid_t sup;

    memset(t, 0, sizeof(*t));
    t->runtime_ms = -1;
    t->job = json_integer_value(json_object_get(d, "job"));
    t->index = (int)json_integer_value(json_object_get(d, "task"));
    t->run = json_integer_value(json_object_get(d, "run"));
    allot_fmt(t->key, sizeof(t->key), "%lld-%d", (long long)t->job, t->index);
    t->started_ms = allot_mono_ms();
    task_dir(a, t, dir, sizeof(dir));
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        LOG_ERROR("task", "%s: %s", dir, strerror(errno));
        return -1;
    }
    text = json_dumps(d, JSON_COMPACT);
    if (!text || agent_write_atomic(dir, "task.json", text) < 0) {
        free(text);
        LOG_ERROR("task", "%s: cannot record the task", dir);
        return -1;
    }
    free(text);
    /* the job's log folder is its tenant's before anything is written to
     * it (a task that does not start writes why there too) */
    if (logs_claim(a, t->job, tenant ? tenant : "") < 0) {
        allot_fmt(why, sizeof(why), "cannot make its log folder its own: %s", strerror(errno));
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        task_fail(t, why);
        return -1;
    }
    if (!json_is_array(cmd) || !json_array_size(cmd)) {
        task_fail(t, "the job has no command");
        return 0;
    }
    const char *submitter = json_string_value(json_object_get(d, "user"));
    if (resolve_user(a, tenant ? tenant : "", submitter ? submitter : "", &u, why, sizeof(why)) <
        0) {
        task_fail(t, why);
        return 0;
    }
    if (a->cg_v2 < 0 && getuid() == 0) {
        task_fail(t, "no cgroups on this node: tasks cannot be isolated");
        return 0;
    }
    t->gpu_mask = gpu_mask_of(a, d);
    t->mps_gpu = strcmp(a->cfg.sharing, "mps") ? -1 : task_fraction_gpu(a, d, NULL);
    mem_cap_of(a, d, t);
    if (scrub_gpus(a, t, d, tenant ? tenant : "", why, sizeof(why)) < 0) {
        task_fail(t, why);
        return 0;
    }
    if (task_mig_prepare(a, d, dir, mig_uuid, sizeof(mig_uuid), &mig_gi, &mig_ci, why,
                         sizeof(why)) < 0) {
        task_fail(t, why);
        return 0;
    }
    if (rdma_task_assign(a, t, d, dir, why, sizeof(why)) < 0) {
        LOG_WARN("task", "job %lld: %s", (long long)t->job, why);
        task_fail(t, why);
        return 0;
    }
    if (*mig_uuid &&
        task_mig_caps_give(a, t,
                           (int)json_integer_value(json_array_get(json_object_get(d, "gpus"), 0)),
                           mig_gi, mig_ci, mig_devs, sizeof(mig_devs), why, sizeof(why)) < 0) {
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        task_fail(t, why);
        return 0;
    }
    for (int k = 0; k < t->n_devs; k++) /* its VFs' uverbs, its MIG capabilities */
        lim.devs[lim.n_devs++] = (struct dev_rule){t->devs[k].major, t->devs[k].minor};
    lim.n_io = a->n_io;
    memcpy(lim.io, a->io, sizeof(lim.io));
    lim.cpu_milli = json_integer_value(json_object_get(d, "cpu_milli"));
    lim.mem_bytes = json_integer_value(json_object_get(d, "memory")) * 1024 * 1024;
    json_array_foreach(json_object_get(d, "gpus"), i, x)
    {
        json_int_t idx = json_integer_value(x);
        if (idx >= 0 && idx < a->inv.n_gpus && lim.n_gpu_minors < AGENT_MAX_GPUS)
            lim.gpu_minors[lim.n_gpu_minors++] = a->inv.gpus[idx].minor;
    }
    if (getuid() == 0 && cg_create(a->cfg.cgroup_root, t->key, &lim, why, sizeof(why)) < 0) {
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        task_fail(t, why);
        return 0;
    }
    if (cpubind_task(a, t, lim.cpu_milli, dir, why, sizeof(why)) < 0) {
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        task_fail(t, why);
        return 0;
    }
    if ((x = json_object_get(d, "network")) && a->net) {
        struct net_spec ns;
        if (net_parse(x, &ns, why, sizeof(why)) < 0 ||
            net_task_up(a->net, t->key, &ns, dir, why, sizeof(why)) < 0) {
            LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
            task_fail(t, why);
            return 0;
        }
        t->net = true;
    } else if (x) {
        LOG_WARN("task", "job %lld: a tenant network, but this agent runs without --network on",
                 (long long)t->job);
    } else if (net_cluster_on(a->net)) {
        /* fail closed: a task of a cluster with tenant networks never runs
         * in the node's own network */
        allot_fmt(why, sizeof(why),
                  "allotd runs tenant networks but sent no network for this task; it does not "
                  "start outside its tenant's network");
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        task_fail(t, why);
        return 0;
    }
    allot_fmt(logd, sizeof(logd), "%s/%lld", a->logs_dir, (long long)t->job);
    allot_fmt(logf, sizeof(logf), "%s/task-%d.log", logd, t->index);
    log_fd = open(logf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (log_fd < 0) {
        allot_fmt(why, sizeof(why), "cannot open the log %s: %s", logf, strerror(errno));
        task_fail(t, why);
        return 0;
    }
    /* the agent's, not the job's: the job writes to it only through its
     * supervisor, which holds it to --log-max */
    build_env(a, d, &u, dir, mig_uuid, &env);
    { /* the cores it has of its own (--cpu-bind cores) */
        char cores[4096];
        if (cpubind_own(t, cores, sizeof(cores)))
            env_set(&env, "ALLOT_CPU_CORES", cores);
    }
    if (*mig_devs) { /* a MIG slice's capability devices beside its GPU's node */
        char all[4096];
        allot_fmt(all, sizeof(all), "%s,%s", env_get(&env, "ALLOT_GPU_DEVICES"), mig_devs);
        env_set(&env, "ALLOT_GPU_DEVICES", all);
    }
    if (rdma_give(t, dir, &env, why, sizeof(why)) < 0) {
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        close(log_fd);
        env_free(&env);
        task_fail(t, why);
        return 0;
    }
    if (*env_get(&env, "ALLOT_SHIM_REGION") && !*env_get(&env, "LD_PRELOAD")) {
        /* no shim to preload: the fraction runs, unenforced, and says so */
        LOG_WARN("task",
                 "job %lld: no GPU sharing shim at %s: its GPU memory cap and compute "
                 "share are not enforced",
                 (long long)t->job, a->cfg.shim_lib ? a->cfg.shim_lib : "");
        dprintf(log_fd,
                "allot: node %s has no GPU sharing shim at %s (--shim-lib): this fraction's GPU "
                "memory cap and compute share are not enforced\n",
                a->cfg.name, a->cfg.shim_lib ? a->cfg.shim_lib : "");
    }
    if (*env_get(&env, "ALLOT_SHIM_REGION") && region_up(dir, &u, why, sizeof(why)) < 0) {
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        close(log_fd);
        env_free(&env);
        task_fail(t, why);
        return 0;
    }
    if (*env_get(&env, "ALLOT_GPU_SHARE_ID") &&
        share_task_add(a, t->key, d, u.uid, u.gid, why, sizeof(why)) < 0)
        LOG_WARN("task", "job %lld: %s: its compute share is held alone", (long long)t->job, why);
    /* the /tmp and /dev/shm the job's tasks on this node share (supervise.c
     * binds them, or oci.c into the container) */
    if (getuid() == 0 && jobfs_up(a, t->job, why, sizeof(why)) < 0) {
        LOG_ERROR("task", "job %lld: %s", (long long)t->job, why);
        close(log_fd);
        env_free(&env);
        task_fail(t, why);
        return 0;
    }
    argv = allot_calloc(json_array_size(cmd) + 9, sizeof(*argv));
    if (!argv || !env.v) {
        close(log_fd);
        env_free(&env);
        allot_free(argv);
        return -1;
    }
    if (json_string_value(json_object_get(spec, "image"))) {
        /* the oci executor: crun runs the command in the image */
        if (getuid() != 0)
            allot_fmt(why, sizeof(why), "jobs with an image need an agent running as root");
        if (getuid() != 0 || oci_bundle(a, d, t, dir, u.uid, u.gid, env.v, workdir, bundle,
                                        sizeof(bundle), why, sizeof(why)) < 0) {
            close(log_fd);
            env_free(&env);
            allot_free(argv);
            task_fail(t, why);
            return 0;
        }
        allot_fmt(crun_root, sizeof(crun_root), "%s/../crun", a->tasks_dir);
        allot_fmt(cid, sizeof(cid), "allot-%s", t->key);
        /* cgroup v2: crun joins the task's cgroup and loads the device rules as a
         * BPF program; v1 (and hybrid, which crun refuses): crun stays out of
         * cgroups, the container inherits the task's (run_child entered it) */
        char *cv[] = {
            a->cfg.crun, "--root",
            crun_root,   a->cg_v2 == 1 ? "--cgroup-manager=cgroupfs" : "--cgroup-manager=disabled",
            "run",       "--bundle",
            bundle,      cid};
        memcpy(argv, cv, sizeof(cv));
    } else {
        json_array_foreach(cmd, i, x) argv[i] =
            (char *)(json_string_value(x) ? json_string_value(x) : "");
    }
    sup = fork();
    if (sup == 0)
        task_supervisor(a, t, dir, argv, env.v, &u, workdir, log_fd);
    close(log_fd);
    env_free(&env);
    allot_free(argv);
    if (sup < 0) {
        task_fail(t, "fork failed");
        return 0;
    }
    t->sup = sup;
    t->state = TASK_STARTING;
    LOG_INFO("task", "job %lld task %d started (supervisor %d) as %s", (long long)t->job, t->index,
             (int)sup, u.name);
    return 0;
}

/* A task that did not start says why in its log, as its only output, so
 * that `allot logs` and `allot run` show the reason where output goes. */
static void log_not_started(const struct agent *a, const struct task *t)
{
    char path[4500];
    FILE *f;

    allot_fmt(path, sizeof(path), "%s/%lld", a->logs_dir, (long long)t->job);
    mkdir(path, 0700);
    allot_fmt(path, sizeof(path), "%s/%lld/task-%d.log", a->logs_dir, (long long)t->job, t->index);
    if (!(f = fopen(path, "ae"))) {
        LOG_WARN("task", "%s: %s", path, strerror(errno));
        return;
    }
    fprintf(f, "allot-agent: job %lld task %d not started on node %s: %s\n", (long long)t->job,
            t->index, a->cfg.name, t->detail);
    fclose(f);
}

bool task_alive(const struct task *t)
{
    return t->state == TASK_STARTING || t->state == TASK_RUNNING || t->state == TASK_STOPPING;
}

/* Whether one of the GPUs desired-state entry d names is still held by a
 * task being stopped: a new task never starts on a GPU where a stopped
 * task's processes may still run (a preempted job's GPUs move at once in
 * allotd's books; here they move once its processes are gone). */
static bool gpus_still_held(const struct agent *a, json_t *d)
{
    unsigned mask = gpu_mask_of(a, d);

    for (size_t k = 0; k < a->n_tasks; k++) {
        const struct task *t = &a->tasks[k];
        if ((t->gpu_mask & mask) && task_alive(t) &&
            (t->state == TASK_STOPPING || t->cancelled || t->fenced))
            return true;
    }
    return false;
}

int task_start(struct agent *a, json_t *d, struct task *t)
{
    int rc;

    memset(t, 0, sizeof(*t));
    allot_fmt(t->key, sizeof(t->key), "%lld-%lld",
              (long long)json_integer_value(json_object_get(d, "job")),
              (long long)json_integer_value(json_object_get(d, "task")));
    if (gpus_still_held(a, d)) {
        LOG_DEBUG("task", "%s waits for GPUs that stopping tasks hold", t->key);
        return 1;
    }
    if (rdma_task_must_wait(a, t, d)) {
        LOG_DEBUG("task", "%s waits for RDMA VFs that stopping tasks hold", t->key);
        return 1;
    }
    rc = task_launch(a, d, t);

    if (rc == 0 && t->state == TASK_EXITED)
        log_not_started(a, t);
    if (rc < 0 || t->state == TASK_EXITED) { /* it did not start: its VFs are free */
        char dir[4400];
        task_dir(a, t, dir, sizeof(dir));
        rdma_task_release(t, dir);
        share_task_remove(a, t);
    }
    return rc;
}

/* ---- stop, poll, forget ---- */

void task_stop(struct agent *a, struct task *t, int64_t now_ms, int64_t grace_ms)
{
    if (t->state != TASK_STARTING && t->state != TASK_RUNNING)
        return;
    if (grace_ms < 0)
        grace_ms = a->cfg.grace;
    t->state = TASK_STOPPING;
    t->kill_at_ms = now_ms + grace_ms;
    if (t->pid > 0) { /* as Slurm: one stopped (allot signal STOP) may handle it */
        kill(-t->pid, SIGCONT);
        kill(-t->pid, SIGTERM);
    }
    LOG_INFO("task", "job %lld task %d: SIGTERM, SIGKILL in %lld ms", (long long)t->job, t->index,
             (long long)grace_ms);
}

/* Whether task process pid runs its own program: until its exec it is a
 * fork of the agent's supervisor (same executable), with the agent's
 * signal dispositions; a signal then would kill it, not reach its handler. */
static bool task_execed(pid_t pid)
{
    char path[64], exe[PATH_MAX], own[PATH_MAX];
    ssize_t n, m;

    allot_fmt(path, sizeof(path), "/proc/%d/exe", (int)pid);
    n = readlink(path, exe, sizeof(exe) - 1);
    m = readlink("/proc/self/exe", own, sizeof(own) - 1);
    if (n < 0 || m < 0)
        return true; /* gone (the signal finds nothing), or not ours to read */
    return n != m || memcmp(exe, own, (size_t)n) != 0;
}

void task_signal(struct agent *a, struct task *t, const json_t *signals)
{
    int64_t seq = t->sig_seq;
    char dir[4400], buf[32];
    json_t *s;
    size_t i;

    /* its process is not known yet, or it stops */
    if (t->pid <= 0 || (t->state != TASK_STARTING && t->state != TASK_RUNNING))
        return;
    json_array_foreach(signals, i, s)
    {
        if (json_integer_value(json_object_get(s, "seq")) > seq)
            seq = json_integer_value(json_object_get(s, "seq"));
    }
    /* nothing new (every heartbeat shows a run's signals), or its program
     * has not started yet: a later heartbeat */
    if (seq == t->sig_seq || !task_execed(t->pid))
        return;
    /* kept before they are sent: an agent that dies between the two sends
     * none of them again (at most once) */
    allot_fmt(dir, sizeof(dir), "%s/%s", a->tasks_dir, t->key);
    allot_fmt(buf, sizeof(buf), "%lld\n", (long long)seq);
    if (agent_write_atomic(dir, "signalled", buf) < 0)
        LOG_WARN("task", "job %lld task %d: cannot keep which signals it got: %s",
                 (long long)t->job, t->index, strerror(errno));
    json_array_foreach(signals, i, s)
    {
        int sig = (int)json_integer_value(json_object_get(s, "sig"));

        if (json_integer_value(json_object_get(s, "seq")) <= t->sig_seq)
            continue;
        if (!allot_signal_name(sig)) /* allotd sends only those: skip, said */
            LOG_WARN("task", "job %lld task %d: signal %d is not one a user may send",
                     (long long)t->job, t->index, sig);
        else if (kill(-t->pid, sig) == 0)
            LOG_INFO("task", "job %lld task %d: SIG%s sent (allot signal)", (long long)t->job,
                     t->index, allot_signal_name(sig));
    }
    t->sig_seq = seq;
}

void task_fence(struct agent *a, struct task *t, int64_t now_ms, int64_t end_ms)
{
    char dir[4400];

    if (!task_alive(t) || t->fenced)
        return;
    task_dir(a, t, dir, sizeof(dir));
    if (agent_write_atomic(dir, "fenced", "allotd out of reach\n") < 0)
        LOG_WARN("task", "%s: cannot record the fence", dir);
    t->fenced = true;
    task_stop(a, t, now_ms, task_fence_grace(a, now_ms, end_ms));
}

/* Reads the pid file: 0 when read. */
static int read_pid(const char *dir, struct task *t, long long *start)
{
    char buf[128];
    int sup = 0, pid = 0;

    *start = -1;
    if (agent_read_small(dir, "pid", buf, sizeof(buf)) < 0 ||
        sscanf(buf, "%d %d %lld", &sup, &pid, start) < 2 || pid <= 0)
        return -1;
    t->pid = pid;
    if (!t->sup)
        t->sup = -sup; /* not our child: only its liveness is checked */
    return 0;
}

static void read_exit(struct agent *a, struct task *t, const char *text)
{
    int n = 0;
    long long ran = -1;

    t->state = TASK_EXITED;
    if (sscanf(text, "%*s %*d %lld", &ran) == 1)
        t->runtime_ms = ran;
    if (sscanf(text, "signal %d", &n) == 1) {
        t->exit_code = 128 + n;
        allot_fmt(t->detail, sizeof(t->detail), "killed by signal %d (%s)", n, strsignal(n));
    } else {
        sscanf(text, "exit %d", &n);
        t->exit_code = n;
        if (n)
            allot_fmt(t->detail, sizeof(t->detail), "exited with status %d", n);
    }
    if (getuid() == 0 && cg_oom_kills(a->cfg.cgroup_root, t->key) > 0)
        allot_fmt(t->detail, sizeof(t->detail), "OOM killed: over its memory limit");
    if (*t->over) { /* the agent stopped it, over its GPU memory cap: it failed */
        allot_strlcpy(t->detail, t->over, sizeof(t->detail));
        if (!t->exit_code)
            t->exit_code = 128 + SIGKILL; /* even if it caught SIGTERM and exited 0 */
    }
    if (t->cancelled)
        allot_fmt(t->detail, sizeof(t->detail), "stopped by allot");
}

void task_poll(struct agent *a, struct task *t, int64_t now_ms)
{
    char dir[4400], buf[128];
    long long start;
    int status;

    /* reaped also once the task ended: its supervisor exits after it wrote
     * the exit file, and would stay a zombie */
    if (t->sup > 0 && waitpid(t->sup, &status, WNOHANG) == t->sup)
        t->sup = 0; /* reaped; its exit file says how the task ended */
    if (t->state == TASK_EXITED || t->state == TASK_LOST)
        return;
    task_dir(a, t, dir, sizeof(dir));
    if (t->pid <= 0 && read_pid(dir, t, &start) == 0 && t->state == TASK_STOPPING)
        kill(-t->pid, SIGTERM); /* asked to stop before its pid was known */
    if (agent_read_small(dir, "exit", buf, sizeof(buf)) == 0) {
        read_exit(a, t, buf);
        t->fenced |= agent_read_small(dir, "fenced", buf, sizeof(buf)) == 0; /* by its supervisor */
        if (getuid() == 0)
            cg_destroy(a->cfg.cgroup_root, t->key);
        rdma_task_release(t, dir);
        share_task_remove(a, t);
        cpubind_refresh(a); /* its cores, if it had any, go back to the pool */
        LOG_INFO("task", "job %lld task %d ended: %s", (long long)t->job, t->index,
                 *t->detail ? t->detail : "exit 0");
        return;
    }
    if (t->state == TASK_STARTING && t->pid > 0)
        t->state = TASK_RUNNING;
    /* no exit file and no supervisor: the process vanished with it */
    bool sup_gone = t->sup == 0 || (t->sup < 0 && kill(-t->sup, 0) < 0 && errno == ESRCH);
    if (sup_gone && (t->pid <= 0 || (kill(t->pid, 0) < 0 && errno == ESRCH)) &&
        agent_read_small(dir, "exit", buf, sizeof(buf)) < 0) {
        t->state = TASK_LOST;
        allot_fmt(t->detail, sizeof(t->detail), "its process vanished without an exit status");
        if (getuid() == 0)
            cg_destroy(a->cfg.cgroup_root, t->key);
        rdma_task_release(t, dir);
        share_task_remove(a, t);
        cpubind_refresh(a);
        return;
    }
    if (t->state == TASK_STOPPING && now_ms >= t->kill_at_ms && t->pid > 0) {
        kill(-t->pid, SIGKILL);
        if (getuid() == 0)
            cg_destroy(a->cfg.cgroup_root, t->key); /* also what left the group */
        t->kill_at_ms = now_ms + 1000;
    }
}

/* Removes what crun keeps of the task's container, if it had one. */
static void crun_delete(struct agent *a, const struct task *t, const char *dir)
{
    char bundle[4500], root[4200], cid[64], cfg[4600];
    struct stat st;
    pid_t pid;

    allot_fmt(bundle, sizeof(bundle), "%s/bundle", dir);
    if (stat(bundle, &st) < 0)
        return;
    allot_fmt(root, sizeof(root), "%s/../crun", a->tasks_dir);
    allot_fmt(cid, sizeof(cid), "allot-%s", t->key);
    pid = fork();
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDWR);
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        execlp(a->cfg.crun, a->cfg.crun, "--root", root, "delete", "-f", cid, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    allot_fmt(cfg, sizeof(cfg), "%s/config.json", bundle);
    unlink(cfg);
    rmdir(bundle);
}

void task_forget(struct agent *a, struct task *t)
{
    char dir[4400];

    /* an ended task's supervisor has written its exit file and is exiting:
     * waited for, so that no zombie is left once the task is forgotten */
    if (t->sup > 0 && waitpid(t->sup, NULL, t->state == TASK_EXITED ? 0 : WNOHANG) == t->sup)
        t->sup = 0;

    task_dir(a, t, dir, sizeof(dir));
    task_mig_release(a, dir);
    crun_delete(a, t, dir);
    rdma_task_release(t, dir); /* its VF netdevs leave the namespace before it goes */
    if (a->net)
        net_task_down(a->net, t->key);
    share_task_remove(a, t);
    region_down(dir);
    agent_rm_tree(AT_FDCWD, dir, 1);
    if (getuid() == 0)
        cg_destroy(a->cfg.cgroup_root, t->key);
    if (t->cpu_bind == CPU_BIND_CORES) { /* nothing of it is left: its cores are free */
        t->cpu_bind = CPU_BIND_NONE;
        cpubind_refresh(a);
    }
    if (getuid() == 0 && !job_has_other_task(a, t->job, t))
        jobfs_down(a, t->job); /* its last task here: the job's /tmp and /dev/shm go */
    /* --log-retention counts from here, the task's end, not from its last
     * output (a job quiet for days would lose its log at once) */
    char logf[4500];
    allot_fmt(logf, sizeof(logf), "%s/%lld/task-%d.log", a->logs_dir, (long long)t->job, t->index);
    if (utimensat(AT_FDCWD, logf, NULL, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOENT)
        LOG_WARN("task", "%s: %s", logf, strerror(errno));
}

int task_adopt_all(struct agent *a, struct task **out)
{
    DIR *d = opendir(a->tasks_dir);
    struct dirent *e;
    struct task *v = NULL;
    size_t n = 0, cap = 0;

    *out = NULL;
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        char dir[4400], buf[128];
        long long job;
        int index;
        long long start;
        struct task t = {.mps_gpu = -1};

        if (sscanf(e->d_name, "%lld-%d", &job, &index) != 2)
            continue;
        if (allot_grow((void **)&v, &cap, n + 1, sizeof(*v)) < 0)
            break;
        t.job = job;
        t.index = index;
        t.runtime_ms = -1;
        allot_fmt(t.key, sizeof(t.key), "%lld-%d", job, index);
        allot_fmt(dir, sizeof(dir), "%s/%s", a->tasks_dir, t.key);
        t.started_ms = allot_mono_ms();
        char jpath[4500];
        allot_fmt(jpath, sizeof(jpath), "%s/task.json", dir);
        json_t *tj = json_load_file(jpath, 0, NULL);
        t.gpu_mask = gpu_mask_of(a, tj);
        mem_cap_of(a, tj, &t);
        t.run = json_integer_value(json_object_get(tj, "run"));
        json_decref(tj);
        t.fenced = agent_read_small(dir, "fenced", buf, sizeof(buf)) == 0;
        if (agent_read_small(dir, "signalled", buf, sizeof(buf)) == 0) /* sent before */
            t.sig_seq = strtoll(buf, NULL, 10);
        agent_read_small(dir, "over", t.over, sizeof(t.over)); /* the watchdog stopped it */
        if (a->net)
            t.net = net_task_adopt(a->net, t.key, dir);
        rdma_task_adopt(&t, dir);
        cpubind_adopt(&t, dir);
        if (agent_read_small(dir, "exit", buf, sizeof(buf)) == 0) {
            read_exit(a, &t, buf);
        } else if (read_pid(dir, &t, &start) == 0 && task_proc_start(t.pid) == start &&
                   start >= 0) {
            t.state = TASK_RUNNING;
            if (*t.over) /* stopped over its GPU memory cap before the restart: again */
                task_stop(a, &t, allot_mono_ms(), 0);
        } else {
            t.state = TASK_LOST;
            allot_fmt(t.detail, sizeof(t.detail), "its process vanished while the agent was down");
        }
        if (t.state != TASK_RUNNING) /* ended while the agent was down: its VFs are free */
            rdma_task_release(&t, dir);
        LOG_INFO("task", "job %lld task %d found on disk: %s", job, index,
                 t.state == TASK_RUNNING ? "running, adopted"
                 : t.state == TASK_LOST  ? "vanished"
                                         : "ended");
        v[n++] = t;
    }
    closedir(d);
    *out = v;
    return (int)n;
}
