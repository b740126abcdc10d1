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
 * /tmp and /dev/shm; its own pid, ipc, uts and mount namespaces; the host's
 * network, or with tenant networks its task's namespace (net.h); the task's
 * user with no capabilities and no new privileges; the task's environment
 * and working directory; the device nodes of its own GPUs (and nvidiactl)
 * and of its RDMA VFs (uverbs) with the same device rules as the process
 * executor. It joins the task's cgroup (cgroupsPath), so the limits are
 * the ones cgroup.c set.
 */
#include "agent.h"
#include "net.h"

#include "allot/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A name of an image folder: no path tricks. */
static bool image_name_ok(const char *s)
{
    if (!*s || strlen(s) > 128 || !strcmp(s, ".") || strstr(s, ".."))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-' || *s == ':'))
            return false;
    return true;
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
    if (!image_name_ok(image)) {
        allot_fmt(why, wlen, "image \"%.60s\": want a name of [A-Za-z0-9._:-]", image);
        goto fail;
    }
    allot_fmt(rootfs, sizeof(rootfs), "%s/%s", a->cfg.image_dir, image);
    if (stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode)) {
        allot_fmt(why, wlen, "image %s: no root file system %s on this node", image, rootfs);
        goto fail;
    }
    for (char **e = envp; *e; e++)
        json_array_append_new(env, json_string(*e));
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
