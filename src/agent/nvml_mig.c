/*
 * MIG part of the NVML client (nvml.h): the GPU-instance profiles NVML
 * describes on one GPU, the instances that exist (listed by nvml_devices),
 * and MIG apply for the agent: mode on/off, a GPU instance at an explicit
 * placement with one compute instance spanning it, destroy.
 *
 * Profiles are found by scanning the NVML_GPU_INSTANCE_PROFILE_* constants
 * (NVIDIA keeps adding some), matched to the catalog's names through NVML's
 * own names ("MIG 1g.10gb", nvmlDeviceGetGpuInstanceProfileInfoV); where
 * only the unversioned query exists, through the catalog's profile id and
 * compute slices (data/gpus.json records NVML's profile ids).
 *
 * Callers: nvml.c (instance listing), the agent's loop (apply on idle
 * GPUs, as the scheduler decided). Same threading as nvml.c.
 */
#include "nvml_int.h"

#include "allot/common.h"

#include <string.h>
#include <strings.h>

/* GPU-instance profile constants are scanned 0..PROFILE_SCAN-1: NVIDIA adds
 * new ones (0x11 in NVML 12.4); unknown ones answer INVALID_ARGUMENT or
 * NOT_SUPPORTED. */
#define PROFILE_SCAN 32
#define MAX_PROFILES 24
#define MAX_CI       8 /* compute instances read per GPU instance */

/* NVML_COMPUTE_INSTANCE_PROFILE_1/2/3/4/7/8/6_SLICE are 0..6 */
static const int ci_profile_slices[] = {1, 2, 3, 4, 7, 8, 6};
#define N_CI_PROFILES ((int)(sizeof(ci_profile_slices) / sizeof(ci_profile_slices[0])))

/* ---- MIG profiles ---------------------------------------------------------- */

/* Copies NVML's profile name "MIG 1g.10gb" as "1g.10gb". */
static void copy_profile_name(char *dst, size_t size, const char *nvml_name)
{
    if (strncasecmp(nvml_name, "MIG ", 4) == 0)
        nvml_name += 4;
    allot_strlcpy(dst, nvml_name, size);
}

/* Reads GPU-instance profile constant `k` of dev into *p: the versioned
 * query (with the name) first; the plain one without it, or when the
 * versioned one answers FUNCTION_NOT_FOUND or ARGUMENT_VERSION_MISMATCH. */
static nvmlReturn_t read_profile(struct nvml *nv, nvmlDevice_t dev, int k,
                                 struct nvml_mig_profile *p)
{
    nvmlGpuInstancePlacement_t pl[ALLOT_MIG_MAX_PLACEMENTS * 2];
    unsigned int npl = (unsigned int)(sizeof(pl) / sizeof(pl[0]));
    bool v_done = false; /* the versioned query answered */
    nvmlReturn_t rc;

    memset(p, 0, sizeof(*p));
    p->nvml_index = k;
    if (nv->f.gi_profile_v) {
        nvmlGpuInstanceProfileInfo_v2_t info;

        memset(&info, 0, sizeof(info));
        info.version = nvmlGpuInstanceProfileInfo_v2;
        rc = nv->f.gi_profile_v(dev, (unsigned int)k, &info);
        v_done = !nv->f.gi_profile || (rc != NVML_ERROR_FUNCTION_NOT_FOUND &&
                                       rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        if (rc != NVML_SUCCESS && v_done)
            return rc;
        if (rc == NVML_SUCCESS) {
            info.name[sizeof(info.name) - 1] = '\0';
            copy_profile_name(p->name, sizeof(p->name), info.name);
            p->id = (int)info.id;
            p->compute_slices = (int)info.sliceCount;
            p->max_instances = (int)info.instanceCount;
            p->memory_mib = (int64_t)info.memorySizeMB;
        }
    }
    if (!v_done) {
        nvmlGpuInstanceProfileInfo_t info;

        memset(&info, 0, sizeof(info));
        rc = nv->f.gi_profile(dev, (unsigned int)k, &info);
        if (rc != NVML_SUCCESS)
            return rc;
        p->id = (int)info.id;
        p->compute_slices = (int)info.sliceCount;
        p->max_instances = (int)info.instanceCount;
        p->memory_mib = (int64_t)info.memorySizeMB;
    }
    if (nv->f.gi_placements &&
        nv->f.gi_placements(dev, (unsigned int)p->id, pl, &npl) == NVML_SUCCESS) {
        for (unsigned int i = 0; i < npl && p->n_placements < ALLOT_MIG_MAX_PLACEMENTS; i++) {
            p->placements[p->n_placements].start = (uint8_t)pl[i].start;
            p->placements[p->n_placements].size = (uint8_t)pl[i].size;
            p->n_placements++;
        }
        if (p->n_placements > 0)
            p->memory_slices = p->placements[0].size;
    }
    return NVML_SUCCESS;
}

/* Reads every GPU-instance profile dev knows into out[0..max). Returns
 * the count, or -1 when even the first query failed with something other
 * than "no such profile" (*rc_out tells what). */
static int read_profiles(struct nvml *nv, nvmlDevice_t dev, struct nvml_mig_profile *out, int max,
                         nvmlReturn_t *rc_out)
{
    int n = 0;

    *rc_out = NVML_SUCCESS;
    if (!nv->f.gi_profile_v && !nv->f.gi_profile) {
        *rc_out = NVML_ERROR_FUNCTION_NOT_FOUND;
        return -1;
    }
    for (int k = 0; k < PROFILE_SCAN && n < max; k++) {
        nvmlReturn_t rc = read_profile(nv, dev, k, &out[n]);

        if (rc == NVML_SUCCESS) {
            n++;
        } else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_INVALID_ARGUMENT &&
                   rc != NVML_ERROR_NOT_FOUND) {
            /* MIG off, no permission, a lost GPU: not "no such profile" */
            *rc_out = rc;
            return -1;
        }
    }
    return n;
}

static const struct nvml_mig_profile *profile_by_id(const struct nvml_mig_profile *ps, int n,
                                                    int id)
{
    for (int i = 0; i < n; i++) {
        if (ps[i].id == id)
            return &ps[i];
    }
    return NULL;
}

/* The NVML_COMPUTE_INSTANCE_PROFILE_* constant of `slices` compute slices, or -1. */
static int ci_profile_for(int slices)
{
    for (int k = 0; k < N_CI_PROFILES; k++) {
        if (ci_profile_slices[k] == slices)
            return k;
    }
    return -1;
}

/* Counts the compute instances of gi and gives the first one's handle. */
static int gi_compute_instances(struct nvml *nv, nvmlGpuInstance_t gi, nvmlComputeInstance_t *all,
                                int max)
{
    int n = 0;

    for (int k = 0; k < N_CI_PROFILES && n < max; k++) {
        nvmlComputeInstanceProfileInfo_t cp;
        nvmlComputeInstance_t cis[MAX_CI];
        unsigned int cnt = MAX_CI;

        memset(&cp, 0, sizeof(cp));
        if (nv->f.ci_profile(gi, (unsigned int)k, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                             &cp) != NVML_SUCCESS)
            continue;
        if (nv->f.ci_list(gi, cp.id, cis, &cnt) != NVML_SUCCESS)
            continue;
        for (unsigned int i = 0; i < cnt && n < max; i++)
            all[n++] = cis[i];
    }
    return n;
}

/* Fills uuid and memory of instance `mi` from its MIG device handle, if
 * NVML lists one with the same GPU and compute instance ids. */
static void mig_device_details(struct nvml *nv, nvmlDevice_t dev, struct nvml_mig_instance *mi)
{
    unsigned int n = 0;

    if (!nv->f.mig_count || !nv->f.mig_handle || !nv->f.mig_gi_id || !nv->f.mig_ci_id ||
        mi->ci_id < 0)
        return;
    if (nv->f.mig_count(dev, &n) != NVML_SUCCESS)
        return;
    for (unsigned int j = 0; j < n; j++) {
        nvmlDevice_t m;
        unsigned int gid, cid;
        nvmlMemory_t mem;

        if (nv->f.mig_handle(dev, j, &m) != NVML_SUCCESS)
            continue;
        if (nv->f.mig_gi_id(m, &gid) != NVML_SUCCESS || nv->f.mig_ci_id(m, &cid) != NVML_SUCCESS)
            continue;
        if ((int)gid != mi->gi_id || (int)cid != mi->ci_id)
            continue;
        if (nv->f.uuid && nv->f.uuid(m, mi->uuid, sizeof(mi->uuid)) != NVML_SUCCESS)
            mi->uuid[0] = '\0';
        mi->uuid[sizeof(mi->uuid) - 1] = '\0';
        if (nv->f.memory && nv->f.memory(m, &mem) == NVML_SUCCESS)
            mi->memory_mib = nvml__mib(mem.total);
        return;
    }
}

/* Fills *mi from GPU instance gi (profiles ps[0..n_ps) name it). */
static nvmlReturn_t describe_gi(struct nvml *nv, nvmlDevice_t dev, nvmlGpuInstance_t gi,
                                const struct nvml_mig_profile *ps, int n_ps,
                                struct nvml_mig_instance *mi)
{
    nvmlGpuInstanceInfo_t info;
    nvmlComputeInstance_t cis[MAX_CI];
    const struct nvml_mig_profile *p;
    nvmlReturn_t rc;

    memset(&info, 0, sizeof(info));
    memset(mi, 0, sizeof(*mi));
    rc = nv->f.gi_info(gi, &info);
    if (rc != NVML_SUCCESS)
        return rc;
    mi->gi_id = (int)info.id;
    mi->profile_id = (int)info.profileId;
    mi->start = (int)info.placement.start;
    mi->size = (int)info.placement.size;
    mi->ci_id = -1;
    p = profile_by_id(ps, n_ps, mi->profile_id);
    if (p) {
        allot_strlcpy(mi->profile, p->name, sizeof(mi->profile));
        mi->compute_slices = p->compute_slices;
        mi->memory_mib = p->memory_mib;
    }
    if (nv->f.ci_profile && nv->f.ci_list) {
        mi->n_ci = gi_compute_instances(nv, gi, cis, MAX_CI);
        if (mi->n_ci > 0 && nv->f.ci_info) {
            nvmlComputeInstanceInfo_t ci;

            memset(&ci, 0, sizeof(ci));
            if (nv->f.ci_info(cis[0], &ci) == NVML_SUCCESS)
                mi->ci_id = (int)ci.id;
        }
    }
    mig_device_details(nv, dev, mi);
    return NVML_SUCCESS;
}

static void sort_instances(struct nvml_mig_instance *mi, int n)
{
    for (int i = 1; i < n; i++) {
        struct nvml_mig_instance t = mi[i];
        int j = i - 1;

        while (j >= 0 && mi[j].start > t.start) {
            mi[j + 1] = mi[j];
            j--;
        }
        mi[j + 1] = t;
    }
}

/* Lists g's MIG instances (MIG mode is on). */
void nvml__read_mig_instances(struct nvml *nv, nvmlDevice_t dev, struct nvml_gpu *g)
{
    struct nvml_mig_profile ps[MAX_PROFILES];
    nvmlReturn_t rc;
    int n_ps;

    if (!nv->f.gi_list || !nv->f.gi_info)
        return;
    n_ps = read_profiles(nv, dev, ps, MAX_PROFILES, &rc);
    if (n_ps < 0) {
        nvml__optional_ok(g, "nvmlDeviceGetGpuInstanceProfileInfo", rc);
        return;
    }
    for (int i = 0; i < n_ps; i++) {
        nvmlGpuInstance_t gis[ALLOT_MIG_MAX_INSTANCES * 2];
        unsigned int cnt = (unsigned int)(sizeof(gis) / sizeof(gis[0]));

        rc = nv->f.gi_list(dev, (unsigned int)ps[i].id, gis, &cnt);
        if (!nvml__optional_ok(g, "nvmlDeviceGetGpuInstances", rc))
            return;
        for (unsigned int k = 0; k < cnt && g->n_mig < ALLOT_NVML_MAX_MIG; k++) {
            rc = describe_gi(nv, dev, gis[k], ps, n_ps, &g->mig[g->n_mig]);
            if (!nvml__optional_ok(g, "nvmlGpuInstanceGetInfo", rc))
                return;
            g->n_mig++;
        }
    }
    sort_instances(g->mig, g->n_mig);
    g->supported |= ALLOT_NVML_F_MIG_LIST;
}

/* ---- MIG apply ------------------------------------------------------------------- */

int nvml_mig_set_mode(struct nvml *nv, int index, bool enable, bool *activated)
{
    nvmlDevice_t dev = NULL;
    nvmlReturn_t status = NVML_SUCCESS;
    nvmlReturn_t rc;
    int r;

    if (activated)
        *activated = false;
    if (!nv->f.set_mig_mode) {
        nvml__set_err(nv, "NVML: no nvmlDeviceSetMigMode (MIG unsupported)");
        return ALLOT_ESTATE;
    }
    r = nvml__device(nv, index, &dev);
    if (r < 0)
        return r;
    rc =
        nv->f.set_mig_mode(dev, enable ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE, &status);
    if (rc != NVML_SUCCESS) {
        r = nvml__fail_call(nv, "nvmlDeviceSetMigMode", rc);
        return r == ALLOT_ENOENT || r == ALLOT_ENOSPC ? ALLOT_EIO : r;
    }
    if (activated)
        *activated = status == NVML_SUCCESS;
    if (status != NVML_SUCCESS)
        nvml__set_err(nv, "GPU %d: MIG mode %s is pending: %s", index, enable ? "on" : "off",
                      nvml__rc_text(status));
    return 0;
}

/* Checks that MIG apply is possible on GPU index and gets its handle. */
static int mig_device(struct nvml *nv, int index, nvmlDevice_t *dev)
{
    unsigned int cur = 0, pend = 0;
    nvmlReturn_t rc;
    int r;

    if (!(nv->features & ALLOT_NVML_F_MIG_APPLY)) {
        nvml__set_err(nv, "NVML: MIG apply unsupported by this library (symbols missing)");
        return ALLOT_ESTATE;
    }
    r = nvml__device(nv, index, dev);
    if (r < 0)
        return r;
    rc = nv->f.mig_mode(*dev, &cur, &pend);
    if (rc != NVML_SUCCESS) {
        r = nvml__fail_call(nv, "nvmlDeviceGetMigMode", rc);
        return r == ALLOT_ESTATE ? r : ALLOT_EIO;
    }
    if (cur != NVML_DEVICE_MIG_ENABLE) {
        nvml__set_err(nv, "GPU %d: MIG mode is off", index);
        return ALLOT_ESTATE;
    }
    return 0;
}

static int find_profile(struct nvml *nv, nvmlDevice_t dev, int index, const char *name,
                        const struct allot_gpu_model *model, struct nvml_mig_profile *out)
{
    struct nvml_mig_profile ps[MAX_PROFILES];
    const struct allot_mig_profile *cp = NULL;
    nvmlReturn_t rc;
    int n = read_profiles(nv, dev, ps, MAX_PROFILES, &rc);

    if (n < 0) {
        int r = nvml__fail_call(nv, "nvmlDeviceGetGpuInstanceProfileInfo", rc);
        return r == ALLOT_ESTATE ? r : ALLOT_EIO;
    }
    for (int i = 0; i < n; i++) {
        if (ps[i].name[0] && strcasecmp(ps[i].name, name) == 0) {
            *out = ps[i];
            return 0;
        }
    }
    /* no names from NVML: the catalog's id and compute slices */
    for (int i = 0; model && i < model->n_profiles; i++) {
        if (strcasecmp(model->profiles[i].name, name) == 0)
            cp = &model->profiles[i];
    }
    for (int i = 0; cp && i < n; i++) {
        if (!ps[i].name[0] && ps[i].id == cp->id && ps[i].compute_slices == cp->compute_slices) {
            *out = ps[i];
            allot_strlcpy(out->name, cp->name, sizeof(out->name));
            if (out->n_placements == 0) {
                /* placements unreadable: the catalog's */
                out->n_placements = cp->n_placements;
                memcpy(out->placements, cp->placements, sizeof(cp->placements));
                out->memory_slices = cp->memory_slices;
            }
            return 0;
        }
    }
    nvml__set_err(nv, "GPU %d: no MIG profile \"%s\"", index, name);
    return ALLOT_ENOENT;
}

int nvml_mig_find_profile(struct nvml *nv, int index, const char *name,
                          const struct allot_gpu_model *model, struct nvml_mig_profile *out)
{
    nvmlDevice_t dev = NULL;
    unsigned int cur = 0, pend = 0;
    nvmlReturn_t rc;
    int r;

    if (!nv->f.gi_profile_v && !nv->f.gi_profile) {
        nvml__set_err(nv, "NVML: no nvmlDeviceGetGpuInstanceProfileInfo (MIG unsupported)");
        return ALLOT_ESTATE;
    }
    r = nvml__device(nv, index, &dev);
    if (r < 0)
        return r;
    if (nv->f.mig_mode) {
        rc = nv->f.mig_mode(dev, &cur, &pend);
        if (rc != NVML_SUCCESS || cur != NVML_DEVICE_MIG_ENABLE) {
            nvml__set_err(nv, "GPU %d: MIG mode is off", index);
            return ALLOT_ESTATE;
        }
    }
    return find_profile(nv, dev, index, name, model, out);
}

int nvml_mig_create(struct nvml *nv, int index, const char *name, int start,
                    const struct allot_gpu_model *model, struct nvml_mig_instance *out)
{
    struct nvml_mig_profile p;
    nvmlGpuInstancePlacement_t pl = {0, 0};
    nvmlComputeInstanceProfileInfo_t cp;
    nvmlGpuInstance_t gi = NULL;
    nvmlComputeInstance_t ci = NULL;
    nvmlDevice_t dev = NULL;
    nvmlReturn_t rc;
    int k, r;

    r = mig_device(nv, index, &dev);
    if (r < 0)
        return r;
    r = find_profile(nv, dev, index, name, model, &p);
    if (r < 0)
        return r;
    for (int i = 0; i < p.n_placements; i++) {
        if (p.placements[i].start == start) {
            pl.start = (unsigned int)start;
            pl.size = p.placements[i].size;
        }
    }
    if (pl.size == 0) {
        nvml__set_err(nv, "GPU %d: %d is not a placement start of MIG profile %s", index, start,
                      name);
        return ALLOT_EINVAL;
    }
    k = ci_profile_for(p.compute_slices);
    if (k < 0) {
        nvml__set_err(nv, "GPU %d: no compute-instance profile of %d slices", index,
                      p.compute_slices);
        return ALLOT_EINVAL;
    }
    rc = nv->f.gi_create(dev, (unsigned int)p.id, &pl, &gi);
    if (rc != NVML_SUCCESS)
        return nvml__fail_call(nv, "nvmlDeviceCreateGpuInstanceWithPlacement", rc);
    memset(&cp, 0, sizeof(cp));
    rc = nv->f.ci_profile(gi, (unsigned int)k, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cp);
    if (rc != NVML_SUCCESS) {
        r = nvml__fail_call(nv, "nvmlGpuInstanceGetComputeInstanceProfileInfo", rc);
        goto destroy_gi;
    }
    rc = nv->f.ci_create(gi, cp.id, &ci);
    if (rc != NVML_SUCCESS) {
        r = nvml__fail_call(nv, "nvmlGpuInstanceCreateComputeInstance", rc);
        goto destroy_gi;
    }
    if (out) {
        rc = describe_gi(nv, dev, gi, &p, 1, out);
        if (rc != NVML_SUCCESS) {
            /* the instance exists; only its description failed */
            memset(out, 0, sizeof(*out));
            out->gi_id = out->ci_id = -1;
            return nvml__fail_call(nv, "nvmlGpuInstanceGetInfo", rc);
        }
    }
    return 0;

destroy_gi:
    rc = nv->f.gi_destroy(gi);
    if (rc != NVML_SUCCESS)
        ALLOT_LOG(ALLOT_LOG_WARN, "nvml", "GPU %d: GPU instance left behind: %s", index,
                  nvml__rc_text(rc));
    return r == ALLOT_ENOENT ? ALLOT_EIO : r;
}

int nvml_mig_destroy(struct nvml *nv, int index, int gi_id)
{
    nvmlComputeInstance_t cis[MAX_CI];
    nvmlGpuInstance_t gi = NULL;
    nvmlDevice_t dev = NULL;
    nvmlReturn_t rc;
    int n, r;

    r = mig_device(nv, index, &dev);
    if (r < 0)
        return r;
    if (gi_id < 0) {
        nvml__set_err(nv, "GPU %d: no GPU instance %d", index, gi_id);
        return ALLOT_ENOENT;
    }
    rc = nv->f.gi_by_id(dev, (unsigned int)gi_id, &gi);
    if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT) {
        nvml__set_err(nv, "GPU %d: no GPU instance %d", index, gi_id);
        return ALLOT_ENOENT;
    }
    if (rc != NVML_SUCCESS)
        return nvml__fail_call(nv, "nvmlDeviceGetGpuInstanceById", rc);
    n = gi_compute_instances(nv, gi, cis, MAX_CI);
    for (int i = 0; i < n; i++) {
        rc = nv->f.ci_destroy(cis[i]);
        if (rc != NVML_SUCCESS) {
            r = nvml__fail_call(nv, "nvmlComputeInstanceDestroy", rc);
            return r == ALLOT_ENOENT ? ALLOT_EIO : r;
        }
    }
    rc = nv->f.gi_destroy(gi);
    if (rc != NVML_SUCCESS) {
        r = nvml__fail_call(nv, "nvmlGpuInstanceDestroy", rc);
        return r == ALLOT_ENOENT ? ALLOT_EIO : r;
    }
    return 0;
}
