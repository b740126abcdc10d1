/*
 * Build-time check that src/shim/cuda_abi.h matches NVIDIA's cuda.h: the
 * shim's own copies of the constants and layouts are taken under other
 * names first, then cuda.h is included and each is compared with
 * _Static_assert. Compiled (never run) when the build finds cuda.h;
 * a mismatch fails the build.
 */
#include <stddef.h>

/* the shim's types under shim_ names */
#define CUmemLocation                  shim_CUmemLocation
#define CUmemAllocationProp            shim_CUmemAllocationProp
#define CUDA_ARRAY_DESCRIPTOR          shim_CUDA_ARRAY_DESCRIPTOR
#define CUDA_ARRAY3D_DESCRIPTOR        shim_CUDA_ARRAY3D_DESCRIPTOR
#define CUDA_ARRAY_DESCRIPTOR_v1       shim_CUDA_ARRAY_DESCRIPTOR_v1
#define CUDA_ARRAY3D_DESCRIPTOR_v1     shim_CUDA_ARRAY3D_DESCRIPTOR_v1
#define CUresult                       shim_CUresult
#define CUdevice                       shim_CUdevice
#define CUdeviceptr                    shim_CUdeviceptr
#define CUdeviceptr_v1                 shim_CUdeviceptr_v1
#define CUmemGenericAllocationHandle   shim_CUmemGenericAllocationHandle
#define cuuint64_t                     shim_cuuint64_t
#define CUcontext                      shim_CUcontext
#define CUstream                       shim_CUstream
#define CUarray                        shim_CUarray
#define CUmemoryPool                   shim_CUmemoryPool
#define CUdriverProcAddressQueryResult shim_CUdriverProcAddressQueryResult
#define CUmemPool_attribute            shim_CUmemPool_attribute
#define CUmemAllocationHandleType      shim_CUmemAllocationHandleType
#define CUlimit                        shim_CUlimit
#define CUdevice_attribute             shim_CUdevice_attribute
#define CUctx_st                       shim_CUctx_st
#define CUstream_st                    shim_CUstream_st
#define CUarray_st                     shim_CUarray_st
#define CUmemPoolHandle_st             shim_CUmemPoolHandle_st
#define CUmipmappedArray               shim_CUmipmappedArray
#define CUmipmappedArray_st            shim_CUmipmappedArray_st
#define CUfunction                     shim_CUfunction
#define CUfunc_st                      shim_CUfunc_st
#define CUevent                        shim_CUevent
#define CUevent_st                     shim_CUevent_st
#define CUgraphExec                    shim_CUgraphExec
#define CUgraphExec_st                 shim_CUgraphExec_st
#define CUlaunchAttribute              shim_CUlaunchAttribute
#define CUlaunchAttribute_st           shim_CUlaunchAttribute_st
#define CUlaunchConfig                 shim_CUlaunchConfig
#define CUuuid                         shim_CUuuid
#define CUgraph                        shim_CUgraph
#define CUgraph_st                     shim_CUgraph_st
#define CUgraphNode                    shim_CUgraphNode
#define CUgraphNode_st                 shim_CUgraphNode_st
#define CUexecAffinityParam            shim_CUexecAffinityParam
#define CUexecAffinityParam_st         shim_CUexecAffinityParam_st
#define CUctxCreateParams              shim_CUctxCreateParams
#define CUctxCreateParams_st           shim_CUctxCreateParams_st
#define CUgraphEdgeData                shim_CUgraphEdgeData
#define CUgraphEdgeData_st             shim_CUgraphEdgeData_st
#define CUmemAccessDesc                shim_CUmemAccessDesc
#define CUmemAccessDesc_st             shim_CUmemAccessDesc_st
#define CUmemPoolProps                 shim_CUmemPoolProps
#define CUDA_MEM_ALLOC_NODE_PARAMS     shim_CUDA_MEM_ALLOC_NODE_PARAMS
#define CUgraphNodeParams              shim_CUgraphNodeParams
#include "cuda_abi.h"

/* the shim's constants, taken before cuda.h defines the same names */
enum {
    S_SUCCESS = CUDA_SUCCESS,
    S_INVALID_VALUE = CUDA_ERROR_INVALID_VALUE,
    S_OUT_OF_MEMORY = CUDA_ERROR_OUT_OF_MEMORY,
    S_NOT_INITIALIZED = CUDA_ERROR_NOT_INITIALIZED,
    S_INVALID_DEVICE = CUDA_ERROR_INVALID_DEVICE,
    S_INVALID_CONTEXT = CUDA_ERROR_INVALID_CONTEXT,
    S_NOT_FOUND = CUDA_ERROR_NOT_FOUND,
    S_NOT_READY = CUDA_ERROR_NOT_READY,
    S_NOT_SUPPORTED = CUDA_ERROR_NOT_SUPPORTED,
    S_UNKNOWN = CUDA_ERROR_UNKNOWN,
    S_GPA_DEFAULT = CU_GET_PROC_ADDRESS_DEFAULT,
    S_GPA_LEGACY = CU_GET_PROC_ADDRESS_LEGACY_STREAM,
    S_GPA_PTDS = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
    S_GPA_SUCCESS = CU_GET_PROC_ADDRESS_SUCCESS,
    S_GPA_NOT_FOUND = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
    S_LOC_DEVICE = CU_MEM_LOCATION_TYPE_DEVICE,
    S_LOC_HOST = CU_MEM_LOCATION_TYPE_HOST,
    S_LOC_HOST_NUMA = CU_MEM_LOCATION_TYPE_HOST_NUMA,
    S_LOC_HOST_NUMA_CURRENT = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT,
    S_ALLOC_PINNED = CU_MEM_ALLOCATION_TYPE_PINNED,
    S_ATTACH_GLOBAL = CU_MEM_ATTACH_GLOBAL,
    S_ADVISE_PREFERRED = CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
    S_DEVICE_CPU = CU_DEVICE_CPU,
    S_NODE_MEM_ALLOC = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
    S_POOL_THRESHOLD = CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
    S_POOL_RESERVED = CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
    S_POOL_USED = CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
    S_LIMIT_STACK = CU_LIMIT_STACK_SIZE,
    S_LIMIT_PRINTF = CU_LIMIT_PRINTF_FIFO_SIZE,
    S_LIMIT_HEAP = CU_LIMIT_MALLOC_HEAP_SIZE,
    S_ATTR_SMS = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    S_ATTR_THREADS_PER_SM = CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
};
#undef CUDA_SUCCESS
#undef CUDA_ERROR_INVALID_VALUE
#undef CUDA_ERROR_OUT_OF_MEMORY
#undef CUDA_ERROR_NOT_INITIALIZED
#undef CUDA_ERROR_INVALID_DEVICE
#undef CUDA_ERROR_INVALID_CONTEXT
#undef CUDA_ERROR_NOT_FOUND
#undef CUDA_ERROR_NOT_READY
#undef CUDA_ERROR_NOT_SUPPORTED
#undef CUDA_ERROR_UNKNOWN
#undef CU_GET_PROC_ADDRESS_DEFAULT
#undef CU_GET_PROC_ADDRESS_LEGACY_STREAM
#undef CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#undef CU_GET_PROC_ADDRESS_SUCCESS
#undef CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
#undef CU_MEM_LOCATION_TYPE_DEVICE
#undef CU_MEM_LOCATION_TYPE_HOST
#undef CU_MEM_LOCATION_TYPE_HOST_NUMA
#undef CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT
#undef CU_MEM_ALLOCATION_TYPE_PINNED
#undef CU_MEM_ATTACH_GLOBAL
#undef CU_MEM_ADVISE_SET_PREFERRED_LOCATION
#undef CU_DEVICE_CPU
#undef CU_GRAPH_NODE_TYPE_MEM_ALLOC
#undef CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
#undef CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
#undef CU_MEMPOOL_ATTR_USED_MEM_CURRENT
#undef CU_LIMIT_STACK_SIZE
#undef CU_LIMIT_PRINTF_FIFO_SIZE
#undef CU_LIMIT_MALLOC_HEAP_SIZE
#undef CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
#undef CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
#undef CUmemLocation
#undef CUmemAllocationProp
#undef CUDA_ARRAY_DESCRIPTOR
#undef CUDA_ARRAY3D_DESCRIPTOR
#undef CUDA_ARRAY_DESCRIPTOR_v1
#undef CUDA_ARRAY3D_DESCRIPTOR_v1
#undef CUresult
#undef CUdevice
#undef CUdeviceptr
#undef CUdeviceptr_v1
#undef CUmemGenericAllocationHandle
#undef cuuint64_t
#undef CUcontext
#undef CUstream
#undef CUarray
#undef CUmemoryPool
#undef CUdriverProcAddressQueryResult
#undef CUmemPool_attribute
#undef CUmemAllocationHandleType
#undef CUlimit
#undef CUdevice_attribute
#undef CUctx_st
#undef CUstream_st
#undef CUarray_st
#undef CUmemPoolHandle_st
#undef CUmipmappedArray
#undef CUmipmappedArray_st
#undef CUfunction
#undef CUfunc_st
#undef CUevent
#undef CUevent_st
#undef CUgraphExec
#undef CUgraphExec_st
#undef CUlaunchAttribute
#undef CUlaunchAttribute_st
#undef CUlaunchConfig
#undef CUuuid
#undef CUgraph
#undef CUgraph_st
#undef CUgraphNode
#undef CUgraphNode_st
#undef CUexecAffinityParam
#undef CUexecAffinityParam_st
#undef CUctxCreateParams
#undef CUctxCreateParams_st
#undef CUgraphEdgeData
#undef CUgraphEdgeData_st
#undef CUmemAccessDesc
#undef CUmemAccessDesc_st
#undef CUmemPoolProps
#undef CUDA_MEM_ALLOC_NODE_PARAMS
#undef CUgraphNodeParams

#include <cuda.h>

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " != " #b)
#define SAME_TYPE(s, c)                                                                            \
    _Static_assert(sizeof(s) == sizeof(c), "size of " #s);                                         \
    _Static_assert(_Alignof(s) == _Alignof(c), "alignment of " #s)
#define SAME_FIELD(s, c, f)                                                                        \
    _Static_assert(offsetof(s, f) == offsetof(c, f), "offset of " #s "." #f);                      \
    _Static_assert(sizeof(((s *)0)->f) == sizeof(((c *)0)->f), "size of " #s "." #f)

SAME(S_SUCCESS, CUDA_SUCCESS);
SAME(S_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME(S_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(S_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME(S_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME(S_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME(S_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME(S_NOT_READY, CUDA_ERROR_NOT_READY);
SAME(S_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
SAME(S_UNKNOWN, CUDA_ERROR_UNKNOWN);
SAME(S_GPA_DEFAULT, CU_GET_PROC_ADDRESS_DEFAULT);
SAME(S_GPA_LEGACY, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
SAME(S_GPA_PTDS, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
SAME(S_GPA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
SAME(S_GPA_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
SAME(S_LOC_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
SAME(S_LOC_HOST, CU_MEM_LOCATION_TYPE_HOST);
SAME(S_LOC_HOST_NUMA, CU_MEM_LOCATION_TYPE_HOST_NUMA);
SAME(S_LOC_HOST_NUMA_CURRENT, CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
SAME(S_ALLOC_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
SAME(S_ATTACH_GLOBAL, CU_MEM_ATTACH_GLOBAL);
SAME(S_ADVISE_PREFERRED, CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
SAME(S_DEVICE_CPU, CU_DEVICE_CPU);

SAME_TYPE(shim_CUresult, CUresult);
SAME_TYPE(shim_CUdevice, CUdevice);
SAME_TYPE(shim_CUdeviceptr, CUdeviceptr);
SAME_TYPE(shim_CUmemGenericAllocationHandle, CUmemGenericAllocationHandle);
SAME_TYPE(shim_cuuint64_t, cuuint64_t);
SAME_TYPE(shim_CUdriverProcAddressQueryResult, CUdriverProcAddressQueryResult);
SAME_TYPE(shim_CUmemPool_attribute, CUmemPool_attribute);
SAME_TYPE(shim_CUmemAllocationHandleType, CUmemAllocationHandleType);
SAME(S_POOL_THRESHOLD, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
SAME(S_POOL_RESERVED, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
SAME(S_POOL_USED, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
SAME_TYPE(shim_CUlimit, CUlimit);
SAME_TYPE(shim_CUdevice_attribute, CUdevice_attribute);
SAME(S_LIMIT_STACK, CU_LIMIT_STACK_SIZE);
SAME(S_LIMIT_PRINTF, CU_LIMIT_PRINTF_FIFO_SIZE);
SAME(S_LIMIT_HEAP, CU_LIMIT_MALLOC_HEAP_SIZE);
SAME(S_ATTR_SMS, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME(S_ATTR_THREADS_PER_SM, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);

SAME_TYPE(shim_CUmemLocation, CUmemLocation);
SAME_FIELD(shim_CUmemLocation, CUmemLocation, type);
SAME_FIELD(shim_CUmemLocation, CUmemLocation, id);
SAME_TYPE(shim_CUmemAllocationProp, CUmemAllocationProp);
SAME_FIELD(shim_CUmemAllocationProp, CUmemAllocationProp, type);
SAME_FIELD(shim_CUmemAllocationProp, CUmemAllocationProp, requestedHandleTypes);
SAME_FIELD(shim_CUmemAllocationProp, CUmemAllocationProp, location);
SAME_FIELD(shim_CUmemAllocationProp, CUmemAllocationProp, win32HandleMetaData);
SAME_FIELD(shim_CUmemAllocationProp, CUmemAllocationProp, allocFlags);

SAME_TYPE(shim_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR);
SAME_FIELD(shim_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, Width);
SAME_FIELD(shim_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, Height);
SAME_FIELD(shim_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, Format);
SAME_FIELD(shim_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, NumChannels);
SAME_TYPE(shim_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR);
SAME_FIELD(shim_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Width);
SAME_FIELD(shim_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Height);
SAME_FIELD(shim_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Depth);
SAME_FIELD(shim_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Format);
SAME_FIELD(shim_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, NumChannels);
SAME_FIELD(shim_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Flags);

SAME_TYPE(shim_CUlaunchConfig, CUlaunchConfig);
SAME_FIELD(shim_CUlaunchConfig, CUlaunchConfig, sharedMemBytes);
SAME_FIELD(shim_CUlaunchConfig, CUlaunchConfig, hStream);
SAME_FIELD(shim_CUlaunchConfig, CUlaunchConfig, attrs);
SAME_FIELD(shim_CUlaunchConfig, CUlaunchConfig, numAttrs);

SAME_TYPE(shim_CUuuid, CUuuid);
SAME(S_NODE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
SAME_TYPE(shim_CUmemPoolProps, CUmemPoolProps);
SAME_FIELD(shim_CUmemPoolProps, CUmemPoolProps, location);
SAME_FIELD(shim_CUmemPoolProps, CUmemPoolProps, usage);
SAME_TYPE(shim_CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS);
SAME_FIELD(shim_CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS, poolProps);
SAME_FIELD(shim_CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS, bytesize);
SAME_FIELD(shim_CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS, dptr);
SAME_TYPE(shim_CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS_v2);
SAME_FIELD(shim_CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS_v2, bytesize);
SAME_TYPE(shim_CUgraphNodeParams, CUgraphNodeParams);
SAME_FIELD(shim_CUgraphNodeParams, CUgraphNodeParams, type);
SAME_FIELD(shim_CUgraphNodeParams, CUgraphNodeParams, alloc);
SAME_FIELD(shim_CUgraphNodeParams, CUgraphNodeParams, reserved2);

/* something for the object file to hold */
int shim_abi_checked(void);
int shim_abi_checked(void)
{
    return 1;
}
