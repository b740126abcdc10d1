/*
 * The slice of the CUDA driver ABI that liballot-cuda.so hooks, written
 * out here so the shim builds without NVIDIA's headers. Every type and
 * constant matches cuda.h (checked against CUDA 13.0's header; the layouts
 * used have not changed since CUDA 10.2). Names are CUDA's own, so code
 * reads like the driver documentation; nothing here is exported.
 *
 * cuda.h is deliberately not included: it #defines cuMemAlloc to
 * cuMemAlloc_v2 and so on, and the shim must define the plain and the
 * versioned symbols side by side.
 */
#ifndef ALLOT_SHIM_CUDA_ABI_H
#define ALLOT_SHIM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1; /* the 32-bit pointers of CUDA < 3.2 */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUarray_st *CUarray;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUlaunchAttribute_st CUlaunchAttribute;
typedef int CUdriverProcAddressQueryResult;
typedef int CUmemPool_attribute;       /* an enum in cuda.h */
typedef int CUmemAllocationHandleType; /* an enum in cuda.h */
typedef int CUlimit;                   /* an enum in cuda.h */
typedef int CUdevice_attribute;        /* an enum in cuda.h */

#define CUDA_SUCCESS               0
#define CUDA_ERROR_INVALID_VALUE   1
#define CUDA_ERROR_OUT_OF_MEMORY   2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_DEVICE  101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_FOUND       500
#define CUDA_ERROR_NOT_READY       600
#define CUDA_ERROR_NOT_SUPPORTED   801
#define CUDA_ERROR_UNKNOWN         999

/* cuGetProcAddress flags and query results */
#define CU_GET_PROC_ADDRESS_DEFAULT                   0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM             (1 << 0)
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (1 << 1)
#define CU_GET_PROC_ADDRESS_SUCCESS                   0
#define CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND          1

#define CU_MEM_LOCATION_TYPE_DEVICE            1
#define CU_MEM_LOCATION_TYPE_HOST              2
#define CU_MEM_LOCATION_TYPE_HOST_NUMA         3
#define CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT 4
#define CU_MEM_ALLOCATION_TYPE_PINNED          1

/* CUmemPool_attribute: the ones the shim reads or watches (cuuint64_t values) */
#define CU_MEMPOOL_ATTR_RELEASE_THRESHOLD    4
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define CU_MEMPOOL_ATTR_USED_MEM_CURRENT     7

/* CUlimit: the limits that reserve device memory and the shim counts */
#define CU_LIMIT_STACK_SIZE       0
#define CU_LIMIT_PRINTF_FIFO_SIZE 1
#define CU_LIMIT_MALLOC_HEAP_SIZE 2

/* CUdevice_attribute: what a stack reservation is estimated from */
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT           16
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR 39

#define CU_MEM_ATTACH_GLOBAL                 0x1
#define CU_MEM_ADVISE_SET_PREFERRED_LOCATION 3
#define CU_DEVICE_CPU                        ((CUdevice)-1)

typedef struct {
    int type; /* CUmemLocationType */
    int id;
} CUmemLocation;

/* CUmemAllocationProp: only the leading fields the shim reads are named;
 * the rest of the caller's structure is never touched. */
typedef struct {
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType */
    CUmemLocation location;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;

typedef struct {
    size_t Width;
    size_t Height;
    int Format; /* CUarray_format */
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct {
    unsigned int Width;
    unsigned int Height;
    int Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct {
    size_t Width;
    size_t Height;
    size_t Depth;
    int Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

typedef struct {
    unsigned int Width;
    unsigned int Height;
    unsigned int Depth;
    int Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

/* cuLaunchKernelEx's configuration: the shim reads hStream only */
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

typedef struct {
    char bytes[16];
} CUuuid;

typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUexecAffinityParam_st CUexecAffinityParam;
typedef struct CUctxCreateParams_st CUctxCreateParams;
typedef struct CUgraphEdgeData_st CUgraphEdgeData;
typedef struct CUmemAccessDesc_st CUmemAccessDesc;

#define CU_GRAPH_NODE_TYPE_MEM_ALLOC 10

/* CUmemPoolProps: the location is what the shim reads */
typedef struct {
    int allocType;   /* CUmemAllocationType */
    int handleTypes; /* CUmemAllocationHandleType */
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

/* a graph's memory allocation node (the _v2 of cuGraphAddNode's union
 * has the same layout) */
typedef struct {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr; /* out */
} CUDA_MEM_ALLOC_NODE_PARAMS;

/* cuGraphAddNode's parameters: the type, then a union of 232 bytes */
typedef struct {
    int type; /* CUgraphNodeType */
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_MEM_ALLOC_NODE_PARAMS alloc;
    };
    long long reserved2;
} CUgraphNodeParams;

/* ---- the slice of NVML (nvml.h) the shim hooks or calls ------------------ */

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_SUCCESS                  0
#define NVML_ERROR_UNINITIALIZED      1
#define NVML_ERROR_INVALID_ARGUMENT   2
#define NVML_ERROR_INSUFFICIENT_SIZE  7
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_VALUE_NOT_AVAILABLE      (~0ull) /* usedGpuMemory unknown */

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

/* version: nvmlMemory_v2, sizeof | 2 << 24 */
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* what nvmlDeviceGetComputeRunningProcesses_v2 and _v3 list */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* the plain (v1) function's entries */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

#endif
