/*
 * Start-up and symbol lookup of liballot-cuda.so. On the first hook call
 * (pthread_once) it reads the environment, opens the real driver
 * (ALLOT_CUDA_LIB or "libcuda.so.1", found the way dlopen finds it),
 * resolves the driver's own function for every hooked name, maps the
 * shared region and registers fork handlers.
 *
 * Programs reach driver functions three ways and all three lead to the
 * hooks: direct binding (the exported cu* functions of hooks.c, found
 * before the driver's because the shim is preloaded), dlsym() (overridden
 * in dlsym.c: the real dlsym answers first, and a hooked name it finds is
 * answered with the hook, shim_dlsym_answer here) and cuGetProcAddress(_v2) (the driver answers
 * first; a pointer that is one of the driver's hooked functions, or
 * failing that a hooked name at the requested version and stream flavour,
 * is replaced by the hook).
 *
 * The real dlsym is found with dlvsym(RTLD_NEXT, "dlsym", VERSION), which
 * does not pass through the override; no glibc-private symbol is used.
 */
/* _GNU_SOURCE (RTLD_NEXT, dlvsym) comes from the build */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

struct shim_table shim_allocs;

#define SHIM_NAME(name) #name,
static const char *const fn_names[SHIM_N_FN] = {SHIM_HOOKED(SHIM_NAME) "", SHIM_CALLED(SHIM_NAME)};
#undef SHIM_NAME
/* Converting a function pointer to void * is what dlsym does the other way
 * round; POSIX requires it to work. */
#define SHIM_HOOK(name) (void *)(name),
static void *const fn_hooks[SHIM_N_HOOKED] = {SHIM_HOOKED(SHIM_HOOK)};
#undef SHIM_HOOK

static void *fn_real[SHIM_N_FN]; /* the driver's functions; atomic access */
static void *driver;             /* dlopen handle of the real driver */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread bool starting; /* this thread is inside shim_start */

typedef void *(*dlsym_fn)(void *, const char *);

/* ASan resolves its interceptors with dlsym before it has mapped its
 * shadow memory: the override's path must not be instrumented. */
#define SHIM_EARLY __attribute__((no_sanitize("address")))

SHIM_EARLY static dlsym_fn real_dlsym(void)
{
    static dlsym_fn fn;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    dlsym_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);

    for (size_t i = 0; !f && i < sizeof(versions) / sizeof(versions[0]); i++)
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (f)
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    return f;
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&shim_allocs.lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&shim_allocs.lock);
}

static void fork_child(void)
{
    shim_table_reset_child(&shim_allocs);
    shim_account_reset_child();
    shim_limiter_reset_child();
    shim_nvml_reset_child();
    shim_pool_reset_child();
    shim_limits_reset_child();
}

static void shim_start(void)
{
    struct shim_config cfg;
    struct shim_region *region = NULL;
    const char *lib;
    dlsym_fn dls = real_dlsym();

    starting = true;
    shim_config_load(&cfg);
    if (cfg.bad_env)
        shim_warn("an ALLOT_GPU_MEMORY_LIMIT value does not parse: that cap is 0 bytes");
    if (cfg.bad_ctx)
        shim_warn("ALLOT_GPU_CONTEXT_OVERHEAD does not parse: contexts are not counted");
    if (cfg.bad_over)
        shim_warn("ALLOT_GPU_MEMORY_OVERSUBSCRIBE does not parse: no oversubscription");
    shim_table_init(&shim_allocs, NULL);
    lib = cfg.cuda_lib ? cfg.cuda_lib : "libcuda.so.1";
    driver = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!driver)
        shim_warn("cannot load the CUDA driver %s: %s", lib, dlerror());
    for (int i = 0; driver && dls && i < SHIM_N_FN; i++) {
        void *p = i == SHIM_N_HOOKED ? NULL : dls(driver, fn_names[i]);

        /* ALLOT_CUDA_LIB naming the shim itself must not make a hook
         * call itself forever */
        if (i < SHIM_N_HOOKED && p == fn_hooks[i])
            p = NULL;
        __atomic_store_n(&fn_real[i], p, __ATOMIC_RELEASE);
    }
    if (cfg.region_path)
        region = shim_region_open(cfg.region_path);
    shim_account_init(&cfg, region);
    shim_limiter_init();
    shim_nvml_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    starting = false;
}

void *shim_real(enum shim_fn f)
{
    pthread_once(&once, shim_start);
    return f < SHIM_N_FN ? __atomic_load_n(&fn_real[f], __ATOMIC_ACQUIRE) : NULL;
}

bool shim_driver_loaded(void)
{
    pthread_once(&once, shim_start);
    return driver != NULL;
}

SHIM_EARLY static int hook_index(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u')
        return -1;
    for (int i = 0; i < SHIM_N_HOOKED; i++)
        if (!strcmp(name, fn_names[i]))
            return i;
    return -1;
}

SHIM_EARLY void *shim_dlsym(void *handle, const char *name)
{
    dlsym_fn dls = real_dlsym();

    return dls ? dls(handle, name) : NULL;
}

void *shim_hook_for_name(const char *name)
{
    int i = hook_index(name);

    return i < 0 ? NULL : fn_hooks[i];
}

/* The CUDA version from which name's _vN is what the plain name means
 * (cuda.h's __CUDA_API_VERSION choices); 3.2 for the other _v2 names. */
static int since_version(const char *versioned)
{
    static const struct {
        const char *name;
        int since;
    } table[] = {
        {"cuGetProcAddress_v2", 12000},
        {"cuCtxCreate_v3", 11040},
        {"cuCtxCreate_v4", 12050},
        {"cuCtxDestroy_v2", 4000},
        {"cuDevicePrimaryCtxRelease_v2", 11000},
        {"cuDevicePrimaryCtxReset_v2", 11000},
        {"cuGraphAddNode_v2", 12030},
    };

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (!strcmp(versioned, table[i].name))
            return table[i].since;
    return 3020;
}

/*
 * The hook that cuGetProcAddress(symbol, version, flags) stands for, found
 * by name: the per-thread-stream flavour when asked for, else the highest
 * _vN the version reaches, else the plain name. -1 when not hooked.
 */
static int index_by_name(const char *symbol, int cuda_version, cuuint64_t flags)
{
    char name[128];
    int i;

    if (strlen(symbol) > sizeof(name) - 8)
        return -1;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        snprintf(name, sizeof(name), "%s_ptsz", symbol);
        if ((i = hook_index(name)) >= 0)
            return i;
        snprintf(name, sizeof(name), "%s_ptds", symbol);
        if ((i = hook_index(name)) >= 0)
            return i;
    }
    for (int v = 4; v >= 2; v--) {
        snprintf(name, sizeof(name), "%s_v%d", symbol, v);
        i = hook_index(name);
        if (i >= 0 && cuda_version >= since_version(name))
            return i;
    }
    return hook_index(symbol);
}

void *shim_swap_proc(const char *symbol, void *p, int cuda_version, cuuint64_t flags)
{
    void *expected = NULL;
    int i;

    if (!p || !symbol)
        return p;
    for (i = 0; i < SHIM_N_HOOKED; i++)
        if (__atomic_load_n(&fn_real[i], __ATOMIC_ACQUIRE) == p)
            return fn_hooks[i];
    /* a pointer the driver did not export under any hooked name: go by the
     * name, and adopt the pointer when that name was not exported at all */
    i = index_by_name(symbol, cuda_version, flags);
    if (i < 0 || p == fn_hooks[i])
        return p;
    __atomic_compare_exchange_n(&fn_real[i], &expected, p, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    return fn_hooks[i];
}

/* The hook dlsym hands out for symbol, which the real dlsym found at p:
 * p itself when the name is not hooked. Reached from the override
 * (dlsym.c), maybe before ASan is ready: no intercepted call here. */
SHIM_EARLY void *shim_dlsym_answer(const char *symbol, void *p)
{
    int i = hook_index(symbol);

    if (i < 0) {
        /* NVML's hooked names: their library is loaded apart (nvml.c) */
        void *h = symbol[0] == 'n' ? shim_nvml_hook_for_name(symbol) : NULL;

        return h ? h : p;
    }
    /* the real functions must be known before a hook can be called; a
     * lookup made while the driver loads must not wait for itself */
    if (!starting)
        pthread_once(&once, shim_start);
    return fn_hooks[i];
}
