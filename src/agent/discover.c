/*
 * The inventory's GPUs from NVML (nvml.c): every GPU NVML lists, with its
 * UUID, device minor and memory, named by the catalog model NVML's name
 * maps to. A missing NVML library means a node without GPUs (logged); a
 * GPU whose model the catalog does not know, or one NVML reports unhealthy,
 * is left out of the inventory with the reason logged (it is not offered
 * to the scheduler).
 */
#include "agent.h"

#include "allot/common.h"
#include "log.h"
#include "nvml.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* GPUs per NVLink island when every island (connected group of the
 * offered GPUs) has the same size, else 0 (allotd then sees one island). */
static int islands(const struct nvml_gpu *gpus, int n, const struct agent_inventory *inv)
{
    int parent[AGENT_MAX_GPUS], size[AGENT_MAX_GPUS] = {0}, k = 0;

    for (int i = 0; i < inv->n_gpus; i++)
        parent[i] = i;
    for (int i = 0; i < inv->n_gpus; i++)
        for (int j = 0; j < n; j++) {
            if (gpus[j].index != inv->gpus[i].nvml_index)
                continue;
            for (int p = 0; p < gpus[j].n_peers; p++)
                for (int m = 0; m < inv->n_gpus; m++)
                    if (inv->gpus[m].nvml_index == gpus[j].peers[p].index) {
                        int a = i, b = m;
                        while (parent[a] != a)
                            a = parent[a];
                        while (parent[b] != b)
                            b = parent[b];
                        parent[a] = b;
                    }
        }
    for (int i = 0; i < inv->n_gpus; i++) {
        int r = i;
        while (parent[r] != r)
            r = parent[r];
        size[r]++;
    }
    for (int i = 0; i < inv->n_gpus; i++) {
        if (!size[i])
            continue;
        if (k && size[i] != k)
            return 0;
        k = size[i];
    }
    return k == inv->n_gpus ? 0 : k;
}

int nvml_inventory(const char *lib, const struct allot_catalog *cat, struct agent_inventory *inv,
                   struct nvml **nv_out, char *err, size_t errlen)
{
    struct nvml_gpu *gpus = allot_calloc(AGENT_MAX_GPUS, sizeof(*gpus));
    char why[256];
    struct nvml *nv;
    int n;

    inv->n_gpus = 0;
    if (!gpus) {
        allot_fmt(err, errlen, "out of memory");
        return -1;
    }
    *nv_out = NULL;
    nv = nvml_open(lib, why, sizeof(why));
    if (!nv) {
        LOG_WARN("agent", "no GPUs: %s", why);
        allot_free(gpus);
        return 0;
    }
    n = nvml_devices(nv, gpus, AGENT_MAX_GPUS);
    if (n > AGENT_MAX_GPUS)
        LOG_WARN("agent", "NVML lists %d GPUs; the first %d are used", n, AGENT_MAX_GPUS);
    for (int i = 0; i < n && i < AGENT_MAX_GPUS; i++) {
        const struct nvml_gpu *g = &gpus[i];
        const char *model = nvml_model_name(g->name, g->memory_mib, cat);
        struct agent_gpu *a = &inv->gpus[inv->n_gpus];

        if (!model) {
            LOG_WARN("agent", "GPU %d (%s, %lld MiB): no catalog model; not offered", g->index,
                     g->name, (long long)g->memory_mib);
            continue;
        }
        if (g->health == ALLOT_NVML_UNHEALTHY || g->lost) {
            LOG_WARN("agent", "GPU %d (%s) is unhealthy: %s; not offered", g->index, g->uuid,
                     g->health_text);
            continue;
        }
        a->index = inv->n_gpus;
        a->nvml_index = g->index;
        a->minor = g->minor >= 0 ? g->minor : g->index;
        allot_strlcpy(a->model, model, sizeof(a->model));
        allot_strlcpy(a->uuid, g->uuid, sizeof(a->uuid));
        a->mem_mib = g->memory_mib;
        inv->n_gpus++;
    }
    if (n < 0)
        LOG_WARN("agent", "NVML cannot list the GPUs: %s", nvml_last_error(nv));
    inv->island_size = islands(gpus, n < AGENT_MAX_GPUS ? n : AGENT_MAX_GPUS, inv);
    LOG_INFO("agent", "NVML: %d GPUs offered", inv->n_gpus);
    *nv_out = nv; /* kept for MIG and samples */
    allot_free(gpus);
    return 0;
}

void nvml_mig_enable_all(struct nvml *nv, const struct agent_inventory *inv)
{
    for (int i = 0; nv && i < inv->n_gpus; i++) {
        bool now = false;
        int rc = nvml_mig_set_mode(nv, inv->gpus[i].nvml_index, true, &now);

        if (rc < 0)
            LOG_WARN("agent", "GPU %d: cannot turn MIG on: %s", i, nvml_last_error(nv));
        else if (!now)
            LOG_WARN("agent", "GPU %d: MIG mode is pending until the GPU is reset", i);
    }
}

/* Whether a task folder records GPU instance gi on NVML GPU idx: 1 yes,
 * 0 no, -1 cannot tell (none does, but the folder or a record is
 * unreadable, or a record is garbled), with the reason in why: nothing is
 * destroyed on a guess. */
static int mig_held(const struct agent *a, int idx, int gi, char *why, size_t wlen)
{
    DIR *d = opendir(a->tasks_dir);
    struct dirent *e;
    int held = 0;
    bool unsure = false;

    if (!d) {
        if (errno == ENOENT)
            return 0;
        allot_fmt(why, wlen, "%s: %s", a->tasks_dir, strerror(errno));
        return -1;
    }
    while (!held && (e = readdir(d))) {
        char dir[4400], buf[64];
        int i, g;

        if (e->d_name[0] == '.')
            continue;
        allot_fmt(dir, sizeof(dir), "%s/%s", a->tasks_dir, e->d_name);
        if (agent_read_small(dir, "mig", buf, sizeof(buf)) < 0) {
            if (errno != ENOENT && errno != ENOTDIR && !unsure) {
                allot_fmt(why, wlen, "%s/mig: %s", dir, strerror(errno));
                unsure = true;
            }
        } else if (sscanf(buf, "%d %d", &i, &g) != 2) {
            if (!unsure)
                allot_fmt(why, wlen, "%s/mig: not an instance record", dir);
            unsure = true;
        } else {
            held = i == idx && g == gi;
        }
    }
    closedir(d);
    return held ? 1 : unsure ? -1 : 0;
}

/* Marks GPU i (agent index) unhealthy for `text`, logged when it is new:
 * mig_foreign_retry looks again every five heartbeat intervals. */
static void mig_mark(struct agent *a, int i, const char *text)
{
    if (strcmp(a->mig_foreign[i], text) != 0)
        LOG_ERROR("agent", "GPU %d: %s: reported unhealthy, looked at again every %lld ms", i, text,
                  (long long)(5 * a->cfg.heartbeat));
    allot_strlcpy(a->mig_foreign[i], text, sizeof(a->mig_foreign[i]));
}

void mig_reclaim_foreign(struct agent *a)
{
    struct nvml_gpu *gpus;
    int n;

    if (!a->nv || strcmp(a->cfg.gpu_mode, "mig") != 0)
        return;
    a->mig_retry_at = allot_mono_ms() + 5 * a->cfg.heartbeat;
    gpus = allot_calloc(AGENT_MAX_GPUS, sizeof(*gpus));
    n = gpus ? nvml_devices(a->nv, gpus, AGENT_MAX_GPUS) : -1;
    for (int i = 0; i < a->inv.n_gpus && n >= 0; i++) { /* unlisted: the marks stay */
        const struct nvml_gpu *ng = NULL;
        char mark[sizeof(a->mig_foreign[i])] = "";

        for (int j = 0; j < n && j < AGENT_MAX_GPUS; j++)
            if (gpus[j].index == a->inv.gpus[i].nvml_index)
                ng = &gpus[j];
        if (!ng)
            continue; /* not listed this time: its mark stays */
        for (int m = 0; m < ng->n_mig; m++) {
            const struct nvml_mig_instance *mi = &ng->mig[m];
            char why[300];
            int held = mig_held(a, ng->index, mi->gi_id, why, sizeof(why));

            if (held > 0)
                continue;
            if (held < 0) {
                allot_fmt(mark, sizeof(mark),
                          "cannot tell whether a task holds MIG instance %d (%s at %d): %s",
                          mi->gi_id, mi->profile, mi->start, why);
                break;
            }
            if (nvml_mig_destroy(a->nv, ng->index, mi->gi_id) == 0) {
                LOG_WARN("agent",
                         "GPU %d: MIG instance %d (%s at %d) destroyed: no task of this agent "
                         "held it, and allot places slices where it finds room",
                         i, mi->gi_id, mi->profile, mi->start);
                continue;
            }
            if (!*mark) /* the first one named; the others still go if they can */
                allot_fmt(mark, sizeof(mark),
                          "MIG instance %d (%s at %d) is not allot's and cannot be destroyed (%s)",
                          mi->gi_id, mi->profile, mi->start, nvml_last_error(a->nv));
        }
        if (*mark) {
            mig_mark(a, i, mark);
        } else if (*a->mig_foreign[i]) {
            LOG_INFO("agent", "GPU %d: every MIG instance on it is allot's again", i);
            a->mig_foreign[i][0] = '\0';
        }
    }
    allot_free(gpus);
}

void mig_orphan(struct agent *a, int nvml_idx, int gi, const char *err)
{
    char mark[sizeof(a->mig_foreign[0])];

    for (int i = 0; i < a->inv.n_gpus; i++)
        if (a->inv.gpus[i].nvml_index == nvml_idx) {
            allot_fmt(mark, sizeof(mark),
                      "MIG instance %d, no task's any more, cannot be destroyed (%s)", gi, err);
            mig_mark(a, i, mark);
            a->mig_retry_at = allot_mono_ms() + 5 * a->cfg.heartbeat;
        }
}

void mig_foreign_retry(struct agent *a, int64_t now)
{
    bool any = false;

    for (int i = 0; i < a->inv.n_gpus && !any; i++)
        any = a->mig_foreign[i][0] != '\0';
    if (!any || now < a->mig_retry_at)
        return;
    mig_reclaim_foreign(a);
}

static const char *const verdicts[] = {"healthy", "degraded", "unhealthy"};

/* Xid codes NVIDIA documents as needing a reset or the GPU's removal. */
static bool xid_is_fatal(uint64_t x)
{
    static const uint64_t fatal[] = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120};

    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
        if (x == fatal[i])
            return true;
    return false;
}

json_t *gpu_health_json(struct agent *a)
{
    json_t *out = json_array();
    struct nvml_xid ev[16];
    int ne = a->nv ? nvml_events_poll(a->nv, ev, 16) : 0;

    for (int e = 0; e < ne; e++)
        for (int g = 0; g < a->inv.n_gpus; g++) {
            size_t len = strlen(a->xids[g]);
            if (a->inv.gpus[g].nvml_index != ev[e].index)
                continue;
            LOG_WARN("agent", "GPU %d: Xid %llu", g, (unsigned long long)ev[e].xid);
            allot_fmt(a->xids[g] + len, sizeof(a->xids[g]) - len, "%sXid %llu", len ? ", " : "",
                      (unsigned long long)ev[e].xid);
            a->xid_fatal[g] |= xid_is_fatal(ev[e].xid);
        }
    struct nvml_gpu *gpus = a->nv ? allot_calloc(AGENT_MAX_GPUS, sizeof(*gpus)) : NULL;
    int n = gpus ? nvml_devices(a->nv, gpus, AGENT_MAX_GPUS) : -1;

    for (int i = 0; i < a->inv.n_gpus; i++) {
        const struct agent_gpu *g = &a->inv.gpus[i];
        const struct nvml_gpu *ng = NULL;
        json_t *mig = json_array(), *d;
        size_t k;

        for (int j = 0; j < n && j < AGENT_MAX_GPUS; j++)
            if (gpus[j].index == g->nvml_index)
                ng = &gpus[j];
        if (ng) {
            for (int m = 0; m < ng->n_mig; m++)
                json_array_append_new(mig,
                                      json_pack("{s:s,s:i,s:i,s:s}", "profile", ng->mig[m].profile,
                                                "start", ng->mig[m].start, "size", ng->mig[m].size,
                                                "uuid", ng->mig[m].uuid));
        } else {
            /* emulated: the slices of the MIG tasks placed on this GPU */
            json_array_foreach(a->desired, k, d)
            {
                if (!json_object_get(d, "mig_profile") ||
                    json_integer_value(json_array_get(json_object_get(d, "gpus"), 0)) != i)
                    continue;
                json_array_append_new(mig, json_pack("{s:O,s:O}", "profile",
                                                     json_object_get(d, "mig_profile"), "start",
                                                     json_object_get(d, "mig_start")));
            }
        }
        int v = ng ? (ng->health <= 2 ? (int)ng->health : 2) : 0;
        char text[300];
        if (a->xid_fatal[i] || *a->mig_foreign[i])
            v = 2;
        else if (*a->xids[i] && v < 1)
            v = 1;
        allot_fmt(text, sizeof(text), "%s%s%s%s%s",
                  ng ? ng->health_text : (a->inv.emulated ? "emulated" : "ok"),
                  *a->xids[i] ? "; " : "", a->xids[i], *a->mig_foreign[i] ? "; " : "",
                  a->mig_foreign[i]);
        json_array_append_new(out, json_pack("{s:i,s:s,s:s,s:s,s:s,s:o}", "index", i, "uuid",
                                             g->uuid, "model", g->model, "health", verdicts[v],
                                             "text", text, "mig", mig));
    }
    allot_free(gpus);
    return out;
}
