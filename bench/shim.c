/*
 * bench/shim: what liballot-cuda.so adds to a program's CUDA calls, against
 * the fake driver (tests/fake/fake_cuda.c, linked like a program links
 * libcuda), in ns per call. `make bench-shim` runs it; it runs itself once
 * per configuration, each in its own process with its own environment, so
 * the shim is preloaded or not exactly as in a job:
 *
 *   no shim          the fake driver alone
 *   shim             preloaded, no limit (what a job gets with no cap)
 *   shim+cap         ALLOT_GPU_MEMORY_LIMIT=1Gi
 *   shim+cap+region  and a shared region (what the agent gives a fraction)
 *   shim+sm50        ALLOT_GPU_SM_LIMIT=50 (kernels of 0 µs, so the limit
 *                    never waits: the limiter's own cost)
 *
 * Two paths, each the median of 7 rounds in a process: a launch
 * (cuLaunchKernel, 0 µs kernels) and an allocation with its free
 * (cuMemAlloc_v2 of 4 KiB, then cuMemFree_v2). The configurations run in
 * turn, three passes, and each keeps its best pass (the machine may be
 * shared). Prints one line per configuration with the overheads against
 * the fake alone. Target: the launch path without a limit under
 * 100 ns more than without the shim. Timing lives here only; tests never
 * assert on it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct CUstream_st *CUstream;
typedef struct CUfunc_st *CUfunction;

CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                        void **extra);

#define ROUNDS        7
#define LAUNCHES      500000
#define ALLOCS        200000
#define REGION_PREFIX "/tmp/allot-bench-shim-region"

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* The measuring child: ns per launch and per allocation+free, on stdout. */
static int measure(void)
{
    double launch[ROUNDS], alloc[ROUNDS];
    CUcontext ctx;
    CUdevice d;

    if (cuInit(0) || cuDeviceGet(&d, 0) || cuCtxCreate_v2(&ctx, 0, d)) {
        fprintf(stderr, "bench-shim: the fake driver did not start\n");
        return 1;
    }
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();

        for (int i = 0; i < LAUNCHES; i++)
            if (cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL))
                return 1;
        launch[r] = (now_ns() - t0) / LAUNCHES;
        t0 = now_ns();
        for (int i = 0; i < ALLOCS; i++) {
            CUdeviceptr p;

            if (cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p))
                return 1;
        }
        alloc[r] = (now_ns() - t0) / ALLOCS;
    }
    printf("%.1f %.1f\n", median(launch, ROUNDS), median(alloc, ROUNDS));
    return 0;
}

struct config {
    const char *name;
    const char *env[3]; /* NAME=VALUE, NULL-terminated */
    bool preload;
};

/* Runs this program as the measuring child in config c. OUT launch and
 * alloc ns. Returns 0 or -1. */
static int run(const char *self, const struct config *c, double *launch, double *alloc)
{
    int fds[2], st;
    char out[128] = {0};
    ssize_t n;
    pid_t pid;

    if (pipe(fds))
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        unsetenv("LD_PRELOAD");
        for (int i = 0; c->env[i]; i++) {
            char name[64];
            const char *eq = strchr(c->env[i], '=');

            snprintf(name, sizeof(name), "%.*s", (int)(eq - c->env[i]), c->env[i]);
            setenv(name, eq + 1, 1);
        }
        if (c->preload)
            setenv("LD_PRELOAD", SHIM_LIB, 1);
        execl(self, self, "measure", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    n = read(fds[0], out, sizeof(out) - 1);
    close(fds[0]);
    waitpid(pid, &st, 0);
    if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        sscanf(out, "%lf %lf", launch, alloc) != 2)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    char region_env[96], region_path[64];
    const struct config configs[] = {
        {"no shim", {NULL}, false},
        {"shim", {NULL}, true},
        {"shim+cap", {"ALLOT_GPU_MEMORY_LIMIT=1Gi", NULL}, true},
        {"shim+cap+region", {"ALLOT_GPU_MEMORY_LIMIT=1Gi", region_env, NULL}, true},
        {"shim+sm50", {"ALLOT_GPU_SM_LIMIT=50", NULL}, true},
    };
    enum { N = sizeof(configs) / sizeof(configs[0]), PASSES = 3 };
    double launch[N], alloc[N];
    int rc = 0;

    if (argc > 1 && !strcmp(argv[1], "measure"))
        return measure();
    setenv("FAKE_CUDA_UUIDS", "GPU-00000000-0000-0000-0000-000000000001", 1);
    setenv("FAKE_CUDA_MEM_MIB", "4096", 1);
    setenv("FAKE_CUDA_KERNEL_US", "0", 1);
    setenv("ALLOT_SHIM_LOG", "off", 1);
    snprintf(region_path, sizeof(region_path), "%s-%d", REGION_PREFIX, (int)getpid());
    snprintf(region_env, sizeof(region_env), "ALLOT_SHIM_REGION=%s", region_path);
    {
        FILE *f = fopen(region_path, "w"); /* the agent creates it empty */

        if (!f)
            return 1;
        fclose(f);
    }
    printf("bench=shim driver=fake launches=%d allocs=%d rounds=%d (median)\n", LAUNCHES, ALLOCS,
           ROUNDS);
    for (int i = 0; i < N; i++)
        launch[i] = alloc[i] = 1e18;
    for (int pass = 0; pass < PASSES; pass++) {
        for (int i = 0; i < N; i++) {
            double l, a;

            if (run("/proc/self/exe", &configs[i], &l, &a)) {
                printf("%-16s failed\n", configs[i].name);
                rc = 1;
                continue;
            }
            launch[i] = l < launch[i] ? l : launch[i];
            alloc[i] = a < alloc[i] ? a : alloc[i];
        }
    }
    for (int i = 0; i < N && !rc; i++) {
        printf("%-16s launch_ns=%6.1f (+%5.1f)  alloc_free_ns=%7.1f (+%6.1f)\n", configs[i].name,
               launch[i], i ? launch[i] - launch[0] : 0.0, alloc[i], i ? alloc[i] - alloc[0] : 0.0);
    }
    unlink(region_path);
    if (!rc)
        printf("launch overhead without a limit: %.1f ns (target < 100)\n", launch[1] - launch[0]);
    return rc;
}
