/*
 * The exported launch hooks of liballot-cuda.so (docs/shim.md): kernels
 * (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel) and graphs
 * (cuGraphLaunch), each with its _ptsz twin, and the legacy launches of
 * the execution-control API CUDA still exports (cuLaunch, cuLaunchGrid,
 * cuLaunchGridAsync: no _ptsz twins; the first two run on the legacy
 * default stream). Without ALLOT_GPU_SM_LIMIT
 * they call the driver straight away; with it each launch first waits for
 * the compute share (limiter.c) and, when the limiter wants a measurement,
 * is bracketed by its timing events. A launch the driver takes is
 * counted in the region (metering).
 */
#include "shim.h"

struct launch {
    CUresult (*call)(const struct launch *);
    void *fn; /* the driver's function */
    CUfunction f;
    unsigned int g[3], b[3], shmem;
    CUstream s;
    void **params, **extra;
    const CUlaunchConfig *config;
    CUgraphExec graph;
    int grid_w, grid_h; /* the legacy cuLaunchGrid(Async) grid */
};

/* Counts a launch the driver took (the region's metering). Returns rc. */
static inline CUresult counted(CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        shim_count_launch();
    return rc;
}

/* Waits for the share, then launches, bracketed by timing events when the
 * limiter wants a measurement. */
static CUresult launch_limited(int kind, bool ptsz, const struct launch *l)
{
    uint64_t ctx = shim_current_ctx();
    bool probe;
    CUresult rc;
    int dev = 0;

    /* no current device: the launch fails in the driver anyway */
    shim_current_device(&dev);
    shim_limiter_before(kind, dev, ctx);
    probe = shim_limiter_probe_start(kind, ctx, l->s, ptsz);
    rc = l->call(l);
    if (probe)
        shim_limiter_probe_end(l->s, ptsz, rc == CUDA_SUCCESS);
    return counted(rc);
}

typedef CUresult (*kernel_fn)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
typedef CUresult (*kernel_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*coop_fn)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                            unsigned int, unsigned int, unsigned int, CUstream, void **);
typedef CUresult (*graph_fn)(CUgraphExec, CUstream);
typedef CUresult (*legacy_fn)(CUfunction);
typedef CUresult (*grid_fn)(CUfunction, int, int);
typedef CUresult (*grid_async_fn)(CUfunction, int, int, CUstream);

static CUresult call_kernel(const struct launch *l)
{
    return ((kernel_fn)l->fn)(l->f, l->g[0], l->g[1], l->g[2], l->b[0], l->b[1], l->b[2], l->shmem,
                              l->s, l->params, l->extra);
}

static CUresult call_kernel_ex(const struct launch *l)
{
    return ((kernel_ex_fn)l->fn)(l->config, l->f, l->params, l->extra);
}

static CUresult call_coop(const struct launch *l)
{
    return ((coop_fn)l->fn)(l->f, l->g[0], l->g[1], l->g[2], l->b[0], l->b[1], l->b[2], l->shmem,
                            l->s, l->params);
}

static CUresult call_graph(const struct launch *l)
{
    return ((graph_fn)l->fn)(l->graph, l->s);
}

static CUresult call_legacy(const struct launch *l)
{
    return ((legacy_fn)l->fn)(l->f);
}

static CUresult call_grid(const struct launch *l)
{
    return ((grid_fn)l->fn)(l->f, l->grid_w, l->grid_h);
}

static CUresult call_grid_async(const struct launch *l)
{
    return ((grid_async_fn)l->fn)(l->f, l->grid_w, l->grid_h, l->s);
}

static CUresult launch_kernel(enum shim_fn which, bool ptsz, CUfunction f, unsigned int gx,
                              unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                              unsigned int bz, unsigned int shmem, CUstream s, void **params,
                              void **extra)
{
    kernel_fn real = (kernel_fn)shim_real(which);
    struct launch l = {.call = call_kernel,
                       .fn = (void *)real,
                       .f = f,
                       .g = {gx, gy, gz},
                       .b = {bx, by, bz},
                       .shmem = shmem,
                       .s = s,
                       .params = params,
                       .extra = extra};

    if (!real)
        return shim_missing();
    if (!shim_limiter_on())
        return counted(real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
    return launch_limited(SHIM_LAUNCH_KERNEL, ptsz, &l);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream s, void **params, void **extra)
{
    return launch_kernel(SHIM_FN_cuLaunchKernel, false, f, gx, gy, gz, bx, by, bz, shmem, s, params,
                         extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                             CUstream s, void **params, void **extra)
{
    return launch_kernel(SHIM_FN_cuLaunchKernel_ptsz, true, f, gx, gy, gz, bx, by, bz, shmem, s,
                         params, extra);
}

static CUresult launch_kernel_ex(enum shim_fn which, bool ptsz, const CUlaunchConfig *config,
                                 CUfunction f, void **params, void **extra)
{
    kernel_ex_fn real = (kernel_ex_fn)shim_real(which);
    struct launch l = {.call = call_kernel_ex,
                       .fn = (void *)real,
                       .f = f,
                       .params = params,
                       .extra = extra,
                       .config = config};

    if (!real)
        return shim_missing();
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    if (!shim_limiter_on())
        return counted(real(config, f, params, extra));
    l.s = config->hStream;
    return launch_limited(SHIM_LAUNCH_KERNEL, ptsz, &l);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    return launch_kernel_ex(SHIM_FN_cuLaunchKernelEx, false, config, f, params, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                               void **extra)
{
    return launch_kernel_ex(SHIM_FN_cuLaunchKernelEx_ptsz, true, config, f, params, extra);
}

static CUresult launch_coop(enum shim_fn which, bool ptsz, CUfunction f, unsigned int gx,
                            unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                            unsigned int bz, unsigned int shmem, CUstream s, void **params)
{
    coop_fn real = (coop_fn)shim_real(which);
    struct launch l = {.call = call_coop,
                       .fn = (void *)real,
                       .f = f,
                       .g = {gx, gy, gz},
                       .b = {bx, by, bz},
                       .shmem = shmem,
                       .s = s,
                       .params = params};

    if (!real)
        return shim_missing();
    if (!shim_limiter_on())
        return counted(real(f, gx, gy, gz, bx, by, bz, shmem, s, params));
    return launch_limited(SHIM_LAUNCH_KERNEL, ptsz, &l);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shmem, CUstream s, void **params)
{
    return launch_coop(SHIM_FN_cuLaunchCooperativeKernel, false, f, gx, gy, gz, bx, by, bz, shmem,
                       s, params);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream s,
                                        void **params)
{
    return launch_coop(SHIM_FN_cuLaunchCooperativeKernel_ptsz, true, f, gx, gy, gz, bx, by, bz,
                       shmem, s, params);
}

static CUresult launch_graph(enum shim_fn which, bool ptsz, CUgraphExec g, CUstream s)
{
    graph_fn real = (graph_fn)shim_real(which);
    struct launch l = {.call = call_graph, .fn = (void *)real, .s = s, .graph = g};

    if (!real)
        return shim_missing();
    if (!shim_limiter_on())
        return counted(real(g, s));
    return launch_limited(SHIM_LAUNCH_GRAPH, ptsz, &l);
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    return launch_graph(SHIM_FN_cuGraphLaunch, false, g, s);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    return launch_graph(SHIM_FN_cuGraphLaunch_ptsz, true, g, s);
}

/* ---- the legacy launches (deprecated, still exported) ------------------- */

/* The block shape, parameters and shared memory come from earlier
 * cuFuncSetBlockShape / cuParamSet* / cuFuncSetSharedSize calls on f; the
 * launch itself is what takes GPU time, so it is charged like any kernel.
 * cuLaunch and cuLaunchGrid run on the legacy default stream (NULL), where
 * the probe's events go too. */
CUresult cuLaunch(CUfunction f)
{
    legacy_fn real = (legacy_fn)shim_real(SHIM_FN_cuLaunch);
    struct launch l = {.call = call_legacy, .fn = (void *)real, .f = f};

    if (!real)
        return shim_missing();
    if (!shim_limiter_on())
        return counted(real(f));
    return launch_limited(SHIM_LAUNCH_KERNEL, false, &l);
}

CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
    grid_fn real = (grid_fn)shim_real(SHIM_FN_cuLaunchGrid);
    struct launch l = {
        .call = call_grid, .fn = (void *)real, .f = f, .grid_w = grid_width, .grid_h = grid_height};

    if (!real)
        return shim_missing();
    if (!shim_limiter_on())
        return counted(real(f, grid_width, grid_height));
    return launch_limited(SHIM_LAUNCH_KERNEL, false, &l);
}

CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream s)
{
    grid_async_fn real = (grid_async_fn)shim_real(SHIM_FN_cuLaunchGridAsync);
    struct launch l = {.call = call_grid_async,
                       .fn = (void *)real,
                       .f = f,
                       .s = s,
                       .grid_w = grid_width,
                       .grid_h = grid_height};

    if (!real)
        return shim_missing();
    if (!shim_limiter_on())
        return counted(real(f, grid_width, grid_height, s));
    return launch_limited(SHIM_LAUNCH_KERNEL, false, &l);
}
