/*
 * fake-cuda-job: a tiny CUDA program for the agent's tests, linked with the
 * fake driver (build/fake-cuda/libcuda.so.1): creates a context, allocates
 * BYTES of device memory and launches kernels for SECONDS, so that
 * liballot-cuda.so (preloaded by the agent for a GPU fraction) meters it in
 * the job's shared region.
 *
 * usage: fake-cuda-job BYTES SECONDS
 * Prints "alloc 0" (the CUresult of the allocation) and "launches N".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size);
CUresult cuCtxSynchronize(void);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                        void **extra);

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    CUdevice d = 0;
    CUcontext c = NULL;
    CUdeviceptr p = 0;
    unsigned long long n = 0;
    double end;

    if (argc != 3) {
        fprintf(stderr, "usage: fake-cuda-job BYTES SECONDS\n");
        return 2;
    }
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuCtxCreate_v2(&c, 0, d)) {
        fprintf(stderr, "fake-cuda-job: no CUDA device\n");
        return 1;
    }
    printf("alloc %d\n", cuMemAlloc_v2(&p, strtoull(argv[1], NULL, 10)));
    fflush(stdout);
    end = now_s() + atof(argv[2]);
    while (now_s() < end) {
        if (cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) == 0)
            n++;
    }
    cuCtxSynchronize();
    printf("launches %llu\n", n);
    return 0;
}
