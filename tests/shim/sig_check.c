/*
 * Build-time check that every hook liballot-cuda.so exports has NVIDIA's
 * signature: src/shim/shim.h's declarations are compiled against cuda.h's
 * own types (cuda_abi.h is kept out), after cuda.h with its internal
 * section on (__CUDA_API_VERSION_INTERNAL, which declares the legacy and
 * versioned names side by side instead of #defining one to the other).
 * A hook whose parameters differ from the driver's is then a "conflicting
 * types" error and fails the build. Compiled (never run) when the build
 * finds cuda.h; checked with CUDA 13.0 (every cu* hook of shim.h is
 * declared there). NVML's hooks are not checked: no nvml.h here.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

/* shim.h with cuda.h's types: cuda_abi.h's guard taken, NVML's types
 * given as the shim spells them */
#define ALLOT_SHIM_CUDA_ABI_H
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#include "shim.h"

/* something for the object file to hold */
int shim_sig_checked(void);
int shim_sig_checked(void)
{
    return 1;
}
