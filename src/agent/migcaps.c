/*
 * MIG capability devices (docs/agent.md, "MIG"). A process opens a MIG
 * instance by proving it holds two capabilities: its GPU instance's
 * ("gpuG/giI/access") and its compute instance's ("gpuG/giI/ciC/access").
 * With the driver in devfs mode each capability is a character device,
 * /dev/nvidia-caps/nvidia-capN of the nvidia-caps major, whose minor the
 * driver lists in /proc/driver/nvidia-caps/mig-minors; the task's device
 * rules (cg_device_rules, the OCI runtime's) then let it open its own
 * instance's two and no other. In procfs mode (nv_cap_enable_devfs=0) the
 * driver checks readable files under /proc/driver/nvidia/capabilities
 * instead, which device rules do not reach: the agent refuses MIG tasks
 * there rather than let one tenant open another's instance.
 *
 * Emulated nodes get a made-up procfs tree (migcaps_emulate) and device
 * nodes of a major no driver has, so the same path runs without a GPU:
 * an allowed node opens with ENXIO, a denied one with EPERM.
 */
#include "agent.h"

#include "allot/common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define EMU_GIS 15 /* GPU instance ids per GPU in the driver's table */
#define EMU_CIS 8  /* compute instance ids per GPU instance */

int migcaps_minor(const char *table, int gpu, int gi, int ci)
{
    FILE *f = fopen(table, "r");
    char want[96], line[160], name[128];
    int minor, found = ALLOT_ENOENT;

    if (!f)
        return ALLOT_EIO;
    if (ci < 0)
        allot_fmt(want, sizeof(want), "gpu%d/gi%d/access", gpu, gi);
    else
        allot_fmt(want, sizeof(want), "gpu%d/gi%d/ci%d/access", gpu, gi, ci);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "%127s %d", name, &minor) == 2 && minor >= 0 && !strcmp(name, want)) {
            found = minor;
            break;
        }
    fclose(f);
    return found;
}

/* Whether the driver checks MIG capabilities through /proc: its module
 * parameter says 0. No parameter (drivers without it have devfs only, or
 * no driver) is devfs. */
static bool procfs_mode(const char *sysfs)
{
    char path[4200], buf[16] = "";
    FILE *f;

    allot_fmt(path, sizeof(path), "%s/module/nvidia/parameters/nv_cap_enable_devfs", sysfs);
    if (!(f = fopen(path, "r")))
        return false;
    bool off = fgets(buf, sizeof(buf), f) && buf[0] == '0';
    fclose(f);
    return off;
}

int migcaps_devs(const char *proc, const char *sysfs, int gpu, int gi, int ci,
                 struct task_dev out[2], char *why, size_t wlen)
{
    char table[4200], devices[4200];
    int major, n = 0;

    if (procfs_mode(sysfs)) {
        allot_fmt(why, wlen,
                  "MIG: the driver checks instance access in /proc (nv_cap_enable_devfs=0), "
                  "where any task given the GPU could open every instance on it; load nvidia "
                  "with nv_cap_enable_devfs=1");
        return -1;
    }
    allot_fmt(devices, sizeof(devices), "%s/devices", proc);
    if ((major = agent_char_major(devices, "nvidia-caps")) < 0) {
        allot_fmt(why, wlen, "MIG: no nvidia-caps device in %s: the instance cannot be isolated",
                  devices);
        return -1;
    }
    allot_fmt(table, sizeof(table), "%s/driver/nvidia-caps/mig-minors", proc);
    for (int k = 0; k < 2; k++) {
        int minor;

        if (k == 1 && ci < 0)
            break;
        if ((minor = migcaps_minor(table, gpu, gi, k ? ci : -1)) < 0) {
            char what[64];

            if (k)
                allot_fmt(what, sizeof(what), "GPU %d instance %d compute instance %d", gpu, gi,
                          ci);
            else
                allot_fmt(what, sizeof(what), "GPU %d instance %d", gpu, gi);
            allot_fmt(why, wlen, "MIG: %s %s %s", table,
                      minor == ALLOT_EIO ? "cannot be read for" : "lists no capability of", what);
            return -1;
        }
        out[n].major = major;
        out[n].minor = minor;
        out[n].mode = 0444;
        allot_fmt(out[n].path, sizeof(out[n].path), "/dev/nvidia-caps/nvidia-cap%d", minor);
        n++;
    }
    return n;
}

int migcaps_mknod(const char *dev_dir, const struct task_dev *d)
{
    char path[4200];

    allot_fmt(path, sizeof(path), "%s/nvidia-caps", dev_dir);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return -errno;
    allot_fmt(path, sizeof(path), "%s/nvidia-caps/nvidia-cap%d", dev_dir, d->minor);
    return agent_mkchr(path, d->major, d->minor, d->mode);
}

int migcaps_emulate(const char *root, const int *gpus, int n)
{
    char path[4200];
    FILE *f;
    int rc;

    allot_fmt(path, sizeof(path), "%s/driver/nvidia-caps", root);
    if ((rc = agent_mkdir_p(path)) < 0)
        return rc;
    allot_fmt(path, sizeof(path), "%s/devices", root);
    if (!(f = fopen(path, "w")))
        return -errno;
    fprintf(f, "Character devices:\n%d nvidia-caps\n\nBlock devices:\n", MIGCAPS_EMU_MAJOR);
    if (fclose(f) != 0)
        return -errno;
    allot_fmt(path, sizeof(path), "%s/driver/nvidia-caps/mig-minors", root);
    if (!(f = fopen(path, "w")))
        return -errno;
    rc = 0;
    fprintf(f, "config 1\nmonitor 2\n");
    for (int g = 0; g < n; g++)
        for (int gi = 0; gi < EMU_GIS; gi++) {
            int base = 3 + (g * EMU_GIS + gi) * (EMU_CIS + 1);

            fprintf(f, "gpu%d/gi%d/access %d\n", gpus[g], gi, base);
            for (int ci = 0; ci < EMU_CIS; ci++)
                fprintf(f, "gpu%d/gi%d/ci%d/access %d\n", gpus[g], gi, ci, base + 1 + ci);
        }
    if (ferror(f))
        rc = -EIO;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    return rc;
}
