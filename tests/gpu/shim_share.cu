/*
 * tests/gpu/shim_share.cu: liballot-cuda.so's compute share and launch
 * cost against NVIDIA's driver (tests/gpu/run.sh builds it with nvcc).
 *
 *   shim_share share SECONDS   with the shim and ALLOT_GPU_SM_LIMIT=P:
 *       calibrates a one-block spin kernel to about 1 ms alone, launches
 *       it back to back for SECONDS, waits for the GPU, and prints
 *       "busy B" (percent: the kernels' calibrated time over the wall time
 *       from the first launch to the last kernel's end)
 *   shim_share launch N         launches an empty kernel N times (best of
 *       5 rounds) and prints "launch_ns X", the host cost of one launch:
 *       run with and without the shim, the difference is the shim's
 *
 * The runtime's <<<>>> launches reach the driver through the pointers
 * cuGetProcAddress handed out, so they go through the shim's hooks.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__global__ void spin(long long cycles)
{
    long long start = clock64();

    while (clock64() - start < cycles)
        ;
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

/* One spin kernel alone, in ms (events around it). */
static float kernel_ms(long long cycles)
{
    cudaEvent_t a, b;
    float ms = 0;

    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, 0);
    spin<<<1, 1>>>(cycles);
    cudaEventRecord(b, 0);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

static int share(double seconds)
{
    long long cycles = 1000000;
    double t0, t1;
    float ms = 0;
    long n = 0;

    /* calibrate to about 1 ms (the limiter's probes measure it too) */
    for (int i = 0; i < 8; i++) {
        ms = kernel_ms(cycles);
        if (ms <= 0) {
            printf("FAIL shim share: the kernel did not run (%s)\n",
                   cudaGetErrorString(cudaGetLastError()));
            return 1;
        }
        cycles = (long long)((double)cycles / ms);
    }
    ms = 0;
    for (int i = 0; i < 5; i++)
        ms += kernel_ms(cycles) / 5;
    t0 = now_s();
    while (now_s() - t0 < seconds) {
        spin<<<1, 1>>>(cycles);
        n++;
    }
    cudaDeviceSynchronize();
    t1 = now_s();
    printf("busy %.1f (%ld kernels of %.3f ms in %.3f s)\n",
           100.0 * n * ms / 1000.0 / (t1 - t0), n, ms, t1 - t0);
    return cudaGetLastError() != cudaSuccess;
}

static int launch(long n)
{
    double best = 1e18;

    empty<<<1, 1>>>();
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("FAIL shim launch: the kernel did not run (%s)\n",
               cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    for (int r = 0; r < 5; r++) {
        double t0 = now_s(), ns;

        for (long i = 0; i < n; i++) {
            empty<<<1, 1>>>();
            /* keep the queue short: a full queue blocks the host */
            if (i % 1000 == 999)
                cudaDeviceSynchronize();
        }
        cudaDeviceSynchronize();
        ns = (now_s() - t0) * 1e9 / (double)n;
        best = ns < best ? ns : best;
    }
    printf("launch_ns %.1f\n", best);
    return cudaGetLastError() != cudaSuccess;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "share"))
        return share(atof(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "launch"))
        return launch(atol(argv[2]));
    fprintf(stderr, "usage: shim_share share SECONDS | launch N\n");
    return 2;
}
