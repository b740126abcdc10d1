/*
 * Task shapes: validation against the catalog and the feasibility tests
 * every policy filters on (model, CPU, memory, GPU fit). Pure functions.
 */
#include "allot/cluster.h"
#include "allot/common.h"
#include "allot/tenant.h"

#include <string.h>

int allot_task_validate(const struct allot_catalog *cat, const struct allot_task *t, char *err,
                        size_t errlen)
{
    uint64_t all = cat->n_models >= 64 ? ~0ULL : ((1ULL << cat->n_models) - 1);

    if (t->cpu_milli < 0) {
        allot_fmt(err, errlen, "task: cpu_milli %lld is negative", (long long)t->cpu_milli);
        return ALLOT_EINVAL;
    }
    if (t->mem_mib < 0) {
        allot_fmt(err, errlen, "task: memory_mib %lld is negative", (long long)t->mem_mib);
        return ALLOT_EINVAL;
    }
    if (t->rdma_vfs < 0 || t->rdma_vfs > ALLOT_MAX_TASK_RDMA_VFS) {
        allot_fmt(err, errlen, "task: rdma_vfs %d out of range 0..%d", t->rdma_vfs,
                  ALLOT_MAX_TASK_RDMA_VFS);
        return ALLOT_EINVAL;
    }
    if (t->num_gpu < 0 || t->num_gpu > ALLOT_MAX_GPUS) {
        allot_fmt(err, errlen, "task: num_gpu %d out of range 0..%d", t->num_gpu, ALLOT_MAX_GPUS);
        return ALLOT_EINVAL;
    }
    if (t->gpu_milli < 0 || t->gpu_milli > ALLOT_MILLI) {
        allot_fmt(err, errlen, "task: gpu_milli %d out of range 0..1000", t->gpu_milli);
        return ALLOT_EINVAL;
    }
    if (t->gpu_mem_mib < 0) {
        allot_fmt(err, errlen, "task: gpu_memory_mib %lld is negative", (long long)t->gpu_mem_mib);
        return ALLOT_EINVAL;
    }
    if (t->tenant < 0 || t->isolation < 0 || t->isolation > 2) {
        allot_fmt(err, errlen, "task: %s out of range", t->tenant < 0 ? "tenant" : "isolation");
        return ALLOT_EINVAL;
    }
    for (int i = 1; i < ALLOT_MAX_SELECT; i++)
        if (t->select[i] && !t->select[i - 1]) {
            allot_fmt(err, errlen, "task: node selector word %d follows an unused one", i);
            return ALLOT_EINVAL;
        }
    if (t->model_mask & ~all) {
        allot_fmt(err, errlen, "task: gpu model mask names models not in the catalog");
        return ALLOT_EINVAL;
    }
    if (t->mig_profile >= 0) {
        uint64_t ok = 0;
        if (t->mig_profile >= cat->n_profile_names) {
            allot_fmt(err, errlen, "task: mig_profile id %d unknown", t->mig_profile);
            return ALLOT_EINVAL;
        }
        if (t->num_gpu != 1) {
            allot_fmt(err, errlen, "task: mig_profile %s needs num_gpu 1, got %d",
                      cat->profile_names[t->mig_profile], t->num_gpu);
            return ALLOT_EINVAL;
        }
        if (t->gpu_milli != 0 || t->gpu_mem_mib != 0) {
            allot_fmt(err, errlen, "task: mig_profile %s cannot be combined with %s",
                      cat->profile_names[t->mig_profile],
                      t->gpu_milli ? "gpu_milli" : "gpu_memory_mib");
            return ALLOT_EINVAL;
        }
        for (int i = 0; i < cat->n_models; i++)
            if (cat->models[i].profile_by_global[t->mig_profile] >= 0)
                ok |= 1ULL << i;
        if (t->model_mask)
            ok &= t->model_mask;
        if (!ok) {
            allot_fmt(err, errlen, "task: mig_profile %s: no allowed GPU model offers it",
                      cat->profile_names[t->mig_profile]);
            return ALLOT_EINVAL;
        }
        return 0;
    }
    if (t->num_gpu == 0) {
        if (t->gpu_milli || t->gpu_mem_mib) {
            allot_fmt(err, errlen, "task: %s set but num_gpu is 0",
                      t->gpu_milli ? "gpu_milli" : "gpu_memory_mib");
            return ALLOT_EINVAL;
        }
        return 0;
    }
    if (t->num_gpu > 1 && t->gpu_milli != ALLOT_MILLI) {
        allot_fmt(err, errlen, "task: gpu_milli %d with num_gpu %d (fractions need num_gpu 1)",
                  t->gpu_milli, t->num_gpu);
        return ALLOT_EINVAL;
    }
    if (t->num_gpu > 1 && t->gpu_mem_mib) {
        allot_fmt(err, errlen, "task: gpu_memory_mib needs num_gpu 1 (whole GPUs get all memory)");
        return ALLOT_EINVAL;
    }
    if (t->gpu_milli == 0 && t->gpu_mem_mib == 0) {
        allot_fmt(err, errlen, "task: num_gpu 1 with neither gpu_milli nor gpu_memory_mib");
        return ALLOT_EINVAL;
    }
    return 0;
}

int allot_task_pod_class(const struct allot_task *t)
{
    if (t->num_gpu == 0)
        return -1;
    if (t->mig_profile >= 0 || t->gpu_milli < ALLOT_MILLI)
        return 0;
    return t->num_gpu < ALLOT_POD_CLASSES ? t->num_gpu : ALLOT_POD_CLASSES - 1;
}

uint64_t allot_task_hash(const struct allot_task *t, uint64_t seed)
{
    uint64_t h = allot_hash_mix(seed, (uint64_t)t->num_gpu);

    h = allot_hash_mix(h, (uint64_t)t->gpu_milli);
    h = allot_hash_mix(h, (uint64_t)t->gpu_mem_mib);
    h = allot_hash_mix(h, (uint64_t)t->mig_profile + 1);
    h = allot_hash_mix(h, (uint64_t)t->cpu_milli);
    h = allot_hash_mix(h, (uint64_t)t->mem_mib);
    h = allot_hash_mix(h, (uint64_t)t->tenant << 2 | (uint64_t)t->isolation);
    if (t->rdma_vfs) /* shapes without VFs hash as they always did */
        h = allot_hash_mix(h, (uint64_t)t->rdma_vfs | 1ULL << 62);
    for (int i = 0; i < ALLOT_MAX_SELECT && t->select[i]; i++) /* as for VFs */
        h = allot_hash_mix(h, t->select[i]);
    if (t->nodes) /* as for VFs */
        h = allot_hash_mix(h, t->nodes->hash);
    return allot_hash_mix(h, t->model_mask);
}

bool allot_task_same(const struct allot_task *a, const struct allot_task *b)
{
    return a->num_gpu == b->num_gpu && a->gpu_milli == b->gpu_milli &&
           a->gpu_mem_mib == b->gpu_mem_mib && a->mig_profile == b->mig_profile &&
           a->cpu_milli == b->cpu_milli && a->mem_mib == b->mem_mib && a->rdma_vfs == b->rdma_vfs &&
           a->model_mask == b->model_mask && a->tenant == b->tenant &&
           a->isolation == b->isolation && a->nodes == b->nodes && /* one object per set */
           memcmp(a->select, b->select, sizeof(a->select)) == 0;
}

bool allot_isolation_allows(int holders, int32_t excl_holder, int tenant, bool asks_exclusive)
{
    if (holders == 0)
        return true;
    if (excl_holder != 0)
        return excl_holder == tenant; /* held exclusively: only by its owner */
    return !asks_exclusive;           /* held by sharers: only other sharers */
}

bool allot_task_is_fraction(const struct allot_task *t)
{
    return t->num_gpu == 1 && t->mig_profile < 0 &&
           (t->gpu_milli < ALLOT_MILLI || t->gpu_mem_mib != 0);
}

bool allot_gpu_mode_serves(int mode, const struct allot_task *t)
{
    if (t->mig_profile >= 0)
        return mode == ALLOT_GPU_MIG;
    if (allot_task_is_fraction(t))
        return mode == ALLOT_GPU_SHARED;
    return mode != ALLOT_GPU_MIG;
}

bool allot_gpu_whole_free(const struct allot_gpu *g)
{
    /* n_tasks == 0, not free_milli == 1000: a memory-only fraction holds
     * memory but no milli */
    return g->mode != ALLOT_GPU_MIG && g->n_tasks == 0;
}

int allot_node_whole_free(const struct allot_node *n)
{
    int w = 0;

    for (int g = 0; g < n->n_gpus; g++)
        w += allot_gpu_whole_free(&n->gpus[g]);
    return w;
}

bool allot_task_picks_nodes(const struct allot_task *t)
{
    return t->select[0] || t->model_mask || t->nodes;
}

bool allot_node_selected(const struct allot_node *n, const struct allot_task *t)
{
    for (int i = 0; i < ALLOT_MAX_SELECT && t->select[i]; i++) {
        int l = 0;
        while (l < n->n_labels && n->label_hash[l] != t->select[i])
            l++;
        if (l == n->n_labels)
            return false;
    }
    return true;
}

bool allot_node_may_host(const struct allot_node *n, const struct allot_task *t)
{
    if (n->cpu_milli == 0) /* no size: a node removed, or a name kept for jobs */
        return false;
    if (t->select[0] && !allot_node_selected(n, t))
        return false;
    if (!allot_nodeset_has(t->nodes, n->index))
        return false;
    if (t->num_gpu == 0)
        return true;
    if (n->model < 0 || n->n_gpus < t->num_gpu)
        return false;
    return !t->model_mask || (t->model_mask >> n->model & 1);
}

bool allot_node_admits(const struct allot_node *n, const struct allot_task *t)
{
    if (!allot_node_may_host(n, t))
        return false;
    if (n->cpu_free < t->cpu_milli || n->mem_free < t->mem_mib || n->rdma_free < t->rdma_vfs)
        return false;
    return allot_node_isolation_allows(n, t);
}

bool allot_node_isolation_allows(const struct allot_node *n, const struct allot_task *t)
{
    /* exclusive-node tenants share a node with nobody else */
    return allot_isolation_allows(n->n_tasks, n->excl_tenant, t->tenant,
                                  t->isolation == ALLOT_ISO_EXCLUSIVE_NODE);
}

int64_t allot_fraction_mem(const struct allot_gpu *g, const struct allot_task *t)
{
    if (t->gpu_mem_mib > 0 || t->gpu_milli <= 0)
        return t->gpu_mem_mib;
    if (ALLOT_NEVER(t->gpu_milli > ALLOT_MILLI))
        return g->mem_mib;
    return g->mem_mib * t->gpu_milli / ALLOT_MILLI;
}

bool allot_gpu_takes_fraction(const struct allot_gpu *g, const struct allot_task *t)
{
    if (!allot_gpu_mode_serves(g->mode, t) || g->free_milli < t->gpu_milli ||
        g->free_mem_mib < allot_fraction_mem(g, t))
        return false;
    /* exclusive-gpu tenants time-share a GPU only among themselves */
    return allot_isolation_allows(g->n_tasks, g->excl_tenant, t->tenant,
                                  t->isolation == ALLOT_ISO_EXCLUSIVE_GPU);
}

int allot_node_fitting_gpus(const struct allot_node *n, const struct allot_task *t)
{
    int k = 0;

    for (int i = 0; i < n->n_gpus; i++)
        k += allot_gpu_takes_fraction(&n->gpus[i], t);
    return k;
}

static int node_whole_free(const struct allot_node *n)
{
    int k = 0;

    for (int i = 0; i < n->n_gpus; i++)
        k += allot_gpu_whole_free(&n->gpus[i]);
    return k;
}

int allot_task_gpu_milli(const struct allot_cluster *c, const struct allot_task *t, int model)
{
    const struct allot_catalog *cat = allot_cluster_catalog(c);

    if (t->num_gpu == 0)
        return 0;
    if (t->mig_profile >= 0 && model >= 0) {
        const struct allot_gpu_model *m = &cat->models[model];
        int lp = m->profile_by_global[t->mig_profile];
        if (lp < 0 || m->compute_slices <= 0)
            return 0;
        return m->profiles[lp].compute_slices * ALLOT_MILLI / m->compute_slices;
    }
    return t->gpu_milli;
}

bool allot_node_fits(const struct allot_cluster *c, const struct allot_node *n,
                     const struct allot_task *t)
{
    if (n->state != ALLOT_NODE_READY || !allot_node_admits(n, t))
        return false;
    if (t->num_gpu == 0)
        return true;
    if (t->mig_profile >= 0) {
        const struct allot_gpu_model *m = &allot_cluster_catalog(c)->models[n->model];
        int lp = m->profile_by_global[t->mig_profile];
        if (lp < 0)
            return false;
        for (int i = 0; i < n->n_gpus; i++)
            if (n->gpus[i].mode == ALLOT_GPU_MIG &&
                allot_mig_list_placements(m, &n->gpus[i].mig, lp, NULL, 0) > 0)
                return true;
        return false;
    }
    if (t->gpu_milli == ALLOT_MILLI && t->gpu_mem_mib == 0)
        return node_whole_free(n) >= t->num_gpu;
    return allot_node_fitting_gpus(n, t) > 0;
}
