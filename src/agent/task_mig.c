/*
 * A task's MIG instance (docs/agent.md, "MIG"): made through NVML at the
 * placement the scheduler chose and recorded in the task's folder (`mig`),
 * its capability devices given to the task alone, and destroyed when the
 * task is forgotten. Called from task.c on the agent's main thread.
 */
#include "agent.h"
#include "devnode.h"
#include "nvml.h"

#include "allot/common.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

/* agent.h; the instance is made here, at exactly the scheduler's placement. */
int task_mig_prepare(struct agent *a, json_t *d, const char *dir, char *uuid, size_t len, int *gi,
                     int *ci, char *why, size_t wlen)
{
    const char *prof = json_string_value(json_object_get(d, "mig_profile"));
    json_int_t start = json_integer_value(json_object_get(d, "mig_start"));
    json_int_t g = json_integer_value(json_array_get(json_object_get(d, "gpus"), 0));
    const struct agent_gpu *gpu;
    struct nvml_mig_instance inst;
    char text[64];
    int m;

    *uuid = '\0';
    if (!prof)
        return 0;
    if (g < 0 || g >= a->inv.n_gpus) {
        allot_fmt(why, wlen, "MIG %s: GPU %lld is not on this node", prof, (long long)g);
        return -1;
    }
    gpu = &a->inv.gpus[g];
    if (!a->nv || gpu->nvml_index < 0) {
        char key[200];
        uint64_t h;
        allot_fmt(key, sizeof(key), "%s/%s/%lld", gpu->uuid, prof, (long long)start);
        h = allot_fnv1a(ALLOT_FNV1A_INIT, key, strlen(key));
        allot_fmt(uuid, len, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned)(h >> 32),
                  (unsigned)(h >> 16) & 0xffff, 0x4000u | ((unsigned)h & 0xfff),
                  0x8000u | ((unsigned)(h >> 40) & 0x3fff),
                  (unsigned long long)(h * 2654435761ULL) & 0xffffffffffffULL);
        *gi = (int)start + 1;
        *ci = 0;
        return 0;
    }
    m = allot_catalog_find_model(a->cat, gpu->model);
    if (nvml_mig_create(a->nv, gpu->nvml_index, prof, (int)start,
                        m >= 0 ? &a->cat->models[m] : NULL, &inst) < 0) {
        allot_fmt(why, wlen, "MIG %s at %lld on GPU %lld: %s", prof, (long long)start, (long long)g,
                  nvml_last_error(a->nv));
        return -1;
    }
    allot_fmt(text, sizeof(text), "%d %d\n", gpu->nvml_index, inst.gi_id);
    if (agent_write_atomic(dir, "mig", text) < 0) { /* unrecorded, a restart would destroy it */
        if (nvml_mig_destroy(a->nv, gpu->nvml_index, inst.gi_id) < 0)
            mig_orphan(a, gpu->nvml_index, inst.gi_id, nvml_last_error(a->nv));
        return allot_fmt(why, wlen, "MIG %s: cannot record instance %d", prof, inst.gi_id), -1;
    }
    allot_strlcpy(uuid, inst.uuid, len);
    *gi = inst.gi_id;
    *ci = inst.ci_id;
    LOG_INFO("task", "MIG %s at %lld on GPU %lld: instance %d (%s)", prof, (long long)start,
             (long long)g, inst.gi_id, inst.uuid);
    return 0;
}

/* agent.h */
int task_mig_caps_give(struct agent *a, struct task *t, int g, int gi, int ci, char *devs,
                       size_t dlen, char *why, size_t wlen)
{
    struct task_dev caps[2];
    int n =
        migcaps_devs(a->inv.proc_dir, a->cfg.sysfs, a->inv.gpus[g].minor, gi, ci, caps, why, wlen);

    for (int k = 0; k < n; k++) {
        int rc = migcaps_mknod(a->inv.dev_dir, &caps[k]);
        size_t dl = strlen(devs);

        if (rc < 0 || t->n_devs == AGENT_MAX_TASK_DEVS) {
            allot_fmt(why, wlen, "MIG: cannot give the task %s: %s", caps[k].path,
                      rc < 0 ? strerror(-rc) : "too many devices");
            return -1;
        }
        t->devs[t->n_devs++] = caps[k];
        allot_fmt(devs + dl, dlen - dl, "%s%s/nvidia-caps/nvidia-cap%d", dl ? "," : "",
                  a->inv.dev_dir, caps[k].minor);
    }
    return n < 0 ? -1 : 0;
}

/* agent.h */
void task_mig_release(struct agent *a, const char *dir)
{
    char buf[64];
    int idx, gi;

    if (!a->nv || agent_read_small(dir, "mig", buf, sizeof(buf)) < 0 ||
        sscanf(buf, "%d %d", &idx, &gi) != 2)
        return;
    if (nvml_mig_destroy(a->nv, idx, gi) < 0)
        mig_orphan(a, idx, gi, nvml_last_error(a->nv)); /* its record goes with the folder */
    else
        LOG_INFO("task", "MIG instance %d on GPU %d destroyed", gi, idx);
}
