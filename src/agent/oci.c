/*
 * The oci executor: a job that names an `image` runs as an OCI container
 * with crun. The image is a root file system the admin provides as a folder
 * IMAGE-DIR/NAME (docs/agent.md says how to make one); the agent writes a
 * bundle (STATE/tasks/KEY/bundle/config.json) around it and the task's
 * supervisor runs `crun --root STATE/crun run --bundle ... allot-KEY`
 * instead of the command, so the exit status, logs, stop with grace and
 * adoption after a restart work as for processes.
 *
 * The container: the image read-only, fresh /dev, /proc, /sys (read-only),
 * the job's /tmp and /dev/shm on the node (jobfs_dir, shared with its other
 * tasks here); its own pid, ipc, uts and mount namespaces; the host's
 * network, or with tenant networks its task's namespace (net.h); the task's
 * user with no capabilities and no new privileges; the task's environment
 * and working directory; the device nodes of its own GPUs (and nvidiactl)
 * and of its RDMA VFs (uverbs) with the same device rules as the process
 * executor. It joins the task's cgroup (cgroupsPath), so the limits are
 * the ones cgroup.c set. A GPU job also gets the node's driver libraries
 * (OCI_NV/lib64, first in LD_LIBRARY_PATH) and a fraction the
 * shim, its region and the GPU share folder (OCI_NV/allot).
 */
#include "agent.h"
#include "net.h"

#include "allot/common.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* In the container: the driver's libraries (lib64) and the shim's files
 * (allot), on a tmpfs of their own so that nothing is made in the image
 * but this folder. NVIDIA's CUDA images look for the driver in lib64. */
#define OCI_NV "/usr/local/nvidia"

/* The libraries of NVIDIA's driver a CUDA program loads, by soname. */
static const char *const driver_sonames[] = {"libcuda.so.1", "libnvidia-ml.so.1",
                                             "libnvidia-ptxjitcompiler.so.1", "libnvidia-nvvm.so.4",
                                             "libcudadebugger.so.1"};
static const char *const lib_dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                       "/usr/lib64", "/usr/lib"};

/* A read-only (ro) or read-write bind of host path src at dst. */
static json_t *bind_mount(const char *dst, const char *src, bool ro)
{
    return json_pack("{s:s,s:s,s:s,s:[s,s,s,s]}", "destination", dst, "type", "bind", "source", src,
                     "options", "bind", ro ? "ro" : "rw", "nosuid", "nodev");
}

json_t *oci_driver_mounts(const struct agent *a)
{
    json_t *mounts = json_array();
    char path[4200], dst[4300], real[4096];

    for (size_t i = 0; i < sizeof(driver_sonames) / sizeof(driver_sonames[0]); i++)
        for (size_t k = 0; k < sizeof(lib_dirs) / sizeof(lib_dirs[0]); k++) {
            allot_fmt(path, sizeof(path), "%s/%s", lib_dirs[k], driver_sonames[i]);
            if (!realpath(path, real))
                continue;
            allot_fmt(dst, sizeof(dst), OCI_NV "/lib64/%s", driver_sonames[i]);
            json_array_append_new(mounts, bind_mount(dst, real, true));
            break;
        }
    /* ... and those named with the driver's version (libnvidia-gpucomp.so.575.57.08, which
     * the compilers above load), from the first folder holding any */
    for (size_t k = 0; k < sizeof(lib_dirs) / sizeof(lib_dirs[0]); k++) {
        DIR *d = opendir(lib_dirs[k]);
        struct dirent *e;
        bool found = false;

        while (d && (e = readdir(d)))
            if (!strncmp(e->d_name, "libnvidia-gpucomp.so.", 21)) {
                allot_fmt(path, sizeof(path), "%s/%s", lib_dirs[k], e->d_name);
                allot_fmt(dst, sizeof(dst), OCI_NV "/lib64/%s", e->d_name);
                if (realpath(path, real)) {
                    json_array_append_new(mounts, bind_mount(dst, real, true));
                    found = true;
                }
            }
        if (d)
            closedir(d);
        if (found)
            break;
    }
    const char *p = a->cfg.driver_libs ? a->cfg.driver_libs : "";
    while (*p) {
        size_t n = strcspn(p, ",");

        allot_fmt(path, sizeof(path), "%.*s", (int)n, p);
        const char *base = strrchr(path, '/');
        if (*path && realpath(path, real)) {
            allot_fmt(dst, sizeof(dst), OCI_NV "/lib64/%s", base ? base + 1 : path);
            json_array_append_new(mounts, bind_mount(dst, real, true));
        } else if (*path) {
            LOG_WARN("task", "--driver-libs: %s: %s", path, strerror(errno));
        }
        p += n + (p[n] == ',');
    }
    return mounts;
}

/* The task's environment for the container (new reference): the shim's
 * files at their OCI_NV/allot paths, and OCI_NV/lib64 first in
 * LD_LIBRARY_PATH for a GPU task (gpu). */
static json_t *container_env(char **envp, bool gpu)
{
    json_t *env = json_array();
    bool lib_path = false;

    for (char **e = envp; env && *e; e++) {
        const char *v = strchr(*e, '=');
        size_t kl = v ? (size_t)(v - *e) : strlen(*e);
        json_t *x;

        if (kl == 10 && !strncmp(*e, "LD_PRELOAD", kl))
            x = json_string("LD_PRELOAD=" OCI_NV "/allot/liballot-cuda.so");
        else if (kl == 17 && !strncmp(*e, "ALLOT_SHIM_REGION", kl))
            x = json_string("ALLOT_SHIM_REGION=" OCI_NV "/allot/shim.region");
        else if (kl == 19 && !strncmp(*e, "ALLOT_GPU_SHARE_DIR", kl))
            x = json_string("ALLOT_GPU_SHARE_DIR=" OCI_NV "/allot/gpushare");
        else if (gpu && kl == 15 && !strncmp(*e, "LD_LIBRARY_PATH", kl) && v) {
            x = json_sprintf("LD_LIBRARY_PATH=" OCI_NV "/lib64%s%s", v[1] ? ":" : "", v + 1);
            lib_path = true;
        } else
            x = json_string(*e); /* as long as it is */
        json_array_append_new(env, x);
    }
    if (gpu && !lib_path)
        json_array_append_new(env, json_string("LD_LIBRARY_PATH=" OCI_NV "/lib64"));
    return env;
}

static json_t *device_rule(bool allow, const char *type, int major, int minor)
{
    json_t *r = json_pack("{s:b,s:s}", "allow", allow, "access", "rwm");

    if (type)
        json_object_set_new(r, "type", json_string(type));
    if (major >= 0)
        json_object_set_new(r, "major", json_integer(major));
    if (minor >= 0)
        json_object_set_new(r, "minor", json_integer(minor));
    return r;
}

int oci_bundle(const struct agent *a, json_t *d, const struct task *t, const char *dir, uid_t uid,
               gid_t gid, char **envp, const char *workdir, char *bundle, size_t blen, char *why,
               size_t wlen)
{
    const char *image = json_string_value(json_object_get(json_object_get(d, "spec"), "image"));
    json_t *cmd = json_object_get(json_object_get(d, "spec"), "command");
    char rootfs[4400], path[4500];
    struct stat st;
    json_t *env = json_array(), *devices = json_array(), *rules = json_array(), *x, *cfg;
    size_t i;

    if (!a->cfg.image_dir || !*a->cfg.image_dir) {
        allot_fmt(why, wlen, "this node runs no images (the agent has no --image-dir)");
        goto fail;
    }
    if (!allot_image_name_ok(image)) { /* allotd refuses it; a job stored before may not */
        allot_fmt(why, wlen, "image \"%.60s\": want a name of [A-Za-z0-9._:-]", image);
        goto fail;
    }
    allot_fmt(rootfs, sizeof(rootfs), "%s/%s", a->cfg.image_dir, image);
    if (stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode)) {
        allot_fmt(why, wlen, "image %s: no root file system %s on this node", image, rootfs);
        goto fail;
    }
    bool gpu = json_array_size(json_object_get(d, "gpus")) > 0;
    if (t->mps_gpu >= 0) {
        allot_fmt(why, wlen,
                  "a fraction shared through MPS (--sharing mps) cannot run in an "
                  "image yet; this node's fractions in images need --sharing shim");
        goto fail;
    }
    json_decref(env);
    env = container_env(envp, gpu);
    /* the task's GPUs as device nodes, and the rules of cg_device_rules */
    struct cg_limits lim = {0};
    struct dev_rule dr[CG_MAX_DEV_RULES];
    json_array_append_new(rules, device_rule(false, NULL, -1, -1));
    json_array_append_new(devices, json_pack("{s:s,s:s,s:i,s:i,s:i}", "path", "/dev/nvidiactl",
                                             "type", "c", "major", NVIDIA_MAJOR, "minor",
                                             NVIDIACTL_MINOR, "fileMode", 0666));
    json_array_foreach(json_object_get(d, "gpus"), i, x)
    {
        json_int_t g = json_integer_value(x);
        char dev[64];

        if (g < 0 || g >= a->inv.n_gpus || lim.n_gpu_minors == AGENT_MAX_GPUS)
            continue;
        lim.gpu_minors[lim.n_gpu_minors++] = a->inv.gpus[g].minor;
        allot_fmt(dev, sizeof(dev), "/dev/nvidia%d", a->inv.gpus[g].minor);
        json_array_append_new(devices, json_pack("{s:s,s:s,s:i,s:i,s:i}", "path", dev, "type", "c",
                                                 "major", NVIDIA_MAJOR, "minor",
                                                 a->inv.gpus[g].minor, "fileMode", 0666));
    }
    for (int k = 0; k < t->n_devs; k++) { /* its RDMA VFs' uverbs, its MIG capabilities */
        lim.devs[lim.n_devs++] = (struct dev_rule){t->devs[k].major, t->devs[k].minor};
        json_array_append_new(devices, json_pack("{s:s,s:s,s:i,s:i,s:i}", "path", t->devs[k].path,
                                                 "type", "c", "major", t->devs[k].major, "minor",
                                                 t->devs[k].minor, "fileMode", t->devs[k].mode));
    }
    int n_dr = cg_device_rules(&lim, dr);
    for (int k = 0; k < n_dr; k++)
        json_array_append_new(rules, device_rule(true, "c", dr[k].major, dr[k].minor));
    char cgpath[256], tmp_size[48];
    allot_fmt(cgpath, sizeof(cgpath), "/%s/%s", a->cfg.cgroup_root, t->key);
    allot_fmt(tmp_size, sizeof(tmp_size), "size=%lld", (long long)a->cfg.tmp_size);
    cfg = json_pack(
        "{s:s,s:{s:b,s:{s:i,s:i},s:O,s:o,s:s,s:b,s:{s:[],s:[],s:[],s:[],s:[]}},"
        "s:{s:s,s:b},s:s,"
        "s:[{s:s,s:s,s:s},{s:s,s:s,s:s,s:[s,s,s,s]},{s:s,s:s,s:s,s:[s,s,s,s,s,s]},"
        "{s:s,s:s,s:s,s:[s,s,s,s,s]},{s:s,s:s,s:s,s:[s,s,s,s]},{s:s,s:s,s:s,s:[s,s,s,s]}],"
        "s:{s:[{s:s},{s:s},{s:s},{s:s}],s:s,s:o,s:{s:o},s:[s,s,s,s],s:[s,s,s]}}",
        "ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", (int)uid, "gid", (int)gid,
        "args", cmd, "env", env, "cwd", workdir && *workdir ? workdir : "/", "noNewPrivileges", 1,
        "capabilities", "bounding", "effective", "inheritable", "permitted", "ambient", "root",
        "path", rootfs, "readonly", 1, "hostname", "allot-job", "mounts", "destination", "/proc",
        "type", "proc", "source", "proc", "destination", "/dev", "type", "tmpfs", "source", "tmpfs",
        "options", "nosuid", "strictatime", "mode=755", "size=65536k", "destination", "/dev/pts",
        "type", "devpts", "source", "devpts", "options", "nosuid", "noexec", "newinstance",
        "ptmxmode=0666", "mode=0620", "gid=5", "destination", "/dev/shm", "type", "tmpfs", "source",
        "shm", "options", "nosuid", "noexec", "nodev", "mode=1777", tmp_size, "destination", "/tmp",
        "type", "tmpfs", "source", "tmpfs", "options", "nosuid", "nodev", "mode=1777", tmp_size,
        "destination", "/sys", "type", "sysfs", "source", "sysfs", "options", "nosuid", "noexec",
        "nodev", "ro",
        /* linux */
        "linux", "namespaces", "type", "pid", "type", "ipc", "type", "uts", "type", "mount",
        "cgroupsPath", cgpath, "devices", devices, "resources", "devices", rules, "maskedPaths",
        "/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware", "readonlyPaths",
        "/proc/bus", "/proc/sys", "/proc/sysrq-trigger");
    /* env, devices and rules belong to cfg now (json_pack "o"), also on failure */
    if (!cfg) {
        allot_fmt(why, wlen, "cannot build the container's configuration");
        return -1;
    }
    /* what the job writes is its own unless it says otherwise (as for the
     * process executor) */
    json_object_set_new(json_object_get(json_object_get(cfg, "process"), "user"), "umask",
                        json_integer(077));
    /* the job's /tmp and /dev/shm on this node, which its tasks share (as
     * the process executor's) in place of the container's own */
    size_t mi;
    json_t *m;
    json_array_foreach(json_object_get(cfg, "mounts"), mi, m)
    {
        const char *dst = json_string_value(json_object_get(m, "destination"));
        char src[4500];

        if (!dst || (strcmp(dst, "/tmp") != 0 && strcmp(dst, "/dev/shm") != 0))
            continue;
        jobfs_dir(a, t->job, !strcmp(dst, "/tmp") ? "tmp" : "shm", src, sizeof(src));
        json_array_set_new(json_object_get(cfg, "mounts"), mi, bind_mount(dst, src, false));
    }
    if (gpu) { /* the driver's libraries, and a fraction's shim with its files */
        json_t *mounts = json_object_get(cfg, "mounts");
        /* each folder a tmpfs of mode 0755, so that what crun makes below
         * /usr/local/nvidia lies in them and not in the image */
        static const char *const dirs[] = {OCI_NV, OCI_NV "/lib64", OCI_NV "/allot"};
        for (size_t k = 0; k < sizeof(dirs) / sizeof(dirs[0]); k++)
            json_array_append_new(mounts,
                                  json_pack("{s:s,s:s,s:s,s:[s,s,s,s]}", "destination", dirs[k],
                                            "type", "tmpfs", "source", "tmpfs", "options", "nosuid",
                                            "nodev", "mode=755", "size=64k"));
        json_array_extend(mounts, a->driver_mounts); /* found once, at the agent's start */
        for (char **e = envp; *e; e++) {
            if (!strncmp(*e, "LD_PRELOAD=", 11))
                json_array_append_new(mounts,
                                      bind_mount(OCI_NV "/allot/liballot-cuda.so", *e + 11, true));
            else if (!strncmp(*e, "ALLOT_SHIM_REGION=", 18))
                json_array_append_new(mounts,
                                      bind_mount(OCI_NV "/allot/shim.region", *e + 18, false));
            else if (!strncmp(*e, "ALLOT_GPU_SHARE_DIR=", 20))
                json_array_append_new(mounts, bind_mount(OCI_NV "/allot/gpushare", *e + 20, false));
        }
    }
    if (t->net) { /* its tenant network (net.h): the namespace the agent made */
        char ns[96], nspath[160];
        net_ns_name(t->key, ns, sizeof(ns));
        allot_fmt(nspath, sizeof(nspath), "/run/netns/%s", ns);
        json_array_append_new(json_object_get(json_object_get(cfg, "linux"), "namespaces"),
                              json_pack("{s:s,s:s}", "type", "network", "path", nspath));
    }
    allot_fmt(bundle, blen, "%s/bundle", dir);
    allot_fmt(path, sizeof(path), "%s/config.json", bundle);
    if ((mkdir(bundle, 0700) < 0 && errno != EEXIST) ||
        json_dump_file(cfg, path, JSON_INDENT(1)) < 0) {
        allot_fmt(why, wlen, "cannot write %s", path);
        json_decref(cfg);
        return -1;
    }
    json_decref(cfg);
    return 0;
fail:
    json_decref(env);
    json_decref(devices);
    json_decref(rules);
    return -1;
}
