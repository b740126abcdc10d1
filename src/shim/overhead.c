/*
 * What the driver allocates on a program's behalf, beyond the allocation
 * calls (docs/shim.md "Context overhead and graph memory"):
 *
 * - contexts: each counts a per-context figure of its device, counted
 *   when cuCtxCreate (any version) or the first cuDevicePrimaryCtxRetain
 *   of a primary context makes one, and given back when it is destroyed,
 *   reset or released for the last time; refused (the context undone)
 *   when the cap has no room for it. The figure is
 *   ALLOT_GPU_CONTEXT_OVERHEAD (a configured estimate, default 0) until
 *   the NVML check (nvml.c) has measured the device: then what NVML says
 *   the process uses there beyond the books' allocations, shared among its
 *   contexts on the device (shim_ctx_measured), and the contexts already
 *   counted are recounted at that figure;
 * - primary contexts' references: counted here, so the last
 *   cuDevicePrimaryCtxRelease, which frees the context's memory in the
 *   driver, gives its allocations back in the books too;
 * - graphs' memory allocation nodes (cuGraphAddMemAllocNode, and
 *   cuGraphAddNode(_v2) of type CU_GRAPH_NODE_TYPE_MEM_ALLOC): the node's
 *   bytes, on its pool's device, from the node's creation to its
 *   destruction or its graph's (an upper bound: the driver may reuse one
 *   node's memory for a later one in the same graph).
 *
 * The records go in the allocation table like any other (a context's
 * overhead keyed by the context and dying with it; a node keyed by the
 * node and dying with its graph), so the hooks' rules hold: reserved
 * before the driver is called, given back if it refuses.
 */
#include <stdint.h>

#include "shim.h"

/* References to each device's primary context taken through the hooks. */
static int primary_refs[SHIM_MAX_DEV];

/* The measured per-context figure of each device: bytes, then known
 * (release ordering), written by the NVML check. */
static struct {
    uint64_t bytes;
    bool known;
} measured[SHIM_MAX_DEV];

uint64_t shim_ctx_figure(int dev)
{
    if (dev >= 0 && dev < SHIM_MAX_DEV && __atomic_load_n(&measured[dev].known, __ATOMIC_ACQUIRE))
        return __atomic_load_n(&measured[dev].bytes, __ATOMIC_RELAXED);
    return shim_ctx_overhead();
}

void shim_ctx_measured(int dev, uint64_t nvml_bytes, uint64_t books)
{
    uint64_t sum = 0, alloc, total, per, old = 0, fresh;
    size_t n;

    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return;
    /* the contexts counted on dev and what they count now */
    n = shim_table_resize_space(&shim_allocs, SHIM_SPACE_CTX, dev, UINT64_MAX, &sum);
    if (!n)
        return; /* nothing to attribute the difference to */
    /* what the books hold for allocations (pools' reserve included) */
    alloc = books > sum ? books - sum : 0;
    total = nvml_bytes > alloc ? nvml_bytes - alloc : 0;
    per = total / n;
    __atomic_store_n(&measured[dev].bytes, per, __ATOMIC_RELAXED);
    __atomic_store_n(&measured[dev].known, true, __ATOMIC_RELEASE);
    /* every context of dev now counts per; the books follow (bytes the
     * driver holds already: past the cap if need be). A context destroyed
     * on another thread between the resize and this adjustment gives back
     * its new figure first; the books' floor at 0 can then only leave them
     * counting more, never less. */
    n = shim_table_resize_space(&shim_allocs, SHIM_SPACE_CTX, dev, per, &old);
    fresh = per * (uint64_t)n;
    if (fresh > old)
        shim_reserve_force(dev, fresh - old);
    else if (old > fresh)
        shim_release(dev, old - fresh);
}

/* ---- contexts ------------------------------------------------------------- */

/* Counts a new context's overhead on dev. A context is recorded even at 0
 * bytes, so a later measurement can recount it. */
static CUresult count_context(CUcontext c, int dev)
{
    uint64_t bytes = shim_ctx_figure(dev), key = (uint64_t)(uintptr_t)c;
    struct shim_alloc a = {
        .key = key, .bytes = bytes, .ctx = key, .dev = dev, .space = SHIM_SPACE_CTX};

    if (!c)
        return CUDA_SUCCESS;
    if (bytes && shim_reserve(dev, bytes) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!shim_record(&a)) {
        if (!bytes)
            return CUDA_SUCCESS; /* nothing counted: not worth refusing it */
        shim_release(dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* After a cuCtxCreate of any version answered rc: counts the context, or
 * destroys it when the cap has no room for its overhead. */
static CUresult created(CUresult rc, CUcontext *c, CUdevice dev)
{
    __typeof__(&cuCtxDestroy_v2) destroy = REAL(cuCtxDestroy_v2);

    if (rc != CUDA_SUCCESS || count_context(*c, dev) == CUDA_SUCCESS)
        return rc;
    if (destroy)
        destroy(*c);
    *c = NULL;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuCtxCreate(CUcontext *c, unsigned int flags, CUdevice dev)
{
    __typeof__(&cuCtxCreate) real = REAL(cuCtxCreate);

    if (!real)
        return shim_missing();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    return created(real(c, flags, dev), c, dev);
}

CUresult cuCtxCreate_v2(CUcontext *c, unsigned int flags, CUdevice dev)
{
    __typeof__(&cuCtxCreate_v2) real = REAL(cuCtxCreate_v2);

    if (!real)
        return shim_missing();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    return created(real(c, flags, dev), c, dev);
}

CUresult cuCtxCreate_v3(CUcontext *c, CUexecAffinityParam *params, int n, unsigned int flags,
                        CUdevice dev)
{
    __typeof__(&cuCtxCreate_v3) real = REAL(cuCtxCreate_v3);

    if (!real)
        return shim_missing();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    return created(real(c, params, n, flags, dev), c, dev);
}

CUresult cuCtxCreate_v4(CUcontext *c, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    __typeof__(&cuCtxCreate_v4) real = REAL(cuCtxCreate_v4);

    if (!real)
        return shim_missing();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    return created(real(c, params, flags, dev), c, dev);
}

CUresult shim_primary_retained(CUcontext c, CUdevice dev)
{
    typedef CUresult (*release_fn)(CUdevice);
    release_fn release = (release_fn)shim_real(SHIM_FN_cuDevicePrimaryCtxRelease_v2);
    struct shim_alloc a;

    if (dev < 0 || dev >= SHIM_MAX_DEV)
        return CUDA_SUCCESS;
    if (!release)
        release = (release_fn)shim_real(SHIM_FN_cuDevicePrimaryCtxRelease);
    /* the first retain (or the first since a reset) makes the context */
    if (!shim_table_get(&shim_allocs, (uint64_t)(uintptr_t)c, SHIM_SPACE_CTX, &a) &&
        count_context(c, dev) != CUDA_SUCCESS) {
        /* no room for it: the reference just taken is given back */
        if (release)
            release(dev);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    __atomic_fetch_add(&primary_refs[dev], 1, __ATOMIC_ACQ_REL);
    return CUDA_SUCCESS;
}

static CUresult primary_release(enum shim_fn f, CUdevice dev)
{
    CUresult (*real)(CUdevice) = (CUresult(*)(CUdevice))shim_real(f);
    CUresult rc;
    int refs;

    if (!real)
        return shim_missing();
    rc = real(dev);
    if (rc != CUDA_SUCCESS || dev < 0 || dev >= SHIM_MAX_DEV)
        return rc;
    /* the last reference: the driver frees the context and its memory */
    refs = __atomic_load_n(&primary_refs[dev], __ATOMIC_ACQUIRE);
    while (refs > 0 && !__atomic_compare_exchange_n(&primary_refs[dev], &refs, refs - 1, false,
                                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    if (refs == 1)
        shim_drop_owner(shim_primary_ctx(dev));
    return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(SHIM_FN_cuDevicePrimaryCtxRelease_v2, dev);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(SHIM_FN_cuDevicePrimaryCtxRelease, dev);
}

/* ---- graphs' memory allocation nodes --------------------------------------- */

/*
 * Reserves a memory node's bytes on its pool's device (a host location is
 * not GPU memory: nothing), calls add, and records the node. Returns
 * add's answer, or CUDA_ERROR_OUT_OF_MEMORY over the cap.
 */
static CUresult add_alloc_node(CUgraphNode *node, CUgraph g, const CUDA_MEM_ALLOC_NODE_PARAMS *p,
                               CUresult (*add)(void *), void *arg)
{
    struct shim_alloc a = {.bytes = p->bytesize,
                           .ctx = (uint64_t)(uintptr_t)g,
                           .dev = p->poolProps.location.id,
                           .space = SHIM_SPACE_GRAPH};
    CUresult rc;

    if (p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || !p->bytesize || !g)
        return add(arg);
    if (shim_reserve(a.dev, a.bytes) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = add(arg);
    if (rc != CUDA_SUCCESS) {
        shim_release(a.dev, a.bytes);
        return rc;
    }
    a.key = (uint64_t)(uintptr_t)*node;
    if (!shim_record(&a)) {
        /* the table cannot hold it: undone, so the books miss nothing */
        __typeof__(&cuGraphDestroyNode) destroy = REAL(cuGraphDestroyNode);

        if (destroy)
            destroy(*node);
        shim_release(a.dev, a.bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

typedef CUresult (*add_mem_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                               CUDA_MEM_ALLOC_NODE_PARAMS *);
typedef CUresult (*add_node_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                CUgraphNodeParams *);
typedef CUresult (*add_node_v2_fn)(CUgraphNode *, CUgraph, const CUgraphNode *,
                                   const CUgraphEdgeData *, size_t, CUgraphNodeParams *);

struct add_args {
    void *fn;
    CUgraphNode *node;
    CUgraph g;
    const CUgraphNode *deps;
    const CUgraphEdgeData *edges;
    size_t n;
    void *params;
};

static CUresult call_add_mem(void *arg)
{
    struct add_args *a = arg;

    add_mem_fn fn = (add_mem_fn)a->fn;

    return fn(a->node, a->g, a->deps, a->n, a->params);
}

static CUresult call_add_node(void *arg)
{
    struct add_args *a = arg;

    add_node_fn fn = (add_node_fn)a->fn;

    return fn(a->node, a->g, a->deps, a->n, a->params);
}

static CUresult call_add_node_v2(void *arg)
{
    struct add_args *a = arg;

    add_node_v2_fn fn = (add_node_v2_fn)a->fn;

    return fn(a->node, a->g, a->deps, a->edges, a->n, a->params);
}

CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    struct add_args a = {(void *)REAL(cuGraphAddMemAllocNode), node, g, deps, NULL, n, params};

    if (!a.fn)
        return shim_missing();
    if (!node || !params)
        return CUDA_ERROR_INVALID_VALUE;
    return add_alloc_node(node, g, params, call_add_mem, &a);
}

/* cuGraphAddNode(_v2): only memory allocation nodes are counted. */
static CUresult add_node(CUgraphNode *node, CUgraph g, CUgraphNodeParams *params,
                         CUresult (*call)(void *), struct add_args *a)
{
    if (!a->fn)
        return shim_missing();
    if (!node || !params)
        return CUDA_ERROR_INVALID_VALUE;
    if (params->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        return call(a);
    return add_alloc_node(node, g, &params->alloc, call, a);
}

CUresult cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                        CUgraphNodeParams *params)
{
    struct add_args a = {(void *)REAL(cuGraphAddNode), node, g, deps, NULL, n, params};

    return add_node(node, g, params, call_add_node, &a);
}

CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                           const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *params)
{
    struct add_args a = {(void *)REAL(cuGraphAddNode_v2), node, g, deps, edges, n, params};

    return add_node(node, g, params, call_add_node_v2, &a);
}

CUresult cuGraphDestroyNode(CUgraphNode node)
{
    __typeof__(&cuGraphDestroyNode) real = REAL(cuGraphDestroyNode);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(node);
    if (rc == CUDA_SUCCESS)
        shim_forget((uint64_t)(uintptr_t)node, SHIM_SPACE_GRAPH);
    return rc;
}

CUresult cuGraphDestroy(CUgraph g)
{
    __typeof__(&cuGraphDestroy) real = REAL(cuGraphDestroy);
    CUresult rc;

    if (!real)
        return shim_missing();
    rc = real(g);
    if (rc == CUDA_SUCCESS)
        shim_drop_owner((uint64_t)(uintptr_t)g);
    return rc;
}
