/*
 * The node's inventory: CPUs, memory and GPUs. With --emulate the GPUs
 * come from the catalog ("2xH100-80GB"), each with a stable UUID made from
 * the node name and a character device the agent creates in STATE/dev with
 * NVIDIA's major number, so that everything above the device layer (the
 * cgroup device rules, CUDA_VISIBLE_DEVICES, the scheduler) is the real
 * path. Otherwise the GPUs are the ones NVML reports (nvml.c). The RDMA
 * devices and their SR-IOV VFs come from sysfs (rdma.c).
 */
#include "agent.h"
#include "rdma.h"

#include "allot/common.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int inventory_parse_emulate(const char *spec, const struct allot_catalog *cat,
                            struct agent_inventory *inv, char *err, size_t errlen)
{
    const char *p = spec;

    inv->n_gpus = 0;
    while (*p) {
        char model[64];
        char *end;
        long n = strtol(p, &end, 10);
        size_t len;
        int m;

        if (end == p || *end != 'x' || n < 1 || n > AGENT_MAX_GPUS) {
            allot_fmt(err, errlen, "--emulate: want COUNTxMODEL[,COUNTxMODEL...], got \"%s\"", p);
            return -1;
        }
        p = end + 1;
        len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(model)) {
            allot_fmt(err, errlen, "--emulate: a GPU model after \"x\"");
            return -1;
        }
        memcpy(model, p, len);
        model[len] = '\0';
        m = allot_catalog_find_model(cat, model);
        if (m < 0) {
            allot_fmt(err, errlen, "--emulate: unknown GPU model \"%s\"", model);
            return -1;
        }
        if (inv->n_gpus && strcmp(inv->gpus[0].model, cat->models[m].name) != 0) {
            allot_fmt(err, errlen,
                      "--emulate: all GPUs of one model (allotd registers one model per node), "
                      "got %s and %s",
                      inv->gpus[0].model, cat->models[m].name);
            return -1;
        }
        if (inv->n_gpus + n > AGENT_MAX_GPUS) {
            allot_fmt(err, errlen, "--emulate: at most %d GPUs", AGENT_MAX_GPUS);
            return -1;
        }
        for (long i = 0; i < n; i++) {
            struct agent_gpu *g = &inv->gpus[inv->n_gpus];
            g->index = g->minor = inv->n_gpus;
            g->nvml_index = -1;
            allot_strlcpy(g->model, cat->models[m].name, sizeof(g->model));
            g->mem_mib = cat->models[m].memory_mib;
            inv->n_gpus++;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    if (!inv->n_gpus) {
        allot_fmt(err, errlen, "--emulate: no GPU");
        return -1;
    }
    inv->emulated = true;
    return 0;
}

/* A UUID-shaped name, stable for a node name and index. */
static void emulated_uuid(const char *node, int i, char *out, size_t len)
{
    uint64_t h = allot_fnv1a(ALLOT_FNV1A_INIT, node, strlen(node));
    uint64_t h2 = (h ^ (uint64_t)(i + 1)) * 1099511628211ULL;
    allot_fmt(out, len, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(h >> 32),
              (unsigned)(h >> 16) & 0xffff, 0x4000u | ((unsigned)h & 0x0fff),
              0x8000u | ((unsigned)(h2 >> 48) & 0x3fff),
              (unsigned long long)(h2 & 0xffffffffffffULL));
}

static int64_t mem_total_mib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = 0;

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024;
}

int inventory_build(const struct agent_config *cfg, const struct allot_catalog *cat,
                    struct agent_inventory *inv, struct nvml **nv, char *err, size_t errlen)
{
    memset(inv, 0, sizeof(*inv));
    *nv = NULL;
    inv->cpu_milli = cfg->cpus_milli ? cfg->cpus_milli : sysconf(_SC_NPROCESSORS_ONLN) * 1000;
    inv->mem_mib = cfg->memory ? cfg->memory / (1024 * 1024) : mem_total_mib();
    if (cfg->emulate && *cfg->emulate) {
        char path[4200];

        if (inventory_parse_emulate(cfg->emulate, cat, inv, err, errlen) < 0)
            return -1;
        allot_fmt(inv->dev_dir, sizeof(inv->dev_dir), "%s/dev", cfg->state_dir);
        if (mkdir(inv->dev_dir, 0755) < 0 && errno != EEXIST) {
            allot_fmt(err, errlen, "%s: %s", inv->dev_dir, strerror(errno));
            return -1;
        }
        for (int i = 0; i < inv->n_gpus; i++) {
            int rc;

            emulated_uuid(cfg->name, i, inv->gpus[i].uuid, sizeof(inv->gpus[i].uuid));
            allot_fmt(path, sizeof(path), "%s/nvidia%d", inv->dev_dir, inv->gpus[i].minor);
            if ((rc = agent_mkchr(path, NVIDIA_MAJOR, inv->gpus[i].minor, 0666)) < 0)
                LOG_WARN("agent", "cannot make %s (%s): device rules are not testable here", path,
                         strerror(-rc));
        }
        allot_fmt(path, sizeof(path), "%s/nvidiactl", inv->dev_dir);
        agent_mkchr(path, NVIDIA_MAJOR, NVIDIACTL_MINOR, 0666);
        /* the driver's procfs for MIG capabilities (migcaps.c), made up */
        int minors[AGENT_MAX_GPUS], rc;
        for (int i = 0; i < inv->n_gpus; i++)
            minors[i] = inv->gpus[i].minor;
        allot_fmt(inv->proc_dir, sizeof(inv->proc_dir), "%s/proc", cfg->state_dir);
        if ((rc = migcaps_emulate(inv->proc_dir, minors, inv->n_gpus)) < 0) {
            allot_fmt(err, errlen, "%s: %s", inv->proc_dir, strerror(-rc));
            return -1;
        }
        return 0;
    }
    allot_strlcpy(inv->dev_dir, "/dev", sizeof(inv->dev_dir));
    allot_strlcpy(inv->proc_dir, "/proc", sizeof(inv->proc_dir));
    return nvml_inventory(cfg->nvml_lib, cat, inv, nv, err, errlen);
}

/* allotd's AGENTPROTO_MAX_LABELS, less the agent's own allot.io/emulated */
#define INVENTORY_MAX_LABELS 31

json_t *inventory_labels(const char *s, char *err, size_t errlen)
{
    struct allot_label lab[INVENTORY_MAX_LABELS];
    char *buf = allot_strdup(s ? s : "");
    json_t *o = json_object();
    int n = buf && *buf ? allot_labels_parse(buf, lab, INVENTORY_MAX_LABELS, err, errlen) : 0;

    for (int i = 0; i < n && o; i++) {
        if (!strncmp(lab[i].key, "allot.io/", 9)) {
            allot_fmt(err, errlen, "label \"%s\": allot.io/ keys are the agent's own", lab[i].key);
            n = -1;
        } else if (json_object_set_new(o, lab[i].key, json_string(lab[i].value))) {
            allot_fmt(err, errlen, "out of memory");
            n = -1;
        }
    }
    if (!buf || !o)
        allot_fmt(err, errlen, "out of memory");
    allot_free(buf);
    if (n < 0 || !buf || !o) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *inventory_json(const struct agent_config *cfg, const struct agent_inventory *inv)
{
    json_t *gpus = json_array();

    for (int i = 0; i < inv->n_gpus; i++)
        json_array_append_new(
            gpus, json_pack("{s:s,s:s}", "model", inv->gpus[i].model, "uuid", inv->gpus[i].uuid));
    json_t *o = json_pack("{s:s,s:f,s:I,s:s,s:o,s:{s:s}}", "name", cfg->name, "cpus",
                          (double)inv->cpu_milli / 1000.0, "memory", (json_int_t)inv->mem_mib,
                          "gpu_mode", cfg->gpu_mode, "gpus", gpus, "labels", "allot.io/emulated",
                          inv->emulated ? "true" : "false");
    json_t *labels = inventory_labels(cfg->labels, NULL, 0); /* checked at start (labels_ok) */
    if (o && labels)
        json_object_update(json_object_get(o, "labels"), labels);
    json_decref(labels);
    if (o && inv->island_size > 0)
        json_object_set_new(o, "island_size", json_integer(inv->island_size));
    /* tenant networks (docs/network.md): the overlay's address, the RDMA devices */
    json_t *rdma = rdma_inventory_json(cfg->sysfs);
    if (o && !strcmp(cfg->network, "on") && cfg->underlay_ip && *cfg->underlay_ip)
        json_object_set_new(o, "underlay", json_string(cfg->underlay_ip));
    if (o && (!strcmp(cfg->network, "on") || json_array_size(rdma)))
        json_object_set(o, "rdma", rdma);
    json_decref(rdma);
    return o;
}
