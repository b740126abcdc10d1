/*
 * Internals of the NVML client (nvml.c, nvml_mig.c): the few NVML types and
 * constants the client uses, copied with their ABI from NVIDIA's public
 * nvml.h (API 11 and 12; the _Static_asserts pin the layouts on LP64), the
 * table of resolved entry points, the handle, and the helpers both files
 * share (internal names: nvml__ prefix). Nothing outside src/agent/nvml*.c
 * includes this file.
 */
#ifndef ALLOT_AGENT_NVML_INT_H
#define ALLOT_AGENT_NVML_INT_H

#include "nvml.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- NVML ABI (from NVIDIA's nvml.h) ----------------------------------- */

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1
} nvmlEccCounterType_t;

typedef enum nvmlPageRetirementCause_enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
} nvmlPageRetirementCause_t;

typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE             96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE             96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE          32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE       16
#define NVML_NVLINK_MAX_LINKS                       18
#define NVML_VALUE_NOT_AVAILABLE                    (-1)
#define NVML_DEVICE_MIG_DISABLE                     0
#define NVML_DEVICE_MIG_ENABLE                      1
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0
#define nvmlEventTypeXidCriticalError               0x0000000000000008ULL

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* The layout of _v2, and of _v3 in current drivers (nvmlProcessInfo_t). */
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;

/* NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2) */
#define nvmlGpuInstanceProfileInfo_v2                                                              \
    ((unsigned int)(sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24)))

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t ABI");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t ABI");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t ABI");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t ABI");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "nvmlGpuInstanceProfileInfo_t ABI");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152, "profile info v2 ABI");
_Static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t ABI");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36, "CI profile info ABI");
_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "nvmlComputeInstanceInfo_t ABI");

/* ---- the resolved entry points (NULL: symbol missing) --------------------- */

struct nvml_fns {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);        /* _v3, _v2 */
    nvmlReturn_t (*pci_legacy)(nvmlDevice_t, nvmlPciInfo_t *); /* plain: busIdLegacy only */
    nvmlReturn_t (*minor)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int *, unsigned int *);
    nvmlReturn_t (*set_mig_mode)(nvmlDevice_t, unsigned int, nvmlReturn_t *);
    nvmlReturn_t (*gi_profile_v)(nvmlDevice_t, unsigned int, nvmlGpuInstanceProfileInfo_v2_t *);
    nvmlReturn_t (*gi_profile)(nvmlDevice_t, unsigned int, nvmlGpuInstanceProfileInfo_t *);
    nvmlReturn_t (*gi_placements)(nvmlDevice_t, unsigned int, nvmlGpuInstancePlacement_t *,
                                  unsigned int *);
    nvmlReturn_t (*gi_list)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t *, unsigned int *);
    nvmlReturn_t (*gi_by_id)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t *);
    nvmlReturn_t (*gi_info)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *);
    nvmlReturn_t (*gi_create)(nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_t *,
                              nvmlGpuInstance_t *);
    nvmlReturn_t (*gi_destroy)(nvmlGpuInstance_t);
    nvmlReturn_t (*ci_profile)(nvmlGpuInstance_t, unsigned int, unsigned int,
                               nvmlComputeInstanceProfileInfo_t *);
    nvmlReturn_t (*ci_create)(nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *);
    nvmlReturn_t (*ci_list)(nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *,
                            unsigned int *);
    nvmlReturn_t (*ci_info)(nvmlComputeInstance_t, nvmlComputeInstanceInfo_t *);
    nvmlReturn_t (*ci_destroy)(nvmlComputeInstance_t);
    nvmlReturn_t (*mig_count)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*mig_handle)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*mig_gi_id)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*mig_ci_id)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t *);
    nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
    nvmlReturn_t (*ecc)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                        unsigned long long *);
    nvmlReturn_t (*retired)(nvmlDevice_t, nvmlPageRetirementCause_t, unsigned int *,
                            unsigned long long *);
    nvmlReturn_t (*retired_pending)(nvmlDevice_t, nvmlEnableState_t *);
    nvmlReturn_t (*remapped)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
                             unsigned int *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*temp)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int *);
    nvmlReturn_t (*procs_v2)(nvmlDevice_t, unsigned int *, void *);
    nvmlReturn_t (*procs_v3)(nvmlDevice_t, unsigned int *, void *);
    nvmlReturn_t (*procs_v1)(nvmlDevice_t, unsigned int *, void *);
    nvmlReturn_t (*ev_create)(nvmlEventSet_t *);
    nvmlReturn_t (*ev_free)(nvmlEventSet_t);
    nvmlReturn_t (*ev_types)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*ev_register)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*ev_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
};

struct nvml {
    void *dl; /* dlopen handle, owned */
    struct nvml_fns f;
    bool pci_from_legacy;  /* only the plain nvmlDeviceGetPciInfo exists */
    unsigned features;     /* ALLOT_NVML_F_EVENTS, ALLOT_NVML_F_MIG_APPLY */
    nvmlEventSet_t events; /* owned (nvmlEventSetFree); NULL without events */
    int n_ev_devs;
    nvmlDevice_t *ev_devs; /* owned: handles at open, index = GPU index */
    bool *xid_on;          /* owned: Xid registered for GPU i */
    void *procs;           /* owned: process-list buffer, procs_cap entries of PROC_STRIDE */
    size_t procs_cap;
    char err[ALLOT_NVML_TEXT_MAX];
};

/* ---- shared helpers (nvml.c) ------------------------------------------------ */

/* "Unknown Error (NVML_ERROR_UNKNOWN)" for an NVML return code (static text). */
const char *nvml__rc_text(nvmlReturn_t rc);

/* Sets nv's last error text (and logs it at debug level). */
void nvml__set_err(struct nvml *nv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the failed call `call` with code rc as the last error; returns
 * the ALLOT_E* code it maps to (NOT_SUPPORTED, IN_USE: ALLOT_ESTATE;
 * INSUFFICIENT_RESOURCES: ALLOT_ENOSPC; NOT_FOUND: ALLOT_ENOENT; ...). */
int nvml__fail_call(struct nvml *nv, const char *call, nvmlReturn_t rc);

/* Adds a reason to g's health text and raises its verdict to `level`. */
void nvml__health_add(struct nvml_gpu *g, enum allot_nvml_health level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when the optional query `call` answered rc == success; otherwise
 * quiet for NOT_SUPPORTED/FUNCTION_NOT_FOUND, g->lost for GPU_IS_LOST,
 * and a degraded verdict naming the call for anything else. */
bool nvml__optional_ok(struct nvml_gpu *g, const char *call, nvmlReturn_t rc);

/* Handle of GPU `index` into *dev. Returns 0, ALLOT_ENOENT or ALLOT_EIO
 * (message set). */
int nvml__device(struct nvml *nv, int index, nvmlDevice_t *dev);

/* ---- MIG (nvml_mig.c) ---------------------------------------------------------- */

/* Lists the MIG instances of GPU g (handle dev), whose MIG mode is on,
 * into g->mig; sets ALLOT_NVML_F_MIG_LIST when they could be read. */
void nvml__read_mig_instances(struct nvml *nv, nvmlDevice_t dev, struct nvml_gpu *g);

static inline int64_t nvml__mib(unsigned long long bytes)
{
    return (int64_t)(bytes >> 20);
}

/* NVML's 0xFFFFFFFF "no instance" as -1 */
static inline int nvml__id_or_none(unsigned int v)
{
    return v == 0xFFFFFFFFu ? -1 : (int)v;
}

#endif
