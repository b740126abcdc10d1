/*
 * tests/gpu/shim_share.cu: liballot-cuda.so's compute share and launch
 * cost against NVIDIA's driver (tests/gpu/run.sh builds it with nvcc).
 *
 *   shim_share share SECONDS [AT]   with the shim and ALLOT_GPU_SM_LIMIT=P:
 *       launches a one-block kernel that spins for 1 ms of the GPU's
 *       global timer back to back for SECONDS, waits for the GPU, and
 *       prints "busy B" (percent: the time the kernels ran, as each
 *       measured itself on the GPU, over the wall time from the first
 *       launch to the last kernel's end). Neither a clock that changes
 *       with the GPU's load nor the shim's waiting can move the figure.
 *       With AT (seconds since the epoch) it makes its context, then
 *       waits until AT to launch, so that jobs started apart launch
 *       together; it first prints "gpu G" (its CUDA_VISIBLE_DEVICES) and
 *       "late L" (how many seconds after AT it was ready; 0 when it
 *       waited).
 *   shim_share launch N         launches an empty kernel N times (best of
 *       5 rounds) through the runtime (<<<>>>) and through the driver
 *       (cuLaunchKernel) and prints "launch_ns X drv_ns Y", the host's time
 *       in one launch call each way (batches of 256 timed, the GPU drained
 *       between them untimed): run with and without the shim, the
 *       difference is the shim's
 *
 * The runtime's <<<>>> launches reach the driver through the pointers
 * cuGetProcAddress handed out, so they go through the shim's hooks; the
 * program's own cuLaunchKernel binds to the shim's export. Build with
 * -lcuda.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__device__ static unsigned long long gtime(void)
{
    unsigned long long t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Spins for ns of the global timer; adds the time it ran to *ran. */
__global__ void spin(long long ns, unsigned long long *ran)
{
    unsigned long long start = gtime(), t;

    while ((t = gtime()) - start < (unsigned long long)ns)
        ;
    atomicAdd(ran, t - start);
}

__global__ void empty(void)
{
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int share(double seconds, double at)
{
    unsigned long long *ran = NULL, total = 0;
    double t0, t1;
    long n = 0;

    if (cudaMalloc(&ran, sizeof(*ran)) != cudaSuccess ||
        cudaMemset(ran, 0, sizeof(*ran)) != cudaSuccess) {
        printf("FAIL shim share: no device memory (%s)\n",
               cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    if (at > 0) {
        const char *gpu = getenv("CUDA_VISIBLE_DEVICES");
        double w = wall_s();

        if (at > w) {
            struct timespec ts = {(time_t)(at - w), (long)((at - w - (double)(time_t)(at - w)) * 1e9)};

            nanosleep(&ts, NULL);
        }
        printf("gpu %s\nlate %.3f\n", gpu ? gpu : "-", w > at ? w - at : 0.0);
    }
    t0 = now_s();
    while (now_s() - t0 < seconds) {
        spin<<<1, 1>>>(1000000, ran);
        n++;
    }
    cudaDeviceSynchronize();
    t1 = now_s();
    cudaMemcpy(&total, ran, sizeof(total), cudaMemcpyDeviceToHost);
    printf("busy %.1f (%ld kernels of %.3f ms in %.3f s)\n", 100.0 * (double)total / 1e9 / (t1 - t0),
           n, n ? (double)total / 1e6 / (double)n : 0.0, t1 - t0);
    cudaFree(ran);
    return cudaGetLastError() != cudaSuccess;
}

static int launch(long n)
{
    double best = 1e18, best_drv = 1e18;
    cudaFunction_t fn;

    empty<<<1, 1>>>();
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaGetFuncBySymbol(&fn, (const void *)empty) != cudaSuccess) {
        printf("FAIL shim launch: the kernel did not run (%s)\n",
               cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    for (int r = 0; r < 10; r++) {
        double host = 0, ns;
        bool drv = r % 2; /* the two ways in turn */

        /* the host's time in the launch calls alone: batches of 256 (a
         * queue that never fills, so no launch waits for the GPU), each
         * timed, the GPU drained between them untimed */
        for (long i = 0; i < n; i += 256) {
            double t0 = now_s();
            for (long k = i; k < n && k < i + 256; k++) {
                if (drv)
                    cuLaunchKernel((CUfunction)fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
                else
                    empty<<<1, 1>>>();
            }
            host += now_s() - t0;
            cudaDeviceSynchronize();
        }
        ns = host * 1e9 / (double)n;
        if (drv)
            best_drv = ns < best_drv ? ns : best_drv;
        else
            best = ns < best ? ns : best;
    }
    printf("launch_ns %.1f drv_ns %.1f\n", best, best_drv);
    return cudaGetLastError() != cudaSuccess;
}

int main(int argc, char **argv)
{
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "share"))
        return share(atof(argv[2]), argc == 4 ? atof(argv[3]) : 0);
    if (argc == 3 && !strcmp(argv[1], "launch"))
        return launch(atol(argv[2]));
    fprintf(stderr, "usage: shim_share share SECONDS [AT] | launch N\n");
    return 2;
}
